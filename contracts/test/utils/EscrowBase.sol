// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Escrow} from "../../src/Escrow.sol";
import {EscrowFees} from "../../src/EscrowFees.sol";
import {ResolverRegistry} from "../../src/ResolverRegistry.sol";
import {Deal, Terms} from "../../src/interfaces/IEscrow.sol";
import {Evidence, RegistryParameters} from "../../src/interfaces/IResolverRegistry.sol";
import {VerdictCommitment} from "../../src/libraries/VerdictHash.sol";
import {TestToken} from "../mocks/TestToken.sol";
import {Vectors} from "./Vectors.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice Deploys token, registry and escrow the way the Rust vector generator assumes
///         (consensus/tests/it/escrow.rs): token, registry and escrow at fixed addresses (the
///         proofs of possession are bound to the registry and `_operator(i)`), chain id 31337,
///         resolvers registered in vector order so registry index i is vector resolver i.
abstract contract EscrowBase is Vectors {
    address internal constant TOKEN = address(uint160(0x70ce0001));
    /// @dev Proofs of possession in the vectors are bound to this registry address.
    address internal constant REGISTRY = address(uint160(0x7e915701));
    address internal constant SELLER = address(uint160(0x05e11e01));
    address internal constant SINK = address(uint160(0xdead));
    address internal constant SLASHER = address(uint160(0x51a5));

    uint256 internal constant BOND = 1000e18;
    /// @dev Quorum threshold 2/3, exactly.
    uint256 internal constant THRESHOLD_NUM = 2;
    uint256 internal constant THRESHOLD_DEN = 3;
    uint256 internal constant MAX_RESOLVE = 7 days;
    uint256 internal constant SLASHING_WINDOW = 7 days;
    uint256 internal constant UNBONDING = 15 days;
    uint256 internal constant WHISTLEBLOWER_BPS = 1000;
    /// @dev Covers the vector deals' deliver + challenge windows (1 day each).
    uint256 internal constant ACTIVATION = 3 days;
    uint256 internal constant MIN_COMMITTEE = BOND;

    TestToken internal token;
    ResolverRegistry internal registry;
    Escrow internal escrow;

    /// @dev Runs `initCode` at `where` (constructor included), then installs the runtime code.
    function _deployAt(address where, bytes memory initCode) internal returns (address) {
        vm.etch(where, initCode);
        (bool ok, bytes memory runtime) = where.call("");
        require(ok, "constructor failed");
        vm.etch(where, runtime);
        return where;
    }

    function _deploySystem() internal {
        vm.warp(1_700_000_000);
        token = TestToken(_deployAt(TOKEN, type(TestToken).creationCode));
        registry = ResolverRegistry(
            _deployAt(REGISTRY, abi.encodePacked(_registryCode(), abi.encode(_params())))
        );
        escrow = Escrow(
            _deployAt(ESCROW, abi.encodePacked(_escrowCode(), abi.encode(registry, address(this))))
        );
    }

    /// @dev Creation code of the registry (a mutant test swaps in a broken one).
    function _registryCode() internal pure virtual returns (bytes memory) {
        return type(ResolverRegistry).creationCode;
    }

    /// @dev Creation code of the escrow (a mutant test swaps in a broken one).
    function _escrowCode() internal pure virtual returns (bytes memory) {
        return type(Escrow).creationCode;
    }

    /// @dev The registry parameters of the test deployment.
    function _params() internal pure returns (RegistryParameters memory) {
        return RegistryParameters({
            bondToken: IERC20(TOKEN),
            minimumBond: BOND,
            thresholdNumerator: THRESHOLD_NUM,
            thresholdDenominator: THRESHOLD_DEN,
            maxResolveWindow: MAX_RESOLVE,
            slashingWindow: SLASHING_WINDOW,
            unbondingDelay: UNBONDING,
            activationDelay: ACTIVATION,
            minimumCommitteeStake: MIN_COMMITTEE,
            whistleblowerBps: WHISTLEBLOWER_BPS,
            slashSink: SINK
        });
    }

    function _operator(uint256 i) internal pure returns (address) {
        // forge-lint: disable-next-line(unsafe-typecast)
        return address(uint160(0x0e0000 + i)); // i < 2^32
    }

    /// @dev Registers resolvers `[0, n)` of `json` (fields `.resolvers[i].publicKey` /
    ///      `.proofOfPossession`), waits out the warm-up and activates them one by one, so
    ///      epoch i holds resolvers `[0, i)` as when every registration started an epoch.
    function _registerResolvers(string memory json, uint256 n) internal {
        for (uint256 i; i < n; ++i) {
            _registerOne(json, i, _operator(i), BOND);
        }
        vm.warp(block.timestamp + ACTIVATION);
        uint256[] memory one = new uint256[](1);
        for (uint256 i; i < n; ++i) {
            one[0] = i;
            registry.activate(one);
        }
    }

    /// @dev Registers resolvers `[0, n)` of `json` and activates them together: epoch 1 holds
    ///      all of them (how a large committee forms).
    function _registerCommittee(string memory json, uint256 n) internal {
        uint256[] memory all = new uint256[](n);
        for (uint256 i; i < n; ++i) {
            all[i] = _registerOne(json, i, _operator(i), BOND);
        }
        vm.warp(block.timestamp + ACTIVATION);
        registry.activate(all);
    }

    /// @dev Registers vector resolver `i` of `json` from `op` with `bond` (not activated).
    function _registerOne(string memory json, uint256 i, address op, uint256 bond)
        internal
        returns (uint256 index)
    {
        string memory r = _at(".resolvers", i);
        token.mint(op, bond);
        vm.startPrank(op);
        token.approve(address(registry), bond);
        index = registry.register(
            vm.parseJsonBytes(json, string.concat(r, ".publicKey")),
            vm.parseJsonBytes(json, string.concat(r, ".proofOfPossession")),
            bond
        );
        vm.stopPrank();
    }

    /// @dev Registry owner changes wait `parameterDelay()` once a committee exists.
    function _afterParameterDelay() internal {
        vm.warp(block.timestamp + registry.parameterDelay());
    }

    function _allowBackend(Terms memory t) internal {
        escrow.setBackend(t.backendId, t.backendVersionHash, true);
    }

    function _fund(Terms memory t) internal returns (bytes32 id) {
        token.mint(BUYER, t.amount);
        vm.startPrank(BUYER);
        token.approve(ESCROW, t.amount);
        id = escrow.fund(t, "", "");
        vm.stopPrank();
    }

    /// @dev The seller delivers, locking the DA bond and the dispute deposit (the resolver fee).
    function _deliver(bytes32 id, Terms memory t, bytes32 deliveryHash) internal {
        vm.warp(block.timestamp + 1);
        uint256 locked = t.sellerBond + t.resolverFee;
        token.mint(SELLER, locked);
        vm.startPrank(SELLER);
        token.approve(ESCROW, locked);
        escrow.deliver(id, deliveryHash, "");
        vm.stopPrank();
    }

    /// @dev The buyer challenges, paying the deal's resolver fee and challenge bond.
    /// @dev Splits a certified dispute's held fee: waits out the inclusion window, then
    ///      `distributeFee` (nothing if no fee is held).
    function _distributeHeld(bytes32 id) internal {
        (,,,, uint64 closesAt,) = escrow.held(id);
        if (closesAt == 0) return;
        vm.warp(uint256(closesAt) + 1);
        EscrowFees(address(escrow)).distributeFee(id);
    }

    function _challenge(bytes32 id) internal {
        vm.warp(block.timestamp + 1);
        Deal memory d = escrow.deal(id);
        uint256 due = uint256(d.resolverFee) + d.challengeBond;
        token.mint(BUYER, due);
        vm.startPrank(BUYER);
        token.approve(ESCROW, due);
        escrow.challenge(id);
        vm.stopPrank();
    }

    /// @dev Funds, delivers and challenges the deal at `base` of `json`.
    function _dispute(string memory json, string memory base) internal returns (bytes32 id) {
        Terms memory t = _terms(json, base);
        _allowBackend(t);
        id = _fund(t);
        require(id == _rekey(json, base), "deal id");
        _deliver(id, t, vm.parseJsonBytes32(json, string.concat(base, ".deliveryHash")));
        _challenge(id);
    }

    /// @dev What the escrow credited `who` in the test token (pull payments: see `claim`).
    function _owed(address who) internal view returns (uint256) {
        return escrow.claimable(who, IERC20(TOKEN));
    }

    /// @dev G2 addition through the EIP-2537 precompile (aggregating Rust-made partials).
    function _addG2(bytes memory a, bytes memory b) internal view returns (bytes memory out) {
        if (a.length == 0) return b;
        out = new bytes(256);
        (bool ok, bytes memory r) = address(0x0d).staticcall(abi.encodePacked(a, b));
        require(ok && r.length == 256, "G2ADD");
        out = r;
    }
}
