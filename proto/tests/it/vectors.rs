//! Golden vectors in `proto/vectors/*.json`.
//!
//! `golden_vectors` reads every file in the folder and fails if a file or a
//! vector in it is not consumed. `write_golden_vectors` (ignored; run it on
//! purpose) regenerates the files from `samples.rs`; review the diff: a changed
//! vector is a changed wire format.

use crate::samples;
use alloy_primitives::{hex, B256};
use resolvd_proto::{
    codec::{write_varint, MAX_DOCUMENT_LEN, MAX_LIST_ITEMS},
    content_hash, decode_committed, Canonical, CommittedError, ContentType, DeliveryV1,
    EvmAnchorV1, EvmCallPlanV1, PredicateCommitmentV1, PrestateAnchorV1, ReexecRequestV1,
    ReexecVerdict, ReplayRecordV1, SpecV1, VerdictCommitment, VerdictDomain, VerdictEnvelopeV1,
    VERDICT_COMMITMENT_TYPE,
};
use serde::{de::DeserializeOwned, Serialize};
use serde_json::{json, Value};
use std::{collections::BTreeSet, fmt::Debug, fs, path::PathBuf};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("vectors")
}

/// Every content type must have at least one positive vector.
const CONTENT_TYPES: &[&str] = &[
    "SpecV1",
    "DeliveryV1",
    "PrestateAnchorV1",
    "EvmAnchorV1",
    "EvmCallPlanV1",
    "PredicateCommitmentV1",
    "ReexecRequestV1",
    "ReplayRecordV1",
    "VerdictEnvelopeV1",
    "EvmWitnessV1",
];

/// Every decoder rule must have at least one negative vector.
const DECODE_RULES: &[&str] = &[
    "Truncated",
    "VarintOverflow",
    "NonMinimalVarint",
    "NonAscendingTag",
    "DuplicateTag",
    "UnknownTag",
    "MissingField",
    "LengthTooLarge",
    "ListTooLong",
    "TrailingBytes",
    "NonMinimalInteger",
    "IntegerOverflow",
    "InvalidFixedLength",
    "UnsupportedVersion",
    "UnknownVariant",
    "EmptyUnion",
    "MultipleUnionVariants",
    "InvalidUtf8",
    "EmptyList",
    "InvertedBounds",
    "DuplicateWitness",
    "InconsistentTraceHash",
    "InvalidWitness",
    "HashMismatch",
];

// ---------------------------------------------------------------- generation

fn positive<T: ContentType + Serialize>(ty: &str, name: &str, v: &T) -> Value {
    json!({
        "type": ty,
        "name": name,
        "value": v,
        "canonical": hex::encode_prefixed(v.to_canonical_bytes()),
        "hash": v.content_hash(),
    })
}

fn field(tag: u64, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    write_varint(&mut out, tag);
    write_varint(&mut out, value.len() as u64);
    out.extend_from_slice(value);
    out
}

fn doc(fields: &[(u64, &[u8])]) -> Vec<u8> {
    fields.iter().flat_map(|(t, v)| field(*t, v)).collect()
}

fn negative(ty: &str, name: &str, bytes: &[u8], error: &str) -> Value {
    json!({ "type": ty, "name": name, "bytes": hex::encode_prefixed(bytes), "error": error })
}

