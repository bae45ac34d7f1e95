//! resolvd-consensus: BLS12-381 keys, partial signatures, quorum certificates,
//! committee snapshots, conflict evidence and slashing-protection rules.
//!
//! It is pure and synchronous: no IO, no clock, no randomness except what the
//! caller passes in. It must never sign two different commitments for one deal.
//!
//! This crate is filled by the consensus issue; it holds no code yet.
