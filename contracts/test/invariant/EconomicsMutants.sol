// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Escrow} from "../../src/Escrow.sol";
import {EscrowFees} from "../../src/EscrowFees.sol";
import {ResolverRegistry} from "../../src/ResolverRegistry.sol";
import {Deal, Settlement} from "../../src/interfaces/IEscrow.sol";
import {IResolverRegistry, RegistryParameters} from "../../src/interfaces/IResolverRegistry.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

// Deliberately broken contracts (test-only) that keep every total: only who is paid changes.
// EconomicsInvariant.t.sol's campaign must kill each of them through the per-party ghost
// accounting (the payout table of ECONOMICS.md).

/// @notice Mutant: on Reproduced the challenge bond goes back to the buyer, not to the seller.
contract BondToBuyerOnReproducedEscrow is Escrow {
    constructor(IResolverRegistry registry_, address owner_) Escrow(registry_, owner_) {}

    function _settle(bytes32 dealId, Deal storage d, Settlement how) internal override {
        super._settle(dealId, d, how);
        uint256 bond = d.challengeBond;
        if (how != Settlement.Released || d.challengedAt == 0 || bond == 0) return;
        claimable[d.seller][d.token] -= bond;
        claimable[d.buyer][d.token] += bond;
    }
}

/// @notice Mutant: on Failed the seller's DA bond is forfeited to the buyer.
contract DABondToBuyerOnFailedEscrow is Escrow {
    constructor(IResolverRegistry registry_, address owner_) Escrow(registry_, owner_) {}

    function _settle(bytes32 dealId, Deal storage d, Settlement how) internal override {
        super._settle(dealId, d, how);
        uint256 bond = d.sellerBond;
        if (how != Settlement.Refunded || bond == 0) return;
        IERC20 token = d.token;
        claimable[d.seller][token] -= bond;
        claimable[d.buyer][token] += bond;
    }
}

/// @notice Mutant: rewards per head, not by stake: every resolver is paid as if it held the
///         minimum bond (equal shares of every certificate it signed, whatever its stake).
contract PerHeadRewardsRegistry is ResolverRegistry {
    constructor(RegistryParameters memory p) ResolverRegistry(p) {}

    function rewardInfo(uint256 resolver)
        external
        view
        override
        returns (address operator, uint256 stake, uint256 joined, uint256 left, bool slashed)
    {
        Resolver storage r = _resolvers[resolver];
        Membership storage m = _memberships[resolver];
        return (r.operator, minimumBond, m.joinedEpoch, m.leftEpoch, r.slashed);
    }
}

/// @notice Mutant: when `includeSigners` proves the last left-out member and so splits the
///         fee, the submitter's refund is credited to whoever sent the proof.
contract IncluderTakesRefundFees is EscrowFees {
    constructor(IResolverRegistry registry_) EscrowFees(registry_) {}

    function _credit(address account, IERC20 token, uint256 amount) internal override {
        if (msg.sig == EscrowFees.includeSigners.selector) account = msg.sender;
        super._credit(account, token, amount);
    }
}

contract IncluderTakesRefundEscrow is Escrow {
    constructor(IResolverRegistry registry_, address owner_) Escrow(registry_, owner_) {}

    function _deployFees(IResolverRegistry registry_) internal override returns (address) {
        return address(new IncluderTakesRefundFees(registry_));
    }
}
