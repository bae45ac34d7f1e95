//! The slasher: conflict detection, evidence (gossiped, found, restored) and
//! slash tasks.

use super::*;
use alloy_primitives::{keccak256, Address, B256};
use resolvd_consensus::{Attestation, ConflictEvidence};
use resolvd_proto::wire::WireMessage;
use std::time::{Duration, Instant};
use tracing::{debug, error, info, warn};

/// Conflict detection, evidence and slash tasks.
pub(crate) struct Slasher<O> {
    /// Per escrow: equivocation is two commitments under one domain.
    pub(crate) conflicts: BTreeMap<Address, ConflictDetector>,
    /// Evidence already handled (hash of its wire bytes; the newest ones).
    pub(crate) seen_evidence: Recent,
    /// Gossiped evidence waiting for the committees it names (at most one:
    /// committee loads for evidence are made one at a time).
    pub(crate) evidence_waiting: Option<(resolvd_proto::wire::ConflictEvidence, O)>,
    /// (deal, resolver) pairs already slashed on chain.
    pub(crate) slashed: HashSet<(B256, u32)>,
    pub(crate) slashes: Vec<SlashTask>,
}

impl<O> Slasher<O> {
    /// A slasher for the escrow of `domain` (more with [`Engine::serve`]).
    pub(crate) fn new(domain: &VerdictDomain) -> Self {
        Self {
            conflicts: BTreeMap::from([(
                domain.verifying_contract,
                ConflictDetector::new(domain.clone()),
            )]),
            seen_evidence: Recent::new(MAX_SEEN_EVIDENCE),
            evidence_waiting: None,
            slashed: HashSet::new(),
            slashes: Vec::new(),
        }
    }
}

pub(crate) struct SlashTask {
    pub(crate) request: SlashRequest,
    pub(crate) at: Instant,
    pub(crate) running: bool,
}

