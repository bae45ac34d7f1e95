//! The RPC transport on real processes: anvil behind a TLS-terminating proxy
//! written here (tokio-rustls, a private CA and a server certificate made by
//! the test, trusted through `chain.ca_file`); `resolvd run` children settling
//! disputes over `https://` and over `wss://`; failover when the first of two
//! endpoints is killed mid-run; an endpoint on another chain refused at
//! start. Everything listens on 127.0.0.1.

use crate::network::{launch, Net, REFUNDED, RELEASED, SETTLE};
use futures::StreamExt;
use resolvd_devnet::DealKind;
use resolvd_node::{
    chain::{Chain, ChainError, RpcOptions},
    config::{ChainConfig, DEFAULT_RPC_URL},
};
use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};
use tokio_rustls::rustls::{
    self,
    pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer},
};

/// Nodes per devnet: one resolver is a quorum of one, and every chain read
/// and send of the network then goes through the endpoint under test.
const NODES: usize = 1;

/// This checkout's `resolvd`, linked once per test process: a target
/// directory shared with another checkout gets its `debug/resolvd` replaced by
/// that checkout's build, also while a test restarts nodes. The copy must
/// know `chain.rpc_urls` (else the file was already another build's).
pub(crate) fn resolvd_bin() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let dir = std::env::temp_dir().join("resolvd-it");
        std::fs::create_dir_all(&dir).unwrap();
        let bin = dir.join(format!("resolvd-rpc-{}", std::process::id()));
        // A hard link keeps this inode when cargo links a new build in its place.
        let _ = std::fs::remove_file(&bin);
        if std::fs::hard_link(env!("CARGO_BIN_EXE_resolvd"), &bin).is_err() {
            std::fs::copy(env!("CARGO_BIN_EXE_resolvd"), &bin).unwrap();
        }
        let config = dir.join(format!("rpc-check-{}.toml", std::process::id()));
        let text = "[chain]\nescrow = \"0x0000000000000000000000000000000000000001\"\n\
                    rpc_urls = [\"https://a.example\", \"wss://b.example\"]\n";
        std::fs::write(&config, text).unwrap();
        let out = std::process::Command::new(&bin)
            .args(["run", "--print-config", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} is not this checkout's build (rebuild it): {}",
            env!("CARGO_BIN_EXE_resolvd"),
            String::from_utf8_lossy(&out.stderr)
        );
        bin
    })
    .clone()
}

/// A private CA and a server certificate it signed for 127.0.0.1.
struct TestCa {
    ca_pem: String,
    server: Arc<rustls::ServerConfig>,
}

fn test_ca() -> TestCa {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "resolvd test CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    leaf.distinguished_name.push(DnType::CommonName, "anvil behind TLS");
    let leaf = leaf.signed_by(&key, &ca, &ca_key).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    TestCa { ca_pem: ca.pem(), server: Arc::new(server) }
}

/// Terminates TLS on 127.0.0.1 and forwards the bytes to anvil, which
/// answers HTTP and WebSocket on one port: one proxy serves `https://` and
/// `wss://`. [`Self::kill`] closes the port and every open connection.
struct TlsProxy {
    addr: SocketAddr,
    accept: Option<tokio::task::JoinHandle<()>>,
    connections: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
    accepted: Arc<AtomicU64>,
}

impl TlsProxy {
    async fn start(upstream: SocketAddr, tls: Arc<rustls::ServerConfig>) -> Self {
        Self::bind(SocketAddr::from(([127, 0, 0, 1], 0)), upstream, tls).await
    }

    async fn bind(at: SocketAddr, upstream: SocketAddr, tls: Arc<rustls::ServerConfig>) -> Self {
        let listener = tokio::net::TcpListener::bind(at).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(tls);
        let connections = Arc::new(Mutex::new(Vec::new()));
        let accepted = Arc::new(AtomicU64::new(0));
        let (conns, count) = (connections.clone(), accepted.clone());
        let accept = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::Relaxed);
                let acceptor = acceptor.clone();
                let task = tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                    let Ok(mut up) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
                });
                conns.lock().unwrap().push(task.abort_handle());
            }
        });
        Self { addr, accept: Some(accept), connections, accepted }
    }

    fn url(&self, scheme: &str) -> String {
        format!("{scheme}://127.0.0.1:{}", self.addr.port())
    }

    /// TCP connections accepted so far.
    fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    async fn kill(&mut self) {
        if let Some(accept) = self.accept.take() {
            accept.abort();
            let _ = accept.await;
        }
        for c in self.connections.lock().unwrap().drain(..) {
            c.abort();
        }
    }
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        if let Some(accept) = self.accept.take() {
            accept.abort();
        }
        for c in self.connections.lock().unwrap().drain(..) {
            c.abort();
        }
    }
}

fn anvil_addr(net: &Net) -> SocketAddr {
    net.0.rpc_url.trim_start_matches("http://").parse().unwrap()
}

fn write_ca(net: &Net, ca: &TestCa) -> PathBuf {
    let path = net.0.dir.join("ca.pem");
    std::fs::write(&path, &ca.ca_pem).unwrap();
    path
}

