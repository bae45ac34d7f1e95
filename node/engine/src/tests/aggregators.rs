//! Aggregators: own partials go to the deal's first members in doubling
//! groups, a certificate they build is gossiped, and a certificate stops the
//! escalation.

use super::*;

const ESCALATE: Duration = Duration::from_millis(500);

/// Aggregators without slices: partials go to groups of 1, 2, 4, … members.
fn aggregating() -> EngineConfig {
    with(Aggregation { group: 1, slice: 0, escalate_after: ESCALATE, ..Aggregation::default() })
}

/// Two slices of two members, each collected by its first; one aggregator.
fn sliced() -> EngineConfig {
    with(Aggregation {
        group: 1,
        slice: 2,
        collectors: 1,
        escalate_after: ESCALATE,
        ..Aggregation::default()
    })
}

fn with(a: Aggregation) -> EngineConfig {
    EngineConfig { dissemination: Dissemination::Aggregators(a), ..EngineConfig::default() }
}

/// The members of deal `a` in its submitter order.
fn order(a: &DisputeAnnouncement) -> Vec<u32> {
    submit_order(&order_seed(a), &[0, 1, 2, 3])
}

fn kind(gossip: &Gossip) -> &'static str {
    match gossip {
        Gossip::Verdict(_) => "verdict",
        Gossip::Commit(_) => "commit",
        Gossip::Aggregate(_) => "aggregate",
        _ => "other",
    }
}

/// Each message sent directly, with its members, in order.
fn sends(actions: &[Action]) -> Vec<(Vec<u32>, &'static str)> {
    requests(actions)
        .into_iter()
        .flat_map(|(to, kinds)| kinds.into_iter().map(move |k| (to.clone(), k)))
        .collect()
}

/// Each direct request: its members and its messages' kinds, in order.
fn requests(actions: &[Action]) -> Vec<(Vec<u32>, Vec<&'static str>)> {
    actions
        .iter()
        .filter_map(|x| match x {
            Action::Send { to, messages, .. } => {
                Some((to.clone(), messages.iter().map(kind).collect()))
            }
            _ => None,
        })
        .collect()
}

/// Ticks the engine `d` later; what it queued.
fn tick_after(rig: &mut Rig, d: Duration) -> Vec<Action> {
    rig.later(d);
    rig.engine.on_tick(rig.now);
    rig.drain()
}

fn publishes_verdict(actions: &[Action]) -> bool {
    actions.iter().any(|x| matches!(x, Action::Publish(Gossip::Verdict(_))))
}

#[test]
fn groups_double_along_the_submitter_order_and_end_at_the_committee() {
    let a = announcement(1);
    let members: Vec<u32> = (0..10).collect();
    let order = submit_order(&order_seed(&a), &members);
    let group = |r| aggregator_group(&order_seed(&a), &members, 2, r);
    assert_eq!(group(0), order[0..2]);
    assert_eq!(group(1), order[2..6]);
    assert_eq!(group(2), order[6..10], "cut at the end of the committee");
    assert!(group(3).is_empty());
    assert!(group(40).is_empty(), "no overflow far past the end");
    assert!(aggregator_group(&order_seed(&a), &members, 0, 0).is_empty());
    assert_eq!(submit_rank(&order_seed(&a), &members, order[3]), 3, "one order for both");
}

#[test]
fn own_partials_go_to_the_aggregators_then_to_the_next_group_then_to_everyone() {
    let a = announcement(1);
    let order = order(&a);
    let me = order[3];
    let mut rig = Rig::with(Some(me as usize), aggregating());
    rig.sign_through(&a, ReexecVerdict::Reproduced);
    let actions = rig.drain();
    assert_eq!(sends(&actions), vec![(vec![order[0]], "verdict")], "{actions:?}");
    assert!(!publishes_verdict(&actions), "not gossiped");
    // Not yet due.
    assert!(sends(&tick_after(&mut rig, ESCALATE - Duration::from_millis(1))).is_empty());
    // No certificate: the next group, twice as large.
    assert_eq!(
        sends(&tick_after(&mut rig, Duration::from_millis(1))),
        vec![(vec![order[1], order[2]], "verdict")]
    );
    // The third group is this node alone: nothing to send, the timer runs on.
    assert!(sends(&tick_after(&mut rig, ESCALATE)).is_empty());
    // Past the committee: gossiped to everyone, and no timer after that.
    let actions = tick_after(&mut rig, ESCALATE);
    assert!(publishes_verdict(&actions) && sends(&actions).is_empty(), "{actions:?}");
    let actions = tick_after(&mut rig, ESCALATE);
    assert!(!publishes_verdict(&actions) && sends(&actions).is_empty(), "{actions:?}");
}

