//! Fuzzes the wire decoder of `QuorumCertificate`: it must never panic, and a decoded
//! message must survive re-encoding unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use resolvd_proto::wire::{QuorumCertificate, WireMessage};

fuzz_target!(|data: &[u8]| {
    if let Ok(msg) = QuorumCertificate::decode_wire(data) {
        let again = QuorumCertificate::decode_wire(&msg.encode_wire()).expect("re-encoded message decodes");
        assert_eq!(again, msg);
    }
});
