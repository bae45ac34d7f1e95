//! Cross-language BLS vectors in `consensus/vectors/`.
//!
//! `bls_vectors` reads every vector file and fails if a file, a section or a
//! vector is not consumed; `contracts/test/BLS.t.sol` reads the same files.
//! `write_bls_vectors` (ignored; `make vectors`) regenerates the generated ones.
//! `rfc9380_hash_to_g2.json` is transcribed from RFC 9380 Appendix J.10.1 and
//! is never regenerated.

use alloy_primitives::{hex, Address, B256, U256};
use resolvd_consensus::{
    Attestation, Committee, ConflictEvidence, Error, Member, PublicKey, QuorumCertificate,
    SecretKey, Signature, DEFAULT_THRESHOLD_BPS,
};
use resolvd_proto::{ReexecVerdict, VerdictCommitment, VerdictDomain};
use serde_json::{json, Value};
use std::{collections::BTreeMap, fs, path::PathBuf};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("vectors")
}

pub(crate) fn secret(i: usize) -> SecretKey {
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&(i as u64 + 1).to_be_bytes());
    seed[8..].copy_from_slice(&[0x5e; 24]);
    SecretKey::from_seed(&seed).unwrap()
}

pub(crate) fn domain() -> VerdictDomain {
    VerdictDomain {
        name: "resolvd".into(),
        version: "1".into(),
        chain_id: 31337,
        verifying_contract: "0x5FbDB2315678afecb367f032d93F642f64180aa3".parse().unwrap(),
    }
}

pub(crate) fn commitment(deal: u8, outcome: ReexecVerdict) -> VerdictCommitment {
    VerdictCommitment {
        deal_id: B256::repeat_byte(deal),
        spec_hash: B256::repeat_byte(0x11),
        delivery_hash: B256::repeat_byte(0x22),
        prestate_anchor_hash: B256::repeat_byte(0x33),
        prestate_root: B256::repeat_byte(0x44),
        backend_id: B256::repeat_byte(0x55),
        backend_version_hash: B256::repeat_byte(0x66),
        outcome,
        result_hash: B256::repeat_byte(0x77),
        trace_hash: B256::repeat_byte(if outcome == ReexecVerdict::Failed { 0x99 } else { 0x88 }),
    }
}

pub(crate) fn committee(n: usize, stakes: &[u64], bps: u16) -> Committee {
    let members = (0..n)
        .map(|i| Member {
            index: i as u32,
            operator: Address::with_last_byte(i as u8 + 1),
            key: secret(i).public_key(),
            stake: U256::from(stakes[i % stakes.len()]),
        })
        .collect();
    Committee::new(1, members, bps).unwrap()
}

fn h<T: AsRef<[u8]>>(b: T) -> String {
    hex::encode_prefixed(b)
}

fn bytes_of(v: &Value, key: &str) -> Vec<u8> {
    hex::decode(v[key].as_str().unwrap_or_else(|| panic!("{key} missing in {v}"))).unwrap()
}