fn content_file() -> Value {
    let mut v = Vec::new();
    for (name, p) in samples::predicates() {
        v.push(positive("SpecV1", &format!("spec-{name}"), &samples::spec(p.clone())));
        v.push(positive("PredicateCommitmentV1", name, &p));
    }
    v.push(positive("DeliveryV1", "delivery-with-witness", &samples::delivery()));
    v.push(positive("DeliveryV1", "delivery-bare", &samples::delivery_bare()));
    v.push(positive("PrestateAnchorV1", "evm-anchor", &samples::prestate_anchor()));
    v.push(positive("EvmAnchorV1", "cancun", &samples::evm_anchor()));
    v.push(positive("EvmAnchorV1", "prague-with-header", &samples::evm_anchor_with_header()));
    v.push(positive("EvmCallPlanV1", "erc20-transfer", &samples::call_plan()));
    v.push(positive("EvmCallPlanV1", "value-transfer", &samples::call_plan_with_value()));
    v.push(positive("ReexecRequestV1", "with-witness", &samples::request()));
    v.push(positive(
        "ReexecRequestV1",
        "without-witness",
        &ReexecRequestV1 { witness: None, ..samples::request() },
    ));
    for outcome in [ReexecVerdict::Reproduced, ReexecVerdict::Failed] {
        let name = format!("{outcome:?}").to_lowercase();
        v.push(positive("ReplayRecordV1", &name, &samples::record(outcome)));
        v.push(positive("VerdictEnvelopeV1", &name, &samples::envelope(outcome)));
    }
    v.push(positive("EvmWitnessV1", "two-accounts", &samples::witness()));
    json!({
        "description": "Canonical TLV encodings and content hashes: hash = SHA-256(\"reckn/v1/\" || typeTag || canonical).",
        "vectors": v,
    })
}

