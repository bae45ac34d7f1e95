// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {EscrowFees} from "../src/EscrowFees.sol";
import {RegistrySlashing} from "../src/RegistrySlashing.sol";
import {Deal, IEscrowErrors, Settlement, Terms} from "../src/interfaces/IEscrow.sol";
import {
    Evidence,
    IResolverRegistryErrors,
    IResolverRegistryEvents
} from "../src/interfaces/IResolverRegistry.sol";
import {VerdictCommitment} from "../src/libraries/VerdictHash.sol";
import {EscrowBase} from "./utils/EscrowBase.sol";
import {Signer} from "./utils/Signer.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice Resolver fee, challenge bond, gas refund, reward claims and slashed rewards
///         (ECONOMICS.md) on real BLS certificates: commitments of the vector deals under the
///         fee-carrying terms, signed by the vector resolvers' keys (test/utils/Signer.sol).
///         Eight resolvers of equal bond are registered one by one: epoch 8 holds all of them.
contract EconomicsTest is EscrowBase {
    string internal ev;
    IERC20 internal tok;
    address internal constant SUBMITTER = address(uint160(0x5b5b));

    uint256 internal constant P = 1e30;

    function setUp() public {
        ev = _read("consensus/vectors/escrow.json");
        _deploySystem();
        _registerResolvers(ev, 8);
        tok = IERC20(TOKEN);
    }

    // ------------------------------------------------------------------ helpers

    function _feeTerms(uint256 k, uint256 fee, uint256 bond)
        internal
        view
        returns (Terms memory t)
    {
        t = _terms(ev, _at(".deals", k));
        t.resolverFee = fee;
        t.challengeBond = bond;
    }

    /// @dev Funds, delivers and challenges vector deal `k` with `fee` and `bond`.
    function _disputed(uint256 k, uint256 fee, uint256 bond) internal returns (bytes32 id) {
        Terms memory t = _feeTerms(k, fee, bond);
        _allowBackend(t);
        id = _fund(t);
        _deliver(id, t, vm.parseJsonBytes32(ev, string.concat(_at(".deals", k), ".deliveryHash")));
        _challenge(id);
    }

    /// @dev A certificate of deal `k`'s side under `id`, signed by the resolvers in `mask`
    ///      (all members of epoch 8).
    function _cert(uint256 k, bool reproduced, bytes32 id, uint256 mask)
        internal
        view
        returns (VerdictCommitment memory c, uint256[] memory non, bytes memory sig)
    {
        return _cert(k, reproduced, id, mask, 8);
    }

    /// @dev As above for an epoch whose members are resolvers `[0, members)`.
    function _cert(uint256 k, bool reproduced, bytes32 id, uint256 mask, uint256 members)
        internal
        view
        returns (VerdictCommitment memory c, uint256[] memory non, bytes memory sig)
    {
        c = _vectorCommitment(
            ev, string.concat(_at(".deals", k), reproduced ? ".reproduced" : ".failed")
        );
        c.dealId = id;
        uint256 n;
        for (uint256 i; i < members; ++i) {
            if (mask & (1 << i) != 0) ++n;
        }
        uint256[] memory signers = new uint256[](n);
        non = new uint256[](members - n);
        (uint256 a, uint256 b) = (0, 0);
        for (uint256 i; i < members; ++i) {
            if (mask & (1 << i) != 0) signers[a++] = i;
            else non[b++] = i;
        }
        sig = Signer.sign(signers, escrow.verdictDigest(c));
    }

    function _resolve(uint256 k, bool reproduced, bytes32 id, uint256 mask) internal {
        (VerdictCommitment memory c, uint256[] memory non, bytes memory sig) =
            _cert(k, reproduced, id, mask);
        vm.prank(SUBMITTER);
        escrow.resolve(c, non, sig);
        _distributeHeld(id);
    }

    function _epochs(uint256 e) internal pure returns (uint256[] memory es) {
        es = new uint256[](1);
        es[0] = e;
    }

    function _pending(uint256 i) internal view returns (uint256) {
        return EscrowFees(address(escrow)).pendingRewards(tok, i, 8);
    }

    function _claim(uint256 i) internal returns (uint256) {
        vm.prank(_operator(i));
        return EscrowFees(address(escrow)).claimRewards(tok, i, _epochs(8), _operator(i));
    }

    function _conserves() internal view {
        require(tok.balanceOf(ESCROW) == escrow.liabilities(tok), "balance != liabilities");
    }

    // ------------------------------------------------------------------ payout paths

    /// @notice Reproduced: seller gets amount + DA bond + challenge bond, the submitter its
    ///         capped refund, every signer fee * stake / signedStake (all 8 sign here).
    function testReproducedPaysSignersSellerAndSubmitter() public {
        RegistrySlashing(address(registry)).setGasRefundCap(tok, 1e18);
        _afterParameterDelay();
        Terms memory t = _feeTerms(0, 8e18, 5e18);
        bytes32 id = _disputed(0, 8e18, 5e18);
        require(
            tok.balanceOf(ESCROW) == t.amount + t.sellerBond + 8e18 + 13e18,
            "deposit, fee + bond pulled"
        );
        _resolve(0, true, id, 0xff);
        require(escrow.deal(id).settlement == Settlement.Released, "released");
        require(
            _owed(SELLER) == t.amount + t.sellerBond + 8e18 + 5e18,
            "seller: amount, DA bond, deposit, bond"
        );
        require(_owed(BUYER) == 0, "buyer nothing");
        require(escrow.claimable(SUBMITTER, tok) == 1e18, "refund");
        for (uint256 i; i < 8; ++i) {
            require(_pending(i) == 0.875e18, "pro rata");
        }
        require(_claim(3) == 0.875e18, "claimed");
        require(tok.balanceOf(_operator(3)) == 0.875e18, "paid");
        require(_pending(3) == 0, "claimed once");
        vm.prank(_operator(3));
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.NoRewards.selector, 3, tok));
        EscrowFees(address(escrow)).claimRewards(tok, 3, _epochs(8), _operator(3));
        _conserves();
    }

    /// @notice Failed: buyer gets amount + challenge bond back and its fee from the seller's
    ///         deposit, seller its DA bond, the fee goes to the six signers only; the two
    ///         non-signers are owed nothing.
    function testVerdictFailedReturnsBondAndSkipsNonSigners() public {
        Terms memory t = _feeTerms(1, 6e18, 5e18);
        bytes32 id = _disputed(1, 6e18, 5e18);
        _resolve(1, false, id, 0x3f); // 0..5 sign, 6 and 7 do not
        require(escrow.deal(id).settlement == Settlement.Refunded, "refunded");
        require(_owed(BUYER) == t.amount + 5e18 + 6e18, "buyer: amount + bond + fee back");
        require(_owed(SELLER) == t.sellerBond, "seller: DA bond, deposit lost");
        require(escrow.claimable(SUBMITTER, tok) == 0, "no refund cap: nothing");
        for (uint256 i; i < 6; ++i) {
            require(_pending(i) == 1e18, "signer share");
        }
        require(_pending(6) == 0 && _pending(7) == 0, "non-signers");
        vm.prank(_operator(6));
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.NoRewards.selector, 6, tok));
        EscrowFees(address(escrow)).claimRewards(tok, 6, _epochs(8), _operator(6));
        _conserves();
    }

    /// @notice Timeout: the buyer gets amount, the forfeited DA bond, the challenge bond and
    ///         the fee; no resolver accrues anything.
    function testTimeoutReturnsFeeAndBond() public {
        Terms memory t = _feeTerms(2, 3e18, 2e18);
        bytes32 id = _disputed(2, 3e18, 2e18);
        vm.warp(escrow.deal(id).resolveDeadline + 1);
        escrow.timeoutRefund(id);
        require(_owed(BUYER) == t.amount + t.sellerBond + 2e18 + 3e18, "all to the buyer");
        require(_owed(SELLER) == t.resolverFee, "DA bond forfeited, deposit returned");
        for (uint256 i; i < 8; ++i) {
            require(_pending(i) == 0, "no rewards");
        }
        _conserves();
    }

    /// @notice An undelivered deal is reclaimed without any fee or bond ever being taken.
    function testReclaimWithoutDeliveryTakesNoFee() public {
        Terms memory t = _feeTerms(3, 3e18, 2e18);
        _allowBackend(t);
        bytes32 id = _fund(t);
        vm.warp(escrow.deal(id).deliverDeadline + 1);
        escrow.reclaim(id);
        require(_owed(BUYER) == t.amount && tok.balanceOf(ESCROW) == t.amount, "amount only");
        _conserves();
    }

    /// @notice A cancelled challenge (committee below its minimum) takes no fee or bond.
    function testCancelledChallengeTakesNothing() public {
        Terms memory t = _feeTerms(0, 3e18, 2e18);
        _allowBackend(t);
        bytes32 id = _fund(t);
        _deliver(id, t, vm.parseJsonBytes32(ev, ".deals[0].deliveryHash"));
        for (uint256 i; i < 8; ++i) {
            vm.prank(_operator(i));
            registry.requestExit();
        }
        vm.warp(block.timestamp + 1);
        vm.prank(BUYER);
        escrow.challenge(id);
        require(escrow.deal(id).settlement == Settlement.Cancelled, "cancelled");
        require(
            _owed(BUYER) == t.amount && _owed(SELLER) == t.sellerBond + t.resolverFee, "as before"
        );
        _conserves();
    }

    /// @notice A fee below the registry's minimum for the token is refused; only the owner
    ///         sets the minimum; 0 is the default.
    function testFeeBelowMinimumRefused() public {
        require(registry.minResolverFee(tok) == 0, "default 0");
        vm.expectRevert(abi.encodeWithSelector(Ownable.OwnableUnauthorizedAccount.selector, BUYER));
        vm.prank(BUYER);
        RegistrySlashing(address(registry)).setMinResolverFee(tok, 2e18);
        RegistrySlashing(address(registry)).setMinResolverFee(tok, 2e18);
        _afterParameterDelay();
        Terms memory t = _feeTerms(0, 2e18 - 1, 0);
        _allowBackend(t);
        token.mint(BUYER, t.amount);
        vm.startPrank(BUYER);
        token.approve(ESCROW, t.amount);
        vm.expectRevert(
            abi.encodeWithSelector(IEscrowErrors.FeeBelowMinimum.selector, tok, 2e18 - 1, 2e18)
        );
        escrow.fund(t, "", "");
        vm.stopPrank();
        t.resolverFee = 2e18;
        _fund(t);
    }

    /// @notice The commit-reveal setting is owner-set, for the epochs that start afterwards.
    function testCommitRevealSetting() public {
        require(registry.commitRevealMs() == 0, "off by default");
        vm.expectRevert(abi.encodeWithSelector(Ownable.OwnableUnauthorizedAccount.selector, BUYER));
        vm.prank(BUYER);
        RegistrySlashing(address(registry)).setCommitRevealMs(1500);
        RegistrySlashing(address(registry)).setCommitRevealMs(1500);
        require(registry.commitRevealMsAt(9) == 1500 && registry.commitRevealMs() == 0, "set");
    }

    /// @notice The gas refund is capped by the fee: with a cap above it all goes to the
    ///         submitter and nothing accrues.
    function testRefundCappedByFee() public {
        RegistrySlashing(address(registry)).setGasRefundCap(tok, 100e18);
        _afterParameterDelay();
        bytes32 id = _disputed(0, 3e18, 0);
        _resolve(0, true, id, 0xff);
        require(escrow.claimable(SUBMITTER, tok) == 3e18, "whole fee");
        require(_pending(0) == 0, "nothing accrued");
        _conserves();
    }

    // ------------------------------------------------------------------ slashing and exits

    /// @notice A slashed resolver's unclaimed rewards cannot be claimed; a sweep credits them
    ///         like its bond: 10 % to the whistleblower, the rest to the sink.
    function testSlashedResolverRewardsFollowTheBond() public {
        bytes32 id = _disputed(0, 8e18, 0);
        _resolve(0, true, id, 0xff);
        string memory r = ".deals[1].reproduced";
        string memory f = ".deals[1].failed";
        Evidence memory a = Evidence(
            _vectorCommitment(ev, r),
            8,
            vm.parseJsonUintArray(ev, string.concat(r, ".quorum.signers")),
            ""
        );
        Evidence memory b = Evidence(
            _vectorCommitment(ev, f),
            8,
            vm.parseJsonUintArray(ev, string.concat(f, ".quorum.signers")),
            ""
        );
        a.signature = vm.parseJsonBytes(ev, string.concat(r, ".quorum.signature"));
        b.signature = vm.parseJsonBytes(ev, string.concat(f, ".quorum.signature"));
        bytes32 ds = escrow.domainSeparator();
        vm.prank(SLASHER);
        require(
            RegistrySlashing(address(registry)).slashEquivocation(ds, a, b) == 4, "2..5 slashed"
        );
        (address wb, uint256 bps, address sink) = registry.slashRecipients(2);
        require(wb == SLASHER && bps == WHISTLEBLOWER_BPS && sink == SINK, "recipients");
        vm.prank(_operator(2));
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.RewardsForfeited.selector, 2));
        EscrowFees(address(escrow)).claimRewards(tok, 2, _epochs(8), _operator(2));
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.NotSlashed.selector, 0));
        EscrowFees(address(escrow)).sweepSlashedRewards(tok, 0, _epochs(8));
        require(
            EscrowFees(address(escrow)).sweepSlashedRewards(tok, 2, _epochs(8)) == 1e18, "swept"
        );
        require(escrow.claimable(SLASHER, tok) == 0.1e18, "whistleblower share");
        require(escrow.claimable(SINK, tok) == 0.9e18, "sink share");
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.NoRewards.selector, 2, tok));
        EscrowFees(address(escrow)).sweepSlashedRewards(tok, 2, _epochs(8));
        // Honest resolvers are unaffected.
        require(_claim(0) == 1e18, "honest claims");
        _conserves();
    }

    /// @notice A resolver that exits and withdraws its bond still claims what it earned.
    function testExitedResolverStillClaims() public {
        bytes32 id = _disputed(0, 8e18, 0);
        _resolve(0, true, id, 0xff);
        vm.prank(_operator(7));
        registry.requestExit();
        vm.warp(block.timestamp + UNBONDING);
        vm.prank(_operator(7));
        registry.withdraw();
        require(_claim(7) == 1e18, "claimed after withdraw");
        // Only the operator, to a real address; epochs it was not a member of pay nothing.
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.NotOperator.selector, 6, BUYER));
        vm.prank(BUYER);
        EscrowFees(address(escrow)).claimRewards(tok, 6, _epochs(8), BUYER);
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.ZeroAddress.selector, "to"));
        vm.prank(_operator(6));
        EscrowFees(address(escrow)).claimRewards(tok, 6, _epochs(8), address(0));
        require(
            EscrowFees(address(escrow)).pendingRewards(tok, 6, 3) == 0, "not a member of epoch 3"
        );
        _conserves();
    }

    /// @notice Rewards of several epochs in one claim; an epoch listed twice pays once.
    function testClaimSeveralEpochs() public {
        bytes32 id = _disputed(0, 8e18, 0); // pins epoch 8
        _resolve(0, true, id, 0xff);
        vm.prank(_operator(7));
        registry.requestExit(); // epoch 9: 0..6
        bytes32 id2 = _disputed(1, 7e18, 0); // pins epoch 9
        require(escrow.deal(id2).epoch == 9, "epoch 9");
        (VerdictCommitment memory c, uint256[] memory non, bytes memory sig) =
            _cert(1, true, id2, 0x7f, 7);
        escrow.resolve(c, non, sig);
        _distributeHeld(id2);
        uint256[] memory es = new uint256[](3);
        (es[0], es[1], es[2]) = (8, 9, 8);
        vm.prank(_operator(0));
        require(EscrowFees(address(escrow)).claimRewards(tok, 0, es, _operator(0)) == 2e18, "1 + 1");
        require(EscrowFees(address(escrow)).pendingRewards(tok, 7, 9) == 0, "7 left before epoch 9");
        require(_claim(7) == 1e18, "7 keeps epoch 8");
        _conserves();
    }

    // ------------------------------------------------------------------ dust and fuzz

    /// @notice Fees too small to split leave their dust tracked: signers are owed at most the
    ///         pool, the rest stays in `liabilities` (never paid, never lost).
    function testDustIsTracked() public {
        bytes32 id = _disputed(0, 7, 0);
        _resolve(0, true, id, 0xff);
        uint256 paid;
        for (uint256 i; i < 8; ++i) {
            paid += _pending(i);
        }
        require(paid == 0, "below a wei each");
        require(escrow.claimable(SUBMITTER, tok) == 0, "7 wei owed to signers in total");
        require(escrow.liabilities(tok) == tok.balanceOf(ESCROW), "tracked");
    }

    /// @notice Fuzz: any quorum signer set, fee and refund cap. Non-signers are owed nothing,
    ///         signers fee share by stake rounded down, and submitter + signers + dust == fee
    ///         with dust under one wei per signer. Claims pay exactly the pending amounts.
    function testFuzzFeeSplit(uint8 mask, uint96 fee, uint96 cap) public {
        uint256 m = uint256(mask) | 0x3f; // at least 6 of 8: a quorum
        if (mask & 1 == 0) m &= ~uint256(1 << 5); // vary which six ...
        uint256 n;
        for (uint256 i; i < 8; ++i) {
            if (m & (1 << i) != 0) ++n;
        }
        if (n < 6) m |= 1 << 6;
        RegistrySlashing(address(registry)).setGasRefundCap(tok, cap);
        _afterParameterDelay();
        bytes32 id = _disputed(0, fee, 1);
        _resolve(0, true, id, m);
        uint256 refund = escrow.claimable(SUBMITTER, tok);
        uint256 owed;
        for (uint256 i; i < 8; ++i) {
            uint256 p = _pending(i);
            if (m & (1 << i) == 0) require(p == 0, "non-signer owed");
            owed += p;
        }
        require(refund >= (cap < fee ? cap : fee), "refund below cap");
        require(refund + owed <= fee, "overpaid");
        require(fee - refund - owed < 8, "dust above a wei per signer");
        for (uint256 i; i < 8; ++i) {
            uint256 p = _pending(i);
            if (p > 0) require(_claim(i) == p, "claim == pending");
        }
        _conserves();
    }

    /// @notice The fuzz test's concrete twin: six of eight, a fee that does not divide.
    function testFeeSplitConcrete() public {
        testFuzzFeeSplit(0x3f, 1e18 + 1, 1e17);
    }
}
