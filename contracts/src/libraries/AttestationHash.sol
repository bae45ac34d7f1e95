// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Outcome, VerdictCommitment, VerdictHash} from "./VerdictHash.sol";

/// @notice An attestation request's question: the content hashes an escrow dispute pins (seed
///         004: SpecV1, the seller's DeliveryV1 with its plan, PrestateAnchorV1 and its state
///         root, the replay backend and its exact version).
struct Question {
    bytes32 specHash;
    bytes32 deliveryHash;
    bytes32 prestateAnchorHash;
    bytes32 prestateRoot;
    bytes32 backendId;
    bytes32 backendVersionHash;
}

/// @title AttestationHash
/// @notice The hashes that name an attestation: the ERC-8301 `inputHash` of a question, its
///         request id at one Attestor (the `dealId` of the VerdictCommitment resolvers sign),
///         and the ERC-8301 `outputHash` of a verdict. All are keccak256 of ABI encodings of
///         public values, so any contract or client computes them without the Attestor.
library AttestationHash {
    /// @notice `inputHash = keccak256(abi.encode(specHash, deliveryHash, prestateAnchorHash,
    ///         prestateRoot, backendId, backendVersionHash))`: keccak256 of the ERC-8301 task
    ///         input `abi.encode(question)` (six 32-byte words), the same preimage an Escrow
    ///         stores as a deal's `verdictFieldsHash`.
    function inputHash(Question memory q) internal pure returns (bytes32) {
        return keccak256(abi.encode(q));
    }

    /// @notice The `inputHash` of the question a commitment answers (its six input fields).
    function inputHash(VerdictCommitment memory c) internal pure returns (bytes32) {
        return VerdictHash.fieldsHash(
            c.specHash,
            c.deliveryHash,
            c.prestateAnchorHash,
            c.prestateRoot,
            c.backendId,
            c.backendVersionHash
        );
    }

    /// @notice `outputHash = keccak256(abi.encode(uint8 outcome, resultHash, traceHash))`, with
    ///         the on-chain outcome code (0 Reproduced, 1 Failed): keccak256 of the ERC-8301
    ///         reply output `abi.encode(outcome, resultHash, traceHash)`.
    function outputHash(Outcome outcome, bytes32 resultHash, bytes32 traceHash)
        internal
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(uint8(outcome), resultHash, traceHash));
    }

    /// @notice The `outputHash` of a commitment's verdict.
    function outputHash(VerdictCommitment memory c) internal pure returns (bytes32) {
        return outputHash(c.outcome, c.resultHash, c.traceHash);
    }

    /// @notice `requestId = keccak256(abi.encode(chainId, attestor, inputHash))`: one id per
    ///         question and Attestor, so every certificate about a question at that Attestor is
    ///         over the same `dealId`, and two conflicting ones are slashable equivocation.
    function requestId(uint256 chainId, address attestor, bytes32 input)
        internal
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(chainId, attestor, input));
    }
}
