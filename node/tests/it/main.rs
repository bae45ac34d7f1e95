//! Integration tests of resolvd-node.

mod bench;
mod chaos;
mod cli;
mod gas;
mod network;
mod p2p;
