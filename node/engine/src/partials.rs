//! Partials and certificates: the verification queue and its batches,
//! certificates built or gossiped, widening before submission, and the
//! re-gossip of own partials, commitments and certificates.

use super::*;
use alloy_primitives::{keccak256, B256};
use resolvd_consensus::{Attestation, BuilderEvent, Queued, QuorumCertificate};
use resolvd_proto::wire::{SignedVerdict, WireMessage};
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// Partials and commitments waiting for their verification batch.
pub(crate) struct VerifyQueue<O: MessageOrigin> {
    /// Queued partials waiting for the batch (by message), with every origin
    /// that sent them.
    pub(crate) deferred: HashMap<PartialKey, Deferred<O>>,
    /// Commitments waiting for the batch (by message).
    pub(crate) pending_commits: HashMap<PartialCommit, PendingCommit<O>>,
    /// Deferred partials and pending commitments held per peer.
    pub(crate) pending_quota: Quota<O::Peer>,
    /// When the next batch is due.
    pub(crate) process_at: Option<Instant>,
    /// Aggregates waiting for the batch (by [`aggregators::aggregate_id`]):
    /// their deal, origin and the peer whose pending quota they use.
    pub(crate) aggregates: HashMap<B256, (B256, O, Option<O::Peer>)>,
}

impl<O: MessageOrigin> Default for VerifyQueue<O> {
    fn default() -> Self {
        Self {
            deferred: HashMap::new(),
            pending_commits: HashMap::new(),
            pending_quota: Quota::default(),
            process_at: None,
            aggregates: HashMap::new(),
        }
    }
}

/// A queued partial waiting for its verification batch (one per message:
/// a forged partial and the genuine one of the same signer and digest wait
/// side by side, and each verdict goes to that message's own origins).
pub(crate) struct Deferred<O: MessageOrigin> {
    pub(crate) partial: SignedVerdict,
    pub(crate) origins: Vec<O>,
    pub(crate) arrived: Instant,
    /// The peer whose pending quota this entry uses.
    pub(crate) charged: Option<O::Peer>,
}

/// A commitment waiting for its verification batch.
pub(crate) struct PendingCommit<O: MessageOrigin> {
    pub(crate) origins: Vec<O>,
    pub(crate) arrived: Instant,
    pub(crate) charged: Option<O::Peer>,
}

