// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @notice EIP-3009 (transfer with authorization), the receive variant the Escrow uses:
///         only the payee (`to`, here the Escrow) may submit it.
interface IERC3009 {
    function receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external;
}
