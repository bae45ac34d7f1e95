//! Unit tests of the dispute engine: real BLS keys and signatures (blst),
//! no chain, no swarm, no clock — a rig drives the engine with events and
//! inspects the actions it queues (lighthouse's sync `TestRig` style).

use super::*;
use alloy_primitives::{keccak256, Address, Bytes, U256};
use resolvd_consensus::{
    Attestation, BuilderEvent, Committee, Member, QuorumCertificate, SecretKey, Signature,
};
use resolvd_proto::{
    wire::{DisputeAnnouncement, SignedVerdict},
    Canonical, ReexecRequestV1, ReexecVerdict, ReplayRecordV1, VerdictCommitment,
    VerdictEnvelopeV1,
};

const EPOCH: u64 = 3;

fn domain() -> VerdictDomain {
    VerdictDomain {
        name: "resolvd".into(),
        version: "1".into(),
        chain_id: 31337,
        verifying_contract: Address::repeat_byte(0xe5),
    }
}

fn key(i: usize) -> SecretKey {
    SecretKey::from_seed(&[i as u8 + 1; 32]).unwrap()
}

fn committee(epoch: u64, n: usize) -> Committee {
    let members = (0..n)
        .map(|i| Member {
            index: i as u32,
            operator: Address::repeat_byte(i as u8 + 1),
            key: key(i).public_key(),
            stake: U256::from(1000),
        })
        .collect();
    Committee::new(epoch, members, 6667).unwrap()
}

fn announcement(deal: u8) -> DisputeAnnouncement {
    DisputeAnnouncement {
        chain_id: 31337,
        escrow: Address::repeat_byte(0xe5),
        deal_id: B256::repeat_byte(deal),
        spec_hash: B256::repeat_byte(2),
        delivery_hash: B256::repeat_byte(3),
        prestate_anchor_hash: B256::repeat_byte(4),
        prestate_root: B256::repeat_byte(5),
        backend_id: B256::repeat_byte(6),
        backend_version_hash: B256::repeat_byte(7),
        epoch: EPOCH,
        resolve_deadline: 10_000,
        block_number: 10,
        tx_hash: B256::repeat_byte(0xaa),
        block_hash: B256::repeat_byte(0xbb),
        order_entropy: B256::repeat_byte(0xcc),
    }
}

fn envelope(a: &DisputeAnnouncement, outcome: ReexecVerdict) -> VerdictEnvelopeV1 {
    VerdictEnvelopeV1::new(
        a.deal_id,
        ReplayRecordV1 {
            backend_id: a.backend_id,
            backend_version_hash: a.backend_version_hash,
            spec_hash: a.spec_hash,
            delivery_hash: a.delivery_hash,
            prestate_anchor_hash: a.prestate_anchor_hash,
            prestate_root: a.prestate_root,
            outcome,
            result_hash: B256::repeat_byte(8),
        },
    )
}

fn commitment(a: &DisputeAnnouncement, outcome: ReexecVerdict) -> VerdictCommitment {
    envelope(a, outcome).commitment()
}

fn partial(signer: usize, epoch: u64, c: VerdictCommitment) -> SignedVerdict {
    SignedVerdict {
        commitment: c,
        epoch,
        signer_index: signer as u32,
        signature: key(signer).sign(&c.eip712_digest(&domain())).compress(),
    }
}

/// The commitment to `p`, signed by its signer's key (as the shell does).
fn signed_commit(p: &SignedVerdict) -> PartialCommit {
    let message = PartialCommit::message(
        &p.commitment.deal_id,
        p.epoch,
        p.signer_index,
        &PartialCommit::commit_of(p),
    );
    PartialCommit::of(p, key(p.signer_index as usize).sign_commit(&message).compress())
}

/// A commitment in `p`'s signer's name signed by another key (a forgery).
fn forged_commit(p: &SignedVerdict, salt: u8) -> PartialCommit {
    let commit = keccak256([p.signature.as_slice(), &[salt]].concat());
    let message = PartialCommit::message(&p.commitment.deal_id, p.epoch, p.signer_index, &commit);
    let signature = key(50).sign_commit(&message).compress();
    PartialCommit {
        deal_id: p.commitment.deal_id,
        epoch: p.epoch,
        signer_index: p.signer_index,
        commit,
        signature,
    }
}

/// A peer id as the Rig names peers: a counter.
type PeerId = u64;

/// Where a gossiped message came from, in the Rig: a message id and a peer.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Origin {
    id: Vec<u8>,
    peer: PeerId,
}

impl MessageOrigin for Origin {
    type Peer = PeerId;

    fn peer(&self) -> &PeerId {
        &self.peer
    }
}

type Engine = super::Engine<Origin>;
type Action = super::Action<Origin>;

/// A peer not seen before.
fn next_peer() -> PeerId {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn origin(n: u8) -> Origin {
    Origin { id: vec![n, 1, 2, 3], peer: next_peer() }
}

struct Rig {
    engine: Engine,
    now: Instant,
    me: Option<usize>,
}

impl Rig {
    /// A node that is member `me` of a 4-member committee at epoch `EPOCH`.
    fn new(me: Option<usize>) -> Self {
        Self::with(me, EngineConfig::default())
    }

    fn with(me: Option<usize>, cfg: EngineConfig) -> Self {
        let mut engine =
            Engine::new(cfg, domain(), me.map(|i| key(i).public_key()), EngineMetrics::default());
        engine.on_head(100, 1_000);
        engine.on_epoch(EPOCH);
        // The Rig's clock starts anywhere; only the engine must not read one.
        #[allow(clippy::disallowed_methods)]
        let now = Instant::now();
        let mut rig = Self { engine, now, me };
        let loads = rig.drain();
        assert!(matches!(loads[..], [Action::LoadCommittee(EPOCH)]), "{loads:?}");
        rig.engine.on_committee(EPOCH, Ok(committee(EPOCH, 4)), rig.now);
        rig.drain();
        rig
    }

    fn drain(&mut self) -> Vec<Action> {
        std::iter::from_fn(|| self.engine.poll_action()).collect()
    }

    fn later(&mut self, d: Duration) {
        self.now += d;
    }

    /// The watcher sees the `Disputed` log, the chain confirms it.
    fn confirm(&mut self, a: &DisputeAnnouncement) -> Vec<Action> {
        self.engine.on_disputed_log(a.clone(), self.now);
        let actions = self.drain();
        assert!(
            actions
                .iter()
                .any(|x| matches!(x, Action::Confirm { source: ConfirmSource::Chain, .. })),
            "{actions:?}"
        );
        self.engine.on_confirmed(
            a.clone(),
            ConfirmSource::Chain,
            Ok(Confirmation::Disputed),
            self.now,
        );
        self.drain()
    }

    /// Confirm, gather complete, replay → the Sign action; returns it signed.
    fn sign_through(&mut self, a: &DisputeAnnouncement, outcome: ReexecVerdict) -> SignedVerdict {
        let actions = self.confirm(a);
        let gather = actions.iter().find(|x| matches!(x, Action::Gather(_)));
        assert!(gather.is_some(), "{actions:?}");
        self.engine.on_gathered(a.deal_id, ready(a), self.now);
        let actions = self.drain();
        assert!(matches!(actions[..], [Action::Replay(_)]), "{actions:?}");
        self.engine.on_replayed(a.deal_id, Ok(envelope(a, outcome)), self.now);
        let actions = self.drain();
        let sign = actions.iter().find_map(|x| match x {
            Action::Sign { commitment, epoch, index, commit, .. } => {
                Some((*commitment, *epoch, *index, *commit))
            }
            _ => None,
        });
        let (c, epoch, index, commit) = sign.expect("a Sign action");
        assert_eq!(Some(index as usize), self.me);
        let p = partial(index as usize, epoch, c);
        self.engine.on_signed(p.clone(), commit.then(|| signed_commit(&p)), self.now);
        p
    }

    fn gossip_partial(&mut self, p: SignedVerdict, o: Origin) {
        self.engine.on_gossip(o, Gossip::Verdict(p), self.now);
    }

    fn batch(&mut self) -> Vec<Action> {
        self.engine.on_batch(&[7; 32], self.now);
        self.drain()
    }

    fn phase(&self, a: &DisputeAnnouncement) -> Phase {
        self.engine.view(&a.deal_id).expect("dispute known").phase
    }
}

fn ready(a: &DisputeAnnouncement) -> Gathered {
    Gathered::Ready(Box::new(ReexecRequestV1 {
        deal_id: a.deal_id,
        spec: Bytes::new(),
        spec_hash: a.spec_hash,
        delivery: Bytes::new(),
        delivery_hash: a.delivery_hash,
        prestate_anchor: Bytes::new(),
        prestate_anchor_hash: a.prestate_anchor_hash,
        witness: None,
    }))
}

fn confirms(actions: &[Action]) -> Vec<DisputeAnnouncement> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Confirm { announcement, .. } => Some((**announcement).clone()),
            _ => None,
        })
        .collect()
}

fn reports(actions: &[Action]) -> Vec<(Topic, Validation)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Report { topic, acceptance, .. } => Some((*topic, *acceptance)),
            _ => None,
        })
        .collect()
}

fn certificate_of(actions: &[Action]) -> Option<QuorumCertificate> {
    actions.iter().find_map(|a| match a {
        Action::PersistCertificate(qc) => Some((**qc).clone()),
        _ => None,
    })
}

fn gossips_certificate(actions: &[Action]) -> bool {
    actions.iter().any(|x| matches!(x, Action::Publish(Gossip::Certificate(_))))
}

fn certificate(a: &DisputeAnnouncement, signers: &[usize]) -> QuorumCertificate {
    let c = commitment(a, ReexecVerdict::Reproduced);
    let committee = committee(EPOCH, 4);
    let mut b = CertificateBuilder::new(committee, domain());
    for &s in signers {
        b.on_partial(&partial(s, EPOCH, c)).unwrap();
    }
    b.process(&[1; 32])
        .into_iter()
        .find_map(|e| match e {
            BuilderEvent::Certificate(qc) => Some(*qc),
            _ => None,
        })
        .expect("threshold reached")
}

