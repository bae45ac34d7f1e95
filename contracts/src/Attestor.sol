// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";

import {VerdictContract} from "./VerdictContract.sol";
import {
    Attestation,
    IAttestorErrors,
    IAttestorEvents,
    RequestTerms
} from "./interfaces/IAttestor.sol";
import {Deal, DealState, Settlement} from "./interfaces/IEscrow.sol";
import {IResolverRegistry} from "./interfaces/IResolverRegistry.sol";
import {AttestationHash, Question} from "./libraries/AttestationHash.sol";
import {Outcome, VerdictCommitment, VerdictHash} from "./libraries/VerdictHash.sol";

/// @title Attestor
/// @notice Replay attestations on demand: anyone asks the ResolverRegistry's committee what a
///         seller-style plan (a DeliveryV1) gives when replayed on a prestate anchor against a
///         spec (seed 004's content hashes), paying a resolver fee; the committee answers with
///         the same BLS quorum certificate it gives an Escrow dispute, and the answer is
///         recorded (`attestation(inputHash)`), readable by any contract without a certificate
///         and usable as an ERC-8301 proof (ResolvdProofVerifier, contracts/ATTESTATIONS.md).
/// @dev Served by the nodes exactly like an Escrow: a request is stored as a `Deal` in state
///      Disputed (`deal(requestId)`), announced with the Escrow's events (SpecPublished,
///      DeliveryPublished, Disputed; then VerdictCommitted, Settled and the fee events), settled
///      by the Escrow's `resolve` overloads and signed under this contract's own EIP-712 domain
///      (name "resolvd", version "1", chain id, this address), so slashing protection and
///      `slashEquivocation(domainSeparator(), a, b)` work unchanged. The request id is
///      `keccak256(abi.encode(chainid, this, inputHash))`: one per question, so any two
///      conflicting certificates about a question here are equivocation, whichever request
///      they answered. The committee epoch is pinned at the request, the resolve window is
///      within the registry's bounds, the fee is at least its `minResolverFee(token)` and is
///      paid to the signers by EscrowFees (deployed by the constructor, run by DELEGATECALL
///      from the fallback, like the Escrow's): the capped gas refund to the submitter, the
///      inclusion window for left-out signers, `claimRewards` per (token, epoch). No
///      certificate by the deadline: `timeoutRefund` credits the fee back to the requester,
///      and the question may be requested again (same id). The owner only curates the
///      backend allow-list and may sweep tokens held beyond `liabilities`.
contract Attestor is VerdictContract, IAttestorErrors, IAttestorEvents {
    using SafeCast for uint256;

    /// @dev Recorded answers by question. The only storage beyond EscrowStorage's layout,
    ///      after it: EscrowFees never reaches it (check-layout.sh).
    mapping(bytes32 inputHash => Attestation) internal _attestations;

    constructor(IResolverRegistry registry_, address owner_) VerdictContract(registry_, owner_) {}

    // ------------------------------------------------------------------ requests

    /// @notice Asks the current committee to answer `question` within `terms.resolveWindow`,
    ///         paying `terms.fee` of `terms.token` (approve it first). Pins the registry's
    ///         current epoch, and the gas refund `min(fee, registry.gasRefundCap(token))` for the
    ///         certificate's submitter. Optionally publishes the content (hash-checked, emitted
    ///         like an Escrow's): `spec` with `prestateAnchor` (both or neither), and
    ///         `delivery`. Content not published here must reach the nodes by hash from peers.
    /// @return requestId The id the certificate's commitment carries as its `dealId`.
    /// @return inputHash The question's ERC-8301 input hash (AttestationHash.inputHash).
    function request(
        Question calldata question,
        RequestTerms calldata terms,
        bytes calldata spec,
        bytes calldata prestateAnchor,
        bytes calldata delivery
    ) external nonReentrant returns (bytes32 requestId, bytes32 inputHash) {
        inputHash = AttestationHash.inputHash(question);
        requestId = requestIdOf(inputHash);
        uint256 epoch = _checkRequest(question, requestId, inputHash, terms);
        _publish(requestId, question, spec, prestateAnchor, delivery);
        _open(requestId, question, inputHash, terms, epoch);
        _takeFee(requestId, terms.token, terms.fee, epoch);
    }

    /// @notice Publishes content of a pending request (hash-checked against its question,
    ///         emitted like `request` does): `spec` with `prestateAnchor` (both or neither), and
    ///         `delivery`. Permissionless, so whoever holds the content can make it available
    ///         while the committee can still answer, also when the request was made without it.
    function publish(
        bytes32 requestId,
        bytes calldata spec,
        bytes calldata prestateAnchor,
        bytes calldata delivery
    ) external {
        Deal storage d = _pending(requestId);
        Question memory q;
        q.specHash = d.specHash;
        q.prestateAnchorHash = d.prestateAnchorHash;
        q.deliveryHash = d.deliveryHash;
        _publish(requestId, q, spec, prestateAnchor, delivery);
    }

    /// @notice Answers a pending request with a quorum certificate over `commitment` (its
    ///         `dealId` the request id, its six input fields the question's) by the committee
    ///         of the pinned epoch: records the attestation and splits the fee as the Escrow
    ///         does (held for the inclusion window when there are non-signers). Signers
    ///         slashed since the epoch started do not count toward the quorum. Callable by
    ///         anyone, once, until the deadline.
    /// @param nonSigners Position bitmap of the non-signers (`registry.verifyCertificate`).
    function resolve(
        VerdictCommitment calldata commitment,
        bytes calldata nonSigners,
        bytes calldata aggregateSignature
    ) external nonReentrant {
        Deal storage d = _pending(commitment.dealId);
        bytes32 inputHash = _checkQuestion(d, commitment);
        _resolve(d, inputHash, commitment, nonSigners, aggregateSignature);
    }

    /// @notice `resolve` with the non-signers as registry indices (strictly ascending).
    function resolve(
        VerdictCommitment calldata commitment,
        uint256[] calldata nonSigners,
        bytes calldata aggregateSignature
    ) external nonReentrant {
        Deal storage d = _pending(commitment.dealId);
        bytes32 inputHash = _checkQuestion(d, commitment);
        bytes memory bitmap = registry.signerBitmap(d.epoch, nonSigners);
        _resolve(d, inputHash, commitment, bitmap, aggregateSignature);
    }

    /// @notice After the deadline of a request no certificate answered: credits its fee back
    ///         to the requester (`claim`). The question may be requested again. Callable by
    ///         anyone.
    function timeoutRefund(bytes32 requestId) external nonReentrant {
        Deal storage d = _deals[requestId];
        if (d.state != DealState.Disputed) {
            revert WrongState(requestId, DealState.Disputed, d.state);
        }
        if (block.timestamp <= d.resolveDeadline) {
            revert TooEarly(requestId, uint256(d.resolveDeadline) + 1);
        }
        address requester = d.buyer;
        d.state = DealState.Resolved;
        d.settlement = Settlement.TimedOut;
        d.settledAt = block.timestamp.toUint64();
        emit Settled(requestId, Settlement.TimedOut, requester, 0, address(0), 0, block.timestamp);
        uint256 fee = d.resolverFee;
        if (fee == 0) return;
        delete pinnedGasRefund[requestId];
        emit FeeRefunded(requestId, requester, fee);
        _credit(requester, d.token, fee);
    }

    /// @notice Withdraws the caller's credited funds in `token` (a timed-out request's fee, a
    ///         submitter's gas refund) to `to`.
    /// @return amount The amount sent.
    function claim(IERC20 token, address to) external nonReentrant returns (uint256 amount) {
        return _claim(token, to);
    }

    // ------------------------------------------------------------------ admin

    /// @notice Allows or disallows requests against a replay backend version. Pending requests
    ///         keep the backend they named.
    function setBackend(bytes32 backendId, bytes32 versionHash, bool allowed) external onlyOwner {
        backendAllowed[backendId][versionHash] = allowed;
        emit BackendAllowed(backendId, versionHash, allowed);
    }

    // ------------------------------------------------------------------ views

    /// @notice The request id of the question `inputHash` here (the commitment's `dealId`).
    function requestIdOf(bytes32 inputHash) public view returns (bytes32) {
        return AttestationHash.requestId(block.chainid, address(this), inputHash);
    }

    /// @notice The ERC-8301 input hash of `question`.
    function inputHashOf(Question calldata question) external pure returns (bytes32) {
        return AttestationHash.inputHash(question);
    }

    /// @notice The ERC-8301 output hash of a verdict.
    function outputHashOf(Outcome outcome, bytes32 resultHash, bytes32 traceHash)
        external
        pure
        returns (bytes32)
    {
        return AttestationHash.outputHash(outcome, resultHash, traceHash);
    }

    /// @notice The recorded answer to the question `inputHash` (`attestedAt` 0: none yet).
    function attestation(bytes32 inputHash) external view returns (Attestation memory) {
        return _attestations[inputHash];
    }

    /// @notice For the question `inputHash`: its recorded ERC-8301 output hash (0 until
    ///         attested) and the epoch its latest request pinned (0: never requested). What
    ///         ResolvdProofVerifier reads (IAttestor).
    function outputOf(bytes32 inputHash) external view returns (bytes32 outputHash, uint256 epoch) {
        Attestation storage a = _attestations[inputHash];
        if (a.attestedAt != 0) {
            return (AttestationHash.outputHash(a.outcome, a.resultHash, a.traceHash), a.epoch);
        }
        return (bytes32(0), _deals[requestIdOf(inputHash)].epoch);
    }

    // ------------------------------------------------------------------ internals

    /// @dev The resolve window must leave the nodes time to answer (the registry's minimum) and
    ///      end while the pinned epoch's members are still bonded (its maximum).
    function _checkWindow(uint256 resolveWindow) internal view {
        uint256 maxResolve = registry.maxResolveWindow();
        if (resolveWindow > maxResolve) revert ResolveWindowTooLong(resolveWindow, maxResolve);
        uint256 minResolve = registry.minResolveWindow();
        if (resolveWindow < minResolve) revert WindowTooShort("resolve", minResolve);
    }

    /// @dev A question may be requested if it never was, or if its last request timed out.
    function _checkRequestable(bytes32 requestId, bytes32 inputHash, Deal storage d) internal view {
        DealState state = d.state;
        if (state == DealState.None) return;
        if (state == DealState.Disputed) revert RequestPending(requestId);
        if (d.settlement != Settlement.TimedOut) revert AlreadyAttested(inputHash);
    }

    /// @dev Checks a request's terms and the committee; returns the epoch to pin.
    function _checkRequest(
        Question calldata q,
        bytes32 requestId,
        bytes32 inputHash,
        RequestTerms calldata t
    ) internal view returns (uint256 epoch) {
        IERC20 token = t.token;
        uint256 fee = t.fee;
        if (address(token) == address(0)) revert ZeroAddress("token");
        if (!backendAllowed[q.backendId][q.backendVersionHash]) {
            revert BackendNotAllowed(q.backendId, q.backendVersionHash);
        }
        _checkWindow(t.resolveWindow);
        uint256 minFee = registry.minResolverFee(token);
        if (fee < minFee) revert FeeBelowMinimum(token, fee, minFee);
        _checkRequestable(requestId, inputHash, _deals[requestId]);
        uint256 committeeStake;
        (epoch, committeeStake) = registry.currentCommittee();
        uint256 minimum = registry.minimumCommitteeStake();
        if (committeeStake < minimum) revert CommitteeTooSmall(epoch, committeeStake, minimum);
    }

    /// @dev Publishes the content given (hash-checked), as an Escrow's funding and delivery do.
    function _publish(
        bytes32 requestId,
        Question memory q,
        bytes calldata spec,
        bytes calldata prestateAnchor,
        bytes calldata delivery
    ) internal {
        if (spec.length > 0 || prestateAnchor.length > 0) {
            _checkContent("reckn/v1/spec", spec, q.specHash);
            _checkContent("reckn/v1/prestate-anchor", prestateAnchor, q.prestateAnchorHash);
            emit SpecPublished(requestId, spec, prestateAnchor);
        }
        if (delivery.length > 0) {
            _checkContent("reckn/v1/delivery", delivery, q.deliveryHash);
            emit DeliveryPublished(requestId, delivery);
        }
    }

    /// @dev Writes the request as a disputed deal (every field it uses, so a re-request after a
    ///      timeout starts clean) and announces it.
    function _open(
        bytes32 requestId,
        Question calldata q,
        bytes32 inputHash,
        RequestTerms calldata t,
        uint256 epoch
    ) internal {
        uint256 deadline = block.timestamp + t.resolveWindow;
        IERC20 token = t.token;
        uint256 fee = t.fee;
        Deal storage d = _deals[requestId];
        d.buyer = msg.sender;
        d.state = DealState.Disputed;
        d.settlement = Settlement.None;
        d.epoch = epoch.toUint64();
        d.token = token;
        d.challengedAt = block.timestamp.toUint64();
        d.resolveDeadline = deadline.toUint64();
        d.resolveWindow = t.resolveWindow.toUint64();
        d.settledAt = 0;
        d.resolverFee = fee.toUint128();
        // The question (the same on a re-request after a timeout: then no-op writes).
        d.specHash = q.specHash;
        d.deliveryHash = q.deliveryHash;
        d.prestateAnchorHash = q.prestateAnchorHash;
        d.prestateRoot = q.prestateRoot;
        d.backendId = q.backendId;
        d.backendVersionHash = q.backendVersionHash;
        emit AttestationRequested(requestId, inputHash, msg.sender, token, fee, epoch, deadline);
        emit Disputed(
            requestId,
            q.specHash,
            q.deliveryHash,
            q.prestateAnchorHash,
            q.prestateRoot,
            q.backendId,
            q.backendVersionHash,
            epoch,
            block.timestamp,
            deadline
        );
    }

    /// @dev Takes a request's fee: pins the submitter's gas refund and initialises the epoch's
    ///         accumulator (so `resolve` never pays for a fresh slot there), as `challenge` does.
    function _takeFee(bytes32 requestId, IERC20 token, uint256 fee, uint256 epoch) internal {
        if (fee == 0) return;
        if (rewardPerStake[token][epoch] == 0) rewardPerStake[token][epoch] = 1;
        uint256 refund = registry.gasRefundCap(token);
        if (refund > fee) refund = fee;
        pinnedGasRefund[requestId] = refund;
        liabilities[token] += fee;
        _pull(token, msg.sender, fee);
    }

    function _pending(bytes32 requestId) internal view returns (Deal storage d) {
        d = _deals[requestId];
        if (d.state != DealState.Disputed) {
            revert WrongState(requestId, DealState.Disputed, d.state);
        }
        if (block.timestamp > d.resolveDeadline) revert TooLate(requestId, d.resolveDeadline);
    }

    /// @dev The commitment answers the request's question: its six input fields hash to the
    ///      input hash its `dealId` (the request id) commits to. Returns that input hash. On a
    ///      mismatch, names the differing field (CommitmentMismatch).
    function _checkQuestion(Deal storage d, VerdictCommitment calldata c)
        internal
        view
        returns (bytes32 inputHash)
    {
        inputHash = AttestationHash.inputHash(c);
        if (requestIdOf(inputHash) == c.dealId) return inputHash;
        _checkCommitment(d, c);
        revert CommitmentMismatch(c.dealId, "fields");
    }

    function _resolve(
        Deal storage d,
        bytes32 inputHash,
        VerdictCommitment calldata commitment,
        bytes memory nonSigners,
        bytes calldata aggregateSignature
    ) internal {
        bytes32 requestId = commitment.dealId;
        uint256 epoch = d.epoch;
        bytes32 digest = VerdictHash.digest(domainSeparator(), commitment);
        (uint256 signedStake, uint256 totalStake) =
            registry.verifyCertificate(epoch, digest, nonSigners, aggregateSignature);
        _checkUnslashedQuorum(epoch, signedStake, totalStake, nonSigners);
        _attestations[inputHash] = Attestation({
            resultHash: commitment.resultHash,
            traceHash: commitment.traceHash,
            epoch: epoch.toUint64(),
            attestedAt: block.timestamp.toUint64(),
            outcome: commitment.outcome
        });
        d.state = DealState.Resolved;
        d.settlement = Settlement.Attested;
        d.settledAt = block.timestamp.toUint64();
        emit VerdictCommitted(requestId, commitment, signedStake, totalStake);
        emit Attested(
            requestId, inputHash, AttestationHash.outputHash(commitment), commitment.outcome, epoch
        );
        _accrueFee(requestId, d, digest, signedStake, nonSigners);
        emit Settled(requestId, Settlement.Attested, d.buyer, 0, address(0), 0, block.timestamp);
    }
}
