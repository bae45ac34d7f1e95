//! The HTTP API (axum): health, status, disputes, content, metrics.
//!
//! | route | |
//! | --- | --- |
//! | `GET /health` | `200 ok` while the event loop publishes status |
//! | `GET /status` | peers (with gossip scores, refreshed every 2 s and when a peer comes or goes), chain head and cursor, epoch, disputes; the snapshot is refreshed every ~250 ms |
//! | `GET /disputes/{dealId}` | one dispute's view (404 if unknown) |
//! | `PUT /content/{hash}?type=<tag>` | stores the body only if it hashes to `hash` under `tag` (201; 400 otherwise). Needs `Authorization: Bearer <api.content_token_file>` when a token is set, and is refused (403) on a non-loopback listener without one; at most `api.max_concurrent_puts` at once (503), body read with a 30 s timeout (408), refused past `api.content_quota_bytes` (507) |
//! | `GET /content/{hash}` | the bytes (`x-resolvd-type-tag` header), 404 if absent; at most `api.max_concurrent_gets` at once (503 beyond), each holding its document until the last byte is handed to the connection; a response not taken within `api.response_timeout_secs` closes the connection |
//! | `GET /metrics` | Prometheus / OpenMetrics text |

pub use crate::http::{accept_loop, ConnectionCut, Limits, Listener};
use crate::{config::ApiConfig, node::Shared, store::StoreError};
use alloy_primitives::B256;
use axum::{
    body::Body,
    extract::{DefaultBodyLimit, Extension, Path, Query, State},
    http::{header, HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
    Json, Router,
};
use std::{sync::Arc, time::Duration};
use tokio::sync::Semaphore;

/// Longest time a `PUT /content` body may take to arrive.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// `GET /content` bodies are sent in chunks of this size.
const RESPONSE_CHUNK: usize = 64 << 10;

/// The write side's limits.
#[derive(Debug)]
pub struct Writes {
    max_len: usize,
    /// `None`: writes need no token (loopback listener only).
    token: Option<String>,
    /// Writes are refused outright (non-loopback listener, no token).
    refused: bool,
    permits: Semaphore,
    quota: u64,
}

impl Writes {
    /// The limits of `cfg` (reads the token file).
    pub fn new(cfg: &ApiConfig) -> eyre::Result<Self> {
        let token = match &cfg.content_token_file {
            Some(path) => {
                let t = std::fs::read_to_string(path)
                    .map_err(|e| eyre::eyre!("api.content_token_file {}: {e}", path.display()))?;
                let t = t.trim().to_owned();
                eyre::ensure!(
                    t.len() >= 16,
                    "api.content_token_file: the token is too short (16+ chars)"
                );
                Some(t)
            }
            None => None,
        };
        Ok(Self {
            max_len: cfg.max_content_len,
            refused: token.is_none() && !cfg.listen.ip().is_loopback(),
            token,
            permits: Semaphore::new(cfg.max_concurrent_puts.max(1)),
            quota: cfg.content_quota_bytes,
        })
    }
}

/// The read side's limits (`GET /content`).
#[derive(Debug)]
pub struct Reads {
    permits: Arc<Semaphore>,
    timeout: Duration,
}

impl Reads {
    /// The limits of `cfg`.
    pub fn new(cfg: &ApiConfig) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(cfg.max_concurrent_gets.max(1))),
            timeout: Duration::from_secs(cfg.response_timeout_secs.max(1)),
        }
    }
}

#[derive(Clone)]
struct Api {
    shared: Arc<Shared>,
    writes: Arc<Writes>,
    reads: Arc<Reads>,
}

/// The router.
pub fn router(shared: Arc<Shared>, writes: Writes, reads: Reads) -> Router {
    let max = writes.max_len;
    Router::new()
        .route("/health", get(|| async { "ok" }))
        .route("/status", get(status))
        .route("/disputes/{deal_id}", get(dispute))
        .route("/content/{hash}", get(get_content).put(put_content))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(max))
        .with_state(Api { shared, writes: Arc::new(writes), reads: Arc::new(reads) })
}

/// Serves the API of `cfg` until `shutdown`.
pub async fn serve(
    shared: Arc<Shared>,
    cfg: ApiConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> eyre::Result<()> {
    let writes = Writes::new(&cfg)?;
    if writes.refused {
        tracing::warn!(target: "api", addr = %cfg.listen, "PUT /content disabled: a non-loopback listener needs api.content_token_file");
    }
    let reads = Reads::new(&cfg);
    let addr = cfg.listen;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| eyre::eyre!("api.listen {addr}: {e}"))?;
    tracing::info!(target: "api", %addr, "HTTP API listening");
    let limits = Limits {
        max_connections: cfg.max_connections,
        header_timeout: Duration::from_secs(cfg.header_timeout_secs.max(1)),
    };
    accept_loop("api", &Listener::Tcp(listener), router(shared, writes, reads), limits, shutdown)
        .await
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({ "error": message.into() }))).into_response()
}

async fn status(State(Api { shared: s, .. }): State<Api>) -> Response {
    let status = s.status.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    Json(status).into_response()
}

fn parse_hash(text: &str) -> Result<B256, Box<Response>> {
    text.parse().map_err(|_| {
        Box::new(error(StatusCode::BAD_REQUEST, format!("not a 32-byte hex hash: {text}")))
    })
}

