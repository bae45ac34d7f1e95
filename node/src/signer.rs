//! A separate signing process (`resolvd signer`): it holds the BLS keystore
//! and the slashing-protection store and signs `VerdictCommitment` digests,
//! only for the escrow domains it is configured for, over a local HTTP API
//! authenticated by a bearer token, on a Unix socket (`unix:///path`, mode
//! 0660: a port squatter cannot stand in for it) or on TCP. The protection
//! check and its fsync happen here: whatever asks it, the signer never makes
//! two different signatures for one deal.
//!
//! Bounds: [`MAX_CONNECTIONS`] connections, headers within
//! [`HEADER_TIMEOUT`], the token checked before the body is read, bodies of
//! at most [`MAX_BODY`] bytes arriving within [`BODY_TIMEOUT`], tokens of at
//! least [`MIN_TOKEN_LEN`] characters.
//!
//! API (every request needs `Authorization: Bearer <token>`):
//! - `GET /v1/public-key` → `{"publicKey": "0x…48 bytes"}`
//! - `POST /v1/sign` with `{"domain": VerdictDomain, "commitment":
//!   VerdictCommitment, "commit"?: {"epoch", "signerIndex"}}` →
//!   `{"signature": "0x…96 bytes", "commitSignature"?: "0x…96 bytes"}`
//!   (with `commit`, also the commit-reveal commitment to the partial just
//!   signed, under the commitment DST: never a verdict signature); `401`
//!   without a valid token (whatever the body), `413` for a body over
//!   [`MAX_BODY`], `408` for one not received in time, `400` for one that is
//!   not a sign request, `403` for a domain not configured, `409` when slashing
//!   protection refuses (a different commitment was signed for the deal).
//! - `POST /v1/sign-record` with `{"seq", "peerId": "0x…", "addrs": ["0x…"]}`
//!   → `{"signature": "0x…96 bytes"}`: the daemon's member record (its peer
//!   id and addresses, the signer's own key) under the record DST, never a
//!   verdict signature; `400` for a record the wire format refuses (a peer id
//!   or address empty or over 128 bytes, more than 8 addresses) or whose
//!   `seq` (milliseconds) is more than 10 min ahead of the signer's clock.

use crate::{
    http::{accept_loop, Limits, Listener},
    store::{SharedStore, Store},
};
use alloy_primitives::{hex, Address, Bytes, B256};
use axum::{
    body::Body,
    extract::State,
    http::{HeaderMap, StatusCode},
    routing::{get, post},
    Json, Router,
};
use resolvd_consensus::{protection::ProtectedSigner, PublicKey, SecretKey, Signature};
use resolvd_proto::{
    wire::{MemberRecord, WireMessage},
    VerdictCommitment, VerdictDomain,
};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use std::{
    path::{Path, PathBuf},
    time::Duration,
};
use tracing::{info, warn};
use zeroize::Zeroizing;

/// Connections open at once; more are closed on accept.
pub const MAX_CONNECTIONS: usize = 32;
/// Time a connection may take to send a request's headers (also idle).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest request body (a sign request is about 1 KiB of JSON).
pub const MAX_BODY: usize = 4 << 10;
/// Time a request body may take to arrive.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(5);
/// Shortest bearer token accepted (signer and daemon).
pub const MIN_TOKEN_LEN: usize = 16;
/// Largest answer the daemon reads from a signer.
const MAX_ANSWER: usize = 16 << 10;
/// Mode of the signer's Unix socket: its owner and group may connect.
pub const SOCKET_MODE: u32 = 0o660;

/// Refuses a token shorter than [`MIN_TOKEN_LEN`] (`what` names its source).
pub fn check_token(token: &str, what: &str) -> eyre::Result<()> {
    eyre::ensure!(
        token.trim().len() >= MIN_TOKEN_LEN,
        "{what}: the token is too short ({MIN_TOKEN_LEN}+ characters; e.g. `head -c 32 /dev/urandom | base64`)"
    );
    Ok(())
}

/// Where the signer listens: `unix:///path` or `HOST:PORT`.
#[derive(Debug)]
pub struct SignerListener {
    listener: Listener,
    socket: Option<PathBuf>,
    shown: String,
}

