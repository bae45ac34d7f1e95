//! Dissemination: how a node's own partials (and, with commit-reveal, its
//! reveal and commitment) reach the committee; commitments are gossiped in
//! either mode. Flooded on gossip, every member verifies and forwards every
//! partial, so a node's bytes and CPU grow linearly in the committee size.
//!
//! With aggregators, the dispute's submitter order ([`submit_order`], seeded
//! by the deal id and the block of its `Disputed` log) is cut into
//! *slices* of `slice` members; the first `collectors` members of each slice
//! collect it. A member sends its partial to its slice's collectors; a
//! collector verifies its slice's partials (at most `slice`, so a slice's
//! garbage costs it at most `2 · slice` pairings) and sends their aggregate
//! (a [`SignerAggregate`]: signer list and one signature) to the first group
//! of aggregators, again when it grows (not to one that collects the same
//! slice: it holds the partials already). An aggregator verifies each aggregate
//! that adds signers with one pairing, combines disjoint ones with any
//! partials it holds into a certificate and gossips it (the first half of
//! the first group and the later groups at once, the rest of the first
//! group after [`CERTIFICATE_STAGGER`] unless a peer's certificate verified
//! meanwhile); every other member verifies one certificate. Committees of
//! at most `slice` members, and
//! disputes with commit-reveal (an aggregate cannot show that its signers
//! committed in time), skip the slices: members send to the aggregators
//! directly, which check each partial's commitment as with flooding.
//!
//! Withholding is routed around by escalation: a member still without a
//! certificate `escalate_after` after sending sends its partial straight to
//! the next group of aggregators (and a collector its slices' aggregates),
//! twice as large as the one before, and past the end of the committee
//! gossips it to everyone. Groups are disjoint and grow `k, 2k, 4k, …`, so
//! however the order places `f` byzantine members, they hold up at most
//! `⌈log₂(f / k + 1)⌉` rounds; the seed's block hash, which neither party
//! to the deal can choose, leaves the placement to chance, where a whole
//! group of byzantine members is as rare as `(f / N)ᵏ`.
//!
//! Signers after the certificate are still paid without `includeSigners`:
//! a partial signed after it still goes out, and a collector holding the
//! certificate sends the slices of its commitment that grow to the
//! dispute's first [`WIDENING_SUBMITTERS`] submitters only. One of them that
//! has yet to send `resolve` verifies an aggregate of the certified
//! commitment that adds signers; every other holder of the certificate
//! ignores it. The first submitter sends `widen_wait` after its certificate
//! came, widened with every signer that reached it by then.

use super::*;
use alloy_primitives::B256;
use resolvd_consensus::Attestation;
use resolvd_proto::wire::{Gossip, SignerAggregate};
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// How a node's own partials reach the committee.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dissemination {
    /// Gossiped to every member: each one verifies and forwards every partial.
    Flood,
    /// Sent to the dispute's aggregators, through its slices' collectors.
    Aggregators(Aggregation),
}

/// The shape of aggregation ([`Dissemination::Aggregators`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aggregation {
    /// Members in the first group of aggregators.
    pub group: usize,
    /// Members per slice (0: no slices, partials go to the aggregators).
    pub slice: usize,
    /// Collectors per slice: its first members. The default, 8, leaves a
    /// slice at most one honest collector, with a third of the committee
    /// byzantine, once in ~390 slices (6: once in ~56); a lone collector's
    /// lost packet holds up every partial it carries.
    pub collectors: usize,
    /// Without a certificate this long after a partial went out, it goes to
    /// the next group.
    pub escalate_after: Duration,
    /// A collector sends a slice's aggregate this long after its first
    /// verified partial (at once when the slice is complete), and again after
    /// as long when it grew.
    pub collect_wait: Duration,
}

impl Default for Aggregation {
    fn default() -> Self {
        Self {
            group: 8,
            slice: 32,
            collectors: 8,
            escalate_after: Duration::from_secs(1),
            collect_wait: Duration::from_millis(50),
        }
    }
}

/// A dispute's aggregation state: the submitter order, which round the own
/// partial is in, and the slices this node collects.
#[derive(Debug, Default)]
pub(crate) struct Escalation {
    /// The committee in the deal's submitter order (computed once).
    order: Vec<u32>,
    pub(crate) round: u32,
    pub(crate) next_at: Option<Instant>,
    /// Per (digest, slice) this node collects: when its aggregate is due,
    /// and how many signers the last one sent had.
    slices: BTreeMap<(B256, usize), (Option<Instant>, usize)>,
}

