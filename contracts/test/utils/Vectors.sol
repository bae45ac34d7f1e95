// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Terms} from "../../src/interfaces/IEscrow.sol";
import {Outcome, VerdictCommitment} from "../../src/libraries/VerdictHash.sol";
import {TestBase} from "./Vm.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice Reads the golden vector files the Rust crates write.
abstract contract Vectors is TestBase {
    function _read(string memory relative) internal view returns (string memory) {
        return vm.readFile(string.concat(vm.projectRoot(), "/../", relative));
    }

    function _at(string memory array, uint256 i) internal pure returns (string memory) {
        return string.concat(array, "[", vm.toString(i), "]");
    }

    /// @notice Number of items in a JSON array (reads until the first missing index).
    function _length(string memory json, string memory array) internal view returns (uint256 n) {
        while (vm.keyExistsJson(json, _at(array, n))) ++n;
    }

    /// @notice `base.commitment` with the on-chain outcome from `base.onchainOutcome`.
    function _commitment(string memory json, string memory base)
        internal
        pure
        returns (VerdictCommitment memory c)
    {
        string memory p = string.concat(base, ".commitment.");
        c.dealId = vm.parseJsonBytes32(json, string.concat(p, "dealId"));
        c.specHash = vm.parseJsonBytes32(json, string.concat(p, "specHash"));
        c.deliveryHash = vm.parseJsonBytes32(json, string.concat(p, "deliveryHash"));
        c.prestateAnchorHash = vm.parseJsonBytes32(json, string.concat(p, "prestateAnchorHash"));
        c.prestateRoot = vm.parseJsonBytes32(json, string.concat(p, "prestateRoot"));
        c.backendId = vm.parseJsonBytes32(json, string.concat(p, "backendId"));
        c.backendVersionHash = vm.parseJsonBytes32(json, string.concat(p, "backendVersionHash"));
        c.outcome = Outcome(vm.parseJsonUint(json, string.concat(base, ".onchainOutcome")));
        c.resultHash = vm.parseJsonBytes32(json, string.concat(p, "resultHash"));
        c.traceHash = vm.parseJsonBytes32(json, string.concat(p, "traceHash"));
    }

    /// @notice `base.terms` of an escrow vector file.
    function _terms(string memory json, string memory base) internal pure returns (Terms memory t) {
        string memory p = string.concat(base, ".terms.");
        t.seller = vm.parseJsonAddress(json, string.concat(p, "seller"));
        t.token = IERC20(vm.parseJsonAddress(json, string.concat(p, "token")));
        t.amount = vm.parseJsonUint(json, string.concat(p, "amount"));
        t.specHash = vm.parseJsonBytes32(json, string.concat(p, "specHash"));
        t.prestateAnchorHash = vm.parseJsonBytes32(json, string.concat(p, "prestateAnchorHash"));
        t.prestateRoot = vm.parseJsonBytes32(json, string.concat(p, "prestateRoot"));
        t.backendId = vm.parseJsonBytes32(json, string.concat(p, "backendId"));
        t.backendVersionHash = vm.parseJsonBytes32(json, string.concat(p, "backendVersionHash"));
        t.sellerBond = vm.parseJsonUint(json, string.concat(p, "sellerBond"));
        // forge-lint: disable-next-line(unsafe-typecast)
        t.deliverWindow = uint64(vm.parseJsonUint(json, string.concat(p, "deliverWindow")));
        // forge-lint: disable-next-line(unsafe-typecast)
        t.challengeWindow = uint64(vm.parseJsonUint(json, string.concat(p, "challengeWindow")));
        // forge-lint: disable-next-line(unsafe-typecast)
        t.resolveWindow = uint64(vm.parseJsonUint(json, string.concat(p, "resolveWindow")));
        t.salt = vm.parseJsonBytes32(json, string.concat(p, "salt"));
    }

    /// @notice Fails unless the file's top-level keys are exactly `known`.
    function _requireKeys(string memory json, string[] memory known) internal pure {
        string[] memory keys = vm.parseJsonKeys(json, "$");
        require(keys.length == known.length, "vector file has unread sections");
        for (uint256 i; i < keys.length; ++i) {
            bool found;
            for (uint256 j; j < known.length; ++j) {
                if (keccak256(bytes(keys[i])) == keccak256(bytes(known[j]))) found = true;
            }
            require(found, string.concat("unread vector section: ", keys[i]));
        }
    }
}