impl SignerListener {
    /// Binds `listen`. A Unix socket is created with mode [`SOCKET_MODE`]
    /// (bound under a temporary name, its mode set, then renamed into place,
    /// so it is never reachable with a wider mode); a stale socket file left
    /// by a stopped signer is replaced, a live one is refused.
    pub async fn bind(listen: &str) -> eyre::Result<Self> {
        if let Some(path) = listen.strip_prefix("unix://") {
            let path = PathBuf::from(path);
            eyre::ensure!(path.is_absolute(), "--listen {listen}: expected unix:///absolute/path");
            let listener = bind_unix(&path)?;
            return Ok(Self { listener, shown: listen.to_owned(), socket: Some(path) });
        }
        let addr: std::net::SocketAddr = listen.parse().map_err(|e| {
            eyre::eyre!("--listen {listen}: expected HOST:PORT or unix:///path ({e})")
        })?;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| eyre::eyre!("binding {addr}: {e}"))?;
        if !addr.ip().is_loopback() {
            warn!(target: "signer", %addr, "listening on a non-loopback address: the token and the requests travel unencrypted (prefer unix:///path)");
        }
        let shown = listener.local_addr()?.to_string();
        Ok(Self { listener: Listener::Tcp(listener), socket: None, shown })
    }
}

impl Drop for SignerListener {
    fn drop(&mut self) {
        if let Some(path) = &self.socket {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn bind_unix(path: &Path) -> eyre::Result<Listener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        eyre::ensure!(
            meta.file_type().is_socket(),
            "{} exists and is not a socket",
            path.display()
        );
        eyre::ensure!(
            std::os::unix::net::UnixStream::connect(path).is_err(),
            "{}: another process is listening on it",
            path.display()
        );
        std::fs::remove_file(path)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let listener = tokio::net::UnixListener::bind(&tmp)
        .map_err(|e| eyre::eyre!("binding {}: {e}", tmp.display()))?;
    let placed = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(SOCKET_MODE))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&tmp);
        eyre::bail!("placing the socket at {}: {e}", path.display());
    }
    Ok(Listener::Unix(listener))
}

/// A signing request.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SignRequest {
    /// The escrow's domain.
    pub domain: VerdictDomain,
    /// What to sign.
    pub commitment: VerdictCommitment,
    /// Also sign the commit-reveal commitment to the partial, as this
    /// member of this epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<CommitTo>,
}

/// Whose commitment to sign with the partial ([`SignRequest::commit`]).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommitTo {
    /// The dispute's epoch.
    pub epoch: u64,
    /// The signer's index in it.
    pub signer_index: u32,
}

/// How far ahead of the signer's clock (ms) a member record's seq may be.
pub const MAX_RECORD_SEQ_AHEAD_MS: u64 = 10 * 60 * 1_000;

/// The wall clock in milliseconds since the Unix epoch: what a member
/// record's `seq` follows (0 before the epoch, saturated far after it).
pub(crate) fn wall_clock_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A member record to sign ([`MemberRecord`] without its key and signature).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecordRequest {
    /// The record's counter.
    pub seq: u64,
    /// The daemon's libp2p peer id.
    pub peer_id: Bytes,
    /// Its multiaddresses.
    pub addrs: Vec<Bytes>,
}

impl RecordRequest {
    /// The record `key` signs for this request.
    fn record(&self, key: &PublicKey) -> MemberRecord {
        MemberRecord {
            public_key: key.compress(),
            seq: self.seq,
            peer_id: self.peer_id.to_vec(),
            addrs: self.addrs.iter().map(|a| a.to_vec()).collect(),
            signature: [0; 96],
        }
    }
}

struct Signer {
    token: Zeroizing<String>,
    domains: Vec<(u64, Address)>,
    public_key: PublicKey,
    signer: Mutex<ProtectedSigner<SharedStore>>,
}

/// Compares in time independent of where the strings differ.
fn same_token(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len()
        && given.iter().zip(expected).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

fn authorized(
    s: &Signer,
    headers: &HeaderMap,
) -> Result<(), (StatusCode, Json<serde_json::Value>)> {
    let given = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        Some(t) if same_token(t.as_bytes(), s.token.as_bytes()) => Ok(()),
        _ => {
            warn!(target: "signer", "unauthenticated request refused");
            Err(error(StatusCode::UNAUTHORIZED, "missing or wrong bearer token".into()))
        }
    }
}

fn error(status: StatusCode, message: String) -> (StatusCode, Json<serde_json::Value>) {
    (status, Json(serde_json::json!({ "error": message })))
}

