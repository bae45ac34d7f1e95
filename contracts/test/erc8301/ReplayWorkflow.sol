// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {IProofVerifier} from "../../src/interfaces/IProofVerifier.sol";
import {AgentReply, AgentTask, IAgentWorkflow, RunStatus} from "./IAgentWorkflow.sol";

/// @notice A minimal ERC-8301 workflow (static FSM, two stages) whose agent replies are proven
///         by resolvd replay attestations through an IProofVerifier (ResolvdProofVerifier):
///         - QUOTE (async): the first reply to the task passes the gate at once and the FSM
///           moves on; its proof may come later and marks it proven (and the next task).
///         - EXECUTE (sync, terminal): a reply waits; the gate passes on the first proven
///           reply whose upstream task is proven, and the run completes.
///         `run`'s input is `abi.encode(quoteInputHash, executeInputHash)`: the two tasks'
///         input hashes, each an attestation question's `inputHash` (AttestationHash), so the
///         proof statement of a reply is exactly "this question's certified output".
///         A failed `onAgentProve` reverts and changes nothing (the seed's griefing rule: a
///         later valid proof for the same reply still succeeds). Test code only.
contract ReplayWorkflow is IAgentWorkflow {
    uint8 public constant QUOTE = 0;
    uint8 public constant EXECUTE = 1;
    uint8 public constant DONE = type(uint8).max;

    IProofVerifier public immutable verifier;
    /// @notice Deployment-time verifier metadata (`abi.encode(attestor)`).
    bytes public metadata;

    struct Run {
        RunStatus status;
        uint8 stage;
        uint256 taskSeq;
        uint256 expiresAt;
        bytes32 executeInput;
        /// @dev The task of the current stage (the only one accepting replies).
        bytes32 openTask;
        /// @dev The first proven reply to the EXECUTE task.
        bytes32 candidate;
        bytes32 finalTaskHash;
        uint256 completedAt;
    }

    uint256 private _runNonce;
    bool private _locked;
    mapping(bytes32 runId => Run) internal _runs;
    mapping(bytes32 taskHash => AgentTask) internal _tasks;
    /// @notice block.timestamp at a task's emission (0: unknown task). Written only here.
    mapping(bytes32 taskHash => uint256) public taskAnchorTime;
    mapping(bytes32 taskHash => bool) internal _taskProven;
    mapping(bytes32 replyHash => AgentReply) internal _replies;
    mapping(bytes32 replyHash => bool) internal _replyProven;
    /// @dev The task that lists a reply in its prevReplyHashes (proven-status propagation).
    mapping(bytes32 replyHash => bytes32 taskHash) internal _downstream;
    mapping(bytes32 operationKey => bytes32) internal _operationDigest;
    mapping(bytes32 operationKey => bytes32) internal _operationReply;

    error Reentrant();
    error InputMismatch();
    error BadExpiry();
    error NotReplier(address replier, address sender);
    error ZeroOperationId();
    error OperationConflict(bytes32 operationKey);
    error NoTasks();
    error UnknownTask(bytes32 taskHash);
    error TaskNotEligible(bytes32 taskHash);
    error TaskExpired(bytes32 taskHash);
    error BadTimestamp(uint256 timestamp);
    error RunNotPending(bytes32 workflowRunId);
    error EmptyProof();
    error UnknownReply(bytes32 replyHash);
    error ProofRejected(bytes32 replyHash);

    modifier nonReentrant() {
        if (_locked) revert Reentrant();
        _locked = true;
        _;
        _locked = false;
    }

    constructor(IProofVerifier verifier_, bytes memory metadata_) {
        verifier = verifier_;
        metadata = metadata_;
    }

    // ------------------------------------------------------------------ IAgentWorkflow

    function run(bytes32 inputHash, bytes calldata input, uint256 expiresAt)
        external
        nonReentrant
        returns (bytes32 workflowRunId)
    {
        if (keccak256(input) != inputHash || input.length != 64) {
            revert InputMismatch();
        }
        if (expiresAt <= block.timestamp) revert BadExpiry();
        (bytes32 quoteInput, bytes32 executeInput) = abi.decode(input, (bytes32, bytes32));
        workflowRunId = keccak256(abi.encode(msg.sender, block.number, _runNonce++));
        Run storage r = _runs[workflowRunId];
        r.expiresAt = expiresAt;
        r.executeInput = executeInput;
        r.stage = QUOTE;
        r.openTask = _dispatch(workflowRunId, r, QUOTE, quoteInput, new bytes32[](0));
    }

    function result(bytes32 workflowRunId)
        external
        view
        returns (RunStatus status, bytes32 finalTaskHash, uint256 completedAt)
    {
        Run storage r = _runs[workflowRunId];
        return (r.status, r.finalTaskHash, r.completedAt);
    }

    function getAgentTask(bytes32 taskHash)
        public
        view
        returns (AgentTask memory task, bool proven)
    {
        if (taskAnchorTime[taskHash] == 0) {
            revert UnknownTask(taskHash);
        }
        return (_tasks[taskHash], _taskProven[taskHash]);
    }

    function getAgentReply(bytes32 replyHash)
        external
        view
        returns (AgentReply memory reply, address, bool proven, bytes32)
    {
        reply = _replies[replyHash];
        if (reply.replier == address(0)) revert UnknownReply(replyHash);
        return (reply, address(verifier), _replyProven[replyHash], bytes32(0));
    }

    function getReplyHashByOperation(bytes32 workflowRunId, address replier, bytes32 operationId)
        external
        view
        returns (bytes32)
    {
        return _operationReply[keccak256(abi.encode(workflowRunId, replier, operationId))];
    }

    function onAgentReply(AgentReply calldata reply)
        external
        nonReentrant
        returns (bytes32 replyHash)
    {
        if (reply.replier != msg.sender) revert NotReplier(reply.replier, msg.sender);
        if (reply.operationId == 0) revert ZeroOperationId();
        bytes32 runId = reply.workflowRunId;
        bytes32 key = keccak256(abi.encode(runId, reply.replier, reply.operationId));
        bytes32 prevHash = keccak256(abi.encodePacked(reply.prevTaskHashes));
        bytes32 digest = keccak256(abi.encode(reply.outputHash, reply.replier, prevHash, runId));
        bytes32 bound = _operationReply[key];
        if (bound != 0) {
            if (_operationDigest[key] != digest) revert OperationConflict(key);
            return bound; // a logical retry: no effect
        }
        Run storage r = _runs[runId];
        _checkEligible(r, reply, runId);
        replyHash = keccak256(
            abi.encode(
                reply.operationId, reply.outputHash, reply.timestamp, reply.replier, prevHash, runId
            )
        );
        _operationDigest[key] = digest;
        _operationReply[key] = replyHash;
        _store(replyHash, reply);
        emit AgentReplyAnchored(runId, replyHash, msg.sender);
        if (r.stage == QUOTE) {
            // Async gate: the first reply passes, the FSM moves on before any proof.
            bytes32[] memory prev = new bytes32[](1);
            prev[0] = replyHash;
            r.stage = EXECUTE;
            r.openTask = _dispatch(runId, r, EXECUTE, r.executeInput, prev);
        }
        // EXECUTE is sync: the gate waits for onAgentProve.
    }

    function onAgentProve(bytes32[] calldata replyHashes, bytes calldata proof)
        external
        nonReentrant
    {
        if (replyHashes.length == 0) revert EmptyProof();
        for (uint256 i; i < replyHashes.length; ++i) {
            bytes32 replyHash = replyHashes[i];
            AgentReply storage reply = _replies[replyHash];
            if (reply.replier == address(0)) revert UnknownReply(replyHash);
            bytes32 runId = reply.workflowRunId;
            Run storage r = _runs[runId];
            if (r.status != RunStatus.Pending) revert RunNotPending(runId);
            if (_replyProven[replyHash]) continue; // never verified twice
            // The input is derived from the stored task, never from the caller.
            AgentTask storage task = _tasks[reply.prevTaskHashes[0]];
            if (!verifier.verify(task.inputHash, reply.outputHash, metadata, proof)) {
                revert ProofRejected(replyHash);
            }
            _replyProven[replyHash] = true;
            bytes32 next = _downstream[replyHash];
            if (next != 0) _taskProven[next] = _allProven(_tasks[next].prevReplyHashes);
            if (task.stage == EXECUTE && r.candidate == 0) r.candidate = replyHash;
            if (r.stage == EXECUTE) _syncGate(runId, r);
        }
    }

    /// @notice The task currently accepting replies in a run.
    function openTask(bytes32 workflowRunId) external view returns (bytes32) {
        return _runs[workflowRunId].openTask;
    }

    // ------------------------------------------------------------------ internals

    function _checkEligible(Run storage r, AgentReply calldata reply, bytes32 runId) internal view {
        if (reply.prevTaskHashes.length == 0) revert NoTasks();
        if (r.status != RunStatus.Pending || r.expiresAt == 0) revert RunNotPending(runId);
        uint256 latest;
        for (uint256 i; i < reply.prevTaskHashes.length; ++i) {
            bytes32 h = reply.prevTaskHashes[i];
            uint256 anchor = taskAnchorTime[h];
            if (anchor == 0 || _tasks[h].workflowRunId != runId) revert UnknownTask(h);
            if (h != r.openTask) revert TaskNotEligible(h);
            uint256 expiresAt = _tasks[h].expiresAt;
            if (expiresAt != 0 && block.timestamp > expiresAt) revert TaskExpired(h);
            if (anchor > latest) latest = anchor;
        }
        if (reply.timestamp <= latest || reply.timestamp > block.timestamp) {
            revert BadTimestamp(reply.timestamp);
        }
    }

    /// @dev The terminal sync gate: a proven EXECUTE reply whose upstream task is proven.
    function _syncGate(bytes32 runId, Run storage r) internal {
        bytes32 candidate = r.candidate;
        if (candidate == 0 || !_taskProven[r.openTask]) return; // silent: stays open
        bytes32[] memory prev = new bytes32[](1);
        prev[0] = candidate;
        AgentTask memory f = AgentTask({
            stage: DONE,
            taskSeq: r.taskSeq++,
            inputHash: bytes32(0),
            input: "",
            timestamp: block.timestamp,
            expiresAt: 0,
            prevReplyHashes: prev,
            workflowRunId: runId
        });
        bytes32 h = _taskHash(f);
        _tasks[h] = f;
        taskAnchorTime[h] = block.timestamp;
        _taskProven[h] = true;
        r.stage = DONE;
        r.status = RunStatus.Success;
        r.finalTaskHash = h;
        r.completedAt = block.timestamp;
        emit WorkflowCompleted(runId, RunStatus.Success, h, block.timestamp);
    }

    function _dispatch(
        bytes32 runId,
        Run storage r,
        uint8 stage,
        bytes32 inputHash,
        bytes32[] memory prev
    ) internal returns (bytes32 h) {
        AgentTask memory t = AgentTask({
            stage: stage,
            taskSeq: r.taskSeq++,
            inputHash: inputHash,
            input: "",
            timestamp: block.timestamp,
            expiresAt: r.expiresAt,
            prevReplyHashes: prev,
            workflowRunId: runId
        });
        h = _taskHash(t);
        _tasks[h] = t;
        taskAnchorTime[h] = block.timestamp;
        _taskProven[h] = _allProven(prev);
        for (uint256 i; i < prev.length; ++i) {
            _downstream[prev[i]] = h;
        }
        emit NewAgentTask(runId, stage, h);
    }

    function _store(bytes32 replyHash, AgentReply calldata reply) internal {
        AgentReply storage s = _replies[replyHash];
        s.operationId = reply.operationId;
        s.outputHash = reply.outputHash;
        s.output = reply.output;
        s.timestamp = reply.timestamp;
        s.replier = reply.replier;
        s.prevTaskHashes = reply.prevTaskHashes;
        s.workflowRunId = reply.workflowRunId;
    }

    function _allProven(bytes32[] memory replyHashes) internal view returns (bool) {
        for (uint256 i; i < replyHashes.length; ++i) {
            if (!_replyProven[replyHashes[i]]) return false;
        }
        return true;
    }

    function _taskHash(AgentTask memory t) internal pure returns (bytes32) {
        return keccak256(
            abi.encode(
                t.stage,
                t.taskSeq,
                t.inputHash,
                t.timestamp,
                t.expiresAt,
                keccak256(abi.encodePacked(t.prevReplyHashes)),
                t.workflowRunId
            )
        );
    }
}
