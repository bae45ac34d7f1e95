//! resolvd-node: the `resolvd` binary's library. All IO of resolvd lives here:
//! p2p (libp2p), chain (alloy), store (RocksDB), HTTP API, CLI.
//!
//! So far it holds [`inspect`], the content decoder behind `resolvd inspect`,
//! [`keystore`], EIP-2335 BLS keystores, and [`store`], the RocksDB store
//! (content, fsync'd slashing protection, cursors). The daemon's network, chain and pipeline services are not built yet.

pub mod inspect;
pub mod keys;
pub mod keystore;
pub mod p2p;
pub mod store;
