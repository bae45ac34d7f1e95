//! The discrete-event loop: a priority queue of (virtual time, sequence,
//! event), N real engines, and a shell per node that performs the engine's
//! actions as `resolvd-node` does, without IO.

use crate::{
    config::{Config, Placement, PublishTo},
    error::{Error, Result},
    net::{mesh, Wire},
    report::{NodeStats, Report, Role},
    rng::Rng,
};
use alloy_primitives::{Address, Bytes, B256, U256};
use resolvd_consensus::{
    protection::{MemoryStore, ProtectedSigner},
    Committee, Member, SecretKey, DEFAULT_THRESHOLD_BPS,
};
use resolvd_engine::{
    metrics::ResultLabel, Action, AnchorStatus, ConfirmSource, Confirmation, Engine, EngineConfig,
    EngineMetrics, Gathered, Gossip, MessageOrigin, SlashResult, SubmitResult, Topic, Validation,
};
use resolvd_engine::{order_seed, submit_order};
use resolvd_proto::{
    wire::{DisputeAnnouncement, PartialCommit, SignedVerdict},
    ReexecRequestV1, ReexecVerdict, ReplayRecordV1, VerdictDomain, VerdictEnvelopeV1,
};
use sha2::{Digest, Sha256};
use std::{
    cmp::Ordering,
    collections::{BinaryHeap, HashMap, VecDeque},
    time::{Duration, Instant},
};

/// The engine's `gossip_bounded` reasons (`EngineMetrics::gossip_bounded`).
const BOUNDS: [&str; 6] =
    ["early_quota", "pending_quota", "commits_full", "evidence_busy", "confirm_quota", "misled_by"];

/// The committee epoch every run uses.
pub const EPOCH: u64 = 1;
/// Bytes of a gossip message id (the node's `p2p::MESSAGE_ID_LEN`).
const MESSAGE_ID_LEN: usize = 20;
/// How long a message id stays in a node's seen cache (the node's
/// `P2pConfig::seen_ttl`).
const SEEN_TTL_NS: u64 = 12_000_000_000;

/// Where a message came from, as the simulated shell names it: the message
/// (an index into the run's message table), the peer that propagated it, and
/// whether the peer sent it straight to this node (an aggregator's inbox:
/// never forwarded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The message.
    pub msg: u32,
    /// The peer (member index).
    pub peer: u32,
    /// Sent to this node only ([`Action::Send`]), not gossiped.
    pub direct: bool,
}

impl MessageOrigin for Origin {
    type Peer = u32;

    fn peer(&self) -> &u32 {
        &self.peer
    }
}

/// One message copy put on a link (recorded with [`Config::trace`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendRecord {
    /// Sender.
    pub from: u32,
    /// Receiver.
    pub to: u32,
    /// The message (index into [`Simulation::message`]).
    pub msg: u32,
    /// Bytes counted for this copy: wire encoding plus overhead, plus
    /// retransmitted packets.
    pub bytes: u64,
    /// Packets of it retransmitted.
    pub retransmits: u32,
}

/// A distinct gossip message of the run.
#[derive(Clone, Debug)]
pub struct Message {
    /// Its topic.
    pub topic: Topic,
    /// Its wire encoding (what gossipsub carries).
    pub data: Vec<u8>,
    /// Signers, for a certificate.
    signers: usize,
}

/// What reaches a node's CPU queue.
#[derive(Debug)]
enum Job {
    /// A message copy arrives from a peer (gossiped, or sent to this node only).
    Deliver { from: u32, msg: u32, direct: bool },
    /// The loop's tick (the node ticks at its next timer; here every `tick`).
    Tick,
    /// The engine's batch is due.
    Batch,
    /// The watcher reports the confirmed `Disputed` log.
    Log,
    /// The RPC answered a confirmation.
    Confirmed { announcement: Box<DisputeAnnouncement>, source: ConfirmSource, disputed: bool },
    /// The RPC answered a committee load.
    Committee(u64),
    /// The replay, on this node's CPU.
    Replay,
    /// The watcher reports the `Settled` log.
    Settled { tx: B256 },
    /// A `resolve` transaction's result.
    Submitted(SubmitResult),
    /// The CPU is free: run the next queued job.
    Ready,
}

