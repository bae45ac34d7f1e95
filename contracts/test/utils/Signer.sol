// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {BLS} from "../../src/libraries/BLS.sol";

/// @notice Re-creates the vector resolvers' BLS secret keys (resolvd-consensus
///         `tests/it/vectors.rs::secret(i)`: the EIP-2333 master key of the seed
///         `be64(i + 1) || 0x5e * 24`) and signs digests with them through EIP-2537 G2MSM. BLS
///         signatures are deterministic, so a signature made here equals the one the Rust
///         generator makes for the same commitment: tests re-sign when a commitment's deal id
///         changed with the Terms layout, and use the vector's own bytes when it did not.
library Signer {
    /// @dev BLS12-381 subgroup order.
    uint256 internal constant R =
        0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001;
    address internal constant G1MSM = address(0x0c);
    address internal constant G2MSM = address(0x0e);

    /// @notice Vector resolver `i`'s secret scalar.
    function secret(uint256 i) internal pure returns (uint256) {
        bytes memory seed = abi.encodePacked(uint64(i + 1), bytes24(type(uint192).max));
        for (uint256 j = 8; j < 32; ++j) {
            seed[j] = 0x5e;
        }
        return masterKey(seed);
    }

    /// @notice EIP-2333 `derive_master_SK(seed)` = HKDF_mod_r(seed) with an empty key_info.
    function masterKey(bytes memory seed) internal pure returns (uint256 sk) {
        bytes32 salt = "BLS-SIG-KEYGEN-SALT-";
        bytes memory s = abi.encodePacked(bytes20(salt));
        while (sk == 0) {
            s = abi.encodePacked(sha256(s));
            bytes32 prk = _hmac(s, abi.encodePacked(seed, uint8(0)));
            bytes memory k = abi.encodePacked(prk);
            bytes32 t1 = _hmac(k, abi.encodePacked(uint16(48), uint8(1)));
            bytes32 t2 = _hmac(k, abi.encodePacked(t1, uint16(48), uint8(2)));
            uint256 hi = uint256(t1) >> 128;
            uint256 lo = (uint256(t1) << 128) | (uint256(t2) >> 128);
            // OS2IP(t1 || t2[..16]) = hi * 2^256 + lo, reduced mod r.
            uint256 twoTo256 = addmod(type(uint256).max % R, 1, R);
            sk = addmod(mulmod(hi, twoTo256, R), lo % R, R);
        }
    }

    /// @notice The aggregate signature of `signers` (vector indices) over `digest`:
    ///         (sum of their scalars) * H(digest), one G2MSM.
    function sign(uint256[] memory signers, bytes32 digest) internal view returns (bytes memory) {
        uint256 sum;
        for (uint256 i; i < signers.length; ++i) {
            sum = addmod(sum, secret(signers[i]), R);
        }
        return signScalar(sum, digest);
    }

    /// @notice `scalar * H(digest)` under the signature DST.
    function signScalar(uint256 scalar, bytes32 digest) internal view returns (bytes memory out) {
        bytes memory h = BLS.hashToG2(abi.encodePacked(digest), BLS.SIG_DST);
        (bool ok, bytes memory r) = G2MSM.staticcall(abi.encodePacked(h, scalar));
        require(ok && r.length == 256, "G2MSM");
        out = r;
    }

    /// @notice `scalar * G1` (a public key).
    function publicKey(uint256 scalar) internal view returns (bytes memory) {
        bytes memory g = abi.encodePacked(
            bytes16(0),
            hex"17f1d3a73197d7942695638c4fa9ac0fc3688c4f9774b905a14e3a3f171bac586c55e83ff97a1aeffb3af00adb22c6bb",
            bytes16(0),
            hex"08b3f481e3aaa0f1a09e30ed741d8ae4fcf5e095d5d00af600db18cb2c04b3edd03cc744a2888ae40caa232946c5e7e1"
        );
        (bool ok, bytes memory r) = G1MSM.staticcall(abi.encodePacked(g, scalar));
        require(ok && r.length == 128, "G1MSM");
        return r;
    }

    function _hmac(bytes memory key, bytes memory message) private pure returns (bytes32) {
        bytes memory k = new bytes(64);
        for (uint256 i; i < key.length; ++i) {
            k[i] = key[i];
        }
        bytes memory ipad = new bytes(64);
        bytes memory opad = new bytes(64);
        for (uint256 i; i < 64; ++i) {
            ipad[i] = k[i] ^ 0x36;
            opad[i] = k[i] ^ 0x5c;
        }
        return sha256(abi.encodePacked(opad, sha256(abi.encodePacked(ipad, message))));
    }
}
