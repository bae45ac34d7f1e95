// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {VerdictCommitment} from "../libraries/VerdictHash.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice Deployment parameters of a ResolverRegistry (ABI-encoded like the positional list).
struct RegistryParameters {
    /// @dev The bond token (ERC-20).
    IERC20 bondToken;
    /// @dev Smallest bond accepted.
    uint256 minimumBond;
    /// @dev Quorum threshold as an exact fraction of an epoch's stake:
    ///      `signed * thresholdDenominator >= total * thresholdNumerator` (default 2 / 3).
    uint256 thresholdNumerator;
    uint256 thresholdDenominator;
    /// @dev The longest resolve window an escrow may give a dispute.
    uint256 maxResolveWindow;
    /// @dev Time after a dispute's resolve deadline in which evidence is expected.
    uint256 slashingWindow;
    /// @dev Delay between `requestExit` and `withdraw`; > maxResolveWindow + slashingWindow.
    uint256 unbondingDelay;
    /// @dev Warm-up between `register` and the earliest `activate`; escrows only fund deals
    ///      whose deliver + challenge windows fit in it.
    uint256 activationDelay;
    /// @dev Smallest total stake a committee needs for a deal to be funded or disputed.
    uint256 minimumCommitteeStake;
    /// @dev Share of a slashed bond paid to the evidence submitter, in basis points.
    uint256 whistleblowerBps;
    /// @dev Receiver of the rest of a slashed bond.
    address slashSink;
}

/// @notice Errors of the ResolverRegistry.
interface IResolverRegistryErrors {
    error BondBelowMinimum(uint256 bond, uint256 minimum);
    error BondTransferMismatch(uint256 expected, uint256 received);
    error KeyAlreadyRegistered(bytes32 keyHash);
    error OperatorAlreadyRegistered(address operator);
    error InvalidProofOfPossession();
    error NotResolver(address who);
    error AlreadyExiting(uint256 resolver);
    error NotExiting(uint256 resolver);
    error UnbondingNotOver(uint256 resolver, uint256 availableAt);
    error NothingToWithdraw(uint256 resolver);
    error UnknownEpoch(uint256 epoch, uint256 current);
    error NotAMember(uint256 resolver, uint256 epoch);
    error IndicesNotAscending(uint256 position);
    error EmptySignerSet();
    error BelowThreshold(
        uint256 signedStake, uint256 totalStake, uint256 numerator, uint256 denominator
    );
    error StaleEpoch(uint256 epoch, uint256 endedAt, uint256 freshUntil);
    error InvalidSignature();
    error NotAConflict(bytes32 dealIdA, bytes32 dealIdB);
    error SameCommitment();
    error NoEquivocator();
    error InvalidParameters(string reason);
    error NotPending(uint256 resolver);
    error ActivationPending(uint256 resolver, uint256 activatesAt);
    error UnknownResolver(uint256 resolver, uint256 count);
    error NothingToActivate();
    error NothingToClaim(address account);
    error ZeroAddress();
    /// @notice RegistrySlashing was called directly, not by DELEGATECALL from its registry.
    error NotThroughRegistry();
    error CommitteeFull(uint256 members, uint256 adding, uint256 maximum);
    error BitmapTooLong(uint256 length, uint256 maximum);
    error PositionOutOfRange(uint256 position, uint256 members);
    error RecordNotDeployed(uint256 index);
    error ActivationExpired(uint256 resolver, uint256 expiredAt);
    error ParameterOutOfRange(string which, uint256 value, uint256 minimum, uint256 maximum);
}

