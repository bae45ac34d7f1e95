//! RPC endpoints that lie, lag or speak another dialect, on real processes:
//! JSON-RPC proxies written here (plain HTTP and WebSocket on 127.0.0.1) in
//! front of anvil rewrite what anvil answers. A node with `[liar, honest]`
//! endpoints signs an anchor only once the honest one finds it final; a
//! backup that lags after a failover is waited for, not taken for a reorg; a
//! broadcast answered "already known" is waited for; WebSocket request ids
//! survive a server that reads them as doubles (JavaScript servers:
//! Hardhat); the devnet funds accounts on a Hardhat-dialect chain and says
//! what it needs on a chain without `setBalance`.

use crate::network::{launch, metric, metric_sum, Net, RELEASED, SETTLE};
use crate::rpc::resolvd_bin;
use alloy_primitives::{keccak256, Address, Bytes, U256};
use alloy_provider::Provider;
use futures::{SinkExt, StreamExt};
use resolvd_devnet::{DealContent, DealKind, Devnet, DevnetOptions};
use resolvd_node::{
    chain::{Chain, PendingTx, TxJournal},
    config::DEFAULT_RPC_URL,
};
use resolvd_proto::{Canonical, EvmAnchorV1, PrestateAnchorV1};
use serde_json::{json, Value};
use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

/// What a [`JsonRpcProxy`] does to the requests it forwards.
#[derive(Clone, Debug, Default)]
struct Mode {
    /// Answer 503 to everything (an endpoint that died).
    down: bool,
    /// `finalized` and `safe` are the latest block (a liar about finality).
    lie_finalized: bool,
    /// Block `.0` has hash `.1` here (a liar about a block).
    forge: Option<(u64, String)>,
    /// The chain ends at this block here (a backup that lags).
    lag_at: Option<u64>,
    /// `eth_sendRawTransaction` is forwarded, then answered "already known".
    already_known: bool,
    /// Hardhat's dialect: `anvil_*` are unknown methods, `hardhat_setBalance`
    /// is anvil's `anvil_setBalance`.
    hardhat: bool,
    /// Neither `anvil_setBalance` nor `hardhat_setBalance` exists.
    no_set_balance: bool,
}

/// A JSON-RPC proxy over HTTP on 127.0.0.1 in front of anvil, rewriting per
/// its [`Mode`] (changeable while it runs).
struct JsonRpcProxy {
    addr: SocketAddr,
    mode: Arc<Mutex<Mode>>,
    task: tokio::task::JoinHandle<()>,
}

struct ProxyState {
    upstream: String,
    client: reqwest::Client,
    mode: Arc<Mutex<Mode>>,
}

impl JsonRpcProxy {
    async fn start(upstream: &str, mode: Mode) -> Self {
        let mode = Arc::new(Mutex::new(mode));
        let state = Arc::new(ProxyState {
            upstream: upstream.to_owned(),
            client: reqwest::Client::new(),
            mode: mode.clone(),
        });
        let app = axum::Router::new().route("/", axum::routing::post(proxy_http)).with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, mode, task }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.addr.port())
    }

    fn set(&self, change: impl FnOnce(&mut Mode)) {
        change(&mut self.mode.lock().unwrap());
    }
}

impl Drop for JsonRpcProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn proxy_http(
    axum::extract::State(state): axum::extract::State<Arc<ProxyState>>,
    body: axum::body::Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let mode = state.mode.lock().unwrap().clone();
    if mode.down {
        return axum::http::StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return axum::http::StatusCode::BAD_REQUEST.into_response();
    };
    let answer = match request {
        Value::Array(batch) => {
            let mut out = Vec::with_capacity(batch.len());
            for r in batch {
                out.push(handle(&state, &mode, r).await);
            }
            Value::Array(out)
        }
        single => handle(&state, &mode, single).await,
    };
    axum::Json(answer).into_response()
}

async fn forward(state: &ProxyState, request: &Value) -> Value {
    let sent = state.client.post(&state.upstream).json(request).send().await;
    match sent {
        Ok(r) => r.json().await.unwrap_or_else(|e| error_answer(request, -32603, &e.to_string())),
        Err(e) => error_answer(request, -32603, &e.to_string()),
    }
}

fn error_answer(request: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": code, "message": message}})
}

fn result_answer(request: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": request["id"], "result": result})
}

fn hex(n: u64) -> Value {
    Value::String(format!("{n:#x}"))
}

