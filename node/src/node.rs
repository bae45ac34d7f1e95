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
    backoff::Backoff,
    chain::anchor::AnchorChecker,
    chain::contracts::Evidence,
    chain::{Chain, ChainError, ChainEvent},
    config::NodeConfig,
    content::{ContentService, Served},
    dispute::{
        AnchorStatus, ConfirmSource, Confirmation, Engine, Origin, SlashResult, SubmitResult,
    },
    faults::Faults,
    metrics::{GossipLabel, Metrics},
    p2p::{self, Behaviour, BehaviourEvent, Gossip, Topic, TopicExt},
    signer::commit_message,
    store::{DisputeStatus, SharedStore, Store},
};
use alloy_primitives::{Address, B256};
use futures::StreamExt;
use libp2p::{
    gossipsub::{self, MessageAcceptance},
    swarm::SwarmEvent,
    Multiaddr, PeerId, Swarm,
};
use resolvd_consensus::{
    protection::ProtectedSigner, Attestation, Committee, PublicKey, QuorumCertificate,
};
use resolvd_proto::{
    wire::{DisputeAnnouncement, PartialCommit, SignedVerdict, WireMessage},
    ReexecRequestV1, VerdictCommitment, VerdictDomain, VerdictEnvelopeV1,
};
use serde::Serialize;
use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    sync::{Arc, RwLock},
    time::{Duration, Instant},
};
use tokio::sync::{mpsc, Semaphore};
use tracing::{debug, error, info, warn};

pub use crate::dispute::{submit_rank, DisputeView, Phase};

mod direct;
mod perform;
mod start;
mod tasks;
mod watch;

pub use start::p2p_identity;
use start::{gas_cap, with_retries};
use tasks::TaskSet;

/// Chain cursor name in the store.
pub const CURSOR: &str = "chain";
/// The node loop's timer ([`Node::on_tick`]) runs at the engine's next
/// dispute timer ([`Engine::next_timer`]: escalation, the certificate
/// stagger, submitter slots, reveals, retries) and at least this often, for
/// the coarse rest (republishing, buffer lifetimes, redials, member records,
/// held fees) and the status snapshot. An idle node wakes 4 times a second
/// for it.
const TICK_EVERY: Duration = Duration::from_millis(250);
/// How often the `/status` snapshot is refreshed.
const SNAPSHOT_EVERY: Duration = Duration::from_millis(250);
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
    pub rpc_endpoints: Vec<crate::chain::rpc::EndpointHealth>,
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

