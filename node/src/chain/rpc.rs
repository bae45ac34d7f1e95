//! The JSON-RPC transport under [`crate::chain::Chain`]: `http://`,
//! `https://`, `ws://` and `wss://` endpoints, failover between several of
//! them, a chain-id check of each, per-endpoint health, and a `newHeads`
//! subscription over WebSocket.
//!
//! TLS is rustls (aws-lc-rs) with the webpki roots plus, optionally, the
//! certificates of a PEM file (`chain.ca_file`, a private CA); the same
//! client configuration serves `https://` (reqwest) and `wss://`
//! (tokio-tungstenite under alloy's pubsub service).
//!
//! Failover ([`Failover`]) is a small tower service rather than alloy's
//! `FallbackLayer`: that layer either races every request over several
//! endpoints at once (N times the load on every endpoint, and a send's
//! "already known" from one node can win the race over another's accept), or,
//! with one active endpoint, keeps sending to the one it ranked first: a new
//! endpoint starts with a score of 0, below a failing endpoint's remembered
//! latency, so it is never tried. Here an endpoint's place is the operator's
//! order in `chain.rpc_urls`; a request goes to the first endpoint that is up
//! and moves on to the next one on a transport error, a timeout or a rate
//! limit (never on other JSON-RPC errors such as a revert, which any endpoint
//! would give alike).
//! A failed endpoint is tried again first once a probe has seen it answer.

use crate::{
    backoff::Backoff,
    config::{ChainConfig, DEFAULT_RPC_URL},
};
use alloy_json_rpc::{RequestPacket, ResponsePacket};
use alloy_primitives::{B256, U64};
use alloy_pubsub::{ConnectionHandle, PubSubConnect, PubSubFrontend};
use alloy_rpc_client::RpcClient;
use alloy_transport::{
    Authorization, BoxTransport, TransportError, TransportErrorKind, TransportFut, TransportResult,
};
use futures::Stream;
use reqwest::Url;
use rustls_pki_types::{pem::PemObject, CertificateDer};
use serde::Serialize;
use std::{
    collections::BTreeMap,
    fmt,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, RwLock, Weak,
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};
use tracing::{debug, error, info, warn};

/// Bound on one JSON-RPC request, connection included: a request to an RPC
/// endpoint that stops answering fails (and is retried by its caller with
/// backoff) instead of stalling the watcher or a submission forever.
pub const RPC_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on opening the TCP connection to the RPC endpoint.
pub const RPC_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Interval of the health probe: an endpoint that served no head within it
/// (a backup, or one that failed) is asked for `eth_blockNumber` (or, until
/// its chain id was checked, `eth_chainId`; or, a WebSocket endpoint that
/// could not connect, connected again).
pub const PROBE_INTERVAL: Duration = Duration::from_secs(5);
/// Bound on one probe request: an endpoint slower than this is down (a
/// WebSocket that is reconnecting holds requests until it is back).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Keep-alive ping of a WebSocket connection (a missed pong drops it).
pub const WS_KEEPALIVE: Duration = Duration::from_secs(10);
/// First delay before a dropped WebSocket connection or head subscription is
/// opened again; it doubles up to [`MAX_BACKOFF`].
pub const MIN_BACKOFF: Duration = Duration::from_secs(1);
/// Longest delay between reconnection attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// A transport setup failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RpcSetupError {
    /// No endpoint configured.
    #[error("no rpc endpoint configured")]
    NoEndpoint,
    /// A URL that does not parse or has an unsupported scheme.
    #[error("rpc url {url}: {reason}")]
    BadUrl {
        /// The URL, without credentials or query.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// `chain.ca_file` cannot be used.
    #[error("chain.ca_file {path}: {reason}")]
    CaFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The TLS or HTTP client could not be built.
    #[error("tls/http client: {0}")]
    Client(String),
}

/// Where the chain is read and written: endpoints in order of preference and
/// the extra certificates trusted for TLS.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RpcOptions {
    /// `http://`, `https://`, `ws://` or `wss://` URLs; the first is preferred.
    pub urls: Vec<String>,
    /// PEM file of CA certificates trusted in addition to the webpki roots.
    pub ca_file: Option<PathBuf>,
}

impl RpcOptions {
    /// One endpoint, the webpki roots only.
    pub fn single(url: &str) -> Self {
        Self { urls: vec![url.to_owned()], ca_file: None }
    }

    /// The endpoints a node's `[chain]` section names: `rpc_urls` if set,
    /// else `rpc_url`, checked (schemes, no duplicates, `rpc_quorum`), with
    /// `ca_file`. Setting `rpc_urls` and changing `rpc_url` from its default
    /// is an error: which one was meant cannot be known. (`--rpc-url` and
    /// `RESOLVD_RPC_URL` replace both.)
    pub fn from_config(chain: &ChainConfig) -> eyre::Result<Self> {
        eyre::ensure!(
            chain.rpc_urls.is_empty() || chain.rpc_url == DEFAULT_RPC_URL,
            "chain.rpc_url and chain.rpc_urls are both set: keep one (rpc_urls for several \
             endpoints)"
        );
        let urls = if chain.rpc_urls.is_empty() {
            vec![chain.rpc_url.clone()]
        } else {
            chain.rpc_urls.clone()
        };
        let options = Self { urls, ca_file: chain.ca_file.clone() };
        options.parse().map_err(|e| eyre::eyre!("chain: {e}"))?;
        chain.quorum(options.urls.len())?;
        Ok(options)
    }

