//! Committees: which epochs load, their retries and eviction.

use super::*;
use alloy_primitives::B256;
use resolvd_consensus::{CertificateBuilder, Committee};
use std::{collections::HashSet, time::Instant};
use tracing::{debug, error, info, warn};

/// The chain as this node knows it: its head, the epochs that exist, and
/// their committees (loaded, loading, retried, in load order).
#[derive(Default)]
pub(crate) struct ChainView {
    /// Newest epoch known to exist at a confirmed block.
    pub(crate) current_epoch: u64,
    /// Latest chain head and its timestamp (chain time decides expiry).
    pub(crate) head: u64,
    pub(crate) chain_time: u64,
    pub(crate) committees: BTreeMap<u64, Committee>,
    pub(crate) loading: HashSet<u64>,
    /// Committee loads that failed, and when to try again.
    pub(crate) committee_retry: BTreeMap<u64, Instant>,
    /// Order in which committees were loaded (for eviction).
    pub(crate) committee_order: VecDeque<u64>,
    /// The commit-reveal window each epoch pins (given with its committee).
    pub(crate) commit_reveal: BTreeMap<u64, Option<Duration>>,
}

impl<O: MessageOrigin> Engine<O> {
    /// The chain says `epoch` exists at a confirmed block (at start, or an
    /// `EpochStarted` log): its committee may be loaded.
    pub fn on_epoch(&mut self, epoch: u64) {
        if epoch > self.chain.current_epoch {
            self.chain.current_epoch = epoch;
        }
        self.load_committee(epoch);
    }

    pub(crate) fn load_committee(&mut self, epoch: u64) {
        if epoch == 0
            || epoch > self.chain.current_epoch
            || self.chain.committees.contains_key(&epoch)
            || !self.chain.loading.insert(epoch)
        {
            return;
        }
        self.push(Action::LoadCommittee(epoch));
    }

    /// A committee load finished.
    pub fn on_committee(&mut self, epoch: u64, result: Result<Committee, String>, now: Instant) {
        self.chain.loading.remove(&epoch);
        match result {
            Ok(committee) if committee.epoch() == epoch => {
                info!(target: "chain", epoch, members = committee.len(), "committee loaded");
                self.add_committee(committee, now);
            }
            Ok(committee) => {
                error!(target: "chain", epoch, got = committee.epoch(), "committee of the wrong epoch");
                self.chain.committee_retry.insert(epoch, now + self.cfg.retry);
            }
            Err(error) => {
                warn!(target: "chain", epoch, %error, "cannot load committee: retrying");
                self.chain.committee_retry.insert(epoch, now + self.cfg.retry);
            }
        }
        self.retry_waiting_evidence(now);
    }

    /// Epochs whose committees must stay loaded: the current one, those of
    /// the disputes in memory and of pending slashings, and those the
    /// waiting evidence names.
    pub(crate) fn epochs_in_use(&self) -> HashSet<u64> {
        let mut keep: HashSet<u64> = self.disputes.values().map(|d| d.info.epoch).collect();
        keep.insert(self.chain.current_epoch);
        keep.extend(
            self.slasher
                .slashes
                .iter()
                .flat_map(|t| [t.request.first.epoch, t.request.second.epoch]),
        );
        if let Some((e, _)) = &self.slasher.evidence_waiting {
            keep.extend([e.first.epoch, e.second.epoch]);
        }
        keep
    }

    /// Evicts committees no dispute, slashing or waiting evidence needs,
    /// beyond [`MAX_SPARE_COMMITTEES`] (oldest loaded first).
    pub(crate) fn evict_committees(&mut self) {
        if self.chain.committees.len() <= MAX_SPARE_COMMITTEES {
            return;
        }
        let keep = self.epochs_in_use();
        let mut spare = self.chain.committee_order.iter().filter(|e| !keep.contains(e)).count();
        let mut evict = Vec::new();
        for e in &self.chain.committee_order {
            if spare <= MAX_SPARE_COMMITTEES {
                break;
            }
            if !keep.contains(e) {
                evict.push(*e);
                spare -= 1;
            }
        }
        for epoch in evict {
            debug!(target: "chain", epoch, "committee evicted");
            self.chain.committees.remove(&epoch);
            self.chain.commit_reveal.remove(&epoch);
            self.chain.committee_order.retain(|e| *e != epoch);
            self.builders.retain(|(_, e), _| *e != epoch);
            for conflict in self.slasher.conflicts.values_mut() {
                conflict.remove_committee(epoch);
            }
        }
    }

    /// Makes a committee known (a committee of an epoch that exists is final:
    /// the first one loaded is kept).
    pub fn add_committee(&mut self, committee: Committee, now: Instant) {
        let epoch = committee.epoch();
        if self.chain.committees.contains_key(&epoch) {
            return;
        }
        self.chain.current_epoch = self.chain.current_epoch.max(epoch);
        for conflict in self.slasher.conflicts.values_mut() {
            conflict.add_committee(committee.clone());
        }
        for (escrow, domain) in &self.identity.domains {
            self.builders.insert(
                (*escrow, epoch),
                CertificateBuilder::new(committee.clone(), domain.clone()),
            );
        }
        self.chain.committees.insert(epoch, committee);
        self.chain.committee_order.push_back(epoch);
        let waiting: Vec<B256> = self
            .disputes
            .values()
            .filter(|d| d.info.epoch == epoch)
            .map(|d| d.info.deal_id)
            .collect();
        for deal_id in waiting {
            self.release_early_commits(&deal_id, now);
            self.release_buffered(&deal_id, now);
            self.release_early_aggregates(&deal_id, now);
            self.advance(deal_id, now);
        }
    }

    /// Retries the committee loads that failed, once due.
    pub(crate) fn retry_committees(&mut self, now: Instant) {
        let due: Vec<u64> = self
            .chain
            .committee_retry
            .iter()
            .filter(|(_, t)| now >= **t)
            .map(|(e, _)| *e)
            .collect();
        for epoch in due {
            self.chain.committee_retry.remove(&epoch);
            self.load_committee(epoch);
        }
    }
}
