//! Property tests: for every content and wire type, encode -> decode -> encode
//! is the identity, and decoding arbitrary bytes never panics.

use alloy_primitives::{Address, Bytes, B256, U256};
use proptest::{collection::vec, option, prelude::*};
use resolvd_proto::{
    wire::{
        ConflictEvidence, ContentRequest, ContentResponse, ContentUnavailable, DisputeAnnouncement,
        PartialCommit, QuorumCertificate, SignedVerdict, SignerAggregate, WireMessage,
    },
    AttachmentKind, AttachmentV1, BackendVersionPolicy, Canonical, Checks, DeliveryV1, EvmAnchorV1,
    EvmCallPlanV1, EvmSpecId, NoncePolicy, PredicateCommitmentV1, PrestateAnchorV1,
    ReexecRequestV1, ReexecVerdict, ReplayRecordV1, ResultEquals, SlotBounds, SlotEquals, SpecV1,
    VerdictCommitment, VerdictEnvelopeV1,
};
use std::fmt::Debug;

fn b256() -> impl Strategy<Value = B256> {
    any::<[u8; 32]>().prop_map(B256::from)
}

fn address() -> impl Strategy<Value = Address> {
    any::<[u8; 20]>().prop_map(Address::from)
}

/// Words biased towards small values, where minimal encoding matters most.
fn u256() -> impl Strategy<Value = U256> {
    prop_oneof![
        Just(U256::ZERO),
        any::<u64>().prop_map(U256::from),
        any::<[u8; 32]>().prop_map(U256::from_be_bytes),
    ]
}

fn small_u64() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), 0u64..256, any::<u64>()]
}

fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

fn verdict() -> impl Strategy<Value = ReexecVerdict> {
    prop_oneof![Just(ReexecVerdict::Reproduced), Just(ReexecVerdict::Failed)]
}

fn bounds() -> impl Strategy<Value = SlotBounds> {
    (address(), b256(), u256(), u256()).prop_map(|(address, slot, a, b)| SlotBounds {
        address,
        slot,
        min: a.min(b),
        max: a.max(b),
    })
}

fn predicate() -> impl Strategy<Value = PredicateCommitmentV1> {
    let equals = (address(), b256(), u256()).prop_map(|(address, slot, expected)| SlotEquals {
        address,
        slot,
        expected,
    });
    prop_oneof![
        b256().prop_map(|h| PredicateCommitmentV1::ResultEquals(ResultEquals {
            expected_result_hash: h
        })),
        vec(equals, 1..4)
            .prop_map(|checks| PredicateCommitmentV1::PoststateEquals(Checks { checks })),
        vec(bounds(), 1..4)
            .prop_map(|checks| PredicateCommitmentV1::PoststateBounded(Checks { checks })),
        vec(bounds(), 1..4)
            .prop_map(|checks| PredicateCommitmentV1::PoststateDelta(Checks { checks })),
    ]
}

fn evm_anchor() -> impl Strategy<Value = EvmAnchorV1> {
    let spec_id = prop_oneof![
        Just(EvmSpecId::Shanghai),
        Just(EvmSpecId::Cancun),
        Just(EvmSpecId::Prague),
        Just(EvmSpecId::Osaka)
    ];
    (
        (small_u64(), small_u64(), b256(), b256(), small_u64(), small_u64()),
        (small_u64(), address(), b256(), spec_id, option::of(small_u64()), option::of(bytes(64))),
    )
        .prop_map(
            |((chain_id, block_number, block_hash, state_root, timestamp, base_fee), rest)| {
                let (gas_limit, coinbase, prevrandao, spec_id, excess_blob_gas, header) = rest;
                EvmAnchorV1 {
                    chain_id,
                    block_number,
                    block_hash,
                    state_root,
                    timestamp,
                    base_fee,
                    gas_limit,
                    coinbase,
                    prevrandao,
                    spec_id,
                    excess_blob_gas,
                    header,
                }
            },
        )
}