    /// Parses every URL (the schemes above only; no two alike).
    pub fn parse(&self) -> Result<Vec<Url>, RpcSetupError> {
        if self.urls.is_empty() {
            return Err(RpcSetupError::NoEndpoint);
        }
        let mut out: Vec<Url> = Vec::with_capacity(self.urls.len());
        for raw in &self.urls {
            let bad = |reason: String| RpcSetupError::BadUrl { url: redact_str(raw), reason };
            let url = Url::parse(raw).map_err(|e| bad(e.to_string()))?;
            if !matches!(url.scheme(), "http" | "https" | "ws" | "wss") {
                return Err(bad(format!(
                    "scheme {}: expected http, https, ws or wss",
                    url.scheme()
                )));
            }
            if url.host_str().is_none() {
                return Err(bad("no host".into()));
            }
            if out.contains(&url) {
                return Err(bad("listed twice".into()));
            }
            out.push(url);
        }
        Ok(out)
    }
}

impl fmt::Display for RpcOptions {
    /// The endpoints without credentials, paths or queries.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let labels: Vec<String> = self.urls.iter().map(|u| redact_str(u)).collect();
        f.write_str(&labels.join(", "))
    }
}

/// `scheme://host[:port]` of `url`: no credentials, no path (providers put
/// API keys there), no query.
pub fn redact(url: &Url) -> String {
    let host = url.host_str().unwrap_or("?");
    match url.port() {
        Some(port) => format!("{}://{host}:{port}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    }
}

/// [`redact`] of each URL; two that redact alike get `#<position>` (1-based).
fn labels(urls: &[Url]) -> Vec<String> {
    let plain: Vec<String> = urls.iter().map(redact).collect();
    plain
        .iter()
        .enumerate()
        .map(|(i, l)| {
            if plain.iter().filter(|other| *other == l).count() > 1 {
                format!("{l}#{}", i + 1)
            } else {
                l.clone()
            }
        })
        .collect()
}

fn redact_str(raw: &str) -> String {
    Url::parse(raw).map_or_else(|_| "<unparsable url>".to_owned(), |u| redact(&u))
}

/// The rustls client configuration of every endpoint: aws-lc-rs, TLS 1.2 and
/// 1.3, the webpki (Mozilla) roots and the certificates of `ca_file`.
pub fn tls_config(ca_file: Option<&Path>) -> Result<rustls::ClientConfig, RpcSetupError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        let bad = |reason: String| RpcSetupError::CaFile { path: path.to_owned(), reason };
        let certs = CertificateDer::pem_file_iter(path).map_err(|e| bad(e.to_string()))?;
        let mut added = 0usize;
        for cert in certs {
            let cert = cert.map_err(|e| bad(e.to_string()))?;
            roots.add(cert).map_err(|e| bad(e.to_string()))?;
            added += 1;
        }
        if added == 0 {
            return Err(bad("no PEM certificate in the file".into()));
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| RpcSetupError::Client(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// `http(s)` or `ws(s)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EndpointKind {
    /// `http://` or `https://` (reqwest).
    Http,
    /// `ws://` or `wss://` (alloy pubsub; offers head subscriptions).
    Ws,
}

/// One endpoint's health, as `/status` and the metrics show it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EndpointHealth {
    /// `scheme://host[:port]` (no credentials, path or query).
    pub endpoint: String,
    /// `http` or `ws`.
    pub kind: EndpointKind,
    /// Chain id checked and the last request or probe succeeded.
    pub up: bool,
    /// The chain id it reported, once checked.
    pub chain_id: Option<u64>,
    /// Refused for good (it reported another chain id than the others).
    pub refused: bool,
    /// The highest block number it reported.
    pub head: Option<u64>,
    /// Failed requests since its last success.
    pub consecutive_errors: u64,
    /// Requests sent to it (reads, sends and probes; a JSON-RPC batch is one).
    pub requests: u64,
    /// The JSON-RPC calls sent to it, by method (each call of a batch).
    pub calls: BTreeMap<String, u64>,
    /// Failed requests (transport errors and timeouts).
    pub errors: u64,
    /// The last failure, credentials removed.
    pub last_error: Option<String>,
    /// Duration of its last successful request, in milliseconds.
    pub latency_ms: Option<f64>,
    /// Anchor cross-checks in which its answer was not the one the check
    /// decided (it called an anchor final, or another block canonical, that
    /// the other endpoints did not; see [`crate::chain::anchor`]).
    pub disagreements: u64,
    /// The last such disagreement.
    pub last_disagreement: Option<String>,
}

#[derive(Debug, Default)]
struct State {
    chain_id: Option<u64>,
    refused: bool,
    head: Option<u64>,
    head_at: Option<Instant>,
    consecutive_errors: u64,
    requests: u64,
    calls: BTreeMap<String, u64>,
    errors: u64,
    last_error: Option<String>,
    latency: Option<Duration>,
    disagreements: u64,
    last_disagreement: Option<String>,
}

/// One endpoint: its transport (absent while a WebSocket endpoint cannot
/// connect) and its health.
struct Endpoint {
    url: Url,
    label: String,
    kind: EndpointKind,
    local: bool,
    transport: RwLock<Option<(BoxTransport, Option<PubSubFrontend>)>>,
    connector: Option<WsConnector>,
    state: Mutex<State>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint").field("endpoint", &self.label).finish_non_exhaustive()
    }
}

impl Endpoint {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the counters invalid.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn transport(&self) -> Option<BoxTransport> {
        let t = self.transport.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        t.as_ref().map(|(t, _)| t.clone())
    }

    fn pubsub(&self) -> Option<PubSubFrontend> {
        let t = self.transport.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        t.as_ref().and_then(|(_, p)| p.clone())
    }

    /// Usable for requests: chain id checked and not refused.
    fn verified(&self) -> bool {
        let s = self.state();
        s.chain_id.is_some() && !s.refused
    }

    fn up(&self) -> bool {
        let s = self.state();
        s.chain_id.is_some() && !s.refused && s.consecutive_errors == 0
    }

    /// `e` and its sources (where TLS and connection causes are) as text,
    /// without the URL's credentials, path or query.
    fn describe(&self, e: &(dyn std::error::Error + 'static)) -> String {
        let mut text = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            let more = s.to_string();
            if !text.contains(&more) {
                text.push_str(": ");
                text.push_str(&more);
            }
            source = s.source();
        }
        self.scrub(&text)
    }

    /// Error text without the URL's credentials, path or query.
    fn scrub(&self, text: &str) -> String {
        let full = self.url.as_str();
        let mut out = text.replace(full, &self.label);
        if let Some(bare) = full.strip_suffix('/') {
            out = out.replace(bare, &self.label);
        }
        out
    }

    fn record_ok(&self, latency: Duration, head: Option<u64>) {
        let mut s = self.state();
        s.requests += 1;
        s.consecutive_errors = 0;
        s.latency = Some(latency);
        if let Some(h) = head {
            s.head = Some(s.head.map_or(h, |old| old.max(h)));
            s.head_at = Some(Instant::now());
        }
    }

    fn record_err(&self, error: String) {
        let mut s = self.state();
        s.requests += 1;
        s.errors += 1;
        s.consecutive_errors += 1;
        s.last_error = Some(error);
    }

    fn record_disagreement(&self, text: String) {
        let mut s = self.state();
        s.disagreements += 1;
        s.last_disagreement = Some(text);
    }

    fn record_head(&self, head: u64) {
        let mut s = self.state();
        s.head = Some(s.head.map_or(head, |old| old.max(head)));
        s.head_at = Some(Instant::now());
    }

    /// Sends `req`, bounded by `limit`, and records the outcome.
    async fn call(&self, req: RequestPacket, limit: Duration) -> TransportResult<ResponsePacket> {
        let Some(mut transport) = self.transport() else {
            let e = "not connected".to_owned();
            self.record_err(e.clone());
            return Err(TransportErrorKind::custom_str(&e));
        };
        let block_number =
            matches!(&req, RequestPacket::Single(r) if r.method() == "eth_blockNumber");
        {
            // The node's own methods only: a bounded set of names.
            let mut s = self.state();
            for method in req.method_names() {
                match s.calls.get_mut(method) {
                    Some(n) => *n += 1,
                    None => {
                        s.calls.insert(method.to_owned(), 1);
                    }
                }
            }
        }
        let started = Instant::now();
        let result = tokio::time::timeout(limit, tower::Service::call(&mut transport, req)).await;
        match result {
            Ok(Ok(response)) => {
                let head = if block_number { head_of(&response) } else { None };
                self.record_ok(started.elapsed(), head);
                Ok(response)
            }
            Ok(Err(e)) => {
                self.record_err(self.describe(&e));
                Err(e)
            }
            Err(_) => {
                let text = format!("timed out after {limit:?}");
                self.record_err(text.clone());
                Err(TransportErrorKind::custom_str(&text))
            }
        }
    }

    /// This endpoint alone, each request bounded by `limit` (the start-up
    /// check, the probes, the head subscription).
    ///
    /// Its request ids come from a block of its own in `[2^52, 2^53)`:
    /// alloy's pubsub service keys a connection's in-flight requests by id,
    /// and the provider's client (numbering from 0) and these share one
    /// WebSocket. Two requests in flight with one id would get each other's
    /// answers (or none: a re-subscription after a reconnect was lost that
    /// way). Below 2^53 because JavaScript servers (Hardhat) parse ids as
    /// doubles and echo them rounded: an id above 2^53 comes back as another
    /// number and its answer matches no request.
    fn client(self: &Arc<Self>, limit: Duration) -> RpcClient {
        let inner = alloy_rpc_client::RpcClientInner::new(Single(self.clone(), limit), self.local);
        RpcClient::from_inner(inner.with_id(next_id_block()))
    }

    fn health(&self) -> EndpointHealth {
        let s = self.state();
        EndpointHealth {
            endpoint: self.label.clone(),
            kind: self.kind,
            up: s.chain_id.is_some() && !s.refused && s.consecutive_errors == 0,
            chain_id: s.chain_id,
            refused: s.refused,
            head: s.head,
            consecutive_errors: s.consecutive_errors,
            requests: s.requests,
            calls: s.calls.clone(),
            errors: s.errors,
            last_error: s.last_error.clone(),
            latency_ms: s.latency.map(|d| d.as_secs_f64() * 1_000.0),
            disagreements: s.disagreements,
            last_disagreement: s.last_disagreement.clone(),
        }
    }

    /// Opens the WebSocket connection (alloy's pubsub service, which then
    /// reconnects by itself and re-subscribes); no-op for HTTP or when open.
    async fn ensure_connected(&self) {
        let Some(connector) = &self.connector else { return };
        if self.transport().is_some() {
            return;
        }
        match connector.clone().into_service().await {
            Ok(frontend) => {
                info!(target: "chain", endpoint = %self.label, "websocket connected");
                let boxed = BoxTransport::new(frontend.clone());
                *self.transport.write().unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Some((boxed, Some(frontend)));
            }
            Err(e) => self.record_err(self.describe(&e)),
        }
    }
}

/// First id of [`Endpoint::client`]'s ids: blocks of 2^32 from 2^52, below
/// 2^53 (the largest integer a double holds exactly), starting over at 2^52
/// after 2^20 clients (the ids of a client made that long ago are done). A
/// block of 2^32 ids: a client that lives for the whole run (the anchor
/// cross-check's readers) never runs into the next client's ids.
fn next_id_block() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(FIRST_ID);
    let mut first = FIRST_ID;
    let _ = NEXT.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
        first = id_block_at(n);
        Some(first + ID_BLOCK)
    });
    first
}

