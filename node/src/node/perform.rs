//! How the node performs the engine's actions: chain reads and transactions,
//! anchor checks and replays are spawned and answer through the loop's
//! channel; content gathering, signing, gossip and store writes happen in
//! place.

use super::{slash, submit, Internal, Node};
use crate::{
    chain::{Chain, ChainError},
    dispute::{gather, Action, ConfirmSource, Confirmation, SlashRequest},
    faults::Perform,
};
use alloy_primitives::B256;
use resolvd_proto::{
    wire::{DisputeAnnouncement, WireMessage},
    Canonical, ReexecRequestV1,
};
use resolvd_replay::EvmBackend;
use std::time::{Duration, Instant};
use tracing::{error, warn};

impl Node {
    pub(super) fn perform(&mut self, action: Action) {
        let now = Instant::now();
        let delay = match self.faults.before_action(&action, &mut self.engine) {
            Perform::After(delay) => delay,
            Perform::Skip => return,
        };
        match action {
            Action::Confirm { announcement, source, delay } => {
                self.spawn_confirm(announcement, source, delay);
            }
            Action::CheckAnchor(request, anchor) => {
                let (anchors, tx) = (self.replayer.anchors.clone(), self.inbox.tx.clone());
                tokio::spawn(async move {
                    let result = anchors.check(&anchor).await.map_err(|e| e.to_string());
                    let _ = tx.send(Internal::AnchorChecked { request, result });
                });
            }
            Action::LoadCommittee(epoch) => self.spawn_committee_load(epoch),
            Action::Gather(info) => self.gather(&info, now),
            Action::Fetch { hash, tag } => self.content.fetch(&mut self.swarm, hash, tag),
            Action::Replay(request) => self.spawn_replay(request, delay),
            Action::Sign { deal_id, escrow, commitment, epoch, index, commit } => {
                let domain = self.chain.for_escrow(escrow).domain();
                self.sign(&domain, deal_id, commitment, epoch, index, commit, now);
            }
            Action::Publish(gossip) => {
                self.publish(gossip);
            }
            Action::Send { epoch, to, messages } => self.send_direct(epoch, &to, messages),
            Action::Report { origin, topic, acceptance } => {
                self.report(&origin, topic, crate::dispute::acceptance(acceptance))
            }
            Action::Submit { deal_id, escrow, certificate, non_signers } => {
                let (chain, tx) = (self.chain.for_escrow(escrow), self.inbox.tx.clone());
                tokio::spawn(async move {
                    let result = submit(&chain, deal_id, &certificate, &non_signers).await;
                    let _ = tx.send(Internal::Submitted { deal_id, result });
                });
            }
            Action::Slash(request) => {
                let (chain, tx) = (self.chain.for_escrow(request.escrow), self.inbox.tx.clone());
                tokio::spawn(async move {
                    let SlashRequest { deal_id, first, second, resolvers, .. } = *request;
                    let result = slash(&chain, &resolvers, (&first).into(), (&second).into()).await;
                    let _ = tx.send(Internal::Slashed { deal_id, resolvers, result });
                });
            }
            persist => self.persist(persist),
        }
    }

