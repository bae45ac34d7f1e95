//! Starting a node, one step per function: keys, the chain (and the anchor
//! chains), the swarm, the background loops, the signer and the engine; then
//! the database's disputes are restored.

use super::{
    tasks::TaskSet, EconomicsView, Inbox, Node, Peers, Replayer, Shared, SignState, Signing,
    Status, CURSOR,
};
use crate::{
    backoff::Backoff,
    chain::anchor::AnchorChecker,
    chain::rpc::RpcOptions,
    chain::{Chain, ChainError},
    config::{DisseminationMode, KeysConfig, NodeConfig},
    content::ContentService,
    dispute::{Aggregation, Dissemination, Engine, EngineConfig},
    faults::Faults,
    metrics::Metrics,
    p2p::{self, P2pConfig},
    store::{SharedStore, Store},
};
use alloy_primitives::U256;
use alloy_signer_local::PrivateKeySigner;
use libp2p::{identity, Multiaddr};
use resolvd_consensus::{protection::ProtectedSigner, PublicKey, SecretKey};
use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    sync::{Arc, RwLock},
    time::{Duration, Instant},
};
use tokio::sync::{mpsc, Semaphore};
use tracing::{debug, info, warn};

impl Node {
    /// Opens the store, loads keys, connects to the chain and the network,
    /// and restores the disputes the database holds.
    pub async fn start(cfg: NodeConfig) -> eyre::Result<(Self, Arc<Shared>)> {
        cfg.validate()?;
        let rpc = RpcOptions::from_config(&cfg.chain)?;
        std::fs::create_dir_all(&cfg.data_dir)?;
        let store = Arc::new(Store::open(&cfg.data_dir.join("db"))?);
        let (secret, account) = load_keys(&cfg)?;
        let chain = connect_chain(&cfg, &rpc, account, &store).await?;
        let anchors = connect_anchors(&cfg, &rpc, &chain).await?;
        let remote = connect_remote_signer(&cfg.keys).await?;
        let signs = secret.is_some() || remote.is_some();
        let engine_cfg = engine_config(&cfg, &chain, signs);
        let (p2p_config, bootstrap) = p2p_settings(&cfg, engine_cfg.republish)?;
        let advertise = cfg
            .p2p
            .advertise
            .as_ref()
            .map(|list| {
                list.iter()
                    .map(|a| a.parse().map_err(|e| eyre::eyre!("p2p.advertise {a}: {e}")))
                    .collect::<eyre::Result<Vec<Multiaddr>>>()
            })
            .transpose()?;
        let swarm = p2p::build_swarm(p2p_identity(&cfg.data_dir)?, &p2p_config)?;
        let incoming = swarm
            .behaviour()
            .direct
            .new_control()
            .accept(p2p::DIRECT_PROTOCOL)
            .map_err(|e| eyre::eyre!("direct streams: {e}"))?;
        let (tx, rx) = mpsc::unbounded_channel();
        let (content_tx, content_rx) = mpsc::unbounded_channel();
        let metrics = Arc::new(Metrics::default());
        let shared = Arc::new(Shared {
            store: store.clone(),
            metrics: metrics.clone(),
            status: RwLock::new(Status::default()),
            content_added: content_tx,
        });
        let mut tasks = TaskSet::default();
        let (direct_tx, direct_rx) = mpsc::channel(super::direct::INBOX);
        tasks.spawn("direct stream reader", super::direct::accept_streams(incoming, direct_tx));
        let balance = spawn_balance_refresh(&cfg, &chain, &metrics, &mut tasks);
        let ledger = spawn_ledger(&cfg, &chain, &store, &shared, &mut tasks)?;
        let cursor = store.cursor(CURSOR)?.unwrap_or(cfg.chain.start_block.saturating_sub(1));
        let my_key = secret.as_ref().map(SecretKey::public_key).or(remote.as_ref().map(|r| r.1));
        let faults = Faults::new(&cfg.fault, secret.as_ref());
        let silent_until = (signs && cfg.keys.doppelganger_wait_secs > 0).then(|| {
            let wait = Duration::from_secs(cfg.keys.doppelganger_wait_secs);
            info!(target: "node", ?wait, "doppelganger protection: listening before signing (--disable-doppelganger to skip)");
            Instant::now() + wait
        });
        let signer = match (secret, remote) {
            (Some(s), _) => {
                Some(Signing::Local(ProtectedSigner::new(s, SharedStore(store.clone()))))
            }
            (None, Some((r, key))) => Some(Signing::Remote(r, key)),
            (None, None) => None,
        };
        let mut engine = Engine::new(engine_cfg, chain.domain(), my_key, metrics.engine.clone());
        for escrow in &chain.escrows[1..] {
            engine.serve(chain.for_escrow(*escrow).domain());
        }
        if let Some(until) = silent_until {
            engine.hold_signing_until(until);
        }
        let content = ContentService::new(metrics);
        let mut node = Self {
            replayer: Replayer {
                anchors,
                permits: Arc::new(Semaphore::new(cfg.pipeline.replay_workers)),
            },
            cfg,
            shared: shared.clone(),
            store,
            chain,
            sign: SignState { signer, key: my_key },
            economics: EconomicsView {
                balance,
                ledger,
                inclusions: VecDeque::new(),
                splits: BTreeMap::new(),
            },
            tasks,
            engine,
            swarm,
            content,
            faults,
            peers: Peers {
                bootstrap,
                connected: HashMap::new(),
                next_dial: Instant::now(),
                status: Vec::new(),
                status_at: None,
                outbox: Vec::new(),
                directory: super::direct::Directory::new(p2p_config.seen_ttl),
                advertise,
            },
            inbox: Inbox { tx, rx, content_rx, direct_rx },
            cursor,
        };
        node.restore().await?;
        Ok((node, shared))
    }
}

