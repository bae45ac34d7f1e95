//! resolvd-engine: the dispute state machines. Pure protocol logic, by
//! construction: the crate depends on no async runtime, network, database,
//! RPC client or EVM (`make lint` checks its dependency tree), and its
//! `clippy.toml` bans clocks and randomness: time comes in as a parameter,
//! and so does the batch seed.
//!
//! [`Engine`] holds every dispute this node knows and the shared protocol
//! state around them (committees, certificate builders, the conflict
//! detector, slash tasks). Its `on_*` handlers take events — a gossiped
//! message, a confirmation from the node's own RPC, a replay result, a
//! transaction result, a tick — change state and queue typed [`Action`]s,
//! which the IO shell (the `resolvd-node` crate) drains with [`Engine::poll_action`]
//! and performs, feeding results back as events.
//!
//! Per dispute: `confirming` (the node's own RPC must agree the deal is
//! disputed) → `fetching` (the shell gathers spec, delivery, anchor and
//! witness from the store, else fetches them from peers) → `replaying` →
//! `signed` (the shell signs through slashing protection and persists the
//! partial before it is announced) → `certified` (batch-verified partials
//! reached the threshold, or a verified certificate arrived) → `settled`.
//! Operational errors go back to `fetching` with exponential backoff until the
//! resolve deadline; they are never signed.
//!
//! Hostile input costs its sender, not the node: partials are only verified
//! for disputes this node confirmed on chain and for their pinned epoch;
//! committees are only loaded for epochs that exist at a confirmed block;
//! a certificate is verified at most once per dispute unless the one held
//! failed on chain; announcements of deals that do not exist are rejected.

pub mod metrics;

pub use metrics::EngineMetrics;
pub use resolvd_proto::wire::{Gossip, Topic};

use alloy_primitives::{keccak256, Address, Bytes, B256};
use resolvd_consensus::{
    Attestation, BuilderEvent, CertificateBuilder, Committee, ConflictDetector, ConflictEvidence,
    PublicKey, Queued, QuorumCertificate,
};
use resolvd_proto::{
    decode_committed,
    wire::{DisputeAnnouncement, PartialCommit, SignedVerdict, WireMessage},
    DeliveryV1, ReexecRequestV1, ReexecVerdict, VerdictCommitment, VerdictDomain,
    VerdictEnvelopeV1, EVM_BACKEND_ID,
};
use serde::Serialize;
use std::{
    collections::{BTreeMap, HashMap, HashSet, VecDeque},
    time::{Duration, Instant},
};
use tracing::{debug, error, info, warn};

/// A queued partial that could complete a certificate (with the verified
/// and queued stake of its digest at the threshold) is verified at most this
/// long after it was queued, with whatever was queued meanwhile.
pub const BATCH_WINDOW: Duration = Duration::from_millis(5);
/// Any other queued partial (below the threshold, or after the certificate)
/// is verified at most this long after it was queued. Partials of one dispute
/// arrive spread over a second or more at N = 64, and one same-digest batch
/// of 64 costs about as much as a single signature check (BENCHMARKS.md):
/// verifying each on its own was the larger part of a node's dispute CPU.
/// Gossip forwarding of a partial waits for its verification: in a fully
/// connected committee (every own partial is flood-published to every peer)
/// that delays only backup copies; where peers are not all connected, each
/// forwarding hop can add up to this much. Not used for commit-reveal
/// reveals or peers' partials of this node's own key (`Engine::queue_partial`).
pub const BATCH_WAIT: Duration = Duration::from_millis(200);
/// Longest retry backoff of an operational error.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// First retry backoff of an operational error.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// Gossip copies of one announcement waiting for the same confirmation.
const MAX_WAITING_ORIGINS: usize = 16;
/// Seconds past `resolveDeadline` (chain time) after which a dispute is expired.
const EXPIRY_GRACE_SECS: u64 = 60;
/// Without a certificate this many commit windows after entering the reveal
/// phase, the verified reveals that arrived no later than the reveal phase
/// began count too (a signer whose commitment was lost); a reveal that
/// arrived after it never counts without a timely commitment.
const REVEAL_FALLBACK_WINDOWS: u32 = 3;
/// Commit windows after the reveal phase began past which a dispute still
/// without a certificate counts every verified reveal, late ones included:
/// liveness over excluding a copier, once fewer than a quorum committed in
/// time (a member that revealed at once, or replays slower than the window).
const REVEAL_LATE_FALLBACK_WINDOWS: u32 = 6;
/// Gossiped partials and commitments one peer may have waiting for a
/// verification batch (per peer; beyond it they are ignored, not verified):
/// a peer's forgeries cannot crowd out other peers' messages.
pub const MAX_PENDING_PER_PEER: usize = 256;
/// Commitments waiting for a verification batch, all peers together.
const MAX_PENDING_COMMITS: usize = 4_096;
/// Entries one peer may hold in the early buffers (partials and commitments
/// of disputes not confirmed here yet), of `max_buffered_partials` in all.
pub const MAX_EARLY_PER_PEER: usize = 256;
/// Peers remembered as origins of one waiting message.
const MAX_ORIGINS: usize = 16;
/// Committees kept beyond the current epoch's and those of the disputes in
/// memory (loaded for evidence naming older epochs): the oldest loaded is
/// evicted first.
const MAX_SPARE_COMMITTEES: usize = 4;
/// Evidence messages (by hash) remembered as handled.
const MAX_SEEN_EVIDENCE: usize = 4_096;

/// Where a gossip message came from, as the shell names it (for libp2p, the
/// gossipsub message id and the peer that propagated it). The engine compares
/// origins, charges their peer's quotas, logs the peer, and hands the origin
/// back with its verdict in [`Action::Report`].
pub trait MessageOrigin: Clone + std::fmt::Debug + Eq {
    /// The peer a message came from.
    type Peer: Clone + std::fmt::Debug + std::fmt::Display + Eq + std::hash::Hash;
    /// The peer this message came from.
    fn peer(&self) -> &Self::Peer;
}

/// The verdict on a gossiped message, for the shell to report to its gossip
/// layer (libp2p's `Validation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Validation {
    /// Valid: forward it.
    Accept,
    /// Not forwarded, no penalty (duplicate, unknown yet, over a bound).
    Ignore,
    /// Invalid: not forwarded, the sender is penalised.
    Reject,
}

/// What the engine persists about one dispute (the store keeps it with the
/// announcement and hands it back at start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum DisputeStatus {
    /// Confirmed on chain, not settled.
    Active = 0,
    /// Settled on chain (or found settled at start).
    Settled = 1,
    /// Past its resolve deadline without settlement seen.
    Expired = 2,
}

/// Tunables of the engine (from `[pipeline]`).
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Delay before re-checking content or retrying a transaction.
    pub retry: Duration,
    /// Submitter slot: the k-th submitter of a deal's order waits k slots.
    pub submit_slot: Duration,
    /// Partials held for disputes not confirmed yet (all deals together).
    pub max_buffered_partials: usize,
    /// How long such a partial is held before it is dropped.
    pub buffer_ttl: Duration,
    /// How often an own partial and a certificate of an open dispute are re-gossiped.
    pub republish: Duration,
    /// How long a settled or expired dispute stays in memory.
    pub retain_settled: Duration,
    /// Evicted deal ids remembered so late gossip about them costs nothing
    /// (oldest forgotten first; a forgotten one costs one confirmation).
    pub max_finished: usize,
    /// Gossip announcements checked against the chain at once.
    pub max_confirming: usize,
    /// Oldest epoch (below the current one) whose committee evidence may name.
    pub evidence_epochs: u64,
    /// Whether this node sends transactions (has an account).
    pub submits: bool,
    /// Doppelgänger detection: a gossiped partial of this node's own key
    /// that it did not make stops all signing ([`Engine::doppelganger`]).
    pub detect_doppelganger: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            retry: Duration::from_secs(2),
            submit_slot: Duration::from_secs(4),
            max_buffered_partials: 4_096,
            buffer_ttl: Duration::from_secs(120),
            republish: Duration::from_secs(16),
            retain_settled: Duration::from_secs(600),
            max_finished: 65_536,
            max_confirming: 32,
            detect_doppelganger: false,
            evidence_epochs: 1_024,
            submits: true,
        }
    }
}

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
    /// The anchor is not a canonical block of its chain (or cannot be checked
    /// here): an operational error that is never signed; the deal times out.
    AnchorRejected,
    /// A certificate is held; submission pending.
    Certified,
    /// Settled on chain.
    Settled,
    /// Past the resolve deadline unsettled.
    Expired,
}

impl Phase {
    /// Settled or expired: nothing more to do.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Settled | Self::Expired)
    }
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
    /// What this node's RPC says of the deal's anchor block.
    pub anchor: Option<AnchorStatus>,
    /// Commit-reveal state (when the network has it on).
    pub commit_reveal: Option<CommitReveal>,
}

/// Commit-reveal of partials for one dispute, as this node saw it.
///
/// A signer first gossips a [`PartialCommit`] (signed by its registered key;
/// verified before it counts or is forwarded), and its partial only when the
/// commit phase closes: verified commitments from at least the threshold
/// stake were seen, or `window_ms` passed since its own commitment, or a
/// verified reveal arrived. The reveal phase begins when the first reveal
/// that verifies *arrived* (its own included; not when its verification
/// batch ran): a commitment that arrived later is late. A revealed partial
/// counts towards this node's certificate only if its commitment arrived no
/// later than that, so a node that copies a revealed partial instead of
/// replaying is not in honest nodes' certificates and is not paid.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CommitReveal {
    /// The commit phase timeout after the node's own commitment.
    pub window_ms: u64,
    /// Verified commitments that arrived before the reveal phase, by signer.
    pub committed: BTreeMap<u32, Vec<B256>>,
    /// Signers whose verified commitment arrived in the reveal phase.
    pub late: Vec<u32>,
    /// Whether this node has gossiped its partial (the reveal).
    pub revealed: bool,
    /// Milliseconds from first seeing the dispute to the reveal phase.
    pub reveal_phase_ms: Option<u64>,
    /// Verified reveals that do not count (no timely commitment).
    pub uncounted: Vec<u32>,
    /// Whether the fallback ran (no certificate in time): it counts the
    /// reveals that arrived no later than the reveal phase began.
    pub fallback: bool,
    /// Whether the late fallback ran (still no certificate): it counts
    /// every verified reveal.
    pub late_fallback: bool,
}

/// A deal's EVM anchor block, as the anchor document names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct AnchorRef {
    /// The chain the block is on.
    pub chain_id: u64,
    /// Its number.
    pub block_number: u64,
    /// Its hash.
    pub block_hash: B256,
}

impl AnchorRef {
    /// The EVM anchor of a replay request, if its anchor document is an EVM
    /// anchor that decodes (hash first). Anything else is left to the replay,
    /// which decides it deterministically.
    pub fn of(request: &ReexecRequestV1) -> Option<Self> {
        let doc = decode_committed::<resolvd_proto::PrestateAnchorV1>(
            &request.prestate_anchor,
            &request.prestate_anchor_hash,
        )
        .ok()?;
        if doc.backend_id != *EVM_BACKEND_ID {
            return None;
        }
        let evm = <resolvd_proto::EvmAnchorV1 as resolvd_proto::Canonical>::from_canonical_bytes(
            &doc.body,
        )
        .ok()?;
        Some(Self {
            chain_id: evm.chain_id,
            block_number: evm.block_number,
            block_hash: evm.block_hash,
        })
    }
}

/// Whether an anchor block is canonical and final on its chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum AnchorStatus {
    /// On the canonical chain at or below the finalized block: replay.
    Final,
    /// Not final yet (beyond the finalized block; canonical or not yet
    /// decided): wait and check again, until the resolve deadline.
    NotFinal {
        /// The chain's finalized block when checked.
        finalized: u64,
    },
    /// A final block with another hash is at that height (or the anchor's
    /// chain cannot be read here): never signed.
    NotCanonical {
        /// The canonical hash at that height, if the chain is readable.
        canonical: Option<B256>,
        /// Why.
        reason: String,
    },
}

/// Who asked for a confirmation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfirmSource {
    /// A gossiped announcement: compared field by field at the node's confirmed head.
    Gossip,
    /// The node's own watcher saw the log: is the deal still disputed now?
    Chain,
    /// The log was reorged out: is the deal disputed at all now? If not, it
    /// is dropped without a trace (not recorded as settled).
    Reorg,
}

/// What the node's own RPC says of an announced dispute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Confirmation {
    /// Disputed with exactly the announced fields.
    Disputed,
    /// The deal exists but is not (or not yet, or no longer) disputed as announced.
    NotDisputed,
    /// No such deal exists at all (only asked for gossip: the announcement is made up).
    NoSuchDeal,
}

/// The result of a `resolve` submission.
#[derive(Clone, Debug)]
pub enum SubmitResult {
    /// Mined and successful.
    Sent {
        /// Transaction hash.
        tx: B256,
        /// Gas used.
        gas: u64,
    },
    /// The deal is no longer disputed (another node settled it).
    AlreadyResolved,
    /// The escrow rejects this certificate deterministically (a revert that
    /// retrying cannot change): the certificate is dropped, a better one may
    /// replace it.
    Rejected(String),
    /// A transient failure (RPC, timeout, nonce): retried with backoff.
    Failed(String),
}

/// The result of a slashing transaction.
#[derive(Clone, Debug)]
pub enum SlashResult {
    /// Slashed by this transaction, or already slashed (`None`).
    Done(Option<B256>),
    /// A transient failure: retried.
    Failed(String),
}

