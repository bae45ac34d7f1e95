//! Verdicts and operational errors.

use crate::common::*;
use alloy_primitives::{keccak256, Address, Bytes, B256, U256};
use resolvd_proto::{
    Checks, CommittedError, PredicateCommitmentV1 as P, ReexecVerdict, ResultEquals, SlotBounds,
    SlotEquals,
};
use resolvd_replay::{EvmBackend, OperationalError};

fn bounds(slot_n: u8, min: u64, max: U256) -> P {
    P::PoststateBounded(Checks {
        checks: vec![SlotBounds { address: TARGET, slot: slot(slot_n), min: U256::from(min), max }],
    })
}

fn delta(slot_n: u8, min: u64, max: U256) -> P {
    P::PoststateDelta(Checks {
        checks: vec![SlotBounds { address: TARGET, slot: slot(slot_n), min: U256::from(min), max }],
    })
}

fn equals(slot_n: u8, v: u64) -> P {
    P::PoststateEquals(Checks {
        checks: vec![SlotEquals { address: TARGET, slot: slot(slot_n), expected: U256::from(v) }],
    })
}

fn result_equals(v: u64) -> P {
    P::ResultEquals(ResultEquals { expected_result_hash: keccak256(word(v)) })
}

fn verdict(case: &Case) -> Result<ReexecVerdict, OperationalError> {
    EvmBackend.verdict(&case.request()).map(|e| e.record.outcome)
}

#[test]
fn honest_plan_is_reproduced_and_envelope_is_consistent() {
    let case = Case::honest(delta(1, 5, U256::from(5u64)));
    let req = case.request();
    let env = EvmBackend.verdict(&req).unwrap();
    assert_eq!(env.record.outcome, ReexecVerdict::Reproduced);
    assert_eq!(env.record.result_hash, resolvd_proto::evm_result_hash(&word(15)));
    assert_eq!(env.record.prestate_root, case.chain.state_root());
    assert_eq!(env.record.spec_hash, req.spec_hash);
    assert_eq!(env.deal_id, req.deal_id);
    // The envelope decodes (its traceHash commits to its record).
    let bytes = resolvd_proto::Canonical::to_canonical_bytes(&env);
    assert_eq!(
        <resolvd_proto::VerdictEnvelopeV1 as resolvd_proto::Canonical>::from_canonical_bytes(
            &bytes
        )
        .unwrap(),
        env
    );
}

#[test]
fn false_claim_fails() {
    let mut case = Case::honest(delta(1, 5, U256::from(5u64)));
    case.claimed = word(16);
    assert_eq!(verdict(&case), Ok(ReexecVerdict::Failed));
}

#[test]
fn revert_fails_and_commits_the_revert_data() {
    let mut case = Case::honest(bounds(1, 0, U256::MAX));
    case.plan = credit(1, 0); // amount 0 reverts
    case.claimed = Bytes::new();
    let env = EvmBackend.verdict(&case.request()).unwrap();
    assert_eq!(env.record.outcome, ReexecVerdict::Failed);
    assert_eq!(env.record.result_hash, resolvd_proto::evm_result_hash(&[]));
}

#[test]
fn each_predicate_both_ways() {
    let cases = [
        (result_equals(15), ReexecVerdict::Reproduced),
        (result_equals(14), ReexecVerdict::Failed),
        (equals(1, 15), ReexecVerdict::Reproduced),
        (equals(1, 10), ReexecVerdict::Failed),
        (bounds(1, 10, U256::from(20u64)), ReexecVerdict::Reproduced),
        (bounds(1, 16, U256::MAX), ReexecVerdict::Failed),
        (delta(1, 5, U256::from(5u64)), ReexecVerdict::Reproduced),
        (delta(1, 6, U256::MAX), ReexecVerdict::Failed),
    ];
    for (predicate, want) in cases {
        let case = Case::honest(predicate.clone());
        assert_eq!(verdict(&case), Ok(want), "{predicate:?}");
    }
}

#[test]
fn noop_prestate_attack_satisfies_bounded_but_not_delta() {
    // Slot 1 already holds 10. A plan that credits another slot leaves it at 10.
    let mut bounded = Case::honest(bounds(1, 10, U256::MAX));
    bounded.plan = credit(2, 1);
    bounded.claimed = word(2);
    assert_eq!(verdict(&bounded), Ok(ReexecVerdict::Reproduced));
    let mut with_delta = bounded.clone();
    with_delta.predicate = delta(1, 1, U256::MAX);
    assert_eq!(verdict(&with_delta), Ok(ReexecVerdict::Failed));
}

#[test]
fn delta_saturates_at_zero() {
    // Slot 3 is proven zero and stays zero: delta 0 in [0, 0].
    let mut case = Case::honest(delta(3, 0, U256::ZERO));
    assert_eq!(verdict(&case), Ok(ReexecVerdict::Reproduced));
    case.predicate = delta(3, 1, U256::MAX);
    assert_eq!(verdict(&case), Ok(ReexecVerdict::Failed));
}