#[test]
fn phases_run_in_order_and_the_partial_is_persisted_before_it_is_gossiped() {
    let mut rig = Rig::new(Some(0));
    let a = announcement(1);
    let actions = rig.confirm(&a);
    // Persisted, announced, then content gathered.
    let kinds: Vec<&str> = actions
        .iter()
        .map(|x| match x {
            Action::PersistDispute(_, DisputeStatus::Active) => "persist",
            Action::Publish(Gossip::Dispute(_)) => "announce",
            Action::Gather(_) => "gather",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["persist", "announce", "gather"]);
    assert_eq!(rig.phase(&a), Phase::Fetching);
    // Missing content: fetched, retried after `retry`.
    rig.engine.on_gathered(a.deal_id, Gathered::Missing(vec![(a.spec_hash, "spec")]), rig.now);
    assert!(matches!(rig.drain()[..], [Action::Fetch { tag: "spec", .. }]));
    rig.engine.on_tick(rig.now);
    assert!(rig.drain().iter().all(|x| !matches!(x, Action::Gather(_))), "not before the retry");
    rig.later(EngineConfig::default().retry);
    rig.engine.on_tick(rig.now);
    assert!(rig.drain().iter().any(|x| matches!(x, Action::Gather(_))));
    rig.engine.on_gathered(a.deal_id, ready(&a), rig.now);
    assert!(matches!(rig.drain()[..], [Action::Replay(_)]));
    assert_eq!(rig.phase(&a), Phase::Replaying);
    rig.engine.on_replayed(a.deal_id, Ok(envelope(&a, ReexecVerdict::Reproduced)), rig.now);
    let actions = rig.drain();
    assert!(matches!(actions[..], [Action::PersistEnvelope(_), Action::Sign { index: 0, .. }]));
    // The engine gossips only what the shell reports signed (after persisting).
    let p = partial(0, EPOCH, commitment(&a, ReexecVerdict::Reproduced));
    rig.engine.on_signed(p.clone(), None, rig.now);
    let actions = rig.drain();
    assert!(matches!(&actions[..], [Action::Publish(Gossip::Verdict(x))] if *x == p));
    assert_eq!(rig.phase(&a), Phase::Signed);
    // Two more partials: threshold (3 of 4), certificate, persisted and gossiped.
    for s in [1, 2] {
        rig.gossip_partial(partial(s, EPOCH, p.commitment), origin(s as u8));
    }
    let actions = rig.batch();
    let qc = certificate_of(&actions).expect("certificate");
    assert_eq!(qc.non_signers, vec![3]);
    assert_eq!(rig.phase(&a), Phase::Certified);
    let rank = submit_rank(&order_seed(&a), &[0, 1, 2, 3], 0);
    assert_eq!(gossips_certificate(&actions), rank < CERTIFICATE_GOSSIPERS, "rank {rank}");
    assert_eq!(
        reports(&actions),
        vec![(Topic::Verdicts, Validation::Accept), (Topic::Verdicts, Validation::Accept)]
    );
    // Settled by a log: final, persisted.
    rig.engine.on_settled_log(a.deal_id, Some(B256::repeat_byte(9)), rig.now);
    assert_eq!(rig.phase(&a), Phase::Settled);
    assert!(rig
        .drain()
        .iter()
        .any(|x| matches!(x, Action::PersistDispute(_, DisputeStatus::Settled))));
}

/// A node that sees the settlement before any certificate (it holds only its
/// own partial) takes the certified outcome from `VerdictCommitted`; a log
/// carrying another deal's commitment changes nothing.
#[test]
fn the_certified_outcome_comes_from_the_verdict_log_when_no_certificate_arrived() {
    let mut rig = Rig::new(Some(0));
    let a = announcement(1);
    let p = rig.sign_through(&a, ReexecVerdict::Reproduced);
    let other = announcement(2);
    let foreign = commitment(&other, ReexecVerdict::Failed);
    rig.engine.on_verdict_log(a.deal_id, B256::repeat_byte(8), Some(&foreign), rig.now);
    let view = rig.engine.view(&a.deal_id).unwrap();
    assert_eq!(view.phase, Phase::Settled);
    assert_eq!(view.certified_outcome, None, "another deal's commitment was taken");
    // The same log again, now with this deal's commitment.
    rig.engine.on_verdict_log(a.deal_id, B256::repeat_byte(8), Some(&p.commitment), rig.now);
    let view = rig.engine.view(&a.deal_id).unwrap();
    assert_eq!(view.certified_outcome, Some(ReexecVerdict::Reproduced));
    assert_eq!(view.settled_by, Some(B256::repeat_byte(8)));
    assert_eq!(view.certificate_non_signers, None, "no certificate is invented");
}

#[test]
fn operational_errors_back_off_exponentially_are_never_signed_and_expire_at_the_chain_deadline() {
    let mut rig = Rig::new(Some(0));
    let a = announcement(1);
    rig.confirm(&a);
    let mut waits = Vec::new();
    for _ in 0..8 {
        rig.engine.on_gathered(a.deal_id, ready(&a), rig.now);
        rig.drain();
        rig.engine.on_replayed(a.deal_id, Err("missing storage witness".into()), rig.now);
        assert!(rig.drain().iter().all(|x| !matches!(x, Action::Sign { .. })), "never signed");
        assert_eq!(rig.phase(&a), Phase::Fetching);
        // Find the wait until the next Gather, in 100 ms steps.
        let mut waited = Duration::ZERO;
        loop {
            rig.later(Duration::from_millis(100));
            waited += Duration::from_millis(100);
            rig.engine.on_tick(rig.now);
            if rig.drain().iter().any(|x| matches!(x, Action::Gather(_))) {
                break;
            }
        }
        waits.push(waited.as_millis());
    }
    assert_eq!(waits, [500, 1000, 2000, 4000, 8000, 16000, 32000, 60000]);
    assert!(
        rig.engine.view(&a.deal_id).unwrap().last_error.as_deref()
            == Some("missing storage witness")
    );
    // Expiry follows chain time, not the wall clock.
    rig.engine.on_tick(rig.now + Duration::from_secs(1_000_000));
    assert_eq!(rig.phase(&a), Phase::Fetching);
    rig.engine.on_head(200, a.resolve_deadline + EXPIRY_GRACE_SECS + 1);
    rig.engine.on_tick(rig.now);
    assert_eq!(rig.phase(&a), Phase::Expired);
    assert!(rig
        .drain()
        .iter()
        .any(|x| matches!(x, Action::PersistDispute(_, DisputeStatus::Expired))));
}

#[test]
fn submitter_order_slots_and_already_resolved_and_transient_retry() {
    let cfg = EngineConfig::default();
    let a = announcement(1);
    let members = [0u32, 1, 2, 3];
    let ranks: Vec<usize> =
        members.iter().map(|&m| submit_rank(&order_seed(&a), &members, m)).collect();
    for (me, &rank) in ranks.iter().enumerate() {
        let mut rig = Rig::new(Some(me));
        rig.confirm(&a);
        let qc = certificate(&a, &[0, 1, 2]);
        rig.engine.on_gossip(origin(1), Gossip::Certificate(Box::new(qc.to_wire())), rig.now);
        assert_eq!(reports(&rig.drain()), vec![(Topic::Certificates, Validation::Accept)]);
        // A non-signer: every rank first waits `widen_wait` for more signers.
        let slot = cfg.widen_wait + submit_delay(cfg.submit_slot, rank);
        rig.later(slot - Duration::from_millis(1));
        rig.engine.on_tick(rig.now);
        assert!(
            rig.drain().iter().all(|x| !matches!(x, Action::Submit { .. })),
            "rank {rank} waits its slot"
        );
        rig.later(Duration::from_millis(1));
        rig.engine.on_tick(rig.now);
        assert!(rig.drain().iter().any(|x| matches!(x, Action::Submit { .. })));
        // In flight: not sent twice.
        rig.engine.on_tick(rig.now);
        assert!(rig.drain().iter().all(|x| !matches!(x, Action::Submit { .. })));
        match me {
            0 => {
                // Transient: retried after the backoff.
                rig.engine.on_submitted(a.deal_id, SubmitResult::Failed("timeout".into()), rig.now);
                rig.later(cfg.retry * 2);
                rig.engine.on_tick(rig.now);
                assert!(rig.drain().iter().any(|x| matches!(x, Action::Submit { .. })));
                rig.engine.on_submitted(a.deal_id, SubmitResult::AlreadyResolved, rig.now);
            }
            _ => rig.engine.on_submitted(a.deal_id, SubmitResult::AlreadyResolved, rig.now),
        }
        // Already resolved: never sent again.
        rig.later(Duration::from_secs(600));
        rig.engine.on_tick(rig.now);
        assert!(rig.drain().iter().all(|x| !matches!(x, Action::Submit { .. })));
    }
}

/// The node sleeps until the engine's next timer: a held certificate's
/// submitter slot here, and a settled dispute has none.
#[test]
fn the_next_timer_is_the_submitters_slot_and_none_once_settled() {
    let cfg = EngineConfig::default();
    let a = announcement(1);
    let rank = submit_rank(&order_seed(&a), &[0, 1, 2, 3], 3);
    let mut rig = Rig::new(Some(3));
    let start = rig.now;
    assert_eq!(rig.engine.next_timer(start), None, "no dispute, no timer");
    rig.confirm(&a);
    let fetch = rig.engine.next_timer(rig.now);
    let qc = certificate(&a, &[0, 1, 2]);
    rig.engine.on_gossip(origin(1), Gossip::Certificate(Box::new(qc.to_wire())), rig.now);
    rig.drain();
    let slot = rig.now + cfg.widen_wait + submit_delay(cfg.submit_slot, rank);
    let expected = fetch.map_or(slot, |f| f.min(slot));
    assert_eq!(rig.engine.next_timer(rig.now), Some(expected));
    rig.later(slot - rig.now);
    rig.engine.on_tick(rig.now);
    assert!(rig.drain().iter().any(|x| matches!(x, Action::Submit { .. })), "sent at the slot");
    rig.engine.on_settled_log(a.deal_id, None, rig.now);
    assert_eq!(rig.engine.next_timer(start), None, "a settled dispute has no timer");
}

#[test]
fn a_certificate_the_escrow_rejects_is_dropped_and_a_verified_one_replaces_it() {
    let mut rig = Rig::new(Some(3));
    let a = announcement(1);
    rig.confirm(&a);
    let first = certificate(&a, &[0, 1, 2]);
    rig.engine.on_gossip(origin(1), Gossip::Certificate(Box::new(first.to_wire())), rig.now);
    rig.drain();
    // Copies of a held certificate cost no pairing and earn no score.
    for n in 0..50 {
        rig.engine.on_gossip(origin(n), Gossip::Certificate(Box::new(first.to_wire())), rig.now);
    }
    let r = reports(&rig.drain());
    assert_eq!(r.len(), 50);
    assert!(r.iter().all(|(_, acc)| *acc == Validation::Ignore));
    rig.later(Duration::from_secs(60));
    rig.engine.on_tick(rig.now);
    assert!(rig.drain().iter().any(|x| matches!(x, Action::Submit { .. })));
    rig.engine.on_submitted(a.deal_id, SubmitResult::Rejected("InvalidSignature".into()), rig.now);
    assert_ne!(rig.phase(&a), Phase::Certified);
    // Not retried; the same certificate is not taken back.
    rig.later(Duration::from_secs(60));
    rig.engine.on_tick(rig.now);
    assert!(rig.drain().iter().all(|x| !matches!(x, Action::Submit { .. })));
    rig.engine.on_gossip(origin(1), Gossip::Certificate(Box::new(first.to_wire())), rig.now);
    assert_eq!(reports(&rig.drain()), vec![(Topic::Certificates, Validation::Ignore)]);
    // A different verified certificate replaces it and is submitted.
    let second = certificate(&a, &[0, 1, 2, 3]);
    rig.engine.on_gossip(origin(2), Gossip::Certificate(Box::new(second.to_wire())), rig.now);
    let actions = rig.drain();
    assert_eq!(reports(&actions), vec![(Topic::Certificates, Validation::Accept)]);
    rig.later(Duration::from_secs(60));
    rig.engine.on_tick(rig.now);
    let submitted = rig.drain().into_iter().find_map(|x| match x {
        Action::Submit { certificate, .. } => Some(certificate),
        _ => None,
    });
    assert_eq!(submitted.expect("resubmitted").non_signers, Vec::<u32>::new());
}

#[test]
fn restore_resends_the_same_partial_and_drops_a_stored_certificate_that_does_not_verify() {
    let a = announcement(1);
    let mut first = Rig::new(Some(0));
    let own = first.sign_through(&a, ReexecVerdict::Reproduced);
    // A "restart": a fresh engine with the store's records.
    let mut rig = Rig::new(Some(0));
    let mut bad = certificate(&a, &[0, 1, 2]);
    bad.non_signers = vec![2]; // claims 0, 1, 3 signed: the aggregate does not match
    rig.engine.restore(a.clone(), DisputeStatus::Active, vec![own.clone()], Some(bad), rig.now);
    let actions = rig.drain();
    assert!(
        matches!(&actions[..], [Action::Publish(Gossip::Verdict(p))] if *p == own),
        "the same partial is re-sent, nothing else: {actions:?}"
    );
    assert_eq!(rig.phase(&a), Phase::Signed, "the unverifiable certificate was dropped");
    // A good stored certificate is kept and submitted.
    let mut rig = Rig::new(Some(0));
    let good = certificate(&a, &[0, 1, 2]);
    rig.engine.restore(a.clone(), DisputeStatus::Active, vec![own], Some(good), rig.now);
    rig.drain();
    assert_eq!(rig.phase(&a), Phase::Certified);
    rig.later(Duration::from_secs(60));
    rig.engine.on_tick(rig.now);
    assert!(rig.drain().iter().any(|x| matches!(x, Action::Submit { .. })));
    // A dispute restored before any work is re-checked on chain first.
    let mut rig = Rig::new(Some(0));
    let b = announcement(2);
    rig.engine.restore(b.clone(), DisputeStatus::Active, vec![], None, rig.now);
    assert!(matches!(rig.drain()[..], [Action::Confirm { source: ConfirmSource::Chain, .. }]));
    assert!(rig.engine.view(&b.deal_id).is_none());
    // Settled ones are held as settled (until evicted and pruned), and cost nothing later.
    rig.engine.restore(announcement(4), DisputeStatus::Settled, vec![], None, rig.now);
    assert_eq!(rig.phase(&announcement(4)), Phase::Settled);
    rig.gossip_partial(
        partial(1, EPOCH, commitment(&announcement(4), ReexecVerdict::Reproduced)),
        origin(1),
    );
    assert_eq!(reports(&rig.drain()), vec![(Topic::Verdicts, Validation::Ignore)]);
}

#[test]
fn an_equivocation_is_slashed_once_by_the_first_submitter_then_never_again() {
    let mut rig = Rig::new(Some(0));
    let a = announcement(1);
    rig.confirm(&a);
    let yes = commitment(&a, ReexecVerdict::Reproduced);
    let no = commitment(&a, ReexecVerdict::Failed);
    rig.gossip_partial(partial(2, EPOCH, yes), origin(1));
    rig.gossip_partial(partial(2, EPOCH, no), origin(2));
    let actions = rig.batch();
    let writes =
        actions.iter().filter(|x| matches!(x, Action::WriteEvidence(_, r) if *r == [2])).count();
    assert_eq!(writes, 1);
    assert!(actions.iter().any(|x| matches!(x, Action::Publish(Gossip::Evidence(_)))));
    // Sent at this node's slot among the honest members.
    let honest = [0u32, 1, 3];
    let rank = submit_rank(&a.deal_id, &honest, 0);
    rig.later(submit_delay(EngineConfig::default().submit_slot, rank));
    rig.engine.on_tick(rig.now);
    let slash: Vec<_> = rig
        .drain()
        .into_iter()
        .filter_map(|x| match x {
            Action::Slash(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(slash.len(), 1);
    assert_eq!(slash[0].resolvers, vec![2]);
    // The same evidence again (gossip, a third partial) starts nothing new.
    let ev = match actions.iter().find(|x| matches!(x, Action::Publish(Gossip::Evidence(_)))) {
        Some(Action::Publish(Gossip::Evidence(e))) => e.clone(),
        _ => unreachable!(),
    };
    rig.engine.on_gossip(origin(9), Gossip::Evidence(ev.clone()), rig.now);
    assert_eq!(reports(&rig.drain()), vec![(Topic::Evidence, Validation::Ignore)]);
    rig.engine.on_slashed(
        a.deal_id,
        vec![2],
        SlashResult::Done(Some(B256::repeat_byte(5))),
        rig.now,
    );
    assert!(rig.drain().iter().any(|x| matches!(x, Action::PersistSlashed { resolver: 2, .. })));
    assert_eq!(rig.engine.pending_slashes(), 0);
    // A restarted node that knows the slashing (from the store) does not slash again.
    let mut rig = Rig::new(Some(0));
    rig.engine.mark_slashed(a.deal_id, 2);
    rig.confirm(&a);
    rig.engine.on_gossip(origin(9), Gossip::Evidence(ev), rig.now);
    let actions = rig.drain();
    // Valid, but it convicts no one not already slashed: not forwarded.
    assert_eq!(reports(&actions), vec![(Topic::Evidence, Validation::Ignore)]);
    rig.later(Duration::from_secs(600));
    rig.engine.on_tick(rig.now);
    assert!(rig.drain().iter().all(|x| !matches!(x, Action::Slash(_))));
}

/// Evidence is one message network-wide: detectors that saw an equivocator's
/// two partials in opposite orders publish the same bytes, and a node that
/// already convicted a signer does not forward other evidence against it
/// (made from other attestations), only evidence convicting someone new.
#[test]
fn evidence_is_canonical_and_copies_of_one_conviction_are_not_forwarded() {
    let a = announcement(1);
    let yes = commitment(&a, ReexecVerdict::Reproduced);
    let no = commitment(&a, ReexecVerdict::Failed);
    let evidence_after = |first: VerdictCommitment, second: VerdictCommitment| {
        let mut rig = Rig::new(Some(0));
        rig.confirm(&a);
        rig.gossip_partial(partial(2, EPOCH, first), origin(1));
        rig.gossip_partial(partial(2, EPOCH, second), origin(2));
        let published: Vec<_> = rig
            .batch()
            .into_iter()
            .filter_map(|x| match x {
                Action::Publish(Gossip::Evidence(e)) => {
                    Some(resolvd_proto::wire::WireMessage::encode_wire(&*e))
                }
                _ => None,
            })
            .collect();
        assert_eq!(published.len(), 1);
        (rig, published[0].clone())
    };
    let (mut rig, ev) = evidence_after(yes, no);
    let (_, reversed) = evidence_after(no, yes);
    assert_eq!(ev, reversed, "the same conviction must be the same gossip message");
    let single = |p: &SignedVerdict| {
        Attestation::single(p, Signature::from_compressed(&p.signature).unwrap()).to_wire()
    };
    // Evidence that `signer` signed both commitments, gossiped by a peer.
    let mut gossip = |signer: usize, first, second| {
        let e = resolvd_proto::wire::ConflictEvidence {
            first: single(&partial(signer, EPOCH, first)),
            second: single(&partial(signer, EPOCH, second)),
        };
        rig.engine.on_gossip(origin(9), Gossip::Evidence(Box::new(e)), rig.now);
        rig.drain()
    };
    // Signer 2 again, convicted by another pair (another detector saw a third
    // commitment of it): valid, but nothing new here.
    let mut other = no;
    other.result_hash = B256::repeat_byte(0x77);
    let actions = gossip(2, yes, other);
    assert_eq!(reports(&actions), vec![(Topic::Evidence, Validation::Ignore)]);
    assert!(actions.iter().all(|x| !matches!(x, Action::Publish(_) | Action::WriteEvidence(..))));
    // Signer 3 is new: accepted (forwarded), written and republished.
    let actions = gossip(3, no, yes);
    assert_eq!(reports(&actions), vec![(Topic::Evidence, Validation::Accept)]);
    assert!(actions.iter().any(|x| matches!(x, Action::WriteEvidence(_, r) if *r == [3])));
}

#[test]
fn a_gossiped_dispute_is_acted_on_only_when_the_chain_confirms_it() {
    let mut rig = Rig::new(Some(0));
    let a = announcement(1);
    rig.engine.on_gossip(origin(1), Gossip::Dispute(a.clone()), rig.now);
    // A second copy waits for the same check.
    rig.engine.on_gossip(origin(2), Gossip::Dispute(a.clone()), rig.now);
    let actions = rig.drain();
    assert!(matches!(actions[..], [Action::Confirm { source: ConfirmSource::Gossip, .. }]));
    assert!(rig.engine.view(&a.deal_id).is_none(), "nothing before the chain agrees");
    rig.engine.on_confirmed(
        a.clone(),
        ConfirmSource::Gossip,
        Ok(Confirmation::NotDisputed),
        rig.now,
    );
    assert_eq!(
        reports(&rig.drain()),
        vec![(Topic::Disputes, Validation::Ignore), (Topic::Disputes, Validation::Ignore)]
    );
    assert!(rig.engine.view(&a.deal_id).is_none());
    // A made-up deal: rejected (the sender pays), and asked about only once.
    let fake = announcement(0x66);
    rig.engine.on_gossip(origin(3), Gossip::Dispute(fake.clone()), rig.now);
    assert_eq!(rig.drain().len(), 1);
    rig.engine.on_confirmed(
        fake.clone(),
        ConfirmSource::Gossip,
        Ok(Confirmation::NoSuchDeal),
        rig.now,
    );
    assert_eq!(reports(&rig.drain()), vec![(Topic::Disputes, Validation::Reject)]);
    for n in 0..100 {
        rig.engine.on_gossip(origin(n), Gossip::Dispute(fake.clone()), rig.now);
    }
    let actions = rig.drain();
    assert!(actions.iter().all(|x| !matches!(x, Action::Confirm { .. })), "no RPC for repeats");
    assert!(reports(&actions).iter().all(|(_, acc)| *acc == Validation::Reject));
    // Confirmation work is bounded however many distinct deals are announced
    // by however many peers.
    let cfg = EngineConfig::default();
    let mut asked = Vec::new();
    for n in 0..1_000u32 {
        let mut x = announcement(7);
        x.deal_id = keccak256(n.to_be_bytes());
        rig.engine.on_gossip(origin(1), Gossip::Dispute(x), rig.now);
        asked.extend(confirms(&rig.drain()));
    }
    assert_eq!(asked.len(), cfg.max_confirming);
    // While they are in flight a real announcement waits for the watcher too.
    let b = announcement(2);
    rig.engine.on_gossip(origin(5), Gossip::Dispute(b.clone()), rig.now);
    assert_eq!(reports(&rig.drain()), vec![(Topic::Disputes, Validation::Ignore)]);
    for a in asked {
        rig.engine.on_confirmed(a, ConfirmSource::Gossip, Ok(Confirmation::NoSuchDeal), rig.now);
    }
    rig.drain();
    // The real one, confirmed: started.
    rig.engine.on_gossip(origin(5), Gossip::Dispute(b.clone()), rig.now);
    rig.drain();
    rig.engine.on_confirmed(b.clone(), ConfirmSource::Gossip, Ok(Confirmation::Disputed), rig.now);
    let actions = rig.drain();
    assert!(reports(&actions).contains(&(Topic::Disputes, Validation::Accept)));
    assert_eq!(rig.phase(&b), Phase::Fetching);
}

/// A peer that names another block for a real dispute (to choose the seed
/// of its order) does not hold up the true announcement, which is checked on
/// its own; its lie is not asked about again, and its variants of real
/// announcements cost `MAX_REFUTED_PER_PEER` RPC calls, then none for a
/// while. Nobody is penalised: a refuted block may be a reorg's.
#[test]
fn a_lie_about_a_disputes_block_does_not_hold_up_the_truth() {
    let mut rig = Rig::new(Some(0));
    let a = announcement(1);
    let variant = |n: u8| DisputeAnnouncement { block_hash: B256::repeat_byte(n), ..a.clone() };
    let hostile = next_peer();
    let from_hostile = |n: u8| Origin { id: vec![n], peer: hostile };
    let lie = variant(0xcc);
    rig.engine.on_gossip(from_hostile(0), Gossip::Dispute(lie.clone()), rig.now);
    rig.engine.on_gossip(origin(2), Gossip::Dispute(a.clone()), rig.now);
    rig.engine.on_gossip(origin(3), Gossip::Dispute(a.clone()), rig.now);
    let asked = confirms(&rig.drain());
    assert_eq!(asked, vec![lie.clone(), a.clone()], "each version checked once");
    rig.engine.on_confirmed(
        lie.clone(),
        ConfirmSource::Gossip,
        Ok(Confirmation::Misplaced),
        rig.now,
    );
    assert_eq!(reports(&rig.drain()), vec![(Topic::Disputes, Validation::Ignore)]);
    assert!(rig.engine.view(&a.deal_id).is_none());
    // The lie again, from anyone: no RPC call.
    rig.engine.on_gossip(origin(4), Gossip::Dispute(lie), rig.now);
    let actions = rig.drain();
    assert!(confirms(&actions).is_empty());
    assert_eq!(reports(&actions), vec![(Topic::Disputes, Validation::Ignore)]);
    rig.engine.on_confirmed(a.clone(), ConfirmSource::Gossip, Ok(Confirmation::Disputed), rig.now);
    assert_eq!(
        reports(&rig.drain()),
        vec![(Topic::Disputes, Validation::Accept), (Topic::Disputes, Validation::Accept)]
    );
    assert_eq!(rig.phase(&a), Phase::Fetching);
    // Variants of another real deal's announcement: a bounded number checked.
    let b = announcement(2);
    let mut asked = 1;
    for n in 1..100u8 {
        let v = DisputeAnnouncement { block_hash: B256::repeat_byte(n), ..b.clone() };
        rig.engine.on_gossip(from_hostile(n), Gossip::Dispute(v), rig.now);
        for v in confirms(&rig.drain()) {
            asked += 1;
            rig.engine.on_confirmed(v, ConfirmSource::Gossip, Ok(Confirmation::Misplaced), rig.now);
        }
        assert!(reports(&rig.drain()).iter().all(|(_, acc)| *acc == Validation::Ignore));
    }
    assert_eq!(asked, MAX_REFUTED_PER_PEER, "the first lie and three variants");
    // The truth about it, from another peer, is still checked.
    rig.engine.on_gossip(origin(5), Gossip::Dispute(b.clone()), rig.now);
    assert_eq!(confirms(&rig.drain()), vec![b]);
}

/// One peer flooding made-up deals costs a bounded number of RPC calls: at
/// most `MAX_CONFIRMING_PER_PEER` at once (the rest of `max_confirming` stays
/// free for other peers), and none for `MISLED_FOR` once the chain refuted one.
#[test]
fn a_peer_announcing_made_up_deals_costs_a_few_rpc_calls_not_one_per_message() {
    let mut rig = Rig::new(Some(0));
    let hostile = next_peer();
    let from_hostile = |n: u32| Origin { id: n.to_be_bytes().to_vec(), peer: hostile };
    let made_up = |n: u32| {
        let mut x = announcement(7);
        x.deal_id = keccak256(n.to_be_bytes());
        x
    };
    let mut asked = Vec::new();
    for n in 0..1_000u32 {
        rig.engine.on_gossip(from_hostile(n), Gossip::Dispute(made_up(n)), rig.now);
        asked.extend(confirms(&rig.drain()));
    }
    assert_eq!(asked.len(), MAX_CONFIRMING_PER_PEER);
    // Another peer's real announcement is still checked at once.
    let real = announcement(2);
    rig.engine.on_gossip(origin(5), Gossip::Dispute(real.clone()), rig.now);
    assert_eq!(confirms(&rig.drain()).len(), 1);
    // The chain refutes one: the peer's later announcements cost nothing,
    // though its other checks have returned their quota.
    rig.engine.on_confirmed(
        asked[0].clone(),
        ConfirmSource::Gossip,
        Ok(Confirmation::NoSuchDeal),
        rig.now,
    );
    assert_eq!(reports(&rig.drain()), vec![(Topic::Disputes, Validation::Reject)]);
    for a in &asked[1..] {
        rig.engine.on_confirmed(
            a.clone(),
            ConfirmSource::Gossip,
            Ok(Confirmation::NoSuchDeal),
            rig.now,
        );
    }
    rig.drain();
    for n in 1_000..2_000u32 {
        rig.engine.on_gossip(from_hostile(n), Gossip::Dispute(made_up(n)), rig.now);
        let actions = rig.drain();
        assert!(confirms(&actions).is_empty(), "no RPC call for a misleading peer");
        assert_eq!(reports(&actions), vec![(Topic::Disputes, Validation::Ignore)]);
    }
    // An announcement that is only a transient failure does not mark a peer.
    let flaky = next_peer();
    let x = made_up(5_000);
    rig.engine.on_gossip(Origin { id: vec![1], peer: flaky }, Gossip::Dispute(x.clone()), rig.now);
    rig.drain();
    rig.engine.on_confirmed(x, ConfirmSource::Gossip, Err("timeout".into()), rig.now);
    rig.drain();
    rig.engine.on_gossip(
        Origin { id: vec![2], peer: flaky },
        Gossip::Dispute(made_up(5_001)),
        rig.now,
    );
    assert_eq!(confirms(&rig.drain()).len(), 1);
    // After `MISLED_FOR` the misleading peer is heard again.
    rig.now += MISLED_FOR;
    rig.engine.on_gossip(from_hostile(9_999), Gossip::Dispute(made_up(9_999)), rig.now);
    assert_eq!(confirms(&rig.drain()).len(), 1);
}

#[test]
fn invalid_partials_penalise_their_origin_and_partials_for_unknown_deals_cost_nothing() {
    let mut rig = Rig::new(Some(0));
    let a = announcement(1);
    rig.confirm(&a);
    let c = commitment(&a, ReexecVerdict::Reproduced);
    // A forged signature (signed by another key) from one peer, a valid one from another.
    let mut forged = partial(1, EPOCH, c);
    forged.signature = partial(2, EPOCH, c).signature;
    let bad = origin(1);
    let good = origin(2);
    rig.gossip_partial(forged, bad.clone());
    rig.gossip_partial(partial(2, EPOCH, c), good.clone());
    let actions = rig.batch();
    let by_peer: Vec<(PeerId, Validation)> = actions
        .iter()
        .filter_map(|x| match x {
            Action::Report { origin, acceptance, .. } => Some((origin.peer, *acceptance)),
            _ => None,
        })
        .collect();
    assert!(by_peer.contains(&(bad.peer, Validation::Reject)));
    assert!(by_peer.contains(&(good.peer, Validation::Accept)));
    // Wrong epoch for a known deal, epoch 0, other fields: rejected at once, no batch.
    for epoch in [0, EPOCH + 1, 3_216_419_938] {
        rig.gossip_partial(partial(1, epoch, c), origin(3));
    }
    let mut other = c;
    other.spec_hash = B256::repeat_byte(0x99);
    rig.gossip_partial(partial(1, EPOCH, other), origin(4));
    let actions = rig.drain();
    assert_eq!(reports(&actions).len(), 4);
    assert!(reports(&actions).iter().all(|(_, acc)| *acc == Validation::Reject));
    assert!(actions.iter().all(|x| !matches!(x, Action::LoadCommittee(_))), "no committee loads");
    assert_eq!(rig.engine.batch_due(), None);
    // Partials for deals not confirmed here: held (bounded), never verified or loaded.
    let cfg = EngineConfig { max_buffered_partials: 100, ..EngineConfig::default() };
    let mut rig = Rig::with(Some(0), cfg.clone());
    for n in 0..300u32 {
        let mut x = announcement(9);
        x.deal_id = keccak256(n.to_be_bytes());
        x.epoch = 1_000 + u64::from(n);
        rig.gossip_partial(partial(1, x.epoch, commitment(&x, ReexecVerdict::Failed)), origin(5));
    }
    let actions = rig.drain();
    assert!(actions.iter().all(|x| !matches!(x, Action::LoadCommittee(_))));
    assert_eq!(rig.engine.buffered_partials(), 100);
    assert_eq!(reports(&actions).len(), 200, "the overflow is ignored at once");
    assert_eq!(rig.engine.batch_due(), None);
    // They expire.
    rig.later(cfg.buffer_ttl);
    rig.engine.on_tick(rig.now);
    assert_eq!(rig.engine.buffered_partials(), 0);
    assert_eq!(reports(&rig.drain()).len(), 100);
    // A partial that arrives before its dispute is confirmed is used once it is.
    let p = partial(1, EPOCH, c);
    rig.gossip_partial(p, origin(6));
    assert!(rig.drain().is_empty());
    rig.confirm(&a);
    let actions = rig.batch();
    assert_eq!(reports(&actions), vec![(Topic::Verdicts, Validation::Accept)]);
}

#[test]
fn committees_are_loaded_only_for_epochs_that_exist_at_a_confirmed_block() {
    // The critical finding: a gossiped certificate, partial or evidence naming
    // a future epoch made every node load (and cache forever) a committee that
    // did not exist yet.
    let mut rig = Rig::new(Some(0));
    let a = announcement(1);
    rig.confirm(&a);
    let mut qc = certificate(&a, &[0, 1, 2]);
    qc.epoch = EPOCH + 1;
    rig.engine.on_gossip(origin(1), Gossip::Certificate(Box::new(qc.to_wire())), rig.now);
    rig.gossip_partial(partial(1, EPOCH + 1, commitment(&a, ReexecVerdict::Failed)), origin(2));
    let mut b = announcement(2);
    b.epoch = EPOCH + 1;
    rig.gossip_partial(partial(1, EPOCH + 1, commitment(&b, ReexecVerdict::Failed)), origin(3));
    let actions = rig.drain();
    assert!(actions.iter().all(|x| !matches!(x, Action::LoadCommittee(_))), "{actions:?}");
    assert_eq!(rig.engine.loaded_epochs().collect::<Vec<_>>(), vec![EPOCH]);
    // Evidence naming a future epoch is rejected, not loaded.
    let yes = partial(1, EPOCH + 1, commitment(&b, ReexecVerdict::Reproduced));
    let no = partial(1, EPOCH + 1, commitment(&b, ReexecVerdict::Failed));
    let single = |p: &SignedVerdict| {
        Attestation::single(p, Signature::from_compressed(&p.signature).unwrap()).to_wire()
    };
    let ev = resolvd_proto::wire::ConflictEvidence { first: single(&yes), second: single(&no) };
    rig.engine.on_gossip(origin(4), Gossip::Evidence(Box::new(ev)), rig.now);
    let actions = rig.drain();
    assert_eq!(reports(&actions), vec![(Topic::Evidence, Validation::Reject)]);
    assert!(actions.iter().all(|x| !matches!(x, Action::LoadCommittee(_))));
    // Once the chain says the epoch started (a confirmed EpochStarted log), it loads.
    rig.engine.on_epoch(EPOCH + 1);
    assert!(matches!(rig.drain()[..], [Action::LoadCommittee(e)] if e == EPOCH + 1));
    // And a committee answer for another epoch than asked is refused.
    rig.engine.on_committee(EPOCH + 1, Ok(committee(EPOCH + 7, 4)), rig.now);
    assert_eq!(rig.engine.loaded_epochs().collect::<Vec<_>>(), vec![EPOCH]);
}

#[test]
fn settled_disputes_are_evicted_with_their_builder_and_conflict_state() {
    let cfg = EngineConfig { retain_settled: Duration::from_secs(10), ..EngineConfig::default() };
    let mut rig = Rig::with(Some(0), cfg);
    for deal in 1..=50u8 {
        let a = announcement(deal);
        rig.confirm(&a);
        let c = commitment(&a, ReexecVerdict::Reproduced);
        for s in [1, 2] {
            rig.gossip_partial(partial(s, EPOCH, c), origin(s as u8));
        }
        rig.batch();
        rig.engine.on_settled_log(a.deal_id, None, rig.now);
    }
    rig.drain();
    assert_eq!(rig.engine.len(), 50);
    assert_eq!(rig.engine.builders[&(Address::repeat_byte(0xe5), EPOCH)].groups(), 50);
    rig.later(Duration::from_secs(10));
    rig.engine.on_tick(rig.now);
    assert_eq!(rig.engine.len(), 0);
    assert_eq!(rig.engine.builders[&(Address::repeat_byte(0xe5), EPOCH)].groups(), 0);
    // Late gossip for an evicted deal is ignored without any work.
    let a = announcement(1);
    rig.gossip_partial(partial(3, EPOCH, commitment(&a, ReexecVerdict::Reproduced)), origin(1));
    rig.engine.on_gossip(origin(2), Gossip::Dispute(a.clone()), rig.now);
    let actions = rig.drain();
    assert_eq!(
        reports(&actions),
        vec![(Topic::Verdicts, Validation::Ignore), (Topic::Disputes, Validation::Ignore)]
    );
    assert_eq!(rig.engine.batch_due(), None);
}

/// An Attestor's question requested again after a timeout keeps its request
/// id: the second `Disputed` log (a later deadline) opens the id again. Under
/// the same epoch the committee's partials are the same bytes as in the first
/// round and gossip does not carry them twice, so what the node verified is
/// kept: a certificate built in the first round is submitted again, and a
/// node that had not signed starts afresh with its peers' partials still
/// counted. A repeated log with the same deadline changes nothing, and a peer
/// announcing the new round first is not penalised.
#[test]
fn a_request_made_again_after_a_timeout_is_reopened_keeping_the_verified_partials() {
    let cfg = EngineConfig { retain_settled: Duration::from_secs(10), ..EngineConfig::default() };
    let later = |a: &DisputeAnnouncement| {
        let mut again = a.clone();
        again.resolve_deadline += 3_600;
        again.block_number += 100;
        again
    };
    // The first round got a certificate too late: it timed out.
    let mut rig = Rig::with(Some(0), cfg.clone());
    let a = announcement(0x31);
    let own = rig.sign_through(&a, ReexecVerdict::Reproduced);
    for s in [1, 2] {
        rig.gossip_partial(partial(s, EPOCH, own.commitment), origin(s as u8));
    }
    rig.batch();
    assert_eq!(rig.phase(&a), Phase::Certified);
    rig.engine.on_settled_log(a.deal_id, None, rig.now);
    rig.drain();
    assert_eq!(rig.phase(&a), Phase::Settled);
    rig.engine.on_disputed_log(a.clone(), rig.now);
    assert!(rig.drain().is_empty(), "the same log again is not a new round");
    let again = later(&a);
    rig.engine.on_gossip(origin(2), Gossip::Dispute(again.clone()), rig.now);
    assert_eq!(reports(&rig.drain()), vec![(Topic::Disputes, Validation::Ignore)]);
    rig.engine.on_disputed_log(again.clone(), rig.now);
    let actions = rig.drain();
    assert!(!actions.iter().any(|x| matches!(x, Action::Prune(_))), "{actions:?}");
    assert_eq!(rig.phase(&a), Phase::Certified);
    assert_eq!(rig.engine.view(&a.deal_id).unwrap().resolve_deadline, again.resolve_deadline);
    rig.later(cfg.submit_slot * 4);
    rig.engine.on_tick(rig.now);
    let submitted = rig.drain().into_iter().find_map(|x| match x {
        Action::Submit { certificate, .. } => Some(certificate),
        _ => None,
    });
    assert_eq!(submitted.map(|qc| qc.commitment), Some(own.commitment), "submitted again");

    // A node that had not signed (no content) but verified its peers'
    // partials starts afresh and certifies with them and its own.
    let mut rig = Rig::with(Some(0), cfg.clone());
    let b = announcement(0x32);
    rig.confirm(&b);
    let c = commitment(&b, ReexecVerdict::Reproduced);
    for s in [1, 2] {
        rig.gossip_partial(partial(s, EPOCH, c), origin(s as u8));
    }
    rig.batch();
    assert_eq!(rig.phase(&b), Phase::Fetching);
    rig.engine.on_settled_log(b.deal_id, None, rig.now);
    rig.drain();
    let again = later(&b);
    let own = rig.sign_through(&again, ReexecVerdict::Reproduced);
    assert_eq!(own.commitment, c);
    let actions = rig.batch();
    assert_eq!(rig.phase(&again), Phase::Certified, "{actions:?}");

    // Evicted after it timed out: a new round is checked on chain too.
    rig.engine.on_settled_log(b.deal_id, None, rig.now);
    rig.later(Duration::from_secs(10));
    rig.engine.on_tick(rig.now);
    rig.drain();
    assert!(rig.engine.view(&b.deal_id).is_none());
    let third = later(&again);
    rig.confirm(&third);
    assert_eq!(rig.phase(&third), Phase::Fetching);
}

#[test]
fn a_non_member_observes_and_a_protection_refusal_is_final() {
    let mut rig = Rig::new(None);
    let a = announcement(1);
    rig.confirm(&a);
    rig.engine.on_gathered(a.deal_id, ready(&a), rig.now);
    rig.drain();
    rig.engine.on_replayed(a.deal_id, Ok(envelope(&a, ReexecVerdict::Failed)), rig.now);
    assert!(rig.drain().iter().all(|x| !matches!(x, Action::Sign { .. })));
    assert_eq!(rig.phase(&a), Phase::Observing);
    let mut rig = Rig::new(Some(1));
    rig.confirm(&a);
    rig.engine.on_gathered(a.deal_id, ready(&a), rig.now);
    rig.drain();
    rig.engine.on_replayed(a.deal_id, Ok(envelope(&a, ReexecVerdict::Failed)), rig.now);
    rig.drain();
    rig.engine.on_sign_refused(a.deal_id, "a different commitment was signed".into());
    assert_eq!(rig.phase(&a), Phase::Refused);
    rig.later(Duration::from_secs(600));
    rig.engine.on_tick(rig.now);
    assert!(rig.drain().iter().all(|x| !matches!(x, Action::Gather(_) | Action::Sign { .. })));
}

/// Deal `n`'s announcement (distinct ids beyond the u8 ones above).
fn numbered(n: u32) -> DisputeAnnouncement {
    let mut a = announcement(0);
    a.deal_id.0[..4].copy_from_slice(&n.to_be_bytes());
    a.deal_id.0[31] = 0xee;
    a
}

fn prunes(actions: &[Action]) -> usize {
    actions.iter().filter(|a| matches!(a, Action::Prune(_))).count()
}

#[test]
fn ten_thousand_settled_disputes_leave_bounded_state_and_are_pruned_from_the_store() {
    let cfg = EngineConfig {
        retain_settled: Duration::from_secs(10),
        max_finished: 1_000,
        ..EngineConfig::default()
    };
    let mut rig = Rig::with(Some(0), cfg);
    let mut pruned = 0;
    for n in 0..10_000 {
        let a = numbered(n);
        rig.confirm(&a);
        if n % 500 == 0 {
            // Some with partials, so builders and conflict state exist too.
            let c = commitment(&a, ReexecVerdict::Reproduced);
            rig.gossip_partial(partial(1, EPOCH, c), origin(1));
            rig.batch();
        }
        rig.engine.on_settled_log(a.deal_id, None, rig.now);
        if n % 100 == 99 {
            rig.later(Duration::from_secs(1));
            rig.engine.on_tick(rig.now);
            pruned += prunes(&rig.drain());
            // Only the last ~10 s (1,000 disputes) are held.
            assert!(rig.engine.len() <= 1_100, "{} held", rig.engine.len());
        }
    }
    rig.later(Duration::from_secs(10));
    rig.engine.on_tick(rig.now);
    pruned += prunes(&rig.drain());
    assert_eq!(pruned, 10_000, "every finished dispute is pruned once");
    assert_eq!(rig.engine.len(), 0);
    assert_eq!(rig.engine.finished_len(), 1_000, "remembered ids are capped");
    assert_eq!(rig.engine.builders[&(Address::repeat_byte(0xe5), EPOCH)].groups(), 0);
    // The newest evicted deal is still recognised; the oldest costs one confirmation.
    rig.engine.on_gossip(origin(3), Gossip::Dispute(numbered(9_999)), rig.now);
    assert_eq!(reports(&rig.drain()), vec![(Topic::Disputes, Validation::Ignore)]);
    rig.engine.on_gossip(origin(4), Gossip::Dispute(numbered(0)), rig.now);
    assert!(rig.drain().iter().any(|x| matches!(x, Action::Confirm { .. })));
}

#[test]
fn a_dispute_finished_before_a_restart_is_held_then_pruned() {
    let cfg = EngineConfig { retain_settled: Duration::from_secs(10), ..EngineConfig::default() };
    let mut rig = Rig::with(Some(0), cfg);
    let a = announcement(1);
    rig.engine.restore(a.clone(), DisputeStatus::Settled, Vec::new(), None, rig.now);
    assert_eq!(rig.phase(&a), Phase::Settled);
    assert!(rig.drain().is_empty(), "nothing to redo for a settled dispute");
    rig.later(Duration::from_secs(10));
    rig.engine.on_tick(rig.now);
    assert!(matches!(rig.drain()[..], [Action::Prune(id)] if id == a.deal_id));
    assert!(rig.engine.is_empty());
}

/// Not a test: the memory and tick cost of 10,000 settled disputes with and
/// without eviction (`cargo test -p resolvd-engine --release -- --ignored
/// --nocapture settled_dispute_cost`). Each dispute has this node's partial
/// and two others' and a certificate, as on a real 4-member committee.
#[test]
#[ignore = "a measurement; prints figures"]
fn settled_dispute_cost() {
    fn rss_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            .unwrap_or(0)
    }
    // Evicted first: the allocator keeps what the kept run frees, which would
    // hide the evicted run's growth.
    for (label, retain) in
        [("evicted", Duration::ZERO), ("kept (no eviction)", Duration::from_secs(1 << 30))]
    {
        let cfg = EngineConfig { retain_settled: retain, ..EngineConfig::default() };
        let mut rig = Rig::with(Some(0), cfg);
        let before = rss_kib();
        // Wall time of the benchmark itself, not engine time.
        #[allow(clippy::disallowed_methods)]
        let started = Instant::now();
        for n in 0..10_000 {
            let a = numbered(n);
            let own = rig.sign_through(&a, ReexecVerdict::Reproduced);
            for s in [1, 2] {
                rig.gossip_partial(partial(s, EPOCH, own.commitment), origin(s as u8));
            }
            rig.batch();
            rig.engine.on_settled_log(a.deal_id, None, rig.now);
            rig.engine.on_tick(rig.now);
            rig.drain();
        }
        let fed = started.elapsed();
        let after = rss_kib();
        let ticks = 1_000;
        #[allow(clippy::disallowed_methods)]
        let started = Instant::now();
        for _ in 0..ticks {
            rig.engine.on_tick(rig.now);
        }
        let tick = started.elapsed() / ticks;
        #[allow(clippy::disallowed_macros)]
        {
            println!(
                "{label}: {} disputes held, RSS +{} KiB, tick {tick:?}, 10,000 disputes fed in {fed:?}",
                rig.engine.len(),
                after.saturating_sub(before),
            );
        }
    }
}

/// A replay request whose anchor document is a real EVM anchor of block 90.
fn anchored(a: &DisputeAnnouncement, chain_id: u64) -> (Box<ReexecRequestV1>, AnchorRef) {
    let evm = resolvd_proto::EvmAnchorV1 {
        chain_id,
        block_number: 90,
        block_hash: B256::repeat_byte(0x90),
        state_root: a.prestate_root,
        timestamp: 1,
        base_fee: 1,
        gas_limit: 30_000_000,
        coinbase: Address::ZERO,
        prevrandao: B256::ZERO,
        spec_id: resolvd_proto::EvmSpecId::Prague,
        excess_blob_gas: None,
        header: None,
    };
    let doc = resolvd_proto::PrestateAnchorV1 {
        backend_id: *resolvd_proto::EVM_BACKEND_ID,
        body: evm.to_canonical_bytes().into(),
    };
    let bytes = doc.to_canonical_bytes();
    let Gathered::Ready(mut request) = ready(a) else { unreachable!() };
    request.prestate_anchor_hash = resolvd_proto::content_hash("prestate-anchor", &bytes);
    request.prestate_anchor = bytes.into();
    let anchor = AnchorRef { chain_id, block_number: 90, block_hash: evm.block_hash };
    (request, anchor)
}

#[test]
fn an_anchor_is_replayed_only_once_final_and_a_non_canonical_one_is_never_signed() {
    let cfg = EngineConfig::default();
    let mut rig = Rig::with(Some(0), cfg.clone());
    let a = announcement(1);
    rig.confirm(&a);
    let (request, anchor) = anchored(&a, 31337);
    rig.engine.on_gathered(a.deal_id, Gathered::Ready(request.clone()), rig.now);
    let actions = rig.drain();
    assert!(
        matches!(&actions[..], [Action::CheckAnchor(_, x)] if *x == anchor),
        "the anchor is checked before any replay: {actions:?}"
    );
    // Not final: no replay; checked again after `retry`.
    let not_final = AnchorStatus::NotFinal { finalized: 80 };
    rig.engine.on_anchor_checked(request.clone(), Ok(not_final.clone()), rig.now);
    assert!(rig.drain().is_empty());
    assert_eq!(rig.phase(&a), Phase::Fetching);
    assert_eq!(rig.engine.view(&a.deal_id).unwrap().anchor, Some(not_final));
    rig.later(cfg.retry);
    rig.engine.on_tick(rig.now);
    assert!(rig.drain().iter().any(|x| matches!(x, Action::Gather(_))));
    rig.engine.on_gathered(a.deal_id, Gathered::Ready(request.clone()), rig.now);
    assert!(matches!(rig.drain()[..], [Action::CheckAnchor(..)]));
    // An RPC failure is an operational error: retried, never signed.
    rig.engine.on_anchor_checked(request.clone(), Err("timeout".into()), rig.now);
    assert!(rig.drain().is_empty());
    assert!(rig
        .engine
        .view(&a.deal_id)
        .unwrap()
        .last_error
        .as_deref()
        .unwrap()
        .contains("timeout"));
    // Final: replayed.
    rig.later(Duration::from_secs(60));
    rig.engine.on_tick(rig.now);
    rig.drain();
    rig.engine.on_gathered(a.deal_id, Gathered::Ready(request.clone()), rig.now);
    rig.drain();
    rig.engine.on_anchor_checked(request, Ok(AnchorStatus::Final), rig.now);
    assert!(matches!(rig.drain()[..], [Action::Replay(_)]));
    assert_eq!(rig.phase(&a), Phase::Replaying);

    // Not canonical: rejected for good, nothing replayed or signed, expires at the deadline.
    let b = announcement(2);
    rig.confirm(&b);
    let (request, _) = anchored(&b, 31337);
    rig.engine.on_gathered(b.deal_id, Gathered::Ready(request.clone()), rig.now);
    rig.drain();
    let rejected = AnchorStatus::NotCanonical {
        canonical: Some(B256::repeat_byte(0x91)),
        reason: "block 90 is another block".into(),
    };
    rig.engine.on_anchor_checked(request, Ok(rejected), rig.now);
    assert!(rig.drain().is_empty());
    assert_eq!(rig.phase(&b), Phase::AnchorRejected);
    for _ in 0..5 {
        rig.later(Duration::from_secs(60));
        rig.engine.on_tick(rig.now);
        let actions = rig.drain();
        assert!(
            actions
                .iter()
                .all(|x| !matches!(x, Action::Gather(_) | Action::Replay(_) | Action::Sign { .. })),
            "{actions:?}"
        );
    }
    rig.engine.on_head(200, b.resolve_deadline + EXPIRY_GRACE_SECS + 1);
    rig.engine.on_tick(rig.now);
    rig.drain();
    assert_eq!(rig.phase(&b), Phase::Expired);
}

#[test]
fn a_reorged_out_dispute_is_dropped_before_signing_and_a_signed_one_is_kept() {
    let mut rig = Rig::new(Some(0));
    // Replaying when its Disputed log disappears.
    let a = announcement(1);
    rig.confirm(&a);
    rig.engine.on_gathered(a.deal_id, ready(&a), rig.now);
    assert!(matches!(rig.drain()[..], [Action::Replay(_)]));
    // Signed already.
    let b = announcement(2);
    rig.sign_through(&b, ReexecVerdict::Reproduced);
    rig.drain();
    rig.engine.on_reorg(a.block_number, &[a.deal_id, b.deal_id], &[], rig.now);
    let actions = rig.drain();
    assert!(rig.engine.view(&a.deal_id).is_none(), "dropped");
    assert!(actions.iter().any(|x| matches!(x, Action::Prune(id) if *id == a.deal_id)));
    assert!(actions.iter().any(|x| matches!(x,
        Action::Confirm { source: ConfirmSource::Reorg, announcement, .. } if announcement.deal_id == a.deal_id)));
    assert_eq!(rig.phase(&b), Phase::Signed, "a signed dispute is kept");
    // The replay finishing late signs nothing; the chain says it is gone.
    rig.engine.on_replayed(a.deal_id, Ok(envelope(&a, ReexecVerdict::Reproduced)), rig.now);
    rig.engine.on_confirmed(
        a.clone(),
        ConfirmSource::Reorg,
        Ok(Confirmation::NotDisputed),
        rig.now,
    );
    assert!(rig.drain().iter().all(|x| !matches!(x, Action::Sign { .. })));
    assert!(rig.engine.view(&a.deal_id).is_none());
    // Challenged again later: handled afresh, once.
    let actions = rig.confirm(&a);
    assert!(actions.iter().any(|x| matches!(x, Action::Gather(_))), "{actions:?}");
    assert_eq!(rig.engine.len(), 2);
}

/// A dispute taken from gossip before the node's own watcher reached its
/// block, then reorged out: the watcher never handled that block, so its
/// reorg walk reports nothing. The scan of the block without the log is what
/// drops it, before any signature.
#[test]
fn a_gossiped_dispute_missing_from_the_blocks_the_watcher_scans_is_dropped_before_signing() {
    let mut rig = Rig::new(Some(0));
    let from_gossip = |rig: &mut Rig, a: &DisputeAnnouncement| {
        rig.engine.on_gossip(origin(a.deal_id[0]), Gossip::Dispute(a.clone()), rig.now);
        rig.drain();
        rig.engine.on_confirmed(
            a.clone(),
            ConfirmSource::Gossip,
            Ok(Confirmation::Disputed),
            rig.now,
        );
        rig.drain()
    };
    // Replaying when the watcher scans its block without its log.
    let gone = announcement(1);
    assert!(from_gossip(&mut rig, &gone).iter().any(|x| matches!(x, Action::Gather(_))));
    rig.engine.on_gathered(gone.deal_id, ready(&gone), rig.now);
    assert!(matches!(rig.drain()[..], [Action::Replay(_)]));
    // Its log is in the scanned blocks: kept.
    let there = announcement(2);
    from_gossip(&mut rig, &there);
    // Mined again at the same height, in another block: confirmed again.
    let moved = announcement(3);
    from_gossip(&mut rig, &moved);
    // Announced in a block the watcher has not reached: kept.
    let ahead = DisputeAnnouncement { block_number: 12, ..announcement(4) };
    from_gossip(&mut rig, &ahead);
    // Signed already: kept (protection holds).
    let signed = announcement(5);
    rig.sign_through(&signed, ReexecVerdict::Reproduced);
    rig.drain();

    let logs = [(there.deal_id, there.block_hash), (moved.deal_id, B256::repeat_byte(0x77))];
    rig.engine.on_logs_scanned(9, 11, &logs);
    let actions = rig.drain();
    let reconfirmed: Vec<B256> = actions
        .iter()
        .filter_map(|x| match x {
            Action::Confirm { source: ConfirmSource::Reorg, announcement, .. } => {
                Some(announcement.deal_id)
            }
            _ => None,
        })
        .collect();
    assert_eq!(reconfirmed, vec![gone.deal_id, moved.deal_id], "{actions:?}");
    for a in [&gone, &moved] {
        assert!(rig.engine.view(&a.deal_id).is_none(), "dropped");
        assert!(actions.iter().any(|x| matches!(x, Action::Prune(id) if *id == a.deal_id)));
    }
    for a in [&there, &ahead] {
        assert!(rig.engine.view(&a.deal_id).is_some(), "kept");
    }
    assert_eq!(rig.phase(&signed), Phase::Signed, "a signed dispute is kept");
    // The replay finishing late signs nothing; the chain says it is gone.
    rig.engine.on_replayed(gone.deal_id, Ok(envelope(&gone, ReexecVerdict::Reproduced)), rig.now);
    rig.engine.on_confirmed(
        gone.clone(),
        ConfirmSource::Reorg,
        Ok(Confirmation::NotDisputed),
        rig.now,
    );
    assert!(rig.drain().iter().all(|x| !matches!(x, Action::Sign { .. })));
    assert!(rig.engine.view(&gone.deal_id).is_none());
    // The next range holds `ahead`'s log: kept.
    rig.engine.on_logs_scanned(12, 12, &[(ahead.deal_id, ahead.block_hash)]);
    assert!(rig.drain().is_empty());
    assert!(rig.engine.view(&ahead.deal_id).is_some());
}

#[test]
fn a_reorged_out_settlement_reopens_submission() {
    let mut rig = Rig::new(Some(0));
    let a = announcement(1);
    let own = rig.sign_through(&a, ReexecVerdict::Reproduced);
    for s in [1, 2] {
        rig.gossip_partial(partial(s, EPOCH, own.commitment), origin(s as u8));
    }
    rig.batch();
    rig.engine.on_settled_log(a.deal_id, Some(B256::repeat_byte(0x55)), rig.now);
    rig.drain();
    assert_eq!(rig.phase(&a), Phase::Settled);
    rig.engine.on_reorg(a.block_number + 5, &[], &[a.deal_id], rig.now);
    assert_eq!(rig.phase(&a), Phase::Certified);
    rig.later(Duration::from_secs(60));
    rig.engine.on_tick(rig.now);
    assert!(rig.drain().iter().any(|x| matches!(x, Action::Submit { .. })), "resubmitted");
}

// ------------------------------------------------------------ commit-reveal

const WINDOW: Duration = Duration::from_millis(2_000);

fn commit_rig(me: usize) -> Rig {
    let mut rig = Rig::new(Some(me));
    rig.engine.set_commit_reveal(EPOCH, Some(WINDOW));
    rig
}

/// Gossips `p`'s signed commitment and runs the verification batch.
fn gossip_commit(rig: &mut Rig, p: &SignedVerdict, o: Origin) -> Vec<Action> {
    gossip_commit_msg(rig, signed_commit(p), o)
}

fn gossip_commit_msg(rig: &mut Rig, c: PartialCommit, o: Origin) -> Vec<Action> {
    rig.engine.on_gossip(o, Gossip::Commit(c), rig.now);
    let mut actions = rig.drain();
    actions.extend(rig.batch());
    actions
}

fn published_verdicts(actions: &[Action]) -> Vec<u32> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Publish(Gossip::Verdict(p)) => Some(p.signer_index),
            _ => None,
        })
        .collect()
}