type Reply = Result<Json<serde_json::Value>, (StatusCode, Json<serde_json::Value>)>;

async fn get_public_key(State(s): State<Arc<Signer>>, headers: HeaderMap) -> Reply {
    authorized(&s, &headers)?;
    Ok(Json(serde_json::json!({ "publicKey": hex::encode_prefixed(s.public_key.compress()) })))
}

/// A request's body, within [`MAX_BODY`] and [`BODY_TIMEOUT`].
async fn read_body(body: Body) -> Result<axum::body::Bytes, (StatusCode, Json<serde_json::Value>)> {
    match tokio::time::timeout(BODY_TIMEOUT, axum::body::to_bytes(body, MAX_BODY)).await {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(e)) => Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("body (at most {MAX_BODY} bytes): {e}"),
        )),
        Err(_) => Err(error(StatusCode::REQUEST_TIMEOUT, "body not received in time".into())),
    }
}

/// Signs the daemon's member record: under the record DST, so no protection
/// record is involved (it can never count as a verdict signature).
async fn sign_record(State(s): State<Arc<Signer>>, headers: HeaderMap, body: Body) -> Reply {
    authorized(&s, &headers)?;
    let body = read_body(body).await?;
    let req: RecordRequest = serde_json::from_slice(&body)
        .map_err(|e| error(StatusCode::BAD_REQUEST, format!("not a record request: {e}")))?;
    // A daemon host that holds the token must not pin the key's record: a
    // seq far ahead of the clock would outrank every later record.
    let now_ms = wall_clock_ms();
    if req.seq > now_ms.saturating_add(MAX_RECORD_SEQ_AHEAD_MS) {
        warn!(target: "signer", seq = req.seq, now_ms, "member record seq ahead of the clock: refused");
        return Err(error(
            StatusCode::BAD_REQUEST,
            format!(
                "seq {} is more than 10 min ahead of this signer's clock ({now_ms} ms)",
                req.seq
            ),
        ));
    }
    let record = req.record(&s.public_key);
    // The wire format's bounds, as every peer applies them.
    MemberRecord::decode_wire(&record.encode_wire())
        .map_err(|e| error(StatusCode::BAD_REQUEST, format!("not a valid record: {e}")))?;
    let signer = s.signer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let sig = signer.sign_record(&record.signing_message());
    info!(target: "signer", seq = req.seq, addrs = req.addrs.len(), "signed a member record");
    Ok(Json(serde_json::json!({ "signature": hex::encode_prefixed(sig.compress()) })))
}

async fn sign(State(s): State<Arc<Signer>>, headers: HeaderMap, body: Body) -> Reply {
    // The token first: a stranger's body is never read.
    authorized(&s, &headers)?;
    let body = read_body(body).await?;
    let req: SignRequest = serde_json::from_slice(&body)
        .map_err(|e| error(StatusCode::BAD_REQUEST, format!("not a sign request: {e}")))?;
    let d = &req.domain;
    let allowed = d.name == "resolvd"
        && d.version == "1"
        && s.domains.contains(&(d.chain_id, d.verifying_contract));
    if !allowed {
        warn!(target: "signer", chain_id = d.chain_id, escrow = %d.verifying_contract, "domain not configured: refused");
        return Err(error(
            StatusCode::FORBIDDEN,
            format!("domain {}:{} is not configured (--domain)", d.chain_id, d.verifying_contract),
        ));
    }
    let deal = req.commitment.deal_id;
    // The protection check, its fsync and the signature, under one lock.
    let signed = tokio::task::block_in_place(|| {
        let mut signer = s.signer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let sig = signer.sign(&req.domain, &req.commitment)?;
        // Only a commitment to the partial just signed (under protection).
        let commit = req.commit.map(|c| {
            signer.sign_commit(&commit_message(deal, c.epoch, c.signer_index, &sig.compress()))
        });
        Ok::<_, resolvd_consensus::Error>((sig, commit))
    });
    match signed {
        Ok((sig, commit)) => {
            info!(target: "signer", %deal, escrow = %d.verifying_contract, "signed");
            let mut body = serde_json::json!({ "signature": hex::encode_prefixed(sig.compress()) });
            if let Some(c) = commit {
                body["commitSignature"] = hex::encode_prefixed(c.compress()).into();
            }
            Ok(Json(body))
        }
        Err(e @ resolvd_consensus::Error::SlashingProtection { .. }) => {
            warn!(target: "signer", %deal, error = %e, "slashing protection refused");
            Err(error(StatusCode::CONFLICT, e.to_string()))
        }
        Err(e) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
    }
}