fn number_of(block: &Value) -> Option<u64> {
    u64::from_str_radix(block["number"].as_str()?.trim_start_matches("0x"), 16).ok()
}

async fn handle(state: &ProxyState, mode: &Mode, mut request: Value) -> Value {
    let method = request["method"].as_str().unwrap_or_default().to_owned();
    if method == "anvil_setBalance" && (mode.hardhat || mode.no_set_balance)
        || method == "hardhat_setBalance" && mode.no_set_balance
        || method.starts_with("anvil_") && mode.hardhat
    {
        return error_answer(&request, -32601, &format!("Method {method} is not supported"));
    }
    if method == "hardhat_setBalance" && mode.hardhat {
        request["method"] = "anvil_setBalance".into();
        let answer = forward(state, &request).await;
        return match answer.get("error") {
            Some(_) => answer,
            None => result_answer(&request, Value::Bool(true)),
        };
    }
    match (method.as_str(), mode.lag_at) {
        ("eth_blockNumber", Some(at)) => return result_answer(&request, hex(at)),
        ("eth_getBlockByNumber", Some(at)) => {
            let tag = request["params"][0].as_str().unwrap_or_default().to_owned();
            match tag.as_str() {
                "latest" | "pending" => request["params"][0] = hex(at),
                "safe" | "finalized" | "earliest" => {
                    let answer = forward(state, &request).await;
                    if number_of(&answer["result"]).is_none_or(|n| n <= at) {
                        return answer;
                    }
                    request["params"][0] = hex(at);
                }
                number => {
                    let n = u64::from_str_radix(number.trim_start_matches("0x"), 16).unwrap_or(0);
                    if n > at {
                        return result_answer(&request, Value::Null);
                    }
                }
            }
        }
        _ => {}
    }
    if mode.lie_finalized && method == "eth_getBlockByNumber" {
        if let Some("safe" | "finalized") = request["params"][0].as_str() {
            request["params"][0] = "latest".into();
        }
    }
    let mut answer = forward(state, &request).await;
    if let Some((number, hash)) = &mode.forge {
        if method == "eth_getBlockByNumber" && number_of(&answer["result"]) == Some(*number) {
            answer["result"]["hash"] = hash.clone().into();
        }
    }
    if mode.already_known && method == "eth_sendRawTransaction" && answer.get("error").is_none() {
        return error_answer(&request, -32000, "already known");
    }
    answer
}

/// A WebSocket JSON-RPC proxy on 127.0.0.1 in front of anvil that reads each
/// request's id as a double, as a JavaScript server does: anvil then echoes
/// the id rounded to the nearest double.
struct DoubleIdProxy {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl DoubleIdProxy {
    async fn start(upstream: String) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let Ok(client) = tokio_tungstenite::accept_async(tcp).await else { return };
                    let Ok((server, _)) = tokio_tungstenite::connect_async(upstream.as_str()).await
                    else {
                        return;
                    };
                    let (mut to_client, mut from_client) = client.split();
                    let (mut to_server, mut from_server) = server.split();
                    let up = async {
                        while let Some(Ok(msg)) = from_client.next().await {
                            let msg = match msg {
                                tokio_tungstenite::tungstenite::Message::Text(t) => {
                                    tokio_tungstenite::tungstenite::Message::text(ids_as_doubles(
                                        t.as_str(),
                                    ))
                                }
                                other => other,
                            };
                            if to_server.send(msg).await.is_err() {
                                break;
                            }
                        }
                    };
                    let down = async {
                        while let Some(Ok(msg)) = from_server.next().await {
                            if to_client.send(msg).await.is_err() {
                                break;
                            }
                        }
                    };
                    tokio::select! {
                        () = up => {}
                        () = down => {}
                    }
                });
            }
        });
        Self { addr, task }
    }

    fn url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.addr.port())
    }
}

impl Drop for DoubleIdProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Every numeric `id` of a request (or batch) read as a double and written
/// back as JavaScript prints it (`JSON.stringify(JSON.parse(id))`: the
/// shortest digits that read back as that double, then zeros; 2^62 is
/// `4611686018427388000`). Rust's `Display` of an `f64` prints alike.
fn ids_as_doubles(text: &str) -> String {
    fn fix(v: &mut Value) {
        if let Some(id) = v.get("id").and_then(Value::as_f64) {
            let printed = format!("{id}");
            if let Ok(n) = printed.parse::<u64>() {
                v["id"] = Value::from(n);
            }
        }
    }
    let Ok(mut v) = serde_json::from_str::<Value>(text) else { return text.to_owned() };
    match &mut v {
        Value::Array(batch) => batch.iter_mut().for_each(fix),
        single => fix(single),
    }
    v.to_string()
}

