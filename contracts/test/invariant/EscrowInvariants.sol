// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {ResolverRegistry} from "../../src/ResolverRegistry.sol";
import {Deal, DealState} from "../../src/interfaces/IEscrow.sol";
import {EscrowBase} from "../utils/EscrowBase.sol";
import {EscrowHandler} from "./EscrowHandler.sol";

/// @notice The invariants of escrow + registry as checks over a deployment and its handler.
///         EscrowInvariant.t.sol runs them under forge's random sequences; Mutants.t.sol runs
///         each against a deliberately broken contract and shows it failing.
abstract contract EscrowInvariants is EscrowBase {
    EscrowHandler internal handler;

    function _setUpSystem() internal {
        string memory ev = _read("consensus/vectors/escrow.json");
        _deploySystem();
        _registerResolvers(ev, 8);
        escrow.setBackend(
            vm.parseJsonBytes32(ev, ".deals[0].terms.backendId"),
            vm.parseJsonBytes32(ev, ".deals[0].terms.backendVersionHash"),
            true
        );
        handler = new EscrowHandler(escrow, registry, token, ev, BUYER, SELLER, UNBONDING);
    }

    /// @notice The escrow holds exactly the amounts of live deals, their locked DA bonds and the
    ///         parties' unclaimed credits.
    function checkEscrowConservesFunds() public view {
        uint256 owed;
        for (uint256 k; k < handler.dealCount(); ++k) {
            Deal memory d = escrow.deal(handler.dealIds(k));
            if (d.state == DealState.Held) owed += d.amount;
            if (d.state == DealState.Delivered || d.state == DealState.Disputed) {
                owed += uint256(d.amount) + d.sellerBond;
            }
        }
        owed += escrow.claimable(BUYER, token) + escrow.claimable(SELLER, token);
        require(token.balanceOf(address(escrow)) == owed, "escrow balance != live deals");
        require(escrow.liabilities(token) == owed, "liabilities != live deals + credits");
    }

    /// @notice The registry holds exactly the resolvers' remaining bonds and unclaimed
    ///         slashing proceeds.
    function checkRegistryConservesBonds() public view {
        uint256 bonds;
        for (uint256 i; i < registry.resolverCount(); ++i) {
            (ResolverRegistry.Resolver memory r,,) = registry.resolverInfo(i);
            bonds += r.bond;
        }
        bonds += registry.claimable(address(handler)) + registry.claimable(SINK);
        require(token.balanceOf(address(registry)) == bonds, "registry balance != bonds");
    }

    /// @notice No deal is settled twice, and a deal is resolved exactly when settled once.
    function checkNoDoubleSettlement() public view {
        for (uint256 k; k < handler.dealCount(); ++k) {
            require(handler.settlements(k) <= 1, "settled twice");
            Deal memory d = escrow.deal(handler.dealIds(k));
            require((handler.settlements(k) == 1) == (d.state == DealState.Resolved), "state");
        }
    }

    /// @notice Resolvers 0, 1 (only signed Reproduced) and 6, 7 (only Failed) are never slashed,
    ///         whatever evidence is submitted (the handler names them on the side they did not
    ///         sign, with forged and cancelling aggregates).
    function checkHonestNeverSlashed() public view {
        uint256[4] memory honest = [uint256(0), 1, 6, 7];
        for (uint256 j; j < 4; ++j) {
            (ResolverRegistry.Resolver memory r,,) = registry.resolverInfo(honest[j]);
            require(!r.slashed, "honest resolver slashed");
        }
    }

    /// @notice Every successful `resolve` had a 2/3 quorum of its pinned epoch (counted by the
    ///         handler from memberships and stakes) and came before the resolve deadline.
    function checkSettlementsNeedQuorumBeforeDeadline() public view {
        require(!handler.badSettlement(), "settled without a quorum or after the deadline");
    }

    /// @notice Two conflicting quorum certificates for a deal cost at least
    ///         (2 * threshold - 100 %) of the epoch's stake.
    function checkAccountableSafety() public view {
        for (uint256 k; k < handler.dealCount(); ++k) {
            if (!handler.quorumsSlashed(k)) continue;
            (, uint256 total,,) = registry.epochInfo(8);
            uint256 slashedStake;
            for (uint256 i; i < 8; ++i) {
                (ResolverRegistry.Resolver memory r, ResolverRegistry.Membership memory m,) =
                    registry.resolverInfo(i);
                if (r.slashed) slashedStake += m.stake;
            }
            require(
                slashedStake * THRESHOLD_DEN >= total * (2 * THRESHOLD_NUM - THRESHOLD_DEN),
                "accountable safety"
            );
        }
    }

    /// @notice A bond leaves only after every dispute its resolver could sign for is past its
    ///         slashing window: at least `maxResolveWindow + slashingWindow` after the end of
    ///         the resolver's last epoch (the design's rule, not `withdraw`'s own formula).
    function checkExitsNeverEscapeSlashing() public view {
        for (uint256 i; i < 8; ++i) {
            uint256 at = handler.withdrawnAt(i);
            if (at == 0) continue;
            (, ResolverRegistry.Membership memory m,) = registry.resolverInfo(i);
            require(m.leftEpoch != 0, "withdrew while a member");
            (,,, uint256 endedAt) = registry.epochInfo(m.leftEpoch);
            require(
                at >= endedAt + MAX_RESOLVE + SLASHING_WINDOW, "withdrew within a slashing window"
            );
        }
    }
}
