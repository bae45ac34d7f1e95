//! Integration tests of the `resolvd` binary.

mod cli;