struct Entry {
    at: u64,
    seq: u64,
    node: u32,
    job: Job,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Earliest first in a max-heap.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// What one job leaves behind once its CPU time is spent.
#[derive(Default)]
struct Work {
    /// Modelled CPU time, before the node's slowness factor.
    cost: Duration,
    /// (message, peers, sent to them only: not gossip).
    sends: Vec<(u32, Vec<u32>, bool)>,
    /// (delay after the job ends, node, job).
    later: Vec<(Duration, u32, Job)>,
    /// Partials rejected in this job (a batch's invalid ones).
    rejected_partials: usize,
    certified: Option<usize>,
    /// Whether a certificate this job yields was built here (not gossiped).
    builds: bool,
    seen: bool,
    submit: Option<usize>,
}

struct SimNode {
    role: Role,
    slow: u32,
    engine: Option<Engine<Origin>>,
    /// The engine's metrics (clones share the values).
    metrics: EngineMetrics,
    signer: Option<ProtectedSigner<MemoryStore>>,
    peers: Vec<u32>,
    cpu_free: u64,
    backlog: VecDeque<Job>,
    ready: bool,
    /// A tick waits in the backlog (ticks do not pile up behind a busy CPU,
    /// as the node's interval delays missed ticks).
    tick_waiting: bool,
    batch_at: Option<u64>,
    /// Message → when first seen (gossipsub's duplicate cache).
    seen: HashMap<u32, u64>,
    /// Messages waiting for the engine's verdict → the peers they came
    /// from (not forwarded back to them).
    pending: HashMap<u32, Vec<u32>>,
    stats: NodeStats,
}

/// The chain, as far as one dispute needs it.
#[derive(Default)]
struct Chain {
    /// When the `resolve` transaction was mined.
    settled_at: Option<u64>,
    /// Signers of the certificate that settled it.
    signers: Option<usize>,
}

/// One run: build with [`Simulation::new`], then [`Simulation::run`].
pub struct Simulation {
    cfg: Config,
    base: Instant,
    now: u64,
    /// When each shared CPU is free ([`Config::cores`]; empty: a CPU per node).
    cores: Vec<u64>,
    seq: u64,
    queue: BinaryHeap<Entry>,
    nodes: Vec<SimNode>,
    live: Vec<u32>,
    messages: Vec<Message>,
    ids: HashMap<[u8; MESSAGE_ID_LEN], u32>,
    wire: Wire,
    chain: Chain,
    draws: Rng,
    domain: VerdictDomain,
    announcement: DisputeAnnouncement,
    envelope: VerdictEnvelopeV1,
    committee: Committee,
    committee_size: usize,
    sends: Vec<SendRecord>,
    settled_nodes: usize,
    events: u64,
}

/// The secret key of member `index` (the same for every run).
pub fn member_key(index: usize) -> SecretKey {
    let seed = Sha256::new()
        .chain_update(b"resolvd-sim member key")
        .chain_update((index as u64).to_le_bytes())
        .finalize();
    SecretKey::from_seed(&seed).expect("32 bytes of seed")
}

/// The escrow domain every run signs under.
pub fn domain() -> VerdictDomain {
    VerdictDomain {
        name: "resolvd".into(),
        version: "1".into(),
        chain_id: 31337,
        verifying_contract: Address::repeat_byte(0xe5),
    }
}

/// The one dispute of every run.
pub fn announcement() -> DisputeAnnouncement {
    DisputeAnnouncement {
        chain_id: 31337,
        escrow: Address::repeat_byte(0xe5),
        deal_id: B256::repeat_byte(0xd1),
        spec_hash: B256::repeat_byte(2),
        delivery_hash: B256::repeat_byte(3),
        prestate_anchor_hash: B256::repeat_byte(4),
        prestate_root: B256::repeat_byte(5),
        backend_id: B256::repeat_byte(6),
        backend_version_hash: B256::repeat_byte(7),
        epoch: EPOCH,
        resolve_deadline: 1_000_000,
        block_number: 10,
        tx_hash: B256::repeat_byte(0xaa),
        block_hash: B256::repeat_byte(0xbb),
        // The block's hash (as on a rollup): the order is the one every
        // table in BENCHMARKS.md was measured with.
        order_entropy: B256::repeat_byte(0xbb),
    }
}

/// The envelope every honest replay produces (precomputed: the simulator
/// models the replay's CPU time, not revm).
fn envelope(a: &DisputeAnnouncement) -> VerdictEnvelopeV1 {
    VerdictEnvelopeV1::new(
        a.deal_id,
        ReplayRecordV1 {
            backend_id: a.backend_id,
            backend_version_hash: a.backend_version_hash,
            spec_hash: a.spec_hash,
            delivery_hash: a.delivery_hash,
            prestate_anchor_hash: a.prestate_anchor_hash,
            prestate_root: a.prestate_root,
            outcome: ReexecVerdict::Reproduced,
            result_hash: B256::repeat_byte(8),
        },
    )
}

/// The content of the dispute, as every node's store holds it.
fn request(a: &DisputeAnnouncement) -> ReexecRequestV1 {
    ReexecRequestV1 {
        deal_id: a.deal_id,
        spec: Bytes::new(),
        spec_hash: a.spec_hash,
        delivery: Bytes::new(),
        delivery_hash: a.delivery_hash,
        prestate_anchor: Bytes::new(),
        prestate_anchor_hash: a.prestate_anchor_hash,
        witness: None,
    }
}

/// The gossipsub id of a message (the node's `p2p::message_id`): the first
/// 20 bytes of `SHA-256(topic ‖ 0x00 ‖ data)`.
pub fn message_id(topic: Topic, data: &[u8]) -> [u8; MESSAGE_ID_LEN] {
    let h = Sha256::new()
        .chain_update(topic.name().as_bytes())
        .chain_update([0u8])
        .chain_update(data)
        .finalize();
    let mut id = [0u8; MESSAGE_ID_LEN];
    id.copy_from_slice(&h[..MESSAGE_ID_LEN]);
    id
}

fn ns(d: Duration) -> u64 {
    d.as_nanos() as u64
}

impl Simulation {
    /// Builds the committee (a real BLS key per member), the engines of the
    /// members that start, each with the committee loaded, and the mesh.
    pub fn new(mut cfg: Config) -> Result<Self> {
        let n = cfg.nodes;
        if n == 0 || n > u32::MAX as usize / 2 {
            return Err(Error::Invalid(format!("{n} nodes")));
        }
        if cfg.cores == Some(0) || !(cfg.cpu_scale.is_finite() && cfg.cpu_scale > 0.0) {
            return Err(Error::Invalid("no shared cores, or a CPU scale not above 0".into()));
        }
        cfg.costs = cfg.costs.scaled(cfg.cpu_scale).with_transport(cfg.transport);
        if cfg.net.uplink_bps == 0 || !(0.0..1.0).contains(&cfg.net.loss) || cfg.net.mesh == 0 {
            return Err(Error::Invalid("bandwidth, loss or mesh degree out of range".into()));
        }
        let f = &cfg.faults;
        if f.byzantine() + f.slow > n {
            return Err(Error::Faults(format!("more faulty members than the {n} nodes")));
        }
        // Who is faulty: a seeded permutation (or the deal's submitter
        // order), cut in runs of each fault.
        let mut order: Vec<usize> = (0..n).collect();
        Rng::new(cfg.seed, 0xfa17).shuffle(&mut order);
        let seed = match f.placement {
            Placement::Drawn => None,
            Placement::GroundDeal => Some(announcement().deal_id),
            Placement::Head => Some(order_seed(&announcement())),
        };
        if let Some(seed) = seed {
            let members: Vec<u32> = (0..n as u32).collect();
            order = submit_order(&seed, &members).into_iter().map(|i| i as usize).collect();
        }
        let mut roles = vec![(Role::Honest, 1u32); n];
        let mut cursor = order.into_iter();
        for (count, role) in [
            (f.crash, Role::Crashed),
            (f.withhold, Role::Withholding),
            (f.garbage, Role::Garbage),
            (f.equivocate, Role::Equivocating),
            (f.forge, Role::Forging),
        ] {
            for i in cursor.by_ref().take(count) {
                roles[i].0 = role;
            }
        }
        for i in cursor.by_ref().take(f.slow) {
            roles[i].1 = f.slow_factor.max(1);
        }

        let keys: Vec<SecretKey> = (0..n).map(member_key).collect();
        let members = keys
            .iter()
            .enumerate()
            .map(|(i, k)| Member {
                index: i as u32,
                operator: Address::left_padding_from(&(i as u64 + 1).to_be_bytes()),
                key: k.public_key(),
                stake: U256::from(1000),
            })
            .collect();
        let committee = Committee::new(EPOCH, members, DEFAULT_THRESHOLD_BPS)
            .map_err(|e| Error::Invalid(format!("committee: {e}")))?;
        let domain = domain();
        let live: Vec<u32> =
            (0..n as u32).filter(|&i| roles[i as usize].0 != Role::Crashed).collect();
        let mut peers = mesh(&live, cfg.net.mesh, cfg.seed);
        // The simulation's clock: one base instant plus virtual offsets.
        #[allow(clippy::disallowed_methods)]
        let base = Instant::now();
        let nodes = keys
            .into_iter()
            .enumerate()
            .map(|(i, key)| {
                let (role, slow) = roles[i];
                let metrics = EngineMetrics::default();
                let engine = (role != Role::Crashed).then(|| {
                    // Byzantine members send no transaction (the
                    // certificate that settles is an honest member's).
                    let submits = role == Role::Honest;
                    let mut e = Engine::new(
                        EngineConfig {
                            submits,
                            dissemination: cfg.dissemination,
                            widen_wait: cfg.widen_wait,
                            ..EngineConfig::default()
                        },
                        domain.clone(),
                        Some(key.public_key()),
                        metrics.clone(),
                    );
                    e.on_head(100, 1_000);
                    e.set_commit_reveal(EPOCH, cfg.commit_reveal);
                    e.on_epoch(EPOCH);
                    // The committee load the epoch asks for, answered at once
                    // (before the dispute: every node knows the epoch).
                    while e.poll_action().is_some() {}
                    e.on_committee(EPOCH, Ok(committee.clone()), base);
                    while e.poll_action().is_some() {}
                    e
                });
                SimNode {
                    role,
                    slow,
                    signer: engine
                        .as_ref()
                        .map(|_| ProtectedSigner::new(key, MemoryStore::default())),
                    engine,
                    metrics,
                    peers: peers.remove(&(i as u32)).unwrap_or_default(),
                    cpu_free: 0,
                    backlog: VecDeque::new(),
                    ready: false,
                    tick_waiting: false,
                    batch_at: None,
                    seen: HashMap::new(),
                    pending: HashMap::new(),
                    stats: NodeStats::new(role, slow),
                }
            })
            .collect();
        let announcement = announcement();
        Ok(Self {
            wire: Wire::new(&cfg.net, cfg.seed, n),
            draws: Rng::new(cfg.seed, 0xd4a3),
            envelope: envelope(&announcement),
            announcement,
            domain,
            committee,
            committee_size: n,
            cores: vec![0; cfg.cores.unwrap_or(0)],
            cfg,
            base,
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            nodes,
            live,
            messages: Vec::new(),
            ids: HashMap::new(),
            chain: Chain::default(),
            sends: Vec::new(),
            settled_nodes: 0,
            events: 0,
        })
    }

