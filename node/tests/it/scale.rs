//! N = 16 nodes on separate network hosts: every `resolvd run` in its own
//! network namespace, anvil in another, over emulated WAN links (50 ms ± 10 ms
//! one way, 1 % loss, 100 Mbit/s on each node's egress; see
//! `resolvd_netns`). Skipped, with `SKIPPED: <why>` on stderr, where
//! namespaces cannot be created.

use crate::network::{launch, REFUNDED, RELEASED, SETTLE};
use resolvd_devnet::DealKind;
use resolvd_netns::{namespaces_of, Netns, NetnsError, NetnsOptions};
use std::{
    net::SocketAddr,
    time::{Duration, Instant},
};

/// The whole scenario (launch, three disputes, checks) ends within this.
const BOUND: Duration = Duration::from_secs(900);

/// Creates the topology, or `None` (after printing why) where it cannot be.
pub(crate) fn topology(options: NetnsOptions) -> Option<Netns> {
    match Netns::create(options) {
        Ok(t) => Some(t),
        Err(NetnsError::Unsupported(why)) => {
            #[allow(clippy::disallowed_macros)] // the skip must be visible
            {
                eprintln!("SKIPPED: {why}");
            }
            None
        }
        Err(e) => panic!("creating the network namespaces: {e}"),
    }
}

