// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Terms} from "../../src/interfaces/IEscrow.sol";
import {Outcome, VerdictCommitment, VerdictHash} from "../../src/libraries/VerdictHash.sol";
import {Signer} from "./Signer.sol";
import {TestBase} from "./Vm.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice The deal-id preimage of the Terms layout before the resolver fee and challenge bond
///         (what vector files without those fields were generated from).
struct LegacyTerms {
    address seller;
    IERC20 token;
    uint256 amount;
    bytes32 specHash;
    bytes32 prestateAnchorHash;
    bytes32 prestateRoot;
    bytes32 backendId;
    bytes32 backendVersionHash;
    uint256 sellerBond;
    uint64 deliverWindow;
    uint64 challengeWindow;
    uint64 resolveWindow;
    bytes32 salt;
}

/// @notice Reads the golden vector files the Rust crates write.
/// @dev Vector deal ids are derived from the Terms layout their generator knew. When a vector
///      file predates the current layout (no `resolverFee` / `challengeBond` in its terms), its
///      deals get new ids here (`_rekey`), `_commitment` returns commitments under the new id
///      and `_partial` / `_signed` re-sign them with the vector resolvers' keys (test/utils/
///      Signer.sol; deterministic, so byte-equal to what the generator makes for that
///      commitment). For a current vector file nothing changes: its own ids and bytes are used.
abstract contract Vectors is TestBase {
    /// @dev Escrow and buyer the vector deals are funded at / by (EscrowBase deploys there).
    address internal constant ESCROW = address(uint160(0xe5c40001));
    address internal constant BUYER = address(uint160(0x0b0b0001));

    /// @dev Vector deal id => its id under the current Terms layout (0: not rekeyed).
    mapping(bytes32 => bytes32) internal _rekeyed;
    /// @dev Ids that differ from their vector's: their commitments must be re-signed.
    mapping(bytes32 => bool) internal _resign;

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

    /// @notice The deal id `BUYER` gets for `t` at `ESCROW` (Escrow.dealIdOf).
    function _dealIdOf(Terms memory t) internal view returns (bytes32) {
        return keccak256(abi.encode(block.chainid, ESCROW, BUYER, t));
    }

    /// @notice Records the current-layout id of the vector deal at `base` (fields `.dealId`,
    ///         `.terms`) and returns it.
    function _rekey(string memory json, string memory base) internal returns (bytes32 id) {
        bytes32 old = vm.parseJsonBytes32(json, string.concat(base, ".dealId"));
        id = _dealIdOf(_terms(json, base));
        _rekeyed[old] = id;
        if (id != old) {
            // Only a vector file without the new fields may disagree with the contract.
            require(!vm.keyExistsJson(json, string.concat(base, ".terms.resolverFee")), "deal id");
            require(old == _legacyDealIdOf(_terms(json, base)), "legacy deal id");
            _resign[id] = true;
        }
    }

    /// @notice Rekeys every item of `array` (each with `.dealId` and `.terms`).
    function _rekeyAll(string memory json, string memory array) internal {
        uint256 n = _length(json, array);
        for (uint256 k; k < n; ++k) {
            _rekey(json, _at(array, k));
        }
    }

    /// @notice The id the pre-fee Terms layout gave `t` (fee and challenge bond must be 0).
    function _legacyDealIdOf(Terms memory t) internal view returns (bytes32) {
        require(t.resolverFee == 0 && t.challengeBond == 0, "legacy terms");
        LegacyTerms memory l = LegacyTerms(
            t.seller,
            t.token,
            t.amount,
            t.specHash,
            t.prestateAnchorHash,
            t.prestateRoot,
            t.backendId,
            t.backendVersionHash,
            t.sellerBond,
            t.deliverWindow,
            t.challengeWindow,
            t.resolveWindow,
            t.salt
        );
        return keccak256(abi.encode(block.chainid, ESCROW, BUYER, l));
    }

    /// @notice The digest vector resolvers sign for `c` at `ESCROW`.
    function _vectorDigest(VerdictCommitment memory c) internal view returns (bytes32) {
        return
            VerdictHash.digest(
                VerdictHash.domainSeparator("resolvd", "1", block.chainid, ESCROW), c
            );
    }

    /// @notice The vector bytes at `path` if `c` kept its vector id, else the signature of
    ///         `signers` over `c`.
    function _signed(
        string memory json,
        string memory path,
        VerdictCommitment memory c,
        uint256[] memory signers
    ) internal view returns (bytes memory) {
        if (!_resign[c.dealId]) return vm.parseJsonBytes(json, path);
        return Signer.sign(signers, _vectorDigest(c));
    }

    /// @notice Resolver `i`'s partial signature of the commitment at `side` (`.partials[i]`).
    function _partial(string memory json, string memory side, uint256 i)
        internal
        view
        returns (bytes memory)
    {
        uint256[] memory one = new uint256[](1);
        one[0] = i;
        return _signed(
            json,
            string.concat(side, ".partials[", vm.toString(i), "]"),
            _commitment(json, side),
            one
        );
    }

    /// @notice The quorum signature at `side` (`.quorum.signature` by `.quorum.signers`).
    function _quorumSignature(string memory json, string memory side)
        internal
        view
        returns (bytes memory)
    {
        return _signed(
            json,
            string.concat(side, ".quorum.signature"),
            _commitment(json, side),
            vm.parseJsonUintArray(json, string.concat(side, ".quorum.signers"))
        );
    }

    /// @notice `base.commitment` as in the vector, except for a rekeyed deal id.
    function _commitment(string memory json, string memory base)
        internal
        view
        returns (VerdictCommitment memory c)
    {
        c = _vectorCommitment(json, base);
        bytes32 id = _rekeyed[c.dealId];
        if (id != 0) c.dealId = id;
    }

    /// @notice `base.commitment` with the on-chain outcome from `base.onchainOutcome`.
    function _vectorCommitment(string memory json, string memory base)
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
    function _terms(string memory json, string memory base) internal view returns (Terms memory t) {
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
        if (vm.keyExistsJson(json, string.concat(p, "resolverFee"))) {
            t.resolverFee = vm.parseJsonUint(json, string.concat(p, "resolverFee"));
            t.challengeBond = vm.parseJsonUint(json, string.concat(p, "challengeBond"));
        }
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
