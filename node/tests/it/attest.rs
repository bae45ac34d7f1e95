//! Replay attestations end to end: the devnet's four nodes serve its
//! Attestor like an escrow. A request nobody can replay expires and is
//! refunded; the same question requested again (the same request id) is
//! re-opened by every node and attested; the certificate of the answering
//! `resolve` is an ERC-8301 proof `ResolvdProofVerifier` accepts, and a
//! tampered output, another contract's domain or another epoch are refused;
//! the test ERC-8301 workflow proves its stages with the attestations through
//! `onAgentProve`; an equivocation on an attestation is slashed under the
//! Attestor's domain. `resolvd attest request` asks a question from files,
//! and `resolvd attest status|verify` and `resolvd verify` read the answer.

use crate::network::{launch, SETTLE};
use alloy_network::TransactionBuilder;
use alloy_primitives::{keccak256, Address, Bytes, TxKind, B256, U256};
use alloy_provider::Provider;
use alloy_sol_types::{SolCall, SolError, SolEvent, SolValue};
use resolvd_devnet::{send_from, DealKind, Devnet};
use resolvd_node::{
    attestation::{self, ATTESTED},
    chain::Chain,
    config::{Byzantine, FaultConfig},
    contracts::{Deal, IAttestor, IEscrow, IProofVerifier, IRegistry},
};
use resolvd_proto::Canonical;
use std::{process::Command, time::Duration};

alloy_sol_types::sol! {
    /// ERC-8301's reply envelope (contracts/test/erc8301/IAgentWorkflow.sol).
    #[derive(Debug)]
    struct AgentReply {
        bytes32 operationId;
        bytes32 outputHash;
        bytes output;
        uint256 timestamp;
        address replier;
        bytes32[] prevTaskHashes;
        bytes32 workflowRunId;
    }

    /// The test workflow (contracts/test/erc8301/ReplayWorkflow.sol): an
    /// async QUOTE stage, then a sync EXECUTE stage gated on proofs.
    interface IReplayWorkflow {
        event NewAgentTask(bytes32 indexed workflowRunId, uint8 indexed stage, bytes32 indexed taskHash);
        event AgentReplyAnchored(bytes32 indexed workflowRunId, bytes32 indexed replyHash, address indexed replier);
        error ProofRejected(bytes32 replyHash);
        function run(bytes32 inputHash, bytes calldata input, uint256 expiresAt) external returns (bytes32 workflowRunId);
        function result(bytes32 workflowRunId) external view returns (uint8 status, bytes32 finalTaskHash, uint256 completedAt);
        function openTask(bytes32 workflowRunId) external view returns (bytes32);
        function onAgentReply(AgentReply calldata reply) external returns (bytes32 replyHash);
        function onAgentProve(bytes32[] calldata replyHashes, bytes calldata proof) external;
    }
}

/// `Settlement.TimedOut`.
const TIMED_OUT: u8 = 4;

async fn deal_at(net: &Devnet, contract: Address, id: B256) -> Deal {
    net.view(contract, IEscrow::dealCall { dealId: id }).await.unwrap().into()
}

async fn latest_time(net: &Devnet) -> u64 {
    let block = net
        .provider
        .get_block_by_number(alloy_rpc_types_eth::BlockNumberOrTag::Latest)
        .await
        .unwrap()
        .unwrap();
    block.header.timestamp
}

/// `verify` of the verifier: (valid, the reason `checkCertificate` gives).
/// Moves the chain's clock past request `id`'s deadline and times it out
/// (`timeoutRefund`, sent by account 0).
async fn expire(net: &Devnet, attestor: Address, id: B256) {
    let pending = deal_at(net, attestor, id).await;
    let skip = pending.resolveDeadline - latest_time(net).await + 1;
    let _: serde_json::Value =
        net.provider.raw_request("evm_increaseTime".into(), (skip,)).await.unwrap();
    let _: serde_json::Value = net.provider.raw_request("evm_mine".into(), ()).await.unwrap();
    let refund = IEscrow::timeoutRefundCall { dealId: id };
    let to = TxKind::Call(attestor);
    send_from(&net.provider, net.accounts[0], to, refund.abi_encode().into()).await.unwrap();
}

