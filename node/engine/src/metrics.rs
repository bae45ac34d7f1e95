//! The engine's metrics: plain prometheus-client values the engine counts
//! into. The node registers them in its registry ([`EngineMetrics::register`],
//! under the registry's `resolvd` prefix); the engine never renders or
//! serves them.

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

/// A `result` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// What happened.
    pub result: &'static str,
}

/// Every metric the engine counts. Cloning shares the values.
#[derive(Clone, Debug)]
pub struct EngineMetrics {
    /// Replays finished, by result (reproduced / failed / operational).
    pub replays: Family<ResultLabel, Counter>,
    /// Anchor checks, by result (final / not_final / not_canonical / rpc_error).
    pub anchors: Family<ResultLabel, Counter>,
    /// Partial signatures made by this node.
    pub signatures: Counter,
    /// Signatures refused by slashing protection.
    pub protection_refusals: Counter,
    /// Certificates formed or received and verified.
    pub certificates: Counter,
    /// `resolve` submissions, by result (sent / already_resolved / rejected / error).
    pub submissions: Family<ResultLabel, Counter>,
    /// `slashEquivocation` submissions, by result.
    pub slashings: Family<ResultLabel, Counter>,
    /// Equivocations detected.
    pub equivocations: Counter,
    /// Partials dropped because the buffer for unknown epochs was full.
    pub dropped_partials: Counter,
    /// Gossip ignored unverified by a bound, by which (early_quota: a peer's
    /// share of the early buffers; pending_quota: a peer's messages waiting
    /// for verification; commits_full; evidence_busy: evidence naming an
    /// unloaded epoch while another waits for its committee; confirm_quota:
    /// a peer's announcements being checked; misled_by: announcements of a
    /// peer that recently announced a deal that does not exist, or had
    /// several announcements of real deals refuted).
    pub gossip_bounded: Family<ResultLabel, Counter>,
    /// Commit-reveal events, by result (valid_commit / invalid_commit /
    /// late_commit / uncounted_reveal / fallback / late_fallback).
    pub commit_reveal: Family<ResultLabel, Counter>,
    /// Partials waiting for batch verification.
    pub pending_partials: Gauge,
    /// Partial signatures checked by pairing, by result (valid / invalid).
    pub partials_verified: Family<ResultLabel, Counter>,
    /// Gossiped announcements not checked because too many checks were in flight.
    pub dropped_announcements: Counter,
    /// Seconds from the node learning of a dispute to holding its certificate.
    pub dispute_to_certificate: Histogram,
    /// Seconds from the node learning of a dispute to seeing it settled.
    pub dispute_to_settlement: Histogram,
}

/// Buckets of the dispute latency histograms, seconds.
pub const LATENCY_BUCKETS: [f64; 10] = [0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

impl Default for EngineMetrics {
    fn default() -> Self {
        Self {
            replays: Family::default(),
            anchors: Family::default(),
            signatures: Counter::default(),
            protection_refusals: Counter::default(),
            certificates: Counter::default(),
            submissions: Family::default(),
            slashings: Family::default(),
            equivocations: Counter::default(),
            dropped_partials: Counter::default(),
            gossip_bounded: Family::default(),
            commit_reveal: Family::default(),
            pending_partials: Gauge::default(),
            partials_verified: Family::default(),
            dropped_announcements: Counter::default(),
            dispute_to_certificate: Histogram::new(LATENCY_BUCKETS),
            dispute_to_settlement: Histogram::new(LATENCY_BUCKETS),
        }
    }
}

impl EngineMetrics {
    /// Registers every metric in `registry` (names as the node's dashboards
    /// and alerts query them, before the registry's prefix).
    pub fn register(&self, registry: &mut Registry) {
        registry.register("replays", "Replays finished", self.replays.clone());
        registry.register(
            "anchor_checks",
            "Anchor blocks checked against the RPC, by result",
            self.anchors.clone(),
        );
        registry.register("signatures", "Partial signatures made", self.signatures.clone());
        registry.register(
            "protection_refusals",
            "Signatures refused by slashing protection",
            self.protection_refusals.clone(),
        );
        registry.register("certificates", "Certificates held", self.certificates.clone());
        registry.register("submissions", "resolve submissions", self.submissions.clone());
        registry.register("slashings", "slashEquivocation submissions", self.slashings.clone());
        registry.register("equivocations", "Equivocations detected", self.equivocations.clone());
        registry.register(
            "dropped_partials",
            "Partials dropped for a full buffer",
            self.dropped_partials.clone(),
        );
        registry.register(
            "gossip_bounded",
            "Gossip ignored unverified by a per-peer quota or cap, by which",
            self.gossip_bounded.clone(),
        );
        registry.register(
            "partials_verified",
            "Partial signatures checked by pairing, by result",
            self.partials_verified.clone(),
        );
        registry.register(
            "commit_reveal",
            "Commit-reveal: late commitments, uncounted reveals, fallbacks",
            self.commit_reveal.clone(),
        );
        registry.register(
            "pending_partials",
            "Partials awaiting verification",
            self.pending_partials.clone(),
        );
        registry.register(
            "dropped_announcements",
            "Announcements not checked: too many checks in flight",
            self.dropped_announcements.clone(),
        );
        registry.register(
            "dispute_to_certificate_seconds",
            "Dispute seen to certificate held",
            self.dispute_to_certificate.clone(),
        );
        registry.register(
            "dispute_to_settlement_seconds",
            "Dispute seen to settlement seen",
            self.dispute_to_settlement.clone(),
        );
    }
}

/// Increments `family{result}`.
pub fn count(family: &Family<ResultLabel, Counter>, result: &'static str) {
    family.get_or_create(&ResultLabel { result }).inc();
}