fn commit_view(rig: &Rig, a: &DisputeAnnouncement) -> CommitReveal {
    rig.engine.view(&a.deal_id).unwrap().commit_reveal.clone().unwrap()
}

#[test]
fn commit_reveal_commits_first_reveals_at_threshold_and_counts_only_timely_commitments() {
    let mut rig = commit_rig(0);
    let a = announcement(1);
    let own = rig.sign_through(&a, ReexecVerdict::Reproduced);
    // Signed: the signed commitment is gossiped, the partial is not.
    let actions = rig.drain();
    assert!(
        matches!(&actions[..], [Action::Publish(Gossip::Commit(c))] if *c == signed_commit(&own)),
        "{actions:?}"
    );
    let c = own.commitment;
    let (p1, p2, lazy) = (partial(1, EPOCH, c), partial(2, EPOCH, c), partial(3, EPOCH, c));
    // Signer 1 commits: 2 of 4 committed, below the threshold: no reveal yet.
    let actions = gossip_commit(&mut rig, &p1, origin(1));
    assert_eq!(reports(&actions), vec![(Topic::Commits, Validation::Accept)]);
    assert!(published_verdicts(&actions).is_empty());
    // A commitment of a non-member is rejected before it is held; a repeat
    // of a held one is ignored.
    let mut foreign = signed_commit(&p1);
    foreign.signer_index = 9;
    rig.engine.on_gossip(origin(9), Gossip::Commit(foreign), rig.now);
    assert_eq!(reports(&rig.drain()), vec![(Topic::Commits, Validation::Reject)]);
    let actions = gossip_commit(&mut rig, &p1, origin(11));
    assert_eq!(reports(&actions), vec![(Topic::Commits, Validation::Ignore)]);
    // Signer 2 commits: 3 of 4 reach the threshold: this node reveals, and
    // its own reveal verifies in the same batch: the reveal phase.
    let actions = gossip_commit(&mut rig, &p2, origin(2));
    assert_eq!(published_verdicts(&actions), vec![0]);
    assert!(certificate_of(&actions).is_none());
    let cr = commit_view(&rig, &a);
    assert!(cr.revealed && cr.reveal_phase_ms.is_some());
    assert_eq!(cr.committed.keys().copied().collect::<Vec<_>>(), vec![0, 1, 2]);
    // The lazy signer 3 copies the revealed commitment: its commitment is late.
    rig.later(Duration::from_millis(30));
    let actions = gossip_commit(&mut rig, &lazy, origin(3));
    assert_eq!(reports(&actions), vec![(Topic::Commits, Validation::Accept)]);
    // Another commitment in the same signer's name is not verified or spread.
    rig.engine.on_gossip(origin(33), Gossip::Commit(forged_commit(&lazy, 1)), rig.now);
    assert_eq!(reports(&rig.drain()), vec![(Topic::Commits, Validation::Ignore)]);
    rig.gossip_partial(lazy.clone(), origin(13));
    rig.gossip_partial(p1.clone(), origin(21));
    let actions = rig.batch();
    // Both verify (accepted: a late reveal is not invalid), neither certifies
    // alone with signer 0: 0 + 1 counted = 2 of 4.
    assert_eq!(
        reports(&actions),
        vec![(Topic::Verdicts, Validation::Accept), (Topic::Verdicts, Validation::Accept)]
    );
    assert!(certificate_of(&actions).is_none(), "the lazy reveal must not count");
    let cr = commit_view(&rig, &a);
    assert_eq!(cr.late, vec![3]);
    assert_eq!(cr.uncounted, vec![3]);
    // Signer 2's timely reveal completes the certificate without signer 3.
    rig.gossip_partial(p2, origin(22));
    let qc = certificate_of(&rig.batch()).expect("certificate");
    assert_eq!(qc.non_signers, vec![3]);
    // The fallback never runs once a certificate exists.
    rig.later(WINDOW * (REVEAL_FALLBACK_WINDOWS + 1));
    rig.engine.on_tick(rig.now);
    rig.drain();
    assert!(!commit_view(&rig, &a).fallback);
    // Re-gossip after the reveal sends the partial, not the commitment.
    rig.later(EngineConfig::default().republish);
    rig.engine.on_tick(rig.now);
    assert!(published_verdicts(&rig.drain()).contains(&0));
}