/// What the store holds of a dispute's content.
#[derive(Clone, Debug)]
pub enum Gathered {
    /// Everything: the replay request.
    Ready(Box<ReexecRequestV1>),
    /// These (hash, type tag) pairs are missing.
    Missing(Vec<(B256, &'static str)>),
}

/// Collects the content of `info` through `lookup(hash, tag)`: spec,
/// delivery, anchor, and the witness the delivery names.
pub fn gather(
    info: &DisputeAnnouncement,
    mut lookup: impl FnMut(&B256, &'static str) -> Option<Vec<u8>>,
) -> Gathered {
    let mut missing = Vec::new();
    let mut get = |hash: B256, tag: &'static str, missing: &mut Vec<_>| {
        let found = lookup(&hash, tag);
        if found.is_none() {
            missing.push((hash, tag));
        }
        found
    };
    let spec = get(info.spec_hash, "spec", &mut missing);
    let delivery = get(info.delivery_hash, "delivery", &mut missing);
    let anchor = get(info.prestate_anchor_hash, "prestate-anchor", &mut missing);
    let witness_hash = delivery
        .as_ref()
        .and_then(|bytes| decode_committed::<DeliveryV1>(bytes, &info.delivery_hash).ok())
        .and_then(|d| d.witness_hash());
    let witness = witness_hash.map(|w| get(w, "evm-witness", &mut missing));
    if !missing.is_empty() {
        return Gathered::Missing(missing);
    }
    let (Some(spec), Some(delivery), Some(anchor)) = (spec, delivery, anchor) else {
        return Gathered::Missing(missing);
    };
    Gathered::Ready(Box::new(ReexecRequestV1 {
        deal_id: info.deal_id,
        spec: spec.into(),
        spec_hash: info.spec_hash,
        delivery: delivery.into(),
        delivery_hash: info.delivery_hash,
        prestate_anchor: anchor.into(),
        prestate_anchor_hash: info.prestate_anchor_hash,
        witness: witness.flatten().map(Into::into),
    }))
}

/// Whether `c` commits to the deal fields `a` pins on chain (everything but
/// the outcome, result and trace, which the replay decides).
pub fn matches_deal(c: &VerdictCommitment, a: &DisputeAnnouncement) -> bool {
    c.deal_id == a.deal_id
        && c.spec_hash == a.spec_hash
        && c.delivery_hash == a.delivery_hash
        && c.prestate_anchor_hash == a.prestate_anchor_hash
        && c.prestate_root == a.prestate_root
        && c.backend_id == a.backend_id
        && c.backend_version_hash == a.backend_version_hash
}

/// Whether two announcements describe the same dispute.
fn same_dispute(a: &DisputeAnnouncement, b: &DisputeAnnouncement) -> bool {
    a.deal_id == b.deal_id
        && a.spec_hash == b.spec_hash
        && a.delivery_hash == b.delivery_hash
        && a.prestate_anchor_hash == b.prestate_anchor_hash
        && a.prestate_root == b.prestate_root
        && a.backend_id == b.backend_id
        && a.backend_version_hash == b.backend_version_hash
        && a.epoch == b.epoch
        && a.resolve_deadline == b.resolve_deadline
}

/// Nodes that gossip a certificate they built as soon as it forms: the first
/// ones of the deal's submitter order ([`submit_rank`]). Every node aggregates
/// the partials it sees and most finish at about the same moment; if all
/// gossiped, each would receive ~N certificates per dispute. The others
/// gossip theirs when their submit slot comes (the ones before them did
/// not settle the deal) unless a verified certificate reached them from a
/// peer; a certificate received is forwarded by gossipsub, never published
/// again.
pub const CERTIFICATE_GOSSIPERS: usize = 2;

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

/// A slashing the shell should send.
#[derive(Clone, Debug)]
pub struct SlashRequest {
    /// The deal of the evidence.
    pub deal_id: B256,
    /// The escrow whose domain the two sides were signed under.
    pub escrow: Address,
    /// One side.
    pub first: Attestation,
    /// The other side.
    pub second: Attestation,
    /// Registry indices slashed by it.
    pub resolvers: Vec<u32>,
}

/// What the shell must do.
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Action<O> {
    /// Ask the node's own RPC about an announced dispute, after `delay`;
    /// answer with [`Engine::on_confirmed`].
    Confirm {
        /// The announcement.
        announcement: Box<DisputeAnnouncement>,
        /// Who asked.
        source: ConfirmSource,
        /// Wait this long first (a retry).
        delay: Duration,
    },
    /// Load the committee of an epoch that exists at a confirmed block;
    /// answer with [`Engine::on_committee`].
    LoadCommittee(u64),
    /// Read a dispute's content from the store; answer with [`Engine::on_gathered`].
    Gather(Box<DisputeAnnouncement>),
    /// Ask peers for content; a stored answer is reported with [`Engine::on_content_stored`].
    Fetch {
        /// Content hash.
        hash: B256,
        /// Its type tag.
        tag: &'static str,
    },
    /// Check the anchor block against the node's RPC (canonical and final);
    /// answer with [`Engine::on_anchor_checked`], handing the request back.
    CheckAnchor(Box<ReexecRequestV1>, AnchorRef),
    /// Replay on the pool; answer with [`Engine::on_replayed`].
    Replay(Box<ReexecRequestV1>),
    /// Sign through slashing protection and persist the partial, then report
    /// it with [`Engine::on_signed`] (or [`Engine::on_sign_refused`]).
    Sign {
        /// The deal.
        deal_id: B256,
        /// Its escrow (the signing domain).
        escrow: Address,
        /// What to sign.
        commitment: VerdictCommitment,
        /// The pinned epoch.
        epoch: u64,
        /// This node's index in it.
        index: u32,
        /// Commit-reveal is on for the dispute: also sign the commitment to
        /// the partial ([`PartialCommit::signing_message`]) and hand it to
        /// [`Engine::on_signed`].
        commit: bool,
    },
    /// Gossip.
    Publish(Gossip),
    /// Report a gossiped message's validation result.
    Report {
        /// Where it came from.
        origin: O,
        /// Its topic.
        topic: Topic,
        /// The verdict on it.
        acceptance: Validation,
    },
    /// Send `resolve`; answer with [`Engine::on_submitted`].
    Submit {
        /// The deal.
        deal_id: B256,
        /// Its escrow.
        escrow: Address,
        /// The certificate.
        certificate: Box<QuorumCertificate>,
    },
    /// Send `slashEquivocation`; answer with [`Engine::on_slashed`].
    Slash(Box<SlashRequest>),
    /// Persist a dispute's status.
    PersistDispute(Box<DisputeAnnouncement>, DisputeStatus),
    /// Persist a verified partial of another signer.
    PersistPartial(SignedVerdict),
    /// Persist a certificate.
    PersistCertificate(Box<QuorumCertificate>),
    /// Persist a replayed envelope.
    PersistEnvelope(Box<VerdictEnvelopeV1>),
    /// Record that a resolver was slashed for a deal.
    PersistSlashed {
        /// The deal.
        deal_id: B256,
        /// The resolver.
        resolver: u32,
        /// The slashing transaction (zero if unknown).
        tx: B256,
    },
    /// Write evidence as a file for operators and `resolvd slash`.
    WriteEvidence(Box<ConflictEvidence>, Vec<u32>),
    /// Delete a finished dispute's records (dispute, partials, certificate)
    /// once it left memory. Slashing protection and slashing records stay.
    Prune(B256),
}

/// A set of the newest `cap` ids (insertion order; the oldest is forgotten first).
#[derive(Debug)]
struct Recent {
    set: HashSet<B256>,
    order: VecDeque<B256>,
    cap: usize,
}

impl Recent {
    fn new(cap: usize) -> Self {
        Self { set: HashSet::new(), order: VecDeque::new(), cap: cap.max(1) }
    }

    fn insert(&mut self, id: B256) {
        if self.set.insert(id) {
            self.order.push_back(id);
            while self.order.len() > self.cap {
                if let Some(old) = self.order.pop_front() {
                    self.set.remove(&old);
                }
            }
        }
    }

    fn contains(&self, id: &B256) -> bool {
        self.set.contains(id)
    }

    fn len(&self) -> usize {
        self.set.len()
    }
}

struct Dispute {
    info: DisputeAnnouncement,
    view: DisputeView,
    seen: Instant,
    next_attempt: Instant,
    backoff: Duration,
    gathering: bool,
    own: Option<SignedVerdict>,
    extra: Vec<SignedVerdict>,
    certificate: Option<QuorumCertificate>,
    /// Certificates the escrow rejected (by hash of their wire bytes).
    rejected: HashSet<B256>,
    submit_at: Option<Instant>,
    submit_backoff: Duration,
    submitting: bool,
    /// Whether this node gossiped its certificate (see [`CERTIFICATE_GOSSIPERS`]).
    certificate_gossiped: bool,
    /// Whether its certificate came verified from a peer (the network has one).
    certificate_from_peer: bool,
    last_publish: Instant,
    finished_at: Option<Instant>,
    /// Commit-reveal: the commit window (None: off for this dispute).
    reveal_window: Option<Duration>,
    /// When this node gossiped its own commitment.
    own_commit_at: Option<Instant>,
    /// Its own (signed) commitment, re-gossiped until it reveals.
    own_commit: Option<PartialCommit>,
    /// When the first reveal that verified arrived (the reveal phase).
    reveal_phase_at: Option<Instant>,
    /// Per digest, when its first reveal that verified arrived: a signer
    /// cannot have copied a digest before it was revealed, so a commitment
    /// that arrived no later counts for it.
    first_reveal: HashMap<B256, Instant>,
    /// Verified commitments (one per signer: an honest signer makes one per
    /// deal) and when they arrived.
    commits: BTreeMap<u32, (B256, Instant)>,
    /// Verified reveals not counted, their digest, and when they arrived
    /// (for the fallbacks).
    uncounted: Vec<(SignedVerdict, B256, Instant)>,
    /// (digest, signer) of reveals verified (counted or not): a re-gossiped
    /// copy is not verified again.
    reveals_verified: HashSet<(B256, u32)>,
}

impl Dispute {
    fn new(info: DisputeAnnouncement, now: Instant) -> Self {
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
                anchor: None,
                commit_reveal: None,
            },
            info,
            seen: now,
            next_attempt: now,
            backoff: FIRST_BACKOFF,
            gathering: false,
            own: None,
            extra: Vec::new(),
            certificate: None,
            rejected: HashSet::new(),
            submit_at: None,
            submit_backoff: Duration::ZERO,
            submitting: false,
            certificate_gossiped: false,
            certificate_from_peer: false,
            last_publish: now,
            finished_at: None,
            reveal_window: None,
            own_commit_at: None,
            own_commit: None,
            reveal_phase_at: None,
            first_reveal: HashMap::new(),
            commits: BTreeMap::new(),
            uncounted: Vec::new(),
            reveals_verified: HashSet::new(),
        }
    }

    /// Turns commit-reveal on for this dispute.
    fn with_reveal(mut self, window: Option<Duration>) -> Self {
        self.reveal_window = window;
        self.view.commit_reveal =
            window.map(|w| CommitReveal { window_ms: w.as_millis() as u64, ..Default::default() });
        self
    }

    fn operational(&mut self, reason: String, now: Instant) {
        self.view.phase = Phase::Fetching;
        self.view.last_error = Some(reason);
        self.next_attempt = now + self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    fn finish(&mut self, phase: Phase, now: Instant) {
        self.view.phase = phase;
        self.submit_at = None;
        self.finished_at = Some(now);
    }

    /// Whether `signer`'s verified commitment is `commit` and arrived no
    /// later than the first reveal of `digest` (the partial it opens to): a
    /// reveal of another digest (a wrong outcome revealed at once) does not
    /// make it late.
    fn timely(&self, signer: u32, commit: &B256, digest: &B256) -> bool {
        let revealed = self.first_reveal.get(digest);
        self.commits
            .get(&signer)
            .is_some_and(|(c, at)| c == commit && revealed.is_none_or(|first| at <= first))
    }

    /// Enters the reveal phase at `at` (the arrival of a reveal that
    /// verified), or moves its start earlier; the view's committed / late
    /// lists follow the arrival times.
    fn enter_reveal_phase(&mut self, at: Instant) -> bool {
        if self.reveal_phase_at.is_some_and(|t| t <= at) {
            return false;
        }
        self.reveal_phase_at = Some(at);
        let seen = self.seen;
        let commits: Vec<(u32, B256, bool)> =
            self.commits.iter().map(|(i, (c, t))| (*i, *c, *t <= at)).collect();
        if let Some(cr) = self.view.commit_reveal.as_mut() {
            cr.reveal_phase_ms = Some(at.saturating_duration_since(seen).as_millis() as u64);
            cr.committed.clear();
            cr.late.clear();
            for (i, c, timely) in commits {
                if timely {
                    cr.committed.entry(i).or_default().push(c);
                } else {
                    cr.late.push(i);
                }
            }
        }
        true
    }

    /// Records a verified commitment (the first of its signer) that arrived at `at`.
    fn record_commit(&mut self, signer: u32, commit: B256, at: Instant) -> bool {
        if self.commits.contains_key(&signer) {
            return false;
        }
        self.commits.insert(signer, (commit, at));
        let timely = self.reveal_phase_at.is_none_or(|phase| at <= phase);
        if let Some(cr) = self.view.commit_reveal.as_mut() {
            if timely {
                cr.committed.entry(signer).or_default().push(commit);
            } else {
                cr.late.push(signer);
                cr.late.sort_unstable();
            }
        }
        true
    }
}

struct Buffered<O> {
    partial: SignedVerdict,
    origin: Option<O>,
    arrived: Instant,
    until: Instant,
}

/// A commitment held before its dispute is confirmed here.
struct EarlyCommit<O> {
    commit: PartialCommit,
    origin: Option<O>,
    arrived: Instant,
    until: Instant,
}

/// A queued partial waiting for its verification batch (one per message:
/// a forged partial and the genuine one of the same signer and digest wait
/// side by side, and each verdict goes to that message's own origins).
struct Deferred<O: MessageOrigin> {
    partial: SignedVerdict,
    origins: Vec<O>,
    arrived: Instant,
    /// The peer whose pending quota this entry uses.
    charged: Option<O::Peer>,
}

/// A commitment waiting for its verification batch.
struct PendingCommit<O: MessageOrigin> {
    origins: Vec<O>,
    arrived: Instant,
    charged: Option<O::Peer>,
}

/// The key of a deferred partial: the message itself.
type PartialKey = (B256, u32, [u8; 96]);

/// Per-peer counts against a quota.
#[derive(Debug)]
struct Quota<P>(HashMap<P, usize>);

impl<P> Default for Quota<P> {
    fn default() -> Self {
        Self(HashMap::new())
    }
}

impl<P: Clone + Eq + std::hash::Hash> Quota<P> {
    /// Takes one unit for `peer` if it holds fewer than `cap`.
    fn take(&mut self, peer: &P, cap: usize) -> bool {
        let n = self.0.entry(peer.clone()).or_default();
        if *n >= cap {
            return false;
        }
        *n += 1;
        true
    }

    fn give(&mut self, peer: &P) {
        if let Some(n) = self.0.get_mut(peer) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.0.remove(peer);
            }
        }
    }
}

struct SlashTask {
    request: SlashRequest,
    at: Instant,
    running: bool,
}

