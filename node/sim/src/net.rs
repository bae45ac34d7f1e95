//! The network model: link latencies, the gossip mesh, each node's uplink
//! and TCP-like delivery (in order per link; a lost packet costs a
//! retransmission timeout, nothing is lost for good).

use crate::{
    config::{Latency, NetConfig},
    rng::{splitmix, unit, Rng},
};
use std::collections::{BTreeSet, HashMap};

/// Regions of the geo mix and their one-way latencies in ms (about half of
/// typical public round trips between cloud regions): us-east, us-west,
/// europe, asia, south-america.
pub const REGIONS: [&str; 5] = ["us-east", "us-west", "europe", "asia", "south-america"];
const GEO_MS: [[f64; 5]; 5] = [
    [5.0, 32.0, 40.0, 95.0, 60.0],
    [32.0, 5.0, 70.0, 60.0, 85.0],
    [40.0, 70.0, 5.0, 110.0, 100.0],
    [95.0, 60.0, 110.0, 5.0, 150.0],
    [60.0, 85.0, 100.0, 150.0, 5.0],
];

/// Largest TCP payload of one packet (1500-byte MTU).
const MSS: usize = 1448;
/// Linux's minimum retransmission timeout, added to the round trip.
const RTO_MIN_NS: u64 = 200_000_000;

/// One-way latency of every link, derived from the seed without storing
/// N² values.
pub(crate) struct Links {
    latency: Latency,
    seed: u64,
    regions: Vec<usize>,
}

impl Links {
    pub(crate) fn new(latency: &Latency, seed: u64, nodes: usize) -> Self {
        let mut order: Vec<usize> = (0..nodes).collect();
        Rng::new(seed, 0x6e0).shuffle(&mut order);
        let mut regions = vec![0; nodes];
        for (k, node) in order.into_iter().enumerate() {
            regions[node] = k % REGIONS.len();
        }
        Self { latency: latency.clone(), seed, regions }
    }

    /// One-way latency a → b in ns (symmetric).
    pub(crate) fn latency_ns(&self, a: u32, b: u32) -> u64 {
        let (lo, hi) = (a.min(b) as u64, a.max(b) as u64);
        let u = unit(splitmix(self.seed ^ splitmix(0x11_4c ^ (lo << 32 | hi))));
        match &self.latency {
            Latency::Uniform { mean, spread } => {
                let (mean, spread) = (mean.as_nanos() as f64, spread.as_nanos() as f64);
                (mean - spread + 2.0 * spread * u).round() as u64
            }
            Latency::Geo => {
                let ms = GEO_MS[self.regions[a as usize]][self.regions[b as usize]];
                (ms * 1e6 * (0.9 + 0.2 * u)).round() as u64
            }
        }
    }
}

/// A random graph of degree about `d` over the `live` nodes, built from the
/// seed: each node in turn takes peers with room (degree below gossipsub's
/// D_high = D + D/2) until it has D; components left apart are then joined.
/// Fewer than D + 1 live nodes: everyone is everyone's peer.
pub(crate) fn mesh(live: &[u32], d: usize, seed: u64) -> HashMap<u32, Vec<u32>> {
    let mut adj: HashMap<u32, BTreeSet<u32>> = live.iter().map(|&n| (n, BTreeSet::new())).collect();
    if live.len() <= d + 1 {
        for &a in live {
            for &b in live {
                if a != b {
                    link(&mut adj, a, b);
                }
            }
        }
    } else {
        let high = d + d / 2;
        let mut rng = Rng::new(seed, 0x3e54);
        let mut order = live.to_vec();
        rng.shuffle(&mut order);
        for &a in &order {
            let mut tries = 0;
            while adj[&a].len() < d && tries < 50 * d {
                tries += 1;
                let b = live[rng.below(live.len())];
                if b == a || adj[&a].contains(&b) || adj[&b].len() >= high {
                    continue;
                }
                link(&mut adj, a, b);
            }
        }
        join_components(&mut adj, live);
    }
    adj.into_iter().map(|(k, v)| (k, v.into_iter().collect())).collect()
}

fn link(adj: &mut HashMap<u32, BTreeSet<u32>>, a: u32, b: u32) {
    if let Some(s) = adj.get_mut(&a) {
        s.insert(b);
    }
    if let Some(s) = adj.get_mut(&b) {
        s.insert(a);
    }
}

/// Links each component to the first one (by lowest member), deterministically.
fn join_components(adj: &mut HashMap<u32, BTreeSet<u32>>, live: &[u32]) {
    let mut sorted = live.to_vec();
    sorted.sort_unstable();
    let mut component: HashMap<u32, usize> = HashMap::new();
    let mut roots = Vec::new();
    for &start in &sorted {
        if component.contains_key(&start) {
            continue;
        }
        let c = roots.len();
        roots.push(start);
        let mut stack = vec![start];
        component.insert(start, c);
        while let Some(n) = stack.pop() {
            for &m in &adj[&n] {
                if component.insert(m, c).is_none() {
                    stack.push(m);
                }
            }
        }
    }
    for &root in roots.iter().skip(1) {
        let first = roots[0];
        link(adj, first, root);
    }
}

