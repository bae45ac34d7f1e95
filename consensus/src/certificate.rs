//! Quorum certificates, signer aggregates, and the certificate builder.

use crate::{
    batch::{self, Item},
    Committee, Error, PublicKey, Result, Signature,
};
use alloy_primitives::{B256, U256};
use resolvd_proto::{
    wire::{self, SignedVerdict},
    VerdictCommitment, VerdictDomain,
};
use std::collections::{BTreeMap, BTreeSet};

/// A quorum certificate: every member of `epoch` signed `commitment` except
/// `non_signers`. This is what `Escrow.resolve` takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumCertificate {
    /// What was signed.
    pub commitment: VerdictCommitment,
    /// The committee epoch.
    pub epoch: u64,
    /// Members who did not sign, strictly ascending.
    pub non_signers: Vec<u32>,
    /// Aggregate signature of the signers.
    pub signature: Signature,
}

impl QuorumCertificate {
    /// Validates a wire certificate's signature encoding (shape only; use
    /// [`Self::verify`] against the committee).
    pub fn from_wire(w: &wire::QuorumCertificate) -> Result<Self> {
        Ok(Self {
            commitment: w.commitment,
            epoch: w.epoch,
            non_signers: w.non_signer_indices.clone(),
            signature: Signature::from_compressed(&w.aggregate_signature)?,
        })
    }

    /// The wire form.
    pub fn to_wire(&self) -> wire::QuorumCertificate {
        wire::QuorumCertificate {
            commitment: self.commitment,
            epoch: self.epoch,
            non_signer_indices: self.non_signers.clone(),
            aggregate_signature: self.signature.compress(),
        }
    }

    /// Verifies the certificate against its epoch's committee: indices,
    /// threshold, and one pairing check against the signers' aggregate key.
    /// Returns the signing stake.
    pub fn verify(&self, committee: &Committee, domain: &VerdictDomain) -> Result<U256> {
        if self.epoch != committee.epoch() {
            return Err(Error::WrongEpoch { expected: committee.epoch(), found: self.epoch });
        }
        let missing = committee.stake_of(&self.non_signers)?;
        let signed = committee.total_stake() - missing;
        if !committee.meets_threshold(signed) {
            return Err(Error::BelowThreshold {
                signed,
                total: committee.total_stake(),
                threshold: committee.threshold(),
            });
        }
        let signers = committee.complement(&self.non_signers)?;
        let key = PublicKey::aggregate(committee.members_at(&signers)?.iter().map(|m| &m.key))?;
        self.signature.verify(&key, &self.commitment.eip712_digest(domain))?;
        Ok(signed)
    }

    /// This certificate as an explicit signer aggregate (for evidence).
    pub fn attestation(&self, committee: &Committee) -> Result<Attestation> {
        Ok(Attestation {
            commitment: self.commitment,
            epoch: self.epoch,
            signers: committee.complement(&self.non_signers)?,
            signature: self.signature,
        })
    }
}

/// An aggregate signature over one commitment by an explicit, non-empty set of
/// signers. A single partial signature is an attestation of one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attestation {
    /// What was signed.
    pub commitment: VerdictCommitment,
    /// The committee epoch of the signer indices.
    pub epoch: u64,
    /// Signers, strictly ascending, non-empty.
    pub signers: Vec<u32>,
    /// Their aggregate signature.
    pub signature: Signature,
}

impl Attestation {
    /// One partial signature as an attestation (its signature already decoded).
    pub fn single(p: &SignedVerdict, signature: Signature) -> Self {
        Self { commitment: p.commitment, epoch: p.epoch, signers: vec![p.signer_index], signature }
    }

    /// Validates a wire aggregate's signature encoding.
    pub fn from_wire(w: &wire::SignerAggregate) -> Result<Self> {
        Ok(Self {
            commitment: w.commitment,
            epoch: w.epoch,
            signers: w.signer_indices.clone(),
            signature: Signature::from_compressed(&w.aggregate_signature)?,
        })
    }