#[test]
fn blockhash_of_a_linked_ancestor() {
    let mut case = Case::honest(bounds(1, 0, U256::MAX));
    case.plan.target = BLOCKHASH_CONTRACT;
    case.plan.calldata = Bytes::new();
    case.witness = case.chain.witness(
        SPEC,
        &[CALLER, BLOCKHASH_CONTRACT, TARGET, case.chain.coinbase],
        &[(TARGET, slot(1))],
    );
    let parent = keccak256(&case.witness.ancestors[0]);
    case.claimed = parent.to_vec().into();
    assert_eq!(verdict(&case), Ok(ReexecVerdict::Reproduced));
    // Without the ancestor header the read is refused, not guessed.
    case.chain.ancestors = 0;
    case.witness = case.chain.witness(
        SPEC,
        &[CALLER, BLOCKHASH_CONTRACT, TARGET, case.chain.coinbase],
        &[(TARGET, slot(1))],
    );
    assert_eq!(verdict(&case), Err(OperationalError::MissingBlockHashWitness(999)));
}

fn code(r: Result<ReexecVerdict, OperationalError>) -> &'static str {
    r.expect_err("expected an operational error").code()
}

#[test]
fn missing_witness_entries_are_operational_errors() {
    let base = Case::honest(delta(1, 5, U256::from(5u64)));
    let w = |addrs: &[Address], slots: &[(Address, B256)]| base.chain.witness(SPEC, addrs, slots);
    let coinbase = base.chain.coinbase;

    let mut c = base.clone();
    c.witness = w(&[CALLER, coinbase], &[]);
    assert_eq!(verdict(&c), Err(OperationalError::MissingAccountWitness(TARGET)));

    let mut c = base.clone();
    c.witness = w(&[CALLER, TARGET, coinbase], &[(TARGET, slot(2))]);
    assert_eq!(
        verdict(&c),
        Err(OperationalError::MissingStorageWitness { address: TARGET, slot: slot(1) })
    );

    let mut c = base.clone();
    c.witness.codes.clear();
    assert_eq!(verdict(&c), Err(OperationalError::MissingCodeWitness(keccak256(CREDIT_CODE))));

    // A predicate slot outside the witness is an operational error, never `Failed`.
    let mut c = base.clone();
    c.predicate = delta(9, 0, U256::MAX);
    assert_eq!(
        verdict(&c),
        Err(OperationalError::MissingStorageWitness { address: TARGET, slot: slot(9) })
    );
}

#[test]
fn absent_accounts_are_proven_by_exclusion() {
    // Calling an address that provably does not exist succeeds with empty output.
    let mut case = Case::honest(bounds(1, 10, U256::from(10u64)));
    let nobody = Address::repeat_byte(0x77);
    case.plan.target = nobody;
    case.claimed = Bytes::new();
    case.witness =
        case.chain.witness(SPEC, &[CALLER, nobody, case.chain.coinbase], &[(TARGET, slot(1))]);
    // slot(1) of TARGET is requested but TARGET itself is not proven: refused.
    assert_eq!(code(verdict(&case)), "MissingAccountWitness");
    case.witness = case.chain.witness(
        SPEC,
        &[CALLER, nobody, TARGET, case.chain.coinbase],
        &[(TARGET, slot(1))],
    );
    assert!(case.witness.accounts.iter().any(|a| a.address == nobody && a.account.is_none()));
    assert_eq!(verdict(&case), Ok(ReexecVerdict::Reproduced));
}

#[test]
fn tampered_proofs_and_headers_are_refused() {
    let base = Case::honest(delta(1, 5, U256::from(5u64)));

    let mut c = base.clone();
    let target = c.witness.accounts.iter_mut().find(|a| a.address == TARGET).unwrap();
    let mut node = target.proof[0].to_vec();
    let last = node.len() - 1;
    node[last] ^= 1;
    target.proof[0] = node.into();
    assert_eq!(code(verdict(&c)), "InvalidAccountProof");

    let mut c = base.clone();
    let target = c.witness.accounts.iter_mut().find(|a| a.address == TARGET).unwrap();
    target.account.as_mut().unwrap().balance += U256::from(1u64);
    assert_eq!(code(verdict(&c)), "InvalidAccountProof");

    let mut c = base.clone();
    let target = c.witness.accounts.iter_mut().find(|a| a.address == TARGET).unwrap();
    target.storage[0].value += U256::from(1u64);
    assert_eq!(code(verdict(&c)), "InvalidStorageProof");

    let mut c = base.clone();
    let target = c.witness.accounts.iter_mut().find(|a| a.address == TARGET).unwrap();
    target.proof.clear();
    assert_eq!(code(verdict(&c)), "InvalidAccountProof");

    // A witness from another state (different root) does not match the anchor header.
    let mut c = base.clone();
    let mut other = c.chain.clone();
    other.accounts.get_mut(&TARGET).unwrap().storage.insert(slot(1), U256::from(11u64));
    c.witness = other.witness(SPEC, &[CALLER, TARGET, other.coinbase], &[(TARGET, slot(1))]);
    assert_eq!(code(verdict(&c)), "HeaderMismatch");

    // Ancestors must link to the anchor.
    let mut c = base.clone();
    c.witness.ancestors[0] = c.witness.header.clone();
    assert_eq!(code(verdict(&c)), "AncestorNotLinked");

    // Code nobody commits to.
    let mut c = base.clone();
    c.witness.codes.push(Bytes::from_static(&[0x00]));
    c.witness.canonicalize();
    assert_eq!(code(verdict(&c)), "UnreferencedCode");
}

