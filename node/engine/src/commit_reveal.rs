//! Commit-reveal: commitments, their verification, the reveal and its
//! timers (window, fallback, late fallback).

use super::*;
use alloy_primitives::B256;
use resolvd_proto::wire::{PartialCommit, SignedVerdict};
use std::time::Instant;
use tracing::{info, warn};

impl<O: MessageOrigin> Engine<O> {
    /// Gossips this node's partial if it committed and the commit phase
    /// closed: the reveal phase began, the committed stake reached the
    /// threshold, or the window since its own commitment passed.
    pub(crate) fn maybe_reveal(&mut self, deal_id: B256, now: Instant) {
        let Some(d) = self.disputes.get(&deal_id) else { return };
        let (Some(window), Some(at), Some(own)) =
            (d.reveal.reveal_window, d.reveal.own_commit_at, d.own.as_ref())
        else {
            return;
        };
        if d.reveal.revealed || d.phase.is_final() {
            return;
        }
        // A reveal of another digest gives nothing of this node's away: it
        // keeps its partial hidden until its own digest is public, its
        // commit phase closed, or its window passed.
        let own_digest_revealed =
            d.digest.is_some_and(|digest| d.reveal.first_reveal.contains_key(&digest));
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
        let extra = d.extra().to_vec();
        // Sent straight to members, the reveal carries its commitment: sent
        // apart, the reveal could arrive first and not count. (Gossip
        // delivers the commitment, published earlier, first.)
        let commit = d.reveal.own_commit.filter(|_| self.aggregating());
        if let Some(d) = self.disputes.get_mut(&deal_id) {
            d.reveal.revealed = true;
            d.last_publish = now;
        }
        info!(target: "pipeline", deal = %deal_id, why, "revealing the partial");
        let mut messages: Vec<Gossip> = commit.into_iter().map(Gossip::Commit).collect();
        messages.push(Gossip::Verdict(own.clone()));
        messages.extend(extra.iter().cloned().map(Gossip::Verdict));
        self.send_own(&deal_id, messages, now);
        self.queue_partial(own, None, now, now);
        for p in extra {
            self.queue_partial(p, None, now, now);
        }
    }

