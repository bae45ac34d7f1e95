//! Integration tests of resolvd-node.

mod api;
mod bench;
mod chaos;
mod cli;
mod finality;
mod gas;
mod hardening;
mod network;
mod p2p;
