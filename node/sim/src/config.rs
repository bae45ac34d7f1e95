//! What a run simulates: the committee, the faults, the network, the chain
//! and the CPU cost model.

use crate::error::{Error, Result};
use resolvd_engine::{Dissemination, EngineConfig};
use serde::Serialize;
use std::{fmt, str::FromStr, time::Duration};

/// One run's parameters.
#[derive(Clone, Debug)]
pub struct Config {
    /// Committee members (one engine each, equal stake).
    pub nodes: usize,
    /// Every random draw of the run derives from it.
    pub seed: u64,
    /// Faulty members.
    pub faults: Faults,
    /// Links, bandwidth and gossip.
    pub net: NetConfig,
    /// The chain as the nodes see it.
    pub chain: ChainConfig,
    /// Modelled CPU cost of each piece of work.
    pub costs: Costs,
    /// How the engines send their own partials (the engine's setting).
    pub dissemination: Dissemination,
    /// How often each node's engine is ticked (the node ticks at its next timer, and every 250 ms).
    pub tick: Duration,
    /// The engine's `widen_wait`: how long a submitter waits for more signers
    /// after its certificate.
    pub widen_wait: Duration,
    /// Virtual time after which a run stops even if not every honest node
    /// saw the dispute settled.
    pub max_time: Duration,
    /// Commit-reveal's window (the registry's `commitRevealMs`); `None`:
    /// off, the registry's default.
    pub commit_reveal: Option<Duration>,
    /// Record every message copy sent ([`crate::Simulation::sends`]).
    pub trace: bool,
    /// CPUs every node shares (`None`: each node has its own). With `Some(k)`
    /// a node's job also waits for one of the `k` to be free, as the
    /// processes of `make bench-scale` share the machine's cores.
    pub cores: Option<usize>,
    /// Every modelled cost × this (1: the criterion figures; the real
    /// node's CPU per dispute over the modelled one, for its runtime and
    /// transport).
    pub cpu_scale: f64,
    /// CPU added to every message copy sent and every copy received (the
    /// real transport's: framing, encryption, the runtime's wake-ups).
    pub transport: Duration,
}

impl Config {
    /// The defaults for `nodes` members and `seed`.
    pub fn new(nodes: usize, seed: u64) -> Self {
        Self {
            nodes,
            seed,
            faults: Faults::default(),
            net: NetConfig::default(),
            chain: ChainConfig::default(),
            costs: Costs::default(),
            dissemination: Dissemination::Flood,
            tick: Duration::from_millis(50),
            widen_wait: EngineConfig::default().widen_wait,
            max_time: Duration::from_secs(40),
            commit_reveal: None,
            trace: false,
            cores: None,
            cpu_scale: 1.0,
            transport: Duration::ZERO,
        }
    }
}

/// Faulty members, as counts (chosen from the seed, disjoint).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Faults {
    /// Never start: no engine, no messages.
    pub crash: usize,
    /// Replay and sign, never publish their own partial (they relay others'
    /// gossip and send no transaction).
    pub withhold: usize,
    /// Publish, instead of their partial, one with an invalid signature
    /// (a valid point in G2 over another digest; they relay others' gossip
    /// and send no transaction).
    pub garbage: usize,
    /// Sign both outcomes and send both partials wherever their own goes
    /// (they send no transaction).
    pub equivocate: usize,
    /// Forge a commit-reveal commitment in every other member's name (signed
    /// with their own key: well-formed, only the signature check catches it)
    /// when they see the dispute, and withhold their own partial (and any
    /// certificate or aggregate they build).
    pub forge: usize,
    /// Honest but with every CPU cost multiplied by `slow_factor`.
    pub slow: usize,
    /// CPU multiplier of the slow members.
    pub slow_factor: u32,
    /// Where the faulty members are in the dispute's submitter order.
    pub placement: Placement,
}

/// Where the faulty members are placed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// A seeded draw.
    #[default]
    Drawn,
    /// First in the deal id's own order (`submit_order` keyed by the deal
    /// id alone): what a buyer who grinds the deal id can reach. The engines
    /// order by the dispute's entropy as well, so this lands where chance
    /// puts it.
    GroundDeal,
    /// First in the order the engines use (the dispute's first submitters,
    /// aggregators and collectors): only whoever chooses the dispute's order
    /// entropy could place them there (where it is the next block's
    /// `prevrandao`, nobody: colluding proposers get one draw per slot).
    Head,
}