    /// Runs the dispute until every live member saw it settled, or
    /// `max_time` of virtual time passed.
    pub fn run(&mut self) -> Report {
        // Virtual time 0: the challenge is mined. Each live member's watcher
        // sees the log once confirmed, within its polling interval.
        let chain = self.cfg.chain.clone();
        let confirmed = ns(chain.block) * chain.confirmations as u64;
        let tick = ns(self.cfg.tick).max(1);
        for node in self.live.clone() {
            let seen = confirmed + (self.draws.unit() * ns(chain.poll) as f64) as u64;
            self.schedule(seen, node, Job::Log);
            // Each node's tick phase is its own.
            let phase = (self.draws.unit() * tick as f64) as u64;
            self.schedule(phase, node, Job::Tick);
        }
        let end = ns(self.cfg.max_time);
        while let Some(e) = self.queue.pop() {
            if e.at > end {
                self.now = end;
                break;
            }
            self.now = e.at;
            self.events += 1;
            match e.job {
                Job::Ready => self.ready(e.node),
                Job::Tick => {
                    self.schedule(self.now + tick, e.node, Job::Tick);
                    if !self.nodes[e.node as usize].tick_waiting {
                        self.arrive(e.node, Job::Tick);
                    }
                }
                job => self.arrive(e.node, job),
            }
            if self.settled_nodes == self.live.len() {
                break;
            }
        }
        self.report()
    }

