// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @title Delegate
/// @notice Forwards the current call to the contract a contract was split into for EIP-170.
library Delegate {
    /// @dev Runs the current calldata on `target` by DELEGATECALL (on the caller's storage and
    ///      balance) and ends the call with its return data or its revert data: never returns
    ///      to the calling code, so using memory from offset 0 is safe.
    function forward(address target) internal {
        assembly {
            calldatacopy(0, 0, calldatasize())
            let ok := delegatecall(gas(), target, 0, calldatasize(), 0, 0)
            returndatacopy(0, 0, returndatasize())
            if iszero(ok) { revert(0, returndatasize()) }
            return(0, returndatasize())
        }
    }
}
