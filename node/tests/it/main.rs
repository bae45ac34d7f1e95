//! Integration tests of resolvd-node.

mod bench;
mod cli;
mod network;
mod p2p;
