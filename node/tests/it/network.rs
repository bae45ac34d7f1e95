//! The daemon end to end: real anvil, the contracts compiled by the pinned
//! solc, N `resolvd run` child processes with RocksDB in temp dirs and libp2p
//! on 127.0.0.1. Each test launches its own devnet.

use alloy_primitives::{B256, U256};
use resolvd_devnet::{DealKind, Devnet, DevnetOptions, AMOUNT, SELLER_BOND};
use resolvd_proto::{Canonical, ContentType};
use std::{
    path::{Path, PathBuf},
    time::Duration,
};

pub(crate) const SETTLE: Duration = Duration::from_secs(120);

/// Released / Refunded, as the escrow codes `Settlement`.
pub(crate) const RELEASED: u8 = 1;
pub(crate) const REFUNDED: u8 = 2;

pub(crate) fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// A devnet that prints every node's log tail if the test fails.
pub(crate) struct Net(pub Devnet);

impl Drop for Net {
    #[allow(clippy::disallowed_macros)] // a failing test's diagnostics
    fn drop(&mut self) {
        if std::thread::panicking() {
            for n in &self.0.nodes {
                eprintln!("===== node {} ({}) =====", n.index, n.log_path().display());
                eprintln!("{}", n.log_tail(60));
            }
        } else {
            self.0.shutdown();
            let _ = std::fs::remove_dir_all(&self.0.dir);
        }
    }
}

pub(crate) async fn launch(tweak: impl FnOnce(&mut DevnetOptions)) -> Net {
    let mut options = DevnetOptions::for_workspace(
        &workspace(),
        PathBuf::from(env!("CARGO_BIN_EXE_resolvd")),
        std::env::temp_dir().join("resolvd-it"),
    );
    tweak(&mut options);
    Net(Devnet::launch(options).await.expect("devnet launch"))
}

/// Sum of a counter with `label` over every node's `/metrics`.
pub(crate) async fn metric_sum(net: &Devnet, name: &str, label: &str) -> f64 {
    let mut total = 0.0;
    for n in &net.nodes {
        let Ok(text) = n.metrics().await else { continue };
        total += metric(&text, name, label);
    }
    total
}