const FIRST_ID: u64 = 1 << 52;
const ID_BLOCK: u64 = 1 << 32;

/// The block of ids that starts at `n`, or at [`FIRST_ID`] when that one
/// would pass [`MAX_SAFE_ID`].
fn id_block_at(n: u64) -> u64 {
    if n.saturating_add(ID_BLOCK - 1) > MAX_SAFE_ID {
        FIRST_ID
    } else {
        n
    }
}

/// The largest JSON-RPC request id sent: 2^53 − 1, the largest integer
/// every JSON parser (doubles included) reads back exactly.
pub const MAX_SAFE_ID: u64 = (1 << 53) - 1;

/// The block number of an `eth_blockNumber` answer.
fn head_of(response: &ResponsePacket) -> Option<u64> {
    let ResponsePacket::Single(r) = response else { return None };
    let raw = r.payload.as_success()?;
    serde_json::from_str::<U64>(raw.get()).ok().map(|n| n.to::<u64>())
}

/// Whether a JSON-RPC answer is a rate limit (EIP-1474 `-32005` "limit
/// exceeded", or `429` as some providers code it): an endpoint problem, not
/// an answer another endpoint would repeat.
fn overloaded(response: &ResponsePacket) -> bool {
    let limited = |r: &alloy_json_rpc::Response| {
        r.payload.as_error().is_some_and(|e| e.code == -32005 || e.code == 429)
    };
    match response {
        ResponsePacket::Single(r) => limited(r),
        ResponsePacket::Batch(rs) => rs.iter().any(limited),
    }
}

