//! Doppelgänger protection: a second process started with a BLS key that is
//! already running elsewhere listens before it signs, sees a partial of its
//! own key that its data dir did not make, refuses to sign and exits
//! non-zero. (Without the check it would start signing after the wait.)

use crate::network::{launch, RELEASED, SETTLE};
use resolvd_devnet::{free_port, DealKind};
use std::{process::Command, time::Duration};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_with_the_same_key_refuses_to_sign_and_exits() {
    let mut net = launch(|_| {}).await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = net.0.nodes[3].config.clone();
    config.data_dir = dir.path().join("data");
    config.p2p.listen = format!("/ip4/127.0.0.1/tcp/{}", free_port().unwrap());
    config.api.listen = format!("127.0.0.1:{}", free_port().unwrap()).parse().unwrap();
    config.chain.account_keystore = None;
    config.chain.account_password_file = None;
    config.keys.doppelganger_wait_secs = 120;
    let path = dir.path().join("node.toml");
    std::fs::write(&path, toml::to_string(&config).unwrap()).unwrap();
    let log_path = dir.path().join("node.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut twin = Command::new(env!("CARGO_BIN_EXE_resolvd"))
        .args(["run", "--config"])
        .arg(&path)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    // Let it join the mesh, then the original signs a dispute.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let content = net.0.deal_content(DealKind::Honest).await.unwrap();
    let open = net.0.open_dispute(&content, &[0, 1, 2, 3]).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(100);
    let status = loop {
        if let Some(s) = twin.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = twin.kill();
            panic!("the twin kept running:\n{}", std::fs::read_to_string(&log_path).unwrap());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(!status.success(), "exited successfully:\n{log}");
    assert!(log.contains("DOPPELGANGER"), "{log}");
    assert!(!log.contains("pipeline: signed"), "the twin signed:\n{log}");
    let store = resolvd_node::store::Store::open(&config.data_dir.join("db")).unwrap();
    assert!(store.protection_records().unwrap().is_empty(), "the twin recorded a signature");
    // The original is unaffected.
    assert_eq!(net.0.wait_settled(open.deal_id, SETTLE).await.unwrap().settlement, RELEASED);
}
