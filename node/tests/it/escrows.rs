//! One node, many escrows (`chain.escrows`): every escrow on the node's
//! registry is served by one process, each signing under its own EIP-712
//! domain; an escrow on another registry is refused at start; an
//! equivocation under one escrow's domain is slashed under that domain only,
//! and different verdicts on different escrows' deals are not equivocation.

use crate::network::{metric_sum, workspace, Net, REFUNDED, RELEASED, SETTLE};
use alloy_primitives::{Address, U256};
use resolvd_devnet::{deploy, deploy_escrow, Artifacts, DealKind, Devnet, DevnetOptions};
use resolvd_node::{
    config::{Byzantine, FaultConfig},
    contracts::{IEscrow, IRegistry},
};
use std::{path::PathBuf, time::Duration};

async fn separator(net: &Devnet, escrow: Address) -> alloy_primitives::B256 {
    net.view(escrow, IEscrow::domainSeparatorCall {}).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_serves_two_escrows_each_under_its_own_domain() {
    let options = DevnetOptions::for_workspace(
        &workspace(),
        PathBuf::from(env!("CARGO_BIN_EXE_resolvd")),
        std::env::temp_dir().join("resolvd-it"),
    );
    let mut net = Net(Devnet::provision(options).await.expect("devnet"));
    let artifacts = Artifacts::load(&net.0.options.contracts).unwrap();
    let deployer = net.0.accounts[0];
    let first = net.0.deployment.escrow;
    let (second, _) =
        deploy_escrow(&net.0.provider, &artifacts, deployer, net.0.deployment.registry)
            .await
            .unwrap();
    // Buyer and seller approve it as they did the first.
    for who in &net.0.accounts[1..3] {
        let approve = resolvd_node::contracts::IERC20::approveCall {
            spender: second,
            amount: U256::from(10u64).pow(U256::from(30u64)),
        };
        resolvd_devnet::send_from(
            &net.0.provider,
            *who,
            alloy_primitives::TxKind::Call(net.0.deployment.token),
            alloy_sol_types::SolCall::abi_encode(&approve).into(),
        )
        .await
        .unwrap();
    }
    // A whole other deployment: its escrow uses another registry.
    let foreign = deploy(&net.0.provider, &artifacts, deployer).await.unwrap();

    // Refused at start, with the reason.
    net.0.nodes[0].config.chain.escrows = vec![second, foreign.escrow];
    net.0.start_node(0).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = net.0.nodes[0].exited() {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "started with a foreign escrow");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(!status.success());
    let log = std::fs::read_to_string(net.0.nodes[0].log_path()).unwrap();
    assert!(log.contains(&format!("escrow {} uses registry", foreign.escrow)), "{log}");

    for i in 0..net.0.nodes.len() {
        net.0.nodes[i].config.chain.escrows = vec![second];
        net.0.start_node(i).unwrap();
    }
    for n in &mut net.0.nodes {
        n.wait_healthy(Duration::from_secs(60)).await.unwrap();
    }
    net.0.wait_mesh(Duration::from_secs(120)).await.unwrap();
    let status = net.0.nodes[1].get("/status").await.unwrap();
    assert_eq!(status["escrows"], serde_json::json!([first, second]), "{status}");

    // A dispute on each: an honest delivery on the first, a false claim on
    // the second. Every resolver signs different verdicts, under different
    // domains, for different deals: not equivocation.
    let honest = net.0.deal_content(DealKind::Honest).await.unwrap();
    let on_first = net.0.open_dispute(&honest, &[0, 1, 2, 3]).await.unwrap();
    net.0.deployment.escrow = second;
    let false_claim = net.0.deal_content(DealKind::FalseClaim).await.unwrap();
    let on_second = net.0.open_dispute(&false_claim, &[0, 1, 2, 3]).await.unwrap();
    assert_eq!(net.0.wait_settled(on_second.deal_id, SETTLE).await.unwrap().settlement, REFUNDED);
    net.0.deployment.escrow = first;
    assert_eq!(net.0.wait_settled(on_first.deal_id, SETTLE).await.unwrap().settlement, RELEASED);
    for n in &net.0.nodes {
        let a = n.get(&format!("/disputes/{}", on_first.deal_id)).await.unwrap();
        let b = n.get(&format!("/disputes/{}", on_second.deal_id)).await.unwrap();
        assert!(!a["own_signature"].is_null() && !b["own_signature"].is_null(), "{a} {b}");
    }
    assert_eq!(metric_sum(&net.0, "resolvd_equivocations_total", "").await, 0.0);

    // Node 3 turns equivocator on a deal of the second escrow: slashed
    // under that escrow's domain (and only there), nobody else.
    net.0.nodes[3].stop();
    net.0.nodes[3].config.fault =
        FaultConfig { byzantine: Some(Byzantine::Equivocate), ..Default::default() };
    net.0.start_node(3).unwrap();
    net.0.nodes[3].wait_healthy(Duration::from_secs(60)).await.unwrap();
    net.0.wait_mesh(Duration::from_secs(120)).await.unwrap();
    net.0.deployment.escrow = second;
    let honest = net.0.deal_content(DealKind::Honest).await.unwrap();
    let bad = net.0.open_dispute(&honest, &[0, 1, 2, 3]).await.unwrap();
    assert_eq!(net.0.wait_settled(bad.deal_id, SETTLE).await.unwrap().settlement, RELEASED);
    let registry = net.0.deployment.registry;
    let slashed_for = |escrow_sep, index: u64| {
        let call = IRegistry::slashedForCall {
            domainSeparator: escrow_sep,
            dealId: bad.deal_id,
            index: U256::from(index),
        };
        let net = &net.0;
        async move { net.view(registry, call).await.unwrap() }
    };
    let (sep_first, sep_second) = (separator(&net.0, first).await, separator(&net.0, second).await);
    assert_ne!(sep_first, sep_second);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !slashed_for(sep_second, 3).await {
        assert!(std::time::Instant::now() < deadline, "the equivocator was not slashed");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(!slashed_for(sep_first, 3).await, "slashed under the other escrow's domain");
    for honest in 0..3 {
        assert!(!slashed_for(sep_second, honest).await, "honest resolver {honest} slashed");
    }
}
