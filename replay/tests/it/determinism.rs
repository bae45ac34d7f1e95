//! The same request gives byte-identical envelopes across threads and processes.

use crate::common::*;
use alloy_primitives::{keccak256, B256, U256};
use resolvd_proto::{Canonical, Checks, PredicateCommitmentV1, SlotBounds};
use resolvd_replay::EvmBackend;
use std::process::Command;

fn envelope_hash() -> B256 {
    let case = Case::honest(PredicateCommitmentV1::PoststateDelta(Checks {
        checks: vec![SlotBounds {
            address: TARGET,
            slot: slot(1),
            min: U256::from(5u64),
            max: U256::from(5u64),
        }],
    }));
    keccak256(EvmBackend.verdict(&case.request()).unwrap().to_canonical_bytes())
}

#[test]
fn identical_across_threads() {
    let first = envelope_hash();
    let handles: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(|| (0..10).map(|_| envelope_hash()).collect::<Vec<_>>()))
        .collect();
    for h in handles {
        for hash in h.join().unwrap() {
            assert_eq!(hash, first);
        }
    }
}

/// Child side of `identical_across_processes` (run only by it): prints the hash.
#[test]
#[ignore = "child process of identical_across_processes"]
fn determinism_child() {
    #[allow(clippy::disallowed_macros)] // the parent reads this line
    {
        println!("ENVELOPE_HASH={}", envelope_hash());
    }
}

#[test]
fn identical_across_processes() {
    let mut hashes = Vec::new();
    for _ in 0..2 {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "determinism::determinism_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .output()
            .unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        // libtest may print the test name on the same line.
        let hash = stdout
            .split_once("ENVELOPE_HASH=")
            .map(|(_, rest)| &rest[..66])
            .unwrap_or_else(|| panic!("child printed no hash: {stdout}"));
        hashes.push(hash.parse::<B256>().unwrap());
    }
    assert_eq!(hashes[0], hashes[1]);
    assert_eq!(hashes[0], envelope_hash());
}