/// The BLS key (`keys.bls_keystore`) and the transaction account
/// (`chain.account_keystore`), each if configured.
fn load_keys(cfg: &NodeConfig) -> eyre::Result<(Option<SecretKey>, Option<PrivateKeySigner>)> {
    let secret = match &cfg.keys.bls_keystore {
        Some(path) => Some(crate::keys::load(
            path,
            &crate::keys::PasswordArgs { password_file: cfg.keys.password_file.clone() },
        )?),
        None => None,
    };
    let account = match (&cfg.chain.account_keystore, &cfg.chain.account_password_file) {
        (Some(k), Some(p)) => Some(crate::keys::load_account(k, p)?),
        _ => None,
    };
    Ok((secret, account))
}

/// The chain connection: the data dir's chain checked, sends journaled in
/// the store, the fee policy, every escrow of `chain.escrows` served (each
/// on the node's registry), and a warning if the account cannot pay.
async fn connect_chain(
    cfg: &NodeConfig,
    rpc: &RpcOptions,
    account: Option<PrivateKeySigner>,
    store: &Arc<Store>,
) -> eyre::Result<Chain> {
    let chain = with_retries("connecting to the chain", 10, || {
        Chain::connect_with(rpc, cfg.chain.escrow, account.clone())
    })
    .await
    .map_err(|e| eyre::eyre!("chain at {rpc} unreachable: {e}"))?;
    match store.chain_id()? {
        None => store.set_chain_id(chain.chain_id)?,
        Some(id) if id != chain.chain_id => eyre::bail!(
            "the data dir {} was used on chain {id}, the RPC serves chain {}: use another data_dir",
            cfg.data_dir.display(),
            chain.chain_id
        ),
        Some(_) => {}
    }
    let mut chain = chain.with_journal(Arc::new(crate::adapters::StoreJournal(store.clone())));
    chain.fees = crate::chain::FeePolicy {
        max_fee_per_gas: u128::from(cfg.chain.max_fee_per_gas),
        priority_percentile: f64::from(cfg.chain.priority_fee_percentile.min(100)),
        replace_after_blocks: cfg.chain.replace_after_blocks,
    };
    if let Some(account) = chain.account {
        let needed = gas_cap(cfg);
        match alloy_provider::Provider::get_balance(chain.provider(), account).await {
            Ok(balance) if balance < needed => {
                warn!(target: "chain", %account, %balance, %needed, "the transaction account cannot pay 1M gas at chain.max_fee_per_gas: fund it, or resolve and slash transactions will fail")
            }
            Ok(_) => {}
            Err(e) => {
                warn!(target: "chain", %account, error = %e, "cannot read the account balance")
            }
        }
    }
    chain.set_receipt_poll(cfg.poll_interval());
    for escrow in &cfg.chain.escrows {
        chain =
            with_retries("chain.escrows", 10, || chain.clone().serve_escrow_owned(*escrow)).await?;
    }
    Ok(chain)
}