/// When one message copy leaves and arrives, and what it cost the uplink.
pub(crate) struct Transfer {
    /// Bytes put on the wire, retransmissions included.
    pub(crate) bytes: u64,
    /// Arrival at the receiver (ns).
    pub(crate) arrival: u64,
    /// Packets retransmitted.
    pub(crate) retransmits: u32,
}

/// Each node's uplink and each directed link's delivery order.
pub(crate) struct Wire {
    uplink_free: Vec<u64>,
    /// Per directed link: the last arrival (TCP delivers in order) and
    /// when it last sent.
    links_state: HashMap<(u32, u32), (u64, Option<u64>)>,
    loss: Rng,
    links: Links,
    uplink_bps: u64,
    loss_p: f64,
    /// The partition: which side each member is on, and its window (ns).
    cut: Option<(Vec<bool>, u64, u64)>,
}

impl Wire {
    pub(crate) fn new(cfg: &NetConfig, seed: u64, nodes: usize) -> Self {
        Self {
            uplink_free: vec![0; nodes],
            links_state: HashMap::new(),
            loss: Rng::new(seed, 0x1055),
            links: Links::new(&cfg.latency, seed, nodes),
            uplink_bps: cfg.uplink_bps,
            loss_p: cfg.loss,
            cut: cfg.partition.as_ref().map(|p| {
                let mut order: Vec<usize> = (0..nodes).collect();
                Rng::new(seed, 0xc07).shuffle(&mut order);
                let mut side = vec![false; nodes];
                for i in order.into_iter().take(p.members) {
                    side[i] = true;
                }
                (side, p.from.as_nanos() as u64, p.until.as_nanos() as u64)
            }),
        }
    }

    /// Whether a copy from `from` to `to` leaving at `at` crosses the
    /// partition while it holds: then the next transmission after the heal,
    /// at `at` plus the retransmission timeouts (`rto`, doubling).
    fn across_cut(&self, from: u32, to: u32, at: u64, rto: u64) -> Option<(u64, u32)> {
        let (side, begins, heals) = self.cut.as_ref()?;
        if side[from as usize] == side[to as usize] || at < *begins || at >= *heals {
            return None;
        }
        let (mut resent_at, mut rto, mut tries) = (at, rto, 0);
        while resent_at < *heals {
            resent_at += rto;
            rto *= 2;
            tries += 1;
        }
        Some((resent_at, tries))
    }

    #[cfg(test)]
    pub(crate) fn latency_ns(&self, a: u32, b: u32) -> u64 {
        self.links.latency_ns(a, b)
    }

    fn serialize_ns(&self, bytes: usize) -> u64 {
        (bytes as u128 * 8 * 1_000_000_000 / self.uplink_bps as u128) as u64
    }

