//! resolvd-node: the `resolvd` binary's library. All IO of resolvd lives here:
//! p2p (libp2p), chain (alloy), store (RocksDB), HTTP API, CLI.
//!
//! So far it holds [`inspect`], the content decoder behind `resolvd inspect`;
//! the daemon's services arrive with the node issue.

pub mod inspect;
