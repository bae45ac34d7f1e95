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

mod action;
mod aggregators;
mod bounded;
mod commit_reveal;
mod committees;
mod dispute;
mod doppelganger;
use doppelganger::Doppelganger;
mod intake;
mod partials;
mod replay;
mod restore;
mod slasher;
mod submit;

pub use action::{
    Action, AnchorRef, AnchorStatus, ConfirmSource, Confirmation, Gathered, MessageOrigin,
    SlashRequest, SlashResult, SubmitResult, Validation,
};
pub use aggregators::{aggregator_group, Aggregation, Dissemination, WIDENING_SUBMITTERS};
pub use dispute::{matches_deal, CommitReveal, DisputeStatus, DisputeView, Phase};
pub use metrics::EngineMetrics;
pub use replay::gather;
pub use resolvd_proto::wire::{Gossip, Topic};
pub use submit::{
    order_seed, submit_delay, submit_order, submit_rank, CERTIFICATE_GOSSIPERS,
    CERTIFICATE_STAGGER, LINEAR_SUBMITTERS,
};

use bounded::{BoundedBuffer, Quota, Recent};
use committees::ChainView;
use dispute::{same_dispute, Dispute};
use intake::Intake;
use partials::{certificate_id, PartialKey, PendingCommit, VerifyQueue};
use slasher::Slasher;

use alloy_primitives::{Address, B256};
use resolvd_consensus::{CertificateBuilder, ConflictDetector, PublicKey};
use resolvd_proto::{wire::PartialCommit, VerdictDomain};
use std::{
    collections::{BTreeMap, HashMap, HashSet, VecDeque},
    time::{Duration, Instant},
};
use tracing::{info, warn};

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
/// Confirmations (RPC calls) one peer's announcements may have in flight:
/// one peer cannot take all of `EngineConfig::max_confirming`.
const MAX_CONFIRMING_PER_PEER: usize = 4;
/// How long the announcements of a peer that announced a deal the chain says
/// does not exist, or had `MAX_REFUTED_PER_PEER` announcements of real deals
/// refuted, are ignored without an RPC call.
const MISLED_FOR: Duration = Duration::from_secs(600);
/// Peers remembered as misleading, or counted as refuted (each cleared when
/// full).
const MAX_MISLED_PEERS: usize = 4_096;
/// Announcements of real deals (not disputed as announced, or disputed in
/// another block) the chain refuted from one peer since its last confirmed
/// one: at this many it is ignored a while, unpenalised (its RPC may have
/// been ahead of ours, or reorged), so that variants of one announcement
/// cost a bounded number of RPC calls.
const MAX_REFUTED_PER_PEER: u32 = 4;
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
/// Entries one peer may hold in the early buffers (partials, commitments
/// and slice aggregates of disputes not confirmed here yet), across them;
/// each buffer holds `max_buffered_partials` in all.
pub const MAX_EARLY_PER_PEER: usize = 256;
/// Peers remembered as origins of one waiting message.
const MAX_ORIGINS: usize = 16;
/// Committees kept beyond the current epoch's and those of the disputes in
/// memory (loaded for evidence naming older epochs): the oldest loaded is
/// evicted first.
const MAX_SPARE_COMMITTEES: usize = 4;
/// Evidence messages (by hash) remembered as handled.
const MAX_SEEN_EVIDENCE: usize = 4_096;

/// Tunables of the engine (from `[pipeline]`).
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Delay before re-checking content or retrying a transaction.
    pub retry: Duration,
    /// Submitter slot: the submitter at rank k of a deal's order waits k
    /// slots for the first eight, then the next 1, 2, 4, … share a slot
    /// ([`submit_delay`]).
    pub submit_slot: Duration,
    /// How long every submitter's wait starts after its certificate came,
    /// unless the certificate has every member: signers whose partials (or
    /// slice aggregates) arrive meanwhile are taken into the certificate it
    /// sends, so they are paid without `includeSigners`, and each one saves
    /// `resolve` a non-signer's gas.
    pub widen_wait: Duration,
    /// Partials held for disputes not confirmed yet (all deals together);
    /// the same bound for commitments and for slice aggregates.
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
    /// How own partials and commitments reach the committee.
    pub dissemination: Dissemination,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            retry: Duration::from_secs(2),
            submit_slot: Duration::from_secs(4),
            widen_wait: Duration::from_millis(500),
            max_buffered_partials: 4_096,
            buffer_ttl: Duration::from_secs(120),
            republish: Duration::from_secs(16),
            retain_settled: Duration::from_secs(600),
            max_finished: 65_536,
            max_confirming: 32,
            detect_doppelganger: false,
            evidence_epochs: 1_024,
            submits: true,
            dissemination: Dissemination::Flood,
        }
    }
}