/// A transaction journal in memory that remembers whether it ever held an
/// entry.
#[derive(Debug, Default)]
struct MemJournal {
    entries: Mutex<HashMap<String, PendingTx>>,
    saved: Mutex<u32>,
}

impl TxJournal for MemJournal {
    fn load(&self, key: &str) -> Result<Option<PendingTx>, String> {
        Ok(self.entries.lock().unwrap().get(key).cloned())
    }

    fn save(&self, key: &str, tx: &PendingTx) -> Result<(), String> {
        *self.saved.lock().unwrap() += 1;
        self.entries.lock().unwrap().insert(key.to_owned(), tx.clone());
        Ok(())
    }

    fn clear(&self, key: &str) -> Result<(), String> {
        self.entries.lock().unwrap().remove(key);
        Ok(())
    }
}

/// anvil with the contracts and one registered resolver, and no node
/// running.
async fn chain_only() -> Net {
    let options = DevnetOptions::for_workspace(
        &crate::network::workspace(),
        resolvd_bin(),
        std::env::temp_dir().join("resolvd-it"),
    );
    Net(Devnet::provision(DevnetOptions { nodes: 1, ..options }).await.expect("devnet"))
}

/// A devnet of one resolver (a quorum of one) and no restart yet.
async fn one_node(tweak: impl FnOnce(&mut DevnetOptions)) -> Net {
    launch(|o| {
        o.nodes = 1;
        o.bin = resolvd_bin();
        tweak(o);
    })
    .await
}

/// Restarts node 0 with `urls` as `chain.rpc_urls` (default quorum).
async fn restart_with(net: &mut Net, urls: Vec<String>) {
    let node = &mut net.0.nodes[0];
    node.stop();
    node.config.chain.rpc_url = DEFAULT_RPC_URL.into();
    node.config.chain.rpc_urls = urls;
    net.0.start_node(0).unwrap();
    net.0.nodes[0].wait_healthy(Duration::from_secs(90)).await.unwrap();
}

async fn finalized(net: &Net) -> u64 {
    net.0
        .provider
        .get_block_by_number(alloy_rpc_types_eth::BlockNumberOrTag::Finalized)
        .await
        .unwrap()
        .unwrap()
        .header
        .number
}

/// `content` anchored on a header of the same height with other extra data:
/// a valid header hash and the real state root, not a block of the chain.
fn forged(mut content: DealContent) -> DealContent {
    let real = content.evm_anchor.header.clone().expect("the anchor carries its header");
    let mut header: alloy_consensus::Header =
        alloy_rlp::Decodable::decode(&mut real.as_ref()).unwrap();
    header.extra_data = Bytes::from_static(b"forged");
    let rlp = alloy_rlp::encode(&header);
    let forged = EvmAnchorV1 {
        block_hash: keccak256(&rlp),
        header: Some(rlp.into()),
        ..content.evm_anchor.clone()
    };
    content.anchor = PrestateAnchorV1 {
        backend_id: content.anchor.backend_id,
        body: forged.to_canonical_bytes().into(),
    };
    content.spec.prestate_anchor = content.anchor.clone();
    content.evm_anchor = forged;
    content
}