fn prestate_anchor() -> impl Strategy<Value = PrestateAnchorV1> {
    (b256(), bytes(128)).prop_map(|(backend_id, body)| PrestateAnchorV1 { backend_id, body })
}

fn spec() -> impl Strategy<Value = SpecV1> {
    (b256(), b256(), prestate_anchor(), b256(), predicate(), small_u64()).prop_map(
        |(backend_id, accepted, prestate_anchor, schema, predicate, expiry)| SpecV1 {
            backend_id,
            backend_version_policy: BackendVersionPolicy::Exact,
            accepted_backend_version_hash: accepted,
            prestate_anchor,
            execution_schema_hash: schema,
            predicate,
            expiry,
        },
    )
}

fn delivery() -> impl Strategy<Value = DeliveryV1> {
    let attachment = (any::<bool>(), b256(), option::of("[a-z:/0-9é]{0,40}")).prop_map(
        |(witness, hash, retrieval_hint)| AttachmentV1 {
            kind: if witness {
                AttachmentKind::ReplayWitness
            } else {
                AttachmentKind::Supplementary
            },
            hash,
            retrieval_hint,
        },
    );
    (b256(), bytes(128), bytes(64), vec(attachment, 0..4)).prop_map(
        |(schema, plan, claimed, mut attachments)| {
            // At most one witness is canonical: demote the others.
            let mut seen = false;
            for a in &mut attachments {
                if a.kind == AttachmentKind::ReplayWitness {
                    if seen {
                        a.kind = AttachmentKind::Supplementary;
                    }
                    seen = true;
                }
            }
            DeliveryV1 {
                execution_schema_hash: schema,
                execution_plan: plan,
                claimed_result: claimed,
                attachments,
            }
        },
    )
}

fn call_plan() -> impl Strategy<Value = EvmCallPlanV1> {
    let policy = prop_oneof![Just(NoncePolicy::Prestate), Just(NoncePolicy::Unchecked)];
    (small_u64(), address(), address(), bytes(100), u256(), small_u64(), policy).prop_map(
        |(chain_id, caller, target, calldata, value, gas_limit, nonce_policy)| EvmCallPlanV1 {
            chain_id,
            caller,
            target,
            calldata,
            value,
            gas_limit,
            nonce_policy,
        },
    )
}

fn request() -> impl Strategy<Value = ReexecRequestV1> {
    (b256(), bytes(64), b256(), bytes(64), b256(), bytes(64), b256(), option::of(bytes(64)))
        .prop_map(|(deal_id, spec, sh, delivery, dh, anchor, ah, witness)| ReexecRequestV1 {
            deal_id,
            spec,
            spec_hash: sh,
            delivery,
            delivery_hash: dh,
            prestate_anchor: anchor,
            prestate_anchor_hash: ah,
            witness,
        })
}

fn record() -> impl Strategy<Value = ReplayRecordV1> {
    (b256(), b256(), b256(), b256(), b256(), b256(), verdict(), b256()).prop_map(
        |(backend_id, version, spec, delivery, anchor, root, outcome, result)| ReplayRecordV1 {
            backend_id,
            backend_version_hash: version,
            spec_hash: spec,
            delivery_hash: delivery,
            prestate_anchor_hash: anchor,
            prestate_root: root,
            outcome,
            result_hash: result,
        },
    )
}

