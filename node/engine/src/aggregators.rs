//! Dissemination: how a node's own partials and commitments reach the
//! committee. Flooded on gossip, every member verifies and forwards every
//! partial, so a node's bytes and CPU grow linearly in the committee size.
//! With aggregators, each member sends them straight to a few members (the
//! first of the deal's submitter order), which verify them in batches, build
//! the certificate and gossip it; everyone else verifies one certificate.
//!
//! A group of aggregators that withholds (or crashed) is routed around by
//! escalation: a member still without a certificate `escalate_after` after
//! sending to a group sends to the next one, twice as large, and past the
//! end of the committee gossips to everyone. Groups are disjoint and grow
//! `k, 2k, 4k, …`, so however the deal id places the byzantine members, they
//! can hold up at most `⌈log₂(f / k + 1)⌉` groups (`f` byzantine members):
//! at N = 1,024, k = 8 and f = 341, five escalations.

use super::*;
use alloy_primitives::B256;
use resolvd_proto::wire::Gossip;
use std::time::{Duration, Instant};
use tracing::info;

/// How a node's own partials and commitments reach the committee.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dissemination {
    /// Gossiped to every member: each one verifies and forwards every partial.
    Flood,
    /// Sent to the dispute's aggregators ([`aggregator_group`]); the
    /// certificates they build are gossiped.
    Aggregators {
        /// Members in the first group.
        group: usize,
        /// Without a certificate this long after a partial went to a group,
        /// it goes to the next one.
        escalate_after: Duration,
    },
}

/// Which group of the deal's aggregators the own partial went to, and when
/// the next group is due.
#[derive(Debug, Default)]
pub(crate) struct Escalation {
    pub(crate) round: u32,
    pub(crate) next_at: Option<Instant>,
}

/// The aggregators of `round` for `deal_id`: ranks `[k(2ʳ − 1), k(2ʳ⁺¹ − 1))`
/// of the deal's submitter order ([`submit_order`]), `k = group`, cut at
/// the end of the committee; empty past it (or for `group` 0). Round 0's
/// first members are also the deal's first submitters.
pub fn aggregator_group(deal_id: &B256, members: &[u32], group: usize, round: u32) -> Vec<u32> {
    let rank = |r: u32| group.saturating_mul((1usize << r.min(31)).saturating_sub(1));
    let (start, end) = (rank(round), rank(round + 1));
    if start >= members.len() {
        return Vec::new();
    }
    let order = submit_order(deal_id, members);
    order[start..end.min(order.len())].to_vec()
}

impl<O: MessageOrigin> Engine<O> {
    /// Whether own partials go to aggregators.
    pub(crate) fn aggregating(&self) -> bool {
        matches!(self.cfg.dissemination, Dissemination::Aggregators { .. })
    }

    /// Sends an own message (partial or commitment) of dispute `deal_id`:
    /// gossiped, or to the aggregators of the dispute's current round, the
    /// first partial sent there starting the escalation timer.
    pub(crate) fn send_own(&mut self, deal_id: &B256, gossip: Gossip, now: Instant) {
        let Dissemination::Aggregators { group, escalate_after } = self.cfg.dissemination else {
            return self.push(Action::Publish(gossip));
        };
        let Some(d) = self.disputes.get(deal_id) else { return };
        let Some(committee) = self.chain.committees.get(&d.info.epoch) else {
            // (An own partial exists only once the committee is loaded.)
            return self.push(Action::Publish(gossip));
        };
        let members: Vec<u32> = committee.members().iter().map(|m| m.index).collect();
        let me = self.identity.me.as_ref().and_then(|k| committee.index_of(k));
        let mut to = aggregator_group(deal_id, &members, group, d.aggregators.round);
        if to.is_empty() {
            // Past the end of the committee: everyone.
            return self.push(Action::Publish(gossip));
        }
        let Some(d) = self.disputes.get_mut(deal_id) else { return };
        if matches!(gossip, Gossip::Verdict(_))
            && d.submission.certificate.is_none()
            && d.aggregators.next_at.is_none()
        {
            d.aggregators.next_at = Some(now + escalate_after);
        }
        to.retain(|&i| Some(i) != me);
        if !to.is_empty() {
            self.push(Action::Send { to, gossip });
        }
    }

    /// Escalation (an `on_tick` job): the own partial (after the own
    /// commitment, with commit-reveal) of each open dispute still without a
    /// certificate when its timer is due goes to the next group.
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
            let commit = d.reveal.own_commit.filter(|_| d.reveal.reveal_window.is_some());
            let mut sends: Vec<Gossip> = commit.into_iter().map(Gossip::Commit).collect();
            sends.push(Gossip::Verdict(own));
            sends.extend(d.extra().iter().cloned().map(Gossip::Verdict));
            info!(target: "pipeline", deal = %d.info.deal_id, round = d.aggregators.round, "no certificate yet: the partial goes to the next aggregators");
            due.push((d.info.deal_id, sends));
        }
        for (deal_id, sends) in due {
            for gossip in sends {
                self.send_own(&deal_id, gossip, now);
            }
        }
    }
}
