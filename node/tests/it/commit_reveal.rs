//! Commit-reveal under attack, with real node processes on anvil: a peer
//! with no stake forges commit-reveal commitments in every member's name for
//! every deal (the deal id is public before the challenge), on the 4-node
//! network of `economics` (0 and 1 honest, 2 honest but replaying 2 s late,
//! 3 `lazy`: it never replays and signs a copy of the first partial it
//! sees; threshold 3 of 4; `commitRevealMs` 5 s).
//!
//! Commitments are signed by the member's registered key and verified before
//! they count or are forwarded, so the forgeries are rejected (the forger
//! loses score), every honest reveal counts without the reveal phase's
//! fallback, and the copier stays out of every certificate and unpaid.

use crate::{
    economics::{certificate_of, network, LAZY},
    network::{metric_sum, Net, RELEASED, SETTLE},
};
use alloy_primitives::{B256, U256};
use resolvd_devnet::{free_port, DealKind};
use resolvd_node::config::{Byzantine, FaultConfig};
use std::{
    net::SocketAddr,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// The forger's process (killed on drop).
struct Forger(Child);

impl Drop for Forger {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A stakeless node (no BLS key, no account) with `byzantine =
/// forge_commits`, connected to every resolver.
async fn start_forger(net: &Net) -> Forger {
    let dir = net.0.nodes[0].dir.parent().unwrap().join("forger");
    std::fs::create_dir_all(&dir).unwrap();
    let mut c = net.0.nodes[0].config.clone();
    c.data_dir = dir.join("data");
    c.keys.bls_keystore = None;
    c.keys.password_file = None;
    c.chain.account_keystore = None;
    c.chain.account_password_file = None;
    c.p2p.listen = format!("/ip4/127.0.0.1/tcp/{}", free_port().unwrap());
    c.p2p.bootstrap = net.0.nodes.iter().map(|n| n.p2p.clone()).collect();
    let api = SocketAddr::from(([127, 0, 0, 1], free_port().unwrap()));
    c.api.listen = api;
    c.fault = FaultConfig { byzantine: Some(Byzantine::ForgeCommits), ..Default::default() };
    let config = dir.join("node.toml");
    std::fs::write(&config, toml::to_string(&c).unwrap()).unwrap();
    let log = std::fs::File::create(dir.join("node.log")).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_resolvd"))
        .args(["run", "--config"])
        .arg(&config)
        .env("RUST_LOG", "info")
        .stdout(Stdio::from(log.try_clone().unwrap()))
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap();
    let forger = Forger(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = reqwest::get(format!("http://{api}/status")).await;
        let peers = match status {
            Ok(r) => r.json::<serde_json::Value>().await.ok().and_then(|s| {
                s["peers"].as_array().map(Vec::len).or(s["peers"].as_u64().map(|n| n as usize))
            }),
            Err(_) => None,
        };
        if peers.is_some_and(|n| n >= net.0.nodes.len()) {
            break;
        }
        assert!(Instant::now() < deadline, "the forger did not connect: {}", dir.display());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    forger
}

/// Opens and settles one honest deal; its latency (challenge mined →
/// settlement seen) and the certificate's non-signers.
async fn settle(net: &mut Net) -> (Duration, Vec<u32>, B256) {
    let content = net.0.deal_content(DealKind::Honest).await.unwrap();
    let open = net.0.open_dispute(&content, &[0, 1, 2, 3]).await.unwrap();
    let started = Instant::now();
    let deal = net.0.wait_settled(open.deal_id, SETTLE).await.unwrap();
    let latency = started.elapsed();
    assert_eq!(deal.settlement, RELEASED);
    let (non_signers, _) = certificate_of(&net.0, open.deal_id).await;
    (latency, non_signers, open.deal_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stakeless_commitment_forger_neither_delays_settlement_nor_gets_the_copier_paid() {
    let mut net = network(5_000).await;
    let mut baseline = Duration::ZERO;
    let mut deals = Vec::new();
    for _ in 0..2 {
        let (latency, non_signers, deal) = settle(&mut net).await;
        assert_eq!(non_signers, vec![LAZY as u32]);
        baseline += latency;
        deals.push(deal);
    }
    let _forger = start_forger(&net).await;
    let mut attacked = Duration::ZERO;
    for _ in 0..2 {
        let (latency, non_signers, deal) = settle(&mut net).await;
        assert_eq!(non_signers, vec![LAZY as u32], "the copier is never certified");
        attacked += latency;
        deals.push(deal);
    }
    tracing::info!(?baseline, ?attacked, "settlement time of two deals, unattacked and attacked");
    // The forgeries reached the resolvers and were rejected there.
    let forger_log = std::fs::read_to_string(
        net.0.nodes[0].dir.parent().unwrap().join("forger").join("node.log"),
    )
    .unwrap();
    assert!(forger_log.contains("forging commitments for every member"), "{forger_log}");
    let rejected =
        metric_sum(&net.0, "resolvd_gossip_messages_total", "topic=\"commits\",result=\"reject\"")
            .await;
    assert!(rejected >= 1.0, "forged commitments rejected: {rejected}");
    let invalid =
        metric_sum(&net.0, "resolvd_commit_reveal_total", "result=\"invalid_commit\"").await;
    assert!(invalid >= 1.0, "forged commitments verified invalid: {invalid}");
    // Not delayed: a forgery taken for a member's commitment would have left
    // that member's reveal uncounted, and its deal waiting for the fallback
    // (`REVEAL_FALLBACK_WINDOWS` reveal windows) to certify the honest
    // members; every certificate left out only the copier, and none waited.
    // (The settlement times are logged above, not compared: under a loaded
    // machine they measure the scheduler.)
    for result in ["fallback", "late_fallback"] {
        let label = format!("result=\"{result}\"");
        let n = metric_sum(&net.0, "resolvd_commit_reveal_total", &label).await;
        assert_eq!(n, 0.0, "no deal needed the {result}");
    }
    // The copier was never paid; the honest resolvers were, once each held fee
    // (every certificate left the copier out) was split after its inclusion window.
    // The first call moves anvil's clock past every window; the nodes that
    // submitted may split the later ones before the test reaches them.
    for (k, deal) in deals.into_iter().enumerate() {
        let (held, _) = net.0.distribute_held(deal, Duration::from_secs(30)).await.unwrap();
        assert!(held || k > 0, "a certificate without the copier holds its fee");
    }
    let (lazy_pending, _) = net.0.fees_of(LAZY).await.unwrap();
    assert_eq!(lazy_pending, U256::ZERO, "the lazy resolver was not paid");
    for i in 0..3 {
        assert!(net.0.fees_of(i).await.unwrap().0 > U256::ZERO, "resolver {i} paid");
    }
}

/// A `resolvd signer` signs the commitment to a partial only together with
/// the partial it just signed (under protection), and the daemon's client
/// checks both against the key: the commitment signature verifies under the
/// commitment DST over the message that binds this deal, epoch and signer,
/// and never as a verdict signature.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_signer_signs_the_commitment_with_the_partial() {
    use resolvd_consensus::SecretKey;
    use resolvd_proto::{
        wire::{partial_commit, PartialCommit},
        ReexecVerdict, VerdictCommitment, VerdictDomain,
    };
    let dir = tempfile::tempdir().unwrap();
    let store =
        std::sync::Arc::new(resolvd_node::store::Store::open(&dir.path().join("db")).unwrap());
    let secret = SecretKey::from_seed(&[9; 32]).unwrap();
    let key = secret.public_key();
    let domain = VerdictDomain {
        name: "resolvd".into(),
        version: "1".into(),
        chain_id: 31337,
        verifying_contract: alloy_primitives::Address::repeat_byte(0xe5),
    };
    let url = format!("unix://{}", dir.path().join("signer.sock").display());
    let listener = resolvd_node::signer::SignerListener::bind(&url).await.unwrap();
    let token = zeroize::Zeroizing::new("a-long-enough-signer-token".to_owned());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(resolvd_node::signer::serve(
        listener,
        secret,
        store,
        token.clone(),
        vec![(domain.chain_id, domain.verifying_contract)],
        async move {
            let _ = stopped.await;
        },
    ));
    let remote = resolvd_node::signer::RemoteSigner::new(&url, token).unwrap();
    let commitment = VerdictCommitment {
        deal_id: alloy_primitives::B256::repeat_byte(1),
        spec_hash: alloy_primitives::B256::repeat_byte(2),
        delivery_hash: alloy_primitives::B256::repeat_byte(3),
        prestate_anchor_hash: alloy_primitives::B256::repeat_byte(4),
        prestate_root: alloy_primitives::B256::repeat_byte(5),
        backend_id: alloy_primitives::B256::repeat_byte(6),
        backend_version_hash: alloy_primitives::B256::repeat_byte(7),
        outcome: ReexecVerdict::Reproduced,
        result_hash: alloy_primitives::B256::repeat_byte(8),
        trace_hash: alloy_primitives::B256::repeat_byte(9),
    };
    let (sig, none) = remote.sign(&domain, &commitment, &key, None).await.unwrap();
    assert!(none.is_none(), "no commitment unless asked");
    let (again, commit) = remote.sign(&domain, &commitment, &key, Some((3, 1))).await.unwrap();
    assert_eq!(again, sig, "the same partial (deterministic)");
    let commit = commit.expect("a commitment signature");
    let message =
        PartialCommit::message(&commitment.deal_id, 3, 1, &partial_commit(3, 1, &sig.compress()));
    commit.verify_commit(&key, &message).unwrap();
    assert!(commit.verify(&key, &message).is_err(), "not a verdict signature");
    assert!(commit.verify(&key, &commitment.eip712_digest(&domain)).is_err());
    let _ = stop.send(());
    let _ = server.await;
}
