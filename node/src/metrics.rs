//! Prometheus metrics (`GET /metrics`, OpenMetrics text).

use prometheus_client::{
    encoding::{text::encode, EncodeLabelSet},
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};
use resolvd_engine::EngineMetrics;
use std::sync::atomic::AtomicU64;

pub use resolvd_engine::metrics::ResultLabel;

/// A `topic` + `result` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GossipLabel {
    /// The gossip topic.
    pub topic: &'static str,
    /// accept / ignore / reject.
    pub result: &'static str,
}

/// A `token` label: an ERC-20 address.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenLabel {
    /// The token, `0x…`.
    pub token: String,
}

/// An `endpoint` label: an RPC endpoint as `scheme://host[:port]`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabel {
    /// `scheme://host[:port]` of the endpoint.
    pub endpoint: String,
}

/// Every metric of a node.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// The engine's metrics (registered here, counted by the engine).
    pub engine: EngineMetrics,
    /// Gossip messages validated, by topic and result.
    pub gossip: Family<GossipLabel, Counter>,
    /// Replays queued or running.
    pub replay_queue: Gauge,
    /// Content fetched from peers, by result (ok / duplicate / not_found / wrong_hash / failed).
    pub content_fetches: Family<ResultLabel, Counter>,
    /// Fee rewards earned as a signer (claimed + pending), token base units.
    pub rewards_earned: Family<TokenLabel, Gauge<f64, AtomicU64>>,
    /// Fee rewards claimed, token base units.
    pub rewards_claimed: Family<TokenLabel, Gauge<f64, AtomicU64>>,
    /// Gas refunds credited for sending `resolve`, token base units.
    pub gas_refunds: Family<TokenLabel, Gauge<f64, AtomicU64>>,
    /// Wei the account paid for its transactions (this data dir's lifetime).
    pub gas_spent_wei: Gauge<f64, AtomicU64>,
    /// Connected peers.
    pub peers: Gauge,
    /// Disputes not yet settled or expired.
    pub disputes_in_flight: Gauge,
    /// Store writes that failed (the node keeps running; see node/README.md).
    pub store_errors: Counter,
    /// Reorgs of blocks the watcher had handled.
    pub reorgs: Counter,
    /// Depth (blocks re-scanned) of the last such reorg.
    pub reorg_depth: Gauge,
    /// 1 once a partial of this node's key made elsewhere was seen.
    pub doppelganger: Gauge,
    /// Latest block number seen.
    pub chain_head: Gauge,
    /// Head minus the last block handled (the confirmations plus any lag).
    pub chain_head_lag: Gauge,
    /// The transaction account's balance, wei (f64: wei overflow i64).
    pub account_balance: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// What the largest transaction may cost at the fee cap:
    /// `chain.max_fee_per_gas` × 1M gas, wei.
    pub account_gas_cap: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// Content requests from peers, by result (ok / not_found / busy).
    pub content_served: Family<ResultLabel, Counter>,
    /// Disputes held in memory (open and recently finished).
    pub disputes_in_memory: Gauge,
    /// 1 while an RPC endpoint is up (chain id checked, last request answered).
    pub rpc_endpoint_up: Family<EndpointLabel, Gauge>,
    /// The highest block number an RPC endpoint reported.
    pub rpc_endpoint_head: Family<EndpointLabel, Gauge>,
    /// Failed requests to an RPC endpoint since its last success.
    pub rpc_endpoint_consecutive_errors: Family<EndpointLabel, Gauge>,
    /// Failed requests to an RPC endpoint (transport errors, timeouts).
    pub rpc_endpoint_errors: Family<EndpointLabel, Counter>,
    /// Requests sent to an RPC endpoint.
    pub rpc_endpoint_requests: Family<EndpointLabel, Counter>,
    /// Duration of an RPC endpoint's last successful request.
    pub rpc_endpoint_latency: Family<EndpointLabel, Gauge<f64, AtomicU64>>,
    /// Anchor cross-checks that did not follow an RPC endpoint's answer.
    pub rpc_endpoint_disagreements: Family<EndpointLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("resolvd");
        let m = Self {
            registry: Registry::default(),
            engine: EngineMetrics::default(),
            gossip: Family::default(),
            replay_queue: Gauge::default(),
            content_fetches: Family::default(),
            rewards_earned: Family::default(),
            rewards_claimed: Family::default(),
            gas_refunds: Family::default(),
            gas_spent_wei: Gauge::default(),
            peers: Gauge::default(),
            disputes_in_flight: Gauge::default(),
            store_errors: Counter::default(),
            reorgs: Counter::default(),
            reorg_depth: Gauge::default(),
            doppelganger: Gauge::default(),
            chain_head: Gauge::default(),
            chain_head_lag: Gauge::default(),
            account_balance: Gauge::default(),
            account_gas_cap: Gauge::default(),
            content_served: Family::default(),
            disputes_in_memory: Gauge::default(),
            rpc_endpoint_up: Family::default(),
            rpc_endpoint_head: Family::default(),
            rpc_endpoint_consecutive_errors: Family::default(),
            rpc_endpoint_errors: Family::default(),
            rpc_endpoint_requests: Family::default(),
            rpc_endpoint_latency: Family::default(),
            rpc_endpoint_disagreements: Family::default(),
        };
        registry.register("gossip_messages", "Gossip messages validated", m.gossip.clone());
        registry.register("replay_queue", "Replays queued or running", m.replay_queue.clone());
        registry.register(
            "content_fetches",
            "Content fetched from peers",
            m.content_fetches.clone(),
        );
        registry.register(
            "rewards_earned",
            "Fee rewards earned as a signer (claimed + pending), token base units",
            m.rewards_earned.clone(),
        );
        registry.register(
            "rewards_claimed",
            "Fee rewards claimed, token base units",
            m.rewards_claimed.clone(),
        );
        registry.register(
            "gas_refunds",
            "Gas refunds credited for sending resolve, token base units",
            m.gas_refunds.clone(),
        );
        registry.register(
            "gas_spent_wei",
            "Wei the account paid for its transactions",
            m.gas_spent_wei.clone(),
        );
        registry.register("peers", "Connected peers", m.peers.clone());
        registry.register("disputes_in_flight", "Disputes in flight", m.disputes_in_flight.clone());
        registry.register("store_errors", "Failed store writes", m.store_errors.clone());
        registry.register("reorgs", "Reorgs of handled blocks", m.reorgs.clone());
        registry.register("chain_head", "Latest block number seen", m.chain_head.clone());
        registry.register(
            "doppelganger_detected",
            "1 once this node's key was seen signing elsewhere",
            m.doppelganger.clone(),
        );
        registry.register(
            "chain_head_lag_blocks",
            "Head minus the last block handled",
            m.chain_head_lag.clone(),
        );
        registry.register(
            "account_balance_wei",
            "Balance of the transaction account",
            m.account_balance.clone(),
        );
        registry.register(
            "account_gas_cap_wei",
            "Cost of a 1M-gas transaction at chain.max_fee_per_gas",
            m.account_gas_cap.clone(),
        );
        registry.register(
            "reorg_depth",
            "Blocks re-scanned after the last reorg",
            m.reorg_depth.clone(),
        );
        registry.register(
            "content_served",
            "Content requests from peers",
            m.content_served.clone(),
        );
        registry.register(
            "disputes_in_memory",
            "Disputes held in memory",
            m.disputes_in_memory.clone(),
        );
        registry.register(
            "rpc_endpoint_up",
            "RPC endpoint up (chain id checked, last request answered)",
            m.rpc_endpoint_up.clone(),
        );
        registry.register(
            "rpc_endpoint_head",
            "Highest block number an RPC endpoint reported",
            m.rpc_endpoint_head.clone(),
        );
        registry.register(
            "rpc_endpoint_consecutive_errors",
            "Failed requests to an RPC endpoint since its last success",
            m.rpc_endpoint_consecutive_errors.clone(),
        );
        registry.register(
            "rpc_endpoint_errors",
            "Failed requests to an RPC endpoint",
            m.rpc_endpoint_errors.clone(),
        );
        registry.register(
            "rpc_endpoint_requests",
            "Requests sent to an RPC endpoint",
            m.rpc_endpoint_requests.clone(),
        );
        registry.register(
            "rpc_endpoint_latency_seconds",
            "Duration of an RPC endpoint's last successful request",
            m.rpc_endpoint_latency.clone(),
        );
        registry.register(
            "rpc_endpoint_disagreements",
            "Anchor cross-checks that did not follow an RPC endpoint's answer (it called an anchor final, or another block canonical, alone)",
            m.rpc_endpoint_disagreements.clone(),
        );
        m.engine.register(&mut registry);
        Self { registry, ..m }
    }
}