/// What a killed run leaves (a namespace named for a pid that cannot be
/// running, with a process inside) is removed by the sweep every
/// [`Netns::create`] starts with.
#[test]
fn the_sweep_removes_namespaces_and_processes_of_dead_runs() {
    // Above PID_MAX_LIMIT (2^22): never a live process.
    let name = "rsvd4194305-0-n0";
    let Some(probe) = topology(NetnsOptions::new(1)) else { return };
    drop(probe);
    let ip = |args: &[&str]| std::process::Command::new("ip").args(args).status().unwrap();
    assert!(ip(&["netns", "add", name]).success());
    let mut orphan = std::process::Command::new("ip")
        .args(["netns", "exec", name, "sleep", "600"])
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while resolvd_netns::pids_in(name).is_empty() {
        assert!(Instant::now() < deadline, "the orphan never entered {name}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let removed = resolvd_netns::sweep_dead_runs();
    assert!(removed.iter().any(|n| n == name), "{name} not swept: {removed:?}");
    assert!(namespaces_of(4_194_305).is_empty());
    let deadline = Instant::now() + Duration::from_secs(10);
    while orphan.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the process in {name} survived the sweep");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Two namespaces, lossless 100 ms links: a handshake takes both egress
/// delays; a partition stops it (and is counted); healing restores it.
#[test]
fn links_delay_and_partition_traffic_between_namespaces() {
    let mut options = NetnsOptions::new(2);
    options.node_link.delay = Duration::from_millis(100);
    options.node_link.jitter = Duration::ZERO;
    options.node_link.loss = 0.0;
    let Some(topology) = topology(options) else { return };
    let b = topology.layout().nodes[1].clone();
    let listener = "import socket, time\n\
        s = socket.socket(); s.bind((__import__('sys').argv[1], 7000)); s.listen(64)\n\
        while True: s.accept()[0].close()";
    let mut server =
        b.command("python3").args(["-c", listener]).arg(b.ip.to_string()).spawn().unwrap();
    let target = SocketAddr::from((b.ip, 7000));
    let deadline = Instant::now() + Duration::from_secs(10);
    let rtt = loop {
        match topology.tcp_rtt(0, target, 5) {
            Ok(rtt) => break rtt,
            Err(e) => assert!(Instant::now() < deadline, "no listener in {}: {e}", b.name),
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        rtt.iter().all(|d| *d >= Duration::from_millis(195)),
        "handshakes under 2 x 100 ms: {rtt:?}"
    );
    topology.partition(&[vec![0], vec![1]]).unwrap();
    assert!(topology.tcp_rtt(0, target, 1).is_err(), "connected across a partition");
    let cut: u64 = topology.stats().unwrap().devices.iter().map(|d| d.partitioned).sum();
    assert!(cut > 0, "the partition dropped nothing");
    topology.heal().unwrap();
    assert_eq!(topology.tcp_rtt(0, target, 1).unwrap().len(), 1);
    let _ = server.kill();
    let _ = server.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_namespaced_nodes_settle_disputes_over_wan_links() {
    let nodes = 16;
    // The devnet's progress (deployed, registered, up) on stderr: a run that
    // fails or times out shows how far it got.
    let _ = tracing_subscriber::fmt()
        .with_env_filter("devnet=info")
        .with_writer(std::io::stderr)
        .try_init();
    let Some(topology) = topology(NetnsOptions::new(nodes)) else { return };
    let prefix = topology.prefix().to_owned();
    assert_eq!(namespaces_of(std::process::id()).len(), nodes + 1, "one namespace per host");
    tokio::time::timeout(BOUND, scenario(&topology, nodes))
        .await
        .unwrap_or_else(|_| panic!("the scenario did not finish within {BOUND:?}"));
    drop(topology);
    let left = namespaces_of(std::process::id());
    assert!(left.is_empty(), "namespaces of {prefix} left behind: {left:?}");
}

#[allow(clippy::disallowed_macros)] // the measured figures, for the log
async fn scenario(topology: &Netns, nodes: usize) {
    let layout = topology.layout().clone();
    let started = Instant::now();
    let mut net = launch(|o| {
        o.nodes = nodes;
        o.netns = Some(layout.clone());
    })
    .await;
    eprintln!("{nodes} nodes up and meshed in {:?}", started.elapsed());
    for n in &net.0.nodes {
        assert_eq!(
            n.api.ip(),
            layout.nodes[n.index].ip,
            "node {} API not in its namespace",
            n.index
        );
    }

    // A handshake from node 0's namespace to node 1's p2p listener takes one
    // round trip: node 0's and node 1's egress delays, 50 ms each.
    let target = SocketAddr::from((layout.nodes[1].ip, 9400));
    let mut rtt =
        tokio::task::block_in_place(|| topology.tcp_rtt(0, target, 9)).expect("measuring the RTT");
    rtt.sort();
    let median = rtt[rtt.len() / 2];
    eprintln!("node0 -> node1 TCP handshake: median {median:?}, samples {rtt:?}");
    assert!(median >= Duration::from_millis(80), "links without latency: median RTT {median:?}");

    let before = topology.stats().expect("link counters");
    let honest = net.0.deal_content(DealKind::Honest).await.unwrap();
    let false_claim = net.0.deal_content(DealKind::FalseClaim).await.unwrap();
    let plan = [(&honest, RELEASED), (&false_claim, REFUNDED), (&honest, RELEASED)];
    let mut open = Vec::new();
    for (k, (content, _)) in plan.iter().enumerate() {
        // The witness goes to one node; the others fetch it over the WAN.
        open.push(net.0.open_dispute(content, &[k % nodes]).await.unwrap());
    }
    for (deal, (_, expected)) in open.iter().zip(plan) {
        let settled = net.0.wait_settled(deal.deal_id, SETTLE).await.unwrap();
        eprintln!("deal {}: challenge -> settled {:?}", deal.deal_id, deal.challenged.elapsed());
        assert_eq!(settled.settlement, expected, "deal {}", deal.deal_id);
        assert_eq!(net.0.verdict_logs(deal.deal_id).await.unwrap().len(), 1);
    }

    // Every node followed every dispute to the same settled outcome.
    let outcomes = ["REPRODUCED", "FAILED", "REPRODUCED"];
    let deadline = Instant::now() + Duration::from_secs(60);
    for n in &net.0.nodes {
        for (deal, outcome) in open.iter().zip(outcomes) {
            let v = settled_view(n, &format!("/disputes/{}", deal.deal_id), deadline).await;
            assert_eq!(v["certified_outcome"], outcome, "node {}: {v}", n.index);
        }
    }

    // The traffic went through the emulated links, and they lost packets.
    let after = topology.stats().expect("link counters");
    let lost: u64 = after.devices.iter().map(|d| d.lost).sum();
    assert!(lost > 0, "no packet was lost on 1 % loss links");
    for i in 0..nodes {
        let (a, b) = (&after.devices[i], &before.devices[i]);
        let sent = a.sent_bytes.node - b.sent_bytes.node;
        let recv = a.recv_bytes.node - b.recv_bytes.node;
        eprintln!("node {i}: p2p sent {sent} B, received {recv} B over {} disputes", open.len());
        assert!(sent > 0 && recv > 0, "node {i} exchanged nothing with peers");
        // TCP's share of it: headers of every segment, payload-less ones
        // (acknowledgements) whole; both counted among the bytes sent.
        let headers = a.sent_tcp_header_bytes - b.sent_tcp_header_bytes;
        let empty = a.sent_tcp_empty_bytes - b.sent_tcp_empty_bytes;
        assert!(
            0 < empty && empty <= headers && headers < sent,
            "node {i}: TCP headers {headers} B, of which payload-less segments {empty} B, of {sent} B sent"
        );
    }
    eprintln!("scenario done in {:?}", started.elapsed());
}

/// A node's CPU seconds (user + system) from `/proc/<pid>/stat`.
fn cpu_seconds(pid: u32, ticks_per_second: f64) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / ticks_per_second)
}

/// Clock ticks per second of `/proc/<pid>/stat` (`getconf CLK_TCK`, else 100).
fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok())
        .unwrap_or(100.0)
}

/// Gossip messages a node validated, by `topic/result`.
fn gossip_counts(metrics: &str) -> std::collections::BTreeMap<String, f64> {
    let mut out = std::collections::BTreeMap::new();
    for line in metrics.lines() {
        let label = |key: &str| {
            let start = line.find(&format!("{key}=\""))? + key.len() + 2;
            let end = start + line[start..].find('"')?;
            Some(line[start..end].to_owned())
        };
        // Direct messages count as `direct/<result>` (not as gossip).
        let topic = if line.starts_with("resolvd_gossip_messages_total{") {
            label("topic")
        } else if line.starts_with("resolvd_direct_messages_total{") {
            Some("direct".to_owned())
        } else {
            continue;
        };
        let (Some(topic), Some(result)) = (topic, label("result")) else { continue };
        let Some(value) = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) else {
            continue;
        };
        *out.entry(format!("{topic}/{result}")).or_default() += value;
    }
    out
}

