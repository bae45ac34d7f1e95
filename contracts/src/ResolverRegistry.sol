// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";

import {IResolverRegistry, RegistryParameters} from "./interfaces/IResolverRegistry.sol";
import {BLS} from "./libraries/BLS.sol";
import {Delegate} from "./libraries/Delegate.sol";

import {RegistrySlashing} from "./RegistrySlashing.sol";
import {ResolverRegistryStorage} from "./ResolverRegistryStorage.sol";

/// @title ResolverRegistry
/// @notice Bonded BLS resolvers, committee epochs, quorum-certificate verification and
///         permissionless equivocation slashing.
/// @dev Resolvers get a permanent index at registration and join the committee only through
///      `activate`, at least `activationDelay` later (warm-up): stake bought at the last moment
///      cannot decide a dispute, because escrows only fund deals whose deliver + challenge
///      windows fit in the warm-up, and a dispute pins the committee its deal was funded
///      against (`committeeFor`: the epoch before the first activation after the funding), so
///      every member of a deal's pinned epoch was a member when the deal was funded. An epoch
///      is the set of resolvers whose
///      membership interval [joinedEpoch, leftEpoch) contains it; each epoch stores its
///      aggregate key and total stake and deploys its member list as code (ascending index),
///      and each resolver's key and stake live in a record contract deployed at registration,
///      so a certificate costs one member-list read plus, per non-signer, one record read and
///      one G1ADD. Stake is the bond at
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
contract ResolverRegistry is ResolverRegistryStorage, IResolverRegistry {
    using SafeERC20 for IERC20;
    using SafeCast for uint256;

    /// @notice The RegistrySlashing contract this registry runs slashing, proceeds and the
    ///         owner's settings on (by DELEGATECALL from the fallback, on this contract's
    ///         storage): deployed by the constructor, never changed.
    address public immutable slashing;

    constructor(RegistryParameters memory p) ResolverRegistryStorage(p) {
        slashing = _deploySlashing(p);
    }

    /// @notice Every function of RegistrySlashing, run on this contract's storage. Its
    ///         functions are not payable, so a call with value reverts.
    fallback() external {
        Delegate.forward(slashing);
    }

    /// @inheritdoc IResolverRegistry
    function maxResolveWindow() external view returns (uint256) {
        return _maxResolveWindow;
    }

    /// @inheritdoc IResolverRegistry
    function activationDelay() external view returns (uint256) {
        return _activationDelay;
    }

    /// @inheritdoc IResolverRegistry
    function minimumCommitteeStake() external view returns (uint256) {
        return _minimumCommitteeStake;
    }

    /// @notice Receiver of the rest of a slashed bond.
    function slashSink() external view returns (address) {
        return _slashSink;
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
        _deployRecord(index, publicKey, bond);
        _memberships[index] = Membership({stake: bond.toUint128(), joinedEpoch: 0, leftEpoch: 0});
        _resolvers[index] = Resolver({
            operator: msg.sender,
            exitRequestedAt: 0,
            slashed: false,
            withdrawn: false,
            bond: bond.toUint128(),
            slashRecord: 0
        });
        uint256 activatesAt = block.timestamp + _activationDelay;
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
    ///         warm-up): every registration that can join before a deal's last challenge was
    ///         made at most twice the warm-up before the deal was funded, and is public from
    ///         then on. Activating it never changes the committee of a deal funded before: a
    ///         dispute pins the epoch before the first activation after its funding
    ///         (`committeeFor`), whatever block the activation lands in.
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
        if (last.members + n > MAX_COMMITTEE_SIZE) {
            revert CommitteeFull(last.members, n, MAX_COMMITTEE_SIZE);
        }
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
            if (block.timestamp > at + _activationDelay) {
                revert ActivationExpired(index, at + _activationDelay);
            }
            m.joinedEpoch = epoch.toUint64();
            stake += m.stake;
            // An empty committee's aggregate is the identity (all zero), which G1ADD accepts.
            key = BLS.addG1(key, BLS.unpackG1(_keys[index]));
            emit ResolverActivated(index, epoch);
        }
        _activationEpochs.push(epoch.toUint64());
        _pushEpoch(key, stake, last.members + n, _merge(_listOf(epoch - 1), indices));
    }

    /// @notice Starts a new warm-up for the caller's expired registration (never activated, not
    ///         exiting, not slashed): it can be activated `activationDelay` from now.
    function renewActivation() external {
        uint256 index = _indexOf(msg.sender);
        Resolver storage r = _resolvers[index];
        if (_memberships[index].joinedEpoch != 0 || r.exitRequestedAt != 0 || r.slashed) {
            revert NotPending(index);
        }
        uint256 expiry = uint256(_activatesAt[index]) + _activationDelay;
        if (block.timestamp <= expiry) revert ActivationPending(index, expiry + 1);
        uint256 activatesAt_ = block.timestamp + _activationDelay;
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

    // ------------------------------------------------------------------ parameters

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

    /// @notice How long an owner change waits before it takes effect: the warm-up of new
    ///         stake, at least every deal's funding-to-last-challenge span, so a deal pins at
    ///         its challenge either the value in force when it was funded or one already
    ///         announced then. Changes are immediate while no committee ever existed (no deal
    ///         can have been funded).
    function parameterDelay() public view returns (uint256) {
        return _activationDelay;
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
        sink = _slashSink;
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

    /// @inheritdoc IResolverRegistry
    function committeeFor(uint256 fundedEpoch)
        external
        view
        returns (uint256 epoch, uint256 totalStake)
    {
        epoch = _epochs.length - 1;
        uint64[] storage a = _activationEpochs;
        uint256 n = a.length;
        if (n != 0 && a[n - 1] > fundedEpoch) {
            // The first activation after `fundedEpoch`: pin the epoch just before it.
            uint256 lo;
            uint256 hi = n - 1;
            while (lo < hi) {
                uint256 mid = (lo + hi) >> 1;
                if (a[mid] > fundedEpoch) hi = mid;
                else lo = mid + 1;
            }
            epoch = uint256(a[lo]) - 1;
        }
        totalStake = _epochs[epoch].totalStake;
    }

    /// @notice Earliest time `index` may be activated (0 if never registered).
    function activatesAt(uint256 index) external view returns (uint256) {
        return _activatesAt[index];
    }

    /// @inheritdoc IResolverRegistry
    /// @dev `nonSigners` are registry indices, strictly ascending, members of `epoch`; they are
    ///      turned into the position bitmap of the other overload (a binary search each).
    ///      Reverts with UnknownEpoch, StaleEpoch, IndicesNotAscending, NotAMember,
    ///      BelowThreshold or InvalidSignature (or a BLS library error for malformed points).
    function verifyCertificate(
        uint256 epoch,
        bytes32 digest,
        uint256[] calldata nonSigners,
        bytes calldata signature
    ) external view returns (uint256 signedStake, uint256 totalStake) {
        return _verifyCertificate(epoch, digest, signerBitmap(epoch, nonSigners), signature);
    }

    /// @inheritdoc IResolverRegistry
    /// @dev Costs one cold read of the epoch's member list plus, per non-signer, one cold
    ///      account access (its record: key and stake) and one G1ADD (ECONOMICS.md, Gas).
    ///      Reverts with UnknownEpoch, StaleEpoch, BitmapTooLong, PositionOutOfRange,
    ///      BelowThreshold or InvalidSignature.
    function verifyCertificate(
        uint256 epoch,
        bytes32 digest,
        bytes calldata nonSigners,
        bytes calldata signature
    ) external view returns (uint256 signedStake, uint256 totalStake) {
        return _verifyCertificate(epoch, digest, nonSigners, signature);
    }

    /// @inheritdoc IResolverRegistry
    function verifySigners(
        uint256 epoch,
        bytes32 digest,
        bytes calldata signers,
        bytes calldata signature
    ) external view returns (uint256 stake) {
        Epoch storage e = _epoch(epoch);
        bytes memory key;
        (key, stake) = _sumRecords(epoch, e.members, signers, new bytes(BLS.G1_LENGTH), false);
        if (stake == 0) revert EmptySignerSet();
        if (!BLS.verifyDigest(key, digest, signature)) revert InvalidSignature();
    }

    /// @inheritdoc IResolverRegistry
    function signerBitmap(uint256 epoch, uint256[] calldata indices)
        public
        view
        returns (bytes memory bitmap)
    {
        uint256 n = _epoch(epoch).members;
        address list = _memberList[epoch];
        bitmap = new bytes((n + 7) / 8);
        uint256 lo;
        for (uint256 i; i < indices.length; ++i) {
            uint256 index = indices[i];
            if (i > 0 && index <= indices[i - 1]) revert IndicesNotAscending(i);
            (bool found, uint256 position) = _search(list, lo, n, index);
            if (!found) revert NotAMember(index, epoch);
            bitmap[position >> 3] |= bytes1(uint8(1 << (position & 7)));
            lo = position + 1;
        }
    }

    /// @inheritdoc IResolverRegistry
    function positionOf(uint256 epoch, uint256 index) external view returns (uint256 position) {
        uint256 n = _epoch(epoch).members;
        bool found;
        (found, position) = _search(_memberList[epoch], 0, n, index);
        if (!found) revert NotAMember(index, epoch);
    }

    /// @notice `epoch`'s members by position (ascending registry index): position `p` of a
    ///         certificate bitmap is `epochMembers(epoch)[p]`.
    function epochMembers(uint256 epoch) external view returns (uint256[] memory) {
        _epoch(epoch);
        return _listOf(epoch);
    }

    /// @notice The address of `index`'s record contract (its key and stake as code).
    function recordOf(uint256 index) public view returns (address) {
        return address(
            uint160(
                uint256(
                    keccak256(
                        abi.encodePacked(
                            bytes1(0xff), address(this), bytes32(index), keccak256(RECORD_INIT)
                        )
                    )
                )
            )
        );
    }

    /// @notice Called back by a record's init code during `register`: returns the record being
    ///         deployed (raw bytes, not ABI-encoded). Empty outside `register`.
    function recordCode() external view {
        assembly ("memory-safe") {
            let p := mload(0x40)
            for { let i := 0 } lt(i, 5) { i := add(i, 1) } {
                mstore(add(p, shl(5, i)), tload(add(RECORD_TSLOT, i)))
            }
            return(p, RECORD_LENGTH)
        }
    }

    /// @notice The quorum rule: `signedStake / totalStake >= numerator / denominator`, exactly
    ///         (no rounding; with 2/3, two of three equal members are a quorum). An empty
    ///         committee has no quorum. resolvd-consensus `Threshold::is_met` is the same rule.
    function meetsThreshold(uint256 signedStake, uint256 totalStake) external view returns (bool) {
        return _meetsThreshold(signedStake, totalStake);
    }

    /// @notice The threshold rounded up to basis points. Deprecated: a check in basis points is
    ///         at least as strict as the exact rule but can demand more signers (6667 bps needs
    ///         3 of 3 where 2/3 needs 2 of 3); use `thresholdNumerator / thresholdDenominator`.
    function thresholdBps() external view returns (uint256) {
        return (thresholdNumerator * BPS + thresholdDenominator - 1) / thresholdDenominator;
    }

    // ------------------------------------------------------------------ slashing

    /// @inheritdoc IResolverRegistry
    function slashedStake(uint256 epoch, uint256[] calldata nonSigners)
        external
        view
        returns (uint256 total, uint256 signed)
    {
        if (_firstRecordSince(epoch) == type(uint256).max) return (0, 0);
        return _slashedStake(epoch, signerBitmap(epoch, nonSigners));
    }

    /// @inheritdoc IResolverRegistry
    function slashedStake(uint256 epoch, bytes calldata nonSigners)
        external
        view
        returns (uint256 total, uint256 signed)
    {
        return _slashedStake(epoch, nonSigners);
    }

    /// @dev The first slashing call that ran while `epoch` or a later one was current
    ///      (`type(uint256).max`: none). Every member of `epoch` slashed since it started was
    ///      slashed by that call or a later one, and appears in the slashed-member log from that
    ///      call's `firstSlashed` on.
    function _firstRecordSince(uint256 epoch) internal view returns (uint256) {
        uint256 n = _slashRecords.length;
        if (n == 0 || _slashRecords[n - 1].nextEpoch <= epoch) return type(uint256).max;
        // nextEpoch only grows.
        uint256 lo;
        uint256 hi = n - 1;
        while (lo < hi) {
            uint256 mid = (lo + hi) / 2;
            if (_slashRecords[mid].nextEpoch > epoch) hi = mid;
            else lo = mid + 1;
        }
        return lo;
    }

    /// @dev `slashedStake` with the non-signers as a position bitmap of `epoch`. Scans the
    ///      shorter of two lists, so it reads at most `members(epoch) <= MAX_COMMITTEE_SIZE`
    ///      entries however many resolvers were slashed since: the slashed-member log from the
    ///      first call since `epoch` started (a membership read per entry, a binary search in
    ///      the member list per member of `epoch`), or `epoch`'s member list (a read of each
    ///      member's slash record, plus its stake if that call ran since).
    function _slashedStake(uint256 epoch, bytes memory nonSigners)
        internal
        view
        returns (uint256 total, uint256 signed)
    {
        uint256 first = _firstRecordSince(epoch);
        if (first == type(uint256).max) return (0, 0);
        uint256 start = _slashRecords[first].firstSlashed;
        uint256 end = _slashedLogLength;
        uint256 members = _epochs[epoch].members;
        if (end - start > members) return _slashedMembers(epoch, first, nonSigners);
        address list = _memberList[epoch];
        uint256 word = _slashedLog[start / 8];
        for (uint256 p = start; p < end; ++p) {
            if (p % 8 == 0 && p != start) word = _slashedLog[p / 8];
            uint256 index = (word >> (32 * (p % 8))) & 0xffffffff;
            if (!isMember(index, epoch)) continue;
            uint256 stake = _memberships[index].stake;
            total += stake;
            (, uint256 position) = _search(list, 0, members, index);
            if (!_named(nonSigners, position)) signed += stake;
        }
    }

    /// @dev `_slashedStake` over `epoch`'s member list: the members whose slash record is
    ///      `first` or later (record ids are one more than the call's position).
    function _slashedMembers(uint256 epoch, uint256 first, bytes memory nonSigners)
        internal
        view
        returns (uint256 total, uint256 signed)
    {
        uint256[] memory list = _listOf(epoch);
        for (uint256 p; p < list.length; ++p) {
            uint256 index = list[p];
            if (_resolvers[index].slashRecord <= first) continue;
            uint256 stake = _memberships[index].stake;
            total += stake;
            if (!_named(nonSigners, p)) signed += stake;
        }
    }

    /// @dev Whether position `p` is set in a position bitmap.
    function _named(bytes memory bitmap, uint256 p) internal pure returns (bool) {
        uint256 at = p >> 3;
        return at < bitmap.length && (uint8(bitmap[at]) >> (p & 7)) & 1 == 1;
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

    /// @dev Deploys the slashing code. Virtual only so that test/mutants can break it.
    function _deploySlashing(RegistryParameters memory p) internal virtual returns (address) {
        return address(new RegistrySlashing(p));
    }
}
