//! Integration tests of resolvd-replay: real revm over real (offline-built)
//! Merkle-Patricia proofs.

mod anvil;
mod common;
mod determinism;
mod verdicts;