    /// Every message copy sent (with [`Config::trace`]).
    pub fn sends(&self) -> &[SendRecord] {
        &self.sends
    }

    /// A distinct message of the run.
    pub fn message(&self, msg: u32) -> &Message {
        &self.messages[msg as usize]
    }

    /// Every member's counters.
    pub fn node_stats(&self) -> impl Iterator<Item = &NodeStats> {
        self.nodes.iter().map(|n| &n.stats)
    }

    /// Bytes each copy of `msg` is counted at (no retransmission).
    pub fn copy_bytes(&self, msg: u32) -> u64 {
        (self.messages[msg as usize].data.len() + self.cfg.net.overhead) as u64
    }

    fn schedule(&mut self, at: u64, node: u32, job: Job) {
        self.seq += 1;
        self.queue.push(Entry { at, seq: self.seq, node, job });
    }

    fn instant(&self, at: u64) -> Instant {
        self.base + Duration::from_nanos(at)
    }

    /// When `node` can next run a job: its own CPU free and, with shared
    /// cores, one of them.
    fn cpu_at(&self, node: u32) -> u64 {
        let own = self.nodes[node as usize].cpu_free;
        self.cores.iter().min().map_or(own, |&core| own.max(core))
    }

    /// A job reaches the node's CPU: run now if idle, else wait in line.
    fn arrive(&mut self, node: u32, job: Job) {
        let now = self.now;
        if self.nodes[node as usize].engine.is_none() {
            return;
        }
        let at = self.cpu_at(node).max(now);
        let n = &mut self.nodes[node as usize];
        if at == now && n.backlog.is_empty() {
            self.execute(node, job);
        } else {
            n.tick_waiting |= matches!(job, Job::Tick);
            n.backlog.push_back(job);
            if !n.ready {
                n.ready = true;
                self.schedule(at, node, Job::Ready);
            }
        }
    }

    fn ready(&mut self, node: u32) {
        // A shared core this node waited for went to another node first.
        let at = self.cpu_at(node);
        if at > self.now {
            self.schedule(at, node, Job::Ready);
            return;
        }
        let n = &mut self.nodes[node as usize];
        n.ready = false;
        let Some(job) = n.backlog.pop_front() else { return };
        self.execute(node, job);
        let at = self.cpu_at(node).max(self.now);
        let n = &mut self.nodes[node as usize];
        if !n.backlog.is_empty() && !n.ready {
            n.ready = true;
            self.schedule(at, node, Job::Ready);
        }
    }

