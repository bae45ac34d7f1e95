//! The daemon's IO shell: one `tokio::select!` loop that owns the
//! [`Engine`](crate::dispute::Engine) and the services around it, turns IO
//! into engine events and performs the engine's [`Action`]s.
//!
//! Services: p2p (the libp2p swarm: gossip, validation reports, content by
//! hash through [`crate::content`]), chain (watcher, confirmations, committee
//! loads, `resolve` and `slashEquivocation` transactions, all spawned tasks
//! that answer through one channel), store (RocksDB, synchronous), the
//! replay pool (bounded, `spawn_blocking`), signing (slashing protection
//! fsync'd before a partial leaves the process) and the API status snapshot.
//! The loop only routes; protocol decisions live in the engine.
//!
//! Store policy: a failed write is logged, counted (`resolvd_store_errors`)
//! and never stops the node. What it loses is re-derived from the chain
//! after a restart (the cursor is not advanced past a batch whose records
//! failed to persist). The one write that gates behaviour is slashing
//! protection: if it fails, the node does not sign.

use crate::{
    anchor::AnchorChecker,
    chain::{Chain, ChainError, ChainEvent},
    config::{Confirmations, NodeConfig},
    content::{ContentService, Served},
    contracts::Evidence,
    dispute::{
        gather, Action, AnchorStatus, ConfirmSource, Confirmation, Engine, EngineConfig, Origin,
        SlashRequest, SlashResult, SubmitResult,
    },
    faults::{Faults, Perform},
    metrics::{GossipLabel, Metrics},
    p2p::{self, Behaviour, BehaviourEvent, Gossip, P2pConfig, Topic, TopicExt},
    signer::commit_message,
    store::{DisputeStatus, SharedStore, Store},
};
use alloy_primitives::{Address, B256};
use futures::StreamExt;
use libp2p::{
    gossipsub::{self, MessageAcceptance},
    identity,
    swarm::SwarmEvent,
    Multiaddr, PeerId, Swarm,
};
use resolvd_consensus::{
    protection::ProtectedSigner, Attestation, Committee, PublicKey, QuorumCertificate,
};
use resolvd_proto::{
    wire::{DisputeAnnouncement, PartialCommit, SignedVerdict, WireMessage},
    Canonical, ReexecRequestV1, VerdictCommitment, VerdictDomain, VerdictEnvelopeV1,
};
use resolvd_replay::EvmBackend;
use serde::Serialize;
use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    sync::{Arc, RwLock},
    time::{Duration, Instant},
};
use tokio::sync::{mpsc, Semaphore};
use tracing::{debug, error, info, warn};

pub use crate::dispute::{submit_rank, DisputeView, Phase};

/// Chain cursor name in the store.
pub const CURSOR: &str = "chain";
/// Longest backoff of the chain watcher.
const MAX_WATCH_BACKOFF: Duration = Duration::from_secs(60);
/// Peer scores in `/status` are recomputed at most this often, and whenever
/// a peer connects or disconnects: gossipsub scores a peer from all its
/// counters on every call, and the snapshot (every 250 ms) scoring ~60 peers
/// was a large part of an idle node's CPU at N = 64.
const PEER_SCORES_EVERY: Duration = Duration::from_secs(2);

/// One connected peer.
#[derive(Clone, Debug, Serialize)]
pub struct PeerStatus {
    /// Peer id.
    pub id: String,
    /// Its gossipsub score (negative after invalid messages).
    pub score: Option<f64>,
}

/// What `/status` shows.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Status {
    /// This node's libp2p peer id.
    pub peer_id: String,
    /// Listen addresses.
    pub listen: Vec<String>,
    /// Connected peers.
    pub peers: Vec<PeerStatus>,
    /// Peers banned for serving content with a wrong hash.
    pub banned: Vec<String>,
    /// Chain id.
    pub chain_id: u64,
    /// Escrow (`chain.escrow`).
    pub escrow: Address,
    /// Every escrow served (`chain.escrow`, then `chain.escrows`).
    pub escrows: Vec<Address>,
    /// Registry.
    pub registry: Address,
    /// Transaction account.
    pub account: Option<Address>,
    /// Its balance (wei, decimal; refreshed every 30 s) and what one large
    /// transaction may cost at the fee cap (1M gas × `chain.max_fee_per_gas`).
    pub account_balance_wei: Option<String>,
    /// Fees earned (claimed + pending) and gas refunds per token, and the
    /// gas the account paid (see [`crate::economics`]).
    pub economics: Option<crate::economics::Ledger>,
    /// See [`Self::account_balance_wei`].
    pub account_gas_cap_wei: Option<String>,
    /// The BLS key (compressed hex), if the node signs.
    pub bls_key: Option<String>,
    /// Latest block seen.
    pub head: u64,
    /// Last block whose logs were processed.
    pub cursor: u64,
    /// Newest committee epoch known.
    pub epoch: u64,
    /// This node's registry index in that epoch.
    pub signer_index: Option<u32>,
    /// Each RPC endpoint's health, in `chain.rpc_urls` order.
    pub rpc_endpoints: Vec<crate::rpc::EndpointHealth>,
    /// Disputes in memory (open, and finished ones until they are evicted).
    pub disputes: BTreeMap<B256, DisputeView>,
    /// Certificates that left this node out although its own replay signed
    /// the certified digest, and what the node did while the fee was held:
    /// `included <tx>` (it proved its partial with `includeSigners`) or
    /// `failed: <error>`. The newest [`MAX_INCLUSIONS`].
    pub inclusions: BTreeMap<B256, String>,
}

/// How many late inclusions `/status` remembers.
pub const MAX_INCLUSIONS: usize = 256;

/// How often the submitter of a certificate whose fee is held reads the
/// chain's time until the inclusion window has closed.
const DISTRIBUTE_POLL_SECS: u64 = 5;

/// State shared with the HTTP API.
#[derive(Debug)]
pub struct Shared {
    /// The database.
    pub store: Arc<Store>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Latest status snapshot.
    pub status: RwLock<Status>,
    /// Tells the loop that content was added through the API.
    pub content_added: mpsc::UnboundedSender<B256>,
}

/// Results of spawned IO, routed back into the loop.
enum Internal {
    /// A late inclusion of this node's partial finished (`None`: it was not
    /// left out, or nothing is held any more).
    Included {
        deal_id: B256,
        result: Result<Option<B256>, String>,
    },
    /// A remote signer answered.
    RemoteSigned {
        domain: Box<VerdictDomain>,
        deal_id: B256,
        commitment: Box<VerdictCommitment>,
        epoch: u64,
        index: u32,
        result:
            Result<(resolvd_consensus::Signature, Option<resolvd_consensus::Signature>), String>,
    },
    Batch {
        events: Vec<ChainEvent>,
        to: u64,
        hash: B256,
        head: u64,
        time: u64,
    },
    Reorg {
        from: u64,
        disputed: Vec<B256>,
        settled: Vec<B256>,
        depth: u64,
    },
    Head {
        head: u64,
        time: u64,
    },
    Confirmed {
        announcement: Box<DisputeAnnouncement>,
        source: ConfirmSource,
        result: Result<Confirmation, String>,
    },
    Committee {
        epoch: u64,
        /// The committee and the commit-reveal window read with it.
        result: Result<(Committee, Option<Duration>), String>,
    },
    AnchorChecked {
        request: Box<ReexecRequestV1>,
        result: Result<AnchorStatus, String>,
    },
    Replayed {
        deal_id: B256,
        result: Result<VerdictEnvelopeV1, String>,
    },
    Submitted {
        deal_id: B256,
        result: SubmitResult,
    },
    Slashed {
        deal_id: B256,
        resolvers: Vec<u32>,
        result: SlashResult,
    },
    Served(Served),
}