/// The first members of a dispute's submitter order, to which a collector
/// holding the certificate still sends its slices as they grow: the first
/// sends `resolve` `widen_wait` after its certificate, widened with them; the
/// second is the fallback a slot later.
pub const WIDENING_SUBMITTERS: usize = 2;

/// The aggregators of `round` for the dispute of order seed `seed`
/// ([`order_seed`]): ranks `[k(2ʳ − 1), k(2ʳ⁺¹ − 1))` of its submitter order
/// ([`submit_order`]), `k = group`, cut at the end of the committee; empty
/// past it (or for `group` 0). Round 0's first members are also the
/// dispute's first submitters.
pub fn aggregator_group(seed: &B256, members: &[u32], group: usize, round: u32) -> Vec<u32> {
    groups_of(&submit_order(seed, members), group, round).to_vec()
}

fn groups_of(order: &[u32], group: usize, round: u32) -> &[u32] {
    let rank = |r: u32| group.saturating_mul((1usize << r.min(31)).saturating_sub(1));
    let (start, end) = (rank(round), rank(round + 1));
    if start >= order.len() {
        return &[];
    }
    &order[start..end.min(order.len())]
}

impl Escalation {
    /// Its timers: the escalation and the slices' aggregates due.
    pub(crate) fn timers(&self) -> impl Iterator<Item = Instant> + '_ {
        self.next_at.into_iter().chain(self.slices.values().filter_map(|(due, _)| *due))
    }

    /// Every slice this node collects is due again now, in full (to the
    /// next group, or to the aggregators after a rejected certificate).
    pub(crate) fn resend_slices(&mut self, now: Instant) {
        for (due, sent) in self.slices.values_mut() {
            (*due, *sent) = (Some(now), 0);
        }
    }

    /// The submitter order is computed again (from the dispute's current
    /// announcement) when next needed; the slices collected were cut from
    /// the old one.
    pub(crate) fn forget_order(&mut self) {
        self.order.clear();
        self.slices.clear();
    }
}

impl Aggregation {
    fn sliced(&self, members: usize) -> bool {
        self.slice > 0 && members > self.slice
    }

    /// The slice (its number and members) of the member at `position` of
    /// the submitter order.
    fn slice_at<'a>(&self, order: &'a [u32], position: usize) -> (usize, &'a [u32]) {
        let j = position / self.slice;
        (j, &order[j * self.slice..((j + 1) * self.slice).min(order.len())])
    }

    /// Where a member's own partial goes in `round` (`sliced`: through the
    /// slices' collectors).
    fn targets(&self, order: &[u32], me: Option<u32>, round: u32, sliced: bool) -> Vec<u32> {
        if !sliced {
            return groups_of(order, self.group, round).to_vec();
        }
        if round > 0 {
            // Round 0's group had the slices' aggregates: the next one.
            return groups_of(order, self.group, round).to_vec();
        }
        let Some(position) = me.and_then(|me| order.iter().position(|&m| m == me)) else {
            return groups_of(order, self.group, 0).to_vec();
        };
        let (_, slice) = self.slice_at(order, position);
        slice[..self.collectors.min(slice.len())].to_vec()
    }
}

impl<O: MessageOrigin> Engine<O> {
    pub(crate) fn aggregation(&self) -> Option<Aggregation> {
        match self.cfg.dissemination {
            Dissemination::Aggregators(a) => Some(a),
            Dissemination::Flood => None,
        }
    }

    /// Whether own partials go to aggregators.
    pub(crate) fn aggregating(&self) -> bool {
        self.aggregation().is_some()
    }

    /// The deal's submitter order and this node's index, once the dispute's
    /// committee is loaded.
    fn order(&mut self, deal_id: &B256) -> Option<(Vec<u32>, Option<u32>)> {
        let d = self.disputes.get(deal_id)?;
        let committee = self.chain.committees.get(&d.info.epoch)?;
        let me = self.identity.me.as_ref().and_then(|k| committee.index_of(k));
        if d.aggregators.order.is_empty() {
            let members: Vec<u32> = committee.members().iter().map(|m| m.index).collect();
            let order = submit_order(&order_seed(&d.info), &members);
            self.disputes.get_mut(deal_id)?.aggregators.order = order;
        }
        Some((self.disputes.get(deal_id)?.aggregators.order.clone(), me))
    }

