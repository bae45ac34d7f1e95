// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Ownable, Ownable2Step} from "@openzeppelin/contracts/access/Ownable2Step.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";

import {
    Evidence,
    IResolverRegistry,
    IResolverRegistryErrors,
    IResolverRegistryEvents,
    RegistryParameters
} from "./interfaces/IResolverRegistry.sol";
import {BLS} from "./libraries/BLS.sol";
import {VerdictHash} from "./libraries/VerdictHash.sol";

/// @title ResolverRegistry
/// @notice Bonded BLS resolvers, committee epochs, quorum-certificate verification and
///         permissionless equivocation slashing.
/// @dev Resolvers get a permanent index at registration and join the committee only through
///      `activate`, at least `activationDelay` later (warm-up): stake bought at the last moment
///      cannot decide a dispute, because escrows only fund deals whose deliver + challenge
///      windows fit in the warm-up, so every member of a deal's pinned epoch registered before
///      the deal was funded. An epoch is the set of resolvers whose
///      membership interval [joinedEpoch, leftEpoch) contains it; each epoch stores only its
///      aggregate key and total stake, so a membership change costs O(1) storage and a
///      certificate costs one stored-key subtraction per non-signer. Stake is the bond at
///      registration and never changes while a member; a slashed or exiting resolver leaves the
///      committee through a new epoch, while past epochs keep their snapshot.
///      Slashing is batched: one call slashes every equivocator of a pair of aggregates with
///      one epoch change (or, for a coalition too large for one transaction, in bounded
///      pieces with `slashEquivocationUpTo`), and credits the proceeds (`claimable`, withdrawn
///      with `claim`): `whistleblowerBps` of each bond, at most `whistleblowerCap()`, to the
///      submitter unless it is itself an equivocator or a slashed resolver, the rest to
///      `slashSink` (set at deployment; use a burn address to
///      burn; `flushSink` sends the sink its credit). The owner (the deployer, Ownable2Step)
///      only sets the network's economic parameters escrows and nodes read: the minimum
///      resolver fee and the gas-refund cap per payment token, the minimum resolve window and
///      the whistleblower cap, each taking effect `parameterDelay()` after it is scheduled
///      (at once while no committee ever existed), and the commit-reveal setting of the epochs
///      that start afterwards; the minimum window and the commit-reveal setting are bounded in
///      code. It cannot take bonds, slash, or change an epoch after it started.
contract ResolverRegistry is
    IResolverRegistry,
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
    /// @inheritdoc IResolverRegistry
    uint256 public immutable maxResolveWindow;
    /// @notice Time after a dispute's resolve deadline in which evidence is expected.
    uint256 public immutable slashingWindow;
    /// @notice Delay between `requestExit` and `withdraw`; longer than
    ///         `maxResolveWindow + slashingWindow`.
    uint256 public immutable unbondingDelay;
    /// @inheritdoc IResolverRegistry
    uint256 public immutable activationDelay;
    /// @inheritdoc IResolverRegistry
    uint256 public immutable minimumCommitteeStake;
    /// @notice Share of a slashed bond paid to the evidence submitter, in basis points.
    uint256 public immutable whistleblowerBps;
    /// @notice Receiver of the rest of a slashed bond.
    address public immutable slashSink;

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
        maxResolveWindow = p.maxResolveWindow;
        slashingWindow = p.slashingWindow;
        unbondingDelay = p.unbondingDelay;
        activationDelay = p.activationDelay;
        minimumCommitteeStake = p.minimumCommitteeStake;
        whistleblowerBps = p.whistleblowerBps;
        slashSink = p.slashSink;
        // Epoch 0: the empty committee before anyone registered.
        _epochs.push();
        _minResolveWindow.value = _min(DEFAULT_MIN_RESOLVE_WINDOW, p.maxResolveWindow).toUint128();
        _whistleblowerCap.value = type(uint128).max;
    }

    // ------------------------------------------------------------------ membership

    /// @notice Registers the caller as a resolver with a BLS key, its proof of possession and a
    ///         bond of `bond` bond tokens (approve first). The resolver joins the committee
    ///         through `activate`, no earlier than `activationDelay` from now.
    /// @param publicKey EIP-2537 G1 public key (128 bytes).
    /// @param proofOfPossession EIP-2537 G2 signature under the PoP DST of
    ///        `compressG1(publicKey) || uint256(chainid) || address(this) || msg.sender`
    ///        (resolvd-consensus `SecretKey::prove_possession_for`).
    /// @param bond Bond amount; at least `minimumBond`.
    /// @return index The new resolver's permanent index.
    function register(bytes calldata publicKey, bytes calldata proofOfPossession, uint256 bond)
        external
        nonReentrant
        returns (uint256 index)
    {
        if (bond < minimumBond) revert BondBelowMinimum(bond, minimumBond);
        uint256 previous = _indexPlusOne[msg.sender];
        if (previous != 0 && !_resolvers[previous - 1].withdrawn) {
            revert OperatorAlreadyRegistered(msg.sender);
        }
        bytes32 keyHash = keccak256(publicKey);
        if (keyRegistered[keyHash]) revert KeyAlreadyRegistered(keyHash);
        // Bound to (chain, registry, operator): a proof copied from another registration does
        // not verify. Also rejects the point at infinity and keys outside the subgroup.
        if (!BLS.verifyProofOfPossession(
                publicKey,
                proofOfPossession,
                abi.encodePacked(block.chainid, address(this), msg.sender)
            )) {
            revert InvalidProofOfPossession();
        }

        index = resolverCount++;
        keyRegistered[keyHash] = true;
        _indexPlusOne[msg.sender] = index + 1;
        _keys[index] = BLS.packG1(publicKey);
        _memberships[index] = Membership({stake: bond.toUint128(), joinedEpoch: 0, leftEpoch: 0});
        _resolvers[index] = Resolver({
            operator: msg.sender,
            exitRequestedAt: 0,
            slashed: false,
            withdrawn: false,
            bond: bond.toUint128(),
            slashRecord: 0
        });
        uint256 activatesAt = block.timestamp + activationDelay;
        _activatesAt[index] = activatesAt.toUint64();

        uint256 balance = bondToken.balanceOf(address(this));
        bondToken.safeTransferFrom(msg.sender, address(this), bond);
        uint256 received = bondToken.balanceOf(address(this)) - balance;
        if (received != bond) revert BondTransferMismatch(bond, received);
        emit ResolverRegistered(index, msg.sender, keyHash, bond);
        emit ActivationScheduled(index, activatesAt);
    }

    /// @notice Adds registered resolvers whose warm-up is over to the committee, as one new
    ///         epoch. Permissionless: anyone may activate anyone whose time has come. A
    ///         registration can be activated only in `[activatesAt, activatesAt +
    ///         activationDelay]`; after that it expires (`renewActivation` starts a new
    ///         warm-up), so no stake waits unseen, activated at a moment of its choosing: every
    ///         registration that can join before a deal's last challenge was made at most
    ///         twice the warm-up before the deal was funded, and is public from then on.
    /// @param indices Resolvers to activate, strictly ascending; each registered, not yet a
    ///        member, not exiting or slashed, and at least `activationDelay` (and at most twice
    ///        that) after registering or renewing.
    /// @return epoch The new epoch.
    function activate(uint256[] calldata indices) external returns (uint256 epoch) {
        uint256 n = indices.length;
        if (n == 0) revert NothingToActivate();
        epoch = _epochs.length;
        Epoch storage last = _epochs[epoch - 1];
        bytes memory key = BLS.unpackG1(last.aggregateKey);
        uint256 stake = last.totalStake;
        for (uint256 i; i < n; ++i) {
            uint256 index = indices[i];
            if (i > 0 && index <= indices[i - 1]) revert IndicesNotAscending(i);
            if (index >= resolverCount) revert UnknownResolver(index, resolverCount);
            Membership storage m = _memberships[index];
            Resolver storage r = _resolvers[index];
            if (m.joinedEpoch != 0 || r.exitRequestedAt != 0 || r.slashed) {
                revert NotPending(index);
            }
            uint256 at = _activatesAt[index];
            if (block.timestamp < at) revert ActivationPending(index, at);
            if (block.timestamp > at + activationDelay) {
                revert ActivationExpired(index, at + activationDelay);
            }
            m.joinedEpoch = epoch.toUint64();
            stake += m.stake;
            // An empty committee's aggregate is the identity (all zero), which G1ADD accepts.
            key = BLS.addG1(key, BLS.unpackG1(_keys[index]));
            emit ResolverActivated(index, epoch);
        }
        _pushEpoch(key, stake, last.members + n);
    }

    /// @notice Starts a new warm-up for the caller's expired registration (never activated, not
    ///         exiting, not slashed): it can be activated `activationDelay` from now.
    function renewActivation() external {
        uint256 index = _indexOf(msg.sender);
        Resolver storage r = _resolvers[index];
        if (_memberships[index].joinedEpoch != 0 || r.exitRequestedAt != 0 || r.slashed) {
            revert NotPending(index);
        }
        uint256 expiry = uint256(_activatesAt[index]) + activationDelay;
        if (block.timestamp <= expiry) revert ActivationPending(index, expiry + 1);
        uint256 activatesAt_ = block.timestamp + activationDelay;
        _activatesAt[index] = activatesAt_.toUint64();
        emit ActivationScheduled(index, activatesAt_);
    }

    /// @notice Leaves the committee (a new epoch without the caller starts now; a resolver that
    ///         was never activated just stops its activation). The bond stays locked, and
    ///         slashable, for `unbondingDelay`.
    function requestExit() external {
        uint256 resolver = _indexOf(msg.sender);
        Resolver storage r = _resolvers[resolver];
        if (r.exitRequestedAt != 0) revert AlreadyExiting(resolver);
        if (r.slashed) revert NothingToWithdraw(resolver);
        r.exitRequestedAt = block.timestamp.toUint64();
        _leave(resolver);
        emit ExitRequested(resolver, msg.sender, block.timestamp + unbondingDelay);
    }

    /// @notice Returns the caller's remaining bond once its unbonding delay is over.
    function withdraw() external nonReentrant {
        uint256 resolver = _indexOf(msg.sender);
        Resolver storage r = _resolvers[resolver];
        if (r.exitRequestedAt == 0) revert NotExiting(resolver);
        uint256 availableAt = _withdrawableAt(r);
        if (block.timestamp < availableAt) revert UnbondingNotOver(resolver, availableAt);
        uint256 amount = r.bond;
        if (amount == 0 || r.withdrawn) revert NothingToWithdraw(resolver);
        r.bond = 0;
        r.withdrawn = true;
        bondToken.safeTransfer(msg.sender, amount);
        emit Withdrawn(resolver, msg.sender, amount);
    }

    /// @notice Sends the caller's credited slashing proceeds to `to`.
    /// @return amount The amount sent.
    function claim(address to) external nonReentrant returns (uint256 amount) {
        if (to == address(0)) revert ZeroAddress();
        amount = claimable[msg.sender];
        if (amount == 0) revert NothingToClaim(msg.sender);
        claimable[msg.sender] = 0;
        emit Claimed(msg.sender, to, amount);
        bondToken.safeTransfer(to, amount);
    }

    // ------------------------------------------------------------------ parameters

    /// @notice Schedules the smallest resolver fee escrows accept for deals in `token`
    ///         (checked at funding only). Takes effect `parameterDelay()` from now.
    function setMinResolverFee(IERC20 token, uint256 minimum) external onlyOwner {
        uint256 at = _schedule(_minResolverFee[token], minimum);
        emit MinResolverFeeSet(token, minimum, at);
    }

    /// @notice Schedules the most of a resolver fee in `token` credited to `resolve`'s
    ///         submitter. Takes effect `parameterDelay()` from now; a dispute pins the value in
    ///         force when it is challenged.
    function setGasRefundCap(IERC20 token, uint256 cap) external onlyOwner {
        uint256 at = _schedule(_gasRefundCap[token], cap);
        emit GasRefundCapSet(token, cap, at);
    }

    /// @notice Schedules the shortest resolve window escrows accept (checked at funding only),
    ///         within `[min(MIN_RESOLVE_WINDOW_FLOOR, maxResolveWindow), maxResolveWindow]`
    ///         and long enough for the latest commit-reveal setting. Takes effect
    ///         `parameterDelay()` from now.
    function setMinResolveWindow(uint256 window) external onlyOwner {
        uint256 floor = _min(MIN_RESOLVE_WINDOW_FLOOR, maxResolveWindow);
        if (window < floor || window > maxResolveWindow) {
            revert ParameterOutOfRange("minResolveWindow", window, floor, maxResolveWindow);
        }
        uint256 latest = _latestCommitReveal();
        if (!_commitRevealFits(latest, window)) {
            uint256 needed = (2 * COMMIT_REVEAL_WINDOWS * latest + 999) / 1000;
            revert ParameterOutOfRange("minResolveWindow", window, needed, maxResolveWindow);
        }
        uint256 at = _schedule(_minResolveWindow, window);
        emit MinResolveWindowSet(window, at);
    }

    /// @notice Schedules the most a whistleblower is credited per resolver it slashes (in bond
    ///         tokens; the share is `min(bond * whistleblowerBps / 10000, cap)`). Takes effect
    ///         `parameterDelay()` from now.
    function setWhistleblowerCap(uint256 cap) external onlyOwner {
        uint256 at = _schedule(_whistleblowerCap, cap);
        emit WhistleblowerCapSet(cap, at);
    }

    /// @notice Sets the commit-reveal setting of the epochs that start from now on (0 = off,
    ///         otherwise the commit phase's timeout in milliseconds); the current epoch, and so
    ///         every open dispute, keeps its pinned value (`commitRevealMsAt`). Bounded:
    ///         `COMMIT_REVEAL_WINDOWS` phases must fit in half of both the minimum resolve
    ///         window in force and the one scheduled. Only stored here; the nodes implement it.
    function setCommitRevealMs(uint32 commitPhaseMs) external onlyOwner {
        uint256 window = _smallestMinResolveWindow();
        if (!_commitRevealFits(commitPhaseMs, window)) {
            revert ParameterOutOfRange(
                "commitRevealMs", commitPhaseMs, 0, window * 1000 / (2 * COMMIT_REVEAL_WINDOWS)
            );
        }
        uint256 from = _epochs.length;
        uint256 n = _commitReveal.length;
        if (n > 0 && _commitReveal[n - 1].fromEpoch == from) {
            _commitReveal[n - 1].commitPhaseMs = commitPhaseMs;
        } else {
            _commitReveal.push(
                CommitRevealCheckpoint({fromEpoch: from.toUint64(), commitPhaseMs: commitPhaseMs})
            );
        }
        emit CommitRevealSet(commitPhaseMs, from);
    }

    /// @inheritdoc IResolverRegistry
    function minResolverFee(IERC20 token) external view returns (uint256) {
        return _get(_minResolverFee[token]);
    }

    /// @inheritdoc IResolverRegistry
    function gasRefundCap(IERC20 token) external view returns (uint256) {
        return _get(_gasRefundCap[token]);
    }

    /// @inheritdoc IResolverRegistry
    function minResolveWindow() external view returns (uint256) {
        return _get(_minResolveWindow);
    }

    /// @notice The most a whistleblower is credited per resolver it slashes, in bond tokens.
    function whistleblowerCap() public view returns (uint256) {
        return _get(_whistleblowerCap);
    }

    /// @notice The pending change of a timelocked parameter (`which`: "minResolverFee" and
    ///         "gasRefundCap" of `token`, "minResolveWindow", "whistleblowerCap"): the value
    ///         and when it takes effect (0 if none is pending).
    function scheduled(string calldata which, IERC20 token)
        external
        view
        returns (uint256 next, uint256 effectiveAt)
    {
        bytes32 k = keccak256(bytes(which));
        Timelocked storage p;
        if (k == keccak256("minResolverFee")) p = _minResolverFee[token];
        else if (k == keccak256("gasRefundCap")) p = _gasRefundCap[token];
        else if (k == keccak256("minResolveWindow")) p = _minResolveWindow;
        else if (k == keccak256("whistleblowerCap")) p = _whistleblowerCap;
        else revert InvalidParameters(which);
        if (p.effectiveAt == 0 || block.timestamp >= p.effectiveAt) return (0, 0);
        return (p.next, p.effectiveAt);
    }

    /// @notice How long an owner change waits before it takes effect: the warm-up of new
    ///         stake, at least every deal's funding-to-last-challenge span, so a deal pins at
    ///         its challenge either the value in force when it was funded or one already
    ///         announced then. Changes are immediate while no committee ever existed (no deal
    ///         can have been funded).
    function parameterDelay() public view returns (uint256) {
        return activationDelay;
    }

    /// @inheritdoc IResolverRegistry
    function commitRevealMs() external view returns (uint32) {
        return commitRevealMsAt(_epochs.length - 1);
    }

    /// @inheritdoc IResolverRegistry
    function commitRevealMsAt(uint256 epoch) public view returns (uint32) {
        uint256 i = _commitReveal.length;
        while (i > 0) {
            CommitRevealCheckpoint storage c = _commitReveal[--i];
            if (c.fromEpoch <= epoch) return c.commitPhaseMs;
        }
        return 0;
    }

    /// @inheritdoc IResolverRegistry
    /// @dev Virtual only so that test/invariant can break it.
    function rewardInfo(uint256 resolver)
        external
        view
        virtual
        returns (
            address operator,
            uint256 stake,
            uint256 joinedEpoch,
            uint256 leftEpoch,
            bool slashed
        )
    {
        Resolver storage r = _resolvers[resolver];
        Membership storage m = _memberships[resolver];
        return (r.operator, m.stake, m.joinedEpoch, m.leftEpoch, r.slashed);
    }

    /// @inheritdoc IResolverRegistry
    function slashRecipients(uint256 resolver)
        external
        view
        returns (address whistleblower, uint256 shareBps, address sink)
    {
        whistleblower = slashedBy(resolver);
        shareBps = whistleblower == address(0) ? 0 : whistleblowerBps;
        sink = slashSink;
    }

    // ------------------------------------------------------------------ certificates

    /// @inheritdoc IResolverRegistry
    function currentEpoch() public view returns (uint256) {
        return _epochs.length - 1;
    }

    /// @inheritdoc IResolverRegistry
    function currentCommittee() external view returns (uint256 epoch, uint256 totalStake) {
        epoch = _epochs.length - 1;
        totalStake = _epochs[epoch].totalStake;
    }

    /// @notice Earliest time `index` may be activated (0 if never registered).
    function activatesAt(uint256 index) external view returns (uint256) {
        return _activatesAt[index];
    }

    /// @inheritdoc IResolverRegistry
    /// @dev `nonSigners` are registry indices, strictly ascending, members of `epoch`. Reverts
    ///      with UnknownEpoch, StaleEpoch, IndicesNotAscending, NotAMember, BelowThreshold or
    ///      InvalidSignature (or a BLS library error for malformed points).
    function verifyCertificate(
        uint256 epoch,
        bytes32 digest,
        uint256[] calldata nonSigners,
        bytes calldata signature
    ) external view returns (uint256 signedStake, uint256 totalStake) {
        Epoch storage e = _epoch(epoch);
        _checkFresh(epoch);
        totalStake = e.totalStake;
        uint256 missing;
        for (uint256 i; i < nonSigners.length; ++i) {
            if (i > 0 && nonSigners[i] <= nonSigners[i - 1]) revert IndicesNotAscending(i);
            missing += _member(nonSigners[i], epoch).stake;
        }
        signedStake = totalStake - missing;
        if (!meetsThreshold(signedStake, totalStake)) {
            revert BelowThreshold(signedStake, totalStake, thresholdNumerator, thresholdDenominator);
        }
        bytes memory key = BLS.subtractStored(e.aggregateKey, _keys, nonSigners);
        if (!BLS.verifyDigest(key, digest, signature)) revert InvalidSignature();
    }

    /// @notice The quorum rule: `signedStake / totalStake >= numerator / denominator`, exactly
    ///         (no rounding; with 2/3, two of three equal members are a quorum). An empty
    ///         committee has no quorum. resolvd-consensus `Threshold::is_met` is the same rule.
    function meetsThreshold(uint256 signedStake, uint256 totalStake)
        public
        view
        virtual
        returns (bool)
    {
        return totalStake != 0 && signedStake <= totalStake
            && signedStake * thresholdDenominator >= totalStake * thresholdNumerator;
    }

    /// @notice The threshold rounded up to basis points. Deprecated: a check in basis points is
    ///         at least as strict as the exact rule but can demand more signers (6667 bps needs
    ///         3 of 3 where 2/3 needs 2 of 3); use `thresholdNumerator / thresholdDenominator`.
    function thresholdBps() external view returns (uint256) {
        return (thresholdNumerator * BPS + thresholdDenominator - 1) / thresholdDenominator;
    }

    // ------------------------------------------------------------------ slashing    // ------------------------------------------------------------------ slashing

    /// @notice Slashes every resolver that signed both `a` and `b`: two aggregates over
    ///         different commitments for the same deal under the same verdict domain. Each is
    ///         verified against its own epoch. A resolver is slashed at most once (its whole
    ///         remaining bond); resolvers already slashed are skipped. The ones still in the
    ///         committee leave it through one new epoch. Proceeds are credited, not sent:
    ///         `min(bond * whistleblowerBps / 10000, whistleblowerCap())` per resolver to the
    ///         caller (nothing if the caller operates an equivocator or a slashed resolver),
    ///         the rest to `slashSink`. Permissionless.
    /// @dev Gas: the two evidence checks (a stored-key load, a membership read and a G1ADD per
    ///      listed signer, two pairings) plus about 33k per slashed resolver; measured in
    ///      test/EscrowGas.t.sol (`slashEquivocation-<n>-of-<n>`) and
    ///      test/EconomicsSoundness.t.sol. A coalition too large for one transaction is slashed
    ///      across several with `slashEquivocationUpTo`.
    /// @param domainSeparator EIP-712 domain separator of the escrow the verdicts were signed for.
    /// @return slashed Number of resolvers slashed by this call.
    function slashEquivocation(bytes32 domainSeparator, Evidence calldata a, Evidence calldata b)
        external
        nonReentrant
        returns (uint256 slashed)
    {
        return _slashEquivocation(domainSeparator, a, b, type(uint256).max);
    }

    /// @notice `slashEquivocation`, slashing at most `maxSlashed` resolvers not yet slashed (the
    ///         lowest indices first). Calling it again with the same evidence continues where
    ///         the last call stopped, so any coalition is slashed in transactions of bounded
    ///         gas. Reverts `NoEquivocator` once every equivocator of the pair is slashed.
    function slashEquivocationUpTo(
        bytes32 domainSeparator,
        Evidence calldata a,
        Evidence calldata b,
        uint256 maxSlashed
    ) external nonReentrant returns (uint256 slashed) {
        if (maxSlashed == 0) revert NoEquivocator();
        return _slashEquivocation(domainSeparator, a, b, maxSlashed);
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
        t.cap = t.rewarded ? whistleblowerCap() : 0;
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
                last.members - nLeaving
            );
        }
        if (t.rewards > 0) claimable[msg.sender] += t.rewards;
        if (t.toSink > 0) claimable[slashSink] += t.toSink;
    }

    /// @notice Sends the slash sink's credited proceeds to it. Permissionless, so proceeds
    ///         leave the registry even when the sink is a burn address no one can call from.
    /// @return amount The amount sent.
    function flushSink() external nonReentrant returns (uint256 amount) {
        address sink = slashSink;
        amount = claimable[sink];
        if (amount == 0) revert NothingToClaim(sink);
        claimable[sink] = 0;
        emit Claimed(sink, sink, amount);
        bondToken.safeTransfer(sink, amount);
    }

    /// @inheritdoc IResolverRegistry
    function slashedStake(uint256 epoch, uint256[] calldata nonSigners)
        external
        view
        returns (uint256 total, uint256 signed)
    {
        uint256 n = _slashRecords.length;
        if (n == 0 || _slashRecords[n - 1].nextEpoch <= epoch) return (0, 0);
        // The first call that ran while `epoch` or a later one was current (nextEpoch only
        // grows); every member of `epoch` slashed since is in the log from its position on.
        uint256 lo;
        uint256 hi = n - 1;
        while (lo < hi) {
            uint256 mid = (lo + hi) / 2;
            if (_slashRecords[mid].nextEpoch > epoch) hi = mid;
            else lo = mid + 1;
        }
        uint256 start = _slashRecords[lo].firstSlashed;
        uint256 end = _slashedLogLength;
        uint256 word = _slashedLog[start / 8];
        for (uint256 p = start; p < end; ++p) {
            if (p % 8 == 0 && p != start) word = _slashedLog[p / 8];
            uint256 index = (word >> (32 * (p % 8))) & 0xffffffff;
            if (!isMember(index, epoch)) continue;
            uint256 stake = _memberships[index].stake;
            total += stake;
            if (!_contains(nonSigners, index)) signed += stake;
        }
    }

    /// @notice Whether `index` was slashed by evidence for `dealId` of the verdict domain
    ///         `domainSeparator`.
    function slashedFor(bytes32 domainSeparator, bytes32 dealId, uint256 index)
        external
        view
        returns (bool)
    {
        uint256 rec = _resolvers[index].slashRecord;
        if (rec == 0) return false;
        SlashRecord storage x = _slashRecords[rec - 1];
        return x.domainSeparator == domainSeparator && x.dealId == dealId;
    }

    /// @notice The whistleblower credited for slashing `index` (zero if none was).
    function slashedBy(uint256 index) public view returns (address) {
        uint256 rec = _resolvers[index].slashRecord;
        return rec == 0 ? address(0) : _slashRecords[rec - 1].whistleblower;
    }

    // ------------------------------------------------------------------ views

    /// @notice A resolver's registry entry and membership.
    function resolverInfo(uint256 index)
        external
        view
        returns (Resolver memory entry, Membership memory membership, bytes memory publicKey)
    {
        return (_resolvers[index], _memberships[index], BLS.unpackG1(_keys[index]));
    }

    /// @notice An epoch's aggregate key, total stake, member count and start time.
    function epochInfo(uint256 epoch)
        external
        view
        returns (bytes memory aggregateKey, uint256 totalStake, uint256 members, uint256 startedAt)
    {
        Epoch storage e = _epoch(epoch);
        return (BLS.unpackG1(e.aggregateKey), e.totalStake, e.members, e.startedAt);
    }

    /// @notice Whether `index` is a member of `epoch`.
    function isMember(uint256 index, uint256 epoch) public view returns (bool) {
        Membership storage m = _memberships[index];
        return
            m.joinedEpoch != 0 && m.joinedEpoch <= epoch
                && (m.leftEpoch == 0 || epoch < m.leftEpoch);
    }

    // ------------------------------------------------------------------ internals

    /// @dev A timelocked parameter's value now.
    function _get(Timelocked storage p) internal view returns (uint256) {
        uint256 at = p.effectiveAt;
        return at != 0 && block.timestamp >= at ? p.next : p.value;
    }

    /// @dev Schedules `v` (clamped to uint128) for `parameterDelay()` from now, or now while no
    ///      committee ever existed. Replaces a change still pending.
    function _schedule(Timelocked storage p, uint256 v) internal returns (uint256 at) {
        p.value = uint128(_get(p));
        at = _epochs.length == 1 ? block.timestamp : block.timestamp + parameterDelay();
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

    /// @dev Fresh: the current epoch, or one whose successor started at most
    ///      `maxResolveWindow` ago. Its members left no earlier than that successor's start,
    ///      so they stay bonded until at least `now + slashingWindow` (`unbondingDelay >
    ///      maxResolveWindow + slashingWindow`).
    function _checkFresh(uint256 epoch) internal view virtual {
        if (epoch + 1 == _epochs.length) return;
        uint256 endedAt = _epochs[epoch + 1].startedAt;
        uint256 freshUntil = endedAt + maxResolveWindow;
        if (block.timestamp > freshUntil) revert StaleEpoch(epoch, endedAt, freshUntil);
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

    function _pushEpoch(bytes memory aggregateKey, uint256 totalStake, uint256 members) internal {
        uint256 epoch = _epochs.length;
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
        _pushEpoch(
            BLS.addG1(BLS.unpackG1(last.aggregateKey), key),
            uint256(last.totalStake) - m.stake,
            last.members - 1
        );
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