    /// The wire form.
    pub fn to_wire(&self) -> wire::SignerAggregate {
        wire::SignerAggregate {
            commitment: self.commitment,
            epoch: self.epoch,
            signer_indices: self.signers.clone(),
            aggregate_signature: self.signature.compress(),
        }
    }

    /// Verifies the aggregate against its epoch's committee (one pairing check).
    pub fn verify(&self, committee: &Committee, domain: &VerdictDomain) -> Result<()> {
        if self.epoch != committee.epoch() {
            return Err(Error::WrongEpoch { expected: committee.epoch(), found: self.epoch });
        }
        if self.signers.is_empty() {
            return Err(Error::EmptyAggregate);
        }
        let key =
            PublicKey::aggregate(committee.members_at(&self.signers)?.iter().map(|m| &m.key))?;
        self.signature.verify(&key, &self.commitment.eip712_digest(domain))
    }
}

/// Why [`CertificateBuilder::on_partial`] did not queue a partial.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Queued {
    /// Queued for the next [`CertificateBuilder::process`].
    New,
    /// This signer's partial for this digest is already verified, or this
    /// very signature is already queued. (A different signature of the same
    /// signer and digest is queued too: a forged one waiting in the queue
    /// must not shut out the genuine one.)
    Duplicate,
}

/// What [`CertificateBuilder::process`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BuilderEvent {
    /// A partial verified and was added to its digest's group.
    Verified {
        /// The signer.
        signer: u32,
        /// The digest signed.
        digest: B256,
        /// The signature, decoded and subgroup-checked (callers need not
        /// decode it again).
        signature: Signature,
        /// The signature bytes as queued (which message this was).
        wire: [u8; 96],
    },
    /// A partial failed verification (penalise its sender).
    Invalid {
        /// The claimed signer.
        signer: u32,
        /// The digest it claimed to sign.
        digest: B256,
        /// The signature bytes as queued (which message this was).
        wire: [u8; 96],
    },
    /// A queued aggregate verified and was added to its digest's group.
    AggregateVerified(Box<Attestation>),
    /// A queued aggregate failed verification (penalise its sender).
    AggregateInvalid(Box<Attestation>),
    /// A queued aggregate would not be taken in by the time it was processed
    /// (no signer added, or it overlaps one taken): it was not verified
    /// (neither valid nor invalid as far as this builder knows).
    AggregateCovered(Box<Attestation>),
    /// A digest reached the threshold: here is its certificate (emitted once).
    Certificate(Box<QuorumCertificate>),
}

#[derive(Debug)]
struct Group {
    commitment: VerdictCommitment,
    /// Verified partials, by signer.
    signers: BTreeMap<u32, Signature>,
    /// Verified aggregates taken in, pairwise disjoint. An aggregate is
    /// taken only if it adds a signer and every one taken before either
    /// misses it or lies inside it (then it is replaced): the signers a
    /// certificate takes in only grow, and a digest holds at most one
    /// aggregate per signer.
    aggregates: Vec<(Vec<u32>, Signature)>,
    /// Signers inside a taken aggregate.
    in_aggregate: BTreeSet<u32>,
    /// Every signer a certificate takes in (a partial's or an aggregate's),
    /// and their stake.
    covered: BTreeSet<u32>,
    stake: U256,
    certified: bool,
}

impl Group {
    fn new(commitment: VerdictCommitment) -> Self {
        Self {
            commitment,
            signers: BTreeMap::new(),
            aggregates: Vec::new(),
            in_aggregate: BTreeSet::new(),
            covered: BTreeSet::new(),
            stake: U256::ZERO,
            certified: false,
        }
    }

