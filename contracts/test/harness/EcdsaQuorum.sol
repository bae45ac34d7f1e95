// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @notice Reference for the gas comparison only: the seed's k-of-n ECDSA quorum check
///         (k = ceil(2n/3) ecrecovers, each signer looked up in storage, signers strictly
///         ascending by address to rule out duplicates). Not used by resolvd.
contract EcdsaQuorum {
    mapping(address => bool) public isSigner;
    uint256 public immutable n;

    error NotEnoughSignatures(uint256 got, uint256 needed);
    error BadSigner(address recovered);

    constructor(address[] memory signers) {
        for (uint256 i; i < signers.length; ++i) {
            isSigner[signers[i]] = true;
        }
        n = signers.length;
    }

    /// @param signatures 65-byte (r, s, v) signatures over `digest`, by ascending signer address.
    function verify(bytes32 digest, bytes[] calldata signatures) external view returns (bool) {
        uint256 needed = (2 * n + 2) / 3;
        if (signatures.length < needed) revert NotEnoughSignatures(signatures.length, needed);
        address last;
        for (uint256 i; i < signatures.length; ++i) {
            bytes calldata sig = signatures[i];
            address signer =
                ecrecover(digest, uint8(sig[64]), bytes32(sig[0:32]), bytes32(sig[32:64]));
            if (signer <= last || !isSigner[signer]) revert BadSigner(signer);
            last = signer;
        }
        return true;
    }
}
