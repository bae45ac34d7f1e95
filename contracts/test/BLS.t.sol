// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {BLS} from "../src/libraries/BLS.sol";
import {VerdictCommitment, VerdictHash} from "../src/libraries/VerdictHash.sol";
import {BLSCaller, CommitteeHarness} from "./harness/CommitteeHarness.sol";
import {Vectors} from "./utils/Vectors.sol";

/// @notice Verifies every vector in consensus/vectors/bls.json and the RFC 9380 hash_to_G2
///         vectors with the EIP-2537 BLS library: one certificate, two languages.
contract BLSTest is Vectors {
    string internal bls;
    string internal rfc;
    BLSCaller internal caller;
    /// @dev The library forwards all remaining gas to the precompiles, and a failing EIP-2537
    ///      call consumes what it was given: calls expected to fail get a bounded budget.
    uint256 internal constant PRECOMPILE_FAILURE_GAS = 2_000_000;

    function setUp() public {
        bls = _read("consensus/vectors/bls.json");
        rfc = _read("consensus/vectors/rfc9380_hash_to_g2.json");
        caller = new BLSCaller();
    }

    function _pad(bytes memory fp48) internal pure returns (bytes memory) {
        return abi.encodePacked(bytes16(0), fp48);
    }

    function _fp2(string memory base) internal view returns (bytes memory) {
        return abi.encodePacked(
            _pad(vm.parseJsonBytes(rfc, string.concat(base, "[0]"))),
            _pad(vm.parseJsonBytes(rfc, string.concat(base, "[1]")))
        );
    }

    function testRfc9380HashToG2() public view {
        string[] memory known = new string[](4);
        (known[0], known[1], known[2], known[3]) = ("description", "suite", "dst", "vectors");
        _requireKeys(rfc, known);
        bytes memory dst = bytes(vm.parseJsonString(rfc, ".dst"));
        uint256 n = _length(rfc, ".vectors");
        for (uint256 i; i < n; ++i) {
            string memory v = _at(".vectors", i);
            bytes memory message = bytes(vm.parseJsonString(rfc, string.concat(v, ".msg")));
            (bytes memory u0, bytes memory u1) = caller.hashToFieldFp2(message, dst);
            require(keccak256(u0) == keccak256(_fp2(string.concat(v, ".u0"))), "u0");
            require(keccak256(u1) == keccak256(_fp2(string.concat(v, ".u1"))), "u1");
            bytes memory expected =
                abi.encodePacked(_fp2(string.concat(v, ".P.x")), _fp2(string.concat(v, ".P.y")));
            require(keccak256(caller.hashToG2(message, dst)) == keccak256(expected), "P");
        }
        require(n == 5, "RFC 9380 J.10.1 has five vectors");
    }

    function testBlsVectorSectionsAreAllRead() public view {
        string[] memory known = new string[](11);
        (known[0], known[1], known[2], known[3], known[4]) =
        ("description", "sigDst", "popDst", "domain", "keys");
        (known[5], known[6], known[7], known[8], known[9]) =
        ("signatures", "aggregates", "certificates", "equivocations", "negative");
        known[10] = "popBinding";
        _requireKeys(bls, known);
    }

    function testDstsMatch() public view {
        require(
            keccak256(bytes(vm.parseJsonString(bls, ".sigDst"))) == keccak256(BLS.SIG_DST), "sig"
        );
        require(
            keccak256(bytes(vm.parseJsonString(bls, ".popDst"))) == keccak256(BLS.POP_DST), "pop"
        );
    }

    function _key(uint256 i) internal view returns (bytes memory) {
        return vm.parseJsonBytes(bls, string.concat(_at(".keys", i), ".publicKeyG1"));
    }

    /// @dev What the registry appends to the compressed key: chain id, registry, operator.
    function _binding(address operator) internal view returns (bytes memory) {
        return abi.encodePacked(
            vm.parseJsonUint(bls, ".popBinding.chainId"),
            vm.parseJsonAddress(bls, ".popBinding.registry"),
            operator
        );
    }

    function testKeysCompressAndProvePossession() public view {
        uint256 n = _length(bls, ".keys");
        for (uint256 i; i < n; ++i) {
            string memory k = _at(".keys", i);
            bytes memory pk = _key(i);
            bytes memory compressed = vm.parseJsonBytes(bls, string.concat(k, ".publicKey"));
            require(keccak256(caller.compressG1(pk)) == keccak256(compressed), "compression");
            bytes memory pop = vm.parseJsonBytes(bls, string.concat(k, ".proofOfPossession"));
            require(caller.verifyProofOfPossession(pk, pop), "pop");
            bytes memory bound = vm.parseJsonBytes(bls, string.concat(k, ".boundProofOfPossession"));
            bytes memory binding = _binding(vm.parseJsonAddress(bls, string.concat(k, ".operator")));
            require(caller.verifyBoundProofOfPossession(pk, bound, binding), "bound pop");
            require(!caller.verifyBoundProofOfPossession(pk, pop, binding), "unbound as bound");
        }
        require(n == 8, "keys");
    }

    function testSignatures() public view {
        uint256 n = _length(bls, ".signatures");
        for (uint256 i; i < n; ++i) {
            string memory v = _at(".signatures", i);
            bytes memory pk = _key(vm.parseJsonUint(bls, string.concat(v, ".key")));
            bytes32 digest = vm.parseJsonBytes32(bls, string.concat(v, ".digest"));
            bytes memory sig = vm.parseJsonBytes(bls, string.concat(v, ".signature"));
            require(caller.verifyDigest(pk, digest, sig), "signature");
        }
        require(n > 0, "signatures");
    }

    function testAggregates() public view {
        uint256 n = _length(bls, ".aggregates");
        for (uint256 i; i < n; ++i) {
            string memory v = _at(".aggregates", i);
            uint256[] memory signers = vm.parseJsonUintArray(bls, string.concat(v, ".signers"));
            bytes memory key = _key(signers[0]);
            for (uint256 j = 1; j < signers.length; ++j) {
                key = caller.addG1(key, _key(signers[j]));
            }
            bytes memory expected = vm.parseJsonBytes(bls, string.concat(v, ".aggregateKey"));
            require(keccak256(key) == keccak256(expected), "aggregate key");
            bytes32 digest = vm.parseJsonBytes32(bls, string.concat(v, ".digest"));
            bytes memory sig = vm.parseJsonBytes(bls, string.concat(v, ".signature"));
            require(caller.verifyDigest(key, digest, sig), "aggregate signature");
        }
        require(n == 8, "aggregates");
    }

    function _separator() internal view returns (bytes32) {
        return VerdictHash.domainSeparator(
            vm.parseJsonString(bls, ".domain.name"),
            vm.parseJsonString(bls, ".domain.version"),
            vm.parseJsonUint(bls, ".domain.chainId"),
            vm.parseJsonAddress(bls, ".domain.verifyingContract")
        );
    }

    function _committee(uint256 size, uint256[] memory stakes, uint256 bps)
        internal
        returns (CommitteeHarness)
    {
        bytes[] memory keys = new bytes[](size);
        for (uint256 i; i < size; ++i) {
            keys[i] = _key(i);
        }
        return new CommitteeHarness(keys, stakes, bps);
    }

    function _certificateCommittee(uint256 i) internal returns (CommitteeHarness) {
        string memory v = _at(".certificates", i);
        return _committee(
            vm.parseJsonUint(bls, string.concat(v, ".committeeSize")),
            vm.parseJsonUintArray(bls, string.concat(v, ".stakes")),
            vm.parseJsonUint(bls, string.concat(v, ".thresholdBps"))
        );
    }

    function testCertificates() public {
        uint256 n = _length(bls, ".certificates");
        for (uint256 i; i < n; ++i) {
            string memory v = _at(".certificates", i);
            CommitteeHarness committee = _certificateCommittee(i);
            VerdictCommitment memory c = _commitment(bls, v);
            bytes32 digest = VerdictHash.digest(_separator(), c);
            require(digest == vm.parseJsonBytes32(bls, string.concat(v, ".digest")), "digest");
            uint256 signed = committee.verifyCertificate(
                digest,
                vm.parseJsonUintArray(bls, string.concat(v, ".nonSigners")),
                vm.parseJsonBytes(bls, string.concat(v, ".signature"))
            );
            require(signed == vm.parseJsonUint(bls, string.concat(v, ".signedStake")), "stake");
        }
        require(n == 3, "certificates");
    }

    function testEquivocations() public {
        uint256 n = _length(bls, ".equivocations");
        for (uint256 i; i < n; ++i) {
            string memory v = _at(".equivocations", i);
            uint256 size = vm.parseJsonUint(bls, string.concat(v, ".committeeSize"));
            CommitteeHarness committee = _committee(size, new uint256[](size), 6667);
            string[2] memory sides = [string.concat(v, ".first"), string.concat(v, ".second")];
            uint256[][2] memory signers;
            bytes32[2] memory digests;
            for (uint256 s; s < 2; ++s) {
                digests[s] = VerdictHash.digest(_separator(), _commitment(bls, sides[s]));
                require(
                    digests[s] == vm.parseJsonBytes32(bls, string.concat(sides[s], ".digest")),
                    "digest"
                );
                signers[s] = vm.parseJsonUintArray(bls, string.concat(sides[s], ".signers"));
                require(
                    committee.verifyAggregate(
                        digests[s],
                        signers[s],
                        vm.parseJsonBytes(bls, string.concat(sides[s], ".signature"))
                    ),
                    "aggregate"
                );
            }
            require(digests[0] != digests[1], "not a conflict");
            uint256[] memory expected =
                vm.parseJsonUintArray(bls, string.concat(v, ".equivocators"));
            uint256 k;
            for (uint256 a; a < signers[0].length; ++a) {
                for (uint256 b; b < signers[1].length; ++b) {
                    if (signers[0][a] == signers[1][b]) {
                        require(expected[k++] == signers[0][a], "equivocator");
                    }
                }
            }
            require(k == expected.length && k > 0, "equivocator count");
        }
        require(n > 0, "equivocations");
    }

    function _eq(string memory a, string memory b) internal pure returns (bool) {
        return keccak256(bytes(a)) == keccak256(bytes(b));
    }

    function _selector(bytes memory reason) internal pure returns (bytes4 s) {
        // forge-lint: disable-next-line(unsafe-typecast)
        if (reason.length >= 4) s = bytes4(reason); // the selector: first four bytes
    }

    /// @dev Expected on-chain behaviour per Rust error code.
    function _expectSignatureFailure(bytes memory reason, bool returned, string memory error)
        internal
        pure
    {
        if (_eq(error, "VerifyFailed")) {
            require(returned && reason.length == 0, "expected a false result");
        } else if (_eq(error, "Infinity")) {
            require(
                _selector(reason) == BLS.BLSPointAtInfinity.selector, "expected infinity revert"
            );
        } else if (_eq(error, "NotInSubgroup") || _eq(error, "InvalidEncoding")) {
            require(
                keccak256(reason)
                    == keccak256(
                        abi.encodeWithSelector(BLS.BLSPrecompileFailed.selector, BLS.PAIRING)
                    ),
                "expected pairing precompile failure"
            );
        } else {
            revert(string.concat("unhandled error ", error));
        }
    }

    function testNegativeVectors() public {
        uint256 n = _length(bls, ".negative");
        for (uint256 i; i < n; ++i) {
            string memory v = _at(".negative", i);
            string memory check = vm.parseJsonString(bls, string.concat(v, ".check"));
            string memory error = vm.parseJsonString(bls, string.concat(v, ".error"));
            if (_eq(check, "signature")) {
                bytes memory pk = vm.parseJsonBytes(bls, string.concat(v, ".publicKey"));
                bytes32 digest = vm.parseJsonBytes32(bls, string.concat(v, ".digest"));
                bytes memory sig = vm.parseJsonBytes(bls, string.concat(v, ".signature"));
                try caller.verifyDigest{gas: PRECOMPILE_FAILURE_GAS}(pk, digest, sig) returns (
                    bool ok
                ) {
                    require(!ok, "accepted a bad signature");
                    _expectSignatureFailure("", true, error);
                } catch (bytes memory reason) {
                    _expectSignatureFailure(reason, false, error);
                }
            } else if (_eq(check, "proofOfPossession")) {
                require(_eq(error, "InvalidProofOfPossession"), "pop error");
                require(
                    !caller.verifyProofOfPossession{gas: PRECOMPILE_FAILURE_GAS}(
                        vm.parseJsonBytes(bls, string.concat(v, ".publicKey")),
                        vm.parseJsonBytes(bls, string.concat(v, ".signature"))
                    ),
                    "accepted a bad proof of possession"
                );
            } else if (_eq(check, "boundProofOfPossession")) {
                require(_eq(error, "InvalidProofOfPossession"), "pop error");
                require(
                    !caller.verifyBoundProofOfPossession{gas: PRECOMPILE_FAILURE_GAS}(
                        vm.parseJsonBytes(bls, string.concat(v, ".publicKey")),
                        vm.parseJsonBytes(bls, string.concat(v, ".signature")),
                        _binding(vm.parseJsonAddress(bls, string.concat(v, ".operator")))
                    ),
                    "accepted a bad bound proof of possession"
                );
            } else if (_eq(check, "certificate")) {
                uint256 base = vm.parseJsonUint(bls, string.concat(v, ".certificate"));
                string memory cert = _at(".certificates", base);
                CommitteeHarness committee = _certificateCommittee(base);
                try committee.verifyCertificate(
                    vm.parseJsonBytes32(bls, string.concat(cert, ".digest")),
                    vm.parseJsonUintArray(bls, string.concat(v, ".nonSigners")),
                    vm.parseJsonBytes(bls, string.concat(cert, ".signature"))
                ) returns (
                    uint256
                ) {
                    revert("accepted a bad certificate");
                } catch (bytes memory reason) {
                    bytes4 want = _eq(error, "IndexOutOfRange")
                        ? CommitteeHarness.IndexOutOfRange.selector
                        : _eq(error, "IndicesNotAscending")
                            ? CommitteeHarness.IndicesNotAscending.selector
                            : _eq(error, "BelowThreshold")
                                ? CommitteeHarness.BelowThreshold.selector
                                : _eq(error, "VerifyFailed")
                                    ? CommitteeHarness.VerifyFailed.selector
                                    : bytes4(0);
                    require(want != bytes4(0), string.concat("unhandled error ", error));
                    require(_selector(reason) == want, string.concat("wrong revert for ", error));
                }
            } else {
                revert(string.concat("unknown check ", check));
            }
        }
        require(n > 0, "negative vectors");
    }

    /// @notice A valid signature stops verifying when any message bit changes.
    function testFuzzDigestBinding(bytes32 digest) public view {
        bytes32 signed = vm.parseJsonBytes32(bls, ".signatures[0].digest");
        bool ok = caller.verifyDigest(
            _key(0), digest, vm.parseJsonBytes(bls, ".signatures[0].signature")
        );
        require(ok == (digest == signed), "binding");
    }
}