impl Faults {
    /// Parses `crash=5,withhold=1/3,garbage=0.1,slow=4x3` for a committee of
    /// `nodes`: a count, a fraction (`0.33`, `1/3`: rounded down), and for
    /// `slow` an optional `xK` CPU factor (default 4); `adversarial` places
    /// them first in the dispute's submitter order ([`Placement::Head`]),
    /// `ground-deal` first in the deal id's ([`Placement::GroundDeal`]).
    pub fn parse(spec: &str, nodes: usize) -> Result<Self> {
        let mut f = Self { slow_factor: 4, ..Self::default() };
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty() && *p != "none") {
            let placement = match part {
                "adversarial" => Some(Placement::Head),
                "ground-deal" => Some(Placement::GroundDeal),
                _ => None,
            };
            if let Some(placement) = placement {
                f.placement = placement;
                continue;
            }
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| Error::Faults(format!("`{part}`: expected name=value")))?;
            let (amount, factor) = match value.split_once('x') {
                Some((a, k)) if name == "slow" => (a, Some(k)),
                _ => (value, None),
            };
            let count = count_of(amount, nodes)
                .ok_or_else(|| Error::Faults(format!("`{part}`: not a count or fraction")))?;
            match name {
                "crash" => f.crash = count,
                "withhold" => f.withhold = count,
                "garbage" => f.garbage = count,
                "equivocate" => f.equivocate = count,
                "forge" => f.forge = count,
                "slow" => {
                    f.slow = count;
                    if let Some(k) = factor {
                        f.slow_factor = k.parse().ok().filter(|k| *k >= 1).ok_or_else(|| {
                            Error::Faults(format!("`{part}`: the factor must be an integer >= 1"))
                        })?;
                    }
                }
                other => {
                    return Err(Error::Faults(format!(
                        "unknown fault `{other}` (crash, withhold, garbage, equivocate, forge, slow, adversarial, ground-deal)"
                    )))
                }
            }
        }
        if f.byzantine() + f.slow > nodes {
            return Err(Error::Faults(format!("more faulty members than the {nodes} nodes")));
        }
        Ok(f)
    }

    /// Members that are crashed or byzantine (every fault but `slow`).
    pub fn byzantine(&self) -> usize {
        self.crash + self.withhold + self.garbage + self.equivocate + self.forge
    }

    /// Members that are neither crashed nor byzantine.
    pub fn honest(&self, nodes: usize) -> usize {
        nodes.saturating_sub(self.byzantine())
    }
}

impl Placement {
    /// Its name in a fault spec (none for a draw).
    pub fn name(self) -> Option<&'static str> {
        match self {
            Self::Drawn => None,
            Self::GroundDeal => Some("ground-deal"),
            Self::Head => Some("adversarial"),
        }
    }
}

fn count_of(amount: &str, nodes: usize) -> Option<usize> {
    if let Some((a, b)) = amount.split_once('/') {
        let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
        return (b > 0 && a <= b).then(|| nodes * a / b);
    }
    if amount.contains('.') {
        let x: f64 = amount.parse().ok()?;
        return (0.0..=1.0).contains(&x).then(|| (x * nodes as f64).floor() as usize);
    }
    amount.parse().ok()
}

impl fmt::Display for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        for (name, n) in [
            ("crash", self.crash),
            ("withhold", self.withhold),
            ("garbage", self.garbage),
            ("equivocate", self.equivocate),
            ("forge", self.forge),
        ] {
            if n > 0 {
                parts.push(format!("{name}={n}"));
            }
        }
        if self.slow > 0 {
            parts.push(format!("slow={}x{}", self.slow, self.slow_factor));
        }
        if let Some(name) = self.placement.name().filter(|_| !parts.is_empty()) {
            parts.push(name.to_owned());
        }
        if parts.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&parts.join(","))
        }
    }
}

