// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Escrow} from "../src/Escrow.sol";
import {RegistrySlashing} from "../src/RegistrySlashing.sol";
import {ResolverRegistry} from "../src/ResolverRegistry.sol";
import {
    Authorization,
    Deal,
    DealState,
    IEscrowErrors,
    Settlement,
    Terms
} from "../src/interfaces/IEscrow.sol";
import {
    Evidence,
    IResolverRegistryErrors,
    RegistryParameters
} from "../src/interfaces/IResolverRegistry.sol";
import {BLS} from "../src/libraries/BLS.sol";
import {Outcome, VerdictCommitment} from "../src/libraries/VerdictHash.sol";
import {FeeToken} from "./mocks/FeeToken.sol";
import {EscrowBase} from "./utils/EscrowBase.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice Escrow and registry behaviour on real BLS certificates from consensus/vectors/escrow.json.
contract EscrowTest is EscrowBase {
    string internal ev;

    function setUp() public {
        ev = _read("consensus/vectors/escrow.json");
        _deploySystem();
        _registerResolvers(ev, 8);
        _rekeyAll(ev, ".deals");
    }

    function _deal(uint256 k) internal pure returns (string memory) {
        return _at(".deals", k);
    }

    function _side(uint256 k, bool reproduced) internal pure returns (string memory) {
        return string.concat(_deal(k), reproduced ? ".reproduced" : ".failed");
    }

    function _quorum(uint256 k, bool reproduced)
        internal
        view
        returns (VerdictCommitment memory c, uint256[] memory nonSigners, bytes memory sig)
    {
        string memory s = _side(k, reproduced);
        c = _commitment(ev, s);
        nonSigners = vm.parseJsonUintArray(ev, string.concat(s, ".quorum.nonSigners"));
        sig = _quorumSignature(ev, s);
    }

    function _evidence(uint256 k, bool reproduced) internal view returns (Evidence memory e) {
        string memory s = _side(k, reproduced);
        e.commitment = _commitment(ev, s);
        e.epoch = 8;
        e.signers = vm.parseJsonUintArray(ev, string.concat(s, ".quorum.signers"));
        e.signature = _quorumSignature(ev, s);
    }

    function _selector(bytes memory reason) internal pure returns (bytes4 s) {
        // forge-lint: disable-next-line(unsafe-typecast)
        if (reason.length >= 4) s = bytes4(reason); // the selector: first four bytes
    }

    // ------------------------------------------------------------------ vectors agree

    function testVectorsMatchDeployment() public {
        require(escrow.domainSeparator() == vm.parseJsonBytes32(ev, ".domainSeparator"), "domain");
        require(vm.parseJsonUint(ev, ".chainId") == block.chainid, "chain id");
        require(vm.parseJsonAddress(ev, ".escrow") == address(escrow), "escrow address");
        for (uint256 k; k < _length(ev, ".deals"); ++k) {
            for (uint256 o; o < 2; ++o) {
                string memory s = _side(k, o == 0);
                require(
                    escrow.verdictDigest(_vectorCommitment(ev, s))
                        == vm.parseJsonBytes32(ev, string.concat(s, ".digest")),
                    "digest"
                );
            }
            // The vector's id is the current layout's (a regenerated file) or, for a file
            // that predates the fee fields, the old layout's (checked by `_rekey`).
            require(escrow.dealIdOf(BUYER, _terms(ev, _deal(k))) == _rekey(ev, _deal(k)), "deal id");
        }
    }

    // ------------------------------------------------------------------ registry

    function testRegistrationBuildsEpochs() public view {
        require(registry.currentEpoch() == 8, "one epoch per registration");
        require(registry.resolverCount() == 8, "count");
        (bytes memory agg, uint256 total, uint256 members,) = registry.epochInfo(8);
        require(total == 8 * BOND && members == 8, "totals");
        bytes memory sum = vm.parseJsonBytes(ev, ".resolvers[0].publicKey");
        for (uint256 i = 1; i < 8; ++i) {
            sum = BLS.addG1(
                sum, vm.parseJsonBytes(ev, string.concat(_at(".resolvers", i), ".publicKey"))
            );
        }
        require(keccak256(agg) == keccak256(sum), "aggregate key");
        require(
            registry.isMember(3, 8) && !registry.isMember(3, 3) && registry.isMember(0, 1),
            "membership"
        );
        require(token.balanceOf(address(registry)) == 8 * BOND, "bonds held");
    }

    function testRegisterRejects() public {
        bytes memory pk = vm.parseJsonBytes(ev, ".resolvers[0].publicKey");
        bytes memory pop = vm.parseJsonBytes(ev, ".resolvers[0].proofOfPossession");
        address op = address(0xabc);
        token.mint(op, 2 * BOND);
        vm.startPrank(op);
        token.approve(address(registry), 2 * BOND);
        vm.expectRevert(
            abi.encodeWithSelector(
                IResolverRegistryErrors.BondBelowMinimum.selector, BOND - 1, BOND
            )
        );
        registry.register(pk, pop, BOND - 1);
        vm.expectRevert(
            abi.encodeWithSelector(
                IResolverRegistryErrors.KeyAlreadyRegistered.selector, keccak256(pk)
            )
        );
        registry.register(pk, pop, BOND);
        vm.stopPrank();
        // Operator 0 cannot register a second key.
        vm.prank(_operator(0));
        vm.expectRevert(
            abi.encodeWithSelector(
                IResolverRegistryErrors.OperatorAlreadyRegistered.selector, _operator(0)
            )
        );
        registry.register(pk, pop, BOND);
    }

    function testRegisterRejectsForeignProofOfPossession() public {
        // A fresh registry: key 0 with key 1's PoP.
        ResolverRegistry fresh = new ResolverRegistry(_params());
        token.mint(address(this), BOND);
        token.approve(address(fresh), BOND);
        vm.expectRevert(IResolverRegistryErrors.InvalidProofOfPossession.selector);
        fresh.register(
            vm.parseJsonBytes(ev, ".resolvers[0].publicKey"),
            vm.parseJsonBytes(ev, ".resolvers[1].proofOfPossession"),
            BOND
        );
        // The point at infinity with an infinity "proof" is refused by the BLS library.
        vm.expectRevert(BLS.BLSPointAtInfinity.selector);
        fresh.register(new bytes(128), new bytes(256), BOND);
    }

    function testExitAndWithdraw() public {
        vm.startPrank(_operator(7));
        registry.requestExit();
        require(
            registry.currentEpoch() == 9 && !registry.isMember(7, 9) && registry.isMember(7, 8),
            "left"
        );
        vm.expectRevert(abi.encodeWithSelector(IResolverRegistryErrors.AlreadyExiting.selector, 7));
        registry.requestExit();
        uint256 at = block.timestamp + UNBONDING;
        vm.expectRevert(
            abi.encodeWithSelector(IResolverRegistryErrors.UnbondingNotOver.selector, 7, at)
        );
        registry.withdraw();
        vm.warp(at);
        registry.withdraw();
        require(token.balanceOf(_operator(7)) == BOND, "bond returned");
        vm.expectRevert(
            abi.encodeWithSelector(IResolverRegistryErrors.NothingToWithdraw.selector, 7)
        );
        registry.withdraw();
        vm.stopPrank();
        (, uint256 total, uint256 members,) = registry.epochInfo(9);
        require(total == 7 * BOND && members == 7, "epoch 9");
        vm.prank(_operator(6));
        vm.expectRevert(abi.encodeWithSelector(IResolverRegistryErrors.NotExiting.selector, 6));
        registry.withdraw();
        vm.prank(address(0x999));
        vm.expectRevert(
            abi.encodeWithSelector(IResolverRegistryErrors.NotResolver.selector, address(0x999))
        );
        registry.requestExit();
    }

    function testVerifyCertificateRejects() public {
        (VerdictCommitment memory c, uint256[] memory non, bytes memory sig) = _quorum(0, true);
        bytes32 digest = escrow.verdictDigest(c);
        (uint256 signed, uint256 total) = registry.verifyCertificate(8, digest, non, sig);
        require(signed == 6 * BOND && total == 8 * BOND, "stake");

        vm.expectRevert(abi.encodeWithSelector(IResolverRegistryErrors.UnknownEpoch.selector, 9, 8));
        registry.verifyCertificate(9, digest, non, sig);
        vm.expectRevert(abi.encodeWithSelector(IResolverRegistryErrors.UnknownEpoch.selector, 0, 8));
        registry.verifyCertificate(0, digest, non, sig);

        uint256[] memory bad = new uint256[](2);
        (bad[0], bad[1]) = (7, 6);
        vm.expectRevert(
            abi.encodeWithSelector(IResolverRegistryErrors.IndicesNotAscending.selector, 1)
        );
        registry.verifyCertificate(8, digest, bad, sig);
        (bad[0], bad[1]) = (6, 8);
        vm.expectRevert(abi.encodeWithSelector(IResolverRegistryErrors.NotAMember.selector, 8, 8));
        registry.verifyCertificate(8, digest, bad, sig);
        // Epoch 4 has members 0..3 only.
        (bad[0], bad[1]) = (3, 5);
        vm.expectRevert(abi.encodeWithSelector(IResolverRegistryErrors.NotAMember.selector, 5, 4));
        registry.verifyCertificate(4, digest, bad, sig);

        uint256[] memory three = new uint256[](3);
        (three[0], three[1], three[2]) = (5, 6, 7);
        vm.expectRevert(
            abi.encodeWithSelector(
                IResolverRegistryErrors.BelowThreshold.selector,
                5 * BOND,
                8 * BOND,
                THRESHOLD_NUM,
                THRESHOLD_DEN
            )
        );
        registry.verifyCertificate(8, digest, three, sig);

        // Claiming a signer that did not sign (empty non-signer list) fails the pairing.
        vm.expectRevert(IResolverRegistryErrors.InvalidSignature.selector);
        registry.verifyCertificate(8, digest, new uint256[](0), sig);
        vm.expectRevert(IResolverRegistryErrors.InvalidSignature.selector);
        registry.verifyCertificate(8, bytes32(uint256(digest) ^ 1), non, sig);
    }

    function testSlashEquivocation() public {
        Evidence memory a = _evidence(0, true);
        Evidence memory b = _evidence(0, false);
        bytes32 ds = escrow.domainSeparator();
        uint256 sinkBefore = token.balanceOf(SINK);
        vm.prank(SLASHER);
        uint256 slashed = RegistrySlashing(address(registry)).slashEquivocation(ds, a, b);
        vm.snapshotGasLastCall("RegistryGas", "slashEquivocation-6v6-4slashed");
        require(slashed == 4, "2..5 equivocated");
        uint256 reward = BOND * WHISTLEBLOWER_BPS / 10_000;
        require(registry.claimable(SLASHER) == 4 * reward, "whistleblower share");
        require(registry.claimable(SINK) == 4 * (BOND - reward), "rest to sink");
        vm.prank(SLASHER);
        require(RegistrySlashing(address(registry)).claim(SLASHER) == 4 * reward, "claimed");
        vm.prank(SINK);
        RegistrySlashing(address(registry)).claim(SINK);
        require(token.balanceOf(SINK) - sinkBefore == 4 * (BOND - reward), "sink paid");
        require(token.balanceOf(address(registry)) == 4 * BOND, "the honest bonds remain");
        for (uint256 i; i < 8; ++i) {
            bool equivocator = i >= 2 && i <= 5;
            require(registry.slashedFor(ds, a.commitment.dealId, i) == equivocator, "slashed set");
        }
        // Accountable safety: two conflicting 6-of-8 certificates slashed >= (2*6667-10000) bps.
        require(
            4 * BOND * THRESHOLD_DEN >= 8 * BOND * (2 * THRESHOLD_NUM - THRESHOLD_DEN),
            "accountable safety"
        );
        // Removed from the committee by one epoch; the epoch that signed keeps its snapshot.
        require(registry.currentEpoch() == 9, "four exits, one epoch");
        (bytes memory agg, uint256 total, uint256 members,) = registry.epochInfo(9);
        require(total == 4 * BOND && members == 4, "remaining stake");
        bytes memory honest = vm.parseJsonBytes(ev, ".resolvers[0].publicKey");
        uint256[3] memory rest = [uint256(1), 6, 7];
        for (uint256 k; k < 3; ++k) {
            honest = BLS.addG1(
                honest,
                vm.parseJsonBytes(ev, string.concat(_at(".resolvers", rest[k]), ".publicKey"))
            );
        }
        require(keccak256(agg) == keccak256(honest), "aggregate of the honest four");
        (, uint256 old,,) = registry.epochInfo(8);
        require(old == 8 * BOND, "past epoch unchanged");
        // Once per deal.
        vm.expectRevert(IResolverRegistryErrors.NoEquivocator.selector);
        RegistrySlashing(address(registry)).slashEquivocation(ds, a, b);
    }

    /// @notice An equivocator reporting its own equivocation (issue 16) collects nothing: the
    ///         whole bond goes to the sink. Before the fix it collected 10 % of every slashed
    ///         bond (verified: 400 of 4,000 here).
    function testEquivocatorGetsNoWhistleblowerShare() public {
        bytes32 ds = escrow.domainSeparator();
        // Evidence first: re-signing calls precompiles, which would take the prank.
        (Evidence memory a0, Evidence memory b0) = (_evidence(0, true), _evidence(0, false));
        (Evidence memory a1, Evidence memory b1) = (_evidence(1, true), _evidence(1, false));
        vm.prank(_operator(2)); // 2 signed both sides
        require(RegistrySlashing(address(registry)).slashEquivocation(ds, a0, b0) == 4, "4");
        require(registry.claimable(_operator(2)) == 0, "no share for an equivocator");
        require(registry.claimable(SINK) == 4 * BOND, "all to the sink");
        // A slashed resolver reporting later evidence would not be rewarded either; here
        // nobody is left to slash for deal 1 (2..5 were slashed above).
        vm.prank(_operator(2));
        vm.expectRevert(IResolverRegistryErrors.NoEquivocator.selector);
        RegistrySlashing(address(registry)).slashEquivocation(ds, a1, b1);
    }

    /// @notice An honest resolver reporting is rewarded like anyone else.
    function testHonestResolverMayReport() public {
        bytes32 ds = escrow.domainSeparator();
        (Evidence memory a, Evidence memory b) = (_evidence(0, true), _evidence(0, false));
        vm.prank(_operator(0));
        RegistrySlashing(address(registry)).slashEquivocation(ds, a, b);
        require(registry.claimable(_operator(0)) == 4 * BOND / 10, "share");
    }

    function testSlashRejectsNonConflicts() public {
        bytes32 ds = escrow.domainSeparator();
        Evidence memory a = _evidence(0, true);
        vm.expectRevert(IResolverRegistryErrors.SameCommitment.selector);
        RegistrySlashing(address(registry)).slashEquivocation(ds, a, a);
        Evidence memory other = _evidence(1, false);
        vm.expectRevert(
            abi.encodeWithSelector(
                IResolverRegistryErrors.NotAConflict.selector,
                a.commitment.dealId,
                other.commitment.dealId
            )
        );
        RegistrySlashing(address(registry)).slashEquivocation(ds, a, other);
        // Under another domain the signatures do not verify.
        Evidence memory b = _evidence(0, false);
        vm.expectRevert(IResolverRegistryErrors.InvalidSignature.selector);
        RegistrySlashing(address(registry)).slashEquivocation(bytes32(uint256(ds) ^ 1), a, b);
        // An honest resolver added to a signer set it never signed breaks the aggregate.
        uint256[] memory withZero = new uint256[](b.signers.length + 1);
        for (uint256 i; i < b.signers.length; ++i) {
            withZero[i + 1] = b.signers[i];
        }
        b.signers = withZero;
        vm.expectRevert(IResolverRegistryErrors.InvalidSignature.selector);
        RegistrySlashing(address(registry)).slashEquivocation(ds, a, b);
        b.signers = new uint256[](0);
        vm.expectRevert(IResolverRegistryErrors.EmptySignerSet.selector);
        RegistrySlashing(address(registry)).slashEquivocation(ds, a, b);
    }

    function testExitingResolverStaysSlashable() public {
        vm.prank(_operator(3));
        registry.requestExit();
        vm.warp(block.timestamp + UNBONDING - 1);
        RegistrySlashing(address(registry))
            .slashEquivocation(escrow.domainSeparator(), _evidence(2, true), _evidence(2, false));
        (ResolverRegistry.Resolver memory r,,) = registry.resolverInfo(3);
        require(r.slashed && r.bond == 0, "slashed while exiting");
        vm.warp(block.timestamp + 1);
        vm.prank(_operator(3));
        vm.expectRevert(
            abi.encodeWithSelector(IResolverRegistryErrors.NothingToWithdraw.selector, 3)
        );
        registry.withdraw();
    }

    /// @notice Fuzz: any two signer subsets, built by aggregating real partials of one deal,
    ///         slash exactly the resolvers that signed both sides, never an honest one.
    function testFuzzOnlyDoubleSignersAreSlashed(uint8 maskR, uint8 maskF, uint8 deal) public {
        _slashSubsets(maskR, maskF, deal % 4);
    }

    /// @notice Concrete twin of the fuzz test: honest 0 and 7 included on their only side.
    function testOnlyDoubleSignersAreSlashedConcrete() public {
        _slashSubsets(0x0f, 0xf0, 1); // R by {0,1,2,3}; F by {4,5,6,7}: no overlap
        _slashSubsets(0x3d, 0xfc, 2); // R by {0,2,3,4,5}; F by {2..7}: slashes 2..5
    }

    function _aggregate(string memory side, uint8 mask, bool[8] memory canSign)
        internal
        view
        returns (uint256[] memory signers, bytes memory sig)
    {
        uint256 n;
        for (uint256 i; i < 8; ++i) {
            if (mask & (1 << i) != 0 && canSign[i]) ++n;
        }
        signers = new uint256[](n);
        n = 0;
        for (uint256 i; i < 8; ++i) {
            if (mask & (1 << i) != 0 && canSign[i]) {
                signers[n++] = i;
                sig = _addG2(sig, _partial(ev, side, i));
            }
        }
    }

    function _slashSubsets(uint8 maskR, uint8 maskF, uint256 k) internal {
        bool[8] memory signsR = [true, true, true, true, true, true, false, false];
        bool[8] memory signsF = [false, false, true, true, true, true, true, true];
        Evidence memory a;
        Evidence memory b;
        (a.signers, a.signature) = _aggregate(_side(k, true), maskR, signsR);
        (b.signers, b.signature) = _aggregate(_side(k, false), maskF, signsF);
        if (a.signers.length == 0 || b.signers.length == 0) return;
        a.commitment = _commitment(ev, _side(k, true));
        b.commitment = _commitment(ev, _side(k, false));
        (a.epoch, b.epoch) = (8, 8);
        uint256 expected;
        for (uint256 i; i < 8; ++i) {
            if (maskR & maskF & (1 << i) != 0 && signsR[i] && signsF[i]) ++expected;
        }
        bytes32 ds = escrow.domainSeparator();
        if (expected == 0) {
            vm.expectRevert(IResolverRegistryErrors.NoEquivocator.selector);
            RegistrySlashing(address(registry)).slashEquivocation(ds, a, b);
        } else {
            require(
                RegistrySlashing(address(registry)).slashEquivocation(ds, a, b) == expected,
                "slashed count"
            );
        }
        for (uint256 i; i < 8; ++i) {
            (ResolverRegistry.Resolver memory r,,) = registry.resolverInfo(i);
            if (!(signsR[i] && signsF[i])) require(!r.slashed, "honest resolver slashed");
        }
    }

    // ------------------------------------------------------------------ escrow flows

    function _settle(uint256 k, bool reproduced) internal returns (bytes32 id, Terms memory t) {
        t = _terms(ev, _deal(k));
        id = _dispute(ev, _deal(k));
        (VerdictCommitment memory c, uint256[] memory non, bytes memory sig) =
            _quorum(k, reproduced);
        escrow.resolve(c, non, sig);
    }

    function testResolveReproducedReleasesToSeller() public {
        (bytes32 id, Terms memory t) = _settle(0, true);
        Deal memory d = escrow.deal(id);
        require(d.state == DealState.Resolved && d.settlement == Settlement.Released, "released");
        require(_owed(SELLER) == t.amount + t.sellerBond, "seller paid, bond back");
        require(
            _owed(BUYER) == 0 && token.balanceOf(ESCROW) == t.amount + t.sellerBond,
            "credited, not yet paid"
        );
        require(d.epoch == 8 && d.settledAt == block.timestamp, "recorded");
    }

    function testResolveFailedRefundsBuyer() public {
        (bytes32 id, Terms memory t) = _settle(1, false);
        require(escrow.deal(id).settlement == Settlement.Refunded, "refunded");
        require(_owed(BUYER) == t.amount, "buyer refunded");
        require(_owed(SELLER) == t.sellerBond, "bond back: losing is not withholding");
    }

    function testResolveExactlyOnce() public {
        (bytes32 id,) = _settle(0, true);
        (VerdictCommitment memory c, uint256[] memory non, bytes memory sig) = _quorum(0, false);
        vm.expectRevert(
            abi.encodeWithSelector(
                IEscrowErrors.WrongState.selector, id, DealState.Disputed, DealState.Resolved
            )
        );
        escrow.resolve(c, non, sig);
    }

    function testResolveChecksEveryField() public {
        bytes32 id = _dispute(ev, _deal(2));
        (VerdictCommitment memory c, uint256[] memory non, bytes memory sig) = _quorum(2, true);
        string[6] memory fields = [
            "specHash",
            "deliveryHash",
            "prestateAnchorHash",
            "prestateRoot",
            "backendId",
            "backendVersionHash"
        ];
        for (uint256 f; f < 6; ++f) {
            VerdictCommitment memory m = _commitment(ev, _side(2, true));
            if (f == 0) m.specHash ^= bytes32(uint256(1));
            if (f == 1) m.deliveryHash ^= bytes32(uint256(1));
            if (f == 2) m.prestateAnchorHash ^= bytes32(uint256(1));
            if (f == 3) m.prestateRoot ^= bytes32(uint256(1));
            if (f == 4) m.backendId ^= bytes32(uint256(1));
            if (f == 5) m.backendVersionHash ^= bytes32(uint256(1));
            vm.expectRevert(
                abi.encodeWithSelector(IEscrowErrors.CommitmentMismatch.selector, id, fields[f])
            );
            escrow.resolve(m, non, sig);
        }
        // Result and trace hashes are covered by the signature.
        VerdictCommitment memory t = _commitment(ev, _side(2, true));
        t.traceHash ^= bytes32(uint256(1));
        vm.expectRevert(IResolverRegistryErrors.InvalidSignature.selector);
        escrow.resolve(t, non, sig);
        t = _commitment(ev, _side(2, true));
        t.outcome = Outcome.Failed;
        vm.expectRevert(IResolverRegistryErrors.InvalidSignature.selector);
        escrow.resolve(t, non, sig);
        // Another deal's certificate names another deal id: not disputed here.
        (VerdictCommitment memory o, uint256[] memory on, bytes memory os) = _quorum(3, true);
        vm.expectRevert(
            abi.encodeWithSelector(
                IEscrowErrors.WrongState.selector, o.dealId, DealState.Disputed, DealState.None
            )
        );
        escrow.resolve(o, on, os);
        escrow.resolve(c, non, sig);
    }

    function testTimeoutForfeitsSellerBond() public {
        Terms memory t = _terms(ev, _deal(3));
        bytes32 id = _dispute(ev, _deal(3));
        uint256 deadline = escrow.deal(id).resolveDeadline;
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.TooEarly.selector, id, deadline + 1));
        escrow.timeoutRefund(id);
        vm.warp(deadline + 1);
        (VerdictCommitment memory c, uint256[] memory non, bytes memory sig) = _quorum(3, true);
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.TooLate.selector, id, deadline));
        escrow.resolve(c, non, sig);
        escrow.timeoutRefund(id);
        require(escrow.deal(id).settlement == Settlement.TimedOut, "timed out");
        require(_owed(BUYER) == t.amount + t.sellerBond, "buyer gets amount and bond");
        require(_owed(SELLER) == 0, "withholding seller forfeits");
    }

    function testReclaimReleaseAccept() public {
        Terms memory t = _terms(ev, _deal(0));
        _allowBackend(t);
        bytes32 id = _fund(t);
        uint256 dl = escrow.deal(id).deliverDeadline;
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.TooEarly.selector, id, dl + 1));
        escrow.reclaim(id);
        vm.warp(dl + 1);
        vm.prank(SELLER);
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.TooLate.selector, id, dl));
        escrow.deliver(id, bytes32(0), "");
        escrow.reclaim(id);
        require(
            _owed(BUYER) == t.amount && escrow.deal(id).settlement == Settlement.Reclaimed,
            "reclaimed"
        );

        Terms memory t1 = _terms(ev, _deal(1));
        _allowBackend(t1);
        bytes32 id1 = _fund(t1);
        _deliver(id1, t1, bytes32(uint256(7)));
        uint256 cd = escrow.deal(id1).challengeDeadline;
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.TooEarly.selector, id1, cd));
        escrow.release(id1);
        vm.warp(cd);
        vm.prank(BUYER);
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.TooLate.selector, id1, cd));
        escrow.challenge(id1);
        escrow.release(id1);
        require(_owed(SELLER) == t1.amount + t1.sellerBond, "released");

        Terms memory t2 = _terms(ev, _deal(2));
        bytes32 id2 = _fund(t2);
        _deliver(id2, t2, bytes32(uint256(8)));
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.NotBuyer.selector, id2, SELLER));
        vm.prank(SELLER);
        escrow.accept(id2);
        vm.prank(BUYER);
        escrow.accept(id2);
        require(escrow.deal(id2).settlement == Settlement.Released, "accepted");
    }

    function testFundingValidation() public {
        Terms memory t = _terms(ev, _deal(0));
        vm.expectRevert(
            abi.encodeWithSelector(
                IEscrowErrors.BackendNotAllowed.selector, t.backendId, t.backendVersionHash
            )
        );
        escrow.fund(t, "", "");
        _allowBackend(t);
        Terms memory z = _terms(ev, _deal(0));
        z.deliverWindow = 0;
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.ZeroWindow.selector, "deliver"));
        escrow.fund(z, "", "");
        z = _terms(ev, _deal(0));
        z.resolveWindow = uint64(MAX_RESOLVE + 1);
        vm.expectRevert(
            abi.encodeWithSelector(
                IEscrowErrors.ResolveWindowTooLong.selector, MAX_RESOLVE + 1, MAX_RESOLVE
            )
        );
        escrow.fund(z, "", "");
        z = _terms(ev, _deal(0));
        z.amount = 0;
        vm.expectRevert(IEscrowErrors.ZeroAmount.selector);
        escrow.fund(z, "", "");
        // Publication is hash-checked: bytes that do not hash to specHash are refused.
        vm.expectRevert(
            abi.encodeWithSelector(
                IEscrowErrors.ContentHashMismatch.selector,
                t.specHash,
                sha256(abi.encodePacked("reckn/v1/spec", hex"01"))
            )
        );
        escrow.fund(t, hex"01", hex"02");
        bytes32 id = _fund(t);
        vm.prank(BUYER);
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.DealExists.selector, id));
        escrow.fund(t, "", "");
        // Only the owner curates backends, and that cannot touch the funded deal.
        vm.prank(BUYER);
        vm.expectRevert();
        escrow.setBackend(t.backendId, t.backendVersionHash, false);
    }

    function testPublicationEmitsCheckedBytes() public {
        Terms memory t = _terms(ev, _deal(0));
        bytes memory spec = hex"0101010220";
        bytes memory anchor = hex"01010102";
        t.specHash = sha256(abi.encodePacked("reckn/v1/spec", spec));
        t.prestateAnchorHash = sha256(abi.encodePacked("reckn/v1/prestate-anchor", anchor));
        _allowBackend(t);
        token.mint(BUYER, t.amount);
        vm.startPrank(BUYER);
        token.approve(ESCROW, t.amount);
        bytes32 id = escrow.fund(t, spec, anchor);
        vm.stopPrank();
        vm.warp(block.timestamp + 1);
        bytes memory delivery = hex"0101";
        bytes32 dh = sha256(abi.encodePacked("reckn/v1/delivery", delivery));
        token.mint(SELLER, t.sellerBond);
        vm.startPrank(SELLER);
        token.approve(ESCROW, t.sellerBond);
        vm.expectRevert(
            abi.encodeWithSelector(IEscrowErrors.ContentHashMismatch.selector, bytes32(0), dh)
        );
        escrow.deliver(id, bytes32(0), delivery);
        escrow.deliver(id, dh, delivery);
        vm.stopPrank();
        require(escrow.deal(id).deliveryHash == dh, "delivered");
    }

    function testFundWithAuthorizationBindsTerms() public {
        uint256 buyerKey = 0xb0b;
        address buyer = vm.addr(buyerKey);
        Terms memory t = _terms(ev, _deal(0));
        (bytes memory spec, bytes memory anchor) = (hex"0101010220", hex"01010102");
        t.specHash = sha256(abi.encodePacked("reckn/v1/spec", spec));
        t.prestateAnchorHash = sha256(abi.encodePacked("reckn/v1/prestate-anchor", anchor));
        _allowBackend(t);
        token.mint(buyer, t.amount);
        bytes32 id = escrow.dealIdOf(buyer, t);
        Authorization memory auth = _authorize(buyerKey, t.amount, id);
        // A relayer weakening the seller bond changes the deal id = the nonce: refused.
        uint256 bond = t.sellerBond;
        Terms memory weakened = t; // the same memory: restored below
        weakened.sellerBond = 0;
        vm.expectRevert(bytes4(keccak256("InvalidAuthorization()")));
        escrow.fundWithAuthorization(weakened, spec, anchor, auth);
        t.sellerBond = bond;
        require(escrow.fundWithAuthorization(t, spec, anchor, auth) == id, "deal id");
        require(token.balanceOf(ESCROW) == t.amount && escrow.deal(id).buyer == buyer, "funded");
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

    function testPhaseGuards() public {
        Terms memory t = _terms(ev, _deal(0));
        _allowBackend(t);
        bytes32 id = _fund(t);
        vm.prank(SELLER);
        vm.expectRevert(
            abi.encodeWithSelector(IEscrowErrors.TooEarly.selector, id, block.timestamp + 1)
        );
        escrow.deliver(id, bytes32(uint256(1)), "");
        vm.warp(block.timestamp + 1);
        vm.prank(BUYER);
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.NotSeller.selector, id, BUYER));
        escrow.deliver(id, bytes32(uint256(1)), "");
        vm.prank(BUYER);
        vm.expectRevert(
            abi.encodeWithSelector(
                IEscrowErrors.WrongState.selector, id, DealState.Delivered, DealState.Held
            )
        );
        escrow.challenge(id);
        _deliver(id, t, bytes32(uint256(1)));
        vm.prank(SELLER);
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.NotBuyer.selector, id, SELLER));
        escrow.challenge(id);
    }

    function _expectInvalid(RegistryParameters memory p, string memory reason) internal {
        vm.expectRevert(
            abi.encodeWithSelector(IResolverRegistryErrors.InvalidParameters.selector, reason)
        );
        new ResolverRegistry(p);
    }

    function testConstructorsValidateParameters() public {
        RegistryParameters memory p = _params();
        (p.thresholdNumerator, p.thresholdDenominator) = (1, 2);
        _expectInvalid(p, "threshold");
        (p.thresholdNumerator, p.thresholdDenominator) = (4, 3);
        _expectInvalid(p, "threshold");
        (p.thresholdNumerator, p.thresholdDenominator) = (0, 0);
        _expectInvalid(p, "threshold");
        (p.thresholdNumerator, p.thresholdDenominator) = (1 << 64, (1 << 64) + 1);
        _expectInvalid(p, "threshold");
        p = _params();
        p.unbondingDelay = MAX_RESOLVE + SLASHING_WINDOW;
        _expectInvalid(p, "unbonding delay too short");
        p = _params();
        p.minimumBond = 0;
        _expectInvalid(p, "minimum bond");
        p = _params();
        p.slashSink = address(0);
        _expectInvalid(p, "slash sink");
        p = _params();
        p.activationDelay = 0;
        _expectInvalid(p, "activation delay");
        p.activationDelay = (1 << 40) + 1;
        _expectInvalid(p, "activation delay");
        p = _params();
        p.minimumCommitteeStake = BOND - 1;
        _expectInvalid(p, "minimum committee stake");
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.ZeroAddress.selector, "registry"));
        new Escrow(ResolverRegistry(address(0)), address(this));
    }

    function testZeroAddressesRefused() public {
        Terms memory t = _terms(ev, _deal(0));
        _allowBackend(t);
        t.seller = address(0);
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.ZeroAddress.selector, "seller"));
        escrow.fund(t, "", "");
        t = _terms(ev, _deal(0));
        t.token = IERC20(address(0));
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.ZeroAddress.selector, "token"));
        escrow.fund(t, "", "");
    }

    function testFeeOnTransferTokensAreRefused() public {
        FeeToken fee = new FeeToken();
        Terms memory t = _terms(ev, _deal(0));
        t.token = IERC20(address(fee));
        _allowBackend(t);
        fee.mint(BUYER, t.amount);
        vm.startPrank(BUYER);
        fee.approve(ESCROW, t.amount);
        vm.expectRevert(
            abi.encodeWithSelector(IEscrowErrors.TransferMismatch.selector, t.amount, t.amount - 1)
        );
        escrow.fund(t, "", "");
        vm.stopPrank();

        // The registry half: test/Registration.t.sol (FeeBondTest).
    }

    function testSlashedResolverCannotExitOrReturn() public {
        RegistrySlashing(address(registry))
            .slashEquivocation(escrow.domainSeparator(), _evidence(1, true), _evidence(1, false));
        vm.startPrank(_operator(2));
        vm.expectRevert(
            abi.encodeWithSelector(IResolverRegistryErrors.NothingToWithdraw.selector, 2)
        );
        registry.requestExit();
        // Its key stays burned: no re-registration under the same key.
        bytes memory pk = vm.parseJsonBytes(ev, ".resolvers[2].publicKey");
        vm.expectRevert(
            abi.encodeWithSelector(
                IResolverRegistryErrors.OperatorAlreadyRegistered.selector, _operator(2)
            )
        );
        registry.register(pk, vm.parseJsonBytes(ev, ".resolvers[2].proofOfPossession"), BOND);
        vm.stopPrank();
        // A slashed member's stake still counts in the epoch it signed for (snapshots never change).
        (VerdictCommitment memory c, uint256[] memory non, bytes memory sig) = _quorum(0, true);
        (uint256 signed,) = registry.verifyCertificate(8, escrow.verdictDigest(c), non, sig);
        require(signed == 6 * BOND, "past epoch snapshot");
    }
}