/// One endpoint as a transport (probes and the chain-id check).
#[derive(Clone, Debug)]
struct Single(Arc<Endpoint>, Duration);

impl tower::Service<RequestPacket> for Single {
    type Response = ResponsePacket;
    type Error = TransportError;
    type Future = TransportFut<'static>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: RequestPacket) -> Self::Future {
        let (endpoint, limit) = (self.0.clone(), self.1);
        Box::pin(async move { endpoint.call(req, limit).await })
    }
}

/// Every endpoint in order of preference: the transport of the node's
/// provider (see the module documentation for the order it tries them in).
#[derive(Clone, Debug)]
pub struct Failover {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    endpoints: Vec<Arc<Endpoint>>,
    chain_id: u64,
}

impl Inner {
    /// Verified endpoints: the ones up first, then the failing ones, each
    /// group in configuration order.
    fn order(&self) -> Vec<Arc<Endpoint>> {
        let (mut up, down): (Vec<_>, Vec<_>) =
            self.endpoints.iter().filter(|e| e.verified()).cloned().partition(|e| e.up());
        up.extend(down);
        up
    }
}

impl tower::Service<RequestPacket> for Failover {
    type Response = ResponsePacket;
    type Error = TransportError;
    type Future = TransportFut<'static>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: RequestPacket) -> Self::Future {
        let inner = self.inner.clone();
        Box::pin(async move {
            let order = inner.order();
            let mut last = None;
            let count = order.len();
            for (i, endpoint) in order.into_iter().enumerate() {
                match endpoint.call(req.clone(), RPC_TIMEOUT).await {
                    Ok(response) if i + 1 < count && overloaded(&response) => {
                        let text = "answered \"limit exceeded\" (-32005 / 429)".to_owned();
                        warn!(target: "chain", endpoint = %endpoint.label, error = %text, "rpc endpoint failed, trying the next one");
                        endpoint.record_err(text);
                    }
                    Ok(response) => return Ok(response),
                    Err(e) => {
                        if i + 1 < count {
                            warn!(
                                target: "chain",
                                endpoint = %endpoint.label,
                                error = %endpoint.describe(&e),
                                "rpc endpoint failed, trying the next one"
                            );
                        }
                        last = Some(e);
                    }
                }
            }
            Err(last.unwrap_or_else(|| {
                TransportErrorKind::custom_str("no rpc endpoint with a checked chain id")
            }))
        })
    }
}