/// One-way link latency.
#[derive(Clone, Debug, PartialEq)]
pub enum Latency {
    /// Uniform in `mean ± spread`, drawn once per link.
    Uniform {
        /// Mean.
        mean: Duration,
        /// Half-width.
        spread: Duration,
    },
    /// Members spread round-robin over [`crate::net::REGIONS`] (in seed
    /// order); a link's latency is its regions' one-way figure ± 10 %.
    Geo,
}

impl Default for Latency {
    fn default() -> Self {
        Self::Uniform { mean: Duration::from_millis(50), spread: Duration::from_millis(10) }
    }
}

impl FromStr for Latency {
    type Err = Error;

    /// `50:10` (ms, mean and spread), `50` (no spread) or `geo`.
    fn from_str(s: &str) -> Result<Self> {
        if s == "geo" {
            return Ok(Self::Geo);
        }
        let bad = || Error::Latency(format!("`{s}`: expected MEAN_MS[:SPREAD_MS] or geo"));
        let (mean, spread) = s.split_once(':').unwrap_or((s, "0"));
        let (mean, spread): (u64, u64) =
            (mean.parse().map_err(|_| bad())?, spread.parse().map_err(|_| bad())?);
        if spread > mean {
            return Err(bad());
        }
        Ok(Self::Uniform {
            mean: Duration::from_millis(mean),
            spread: Duration::from_millis(spread),
        })
    }
}

impl fmt::Display for Latency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Uniform { mean, spread } => {
                write!(f, "{} ± {} ms", mean.as_millis(), spread.as_millis())
            }
            Self::Geo => f.write_str("geo"),
        }
    }
}

/// To whom a node sends the messages it publishes itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PublishTo {
    /// Its mesh peers.
    Mesh,
    /// Every live member (gossipsub's `flood_publish`, the node's
    /// `p2p.flood_publish`, when every member is connected to every other).
    All,
}

impl FromStr for PublishTo {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "mesh" => Ok(Self::Mesh),
            "all" => Ok(Self::All),
            _ => Err(Error::Latency(format!("`{s}`: publish to `mesh` or `all`"))),
        }
    }
}

/// The network model.
#[derive(Clone, Debug)]
pub struct NetConfig {
    /// One-way latency of each link.
    pub latency: Latency,
    /// Probability that a packet is lost (each loss costs a TCP
    /// retransmission timeout; nothing is dropped for good).
    pub loss: f64,
    /// Each node's upload bandwidth, bits per second.
    pub uplink_bps: u64,
    /// Bytes added to every message's wire encoding (framing and headers:
    /// [`MESSAGE_OVERHEAD`]).
    pub overhead: usize,
    /// Gossip mesh degree D.
    pub mesh: usize,
    /// Where own messages go.
    pub publish: PublishTo,
    /// A partition between two sides of the members, then its heal.
    pub partition: Option<Partition>,
}

/// `members` of the committee (a seeded draw) cut off from the others from
/// `from` until `until` (virtual time from the challenge being mined): a
/// copy sent across the cut meanwhile is lost, and TCP sends it again at its
/// retransmission timeouts (round trip + 200 ms, doubling) until one falls
/// after the heal. The connections survive; the chain stays reachable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    /// Members on the cut-off side.
    pub members: usize,
    /// When the cut begins.
    pub from: Duration,
    /// When it heals.
    pub until: Duration,
}

impl Partition {
    /// Parses `COUNT_OR_FRACTION@FROM_MS-UNTIL_MS` (`1/2@0-3000`) for a
    /// committee of `nodes`.
    pub fn parse(spec: &str, nodes: usize) -> Result<Self> {
        let bad = || {
            Error::Invalid(format!(
                "partition `{spec}`: expected COUNT_OR_FRACTION@FROM_MS-UNTIL_MS"
            ))
        };
        let (amount, window) = spec.split_once('@').ok_or_else(bad)?;
        let (from, until) = window.split_once('-').ok_or_else(bad)?;
        let members = count_of(amount, nodes).filter(|m| *m <= nodes).ok_or_else(bad)?;
        let (from, until): (u64, u64) =
            (from.parse().map_err(|_| bad())?, until.parse().map_err(|_| bad())?);
        if until < from {
            return Err(bad());
        }
        Ok(Self { members, from: Duration::from_millis(from), until: Duration::from_millis(until) })
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} members apart {}–{} ms",
            self.members,
            self.from.as_millis(),
            self.until.as_millis()
        )
    }
}