fn witness() -> impl Strategy<Value = resolvd_proto::EvmWitnessV1> {
    use resolvd_proto::{AccountStateV1, AccountWitnessV1, EvmWitnessV1, StorageWitnessV1};
    let nodes = || vec(bytes(40), 0..4);
    let slot = (b256(), u256(), nodes()).prop_map(|(slot, value, proof)| StorageWitnessV1 {
        slot,
        value,
        proof,
    });
    let state = (small_u64(), u256(), b256(), b256()).prop_map(
        |(nonce, balance, storage_root, code_hash)| AccountStateV1 {
            nonce,
            balance,
            storage_root,
            code_hash,
        },
    );
    let account = (address(), nodes(), option::of(state), vec(slot, 0..3)).prop_map(
        |(address, proof, account, mut storage)| {
            if account.is_none() {
                storage.clear();
            }
            storage.sort_by_key(|s| s.slot);
            storage.dedup_by_key(|s| s.slot);
            AccountWitnessV1 { address, proof, account, storage }
        },
    );
    (bytes(80), vec(bytes(80), 0..3), vec(account, 0..4), vec(bytes(60), 0..3)).prop_map(
        |(header, ancestors, mut accounts, mut codes)| {
            accounts.sort_by_key(|a| a.address);
            accounts.dedup_by_key(|a| a.address);
            codes.sort_by_cached_key(|c| alloy_primitives::keccak256(c));
            codes.dedup();
            let mut w = EvmWitnessV1 { header, ancestors, accounts, codes };
            w.canonicalize();
            w
        },
    )
}

fn commitment() -> impl Strategy<Value = VerdictCommitment> {
    (b256(), record()).prop_map(|(deal, r)| VerdictEnvelopeV1::new(deal, r).commitment())
}

fn indices(min: usize) -> impl Strategy<Value = Vec<u32>> {
    proptest::collection::btree_set(any::<u32>(), min..8).prop_map(|s| s.into_iter().collect())
}

fn aggregate() -> impl Strategy<Value = SignerAggregate> {
    (commitment(), small_u64(), indices(1), any::<[u8; 32]>()).prop_map(|(c, epoch, idx, s)| {
        SignerAggregate { commitment: c, epoch, signer_indices: idx, aggregate_signature: sig(s) }
    })
}

fn sig(seed: [u8; 32]) -> [u8; 96] {
    let mut out = [0u8; 96];
    for (i, b) in out.iter_mut().enumerate() {
        *b = seed[i % 32].wrapping_add(i as u8);
    }
    out
}

fn canonical_roundtrip<T: Canonical + PartialEq + Debug>(v: &T) -> Result<(), TestCaseError> {
    let bytes = v.to_canonical_bytes();
    let decoded =
        T::from_canonical_bytes(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&decoded, v);
    prop_assert_eq!(decoded.to_canonical_bytes(), bytes);
    Ok(())
}

fn wire_roundtrip<T: WireMessage + PartialEq + Debug>(v: &T) -> Result<(), TestCaseError> {
    let bytes = v.encode_wire();
    let decoded = T::decode_wire(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&decoded, v);
    prop_assert_eq!(decoded.encode_wire(), bytes);
    Ok(())
}

