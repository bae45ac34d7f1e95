// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Deal, DealState, IEscrowErrors, Settlement, Terms} from "../src/interfaces/IEscrow.sol";
import {IResolverRegistryErrors} from "../src/interfaces/IResolverRegistry.sol";
import {VerdictCommitment} from "../src/libraries/VerdictHash.sol";
import {EscrowBase} from "./utils/EscrowBase.sol";
import {Signer} from "./utils/Signer.sol";

/// @notice Stake that joins at the last moment (issue 16, Medium): a buyer registering a bond in
///         the block of its challenge neither captures nor stalls the pinned committee, because
///         a registration joins only through `activate` after the warm-up, and escrows fund only
///         deals whose deliver + challenge windows fit in that warm-up. Both exploits passed
///         against the code before the warm-up (the attacker's lone Failed certificate settled;
///         the unanimous honest certificate reverted with BelowThreshold).
contract CommitteeCaptureTest is EscrowBase {
    string internal ev;
    /// @dev Vector resolver 7 signed Failed for every deal; 0..3 signed Reproduced. The buyer
    ///      controls it through operator `_operator(7)` (its PoP is bound to that address).
    uint256 internal constant ATTACKER_KEY = 7;

    function setUp() public {
        ev = _read("consensus/vectors/escrow.json");
        _deploySystem();
        _rekeyAll(ev, ".deals");
        _registerResolvers(ev, 4); // honest stake 4,000 in epoch 4
    }

    function _delivered() internal returns (bytes32 id) {
        Terms memory t = _terms(ev, ".deals[0]");
        _allowBackend(t);
        id = _fund(t);
        _deliver(id, t, vm.parseJsonBytes32(ev, ".deals[0].deliveryHash"));
        vm.warp(block.timestamp + 1);
    }

    function _partials(string memory side, uint256[] memory signers)
        internal
        view
        returns (bytes memory sig)
    {
        for (uint256 i; i < signers.length; ++i) {
            sig = _addG2(sig, _partial(ev, side, signers[i]));
        }
    }

    function _honestCertificate()
        internal
        view
        returns (VerdictCommitment memory c, uint256[] memory non, bytes memory sig)
    {
        c = _commitment(ev, ".deals[0].reproduced");
        uint256[] memory honest = new uint256[](4);
        (honest[0], honest[1], honest[2], honest[3]) = (0, 1, 2, 3);
        sig = _partials(".deals[0].reproduced", honest);
        non = new uint256[](0);
    }

    /// @notice The buyer registers 8,003 against honest 4,000 in the block of its challenge and
    ///         signs Failed alone: refused; the honest certificate settles.
    function testLastMomentStakeCannotCaptureTheCommittee() public {
        bytes32 id = _delivered();
        uint256 attacker = _registerOne(ev, ATTACKER_KEY, _operator(ATTACKER_KEY), 8003e18);
        vm.prank(BUYER);
        escrow.challenge(id);
        require(escrow.deal(id).epoch == 4 && !registry.isMember(attacker, 4), "not pinned");

        VerdictCommitment memory failed = _commitment(ev, ".deals[0].failed");
        uint256[] memory honest = new uint256[](4);
        (honest[0], honest[1], honest[2], honest[3]) = (0, 1, 2, 3);
        bytes memory lone = _partial(ev, ".deals[0].failed", 7);
        // Before the fix: 8,003 / 12,003 >= 2/3 and the refund went through.
        vm.expectRevert(
            abi.encodeWithSelector(
                IResolverRegistryErrors.BelowThreshold.selector,
                0,
                4 * BOND,
                THRESHOLD_NUM,
                THRESHOLD_DEN
            )
        );
        escrow.resolve(failed, honest, lone);
        // Naming it as a signer does not work either: it is no member of the pinned epoch.
        uint256[] memory withAttacker = new uint256[](5);
        (withAttacker[0], withAttacker[1], withAttacker[2], withAttacker[3], withAttacker[4]) =
        (0, 1, 2, 3, attacker);
        vm.expectRevert(
            abi.encodeWithSelector(IResolverRegistryErrors.NotAMember.selector, attacker, 4)
        );
        escrow.resolve(failed, withAttacker, lone);

        // Its warm-up outlasts the dispute: it cannot join before the resolve deadline.
        Deal memory d = escrow.deal(id);
        vm.warp(d.resolveDeadline);
        uint256[] memory a = new uint256[](1);
        a[0] = attacker;
        vm.expectRevert(
            abi.encodeWithSelector(
                IResolverRegistryErrors.ActivationPending.selector,
                attacker,
                registry.activatesAt(attacker)
            )
        );
        registry.activate(a);

        (VerdictCommitment memory c, uint256[] memory non, bytes memory sig) = _honestCertificate();
        escrow.resolve(c, non, sig);
        require(escrow.deal(id).settlement == Settlement.Released, "honest verdict settles");
    }

    /// @notice The buyer registers just over a third of the new total (2,001 vs 4,000) in the
    ///         block of its challenge: the unanimous honest certificate still settles.
    function testLastMomentStakeCannotStallTheCommittee() public {
        bytes32 id = _delivered();
        _registerOne(ev, ATTACKER_KEY, _operator(ATTACKER_KEY), 2001e18);
        vm.prank(BUYER);
        escrow.challenge(id);
        (VerdictCommitment memory c, uint256[] memory non, bytes memory sig) = _honestCertificate();
        // Before the fix: BelowThreshold(4,000, 6,001, 6667), then a timeout against the seller.
        escrow.resolve(c, non, sig);
        require(escrow.deal(id).settlement == Settlement.Released, "no stall");
    }

    /// @notice What remains trusted: stake that was active when the deal was funded. An
    ///         attacker holding 2/3 of it before funding decides the deal (both parties could
    ///         see it in `currentCommittee` before any money moved).
    function testStakeActiveAtFundingIsTheTrustAssumption() public {
        uint256 attacker = _registerOne(ev, ATTACKER_KEY, _operator(ATTACKER_KEY), 8003e18);
        vm.warp(block.timestamp + ACTIVATION);
        uint256[] memory a = new uint256[](1);
        a[0] = attacker;
        require(registry.activate(a) == 5, "epoch 5");
        bytes32 id = _delivered();
        vm.prank(BUYER);
        escrow.challenge(id);
        uint256[] memory honest = new uint256[](4);
        (honest[0], honest[1], honest[2], honest[3]) = (0, 1, 2, 3);
        escrow.resolve(
            _commitment(ev, ".deals[0].failed"), honest, _partial(ev, ".deals[0].failed", 7)
        );
        require(escrow.deal(id).settlement == Settlement.Refunded, "2/3 of the stake decides");
    }

    /// @notice A deal whose funding-to-last-challenge span exceeds the warm-up is refused, and
    ///         the bound is exact.
    function testFundingRequiresWindowsWithinTheWarmUp() public {
        Terms memory t = _terms(ev, ".deals[0]");
        _allowBackend(t);
        t.challengeWindow = uint64(ACTIVATION - t.deliverWindow + 1);
        vm.expectRevert(
            abi.encodeWithSelector(
                IEscrowErrors.WindowsExceedActivationDelay.selector, ACTIVATION + 1, ACTIVATION
            )
        );
        escrow.fund(t, "", "");
        t.challengeWindow = uint64(ACTIVATION - t.deliverWindow);
        _fund(t);
    }

    /// @notice No deal is funded against a committee below the minimum stake, and a deal whose
    ///         committee collapsed before the challenge is cancelled, not left to time out.
    function testCommitteeBelowMinimumStake() public {
        Terms memory t = _terms(ev, ".deals[0]");
        _allowBackend(t);
        bytes32 id = _fund(t);
        _deliver(id, t, vm.parseJsonBytes32(ev, ".deals[0].deliveryHash"));
        for (uint256 i; i < 4; ++i) {
            vm.prank(_operator(i));
            registry.requestExit();
        }
        (uint256 epoch, uint256 stake) = registry.currentCommittee();
        require(epoch == 8 && stake == 0, "empty committee");
        Terms memory t1 = _terms(ev, ".deals[1]");
        vm.expectRevert(
            abi.encodeWithSelector(IEscrowErrors.CommitteeTooSmall.selector, 8, 0, MIN_COMMITTEE)
        );
        escrow.fund(t1, "", "");

        vm.warp(block.timestamp + 1);
        vm.prank(BUYER);
        escrow.challenge(id);
        Deal memory d = escrow.deal(id);
        require(d.state == DealState.Resolved && d.settlement == Settlement.Cancelled, "cancel");
        require(_owed(BUYER) == t.amount, "buyer refunded");
        require(_owed(SELLER) == t.sellerBond, "bond returned");
    }

    function testActivationRules() public {
        uint256[] memory a = new uint256[](1);
        vm.expectRevert(IResolverRegistryErrors.NothingToActivate.selector);
        registry.activate(new uint256[](0));
        a[0] = 2;
        vm.expectRevert(abi.encodeWithSelector(IResolverRegistryErrors.NotPending.selector, 2));
        registry.activate(a);
        a[0] = 9;
        vm.expectRevert(
            abi.encodeWithSelector(IResolverRegistryErrors.UnknownResolver.selector, 9, 4)
        );
        registry.activate(a);

        uint256 x = _registerOne(ev, 4, _operator(4), BOND);
        uint256 y = _registerOne(ev, 5, _operator(5), BOND);
        require(registry.currentEpoch() == 4, "registration alone starts no epoch");
        uint256[] memory both = new uint256[](2);
        (both[0], both[1]) = (x, y);
        vm.warp(block.timestamp + ACTIVATION - 1);
        vm.expectRevert(
            abi.encodeWithSelector(
                IResolverRegistryErrors.ActivationPending.selector, x, block.timestamp + 1
            )
        );
        registry.activate(both);
        vm.warp(block.timestamp + 1);
        (both[0], both[1]) = (y, x);
        vm.expectRevert(
            abi.encodeWithSelector(IResolverRegistryErrors.IndicesNotAscending.selector, 1)
        );
        registry.activate(both);
        // A pending resolver that exits never joins, and its exit starts no epoch.
        vm.prank(_operator(5));
        registry.requestExit();
        require(registry.currentEpoch() == 4, "exit of a pending resolver");
        (both[0], both[1]) = (x, y);
        vm.expectRevert(abi.encodeWithSelector(IResolverRegistryErrors.NotPending.selector, y));
        registry.activate(both);
        a[0] = x;
        require(registry.activate(a) == 5, "one epoch");
        (, uint256 total, uint256 members,) = registry.epochInfo(5);
        require(total == 5 * BOND && members == 5 && registry.isMember(x, 5), "joined");
        require(!registry.isMember(y, 5), "never joined");
    }
}