/// Anchor finality checks: the anchor chains of `chain.anchor_rpc`, and the
/// cross-check of every endpoint of the node's own chain.
async fn connect_anchors(
    cfg: &NodeConfig,
    rpc: &RpcOptions,
    chain: &Chain,
) -> eyre::Result<AnchorChecker> {
    let anchors = with_retries("connecting to the anchor chains", 10, || {
        AnchorChecker::connect(chain.chain_id, chain.provider().clone(), &cfg.chain.anchor_rpc)
    })
    .await
    .map_err(|e| eyre::eyre!("{e}"))?;
    Ok(anchors.with_cross_check(chain.chain_id, chain.readers(), cfg.chain.quorum(rpc.urls.len())?))
}

/// The swarm's settings (`[p2p]`) and the bootstrap peers. Gossip's seen
/// cache lasts less than the engine's `republish` period, so a republish is
/// not taken for a copy.
fn p2p_settings(
    cfg: &NodeConfig,
    republish: Duration,
) -> eyre::Result<(P2pConfig, Vec<Multiaddr>)> {
    let config = P2pConfig {
        listen: cfg.p2p.listen.parse().map_err(|e| eyre::eyre!("p2p.listen: {e}"))?,
        heartbeat: Duration::from_millis(cfg.p2p.heartbeat_ms.max(50)),
        mesh: cfg.p2p.mesh,
        flood_publish: cfg.p2p.flood_publish,
        seen_ttl: republish * 3 / 4,
        aggregation: cfg.p2p.dissemination == DisseminationMode::Aggregators,
        ..P2pConfig::default()
    };
    let bootstrap = cfg
        .p2p
        .bootstrap
        .iter()
        .map(|a| a.parse().map_err(|e| eyre::eyre!("p2p.bootstrap {a}: {e}")))
        .collect::<eyre::Result<Vec<Multiaddr>>>()?;
    Ok((config, bootstrap))
}

/// The libp2p identity in `data_dir/p2p.key`, created on first start (mode 0600).
pub fn p2p_identity(data_dir: &std::path::Path) -> eyre::Result<identity::Keypair> {
    let path = data_dir.join("p2p.key");
    if let Ok(bytes) = std::fs::read(&path) {
        return identity::Keypair::from_protobuf_encoding(&bytes)
            .map_err(|e| eyre::eyre!("{}: {e}", path.display()));
    }
    let key = identity::Keypair::generate_ed25519();
    let bytes = key.to_protobuf_encoding().map_err(|e| eyre::eyre!("encoding p2p key: {e}"))?;
    crate::keys::write_private(&path, &bytes)?;
    Ok(key)
}

/// The account's balance, refreshed every 30 s for `/status` and the
/// dashboard's "fund me" alert (against the cost of a large transaction at
/// the fee cap). `None` without an account.
fn spawn_balance_refresh(
    cfg: &NodeConfig,
    chain: &Chain,
    metrics: &Arc<Metrics>,
    tasks: &mut TaskSet,
) -> Arc<RwLock<Option<U256>>> {
    let balance: Arc<RwLock<Option<U256>>> = Arc::default();
    let Some(account) = chain.account else { return balance };
    metrics.account.gas_cap.set(f64::from(gas_cap(cfg)));
    let (provider, metrics, out) = (chain.provider().clone(), metrics.clone(), balance.clone());
    tasks.spawn("balance refresh", async move {
        loop {
            if let Ok(b) = alloy_provider::Provider::get_balance(&provider, account).await {
                metrics.account.balance.set(f64::from(b));
                *out.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(b);
            }
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
    });
    balance
}

/// Every `pipeline.ledger_refresh_secs`: the fee ledger brought up to the
/// confirmed block, persisted, exported as metrics and shown in `/status`.
/// The resolver index is the one `/status` shows (the last one known once
/// the node left the committee).
fn spawn_ledger(
    cfg: &NodeConfig,
    chain: &Chain,
    store: &Arc<Store>,
    shared: &Arc<Shared>,
    tasks: &mut TaskSet,
) -> eyre::Result<Arc<RwLock<Option<crate::economics::Ledger>>>> {
    let mut ledger = store.ledger()?.unwrap_or_else(|| crate::economics::Ledger {
        scanned_to: cfg.chain.start_block.saturating_sub(1),
        ..Default::default()
    });
    let out = Arc::new(RwLock::new(Some(ledger.clone())));
    let (chain, store, shared, view) = (chain.clone(), store.clone(), shared.clone(), out.clone());
    let (confirmations, max_range) = (cfg.chain.confirmations, cfg.chain.max_log_range);
    let every = Duration::from_secs(cfg.pipeline.ledger_refresh_secs.max(1));
    // Gas paid before this process started (the chain handle counts from 0).
    let base = ledger.gas_spent_wei;
    tasks.spawn("fee ledger", async move {
        let mut resolver = None;
        loop {
            let index = shared
                .status
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .signer_index;
            resolver = index.or(resolver);
            let update = async {
                let to = chain.confirmed(confirmations).await?.block;
                chain.update_ledger(&mut ledger, resolver, chain.account, to, max_range).await
            };
            match update.await {
                Ok(()) => {
                    ledger.gas_spent_wei = base + U256::from(chain.gas_spent_wei());
                    if let Err(e) = store.put_ledger(&ledger) {
                        warn!(target: "node", error = %e, "cannot persist the fee ledger");
                    }
                    crate::observe::ledger(&shared.metrics, &ledger);
                    *view.write().unwrap_or_else(std::sync::PoisonError::into_inner) =
                        Some(ledger.clone());
                }
                Err(e) => debug!(target: "chain", error = %e, "fee ledger not updated"),
            }
            tokio::time::sleep(every).await;
        }
    });
    Ok(out)
}

/// A `resolvd signer` (`keys.remote_signer` with its token file) and the
/// public key it signs with; its first answer is waited for (up to ~6 s of
/// retries), a refusal is fatal.
async fn connect_remote_signer(
    keys: &KeysConfig,
) -> eyre::Result<Option<(crate::signer::RemoteSigner, PublicKey)>> {
    let (Some(url), Some(token_file)) = (&keys.remote_signer, &keys.remote_signer_token_file)
    else {
        return Ok(None);
    };
    let token = zeroize::Zeroizing::new(
        std::fs::read_to_string(token_file)
            .map_err(|e| eyre::eyre!("{}: {e}", token_file.display()))?
            .trim()
            .to_owned(),
    );
    let remote = crate::signer::RemoteSigner::new(url, token)?;
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(5));
    let key = loop {
        match remote.public_key().await {
            Ok(k) => break k,
            Err(e @ crate::signer::RemoteError::Failed(_)) if !backoff.at_cap() => {
                warn!(target: "node", error = %e, "remote signer not answering: retrying");
                tokio::time::sleep(backoff.next_delay()).await;
            }
            Err(e) => eyre::bail!("keys.remote_signer {url}: {e}"),
        }
    };
    info!(target: "node", %url, key = %alloy_primitives::hex::encode_prefixed(key.compress()), "signing through a remote signer");
    Ok(Some((remote, key)))
}

