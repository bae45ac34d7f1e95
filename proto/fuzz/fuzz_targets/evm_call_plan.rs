//! Fuzzes the canonical decoder of `EvmCallPlanV1`: it must never panic, and any
//! accepted input must be the value's one canonical encoding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use resolvd_proto::{Canonical, EvmCallPlanV1};

fuzz_target!(|data: &[u8]| {
    if let Ok(value) = EvmCallPlanV1::from_canonical_bytes(data) {
        assert_eq!(value.to_canonical_bytes(), data, "accepted a non-canonical encoding");
    }
});
