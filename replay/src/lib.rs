//! resolvd-replay: the deterministic revm backend.
//!
//! Its one job: given committed spec, delivery, anchor and witness bytes, replay
//! the seller's EVM call plan on the anchor's proof-verified prestate in a
//! closed-world database and return a byte-identical `VerdictEnvelopeV1` or an
//! operational error. It must never read anything that is not committed: no
//! `latest`, no clock, no randomness, no network, no unproven state.
//!
//! This crate is filled by the replay issue; it holds no code yet.
