//! Replay benchmarks: witness verification per proof node, full replay of a
//! real ERC-20 transfer (hash checks, decoding, proof verification, execution,
//! predicate), and its floor: the same transaction in bare revm over an
//! in-memory database plus the proof verification alone.

#![allow(missing_docs, unreachable_pub, dead_code)] // criterion macros; shared test module

#[path = "../tests/it/common.rs"]
mod common;

use alloy_primitives::{keccak256, Address, U256};
use common::*;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use resolvd_proto::{Canonical, EvmAnchorV1};
use resolvd_replay::{evm_env, state::VerifiedState, testkit::TestAccount, EvmBackend};
use revm::{
    database::{CacheDB, EmptyDB},
    state::{AccountInfo, Bytecode},
    Context, ExecuteEvm, MainBuilder, MainContext,
};
use std::hint::black_box;

fn bare_db(case: &Case) -> CacheDB<EmptyDB> {
    let mut db = CacheDB::new(EmptyDB::default());
    for (address, acc) in &case.chain.accounts {
        let code = Bytecode::new_raw(acc.code.clone());
        db.insert_account_info(
            *address,
            AccountInfo {
                balance: acc.balance,
                nonce: acc.nonce,
                code_hash: code.hash_slow(),
                code: Some(code),
                ..Default::default()
            },
        );
        for (slot, value) in &acc.storage {
            db.insert_account_storage(*address, U256::from_be_bytes(slot.0), *value).unwrap();
        }
    }
    db
}

fn bare_revm(case: &Case, anchor: &EvmAnchorV1, db: CacheDB<EmptyDB>) -> bool {
    // The caller's nonce in the test chain is 3.
    let (spec, block, tx) = evm_env(anchor, &case.plan, 3).unwrap();
    let mut evm = Context::mainnet()
        .modify_cfg_chained(|cfg| cfg.set_spec_and_mainnet_gas_params(spec))
        .with_block(block)
        .with_db(db)
        .build_mainnet();
    evm.transact(tx).unwrap().result.is_success()
}

fn erc20(c: &mut Criterion) {
    let case = erc20_case();
    let req = case.request();
    let anchor = case.chain.anchor(SPEC);
    let mut group = c.benchmark_group("erc20_transfer");
    group
        .bench_function("full_replay", |b| b.iter(|| EvmBackend.verdict(black_box(&req)).unwrap()));
    group.bench_function("proof_verification_only", |b| {
        b.iter(|| VerifiedState::verify(black_box(&anchor), black_box(&case.witness)).unwrap())
    });
    let db = bare_db(&case);
    assert!(bare_revm(&case, &anchor, db.clone()));
    group.bench_function("bare_revm_in_memory", |b| {
        b.iter(|| assert!(bare_revm(&case, &anchor, db.clone())))
    });
    group.finish();
}

fn per_node(c: &mut Criterion) {
    // 2,000 accounts; prove 64 of them: realistic proof depths of 3-4 nodes.
    let mut case = erc20_case();
    for i in 0..2000u64 {
        let address = Address::from_word(keccak256(i.to_be_bytes()));
        case.chain
            .accounts
            .insert(address, TestAccount { balance: U256::from(i), ..Default::default() });
    }
    let targets: Vec<Address> = case.chain.accounts.keys().step_by(31).take(64).copied().collect();
    let witness = case.chain.witness(SPEC, &targets, &[]);
    let anchor = case.chain.anchor(SPEC);
    let nodes: usize = witness.accounts.iter().map(|a| a.proof.len()).sum();
    let mut group = c.benchmark_group("witness_verification");
    group.throughput(Throughput::Elements(nodes as u64));
    group.bench_function(format!("64_accounts_{nodes}_nodes"), |b| {
        b.iter(|| VerifiedState::verify(black_box(&anchor), black_box(&witness)).unwrap())
    });
    group.finish();
    let _ = witness.to_canonical_bytes().len();
}

criterion_group!(benches, erc20, per_node);
criterion_main!(benches);