impl Metrics {
    /// OpenMetrics text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }

    /// Increments `family{result}`.
    pub fn count(family: &Family<ResultLabel, Counter>, result: &'static str) {
        family.get_or_create(&ResultLabel { result }).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exported names, which dashboards and alert rules query: touching
    /// every family gives each a sample, so every name is rendered.
    #[test]
    fn metric_names_are_stable() {
        let m = Metrics::default();
        let result = ResultLabel { result: "x" };
        let token = TokenLabel { token: "0x".into() };
        let endpoint = EndpointLabel { endpoint: "http://x".into() };
        m.gossip.get_or_create(&GossipLabel { topic: "t", result: "x" }).inc();
        for f in [
            &m.engine.replays,
            &m.engine.anchors,
            &m.engine.submissions,
            &m.engine.slashings,
            &m.content_fetches,
            &m.engine.gossip_bounded,
            &m.engine.commit_reveal,
            &m.engine.partials_verified,
            &m.content_served,
        ] {
            f.get_or_create(&result).inc();
        }
        for f in [&m.rewards_earned, &m.rewards_claimed, &m.gas_refunds] {
            f.get_or_create(&token).set(1.0);
        }
        for f in [&m.rpc_endpoint_up, &m.rpc_endpoint_head, &m.rpc_endpoint_consecutive_errors] {
            f.get_or_create(&endpoint).set(1);
        }
        for f in [&m.rpc_endpoint_errors, &m.rpc_endpoint_requests, &m.rpc_endpoint_disagreements] {
            f.get_or_create(&endpoint).inc();
        }
        m.rpc_endpoint_latency.get_or_create(&endpoint).set(1.0);
        let text = m.render();
        let mut names: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("# TYPE ")).collect();
        names.sort_unstable();
        assert_eq!(names, NAMES);
    }

