// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Ownable, Ownable2Step} from "@openzeppelin/contracts/access/Ownable2Step.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";

import {
    Evidence,
    IResolverRegistryErrors,
    IResolverRegistryEvents,
    RegistryParameters
} from "./interfaces/IResolverRegistry.sol";
import {BLS} from "./libraries/BLS.sol";
import {VerdictHash} from "./libraries/VerdictHash.sol";

/// @title ResolverRegistryStorage
/// @notice What the ResolverRegistry and RegistrySlashing share: constants, immutables, the storage
///         layout and the internal functions. Both inherit it and declare no storage of their
///         own, so the layout is identical by construction; RegistrySlashing runs only by
///         DELEGATECALL from the registry.
abstract contract ResolverRegistryStorage is
    IResolverRegistryErrors,
    IResolverRegistryEvents,
    ReentrancyGuard,
    Ownable2Step
{
    using SafeERC20 for IERC20;
    using SafeCast for uint256;

    /// @notice Membership of one resolver: its stake and the epochs it belongs to.
    struct Membership {
        uint128 stake;
        uint64 joinedEpoch;
        /// @dev First epoch without the resolver; 0 while it is still a member.
        uint64 leftEpoch;
    }

    /// @notice Bond accounting of one resolver.
    struct Resolver {
        address operator;
        uint64 exitRequestedAt;
        bool slashed;
        bool withdrawn;
        uint128 bond;
        /// @dev Id + 1 of the slash record (`_slashRecords`) of the call that slashed it; 0 if
        ///      never slashed. Packed with `bond`, so recording it costs no fresh slot.
        uint64 slashRecord;
    }

    /// @notice What one `slashEquivocation` call recorded for every resolver it slashed.
    struct SlashRecord {
        bytes32 domainSeparator;
        bytes32 dealId;
        /// @dev The caller if it was credited a whistleblower share, else zero.
        address whistleblower;
        /// @dev `_epochs.length` when the call ran: the epochs it slashed members of are below.
        uint64 nextEpoch;
        /// @dev Position in the slashed-member log of the first member the call slashed.
        uint32 firstSlashed;
    }

    /// @notice An owner parameter behind the timelock: `next` replaces `value` at `effectiveAt`.
    struct Timelocked {
        uint128 value;
        uint128 next;
        uint64 effectiveAt;
    }

    /// @notice The commit-reveal setting every epoch from `fromEpoch` on pins (until the next
    ///         checkpoint).
    struct CommitRevealCheckpoint {
        uint64 fromEpoch;
        uint32 commitPhaseMs;
    }

    /// @notice One committee epoch.
    struct Epoch {
        BLS.PackedG1 aggregateKey;
        uint128 totalStake;
        uint64 members;
        uint64 startedAt;
    }

    uint256 internal constant BPS = 10_000;
    /// @dev Bound of the threshold denominator (stake * denominator stays below 2^192).
    uint256 internal constant MAX_DENOMINATOR = 1 << 64;
    /// @dev Bound of `activationDelay` (about 34,800 years): deal deadlines stay in uint64.
    uint256 internal constant MAX_ACTIVATION_DELAY = 1 << 40;
    /// @notice Most members an epoch may have. Bounds a certificate's cost: the largest committee
    ///         with every member but one (1/3 of the stake in minimum bonds) not signing still
    ///         resolves, with a fee, in under 2M gas (ECONOMICS.md, Gas).
    uint256 public constant MAX_COMMITTEE_SIZE = 400;
    /// @dev Init code of a resolver's record contract (CREATE2, salt = index): it calls back
    ///      `recordCode()` and deploys what that returns, so every record address follows from
    ///      the index alone: `PUSH4 recordCode.selector; MSTORE at 0; STATICCALL caller;
    ///      RETURNDATACOPY; RETURN`.
    bytes internal constant RECORD_INIT =
        hex"63373a565c600052600060006004601c335afa503d600060003e3d6000f3";
    /// @dev A record's code: `0x00 || key (128 bytes, EIP-2537) || stake (uint128)`.
    uint256 internal constant RECORD_LENGTH = 145;
    /// @dev Transient slots holding the record `recordCode()` returns during `register`.
    uint256 internal constant RECORD_TSLOT = 0x7265736f6c76642e7265636f7264;
    /// @notice Smallest `minResolveWindow` the owner may set (clamped to `maxResolveWindow`):
    ///         a resolve window must leave time for confirmations, the commit-reveal phases and
    ///         one submission.
    uint256 public constant MIN_RESOLVE_WINDOW_FLOOR = 5 minutes;
    /// @notice `minResolveWindow` at deployment (clamped to `maxResolveWindow`).
    uint256 public constant DEFAULT_MIN_RESOLVE_WINDOW = 10 minutes;
    /// @notice The commit-reveal bound: this many commit phases (commit, reveal, fallback) must
    ///         fit in half of the minimum resolve window, so a node's fallback always fires well
    ///         before any deal's resolve deadline.
    uint256 public constant COMMIT_REVEAL_WINDOWS = 3;

    /// @notice The bond token.
    IERC20 public immutable bondToken;
    /// @notice Smallest bond accepted.
    uint256 public immutable minimumBond;
    /// @notice Quorum threshold numerator: a certificate needs
    ///         `signedStake * thresholdDenominator >= totalStake * thresholdNumerator`.
    uint256 public immutable thresholdNumerator;
    /// @notice Quorum threshold denominator.
    uint256 public immutable thresholdDenominator;
    /// @dev `maxResolveWindow()`.
    uint256 internal immutable _maxResolveWindow;
    /// @notice Time after a dispute's resolve deadline in which evidence is expected.
    uint256 public immutable slashingWindow;
    /// @notice Delay between `requestExit` and `withdraw`; longer than
    ///         `maxResolveWindow + slashingWindow`.
    uint256 public immutable unbondingDelay;
    /// @dev `activationDelay()`.
    uint256 internal immutable _activationDelay;
    /// @dev `minimumCommitteeStake()`.
    uint256 internal immutable _minimumCommitteeStake;
    /// @notice Share of a slashed bond paid to the evidence submitter, in basis points.
    uint256 public immutable whistleblowerBps;
    /// @dev `slashSink()`.
    address internal immutable _slashSink;

    /// @notice Number of resolvers ever registered; indices are `[0, resolverCount)`.
    uint256 public resolverCount;
    /// @dev Mappings, not arrays: a lookup needs no (cold) length read. An unregistered or not
    ///      yet activated index has `joinedEpoch == 0` (epoch 0 is the empty genesis committee).
    mapping(uint256 => BLS.PackedG1) internal _keys;
    mapping(uint256 => Membership) internal _memberships;
    mapping(uint256 => Resolver) internal _resolvers;
    Epoch[] internal _epochs;
    /// @dev Earliest `activate` time of a registered resolver.
    mapping(uint256 => uint64) internal _activatesAt;

    /// @notice Whether a key (keccak256 of its EIP-2537 encoding) was ever registered.
    mapping(bytes32 keyHash => bool) public keyRegistered;
    /// @dev Operator => resolver index + 1 of its latest registration.
    mapping(address operator => uint256) internal _indexPlusOne;
    /// @notice Slashing proceeds an account may `claim` (whistleblower shares, the sink's rest).
    mapping(address account => uint256) public claimable;
    /// @dev Each epoch's members as contract code (`0x00 || uint32 index` per position,
    ///      ascending): one cold account access reads any position, however large the committee.
    mapping(uint256 epoch => address) internal _memberList;
    mapping(IERC20 token => Timelocked) internal _minResolverFee;
    mapping(IERC20 token => Timelocked) internal _gasRefundCap;
    Timelocked internal _minResolveWindow;
    Timelocked internal _whistleblowerCap;
    /// @dev Ascending `fromEpoch`; the setting of epoch e is the last checkpoint at or before e.
    CommitRevealCheckpoint[] internal _commitReveal;
    /// @dev One entry per slashing call (`Resolver.slashRecord` - 1 indexes it).
    SlashRecord[] internal _slashRecords;
    /// @dev The slashed-member log: every slashed resolver that was ever a member, in slashing
    ///      order, as uint32 indices packed eight to a word.
    mapping(uint256 word => uint256) internal _slashedLog;
    uint256 internal _slashedLogLength;
    /// @dev The epochs `activate` started, ascending (four to a slot). Every other epoch after
    ///      0 started because members left (an exit or a slash): an epoch change either adds
    ///      members or removes some, never both.
    uint64[] internal _activationEpochs;

    /// @dev Rejects parameters under which the registry's guarantees fail: a threshold of at
    ///      most half (two disjoint quorums), an unbonding delay that ends before a dispute's
    ///      slashing window, a zero warm-up (last-moment stake) or one so long that deal
    ///      deadlines overflow, and a minimum committee smaller than one bond.
    constructor(RegistryParameters memory p) Ownable(msg.sender) {
        if (address(p.bondToken) == address(0)) revert InvalidParameters("bond token");
        if (p.minimumBond == 0) revert InvalidParameters("minimum bond");
        // More than half (two quorums always overlap), at most all, and small enough that
        // `stake * denominator` cannot overflow (stakes are uint128).
        if (
            p.thresholdDenominator == 0 || p.thresholdDenominator > MAX_DENOMINATOR
                || 2 * p.thresholdNumerator <= p.thresholdDenominator
                || p.thresholdNumerator > p.thresholdDenominator
        ) {
            revert InvalidParameters("threshold");
        }
        if (p.maxResolveWindow == 0 || p.slashingWindow == 0) revert InvalidParameters("windows");
        if (p.unbondingDelay <= p.maxResolveWindow + p.slashingWindow) {
            revert InvalidParameters("unbonding delay too short");
        }
        if (p.activationDelay == 0 || p.activationDelay > MAX_ACTIVATION_DELAY) {
            revert InvalidParameters("activation delay");
        }
        if (p.minimumCommitteeStake < p.minimumBond) {
            revert InvalidParameters("minimum committee stake");
        }
        if (p.whistleblowerBps > BPS) revert InvalidParameters("whistleblower share");
        if (p.slashSink == address(0)) revert InvalidParameters("slash sink");
        bondToken = p.bondToken;
        minimumBond = p.minimumBond;
        thresholdNumerator = p.thresholdNumerator;
        thresholdDenominator = p.thresholdDenominator;
        _maxResolveWindow = p.maxResolveWindow;
        slashingWindow = p.slashingWindow;
        unbondingDelay = p.unbondingDelay;
        _activationDelay = p.activationDelay;
        _minimumCommitteeStake = p.minimumCommitteeStake;
        whistleblowerBps = p.whistleblowerBps;
        _slashSink = p.slashSink;
        // Epoch 0: the empty committee before anyone registered.
        _epochs.push();
        _minResolveWindow.value = _min(DEFAULT_MIN_RESOLVE_WINDOW, p.maxResolveWindow).toUint128();
        _whistleblowerCap.value = type(uint128).max;
    }

    /// @dev The quorum rule (`meetsThreshold`). Virtual only so that test/mutants can break it.
    function _meetsThreshold(uint256 signedStake, uint256 totalStake)
        internal
        view
        virtual
        returns (bool)
    {
        return totalStake != 0 && signedStake <= totalStake
            && signedStake * thresholdDenominator >= totalStake * thresholdNumerator;
    }

    function _slashEquivocation(
        bytes32 domainSeparator,
        Evidence calldata a,
        Evidence calldata b,
        uint256 maxSlashed
    ) internal returns (uint256 slashed) {
        bytes32 dealId = a.commitment.dealId;
        if (dealId != b.commitment.dealId) revert NotAConflict(dealId, b.commitment.dealId);
        bytes32 digestA = VerdictHash.digest(domainSeparator, a.commitment);
        bytes32 digestB = VerdictHash.digest(domainSeparator, b.commitment);
        if (digestA == digestB) revert SameCommitment();
        _verifyEvidence(a, digestA);
        _verifyEvidence(b, digestB);
        Tally memory t;
        t.rewarded = _mayCollectReward(msg.sender, a.signers, b.signers);
        t.cap = t.rewarded ? _get(_whistleblowerCap) : 0;
        t.nextEpoch = _epochs.length;
        t.leaving = new uint256[](_min(_min(a.signers.length, b.signers.length), maxSlashed));
        // One record for everyone this call slashes (reverted below if it slashes nobody).
        t.former = new uint256[](t.leaving.length);
        _slashRecords.push(
            SlashRecord({
                domainSeparator: domainSeparator,
                dealId: dealId,
                whistleblower: t.rewarded ? msg.sender : address(0),
                nextEpoch: t.nextEpoch.toUint64(),
                firstSlashed: _slashedLogLength.toUint32()
            })
        );
        t.record = _slashRecords.length.toUint64();
        // Both signer lists are strictly ascending: merge them.
        uint256 i;
        uint256 j;
        while (i < a.signers.length && j < b.signers.length && t.slashed < maxSlashed) {
            uint256 x = a.signers[i];
            uint256 y = b.signers[j];
            if (x < y) {
                ++i;
            } else if (y < x) {
                ++j;
            } else {
                ++i;
                ++j;
                _slash(dealId, x, t);
            }
        }
        slashed = t.slashed;
        if (slashed == 0) revert NoEquivocator();
        _appendSlashed(t.former, t.nFormer);
        if (t.nLeaving > 0) {
            uint256[] memory leaving = t.leaving;
            uint256 nLeaving = t.nLeaving;
            assembly ("memory-safe") {
                mstore(leaving, nLeaving)
            }
            Epoch storage last = _epochs[t.nextEpoch - 1];
            _pushEpoch(
                BLS.subtractStored(last.aggregateKey, _keys, leaving),
                uint256(last.totalStake) - t.stakeLeaving,
                last.members - nLeaving,
                _without(_listOf(t.nextEpoch - 1), leaving)
            );
        }
        if (t.rewards > 0) claimable[msg.sender] += t.rewards;
        if (t.toSink > 0) claimable[_slashSink] += t.toSink;
    }

    /// @dev A timelocked parameter's value now.
    function _get(Timelocked storage p) internal view returns (uint256) {
        uint256 at = p.effectiveAt;
        return at != 0 && block.timestamp >= at ? p.next : p.value;
    }

    /// @dev Schedules `v` (clamped to uint128) for `parameterDelay()` from now, or now while no
    ///      committee ever existed. Replaces a change still pending.
    function _schedule(Timelocked storage p, uint256 v) internal returns (uint256 at) {
        p.value = uint128(_get(p));
        at = _epochs.length == 1 ? block.timestamp : block.timestamp + _activationDelay;
        // forge-lint: disable-next-line(unsafe-typecast)
        p.next = v > type(uint128).max ? type(uint128).max : uint128(v);
        p.effectiveAt = at.toUint64();
    }

    /// @dev The smaller of the minimum resolve window in force and the one scheduled.
    function _smallestMinResolveWindow() internal view returns (uint256 window) {
        Timelocked storage p = _minResolveWindow;
        window = _get(p);
        if (p.effectiveAt > block.timestamp && p.next < window) window = p.next;
    }

    /// @dev The commit-reveal setting of the epochs that start next.
    function _latestCommitReveal() internal view returns (uint256) {
        uint256 n = _commitReveal.length;
        return n == 0 ? 0 : _commitReveal[n - 1].commitPhaseMs;
    }

    function _commitRevealFits(uint256 commitPhaseMs, uint256 windowSeconds)
        internal
        pure
        returns (bool)
    {
        return 2 * COMMIT_REVEAL_WINDOWS * commitPhaseMs <= windowSeconds * 1000;
    }

    function _indexOf(address operator) internal view returns (uint256) {
        uint256 i = _indexPlusOne[operator];
        if (i == 0) revert NotResolver(operator);
        return i - 1;
    }

    function _epoch(uint256 epoch) internal view returns (Epoch storage) {
        if (epoch == 0 || epoch >= _epochs.length) revert UnknownEpoch(epoch, _epochs.length - 1);
        return _epochs[epoch];
    }

    /// @dev When an exiting resolver's bond may leave: `unbondingDelay` after its exit request.
    function _withdrawableAt(Resolver storage r) internal view virtual returns (uint256) {
        return uint256(r.exitRequestedAt) + unbondingDelay;
    }

    /// @dev Fresh: no later epoch removed members (the current epoch, or one followed only by
    ///      activations), or the first later epoch that removed members (an exit or a slash)
    ///      started at most `maxResolveWindow` ago. The members of `epoch` left no earlier than
    ///      that epoch's start, so they stay bonded until at least `now + slashingWindow`
    ///      (`unbondingDelay > maxResolveWindow + slashingWindow`). An activation does not end
    ///      an epoch's freshness (it removes nobody), so the committee a dispute pins before
    ///      stake joined (`committeeFor`) stays as verifiable as if nobody had joined.
    function _checkFresh(uint256 epoch) internal view virtual {
        uint256 n = _epochs.length;
        if (epoch + 1 == n) return;
        uint256 ended = epoch + 1;
        if (_epochs[ended].members > _epochs[epoch].members) {
            ended = _firstRemovalAfter(epoch);
            if (ended == n) return;
        }
        uint256 endedAt = _epochs[ended].startedAt;
        uint256 freshUntil = endedAt + _maxResolveWindow;
        if (block.timestamp > freshUntil) revert StaleEpoch(epoch, endedAt, freshUntil);
    }

    /// @dev The first epoch after `epoch` that removed members, given that `epoch + 1` was an
    ///      activation (`_epochs.length` if none did): the end of the run of consecutive
    ///      activation epochs that starts at `epoch + 1`. Two binary searches in
    ///      `_activationEpochs` (a strictly ascending list `a`, so `a[j] - j` never decreases
    ///      and a run of consecutive epochs is where it stays constant).
    function _firstRemovalAfter(uint256 epoch) internal view returns (uint256) {
        uint64[] storage a = _activationEpochs;
        uint256 lo;
        uint256 hi = a.length - 1;
        while (lo < hi) {
            uint256 mid = (lo + hi) >> 1;
            if (a[mid] > epoch) hi = mid;
            else lo = mid + 1;
        }
        // a[lo] == epoch + 1: the run starts here; find its last element.
        uint256 offset = uint256(a[lo]) - lo;
        hi = a.length - 1;
        while (lo < hi) {
            uint256 mid = (lo + hi + 1) >> 1;
            if (uint256(a[mid]) - mid == offset) lo = mid;
            else hi = mid - 1;
        }
        return uint256(a[lo]) + 1;
    }

    function _member(uint256 index, uint256 epoch) internal view returns (Membership storage m) {
        m = _memberships[index];
        if (
            m.joinedEpoch == 0 || m.joinedEpoch > epoch
                || (m.leftEpoch != 0 && epoch >= m.leftEpoch)
        ) {
            revert NotAMember(index, epoch);
        }
    }

    function _pushEpoch(
        bytes memory aggregateKey,
        uint256 totalStake,
        uint256 members,
        uint256[] memory list
    ) internal {
        uint256 epoch = _epochs.length;
        _memberList[epoch] = _deployList(list);
        _epochs.push(
            Epoch({
                aggregateKey: BLS.packG1(aggregateKey),
                totalStake: totalStake.toUint128(),
                members: members.toUint64(),
                startedAt: block.timestamp.toUint64()
            })
        );
        emit EpochStarted(epoch, totalStake, members);
    }

    /// @dev Starts a new epoch without `index` (no-op if it already left or never joined).
    function _leave(uint256 index) internal {
        Membership storage m = _memberships[index];
        if (m.leftEpoch != 0 || m.joinedEpoch == 0) return;
        uint256 epoch = _epochs.length;
        m.leftEpoch = epoch.toUint64();
        Epoch storage last = _epochs[epoch - 1];
        bytes memory key = BLS.negateG1(BLS.unpackG1(_keys[index]));
        uint256[] memory leaving = new uint256[](1);
        leaving[0] = index;
        _pushEpoch(
            BLS.addG1(BLS.unpackG1(last.aggregateKey), key),
            uint256(last.totalStake) - m.stake,
            last.members - 1,
            _without(_listOf(epoch - 1), leaving)
        );
    }

    function _verifyCertificate(
        uint256 epoch,
        bytes32 digest,
        bytes memory nonSigners,
        bytes calldata signature
    ) internal view returns (uint256 signedStake, uint256 totalStake) {
        Epoch storage e = _epoch(epoch);
        _checkFresh(epoch);
        totalStake = e.totalStake;
        (bytes memory key, uint256 missing) =
            _sumRecords(epoch, e.members, nonSigners, BLS.unpackG1(e.aggregateKey), true);
        signedStake = totalStake - missing;
        if (!_meetsThreshold(signedStake, totalStake)) {
            revert BelowThreshold(signedStake, totalStake, thresholdNumerator, thresholdDenominator);
        }
        if (!BLS.verifyDigest(key, digest, signature)) revert InvalidSignature();
    }

    /// @dev `start` plus (or minus, if `negate`) the keys of the positions set in `bitmap` (bit
    ///      `p & 7` of byte `p >> 3`), and the sum of their stakes. Reads each key and stake from
    ///      the member's record contract, found through the epoch's member list.
    function _sumRecords(
        uint256 epoch,
        uint256 n,
        bytes memory bitmap,
        bytes memory start,
        bool negate
    ) internal view returns (bytes memory key, uint256 stake) {
        if (bitmap.length > (n + 7) / 8) {
            revert BitmapTooLong(bitmap.length, (n + 7) / 8);
        }
        key = start;
        address list = _memberList[epoch];
        bytes32 initHash = keccak256(RECORD_INIT);
        uint256 outOfRange = type(uint256).max;
        bool ok;
        (ok, stake, outOfRange) = BLS.sumRecords(key, bitmap, n, list, initHash, negate);
        if (outOfRange != type(uint256).max) revert PositionOutOfRange(outOfRange, n);
        if (!ok) revert BLS.BLSPrecompileFailed(BLS.G1ADD);
    }

    /// @dev Deploys `index`'s record contract (CREATE2 salt `index`, code `0x00 || key ||
    ///      uint128 stake`).
    function _deployRecord(uint256 index, bytes calldata publicKey, uint256 stake) internal {
        bytes memory rec = abi.encodePacked(bytes1(0), publicKey, uint128(stake));
        bytes memory init = RECORD_INIT;
        address deployed;
        assembly ("memory-safe") {
            for { let i := 0 } lt(i, 5) { i := add(i, 1) } {
                tstore(add(RECORD_TSLOT, i), mload(add(add(rec, 0x20), shl(5, i))))
            }
            deployed := create2(0, add(init, 0x20), mload(init), index)
            for { let i := 0 } lt(i, 5) { i := add(i, 1) } {
                tstore(add(RECORD_TSLOT, i), 0)
            }
        }
        if (deployed == address(0) || deployed.code.length != RECORD_LENGTH) {
            revert RecordNotDeployed(index);
        }
    }

    /// @dev Deploys `list` (ascending indices) as code `0x00 || uint32 index...`; none for an
    ///      empty list.
    function _deployList(uint256[] memory list) internal returns (address deployed) {
        uint256 n = list.length;
        if (n == 0) return address(0);
        bytes memory code = new bytes(1 + 4 * n);
        for (uint256 i; i < n; ++i) {
            uint32 index = list[i].toUint32();
            assembly ("memory-safe") {
                mstore(add(add(code, 0x21), shl(2, i)), shl(224, index))
            }
        }
        // SSTORE2 init code: PUSH2 len; DUP1; PUSH1 10; RETURNDATASIZE; CODECOPY;
        // RETURNDATASIZE; RETURN.
        bytes memory init =
            abi.encodePacked(hex"61", uint16(code.length), hex"80600a3d393df3", code);
        assembly ("memory-safe") {
            deployed := create(0, add(init, 0x20), mload(init))
        }
        if (deployed == address(0)) revert RecordNotDeployed(type(uint256).max);
    }

    /// @dev An epoch's member list (empty for epoch 0).
    function _listOf(uint256 epoch) internal view returns (uint256[] memory list) {
        uint256 n = _epochs[epoch].members;
        list = new uint256[](n);
        address at = _memberList[epoch];
        if (n == 0) return list;
        bytes memory raw = new bytes(4 * n);
        assembly ("memory-safe") {
            extcodecopy(at, add(raw, 0x20), 1, shl(2, n))
            for { let i := 0 } lt(i, n) { i := add(i, 1) } {
                mstore(
                    add(list, shl(5, add(i, 1))),
                    shr(224, mload(add(add(raw, 0x20), shl(2, i))))
                )
            }
        }
    }

    /// @dev Binary search for `index` among positions `[lo, hi)` of a member list.
    function _search(address list, uint256 lo, uint256 hi, uint256 index)
        internal
        view
        returns (bool found, uint256 position)
    {
        while (lo < hi) {
            uint256 mid = (lo + hi) >> 1;
            uint256 at;
            assembly ("memory-safe") {
                mstore(0x00, 0)
                extcodecopy(list, 0x00, add(1, shl(2, mid)), 4)
                at := shr(224, mload(0x00))
            }
            if (at == index) return (true, mid);
            if (at < index) lo = mid + 1;
            else hi = mid;
        }
        return (false, lo);
    }

    /// @dev Merges two ascending lists (disjoint).
    function _merge(uint256[] memory a, uint256[] calldata b)
        internal
        pure
        returns (uint256[] memory out)
    {
        out = new uint256[](a.length + b.length);
        uint256 i;
        uint256 j;
        for (uint256 k; k < out.length; ++k) {
            if (j == b.length || (i < a.length && a[i] < b[j])) out[k] = a[i++];
            else out[k] = b[j++];
        }
    }

    /// @dev `a` without the elements of `remove` (both ascending, `remove` a subset of `a`).
    function _without(uint256[] memory a, uint256[] memory remove)
        internal
        pure
        returns (uint256[] memory out)
    {
        out = new uint256[](a.length - remove.length);
        uint256 j;
        uint256 k;
        for (uint256 i; i < a.length; ++i) {
            if (j < remove.length && a[i] == remove[j]) ++j;
            else out[k++] = a[i];
        }
    }

    /// @dev Running totals of one `slashEquivocation` call.
    struct Tally {
        uint256[] leaving;
        uint256 nLeaving;
        uint256 stakeLeaving;
        uint256 rewards;
        uint256 toSink;
        uint256 nextEpoch;
        uint256 slashed;
        uint256 cap;
        uint256[] former;
        uint256 nFormer;
        uint64 record;
        bool rewarded;
    }

    /// @dev Appends `list[0..n)` to the slashed-member log (eight uint32 indices per word).
    function _appendSlashed(uint256[] memory list, uint256 n) internal {
        if (n == 0) return;
        uint256 length = _slashedLogLength;
        uint256 slot = length / 8;
        uint256 word = _slashedLog[slot];
        for (uint256 i; i < n; ++i) {
            uint256 pos = (length + i) % 8;
            if (pos == 0 && i > 0) {
                _slashedLog[slot++] = word;
                word = 0;
            }
            word |= uint256(list[i].toUint32()) << (32 * pos);
        }
        _slashedLog[slot] = word;
        _slashedLogLength = length + n;
    }

    /// @dev Takes `index`'s whole bond into `t` (skips it if already slashed) and, if it is
    ///      still a member, schedules its exit in the epoch the call will push. Writes only
    ///      slots the resolver already has (no fresh storage per slashed resolver).
    function _slash(bytes32 dealId, uint256 index, Tally memory t) internal {
        Resolver storage r = _resolvers[index];
        if (r.slashed) return;
        uint256 amount = r.bond;
        r.bond = 0;
        r.slashRecord = t.record;
        r.slashed = true;
        Membership storage m = _memberships[index];
        if (m.joinedEpoch != 0) {
            t.former[t.nFormer++] = index;
            if (m.leftEpoch == 0) {
                m.leftEpoch = t.nextEpoch.toUint64();
                t.leaving[t.nLeaving++] = index;
                t.stakeLeaving += m.stake;
            }
        }
        uint256 reward;
        if (t.rewarded) {
            reward = amount * whistleblowerBps / BPS;
            if (reward > t.cap) reward = t.cap;
        }
        t.rewards += reward;
        t.toSink += amount - reward;
        ++t.slashed;
        emit Slashed(index, dealId, msg.sender, reward, amount - reward);
    }

    /// @dev Verifies an aggregate by an explicit signer set of members of `e.epoch`.
    function _verifyEvidence(Evidence calldata e, bytes32 digest) internal view virtual {
        _epoch(e.epoch);
        uint256 n = e.signers.length;
        if (n == 0) revert EmptySignerSet();
        for (uint256 i; i < n; ++i) {
            if (i > 0 && e.signers[i] <= e.signers[i - 1]) revert IndicesNotAscending(i);
            _member(e.signers[i], e.epoch);
        }
        bytes memory key = BLS.sumStored(_keys, e.signers);
        if (!BLS.verifyDigest(key, digest, e.signature)) revert InvalidSignature();
    }

    /// @dev A slashed resolver, or one slashed by this evidence, never collects a whistleblower
    ///      share for it (an equivocator reporting itself would get part of its bond back).
    function _mayCollectReward(address reporter, uint256[] calldata a, uint256[] calldata b)
        internal
        view
        returns (bool)
    {
        uint256 plusOne = _indexPlusOne[reporter];
        if (plusOne == 0) return true;
        uint256 index = plusOne - 1;
        if (_resolvers[index].slashed) return false;
        return !(_contains(a, index) && _contains(b, index));
    }

    /// @dev Binary search in a strictly ascending list.
    function _contains(uint256[] calldata list, uint256 x) internal pure returns (bool) {
        uint256 lo;
        uint256 hi = list.length;
        while (lo < hi) {
            uint256 mid = (lo + hi) / 2;
            uint256 v = list[mid];
            if (v == x) return true;
            if (v < x) lo = mid + 1;
            else hi = mid;
        }
        return false;
    }

    function _min(uint256 x, uint256 y) internal pure returns (uint256) {
        return x < y ? x : y;
    }
}
