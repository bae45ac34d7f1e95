//! Vectors for the Escrow and ResolverRegistry forge tests
//! (`consensus/vectors/escrow.json`, `escrow_gas.json`).
//!
//! The forge tests deploy the Escrow and the token at fixed addresses, so the
//! deal ids (`keccak256(abi.encode(chainid, escrow, buyer, terms))`) and the
//! EIP-712 domain computed here are the ones the contracts compute.

use crate::vectors::secret;
use alloy_primitives::{address, hex, keccak256, Address, B256, U256};
use alloy_sol_types::SolValue;
use resolvd_consensus::{PossessionBinding, PublicKey, SecretKey, Signature};
use resolvd_proto::{ReexecVerdict, VerdictCommitment, VerdictDomain};
use serde_json::{json, Value};
use std::{fs, path::PathBuf};

alloy_sol_types::sol! {
    struct Terms {
        address seller;
        address token;
        uint256 amount;
        bytes32 specHash;
        bytes32 prestateAnchorHash;
        bytes32 prestateRoot;
        bytes32 backendId;
        bytes32 backendVersionHash;
        uint256 sellerBond;
        uint256 resolverFee;
        uint256 challengeBond;
        uint64 deliverWindow;
        uint64 challengeWindow;
        uint64 resolveWindow;
        bytes32 salt;
    }
}

pub(crate) const CHAIN_ID: u64 = 31337;
pub(crate) const ESCROW: Address = address!("0x00000000000000000000000000000000e5c40001");
pub(crate) const TOKEN: Address = address!("0x0000000000000000000000000000000070ce0001");
pub(crate) const BUYER: Address = address!("0x000000000000000000000000000000000b0b0001");
/// Where EscrowBase deploys the ResolverRegistry (PoPs are bound to it).
pub(crate) const REGISTRY: Address = address!("0x000000000000000000000000000000007e915701");
pub(crate) const SELLER: Address = address!("0x0000000000000000000000000000000005e11e01");
const ESCROW_RESOLVERS: usize = 8;
/// Resolvers 2..=5 sign both outcomes of every deal; 0, 1 only Reproduced; 6, 7 only Failed.
const SIGNS_REPRODUCED: std::ops::RangeInclusive<usize> = 0..=5;
const SIGNS_FAILED: std::ops::RangeInclusive<usize> = 2..=7;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("vectors")
}

pub(crate) fn escrow_domain() -> VerdictDomain {
    VerdictDomain {
        name: "resolvd".into(),
        version: "1".into(),
        chain_id: CHAIN_ID,
        verifying_contract: ESCROW,
    }
}

fn terms(salt: u64) -> Terms {
    Terms {
        seller: SELLER,
        token: TOKEN,
        amount: U256::from(100u64) * U256::from(10u64).pow(U256::from(18u64)),
        specHash: keccak256(format!("spec-{salt}")),
        prestateAnchorHash: keccak256(format!("anchor-{salt}")),
        prestateRoot: keccak256(format!("root-{salt}")),
        backendId: keccak256("backend"),
        backendVersionHash: keccak256("backend-version"),
        sellerBond: U256::from(10u64) * U256::from(10u64).pow(U256::from(18u64)),
        resolverFee: U256::ZERO,
        challengeBond: U256::ZERO,
        deliverWindow: 86_400,
        challengeWindow: 86_400,
        resolveWindow: 86_400,
        salt: B256::left_padding_from(&salt.to_be_bytes()),
    }
}

pub(crate) fn deal_id(buyer: Address, t: &Terms) -> B256 {
    keccak256((U256::from(CHAIN_ID), ESCROW, buyer, t.clone()).abi_encode_params())
}

fn delivery_hash(salt: u64) -> B256 {
    keccak256(format!("delivery-{salt}"))
}

