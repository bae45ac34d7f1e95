//! Restart: disputes and evidence read back from the store.

use super::*;
use alloy_primitives::Bytes;
use resolvd_consensus::{Attestation, QuorumCertificate};
use resolvd_proto::wire::{DisputeAnnouncement, PartialCommit, SignedVerdict};
use std::time::{Duration, Instant};
use tracing::{info, warn};

impl<O: MessageOrigin> Engine<O> {
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
        let Some(domain) = self.identity.domains.get(&info.escrow).cloned() else {
            warn!(target: "node", deal = %deal_id, escrow = %info.escrow, "stored dispute of an escrow this node no longer serves: not restored");
            return;
        };
        let mut d = self.new_dispute(info, now);
        let me = self.my_index(d.info.epoch);
        let mut resend = None;
        if let Some(own) =
            partials.iter().find(|p| Some(p.signer_index) == me && p.epoch == d.info.epoch)
        {
            resend = self.restore_own(&mut d, own, &domain);
        }
        if d.reveal.reveal_window.is_some() {
            // Stored partials were counted before the restart: their
            // commitments were in time.
            for p in &partials {
                d.record_commit(p.signer_index, PartialCommit::commit_of(p), now);
            }
        }
        if let Some(qc) = certificate {
            self.restore_certificate(&mut d, qc, &domain, now);
        }
        let phase = d.phase;
        // With commit-reveal the own partial is queued when it is revealed
        // (queued now, it would open the reveal phase at once).
        let unrevealed_own = d.reveal.reveal_window.is_some().then_some(me).flatten();
        self.disputes.insert(deal_id, d);
        if let Some(own) = resend {
            self.send_own(&deal_id, vec![Gossip::Verdict(own)], now);
        }
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
            self.intake.chain_confirming.insert(deal_id);
            self.push(Action::Confirm {
                announcement: Box::new(d.info),
                source: ConfirmSource::Chain,
                delay: Duration::ZERO,
            });
            return;
        }
        if self.disputes[&deal_id].info.order_entropy.is_zero() {
            // A record written before announcements carried the order's
            // entropy (or the block hash): ordered by the block's hash until
            // the chain names them (`on_confirmed`), re-asked until it does.
            info!(target: "node", deal = %deal_id, "restored dispute without its order entropy: reading it from the chain");
            self.intake.chain_confirming.insert(deal_id);
            self.push(Action::Confirm {
                announcement: Box::new(self.disputes[&deal_id].info.clone()),
                source: ConfirmSource::Chain,
                delay: Duration::ZERO,
            });
        }
        info!(target: "node", deal = %deal_id, ?phase, "restored dispute");
    }

    /// The own stored partial of a restored dispute: signed; to be sent again
    /// (returned), or (commit-reveal) signed again for its commitment.
    fn restore_own(
        &mut self,
        d: &mut Dispute,
        p: &SignedVerdict,
        domain: &VerdictDomain,
    ) -> Option<SignedVerdict> {
        d.record.commitment = Some(p.commitment);
        d.digest = Some(p.commitment.eip712_digest(domain));
        d.record.own_signature = Some(Bytes::copy_from_slice(&p.signature));
        d.phase = Phase::Signed;
        d.own = Some(p.clone());
        if d.reveal.reveal_window.is_some() {
            // Signed again (the same commitment: protection allows
            // it, BLS signing is deterministic) for a signed
            // commitment, which `on_signed` gossips; revealed when
            // the commit phase closes.
            self.push(Action::Sign {
                deal_id: d.info.deal_id,
                escrow: d.info.escrow,
                commitment: p.commitment,
                epoch: p.epoch,
                index: p.signer_index,
                commit: true,
            });
            None
        } else {
            Some(p.clone())
        }
    }

    /// A restored dispute's stored certificate, used only if it verifies
    /// against the committee (then submitted at once).
    fn restore_certificate(
        &self,
        d: &mut Dispute,
        qc: QuorumCertificate,
        domain: &VerdictDomain,
        now: Instant,
    ) {
        let valid = qc.epoch == d.info.epoch
            && matches_deal(&qc.commitment, &d.info)
            && self.chain.committees.get(&qc.epoch).is_some_and(|c| qc.verify(c, domain).is_ok());
        if valid {
            d.phase = Phase::Certified;
            d.submission.submit_at = Some(now);
            d.record.certificate_non_signers = Some(qc.non_signers.clone());
            d.record.certified_outcome = Some(qc.commitment.outcome);
            d.submission.certificate = Some(qc);
        } else {
            warn!(target: "node", deal = %d.info.deal_id, "stored certificate does not verify against the committee: dropped");
        }
    }

    /// Evidence read back from a file after a restart.
    pub fn restore_evidence(&mut self, first: Attestation, second: Attestation, now: Instant) {
        match self.verify_evidence(first, second) {
            Ok((ev, escrow)) => {
                self.on_evidence(ev, escrow, true, now);
            }
            Err(error) => warn!(target: "slasher", %error, "invalid evidence file"),
        }
    }
}