    /// Sends `bytes` from `from` to `to` at `now`: it waits for the sender's
    /// uplink and crosses the link. A lost packet is sent again once the
    /// sender detects the loss, as Linux's RACK-TLP does: 1.25 round trips
    /// after it was sent while the link carries a flow (a later packet's
    /// acknowledgement reveals it; the link sent something within the last
    /// round trip), else two round trips (the tail loss probe); a
    /// retransmission lost again waits for the retransmission timeout
    /// (round trip + 200 ms, doubling). The link delivers in order, so what
    /// follows on it waits too (head-of-line blocking).
    pub(crate) fn send(&mut self, from: u32, to: u32, bytes: usize, now: u64) -> Transfer {
        let one_way = self.links.latency_ns(from, to);
        let rtt = 2 * one_way;
        let start = now.max(self.uplink_free[from as usize]);
        let done = start + self.serialize_ns(bytes);
        self.uplink_free[from as usize] = done;
        let link = self.links_state.entry((from, to)).or_insert((0, None));
        let flowing = link.1.is_some_and(|last| start < last + rtt);
        link.1 = Some(start);
        let mut arrival = done + one_way;
        let mut sent = bytes as u64;
        let mut retransmits = 0;
        let packets = bytes.div_ceil(MSS).max(1);
        for k in 0..packets {
            let packet = if k + 1 < packets { MSS } else { bytes - MSS * (packets - 1) };
            let mut wait = if flowing { rtt + rtt / 4 } else { 2 * rtt };
            let mut rto = rtt + RTO_MIN_NS;
            let mut resent_at = done;
            while self.loss_p > 0.0 && self.loss.unit() < self.loss_p && retransmits < 16 {
                retransmits += 1;
                resent_at += wait;
                wait = rto;
                rto *= 2;
                // The copy goes out again then: its serialization (about
                // 0.1 ms) is not reserved on the uplink, whose later sends
                // would otherwise wait for a retransmission still to come.
                sent += packet as u64;
                arrival = arrival.max(resent_at + self.serialize_ns(packet) + one_way);
            }
        }
        if let Some((resent_at, tries)) = self.across_cut(from, to, done, rtt + RTO_MIN_NS) {
            // Every packet of it is lost until the heal, and sent again at
            // each timeout.
            retransmits += tries * packets as u32;
            sent += tries as u64 * bytes as u64;
            arrival = arrival.max(resent_at + self.serialize_ns(bytes) + one_way);
        }
        let link = self.links_state.entry((from, to)).or_insert((0, None));
        arrival = arrival.max(link.0);
        link.0 = arrival;
        Transfer { bytes: sent, arrival, retransmits }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mesh_is_connected_symmetric_and_bounded() {
        let live: Vec<u32> = (0..200).collect();
        let m = mesh(&live, 8, 7);
        for (a, peers) in &m {
            assert!((8..=13).contains(&peers.len()), "{a}: {}", peers.len());
            for b in peers {
                assert!(m[b].contains(a));
            }
        }
        let mean = m.values().map(Vec::len).sum::<usize>() as f64 / 200.0;
        assert!((7.5..=12.0).contains(&mean), "{mean}");
        let small = mesh(&[1, 2, 3], 8, 1);
        assert_eq!(small[&1], vec![2, 3]);
    }

    #[test]
    fn latencies_stay_in_their_range_and_are_symmetric() {
        let l = Links::new(&Latency::default(), 3, 50);
        for a in 0..50 {
            for b in 0..50 {
                let ns = l.latency_ns(a, b);
                assert!((40_000_000..=60_000_000).contains(&ns));
                assert_eq!(ns, l.latency_ns(b, a));
            }
        }
    }

    #[test]
    fn uplink_serializes_and_links_deliver_in_order() {
        let cfg = NetConfig { loss: 0.0, ..NetConfig::default() };
        let mut w = Wire::new(&cfg, 1, 4);
        let a = w.send(0, 1, 12_500, 0); // 1 ms at 100 Mbit/s
        let b = w.send(0, 2, 12_500, 0);
        assert_eq!(a.arrival, 1_000_000 + w.latency_ns(0, 1));
        assert_eq!(b.arrival, 2_000_000 + w.latency_ns(0, 2));
        assert_eq!(a.bytes, 12_500);
    }

    #[test]
    fn a_lost_packet_holds_back_its_link_not_the_uplink() {
        let cfg = NetConfig { loss: 0.0, ..NetConfig::default() };
        let mut w = Wire::new(&cfg, 2, 4);
        w.loss_p = 0.999_999;
        let lost = w.send(0, 1, 500, 0);
        assert!(lost.retransmits >= 1 && lost.bytes > 500);
        let rtt = 2 * w.latency_ns(0, 1);
        // Nothing sent on the link before: the tail loss probe, two round trips.
        assert!(lost.arrival >= 2 * rtt + w.latency_ns(0, 1));
        w.loss_p = 0.0;
        let other = w.send(0, 2, 500, 0);
        assert_eq!(other.arrival, 2 * w.serialize_ns(500) + w.latency_ns(0, 2));
        let behind = w.send(0, 1, 500, 0);
        assert_eq!(behind.arrival, lost.arrival, "in order behind the lost one");
    }

    #[test]
    fn a_copy_across_the_partition_arrives_after_the_heal_and_others_do_not_wait() {
        let cfg = NetConfig {
            loss: 0.0,
            partition: Some(crate::config::Partition {
                members: 2,
                from: std::time::Duration::from_millis(100),
                until: std::time::Duration::from_millis(3_000),
            }),
            ..NetConfig::default()
        };
        let mut w = Wire::new(&cfg, 5, 4);
        let side = w.cut.as_ref().unwrap().0.clone();
        assert_eq!(side.iter().filter(|s| **s).count(), 2);
        let a = side.iter().position(|s| *s).unwrap() as u32;
        let same = side.iter().rposition(|s| *s).unwrap() as u32;
        let other = side.iter().position(|s| !*s).unwrap() as u32;
        let before = w.send(a, other, 500, 0);
        assert!(before.arrival < 100_000_000, "sent before the cut");
        let during = w.send(a, other, 500, 200_000_000);
        assert!(during.arrival > 3_000_000_000, "after the heal: {}", during.arrival);
        assert!(during.retransmits >= 3 && during.bytes >= 4 * 500);
        let inside = w.send(a, same, 500, 200_000_000);
        assert!(inside.arrival < 400_000_000, "same side: {}", inside.arrival);
        let after = w.send(other, a, 500, 3_000_000_000);
        assert_eq!(after.retransmits, 0);
    }
}