/// A node's JSON-RPC calls by method (`resolvd_rpc_calls_total`).
fn rpc_calls(metrics: &str) -> std::collections::BTreeMap<String, f64> {
    let mut out = std::collections::BTreeMap::new();
    for line in metrics.lines().filter(|l| l.starts_with("resolvd_rpc_calls_total{method=\"")) {
        let rest = &line["resolvd_rpc_calls_total{method=\"".len()..];
        let (Some(end), Some(value)) =
            (rest.find('"'), line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        else {
            continue;
        };
        out.insert(rest[..end].to_owned(), value);
    }
    out
}

/// Partial signatures a node checked by pairing (`resolvd_partials_verified_total`).
fn partials_verified(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("resolvd_partials_verified_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// What every node had used up to one moment.
struct Snapshot {
    at: Instant,
    cpu: Vec<f64>,
    verified: Vec<f64>,
    gossip: Vec<std::collections::BTreeMap<String, f64>>,
    calls: Vec<std::collections::BTreeMap<String, f64>>,
    links: resolvd_netns::LinkStats,
}

impl Snapshot {
    async fn take(topology: &Netns, net: &resolvd_devnet::Devnet, ticks: f64) -> Self {
        let mut cpu = Vec::new();
        let mut gossip = Vec::new();
        let mut verified = Vec::new();
        let mut calls = Vec::new();
        for n in &net.nodes {
            cpu.push(n.pid().and_then(|p| cpu_seconds(p, ticks)).expect("node CPU time"));
            let metrics = n.metrics().await.expect("node metrics");
            gossip.push(gossip_counts(&metrics));
            verified.push(partials_verified(&metrics));
            calls.push(rpc_calls(&metrics));
        }
        let links = topology.stats().expect("link counters");
        Self { at: Instant::now(), cpu, verified, gossip, calls, links }
    }
}

/// Per-node figures between two snapshots, divided by `per`.
fn usage(a: &Snapshot, b: &Snapshot, nodes: usize, per: f64) -> serde_json::Value {
    let mut sent = Vec::new();
    let mut recv = Vec::new();
    let mut rpc = Vec::new();
    let (mut headers, mut empty, mut empty_packets) = (Vec::new(), Vec::new(), Vec::new());
    let mut cpu = Vec::new();
    let mut verdicts = Vec::new();
    let mut gossip_total = 0.0;
    let mut by_topic = std::collections::BTreeMap::<String, f64>::new();
    let mut by_method = std::collections::BTreeMap::<String, f64>::new();
    for i in 0..nodes {
        let (da, db) = (&a.links.devices[i], &b.links.devices[i]);
        sent.push((db.sent_bytes.node - da.sent_bytes.node) as f64 / per);
        recv.push((db.recv_bytes.node - da.recv_bytes.node) as f64 / per);
        headers.push((db.sent_tcp_header_bytes - da.sent_tcp_header_bytes) as f64 / per);
        empty.push((db.sent_tcp_empty_bytes - da.sent_tcp_empty_bytes) as f64 / per);
        empty_packets.push((db.sent_tcp_empty_packets - da.sent_tcp_empty_packets) as f64 / per);
        rpc.push(
            ((db.sent_bytes.anvil + db.recv_bytes.anvil)
                - (da.sent_bytes.anvil + da.recv_bytes.anvil)) as f64
                / per,
        );
        cpu.push((b.cpu[i] - a.cpu[i]) / per);
        for (k, v) in &b.gossip[i] {
            let d = v - a.gossip[i].get(k).copied().unwrap_or(0.0);
            if !k.starts_with("direct/") {
                gossip_total += d;
            }
            *by_topic.entry(k.clone()).or_default() += d / per;
        }
        verdicts.push((b.verified[i] - a.verified[i]) / per);
        for (k, v) in &b.calls[i] {
            let d = v - a.calls[i].get(k).copied().unwrap_or(0.0);
            *by_method.entry(k.clone()).or_default() += d / per / nodes.max(1) as f64;
        }
    }
    let stat = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        let mean = s.iter().sum::<f64>() / s.len().max(1) as f64;
        serde_json::json!({ "min": s.first(), "mean": mean, "max": s.last() })
    };
    let lost: u64 =
        b.links.devices.iter().zip(&a.links.devices).map(|(b, a)| b.lost - a.lost).sum();
    serde_json::json!({
        "p2pBytesSentPerNode": stat(&sent),
        "p2pBytesReceivedPerNode": stat(&recv),
        "p2pTcpHeaderBytesSentPerNode": stat(&headers),
        "p2pTcpEmptyBytesSentPerNode": stat(&empty),
        "p2pTcpEmptyPacketsSentPerNode": stat(&empty_packets),
        "rpcBytesPerNode": stat(&rpc),
        "rpcCallsPerNodeByMethod": by_method,
        "cpuSecondsPerNode": stat(&cpu),
        "gossipMessagesValidated": gossip_total / per,
        "gossipMessagesValidatedByTopic": by_topic,
        "partialsVerifiedPerNode": stat(&verdicts),
        "packetsLost": lost as f64 / per,
    })
}

/// Usage per second over `secs` of idling, and the window's measured length.
async fn idle_window(
    topology: &Netns,
    net: &resolvd_devnet::Devnet,
    nodes: usize,
    ticks: f64,
    secs: usize,
) -> (serde_json::Value, f64) {
    let a = Snapshot::take(topology, net, ticks).await;
    tokio::time::sleep(Duration::from_secs(secs as u64)).await;
    let b = Snapshot::take(topology, net, ticks).await;
    let secs = (b.at - a.at).as_secs_f64();
    (usage(&a, &b, nodes, secs), secs)
}

fn percentiles(v: &mut [f64]) -> serde_json::Value {
    v.sort_by(f64::total_cmp);
    let p = |q: f64| v.get(((v.len() as f64 - 1.0) * q).round() as usize).copied();
    serde_json::json!({ "p50": p(0.5), "p99": p(0.99), "max": v.last(), "samples": v.len() })
}

/// N nodes in namespaces over WAN links, a sequence of disputes: latency,
/// traffic, CPU, RSS and gossip per node and per dispute. Writes JSON to
/// `$RESOLVD_SCALE_OUT` (default `target/scale-<N>.json`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run with `make bench-scale`"]
#[allow(clippy::disallowed_macros)] // the report
async fn scale_bench() {
    let env = |k: &str, d: usize| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let nodes = env("RESOLVD_SCALE_NODES", 16);
    let disputes = env("RESOLVD_SCALE_DISPUTES", 10);
    // Long enough that the mesh churn right after launch does not dominate
    // the idle rate (10 s gave 3.1 and 4.2 ms/s per node in two N = 64 runs
    // whose idle code was the same).
    let idle_secs = env("RESOLVD_SCALE_IDLE_SECS", 30);
    // Generous: a debug build of 32+ nodes on 2 cores is CPU-bound.
    let settle = Duration::from_secs(env("RESOLVD_SCALE_SETTLE_SECS", 600) as u64);
    let options = NetnsOptions::new(nodes);
    let shape = options.node_link;
    let Some(topology) = topology(options) else { return };
    let ticks = clock_ticks();
    let layout = topology.layout().clone();
    let started = Instant::now();
    let mut net = launch(|o| {
        o.nodes = nodes;
        o.netns = Some(layout.clone());
    })
    .await;
    let launch_secs = started.elapsed().as_secs_f64();
    let target = SocketAddr::from((layout.nodes[1 % nodes].ip, 9400));
    let mut rtt: Vec<f64> = tokio::task::block_in_place(|| topology.tcp_rtt(0, target, 9))
        .expect("RTT")
        .iter()
        .map(|d| d.as_secs_f64() * 1e3)
        .collect();

    // Past the start-up schedule of the member records (each member
    // re-gossips its record 3, 9, 21, 45, 93 s after it starts, then at
    // doubling intervals): the last nodes launched would otherwise add
    // several records each to the windows below.
    let quiet_secs = env("RESOLVD_SCALE_QUIET_SECS", 100);
    tokio::time::sleep(Duration::from_secs(quiet_secs as u64)).await;
    let idle_before = idle_window(&topology, &net.0, nodes, ticks, idle_secs).await;

    let honest = net.0.deal_content(DealKind::Honest).await.unwrap();
    let false_claim = net.0.deal_content(DealKind::FalseClaim).await.unwrap();
    let domain = crate::bench::devnet_domain(&net.0);
    let floor = crate::bench::floors(&honest, nodes, &domain);
    let mut peak_rss: Vec<u64> = net.0.nodes.iter().map(|n| n.rss_kib().unwrap_or(0)).collect();
    let (mut to_settle, mut seen_to_cert, mut seen_to_settle) =
        (Vec::new(), Vec::new(), Vec::new());
    let s0 = Snapshot::take(&topology, &net.0, ticks).await;
    // Markers for a profiler run alongside (the sequence is what it should see).
    eprintln!("scale_bench: dispute sequence starts");
    for k in 0..disputes {
        let (content, expected) =
            if k % 2 == 0 { (&honest, RELEASED) } else { (&false_claim, REFUNDED) };
        let open = net.0.open_dispute(content, &[k % nodes]).await.unwrap();
        let deal = net.0.wait_settled(open.deal_id, settle).await.unwrap();
        to_settle.push(open.challenged.elapsed().as_secs_f64() * 1e3);
        assert_eq!(deal.settlement, expected, "dispute {k}");
        // Each node's own view: first seen -> certificate, -> settled.
        let path = format!("/disputes/{}", open.deal_id);
        let deadline = Instant::now() + settle;
        for n in &net.0.nodes {
            let v = settled_view(n, &path, deadline).await;
            seen_to_cert.extend(v["certificate_ms"].as_f64());
            seen_to_settle.extend(v["settlement_ms"].as_f64());
        }
        for (i, n) in net.0.nodes.iter().enumerate() {
            peak_rss[i] = peak_rss[i].max(n.rss_kib().unwrap_or(0));
        }
    }
    let s1 = Snapshot::take(&topology, &net.0, ticks).await;
    eprintln!("scale_bench: dispute sequence ends");
    let sequence_secs = (s1.at - s0.at).as_secs_f64();
    let report_usage = usage(&s0, &s1, nodes, disputes as f64);
    // A second idle window after the sequence: the idle rate is the mean of
    // the two, weighted by their lengths, so a rate that drifts (records,
    // mesh maintenance) is bracketed rather than read off one side.
    let idle_after = idle_window(&topology, &net.0, nodes, ticks, idle_secs).await;
    let mean = |u: &serde_json::Value, k: &str| u[k]["mean"].as_f64();
    let idle_rate = |k: &str| {
        let (b, a) = (mean(&idle_before.0, k)?, mean(&idle_after.0, k)?);
        Some((b * idle_before.1 + a * idle_after.1) / (idle_before.1 + idle_after.1))
    };
    // What the disputes cost beyond idling for as long as they took.
    let net_of_idle =
        |k: &str| Some(mean(&report_usage, k)? - idle_rate(k)? * sequence_secs / disputes as f64);
    let rss_mib: Vec<f64> = peak_rss.iter().map(|k| *k as f64 / 1024.0).collect();
    let report = serde_json::json!({
        "nodes": nodes,
        "dissemination": net.0.nodes[0].config.p2p.dissemination,
        "disputes": disputes,
        "build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "link": {
            "oneWayDelayMs": shape.delay.as_secs_f64() * 1e3,
            "jitterMs": shape.jitter.as_secs_f64() * 1e3,
            "loss": shape.loss,
            "rateBps": shape.rate_bps,
            "emulator": "userspace TUN router (node/netns/src/wan.py), node egress shaped",
        },
        "machine": { "cpus": std::thread::available_parallelism().map_or(0, usize::from) },
        "launchSeconds": launch_secs,
        "tcpHandshakeNode0ToNode1Ms": percentiles(&mut rtt),
        "floorMs": floor.path_ms,
        "goalFloorMs": floor.goal_ms,
        "seenToCertificateMs": percentiles(&mut seen_to_cert),
        "seenToSettlementMs": percentiles(&mut seen_to_settle),
        "challengeToSettlementMs": percentiles(&mut to_settle),
        "perDispute": report_usage,
        "quietSeconds": quiet_secs,
        "idlePerSecond": {
            "cpuSecondsPerNode": { "mean": idle_rate("cpuSecondsPerNode") },
            "p2pBytesSentPerNode": { "mean": idle_rate("p2pBytesSentPerNode") },
            "before": idle_before.0,
            "after": idle_after.0,
        },
        "sequenceSeconds": sequence_secs,
        "cpuSecondsPerNodePerDisputeNetOfIdle": net_of_idle("cpuSecondsPerNode"),
        "p2pBytesSentPerNodePerDisputeNetOfIdle": net_of_idle("p2pBytesSentPerNode"),
        "rssPeakMiB": { "min": rss_mib.iter().copied().fold(f64::INFINITY, f64::min), "max": rss_mib.iter().copied().fold(0.0, f64::max) },
    });
    let out = std::env::var("RESOLVD_SCALE_OUT")
        .unwrap_or_else(|_| format!("{}/../target/scale-{nodes}.json", env!("CARGO_MANIFEST_DIR")));
    if let Some(dir) = std::path::Path::new(&out).parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::write(&out, serde_json::to_string_pretty(&report).unwrap()).unwrap();
    println!("{}", serde_json::to_string_pretty(&report).unwrap());

    if env("RESOLVD_SCALE_PARTITIONS", 1) == 0 {
        return;
    }
    let mut report = report;
    report["partitions"] = partitions(&topology, &mut net, &honest, settle).await;
    std::fs::write(&out, serde_json::to_string_pretty(&report).unwrap()).unwrap();
    println!("{}", serde_json::to_string_pretty(&report["partitions"]).unwrap());
}

/// Two partitions of equal-stake nodes: the last `k` nodes cut off from the
/// rest (they keep the chain). Under a third isolated, the rest holds 2/3
/// and settles; a third or more isolated, neither side can certify until
/// the partition heals, and then the dispute settles before its deadline.
async fn partitions(
    topology: &Netns,
    net: &mut crate::network::Net,
    content: &resolvd_devnet::DealContent,
    settle: Duration,
) -> serde_json::Value {
    let nodes = net.0.nodes.len();
    let groups = |k: usize| vec![(0..nodes - k).collect::<Vec<_>>(), (nodes - k..nodes).collect()];
    let minority = (nodes - 1) / 3;
    assert!(3 * minority < nodes);
    topology.partition(&groups(minority)).expect("partition");
    let open = net.0.open_dispute(content, &[0]).await.unwrap();
    let deal = net.0.wait_settled(open.deal_id, settle).await;
    topology.heal().expect("heal");
    let deal = deal.unwrap_or_else(|e| panic!("{minority} of {nodes} isolated: {e}"));
    assert_eq!(deal.settlement, RELEASED);
    let minority_ms = open.challenged.elapsed().as_secs_f64() * 1e3;

    let third = nodes.div_ceil(3);
    assert!(3 * third >= nodes);
    topology.partition(&groups(third)).expect("partition");
    let open = net.0.open_dispute(content, &[0]).await.unwrap();
    let hold = Duration::from_secs(30);
    let early = net.0.wait_settled(open.deal_id, hold).await;
    assert!(early.is_err(), "settled with {third} of {nodes} nodes isolated");
    let healed = Instant::now();
    topology.heal().expect("heal");
    let deal = net.0.wait_settled(open.deal_id, settle).await.unwrap();
    assert_eq!(deal.settlement, RELEASED);
    serde_json::json!({
        "underAThird": { "isolated": minority, "challengeToSettlementMs": minority_ms },
        "aThirdOrMore": {
            "isolated": third,
            "heldSeconds": hold.as_secs(),
            "settledWhilePartitioned": false,
            "healToSettlementMs": healed.elapsed().as_secs_f64() * 1e3,
        },
    })
}

/// `node`'s view at `path` once it shows the dispute settled (polled every
/// 200 ms until `deadline`).
async fn settled_view(
    node: &resolvd_devnet::DevNode,
    path: &str,
    deadline: Instant,
) -> serde_json::Value {
    loop {
        let view = node.get(path).await.ok();
        if let Some(v) = view.as_ref().filter(|v| v["phase"] == "settled") {
            return v.clone();
        }
        assert!(
            Instant::now() < deadline,
            "node {} never saw {path} settled: {view:?}",
            node.index
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
