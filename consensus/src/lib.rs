//! resolvd-consensus: BLS12-381 keys and signatures, committee snapshots,
//! quorum certificates, conflict evidence and slashing-protection rules.
//!
//! - [`bls`]: keys (EIP-2333 derivation), proof of possession bound to
//!   (chain, registry, operator) by [`PossessionBinding`], sign / verify /
//!   aggregate, EIP-2537 encodings; every decoded point is subgroup- and
//!   infinity-checked.
//! - [`batch`]: same-digest batch verification (one pairing, bisection on
//!   failure) and randomised multi-digest verification.
//! - [`Committee`], [`QuorumCertificate`], [`CertificateBuilder`]: the
//!   exact-fraction [`Threshold`] rule `signed * denominator >= total *
//!   numerator` (the registry's `meetsThreshold`) and the state machine that
//!   turns partials into certificates.
//! - [`conflict`]: equivocation detection and slashable evidence.
//! - [`protection`]: the rule that a node never signs two different
//!   commitments for one deal, over a storage trait (RocksDB lives in `node`).
//!
//! It is pure and synchronous: no IO, no clock, no randomness except what the
//! caller passes in.

pub mod batch;
pub mod bls;
mod certificate;
mod committee;
pub mod conflict;
mod error;
pub mod protection;

pub use bls::{
    PossessionBinding, PublicKey, SecretKey, Signature, COMMIT_DST, POP_DST, RECORD_DST,
    SIGNATURE_DST,
};
pub use certificate::{Attestation, BuilderEvent, CertificateBuilder, Queued, QuorumCertificate};
pub use committee::{Committee, Member, Threshold, BPS, DEFAULT_THRESHOLD_BPS};
pub use conflict::{ConflictDetector, ConflictEvidence};
pub use error::{Error, Result};
