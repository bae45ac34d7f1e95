//! Operational errors: reasons a replay produced no verdict. They are never signed.

use alloy_primitives::{Address, B256};
use resolvd_proto::CommittedError;

/// Why a replay could not produce a verdict. Every variant is deterministic
/// for the same inputs, but none is a verdict: the dispute stays open until
/// a certificate or its resolve deadline.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OperationalError {
    /// Committed bytes do not hash to their commitment, or are not canonical.
    #[error("committed {what}: {source}")]
    Committed {
        /// Which input.
        what: &'static str,
        /// The failure.
        #[source]
        source: CommittedError,
    },
    /// The delivery names no replay witness, or the request carries none.
    #[error("no replay witness: {0}")]
    MissingWitness(&'static str),
    /// The spec or anchor names a backend other than this one.
    #[error("foreign backend id {found}")]
    ForeignBackend {
        /// The backend id found.
        found: B256,
    },
    /// The spec accepts another version of this backend.
    #[error("spec accepts backend version {accepted}, this is {ours}")]
    UnacceptedBackendVersion {
        /// What the spec accepts.
        accepted: B256,
        /// This backend's version hash.
        ours: B256,
    },
    /// The spec's anchor is not the request's anchor.
    #[error("spec anchor {in_spec} differs from the request's {in_request}")]
    AnchorMismatch {
        /// Hash of the spec's embedded anchor.
        in_spec: B256,
        /// The request's anchor hash.
        in_request: B256,
    },
    /// The plan's schema is not the one the spec requires (or not EVM V1).
    #[error("execution schema mismatch: {0}")]
    SchemaMismatch(&'static str),
    /// The plan is for another chain than the anchor.
    #[error("plan chain id {plan} differs from anchor chain id {anchor}")]
    ChainIdMismatch {
        /// The plan's chain id.
        plan: u64,
        /// The anchor's chain id.
        anchor: u64,
    },
    /// The witness header is not the anchor's header.
    #[error("witness header: {0}")]
    HeaderMismatch(String),
    /// An ancestor header does not link to its child.
    #[error("ancestor header {index} is not the parent of the header before it")]
    AncestorNotLinked {
        /// Position in the witness's ancestor list.
        index: usize,
    },
    /// An account proof does not verify against the state root.
    #[error("account proof for {address}: {reason}")]
    InvalidAccountProof {
        /// The account.
        address: Address,
        /// Why.
        reason: String,
    },
    /// A storage proof does not verify against the account's storage root.
    #[error("storage proof for {address} slot {slot}: {reason}")]
    InvalidStorageProof {
        /// The account.
        address: Address,
        /// The slot.
        slot: B256,
        /// Why.
        reason: String,
    },
    /// Code in the witness that no proven account commits to.
    #[error("witness code {0} is not the code of any proven account")]
    UnreferencedCode(B256),
    /// Replay read an account the witness does not prove.
    #[error("missing account witness for {0}")]
    MissingAccountWitness(Address),
    /// Replay read a storage slot the witness does not prove.
    #[error("missing storage witness for {address} slot {slot}")]
    MissingStorageWitness {
        /// The account.
        address: Address,
        /// The slot.
        slot: B256,
    },
    /// Replay needed code the witness does not carry.
    #[error("missing code witness for code hash {0}")]
    MissingCodeWitness(B256),
    /// Replay read the hash of a block the witness does not link.
    #[error("missing block hash witness for block {0}")]
    MissingBlockHashWitness(u64),
    /// revm refused the block environment or failed internally.
    #[error("evm: {0}")]
    Evm(String),
}

impl OperationalError {
    /// The stable name of this error, for logs and metrics.
    pub const fn code(&self) -> &'static str {
        match self {
            Self::Committed { .. } => "Committed",
            Self::MissingWitness(_) => "MissingWitness",
            Self::ForeignBackend { .. } => "ForeignBackend",
            Self::UnacceptedBackendVersion { .. } => "UnacceptedBackendVersion",
            Self::AnchorMismatch { .. } => "AnchorMismatch",
            Self::SchemaMismatch(_) => "SchemaMismatch",
            Self::ChainIdMismatch { .. } => "ChainIdMismatch",
            Self::HeaderMismatch(_) => "HeaderMismatch",
            Self::AncestorNotLinked { .. } => "AncestorNotLinked",
            Self::InvalidAccountProof { .. } => "InvalidAccountProof",
            Self::InvalidStorageProof { .. } => "InvalidStorageProof",
            Self::UnreferencedCode(_) => "UnreferencedCode",
            Self::MissingAccountWitness(_) => "MissingAccountWitness",
            Self::MissingStorageWitness { .. } => "MissingStorageWitness",
            Self::MissingCodeWitness(_) => "MissingCodeWitness",
            Self::MissingBlockHashWitness(_) => "MissingBlockHashWitness",
            Self::Evm(_) => "Evm",
        }
    }
}

impl revm::database_interface::DBErrorMarker for OperationalError {}