/// A node whose own commitment comes after the digest was revealed (it
/// replayed late, or copied a reveal instead of replaying) does not count its
/// own partial either: its certificate is the one every other honest node
/// builds, without it.
#[test]
fn an_own_partial_committed_after_the_reveal_does_not_count_here_either() {
    let mut rig = commit_rig(3);
    let a = announcement(14);
    let actions = rig.confirm(&a);
    assert!(actions.iter().any(|x| matches!(x, Action::Gather(_))), "{actions:?}");
    rig.engine.on_gathered(a.deal_id, ready(&a), rig.now);
    assert!(matches!(rig.drain()[..], [Action::Replay(_)]));
    let c = commitment(&a, ReexecVerdict::Reproduced);
    let honest: Vec<SignedVerdict> = (0..3).map(|s| partial(s, EPOCH, c)).collect();
    for (i, p) in honest.iter().enumerate() {
        gossip_commit(&mut rig, p, origin(i as u8 + 1));
    }
    // Signers 0 and 1 reveal: the reveal phase, 2 of 4 counted.
    rig.later(Duration::from_millis(10));
    rig.gossip_partial(honest[0].clone(), origin(1));
    rig.gossip_partial(honest[1].clone(), origin(2));
    assert!(certificate_of(&rig.batch()).is_none());
    // This node's replay finishes now: it commits, and reveals at once (its
    // digest is out), but its commitment is late.
    rig.later(Duration::from_millis(10));
    rig.engine.on_replayed(a.deal_id, Ok(envelope(&a, ReexecVerdict::Reproduced)), rig.now);
    let sign = rig.drain().into_iter().find_map(|x| match x {
        Action::Sign { commitment, commit, .. } => Some((commitment, commit)),
        _ => None,
    });
    assert_eq!(sign, Some((c, true)));
    let own = partial(3, EPOCH, c);
    rig.engine.on_signed(own.clone(), Some(signed_commit(&own)), rig.now);
    let mut actions = rig.drain();
    actions.extend(rig.batch());
    assert!(published_verdicts(&actions).contains(&3), "revealed: {actions:?}");
    assert!(certificate_of(&actions).is_none(), "a late own partial must not count");
    let cr = commit_view(&rig, &a);
    assert_eq!(cr.late, vec![3]);
    assert_eq!(cr.uncounted, vec![3]);
    // Signer 2's reveal completes the certificate of the timely three.
    rig.gossip_partial(honest[2].clone(), origin(3));
    let qc = certificate_of(&rig.batch()).expect("certificate");
    assert_eq!(qc.non_signers, vec![3]);
}