/// A sample of `name` whose labels contain `label` in OpenMetrics text.
pub(crate) fn metric(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Scenarios 1, 2 and 7: an honest delivery is Reproduced and pays the
/// seller through exactly one `resolve`; a false claim is Failed and refunds
/// the buyer; the witness, held by one node only, reaches the others by hash;
/// content under a wrong hash is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn honest_and_false_claims_settle_with_content_fetched_from_peers() {
    let mut net = launch(|_| {}).await;
    let (buyer, seller) = (net.0.accounts[1], net.0.accounts[2]);
    let honest = net.0.deal_content(DealKind::Honest).await.unwrap();

    // Hash before store: bytes offered under another hash are refused.
    let witness = honest.witness.to_canonical_bytes();
    let status = net.0.nodes[1]
        .put_content("evm-witness", B256::repeat_byte(1), witness.clone())
        .await
        .unwrap();
    assert_eq!(status, 400);

    let (buyer0, seller0) =
        (net.0.balance(buyer).await.unwrap(), net.0.balance(seller).await.unwrap());
    let open = net.0.open_dispute(&honest, &[0]).await.unwrap();
    let deal = net.0.wait_settled(open.deal_id, SETTLE).await.unwrap();
    assert_eq!(deal.settlement, RELEASED);
    // Reproduced: the seller was right and was made to wait: it gets the
    // buyer's challenge bond; the buyer paid the resolver fee too.
    let (fee, bond) = (net.0.options.resolver_fee, net.0.options.challenge_bond);
    assert!(fee > 0 && bond > 0, "the devnet's deals carry a fee and a challenge bond");
    assert_eq!(net.0.balance(seller).await.unwrap(), seller0 + U256::from(AMOUNT + bond));
    assert_eq!(net.0.balance(buyer).await.unwrap(), buyer0 - U256::from(AMOUNT + fee + bond));
    assert_eq!(net.0.verdict_logs(open.deal_id).await.unwrap().len(), 1);

    // Everyone replayed to the same digest; the witness came from node 0.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let mut digests = Vec::new();
    for n in &net.0.nodes {
        let d = n.get(&format!("/disputes/{}", open.deal_id)).await.unwrap();
        assert_eq!(d["phase"], "settled", "node {}: {d}", n.index);
        assert_eq!(d["certified_outcome"], "REPRODUCED", "node {}: {d}", n.index);
        digests.push(d["digest"].clone());
        let got =
            reqwest::get(format!("http://{}/content/{}", n.api, honest.witness.content_hash()))
                .await
                .unwrap();
        assert!(got.status().is_success(), "node {} lacks the witness", n.index);
    }
    assert!(digests.iter().all(|d| *d == digests[0] && !d.is_null()), "{digests:?}");
    for n in &net.0.nodes[1..] {
        let fetched =
            metric(&n.metrics().await.unwrap(), "resolvd_content_fetches_total", "result=\"ok\"");
        assert!(fetched >= 1.0, "node {} fetched nothing from peers", n.index);
    }
    // Exactly one resolve sent; everyone else found it resolved.
    assert_eq!(metric_sum(&net.0, "resolvd_submissions_total", "result=\"sent\"").await, 1.0);

    // A false claim: Failed, the buyer is refunded and the seller's DA bond returned.
    let false_claim = net.0.deal_content(DealKind::FalseClaim).await.unwrap();
    let (buyer1, seller1) =
        (net.0.balance(buyer).await.unwrap(), net.0.balance(seller).await.unwrap());
    let open = net.0.open_dispute(&false_claim, &[0, 1, 2, 3]).await.unwrap();
    let deal = net.0.wait_settled(open.deal_id, SETTLE).await.unwrap();
    assert_eq!(deal.settlement, REFUNDED);
    // Failed: the loser pays. The buyer gets the amount and its challenge
    // bond back, and its resolver fee from the seller's dispute deposit;
    // the seller gets its DA bond back but not the deposit.
    assert_eq!(net.0.balance(buyer).await.unwrap(), buyer1);
    assert_eq!(net.0.balance(seller).await.unwrap(), seller1 - U256::from(fee));
    let d = net.0.nodes[2].get(&format!("/disputes/{}", open.deal_id)).await.unwrap();
    assert_eq!(d["commitment"]["outcome"], "FAILED", "{d}");
    let _ = SELLER_BOND;

    cli_tools_agree_with_the_network(&net.0, &honest, open.deal_id).await;
}