    /// Runs one job on `node`'s engine at the current time, performs the
    /// actions it queues, and charges its modelled CPU time.
    fn execute(&mut self, node: u32, job: Job) {
        let now = self.now;
        let at = self.instant(now);
        let costs = self.cfg.costs.clone();
        let mut work = Work { builds: !matches!(job, Job::Deliver { .. }), ..Work::default() };
        let deal_id = self.announcement.deal_id;
        let mut batch = None;
        let mut forge = false;
        {
            let n = &mut self.nodes[node as usize];
            let Some(engine) = n.engine.as_mut() else { return };
            match job {
                Job::Deliver { from, msg, direct } => {
                    n.stats.received += 1;
                    let fresh = n.seen.get(&msg).is_none_or(|t| now >= t + SEEN_TTL_NS);
                    if !fresh {
                        n.stats.duplicates += 1;
                        work.cost += costs.duplicate;
                        if let Some(p) = n.pending.get_mut(&msg) {
                            p.push(from);
                        }
                    } else {
                        n.seen.insert(msg, now);
                        if !direct {
                            n.pending.insert(msg, vec![from]);
                        }
                        work.cost += costs.receive;
                        let m = &self.messages[msg as usize];
                        let origin = Origin { msg, peer: from, direct };
                        match Gossip::decode(m.topic, &m.data) {
                            Ok(gossip) => {
                                let queued = engine.queued_partials();
                                engine.on_gossip(origin, gossip, at);
                                if engine.queued_partials() > queued {
                                    work.cost += costs.decode;
                                }
                            }
                            Err(_) => {
                                n.stats.count(m.topic, Validation::Reject);
                                n.pending.remove(&msg);
                            }
                        }
                    }
                }
                Job::Tick => {
                    n.tick_waiting = false;
                    engine.on_tick(at);
                }
                Job::Batch => {
                    n.batch_at = None;
                    if engine.batch_due().is_some_and(|due| due <= at) {
                        batch = Some(engine.queued_partials());
                        let seed = self.draws.bytes32();
                        engine.on_batch(&seed, at);
                    }
                }
                Job::Log => {
                    engine.on_disputed_log(self.announcement.clone(), at);
                    forge = n.role == Role::Forging;
                }
                Job::Confirmed { announcement, source, disputed } => {
                    let result =
                        if disputed { Confirmation::Disputed } else { Confirmation::NotDisputed };
                    engine.on_confirmed(*announcement, source, Ok(result), at);
                }
                Job::Committee(epoch) => {
                    let result = (epoch == EPOCH)
                        .then(|| self.committee.clone())
                        .ok_or_else(|| format!("no epoch {epoch} in the simulated registry"));
                    engine.on_committee(epoch, result, at);
                }
                Job::Replay => {
                    work.cost += costs.replay;
                    engine.on_replayed(deal_id, Ok(self.envelope.clone()), at);
                }
                Job::Settled { tx } => {
                    engine.on_settled_log(deal_id, Some(tx), at);
                    if n.stats.settled_at.is_none() {
                        n.stats.settled_at = Some(now);
                        self.settled_nodes += 1;
                    }
                }
                Job::Submitted(result) => engine.on_submitted(deal_id, result, at),
                Job::Ready => {}
            }
        }
        self.drain(node, &mut work);
        if forge {
            self.forge_commits(node, &mut work);
        }
        if let Some(queued) = batch {
            work.cost += costs.batch(queued, work.rejected_partials);
        }
        self.finish(node, work);
    }

    /// Performs every queued action (actions may queue more).
    fn drain(&mut self, node: u32, work: &mut Work) {
        loop {
            let n = &mut self.nodes[node as usize];
            let Some(action) = n.engine.as_mut().and_then(Engine::poll_action) else { break };
            self.perform(node, action, work);
        }
    }