/// A peer with no stake forges commitments in every other member's name
/// (more per signer than the slots once held for unsigned commitments),
/// before the real ones: each is verified and rejected (its sender pays),
/// none counts towards the threshold (this node does not reveal early), the
/// real commitments still count, and a real commitment replayed onto
/// another deal is rejected too.
#[test]
fn forged_commitments_are_rejected_and_never_count_or_crowd_out_the_real_ones() {
    let mut rig = commit_rig(0);
    let a = announcement(11);
    let own = rig.sign_through(&a, ReexecVerdict::Reproduced);
    rig.drain();
    let c = own.commitment;
    let honest: Vec<SignedVerdict> = (1..4).map(|s| partial(s, EPOCH, c)).collect();
    for p in &honest {
        for salt in 0..5 {
            rig.engine.on_gossip(
                origin(100 + salt),
                Gossip::Commit(forged_commit(p, salt)),
                rig.now,
            );
        }
    }
    let mut actions = rig.drain();
    assert!(reports(&actions).is_empty(), "verified before any verdict");
    actions.extend(rig.batch());
    let verdicts = reports(&actions);
    assert_eq!(verdicts.len(), 15);
    assert!(verdicts.iter().all(|v| *v == (Topic::Commits, Validation::Reject)));
    assert!(published_verdicts(&actions).is_empty(), "forgeries must not close the commit phase");
    let cr = commit_view(&rig, &a);
    assert_eq!(cr.committed.keys().copied().collect::<Vec<_>>(), vec![0]);
    assert!(!cr.revealed && cr.reveal_phase_ms.is_none());
    // A genuine commitment of signer 1, replayed onto another deal the node
    // knows: the deal is signed, so it fails there.
    let b = announcement(12);
    rig.confirm(&b);
    let mut replayed = signed_commit(&honest[0]);
    replayed.deal_id = b.deal_id;
    let actions = gossip_commit_msg(&mut rig, replayed, origin(7));
    assert_eq!(reports(&actions), vec![(Topic::Commits, Validation::Reject)]);
    // The real commitments of 1 and 2 count: threshold, reveal.
    gossip_commit(&mut rig, &honest[0], origin(1));
    let actions = gossip_commit(&mut rig, &honest[1], origin(2));
    assert_eq!(reports(&actions), vec![(Topic::Commits, Validation::Accept)]);
    assert_eq!(published_verdicts(&actions), vec![0]);
    rig.later(Duration::from_millis(10));
    rig.gossip_partial(honest[0].clone(), origin(21));
    rig.gossip_partial(honest[1].clone(), origin(22));
    let qc = certificate_of(&rig.batch()).expect("certificate from the timely committers");
    assert_eq!(qc.non_signers, vec![3]);
}

