//! The HTTP API's write side on a real listener (127.0.0.1) over a real
//! RocksDB: bearer token, refused writes on a public listener without one,
//! bounded concurrent uploads, the content quota, the connection limit and
//! the header timeout (idle and slowloris connections).

use alloy_primitives::B256;
use resolvd_node::{
    api,
    config::ApiConfig,
    metrics::Metrics,
    node::{Shared, Status},
    store::Store,
};
use std::{net::SocketAddr, sync::Arc, time::Duration};

async fn serve(cfg: ApiConfig) -> (String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("db")).unwrap());
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let shared = Arc::new(Shared {
        store,
        metrics: Arc::new(Metrics::default()),
        status: std::sync::RwLock::new(Status::default()),
        content_added: tx,
    });
    // Bind first on a free port, then hand the port to the API.
    let port = resolvd_devnet::free_port().unwrap();
    let listen = SocketAddr::new(cfg.listen.ip(), port);
    let cfg = ApiConfig { listen, ..cfg };
    tokio::spawn(api::serve(shared, cfg, std::future::pending()));
    let url = format!("http://127.0.0.1:{port}");
    for _ in 0..100 {
        if reqwest::get(format!("{url}/health")).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (url, dir)
}

fn doc(n: u8) -> (B256, Vec<u8>) {
    // Any bytes under the "spec" tag are stored by hash (parsing is the node's job later).
    let bytes = vec![n; 64];
    (resolvd_proto::content_hash("spec", &bytes), bytes)
}

async fn put(url: &str, token: Option<&str>, n: u8) -> u16 {
    let (hash, bytes) = doc(n);
    let mut req = reqwest::Client::new().put(format!("{url}/content/{hash}?type=spec")).body(bytes);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.send().await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_need_the_token_and_a_public_listener_without_one_refuses_them() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "0123456789abcdef-token\n").unwrap();
    let (url, _d) =
        serve(ApiConfig { content_token_file: Some(token_file.clone()), ..ApiConfig::default() })
            .await;
    assert_eq!(put(&url, None, 1).await, 401);
    assert_eq!(put(&url, Some("0123456789abcdef-tokeX"), 1).await, 401);
    assert_eq!(put(&url, Some("0123456789abcdef-token"), 1).await, 201);
    // Reads need no token.
    let (hash, bytes) = doc(1);
    let got = reqwest::get(format!("{url}/content/{hash}")).await.unwrap();
    assert_eq!(got.bytes().await.unwrap().to_vec(), bytes);

    // 0.0.0.0 without a token: writes refused (reached here through 127.0.0.1).
    let (url, _d) =
        serve(ApiConfig { listen: "0.0.0.0:0".parse().unwrap(), ..ApiConfig::default() }).await;
    assert_eq!(put(&url, None, 2).await, 403);
    // Loopback without a token: allowed (local tools, the devnet).
    let (url, _d) = serve(ApiConfig::default()).await;
    assert_eq!(put(&url, None, 3).await, 201);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_are_bounded_in_number_and_by_the_quota() {
    use tokio::io::AsyncWriteExt;
    let (url, _d) = serve(ApiConfig { max_concurrent_puts: 2, ..ApiConfig::default() }).await;
    let addr = url.trim_start_matches("http://").to_owned();
    // Two uploads that announce 1 MiB and send it slowly hold both permits.
    let mut slow = Vec::new();
    for n in 0..2u8 {
        let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let (hash, _) = doc(100 + n);
        let head = format!(
            "PUT /content/{hash}?type=spec HTTP/1.1\r\nhost: x\r\ncontent-length: 1048576\r\n\r\n"
        );
        s.write_all(head.as_bytes()).await.unwrap();
        s.write_all(&[0u8; 1024]).await.unwrap();
        slow.push(s);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(put(&url, None, 4).await, 503, "a third upload is refused while two are in flight");
    drop(slow);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(put(&url, None, 4).await, 201, "and accepted once they are gone");

    // Quota: once the store holds more than it, uploads are refused.
    let (url, _d) = serve(ApiConfig { content_quota_bytes: 1 << 20, ..ApiConfig::default() }).await;
    let big = |n: u8| {
        let bytes = vec![n; 2 << 20];
        (resolvd_proto::content_hash("spec", &bytes), bytes)
    };
    for (n, want) in [(5u8, 201u16), (6, 507)] {
        let (hash, bytes) = big(n);
        let status = reqwest::Client::new()
            .put(format!("{url}/content/{hash}?type=spec"))
            .body(bytes)
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status.as_u16(), want, "upload {n}");
    }
}

