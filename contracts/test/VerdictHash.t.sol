// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Outcome, VerdictCommitment, VerdictHash} from "../src/libraries/VerdictHash.sol";
import {Vectors} from "./utils/Vectors.sol";

/// @notice Reproduces every EIP-712 vector the Rust crate pins in
///         proto/vectors/eip712_verdict.json: one digest, two languages.
contract VerdictHashTest is Vectors {
    string internal json;

    function setUp() public {
        json = _read("proto/vectors/eip712_verdict.json");
    }

    function _key(uint256 i, string memory field) internal pure returns (string memory) {
        return string.concat(_at(".vectors", i), ".", field);
    }

    function _commitment(uint256 i) internal view returns (VerdictCommitment memory) {
        return _commitment(json, _at(".vectors", i));
    }

    function _separator(uint256 i) internal view returns (bytes32) {
        return VerdictHash.domainSeparator(
            vm.parseJsonString(json, _key(i, "domain.name")),
            vm.parseJsonString(json, _key(i, "domain.version")),
            vm.parseJsonUint(json, _key(i, "domain.chainId")),
            vm.parseJsonAddress(json, _key(i, "domain.verifyingContract"))
        );
    }

    function testTypeHashMatchesVector() public view {
        require(
            VerdictHash.VERDICT_COMMITMENT_TYPEHASH
                == vm.parseJsonBytes32(json, _key(0, "typeHash")),
            "type hash"
        );
        require(
            keccak256(bytes(vm.parseJsonString(json, ".typeString")))
                == VerdictHash.VERDICT_COMMITMENT_TYPEHASH,
            "type string"
        );
    }

    function testEveryDigestVector() public view {
        uint256 n;
        while (vm.keyExistsJson(json, string.concat(".vectors[", vm.toString(n), "]"))) {
            VerdictCommitment memory c = _commitment(n);
            bytes32 separator = _separator(n);
            require(separator == vm.parseJsonBytes32(json, _key(n, "domainSeparator")), "separator");
            require(
                VerdictHash.hashStruct(c) == vm.parseJsonBytes32(json, _key(n, "structHash")),
                "struct"
            );
            require(
                VerdictHash.digest(separator, c) == vm.parseJsonBytes32(json, _key(n, "digest")),
                "digest"
            );
            n++;
        }
        require(n >= 4, "too few vectors consumed");
    }

    /// @notice Changing any field changes the digest (the check can fail).
    function testDigestBindsOutcome() public view {
        VerdictCommitment memory c = _commitment(0);
        bytes32 separator = _separator(0);
        bytes32 d = VerdictHash.digest(separator, c);
        c.outcome = c.outcome == Outcome.Reproduced ? Outcome.Failed : Outcome.Reproduced;
        require(VerdictHash.digest(separator, c) != d, "outcome not bound");
    }

    function testFuzzDigestBindsDeal(bytes32 dealId) public view {
        VerdictCommitment memory c = _commitment(0);
        bytes32 separator = _separator(0);
        bytes32 d = VerdictHash.digest(separator, c);
        bool same = dealId == c.dealId;
        c.dealId = dealId;
        require((VerdictHash.digest(separator, c) == d) == same, "deal not bound");
    }
}