fn commitment(salt: u64, outcome: ReexecVerdict) -> VerdictCommitment {
    let t = terms(salt);
    VerdictCommitment {
        deal_id: deal_id(BUYER, &t),
        spec_hash: t.specHash,
        delivery_hash: delivery_hash(salt),
        prestate_anchor_hash: t.prestateAnchorHash,
        prestate_root: t.prestateRoot,
        backend_id: t.backendId,
        backend_version_hash: t.backendVersionHash,
        outcome,
        result_hash: keccak256(format!("result-{salt}-{outcome:?}")),
        trace_hash: keccak256(format!("trace-{salt}-{outcome:?}")),
    }
}

fn h<T: AsRef<[u8]>>(b: T) -> String {
    hex::encode_prefixed(b)
}

fn terms_json(t: &Terms) -> Value {
    json!({
        "seller": t.seller, "token": t.token, "amount": t.amount.to_string(),
        "specHash": t.specHash, "prestateAnchorHash": t.prestateAnchorHash,
        "prestateRoot": t.prestateRoot, "backendId": t.backendId,
        "backendVersionHash": t.backendVersionHash, "sellerBond": t.sellerBond.to_string(),
        "resolverFee": t.resolverFee.to_string(), "challengeBond": t.challengeBond.to_string(),
        "deliverWindow": t.deliverWindow, "challengeWindow": t.challengeWindow,
        "resolveWindow": t.resolveWindow, "salt": t.salt,
    })
}

fn aggregate(secrets: &[SecretKey], signers: &[usize], digest: &B256) -> Signature {
    Signature::aggregate(&signers.iter().map(|&i| secrets[i].sign(digest)).collect::<Vec<_>>())
        .unwrap()
}

/// The operator EscrowBase registers resolver `i` from (`address(0x0e0000 + i)`).
pub(crate) fn operator(i: usize) -> Address {
    Address::left_padding_from(&(0x0e0000u64 + i as u64).to_be_bytes())
}

/// The binding of resolver `i`'s registration in the forge tests.
pub(crate) fn binding(i: usize) -> PossessionBinding {
    PossessionBinding { chain_id: CHAIN_ID, registry: REGISTRY, operator: operator(i) }
}

fn resolvers_json(secrets: &[SecretKey]) -> Vec<Value> {
    secrets
        .iter()
        .enumerate()
        .map(|(i, s)| {
            json!({
                "operator": operator(i),
                "publicKey": h(s.public_key().to_eip2537()),
                "proofOfPossession": h(s.prove_possession_for(&binding(i)).to_eip2537()),
            })
        })
        .collect()
}

fn generate_escrow() -> Value {
    let d = escrow_domain();
    let secrets: Vec<SecretKey> = (0..ESCROW_RESOLVERS).map(secret).collect();
    let deals: Vec<Value> = (1..=4u64)
        .map(|salt| {
            let t = terms(salt);
            let side = |outcome, signers: std::ops::RangeInclusive<usize>| {
                let c = commitment(salt, outcome);
                let digest = c.eip712_digest(&d);
                let signers: Vec<usize> = signers.collect();
                let non_signers: Vec<usize> =
                    (0..ESCROW_RESOLVERS).filter(|i| !signers.contains(i)).collect();
                json!({
                    "commitment": c,
                    "onchainOutcome": c.onchain_outcome(),
                    "digest": digest,
                    "partials": (0..ESCROW_RESOLVERS)
                        .map(|i| if signers.contains(&i) { h(secrets[i].sign(&digest).to_eip2537()) } else { String::new() })
                        .collect::<Vec<_>>(),
                    "quorum": { "signers": signers, "nonSigners": non_signers,
                                "signature": h(aggregate(&secrets, &signers, &digest).to_eip2537()) },
                    "all": { "signature": h(aggregate(&secrets, &(0..ESCROW_RESOLVERS).collect::<Vec<_>>(), &digest).to_eip2537()) },
                })
            };
            json!({
                "dealId": deal_id(BUYER, &t),
                "terms": terms_json(&t),
                "deliveryHash": delivery_hash(salt),
                "reproduced": side(ReexecVerdict::Reproduced, SIGNS_REPRODUCED),
                "failed": side(ReexecVerdict::Failed, SIGNS_FAILED),
            })
        })
        .collect();
    json!({
        "description": "Escrow/registry vectors: 8 resolvers (registry indices 0..7, equal bonds; proofs of possession bound to chain 31337, `registry` and the resolver's `operator`), 4 deals funded by `buyer`. Resolvers 0..5 signed Reproduced and 2..7 signed Failed for every deal, so 2..5 equivocate and 0, 1, 6, 7 are honest. `partials[i]` is resolver i's signature (empty if it did not sign that side); `quorum` aggregates the signers; `all` is a signature by all 8 (not a real protocol event: used to test certificates with no non-signers).",
        "chainId": CHAIN_ID,
        "escrow": ESCROW,
        "token": TOKEN,
        "registry": REGISTRY,
        "buyer": BUYER,
        "seller": SELLER,
        "domain": d,
        "domainSeparator": d.eip712().separator(),
        "honest": [0, 1, 6, 7],
        "resolvers": resolvers_json(&secrets),
        "deals": deals,
    })
}

