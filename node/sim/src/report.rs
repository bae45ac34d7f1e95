//! What a run measured: per-member counters ([`NodeStats`]) and the run's
//! summary ([`Report`]), as JSON and as one Markdown table row.

use crate::config::{Config, PublishTo};
use resolvd_engine::{Dissemination, Topic, Validation};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// What a member does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Follows the protocol.
    Honest,
    /// Never starts.
    Crashed,
    /// Signs but never publishes its partial.
    Withholding,
    /// Publishes a partial with an invalid signature instead of its own.
    Garbage,
    /// Signs both outcomes and sends both partials.
    Equivocating,
    /// Forges commitments in every other member's name; withholds its own.
    Forging,
}

/// One member's counters over the run (times in virtual ns from the
/// challenge being mined).
#[derive(Clone, Debug, Serialize)]
pub struct NodeStats {
    /// Its role.
    pub role: Role,
    /// Its CPU factor.
    pub slow: u32,
    /// When its engine confirmed the dispute and started it.
    pub seen_at: Option<u64>,
    /// When it first held a certificate (built or received).
    pub cert_at: Option<u64>,
    /// Signers of that first certificate.
    pub cert_signers: Option<usize>,
    /// When it saw the dispute settled.
    pub settled_at: Option<u64>,
    /// Bytes it put on its uplink (overhead and retransmissions included).
    pub bytes_sent: u64,
    /// Message copies it sent.
    pub messages_sent: u64,
    /// Packets it retransmitted.
    pub retransmits: u64,
    /// Message copies that reached it.
    pub received: u64,
    /// Of those, copies its seen cache dropped.
    pub duplicates: u64,
    /// Modelled CPU time spent, slowness included.
    pub cpu_ns: u64,
    /// Own partials it did not publish (withholding).
    pub withheld: u64,
    /// Evidence files its slasher wrote.
    pub evidence: u64,
    /// The members that evidence it wrote convicts.
    pub convicted: BTreeSet<u32>,
    /// The engine's verdicts on gossip, per topic: accept, ignore, reject.
    pub validations: BTreeMap<&'static str, [u64; 3]>,
    /// Gossip the engine ignored unverified under one of its bounds, by
    /// bound (its `gossip_bounded` metric, and `dropped_partials`).
    pub bounded: BTreeMap<&'static str, u64>,
}

impl NodeStats {
    pub(crate) fn new(role: Role, slow: u32) -> Self {
        Self {
            role,
            slow,
            seen_at: None,
            cert_at: None,
            cert_signers: None,
            settled_at: None,
            bytes_sent: 0,
            messages_sent: 0,
            retransmits: 0,
            received: 0,
            duplicates: 0,
            cpu_ns: 0,
            withheld: 0,
            evidence: 0,
            convicted: BTreeSet::new(),
            validations: BTreeMap::new(),
            bounded: BTreeMap::new(),
        }
    }

    pub(crate) fn count(&mut self, topic: Topic, v: Validation) {
        let k = match v {
            Validation::Accept => 0,
            Validation::Ignore => 1,
            Validation::Reject => 2,
        };
        self.validations.entry(topic.label()).or_default()[k] += 1;
    }

    /// Dispute seen → certificate held, in ns.
    pub fn seen_to_certificate(&self) -> Option<u64> {
        Some(self.cert_at?.saturating_sub(self.seen_at?))
    }
}

/// p50, p99 and maximum (nearest rank).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl Percentiles {
    fn of(mut v: Vec<f64>) -> Option<Self> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let rank = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Some(Self { p50: round(rank(0.50)), p99: round(rank(0.99)), max: round(v[v.len() - 1]) })
    }
}

/// Mean and maximum.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Spread {
    /// Mean.
    pub mean: f64,
    /// Largest.
    pub max: f64,
}

impl Spread {
    fn of(v: &[f64]) -> Self {
        if v.is_empty() {
            return Self { mean: 0.0, max: 0.0 };
        }
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        Self { mean: round(mean), max: round(v.iter().copied().fold(0.0, f64::max)) }
    }
}