fn negative_file() -> Value {
    let b32 = [0x11u8; 32];
    let spec = samples::spec(samples::predicates().remove(0).1);
    let spec_bytes = spec.to_canonical_bytes();
    let plan = samples::call_plan().to_canonical_bytes();
    let mut v = vec![
        negative("SpecV1", "truncated-value", &spec_bytes[..spec_bytes.len() - 1], "Truncated"),
        negative("ReplayRecordV1", "truncated-header", &[0x01], "Truncated"),
        negative(
            "EvmCallPlanV1",
            "varint-overflow-tag",
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00],
            "VarintOverflow",
        ),
        negative(
            "EvmCallPlanV1",
            "non-minimal-length",
            &[0x01, 0x81, 0x00, 0x01],
            "NonMinimalVarint",
        ),
        negative("EvmCallPlanV1", "non-minimal-tag", &[0x81, 0x00, 0x01, 0x01], "NonMinimalVarint"),
        negative(
            "EvmCallPlanV1",
            "non-ascending",
            &doc(&[(2, &[1; 20]), (1, &[1])]),
            "NonAscendingTag",
        ),
        negative("EvmCallPlanV1", "duplicate-tag", &doc(&[(1, &[1]), (1, &[1])]), "DuplicateTag"),
        negative(
            "EvmCallPlanV1",
            "unknown-tag-after-known",
            &[plan.clone(), field(8, &[1])].concat(),
            "UnknownTag",
        ),
        negative(
            "EvmCallPlanV1",
            "tag-zero",
            &[field(0, &[]), plan.clone()].concat(),
            "UnknownTag",
        ),
        negative(
            "PredicateCommitmentV1",
            "unknown-variant-tag",
            &field(5, &field(1, &b32)),
            "UnknownTag",
        ),
        negative(
            "EvmCallPlanV1",
            "missing-caller",
            &doc(&[(1, &[1]), (3, &[1; 20])]),
            "MissingField",
        ),
        negative("ReplayRecordV1", "empty-document", &[], "MissingField"),
        negative(
            "EvmCallPlanV1",
            "non-minimal-integer",
            &doc(&[(1, &[0, 1])]),
            "NonMinimalInteger",
        ),
        negative("EvmCallPlanV1", "zero-not-empty", &doc(&[(1, &[0])]), "NonMinimalInteger"),
        negative("EvmCallPlanV1", "u64-overflow", &doc(&[(1, &[1; 9])]), "IntegerOverflow"),
        negative(
            "EvmCallPlanV1",
            "u256-overflow",
            &doc(&[
                (1, &[1]),
                (2, &[2; 20]),
                (3, &[3; 20]),
                (4, &[]),
                (5, &[1; 33]),
                (6, &[1]),
                (7, &[1]),
            ]),
            "IntegerOverflow",
        ),
        negative(
            "EvmCallPlanV1",
            "short-address",
            &doc(&[(1, &[1]), (2, &[2; 19])]),
            "InvalidFixedLength",
        ),
        negative(
            "ReplayRecordV1",
            "long-hash",
            &doc(&[(1, &[1]), (2, &[2; 33])]),
            "InvalidFixedLength",
        ),
        negative("ReplayRecordV1", "version-2", &doc(&[(1, &[2])]), "UnsupportedVersion"),
        negative("SpecV1", "version-0", &doc(&[(1, &[])]), "UnsupportedVersion"),
        negative(
            "EvmCallPlanV1",
            "nonce-policy-3",
            &doc(&[
                (1, &[1]),
                (2, &[2; 20]),
                (3, &[3; 20]),
                (4, &[]),
                (5, &[]),
                (6, &[1]),
                (7, &[3]),
            ]),
            "UnknownVariant",
        ),
        negative("PredicateCommitmentV1", "empty-union", &[], "EmptyUnion"),
        negative(
            "PredicateCommitmentV1",
            "two-variants",
            &doc(&[(1, &field(1, &b32)), (2, &field(1, &[0]))]),
            "MultipleUnionVariants",
        ),
        negative(
            "PredicateCommitmentV1",
            "empty-checks",
            &field(2, &field(1, &[0x00])),
            "EmptyList",
        ),
    ];

    // Lists: count, then length-prefixed items.
    let bounds = |min: &[u8], max: &[u8]| doc(&[(1, &[7; 20]), (2, &b32), (3, min), (4, max)]);
    let item = bounds(&[1], &[2]);
    let list = |count: u64, items: &[Vec<u8>], extra: &[u8]| {
        let mut out = Vec::new();
        write_varint(&mut out, count);
        for it in items {
            write_varint(&mut out, it.len() as u64);
            out.extend_from_slice(it);
        }
        out.extend_from_slice(extra);
        out
    };
    v.push(negative(
        "PredicateCommitmentV1",
        "list-trailing-bytes",
        &field(3, &field(1, &list(1, std::slice::from_ref(&item), &[0x00]))),
        "TrailingBytes",
    ));
    v.push(negative(
        "PredicateCommitmentV1",
        "list-count-beyond-items",
        &field(3, &field(1, &list(2, std::slice::from_ref(&item), &[]))),
        "Truncated",
    ));
    v.push(negative(
        "PredicateCommitmentV1",
        "list-too-long",
        &field(3, &field(1, &list(MAX_LIST_ITEMS + 1, &[], &[]))),
        "ListTooLong",
    ));
    v.push(negative(
        "PredicateCommitmentV1",
        "inverted-bounds",
        &field(4, &field(1, &list(2, &[item.clone(), bounds(&[3], &[2])], &[]))),
        "InvertedBounds",
    ));
    let mut huge = vec![0x01];
    write_varint(&mut huge, MAX_DOCUMENT_LEN as u64 + 1);
    v.push(negative("SpecV1", "length-beyond-maximum", &huge, "LengthTooLarge"));

    // Attachments.
    let attachment = |kind: u8, hint: Option<&[u8]>| {
        let mut f = vec![(1u64, vec![kind]), (2, b32.to_vec())];
        if let Some(h) = hint {
            f.push((3, h.to_vec()));
        }
        f.iter().flat_map(|(t, v)| field(*t, v)).collect::<Vec<u8>>()
    };
    let delivery = |atts: &[Vec<u8>]| {
        doc(&[(1, &[1]), (2, &b32), (3, &[]), (4, &[]), (5, &list(atts.len() as u64, atts, &[]))])
    };
    v.push(negative(
        "DeliveryV1",
        "hint-not-utf8",
        &delivery(&[attachment(1, Some(&[0xff, 0xfe]))]),
        "InvalidUtf8",
    ));
    v.push(negative(
        "DeliveryV1",
        "two-witnesses",
        &delivery(&[attachment(1, None), attachment(1, None)]),
        "DuplicateWitness",
    ));
    v.push(negative(
        "DeliveryV1",
        "hint-too-long",
        &delivery(&[attachment(2, Some(&[b'a'; 2049]))]),
        "LengthTooLarge",
    ));

    // Envelope whose traceHash does not commit to its record.
    let env = samples::envelope(ReexecVerdict::Reproduced);
    let mut bytes = env.to_canonical_bytes();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    v.push(negative("VerdictEnvelopeV1", "trace-hash-mismatch", &bytes, "InconsistentTraceHash"));
    // Flipping the outcome alone also breaks the trace hash.
    let failed = VerdictEnvelopeV1 {
        record: ReplayRecordV1 { outcome: ReexecVerdict::Failed, ..env.record.clone() },
        ..env.clone()
    };
    v.push(negative(
        "VerdictEnvelopeV1",
        "outcome-flipped",
        &failed.to_canonical_bytes(),
        "InconsistentTraceHash",
    ));

    // Witness shape.
    let mut unsorted = samples::witness();
    unsorted.accounts.reverse();
    v.push(negative(
        "EvmWitnessV1",
        "accounts-not-ascending",
        &unsorted.to_canonical_bytes(),
        "InvalidWitness",
    ));
    let mut orphan = samples::witness();
    let absent = orphan.accounts.iter().position(|a| a.account.is_none()).unwrap();
    let slot = orphan.accounts.iter().find_map(|a| a.storage.first().cloned()).unwrap();
    orphan.accounts[absent].storage.push(slot);
    v.push(negative(
        "EvmWitnessV1",
        "storage-under-absent-account",
        &orphan.to_canonical_bytes(),
        "InvalidWitness",
    ));
    let mut dup = samples::witness();
    dup.codes.push(dup.codes[0].clone());
    v.push(negative("EvmWitnessV1", "duplicate-code", &dup.to_canonical_bytes(), "InvalidWitness"));

    // Hash before parse: valid bytes under the wrong commitment.
    let mut wrong = negative("SpecV1", "hash-mismatch", &spec_bytes, "HashMismatch");
    wrong["committedHash"] = json!(content_hash("delivery", &spec_bytes));
    v.push(wrong);
    let mut garbage =
        negative("SpecV1", "garbage-under-its-own-hash", &[0x02, 0x00, 0x01], "NonAscendingTag");
    garbage["committedHash"] = json!(content_hash("spec", &[0x02, 0x00, 0x01]));
    v.push(garbage);

    json!({
        "description": "Bytes every decoder must reject, with the DecodeError code (or HashMismatch when decoded under committedHash).",
        "vectors": v,
    })
}

