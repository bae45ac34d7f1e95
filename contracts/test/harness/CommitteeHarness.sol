// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {BLS} from "../../src/libraries/BLS.sol";

/// @notice One epoch's committee stored the way the registry stores it (each key packed into
///         three words, plus the epoch's aggregate key), verifying certificates as
///         "aggregate key minus non-signers, one pairing check". Test-only: the registry owns
///         committees in production.
contract CommitteeHarness {
    error IndexOutOfRange(uint256 index, uint256 size);
    error IndicesNotAscending();
    error BelowThreshold(uint256 signedStake, uint256 totalStake);
    error VerifyFailed();

    mapping(uint256 => BLS.PackedG1) internal keys;
    mapping(uint256 => uint256) internal stakes;
    uint256 public immutable size;
    BLS.PackedG1 internal aggregateKey;
    uint256 public totalStake;
    uint256 public immutable thresholdBps;

    constructor(bytes[] memory publicKeys, uint256[] memory stakes_, uint256 thresholdBps_) {
        bytes memory sum = publicKeys[0];
        for (uint256 i; i < publicKeys.length; ++i) {
            keys[i] = BLS.packG1(publicKeys[i]);
            stakes[i] = stakes_[i];
            totalStake += stakes_[i];
            if (i > 0) sum = BLS.addG1(sum, publicKeys[i]);
        }
        aggregateKey = BLS.packG1(sum);
        size = publicKeys.length;
        thresholdBps = thresholdBps_;
    }

    /// @notice The epoch's aggregate key (EIP-2537 G1).
    function aggregate() external view returns (bytes memory) {
        return BLS.unpackG1(aggregateKey);
    }

    /// @notice Verifies a certificate; returns the signing stake or reverts with the reason.
    function verifyCertificate(
        bytes32 digest,
        uint256[] calldata nonSigners,
        bytes calldata signature
    ) external view returns (uint256 signedStake) {
        uint256 n = size;
        uint256 missing;
        for (uint256 i; i < nonSigners.length; ++i) {
            uint256 index = nonSigners[i];
            if (index >= n) revert IndexOutOfRange(index, n);
            if (i > 0 && index <= nonSigners[i - 1]) revert IndicesNotAscending();
            missing += stakes[index];
        }
        bytes memory key = BLS.subtractStored(aggregateKey, keys, nonSigners);
        signedStake = totalStake - missing;
        if (signedStake * 10_000 < totalStake * thresholdBps) {
            revert BelowThreshold(signedStake, totalStake);
        }
        if (!BLS.verifyDigest(key, digest, signature)) revert VerifyFailed();
    }

    /// @notice Verifies an aggregate by an explicit signer set (equivocation evidence).
    function verifyAggregate(bytes32 digest, uint256[] calldata signers, bytes calldata signature)
        external
        view
        returns (bool)
    {
        bytes memory key = BLS.unpackG1(keys[signers[0]]);
        for (uint256 i = 1; i < signers.length; ++i) {
            if (signers[i] <= signers[i - 1]) revert IndicesNotAscending();
            key = BLS.addG1(key, BLS.unpackG1(keys[signers[i]]));
        }
        return BLS.verifyDigest(key, digest, signature);
    }
}

/// @notice External entry points to the BLS library, so tests can observe its reverts.
contract BLSCaller {
    function verifyDigest(bytes calldata publicKey, bytes32 digest, bytes calldata signature)
        external
        view
        returns (bool)
    {
        return BLS.verifyDigest(publicKey, digest, signature);
    }

    function verifyProofOfPossession(bytes calldata publicKey, bytes calldata proof)
        external
        view
        returns (bool)
    {
        return BLS.verifyProofOfPossession(publicKey, proof);
    }

    function verifyBoundProofOfPossession(
        bytes calldata publicKey,
        bytes calldata proof,
        bytes calldata binding
    ) external view returns (bool) {
        return BLS.verifyProofOfPossession(publicKey, proof, binding);
    }

    function hashToG2(bytes calldata message, bytes calldata dst)
        external
        view
        returns (bytes memory)
    {
        return BLS.hashToG2(message, dst);
    }

    function hashToFieldFp2(bytes calldata message, bytes calldata dst)
        external
        view
        returns (bytes memory, bytes memory)
    {
        return BLS.hashToFieldFp2(message, dst);
    }

    function compressG1(bytes calldata point) external pure returns (bytes memory) {
        return BLS.compressG1(point);
    }

    function addG1(bytes calldata a, bytes calldata b) external view returns (bytes memory) {
        return BLS.addG1(a, b);
    }
}