impl Default for NetConfig {
    fn default() -> Self {
        Self {
            latency: Latency::default(),
            loss: 0.01,
            uplink_bps: 100_000_000,
            overhead: MESSAGE_OVERHEAD,
            mesh: 8,
            publish: PublishTo::Mesh,
            partition: None,
        }
    }
}

/// Bytes each gossip message costs beyond its protobuf encoding: the
/// gossipsub RPC framing with the topic name (about 30: the longest topic is
/// 23 bytes, plus tags and lengths), a yamux frame header (12), the noise
/// frame's length and tag (18) and TCP/IPv4 headers with timestamps (52),
/// rounded to 110. Gossipsub runs unsigned with content ids, so no author,
/// sequence number or signature is sent.
pub const MESSAGE_OVERHEAD: usize = 110;

/// The chain as the nodes see it.
#[derive(Clone, Debug)]
pub struct ChainConfig {
    /// Block time.
    pub block: Duration,
    /// Blocks a log waits before a node acts on it.
    pub confirmations: u32,
    /// Each node's log polling interval: a node's watcher sees a confirmed
    /// log after a uniform draw in [0, poll).
    pub poll: Duration,
    /// Round trip of one call to the node's RPC endpoint.
    pub rpc: Duration,
}

impl Default for ChainConfig {
    fn default() -> Self {
        Self {
            block: Duration::from_secs(1),
            confirmations: 1,
            poll: Duration::from_secs(1),
            rpc: Duration::from_millis(20),
        }
    }
}

/// Modelled CPU time of each piece of work a node does (see the crate's
/// README for where each figure comes from).
#[derive(Clone, Debug, Serialize)]
pub struct Costs {
    /// One replay (criterion `replay: ERC-20 transfer, full`).
    pub replay: Duration,
    /// One BLS signature (criterion `BLS sign`).
    pub sign: Duration,
    /// One signature decompression and subgroup check (criterion).
    pub decode: Duration,
    /// One pairing check (criterion `BLS verify`).
    pub pairing: Duration,
    /// A same-digest batch: fixed part (fit of the `same_digest_batch` series).
    pub batch_base: Duration,
    /// A same-digest batch: per partial (same fit).
    pub batch_per_partial: Duration,
    /// One sub-batch check of a bisection (criterion `one_invalid_of_64`:
    /// 14 ms more than the valid batch for 12 more checks).
    pub bisect_check: Duration,
    /// Per signer, aggregating signatures and keys into a certificate and
    /// its check (the rest of criterion `certificate builder, 64 wire
    /// partials` once decoding, the batch and one pairing are taken out).
    pub aggregate_per_signer: Duration,
    /// Handling one first-seen gossip message: decoding, hashing the
    /// EIP-712 digest, the engine's bookkeeping (an estimate; no criterion
    /// figure).
    pub receive: Duration,
    /// A duplicate copy dropped by the seen cache (estimate).
    pub duplicate: Duration,
    /// Encrypting and queuing one copy of a message to one peer (estimate).
    pub send: Duration,
}

impl Default for Costs {
    fn default() -> Self {
        Self {
            replay: Duration::from_nanos(44_800),
            sign: Duration::from_nanos(411_400),
            decode: Duration::from_nanos(92_600),
            pairing: Duration::from_nanos(1_000_000),
            batch_base: Duration::from_nanos(1_060_000),
            batch_per_partial: Duration::from_nanos(2_200),
            bisect_check: Duration::from_nanos(1_170_000),
            aggregate_per_signer: Duration::from_nanos(9_100),
            receive: Duration::from_micros(10),
            duplicate: Duration::from_micros(2),
            send: Duration::from_micros(2),
        }
    }
}

impl Costs {
    /// Verifying `n` partials of one digest, `invalid` of them bad.
    pub fn batch(&self, n: usize, invalid: usize) -> Duration {
        if n == 0 {
            return Duration::ZERO;
        }
        if n == 1 {
            return self.pairing;
        }
        let mut t = self.batch_base + self.batch_per_partial * n as u32;
        if invalid > 0 {
            // Bisection: each bad partial costs two checks per level down
            // to it, at most one check per node of the bisection tree.
            let levels = usize::BITS - (n - 1).leading_zeros();
            let checks = (2 * invalid * levels as usize).min(2 * n - 2);
            t += self.bisect_check * checks as u32;
        }
        t
    }

