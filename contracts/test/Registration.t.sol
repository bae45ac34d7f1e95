// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {ResolverRegistry} from "../src/ResolverRegistry.sol";
import {IResolverRegistryErrors} from "../src/interfaces/IResolverRegistry.sol";
import {FeeToken} from "./mocks/FeeToken.sol";
import {TestToken} from "./mocks/TestToken.sol";
import {EscrowBase} from "./utils/EscrowBase.sol";

/// @notice Proofs of possession are bound to (chain id, registry, operator) (issue 16, Low).
///         Before the fix `testCopiedProofOfPossessionCannotSquatTheKey` failed: the squatter's
///         registration with a copied key and PoP succeeded (verified).
contract RegistrationTest is EscrowBase {
    string internal ev;
    address internal constant SQUATTER = address(0x5417);

    function setUp() public {
        ev = _read("consensus/vectors/escrow.json");
        _deploySystem();
        _registerResolvers(ev, 4);
    }

    function _key(uint256 i) internal view returns (bytes memory) {
        return vm.parseJsonBytes(ev, string.concat(_at(".resolvers", i), ".publicKey"));
    }

    function _pop(uint256 i) internal view returns (bytes memory) {
        return vm.parseJsonBytes(ev, string.concat(_at(".resolvers", i), ".proofOfPossession"));
    }

    function testCopiedProofOfPossessionCannotSquatTheKey() public {
        // The squatter front-runs operator 5's registration with its key and PoP.
        token.mint(SQUATTER, BOND);
        vm.startPrank(SQUATTER);
        token.approve(address(registry), BOND);
        vm.expectRevert(IResolverRegistryErrors.InvalidProofOfPossession.selector);
        registry.register(_key(5), _pop(5), BOND);
        vm.stopPrank();
        // The same proof does not work on another registry (or chain) either.
        ResolverRegistry other = new ResolverRegistry(_params());
        token.mint(_operator(5), 2 * BOND);
        vm.startPrank(_operator(5));
        token.approve(address(other), BOND);
        vm.expectRevert(IResolverRegistryErrors.InvalidProofOfPossession.selector);
        other.register(_key(5), _pop(5), BOND);
        vm.chainId(1);
        token.approve(address(registry), BOND);
        vm.expectRevert(IResolverRegistryErrors.InvalidProofOfPossession.selector);
        registry.register(_key(5), _pop(5), BOND);
        vm.chainId(31_337);
        // The operator it was made for registers.
        require(registry.register(_key(5), _pop(5), BOND) == 4, "registered");
        vm.stopPrank();
    }
}

/// @notice A fee-on-transfer bond token is refused at registration.
contract FeeBondTest is EscrowBase {
    function setUp() public {
        vm.warp(1_700_000_000);
        // The registry's bond token (TOKEN) is a fee-on-transfer token here.
        token = TestToken(_deployAt(TOKEN, type(FeeToken).creationCode));
        registry = ResolverRegistry(
            _deployAt(
                REGISTRY,
                abi.encodePacked(type(ResolverRegistry).creationCode, abi.encode(_params()))
            )
        );
    }

    function testFeeOnTransferBondIsRefused() public {
        string memory ev = _read("consensus/vectors/escrow.json");
        FeeToken(TOKEN).mint(_operator(0), BOND);
        vm.startPrank(_operator(0));
        FeeToken(TOKEN).approve(address(registry), BOND);
        vm.expectRevert(
            abi.encodeWithSelector(
                IResolverRegistryErrors.BondTransferMismatch.selector, BOND, BOND - 1
            )
        );
        registry.register(
            vm.parseJsonBytes(ev, ".resolvers[0].publicKey"),
            vm.parseJsonBytes(ev, ".resolvers[0].proofOfPossession"),
            BOND
        );
        vm.stopPrank();
    }
}
