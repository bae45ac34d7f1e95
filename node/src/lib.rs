//! resolvd-node: the `resolvd` binary's library. All IO of resolvd lives here:
//! p2p (libp2p), chain (alloy), store (RocksDB), HTTP API (axum), CLI.
//!
//! - [`dispute`]: the dispute engine (the `resolvd-engine` crate: pure
//!   protocol logic, events in, typed actions out) with libp2p gossip origins;
//! - [`node`]: the daemon's IO shell: one event loop that routes swarm,
//!   chain, replay and timer events into the engine and performs its actions;
//! - [`content`]: content by hash over libp2p, with serving and connection limits;
//! - [`chain`] and [`contracts`]: JSON-RPC access to the escrow and registry;
//!   [`attestation`]: an Attestor's questions, answers and ERC-8301 proofs;
//!   [`anchor`]: anchors checked canonical and final before a replay;
//!   [`rpc`]: its endpoints (http(s), ws(s), TLS, failover, health, new heads);
//! - [`p2p`]: gossip and content exchange;
//! - [`store`]: RocksDB (content, fsync'd slashing protection, disputes,
//!   partials, certificates, cursor, evidence);
//! - [`api`] (its accept loop in [`http`]), [`metrics`] (a registry of plain
//!   values; [`observe`] sets the ones that mirror status), [`config`];
//!   [`keys`] / [`keystore`] (EIP-2335); [`adapters`]: one leaf's trait over
//!   another, wired by the node (see `ARCHITECTURE.md` for the import rules);
//!   [`inspect`]; `faults`: the test-only `[fault]` behaviours behind four
//!   hooks of the node (cargo feature `fault-injection`; nothing without it).
//!
//! The test harness is not here: the `resolvd-devnet` crate (a local network
//! of `resolvd` processes, and the demo) and `resolvd-netns` (a network
//! namespace per node over emulated WAN links).

pub mod adapters;
pub mod api;
pub mod backoff;
pub mod chain;
pub mod config;
pub mod content;
pub mod dispute;
pub mod economics;
mod faults;
pub mod http;
pub mod inspect;
pub mod keys;
pub mod metrics;
pub mod node;
pub mod observe;
pub mod p2p;
pub mod signer;
pub mod store;

pub use chain::{anchor, attestation, contracts, rpc};
pub use keys::keystore;
pub use store::interchange;
