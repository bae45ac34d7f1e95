//! The simulator's properties: determinism, certification with and without
//! faults, and the byte accounting. No wall-clock limits: the runs are
//! judged on what they simulated, never on how long they took.

use resolvd_engine::{Aggregation, Dissemination, Gossip};
use resolvd_sim::{run, Config, Faults, Partition, Role, Simulation};
use std::time::Duration;

fn config(nodes: usize, seed: u64, faults: &str) -> Config {
    let mut cfg = Config::new(nodes, seed);
    cfg.faults = Faults::parse(faults, nodes).unwrap();
    cfg
}

#[test]
fn same_seed_same_report_byte_for_byte_and_another_seed_other_latencies() {
    let a = run(config(16, 7, "garbage=2,slow=2x4")).unwrap().to_json();
    let b = run(config(16, 7, "garbage=2,slow=2x4")).unwrap().to_json();
    assert_eq!(a, b);
    let c = run(config(16, 8, "garbage=2,slow=2x4")).unwrap();
    let a = run(config(16, 7, "garbage=2,slow=2x4")).unwrap();
    assert_ne!(a.seen_to_certificate_ms, c.seen_to_certificate_ms);
    assert_ne!(a.to_json(), c.to_json());
}

#[test]
fn honest_committee_of_16_every_node_certifies_and_settles() {
    let r = run(config(16, 1, "none")).unwrap();
    assert_eq!((r.live, r.honest), (16, 16));
    assert!(r.all_honest_certified, "{}", r.to_json());
    assert!(r.settled);
    // 2/3 of 16 equal stakes: 11 signers at least.
    assert!(r.certificate_signers.unwrap() >= 11);
    assert!(r.first_certificate_signers_min.unwrap() >= 11);
    assert!(r.seen_to_settled_ms.is_some());
    assert_eq!(r.evidence, 0, "no honest node signs twice");
    let verdicts = &r.validations["verdicts"];
    assert_eq!(verdicts.reject, 0);
    // Each honest node accepts the 15 partials of the others.
    assert_eq!(verdicts.accept, 16 * 15);
    assert!(r.cpu_over_floor >= 1.0);
}

#[test]
fn a_third_crashed_still_certifies() {
    let r = run(config(16, 2, "crash=5")).unwrap();
    assert_eq!((r.live, r.honest), (11, 11));
    assert!(r.all_honest_certified, "{}", r.to_json());
    assert_eq!(r.certificate_signers, Some(11));
    assert!(r.settled);
}

#[test]
fn more_than_a_third_crashed_never_certifies() {
    let mut cfg = config(16, 3, "crash=6");
    cfg.max_time = Duration::from_secs(20);
    let r = run(cfg).unwrap();
    assert_eq!(r.live, 10);
    assert_eq!(r.honest_certified, 0);
    assert!(!r.settled);
    assert!(r.seen_to_certificate_ms.is_none());
    assert_eq!(r.virtual_ms, 20_000.0);
}

#[test]
fn withholding_a_third_leaves_exactly_the_threshold() {
    let r = run(config(16, 4, "withhold=5")).unwrap();
    assert_eq!(r.honest, 11);
    assert!(r.all_honest_certified, "{}", r.to_json());
    assert_eq!(r.certificate_signers, Some(11));
}

#[test]
fn garbage_partials_are_rejected_and_do_not_stop_certification() {
    let mut sim = Simulation::new(config(16, 5, "garbage=5")).unwrap();
    let r = sim.run();
    assert!(r.all_honest_certified, "{}", r.to_json());
    // The garbage senders' own (valid) partials never left them.
    assert_eq!(r.certificate_signers, Some(11));
    // Every honest node that got a garbage partial first-hand rejected it
    // after its batch; rejected messages are not forwarded.
    let rejected = r.validations["verdicts"].reject;
    assert!(rejected > 0, "{}", r.to_json());
    let garbage_peers: u64 = sim
        .node_stats()
        .filter(|s| s.role == Role::Honest)
        .map(|s| s.validations["verdicts"][2])
        .sum();
    assert_eq!(garbage_peers, rejected);
}

