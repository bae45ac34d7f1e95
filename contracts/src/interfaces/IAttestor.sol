// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Question} from "../libraries/AttestationHash.sol";
import {Outcome} from "../libraries/VerdictHash.sol";
import {IResolverRegistry} from "./IResolverRegistry.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice A recorded attestation: the committee of `epoch` certified `outcome`, `resultHash`
///         and `traceHash` for a question (keyed by its `inputHash`).
struct Attestation {
    bytes32 resultHash;
    bytes32 traceHash;
    /// @dev The epoch the answered request pinned (its certificate's signers are members).
    uint64 epoch;
    /// @dev Block time of the certificate (0: not attested).
    uint64 attestedAt;
    Outcome outcome;
}

/// @notice What a requester pays and how long the committee has: `fee` of `token` (at least the
///         registry's `minResolverFee(token)`), answered within `resolveWindow` seconds (within
///         the registry's `[minResolveWindow, maxResolveWindow]`).
struct RequestTerms {
    IERC20 token;
    uint256 fee;
    uint256 resolveWindow;
}

/// @notice Errors of the Attestor (besides the Escrow's, which it shares).
interface IAttestorErrors {
    /// @notice The question already has a pending request (`requestId`).
    error RequestPending(bytes32 requestId);
    /// @notice The question is attested: `attestation(inputHash)` answers it.
    error AlreadyAttested(bytes32 inputHash);
}

/// @notice Events of the Attestor (besides the Escrow events it emits for the nodes:
///         SpecPublished, DeliveryPublished, Disputed, VerdictCommitted, Settled and the fee
///         events).
interface IAttestorEvents {
    /// @notice `requester` asked the committee of `epoch` to answer the question `inputHash`
    ///         by `resolveDeadline`, paying `fee` of `token`.
    event AttestationRequested(
        bytes32 indexed requestId,
        bytes32 indexed inputHash,
        address indexed requester,
        IERC20 token,
        uint256 fee,
        uint256 epoch,
        uint256 resolveDeadline
    );
    /// @notice A certificate of `epoch` answered `inputHash` with `outputHash` (ERC-8301).
    event Attested(
        bytes32 indexed requestId,
        bytes32 indexed inputHash,
        bytes32 outputHash,
        Outcome outcome,
        uint256 epoch
    );
}

/// @notice What ResolvdProofVerifier reads from an Attestor.
interface IAttestor {
    /// @notice The registry whose committees certify this Attestor's answers.
    function registry() external view returns (IResolverRegistry);

    /// @notice For the question `inputHash`: its recorded `outputHash` (0 until attested) and
    ///         the epoch its latest request pinned (0: never requested).
    function outputOf(bytes32 inputHash) external view returns (bytes32 outputHash, uint256 epoch);
}
