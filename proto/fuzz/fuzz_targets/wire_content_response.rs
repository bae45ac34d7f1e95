//! Fuzzes the wire decoder of `ContentResponse`: it must never panic, and a decoded
//! message must survive re-encoding unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use resolvd_proto::wire::{ContentResponse, WireMessage};

fuzz_target!(|data: &[u8]| {
    if let Ok(msg) = ContentResponse::decode_wire(data) {
        let again = ContentResponse::decode_wire(&msg.encode_wire()).expect("re-encoded message decodes");
        assert_eq!(again, msg);
    }
});