/// Committee sizes of the `resolve` gas cases.
const GAS_SIZES: [usize; 7] = [4, 8, 16, 48, 64, 256, 300];
/// Equivocating coalition sizes of the `slashEquivocation` gas cases.
const SLASH_SIZES: [usize; 3] = [8, 48, 300];

fn side_json(c: &VerdictCommitment, signature: &Signature) -> Value {
    json!({
        "commitment": c,
        "onchainOutcome": c.onchain_outcome(),
        "signature": h(signature.to_eip2537()),
    })
}

fn generate_gas() -> Value {
    let d = escrow_domain();
    let n_max = GAS_SIZES.iter().chain(&SLASH_SIZES).copied().max().unwrap();
    let secrets: Vec<SecretKey> = (0..n_max).map(secret).collect();
    let cases: Vec<Value> = GAS_SIZES
        .iter()
        .flat_map(|&n| {
            let salt = 1000 + n as u64;
            let t = terms(salt);
            let c = commitment(salt, ReexecVerdict::Reproduced);
            let digest = c.eip712_digest(&d);
            let secrets = &secrets;
            let t2 = t.clone();
            [0usize, (n / 10).max(1)].into_iter().map(move |missing| {
                let non_signers: Vec<usize> = (0..missing).map(|k| k * n / missing).collect();
                let signers: Vec<usize> = (0..n).filter(|i| !non_signers.contains(i)).collect();
                json!({
                    "name": format!("n{n}-missing{missing}"),
                    "n": n,
                    "dealId": deal_id(BUYER, &t2),
                    "terms": terms_json(&t2),
                    "deliveryHash": delivery_hash(salt),
                    "commitment": c,
                    "onchainOutcome": c.onchain_outcome(),
                    "nonSigners": non_signers,
                    "signature": h(aggregate(secrets, &signers, &digest).to_eip2537()),
                })
            })
        })
        .collect();
    let slash_cases: Vec<Value> = SLASH_SIZES
        .iter()
        .map(|&n| {
            let salt = 2000 + n as u64;
            let all: Vec<usize> = (0..n).collect();
            let side = |outcome| {
                let c = commitment(salt, outcome);
                side_json(&c, &aggregate(&secrets, &all, &c.eip712_digest(&d)))
            };
            json!({
                "name": format!("slash-{n}"),
                "n": n,
                "reproduced": side(ReexecVerdict::Reproduced),
                "failed": side(ReexecVerdict::Failed),
            })
        })
        .collect();
    json!({
        "description": "Gas cases on the real Escrow + ResolverRegistry: `cases` are Escrow.resolve with a committee of the first n resolvers (equal bonds) and one Reproduced certificate with 0 and ~10 % non-signers; `slashCases` are slashEquivocation where all of the first n resolvers signed both outcomes of one deal (every signer of both aggregates is slashed).",
        "resolvers": resolvers_json(&secrets),
        "cases": cases,
        "slashCases": slash_cases,
    })
}

#[test]
#[ignore = "regenerates consensus/vectors/escrow*.json; run on purpose and review the diff"]
fn write_escrow_vectors() {
    for (name, value) in [("escrow.json", generate_escrow()), ("escrow_gas.json", generate_gas())] {
        fs::write(dir().join(name), serde_json::to_string_pretty(&value).unwrap() + "\n").unwrap();
    }
}

