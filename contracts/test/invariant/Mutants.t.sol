// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {ResolverRegistry} from "../../src/ResolverRegistry.sol";
import {
    CurrentEpochEvidenceRegistry,
    DoubleCreditEscrow,
    HalfThresholdRegistry,
    NoDeadlineEscrow,
    NoEvidenceCheckRegistry,
    NoThresholdRegistry,
    NoUnbondingRegistry,
    PayNonSignersEscrow,
    UnmarkedSettlementEscrow
} from "../mutants/Mutants.sol";
import {EscrowInvariants} from "./EscrowInvariants.sol";

/// @notice Each invariant fails against a deliberately broken contract (issue 16: "tests that
///         cannot fail today"). A fixed handler sequence drives the mutant; the invariant check
///         must then revert. `ControlTest` runs the same sequences on the real contracts, where
///         every check passes. The mutants: evidence verification deleted, threshold deleted,
///         threshold lowered to one half, evidence only against the current epoch, resolve
///         deadline deleted, unbonding delay deleted, credits doubled, settlement not marked,
///         non-signers paid.
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

    /// @dev Deal 0 resolved, then timed out as well (the handler acts on any Disputed deal).
    function _settledTwice() internal {
        _settled();
        handler.timeoutRefund(0);
    }

    /// @dev `certify`'s epoch seed for `epoch` (the setup leaves epochs 1..8, epoch i holding
    ///      resolvers [0, i)).
    function _seed(uint256 epoch) internal pure returns (uint256) {
        return epoch - 1;
    }

    /// @dev Both full sides of deal 0 in epoch 8: Reproduced by 0..5, Failed by 2..7, each
    ///      6,000 of 8,000 (a quorum); 2..5 signed both.
    function _conflictingQuorums() internal {
        handler.certify(0, true, 0, _seed(8));
        handler.certify(0, false, 0, _seed(8));
    }

    /// @dev Disjoint halves of epoch 8: Reproduced by 0..3, Failed by 4..7 (4,000 each).
    function _disjointHalves() internal {
        handler.certify(0, true, 0x10f, _seed(8));
        handler.certify(0, false, 0x1f0, _seed(8));
    }

    /// @dev One signer per side in epoch 8: Reproduced by 0, Failed by 7.
    function _singleSigners() internal {
        handler.certify(0, true, 0x101, _seed(8));
        handler.certify(0, false, 0x180, _seed(8));
    }

    /// @dev Reproduced by all of epoch 2 (resolvers 0, 1) and Failed by 2..7 in epoch 8: both
    ///      quorums of their epochs, nobody signed both (a deal pins one of them).
    function _crossEpochConflict() internal {
        handler.certify(0, true, 0, _seed(2));
        handler.certify(0, false, 0, _seed(8));
    }

    /// @dev Deal 0 (fee 1e18 + 1) settled by Reproduced signers 0..5; 6 and 7 did not sign.
    ///      Signer 0 and non-signer 7 try to claim.
    function _nonSignersClaim() internal {
        _settled();
        handler.claimRewards(0);
        handler.claimRewards(7);
    }

    /// @dev Then equivocator 2 exits and withdraws at once (handler.withdraw(9) does not wait).
    function _conflictThenEarlyWithdraw() internal {
        _conflictingQuorums();
        handler.requestExit(4);
        handler.withdraw(9);
    }
}