/// Every dispute this node knows, and the protocol state they share.
pub struct Engine<O: MessageOrigin> {
    cfg: EngineConfig,
    identity: Identity,
    metrics: EngineMetrics,
    /// The chain as this node knows it: head, epochs and their committees.
    chain: ChainView,
    /// Per (escrow, epoch): a certificate verifies under one domain.
    builders: BTreeMap<(Address, u64), CertificateBuilder>,
    /// The disputes in memory, by deal id (ordered, so that one tick's
    /// actions for several disputes come out in the same order every run).
    disputes: BTreeMap<B256, Dispute>,
    /// Deals settled or expired and evicted from memory (the newest `max_finished`).
    finished: Recent,
    /// Announcements being confirmed and the early buffers.
    intake: Intake<O>,
    /// Partials and commitments waiting for their verification batch.
    queue: VerifyQueue<O>,
    /// Conflict detection, evidence and slash tasks.
    slasher: Slasher<O>,
    /// Doppelgänger detection and the hold on signing at start.
    doppelganger: Doppelganger<O>,
    actions: VecDeque<Action<O>>,
}

/// Which escrows this node serves, and as whom.
struct Identity {
    chain_id: u64,
    /// Every escrow served, by address (each signs under its own domain).
    domains: BTreeMap<Address, VerdictDomain>,
    me: Option<PublicKey>,
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
            slasher: Slasher::new(&domain),
            identity: Identity {
                chain_id: domain.chain_id,
                domains: BTreeMap::from([(domain.verifying_contract, domain)]),
                me,
            },
            cfg,
            metrics,
            chain: ChainView::default(),
            builders: BTreeMap::new(),
            disputes: BTreeMap::new(),
            finished,
            intake: Intake::default(),
            queue: VerifyQueue::default(),
            doppelganger: Doppelganger::default(),
            actions: VecDeque::new(),
        }
    }

    /// Also serves the escrow of `domain` (same chain; its registry checked
    /// by the caller). Call before the first committee is added.
    pub fn serve(&mut self, domain: VerdictDomain) {
        debug_assert_eq!(domain.chain_id, self.identity.chain_id);
        debug_assert!(self.chain.committees.is_empty(), "serve escrows before loading committees");
        self.slasher
            .conflicts
            .insert(domain.verifying_contract, ConflictDetector::new(domain.clone()));
        self.identity.domains.insert(domain.verifying_contract, domain);
    }

    /// The commit-reveal window epoch `epoch` pins (the registry's
    /// `commitRevealMsAt(epoch)`, `None` for 0: off). Give it with the
    /// epoch's committee (before [`Self::on_committee`] or
    /// [`Self::add_committee`]): every dispute of that epoch uses it, the
    /// ones already started included, so every node runs a dispute with
    /// the same setting whatever the current epoch was when it started it.
    pub fn set_commit_reveal(&mut self, epoch: u64, window: Option<Duration>) {
        if self.chain.commit_reveal.insert(epoch, window) != Some(window) {
            info!(target: "node", epoch, ?window, "commit-reveal setting");
        }
        for d in self.disputes.values_mut() {
            if d.info.epoch == epoch && !d.reveal.known {
                d.set_reveal(window);
            }
        }
    }

    /// Whether the node watches for another process with its key.
    pub fn detects_doppelganger(&self) -> bool {
        self.cfg.detect_doppelganger
    }

    /// A partial of this node's key it did not make, once seen (deal,
    /// epoch, signer index): the node must stop signing.
    pub fn doppelganger(&self) -> Option<(B256, u64, u32)> {
        self.doppelganger.seen
    }

    /// The next action to perform.
    pub fn poll_action(&mut self) -> Option<Action<O>> {
        self.actions.pop_front()
    }

    /// The earliest timer of [`Self::on_tick`] later than `after`, among
    /// those a dispute's latency depends on: content fetch retries,
    /// commit-reveal's reveal and fallbacks, escalation and slice
    /// aggregates, the certificate stagger, submitter slots, the
    /// doppelgänger hold, committee retries and slashings. The rest
    /// (republishing, buffer lifetimes, expiry in chain time, waiting
    /// evidence, eviction) are seconds apart: a caller that also ticks every
    /// few hundred milliseconds runs them late by at most that.
    ///
    /// A caller passes the time of its last tick: a timer due by then and
    /// still set (its job found nothing to do) does not count again.
    pub fn next_timer(&self, after: Instant) -> Option<Instant> {
        let disputes = self.disputes.values().filter(|d| !d.phase.is_final()).flat_map(|d| {
            let fetch = (d.phase == Phase::Fetching && !d.gathering).then_some(d.next_attempt);
            let reveal = d.reveal.reveal_window.into_iter().flat_map(|w| {
                let own = d.reveal.own_commit_at.filter(|_| !d.reveal.revealed).map(|t| t + w);
                let phase = d.reveal.reveal_phase_at;
                let fallback = phase.map(|t| t + w * REVEAL_FALLBACK_WINDOWS);
                let late = phase.map(|t| t + w * REVEAL_LATE_FALLBACK_WINDOWS);
                own.into_iter().chain(fallback).chain(late)
            });
            let submission = d.submission.gossip_at.into_iter().chain(d.submission.submit_at);
            fetch.into_iter().chain(reveal).chain(submission).chain(d.aggregators.timers())
        });
        let slashes = self.slasher.slashes.iter().filter(|t| !t.running).map(|t| t.at);
        disputes
            .chain(self.doppelganger.hold_until)
            .chain(self.chain.committee_retry.values().copied())
            .chain(slashes)
            .filter(|t| *t > after)
            .min()
    }

    /// When [`Self::on_batch`] is due.
    pub fn batch_due(&self) -> Option<Instant> {
        self.queue.process_at
    }

    /// Partials queued for the next [`Self::on_batch`] (each distinct
    /// message once, the own partial included).
    pub fn queued_partials(&self) -> usize {
        self.queue.deferred.len()
    }

    /// Newest epoch known to exist.
    pub fn current_epoch(&self) -> u64 {
        self.chain.current_epoch
    }

    /// The newest block timestamp seen (0 before the first head).
    pub fn chain_time(&self) -> u64 {
        self.chain.chain_time
    }

    /// Latest head seen.
    pub fn head(&self) -> u64 {
        self.chain.head
    }

    /// This node's registry index in `epoch`, if it is a member.
    pub fn my_index(&self, epoch: u64) -> Option<u32> {
        self.chain.committees.get(&epoch)?.index_of(self.identity.me.as_ref()?)
    }

    /// The committee of `epoch`, if loaded.
    pub fn committee(&self, epoch: u64) -> Option<&resolvd_consensus::Committee> {
        self.chain.committees.get(&epoch)
    }

    /// Whether `key` is a member of a loaded committee.
    pub fn is_member(&self, key: &resolvd_consensus::PublicKey) -> bool {
        self.chain.committees.values().any(|c| c.index_of(key).is_some())
    }

    /// Epochs whose committee is loaded.
    pub fn loaded_epochs(&self) -> impl Iterator<Item = u64> + '_ {
        self.chain.committees.keys().copied()
    }

    /// The views of the disputes in memory.
    pub fn views(&self) -> impl Iterator<Item = DisputeView> + '_ {
        self.disputes.values().map(Dispute::view)
    }

    /// One dispute's view.
    pub fn view(&self, deal_id: &B256) -> Option<DisputeView> {
        self.disputes.get(deal_id).map(Dispute::view)
    }

    /// Open disputes in memory (not settled or expired), without building
    /// their views.
    pub fn in_flight(&self) -> usize {
        self.disputes.values().filter(|d| !d.phase.is_final()).count()
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
        self.intake.buffered.len()
    }

    /// Slash tasks not yet done.
    pub fn pending_slashes(&self) -> usize {
        self.slasher.slashes.len()
    }

    fn push(&mut self, action: Action<O>) {
        if matches!(action, Action::Sign { .. }) && self.doppelganger.hold_until.is_some() {
            self.doppelganger.held.push(action);
            return;
        }
        self.actions.push_back(action);
    }

    fn report(&mut self, origin: O, topic: Topic, acceptance: Validation) {
        self.push(Action::Report { origin, topic, acceptance });
    }

    /// Reports a message ignored, if it came from a peer.
    fn ignore(&mut self, origin: Option<O>, topic: Topic) {
        if let Some(origin) = origin {
            self.report(origin, topic, Validation::Ignore);
        }
    }

    /// A new head and its timestamp (chain time).
    pub fn on_head(&mut self, number: u64, timestamp: u64) {
        self.chain.head = self.chain.head.max(number);
        self.chain.chain_time = self.chain.chain_time.max(timestamp);
    }

    /// Retries, deadlines, submissions, slashings, re-gossip and eviction:
    /// one call per job, in this order (the Rig's `on_tick_*` tests pin the
    /// orderings that show):
    ///
    /// 1. committee loads that failed, then fetch retries due;
    /// 2. expiry in chain time, before submission (an expired deal's
    ///    certificate is never sent) and before eviction;
    /// 3. commit-reveal timers (the reveal, the fallbacks), before submission
    ///    (a certificate a fallback completes is sent in the same tick) and
    ///    before republishing (the partial goes out, not the commitment again),
    ///    then escalation to the next aggregators, the slice aggregates due
    ///    and the certificates whose stagger ran out;
    /// 4. submissions (each certificate widened first) and slashings, if this
    ///    node sends transactions;
    /// 5. republishing of own partials, commitments and certificates;
    /// 6. early buffers past `buffer_ttl` (partials, then commitments);
    /// 7. evidence waiting for committees, committee eviction, then eviction
    ///    of disputes finished `retain_settled` ago.
    pub fn on_tick(&mut self, now: Instant) {
        self.release_held_signatures(now);
        self.retry_committees(now);
        self.retry_fetches(now);
        self.expire(now);
        self.reveal_timers(now);
        self.escalate(now);
        self.collect_due(now);
        self.gossip_staggered(now);
        if self.cfg.submits {
            self.submit_due(now);
            self.slash_due(now);
        }
        self.republish(now);
        self.expire_early(now);
        self.retry_waiting_evidence(now);
        self.evict_committees();
        self.evict_finished(now);
    }

    /// Expires the open disputes past their resolve deadline (chain time,
    /// the escrow's clock, plus a grace).
    fn expire(&mut self, now: Instant) {
        if self.chain.chain_time == 0 {
            return;
        }
        let chain_time = self.chain.chain_time;
        let mut expired = Vec::new();
        for d in self.disputes.values_mut() {
            let deadline = d.info.resolve_deadline.saturating_add(EXPIRY_GRACE_SECS);
            if !d.phase.is_final() && chain_time > deadline {
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

    /// Evicts the disputes finished at least `retain_settled` ago.
    fn evict_finished(&mut self, now: Instant) {
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
        if let Some(conflict) = self.slasher.conflicts.get_mut(&d.info.escrow) {
            conflict.forget_deal(deal_id);
        }
        let keys: Vec<PartialKey> = self
            .queue
            .deferred
            .iter()
            .filter(|(_, e)| e.partial.commitment.deal_id == *deal_id)
            .map(|(k, _)| *k)
            .collect();
        for key in keys {
            if let Some(e) = self.queue.deferred.remove(&key) {
                if let Some(peer) = &e.charged {
                    self.queue.pending_quota.give(peer);
                }
                for origin in e.origins {
                    self.report(origin, Topic::Verdicts, Validation::Ignore);
                }
            }
        }
        let aggregates: Vec<B256> = self
            .queue
            .aggregates
            .iter()
            .filter(|(_, (deal, _, _))| deal == deal_id)
            .map(|(k, _)| *k)
            .collect();
        for key in aggregates {
            if let Some((_, origin, charged)) = self.queue.aggregates.remove(&key) {
                if let Some(peer) = &charged {
                    self.queue.pending_quota.give(peer);
                }
                self.report(origin, Topic::Aggregates, Validation::Ignore);
            }
        }
        let commits: Vec<PartialCommit> =
            self.queue.pending_commits.keys().filter(|c| c.deal_id == *deal_id).copied().collect();
        for c in commits {
            if let Some(p) = self.queue.pending_commits.remove(&c) {
                if let Some(peer) = &p.charged {
                    self.queue.pending_quota.give(peer);
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