/// A chain-id disagreement or an unreachable set of endpoints at start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// Bad configuration.
    #[error(transparent)]
    Setup(#[from] RpcSetupError),
    /// An endpoint serves another chain than the first one that answered.
    #[error(
        "rpc endpoint {endpoint} reports chain id {chain_id}, but {reference} reports \
         {expected}: every endpoint must serve the same chain; refusing to start"
    )]
    WrongChain {
        /// The endpoint refused.
        endpoint: String,
        /// What it reported.
        chain_id: u64,
        /// The endpoint whose chain id is taken as the chain's.
        reference: String,
        /// The chain id of `reference`.
        expected: u64,
    },
    /// No endpoint answered `eth_chainId`.
    #[error("no rpc endpoint answered: {0}")]
    Unreachable(String),
}

impl Failover {
    /// Builds every endpoint's transport, asks each for its chain id and
    /// starts the health probe. Endpoints that do not answer now are checked
    /// by the probe later (and used only once they report the same chain
    /// id); one that reports another chain id is an error now.
    pub async fn connect(options: &RpcOptions) -> Result<Self, ConnectError> {
        let urls = options.parse()?;
        let tls = tls_config(options.ca_file.as_deref())?;
        let http = reqwest::Client::builder()
            .timeout(RPC_TIMEOUT)
            .connect_timeout(RPC_CONNECT_TIMEOUT)
            .tls_backend_preconfigured(tls.clone())
            .build()
            .map_err(|e| RpcSetupError::Client(e.to_string()))?;
        let tls = Arc::new(tls);
        let labels = labels(&urls);
        let mut endpoints = Vec::with_capacity(urls.len());
        for (url, label) in urls.into_iter().zip(labels) {
            let local = alloy_transport::utils::guess_local_url(url.as_str());
            let (kind, transport, connector) = match url.scheme() {
                "http" | "https" => {
                    let t = alloy_transport_http::Http::with_client(http.clone(), url.clone());
                    (EndpointKind::Http, Some((BoxTransport::new(t), None)), None)
                }
                _ => (EndpointKind::Ws, None, Some(WsConnector::new(&url, tls.clone()))),
            };
            endpoints.push(Arc::new(Endpoint {
                url,
                label,
                kind,
                local,
                transport: RwLock::new(transport),
                connector,
                state: Mutex::new(State::default()),
            }));
        }
        let answers = futures::future::join_all(endpoints.iter().map(|e| async move {
            e.ensure_connected().await;
            e.client(RPC_CONNECT_TIMEOUT).request_noparams::<U64>("eth_chainId").await
        }))
        .await;
        let mut reference: Option<(usize, u64)> = None;
        let mut failures = Vec::new();
        for (i, answer) in answers.into_iter().enumerate() {
            let endpoint = &endpoints[i];
            let id = match answer {
                Ok(id) => id.to::<u64>(),
                Err(e) => {
                    let text = endpoint.describe(&e);
                    warn!(target: "chain", endpoint = %endpoint.label, error = %text, "rpc endpoint did not answer eth_chainId; checked again later");
                    failures.push(format!("{}: {text}", endpoint.label));
                    continue;
                }
            };
            match reference {
                None => reference = Some((i, id)),
                Some((r, expected)) if expected != id => {
                    return Err(ConnectError::WrongChain {
                        endpoint: endpoint.label.clone(),
                        chain_id: id,
                        reference: endpoints[r].label.clone(),
                        expected,
                    });
                }
                Some(_) => {}
            }
            endpoint.state().chain_id = Some(id);
        }
        let Some((_, chain_id)) = reference else {
            return Err(ConnectError::Unreachable(failures.join("; ")));
        };
        let inner = Arc::new(Inner { endpoints, chain_id });
        tokio::spawn(probe(Arc::downgrade(&inner)));
        Ok(Self { inner })
    }

