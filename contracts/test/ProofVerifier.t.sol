// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Attestor} from "../src/Attestor.sol";
import {ResolvdProofVerifier} from "../src/ResolvdProofVerifier.sol";
import {IResolverRegistry, IResolverRegistryErrors} from "../src/interfaces/IResolverRegistry.sol";
import {AttestationHash, Question} from "../src/libraries/AttestationHash.sol";
import {Outcome, VerdictCommitment} from "../src/libraries/VerdictHash.sol";
import {AttestorBase} from "./utils/AttestorBase.sol";
import {Signer} from "./utils/Signer.sol";

/// @notice ResolvdProofVerifier (ERC-8301 IProofVerifier) against real certificates of a
///         4-member committee: accepts the recorded attestation and a certificate at the
///         request's epoch; rejects a tampered output hash, another domain or attestor, an
///         epoch that is not the request's, a contradiction of the record, and malformed
///         input (as `false`, never a revert).
contract ProofVerifierTest is AttestorBase {
    Question internal q;
    bytes32 internal inputHash;
    VerdictCommitment internal c;
    bytes32 internal outputHash;

    function setUp() public {
        _setUpAttestor();
        q = _question(1);
        (, inputHash) = _request(q, FEE);
        c = _commitment(q, Outcome.Reproduced);
        outputHash = AttestationHash.outputHash(c);
    }

    function _cert(uint256 signers) internal view returns (bytes memory) {
        return _proof(c, 1, signers, attestor.domainSeparator());
    }

    /// @notice A certificate is a proof before anyone submitted it to the attestor, and the
    ///         recorded attestation is one after (empty proof); both keep working together.
    function testAcceptsTheCertificateAndTheRecord() public {
        bytes memory proof = _cert(ALL);
        require(verifier.verify(inputHash, outputHash, _metadata(), proof), "certificate");
        require(verifier.verify(inputHash, outputHash, _metadata(), _cert(0x7)), "3 of 4");
        require(!verifier.verify(inputHash, outputHash, _metadata(), ""), "nothing recorded yet");
        _resolve(c, ALL);
        require(verifier.verify(inputHash, outputHash, _metadata(), ""), "recorded");
        require(verifier.verify(inputHash, outputHash, _metadata(), proof), "certificate still");
    }

    /// @notice A tampered output hash fails in both modes, and so does a commitment whose
    ///         verdict was changed after signing.
    function testRejectsATamperedOutputHash() public {
        bytes32 tampered = AttestationHash.outputHash(Outcome.Failed, c.resultHash, c.traceHash);
        require(!verifier.verify(inputHash, tampered, _metadata(), _cert(ALL)), "certificate");
        VerdictCommitment memory changed = c;
        bytes memory signedOriginal = _cert(ALL);
        (, uint256 epoch, bytes memory nonSigners, bytes memory sig) =
            abi.decode(signedOriginal, (VerdictCommitment, uint256, bytes, bytes));
        changed.outcome = Outcome.Failed;
        bytes memory forged = abi.encode(changed, epoch, nonSigners, sig);
        require(!verifier.verify(inputHash, tampered, _metadata(), forged), "forged verdict");
        // The forged commitment matches the tampered output: only the signature refuses it.
        vm.expectRevert(IResolverRegistryErrors.InvalidSignature.selector);
        verifier.checkCertificate(address(attestor), inputHash, tampered, forged);
        vm.expectRevert(
            abi.encodeWithSelector(ResolvdProofVerifier.WrongOutput.selector, outputHash, tampered)
        );
        verifier.checkCertificate(address(attestor), inputHash, outputHash, forged);
        _resolve(c, ALL);
        require(!verifier.verify(inputHash, tampered, _metadata(), ""), "record");
    }

    /// @notice A certificate signed under another domain (the escrow's, another attestor's) or
    ///         presented for another attestor is refused.
    function testRejectsAWrongDomain() public {
        bytes memory escrowSigned = _proof(c, 1, ALL, escrow.domainSeparator());
        require(!verifier.verify(inputHash, outputHash, _metadata(), escrowSigned), "escrow");
        Attestor other = new Attestor(registry, address(this));
        other.setBackend(BACKEND, BACKEND_VERSION, true);
        token.mint(REQUESTER, FEE);
        vm.startPrank(REQUESTER);
        token.approve(address(other), FEE);
        other.request(q, _requestTerms(FEE), "", "", "");
        vm.stopPrank();
        bytes memory otherMeta = abi.encode(address(other));
        require(!verifier.verify(inputHash, outputHash, otherMeta, _cert(ALL)), "other attestor");
        VerdictCommitment memory atOther = c;
        atOther.dealId = other.requestIdOf(inputHash);
        bytes memory otherSigned = _proof(atOther, 1, ALL, other.domainSeparator());
        require(verifier.verify(inputHash, outputHash, otherMeta, otherSigned), "its own: valid");
        require(!verifier.verify(inputHash, outputHash, _metadata(), otherSigned), "not here");
    }

    /// @notice Only the epoch the request pinned counts: a valid certificate of a later epoch
    ///         (a fifth member joined) is refused, and so is the pinned certificate claimed at
    ///         another epoch.
    function testRejectsAnEpochThatIsNotTheRequests() public {
        _registerKey(4);
        vm.warp(block.timestamp + ACTIVATION);
        uint256[] memory five = new uint256[](1);
        five[0] = 4;
        registry.activate(five);
        require(registry.currentEpoch() == 2, "epoch 2");
        // All five members of epoch 2 sign: valid for the registry at epoch 2.
        bytes32 digest = attestor.verdictDigest(c);
        uint256 sum;
        for (uint256 i; i < 5; ++i) {
            sum = addmod(sum, KEY0 + i, Signer.R);
        }
        bytes memory sig = Signer.signScalar(sum, digest);
        bytes memory nonSigners = new bytes(1);
        registry.verifyCertificate(2, digest, nonSigners, sig);
        bytes memory later = abi.encode(c, uint256(2), nonSigners, sig);
        require(!verifier.verify(inputHash, outputHash, _metadata(), later), "epoch 2");
        vm.expectRevert(abi.encodeWithSelector(ResolvdProofVerifier.WrongEpoch.selector, 2, 1));
        verifier.checkCertificate(address(attestor), inputHash, outputHash, later);
        require(verifier.verify(inputHash, outputHash, _metadata(), _cert(ALL)), "epoch 1 still");
    }

    /// @notice Once an answer is recorded, a certificate of a different answer (equivocation)
    ///         is no proof; neither is one for a question never requested.
    function testRejectsContradictionsAndUnrequestedQuestions() public {
        _resolve(c, ALL);
        VerdictCommitment memory failed = _commitment(q, Outcome.Failed);
        bytes memory conflicting = _proof(failed, 1, ALL, attestor.domainSeparator());
        bytes32 failedOut = AttestationHash.outputHash(failed);
        require(!verifier.verify(inputHash, failedOut, _metadata(), conflicting), "contradicted");
        Question memory fresh = _question(2);
        VerdictCommitment memory unasked = _commitment(fresh, Outcome.Reproduced);
        bytes memory unaskedProof = _proof(unasked, 1, ALL, attestor.domainSeparator());
        require(
            !verifier.verify(
                AttestationHash.inputHash(fresh),
                AttestationHash.outputHash(unasked),
                _metadata(),
                unaskedProof
            ),
            "never requested"
        );
    }

    /// @notice Malformed metadata or proof bytes, an address without code, a contract that is
    ///         no attestor, and an attestor on another registry: `false`, no revert.
    function testMalformedInputIsFalseNotARevert() public {
        bytes memory proof = _cert(ALL);
        require(!verifier.verify(inputHash, outputHash, "", proof), "empty metadata");
        require(!verifier.verify(inputHash, outputHash, hex"01", proof), "short metadata");
        bytes memory dirty = abi.encodePacked(bytes32(type(uint256).max));
        require(!verifier.verify(inputHash, outputHash, dirty, proof), "not an address");
        bytes memory eoa = abi.encode(address(0xBEEF));
        require(!verifier.verify(inputHash, outputHash, eoa, proof), "no code");
        require(!verifier.verify(inputHash, outputHash, eoa, ""), "no code, record");
        bytes memory tokenMeta = abi.encode(address(token));
        require(!verifier.verify(inputHash, outputHash, tokenMeta, ""), "not an attestor");
        require(!verifier.verify(inputHash, outputHash, _metadata(), hex"1234"), "short proof");
        ResolvdProofVerifier elsewhere = new ResolvdProofVerifier(escrow.registry());
        require(elsewhere.verify(inputHash, outputHash, _metadata(), proof), "same registry");
        ResolvdProofVerifier foreign =
            new ResolvdProofVerifier(IResolverRegistry(address(attestor)));
        require(!foreign.verify(inputHash, outputHash, _metadata(), proof), "foreign registry");
    }

    /// @notice Fuzz twin of `testMalformedInputIsFalseNotARevert`: arbitrary metadata and proof
    ///         bytes (for the real attestor, too) give `false`, never a revert.
    function testFuzzArbitraryInputIsFalse(
        bytes32 input,
        bytes32 output,
        bytes calldata metadata,
        bytes calldata proof,
        bool realAttestor
    ) public view {
        bytes memory meta = realAttestor ? _metadata() : metadata;
        vm.assume(proof.length > 0 || !realAttestor || input != inputHash);
        require(!verifier.verify(input, output, meta, proof), "arbitrary input is no proof");
    }
}