/// Gossip verdicts of one topic, summed over the honest members.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Verdicts {
    /// Accepted (and forwarded).
    pub accept: u64,
    /// Ignored.
    pub ignore: u64,
    /// Rejected (the sender is not scored in this model).
    pub reject: u64,
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// A run's summary. Figures "per node" are over the honest members (not
/// crashed or byzantine); slow members are honest.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Committee members.
    pub nodes: usize,
    /// The run's seed.
    pub seed: u64,
    /// Faulty members (`none`, or counts).
    pub faults: String,
    /// Link latency model.
    pub latency: String,
    /// Packet loss probability.
    pub loss: f64,
    /// Upload bandwidth per node, Mbit/s.
    pub uplink_mbit_s: f64,
    /// Gossip mesh degree.
    pub mesh: usize,
    /// Where own messages are published.
    pub publish: PublishTo,
    /// How own partials travel: `flood`, or `aggregators K` (the first
    /// group's size).
    pub partials: String,
    /// Bytes added to each message's encoding.
    pub overhead_bytes: usize,
    /// CPUs all nodes share (`None`: one per node).
    pub shared_cores: Option<usize>,
    /// Every modelled CPU cost × this.
    pub cpu_scale: f64,
    /// CPU added per message copy sent or received, µs.
    pub transport_us: f64,
    /// Members that started.
    pub live: usize,
    /// Honest members.
    pub honest: usize,
    /// Honest members that held a certificate.
    pub honest_certified: usize,
    /// Whether every honest member held a certificate.
    pub all_honest_certified: bool,
    /// Dispute seen → certificate held, ms, over the honest members that held one.
    pub seen_to_certificate_ms: Option<Percentiles>,
    /// Dispute seen → settlement seen, ms, over the honest members.
    pub seen_to_settled_ms: Option<Percentiles>,
    /// Whether a `resolve` was mined.
    pub settled: bool,
    /// Signers of the certificate that settled the dispute.
    pub certificate_signers: Option<usize>,
    /// Fewest signers of the first certificate an honest member held.
    pub first_certificate_signers_min: Option<usize>,
    /// Bytes sent per honest member over the run (KiB).
    pub kib_sent_per_node: Spread,
    /// Message copies sent per honest member.
    pub messages_sent_per_node: Spread,
    /// Copies received per honest member that were duplicates.
    pub duplicates_per_node: Spread,
    /// Modelled CPU per honest member over the run, ms.
    pub cpu_ms_per_node: Spread,
    /// Own replay + own signature + one check of the settled certificate, ms.
    pub floor_ms: f64,
    /// Mean CPU per honest member ÷ the floor.
    pub cpu_over_floor: f64,
    /// Packets retransmitted, all members.
    pub retransmits: u64,
    /// Evidence files written, all members (none without equivocating members).
    pub evidence: u64,
    /// The members any evidence convicts (honest members never).
    pub convicted: Vec<u32>,
    /// Commit-reveal's window, ms (`None`: off).
    pub commit_reveal_ms: Option<u64>,
    /// The partition, if any.
    pub partition: Option<String>,
    /// The engines' gossip verdicts, summed over the honest members.
    pub validations: BTreeMap<&'static str, Verdicts>,
    /// Gossip ignored unverified under the engines' bounds, by bound,
    /// summed over the honest members.
    pub bounded: BTreeMap<&'static str, u64>,
    /// Distinct gossip messages.
    pub messages: usize,
    /// Events processed.
    pub events: u64,
    /// Virtual time at the end of the run, ms.
    pub virtual_ms: f64,
}

