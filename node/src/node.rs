//! The daemon: one event loop that owns the dispute state machines and is
//! driven by events from the edges — gossip and content responses (p2p),
//! confirmed logs (chain watcher), replay results (blocking worker pool),
//! transaction results (submitter, slasher) and a timer.
//!
//! Per dispute: `confirming` (the node's own RPC must agree the deal is
//! disputed) → `fetching` (spec, delivery, anchor, witness: local store, then
//! every connected peer; bytes are hashed before they are stored) →
//! `replaying` (bounded `spawn_blocking` pool) → `signed` (slashing protection
//! fsync'd, partial persisted, then gossiped) → `certified` (batch-verified
//! partials reached the threshold, or a verified certificate arrived) →
//! `settled`. Operational errors go back to `fetching` with backoff until the
//! resolve deadline; they are never signed.

use crate::{
    chain::{is_already_resolved, is_already_slashed, Chain, ChainError, ChainEvent, TxOutcome},
    config::{Byzantine, NodeConfig},
    contracts::{deal_state, Evidence},
    metrics::{GossipLabel, Metrics},
    p2p::{self, Behaviour, BehaviourEvent, Gossip, P2pConfig, Topic},
    store::{DisputeStatus, SharedStore, Store},
};
use alloy_primitives::{keccak256, Address, Bytes, B256};
use futures::StreamExt;
use libp2p::{
    gossipsub::{self, MessageAcceptance, MessageId},
    identity,
    request_response::{self, OutboundRequestId},
    swarm::SwarmEvent,
    Multiaddr, PeerId, Swarm,
};
use resolvd_consensus::{
    protection::ProtectedSigner, Attestation, BuilderEvent, CertificateBuilder, Committee,
    ConflictDetector, ConflictEvidence, PublicKey, Queued, QuorumCertificate, SecretKey, Signature,
};
use resolvd_proto::{
    decode_committed,
    wire::{
        ContentRequest, ContentResponse, ContentUnavailable, DisputeAnnouncement, SignedVerdict,
        WireMessage,
    },
    Canonical, DeliveryV1, ReexecRequestV1, ReexecVerdict, VerdictCommitment, VerdictDomain,
    VerdictEnvelopeV1,
};
use resolvd_replay::EvmBackend;
use serde::Serialize;
use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::{Arc, RwLock},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};
use tokio::sync::{mpsc, Semaphore};
use tracing::{debug, error, info, warn};

/// Chain cursor name in the store.
pub const CURSOR: &str = "chain";
/// Partials queued within this window are verified in one batch.
const BATCH_WINDOW: Duration = Duration::from_millis(5);

async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// How often a node re-gossips its own partial and a certificate of an unsettled dispute.
const REPUBLISH: Duration = Duration::from_secs(4);
/// Most peers asked for one piece of content at once.
const FETCH_FANOUT: usize = 8;
/// Longest retry backoff.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Where a dispute is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Waiting for content (or retrying after an operational error).
    Fetching,
    /// Replay queued or running.
    Replaying,
    /// This node signed; waiting for a certificate.
    Signed,
    /// Replayed, but this node is not a member of the dispute's epoch.
    Observing,
    /// Slashing protection refused a different commitment (never signed).
    Refused,
    /// A certificate is held; submission pending.
    Certified,
    /// Settled on chain.
    Settled,
    /// Past the resolve deadline unsettled.
    Expired,
}

/// The API view of one dispute.
#[derive(Clone, Debug, Serialize)]
pub struct DisputeView {
    /// Deal id.
    pub deal_id: B256,
    /// Phase.
    pub phase: Phase,
    /// Pinned committee epoch.
    pub epoch: u64,
    /// Unix deadline for `resolve`.
    pub resolve_deadline: u64,
    /// The commitment this node's replay produced.
    pub commitment: Option<VerdictCommitment>,
    /// Its EIP-712 digest.
    pub digest: Option<B256>,
    /// This node's partial signature (compressed G2, hex).
    pub own_signature: Option<Bytes>,
    /// Verified signers per digest.
    pub signers: BTreeMap<B256, Vec<u32>>,
    /// Non-signers of the certificate held, if any.
    pub certificate_non_signers: Option<Vec<u32>>,
    /// The certified outcome.
    pub certified_outcome: Option<ReexecVerdict>,
    /// This node's successful `resolve` transaction.
    pub resolve_tx: Option<B256>,
    /// Gas used by it.
    pub resolve_gas: Option<u64>,
    /// The `resolve` transaction that settled it (whoever sent it).
    pub settled_by: Option<B256>,
    /// Milliseconds from first seeing the dispute to holding a certificate.
    pub certificate_ms: Option<u64>,
    /// Milliseconds from first seeing the dispute to seeing it settled.
    pub settlement_ms: Option<u64>,
    /// The last operational error.
    pub last_error: Option<String>,
}

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
    /// Escrow.
    pub escrow: Address,
    /// Registry.
    pub registry: Address,
    /// Transaction account.
    pub account: Option<Address>,
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
    /// Disputes (all phases).
    pub disputes: BTreeMap<B256, DisputeView>,
}

/// State shared with the HTTP API.
#[derive(Debug)]
pub struct Shared {
    /// The database.
    pub store: Arc<Store>,
    /// Metrics.
    pub metrics: Metrics,
    /// Latest status snapshot.
    pub status: RwLock<Status>,
    /// Tells the loop that content was added through the API.
    pub content_added: mpsc::UnboundedSender<B256>,
}

struct Dispute {
    info: DisputeAnnouncement,
    view: DisputeView,
    seen: Instant,
    next_attempt: Instant,
    backoff: Duration,
    own: Option<SignedVerdict>,
    extra: Vec<SignedVerdict>,
    certificate: Option<QuorumCertificate>,
    submit_at: Option<Instant>,
    submitting: bool,
    last_publish: Instant,
}

enum Submission {
    Sent(TxOutcome),
    AlreadyResolved,
}

struct SlashTask {
    deal_id: B256,
    first: Attestation,
    second: Attestation,
    resolvers: Vec<u32>,
    at: Instant,
    running: bool,
}

enum Internal {
    Batch {
        events: Vec<ChainEvent>,
        to: u64,
        head: u64,
    },
    Head(u64),
    Confirmed {
        announcement: Box<DisputeAnnouncement>,
        result: Result<bool, ChainError>,
        from_chain: bool,
    },
    Committee {
        epoch: u64,
        result: Result<Committee, ChainError>,
    },
    Replayed {
        deal_id: B256,
        result: Result<VerdictEnvelopeV1, String>,
    },
    Submitted {
        deal_id: B256,
        result: Result<Submission, ChainError>,
    },
    Slash {
        deal_id: B256,
        resolvers: Vec<u32>,
        result: Result<Option<TxOutcome>, ChainError>,
    },
}

/// Where a gossip message came from (to report its validation result).
type Origin = (MessageId, PeerId);

/// The running node.
pub struct Node {
    cfg: NodeConfig,
    shared: Arc<Shared>,
    store: Arc<Store>,
    chain: Chain,
    domain: VerdictDomain,
    swarm: Swarm<Behaviour>,
    signer: Option<ProtectedSigner<SharedStore>>,
    raw_key: Option<SecretKey>,
    my_key: Option<PublicKey>,
    committees: BTreeMap<u64, Committee>,
    loading: HashSet<u64>,
    builders: BTreeMap<u64, CertificateBuilder>,
    conflict: ConflictDetector,
    disputes: HashMap<B256, Dispute>,
    buffered: Vec<(SignedVerdict, Option<Origin>)>,
    deferred: HashMap<(B256, u32), (SignedVerdict, Vec<Origin>)>,
    confirming: HashMap<B256, Vec<Origin>>,
    chain_confirming: HashSet<B256>,
    fetches: HashMap<OutboundRequestId, (ContentRequest, PeerId)>,
    fetching: HashSet<B256>,
    banned: HashSet<PeerId>,
    slashes: Vec<SlashTask>,
    outbox: Vec<Gossip>,
    bootstrap: Vec<Multiaddr>,
    connected: HashMap<Multiaddr, PeerId>,
    last_dial: Instant,
    tx: mpsc::UnboundedSender<Internal>,
    rx: mpsc::UnboundedReceiver<Internal>,
    content_rx: mpsc::UnboundedReceiver<B256>,
    replays: Arc<Semaphore>,
    head: u64,
    cursor: u64,
    crash_armed: bool,
    /// When the queued partials are verified (a short batching window).
    process_at: Option<tokio::time::Instant>,
}

