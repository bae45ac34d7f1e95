//! Integration tests of resolvd-node.

mod cli;
mod network;
mod p2p;