    fn perform(&mut self, node: u32, action: Action<Origin>, work: &mut Work) {
        let now = self.now;
        let at = self.instant(now);
        let costs = &self.cfg.costs;
        let rpc = self.cfg.chain.rpc;
        let deal_id = self.announcement.deal_id;
        match action {
            Action::Confirm { announcement, source, delay } => {
                let asked = now + ns(delay) + ns(rpc) / 2;
                let disputed = self.chain.settled_at.is_none_or(|t| asked < t);
                work.later.push((
                    delay + rpc,
                    node,
                    Job::Confirmed { announcement, source, disputed },
                ));
            }
            Action::LoadCommittee(epoch) => work.later.push((rpc, node, Job::Committee(epoch))),
            Action::Gather(info) => {
                // Every node's store holds the content (see the README).
                let request = Box::new(request(&info));
                if let Some(e) = self.nodes[node as usize].engine.as_mut() {
                    e.on_gathered(info.deal_id, Gathered::Ready(request), at);
                }
            }
            Action::CheckAnchor(request, _) => {
                if let Some(e) = self.nodes[node as usize].engine.as_mut() {
                    e.on_anchor_checked(request, Ok(AnchorStatus::Final), at);
                }
            }
            Action::Fetch { .. } => {}
            Action::Replay(_) => work.later.push((Duration::ZERO, node, Job::Replay)),
            Action::Sign { commitment, epoch, index, commit, .. } => {
                work.cost += costs.sign;
                let n = &mut self.nodes[node as usize];
                let Some(signer) = n.signer.as_mut() else { return };
                let Some(engine) = n.engine.as_mut() else { return };
                match signer.sign(&self.domain, &commitment) {
                    Ok(s) => {
                        let partial = SignedVerdict {
                            commitment,
                            epoch,
                            signer_index: index,
                            signature: s.compress(),
                        };
                        // With commit-reveal, the commitment's signature too.
                        let signed_commit = commit.then(|| {
                            work.cost += costs.sign;
                            let mut c = PartialCommit::of(&partial, [0; 96]);
                            c.signature = signer.sign_commit(&c.signing_message()).compress();
                            c
                        });
                        let queued = engine.queued_partials();
                        engine.on_signed(partial, signed_commit, at);
                        if engine.queued_partials() > queued {
                            work.cost += costs.decode;
                        }
                    }
                    Err(e) => engine.on_sign_refused(commitment.deal_id, e.to_string()),
                }
            }
            Action::Publish(gossip) => self.publish(node, gossip, work),
            Action::Send { to, messages, .. } => {
                // One copy per message (a request's messages go in order on
                // the link, as the node's do; its framing counts per message).
                let to: Vec<u32> = to.into_iter().filter(|&p| p != node).collect();
                let messages: Vec<Gossip> =
                    messages.into_iter().flat_map(|g| self.as_role(node, g)).collect();
                for gossip in messages {
                    if let Gossip::Aggregate(a) = &gossip {
                        // Summing the slice's signatures.
                        work.cost +=
                            self.cfg.costs.aggregate_per_signer * a.signer_indices.len() as u32;
                    }
                    let msg = self.intern(&gossip);
                    work.cost += self.cfg.costs.send * to.len() as u32;
                    work.sends.push((msg, to.clone(), true));
                }
            }
            Action::Report { origin, topic, acceptance } => {
                let n = &mut self.nodes[node as usize];
                n.stats.count(topic, acceptance);
                if topic == Topic::Verdicts && acceptance == Validation::Reject {
                    work.rejected_partials += 1;
                }
                if topic == Topic::Certificates && acceptance != Validation::Ignore {
                    let signers = self.messages[origin.msg as usize].signers;
                    work.cost += costs.check_certificate(signers);
                }
                // A commitment accepted or rejected was verified: its
                // decode and one verification (an upper bound: the engine
                // checks a batch of them in one randomised multi-pairing).
                if topic == Topic::Commits && acceptance != Validation::Ignore {
                    work.cost += costs.decode + costs.pairing;
                }
                // An aggregate is verified in the batch unless it added no
                // signer by then (ignored unverified).
                if topic == Topic::Aggregates && acceptance != Validation::Ignore {
                    let signers = self.messages[origin.msg as usize].signers;
                    work.cost += costs.check_certificate(signers);
                }
                let skip = n.pending.remove(&origin.msg).unwrap_or_default();
                if acceptance == Validation::Accept && !origin.direct {
                    let to: Vec<u32> =
                        n.peers.iter().copied().filter(|p| !skip.contains(p)).collect();
                    work.cost += costs.send * to.len() as u32;
                    work.sends.push((origin.msg, to, false));
                }
            }
            Action::Submit { certificate, .. } => {
                let signers = self.committee_size - certificate.non_signers.len();
                work.submit = Some(signers);
            }
            Action::Slash(request) => {
                let resolvers = request.resolvers.clone();
                let result = SlashResult::Done(None);
                if let Some(e) = self.nodes[node as usize].engine.as_mut() {
                    e.on_slashed(request.deal_id, resolvers, result, at);
                }
            }
            Action::PersistCertificate(qc) if qc.commitment.deal_id == deal_id => {
                let signers = self.committee_size - qc.non_signers.len();
                if self.nodes[node as usize].stats.cert_signers.is_none() {
                    work.certified = Some(signers);
                }
                // Built here (in a batch, or widened before submitting): the
                // aggregation and its check. A gossiped one was charged as
                // checked when it was reported.
                if work.builds {
                    work.cost += costs.build_certificate(signers);
                }
            }
            Action::WriteEvidence(_, convicted) => {
                let s = &mut self.nodes[node as usize].stats;
                s.evidence += 1;
                s.convicted.extend(convicted);
            }
            _ => {}
        }
    }

