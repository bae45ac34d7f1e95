//! Content, anchor, replay and signing of a dispute this node works on.

use super::*;
use alloy_primitives::{Bytes, B256};
use resolvd_proto::{
    decode_committed,
    wire::{DisputeAnnouncement, PartialCommit, SignedVerdict},
    DeliveryV1, ReexecRequestV1, ReexecVerdict, VerdictEnvelopeV1,
};
use std::time::Instant;
use tracing::{debug, error, info, warn};

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

impl<O: MessageOrigin> Engine<O> {
    /// Content was added to the store (from a peer, the chain or the API):
    /// fetching disputes look again.
    pub fn on_content_stored(&mut self, now: Instant) {
        let ids: Vec<B256> = self
            .disputes
            .iter_mut()
            .filter(|(_, d)| d.phase == Phase::Fetching)
            .map(|(id, d)| {
                d.next_attempt = now;
                *id
            })
            .collect();
        for id in ids {
            self.advance(id, now);
        }
    }

    pub(crate) fn advance(&mut self, deal_id: B256, now: Instant) {
        let Some(d) = self.disputes.get_mut(&deal_id) else { return };
        if d.phase != Phase::Fetching || d.gathering || now < d.next_attempt {
            return;
        }
        if !self.chain.committees.contains_key(&d.info.epoch) {
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
        if d.phase != Phase::Fetching {
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
                    d.phase = Phase::Replaying;
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
        if d.phase != Phase::Fetching {
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
        d.record.anchor = Some(status.clone());
        match status {
            AnchorStatus::Final => {
                metrics::count(&self.metrics.anchors, "final");
                d.phase = Phase::Replaying;
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
                d.phase = Phase::AnchorRejected;
                d.record.last_error = Some(reason);
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
        if d.phase != Phase::Replaying {
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
        let Some(domain) = self.identity.domains.get(&d.info.escrow) else { return };
        let digest = commitment.eip712_digest(domain);
        d.record.commitment = Some(commitment);
        d.digest = Some(digest);
        d.record.last_error = None;
        d.backoff = FIRST_BACKOFF;
        info!(target: "pipeline", deal = %deal_id, outcome = ?commitment.outcome, %digest, "replayed");
        if let Some(qc) = &d.submission.certificate {
            if qc.commitment != commitment {
                error!(target: "pipeline", deal = %deal_id, certified = ?qc.commitment.outcome, replayed = ?commitment.outcome, "ALARM: a certificate certifies a commitment this node's replay does not reproduce");
            }
        }
        let (epoch, escrow, commit) =
            (d.info.epoch, d.info.escrow, d.reveal.reveal_window.is_some());
        let has_certificate = d.submission.certificate.is_some();
        self.push(Action::PersistEnvelope(Box::new(envelope)));
        match self.my_index(epoch) {
            Some(index) => {
                self.push(Action::Sign { deal_id, escrow, commitment, epoch, index, commit })
            }
            None => {
                if let Some(d) = self.disputes.get_mut(&deal_id) {
                    d.phase = if has_certificate { Phase::Certified } else { Phase::Observing };
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
            d.record.own_signature = Some(Bytes::copy_from_slice(&partial.signature));
            d.own = Some(partial.clone());
        } else if d.own.as_ref() != Some(&partial) {
            // Only fault injection produces a second signature.
            #[cfg(feature = "fault-injection")]
            {
                if !d.extra.contains(&partial) {
                    d.extra.push(partial.clone());
                }
                let unrevealed = d.reveal.reveal_window.is_some() && !d.reveal.revealed;
                if d.reveal.reveal_window.is_some() && unrevealed {
                    // Revealed with the own partial.
                    return;
                }
            }
            #[cfg(not(feature = "fault-injection"))]
            {
                error!(target: "pipeline", deal = %deal_id, "a second, different own signature: not published");
                return;
            }
        }
        if d.phase == Phase::Replaying {
            d.phase =
                if d.submission.certificate.is_some() { Phase::Certified } else { Phase::Signed };
        }
        d.last_publish = now;
        let commit = commit.filter(|c| c.opens_to(&partial));
        if d.reveal.reveal_window.is_some() && d.own.as_ref() == Some(&partial) {
            match commit {
                Some(commit) => {
                    // Commit now; the partial itself once the commit phase closes.
                    if d.reveal.own_commit_at.is_none() {
                        d.reveal.own_commit_at = Some(now);
                        d.reveal.own_commit = Some(commit);
                        d.record_commit(commit.signer_index, commit.commit, now);
                        debug!(target: "pipeline", deal = %deal_id, commit = %commit.commit, "committed to the partial");
                        // Gossiped: every member needs the commitments to
                        // know when the commit phase closes. With
                        // aggregators, also sent straight to them: a member
                        // that saw it on gossip may reveal to them in one
                        // hop, before it crossed the mesh to them, and the
                        // commitment would be late there.
                        self.push(Action::Publish(Gossip::Commit(commit)));
                        if self.aggregating() {
                            self.send_own(&deal_id, vec![Gossip::Commit(commit)], now);
                        }
                    }
                    self.maybe_reveal(deal_id, now);
                    return;
                }
                None => {
                    error!(target: "pipeline", deal = %deal_id, "no signed commitment for the partial: revealing it at once");
                    d.reveal.revealed = true;
                }
            }
        }
        self.send_own(&deal_id, vec![Gossip::Verdict(partial.clone())], now);
        self.queue_partial(partial, None, now, now);
    }

    /// Fault injection (`byzantine = lazy`): sign `p`'s commitment as this
    /// node's own, without replaying.
    #[cfg(feature = "fault-injection")]
    pub fn copy_partial(&mut self, p: &SignedVerdict) {
        let deal_id = p.commitment.deal_id;
        let Some(d) = self.disputes.get(&deal_id) else { return };
        let (escrow, epoch, commit) =
            (d.info.escrow, d.info.epoch, d.reveal.reveal_window.is_some());
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
            .filter(|d| !d.phase.is_final())
            .filter_map(|d| {
                let c = self.chain.committees.get(&d.info.epoch)?;
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
            d.phase = Phase::Refused;
            d.record.last_error = Some(reason);
        }
    }

    /// Retries the fetching disputes whose backoff passed.
    pub(crate) fn retry_fetches(&mut self, now: Instant) {
        let due: Vec<B256> = self
            .disputes
            .iter()
            .filter(|(_, d)| d.phase == Phase::Fetching && !d.gathering && now >= d.next_attempt)
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.advance(id, now);
        }
    }
}