fn u32s(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

/// A G1 point on the curve but outside the subgroup, EIP-2537 encoded.
fn g1_outside_subgroup() -> Vec<u8> {
    for k in 1u8.. {
        let mut c = [0u8; 48];
        c[0] = 0x80;
        c[47] = k;
        if let Ok(p) = blst::min_pk::PublicKey::uncompress(&c) {
            if p.validate().is_err() {
                let raw = p.serialize();
                let mut out = vec![0u8; 128];
                out[16..64].copy_from_slice(&raw[..48]);
                out[80..128].copy_from_slice(&raw[48..]);
                return out;
            }
        }
    }
    unreachable!()
}

/// A G2 point on the curve but outside the subgroup, EIP-2537 encoded.
fn g2_outside_subgroup() -> Vec<u8> {
    for k in 1u8.. {
        let mut c = [0u8; 96];
        c[0] = 0x80;
        c[95] = k;
        if let Ok(p) = blst::min_pk::Signature::uncompress(&c) {
            if !p.subgroup_check() {
                // blst: x.c1 x.c0 y.c1 y.c0; EIP-2537: x.c0 x.c1 y.c0 y.c1.
                let raw = p.serialize();
                let mut out = vec![0u8; 256];
                for (slot, field) in [1usize, 0, 3, 2].into_iter().enumerate() {
                    out[slot * 64 + 16..slot * 64 + 64]
                        .copy_from_slice(&raw[field * 48..field * 48 + 48]);
                }
                return out;
            }
        }
    }
    unreachable!()
}

// ---------------------------------------------------------------- generation

const N_KEYS: usize = 8;
const BENCH_SIZES: [usize; 4] = [4, 16, 64, 256];

fn generate_bls() -> Value {
    let d = domain();
    let keys: Vec<Value> = (0..N_KEYS)
        .map(|i| {
            let sk = secret(i);
            let pk = sk.public_key();
            json!({
                "publicKey": h(pk.compress()),
                "publicKeyG1": h(pk.to_eip2537()),
                "proofOfPossession": h(sk.prove_possession().to_eip2537()),
                "operator": crate::escrow::operator(i),
                "boundProofOfPossession": h(sk.prove_possession_for(&crate::escrow::binding(i)).to_eip2537()),
            })
        })
        .collect();

    let mut signatures = Vec::new();
    for i in 0..N_KEYS {
        let digest = commitment(i as u8 + 1, ReexecVerdict::Reproduced).eip712_digest(&d);
        let sig = secret(i).sign(&digest);
        signatures.push(json!({
            "name": format!("key{i}"),
            "key": i,
            "digest": digest,
            "signature": h(sig.to_eip2537()),
            "signatureCompressed": h(sig.compress()),
        }));
    }

    let digest = commitment(0xaa, ReexecVerdict::Failed).eip712_digest(&d);
    let aggregates: Vec<Value> = (1..=N_KEYS)
        .map(|n| {
            let signers: Vec<usize> = (0..n).collect();
            let sig = Signature::aggregate(
                &signers.iter().map(|&i| secret(i).sign(&digest)).collect::<Vec<_>>(),
            )
            .unwrap();
            let key = PublicKey::aggregate(
                &signers.iter().map(|&i| secret(i).public_key()).collect::<Vec<_>>(),
            )
            .unwrap();
            json!({
                "name": format!("first{n}"),
                "signers": signers,
                "digest": digest,
                "aggregateKey": h(key.to_eip2537()),
                "signature": h(sig.to_eip2537()),
            })
        })
        .collect();

    let stakes = [10u64, 20, 30, 40, 50, 60, 70, 80];
    let mut certificates = Vec::new();
    for (name, n, non_signers) in [
        ("all-of-4", 4usize, vec![]),
        ("one-missing-of-8", 8, vec![3u32]),
        ("two-missing-of-8", 8, vec![0, 5]),
    ] {
        let c = committee(n, &stakes, DEFAULT_THRESHOLD_BPS);
        let cm = commitment(0x42, ReexecVerdict::Reproduced);
        let digest = cm.eip712_digest(&d);
        let signers = c.complement(&non_signers).unwrap();
        let sigs: Vec<Signature> =
            signers.iter().map(|&i| secret(i as usize).sign(&digest)).collect();
        let qc = QuorumCertificate {
            commitment: cm,
            epoch: c.epoch(),
            non_signers: non_signers.clone(),
            signature: Signature::aggregate(&sigs).unwrap(),
        };
        let signed = qc.verify(&c, &d).unwrap();
        certificates.push(json!({
            "name": name,
            "committeeSize": n,
            "stakes": &stakes[..n],
            "thresholdBps": DEFAULT_THRESHOLD_BPS,
            "commitment": cm,
            "onchainOutcome": cm.onchain_outcome(),
            "digest": digest,
            "nonSigners": non_signers,
            "signature": h(qc.signature.to_eip2537()),
            "signedStake": signed.to::<u64>(),
        }));
    }

    // Equivocation: signers {1,2,3} signed Reproduced, signers {3,4} signed Failed.
    let c = committee(N_KEYS, &stakes, DEFAULT_THRESHOLD_BPS);
    let att = |outcome, signers: Vec<u32>| {
        let cm = commitment(0x42, outcome);
        let digest = cm.eip712_digest(&d);
        let sigs: Vec<Signature> =
            signers.iter().map(|&i| secret(i as usize).sign(&digest)).collect();
        Attestation {
            commitment: cm,
            epoch: 1,
            signers,
            signature: Signature::aggregate(&sigs).unwrap(),
        }
    };
    let first = att(ReexecVerdict::Reproduced, vec![1, 2, 3]);
    let second = att(ReexecVerdict::Failed, vec![3, 4]);
    let committees = BTreeMap::from([(1u64, c.clone())]);
    let ev = ConflictEvidence::verify(first.clone(), second.clone(), &committees, &d).unwrap();
    let side = |a: &Attestation| {
        json!({
            "commitment": a.commitment,
            "onchainOutcome": a.commitment.onchain_outcome(),
            "digest": a.commitment.eip712_digest(&d),
            "signers": a.signers,
            "signature": h(a.signature.to_eip2537()),
        })
    };
    let equivocators: Vec<u32> = ev.equivocators.iter().map(|k| c.index_of(k).unwrap()).collect();
    let equivocations = vec![json!({
        "name": "overlap-one",
        "committeeSize": N_KEYS,
        "first": side(&first),
        "second": side(&second),
        "equivocators": equivocators,
    })];

    // Negative cases.
    let digest = commitment(1, ReexecVerdict::Reproduced).eip712_digest(&d);
    let good = secret(0).sign(&digest);
    let pk0 = h(secret(0).public_key().to_eip2537());
    let mut tampered = good.to_eip2537();
    tampered[255] ^= 1;
    let sig_case = |name: &str, pk: &str, digest: B256, sig: &[u8], error: &str| json!({ "name": name, "check": "signature", "publicKey": pk, "digest": digest, "signature": h(sig), "error": error });
    let negative = vec![
        sig_case("wrong-digest", &pk0, B256::repeat_byte(0xee), &good.to_eip2537(), "VerifyFailed"),
        sig_case(
            "wrong-key",
            &h(secret(1).public_key().to_eip2537()),
            digest,
            &good.to_eip2537(),
            "VerifyFailed",
        ),
        sig_case("tampered-signature", &pk0, digest, &tampered, "InvalidEncoding"),
        sig_case(
            "signature-outside-subgroup",
            &pk0,
            digest,
            &g2_outside_subgroup(),
            "NotInSubgroup",
        ),
        sig_case(
            "key-outside-subgroup",
            &h(g1_outside_subgroup()),
            digest,
            &good.to_eip2537(),
            "NotInSubgroup",
        ),
        sig_case("signature-at-infinity", &pk0, digest, &[0u8; 256], "Infinity"),
        sig_case("key-at-infinity", &h([0u8; 128]), digest, &good.to_eip2537(), "Infinity"),
        json!({
            "name": "pop-of-other-key", "check": "proofOfPossession",
            "publicKey": pk0, "signature": h(secret(1).prove_possession().to_eip2537()),
            "error": "InvalidProofOfPossession",
        }),
        json!({
            "name": "bound-pop-of-other-operator", "check": "boundProofOfPossession",
            "publicKey": pk0, "operator": crate::escrow::operator(1),
            "signature": h(secret(0).prove_possession_for(&crate::escrow::binding(0)).to_eip2537()),
            "error": "InvalidProofOfPossession",
        }),
        json!({
            "name": "unbound-pop-as-bound", "check": "boundProofOfPossession",
            "publicKey": pk0, "operator": crate::escrow::operator(0),
            "signature": h(secret(0).prove_possession().to_eip2537()),
            "error": "InvalidProofOfPossession",
        }),
        json!({
            "name": "signature-as-pop", "check": "proofOfPossession",
            "publicKey": pk0,
            "signature": h(secret(0).sign_with_dst(&secret(0).public_key().compress(), resolvd_consensus::SIGNATURE_DST).to_eip2537()),
            "error": "InvalidProofOfPossession",
        }),
        json!({
            "name": "non-signer-out-of-range", "check": "certificate", "certificate": 1,
            "nonSigners": [8], "error": "IndexOutOfRange",
        }),
        json!({
            "name": "non-signers-not-ascending", "check": "certificate", "certificate": 2,
            "nonSigners": [5, 0], "error": "IndicesNotAscending",
        }),
        json!({
            "name": "below-threshold", "check": "certificate", "certificate": 1,
            "nonSigners": [6, 7], "error": "BelowThreshold",
        }),
        json!({
            "name": "non-signer-claimed-as-signer", "check": "certificate", "certificate": 1,
            "nonSigners": [], "error": "VerifyFailed",
        }),
    ];

    json!({
        "description": "BLS12-381 min-pk vectors: keys from fixed seeds with PoPs (unbound, and bound to popBinding + the key's operator: message = compressed key || uint256 chainId || registry || operator), signatures, aggregates, certificates, equivocation evidence, negative cases. Points in EIP-2537 encoding. Read by consensus/tests/it and contracts/test/BLS.t.sol.",
        "sigDst": String::from_utf8(resolvd_consensus::SIGNATURE_DST.to_vec()).unwrap(),
        "popDst": String::from_utf8(resolvd_consensus::POP_DST.to_vec()).unwrap(),
        "popBinding": { "chainId": crate::escrow::CHAIN_ID, "registry": crate::escrow::REGISTRY },
        "domain": d,
        "keys": keys,
        "signatures": signatures,
        "aggregates": aggregates,
        "certificates": certificates,
        "equivocations": equivocations,
        "negative": negative,
    })
}

fn generate_bench() -> Value {
    let n_max = *BENCH_SIZES.last().unwrap();
    let secrets: Vec<SecretKey> = (0..n_max).map(secret).collect();
    let keys: Vec<String> = secrets.iter().map(|s| h(s.public_key().to_eip2537())).collect();
    let d = domain();
    let cm = commitment(0x42, ReexecVerdict::Reproduced);
    let digest = cm.eip712_digest(&d);
    let partials: Vec<Signature> = secrets.iter().map(|s| s.sign(&digest)).collect();
    let mut cases = Vec::new();
    for n in BENCH_SIZES {
        for missing in [0usize, (n / 10).max(1)] {
            // Spread non-signers over the committee.
            let non_signers: Vec<u32> = (0..missing).map(|k| (k * n / missing) as u32).collect();
            let sig = Signature::aggregate(
                (0..n as u32).filter(|i| !non_signers.contains(i)).map(|i| &partials[i as usize]),
            )
            .unwrap();
            cases.push(json!({
                "name": format!("n{n}-missing{missing}"),
                "n": n,
                "nonSigners": non_signers,
                "signature": h(sig.to_eip2537()),
            }));
        }
    }
    json!({
        "description": "Committees for the certificate-verification gas benchmark (contracts/test/BLSGas.t.sol): the first n keys, stake 1 each, threshold 6667 bps.",
        "digest": digest,
        "keys": keys,
        "cases": cases,
    })
}

#[test]
#[ignore = "regenerates consensus/vectors; run on purpose and review the diff"]
fn write_bls_vectors() {
    for (name, value) in
        [("bls.json", generate_bls()), ("bls_gas_committees.json", generate_bench())]
    {
        fs::write(dir().join(name), serde_json::to_string_pretty(&value).unwrap() + "\n").unwrap();
    }
}

// ----------------------------------------------------------------- checking

/// The binding of a bls.json key (or negative case): `popBinding` + its `operator`.
fn pop_binding(file: &Value, v: &Value) -> resolvd_consensus::PossessionBinding {
    resolvd_consensus::PossessionBinding {
        chain_id: file["popBinding"]["chainId"].as_u64().unwrap(),
        registry: file["popBinding"]["registry"].as_str().unwrap().parse().unwrap(),
        operator: v["operator"].as_str().unwrap().parse().unwrap(),
    }
}

fn consume_bls(file: &Value) -> usize {
    let d: VerdictDomain = serde_json::from_value(file["domain"].clone()).unwrap();
    assert_eq!(file["sigDst"].as_str().unwrap().as_bytes(), resolvd_consensus::SIGNATURE_DST);
    assert_eq!(file["popDst"].as_str().unwrap().as_bytes(), resolvd_consensus::POP_DST);
    let mut used = 0;

    let keys: Vec<PublicKey> = file["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            let pk = PublicKey::from_eip2537(&bytes_of(k, "publicKeyG1")).unwrap();
            assert_eq!(PublicKey::from_compressed(&bytes_of(k, "publicKey")).unwrap(), pk);
            pk.verify_possession(
                &Signature::from_eip2537(&bytes_of(k, "proofOfPossession")).unwrap(),
            )
            .unwrap();
            pk.verify_possession_for(
                &Signature::from_eip2537(&bytes_of(k, "boundProofOfPossession")).unwrap(),
                &pop_binding(file, k),
            )
            .unwrap();
            used += 1;
            pk
        })
        .collect();

    for v in file["signatures"].as_array().unwrap() {
        let sig = Signature::from_eip2537(&bytes_of(v, "signature")).unwrap();
        assert_eq!(Signature::from_compressed(&bytes_of(v, "signatureCompressed")).unwrap(), sig);
        let digest: B256 = v["digest"].as_str().unwrap().parse().unwrap();
        sig.verify(&keys[v["key"].as_u64().unwrap() as usize], &digest).unwrap();
        used += 1;
    }

    for v in file["aggregates"].as_array().unwrap() {
        let signers = u32s(&v["signers"]);
        let key = PublicKey::aggregate(signers.iter().map(|&i| &keys[i as usize])).unwrap();
        assert_eq!(key.to_eip2537().to_vec(), bytes_of(v, "aggregateKey"));
        let digest: B256 = v["digest"].as_str().unwrap().parse().unwrap();
        Signature::from_eip2537(&bytes_of(v, "signature")).unwrap().verify(&key, &digest).unwrap();
        used += 1;
    }

    let certs = file["certificates"].as_array().unwrap();
    let cert_committee = |v: &Value| {
        let stakes: Vec<u64> =
            v["stakes"].as_array().unwrap().iter().map(|s| s.as_u64().unwrap()).collect();
        let n = v["committeeSize"].as_u64().unwrap() as usize;
        committee(n, &stakes, v["thresholdBps"].as_u64().unwrap() as u16)
    };
    for v in certs {
        let c = cert_committee(v);
        let cm: VerdictCommitment = serde_json::from_value(v["commitment"].clone()).unwrap();
        assert_eq!(cm.eip712_digest(&d).to_string(), v["digest"].as_str().unwrap());
        let qc = QuorumCertificate {
            commitment: cm,
            epoch: c.epoch(),
            non_signers: u32s(&v["nonSigners"]),
            signature: Signature::from_eip2537(&bytes_of(v, "signature")).unwrap(),
        };
        assert_eq!(qc.verify(&c, &d).unwrap(), U256::from(v["signedStake"].as_u64().unwrap()));
        used += 1;
    }

    for v in file["equivocations"].as_array().unwrap() {
        let stakes = [10u64, 20, 30, 40, 50, 60, 70, 80];
        let c = committee(
            v["committeeSize"].as_u64().unwrap() as usize,
            &stakes,
            DEFAULT_THRESHOLD_BPS,
        );
        let side = |s: &Value| Attestation {
            commitment: serde_json::from_value(s["commitment"].clone()).unwrap(),
            epoch: 1,
            signers: u32s(&s["signers"]),
            signature: Signature::from_eip2537(&bytes_of(s, "signature")).unwrap(),
        };
        let committees = BTreeMap::from([(1u64, c.clone())]);
        let ev = ConflictEvidence::verify(side(&v["first"]), side(&v["second"]), &committees, &d)
            .unwrap();
        let got: Vec<u32> = ev.equivocators.iter().map(|k| c.index_of(k).unwrap()).collect();
        assert_eq!(got, u32s(&v["equivocators"]));
        used += 1;
    }

    for v in file["negative"].as_array().unwrap() {
        let name = v["name"].as_str().unwrap();
        let want = v["error"].as_str().unwrap();
        let got: Error = match v["check"].as_str().unwrap() {
            "signature" => {
                let run = || -> Result<(), Error> {
                    let pk = PublicKey::from_eip2537(&bytes_of(v, "publicKey"))?;
                    let sig = Signature::from_eip2537(&bytes_of(v, "signature"))?;
                    sig.verify(&pk, &v["digest"].as_str().unwrap().parse().unwrap())
                };
                run().expect_err(name)
            }
            "proofOfPossession" => {
                let pk = PublicKey::from_eip2537(&bytes_of(v, "publicKey")).unwrap();
                let pop = Signature::from_eip2537(&bytes_of(v, "signature")).unwrap();
                pk.verify_possession(&pop).expect_err(name)
            }
            "boundProofOfPossession" => {
                let pk = PublicKey::from_eip2537(&bytes_of(v, "publicKey")).unwrap();
                let pop = Signature::from_eip2537(&bytes_of(v, "signature")).unwrap();
                pk.verify_possession_for(&pop, &pop_binding(file, v)).expect_err(name)
            }
            "certificate" => {
                let base = &certs[v["certificate"].as_u64().unwrap() as usize];
                let c = cert_committee(base);
                let qc = QuorumCertificate {
                    commitment: serde_json::from_value(base["commitment"].clone()).unwrap(),
                    epoch: c.epoch(),
                    non_signers: u32s(&v["nonSigners"]),
                    signature: Signature::from_eip2537(&bytes_of(base, "signature")).unwrap(),
                };
                qc.verify(&c, &d).expect_err(name)
            }
            other => panic!("{name}: unknown check {other}"),
        };
        assert_eq!(got.code(), want, "{name}");
        used += 1;
    }
    used
}

