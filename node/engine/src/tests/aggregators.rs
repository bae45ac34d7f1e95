//! Aggregators: own partials go to the deal's first members in doubling
//! groups, a certificate they build is gossiped, and a certificate stops the
//! escalation.

use super::*;

const ESCALATE: Duration = Duration::from_millis(500);

fn aggregating() -> EngineConfig {
    EngineConfig {
        dissemination: Dissemination::Aggregators { group: 1, escalate_after: ESCALATE },
        ..EngineConfig::default()
    }
}

/// The members of deal `a` in its submitter order.
fn order(a: &DisputeAnnouncement) -> Vec<u32> {
    submit_order(&a.deal_id, &[0, 1, 2, 3])
}

fn sends(actions: &[Action]) -> Vec<(Vec<u32>, &'static str)> {
    actions
        .iter()
        .filter_map(|x| match x {
            Action::Send { to, gossip } => Some((
                to.clone(),
                match gossip {
                    Gossip::Verdict(_) => "verdict",
                    Gossip::Commit(_) => "commit",
                    _ => "other",
                },
            )),
            _ => None,
        })
        .collect()
}

fn publishes_verdict(actions: &[Action]) -> bool {
    actions.iter().any(|x| matches!(x, Action::Publish(Gossip::Verdict(_))))
}

#[test]
fn groups_double_along_the_submitter_order_and_end_at_the_committee() {
    let a = announcement(1);
    let members: Vec<u32> = (0..10).collect();
    let order = submit_order(&a.deal_id, &members);
    let group = |r| aggregator_group(&a.deal_id, &members, 2, r);
    assert_eq!(group(0), order[0..2]);
    assert_eq!(group(1), order[2..6]);
    assert_eq!(group(2), order[6..10], "cut at the end of the committee");
    assert!(group(3).is_empty());
    assert!(group(40).is_empty(), "no overflow far past the end");
    assert!(aggregator_group(&a.deal_id, &members, 0, 0).is_empty());
    assert_eq!(submit_rank(&a.deal_id, &members, order[3]), 3, "one order for both");
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
    rig.later(ESCALATE - Duration::from_millis(1));
    rig.engine.on_tick(rig.now);
    assert!(sends(&rig.drain()).is_empty());
    // No certificate: the next group, twice as large.
    rig.later(Duration::from_millis(1));
    rig.engine.on_tick(rig.now);
    assert_eq!(sends(&rig.drain()), vec![(vec![order[1], order[2]], "verdict")]);
    // The third group is this node alone: nothing to send, the timer runs on.
    rig.later(ESCALATE);
    rig.engine.on_tick(rig.now);
    assert!(sends(&rig.drain()).is_empty());
    // Past the committee: gossiped to everyone, and no timer after that.
    rig.later(ESCALATE);
    rig.engine.on_tick(rig.now);
    let actions = rig.drain();
    assert!(publishes_verdict(&actions) && sends(&actions).is_empty(), "{actions:?}");
    rig.later(ESCALATE);
    rig.engine.on_tick(rig.now);
    let actions = rig.drain();
    assert!(!publishes_verdict(&actions) && sends(&actions).is_empty(), "{actions:?}");
}

#[test]
fn an_aggregator_gossips_the_certificate_it_builds_whatever_its_rank() {
    let a = announcement(1);
    let order = order(&a);
    // The third of the order: in flood mode it would not gossip at once.
    let me = order[2];
    const { assert!(2 >= CERTIFICATE_GOSSIPERS) };
    let mut rig = Rig::with(Some(me as usize), aggregating());
    let p = rig.sign_through(&a, ReexecVerdict::Reproduced);
    rig.drain();
    for s in [order[0], order[1]] {
        rig.gossip_partial(partial(s as usize, EPOCH, p.commitment), origin(s as u8));
    }
    let actions = rig.batch();
    assert!(certificate_of(&actions).is_some());
    assert!(gossips_certificate(&actions), "{actions:?}");
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
    rig.later(ESCALATE * 4);
    rig.engine.on_tick(rig.now);
    let actions = rig.drain();
    assert!(sends(&actions).is_empty() && !publishes_verdict(&actions), "{actions:?}");
}

#[test]
fn flood_gossips_own_partials_and_never_sends_directly() {
    let a = announcement(1);
    let mut rig = Rig::new(Some(0));
    rig.sign_through(&a, ReexecVerdict::Reproduced);
    let actions = rig.drain();
    assert!(publishes_verdict(&actions) && sends(&actions).is_empty(), "{actions:?}");
    rig.later(ESCALATE * 8);
    rig.engine.on_tick(rig.now);
    assert!(sends(&rig.drain()).is_empty());
}