async fn verify(
    net: &Devnet,
    input: B256,
    output: B256,
    attestor: Address,
    proof: Bytes,
) -> (bool, String) {
    let metadata: Bytes = attestor.abi_encode().into();
    let verifier = net.deployment.verifier;
    let call = IProofVerifier::verifyCall {
        inputHash: input,
        outputHash: output,
        metadata,
        proof: proof.clone(),
    };
    let valid = net.view(verifier, call).await.unwrap();
    if proof.is_empty() {
        return (valid, String::new());
    }
    let check = IProofVerifier::checkCertificateCall {
        attestor,
        inputHash: input,
        outputHash: output,
        proof,
    };
    let tx = alloy_rpc_types_eth::TransactionRequest::default()
        .with_to(verifier)
        .with_input(check.abi_encode());
    let reason = match net.provider.call(tx).await {
        Ok(_) => String::new(),
        Err(e) => e
            .as_error_resp()
            .and_then(|p| p.as_revert_data())
            .map(|d| resolvd_node::chain::decode_revert(&d))
            .unwrap_or_else(|| e.to_string()),
    };
    (valid, reason)
}

fn resolvd(args: &[&str]) -> (bool, serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_resolvd")).args(args).output().unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or_default();
    (out.status.success(), json, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_attested_proven_through_erc8301_refunded_when_they_expire_and_equivocation_is_slashed(
) {
    let mut net = launch(|_| {}).await;
    let d = net.0.deployment;
    let requester = net.0.accounts[1];
    let token = d.token;
    let fee = U256::from(net.0.options.resolver_fee);

    // The node's hashes of a question are the Attestor's.
    let honest = net.0.deal_content(DealKind::Honest).await.unwrap();
    let question = honest.question();
    let input = attestation::input_hash(&question);
    let on_chain = IAttestor::inputHashOfCall { question: question.clone() };
    assert_eq!(net.0.view(d.attestor, on_chain).await.unwrap(), input);

    // 1. Nobody holds the witness: no node can replay it, the request
    //    expires and the fee goes back to the requester.
    let credit = async |net: &Devnet| {
        let call = IEscrow::claimableCall { account: requester, token };
        net.view(d.attestor, call).await.unwrap()
    };
    let credit0 = credit(&net.0).await;
    let first = net.0.request_attestation(&honest, &[], 600).await.unwrap();
    assert_eq!(first.input_hash, input);
    let by_contract =
        net.0.view(d.attestor, IAttestor::requestIdOfCall { inputHash: input }).await.unwrap();
    assert_eq!(first.request_id, by_contract);
    let path = format!("/disputes/{}", first.request_id);
    for n in &net.0.nodes {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while n.get(&path).await.is_err() {
            assert!(std::time::Instant::now() < deadline, "node {} never saw the request", n.index);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    for n in &net.0.nodes {
        let v = n.get(&path).await.unwrap();
        assert!(v["own_signature"].is_null(), "node {} signed without the witness: {v}", n.index);
    }
    expire(&net.0, d.attestor, first.request_id).await;
    let expired = deal_at(&net.0, d.attestor, first.request_id).await;
    assert_eq!(expired.settlement, TIMED_OUT);
    assert_eq!(credit(&net.0).await, credit0 + fee, "the fee is refunded");

    // 2. Requested again: the same id, a later deadline. Every node opens
    //    it afresh, and with the witness (at node 0) the committee answers.
    let again = net.0.request_attestation(&honest, &[0], 1_800).await.unwrap();
    assert_eq!(again.request_id, first.request_id);
    let record = net.0.wait_attested(input, SETTLE).await.unwrap();
    assert_eq!(record.outcome, 0, "Reproduced");
    let answered = deal_at(&net.0, d.attestor, again.request_id).await;
    assert_eq!(answered.settlement, ATTESTED);
    assert_eq!(record.epoch, answered.epoch);
    tokio::time::sleep(Duration::from_secs(3)).await;
    for n in &net.0.nodes {
        let v = n.get(&path).await.unwrap();
        assert_eq!(v["phase"], "settled", "node {}: {v}", n.index);
        assert!(!v["own_signature"].is_null(), "node {} did not sign the new round: {v}", n.index);
    }
    let output = attestation::output_hash(record.outcome, record.resultHash, record.traceHash);
    let (recorded, _) = net
        .0
        .view(d.attestor, IAttestor::outputOfCall { inputHash: input })
        .await
        .map(|r| (r.outputHash, r.epoch))
        .unwrap();
    assert_eq!(recorded, output);

    // 3. The certificate of the answering `resolve` is a stateless proof.
    let chain = Chain::connect(&net.0.rpc_url, d.attestor, None).await.unwrap();
    let proof = attestation::proof_from_chain(&chain, again.request_id).await.unwrap().unwrap();
    assert_eq!(attestation::output_of(&proof.commitment), output);
    assert_eq!(
        verify(&net.0, input, output, d.attestor, proof.encode()).await,
        (true, String::new())
    );
    assert!(verify(&net.0, input, output, d.attestor, Bytes::new()).await.0, "recorded");
    let tampered = output ^ B256::with_last_byte(1);
    let (valid, reason) = verify(&net.0, input, tampered, d.attestor, proof.encode()).await;
    assert!(!valid && reason.contains("WrongOutput"), "{reason}");
    assert!(!verify(&net.0, input, tampered, d.attestor, Bytes::new()).await.0);
    // The Escrow is on the same registry, but the certificate is under the
    // Attestor's domain and for its request id.
    let (valid, reason) = verify(&net.0, input, output, d.escrow, proof.encode()).await;
    assert!(!valid && reason.contains("WrongQuestion"), "{reason}");
    let mut other_epoch = proof.clone();
    other_epoch.epoch += 1;
    let (valid, reason) = verify(&net.0, input, output, d.attestor, other_epoch.encode()).await;
    assert!(!valid && reason.contains("WrongEpoch"), "{reason}");

    // The CLI reads and checks the same answer, and `resolvd verify`
    // re-derives it by replaying the public content, with no key.
    let (rpc, attestor) = (net.0.rpc_url.clone(), d.attestor.to_string());
    let api = format!("http://{}", net.0.nodes[0].api);
    let base = ["--rpc-url", rpc.as_str(), "--attestor", attestor.as_str()];
    let input_s = input.to_string();
    let (ok, status, err) =
        resolvd(&[&["attest", "status"][..], &base, &[input_s.as_str(), "--proof"]].concat());
    assert!(ok, "{err}");
    assert_eq!(status["state"], "attested", "{status}");
    assert_eq!(status["outputHash"], output.to_string(), "{status}");
    assert_eq!(status["proof"], proof.encode().to_string(), "{status}");
    let verifier = d.verifier.to_string();
    let verify_args = ["attest", "verify", "--verifier", verifier.as_str()];
    for mode in [&[][..], &["--from-chain"][..]] {
        let (ok, v, err) = resolvd(&[&verify_args[..], &base, &[input_s.as_str()], mode].concat());
        assert!(ok && v["valid"] == true, "{v} {err}");
    }
    let tampered_s = tampered.to_string();
    let (ok, v, _) = resolvd(
        &[
            &verify_args[..],
            &base,
            &[input_s.as_str(), "--from-chain", "--output-hash", &tampered_s],
        ]
        .concat(),
    );
    assert!(!ok && v["valid"] == false, "{v}");
    assert!(v["reason"].as_str().unwrap_or_default().contains("WrongOutput"), "{v}");
    let request_s = again.request_id.to_string();
    let (ok, v, err) =
        resolvd(&["verify", "--rpc-url", &rpc, "--escrow", &attestor, &request_s, "--api", &api]);
    assert!(ok && v["match"] == true, "{v} {err}");

    // 4. Node 3 turns equivocator: the next question is still answered (by
    //    the honest three), and node 3 is slashed under the Attestor's domain.
    net.0.nodes[3].stop();
    net.0.nodes[3].config.fault =
        FaultConfig { byzantine: Some(Byzantine::Equivocate), ..Default::default() };
    net.0.start_node(3).unwrap();
    net.0.nodes[3].wait_healthy(Duration::from_secs(60)).await.unwrap();
    net.0.wait_mesh(Duration::from_secs(120)).await.unwrap();
    let false_claim = net.0.deal_content(DealKind::FalseClaim).await.unwrap();
    // Asked through `resolvd attest request`, from node 0's operator account
    // (given tokens for the fee), the content read from files.
    let operator = net.0.nodes[0].operator;
    let mint = resolvd_node::contracts::IERC20::mintCall { to: operator, amount: fee };
    send_from(&net.0.provider, net.0.accounts[0], TxKind::Call(token), mint.abi_encode().into())
        .await
        .unwrap();
    let witness = false_claim.witness.to_canonical_bytes();
    for n in &net.0.nodes {
        let hash = resolvd_proto::ContentType::content_hash(&false_claim.witness);
        assert_eq!(n.put_content("evm-witness", hash, witness.clone()).await.unwrap(), 201);
    }
    let files = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: Vec<u8>| {
        let path = files.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path.display().to_string()
    };
    let spec = write("spec.bin", false_claim.spec.to_canonical_bytes());
    let anchor = write("anchor.bin", false_claim.anchor.to_canonical_bytes());
    let delivery = write("delivery.bin", false_claim.delivery.to_canonical_bytes());
    let keys = &net.0.nodes[0].config.chain;
    let keystore = keys.account_keystore.clone().unwrap().display().to_string();
    let password = keys.account_password_file.clone().unwrap().display().to_string();
    let fee_s = fee.to_string();
    let (ok, requested, err) = resolvd(
        &[
            &["attest", "request"][..],
            &base,
            &["--spec", &spec, "--anchor", &anchor, "--delivery", &delivery],
            &["--fee", &fee_s, "--window", "1800"],
            &["--account-keystore", &keystore, "--account-password-file", &password],
        ]
        .concat(),
    );
    assert!(ok, "{err}");
    let bad_input = attestation::input_hash(&false_claim.question());
    assert_eq!(requested["inputHash"], bad_input.to_string(), "{requested}");
    let bad = resolvd_devnet::OpenRequest {
        input_hash: bad_input,
        request_id: requested["requestId"].as_str().unwrap().parse().unwrap(),
        block: 0,
    };
    assert_eq!(bad.request_id, attestation::request_id(31_337, d.attestor, bad_input));
    let failed = net.0.wait_attested(bad.input_hash, SETTLE).await.unwrap();
    assert_eq!(failed.outcome, 1, "Failed");
    let separator = net.0.view(d.attestor, IEscrow::domainSeparatorCall {}).await.unwrap();
    let slashed = |index: u64| {
        let call = IRegistry::slashedForCall {
            domainSeparator: separator,
            dealId: bad.request_id,
            index: U256::from(index),
        };
        let net = &net.0;
        async move { net.view(d.registry, call).await.unwrap() }
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !slashed(3).await {
        assert!(std::time::Instant::now() < deadline, "the equivocator was not slashed");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    for honest in 0..3 {
        assert!(!slashed(honest).await, "honest resolver {honest} slashed");
    }

    // 5. An ERC-8301 workflow (the test contract) whose QUOTE task asks the
    //    first question and whose EXECUTE task asks the second advances
    //    through `onAgentProve` with the two attestations: the recorded one,
    //    and the second's certificate after a rejected (tampered) proof.
    let bad_output = attestation::output_hash(failed.outcome, failed.resultHash, failed.traceHash);
    let bad_proof = attestation::proof_from_chain(&chain, bad.request_id).await.unwrap().unwrap();
    let artifact = net.0.options.contracts.join("out/ReplayWorkflow.sol/ReplayWorkflow.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&artifact).unwrap()).unwrap();
    let mut init =
        alloy_primitives::hex::decode(json["bytecode"]["object"].as_str().unwrap()).unwrap();
    init.extend_from_slice(&(d.verifier, Bytes::from(d.attestor.abi_encode())).abi_encode_params());
    let deployer = net.0.accounts[0];
    let created = send_from(&net.0.provider, deployer, TxKind::Create, init.into()).await.unwrap();
    let workflow = created.contract_address.unwrap();
    let send = |call: Vec<u8>| {
        let provider = net.0.provider.clone();
        async move { send_from(&provider, deployer, TxKind::Call(workflow), call.into()).await }
    };
    let task_input = (input, bad.input_hash).abi_encode_params();
    let expires = U256::from(latest_time(&net.0).await + 3_600);
    let run = IReplayWorkflow::runCall {
        inputHash: keccak256(&task_input),
        input: task_input.into(),
        expiresAt: expires,
    };
    let receipt = send(run.abi_encode()).await.unwrap();
    let task = receipt
        .inner
        .logs()
        .iter()
        .find_map(|l| IReplayWorkflow::NewAgentTask::decode_log(&l.inner).ok())
        .unwrap();
    let run_id = task.workflowRunId;
    let reply_to = |task: B256, operation: u8, output: B256, outcome: u8, r: B256, t: B256| {
        let net = &net.0;
        let send = &send;
        async move {
            net.wait_past(net.provider.get_block_number().await.unwrap()).await.unwrap();
            let reply = AgentReply {
                operationId: B256::with_last_byte(operation),
                outputHash: output,
                output: (U256::from(outcome), r, t).abi_encode_params().into(),
                timestamp: U256::from(latest_time(net).await),
                replier: deployer,
                prevTaskHashes: vec![task],
                workflowRunId: run_id,
            };
            let receipt =
                send(IReplayWorkflow::onAgentReplyCall { reply }.abi_encode()).await.unwrap();
            receipt
                .inner
                .logs()
                .iter()
                .find_map(|l| IReplayWorkflow::AgentReplyAnchored::decode_log(&l.inner).ok())
                .unwrap()
                .replyHash
        }
    };
    let quote =
        reply_to(task.taskHash, 1, output, record.outcome, record.resultHash, record.traceHash)
            .await;
    let execute_task = net
        .0
        .view(workflow, IReplayWorkflow::openTaskCall { workflowRunId: run_id })
        .await
        .unwrap();
    assert_ne!(execute_task, task.taskHash, "the async QUOTE gate passed");
    let execute =
        reply_to(execute_task, 2, bad_output, failed.outcome, failed.resultHash, failed.traceHash)
            .await;
    let prove = |reply: B256, proof: Bytes| {
        IReplayWorkflow::onAgentProveCall { replyHashes: vec![reply], proof }.abi_encode()
    };
    send(prove(quote, Bytes::new())).await.unwrap();
    let status = async |net: &Devnet| {
        let call = IReplayWorkflow::resultCall { workflowRunId: run_id };
        net.view(workflow, call).await.unwrap().status
    };
    assert_eq!(status(&net.0).await, 0, "pending until the EXECUTE reply is proven");
    // A griefer's bad proof (the first question's certificate) is rejected
    // and blocks nothing.
    let rejected = send(prove(execute, proof.encode())).await.unwrap_err().to_string();
    let selector = alloy_primitives::hex::encode(IReplayWorkflow::ProofRejected::SELECTOR);
    assert!(rejected.contains(&selector), "{rejected}");
    send(prove(execute, bad_proof.encode())).await.unwrap();
    assert_eq!(status(&net.0).await, 1, "Success");
}

/// A question requested again keeps its request id, and its first request's
/// `Disputed` log stays on chain: a gossiped announcement of the new round
/// is confirmed only with the new log's transaction and block, so a peer
/// cannot seed the round's submitter order with the earlier block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announcement_naming_an_earlier_request_of_the_same_id_is_not_confirmed() {
    use resolvd_node::{chain::ChainEvent, config::Confirmations, dispute::Confirmation};
    use resolvd_proto::wire::DisputeAnnouncement;
    let mut net = launch(|o| o.nodes = 1).await;
    let d = net.0.deployment;
    let honest = net.0.deal_content(DealKind::Honest).await.unwrap();
    let chain = Chain::connect(&net.0.rpc_url, d.attestor, None).await.unwrap();
    let logged = async |block: u64, id: B256| {
        chain
            .events(block, block)
            .await
            .unwrap()
            .into_iter()
            .find_map(|e| match e {
                ChainEvent::Disputed(a) if a.deal_id == id => Some(*a),
                _ => None,
            })
            .expect("its Disputed log")
    };
    // Nobody holds the witness: the first request expires and is refunded.
    let first = net.0.request_attestation(&honest, &[], 600).await.unwrap();
    // (Its order entropy is drawn from the block after it.)
    net.0.wait_past(first.block).await.unwrap();
    let earlier = logged(first.block, first.request_id).await;
    expire(&net.0, d.attestor, first.request_id).await;
    let again = net.0.request_attestation(&honest, &[], 1_800).await.unwrap();
    assert_eq!(again.request_id, first.request_id);
    net.0.wait_past(again.block).await.unwrap();
    let now = logged(again.block, again.request_id).await;
    assert_ne!(now.block_hash, earlier.block_hash);
    let confirm = async |a: DisputeAnnouncement| {
        chain.confirm_announcement(&a, Confirmations::Blocks(0)).await.unwrap()
    };
    assert_eq!(confirm(now.clone()).await, Confirmation::Disputed);
    let stale = DisputeAnnouncement {
        tx_hash: earlier.tx_hash,
        block_number: earlier.block_number,
        block_hash: earlier.block_hash,
        order_entropy: earlier.order_entropy,
        ..now
    };
    assert_eq!(confirm(stale).await, Confirmation::Misplaced);
    let _ = &mut net;
}