/// How this node signs.
enum Signing {
    /// Its own keystore and protection store.
    Local(ProtectedSigner<SharedStore>),
    /// A `resolvd signer` (protection lives there), and its public key.
    Remote(crate::signer::RemoteSigner, resolvd_consensus::PublicKey),
}

/// The running node.
pub struct Node {
    cfg: NodeConfig,
    shared: Arc<Shared>,
    store: Arc<Store>,
    chain: Chain,
    anchors: AnchorChecker,
    /// Doppelgänger wait: no signing before this instant; the signatures
    /// asked for meanwhile, made once it is over.
    silent_until: Option<Instant>,
    held_signs: Vec<(VerdictDomain, B256, VerdictCommitment, u64, u32, bool)>,
    /// The account's balance, refreshed by a task (see `Status`).
    balance: Arc<RwLock<Option<alloy_primitives::U256>>>,
    /// Fees earned, refunds, gas spent; refreshed by a task (see `Status`).
    ledger: Arc<RwLock<Option<crate::economics::Ledger>>>,
    engine: Engine,
    swarm: Swarm<Behaviour>,
    content: ContentService,
    signer: Option<Signing>,
    my_key: Option<PublicKey>,
    faults: Faults,
    outbox: Vec<Gossip>,
    bootstrap: Vec<Multiaddr>,
    connected: HashMap<Multiaddr, PeerId>,
    last_dial: Instant,
    /// `/status` peers as of `peers_at` (None: a peer came or went since).
    peer_status: Vec<PeerStatus>,
    peers_at: Option<Instant>,
    tx: mpsc::UnboundedSender<Internal>,
    rx: mpsc::UnboundedReceiver<Internal>,
    content_rx: mpsc::UnboundedReceiver<B256>,
    replays: Arc<Semaphore>,
    cursor: u64,
    /// See [`Status::inclusions`] (insertion order, for the bound).
    inclusions: VecDeque<(B256, String)>,
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

/// Retries `f` with backoff until it succeeds or `attempts` are used up.
async fn with_retries<T, F, Fut>(what: &str, attempts: u32, mut f: F) -> eyre::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ChainError>>,
{
    let mut wait = Duration::from_millis(200);
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
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(5));
            }
        }
    }
    Err(eyre::eyre!("{what}: {}", last.map_or_else(String::new, |e| e.to_string())))
}

