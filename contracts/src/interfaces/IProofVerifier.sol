// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @notice The stateless proof verifier an ERC-8301 workflow calls from `onAgentProve`
///         (seed 000, "Option B — IProofVerifier"): `valid` iff `proof` proves that the
///         computation committed to by `inputHash` produced the output committed to by
///         `outputHash`, under the verifier-specific `metadata` fixed when the workflow was
///         deployed.
interface IProofVerifier {
    function verify(
        bytes32 inputHash,
        bytes32 outputHash,
        bytes calldata metadata,
        bytes calldata proof
    ) external view returns (bool valid);
}