/// Held fees a node waits to split at most (a restart forgets them, and
/// anyone may split one).
const MAX_SPLITS: usize = 4_096;
/// Chain seconds past the inclusion window after which a signer that did
/// not submit the certificate splits a fee still held (the submitter may be
/// gone, or may never split it): the submitter goes first, so the others
/// rarely spend gas on a race.
pub const DISTRIBUTE_GRACE_SECS: u64 = 120;
/// Chain seconds between the signers that split a held fee after the grace,
/// in an order keyed by the deal id (`submit_rank` among the certificate's
/// signers; who splits first gains nothing): one at a time, each only if
/// the fee is still held, so they do not all send in one block and pay for
/// reverts.
pub const DISTRIBUTE_SLOT_SECS: u64 = 12;

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
    /// A peer's outbound direct stream failed (`id`: which one); `messages`
    /// were not written.
    DirectFailed {
        peer: PeerId,
        id: u64,
        messages: Vec<Gossip>,
    },
    /// The remote signer answered for this node's member record.
    RecordSigned {
        record: Box<resolvd_proto::wire::MemberRecord>,
        epoch: u64,
        next: Duration,
        result: Result<resolvd_consensus::Signature, String>,
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
    Batch(watch::Logs),
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
    /// A fee held for `deal_id` by `escrow` that this node splits once the
    /// chain's time is past `after`.
    SplitAfter {
        deal_id: B256,
        escrow: Address,
        after: u64,
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
    engine: Engine,
    swarm: Swarm<Behaviour>,
    content: ContentService,
    faults: Faults,
    sign: SignState,
    peers: Peers,
    replayer: Replayer,
    economics: EconomicsView,
    inbox: Inbox,
    /// The next block the chain watcher scans from, minus one.
    cursor: u64,
    /// Background loops, stopped with the node.
    tasks: TaskSet,
}

/// The key this node signs with (the engine holds signing during the
/// doppelgänger wait).
struct SignState {
    signer: Option<Signing>,
    key: Option<PublicKey>,
}

/// Bootstrap peers, the connections to them, and what waits for a mesh.
struct Peers {
    bootstrap: Vec<Multiaddr>,
    connected: HashMap<Multiaddr, PeerId>,
    /// When the bootstrap peers not connected are dialled again.
    next_dial: Instant,
    /// `/status` peers as of `status_at` (None: a peer came or went since).
    status: Vec<PeerStatus>,
    status_at: Option<Instant>,
    /// Gossip published before any peer was connected.
    outbox: Vec<Gossip>,
    /// Where committee members are, direct sends, direct-message penalties.
    directory: direct::Directory,
    /// `p2p.advertise`, parsed.
    advertise: Option<Vec<Multiaddr>>,
}

/// What a replay needs besides the request: the anchor check and the
/// replay worker permits.
struct Replayer {
    anchors: AnchorChecker,
    permits: Arc<Semaphore>,
}

/// The account's side shown in `/status`: refreshed by tasks, and this
/// node's own inclusions in certificates that left it out.
struct EconomicsView {
    /// The account's balance (see `Status`).
    balance: Arc<RwLock<Option<alloy_primitives::U256>>>,
    /// Fees earned, refunds, gas spent (see `Status`).
    ledger: Arc<RwLock<Option<crate::economics::Ledger>>>,
    /// See [`Status::inclusions`] (insertion order, for the bound).
    inclusions: VecDeque<(B256, String)>,
    /// Held fees this node splits once the chain's time is past the
    /// escrow's inclusion window (and its turn), by deal: the escrow and
    /// that time ([`Node::split_held_fees`]).
    splits: BTreeMap<B256, (Address, u64)>,
}

/// The node's own channels: results of spawned work, and content added
/// through the API.
struct Inbox {
    tx: mpsc::UnboundedSender<Internal>,
    rx: mpsc::UnboundedReceiver<Internal>,
    content_rx: mpsc::UnboundedReceiver<B256>,
    /// Frames read from direct streams (bounded: [`direct::INBOX`]).
    direct_rx: mpsc::Receiver<direct::DirectIn>,
}

impl Node {
    /// The confirmed block (head minus confirmations) and its epoch, then
    /// every dispute and evidence file the database holds.
    async fn restore(&mut self) -> eyre::Result<()> {
        let confirmations = self.cfg.chain.confirmations;
        let chain = self.chain.clone();
        let (head, at, epoch) = with_retries("reading the current epoch", 10, || async {
            let c = chain.confirmed(confirmations).await?;
            Ok((c.head, c.block, chain.current_epoch(Some(c.block)).await?))
        })
        .await?;
        self.engine.on_head(head, 0);
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
            let (c, reveal) = with_retries("loading a committee", 10, || async {
                Ok((chain.committee(e, Some(at)).await?, chain.commit_reveal(e, Some(at)).await?))
            })
            .await?;
            self.engine.set_commit_reveal(e, reveal);
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

    /// Runs until `shutdown` resolves (or the node fails), then stops its
    /// background loops.
    pub async fn run(
        mut self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> eyre::Result<()> {
        let result = self.event_loop(shutdown).await;
        self.tasks.shutdown().await;
        result
    }

    async fn event_loop(
        &mut self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> eyre::Result<()> {
        let heads = self.chain.subscribe_heads().await.map(|h| Box::pin(h) as watch::Heads);
        let watcher = watch::Watcher::new(
            self.cursor + 1,
            self.store.cursor_at(CURSOR).ok().flatten().filter(|(b, _)| *b == self.cursor),
            self.cfg.chain.confirmations,
            self.cfg.chain.max_log_range,
        );
        let watching = (self.chain.clone(), self.inbox.tx.clone(), self.cfg.poll_interval());
        self.tasks.spawn(
            "chain watcher",
            watch::watch(heads, watching.0, watching.1, watcher, watching.2),
        );
        info!(
            target: "node",
            peer = %self.swarm.local_peer_id(),
            escrow = %self.chain.escrow,
            registry = %self.chain.registry,
            key = ?self.sign.key.map(|k| alloy_primitives::hex::encode(k.compress())),
            account = ?self.chain.account,
            cursor = self.cursor,
            epoch = self.engine.current_epoch(),
            "resolvd running"
        );
        self.drive();
        let tick = tokio::time::sleep(Duration::ZERO);
        let mut last_tick = Instant::now();
        let mut snapshot = Instant::now();
        tokio::pin!(shutdown, tick);
        loop {
            let batch = self.engine.batch_due().map(tokio::time::Instant::from_std);
            tokio::select! {
                event = self.swarm.select_next_some() => self.on_swarm(event),
                Some(msg) = self.inbox.rx.recv() => self.on_internal(msg),
                Some(direct) = self.inbox.direct_rx.recv() => self.on_direct_in(direct, Instant::now()),
                Some(_) = self.inbox.content_rx.recv() => self.engine.on_content_stored(Instant::now()),
                () = sleep_until_some(batch) => self.on_batch(),
                () = &mut tick => {
                    last_tick = Instant::now();
                    self.on_tick();
                    if snapshot.elapsed() >= SNAPSHOT_EVERY {
                        self.publish_status();
                        snapshot = Instant::now();
                    }
                    tick.as_mut().reset((last_tick + TICK_EVERY).into());
                }
                () = &mut shutdown => {
                    info!(target: "node", "shutting down");
                    self.publish_status();
                    return Ok(());
                }
                ended = self.tasks.ended() => {
                    let what = ended.map_or_else(|e| format!("a background task failed: {e}"), |name| format!("the {name} stopped"));
                    error!(target: "node", "{what}");
                    eyre::bail!("{what}");
                }
            }
            self.drive();
            // The next tick at the engine's next timer, if that is sooner
            // (this event or the tick may have set one).
            if let Some(at) = self.engine.next_timer(last_tick).map(tokio::time::Instant::from_std)
            {
                if at < tick.deadline() {
                    tick.as_mut().reset(at);
                }
            }
            if let Some(peer) = self.take_twin() {
                error!(target: "node", %peer, "DOPPELGANGER: another process holds this node's BLS key (it sent a member record signed by the key)");
                if self.engine.detects_doppelganger() {
                    self.shared.metrics.doppelganger.set(1);
                    self.publish_status();
                    eyre::bail!(
                        "doppelganger: peer {peer} sent a member record signed by this node's BLS key: \
                         the key runs in another process; stop that one (or this one) before signing again"
                    );
                }
                warn!(target: "node", "doppelganger detection is off (keys.doppelganger_wait_secs = 0): still signing");
            }
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
        let tx = self.inbox.tx.clone();
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
    /// inclusion window, send `distributeFee` once the chain's time is past
    /// the window: at once if this node's account submitted the certificate
    /// (the escrow's record, not the node's own view, which may not know its
    /// transaction yet), [`DISTRIBUTE_GRACE_SECS`] plus its turn later if the
    /// node signed the certified digest, so that no submitter can leave the
    /// fee held.
    /// A restart forgets it; anyone may send it. The chain's time is the
    /// watcher's head ([`Self::split_held_fees`]): nothing polls for it.
    fn distribute_when_closed(&mut self, deal_id: B256) {
        let Some(account) = self.chain.account else { return };
        let Some(view) = self.engine.view(&deal_id) else { return };
        let signed = view.own_signature.is_some().then_some(view.digest).flatten();
        // This node's turn among the certificate's signers.
        let rank = (|| {
            let committee = self.engine.committee(view.epoch)?;
            let me = self.engine.my_index(view.epoch)?;
            let signers = committee.complement(view.certificate_non_signers.as_ref()?).ok()?;
            Some(resolvd_engine::submit_rank(&deal_id, &signers, me) as u64)
        })()
        .unwrap_or(0);
        let turn = DISTRIBUTE_GRACE_SECS.saturating_add(rank.saturating_mul(DISTRIBUTE_SLOT_SECS));
        let chains: Vec<Chain> =
            self.chain.escrows.iter().map(|e| self.chain.for_escrow(*e)).collect();
        let tx = self.inbox.tx.clone();
        tokio::spawn(async move {
            use crate::chain::contracts::IEscrow;
            for chain in &chains {
                let held = IEscrow::heldCall { dealId: deal_id };
                let Ok(h) = chain.view(chain.escrow, held, None).await else { continue };
                let after = if h.closesAt == 0 {
                    continue;
                } else if h.submitter == account {
                    h.closesAt
                } else if signed == Some(h.digest) {
                    h.closesAt.saturating_add(turn)
                } else {
                    continue;
                };
                let _ = tx.send(Internal::SplitAfter { deal_id, escrow: chain.escrow, after });
                return;
            }
        });
    }

    /// Splits the held fees whose time came: the chain's time (the escrow's
    /// clock, from the watcher's head) is past it. Each is read again first:
    /// a fee split or released meanwhile is left alone.
    fn split_held_fees(&mut self) {
        let time = self.engine.chain_time();
        if self.economics.splits.values().all(|(_, after)| time <= *after) {
            return;
        }
        let due: Vec<(B256, Address)> = self
            .economics
            .splits
            .iter()
            .filter(|(_, (_, after))| time > *after)
            .map(|(deal, (escrow, _))| (*deal, *escrow))
            .collect();
        for (deal_id, escrow) in due {
            self.economics.splits.remove(&deal_id);
            let chain = self.chain.for_escrow(escrow);
            tokio::spawn(async move {
                use crate::chain::contracts::IEscrow;
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
            });
        }
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
        let (signature, commit_signature) = match self.sign.signer.as_mut() {
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
                    (remote.clone(), *key, self.inbox.tx.clone(), domain.clone());
                tokio::spawn(async move {
                    let mut backoff =
                        Backoff::new(Duration::from_millis(200), Duration::from_secs(10));
                    let result = loop {
                        let to = commit.then_some((epoch, index));
                        match remote.sign(&domain, &commitment, &key, to).await {
                            Err(crate::signer::RemoteError::Failed(e)) => {
                                warn!(target: "pipeline", deal = %deal_id, error = %e, "remote signer failed: retrying");
                                tokio::time::sleep(backoff.next_delay()).await;
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

    /// Publishes `gossip` (held for later when no peer takes it yet);
    /// `false` when gossipsub dropped it as a copy of a message still in its
    /// seen cache.
    fn publish(&mut self, gossip: Gossip) -> bool {
        let (topic, bytes) = gossip.encode();
        match self.swarm.behaviour_mut().gossipsub.publish(topic.ident(), bytes) {
            Ok(_) => {}
            Err(gossipsub::PublishError::Duplicate) => return false,
            Err(
                gossipsub::PublishError::NoPeersSubscribedToTopic
                | gossipsub::PublishError::AllQueuesFull(_),
            ) => {
                if self.peers.outbox.len() < 1024 {
                    self.peers.outbox.push(gossip);
                }
            }
            Err(e) => warn!(target: "p2p", ?topic, error = %e, "publish failed"),
        }
        true
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
        match &origin.id {
            Some(id) => {
                let _ = self.swarm.behaviour_mut().gossipsub.report_message_validation_result(
                    id,
                    &origin.peer,
                    acceptance,
                );
            }
            None if acceptance == MessageAcceptance::Reject => self.penalize(origin.peer),
            None => {}
        }
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
                let origin = Origin { id: Some(message_id.clone()), peer: propagation_source };
                match p2p::decode_gossip(&message) {
                    Ok((topic, Gossip::Member(record))) => {
                        let verdict = self.on_record(&record, None, now);
                        self.report(&origin, topic, verdict);
                    }
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
                                        &message_id,
                                        &origin.peer,
                                        MessageAcceptance::Reject,
                                    );
                            }
                        }
                    }
                }
            }
            SwarmEvent::Behaviour(BehaviourEvent::Direct(())) => {}
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
                    self.peers.connected.insert(address, peer_id);
                }
                self.peers.status_at = None;
                self.send_record_to(peer_id);
                debug!(target: "p2p", %peer_id, "connected");
            }
            SwarmEvent::ConnectionClosed { peer_id, connection_id, num_established, .. } => {
                self.content.closed(connection_id);
                if num_established == 0 {
                    self.on_direct_disconnected(&peer_id);
                    self.peers.connected.retain(|_, p| *p != peer_id);
                    self.peers.status_at = None;
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
        let tx = self.inbox.tx.clone();
        move |s| {
            let _ = tx.send(Internal::Served(s));
        }
    }

    // ------------------------------------------------------------ internal events

    fn on_internal(&mut self, msg: Internal) {
        let now = Instant::now();
        match msg {
            Internal::Head { head, time } => self.engine.on_head(head, time),
            Internal::SplitAfter { deal_id, escrow, after } => {
                if self.economics.splits.len() >= MAX_SPLITS
                    && !self.economics.splits.contains_key(&deal_id)
                {
                    warn!(target: "pipeline", deal = %deal_id, "{MAX_SPLITS} held fees already wait to be split: not this one (anyone may split it)");
                } else {
                    self.economics.splits.insert(deal_id, (escrow, after));
                }
            }
            Internal::Included { deal_id, result } => self.on_included(deal_id, result),
            Internal::Reorg { from, disputed, settled, depth } => {
                self.shared.metrics.chain.reorgs.inc();
                self.shared.metrics.chain.reorg_depth.set(depth as i64);
                self.engine.on_reorg(from, &disputed, &settled, now);
                let back = from.saturating_sub(1).min(self.cursor);
                match self.store.set_cursor(CURSOR, back) {
                    Ok(()) => self.cursor = back,
                    Err(e) => self.store_error("cannot rewind the chain cursor", None, &e),
                }
            }
            Internal::Batch(logs) => self.on_batch_of_logs(logs, now),
            Internal::Confirmed { announcement, source, result } => {
                self.engine.on_confirmed(*announcement, source, result, now);
            }
            Internal::Committee { epoch, result } => {
                let result = result.map(|(committee, reveal)| {
                    self.engine.set_commit_reveal(epoch, reveal);
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
            Internal::DirectFailed { peer, id, messages } => {
                self.on_direct_failed(peer, id, messages);
            }
            Internal::RecordSigned { record, epoch, next, result } => {
                self.on_record_signed(*record, epoch, next, result, now);
            }
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

    /// A left-out signer's own inclusion ended: shown in `/status`.
    fn on_included(&mut self, deal_id: B256, result: Result<Option<B256>, String>) {
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
        self.economics.inclusions.retain(|(d, _)| *d != deal_id);
        self.economics.inclusions.push_back((deal_id, note));
        while self.economics.inclusions.len() > MAX_INCLUSIONS {
            self.economics.inclusions.pop_front();
        }
    }

    /// The watcher's logs up to block `to`: handled, persisted, and only then
    /// the cursor moved past them (a crash replays the batch; handling is
    /// idempotent).
    fn on_batch_of_logs(&mut self, logs: watch::Logs, now: Instant) {
        let watch::Logs { events, from, to, hash, head, time } = logs;
        self.engine.on_head(head, time);
        let errors_before = self.shared.metrics.store_errors.get();
        let disputed: Vec<(B256, B256)> = events
            .iter()
            .filter_map(|e| match e {
                ChainEvent::Disputed(a) => Some((a.deal_id, a.block_hash)),
                _ => None,
            })
            .collect();
        for event in events {
            self.on_chain_event(event, now);
        }
        self.engine.on_logs_scanned(from, to, &disputed);
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
            ChainEvent::VerdictCommitted { deal_id, tx_hash, commitment } => {
                self.engine.on_verdict_log(deal_id, tx_hash, commitment.as_ref(), now);
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
        self.engine.on_tick(now);
        self.split_held_fees();
        for forged in self.faults.on_tick(&self.engine) {
            self.publish(forged);
        }
        if self.swarm.connected_peers().next().is_some() {
            for g in std::mem::take(&mut self.peers.outbox) {
                self.publish(g);
            }
        }
        self.content.on_tick(&mut self.swarm, now);
        self.on_direct_tick(now);
        // Re-dial bootstrap peers we are not connected to.
        if now >= self.peers.next_dial {
            self.peers.next_dial = now + redial_delay();
            for addr in self.peers.bootstrap.clone() {
                if !self.peers.connected.contains_key(&addr) {
                    if let Err(e) = self.swarm.dial(addr.clone()) {
                        debug!(target: "p2p", %addr, error = %e, "dial failed");
                    }
                }
            }
        }
    }

    fn publish_status(&mut self) {
        let now = Instant::now();
        if self.peers.status_at.is_none_or(|at| now.duration_since(at) >= PEER_SCORES_EVERY) {
            let gossipsub = &self.swarm.behaviour().gossipsub;
            self.peers.status = self
                .swarm
                .connected_peers()
                .map(|p| PeerStatus { id: p.to_string(), score: gossipsub.peer_score(p) })
                .collect();
            self.peers.status_at = Some(now);
        }
        let peers = self.peers.status.clone();
        let metrics = &self.shared.metrics;
        metrics.peers.set(peers.len() as i64);
        let in_flight = self.engine.in_flight();
        metrics.disputes_in_flight.set(in_flight as i64);
        metrics.disputes_in_memory.set(self.engine.len() as i64);
        let head = self.engine.head();
        metrics.chain.head.set(i64::try_from(head).unwrap_or(i64::MAX));
        metrics.chain.head_lag.set(i64::try_from(head.saturating_sub(self.cursor)).unwrap_or(0));
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
                .economics
                .balance
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .map(|b| b.to_string()),
            account_gas_cap_wei: self.chain.account.map(|_| gas_cap(&self.cfg).to_string()),
            economics: self
                .economics
                .ledger
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
            bls_key: self.sign.key.map(|k| alloy_primitives::hex::encode(k.compress())),
            head: self.engine.head(),
            cursor: self.cursor,
            epoch,
            signer_index: self.engine.my_index(epoch),
            rpc_endpoints,
            disputes: self.engine.views().map(|d| (d.deal_id, d)).collect(),
            inclusions: self.economics.inclusions.iter().cloned().collect(),
        };
        *self.shared.status.write().unwrap_or_else(std::sync::PoisonError::into_inner) = status;
    }
}

/// The wait before dialling unconnected bootstrap peers again: 2 to 4 s,
/// drawn anew each time. Two nodes that dial each other from their listening
/// ports (port reuse) at the same moment make one TCP connection by
/// simultaneous open, on which both speak first and the handshake fails;
/// on a fixed period that started together they would collide again every
/// time (seen over 50 ms links: no connection in 120 s).
fn redial_delay() -> Duration {
    let mut b = [0u8; 2];
    let draw = getrandom::fill(&mut b).map_or(u16::MAX / 2, |()| u16::from_le_bytes(b));
    Duration::from_secs(2) + Duration::from_secs(2).mul_f64(f64::from(draw) / f64::from(u16::MAX))
}

async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Sends `resolve` unless the deal is already settled, and classifies the result.
async fn submit(
    chain: &Chain,
    deal_id: B256,
    qc: &QuorumCertificate,
    non_signers: &[u8],
) -> SubmitResult {
    match chain.still_disputed(deal_id).await {
        Ok(Confirmation::Disputed) => {}
        Ok(_) => return SubmitResult::AlreadyResolved,
        Err(e) => return SubmitResult::Failed(e.to_string()),
    }
    match chain.resolve(qc, non_signers).await {
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
    use crate::chain::contracts::{IEscrow, IRegistry};
    use alloy_primitives::{Bytes, U256};
    let held = chain.view(chain.escrow, IEscrow::heldCall { dealId: deal_id }, None).await?;
    if held.closesAt == 0 || held.digest != digest {
        return Ok(None);
    }
    let at = IRegistry::positionOfCall { epoch: U256::from(epoch), index: U256::from(index) };
    let position: usize = chain.view(chain.registry, at, None).await?.saturating_to();
    let word = IEscrow::nonSignerBitsCall { dealId: deal_id, word: U256::from(position >> 8) };
    let bits: U256 = chain.view(chain.escrow, word, None).await?;
    if !crate::chain::position_bit(bits, position) {
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
        let sent = chain.slash_all(resolvers, a, b).await?;
        Ok::<_, ChainError>(sent.last().map(|o| o.tx_hash))
    };
    match run.await {
        Ok(tx) => SlashResult::Done(tx),
        Err(e) => SlashResult::Failed(e.to_string()),
    }
}