contract ControlTest is MutantScripts {
    function testRealContractsPayOnlySigners() public {
        _nonSignersClaim();
        require(handler.calls("claim-rewards") == 1, "signer 0 claimed");
        checkRewardsOnlyToSigners();
        checkEscrowConservesFunds();
    }

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

    function testRealContractsPassAccountableSafetyScripts() public {
        _disjointHalves();
        _singleSigners();
        require(handler.calls("certify-refused") == 4, "halves and single signers refused");
        _crossEpochConflict();
        _conflictThenEarlyWithdraw();
        require(handler.calls("certify") == 4, "quorums of epochs 2 and 8 accepted");
        require(handler.certCount() == 3, "the repeated Failed certificate recorded once");
        require(handler.calls("withdraw") == 0, "no early withdrawal");
        // Epoch 9 (without resolver 2) is current; the epoch-8 conflict is still slashable.
        require(registry.currentEpoch() == 9, "exit started an epoch");
        checkAccountableSafety();
        // The check slashed 2..5 only on a snapshot.
        (ResolverRegistry.Resolver memory r,,) = registry.resolverInfo(2);
        require(!r.slashed && r.bond == BOND, "the check rolled back its slashing");
        // A settled deal among the recorded certificates, and its conflict slashed for real.
        _settled();
        require(handler.certCount() == 4, "settling certificate recorded");
        checkAccountableSafety();
        handler.slashRecorded(6, 0); // certificate 2 (Reproduced, epoch 8) and 1 (Failed)
        require(handler.calls("slash-recorded") == 1, "recorded conflict slashed");
        checkAccountableSafety();
        checkHonestNeverSlashed();
        checkRegistryConservesBonds();
    }

    function testRealContractsSettleOnce() public {
        _settledTwice();
        require(handler.settlements(0) == 1, "timeout found no open dispute");
        checkNoDoubleSettlement();
        checkEscrowConservesFunds();
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

    function testAccountableSafetyCatchesIt() public {
        _singleSigners();
        require(handler.calls("certify") == 2, "the mutant accepted both");
        vm.expectRevert(bytes("conflicting quorums share less than 2t-1 of the stake"));
        this.checkAccountableSafety();
    }
}

contract HalfThresholdMutantTest is MutantScripts {
    function _registryCode() internal pure override returns (bytes memory) {
        return type(HalfThresholdRegistry).creationCode;
    }

    function testAccountableSafetyCatchesIt() public {
        _disjointHalves();
        require(handler.calls("certify") == 2, "the mutant accepted both halves");
        vm.expectRevert(bytes("conflicting quorums share less than 2t-1 of the stake"));
        this.checkAccountableSafety();
    }
}

contract CurrentEpochEvidenceMutantTest is MutantScripts {
    function _registryCode() internal pure override returns (bytes memory) {
        return type(CurrentEpochEvidenceRegistry).creationCode;
    }

    /// @dev Passes while the conflict's epoch is current; fails once a later epoch exists (a
    ///      check reading only one epoch would not see it).
    function testAccountableSafetyCatchesIt() public {
        _conflictingQuorums();
        this.checkAccountableSafety();
        handler.requestExit(14); // resolver 7 exits: epoch 9 starts
        require(registry.currentEpoch() == 9, "exit started an epoch");
        vm.expectRevert(bytes("an equivocator is not slashable"));
        this.checkAccountableSafety();
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

    function testAccountableSafetyCatchesIt() public {
        _conflictThenEarlyWithdraw();
        require(handler.calls("withdraw") == 1, "the equivocator withdrew");
        vm.expectRevert(bytes("an equivocator is not slashable"));
        this.checkAccountableSafety();
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

contract UnmarkedSettlementMutantTest is MutantScripts {
    function _escrowCode() internal pure override returns (bytes memory) {
        return type(UnmarkedSettlementEscrow).creationCode;
    }

    function testNoDoubleSettlementCatchesIt() public {
        _settledTwice();
        require(handler.calls("resolve") == 1 && handler.calls("timeout") == 1, "both settled");
        vm.expectRevert(bytes("settled twice"));
        this.checkNoDoubleSettlement();
    }
}

contract PayNonSignersMutantTest is MutantScripts {
    function _escrowCode() internal pure override returns (bytes memory) {
        return type(PayNonSignersEscrow).creationCode;
    }

    function testRewardsOnlyToSignersCatchesIt() public {
        _nonSignersClaim();
        require(handler.rewardsPaid(7) > 0, "the mutant paid non-signer 7");
        vm.expectRevert(bytes("paid beyond what it signed"));
        this.checkRewardsOnlyToSigners();
    }
}
