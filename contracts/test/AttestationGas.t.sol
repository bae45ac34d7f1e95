// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {RequestTerms} from "../src/interfaces/IAttestor.sol";
import {AttestationHash, Question} from "../src/libraries/AttestationHash.sol";
import {Outcome, VerdictCommitment} from "../src/libraries/VerdictHash.sol";
import {AttestorBase} from "./utils/AttestorBase.sol";

/// @notice Gas of the Attestor and ResolvdProofVerifier on a 4-member committee: a request
///         with a fee (with and without publishing its content), its certificate with a fee
///         (all signed; one member left out), the expiry refund, and ERC-8301 verification
///         (a certificate, stateless; the recorded attestation), next to the registry's own
///         `verifyCertificate`. Signatures are made in setUp and each measured call is the only
///         call of its test (setUp state is cold). Recorded in snapshots/AttestationGas.json.
abstract contract AttestationGasBase is AttestorBase {
    Question internal pending;
    bytes32 internal pendingInput;
    bytes32 internal pendingId;
    VerdictCommitment internal commitment;
    bytes32 internal outputHash;
    bytes32 internal digest;
    bytes internal fullBitmap;
    bytes internal fullSignature;
    bytes internal partBitmap;
    bytes internal partSignature;
    bytes internal fullProof;
    bytes internal partProof;
    Question internal fresh;
    RequestTerms internal terms;

    function setUp() public virtual {
        _setUpAttestor();
        pending = _question(1);
        (pendingId, pendingInput) = _request(pending, FEE);
        commitment = _commitment(pending, Outcome.Reproduced);
        outputHash = AttestationHash.outputHash(commitment);
        digest = attestor.verdictDigest(commitment);
        (fullBitmap, fullSignature) = _signBy(ALL, digest);
        (partBitmap, partSignature) = _signBy(0x7, digest);
        fullProof = abi.encode(commitment, uint256(1), fullBitmap, fullSignature);
        partProof = abi.encode(commitment, uint256(1), partBitmap, partSignature);
        fresh = _question(2);
        terms = _requestTerms(FEE);
        token.mint(REQUESTER, FEE);
        vm.prank(REQUESTER);
        token.approve(address(attestor), FEE);
    }
}

contract AttestationGasTest is AttestationGasBase {
    function testGasRequest() public {
        vm.prank(REQUESTER);
        attestor.request(fresh, terms, "", "", "");
        vm.snapshotGasLastCall("AttestationGas", "request-fee");
    }

    /// @dev Spec, anchor and delivery of `_spec`, `_anchor`, `_delivery` (about 50 bytes each).
    function testGasRequestPublished() public {
        bytes memory spec = _spec(2);
        bytes memory anchor = _anchor(2);
        bytes memory delivery = _delivery(2);
        vm.prank(REQUESTER);
        attestor.request(fresh, terms, spec, anchor, delivery);
        vm.snapshotGasLastCall("AttestationGas", "request-fee-published");
    }

    function testGasResolveFull() public {
        vm.prank(SUBMITTER);
        attestor.resolve(commitment, fullBitmap, fullSignature);
        uint256 used = vm.snapshotGasLastCall("AttestationGas", "resolve-fee-n4-missing0");
        require(used <= 400_000, "resolve over 400k");
    }

    function testGasResolveOneMissing() public {
        vm.prank(SUBMITTER);
        attestor.resolve(commitment, partBitmap, partSignature);
        vm.snapshotGasLastCall("AttestationGas", "resolve-fee-n4-missing1");
    }

    function testGasTimeoutRefund() public {
        vm.warp(block.timestamp + WINDOW + 1);
        attestor.timeoutRefund(pendingId);
        vm.snapshotGasLastCall("AttestationGas", "timeoutRefund");
    }

    /// @notice Stateless ERC-8301 verification of a certificate: target about the registry's
    ///         `verifyCertificate` (~170k) plus the request lookup.
    function testGasVerifyCertificate() public {
        bool ok = verifier.verify(pendingInput, outputHash, _metadata(), fullProof);
        uint256 used = vm.snapshotGasLastCall("AttestationGas", "verify-certificate-n4-missing0");
        require(ok, "valid");
        require(used <= 220_000, "stateless verify over 220k");
    }

    function testGasVerifyCertificateOneMissing() public {
        bool ok = verifier.verify(pendingInput, outputHash, _metadata(), partProof);
        vm.snapshotGasLastCall("AttestationGas", "verify-certificate-n4-missing1");
        require(ok, "valid");
    }

    /// @notice The registry's own certificate check, for comparison.
    function testGasRegistryVerifyCertificate() public {
        registry.verifyCertificate(1, digest, fullBitmap, fullSignature);
        vm.snapshotGasLastCall("AttestationGas", "registry-verifyCertificate-n4-missing0");
    }
}

contract AttestationGasRecordedTest is AttestationGasBase {
    function setUp() public override {
        super.setUp();
        attestor.resolve(commitment, fullBitmap, fullSignature);
    }

    function testGasVerifyRecorded() public {
        bool ok = verifier.verify(pendingInput, outputHash, _metadata(), "");
        vm.snapshotGasLastCall("AttestationGas", "verify-recorded");
        require(ok, "valid");
    }

    function testGasReadAttestation() public {
        attestor.attestation(pendingInput);
        vm.snapshotGasLastCall("AttestationGas", "attestation-view");
    }
}
