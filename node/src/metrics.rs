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

/// A `method` label: a JSON-RPC method the node calls.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabel {
    /// `eth_getLogs`, `eth_call`, …
    pub method: String,
}

/// A gauge of a value that may exceed `i64` (wei, token base units).
type Real = Gauge<f64, AtomicU64>;

/// Every metric of a node.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// The engine's metrics (registered here, counted by the engine).
    pub engine: EngineMetrics,
    /// The chain watcher's.
    pub chain: ChainMetrics,
    /// The transaction account's and its fee ledger's.
    pub account: AccountMetrics,
    /// Per RPC endpoint.
    pub rpc: RpcMetrics,
    /// Gossip messages validated, by topic and result.
    pub gossip: Family<GossipLabel, Counter>,
    /// Replays queued or running.
    pub replay_queue: Gauge,
    /// Content fetched from peers, by result (ok / duplicate / not_found / wrong_hash / failed).
    pub content_fetches: Family<ResultLabel, Counter>,
    /// Content requests from peers, by result (ok / not_found / busy).
    pub content_served: Family<ResultLabel, Counter>,
    /// Direct messages, by result (sent / fallback / failed / received /
    /// rejected / graylisted).
    pub direct: Family<ResultLabel, Counter>,
    /// Member records known (committee members this node can reach directly).
    pub member_records: Gauge,
    /// Connected peers.
    pub peers: Gauge,
    /// Disputes not yet settled or expired.
    pub disputes_in_flight: Gauge,
    /// Disputes held in memory (open and recently finished).
    pub disputes_in_memory: Gauge,
    /// Store writes that failed (the node keeps running; see node/README.md).
    pub store_errors: Counter,
    /// 1 once a partial of this node's key made elsewhere was seen.
    pub doppelganger: Gauge,
}

/// The chain watcher's metrics.
#[derive(Debug, Default)]
pub struct ChainMetrics {
    /// Latest block number seen.
    pub head: Gauge,
    /// Head minus the last block handled (the confirmations plus any lag).
    pub head_lag: Gauge,
    /// Reorgs of blocks the watcher had handled.
    pub reorgs: Counter,
    /// Depth (blocks re-scanned) of the last such reorg.
    pub reorg_depth: Gauge,
}

impl ChainMetrics {
    fn register(&self, r: &mut Registry) {
        r.register("reorgs", "Reorgs of handled blocks", self.reorgs.clone());
        r.register("chain_head", "Latest block number seen", self.head.clone());
        r.register(
            "chain_head_lag_blocks",
            "Head minus the last block handled",
            self.head_lag.clone(),
        );
        r.register(
            "reorg_depth",
            "Blocks re-scanned after the last reorg",
            self.reorg_depth.clone(),
        );
    }
}

/// The transaction account's metrics and its fee ledger's.
#[derive(Debug, Default)]
pub struct AccountMetrics {
    /// Fee rewards earned as a signer (claimed + pending), token base units.
    pub rewards_earned: Family<TokenLabel, Real>,
    /// Fee rewards claimed, token base units.
    pub rewards_claimed: Family<TokenLabel, Real>,
    /// Gas refunds credited for sending `resolve`, token base units.
    pub gas_refunds: Family<TokenLabel, Real>,
    /// Wei the account paid for its transactions (this data dir's lifetime).
    pub gas_spent_wei: Real,
    /// The transaction account's balance, wei (f64: wei overflow i64).
    pub balance: Real,
    /// What the largest transaction may cost at the fee cap:
    /// `chain.max_fee_per_gas` × 1M gas, wei.
    pub gas_cap: Real,
}

impl AccountMetrics {
    fn register(&self, r: &mut Registry) {
        r.register(
            "rewards_earned",
            "Fee rewards earned as a signer (claimed + pending), token base units",
            self.rewards_earned.clone(),
        );
        r.register(
            "rewards_claimed",
            "Fee rewards claimed, token base units",
            self.rewards_claimed.clone(),
        );
        r.register(
            "gas_refunds",
            "Gas refunds credited for sending resolve, token base units",
            self.gas_refunds.clone(),
        );
        r.register(
            "gas_spent_wei",
            "Wei the account paid for its transactions",
            self.gas_spent_wei.clone(),
        );
        r.register(
            "account_balance_wei",
            "Balance of the transaction account",
            self.balance.clone(),
        );
        r.register(
            "account_gas_cap_wei",
            "Cost of a 1M-gas transaction at chain.max_fee_per_gas",
            self.gas_cap.clone(),
        );
    }
}