/// The reveal phase begins when the first reveal that verifies *arrived*,
/// not when its batch ran: a copier whose commitment lands in the
/// verification window is late. A forged reveal opens nothing.
#[test]
fn the_reveal_phase_starts_at_the_first_valid_reveals_arrival() {
    let mut rig = commit_rig(0);
    let a = announcement(13);
    let own = rig.sign_through(&a, ReexecVerdict::Reproduced);
    rig.drain();
    let c = own.commitment;
    let (p1, p2, lazy) = (partial(1, EPOCH, c), partial(2, EPOCH, c), partial(3, EPOCH, c));
    gossip_commit(&mut rig, &p1, origin(1));
    // A forged reveal of signer 2 (a signature by another key) arrives first:
    // rejected, no reveal phase.
    rig.later(Duration::from_millis(5));
    let mut fake = p2.clone();
    fake.signature = key(50).sign(&c.eip712_digest(&domain())).compress();
    rig.gossip_partial(fake, origin(40));
    assert_eq!(reports(&rig.batch()), vec![(Topic::Verdicts, Validation::Reject)]);
    assert!(commit_view(&rig, &a).reveal_phase_ms.is_none());
    // Signer 1 reveals early (e.g. its window passed); 2 ms later, before the
    // batch runs, a copier's commitment arrives; then the batch runs.
    rig.later(Duration::from_millis(5));
    rig.gossip_partial(p1.clone(), origin(21));
    rig.later(Duration::from_millis(2));
    rig.engine.on_gossip(origin(3), Gossip::Commit(signed_commit(&lazy)), rig.now);
    rig.drain();
    rig.later(BATCH_WINDOW);
    let actions = rig.batch();
    assert_eq!(published_verdicts(&actions), vec![0], "a reveal was seen: this node reveals");
    let cr = commit_view(&rig, &a);
    assert_eq!(cr.late, vec![3], "the copier's commitment came after the first reveal arrived");
    assert_eq!(cr.committed.keys().copied().collect::<Vec<_>>(), vec![0, 1]);
    // The copier reveals: verified, not counted; no certificate from 0, 1, 3.
    rig.gossip_partial(lazy, origin(13));
    assert!(certificate_of(&rig.batch()).is_none());
    assert_eq!(commit_view(&rig, &a).uncounted, vec![3]);
}

/// A reveal counts if its commitment arrived no later than the reveal
/// phase began: a commitment and its reveal taken at one instant (one direct
/// request) count even when that reveal opens the phase, and a commitment
/// that arrives after its own reveal does not.
#[test]
fn a_commitment_taken_with_its_reveal_counts_and_one_after_it_does_not() {
    let mut rig = commit_rig(0);
    let a = announcement(14);
    let own = rig.sign_through(&a, ReexecVerdict::Reproduced);
    rig.drain();
    let c = own.commitment;
    let (p1, p2) = (partial(1, EPOCH, c), partial(2, EPOCH, c));
    gossip_commit(&mut rig, &p1, origin(1));
    rig.later(Duration::from_millis(5));
    // Signer 2 commits and reveals at once (it replayed last): both arrive
    // in one request, the reveal opening the reveal phase here.
    rig.engine.on_gossip(origin(2), Gossip::Commit(signed_commit(&p2)), rig.now);
    rig.gossip_partial(p2.clone(), origin(2));
    rig.later(BATCH_WINDOW);
    rig.batch();
    let cr = commit_view(&rig, &a);
    assert!(cr.reveal_phase_ms.is_some());
    assert_eq!(cr.committed.keys().copied().collect::<Vec<_>>(), vec![0, 1, 2]);
    assert!(cr.uncounted.is_empty() && cr.late.is_empty(), "{cr:?}");

    // The same, but the commitment arrives 1 ms after the reveal.
    let mut rig = commit_rig(0);
    let own = rig.sign_through(&a, ReexecVerdict::Reproduced);
    rig.drain();
    gossip_commit(&mut rig, &partial(1, EPOCH, own.commitment), origin(1));
    rig.later(Duration::from_millis(5));
    rig.gossip_partial(p2.clone(), origin(2));
    rig.later(Duration::from_millis(1));
    rig.engine.on_gossip(origin(2), Gossip::Commit(signed_commit(&p2)), rig.now);
    rig.later(BATCH_WINDOW);
    rig.batch();
    let cr = commit_view(&rig, &a);
    assert_eq!((cr.late.clone(), cr.uncounted.clone()), (vec![2], vec![2]), "{cr:?}");
}

/// A dispute runs with the commit-reveal setting its own epoch pins, not
/// the one of the epoch that is current when this node starts it; one
/// started before its epoch's setting is known takes it when it arrives.
#[test]
fn each_dispute_uses_the_commit_reveal_setting_of_its_epoch() {
    let mut rig = Rig::new(Some(0));
    rig.engine.set_commit_reveal(EPOCH, Some(WINDOW));
    rig.engine.set_commit_reveal(EPOCH + 1, None);
    rig.engine.on_epoch(EPOCH + 1);
    let a = announcement(0x41);
    assert_eq!(a.epoch, EPOCH);
    rig.confirm(&a);
    let window = rig.engine.view(&a.deal_id).unwrap().commit_reveal.map(|c| c.window_ms);
    assert_eq!(window, Some(WINDOW.as_millis() as u64), "the pinned epoch's window");
    // Epoch EPOCH + 2's setting is not known yet when its dispute starts.
    rig.engine.on_epoch(EPOCH + 2);
    let b = DisputeAnnouncement { epoch: EPOCH + 2, ..announcement(0x42) };
    rig.confirm(&b);
    assert!(rig.engine.view(&b.deal_id).unwrap().commit_reveal.is_none());
    rig.engine.set_commit_reveal(EPOCH + 2, Some(WINDOW * 2));
    let window = rig.engine.view(&b.deal_id).unwrap().commit_reveal.map(|c| c.window_ms);
    assert_eq!(window, Some(2 * WINDOW.as_millis() as u64));
    // A known setting is never changed under a running dispute.
    rig.engine.set_commit_reveal(EPOCH, None);
    assert!(rig.engine.view(&a.deal_id).unwrap().commit_reveal.is_some());
}

#[test]
fn commit_reveal_reveals_after_the_window_and_only_the_late_fallback_counts_late_reveals() {
    let cfg = EngineConfig { republish: WINDOW / 4, ..EngineConfig::default() };
    let mut rig = Rig::with(Some(0), cfg);
    rig.engine.set_commit_reveal(EPOCH, Some(WINDOW));
    let a = announcement(2);
    let own = rig.sign_through(&a, ReexecVerdict::Failed);
    rig.drain();
    let c = own.commitment;
    // Nobody else commits in time: re-gossip before the reveal sends the
    // commitment again, not the partial...
    rig.later(WINDOW / 2);
    rig.engine.on_tick(rig.now);
    let actions = rig.drain();
    assert!(
        actions
            .iter()
            .any(|x| matches!(x, Action::Publish(Gossip::Commit(x)) if *x == signed_commit(&own))),
        "{actions:?}"
    );
    assert!(published_verdicts(&actions).is_empty(), "not before the window");
    // ... and the node reveals when its window passes.
    rig.later(WINDOW / 2);
    rig.engine.on_tick(rig.now);
    assert_eq!(published_verdicts(&rig.drain()), vec![0], "window passed: revealed");
    rig.batch();
    // Signer 1 reveals in the same instant (its commitment was lost): it
    // arrived no later than the reveal phase began. Signers 2 and 3 commit
    // and reveal afterwards (copies, for all this node can tell).
    rig.gossip_partial(partial(1, EPOCH, c), origin(11));
    rig.batch();
    rig.later(Duration::from_millis(20));
    for s in [2, 3] {
        let p = partial(s, EPOCH, c);
        gossip_commit(&mut rig, &p, origin(s as u8));
        rig.gossip_partial(p, origin(10 + s as u8));
    }
    assert!(certificate_of(&rig.batch()).is_none());
    assert_eq!(commit_view(&rig, &a).uncounted, vec![1, 2, 3]);
    // The fallback counts signer 1's reveal, never the later ones: 0 + 1 =
    // 2 of 4, no certificate (honest nodes still hold the copier out).
    rig.later(WINDOW * REVEAL_FALLBACK_WINDOWS);
    rig.engine.on_tick(rig.now);
    let actions = rig.drain();
    assert!(certificate_of(&actions).is_none(), "a late reveal never counts");
    assert!(commit_view(&rig, &a).fallback);
    let persisted: Vec<u32> = actions
        .iter()
        .filter_map(|x| match x {
            Action::PersistPartial(p) => Some(p.signer_index),
            _ => None,
        })
        .collect();
    assert_eq!(persisted, vec![1]);
    // Still no certificate 6 windows after the reveal phase began: the late
    // fallback counts every verified reveal (liveness over excluding a
    // copier), and the deal certifies.
    rig.later(WINDOW * (REVEAL_LATE_FALLBACK_WINDOWS - REVEAL_FALLBACK_WINDOWS));
    rig.engine.on_tick(rig.now);
    let qc = certificate_of(&rig.drain()).expect("the late fallback certifies");
    assert_eq!(qc.non_signers, vec![3], "threshold met at signer 2");
    let cr = commit_view(&rig, &a);
    assert!(cr.late_fallback && cr.uncounted.is_empty());
}

/// A member that reveals another digest at once (a wrong outcome) does not
/// make the honest commitments late: a commitment counts for the digest it
/// opens to if it arrived before that digest's first reveal.
#[test]
fn an_early_reveal_of_another_digest_does_not_make_honest_commitments_late() {
    let mut rig = commit_rig(0);
    let a = announcement(14);
    let own = rig.sign_through(&a, ReexecVerdict::Reproduced);
    rig.drain();
    let c = own.commitment;
    // Signer 3 commits to and reveals a Failed verdict at once.
    let wrong = partial(3, EPOCH, commitment(&a, ReexecVerdict::Failed));
    gossip_commit(&mut rig, &wrong, origin(3));
    rig.later(Duration::from_millis(5));
    rig.gossip_partial(wrong, origin(13));
    rig.batch();
    assert!(commit_view(&rig, &a).reveal_phase_ms.is_some());
    // Signers 1 and 2 commit afterwards, then reveal the Reproduced verdict:
    // nobody had revealed that digest before their commitments arrived.
    rig.later(Duration::from_millis(20));
    let (p1, p2) = (partial(1, EPOCH, c), partial(2, EPOCH, c));
    gossip_commit(&mut rig, &p1, origin(1));
    gossip_commit(&mut rig, &p2, origin(2));
    rig.later(Duration::from_millis(20));
    rig.gossip_partial(p1, origin(21));
    rig.gossip_partial(p2, origin(22));
    let qc = certificate_of(&rig.batch()).expect("certified without a fallback");
    assert_eq!(qc.non_signers, vec![3]);
    let cr = commit_view(&rig, &a);
    assert!(!cr.fallback && cr.uncounted.is_empty(), "{cr:?}");
}

#[test]
fn commit_reveal_holds_early_commitments_and_restores_the_same_commitment() {
    let mut rig = commit_rig(0);
    let a = announcement(3);
    let c = commitment(&a, ReexecVerdict::Reproduced);
    // Commitments of 1 and 2 arrive before this node knows the dispute: held,
    // verified and counted once it starts (they came before any reveal).
    for s in [1, 2] {
        let actions = gossip_commit(&mut rig, &partial(s, EPOCH, c), origin(s as u8));
        assert!(reports(&actions).is_empty(), "held, reported on release");
    }
    let mut actions = rig.confirm(&a);
    actions.extend(rig.batch());
    assert_eq!(
        reports(&actions),
        vec![(Topic::Commits, Validation::Accept), (Topic::Commits, Validation::Accept)]
    );
    rig.engine.on_gathered(a.deal_id, ready(&a), rig.now);
    rig.drain();
    rig.engine.on_replayed(a.deal_id, Ok(envelope(&a, ReexecVerdict::Reproduced)), rig.now);
    rig.drain();
    let own = partial(0, EPOCH, c);
    rig.engine.on_signed(own.clone(), Some(signed_commit(&own)), rig.now);
    // Own commitment + two held ones = threshold: commit and reveal at once.
    let actions = rig.drain();
    assert!(matches!(&actions[0], Action::Publish(Gossip::Commit(x)) if *x == signed_commit(&own)));
    assert_eq!(published_verdicts(&actions), vec![0]);

    // A restarted node signs the same partial again for a signed commitment
    // (BLS is deterministic; protection allows the same commitment), sends
    // the commitment, not the partial, and counts the stored partials'
    // commitments.
    let mut again = commit_rig(0);
    again.engine.restore(a.clone(), DisputeStatus::Active, vec![own.clone()], None, again.now);
    let actions = again.drain();
    assert!(
        actions.iter().any(|x| matches!(x, Action::Sign { commit: true, index: 0, .. })),
        "{actions:?}"
    );
    assert!(published_verdicts(&actions).is_empty());
    again.engine.on_signed(own.clone(), Some(signed_commit(&own)), again.now);
    let actions = again.drain();
    assert!(
        actions
            .iter()
            .any(|x| matches!(x, Action::Publish(Gossip::Commit(p)) if *p == signed_commit(&own))),
        "{actions:?}"
    );
    assert!(published_verdicts(&actions).is_empty());
}

#[test]
fn without_commit_reveal_commitments_are_ignored_and_partials_count_at_once() {
    let mut rig = Rig::new(Some(0));
    let a = announcement(4);
    let own = rig.sign_through(&a, ReexecVerdict::Reproduced);
    assert_eq!(published_verdicts(&rig.drain()), vec![0]);
    let p1 = partial(1, EPOCH, own.commitment);
    let actions = gossip_commit(&mut rig, &p1, origin(1));
    assert_eq!(reports(&actions), vec![(Topic::Commits, Validation::Ignore)]);
    rig.gossip_partial(p1, origin(2));
    rig.gossip_partial(partial(2, EPOCH, own.commitment), origin(3));
    assert!(certificate_of(&rig.batch()).is_some());
}