    /// The chain id every verified endpoint reported.
    pub fn chain_id(&self) -> u64 {
        self.inner.chain_id
    }

    /// Whether every endpoint is on this machine (alloy then polls receipts
    /// every 250 ms instead of 7 s).
    pub fn is_local(&self) -> bool {
        self.inner.endpoints.iter().all(|e| e.local)
    }

    /// The provider's RPC client over this transport; request ids from 0
    /// (see [`Endpoint::client`]), so make one per transport.
    pub(crate) fn client(&self) -> RpcClient {
        RpcClient::new(self.clone(), self.is_local())
    }

    /// Every endpoint's health, in configuration order.
    pub fn endpoints(&self) -> Vec<EndpointHealth> {
        self.inner.endpoints.iter().map(|e| e.health()).collect()
    }

    /// Every endpoint on its own, in configuration order (see
    /// [`EndpointReader`]).
    pub fn readers(&self) -> Vec<EndpointReader> {
        use alloy_provider::Provider;
        self.inner
            .endpoints
            .iter()
            .map(|e| EndpointReader {
                endpoint: e.clone(),
                provider: alloy_provider::ProviderBuilder::new()
                    .connect_client(e.client(RPC_TIMEOUT))
                    .erased(),
            })
            .collect()
    }

    /// Whether any endpoint is a WebSocket.
    pub fn has_ws(&self) -> bool {
        self.inner.endpoints.iter().any(|e| e.kind == EndpointKind::Ws)
    }

    /// Block numbers of new heads from a `newHeads` subscription on the first
    /// WebSocket endpoint that is up (see [`crate::chain::Chain::subscribe_heads`]).
    /// `None` without a WebSocket endpoint.
    pub fn subscribe_heads(&self) -> Option<impl Stream<Item = u64> + Send + Unpin + 'static> {
        if !self.has_ws() {
            return None;
        }
        let (tx, rx) = tokio::sync::watch::channel(0u64);
        tokio::spawn(heads(Arc::downgrade(&self.inner), tx));
        Some(Box::pin(futures::stream::unfold(rx, |mut rx| async move {
            rx.changed().await.ok()?;
            let head = *rx.borrow_and_update();
            Some((head, rx))
        })))
    }
}

/// One endpoint read on its own, not through the failover: the anchor
/// cross-check ([`crate::chain::anchor`]) asks every endpoint and records on each
/// one whose answer it did not follow.
#[derive(Clone)]
pub struct EndpointReader {
    endpoint: Arc<Endpoint>,
    provider: alloy_provider::DynProvider,
}

impl fmt::Debug for EndpointReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EndpointReader").field("endpoint", &self.endpoint.label).finish()
    }
}

impl EndpointReader {
    /// `scheme://host[:port]`, as in [`EndpointHealth::endpoint`].
    pub fn label(&self) -> &str {
        &self.endpoint.label
    }

    /// Its chain id was checked and it was not refused.
    pub fn usable(&self) -> bool {
        self.endpoint.verified()
    }

    /// Usable and its last request or probe succeeded.
    pub fn up(&self) -> bool {
        self.endpoint.up()
    }

    /// A provider over this endpoint alone (requests bounded by the RPC
    /// timeout; counted in its health).
    pub fn provider(&self) -> &alloy_provider::DynProvider {
        &self.provider
    }

    /// Records that its answer was not followed (`/status`, the metrics).
    pub fn disagreed(&self, what: String) {
        self.endpoint.record_disagreement(what);
    }
}

/// Probes every endpoint that has not shown a head within [`PROBE_INTERVAL`]
/// until the transport is dropped.
async fn probe(inner: Weak<Inner>) {
    let mut tick = tokio::time::interval(PROBE_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let checks = inner.endpoints.iter().map(|e| probe_one(e, inner.chain_id));
        futures::future::join_all(checks).await;
    }
}

async fn probe_one(endpoint: &Arc<Endpoint>, chain_id: u64) {
    let (checked, refused, fresh) = {
        let s = endpoint.state();
        let fresh =
            s.consecutive_errors == 0 && s.head_at.is_some_and(|t| t.elapsed() < PROBE_INTERVAL);
        (s.chain_id.is_some(), s.refused, fresh)
    };
    if refused || fresh {
        return;
    }
    endpoint.ensure_connected().await;
    let client = endpoint.client(PROBE_TIMEOUT);
    if !checked {
        let Ok(id) = client.request_noparams::<U64>("eth_chainId").await else { return };
        let id = id.to::<u64>();
        let mut s = endpoint.state();
        if id == chain_id {
            s.chain_id = Some(id);
            info!(target: "chain", endpoint = %endpoint.label, chain_id, "rpc endpoint checked and in use");
        } else {
            s.refused = true;
            s.last_error = Some(format!("reports chain id {id}, expected {chain_id}"));
            error!(target: "chain", endpoint = %endpoint.label, reported = id, expected = chain_id, "rpc endpoint serves another chain: refused");
            return;
        }
    }
    if let Err(e) = client.request_noparams::<U64>("eth_blockNumber").await {
        debug!(target: "chain", endpoint = %endpoint.label, error = %endpoint.describe(&e), "probe failed");
    }
}