/// `read` until the peer closes (Ok(0) or a reset), or `None` after `within`.
async fn closed_within(stream: &mut tokio::net::TcpStream, within: Duration) -> Option<Duration> {
    use tokio::io::AsyncReadExt;
    let started = std::time::Instant::now();
    let mut buf = [0u8; 1024];
    tokio::time::timeout(within, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return started.elapsed(),
                Ok(_) => {}
            }
        }
    })
    .await
    .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_bounded_and_idle_or_slow_ones_time_out() {
    use tokio::{io::AsyncWriteExt, net::TcpStream};
    let (url, _d) =
        serve(ApiConfig { max_connections: 4, header_timeout_secs: 1, ..ApiConfig::default() })
            .await;
    let addr = url.trim_start_matches("http://").to_owned();
    // The helper's health-check connection is gone once its client is dropped.
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Three idle connections and one slowloris (headers trickling in) fill the limit.
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(TcpStream::connect(&addr).await.unwrap());
    }
    let mut slow = TcpStream::connect(&addr).await.unwrap();
    slow.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let trickle = tokio::spawn(async move {
        for _ in 0..20 {
            if slow.write_all(b"X-Slow: 1\r\n").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        slow
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A fifth connection is closed on accept ...
    let mut fifth = TcpStream::connect(&addr).await.unwrap();
    assert!(
        closed_within(&mut fifth, Duration::from_millis(500)).await.is_some(),
        "over the limit"
    );
    // ... while the first ones are still open ...
    assert!(closed_within(&mut idle[0], Duration::from_millis(200)).await.is_none());
    // ... until the header timeout (1 s) closes every one, the slowloris too.
    for conn in &mut idle {
        let after = closed_within(conn, Duration::from_secs(5)).await;
        assert!(after.is_some(), "an idle connection outlived the header timeout");
    }
    let mut slow = trickle.await.unwrap();
    assert!(
        closed_within(&mut slow, Duration::from_secs(3)).await.is_some(),
        "slowloris kept open"
    );
    // Then the API serves again.
    let ok = reqwest::get(format!("{url}/health")).await.unwrap();
    assert_eq!(ok.status(), 200);
}

fn rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() / 1024
}

/// 48 clients ask for a 16 MiB document and never read the answer. Before:
/// every one was answered 200 and held its copy of the document (the issue's
/// measure: RSS 263 → 1,018 MiB). Now at most `api.max_concurrent_gets` (4
/// here) are answered at once, each holding its document until the last
/// byte is handed to the connection, the others get 503 at once; a response
/// not taken within `api.response_timeout_secs` (2 s here) closes its
/// connection and frees its permit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downloads_are_bounded_and_unread_ones_are_cut() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (url, _d) = serve(ApiConfig {
        max_concurrent_gets: 4,
        response_timeout_secs: 2,
        ..ApiConfig::default()
    })
    .await;
    let addr = url.trim_start_matches("http://").to_owned();
    let big: Vec<u8> = (0..resolvd_proto::codec::MAX_DOCUMENT_LEN - 1024)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0])
        .collect();
    let hash = resolvd_proto::content_hash("spec", &big);
    let put = reqwest::Client::new()
        .put(format!("{url}/content/{hash}?type=spec"))
        .body(big.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss_before = rss_mib();

    let mut unread = Vec::new();
    let (mut ok, mut busy) = (0, 0);
    for _ in 0..48 {
        let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let head = format!("GET /content/{hash} HTTP/1.1\r\nhost: x\r\n\r\n");
        s.write_all(head.as_bytes()).await.unwrap();
        // The status line only; the rest is never read.
        let mut status = [0u8; 12];
        s.read_exact(&mut status).await.unwrap();
        match &status {
            b"HTTP/1.1 200" => ok += 1,
            b"HTTP/1.1 503" => busy += 1,
            other => panic!("{}", String::from_utf8_lossy(other)),
        }
        unread.push(s);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_held = rss_mib();
    // While they are held, a well-behaved client is told to retry.
    let r = reqwest::get(format!("{url}/content/{hash}")).await.unwrap();
    assert_eq!(r.status(), 503);
    #[allow(clippy::disallowed_macros)]
    {
        eprintln!(
            "48 unread GETs of a 16 MiB document: {ok} answered 200, {busy} 503; RSS {rss_before} \
             → {rss_held} MiB"
        );
    }
    assert_eq!((ok, busy), (4, 44));

    // The timeout (2 s) closes the stalled connections, short of the whole body.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut first = unread.swap_remove(0);
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), first.read_to_end(&mut got)).await;
    assert!(got.len() < big.len(), "the stalled response was completed ({} bytes)", got.len());
    drop(unread);
    let r = reqwest::get(format!("{url}/content/{hash}")).await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-resolvd-type-tag"], "spec");
    assert_eq!(r.bytes().await.unwrap().to_vec(), big);
}