#[test]
fn a_certificate_is_submitted_with_its_non_signers_as_a_position_bitmap() {
    let cfg = EngineConfig { submit_slot: Duration::from_secs(4), ..EngineConfig::default() };
    let mut rig = Rig::with(Some(0), cfg);
    let a = announcement(0x19);
    let own = rig.sign_through(&a, ReexecVerdict::Reproduced);
    rig.drain();
    for s in [1, 2] {
        rig.gossip_partial(partial(s, EPOCH, own.commitment), origin(s as u8));
    }
    assert_eq!(certificate_of(&rig.batch()).expect("3 of 4").non_signers, vec![3]);
    rig.later(Duration::from_secs(4 * 4));
    rig.engine.on_tick(rig.now);
    let submitted = rig.drain().into_iter().find_map(|x| match x {
        Action::Submit { certificate, non_signers, .. } => Some((certificate, non_signers)),
        _ => None,
    });
    let (qc, bitmap) = submitted.expect("submitted at its slot");
    assert_eq!(qc.non_signers, vec![3]);
    // Member 3 is at position 3 of a four-member committee: one byte, bit 3.
    assert_eq!(bitmap, vec![0b1000]);
}

#[test]
fn the_submitted_certificate_takes_in_signers_verified_after_the_threshold() {
    let cfg = EngineConfig { submit_slot: Duration::from_secs(4), ..EngineConfig::default() };
    let mut rig = Rig::with(Some(0), cfg);
    let a = announcement(9);
    let own = rig.sign_through(&a, ReexecVerdict::Reproduced);
    rig.drain();
    for s in [1, 2] {
        rig.gossip_partial(partial(s, EPOCH, own.commitment), origin(s as u8));
    }
    let qc = certificate_of(&rig.batch()).expect("certificate at 3 of 4");
    assert_eq!(qc.non_signers, vec![3]);
    // The fourth signer comes after the threshold, before this node's slot.
    rig.gossip_partial(partial(3, EPOCH, own.commitment), origin(3));
    rig.batch();
    rig.later(Duration::from_secs(4 * 4));
    rig.engine.on_tick(rig.now);
    let submitted = rig.drain().into_iter().find_map(|x| match x {
        Action::Submit { certificate, .. } => Some(*certificate),
        _ => None,
    });
    let submitted = submitted.expect("submitted at its slot");
    assert!(submitted.non_signers.is_empty(), "{:?}", submitted.non_signers);
    submitted.verify(&committee(EPOCH, 4), &domain()).unwrap();
    assert_eq!(rig.engine.view(&a.deal_id).unwrap().certificate_non_signers, Some(vec![]));
}

#[test]
fn a_built_certificate_is_gossiped_at_once_by_the_first_submitters_only_the_rest_at_their_slot() {
    let cfg = EngineConfig::default();
    let members = [0u32, 1, 2, 3];
    let mut seen_ranks = HashSet::new();
    for deal in 1..=6u8 {
        let a = announcement(deal);
        for me in 0..4usize {
            let rank = submit_rank(&order_seed(&a), &members, me as u32);
            seen_ranks.insert(rank);
            let mut rig = Rig::new(Some(me));
            let own = rig.sign_through(&a, ReexecVerdict::Reproduced);
            rig.drain();
            for s in (0..4).filter(|&s| s != me).take(2) {
                rig.gossip_partial(partial(s, EPOCH, own.commitment), origin(s as u8));
            }
            let actions = rig.batch();
            assert!(certificate_of(&actions).is_some(), "threshold reached");
            let at_once = rank < CERTIFICATE_GOSSIPERS;
            assert_eq!(
                gossips_certificate(&actions),
                at_once,
                "deal {deal}, member {me}, rank {rank}"
            );
            if at_once {
                // Re-gossiped with the partial while the dispute is open.
                rig.later(cfg.republish);
                rig.engine.on_tick(rig.now);
                assert!(gossips_certificate(&rig.drain()), "republished");
                continue;
            }
            // Not before its submit slot (republish included)...
            let slot = cfg.widen_wait + submit_delay(cfg.submit_slot, rank);
            rig.later(slot - Duration::from_millis(1));
            rig.engine.on_tick(rig.now);
            assert!(!gossips_certificate(&rig.drain()), "rank {rank} before its slot");
            // ... then with its submission, and republished after that.
            rig.later(Duration::from_millis(1));
            rig.engine.on_tick(rig.now);
            let actions = rig.drain();
            assert!(gossips_certificate(&actions), "rank {rank} at its slot: {actions:?}");
            assert!(actions.iter().any(|x| matches!(x, Action::Submit { .. })));
            rig.later(cfg.republish);
            rig.engine.on_tick(rig.now);
            assert!(gossips_certificate(&rig.drain()), "republished");
        }
    }
    assert_eq!(seen_ranks.len(), 4, "every rank was tried");
}

#[test]
fn a_certificate_from_a_peer_is_never_published_again() {
    let cfg = EngineConfig::default();
    let a = announcement(1);
    let members = [0u32, 1, 2, 3];
    let me = (0..4).max_by_key(|&m| submit_rank(&order_seed(&a), &members, m)).unwrap();
    let rank = submit_rank(&order_seed(&a), &members, me);
    let mut rig = Rig::new(Some(me as usize));
    rig.sign_through(&a, ReexecVerdict::Reproduced);
    rig.drain();
    let qc = certificate(&a, &[0, 1, 2, 3]);
    rig.engine.on_gossip(origin(9), Gossip::Certificate(Box::new(qc.to_wire())), rig.now);
    let actions = rig.drain();
    assert_eq!(reports(&actions), vec![(Topic::Certificates, Validation::Accept)]);
    assert!(!gossips_certificate(&actions), "gossipsub forwards it");
    // Not at its slot (it submits), nor with the republished partial.
    rig.later(submit_delay(cfg.submit_slot, rank));
    rig.engine.on_tick(rig.now);
    let actions = rig.drain();
    assert!(actions.iter().any(|x| matches!(x, Action::Submit { .. })), "{actions:?}");
    assert!(!gossips_certificate(&actions));
    rig.later(cfg.republish);
    rig.engine.on_tick(rig.now);
    let actions = rig.drain();
    assert!(!gossips_certificate(&actions));
    assert!(published_verdicts(&actions).contains(&me), "the own partial still is: {actions:?}");
}

#[test]
fn partials_wait_to_be_batched_unless_they_could_complete_the_certificate() {
    let mut rig = Rig::new(None);
    let a = announcement(11);
    rig.confirm(&a);
    rig.drain();
    let c = commitment(&a, ReexecVerdict::Reproduced);
    let t0 = rig.now;
    // 1 and 2 of 4 cannot reach the threshold (3 of 4): verified together later.
    rig.gossip_partial(partial(1, EPOCH, c), origin(1));
    assert_eq!(rig.engine.batch_due(), Some(t0 + BATCH_WAIT));
    rig.later(Duration::from_millis(50));
    rig.gossip_partial(partial(2, EPOCH, c), origin(2));
    assert_eq!(rig.engine.batch_due(), Some(t0 + BATCH_WAIT), "the earlier deadline holds");
    // The third could complete it: the batch is due within the short window.
    rig.gossip_partial(partial(3, EPOCH, c), origin(3));
    assert_eq!(rig.engine.batch_due(), Some(rig.now + BATCH_WINDOW));
    let actions = rig.batch();
    let qc = certificate_of(&actions).expect("certificate from one batch of three");
    assert_eq!(qc.non_signers, vec![0]);
    assert_eq!(reports(&actions).iter().filter(|(_, x)| *x == Validation::Accept).count(), 3);
    assert_eq!(rig.engine.batch_due(), None);
    // After the certificate a late partial is not urgent.
    rig.gossip_partial(partial(0, EPOCH, c), origin(4));
    assert_eq!(rig.engine.batch_due(), Some(rig.now + BATCH_WAIT));
    // A conflicting digest below the threshold waits too.
    let other = commitment(&a, ReexecVerdict::Failed);
    rig.gossip_partial(partial(2, EPOCH, other), origin(5));
    assert_eq!(rig.engine.batch_due(), Some(rig.now + BATCH_WAIT));

    // A partial of this node's own key (a possible doppelgänger) does not wait.
    let cfg = EngineConfig { detect_doppelganger: true, ..EngineConfig::default() };
    let mut rig = Rig::with(Some(0), cfg);
    rig.confirm(&a);
    rig.drain();
    rig.gossip_partial(partial(1, EPOCH, c), origin(1));
    assert_eq!(rig.engine.batch_due(), Some(rig.now + BATCH_WAIT));
    rig.gossip_partial(partial(0, EPOCH, other), origin(2));
    assert_eq!(rig.engine.batch_due(), Some(rig.now + BATCH_WINDOW));
    rig.batch();
    assert!(rig.engine.doppelganger().is_some(), "detected in the short window");
}

/// Signatures asked for during the doppelgänger wait leave the engine at the
/// first tick after it, not before.
#[test]
fn signing_is_held_until_the_doppelganger_wait_is_over() {
    let cfg = EngineConfig { detect_doppelganger: true, ..EngineConfig::default() };
    let mut rig = Rig::with(Some(0), cfg);
    let wait = Duration::from_secs(10);
    rig.engine.hold_signing_until(rig.now + wait);
    let a = announcement(26);
    rig.confirm(&a);
    rig.engine.on_gathered(a.deal_id, ready(&a), rig.now);
    rig.drain();
    rig.engine.on_replayed(a.deal_id, Ok(envelope(&a, ReexecVerdict::Reproduced)), rig.now);
    let signs =
        |actions: &[Action]| actions.iter().filter(|x| matches!(x, Action::Sign { .. })).count();
    assert_eq!(signs(&rig.drain()), 0, "held during the wait");
    assert!(rig.engine.signing_held());
    rig.later(wait - Duration::from_millis(1));
    rig.engine.on_tick(rig.now);
    assert_eq!(signs(&rig.drain()), 0, "still held just before the end");
    rig.later(Duration::from_millis(1));
    rig.engine.on_tick(rig.now);
    assert_eq!(signs(&rig.drain()), 1, "made once the wait is over");
    assert!(!rig.engine.signing_held());
}

/// A partial of this node's key that arrived just before the wait ends and
/// is not verified yet keeps the signatures held: the tick at the end of the
/// wait runs before the batch, which then finds the other instance.
#[test]
fn the_wait_does_not_end_while_a_partial_of_the_own_key_waits_for_its_batch() {
    let cfg = EngineConfig { detect_doppelganger: true, ..EngineConfig::default() };
    let mut rig = Rig::with(Some(0), cfg);
    let wait = Duration::from_secs(10);
    rig.engine.hold_signing_until(rig.now + wait);
    let a = announcement(28);
    rig.confirm(&a);
    rig.engine.on_gathered(a.deal_id, ready(&a), rig.now);
    rig.drain();
    rig.engine.on_replayed(a.deal_id, Ok(envelope(&a, ReexecVerdict::Reproduced)), rig.now);
    rig.drain();
    rig.later(wait - Duration::from_millis(1));
    rig.gossip_partial(partial(0, EPOCH, commitment(&a, ReexecVerdict::Failed)), origin(1));
    rig.later(Duration::from_millis(1));
    rig.engine.on_tick(rig.now);
    assert!(rig.drain().iter().all(|x| !matches!(x, Action::Sign { .. })), "held until verified");
    assert!(rig.engine.signing_held());
    rig.batch();
    assert!(rig.engine.doppelganger().is_some());
    rig.engine.on_tick(rig.now);
    assert!(rig.drain().iter().all(|x| !matches!(x, Action::Sign { .. })), "never signed");
    assert!(!rig.engine.signing_held());
}

/// A partial of this node's key seen during the wait: the held signatures
/// are never made.
#[test]
fn a_doppelganger_seen_during_the_wait_drops_the_held_signatures() {
    let cfg = EngineConfig { detect_doppelganger: true, ..EngineConfig::default() };
    let mut rig = Rig::with(Some(0), cfg);
    let wait = Duration::from_secs(10);
    rig.engine.hold_signing_until(rig.now + wait);
    let a = announcement(27);
    rig.confirm(&a);
    rig.engine.on_gathered(a.deal_id, ready(&a), rig.now);
    rig.drain();
    rig.engine.on_replayed(a.deal_id, Ok(envelope(&a, ReexecVerdict::Reproduced)), rig.now);
    rig.drain();
    // The same key signed elsewhere.
    rig.gossip_partial(partial(0, EPOCH, commitment(&a, ReexecVerdict::Failed)), origin(1));
    rig.batch();
    assert!(rig.engine.doppelganger().is_some());
    rig.later(wait);
    rig.engine.on_tick(rig.now);
    assert!(rig.drain().iter().all(|x| !matches!(x, Action::Sign { .. })), "never signed");
    assert!(!rig.engine.signing_held());
}

// ------------------------------------------------------------ gossip and buffers

/// A forged partial waiting in a batch does not take the genuine one of the
/// same signer and digest down with it: each message is verified and judged
/// on its own, and each verdict goes to that message's own origins.
#[test]
fn a_forged_partial_in_the_batch_does_not_get_the_genuine_one_rejected() {
    let mut rig = Rig::new(Some(0));
    let a = announcement(21);
    let own = rig.sign_through(&a, ReexecVerdict::Reproduced);
    rig.drain();
    let genuine = partial(1, EPOCH, own.commitment);
    let mut forged = genuine.clone();
    forged.signature = key(50).sign(&own.commitment.eip712_digest(&domain())).compress();
    let (liar, honest) = (origin(1), origin(2));
    rig.gossip_partial(forged, liar.clone());
    rig.gossip_partial(genuine, honest.clone());
    let actions = rig.batch();
    let by_peer: Vec<(PeerId, Validation)> = actions
        .iter()
        .filter_map(|x| match x {
            Action::Report { origin, acceptance, .. } => Some((origin.peer, *acceptance)),
            _ => None,
        })
        .collect();
    assert_eq!(by_peer.len(), 2, "{by_peer:?}");
    assert!(by_peer.contains(&(liar.peer, Validation::Reject)), "{by_peer:?}");
    assert!(by_peer.contains(&(honest.peer, Validation::Accept)), "{by_peer:?}");
    let view = rig.engine.view(&a.deal_id).unwrap();
    assert_eq!(view.signers.values().next().unwrap(), &vec![0, 1]);
}