    /// Whether an aggregate of `signers` (ascending) would be taken in: it
    /// adds a signer, and overlaps no taken aggregate it does not contain.
    fn takes(&self, signers: &[u32]) -> bool {
        signers.iter().any(|s| !self.covered.contains(s))
            && self.aggregates.iter().all(|(taken, _)| {
                let inside = taken.iter().filter(|t| signers.binary_search(t).is_ok()).count();
                inside == 0 || inside == taken.len()
            })
    }

    /// The signatures of a certificate over `covered`: the taken aggregates
    /// and the partials of the signers outside them.
    fn signatures(&self) -> Vec<&Signature> {
        self.aggregates
            .iter()
            .map(|(_, sig)| sig)
            .chain(
                self.signers
                    .iter()
                    .filter(|(s, _)| !self.in_aggregate.contains(s))
                    .map(|(_, sig)| sig),
            )
            .collect()
    }
}

#[derive(Debug)]
struct Pending {
    digest: B256,
    commitment: VerdictCommitment,
    signer: u32,
    signature: Signature,
    wire: [u8; 96],
    /// Whether a verified partial joins its digest's group (else it is only
    /// verified: see [`CertificateBuilder::on_partial_uncounted`]).
    count: bool,
}

/// Collects partial signatures for one epoch and domain, verifies them in
/// batches, groups them by digest, and yields a certificate per digest that
/// reaches the threshold.
///
/// A state machine in the STYLE.md sense: [`Self::on_partial`] does the cheap
/// checks and queues; [`Self::process`] does the pairing work (call it from a
/// blocking worker) and returns typed events.
#[derive(Debug)]
pub struct CertificateBuilder {
    committee: Committee,
    domain: VerdictDomain,
    groups: BTreeMap<B256, Group>,
    pending: Vec<Pending>,
    /// Aggregates waiting for [`Self::process`], with their digest.
    pending_aggregates: Vec<(B256, Attestation)>,
}

impl CertificateBuilder {
    /// A builder for `committee`'s epoch under `domain`.
    pub fn new(committee: Committee, domain: VerdictDomain) -> Self {
        Self {
            committee,
            domain,
            groups: BTreeMap::new(),
            pending: Vec::new(),
            pending_aggregates: Vec::new(),
        }
    }

    /// The committee.
    pub fn committee(&self) -> &Committee {
        &self.committee
    }

    /// Number of partials and aggregates waiting for [`Self::process`].
    pub fn pending(&self) -> usize {
        self.pending.len() + self.pending_aggregates.len()
    }

    /// Forgets every group and queued partial of `deal` (settled): memory
    /// stays bounded by the open deals.
    pub fn forget_deal(&mut self, deal: &B256) {
        self.groups.retain(|_, g| g.commitment.deal_id != *deal);
        self.pending.retain(|p| p.commitment.deal_id != *deal);
        self.pending_aggregates.retain(|(_, a)| a.commitment.deal_id != *deal);
    }

    /// Digest groups held (verified partials of open deals).
    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    /// Stake of the verified signers of `digest`.
    pub fn signed_stake(&self, digest: &B256) -> U256 {
        self.groups.get(digest).map_or(U256::ZERO, |g| g.stake)
    }

    /// A queued signer's member entry: membership was checked in `on_partial`.
    fn member(&self, index: u32) -> &crate::Member {
        let pos = self.committee.members().partition_point(|m| m.index < index);
        &self.committee.members()[pos]
    }

    fn key(&self, index: u32) -> &PublicKey {
        &self.member(index).key
    }

    /// Cheap checks (epoch, membership, signature encoding and subgroup,
    /// duplicates), then queues the partial. Errors mean a malformed or
    /// foreign partial: penalise the sender.
    pub fn on_partial(&mut self, p: &SignedVerdict) -> Result<Queued> {
        self.queue(p, true)
    }

