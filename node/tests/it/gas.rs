//! Gas headroom on a real anvil: a transaction estimated on one state and
//! mined after another transaction of the same block that makes it dearer
//! (a balance written from zero again) runs out of gas at its bare estimate
//! and succeeds with [`with_gas_headroom`]. The likely cause of a chaos run's
//! `fund` reverting without a reason in CI: the dispute before it was
//! resolved in the same block and emptied the escrow's token balance.

use crate::network::workspace;
use alloy_network::TransactionBuilder;
use alloy_primitives::{Address, TxKind, U256};
use alloy_provider::{Provider, ProviderBuilder};
use alloy_rpc_types_eth::TransactionRequest;
use alloy_sol_types::SolCall;
use resolvd_devnet::{free_port, send_from, wait_for_chain, Anvil, Artifacts, DevnetOptions};
use resolvd_node::{chain::with_gas_headroom, contracts::IERC20};
use std::path::PathBuf;

fn transfer(
    from: Address,
    token: Address,
    to: Address,
    amount: u64,
    tip_gwei: u128,
) -> TransactionRequest {
    TransactionRequest::default()
        .with_from(from)
        .with_to(token)
        .with_input(IERC20::transferCall { to, amount: U256::from(amount) }.abi_encode())
        .with_max_fee_per_gas(100_000_000_000)
        .with_max_priority_fee_per_gas(tip_gwei * 1_000_000_000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_made_dearer_within_its_block_still_succeeds_with_headroom() {
    let options = DevnetOptions::for_workspace(&workspace(), PathBuf::new(), PathBuf::new());
    let dir = tempfile::tempdir().unwrap();
    let anvil =
        Anvil::start(&options.anvil, free_port().unwrap(), 1, 1, &dir.path().join("anvil.log"))
            .unwrap();
    let provider = ProviderBuilder::new().connect_http(anvil.url.parse().unwrap()).erased();
    wait_for_chain(&provider, &anvil.url).await.unwrap();
    let a = provider.get_accounts().await.unwrap();
    let artifacts = Artifacts::load(&options.contracts).unwrap();
    let token = send_from(&provider, a[0], TxKind::Create, artifacts.token.clone())
        .await
        .unwrap()
        .contract_address
        .unwrap();
    for who in [a[1], a[2], a[4]] {
        let mint = IERC20::mintCall { to: who, amount: U256::from(1_000u64) };
        send_from(&provider, a[0], TxKind::Call(token), mint.abi_encode().into()).await.unwrap();
    }

    // From here blocks are mined by hand.
    let _: () = provider.raw_request("evm_setIntervalMining".into(), (0u64,)).await.unwrap();
    let _: () = provider.raw_request("evm_setAutomine".into(), (false,)).await.unwrap();
    // Estimated while a[1] holds tokens: writing its balance is cheap.
    let exact = {
        let tx = transfer(a[2], token, a[1], 1, 2);
        let gas = provider.estimate_gas(tx.clone()).await.unwrap();
        tx.with_gas_limit(gas)
    };
    let padded = with_gas_headroom(&provider, transfer(a[4], token, a[1], 1, 1)).await.unwrap();
    // Mined first (highest tip): a[1] sends everything away, its balance becomes zero.
    let drain = transfer(a[1], token, a[3], 1_000, 3).with_gas_limit(200_000);
    let mut hashes = Vec::new();
    for tx in [drain, exact, padded] {
        hashes.push(*provider.send_transaction(tx).await.unwrap().tx_hash());
    }
    let _: String = provider.raw_request("evm_mine".into(), ()).await.unwrap();
    let mut receipts = Vec::new();
    for h in hashes {
        receipts.push(provider.get_transaction_receipt(h).await.unwrap().expect("mined"));
    }
    let block = receipts[0].block_number;
    assert!(receipts.iter().all(|r| r.block_number == block), "one block");
    assert!(receipts[0].status(), "the drain succeeds");
    assert!(
        !receipts[1].status(),
        "at its bare estimate the transfer runs out of gas once the balance is zero again"
    );
    assert!(receipts[2].status(), "with headroom it succeeds");
    assert!(receipts[2].gas_used > receipts[1].gas_used, "and it did cost more than estimated");
    let balance = IERC20::balanceOfCall { who: a[1] };
    let out = provider
        .call(TransactionRequest::default().with_to(token).with_input(balance.abi_encode()))
        .await
        .unwrap();
    assert_eq!(U256::from_be_slice(&out), U256::from(1u64));
}
