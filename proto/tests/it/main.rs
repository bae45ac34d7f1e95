//! Integration tests of resolvd-proto: golden vectors and roundtrip properties.

mod roundtrip;
mod samples;
mod vectors;
