// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Outcome, VerdictCommitment} from "../libraries/VerdictHash.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice Seed 004's deal states.
enum DealState {
    None,
    Held,
    Delivered,
    Disputed,
    Resolved
}

/// @notice How a resolved deal ended.
enum Settlement {
    None,
    /// @dev Seller paid: buyer accepted, challenge window passed, or verdict Reproduced.
    Released,
    /// @dev Buyer refunded by a Failed verdict and reimbursed its resolver fee from the
    ///      seller's dispute deposit; the seller's DA bond returned.
    Refunded,
    /// @dev Buyer reclaimed an undelivered deal after the deliver deadline.
    Reclaimed,
    /// @dev No certificate by the resolve deadline: buyer refunded and paid the seller's DA bond;
    ///      the seller's dispute deposit returned.
    TimedOut,
    /// @dev Challenged while the registry's committee held less than its minimum stake, so no
    ///      verdict was possible: buyer refunded, DA bond and dispute deposit returned, nobody
    ///      marked.
    Cancelled,
    /// @dev An Attestor's request answered by a certificate: its attestation is recorded and
    ///      its fee accrued to the signers (Attestor; never an Escrow deal).
    Attested
}

/// @notice Terms a buyer funds. `dealId = keccak256(abi.encode(chainid, escrow, buyer, terms))`,
///         which also serves as the EIP-3009 nonce, so a relayer cannot alter any term (the
///         resolver fee and the challenge bond included).
struct Terms {
    address seller;
    IERC20 token;
    uint256 amount;
    bytes32 specHash;
    bytes32 prestateAnchorHash;
    bytes32 prestateRoot;
    bytes32 backendId;
    bytes32 backendVersionHash;
    /// @dev Seller data-availability bond, locked at delivery, forfeited only on timeout.
    uint256 sellerBond;
    /// @dev Paid by the buyer at `challenge`; on a certificate split among its signers by stake
    ///      (less the submitter's gas refund), on a timeout returned to the buyer. At least the
    ///      registry's `minResolverFee(token)`. The seller locks the same amount at delivery as
    ///      a dispute deposit, which reimburses the buyer on a Failed verdict (the loser pays).
    uint256 resolverFee;
    /// @dev Anti-griefing bond the buyer posts at `challenge`: returned on Failed and on a
    ///      timeout, paid to the seller on Reproduced.
    uint256 challengeBond;
    uint64 deliverWindow;
    uint64 challengeWindow;
    uint64 resolveWindow;
    bytes32 salt;
}

/// @notice An EIP-3009 `receiveWithAuthorization` signature by the buyer.
struct Authorization {
    address buyer;
    uint256 validAfter;
    uint256 validBefore;
    uint8 v;
    bytes32 r;
    bytes32 s;
}

/// @notice A deal's stored state. Times are unix seconds.
struct Deal {
    address buyer;
    DealState state;
    Settlement settlement;
    /// @dev The committee epoch current at funding until `challenge`, then the epoch the
    ///      dispute pinned (`registry.committeeFor` of the former).
    uint64 epoch;
    address seller;
    uint64 fundedAt;
    IERC20 token;
    uint64 deliveredAt;
    uint64 deliverDeadline;
    uint64 challengeDeadline;
    uint64 challengedAt;
    uint64 resolveDeadline;
    uint64 challengeWindow;
    uint64 resolveWindow;
    uint64 settledAt;
    uint128 amount;
    uint128 sellerBond;
    /// @dev Terms.resolverFee and Terms.challengeBond (posted at `challenge`).
    uint128 resolverFee;
    uint128 challengeBond;
    /// @dev keccak256 of the six deal fields a verdict commitment must repeat (set at delivery).
    bytes32 verdictFieldsHash;
    bytes32 specHash;
    bytes32 prestateAnchorHash;
    bytes32 prestateRoot;
    bytes32 backendId;
    bytes32 backendVersionHash;
    bytes32 deliveryHash;
}

/// @notice Errors of the Escrow.
interface IEscrowErrors {
    /// @notice EscrowFees was called directly, not by DELEGATECALL from its Escrow.
    error NotThroughEscrow();
    error DealExists(bytes32 dealId);
    error WrongState(bytes32 dealId, DealState expected, DealState actual);
    error NotBuyer(bytes32 dealId, address who);
    error NotSeller(bytes32 dealId, address who);
    error ZeroWindow(string which);
    error ResolveWindowTooLong(uint256 window, uint256 maximum);
    error ZeroAmount();
    error ZeroAddress(string which);
    error BackendNotAllowed(bytes32 backendId, bytes32 backendVersionHash);
    error TooEarly(bytes32 dealId, uint256 notBefore);
    error TooLate(bytes32 dealId, uint256 deadline);
    error ContentHashMismatch(bytes32 expected, bytes32 computed);
    error CommitmentMismatch(bytes32 dealId, string field);
    error TransferMismatch(uint256 expected, uint256 received);
    error WindowsExceedActivationDelay(uint256 span, uint256 activationDelay);
    error CommitteeTooSmall(uint256 epoch, uint256 totalStake, uint256 minimum);
    error NothingToClaim(address account, IERC20 token);
    error WindowTooShort(string which, uint256 minimum);
    error PublicationRequired();
    error NothingToRecover(IERC20 token);
    error FeeBelowMinimum(IERC20 token, uint256 fee, uint256 minimum);
    error NotOperator(uint256 resolver, address who);
    error RewardsForfeited(uint256 resolver);
    error NotSlashed(uint256 resolver);
    error NoRewards(uint256 resolver, IERC20 token);
    error NothingHeld(bytes32 dealId);
    error NotNonSigners(bytes32 dealId);
    /// @notice Without the members of its epoch slashed since, the certificate's unslashed
    ///         signers hold `signedStake` of the unslashed `totalStake`: below the threshold.
    error SlashedSignersDecide(uint256 signedStake, uint256 totalStake);
}