/// Evidence naming old epochs: committees are loaded for one evidence
/// message at a time (the rest is ignored unverified), the held one is
/// judged once its committee is loaded (a forgery is rejected: its sender
/// pays), and committees no dispute needs are evicted.
#[test]
fn evidence_naming_old_epochs_loads_one_committee_at_a_time_and_spares_are_evicted() {
    let mut rig = Rig::new(Some(0));
    // The chain is at epoch 600; only epoch 3's committee is loaded.
    rig.engine.on_epoch(600);
    rig.drain();
    rig.engine.on_committee(600, Ok(committee(600, 4)), rig.now);
    rig.drain();
    // A dispute of epoch 3 is open: its committee stays.
    let a = announcement(22);
    rig.confirm(&a);
    let c = commitment(&a, ReexecVerdict::Reproduced);
    let mut other = c;
    other.outcome = ReexecVerdict::Failed;
    let aggregate = |epoch: u64, c: VerdictCommitment| resolvd_proto::wire::SignerAggregate {
        commitment: c,
        epoch,
        signer_indices: vec![1],
        // A signature by another key: well-formed, wrong.
        aggregate_signature: key(50).sign(&c.eip712_digest(&domain())).compress(),
    };
    let mut loads = 0;
    let mut ignored = 0;
    for epoch in 100..400u64 {
        let e = resolvd_proto::wire::ConflictEvidence {
            first: aggregate(epoch, c),
            second: aggregate(epoch, other),
        };
        rig.engine.on_gossip(origin(1), Gossip::Evidence(Box::new(e)), rig.now);
        for x in rig.drain() {
            match x {
                Action::LoadCommittee(_) => loads += 1,
                Action::Report { acceptance: Validation::Ignore, .. } => ignored += 1,
                other => panic!("{other:?}"),
            }
        }
    }
    assert_eq!(loads, 1, "one committee load for 300 evidence messages");
    assert_eq!(ignored, 299);
    // The load answers: the held evidence is judged (a forgery: rejected).
    rig.engine.on_committee(100, Ok(committee(100, 4)), rig.now);
    assert_eq!(reports(&rig.drain()), vec![(Topic::Evidence, Validation::Reject)]);
    // Many more committees loaded for evidence over time: only a few spares stay.
    for epoch in 101..120u64 {
        rig.engine.add_committee(committee(epoch, 4), rig.now);
    }
    rig.engine.on_tick(rig.now);
    rig.drain();
    let loaded: Vec<u64> = rig.engine.loaded_epochs().collect();
    assert!(loaded.contains(&EPOCH) && loaded.contains(&600), "{loaded:?}");
    assert_eq!(loaded.len(), MAX_SPARE_COMMITTEES + 2, "{loaded:?}");
    assert!(loaded.contains(&119) && !loaded.contains(&100), "oldest evicted first: {loaded:?}");
}

/// A certificate for a deal this node does not hold is ignored before its
/// signature is decompressed: undecodable bytes cost nothing either.
#[test]
fn certificates_are_looked_up_before_their_signature_is_decompressed() {
    let mut rig = Rig::new(Some(0));
    let a = announcement(23);
    let mut w = certificate(&a, &[0, 1, 2]).to_wire();
    w.aggregate_signature = [0xff; 96];
    rig.engine.on_gossip(origin(1), Gossip::Certificate(Box::new(w.clone())), rig.now);
    assert_eq!(reports(&rig.drain()), vec![(Topic::Certificates, Validation::Ignore)]);
    // For a deal it holds, the same bytes are rejected.
    rig.confirm(&a);
    rig.engine.on_gossip(origin(1), Gossip::Certificate(Box::new(w)), rig.now);
    assert_eq!(reports(&rig.drain()), vec![(Topic::Certificates, Validation::Reject)]);
}

/// One peer cannot fill the early buffers: it holds at most its quota, and
/// another peer's early partial is still held.
#[test]
fn one_peer_cannot_fill_the_early_buffers() {
    let mut rig = Rig::new(Some(0));
    let flooder = origin(1);
    let mut held = 0;
    for n in 0..(MAX_EARLY_PER_PEER as u32 + 100) {
        let mut a = announcement(0);
        a.deal_id = keccak256(n.to_be_bytes());
        let p = partial(1, EPOCH, commitment(&a, ReexecVerdict::Reproduced));
        let o = Origin { id: n.to_be_bytes().to_vec(), peer: flooder.peer };
        rig.gossip_partial(p, o);
        if reports(&rig.drain()).is_empty() {
            held += 1;
        }
    }
    assert_eq!(held, MAX_EARLY_PER_PEER);
    assert_eq!(rig.engine.buffered_partials(), MAX_EARLY_PER_PEER);
    let a = announcement(24);
    let p = partial(2, EPOCH, commitment(&a, ReexecVerdict::Reproduced));
    rig.gossip_partial(p, origin(2));
    assert!(reports(&rig.drain()).is_empty(), "another peer's partial is held");
    assert_eq!(rig.engine.buffered_partials(), MAX_EARLY_PER_PEER + 1);
    // Held entries released (the dispute confirmed) free the peer's quota.
    rig.confirm(&a);
    assert_eq!(rig.engine.buffered_partials(), MAX_EARLY_PER_PEER);
}

/// A second, different signature of this node's own key for one deal never
/// opens anyone's reveal phase early. Without fault injection it is never
/// published (only the first one is); fault injection's equivocator
/// publishes it with its own partial, at the reveal.
#[test]
fn a_second_own_signature_is_published_only_by_fault_injection_and_never_before_the_reveal() {
    let mut rig = commit_rig(0);
    let a = announcement(25);
    let own = rig.sign_through(&a, ReexecVerdict::Reproduced);
    rig.drain();
    let mut flipped = own.commitment;
    flipped.outcome = ReexecVerdict::Failed;
    rig.engine.on_signed(partial(0, EPOCH, flipped), None, rig.now);
    assert!(published_verdicts(&rig.drain()).is_empty());
    rig.later(WINDOW);
    rig.engine.on_tick(rig.now);
    let expected = if cfg!(feature = "fault-injection") { vec![0, 0] } else { vec![0] };
    assert_eq!(published_verdicts(&rig.drain()), expected);
}

// ---------------------------------------------------------------- on_tick order
//
// `Engine::on_tick` runs its jobs in a fixed order; these tests pin the
// orderings that are observable as behaviour.

fn kind(x: &Action) -> &'static str {
    match x {
        Action::Gather(_) => "gather",
        Action::PersistDispute(_, DisputeStatus::Expired) => "expire",
        Action::PersistCertificate(_) => "certificate",
        Action::Submit { .. } => "submit",
        Action::Prune(_) => "prune",
        Action::Publish(Gossip::Commit(_)) => "commit",
        Action::Publish(Gossip::Verdict(_)) => "verdict",
        Action::Report { topic: Topic::Verdicts, .. } => "verdict-report",
        Action::Report { topic: Topic::Commits, .. } => "commit-report",
        _ => "other",
    }
}

fn kinds(actions: &[Action]) -> Vec<&'static str> {
    actions.iter().map(kind).filter(|k| *k != "other").collect()
}

/// Expiry runs before submission: a certificate due when its deal expires
/// is never sent.
#[test]
fn on_tick_expires_before_it_submits_so_an_expired_certificate_is_never_sent() {
    let mut rig = Rig::new(Some(0));
    let a = announcement(1);
    rig.confirm(&a);
    let qc = certificate(&a, &[0, 1, 2]);
    rig.engine.on_gossip(origin(1), Gossip::Certificate(Box::new(qc.to_wire())), rig.now);
    rig.drain();
    rig.later(Duration::from_secs(60));
    rig.engine.on_head(200, a.resolve_deadline + EXPIRY_GRACE_SECS + 1);
    rig.engine.on_tick(rig.now);
    let actions = rig.drain();
    assert_eq!(kinds(&actions), ["expire"], "{actions:?}");
    assert_eq!(rig.phase(&a), Phase::Expired);
}

/// Fetch retries run before expiry: a retry due in the tick that expires
/// the deal is still asked for, then the deal is persisted expired.
#[test]
fn on_tick_retries_a_due_fetch_before_it_expires_the_deal() {
    let mut rig = Rig::new(Some(0));
    let a = announcement(1);
    rig.confirm(&a);
    rig.engine.on_gathered(a.deal_id, Gathered::Missing(vec![(a.spec_hash, "spec")]), rig.now);
    rig.drain();
    rig.later(EngineConfig::default().retry);
    rig.engine.on_head(200, a.resolve_deadline + EXPIRY_GRACE_SECS + 1);
    rig.engine.on_tick(rig.now);
    assert_eq!(kinds(&rig.drain()), ["gather", "expire"]);
}

/// Expiry runs before eviction: with no retention, a deal expired in a tick
/// is persisted expired and then pruned in that same tick.
#[test]
fn on_tick_expires_before_it_evicts_so_an_expired_deal_is_persisted_then_pruned() {
    let cfg = EngineConfig { retain_settled: Duration::ZERO, ..EngineConfig::default() };
    let mut rig = Rig::with(Some(0), cfg);
    let a = announcement(1);
    rig.confirm(&a);
    rig.engine.on_gathered(a.deal_id, ready(&a), rig.now);
    rig.drain();
    rig.engine.on_head(200, a.resolve_deadline + EXPIRY_GRACE_SECS + 1);
    rig.engine.on_tick(rig.now);
    assert_eq!(kinds(&rig.drain()), ["expire", "prune"]);
    assert!(rig.engine.view(&a.deal_id).is_none());
    assert_eq!(rig.engine.finished_len(), 1);
}

/// The reveal timer runs before republishing: the tick in which the commit
/// window passes and a republish is due gossips the partial (the reveal),
/// never the commitment again.
#[test]
fn on_tick_reveals_before_it_republishes_so_the_commitment_is_not_sent_again() {
    let cfg = EngineConfig { republish: WINDOW, ..EngineConfig::default() };
    let mut rig = Rig::with(Some(0), cfg);
    rig.engine.set_commit_reveal(EPOCH, Some(WINDOW));
    let a = announcement(2);
    rig.sign_through(&a, ReexecVerdict::Reproduced);
    rig.drain();
    rig.later(WINDOW);
    rig.engine.on_tick(rig.now);
    assert_eq!(kinds(&rig.drain()), ["verdict"]);
    assert!(commit_view(&rig, &a).revealed);
}

/// The reveal fallback runs before submission: a certificate the fallback
/// completes is sent in the same tick by the deal's first submitter (here
/// without `widen_wait`).
#[test]
fn on_tick_runs_the_reveal_fallback_before_submission_so_its_certificate_is_sent_at_once() {
    let members = [0u32, 1, 2, 3];
    let deal = (1..=u8::MAX)
        .find(|d| submit_rank(&order_seed(&announcement(*d)), &members, 0) == 0)
        .expect("some deal has member 0 first");
    let cfg = EngineConfig { widen_wait: Duration::ZERO, ..EngineConfig::default() };
    let mut rig = Rig::with(Some(0), cfg);
    rig.engine.set_commit_reveal(EPOCH, Some(WINDOW));
    let a = announcement(deal);
    let own = rig.sign_through(&a, ReexecVerdict::Reproduced);
    rig.drain();
    rig.later(WINDOW);
    rig.engine.on_tick(rig.now);
    assert_eq!(published_verdicts(&rig.drain()), vec![0]);
    rig.batch();
    // Signers 1 and 2 reveal at the same instant, their commitments lost.
    for s in [1, 2] {
        rig.gossip_partial(partial(s, EPOCH, own.commitment), origin(s as u8));
    }
    assert!(certificate_of(&rig.batch()).is_none());
    rig.later(WINDOW * REVEAL_FALLBACK_WINDOWS);
    rig.engine.on_tick(rig.now);
    let actions = rig.drain();
    let k = kinds(&actions);
    let cert = k.iter().position(|x| *x == "certificate").expect("the fallback certifies");
    let submit = k.iter().position(|x| *x == "submit").expect("submitted in the same tick");
    assert!(cert < submit, "{k:?}");
    assert!(commit_view(&rig, &a).fallback);
}

/// Early partials expire before early commitments (their reports come in
/// that order), both after `buffer_ttl`.
#[test]
fn on_tick_drops_expired_early_partials_then_expired_early_commitments() {
    let mut rig = commit_rig(0);
    let a = announcement(30);
    let p = partial(1, EPOCH, commitment(&a, ReexecVerdict::Reproduced));
    rig.engine.on_gossip(origin(1), Gossip::Commit(signed_commit(&p)), rig.now);
    rig.gossip_partial(p, origin(2));
    assert!(reports(&rig.drain()).is_empty(), "both held");
    rig.later(EngineConfig::default().buffer_ttl - Duration::from_millis(1));
    rig.engine.on_tick(rig.now);
    assert!(reports(&rig.drain()).is_empty(), "held until buffer_ttl");
    rig.later(Duration::from_millis(1));
    rig.engine.on_tick(rig.now);
    assert_eq!(kinds(&rig.drain()), ["verdict-report", "commit-report"]);
    assert_eq!(rig.engine.buffered_partials(), 0);
}

/// Early partials of many deals that expire at one instant are reported in
/// one order on every run: by deal id, then by arrival.
#[test]
fn expired_early_partials_are_reported_in_deal_id_order() {
    let mut rig = Rig::new(Some(0));
    let deals: Vec<_> = (0..12u8).rev().map(|i| announcement(40 + i)).collect();
    for (n, a) in deals.iter().enumerate() {
        let p = partial(1, EPOCH, commitment(a, ReexecVerdict::Reproduced));
        rig.gossip_partial(p, Origin { id: vec![n as u8], peer: next_peer() });
    }
    assert!(reports(&rig.drain()).is_empty(), "all held");
    rig.later(EngineConfig::default().buffer_ttl);
    rig.engine.on_tick(rig.now);
    let order: Vec<u8> = rig
        .drain()
        .iter()
        .filter_map(|a| match a {
            Action::Report { origin, .. } => Some(origin.id[0]),
            _ => None,
        })
        .collect();
    let mut by_deal: Vec<(B256, u8)> =
        deals.iter().enumerate().map(|(n, a)| (a.deal_id, n as u8)).collect();
    by_deal.sort();
    assert_eq!(order, by_deal.iter().map(|(_, n)| *n).collect::<Vec<_>>());
}

/// One tick's actions for several disputes come out in deal-id order, not
/// a hash map's: the same events give the same actions on every run.
#[test]
fn one_ticks_republished_partials_come_out_in_deal_id_order() {
    let mut rig = Rig::new(Some(0));
    let deals: Vec<_> = (0..8u8).rev().map(|i| announcement(60 + i)).collect();
    for a in &deals {
        rig.sign_through(a, ReexecVerdict::Reproduced);
    }
    rig.drain();
    rig.later(EngineConfig::default().republish);
    rig.engine.on_tick(rig.now);
    let order: Vec<B256> = rig
        .drain()
        .iter()
        .filter_map(|a| match a {
            Action::Publish(Gossip::Verdict(p)) => Some(p.commitment.deal_id),
            _ => None,
        })
        .collect();
    let mut sorted: Vec<B256> = deals.iter().map(|a| a.deal_id).collect();
    sorted.sort();
    assert_eq!(order, sorted);
}

/// `in_flight` counts what the views show open, without building them.
#[test]
fn in_flight_counts_the_open_disputes_the_views_show() {
    let mut rig = Rig::new(Some(0));
    let (a, b) = (announcement(1), announcement(2));
    rig.confirm(&a);
    rig.confirm(&b);
    assert_eq!(rig.engine.in_flight(), 2);
    rig.engine.on_settled_log(a.deal_id, None, rig.now);
    let open = rig.engine.views().filter(|v| !v.phase.is_final()).count();
    assert_eq!((rig.engine.in_flight(), open, rig.engine.len()), (1, 1, 2));
}

#[test]
fn submit_delays_grow_with_the_logarithm_of_the_rank() {
    let slot = Duration::from_secs(4);
    let slots: Vec<u64> = (0..16).map(|r| submit_delay(slot, r).as_secs() / 4).collect();
    // One per slot for the first eight, then 1, 2, 4, … per slot.
    assert_eq!(slots, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 10, 10, 10, 10, 11]);
    // 341 members at the head of a 1,024-member order: 16 slots, not 341.
    assert_eq!(submit_delay(slot, 341), slot * 16);
}

mod aggregators;
