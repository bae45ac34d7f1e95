//! Integration tests of the `resolvd` binary.

mod cli;
mod p2p;
