//! Fees and commit-reveal with real node processes on anvil (issue 13):
//!
//! - the resolver fee is paid to exactly the certificate's signers (pro rata,
//!   less the capped gas refund to the `resolve` sender);
//! - a `lazy` resolver (test-only fault: it never replays and signs the
//!   commitment of the first verified partial it sees) is in the certificate
//!   and paid without commit-reveal, and is never in it with commit-reveal on
//!   (same network, same faults: only the registry's `commitRevealMs` differs);
//! - the node's ledger (`/status` `economics`) shows fees earned, refunds and
//!   gas; `resolvd rewards --claim` withdraws them;
//! - a dispute without a certificate times out and refunds the fee and the
//!   challenge bond.

use crate::network::{launch, metric_sum, resolvd, Net, RELEASED, SETTLE};
use alloy_primitives::{B256, U256};
use alloy_provider::Provider;
use alloy_sol_types::SolCall;
use resolvd_devnet::{DealKind, Devnet, AMOUNT, SELLER_BOND};
use resolvd_node::{
    config::{Byzantine, FaultConfig},
    contracts::{IEscrow, IRegistry, IERC20},
    keys::{self, PasswordArgs},
};
use std::time::Duration;

/// The lazy resolver and the slow honest one.
pub(crate) const LAZY: usize = 3;
const SLOW: usize = 2;

/// A 4-node network: 0 and 1 honest (and the only submitters), 2 honest but
/// replaying 2 s late, 3 lazy. Threshold 3 of 4.
pub(crate) async fn network(commit_reveal_ms: u32) -> Net {
    launch(|o| {
        o.commit_reveal_ms = commit_reveal_ms;
        o.with_accounts = Some(vec![0, 1]);
        o.faults = vec![
            (SLOW, FaultConfig { replay_delay_ms: 2_000, ..Default::default() }),
            (LAZY, FaultConfig { byzantine: Some(Byzantine::Lazy), ..Default::default() }),
        ];
    })
    .await
}

/// The non-signers of the certificate that settled `deal` (from the
/// `resolve` calldata) and its sender.
pub(crate) async fn certificate_of(
    net: &Devnet,
    deal: B256,
) -> (Vec<u32>, alloy_primitives::Address) {
    let logs = net.verdict_logs(deal).await.unwrap();
    assert_eq!(logs.len(), 1, "one VerdictCommitted");
    let hash = logs[0].transaction_hash.unwrap();
    let tx: serde_json::Value =
        net.provider.raw_request("eth_getTransactionByHash".into(), (hash,)).await.unwrap();
    let input = alloy_primitives::hex::decode(tx["input"].as_str().unwrap()).unwrap();
    let call = IEscrow::resolveCall::abi_decode(&input).unwrap();
    let from = tx["from"].as_str().unwrap().parse().unwrap();
    (net.non_signers_of(deal, &call.nonSigners).await.unwrap(), from)
}

/// Settles one honest deal; returns each resolver's pending rewards, the
/// submitter's refund credit and the certificate's non-signers.
async fn settle_one(net: &mut Net) -> (Vec<U256>, U256, Vec<u32>) {
    let content = net.0.deal_content(DealKind::Honest).await.unwrap();
    let open = net.0.open_dispute(&content, &[0, 1, 2, 3]).await.unwrap();
    let deal = net.0.wait_settled(open.deal_id, SETTLE).await.unwrap();
    assert_eq!(deal.settlement, RELEASED);
    assert_eq!(deal.resolverFee, net.0.options.resolver_fee);
    let (non_signers, sender) = certificate_of(&net.0, open.deal_id).await;
    let excluded = split_held(&net.0, open.deal_id, &non_signers).await;
    let mut pending = Vec::new();
    let mut refund = U256::ZERO;
    for i in 0..net.0.nodes.len() {
        let (p, credits) = net.0.fees_of(i).await.unwrap();
        pending.push(p);
        if net.0.nodes[i].operator == sender {
            refund = credits;
        } else {
            assert_eq!(credits, U256::ZERO, "node {i} did not send resolve: no refund");
        }
    }
    // Exactly the signers are paid (the certificate's, plus those that
    // proved their partial in the inclusion window); the fee is split
    // without loss (the rounding remainder goes to the submitter; at most a
    // few wei stay).
    for (i, p) in pending.iter().enumerate() {
        let signer = !excluded.contains(&(i as u32));
        assert_eq!(*p > U256::ZERO, signer, "resolver {i}: signer {signer}, pending {p}");
    }
    let fee = U256::from(net.0.options.resolver_fee);
    let paid: U256 = pending.iter().copied().sum::<U256>() + refund;
    assert!(paid <= fee && fee - paid < U256::from(8), "fee {fee}, paid out {paid}");
    assert!(refund >= U256::from(net.0.options.gas_refund_cap), "refund {refund}");
    // Equal stakes: the signers got equal shares.
    let shares: Vec<U256> = pending.iter().copied().filter(|p| *p > U256::ZERO).collect();
    assert!(shares.windows(2).all(|w| w[0] == w[1]), "{shares:?}");
    (pending, refund, non_signers)
}

