//! Intake: gossip dispatch, announcements and their confirmation, disputes
//! seen on chain, reorgs, and the early buffers (partials and commitments of
//! disputes not started here yet).

use super::*;
use alloy_primitives::B256;
use resolvd_consensus::Attestation;
use resolvd_proto::wire::{DisputeAnnouncement, PartialCommit, SignedVerdict, SignerAggregate};
use std::time::{Duration, Instant};
use tracing::{debug, info, warn};

/// Announcements being confirmed, and the early buffers.
pub(crate) struct Intake<O: MessageOrigin> {
    /// Partials for disputes not confirmed here yet (or whose committee is loading).
    pub(crate) buffered: BoundedBuffer<Buffered<O>>,
    /// Commitments for disputes not started here yet (bounded like `buffered`).
    pub(crate) early_commits: BoundedBuffer<EarlyCommit<O>>,
    /// Slice aggregates for disputes not started here yet, or whose
    /// committee is loading (bounded like `buffered`): a collector that saw
    /// the dispute a poll earlier than this aggregator sends its slice
    /// before this node could take it.
    pub(crate) early_aggregates: BoundedBuffer<EarlyAggregate<O>>,
    /// Early-buffer entries (partials, commitments, aggregates) held per peer.
    pub(crate) early_quota: Quota<O::Peer>,
    /// Gossip announcements waiting for their confirmation, by
    /// [`announcement_key`]: a copy that differs from the first one (another
    /// block, say) gets its own answer, not the first one's.
    pub(crate) confirming: HashMap<B256, Vec<O>>,
    /// Chain-seen disputes being confirmed.
    pub(crate) chain_confirming: HashSet<B256>,
    /// Announcements of real deals the chain refuted, by
    /// [`announcement_key`]: a lie about a real dispute does not stop the
    /// truth about it.
    pub(crate) refuted: HashSet<B256>,
    /// Deals the chain says do not exist: any announcement of them is made up.
    pub(crate) made_up: HashSet<B256>,
    /// Confirmations in flight per peer whose announcement started them.
    pub(crate) confirm_quota: Quota<O::Peer>,
    /// Peers that announced a deal the chain says does not exist, or whose
    /// announcements of real deals it refuted `MAX_REFUTED_PER_PEER` times,
    /// and when: an honest peer forwards an announcement only after its own
    /// RPC confirmed it, so their announcements cost no RPC call for a while.
    pub(crate) misled_by: HashMap<O::Peer, Instant>,
    /// Announcements of real deals refuted per peer since its last one the
    /// chain confirmed.
    pub(crate) refuted_from: HashMap<O::Peer, u32>,
}

impl<O: MessageOrigin> Default for Intake<O> {
    fn default() -> Self {
        Self {
            buffered: BoundedBuffer::default(),
            early_commits: BoundedBuffer::default(),
            early_aggregates: BoundedBuffer::default(),
            early_quota: Quota::default(),
            confirming: HashMap::new(),
            chain_confirming: HashSet::new(),
            refuted: HashSet::new(),
            made_up: HashSet::new(),
            confirm_quota: Quota::default(),
            misled_by: HashMap::new(),
            refuted_from: HashMap::new(),
        }
    }
}

pub(crate) struct Buffered<O> {
    pub(crate) partial: SignedVerdict,
    pub(crate) origin: Option<O>,
    pub(crate) arrived: Instant,
    pub(crate) until: Instant,
}

/// A commitment held before its dispute is confirmed here.
pub(crate) struct EarlyCommit<O> {
    pub(crate) commit: PartialCommit,
    pub(crate) origin: Option<O>,
    pub(crate) arrived: Instant,
    pub(crate) until: Instant,
}

/// A slice aggregate held before its dispute is confirmed here.
pub(crate) struct EarlyAggregate<O> {
    pub(crate) aggregate: SignerAggregate,
    pub(crate) origin: O,
    pub(crate) until: Instant,
}

/// An announcement's identity: the hash of its canonical encoding (honest
/// copies, all taken from the same log, are byte-identical).
pub(crate) fn announcement_key(a: &DisputeAnnouncement) -> B256 {
    use resolvd_proto::wire::WireMessage;
    alloy_primitives::keccak256(a.encode_wire())
}

