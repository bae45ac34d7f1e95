//! Equivocation detection: two signed commitments for one deal.
//!
//! Evidence is two [`Attestation`]s over different commitments for the same
//! `dealId` whose signer sets intersect (by key, so epochs may differ). Every
//! signer in the intersection provably signed twice and is slashable, at most
//! once per deal. Signing a commitment that differs from the one that settled
//! (dissent) is never evidence: only a signer's own two signatures are.

use crate::{Attestation, Committee, Error, PublicKey, Result};
use alloy_primitives::B256;
use resolvd_proto::{wire, VerdictDomain};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Slashable evidence of equivocation, verified, ready for
/// `ResolverRegistry.slashEquivocation`.
///
/// The pair is in canonical order (by `hashStruct` of the commitment, lower
/// first), whatever order it was seen in: detectors that saw the same two
/// attestations make byte-identical evidence, one gossip message network-wide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConflictEvidence {
    /// The attestation whose commitment has the lower `hashStruct`.
    pub first: Attestation,
    /// The other, over a different commitment for the same deal.
    pub second: Attestation,
    /// Keys in both signer sets: the resolvers this evidence slashes.
    pub equivocators: Vec<PublicKey>,
}

impl ConflictEvidence {
    /// The wire form.
    pub fn to_wire(&self) -> wire::ConflictEvidence {
        wire::ConflictEvidence { first: self.first.to_wire(), second: self.second.to_wire() }
    }

    /// Checks evidence received from anyone: the same deal, different
    /// commitments, both aggregates valid against their epochs, and a
    /// non-empty intersection. `committees` must hold both epochs.
    pub fn verify(
        first: Attestation,
        second: Attestation,
        committees: &BTreeMap<u64, Committee>,
        domain: &VerdictDomain,
    ) -> Result<Self> {
        if first.commitment.deal_id != second.commitment.deal_id {
            return Err(Error::NotAConflict { reason: "different deals" });
        }
        if first.commitment == second.commitment {
            return Err(Error::NotAConflict { reason: "same commitment" });
        }
        let (first, second) = canonical(first, second);
        let c1 = committee(committees, first.epoch)?;
        let c2 = committee(committees, second.epoch)?;
        first.verify(c1, domain)?;
        second.verify(c2, domain)?;
        let equivocators = intersection(&first, c1, &second, c2)?;
        if equivocators.is_empty() {
            return Err(Error::NotAConflict { reason: "no common signer" });
        }
        Ok(Self { first, second, equivocators })
    }
}

/// The pair in evidence order: the commitment with the lower `hashStruct` first.
fn canonical(a: Attestation, b: Attestation) -> (Attestation, Attestation) {
    if b.commitment.struct_hash() < a.commitment.struct_hash() {
        (b, a)
    } else {
        (a, b)
    }
}

fn committee(committees: &BTreeMap<u64, Committee>, epoch: u64) -> Result<&Committee> {
    committees.get(&epoch).ok_or(Error::InvalidCommittee { reason: "unknown epoch" })
}

fn keys(a: &Attestation, c: &Committee) -> Result<Vec<PublicKey>> {
    a.signers.iter().map(|&i| c.member(i).map(|m| m.key)).collect()
}

fn intersection(
    a: &Attestation,
    ca: &Committee,
    b: &Attestation,
    cb: &Committee,
) -> Result<Vec<PublicKey>> {
    let kb: BTreeSet<[u8; 48]> = keys(b, cb)?.iter().map(PublicKey::compress).collect();
    Ok(keys(a, ca)?.into_iter().filter(|k| kb.contains(&k.compress())).collect())
}

/// Watches attestations (partials and certificates) and reports equivocations.
///
/// Attestations are stored as received (cheaply); both sides are verified
/// only when they conflict, so evidence is always valid on-chain.
#[derive(Debug)]
pub struct ConflictDetector {
    domain: VerdictDomain,
    committees: BTreeMap<u64, Committee>,
    by_deal: HashMap<B256, Vec<Attestation>>,
    reported: BTreeSet<(B256, [u8; 48])>,
}

impl ConflictDetector {
    /// A detector for `domain` (one escrow).
    pub fn new(domain: VerdictDomain) -> Self {
        Self {
            domain,
            committees: BTreeMap::new(),
            by_deal: HashMap::new(),
            reported: BTreeSet::new(),
        }
    }

    /// Makes an epoch's committee known.
    pub fn add_committee(&mut self, committee: Committee) {
        self.committees.insert(committee.epoch(), committee);
    }

    /// Forgets the committee of `epoch` (evicted by the caller: no open
    /// deal of that epoch is held).
    pub fn remove_committee(&mut self, epoch: u64) {
        self.committees.remove(&epoch);
    }

    /// Forgets every attestation and report of `deal` (a settled deal whose
    /// slashing window the caller no longer watches): memory stays bounded.
    pub fn forget_deal(&mut self, deal: &B256) {
        self.by_deal.remove(deal);
        self.reported.retain(|(d, _)| d != deal);
    }

    /// Records `attestation` and returns evidence against every signer that
    /// signed a different commitment for the same deal and was not reported
    /// for that deal before. An invalid attestation is dropped when checked.
    pub fn on_attestation(&mut self, attestation: Attestation) -> Result<Vec<ConflictEvidence>> {
        let deal = attestation.commitment.deal_id;
        let c_new = committee(&self.committees, attestation.epoch)?;
        c_new.check_indices(&attestation.signers)?;
        let mut found = Vec::new();
        let mut new_checked = false;
        for old in self.by_deal.get(&deal).into_iter().flatten() {
            if old.commitment == attestation.commitment {
                continue;
            }
            let c_old = committee(&self.committees, old.epoch)?;
            let fresh: Vec<PublicKey> = intersection(old, c_old, &attestation, c_new)?
                .into_iter()
                .filter(|k| !self.reported.contains(&(deal, k.compress())))
                .collect();
            if fresh.is_empty() {
                continue;
            }
            if !new_checked {
                attestation.verify(c_new, &self.domain)?;
                new_checked = true;
            }
            if old.verify(c_old, &self.domain).is_err() {
                continue;
            }
            let (first, second) = canonical(old.clone(), attestation.clone());
            found.push(ConflictEvidence { first, second, equivocators: fresh });
        }
        for e in &found {
            for k in &e.equivocators {
                self.reported.insert((deal, k.compress()));
            }
        }
        let list = self.by_deal.entry(deal).or_default();
        if !list.contains(&attestation) {
            list.push(attestation);
        }
        Ok(found)
    }
}