/// The key of a deferred partial: the message itself.
/// Where a partial stands before it is queued ([`Engine::queue_partial`]).
enum Screen {
    /// Invalid for the dispute it names: its sender is penalised.
    Reject(&'static str),
    /// Of a finished dispute: ignored.
    Ignore,
    /// Of a dispute not confirmed here yet: held.
    Buffer,
    /// Of an open dispute of this escrow.
    Open(Address),
}

pub(crate) type PartialKey = (B256, u32, [u8; 96]);

pub(crate) fn certificate_id(qc: &QuorumCertificate) -> B256 {
    keccak256(qc.to_wire().encode_wire())
}

impl<O: MessageOrigin> Engine<O> {
    /// The deal is looked up (and every cheap check made) before the
    /// certificate's signature is decompressed: a certificate that would be
    /// ignored costs a map lookup, not a point decompression.
    pub(crate) fn on_gossiped_certificate(
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
        if d.phase.is_final() {
            return Validation::Ignore;
        }
        if w.epoch != d.info.epoch || !matches_deal(&w.commitment, &d.info) {
            warn!(target: "p2p", peer = %origin.peer(), deal = %deal_id, "certificate does not match the confirmed deal");
            return Validation::Reject;
        }
        let waiting = d.submission.gossip_at.is_some();
        if d.submission.certificate.is_some() && !waiting {
            // One verified certificate per dispute is enough; copies and
            // variants cost nothing (no pairing, no score).
            return Validation::Ignore;
        }
        if !d.submission.rejected.is_empty()
            && d.submission.rejected.contains(&keccak256(w.encode_wire()))
        {
            return Validation::Ignore;
        }
        let Some(domain) = self.identity.domains.get(&d.info.escrow) else {
            return Validation::Ignore;
        };
        let Some(committee) = self.chain.committees.get(&w.epoch) else {
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
            Ok(_) if waiting => {
                // The network has a certificate: this aggregator's own
                // stays here (it submits it, widened) and is not gossiped.
                self.certificate_conflicts(&qc, now);
                if let Some(d) = self.disputes.get_mut(&deal_id) {
                    d.submission.gossip_at = None;
                    d.submission.certificate_from_peer = true;
                }
                Validation::Accept
            }
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

    /// Cheap checks now; the signature is verified in the next batch. A
    /// gossiped partial's validation result is reported after the batch.
    /// `arrived`: when it reached this node (commit-reveal orders reveals
    /// and commitments by arrival, not by verification).
    pub(crate) fn queue_partial(
        &mut self,
        p: SignedVerdict,
        origin: Option<O>,
        arrived: Instant,
        now: Instant,
    ) {
        let escrow = match self.screen_partial(&p) {
            Screen::Reject(why) => return self.reject_partial(origin, &p, why),
            Screen::Ignore => return self.ignore(origin, Topic::Verdicts),
            Screen::Buffer => return self.buffer(p, origin, arrived, now),
            Screen::Open(escrow) => escrow,
        };
        let Some(domain) = self.identity.domains.get(&escrow) else { return };
        let digest = p.commitment.eip712_digest(domain);
        let key: PartialKey = (digest, p.signer_index, p.signature);
        if let Some(entry) = self.queue.deferred.get_mut(&key) {
            // This very message is waiting: one verdict for every origin.
            entry.arrived = entry.arrived.min(arrived);
            match origin {
                Some(o) if entry.origins.len() < MAX_ORIGINS => entry.origins.push(o),
                Some(o) => self.report(o, Topic::Verdicts, Validation::Ignore),
                None => {}
            }
            return;
        }
        if !self.builders.contains_key(&(escrow, p.epoch)) {
            // The dispute's committee is still loading.
            return self.buffer(p, origin, arrived, now);
        }
        self.defer_partial(p, origin, arrived, now, escrow, key);
    }

    /// Where a partial stands before it is queued: for an open dispute this
    /// node knows, its escrow.
    fn screen_partial(&self, p: &SignedVerdict) -> Screen {
        if p.epoch == 0 {
            return Screen::Reject("epoch 0 has no committee");
        }
        let deal_id = p.commitment.deal_id;
        match self.disputes.get(&deal_id) {
            None if self.finished.contains(&deal_id) => Screen::Ignore,
            None => Screen::Buffer,
            Some(d) if d.info.epoch != p.epoch => Screen::Reject("not the dispute's pinned epoch"),
            Some(d) if !matches_deal(&p.commitment, &d.info) => {
                Screen::Reject("does not match the deal's fields")
            }
            Some(d) if d.phase.is_final() => Screen::Ignore,
            Some(d) => Screen::Open(d.info.escrow),
        }
    }

    fn reject_partial(&mut self, origin: Option<O>, p: &SignedVerdict, why: &str) {
        if let Some(origin) = origin {
            warn!(target: "p2p", peer = %origin.peer(), deal = %p.commitment.deal_id, epoch = p.epoch, why, "rejecting partial");
            self.report(origin, Topic::Verdicts, Validation::Reject);
        }
    }

    /// Queues a partial (message `key`) of an open dispute whose committee
    /// is loaded in its builder, for the next verification batch: soon if it
    /// could complete the certificate (or is a reveal, or maybe a
    /// doppelgänger's), else within [`BATCH_WAIT`].
    fn defer_partial(
        &mut self,
        p: SignedVerdict,
        origin: Option<O>,
        arrived: Instant,
        now: Instant,
        escrow: Address,
        key: PartialKey,
    ) {
        let digest = key.0;
        let reveal = self.disputes.get(&p.commitment.deal_id).map(|d| {
            (
                d.reveal.reveal_window.is_some(),
                d.reveal.reveals_verified.contains(&(digest, p.signer_index)),
            )
        });
        if reveal == Some((true, true)) {
            return self.ignore(origin, Topic::Verdicts);
        }
        // A peer's partial of this node's own key may be a doppelgänger's:
        // verified without waiting (before any held signature is released).
        let mine = origin.is_some() && self.own_key(p.epoch, p.signer_index);
        // A peer's messages waiting for verification are bounded per peer.
        let charged = match origin.as_ref() {
            Some(o) if !self.queue.pending_quota.take(o.peer(), MAX_PENDING_PER_PEER) => {
                metrics::count(&self.metrics.gossip_bounded, "pending_quota");
                return self.ignore(origin, Topic::Verdicts);
            }
            Some(o) => Some(o.peer().clone()),
            None => None,
        };
        let Some(builder) = self.builders.get_mut(&(escrow, p.epoch)) else {
            // (Checked by the caller: the builder exists.)
            if let Some(peer) = &charged {
                self.queue.pending_quota.give(peer);
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
                // With aggregators a node verifies few partials: its slices'
                // (a collector) and escalated ones, and waits less.
                let wait = match self.cfg.dissemination {
                    Dissemination::Aggregators(a) => a.collect_wait,
                    Dissemination::Flood => BATCH_WAIT,
                };
                let due = now + if urgent { BATCH_WINDOW } else { wait };
                self.queue.process_at = Some(self.queue.process_at.map_or(due, |at| at.min(due)));
                let origins = origin.into_iter().collect();
                self.queue.deferred.insert(key, Deferred { partial: p, origins, arrived, charged });
            }
            Ok(Queued::Duplicate) => {
                // Already verified (this signer and digest).
                if let Some(peer) = &charged {
                    self.queue.pending_quota.give(peer);
                }
                self.ignore(origin, Topic::Verdicts);
            }
            Err(e) => {
                if let Some(peer) = &charged {
                    self.queue.pending_quota.give(peer);
                }
                self.reject_partial(origin, &p, &e.to_string())
            }
        }
    }

    /// Verifies the queued commitments and partials (one batch each; `seed`
    /// feeds the random scalars of the multi-message checks: pass fresh OS
    /// randomness). Commitments go first, so a commitment and its reveal
    /// verified in one batch count in order.
    pub fn on_batch(&mut self, seed: &[u8; 32], now: Instant) {
        self.queue.process_at = None;
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
                    self.on_verified_partial((digest, signer, wire), signature, now);
                }
                BuilderEvent::Invalid { signer, digest, wire } => {
                    self.on_invalid_partial((digest, signer, wire));
                }
                BuilderEvent::AggregateVerified(a) => {
                    self.on_aggregate_checked(*a, Validation::Accept, now)
                }
                BuilderEvent::AggregateInvalid(a) => {
                    self.on_aggregate_checked(*a, Validation::Reject, now)
                }
                BuilderEvent::AggregateCovered(a) => {
                    self.on_aggregate_checked(*a, Validation::Ignore, now)
                }
                BuilderEvent::Certificate(qc) => self.on_certificate(*qc, true, now),
            }
        }
        self.collect_due(now);
    }