impl<O: MessageOrigin> Engine<O> {
    /// A decoded gossip message.
    pub fn on_gossip(&mut self, origin: O, gossip: Gossip, now: Instant) {
        match gossip {
            Gossip::Dispute(a) => self.on_announcement(a, origin, now),
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
            Gossip::Aggregate(a) => self.on_aggregate(*a, origin, now),
            // Member records are the host's (where members are reached).
            Gossip::Member(_) => self.report(origin, Topic::Members, Validation::Ignore),
        }
    }

    pub(crate) fn on_announcement(&mut self, a: DisputeAnnouncement, origin: O, now: Instant) {
        if a.chain_id != self.identity.chain_id || !self.identity.domains.contains_key(&a.escrow) {
            self.report(origin, Topic::Disputes, Validation::Ignore);
            return;
        }
        if let Some(d) = self.disputes.get(&a.deal_id) {
            // A later deadline may be a request made again: the watcher
            // confirms that from the chain's log.
            let acceptance = if same_dispute(&d.info, &a)
                || a.resolve_deadline > d.info.resolve_deadline
            {
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
        if self.intake.made_up.contains(&a.deal_id) {
            self.report(origin, Topic::Disputes, Validation::Reject);
            return;
        }
        let key = announcement_key(&a);
        if self.intake.refuted.contains(&key) {
            self.report(origin, Topic::Disputes, Validation::Ignore);
            return;
        }
        if let Some(waiting) = self.intake.confirming.get_mut(&key) {
            if waiting.len() < MAX_WAITING_ORIGINS {
                waiting.push(origin);
            } else {
                self.report(origin, Topic::Disputes, Validation::Ignore);
            }
            return;
        }
        // The watcher finds every real dispute anyway: gossip only makes it
        // faster, so an announcement over a bound is not worth an RPC call.
        if let Some(since) = self.intake.misled_by.get(origin.peer()) {
            if now.saturating_duration_since(*since) < MISLED_FOR {
                metrics::count(&self.metrics.gossip_bounded, "misled_by");
                self.report(origin, Topic::Disputes, Validation::Ignore);
                return;
            }
            self.intake.misled_by.remove(origin.peer());
        }
        if self.intake.confirming.len() >= self.cfg.max_confirming {
            self.metrics.dropped_announcements.inc();
            self.report(origin, Topic::Disputes, Validation::Ignore);
            return;
        }
        if !self.intake.confirm_quota.take(origin.peer(), MAX_CONFIRMING_PER_PEER) {
            metrics::count(&self.metrics.gossip_bounded, "confirm_quota");
            self.report(origin, Topic::Disputes, Validation::Ignore);
            return;
        }
        self.intake.confirming.insert(key, vec![origin]);
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
        let key = announcement_key(&a);
        if source == ConfirmSource::Chain {
            self.intake.chain_confirming.remove(&deal_id);
        }
        // Gossip copies waiting for a verdict: answered by a chain
        // confirmation of the same announcement too, or by their own.
        let waiting = if source != ConfirmSource::Gossip && result != Ok(Confirmation::Disputed) {
            Vec::new()
        } else {
            self.intake.confirming.remove(&key).unwrap_or_default()
        };
        if let Some(first) = waiting.first() {
            // The first origin started the confirmation.
            self.intake.confirm_quota.give(first.peer());
        }
        let acceptance = match result {
            Ok(Confirmation::Disputed) => {
                self.intake.refuted.remove(&key);
                self.intake.made_up.remove(&deal_id);
                for origin in &waiting {
                    self.intake.refuted_from.remove(origin.peer());
                }
                if !self.complete_order(&a) {
                    self.start_dispute(a, now);
                }
                Validation::Accept
            }
            Ok(_) if source == ConfirmSource::Reorg => {
                info!(target: "chain", deal = %deal_id, "a reorged-out dispute is not disputed now: dropped");
                Validation::Ignore
            }
            Ok(_) if source == ConfirmSource::Chain => {
                self.settled_while_away(a, now);
                Validation::Accept
            }
            Ok(c) => self.refuted(&a, c, &waiting, now),
            Err(e) if source == ConfirmSource::Gossip => {
                // Not retried: the node's own watcher brings a real dispute.
                info!(target: "chain", deal = %deal_id, error = %e, "cannot check an announced dispute now: ignored");
                Validation::Ignore
            }
            Err(e) => {
                warn!(target: "chain", deal = %deal_id, error = %e, "cannot check the dispute; retrying");
                // Not dropped: a chain event is re-checked until the RPC answers.
                if source == ConfirmSource::Chain {
                    self.intake.chain_confirming.insert(deal_id);
                }
                self.push(Action::Confirm {
                    announcement: Box::new(a),
                    source,
                    delay: self.cfg.retry,
                });
                Validation::Ignore
            }
        };
        for origin in waiting {
            self.report(origin, Topic::Disputes, acceptance);
        }
    }

    /// Seen disputed in a confirmed log but no longer disputed: settled
    /// while this node was away. Recorded, never worked on.
    fn settled_while_away(&mut self, a: DisputeAnnouncement, now: Instant) {
        let deal_id = a.deal_id;
        if let Some(d) = self.disputes.get(&deal_id) {
            if !d.phase.is_final() {
                self.settle(deal_id, None, now);
            }
            return;
        }
        info!(target: "chain", deal = %deal_id, "dispute already settled: nothing to do");
        self.push(Action::PersistDispute(Box::new(a.clone()), DisputeStatus::Settled));
        // Shown (settled) until evicted like any finished dispute.
        let mut d = Dispute::new(a, now);
        d.finish(Phase::Settled, now);
        self.disputes.insert(deal_id, d);
        self.drop_buffered(&deal_id);
    }

    /// A restored dispute without its order entropy, now that the chain
    /// names it (and the block of its challenge): taken, stored, and the
    /// order recomputed from it when next needed. `false` if `a` is not that.
    fn complete_order(&mut self, a: &DisputeAnnouncement) -> bool {
        let Some(d) = self.disputes.get_mut(&a.deal_id) else { return false };
        let same = d.info.epoch == a.epoch && d.info.resolve_deadline == a.resolve_deadline;
        if !same || !d.info.order_entropy.is_zero() || a.order_entropy.is_zero() {
            return false;
        }
        info!(target: "chain", deal = %a.deal_id, block = a.block_number, "restored dispute: its order entropy read from the chain");
        (d.info.block_number, d.info.block_hash) = (a.block_number, a.block_hash);
        d.info.order_entropy = a.order_entropy;
        d.aggregators.forget_order();
        let info = d.info.clone();
        self.push(Action::PersistDispute(Box::new(info), DisputeStatus::Active));
        true
    }

    /// The node's own RPC does not confirm an announcement: remembered (by
    /// its content, or by its deal if that does not exist: a lie about a real
    /// dispute does not silence the truth about it). The peers that named a
    /// deal that does not exist are rejected and ignored a while; those whose
    /// announcements of real deals were refuted `MAX_REFUTED_PER_PEER` times
    /// are ignored a while, unpenalised.
    fn refuted(
        &mut self,
        a: &DisputeAnnouncement,
        c: Confirmation,
        waiting: &[O],
        now: Instant,
    ) -> Validation {
        let deal_id = a.deal_id;
        debug!(target: "chain", deal = %deal_id, ?c, "announcement not confirmed by own RPC");
        match c {
            Confirmation::NoSuchDeal => {
                if self.intake.made_up.len() >= 16_384 {
                    self.intake.made_up.clear();
                }
                self.intake.made_up.insert(deal_id);
                self.drop_buffered(&deal_id);
            }
            _ => {
                if self.intake.refuted.len() >= 16_384 {
                    self.intake.refuted.clear();
                }
                self.intake.refuted.insert(announcement_key(a));
            }
        }
        if c == Confirmation::Misplaced {
            info!(target: "chain", deal = %deal_id, block = a.block_number, tx = %a.tx_hash, "announcement names a block or transaction the dispute is not in");
        }
        if self.intake.misled_by.len() >= MAX_MISLED_PEERS {
            self.intake.misled_by.clear();
        }
        if c == Confirmation::NoSuchDeal {
            for origin in waiting {
                self.intake.misled_by.insert(origin.peer().clone(), now);
            }
            return Validation::Reject;
        }
        if self.intake.refuted_from.len() >= MAX_MISLED_PEERS {
            self.intake.refuted_from.clear();
        }
        for origin in waiting {
            let n = self.intake.refuted_from.entry(origin.peer().clone()).or_default();
            *n += 1;
            if *n >= MAX_REFUTED_PER_PEER {
                self.intake.refuted_from.remove(origin.peer());
                self.intake.misled_by.insert(origin.peer().clone(), now);
            }
        }
        Validation::Ignore
    }

    /// A new dispute, with the commit-reveal window its epoch pins if that
    /// is known (else it is set with the epoch's committee).
    pub(crate) fn new_dispute(&self, info: DisputeAnnouncement, now: Instant) -> Dispute {
        let mut d = Dispute::new(info, now);
        if let Some(&window) = self.chain.commit_reveal.get(&d.info.epoch) {
            d.set_reveal(window);
        }
        d
    }

    pub(crate) fn start_dispute(&mut self, info: DisputeAnnouncement, now: Instant) {
        if self.disputes.contains_key(&info.deal_id) || self.finished.contains(&info.deal_id) {
            return;
        }
        let deal_id = info.deal_id;
        info!(target: "node", deal = %deal_id, epoch = info.epoch, deadline = info.resolve_deadline, "dispute confirmed");
        self.push(Action::PersistDispute(Box::new(info.clone()), DisputeStatus::Active));
        // The epoch comes from the chain, at a confirmed block: it exists.
        if info.epoch > self.chain.current_epoch {
            self.chain.current_epoch = info.epoch;
        }
        self.load_committee(info.epoch);
        self.push(Action::Publish(Gossip::Dispute(info.clone())));
        let d = self.new_dispute(info, now);
        self.disputes.insert(deal_id, d);
        self.release_early_commits(&deal_id, now);
        self.release_buffered(&deal_id, now);
        self.release_early_aggregates(&deal_id, now);
        self.advance(deal_id, now);
    }

    /// Holds a commitment until its dispute starts or its committee is
    /// loaded, within the early buffers' total and per-peer bounds. `None`:
    /// held (reported when released or dropped).
    pub(crate) fn hold_early_commit(
        &mut self,
        c: PartialCommit,
        origin: Option<O>,
        arrived: Instant,
        now: Instant,
    ) -> Option<Validation> {
        if self.intake.early_commits.len() >= self.cfg.max_buffered_partials {
            self.metrics.dropped_partials.inc();
            return Some(Validation::Ignore);
        }
        if let Some(o) = &origin {
            if !self.intake.early_quota.take(o.peer(), MAX_EARLY_PER_PEER) {
                metrics::count(&self.metrics.gossip_bounded, "early_quota");
                return Some(Validation::Ignore);
            }
        }
        let until = now + self.cfg.buffer_ttl;
        self.intake
            .early_commits
            .push(c.deal_id, EarlyCommit { commit: c, origin, arrived, until });
        None
    }

    pub(crate) fn release_early_commits(&mut self, deal_id: &B256, now: Instant) {
        for e in self.intake.early_commits.take(deal_id) {
            if let Some(o) = &e.origin {
                self.intake.early_quota.give(o.peer());
            }
            let acceptance = self.on_commit(e.commit, e.origin.clone(), e.arrived, now);
            if let (Some(origin), Some(acceptance)) = (e.origin, acceptance) {
                self.report(origin, Topic::Commits, acceptance);
            }
        }
    }

    /// Holds an aggregate until its dispute starts or its committee is
    /// loaded, within the early buffers' total and per-peer bounds, if it
    /// could be a slice's (at most a slice's signers: an entry stays about
    /// as small as a partial). `None`: held (reported when released or
    /// dropped).
    pub(crate) fn hold_early_aggregate(
        &mut self,
        aggregate: SignerAggregate,
        origin: O,
        now: Instant,
    ) -> Option<Validation> {
        let slice = self.aggregation().map_or(0, |a| a.slice);
        if aggregate.signer_indices.len() > slice {
            debug!(target: "p2p", peer = %origin.peer(), signers = aggregate.signer_indices.len(), "an early aggregate larger than a slice: not held");
            return Some(Validation::Ignore);
        }
        if Attestation::from_wire(&aggregate).is_err() {
            warn!(target: "p2p", peer = %origin.peer(), "bad aggregate encoding");
            return Some(Validation::Reject);
        }
        if self.intake.early_aggregates.len() >= self.cfg.max_buffered_partials {
            metrics::count(&self.metrics.gossip_bounded, "early_aggregates");
            return Some(Validation::Ignore);
        }
        if !self.intake.early_quota.take(origin.peer(), MAX_EARLY_PER_PEER) {
            metrics::count(&self.metrics.gossip_bounded, "early_quota");
            return Some(Validation::Ignore);
        }
        let (deal_id, until) = (aggregate.commitment.deal_id, now + self.cfg.buffer_ttl);
        self.intake.early_aggregates.push(deal_id, EarlyAggregate { aggregate, origin, until });
        None
    }

    /// The aggregates held for `deal_id`, taken as if they arrived now.
    pub(crate) fn release_early_aggregates(&mut self, deal_id: &B256, now: Instant) {
        for e in self.intake.early_aggregates.take(deal_id) {
            self.intake.early_quota.give(e.origin.peer());
            self.on_aggregate(e.aggregate, e.origin, now);
        }
    }

    pub(crate) fn drop_buffered(&mut self, deal_id: &B256) {
        for b in self.intake.buffered.take(deal_id) {
            if let Some(origin) = b.origin {
                self.intake.early_quota.give(origin.peer());
                self.report(origin, Topic::Verdicts, Validation::Ignore);
            }
        }
        for e in self.intake.early_commits.take(deal_id) {
            if let Some(origin) = e.origin {
                self.intake.early_quota.give(origin.peer());
                self.report(origin, Topic::Commits, Validation::Ignore);
            }
        }
        for e in self.intake.early_aggregates.take(deal_id) {
            self.intake.early_quota.give(e.origin.peer());
            self.report(e.origin, Topic::Aggregates, Validation::Ignore);
        }
    }

    pub(crate) fn release_buffered(&mut self, deal_id: &B256, now: Instant) {
        for b in self.intake.buffered.take(deal_id) {
            if let Some(o) = &b.origin {
                self.intake.early_quota.give(o.peer());
            }
            self.queue_partial(b.partial, b.origin, b.arrived, now);
        }
    }

    pub(crate) fn buffer(
        &mut self,
        p: SignedVerdict,
        origin: Option<O>,
        arrived: Instant,
        now: Instant,
    ) {
        if self.intake.buffered.len() >= self.cfg.max_buffered_partials {
            self.metrics.dropped_partials.inc();
            if let Some(origin) = origin {
                self.report(origin, Topic::Verdicts, Validation::Ignore);
            }
            return;
        }
        if let Some(o) = &origin {
            if !self.intake.early_quota.take(o.peer(), MAX_EARLY_PER_PEER) {
                metrics::count(&self.metrics.gossip_bounded, "early_quota");
                if let Some(origin) = origin {
                    self.report(origin, Topic::Verdicts, Validation::Ignore);
                }
                return;
            }
        }
        self.intake.buffered.push(
            p.commitment.deal_id,
            Buffered { partial: p, origin, arrived, until: now + self.cfg.buffer_ttl },
        );
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
        self.reorged_out(&affected);
        for id in settled {
            let Some(d) = self.disputes.get_mut(id) else { continue };
            if d.phase != Phase::Settled {
                continue;
            }
            warn!(target: "chain", deal = %id, "Settled log reorged out: the dispute is open again");
            d.finished_at = None;
            d.record.settled_by = None;
            d.phase = if d.submission.certificate.is_some() {
                d.submission.submit_at = Some(now);
                d.submission.submitting = false;
                Phase::Certified
            } else if d.own.is_some() {
                Phase::Signed
            } else {
                Phase::Observing
            };
        }
    }

    /// The watcher handled blocks `from..=to` of the canonical chain, whose
    /// `Disputed` logs are `logs` (deal id, block hash). A dispute this node
    /// took from gossip before its watcher got there, announced in one of
    /// those blocks but not among them, was reorged out (or mined again
    /// elsewhere) in between; the watcher's own reorg walk cannot see that,
    /// since it never handled the block. It is dropped and confirmed again as
    /// [`Self::on_reorg`] does, unless this node signed for it already.
    pub fn on_logs_scanned(&mut self, from: u64, to: u64, logs: &[(B256, B256)]) {
        let gone: Vec<B256> = self
            .disputes
            .values()
            .filter(|d| {
                (from..=to).contains(&d.info.block_number)
                    && !d.info.block_hash.is_zero()
                    && !logs.contains(&(d.info.deal_id, d.info.block_hash))
            })
            .map(|d| d.info.deal_id)
            .collect();
        if !gone.is_empty() {
            warn!(target: "chain", from, to, disputes = gone.len(), "announced Disputed logs are not in the blocks the watcher handled: reorged out");
            self.reorged_out(&gone);
        }
    }

    /// Disputes whose `Disputed` log left the canonical chain: one not signed
    /// yet is dropped with its records and confirmed again on chain (handled
    /// afresh, once, if the challenge is still or again there); one signed or
    /// finished is kept (slashing protection holds whatever happens).
    fn reorged_out(&mut self, ids: &[B256]) {
        for id in ids {
            let Some(d) = self.disputes.get(id) else { continue };
            if d.own.is_some() || d.phase.is_final() {
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
    }

    /// A `Disputed` log at a confirmed block.
    ///
    /// A second log for a known id opens it afresh when its deadline is later:
    /// an Attestor's question requested again after a timeout (the same
    /// request id, maybe another epoch), or a challenge mined again after a
    /// reorg. The replay is deterministic, so a commitment signed for the
    /// first one is signed again unchanged, which slashing protection allows.
    pub fn on_disputed_log(&mut self, a: DisputeAnnouncement, now: Instant) {
        if let Some(d) = self.disputes.get(&a.deal_id) {
            if a.resolve_deadline <= d.info.resolve_deadline {
                return;
            }
            info!(target: "chain", deal = %a.deal_id, deadline = a.resolve_deadline, epoch = a.epoch, "disputed again with a later deadline: handled afresh");
            if a.epoch != d.info.epoch {
                // Another committee: nothing of the first round counts.
                self.forget(&a.deal_id);
                self.push(Action::Prune(a.deal_id));
            } else if self.reopen(&a, now) {
                return;
            } else {
                // Started afresh below, with the partials verified so far.
                self.disputes.remove(&a.deal_id);
            }
        } else if self.finished.remove(&a.deal_id) {
            info!(target: "chain", deal = %a.deal_id, "a finished dispute is disputed again: checking it");
        }
        // A gossip confirmation in flight does not stop this one: it may have
        // been asked at a block before the dispute.
        if !self.intake.chain_confirming.insert(a.deal_id) {
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

    /// Re-opens a dispute disputed again under the same epoch, keeping what
    /// this node verified: the committee's partials are the same bytes as in
    /// the first round, and gossip does not carry a message twice. With a
    /// certificate (held, or buildable from the partials verified) it is
    /// submitted again; with only the own partial it waits for the others.
    /// `false` (nothing re-opened) when this node never signed and holds no
    /// certificate: the dispute is then started afresh (its builder keeps
    /// the partials verified).
    fn reopen(&mut self, a: &DisputeAnnouncement, now: Instant) -> bool {
        let Some(d) = self.disputes.get_mut(&a.deal_id) else { return false };
        let held = d.submission.certificate.take();
        let best = held.or_else(|| {
            let builder = self.builders.get(&(a.escrow, a.epoch))?;
            d.record.signers.keys().find_map(|digest| builder.best_certificate(digest))
        });
        if best.is_none() && d.own.is_none() {
            return false;
        }
        d.info = a.clone();
        // Its order follows the block of the new log.
        d.aggregators.forget_order();
        d.finished_at = None;
        d.record.resolve_deadline = a.resolve_deadline;
        d.record.settled_by = None;
        d.record.settlement_ms = None;
        d.record.resolve_tx = None;
        d.record.resolve_gas = None;
        d.record.last_error = None;
        d.submission = crate::dispute::Submission::default();
        d.phase = if d.own.is_some() { Phase::Signed } else { Phase::Observing };
        self.push(Action::PersistDispute(Box::new(a.clone()), DisputeStatus::Active));
        if let Some(qc) = best {
            self.on_certificate(qc, true, now);
        }
        true
    }

    /// Drops the early-buffer entries (partials, then commitments) whose
    /// dispute did not show up within `buffer_ttl`.
    pub(crate) fn expire_early(&mut self, now: Instant) {
        for b in self.intake.buffered.drain_expired(|b| now >= b.until) {
            if let Some(origin) = b.origin {
                self.intake.early_quota.give(origin.peer());
                self.report(origin, Topic::Verdicts, Validation::Ignore);
            }
        }
        for e in self.intake.early_commits.drain_expired(|e| now >= e.until) {
            if let Some(origin) = e.origin {
                self.intake.early_quota.give(origin.peer());
                self.report(origin, Topic::Commits, Validation::Ignore);
            }
        }
        for e in self.intake.early_aggregates.drain_expired(|e| now >= e.until) {
            self.intake.early_quota.give(e.origin.peer());
            self.report(e.origin, Topic::Aggregates, Validation::Ignore);
        }
    }
}
