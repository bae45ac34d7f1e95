//! ABI of the on-chain contracts the node talks to (a subset of
//! `contracts/src`: the events it watches and the calls it makes), and the
//! conversions between the protocol types and their ABI forms.

// The sol! expansion has undocumented items and 10-argument constructors.
#![allow(missing_docs, clippy::too_many_arguments)]

use alloy_primitives::{Bytes, U256};
use alloy_sol_types::SolValue;
use resolvd_consensus::Attestation;
use resolvd_proto::VerdictCommitment as Commitment;

alloy_sol_types::sol! {
    #[derive(Debug, PartialEq, Eq)]
    struct VerdictCommitment {
        bytes32 dealId;
        bytes32 specHash;
        bytes32 deliveryHash;
        bytes32 prestateAnchorHash;
        bytes32 prestateRoot;
        bytes32 backendId;
        bytes32 backendVersionHash;
        uint8 outcome;
        bytes32 resultHash;
        bytes32 traceHash;
    }

    #[derive(Debug)]
    struct Terms {
        address seller;
        address token;
        uint256 amount;
        bytes32 specHash;
        bytes32 prestateAnchorHash;
        bytes32 prestateRoot;
        bytes32 backendId;
        bytes32 backendVersionHash;
        uint256 sellerBond;
        uint256 resolverFee;
        uint256 challengeBond;
        uint64 deliverWindow;
        uint64 challengeWindow;
        uint64 resolveWindow;
        bytes32 salt;
    }

    /// The escrow's `Deal`, in two halves: a static struct is encoded
    /// inline, so `(DealHead, DealTail)` decodes the same bytes as the
    /// 26-field `Deal` (more fields than alloy's tuples take).
    #[derive(Debug)]
    struct DealHead {
        address buyer;
        uint8 state;
        uint8 settlement;
        uint64 epoch;
        address seller;
        uint64 fundedAt;
        address token;
        uint64 deliveredAt;
        uint64 deliverDeadline;
        uint64 challengeDeadline;
        uint64 challengedAt;
        uint64 resolveDeadline;
        uint64 challengeWindow;
    }

    #[derive(Debug)]
    struct DealTail {
        uint64 resolveWindow;
        uint64 settledAt;
        uint128 amount;
        uint128 sellerBond;
        uint128 resolverFee;
        uint128 challengeBond;
        bytes32 verdictFieldsHash;
        bytes32 specHash;
        bytes32 prestateAnchorHash;
        bytes32 prestateRoot;
        bytes32 backendId;
        bytes32 backendVersionHash;
        bytes32 deliveryHash;
    }

    #[derive(Debug)]
    struct Evidence {
        VerdictCommitment commitment;
        uint256 epoch;
        uint256[] signers;
        bytes signature;
    }

    #[derive(Debug)]
    struct Resolver {
        address operator;
        uint64 exitRequestedAt;
        bool slashed;
        bool withdrawn;
        uint128 bond;
        uint64 slashRecord;
    }

    #[derive(Debug)]
    struct Membership {
        uint128 stake;
        uint64 joinedEpoch;
        uint64 leftEpoch;
    }

    /// The escrow (contracts/src/Escrow.sol).
    #[derive(Debug)]
    interface IEscrow {
        event SpecPublished(bytes32 indexed dealId, bytes spec, bytes prestateAnchor);
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
        event Settled(
            bytes32 indexed dealId,
            uint8 settlement,
            address indexed paidTo,
            uint256 amount,
            address bondPaidTo,
            uint256 bond,
            uint256 settledAt
        );

        error WrongState(bytes32 dealId, uint8 expected, uint8 actual);
        error TooLate(bytes32 dealId, uint256 deadline);
        error TooEarly(bytes32 dealId, uint256 notBefore);
        error CommitmentMismatch(bytes32 dealId, string field);

        function registry() external view returns (address);
        function domainSeparator() external view returns (bytes32);
        function deal(bytes32 dealId) external view returns (DealHead memory head, DealTail memory tail);
        function dealIdOf(address buyer, Terms calldata terms) external view returns (bytes32);
        function fund(Terms calldata terms, bytes calldata spec, bytes calldata prestateAnchor) external returns (bytes32 dealId);
        function deliver(bytes32 dealId, bytes32 deliveryHash, bytes calldata delivery) external;
        function challenge(bytes32 dealId) external;
        function resolve(VerdictCommitment calldata commitment, bytes calldata nonSigners, bytes calldata aggregateSignature) external;
        function setBackend(bytes32 backendId, bytes32 versionHash, bool allowed) external;
        function claimable(address account, address token) external view returns (uint256);
        function claim(address token, address to) external returns (uint256 amount);

        // Economics (contracts/ECONOMICS.md).
        event ChallengeFunded(bytes32 indexed dealId, uint256 resolverFee, uint256 challengeBond);
        event FeeDistributed(bytes32 indexed dealId, address indexed token, uint256 indexed epoch, address submitter, uint256 refund, uint256 toSigners, uint256 rewardPerStake);
        event FeeRefunded(bytes32 indexed dealId, address indexed buyer, uint256 amount);
        event ChallengeBondSettled(bytes32 indexed dealId, address indexed paidTo, uint256 amount);
        event RewardsClaimed(uint256 indexed resolver, address indexed token, address indexed to, uint256 amount);
        error NothingToClaim(address account, address token);
        error FeeBelowMinimum(address token, uint256 fee, uint256 minimum);
        error NotOperator(uint256 resolver, address who);
        error RewardsForfeited(uint256 resolver);
        error NoRewards(uint256 resolver, address token);
        function timeoutRefund(bytes32 dealId) external;
        function claimRewards(address token, uint256 resolver, uint256[] calldata epochs, address to) external returns (uint256 amount);
        function pendingRewards(address token, uint256 resolver, uint256 epoch) external view returns (uint256);
        function settleExclusions(address token, uint256 resolver, uint256 epoch, uint256 maxEntries) external returns (uint256 remaining);
        function exclusionCount(address token, uint256 epoch) external view returns (uint256);
        function exclusionCursor(address token, uint256 epoch, uint256 resolver) external view returns (uint256);

        // A certificate with non-signers holds its fee for the inclusion window, in which
        // anyone proves further signers of the certified digest (contracts/ECONOMICS.md).
        event FeeHeld(bytes32 indexed dealId, address indexed submitter, uint256 fee, uint256 closesAt);
        event SignersIncluded(bytes32 indexed dealId, address indexed by, bytes signers, uint256 stake);
        error NothingHeld(bytes32 dealId);
        error NotNonSigners(bytes32 dealId);
        function held(bytes32 dealId) external view returns (bytes32 digest, uint128 pool, uint128 signedStake, address submitter, uint64 closesAt, uint8 words);
        function nonSignerBits(bytes32 dealId, uint256 word) external view returns (uint256);
        function missedBits(address token, uint256 epoch, uint256 word) external view returns (uint256);
        function includeSigners(bytes32 dealId, bytes calldata signers, bytes calldata signature) external;
        function distributeFee(bytes32 dealId) external;
        function INCLUSION_WINDOW() external view returns (uint256);
    }

    /// The resolver registry (contracts/src/ResolverRegistry.sol).
    #[derive(Debug)]
    interface IRegistry {
        event ResolverRegistered(uint256 indexed resolver, address indexed operator, bytes32 indexed keyHash, uint256 bond);
        event EpochStarted(uint256 indexed epoch, uint256 totalStake, uint256 members);
        event Slashed(uint256 indexed resolver, bytes32 indexed dealId, address indexed whistleblower, uint256 reward, uint256 toSink);

        error NoEquivocator();
        error InvalidSignature();
        error BelowThreshold(uint256 signedStake, uint256 totalStake, uint256 numerator, uint256 denominator);
        error StaleEpoch(uint256 epoch, uint256 endedAt, uint256 freshUntil);
        error NotAMember(uint256 resolver, uint256 epoch);
        error UnknownEpoch(uint256 epoch, uint256 current);
        error IndicesNotAscending(uint256 position);
        error EmptySignerSet();
        error KeyAlreadyRegistered(bytes32 keyHash);
        error OperatorAlreadyRegistered(address operator);
        error NotResolver(address who);
        error AlreadyExiting(uint256 resolver);
        error NotExiting(uint256 resolver);
        error UnbondingNotOver(uint256 resolver, uint256 availableAt);
        error NothingToWithdraw(uint256 resolver);
        error CommitteeFull(uint256 members, uint256 adding, uint256 maximum);
        error BitmapTooLong(uint256 length, uint256 maximum);
        error PositionOutOfRange(uint256 position, uint256 members);
        function positionOf(uint256 epoch, uint256 index) external view returns (uint256);
        function epochMembers(uint256 epoch) external view returns (uint256[] memory);
        function signerBitmap(uint256 epoch, uint256[] calldata indices) external view returns (bytes memory bitmap);
        function MAX_COMMITTEE_SIZE() external view returns (uint256);

        event ExitRequested(uint256 indexed resolver, address indexed operator, uint256 withdrawableAt);
        event Withdrawn(uint256 indexed resolver, address indexed operator, uint256 amount);
        function requestExit() external;
        function withdraw() external;
        function unbondingDelay() external view returns (uint256);

        function bondToken() external view returns (address);
        function minimumBond() external view returns (uint256);
        function thresholdBps() external view returns (uint256);
        function thresholdNumerator() external view returns (uint256);
        function thresholdDenominator() external view returns (uint256);
        function activationDelay() external view returns (uint256);
        function activate(uint256[] calldata indices) external returns (uint256 epoch);
        function claimable(address account) external view returns (uint256);
        function resolverCount() external view returns (uint256);
        function currentEpoch() external view returns (uint256);
        function epochInfo(uint256 epoch) external view returns (bytes memory aggregateKey, uint256 totalStake, uint256 members, uint256 startedAt);
        function resolverInfo(uint256 index) external view returns (Resolver memory entry, Membership memory membership, bytes memory publicKey);
        function isMember(uint256 index, uint256 epoch) external view returns (bool);
        function register(bytes calldata publicKey, bytes calldata proofOfPossession, uint256 bond) external returns (uint256 index);
        function slashEquivocation(bytes32 domainSeparator, Evidence calldata a, Evidence calldata b) external;
        function slashEquivocationUpTo(bytes32 domainSeparator, Evidence calldata a, Evidence calldata b, uint256 maxSlashed) external returns (uint256 slashed);
        function slashedFor(bytes32 domainSeparator, bytes32 dealId, uint256 index) external view returns (bool);

        // Economics (contracts/ECONOMICS.md).
        function minResolverFee(address token) external view returns (uint256);
        function gasRefundCap(address token) external view returns (uint256);
        function commitRevealMs() external view returns (uint32);
        function commitRevealMsAt(uint256 epoch) external view returns (uint32);
        function minResolveWindow() external view returns (uint256);
        function setMinResolverFee(address token, uint256 minimum) external;
        function setGasRefundCap(address token, uint256 cap) external;
        function setCommitRevealMs(uint32 commitPhaseMs) external;
        function rewardInfo(uint256 resolver) external view returns (address operator, uint256 stake, uint256 joinedEpoch, uint256 leftEpoch, bool slashed);
    }

    /// The six content hashes an attestation answers (contracts/src/libraries/AttestationHash.sol).
    #[derive(Debug, PartialEq, Eq)]
    struct Question {
        bytes32 specHash;
        bytes32 deliveryHash;
        bytes32 prestateAnchorHash;
        bytes32 prestateRoot;
        bytes32 backendId;
        bytes32 backendVersionHash;
    }

    #[derive(Debug)]
    struct RequestTerms {
        address token;
        uint256 fee;
        uint256 resolveWindow;
    }

    /// The Attestor's record of an answer (Solidity `Attestation`).
    #[derive(Debug)]
    struct AttestationRecord {
        bytes32 resultHash;
        bytes32 traceHash;
        uint64 epoch;
        uint64 attestedAt;
        uint8 outcome;
    }

    /// The attestor (contracts/src/Attestor.sol); it also has the escrow's
    /// surface the node serves (`IEscrow`: events, `deal`, `resolve`, fees).
    #[derive(Debug)]
    interface IAttestor {
        event AttestationRequested(bytes32 indexed requestId, bytes32 indexed inputHash, address indexed requester, address token, uint256 fee, uint256 epoch, uint256 resolveDeadline);
        event Attested(bytes32 indexed requestId, bytes32 indexed inputHash, bytes32 outputHash, uint8 outcome, uint256 epoch);

        error RequestPending(bytes32 requestId);
        error AlreadyAttested(bytes32 inputHash);

        function request(Question calldata question, RequestTerms calldata terms, bytes calldata spec, bytes calldata prestateAnchor, bytes calldata delivery) external returns (bytes32 requestId, bytes32 inputHash);
        function publish(bytes32 requestId, bytes calldata spec, bytes calldata prestateAnchor, bytes calldata delivery) external;
        function requestIdOf(bytes32 inputHash) external view returns (bytes32);
        function inputHashOf(Question calldata question) external pure returns (bytes32);
        function outputHashOf(uint8 outcome, bytes32 resultHash, bytes32 traceHash) external pure returns (bytes32);
        function attestation(bytes32 inputHash) external view returns (AttestationRecord memory);
        function outputOf(bytes32 inputHash) external view returns (bytes32 outputHash, uint256 epoch);
        function resolve(VerdictCommitment calldata commitment, bytes calldata nonSigners, bytes calldata aggregateSignature) external;
        function resolve(VerdictCommitment calldata commitment, uint256[] calldata nonSigners, bytes calldata aggregateSignature) external;
    }

    /// ERC-8301's `IProofVerifier` as resolvd implements it
    /// (contracts/src/ResolvdProofVerifier.sol).
    #[derive(Debug)]
    interface IProofVerifier {
        error ForeignRegistry(address attestor, address registry);
        error NotRequested(bytes32 inputHash);
        error WrongEpoch(uint256 epoch, uint256 pinned);
        error WrongQuestion(bytes32 inputHash, bytes32 committed);
        error WrongOutput(bytes32 outputHash, bytes32 committed);
        error Contradicted(bytes32 recorded);
        error SlashedSignersDecide(uint256 signedStake, uint256 totalStake);

        function registry() external view returns (address);
        function verify(bytes32 inputHash, bytes32 outputHash, bytes calldata metadata, bytes calldata proof) external view returns (bool valid);
        function recorded(address attestor, bytes32 inputHash) external view returns (bytes32 outputHash, uint256 epoch);
        function checkCertificate(address attestor, bytes32 inputHash, bytes32 outputHash, bytes calldata proof) external view;
    }

    /// ERC-20 (bond and deal token).
    #[derive(Debug)]
    interface IERC20 {
        function approve(address spender, uint256 amount) external returns (bool);
        function transfer(address to, uint256 amount) external returns (bool);
        function balanceOf(address who) external view returns (uint256);
        function mint(address to, uint256 amount) external;
    }
}