/// Feeds `tx` with new heads until its receiver is dropped: subscribes on the
/// first WebSocket endpoint that is up (else any WebSocket endpoint) and,
/// when a subscription cannot be made or ends, waits (doubling from
/// [`MIN_BACKOFF`] to [`MAX_BACKOFF`]) and subscribes again.
async fn heads(inner: Weak<Inner>, tx: tokio::sync::watch::Sender<u64>) {
    use futures::StreamExt;
    let mut backoff = Backoff::new(MIN_BACKOFF, MAX_BACKOFF);
    loop {
        let endpoint = {
            let Some(inner) = inner.upgrade() else { return };
            let ws: Vec<Arc<Endpoint>> = inner
                .order()
                .into_iter()
                .filter(|e| e.kind == EndpointKind::Ws && e.pubsub().is_some())
                .collect();
            ws.into_iter().next()
        };
        if let Some(endpoint) = endpoint {
            if let Some(frontend) = endpoint.pubsub() {
                // As alloy's own `subscribe_blocks`, over this endpoint's client
                // (its request ids): the pubsub service answers `eth_subscribe`
                // with a local subscription id.
                let client = endpoint.client(RPC_TIMEOUT);
                let subscribe = async {
                    let id: B256 = client.request("eth_subscribe", ("newHeads",)).await?;
                    frontend.get_subscription(id).await
                };
                let sub = tokio::select! {
                    sub = subscribe => sub,
                    () = tx.closed() => return,
                };
                match sub {
                    Ok(sub) => {
                        info!(target: "chain", endpoint = %endpoint.label, "subscribed to new heads");
                        let mut stream =
                            sub.into_typed::<alloy_rpc_types_eth::Header>().into_stream();
                        loop {
                            let next = tokio::select! {
                                next = stream.next() => next,
                                () = tx.closed() => return,
                            };
                            let Some(header) = next else { break };
                            backoff.reset();
                            endpoint.record_head(header.number);
                            if tx.send(header.number).is_err() {
                                return;
                            }
                        }
                        warn!(target: "chain", endpoint = %endpoint.label, "head subscription ended; subscribing again");
                    }
                    Err(e) => {
                        warn!(target: "chain", endpoint = %endpoint.label, error = %endpoint.describe(&e), "head subscription failed");
                    }
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(backoff.next_delay()) => {}
            () = tx.closed() => return,
        }
    }
}

/// Opens a WebSocket with our TLS configuration (so `chain.ca_file` applies)
/// and hands it to alloy's WebSocket backend; alloy's pubsub service calls it
/// again, with backoff, whenever the connection drops.
#[derive(Clone)]
struct WsConnector {
    /// The URL without credentials.
    url: Url,
    auth: Option<Authorization>,
    tls: Arc<rustls::ClientConfig>,
    local: bool,
}

impl fmt::Debug for WsConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WsConnector").field("url", &redact(&self.url)).finish_non_exhaustive()
    }
}

impl WsConnector {
    fn new(url: &Url, tls: Arc<rustls::ClientConfig>) -> Self {
        let auth = Authorization::extract_from_url(url);
        let mut bare = url.clone();
        // Only fails for URLs that cannot have credentials, which then have none.
        let _ = bare.set_username("");
        let _ = bare.set_password(None);
        let local = alloy_transport::utils::guess_local_url(url.as_str());
        Self { url: bare, auth, tls, local }
    }
}

impl PubSubConnect for WsConnector {
    fn is_local(&self) -> bool {
        self.local
    }

