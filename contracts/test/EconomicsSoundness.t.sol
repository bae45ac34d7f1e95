// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {EscrowFees} from "../src/EscrowFees.sol";
import {RegistrySlashing} from "../src/RegistrySlashing.sol";
import {ResolverRegistry} from "../src/ResolverRegistry.sol";
import {IEscrowErrors, Settlement, Terms} from "../src/interfaces/IEscrow.sol";
import {Evidence, IResolverRegistryErrors} from "../src/interfaces/IResolverRegistry.sol";
import {VerdictCommitment} from "../src/libraries/VerdictHash.sol";
import {EscrowBase} from "./utils/EscrowBase.sol";
import {Signer} from "./utils/Signer.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice What the owner, a seller, a buyer, pending stake or an equivocator cannot game
///         (ECONOMICS.md): pinned and timelocked parameters, the loser paying the resolver fee,
///         the minimum resolve window, expiring registrations, resumable slashing, the bounded
///         and per-epoch commit-reveal setting, the capped whistleblower share and the dust
///         handed to the sink. Eight resolvers of equal bond, one by one: epoch 8 holds all.
contract EconomicsSoundnessTest is EscrowBase {
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

    function _delivered(uint256 k, uint256 fee, uint256 bond) internal returns (bytes32 id) {
        Terms memory t = _feeTerms(k, fee, bond);
        _allowBackend(t);
        id = _fund(t);
        _deliver(id, t, vm.parseJsonBytes32(ev, string.concat(_at(".deals", k), ".deliveryHash")));
    }

    function _disputed(uint256 k, uint256 fee, uint256 bond) internal returns (bytes32 id) {
        id = _delivered(k, fee, bond);
        _challenge(id);
    }

    /// @dev Resolves deal `k` (under `id`) with the signers in `mask` of epoch 8.
    function _resolve(uint256 k, bool reproduced, bytes32 id, uint256 mask) internal {
        VerdictCommitment memory c = _vectorCommitment(
            ev, string.concat(_at(".deals", k), reproduced ? ".reproduced" : ".failed")
        );
        c.dealId = id;
        uint256 n;
        for (uint256 i; i < 8; ++i) {
            if (mask & (1 << i) != 0) ++n;
        }
        uint256[] memory signers = new uint256[](n);
        uint256[] memory non = new uint256[](8 - n);
        (uint256 a, uint256 b) = (0, 0);
        for (uint256 i; i < 8; ++i) {
            if (mask & (1 << i) != 0) signers[a++] = i;
            else non[b++] = i;
        }
        bytes memory sig = Signer.sign(signers, escrow.verdictDigest(c));
        vm.prank(SUBMITTER);
        escrow.resolve(c, non, sig);
        _distributeHeld(id);
    }

    function _epoch8() internal pure returns (uint256[] memory es) {
        es = new uint256[](1);
        es[0] = 8;
    }

    /// @dev Vector deal 1's two quorums: 2..5 signed both.
    function _equivocation() internal view returns (Evidence memory a, Evidence memory b) {
        string memory r = ".deals[1].reproduced";
        string memory f = ".deals[1].failed";
        a = Evidence(
            _vectorCommitment(ev, r),
            8,
            vm.parseJsonUintArray(ev, string.concat(r, ".quorum.signers")),
            vm.parseJsonBytes(ev, string.concat(r, ".quorum.signature"))
        );
        b = Evidence(
            _vectorCommitment(ev, f),
            8,
            vm.parseJsonUintArray(ev, string.concat(f, ".quorum.signers")),
            vm.parseJsonBytes(ev, string.concat(f, ".quorum.signature"))
        );
    }

    function _conserves() internal view {
        require(tok.balanceOf(ESCROW) == escrow.liabilities(tok), "balance != liabilities");
    }

    // ------------------------------------------------------------------ pinned, timelocked

    /// @notice The owner raises the gas refund cap to the whole fee while a dispute is open and
    ///         submits the certificate itself: it gets only the refund pinned at `challenge`;
    ///         the signers keep the rest. (Before: the cap was read at `resolve` and the owner
    ///         took the whole fee.)
    function testOwnerCannotRedirectAnOpenDisputesFee() public {
        RegistrySlashing(address(registry)).setGasRefundCap(tok, 0.01e18);
        _afterParameterDelay();
        // The owner announces a cap of the whole fee; a dispute opens just before it applies.
        RegistrySlashing(address(registry)).setGasRefundCap(tok, 8e18);
        (, uint256 effectiveAt) = RegistrySlashing(address(registry)).scheduled("gasRefundCap", tok);
        vm.warp(effectiveAt - 1 hours);
        bytes32 id = _disputed(0, 8e18, 0);
        require(escrow.pinnedGasRefund(id) == 0.01e18, "pinned at challenge");
        vm.warp(effectiveAt);
        require(registry.gasRefundCap(tok) == 8e18, "new cap in force");
        _resolve(0, true, id, 0xff);
        require(escrow.claimable(SUBMITTER, tok) == 0.01e18, "only the pinned refund");
        for (uint256 i; i < 8; ++i) {
            require(
                EscrowFees(address(escrow)).pendingRewards(tok, i, 8) == (8e18 - 0.01e18) / 8,
                "signers paid"
            );
        }
        _conserves();
    }

    /// @notice Once a committee exists every owner change waits `parameterDelay()` (the
    ///         warm-up), visible through `scheduled`; before that it applies at once. Only the
    ///         owner may schedule.
    function testOwnerChangesWaitTheParameterDelay() public {
        uint256 delay = registry.parameterDelay();
        require(delay == ACTIVATION, "the warm-up");
        RegistrySlashing(address(registry)).setGasRefundCap(tok, 1e18);
        RegistrySlashing(address(registry)).setMinResolverFee(tok, 2e18);
        RegistrySlashing(address(registry)).setWhistleblowerCap(3e18);
        RegistrySlashing(address(registry)).setMinResolveWindow(1 hours);
        require(registry.gasRefundCap(tok) == 0, "cap not yet");
        require(registry.minResolverFee(tok) == 0, "minimum fee not yet");
        require(registry.whistleblowerCap() == type(uint128).max, "whistleblower cap not yet");
        require(registry.minResolveWindow() == 10 minutes, "default 10 minutes");
        (uint256 next, uint256 at) =
            RegistrySlashing(address(registry)).scheduled("gasRefundCap", tok);
        require(next == 1e18 && at == block.timestamp + delay, "announced");
        // A deal funded meanwhile still meets the old minimum fee.
        _delivered(0, 1e18, 0);
        vm.warp(block.timestamp + delay);
        require(registry.gasRefundCap(tok) == 1e18, "cap in force");
        require(registry.minResolverFee(tok) == 2e18, "minimum in force");
        require(registry.whistleblowerCap() == 3e18, "whistleblower cap in force");
        require(registry.minResolveWindow() == 1 hours, "window in force");
        (next, at) = RegistrySlashing(address(registry)).scheduled("gasRefundCap", tok);
        require(next == 0 && at == 0, "nothing pending");

        bytes[4] memory calls = [
            abi.encodeCall(RegistrySlashing.setGasRefundCap, (tok, 1)),
            abi.encodeCall(RegistrySlashing.setMinResolverFee, (tok, 1)),
            abi.encodeCall(RegistrySlashing.setWhistleblowerCap, (1)),
            abi.encodeCall(RegistrySlashing.setMinResolveWindow, (1 hours))
        ];
        for (uint256 i; i < 4; ++i) {
            vm.prank(BUYER);
            (bool ok, bytes memory err) = address(registry).call(calls[i]);
            require(
                !ok
                    && keccak256(err)
                        == keccak256(
                            abi.encodeWithSelector(
                                Ownable.OwnableUnauthorizedAccount.selector, BUYER
                            )
                        ),
                "owner only"
            );
        }

        // A fresh registry (no committee yet) applies changes at once.
        ResolverRegistry fresh = new ResolverRegistry(_params());
        RegistrySlashing(address(fresh)).setGasRefundCap(tok, 5);
        require(fresh.gasRefundCap(tok) == 5, "bootstrap: immediate");
    }

    // ------------------------------------------------------------------ the loser pays

    /// @notice Failed: the seller's dispute deposit (locked at delivery) reimburses the buyer's
    ///         resolver fee; the DA bond still returns to the seller. (Before: the buyer paid
    ///         the fee and the seller lost nothing.)
    function testSellerPaysTheResolverFeeOnFailed() public {
        Terms memory t = _feeTerms(1, 6e18, 5e18);
        uint256 before = tok.balanceOf(ESCROW);
        bytes32 id = _delivered(1, 6e18, 5e18);
        require(
            tok.balanceOf(ESCROW) - before == t.amount + t.sellerBond + 6e18,
            "deposit locked at delivery"
        );
        _challenge(id);
        _resolve(1, false, id, 0x3f);
        require(escrow.deal(id).settlement == Settlement.Refunded, "refunded");
        require(_owed(BUYER) == t.amount + 5e18 + 6e18, "buyer: amount, bond and its fee back");
        require(_owed(SELLER) == t.sellerBond, "seller: DA bond only, the deposit is gone");
        uint256 accrued;
        for (uint256 i; i < 8; ++i) {
            accrued += EscrowFees(address(escrow)).pendingRewards(tok, i, 8);
        }
        require(accrued == 6e18, "the signers still get the fee");
        _conserves();
    }

    /// @notice Reproduced, release and a timeout return the deposit to the seller; a timeout
    ///         still forfeits the DA bond (and only then).
    function testDepositReturnsUnlessFailed() public {
        Terms memory t = _feeTerms(0, 4e18, 1e18);
        bytes32 id = _disputed(0, 4e18, 1e18);
        _resolve(0, true, id, 0xff);
        require(_owed(SELLER) == t.amount + t.sellerBond + 4e18 + 1e18, "Reproduced");
        vm.prank(SELLER);
        escrow.claim(tok, SELLER);

        bytes32 id2 = _disputed(1, 4e18, 1e18);
        Terms memory t2 = _feeTerms(1, 4e18, 1e18);
        vm.warp(escrow.deal(id2).resolveDeadline + 1);
        escrow.timeoutRefund(id2);
        require(_owed(SELLER) == 4e18, "timeout: deposit back, DA bond forfeited");
        require(
            _owed(BUYER) == t2.amount + t2.sellerBond + 1e18 + 4e18,
            "timeout: amount, DA bond, bond, fee"
        );
        _conserves();
    }

    // ------------------------------------------------------------------ resolve window

    /// @notice A resolve window under the registry minimum is refused at funding; the minimum
    ///         stays within its fixed bounds. (Before: a window of one second was accepted.)
    function testResolveWindowBelowTheMinimumRefused() public {
        Terms memory t = _feeTerms(0, 0, 0);
        t.resolveWindow = 1;
        _allowBackend(t);
        token.mint(BUYER, t.amount);
        vm.startPrank(BUYER);
        token.approve(ESCROW, t.amount);
        vm.expectRevert(
            abi.encodeWithSelector(IEscrowErrors.WindowTooShort.selector, "resolve", 10 minutes)
        );
        escrow.fund(t, "", "");
        vm.stopPrank();
        t.resolveWindow = 10 minutes;
        _fund(t);
        vm.expectRevert(
            abi.encodeWithSelector(
                IResolverRegistryErrors.ParameterOutOfRange.selector,
                "minResolveWindow",
                1 minutes,
                5 minutes,
                MAX_RESOLVE
            )
        );
        RegistrySlashing(address(registry)).setMinResolveWindow(1 minutes);
        vm.expectRevert(
            abi.encodeWithSelector(
                IResolverRegistryErrors.ParameterOutOfRange.selector,
                "minResolveWindow",
                MAX_RESOLVE + 1,
                5 minutes,
                MAX_RESOLVE
            )
        );
        RegistrySlashing(address(registry)).setMinResolveWindow(MAX_RESOLVE + 1);
    }

    // ------------------------------------------------------------------ commit-reveal

    /// @notice `commitRevealMs` is bounded (three phases in half the minimum resolve window)
    ///         and pinned per epoch: a change applies from the next epoch; open disputes keep
    ///         their epoch's value. (Before: type(uint32).max was accepted and applied at once.)
    function testCommitRevealBoundedAndPinnedPerEpoch() public {
        vm.expectRevert(
            abi.encodeWithSelector(
                IResolverRegistryErrors.ParameterOutOfRange.selector,
                "commitRevealMs",
                type(uint32).max,
                0,
                100_000
            )
        );
        RegistrySlashing(address(registry)).setCommitRevealMs(type(uint32).max);
        RegistrySlashing(address(registry)).setCommitRevealMs(100_000);
        RegistrySlashing(address(registry)).setCommitRevealMs(5000);
        require(registry.commitRevealMs() == 0, "current epoch keeps its value");
        require(registry.commitRevealMsAt(8) == 0, "epoch 8 pinned 0");
        vm.prank(_operator(7));
        registry.requestExit(); // epoch 9
        require(registry.commitRevealMsAt(9) == 5000 && registry.commitRevealMs() == 5000, "9");
        require(registry.commitRevealMsAt(8) == 0, "8 unchanged");
        // The minimum resolve window cannot drop below what the setting needs.
        RegistrySlashing(address(registry)).setCommitRevealMs(60_000);
        vm.expectRevert(
            abi.encodeWithSelector(
                IResolverRegistryErrors.ParameterOutOfRange.selector,
                "minResolveWindow",
                5 minutes,
                6 minutes,
                MAX_RESOLVE
            )
        );
        RegistrySlashing(address(registry)).setMinResolveWindow(5 minutes);
    }

    // ------------------------------------------------------------------ whistleblower

    /// @notice An equivocator reporting itself from a fresh address gets at most the capped
    ///         whistleblower share per slashed resolver (set near the gas cost of the report);
    ///         the rest of every bond goes to the sink. (Before: 10 % of each bond.)
    function testSelfReportEarnsAtMostTheCap() public {
        RegistrySlashing(address(registry)).setWhistleblowerCap(0.05e18);
        _afterParameterDelay();
        (Evidence memory a, Evidence memory b) = _equivocation();
        address fresh = address(0xf4e5);
        bytes32 ds = escrow.domainSeparator();
        vm.prank(fresh);
        require(RegistrySlashing(address(registry)).slashEquivocation(ds, a, b) == 4, "2..5");
        require(registry.claimable(fresh) == 4 * 0.05e18, "capped share");
        require(registry.claimable(SINK) == 4 * (BOND - 0.05e18), "the rest to the sink");
        require(registry.slashedBy(2) == fresh, "recorded");
        require(registry.slashedFor(escrow.domainSeparator(), a.commitment.dealId, 2), "for");
        require(!registry.slashedFor(escrow.domainSeparator(), bytes32(0), 2), "not other");
        require(!registry.slashedFor(escrow.domainSeparator(), a.commitment.dealId, 0), "0");
    }

    // ------------------------------------------------------------------ slashing in pieces

    /// @notice Slashing resumes across bounded calls: 2 + 2, then nothing is left. Each call
    ///         starts one epoch.
    function testSlashingResumesAcrossCalls() public {
        (Evidence memory a, Evidence memory b) = _equivocation();
        bytes32 ds = escrow.domainSeparator();
        vm.prank(SLASHER);
        require(
            RegistrySlashing(address(registry)).slashEquivocationUpTo(ds, a, b, 2) == 2, "first two"
        );
        (ResolverRegistry.Resolver memory r2,,) = registry.resolverInfo(2);
        (ResolverRegistry.Resolver memory r4,,) = registry.resolverInfo(4);
        require(r2.slashed && !r4.slashed, "lowest first");
        require(registry.currentEpoch() == 9, "one epoch");
        vm.prank(SLASHER);
        require(
            RegistrySlashing(address(registry)).slashEquivocationUpTo(ds, a, b, 2) == 2,
            "the next two"
        );
        require(registry.currentEpoch() == 10, "one more");
        vm.prank(SLASHER);
        vm.expectRevert(IResolverRegistryErrors.NoEquivocator.selector);
        RegistrySlashing(address(registry)).slashEquivocationUpTo(ds, a, b, 2);
        require(registry.claimable(SLASHER) == 4 * BOND / 10, "whistleblower, uncapped default");
    }

    // ------------------------------------------------------------------ slashed weight

    /// @notice Members slashed after a dispute pinned their epoch no longer count toward its
    ///         certificate: 2..5 are slashed (4 of 8); a certificate by 0..5 (6 of 8 >= 2/3)
    ///         holds only 2 of the 4 unslashed and is refused; one by 0, 1, 6 and 2..5 holds 3
    ///         of 4 and settles. The slashed signers' fee share is swept, not paid.
    ///         (Before: the 0..5 certificate settled on slashed weight.)
    function testSlashedStakeDoesNotCountInItsEpoch() public {
        bytes32 id = _disputed(0, 8e18, 0);
        (Evidence memory a, Evidence memory b) = _equivocation();
        bytes32 ds = escrow.domainSeparator();
        vm.prank(SLASHER);
        RegistrySlashing(address(registry)).slashEquivocation(ds, a, b);
        uint256[] memory non = new uint256[](2);
        (non[0], non[1]) = (6, 7);
        (uint256 total, uint256 signed) = registry.slashedStake(8, non);
        require(total == 4 * BOND && signed == 4 * BOND, "2..5 in epoch 8");
        (total, signed) = registry.slashedStake(9, non);
        require(total == 0 && signed == 0, "epoch 9 has none of them");
        vm.expectRevert(
            abi.encodeWithSelector(IEscrowErrors.SlashedSignersDecide.selector, 2 * BOND, 4 * BOND)
        );
        this.resolveAs(0, true, id, 0x3f);
        _resolve(0, true, id, 0x7f);
        require(escrow.deal(id).settlement == Settlement.Released, "settled by the unslashed");
        uint256 share = uint256(8e18) / 7;
        require(
            EscrowFees(address(escrow)).pendingRewards(tok, 0, 8) == share,
            "seven signers share the fee"
        );
        require(
            EscrowFees(address(escrow)).sweepSlashedRewards(tok, 2, _epoch8()) == share,
            "2's share swept"
        );
        _conserves();
    }

    /// @dev External so that `expectRevert` sees the `resolve` (after the signing views).
    function resolveAs(uint256 k, bool reproduced, bytes32 id, uint256 mask) external {
        _resolve(k, reproduced, id, mask);
    }

    // ------------------------------------------------------------------ dust and the sink

    /// @notice Rounding remainders are tracked exactly: after every signer claimed, refund +
    ///         claims + dust == fee to the wei, and `flushSink` hands the dust and the sink's
    ///         credits to the sink address (the escrow keeps nothing it does not owe). The
    ///         registry's sink proceeds leave the same way. (Before: dust stayed in
    ///         `liabilities` forever and a burn sink's credits stayed in the contracts.)
    function testDustAndSinkLeaveTheContracts() public {
        uint256 fee = 1e18 + 1;
        bytes32 id = _disputed(0, fee, 0);
        _resolve(0, true, id, 0x7f); // 7 of 8: fee / 7 does not divide
        uint256 claimed;
        for (uint256 i; i < 7; ++i) {
            vm.prank(_operator(i));
            claimed += EscrowFees(address(escrow)).claimRewards(tok, i, _epoch8(), _operator(i));
        }
        uint256 refund = escrow.claimable(SUBMITTER, tok);
        uint256 dust = escrow.dustRemainder(tok);
        require(dust % P == 0, "whole wei once everyone claimed");
        require(refund + claimed + dust / P == fee, "fee fully assigned");
    }

    /// @notice The sink's shares and the dust are flushed to the sink by anyone.
    function testFlushSink() public {
        bytes32 id = _disputed(0, 1e18 + 1, 0);
        _resolve(0, true, id, 0x7f);
        (Evidence memory a, Evidence memory b) = _equivocation();
        bytes32 ds = escrow.domainSeparator();
        vm.prank(SLASHER);
        RegistrySlashing(address(registry)).slashEquivocation(ds, a, b);
        uint256 swept = EscrowFees(address(escrow)).sweepSlashedRewards(tok, 2, _epoch8());
        uint256 sinkCredit = escrow.claimable(SINK, tok);
        require(sinkCredit == swept - swept / 10, "sink share");
        for (uint256 i; i < 7; ++i) {
            if (i >= 2 && i <= 5) continue;
            vm.prank(_operator(i));
            EscrowFees(address(escrow)).claimRewards(tok, i, _epoch8(), _operator(i));
        }
        uint256 dustWei = escrow.dustRemainder(tok) / P;
        uint256 sinkBefore = tok.balanceOf(SINK);
        vm.prank(BUYER);
        require(EscrowFees(address(escrow)).flushSink(tok) == sinkCredit + dustWei, "flushed");
        require(tok.balanceOf(SINK) - sinkBefore >= sinkCredit, "at the sink");
        require(escrow.claimable(SINK, tok) == 0, "nothing left");
        _conserves();
        uint256 regSink = registry.claimable(SINK);
        require(regSink > 0, "registry sink share");
        vm.prank(BUYER);
        require(RegistrySlashing(address(registry)).flushSink() == regSink, "registry flushed");
        require(registry.claimable(SINK) == 0, "registry: nothing left");
    }
}