/// The escrow's record of a deal (`Escrow.deal`), the fields the node reads.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(non_snake_case)]
pub struct Deal {
    pub buyer: alloy_primitives::Address,
    pub state: u8,
    pub settlement: u8,
    pub epoch: u64,
    pub seller: alloy_primitives::Address,
    pub token: alloy_primitives::Address,
    pub challengedAt: u64,
    pub resolveDeadline: u64,
    pub settledAt: u64,
    pub amount: u128,
    pub sellerBond: u128,
    pub resolverFee: u128,
    pub challengeBond: u128,
    pub specHash: alloy_primitives::B256,
    pub prestateAnchorHash: alloy_primitives::B256,
    pub prestateRoot: alloy_primitives::B256,
    pub backendId: alloy_primitives::B256,
    pub backendVersionHash: alloy_primitives::B256,
    pub deliveryHash: alloy_primitives::B256,
}

impl From<IEscrow::dealReturn> for Deal {
    fn from(r: IEscrow::dealReturn) -> Self {
        let (h, t) = (r.head, r.tail);
        Self {
            buyer: h.buyer,
            state: h.state,
            settlement: h.settlement,
            epoch: h.epoch,
            seller: h.seller,
            token: h.token,
            challengedAt: h.challengedAt,
            resolveDeadline: h.resolveDeadline,
            settledAt: t.settledAt,
            amount: t.amount,
            sellerBond: t.sellerBond,
            resolverFee: t.resolverFee,
            challengeBond: t.challengeBond,
            specHash: t.specHash,
            prestateAnchorHash: t.prestateAnchorHash,
            prestateRoot: t.prestateRoot,
            backendId: t.backendId,
            backendVersionHash: t.backendVersionHash,
            deliveryHash: t.deliveryHash,
        }
    }
}