    /// Asks the node's RPC whether an announced (or chain-seen) dispute is
    /// there, after `delay`.
    fn spawn_confirm(
        &self,
        mut announcement: Box<DisputeAnnouncement>,
        source: ConfirmSource,
        delay: Duration,
    ) {
        let chain = self.chain.for_escrow(announcement.escrow);
        let tx = self.inbox.tx.clone();
        let confirmations = self.cfg.chain.confirmations;
        tokio::spawn(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let result = match source {
                ConfirmSource::Gossip => {
                    chain.confirm_announcement(&announcement, confirmations).await
                }
                // A dispute restored from a record written before
                // announcements carried the block hash or the order's
                // entropy takes them from the chain: the order's seed, and
                // what it announces.
                ConfirmSource::Chain
                    if announcement.block_hash.is_zero()
                        || announcement.order_entropy.is_zero() =>
                {
                    still_disputed_in(&chain, &mut announcement).await.map(|(c, _)| c)
                }
                ConfirmSource::Chain => chain.still_disputed(announcement.deal_id).await,
                // The challenge may have been mined again in another block:
                // the order's seed follows it. Not mined again (a new
                // challenge is a new log the watcher brings): not disputed
                // by this one.
                ConfirmSource::Reorg => {
                    still_disputed_in(&chain, &mut announcement).await.map(|c| match c {
                        (Confirmation::Disputed, false) => Confirmation::NotDisputed,
                        (c, _) => c,
                    })
                }
            }
            .map_err(|e| e.to_string());
            let _ = tx.send(Internal::Confirmed { announcement, source, result });
        });
    }

    /// Reads epoch `epoch`'s committee at the confirmed block, with the
    /// commit-reveal setting the epoch pins (`commitRevealMsAt(epoch)`: the
    /// one its disputes run with; an owner change applies from the next
    /// epoch on).
    fn spawn_committee_load(&self, epoch: u64) {
        let (chain, tx) = (self.chain.clone(), self.inbox.tx.clone());
        let confirmations = self.cfg.chain.confirmations;
        tokio::spawn(async move {
            let result = async {
                let at = chain.confirmed(confirmations).await?.block;
                let reveal = chain.commit_reveal(epoch, Some(at)).await?;
                Ok::<_, crate::chain::ChainError>((chain.committee(epoch, Some(at)).await?, reveal))
            }
            .await
            .map_err(|e| e.to_string());
            let _ = tx.send(Internal::Committee { epoch, result });
        });
    }

    /// The dispute's content from the store (what is missing is fetched
    /// from peers by the engine's next actions).
    fn gather(&mut self, info: &DisputeAnnouncement, now: Instant) {
        let store = &self.store;
        let mut failed = None;
        let gathered = gather(info, |hash, tag| match store.get_content(hash) {
            Ok(Some((t, bytes))) if t == tag => Some(bytes),
            Ok(_) => None,
            Err(e) => {
                failed = Some(e);
                None
            }
        });
        if let Some(e) = failed {
            self.shared.metrics.store_errors.inc();
            error!(target: "store", deal = %info.deal_id, error = %e, "reading content");
        }
        self.engine.on_gathered(info.deal_id, gathered, now);
    }

    /// Replays on the bounded pool (`pipeline.replay_workers` at once).
    fn spawn_replay(&self, request: Box<ReexecRequestV1>, delay: Duration) {
        let deal_id = request.deal_id;
        let sem = self.replayer.permits.clone();
        let tx = self.inbox.tx.clone();
        let queue = self.shared.metrics.replay_queue.clone();
        queue.inc();
        tokio::spawn(async move {
            if !delay.is_zero() {
                warn!(target: "fault", deal = %deal_id, ?delay, "fault.replay_delay_ms: replaying late");
                tokio::time::sleep(delay).await;
            }
            let result = match sem.acquire_owned().await {
                Ok(_permit) => tokio::task::spawn_blocking(move || EvmBackend.verdict(&request))
                    .await
                    .map_err(|e| format!("replay worker: {e}"))
                    .and_then(|r| r.map_err(|e| format!("{e} ({})", e.code()))),
                Err(_) => Err("replay pool closed".into()),
            };
            queue.dec();
            let _ = tx.send(Internal::Replayed { deal_id, result });
        });
    }

    /// The store writes (and the evidence file): a failure is logged and
    /// counted, never fatal (see the module's store policy).
    fn persist(&mut self, action: Action) {
        match action {
            Action::PersistDispute(info, status) => {
                let r = self.store.put_dispute(&info, status);
                self.logged(r, "cannot persist dispute", Some(info.deal_id));
            }
            Action::PersistPartial(p) => {
                let r = self.store.put_partial(&p);
                self.logged(r, "cannot persist partial", Some(p.commitment.deal_id));
            }
            Action::PersistCertificate(qc) => {
                let r = self.store.put_certificate(&qc.to_wire());
                self.logged(r, "cannot persist certificate", Some(qc.commitment.deal_id));
            }
            Action::PersistEnvelope(envelope) => {
                let r = self.store.put_content("verdict-envelope", &envelope.to_canonical_bytes());
                self.logged(r.map(|_| ()), "cannot persist envelope", None);
            }
            Action::Prune(deal_id) => {
                let r = self.store.prune_deal(&deal_id);
                self.logged(r, "cannot prune a finished dispute", Some(deal_id));
            }
            Action::PersistSlashed { deal_id, resolver, tx } => {
                let r = self.store.put_slashed(&deal_id, resolver, tx);
                self.logged(r, "cannot record slashing", Some(deal_id));
            }
            Action::WriteEvidence(ev, resolvers) => {
                let deal_id = ev.first.commitment.deal_id;
                let dir = self.cfg.data_dir.join("evidence");
                let name = format!(
                    "{deal_id}-{}.hex",
                    resolvers.iter().map(u32::to_string).collect::<Vec<_>>().join("-")
                );
                let hex = alloy_primitives::hex::encode(ev.to_wire().encode_wire());
                let r = std::fs::create_dir_all(&dir)
                    .and_then(|()| std::fs::write(dir.join(&name), hex));
                self.logged(r, "cannot write evidence file", Some(deal_id));
            }
            other => error!(target: "node", action = ?other, "not a store action: dropped"),
        }
    }

    fn logged<E: std::fmt::Display>(&self, r: Result<(), E>, what: &str, deal: Option<B256>) {
        if let Err(e) = r {
            self.store_error(what, deal.as_ref(), &e);
        }
    }
}

/// Whether `a`'s deal is disputed at the latest block and, if so, whether
/// its challenge transaction holds `a`'s `Disputed` log in a block now
/// (whose number, hash and order entropy are then written into `a`). An
/// error while that block has no successor yet (retried).
pub(crate) async fn still_disputed_in(
    chain: &Chain,
    a: &mut DisputeAnnouncement,
) -> Result<(Confirmation, bool), ChainError> {
    let c = chain.still_disputed(a.deal_id).await?;
    if c != Confirmation::Disputed {
        return Ok((c, false));
    }
    let Some((number, hash)) = chain.dispute_block(a).await? else { return Ok((c, false)) };
    let entropy = chain.drawn_order_entropy(number, hash).await?;
    (a.block_number, a.block_hash, a.order_entropy) = (number, hash, entropy);
    Ok((c, true))
}