fn trace_hash_file() -> Value {
    let v: Vec<Value> = [ReexecVerdict::Reproduced, ReexecVerdict::Failed]
        .into_iter()
        .map(|o| {
            let r = samples::record(o);
            json!({
                "name": format!("{o:?}").to_lowercase(),
                "record": r,
                "canonical": hex::encode_prefixed(r.to_canonical_bytes()),
                "traceHash": r.content_hash(),
            })
        })
        .collect();
    json!({
        "description": "ReplayRecordV1 -> traceHash = SHA-256(\"reckn/v1/replay-record\" || canonical). The canonical bytes are the seed's 1-byte tag / 1-byte length form.",
        "vectors": v,
    })
}

fn eip712_file() -> Value {
    let mut v = Vec::new();
    for (i, domain) in samples::domains().into_iter().enumerate() {
        for outcome in [ReexecVerdict::Reproduced, ReexecVerdict::Failed] {
            let c = samples::envelope(outcome).commitment();
            v.push(json!({
                "name": format!("domain{i}-{outcome:?}").to_lowercase(),
                "domain": domain,
                "commitment": c,
                "onchainOutcome": c.onchain_outcome(),
                "typeHash": alloy_primitives::keccak256(VERDICT_COMMITMENT_TYPE),
                "domainSeparator": domain.eip712().separator(),
                "structHash": c.struct_hash(),
                "digest": c.eip712_digest(&domain),
            }));
        }
    }
    json!({
        "description": "EIP-712 digest of VerdictCommitment; read by proto tests and by contracts/test/VerdictHash.t.sol.",
        "typeString": VERDICT_COMMITMENT_TYPE,
        "vectors": v,
    })
}

