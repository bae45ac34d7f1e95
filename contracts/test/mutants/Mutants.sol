// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Escrow} from "../../src/Escrow.sol";
import {EscrowFees} from "../../src/EscrowFees.sol";
import {RegistrySlashing} from "../../src/RegistrySlashing.sol";
import {ResolverRegistry} from "../../src/ResolverRegistry.sol";
import {Deal, DealState, Settlement} from "../../src/interfaces/IEscrow.sol";
import {Evidence, RegistryParameters} from "../../src/interfaces/IResolverRegistry.sol";
import {IResolverRegistry} from "../../src/interfaces/IResolverRegistry.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

// Deliberately broken contracts (test-only). test/invariant/Mutants.t.sol shows that each one
// makes at least one invariant of test/invariant/EscrowInvariants.sol fail, so the invariants
// can fail at all.

/// @notice Mutant: `slashEquivocation` does not verify the evidence.
contract NoEvidenceCheckSlashing is RegistrySlashing {
    constructor(RegistryParameters memory p) RegistrySlashing(p) {}

    function _verifyEvidence(Evidence calldata, bytes32) internal view override {}
}

contract NoEvidenceCheckRegistry is ResolverRegistry {
    constructor(RegistryParameters memory p) ResolverRegistry(p) {}

    function _deploySlashing(RegistryParameters memory p) internal override returns (address) {
        return address(new NoEvidenceCheckSlashing(p));
    }
}

/// @notice Mutant: no quorum threshold (any non-empty committee's certificate passes).
contract NoThresholdRegistry is ResolverRegistry {
    constructor(RegistryParameters memory p) ResolverRegistry(p) {}

    function _meetsThreshold(uint256, uint256 totalStake) internal pure override returns (bool) {
        return totalStake != 0;
    }
}

/// @notice Mutant: the threshold is one half, not more than half (two disjoint halves of a
///         committee are both quorums: a conflict with nobody to slash).
contract HalfThresholdRegistry is ResolverRegistry {
    constructor(RegistryParameters memory p) ResolverRegistry(p) {}

    function _meetsThreshold(uint256 signedStake, uint256 totalStake)
        internal
        pure
        override
        returns (bool)
    {
        return totalStake != 0 && signedStake <= totalStake && 2 * signedStake >= totalStake;
    }
}

/// @notice Mutant: evidence counts only against the current committee (once an exit or a
///         slash starts a new epoch, the equivocators of the earlier one are out of reach).
contract CurrentEpochEvidenceSlashing is RegistrySlashing {
    constructor(RegistryParameters memory p) RegistrySlashing(p) {}

    function _verifyEvidence(Evidence calldata e, bytes32 digest) internal view override {
        uint256 current = _epochs.length - 1;
        if (e.epoch != current) revert UnknownEpoch(e.epoch, current);
        super._verifyEvidence(e, digest);
    }
}

contract CurrentEpochEvidenceRegistry is ResolverRegistry {
    constructor(RegistryParameters memory p) ResolverRegistry(p) {}

    function _deploySlashing(RegistryParameters memory p) internal override returns (address) {
        return address(new CurrentEpochEvidenceSlashing(p));
    }
}

/// @notice Mutant: bonds leave as soon as an exit is requested.
contract NoUnbondingRegistry is ResolverRegistry {
    constructor(RegistryParameters memory p) ResolverRegistry(p) {}

    function _withdrawableAt(Resolver storage r) internal view override returns (uint256) {
        return r.exitRequestedAt;
    }
}

/// @notice Mutant: certificates count after the resolve deadline.
contract NoDeadlineEscrow is Escrow {
    constructor(IResolverRegistry registry_, address owner_) Escrow(registry_, owner_) {}

    function _checkResolveDeadline(bytes32, Deal storage) internal view override {}
}

/// @notice Mutant: every credit is booked twice.
contract DoubleCreditEscrow is Escrow {
    constructor(IResolverRegistry registry_, address owner_) Escrow(registry_, owner_) {}

    function _credit(address account, IERC20 token, uint256 amount) internal override {
        super._credit(account, token, 2 * amount);
    }
}

/// @notice Mutant: settling credits the parties but never marks the deal resolved, so a
///         resolved dispute can be resolved again or timed out afterwards.
contract UnmarkedSettlementEscrow is Escrow {
    constructor(IResolverRegistry registry_, address owner_) Escrow(registry_, owner_) {}

    function _settle(bytes32 dealId, Deal storage d, Settlement how) internal override {
        DealState before = d.state;
        super._settle(dealId, d, how);
        d.state = before;
    }
}

/// @notice Mutant: non-signers are not excluded from a certificate's fee (every member of the
///         epoch is paid as if it had signed).
contract PayNonSignersFees is EscrowFees {
    constructor(IResolverRegistry registry_) EscrowFees(registry_) {}

    function _exclude(IERC20, uint256, bytes32, uint256, uint256) internal override {}
}

contract PayNonSignersEscrow is Escrow {
    constructor(IResolverRegistry registry_, address owner_) Escrow(registry_, owner_) {}

    function _deployFees(IResolverRegistry registry_) internal override returns (address) {
        return address(new PayNonSignersFees(registry_));
    }
}