#[test]
fn bytes_sent_are_the_encoded_sizes_plus_overhead() {
    for loss in [0.0, 0.05] {
        let mut cfg = config(16, 6, "garbage=2");
        cfg.trace = true;
        cfg.net.loss = loss;
        let overhead = cfg.net.overhead as u64;
        let mut sim = Simulation::new(cfg).unwrap();
        let r = sim.run();
        assert!(r.all_honest_certified);
        let mut total = 0;
        for s in sim.sends() {
            let m = sim.message(s.msg);
            // The real encoding: decoded and encoded again by the proto crate.
            let (topic, bytes) = Gossip::decode(m.topic, &m.data).unwrap().encode();
            assert_eq!(topic, m.topic);
            let copy = bytes.len() as u64 + overhead;
            assert_eq!(sim.copy_bytes(s.msg), copy);
            if s.retransmits == 0 {
                assert_eq!(s.bytes, copy);
            } else {
                assert!(s.bytes > copy);
            }
            total += s.bytes;
        }
        let counted: u64 = sim.node_stats().map(|s| s.bytes_sent).sum();
        assert_eq!(total, counted);
        let copies: u64 = sim.node_stats().map(|s| s.messages_sent).sum();
        assert_eq!(copies, sim.sends().len() as u64);
        assert_eq!(loss == 0.0, sim.sends().iter().all(|s| s.retransmits == 0));
    }
}

#[test]
fn slow_nodes_spend_more_modelled_cpu() {
    let mut sim = Simulation::new(config(16, 9, "slow=4x8")).unwrap();
    let r = sim.run();
    assert!(r.all_honest_certified);
    let (mut slow, mut fast) = (Vec::new(), Vec::new());
    for s in sim.node_stats() {
        if s.slow > 1 {
            slow.push(s.cpu_ns)
        } else {
            fast.push(s.cpu_ns)
        }
    }
    assert_eq!(slow.len(), 4);
    assert!(slow.iter().min() > fast.iter().max(), "{slow:?} {fast:?}");
}

#[test]
fn as_many_shared_cores_as_nodes_is_a_cpu_per_node() {
    // A node's jobs run one at a time, so with a core per node one is always
    // free when the node is: the same run, event for event.
    let own = run(config(16, 13, "garbage=2,slow=2x4")).unwrap();
    let mut cfg = config(16, 13, "garbage=2,slow=2x4");
    cfg.cores = Some(16);
    let mut shared = run(cfg).unwrap();
    assert_eq!(shared.shared_cores, Some(16));
    shared.shared_cores = None;
    assert_eq!(own.to_json(), shared.to_json());
}

#[test]
fn shared_cores_never_run_more_than_they_have_and_queue_the_burst() {
    // Every modelled cost × 20 and 200 µs per message copy: a node's work
    // for the dispute is about 0.1 s of CPU.
    let run_with = |cores: Option<usize>, max_secs: u64| {
        let mut cfg = aggregating(64, 14, "none");
        cfg.cpu_scale = 20.0;
        cfg.transport = Duration::from_micros(200);
        cfg.cores = cores;
        cfg.max_time = Duration::from_secs(max_secs);
        let mut sim = Simulation::new(cfg).unwrap();
        let r = sim.run();
        assert_eq!(r.evidence, 0);
        let cpu_ms = sim.node_stats().map(|s| s.cpu_ns).sum::<u64>() as f64 / 1e6;
        (r, cpu_ms)
    };
    // Stopped in the middle of the burst (the dispute is seen 1 to 2 s in):
    // with a CPU per node the nodes did more work than two cores could have.
    let (own, own_cpu_ms) = run_with(None, 3);
    assert_eq!((own.cpu_scale, own.transport_us), (20.0, 200.0));
    assert!(own_cpu_ms > 2.0 * own.virtual_ms, "{own_cpu_ms} ms of CPU in {} ms", own.virtual_ms);
    for cores in [1, 2] {
        let (r, cpu_ms) = run_with(Some(cores), 3);
        // k cores do at most k core-seconds per second, give or take the
        // last job each started (charged whole when it starts).
        let slack = 100.0 * cores as f64;
        assert!(
            cpu_ms <= cores as f64 * r.virtual_ms + slack,
            "{cpu_ms} ms of CPU on {cores} cores in {} ms",
            r.virtual_ms
        );
    }
    // Run to the end, the shared cores only delay: every node certifies,
    // later than with a CPU each.
    let (own, _) = run_with(None, 40);
    let (shared, _) = run_with(Some(2), 40);
    for r in [&own, &shared] {
        assert!(r.all_honest_certified && r.settled, "{}", r.to_json());
    }
    let p50 = |r: &resolvd_sim::Report| r.seen_to_certificate_ms.as_ref().unwrap().p50;
    assert!(p50(&shared) > 2.0 * p50(&own), "{} ms against {} ms", p50(&shared), p50(&own));
}