fn consume_rfc(file: &Value) -> usize {
    // With secret key 1, a signature IS hash_to_curve(msg): sk * H(m) = H(m).
    let mut one = [0u8; 32];
    one[31] = 1;
    let sk = SecretKey::from_bytes(&one).unwrap();
    let dst = file["dst"].as_str().unwrap().as_bytes();
    let vectors = file["vectors"].as_array().unwrap();
    for v in vectors {
        let msg = v["msg"].as_str().unwrap().as_bytes();
        let p = sk.sign_with_dst(msg, dst).to_eip2537();
        let coord = |k: &str, i: usize| hex::decode(v["P"][k][i].as_str().unwrap()).unwrap();
        assert_eq!(&p[16..64], coord("x", 0).as_slice(), "x.c0 of {:?}", v["msg"]);
        assert_eq!(&p[80..128], coord("x", 1).as_slice());
        assert_eq!(&p[144..192], coord("y", 0).as_slice());
        assert_eq!(&p[208..256], coord("y", 1).as_slice());
    }
    vectors.len()
}

fn consume_gas(file: &Value) -> usize {
    let keys: Vec<PublicKey> = file["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| PublicKey::from_eip2537(&hex::decode(k.as_str().unwrap()).unwrap()).unwrap())
        .collect();
    let digest: B256 = file["digest"].as_str().unwrap().parse().unwrap();
    let cases = file["cases"].as_array().unwrap();
    for v in cases {
        let n = v["n"].as_u64().unwrap() as usize;
        let members = keys[..n]
            .iter()
            .enumerate()
            .map(|(i, k)| Member {
                index: i as u32,
                operator: Address::ZERO,
                key: *k,
                stake: U256::from(1),
            })
            .collect();
        let c = Committee::new(1, members, DEFAULT_THRESHOLD_BPS).unwrap();
        let signers = c.complement(&u32s(&v["nonSigners"])).unwrap();
        let key = PublicKey::aggregate(signers.iter().map(|&i| &keys[i as usize])).unwrap();
        assert!(c.meets_threshold(U256::from(signers.len())));
        Signature::from_eip2537(&bytes_of(v, "signature")).unwrap().verify(&key, &digest).unwrap();
    }
    cases.len()
}

fn count(file: &Value) -> usize {
    let sections = [
        "keys",
        "resolvers",
        "signatures",
        "aggregates",
        "certificates",
        "equivocations",
        "negative",
        "vectors",
        "cases",
        "slashCases",
        "deals",
    ];
    // Key lists of gas files are inputs to their cases, not vectors of their own.
    let is_key_list = |k: &&str| *k == "keys" || *k == "resolvers";
    sections
        .iter()
        .filter(|k| !is_key_list(k) || file.get("cases").is_none())
        .map(|k| file.get(*k).and_then(Value::as_array).map_or(0, Vec::len))
        .sum()
}

#[test]
fn bls_vectors() {
    type Handler = fn(&Value) -> usize;
    let handlers: &[(&str, Handler)] = &[
        ("bls.json", consume_bls),
        ("bls_gas_committees.json", consume_gas),
        ("rfc9380_hash_to_g2.json", consume_rfc),
        ("escrow.json", crate::escrow::consume_escrow),
        ("escrow_gas.json", crate::escrow::consume_escrow_gas),
    ];
    let mut files: Vec<String> = fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json"))
        .collect();
    files.sort();
    let expected: Vec<String> = handlers.iter().map(|(n, _)| n.to_string()).collect();
    let mut sorted = expected.clone();
    sorted.sort();
    assert_eq!(files, sorted, "vector files and their consumers differ");
    for (name, handler) in handlers {
        let file: Value =
            serde_json::from_str(&fs::read_to_string(dir().join(name)).unwrap()).unwrap();
        let total = count(&file);
        assert!(total > 0, "{name} is empty");
        assert_eq!(handler(&file), total, "{name}: not every vector consumed");
    }
}
