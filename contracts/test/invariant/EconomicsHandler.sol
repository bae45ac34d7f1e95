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
import {Signer} from "../utils/Signer.sol";
import {Vectors} from "../utils/Vectors.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice Drives deals with fees, challenge bonds and DA bonds through every payout path, with
///         resolvers of unequal stake, two submitters, claims to addresses other than the
///         operator, claims tried by strangers, slashing by a whistleblower and sweeps by a
///         third party. A certificate that leaves members out holds its fee: left-out members
///         are proven later with their real partial signatures (`includeSigners`, also a
///         forged proof that must be refused), the fee is split after the window
///         (`distributeFee`) and a stranger settles exclusion entries (`settleExclusions`). The
///         registry's slashing proceeds are claimed by the whistleblower and flushed to the
///         sink. Keeps per-party ghost credits computed from the payout table of ECONOMICS.md
///         and from the slashing rule (not from the contracts' own arithmetic), every party's
///         tokens in and out, and per resolver the exact reward it earned by stake (scaled by
///         REWARD_PRECISION). Certificates are signed here with the vector resolvers' keys
///         (test/utils/Signer.sol) for each new deal id.
contract EconomicsHandler is Vectors {
    Escrow internal immutable escrow;
    ResolverRegistry internal immutable registry;
    TestToken internal immutable token;

    uint256 internal constant RESOLVERS = 8;
    uint256 internal constant MAX_DEALS = 12;
    uint256 internal constant P = 1e30;
    /// @notice The gas refund cap the base sets before any committee (so it applies at once).
    uint256 public constant CAP = 0.05e18;
    uint256 internal constant WHISTLEBLOWER_BPS = 1000;

    address public constant SELLER = address(uint160(0x05e11e01));
    address public constant SUBMITTER_A = address(uint160(0x5b0a));
    address public constant SUBMITTER_B = address(uint160(0x5b0b));
    address public constant WHISTLEBLOWER = address(uint160(0x3b10));
    address public constant SWEEPER = address(uint160(0x5ee9));
    address public constant STRANGER = address(uint160(0x57a9));
    address public constant SINK = address(uint160(0xdead));

    Terms internal base;
    bytes32 internal deliveryHash;
    VerdictCommitment[2] internal baseCommitments;

    bytes32[] public dealIds;
    mapping(bytes32 => Terms) internal _termsOf;

    // ghosts (payout table)
    /// @notice What each party must have been credited in total (claimed or still claimable).
    mapping(address => uint256) public credited;
    /// @notice What each party claimed.
    mapping(address => uint256) public claimed;
    /// @notice The sink's credits: slashed-reward shares plus the dust flushed to it.
    uint256 public sinkCredited;
    uint256 public sinkOut;
    /// @notice Per resolver: sum over certificates it signed of `inc * stake` (P-scaled).
    uint256[RESOLVERS] public earnedScaled;
    /// @notice Per resolver: claimed to its recipients, and swept after a slash.
    uint256[RESOLVERS] public rewardsPaid;
    uint256[RESOLVERS] public rewardsSwept;
    /// @notice Per resolver: claims and sweeps that paid (each floors under a wei).
    uint256[RESOLVERS] public payouts;
    bool public strangerPaid;
    bool public slashedPaid;
    mapping(bytes32 => uint256) public calls;

    /// @notice A certified dispute whose fee the escrow holds: who is in so far (a mask of
    ///         registry indices), their stake and the submitter the split pays.
    struct HeldFee {
        uint256 signers;
        uint256 signed;
        address submitter;
    }

    mapping(bytes32 => HeldFee) internal _held;
    bytes32[] public heldIds;
    /// @notice Set if a forged inclusion proof was accepted.
    bool public forgedIncluded;
    /// @notice Set if settling a resolver's exclusion entries changed what it is owed.
    bool public settleMovedPending;

    // ghosts (registry proceeds: the slashing rule)
    /// @notice Registry credits (`claimable` there) each party must have received: the
    ///         whistleblower's share of every bond it slashed, the rest to the sink.
    mapping(address => uint256) public registryCredited;
    /// @notice What each party withdrew from the registry (`claim`; the sink: `flushSink`).
    mapping(address => uint256) public registryClaimed;
    /// @notice Tokens minted to each party here and tokens it paid into the escrow.
    mapping(address => uint256) public minted;
    mapping(address => uint256) public paidIn;
    /// @notice Rewards sent to each `claimRewards` recipient.
    mapping(address => uint256) public rewardsReceived;

    constructor(Escrow escrow_, ResolverRegistry registry_, TestToken token_, string memory ev) {
        (escrow, registry, token) = (escrow_, registry_, token_);
        base = _terms(ev, ".deals[0]");
        deliveryHash = vm.parseJsonBytes32(ev, ".deals[0].deliveryHash");
        baseCommitments[0] = _vectorCommitment(ev, ".deals[0].reproduced");
        baseCommitments[1] = _vectorCommitment(ev, ".deals[0].failed");
    }

    // ------------------------------------------------------------------ helpers

    function _operator(uint256 i) internal pure returns (address) {
        // forge-lint: disable-next-line(unsafe-typecast)
        return address(uint160(0x0e0000 + i));
    }

    /// @dev The first deal in `state` from `k` on whose phase deadline (deliver, challenge,
    ///      resolve) is still ahead; with `late`, any deal in `state`.
    function _find(uint256 k, DealState state, bool late) internal view returns (bytes32) {
        uint256 n = dealIds.length;
        if (n == 0) return bytes32(0);
        k %= n;
        for (uint256 j; j < n; ++j) {
            bytes32 id = dealIds[(k + j) % n];
            Deal memory d = escrow.deal(id);
            if (d.state != state) continue;
            uint256 deadline = state == DealState.Held
                ? d.deliverDeadline
                : state == DealState.Delivered ? d.challengeDeadline : d.resolveDeadline;
            if (late || block.timestamp + 2 < deadline) return id;
        }
        return bytes32(0);
    }

    function _find(uint256 k, DealState state) internal view returns (bytes32) {
        return _find(k, state, false);
    }

    function _warpTo(uint256 t) internal {
        if (t > block.timestamp) vm.warp(t);
    }

    function _stake(uint256 i) internal view returns (uint256) {
        (, ResolverRegistry.Membership memory m,) = registry.resolverInfo(i);
        return m.stake;
    }

    function _slashed(uint256 i) internal view returns (bool) {
        (ResolverRegistry.Resolver memory r,,) = registry.resolverInfo(i);
        return r.slashed;
    }

    function _credit(address who, uint256 amount) internal {
        credited[who] += amount;
    }

    function _mint(address who, uint256 amount) internal {
        token.mint(who, amount);
        minted[who] += amount;
    }

    function _allEpochs() internal view returns (uint256[] memory epochs) {
        epochs = new uint256[](registry.currentEpoch());
        for (uint256 e; e < epochs.length; ++e) {
            epochs[e] = e + 1;
        }
    }

    /// @notice Resolver `i`'s pending rewards over every epoch.
    function pendingOf(uint256 i) public view returns (uint256 p) {
        for (uint256 e = 1; e <= registry.currentEpoch(); ++e) {
            p += EscrowFees(address(escrow)).pendingRewards(IERC20(address(token)), i, e);
        }
    }

    function dealCount() external view returns (uint256) {
        return dealIds.length;
    }

    // ------------------------------------------------------------------ actions

    function fund(uint256 feeSeed, uint256 bondSeed, uint256 daSeed) external {
        if (dealIds.length >= MAX_DEALS) return;
        Terms memory t = base;
        t.salt = bytes32(dealIds.length + 1);
        t.resolverFee = [uint256(0), 7, 1e18 + 1, 3e18, CAP - 1][feeSeed % 5];
        t.challengeBond = bondSeed % 3 == 0 ? 0 : 2e18 + bondSeed % 1000;
        t.sellerBond = daSeed % 3 == 0 ? 0 : 10e18 + daSeed % 1000;
        _mint(BUYER, t.amount);
        vm.startPrank(BUYER);
        token.approve(address(escrow), t.amount);
        bytes32 id = escrow.fund(t, "", "");
        vm.stopPrank();
        paidIn[BUYER] += t.amount;
        dealIds.push(id);
        _termsOf[id] = t;
        calls["fund"]++;
    }

    function deliver(uint256 k) external {
        bytes32 id = _find(k, DealState.Held);
        if (id == bytes32(0)) return;
        vm.warp(block.timestamp + 1);
        if (block.timestamp > escrow.deal(id).deliverDeadline) return;
        Terms storage t = _termsOf[id];
        uint256 locked = t.sellerBond + t.resolverFee;
        _mint(SELLER, locked);
        vm.startPrank(SELLER);
        token.approve(address(escrow), locked);
        escrow.deliver(id, deliveryHash, "");
        vm.stopPrank();
        paidIn[SELLER] += locked;
        calls["deliver"]++;
    }

    function challenge(uint256 k) external {
        bytes32 id = _find(k, DealState.Delivered);
        if (id == bytes32(0)) return;
        vm.warp(block.timestamp + 1);
        if (block.timestamp >= escrow.deal(id).challengeDeadline) return;
        Terms storage t = _termsOf[id];
        uint256 due = t.resolverFee + t.challengeBond;
        _mint(BUYER, due);
        vm.startPrank(BUYER);
        token.approve(address(escrow), due);
        escrow.challenge(id);
        vm.stopPrank();
        calls["challenge"]++;
        if (escrow.deal(id).state == DealState.Resolved) {
            // Cancelled: the amount back to the buyer, DA bond and deposit to the seller;
            // nothing taken.
            _credit(BUYER, t.amount);
            _credit(SELLER, t.sellerBond + t.resolverFee);
            calls["cancelled"]++;
        } else {
            paidIn[BUYER] += due;
        }
    }

    /// @dev The certificate of side `reproduced` by the members of the pinned epoch in `mask`
    ///      (all of them if its low byte is 0), sent by one of two submitters; only quorums
    ///      (also among the unslashed members) are sent. A held fee stays held when bit 8 of
    ///      `mask` is set (for `includeSigners` and `distributeHeld`); otherwise the window is
    ///      waited out and the fee split now.
    function resolve(uint256 k, bool reproduced, uint256 mask, bool bySubmitterB) external {
        bytes32 id = _find(k, DealState.Disputed);
        if (id == bytes32(0)) return;
        Deal memory d = escrow.deal(id);
        if (block.timestamp > d.resolveDeadline) return;
        if (mask & 0xff == 0) mask = 0xff;
        (uint256[] memory signers, uint256[] memory non, uint256 signed, uint256 total) =
            _split(d.epoch, mask);
        if (signers.length == 0 || !_quorum(d.epoch, signers, signed, total)) return;
        VerdictCommitment memory c = baseCommitments[reproduced ? 0 : 1];
        c.dealId = id;
        bytes memory sig = Signer.sign(signers, escrow.verdictDigest(c));
        address submitter = bySubmitterB ? SUBMITTER_B : SUBMITTER_A;
        vm.prank(submitter);
        escrow.resolve(c, non, sig);
        calls["resolve"]++;
        _bookSettlement(id, reproduced);
        (,,,, uint64 closesAt,) = escrow.held(id);
        if (closesAt == 0) {
            _bookFee(id, signers, signed, submitter);
            return;
        }
        // With non-signers the fee is held for the inclusion window.
        _held[id] = HeldFee({signers: mask & 0xff, signed: signed, submitter: submitter});
        heldIds.push(id);
        calls["held"]++;
        if (mask & 0x100 != 0) return;
        _warpTo(uint256(closesAt) + 1);
        EscrowFees(address(escrow)).distributeFee(id);
        _splitHeld(id);
    }

    /// @dev The first held deal from `k` on (0: none).
    function _findHeld(uint256 k) internal view returns (bytes32) {
        uint256 n = heldIds.length;
        if (n == 0) return bytes32(0);
        for (uint256 j; j < n; ++j) {
            bytes32 id = heldIds[(k + j) % n];
            (,,,, uint64 closesAt,) = escrow.held(id);
            if (closesAt != 0) return id;
        }
        return bytes32(0);
    }

    /// @dev Members of `epoch` in `mask`, ascending.
    function _members(uint256 epoch, uint256 mask) internal view returns (uint256[] memory m) {
        uint256 n;
        for (uint256 i; i < RESOLVERS; ++i) {
            if (mask & (1 << i) != 0 && registry.isMember(i, epoch)) ++n;
        }
        m = new uint256[](n);
        n = 0;
        for (uint256 i; i < RESOLVERS; ++i) {
            if (mask & (1 << i) != 0 && registry.isMember(i, epoch)) m[n++] = i;
        }
    }

    /// @dev Proves left-out members of a held fee with their own partial signatures over the
    ///      certified digest (a subset picked by `pick` of those still out), sent by a stranger
    ///      or by the first of them. With `forgeFirst`, a proof of the same positions signed by
    ///      the members already in is tried first and must be refused.
    function includeSigners(uint256 k, uint256 pick, bool forgeFirst) external {
        bytes32 id = _findHeld(k);
        if (id == bytes32(0)) return;
        (bytes32 digest,,,, uint64 closesAt,) = escrow.held(id);
        if (block.timestamp > closesAt) return;
        HeldFee storage h = _held[id];
        uint256 epoch = escrow.deal(id).epoch;
        (uint256[] memory proven, uint256 added, uint256 stake) = _pick(epoch, h.signers, pick);
        if (proven.length == 0) return;
        bytes memory bitmap = registry.signerBitmap(epoch, proven);
        if (forgeFirst) _tryForged(id, bitmap, Signer.sign(_members(epoch, h.signers), digest));
        vm.prank(pick % 2 == 0 ? STRANGER : _operator(proven[0]));
        EscrowFees(address(escrow)).includeSigners(id, bitmap, Signer.sign(proven, digest));
        h.signers |= added;
        h.signed += stake;
        calls["include"]++;
        (,,,, closesAt,) = escrow.held(id);
        if (closesAt == 0) {
            calls["include-split"]++;
            _splitHeld(id);
        }
    }

    /// @dev A non-empty subset (by `pick`) of the members of `epoch` outside `signers`: their
    ///      indices, as a mask, and their stake.
    function _pick(uint256 epoch, uint256 signers, uint256 pick)
        internal
        view
        returns (uint256[] memory proven, uint256 added, uint256 stake)
    {
        uint256[] memory out = _members(epoch, ~signers & 0xff);
        if (out.length == 0) return (proven, 0, 0);
        uint256 subset = pick % ((1 << out.length) - 1) + 1;
        for (uint256 j; j < out.length; ++j) {
            if (subset & (1 << j) == 0) continue;
            added |= 1 << out[j];
            stake += _stake(out[j]);
        }
        proven = _members(epoch, added);
    }

    /// @dev An inclusion proof whose signature is not the named members' must be refused.
    function _tryForged(bytes32 id, bytes memory bitmap, bytes memory forged) internal {
        vm.prank(STRANGER);
        try EscrowFees(address(escrow)).includeSigners(id, bitmap, forged) {
            forgedIncluded = true;
        } catch {}
    }

    /// @dev Splits a held fee after its window (a quarter of the calls wait for it; the others
    ///      act only once it closed): the members still out are excluded.
    function distributeHeld(uint256 k) external {
        bytes32 id = _findHeld(k);
        if (id == bytes32(0)) return;
        (,,,, uint64 closesAt,) = escrow.held(id);
        if (block.timestamp <= closesAt && k % 4 != 0) return;
        _warpTo(uint256(closesAt) + 1);
        vm.prank(STRANGER);
        EscrowFees(address(escrow)).distributeFee(id);
        calls["distribute"]++;
        _splitHeld(id);
    }

    /// @dev Books the split of a held fee over the signers proven by then.
    function _splitHeld(bytes32 id) internal {
        HeldFee storage h = _held[id];
        uint256[] memory signers = _members(escrow.deal(id).epoch, h.signers);
        _bookFee(id, signers, h.signed, h.submitter);
    }

    /// @dev A stranger settles up to `max % 4` of resolver `i`'s exclusion entries of an epoch:
    ///      what it is owed must not change.
    function settleExclusions(uint256 i, uint256 epochSeed, uint256 max) external {
        i %= RESOLVERS;
        uint256 epoch = epochSeed % registry.currentEpoch() + 1;
        EscrowFees fees = EscrowFees(address(escrow));
        IERC20 t = IERC20(address(token));
        uint256 before = fees.pendingRewards(t, i, epoch);
        vm.prank(STRANGER);
        fees.settleExclusions(t, i, epoch, max % 4);
        if (fees.pendingRewards(t, i, epoch) != before) settleMovedPending = true;
        calls["settle"]++;
    }

    /// @dev The pinned epoch's members in `mask` (signers) and the others (non-signers).
    function _split(uint256 epoch, uint256 mask)
        internal
        view
        returns (uint256[] memory signers, uint256[] memory non, uint256 signed, uint256 total)
    {
        uint256 ns;
        uint256 nn;
        for (uint256 i; i < RESOLVERS; ++i) {
            if (!registry.isMember(i, epoch)) continue;
            if (mask & (1 << i) != 0) ++ns;
            else ++nn;
        }
        signers = new uint256[](ns);
        non = new uint256[](nn);
        (ns, nn) = (0, 0);
        for (uint256 i; i < RESOLVERS; ++i) {
            if (!registry.isMember(i, epoch)) continue;
            uint256 s = _stake(i);
            total += s;
            if (mask & (1 << i) != 0) {
                signers[ns++] = i;
                signed += s;
            } else {
                non[nn++] = i;
            }
        }
    }

    /// @dev 2/3 of the epoch's stake, and 2/3 of its unslashed stake by unslashed signers.
    function _quorum(uint256 epoch, uint256[] memory signers, uint256 signed, uint256 total)
        internal
        view
        returns (bool)
    {
        if (signed * 3 < total * 2) return false;
        uint256 slashedTotal;
        uint256 slashedSigned;
        for (uint256 i; i < RESOLVERS; ++i) {
            if (!registry.isMember(i, epoch) || !_slashed(i)) continue;
            slashedTotal += _stake(i);
            for (uint256 j; j < signers.length; ++j) {
                if (signers[j] == i) slashedSigned += _stake(i);
            }
        }
        return (signed - slashedSigned) * 3 >= (total - slashedTotal) * 2 && total > slashedTotal;
    }

    /// @dev The payout table (`_bookSettlement`, then `_bookFee` at the split): Reproduced pays
    ///      the seller amount + DA bond + deposit + bond; Failed pays the buyer amount + bond +
    ///      deposit and the seller its DA bond. The fee:
    ///      `r = min(fee, CAP)` to the submitter, `inc = (fee - r) * P / S` per unit of
    ///      signing stake, the submitter also gets `fee - ceil(inc * S / P) - r`.
    function _bookSettlement(bytes32 id, bool reproduced) internal {
        Terms storage t = _termsOf[id];
        uint256 fee = t.resolverFee;
        if (reproduced) {
            _credit(SELLER, t.amount + t.sellerBond + fee + t.challengeBond);
        } else {
            _credit(BUYER, t.amount + t.challengeBond + fee);
            _credit(SELLER, t.sellerBond);
        }
    }

    /// @dev The fee split, when it happens (at `resolve`, or when a held fee is released).
    function _bookFee(bytes32 id, uint256[] memory signers, uint256 signed, address submitter)
        internal
    {
        uint256 fee = _termsOf[id].resolverFee;
        if (fee == 0) return;
        uint256 r = fee < CAP ? fee : CAP;
        uint256 inc = (fee - r) * P / signed;
        uint256 toSigners = inc == 0 ? 0 : (inc * signed + P - 1) / P;
        _credit(submitter, fee - toSigners);
        for (uint256 j; j < signers.length; ++j) {
            earnedScaled[signers[j]] += inc * _stake(signers[j]);
        }
    }

    /// @dev A quarter of the calls wait for the deadline; the others act only on deals past it.
    function timeout(uint256 k) external {
        bytes32 id = _find(k, DealState.Disputed, true);
        if (id == bytes32(0)) return;
        uint256 deadline = escrow.deal(id).resolveDeadline;
        if (block.timestamp <= deadline && k % 4 != 0) return;
        _warpTo(deadline + 1);
        escrow.timeoutRefund(id);
        Terms storage t = _termsOf[id];
        _credit(BUYER, t.amount + t.sellerBond + t.challengeBond + t.resolverFee);
        _credit(SELLER, t.resolverFee);
        calls["timeout"]++;
    }

    /// @dev Like `timeout`: a quarter of the calls wait for the deadline.
    function releaseOrReclaim(uint256 k) external {
        bool wait = k % 4 == 0;
        bytes32 id = _find(k, DealState.Delivered, true);
        Terms storage t = _termsOf[id];
        if (id != bytes32(0) && (wait || block.timestamp >= escrow.deal(id).challengeDeadline)) {
            _warpTo(escrow.deal(id).challengeDeadline);
            escrow.release(id);
            _credit(SELLER, t.amount + t.sellerBond + t.resolverFee);
            calls["release"]++;
            return;
        }
        id = _find(k, DealState.Held, true);
        if (id == bytes32(0)) return;
        if (!wait && block.timestamp <= escrow.deal(id).deliverDeadline) return;
        t = _termsOf[id];
        _warpTo(uint256(escrow.deal(id).deliverDeadline) + 1);
        escrow.reclaim(id);
        _credit(BUYER, t.amount);
        calls["reclaim"]++;
    }

    /// @dev One of the parties withdraws its credits (to itself).
    function claim(uint256 who) external {
        address p = [BUYER, SELLER, SUBMITTER_A, SUBMITTER_B, WHISTLEBLOWER][who % 5];
        uint256 owed = escrow.claimable(p, IERC20(address(token)));
        if (owed == 0) return;
        vm.prank(p);
        claimed[p] += escrow.claim(IERC20(address(token)), p);
        calls["claim"]++;
    }

    /// @dev Resolver `i`'s operator claims every epoch to a recipient that is not the operator;
    ///      a slashed resolver must be refused.
    function claimRewards(uint256 i, uint256 to) external {
        i %= RESOLVERS;
        // forge-lint: disable-next-line(unsafe-typecast)
        address recipient = address(uint160(0xc1a10 + to % 3));
        bool slashed = _slashed(i);
        uint256[] memory epochs = _allEpochs();
        vm.prank(_operator(i));
        try EscrowFees(address(escrow))
            .claimRewards(IERC20(address(token)), i, epochs, recipient) returns (
            uint256 amount
        ) {
            rewardsPaid[i] += amount;
            rewardsReceived[recipient] += amount;
            ++payouts[i];
            if (slashed) slashedPaid = true;
            calls["claim-rewards"]++;
        } catch {
            calls["claim-rewards-refused"]++;
        }
    }

    /// @dev A stranger tries to claim resolver `i`'s rewards: must be refused.
    function strangerClaims(uint256 i) external {
        i %= RESOLVERS;
        uint256[] memory epochs = _allEpochs();
        vm.prank(STRANGER);
        try EscrowFees(address(escrow)).claimRewards(IERC20(address(token)), i, epochs, STRANGER) {
            strangerPaid = true;
        } catch {}
    }

    /// @dev The whistleblower slashes the resolvers in both masks that signed both sides of a
    ///      fresh deal id in the current epoch. A quarter of the calls act, and never below
    ///      half of the stake left unslashed (so deals keep settling).
    function slash(uint256 maskA, uint256 maskB) external {
        if (maskA % 4 != 0) return;
        uint256 epoch = registry.currentEpoch();
        (uint256[] memory a,,,) = _split(epoch, (maskA >> 8) & 0xff);
        (uint256[] memory b,,,) = _split(epoch, maskB & 0xff);
        if (a.length == 0 || b.length == 0) return;
        (,, uint256 both, uint256 total) = _split(epoch, (maskA >> 8) & maskB & 0xff);
        if (both == 0 || 2 * both > total) return;
        Evidence memory ea;
        Evidence memory eb;
        (ea.commitment, eb.commitment) = (baseCommitments[0], baseCommitments[1]);
        ea.commitment.dealId = keccak256(abi.encode("evidence", maskA, maskB));
        eb.commitment.dealId = ea.commitment.dealId;
        (ea.epoch, eb.epoch, ea.signers, eb.signers) = (epoch, epoch, a, b);
        ea.signature = Signer.sign(a, escrow.verdictDigest(ea.commitment));
        eb.signature = Signer.sign(b, escrow.verdictDigest(eb.commitment));
        bytes32 ds = escrow.domainSeparator();
        // The slashing rule: each resolver that signed both and is not yet slashed loses its
        // whole bond, min(bond * 10 %, cap) to the whistleblower, the rest to the sink.
        uint256 cap = registry.whistleblowerCap();
        uint256[] memory equivocators = _members(epoch, (maskA >> 8) & maskB & 0xff);
        for (uint256 j; j < equivocators.length; ++j) {
            (ResolverRegistry.Resolver memory r,,) = registry.resolverInfo(equivocators[j]);
            if (r.slashed) continue;
            uint256 reward = uint256(r.bond) * WHISTLEBLOWER_BPS / 10_000;
            if (reward > cap) reward = cap;
            registryCredited[WHISTLEBLOWER] += reward;
            registryCredited[SINK] += r.bond - reward;
        }
        vm.prank(WHISTLEBLOWER);
        RegistrySlashing(address(registry)).slashEquivocation(ds, ea, eb);
        calls["slash"]++;
    }

    /// @dev The whistleblower withdraws its registry proceeds (to itself); or anyone flushes
    ///      the registry's sink credit to the sink.
    function registryClaim(bool flushSink) external {
        RegistrySlashing slashing = RegistrySlashing(address(registry));
        if (flushSink) {
            if (registry.claimable(SINK) == 0) return;
            vm.prank(STRANGER);
            registryClaimed[SINK] += slashing.flushSink();
            calls["registry-flush"]++;
            return;
        }
        if (registry.claimable(WHISTLEBLOWER) == 0) return;
        vm.prank(WHISTLEBLOWER);
        registryClaimed[WHISTLEBLOWER] += slashing.claim(WHISTLEBLOWER);
        calls["registry-claim"]++;
    }

    /// @dev A third party (not the whistleblower) sweeps slashed resolver `i`'s rewards: the
    ///      whistleblower's share to it, the rest to the sink.
    function sweep(uint256 i) external {
        i %= RESOLVERS;
        uint256[] memory epochs = _allEpochs();
        vm.prank(SWEEPER);
        try EscrowFees(address(escrow))
            .sweepSlashedRewards(IERC20(address(token)), i, epochs) returns (
            uint256 amount
        ) {
            uint256 share = registry.slashedBy(i) == WHISTLEBLOWER
                ? amount * WHISTLEBLOWER_BPS / 10_000
                : 0;
            _credit(WHISTLEBLOWER, share);
            sinkCredited += amount - share;
            rewardsSwept[i] += amount;
            ++payouts[i];
            calls["sweep"]++;
        } catch {
            calls["sweep-refused"]++;
        }
    }

    /// @dev Anyone flushes the sink: its credits plus the dust leave for the sink address.
    function flush() external {
        uint256 credit = escrow.claimable(SINK, IERC20(address(token)));
        vm.prank(STRANGER);
        try EscrowFees(address(escrow)).flushSink(IERC20(address(token))) returns (uint256 amount) {
            sinkCredited += amount - credit; // the whole wei of dust
            sinkOut += amount;
            calls["flush"]++;
        } catch {}
    }

    function warp(uint256 seconds_) external {
        vm.warp(block.timestamp + seconds_ % 1 hours + 1);
    }
}
