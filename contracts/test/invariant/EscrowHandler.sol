// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Escrow} from "../../src/Escrow.sol";
import {EscrowFees} from "../../src/EscrowFees.sol";
import {RegistrySlashing} from "../../src/RegistrySlashing.sol";
import {ResolverRegistry} from "../../src/ResolverRegistry.sol";
import {Deal, DealState, Terms} from "../../src/interfaces/IEscrow.sol";
import {Evidence} from "../../src/interfaces/IResolverRegistry.sol";
import {VerdictCommitment} from "../../src/libraries/VerdictHash.sol";
import {TestToken} from "../mocks/TestToken.sol";
import {Vectors} from "../utils/Vectors.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice Drives the escrow and the registry with random but well-typed actions over the four
///         vector deals and eight vector resolvers, keeping ghost totals for the invariants.
///         Every certificate and evidence is an aggregate of real Rust-made partial signatures.
///         Every certificate the contracts accept (a settling `resolve`, or `verifyCertificate`
///         for any epoch the registry produced) is recorded, so the accountable-safety
///         invariant works on what was actually accepted.
contract EscrowHandler is Vectors {
    /// @notice A certificate the contracts accepted: deal, side (0 = Reproduced, 1 = Failed),
    ///         the epoch it was verified against, its signers (bit i: resolver i), when it was
    ///         last accepted and whether it settled its deal.
    struct Cert {
        uint8 deal;
        uint8 side;
        uint64 epoch;
        uint64 acceptedAt;
        uint16 signers;
        bool settled;
    }

    Escrow internal immutable escrow;
    ResolverRegistry internal immutable registry;
    TestToken internal immutable token;
    address internal immutable buyer;
    address internal immutable seller;
    uint256 internal immutable unbonding;

    uint256 internal constant DEALS = 4;
    uint256 internal constant RESOLVERS = 8;

    Terms[DEALS] internal terms;
    bytes32[DEALS] public dealIds;
    bytes32[DEALS] internal deliveryHashes;
    /// @dev [deal][0 = Reproduced, 1 = Failed]
    VerdictCommitment[2][DEALS] internal commitments;
    bytes[RESOLVERS][2][DEALS] internal partials;
    /// @dev Bound of distinct recorded certificates (keeps the pairwise check affordable; a
    ///      run rarely reaches it, and `calls["certify-unrecorded"]` counts when it does).
    uint256 internal constant MAX_CERTS = 32;

    // ghosts
    uint256[DEALS] public settlements;
    /// @dev A resolve succeeded without a quorum (computed here from the epoch's members and
    ///      stakes, not by the registry's rule) or after the deadline.
    bool public badSettlement;
    /// @dev When each resolver's bond left the registry (0: not withdrawn).
    uint256[RESOLVERS] public withdrawnAt;
    /// @dev Accepted certificates, distinct by (deal, side, epoch, signers).
    Cert[] internal _certs;
    mapping(bytes32 => uint256) internal _certIndexPlusOne;
    mapping(bytes32 => uint256) public calls;
    bytes public lastRefusal;

    // economics ghosts
    /// @dev Sum of the fees accrued to signers (`fee - submitter refund` of each resolve).
    uint256 public rewardsAccrued;
    /// @dev Rewards that left the reward pool: claims plus slashed sweeps.
    uint256 public rewardsOut;
    /// @dev Per resolver: an upper bound of what certificates it signed entitle it to,
    ///      `sum(ceil(toSigners * stake / signedStake))` over settling certificates it signed.
    uint256[RESOLVERS] public earnedBound;
    /// @dev Per resolver: rewards paid to its operator by `claimRewards`.
    uint256[RESOLVERS] public rewardsPaid;
    /// @dev A slashed resolver's rewards were paid to its operator.
    bool public slashedPaid;
    /// @dev Settling resolves so far (bounds the rounding remainder).
    uint256 public accruals;

    constructor(
        Escrow escrow_,
        ResolverRegistry registry_,
        TestToken token_,
        string memory ev,
        address buyer_,
        address seller_,
        uint256 unbonding_
    ) {
        (escrow, registry, token, buyer, seller, unbonding) =
        (escrow_, registry_, token_, buyer_, seller_, unbonding_);
        for (uint256 k; k < DEALS; ++k) {
            string memory d = _at(".deals", k);
            dealIds[k] = vm.parseJsonBytes32(ev, string.concat(d, ".dealId"));
            deliveryHashes[k] = vm.parseJsonBytes32(ev, string.concat(d, ".deliveryHash"));
            terms[k] = _terms(ev, d);
            // Fee-carrying terms (deal 1 keeps none; deal 2's fee is dust): the deal ids move,
            // and the commitments below are re-signed under them.
            terms[k].resolverFee = [uint256(1e18 + 1), 0, 7, 3e18][k];
            terms[k].challengeBond = [uint256(2e18), 0, 1e18, 0][k];
            bytes32 id = _dealIdOf(terms[k]);
            _rekeyed[dealIds[k]] = id;
            _resign[id] = true;
            dealIds[k] = id;
            for (uint256 o; o < 2; ++o) {
                string memory s = string.concat(d, o == 0 ? ".reproduced" : ".failed");
                commitments[k][o] = _commitment(ev, s);
                for (uint256 i; i < RESOLVERS; ++i) {
                    if ((o == 0 && i <= 5) || (o == 1 && i >= 2)) {
                        partials[k][o][i] = _partial(ev, s, i);
                    }
                }
            }
        }
    }

    function _state(uint256 k) internal view returns (DealState) {
        return escrow.deal(dealIds[k]).state;
    }

    function _operator(uint256 i) internal pure returns (address) {
        // forge-lint: disable-next-line(unsafe-typecast)
        return address(uint160(0x0e0000 + i)); // as EscrowBase registers them
    }

    /// @dev The first deal in `state`, scanning from `k`; DEALS if none. Actions pick their deal
    ///      this way so random sequences make progress through the phases.
    function _find(uint256 k, DealState state) internal view returns (uint256) {
        for (uint256 j; j < DEALS; ++j) {
            uint256 c = (k + j) % DEALS;
            if (_state(c) == state) return c;
        }
        return DEALS;
    }

    /// @dev Time only moves forward.
    function _warpTo(uint256 t) internal {
        if (t > block.timestamp) vm.warp(t);
    }

    // ------------------------------------------------------------------ actions

    function warp(uint256 seconds_) external {
        vm.warp(block.timestamp + (seconds_ % 4 hours) + 1);
        calls["warp"]++;
    }

    function fund(uint256 k) external {
        k = _find(k % DEALS, DealState.None);
        if (k == DEALS) return;
        (, uint256 stake) = registry.currentCommittee();
        if (stake < registry.minimumCommitteeStake()) return; // refused: CommitteeTooSmall
        token.mint(buyer, terms[k].amount);
        vm.startPrank(buyer);
        token.approve(address(escrow), terms[k].amount);
        require(escrow.fund(terms[k], "", "") == dealIds[k], "deal id");
        vm.stopPrank();
        calls["fund"]++;
    }

    function deliver(uint256 k) external {
        k = _find(k % DEALS, DealState.Held);
        if (k == DEALS) return;
        if (block.timestamp > escrow.deal(dealIds[k]).deliverDeadline) return;
        vm.warp(block.timestamp + 1);
        if (block.timestamp > escrow.deal(dealIds[k]).deliverDeadline) return;
        uint256 locked = terms[k].sellerBond + terms[k].resolverFee;
        token.mint(seller, locked);
        vm.startPrank(seller);
        token.approve(address(escrow), locked);
        escrow.deliver(dealIds[k], deliveryHashes[k], "");
        vm.stopPrank();
        calls["deliver"]++;
    }

    function challenge(uint256 k) external {
        k = _find(k % DEALS, DealState.Delivered);
        if (k == DEALS) return;
        vm.warp(block.timestamp + 1);
        if (block.timestamp >= escrow.deal(dealIds[k]).challengeDeadline) return;
        uint256 due = terms[k].resolverFee + terms[k].challengeBond;
        token.mint(buyer, due);
        vm.startPrank(buyer);
        token.approve(address(escrow), due);
        escrow.challenge(dealIds[k]);
        vm.stopPrank();
        calls["challenge"]++;
        // A committee below the minimum stake cancels the deal instead.
        if (_state(k) == DealState.Resolved) {
            settlements[k]++;
            calls["cancelled"]++;
        }
    }

    function _popcount(uint256 x) internal pure returns (uint256 c) {
        for (; x != 0; x &= x - 1) {
            ++c;
        }
    }

    /// @dev Aggregates the partials of side `o` by resolvers in `mask` that are members of
    ///      `epoch`; non-signers are the epoch's other members.
    function _aggregate(uint256 k, uint256 o, uint256 mask, uint256 epoch)
        internal
        view
        returns (uint256[] memory signers, uint256[] memory nonSigners, bytes memory sig)
    {
        uint256 members;
        for (uint256 i; i < RESOLVERS; ++i) {
            if (registry.isMember(i, epoch)) members |= 1 << i;
        }
        uint256 signing = members & mask & (o == 0 ? 0x3f : 0xfc);
        signers = new uint256[](_popcount(signing));
        nonSigners = new uint256[](_popcount(members & ~signing));
        (uint256 a, uint256 b) = (0, 0);
        for (uint256 i; i < RESOLVERS; ++i) {
            if (signing & (1 << i) != 0) {
                signers[a++] = i;
                sig = _addG2(sig, partials[k][o][i]);
            } else if (members & (1 << i) != 0) {
                nonSigners[b++] = i;
            }
        }
    }

    function _addG2(bytes memory a, bytes memory b) internal view returns (bytes memory) {
        if (a.length == 0) return b;
        (bool ok, bytes memory sum) = address(0x0d).staticcall(abi.encodePacked(a, b));
        require(ok && sum.length == 256, "G2ADD");
        return sum;
    }

    /// @dev Signed and total stake of a certificate, computed from the epoch's membership and
    ///      each resolver's stake (independently of the registry's threshold code).
    function _stakes(uint256 epoch, uint256[] memory nonSigners)
        internal
        view
        returns (uint256 signed, uint256 total)
    {
        return _stakes(epoch, nonSigners, false);
    }

    /// @dev As above; with `unslashedOnly`, over the epoch's members not slashed (a
    ///      certificate must also meet the threshold among those).
    function _stakes(uint256 epoch, uint256[] memory nonSigners, bool unslashedOnly)
        internal
        view
        returns (uint256 signed, uint256 total)
    {
        for (uint256 i; i < RESOLVERS; ++i) {
            if (!registry.isMember(i, epoch)) continue;
            if (unslashedOnly) {
                (ResolverRegistry.Resolver memory r,,) = registry.resolverInfo(i);
                if (r.slashed) continue;
            }
            (, ResolverRegistry.Membership memory m,) = registry.resolverInfo(i);
            total += m.stake;
            bool missing;
            for (uint256 j; j < nonSigners.length; ++j) {
                if (nonSigners[j] == i) missing = true;
            }
            if (!missing) signed += m.stake;
        }
    }

    /// @dev A certificate from a subset of one side's signers (every signer half of the time);
    ///      with bit 9 of `mask`, submitted after the resolve deadline. Below-threshold subsets
    ///      and late certificates must be refused: a success is checked here, from first
    ///      principles, and recorded in `badSettlement` if it had no quorum or was late.
    function resolve(uint256 k, bool reproduced, uint256 mask) external {
        k = _find(k % DEALS, DealState.Disputed);
        if (k == DEALS) return;
        calls["resolve-attempt"]++;
        Deal memory d = escrow.deal(dealIds[k]);
        if (mask & 0x200 != 0) _warpTo(uint256(d.resolveDeadline) + 1);
        if (mask & 0x100 == 0) mask = type(uint256).max;
        uint256 o = reproduced ? 0 : 1;
        (uint256[] memory signers, uint256[] memory non, bytes memory sig) =
            _aggregate(k, o, mask, d.epoch);
        if (signers.length == 0) return;
        uint256 before = _ownCredit();
        try escrow.resolve(commitments[k][o], non, sig) {
            // Judged at the resolve: the split of a held fee below waits out its window.
            bool late = block.timestamp > d.resolveDeadline;
            settlements[k]++;
            calls["resolve"]++;
            _record(k, o, d.epoch, signers, true);
            _distributeHeld(dealIds[k]);
            _accrued(d, signers, non, before);
            (uint256 signed, uint256 total) = _stakes(d.epoch, non);
            if (signed * 3 < total * 2 || late) {
                badSettlement = true;
            }
            // Nor without a quorum of the epoch's unslashed members.
            (signed, total) = _stakes(d.epoch, non, true);
            if (total == 0 || signed * 3 < total * 2) {
                badSettlement = true;
            }
        } catch (bytes memory reason) {
            lastRefusal = reason;
            calls["resolve-refused"]++;
        }
    }

    /// @dev A certificate with non-signers holds its fee for the inclusion window: wait it out
    ///      and split it (this handler was the submitter, so the refund is its credit).
    function _distributeHeld(bytes32 id) internal {
        (,,,, uint64 closesAt,) = escrow.held(id);
        if (closesAt == 0) return;
        _warpTo(uint256(closesAt) + 1);
        EscrowFees(address(escrow)).distributeFee(id);
    }

    function _ownCredit() internal view returns (uint256) {
        return escrow.claimable(address(this), IERC20(address(token)));
    }

    /// @dev Books a settling resolve's fee: what the submitter (this handler) was not credited
    ///      accrued to the signers; each signer's share of it bounds its entitlement.
    function _accrued(
        Deal memory d,
        uint256[] memory signers,
        uint256[] memory non,
        uint256 creditBefore
    ) internal {
        uint256 toSigners =
            uint256(d.resolverFee) - (_ownCredit() - creditBefore);
        rewardsAccrued += toSigners;
        ++accruals;
        (uint256 signed,) = _stakes(d.epoch, non);
        for (uint256 i; i < signers.length; ++i) {
            (, ResolverRegistry.Membership memory m,) = registry.resolverInfo(signers[i]);
            earnedBound[signers[i]] += (toSigners * m.stake + signed - 1) / signed;
        }
    }

    /// @dev Resolver `i`'s operator claims its rewards over every epoch so far, also after
    ///      exiting or withdrawing; a slashed one must be refused.
    function claimRewards(uint256 i) external {
        i %= RESOLVERS;
        uint256[] memory epochs = _allEpochs();
        (ResolverRegistry.Resolver memory r,,) = registry.resolverInfo(i);
        vm.prank(_operator(i));
        try EscrowFees(address(escrow))
            .claimRewards(IERC20(address(token)), i, epochs, _operator(i)) returns (
            uint256 amount
        ) {
            rewardsPaid[i] += amount;
            rewardsOut += amount;
            if (r.slashed) slashedPaid = true;
            calls["claim-rewards"]++;
        } catch {
            calls["claim-rewards-refused"]++;
        }
    }

    /// @dev Anyone forfeits a slashed resolver's rewards to the whistleblower and the sink.
    function sweepSlashed(uint256 i) external {
        i %= RESOLVERS;
        try EscrowFees(address(escrow))
            .sweepSlashedRewards(IERC20(address(token)), i, _allEpochs()) returns (
            uint256 amount
        ) {
            rewardsOut += amount;
            calls["sweep"]++;
        } catch {
            calls["sweep-refused"]++;
        }
    }

    function _allEpochs() internal view returns (uint256[] memory epochs) {
        epochs = new uint256[](registry.currentEpoch());
        for (uint256 e; e < epochs.length; ++e) {
            epochs[e] = e + 1;
        }
    }

    /// @notice Sum of resolver `i`'s pending rewards over every epoch.
    function pendingOf(uint256 i) public view returns (uint256 p) {
        for (uint256 e = 1; e <= registry.currentEpoch(); ++e) {
            p += EscrowFees(address(escrow)).pendingRewards(IERC20(address(token)), i, e);
        }
    }

    function timeoutRefund(uint256 k) external {
        k = _find(k % DEALS, DealState.Disputed);
        if (k == DEALS) return;
        _warpTo(uint256(escrow.deal(dealIds[k]).resolveDeadline) + 1);
        escrow.timeoutRefund(dealIds[k]);
        settlements[k]++;
        calls["timeout"]++;
    }

    function releaseOrReclaim(uint256 k) external {
        k %= DEALS;
        DealState s = _state(k);
        if (s == DealState.Delivered) {
            _warpTo(escrow.deal(dealIds[k]).challengeDeadline);
            escrow.release(dealIds[k]);
        } else if (s == DealState.Held) {
            _warpTo(uint256(escrow.deal(dealIds[k]).deliverDeadline) + 1);
            escrow.reclaim(dealIds[k]);
        } else {
            return;
        }
        settlements[k]++;
        calls["release-reclaim"]++;
    }

    /// @dev Evidence from any two subsets of the two sides of one deal, each from any epoch the
    ///      registry produced (picked by bits 16 and up of its mask). Slashing removes the
    ///      equivocators every quorum needs, so only a third of the calls act, to leave the
    ///      campaign room to resolve deals too.
    function slash(uint256 k, uint256 maskA, uint256 maskB) external {
        if (k % 3 != 0) return;
        k %= DEALS;
        Evidence memory a;
        Evidence memory b;
        (a.epoch, b.epoch) = (_anyEpoch(maskA >> 16), _anyEpoch(maskB >> 16));
        (a.signers,, a.signature) = _aggregate(k, 0, maskA, a.epoch);
        (b.signers,, b.signature) = _aggregate(k, 1, maskB, b.epoch);
        if (a.signers.length == 0 || b.signers.length == 0) return;
        (a.commitment, b.commitment) = (commitments[k][0], commitments[k][1]);
        try RegistrySlashing(address(registry)).slashEquivocation(escrow.domainSeparator(), a, b) {
            calls["slash"]++;
        } catch {
            calls["slash-refused"]++;
        }
    }

    /// @dev One of the epochs the registry produced so far, `[1, currentEpoch]`.
    function _anyEpoch(uint256 seed) internal view returns (uint256) {
        return 1 + seed % registry.currentEpoch();
    }

    /// @dev A certificate of one side of deal `k` by a subset of its signers (every signer
    ///      unless bit 8 of `mask` is set), for any epoch the registry produced so far
    ///      (`1 + epochSeed % currentEpoch()`), checked with `verifyCertificate` as a
    ///      third-party escrow would. Accepted certificates are recorded: two of them over
    ///      different sides of a deal are a conflict the accountable-safety invariant checks.
    function certify(uint256 k, bool reproduced, uint256 mask, uint256 epochSeed) external {
        _certify(k % DEALS, reproduced ? 0 : 1, mask, _anyEpoch(epochSeed));
    }

    /// @dev Both sides of deal `k` certified, as by a coalition that signs both: Reproduced in
    ///      the current epoch (bit 1 of `seed` clear) or any epoch, Failed in the same epoch
    ///      (bit 0 clear) or any epoch; each side by all its signers unless bits 8 and 9 of its
    ///      mask are set. Makes conflicts, within one epoch and across two, common in a run.
    function equivocate(uint256 k, uint256 maskA, uint256 maskB, uint256 seed) external {
        k %= DEALS;
        uint256 epochA = seed & 2 == 0 ? registry.currentEpoch() : _anyEpoch(seed >> 8);
        uint256 epochB = seed & 1 == 0 ? epochA : _anyEpoch(seed >> 128);
        calls["equivocate"]++;
        _certify(k, 0, maskA & 0x300 == 0x300 ? maskA : 0, epochA);
        _certify(k, 1, maskB & 0x300 == 0x300 ? maskB : 0, epochB);
    }

    function _certify(uint256 k, uint256 o, uint256 mask, uint256 epoch) internal {
        if (mask & 0x100 == 0) mask = type(uint256).max;
        (uint256[] memory signers, uint256[] memory non, bytes memory sig) =
            _aggregate(k, o, mask, epoch);
        if (signers.length == 0) return;
        calls["certify-attempt"]++;
        try registry.verifyCertificate(epoch, escrow.verdictDigest(commitments[k][o]), non, sig) {
            calls["certify"]++;
            _record(k, o, epoch, signers, false);
        } catch (bytes memory reason) {
            lastRefusal = reason;
            calls["certify-refused"]++;
        }
    }

    /// @dev Records an accepted certificate (again: marks it settled, moves `acceptedAt`).
    function _record(uint256 k, uint256 o, uint256 epoch, uint256[] memory signers, bool settled)
        internal
    {
        uint256 mask;
        for (uint256 i; i < signers.length; ++i) {
            mask |= 1 << signers[i];
        }
        bytes32 key = keccak256(abi.encode(k, o, epoch, mask));
        uint256 at = _certIndexPlusOne[key];
        if (at == 0) {
            if (_certs.length == MAX_CERTS) {
                calls["certify-unrecorded"]++;
                return;
            }
            _certs.push(
                Cert({
                    // forge-lint: disable-next-line(unsafe-typecast)
                    deal: uint8(k),
                    // forge-lint: disable-next-line(unsafe-typecast)
                    side: uint8(o),
                    // forge-lint: disable-next-line(unsafe-typecast)
                    epoch: uint64(epoch),
                    // forge-lint: disable-next-line(unsafe-typecast)
                    acceptedAt: uint64(block.timestamp),
                    // forge-lint: disable-next-line(unsafe-typecast)
                    signers: uint16(mask),
                    settled: settled
                })
            );
            _certIndexPlusOne[key] = _certs.length;
        } else {
            Cert storage c = _certs[at - 1];
            // forge-lint: disable-next-line(unsafe-typecast)
            c.acceptedAt = uint64(block.timestamp);
            c.settled = c.settled || settled;
        }
    }

    /// @dev Evidence that must be refused: signer lists naming resolvers on a side they never
    ///      signed (honest 0, 1 on Failed; 6, 7 on Reproduced) with the real aggregate of the
    ///      others (mode 0), another deal's aggregate (mode 1), or the point at infinity as the
    ///      signature (mode 2: the sum of a partial and its negation).
    function slashForged(uint256 k, uint256 maskA, uint256 maskB, uint256 mode) external {
        k %= DEALS;
        Evidence memory a;
        Evidence memory b;
        (a.signers,, a.signature) = _aggregate(k, 0, maskA, 8);
        (b.signers,, b.signature) = _aggregate(k, 1, maskB, 8);
        if (a.signers.length == 0 || b.signers.length == 0) return;
        mode %= 3;
        if (mode == 0) {
            // Claim every epoch-8 member on both sides; keep the honest signatures only.
            a.signers = _members(8, maskA | 0xc0);
            b.signers = _members(8, maskB | 0x03);
        } else if (mode == 1) {
            (,, a.signature) = _aggregate((k + 1) % DEALS, 0, maskA, 8);
        } else {
            b.signature = new bytes(256);
        }
        (a.commitment, b.commitment) = (commitments[k][0], commitments[k][1]);
        (a.epoch, b.epoch) = (8, 8);
        try RegistrySlashing(address(registry)).slashEquivocation(escrow.domainSeparator(), a, b) {
            calls["slash-forged-accepted"]++;
        } catch {
            calls["slash-forged-refused"]++;
        }
    }

    function _members(uint256 epoch, uint256 mask) internal view returns (uint256[] memory out) {
        uint256 n;
        for (uint256 i; i < RESOLVERS; ++i) {
            if (mask & (1 << i) != 0 && registry.isMember(i, epoch)) ++n;
        }
        out = new uint256[](n);
        n = 0;
        for (uint256 i; i < RESOLVERS; ++i) {
            if (mask & (1 << i) != 0 && registry.isMember(i, epoch)) out[n++] = i;
        }
    }

    /// @dev Two recorded conflicting certificates (the `a`-th and the next one from `b` that
    ///      conflicts with it), submitted as evidence. A third of the calls act, like `slash`.
    function slashRecorded(uint256 a, uint256 b) external {
        uint256 n = _certs.length;
        if (a % 3 != 0 || n < 2) return;
        a = (a / 3) % n;
        b %= n;
        for (uint256 j; j < n; ++j) {
            uint256 c = (b + j) % n;
            if (!conflicting(a, c)) continue;
            try RegistrySlashing(address(registry))
                .slashEquivocation(escrow.domainSeparator(), evidence(a), evidence(c)) {
                calls["slash-recorded"]++;
            } catch {
                calls["slash-recorded-refused"]++; // every signer of both already slashed
            }
            return;
        }
    }

    /// @dev The buyer or the seller withdraws its credits.
    function claim(bool ofBuyer) external {
        address who = ofBuyer ? buyer : seller;
        if (escrow.claimable(who, token) == 0) return;
        vm.prank(who);
        escrow.claim(token, who);
        calls["claim"]++;
    }

    /// @dev Half of the calls act (exits shrink the committee like slashing does).
    function requestExit(uint256 i) external {
        if (i % 2 != 0) return;
        i = (i / 2) % RESOLVERS;
        vm.prank(_operator(i));
        try registry.requestExit() {
            calls["exit"]++;
        } catch {}
    }

    /// @dev A quarter of the calls first wait until the unbonding delay is over (which also
    ///      lets every open dispute time out).
    function withdraw(uint256 i) external {
        bool wait = i % 4 == 0;
        i = (i / 4) % RESOLVERS;
        (ResolverRegistry.Resolver memory r,,) = registry.resolverInfo(i);
        if (wait && r.exitRequestedAt != 0) _warpTo(uint256(r.exitRequestedAt) + unbonding);
        vm.prank(_operator(i));
        try registry.withdraw() {
            withdrawnAt[i] = block.timestamp;
            calls["withdraw"]++;
        } catch {}
    }

    /// @dev Drives every open dispute to its end: the full certificate of a side that holds a
    ///      quorum of the pinned epoch, and of its unslashed members (by this handler's own
    ///      count), must settle; otherwise the deal must time out. Called once at the end of every invariant run.
    function finish() external {
        for (uint256 k; k < DEALS; ++k) {
            if (_state(k) != DealState.Disputed) continue;
            Deal memory d = escrow.deal(dealIds[k]);
            bool settled;
            for (uint256 o; o < 2 && !settled; ++o) {
                (uint256[] memory signers, uint256[] memory non, bytes memory sig) =
                    _aggregate(k, o, type(uint256).max, d.epoch);
                (uint256 signed, uint256 total) = _stakes(d.epoch, non);
                if (signers.length == 0 || signed * 3 < total * 2) continue;
                // Members slashed since the epoch started do not count either.
                (signed, total) = _stakes(d.epoch, non, true);
                if (total == 0 || signed * 3 < total * 2) continue;
                if (block.timestamp > d.resolveDeadline) break;
                uint256 before = _ownCredit();
                escrow.resolve(commitments[k][o], non, sig); // must not revert
                settlements[k]++;
                calls["resolve"]++;
                _record(k, o, d.epoch, signers, true);
                _distributeHeld(dealIds[k]);
                _accrued(d, signers, non, before);
                settled = true;
            }
            if (!settled) {
                _warpTo(uint256(d.resolveDeadline) + 1);
                escrow.timeoutRefund(dealIds[k]);
                settlements[k]++;
                calls["timeout"]++;
            }
        }
    }

    // ------------------------------------------------------------------ views for invariants

    function dealCount() external pure returns (uint256) {
        return DEALS;
    }

    /// @notice Number of distinct accepted certificates recorded.
    function certCount() external view returns (uint256) {
        return _certs.length;
    }

    /// @notice The `i`-th recorded certificate.
    function cert(uint256 i) external view returns (Cert memory) {
        return _certs[i];
    }

    /// @notice Whether recorded certificates `i` and `j` are over different commitments of one
    ///         deal (the two sides), whatever their epochs.
    function conflicting(uint256 i, uint256 j) public view returns (bool) {
        Cert storage a = _certs[i];
        Cert storage b = _certs[j];
        return a.deal == b.deal && a.side != b.side;
    }

    /// @notice Recorded certificate `i` as slashing evidence: its commitment, epoch, explicit
    ///         signers and their aggregate signature.
    function evidence(uint256 i) public view returns (Evidence memory e) {
        Cert storage c = _certs[i];
        e.commitment = commitments[c.deal][c.side];
        e.epoch = c.epoch;
        uint256 mask = c.signers;
        e.signers = new uint256[](_popcount(mask));
        uint256 n;
        for (uint256 r; r < RESOLVERS; ++r) {
            if (mask & (1 << r) == 0) continue;
            e.signers[n++] = r;
            e.signature = _addG2(e.signature, partials[c.deal][c.side][r]);
        }
    }
}
