//! Slashing-protection interchange (EIP-3076 style): a resolver that signed
//! is exported, imported into a fresh data dir, and the node started there
//! refuses to sign a different commitment for that deal, then re-sends the
//! very signature it made before. Imports are idempotent, and one conflicting
//! record refuses the whole document, changing nothing.

use crate::network::{launch, metric, RELEASED, SETTLE};
use resolvd_devnet::DealKind;
use resolvd_node::config::{Byzantine, FaultConfig};
use std::{path::Path, process::Command, time::Duration};

fn resolvd(args: &[&str], config: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_resolvd"))
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protection_moves_to_a_new_data_dir_and_still_refuses_a_different_commitment() {
    let mut net = launch(|_| {}).await;
    // Two of four stay down: the dispute cannot settle while node 3 moves.
    net.0.nodes[1].stop();
    net.0.nodes[2].stop();
    let content = net.0.deal_content(DealKind::Honest).await.unwrap();
    let open = net.0.open_dispute(&content, &[0, 3]).await.unwrap();
    let path = format!("/disputes/{}", open.deal_id);
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let signed = loop {
        let v = net.0.nodes[3].get(&path).await.unwrap_or_default();
        if let Some(s) = v["own_signature"].as_str() {
            break (s.to_owned(), v["digest"].as_str().unwrap().to_owned());
        }
        assert!(std::time::Instant::now() < deadline, "node 3 never signed: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };

    // Export from the old machine.
    net.0.nodes[3].stop();
    let config = net.0.nodes[3].config_path();
    let file = net.0.nodes[3].dir.join("protection.json");
    let out = resolvd(&["protection", "export", "--out", file.to_str().unwrap()], &config);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(doc["metadata"]["interchange_format_version"], "1");
    assert_eq!(doc["metadata"]["chain_id"], "31337");
    let records = doc["data"][0]["signed_verdicts"].as_array().unwrap().clone();
    let ours: Vec<_> =
        records.iter().filter(|r| r["deal_id"] == serde_json::json!(open.deal_id)).collect();
    assert_eq!(ours.len(), 1, "{doc}");
    assert_eq!(ours[0]["commitment_digest"], signed.1.as_str());

    // A fresh data dir on the "new machine" (only the p2p key moves along).
    let old_dir = net.0.nodes[3].config.data_dir.clone();
    let new_dir = net.0.nodes[3].dir.join("data-new");
    std::fs::create_dir_all(&new_dir).unwrap();
    std::fs::copy(old_dir.join("p2p.key"), new_dir.join("p2p.key")).unwrap();
    net.0.nodes[3].config.data_dir = new_dir.clone();
    std::fs::write(&config, toml::to_string(&net.0.nodes[3].config).unwrap()).unwrap();
    let import = |f: &Path| resolvd(&["protection", "import", f.to_str().unwrap()], &config);
    let first = import(&file);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(summary["imported"], records.len(), "{summary}");
    let again: serde_json::Value = serde_json::from_slice(&import(&file).stdout).unwrap();
    assert_eq!(again["imported"], 0, "idempotent: {again}");
    assert_eq!(again["unchanged"], records.len());

    // One conflicting record: the whole document is refused, nothing changes.
    let mut conflicting = doc.clone();
    let list = conflicting["data"][0]["signed_verdicts"].as_array_mut().unwrap();
    list.push(serde_json::json!({
        "domain_separator": ours[0]["domain_separator"],
        "deal_id": ours[0]["deal_id"],
        "commitment_digest": format!("0x{}", "11".repeat(32)),
    }));
    list.push(serde_json::json!({
        "domain_separator": format!("0x{}", "22".repeat(32)),
        "deal_id": format!("0x{}", "33".repeat(32)),
        "commitment_digest": format!("0x{}", "44".repeat(32)),
    }));
    let bad = net.0.nodes[3].dir.join("conflicting.json");
    std::fs::write(&bad, serde_json::to_vec(&conflicting).unwrap()).unwrap();
    let refused = import(&bad);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("conflict"), "{stderr}");
    let after = net.0.nodes[3].dir.join("after.json");
    let out = resolvd(&["protection", "export", "--out", after.to_str().unwrap()], &config);
    assert!(out.status.success());
    let after: serde_json::Value = serde_json::from_slice(&std::fs::read(&after).unwrap()).unwrap();
    assert_eq!(after["data"][0]["signed_verdicts"].as_array().unwrap().len(), records.len());

    // The node on the new data dir, made to sign the opposite outcome: refused.
    net.0.nodes[3].config.fault =
        FaultConfig { byzantine: Some(Byzantine::Flip), ..Default::default() };
    net.0.start_node(3).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let refusals = match net.0.nodes[3].metrics().await {
            Ok(text) => metric(&text, "resolvd_protection_refusals_total", ""),
            Err(_) => 0.0,
        };
        if refusals >= 1.0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the flipped commitment was not refused");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The status snapshot trails the live metrics by up to 250 ms.
    let v = loop {
        if let Ok(v) = net.0.nodes[3].get(&path).await {
            break v;
        }
        assert!(std::time::Instant::now() < deadline, "node 3 does not show the dispute");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(v["own_signature"].is_null(), "signed a different commitment: {v}");
    let seen = net.0.nodes[0].get(&path).await.unwrap();
    assert_eq!(
        seen["signers"].as_object().unwrap().len(),
        1,
        "a second digest was gossiped: {seen}"
    );

    // Honest again: the same commitment is signed (allowed), the same bytes.
    // Node 1 comes back only once node 3 has signed: node 0 already holds
    // node 3's first partial, so with node 1 up the deal could settle before
    // node 3 has caught up with the chain (it would then show the dispute
    // late, or as settled without signing).
    net.0.nodes[3].stop();
    net.0.nodes[3].config.fault = FaultConfig::default();
    net.0.start_node(3).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let v = loop {
        let v = net.0.nodes[3].get(&path).await.unwrap_or_default();
        if !v["own_signature"].is_null() {
            break v;
        }
        assert!(std::time::Instant::now() < deadline, "honest node 3 never signed again: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(v["own_signature"].as_str(), Some(signed.0.as_str()), "{v}");
    net.0.start_node(1).unwrap();
    let deal = net.0.wait_settled(open.deal_id, SETTLE).await.unwrap();
    assert_eq!(deal.settlement, RELEASED);
}
