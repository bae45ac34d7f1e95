//! resolvd-proto: the shared language of resolvd.
//!
//! This crate owns every byte that is hashed, signed or sent:
//! - [`codec`]: the canonical TLV codec (strictly ascending tags, minimal
//!   LEB128 lengths, minimal big-endian integers) with a strict, typed decoder;
//! - [`hash`]: content hashes `SHA-256("reckn/v1/" || typeTag || canonicalBytes)`
//!   and hash-before-parse ([`decode_committed`]);
//! - [`types`] and [`verdict`]: the seed-004 content types (`SpecV1`,
//!   `DeliveryV1`, `PrestateAnchorV1` / `EvmAnchorV1`, `EvmCallPlanV1`,
//!   `PredicateCommitmentV1`, `ReexecRequestV1`, `ReplayRecordV1`,
//!   `VerdictEnvelopeV1`) and the EIP-712 digest of `VerdictCommitment`;
//! - [`witness`]: `EvmWitnessV1`, the account / storage proofs, code and
//!   headers an EVM replay runs on;
//! - [`wire`]: protobuf gossip and request-response messages with validated
//!   domain forms.
//!
//! It is pure and synchronous: no IO, no clock, no randomness, no network. It
//! never hashes or signs protobuf bytes, and it never parses committed bytes
//! before checking their hash.

pub mod codec;
mod error;
pub mod hash;
pub mod types;
pub mod verdict;
pub mod wire;
pub mod witness;

pub use codec::Canonical;
pub use error::{CommittedError, DecodeError, WireError};
pub use hash::{content_hash, decode_committed, ContentType};
pub use types::*;
pub use verdict::*;
pub use witness::*;

/// A content hash (see [`hash`]).
pub type ContentHash = alloy_primitives::B256;