/// The order, and so who aggregates, is seeded by the entropy of the
/// dispute's block (the next block's `prevrandao`), not by the deal id alone
/// (which the buyer chooses) nor by the block's hash (which its builder can
/// vary): the same deal with another entropy has another first aggregator;
/// another block hash with the same entropy leaves the order as it was; a
/// record without entropy orders by the block's hash.
#[test]
fn the_aggregators_follow_the_disputes_entropy_not_the_deal_id_nor_the_block_hash() {
    let a = announcement(1);
    let first = |a: &DisputeAnnouncement| order(a)[0];
    let b = (0..=u8::MAX)
        .map(|x| DisputeAnnouncement { order_entropy: B256::repeat_byte(x), ..a.clone() })
        .find(|b| first(b) != first(&a))
        .expect("other entropy puts another member first");
    for x in 0..=u8::MAX {
        let ground = DisputeAnnouncement { block_hash: B256::repeat_byte(x), ..a.clone() };
        assert_eq!(order(&ground), order(&a), "a ground block hash moves nobody");
    }
    let legacy = DisputeAnnouncement { order_entropy: B256::ZERO, ..a.clone() };
    let by_hash = DisputeAnnouncement { order_entropy: a.block_hash, ..a.clone() };
    assert_eq!(order(&legacy), order(&by_hash), "no entropy: the block's hash");
    assert_ne!(order_seed(&legacy), order_seed(&a));
    for a in [a, b] {
        let order = order(&a);
        let mut rig = Rig::with(Some(order[3] as usize), aggregating());
        rig.sign_through(&a, ReexecVerdict::Reproduced);
        let actions = rig.drain();
        assert_eq!(sends(&actions), vec![(vec![order[0]], "verdict")], "{actions:?}");
    }
}

/// The first group of aggregators in the certificate stagger's tests: the
/// first three of the order (its first half rounds down to one, so the
/// first [`CERTIFICATE_GOSSIPERS`] gossip at once).
const STAGGER_GROUP: usize = 3;

/// An aggregator that certifies as `order[rank]` (the partials of the
/// first two others of the order reach it), the first group being
/// [`STAGGER_GROUP`]: what its batch queued.
fn certify_as(rank: usize) -> (Rig, DisputeAnnouncement, Vec<u32>, Vec<Action>) {
    certify_in(STAGGER_GROUP, rank)
}

/// [`certify_as`] with a first group of `group` members.
fn certify_in(group: usize, rank: usize) -> (Rig, DisputeAnnouncement, Vec<u32>, Vec<Action>) {
    let a = announcement(1);
    let order = order(&a);
    let cfg =
        with(Aggregation { group, slice: 0, escalate_after: ESCALATE, ..Aggregation::default() });
    let mut rig = Rig::with(Some(order[rank] as usize), cfg);
    let p = rig.sign_through(&a, ReexecVerdict::Reproduced);
    rig.drain();
    for &s in order.iter().filter(|&&s| s != order[rank]).take(2) {
        rig.gossip_partial(partial(s as usize, EPOCH, p.commitment), origin(s as u8));
    }
    let actions = rig.batch();
    assert!(certificate_of(&actions).is_some(), "{actions:?}");
    (rig, a, order, actions)
}

