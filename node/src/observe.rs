//! The metrics that mirror values the node reads for its status: the fee
//! ledger and the RPC endpoints' health (the metrics registry itself takes
//! plain values and names no other module).

use crate::{
    chain::rpc::EndpointHealth,
    economics::Ledger,
    metrics::{EndpointLabel, MethodLabel, Metrics, TokenLabel},
};
use std::collections::BTreeMap;

/// Sets the fee and gas metrics from the ledger.
pub fn ledger(metrics: &Metrics, ledger: &Ledger) {
    for (token, t) in &ledger.tokens {
        let label = TokenLabel { token: token.to_string() };
        metrics.account.rewards_earned.get_or_create(&label).set(f64::from(t.earned()));
        metrics.account.rewards_claimed.get_or_create(&label).set(f64::from(t.claimed));
        metrics.account.gas_refunds.get_or_create(&label).set(f64::from(t.refunds));
    }
    metrics.account.gas_spent_wei.set(f64::from(ledger.gas_spent_wei));
}

/// Sets the `rpc_endpoint_*` metrics from [`crate::chain::Chain::endpoints`]
/// (call it whenever the status is refreshed; the counters take the
/// difference to the totals they last saw).
pub fn endpoints(metrics: &Metrics, endpoints: &[EndpointHealth]) {
    let mut calls = BTreeMap::<&str, u64>::new();
    for e in endpoints {
        for (method, n) in &e.calls {
            *calls.entry(method).or_default() += n;
        }
    }
    for (method, total) in calls {
        let counter = metrics.rpc.calls.get_or_create(&MethodLabel { method: method.to_owned() });
        let seen = counter.get();
        if total > seen {
            counter.inc_by(total - seen);
        }
    }
    for e in endpoints {
        let label = EndpointLabel { endpoint: e.endpoint.clone() };
        metrics.rpc.up.get_or_create(&label).set(i64::from(e.up));
        if let Some(head) = e.head {
            metrics.rpc.head.get_or_create(&label).set(i64::try_from(head).unwrap_or(i64::MAX));
        }
        metrics
            .rpc
            .consecutive_errors
            .get_or_create(&label)
            .set(i64::try_from(e.consecutive_errors).unwrap_or(i64::MAX));
        for (family, total) in [
            (&metrics.rpc.errors, e.errors),
            (&metrics.rpc.requests, e.requests),
            (&metrics.rpc.disagreements, e.disagreements),
        ] {
            let counter = family.get_or_create(&label);
            let seen = counter.get();
            if total > seen {
                counter.inc_by(total - seen);
            }
        }
        if let Some(ms) = e.latency_ms {
            metrics.rpc.latency.get_or_create(&label).set(ms / 1_000.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::rpc::EndpointKind;

    #[test]
    fn endpoint_health_is_exported() {
        let m = Metrics::default();
        let mut e = EndpointHealth {
            endpoint: "https://rpc.example.org".into(),
            kind: EndpointKind::Http,
            up: true,
            chain_id: Some(1),
            refused: false,
            head: Some(42),
            consecutive_errors: 0,
            requests: 10,
            calls: BTreeMap::from([("eth_getLogs".to_owned(), 7), ("eth_call".to_owned(), 5)]),
            errors: 2,
            last_error: None,
            latency_ms: Some(12.5),
            disagreements: 0,
            last_disagreement: None,
        };
        endpoints(&m, std::slice::from_ref(&e));
        e.up = false;
        e.consecutive_errors = 3;
        e.errors = 5;
        e.requests = 13;
        e.disagreements = 2;
        e.calls.insert("eth_getLogs".to_owned(), 9);
        endpoints(&m, &[e]);
        let text = m.render();
        let label = "{endpoint=\"https://rpc.example.org\"}";
        for line in [
            format!("resolvd_rpc_endpoint_up{label} 0"),
            format!("resolvd_rpc_endpoint_head{label} 42"),
            format!("resolvd_rpc_endpoint_consecutive_errors{label} 3"),
            format!("resolvd_rpc_endpoint_errors_total{label} 5"),
            format!("resolvd_rpc_endpoint_requests_total{label} 13"),
            format!("resolvd_rpc_endpoint_latency_seconds{label} 0.0125"),
            format!("resolvd_rpc_endpoint_disagreements_total{label} 2"),
            "resolvd_rpc_calls_total{method=\"eth_getLogs\"} 9".to_owned(),
            "resolvd_rpc_calls_total{method=\"eth_call\"} 5".to_owned(),
        ] {
            assert!(text.contains(&line), "{line} missing in\n{text}");
        }
    }
}
