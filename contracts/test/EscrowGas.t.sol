// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Terms} from "../src/interfaces/IEscrow.sol";
import {VerdictCommitment} from "../src/libraries/VerdictHash.sol";
import {EcdsaQuorum} from "./harness/EcdsaQuorum.sol";
import {EscrowBase} from "./utils/EscrowBase.sol";

/// @notice Gas of `Escrow.resolve` (certificate verification through the registry, field
///         checks, events, payout) for committees of n resolvers with 0 and ~10 % non-signers,
///         next to the seed's k-of-n ECDSA quorum check for the same n. Each measured call is
///         the only call of its test, so storage is cold as in production. Recorded with
///         `snapshotGasLastCall` into snapshots/EscrowGas.json; nothing is asserted about it.
abstract contract EscrowGasBase is EscrowBase {
    string internal gv;
    EcdsaQuorum internal ecdsa;
    bytes32[2] internal dealIds;

    function _n() internal pure virtual returns (uint256);

    /// @dev Index of this size's first case in escrow_gas.json (cases: n4 x2, n16 x2, ...).
    function _firstCase() internal pure virtual returns (uint256);

    function setUp() public {
        gv = _read("consensus/vectors/escrow_gas.json");
        _deploySystem();
        _registerResolvers(gv, _n());
        // The full and the 10 % case share the deal: dispute it once per test.
        string memory c = _at(".cases", _firstCase());
        require(vm.parseJsonUint(gv, string.concat(c, ".n")) == _n(), "case order");
        _dispute(gv, c);
        address[] memory signers = new address[](_n());
        for (uint256 i; i < _n(); ++i) {
            signers[i] = vm.addr(i + 1);
        }
        ecdsa = new EcdsaQuorum(signers);
    }

    function _resolve(uint256 offset) internal {
        string memory c = _at(".cases", _firstCase() + offset);
        VerdictCommitment memory commitment = _commitment(gv, c);
        uint256[] memory non = vm.parseJsonUintArray(gv, string.concat(c, ".nonSigners"));
        bytes memory sig = vm.parseJsonBytes(gv, string.concat(c, ".signature"));
        escrow.resolve(commitment, non, sig);
        vm.snapshotGasLastCall(
            "EscrowGas",
            string.concat("resolve-", vm.parseJsonString(gv, string.concat(c, ".name")))
        );
        require(_owed(SELLER) > 0, "paid");
    }

    function testGasResolveFull() public {
        _resolve(0);
    }

    function testGasResolveTenPercentMissing() public {
        _resolve(1);
    }

    function testGasEcdsaQuorum() public {
        bytes32 digest = keccak256("digest");
        uint256 k = (2 * _n() + 2) / 3;
        // Signers sorted by address: sort the first k private keys by their address.
        uint256[] memory keys = new uint256[](_n());
        for (uint256 i; i < _n(); ++i) {
            keys[i] = i + 1;
        }
        for (uint256 i; i < _n(); ++i) {
            for (uint256 j = i + 1; j < _n(); ++j) {
                if (vm.addr(keys[j]) < vm.addr(keys[i])) (keys[i], keys[j]) = (keys[j], keys[i]);
            }
        }
        bytes[] memory sigs = new bytes[](k);
        uint256 taken;
        for (uint256 i; i < _n() && taken < k; ++i) {
            (uint8 v, bytes32 r, bytes32 s) = vm.sign(keys[i], digest);
            sigs[taken++] = abi.encodePacked(r, s, v);
        }
        require(ecdsa.verify(digest, sigs), "ecdsa");
        vm.snapshotGasLastCall("EscrowGas", string.concat("ecdsa-quorum-n", vm.toString(_n())));
    }
}

contract EscrowGas4Test is EscrowGasBase {
    function _n() internal pure override returns (uint256) {
        return 4;
    }

    function _firstCase() internal pure override returns (uint256) {
        return 0;
    }
}

contract EscrowGas16Test is EscrowGasBase {
    function _n() internal pure override returns (uint256) {
        return 16;
    }

    function _firstCase() internal pure override returns (uint256) {
        return 2;
    }
}

contract EscrowGas64Test is EscrowGasBase {
    function _n() internal pure override returns (uint256) {
        return 64;
    }

    function _firstCase() internal pure override returns (uint256) {
        return 4;
    }
}

contract EscrowGas256Test is EscrowGasBase {
    function _n() internal pure override returns (uint256) {
        return 256;
    }

    function _firstCase() internal pure override returns (uint256) {
        return 6;
    }
}
