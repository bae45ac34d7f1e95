//! Transactions an operator can leave running, on a real anvil with mining by
//! hand: EIP-1559 fees from `eth_feeHistory` under the cap; a transaction
//! priced out by a base-fee spike is replaced (same nonce, higher fees) and
//! mined once; an account that cannot pay for the gas cap is a typed error.

use crate::network::workspace;
use alloy_primitives::U256;
use alloy_provider::{Provider, ProviderBuilder};
use alloy_signer_local::PrivateKeySigner;
use resolvd_devnet::{deploy, free_port, wait_for_chain, Anvil, Artifacts, DevnetOptions};
use resolvd_node::{
    chain::{Chain, ChainError, Fees},
    contracts::IERC20,
};
use std::{path::PathBuf, time::Duration};

#[test]
fn fees_follow_the_history_under_the_cap_and_bump_by_the_replacement_minimum() {
    let f = Fees::from_history(10, &[3, 1, 2], 1_000).unwrap();
    assert_eq!(f, Fees { max_fee_per_gas: 22, max_priority_fee_per_gas: 2 });
    let capped = Fees::from_history(600, &[5], 1_000).unwrap();
    assert_eq!(capped.max_fee_per_gas, 1_000);
    assert!(matches!(Fees::from_history(1_001, &[1], 1_000), Err(ChainError::FeeCap { .. })));
    let b = f.bumped(None, 1_000).unwrap();
    assert!(b.max_fee_per_gas * 8 >= f.max_fee_per_gas * 9, "+12.5 %: {b:?}");
    assert!(b.max_priority_fee_per_gas * 8 >= f.max_priority_fee_per_gas * 9);
    let fresh = Fees { max_fee_per_gas: 500, max_priority_fee_per_gas: 7 };
    assert_eq!(f.bumped(Some(fresh), 1_000).unwrap(), fresh, "a higher fresh estimate wins");
    assert_eq!(capped.bumped(None, 1_000), None, "no room under the cap");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_priced_out_by_a_base_fee_spike_is_replaced_and_mined_once() {
    let options = DevnetOptions::for_workspace(&workspace(), PathBuf::new(), PathBuf::new());
    let dir = tempfile::tempdir().unwrap();
    let anvil =
        Anvil::start(&options.anvil, free_port().unwrap(), 1, 1, &dir.path().join("anvil.log"))
            .unwrap();
    let provider = ProviderBuilder::new().connect_http(anvil.url.parse().unwrap()).erased();
    wait_for_chain(&provider, &anvil.url).await.unwrap();
    let accounts = provider.get_accounts().await.unwrap();
    let artifacts = Artifacts::load(&options.contracts).unwrap();
    let deployment = deploy(&provider, &artifacts, accounts[0]).await.unwrap();

    // An account without funds: a clear, typed error before anything is sent.
    let poor = Chain::connect(&anvil.url, deployment.escrow, Some(PrivateKeySigner::random()))
        .await
        .unwrap();
    let mint = IERC20::mintCall { to: accounts[5], amount: U256::from(1u64) };
    let err = poor.send(deployment.token, mint.clone()).await.unwrap_err();
    assert!(matches!(err, ChainError::InsufficientFunds { .. }), "{err}");

    let signer = PrivateKeySigner::random();
    let me = signer.address();
    let _: () = provider
        .raw_request("anvil_setBalance".into(), (me, U256::from(10u64).pow(U256::from(20u64))))
        .await
        .unwrap();
    let mut chain = Chain::connect(&anvil.url, deployment.escrow, Some(signer)).await.unwrap();
    chain.fees.replace_after_blocks = 2;

    // Blocks by hand from here.
    let _: () = provider.raw_request("evm_setIntervalMining".into(), (0u64,)).await.unwrap();
    let _: () = provider.raw_request("evm_setAutomine".into(), (false,)).await.unwrap();
    let nonce = provider.get_transaction_count(me).await.unwrap();
    let sender = chain.clone();
    let token = deployment.token;
    let send = tokio::spawn(async move { sender.send(token, mint).await });
    // Wait for it in the pool, then price it out: the next block's base fee
    // far above what it offers.
    let first = loop {
        let pending = provider.get_transaction_count(me).pending().await.unwrap();
        if pending > nonce {
            let content: serde_json::Value =
                provider.raw_request("txpool_content".into(), ()).await.unwrap();
            let ours = content["pending"]
                .as_object()
                .and_then(|m| {
                    m.iter().find(|(k, _)| k.eq_ignore_ascii_case(&me.to_string())).map(|(_, v)| v)
                })
                .and_then(|by_nonce| by_nonce.as_object()?.values().next().cloned());
            match ours {
                Some(tx) => break tx,
                None => panic!("not in the pool: {content}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let offered =
        u128::from_str_radix(first["maxFeePerGas"].as_str().unwrap().trim_start_matches("0x"), 16)
            .unwrap();
    let spike = U256::from(offered * 50);
    let _: () =
        provider.raw_request("anvil_setNextBlockBaseFeePerGas".into(), (spike,)).await.unwrap();
    let mut mined_blocks = 0;
    let outcome = loop {
        let _: String = provider.raw_request("evm_mine".into(), ()).await.unwrap();
        mined_blocks += 1;
        assert!(mined_blocks < 20, "never mined");
        tokio::time::sleep(Duration::from_millis(600)).await;
        if send.is_finished() {
            break send.await.unwrap().unwrap();
        }
    };
    assert!(outcome.replacements >= 1, "{outcome:?}");
    let first_hash: alloy_primitives::B256 = first["hash"].as_str().unwrap().parse().unwrap();
    assert_ne!(outcome.tx_hash, first_hash, "the replacement was mined");
    assert!(provider.get_transaction_receipt(first_hash).await.unwrap().is_none());
    assert_eq!(provider.get_transaction_count(me).await.unwrap(), nonce + 1, "mined once");
    #[allow(clippy::disallowed_macros)]
    {
        eprintln!(
            "fees: offered {offered} wei/gas, base fee spiked to {spike}; replaced {} time(s), \
             mined after {mined_blocks} blocks",
            outcome.replacements
        );
    }
}

/// A `resolve` in flight when its node is killed is resumed after the
/// restart (same nonce, same signed bytes, from the transaction journal)
/// instead of being sent a second time. Without the journal the restarted
/// node would send a new `resolve` at the next nonce: two transactions mined
/// from its account, the second one wasted on `AlreadyResolved`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_resumes_a_pending_resolve_instead_of_sending_another() {
    use crate::network::{launch, RELEASED, SETTLE};
    use resolvd_devnet::DealKind;
    // One submitter within the test's time (the others wait 10 minutes), and
    // no confirmations, so only one block is needed after the challenge (the
    // dispute's order entropy is drawn from it).
    let mut net = launch(|o| {
        o.submit_slot_ms = 600_000;
        o.confirmations = 0;
    })
    .await;
    let content = net.0.deal_content(DealKind::Honest).await.unwrap();
    let provider = net.0.provider.clone();
    let open = net.0.open_dispute(&content, &[0, 1, 2, 3]).await.unwrap();
    // One more block at most, then none: the certificate's `resolve` stays
    // in the pool.
    let _: () = provider.raw_request("evm_setIntervalMining".into(), (0u64,)).await.unwrap();
    let _: () = provider.raw_request("evm_setAutomine".into(), (false,)).await.unwrap();
    if provider.get_block_number().await.unwrap() == open.block {
        let _: serde_json::Value = provider.raw_request("evm_mine".into(), ()).await.unwrap();
    }
    let operators: Vec<_> = net.0.nodes.iter().map(|n| n.operator).collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let (submitter, hash, nonce) = loop {
        assert!(std::time::Instant::now() < deadline, "no resolve reached the pool");
        let content: serde_json::Value =
            provider.raw_request("txpool_content".into(), ()).await.unwrap();
        let found = content["pending"].as_object().and_then(|by_from| {
            by_from.iter().find_map(|(from, txs)| {
                let from: alloy_primitives::Address = from.parse().ok()?;
                let i = operators.iter().position(|o| *o == from)?;
                let tx = txs.as_object()?.values().next()?;
                let nonce = u64::from_str_radix(tx["nonce"].as_str()?.trim_start_matches("0x"), 16);
                Some((i, tx["hash"].as_str()?.parse::<alloy_primitives::B256>().ok()?, nonce.ok()?))
            })
        });
        if let Some(f) = found {
            break f;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let account = operators[submitter];
    assert_eq!(provider.get_transaction_count(account).await.unwrap(), nonce);

    // kill -9 while it is pending, and start again.
    net.0.nodes[submitter].kill();
    net.0.start_node(submitter).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while !net.0.nodes[submitter].log_tail(400).contains("resumed a transaction in flight") {
        assert!(std::time::Instant::now() < deadline, "the restarted node did not resume");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Only now blocks again.
    let _: () = provider.raw_request("evm_setIntervalMining".into(), (1u64,)).await.unwrap();
    let deal = net.0.wait_settled(open.deal_id, SETTLE).await.unwrap();
    assert_eq!(deal.settlement, RELEASED);
    // A few blocks for anything the restarted node might still send.
    let until = provider.get_block_number().await.unwrap() + 5;
    while provider.get_block_number().await.unwrap() < until {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let receipt = provider.get_transaction_receipt(hash).await.unwrap();
    assert!(receipt.is_some_and(|r| r.status()), "the transaction sent before the kill settled it");
    // Every transaction of the submitter's account since the challenge: one
    // `resolve`, the one sent before the kill. (It may also have sent
    // `includeSigners`: a certificate built before its own partial arrived
    // leaves it out, and it includes itself, as any left-out signer does.)
    let mut resolves = Vec::new();
    let head = provider.get_block_number().await.unwrap();
    for n in open.block..=head {
        let block = provider.get_block_by_number(n.into()).full().await.unwrap().unwrap();
        for tx in block.transactions.into_transactions() {
            use alloy_consensus::Transaction;
            use alloy_sol_types::SolCall;
            let input = tx.input();
            if tx.inner.signer() != account {
                continue;
            }
            let selector = input.get(..4).unwrap_or_default();
            if selector == resolvd_node::contracts::IEscrow::resolveCall::SELECTOR {
                resolves.push(*tx.inner.tx_hash());
            } else {
                assert_eq!(
                    selector,
                    resolvd_node::contracts::IEscrow::includeSignersCall::SELECTOR,
                    "the submitter sent something else"
                );
            }
        }
    }
    assert_eq!(resolves, vec![hash], "the restarted node sent a second resolve");
    assert!(provider.get_transaction_count(account).await.unwrap() > nonce);
    assert_eq!(net.0.verdict_logs(open.deal_id).await.unwrap().len(), 1);
}