#[test]
fn committed_inputs_are_checked_before_parsing() {
    let case = Case::honest(delta(1, 5, U256::from(5u64)));
    let good = case.request();

    let mut r = good.clone();
    r.spec_hash = keccak256("other");
    assert!(matches!(
        EvmBackend.verdict(&r),
        Err(OperationalError::Committed {
            what: "spec",
            source: CommittedError::HashMismatch { .. }
        })
    ));

    let mut r = good.clone();
    let mut bytes = r.delivery.to_vec();
    bytes.push(0x00); // not canonical, but hashed correctly
    r.delivery = bytes.into();
    r.delivery_hash = resolvd_proto::content_hash("delivery", &r.delivery);
    assert!(matches!(
        EvmBackend.verdict(&r),
        Err(OperationalError::Committed {
            what: "delivery",
            source: CommittedError::Decode { .. }
        })
    ));

    let mut r = good.clone();
    r.witness = Some(Bytes::from_static(b"garbage"));
    assert_eq!(EvmBackend.verdict(&r).unwrap_err().code(), "Committed");

    let mut r = good.clone();
    r.witness = None;
    assert_eq!(EvmBackend.verdict(&r).unwrap_err().code(), "MissingWitness");
}

#[test]
fn foreign_backend_version_anchor_and_chain_are_refused() {
    let mut c = Case::honest(delta(1, 5, U256::from(5u64)));
    c.backend_id = keccak256("another backend");
    assert_eq!(code(verdict(&c)), "ForeignBackend");

    let mut c = Case::honest(delta(1, 5, U256::from(5u64)));
    c.accepted_version = keccak256("revm 1");
    assert_eq!(code(verdict(&c)), "UnacceptedBackendVersion");

    let mut c = Case::honest(delta(1, 5, U256::from(5u64)));
    c.plan.chain_id = 2;
    assert_eq!(code(verdict(&c)), "ChainIdMismatch");

    // The request names another anchor than the spec embeds.
    let c = Case::honest(delta(1, 5, U256::from(5u64)));
    let mut r = c.request();
    let mut other = c.chain.clone();
    other.number += 1;
    let anchor = resolvd_proto::PrestateAnchorV1 {
        backend_id: *resolvd_replay::BACKEND_ID,
        body: resolvd_proto::Canonical::to_canonical_bytes(&other.anchor(SPEC)).into(),
    };
    r.prestate_anchor = resolvd_proto::Canonical::to_canonical_bytes(&anchor).into();
    r.prestate_anchor_hash = resolvd_proto::ContentType::content_hash(&anchor);
    assert_eq!(EvmBackend.verdict(&r).unwrap_err().code(), "AnchorMismatch");
}

#[test]
fn invalid_transactions_are_failed_verdicts() {
    // A caller that cannot pay for gas: the chain would reject the transaction,
    // so the plan cannot run on this prestate. Deterministic, hence a verdict.
    let mut c = Case::honest(delta(1, 5, U256::from(5u64)));
    c.chain.accounts.get_mut(&CALLER).unwrap().balance = U256::ZERO;
    c.witness = c.chain.witness(
        SPEC,
        &[CALLER, TARGET, c.chain.coinbase],
        &[(TARGET, slot(1)), (TARGET, slot(2)), (TARGET, slot(3))],
    );
    assert_eq!(verdict(&c), Ok(ReexecVerdict::Failed));
}

#[test]
fn erc20_transfer_on_a_real_token() {
    let case = erc20_case();
    assert_eq!(verdict(&case), Ok(ReexecVerdict::Reproduced));
    // Overdrawing reverts: Failed.
    let mut over = erc20_case();
    let mut data = over.plan.calldata.to_vec();
    data[36..68].copy_from_slice(&B256::from(U256::from(1001u64)).0);
    over.plan.calldata = data.into();
    assert_eq!(verdict(&over), Ok(ReexecVerdict::Failed));
    // The predicate's slot must be proven: without the recipient's slot, no verdict.
    let mut unproven = erc20_case();
    unproven.witness = unproven.chain.witness(
        SPEC,
        &[CALLER, TOKEN, unproven.chain.coinbase],
        &[(TOKEN, balance_slot(CALLER))],
    );
    assert_eq!(code(verdict(&unproven)), "MissingStorageWitness");
}