impl<O: MessageOrigin> Engine<O> {
    /// Evidence verified under the domain of one of the escrows served (it
    /// names none: the signatures decide), and that escrow.
    pub(crate) fn verify_evidence(
        &self,
        a: Attestation,
        b: Attestation,
    ) -> Result<(ConflictEvidence, Address), resolvd_consensus::Error> {
        let mut last = None;
        for (escrow, domain) in &self.identity.domains {
            match ConflictEvidence::verify(a.clone(), b.clone(), &self.chain.committees, domain) {
                Ok(ev) => return Ok((ev, *escrow)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("an engine serves at least one escrow"))
    }

    /// Gossiped evidence; `None`: held until the committees it names are
    /// loaded (then verified and reported). Committees are loaded for one
    /// evidence message at a time; evidence naming an unloaded epoch while
    /// another waits is ignored (its sender republishes valid evidence), so
    /// a flood of evidence naming old epochs makes at most one committee
    /// load at a time, each one judged (and a forgery rejected) before the next.
    pub(crate) fn on_gossiped_evidence(
        &mut self,
        e: resolvd_proto::wire::ConflictEvidence,
        origin: &O,
        now: Instant,
    ) -> Option<Validation> {
        let id = keccak256(e.encode_wire());
        if self.slasher.seen_evidence.contains(&id) {
            return Some(Validation::Ignore);
        }
        let oldest = self.chain.current_epoch.saturating_sub(self.cfg.evidence_epochs);
        let mut missing = Vec::new();
        for epoch in [e.first.epoch, e.second.epoch] {
            if epoch == 0 || epoch > self.chain.current_epoch || epoch < oldest {
                // Names an epoch that does not exist (yet) here, or is out of range.
                warn!(target: "p2p", peer = %origin.peer(), epoch, current = self.chain.current_epoch, "evidence names an epoch out of range");
                return Some(Validation::Reject);
            }
            if !self.chain.committees.contains_key(&epoch) && !missing.contains(&epoch) {
                missing.push(epoch);
            }
        }
        if !missing.is_empty() {
            if self.slasher.evidence_waiting.is_some() {
                metrics::count(&self.metrics.gossip_bounded, "evidence_busy");
                return Some(Validation::Ignore);
            }
            for epoch in missing {
                self.load_committee(epoch);
            }
            self.slasher.evidence_waiting = Some((e, origin.clone()));
            return None;
        }
        let parsed = Attestation::from_wire(&e.first)
            .and_then(|a| Ok((a, Attestation::from_wire(&e.second)?)));
        let (a, b) = match parsed {
            Err(err) => {
                warn!(target: "p2p", peer = %origin.peer(), error = %err, "bad evidence encoding");
                return Some(Validation::Reject);
            }
            Ok(pair) => pair,
        };
        self.slasher.seen_evidence.insert(id);
        Some(match self.verify_evidence(a, b) {
            // Forwarded only if it convicts someone not already convicted
            // here (whose evidence this node has published): copies of one
            // conviction, made by detectors that saw other attestations, do
            // not each cross the whole network.
            Ok((ev, escrow)) => {
                if self.on_evidence(ev, escrow, false, now) {
                    Validation::Accept
                } else {
                    debug!(target: "slasher", peer = %origin.peer(), "evidence convicts no one new");
                    Validation::Ignore
                }
            }
            Err(err) => {
                warn!(target: "p2p", peer = %origin.peer(), error = %err, "invalid evidence");
                Validation::Reject
            }
        })
    }

    /// The evidence waiting for committees, once they are loaded (or can no
    /// longer be: an epoch neither loaded, loading nor retried is given up).
    pub(crate) fn retry_waiting_evidence(&mut self, now: Instant) {
        let Some((e, _)) = &self.slasher.evidence_waiting else { return };
        let epochs = [e.first.epoch, e.second.epoch];
        let ready = epochs.iter().all(|ep| self.chain.committees.contains_key(ep));
        let hopeless = epochs.iter().any(|ep| {
            !self.chain.committees.contains_key(ep)
                && !self.chain.loading.contains(ep)
                && !self.chain.committee_retry.contains_key(ep)
        });
        if !ready && !hopeless {
            return;
        }
        let Some((e, origin)) = self.slasher.evidence_waiting.take() else { return };
        let acceptance = if ready {
            // Cannot wait again: every committee it names is loaded.
            self.on_gossiped_evidence(e, &origin, now).unwrap_or(Validation::Ignore)
        } else {
            Validation::Ignore
        };
        self.report(origin, Topic::Evidence, acceptance);
    }

    pub(crate) fn check_conflict(
        &mut self,
        escrow: Address,
        attestation: Attestation,
        now: Instant,
    ) {
        let Some(conflict) = self.slasher.conflicts.get_mut(&escrow) else { return };
        match conflict.on_attestation(attestation) {
            Ok(found) => {
                for ev in found {
                    self.on_evidence(ev, escrow, true, now);
                }
            }
            Err(e) => debug!(target: "slasher", error = %e, "attestation not usable as evidence"),
        }
    }

    /// Verified evidence: written, published and slashed unless every
    /// resolver it convicts is already slashed or being slashed here.
    /// Whether it convicted anyone new.
    pub(crate) fn on_evidence(
        &mut self,
        ev: ConflictEvidence,
        escrow: Address,
        detected_here: bool,
        now: Instant,
    ) -> bool {
        let deal_id = ev.first.commitment.deal_id;
        let Some(committee) = self.chain.committees.get(&ev.first.epoch) else { return false };
        let resolvers: Vec<u32> = ev
            .equivocators
            .iter()
            .filter_map(|k| committee.index_of(k))
            .filter(|i| !self.slasher.slashed.contains(&(deal_id, *i)))
            .filter(|i| {
                !self
                    .slasher
                    .slashes
                    .iter()
                    .any(|t| t.request.deal_id == deal_id && t.request.resolvers.contains(i))
            })
            .collect();
        if resolvers.is_empty() {
            return false;
        }
        self.slasher.seen_evidence.insert(keccak256(ev.to_wire().encode_wire()));
        self.metrics.equivocations.inc();
        error!(target: "slasher", deal = %deal_id, ?resolvers, detected_here, "equivocation");
        let honest: Vec<u32> = committee
            .members()
            .iter()
            .map(|m| m.index)
            .filter(|i| !resolvers.contains(i))
            .collect();
        let me = self.my_index(ev.first.epoch);
        // Keyed by the deal id: evidence may concern a dispute this node
        // never saw (no block to seed with), and members placed first that
        // never send only delay a slash the evidence keeps valid.
        let rank = me.map_or(honest.len(), |me| submit_rank(&deal_id, &honest, me));
        // A node outside the committee sends a slot after its last member.
        let outside = if me.is_none() { self.cfg.submit_slot } else { Duration::ZERO };
        self.push(Action::WriteEvidence(Box::new(ev.clone()), resolvers.clone()));
        self.push(Action::Publish(Gossip::Evidence(Box::new(ev.to_wire()))));
        self.slasher.slashes.push(SlashTask {
            request: SlashRequest {
                deal_id,
                escrow,
                first: ev.first,
                second: ev.second,
                resolvers,
            },
            at: now + submit_delay(self.cfg.submit_slot, rank) + outside,
            running: false,
        });
        true
    }

    /// The store says `resolver` was slashed for `deal_id` (at restore).
    pub fn mark_slashed(&mut self, deal_id: B256, resolver: u32) {
        self.slasher.slashed.insert((deal_id, resolver));
    }

    /// A resolver was slashed on chain (a `Slashed` log), for `deal_id`.
    pub fn on_slashed_log(&mut self, deal_id: B256, resolver: u32) {
        self.slasher.slashed.insert((deal_id, resolver));
        self.push(Action::PersistSlashed { deal_id, resolver, tx: B256::ZERO });
        for t in &mut self.slasher.slashes {
            if t.request.deal_id == deal_id {
                t.request.resolvers.retain(|r| *r != resolver);
            }
        }
        self.slasher.slashes.retain(|t| t.running || !t.request.resolvers.is_empty());
    }

    /// A slashing transaction finished.
    pub fn on_slashed(
        &mut self,
        deal_id: B256,
        resolvers: Vec<u32>,
        result: SlashResult,
        now: Instant,
    ) {
        match result {
            SlashResult::Done(tx) => {
                metrics::count(
                    &self.metrics.slashings,
                    if tx.is_some() { "sent" } else { "already_slashed" },
                );
                info!(target: "slasher", deal = %deal_id, ?resolvers, ?tx, "evidence dealt with");
                for &resolver in &resolvers {
                    self.slasher.slashed.insert((deal_id, resolver));
                    self.push(Action::PersistSlashed {
                        deal_id,
                        resolver,
                        tx: tx.unwrap_or_default(),
                    });
                }
                self.slasher.slashes.retain(|t| {
                    !(t.request.deal_id == deal_id && t.request.resolvers == resolvers)
                });
            }
            SlashResult::Failed(e) => {
                metrics::count(&self.metrics.slashings, "error");
                warn!(target: "slasher", deal = %deal_id, error = %e, "slashing failed, will retry");
                for t in &mut self.slasher.slashes {
                    if t.request.deal_id == deal_id && t.request.resolvers == resolvers {
                        t.running = false;
                        t.at = now + self.cfg.retry;
                    }
                }
            }
        }
    }

    /// Starts the slash tasks due.
    pub(crate) fn slash_due(&mut self, now: Instant) {
        let mut slash = Vec::new();
        for t in self.slasher.slashes.iter_mut().filter(|t| !t.running && now >= t.at) {
            t.running = true;
            slash.push(Action::Slash(Box::new(t.request.clone())));
        }
        self.actions.extend(slash);
    }
}
