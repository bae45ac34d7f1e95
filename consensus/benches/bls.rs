//! BLS benchmarks: single operations, same-digest batch verification per
//! committee size (throughput = partials, so criterion reports the amortised
//! cost per partial), a batch with one invalid partial, and building a
//! certificate from 64 wire partials.

#![allow(missing_docs)] // criterion_group! generates undocumented items

use alloy_primitives::{Address, B256, U256};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use resolvd_consensus::{
    batch::{verify_same_digest, Item},
    CertificateBuilder, Committee, Member, PublicKey, SecretKey, Signature, DEFAULT_THRESHOLD_BPS,
};
use resolvd_proto::{wire::SignedVerdict, ReexecVerdict, VerdictCommitment, VerdictDomain};
use std::hint::black_box;

fn secrets(n: usize) -> Vec<SecretKey> {
    (0..n)
        .map(|i| {
            let mut seed = [0x42u8; 32];
            seed[..8].copy_from_slice(&(i as u64).to_be_bytes());
            SecretKey::from_seed(&seed).unwrap()
        })
        .collect()
}

fn domain() -> VerdictDomain {
    VerdictDomain {
        name: "resolvd".into(),
        version: "1".into(),
        chain_id: 1,
        verifying_contract: Address::repeat_byte(0xe5),
    }
}

fn commitment() -> VerdictCommitment {
    VerdictCommitment {
        deal_id: B256::repeat_byte(1),
        spec_hash: B256::repeat_byte(2),
        delivery_hash: B256::repeat_byte(3),
        prestate_anchor_hash: B256::repeat_byte(4),
        prestate_root: B256::repeat_byte(5),
        backend_id: B256::repeat_byte(6),
        backend_version_hash: B256::repeat_byte(7),
        outcome: ReexecVerdict::Reproduced,
        result_hash: B256::repeat_byte(8),
        trace_hash: B256::repeat_byte(9),
    }
}

fn single(c: &mut Criterion) {
    let sk = &secrets(1)[0];
    let pk = sk.public_key();
    let digest = B256::repeat_byte(0xab);
    let sig = sk.sign(&digest);
    let pop = sk.prove_possession();
    let compressed = sig.compress();
    c.bench_function("sign", |b| b.iter(|| black_box(sk.sign(black_box(&digest)))));
    c.bench_function("verify", |b| b.iter(|| sig.verify(black_box(&pk), black_box(&digest))));
    c.bench_function("pop_verify", |b| b.iter(|| pk.verify_possession(black_box(&pop))));
    c.bench_function("signature_decode_subgroup_check", |b| {
        b.iter(|| Signature::from_compressed(black_box(&compressed)).unwrap())
    });
}

fn batches(c: &mut Criterion) {
    let digest = B256::repeat_byte(0xcd);
    let sks = secrets(256);
    let pks: Vec<PublicKey> = sks.iter().map(SecretKey::public_key).collect();
    let sigs: Vec<Signature> = sks.iter().map(|s| s.sign(&digest)).collect();
    let mut group = c.benchmark_group("same_digest_batch");
    for n in [4usize, 16, 64, 256] {
        let items: Vec<Item<'_>> = pks[..n]
            .iter()
            .zip(&sigs[..n])
            .map(|(key, signature)| Item { key, signature })
            .collect();
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("valid", n), &items, |b, items| {
            b.iter(|| assert!(verify_same_digest(&digest, items).is_empty()))
        });
    }
    // One invalid partial among 64: bisection finds it.
    let mut bad = sigs[..64].to_vec();
    bad[37] = sks[37].sign(&B256::ZERO);
    let items: Vec<Item<'_>> =
        pks[..64].iter().zip(&bad).map(|(key, signature)| Item { key, signature }).collect();
    group.throughput(Throughput::Elements(64));
    group.bench_function("one_invalid_of_64", |b| {
        b.iter(|| assert_eq!(verify_same_digest(&digest, &items), vec![37]))
    });
    // The naive way, for the ratio: one pairing check per partial.
    group.bench_function("naive_64", |b| {
        b.iter(|| {
            for (k, s) in pks[..64].iter().zip(&sigs[..64]) {
                s.verify(k, &digest).unwrap();
            }
        })
    });
    group.finish();
}

fn builder(c: &mut Criterion) {
    let n = 64;
    let sks = secrets(n);
    let members: Vec<Member> = sks
        .iter()
        .enumerate()
        .map(|(i, s)| Member {
            index: i as u32,
            operator: Address::with_last_byte(i as u8),
            key: s.public_key(),
            stake: U256::from(1),
        })
        .collect();
    let committee = Committee::new(3, members, DEFAULT_THRESHOLD_BPS).unwrap();
    let d = domain();
    let cm = commitment();
    let digest = cm.eip712_digest(&d);
    let partials: Vec<SignedVerdict> = sks
        .iter()
        .enumerate()
        .map(|(i, s)| SignedVerdict {
            commitment: cm,
            epoch: 3,
            signer_index: i as u32,
            signature: s.sign(&digest).compress(),
        })
        .collect();
    let mut group = c.benchmark_group("certificate_builder");
    group.throughput(Throughput::Elements(n as u64));
    group.bench_function("64_wire_partials_to_certificate", |b| {
        b.iter_batched(
            || CertificateBuilder::new(committee.clone(), d.clone()),
            |mut builder| {
                for p in &partials {
                    builder.on_partial(p).unwrap();
                }
                let events = builder.process(&[7u8; 32]);
                assert!(events
                    .iter()
                    .any(|e| matches!(e, resolvd_consensus::BuilderEvent::Certificate(_))));
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, single, batches, builder);
criterion_main!(benches);