fn certificate_id(qc: &QuorumCertificate) -> B256 {
    keccak256(qc.to_wire().encode_wire())
}

/// Every dispute this node knows, and the protocol state they share.
pub struct Engine<O: MessageOrigin> {
    cfg: EngineConfig,
    /// Every escrow served, by address (each signs under its own domain).
    domains: BTreeMap<Address, VerdictDomain>,
    chain_id: u64,
    me: Option<PublicKey>,
    metrics: EngineMetrics,
    /// Newest epoch known to exist at a confirmed block.
    current_epoch: u64,
    /// Latest chain head and its timestamp (chain time decides expiry).
    head: u64,
    chain_time: u64,
    committees: BTreeMap<u64, Committee>,
    loading: HashSet<u64>,
    /// Committee loads that failed, and when to try again.
    committee_retry: BTreeMap<u64, Instant>,
    /// Per (escrow, epoch): a certificate verifies under one domain.
    builders: BTreeMap<(Address, u64), CertificateBuilder>,
    /// Per escrow: equivocation is two commitments under one domain.
    conflicts: BTreeMap<Address, ConflictDetector>,
    disputes: HashMap<B256, Dispute>,
    /// Deals settled or expired and evicted from memory (the newest `max_finished`).
    finished: Recent,
    /// Partials for disputes not confirmed here yet (or whose committee is loading).
    buffered: HashMap<B256, Vec<Buffered<O>>>,
    buffered_len: usize,
    /// Early-buffer entries (partials and commitments) held per peer.
    early_quota: Quota<O::Peer>,
    /// Queued partials waiting for the batch (by message), with every origin
    /// that sent them.
    deferred: HashMap<PartialKey, Deferred<O>>,
    /// Commitments waiting for the batch (by message).
    pending_commits: HashMap<PartialCommit, PendingCommit<O>>,
    /// Deferred partials and pending commitments held per peer.
    pending_quota: Quota<O::Peer>,
    /// Gossip announcements waiting for their confirmation.
    confirming: HashMap<B256, Vec<O>>,
    /// Chain-seen disputes being confirmed.
    chain_confirming: HashSet<B256>,
    /// Announcements the chain refuted, and how.
    refuted: HashMap<B256, Confirmation>,
    /// Evidence already handled (hash of its wire bytes; the newest ones).
    seen_evidence: Recent,
    /// Gossiped evidence waiting for the committees it names (at most one:
    /// committee loads for evidence are made one at a time).
    evidence_waiting: Option<(resolvd_proto::wire::ConflictEvidence, O)>,
    /// Order in which committees were loaded (for eviction).
    committee_order: VecDeque<u64>,
    /// (deal, resolver) pairs already slashed on chain.
    slashed: HashSet<(B256, u32)>,
    slashes: Vec<SlashTask>,
    /// A partial of this node's key it did not make: (deal, epoch, signer).
    doppelganger: Option<(B256, u64, u32)>,
    /// The network's commit-reveal window (the registry's `commitRevealMs`),
    /// pinned by each dispute when this node starts it.
    commit_reveal: Option<Duration>,
    /// Commitments for disputes not started here yet (bounded like `buffered`).
    early_commits: HashMap<B256, Vec<EarlyCommit<O>>>,
    early_commits_len: usize,
    process_at: Option<Instant>,
    actions: VecDeque<Action<O>>,
}

impl<O: MessageOrigin> Engine<O> {
    /// An engine for one escrow (`domain`), signing as `me` if set; more
    /// escrows of the same chain and registry with [`Self::serve`].
    pub fn new(
        cfg: EngineConfig,
        domain: VerdictDomain,
        me: Option<PublicKey>,
        metrics: EngineMetrics,
    ) -> Self {
        let finished = Recent::new(cfg.max_finished);
        Self {
            chain_id: domain.chain_id,
            conflicts: BTreeMap::from([(
                domain.verifying_contract,
                ConflictDetector::new(domain.clone()),
            )]),
            domains: BTreeMap::from([(domain.verifying_contract, domain)]),
            cfg,
            me,
            metrics,
            current_epoch: 0,
            head: 0,
            chain_time: 0,
            committees: BTreeMap::new(),
            loading: HashSet::new(),
            committee_retry: BTreeMap::new(),
            builders: BTreeMap::new(),
            disputes: HashMap::new(),
            finished,
            buffered: HashMap::new(),
            buffered_len: 0,
            early_quota: Quota::default(),
            deferred: HashMap::new(),
            pending_commits: HashMap::new(),
            pending_quota: Quota::default(),
            confirming: HashMap::new(),
            chain_confirming: HashSet::new(),
            refuted: HashMap::new(),
            seen_evidence: Recent::new(MAX_SEEN_EVIDENCE),
            evidence_waiting: None,
            committee_order: VecDeque::new(),
            slashed: HashSet::new(),
            slashes: Vec::new(),
            doppelganger: None,
            commit_reveal: None,
            early_commits: HashMap::new(),
            early_commits_len: 0,
            process_at: None,
            actions: VecDeque::new(),
        }
    }

    /// Also serves the escrow of `domain` (same chain; its registry checked
    /// by the caller). Call before the first committee is added.
    pub fn serve(&mut self, domain: VerdictDomain) {
        debug_assert_eq!(domain.chain_id, self.chain_id);
        debug_assert!(self.committees.is_empty(), "serve escrows before loading committees");
        self.conflicts.insert(domain.verifying_contract, ConflictDetector::new(domain.clone()));
        self.domains.insert(domain.verifying_contract, domain);
    }

    /// The network's commit-reveal setting (the registry's `commitRevealMs`,
    /// `None` for 0: off). Disputes started from now on use it; a dispute
    /// keeps the setting it started with.
    pub fn set_commit_reveal(&mut self, window: Option<Duration>) {
        if self.commit_reveal != window {
            info!(target: "node", ?window, "commit-reveal setting");
        }
        self.commit_reveal = window;
    }

    /// A partial of this node's key it did not make, once seen (deal,
    /// epoch, signer index): the node must stop signing.
    pub fn doppelganger(&self) -> Option<(B256, u64, u32)> {
        self.doppelganger
    }

    /// The next action to perform.
    pub fn poll_action(&mut self) -> Option<Action<O>> {
        self.actions.pop_front()
    }

    /// When [`Self::on_batch`] is due.
    pub fn batch_due(&self) -> Option<Instant> {
        self.process_at
    }

    /// Newest epoch known to exist.
    pub fn current_epoch(&self) -> u64 {
        self.current_epoch
    }

    /// Latest head seen.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// This node's registry index in `epoch`, if it is a member.
    pub fn my_index(&self, epoch: u64) -> Option<u32> {
        self.committees.get(&epoch)?.index_of(self.me.as_ref()?)
    }