/// Serves the signer on `listener` until `shutdown`.
pub async fn serve(
    listener: SignerListener,
    secret: SecretKey,
    store: Arc<Store>,
    token: Zeroizing<String>,
    domains: Vec<(u64, Address)>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> eyre::Result<()> {
    check_token(&token, "--token-file")?;
    eyre::ensure!(
        !domains.is_empty(),
        "no --domain configured: the signer would refuse everything"
    );
    let public_key = secret.public_key();
    let state = Arc::new(Signer {
        token,
        domains,
        public_key,
        signer: Mutex::new(ProtectedSigner::new(secret, SharedStore(store))),
    });
    let app = Router::new()
        .route("/v1/public-key", get(get_public_key))
        .route("/v1/sign", post(sign))
        .route("/v1/sign-record", post(sign_record))
        .with_state(state);
    info!(target: "signer", addr = %listener.shown, key = %hex::encode_prefixed(public_key.compress()), "signer listening");
    let limits = Limits { max_connections: MAX_CONNECTIONS, header_timeout: HEADER_TIMEOUT };
    // (The socket file is removed when `listener` drops, after the loop.)
    accept_loop("signer", &listener.listener, app, limits, shutdown).await
}

/// Refuses a signer socket whose directory every user may write to.
fn check_socket_dir(path: &Path) -> eyre::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("/"));
    let mode = std::fs::metadata(dir)
        .map_err(|e| eyre::eyre!("signer socket directory {}: {e}", dir.display()))?
        .permissions()
        .mode();
    eyre::ensure!(
        mode & 0o002 == 0,
        "signer socket {}: its directory is writable by every user (mode {:o}); use a directory only the signer's user can write",
        path.display(),
        mode & 0o7777
    );
    Ok(())
}

/// Why a remote signature was not obtained.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// Slashing protection (in the signer) refused: never retried.
    #[error("the signer's slashing protection refused: {0}")]
    Refused(String),
    /// Anything else (unreachable, unauthorised, bad answer): retried.
    #[error("remote signer: {0}")]
    Failed(String),
}

/// The daemon's side of `resolvd run --signer URL`.
#[derive(Clone, Debug)]
pub struct RemoteSigner {
    url: String,
    token: Arc<Zeroizing<String>>,
    client: reqwest::Client,
}

impl RemoteSigner {
    /// A client of the signer at `url`: `unix:///path/to/signer.sock` or
    /// `http://127.0.0.1:9600`. Refuses a token shorter than
    /// [`MIN_TOKEN_LEN`], and a socket in a directory every user may write
    /// to (anyone could put their own socket there while the signer is down).
    pub fn new(url: &str, token: Zeroizing<String>) -> eyre::Result<Self> {
        check_token(&token, "keys.remote_signer_token_file")?;
        let builder = reqwest::Client::builder().timeout(Duration::from_secs(10));
        let (client, url) = match url.strip_prefix("unix://") {
            Some(path) => {
                let path = Path::new(path);
                eyre::ensure!(path.is_absolute(), "signer {url}: expected unix:///absolute/path");
                check_socket_dir(path)?;
                // The host name is not used: every request goes to the socket.
                (builder.unix_socket(path).build()?, "http://signer".to_owned())
            }
            None => {
                let local = reqwest::Url::parse(url).ok().is_some_and(|u| {
                    u.host_str().is_some_and(|h| {
                        h == "localhost"
                            || h.trim_matches(['[', ']'])
                                .parse::<std::net::IpAddr>()
                                .is_ok_and(|ip| ip.is_loopback())
                    })
                });
                if !local {
                    warn!(target: "signer", %url, "remote signer over TCP off this host: the token travels unencrypted (prefer unix:///path)");
                }
                (builder.build()?, url.trim_end_matches('/').to_owned())
            }
        };
        Ok(Self { url, token: Arc::new(token), client })
    }