#[test]
#[ignore = "regenerates proto/vectors; run on purpose and review the diff"]
fn write_golden_vectors() {
    for (name, value) in [
        ("content.json", content_file()),
        ("negative.json", negative_file()),
        ("trace_hash.json", trace_hash_file()),
        ("eip712_verdict.json", eip712_file()),
    ] {
        let text = serde_json::to_string_pretty(&value).unwrap() + "\n";
        fs::write(dir().join(name), text).unwrap();
    }
}

// ----------------------------------------------------------------- checking

fn bytes_of(v: &Value, key: &str) -> Vec<u8> {
    hex::decode(v[key].as_str().unwrap_or_else(|| panic!("{key} missing"))).unwrap()
}

fn b256_of(v: &Value, key: &str) -> B256 {
    v[key].as_str().unwrap_or_else(|| panic!("{key} missing")).parse().unwrap()
}

fn check_positive<T>(v: &Value)
where
    T: ContentType + Serialize + DeserializeOwned + PartialEq + Debug,
{
    let name = v["name"].as_str().unwrap();
    let value: T = serde_json::from_value(v["value"].clone()).unwrap();
    let canonical = bytes_of(v, "canonical");
    let hash = b256_of(v, "hash");
    assert_eq!(value.to_canonical_bytes(), canonical, "{name}: encoding");
    assert_eq!(value.content_hash(), hash, "{name}: hash");
    let decoded: T = decode_committed(&canonical, &hash).unwrap();
    assert_eq!(decoded, value, "{name}: decode");
}

fn check_negative<T: ContentType + Debug>(v: &Value) {
    let name = v["name"].as_str().unwrap();
    let bytes = bytes_of(v, "bytes");
    let want = v["error"].as_str().unwrap();
    let got = match v.get("committedHash") {
        Some(_) => match decode_committed::<T>(&bytes, &b256_of(v, "committedHash")) {
            Err(CommittedError::HashMismatch { .. }) => "HashMismatch".to_owned(),
            Err(CommittedError::Decode { source, .. }) => source.code().to_owned(),
            Err(e) => panic!("{name}: unexpected {e:?}"),
            Ok(t) => panic!("{name}: accepted {t:?}"),
        },
        None => match T::from_canonical_bytes(&bytes) {
            Err(e) => e.code().to_owned(),
            Ok(t) => panic!("{name}: accepted {t:?}"),
        },
    };
    assert_eq!(got, want, "{name}");
}

fn dispatch(ty: &str, v: &Value, positive: bool) {
    macro_rules! run {
        ($($name:literal => $t:ty),+ $(,)?) => {
            match ty {
                $($name => if positive { check_positive::<$t>(v) } else { check_negative::<$t>(v) },)+
                other => panic!("vector names unknown type {other}"),
            }
        };
    }
    run! {
        "SpecV1" => SpecV1,
        "DeliveryV1" => DeliveryV1,
        "PrestateAnchorV1" => PrestateAnchorV1,
        "EvmAnchorV1" => EvmAnchorV1,
        "EvmCallPlanV1" => EvmCallPlanV1,
        "PredicateCommitmentV1" => PredicateCommitmentV1,
        "ReexecRequestV1" => ReexecRequestV1,
        "ReplayRecordV1" => ReplayRecordV1,
        "VerdictEnvelopeV1" => VerdictEnvelopeV1,
        "EvmWitnessV1" => resolvd_proto::EvmWitnessV1,
    }
}