/// Per RPC endpoint (`endpoint` label).
#[derive(Debug, Default)]
pub struct RpcMetrics {
    /// 1 while an RPC endpoint is up (chain id checked, last request answered).
    pub up: Family<EndpointLabel, Gauge>,
    /// The highest block number an RPC endpoint reported.
    pub head: Family<EndpointLabel, Gauge>,
    /// Failed requests to an RPC endpoint since its last success.
    pub consecutive_errors: Family<EndpointLabel, Gauge>,
    /// Failed requests to an RPC endpoint (transport errors, timeouts).
    pub errors: Family<EndpointLabel, Counter>,
    /// Requests sent to an RPC endpoint.
    pub requests: Family<EndpointLabel, Counter>,
    /// JSON-RPC calls sent to the endpoints, by method (`method` label;
    /// each call of a batch).
    pub calls: Family<MethodLabel, Counter>,
    /// Duration of an RPC endpoint's last successful request.
    pub latency: Family<EndpointLabel, Real>,
    /// Anchor cross-checks that did not follow an RPC endpoint's answer.
    pub disagreements: Family<EndpointLabel, Counter>,
}

impl RpcMetrics {
    fn register(&self, r: &mut Registry) {
        r.register(
            "rpc_endpoint_up",
            "RPC endpoint up (chain id checked, last request answered)",
            self.up.clone(),
        );
        r.register(
            "rpc_endpoint_head",
            "Highest block number an RPC endpoint reported",
            self.head.clone(),
        );
        r.register(
            "rpc_endpoint_consecutive_errors",
            "Failed requests to an RPC endpoint since its last success",
            self.consecutive_errors.clone(),
        );
        r.register(
            "rpc_endpoint_errors",
            "Failed requests to an RPC endpoint",
            self.errors.clone(),
        );
        r.register(
            "rpc_endpoint_requests",
            "Requests sent to an RPC endpoint",
            self.requests.clone(),
        );
        r.register(
            "rpc_calls",
            "JSON-RPC calls sent to the RPC endpoints, by method (each call of a batch)",
            self.calls.clone(),
        );
        r.register(
            "rpc_endpoint_latency_seconds",
            "Duration of an RPC endpoint's last successful request",
            self.latency.clone(),
        );
        r.register(
            "rpc_endpoint_disagreements",
            "Anchor cross-checks that did not follow an RPC endpoint's answer (it called an anchor final, or another block canonical, alone)",
            self.disagreements.clone(),
        );
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("resolvd");
        let m = Self {
            registry: Registry::default(),
            engine: EngineMetrics::default(),
            chain: ChainMetrics::default(),
            account: AccountMetrics::default(),
            rpc: RpcMetrics::default(),
            gossip: Family::default(),
            replay_queue: Gauge::default(),
            content_fetches: Family::default(),
            content_served: Family::default(),
            direct: Family::default(),
            member_records: Gauge::default(),
            peers: Gauge::default(),
            disputes_in_flight: Gauge::default(),
            disputes_in_memory: Gauge::default(),
            store_errors: Counter::default(),
            doppelganger: Gauge::default(),
        };
        let r = &mut registry;
        r.register("gossip_messages", "Gossip messages validated", m.gossip.clone());
        r.register("replay_queue", "Replays queued or running", m.replay_queue.clone());
        r.register("content_fetches", "Content fetched from peers", m.content_fetches.clone());
        r.register("content_served", "Content requests from peers", m.content_served.clone());
        r.register("direct_messages", "Direct messages", m.direct.clone());
        r.register("member_records", "Member records known", m.member_records.clone());
        r.register("peers", "Connected peers", m.peers.clone());
        r.register("disputes_in_flight", "Disputes in flight", m.disputes_in_flight.clone());
        r.register("disputes_in_memory", "Disputes held in memory", m.disputes_in_memory.clone());
        r.register("store_errors", "Failed store writes", m.store_errors.clone());
        r.register(
            "doppelganger_detected",
            "1 once this node's key was seen signing elsewhere",
            m.doppelganger.clone(),
        );
        m.chain.register(r);
        m.account.register(r);
        m.rpc.register(r);
        m.engine.register(r);
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
            &m.direct,
        ] {
            f.get_or_create(&result).inc();
        }
        for f in [&m.account.rewards_earned, &m.account.rewards_claimed, &m.account.gas_refunds] {
            f.get_or_create(&token).set(1.0);
        }
        for f in [&m.rpc.up, &m.rpc.head, &m.rpc.consecutive_errors] {
            f.get_or_create(&endpoint).set(1);
        }
        for f in [&m.rpc.errors, &m.rpc.requests, &m.rpc.disagreements] {
            f.get_or_create(&endpoint).inc();
        }
        m.rpc.latency.get_or_create(&endpoint).set(1.0);
        m.rpc.calls.get_or_create(&MethodLabel { method: "eth_call".into() }).inc();
        let text = m.render();
        let mut names: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("# TYPE ")).collect();
        names.sort_unstable();
        assert_eq!(names, NAMES);
    }

    const NAMES: [&str; 45] = [
        "resolvd_account_balance_wei gauge",
        "resolvd_account_gas_cap_wei gauge",
        "resolvd_anchor_checks counter",
        "resolvd_certificates counter",
        "resolvd_chain_head gauge",
        "resolvd_chain_head_lag_blocks gauge",
        "resolvd_commit_reveal counter",
        "resolvd_content_fetches counter",
        "resolvd_content_served counter",
        "resolvd_direct_messages counter",
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
        "resolvd_member_records gauge",
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
        "resolvd_rpc_calls counter",
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