proptest! {
    #[test]
    fn spec_roundtrip(v in spec()) { canonical_roundtrip(&v)?; }

    #[test]
    fn delivery_roundtrip(v in delivery()) { canonical_roundtrip(&v)?; }

    #[test]
    fn prestate_anchor_roundtrip(v in prestate_anchor()) { canonical_roundtrip(&v)?; }

    #[test]
    fn evm_anchor_roundtrip(v in evm_anchor()) { canonical_roundtrip(&v)?; }

    #[test]
    fn call_plan_roundtrip(v in call_plan()) { canonical_roundtrip(&v)?; }

    #[test]
    fn predicate_roundtrip(v in predicate()) { canonical_roundtrip(&v)?; }

    #[test]
    fn request_roundtrip(v in request()) { canonical_roundtrip(&v)?; }

    #[test]
    fn record_roundtrip(v in record()) { canonical_roundtrip(&v)?; }

    #[test]
    fn witness_roundtrip(v in witness()) { canonical_roundtrip(&v)?; }

    #[test]
    fn envelope_roundtrip(deal in b256(), r in record()) {
        canonical_roundtrip(&VerdictEnvelopeV1::new(deal, r))?;
    }

    #[test]
    fn commitment_abi_roundtrip(c in commitment()) {
        prop_assert_eq!(VerdictCommitment::from_abi(&c.to_abi()), Some(c));
    }

    #[test]
    fn dispute_announcement_roundtrip(
        c in commitment(), chain_id in small_u64(), escrow in address(),
        epoch in small_u64(), deadline in small_u64(), block in small_u64(), tx in b256(),
        block_hash in b256(), order_entropy in b256(),
    ) {
        wire_roundtrip(&DisputeAnnouncement {
            chain_id,
            escrow,
            deal_id: c.deal_id,
            spec_hash: c.spec_hash,
            delivery_hash: c.delivery_hash,
            prestate_anchor_hash: c.prestate_anchor_hash,
            prestate_root: c.prestate_root,
            backend_id: c.backend_id,
            backend_version_hash: c.backend_version_hash,
            epoch,
            resolve_deadline: deadline,
            block_number: block,
            tx_hash: tx,
            block_hash,
            order_entropy,
        })?;
    }

    #[test]
    fn signed_verdict_roundtrip(c in commitment(), epoch in small_u64(), idx in any::<u32>(), s in any::<[u8; 32]>()) {
        wire_roundtrip(&SignedVerdict { commitment: c, epoch, signer_index: idx, signature: sig(s) })?;
    }

    #[test]
    fn partial_commit_roundtrip(d in b256(), epoch in small_u64(), idx in any::<u32>(), h in b256(), s in any::<[u8; 32]>()) {
        wire_roundtrip(&PartialCommit { deal_id: d, epoch, signer_index: idx, commit: h, signature: sig(s) })?;
    }

    #[test]
    fn partial_commit_binds_epoch_signer_and_signature(c in commitment(), epoch in small_u64(), idx in any::<u32>(), s in any::<[u8; 32]>()) {
        let p = SignedVerdict { commitment: c, epoch, signer_index: idx, signature: sig(s) };
        let commit = PartialCommit::of(&p, sig(s));
        prop_assert!(commit.opens_to(&p));
        // The signed message binds the deal, the epoch, the signer and the commit.
        let m = commit.signing_message();
        prop_assert_ne!(m, PartialCommit { deal_id: B256::repeat_byte(0xee), ..commit }.signing_message());
        prop_assert_ne!(m, PartialCommit { epoch: epoch.wrapping_add(1), ..commit }.signing_message());
        prop_assert_ne!(m, PartialCommit { signer_index: idx.wrapping_add(1), ..commit }.signing_message());
        prop_assert_ne!(m, PartialCommit { commit: B256::repeat_byte(0xee), ..commit }.signing_message());
        let mut other = p.clone();
        other.signature[95] ^= 1;
        prop_assert!(!commit.opens_to(&other));
        let mut other = p.clone();
        other.signer_index = idx.wrapping_add(1);
        prop_assert!(!commit.opens_to(&other));
        let mut other = p;
        other.epoch = epoch.wrapping_add(1);
        prop_assert!(!commit.opens_to(&other));
    }

    #[test]
    fn certificate_roundtrip(c in commitment(), epoch in small_u64(), idx in indices(0), s in any::<[u8; 32]>()) {
        wire_roundtrip(&QuorumCertificate {
            commitment: c,
            epoch,
            non_signer_indices: idx,
            aggregate_signature: sig(s),
        })?;
    }

    #[test]
    fn conflict_roundtrip(a in aggregate(), b in aggregate()) {
        // Same deal, different commitments.
        let mut b = b;
        b.commitment.deal_id = a.commitment.deal_id;
        prop_assume!(a.commitment != b.commitment);
        wire_roundtrip(&ConflictEvidence { first: a, second: b })?;
    }

    #[test]
    fn content_roundtrip(h in b256(), content in option::of(bytes(256)), tag in 0usize..resolvd_proto::hash::TYPE_TAGS.len()) {
        wire_roundtrip(&ContentRequest { hash: h, type_tag: resolvd_proto::hash::TYPE_TAGS[tag].0 })?;
        wire_roundtrip(&ContentResponse { hash: h, result: content.ok_or(ContentUnavailable::NotFound) })?;
    }

    #[test]
    fn decoders_never_panic(bytes in vec(any::<u8>(), 0..256)) {
        let _ = SpecV1::from_canonical_bytes(&bytes);
        let _ = DeliveryV1::from_canonical_bytes(&bytes);
        let _ = EvmAnchorV1::from_canonical_bytes(&bytes);
        let _ = EvmCallPlanV1::from_canonical_bytes(&bytes);
        let _ = PredicateCommitmentV1::from_canonical_bytes(&bytes);
        let _ = VerdictEnvelopeV1::from_canonical_bytes(&bytes);
        let _ = resolvd_proto::EvmWitnessV1::from_canonical_bytes(&bytes);
        let _ = SignedVerdict::decode_wire(&bytes);
        let _ = PartialCommit::decode_wire(&bytes);
        let _ = QuorumCertificate::decode_wire(&bytes);
        let _ = ConflictEvidence::decode_wire(&bytes);
        let _ = ContentResponse::decode_wire(&bytes);
    }
}