    /// Epochs whose committee is loaded.
    pub fn loaded_epochs(&self) -> impl Iterator<Item = u64> + '_ {
        self.committees.keys().copied()
    }

    /// The views of the disputes in memory.
    pub fn views(&self) -> impl Iterator<Item = &DisputeView> {
        self.disputes.values().map(|d| &d.view)
    }

    /// One dispute's view.
    pub fn view(&self, deal_id: &B256) -> Option<&DisputeView> {
        self.disputes.get(deal_id).map(|d| &d.view)
    }

    /// Disputes held in memory (open and recently finished).
    pub fn len(&self) -> usize {
        self.disputes.len()
    }

    /// No dispute in memory.
    pub fn is_empty(&self) -> bool {
        self.disputes.is_empty()
    }

    /// Evicted deal ids remembered (at most `max_finished`).
    pub fn finished_len(&self) -> usize {
        self.finished.len()
    }

    /// Partials held for unconfirmed disputes.
    pub fn buffered_partials(&self) -> usize {
        self.buffered_len
    }

    /// Slash tasks not yet done.
    pub fn pending_slashes(&self) -> usize {
        self.slashes.len()
    }

    fn push(&mut self, action: Action<O>) {
        self.actions.push_back(action);
    }

    fn report(&mut self, origin: O, topic: Topic, acceptance: Validation) {
        self.push(Action::Report { origin, topic, acceptance });
    }

    // ------------------------------------------------------------ committees

    /// The chain says `epoch` exists at a confirmed block (at start, or an
    /// `EpochStarted` log): its committee may be loaded.
    pub fn on_epoch(&mut self, epoch: u64) {
        if epoch > self.current_epoch {
            self.current_epoch = epoch;
        }
        self.load_committee(epoch);
    }

    fn load_committee(&mut self, epoch: u64) {
        if epoch == 0
            || epoch > self.current_epoch
            || self.committees.contains_key(&epoch)
            || !self.loading.insert(epoch)
        {
            return;
        }
        self.push(Action::LoadCommittee(epoch));
    }

    /// A committee load finished.
    pub fn on_committee(&mut self, epoch: u64, result: Result<Committee, String>, now: Instant) {
        self.loading.remove(&epoch);
        match result {
            Ok(committee) if committee.epoch() == epoch => {
                info!(target: "chain", epoch, members = committee.len(), "committee loaded");
                self.add_committee(committee, now);
            }
            Ok(committee) => {
                error!(target: "chain", epoch, got = committee.epoch(), "committee of the wrong epoch");
                self.committee_retry.insert(epoch, now + self.cfg.retry);
            }
            Err(error) => {
                warn!(target: "chain", epoch, %error, "cannot load committee: retrying");
                self.committee_retry.insert(epoch, now + self.cfg.retry);
            }
        }
        self.retry_waiting_evidence(now);
    }

    /// Epochs whose committees must stay loaded: the current one, those of
    /// the disputes in memory and of pending slashings, and those the
    /// waiting evidence names.
    fn epochs_in_use(&self) -> HashSet<u64> {
        let mut keep: HashSet<u64> = self.disputes.values().map(|d| d.info.epoch).collect();
        keep.insert(self.current_epoch);
        keep.extend(
            self.slashes.iter().flat_map(|t| [t.request.first.epoch, t.request.second.epoch]),
        );
        if let Some((e, _)) = &self.evidence_waiting {
            keep.extend([e.first.epoch, e.second.epoch]);
        }
        keep
    }

    /// Evicts committees no dispute, slashing or waiting evidence needs,
    /// beyond [`MAX_SPARE_COMMITTEES`] (oldest loaded first).
    fn evict_committees(&mut self) {
        if self.committees.len() <= MAX_SPARE_COMMITTEES {
            return;
        }
        let keep = self.epochs_in_use();
        let mut spare = self.committee_order.iter().filter(|e| !keep.contains(e)).count();
        let mut evict = Vec::new();
        for e in &self.committee_order {
            if spare <= MAX_SPARE_COMMITTEES {
                break;
            }
            if !keep.contains(e) {
                evict.push(*e);
                spare -= 1;
            }
        }
        for epoch in evict {
            debug!(target: "chain", epoch, "committee evicted");
            self.committees.remove(&epoch);
            self.committee_order.retain(|e| *e != epoch);
            self.builders.retain(|(_, e), _| *e != epoch);
            for conflict in self.conflicts.values_mut() {
                conflict.remove_committee(epoch);
            }
        }
    }

    /// Makes a committee known (a committee of an epoch that exists is final:
    /// the first one loaded is kept).
    pub fn add_committee(&mut self, committee: Committee, now: Instant) {
        let epoch = committee.epoch();
        if self.committees.contains_key(&epoch) {
            return;
        }
        self.current_epoch = self.current_epoch.max(epoch);
        for conflict in self.conflicts.values_mut() {
            conflict.add_committee(committee.clone());
        }
        for (escrow, domain) in &self.domains {
            self.builders.insert(
                (*escrow, epoch),
                CertificateBuilder::new(committee.clone(), domain.clone()),
            );
        }
        self.committees.insert(epoch, committee);
        self.committee_order.push_back(epoch);
        let waiting: Vec<B256> = self
            .disputes
            .values()
            .filter(|d| d.info.epoch == epoch)
            .map(|d| d.info.deal_id)
            .collect();
        for deal_id in waiting {
            self.release_early_commits(&deal_id, now);
            self.release_buffered(&deal_id, now);
            self.advance(deal_id, now);
        }
    }

    // ------------------------------------------------------------ restore

    /// Re-opens a dispute the store holds (after a restart). Its epoch's
    /// committee should be loaded first. Own partials are re-gossiped,
    /// received partials re-enter the builder (and are verified there), and a
    /// stored certificate is used only if it verifies against the committee.
    pub fn restore(
        &mut self,
        info: DisputeAnnouncement,
        status: DisputeStatus,
        partials: Vec<SignedVerdict>,
        certificate: Option<QuorumCertificate>,
        now: Instant,
    ) {
        let deal_id = info.deal_id;
        if self.disputes.contains_key(&deal_id) || self.finished.contains(&deal_id) {
            return;
        }
        if status != DisputeStatus::Active {
            // Finished before the restart: nothing to do; held (and shown) for
            // `retain_settled` like any finished dispute, then pruned.
            let mut d = Dispute::new(info, now);
            let phase =
                if status == DisputeStatus::Settled { Phase::Settled } else { Phase::Expired };
            d.finish(phase, now);
            self.disputes.insert(deal_id, d);
            return;
        }
        let Some(domain) = self.domains.get(&info.escrow).cloned() else {
            warn!(target: "node", deal = %deal_id, escrow = %info.escrow, "stored dispute of an escrow this node no longer serves: not restored");
            return;
        };
        let mut d = Dispute::new(info, now).with_reveal(self.commit_reveal);
        let me = self.my_index(d.info.epoch);
        for p in &partials {
            if Some(p.signer_index) == me && d.own.is_none() && p.epoch == d.info.epoch {
                d.view.commitment = Some(p.commitment);
                d.view.digest = Some(p.commitment.eip712_digest(&domain));
                d.view.own_signature = Some(Bytes::copy_from_slice(&p.signature));
                d.view.phase = Phase::Signed;
                d.own = Some(p.clone());
                if d.reveal_window.is_some() {
                    // Signed again (the same commitment: protection allows
                    // it, BLS signing is deterministic) for a signed
                    // commitment, which `on_signed` gossips; revealed when
                    // the commit phase closes.
                    self.push(Action::Sign {
                        deal_id,
                        escrow: d.info.escrow,
                        commitment: p.commitment,
                        epoch: p.epoch,
                        index: p.signer_index,
                        commit: true,
                    });
                } else {
                    self.push(Action::Publish(Gossip::Verdict(p.clone())));
                }
            }
        }
        if d.reveal_window.is_some() {
            // Stored partials were counted before the restart: their
            // commitments were in time.
            for p in &partials {
                d.record_commit(p.signer_index, PartialCommit::commit_of(p), now);
            }
        }
        if let Some(qc) = certificate {
            let valid = qc.epoch == d.info.epoch
                && matches_deal(&qc.commitment, &d.info)
                && self.committees.get(&qc.epoch).is_some_and(|c| qc.verify(c, &domain).is_ok());
            if valid {
                d.view.phase = Phase::Certified;
                d.submit_at = Some(now);
                d.view.certificate_non_signers = Some(qc.non_signers.clone());
                d.view.certified_outcome = Some(qc.commitment.outcome);
                d.certificate = Some(qc);
            } else {
                warn!(target: "node", deal = %deal_id, "stored certificate does not verify against the committee: dropped");
            }
        }
        let phase = d.view.phase;
        // With commit-reveal the own partial is queued when it is revealed
        // (queued now, it would open the reveal phase at once).
        let unrevealed_own = d.reveal_window.is_some().then_some(me).flatten();
        self.disputes.insert(deal_id, d);
        for p in partials {
            if Some(p.signer_index) != unrevealed_own {
                self.queue_partial(p, None, now, now);
            }
        }
        if phase == Phase::Fetching {
            // Recorded but not worked on yet (e.g. a crash right after the
            // log was seen): re-check the chain before doing any work.
            info!(target: "node", deal = %deal_id, "restored dispute: re-checking its state");
            let d = self.disputes.remove(&deal_id).expect("inserted above");
            self.chain_confirming.insert(deal_id);
            self.push(Action::Confirm {
                announcement: Box::new(d.info),
                source: ConfirmSource::Chain,
                delay: Duration::ZERO,
            });
            return;
        }
        info!(target: "node", deal = %deal_id, ?phase, "restored dispute");
    }

    /// Evidence read back from a file after a restart.
    pub fn restore_evidence(&mut self, first: Attestation, second: Attestation, now: Instant) {
        match self.verify_evidence(first, second) {
            Ok((ev, escrow)) => self.on_evidence(ev, escrow, true, now),
            Err(error) => warn!(target: "slasher", %error, "invalid evidence file"),
        }
    }

    /// Evidence verified under the domain of one of the escrows served (it
    /// names none: the signatures decide), and that escrow.
    fn verify_evidence(
        &self,
        a: Attestation,
        b: Attestation,
    ) -> Result<(ConflictEvidence, Address), resolvd_consensus::Error> {
        let mut last = None;
        for (escrow, domain) in &self.domains {
            match ConflictEvidence::verify(a.clone(), b.clone(), &self.committees, domain) {
                Ok(ev) => return Ok((ev, *escrow)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("an engine serves at least one escrow"))
    }

    // ------------------------------------------------------------ gossip

    /// A decoded gossip message.
    pub fn on_gossip(&mut self, origin: O, gossip: Gossip, now: Instant) {
        match gossip {
            Gossip::Dispute(a) => self.on_announcement(a, origin),
            Gossip::Verdict(p) => self.queue_partial(p, Some(origin), now, now),
            Gossip::Commit(c) => {
                let acceptance = self.on_commit(c, Some(origin.clone()), now, now);
                if let Some(acceptance) = acceptance {
                    self.report(origin, Topic::Commits, acceptance);
                }
            }
            Gossip::Certificate(c) => {
                let acceptance = self.on_gossiped_certificate(&c, &origin, now);
                self.report(origin, Topic::Certificates, acceptance);
            }
            Gossip::Evidence(e) => {
                if let Some(acceptance) = self.on_gossiped_evidence(*e, &origin, now) {
                    self.report(origin, Topic::Evidence, acceptance);
                }
            }
        }
    }

    /// The deal is looked up (and every cheap check made) before the
    /// certificate's signature is decompressed: a certificate that would be
    /// ignored costs a map lookup, not a point decompression.
    fn on_gossiped_certificate(
        &mut self,
        w: &resolvd_proto::wire::QuorumCertificate,
        origin: &O,
        now: Instant,
    ) -> Validation {
        let deal_id = w.commitment.deal_id;
        let Some(d) = self.disputes.get(&deal_id) else {
            // Not confirmed here (or long settled): no pairing for it. The
            // sender republishes while the dispute is open.
            return Validation::Ignore;
        };
        if d.view.phase.is_final() {
            return Validation::Ignore;
        }
        if w.epoch != d.info.epoch || !matches_deal(&w.commitment, &d.info) {
            warn!(target: "p2p", peer = %origin.peer(), deal = %deal_id, "certificate does not match the confirmed deal");
            return Validation::Reject;
        }
        if d.certificate.is_some() {
            // One verified certificate per dispute is enough; copies and
            // variants cost nothing (no pairing, no score).
            return Validation::Ignore;
        }
        if !d.rejected.is_empty() && d.rejected.contains(&keccak256(w.encode_wire())) {
            return Validation::Ignore;
        }
        let Some(domain) = self.domains.get(&d.info.escrow) else {
            return Validation::Ignore;
        };
        let Some(committee) = self.committees.get(&w.epoch) else {
            return Validation::Ignore;
        };
        let qc = match QuorumCertificate::from_wire(w) {
            Ok(qc) => qc,
            Err(e) => {
                warn!(target: "p2p", peer = %origin.peer(), error = %e, "bad certificate encoding");
                return Validation::Reject;
            }
        };
        match qc.verify(committee, domain) {
            Ok(_) => {
                self.on_certificate(qc, false, now);
                Validation::Accept
            }
            Err(e) => {
                warn!(target: "p2p", peer = %origin.peer(), error = %e, "invalid certificate");
                Validation::Reject
            }
        }
    }

    /// Gossiped evidence; `None`: held until the committees it names are
    /// loaded (then verified and reported). Committees are loaded for one
    /// evidence message at a time; evidence naming an unloaded epoch while
    /// another waits is ignored (its sender republishes valid evidence), so
    /// a flood of evidence naming old epochs makes at most one committee
    /// load at a time, each one judged (and a forgery rejected) before the next.
    fn on_gossiped_evidence(
        &mut self,
        e: resolvd_proto::wire::ConflictEvidence,
        origin: &O,
        now: Instant,
    ) -> Option<Validation> {
        let id = keccak256(e.encode_wire());
        if self.seen_evidence.contains(&id) {
            return Some(Validation::Ignore);
        }
        let oldest = self.current_epoch.saturating_sub(self.cfg.evidence_epochs);
        let mut missing = Vec::new();
        for epoch in [e.first.epoch, e.second.epoch] {
            if epoch == 0 || epoch > self.current_epoch || epoch < oldest {
                // Names an epoch that does not exist (yet) here, or is out of range.
                warn!(target: "p2p", peer = %origin.peer(), epoch, current = self.current_epoch, "evidence names an epoch out of range");
                return Some(Validation::Reject);
            }
            if !self.committees.contains_key(&epoch) && !missing.contains(&epoch) {
                missing.push(epoch);
            }
        }
        if !missing.is_empty() {
            if self.evidence_waiting.is_some() {
                metrics::count(&self.metrics.gossip_bounded, "evidence_busy");
                return Some(Validation::Ignore);
            }
            for epoch in missing {
                self.load_committee(epoch);
            }
            self.evidence_waiting = Some((e, origin.clone()));
            return None;
        }
        let parsed = Attestation::from_wire(&e.first)
            .and_then(|a| Ok((a, Attestation::from_wire(&e.second)?)));
        let (a, b) = match parsed {
            Err(err) => {
                warn!(target: "p2p", peer = %origin.peer(), error = %err, "bad evidence encoding");
                return Some(Validation::Reject);
            }
            Ok(pair) => pair,
        };
        self.seen_evidence.insert(id);
        Some(match self.verify_evidence(a, b) {
            Ok((ev, escrow)) => {
                self.on_evidence(ev, escrow, false, now);
                Validation::Accept
            }
            Err(err) => {
                warn!(target: "p2p", peer = %origin.peer(), error = %err, "invalid evidence");
                Validation::Reject
            }
        })
    }

    /// The evidence waiting for committees, once they are loaded (or can no
    /// longer be: an epoch neither loaded, loading nor retried is given up).
    fn retry_waiting_evidence(&mut self, now: Instant) {
        let Some((e, _)) = &self.evidence_waiting else { return };
        let epochs = [e.first.epoch, e.second.epoch];
        let ready = epochs.iter().all(|ep| self.committees.contains_key(ep));
        let hopeless = epochs.iter().any(|ep| {
            !self.committees.contains_key(ep)
                && !self.loading.contains(ep)
                && !self.committee_retry.contains_key(ep)
        });
        if !ready && !hopeless {
            return;
        }
        let Some((e, origin)) = self.evidence_waiting.take() else { return };
        let acceptance = if ready {
            // Cannot wait again: every committee it names is loaded.
            self.on_gossiped_evidence(e, &origin, now).unwrap_or(Validation::Ignore)
        } else {
            Validation::Ignore
        };
        self.report(origin, Topic::Evidence, acceptance);
    }

    fn on_announcement(&mut self, a: DisputeAnnouncement, origin: O) {
        if a.chain_id != self.chain_id || !self.domains.contains_key(&a.escrow) {
            self.report(origin, Topic::Disputes, Validation::Ignore);
            return;
        }
        if let Some(d) = self.disputes.get(&a.deal_id) {
            let acceptance = if same_dispute(&d.info, &a) {
                Validation::Ignore
            } else {
                warn!(target: "p2p", peer = %origin.peer(), deal = %a.deal_id, "announcement contradicts the confirmed dispute");
                Validation::Reject
            };
            self.report(origin, Topic::Disputes, acceptance);
            return;
        }
        if self.finished.contains(&a.deal_id) {
            self.report(origin, Topic::Disputes, Validation::Ignore);
            return;
        }
        match self.refuted.get(&a.deal_id) {
            Some(Confirmation::NoSuchDeal) => {
                self.report(origin, Topic::Disputes, Validation::Reject);
                return;
            }
            Some(_) => {
                self.report(origin, Topic::Disputes, Validation::Ignore);
                return;
            }
            None => {}
        }
        if let Some(waiting) = self.confirming.get_mut(&a.deal_id) {
            if waiting.len() < MAX_WAITING_ORIGINS {
                waiting.push(origin);
            } else {
                self.report(origin, Topic::Disputes, Validation::Ignore);
            }
            return;
        }
        if self.confirming.len() >= self.cfg.max_confirming {
            // The watcher finds every real dispute anyway: gossip only makes
            // it faster, so under load it is not worth an RPC call.
            self.metrics.dropped_announcements.inc();
            self.report(origin, Topic::Disputes, Validation::Ignore);
            return;
        }
        self.confirming.insert(a.deal_id, vec![origin]);
        self.push(Action::Confirm {
            announcement: Box::new(a),
            source: ConfirmSource::Gossip,
            delay: Duration::ZERO,
        });
    }

    /// The node's own RPC answered a confirmation.
    pub fn on_confirmed(
        &mut self,
        a: DisputeAnnouncement,
        source: ConfirmSource,
        result: Result<Confirmation, String>,
        now: Instant,
    ) {
        let deal_id = a.deal_id;
        if source == ConfirmSource::Chain {
            self.chain_confirming.remove(&deal_id);
        }
        // Gossip copies waiting for a verdict: answered by a chain
        // confirmation too, or by their own.
        let waiting = if source != ConfirmSource::Gossip && result != Ok(Confirmation::Disputed) {
            Vec::new()
        } else {
            self.confirming.remove(&deal_id).unwrap_or_default()
        };
        let acceptance = match result {
            Ok(Confirmation::Disputed) => {
                self.refuted.remove(&deal_id);
                self.start_dispute(a, now);
                Validation::Accept
            }
            Ok(_) if source == ConfirmSource::Reorg => {
                info!(target: "chain", deal = %deal_id, "a reorged-out dispute is not disputed now: dropped");
                Validation::Ignore
            }
            Ok(_) if source == ConfirmSource::Chain => {
                // Seen disputed in a confirmed log but no longer disputed:
                // settled while this node was away. Recorded, never worked on.
                if let Some(d) = self.disputes.get(&deal_id) {
                    if !d.view.phase.is_final() {
                        self.settle(deal_id, None, now);
                    }
                } else {
                    info!(target: "chain", deal = %deal_id, "dispute already settled: nothing to do");
                    self.push(Action::PersistDispute(Box::new(a.clone()), DisputeStatus::Settled));
                    // Shown (settled) until evicted like any finished dispute.
                    let mut d = Dispute::new(a, now);
                    d.finish(Phase::Settled, now);
                    self.disputes.insert(deal_id, d);
                    self.drop_buffered(&deal_id);
                }
                Validation::Accept
            }
            Ok(c) => {
                debug!(target: "chain", deal = %deal_id, ?c, "announcement not confirmed by own RPC");
                if self.refuted.len() >= 16_384 {
                    self.refuted.clear();
                }
                self.refuted.insert(deal_id, c);
                if c == Confirmation::NoSuchDeal {
                    self.drop_buffered(&deal_id);
                    Validation::Reject
                } else {
                    Validation::Ignore
                }
            }
            Err(e) => {
                warn!(target: "chain", deal = %deal_id, error = %e, "cannot check the dispute; retrying");
                if source != ConfirmSource::Gossip {
                    // Not dropped: a chain event is re-checked until the RPC answers.
                    if source == ConfirmSource::Chain {
                        self.chain_confirming.insert(deal_id);
                    }
                    self.push(Action::Confirm {
                        announcement: Box::new(a),
                        source,
                        delay: self.cfg.retry,
                    });
                }
                Validation::Ignore
            }
        };
        for origin in waiting {
            self.report(origin, Topic::Disputes, acceptance);
        }
    }

    fn start_dispute(&mut self, info: DisputeAnnouncement, now: Instant) {
        if self.disputes.contains_key(&info.deal_id) || self.finished.contains(&info.deal_id) {
            return;
        }
        let deal_id = info.deal_id;
        info!(target: "node", deal = %deal_id, epoch = info.epoch, deadline = info.resolve_deadline, "dispute confirmed");
        self.push(Action::PersistDispute(Box::new(info.clone()), DisputeStatus::Active));
        // The epoch comes from the chain, at a confirmed block: it exists.
        if info.epoch > self.current_epoch {
            self.current_epoch = info.epoch;
        }
        self.load_committee(info.epoch);
        self.push(Action::Publish(Gossip::Dispute(info.clone())));
        self.disputes.insert(deal_id, Dispute::new(info, now).with_reveal(self.commit_reveal));
        self.release_early_commits(&deal_id, now);
        self.release_buffered(&deal_id, now);
        self.advance(deal_id, now);
    }

    // ------------------------------------------------------------ content and replay

    /// Content was added to the store (from a peer, the chain or the API):
    /// fetching disputes look again.
    pub fn on_content_stored(&mut self, now: Instant) {
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
            self.advance(id, now);
        }
    }

    fn advance(&mut self, deal_id: B256, now: Instant) {
        let Some(d) = self.disputes.get_mut(&deal_id) else { return };
        if d.view.phase != Phase::Fetching || d.gathering || now < d.next_attempt {
            return;
        }
        if !self.committees.contains_key(&d.info.epoch) {
            return;
        }
        d.gathering = true;
        let info = Box::new(d.info.clone());
        self.push(Action::Gather(info));
    }

    /// The store's answer to [`Action::Gather`].
    pub fn on_gathered(&mut self, deal_id: B256, gathered: Gathered, now: Instant) {
        let retry = self.cfg.retry;
        let Some(d) = self.disputes.get_mut(&deal_id) else { return };
        d.gathering = false;
        if d.view.phase != Phase::Fetching {
            return;
        }
        match gathered {
            Gathered::Missing(missing) => {
                d.next_attempt = now + retry;
                for (hash, tag) in missing {
                    self.push(Action::Fetch { hash, tag });
                }
            }
            Gathered::Ready(request) => match AnchorRef::of(&request) {
                Some(anchor) => {
                    // Busy until the check answers.
                    d.gathering = true;
                    self.push(Action::CheckAnchor(request, anchor));
                }
                None => {
                    d.view.phase = Phase::Replaying;
                    self.push(Action::Replay(request));
                }
            },
        }
    }

    /// The node's RPC on a deal's anchor block ([`Action::CheckAnchor`]); an
    /// `Err` is an RPC failure (retried with backoff).
    pub fn on_anchor_checked(
        &mut self,
        request: Box<ReexecRequestV1>,
        result: Result<AnchorStatus, String>,
        now: Instant,
    ) {
        let retry = self.cfg.retry;
        let Some(d) = self.disputes.get_mut(&request.deal_id) else { return };
        d.gathering = false;
        if d.view.phase != Phase::Fetching {
            return;
        }
        let status = match result {
            Ok(s) => s,
            Err(reason) => {
                metrics::count(&self.metrics.anchors, "rpc_error");
                warn!(target: "pipeline", deal = %request.deal_id, %reason, "cannot check the anchor: not replaying, will retry");
                d.operational(format!("checking the anchor: {reason}"), now);
                return;
            }
        };
        d.view.anchor = Some(status.clone());
        match status {
            AnchorStatus::Final => {
                metrics::count(&self.metrics.anchors, "final");
                d.view.phase = Phase::Replaying;
                self.push(Action::Replay(request));
            }
            AnchorStatus::NotFinal { finalized } => {
                metrics::count(&self.metrics.anchors, "not_final");
                debug!(target: "pipeline", deal = %request.deal_id, finalized, "anchor not final yet: waiting");
                d.next_attempt = now + retry;
            }
            AnchorStatus::NotCanonical { reason, .. } => {
                metrics::count(&self.metrics.anchors, "not_canonical");
                warn!(target: "pipeline", deal = %request.deal_id, %reason, "anchor is not a canonical block: never signing; the deal will time out");
                d.view.phase = Phase::AnchorRejected;
                d.view.last_error = Some(reason);
            }
        }
    }

    /// A replay finished: a verdict envelope or an operational error.
    pub fn on_replayed(
        &mut self,
        deal_id: B256,
        result: Result<VerdictEnvelopeV1, String>,
        now: Instant,
    ) {
        let Some(d) = self.disputes.get_mut(&deal_id) else { return };
        if d.view.phase != Phase::Replaying {
            return;
        }
        let envelope = match result {
            Ok(e) => e,
            Err(reason) => {
                metrics::count(&self.metrics.replays, "operational");
                warn!(target: "pipeline", deal = %deal_id, %reason, retry_in = ?d.backoff, "operational error: not signing, will retry");
                d.operational(reason, now);
                return;
            }
        };
        let commitment = envelope.commitment();
        if !matches_deal(&commitment, &d.info) {
            metrics::count(&self.metrics.replays, "operational");
            let reason =
                "the replayed commitment does not match the deal's on-chain fields".to_owned();
            warn!(target: "pipeline", deal = %deal_id, %reason, "operational error: not signing");
            d.operational(reason, now);
            return;
        }
        metrics::count(
            &self.metrics.replays,
            match commitment.outcome {
                ReexecVerdict::Reproduced => "reproduced",
                ReexecVerdict::Failed => "failed",
            },
        );
        let Some(domain) = self.domains.get(&d.info.escrow) else { return };
        let digest = commitment.eip712_digest(domain);
        d.view.commitment = Some(commitment);
        d.view.digest = Some(digest);
        d.view.last_error = None;
        d.backoff = FIRST_BACKOFF;
        info!(target: "pipeline", deal = %deal_id, outcome = ?commitment.outcome, %digest, "replayed");
        if let Some(qc) = &d.certificate {
            if qc.commitment != commitment {
                error!(target: "pipeline", deal = %deal_id, certified = ?qc.commitment.outcome, replayed = ?commitment.outcome, "ALARM: a certificate certifies a commitment this node's replay does not reproduce");
            }
        }
        let (epoch, escrow, commit) = (d.info.epoch, d.info.escrow, d.reveal_window.is_some());
        let has_certificate = d.certificate.is_some();
        self.push(Action::PersistEnvelope(Box::new(envelope)));
        match self.my_index(epoch) {
            Some(index) => {
                self.push(Action::Sign { deal_id, escrow, commitment, epoch, index, commit })
            }
            None => {
                if let Some(d) = self.disputes.get_mut(&deal_id) {
                    d.view.phase =
                        if has_certificate { Phase::Certified } else { Phase::Observing };
                }
            }
        }
    }

    /// The shell signed (and persisted) this node's partial, and its signed
    /// commitment when the [`Action::Sign`] asked for one.
    pub fn on_signed(
        &mut self,
        partial: SignedVerdict,
        commit: Option<PartialCommit>,
        now: Instant,
    ) {
        let deal_id = partial.commitment.deal_id;
        self.metrics.signatures.inc();
        info!(target: "pipeline", deal = %deal_id, signer = partial.signer_index, "signed");
        let Some(d) = self.disputes.get_mut(&deal_id) else { return };
        if d.own.is_none() {
            d.view.own_signature = Some(Bytes::copy_from_slice(&partial.signature));
            d.own = Some(partial.clone());
        } else if d.own.as_ref() != Some(&partial) {
            // Only fault injection produces a second signature.
            if !d.extra.contains(&partial) {
                d.extra.push(partial.clone());
            }
            let unrevealed = d.view.commit_reveal.as_ref().is_some_and(|cr| !cr.revealed);
            if d.reveal_window.is_some() && unrevealed {
                // Revealed with the own partial.
                return;
            }
        }
        if d.view.phase == Phase::Replaying {
            d.view.phase = if d.certificate.is_some() { Phase::Certified } else { Phase::Signed };
        }
        d.last_publish = now;
        let commit = commit.filter(|c| c.opens_to(&partial));
        if d.reveal_window.is_some() && d.own.as_ref() == Some(&partial) {
            match commit {
                Some(commit) => {
                    // Commit now; the partial itself once the commit phase closes.
                    if d.own_commit_at.is_none() {
                        d.own_commit_at = Some(now);
                        d.own_commit = Some(commit);
                        d.record_commit(commit.signer_index, commit.commit, now);
                        debug!(target: "pipeline", deal = %deal_id, commit = %commit.commit, "committed to the partial");
                        self.push(Action::Publish(Gossip::Commit(commit)));
                    }
                    self.maybe_reveal(deal_id, now);
                    return;
                }
                None => {
                    error!(target: "pipeline", deal = %deal_id, "no signed commitment for the partial: revealing it at once");
                    if let Some(cr) = d.view.commit_reveal.as_mut() {
                        cr.revealed = true;
                    }
                }
            }
        }
        self.push(Action::Publish(Gossip::Verdict(partial.clone())));
        self.queue_partial(partial, None, now, now);
    }

    // ------------------------------------------------------------ commit-reveal

    /// Gossips this node's partial if it committed and the commit phase
    /// closed: the reveal phase began, the committed stake reached the
    /// threshold, or the window since its own commitment passed.
    fn maybe_reveal(&mut self, deal_id: B256, now: Instant) {
        let Some(d) = self.disputes.get(&deal_id) else { return };
        let (Some(window), Some(at), Some(own), Some(cr)) =
            (d.reveal_window, d.own_commit_at, d.own.as_ref(), d.view.commit_reveal.as_ref())
        else {
            return;
        };
        if cr.revealed || d.view.phase.is_final() {
            return;
        }
        // A reveal of another digest gives nothing of this node's away: it
        // keeps its partial hidden until its own digest is public, its
        // commit phase closed, or its window passed.
        let own_digest_revealed =
            d.view.digest.is_some_and(|digest| d.first_reveal.contains_key(&digest));
        let why = if own_digest_revealed {
            "a reveal of its digest was seen"
        } else if self.committed_stake_met(d) {
            "commitments from the threshold stake"
        } else if now >= at + window {
            "commit window passed"
        } else {
            return;
        };
        let own = own.clone();
        let extra = d.extra.clone();
        if let Some(d) = self.disputes.get_mut(&deal_id) {
            if let Some(cr) = d.view.commit_reveal.as_mut() {
                cr.revealed = true;
            }
            d.last_publish = now;
        }
        info!(target: "pipeline", deal = %deal_id, why, "revealing the partial");
        self.push(Action::Publish(Gossip::Verdict(own.clone())));
        self.queue_partial(own, None, now, now);
        for p in extra {
            self.push(Action::Publish(Gossip::Verdict(p.clone())));
            self.queue_partial(p, None, now, now);
        }
    }

    /// Whether the signers whose verified commitments came in time for this
    /// node's digest (before its first reveal) hold the threshold stake.
    fn committed_stake_met(&self, d: &Dispute) -> bool {
        let Some(committee) = self.committees.get(&d.info.epoch) else { return false };
        let revealed = d.view.digest.and_then(|digest| d.first_reveal.get(&digest));
        let stake = d
            .commits
            .iter()
            .filter(|(_, (_, at))| revealed.is_none_or(|first| at <= first))
            .filter_map(|(i, _)| committee.member(*i).ok())
            .fold(alloy_primitives::U256::ZERO, |sum, m| sum + m.stake);
        committee.meets_threshold(stake)
    }

    /// A commitment to a partial, gossiped (`origin`) or released from the
    /// early buffer, that arrived at `arrived`. `None`: held or queued for
    /// verification (reported when verified, released or dropped).
    ///
    /// Order of the checks: nothing is held for a signer that is not a
    /// member of a loaded committee; a commitment is verified (its BLS
    /// signature by the member's registered key) before it counts or is
    /// forwarded; one verified commitment is kept per signer (an honest
    /// signer makes one per deal), after which that signer's other
    /// commitments are ignored unverified.
    fn on_commit(
        &mut self,
        c: PartialCommit,
        origin: Option<O>,
        arrived: Instant,
        now: Instant,
    ) -> Option<Validation> {
        let deal_id = c.deal_id;
        if c.epoch == 0 {
            return Some(Validation::Reject);
        }
        if let Some(committee) = self.committees.get(&c.epoch) {
            if committee.member(c.signer_index).is_err() {
                if let Some(o) = &origin {
                    warn!(target: "p2p", peer = %o.peer(), deal = %deal_id, signer = c.signer_index, "rejecting commitment of a non-member");
                }
                return Some(Validation::Reject);
            }
        }
        let Some(d) = self.disputes.get_mut(&deal_id) else {
            if self.finished.contains(&deal_id) {
                return Some(Validation::Ignore);
            }
            // Not started here yet: held like an early partial.
            return self.hold_early_commit(c, origin, arrived, now);
        };
        if d.view.phase.is_final() {
            return Some(Validation::Ignore);
        }
        if c.epoch != d.info.epoch {
            if let Some(o) = &origin {
                warn!(target: "p2p", peer = %o.peer(), deal = %deal_id, epoch = c.epoch, "rejecting commitment: not the dispute's pinned epoch");
            }
            return Some(Validation::Reject);
        }
        if d.reveal_window.is_none() {
            // Commit-reveal is off here (a node with another setting).
            return Some(Validation::Ignore);
        }
        if d.commits.contains_key(&c.signer_index) {
            // The signer's commitment is held (this one, or another: only a
            // forgery or the signer's own misbehaviour; neither is spread).
            return Some(Validation::Ignore);
        }
        if !self.committees.contains_key(&c.epoch) {
            // The dispute's committee is still loading: held until it is.
            return self.hold_early_commit(c, origin, arrived, now);
        }
        if let Some(pending) = self.pending_commits.get_mut(&c) {
            // The same message from another peer: one verdict for all.
            pending.arrived = pending.arrived.min(arrived);
            return match origin {
                Some(o) if pending.origins.len() < MAX_ORIGINS => {
                    pending.origins.push(o);
                    None
                }
                Some(_) => Some(Validation::Ignore),
                None => None,
            };
        }
        if self.pending_commits.len() >= MAX_PENDING_COMMITS {
            metrics::count(&self.metrics.gossip_bounded, "commits_full");
            return Some(Validation::Ignore);
        }
        let charged = match origin.as_ref() {
            Some(o) if !self.pending_quota.take(o.peer(), MAX_PENDING_PER_PEER) => {
                metrics::count(&self.metrics.gossip_bounded, "pending_quota");
                return Some(Validation::Ignore);
            }
            Some(o) => Some(o.peer().clone()),
            None => None,
        };
        self.pending_commits
            .insert(c, PendingCommit { origins: origin.into_iter().collect(), arrived, charged });
        let due = now + BATCH_WINDOW;
        self.process_at = Some(self.process_at.map_or(due, |at| at.min(due)));
        None
    }

    /// Verifies the pending commitments (one randomised multi-pairing) and
    /// records the valid ones; every origin gets its own message's verdict.
    fn verify_commits(&mut self, seed: &[u8; 32], now: Instant) {
        if self.pending_commits.is_empty() {
            return;
        }
        let mut pending: Vec<(PartialCommit, PendingCommit<O>)> =
            self.pending_commits.drain().collect();
        // Handled in arrival order (then by deal and signer), not the map's:
        // the timely commitments, and so the certificate, must not depend on
        // hashing order.
        pending.sort_by(|(a, pa), (b, pb)| {
            (pa.arrived, a.deal_id, a.signer_index, a.epoch, a.commit).cmp(&(
                pb.arrived,
                b.deal_id,
                b.signer_index,
                b.epoch,
                b.commit,
            ))
        });
        let mut checked: Vec<(PartialCommit, PendingCommit<O>, Option<bool>)> = Vec::new();
        {
            let mut keys = Vec::new();
            let mut sigs = Vec::new();
            let mut index = Vec::new();
            for (n, (c, _)) in pending.iter().enumerate() {
                let key = self
                    .committees
                    .get(&c.epoch)
                    .and_then(|committee| committee.member(c.signer_index).ok())
                    .map(|m| m.key);
                let sig = resolvd_consensus::Signature::from_compressed(&c.signature).ok();
                if let (Some(key), Some(sig)) = (key, sig) {
                    keys.push((c.signing_message(), key));
                    sigs.push(sig);
                    index.push(n);
                }
            }
            let items: Vec<(B256, resolvd_consensus::batch::Item<'_>)> = keys
                .iter()
                .zip(&sigs)
                .map(|((m, key), signature)| {
                    (*m, resolvd_consensus::batch::Item { key, signature })
                })
                .collect();
            let invalid = resolvd_consensus::batch::verify_commits(&items, seed);
            let mut verdicts = vec![None; pending.len()];
            for (pos, n) in index.into_iter().enumerate() {
                verdicts[n] = Some(invalid.binary_search(&pos).is_err());
            }
            for ((c, p), v) in pending.into_iter().zip(verdicts) {
                checked.push((c, p, v));
            }
        }
        for (c, p, valid) in checked {
            if let Some(peer) = &p.charged {
                self.pending_quota.give(peer);
            }
            let acceptance = match valid {
                Some(true) => {
                    metrics::count(&self.metrics.commit_reveal, "valid_commit");
                    self.on_verified_commit(&c, p.arrived, now)
                }
                Some(false) => {
                    metrics::count(&self.metrics.commit_reveal, "invalid_commit");
                    Validation::Reject
                }
                // Its committee was evicted, or the signature does not decode.
                None if self.committees.contains_key(&c.epoch) => Validation::Reject,
                None => Validation::Ignore,
            };
            for origin in p.origins {
                if acceptance == Validation::Reject {
                    warn!(target: "p2p", peer = %origin.peer(), deal = %c.deal_id, signer = c.signer_index, "rejecting commitment with an invalid signature");
                }
                self.report(origin, Topic::Commits, acceptance);
            }
        }
    }

    /// A verified commitment: recorded (timely or late by its arrival), and
    /// a reveal of it verified meanwhile counts now.
    fn on_verified_commit(
        &mut self,
        c: &PartialCommit,
        arrived: Instant,
        now: Instant,
    ) -> Validation {
        let deal_id = c.deal_id;
        let Some(d) = self.disputes.get_mut(&deal_id) else { return Validation::Ignore };
        if d.view.phase.is_final() || !d.record_commit(c.signer_index, c.commit, arrived) {
            return Validation::Ignore;
        }
        if d.reveal_phase_at.is_some_and(|phase| arrived > phase) {
            // Late unless its partial's digest was not revealed yet.
            metrics::count(&self.metrics.commit_reveal, "late_commit");
            info!(target: "pipeline", deal = %deal_id, signer = c.signer_index, "commitment arrived in the reveal phase: its partial counts only if its digest was not revealed before");
        }
        // Its reveal may have been verified first (another batch): it
        // counts if the commitment arrived no later than its digest's first
        // reveal.
        let opened = d.uncounted.iter().position(|(p, digest, _)| {
            c.opens_to(p) && d.timely(c.signer_index, &c.commit, digest)
        });
        if let Some(pos) = opened {
            let (p, _, _) = d.uncounted.remove(pos);
            if let Some(cr) = d.view.commit_reveal.as_mut() {
                cr.uncounted.retain(|i| *i != p.signer_index);
            }
            self.count_reveal(&p, now);
        }
        self.maybe_reveal(deal_id, now);
        Validation::Accept
    }

    /// Adds a verified reveal to the certificate builder.
    fn count_reveal(&mut self, p: &SignedVerdict, now: Instant) {
        let Some(d) = self.disputes.get(&p.commitment.deal_id) else { return };
        if d.own.as_ref() != Some(p) {
            self.actions.push_back(Action::PersistPartial(p.clone()));
        }
        let escrow = d.info.escrow;
        let qc = self.builders.get_mut(&(escrow, p.epoch)).and_then(|b| b.count_verified(p));
        if let Some(qc) = qc {
            self.on_certificate(qc, true, now);
        }
    }

    /// Holds a commitment until its dispute starts or its committee is
    /// loaded, within the early buffers' total and per-peer bounds. `None`:
    /// held (reported when released or dropped).
    fn hold_early_commit(
        &mut self,
        c: PartialCommit,
        origin: Option<O>,
        arrived: Instant,
        now: Instant,
    ) -> Option<Validation> {
        if self.early_commits_len >= self.cfg.max_buffered_partials {
            self.metrics.dropped_partials.inc();
            return Some(Validation::Ignore);
        }
        if let Some(o) = &origin {
            if !self.early_quota.take(o.peer(), MAX_EARLY_PER_PEER) {
                metrics::count(&self.metrics.gossip_bounded, "early_quota");
                return Some(Validation::Ignore);
            }
        }
        self.early_commits_len += 1;
        let until = now + self.cfg.buffer_ttl;
        self.early_commits.entry(c.deal_id).or_default().push(EarlyCommit {
            commit: c,
            origin,
            arrived,
            until,
        });
        None
    }

    fn release_early_commits(&mut self, deal_id: &B256, now: Instant) {
        for e in self.early_commits.remove(deal_id).unwrap_or_default() {
            self.early_commits_len -= 1;
            if let Some(o) = &e.origin {
                self.early_quota.give(o.peer());
            }
            let acceptance = self.on_commit(e.commit, e.origin.clone(), e.arrived, now);
            if let (Some(origin), Some(acceptance)) = (e.origin, acceptance) {
                self.report(origin, Topic::Commits, acceptance);
            }
        }
    }

    /// A verified reveal of a commit-reveal dispute that arrived at
    /// `arrived`: the reveal phase begins at the arrival of the first one;
    /// it counts if its signer's verified commitment arrived no later.
    fn on_verified_reveal(
        &mut self,
        p: &SignedVerdict,
        digest: B256,
        arrived: Instant,
        now: Instant,
    ) {
        let deal_id = p.commitment.deal_id;
        let Some(d) = self.disputes.get_mut(&deal_id) else { return };
        if d.reveal_window.is_none() || !d.reveals_verified.insert((digest, p.signer_index)) {
            return;
        }
        let entered_now = d.reveal_phase_at.is_none();
        let first = d.first_reveal.entry(digest).or_insert(arrived);
        *first = (*first).min(arrived);
        if d.enter_reveal_phase(arrived) && entered_now {
            let committed = d.view.commit_reveal.as_ref().map_or(0, |cr| cr.committed.len());
            info!(target: "pipeline", deal = %deal_id, committed, "reveal phase");
        }
        let own = d.own.as_ref() == Some(p);
        let counted = own || d.timely(p.signer_index, &PartialCommit::commit_of(p), &digest);
        if counted {
            self.count_reveal(p, now);
        } else {
            let Some(cr) = d.view.commit_reveal.as_mut() else { return };
            if !cr.uncounted.contains(&p.signer_index) {
                cr.uncounted.push(p.signer_index);
                cr.uncounted.sort_unstable();
            }
            d.uncounted.push((p.clone(), digest, arrived));
            metrics::count(&self.metrics.commit_reveal, "uncounted_reveal");
            info!(target: "pipeline", deal = %deal_id, signer = p.signer_index, "reveal without a timely commitment: not counted");
        }
        if entered_now {
            self.maybe_reveal(deal_id, now);
        }
    }

    /// Commit-reveal timers: own reveals whose window passed, and the
    /// fallback for disputes stuck without a certificate in the reveal phase.
    fn reveal_timers(&mut self, now: Instant) {
        let mut reveal = Vec::new();
        let mut fallback = Vec::new();
        let mut late_fallback = Vec::new();
        for (id, d) in &self.disputes {
            let (Some(window), Some(cr)) = (d.reveal_window, d.view.commit_reveal.as_ref()) else {
                continue;
            };
            if d.view.phase.is_final() {
                continue;
            }
            if !cr.revealed && d.own_commit_at.is_some_and(|t| now >= t + window) {
                reveal.push(*id);
            }
            let stuck =
                d.reveal_phase_at.is_some_and(|t| now >= t + window * REVEAL_FALLBACK_WINDOWS);
            if stuck && d.certificate.is_none() && !cr.fallback {
                fallback.push(*id);
            }
            let stuck_late =
                d.reveal_phase_at.is_some_and(|t| now >= t + window * REVEAL_LATE_FALLBACK_WINDOWS);
            if stuck_late && d.certificate.is_none() && cr.fallback && !cr.late_fallback {
                late_fallback.push(*id);
            }
        }
        for id in reveal {
            self.maybe_reveal(id, now);
        }
        for id in fallback {
            let Some(d) = self.disputes.get_mut(&id) else { continue };
            let Some(phase) = d.reveal_phase_at else { continue };
            let Some(cr) = d.view.commit_reveal.as_mut() else { continue };
            cr.fallback = true;
            // Only reveals that arrived no later than the reveal phase
            // began: nobody could have copied them. A reveal after it
            // without a timely commitment may be a copy, and never counts.
            let (early, late): (Vec<_>, Vec<_>) =
                std::mem::take(&mut d.uncounted).into_iter().partition(|(_, _, at)| *at <= phase);
            d.uncounted = late;
            cr.uncounted.retain(|i| !early.iter().any(|(p, _, _)| p.signer_index == *i));
            metrics::count(&self.metrics.commit_reveal, "fallback");
            warn!(target: "pipeline", deal = %id, counted = early.len(), "no certificate in the reveal phase: counting the reveals that arrived before it began");
            for (p, _, _) in early {
                self.count_reveal(&p, now);
            }
        }
        for id in late_fallback {
            let Some(d) = self.disputes.get_mut(&id) else { continue };
            let Some(cr) = d.view.commit_reveal.as_mut() else { continue };
            cr.late_fallback = true;
            cr.uncounted.clear();
            let late = std::mem::take(&mut d.uncounted);
            metrics::count(&self.metrics.commit_reveal, "late_fallback");
            warn!(target: "pipeline", deal = %id, counted = late.len(), "still no certificate: counting every verified reveal, late ones included");
            for (p, _, _) in late {
                self.count_reveal(&p, now);
            }
        }
    }

    /// Fault injection (`byzantine = lazy`): sign `p`'s commitment as this
    /// node's own, without replaying.
    #[cfg(feature = "fault-injection")]
    pub fn copy_partial(&mut self, p: &SignedVerdict) {
        let deal_id = p.commitment.deal_id;
        let Some(d) = self.disputes.get(&deal_id) else { return };
        let (escrow, epoch, commit) = (d.info.escrow, d.info.epoch, d.reveal_window.is_some());
        if d.own.is_some() || p.epoch != epoch {
            return;
        }
        if let Some(index) = self.my_index(epoch) {
            self.push(Action::Sign {
                deal_id,
                escrow,
                commitment: p.commitment,
                epoch,
                index,
                commit,
            });
        }
    }

    /// Fault injection (`byzantine = forge_commits`): the open disputes whose
    /// committee is loaded, with their members.
    #[cfg(feature = "fault-injection")]
    pub fn forgeable(&self) -> Vec<(B256, u64, Vec<u32>)> {
        self.disputes
            .values()
            .filter(|d| !d.view.phase.is_final())
            .filter_map(|d| {
                let c = self.committees.get(&d.info.epoch)?;
                Some((d.info.deal_id, d.info.epoch, c.members().iter().map(|m| m.index).collect()))
            })
            .collect()
    }

    /// Slashing protection refused to sign (a different commitment was signed
    /// for this deal before). Never retried.
    pub fn on_sign_refused(&mut self, deal_id: B256, reason: String) {
        self.metrics.protection_refusals.inc();
        error!(target: "pipeline", deal = %deal_id, error = %reason, "slashing protection refused to sign");
        if let Some(d) = self.disputes.get_mut(&deal_id) {
            d.view.phase = Phase::Refused;
            d.view.last_error = Some(reason);
        }
    }

    // ------------------------------------------------------------ partials and certificates

    fn drop_buffered(&mut self, deal_id: &B256) {
        for b in self.buffered.remove(deal_id).unwrap_or_default() {
            self.buffered_len -= 1;
            if let Some(origin) = b.origin {
                self.early_quota.give(origin.peer());
                self.report(origin, Topic::Verdicts, Validation::Ignore);
            }
        }
        for e in self.early_commits.remove(deal_id).unwrap_or_default() {
            self.early_commits_len -= 1;
            if let Some(origin) = e.origin {
                self.early_quota.give(origin.peer());
                self.report(origin, Topic::Commits, Validation::Ignore);
            }
        }
    }

    fn release_buffered(&mut self, deal_id: &B256, now: Instant) {
        for b in self.buffered.remove(deal_id).unwrap_or_default() {
            self.buffered_len -= 1;
            if let Some(o) = &b.origin {
                self.early_quota.give(o.peer());
            }
            self.queue_partial(b.partial, b.origin, b.arrived, now);
        }
    }

    /// Cheap checks now; the signature is verified in the next batch. A
    /// gossiped partial's validation result is reported after the batch.
    /// `arrived`: when it reached this node (commit-reveal orders reveals
    /// and commitments by arrival, not by verification).
    fn queue_partial(
        &mut self,
        p: SignedVerdict,
        origin: Option<O>,
        arrived: Instant,
        now: Instant,
    ) {
        let deal_id = p.commitment.deal_id;
        let reject = |this: &mut Self, origin: Option<O>, why: &str| {
            if let Some(origin) = origin {
                warn!(target: "p2p", peer = %origin.peer(), deal = %deal_id, epoch = p.epoch, why, "rejecting partial");
                this.report(origin, Topic::Verdicts, Validation::Reject);
            }
        };
        if p.epoch == 0 {
            return reject(self, origin, "epoch 0 has no committee");
        }
        let known = self
            .disputes
            .get(&deal_id)
            .map(|d| (d.info.epoch, d.view.phase.is_final(), matches_deal(&p.commitment, &d.info)));
        let escrow = self.disputes.get(&deal_id).map(|d| d.info.escrow);
        match known {
            None if self.finished.contains(&deal_id) => {
                if let Some(origin) = origin {
                    self.report(origin, Topic::Verdicts, Validation::Ignore);
                }
                return;
            }
            None => return self.buffer(p, origin, arrived, now),
            Some((epoch, _, _)) if epoch != p.epoch => {
                return reject(self, origin, "not the dispute's pinned epoch");
            }
            Some((_, _, false)) => return reject(self, origin, "does not match the deal's fields"),
            Some((_, true, _)) => {
                if let Some(origin) = origin {
                    self.report(origin, Topic::Verdicts, Validation::Ignore);
                }
                return;
            }
            Some(_) => {}
        }
        let Some(domain) = escrow.and_then(|e| self.domains.get(&e)) else { return };
        let digest = p.commitment.eip712_digest(domain);
        let key: PartialKey = (digest, p.signer_index, p.signature);
        if let Some(entry) = self.deferred.get_mut(&key) {
            // This very message is waiting: one verdict for every origin.
            entry.arrived = entry.arrived.min(arrived);
            match origin {
                Some(o) if entry.origins.len() < MAX_ORIGINS => entry.origins.push(o),
                Some(o) => self.report(o, Topic::Verdicts, Validation::Ignore),
                None => {}
            }
            return;
        }
        // A peer's partial of this node's own key may be a doppelgänger's:
        // verified without waiting (before any held signature is released).
        let mine = origin.is_some()
            && self.cfg.detect_doppelganger
            && self.my_index(p.epoch) == Some(p.signer_index);
        if escrow.and_then(|e| self.builders.get(&(e, p.epoch))).is_none() {
            // The dispute's committee is still loading.
            return self.buffer(p, origin, arrived, now);
        }
        let reveal = self.disputes.get(&deal_id).map(|d| {
            (d.reveal_window.is_some(), d.reveals_verified.contains(&(digest, p.signer_index)))
        });
        if reveal == Some((true, true)) {
            if let Some(o) = origin {
                self.report(o, Topic::Verdicts, Validation::Ignore);
            }
            return;
        }
        // A peer's messages waiting for verification are bounded per peer.
        let charged = match origin.as_ref() {
            Some(o) if !self.pending_quota.take(o.peer(), MAX_PENDING_PER_PEER) => {
                metrics::count(&self.metrics.gossip_bounded, "pending_quota");
                if let Some(o) = origin {
                    self.report(o, Topic::Verdicts, Validation::Ignore);
                }
                return;
            }
            Some(o) => Some(o.peer().clone()),
            None => None,
        };
        let Some(builder) = escrow.and_then(|e| self.builders.get_mut(&(e, p.epoch))) else {
            // (Checked above: the builder exists.)
            if let Some(peer) = &charged {
                self.pending_quota.give(peer);
            }
            return;
        };
        let queued = match reveal {
            Some((true, false)) => builder.on_partial_uncounted(&p),
            _ => builder.on_partial(&p),
        };
        match queued {
            Ok(Queued::New) => {
                // Commit-reveal: the reveal phase (after which commitments are
                // late) starts at the first verified reveal, so reveals are
                // not held back.
                let commit_reveal = reveal.is_some_and(|(on, _)| on);
                let urgent = mine || commit_reveal || builder.could_certify(&digest);
                let due = now + if urgent { BATCH_WINDOW } else { BATCH_WAIT };
                self.process_at = Some(self.process_at.map_or(due, |at| at.min(due)));
                self.deferred.insert(
                    key,
                    Deferred {
                        partial: p,
                        origins: origin.into_iter().collect(),
                        arrived,
                        charged,
                    },
                );
            }
            Ok(Queued::Duplicate) => {
                // Already verified (this signer and digest).
                if let Some(peer) = &charged {
                    self.pending_quota.give(peer);
                }
                if let Some(o) = origin {
                    self.report(o, Topic::Verdicts, Validation::Ignore);
                }
            }
            Err(e) => {
                if let Some(peer) = &charged {
                    self.pending_quota.give(peer);
                }
                reject(self, origin, &e.to_string())
            }
        }
    }

    fn buffer(&mut self, p: SignedVerdict, origin: Option<O>, arrived: Instant, now: Instant) {
        if self.buffered_len >= self.cfg.max_buffered_partials {
            self.metrics.dropped_partials.inc();
            if let Some(origin) = origin {
                self.report(origin, Topic::Verdicts, Validation::Ignore);
            }
            return;
        }
        if let Some(o) = &origin {
            if !self.early_quota.take(o.peer(), MAX_EARLY_PER_PEER) {
                metrics::count(&self.metrics.gossip_bounded, "early_quota");
                if let Some(origin) = origin {
                    self.report(origin, Topic::Verdicts, Validation::Ignore);
                }
                return;
            }
        }
        self.buffered_len += 1;
        self.buffered.entry(p.commitment.deal_id).or_default().push(Buffered {
            partial: p,
            origin,
            arrived,
            until: now + self.cfg.buffer_ttl,
        });
    }

    /// Verifies the queued commitments and partials (one batch each; `seed`
    /// feeds the random scalars of the multi-message checks: pass fresh OS
    /// randomness). Commitments go first, so a commitment and its reveal
    /// verified in one batch count in order.
    pub fn on_batch(&mut self, seed: &[u8; 32], now: Instant) {
        self.process_at = None;
        self.verify_commits(seed, now);
        let mut events = Vec::new();
        let mut pending = 0;
        for builder in self.builders.values_mut() {
            if builder.pending() > 0 {
                events.extend(builder.process(seed));
            }
            pending += builder.pending();
        }
        self.metrics.pending_partials.set(pending as i64);
        for event in events {
            match event {
                BuilderEvent::Verified { signer, digest, signature, wire } => {
                    metrics::count(&self.metrics.partials_verified, "valid");
                    let Some(entry) = self.deferred.remove(&(digest, signer, wire)) else {
                        continue;
                    };
                    if let Some(peer) = &entry.charged {
                        self.pending_quota.give(peer);
                    }
                    let (p, origins, arrived) = (entry.partial, entry.origins, entry.arrived);
                    let from_peer = !origins.is_empty();
                    for origin in origins {
                        self.report(origin, Topic::Verdicts, Validation::Accept);
                    }
                    // (A committee scan: only when detection is on.)
                    let mine =
                        self.cfg.detect_doppelganger && self.my_index(p.epoch) == Some(signer);
                    if let Some(d) = self.disputes.get_mut(&p.commitment.deal_id) {
                        // Our key, verified, from a peer, and not what this
                        // data dir signed: the key is running elsewhere.
                        if mine
                            && from_peer
                            && d.own.as_ref().is_none_or(|o| o.commitment != p.commitment)
                        {
                            error!(target: "pipeline", deal = %p.commitment.deal_id, signer, "DOPPELGANGER: a partial signed by this node's key that this node did not make: the key runs elsewhere; refusing to sign");
                            self.doppelganger.get_or_insert((
                                p.commitment.deal_id,
                                p.epoch,
                                signer,
                            ));
                        }
                        let list = d.view.signers.entry(digest).or_default();
                        if !list.contains(&signer) {
                            list.push(signer);
                            list.sort_unstable();
                        }
                        // (With commit-reveal, persisted once counted.)
                        if d.reveal_window.is_none()
                            && d.own.as_ref().is_none_or(|o| o.signer_index != signer)
                        {
                            self.actions.push_back(Action::PersistPartial(p.clone()));
                        }
                    }
                    self.on_verified_reveal(&p, digest, arrived, now);
                    let escrow = self.disputes.get(&p.commitment.deal_id).map(|d| d.info.escrow);
                    if let Some(escrow) = escrow {
                        self.check_conflict(escrow, Attestation::single(&p, signature), now);
                    }
                }
                BuilderEvent::Invalid { signer, digest, wire } => {
                    metrics::count(&self.metrics.partials_verified, "invalid");
                    if let Some(entry) = self.deferred.remove(&(digest, signer, wire)) {
                        if let Some(peer) = &entry.charged {
                            self.pending_quota.give(peer);
                        }
                        for origin in entry.origins {
                            warn!(target: "p2p", peer = %origin.peer(), signer, "rejecting partial with an invalid signature");
                            self.report(origin, Topic::Verdicts, Validation::Reject);
                        }
                    }
                }
                BuilderEvent::Certificate(qc) => self.on_certificate(*qc, true, now),
            }
        }
    }

    fn check_conflict(&mut self, escrow: Address, attestation: Attestation, now: Instant) {
        let Some(conflict) = self.conflicts.get_mut(&escrow) else { return };
        match conflict.on_attestation(attestation) {
            Ok(found) => {
                for ev in found {
                    self.on_evidence(ev, escrow, true, now);
                }
            }
            Err(e) => debug!(target: "slasher", error = %e, "attestation not usable as evidence"),
        }
    }

    fn on_certificate(&mut self, qc: QuorumCertificate, built_here: bool, now: Instant) {
        let deal_id = qc.commitment.deal_id;
        let escrow = self.disputes.get(&deal_id).map(|d| d.info.escrow);
        if let (Some(escrow), Some(committee)) = (escrow, self.committees.get(&qc.epoch)) {
            if let Ok(a) = qc.attestation(committee) {
                self.check_conflict(escrow, a, now);
            }
        }
        let Some(d) = self.disputes.get_mut(&deal_id) else { return };
        if d.certificate.is_some() || d.view.phase.is_final() {
            return;
        }
        if qc.epoch != d.info.epoch || !matches_deal(&qc.commitment, &d.info) {
            warn!(target: "pipeline", deal = %deal_id, "certificate does not match the deal: ignored");
            return;
        }
        if !d.rejected.is_empty() && d.rejected.contains(&certificate_id(&qc)) {
            return;
        }
        self.actions.push_back(Action::PersistCertificate(Box::new(qc.clone())));
        let elapsed = now.saturating_duration_since(d.seen);
        self.metrics.certificates.inc();
        self.metrics.dispute_to_certificate.observe(elapsed.as_secs_f64());
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
        let me = self.me.as_ref().and_then(|k| committee?.index_of(k));
        let rank = me.map_or(members.len(), |me| submit_rank(&deal_id, &members, me));
        d.submit_at = Some(now + self.cfg.submit_slot * rank as u32);
        d.submit_backoff = self.cfg.retry;
        info!(target: "pipeline", deal = %deal_id, outcome = ?qc.commitment.outcome, non_signers = ?qc.non_signers, built_here, rank, "certificate");
        d.certificate = Some(qc.clone());
        d.certificate_from_peer = !built_here;
        if built_here && rank < CERTIFICATE_GOSSIPERS {
            d.certificate_gossiped = true;
            d.last_publish = now;
            self.actions.push_back(Action::Publish(Gossip::Certificate(Box::new(qc.to_wire()))));
        }
    }

    /// Replaces a dispute's certificate by one with more signers, if this
    /// node's builder verified (and counted) more for the same commitment.
    fn widen_certificate(&mut self, deal_id: &B256) {
        let Some(d) = self.disputes.get(deal_id) else { return };
        let (Some(qc), Some(domain)) = (&d.certificate, self.domains.get(&d.info.escrow)) else {
            return;
        };
        let Some(builder) = self.builders.get(&(d.info.escrow, qc.epoch)) else { return };
        let digest = qc.commitment.eip712_digest(domain);
        let signers = builder.committee().len().saturating_sub(qc.non_signers.len());
        if builder.signer_count(&digest) <= signers {
            return;
        }
        let Some(best) = builder.best_certificate(&digest) else { return };
        if best.commitment != qc.commitment || best.non_signers.len() >= qc.non_signers.len() {
            return;
        }
        info!(target: "pipeline", deal = %deal_id, before = ?qc.non_signers, after = ?best.non_signers, "certificate widened with later signers");
        self.actions.push_back(Action::PersistCertificate(Box::new(best.clone())));
        if let Some(d) = self.disputes.get_mut(deal_id) {
            d.view.certificate_non_signers = Some(best.non_signers.clone());
            d.certificate = Some(best);
        }
    }

    // ------------------------------------------------------------ slashing

    fn on_evidence(
        &mut self,
        ev: ConflictEvidence,
        escrow: Address,
        detected_here: bool,
        now: Instant,
    ) {
        let deal_id = ev.first.commitment.deal_id;
        let Some(committee) = self.committees.get(&ev.first.epoch) else { return };
        let resolvers: Vec<u32> = ev
            .equivocators
            .iter()
            .filter_map(|k| committee.index_of(k))
            .filter(|i| !self.slashed.contains(&(deal_id, *i)))
            .filter(|i| {
                !self
                    .slashes
                    .iter()
                    .any(|t| t.request.deal_id == deal_id && t.request.resolvers.contains(i))
            })
            .collect();
        if resolvers.is_empty() {
            return;
        }
        self.seen_evidence.insert(keccak256(ev.to_wire().encode_wire()));
        self.metrics.equivocations.inc();
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
        self.push(Action::WriteEvidence(Box::new(ev.clone()), resolvers.clone()));
        self.push(Action::Publish(Gossip::Evidence(Box::new(ev.to_wire()))));
        self.slashes.push(SlashTask {
            request: SlashRequest {
                deal_id,
                escrow,
                first: ev.first,
                second: ev.second,
                resolvers,
            },
            at: now + self.cfg.submit_slot * rank as u32,
            running: false,
        });
    }

    /// The store says `resolver` was slashed for `deal_id` (at restore).
    pub fn mark_slashed(&mut self, deal_id: B256, resolver: u32) {
        self.slashed.insert((deal_id, resolver));
    }

    /// A resolver was slashed on chain (a `Slashed` log), for `deal_id`.
    pub fn on_slashed_log(&mut self, deal_id: B256, resolver: u32) {
        self.slashed.insert((deal_id, resolver));
        self.push(Action::PersistSlashed { deal_id, resolver, tx: B256::ZERO });
        for t in &mut self.slashes {
            if t.request.deal_id == deal_id {
                t.request.resolvers.retain(|r| *r != resolver);
            }
        }
        self.slashes.retain(|t| t.running || !t.request.resolvers.is_empty());
    }

    /// The watcher found blocks from `from` on reorged out, with the logs it
    /// had handled there: `Disputed` logs of `disputed`, `Settled` logs of
    /// `settled`. A dispute not signed yet whose `Disputed` log was there (by
    /// the watcher's record, or by its announced block, for disputes learnt
    /// through gossip) is
    /// dropped (with its stored records) and confirmed again on chain: if the
    /// challenge is still (or again) there it is handled afresh, once. One
    /// already signed is kept: slashing protection holds whatever happens. A
    /// settlement that vanished re-opens submission of the held certificate.
    pub fn on_reorg(&mut self, from: u64, disputed: &[B256], settled: &[B256], now: Instant) {
        let mut affected: Vec<B256> = disputed.to_vec();
        affected.extend(
            self.disputes
                .values()
                .filter(|d| d.info.block_number >= from && !affected.contains(&d.info.deal_id))
                .map(|d| d.info.deal_id)
                .collect::<Vec<_>>(),
        );
        for id in &affected {
            let Some(d) = self.disputes.get(id) else { continue };
            if d.own.is_some() || d.view.phase.is_final() {
                warn!(target: "chain", deal = %id, "Disputed log reorged out after this node signed: kept");
                continue;
            }
            warn!(target: "chain", deal = %id, "Disputed log reorged out before any signature: dropped, re-confirming");
            let info = d.info.clone();
            self.forget(id);
            self.push(Action::Prune(*id));
            // Not in `chain_confirming`: a new Disputed log (a re-challenge)
            // meanwhile gets its own confirmation.
            self.push(Action::Confirm {
                announcement: Box::new(info),
                source: ConfirmSource::Reorg,
                delay: Duration::ZERO,
            });
        }
        for id in settled {
            let Some(d) = self.disputes.get_mut(id) else { continue };
            if d.view.phase != Phase::Settled {
                continue;
            }
            warn!(target: "chain", deal = %id, "Settled log reorged out: the dispute is open again");
            d.finished_at = None;
            d.view.settled_by = None;
            d.view.phase = if d.certificate.is_some() {
                d.submit_at = Some(now);
                d.submitting = false;
                Phase::Certified
            } else if d.own.is_some() {
                Phase::Signed
            } else {
                Phase::Observing
            };
        }
    }

    /// A slashing transaction finished.
    pub fn on_slashed(
        &mut self,
        deal_id: B256,
        resolvers: Vec<u32>,
        result: SlashResult,
        now: Instant,
    ) {
        match result {
            SlashResult::Done(tx) => {
                metrics::count(
                    &self.metrics.slashings,
                    if tx.is_some() { "sent" } else { "already_slashed" },
                );
                info!(target: "slasher", deal = %deal_id, ?resolvers, ?tx, "evidence dealt with");
                for &resolver in &resolvers {
                    self.slashed.insert((deal_id, resolver));
                    self.push(Action::PersistSlashed {
                        deal_id,
                        resolver,
                        tx: tx.unwrap_or_default(),
                    });
                }
                self.slashes.retain(|t| {
                    !(t.request.deal_id == deal_id && t.request.resolvers == resolvers)
                });
            }
            SlashResult::Failed(e) => {
                metrics::count(&self.metrics.slashings, "error");
                warn!(target: "slasher", deal = %deal_id, error = %e, "slashing failed, will retry");
                for t in &mut self.slashes {
                    if t.request.deal_id == deal_id && t.request.resolvers == resolvers {
                        t.running = false;
                        t.at = now + self.cfg.retry;
                    }
                }
            }
        }
    }

    // ------------------------------------------------------------ chain

    /// A new head and its timestamp (chain time).
    pub fn on_head(&mut self, number: u64, timestamp: u64) {
        self.head = self.head.max(number);
        self.chain_time = self.chain_time.max(timestamp);
    }

    /// A `Disputed` log at a confirmed block.
    pub fn on_disputed_log(&mut self, a: DisputeAnnouncement) {
        // A gossip confirmation in flight does not stop this one: it may have
        // been asked at a block before the dispute.
        if self.disputes.contains_key(&a.deal_id)
            || self.finished.contains(&a.deal_id)
            || !self.chain_confirming.insert(a.deal_id)
        {
            return;
        }
        // Recorded before the cursor moves past this log, so a crash before
        // the check cannot lose it (restore re-checks).
        self.push(Action::PersistDispute(Box::new(a.clone()), DisputeStatus::Active));
        // A node catching up may see the dispute after it was settled: check
        // the current state before doing any work.
        self.push(Action::Confirm {
            announcement: Box::new(a),
            source: ConfirmSource::Chain,
            delay: Duration::ZERO,
        });
    }

    /// A settlement seen on chain (`VerdictCommitted` carries the transaction).
    pub fn on_settled_log(&mut self, deal_id: B256, tx: Option<B256>, now: Instant) {
        self.settle(deal_id, tx, now);
    }

    fn settle(&mut self, deal_id: B256, tx: Option<B256>, now: Instant) {
        let Some(d) = self.disputes.get_mut(&deal_id) else { return };
        if d.view.phase == Phase::Settled {
            if tx.is_some() && d.view.settled_by.is_none() {
                d.view.settled_by = tx;
            }
            return;
        }
        d.finish(Phase::Settled, now);
        if tx.is_some() {
            d.view.settled_by = tx;
        }
        let elapsed = now.saturating_duration_since(d.seen);
        d.view.settlement_ms = Some(elapsed.as_millis() as u64);
        self.metrics.dispute_to_settlement.observe(elapsed.as_secs_f64());
        let info = Box::new(d.info.clone());
        self.push(Action::PersistDispute(info, DisputeStatus::Settled));
        self.drop_buffered(&deal_id);
        info!(target: "node", deal = %deal_id, "settled");
    }

    /// A `resolve` submission finished.
    pub fn on_submitted(&mut self, deal_id: B256, result: SubmitResult, now: Instant) {
        let metrics = &self.metrics.submissions;
        let Some(d) = self.disputes.get_mut(&deal_id) else { return };
        d.submitting = false;
        match result {
            SubmitResult::Sent { tx, gas } => {
                metrics::count(metrics, "sent");
                info!(target: "submitter", deal = %deal_id, %tx, gas, "resolve sent");
                d.view.resolve_tx = Some(tx);
                d.view.resolve_gas = Some(gas);
                d.submit_at = None;
            }
            SubmitResult::AlreadyResolved => {
                metrics::count(metrics, "already_resolved");
                info!(target: "submitter", deal = %deal_id, "already resolved: nothing to send");
                d.submit_at = None;
            }
            SubmitResult::Rejected(reason) => {
                metrics::count(metrics, "rejected");
                error!(target: "submitter", deal = %deal_id, %reason, "the escrow rejects this certificate: dropped, waiting for another");
                d.submit_at = None;
                if let Some(qc) = d.certificate.take() {
                    d.rejected.insert(certificate_id(&qc));
                }
                d.view.certificate_non_signers = None;
                d.view.certified_outcome = None;
                d.view.last_error = Some(reason);
                if d.view.phase == Phase::Certified {
                    d.view.phase = if d.own.is_some() { Phase::Signed } else { Phase::Observing };
                }
            }
            SubmitResult::Failed(e) => {
                metrics::count(metrics, "error");
                d.submit_backoff = (d.submit_backoff * 2).clamp(self.cfg.retry, MAX_BACKOFF);
                warn!(target: "submitter", deal = %deal_id, error = %e, retry_in = ?d.submit_backoff, "resolve failed, will retry");
                d.submit_at = Some(now + d.submit_backoff);
            }
        }
    }

    // ------------------------------------------------------------ timers

    /// Retries, deadlines, submissions, slashings, re-gossip and eviction.
    pub fn on_tick(&mut self, now: Instant) {
        // Committee loads that failed.
        let due: Vec<u64> =
            self.committee_retry.iter().filter(|(_, t)| now >= **t).map(|(e, _)| *e).collect();
        for epoch in due {
            self.committee_retry.remove(&epoch);
            self.load_committee(epoch);
        }
        // Retries of fetching disputes.
        let due: Vec<B256> = self
            .disputes
            .iter()
            .filter(|(_, d)| {
                d.view.phase == Phase::Fetching && !d.gathering && now >= d.next_attempt
            })
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.advance(id, now);
        }
        // Deadlines, in chain time (the escrow's clock).
        if self.chain_time > 0 {
            let chain_time = self.chain_time;
            let mut expired = Vec::new();
            for d in self.disputes.values_mut() {
                let deadline = d.info.resolve_deadline.saturating_add(EXPIRY_GRACE_SECS);
                if !d.view.phase.is_final() && chain_time > deadline {
                    d.finish(Phase::Expired, now);
                    warn!(target: "node", deal = %d.info.deal_id, "resolve deadline passed unsettled");
                    expired.push(d.info.clone());
                }
            }
            for info in expired {
                self.drop_buffered(&info.deal_id);
                self.push(Action::PersistDispute(Box::new(info), DisputeStatus::Expired));
            }
        }
        self.reveal_timers(now);
        // Submissions and slashings.
        if self.cfg.submits {
            // A certificate due now takes in every signer verified since it
            // formed (they are paid, and each non-signer costs gas).
            let due: Vec<B256> = self
                .disputes
                .iter()
                .filter(|(_, d)| !d.submitting && d.submit_at.is_some_and(|t| now >= t))
                .map(|(id, _)| *id)
                .collect();
            for id in due {
                self.widen_certificate(&id);
            }
            let mut submit = Vec::new();
            for (id, d) in &mut self.disputes {
                if !d.submitting && d.submit_at.is_some_and(|t| now >= t) {
                    if let Some(qc) = &d.certificate {
                        d.submitting = true;
                        if !d.certificate_gossiped && !d.certificate_from_peer {
                            // The submitters before this one did not settle
                            // and no certificate reached this node: peers may
                            // lack one too.
                            d.certificate_gossiped = true;
                            submit
                                .push(Action::Publish(Gossip::Certificate(Box::new(qc.to_wire()))));
                        }
                        submit.push(Action::Submit {
                            deal_id: *id,
                            escrow: d.info.escrow,
                            certificate: Box::new(qc.clone()),
                        });
                    }
                }
            }
            self.actions.extend(submit);
            let mut slash = Vec::new();
            for t in self.slashes.iter_mut().filter(|t| !t.running && now >= t.at) {
                t.running = true;
                slash.push(Action::Slash(Box::new(t.request.clone())));
            }
            self.actions.extend(slash);
        }
        // Re-gossip own partials and certificates of open disputes.
        let republish = self.cfg.republish;
        let mut again = Vec::new();
        for d in self.disputes.values_mut() {
            if !d.view.phase.is_final()
                && now.saturating_duration_since(d.last_publish) >= republish
            {
                d.last_publish = now;
                let unrevealed = d.view.commit_reveal.as_ref().is_some_and(|cr| !cr.revealed);
                if unrevealed {
                    again.extend(d.own_commit.map(Gossip::Commit));
                } else {
                    again.extend(d.own.clone().map(Gossip::Verdict));
                    again.extend(d.extra.iter().cloned().map(Gossip::Verdict));
                }
                again.extend(
                    d.certificate
                        .as_ref()
                        .filter(|_| d.certificate_gossiped)
                        .map(|c| Gossip::Certificate(Box::new(c.to_wire()))),
                );
            }
        }
        self.actions.extend(again.into_iter().map(Action::Publish));
        // Buffered partials whose dispute never showed up.
        let mut stale = Vec::new();
        for list in self.buffered.values_mut() {
            list.retain_mut(|b| {
                if now < b.until {
                    return true;
                }
                stale.extend(b.origin.take());
                false
            });
        }
        self.buffered.retain(|_, l| !l.is_empty());
        self.buffered_len = self.buffered.values().map(Vec::len).sum();
        for origin in stale {
            self.early_quota.give(origin.peer());
            self.report(origin, Topic::Verdicts, Validation::Ignore);
        }
        let mut stale = Vec::new();
        for list in self.early_commits.values_mut() {
            list.retain_mut(|e| {
                if now < e.until {
                    return true;
                }
                stale.extend(e.origin.take());
                false
            });
        }
        self.early_commits.retain(|_, l| !l.is_empty());
        self.early_commits_len = self.early_commits.values().map(Vec::len).sum();
        for origin in stale {
            self.early_quota.give(origin.peer());
            self.report(origin, Topic::Commits, Validation::Ignore);
        }
        self.retry_waiting_evidence(now);
        self.evict_committees();
        // Eviction of disputes finished long enough ago.
        let retain = self.cfg.retain_settled;
        let evict: Vec<B256> = self
            .disputes
            .values()
            .filter(|d| d.finished_at.is_some_and(|t| now.saturating_duration_since(t) >= retain))
            .map(|d| d.info.deal_id)
            .collect();
        for id in evict {
            self.evict(&id);
        }
    }

    fn evict(&mut self, deal_id: &B256) {
        if self.forget(deal_id) {
            self.finished.insert(*deal_id);
            self.push(Action::Prune(*deal_id));
        }
    }

    /// Drops everything held in memory about a dispute; whether there was one.
    fn forget(&mut self, deal_id: &B256) -> bool {
        let Some(d) = self.disputes.remove(deal_id) else { return false };
        if let Some(builder) = self.builders.get_mut(&(d.info.escrow, d.info.epoch)) {
            builder.forget_deal(deal_id);
        }
        if let Some(conflict) = self.conflicts.get_mut(&d.info.escrow) {
            conflict.forget_deal(deal_id);
        }
        let keys: Vec<PartialKey> = self
            .deferred
            .iter()
            .filter(|(_, e)| e.partial.commitment.deal_id == *deal_id)
            .map(|(k, _)| *k)
            .collect();
        for key in keys {
            if let Some(e) = self.deferred.remove(&key) {
                if let Some(peer) = &e.charged {
                    self.pending_quota.give(peer);
                }
                for origin in e.origins {
                    self.report(origin, Topic::Verdicts, Validation::Ignore);
                }
            }
        }
        let commits: Vec<PartialCommit> =
            self.pending_commits.keys().filter(|c| c.deal_id == *deal_id).copied().collect();
        for c in commits {
            if let Some(p) = self.pending_commits.remove(&c) {
                if let Some(peer) = &p.charged {
                    self.pending_quota.give(peer);
                }
                for origin in p.origins {
                    self.report(origin, Topic::Commits, Validation::Ignore);
                }
            }
        }
        true
    }
}

#[cfg(test)]
mod tests;