    /// Aggregating `signers` partials into a certificate and checking it.
    pub fn build_certificate(&self, signers: usize) -> Duration {
        self.pairing + self.aggregate_per_signer * signers as u32
    }

    /// Checking a certificate of `signers` received from a peer.
    pub fn check_certificate(&self, signers: usize) -> Duration {
        self.decode + self.pairing + self.aggregate_per_signer * signers as u32
    }

    /// Every cost multiplied by `factor` (a process whose work around the
    /// modelled pieces, runtime and transport, costs `factor` × as much).
    pub fn scaled(&self, factor: f64) -> Self {
        let f = |d: Duration| d.mul_f64(factor);
        Self {
            replay: f(self.replay),
            sign: f(self.sign),
            decode: f(self.decode),
            pairing: f(self.pairing),
            batch_base: f(self.batch_base),
            batch_per_partial: f(self.batch_per_partial),
            bisect_check: f(self.bisect_check),
            aggregate_per_signer: f(self.aggregate_per_signer),
            receive: f(self.receive),
            duplicate: f(self.duplicate),
            send: f(self.send),
        }
    }

    /// `per_copy` more for every copy sent and every copy received.
    pub fn with_transport(&self, per_copy: Duration) -> Self {
        Self {
            send: self.send + per_copy,
            receive: self.receive + per_copy,
            duplicate: self.duplicate + per_copy,
            ..self.clone()
        }
    }

    /// The floor of one node's dispute: its own replay, its own signature
    /// and one certificate check.
    pub fn floor(&self, signers: usize) -> Duration {
        self.replay + self.sign + self.check_certificate(signers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse_counts_fractions_and_factors() {
        let f = Faults::parse("crash=2,withhold=1/3,garbage=0.1,slow=3x8", 64).unwrap();
        assert_eq!((f.crash, f.withhold, f.garbage, f.slow, f.slow_factor), (2, 21, 6, 3, 8));
        assert_eq!(f.to_string(), "crash=2,withhold=21,garbage=6,slow=3x8");
        assert_eq!(Faults::parse("none", 4).unwrap().to_string(), "none");
        assert!(Faults::parse("crash=5", 4).is_err());
        assert!(Faults::parse("nap=1", 4).is_err());
        let f = Faults::parse("withhold=1/3,adversarial", 64).unwrap();
        assert_eq!(f.placement, Placement::Head);
        assert_eq!(f.to_string(), "withhold=21,adversarial");
        let f = Faults::parse("withhold=1/3,ground-deal", 64).unwrap();
        assert_eq!(f.placement, Placement::GroundDeal);
        assert_eq!(f.to_string(), "withhold=21,ground-deal");
        assert_eq!("geo".parse::<Latency>().unwrap(), Latency::Geo);
        assert!("10:20".parse::<Latency>().is_err());
        let f = Faults::parse("equivocate=1/8,forge=2", 64).unwrap();
        assert_eq!((f.equivocate, f.forge, f.honest(64)), (8, 2, 54));
        assert_eq!(f.to_string(), "equivocate=8,forge=2");
        assert!(Faults::parse("equivocate=3,forge=2", 4).is_err());
        let p = Partition::parse("1/2@100-3000", 64).unwrap();
        assert_eq!((p.members, p.from.as_millis(), p.until.as_millis()), (32, 100, 3000));
        assert_eq!(p.to_string(), "32 members apart 100–3000 ms");
        for bad in ["1/2", "1/2@3000-100", "65@0-1", "x@0-1", "1/2@0"] {
            assert!(Partition::parse(bad, 64).is_err(), "{bad}");
        }
    }

    #[test]
    fn batch_costs_follow_the_criterion_figures() {
        let c = Costs::default();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        assert!((ms(c.batch(64, 0)) - 1.15).abs() < 0.15);
        assert!((ms(c.batch(256, 0)) - 1.62).abs() < 0.15);
        assert!((ms(c.batch(64, 1)) - 15.17).abs() < 1.0);
    }
}
