// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @title BLS
/// @notice BLS12-381 "minimal-pubkey-size" verification over the EIP-2537 precompiles (Prague):
///         public keys in G1 (128-byte EIP-2537 encoding), signatures in G2 (256 bytes),
///         ciphersuite BLS_SIG_BLS12381G2_XMD:SHA-256_SSWU_RO_POP_ with proof of possession.
/// @dev Every precompile call forwards all remaining gas (so a repricing of EIP-2537, or a chain
///      that prices it differently, cannot make verification fail) and checks both success and
///      the exact output length, after its input length was fixed by construction or checked.
///      An invalid point (off the curve, outside the subgroup, a non-canonical field element)
///      makes the precompile fail and, per EIP-2537, consume the gas it was given: the call
///      reverts with `BLSPrecompileFailed(address)`, paid by whoever submitted the bad point.
///      G1 points: pad16(x) || pad16(y). G2 points: pad16(x.c0) || pad16(x.c1) || pad16(y.c0) ||
///      pad16(y.c1). The all-zero encoding is the point at infinity.
library BLS {
    /// @notice An input has the wrong length.
    error BLSInvalidLength(uint256 expected, uint256 actual);
    /// @notice A precompile rejected its input (invalid or out-of-subgroup point).
    error BLSPrecompileFailed(address precompile);
    /// @notice A public key or signature is the point at infinity.
    error BLSPointAtInfinity();
    /// @notice A G1 encoding whose 16-byte limb padding is not zero.
    error BLSInvalidPadding();
    /// @notice A domain separation tag longer than 255 bytes.
    error BLSDstTooLong(uint256 length);

    /// @notice Domain separation tag of verdict signatures.
    bytes internal constant SIG_DST = "BLS_SIG_BLS12381G2_XMD:SHA-256_SSWU_RO_POP_";
    /// @notice Domain separation tag of proofs of possession.
    bytes internal constant POP_DST = "BLS_POP_BLS12381G2_XMD:SHA-256_SSWU_RO_POP_";

    uint256 internal constant G1_LENGTH = 128;
    uint256 internal constant G2_LENGTH = 256;

    address internal constant SHA256_PRECOMPILE = address(0x02);
    address internal constant MODEXP = address(0x05);
    address internal constant G1ADD = address(0x0b);
    address internal constant G2ADD = address(0x0d);
    address internal constant PAIRING = address(0x0f);
    address internal constant MAP_FP2_TO_G2 = address(0x11);

    /// @dev The same addresses as numbers, for inline assembly.
    uint256 private constant _MODEXP = 0x05;
    uint256 private constant _G1ADD = 0x0b;
    uint256 private constant _G2ADD = 0x0d;
    uint256 private constant _PAIRING = 0x0f;
    uint256 private constant _MAP_FP2_TO_G2 = 0x11;

    /// @dev The field modulus p, as two big-endian words of its 64-byte padded form.
    uint256 internal constant P_HI = 0x1a0111ea397fe69a4b1ba7b6434bacd7;
    uint256 internal constant P_LO =
        0x64774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab;

    /// @dev -G1 (the negated generator), as four words.
    uint256 internal constant NEG_G1_X_HI = 0x17f1d3a73197d7942695638c4fa9ac0f;
    uint256 internal constant NEG_G1_X_LO =
        0xc3688c4f9774b905a14e3a3f171bac586c55e83ff97a1aeffb3af00adb22c6bb;
    uint256 internal constant NEG_G1_Y_HI = 0x114d1d6855d545a8aa7d76c8cf2e21f2;
    uint256 internal constant NEG_G1_Y_LO =
        0x67816aef1db507c96655b9d5caac42364e6f38ba0ecb751bad54dcd6b939c2ca;

    /// @notice A G1 point packed into three storage words (96 bytes of coordinates):
    ///         `hi` = x[0:16] << 128 | y[0:16], `xLo` = x[16:48], `yLo` = y[16:48].
    struct PackedG1 {
        bytes32 hi;
        bytes32 xLo;
        bytes32 yLo;
    }

    // ------------------------------------------------------------------ encodings

    /// @notice Packs a 128-byte G1 point for storage.
    function packG1(bytes memory point) internal pure returns (PackedG1 memory packed) {
        _checkLength(point, G1_LENGTH);
        assembly ("memory-safe") {
            let xHi := mload(add(point, 0x20))
            let yHi := mload(add(point, 0x60))
            mstore(packed, or(shl(128, xHi), yHi))
            mstore(add(packed, 0x20), mload(add(point, 0x40)))
            mstore(add(packed, 0x40), mload(add(point, 0x80)))
        }
        _checkPadding(point);
    }

    /// @notice Unpacks a stored G1 point into its 128-byte encoding.
    function unpackG1(PackedG1 memory packed) internal pure returns (bytes memory point) {
        point = new bytes(G1_LENGTH);
        assembly ("memory-safe") {
            let hi := mload(packed)
            mstore(add(point, 0x20), shr(128, hi))
            mstore(add(point, 0x40), mload(add(packed, 0x20)))
            mstore(add(point, 0x60), and(hi, 0xffffffffffffffffffffffffffffffff))
            mstore(add(point, 0x80), mload(add(packed, 0x40)))
        }
    }

    /// @notice The 48-byte compressed (ZCash) encoding of a G1 point, which is the message a
    ///         proof of possession signs.
    function compressG1(bytes memory point) internal pure returns (bytes memory out) {
        _checkLength(point, G1_LENGTH);
        _checkPadding(point);
        out = new bytes(48);
        assembly ("memory-safe") {
            let xHi := mload(add(point, 0x20))
            let xLo := mload(add(point, 0x40))
            let yHi := mload(add(point, 0x60))
            let yLo := mload(add(point, 0x80))
            let flags := 0x80
            switch or(or(xHi, xLo), or(yHi, yLo))
            case 0 { flags := 0xc0 }
            default {
                // Sign bit: y > p - y (y is the lexicographically larger root).
                let nLo := sub(P_LO, yLo)
                let nHi := sub(sub(P_HI, yHi), gt(yLo, P_LO))
                if or(gt(yHi, nHi), and(eq(yHi, nHi), gt(yLo, nLo))) { flags := 0xa0 }
            }
            // x is 48 bytes: 16 in xHi (low half), 32 in xLo.
            mstore(add(out, 0x20), or(shl(128, xHi), shr(128, xLo)))
            mstore(add(out, 0x40), shl(128, xLo))
            mstore8(add(out, 0x20), or(flags, byte(16, xHi)))
        }
    }

    /// @notice -P for a G1 point P (the identity stays the identity).
    function negateG1(bytes memory point) internal pure returns (bytes memory out) {
        _checkLength(point, G1_LENGTH);
        out = new bytes(G1_LENGTH);
        assembly ("memory-safe") {
            let yHi := mload(add(point, 0x60))
            let yLo := mload(add(point, 0x80))
            mstore(add(out, 0x20), mload(add(point, 0x20)))
            mstore(add(out, 0x40), mload(add(point, 0x40)))
            if or(yHi, yLo) {
                mstore(add(out, 0x80), sub(P_LO, yLo))
                mstore(add(out, 0x60), sub(sub(P_HI, yHi), gt(yLo, P_LO)))
            }
        }
    }

    // ------------------------------------------------------------------ group operations

    /// @notice a + b in G1 (on-curve checked by the precompile; no subgroup check).
    function addG1(bytes memory a, bytes memory b) internal view returns (bytes memory out) {
        _checkLength(a, G1_LENGTH);
        _checkLength(b, G1_LENGTH);
        out = new bytes(G1_LENGTH);
        bool ok;
        assembly ("memory-safe") {
            let input := mload(0x40)
            mcopy(input, add(a, 0x20), 128)
            mcopy(add(input, 128), add(b, 0x20), 128)
            ok := staticcall(gas(), _G1ADD, input, 256, add(out, 0x20), 128)
            ok := and(ok, eq(returndatasize(), 128))
        }
        if (!ok) revert BLSPrecompileFailed(G1ADD);
    }

    /// @notice `aggregate` minus the stored keys at `indices`: the signers' key of a certificate
    ///         whose non-signers are `indices`. Costs three SLOADs and one G1ADD per index. The
    ///         caller checks that every index holds a key (and their order); an empty slot
    ///         decodes to an invalid point and makes G1ADD revert, never a wrong key.
    function subtractStored(
        PackedG1 storage aggregate,
        mapping(uint256 => PackedG1) storage keys,
        uint256[] memory indices
    ) internal view returns (bytes memory key) {
        key = unpackG1(aggregate);
        bool ok = true;
        assembly ("memory-safe") {
            let buf := mload(0x40)
            // buf[0:128] = running sum, buf[128:256] = -key[i]
            mcopy(buf, add(key, 0x20), 128)
            mstore(0x20, keys.slot)
            let end := add(add(indices, 0x20), shl(5, mload(indices)))
            for { let p := add(indices, 0x20) } lt(p, end) { p := add(p, 0x20) } {
                mstore(0x00, mload(p))
                let slot := keccak256(0x00, 0x40)
                let hi := sload(slot)
                let yHi := and(hi, 0xffffffffffffffffffffffffffffffff)
                let yLo := sload(add(slot, 2))
                mstore(add(buf, 0x80), shr(128, hi))
                mstore(add(buf, 0xa0), sload(add(slot, 1)))
                // -y = p - y (the identity is never stored: keys are PoP-checked).
                mstore(add(buf, 0xe0), sub(P_LO, yLo))
                mstore(add(buf, 0xc0), sub(sub(P_HI, yHi), gt(yLo, P_LO)))
                ok := and(ok, staticcall(gas(), _G1ADD, buf, 256, buf, 128))
                ok := and(ok, eq(returndatasize(), 128))
            }
            mcopy(add(key, 0x20), buf, 128)
        }
        if (!ok) revert BLSPrecompileFailed(G1ADD);
    }

    /// @notice The sum of the stored keys at `indices`: the aggregate key of an explicit signer
    ///         set (equivocation evidence). Costs three SLOADs and one G1ADD per index, without
    ///         a memory allocation per key. The caller checks that every index holds a key; an
    ///         empty slot is the identity and adds nothing, so it must be refused before.
    function sumStored(mapping(uint256 => PackedG1) storage keys, uint256[] calldata indices)
        internal
        view
        returns (bytes memory key)
    {
        key = new bytes(G1_LENGTH);
        bool ok = true;
        assembly ("memory-safe") {
            let buf := mload(0x40)
            // buf[0:128] = running sum (starts at the identity), buf[128:256] = key[i]
            mstore(buf, 0)
            mstore(add(buf, 0x20), 0)
            mstore(add(buf, 0x40), 0)
            mstore(add(buf, 0x60), 0)
            mstore(0x20, keys.slot)
            let end := add(indices.offset, shl(5, indices.length))
            for { let p := indices.offset } lt(p, end) { p := add(p, 0x20) } {
                mstore(0x00, calldataload(p))
                let slot := keccak256(0x00, 0x40)
                let hi := sload(slot)
                mstore(add(buf, 0x80), shr(128, hi))
                mstore(add(buf, 0xa0), sload(add(slot, 1)))
                mstore(add(buf, 0xc0), and(hi, 0xffffffffffffffffffffffffffffffff))
                mstore(add(buf, 0xe0), sload(add(slot, 2)))
                ok := and(ok, staticcall(gas(), _G1ADD, buf, 256, buf, 128))
                ok := and(ok, eq(returndatasize(), 128))
            }
            mcopy(add(key, 0x20), buf, 128)
        }
        if (!ok) revert BLSPrecompileFailed(G1ADD);
    }

    /// @notice Adds to `key` (in place) the keys of the members at the positions set in
    ///         `bitmap` (bit `p & 7` of byte `p >> 3`), or subtracts them if `negate`, and sums
    ///         their stakes. Position `p`'s registry index is the 4-byte word at `1 + 4p` of the
    ///         code of `list`; its key and stake are the code of the record contract the caller
    ///         created with CREATE2 (salt = index, init code hash `initHash`): `0x00 || key
    ///         (128 bytes) || uint128 stake`. Per position: two EXTCODECOPYs (one cold account
    ///         access), a keccak and a G1ADD, no storage read. Positions `>= n` are not read:
    ///         the first is returned as `outOfRange` (else `type(uint256).max`) and the caller
    ///         reverts. `ok` is false if a G1ADD failed.
    function sumRecords(
        bytes memory key,
        bytes memory bitmap,
        uint256 n,
        address list,
        bytes32 initHash,
        bool negate
    ) internal view returns (bool ok, uint256 stake, uint256 outOfRange) {
        _checkLength(key, G1_LENGTH);
        outOfRange = type(uint256).max;
        ok = true;
        assembly ("memory-safe") {
            // buf[0:128] running sum, buf[128:256] operand (then the stake's 16 bytes, read
            // as the high half of buf[256:288]), buf[288:384] CREATE2 preimage (0xff at 299),
            // buf[384:416] scratch.
            let buf := mload(0x40)
            mcopy(buf, add(key, 0x20), 128)
            mstore(add(buf, 0x120), address())
            mstore8(add(buf, 0x12b), 0xff)
            mstore(add(buf, 0x160), initHash)
            for { let i := 0 } lt(i, mload(bitmap)) { i := add(i, 1) } {
                let b := byte(0, mload(add(add(bitmap, 0x20), i)))
                for { let pos := shl(3, i) } b { pos := add(pos, 1) } {
                    if and(b, 1) {
                        switch lt(pos, n)
                        case 0 { if eq(outOfRange, not(0)) { outOfRange := pos } }
                        default {
                            mstore(add(buf, 0x180), 0)
                            extcodecopy(list, add(buf, 0x180), add(1, shl(2, pos)), 4)
                            mstore(add(buf, 0x140), shr(224, mload(add(buf, 0x180))))
                            extcodecopy(
                                and(
                                    keccak256(add(buf, 0x12b), 85),
                                    0xffffffffffffffffffffffffffffffffffffffff
                                ),
                                add(buf, 0x80),
                                1,
                                144
                            )
                            stake := add(stake, shr(128, mload(add(buf, 0x100))))
                            if negate {
                                // -y = p - y (a record never holds the identity).
                                mstore(
                                    add(buf, 0xc0),
                                    sub(
                                        sub(P_HI, mload(add(buf, 0xc0))),
                                        gt(mload(add(buf, 0xe0)), P_LO)
                                    )
                                )
                                mstore(add(buf, 0xe0), sub(P_LO, mload(add(buf, 0xe0))))
                            }
                            ok := and(ok, staticcall(gas(), _G1ADD, buf, 256, buf, 128))
                            ok := and(ok, eq(returndatasize(), 128))
                        }
                    }
                    b := shr(1, b)
                }
            }
            mcopy(add(key, 0x20), buf, 128)
        }
    }

    // ------------------------------------------------------------------ hash to curve

    /// @notice expand_message_xmd (RFC 9380 §5.3.1) with SHA-256, for 256 output bytes.
    /// @dev msg_prime = Z_pad(64) || msg || I2OSP(256, 2) || I2OSP(0, 1) || DST_prime;
    ///      b_0 = H(msg_prime); b_i = H((b_0 xor b_(i-1)) || I2OSP(i, 1) || DST_prime), b_(0) xor
    ///      term taken as zero for i = 1; output b_1 || ... || b_8. Buffers are built in place.
    function expandMessageXmd(bytes memory message, bytes memory dst)
        internal
        view
        returns (bytes memory uniform)
    {
        if (dst.length > 255) revert BLSDstTooLong(dst.length);
        uniform = new bytes(256);
        bool ok;
        assembly ("memory-safe") {
            let dstLen := mload(dst)
            let msgLen := mload(message)
            let buf := mload(0x40)
            mstore(buf, 0)
            mstore(add(buf, 0x20), 0)
            mcopy(add(buf, 0x40), add(message, 0x20), msgLen)
            let p := add(add(buf, 0x40), msgLen)
            mstore8(p, 0x01)
            mstore8(add(p, 1), 0x00)
            mstore8(add(p, 2), 0x00)
            mcopy(add(p, 3), add(dst, 0x20), dstLen)
            mstore8(add(add(p, 3), dstLen), dstLen)
            let primeLen := add(add(0x43, msgLen), add(dstLen, 1))
            ok := staticcall(gas(), 0x02, buf, primeLen, 0x00, 0x20)
            ok := and(ok, eq(returndatasize(), 0x20))
            let b0 := mload(0x00)
            // b_i input: 32 bytes || i || DST_prime, after msg_prime.
            let bufI := add(buf, add(primeLen, 0x20))
            mcopy(add(bufI, 0x21), add(dst, 0x20), dstLen)
            mstore8(add(add(bufI, 0x21), dstLen), dstLen)
            let lenI := add(0x22, dstLen)
            let bi := 0
            for { let i := 1 } lt(i, 9) { i := add(i, 1) } {
                mstore(bufI, xor(b0, bi))
                mstore8(add(bufI, 0x20), i)
                ok := and(ok, staticcall(gas(), 0x02, bufI, lenI, 0x00, 0x20))
                ok := and(ok, eq(returndatasize(), 0x20))
                bi := mload(0x00)
                mstore(add(uniform, mul(i, 0x20)), bi)
            }
        }
        if (!ok) revert BLSPrecompileFailed(SHA256_PRECOMPILE);
    }

    /// @notice hash_to_field (RFC 9380 §5.2) for two Fp2 elements: u0 and u1 as 128-byte
    ///         EIP-2537 Fp2 encodings (c0 || c1), each limb reduced mod p with MODEXP.
    function hashToFieldFp2(bytes memory message, bytes memory dst)
        internal
        view
        returns (bytes memory u0, bytes memory u1)
    {
        bytes memory uniform = expandMessageXmd(message, dst);
        u0 = new bytes(128);
        u1 = new bytes(128);
        bool ok = true;
        assembly ("memory-safe") {
            let input := mload(0x40)
            // MODEXP header: base length 64, exponent length 1, modulus length 64.
            mstore(input, 64)
            mstore(add(input, 0x20), 1)
            mstore(add(input, 0x40), 64)
            mstore8(add(input, 0xa0), 1)
            mstore(add(input, 0xa1), P_HI)
            mstore(add(input, 0xc1), P_LO)
            for { let j := 0 } lt(j, 4) { j := add(j, 1) } {
                let dest := add(add(mul(div(j, 2), sub(u1, u0)), u0), add(0x20, mul(mod(j, 2), 64)))
                mcopy(add(input, 0x60), add(add(uniform, 0x20), mul(j, 64)), 64)
                ok := and(ok, staticcall(gas(), _MODEXP, input, 0xe1, dest, 64))
                ok := and(ok, eq(returndatasize(), 64))
            }
        }
        if (!ok) revert BLSPrecompileFailed(MODEXP);
    }

    /// @notice hash_to_curve (RFC 9380 §3) for suite BLS12381G2_XMD:SHA-256_SSWU_RO_ under
    ///         `dst`: MAP_FP2_TO_G2 (which clears the cofactor) on u0 and u1, then G2ADD.
    function hashToG2(bytes memory message, bytes memory dst)
        internal
        view
        returns (bytes memory point)
    {
        (bytes memory u0, bytes memory u1) = hashToFieldFp2(message, dst);
        point = new bytes(G2_LENGTH);
        bool ok;
        assembly ("memory-safe") {
            let input := mload(0x40)
            ok := staticcall(gas(), _MAP_FP2_TO_G2, add(u0, 0x20), 128, input, 256)
            ok := and(ok, eq(returndatasize(), 256))
            ok := and(
                ok,
                staticcall(gas(), _MAP_FP2_TO_G2, add(u1, 0x20), 128, add(input, 256), 256)
            )
            ok := and(ok, eq(returndatasize(), 256))
            ok := and(ok, staticcall(gas(), _G2ADD, input, 512, add(point, 0x20), 256))
            ok := and(ok, eq(returndatasize(), 256))
        }
        if (!ok) revert BLSPrecompileFailed(MAP_FP2_TO_G2);
    }

    // ------------------------------------------------------------------ verification

    /// @notice e(pk, H(message)) == e(G1, signature), as one 2-pair pairing check.
    /// @dev Reverts on malformed or out-of-subgroup points and on the point at infinity; returns
    ///      false only for a well-formed signature that does not verify.
    function verify(
        bytes memory publicKey,
        bytes memory message,
        bytes memory signature,
        bytes memory dst
    ) internal view returns (bool) {
        return verifyHashed(publicKey, hashToG2(message, dst), signature);
    }

    /// @notice Verifies a signature over a 32-byte digest under `SIG_DST`.
    function verifyDigest(bytes memory publicKey, bytes32 digest, bytes memory signature)
        internal
        view
        returns (bool)
    {
        return verify(publicKey, abi.encodePacked(digest), signature, SIG_DST);
    }

    /// @notice Verifies an unbound proof of possession: a signature by `publicKey` over its own
    ///         compressed encoding under `POP_DST`. Also proves the key is in the subgroup.
    ///         The registry does not accept it (see the bound overload): anyone who saw it
    ///         could register the key first.
    function verifyProofOfPossession(bytes memory publicKey, bytes memory proof)
        internal
        view
        returns (bool)
    {
        return verify(publicKey, compressG1(publicKey), proof, POP_DST);
    }

    /// @notice Verifies a proof of possession bound to a context: a signature by `publicKey`
    ///         under `POP_DST` over its compressed encoding followed by `binding` (the registry
    ///         passes `abi.encodePacked(chainid, registry, operator)`), so a proof seen in one
    ///         registration cannot be replayed by another operator, registry or chain.
    function verifyProofOfPossession(
        bytes memory publicKey,
        bytes memory proof,
        bytes memory binding
    ) internal view returns (bool) {
        return verify(publicKey, bytes.concat(compressG1(publicKey), binding), proof, POP_DST);
    }

    /// @notice The pairing check for an already hashed message point.
    function verifyHashed(bytes memory publicKey, bytes memory messagePoint, bytes memory signature)
        internal
        view
        returns (bool valid)
    {
        _checkLength(publicKey, G1_LENGTH);
        _checkLength(messagePoint, G2_LENGTH);
        _checkLength(signature, G2_LENGTH);
        if (_isZero(publicKey) || _isZero(signature)) revert BLSPointAtInfinity();
        bool ok;
        assembly ("memory-safe") {
            let input := mload(0x40)
            // Pair 1: (-G1, signature)
            mstore(input, NEG_G1_X_HI)
            mstore(add(input, 0x20), NEG_G1_X_LO)
            mstore(add(input, 0x40), NEG_G1_Y_HI)
            mstore(add(input, 0x60), NEG_G1_Y_LO)
            mcopy(add(input, 0x80), add(signature, 0x20), 256)
            // Pair 2: (publicKey, H(m))
            mcopy(add(input, 0x180), add(publicKey, 0x20), 128)
            mcopy(add(input, 0x200), add(messagePoint, 0x20), 256)
            ok := staticcall(gas(), _PAIRING, input, 768, 0x00, 0x20)
            ok := and(ok, eq(returndatasize(), 0x20))
            valid := mload(0x00)
        }
        if (!ok) revert BLSPrecompileFailed(PAIRING);
    }

    // ------------------------------------------------------------------ helpers

    function _checkLength(bytes memory b, uint256 expected) private pure {
        if (b.length != expected) revert BLSInvalidLength(expected, b.length);
    }

    /// @dev The 16 high bytes of every 64-byte coordinate limb must be zero.
    function _checkPadding(bytes memory point) private pure {
        bool bad;
        assembly ("memory-safe") {
            bad := or(shr(128, mload(add(point, 0x20))), shr(128, mload(add(point, 0x60))))
        }
        if (bad) revert BLSInvalidPadding();
    }

    function _isZero(bytes memory b) private pure returns (bool zero) {
        assembly ("memory-safe") {
            let acc := 0
            for { let i := 0 } lt(i, mload(b)) { i := add(i, 0x20) } {
                acc := or(acc, mload(add(add(b, 0x20), i)))
            }
            zero := iszero(acc)
        }
    }
}