/// The first aggregators of the order gossip the certificate they build at
/// once, and so do those past the first group (reached by escalation); a
/// later one of the first group waits out the stagger, and a certificate
/// that fails to verify meanwhile does not hold it back.
#[test]
fn aggregators_past_the_first_two_gossip_their_certificate_after_the_stagger() {
    const { assert!(CERTIFICATE_GOSSIPERS == 2 && STAGGER_GROUP == 3) };
    for rank in [0, 1, 3] {
        let (_, _, _, actions) = certify_as(rank);
        assert!(gossips_certificate(&actions), "rank {rank}: {actions:?}");
    }
    // A first group of six: its first half, three, gossips at once.
    for (rank, at_once) in [(2, true), (3, false)] {
        let (_, _, _, actions) = certify_in(6, rank);
        assert_eq!(gossips_certificate(&actions), at_once, "rank {rank}: {actions:?}");
    }
    let (mut rig, a, order, actions) = certify_as(2);
    assert!(!gossips_certificate(&actions), "{actions:?}");
    let mut forged = certificate(&a, &[0, 1, 3]).to_wire();
    forged.aggregate_signature = certificate(&a, &[0, 1, 2]).to_wire().aggregate_signature;
    rig.engine.on_gossip(origin(order[0] as u8), Gossip::Certificate(Box::new(forged)), rig.now);
    assert_eq!(reports(&rig.drain()), vec![(Topic::Certificates, Validation::Reject)]);
    let early = tick_after(&mut rig, CERTIFICATE_STAGGER - Duration::from_millis(1));
    assert!(!gossips_certificate(&early), "{early:?}");
    let due = tick_after(&mut rig, Duration::from_millis(1));
    assert!(gossips_certificate(&due), "{due:?}");
    assert!(!gossips_certificate(&tick_after(&mut rig, CERTIFICATE_STAGGER)));
}

/// A peer's certificate that verifies while a later aggregator waits is
/// accepted (forwarded) and cancels the aggregator's own: it never gossips
/// it, neither when the stagger ends nor at its submit slot, and still
/// submits it. Once the wait is over, peers' certificates are ignored
/// unverified again.
#[test]
fn a_peers_certificate_during_the_stagger_cancels_the_own_gossip() {
    let (mut rig, a, order, _) = certify_as(2);
    let theirs = certificate(&a, &[order[0] as usize, order[1] as usize, order[3] as usize]);
    let w = theirs.to_wire();
    rig.engine.on_gossip(origin(order[0] as u8), Gossip::Certificate(Box::new(w.clone())), rig.now);
    assert_eq!(reports(&rig.drain()), vec![(Topic::Certificates, Validation::Accept)]);
    let mut later = Vec::new();
    for _ in 0..40 {
        later.extend(tick_after(&mut rig, Duration::from_millis(500)));
    }
    assert!(!gossips_certificate(&later), "{later:?}");
    assert!(later.iter().any(|x| matches!(x, Action::Submit { .. })), "{later:?}");
    rig.engine.on_gossip(origin(order[1] as u8), Gossip::Certificate(Box::new(w)), rig.now);
    assert_eq!(reports(&rig.drain()), vec![(Topic::Certificates, Validation::Ignore)]);
}

#[test]
fn a_certificate_stops_the_escalation() {
    let a = announcement(1);
    let order = order(&a);
    let me = order[3];
    let mut rig = Rig::with(Some(me as usize), aggregating());
    rig.sign_through(&a, ReexecVerdict::Reproduced);
    rig.drain();
    let qc = certificate(&a, &[0, 1, 2]);
    rig.engine.on_gossip(origin(9), Gossip::Certificate(Box::new(qc.to_wire())), rig.now);
    assert_eq!(reports(&rig.drain()), vec![(Topic::Certificates, Validation::Accept)]);
    let actions = tick_after(&mut rig, ESCALATE * 4);
    assert!(sends(&actions).is_empty() && !publishes_verdict(&actions), "{actions:?}");
}

#[test]
fn flood_gossips_own_partials_and_never_sends_directly() {
    let a = announcement(1);
    let mut rig = Rig::new(Some(0));
    rig.sign_through(&a, ReexecVerdict::Reproduced);
    let actions = rig.drain();
    assert!(publishes_verdict(&actions) && sends(&actions).is_empty(), "{actions:?}");
    assert!(sends(&tick_after(&mut rig, ESCALATE * 8)).is_empty());
}

fn aggregate_of(parts: &[SignedVerdict]) -> resolvd_proto::wire::SignerAggregate {
    let signatures: Vec<Signature> =
        parts.iter().map(|p| Signature::from_compressed(&p.signature).unwrap()).collect();
    resolvd_proto::wire::SignerAggregate {
        commitment: parts[0].commitment,
        epoch: parts[0].epoch,
        signer_indices: parts.iter().map(|p| p.signer_index).collect(),
        aggregate_signature: Signature::aggregate(&signatures).unwrap().compress(),
    }
}