fn flip(outcome: ReexecVerdict) -> ReexecVerdict {
    match outcome {
        ReexecVerdict::Reproduced => ReexecVerdict::Failed,
        ReexecVerdict::Failed => ReexecVerdict::Reproduced,
    }
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The deterministic submitter order of `deal_id`: `members` sorted by
/// `keccak256(dealId ‖ index)`. Returns `me`'s rank (`members.len()` if absent).
/// Every node computes the same order from the committee alone, and the first
/// submitter rotates from deal to deal.
pub fn submit_rank(deal_id: &B256, members: &[u32], me: u32) -> usize {
    let key = |i: &u32| {
        let mut pre = deal_id.to_vec();
        pre.extend_from_slice(&i.to_be_bytes());
        keccak256(pre)
    };
    let mut order = members.to_vec();
    order.sort_by_key(key);
    order.into_iter().position(|i| i == me).unwrap_or(members.len())
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

impl Node {
    /// Opens the store, loads keys, connects to the chain and the network.
    pub async fn start(cfg: NodeConfig) -> eyre::Result<(Self, Arc<Shared>)> {
        cfg.validate()?;
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
            (Some(k), Some(p)) => Some(crate::chain::load_account(k, p)?),
            _ => None,
        };
        let mut chain = None;
        let mut wait = Duration::from_millis(200);
        for attempt in 0..10 {
            match Chain::connect(&cfg.chain.rpc_url, cfg.chain.escrow, account.clone()).await {
                Ok(c) => {
                    chain = Some(c);
                    break;
                }
                Err(e) => {
                    warn!(target: "chain", attempt, error = %e, "cannot reach the chain yet");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
            }
        }
        let chain =
            chain.ok_or_else(|| eyre::eyre!("chain at {} unreachable", cfg.chain.rpc_url))?;
        let domain = chain.domain();
        let p2p_config = P2pConfig {
            listen: cfg.p2p.listen.parse().map_err(|e| eyre::eyre!("p2p.listen: {e}"))?,
            heartbeat: Duration::from_millis(cfg.p2p.heartbeat_ms.max(50)),
            mesh: cfg.p2p.mesh,
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
        let shared = Arc::new(Shared {
            store: store.clone(),
            metrics: Metrics::default(),
            status: RwLock::new(Status::default()),
            content_added: content_tx,
        });
        let cursor = store.cursor(CURSOR)?.unwrap_or(cfg.chain.start_block.saturating_sub(1));
        let my_key = secret.as_ref().map(SecretKey::public_key);
        let raw_key = match cfg.fault.byzantine {
            Some(Byzantine::Equivocate) => secret.clone(),
            _ => None,
        };
        let signer = secret.map(|s| ProtectedSigner::new(s, SharedStore(store.clone())));
        let crash_armed = cfg.fault.crash_after_persist;
        let mut node = Self {
            replays: Arc::new(Semaphore::new(cfg.pipeline.replay_workers)),
            conflict: ConflictDetector::new(domain.clone()),
            cfg,
            shared: shared.clone(),
            store,
            chain,
            domain,
            swarm,
            signer,
            raw_key,
            my_key,
            committees: BTreeMap::new(),
            loading: HashSet::new(),
            builders: BTreeMap::new(),
            disputes: HashMap::new(),
            buffered: Vec::new(),
            deferred: HashMap::new(),
            confirming: HashMap::new(),
            chain_confirming: HashSet::new(),
            fetches: HashMap::new(),
            fetching: HashSet::new(),
            banned: HashSet::new(),
            slashes: Vec::new(),
            outbox: Vec::new(),
            bootstrap,
            connected: HashMap::new(),
            last_dial: Instant::now() - Duration::from_secs(60),
            tx,
            rx,
            content_rx,
            head: 0,
            cursor,
            crash_armed,
            process_at: None,
        };
        let epoch = node.chain.view(
            node.chain.registry,
            crate::contracts::IRegistry::currentEpochCall {},
            None,
        );
        let epoch = u64::try_from(epoch.await?).unwrap_or(u64::MAX);
        if epoch > 0 {
            let committee = node.chain.committee(epoch).await?;
            node.add_committee(committee);
        }
        node.restore().await?;
        Ok((node, shared))
    }

    /// Re-opens the disputes the database holds: own partials are re-gossiped,
    /// received partials and certificates re-enter the builders.
    async fn restore(&mut self) -> eyre::Result<()> {
        for (info, status) in self.store.disputes()? {
            let deal_id = info.deal_id;
            if !self.committees.contains_key(&info.epoch) {
                let committee = self.chain.committee(info.epoch).await?;
                self.add_committee(committee);
            }
            let mut d = Dispute::new(info);
            d.view.phase = match status {
                DisputeStatus::Active => Phase::Fetching,
                DisputeStatus::Settled => Phase::Settled,
                DisputeStatus::Expired => Phase::Expired,
            };
            let me = self.my_index(d.info.epoch);
            for p in self.store.partials(&deal_id)? {
                if Some(p.signer_index) == me && d.own.is_none() {
                    d.view.commitment = Some(p.commitment);
                    d.view.digest = Some(p.commitment.eip712_digest(&self.domain));
                    d.view.own_signature = Some(Bytes::copy_from_slice(&p.signature));
                    if status == DisputeStatus::Active {
                        d.view.phase = Phase::Signed;
                        self.outbox.push(Gossip::Verdict(p.clone()));
                    }
                    d.own = Some(p.clone());
                }
                if status == DisputeStatus::Active {
                    self.queue_partial(p, None);
                }
            }
            if let Some(c) = self.store.certificate(&deal_id)? {
                if let Ok(qc) = QuorumCertificate::from_wire(&c) {
                    if status == DisputeStatus::Active {
                        d.view.phase = Phase::Certified;
                        d.submit_at = Some(Instant::now());
                    }
                    d.view.certificate_non_signers = Some(qc.non_signers.clone());
                    d.view.certified_outcome = Some(qc.commitment.outcome);
                    d.certificate = Some(qc);
                }
            }
            if d.view.phase == Phase::Fetching {
                // Recorded but not worked on yet (e.g. a crash right after the
                // log was seen): re-check the chain before doing any work.
                info!(target: "node", deal = %deal_id, "restored dispute: re-checking its state");
                self.retry_confirm(d.info);
                continue;
            }
            info!(target: "node", deal = %deal_id, phase = ?d.view.phase, "restored dispute");
            self.disputes.insert(deal_id, d);
        }
        self.restore_evidence().await
    }

    /// Evidence found before a restart and not yet dealt with on chain is
    /// scheduled again: its slash task lived only in memory, and its gossip
    /// may never have reached a peer.
    async fn restore_evidence(&mut self) -> eyre::Result<()> {
        let Ok(entries) = std::fs::read_dir(self.cfg.data_dir.join("evidence")) else {
            return Ok(());
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
            let (first, second) = match decoded {
                Ok(pair) => pair,
                Err(error) => {
                    warn!(target: "slasher", file = %path.display(), %error, "unreadable evidence file");
                    continue;
                }
            };
            for epoch in [first.epoch, second.epoch] {
                if !self.committees.contains_key(&epoch) {
                    let committee = self.chain.committee(epoch).await?;
                    self.add_committee(committee);
                }
            }
            match ConflictEvidence::verify(first, second, &self.committees, &self.domain) {
                // Already-slashed resolvers are filtered out there.
                Ok(ev) => self.on_evidence(ev, true),
                Err(error) => {
                    warn!(target: "slasher", file = %path.display(), %error, "invalid evidence file");
                }
            }
        }
        Ok(())
    }

    /// Runs until `shutdown` resolves.
    pub async fn run(
        mut self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> eyre::Result<()> {
        tokio::spawn(watch(
            self.chain.clone(),
            self.tx.clone(),
            self.cursor + 1,
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
            "resolvd running"
        );
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut snapshot = Instant::now();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                event = self.swarm.select_next_some() => self.on_swarm(event),
                Some(msg) = self.rx.recv() => self.on_internal(msg)?,
                Some(_) = self.content_rx.recv() => self.wake_fetching(),
                () = sleep_until_some(self.process_at) => {
                    self.process_at = None;
                    self.process_builders();
                }
                _ = tick.tick() => {
                    self.on_tick();
                    if snapshot.elapsed() >= Duration::from_millis(100) {
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
        }
    }

    // ------------------------------------------------------------ committees

    fn add_committee(&mut self, committee: Committee) {
        let epoch = committee.epoch();
        self.loading.remove(&epoch);
        if self.committees.contains_key(&epoch) {
            return;
        }
        self.conflict.add_committee(committee.clone());
        self.builders
            .insert(epoch, CertificateBuilder::new(committee.clone(), self.domain.clone()));
        self.committees.insert(epoch, committee);
        // Partials that waited for this committee.
        let waiting: Vec<_> = std::mem::take(&mut self.buffered);
        for (p, origin) in waiting {
            self.queue_partial(p, origin);
        }
    }

    fn load_committee(&mut self, epoch: u64) {
        if epoch == 0 || self.committees.contains_key(&epoch) || !self.loading.insert(epoch) {
            return;
        }
        let chain = self.chain.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let result = chain.committee(epoch).await;
            let _ = tx.send(Internal::Committee { epoch, result });
        });
    }

    fn my_index(&self, epoch: u64) -> Option<u32> {
        self.committees.get(&epoch)?.index_of(self.my_key.as_ref()?)
    }

    // ------------------------------------------------------------ p2p

    fn on_swarm(&mut self, event: SwarmEvent<BehaviourEvent>) {
        match event {
            SwarmEvent::Behaviour(BehaviourEvent::Gossipsub(gossipsub::Event::Message {
                propagation_source,
                message_id,
                message,
            })) => self.on_gossip(propagation_source, message_id, &message),
            SwarmEvent::Behaviour(BehaviourEvent::Content(request_response::Event::Message {
                peer,
                message,
                ..
            })) => match message {
                request_response::Message::Request { request, channel, .. } => {
                    let result = match self.store.get_content(&request.hash) {
                        Ok(Some((tag, bytes))) if tag == request.type_tag => Ok(bytes.into()),
                        Ok(_) => Err(ContentUnavailable::NotFound),
                        Err(e) => {
                            error!(target: "store", error = %e, "reading content");
                            Err(ContentUnavailable::NotFound)
                        }
                    };
                    let response = ContentResponse { hash: request.hash, result };
                    let _ = self.swarm.behaviour_mut().content.send_response(channel, response);
                }
                request_response::Message::Response { request_id, response } => {
                    self.on_content(peer, request_id, response);
                }
            },
            SwarmEvent::Behaviour(BehaviourEvent::Content(
                request_response::Event::OutboundFailure { request_id, peer, error, .. },
            )) => {
                if let Some((req, _)) = self.fetches.remove(&request_id) {
                    debug!(target: "p2p", %peer, hash = %req.hash, %error, "content request failed");
                    self.fetch_done(&req.hash);
                    Metrics::count(&self.shared.metrics.content_fetches, "failed");
                }
            }
            SwarmEvent::ConnectionEstablished { peer_id, endpoint, .. } => {
                if self.banned.contains(&peer_id) {
                    let _ = self.swarm.disconnect_peer_id(peer_id);
                    return;
                }
                if let libp2p::core::ConnectedPoint::Dialer { address, .. } = endpoint {
                    self.connected.insert(address, peer_id);
                }
                debug!(target: "p2p", %peer_id, "connected");
            }
            SwarmEvent::ConnectionClosed { peer_id, num_established: 0, .. } => {
                self.connected.retain(|_, p| *p != peer_id);
                debug!(target: "p2p", %peer_id, "disconnected");
            }
            SwarmEvent::NewListenAddr { address, .. } => {
                info!(target: "p2p", %address, "listening");
            }
            _ => {}
        }
    }

    fn report(
        &mut self,
        id: &MessageId,
        source: &PeerId,
        topic: Topic,
        acceptance: MessageAcceptance,
    ) {
        let result = match acceptance {
            MessageAcceptance::Accept => "accept",
            MessageAcceptance::Ignore => "ignore",
            MessageAcceptance::Reject => "reject",
        };
        let topic = match topic {
            Topic::Disputes => "disputes",
            Topic::Verdicts => "verdicts",
            Topic::Certificates => "certificates",
            Topic::Evidence => "evidence",
        };
        self.shared.metrics.gossip.get_or_create(&GossipLabel { topic, result }).inc();
        let _ = self
            .swarm
            .behaviour_mut()
            .gossipsub
            .report_message_validation_result(id, source, acceptance);
    }

    fn on_gossip(&mut self, source: PeerId, id: MessageId, message: &gossipsub::Message) {
        let (topic, gossip) = match p2p::decode_gossip(message) {
            Ok(decoded) => decoded,
            Err(e) => {
                warn!(target: "p2p", peer = %source, error = %e, "rejecting malformed gossip");
                match e {
                    p2p::GossipError::Malformed(topic, _) => {
                        self.report(&id, &source, topic, MessageAcceptance::Reject)
                    }
                    p2p::GossipError::UnknownTopic => {
                        let _ =
                            self.swarm.behaviour_mut().gossipsub.report_message_validation_result(
                                &id,
                                &source,
                                MessageAcceptance::Reject,
                            );
                    }
                }
                return;
            }
        };
        match gossip {
            Gossip::Dispute(a) => self.on_announcement(a, id, source),
            Gossip::Verdict(p) => self.queue_partial(p, Some((id, source))),
            Gossip::Certificate(c) => {
                let acceptance = match QuorumCertificate::from_wire(&c) {
                    Err(e) => {
                        warn!(target: "p2p", peer = %source, error = %e, "bad certificate encoding");
                        MessageAcceptance::Reject
                    }
                    Ok(qc) => match self.committees.get(&qc.epoch) {
                        None => {
                            self.load_committee(qc.epoch);
                            MessageAcceptance::Ignore
                        }
                        Some(committee) => match qc.verify(committee, &self.domain) {
                            Ok(_) => {
                                self.on_certificate(qc, false);
                                MessageAcceptance::Accept
                            }
                            Err(e) => {
                                warn!(target: "p2p", peer = %source, error = %e, "invalid certificate");
                                MessageAcceptance::Reject
                            }
                        },
                    },
                };
                self.report(&id, &source, topic, acceptance);
            }
            Gossip::Evidence(e) => {
                let parsed = Attestation::from_wire(&e.first)
                    .and_then(|a| Ok((a, Attestation::from_wire(&e.second)?)));
                let acceptance = match parsed {
                    Err(err) => {
                        warn!(target: "p2p", peer = %source, error = %err, "bad evidence encoding");
                        MessageAcceptance::Reject
                    }
                    Ok((a, b)) => {
                        let missing: Vec<u64> = [a.epoch, b.epoch]
                            .into_iter()
                            .filter(|ep| !self.committees.contains_key(ep))
                            .collect();
                        if missing.is_empty() {
                            match ConflictEvidence::verify(a, b, &self.committees, &self.domain) {
                                Ok(ev) => {
                                    self.on_evidence(ev, false);
                                    MessageAcceptance::Accept
                                }
                                Err(err) => {
                                    warn!(target: "p2p", peer = %source, error = %err, "invalid evidence");
                                    MessageAcceptance::Reject
                                }
                            }
                        } else {
                            for ep in missing {
                                self.load_committee(ep);
                            }
                            MessageAcceptance::Ignore
                        }
                    }
                };
                self.report(&id, &source, topic, acceptance);
            }
        }
    }

    fn publish(&mut self, gossip: Gossip) {
        let (topic, bytes) = gossip.encode();
        match self.swarm.behaviour_mut().gossipsub.publish(topic.ident(), bytes) {
            Ok(_) => {}
            Err(gossipsub::PublishError::Duplicate) => {}
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

    // ------------------------------------------------------------ disputes

    fn on_announcement(&mut self, a: DisputeAnnouncement, id: MessageId, source: PeerId) {
        if a.chain_id != self.chain.chain_id || a.escrow != self.chain.escrow {
            self.report(&id, &source, Topic::Disputes, MessageAcceptance::Ignore);
            return;
        }
        if let Some(d) = self.disputes.get(&a.deal_id) {
            let same = d.info.spec_hash == a.spec_hash
                && d.info.delivery_hash == a.delivery_hash
                && d.info.epoch == a.epoch
                && d.info.resolve_deadline == a.resolve_deadline;
            let acceptance =
                if same { MessageAcceptance::Accept } else { MessageAcceptance::Reject };
            self.report(&id, &source, Topic::Disputes, acceptance);
            return;
        }
        // Acted on only once this node's own RPC agrees, at a confirmed block.
        let waiting = self.confirming.entry(a.deal_id).or_default();
        waiting.push((id, source));
        if waiting.len() > 1 {
            return;
        }
        let chain = self.chain.clone();
        let tx = self.tx.clone();
        let confirmations = self.cfg.chain.confirmations;
        tokio::spawn(async move {
            // At the node's own confirmed head, read now (not the watcher's
            // last head, which may lag the peer that announced it).
            let result = match chain.head().await {
                Ok(head) => chain.confirms(&a, Some(head.saturating_sub(confirmations))).await,
                Err(e) => Err(e),
            };
            let _ = tx.send(Internal::Confirmed {
                announcement: Box::new(a),
                result,
                from_chain: false,
            });
        });
    }

    fn start_dispute(&mut self, info: DisputeAnnouncement) {
        if self.disputes.contains_key(&info.deal_id) {
            return;
        }
        let deal_id = info.deal_id;
        if let Err(e) = self.store.put_dispute(&info, DisputeStatus::Active) {
            error!(target: "store", deal = %deal_id, error = %e, "cannot persist dispute");
            return;
        }
        info!(target: "node", deal = %deal_id, epoch = info.epoch, deadline = info.resolve_deadline, "dispute confirmed");
        self.load_committee(info.epoch);
        self.publish(Gossip::Dispute(info.clone()));
        self.disputes.insert(deal_id, Dispute::new(info));
        self.advance(deal_id);
    }

    fn wake_fetching(&mut self) {
        let now = Instant::now();
        let ids: Vec<B256> = self
            .disputes
            .iter_mut()
            .filter(|(_, d)| d.view.phase == Phase::Fetching)
            .map(|(id, d)| {
                d.next_attempt = now;
                *id
            })
            .collect();
        for id in ids {
            self.advance(id);
        }
    }

    /// Moves a fetching dispute on: content complete → replay; else ask peers.
    fn advance(&mut self, deal_id: B256) {
        let Some(d) = self.disputes.get(&deal_id) else { return };
        if d.view.phase != Phase::Fetching || Instant::now() < d.next_attempt {
            return;
        }
        if !self.committees.contains_key(&d.info.epoch) {
            return;
        }
        let info = d.info.clone();
        let mut wanted = vec![
            (info.spec_hash, "spec"),
            (info.delivery_hash, "delivery"),
            (info.prestate_anchor_hash, "prestate-anchor"),
        ];
        let mut have: HashMap<B256, Vec<u8>> = HashMap::new();
        let mut missing = Vec::new();
        let store = self.store.clone();
        let read = |hash: B256,
                    tag: &'static str,
                    have: &mut HashMap<B256, Vec<u8>>,
                    missing: &mut Vec<(B256, &'static str)>| {
            match store.get_content(&hash) {
                Ok(Some((t, bytes))) if t == tag => {
                    have.insert(hash, bytes);
                }
                Ok(_) => missing.push((hash, tag)),
                Err(e) => error!(target: "store", %hash, error = %e, "reading content"),
            }
        };
        for (hash, tag) in wanted.drain(..) {
            read(hash, tag, &mut have, &mut missing);
        }
        let witness_hash = have
            .get(&info.delivery_hash)
            .and_then(|bytes| decode_committed::<DeliveryV1>(bytes, &info.delivery_hash).ok())
            .and_then(|delivery| delivery.witness_hash());
        if let Some(w) = witness_hash {
            read(w, "evm-witness", &mut have, &mut missing);
        }
        if !missing.is_empty() {
            for (hash, tag) in missing {
                self.fetch(hash, tag);
            }
            let retry = Duration::from_millis(self.cfg.pipeline.retry_ms);
            if let Some(d) = self.disputes.get_mut(&deal_id) {
                d.next_attempt = Instant::now() + retry;
            }
            return;
        }
        let take = |h: &B256, have: &mut HashMap<B256, Vec<u8>>| {
            Bytes::from(have.remove(h).unwrap_or_default())
        };
        let request = ReexecRequestV1 {
            deal_id,
            spec: take(&info.spec_hash, &mut have),
            spec_hash: info.spec_hash,
            delivery: take(&info.delivery_hash, &mut have),
            delivery_hash: info.delivery_hash,
            prestate_anchor: take(&info.prestate_anchor_hash, &mut have),
            prestate_anchor_hash: info.prestate_anchor_hash,
            witness: witness_hash.map(|w| take(&w, &mut have)),
        };
        if let Some(d) = self.disputes.get_mut(&deal_id) {
            d.view.phase = Phase::Replaying;
        }
        let sem = self.replays.clone();
        let tx = self.tx.clone();
        let queue = self.shared.metrics.replay_queue.clone();
        queue.inc();
        tokio::spawn(async move {
            let result = match sem.acquire_owned().await {
                Ok(_permit) => tokio::task::spawn_blocking(move || EvmBackend.verdict(&request))
                    .await
                    .map_err(|e| format!("replay worker: {e}"))
                    .and_then(|r| r.map_err(|e| format!("{e} ({})", e.code()))),
                Err(_) => Err("replay pool closed".into()),
            };
            queue.dec();
            let _ = tx.send(Internal::Replayed { deal_id, result });
        });
    }

    fn fetch(&mut self, hash: B256, tag: &'static str) {
        if !self.fetching.insert(hash) {
            return;
        }
        let peers: Vec<PeerId> = self.swarm.connected_peers().copied().take(FETCH_FANOUT).collect();
        if peers.is_empty() {
            self.fetching.remove(&hash);
            return;
        }
        for peer in peers {
            let request = ContentRequest { hash, type_tag: tag };
            let id = self.swarm.behaviour_mut().content.send_request(&peer, request.clone());
            self.fetches.insert(id, (request, peer));
        }
    }

    fn fetch_done(&mut self, hash: &B256) {
        if !self.fetches.values().any(|(r, _)| r.hash == *hash) {
            self.fetching.remove(hash);
        }
    }

    fn have_content(&self, hash: &B256) -> bool {
        matches!(self.store.get_content(hash), Ok(Some(_)))
    }

    fn on_content(&mut self, peer: PeerId, id: OutboundRequestId, response: ContentResponse) {
        let Some((request, _)) = self.fetches.remove(&id) else { return };
        let metrics = &self.shared.metrics.content_fetches;
        match response.result {
            Ok(bytes)
                if p2p::verify_content(&request, &bytes) && self.have_content(&request.hash) =>
            {
                Metrics::count(metrics, "duplicate");
            }
            Ok(bytes) if p2p::verify_content(&request, &bytes) => {
                match self.store.put_content_expecting(request.type_tag, &bytes, &request.hash) {
                    Ok(()) => {
                        Metrics::count(metrics, "ok");
                        debug!(target: "p2p", %peer, hash = %request.hash, "content fetched");
                        // Later answers from other peers are still hash-checked
                        // (a lying peer is caught even when it is slow).
                        self.fetching.remove(&request.hash);
                        self.wake_fetching();
                        return;
                    }
                    Err(e) => error!(target: "store", error = %e, "storing fetched content"),
                }
            }
            Ok(_) => {
                // Honest nodes hash what they store and re-hash what they serve:
                // wrong bytes are proof of a hostile peer.
                Metrics::count(metrics, "wrong_hash");
                warn!(target: "p2p", %peer, hash = %request.hash, "peer served content with a wrong hash: banning it");
                self.banned.insert(peer);
                self.swarm.behaviour_mut().gossipsub.blacklist_peer(&peer);
                let _ = self.swarm.disconnect_peer_id(peer);
            }
            Err(_) => Metrics::count(metrics, "not_found"),
        }
        self.fetch_done(&request.hash);
    }

    fn on_replayed(&mut self, deal_id: B256, result: Result<VerdictEnvelopeV1, String>) {
        let metrics = &self.shared.metrics;
        let Some(d) = self.disputes.get_mut(&deal_id) else { return };
        if d.view.phase != Phase::Replaying {
            return;
        }
        let envelope = match result {
            Ok(e) => e,
            Err(reason) => {
                Metrics::count(&metrics.replays, "operational");
                warn!(target: "pipeline", deal = %deal_id, %reason, retry_in = ?d.backoff, "operational error: not signing, will retry");
                d.operational(reason);
                return;
            }
        };
        let commitment = envelope.commitment();
        let i = &d.info;
        let matches = commitment.spec_hash == i.spec_hash
            && commitment.delivery_hash == i.delivery_hash
            && commitment.prestate_anchor_hash == i.prestate_anchor_hash
            && commitment.prestate_root == i.prestate_root
            && commitment.backend_id == i.backend_id
            && commitment.backend_version_hash == i.backend_version_hash;
        if !matches {
            Metrics::count(&metrics.replays, "operational");
            let reason =
                "the replayed commitment does not match the deal's on-chain fields".to_owned();
            warn!(target: "pipeline", deal = %deal_id, %reason, "operational error: not signing");
            d.operational(reason);
            return;
        }
        Metrics::count(
            &metrics.replays,
            match commitment.outcome {
                ReexecVerdict::Reproduced => "reproduced",
                ReexecVerdict::Failed => "failed",
            },
        );
        let _ = self.store.put_content("verdict-envelope", &envelope.to_canonical_bytes());
        let digest = commitment.eip712_digest(&self.domain);
        d.view.commitment = Some(commitment);
        d.view.digest = Some(digest);
        d.view.last_error = None;
        info!(target: "pipeline", deal = %deal_id, outcome = ?commitment.outcome, %digest, "replayed");
        if let Some(qc) = &d.certificate {
            if qc.commitment != commitment {
                error!(target: "pipeline", deal = %deal_id, certified = ?qc.commitment.outcome, replayed = ?commitment.outcome, "ALARM: a certificate certifies a commitment this node's replay does not reproduce");
            }
        }
        self.sign(deal_id, commitment);
    }

    fn sign(&mut self, deal_id: B256, mut commitment: VerdictCommitment) {
        let Some(d) = self.disputes.get(&deal_id) else { return };
        let epoch = d.info.epoch;
        match self.cfg.fault.byzantine {
            Some(Byzantine::Withhold) => {
                warn!(target: "fault", deal = %deal_id, "fault.byzantine = withhold: not signing");
                return;
            }
            Some(Byzantine::Flip) => {
                warn!(target: "fault", deal = %deal_id, "fault.byzantine = flip: signing the opposite outcome");
                commitment.outcome = flip(commitment.outcome);
            }
            _ => {}
        }
        let (Some(index), Some(signer)) = (self.my_index(epoch), self.signer.as_mut()) else {
            if let Some(d) = self.disputes.get_mut(&deal_id) {
                d.view.phase =
                    if d.certificate.is_some() { Phase::Certified } else { Phase::Observing };
            }
            return;
        };
        let signature = match signer.sign(&self.domain, &commitment) {
            Ok(s) => s,
            Err(e) => {
                self.shared.metrics.protection_refusals.inc();
                error!(target: "pipeline", deal = %deal_id, error = %e, "slashing protection refused to sign");
                if let Some(d) = self.disputes.get_mut(&deal_id) {
                    d.view.phase = Phase::Refused;
                    d.view.last_error = Some(e.to_string());
                }
                return;
            }
        };
        let partial = SignedVerdict {
            commitment,
            epoch,
            signer_index: index,
            signature: signature.compress(),
        };
        if let Err(e) = self.store.put_partial(&partial) {
            error!(target: "store", deal = %deal_id, error = %e, "cannot persist own partial");
        }
        if self.crash_armed {
            error!(target: "fault", deal = %deal_id, "fault.crash_after_persist: aborting before gossip");
            std::process::abort();
        }
        self.shared.metrics.signatures.inc();
        info!(target: "pipeline", deal = %deal_id, signer = index, "signed");
        if let Some(d) = self.disputes.get_mut(&deal_id) {
            d.view.own_signature = Some(Bytes::copy_from_slice(&partial.signature));
            if d.view.phase == Phase::Replaying {
                d.view.phase =
                    if d.certificate.is_some() { Phase::Certified } else { Phase::Signed };
            }
            d.own = Some(partial.clone());
            d.last_publish = Instant::now();
        }
        self.publish(Gossip::Verdict(partial.clone()));
        self.queue_partial(partial, None);
        if let Some(raw) = &self.raw_key {
            let mut other = commitment;
            other.outcome = flip(commitment.outcome);
            let sig = raw.sign(&other.eip712_digest(&self.domain));
            let p = SignedVerdict {
                commitment: other,
                epoch,
                signer_index: index,
                signature: sig.compress(),
            };
            warn!(target: "fault", deal = %deal_id, "fault.byzantine = equivocate: signed the opposite outcome too");
            if let Some(d) = self.disputes.get_mut(&deal_id) {
                d.extra.push(p.clone());
            }
            self.publish(Gossip::Verdict(p.clone()));
            self.queue_partial(p, None);
        }
    }

    /// Cheap checks now; the signature is verified in the next batch. A
    /// gossiped partial's validation result is reported after the batch.
    fn queue_partial(&mut self, p: SignedVerdict, origin: Option<Origin>) {
        let Some(builder) = self.builders.get_mut(&p.epoch) else {
            if self.buffered.len() >= self.cfg.pipeline.max_buffered_partials {
                self.shared.metrics.dropped_partials.inc();
                if let Some((id, source)) = origin {
                    self.report(&id, &source, Topic::Verdicts, MessageAcceptance::Ignore);
                }
                return;
            }
            self.load_committee(p.epoch);
            self.buffered.push((p, origin));
            return;
        };
        match builder.on_partial(&p) {
            Ok(Queued::New) => {
                self.process_at.get_or_insert_with(|| tokio::time::Instant::now() + BATCH_WINDOW);
                let key = (p.commitment.eip712_digest(&self.domain), p.signer_index);
                let entry = self.deferred.entry(key).or_insert_with(|| (p, Vec::new()));
                entry.1.extend(origin);
            }
            Ok(Queued::Duplicate) => {
                let key = (p.commitment.eip712_digest(&self.domain), p.signer_index);
                match (origin, self.deferred.get_mut(&key)) {
                    (Some(o), Some(entry)) => entry.1.push(o),
                    (Some((id, source)), None) => {
                        self.report(&id, &source, Topic::Verdicts, MessageAcceptance::Ignore)
                    }
                    (None, _) => {}
                }
            }
            Err(e) => {
                if let Some((id, source)) = origin {
                    warn!(target: "p2p", peer = %source, error = %e, "rejecting partial");
                    self.report(&id, &source, Topic::Verdicts, MessageAcceptance::Reject);
                }
            }
        }
    }

    fn process_builders(&mut self) {
        if self.builders.values().all(|b| b.pending() == 0) {
            return;
        }
        let mut seed = [0u8; 32];
        if getrandom::fill(&mut seed).is_err() {
            error!(target: "node", "no OS randomness for batch verification");
            return;
        }
        let mut events = Vec::new();
        let mut pending = 0;
        for builder in self.builders.values_mut() {
            if builder.pending() > 0 {
                events.extend(builder.process(&seed));
            }
            pending += builder.pending();
        }
        self.shared.metrics.pending_partials.set(pending as i64);
        for event in events {
            match event {
                BuilderEvent::Verified { signer, digest } => {
                    let Some((p, origins)) = self.deferred.remove(&(digest, signer)) else {
                        continue;
                    };
                    for (id, source) in origins {
                        self.report(&id, &source, Topic::Verdicts, MessageAcceptance::Accept);
                    }
                    if let Some(d) = self.disputes.get_mut(&p.commitment.deal_id) {
                        let list = d.view.signers.entry(digest).or_default();
                        if !list.contains(&signer) {
                            list.push(signer);
                            list.sort_unstable();
                        }
                        if d.own.as_ref().is_none_or(|o| o.signer_index != signer) {
                            let _ = self.store.put_partial(&p);
                        }
                    }
                    if let Ok(sig) = Signature::from_compressed(&p.signature) {
                        self.check_conflict(Attestation::single(&p, sig));
                    }
                }
                BuilderEvent::Invalid { signer, digest } => {
                    if let Some((_, origins)) = self.deferred.remove(&(digest, signer)) {
                        for (id, source) in origins {
                            warn!(target: "p2p", peer = %source, signer, "rejecting partial with an invalid signature");
                            self.report(&id, &source, Topic::Verdicts, MessageAcceptance::Reject);
                        }
                    }
                }
                BuilderEvent::Certificate(qc) => self.on_certificate(*qc, true),
            }
        }
    }

    fn check_conflict(&mut self, attestation: Attestation) {
        match self.conflict.on_attestation(attestation) {
            Ok(found) => {
                for ev in found {
                    self.on_evidence(ev, true);
                }
            }
            Err(e) => debug!(target: "slasher", error = %e, "attestation not usable as evidence"),
        }
    }

    fn on_certificate(&mut self, qc: QuorumCertificate, built_here: bool) {
        let deal_id = qc.commitment.deal_id;
        if let Some(committee) = self.committees.get(&qc.epoch) {
            if let Ok(a) = qc.attestation(committee) {
                self.check_conflict(a);
            }
        }
        let Some(d) = self.disputes.get_mut(&deal_id) else { return };
        if d.certificate.is_some() || matches!(d.view.phase, Phase::Settled | Phase::Expired) {
            return;
        }
        let i = &d.info;
        let c = &qc.commitment;
        if c.spec_hash != i.spec_hash
            || c.delivery_hash != i.delivery_hash
            || c.prestate_anchor_hash != i.prestate_anchor_hash
            || c.prestate_root != i.prestate_root
            || qc.epoch != i.epoch
        {
            warn!(target: "pipeline", deal = %deal_id, "certificate does not match the deal: ignored");
            return;
        }
        if let Err(e) = self.store.put_certificate(&qc.to_wire()) {
            error!(target: "store", deal = %deal_id, error = %e, "cannot persist certificate");
        }
        let elapsed = d.seen.elapsed();
        self.shared.metrics.certificates.inc();
        self.shared.metrics.dispute_to_certificate.observe(elapsed.as_secs_f64());
        d.view.certificate_ms = Some(elapsed.as_millis() as u64);
        d.view.certificate_non_signers = Some(qc.non_signers.clone());
        d.view.certified_outcome = Some(qc.commitment.outcome);
        // A node still fetching or replaying finishes its own replay and
        // signs (more signers, and a check of the certificate against its
        // own result); otherwise it now waits for settlement.
        if matches!(d.view.phase, Phase::Signed | Phase::Observing) {
            d.view.phase = Phase::Certified;
        }
        // The order is over the whole committee, not this node's certificate's
        // signers: nodes holding different certificates still agree on it.
        let committee = self.committees.get(&qc.epoch);
        let members: Vec<u32> =
            committee.map(|c| c.members().iter().map(|m| m.index).collect()).unwrap_or_default();
        let me = self.my_key.as_ref().and_then(|k| committee?.index_of(k));
        let rank = me.map_or(members.len(), |me| submit_rank(&deal_id, &members, me));
        let delay = Duration::from_millis(self.cfg.pipeline.submit_slot_ms) * rank as u32;
        d.submit_at = Some(Instant::now() + delay);
        info!(target: "pipeline", deal = %deal_id, outcome = ?qc.commitment.outcome, non_signers = ?qc.non_signers, built_here, rank, "certificate");
        d.certificate = Some(qc.clone());
        d.last_publish = Instant::now();
        self.publish(Gossip::Certificate(Box::new(qc.to_wire())));
    }

    fn on_evidence(&mut self, ev: ConflictEvidence, detected_here: bool) {
        let deal_id = ev.first.commitment.deal_id;
        let Some(committee) = self.committees.get(&ev.first.epoch) else { return };
        let resolvers: Vec<u32> = ev
            .equivocators
            .iter()
            .filter_map(|k| committee.index_of(k))
            .filter(|i| !self.store.slashed(&deal_id, *i).unwrap_or(false))
            .filter(|i| {
                !self.slashes.iter().any(|t| t.deal_id == deal_id && t.resolvers.contains(i))
            })
            .collect();
        if resolvers.is_empty() {
            return;
        }
        self.shared.metrics.equivocations.inc();
        error!(target: "slasher", deal = %deal_id, ?resolvers, detected_here, "equivocation");
        let honest: Vec<u32> = committee
            .members()
            .iter()
            .map(|m| m.index)
            .filter(|i| !resolvers.contains(i))
            .collect();
        let rank = self
            .my_index(ev.first.epoch)
            .map_or(honest.len(), |me| submit_rank(&deal_id, &honest, me));
        let delay = Duration::from_millis(self.cfg.pipeline.submit_slot_ms) * rank as u32;
        let wire = ev.to_wire();
        // For operators and `resolvd slash`: the evidence as a file.
        let dir = self.cfg.data_dir.join("evidence");
        let name = format!(
            "{deal_id}-{}.hex",
            resolvers.iter().map(u32::to_string).collect::<Vec<_>>().join("-")
        );
        if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| {
            std::fs::write(dir.join(&name), alloy_primitives::hex::encode(wire.encode_wire()))
        }) {
            warn!(target: "slasher", error = %e, "cannot write evidence file");
        }
        self.publish(Gossip::Evidence(Box::new(wire)));
        self.slashes.push(SlashTask {
            deal_id,
            first: ev.first,
            second: ev.second,
            resolvers,
            at: Instant::now() + delay,
            running: false,
        });
    }

    fn settle(&mut self, deal_id: B256, tx: Option<B256>) {
        let Some(d) = self.disputes.get_mut(&deal_id) else { return };
        if d.view.phase == Phase::Settled {
            return;
        }
        d.view.phase = Phase::Settled;
        d.submit_at = None;
        if tx.is_some() {
            d.view.settled_by = tx;
        }
        let elapsed = d.seen.elapsed();
        d.view.settlement_ms = Some(elapsed.as_millis() as u64);
        self.shared.metrics.dispute_to_settlement.observe(elapsed.as_secs_f64());
        if let Err(e) = self.store.put_dispute(&d.info, DisputeStatus::Settled) {
            error!(target: "store", deal = %deal_id, error = %e, "cannot persist settlement");
        }
        info!(target: "node", deal = %deal_id, "settled");
    }

    // ------------------------------------------------------------ internal events

    fn on_internal(&mut self, msg: Internal) -> eyre::Result<()> {
        match msg {
            Internal::Head(head) => self.head = self.head.max(head),
            Internal::Batch { events, to, head } => {
                self.head = self.head.max(head);
                for event in events {
                    self.on_chain_event(event);
                }
                // Persisted after the batch is handled: a crash replays the
                // batch, and handling is idempotent.
                self.store.set_cursor(CURSOR, to)?;
                self.cursor = to;
            }
            Internal::Confirmed { announcement, result, from_chain } => {
                let deal_id = announcement.deal_id;
                if from_chain {
                    self.chain_confirming.remove(&deal_id);
                }
                // Gossip copies waiting for a verdict: answered by a chain
                // confirmation too, or by their own.
                let waiting = if from_chain && !matches!(result, Ok(true)) {
                    Vec::new()
                } else {
                    self.confirming.remove(&deal_id).unwrap_or_default()
                };
                let acceptance = match result {
                    Ok(true) => {
                        self.start_dispute(*announcement);
                        MessageAcceptance::Accept
                    }
                    Ok(false) if from_chain => {
                        // Confirmed on chain but no longer disputed: settled
                        // while this node was away. Recorded, never worked on.
                        if self.disputes.contains_key(&deal_id) {
                            self.settle(deal_id, None);
                        } else {
                            info!(target: "chain", deal = %deal_id, "dispute already settled: nothing to do");
                            self.store.put_dispute(&announcement, DisputeStatus::Settled)?;
                            let mut d = Dispute::new(*announcement);
                            d.view.phase = Phase::Settled;
                            self.disputes.insert(deal_id, d);
                        }
                        MessageAcceptance::Accept
                    }
                    Ok(false) => {
                        debug!(target: "chain", deal = %deal_id, "announcement not confirmed by own RPC");
                        MessageAcceptance::Ignore
                    }
                    Err(e) => {
                        warn!(target: "chain", deal = %deal_id, error = %e, "cannot check the dispute; retrying");
                        if from_chain {
                            // Not dropped: a chain event is re-checked until the RPC answers.
                            self.retry_confirm(*announcement);
                        }
                        MessageAcceptance::Ignore
                    }
                };
                for (id, source) in waiting {
                    self.report(&id, &source, Topic::Disputes, acceptance);
                }
            }
            Internal::Committee { epoch, result } => match result {
                Ok(c) => {
                    info!(target: "chain", epoch, members = c.len(), "committee loaded");
                    self.add_committee(c);
                    self.wake_fetching();
                }
                Err(e) => {
                    warn!(target: "chain", epoch, error = %e, "cannot load committee");
                    self.loading.remove(&epoch);
                }
            },
            Internal::Replayed { deal_id, result } => self.on_replayed(deal_id, result),
            Internal::Submitted { deal_id, result } => {
                let retry = Duration::from_millis(self.cfg.pipeline.retry_ms);
                let metrics = &self.shared.metrics.submissions;
                let Some(d) = self.disputes.get_mut(&deal_id) else { return Ok(()) };
                d.submitting = false;
                match result {
                    Ok(Submission::Sent(o)) => {
                        Metrics::count(metrics, "sent");
                        info!(target: "submitter", deal = %deal_id, tx = %o.tx_hash, gas = o.gas_used, "resolve sent");
                        d.view.resolve_tx = Some(o.tx_hash);
                        d.view.resolve_gas = Some(o.gas_used);
                        d.submit_at = None;
                    }
                    Ok(Submission::AlreadyResolved) => {
                        Metrics::count(metrics, "already_resolved");
                        info!(target: "submitter", deal = %deal_id, "already resolved: nothing to send");
                        d.submit_at = None;
                    }
                    Err(e) => {
                        Metrics::count(metrics, "error");
                        warn!(target: "submitter", deal = %deal_id, error = %e, "resolve failed, will retry");
                        d.submit_at = Some(Instant::now() + retry);
                    }
                }
            }
            Internal::Slash { deal_id, resolvers, result } => {
                let metrics = &self.shared.metrics.slashings;
                let retry = Duration::from_millis(self.cfg.pipeline.retry_ms);
                match result {
                    Ok(outcome) => {
                        let tx = outcome.map(|o| o.tx_hash).unwrap_or_default();
                        Metrics::count(
                            metrics,
                            if outcome.is_some() { "sent" } else { "already_slashed" },
                        );
                        info!(target: "slasher", deal = %deal_id, ?resolvers, tx = ?outcome.map(|o| o.tx_hash), "evidence dealt with");
                        for r in &resolvers {
                            self.store.put_slashed(&deal_id, *r, tx)?;
                        }
                        self.slashes
                            .retain(|t| !(t.deal_id == deal_id && t.resolvers == resolvers));
                    }
                    Err(e) => {
                        Metrics::count(metrics, "error");
                        warn!(target: "slasher", deal = %deal_id, error = %e, "slashing failed, will retry");
                        for t in &mut self.slashes {
                            if t.deal_id == deal_id && t.resolvers == resolvers {
                                t.running = false;
                                t.at = Instant::now() + retry;
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn retry_confirm(&mut self, a: DisputeAnnouncement) {
        self.chain_confirming.insert(a.deal_id);
        let (chain, tx) = (self.chain.clone(), self.tx.clone());
        let wait = Duration::from_millis(self.cfg.pipeline.retry_ms);
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            let result = chain.deal(a.deal_id, None).await.map(|d| d.state == deal_state::DISPUTED);
            let _ = tx.send(Internal::Confirmed {
                announcement: Box::new(a),
                result,
                from_chain: true,
            });
        });
    }

    fn on_chain_event(&mut self, event: ChainEvent) {
        match event {
            ChainEvent::Disputed(a) => {
                // A gossip confirmation in flight does not stop this one: it
                // may have been asked at a block before the dispute.
                if self.disputes.contains_key(&a.deal_id)
                    || !self.chain_confirming.insert(a.deal_id)
                {
                    return;
                }
                // Recorded before the cursor moves past this log, so a crash
                // before the check below cannot lose it (restore re-checks).
                if let Err(e) = self.store.put_dispute(&a, DisputeStatus::Active) {
                    error!(target: "store", deal = %a.deal_id, error = %e, "cannot persist dispute");
                }
                // A node catching up may see the dispute after it was settled:
                // check the current state before doing any work.
                let chain = self.chain.clone();
                let tx = self.tx.clone();
                tokio::spawn(async move {
                    let result =
                        chain.deal(a.deal_id, None).await.map(|d| d.state == deal_state::DISPUTED);
                    let _ =
                        tx.send(Internal::Confirmed { announcement: a, result, from_chain: true });
                });
            }
            ChainEvent::SpecPublished { spec, anchor } => {
                for (tag, bytes) in [("spec", spec), ("prestate-anchor", anchor)] {
                    if let Err(e) = self.store.put_content(tag, &bytes) {
                        error!(target: "store", error = %e, "storing published content");
                    }
                }
                self.wake_fetching();
            }
            ChainEvent::DeliveryPublished { delivery } => {
                if let Err(e) = self.store.put_content("delivery", &delivery) {
                    error!(target: "store", error = %e, "storing published delivery");
                }
                self.wake_fetching();
            }
            ChainEvent::VerdictCommitted { deal_id, tx_hash, .. } => {
                self.settle(deal_id, Some(tx_hash))
            }
            ChainEvent::Settled { deal_id, .. } => self.settle(deal_id, None),
            ChainEvent::EpochStarted { epoch } => self.load_committee(epoch),
            ChainEvent::Slashed { resolver, deal_id } => {
                if let Ok(r) = u32::try_from(resolver) {
                    let _ = self.store.put_slashed(&deal_id, r, B256::ZERO);
                    info!(target: "slasher", deal = %deal_id, resolver, "slashed on chain");
                }
            }
        }
    }

    // ------------------------------------------------------------ timers

    fn on_tick(&mut self) {
        let now = Instant::now();
        // Retries of fetching disputes.
        let due: Vec<B256> = self
            .disputes
            .iter()
            .filter(|(_, d)| d.view.phase == Phase::Fetching && now >= d.next_attempt)
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.advance(id);
        }
        // Deadlines.
        let unix = unix_now();
        for d in self.disputes.values_mut() {
            let open = !matches!(d.view.phase, Phase::Settled | Phase::Expired);
            if open && unix > d.info.resolve_deadline + 60 {
                d.view.phase = Phase::Expired;
                d.submit_at = None;
                warn!(target: "node", deal = %d.info.deal_id, "resolve deadline passed unsettled");
                let _ = self.store.put_dispute(&d.info, DisputeStatus::Expired);
            }
        }
        // Submissions.
        if self.chain.account.is_some() {
            let due: Vec<B256> = self
                .disputes
                .iter()
                .filter(|(_, d)| !d.submitting && d.submit_at.is_some_and(|t| now >= t))
                .map(|(id, _)| *id)
                .collect();
            for id in due {
                self.submit(id);
            }
            let chain = &self.chain;
            for t in self.slashes.iter_mut().filter(|t| !t.running && now >= t.at) {
                t.running = true;
                let (chain, tx) = (chain.clone(), self.tx.clone());
                let (a, b) = (Evidence::from(&t.first), Evidence::from(&t.second));
                let (deal_id, resolvers) = (t.deal_id, t.resolvers.clone());
                tokio::spawn(async move {
                    let result = slash(&chain, &resolvers, a, b).await;
                    let _ = tx.send(Internal::Slash { deal_id, resolvers, result });
                });
            }
        }
        // Re-gossip own partials and certificates of unsettled disputes.
        let mut again = Vec::new();
        for d in self.disputes.values_mut() {
            let open = !matches!(d.view.phase, Phase::Settled | Phase::Expired);
            if open && d.last_publish.elapsed() >= REPUBLISH {
                d.last_publish = now;
                again.extend(d.own.clone().map(Gossip::Verdict));
                again.extend(d.extra.iter().cloned().map(Gossip::Verdict));
                again.extend(
                    d.certificate.as_ref().map(|c| Gossip::Certificate(Box::new(c.to_wire()))),
                );
            }
        }
        if self.swarm.connected_peers().next().is_some() {
            again.append(&mut self.outbox);
        }
        for g in again {
            self.publish(g);
        }
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

    fn submit(&mut self, deal_id: B256) {
        let Some(d) = self.disputes.get_mut(&deal_id) else { return };
        let Some(qc) = d.certificate.clone() else { return };
        d.submitting = true;
        let (chain, tx) = (self.chain.clone(), self.tx.clone());
        tokio::spawn(async move {
            let result = async {
                let deal = chain.deal(deal_id, None).await?;
                if deal.state != deal_state::DISPUTED {
                    return Ok(Submission::AlreadyResolved);
                }
                match chain.resolve(&qc).await {
                    Ok(o) => Ok(Submission::Sent(o)),
                    Err(ChainError::Reverted { data, .. }) if is_already_resolved(&data) => {
                        Ok(Submission::AlreadyResolved)
                    }
                    Err(e) => Err(e),
                }
            }
            .await;
            let _ = tx.send(Internal::Submitted { deal_id, result });
        });
    }

    fn publish_status(&self) {
        let gossipsub = &self.swarm.behaviour().gossipsub;
        let peers: Vec<PeerStatus> = self
            .swarm
            .connected_peers()
            .map(|p| PeerStatus { id: p.to_string(), score: gossipsub.peer_score(p) })
            .collect();
        self.shared.metrics.peers.set(peers.len() as i64);
        let in_flight = self
            .disputes
            .values()
            .filter(|d| !matches!(d.view.phase, Phase::Settled | Phase::Expired))
            .count();
        self.shared.metrics.disputes_in_flight.set(in_flight as i64);
        let epoch = self.committees.keys().next_back().copied().unwrap_or(0);
        let status = Status {
            peer_id: self.swarm.local_peer_id().to_string(),
            listen: self.swarm.listeners().map(ToString::to_string).collect(),
            peers,
            banned: self.banned.iter().map(ToString::to_string).collect(),
            chain_id: self.chain.chain_id,
            escrow: self.chain.escrow,
            registry: self.chain.registry,
            account: self.chain.account,
            bls_key: self.my_key.map(|k| alloy_primitives::hex::encode(k.compress())),
            head: self.head,
            cursor: self.cursor,
            epoch,
            signer_index: self.my_index(epoch),
            disputes: self.disputes.iter().map(|(id, d)| (*id, d.view.clone())).collect(),
        };
        *self.shared.status.write().unwrap_or_else(std::sync::PoisonError::into_inner) = status;
    }
}

impl Dispute {
    fn new(info: DisputeAnnouncement) -> Self {
        let now = Instant::now();
        Self {
            view: DisputeView {
                deal_id: info.deal_id,
                phase: Phase::Fetching,
                epoch: info.epoch,
                resolve_deadline: info.resolve_deadline,
                commitment: None,
                digest: None,
                own_signature: None,
                signers: BTreeMap::new(),
                certificate_non_signers: None,
                certified_outcome: None,
                resolve_tx: None,
                resolve_gas: None,
                settled_by: None,
                certificate_ms: None,
                settlement_ms: None,
                last_error: None,
            },
            info,
            seen: now,
            next_attempt: now,
            backoff: Duration::from_millis(500),
            own: None,
            extra: Vec::new(),
            certificate: None,
            submit_at: None,
            submitting: false,
            last_publish: now,
        }
    }

    fn operational(&mut self, reason: String) {
        self.view.phase = Phase::Fetching;
        self.view.last_error = Some(reason);
        self.next_attempt = Instant::now() + self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }
}

async fn slash(
    chain: &Chain,
    resolvers: &[u32],
    a: Evidence,
    b: Evidence,
) -> Result<Option<TxOutcome>, ChainError> {
    let mut all = true;
    for r in resolvers {
        all &= chain.is_slashed(*r).await?;
    }
    if all {
        return Ok(None);
    }
    match chain.slash(a, b).await {
        Ok(o) => Ok(Some(o)),
        Err(ChainError::Reverted { data, .. }) if is_already_slashed(&data) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The chain watcher: confirmed log ranges, in order, with backoff on errors.
async fn watch(
    chain: Chain,
    tx: mpsc::UnboundedSender<Internal>,
    mut next: u64,
    confirmations: u64,
    poll: Duration,
    max_range: u64,
) {
    let mut backoff = poll;
    loop {
        let step = async {
            let head = chain.head().await?;
            let safe = head.saturating_sub(confirmations);
            if next > safe {
                return Ok::<_, ChainError>((head, None));
            }
            let to = safe.min(next + max_range - 1);
            let events = chain.events(next, to).await?;
            Ok((head, Some((events, to))))
        };
        match step.await {
            Ok((head, Some((events, to)))) => {
                backoff = poll;
                next = to + 1;
                if tx.send(Internal::Batch { events, to, head }).is_err() {
                    return;
                }
                continue;
            }
            Ok((head, None)) => {
                backoff = poll;
                if tx.send(Internal::Head(head)).is_err() {
                    return;
                }
                tokio::time::sleep(poll).await;
            }
            Err(e) => {
                warn!(target: "chain", error = %e, retry_in = ?backoff, "chain watcher error");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn submit_order_is_a_rotating_permutation() {
        let members = [0, 1, 2, 3, 5];
        let deal = B256::repeat_byte(7);
        let mut ranks: Vec<usize> =
            members.iter().map(|&i| submit_rank(&deal, &members, i)).collect();
        ranks.sort_unstable();
        assert_eq!(ranks, vec![0, 1, 2, 3, 4]);
        assert_eq!(submit_rank(&deal, &members, 9), 5);
        let firsts: HashSet<u32> = (0u8..32)
            .map(|b| {
                let d = B256::repeat_byte(b);
                *members.iter().find(|&&m| submit_rank(&d, &members, m) == 0).unwrap()
            })
            .collect();
        assert!(firsts.len() > 2, "the first submitter rotates");
    }
}