#[test]
fn geo_latencies_and_publishing_to_everyone_run() {
    let mut cfg = config(24, 10, "none");
    cfg.net.latency = "geo".parse().unwrap();
    cfg.net.publish = resolvd_sim::PublishTo::All;
    cfg.net.mesh = 4;
    let r = run(cfg).unwrap();
    assert!(r.all_honest_certified, "{}", r.to_json());
    assert_eq!(r.latency, "geo");
}

#[test]
fn committee_of_64_certifies_and_settles_without_evidence() {
    for faults in ["none", "garbage=1/3"] {
        let r = run(config(64, 11, faults)).unwrap();
        assert!(r.all_honest_certified, "{}", r.to_json());
        assert!(r.settled);
        assert!(r.certificate_signers.unwrap() >= 43);
        assert_eq!(r.evidence, 0, "no honest node signs twice");
    }
}

fn aggregating(nodes: usize, seed: u64, faults: &str) -> Config {
    let mut cfg = config(nodes, seed, faults);
    cfg.dissemination = Dissemination::Aggregators(Aggregation {
        group: 8,
        escalate_after: Duration::from_millis(ESCALATE_MS),
        ..Aggregation::default()
    });
    cfg
}

const ESCALATE_MS: u64 = 500;

#[test]
fn aggregators_certify_every_honest_node_with_a_fraction_of_the_flood_bytes() {
    let flood = run(config(64, 12, "none")).unwrap();
    for faults in ["none", "withhold=1/3", "garbage=1/3"] {
        let r = run(aggregating(64, 12, faults)).unwrap();
        assert_eq!(r.partials, "8/32 of 64 → 8");
        assert!(r.all_honest_certified, "{}", r.to_json());
        assert!(r.settled);
        assert!(r.certificate_signers.unwrap() >= 43);
        assert_eq!(r.evidence, 0, "no honest node signs twice");
        // Own partials go to 8 members, not through the mesh of everyone.
        assert!(
            r.kib_sent_per_node.mean * 5.0 < flood.kib_sent_per_node.mean,
            "{faults}: {} KiB against {} KiB flooded",
            r.kib_sent_per_node.mean,
            flood.kib_sent_per_node.mean
        );
        // Partials are accepted only by the members they were sent to.
        let accepted = r.validations["verdicts"].accept;
        assert!(accepted < flood.validations["verdicts"].accept / 4, "{accepted}");
    }
}

#[test]
fn withholding_aggregators_are_routed_around_by_escalation() {
    // The 21 byzantine members are the first of the dispute's submitter
    // order (a block hash ground for it): the whole first group (8) and most
    // of the second (16) withhold.
    let mut cfg = aggregating(64, 13, "withhold=1/3,adversarial");
    cfg.max_time = Duration::from_secs(60);
    let r = run(cfg).unwrap();
    assert!(r.all_honest_certified, "{}", r.to_json());
    // They are also the first 21 submitters: the 22nd sends after 11 submit
    // slots (44 s; one slot per rank would be 84 s, past the run's end).
    assert!(r.settled, "{}", r.to_json());
    let latency = r.seen_to_certificate_ms.as_ref().unwrap();
    // Most members certified only after the first escalation: the first
    // group never gossips a certificate.
    assert!(latency.p50 >= ESCALATE_MS as f64, "{}", r.to_json());
    // Placed at random, the same number of withholders leaves honest members
    // in the first group, and no member needs to escalate. So does a deal id
    // ground to put them first: the order is seeded by the dispute's entropy.
    for faults in ["withhold=1/3", "withhold=1/3,ground-deal"] {
        let r = run(aggregating(64, 13, faults)).unwrap();
        assert!(r.all_honest_certified, "{faults}: {}", r.to_json());
        let p99 = r.seen_to_certificate_ms.as_ref().unwrap().p99;
        assert!(p99 < ESCALATE_MS as f64, "{faults}: {}", r.to_json());
    }
}

