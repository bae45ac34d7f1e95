//! Fuzzes the canonical decoder of `EvmWitnessV1`: it must never panic, and any
//! accepted input must be the value's one canonical encoding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use resolvd_proto::{Canonical, EvmWitnessV1};

fuzz_target!(|data: &[u8]| {
    if let Ok(value) = EvmWitnessV1::from_canonical_bytes(data) {
        assert_eq!(value.to_canonical_bytes(), data, "accepted a non-canonical encoding");
    }
});