impl Node {
    /// Opens the store, loads keys, connects to the chain and the network.
    pub async fn start(cfg: NodeConfig) -> eyre::Result<(Self, Arc<Shared>)> {
        cfg.validate()?;
        let rpc = crate::rpc::RpcOptions::from_config(&cfg.chain)?;
        std::fs::create_dir_all(&cfg.data_dir)?;
        let store = Arc::new(Store::open(&cfg.data_dir.join("db"))?);
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
        let chain = with_retries("connecting to the chain", 10, || {
            Chain::connect_with(&rpc, cfg.chain.escrow, account.clone())
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
            let needed = gas_cap(&cfg);
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
        let anchors = with_retries("connecting to the anchor chains", 10, || {
            AnchorChecker::connect(chain.chain_id, chain.provider().clone(), &cfg.chain.anchor_rpc)
        })
        .await
        .map_err(|e| eyre::eyre!("{e}"))?
        .with_cross_check(
            chain.chain_id,
            chain.readers(),
            cfg.chain.quorum(rpc.urls.len())?,
        );
        let mut chain = chain;
        chain.set_receipt_poll(cfg.poll_interval());
        for escrow in &cfg.chain.escrows {
            chain = with_retries("chain.escrows", 10, || chain.clone().serve_escrow_owned(*escrow))
                .await?;
        }
        let domain = chain.domain();
        let p2p_config = P2pConfig {
            listen: cfg.p2p.listen.parse().map_err(|e| eyre::eyre!("p2p.listen: {e}"))?,
            heartbeat: Duration::from_millis(cfg.p2p.heartbeat_ms.max(50)),
            mesh: cfg.p2p.mesh,
            // Below the republish period, so each republish is sent.
            seen_ttl: EngineConfig::default().republish * 3 / 4,
            ..P2pConfig::default()
        };
        let bootstrap = cfg
            .p2p
            .bootstrap
            .iter()
            .map(|a| a.parse().map_err(|e| eyre::eyre!("p2p.bootstrap {a}: {e}")))
            .collect::<eyre::Result<Vec<Multiaddr>>>()?;
        let swarm = p2p::build_swarm(p2p_identity(&cfg.data_dir)?, &p2p_config)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let (content_tx, content_rx) = mpsc::unbounded_channel();
        let metrics = Arc::new(Metrics::default());
        let shared = Arc::new(Shared {
            store: store.clone(),
            metrics: metrics.clone(),
            status: RwLock::new(Status::default()),
            content_added: content_tx,
        });
        let balance: Arc<RwLock<Option<alloy_primitives::U256>>> = Arc::default();
        if let Some(account) = chain.account {
            // Balance vs the cost of a large transaction at the cap, for the
            // dashboard's "fund me" alert; refreshed every 30 s.
            metrics.account_gas_cap.set(f64::from(gas_cap(&cfg)));
            let (provider, metrics) = (chain.provider().clone(), metrics.clone());
            let balance = balance.clone();
            tokio::spawn(async move {
                loop {
                    if let Ok(b) = alloy_provider::Provider::get_balance(&provider, account).await {
                        metrics.account_balance.set(f64::from(b));
                        *balance.write().unwrap_or_else(std::sync::PoisonError::into_inner) =
                            Some(b);
                    }
                    tokio::time::sleep(Duration::from_secs(30)).await;
                }
            });
        }
        let ledger = spawn_ledger(&cfg, &chain, &store, &shared)?;
        let cursor = store.cursor(CURSOR)?.unwrap_or(cfg.chain.start_block.saturating_sub(1));
        let remote = match (&cfg.keys.remote_signer, &cfg.keys.remote_signer_token_file) {
            (Some(url), Some(token_file)) => {
                let token = zeroize::Zeroizing::new(
                    std::fs::read_to_string(token_file)
                        .map_err(|e| eyre::eyre!("{}: {e}", token_file.display()))?
                        .trim()
                        .to_owned(),
                );
                let remote = crate::signer::RemoteSigner::new(url, token)?;
                let mut wait = Duration::from_millis(200);
                let key = loop {
                    match remote.public_key().await {
                        Ok(k) => break k,
                        Err(e @ crate::signer::RemoteError::Failed(_))
                            if wait < Duration::from_secs(5) =>
                        {
                            warn!(target: "node", error = %e, "remote signer not answering: retrying");
                            tokio::time::sleep(wait).await;
                            wait *= 2;
                        }
                        Err(e) => eyre::bail!("keys.remote_signer {url}: {e}"),
                    }
                };
                info!(target: "node", %url, key = %alloy_primitives::hex::encode_prefixed(key.compress()), "signing through a remote signer");
                Some((remote, key))
            }
            _ => None,
        };
        let my_key = secret
            .as_ref()
            .map(resolvd_consensus::SecretKey::public_key)
            .or(remote.as_ref().map(|(_, k)| *k));
        let faults = Faults::new(&cfg.fault, secret.as_ref());
        let secret_present = secret.is_some() || remote.is_some();
        let silent_until = (secret_present && cfg.keys.doppelganger_wait_secs > 0).then(|| {
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
        let engine_cfg = EngineConfig {
            retry: Duration::from_millis(cfg.pipeline.retry_ms),
            submit_slot: Duration::from_millis(cfg.pipeline.submit_slot_ms),
            max_buffered_partials: cfg.pipeline.max_buffered_partials,
            retain_settled: Duration::from_secs(cfg.pipeline.retain_settled_secs),
            submits: chain.account.is_some(),
            detect_doppelganger: cfg.keys.doppelganger_wait_secs > 0 && secret_present,
            ..EngineConfig::default()
        };
        let mut engine = Engine::new(engine_cfg, domain, my_key, metrics.engine.clone());
        for escrow in &chain.escrows[1..] {
            engine.serve(chain.for_escrow(*escrow).domain());
        }
        let content = ContentService::new(metrics);
        let mut node = Self {
            replays: Arc::new(Semaphore::new(cfg.pipeline.replay_workers)),
            cfg,
            shared: shared.clone(),
            store,
            chain,
            anchors,
            silent_until,
            held_signs: Vec::new(),
            inclusions: VecDeque::new(),
            balance,
            ledger,
            engine,
            swarm,
            content,
            signer,
            my_key,
            faults,
            outbox: Vec::new(),
            bootstrap,
            connected: HashMap::new(),
            last_dial: Instant::now() - Duration::from_secs(60),
            peer_status: Vec::new(),
            peers_at: None,
            tx,
            rx,
            content_rx,
            cursor,
        };
        node.restore().await?;
        Ok((node, shared))
    }

    /// The confirmed block (head minus confirmations) and its epoch, then
    /// every dispute and evidence file the database holds.
    async fn restore(&mut self) -> eyre::Result<()> {
        let confirmations = self.cfg.chain.confirmations;
        let chain = self.chain.clone();
        let (head, at, epoch, reveal) = with_retries("reading the current epoch", 10, || async {
            let c = chain.confirmed(confirmations).await?;
            let epoch = chain.current_epoch(Some(c.block)).await?;
            Ok((c.head, c.block, epoch, chain.commit_reveal(epoch, Some(c.block)).await?))
        })
        .await?;
        self.engine.on_head(head, 0);
        self.engine.set_commit_reveal(reveal);
        let now = Instant::now();
        // Committees of the restored disputes (and of the current epoch), at
        // the confirmed block; then the disputes themselves.
        let disputes = self.store.disputes()?;
        let mut epochs: Vec<u64> = disputes
            .iter()
            .filter(|(_, status)| *status == DisputeStatus::Active)
            .map(|(a, _)| a.epoch)
            .collect();
        epochs.push(epoch);
        epochs.sort_unstable();
        epochs.dedup();
        for e in epochs.into_iter().filter(|&e| e > 0 && e <= epoch) {
            let c =
                with_retries("loading a committee", 10, || chain.committee(e, Some(at))).await?;
            self.engine.add_committee(c, now);
        }
        // Loaded above: this only records the epoch as current.
        self.engine.on_epoch(epoch);
        for (info, status) in disputes {
            let deal_id = info.deal_id;
            if status != DisputeStatus::Active {
                // Held until evicted, then pruned; nothing else is needed.
                self.engine.restore(info, status, Vec::new(), None, now);
                continue;
            }
            let partials = self.store.partials(&deal_id)?;
            // Undecodable bytes are dropped like a certificate that does not verify.
            let certificate = self
                .store
                .certificate(&deal_id)?
                .and_then(|c| QuorumCertificate::from_wire(&c).ok());
            self.engine.restore(info, status, partials, certificate, now);
        }
        for (deal_id, resolver) in self.store.slashed_all()? {
            self.engine.mark_slashed(deal_id, resolver);
        }
        self.restore_evidence(now);
        // Actions queued by the restore (re-gossip, confirmations) run in the loop.
        Ok(())
    }

    /// Evidence found before a restart and not yet dealt with on chain is
    /// scheduled again: its slash task lived only in memory, and its gossip
    /// may never have reached a peer.
    fn restore_evidence(&mut self, now: Instant) {
        let Ok(entries) = std::fs::read_dir(self.cfg.data_dir.join("evidence")) else {
            return;
        };
        for path in entries.flatten().map(|e| e.path()) {
            let decoded = std::fs::read_to_string(&path)
                .map_err(|e| e.to_string())
                .and_then(|hex| {
                    alloy_primitives::hex::decode(hex.trim()).map_err(|e| e.to_string())
                })
                .and_then(|bytes| {
                    resolvd_proto::wire::ConflictEvidence::decode_wire(&bytes)
                        .map_err(|e| e.to_string())
                })
                .and_then(|w| {
                    let first = Attestation::from_wire(&w.first).map_err(|e| e.to_string())?;
                    Ok((first, Attestation::from_wire(&w.second).map_err(|e| e.to_string())?))
                });
            match decoded {
                Ok((first, second)) => self.engine.restore_evidence(first, second, now),
                Err(error) => {
                    warn!(target: "slasher", file = %path.display(), %error, "unreadable evidence file");
                }
            }
        }
    }

    /// Runs until `shutdown` resolves.
    pub async fn run(
        mut self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> eyre::Result<()> {
        let heads = self
            .chain
            .subscribe_heads()
            .await
            .map(|h| Box::pin(h) as std::pin::Pin<Box<dyn futures::Stream<Item = u64> + Send>>);
        tokio::spawn(watch(
            heads,
            self.chain.clone(),
            self.tx.clone(),
            self.cursor + 1,
            self.store.cursor_at(CURSOR).ok().flatten().filter(|(b, _)| *b == self.cursor),
            self.cfg.chain.confirmations,
            self.cfg.poll_interval(),
            self.cfg.chain.max_log_range,
        ));
        info!(
            target: "node",
            peer = %self.swarm.local_peer_id(),
            escrow = %self.chain.escrow,
            registry = %self.chain.registry,
            key = ?self.my_key.map(|k| alloy_primitives::hex::encode(k.compress())),
            account = ?self.chain.account,
            cursor = self.cursor,
            epoch = self.engine.current_epoch(),
            "resolvd running"
        );
        self.drive();
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut snapshot = Instant::now();
        tokio::pin!(shutdown);
        loop {
            let batch = self.engine.batch_due().map(tokio::time::Instant::from_std);
            tokio::select! {
                event = self.swarm.select_next_some() => self.on_swarm(event),
                Some(msg) = self.rx.recv() => self.on_internal(msg),
                Some(_) = self.content_rx.recv() => self.engine.on_content_stored(Instant::now()),
                () = sleep_until_some(batch) => self.on_batch(),
                _ = tick.tick() => {
                    self.on_tick();
                    if snapshot.elapsed() >= Duration::from_millis(250) {
                        self.publish_status();
                        snapshot = Instant::now();
                    }
                }
                () = &mut shutdown => {
                    info!(target: "node", "shutting down");
                    self.publish_status();
                    return Ok(());
                }
            }
            self.drive();
            if let Some((deal, epoch, index)) = self.engine.doppelganger() {
                self.shared.metrics.doppelganger.set(1);
                self.publish_status();
                eyre::bail!(
                    "doppelganger: resolver {index} (epoch {epoch}) signed deal {deal} and this data dir did not: \
                     the BLS key runs in another process; stop that one (or this one) before signing again"
                );
            }
        }
    }

    fn on_batch(&mut self) {
        let mut seed = [0u8; 32];
        if getrandom::fill(&mut seed).is_err() {
            error!(target: "node", "no OS randomness for batch verification");
            return;
        }
        self.engine.on_batch(&seed, Instant::now());
    }

    // ------------------------------------------------------------ actions

    /// Performs every queued action (actions may queue more).
    fn drive(&mut self) {
        while let Some(action) = self.engine.poll_action() {
            self.perform(action);
        }
    }

    fn store_error(&self, what: &str, deal: Option<&B256>, e: &dyn std::fmt::Display) {
        self.shared.metrics.store_errors.inc();
        error!(target: "store", deal = ?deal, error = %e, "{what}");
    }

    fn perform(&mut self, action: Action) {
        let now = Instant::now();
        let delay = match self.faults.before_action(&action, &mut self.engine) {
            Perform::After(delay) => delay,
            Perform::Skip => return,
        };
        match action {
            Action::Confirm { announcement, source, delay } => {
                let chain = self.chain.for_escrow(announcement.escrow);
                let tx = self.tx.clone();
                let confirmations = self.cfg.chain.confirmations;
                tokio::spawn(async move {
                    if !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    let result = match source {
                        ConfirmSource::Gossip => {
                            chain.confirm_announcement(&announcement, confirmations).await
                        }
                        ConfirmSource::Chain | ConfirmSource::Reorg => {
                            chain.still_disputed(announcement.deal_id).await
                        }
                    }
                    .map_err(|e| e.to_string());
                    let _ = tx.send(Internal::Confirmed { announcement, source, result });
                });
            }
            Action::CheckAnchor(request, anchor) => {
                let (anchors, tx) = (self.anchors.clone(), self.tx.clone());
                tokio::spawn(async move {
                    let result = anchors.check(&anchor).await.map_err(|e| e.to_string());
                    let _ = tx.send(Internal::AnchorChecked { request, result });
                });
            }
            Action::LoadCommittee(epoch) => {
                let (chain, tx) = (self.chain.clone(), self.tx.clone());
                let confirmations = self.cfg.chain.confirmations;
                tokio::spawn(async move {
                    let result = async {
                        let at = chain.confirmed(confirmations).await?.block;
                        // The commit-reveal setting pinned by the current epoch
                        // (the one new disputes pin), read with every committee:
                        // an owner change applies from the next epoch on.
                        let current = chain.current_epoch(Some(at)).await?;
                        let reveal = chain.commit_reveal(current, Some(at)).await?;
                        Ok::<_, crate::chain::ChainError>((
                            chain.committee(epoch, Some(at)).await?,
                            reveal,
                        ))
                    }
                    .await
                    .map_err(|e| e.to_string());
                    let _ = tx.send(Internal::Committee { epoch, result });
                });
            }
            Action::Gather(info) => {
                let store = &self.store;
                let mut failed = None;
                let gathered = gather(&info, |hash, tag| match store.get_content(hash) {
                    Ok(Some((t, bytes))) if t == tag => Some(bytes),
                    Ok(_) => None,
                    Err(e) => {
                        failed = Some(e);
                        None
                    }
                });
                if let Some(e) = failed {
                    self.shared.metrics.store_errors.inc();
                    error!(target: "store", deal = %info.deal_id, error = %e, "reading content");
                }
                self.engine.on_gathered(info.deal_id, gathered, now);
            }
            Action::Fetch { hash, tag } => self.content.fetch(&mut self.swarm, hash, tag),
            Action::Replay(request) => {
                let deal_id = request.deal_id;
                let sem = self.replays.clone();
                let tx = self.tx.clone();
                let queue = self.shared.metrics.replay_queue.clone();
                queue.inc();
                tokio::spawn(async move {
                    if !delay.is_zero() {
                        warn!(target: "fault", deal = %deal_id, ?delay, "fault.replay_delay_ms: replaying late");
                        tokio::time::sleep(delay).await;
                    }
                    let result = match sem.acquire_owned().await {
                        Ok(_permit) => {
                            tokio::task::spawn_blocking(move || EvmBackend.verdict(&request))
                                .await
                                .map_err(|e| format!("replay worker: {e}"))
                                .and_then(|r| r.map_err(|e| format!("{e} ({})", e.code())))
                        }
                        Err(_) => Err("replay pool closed".into()),
                    };
                    queue.dec();
                    let _ = tx.send(Internal::Replayed { deal_id, result });
                });
            }
            Action::Sign { deal_id, escrow, commitment, epoch, index, commit } => {
                let domain = self.chain.for_escrow(escrow).domain();
                if self.silent_until.is_some_and(|t| now < t) {
                    self.held_signs.push((domain, deal_id, commitment, epoch, index, commit));
                } else {
                    self.sign(&domain, deal_id, commitment, epoch, index, commit, now);
                }
            }
            Action::Publish(gossip) => self.publish(gossip),
            Action::Report { origin, topic, acceptance } => {
                self.report(&origin, topic, crate::dispute::acceptance(acceptance))
            }
            Action::Submit { deal_id, escrow, certificate } => {
                let (chain, tx) = (self.chain.for_escrow(escrow), self.tx.clone());
                tokio::spawn(async move {
                    let result = submit(&chain, deal_id, &certificate).await;
                    let _ = tx.send(Internal::Submitted { deal_id, result });
                });
            }
            Action::Slash(request) => {
                let (chain, tx) = (self.chain.for_escrow(request.escrow), self.tx.clone());
                tokio::spawn(async move {
                    let SlashRequest { deal_id, first, second, resolvers, .. } = *request;
                    let result = slash(&chain, &resolvers, (&first).into(), (&second).into()).await;
                    let _ = tx.send(Internal::Slashed { deal_id, resolvers, result });
                });
            }
            Action::PersistDispute(info, status) => {
                if let Err(e) = self.store.put_dispute(&info, status) {
                    self.store_error("cannot persist dispute", Some(&info.deal_id), &e);
                }
            }
            Action::PersistPartial(p) => {
                if let Err(e) = self.store.put_partial(&p) {
                    self.store_error("cannot persist partial", Some(&p.commitment.deal_id), &e);
                }
            }
            Action::PersistCertificate(qc) => {
                if let Err(e) = self.store.put_certificate(&qc.to_wire()) {
                    self.store_error(
                        "cannot persist certificate",
                        Some(&qc.commitment.deal_id),
                        &e,
                    );
                }
            }
            Action::PersistEnvelope(envelope) => {
                if let Err(e) =
                    self.store.put_content("verdict-envelope", &envelope.to_canonical_bytes())
                {
                    self.store_error("cannot persist envelope", None, &e);
                }
            }
            Action::Prune(deal_id) => {
                if let Err(e) = self.store.prune_deal(&deal_id) {
                    self.store_error("cannot prune a finished dispute", Some(&deal_id), &e);
                }
            }
            Action::PersistSlashed { deal_id, resolver, tx } => {
                if let Err(e) = self.store.put_slashed(&deal_id, resolver, tx) {
                    self.store_error("cannot record slashing", Some(&deal_id), &e);
                }
            }
            Action::WriteEvidence(ev, resolvers) => {
                let deal_id = ev.first.commitment.deal_id;
                let dir = self.cfg.data_dir.join("evidence");
                let name = format!(
                    "{deal_id}-{}.hex",
                    resolvers.iter().map(u32::to_string).collect::<Vec<_>>().join("-")
                );
                let hex = alloy_primitives::hex::encode(ev.to_wire().encode_wire());
                if let Err(e) = std::fs::create_dir_all(&dir)
                    .and_then(|()| std::fs::write(dir.join(&name), hex))
                {
                    self.store_error("cannot write evidence file", Some(&deal_id), &e);
                }
            }
        }
    }

    /// A certificate settled `deal_id`: if it named this node a non-signer
    /// although the node's own replay signed the certified digest, prove the
    /// partial on chain (`includeSigners`) while the fee is held, so the
    /// submitter does not decide who is paid. A partial the node did not
    /// replay itself (fault injection's lazy copier) is never proven.
    fn include_if_left_out(&mut self, deal_id: B256) {
        let Some(view) = self.engine.view(&deal_id) else { return };
        let (Some(_), Some(digest), Some(own)) =
            (view.commitment, view.digest, view.own_signature.clone())
        else {
            return;
        };
        let epoch = view.epoch;
        let Some(index) = self.engine.my_index(epoch) else { return };
        if self.chain.account.is_none() {
            return;
        }
        let chains: Vec<Chain> =
            self.chain.escrows.iter().map(|e| self.chain.for_escrow(*e)).collect();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let mut result = Ok(None);
            for chain in &chains {
                match include_self(chain, deal_id, epoch, index, digest, &own).await {
                    Ok(None) => {}
                    other => {
                        result = other.map_err(|e| e.to_string());
                        break;
                    }
                }
            }
            let _ = tx.send(Internal::Included { deal_id, result });
        });
    }

    /// A certificate settled `deal_id`: if the escrow holds its fee for the
    /// inclusion window and this node's account submitted the certificate
    /// (the escrow's record, not the node's own view, which may not know its
    /// transaction yet), send `distributeFee` once the chain's time is past the
    /// window (a restart forgets it; anyone may send it).
    fn distribute_when_closed(&mut self, deal_id: B256) {
        let Some(account) = self.chain.account else { return };
        if self.engine.view(&deal_id).is_none() {
            return;
        }
        let chains: Vec<Chain> =
            self.chain.escrows.iter().map(|e| self.chain.for_escrow(*e)).collect();
        tokio::spawn(async move {
            use crate::contracts::IEscrow;
            for chain in &chains {
                let held = IEscrow::heldCall { dealId: deal_id };
                let Ok(h) = chain.view(chain.escrow, held, None).await else { continue };
                if h.closesAt == 0 || h.submitter != account {
                    continue;
                }
                // Chain time, polled: the window closes by the escrow's clock.
                loop {
                    match chain.head_and_time().await {
                        Ok((_, time)) if time > h.closesAt => break,
                        _ => tokio::time::sleep(Duration::from_secs(DISTRIBUTE_POLL_SECS)).await,
                    }
                }
                let again = IEscrow::heldCall { dealId: deal_id };
                match chain.view(chain.escrow, again, None).await {
                    Ok(h) if h.closesAt != 0 => {}
                    _ => return,
                }
                let call = IEscrow::distributeFeeCall { dealId: deal_id };
                match chain.send_keyed(&format!("distribute/{deal_id}"), chain.escrow, call).await {
                    Ok(o) => {
                        info!(target: "pipeline", deal = %deal_id, tx = %o.tx_hash, "held fee split after the inclusion window");
                    }
                    Err(e) => {
                        warn!(target: "pipeline", deal = %deal_id, error = %e, "distributeFee failed");
                    }
                }
                return;
            }
        });
    }

    /// Signs `commitment` through slashing protection (fsync'd), and with
    /// `commit` the commitment to the partial too; persists the partial, and
    /// only then hands both to the engine (which gossips them).
    #[allow(clippy::too_many_arguments)]
    fn sign(
        &mut self,
        domain: &VerdictDomain,
        deal_id: B256,
        mut commitment: VerdictCommitment,
        epoch: u64,
        index: u32,
        commit: bool,
        now: Instant,
    ) {
        if !self.faults.before_sign(deal_id, &mut commitment) {
            return;
        }
        if self.engine.doppelganger().is_some() {
            return;
        }
        let (signature, commit_signature) = match self.signer.as_mut() {
            None => return,
            Some(Signing::Local(signer)) => match signer.sign(domain, &commitment) {
                Ok(s) => {
                    let c = commit.then(|| {
                        signer.sign_commit(&commit_message(deal_id, epoch, index, &s.compress()))
                    });
                    (s, c)
                }
                Err(e) => return self.engine.on_sign_refused(deal_id, e.to_string()),
            },
            Some(Signing::Remote(remote, key)) => {
                // The signer checks protection (and fsyncs) before it answers;
                // transient failures are retried here with backoff.
                let (remote, key, tx, domain) =
                    (remote.clone(), *key, self.tx.clone(), domain.clone());
                tokio::spawn(async move {
                    let mut wait = Duration::from_millis(200);
                    let result = loop {
                        let to = commit.then_some((epoch, index));
                        match remote.sign(&domain, &commitment, &key, to).await {
                            Err(crate::signer::RemoteError::Failed(e)) => {
                                warn!(target: "pipeline", deal = %deal_id, error = %e, "remote signer failed: retrying");
                                tokio::time::sleep(wait).await;
                                wait = (wait * 2).min(Duration::from_secs(10));
                            }
                            other => break other.map_err(|e| e.to_string()),
                        }
                    };
                    let _ = tx.send(Internal::RemoteSigned {
                        domain: Box::new(domain),
                        deal_id,
                        commitment: Box::new(commitment),
                        epoch,
                        index,
                        result,
                    });
                });
                return;
            }
        };
        self.signed(domain, deal_id, commitment, epoch, index, signature, commit_signature, now);
    }

    /// Persists an own partial, then hands it to the engine (which gossips it).
    #[allow(clippy::too_many_arguments)]
    fn signed(
        &mut self,
        domain: &VerdictDomain,
        deal_id: B256,
        commitment: VerdictCommitment,
        epoch: u64,
        index: u32,
        signature: resolvd_consensus::Signature,
        commit_signature: Option<resolvd_consensus::Signature>,
        now: Instant,
    ) {
        let partial = SignedVerdict {
            commitment,
            epoch,
            signer_index: index,
            signature: signature.compress(),
        };
        if let Err(e) = self.store.put_partial(&partial) {
            // The protection record is durable; the partial is re-derivable
            // (re-signing the same commitment is allowed).
            self.store_error("cannot persist own partial", Some(&deal_id), &e);
        }
        let equivocation = self.faults.after_signed(domain, &partial);
        let commit = commit_signature.map(|c| PartialCommit::of(&partial, c.compress()));
        self.engine.on_signed(partial, commit, now);
        if let Some(p) = equivocation {
            self.engine.on_signed(p, None, now);
        }
    }

    fn publish(&mut self, gossip: Gossip) {
        let (topic, bytes) = gossip.encode();
        match self.swarm.behaviour_mut().gossipsub.publish(topic.ident(), bytes) {
            Ok(_) | Err(gossipsub::PublishError::Duplicate) => {}
            Err(
                gossipsub::PublishError::NoPeersSubscribedToTopic
                | gossipsub::PublishError::AllQueuesFull(_),
            ) => {
                if self.outbox.len() < 1024 {
                    self.outbox.push(gossip);
                }
            }
            Err(e) => warn!(target: "p2p", ?topic, error = %e, "publish failed"),
        }
    }

    fn report(&mut self, origin: &Origin, topic: Topic, acceptance: MessageAcceptance) {
        let result = match acceptance {
            MessageAcceptance::Accept => "accept",
            MessageAcceptance::Ignore => "ignore",
            MessageAcceptance::Reject => "reject",
        };
        self.shared
            .metrics
            .gossip
            .get_or_create(&GossipLabel { topic: topic.label(), result })
            .inc();
        let _ = self.swarm.behaviour_mut().gossipsub.report_message_validation_result(
            &origin.id,
            &origin.peer,
            acceptance,
        );
    }

    // ------------------------------------------------------------ p2p events

    fn on_swarm(&mut self, event: SwarmEvent<BehaviourEvent>) {
        let now = Instant::now();
        match event {
            SwarmEvent::Behaviour(BehaviourEvent::Gossipsub(gossipsub::Event::Message {
                propagation_source,
                message_id,
                message,
            })) => {
                let origin = Origin { id: message_id, peer: propagation_source };
                match p2p::decode_gossip(&message) {
                    Ok((_, gossip)) => self.engine.on_gossip(origin, gossip, now),
                    Err(e) => {
                        warn!(target: "p2p", peer = %origin.peer, error = %e, "rejecting malformed gossip");
                        let topic = match e {
                            p2p::GossipError::Malformed(topic, _) => Some(topic),
                            p2p::GossipError::UnknownTopic => None,
                        };
                        match topic {
                            Some(topic) => self.report(&origin, topic, MessageAcceptance::Reject),
                            None => {
                                let _ = self
                                    .swarm
                                    .behaviour_mut()
                                    .gossipsub
                                    .report_message_validation_result(
                                        &origin.id,
                                        &origin.peer,
                                        MessageAcceptance::Reject,
                                    );
                            }
                        }
                    }
                }
            }
            SwarmEvent::Behaviour(BehaviourEvent::Content(event)) => {
                let served = self.tx_served();
                let stored = self.content.on_event(&mut self.swarm, &self.store, &served, event);
                if stored {
                    self.engine.on_content_stored(now);
                }
            }
            SwarmEvent::ConnectionEstablished { peer_id, endpoint, connection_id, .. } => {
                if !self.content.admit(&mut self.swarm, peer_id, connection_id, &endpoint) {
                    return;
                }
                if let libp2p::core::ConnectedPoint::Dialer { address, .. } = endpoint {
                    self.connected.insert(address, peer_id);
                }
                self.peers_at = None;
                debug!(target: "p2p", %peer_id, "connected");
            }
            SwarmEvent::ConnectionClosed { peer_id, connection_id, num_established, .. } => {
                self.content.closed(connection_id);
                if num_established == 0 {
                    self.connected.retain(|_, p| *p != peer_id);
                    self.peers_at = None;
                    debug!(target: "p2p", %peer_id, "disconnected");
                }
            }
            SwarmEvent::NewListenAddr { address, .. } => {
                info!(target: "p2p", %address, "listening");
            }
            _ => {}
        }
    }

    fn tx_served(&self) -> impl Fn(Served) + Send + Sync + Clone + 'static {
        let tx = self.tx.clone();
        move |s| {
            let _ = tx.send(Internal::Served(s));
        }
    }

    // ------------------------------------------------------------ internal events

    fn on_internal(&mut self, msg: Internal) {
        let now = Instant::now();
        match msg {
            Internal::Head { head, time } => self.engine.on_head(head, time),
            Internal::Included { deal_id, result } => {
                let note = match result {
                    Ok(None) => return,
                    Ok(Some(tx)) => {
                        info!(target: "pipeline", deal = %deal_id, %tx, "left out of the certificate: own partial included");
                        format!("included {tx}")
                    }
                    Err(e) => {
                        warn!(target: "pipeline", deal = %deal_id, error = %e, "left out of the certificate: inclusion failed");
                        format!("failed: {e}")
                    }
                };
                self.inclusions.retain(|(d, _)| *d != deal_id);
                self.inclusions.push_back((deal_id, note));
                while self.inclusions.len() > MAX_INCLUSIONS {
                    self.inclusions.pop_front();
                }
            }
            Internal::Reorg { from, disputed, settled, depth } => {
                self.shared.metrics.reorgs.inc();
                self.shared.metrics.reorg_depth.set(depth as i64);
                self.engine.on_reorg(from, &disputed, &settled, now);
                let back = from.saturating_sub(1).min(self.cursor);
                match self.store.set_cursor(CURSOR, back) {
                    Ok(()) => self.cursor = back,
                    Err(e) => self.store_error("cannot rewind the chain cursor", None, &e),
                }
            }
            Internal::Batch { events, to, hash, head, time } => {
                self.engine.on_head(head, time);
                let errors_before = self.shared.metrics.store_errors.get();
                for event in events {
                    self.on_chain_event(event, now);
                }
                // Persist what the batch produced (disputes seen) before the
                // cursor moves past it: a crash replays the batch, and
                // handling is idempotent.
                self.drive();
                if self.shared.metrics.store_errors.get() != errors_before {
                    warn!(target: "store", to, "records of this batch failed to persist: cursor not advanced");
                    return;
                }
                match self.store.set_cursor_at(CURSOR, to, hash) {
                    Ok(()) => self.cursor = to,
                    Err(e) => self.store_error("cannot persist the chain cursor", None, &e),
                }
            }
            Internal::Confirmed { announcement, source, result } => {
                self.engine.on_confirmed(*announcement, source, result, now);
            }
            Internal::Committee { epoch, result } => {
                let result = result.map(|(committee, reveal)| {
                    self.engine.set_commit_reveal(reveal);
                    committee
                });
                self.engine.on_committee(epoch, result, now);
            }
            Internal::AnchorChecked { request, result } => {
                self.engine.on_anchor_checked(request, result, now)
            }
            Internal::Replayed { deal_id, result } => self.engine.on_replayed(deal_id, result, now),
            Internal::Submitted { deal_id, result } => {
                self.engine.on_submitted(deal_id, result, now)
            }
            Internal::Slashed { deal_id, resolvers, result } => {
                self.engine.on_slashed(deal_id, resolvers, result, now);
            }
            Internal::Served(served) => self.content.respond(&mut self.swarm, served),
            Internal::RemoteSigned { domain, deal_id, commitment, epoch, index, result } => {
                match result {
                    Ok((sig, commit)) if self.engine.doppelganger().is_none() => {
                        self.signed(&domain, deal_id, *commitment, epoch, index, sig, commit, now);
                    }
                    Ok(_) => {}
                    Err(e) => self.engine.on_sign_refused(deal_id, e),
                }
            }
        }
    }

    fn on_chain_event(&mut self, event: ChainEvent, now: Instant) {
        match event {
            ChainEvent::Disputed(a) => self.engine.on_disputed_log(*a, now),
            ChainEvent::SpecPublished { spec, anchor } => {
                for (tag, bytes) in [("spec", spec), ("prestate-anchor", anchor)] {
                    if let Err(e) = self.store.put_content(tag, &bytes) {
                        self.store_error("storing published content", None, &e);
                    }
                }
                self.engine.on_content_stored(now);
            }
            ChainEvent::DeliveryPublished { delivery } => {
                if let Err(e) = self.store.put_content("delivery", &delivery) {
                    self.store_error("storing published delivery", None, &e);
                }
                self.engine.on_content_stored(now);
            }
            ChainEvent::VerdictCommitted { deal_id, tx_hash, .. } => {
                self.engine.on_settled_log(deal_id, Some(tx_hash), now);
                self.include_if_left_out(deal_id);
                self.distribute_when_closed(deal_id);
            }
            ChainEvent::Settled { deal_id, .. } => self.engine.on_settled_log(deal_id, None, now),
            ChainEvent::EpochStarted { epoch } => self.engine.on_epoch(epoch),
            ChainEvent::Slashed { resolver, deal_id } => {
                if let Ok(r) = u32::try_from(resolver) {
                    info!(target: "slasher", deal = %deal_id, resolver, "slashed on chain");
                    self.engine.on_slashed_log(deal_id, r);
                }
            }
        }
    }

    // ------------------------------------------------------------ timers

    fn on_tick(&mut self) {
        let now = Instant::now();
        if self.silent_until.is_some_and(|t| now >= t) {
            self.silent_until = None;
            if self.engine.doppelganger().is_none() {
                info!(target: "node", held = self.held_signs.len(), "doppelganger wait over: no other instance of this key seen; signing");
                for (domain, deal, commitment, epoch, index, commit) in
                    std::mem::take(&mut self.held_signs)
                {
                    self.sign(&domain, deal, commitment, epoch, index, commit, now);
                }
            }
        }
        self.engine.on_tick(now);
        for forged in self.faults.on_tick(&self.engine) {
            self.publish(forged);
        }
        if self.swarm.connected_peers().next().is_some() {
            for g in std::mem::take(&mut self.outbox) {
                self.publish(g);
            }
        }
        self.content.on_tick(&mut self.swarm, now);
        // Re-dial bootstrap peers we are not connected to.
        if self.last_dial.elapsed() >= Duration::from_secs(3) {
            self.last_dial = now;
            for addr in self.bootstrap.clone() {
                if !self.connected.contains_key(&addr) {
                    if let Err(e) = self.swarm.dial(addr.clone()) {
                        debug!(target: "p2p", %addr, error = %e, "dial failed");
                    }
                }
            }
        }
    }

    fn publish_status(&mut self) {
        let now = Instant::now();
        if self.peers_at.is_none_or(|at| now.duration_since(at) >= PEER_SCORES_EVERY) {
            let gossipsub = &self.swarm.behaviour().gossipsub;
            self.peer_status = self
                .swarm
                .connected_peers()
                .map(|p| PeerStatus { id: p.to_string(), score: gossipsub.peer_score(p) })
                .collect();
            self.peers_at = Some(now);
        }
        let peers = self.peer_status.clone();
        let metrics = &self.shared.metrics;
        metrics.peers.set(peers.len() as i64);
        let in_flight = self.engine.in_flight();
        metrics.disputes_in_flight.set(in_flight as i64);
        metrics.disputes_in_memory.set(self.engine.len() as i64);
        let head = self.engine.head();
        metrics.chain_head.set(i64::try_from(head).unwrap_or(i64::MAX));
        metrics.chain_head_lag.set(i64::try_from(head.saturating_sub(self.cursor)).unwrap_or(0));
        let epoch = self.engine.current_epoch();
        let rpc_endpoints = self.chain.endpoints();
        crate::observe::endpoints(metrics, &rpc_endpoints);
        let status = Status {
            peer_id: self.swarm.local_peer_id().to_string(),
            listen: self.swarm.listeners().map(ToString::to_string).collect(),
            peers,
            banned: self.content.banned().map(ToString::to_string).collect(),
            chain_id: self.chain.chain_id,
            escrow: self.chain.escrow,
            escrows: self.chain.escrows.clone(),
            registry: self.chain.registry,
            account: self.chain.account,
            account_balance_wei: self
                .balance
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .map(|b| b.to_string()),
            account_gas_cap_wei: self.chain.account.map(|_| gas_cap(&self.cfg).to_string()),
            economics: self
                .ledger
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
            bls_key: self.my_key.map(|k| alloy_primitives::hex::encode(k.compress())),
            head: self.engine.head(),
            cursor: self.cursor,
            epoch,
            signer_index: self.engine.my_index(epoch),
            rpc_endpoints,
            disputes: self.engine.views().map(|d| (d.deal_id, d)).collect(),
            inclusions: self.inclusions.iter().cloned().collect(),
        };
        *self.shared.status.write().unwrap_or_else(std::sync::PoisonError::into_inner) = status;
    }
}

/// Every `pipeline.ledger_refresh_secs`: the fee ledger brought up to the confirmed block, persisted,
/// exported as metrics and shown in `/status`. The resolver index is the
/// one `/status` shows (the last one known once the node left the committee).
fn spawn_ledger(
    cfg: &NodeConfig,
    chain: &Chain,
    store: &Arc<Store>,
    shared: &Arc<Shared>,
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
    tokio::spawn(async move {
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
                    ledger.gas_spent_wei =
                        base + alloy_primitives::U256::from(chain.gas_spent_wei());
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

/// What one large transaction may cost at the fee cap: 1M gas (about two
/// `resolve`s of a large committee) × `chain.max_fee_per_gas`. The start-up
/// balance warning, `/status` and the metrics all use it.
fn gas_cap(cfg: &NodeConfig) -> alloy_primitives::U256 {
    alloy_primitives::U256::from(1_000_000u64)
        * alloy_primitives::U256::from(cfg.chain.max_fee_per_gas)
}

async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Sends `resolve` unless the deal is already settled, and classifies the result.
async fn submit(chain: &Chain, deal_id: B256, qc: &QuorumCertificate) -> SubmitResult {
    match chain.still_disputed(deal_id).await {
        Ok(Confirmation::Disputed) => {}
        Ok(_) => return SubmitResult::AlreadyResolved,
        Err(e) => return SubmitResult::Failed(e.to_string()),
    }
    match chain.resolve(qc).await {
        Ok(o) => SubmitResult::Sent { tx: o.tx_hash, gas: o.gas_used },
        Err(ChainError::Reverted { data, .. }) if crate::chain::is_already_resolved(&data) => {
            SubmitResult::AlreadyResolved
        }
        Err(ChainError::Reverted { data, reason })
            if crate::chain::is_certificate_rejection(&data) =>
        {
            SubmitResult::Rejected(reason)
        }
        Err(e) => SubmitResult::Failed(e.to_string()),
    }
}

/// Sends `includeSigners` with this node's partial if `chain`'s escrow holds
/// the fee of `deal_id` for the same digest and names this node a
/// non-signer; `None` if it does not.
async fn include_self(
    chain: &Chain,
    deal_id: B256,
    epoch: u64,
    index: u32,
    digest: B256,
    own: &alloy_primitives::Bytes,
) -> Result<Option<B256>, ChainError> {
    use crate::contracts::{IEscrow, IRegistry};
    use alloy_primitives::{Bytes, U256};
    let held = chain.view(chain.escrow, IEscrow::heldCall { dealId: deal_id }, None).await?;
    if held.closesAt == 0 || held.digest != digest {
        return Ok(None);
    }
    let at = IRegistry::positionOfCall { epoch: U256::from(epoch), index: U256::from(index) };
    let position: usize = chain.view(chain.registry, at, None).await?.saturating_to();
    let word = IEscrow::nonSignerBitsCall { dealId: deal_id, word: U256::from(position >> 8) };
    let bits: U256 = chain.view(chain.escrow, word, None).await?;
    // Bit `p & 7` of byte `p >> 3` of the bitmap; a word is 32 bytes, big-endian.
    if !bits.bit(8 * (31 - ((position & 255) >> 3)) + (position & 7)) {
        return Ok(None);
    }
    let signature = resolvd_consensus::Signature::from_compressed(own)
        .map_err(|e| ChainError::Unexpected(format!("own partial: {e}")))?;
    let mut signers = vec![0u8; position / 8 + 1];
    signers[position / 8] |= 1 << (position % 8);
    let call = IEscrow::includeSignersCall {
        dealId: deal_id,
        signers: Bytes::from(signers),
        signature: Bytes::copy_from_slice(&signature.to_eip2537()),
    };
    let out = chain.send_keyed(&format!("include/{deal_id}"), chain.escrow, call).await?;
    Ok(Some(out.tx_hash))
}

async fn slash(chain: &Chain, resolvers: &[u32], a: Evidence, b: Evidence) -> SlashResult {
    let run = async {
        let mut all = true;
        for r in resolvers {
            all &= chain.is_slashed(*r).await?;
        }
        if all {
            return Ok(None);
        }
        match chain.slash(a, b).await {
            Ok(o) => Ok(Some(o.tx_hash)),
            Err(ChainError::Reverted { data, .. }) if crate::chain::is_already_slashed(&data) => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    };
    match run.await {
        Ok(tx) => SlashResult::Done(tx),
        Err(e) => SlashResult::Failed(e.to_string()),
    }
}

/// Batches the watcher remembers for reorg detection.
const REORG_MEMORY: usize = 256;
/// After a restart only the cursor's hash is known: if that block is no
/// longer canonical, re-scan this many blocks below it.
const RESTART_REWIND: u64 = 64;

/// A batch handed to the loop: its range, the hash of its last block, and the
/// deals whose `Disputed` / `Settled` logs it carried.
struct Handled {
    from: u64,
    to: u64,
    hash: B256,
    disputed: Vec<B256>,
    settled: Vec<B256>,
}

enum Step {
    Idle {
        head: u64,
        time: u64,
    },
    Batch {
        events: Vec<ChainEvent>,
        handled: Handled,
        head: u64,
        time: u64,
    },
    Reorg {
        from: u64,
        disputed: Vec<B256>,
        settled: Vec<B256>,
        depth: u64,
    },
    /// The range's last block changed while its logs were read: read again.
    Raced,
    /// The endpoint has not reached the last handled block (a backup that
    /// lags after a failover): unknown, not a reorg; wait.
    Behind {
        head: u64,
        handled: u64,
    },
}

/// The chain watcher: confirmed log ranges, in order, with backoff on errors.
/// Before each step it checks that the last handled block is still
/// canonical; if not it walks back through the remembered batches to the
/// newest one still canonical, reports the logs it had handled above it
/// (undone by the loop and the engine) and re-scans from there. An endpoint
/// that has no block yet at a handled height (a backup behind the endpoint
/// that failed) is no evidence of a reorg: the watcher waits for it; only
/// another block at a handled height is.
#[allow(clippy::too_many_arguments)]
async fn watch(
    mut heads: Option<std::pin::Pin<Box<dyn futures::Stream<Item = u64> + Send>>>,
    chain: Chain,
    tx: mpsc::UnboundedSender<Internal>,
    mut next: u64,
    last: Option<(u64, B256)>,
    confirmations: Confirmations,
    poll: Duration,
    max_range: u64,
) {
    let mut handled: VecDeque<Handled> = VecDeque::new();
    if let Some((to, hash)) = last {
        let from = to.saturating_sub(RESTART_REWIND).max(1);
        handled.push_back(Handled { from, to, hash, disputed: Vec::new(), settled: Vec::new() });
    }
    let mut backoff = poll;
    let mut behind = false;
    loop {
        let step = async {
            if let Some(newest) = handled.back() {
                let tip = newest.to;
                let at_tip = chain.block_hash(tip).await?;
                if at_tip != Some(newest.hash) {
                    // Which remembered batches does the endpoint still have?
                    // One it has no block for yet says nothing (a lagging
                    // endpoint); a reorg is another block at a height.
                    let head = chain.head().await?;
                    let (mut gone, mut differs) = (0, at_tip.is_some());
                    for b in handled.iter().rev() {
                        if b.to <= head {
                            match chain.block_hash(b.to).await? {
                                Some(h) if h == b.hash => break,
                                Some(_) => differs = true,
                                None => {}
                            }
                        }
                        gone += 1;
                    }
                    if !differs {
                        return Ok::<_, ChainError>(Step::Behind { head, handled: tip });
                    }
                    let (mut disputed, mut settled, mut from) = (Vec::new(), Vec::new(), next);
                    for _ in 0..gone {
                        let b = handled.pop_back().expect("counted above");
                        from = b.from;
                        disputed.extend(b.disputed);
                        settled.extend(b.settled);
                    }
                    let depth = tip + 1 - from;
                    return Ok(Step::Reorg { from, disputed, settled, depth });
                }
            }
            let c = chain.confirmed(confirmations).await?;
            if next > c.block {
                return Ok(Step::Idle { head: c.head, time: c.time });
            }
            let to = c.block.min(next + max_range - 1);
            let Some(hash) = chain.block_hash(to).await? else { return Ok(Step::Raced) };
            let events = chain.events(next, to).await?;
            if chain.block_hash(to).await? != Some(hash) {
                return Ok(Step::Raced);
            }
            let mut handled =
                Handled { from: next, to, hash, disputed: Vec::new(), settled: Vec::new() };
            for e in &events {
                match e {
                    ChainEvent::Disputed(a) => handled.disputed.push(a.deal_id),
                    ChainEvent::Settled { deal_id, .. } => handled.settled.push(*deal_id),
                    _ => {}
                }
            }
            Ok(Step::Batch { events, handled, head: c.head, time: c.time })
        };
        let step = step.await;
        if behind && !matches!(step, Ok(Step::Behind { .. }) | Err(_)) {
            info!(target: "chain", "the rpc endpoint caught up with the blocks already handled");
            behind = false;
        }
        let sent = match step {
            Ok(Step::Batch { events, handled: batch, head, time }) => {
                backoff = poll;
                next = batch.to + 1;
                let (to, hash) = (batch.to, batch.hash);
                handled.push_back(batch);
                if handled.len() > REORG_MEMORY {
                    handled.pop_front();
                }
                tx.send(Internal::Batch { events, to, hash, head, time })
            }
            Ok(Step::Reorg { from, disputed, settled, depth }) => {
                warn!(target: "chain", from, depth, disputes = disputed.len(), settlements = settled.len(), "reorg: re-scanning from the common ancestor");
                next = from;
                tx.send(Internal::Reorg { from, disputed, settled, depth })
            }
            Ok(Step::Raced) => continue,
            Ok(Step::Behind { head, handled }) => {
                if !behind {
                    warn!(target: "chain", head, handled, "the rpc endpoint is behind the blocks already handled (a lagging backup?): waiting for it, not a reorg");
                    behind = true;
                }
                tokio::time::sleep(poll).await;
                continue;
            }
            Ok(Step::Idle { head, time }) => {
                backoff = poll;
                let sent = tx.send(Internal::Head { head, time });
                // A WebSocket head wakes the watcher early; polling stays the
                // source of truth (heads may repeat or skip).
                match heads.as_mut() {
                    Some(h) => {
                        if let Ok(None) =
                            tokio::time::timeout(poll, futures::StreamExt::next(h)).await
                        {
                            heads = None; // ended: poll only
                        }
                    }
                    None => tokio::time::sleep(poll).await,
                }
                sent
            }
            Err(e) => {
                warn!(target: "chain", error = %e, retry_in = ?backoff, "chain watcher error");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_WATCH_BACKOFF);
                Ok(())
            }
        };
        if sent.is_err() {
            return;
        }
    }
}