/// Gossip accepts one encoding per message: re-ordered, repeated, unknown or
/// default-valued fields and non-minimal varints decode to the same value
/// but are not canonical.
#[test]
fn non_canonical_encodings_are_rejected() {
    let p = SignedVerdict {
        commitment: VerdictCommitment {
            deal_id: B256::repeat_byte(1),
            spec_hash: B256::repeat_byte(2),
            delivery_hash: B256::repeat_byte(3),
            prestate_anchor_hash: B256::repeat_byte(4),
            prestate_root: B256::repeat_byte(5),
            backend_id: B256::repeat_byte(6),
            backend_version_hash: B256::repeat_byte(7),
            outcome: resolvd_proto::ReexecVerdict::Reproduced,
            result_hash: B256::repeat_byte(8),
            trace_hash: B256::repeat_byte(9),
        },
        epoch: 3,
        signer_index: 1,
        signature: [7u8; 96],
    };
    let bytes = p.encode_wire();
    assert_eq!(SignedVerdict::decode_canonical(&bytes).unwrap(), p);
    let mut variants: Vec<Vec<u8>> = Vec::new();
    // An unknown field appended (field 15, varint 1).
    variants.push([bytes.clone(), vec![0x78, 0x01]].concat());
    // The epoch field repeated (last one wins: same value).
    variants.push([bytes.clone(), vec![0x10, 0x03]].concat());
    // The epoch as a non-minimal varint: find `0x10 0x03` and widen it.
    let at = bytes.windows(2).position(|w| w == [0x10, 0x03]).unwrap();
    variants.push([&bytes[..at], &[0x10, 0x83, 0x00], &bytes[at + 2..]].concat());
    for v in variants {
        assert_eq!(SignedVerdict::decode_wire(&v).unwrap(), p, "decodes to the same value");
        assert!(matches!(
            SignedVerdict::decode_canonical(&v),
            Err(resolvd_proto::WireError::NonCanonical { .. })
        ));
    }
}

/// An announcement with `block_hash` and no order entropy.
fn announcement(block_hash: B256) -> DisputeAnnouncement {
    DisputeAnnouncement {
        chain_id: 31337,
        escrow: Address::repeat_byte(0xe5),
        deal_id: B256::repeat_byte(1),
        spec_hash: B256::repeat_byte(2),
        delivery_hash: B256::repeat_byte(3),
        prestate_anchor_hash: B256::repeat_byte(4),
        prestate_root: B256::repeat_byte(5),
        backend_id: B256::repeat_byte(6),
        backend_version_hash: B256::repeat_byte(7),
        epoch: 2,
        resolve_deadline: 1_000,
        block_number: 10,
        tx_hash: B256::repeat_byte(8),
        block_hash,
        order_entropy: B256::ZERO,
    }
}

