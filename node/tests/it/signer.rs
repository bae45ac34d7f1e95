//! A separate signer (`resolvd signer`): a node without a local key settles
//! disputes through it over a Unix socket; a second daemon wrongly pointed at
//! the same signer never obtains a second, different signature for one deal
//! (the protection check lives in the signer); an unauthenticated request, or
//! one for a domain it does not serve, is refused. Its bounds (connections,
//! header and body timeouts, body size, token checked first, token length)
//! and its Unix socket, on a signer process of its own.

use crate::network::{launch, RELEASED, SETTLE};
use resolvd_devnet::{free_port, DealKind};
use resolvd_node::config::{Byzantine, FaultConfig};
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
    std::fs::write(&token, "s3cret-token-0123456789\n").unwrap();
    // Over a Unix socket (what an operator should use).
    let socket = dir.path().join("signer.sock");
    let url = format!("unix://{}", socket.display());
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
        .args(["--listen", &url, "--token-file"])
        .arg(&token)
        .args(["--domain", &format!("31337:{escrow}")])
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .map(Child)
        .unwrap();
    let http = reqwest::Client::builder().unix_socket(socket.clone()).build().unwrap();
    let base = "http://signer";
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let r = http
            .get(format!("{base}/v1/public-key"))
            .bearer_auth("s3cret-token-0123456789")
            .send()
            .await;
        if r.is_ok_and(|r| r.status().is_success()) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "signer never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Refused: no token, a wrong token, a domain it does not serve.
    let none = http.get(format!("{base}/v1/public-key")).send().await.unwrap();
    assert_eq!(none.status(), 401);
    let wrong =
        http.get(format!("{base}/v1/public-key")).bearer_auth("guess").send().await.unwrap();
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
        .post(format!("{base}/v1/sign"))
        .bearer_auth("s3cret-token-0123456789")
        .json(&serde_json::json!({ "domain": other_domain, "commitment": commitment }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "{}", r.text().await.unwrap());
    let unauth = http
        .post(format!("{base}/v1/sign"))
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
    // Its member record too (under the record DST: no protection involved),
    // verified by the daemon before it publishes it.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !(std::fs::read_to_string(&signer_log).unwrap().contains("signed a member record")
        && net.0.nodes[3].log_tail(2_000).contains("publishing the member record"))
    {
        assert!(std::time::Instant::now() < deadline, "node 3 published no member record");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let tail = net.0.nodes[3].log_tail(2_000);
    assert!(!tail.contains("did not sign the member record"), "{tail}");
    // A record the wire format refuses is not signed.
    let addrs: Vec<String> = (0..9).map(|_| format!("0x{}", "04".repeat(8))).collect();
    let record = serde_json::json!({ "seq": 1, "peerId": "0x0024", "addrs": addrs });
    let sign_record = |auth: bool| {
        let r = http.post(format!("{base}/v1/sign-record")).json(&record);
        if auth {
            r.bearer_auth("s3cret-token-0123456789")
        } else {
            r
        }
    };
    assert_eq!(sign_record(false).send().await.unwrap().status(), 401);
    let r = sign_record(true).send().await.unwrap();
    assert_eq!(r.status(), 400, "{}", r.text().await.unwrap());
    // Nor one whose seq would outrank every later record of the key.
    let ahead = serde_json::json!({ "seq": u64::MAX, "peerId": "0x0024", "addrs": [] });
    let r = http
        .post(format!("{base}/v1/sign-record"))
        .bearer_auth("s3cret-token-0123456789")
        .json(&ahead)
        .send()
        .await
        .unwrap();
    let text = r.text().await.unwrap();
    assert!(text.contains("ahead of this signer's clock"), "{text}");

    // A second daemon on the same signer (one per signer is the supported
    // setup), made to sign the opposite outcome.
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

/// A `resolvd signer` child process with a fresh key, listening on `listen`.
struct SignerProcess {
    child: Child,
    log: std::path::PathBuf,
    key: resolvd_consensus::PublicKey,
    _dir: tempfile::TempDir,
}

const TOKEN: &str = "0123456789abcdef-signer-token";
const ESCROW: &str = "0x00000000000000000000000000000000000000e5";

fn spawn_signer(dir: tempfile::TempDir, listen: &str, token: &str) -> SignerProcess {
    use resolvd_node::{keys, keystore::Kdf};
    let password = dir.path().join("password");
    if !password.exists() {
        keys::write_private(&password, b"a signer password").unwrap();
        let secret = keys::generate().unwrap();
        let args = keys::PasswordArgs { password_file: Some(password.clone()) };
        keys::save(&secret, &dir.path().join("bls.json"), &args, Kdf::Pbkdf2).unwrap();
    }
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let key = resolvd_node::keys::load(
        &dir.path().join("bls.json"),
        &resolvd_node::keys::PasswordArgs { password_file: Some(password.clone()) },
    )
    .unwrap()
    .public_key();
    let log = dir.path().join(format!("signer-{}.log", free_port().unwrap()));
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_resolvd"))
        .args(["signer", "--keystore"])
        .arg(dir.path().join("bls.json"))
        .arg("--password-file")
        .arg(&password)
        .arg("--data-dir")
        .arg(dir.path().join("signer"))
        .args(["--listen", listen, "--token-file"])
        .arg(&token_file)
        .args(["--domain", &format!("31337:{ESCROW}")])
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .map(Child)
        .unwrap();
    SignerProcess { child, log, key, _dir: dir }
}

/// Waits until the signer at `url` answers (through the daemon's client).
async fn ready(url: &str, signer: &mut SignerProcess) -> resolvd_node::signer::RemoteSigner {
    let remote =
        resolvd_node::signer::RemoteSigner::new(url, zeroize::Zeroizing::new(TOKEN.into()))
            .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(key) = remote.public_key().await {
            assert_eq!(key, signer.key);
            return remote;
        }
        if let Some(status) = signer.child.0.try_wait().unwrap() {
            panic!(
                "the signer exited ({status}):\n{}",
                std::fs::read_to_string(&signer.log).unwrap()
            );
        }
        assert!(std::time::Instant::now() < deadline, "signer never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn domain() -> resolvd_proto::VerdictDomain {
    resolvd_proto::VerdictDomain {
        name: "resolvd".into(),
        version: "1".into(),
        chain_id: 31337,
        verifying_contract: ESCROW.parse().unwrap(),
    }
}

fn commitment(deal: u8) -> resolvd_proto::VerdictCommitment {
    let mut c = crate::p2p::verdict([0u8; 96]).commitment;
    c.deal_id = alloy_primitives::B256::repeat_byte(deal);
    c
}

/// Reads until the peer closes (Ok(0) or a reset); the bytes read, or `None`
/// if still open after `within`.
async fn read_to_close(stream: &mut tokio::net::TcpStream, within: Duration) -> Option<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    tokio::time::timeout(within, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .ok()
    .map(|()| got)
}

/// The signer checks the bearer token before it reads a body (bad JSON
/// without a token is 401, not 422), reads at most 4 KiB within 5 s, holds at
/// most 32 connections and closes idle ones after 5 s. (Before: any body was
/// parsed first, a stalled body held its connection forever, and connections
/// were not bounded.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_signer_checks_the_token_first_and_bounds_bodies_and_connections() {
    use resolvd_node::signer::{HEADER_TIMEOUT, MAX_BODY, MAX_CONNECTIONS};
    use tokio::{io::AsyncWriteExt, net::TcpStream};
    let port = free_port().unwrap();
    let addr = format!("127.0.0.1:{port}");
    let url = format!("http://{addr}");
    let mut signer = spawn_signer(tempfile::tempdir().unwrap(), &addr, TOKEN);
    let remote = ready(&url, &mut signer).await;

    let http = reqwest::Client::new();
    let post = |body: Vec<u8>, token: Option<&str>| {
        let mut req = http
            .post(format!("{url}/v1/sign"))
            .header("content-type", "application/json")
            .body(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send()
    };
    // Without a token, whatever the body: 401.
    assert_eq!(post(b"{\"x\": 1}".to_vec(), None).await.unwrap().status(), 401);
    assert_eq!(
        post(b"not json".to_vec(), Some("0123456789abcdef-wrong")).await.unwrap().status(),
        401
    );
    // With it: bad JSON 400, a body over the limit 413.
    assert_eq!(post(b"{\"x\": 1}".to_vec(), Some(TOKEN)).await.unwrap().status(), 400);
    assert_eq!(post(vec![b' '; MAX_BODY + 1], Some(TOKEN)).await.unwrap().status(), 413);
    // A body that stalls: 408 within the body timeout (5 s).
    let mut stalled = TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /v1/sign HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\n\
         content-type: application/json\r\ncontent-length: 2000\r\n\r\n{{\"domain\":"
    );
    stalled.write_all(head.as_bytes()).await.unwrap();
    let answer = read_to_close(&mut stalled, Duration::from_secs(10)).await;
    let answer = String::from_utf8_lossy(answer.as_deref().unwrap_or_default()).into_owned();
    assert!(answer.starts_with("HTTP/1.1 408"), "stalled body: {answer:?}");
    // And it still signs.
    let sig = remote.sign(&domain(), &commitment(1), &signer.key, None).await.unwrap();
    assert_eq!(remote.sign(&domain(), &commitment(1), &signer.key, None).await.unwrap(), sig);

    // Connections: the limit fills, one more is closed on accept; the idle
    // ones are closed after the header timeout.
    tokio::time::sleep(Duration::from_millis(300)).await; // the clients' pooled connections
    drop((http, remote));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut idle = Vec::new();
    for _ in 0..MAX_CONNECTIONS {
        idle.push(TcpStream::connect(&addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut extra = TcpStream::connect(&addr).await.unwrap();
    assert!(
        read_to_close(&mut extra, Duration::from_secs(1)).await.is_some(),
        "connection {} was kept open",
        MAX_CONNECTIONS + 1
    );
    assert!(read_to_close(&mut idle[0], Duration::from_millis(200)).await.is_none());
    for conn in &mut idle {
        assert!(
            read_to_close(conn, HEADER_TIMEOUT + Duration::from_secs(3)).await.is_some(),
            "an idle connection outlived the header timeout"
        );
    }
    let again = reqwest::Client::new()
        .get(format!("{url}/v1/public-key"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 200);
}

/// A token shorter than 16 characters is refused when the signer starts and
/// when a daemon's client is built (before: any non-empty token was taken).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_signer_token_is_refused_at_start() {
    let addr = format!("127.0.0.1:{}", free_port().unwrap());
    let mut signer = spawn_signer(tempfile::tempdir().unwrap(), &addr, "short-token");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = signer.child.0.try_wait().unwrap() {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "the signer started with a short token");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let log = std::fs::read_to_string(&signer.log).unwrap();
    assert!(!status.success() && log.contains("too short"), "{status}: {log}");
    let short = zeroize::Zeroizing::new("short-token".to_owned());
    let err =
        resolvd_node::signer::RemoteSigner::new(&format!("http://{addr}"), short).unwrap_err();
    assert!(err.to_string().contains("too short"), "{err}");
}

/// `--listen unix:///path`: the socket is created with mode 0660 (owner and
/// group), the daemon's client signs through it, a second signer on the same
/// path is refused while the first runs, a stale socket left by a killed
/// signer is replaced, and a daemon refuses a socket in a directory every
/// user can write to (a squatter could put its own socket there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_signer_listens_on_a_unix_socket_only_its_owner_and_group_can_reach() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("signer.sock");
    let url = format!("unix://{}", socket.display());
    let mut signer = spawn_signer(dir, &url, TOKEN);
    let remote = ready(&url, &mut signer).await;
    let meta = std::fs::metadata(&socket).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    let (sig, _) = remote.sign(&domain(), &commitment(2), &signer.key, None).await.unwrap();
    sig.verify(&signer.key, &commitment(2).eip712_digest(&domain())).unwrap();
    // Refused without the token over the socket too.
    let raw = reqwest::Client::builder().unix_socket(socket.clone()).build().unwrap();
    let r = raw.get("http://signer/v1/public-key").send().await.unwrap();
    assert_eq!(r.status(), 401);

    // A second signer on the same path: refused while the first listens.
    let second = tempfile::tempdir().unwrap();
    let mut twin = spawn_signer(second, &url, TOKEN);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = twin.child.0.try_wait().unwrap() {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "a second signer took the socket");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let log = std::fs::read_to_string(&twin.log).unwrap();
    assert!(!status.success() && log.contains("another process"), "{log}");
    assert!(remote.public_key().await.is_ok(), "the first signer lost its socket");

    // Killed (the socket file stays behind), then started again: it replaces
    // the stale file; the same protection data refuses a different commitment.
    let SignerProcess { child, _dir: dir, .. } = signer;
    drop(child);
    assert!(socket.exists());
    let mut signer = spawn_signer(dir, &url, TOKEN);
    let remote = ready(&url, &mut signer).await;
    let mut other = commitment(2);
    other.outcome = resolvd_proto::ReexecVerdict::Failed;
    let refused = remote.sign(&domain(), &other, &signer.key, None).await.unwrap_err();
    assert!(matches!(refused, resolvd_node::signer::RemoteError::Refused(_)), "{refused}");

    // A socket in a directory anyone can write to is refused by the daemon.
    let open = tempfile::tempdir().unwrap();
    std::fs::set_permissions(open.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = resolvd_node::signer::RemoteSigner::new(
        &format!("unix://{}/signer.sock", open.path().display()),
        zeroize::Zeroizing::new(TOKEN.into()),
    )
    .unwrap_err();
    assert!(err.to_string().contains("writable by every user"), "{err}");
}