#[test]
fn a_collector_sends_its_complete_slice_to_the_aggregators() {
    let a = announcement(1);
    let order = order(&a);
    // Slice 1 is order[2..4], collected by order[2]; the aggregator is order[0].
    let me = order[2];
    let mut rig = Rig::with(Some(me as usize), sliced());
    let p = rig.sign_through(&a, ReexecVerdict::Reproduced);
    let actions = rig.drain();
    assert!(sends(&actions).is_empty() && !publishes_verdict(&actions), "its own collector");
    // The other member of the slice sends its partial here.
    let other = partial(order[3] as usize, EPOCH, p.commitment);
    rig.gossip_partial(other.clone(), origin(order[3] as u8));
    let actions = rig.batch();
    let out: Vec<_> = actions
        .iter()
        .filter_map(|x| match x {
            Action::Send { to, messages, .. } => match &messages[..] {
                [Gossip::Aggregate(agg)] => Some((to.clone(), agg.clone())),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(out.len(), 1, "complete: sent after the batch, {actions:?}");
    assert_eq!(out[0].0, vec![order[0]]);
    let mut signers = vec![order[2], order[3]];
    signers.sort_unstable();
    assert_eq!(out[0].1.signer_indices, signers);
    // Nothing new: not sent again.
    assert!(sends(&tick_after(&mut rig, ESCALATE / 2))
        .iter()
        .all(|(_, kind)| *kind != "aggregate"));
    // No certificate: the partial and the slice's aggregate go to the next
    // group (order[1..3], this node aside).
    rig.later(ESCALATE / 2);
    rig.engine.on_tick(rig.now);
    assert_eq!(
        sends(&rig.drain()),
        vec![(vec![order[1]], "verdict"), (vec![order[1]], "aggregate")]
    );
}

/// The first slice's collectors are the first aggregators (group and
/// collectors of one size): each holds the slice's partials from its members
/// directly, so none sends the slice's aggregate to another; the second
/// slice's collectors send theirs to both.
#[test]
fn a_collector_sends_no_aggregate_to_a_target_that_collects_the_same_slice() {
    let a = announcement(1);
    let order = order(&a);
    let cfg = with(Aggregation {
        group: 2,
        slice: 2,
        collectors: 2,
        escalate_after: ESCALATE,
        ..Aggregation::default()
    });
    for (me, other, to) in [
        (order[0], order[1], vec![]),
        (order[2], order[3], vec![(order[..2].to_vec(), "aggregate")]),
    ] {
        let mut rig = Rig::with(Some(me as usize), cfg.clone());
        let p = rig.sign_through(&a, ReexecVerdict::Reproduced);
        rig.drain();
        rig.gossip_partial(partial(other as usize, EPOCH, p.commitment), origin(other as u8));
        let mut actions = rig.batch();
        actions.extend(tick_after(&mut rig, ESCALATE / 2));
        let sent: Vec<_> = sends(&actions).into_iter().filter(|(_, k)| *k == "aggregate").collect();
        assert_eq!(sent, to, "collector {me}: {actions:?}");
    }
}

/// A certificate of `signers` for `a`'s honest commitment, gossiped to the
/// node and verified in its batch.
fn certify(rig: &mut Rig, a: &DisputeAnnouncement, signers: &[u32]) -> QuorumCertificate {
    let mut signers: Vec<usize> = signers.iter().map(|&s| s as usize).collect();
    signers.sort_unstable();
    let qc = certificate(a, &signers);
    rig.engine.on_gossip(origin(1), Gossip::Certificate(Box::new(qc.to_wire())), rig.now);
    rig.batch();
    qc
}

/// A slice that grows after the dispute is certified goes to the first
/// submitters only (they widen the certificate they send with it; every
/// other holder of the certificate ignores it); if the escrow rejects the
/// certificate, the slices go to the aggregators again.
#[test]
fn a_collector_holding_the_certificate_sends_its_slices_growth_to_the_first_submitters() {
    let a = announcement(1);
    let order = order(&a);
    // Slice 1 is order[2..4], collected by order[2] (this node).
    let me = order[2];
    let mut rig = Rig::with(Some(me as usize), sliced());
    let p = rig.sign_through(&a, ReexecVerdict::Reproduced);
    rig.drain();
    certify(&mut rig, &a, &[order[0], order[1], me]);
    assert_eq!(rig.phase(&a), Phase::Certified);
    // Not one of the first two submitters: an aggregate of the certified
    // commitment is ignored unverified, even one that adds a signer.
    let late = aggregate_of(&[partial(order[3] as usize, EPOCH, p.commitment)]);
    rig.engine.on_gossip(origin(order[3] as u8), Gossip::Aggregate(Box::new(late)), rig.now);
    assert_eq!(reports(&rig.drain()), vec![(Topic::Aggregates, Validation::Ignore)]);
    // The slice's other member's partial arrives late: the slice is
    // complete, and its aggregate goes to the first two submitters.
    rig.gossip_partial(partial(order[3] as usize, EPOCH, p.commitment), origin(order[3] as u8));
    let sent = sends(&rig.batch());
    assert_eq!(sent, vec![(order[..WIDENING_SUBMITTERS].to_vec(), "aggregate")]);
    // Nothing new: not sent again.
    assert!(sends(&tick_after(&mut rig, ESCALATE * 4)).is_empty());
    // The escrow rejects the certificate: it is dropped, and the slices go to
    // the aggregators (one here) again: they build the next certificate.
    rig.engine.on_submitted(a.deal_id, SubmitResult::Rejected("InvalidSignature".into()), rig.now);
    rig.drain();
    let sent = sends(&tick_after(&mut rig, Duration::from_millis(1)));
    assert_eq!(sent, vec![(vec![order[0]], "aggregate")]);
}

/// The first submitter verifies a slice aggregate of its certified
/// commitment that adds signers while it waits `widen_wait`, and sends a
/// certificate with them; once it has sent, it ignores such aggregates.
#[test]
fn the_first_submitter_widens_its_certificate_with_a_late_slice_aggregate() {
    let a = announcement(1);
    let order = order(&a);
    // This node aggregates and collects slice 0 (order[0..2]); slice 1 is
    // order[2..4], collected by order[2].
    let me = order[0];
    let cfg = sliced();
    let widen_wait = cfg.widen_wait;
    let mut rig = Rig::with(Some(me as usize), cfg);
    let p = rig.sign_through(&a, ReexecVerdict::Reproduced);
    rig.drain();
    let of = |i: u32| partial(i as usize, EPOCH, p.commitment);
    rig.gossip_partial(of(order[1]), origin(order[1] as u8));
    rig.batch();
    let early = aggregate_of(&[of(order[2])]);
    rig.engine.on_gossip(origin(order[2] as u8), Gossip::Aggregate(Box::new(early)), rig.now);
    let qc = certificate_of(&rig.batch()).expect("certified with 3 of 4");
    assert_eq!(qc.non_signers, vec![order[3]]);
    // Order[3]'s partial reaches its collector late; the grown slice comes.
    let mut late = vec![of(order[2]), of(order[3])];
    late.sort_by_key(|p| p.signer_index);
    let grown = aggregate_of(&late);
    rig.engine.on_gossip(origin(order[2] as u8), Gossip::Aggregate(Box::new(grown)), rig.now);
    assert_eq!(reports(&rig.batch()), vec![(Topic::Aggregates, Validation::Accept)]);
    let actions = tick_after(&mut rig, widen_wait);
    let submitted = actions
        .iter()
        .find_map(|x| match x {
            Action::Submit { certificate, .. } => Some(certificate.clone()),
            _ => None,
        })
        .expect("sent after widen_wait");
    assert!(submitted.non_signers.is_empty(), "{:?}", submitted.non_signers);
    submitted.verify(&committee(EPOCH, 4), &domain()).unwrap();
    // Sent: a node that no longer submits does not verify them.
    let again = aggregate_of(&[of(order[3])]);
    rig.engine.on_gossip(origin(order[2] as u8), Gossip::Aggregate(Box::new(again)), rig.now);
    assert_eq!(reports(&rig.drain()), vec![(Topic::Aggregates, Validation::Ignore)]);
}

/// A member whose replay ends after the certificate came still sends its
/// partial: a submitter widens its certificate with the partials that
/// reach it before it sends, so the member is paid without including itself
/// on chain.
#[test]
fn a_partial_signed_after_the_certificate_is_still_sent() {
    let a = announcement(1);
    let order = order(&a);
    let me = order[3];
    let mut rig = Rig::with(Some(me as usize), sliced());
    rig.confirm(&a);
    rig.engine.on_gathered(a.deal_id, ready(&a), rig.now);
    rig.drain();
    rig.engine.on_replayed(a.deal_id, Ok(envelope(&a, ReexecVerdict::Reproduced)), rig.now);
    let actions = rig.drain();
    assert!(actions.iter().any(|x| matches!(x, Action::Sign { .. })), "{actions:?}");
    let qc = certify(&mut rig, &a, &[order[0], order[1], order[2]]);
    let p = partial(me as usize, EPOCH, qc.commitment);
    rig.engine.on_signed(p, None, rig.now);
    assert_eq!(rig.phase(&a), Phase::Certified);
    assert_eq!(sends(&rig.drain()), vec![(vec![order[2]], "verdict")], "to its collector");
}

/// A dispute opened again (an Attestor's question asked again, its new
/// `Disputed` log in another block) orders by the new block's entropy: what this node
/// was collecting was cut from the old order and is dropped, not sent along
/// it (nor read out of an order not computed yet).
#[test]
fn a_reopened_dispute_drops_the_slices_of_its_old_order() {
    let a = announcement(1);
    let order = order(&a);
    // Slices of 3: this node collects order[0..3] and holds its own partial
    // and order[1]'s; the slice's aggregate is due `collect_wait` later.
    let cfg = with(Aggregation {
        group: 1,
        slice: 3,
        collectors: 1,
        escalate_after: ESCALATE,
        ..Aggregation::default()
    });
    let mut rig = Rig::with(Some(order[0] as usize), cfg);
    let own = rig.sign_through(&a, ReexecVerdict::Reproduced);
    rig.gossip_partial(partial(order[1] as usize, EPOCH, own.commitment), origin(41));
    rig.batch();
    rig.engine.on_settled_log(a.deal_id, None, rig.now);
    rig.drain();
    let again = DisputeAnnouncement {
        resolve_deadline: a.resolve_deadline + 3_600,
        block_number: a.block_number + 100,
        block_hash: B256::repeat_byte(0x77),
        order_entropy: B256::repeat_byte(0x78),
        ..a.clone()
    };
    rig.engine.on_disputed_log(again.clone(), rig.now);
    rig.drain();
    assert_eq!(rig.phase(&again), Phase::Signed, "opened again with the own partial");
    let actions = tick_after(&mut rig, Duration::from_secs(1));
    assert!(sends(&actions).iter().all(|(_, kind)| *kind != "aggregate"), "{actions:?}");
}

#[test]
fn an_aggregator_certifies_from_a_slice_aggregate_and_its_own_partial() {
    let a = announcement(1);
    let order = order(&a);
    let me = order[0];
    let mut rig = Rig::with(Some(me as usize), sliced());
    let p = rig.sign_through(&a, ReexecVerdict::Reproduced);
    rig.drain();
    let slice: Vec<SignedVerdict> = {
        let mut s = vec![order[2], order[3]];
        s.sort_unstable();
        s.into_iter().map(|i| partial(i as usize, EPOCH, p.commitment)).collect()
    };
    // A forged aggregate (one signature short) is rejected after its batch.
    let mut forged = aggregate_of(&slice);
    forged.aggregate_signature = slice[0].signature;
    rig.engine.on_gossip(origin(40), Gossip::Aggregate(Box::new(forged)), rig.now);
    assert!(reports(&rig.drain()).is_empty(), "verified in the batch");
    let actions = rig.batch();
    assert_eq!(reports(&actions), vec![(Topic::Aggregates, Validation::Reject)]);
    assert!(certificate_of(&actions).is_none());
    // The genuine one: 3 of 4 with the own partial.
    rig.engine.on_gossip(origin(41), Gossip::Aggregate(Box::new(aggregate_of(&slice))), rig.now);
    let actions = rig.batch();
    assert_eq!(reports(&actions), vec![(Topic::Aggregates, Validation::Accept)]);
    let qc = certificate_of(&actions).expect("a certificate");
    assert_eq!(qc.non_signers, vec![order[1]]);
    assert!(gossips_certificate(&actions));
    let view = rig.engine.view(&a.deal_id).unwrap();
    assert_eq!(view.signers.values().next().unwrap().len(), 3);
    // Once certified, aggregates are ignored unverified.
    rig.engine.on_gossip(origin(42), Gossip::Aggregate(Box::new(aggregate_of(&slice))), rig.now);
    assert_eq!(reports(&rig.drain()), vec![(Topic::Aggregates, Validation::Ignore)]);
}

/// A collector that saw the dispute a poll earlier sends its slice's
/// aggregate before this aggregator confirmed the dispute: it is held (no
/// verdict yet), taken once the dispute starts, and certifies with the own
/// partial; held copies of a dispute that never starts here expire unheld.
#[test]
fn an_aggregate_that_arrives_before_its_dispute_is_held_until_it_starts() {
    let a = announcement(1);
    let order = order(&a);
    let me = order[0];
    let mut rig = Rig::with(Some(me as usize), sliced());
    let yes = commitment(&a, ReexecVerdict::Reproduced);
    let slice: Vec<SignedVerdict> = {
        let mut s = vec![order[2], order[3]];
        s.sort_unstable();
        s.into_iter().map(|i| partial(i as usize, EPOCH, yes)).collect()
    };
    rig.engine.on_gossip(origin(41), Gossip::Aggregate(Box::new(aggregate_of(&slice))), rig.now);
    assert!(reports(&rig.drain()).is_empty(), "held, not judged");
    rig.sign_through(&a, ReexecVerdict::Reproduced);
    let actions = rig.batch();
    assert_eq!(reports(&actions), vec![(Topic::Aggregates, Validation::Accept)]);
    let qc = certificate_of(&actions).expect("a certificate");
    assert_eq!(qc.non_signers, vec![order[1]]);
    // Another deal's aggregate, never confirmed here: IGNOREd when it expires.
    let b = announcement(2);
    let other = commitment(&b, ReexecVerdict::Reproduced);
    let slice: Vec<SignedVerdict> =
        slice.iter().map(|p| partial(p.signer_index as usize, EPOCH, other)).collect();
    rig.engine.on_gossip(origin(43), Gossip::Aggregate(Box::new(aggregate_of(&slice))), rig.now);
    assert!(reports(&rig.drain()).is_empty());
    let actions = tick_after(&mut rig, EngineConfig::default().buffer_ttl);
    assert_eq!(reports(&actions), vec![(Topic::Aggregates, Validation::Ignore)]);
    // Larger than a slice (2 here): not held, whatever it claims.
    let wide: Vec<SignedVerdict> = (1..4).map(|i| partial(i, EPOCH, other)).collect();
    rig.engine.on_gossip(origin(44), Gossip::Aggregate(Box::new(aggregate_of(&wide))), rig.now);
    assert_eq!(reports(&rig.drain()), vec![(Topic::Aggregates, Validation::Ignore)]);
}

#[test]
fn a_member_of_a_slice_sends_to_its_collector_then_escalates_to_the_aggregators() {
    let a = announcement(1);
    let order = order(&a);
    let me = order[3];
    let mut rig = Rig::with(Some(me as usize), sliced());
    rig.sign_through(&a, ReexecVerdict::Reproduced);
    assert_eq!(sends(&rig.drain()), vec![(vec![order[2]], "verdict")]);
    // Round 1: straight to the second group (the first had the slices').
    assert_eq!(sends(&tick_after(&mut rig, ESCALATE)), vec![(vec![order[1], order[2]], "verdict")]);
    // Round 2's group is this node alone; round 3 is past the committee.
    assert!(sends(&tick_after(&mut rig, ESCALATE)).is_empty());
    assert!(publishes_verdict(&tick_after(&mut rig, ESCALATE)));
}

#[test]
fn with_commit_reveal_the_commitment_is_gossiped_and_sent_and_the_reveal_goes_with_it_to_the_aggregators(
) {
    let a = announcement(1);
    let order = order(&a);
    let me = order[3];
    let mut rig = Rig::with(Some(me as usize), sliced());
    rig.engine.set_commit_reveal(EPOCH, Some(WINDOW));
    rig.sign_through(&a, ReexecVerdict::Reproduced);
    let actions = rig.drain();
    // Every member needs the commitments to know when the commit phase
    // closes: gossiped; and sent straight to the aggregators, which a
    // member's reveal reaches in one hop.
    assert!(actions.iter().any(|x| matches!(x, Action::Publish(Gossip::Commit(_)))));
    assert_eq!(requests(&actions), vec![(vec![order[0]], vec!["commit"])], "{actions:?}");
    assert!(!publishes_verdict(&actions));
    // The commit window passes: an aggregate cannot show its signers
    // committed in time, so no slices: the reveal goes to the aggregators,
    // in one request with the commitment (sent apart, it could arrive first
    // and not count there).
    let reveal = vec![(vec![order[0]], vec!["commit", "verdict"])];
    assert_eq!(requests(&tick_after(&mut rig, WINDOW)), reveal);
    // Escalation sends both to the next group, again in one request.
    rig.later(ESCALATE);
    rig.engine.on_tick(rig.now);
    assert_eq!(requests(&rig.drain()), vec![(vec![order[1], order[2]], vec!["commit", "verdict"])]);
}

#[test]
fn aggregates_are_ignored_unverified_when_flooding_and_with_commit_reveal() {
    let a = announcement(1);
    let order = order(&a);
    let slice: Vec<SignedVerdict> = {
        let c = commitment(&a, ReexecVerdict::Reproduced);
        let mut s = vec![order[2], order[3]];
        s.sort_unstable();
        s.into_iter().map(|i| partial(i as usize, EPOCH, c)).collect()
    };
    // The daemon floods: an aggregate would skip what partials go through.
    let mut rig = Rig::new(Some(order[0] as usize));
    rig.sign_through(&a, ReexecVerdict::Reproduced);
    rig.drain();
    rig.engine.on_gossip(origin(50), Gossip::Aggregate(Box::new(aggregate_of(&slice))), rig.now);
    assert_eq!(reports(&rig.drain()), vec![(Topic::Aggregates, Validation::Ignore)]);
    assert!(certificate_of(&rig.batch()).is_none(), "only the own partial");
    // With commit-reveal, an aggregate cannot show its signers committed in time.
    let mut rig = Rig::with(Some(order[0] as usize), sliced());
    rig.engine.set_commit_reveal(EPOCH, Some(WINDOW));
    rig.sign_through(&a, ReexecVerdict::Reproduced);
    rig.drain();
    rig.engine.on_gossip(origin(51), Gossip::Aggregate(Box::new(aggregate_of(&slice))), rig.now);
    assert_eq!(reports(&rig.drain()), vec![(Topic::Aggregates, Validation::Ignore)]);
}

/// A dispute restored from a record without its order entropy (written
/// before announcements carried it) is ordered by its block's hash until the
/// chain names the entropy: it asks the chain at once, then takes the
/// entropy, stores it and sends along the order every other node uses.
#[test]
fn a_restored_dispute_without_its_order_entropy_takes_it_from_the_chain() {
    let a = announcement(1);
    let legacy = DisputeAnnouncement { order_entropy: B256::ZERO, ..a.clone() };
    let members = [0, 1, 2, 3];
    let group =
        |a: &DisputeAnnouncement, round| aggregator_group(&order_seed(a), &members, 1, round);
    // A member outside both orders' first two groups.
    let me = (0..4)
        .find(|m| ![group(&a, 0), group(&a, 1), group(&legacy, 0)].iter().any(|g| g.contains(m)))
        .expect("4 members, at most 3 of them in those groups");
    let own =
        Rig::with(Some(me as usize), aggregating()).sign_through(&a, ReexecVerdict::Reproduced);
    let mut rig = Rig::with(Some(me as usize), aggregating());
    rig.engine.restore(legacy.clone(), DisputeStatus::Active, vec![own], None, rig.now);
    let actions = rig.drain();
    assert!(
        actions.iter().any(|x| matches!(x, Action::Confirm { announcement, source: ConfirmSource::Chain, .. } if **announcement == legacy)),
        "{actions:?}"
    );
    assert_eq!(
        sends(&actions),
        vec![(group(&legacy, 0), "verdict")],
        "ordered by the block's hash meanwhile"
    );
    rig.engine.on_confirmed(a.clone(), ConfirmSource::Chain, Ok(Confirmation::Disputed), rig.now);
    let actions = rig.drain();
    assert!(
        matches!(&actions[..], [Action::PersistDispute(info, DisputeStatus::Active)] if **info == a),
        "stored with the entropy, not started again: {actions:?}"
    );
    assert_eq!(rig.phase(&a), Phase::Signed);
    let actions = tick_after(&mut rig, ESCALATE);
    assert_eq!(sends(&actions), vec![(group(&a, 1), "verdict")], "the order every node uses");
    // Once complete, a confirmation of it changes nothing.
    rig.engine.on_confirmed(a.clone(), ConfirmSource::Chain, Ok(Confirmation::Disputed), rig.now);
    assert!(rig.drain().is_empty());
}
