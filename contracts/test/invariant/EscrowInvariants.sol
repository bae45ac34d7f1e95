// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {RegistrySlashing} from "../../src/RegistrySlashing.sol";
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
        // Before any committee exists the owner's settings apply at once.
        RegistrySlashing(address(registry)).setGasRefundCap(token, 0.1e18);
        _registerResolvers(ev, 8);
        escrow.setBackend(
            vm.parseJsonBytes32(ev, ".deals[0].terms.backendId"),
            vm.parseJsonBytes32(ev, ".deals[0].terms.backendVersionHash"),
            true
        );
        handler = new EscrowHandler(escrow, registry, token, ev, BUYER, SELLER, UNBONDING);
    }

    /// @notice The escrow holds exactly the amounts of live deals, their locked DA bonds, the
    ///         fees and challenge bonds of open disputes, the parties' unclaimed credits
    ///         (buyer, seller, the submitter's gas refunds, whistleblower and sink shares) and
    ///         the unclaimed rewards; those cover every resolver's pending rewards, with a
    ///         rounding remainder under one wei per (settling resolve x signer) and per claim.
    function checkEscrowConservesFunds() public view {
        uint256 owed;
        for (uint256 k; k < handler.dealCount(); ++k) {
            Deal memory d = escrow.deal(handler.dealIds(k));
            if (d.state == DealState.Held) owed += d.amount;
            if (d.state == DealState.Delivered || d.state == DealState.Disputed) {
                owed += uint256(d.amount) + d.sellerBond + d.resolverFee;
            }
            if (d.state == DealState.Disputed) owed += uint256(d.resolverFee) + d.challengeBond;
        }
        owed += escrow.claimable(BUYER, token) + escrow.claimable(SELLER, token);
        owed += escrow.claimable(address(handler), token) + escrow.claimable(SINK, token);
        uint256 pool = handler.rewardsAccrued() - handler.rewardsOut();
        owed += pool;
        require(token.balanceOf(address(escrow)) == owed, "escrow balance != live deals");
        require(escrow.liabilities(token) == owed, "liabilities != live deals + credits");
        uint256 pending;
        for (uint256 i; i < 8; ++i) {
            pending += handler.pendingOf(i);
        }
        require(pending <= pool, "rewards owed exceed the reward pool");
        uint256 dust = pool - pending;
        require(
            dust
                <= 8 * handler.accruals() + handler.calls("claim-rewards") + handler.calls("sweep"),
            "reward remainder above rounding"
        );
    }

    /// @notice No resolver is paid (or owed) rewards beyond its share of the certificates it
    ///         signed: a resolver outside every settling certificate's signer set gets nothing.
    ///         A slashed resolver's rewards never reach its operator (only the sweep moves
    ///         them, to the whistleblower and the sink).
    function checkRewardsOnlyToSigners() public view {
        for (uint256 i; i < 8; ++i) {
            require(
                handler.rewardsPaid(i) + handler.pendingOf(i) <= handler.earnedBound(i),
                "paid beyond what it signed"
            );
        }
        require(!handler.slashedPaid(), "a slashed resolver's rewards were paid to it");
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

    /// @notice Accountable safety, over every pair of conflicting certificates the handler saw
    ///         accepted (by `verifyCertificate` or by a settling `resolve`; one deal, the two
    ///         sides, each verified against any epoch the registry produced):
    ///         1. every resolver that signed both is slashable: `slashEquivocation` accepts the
    ///            evidence the two certificates make and takes its bond (tried on a state
    ///            snapshot, rolled back at the end), unless its bond left no earlier than the
    ///            slashing window after the later acceptance;
    ///         2. two certificates of the same epoch share at least (2 * threshold - 1) of
    ///            that epoch's stake, so someone is slashable;
    ///         3. certificates of different epochs may share nobody (a deal pins one epoch);
    ///            then at most one of them settled a deal.
    function checkAccountableSafety() public {
        uint256 n = handler.certCount();
        if (n < 2) return;
        uint256 snapshot = vm.snapshotState();
        for (uint256 a; a < n; ++a) {
            for (uint256 b = a + 1; b < n; ++b) {
                if (handler.conflicting(a, b)) _checkConflict(a, b);
            }
        }
        vm.revertToState(snapshot);
    }

    function _checkConflict(uint256 a, uint256 b) internal {
        EscrowHandler.Cert memory x = handler.cert(a);
        EscrowHandler.Cert memory y = handler.cert(b);
        uint256 both = x.signers & y.signers;
        if (x.epoch == y.epoch) {
            (, uint256 total,,) = registry.epochInfo(x.epoch);
            require(
                _stakeOf(both) * THRESHOLD_DEN >= total * (2 * THRESHOLD_NUM - THRESHOLD_DEN),
                "conflicting quorums share less than 2t-1 of the stake"
            );
        }
        bool unslashed;
        for (uint256 i; i < 8; ++i) {
            if (both & (1 << i) == 0) continue;
            (ResolverRegistry.Resolver memory r,,) = registry.resolverInfo(i);
            if (!r.slashed) unslashed = true;
        }
        if (unslashed) {
            // Refused evidence leaves an equivocator unslashed: caught below.
            try RegistrySlashing(address(registry))
                .slashEquivocation(
                    escrow.domainSeparator(), handler.evidence(a), handler.evidence(b)
                ) {}
                catch {}
        }
        uint256 later = x.acceptedAt > y.acceptedAt ? x.acceptedAt : y.acceptedAt;
        uint256 taken;
        for (uint256 i; i < 8; ++i) {
            if (both & (1 << i) == 0) continue;
            (ResolverRegistry.Resolver memory r,,) = registry.resolverInfo(i);
            if (r.slashed && !r.withdrawn) {
                ++taken;
            } else {
                require(
                    r.withdrawn && handler.withdrawnAt(i) >= later + SLASHING_WINDOW,
                    "an equivocator is not slashable"
                );
            }
        }
        require(taken != 0 || !(x.settled && y.settled), "conflicting settlements, none slashable");
    }

    /// @dev Stake of the resolvers in `mask` (a member's stake never changes).
    function _stakeOf(uint256 mask) internal view returns (uint256 stake) {
        for (uint256 i; i < 8; ++i) {
            if (mask & (1 << i) == 0) continue;
            (, ResolverRegistry.Membership memory m,) = registry.resolverInfo(i);
            stake += m.stake;
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
