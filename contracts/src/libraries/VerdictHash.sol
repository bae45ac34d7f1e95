// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @notice The verdict of a replay, as coded on-chain.
enum Outcome {
    Reproduced,
    Failed
}

/// @notice The fields resolvers sign about one deal (seed 004 "On-chain commitment").
struct VerdictCommitment {
    bytes32 dealId;
    bytes32 specHash;
    bytes32 deliveryHash;
    bytes32 prestateAnchorHash;
    bytes32 prestateRoot;
    bytes32 backendId;
    bytes32 backendVersionHash;
    Outcome outcome;
    bytes32 resultHash;
    bytes32 traceHash;
}

/// @title VerdictHash
/// @notice EIP-712 hashing of VerdictCommitment. The Rust crate resolvd-proto computes the
///         same digest; proto/vectors/eip712_verdict.json pins both.
library VerdictHash {
    /// @dev keccak256("VerdictCommitment(bytes32 dealId,bytes32 specHash,bytes32 deliveryHash,bytes32 prestateAnchorHash,bytes32 prestateRoot,bytes32 backendId,bytes32 backendVersionHash,uint8 outcome,bytes32 resultHash,bytes32 traceHash)")
    bytes32 internal constant VERDICT_COMMITMENT_TYPEHASH = keccak256(
        "VerdictCommitment(bytes32 dealId,bytes32 specHash,bytes32 deliveryHash,bytes32 prestateAnchorHash,bytes32 prestateRoot,bytes32 backendId,bytes32 backendVersionHash,uint8 outcome,bytes32 resultHash,bytes32 traceHash)"
    );

    /// @dev keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")
    bytes32 internal constant DOMAIN_TYPEHASH = keccak256(
        "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"
    );

    /// @notice keccak256 of the six content fields a verdict answers (spec, delivery, prestate
    ///         anchor and root, backend and its version): an escrow deal's `verdictFieldsHash`
    ///         and an attestation's ERC-8301 `inputHash` (AttestationHash).
    function fieldsHash(
        bytes32 specHash,
        bytes32 deliveryHash,
        bytes32 prestateAnchorHash,
        bytes32 prestateRoot,
        bytes32 backendId,
        bytes32 backendVersionHash
    ) internal pure returns (bytes32) {
        return keccak256(
            abi.encode(
                specHash,
                deliveryHash,
                prestateAnchorHash,
                prestateRoot,
                backendId,
                backendVersionHash
            )
        );
    }

    /// @notice EIP-712 domain separator for `verifyingContract` (the escrow).
    function domainSeparator(
        string memory name,
        string memory version,
        uint256 chainId,
        address verifyingContract
    ) internal pure returns (bytes32) {
        return keccak256(
            abi.encode(
                DOMAIN_TYPEHASH,
                keccak256(bytes(name)),
                keccak256(bytes(version)),
                chainId,
                verifyingContract
            )
        );
    }

    /// @notice EIP-712 `hashStruct` of a commitment.
    function hashStruct(VerdictCommitment memory c) internal pure returns (bytes32) {
        return keccak256(
            abi.encode(
                VERDICT_COMMITMENT_TYPEHASH,
                c.dealId,
                c.specHash,
                c.deliveryHash,
                c.prestateAnchorHash,
                c.prestateRoot,
                c.backendId,
                c.backendVersionHash,
                c.outcome,
                c.resultHash,
                c.traceHash
            )
        );
    }

    /// @notice The 32-byte digest resolvers sign:
    ///         keccak256(0x1901 || domainSeparator || hashStruct(c)).
    function digest(bytes32 separator, VerdictCommitment memory c) internal pure returns (bytes32) {
        return keccak256(abi.encodePacked(hex"1901", separator, hashStruct(c)));
    }
}