/// An announcement without a block hash (a record stored before the field
/// existed) decodes with a zero hash and re-encodes to the same bytes; a
/// zero hash spelled out is not the canonical encoding, and a short one is
/// malformed.
#[test]
fn an_announcement_without_its_block_hash_decodes_to_zero() {
    let a = announcement(B256::ZERO);
    let bytes = a.encode_wire();
    assert_eq!(DisputeAnnouncement::decode_canonical(&bytes).unwrap(), a);
    let with = DisputeAnnouncement { block_hash: B256::repeat_byte(9), ..a.clone() }.encode_wire();
    assert_eq!(with.len(), bytes.len() + 34, "field 14: a tag, a length, 32 bytes");
    // Field 14 (bytes) spelled out as 32 zero bytes.
    let spelled = [bytes.clone(), vec![0x72, 32], vec![0; 32]].concat();
    assert_eq!(DisputeAnnouncement::decode_wire(&spelled).unwrap(), a);
    assert!(matches!(
        DisputeAnnouncement::decode_canonical(&spelled),
        Err(resolvd_proto::WireError::NonCanonical { .. })
    ));
    let short = [bytes, vec![0x72, 31], vec![9; 31]].concat();
    assert!(DisputeAnnouncement::decode_wire(&short).is_err());
}

/// The order's entropy is optional the same way (field 15): absent is zero,
/// a zero spelled out is not canonical, a short one is malformed, and a
/// present one survives the round trip.
#[test]
fn an_announcement_without_its_order_entropy_decodes_to_zero() {
    let a = announcement(B256::repeat_byte(9));
    let bytes = a.encode_wire();
    assert_eq!(DisputeAnnouncement::decode_canonical(&bytes).unwrap(), a);
    let b = DisputeAnnouncement { order_entropy: B256::repeat_byte(0x0e), ..a.clone() };
    let with = b.encode_wire();
    assert_eq!(with.len(), bytes.len() + 34, "field 15: a tag, a length, 32 bytes");
    assert_eq!(DisputeAnnouncement::decode_canonical(&with).unwrap(), b);
    // Field 15 (bytes): tag 15 << 3 | 2 = 0x7a.
    let spelled = [bytes.clone(), vec![0x7a, 32], vec![0; 32]].concat();
    assert_eq!(DisputeAnnouncement::decode_wire(&spelled).unwrap(), a);
    assert!(matches!(
        DisputeAnnouncement::decode_canonical(&spelled),
        Err(resolvd_proto::WireError::NonCanonical { .. })
    ));
    let short = [bytes, vec![0x7a, 31], vec![9; 31]].concat();
    assert!(DisputeAnnouncement::decode_wire(&short).is_err());
}

/// Known answer of the commitment signature's message, computed independently:
/// `python3 -c "import hashlib; print(hashlib.sha256(b'resolvd/v1/partial-commit-signature' + bytes([1])*32 + (7).to_bytes(8,'big') + (3).to_bytes(4,'big') + bytes([2])*32).hexdigest())"`
#[test]
fn partial_commit_signing_message_known_answer() {
    assert_eq!(
        PartialCommit::message(&B256::repeat_byte(1), 7, 3, &B256::repeat_byte(2)).to_string(),
        "0x729289c18dad14f3d9855810f5934b0948b0610e1da1e0dcd80f48f264f3dbad"
    );
}

/// Known answer, computed independently:
/// `python3 -c "import hashlib; print(hashlib.sha256(b'resolvd/v1/partial-commit' + (7).to_bytes(8,'big') + (3).to_bytes(4,'big') + bytes(range(96))).hexdigest())"`
#[test]
fn partial_commit_known_answer() {
    let mut signature = [0u8; 96];
    for (i, b) in signature.iter_mut().enumerate() {
        *b = i as u8;
    }
    assert_eq!(
        resolvd_proto::wire::partial_commit(7, 3, &signature).to_string(),
        "0x673dc232fb4b292348faf09190250904521b78010b8f1e07dae65f018bd01b1f"
    );
}