    /// An own message as the node's role sends it: withholding and forging
    /// members send neither their partial (nor its commitment) nor a
    /// certificate they built; garbage members send either with an invalid
    /// signature; equivocating members send their partial and one of the
    /// other outcome.
    fn as_role(&mut self, node: u32, gossip: Gossip) -> Vec<Gossip> {
        let role = self.nodes[node as usize].role;
        let hides = matches!(role, Role::Withholding | Role::Forging);
        vec![match (gossip, role) {
            (Gossip::Verdict(p), _) if hides && p.signer_index == node => {
                self.nodes[node as usize].stats.withheld += 1;
                return Vec::new();
            }
            (Gossip::Commit(c), _) if hides && c.signer_index == node => return Vec::new(),
            (Gossip::Verdict(p), Role::Garbage) if p.signer_index == node => {
                Gossip::Verdict(self.garbage(p))
            }
            (Gossip::Verdict(p), Role::Equivocating) if p.signer_index == node => {
                let other = self.other_outcome(&p);
                return vec![Gossip::Verdict(p), Gossip::Verdict(other)];
            }
            (Gossip::Certificate(_) | Gossip::Aggregate(_), _) if hides => {
                self.nodes[node as usize].stats.withheld += 1;
                return Vec::new();
            }
            (Gossip::Aggregate(mut a), Role::Garbage) => {
                let digest = B256::from_slice(&Sha256::digest(a.aggregate_signature));
                a.aggregate_signature = member_key(node as usize).sign(&digest).compress();
                Gossip::Aggregate(a)
            }
            (Gossip::Certificate(mut c), Role::Garbage) => {
                let digest = B256::from_slice(&Sha256::digest(c.aggregate_signature));
                c.aggregate_signature = member_key(node as usize).sign(&digest).compress();
                Gossip::Certificate(c)
            }
            (g, _) => g,
        }]
    }

    /// `p`'s signer's partial for the other outcome, signed with its key
    /// (past its slashing protection).
    fn other_outcome(&self, p: &SignedVerdict) -> SignedVerdict {
        let mut commitment = p.commitment;
        commitment.outcome = match commitment.outcome {
            ReexecVerdict::Reproduced => ReexecVerdict::Failed,
            ReexecVerdict::Failed => ReexecVerdict::Reproduced,
        };
        let signature = member_key(p.signer_index as usize)
            .sign(&commitment.eip712_digest(&self.domain))
            .compress();
        SignedVerdict { commitment, signature, ..p.clone() }
    }

    /// A forging member's commitments in every other live member's name,
    /// each signed with the forger's own key over the right message (so
    /// only the signature check catches them), published as its own.
    fn forge_commits(&mut self, node: u32, work: &mut Work) {
        let key = member_key(node as usize);
        let deal_id = self.announcement.deal_id;
        for index in (0..self.committee_size as u32).filter(|&i| i != node) {
            let commit = B256::from_slice(
                &Sha256::new()
                    .chain_update(b"resolvd-sim forged commit")
                    .chain_update(node.to_be_bytes())
                    .chain_update(index.to_be_bytes())
                    .finalize(),
            );
            let message = PartialCommit::message(&deal_id, EPOCH, index, &commit);
            let signature = key.sign_commit(&message).compress();
            let forged =
                PartialCommit { deal_id, epoch: EPOCH, signer_index: index, commit, signature };
            work.cost += self.cfg.costs.sign;
            self.publish(node, Gossip::Commit(forged), work);
        }
    }

    /// Gossips an own message (or a fault's replacement of it) to the mesh,
    /// or to every live member.
    fn publish(&mut self, node: u32, gossip: Gossip, work: &mut Work) {
        for gossip in self.as_role(node, gossip) {
            self.publish_one(node, gossip, work);
        }
    }

    fn publish_one(&mut self, node: u32, gossip: Gossip, work: &mut Work) {
        if matches!(gossip, Gossip::Dispute(_)) && self.nodes[node as usize].stats.seen_at.is_none()
        {
            work.seen = true;
        }
        let msg = self.intern(&gossip);
        let now = self.now;
        let n = &mut self.nodes[node as usize];
        if n.seen.get(&msg).is_some_and(|t| now < t + SEEN_TTL_NS) {
            // gossipsub's `PublishError::Duplicate`: nothing is sent.
            return;
        }
        n.seen.insert(msg, now);
        let to: Vec<u32> = match self.cfg.net.publish {
            PublishTo::Mesh => n.peers.clone(),
            PublishTo::All => self.live.iter().copied().filter(|&p| p != node).collect(),
        };
        work.cost += self.cfg.costs.send * to.len() as u32;
        work.sends.push((msg, to, false));
    }

