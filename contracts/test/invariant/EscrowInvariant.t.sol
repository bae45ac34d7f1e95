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

    /// @notice A certificate with non-signers resolved less than the inclusion window before its
    ///         deadline is split after the deadline: the settlement itself was in time (a
    ///         sequence forge found: the handler judged the time after waiting out the window).
    function testHeldFeeSplitAfterTheDeadlineIsNoLateSettlement() public {
        handler.fund(556_038_341_467_612_152);
        handler.deliver(40_492_324_903_768_905_992_834_469_139_362_460);
        handler.fund(
            1_761_108_578_493_175_456_770_717_773_704_805_876_322_173_019_025_540_499_444_497_305_644_203_307
        );
        handler.challenge(9557);
        handler.releaseOrReclaim(108_511);
        handler.resolve(
            979_771_055_609_323_535_368_190_679_340_863_324_766_608,
            false,
            39_304_576_722_438_424_030_604_728_354_867
        );
        require(handler.calls("resolve") == 1, "resolved");
        checkSettlementsNeedQuorumBeforeDeadline();
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
