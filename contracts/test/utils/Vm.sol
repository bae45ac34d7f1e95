// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @notice A log recorded by `recordLogs`.
struct VmLog {
    bytes32[] topics;
    bytes data;
    address emitter;
}

/// @notice The few forge cheatcodes resolvd's tests use (forge-std is not available offline).
interface Vm {
    function recordLogs() external;
    function getRecordedLogs() external returns (VmLog[] memory);
    function readFile(string calldata path) external view returns (string memory);
    function projectRoot() external view returns (string memory);
    function keyExistsJson(string calldata json, string calldata key) external view returns (bool);
    function parseJsonBytes32(string calldata json, string calldata key)
        external
        pure
        returns (bytes32);
    function parseJsonString(string calldata json, string calldata key)
        external
        pure
        returns (string memory);
    function parseJsonUint(string calldata json, string calldata key)
        external
        pure
        returns (uint256);
    function parseJsonAddress(string calldata json, string calldata key)
        external
        pure
        returns (address);
    function parseJsonBytes(string calldata json, string calldata key)
        external
        pure
        returns (bytes memory);
    function parseJsonBytesArray(string calldata json, string calldata key)
        external
        pure
        returns (bytes[] memory);
    function parseJsonUintArray(string calldata json, string calldata key)
        external
        pure
        returns (uint256[] memory);
    function parseJsonKeys(string calldata json, string calldata key)
        external
        pure
        returns (string[] memory);
    function toString(uint256 value) external pure returns (string memory);
    function etch(address target, bytes calldata code) external;
    function prank(address sender) external;
    function startPrank(address sender) external;
    function stopPrank() external;
    function warp(uint256 timestamp) external;
    function roll(uint256 blockNumber) external;
    function chainId(uint256 newChainId) external;
    function expectRevert(bytes calldata revertData) external;
    function expectRevert(bytes4 selector) external;
    function expectRevert() external;
    function deal(address account, uint256 newBalance) external;
    function sign(uint256 privateKey, bytes32 digest)
        external
        pure
        returns (uint8 v, bytes32 r, bytes32 s);
    function addr(uint256 privateKey) external pure returns (address);
    function snapshotGasLastCall(string calldata group, string calldata name)
        external
        returns (uint256 gasUsed);
    function snapshotState() external returns (uint256 snapshotId);
    function store(address target, bytes32 slot, bytes32 value) external;
    function assume(bool condition) external pure;
    function revertToState(uint256 snapshotId) external returns (bool success);
    function envOr(string calldata name, string calldata defaultValue)
        external
        view
        returns (string memory);
}

/// @notice Base for tests: the cheatcode handle.
abstract contract TestBase {
    Vm internal constant vm = Vm(address(uint160(uint256(keccak256("hevm cheat code")))));
}