fn consume_content(file: &Value) -> usize {
    let mut seen = BTreeSet::new();
    let vectors = file["vectors"].as_array().unwrap();
    for v in vectors {
        let ty = v["type"].as_str().unwrap();
        dispatch(ty, v, true);
        seen.insert(ty.to_owned());
    }
    let missing: Vec<_> = CONTENT_TYPES.iter().filter(|t| !seen.contains(**t)).collect();
    assert!(missing.is_empty(), "content types without a positive vector: {missing:?}");
    vectors.len()
}

fn consume_negative(file: &Value) -> usize {
    let mut seen = BTreeSet::new();
    let vectors = file["vectors"].as_array().unwrap();
    for v in vectors {
        dispatch(v["type"].as_str().unwrap(), v, false);
        seen.insert(v["error"].as_str().unwrap().to_owned());
    }
    let missing: Vec<_> = DECODE_RULES.iter().filter(|r| !seen.contains(**r)).collect();
    assert!(missing.is_empty(), "decoder rules without a negative vector: {missing:?}");
    vectors.len()
}

fn consume_trace_hash(file: &Value) -> usize {
    let vectors = file["vectors"].as_array().unwrap();
    for v in vectors {
        let record: ReplayRecordV1 = serde_json::from_value(v["record"].clone()).unwrap();
        let canonical = bytes_of(v, "canonical");
        assert_eq!(record.to_canonical_bytes(), canonical);
        assert_eq!(record.content_hash(), b256_of(v, "traceHash"));
        // The seed's form: nine fields, each a 1-byte tag 01..09 and a 1-byte length.
        let mut rest = canonical.as_slice();
        for tag in 1..=9u8 {
            assert_eq!(rest[0], tag, "tag byte");
            let len = rest[1] as usize;
            assert!(len < 0x80, "length fits one byte");
            rest = &rest[2 + len..];
        }
        assert!(rest.is_empty());
        // The envelope of this record carries exactly this trace hash.
        let env = VerdictEnvelopeV1::new(samples::DEAL_ID, record);
        assert_eq!(env.trace_hash, b256_of(v, "traceHash"));
    }
    vectors.len()
}

fn consume_eip712(file: &Value) -> usize {
    assert_eq!(file["typeString"], VERDICT_COMMITMENT_TYPE);
    let vectors = file["vectors"].as_array().unwrap();
    for v in vectors {
        let domain: VerdictDomain = serde_json::from_value(v["domain"].clone()).unwrap();
        let c: VerdictCommitment = serde_json::from_value(v["commitment"].clone()).unwrap();
        assert_eq!(u64::from(c.onchain_outcome()), v["onchainOutcome"].as_u64().unwrap());
        assert_eq!(alloy_primitives::keccak256(VERDICT_COMMITMENT_TYPE), b256_of(v, "typeHash"));
        assert_eq!(domain.eip712().separator(), b256_of(v, "domainSeparator"));
        assert_eq!(c.struct_hash(), b256_of(v, "structHash"));
        assert_eq!(c.eip712_digest(&domain), b256_of(v, "digest"));
    }
    vectors.len()
}

#[test]
fn golden_vectors() {
    type Handler = fn(&Value) -> usize;
    let handlers: &[(&str, Handler)] = &[
        ("content.json", consume_content),
        ("negative.json", consume_negative),
        ("trace_hash.json", consume_trace_hash),
        ("eip712_verdict.json", consume_eip712),
    ];
    let mut files: Vec<String> = fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json"))
        .collect();
    files.sort();
    let mut consumed = BTreeSet::new();
    for name in &files {
        let (_, handler) = handlers
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("vector file {name} is not consumed by any test"));
        let file: Value = serde_json::from_str(&fs::read_to_string(dir().join(name)).unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let total = file["vectors"].as_array().map_or(0, Vec::len);
        let used = handler(&file);
        assert!(total > 0, "{name} holds no vectors");
        assert_eq!(used, total, "{name}: {used} of {total} vectors consumed");
        consumed.insert(name.as_str());
    }
    for (name, _) in handlers {
        assert!(consumed.contains(name), "expected vector file {name} is missing");
    }
}
