//! Submission: the submitter order, settlement, and `resolve` results.

use super::*;
use alloy_primitives::{keccak256, B256};
use resolvd_proto::wire::DisputeAnnouncement;
use std::time::{Duration, Instant};
use tracing::{error, info, warn};

/// Nodes that gossip a certificate they built as soon as it forms: the first
/// ones of the deal's submitter order ([`submit_rank`]). Every node aggregates
/// the partials it sees and most finish at about the same moment; if all
/// gossiped, each would receive ~N certificates per dispute. The others
/// gossip theirs when their submit slot comes (the ones before them did
/// not settle the deal) unless a verified certificate reached them from a
/// peer; a certificate received is forwarded by gossipsub, never published
/// again.
pub const CERTIFICATE_GOSSIPERS: usize = 2;

/// With aggregators, how long the second half of the first group of
/// aggregators (past the first `max(`[`CERTIFICATE_GOSSIPERS`]`, k / 2)` of
/// the submitter order, `k` the group) waits to gossip the certificate it
/// built. A certificate from a peer that verifies meanwhile (one pairing,
/// only while it waits) cancels it. The aggregators of a group finish at
/// about the same moment, each with other signers and so another message:
/// were all to gossip at once, each node would receive one flooded copy of
/// each; this way it receives the first half's, and the others' only if all
/// of those withhold or are late. Aggregators past the first group, which
/// hold partials only once members escalated, gossip at once: the first
/// group's withholding costs the escalation, not the stagger as well.
pub const CERTIFICATE_STAGGER: Duration = Duration::from_millis(250);

/// The deterministic submitter order keyed by `seed` (a dispute's
/// [`order_seed`]): `members` sorted by `keccak256(seed ‖ index)`. Returns
/// `me`'s rank (`members.len()` if absent). Every node computes the same
/// order from the committee and the seed alone, and the first submitter
/// rotates from dispute to dispute.
pub fn submit_rank(seed: &B256, members: &[u32], me: u32) -> usize {
    submit_order(seed, members).into_iter().position(|i| i == me).unwrap_or(members.len())
}

/// The seed of a dispute's submitter order (and so of its aggregators):
/// `keccak256(dealId ‖ orderEntropy)` (the announcement's `order_entropy`:
/// the `prevrandao` of the block after the one holding the `Disputed` log).
///
/// Who could choose it: the deal id hashes terms the buyer chooses (and
/// may grind offline); the block's hash is chosen by whoever builds the
/// block holding the challenge (a builder varying a header field tries a
/// placement per hash). The next block's `prevrandao` is the RANDAO mix
/// after the challenge's block: fixed by that block's proposer's reveal,
/// which no builder can vary and nobody else knows before the block is
/// out. A challenger colluding with proposers gets one draw per slot they
/// hold in its challenge window (include the challenge in that block or
/// not), not a search. On chains whose `mixHash` is not the beacon RANDAO
/// (rollups) the node takes the block's hash as the entropy (what the
/// sequencer builds), and a record without entropy (stored before it
/// existed) falls back to the block's hash too. What a placement buys is
/// bounded: the escalation's `⌈log₂(f / k + 1)⌉` rounds and the submitter
/// slots' `L + log₂ f`.
pub fn order_seed(a: &DisputeAnnouncement) -> B256 {
    let entropy = if a.order_entropy.is_zero() { &a.block_hash } else { &a.order_entropy };
    keccak256([a.deal_id.as_slice(), entropy.as_slice()].concat())
}

/// Submitters that send one per slot before the slots start to double.
pub const LINEAR_SUBMITTERS: usize = 8;

/// How long the submitter at `rank` waits once it holds a certificate: one
/// slot per rank for the first [`LINEAR_SUBMITTERS`] (so a `resolve` still
/// pending after a slot draws one more, not a crowd), then
/// `⌈log₂(rank − L + 2)⌉` more: the next one, two, four, … share a slot.
/// `f` members that hold the head of the order and never send (a dispute's
/// block hash ground for it) delay `resolve` by about `L + log₂ f` slots, not `f`
/// (341 at the head of 1,024: 16 slots). Up to `2ˢ⁻¹` members send in the
/// `s`-th slot past the linear ones, only when every one before failed (a
/// `resolve` that finds the deal settled is a success).
pub fn submit_delay(slot: Duration, rank: usize) -> Duration {
    let slots = if rank < LINEAR_SUBMITTERS {
        rank
    } else {
        let past = rank - LINEAR_SUBMITTERS + 1;
        LINEAR_SUBMITTERS - 1 + (usize::BITS - past.leading_zeros()) as usize
    };
    slot * slots as u32
}

/// `members` in the submitter order keyed by `seed` (see [`submit_rank`]).
pub fn submit_order(seed: &B256, members: &[u32]) -> Vec<u32> {
    let key = |i: &u32| {
        let mut pre = seed.to_vec();
        pre.extend_from_slice(&i.to_be_bytes());
        keccak256(pre)
    };
    let mut order = members.to_vec();
    order.sort_by_cached_key(key);
    order
}

impl<O: MessageOrigin> Engine<O> {
    /// A settlement seen on chain (`VerdictCommitted` carries the transaction).
    pub fn on_settled_log(&mut self, deal_id: B256, tx: Option<B256>, now: Instant) {
        self.settle(deal_id, tx, now);
    }