    /// Sends own messages (partials, commitments) of dispute `deal_id`:
    /// each gossiped, or, where the dispute's current round sends them, in
    /// one direct request (taken in this order at one instant: a reveal with
    /// its commitment), the first partial sent starting the escalation timer.
    pub(crate) fn send_own(&mut self, deal_id: &B256, messages: Vec<Gossip>, now: Instant) {
        let gossip_each = |engine: &mut Self, messages: Vec<Gossip>| {
            engine.actions.extend(messages.into_iter().map(Action::Publish));
        };
        let Some(a) = self.aggregation() else { return gossip_each(self, messages) };
        let Some((order, me)) = self.order(deal_id) else {
            // (An own partial exists only once the committee is loaded.)
            return gossip_each(self, messages);
        };
        let Some(d) = self.disputes.get_mut(deal_id) else { return };
        let sliced = a.sliced(order.len()) && d.reveal.reveal_window.is_none();
        let mut to = a.targets(&order, me, d.aggregators.round, sliced);
        if to.is_empty() {
            // Past the end of the committee: everyone.
            return gossip_each(self, messages);
        }
        if messages.iter().any(|m| matches!(m, Gossip::Verdict(_)))
            && d.submission.certificate.is_none()
            && d.aggregators.next_at.is_none()
        {
            d.aggregators.next_at = Some(now + a.escalate_after);
        }
        to.retain(|&i| Some(i) != me);
        if !to.is_empty() {
            let epoch = d.info.epoch;
            self.push(Action::Send { epoch, to, messages });
        }
    }

    /// A partial of `signer` for `digest` verified and counted here: if this
    /// node collects the signer's slice, the slice's aggregate is due
    /// (at once if the slice is complete).
    pub(crate) fn collected(&mut self, deal_id: &B256, digest: B256, signer: u32, now: Instant) {
        let Some(a) = self.aggregation() else { return };
        let Some((order, Some(me))) = self.order(deal_id) else { return };
        let commit_reveal =
            self.disputes.get(deal_id).is_some_and(|d| d.reveal.reveal_window.is_some());
        if !a.sliced(order.len()) || commit_reveal {
            return;
        }
        let Some(position) = order.iter().position(|&m| m == signer) else { return };
        let (j, slice) = a.slice_at(&order, position);
        if !slice[..a.collectors.min(slice.len())].contains(&me) {
            return;
        }
        let Some(d) = self.disputes.get(deal_id) else { return };
        let complete = self
            .builders
            .get(&(d.info.escrow, d.info.epoch))
            .is_some_and(|b| b.verified_among(&digest, slice) == slice.len());
        let Some(d) = self.disputes.get_mut(deal_id) else { return };
        let entry = d.aggregators.slices.entry((digest, j)).or_insert((None, 0));
        let due = if complete { now } else { now + a.collect_wait };
        entry.0 = Some(entry.0.map_or(due, |t| t.min(due)));
    }

    /// Sends the slice aggregates due (an `on_tick` job, and after a batch).
    pub(crate) fn collect_due(&mut self, now: Instant) {
        let Some(a) = self.aggregation() else { return };
        let mut sends = Vec::new();
        for d in self.disputes.values_mut() {
            if d.phase.is_final() || d.aggregators.slices.is_empty() {
                continue;
            }
            let Some(builder) = self.builders.get(&(d.info.escrow, d.info.epoch)) else {
                continue;
            };
            let Some(committee) = self.chain.committees.get(&d.info.epoch) else { continue };
            let me = self.identity.me.as_ref().and_then(|k| committee.index_of(k));
            let order = &d.aggregators.order;
            let group = groups_of(order, a.group, d.aggregators.round);
            // A slice of the certified digest that grows after the certificate
            // (late partials) goes to the dispute's first submitters only:
            // they take its signers into the certificate they send. Every
            // other holder of the certificate would ignore it.
            let widening = &order[..WIDENING_SUBMITTERS.min(order.len())];
            let certified = d.submission.certificate.as_ref().and_then(|qc| {
                self.identity
                    .domains
                    .get(&d.info.escrow)
                    .map(|dom| qc.commitment.eip712_digest(dom))
            });
            for ((digest, j), (due, sent)) in &mut d.aggregators.slices {
                if due.is_none_or(|t| now < t) {
                    continue;
                }
                let start = *j * a.slice;
                let slice = order.get(start..(start + a.slice).min(order.len()));
                let Some((slice, aggregate)) =
                    slice.and_then(|s| Some((s, builder.aggregate_of(digest, s)?)))
                else {
                    *due = None;
                    continue;
                };
                if aggregate.signers.len() <= *sent {
                    *due = None;
                    continue;
                }
                *sent = aggregate.signers.len();
                // Again only if it grows, and not before `collect_wait`.
                *due = None;
                // The slice's members send their partials to each of its
                // collectors: a target that collects it holds them already
                // (the first slice's collectors are the first aggregators).
                let collectors = &slice[..a.collectors.min(slice.len())];
                let targets = if certified == Some(*digest) { widening } else { group };
                let to: Vec<u32> = targets
                    .iter()
                    .copied()
                    .filter(|&i| Some(i) != me && !collectors.contains(&i))
                    .collect();
                if !to.is_empty() {
                    sends.push((d.info.epoch, to, Box::new(aggregate.to_wire())));
                }
            }
        }
        for (epoch, to, aggregate) in sends {
            self.push(Action::Send { epoch, to, messages: vec![Gossip::Aggregate(aggregate)] });
        }
    }