/// @notice Events of the ResolverRegistry.
interface IResolverRegistryEvents {
    event ResolverRegistered(
        uint256 indexed resolver, address indexed operator, bytes32 indexed keyHash, uint256 bond
    );
    event ExitRequested(uint256 indexed resolver, address indexed operator, uint256 withdrawableAt);
    event Withdrawn(uint256 indexed resolver, address indexed operator, uint256 amount);
    event ActivationScheduled(uint256 indexed resolver, uint256 activatesAt);
    event ResolverActivated(uint256 indexed resolver, uint256 indexed epoch);
    event EpochStarted(uint256 indexed epoch, uint256 totalStake, uint256 members);
    event Claimed(address indexed account, address indexed to, uint256 amount);
    event Slashed(
        uint256 indexed resolver,
        bytes32 indexed dealId,
        address indexed whistleblower,
        uint256 reward,
        uint256 toSink
    );
    /// @notice The owner scheduled the smallest resolver fee escrows accept in `token`, in
    ///         force from `effectiveAt`.
    event MinResolverFeeSet(IERC20 indexed token, uint256 minimum, uint256 effectiveAt);
    /// @notice The owner scheduled the most of a fee in `token` paid to `resolve`'s submitter,
    ///         in force from `effectiveAt` (a dispute pins the value at its challenge).
    event GasRefundCapSet(IERC20 indexed token, uint256 cap, uint256 effectiveAt);
    /// @notice The owner scheduled the shortest resolve window escrows accept.
    event MinResolveWindowSet(uint256 window, uint256 effectiveAt);
    /// @notice The owner scheduled the most a whistleblower gets per slashed resolver.
    event WhistleblowerCapSet(uint256 cap, uint256 effectiveAt);
    /// @notice The owner set the commit-reveal setting (0 = off, else the commit phase's
    ///         timeout in milliseconds) of every epoch from `fromEpoch` on.
    event CommitRevealSet(uint32 commitPhaseMs, uint256 fromEpoch);
}

/// @notice An aggregate signature over one commitment by an explicit signer set.
struct Evidence {
    VerdictCommitment commitment;
    uint256 epoch;
    /// @dev Registry indices of the signers, strictly ascending, members of `epoch`.
    uint256[] signers;
    /// @dev EIP-2537 G2 aggregate signature (256 bytes).
    bytes signature;
}

/// @notice What the Escrow needs from the registry.
interface IResolverRegistry {
    /// @notice The current epoch: what a deal funded now is funded against (a dispute pins
    ///         `committeeFor` of it at its challenge) and what an Attestor request pins.
    function currentEpoch() external view returns (uint256);

    /// @notice The current epoch and its total stake.
    function currentCommittee() external view returns (uint256 epoch, uint256 totalStake);

    /// @notice The committee a dispute funded while `fundedEpoch` was current pins: the current
    ///         epoch, unless stake was activated since `fundedEpoch`; then the epoch just before
    ///         the first such activation (the funding committee, less the members that left
    ///         before that activation). Stake that joined after the funding never judges the
    ///         deal, whenever it is activated (also in the challenge's block). O(log
    ///         activations), two reads when nothing was activated since.
    function committeeFor(uint256 fundedEpoch)
        external
        view
        returns (uint256 epoch, uint256 totalStake);

    /// @notice The longest resolve window an escrow may give a dispute.
    function maxResolveWindow() external view returns (uint256);

    /// @notice Warm-up of new stake: a registration joins the committee no earlier than this
    ///         long after it. An escrow must keep every deal's funding-to-last-challenge span
    ///         within it, so that only stake registered before funding can decide the deal.
    function activationDelay() external view returns (uint256);

    /// @notice The smallest committee stake a deal may be funded or disputed with.
    function minimumCommitteeStake() external view returns (uint256);

    /// @notice Verifies a quorum certificate against `epoch`; reverts unless valid. Only fresh
    ///         epochs are accepted: one no later epoch removed members from (the current one,
    ///         or one followed only by activations), or one whose first later epoch that
    ///         removed members started at most `maxResolveWindow` ago, so every member behind the
    ///         certificate is still bonded and slashable for at least `slashingWindow`. An
    ///         integrator pins `currentEpoch()` (or `committeeFor`) when its dispute opens and
    ///         resolves within `maxResolveWindow`, exactly like the Escrow; a certificate over
    ///         an older epoch reverts with `StaleEpoch(epoch, endedAt, freshUntil)` (`endedAt`:
    ///         the start of that first epoch that removed members), however valid its signature.
    function verifyCertificate(
        uint256 epoch,
        bytes32 digest,
        uint256[] calldata nonSigners,
        bytes calldata signature
    ) external view returns (uint256 signedStake, uint256 totalStake);