/// The engine's tunables (`[pipeline]`; whether it submits and watches for
/// a doppelgänger follow from the account and the key).
fn engine_config(cfg: &NodeConfig, chain: &Chain, signs: bool) -> EngineConfig {
    EngineConfig {
        retry: Duration::from_millis(cfg.pipeline.retry_ms),
        submit_slot: Duration::from_millis(cfg.pipeline.submit_slot_ms),
        widen_wait: Duration::from_millis(cfg.pipeline.widen_wait_ms),
        max_buffered_partials: cfg.pipeline.max_buffered_partials,
        retain_settled: Duration::from_secs(cfg.pipeline.retain_settled_secs),
        submits: chain.account.is_some(),
        detect_doppelganger: cfg.keys.doppelganger_wait_secs > 0 && signs,
        dissemination: match cfg.p2p.dissemination {
            DisseminationMode::Aggregators => Dissemination::Aggregators(Aggregation::default()),
            DisseminationMode::Flood => Dissemination::Flood,
        },
        ..EngineConfig::default()
    }
}

/// What one large transaction may cost at the fee cap: 1M gas (about two
/// `resolve`s of a large committee) × `chain.max_fee_per_gas`. The start-up
/// balance warning, `/status` and the metrics all use it.
pub(super) fn gas_cap(cfg: &NodeConfig) -> U256 {
    U256::from(1_000_000u64) * U256::from(cfg.chain.max_fee_per_gas)
}

/// Retries `f` with backoff until it succeeds or `attempts` are used up.
pub(super) async fn with_retries<T, F, Fut>(what: &str, attempts: u32, mut f: F) -> eyre::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ChainError>>,
{
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(5));
    let mut last = None;
    for attempt in 0..attempts {
        match f().await {
            Ok(v) => return Ok(v),
            // A wrong chain or an unusable RPC configuration does not heal.
            Err(e @ (ChainError::WrongChain(_) | ChainError::Config(_))) => {
                return Err(eyre::eyre!("{what}: {e}"));
            }
            Err(e) => {
                warn!(target: "chain", attempt, error = %e, "{what}: retrying");
                last = Some(e);
                tokio::time::sleep(backoff.next_delay()).await;
            }
        }
    }
    Err(eyre::eyre!("{what}: {}", last.map_or_else(String::new, |e| e.to_string())))
}