    /// A partial with an invalid signature in `p`'s signer's name: a valid
    /// point in G2, the signer's key over another digest.
    fn garbage(&self, p: SignedVerdict) -> SignedVerdict {
        let digest = B256::from_slice(
            &Sha256::new()
                .chain_update(b"resolvd-sim garbage")
                .chain_update(p.commitment.eip712_digest(&self.domain))
                .finalize(),
        );
        SignedVerdict {
            signature: member_key(p.signer_index as usize).sign(&digest).compress(),
            ..p
        }
    }

    fn intern(&mut self, gossip: &Gossip) -> u32 {
        let (topic, data) = gossip.encode();
        let id = message_id(topic, &data);
        if let Some(&m) = self.ids.get(&id) {
            return m;
        }
        let signers = match gossip {
            Gossip::Certificate(c) => self.committee_size - c.non_signer_indices.len(),
            Gossip::Aggregate(a) => a.signer_indices.len(),
            _ => 0,
        };
        let m = self.messages.len() as u32;
        self.messages.push(Message { topic, data, signers });
        self.ids.insert(id, m);
        m
    }

    /// The job's CPU time is spent: the node is busy until then, and what
    /// the job sends or starts leaves then.
    fn finish(&mut self, node: u32, work: Work) {
        let now = self.now;
        let n = &mut self.nodes[node as usize];
        let cost = ns(work.cost) * n.slow as u64;
        let done = now + cost;
        n.cpu_free = done;
        // The shared core the job ran on (one is free now: `cpu_at`).
        if let Some(core) = self.cores.iter_mut().filter(|c| **c <= now).min() {
            *core = done;
        }
        n.stats.cpu_ns += cost;
        if work.seen {
            n.stats.seen_at = Some(now);
        }
        if let Some(signers) = work.certified {
            n.stats.cert_at = Some(done);
            n.stats.cert_signers = Some(signers);
        }
        // The batch timer the engine asks for.
        let due = n.engine.as_ref().and_then(Engine::batch_due);
        if let Some(due) = due {
            let due = (due.saturating_duration_since(self.base).as_nanos() as u64).max(done);
            if n.batch_at.is_none_or(|b| due < b) {
                n.batch_at = Some(due);
                self.schedule(due, node, Job::Batch);
            }
        }
        for (msg, to, direct) in work.sends {
            let bytes = self.messages[msg as usize].data.len() + self.cfg.net.overhead;
            for peer in to {
                let t = self.wire.send(node, peer, bytes, done);
                let s = &mut self.nodes[node as usize].stats;
                s.bytes_sent += t.bytes;
                s.messages_sent += 1;
                s.retransmits += t.retransmits as u64;
                if self.cfg.trace {
                    self.sends.push(SendRecord {
                        from: node,
                        to: peer,
                        msg,
                        bytes: t.bytes,
                        retransmits: t.retransmits,
                    });
                }
                self.schedule(t.arrival, peer, Job::Deliver { from: node, msg, direct });
            }
        }
        for (delay, to, job) in work.later {
            self.schedule(done + ns(delay), to, job);
        }
        if let Some(signers) = work.submit {
            self.submit(node, signers, done);
        }
    }

    /// A `resolve` transaction sent at `at`: the first is mined in the next
    /// block; every live member's watcher then sees the `Settled` log.
    fn submit(&mut self, node: u32, signers: usize, at: u64) {
        let chain = self.cfg.chain.clone();
        let (block, rpc) = (ns(chain.block).max(1), ns(chain.rpc));
        if self.chain.settled_at.is_some() {
            self.schedule(at + rpc, node, Job::Submitted(SubmitResult::AlreadyResolved));
            return;
        }
        let mined = (at + rpc / 2).div_ceil(block) * block;
        self.chain.settled_at = Some(mined);
        self.chain.signers = Some(signers);
        let tx = B256::from_slice(&Sha256::digest(node.to_le_bytes()));
        self.schedule(
            mined + rpc / 2,
            node,
            Job::Submitted(SubmitResult::Sent { tx, gas: 300_000 }),
        );
        let confirmed = mined + block * chain.confirmations as u64;
        for peer in self.live.clone() {
            let seen = confirmed + (self.draws.unit() * ns(chain.poll) as f64) as u64;
            self.schedule(seen, peer, Job::Settled { tx });
        }
    }

    fn report(&mut self) -> Report {
        for n in &mut self.nodes {
            let m = &n.metrics;
            for reason in BOUNDS {
                let count = m.gossip_bounded.get_or_create(&ResultLabel { result: reason }).get();
                if count > 0 {
                    n.stats.bounded.insert(reason, count);
                }
            }
            let dropped = m.dropped_partials.get();
            if dropped > 0 {
                n.stats.bounded.insert("dropped_partials", dropped);
            }
        }
        Report::new(
            &self.cfg,
            self.nodes.iter().map(|n| &n.stats),
            self.chain.signers,
            self.chain.settled_at,
            self.now,
            self.messages.len(),
            self.events,
        )
    }
}