/// Restarts every node with its chain section changed by `change`.
async fn restart_all(net: &mut Net, change: impl Fn(&mut ChainConfig)) {
    for i in 0..net.0.nodes.len() {
        net.0.nodes[i].stop();
        change(&mut net.0.nodes[i].config.chain);
        net.0.start_node(i).unwrap();
    }
    for n in &mut net.0.nodes {
        n.wait_healthy(Duration::from_secs(90)).await.unwrap();
    }
    net.0.wait_mesh(Duration::from_secs(60)).await.unwrap();
}

async fn next_head(heads: &mut (impl futures::Stream<Item = u64> + Unpin)) -> Option<u64> {
    tokio::time::timeout(Duration::from_secs(20), heads.next()).await.ok().flatten()
}

/// Opens a dispute of `kind` and waits for its settlement.
async fn settles(net: &mut Net, kind: DealKind, settlement: u8) {
    let content = net.0.deal_content(kind).await.unwrap();
    let open = net.0.open_dispute(&content, &[0]).await.unwrap();
    let deal = net.0.wait_settled(open.deal_id, SETTLE).await.unwrap();
    assert_eq!(deal.settlement, settlement);
}

/// (a) and (b): a node settles over `https://`, then over `wss://`, trusting
/// the test's CA through `chain.ca_file`; without the CA the certificate is
/// refused. A `newHeads` subscription over `wss://` delivers heads; the
/// endpoint killed shows down in its health, and once it is back heads flow
/// again and it shows up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_settles_over_https_and_wss_with_a_private_ca() {
    let mut net = launch(|o| {
        o.nodes = NODES;
        o.bin = resolvd_bin();
    })
    .await;
    let escrow = net.0.deployment.escrow;
    let ca = test_ca();
    let ca_file = write_ca(&net, &ca);
    let upstream = anvil_addr(&net);
    let mut proxy = TlsProxy::start(upstream, ca.server.clone()).await;

    // The webpki roots alone do not trust a private CA.
    let untrusted = Chain::connect(&proxy.url("https"), escrow, None).await.unwrap_err();
    assert!(untrusted.to_string().contains("certificate"), "{untrusted}");
    let https = RpcOptions { urls: vec![proxy.url("https")], ca_file: Some(ca_file.clone()) };
    let chain = Chain::connect_with(&https, escrow, None).await.unwrap();
    assert_eq!(chain.chain_id, 31337);
    assert!(chain.subscribe_heads().await.is_none(), "no subscription over https");

    // Counted before the restart: the nodes open their (keep-alive)
    // connections while starting, possibly all before the dispute.
    let before = proxy.accepted();
    restart_all(&mut net, |c| {
        c.rpc_url = proxy.url("https");
        c.ca_file = Some(ca_file.clone());
    })
    .await;
    settles(&mut net, DealKind::Honest, RELEASED).await;
    assert!(proxy.accepted() > before, "the node read the chain through the proxy");

    // Heads over wss, across a restart of the endpoint.
    let wss = RpcOptions { urls: vec![proxy.url("wss")], ca_file: Some(ca_file.clone()) };
    let chain = Chain::connect_with(&wss, escrow, None).await.unwrap();
    let mut heads = chain.subscribe_heads().await.expect("a wss endpoint offers new heads");
    let first = next_head(&mut heads).await.expect("a head within 20 s");
    let second = next_head(&mut heads).await.expect("a second head");
    assert!(second > first, "{first} then {second}");
    let addr = proxy.addr;
    proxy.kill().await;
    // The probe notices within its interval plus its timeout.
    let noticed = std::time::Instant::now();
    let down = loop {
        let health = chain.endpoints();
        if !health[0].up {
            break health;
        }
        assert!(noticed.elapsed() < Duration::from_secs(30), "still up: {health:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let noticed = noticed.elapsed();
    assert!(down[0].last_error.is_some(), "{down:?}");
    let mut proxy = TlsProxy::bind(addr, upstream, ca.server.clone()).await;
    let resumed = tokio::time::timeout(Duration::from_secs(90), async {
        loop {
            let h = heads.next().await.expect("the head stream never ends");
            if h > second + 2 {
                break h;
            }
        }
    })
    .await
    .expect("heads resume once the endpoint is back");
    let health = chain.endpoints();
    #[allow(clippy::disallowed_macros)]
    {
        eprintln!("rpc: ws endpoint down after {noticed:?}: {down:?}; after: {health:?}");
    }
    assert!(health[0].head >= Some(resumed), "{health:?}");
    let back = std::time::Instant::now();
    while !chain.endpoints()[0].up {
        assert!(back.elapsed() < Duration::from_secs(30), "{:?}", chain.endpoints());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(health[0].kind, resolvd_node::rpc::EndpointKind::Ws);

    // A node over wss.
    restart_all(&mut net, |c| c.rpc_url = proxy.url("wss")).await;
    let before = proxy.accepted();
    settles(&mut net, DealKind::FalseClaim, REFUNDED).await;
    let log = std::fs::read_to_string(net.0.nodes[0].log_path()).unwrap();
    assert!(log.contains("websocket connected"), "the node used the websocket");
    assert!(proxy.accepted() >= before);
    proxy.kill().await;
}

/// (c) and (d): two endpoints (`https://` preferred, `wss://` backup, each
/// through its own proxy); the first is killed once a dispute is challenged;
/// reads fail over, the dispute settles and the health shows the first one
/// down. Then a second anvil with another chain id is refused at start, in
/// process and by `resolvd run`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_fail_over_when_the_first_endpoint_dies_and_another_chain_is_refused() {
    let mut net = launch(|o| {
        o.nodes = NODES;
        o.bin = resolvd_bin();
    })
    .await;
    let escrow = net.0.deployment.escrow;
    let ca = test_ca();
    let ca_file = write_ca(&net, &ca);
    let upstream = anvil_addr(&net);
    let mut first = TlsProxy::start(upstream, ca.server.clone()).await;
    let second = TlsProxy::start(upstream, ca.server.clone()).await;
    let urls = vec![first.url("https"), second.url("wss")];
    let rpc = RpcOptions { urls: urls.clone(), ca_file: Some(ca_file.clone()) };

    // Anchors on one endpoint's word: the first dies before the anchor is
    // checked, and with the default quorum of 2 the node would sign nothing
    // until it is back (`rpc_trust` tests the quorum).
    restart_all(&mut net, |c| {
        c.rpc_url = DEFAULT_RPC_URL.into();
        c.rpc_urls = urls.clone();
        c.ca_file = Some(ca_file.clone());
        c.rpc_quorum = Some(1);
    })
    .await;
    let chain = Chain::connect_with(&rpc, escrow, None).await.unwrap();
    let health = chain.endpoints();
    assert!(health.iter().all(|e| e.up && e.chain_id == Some(31337)), "{health:?}");
    assert_eq!(health[0].endpoint, first.url("https"));

    let content = net.0.deal_content(DealKind::Honest).await.unwrap();
    let open = net.0.open_dispute(&content, &[0]).await.unwrap();
    first.kill().await;
    let head = chain.head().await.expect("a read fails over to the second endpoint");
    let deal = net.0.wait_settled(open.deal_id, SETTLE).await.unwrap();
    assert_eq!(deal.settlement, RELEASED);

    let health = chain.endpoints();
    #[allow(clippy::disallowed_macros)]
    {
        eprintln!("rpc: health after the first endpoint died: {health:#?}");
    }
    assert!(!health[0].up, "{health:?}");
    assert!(health[0].consecutive_errors > 0 && health[0].last_error.is_some(), "{health:?}");
    assert!(health[1].up && health[1].head >= Some(head), "{health:?}");
    // The node itself: its reads moved to the second endpoint (a request
    // that failed over, or its health probe found the first one down first).
    let log = std::fs::read_to_string(net.0.nodes[0].log_path()).unwrap();
    let failed_over = log.lines().any(|l| {
        l.contains("rpc endpoint failed, trying the next one") && l.contains(&first.url("https"))
    });
    let status = net.0.nodes[0].get("/status").await.unwrap();
    let endpoints = &status["rpc_endpoints"];
    assert_eq!(endpoints[0]["up"], false, "{endpoints}");
    assert_eq!(endpoints[1]["up"], true, "{endpoints}");
    #[allow(clippy::disallowed_macros)]
    {
        eprintln!("rpc: failover logged by the node: {failed_over}");
    }
    assert!(net.0.nodes[0].running(), "the node survived the endpoint's death");

    // Another chain: an anvil with chain id 4242.
    let port = resolvd_devnet::free_port().unwrap();
    let mut other = std::process::Command::new(&net.0.options.anvil)
        .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--chain-id", "4242"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let other_url = format!("http://127.0.0.1:{port}");
    let wrong =
        RpcOptions { urls: vec![second.url("wss"), other_url.clone()], ca_file: Some(ca_file) };
    let mut refused = None;
    for _ in 0..100 {
        match Chain::connect_with(&wrong, escrow, None).await {
            Err(ChainError::WrongChain(e)) => {
                refused = Some(e);
                break;
            }
            // anvil still starting: the endpoint does not answer yet.
            Err(_) | Ok(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let refused = refused.expect("the endpoint on chain 4242 is refused");
    assert!(refused.contains(&other_url) && refused.contains("4242"), "{refused}");
    assert!(refused.contains("31337"), "{refused}");

    let node = &mut net.0.nodes[0];
    node.stop();
    node.config.chain.rpc_urls = vec![second.url("wss"), other_url.clone()];
    net.0.start_node(0).unwrap();
    let node = &mut net.0.nodes[0];
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while node.running() {
        assert!(std::time::Instant::now() < deadline, "resolvd run did not refuse the endpoint");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let log = std::fs::read_to_string(node.log_path()).unwrap();
    let line = format!("rpc endpoint {other_url} reports chain id 4242");
    assert!(log.contains(&line), "{}", node.log_tail(20));
    let _ = other.kill();
    let _ = other.wait();
}
