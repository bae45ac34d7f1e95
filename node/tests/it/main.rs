//! Integration tests of resolvd-node.

mod abi;
mod aggregation;
mod api;
mod attest;
mod bench;
mod chaos;
mod cli;
mod commit_reveal;
mod doppelganger;
mod economics;
mod escrows;
mod fees;
mod finality;
mod gas;
mod hardening;
mod lifecycle;
mod network;
mod p2p;
mod protection;
mod rpc;
mod rpc_trust;
mod scale;
mod serving;
mod signer;
