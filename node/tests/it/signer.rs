//! A separate signer (`resolvd signer`): a node without a local key settles
//! disputes through it; two daemons sharing it never obtain two different
//! signatures for one deal (the protection check lives in the signer); an
//! unauthenticated request, or one for a domain it does not serve, is refused.

use crate::network::{launch, RELEASED, SETTLE};
use resolvd_node::{
    config::{Byzantine, FaultConfig},
    devnet::{free_port, DealKind},
};
use std::{process::Command, time::Duration};

/// Kills (and reaps) a child process however the test ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_sign_through_a_separate_signer_that_holds_the_protection() {
    let mut net = launch(|_| {}).await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret-token\n").unwrap();
    let port = free_port().unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let keys = net.0.nodes[3].config.keys.clone();
    let escrow = net.0.deployment.escrow;
    let signer_log = dir.path().join("signer.log");
    let log = std::fs::File::create(&signer_log).unwrap();
    let _signer = Command::new(env!("CARGO_BIN_EXE_resolvd"))
        .args(["signer", "--keystore"])
        .arg(keys.bls_keystore.clone().unwrap())
        .arg("--password-file")
        .arg(keys.password_file.clone().unwrap())
        .arg("--data-dir")
        .arg(dir.path().join("signer"))
        .args(["--listen", &format!("127.0.0.1:{port}"), "--token-file"])
        .arg(&token)
        .args(["--domain", &format!("31337:{escrow}")])
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .map(Child)
        .unwrap();
    let http = reqwest::Client::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let r = http.get(format!("{url}/v1/public-key")).bearer_auth("s3cret-token").send().await;
        if r.is_ok_and(|r| r.status().is_success()) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "signer never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Refused: no token, a wrong token, a domain it does not serve.
    let none = http.get(format!("{url}/v1/public-key")).send().await.unwrap();
    assert_eq!(none.status(), 401);
    let wrong = http.get(format!("{url}/v1/public-key")).bearer_auth("guess").send().await.unwrap();
    assert_eq!(wrong.status(), 401);
    let commitment = serde_json::json!({
        "dealId": format!("0x{}", "11".repeat(32)), "specHash": format!("0x{}", "22".repeat(32)),
        "deliveryHash": format!("0x{}", "33".repeat(32)), "prestateAnchorHash": format!("0x{}", "44".repeat(32)),
        "prestateRoot": format!("0x{}", "55".repeat(32)), "backendId": format!("0x{}", "66".repeat(32)),
        "backendVersionHash": format!("0x{}", "77".repeat(32)), "outcome": "REPRODUCED",
        "resultHash": format!("0x{}", "88".repeat(32)), "traceHash": format!("0x{}", "99".repeat(32)),
    });
    let other_domain = serde_json::json!({
        "name": "resolvd", "version": "1", "chainId": 31337,
        "verifyingContract": format!("0x{}", "ab".repeat(20)),
    });
    let r = http
        .post(format!("{url}/v1/sign"))
        .bearer_auth("s3cret-token")
        .json(&serde_json::json!({ "domain": other_domain, "commitment": commitment }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "{}", r.text().await.unwrap());
    let unauth = http
        .post(format!("{url}/v1/sign"))
        .json(&serde_json::json!({ "domain": other_domain, "commitment": commitment }))
        .send()
        .await
        .unwrap();
    assert_eq!(unauth.status(), 401);

    // Node 3 without a local key, through the signer; node 2 down, so the
    // quorum needs node 3's signature.
    net.0.nodes[2].stop();
    net.0.nodes[3].stop();
    let c = &mut net.0.nodes[3].config;
    c.keys.bls_keystore = None;
    c.keys.password_file = None;
    c.keys.remote_signer = Some(url.clone());
    c.keys.remote_signer_token_file = Some(token.clone());
    net.0.start_node(3).unwrap();
    net.0.nodes[3].wait_healthy(Duration::from_secs(60)).await.unwrap();
    let content = net.0.deal_content(DealKind::Honest).await.unwrap();
    let first = net.0.open_dispute(&content, &[0, 1, 3]).await.unwrap();
    assert_eq!(net.0.wait_settled(first.deal_id, SETTLE).await.unwrap().settlement, RELEASED);
    let v = net.0.nodes[3].get(&format!("/disputes/{}", first.deal_id)).await.unwrap();
    assert!(v["own_signature"].is_string(), "node 3 did not sign through the signer: {v}");

    // A second daemon on the same signer, made to sign the opposite outcome.
    let mut twin = net.0.nodes[3].config.clone();
    twin.data_dir = dir.path().join("twin");
    twin.p2p.listen = format!("/ip4/127.0.0.1/tcp/{}", free_port().unwrap());
    twin.api.listen = format!("127.0.0.1:{}", free_port().unwrap()).parse().unwrap();
    twin.chain.account_keystore = None;
    twin.chain.account_password_file = None;
    twin.keys.doppelganger_wait_secs = 0;
    twin.fault = FaultConfig { byzantine: Some(Byzantine::Flip), ..Default::default() };
    let twin_config = dir.path().join("twin.toml");
    std::fs::write(&twin_config, toml::to_string(&twin).unwrap()).unwrap();
    let twin_log = dir.path().join("twin.log");
    let log = std::fs::File::create(&twin_log).unwrap();
    let _twin = Command::new(env!("CARGO_BIN_EXE_resolvd"))
        .args(["run", "--config"])
        .arg(&twin_config)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .map(Child)
        .unwrap();
    net.0.start_node(2).unwrap();
    net.0.nodes[2].wait_healthy(Duration::from_secs(60)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let content = net.0.deal_content(DealKind::Honest).await.unwrap();
    let second = net.0.open_dispute(&content, &[0, 1, 2, 3]).await.unwrap();
    assert_eq!(net.0.wait_settled(second.deal_id, SETTLE).await.unwrap().settlement, RELEASED);
    // Both daemons asked for deal 2; the signer signed one commitment only.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let log = std::fs::read_to_string(&signer_log).unwrap();
        let deal = second.deal_id.to_string();
        let signed = log.lines().filter(|l| l.contains(&deal) && l.contains("signed")).count();
        let refused = log.lines().filter(|l| l.contains(&deal) && l.contains("refused")).count();
        if signed >= 1 && refused >= 1 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "signed {signed}, refused {refused}:\n{log}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let seen = net.0.nodes[0].get(&format!("/disputes/{}", second.deal_id)).await.unwrap();
    let with_three = seen["signers"]
        .as_object()
        .unwrap()
        .values()
        .filter(|list| list.as_array().unwrap().contains(&serde_json::json!(3)))
        .count();
    assert!(with_three <= 1, "resolver 3 signed two commitments: {seen}");
}
