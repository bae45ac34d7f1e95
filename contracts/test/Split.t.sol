// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {EscrowFees} from "../src/EscrowFees.sol";
import {RegistrySlashing} from "../src/RegistrySlashing.sol";
import {IEscrowErrors} from "../src/interfaces/IEscrow.sol";
import {Evidence, IResolverRegistryErrors} from "../src/interfaces/IResolverRegistry.sol";
import {EscrowBase} from "./utils/EscrowBase.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice The Escrow and the ResolverRegistry each run part of their ABI from a contract their
///         constructor deployed (EscrowFees, RegistrySlashing), by DELEGATECALL from the
///         fallback. These tests pin what that split must not change: the extensions act only
///         on the storage of the contract that deployed them, they are reached through the
///         main address with its owner, and nothing else reaches them.
contract SplitTest is EscrowBase {
    function setUp() public {
        _deploySystem();
    }

    function testExtensionsAreDeployedByTheirContract() public view {
        require(escrow.fees().code.length > 0, "fees deployed");
        require(registry.slashing().code.length > 0, "slashing deployed");
        require(escrow.fees() != registry.slashing(), "two extensions");
    }

    function testDirectCallsToTheExtensionsRevert() public {
        EscrowFees fees = EscrowFees(escrow.fees());
        vm.expectRevert(IEscrowErrors.NotThroughEscrow.selector);
        fees.flushSink(IERC20(TOKEN));
        vm.expectRevert(IEscrowErrors.NotThroughEscrow.selector);
        fees.distributeFee(bytes32(0));
        vm.expectRevert(IEscrowErrors.NotThroughEscrow.selector);
        fees.pendingRewards(IERC20(TOKEN), 0, 1);
        RegistrySlashing slashing = RegistrySlashing(registry.slashing());
        vm.expectRevert(IResolverRegistryErrors.NotThroughRegistry.selector);
        slashing.flushSink();
        vm.expectRevert(IResolverRegistryErrors.NotThroughRegistry.selector);
        slashing.claim(address(this));
        Evidence memory e;
        vm.expectRevert(IResolverRegistryErrors.NotThroughRegistry.selector);
        slashing.slashEquivocation(bytes32(0), e, e);
    }

    /// @notice Owner-only functions of an extension check the owner of the main contract (its
    ///         storage), not of the extension (whose own owner is the main contract).
    function testOwnerChecksRunOnTheMainContractsStorage() public {
        address stranger = address(0xBEEF);
        vm.prank(stranger);
        vm.expectRevert(
            abi.encodeWithSelector(Ownable.OwnableUnauthorizedAccount.selector, stranger)
        );
        RegistrySlashing(address(registry)).setGasRefundCap(IERC20(TOKEN), 7);
        RegistrySlashing(address(registry)).setGasRefundCap(IERC20(TOKEN), 7);
        require(registry.gasRefundCap(IERC20(TOKEN)) == 7, "set through the registry");
        vm.prank(stranger);
        vm.expectRevert(
            abi.encodeWithSelector(Ownable.OwnableUnauthorizedAccount.selector, stranger)
        );
        EscrowFees(address(escrow)).recoverExcess(IERC20(TOKEN), stranger);
    }

    /// @notice The fallbacks forward only to functions that exist, and take no ether.
    function testUnknownSelectorsAndValueRevert() public {
        (bool ok,) = address(escrow).call(abi.encodeWithSignature("noSuchFunction()"));
        require(!ok, "unknown selector on the escrow");
        (ok,) = address(registry).call(abi.encodeWithSignature("noSuchFunction()"));
        require(!ok, "unknown selector on the registry");
        vm.deal(address(this), 1 ether);
        (ok,) = address(escrow).call{value: 1}("");
        require(!ok, "plain ether to the escrow");
        (ok,) = address(registry).call{value: 1}("");
        require(!ok, "plain ether to the registry");
        (ok,) =
            address(escrow).call{value: 1}(abi.encodeCall(EscrowFees.flushSink, (IERC20(TOKEN))));
        require(!ok, "ether with an extension call");
    }
}