    /// @notice The same check with the non-signers named by position: bit `p & 7` of byte
    ///         `p >> 3` of `nonSigners` set means the member at position `p` of `epoch` (members
    ///         in ascending registry-index order, `epochMembers`) did not sign. At most
    ///         `ceil(members / 8)` bytes; no bit at or beyond `members`.
    function verifyCertificate(
        uint256 epoch,
        bytes32 digest,
        bytes calldata nonSigners,
        bytes calldata signature
    ) external view returns (uint256 signedStake, uint256 totalStake);

    /// @notice Verifies `signature` as the aggregate of the members of `epoch` at the positions
    ///         set in `signers` (same bitmap layout) over `digest`, and returns their stake.
    ///         Reverts EmptySignerSet for an empty set, InvalidSignature, and the bitmap errors.
    ///         Any past epoch counts (a late signer proves work already certified).
    function verifySigners(
        uint256 epoch,
        bytes32 digest,
        bytes calldata signers,
        bytes calldata signature
    ) external view returns (uint256 stake);

    /// @notice The position bitmap of `indices` (strictly ascending registry indices, members
    ///         of `epoch`), `ceil(members / 8)` bytes long.
    function signerBitmap(uint256 epoch, uint256[] calldata indices)
        external
        view
        returns (bytes memory);

    /// @notice The position of member `index` in `epoch` (reverts NotAMember).
    function positionOf(uint256 epoch, uint256 index) external view returns (uint256);

    /// @notice The smallest resolver fee a deal in `token` may be funded with (owner-set,
    ///         timelocked, default 0).
    function minResolverFee(IERC20 token) external view returns (uint256);

    /// @notice The most of a deal's resolver fee in `token` credited to the submitter of
    ///         `resolve` as a gas refund (owner-set, timelocked, default 0). An escrow pins it
    ///         per dispute at `challenge`.
    function gasRefundCap(IERC20 token) external view returns (uint256);

    /// @notice The shortest resolve window an escrow may fund a deal with (owner-set within
    ///         fixed bounds, timelocked).
    function minResolveWindow() external view returns (uint256);

    /// @notice The commit-reveal setting pinned by the current epoch (`commitRevealMsAt`).
    function commitRevealMs() external view returns (uint32);

    /// @notice The commit-reveal setting the nodes apply to disputes pinned to `epoch`: 0 =
    ///         off, otherwise the commit phase's timeout in milliseconds. Fixed once the epoch
    ///         started; an owner change applies to later epochs only.
    function commitRevealMsAt(uint256 epoch) external view returns (uint32);

    /// @notice The quorum rule: `signedStake / totalStake >= threshold`, exactly.
    function meetsThreshold(uint256 signedStake, uint256 totalStake) external view returns (bool);

    /// @notice The stake of `epoch`'s members slashed since `epoch` started, in total and the
    ///         part not named in `nonSigners` (strictly ascending; a certificate's non-signers).
    ///         Reads at most one entry per member of `epoch` (`MAX_COMMITTEE_SIZE`), however
    ///         many resolvers were slashed since: O(min(resolvers slashed since, members)), two
    ///         reads when there were none.
    function slashedStake(uint256 epoch, uint256[] calldata nonSigners)
        external
        view
        returns (uint256 total, uint256 signed);

    /// @notice The same with the non-signers as a position bitmap (`verifyCertificate`).
    function slashedStake(uint256 epoch, bytes calldata nonSigners)
        external
        view
        returns (uint256 total, uint256 signed);

    /// @notice Receiver of forfeited value that no whistleblower gets (immutable; a burn
    ///         address burns).
    function slashSink() external view returns (address);

    /// @notice What an escrow needs to pay `resolver`'s rewards: its operator, its stake (fixed
    ///         while a member), its membership interval `[joinedEpoch, leftEpoch)` (joinedEpoch
    ///         0: never a member; leftEpoch 0: still one) and whether it was slashed.
    function rewardInfo(uint256 resolver)
        external
        view
        returns (
            address operator,
            uint256 stake,
            uint256 joinedEpoch,
            uint256 leftEpoch,
            bool slashed
        );

    /// @notice Where a slashed resolver's forfeited value goes, as for its bond: `shareBps` of
    ///         it to `whistleblower` (zero address and 0 if the slash paid no whistleblower),
    ///         the rest to `sink`.
    function slashRecipients(uint256 resolver)
        external
        view
        returns (address whistleblower, uint256 shareBps, address sink);
}
