// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Attestor} from "../../src/Attestor.sol";
import {RegistrySlashing} from "../../src/RegistrySlashing.sol";
import {ResolvdProofVerifier} from "../../src/ResolvdProofVerifier.sol";
import {RequestTerms} from "../../src/interfaces/IAttestor.sol";
import {AttestationHash, Question} from "../../src/libraries/AttestationHash.sol";
import {BLS} from "../../src/libraries/BLS.sol";
import {Outcome, VerdictCommitment, VerdictHash} from "../../src/libraries/VerdictHash.sol";
import {EscrowBase} from "./EscrowBase.sol";
import {Signer} from "./Signer.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice A 4-member committee with real BLS keys (scalars `KEY0 + i`, proofs of possession
///         made here with G2MSM, as in NonSignerGas.t.sol), an Attestor and a
///         ResolvdProofVerifier on its registry, and helpers to request, sign and certify.
///         Content (spec, anchor, delivery) is opaque bytes hashed with the content-hash rule:
///         the contracts never parse it.
abstract contract AttestorBase is EscrowBase {
    uint256 internal constant KEY0 = 1000;
    uint256 internal constant N = 4;
    uint256 internal constant FEE = 1e18;
    uint256 internal constant CAP = 0.01e18;
    uint256 internal constant WINDOW = 1 hours;
    /// @dev All four members sign.
    uint256 internal constant ALL = 0xf;
    address internal constant REQUESTER = address(uint160(0x7e0e57));
    address internal constant SUBMITTER = address(uint160(0x5b317));
    bytes32 internal constant BACKEND = keccak256("reexec-evm");
    bytes32 internal constant BACKEND_VERSION = keccak256("reexec-evm 1.0.0");

    Attestor internal attestor;
    ResolvdProofVerifier internal verifier;
    IERC20 internal tok;

    function _setUpAttestor() internal {
        _deploySystem();
        // Before the first epoch the owner's parameters apply at once.
        RegistrySlashing(address(registry)).setGasRefundCap(IERC20(TOKEN), CAP);
        tok = IERC20(TOKEN);
        uint256[] memory all = new uint256[](N);
        for (uint256 i; i < N; ++i) {
            all[i] = _registerKey(i);
        }
        vm.warp(block.timestamp + ACTIVATION);
        registry.activate(all);
        attestor = new Attestor(registry, address(this));
        verifier = new ResolvdProofVerifier(registry);
        attestor.setBackend(BACKEND, BACKEND_VERSION, true);
    }

    function _pop(uint256 sk, bytes memory pk, address op) internal view returns (bytes memory) {
        bytes memory h = BLS.hashToG2(
            bytes.concat(BLS.compressG1(pk), abi.encodePacked(block.chainid, REGISTRY, op)),
            BLS.POP_DST
        );
        (bool ok, bytes memory r) = address(0x0e).staticcall(abi.encodePacked(h, sk));
        require(ok && r.length == 256, "G2MSM");
        return r;
    }

    /// @dev Registers member `i` (key `KEY0 + i`, operator `_operator(i)`, bond BOND).
    function _registerKey(uint256 i) internal returns (uint256 index) {
        bytes memory pk = Signer.publicKey(KEY0 + i);
        address op = _operator(i);
        bytes memory pop = _pop(KEY0 + i, pk, op);
        token.mint(op, BOND);
        vm.startPrank(op);
        token.approve(address(registry), BOND);
        index = registry.register(pk, pop, BOND);
        vm.stopPrank();
    }

    function _spec(uint256 k) internal pure returns (bytes memory) {
        return abi.encodePacked("spec v1 #", bytes32(k));
    }

    function _anchor(uint256 k) internal pure returns (bytes memory) {
        return abi.encodePacked("prestate anchor #", bytes32(k));
    }

    function _delivery(uint256 k) internal pure returns (bytes memory) {
        return abi.encodePacked("delivery: plan and claimed result #", bytes32(k));
    }

    /// @dev Question `k`: content hashes of `_spec(k)`, `_anchor(k)`, `_delivery(k)`.
    function _question(uint256 k) internal pure returns (Question memory q) {
        q.specHash = sha256(abi.encodePacked("reckn/v1/spec", _spec(k)));
        q.deliveryHash = sha256(abi.encodePacked("reckn/v1/delivery", _delivery(k)));
        q.prestateAnchorHash = sha256(abi.encodePacked("reckn/v1/prestate-anchor", _anchor(k)));
        q.prestateRoot = keccak256(abi.encode("state root", k));
        q.backendId = BACKEND;
        q.backendVersionHash = BACKEND_VERSION;
    }

    function _requestTerms(uint256 fee) internal view returns (RequestTerms memory) {
        return RequestTerms({token: tok, fee: fee, resolveWindow: WINDOW});
    }

    /// @dev REQUESTER requests question `q` with `fee` (content not published).
    function _request(Question memory q, uint256 fee)
        internal
        returns (bytes32 id, bytes32 inputHash)
    {
        token.mint(REQUESTER, fee);
        vm.startPrank(REQUESTER);
        token.approve(address(attestor), fee);
        (id, inputHash) = attestor.request(q, _requestTerms(fee), "", "", "");
        vm.stopPrank();
    }

    /// @dev The commitment answering `q` at the attestor with `outcome`.
    function _commitment(Question memory q, Outcome outcome)
        internal
        view
        returns (VerdictCommitment memory c)
    {
        c.dealId = attestor.requestIdOf(AttestationHash.inputHash(q));
        c.specHash = q.specHash;
        c.deliveryHash = q.deliveryHash;
        c.prestateAnchorHash = q.prestateAnchorHash;
        c.prestateRoot = q.prestateRoot;
        c.backendId = q.backendId;
        c.backendVersionHash = q.backendVersionHash;
        c.outcome = outcome;
        c.resultHash = sha256(abi.encodePacked("reckn/v1/evm-return-data", uint256(42)));
        c.traceHash = keccak256(abi.encode("replay record", q.specHash, outcome));
    }

    /// @dev The non-signer bitmap and aggregate signature over `digest` of the members whose
    ///      bit is set in `signers` (bit p = position p = member p).
    function _signBy(uint256 signers, bytes32 digest)
        internal
        view
        returns (bytes memory nonSigners, bytes memory signature)
    {
        nonSigners = new bytes(1);
        uint256 sum;
        for (uint256 p; p < N; ++p) {
            if (signers >> p & 1 == 1) {
                sum = addmod(sum, KEY0 + p, Signer.R);
            } else {
                nonSigners[0] |= bytes1(uint8(1 << p));
            }
        }
        signature = Signer.signScalar(sum, digest);
    }

    /// @dev A certificate of `signers` over `c` under `separator`.
    function _certify(VerdictCommitment memory c, uint256 signers, bytes32 separator)
        internal
        view
        returns (bytes memory nonSigners, bytes memory signature)
    {
        return _signBy(signers, VerdictHash.digest(separator, c));
    }

    /// @dev The ERC-8301 proof ResolvdProofVerifier takes: a certificate at `epoch`.
    function _proof(VerdictCommitment memory c, uint256 epoch, uint256 signers, bytes32 separator)
        internal
        view
        returns (bytes memory)
    {
        (bytes memory nonSigners, bytes memory signature) = _certify(c, signers, separator);
        return abi.encode(c, epoch, nonSigners, signature);
    }

    /// @dev SUBMITTER resolves `c` with the certificate of `signers` under the attestor's domain.
    function _resolve(VerdictCommitment memory c, uint256 signers) internal {
        (bytes memory nonSigners, bytes memory signature) =
            _certify(c, signers, attestor.domainSeparator());
        vm.prank(SUBMITTER);
        attestor.resolve(c, nonSigners, signature);
    }

    function _metadata() internal view returns (bytes memory) {
        return abi.encode(address(attestor));
    }

    function _epochs(uint256 epoch) internal pure returns (uint256[] memory e) {
        e = new uint256[](1);
        e[0] = epoch;
    }
}
