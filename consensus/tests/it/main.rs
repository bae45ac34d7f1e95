//! Integration tests of resolvd-consensus: cross-language vectors and the
//! certificate / conflict state machines driven without a network.

mod builder;
mod escrow;
mod vectors;
