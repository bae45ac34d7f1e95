// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Signer} from "./utils/Signer.sol";
import {Vectors} from "./utils/Vectors.sol";

/// @notice The test signer re-creates the vector resolvers' keys exactly.
contract SignerTest is Vectors {
    function testSecretsMatchVectorPublicKeys() public view {
        string memory ev = _read("consensus/vectors/escrow.json");
        for (uint256 i; i < 8; ++i) {
            bytes memory pk =
                vm.parseJsonBytes(ev, string.concat(_at(".resolvers", i), ".publicKey"));
            require(keccak256(Signer.publicKey(Signer.secret(i))) == keccak256(pk), "public key");
        }
    }

    /// @notice A signature made here is byte-identical to the Rust-made partial.
    function testSignatureMatchesVectorPartial() public view {
        string memory ev = _read("consensus/vectors/escrow.json");
        bytes32 digest = vm.parseJsonBytes32(ev, ".deals[0].reproduced.digest");
        uint256[] memory one = new uint256[](1);
        one[0] = 3;
        bytes memory expected = vm.parseJsonBytes(ev, ".deals[0].reproduced.partials[3]");
        require(keccak256(Signer.sign(one, digest)) == keccak256(expected), "partial");
    }
}