/// @notice Pending stake cannot wait unseen: a registration expires `activationDelay` after
///         its warm-up.
contract PendingStakeExpiryTest is EscrowBase {
    string internal ev;

    function setUp() public {
        ev = _read("consensus/vectors/escrow.json");
        _deploySystem();
        _registerOne(ev, 0, _operator(0), BOND);
    }

    /// @notice Not activated within `activationDelay` after its warm-up, a registration
    ///         expires: it cannot be held back and activated at a moment of its holder's
    ///         choosing (a challenge block). Its operator renews it for a new warm-up.
    ///         (Before: it could be activated at any time later.)
    function testPendingRegistrationExpires() public {
        uint256[] memory one = new uint256[](1);
        uint256 at = registry.activatesAt(0);
        vm.warp(at + ACTIVATION + 1);
        vm.expectRevert(
            abi.encodeWithSelector(
                IResolverRegistryErrors.ActivationExpired.selector, 0, at + ACTIVATION
            )
        );
        registry.activate(one);
        vm.prank(_operator(0));
        registry.renewActivation();
        vm.expectRevert(
            abi.encodeWithSelector(
                IResolverRegistryErrors.ActivationPending.selector, 0, block.timestamp + ACTIVATION
            )
        );
        registry.activate(one);
        vm.warp(block.timestamp + ACTIVATION);
        require(registry.activate(one) == 1, "activated after renewing");
    }
}
