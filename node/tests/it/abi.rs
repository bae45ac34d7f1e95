//! The hand-written ABI the node mirrors (`resolvd_node::contracts`) against
//! the contracts as forge compiled them (`contracts/out`): every call the
//! node makes, every event and every error it decodes must exist, with the
//! same canonical signature (so the same selector or topic), in the deployed
//! contract. Functions the Escrow and the ResolverRegistry run from their
//! extension contracts (EscrowFees, RegistrySlashing) count as theirs:
//! callers reach them at the same address.

use std::collections::BTreeSet;
use std::path::PathBuf;

use resolvd_node::contracts::{IAttestor, IEscrow, IProofVerifier, IRegistry, IERC20};
use serde_json::Value;

fn artifact(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../contracts/out")
        .join(format!("{name}.sol/{name}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run `forge build` in contracts/)", path.display()));
    serde_json::from_str(&text).expect("artifact JSON")
}

/// The canonical type of an ABI parameter: tuples spelled out from their
/// components, array suffixes kept (`tuple[]` → `(…)[]`).
fn canonical(param: &Value) -> String {
    let ty = param["type"].as_str().expect("type");
    match ty.strip_prefix("tuple") {
        Some(suffix) => {
            let inner: Vec<String> =
                param["components"].as_array().expect("components").iter().map(canonical).collect();
            format!("({}){suffix}", inner.join(","))
        }
        None => ty.to_owned(),
    }
}

/// `name(types)` of every ABI item of `kind` in the named artifacts.
fn signatures(names: &[&str], kind: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for name in names {
        let abi = artifact(name);
        for item in abi["abi"].as_array().expect("abi") {
            if item["type"] != kind {
                continue;
            }
            let inputs: Vec<String> =
                item["inputs"].as_array().expect("inputs").iter().map(canonical).collect();
            out.insert(format!("{}({})", item["name"].as_str().expect("name"), inputs.join(",")));
        }
    }
    out
}

fn missing(mirror: &[&str], contract: &BTreeSet<String>) -> Vec<String> {
    mirror.iter().filter(|s| !contract.contains(**s)).map(|s| (*s).to_owned()).collect()
}

#[test]
fn the_escrow_mirror_matches_the_compiled_escrow() {
    let functions = signatures(&["Escrow", "EscrowFees"], "function");
    let events = signatures(&["Escrow"], "event");
    assert!(functions.len() > 20 && events.len() > 10, "artifacts read");
    let calls = missing(IEscrow::IEscrowCalls::SIGNATURES, &functions);
    assert!(calls.is_empty(), "calls the Escrow does not have: {calls:?}");
    let logs = missing(IEscrow::IEscrowEvents::SIGNATURES, &events);
    assert!(logs.is_empty(), "events the Escrow does not emit: {logs:?}");
    let errors = signatures(&["Escrow", "EscrowFees"], "error");
    let reverts = missing(IEscrow::IEscrowErrors::SIGNATURES, &errors);
    assert!(reverts.is_empty(), "errors the Escrow does not raise: {reverts:?}");
}

#[test]
fn the_registry_mirror_matches_the_compiled_registry() {
    let functions = signatures(&["ResolverRegistry", "RegistrySlashing"], "function");
    let events = signatures(&["ResolverRegistry"], "event");
    assert!(functions.len() > 20 && events.len() > 5, "artifacts read");
    let calls = missing(IRegistry::IRegistryCalls::SIGNATURES, &functions);
    assert!(calls.is_empty(), "calls the ResolverRegistry does not have: {calls:?}");
    let logs = missing(IRegistry::IRegistryEvents::SIGNATURES, &events);
    assert!(logs.is_empty(), "events the ResolverRegistry does not emit: {logs:?}");
    let errors = signatures(&["ResolverRegistry", "RegistrySlashing"], "error");
    let reverts = missing(IRegistry::IRegistryErrors::SIGNATURES, &errors);
    assert!(reverts.is_empty(), "errors the ResolverRegistry does not raise: {reverts:?}");
}

#[test]
fn the_token_mirror_matches_an_erc20() {
    let functions = signatures(&["TestToken"], "function");
    let calls = missing(IERC20::IERC20Calls::SIGNATURES, &functions);
    assert!(calls.is_empty(), "calls an ERC-20 does not have: {calls:?}");
}

#[test]
fn the_attestor_and_verifier_mirrors_match_the_compiled_contracts() {
    let functions = signatures(&["Attestor", "EscrowFees"], "function");
    let events = signatures(&["Attestor"], "event");
    let errors = signatures(&["Attestor", "EscrowFees"], "error");
    assert!(functions.len() > 20 && events.len() > 10, "artifacts read");
    // The node serves an Attestor as an escrow: the escrow surface it uses
    // (events, deal, resolve, fees), besides the Attestor's own.
    for (name, mirror, contract) in [
        ("calls", IAttestor::IAttestorCalls::SIGNATURES, &functions),
        ("events", IAttestor::IAttestorEvents::SIGNATURES, &events),
        ("errors", IAttestor::IAttestorErrors::SIGNATURES, &errors),
    ] {
        let gone = missing(mirror, contract);
        assert!(gone.is_empty(), "Attestor {name} the contract does not have: {gone:?}");
    }
    let gone = missing(IEscrow::IEscrowEvents::SIGNATURES, &events);
    assert!(gone.is_empty(), "escrow events the Attestor does not emit: {gone:?}");
    for call in ["deal(bytes32)", "domainSeparator()", "registry()", "timeoutRefund(bytes32)"] {
        assert!(functions.contains(call), "the Attestor has no {call}");
    }

    let functions = signatures(&["ResolvdProofVerifier"], "function");
    let errors = signatures(&["ResolvdProofVerifier"], "error");
    let gone = missing(IProofVerifier::IProofVerifierCalls::SIGNATURES, &functions);
    assert!(gone.is_empty(), "verifier calls the contract does not have: {gone:?}");
    let gone = missing(IProofVerifier::IProofVerifierErrors::SIGNATURES, &errors);
    assert!(gone.is_empty(), "verifier errors the contract does not have: {gone:?}");
}
