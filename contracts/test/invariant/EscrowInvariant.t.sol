// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {EscrowInvariants} from "./EscrowInvariants.sol";

/// @notice Invariants of escrow + registry under random handler sequences (fund / deliver /
///         challenge / resolve, also late and below threshold / certify one side or equivocate
///         on both, any epochs / timeout / release / reclaim / claim / slash, any epochs, also
///         forged or from recorded certificates / exit / withdraw / warp) on real BLS vectors.
///         After every run the handler finishes every open dispute (a quorum side must settle,
///         else it times out) and the call counters must show it.
contract EscrowInvariantTest is EscrowInvariants {
    function setUp() public {
        _setUpSystem();
    }

    /// @dev Read by forge's invariant runner: only the handler is called.
    function targetContracts() public view returns (address[] memory targets) {
        targets = new address[](1);
        targets[0] = address(handler);
    }

    function invariant_escrowConservesFunds() public view {
        checkEscrowConservesFunds();
    }

    function invariant_registryConservesBonds() public view {
        checkRegistryConservesBonds();
    }

    function invariant_rewardsOnlyToSigners() public view {
        checkRewardsOnlyToSigners();
    }

    function invariant_noDoubleSettlement() public view {
        checkNoDoubleSettlement();
    }

    function invariant_honestNeverSlashed() public view {
        checkHonestNeverSlashed();
    }

    function invariant_settlementsNeedQuorumBeforeDeadline() public view {
        checkSettlementsNeedQuorumBeforeDeadline();
    }

    function invariant_accountableSafety() public {
        checkAccountableSafety();
    }

    function invariant_exitsNeverEscapeSlashing() public view {
        checkExitsNeverEscapeSlashing();
    }

    /// @notice Every challenged deal ends: finishing the run settles or times out each open
    ///         dispute, and settlements (resolve + timeout + cancel) account for every challenge.
    function afterInvariant() public {
        handler.finish();
        checkNoDoubleSettlement();
        checkEscrowConservesFunds();
        checkRewardsOnlyToSigners();
        checkAccountableSafety();
        require(
            handler.calls("resolve") + handler.calls("timeout") + handler.calls("cancelled")
                == handler.calls("challenge"),
            "a challenged deal did not settle"
        );
    }
}
