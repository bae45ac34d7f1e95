// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {AttestationHash, Question} from "../src/libraries/AttestationHash.sol";
import {Outcome, VerdictCommitment} from "../src/libraries/VerdictHash.sol";
import {AgentReply, AgentTask, RunStatus} from "./erc8301/IAgentWorkflow.sol";
import {ReplayWorkflow} from "./erc8301/ReplayWorkflow.sol";
import {AttestorBase} from "./utils/AttestorBase.sol";

/// @notice An ERC-8301 workflow (test/erc8301/ReplayWorkflow.sol: an async QUOTE stage, a sync
///         terminal EXECUTE stage) whose agent replies are proven by resolvd attestations
///         through ResolvdProofVerifier: the QUOTE reply by the recorded attestation (empty
///         proof), the EXECUTE reply by a certificate (stateless), both made here by a 4-member
///         committee with real BLS keys.
contract Erc8301WorkflowTest is AttestorBase {
    address internal constant AGENT = address(uint160(0xa6e47));
    address internal constant ANYONE = address(uint160(0xa11));

    ReplayWorkflow internal workflow;
    Question internal quote;
    Question internal execute;
    bytes32 internal quoteOutput;
    bytes32 internal executeOutput;
    /// @dev Certificate of the EXECUTE question (never submitted to the attestor).
    bytes internal executeProof;
    bytes32 internal runId;

    function setUp() public {
        _setUpAttestor();
        quote = _question(1);
        execute = _question(2);
        _request(quote, FEE);
        _request(execute, FEE);
        VerdictCommitment memory q = _commitment(quote, Outcome.Reproduced);
        _resolve(q, ALL); // the QUOTE answer is recorded
        quoteOutput = AttestationHash.outputHash(q);
        VerdictCommitment memory e = _commitment(execute, Outcome.Reproduced);
        executeOutput = AttestationHash.outputHash(e);
        executeProof = _proof(e, 1, 0x7, attestor.domainSeparator());
        workflow = new ReplayWorkflow(verifier, _metadata());
        bytes memory input =
            abi.encode(AttestationHash.inputHash(quote), AttestationHash.inputHash(execute));
        runId = workflow.run(keccak256(input), input, block.timestamp + 1 days);
    }

    function _reply(bytes32 task, bytes32 outputHash, bytes32 operationId)
        internal
        returns (bytes32)
    {
        vm.warp(block.timestamp + 1);
        bytes32[] memory prev = new bytes32[](1);
        prev[0] = task;
        AgentReply memory r = AgentReply({
            operationId: operationId,
            outputHash: outputHash,
            output: "",
            timestamp: block.timestamp,
            replier: AGENT,
            prevTaskHashes: prev,
            workflowRunId: runId
        });
        vm.prank(AGENT);
        return workflow.onAgentReply(r);
    }

    function _prove(bytes32 replyHash, bytes memory proof) internal {
        bytes32[] memory hashes = new bytes32[](1);
        hashes[0] = replyHash;
        vm.prank(ANYONE);
        workflow.onAgentProve(hashes, proof);
    }

    function _proven(bytes32 replyHash) internal view returns (bool proven) {
        (,, proven,) = workflow.getAgentReply(replyHash);
    }

    function _taskProven(bytes32 taskHash) internal view returns (bool proven) {
        (, proven) = workflow.getAgentTask(taskHash);
    }

    /// @notice The async stage advances on the reply, before its proof; the proof (the recorded
    ///         attestation, empty bytes) later marks the reply and the next task proven.
    function testAsyncStageAdvancesOnTheReplyAndIsProvenLater() public {
        bytes32 t0 = workflow.openTask(runId);
        (AgentTask memory task0, bool proven0) = workflow.getAgentTask(t0);
        require(task0.inputHash == AttestationHash.inputHash(quote) && proven0, "T0");
        bytes32 r0 = _reply(t0, quoteOutput, "quote");
        require(_reply(t0, quoteOutput, "quote") == r0, "a retry resolves to R0");
        bytes32 t1 = workflow.openTask(runId);
        require(t1 != t0, "advanced without a proof");
        (AgentTask memory task1,) = workflow.getAgentTask(t1);
        require(task1.stage == workflow.EXECUTE(), "EXECUTE");
        require(task1.inputHash == AttestationHash.inputHash(execute), "T1 input");
        require(!_taskProven(t1) && !_proven(r0), "not proven yet");
        _prove(r0, "");
        require(_proven(r0) && _taskProven(t1), "proven by the record");
        (RunStatus status,,) = workflow.result(runId);
        require(status == RunStatus.Pending, "terminal stage still open");
    }

    /// @notice The sync terminal stage advances only through onAgentProve: the EXECUTE reply
    ///         waits, its certificate proves it, and the run completes with a final task.
    function testSyncStageAdvancesThroughOnAgentProve() public {
        bytes32 r0 = _reply(workflow.openTask(runId), quoteOutput, "quote");
        _prove(r0, "");
        bytes32 t1 = workflow.openTask(runId);
        bytes32 r1 = _reply(t1, executeOutput, "execute");
        (RunStatus status,,) = workflow.result(runId);
        require(status == RunStatus.Pending && workflow.openTask(runId) == t1, "waits (sync)");
        _prove(r1, executeProof);
        bytes32 finalTask;
        uint256 completedAt;
        (status, finalTask, completedAt) = workflow.result(runId);
        require(status == RunStatus.Success && completedAt == block.timestamp, "completed");
        (AgentTask memory f, bool proven) = workflow.getAgentTask(finalTask);
        require(proven && f.stage == workflow.DONE() && f.inputHash == 0, "final task");
        require(f.prevReplyHashes.length == 1 && f.prevReplyHashes[0] == r1, "final <- R1");
        bytes32[] memory again = new bytes32[](1);
        again[0] = r1;
        vm.expectRevert(abi.encodeWithSelector(ReplayWorkflow.RunNotPending.selector, runId));
        workflow.onAgentProve(again, executeProof);
    }

    /// @notice The sync gate needs the upstream chain proven: the EXECUTE reply proven first
    ///         leaves the run open; the QUOTE proof then lets the gate pass.
    function testSyncGateWaitsForTheUpstreamProof() public {
        bytes32 r0 = _reply(workflow.openTask(runId), quoteOutput, "quote");
        bytes32 r1 = _reply(workflow.openTask(runId), executeOutput, "execute");
        _prove(r1, executeProof);
        (RunStatus status,,) = workflow.result(runId);
        require(_proven(r1) && status == RunStatus.Pending, "upstream unproven: open");
        _prove(r0, "");
        (status,,) = workflow.result(runId);
        require(status == RunStatus.Success, "completed by the upstream proof");
    }

    /// @notice The seed's griefing rule: anyone front-running with a bad proof (garbage, the
    ///         other question's certificate, a certificate of a non-quorum) makes the call
    ///         revert and changes nothing; the valid proof still succeeds afterwards.
    function testAFailedProofDoesNotBlockALaterValidOne() public {
        bytes32 r0 = _reply(workflow.openTask(runId), quoteOutput, "quote");
        bytes32 r1 = _reply(workflow.openTask(runId), executeOutput, "execute");
        _prove(r0, "");
        VerdictCommitment memory e = _commitment(execute, Outcome.Reproduced);
        bytes[3] memory bad = [
            bytes(hex"deadbeef"),
            _proof(_commitment(quote, Outcome.Reproduced), 1, ALL, attestor.domainSeparator()),
            _proof(e, 1, 0x3, attestor.domainSeparator())
        ];
        for (uint256 i; i < bad.length; ++i) {
            bytes32[] memory hashes = new bytes32[](1);
            hashes[0] = r1;
            vm.expectRevert(abi.encodeWithSelector(ReplayWorkflow.ProofRejected.selector, r1));
            workflow.onAgentProve(hashes, bad[i]);
            require(!_proven(r1), "a failed proof changes nothing");
        }
        _prove(r1, executeProof);
        (RunStatus status,,) = workflow.result(runId);
        require(_proven(r1) && status == RunStatus.Success, "the valid proof succeeds");
    }

    /// @notice A reply whose output is not the certified one is never proven (neither by the
    ///         certificate nor by the record), and the open stage still accepts the right one.
    function testAWrongReplyIsNeverProven() public {
        bytes32 r0 = _reply(workflow.openTask(runId), quoteOutput, "quote");
        _prove(r0, "");
        bytes32 t1 = workflow.openTask(runId);
        VerdictCommitment memory e = _commitment(execute, Outcome.Reproduced);
        bytes32 claimed = AttestationHash.outputHash(Outcome.Failed, e.resultHash, e.traceHash);
        bytes32 wrong = _reply(t1, claimed, "wrong");
        bytes32[] memory hashes = new bytes32[](1);
        hashes[0] = wrong;
        vm.expectRevert(abi.encodeWithSelector(ReplayWorkflow.ProofRejected.selector, wrong));
        workflow.onAgentProve(hashes, executeProof);
        vm.expectRevert(abi.encodeWithSelector(ReplayWorkflow.ProofRejected.selector, wrong));
        workflow.onAgentProve(hashes, "");
        bytes32 right = _reply(t1, executeOutput, "right");
        _prove(right, executeProof);
        (RunStatus status,,) = workflow.result(runId);
        require(status == RunStatus.Success, "the right reply completes the run");
    }
}