pub(crate) fn resolvd(args: &[&str]) -> serde_json::Value {
    let out =
        std::process::Command::new(env!("CARGO_BIN_EXE_resolvd")).args(args).output().unwrap();
    assert!(out.status.success(), "resolvd {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

/// The one-shot commands against the same network: `verify` (keyless),
/// `status`, `content get`, `anchor` and `witness` (which rebuild the
/// seller's documents byte for byte), and `register` (a fifth resolver joins).
async fn cli_tools_agree_with_the_network(
    net: &Devnet,
    content: &resolvd_devnet::DealContent,
    false_deal: B256,
) {
    let rpc = net.rpc_url.as_str();
    let escrow = net.deployment.escrow.to_string();
    let api = format!("http://{}", net.nodes[0].api);
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();

    let v = resolvd(&[
        "verify",
        &false_deal.to_string(),
        "--rpc-url",
        rpc,
        "--escrow",
        &escrow,
        "--api",
        &api,
    ]);
    assert_eq!(v["match"], true, "{v}");
    assert_eq!(v["anchor"]["status"], "final", "{v}");
    assert_eq!(v["onChain"]["outcome"], "FAILED");

    let s = resolvd(&["status", "--api", &api]);
    assert_eq!(s["peers"].as_array().unwrap().len(), 3, "{s}");

    let witness_hash = content.witness.content_hash().to_string();
    resolvd(&["content", "get", &witness_hash, "--api", &api, "--out", &path("w.got")]);
    assert_eq!(std::fs::read(path("w.got")).unwrap(), content.witness.to_canonical_bytes());

    let block = content.evm_anchor.block_number.to_string();
    let a = resolvd(&["anchor", "--rpc-url", rpc, "--block", &block, "--out", &path("anchor.bin")]);
    assert_eq!(a["prestateAnchorHash"], content.anchor.content_hash().to_string());
    assert_eq!(std::fs::read(path("anchor.bin")).unwrap(), content.anchor.to_canonical_bytes());
    // A block beyond `finalized` is refused unless asked for explicitly.
    let ahead = (content.evm_anchor.block_number + 1_000).to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_resolvd"))
        .args(["anchor", "--rpc-url", rpc, "--block", &ahead, "--out", &path("ahead.bin")])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not final"), "{out:?}");
    std::fs::write(path("plan.bin"), &content.delivery.execution_plan).unwrap();
    let token = net.deployment.token;
    let slot = |who| format!("{token}:{}", resolvd_devnet::balance_slot(who));
    let w = resolvd(&[
        "witness",
        "--rpc-url",
        rpc,
        "--anchor",
        &path("anchor.bin"),
        "--plan",
        &path("plan.bin"),
        "--slot",
        &slot(net.accounts[3]),
        "--slot",
        &slot(resolvd_devnet::RECIPIENT),
        "--out",
        &path("witness.bin"),
    ]);
    assert_eq!(w["witnessHash"], witness_hash, "{w}");

    // A fifth operator registers through the CLI.
    use alloy_provider::Provider;
    std::fs::write(path("pw"), "correct horse").unwrap();
    resolvd(&[
        "keys",
        "new",
        "--keystore",
        &path("bls.json"),
        "--password-file",
        &path("pw"),
        "--kdf",
        "pbkdf2",
    ]);
    let mut rng = rand::rngs::OsRng;
    let account = alloy_signer_local::PrivateKeySigner::random_with(&mut rng);
    alloy_signer_local::PrivateKeySigner::encrypt_keystore(
        dir.path(),
        &mut rng,
        account.to_bytes(),
        "correct horse",
        Some("account.json"),
    )
    .unwrap();
    let _: () = net
        .provider
        .raw_request(
            "anvil_setBalance".into(),
            (account.address(), U256::from(10u64).pow(U256::from(20u64))),
        )
        .await
        .unwrap();
    resolvd_devnet::send_from(
        &net.provider,
        net.accounts[0],
        alloy_primitives::TxKind::Call(token),
        alloy_sol_types::SolCall::abi_encode(&resolvd_node::contracts::IERC20::mintCall {
            to: account.address(),
            amount: U256::from(resolvd_devnet::BOND),
        })
        .into(),
    )
    .await
    .unwrap();
    let r = resolvd(&[
        "register",
        "--rpc-url",
        rpc,
        "--escrow",
        &escrow,
        "--account-keystore",
        &path("account.json"),
        "--account-password-file",
        &path("pw"),
        "--keystore",
        &path("bls.json"),
        "--password-file",
        &path("pw"),
    ]);
    assert_eq!(r["resolver"], 4, "{r}");
    // It joins a committee only after the warm-up, through `activate`.
    let epoch =
        resolvd_devnet::activate(&net.provider, net.accounts[0], net.deployment.registry, &[4])
            .await
            .unwrap();
    let chain =
        resolvd_node::chain::Chain::connect(rpc, net.deployment.escrow, None).await.unwrap();
    let committee = chain.committee(epoch, None).await.unwrap();
    assert_eq!(committee.len(), 5);
    assert_eq!(committee.members()[4].operator, account.address());
}

/// Scenarios 3 and 4. Node 2 is down and node 3 crashes right after
/// persisting its signature, before gossiping it: two of four signatures are
/// not a quorum. Restarted, node 3 re-sends the persisted signature (the
/// same bytes; it signs nothing new) and the dispute settles with three of
/// four. Node 2 then restarts, catches up from its cursor and signs nothing
/// for the settled deal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashed_and_lagging_nodes_never_sign_anything_different() {
    use resolvd_consensus::protection::ProtectionKey;
    use resolvd_node::config::FaultConfig;

    let mut net = launch(|o| {
        o.faults = vec![(3, FaultConfig { crash_after_persist: true, ..Default::default() })];
    })
    .await;
    let content = net.0.deal_content(DealKind::Honest).await.unwrap();
    net.0.nodes[2].kill();
    let open = net.0.open_dispute(&content, &[0, 1, 3]).await.unwrap();

    // Node 3 aborts after persisting.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = net.0.nodes[3].exited() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "node 3 did not crash");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(!status.success());
    let domain = resolvd_proto::VerdictDomain {
        name: "resolvd".into(),
        version: "1".into(),
        chain_id: 31337,
        verifying_contract: net.0.deployment.escrow,
    };
    let key =
        ProtectionKey { domain_separator: domain.eip712().separator(), deal_id: open.deal_id };
    let persisted = {
        let store = net.0.node_store(3).unwrap();
        let recorded = store.protection_record(&key).unwrap().expect("protection record persisted");
        // Partials of nodes 0 and 1 may have arrived before node 3 signed.
        let own: Vec<_> = store
            .partials(&open.deal_id)
            .unwrap()
            .into_iter()
            .filter(|p| p.signer_index == 3)
            .collect();
        assert_eq!(own.len(), 1, "{own:?}");
        assert_eq!(own[0].commitment.eip712_digest(&domain), recorded);
        own[0].clone()
    };
    // Two of four cannot settle.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(net.0.deal(open.deal_id).await.unwrap().state, 3, "settled without a quorum?");

    net.0.nodes[3].config.fault = FaultConfig::default();
    net.0.start_node(3).unwrap();
    let deal = net.0.wait_settled(open.deal_id, SETTLE).await.unwrap();
    assert_eq!(deal.settlement, RELEASED);
    // The restarted node's partial can complete the certificate before its
    // API snapshot (refreshed every 250 ms) first shows the restored dispute.
    let path = format!("/disputes/{}", open.deal_id);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let view = loop {
        match net.0.nodes[3].get(&path).await {
            Ok(view) => break view,
            Err(e) if std::time::Instant::now() >= deadline => panic!("node 3: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    assert_eq!(
        view["own_signature"].as_str().unwrap(),
        alloy_primitives::hex::encode_prefixed(persisted.signature)
    );
    let signed_again =
        metric(&net.0.nodes[3].metrics().await.unwrap(), "resolvd_signatures_total", "");
    assert_eq!(signed_again, 0.0, "the restarted node signed again");
    // Node 0 builds the certificate too; its API snapshot may show it a
    // refresh later than the chain shows the settlement.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let v0 = loop {
        let v0 = net.0.nodes[0].get(&path).await.unwrap();
        if !v0["certificate_non_signers"].is_null() || std::time::Instant::now() >= deadline {
            break v0;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(v0["certificate_non_signers"], serde_json::json!([2]), "{v0}");

    // Node 2 catches up: sees the dispute, finds it settled, signs nothing.
    net.0.start_node(2).unwrap();
    net.0.nodes[2].wait_healthy(Duration::from_secs(30)).await.unwrap();
    let settled_block = net.0.verdict_logs(open.deal_id).await.unwrap()[0].block_number.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let s = net.0.nodes[2].get("/status").await.unwrap();
        if s["cursor"].as_u64().unwrap() >= settled_block
            && s["disputes"][open.deal_id.to_string()]["phase"] == "settled"
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "node 2 did not catch up: {s}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    net.0.nodes[2].stop();
    let store = net.0.node_store(2).unwrap();
    assert_eq!(store.protection_record(&key).unwrap(), None);
    assert!(store.partials(&open.deal_id).unwrap().iter().all(|p| p.signer_index != 2));
}

/// A hostile libp2p peer: it dials the given nodes, publishes garbage, an
/// oversized message, a wrongly signed partial and a malformed certificate,
/// and answers every content request with bytes that do not hash to the
/// request. Runs until the returned sender is dropped.
async fn hostile(
    targets: Vec<String>,
    epoch: u64,
) -> (libp2p::PeerId, tokio::sync::oneshot::Sender<()>) {
    use futures::StreamExt;
    use libp2p::{gossipsub, request_response, swarm::SwarmEvent};
    use resolvd_node::p2p::{build_swarm, BehaviourEvent, P2pConfig, Topic, TopicExt};
    use resolvd_proto::wire::{ContentResponse, SignedVerdict, WireMessage};

    // Large enough to try sending an oversized message.
    let config =
        P2pConfig { max_message: 1 << 20, ..crate::p2p::loopback(2, Duration::from_millis(200)) };
    let mut swarm = build_swarm(libp2p::identity::Keypair::generate_ed25519(), &config).unwrap();
    let id = *swarm.local_peer_id();
    for t in &targets {
        swarm.dial(t.parse::<libp2p::Multiaddr>().unwrap()).unwrap();
    }
    let forged = {
        // A valid G2 point, but not resolver 0's signature, in the current epoch.
        let key = resolvd_consensus::SecretKey::from_seed(&[0x66; 32]).unwrap();
        SignedVerdict { epoch, ..crate::p2p::verdict(key.sign(&B256::repeat_byte(1)).compress()) }
    };
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let start = tokio::time::Instant::now();
        let mut sent = false;
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        loop {
            tokio::select! {
                _ = &mut stopped => return,
                _ = tick.tick() => {
                    if !sent && start.elapsed() > Duration::from_secs(3) {
                        sent = true;
                        let g = &mut swarm.behaviour_mut().gossipsub;
                        // The forged partial first (validated while the peer's
                        // score is still clean; after one rejection it is
                        // graylisted), the oversized message last (the receiver
                        // drops the stream it arrives on).
                        let _ = g.publish(Topic::Verdicts.ident(), forged.encode_wire());
                        let _ = g.publish(Topic::Certificates.ident(), vec![1, 2, 3]);
                        let _ = g.publish(Topic::Verdicts.ident(), vec![0xff; 100]);
                        let _ = g.publish(Topic::Disputes.ident(), vec![0u8; 100 * 1024]);
                    }
                }
                event = swarm.select_next_some() => match event {
                    SwarmEvent::Behaviour(BehaviourEvent::Content(request_response::Event::Message {
                        message: request_response::Message::Request { request, channel, .. }, ..
                    })) => {
                        let lie = ContentResponse { hash: request.hash, result: Ok(vec![0x42; 64].into()) };
                        let _ = swarm.behaviour_mut().content.send_response(channel, lie);
                    }
                    SwarmEvent::Behaviour(BehaviourEvent::Gossipsub(gossipsub::Event::Message { message_id, propagation_source, .. })) => {
                        let _ = swarm.behaviour_mut().gossipsub.report_message_validation_result(
                            &message_id, &propagation_source, gossipsub::MessageAcceptance::Ignore);
                    }
                    _ => {}
                }
            }
        }
    });
    (id, stop)
}

/// Scenarios 5 and 6. Node 3 is byzantine: it signs both outcomes of every
/// dispute. A hostile peer sends garbage, an oversized message, a wrongly
/// signed partial and a malformed certificate, and serves content with wrong
/// hashes. The honest flow settles correctly; the equivocator's bond is
/// slashed on chain exactly once; no honest resolver is slashed; the hostile
/// peer is penalised and banned; no node crashes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byzantine_resolver_is_slashed_once_and_hostile_peer_is_penalised() {
    use alloy_provider::Provider;
    use alloy_sol_types::SolEvent;
    use resolvd_node::{
        chain::Chain,
        config::{Byzantine, FaultConfig},
        contracts::IRegistry,
    };

    let mut net = launch(|o| {
        o.faults =
            vec![(3, FaultConfig { byzantine: Some(Byzantine::Equivocate), ..Default::default() })];
    })
    .await;
    // Once node 0 has read it (its mesh can form first): a partial of an
    // epoch without a committee would be rejected and graylist the hostile
    // peer before its garbage arrives.
    let epoch = net.0.nodes[0].epoch(Duration::from_secs(30)).await.unwrap();
    let (hostile_id, stop) =
        hostile(vec![net.0.nodes[0].p2p.clone(), net.0.nodes[1].p2p.clone()], epoch).await;
    tokio::time::sleep(Duration::from_secs(5)).await;

    let content = net.0.deal_content(DealKind::Honest).await.unwrap();
    // Node 1 has to fetch the witness (and meets the lying peer).
    let open = net.0.open_dispute(&content, &[0, 2, 3]).await.unwrap();
    let deal = net.0.wait_settled(open.deal_id, SETTLE).await.unwrap();
    assert_eq!(deal.settlement, RELEASED, "the honest outcome must win");

    // The equivocator is slashed exactly once, nobody else ever.
    let chain = Chain::connect(&net.0.rpc_url, net.0.deployment.escrow, None).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !chain.is_slashed(3).await.unwrap() {
        assert!(std::time::Instant::now() < deadline, "the equivocator was not slashed");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    tokio::time::sleep(Duration::from_secs(6)).await;
    for honest in 0..3 {
        assert!(!chain.is_slashed(honest).await.unwrap(), "honest resolver {honest} slashed");
    }
    let slashed = net
        .0
        .provider
        .get_logs(
            &alloy_rpc_types_eth::Filter::new()
                .address(net.0.deployment.registry)
                .event_signature(IRegistry::Slashed::SIGNATURE_HASH)
                .from_block(0u64),
        )
        .await
        .unwrap();
    assert_eq!(slashed.len(), 1, "exactly one slashing");
    assert_eq!(slashed[0].topics()[1], B256::with_last_byte(3));
    assert_eq!(metric_sum(&net.0, "resolvd_slashings_total", "result=\"sent\"").await, 1.0);
    let detected = metric_sum(&net.0, "resolvd_equivocations_total", "").await;
    assert!(detected >= 1.0);
    // The evidence file a node wrote is checked by `resolvd slash` and refused
    // on chain now that the equivocator is slashed.
    let node = &net.0.nodes[0];
    let evidence = std::fs::read_dir(node.config.data_dir.join("evidence"))
        .unwrap()
        .next()
        .expect("evidence file")
        .unwrap()
        .path();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_resolvd"))
        .args([
            "slash",
            "--rpc-url",
            &net.0.rpc_url,
            "--escrow",
            &net.0.deployment.escrow.to_string(),
        ])
        .arg("--account-keystore")
        .arg(node.config.chain.account_keystore.as_ref().unwrap())
        .arg("--account-password-file")
        .arg(node.config.chain.account_password_file.as_ref().unwrap())
        .arg("--evidence")
        .arg(&evidence)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("already slashed"), "{stderr}");

    // The hostile peer: its invalid messages were rejected and it was banned
    // by the node it lied to about content.
    let m0 = net.0.nodes[0].metrics().await.unwrap();
    assert!(metric(&m0, "resolvd_gossip_messages_total", "result=\"reject\"") >= 1.0, "{m0}");
    // (The forged partial names a deal nobody disputes: it is held unverified
    // and dropped, never paired — the engine's Rig covers invalid signatures.)
    let log0 = std::fs::read_to_string(net.0.nodes[0].log_path()).unwrap();
    assert!(log0.contains("rejecting malformed gossip"));
    let m1 = net.0.nodes[1].metrics().await.unwrap();
    assert!(metric(&m1, "resolvd_content_fetches_total", "result=\"wrong_hash\"") >= 1.0, "{m1}");
    let s1 = net.0.nodes[1].get("/status").await.unwrap();
    assert!(s1["banned"].as_array().unwrap().iter().any(|p| p == &hostile_id.to_string()), "{s1}");
    let s0 = net.0.nodes[0].get("/status").await.unwrap();
    let score = s0["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == hostile_id.to_string())
        .and_then(|p| p["score"].as_f64());
    assert!(score.is_some_and(|s| s < 0.0), "hostile peer score {score:?}: {s0}");
    for n in &mut net.0.nodes {
        assert!(n.running(), "node {} died", n.index);
        let log = std::fs::read_to_string(n.log_path()).unwrap();
        assert!(!log.contains("panicked"), "node {} panicked", n.index);
    }
    drop(stop);
}
