//! The error type of resolvd-consensus.

use alloy_primitives::B256;

/// A consensus-crate failure. Bad input from peers maps to a variant that
/// names what was wrong, so the node can log it and penalise the sender.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bytes are not a valid point encoding (length, flags, not on the curve,
    /// non-canonical field element, non-zero EIP-2537 padding).
    #[error("invalid {what} encoding: {reason}")]
    InvalidEncoding {
        /// What was being decoded.
        what: &'static str,
        /// Why it failed.
        reason: String,
    },
    /// A point is on the curve but outside the prime-order subgroup.
    #[error("{what} is not in the prime-order subgroup")]
    NotInSubgroup {
        /// What was being decoded.
        what: &'static str,
    },
    /// A public key or signature is the point at infinity.
    #[error("{what} is the point at infinity")]
    Infinity {
        /// What was being decoded.
        what: &'static str,
    },
    /// A secret key seed has too little entropy.
    #[error("key seed must be at least 32 bytes, got {len}")]
    WeakSeed {
        /// The seed length.
        len: usize,
    },
    /// A secret key is zero or not below the group order.
    #[error("secret key is not a scalar in [1, r)")]
    InvalidSecretKey,
    /// A signature does not verify.
    #[error("signature does not verify")]
    VerifyFailed,
    /// A proof of possession does not verify.
    #[error("proof of possession does not verify")]
    InvalidProofOfPossession,
    /// Nothing to aggregate.
    #[error("cannot aggregate an empty set")]
    EmptyAggregate,
    /// A committee definition is unusable.
    #[error("invalid committee: {reason}")]
    InvalidCommittee {
        /// What is wrong.
        reason: &'static str,
    },
    /// A message names another epoch than the committee's.
    #[error("epoch {found} does not match committee epoch {expected}")]
    WrongEpoch {
        /// The committee's epoch.
        expected: u64,
        /// The message's epoch.
        found: u64,
    },
    /// A signer or non-signer index is not a committee member.
    #[error("index {index} is outside the committee of {size}")]
    IndexOutOfRange {
        /// The index.
        index: u32,
        /// Committee size.
        size: usize,
    },
    /// Signer or non-signer indices are not strictly ascending.
    #[error("indices are not strictly ascending")]
    IndicesNotAscending,
    /// A certificate's signers hold less stake than the threshold.
    #[error("signers hold {signed} of {total} stake, below {threshold}")]
    BelowThreshold {
        /// Stake of the signers.
        signed: alloy_primitives::U256,
        /// Total stake of the epoch.
        total: alloy_primitives::U256,
        /// The threshold.
        threshold: crate::Threshold,
    },
    /// The two halves of conflict evidence do not form an equivocation.
    #[error("not an equivocation: {reason}")]
    NotAConflict {
        /// What is wrong.
        reason: &'static str,
    },
    /// Slashing protection refused to sign a second, different commitment.
    #[error(
        "refusing to sign deal {deal_id}: already signed digest {recorded}, asked for {requested}"
    )]
    SlashingProtection {
        /// The deal.
        deal_id: B256,
        /// The digest already signed.
        recorded: B256,
        /// The digest refused.
        requested: B256,
    },
    /// The slashing-protection store failed; nothing was signed.
    #[error("slashing-protection store failed: {0}")]
    Store(String),
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The stable name of this error, as used by test vectors and metrics.
    pub const fn code(&self) -> &'static str {
        match self {
            Self::InvalidEncoding { .. } => "InvalidEncoding",
            Self::NotInSubgroup { .. } => "NotInSubgroup",
            Self::Infinity { .. } => "Infinity",
            Self::WeakSeed { .. } => "WeakSeed",
            Self::InvalidSecretKey => "InvalidSecretKey",
            Self::VerifyFailed => "VerifyFailed",
            Self::InvalidProofOfPossession => "InvalidProofOfPossession",
            Self::EmptyAggregate => "EmptyAggregate",
            Self::InvalidCommittee { .. } => "InvalidCommittee",
            Self::WrongEpoch { .. } => "WrongEpoch",
            Self::IndexOutOfRange { .. } => "IndexOutOfRange",
            Self::IndicesNotAscending => "IndicesNotAscending",
            Self::BelowThreshold { .. } => "BelowThreshold",
            Self::NotAConflict { .. } => "NotAConflict",
            Self::SlashingProtection { .. } => "SlashingProtection",
            Self::Store(_) => "Store",
        }
    }
}