    /// A queued partial (message `key`) verified in the batch: its origins
    /// are accepted, its signer is listed, and it is persisted, checked for
    /// equivocation and (commit-reveal) for timeliness.
    fn on_verified_partial(
        &mut self,
        key: PartialKey,
        signature: resolvd_consensus::Signature,
        now: Instant,
    ) {
        metrics::count(&self.metrics.partials_verified, "valid");
        let (digest, signer, _) = key;
        let Some(entry) = self.queue.deferred.remove(&key) else { return };
        if let Some(peer) = &entry.charged {
            self.queue.pending_quota.give(peer);
        }
        let (p, origins, arrived) = (entry.partial, entry.origins, entry.arrived);
        let from_peer = !origins.is_empty();
        for origin in origins {
            self.report(origin, Topic::Verdicts, Validation::Accept);
        }
        if from_peer && self.own_key(p.epoch, signer) {
            self.check_doppelganger(&p);
        }
        if let Some(d) = self.disputes.get_mut(&p.commitment.deal_id) {
            let list = d.record.signers.entry(digest).or_default();
            if !list.contains(&signer) {
                list.push(signer);
                list.sort_unstable();
            }
            // (With commit-reveal, persisted once counted.)
            let counted = d.reveal.reveal_window.is_none();
            if counted && d.own.as_ref().is_none_or(|o| o.signer_index != signer) {
                self.actions.push_back(Action::PersistPartial(p.clone()));
            }
            if counted {
                self.collected(&p.commitment.deal_id, digest, signer, now);
            }
        }
        self.on_verified_reveal(&p, digest, arrived, now);
        let escrow = self.disputes.get(&p.commitment.deal_id).map(|d| d.info.escrow);
        if let Some(escrow) = escrow {
            self.check_conflict(escrow, Attestation::single(&p, signature), now);
        }
    }