/// @notice Events of the Escrow.
interface IEscrowEvents {
    event DealFunded(
        bytes32 indexed dealId,
        address indexed buyer,
        address indexed seller,
        Terms terms,
        uint256 fundedAt,
        uint256 deliverDeadline
    );
    event SpecPublished(bytes32 indexed dealId, bytes spec, bytes prestateAnchor);
    event Delivered(
        bytes32 indexed dealId,
        bytes32 deliveryHash,
        uint256 deliveredAt,
        uint256 challengeDeadline,
        uint256 sellerBond
    );
    event DeliveryPublished(bytes32 indexed dealId, bytes delivery);
    event Disputed(
        bytes32 indexed dealId,
        bytes32 specHash,
        bytes32 deliveryHash,
        bytes32 prestateAnchorHash,
        bytes32 prestateRoot,
        bytes32 backendId,
        bytes32 backendVersionHash,
        uint256 epoch,
        uint256 challengedAt,
        uint256 resolveDeadline
    );
    event VerdictCommitted(
        bytes32 indexed dealId,
        VerdictCommitment commitment,
        uint256 signedStake,
        uint256 totalStake
    );
    /// @notice ERC-8004-style reputation projection keyed by deal: `reproduced = false` with a
    ///         zero trace hash marks evidence withheld (timeout), distinct from a Failed verdict.
    event ReputationEvidence(
        address indexed agent,
        bool reproduced,
        bytes32 indexed dealId,
        bytes32 traceHash,
        bytes32 backendId
    );
    event Settled(
        bytes32 indexed dealId,
        Settlement settlement,
        address indexed paidTo,
        uint256 amount,
        address bondPaidTo,
        uint256 bond,
        uint256 settledAt
    );
    /// @notice A challenge found the committee below the registry's minimum stake: the deal was
    ///         cancelled (Settlement.Cancelled) instead of being disputed.
    event CommitteeUnavailable(
        bytes32 indexed dealId, uint256 epoch, uint256 totalStake, uint256 minimum
    );
    /// @notice A settlement credited `amount` of `token` to `account` (see `claim`).
    event Credited(address indexed account, IERC20 indexed token, uint256 amount);
    /// @notice `account` withdrew its credited `amount` of `token` to `to`.
    event Claimed(
        address indexed account, IERC20 indexed token, address indexed to, uint256 amount
    );
    /// @notice The owner swept tokens sent to the escrow outside any deal.
    event Recovered(IERC20 indexed token, address indexed to, uint256 amount);
    /// @notice The buyer posted the resolver fee and the challenge bond of a disputed deal.
    event ChallengeFunded(bytes32 indexed dealId, uint256 resolverFee, uint256 challengeBond);
    /// @notice A certificate's resolver fee was paid out: `refund` (the capped gas refund plus
    ///         the split's rounding remainder) credited to `submitter`, the caller of `resolve`,
    ///         and `toSigners` accrued to the signers of `epoch` pro rata over their stake (the
    ///         `signedStake` of the same transaction's VerdictCommitted); `rewardPerStake` is the epoch's new accumulator (scaled by `REWARD_PRECISION`,
    ///         offset by 1). One event for both parts keeps `resolve` cheap.
    event FeeDistributed(
        bytes32 indexed dealId,
        IERC20 indexed token,
        uint256 indexed epoch,
        address submitter,
        uint256 refund,
        uint256 toSigners,
        uint256 rewardPerStake
    );
    /// @notice A certificate with non-signers: its resolver `fee` is held until `closesAt`, while
    ///         further signers of the certified digest may be proven (`includeSigners`); then
    ///         `FeeDistributed` (with `submitter` as the refund's recipient).
    event FeeHeld(bytes32 indexed dealId, address indexed submitter, uint256 fee, uint256 closesAt);
    /// @notice `by` proved that the members at the positions set in `signers` signed the
    ///         certified digest of `dealId`: `stake` joins its signed stake.
    event SignersIncluded(bytes32 indexed dealId, address indexed by, bytes signers, uint256 stake);
    /// @notice The seller's dispute deposit (equal to the resolver fee, locked at delivery) was
    ///         credited: to the buyer on a Failed verdict (it reimburses the buyer's fee), to the
    ///         seller otherwise.
    event DepositSettled(bytes32 indexed dealId, address indexed paidTo, uint256 amount);
    /// @notice A timed-out dispute's resolver fee was credited back to the buyer.
    event FeeRefunded(bytes32 indexed dealId, address indexed buyer, uint256 amount);
    /// @notice The challenge bond was credited: back to the buyer (Failed, timeout) or to the
    ///         seller (Reproduced).
    event ChallengeBondSettled(bytes32 indexed dealId, address indexed paidTo, uint256 amount);
    /// @notice A resolver's operator withdrew its fee rewards in `token` to `to`.
    event RewardsClaimed(
        uint256 indexed resolver, IERC20 indexed token, address indexed to, uint256 amount
    );
    /// @notice A slashed resolver's unclaimed rewards were credited like its slashed bond:
    ///         the registry's whistleblower share to `whistleblower`, the rest to `sink`.
    event RewardsSlashed(
        uint256 indexed resolver,
        IERC20 indexed token,
        address indexed whistleblower,
        uint256 toWhistleblower,
        address sink,
        uint256 toSink
    );
    event BackendAllowed(bytes32 indexed backendId, bytes32 indexed versionHash, bool allowed);
}