/// @notice Pending stake around the challenge. The seller funds against committee C (epoch 4:
///         resolvers 0..3, 4,000). An attacker holds two registrations (vector keys 5 and 6,
///         1,000 + 1,001) that finished their warm-up before the deal was funded but were never
///         activated: not in C, and just over a third of the stake once they join (2,001 of
///         6,001), enough to stall any certificate they do not sign. Whenever they are
///         activated (the block before the challenge, the challenge's block before or after it,
///         the block after), the dispute pins C and C's honest certificate settles it.
contract PendingStakeAtChallengeTest is EscrowBase {
    string internal ev;
    uint256[] internal attacker;

    function setUp() public {
        ev = _read("consensus/vectors/escrow.json");
        _deploySystem();
        _registerResolvers(ev, 4);
        attacker.push(_registerOne(ev, 5, _operator(5), 1000e18));
        attacker.push(_registerOne(ev, 6, _operator(6), 1001e18));
        // Warm-up over, never activated: anyone may activate them from now on.
        vm.warp(block.timestamp + ACTIVATION);
    }

    function _next() internal {
        vm.roll(block.number + 1);
        vm.warp(block.timestamp + 12);
    }

    /// @dev Funds deal 0 against C and delivers it; `resolveWindow` 0 keeps the vector's.
    function _fundedAgainstC(uint64 resolveWindow) internal returns (bytes32 id) {
        Terms memory t = _terms(ev, ".deals[0]");
        if (resolveWindow != 0) t.resolveWindow = resolveWindow;
        _allowBackend(t);
        id = _fund(t);
        (uint256 epoch, uint256 stake) = registry.currentCommittee();
        require(epoch == 4 && stake == 4 * BOND, "funded against C");
        _deliver(id, t, vm.parseJsonBytes32(ev, ".deals[0].deliveryHash"));
        _next();
    }

    function _activateAttacker() internal {
        require(registry.activate(attacker) == 5, "the attacker joins epoch 5");
        (, uint256 total,,) = registry.epochInfo(5);
        require(total == 6001e18, "just over a third of the stake");
    }

    /// @dev The buyer challenges in the current block.
    function _challengeNow(bytes32 id) internal {
        Deal memory d = escrow.deal(id);
        uint256 due = uint256(d.resolverFee) + d.challengeBond;
        token.mint(BUYER, due);
        vm.startPrank(BUYER);
        token.approve(ESCROW, due);
        escrow.challenge(id);
        vm.stopPrank();
    }

    function _commitment(bytes32 id, string memory side)
        internal
        view
        returns (VerdictCommitment memory c)
    {
        c = _vectorCommitment(ev, string.concat(".deals[0].", side));
        c.dealId = id;
    }

    /// @dev The certificate of C's honest members 0..3 over Reproduced, every other member of
    ///      the pinned epoch named as a non-signer; the dispute must settle with it.
    function _honestCertificateSettles(bytes32 id) internal {
        uint256 epoch = escrow.deal(id).epoch;
        uint256[] memory members = registry.epochMembers(epoch);
        uint256[] memory non = new uint256[](members.length - 4);
        uint256 k;
        for (uint256 p; p < members.length; ++p) {
            if (members[p] > 3) non[k++] = members[p];
        }
        uint256[] memory honest = new uint256[](4);
        (honest[0], honest[1], honest[2], honest[3]) = (0, 1, 2, 3);
        VerdictCommitment memory c = _commitment(id, "reproduced");
        escrow.resolve(c, non, Signer.sign(honest, escrow.verdictDigest(c)));
        Deal memory d = escrow.deal(id);
        require(d.settlement == Settlement.Released, "C's honest certificate settles");
    }

    /// @dev The dispute is judged by C; the attacker's certificate is no certificate of it.
    function _judgedByC(bytes32 id) internal {
        require(escrow.deal(id).epoch == 4, "the dispute pins C");
        require(registry.currentEpoch() == 5, "the attacker is in the current committee");
        VerdictCommitment memory failed = _commitment(id, "failed");
        uint256[] memory honest = new uint256[](4);
        (honest[0], honest[1], honest[2], honest[3]) = (0, 1, 2, 3);
        bytes memory lone = Signer.sign(attacker, escrow.verdictDigest(failed));
        vm.expectRevert(
            abi.encodeWithSelector(
                IResolverRegistryErrors.BelowThreshold.selector,
                0,
                4 * BOND,
                THRESHOLD_NUM,
                THRESHOLD_DEN
            )
        );
        this.resolveWith(failed, honest, lone);
        _honestCertificateSettles(id);
    }

    /// @dev External so that `expectRevert` sees only the `resolve`.
    function resolveWith(VerdictCommitment memory c, uint256[] memory non, bytes memory sig)
        external
    {
        escrow.resolve(c, non, sig);
    }

    function testActivatedInTheBlockBeforeTheChallenge() public {
        bytes32 id = _fundedAgainstC(0);
        _activateAttacker();
        _next();
        _challengeNow(id);
        _judgedByC(id);
    }

    function testActivatedInTheChallengeBlockBeforeTheChallenge() public {
        bytes32 id = _fundedAgainstC(0);
        _activateAttacker();
        _challengeNow(id);
        _judgedByC(id);
    }

    function testActivatedInTheChallengeBlockAfterTheChallenge() public {
        bytes32 id = _fundedAgainstC(0);
        _challengeNow(id);
        _activateAttacker();
        _judgedByC(id);
    }

    function testActivatedInTheBlockAfterTheChallenge() public {
        bytes32 id = _fundedAgainstC(0);
        _challengeNow(id);
        _next();
        _activateAttacker();
        _judgedByC(id);
    }

    /// @notice Activated right after the funding, with the challenge at the last second of its
    ///         window and the longest resolve window: C's certificate still counts at the
    ///         resolve deadline, more than `maxResolveWindow` after the activation (an epoch
    ///         stays fresh until one of its members leaves; the activation removed nobody).
    function testActivatedRightAfterFundingTheCommitteeStaysFreshUntilTheDeadline() public {
        bytes32 id = _fundedAgainstC(uint64(MAX_RESOLVE));
        _activateAttacker();
        uint256 activatedAt = block.timestamp;
        vm.warp(escrow.deal(id).challengeDeadline - 1);
        _challengeNow(id);
        vm.warp(escrow.deal(id).resolveDeadline);
        require(block.timestamp > activatedAt + MAX_RESOLVE, "past the activation's window");
        _judgedByC(id);
    }

    /// @notice An epoch followed only by activations stays fresh (none of its members left);
    ///         its freshness ends `maxResolveWindow` after the first later epoch that removed
    ///         members, found past a run of activations. `committeeFor` pins the epoch before
    ///         the first activation after the funding one.
    function testFreshnessEndsAtTheFirstExitAfterActivations() public {
        bytes32 digest = keccak256("digest");
        uint256[] memory zero = new uint256[](1);
        bytes memory sig = Signer.sign(zero, digest);
        uint256[] memory none = new uint256[](0);
        // Epochs 2, 3, 4 were activations, long ago: epoch 1 (resolver 0 alone) is fresh.
        (, uint256 totalStake) = registry.verifyCertificate(1, digest, none, sig);
        require(totalStake == BOND, "epoch 1");
        uint256[] memory one = new uint256[](1);
        one[0] = attacker[0];
        require(registry.activate(one) == 5, "5");
        _next();
        one[0] = attacker[1];
        require(registry.activate(one) == 6, "6");
        _next();
        vm.prank(_operator(2));
        registry.requestExit(); // epoch 7: the first after epoch 1 that removed a member
        uint256 leftAt = block.timestamp;
        vm.warp(leftAt + MAX_RESOLVE);
        registry.verifyCertificate(1, digest, none, sig);
        vm.warp(leftAt + MAX_RESOLVE + 1);
        vm.expectRevert(
            abi.encodeWithSelector(
                IResolverRegistryErrors.StaleEpoch.selector, 1, leftAt, leftAt + MAX_RESOLVE
            )
        );
        registry.verifyCertificate(1, digest, none, sig);
        uint256[8] memory pinned = [uint256(0), 1, 2, 3, 4, 5, 7, 7];
        for (uint256 f; f < 8; ++f) {
            (uint256 epoch,) = registry.committeeFor(f);
            require(epoch == pinned[f], string.concat("committeeFor ", vm.toString(f)));
        }
    }

    /// @notice What bounds C's certificate: a member of C leaving after the attacker joined
    ///         starts C's freshness clock (its bond unlocks `unbondingDelay` later), so the
    ///         certificate must land within `maxResolveWindow` of that exit, as for any epoch
    ///         a member left.
    function testAMemberLeavingCStartsItsFreshnessClock() public {
        bytes32 id = _fundedAgainstC(uint64(MAX_RESOLVE));
        _activateAttacker();
        _next();
        vm.prank(_operator(3));
        registry.requestExit(); // epoch 6 starts without resolver 3
        uint256 leftAt = block.timestamp;
        _next();
        _challengeNow(id);
        require(escrow.deal(id).epoch == 4, "the dispute pins C");
        uint256[] memory non = new uint256[](0);
        uint256[] memory honest = new uint256[](4);
        (honest[0], honest[1], honest[2], honest[3]) = (0, 1, 2, 3);
        VerdictCommitment memory c = _commitment(id, "reproduced");
        bytes memory sig = Signer.sign(honest, escrow.verdictDigest(c));
        vm.warp(leftAt + MAX_RESOLVE + 1);
        vm.expectRevert(
            abi.encodeWithSelector(
                IResolverRegistryErrors.StaleEpoch.selector, 4, leftAt, leftAt + MAX_RESOLVE
            )
        );
        this.resolveWith(c, non, sig);
        vm.warp(leftAt + MAX_RESOLVE);
        escrow.resolve(c, non, sig);
        require(escrow.deal(id).settlement == Settlement.Released, "settled within the window");
    }
}