    /// Like [`Self::on_partial`], but a partial that verifies is only
    /// reported ([`BuilderEvent::Verified`]), not added to its group: the
    /// caller decides later whether it counts ([`Self::count_verified`]).
    /// Commit-reveal uses this: a reveal counts only if its commitment came
    /// in time.
    pub fn on_partial_uncounted(&mut self, p: &SignedVerdict) -> Result<Queued> {
        self.queue(p, false)
    }

    /// Adds a partial that [`Self::process`] reported as verified (queued with
    /// [`Self::on_partial_uncounted`]) to its digest's group; the certificate
    /// if the group now reaches the threshold. A partial that is not a
    /// member's, or whose signature does not decode, is ignored (the caller
    /// only passes verified partials).
    pub fn count_verified(&mut self, p: &SignedVerdict) -> Option<QuorumCertificate> {
        if p.epoch != self.committee.epoch() || self.committee.member(p.signer_index).is_err() {
            return None;
        }
        let signature = Signature::from_compressed(&p.signature).ok()?;
        let digest = p.commitment.eip712_digest(&self.domain);
        self.add(digest, p.commitment, p.signer_index, signature);
        self.try_certify(&digest)
    }

    fn add(&mut self, digest: B256, commitment: VerdictCommitment, signer: u32, sig: Signature) {
        let stake = self.member(signer).stake;
        let group = self.groups.entry(digest).or_insert_with(|| Group::new(commitment));
        group.signers.insert(signer, sig);
        if group.covered.insert(signer) {
            group.stake += stake;
        }
    }

    /// Takes in a verified aggregate ([`Group::takes`] checked by the caller),
    /// replacing the taken ones inside it.
    fn add_aggregate(&mut self, digest: B256, a: &Attestation) {
        let stakes: Vec<U256> = a.signers.iter().map(|&s| self.member(s).stake).collect();
        let group = self.groups.entry(digest).or_insert_with(|| Group::new(a.commitment));
        group.aggregates.retain(|(taken, _)| a.signers.binary_search(&taken[0]).is_err());
        group.aggregates.push((a.signers.clone(), a.signature));
        for (&signer, stake) in a.signers.iter().zip(stakes) {
            group.in_aggregate.insert(signer);
            if group.covered.insert(signer) {
                group.stake += stake;
            }
        }
    }

    /// Cheap checks of an aggregate of several signers (epoch, membership,
    /// ascending signers), then queues it for [`Self::process`], which
    /// verifies it (one pairing) unless the signers it names are all
    /// covered by then. `Duplicate`: it would not be taken in (it adds no
    /// signer to what a certificate takes in now, or it overlaps an aggregate
    /// taken before without containing it), or this very aggregate is queued.
    pub fn on_aggregate(&mut self, a: &Attestation) -> Result<Queued> {
        if a.epoch != self.committee.epoch() {
            return Err(Error::WrongEpoch { expected: self.committee.epoch(), found: a.epoch });
        }
        if a.signers.is_empty() {
            return Err(Error::EmptyAggregate);
        }
        self.committee.check_indices(&a.signers)?;
        let digest = a.commitment.eip712_digest(&self.domain);
        let useless = self.groups.get(&digest).is_some_and(|g| !g.takes(&a.signers));
        if useless || self.pending_aggregates.iter().any(|(_, q)| q == a) {
            return Ok(Queued::Duplicate);
        }
        self.pending_aggregates.push((digest, a.clone()));
        Ok(Queued::New)
    }

    /// How many of `members` have a verified partial of `digest` (no
    /// signature work).
    pub fn verified_among(&self, digest: &B256, members: &[u32]) -> usize {
        self.groups
            .get(digest)
            .map_or(0, |g| members.iter().filter(|m| g.signers.contains_key(m)).count())
    }