impl Report {
    pub(crate) fn new<'a>(
        cfg: &Config,
        stats: impl Iterator<Item = &'a NodeStats>,
        certificate_signers: Option<usize>,
        settled_at: Option<u64>,
        end: u64,
        messages: usize,
        events: u64,
    ) -> Self {
        let all: Vec<&NodeStats> = stats.collect();
        let honest: Vec<&NodeStats> =
            all.iter().copied().filter(|s| s.role == Role::Honest).collect();
        let latencies: Vec<f64> =
            honest.iter().filter_map(|s| s.seen_to_certificate()).map(ms).collect();
        let settle: Vec<f64> = honest
            .iter()
            .filter_map(|s| Some(s.settled_at?.saturating_sub(s.seen_at?)))
            .map(ms)
            .collect();
        let per = |f: fn(&NodeStats) -> f64| -> Spread {
            Spread::of(&honest.iter().map(|s| f(s)).collect::<Vec<_>>())
        };
        let cpu = per(|s| ms(s.cpu_ns));
        // The floor is that of the certificate that settled, else of one
        // with the threshold's signers.
        let threshold = (cfg.nodes * 6667).div_ceil(10_000);
        let floor = ms(cfg.costs.floor(certificate_signers.unwrap_or(threshold)).as_nanos() as u64);
        let mut validations: BTreeMap<&'static str, Verdicts> = BTreeMap::new();
        for s in &honest {
            for (topic, [a, i, r]) in &s.validations {
                let v = validations.entry(topic).or_default();
                v.accept += a;
                v.ignore += i;
                v.reject += r;
            }
        }
        let mut bounded: BTreeMap<&'static str, u64> = BTreeMap::new();
        for s in &honest {
            for (reason, n) in &s.bounded {
                *bounded.entry(reason).or_default() += n;
            }
        }
        let honest_certified = honest.iter().filter(|s| s.cert_at.is_some()).count();
        Self {
            nodes: cfg.nodes,
            seed: cfg.seed,
            faults: cfg.faults.to_string(),
            latency: cfg.net.latency.to_string(),
            loss: cfg.net.loss,
            uplink_mbit_s: cfg.net.uplink_bps as f64 / 1e6,
            mesh: cfg.net.mesh,
            publish: cfg.net.publish,
            partials: match cfg.dissemination {
                Dissemination::Flood => "flood".to_owned(),
                Dissemination::Aggregators(a) if a.slice > 0 && cfg.nodes > a.slice => {
                    format!("{}/{} of {} → {}", a.collectors, a.slice, cfg.nodes, a.group)
                }
                Dissemination::Aggregators(a) => format!("→ {}", a.group),
            },
            overhead_bytes: cfg.net.overhead,
            shared_cores: cfg.cores,
            cpu_scale: cfg.cpu_scale,
            transport_us: cfg.transport.as_secs_f64() * 1e6,
            live: all.iter().filter(|s| s.role != Role::Crashed).count(),
            honest: honest.len(),
            honest_certified,
            all_honest_certified: honest_certified == honest.len(),
            seen_to_certificate_ms: Percentiles::of(latencies),
            seen_to_settled_ms: Percentiles::of(settle),
            settled: settled_at.is_some(),
            certificate_signers,
            first_certificate_signers_min: honest.iter().filter_map(|s| s.cert_signers).min(),
            kib_sent_per_node: per(|s| s.bytes_sent as f64 / 1024.0),
            messages_sent_per_node: per(|s| s.messages_sent as f64),
            duplicates_per_node: per(|s| s.duplicates as f64),
            floor_ms: round(floor),
            cpu_over_floor: round(cpu.mean / floor),
            cpu_ms_per_node: cpu,
            retransmits: all.iter().map(|s| s.retransmits).sum(),
            evidence: all.iter().map(|s| s.evidence).sum(),
            convicted: all
                .iter()
                .flat_map(|s| s.convicted.iter().copied())
                .collect::<BTreeSet<u32>>()
                .into_iter()
                .collect(),
            commit_reveal_ms: cfg.commit_reveal.map(|w| w.as_millis() as u64),
            partition: cfg.net.partition.as_ref().map(ToString::to_string),
            validations,
            bounded,
            messages,
            events,
            virtual_ms: round(ms(end)),
        }
    }

    /// The report as JSON (the same bytes for the same parameters and seed).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report serializes")
    }

    /// The header of [`Self::table_row`]'s table.
    pub const TABLE_HEADER: &'static str = "| N | partials | faults | seen → certificate p50 / p99 | KiB sent per node, mean (max) | messages sent per node | CPU per node, mean (× floor), max | every honest node certified | signers |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |";

    /// One Markdown table row.
    pub fn table_row(&self) -> String {
        let latency = self
            .seen_to_certificate_ms
            .as_ref()
            .map_or("none".to_owned(), |p| format!("{} / {}", fmt_ms(p.p50), fmt_ms(p.p99)));
        let certified = if self.all_honest_certified {
            "yes".to_owned()
        } else {
            format!("no ({} of {})", self.honest_certified, self.honest)
        };
        let mut faults = self.faults.clone();
        if let Some(w) = self.commit_reveal_ms {
            faults.push_str(&format!("; commit-reveal {w} ms"));
        }
        if let Some(p) = &self.partition {
            faults.push_str(&format!("; {p}"));
        }
        if let Some(k) = self.shared_cores {
            faults.push_str(&format!("; {k} shared cores"));
        }
        if self.transport_us > 0.0 {
            faults.push_str(&format!("; {:.0} µs per copy", self.transport_us));
        }
        if self.cpu_scale != 1.0 {
            faults.push_str(&format!("; CPU × {}", self.cpu_scale));
        }
        if self.publish == PublishTo::All {
            faults.push_str("; own messages to every member");
        }
        format!(
            "| {} | {} | {} | {} | {:.0} ({:.0}) | {:.0} | {:.1} ms ({:.1} ×), {:.1} ms | {} | {} |",
            self.nodes,
            self.partials,
            faults,
            latency,
            self.kib_sent_per_node.mean,
            self.kib_sent_per_node.max,
            self.messages_sent_per_node.mean,
            self.cpu_ms_per_node.mean,
            self.cpu_over_floor,
            self.cpu_ms_per_node.max,
            certified,
            self.certificate_signers.map_or("–".to_owned(), |s| s.to_string()),
        )
    }
}

fn fmt_ms(x: f64) -> String {
    if x >= 1000.0 {
        format!("{:.2} s", x / 1000.0)
    } else {
        format!("{x:.0} ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let p = Percentiles::of((1..=100).map(f64::from).collect()).unwrap();
        assert_eq!((p.p50, p.p99, p.max), (50.0, 99.0, 100.0));
        assert!(Percentiles::of(Vec::new()).is_none());
        let one = Percentiles::of(vec![7.0]).unwrap();
        assert_eq!((one.p50, one.p99), (7.0, 7.0));
    }
}