    async fn call(&self, req: reqwest::RequestBuilder) -> Result<serde_json::Value, RemoteError> {
        let mut resp = req
            .bearer_auth(self.token.as_str())
            .send()
            .await
            .map_err(|e| RemoteError::Failed(e.to_string()))?;
        let status = resp.status();
        // Bounded: whatever answers on the signer's address is not trusted
        // with the daemon's memory.
        let mut bytes = Vec::new();
        while let Some(chunk) =
            resp.chunk().await.map_err(|e| RemoteError::Failed(e.to_string()))?
        {
            if bytes.len() + chunk.len() > MAX_ANSWER {
                return Err(RemoteError::Failed(format!("answer over {MAX_ANSWER} bytes")));
            }
            bytes.extend_from_slice(&chunk);
        }
        let body: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| RemoteError::Failed(e.to_string()))?;
        let message = || body["error"].as_str().unwrap_or("no message").to_owned();
        match status {
            s if s.is_success() => Ok(body),
            StatusCode::CONFLICT => Err(RemoteError::Refused(message())),
            s => Err(RemoteError::Failed(format!("{s}: {}", message()))),
        }
    }

    /// The signer's public key.
    pub async fn public_key(&self) -> Result<PublicKey, RemoteError> {
        let body = self.call(self.client.get(format!("{}/v1/public-key", self.url))).await?;
        let bytes = body["publicKey"]
            .as_str()
            .and_then(|h| hex::decode(h).ok())
            .ok_or_else(|| RemoteError::Failed("no publicKey".into()))?;
        PublicKey::from_compressed(&bytes).map_err(|e| RemoteError::Failed(e.to_string()))
    }

    /// Signs `commitment` under `domain`, and with `commit` (epoch, signer
    /// index) the commit-reveal commitment to the partial; the answers are
    /// checked against `key`.
    pub async fn sign(
        &self,
        domain: &VerdictDomain,
        commitment: &VerdictCommitment,
        key: &PublicKey,
        commit: Option<(u64, u32)>,
    ) -> Result<(Signature, Option<Signature>), RemoteError> {
        let req = SignRequest {
            domain: domain.clone(),
            commitment: *commitment,
            commit: commit.map(|(epoch, signer_index)| CommitTo { epoch, signer_index }),
        };
        let body = self.call(self.client.post(format!("{}/v1/sign", self.url)).json(&req)).await?;
        let sig = signature_in(&body, "signature")?;
        sig.verify(key, &commitment.eip712_digest(domain)).map_err(|e| {
            RemoteError::Failed(format!("the signer's signature does not verify: {e}"))
        })?;
        let Some((epoch, index)) = commit else { return Ok((sig, None)) };
        let c = signature_in(&body, "commitSignature")?;
        let message = commit_message(commitment.deal_id, epoch, index, &sig.compress());
        c.verify_commit(key, &message).map_err(|e| {
            RemoteError::Failed(format!("the signer's commitment signature does not verify: {e}"))
        })?;
        Ok((sig, Some(c)))
    }

    /// Signs `record` (its key must be `key`, the signer's) as a member
    /// record; the answer is checked against `key`.
    pub async fn sign_record(
        &self,
        record: &MemberRecord,
        key: &PublicKey,
    ) -> Result<Signature, RemoteError> {
        let req = RecordRequest {
            seq: record.seq,
            peer_id: record.peer_id.clone().into(),
            addrs: record.addrs.iter().map(|a| a.clone().into()).collect(),
        };
        let url = format!("{}/v1/sign-record", self.url);
        let body = self.call(self.client.post(url).json(&req)).await?;
        let sig = signature_in(&body, "signature")?;
        sig.verify_record(key, &record.signing_message()).map_err(|e| {
            RemoteError::Failed(format!("the signer's record signature does not verify: {e}"))
        })?;
        Ok(sig)
    }
}

/// The signature in field `name` of a signer's answer (not verified yet).
fn signature_in(body: &serde_json::Value, name: &str) -> Result<Signature, RemoteError> {
    let bytes = body[name]
        .as_str()
        .and_then(|h| hex::decode(h).ok())
        .ok_or_else(|| RemoteError::Failed(format!("no {name}")))?;
    Signature::from_compressed(&bytes).map_err(|e| RemoteError::Failed(e.to_string()))
}

/// The message a commitment signature covers ([`resolvd_proto::wire::PartialCommit::message`])
/// for the partial `signature` of `index` in `epoch` for `deal_id`.
pub(crate) fn commit_message(deal_id: B256, epoch: u64, index: u32, signature: &[u8; 96]) -> B256 {
    let commit = resolvd_proto::wire::partial_commit(epoch, index, signature);
    resolvd_proto::wire::PartialCommit::message(&deal_id, epoch, index, &commit)
}
