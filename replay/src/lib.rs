//! resolvd-replay: the deterministic revm backend.
//!
//! Its one job: given committed spec, delivery, anchor and witness bytes,
//! replay the seller's EVM call plan on the anchor's proof-verified prestate in
//! a closed-world database and return a byte-identical `VerdictEnvelopeV1`, or
//! an [`OperationalError`] (which is never signed).
//!
//! - [`EvmBackend`]: hash-before-parse of every input, backend id / version /
//!   anchor / schema / chain checks, revm configuration ([`BACKEND_CONFIG`]),
//!   predicate evaluation.
//! - [`state::VerifiedState`]: the witness verified against the anchor (header
//!   hash and fields, parent-linked ancestors, account and storage proofs
//!   including exclusion proofs, code hashes); [`state::ClosedWorldDb`] answers
//!   revm only from it: an unproven read is `Missing*Witness`.
//! - `testkit` (feature `test-utils`): builds real state tries, proofs and
//!   headers offline, for tests and benchmarks.
//! - `rpc` (feature `rpc`, async): freezes an anchor and builds a verified
//!   witness from a JSON-RPC endpoint; the only part that does IO.
//!
//! It never reads anything that is not committed: no `latest`, no clock, no
//! randomness, no network, no unproven state.

mod backend;
mod error;
pub mod predicate;
#[cfg(feature = "rpc")]
pub mod rpc;
pub mod state;
#[cfg(any(test, feature = "test-utils"))]
pub mod testkit;

pub use backend::{
    evm_env, run_plan, EvmBackend, Inputs, Run, BACKEND_CONFIG, BACKEND_ID, BACKEND_VERSION_HASH,
};
pub use error::OperationalError;