    /// An aggregate of a slice's partials from a collector: cheap checks
    /// now, its signature in the next batch (only if it adds a signer then).
    /// Only with aggregators, and not for commit-reveal disputes: an
    /// aggregate's signers skip the timeliness of their commitments (their
    /// partials go to the aggregators, which check it).
    pub(crate) fn on_aggregate(&mut self, w: SignerAggregate, origin: O, now: Instant) {
        let deal_id = w.commitment.deal_id;
        let aggregating = self.aggregating();
        // Only for an aggregate of the certified commitment: whether this
        // node is one of the first submitters (the order is read only then).
        let of_certified = self.disputes.get(&deal_id).is_some_and(|d| {
            d.submission.certificate.as_ref().is_some_and(|qc| qc.commitment == w.commitment)
        });
        let widens = aggregating
            && of_certified
            && self.order(&deal_id).is_some_and(|(order, me)| {
                me.is_some_and(|me| order.iter().take(WIDENING_SUBMITTERS).any(|&m| m == me))
            });
        let screen = match self.disputes.get(&deal_id) {
            _ if !aggregating => Err(Validation::Ignore),
            None if self.finished.contains(&deal_id) => Err(Validation::Ignore),
            // Not confirmed here yet: held (a collector's poll came first).
            None => {
                if let Some(v) = self.hold_early_aggregate(w, origin.clone(), now) {
                    self.report(origin, Topic::Aggregates, v);
                }
                return;
            }
            Some(d) if d.phase.is_final() || d.reveal.reveal_window.is_some() => {
                Err(Validation::Ignore)
            }
            // After the certificate, one of its commitment is worth a pairing
            // only to one of the first submitters that has yet to send it (it
            // widens the certificate with the signers it adds; the rest send
            // only if those failed); another commitment's is conflict
            // evidence.
            Some(d)
                if of_certified
                    && (!widens || d.submission.submit_at.is_none() || d.submission.submitting) =>
            {
                Err(Validation::Ignore)
            }
            Some(d) if w.epoch != d.info.epoch || !matches_deal(&w.commitment, &d.info) => {
                warn!(target: "p2p", peer = %origin.peer(), deal = %deal_id, "aggregate does not match the confirmed deal");
                Err(Validation::Reject)
            }
            Some(d) => Ok((d.info.escrow, d.info.epoch)),
        };
        let key = match screen {
            Ok(key) => key,
            Err(v) => return self.report(origin, Topic::Aggregates, v),
        };
        let attestation = match Attestation::from_wire(&w) {
            Ok(a) => a,
            Err(e) => {
                warn!(target: "p2p", peer = %origin.peer(), error = %e, "bad aggregate encoding");
                return self.report(origin, Topic::Aggregates, Validation::Reject);
            }
        };
        if !self.queue.pending_quota.take(origin.peer(), MAX_PENDING_PER_PEER) {
            metrics::count(&self.metrics.gossip_bounded, "pending_quota");
            return self.report(origin, Topic::Aggregates, Validation::Ignore);
        }
        let Some(builder) = self.builders.get_mut(&key) else {
            // The committee is loading: held until it is.
            self.queue.pending_quota.give(origin.peer());
            if let Some(v) = self.hold_early_aggregate(w, origin.clone(), now) {
                self.report(origin, Topic::Aggregates, v);
            }
            return;
        };
        let domain = self.identity.domains.get(&key.0);
        match builder.on_aggregate(&attestation) {
            Ok(resolvd_consensus::Queued::New) => {
                let digest = domain.map(|d| w.commitment.eip712_digest(d));
                let urgent = digest.is_some_and(|digest| builder.could_certify(&digest));
                let wait = self.aggregation().map_or(BATCH_WAIT, |a| a.collect_wait);
                let due = now + if urgent { BATCH_WINDOW } else { wait };
                self.queue.process_at = Some(self.queue.process_at.map_or(due, |at| at.min(due)));
                let charged = Some(origin.peer().clone());
                let id = aggregate_id(&attestation);
                self.queue.aggregates.insert(id, (deal_id, origin, charged));
            }
            Ok(resolvd_consensus::Queued::Duplicate) => {
                self.queue.pending_quota.give(origin.peer());
                self.report(origin, Topic::Aggregates, Validation::Ignore);
            }
            Err(e) => {
                self.queue.pending_quota.give(origin.peer());
                warn!(target: "p2p", peer = %origin.peer(), error = %e, "rejecting aggregate");
                self.report(origin, Topic::Aggregates, Validation::Reject);
            }
        }
    }