/// With non-signers the certificate's fee is held for the inclusion window:
/// a left-out node whose own replay signed the certified digest proves its
/// partial by itself (waited for up to 15 s). What is still held then is
/// split after the window by the node that submitted the certificate.
/// Returns the members still excluded.
async fn split_held(net: &Devnet, deal: B256, non_signers: &[u32]) -> Vec<u32> {
    let escrow = net.deployment.escrow;
    let held = || net.view(escrow, IEscrow::heldCall { dealId: deal });
    if non_signers.is_empty() {
        assert_eq!(held().await.unwrap().closesAt, 0, "nothing held without non-signers");
        return Vec::new();
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while held().await.unwrap().closesAt != 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // The node that sent `resolve` splits it once the chain's time is past
    // the window.
    let (held, by_node) = net.distribute_held(deal, Duration::from_secs(30)).await.unwrap();
    assert!(held && by_node, "the submitting node split the held fee");
    let epoch = net.deal(deal).await.unwrap().epoch;
    let bits: U256 = net
        .view(escrow, IEscrow::nonSignerBitsCall { dealId: deal, word: U256::ZERO })
        .await
        .unwrap();
    let mut excluded = Vec::new();
    for &i in non_signers {
        let at = IRegistry::positionOfCall { epoch: U256::from(epoch), index: U256::from(i) };
        let p: usize = net.view(net.deployment.registry, at).await.unwrap().saturating_to();
        if resolvd_node::chain::position_bit(bits, p) {
            excluded.push(i);
        }
    }
    excluded
}

fn log_of(net: &Devnet, i: usize) -> String {
    std::fs::read_to_string(net.nodes[i].log_path()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_commit_reveal_a_lazy_copier_is_certified_and_paid() {
    let mut net = network(0).await;
    let (pending, _, non_signers) = settle_one(&mut net).await;
    // The copy reached the threshold with the two fast honest nodes (the
    // slow one is in the certificate only if it signed before the submitter
    // sent it).
    assert!(log_of(&net.0, LAZY).contains("signing a copied commitment"));
    assert!(!non_signers.contains(&(LAZY as u32)), "{non_signers:?}");
    assert!(pending[LAZY] > U256::ZERO, "the lazy resolver was paid");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_commit_reveal_a_lazy_copier_is_never_certified_and_fees_timeouts_and_claims_work() {
    let mut net = network(5_000).await;
    let (pending, refund, non_signers) = settle_one(&mut net).await;
    // The lazy node did copy a revealed partial, but its commitment came in
    // the reveal phase: honest nodes did not count it.
    assert!(log_of(&net.0, LAZY).contains("signing a copied commitment"));
    assert_eq!(non_signers, vec![LAZY as u32]);
    assert_eq!(pending[LAZY], U256::ZERO, "the lazy resolver was not paid");
    assert!(pending[SLOW] > U256::ZERO, "the slow honest resolver committed in time");
    let uncounted =
        metric_sum(&net.0, "resolvd_commit_reveal_total", "result=\"uncounted_reveal\"").await;
    assert!(uncounted >= 1.0, "honest nodes saw the late reveal: {uncounted}");

    // The ledger: node 0's /status shows what it earned, and whoever sent
    // `resolve` shows the refund and the gas it paid.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut ok = true;
        for i in [0usize, 1] {
            let status = net.0.nodes[i].get("/status").await.unwrap();
            let e = &status["economics"];
            // One token in a devnet.
            let t = e["tokens"].as_object().and_then(|m| m.values().next()).cloned();
            let t = t.unwrap_or_default();
            let earned = t["pending"].as_str().map(|s| s.parse::<U256>().unwrap());
            ok &= earned == Some(pending[i]);
            let refunds = t["refunds"].as_str().map(|s| s.parse::<U256>().unwrap());
            let gas = e["gas_spent_wei"].as_str().map(|s| s.parse::<U256>().unwrap());
            let sent = refunds.is_some_and(|r| r == refund) && gas.is_some_and(|g| g > U256::ZERO);
            let idle = refunds.is_none_or(|r| r == U256::ZERO);
            ok &= sent || idle;
        }
        let any_refund = metric_sum(&net.0, "resolvd_gas_refunds", "token=").await;
        if ok && any_refund > 0.0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "ledger not updated");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // `resolvd rewards --claim`: node 0's operator withdraws its rewards
    // (and its refund credit, if it sent the resolve).
    let dir = net.0.nodes[0].dir.clone();
    let (operator, tok) = (net.0.nodes[0].operator, net.0.deployment.token);
    let held = IERC20::balanceOfCall { who: operator };
    let before = net.0.view(tok, held.clone()).await.unwrap();
    let shown = rewards(&net.0, None, &["--resolver", "0"]);
    assert_eq!(shown["pendingTotal"], pending[0].to_string(), "{shown}");
    // The lazy node's exclusion is an entry of the epoch, but it does not
    // name node 0: even with --settle-above 0 nothing is settled for it.
    let claimed = rewards(&net.0, Some(&dir), &["--claim", "--settle-above", "0"]);
    let credits: U256 = claimed["claimed"]["credits"].as_str().unwrap().parse().unwrap();
    let after = net.0.view(tok, held).await.unwrap();
    assert_eq!(after, before + pending[0] + credits, "{claimed}");
    let calls = claimed["claimed"]["transactions"].as_array().unwrap();
    assert!(calls.iter().all(|t| t["call"] != "settleExclusions"), "{claimed}");
    assert!(calls.iter().any(|t| t["call"] == "claimRewards"), "{claimed}");
    assert_eq!(net.0.fees_of(0).await.unwrap(), (U256::ZERO, U256::ZERO));

    // A dispute that gets no certificate (only node 0 is up: 1 of 4) times
    // out: the buyer gets back the amount, the fee and its challenge bond,
    // and the seller's DA bond (the seller could not prove its delivery).
    for i in 1..net.0.nodes.len() {
        net.0.nodes[i].stop();
    }
    let (buyer, seller) = (net.0.accounts[1], net.0.accounts[2]);
    let content = net.0.deal_content(DealKind::Honest).await.unwrap();
    let (buyer0, seller0) =
        (net.0.balance(buyer).await.unwrap(), net.0.balance(seller).await.unwrap());
    let open = net.0.open_dispute(&content, &[0]).await.unwrap();
    let fee = net.0.options.resolver_fee + net.0.options.challenge_bond;
    assert_eq!(net.0.balance(buyer).await.unwrap(), buyer0 - U256::from(AMOUNT + fee));
    let deal = net.0.deal(open.deal_id).await.unwrap();
    let _: serde_json::Value = net
        .0
        .provider
        .raw_request("evm_increaseTime".into(), (deal.resolveDeadline - deal.challengedAt + 1,))
        .await
        .unwrap();
    let _: serde_json::Value = net.0.provider.raw_request("evm_mine".into(), ()).await.unwrap();
    let call = IEscrow::timeoutRefundCall { dealId: open.deal_id };
    resolvd_devnet::send_from(
        &net.0.provider,
        buyer,
        alloy_primitives::TxKind::Call(net.0.deployment.escrow),
        call.abi_encode().into(),
    )
    .await
    .unwrap();
    assert_eq!(net.0.balance(buyer).await.unwrap(), buyer0 + U256::from(SELLER_BOND));
    assert_eq!(net.0.balance(seller).await.unwrap(), seller0 - U256::from(SELLER_BOND));
}

/// `resolvd rewards` in the devnet's token, with `args`; as the operator
/// whose account keystore and password are in `node_dir` if given.
fn rewards(net: &Devnet, node_dir: Option<&std::path::Path>, args: &[&str]) -> serde_json::Value {
    let (rpc, escrow) = (net.rpc_url.clone(), net.deployment.escrow.to_string());
    let token = net.deployment.token.to_string();
    let base = ["rewards", "--rpc-url", &rpc, "--escrow", &escrow, "--token", &token];
    let mut all: Vec<String> = base.iter().map(|s| s.to_string()).collect();
    if let Some(dir) = node_dir {
        all.push("--account-keystore".into());
        all.push(dir.join("account.json").display().to_string());
        all.push("--account-password-file".into());
        all.push(dir.join("password").display().to_string());
    }
    all.extend(args.iter().map(|s| s.to_string()));
    resolvd(&all.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Sets the balance of the account of node `i` (anvil).
async fn set_balance(net: &Devnet, i: usize, wei: U256) {
    let account = net.nodes[i].get("/status").await.unwrap()["account"].clone();
    let account: alloy_primitives::Address = serde_json::from_value(account).unwrap();
    let _: () = net.provider.raw_request("anvil_setBalance".into(), (account, wei)).await.unwrap();
}

/// A hostile submitter: the test, holding the BLS keys of nodes 0, 1 and 2,
/// waits until all four nodes signed a dispute, then certifies it with the
/// three alone, from the deployer's account, leaving out node `LEFT_OUT`
/// (the nodes with accounts have no gas, so no node submits first). The fee
/// is held for the inclusion window. Returns the deal.
async fn certify_leaving_out_node_3(net: &mut Devnet) -> B256 {
    let content = net.deal_content(DealKind::Honest).await.unwrap();
    let open = net.open_dispute(&content, &[0, 1, 2, 3]).await.unwrap();
    let deal = open.deal_id;
    // Every node signed: node 0's commitment and digest, node 3's partial.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let view = loop {
        let mut views = Vec::new();
        for i in 0..4 {
            let status = net.nodes[i].get("/status").await.unwrap();
            views.push(status["disputes"][deal.to_string()].clone());
        }
        if views.iter().all(|v| !v["own_signature"].is_null() && !v["digest"].is_null()) {
            break views.swap_remove(0);
        }
        assert!(std::time::Instant::now() < deadline, "not every node signed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let commitment: resolvd_proto::VerdictCommitment =
        serde_json::from_value(view["commitment"].clone()).unwrap();
    let digest: B256 = serde_json::from_value(view["digest"].clone()).unwrap();
    let mut partials = Vec::new();
    for i in 0..3 {
        let dir = &net.nodes[i].dir;
        let password = PasswordArgs { password_file: Some(dir.join("password")) };
        let secret = keys::load(&dir.join("bls-keystore.json"), &password).unwrap();
        partials.push(secret.sign(&digest));
    }
    let aggregate = resolvd_consensus::Signature::aggregate(partials.iter()).unwrap();
    let epoch = U256::from(net.deal(deal).await.unwrap().epoch);
    let indices = vec![U256::from(LEFT_OUT)];
    let bitmap = IRegistry::signerBitmapCall { epoch, indices };
    let bitmap = net.view(net.deployment.registry, bitmap).await.unwrap();
    let call = IEscrow::resolveCall {
        commitment: (&commitment).into(),
        nonSigners: bitmap,
        aggregateSignature: aggregate.to_eip2537().to_vec().into(),
    };
    resolvd_devnet::send_from(
        &net.provider,
        net.accounts[0],
        alloy_primitives::TxKind::Call(net.deployment.escrow),
        call.abi_encode().into(),
    )
    .await
    .unwrap();
    let held = net.view(net.deployment.escrow, IEscrow::heldCall { dealId: deal }).await;
    assert_ne!(held.unwrap().closesAt, 0, "the fee is held: node 3 was left out");
    deal
}

/// The node the hostile submitter leaves out.
const LEFT_OUT: usize = 3;

/// Node 3, left out by a hostile submitter although it signed, sees itself
/// named a non-signer of the digest it signed and proves its partial while
/// the fee is held: the fee is split at once, every node gets its equal
/// share, and `/status` shows the inclusion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_left_out_by_a_hostile_submitter_includes_itself_and_is_paid() {
    let mut net = launch(|o| o.with_accounts = Some(vec![LEFT_OUT])).await;
    set_balance(&net.0, LEFT_OUT, U256::ZERO).await;
    let deal = certify_leaving_out_node_3(&mut net.0).await;
    set_balance(&net.0, LEFT_OUT, U256::from(10u64).pow(U256::from(20u64))).await;
    // Node 3 proves its own partial; that completes the committee: split.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let status = net.0.nodes[LEFT_OUT].get("/status").await.unwrap();
        let note = status["inclusions"][deal.to_string()].as_str().map(str::to_owned);
        if let Some(note) = note {
            assert!(note.starts_with("included"), "{note}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "node 3 did not include itself");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while net
        .0
        .view(net.0.deployment.escrow, IEscrow::heldCall { dealId: deal })
        .await
        .unwrap()
        .closesAt
        != 0
    {
        assert!(std::time::Instant::now() < deadline, "fee still held");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let mut shares = Vec::new();
    for i in 0..4 {
        shares.push(net.0.fees_of(i).await.unwrap().0);
    }
    assert!(shares[0] > U256::ZERO && shares.windows(2).all(|w| w[0] == w[1]), "{shares:?}");
    assert!(log_of(&net.0, LEFT_OUT).contains("own partial included"));
}

/// A submitter that never splits the fee it left held (here: not a node at
/// all) cannot keep it held: node 1 signed the certified digest, and once
/// the chain's time is past the inclusion window and the grace, it sends
/// `distributeFee` itself. Node 3 (left out, no gas) stays excluded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fee_the_submitter_leaves_held_is_split_by_a_signer() {
    const SPLITTER: usize = 1;
    let mut net = launch(|o| o.with_accounts = Some(vec![SPLITTER, LEFT_OUT])).await;
    // The later dispute's content, proven before any balance is set (anvil
    // serves proofs that disagree with the state root of blocks mined after
    // an `anvil_setBalance`).
    let later = net.0.deal_content(DealKind::Honest).await.unwrap();
    set_balance(&net.0, SPLITTER, U256::ZERO).await;
    set_balance(&net.0, LEFT_OUT, U256::ZERO).await;
    let deal = certify_leaving_out_node_3(&mut net.0).await;
    set_balance(&net.0, SPLITTER, U256::from(10u64).pow(U256::from(20u64))).await;
    let escrow = net.0.deployment.escrow;
    let window: U256 = net.0.view(escrow, IEscrow::INCLUSION_WINDOWCall {}).await.unwrap();
    // The grace, and node 1's turn among the three signers at the latest.
    let grace =
        resolvd_node::node::DISTRIBUTE_GRACE_SECS + 2 * resolvd_node::node::DISTRIBUTE_SLOT_SECS;
    let _: serde_json::Value = net
        .0
        .provider
        .raw_request("evm_increaseTime".into(), (window.saturating_to::<u64>() + grace + 1,))
        .await
        .unwrap();
    let _: serde_json::Value = net.0.provider.raw_request("evm_mine".into(), ()).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while net.0.view(escrow, IEscrow::heldCall { dealId: deal }).await.unwrap().closesAt != 0 {
        assert!(std::time::Instant::now() < deadline, "nobody split the held fee");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // The node's log line is written after the transaction is mined.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !log_of(&net.0, SPLITTER).contains("held fee split after the inclusion window") {
        assert!(std::time::Instant::now() < deadline, "node {SPLITTER} did not split the fee");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let shares: Vec<U256> = {
        let mut v = Vec::new();
        for i in 0..4 {
            v.push(net.0.fees_of(i).await.unwrap().0);
        }
        v
    };
    assert!(shares[..3].iter().all(|s| *s > U256::ZERO && *s == shares[0]), "{shares:?}");
    assert_eq!(shares[LEFT_OUT], U256::ZERO, "{shares:?}");

    // Node 3 is paid for a later dispute of the same epoch; its claim first
    // settles the exclusion entry that names it (`--settle-above 0`).
    set_balance(&net.0, LEFT_OUT, U256::from(10u64).pow(U256::from(20u64))).await;
    let open = net.0.open_dispute(&later, &[0, 1, 2, 3]).await.unwrap();
    net.0.wait_settled(open.deal_id, SETTLE).await.unwrap();
    let _ = net.0.distribute_held(open.deal_id, Duration::from_secs(30)).await.unwrap();
    let pending = net.0.fees_of(LEFT_OUT).await.unwrap().0;
    assert!(pending > U256::ZERO, "node 3 signed the second dispute");
    let dir = net.0.nodes[LEFT_OUT].dir.clone();
    let claimed = rewards(&net.0, Some(&dir), &["--claim", "--settle-above", "0"]);
    let calls = claimed["claimed"]["transactions"].as_array().unwrap();
    assert_eq!(calls[0]["call"], "settleExclusions", "settled before the claim: {claimed}");
    assert!(calls.iter().any(|t| t["call"] == "claimRewards"), "{claimed}");
    assert_eq!(claimed["claimed"]["rewards"], pending.to_string(), "{claimed}");
    let (escrow, tok) = (net.0.deployment.escrow, net.0.deployment.token);
    let epoch = U256::from(calls[0]["epoch"].as_u64().unwrap());
    let count: U256 =
        net.0.view(escrow, IEscrow::exclusionCountCall { token: tok, epoch }).await.unwrap();
    let resolver = U256::from(LEFT_OUT);
    let cursor = IEscrow::exclusionCursorCall { token: tok, epoch, resolver };
    assert_eq!(net.0.view(escrow, cursor).await.unwrap(), count, "every entry settled");
    assert_eq!(net.0.fees_of(LEFT_OUT).await.unwrap().0, U256::ZERO, "claimed");
}
