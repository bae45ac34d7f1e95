// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {EscrowFees} from "../src/EscrowFees.sol";
import {ResolverRegistry} from "../src/ResolverRegistry.sol";
import {Authorization, IEscrowErrors, Terms} from "../src/interfaces/IEscrow.sol";
import {IResolverRegistryErrors, RegistryParameters} from "../src/interfaces/IResolverRegistry.sol";
import {VerdictCommitment} from "../src/libraries/VerdictHash.sol";
import {EscrowBase} from "./utils/EscrowBase.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice Issue 16's informational items. Each test marked "failed before" was run against the
///         code before the fix and failed there.
contract HardeningTest is EscrowBase {
    string internal ev;

    function setUp() public {
        ev = _read("consensus/vectors/escrow.json");
        _deploySystem();
        _rekeyAll(ev, ".deals");
    }

    function _partials(string memory side, uint256 n) internal view returns (bytes memory sig) {
        for (uint256 i; i < n; ++i) {
            sig = _addG2(sig, _partial(ev, side, i));
        }
    }

    /// @notice Exact 2/3: two of three equal members are a quorum (failed before: 6667 bps
    ///         demanded 3 of 3, BelowThreshold(2000, 3000, 6667)).
    function testTwoOfThreeIsAQuorum() public {
        _registerResolvers(ev, 3);
        bytes32 digest = escrow.verdictDigest(_commitment(ev, ".deals[0].reproduced"));
        uint256[] memory non = new uint256[](1);
        non[0] = 2;
        (uint256 signed, uint256 total) =
            registry.verifyCertificate(3, digest, non, _partials(".deals[0].reproduced", 2));
        require(signed == 2 * BOND && total == 3 * BOND, "2 of 3");
        // One of three is not.
        uint256[] memory two = new uint256[](2);
        (two[0], two[1]) = (1, 2);
        bytes memory one = _partials(".deals[0].reproduced", 1);
        vm.expectRevert(
            abi.encodeWithSelector(
                IResolverRegistryErrors.BelowThreshold.selector, BOND, 3 * BOND, 2, 3
            )
        );
        registry.verifyCertificate(3, digest, two, one);
        require(registry.thresholdBps() == 6667, "rounded up for old readers");
    }

    /// @notice The threshold rule at its edges, for other fractions too.
    function testThresholdRuleIsExact() public {
        require(registry.meetsThreshold(2, 3) && !registry.meetsThreshold(1999, 3000), "2/3");
        require(registry.meetsThreshold(2000, 3000) && !registry.meetsThreshold(0, 0), "edges");
        require(!registry.meetsThreshold(4, 3), "signed above total");
        RegistryParameters memory p = _params();
        (p.thresholdNumerator, p.thresholdDenominator) = (6667, 10_000);
        ResolverRegistry bps = new ResolverRegistry(p);
        require(!bps.meetsThreshold(2, 3) && bps.meetsThreshold(6667, 10_000), "6667 bps");
        (p.thresholdNumerator, p.thresholdDenominator) = (1, 1);
        ResolverRegistry unanimous = new ResolverRegistry(p);
        require(!unanimous.meetsThreshold(9, 10) && unanimous.meetsThreshold(10, 10), "1/1");
    }

    /// @notice A certificate over an epoch that ended more than `maxResolveWindow` ago is
    ///         refused, even if every member has withdrawn and nobody is slashable any more
    ///         (failed before: verifyCertificate accepted it).
    function testStaleEpochIsRefused() public {
        _registerResolvers(ev, 8);
        VerdictCommitment memory c = _commitment(ev, ".deals[0].reproduced");
        uint256[] memory non = vm.parseJsonUintArray(ev, ".deals[0].reproduced.quorum.nonSigners");
        bytes memory sig = _quorumSignature(ev, ".deals[0].reproduced");
        bytes32 digest = escrow.verdictDigest(c);
        vm.prank(_operator(0));
        registry.requestExit(); // epoch 8 ends now
        uint256 ended = block.timestamp;
        vm.warp(ended + MAX_RESOLVE);
        registry.verifyCertificate(8, digest, non, sig); // still fresh: members bonded
        vm.warp(ended + MAX_RESOLVE + 1);
        vm.expectRevert(
            abi.encodeWithSelector(
                IResolverRegistryErrors.StaleEpoch.selector, 8, ended, ended + MAX_RESOLVE
            )
        );
        registry.verifyCertificate(8, digest, non, sig);
    }

    /// @notice Terms under which a deal could not reach every terminal state are refused
    ///         (challengeWindow = 1 failed before: funded, then no challenge was possible).
    function testTermsAreValidatedAtFunding() public {
        _registerResolvers(ev, 8);
        Terms memory t = _terms(ev, ".deals[0]");
        _allowBackend(t);
        t.challengeWindow = 1;
        vm.expectRevert(
            abi.encodeWithSelector(IEscrowErrors.WindowTooShort.selector, "challenge", 2)
        );
        escrow.fund(t, "", "");
        // A window near 2^64 (deliver used to overflow) exceeds the warm-up.
        t.challengeWindow = type(uint64).max;
        vm.expectRevert(
            abi.encodeWithSelector(
                IEscrowErrors.WindowsExceedActivationDelay.selector,
                uint256(type(uint64).max) + t.deliverWindow,
                ACTIVATION
            )
        );
        escrow.fund(t, "", "");
        // The shortest window works end to end: deliver, challenge one second later.
        t.challengeWindow = 2;
        bytes32 id = _fund(t);
        _deliver(id, t, bytes32(uint256(1)));
        _challenge(id);
    }

    /// @notice A relayer cannot fund an authorized deal without publishing its spec and anchor
    ///         (failed before: funded with empty bytes).
    function testFundWithAuthorizationPublishes() public {
        _registerResolvers(ev, 8);
        Terms memory t = _terms(ev, ".deals[0]");
        bytes memory spec = hex"0101010220";
        bytes memory anchor = hex"01010102";
        t.specHash = sha256(abi.encodePacked("reckn/v1/spec", spec));
        t.prestateAnchorHash = sha256(abi.encodePacked("reckn/v1/prestate-anchor", anchor));
        _allowBackend(t);
        uint256 key = 0xb0b;
        address buyer = vm.addr(key);
        token.mint(buyer, t.amount);
        Authorization memory auth = _authorize(key, t.amount, escrow.dealIdOf(buyer, t));
        vm.expectRevert(IEscrowErrors.PublicationRequired.selector);
        escrow.fundWithAuthorization(t, "", "", auth);
        vm.expectRevert(IEscrowErrors.PublicationRequired.selector);
        escrow.fundWithAuthorization(t, spec, "", auth);
        escrow.fundWithAuthorization(t, spec, anchor, auth);
    }

    function _authorize(uint256 key, uint256 amount, bytes32 nonce)
        internal
        view
        returns (Authorization memory auth)
    {
        auth.buyer = vm.addr(key);
        auth.validAfter = block.timestamp - 1;
        auth.validBefore = block.timestamp + 1 hours;
        bytes32 structHash = keccak256(
            abi.encode(
                token.RECEIVE_WITH_AUTHORIZATION_TYPEHASH(),
                auth.buyer,
                ESCROW,
                amount,
                auth.validAfter,
                auth.validBefore,
                nonce
            )
        );
        (auth.v, auth.r, auth.s) = vm.sign(
            key, keccak256(abi.encodePacked(hex"1901", token.domainSeparator(), structHash))
        );
    }

    /// @notice Tokens sent to the escrow by mistake can be swept by the owner, never a deal's
    ///         funds (failed before: no way out).
    function testRecoverExcessOnly() public {
        _registerResolvers(ev, 8);
        Terms memory t = _terms(ev, ".deals[0]");
        _allowBackend(t);
        _fund(t);
        vm.expectRevert(
            abi.encodeWithSelector(IEscrowErrors.NothingToRecover.selector, IERC20(TOKEN))
        );
        EscrowFees(address(escrow)).recoverExcess(IERC20(TOKEN), address(this));
        token.mint(ESCROW, 5);
        vm.prank(BUYER);
        vm.expectRevert();
        EscrowFees(address(escrow)).recoverExcess(IERC20(TOKEN), BUYER);
        require(
            EscrowFees(address(escrow)).recoverExcess(IERC20(TOKEN), address(0xbeef)) == 5,
            "excess only"
        );
        require(token.balanceOf(ESCROW) == t.amount, "deal funds untouched");
    }
}