    /// A queued partial (message `key`) whose signature is invalid: its
    /// origins are rejected.
    fn on_invalid_partial(&mut self, key: PartialKey) {
        metrics::count(&self.metrics.partials_verified, "invalid");
        let signer = key.1;
        if let Some(entry) = self.queue.deferred.remove(&key) {
            if let Some(peer) = &entry.charged {
                self.queue.pending_quota.give(peer);
            }
            for origin in entry.origins {
                warn!(target: "p2p", peer = %origin.peer(), signer, "rejecting partial with an invalid signature");
                self.report(origin, Topic::Verdicts, Validation::Reject);
            }
        }
    }

    /// A verified certificate's signers checked against every commitment
    /// held for the deal (equivocation evidence).
    fn certificate_conflicts(&mut self, qc: &QuorumCertificate, now: Instant) {
        let escrow = self.disputes.get(&qc.commitment.deal_id).map(|d| d.info.escrow);
        if let (Some(escrow), Some(committee)) = (escrow, self.chain.committees.get(&qc.epoch)) {
            if let Ok(a) = qc.attestation(committee) {
                self.check_conflict(escrow, a, now);
            }
        }
    }

    pub(crate) fn on_certificate(&mut self, qc: QuorumCertificate, built_here: bool, now: Instant) {
        let deal_id = qc.commitment.deal_id;
        self.certificate_conflicts(&qc, now);
        let first_group = self.aggregation().map(|a| a.group);
        let Some(d) = self.disputes.get_mut(&deal_id) else { return };
        if d.submission.certificate.is_some() || d.phase.is_final() {
            return;
        }
        if qc.epoch != d.info.epoch || !matches_deal(&qc.commitment, &d.info) {
            warn!(target: "pipeline", deal = %deal_id, "certificate does not match the deal: ignored");
            return;
        }
        if !d.submission.rejected.is_empty() && d.submission.rejected.contains(&certificate_id(&qc))
        {
            return;
        }
        self.actions.push_back(Action::PersistCertificate(Box::new(qc.clone())));
        let elapsed = now.saturating_duration_since(d.seen);
        self.metrics.certificates.inc();
        self.metrics.dispute_to_certificate.observe(elapsed.as_secs_f64());
        d.record.certificate_ms = Some(elapsed.as_millis() as u64);
        d.record.certificate_non_signers = Some(qc.non_signers.clone());
        d.record.certified_outcome = Some(qc.commitment.outcome);
        // A node still fetching or replaying finishes its own replay and
        // signs (more signers, and a check of the certificate against its
        // own result); otherwise it now waits for settlement.
        if matches!(d.phase, Phase::Signed | Phase::Observing) {
            d.phase = Phase::Certified;
        }
        // The order is over the whole committee, not this node's certificate's
        // signers: nodes holding different certificates still agree on it.
        let committee = self.chain.committees.get(&qc.epoch);
        let members: Vec<u32> =
            committee.map(|c| c.members().iter().map(|m| m.index).collect()).unwrap_or_default();
        let me = self.identity.me.as_ref().and_then(|k| committee?.index_of(k));
        let seed = order_seed(&d.info);
        let rank = me.map_or(members.len(), |me| submit_rank(&seed, &members, me));
        // A node outside the committee sends a slot after its last member.
        let outside = if me.is_none() { self.cfg.submit_slot } else { Duration::ZERO };
        let widen = if qc.non_signers.is_empty() { Duration::ZERO } else { self.cfg.widen_wait };
        d.submission.submit_at =
            Some(now + widen + submit_delay(self.cfg.submit_slot, rank) + outside);
        d.submission.submit_backoff = self.cfg.retry;
        info!(target: "pipeline", deal = %deal_id, outcome = ?qc.commitment.outcome, non_signers = ?qc.non_signers, built_here, rank, "certificate");
        d.submission.certificate = Some(qc.clone());
        d.submission.certificate_from_peer = !built_here;
        // With aggregators, only they build certificates: the first half of
        // the first group gossips theirs at once, the rest of it after a
        // stagger unless a peer's verifies first. Aggregators past the first
        // group have partials only once members escalated (the first group
        // did not deliver): they gossip at once. A node forwards the first
        // certificate it verifies and ignores the rest.
        let at_once = match first_group {
            Some(k) => rank < CERTIFICATE_GOSSIPERS.max(k / 2) || rank >= k,
            None => rank < CERTIFICATE_GOSSIPERS,
        };
        if built_here && at_once {
            d.submission.certificate_gossiped = true;
            d.last_publish = now;
            self.actions.push_back(Action::Publish(Gossip::Certificate(Box::new(qc.to_wire()))));
        } else if built_here && first_group.is_some() {
            d.submission.gossip_at = Some(now + CERTIFICATE_STAGGER);
        }
    }

