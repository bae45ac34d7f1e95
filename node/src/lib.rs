//! resolvd-node: the `resolvd` binary's library. All IO of resolvd lives here:
//! p2p (libp2p), chain (alloy), store (RocksDB), HTTP API (axum), CLI.
//!
//! - [`node`]: the daemon's event loop and dispute state machines;
//! - [`chain`] and [`contracts`]: JSON-RPC access to the escrow and registry;
//! - [`p2p`]: gossip and content exchange;
//! - [`store`]: RocksDB (content, fsync'd slashing protection, disputes,
//!   partials, certificates, cursor, evidence);
//! - [`api`], [`metrics`], [`config`]; [`keys`] / [`keystore`] (EIP-2335);
//!   [`inspect`]; [`devnet`] (local network orchestration for tests and demos).

pub mod api;
pub mod chain;
pub mod config;
pub mod contracts;
pub mod devnet;
pub mod inspect;
pub mod keys;
pub mod keystore;
pub mod metrics;
pub mod node;
pub mod p2p;
pub mod store;
