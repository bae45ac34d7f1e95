// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {TestToken} from "./TestToken.sol";

/// @notice Implemented by recipients a HookToken notifies.
interface ITokenReceiver {
    function onTokenReceived(address from, uint256 amount) external;
}

/// @notice A TestToken that calls `onTokenReceived` on every recipient that registered for
///         hooks (ERC-777 style, without the ERC-1820 registry), so such a recipient can make
///         any transfer to it revert.
contract HookToken is TestToken {
    mapping(address => bool) public hooked;

    /// @notice Registers the caller (or, for tests, any account) for receive hooks.
    function setHooked(address account, bool on) external {
        hooked[account] = on;
    }

    function _update(address from, address to, uint256 value) internal override {
        super._update(from, to, value);
        if (from != address(0) && hooked[to]) {
            ITokenReceiver(to).onTokenReceived(from, value);
        }
    }
}

/// @notice A recipient that refuses every incoming transfer.
contract RefusingRecipient is ITokenReceiver {
    error Refused();

    function onTokenReceived(address, uint256) external pure {
        revert Refused();
    }
}