    /// Gossips the certificates aggregators built whose stagger
    /// ([`CERTIFICATE_STAGGER`]) ran out with no peer's verified.
    pub(crate) fn gossip_staggered(&mut self, now: Instant) {
        for d in self.disputes.values_mut() {
            if d.submission.gossip_at.is_none_or(|at| now < at) {
                continue;
            }
            d.submission.gossip_at = None;
            let Some(qc) = &d.submission.certificate else { continue };
            if d.phase.is_final() {
                continue;
            }
            d.submission.certificate_gossiped = true;
            d.last_publish = now;
            self.actions.push_back(Action::Publish(Gossip::Certificate(Box::new(qc.to_wire()))));
        }
    }

    /// Replaces a dispute's certificate by one with more signers, if this
    /// node's builder verified (and counted) more for the same commitment.
    pub(crate) fn widen_certificate(&mut self, deal_id: &B256) {
        let Some(d) = self.disputes.get(deal_id) else { return };
        let (Some(qc), Some(domain)) =
            (&d.submission.certificate, self.identity.domains.get(&d.info.escrow))
        else {
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
            d.record.certificate_non_signers = Some(best.non_signers.clone());
            d.submission.certificate = Some(best);
        }
    }

    /// Re-gossips the own partials (or, before the reveal, the own
    /// commitment) and gossiped certificates of open disputes every
    /// `republish`.
    pub(crate) fn republish(&mut self, now: Instant) {
        let republish = self.cfg.republish;
        let mut own = Vec::new();
        let mut certificates = Vec::new();
        let mut commits = Vec::new();
        for d in self.disputes.values_mut() {
            if !d.phase.is_final() && now.saturating_duration_since(d.last_publish) >= republish {
                d.last_publish = now;
                let id = d.info.deal_id;
                let unrevealed = d.reveal.reveal_window.is_some() && !d.reveal.revealed;
                if unrevealed {
                    commits.extend(d.reveal.own_commit.map(Gossip::Commit));
                } else if let Some(p) = d.own.clone() {
                    let mut messages = vec![Gossip::Verdict(p)];
                    messages.extend(d.extra().iter().cloned().map(Gossip::Verdict));
                    own.push((id, messages));
                }
                certificates.extend(
                    d.submission
                        .certificate
                        .as_ref()
                        .filter(|_| d.submission.certificate_gossiped)
                        .map(|c| Gossip::Certificate(Box::new(c.to_wire()))),
                );
            }
        }
        for (deal_id, messages) in own {
            self.send_own(&deal_id, messages, now);
        }
        self.actions.extend(commits.into_iter().chain(certificates).map(Action::Publish));
    }
}