/// `rpc_urls = [liar, honest]`: the liar calls the latest block finalized
/// (anvil's real `finalized` trails by about 10 blocks here) and gives one
/// block the hash of a forged header. The node must not sign an anchor before
/// the honest endpoint finds it final, must never sign the forged one, and
/// shows the liar's claims it did not follow in `/status` and the metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lying_first_endpoint_does_not_decide_an_anchor_final() {
    let mut net = one_node(|o| o.finality_slots = 5).await;
    let liar =
        JsonRpcProxy::start(&net.0.rpc_url, Mode { lie_finalized: true, ..Mode::default() }).await;
    let honest = net.0.rpc_url.clone();
    restart_with(&mut net, vec![liar.url(), honest.clone()]).await;

    // A forged anchor the liar vouches for.
    let head = net.0.provider.get_block_number().await.unwrap();
    let fake = forged(net.0.deal_content_at(DealKind::Honest, head).await.unwrap());
    let fake_block = fake.evm_anchor.block_number;
    let fake_hash = format!("{:#x}", fake.evm_anchor.block_hash);
    liar.set(|m| m.forge = Some((fake_block, fake_hash)));
    let bad = net.0.open_dispute(&fake, &[0]).await.unwrap();

    // An honest anchor ahead of the real finalized block.
    while net.0.provider.get_block_number().await.unwrap() <= head {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let head = net.0.provider.get_block_number().await.unwrap();
    let content = net.0.deal_content_at(DealKind::Honest, head).await.unwrap();
    let anchor_block = content.evm_anchor.block_number;
    assert!(anchor_block > finalized(&net).await, "the anchor starts ahead of finalized");
    let open = net.0.open_dispute(&content, &[0]).await.unwrap();
    let path = format!("/disputes/{}", open.deal_id);
    let deadline = Instant::now() + SETTLE;
    let mut waited = false;
    loop {
        assert!(Instant::now() < deadline, "never signed");
        let Ok(v) = net.0.nodes[0].get(&path).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        if v["own_signature"].is_null() {
            waited |= v["anchor"]["status"] == "not_final";
        } else {
            let real = finalized(&net).await;
            assert!(
                anchor_block <= real,
                "signed anchor block {anchor_block} while the honest endpoint's finalized block is {real}"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(waited, "the node never reported waiting for finality");
    assert_eq!(net.0.wait_settled(open.deal_id, SETTLE).await.unwrap().settlement, RELEASED);

    // Long past the forged block's finality: never signed, never replayed.
    assert!(finalized(&net).await >= fake_block);
    let v = net.0.nodes[0].get(&format!("/disputes/{}", bad.deal_id)).await.unwrap();
    assert!(v["own_signature"].is_null(), "signed a forged anchor: {v}");
    assert!(v["commitment"].is_null(), "replayed a forged anchor: {v}");
    assert_ne!(v["anchor"]["status"], "final", "{v}");

    let status = net.0.nodes[0].get("/status").await.unwrap();
    let endpoints = &status["rpc_endpoints"];
    assert!(endpoints[0]["disagreements"].as_u64() > Some(0), "{endpoints}");
    assert!(endpoints[0]["last_disagreement"].as_str().is_some_and(|t| t.contains("final")));
    let text = net.0.nodes[0].metrics().await.unwrap();
    let label = format!("endpoint=\"{}\"", liar.url());
    let counted = metric(&text, "resolvd_rpc_endpoint_disagreements_total", &label);
    assert!(counted > 0.0, "{counted}");
    #[allow(clippy::disallowed_macros)]
    {
        eprintln!(
            "rpc_trust: anchor block {anchor_block}: the liar's claims not followed {}; last: {}",
            endpoints[0]["disagreements"], endpoints[0]["last_disagreement"]
        );
    }
}

/// `rpc_urls = [primary, backup]`; the backup stops at block L; a dispute
/// challenged and settled above L; then the primary dies. The backup has no
/// block at the heights the node handled: the node waits for it (logged),
/// reports no reorg, and the settled dispute stays settled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_backup_after_failover_is_unknown_not_a_reorg() {
    let mut net = one_node(|_| {}).await;
    let primary = JsonRpcProxy::start(&net.0.rpc_url, Mode::default()).await;
    let backup = JsonRpcProxy::start(&net.0.rpc_url, Mode::default()).await;
    restart_with(&mut net, vec![primary.url(), backup.url()]).await;

    // Anchored at a block both will call final.
    let content = net.0.deal_content(DealKind::Honest).await.unwrap();
    let lag_at = net.0.provider.get_block_number().await.unwrap();
    assert!(content.evm_anchor.block_number <= lag_at);
    backup.set(|m| m.lag_at = Some(lag_at));
    let open = net.0.open_dispute(&content, &[0]).await.unwrap();
    assert!(open.block > lag_at);
    assert_eq!(net.0.wait_settled(open.deal_id, SETTLE).await.unwrap().settlement, RELEASED);
    let path = format!("/disputes/{}", open.deal_id);
    let node = &net.0.nodes[0];
    let deadline = Instant::now() + Duration::from_secs(30);
    while node.get(&path).await.ok().is_none_or(|v| v["phase"] != "settled") {
        assert!(Instant::now() < deadline, "the node never saw the settlement");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    primary.set(|m| m.down = true);
    let log = node.log_path();
    let deadline = Instant::now() + Duration::from_secs(30);
    let line = "the rpc endpoint is behind the blocks already handled";
    while !std::fs::read_to_string(&log).unwrap().contains(line) {
        assert_eq!(metric_sum(&net.0, "resolvd_reorgs_total", "").await, 0.0, "a reorg");
        assert!(Instant::now() < deadline, "{}", node.log_tail(30));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A few more rounds of the watcher on the lagging backup.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(metric_sum(&net.0, "resolvd_reorgs_total", "").await, 0.0, "a reorg");
    let v = node.get(&path).await.unwrap();
    assert_eq!(v["phase"], "settled", "{v}");
    let status = node.get("/status").await.unwrap();
    assert_eq!(status["rpc_endpoints"][0]["up"], false, "{status}");
    assert!(net.0.nodes[0].running());
}

/// A broadcast answered "already known" (the transaction reached the pool):
/// the journal keeps it and the send waits for it to be mined, instead of
/// failing and leaving the mined transaction unknown to a retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broadcast_answered_already_known_is_kept_and_waited_for() {
    let net = chain_only().await;
    let proxy =
        JsonRpcProxy::start(&net.0.rpc_url, Mode { already_known: true, ..Mode::default() }).await;
    let account = alloy_signer_local::PrivateKeySigner::random();
    let from = account.address();
    let funds = U256::from(10u64).pow(U256::from(20));
    let _: Value =
        net.0.provider.raw_request("anvil_setBalance".into(), (from, funds)).await.unwrap();
    let journal = Arc::new(MemJournal::default());
    let chain = Chain::connect(&proxy.url(), net.0.deployment.escrow, Some(account))
        .await
        .unwrap()
        .with_journal(journal.clone());
    let call = resolvd_node::contracts::IERC20::approveCall {
        spender: Address::repeat_byte(7),
        amount: U256::from(1u64),
    };
    let sent = chain.send_keyed("test/approve", net.0.deployment.token, call).await;
    let outcome = sent.expect("the transaction in the pool is waited for");
    assert!(outcome.block > 0);
    assert!(*journal.saved.lock().unwrap() >= 1);
    assert!(journal.entries.lock().unwrap().is_empty(), "cleared once mined");
    let nonce = net.0.provider.get_transaction_count(from).await.unwrap();
    assert_eq!(nonce, 1, "one transaction");
}

/// JavaScript JSON-RPC servers (Hardhat 3) read request ids as doubles: the
/// node's ids must stay below 2^53 for answers to match requests over
/// `ws://` (the chain-id check at connect, reads, the head subscription).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_request_ids_survive_a_server_that_reads_them_as_doubles() {
    let net = chain_only().await;
    let ws = net.0.rpc_url.replacen("http://", "ws://", 1);
    let proxy = DoubleIdProxy::start(ws).await;
    let connected = tokio::time::timeout(
        Duration::from_secs(60),
        Chain::connect(&proxy.url(), net.0.deployment.escrow, None),
    )
    .await
    .expect("connect within 60 s");
    let chain = connected.expect("connects through a server with double ids");
    let head = chain.head().await.unwrap();
    assert!(head > 0);
    let mut heads = chain.subscribe_heads().await.expect("a ws endpoint offers heads");
    let next = tokio::time::timeout(Duration::from_secs(20), heads.next()).await;
    assert!(next.ok().flatten().is_some(), "a head within 20 s");
}

/// The devnet on an existing chain (`--rpc-url`): on a Hardhat-dialect chain
/// (no `anvil_*`, `hardhat_setBalance`) it funds accounts and registers; on
/// a chain with neither it fails saying what it needs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_devnet_funds_accounts_on_hardhat_and_says_what_it_needs_elsewhere() {
    let net = chain_only().await;
    let options = |url: String| {
        let mut o = net.0.options.clone();
        o.nodes = 1;
        o.rpc_url = Some(url);
        o
    };
    let neither =
        JsonRpcProxy::start(&net.0.rpc_url, Mode { no_set_balance: true, ..Mode::default() }).await;
    let err = Devnet::provision(options(neither.url())).await.unwrap_err();
    let text = format!("{err:#}");
    assert!(
        text.contains("anvil_setBalance or hardhat_setBalance") && text.contains("dev chain"),
        "{text}"
    );
    let hardhat =
        JsonRpcProxy::start(&net.0.rpc_url, Mode { hardhat: true, ..Mode::default() }).await;
    let dev = Devnet::provision(options(hardhat.url())).await.expect("provisions on hardhat");
    assert!(dev.anvil.is_none());
    assert_eq!(dev.nodes.len(), 1);
}
