//! Anchors must be canonical and final (seed 004, "EVM V1 backend"), on real
//! anvil: a forged header that hashes correctly but is not on the chain is
//! refused and never signed; an anchor ahead of `finalized` is signed only
//! once it becomes final.

use crate::network::{launch, metric_sum, RELEASED, SETTLE};
use alloy_primitives::{keccak256, Bytes};
use alloy_provider::Provider;
use resolvd_devnet::DealKind;
use resolvd_proto::{Canonical, EvmAnchorV1, PrestateAnchorV1};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_anchor_header_is_refused_and_never_signed() {
    let mut net = launch(|_| {}).await;
    let mut content = net.0.deal_content(DealKind::Honest).await.unwrap();
    // Block N's header with other extra data: a valid header hash and the
    // real state root (so the witness proves and the replay would reproduce),
    // but not a block of this chain.
    let real = content.evm_anchor.header.clone().expect("the anchor carries its header");
    let mut header: alloy_consensus::Header =
        alloy_rlp::Decodable::decode(&mut real.as_ref()).unwrap();
    header.extra_data = Bytes::from_static(b"forged");
    let rlp = alloy_rlp::encode(&header);
    let forged = EvmAnchorV1 {
        block_hash: keccak256(&rlp),
        header: Some(rlp.into()),
        ..content.evm_anchor.clone()
    };
    assert_ne!(forged.block_hash, content.evm_anchor.block_hash);
    content.anchor = PrestateAnchorV1 {
        backend_id: content.anchor.backend_id,
        body: forged.to_canonical_bytes().into(),
    };
    content.spec.prestate_anchor = content.anchor.clone();
    content.evm_anchor = forged;
    let bad = net.0.open_dispute(&content, &[0, 1, 2, 3]).await.unwrap();

    // An honest dispute opened after it settles: the nodes had the time.
    let honest = net.0.deal_content(DealKind::Honest).await.unwrap();
    let open = net.0.open_dispute(&honest, &[0, 1, 2, 3]).await.unwrap();
    assert_eq!(net.0.wait_settled(open.deal_id, SETTLE).await.unwrap().settlement, RELEASED);
    for n in &net.0.nodes {
        let v = n.get(&format!("/disputes/{}", bad.deal_id)).await.unwrap();
        assert_eq!(v["phase"], "anchor_rejected", "node {}: {v}", n.index);
        assert_eq!(v["anchor"]["status"], "not_canonical", "node {}: {v}", n.index);
        assert!(v["own_signature"].is_null(), "node {} signed a forged anchor: {v}", n.index);
        assert!(v["commitment"].is_null(), "node {} replayed a forged anchor: {v}", n.index);
    }
    let rejected =
        metric_sum(&net.0, "resolvd_anchor_checks_total", "result=\"not_canonical\"").await;
    assert!(rejected >= 4.0, "{rejected}");
    let deal = net.0.deal(bad.deal_id).await.unwrap();
    assert_eq!(deal.state, resolvd_node::contracts::deal_state::DISPUTED, "never settled");
    let _ = &mut net;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anchor_ahead_of_finalized_is_signed_only_once_final() {
    // anvil's `finalized` trails the head by about 2 × 5 blocks (1 s each).
    let mut net = launch(|o| o.finality_slots = 5).await;
    let head = net.0.provider.get_block_number().await.unwrap();
    let content = net.0.deal_content_at(DealKind::Honest, head).await.unwrap();
    let anchor_block = content.evm_anchor.block_number;
    let open = net.0.open_dispute(&content, &[0, 1, 2, 3]).await.unwrap();
    let node = &net.0.nodes[0];
    let mut waited = false;
    let deadline = Instant::now() + SETTLE;
    loop {
        assert!(Instant::now() < deadline, "never signed");
        let Ok(v) = node.get(&format!("/disputes/{}", open.deal_id)).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        if v["own_signature"].is_null() {
            if v["anchor"]["status"] == "not_final" {
                waited = true;
            }
        } else {
            // Signed: the node found the anchor final, and it is (read after).
            let finalized = net
                .0
                .provider
                .get_block_by_number(alloy_rpc_types_eth::BlockNumberOrTag::Finalized)
                .await
                .unwrap()
                .unwrap()
                .header
                .number;
            assert_eq!(v["anchor"]["status"], "final", "{v}");
            assert!(
                anchor_block <= finalized,
                "signed block {anchor_block} > finalized {finalized}"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(waited, "the node never reported waiting for finality");
    assert_eq!(net.0.wait_settled(open.deal_id, SETTLE).await.unwrap().settlement, RELEASED);
    let _ = &mut net;
}

/// With `confirmations = 0` a node acts on the head's logs. The challenge's
/// block is reorged out (anvil `evm_revert` to a snapshot taken before it;
/// new blocks follow) while the nodes wait for the anchor to be final: no
/// node ever signs for it; the same deal challenged again settles once.
///
/// Nodes 1–3 poll the chain every 5 s: most of them take the dispute from
/// node 0's gossip before their own watcher reaches its block, so no reorg
/// walk of theirs ever covers it; only their scan of the new blocks, without
/// the log, tells them it is gone. Node 0 finds it by its reorg walk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispute_reorged_out_is_never_signed_and_settles_once_when_challenged_again() {
    let mut net = launch(|o| {
        o.confirmations = 0;
        // `finalized` trails the head by about 20 blocks: the anchor is
        // final well after every node could have noticed the reorg.
        o.finality_slots = 10;
        o.node_config = Some(|i, c| {
            if i > 0 {
                c.chain.poll_interval_ms = 5_000;
            }
        });
    })
    .await;
    let head = net.0.provider.get_block_number().await.unwrap();
    let content = net.0.deal_content_at(DealKind::Honest, head).await.unwrap();
    let deal_id = net.0.deliver_deal(&content, &[0, 1, 2, 3]).await.unwrap();
    let snapshot: alloy_primitives::U256 =
        net.0.provider.raw_request("evm_snapshot".into(), ()).await.unwrap();
    let open = net.0.challenge(deal_id).await.unwrap();
    // Every node confirmed it (and waits for the anchor to be final).
    let path = format!("/disputes/{deal_id}");
    let deadline = Instant::now() + Duration::from_secs(30);
    for n in &net.0.nodes {
        loop {
            assert!(Instant::now() < deadline, "node {} never saw the dispute", n.index);
            if let Ok(v) = n.get(&path).await {
                assert!(v["own_signature"].is_null(), "signed before the anchor was final: {v}");
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let reverted: bool =
        net.0.provider.raw_request("evm_revert".into(), (snapshot,)).await.unwrap();
    assert!(reverted);
    let reorged_at = Instant::now();
    net.0.reconnect().unwrap();
    let deal = net.0.deal(deal_id).await.unwrap();
    assert_eq!(deal.state, resolvd_node::contracts::deal_state::DELIVERED, "challenge undone");
    // Until the anchor is final and some more: nobody signed, the dispute is
    // gone everywhere.
    let anchor_block = content.evm_anchor.block_number;
    let mut noticed = None;
    let mut final_at = None;
    while final_at.is_none_or(|t: Instant| t.elapsed() < Duration::from_secs(5)) {
        assert!(reorged_at.elapsed() < Duration::from_secs(90), "the anchor never became final");
        let mut gone = 0;
        for n in &net.0.nodes {
            match n.get(&path).await {
                Ok(v) => assert!(v["own_signature"].is_null(), "node {} signed: {v}", n.index),
                Err(_) => gone += 1,
            }
        }
        if gone == net.0.nodes.len() && noticed.is_none() {
            noticed = Some(reorged_at.elapsed());
        }
        if final_at.is_none() {
            let finalized = net
                .0
                .provider
                .get_block_by_number(alloy_rpc_types_eth::BlockNumberOrTag::Finalized)
                .await
                .unwrap()
                .map_or(0, |b| b.header.number);
            if finalized >= anchor_block {
                final_at = Some(Instant::now());
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let noticed = noticed.expect("every node dropped the reorged-out dispute");
    // Node 0's watcher handled the challenge's block: its walk found the reorg.
    let reorgs = metric_sum(&net.0, "resolvd_reorgs_total", "").await;
    assert!(reorgs >= 1.0, "{reorgs}");
    let scanned = (1..net.0.nodes.len())
        .filter(|&i| {
            std::fs::read_to_string(net.0.nodes[i].log_path())
                .is_ok_and(|log| log.contains("are not in the blocks the watcher handled"))
        })
        .count();
    #[allow(clippy::disallowed_macros)]
    {
        eprintln!(
            "reorg: all 4 nodes dropped the dispute {noticed:?} after the revert \
             (challenge → revert {:?}); {scanned} of the 3 slow nodes by their scan \
             of the new blocks",
            reorged_at - open.challenged
        );
    }
    // Challenged again: handled afresh and settled once.
    let again = net.0.challenge(deal_id).await.unwrap();
    let settled = net.0.wait_settled(again.deal_id, SETTLE).await.unwrap();
    assert_eq!(settled.settlement, RELEASED);
    let resolves = metric_sum(&net.0, "resolvd_submissions_total", "result=\"sent\"").await;
    assert!(resolves <= 1.0, "resolve succeeded {resolves} times");
    let _ = &mut net;
}
