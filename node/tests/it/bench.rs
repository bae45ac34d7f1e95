//! Dispute latency and node memory on a loopback devnet — a benchmark, not a
//! timed test: it asserts only that every dispute settled correctly, and
//! prints (and writes to `$RESOLVD_BENCH_OUT`, default
//! `target/node-latency.json`) the measured figures.
//!
//! Run: `make bench-node` (release build; `RESOLVD_BENCH_DISPUTES`, default 50;
//! `RESOLVD_BENCH_NODES`, default 4).

use crate::network::{launch, Net, RELEASED};
use alloy_primitives::B256;
use resolvd_consensus::{
    CertificateBuilder, Committee, Member, QuorumCertificate, SecretKey, DEFAULT_THRESHOLD_BPS,
};
use resolvd_devnet::{DealContent, DealKind};
use resolvd_proto::{wire::SignedVerdict, Canonical, ContentType, ReexecRequestV1};
use resolvd_replay::EvmBackend;
use std::time::{Duration, Instant};

/// The EIP-712 domain a devnet's escrow signs under.
pub(crate) fn devnet_domain(net: &resolvd_devnet::Devnet) -> resolvd_proto::VerdictDomain {
    resolvd_proto::VerdictDomain {
        name: "resolvd".into(),
        version: "1".into(),
        chain_id: 31337,
        verifying_contract: net.deployment.escrow,
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// One node's share of a dispute's work, timed in one process (medians, ms).
pub(crate) struct Floor {
    /// Replay + own signature + batch verification and aggregation of the
    /// `n` partials: a node's critical path when every partial is flooded.
    pub(crate) path_ms: f64,
    /// Replay + own signature + one check of a certificate of `n` signers:
    /// the least a member does per dispute (the aggregation goals' floor).
    pub(crate) goal_ms: f64,
}

/// A node's share of a dispute's work for a committee of `n`, in one process.
pub(crate) fn floors(
    content: &DealContent,
    n: usize,
    domain: &resolvd_proto::VerdictDomain,
) -> Floor {
    let keys: Vec<SecretKey> =
        (0..n).map(|i| SecretKey::from_seed(&[i as u8 + 1; 32]).unwrap()).collect();
    let members = keys
        .iter()
        .enumerate()
        .map(|(i, k)| Member {
            index: i as u32,
            operator: alloy_primitives::Address::with_last_byte(i as u8),
            key: k.public_key(),
            stake: alloy_primitives::U256::from(1u64),
        })
        .collect();
    let committee = Committee::new(1, members, DEFAULT_THRESHOLD_BPS).unwrap();
    let request = ReexecRequestV1 {
        deal_id: B256::repeat_byte(0x42),
        spec: content.spec.to_canonical_bytes().into(),
        spec_hash: content.spec.content_hash(),
        delivery: content.delivery.to_canonical_bytes().into(),
        delivery_hash: content.delivery.content_hash(),
        prestate_anchor: content.anchor.to_canonical_bytes().into(),
        prestate_anchor_hash: content.anchor.content_hash(),
        witness: Some(content.witness.to_canonical_bytes().into()),
    };
    // Per node, one replay, one signature, then the n partials checked in a
    // batch and aggregated; the other n - 1 signatures are made elsewhere,
    // in parallel, so they are made here outside the timed part.
    let (mut paths, mut goals) = (Vec::new(), Vec::new());
    for _ in 0..30 {
        let start = Instant::now();
        let commitment = EvmBackend.verdict(&request).unwrap().commitment();
        let digest = commitment.eip712_digest(domain);
        let own = keys[0].sign(&digest).compress();
        let own_work = start.elapsed();
        let partials: Vec<SignedVerdict> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| SignedVerdict {
                commitment,
                epoch: 1,
                signer_index: i as u32,
                signature: if i == 0 { own } else { k.sign(&digest).compress() },
            })
            .collect();
        let start = Instant::now();
        let mut builder = CertificateBuilder::new(committee.clone(), domain.clone());
        for p in &partials {
            builder.on_partial(p).unwrap();
        }
        let events = builder.process(&[7; 32]);
        let path = own_work + start.elapsed();
        let wire = events
            .iter()
            .find_map(|e| match e {
                resolvd_consensus::BuilderEvent::Certificate(qc) => Some(qc.to_wire()),
                _ => None,
            })
            .expect("a certificate of every partial");
        // A member's check of a certificate it receives: decode, then one
        // pairing against the signers' aggregate key.
        let start = Instant::now();
        QuorumCertificate::from_wire(&wire).unwrap().verify(&committee, domain).unwrap();
        goals.push((own_work + start.elapsed()).as_secs_f64() * 1e3);
        paths.push(path.as_secs_f64() * 1e3);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Floor { path_ms: median(paths), goal_ms: median(goals) }
}

/// Latencies (ms, sorted) of a run of disputes, and the per-node RSS peak.
struct Measured {
    to_cert: Vec<f64>,
    to_settle: Vec<f64>,
    node_cert: Vec<f64>,
    peak_rss: Vec<u64>,
}

/// Opens `disputes` honest disputes one after the other and times each.
async fn measure(
    net: &mut Net,
    content: &DealContent,
    witness_to: &[usize],
    disputes: usize,
    mut peak_rss: Vec<u64>,
) -> Measured {
    let (mut to_cert, mut to_settle, mut node_cert) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..disputes {
        let open = net.0.open_dispute(content, witness_to).await.unwrap();
        let path = format!("/disputes/{}", open.deal_id);
        let mut cert_at = None;
        let deadline = Instant::now() + Duration::from_secs(120);
        // Certificate: the first poll of node 0's view that shows one (the
        // view is refreshed every 100 ms); settlement: the mined `Settled` log.
        let deal = loop {
            if cert_at.is_none() {
                if let Ok(v) = net.0.nodes[0].get(&path).await {
                    if let Some(ms) = v["certificate_ms"].as_f64() {
                        cert_at = Some(open.challenged.elapsed());
                        node_cert.push(ms);
                    }
                }
            }
            if let Ok(deal) = net.0.wait_settled(open.deal_id, Duration::ZERO).await {
                break deal;
            }
            assert!(Instant::now() < deadline, "dispute {} did not settle", open.deal_id);
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        assert_eq!(deal.settlement, RELEASED);
        to_settle.push(open.challenged.elapsed().as_secs_f64() * 1e3);
        if let Some(c) = cert_at {
            to_cert.push(c.as_secs_f64() * 1e3);
        }
        for (i, n) in net.0.nodes.iter().enumerate() {
            peak_rss[i] = peak_rss[i].max(n.rss_kib().unwrap_or(0));
        }
    }
    for v in [&mut to_cert, &mut to_settle, &mut node_cert] {
        v.sort_by(f64::total_cmp);
    }
    Measured { to_cert, to_settle, node_cert, peak_rss }
}

fn p50_p99(sorted: &[f64]) -> serde_json::Value {
    if sorted.is_empty() {
        return serde_json::Value::Null;
    }
    serde_json::json!({ "p50": percentile(sorted, 0.5), "p99": percentile(sorted, 0.99) })
}

fn write_report(report: &serde_json::Value, default_name: &str) {
    let out = std::env::var("RESOLVD_BENCH_OUT")
        .unwrap_or_else(|_| format!("{}/../target/{default_name}", env!("CARGO_MANIFEST_DIR")));
    if let Some(dir) = std::path::Path::new(&out).parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::write(&out, serde_json::to_string_pretty(report).unwrap()).unwrap();
    tracing::info!("{report}");
    #[allow(clippy::disallowed_macros)]
    {
        println!("{}", serde_json::to_string_pretty(report).unwrap());
    }
}

/// The latency commit-reveal adds: the same 4-node devnet (same process,
/// same chain) runs `RESOLVD_BENCH_DISPUTES` (default 20) disputes without
/// it, then the registry owner sets `commitRevealMs` (`RESOLVD_BENCH_WINDOW_MS`,
/// default 2000), every node restarts to read it, and the same disputes run
/// again. Writes `$RESOLVD_BENCH_OUT` (default `target/commit-reveal.json`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run with `make bench-report`"]
async fn commit_reveal_latency_cost() {
    use resolvd_node::contracts::IRegistry;
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let disputes = env("RESOLVD_BENCH_DISPUTES", 20) as usize;
    let window = env("RESOLVD_BENCH_WINDOW_MS", 2_000) as u32;
    let mut net: Net = launch(|o| o.commit_reveal_ms = 0).await;
    let content = net.0.deal_content(DealKind::Honest).await.unwrap();
    let rss = vec![0; net.0.nodes.len()];
    let off = measure(&mut net, &content, &[0, 1], disputes, rss.clone()).await;
    let call = IRegistry::setCommitRevealMsCall { commitPhaseMs: window };
    let deployer = net.0.accounts[0];
    resolvd_devnet::send_from(
        &net.0.provider,
        deployer,
        alloy_primitives::TxKind::Call(net.0.deployment.registry),
        alloy_sol_types::SolCall::abi_encode(&call).into(),
    )
    .await
    .unwrap();
    for i in 0..net.0.nodes.len() {
        net.0.nodes[i].stop();
        net.0.start_node(i).unwrap();
    }
    for n in &mut net.0.nodes {
        n.wait_healthy(Duration::from_secs(60)).await.unwrap();
    }
    net.0.wait_mesh(Duration::from_secs(60)).await.unwrap();
    let on = measure(&mut net, &content, &[0, 1], disputes, rss).await;
    let status = net.0.nodes[0].get("/status").await.unwrap();
    let held = status["disputes"]
        .as_object()
        .unwrap()
        .values()
        .filter(|d| !d["commit_reveal"].is_null())
        .count();
    assert!(held > 0, "the second run did not use commit-reveal");
    let report = serde_json::json!({
        "nodes": net.0.nodes.len(),
        "disputes": disputes,
        "windowMs": window,
        "build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "off": {
            "nodeSeenToCertificateMs": p50_p99(&off.node_cert),
            "challengeToCertificateMs": p50_p99(&off.to_cert),
            "challengeToSettlementMs": p50_p99(&off.to_settle),
        },
        "on": {
            "nodeSeenToCertificateMs": p50_p99(&on.node_cert),
            "challengeToCertificateMs": p50_p99(&on.to_cert),
            "challengeToSettlementMs": p50_p99(&on.to_settle),
        },
    });
    write_report(&report, "commit-reveal.json");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run with `make bench-node`"]
async fn dispute_latency_and_memory() {
    let disputes: usize =
        std::env::var("RESOLVD_BENCH_DISPUTES").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    let nodes: usize =
        std::env::var("RESOLVD_BENCH_NODES").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
    let mut net: Net = launch(|o| o.nodes = nodes).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle_rss: Vec<u64> = net.0.nodes.iter().map(|n| n.rss_kib().unwrap_or(0)).collect();
    let content = net.0.deal_content(DealKind::Honest).await.unwrap();
    let domain = devnet_domain(&net.0);
    let floor = floors(&content, nodes, &domain);

    let mut witness_to = vec![0];
    witness_to.extend(1..nodes.min(2));
    let Measured { to_cert, to_settle, node_cert, peak_rss } =
        measure(&mut net, &content, &witness_to, disputes, idle_rss.clone()).await;
    assert!(!node_cert.is_empty(), "no certificate was observed");
    let report = serde_json::json!({
        "nodes": nodes,
        "disputes": disputes,
        "blockTimeSeconds": net.0.options.block_time,
        "confirmations": net.0.options.confirmations,
        "floorMs": floor.path_ms,
        "goalFloorMs": floor.goal_ms,
        "challengeToCertificateMs": { "p50": percentile(&to_cert, 0.5), "p99": percentile(&to_cert, 0.99) },
        "nodeSeenToCertificateMs": { "p50": percentile(&node_cert, 0.5), "p99": percentile(&node_cert, 0.99) },
        "challengeToSettlementMs": { "p50": percentile(&to_settle, 0.5), "p99": percentile(&to_settle, 0.99) },
        "rssIdleKiB": idle_rss,
        "rssPeakKiB": peak_rss,
    });
    write_report(&report, "node-latency.json");
}