/// `DealState` of the escrow.
pub mod deal_state {
    /// No such deal.
    pub const NONE: u8 = 0;
    /// Funded, not delivered.
    pub const HELD: u8 = 1;
    /// Delivered, challengeable.
    pub const DELIVERED: u8 = 2;
    /// Challenged: waiting for a certificate.
    pub const DISPUTED: u8 = 3;
    /// Settled.
    pub const RESOLVED: u8 = 4;
}

// The escrow's `VerdictCommitment` is the same Solidity struct as
// `resolvd_proto::abi::VerdictCommitment`; converting through its ABI encoding
// keeps the protocol <-> ABI mapping (the outcome coding) in one place, proto.

impl From<&Commitment> for VerdictCommitment {
    fn from(c: &Commitment) -> Self {
        Self::abi_decode(&c.to_abi().abi_encode()).expect("identical ABI layout")
    }
}

impl VerdictCommitment {
    /// The protocol commitment, if the outcome code is known.
    pub fn to_commitment(&self) -> Option<Commitment> {
        let abi = resolvd_proto::abi::VerdictCommitment::abi_decode(&self.abi_encode()).ok()?;
        Commitment::from_abi(&abi)
    }
}

impl From<&Attestation> for Evidence {
    fn from(a: &Attestation) -> Self {
        Self {
            commitment: (&a.commitment).into(),
            epoch: U256::from(a.epoch),
            signers: a.signers.iter().map(|&i| U256::from(i)).collect(),
            signature: Bytes::copy_from_slice(&a.signature.to_eip2537()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::B256;
    use resolvd_proto::ReexecVerdict;

    #[test]
    fn commitment_roundtrips_through_the_escrow_abi_with_the_onchain_outcome_code() {
        for (outcome, code) in [(ReexecVerdict::Reproduced, 0u8), (ReexecVerdict::Failed, 1)] {
            let c = crate::store::tests::commitment(outcome);
            let abi = VerdictCommitment::from(&c);
            assert_eq!(abi.outcome, code);
            assert_eq!(abi.traceHash, c.trace_hash);
            assert_eq!(abi.to_commitment(), Some(c));
        }
        let mut bad = VerdictCommitment::from(&Commitment {
            deal_id: B256::ZERO,
            spec_hash: B256::ZERO,
            delivery_hash: B256::ZERO,
            prestate_anchor_hash: B256::ZERO,
            prestate_root: B256::ZERO,
            backend_id: B256::ZERO,
            backend_version_hash: B256::ZERO,
            outcome: ReexecVerdict::Failed,
            result_hash: B256::ZERO,
            trace_hash: B256::ZERO,
        });
        bad.outcome = 2;
        assert_eq!(bad.to_commitment(), None);
    }
}