async fn dispute(
    State(Api { shared: s, .. }): State<Api>,
    Path(deal_id): Path<String>,
) -> Response {
    let deal_id = match parse_hash(&deal_id) {
        Ok(h) => h,
        Err(r) => return *r,
    };
    let status = s.status.read().unwrap_or_else(std::sync::PoisonError::into_inner);
    match status.disputes.get(&deal_id) {
        Some(d) => Json(d.clone()).into_response(),
        None => error(StatusCode::NOT_FOUND, format!("no dispute {deal_id}")),
    }
}

#[derive(serde::Deserialize)]
struct TypeQuery {
    #[serde(rename = "type")]
    type_tag: String,
}

async fn put_content(
    State(Api { shared: s, writes, .. }): State<Api>,
    Path(hash): Path<String>,
    Query(q): Query<TypeQuery>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let hash = match parse_hash(&hash) {
        Ok(h) => h,
        Err(r) => return *r,
    };
    if writes.refused {
        return error(
            StatusCode::FORBIDDEN,
            "PUT /content needs api.content_token_file on a non-loopback listener",
        );
    }
    if let Some(token) = &writes.token {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        // Constant-time: the comparison does not leak the token's prefix.
        let ok = given.is_some_and(|g| {
            g.len() == token.len()
                && g.bytes().zip(token.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
        });
        if !ok {
            tracing::warn!(target: "api", %hash, "PUT /content without a valid token");
            return error(StatusCode::UNAUTHORIZED, "missing or wrong bearer token");
        }
    }
    // The body is read only under a permit: memory is bounded by
    // permits x max_content_len whatever the number of connections.
    let Ok(_permit) = writes.permits.try_acquire() else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "too many uploads at once; retry");
    };
    match s.store.content_bytes() {
        Ok(n) if n >= writes.quota => {
            return error(
                StatusCode::INSUFFICIENT_STORAGE,
                format!("content store over its quota ({n} bytes)"),
            );
        }
        Ok(_) => {}
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
    let body = match tokio::time::timeout(BODY_TIMEOUT, axum::body::to_bytes(body, writes.max_len))
        .await
    {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => return error(StatusCode::PAYLOAD_TOO_LARGE, format!("body: {e}")),
        Err(_) => return error(StatusCode::REQUEST_TIMEOUT, "body not received in time"),
    };
    let store = s.store.clone();
    let tag = q.type_tag.clone();
    let result =
        tokio::task::spawn_blocking(move || store.put_content_expecting(&tag, &body, &hash)).await;
    match result {
        Ok(Ok(())) => {
            let _ = s.content_added.send(hash);
            tracing::info!(target: "api", %hash, type_tag = %q.type_tag, "content stored");
            (StatusCode::CREATED, Json(serde_json::json!({ "hash": hash }))).into_response()
        }
        Ok(Err(e @ (StoreError::HashMismatch { .. } | StoreError::UnknownTypeTag(_)))) => {
            tracing::warn!(target: "api", %hash, error = %e, "content refused");
            error(StatusCode::BAD_REQUEST, e.to_string())
        }
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn get_content(
    State(Api { shared: s, reads, .. }): State<Api>,
    cut: Option<Extension<ConnectionCut>>,
    Path(hash): Path<String>,
) -> Response {
    let hash = match parse_hash(&hash) {
        Ok(h) => h,
        Err(r) => return *r,
    };
    // The document is held only under a permit, released once its last byte
    // is handed to the connection: memory is bounded by permits x 16 MiB
    // however many clients ask and do not read.
    let Ok(permit) = reads.permits.clone().try_acquire_owned() else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "too many downloads at once; retry");
    };
    let store = s.store.clone();
    let found = tokio::task::spawn_blocking(move || store.get_content(&hash)).await;
    match found {
        Ok(Ok(Some((tag, bytes)))) => {
            // A client that does not read within the timeout loses its
            // connection (and the permit with it).
            let (done, finished) = tokio::sync::oneshot::channel::<()>();
            if let Some(Extension(cut)) = cut {
                let timeout = reads.timeout;
                tokio::spawn(async move {
                    if tokio::time::timeout(timeout, finished).await.is_err() {
                        tracing::warn!(target: "api", %hash, ?timeout, "GET /content not read in time: connection closed");
                        cut.cut();
                    }
                });
            }
            let len = bytes.len();
            // Copied chunk by chunk: what the connection still buffers after
            // the last chunk does not keep the whole document alive.
            let body = futures::stream::unfold(
                (bytes, 0usize, permit, done),
                |(bytes, at, permit, done)| async move {
                    if at >= bytes.len() {
                        return None;
                    }
                    let end = (at + RESPONSE_CHUNK).min(bytes.len());
                    let chunk = axum::body::Bytes::copy_from_slice(&bytes[at..end]);
                    Some((Ok::<_, std::convert::Infallible>(chunk), (bytes, end, permit, done)))
                },
            );
            (
                [
                    (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
                    (header::CONTENT_LENGTH, len.to_string()),
                    (header::HeaderName::from_static("x-resolvd-type-tag"), tag),
                ],
                Body::from_stream(body),
            )
                .into_response()
        }
        Ok(Ok(None)) => error(StatusCode::NOT_FOUND, format!("no content {hash}")),
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn metrics(State(Api { shared: s, .. }): State<Api>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
        s.metrics.render(),
    )
        .into_response()
}