    async fn connect(&self) -> TransportResult<ConnectionHandle> {
        use tokio_tungstenite::tungstenite::{client::IntoClientRequest, http};
        let mut request =
            self.url.as_str().into_client_request().map_err(TransportErrorKind::custom)?;
        if let Some(auth) = &self.auth {
            let mut value = http::HeaderValue::from_str(&auth.to_string())
                .map_err(TransportErrorKind::custom)?;
            value.set_sensitive(true);
            request.headers_mut().insert(http::header::AUTHORIZATION, value);
        }
        let connector = tokio_tungstenite::Connector::Rustls(self.tls.clone());
        let connecting =
            tokio_tungstenite::connect_async_tls_with_config(request, None, true, Some(connector));
        let (socket, _) = tokio::time::timeout(RPC_CONNECT_TIMEOUT, connecting)
            .await
            .map_err(|_| TransportErrorKind::custom_str("websocket connect timed out"))?
            .map_err(TransportErrorKind::custom)?;
        let (handle, interface) = ConnectionHandle::new();
        alloy_transport_ws::WsBackend::from_socket(socket, interface, WS_KEEPALIVE).spawn();
        // Never give up: the endpoint stays in the list and is skipped while down.
        Ok(handle.with_max_retries(u32::MAX).with_retry_interval(MIN_BACKOFF))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_from_config() {
        let one = crate::config::NodeConfig::from_toml("[chain]\nrpc_url = \"wss://a.example\"\n")
            .unwrap();
        assert_eq!(RpcOptions::from_config(&one.chain).unwrap().urls, ["wss://a.example"]);
        let text = "[chain]\nrpc_urls = [\"https://a.example\", \"wss://b.example\"]\n\
                    ca_file = \"/etc/resolvd/ca.pem\"\n";
        let many = crate::config::NodeConfig::from_toml(text).unwrap();
        let rpc = RpcOptions::from_config(&many.chain).unwrap();
        assert_eq!(rpc.urls, ["https://a.example", "wss://b.example"]);
        assert_eq!(rpc.ca_file.as_deref(), Some(std::path::Path::new("/etc/resolvd/ca.pem")));
        let back = crate::config::NodeConfig::from_toml(&toml::to_string(&many).unwrap()).unwrap();
        assert_eq!(back, many);
        let both = "[chain]\nrpc_url = \"https://a.example\"\nrpc_urls = [\"https://b.example\"]\n";
        let err =
            RpcOptions::from_config(&crate::config::NodeConfig::from_toml(both).unwrap().chain)
                .unwrap_err();
        assert!(err.to_string().contains("both set"), "{err}");
        let two = "[chain]\nrpc_urls = [\"https://a.example\", \"https://b.example\"]\n";
        let two = crate::config::NodeConfig::from_toml(two).unwrap();
        assert_eq!(two.chain.quorum(2).unwrap(), 2);
        assert_eq!(one.chain.quorum(1).unwrap(), 1);
        let mut three = two.clone();
        three.chain.rpc_quorum = Some(3);
        assert!(RpcOptions::from_config(&three.chain)
            .unwrap_err()
            .to_string()
            .contains("rpc_quorum"));
        three.chain.rpc_quorum = Some(0);
        assert!(RpcOptions::from_config(&three.chain).is_err());
        three.chain.rpc_quorum = Some(1);
        assert_eq!(three.chain.quorum(2).unwrap(), 1);
        let bad =
            crate::config::NodeConfig::from_toml("[chain]\nrpc_urls = [\"ftp://x\"]\n").unwrap();
        assert!(RpcOptions::from_config(&bad.chain)
            .unwrap_err()
            .to_string()
            .contains("scheme ftp"));
    }

    #[test]
    fn urls_are_checked_and_redacted() {
        let o = RpcOptions {
            urls: vec![
                "https://user:secret@rpc.example.org/v3/KEY?token=x".into(),
                "wss://rpc.example.org:8546/ws".into(),
            ],
            ca_file: None,
        };
        let urls = o.parse().unwrap();
        assert_eq!(redact(&urls[0]), "https://rpc.example.org");
        assert_eq!(redact(&urls[1]), "wss://rpc.example.org:8546");
        assert_eq!(o.to_string(), "https://rpc.example.org, wss://rpc.example.org:8546");
        assert!(!format!("{o}").contains("secret"));
        for bad in ["ftp://x", "not a url", "http://"] {
            assert!(RpcOptions::single(bad).parse().is_err(), "{bad}");
        }
        let twice =
            RpcOptions { urls: vec!["http://a:1".into(), "http://a:1".into()], ca_file: None };
        assert!(twice.parse().unwrap_err().to_string().contains("twice"));
        assert!(matches!(RpcOptions::default().parse(), Err(RpcSetupError::NoEndpoint)));
        let same_host = RpcOptions {
            urls: vec![
                "https://h.example/v2/KEY1".into(),
                "https://h.example/v2/KEY2".into(),
                "wss://h.example".into(),
            ],
            ca_file: None,
        };
        let labels = labels(&same_host.parse().unwrap());
        assert_eq!(labels, ["https://h.example#1", "https://h.example#2", "wss://h.example"]);
    }

    #[test]
    fn request_ids_stay_below_2_pow_53() {
        let first = next_id_block();
        assert!((FIRST_ID..=MAX_SAFE_ID - (ID_BLOCK - 1)).contains(&first));
        assert_eq!(id_block_at(MAX_SAFE_ID + 1 - ID_BLOCK), MAX_SAFE_ID + 1 - ID_BLOCK);
        assert_eq!(id_block_at(MAX_SAFE_ID + 2 - ID_BLOCK), FIRST_ID);
        assert_eq!(id_block_at(u64::MAX), FIRST_ID);
        // Every id of a block reads back exactly as a double.
        let last = MAX_SAFE_ID;
        assert_eq!(last as f64 as u64, last);
        assert_ne!((last + 2) as f64 as u64, last + 2);
    }

    #[test]
    fn ca_file_must_hold_a_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        assert!(tls_config(Some(&empty)).unwrap_err().to_string().contains("no PEM certificate"));
        assert!(tls_config(Some(&dir.path().join("missing.pem"))).is_err());
        assert!(tls_config(None).is_ok());
    }
}