    /// `VerdictCommitted`: the deal settled by `tx` on a certificate for
    /// `commitment`. A node that saw the settlement before any certificate
    /// (or whose own signature was the only one it had) takes the certified
    /// outcome from the log; one it already holds is kept.
    pub fn on_verdict_log(
        &mut self,
        deal_id: B256,
        tx: B256,
        commitment: Option<&resolvd_proto::VerdictCommitment>,
        now: Instant,
    ) {
        self.settle(deal_id, Some(tx), now);
        let Some(c) = commitment.filter(|c| c.deal_id == deal_id) else { return };
        if let Some(d) = self.disputes.get_mut(&deal_id) {
            d.record.certified_outcome.get_or_insert(c.outcome);
        }
    }

    pub(crate) fn settle(&mut self, deal_id: B256, tx: Option<B256>, now: Instant) {
        let Some(d) = self.disputes.get_mut(&deal_id) else { return };
        if d.phase == Phase::Settled {
            if tx.is_some() && d.record.settled_by.is_none() {
                d.record.settled_by = tx;
            }
            return;
        }
        d.finish(Phase::Settled, now);
        if tx.is_some() {
            d.record.settled_by = tx;
        }
        let elapsed = now.saturating_duration_since(d.seen);
        d.record.settlement_ms = Some(elapsed.as_millis() as u64);
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
        d.submission.submitting = false;
        match result {
            SubmitResult::Sent { tx, gas } => {
                metrics::count(metrics, "sent");
                info!(target: "submitter", deal = %deal_id, %tx, gas, "resolve sent");
                d.record.resolve_tx = Some(tx);
                d.record.resolve_gas = Some(gas);
                d.submission.submit_at = None;
            }
            SubmitResult::AlreadyResolved => {
                metrics::count(metrics, "already_resolved");
                info!(target: "submitter", deal = %deal_id, "already resolved: nothing to send");
                d.submission.submit_at = None;
            }
            SubmitResult::Rejected(reason) => {
                metrics::count(metrics, "rejected");
                error!(target: "submitter", deal = %deal_id, %reason, "the escrow rejects this certificate: dropped, waiting for another");
                d.submission.submit_at = None;
                if let Some(qc) = d.submission.certificate.take() {
                    d.submission.rejected.insert(certificate_id(&qc));
                }
                // The slices collected here went to the first submitters
                // since the certificate: the aggregators get them in full.
                d.aggregators.resend_slices(now);
                d.record.certificate_non_signers = None;
                d.record.certified_outcome = None;
                d.record.last_error = Some(reason);
                if d.phase == Phase::Certified {
                    d.phase = if d.own.is_some() { Phase::Signed } else { Phase::Observing };
                }
            }
            SubmitResult::Failed(e) => {
                metrics::count(metrics, "error");
                d.submission.submit_backoff =
                    (d.submission.submit_backoff * 2).clamp(self.cfg.retry, MAX_BACKOFF);
                warn!(target: "submitter", deal = %deal_id, error = %e, retry_in = ?d.submission.submit_backoff, "resolve failed, will retry");
                d.submission.submit_at = Some(now + d.submission.submit_backoff);
            }
        }
    }

    /// Submits the certificates due. A certificate due now first takes in
    /// every signer verified since it formed (they are paid, and each
    /// non-signer costs gas).
    pub(crate) fn submit_due(&mut self, now: Instant) {
        let due: Vec<B256> = self
            .disputes
            .iter()
            .filter(|(_, d)| {
                !d.submission.submitting && d.submission.submit_at.is_some_and(|t| now >= t)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.widen_certificate(&id);
        }
        let mut submit = Vec::new();
        let mut missing = Vec::new();
        for (id, d) in &mut self.disputes {
            if !d.submission.submitting && d.submission.submit_at.is_some_and(|t| now >= t) {
                if let Some(qc) = &d.submission.certificate {
                    // The certificate was verified against this committee;
                    // if it was evicted since, it is loaded again first.
                    let Some(committee) = self.chain.committees.get(&qc.epoch) else {
                        missing.push(qc.epoch);
                        continue;
                    };
                    let non_signers = match committee.position_bitmap(&qc.non_signers) {
                        Ok(bitmap) => bitmap,
                        Err(e) => {
                            // Verified certificates name members only.
                            warn!(target: "pipeline", deal = %id, error = %e, "certificate names a non-member");
                            continue;
                        }
                    };
                    d.submission.submitting = true;
                    if !d.submission.certificate_gossiped && !d.submission.certificate_from_peer {
                        // The submitters before this one did not settle
                        // and no certificate reached this node: peers may
                        // lack one too.
                        d.submission.certificate_gossiped = true;
                        submit.push(Action::Publish(Gossip::Certificate(Box::new(qc.to_wire()))));
                    }
                    submit.push(Action::Submit {
                        deal_id: *id,
                        escrow: d.info.escrow,
                        certificate: Box::new(qc.clone()),
                        non_signers,
                    });
                }
            }
        }
        self.actions.extend(submit);
        for epoch in missing {
            self.load_committee(epoch);
        }
    }
}
