// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {CommitteeHarness} from "./harness/CommitteeHarness.sol";
import {Vectors} from "./utils/Vectors.sol";

/// @notice Gas of one certificate verification for committees of 4, 16, 64 and 256 with full
///         participation and with ~10 % non-signers (consensus/vectors/bls_gas_committees.json).
///         Each case is its own test so storage is cold, as in a real `resolve`. Gas is recorded
///         with `snapshotGasLastCall` into snapshots/BLSGas.json; nothing is asserted about it.
contract BLSGasTest is Vectors {
    string internal json;
    bytes[] internal keys;
    bytes32 internal digest;
    mapping(uint256 => CommitteeHarness) internal committees;

    function setUp() public {
        json = _read("consensus/vectors/bls_gas_committees.json");
        digest = vm.parseJsonBytes32(json, ".digest");
        bytes[] memory all = vm.parseJsonBytesArray(json, ".keys");
        uint256[4] memory sizes = [uint256(4), 16, 64, 256];
        for (uint256 s; s < sizes.length; ++s) {
            uint256 n = sizes[s];
            bytes[] memory k = new bytes[](n);
            uint256[] memory stakes = new uint256[](n);
            for (uint256 i; i < n; ++i) {
                k[i] = all[i];
                stakes[i] = 1;
            }
            committees[n] = new CommitteeHarness(k, stakes, 6667);
        }
    }

    function _case(uint256 index) internal {
        string memory c = _at(".cases", index);
        uint256 n = vm.parseJsonUint(json, string.concat(c, ".n"));
        uint256[] memory nonSigners = vm.parseJsonUintArray(json, string.concat(c, ".nonSigners"));
        bytes memory signature = vm.parseJsonBytes(json, string.concat(c, ".signature"));
        uint256 signed = committees[n].verifyCertificate(digest, nonSigners, signature);
        vm.snapshotGasLastCall("BLSGas", vm.parseJsonString(json, string.concat(c, ".name")));
        require(signed == n - nonSigners.length, "signed stake");
    }

    function testGasCasesAreAllMeasured() public view {
        require(_length(json, ".cases") == 8, "a gas case is not measured");
    }

    function testGasN4Full() public {
        _case(0);
    }

    function testGasN4Missing1() public {
        _case(1);
    }

    function testGasN16Full() public {
        _case(2);
    }

    function testGasN16Missing1() public {
        _case(3);
    }

    function testGasN64Full() public {
        _case(4);
    }

    function testGasN64Missing6() public {
        _case(5);
    }

    function testGasN256Full() public {
        _case(6);
    }

    function testGasN256Missing25() public {
        _case(7);
    }
}
