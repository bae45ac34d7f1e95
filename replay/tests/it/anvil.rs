//! End to end against a real anvil: deploy an ERC-20, freeze the anchor, build
//! the witness over RPC, stop the node, replay offline.

use crate::common::*;
use alloy_primitives::{Address, Bytes, TxKind, U256};
use alloy_provider::{Provider, ProviderBuilder};
use alloy_rpc_types_eth::{TransactionInput, TransactionRequest};
use resolvd_proto::{EvmCallPlanV1, EvmSpecId, NoncePolicy, ReexecVerdict};
use resolvd_replay::{rpc, EvmBackend, BACKEND_ID, BACKEND_VERSION_HASH};
use std::{
    net::TcpListener,
    process::{Child, Command, Stdio},
    time::Duration,
};

/// An anvil child process on a free 127.0.0.1 port, killed on drop.
struct Anvil {
    child: Child,
    url: String,
}

impl Anvil {
    fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        // $ANVIL, else the bootstrap's copy in the workspace, else PATH.
        let local = concat!(env!("CARGO_MANIFEST_DIR"), "/../.tools/bin/anvil");
        let bin = std::env::var("ANVIL").unwrap_or_else(|_| {
            if std::path::Path::new(local).exists() {
                local.into()
            } else {
                "anvil".into()
            }
        });
        let child = Command::new(&bin)
            .args(["--hardfork", "prague", "--host", "127.0.0.1", "--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start `{bin}` ({e}): run deploy/toolchain/bootstrap.sh and put .tools/bin on PATH (make test does)")
            });
        Self { child, url: format!("http://127.0.0.1:{port}") }
    }
}

impl Drop for Anvil {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn token_init() -> Bytes {
    alloy_primitives::hex::decode(include_str!("../fixtures/fixture_token_init.hex").trim())
        .unwrap()
        .into()
}

#[tokio::test(flavor = "multi_thread")]
async fn witness_over_rpc_replays_offline() {
    let anvil = Anvil::start();
    let provider = ProviderBuilder::new().connect_http(anvil.url.parse().unwrap());
    let mut ready = false;
    for _ in 0..100 {
        if provider.get_chain_id().await.is_ok() {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ready, "anvil did not answer on {}", anvil.url);

    let deployer = provider.get_accounts().await.unwrap()[0];
    let deploy = TransactionRequest {
        from: Some(deployer),
        to: Some(TxKind::Create),
        input: TransactionInput::new(token_init()),
        ..Default::default()
    };
    let receipt = provider.send_transaction(deploy).await.unwrap().get_receipt().await.unwrap();
    let token = receipt.contract_address.expect("deployed");
    // Two more blocks, so the anchor has two ancestors to link.
    for _ in 0..2 {
        let tx = TransactionRequest {
            from: Some(deployer),
            to: Some(TxKind::Call(Address::repeat_byte(0xd0))),
            value: Some(U256::from(1u64)),
            ..Default::default()
        };
        provider.send_transaction(tx).await.unwrap().get_receipt().await.unwrap();
    }
    let number = provider.get_block_number().await.unwrap();

    let anchor = rpc::freeze_anchor(&provider, number, EvmSpecId::Prague).await.unwrap();
    let recipient = Address::repeat_byte(0xbe);
    let plan = |amount: U256| EvmCallPlanV1 {
        chain_id: anchor.chain_id,
        caller: deployer,
        target: token,
        calldata: transfer_calldata(recipient, amount),
        value: U256::ZERO,
        gas_limit: 200_000,
        nonce_policy: NoncePolicy::Prestate,
    };
    let honest = plan(U256::from(250u64));
    let overdraw = plan(U256::from(10u64).pow(U256::from(30u64)));
    let slots = [(token, balance_slot(recipient))];
    let honest_witness = rpc::build_witness(&provider, &anchor, &honest, &slots, 2).await.unwrap();
    let overdraw_witness =
        rpc::build_witness(&provider, &anchor, &overdraw, &slots, 0).await.unwrap();
    assert_eq!(honest_witness.ancestors.len(), 2);

    // A wrong anchor hash is refused by the builder.
    let mut forged = anchor.clone();
    forged.block_hash = alloy_primitives::keccak256("forged");
    assert!(matches!(
        rpc::build_witness(&provider, &forged, &honest, &slots, 0).await,
        Err(rpc::BuildError::BlockHashMismatch { .. })
    ));

    drop(anvil); // everything below is offline

    let request = |plan: &EvmCallPlanV1, witness, claimed: Bytes| {
        Request {
            anchor: anchor.clone(),
            plan,
            claimed: &claimed,
            predicate: &credited(token, recipient, 250),
            witness,
            backend_id: *BACKEND_ID,
            accepted_version: *BACKEND_VERSION_HASH,
        }
        .build()
    };
    let env = EvmBackend.verdict(&request(&honest, &honest_witness, word(1))).unwrap();
    assert_eq!(env.record.outcome, ReexecVerdict::Reproduced);
    assert_eq!(env.record.prestate_root, anchor.state_root);
    let env = EvmBackend.verdict(&request(&overdraw, &overdraw_witness, Bytes::new())).unwrap();
    assert_eq!(env.record.outcome, ReexecVerdict::Failed);
}