    /// The verdict on a queued aggregate after its batch: its origin is
    /// told, and a verified one lists its signers and is checked for
    /// equivocation.
    pub(crate) fn on_aggregate_checked(
        &mut self,
        a: Attestation,
        acceptance: Validation,
        now: Instant,
    ) {
        if let Some((_, origin, charged)) = self.queue.aggregates.remove(&aggregate_id(&a)) {
            if let Some(peer) = &charged {
                self.queue.pending_quota.give(peer);
            }
            if acceptance == Validation::Reject {
                warn!(target: "p2p", peer = %origin.peer(), signers = a.signers.len(), "rejecting aggregate with an invalid signature");
            }
            self.report(origin, Topic::Aggregates, acceptance);
        }
        if acceptance != Validation::Accept {
            return;
        }
        let deal_id = a.commitment.deal_id;
        let Some(d) = self.disputes.get_mut(&deal_id) else { return };
        let escrow = d.info.escrow;
        if let Some(domain) = self.identity.domains.get(&escrow) {
            let list = d.record.signers.entry(a.commitment.eip712_digest(domain)).or_default();
            list.extend(a.signers.iter().copied());
            list.sort_unstable();
            list.dedup();
        }
        self.check_conflict(escrow, a, now);
    }

    /// Escalation (an `on_tick` job): the own partial (after the own
    /// commitment, with commit-reveal) of each open dispute still without a
    /// certificate when its timer is due goes to the next group, and so do
    /// the aggregates of the slices this node collects.
    pub(crate) fn escalate(&mut self, now: Instant) {
        if !self.aggregating() {
            return;
        }
        let mut due = Vec::new();
        for d in self.disputes.values_mut() {
            if d.aggregators.next_at.is_none_or(|t| now < t) {
                continue;
            }
            d.aggregators.next_at = None;
            let Some(own) = d.own.clone() else { continue };
            if d.phase.is_final() || d.submission.certificate.is_some() {
                continue;
            }
            d.aggregators.round += 1;
            d.aggregators.resend_slices(now);
            let commit = d.reveal.own_commit.filter(|_| d.reveal.reveal_window.is_some());
            let mut sends: Vec<Gossip> = commit.into_iter().map(Gossip::Commit).collect();
            sends.push(Gossip::Verdict(own));
            sends.extend(d.extra().iter().cloned().map(Gossip::Verdict));
            info!(target: "pipeline", deal = %d.info.deal_id, round = d.aggregators.round, "no certificate yet: the partial goes to the next aggregators");
            due.push((d.info.deal_id, sends));
        }
        for (deal_id, sends) in due {
            self.send_own(&deal_id, sends, now);
        }
    }
}

/// A queued aggregate's key: its signers and signature over its commitment.
pub(crate) fn aggregate_id(a: &Attestation) -> B256 {
    use resolvd_proto::wire::WireMessage;
    alloy_primitives::keccak256(a.to_wire().encode_wire())
}
