// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

// ERC-8301 (seed 000) `IAgentWorkflow` and its data envelopes, as the seed writes them.

enum RunStatus {
    Pending,
    Success,
    Failed
}

struct AgentTask {
    uint8 stage;
    uint256 taskSeq;
    bytes32 inputHash;
    bytes input;
    uint256 timestamp;
    uint256 expiresAt;
    bytes32[] prevReplyHashes;
    bytes32 workflowRunId;
}

struct AgentReply {
    bytes32 operationId;
    bytes32 outputHash;
    bytes output;
    uint256 timestamp;
    address replier;
    bytes32[] prevTaskHashes;
    bytes32 workflowRunId;
}

interface IAgentWorkflow {
    function run(bytes32 inputHash, bytes calldata input, uint256 expiresAt)
        external
        returns (bytes32 workflowRunId);

    function result(bytes32 workflowRunId)
        external
        view
        returns (RunStatus status, bytes32 finalTaskHash, uint256 completedAt);

    function getAgentTask(bytes32 taskHash)
        external
        view
        returns (AgentTask memory task, bool proven);

    function getAgentReply(bytes32 replyHash)
        external
        view
        returns (AgentReply memory reply, address verifier, bool proven, bytes32 verificationDigest);

    function getReplyHashByOperation(bytes32 workflowRunId, address replier, bytes32 operationId)
        external
        view
        returns (bytes32 replyHash);

    function onAgentReply(AgentReply calldata reply) external returns (bytes32 replyHash);

    function onAgentProve(bytes32[] calldata replyHashes, bytes calldata proof) external;

    event NewAgentTask(
        bytes32 indexed workflowRunId, uint8 indexed stage, bytes32 indexed taskHash
    );
    event AgentReplyAnchored(
        bytes32 indexed workflowRunId, bytes32 indexed replyHash, address indexed replier
    );
    event WorkflowCompleted(
        bytes32 indexed workflowRunId, RunStatus status, bytes32 finalTaskHash, uint256 timestamp
    );
}