    /// The verified partials of `digest` whose signers are in `members`,
    /// aggregated (a slice's contribution); `None` if there are none.
    pub fn aggregate_of(&self, digest: &B256, members: &[u32]) -> Option<Attestation> {
        let group = self.groups.get(digest)?;
        let mut signers: Vec<u32> =
            members.iter().copied().filter(|m| group.signers.contains_key(m)).collect();
        signers.sort_unstable();
        signers.dedup();
        let signature = Signature::aggregate(signers.iter().map(|s| &group.signers[s])).ok()?;
        Some(Attestation {
            commitment: group.commitment,
            epoch: self.committee.epoch(),
            signers,
            signature,
        })
    }

    /// Verifies the queued aggregates, largest first, each on its own (one
    /// pairing), skipping those that would not be taken in by then.
    fn process_aggregates(&mut self, events: &mut Vec<BuilderEvent>, touched: &mut Vec<B256>) {
        let mut queue = std::mem::take(&mut self.pending_aggregates);
        queue.sort_by_key(|(_, a)| std::cmp::Reverse(a.signers.len()));
        for (digest, a) in queue {
            let useless = self.groups.get(&digest).is_some_and(|g| !g.takes(&a.signers));
            if useless {
                events.push(BuilderEvent::AggregateCovered(Box::new(a)));
            } else if a.verify(&self.committee, &self.domain).is_ok() {
                self.add_aggregate(digest, &a);
                if !touched.contains(&digest) {
                    touched.push(digest);
                }
                events.push(BuilderEvent::AggregateVerified(Box::new(a)));
            } else {
                events.push(BuilderEvent::AggregateInvalid(Box::new(a)));
            }
        }
    }

    fn queue(&mut self, p: &SignedVerdict, count: bool) -> Result<Queued> {
        if p.epoch != self.committee.epoch() {
            return Err(Error::WrongEpoch { expected: self.committee.epoch(), found: p.epoch });
        }
        self.committee.member(p.signer_index)?;
        let digest = p.commitment.eip712_digest(&self.domain);
        // A signer inside a taken aggregate is known too: its partial would
        // add nothing to a certificate (taken aggregates are never dropped
        // for smaller ones).
        let known = self.groups.get(&digest).is_some_and(|g| g.covered.contains(&p.signer_index))
            || self
                .pending
                .iter()
                .any(|q| q.digest == digest && q.signer == p.signer_index && q.wire == p.signature);
        if known {
            return Ok(Queued::Duplicate);
        }
        let signature = Signature::from_compressed(&p.signature)?;
        self.pending.push(Pending {
            digest,
            commitment: p.commitment,
            signer: p.signer_index,
            signature,
            wire: p.signature,
            count,
        });
        Ok(Queued::New)
    }

