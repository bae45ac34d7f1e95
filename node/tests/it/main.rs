//! Integration tests of resolvd-node.

mod bench;
mod chaos;
mod cli;
mod network;
mod p2p;