fn sig(v: &Value) -> Signature {
    Signature::from_eip2537(&hex::decode(v.as_str().unwrap()).unwrap()).unwrap()
}

fn key(i: usize, v: &Value) -> PublicKey {
    let pk =
        PublicKey::from_eip2537(&hex::decode(v["publicKey"].as_str().unwrap()).unwrap()).unwrap();
    assert_eq!(v["operator"].as_str().unwrap().parse::<Address>().unwrap(), operator(i));
    pk.verify_possession_for(&sig(&v["proofOfPossession"]), &binding(i)).unwrap();
    pk
}

fn keys(file: &Value) -> Vec<PublicKey> {
    file["resolvers"].as_array().unwrap().iter().enumerate().map(|(i, v)| key(i, v)).collect()
}

/// Checks escrow.json in Rust: deal ids, digests, every partial and aggregate.
pub(crate) fn consume_escrow(file: &Value) -> usize {
    let d: VerdictDomain = serde_json::from_value(file["domain"].clone()).unwrap();
    assert_eq!(file["domainSeparator"].as_str().unwrap(), d.eip712().separator().to_string());
    assert_eq!(file["registry"].as_str().unwrap().parse::<Address>().unwrap(), REGISTRY);
    let keys = keys(file);
    let deals = file["deals"].as_array().unwrap();
    for deal in deals {
        for side in ["reproduced", "failed"] {
            let s = &deal[side];
            let c: VerdictCommitment = serde_json::from_value(s["commitment"].clone()).unwrap();
            assert_eq!(c.deal_id.to_string(), deal["dealId"].as_str().unwrap());
            let digest = c.eip712_digest(&d);
            assert_eq!(digest.to_string(), s["digest"].as_str().unwrap());
            for (i, p) in s["partials"].as_array().unwrap().iter().enumerate() {
                if !p.as_str().unwrap().is_empty() {
                    sig(p).verify(&keys[i], &digest).unwrap();
                }
            }
            let signers: Vec<usize> = s["quorum"]["signers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as usize)
                .collect();
            let agg = PublicKey::aggregate(signers.iter().map(|&i| &keys[i])).unwrap();
            sig(&s["quorum"]["signature"]).verify(&agg, &digest).unwrap();
            let all = PublicKey::aggregate(&keys).unwrap();
            sig(&s["all"]["signature"]).verify(&all, &digest).unwrap();
        }
    }
    deals.len() + keys.len()
}

/// Checks escrow_gas.json in Rust.
pub(crate) fn consume_escrow_gas(file: &Value) -> usize {
    let d = escrow_domain();
    let keys = keys(file);
    let cases = file["cases"].as_array().unwrap();
    for v in cases {
        let n = v["n"].as_u64().unwrap() as usize;
        let c: VerdictCommitment = serde_json::from_value(v["commitment"].clone()).unwrap();
        assert_eq!(c.deal_id.to_string(), v["dealId"].as_str().unwrap());
        let non: Vec<usize> = v["nonSigners"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as usize)
            .collect();
        let agg =
            PublicKey::aggregate((0..n).filter(|i| !non.contains(i)).map(|i| &keys[i])).unwrap();
        sig(&v["signature"]).verify(&agg, &c.eip712_digest(&d)).unwrap();
    }
    let slash_cases = file["slashCases"].as_array().unwrap();
    for v in slash_cases {
        let n = v["n"].as_u64().unwrap() as usize;
        let agg = PublicKey::aggregate(&keys[..n]).unwrap();
        let mut deal = None;
        for side in ["reproduced", "failed"] {
            let c: VerdictCommitment =
                serde_json::from_value(v[side]["commitment"].clone()).unwrap();
            assert!(deal.replace(c.deal_id).is_none_or(|id| id == c.deal_id), "one deal");
            sig(&v[side]["signature"]).verify(&agg, &c.eip712_digest(&d)).unwrap();
        }
    }
    cases.len() + slash_cases.len()
}