/// Equivocating members' conflicting partials reach the honest members as
/// evidence against exactly them, flooded and through aggregators, and the
/// honest majority still certifies; no honest member is ever convicted.
#[test]
fn equivocators_are_convicted_and_only_they() {
    for cfg in [config(32, 21, "equivocate=4"), aggregating(64, 21, "equivocate=8")] {
        let nodes = cfg.nodes;
        let mut sim = Simulation::new(cfg).unwrap();
        let r = sim.run();
        assert!(r.all_honest_certified && r.settled, "{}", r.to_json());
        let equivocators: Vec<u32> = sim
            .node_stats()
            .enumerate()
            .filter(|(_, s)| s.role == Role::Equivocating)
            .map(|(i, _)| i as u32)
            .collect();
        assert_eq!(equivocators.len(), nodes / 8);
        assert!(r.evidence > 0, "{}", r.to_json());
        assert!(!r.convicted.is_empty());
        assert!(
            r.convicted.iter().all(|i| equivocators.contains(i)),
            "convicted {:?}, equivocators {equivocators:?}",
            r.convicted
        );
        // Honest members' own evidence names equivocators too.
        let honest_convicted: usize =
            sim.node_stats().filter(|s| s.role == Role::Honest).map(|s| s.convicted.len()).sum();
        assert!(honest_convicted > 0);
    }
}

/// With commit-reveal, every honest member commits, reveals and certifies,
/// flooded and through aggregators, and the commitments that members forge
/// in every other member's name are rejected and never count.
#[test]
fn commit_reveal_certifies_and_forged_commitments_are_rejected() {
    for mut cfg in [config(32, 22, "forge=2"), aggregating(64, 22, "forge=4")] {
        cfg.commit_reveal = Some(Duration::from_millis(500));
        let r = run(cfg).unwrap();
        assert_eq!(r.commit_reveal_ms, Some(500));
        assert!(r.all_honest_certified && r.settled, "{}", r.to_json());
        assert_eq!(r.evidence, 0, "{}", r.to_json());
        let commits = &r.validations["commits"];
        assert!(commits.reject > 0, "forgeries rejected: {}", r.to_json());
        assert!(commits.accept > 0, "real commitments accepted");
        // The forgeries did not close the commit phase early: the settling
        // certificate holds the threshold of real reveals.
        assert!(r.certificate_signers.unwrap() * 3 >= r.nodes * 2);
    }
    let plain = run(config(32, 22, "none")).unwrap();
    assert_eq!(plain.validations.get("commits").map_or(0, |v| v.accept), 0);
}

/// Half of the committee cut off from the other half for 3 s: neither side
/// holds 2/3 of the stake, so nobody certifies while the cut lasts; after
/// the heal, TCP's retransmissions deliver and every honest member certifies.
#[test]
fn a_partition_stops_certification_until_it_heals() {
    for mut cfg in [config(32, 23, "none"), aggregating(64, 23, "none")] {
        let nodes = cfg.nodes;
        cfg.net.partition = Some(Partition::parse("1/2@0-3000", nodes).unwrap());
        let mut sim = Simulation::new(cfg).unwrap();
        let r = sim.run();
        assert!(r.all_honest_certified && r.settled, "{}", r.to_json());
        assert!(r.partition.as_deref().unwrap().starts_with(&format!("{} members", nodes / 2)));
        // No member held a certificate before the heal.
        let first = sim.node_stats().filter_map(|s| s.cert_at).min().unwrap();
        assert!(first >= 3_000_000_000, "first certificate at {first} ns");
        assert!(r.retransmits > 0);
    }
    // A cut-off third leaves the other side the threshold: it certifies.
    let mut cfg = config(32, 23, "none");
    cfg.net.partition = Some(Partition::parse("10@0-30000", 32).unwrap());
    cfg.max_time = Duration::from_secs(20);
    let r = run(cfg).unwrap();
    assert!(r.settled, "{}", r.to_json());
    assert!(!r.all_honest_certified, "the cut-off side holds none before the heal");
}

#[test]
fn the_plot_draws_one_line_per_series_in_each_panel_and_is_deterministic() {
    let mut runs = Vec::new();
    for n in [16, 24] {
        runs.push(("flood, none".to_owned(), run(config(n, 14, "none")).unwrap()));
        runs.push(("aggregators, none".to_owned(), run(aggregating(n, 14, "none")).unwrap()));
    }
    let svg = resolvd_sim::plot::svg(&runs);
    assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
    assert_eq!(svg.matches("<polyline").count(), 4, "two series, two panels");
    assert_eq!(svg.matches("<circle").count(), 8);
    assert!(svg.contains("stroke-dasharray"), "aggregators dashed");
    assert_eq!(svg, resolvd_sim::plot::svg(&runs));
}
