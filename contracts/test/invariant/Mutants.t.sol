// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {
    DoubleCreditEscrow,
    NoDeadlineEscrow,
    NoEvidenceCheckRegistry,
    NoThresholdRegistry,
    NoUnbondingRegistry
} from "../mutants/Mutants.sol";
import {EscrowInvariants} from "./EscrowInvariants.sol";

/// @notice Each invariant fails against a deliberately broken contract (issue 16: "tests that
///         cannot fail today"). A fixed handler sequence drives the mutant; the invariant check
///         must then revert. `ControlTest` runs the same sequences on the real contracts, where
///         every check passes. The mutants: evidence verification deleted, threshold deleted,
///         resolve deadline deleted, unbonding delay deleted, credits doubled.
abstract contract MutantScripts is EscrowInvariants {
    function setUp() public {
        _setUpSystem();
    }

    /// @dev Deal 0 funded, delivered and challenged.
    function _disputeDeal0() internal {
        handler.fund(0);
        handler.deliver(0);
        handler.challenge(0);
    }

    /// @dev Evidence naming honest resolvers on the side they did not sign.
    function _forgedEvidence() internal {
        handler.slashForged(0, 0x3f, 0xfc, 0);
    }

    /// @dev A one-signer Reproduced certificate (1,000 of 8,000 stake).
    function _belowThreshold() internal {
        _disputeDeal0();
        handler.resolve(0, true, 0x101);
    }

    /// @dev The full Reproduced certificate, after the resolve deadline.
    function _late() internal {
        _disputeDeal0();
        handler.resolve(0, true, 0x200);
    }

    /// @dev Resolver 0 exits and withdraws at once (handler.withdraw(1) does not wait).
    function _earlyWithdraw() internal {
        handler.requestExit(0);
        handler.withdraw(1);
    }

    /// @dev A settled deal: the full certificate in time.
    function _settled() internal {
        _disputeDeal0();
        handler.resolve(0, true, 0);
    }
}

contract ControlTest is MutantScripts {
    function testRealContractsPassEveryScript() public {
        _forgedEvidence();
        checkHonestNeverSlashed();
        require(handler.calls("slash-forged-refused") == 1, "forged evidence refused");
        _belowThreshold();
        handler.resolve(0, true, 0x200);
        checkSettlementsNeedQuorumBeforeDeadline();
        require(handler.calls("resolve-refused") == 2, "both refused");
        _earlyWithdraw();
        checkExitsNeverEscapeSlashing();
        require(handler.calls("withdraw") == 0, "no early withdrawal");
        handler.timeoutRefund(0);
        checkEscrowConservesFunds();
        checkRegistryConservesBonds();
        checkNoDoubleSettlement();
    }
}

contract NoEvidenceCheckMutantTest is MutantScripts {
    function _registryCode() internal pure override returns (bytes memory) {
        return type(NoEvidenceCheckRegistry).creationCode;
    }

    function testHonestNeverSlashedCatchesIt() public {
        _forgedEvidence();
        vm.expectRevert(bytes("honest resolver slashed"));
        this.checkHonestNeverSlashed();
    }
}

contract NoThresholdMutantTest is MutantScripts {
    function _registryCode() internal pure override returns (bytes memory) {
        return type(NoThresholdRegistry).creationCode;
    }

    function testSettlementsNeedQuorumCatchesIt() public {
        _belowThreshold();
        require(handler.calls("resolve") == 1, "the mutant settled");
        vm.expectRevert(bytes("settled without a quorum or after the deadline"));
        this.checkSettlementsNeedQuorumBeforeDeadline();
    }
}

contract NoDeadlineMutantTest is MutantScripts {
    function _escrowCode() internal pure override returns (bytes memory) {
        return type(NoDeadlineEscrow).creationCode;
    }

    function testSettlementsBeforeDeadlineCatchesIt() public {
        _late();
        vm.expectRevert(bytes("settled without a quorum or after the deadline"));
        this.checkSettlementsNeedQuorumBeforeDeadline();
    }
}

contract NoUnbondingMutantTest is MutantScripts {
    function _registryCode() internal pure override returns (bytes memory) {
        return type(NoUnbondingRegistry).creationCode;
    }

    function testExitsNeverEscapeSlashingCatchesIt() public {
        _earlyWithdraw();
        vm.expectRevert(bytes("withdrew within a slashing window"));
        this.checkExitsNeverEscapeSlashing();
    }
}

contract DoubleCreditMutantTest is MutantScripts {
    function _escrowCode() internal pure override returns (bytes memory) {
        return type(DoubleCreditEscrow).creationCode;
    }

    function testEscrowConservesFundsCatchesIt() public {
        _settled();
        vm.expectRevert(bytes("escrow balance != live deals"));
        this.checkEscrowConservesFunds();
    }
}