    /// Whether the signers whose verified commitments came in time for this
    /// node's digest (before its first reveal) hold the threshold stake.
    pub(crate) fn committed_stake_met(&self, d: &Dispute) -> bool {
        let Some(committee) = self.chain.committees.get(&d.info.epoch) else { return false };
        let revealed = d.digest.and_then(|digest| d.reveal.first_reveal.get(&digest));
        let stake = d
            .reveal
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
    pub(crate) fn on_commit(
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
        if let Some(committee) = self.chain.committees.get(&c.epoch) {
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
        if d.phase.is_final() {
            return Some(Validation::Ignore);
        }
        if c.epoch != d.info.epoch {
            if let Some(o) = &origin {
                warn!(target: "p2p", peer = %o.peer(), deal = %deal_id, epoch = c.epoch, "rejecting commitment: not the dispute's pinned epoch");
            }
            return Some(Validation::Reject);
        }
        if !self.chain.committees.contains_key(&c.epoch) {
            // The dispute's committee (and with it the epoch's commit-reveal
            // setting) is still loading: held until it is.
            return self.hold_early_commit(c, origin, arrived, now);
        }
        if d.reveal.reveal_window.is_none() {
            // Commit-reveal is off for this dispute's epoch.
            return Some(Validation::Ignore);
        }
        if d.reveal.commits.contains_key(&c.signer_index) {
            // The signer's commitment is held (this one, or another: only a
            // forgery or the signer's own misbehaviour; neither is spread).
            return Some(Validation::Ignore);
        }
        if let Some(pending) = self.queue.pending_commits.get_mut(&c) {
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
        if self.queue.pending_commits.len() >= MAX_PENDING_COMMITS {
            metrics::count(&self.metrics.gossip_bounded, "commits_full");
            return Some(Validation::Ignore);
        }
        let charged = match origin.as_ref() {
            Some(o) if !self.queue.pending_quota.take(o.peer(), MAX_PENDING_PER_PEER) => {
                metrics::count(&self.metrics.gossip_bounded, "pending_quota");
                return Some(Validation::Ignore);
            }
            Some(o) => Some(o.peer().clone()),
            None => None,
        };
        self.queue
            .pending_commits
            .insert(c, PendingCommit { origins: origin.into_iter().collect(), arrived, charged });
        let due = now + BATCH_WINDOW;
        self.queue.process_at = Some(self.queue.process_at.map_or(due, |at| at.min(due)));
        None
    }

    /// Verifies the pending commitments (one randomised multi-pairing) and
    /// records the valid ones; every origin gets its own message's verdict.
    pub(crate) fn verify_commits(&mut self, seed: &[u8; 32], now: Instant) {
        if self.queue.pending_commits.is_empty() {
            return;
        }
        let mut pending: Vec<(PartialCommit, PendingCommit<O>)> =
            self.queue.pending_commits.drain().collect();
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
                    .chain
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
                self.queue.pending_quota.give(peer);
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
                None if self.chain.committees.contains_key(&c.epoch) => Validation::Reject,
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
    pub(crate) fn on_verified_commit(
        &mut self,
        c: &PartialCommit,
        arrived: Instant,
        now: Instant,
    ) -> Validation {
        let deal_id = c.deal_id;
        let Some(d) = self.disputes.get_mut(&deal_id) else { return Validation::Ignore };
        if d.phase.is_final() || !d.record_commit(c.signer_index, c.commit, arrived) {
            return Validation::Ignore;
        }
        if d.reveal.reveal_phase_at.is_some_and(|phase| arrived > phase) {
            // Late unless its partial's digest was not revealed yet.
            metrics::count(&self.metrics.commit_reveal, "late_commit");
            info!(target: "pipeline", deal = %deal_id, signer = c.signer_index, "commitment arrived in the reveal phase: its partial counts only if its digest was not revealed before");
        }
        // Its reveal may have been verified first (another batch): it
        // counts if the commitment arrived no later than its digest's first
        // reveal.
        let opened = d.reveal.uncounted.iter().position(|(p, digest, _)| {
            c.opens_to(p) && d.timely(c.signer_index, &c.commit, digest)
        });
        if let Some(pos) = opened {
            let (p, _, _) = d.reveal.uncounted.remove(pos);
            if let Some(cr) = d.record.commit_reveal.as_mut() {
                cr.uncounted.retain(|i| *i != p.signer_index);
            }
            self.count_reveal(&p, now);
        }
        self.maybe_reveal(deal_id, now);
        Validation::Accept
    }

    /// Adds a verified reveal to the certificate builder.
    pub(crate) fn count_reveal(&mut self, p: &SignedVerdict, now: Instant) {
        let Some(d) = self.disputes.get(&p.commitment.deal_id) else { return };
        if d.own.as_ref() != Some(p) {
            self.actions.push_back(Action::PersistPartial(p.clone()));
        }
        let escrow = d.info.escrow;
        let qc = self.builders.get_mut(&(escrow, p.epoch)).and_then(|b| b.count_verified(p));
        if let Some(domain) = self.identity.domains.get(&escrow) {
            let digest = p.commitment.eip712_digest(domain);
            self.collected(&p.commitment.deal_id, digest, p.signer_index, now);
        }
        if let Some(qc) = qc {
            self.on_certificate(qc, true, now);
        }
    }

    /// A verified reveal of a commit-reveal dispute that arrived at
    /// `arrived`: the reveal phase begins at the arrival of the first one;
    /// it counts if its signer's verified commitment arrived no later.
    pub(crate) fn on_verified_reveal(
        &mut self,
        p: &SignedVerdict,
        digest: B256,
        arrived: Instant,
        now: Instant,
    ) {
        let deal_id = p.commitment.deal_id;
        let Some(d) = self.disputes.get_mut(&deal_id) else { return };
        if d.reveal.reveal_window.is_none()
            || !d.reveal.reveals_verified.insert((digest, p.signer_index))
        {
            return;
        }
        let entered_now = d.reveal.reveal_phase_at.is_none();
        let first = d.reveal.first_reveal.entry(digest).or_insert(arrived);
        *first = (*first).min(arrived);
        if d.enter_reveal_phase(arrived) && entered_now {
            let committed = d.record.commit_reveal.as_ref().map_or(0, |cr| cr.committed.len());
            info!(target: "pipeline", deal = %deal_id, committed, "reveal phase");
        }
        // The node's own partial too: a copy signed after the digest was
        // revealed (fault injection's lazy copier) has a late commitment
        // here as everywhere else, and so no place in this node's certificate.
        let counted = d.timely(p.signer_index, &PartialCommit::commit_of(p), &digest);
        if counted {
            self.count_reveal(p, now);
        } else {
            let Some(cr) = d.record.commit_reveal.as_mut() else { return };
            if !cr.uncounted.contains(&p.signer_index) {
                cr.uncounted.push(p.signer_index);
                cr.uncounted.sort_unstable();
            }
            d.reveal.uncounted.push((p.clone(), digest, arrived));
            metrics::count(&self.metrics.commit_reveal, "uncounted_reveal");
            info!(target: "pipeline", deal = %deal_id, signer = p.signer_index, "reveal without a timely commitment: not counted");
        }
        if entered_now {
            self.maybe_reveal(deal_id, now);
        }
    }

    /// Commit-reveal timers: own reveals whose window passed, and the
    /// fallback for disputes stuck without a certificate in the reveal phase.
    pub(crate) fn reveal_timers(&mut self, now: Instant) {
        let mut reveal = Vec::new();
        let mut fallback = Vec::new();
        let mut late_fallback = Vec::new();
        for (id, d) in &self.disputes {
            let Some(window) = d.reveal.reveal_window else { continue };
            if d.phase.is_final() {
                continue;
            }
            if !d.reveal.revealed && d.reveal.own_commit_at.is_some_and(|t| now >= t + window) {
                reveal.push(*id);
            }
            let stuck = d
                .reveal
                .reveal_phase_at
                .is_some_and(|t| now >= t + window * REVEAL_FALLBACK_WINDOWS);
            if stuck && d.submission.certificate.is_none() && !d.reveal.fallback {
                fallback.push(*id);
            }
            let stuck_late = d
                .reveal
                .reveal_phase_at
                .is_some_and(|t| now >= t + window * REVEAL_LATE_FALLBACK_WINDOWS);
            if stuck_late
                && d.submission.certificate.is_none()
                && d.reveal.fallback
                && !d.reveal.late_fallback
            {
                late_fallback.push(*id);
            }
        }
        for id in reveal {
            self.maybe_reveal(id, now);
        }
        for id in fallback {
            let Some(d) = self.disputes.get_mut(&id) else { continue };
            let Some(phase) = d.reveal.reveal_phase_at else { continue };
            let Some(cr) = d.record.commit_reveal.as_mut() else { continue };
            d.reveal.fallback = true;
            // Only reveals that arrived no later than the reveal phase
            // began: nobody could have copied them. A reveal after it
            // without a timely commitment may be a copy, and never counts.
            let (early, late): (Vec<_>, Vec<_>) = std::mem::take(&mut d.reveal.uncounted)
                .into_iter()
                .partition(|(_, _, at)| *at <= phase);
            d.reveal.uncounted = late;
            cr.uncounted.retain(|i| !early.iter().any(|(p, _, _)| p.signer_index == *i));
            metrics::count(&self.metrics.commit_reveal, "fallback");
            warn!(target: "pipeline", deal = %id, counted = early.len(), "no certificate in the reveal phase: counting the reveals that arrived before it began");
            for (p, _, _) in early {
                self.count_reveal(&p, now);
            }
        }
        for id in late_fallback {
            let Some(d) = self.disputes.get_mut(&id) else { continue };
            let Some(cr) = d.record.commit_reveal.as_mut() else { continue };
            d.reveal.late_fallback = true;
            cr.uncounted.clear();
            let late = std::mem::take(&mut d.reveal.uncounted);
            metrics::count(&self.metrics.commit_reveal, "late_fallback");
            warn!(target: "pipeline", deal = %id, counted = late.len(), "still no certificate: counting every verified reveal, late ones included");
            for (p, _, _) in late {
                self.count_reveal(&p, now);
            }
        }
    }
}
