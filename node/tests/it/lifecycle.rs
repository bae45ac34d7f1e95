//! The operator's life cycle after `register`, as processes on anvil:
//! `resolvd resolver` shows the record, `exit` starts the unbonding delay,
//! `withdraw` refuses until it is over (and before any exit), then returns
//! the bond; every refusal is a decoded revert and a non-zero exit.

use crate::network::{workspace, Net};
use alloy_provider::Provider;
use resolvd_devnet::{Devnet, DevnetOptions, BOND};
use std::{path::PathBuf, process::Command};

fn run(args: &[&str]) -> (bool, serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_resolvd")).args(args).output().unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.success(), json, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The bond token (the devnet's one token) held by `who`.
async fn bond_balance(net: &Devnet, who: alloy_primitives::Address) -> alloy_primitives::U256 {
    let call = resolvd_node::contracts::IERC20::balanceOfCall { who };
    net.view(net.deployment.token, call).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_then_withdraw_after_the_unbonding_delay() {
    let options = DevnetOptions::for_workspace(
        &workspace(),
        PathBuf::from(env!("CARGO_BIN_EXE_resolvd")),
        std::env::temp_dir().join("resolvd-it"),
    );
    let net = Net(Devnet::provision(options).await.expect("devnet"));
    let (rpc, escrow) = (net.0.rpc_url.clone(), net.0.deployment.escrow.to_string());
    let node = &net.0.nodes[1];
    let keystore = node.config.chain.account_keystore.clone().unwrap();
    let password = node.config.chain.account_password_file.clone().unwrap();
    let chain = ["--rpc-url", &rpc, "--escrow", &escrow];
    let account = [
        "--account-keystore",
        keystore.to_str().unwrap(),
        "--account-password-file",
        password.to_str().unwrap(),
    ];
    let with_account = |cmd: &'static str| [&[cmd][..], &chain[..], &account[..]].concat();

    let (ok, shown, err) = run(&[&["resolver", "1"][..], &chain[..]].concat());
    assert!(ok, "{err}");
    assert_eq!(shown["status"], "active", "{shown}");
    assert_eq!(shown["bond"], BOND.to_string());
    let operator = node.operator.to_string();
    let (ok, by_operator, _) =
        run(&[&["resolver", "--operator", &operator][..], &chain[..]].concat());
    assert!(ok);
    assert_eq!(by_operator["resolver"], 1);

    // Not exiting yet: nothing to withdraw.
    let (ok, _, err) = run(&with_account("withdraw"));
    assert!(!ok && err.contains("NotExiting"), "{err}");

    let (ok, exited, err) = run(&with_account("exit"));
    assert!(ok, "{err}");
    assert_eq!(exited["status"], "exiting", "{exited}");
    let at: u64 = exited["withdrawableAt"].as_str().unwrap().parse().unwrap();
    let (ok, _, err) = run(&with_account("exit"));
    assert!(!ok && err.contains("AlreadyExiting"), "{err}");
    let (ok, _, err) = run(&with_account("withdraw"));
    assert!(!ok && err.contains("UnbondingNotOver"), "too early: {err}");

    // Time travel past the delay.
    let _: () =
        net.0.provider.raw_request("evm_setNextBlockTimestamp".into(), (at + 1,)).await.unwrap();
    let _: String = net.0.provider.raw_request("evm_mine".into(), ()).await.unwrap();
    let before = bond_balance(&net.0, node.operator).await;
    let (ok, withdrawn, err) = run(&with_account("withdraw"));
    assert!(ok, "{err}");
    assert_eq!(withdrawn["status"], "withdrawn", "{withdrawn}");
    assert_eq!(withdrawn["bond"], "0");
    let after = bond_balance(&net.0, node.operator).await;
    assert_eq!(after - before, alloy_primitives::U256::from(BOND), "the bond came back");
    let (ok, _, err) = run(&with_account("withdraw"));
    assert!(!ok && err.contains("NothingToWithdraw"), "{err}");
}

/// A slashed resolver cannot exit or withdraw (its bond is gone), and
/// `resolvd resolver` says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slashed_resolver_cannot_exit_or_withdraw() {
    use crate::network::{launch, RELEASED, SETTLE};
    use resolvd_devnet::DealKind;
    use resolvd_node::{
        chain::Chain,
        config::{Byzantine, FaultConfig},
    };
    let mut net = launch(|o| {
        o.faults =
            vec![(3, FaultConfig { byzantine: Some(Byzantine::Equivocate), ..Default::default() })];
    })
    .await;
    let content = net.0.deal_content(DealKind::Honest).await.unwrap();
    let open = net.0.open_dispute(&content, &[0, 1, 2, 3]).await.unwrap();
    assert_eq!(net.0.wait_settled(open.deal_id, SETTLE).await.unwrap().settlement, RELEASED);
    let chain = Chain::connect(&net.0.rpc_url, net.0.deployment.escrow, None).await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !chain.is_slashed(3).await.unwrap() {
        assert!(std::time::Instant::now() < deadline, "the equivocator was not slashed");
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let (rpc, escrow) = (net.0.rpc_url.clone(), net.0.deployment.escrow.to_string());
    let node = &net.0.nodes[3];
    let keystore = node.config.chain.account_keystore.clone().unwrap();
    let password = node.config.chain.account_password_file.clone().unwrap();
    let chain_args = ["--rpc-url", &rpc, "--escrow", &escrow];
    let account = [
        "--account-keystore",
        keystore.to_str().unwrap(),
        "--account-password-file",
        password.to_str().unwrap(),
    ];
    let (ok, shown, err) = run(&[&["resolver", "3"][..], &chain_args[..]].concat());
    assert!(ok, "{err}");
    assert_eq!(shown["status"], "slashed", "{shown}");
    assert_eq!(shown["bond"], "0");
    for cmd in ["exit", "withdraw"] {
        let (ok, _, err) = run(&[&[cmd][..], &chain_args[..], &account[..]].concat());
        assert!(!ok, "{cmd} succeeded for a slashed resolver");
        assert!(err.contains("NothingToWithdraw") || err.contains("NotExiting"), "{cmd}: {err}");
    }
}