    /// Verifies every queued partial: one aggregate pairing check per digest
    /// with two or more partials (bisecting on failure), one randomised
    /// multi-pairing over the digests with a single partial. `seed` feeds the
    /// random scalars; pass fresh OS randomness.
    pub fn process(&mut self, seed: &[u8; 32]) -> Vec<BuilderEvent> {
        let mut by_digest: BTreeMap<B256, Vec<Pending>> = BTreeMap::new();
        for p in std::mem::take(&mut self.pending) {
            by_digest.entry(p.digest).or_default().push(p);
        }
        let mut events = Vec::new();
        let mut accepted: Vec<Pending> = Vec::new();
        let mut singles: Vec<Pending> = Vec::new();
        for (digest, batch) in by_digest {
            if batch.len() == 1 {
                singles.extend(batch);
                continue;
            }
            let invalid = {
                let items: Vec<Item<'_>> = batch
                    .iter()
                    .map(|p| Item { key: self.key(p.signer), signature: &p.signature })
                    .collect();
                batch::verify_same_digest(&digest, &items)
            };
            for (i, p) in batch.into_iter().enumerate() {
                if invalid.binary_search(&i).is_ok() {
                    events.push(BuilderEvent::Invalid { signer: p.signer, digest, wire: p.wire });
                } else {
                    accepted.push(p);
                }
            }
        }
        let invalid = {
            let items: Vec<(B256, Item<'_>)> = singles
                .iter()
                .map(|p| (p.digest, Item { key: self.key(p.signer), signature: &p.signature }))
                .collect();
            batch::verify_distinct(&items, seed)
        };
        for (i, p) in singles.into_iter().enumerate() {
            if invalid.binary_search(&i).is_ok() {
                events.push(BuilderEvent::Invalid {
                    signer: p.signer,
                    digest: p.digest,
                    wire: p.wire,
                });
            } else {
                accepted.push(p);
            }
        }
        let mut touched = Vec::new();
        self.process_aggregates(&mut events, &mut touched);
        for p in accepted {
            events.push(BuilderEvent::Verified {
                signer: p.signer,
                digest: p.digest,
                signature: p.signature,
                wire: p.wire,
            });
            if !p.count {
                continue;
            }
            self.add(p.digest, p.commitment, p.signer, p.signature);
            if !touched.contains(&p.digest) {
                touched.push(p.digest);
            }
        }
        for digest in touched {
            if let Some(qc) = self.try_certify(&digest) {
                events.push(BuilderEvent::Certificate(Box::new(qc)));
            }
        }
        events
    }

    /// Whether verifying the queue could certify `digest` now: no certificate
    /// was emitted for it yet, and the stake of its verified signers plus that
    /// of its queued partials meets the threshold. A caller batching the
    /// pairing work verifies at once when this holds, and can wait to batch
    /// more partials when it does not.
    pub fn could_certify(&self, digest: &B256) -> bool {
        let group = self.groups.get(digest);
        if group.is_some_and(|g| g.certified) {
            return false;
        }
        let mut queued: BTreeSet<u32> = self
            .pending
            .iter()
            .filter(|p| p.digest == *digest)
            .map(|p| p.signer)
            .chain(
                self.pending_aggregates
                    .iter()
                    .filter(|(d, _)| d == digest)
                    .flat_map(|(_, a)| a.signers.iter().copied()),
            )
            .collect();
        if let Some(g) = group {
            queued.retain(|s| !g.covered.contains(s));
        }
        let queued: U256 = queued.iter().map(|&s| self.member(s).stake).sum();
        self.committee.meets_threshold(group.map_or(U256::ZERO, |g| g.stake) + queued)
    }

    /// Verified signers in `digest`'s group (in partials or aggregates).
    pub fn signer_count(&self, digest: &B256) -> usize {
        self.groups.get(digest).map_or(0, |g| g.covered.len())
    }

    /// A certificate over every verified signer of `digest` now (not only
    /// those that reached the threshold first), verified before it is
    /// returned; `None` below the threshold. A submitter uses it so that a
    /// signer whose partial came after the threshold is still in the
    /// certificate (and paid), and each non-signer fewer saves `resolve` gas.
    pub fn best_certificate(&self, digest: &B256) -> Option<QuorumCertificate> {
        let group = self.groups.get(digest)?;
        if !self.committee.meets_threshold(group.stake) {
            return None;
        }
        let signers = &group.covered;
        let signature = Signature::aggregate(group.signatures()).ok()?;
        let non_signers: Vec<u32> = self
            .committee
            .members()
            .iter()
            .map(|m| m.index)
            .filter(|i| !signers.contains(i))
            .collect();
        let qc = QuorumCertificate {
            commitment: group.commitment,
            epoch: self.committee.epoch(),
            non_signers,
            signature,
        };
        qc.verify(&self.committee, &self.domain).ok()?;
        Some(qc)
    }

    /// A certificate for `digest` if its group reached the threshold and none
    /// was emitted yet. The certificate is verified once before it is returned.
    fn try_certify(&mut self, digest: &B256) -> Option<QuorumCertificate> {
        if self.groups.get(digest)?.certified {
            return None;
        }
        let qc = self.best_certificate(digest)?;
        self.groups.get_mut(digest)?.certified = true;
        Some(qc)
    }
}