    const NAMES: [&str; 42] = [
        "resolvd_account_balance_wei gauge",
        "resolvd_account_gas_cap_wei gauge",
        "resolvd_anchor_checks counter",
        "resolvd_certificates counter",
        "resolvd_chain_head gauge",
        "resolvd_chain_head_lag_blocks gauge",
        "resolvd_commit_reveal counter",
        "resolvd_content_fetches counter",
        "resolvd_content_served counter",
        "resolvd_dispute_to_certificate_seconds histogram",
        "resolvd_dispute_to_settlement_seconds histogram",
        "resolvd_disputes_in_flight gauge",
        "resolvd_disputes_in_memory gauge",
        "resolvd_doppelganger_detected gauge",
        "resolvd_dropped_announcements counter",
        "resolvd_dropped_partials counter",
        "resolvd_equivocations counter",
        "resolvd_gas_refunds gauge",
        "resolvd_gas_spent_wei gauge",
        "resolvd_gossip_bounded counter",
        "resolvd_gossip_messages counter",
        "resolvd_partials_verified counter",
        "resolvd_peers gauge",
        "resolvd_pending_partials gauge",
        "resolvd_protection_refusals counter",
        "resolvd_reorg_depth gauge",
        "resolvd_reorgs counter",
        "resolvd_replay_queue gauge",
        "resolvd_replays counter",
        "resolvd_rewards_claimed gauge",
        "resolvd_rewards_earned gauge",
        "resolvd_rpc_endpoint_consecutive_errors gauge",
        "resolvd_rpc_endpoint_disagreements counter",
        "resolvd_rpc_endpoint_errors counter",
        "resolvd_rpc_endpoint_head gauge",
        "resolvd_rpc_endpoint_latency_seconds gauge",
        "resolvd_rpc_endpoint_requests counter",
        "resolvd_rpc_endpoint_up gauge",
        "resolvd_signatures counter",
        "resolvd_slashings counter",
        "resolvd_store_errors counter",
        "resolvd_submissions counter",
    ];
}
