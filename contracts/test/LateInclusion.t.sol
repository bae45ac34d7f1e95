// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {EscrowFees} from "../src/EscrowFees.sol";
import {RegistrySlashing} from "../src/RegistrySlashing.sol";
import {IEscrowErrors, Terms} from "../src/interfaces/IEscrow.sol";
import {IResolverRegistryErrors} from "../src/interfaces/IResolverRegistry.sol";
import {VerdictCommitment} from "../src/libraries/VerdictHash.sol";
import {EscrowBase} from "./utils/EscrowBase.sol";
import {Signer} from "./utils/Signer.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {Math} from "@openzeppelin/contracts/utils/math/Math.sol";

/// @notice The submitter of `resolve` cannot pick who is paid: a certificate that leaves out
///         members whose partial signatures exist holds the fee for the inclusion window, in
///         which anyone proves them (`includeSigners`, an aggregate over the certified digest);
///         the fee is then split over every proven signer's stake. Eight vector resolvers with
///         unequal bonds (resolver i bonds (i + 1) * BOND), activated together: epoch 1,
///         positions = indices.
contract LateInclusionTest is EscrowBase {
    string internal ev;
    IERC20 internal tok;
    address internal constant SUBMITTER = address(uint160(0x5b5b));
    address internal constant STRANGER = address(uint160(0x5ca1));
    uint256 internal constant P = 1e30;
    uint256 internal constant FEE = 37e18 + 11;
    uint256 internal constant CAP = 1e18;
    /// @dev Total stake: (1 + ... + 8) * BOND.
    uint256 internal constant TOTAL = 36 * BOND;

    function setUp() public {
        ev = _read("consensus/vectors/escrow.json");
        _deploySystem();
        // Before the first epoch the owner's parameters apply at once.
        RegistrySlashing(address(registry)).setGasRefundCap(IERC20(TOKEN), CAP);
        uint256[] memory all = new uint256[](8);
        for (uint256 i; i < 8; ++i) {
            all[i] = _registerOne(ev, i, _operator(i), BOND * (i + 1));
        }
        vm.warp(block.timestamp + ACTIVATION);
        registry.activate(all);
        tok = IERC20(TOKEN);
    }

    // ------------------------------------------------------------------ helpers

    function _disputed(uint256 k) internal returns (bytes32 id) {
        Terms memory t = _terms(ev, _at(".deals", k));
        t.resolverFee = FEE;
        t.challengeBond = 1e18;
        _allowBackend(t);
        id = _fund(t);
        _deliver(id, t, vm.parseJsonBytes32(ev, string.concat(_at(".deals", k), ".deliveryHash")));
        _challenge(id);
    }

    function _commitmentOf(uint256 k, bytes32 id)
        internal
        view
        returns (VerdictCommitment memory c)
    {
        c = _vectorCommitment(ev, string.concat(_at(".deals", k), ".reproduced"));
        c.dealId = id;
    }

    /// @dev One-byte position bitmap.
    function _bits(uint256 mask) internal pure returns (bytes memory) {
        return abi.encodePacked(uint8(mask));
    }

    /// @dev Aggregate signature of the resolvers in `mask` over `c`.
    function _sig(VerdictCommitment memory c, uint256 mask) internal view returns (bytes memory) {
        uint256 n;
        for (uint256 i; i < 8; ++i) {
            if ((mask >> i) & 1 == 1) ++n;
        }
        uint256[] memory signers = new uint256[](n);
        uint256 a;
        for (uint256 i; i < 8; ++i) {
            if ((mask >> i) & 1 == 1) signers[a++] = i;
        }
        return Signer.sign(signers, escrow.verdictDigest(c));
    }

    /// @dev A hostile submitter certifies deal `k` naming `left` (a mask) as non-signers,
    ///         although every resolver signed.
    function _resolveLeavingOut(uint256 k, uint256 left)
        internal
        returns (bytes32 id, VerdictCommitment memory c)
    {
        id = _disputed(k);
        c = _commitmentOf(k, id);
        bytes memory sig = _sig(c, 0xff & ~left);
        vm.prank(SUBMITTER);
        escrow.resolve(c, _bits(left), sig);
    }

    function _epochs() internal pure returns (uint256[] memory es) {
        es = new uint256[](1);
        es[0] = 1;
    }

    function _pending(uint256 i) internal view returns (uint256) {
        return EscrowFees(address(escrow)).pendingRewards(tok, i, 1);
    }

    function _claim(uint256 i) internal returns (uint256) {
        vm.prank(_operator(i));
        return EscrowFees(address(escrow)).claimRewards(tok, i, _epochs(), _operator(i));
    }

    /// @dev What resolver i is owed of one split of `FEE - CAP` over `signed` stake.
    function _share(uint256 i, uint256 signed) internal pure returns (uint256) {
        return Math.mulDiv(BOND * (i + 1), (FEE - CAP) * P / signed, P);
    }

    function _closesAt(bytes32 id) internal view returns (uint256) {
        (,,,, uint64 closesAt,) = escrow.held(id);
        return closesAt;
    }

    // ------------------------------------------------------------------ item 1

    /// @notice The submitter leaves out resolvers 0 and 1, whose partials exist; each proves
    ///         its own signature after `resolve` and both are paid exactly their stake share,
    ///         the same as under a certificate of all eight. Nobody is paid twice.
    function testLeftOutSignersProveThemselvesAndArePaidTheirShare() public {
        (bytes32 id, VerdictCommitment memory c) = _resolveLeavingOut(0, 0x03);
        require(_closesAt(id) == block.timestamp + escrow.INCLUSION_WINDOW(), "held");
        bytes memory s0 = _sig(c, 0x01);
        require(escrow.claimable(SUBMITTER, tok) == 0, "refund waits for the split");
        for (uint256 i; i < 8; ++i) {
            require(_pending(i) == 0, "nothing split yet");
        }
        vm.prank(STRANGER);
        EscrowFees(address(escrow)).includeSigners(id, _bits(0x01), _sig(c, 0x01));
        require(_closesAt(id) != 0, "still held: resolver 1 is out");
        vm.prank(_operator(1));
        EscrowFees(address(escrow)).includeSigners(id, _bits(0x02), _sig(c, 0x02));
        require(_closesAt(id) == 0, "everyone in: split at once");
        uint256 owed;
        for (uint256 i; i < 8; ++i) {
            require(_pending(i) == _share(i, TOTAL), "exactly the stake share");
            owed += _pending(i);
        }
        uint256 toSigners = Math.mulDiv((FEE - CAP) * P / TOTAL, TOTAL, P, Math.Rounding.Ceil);
        require(escrow.claimable(SUBMITTER, tok) == FEE - toSigners, "refund + remainder");
        require(owed + escrow.claimable(SUBMITTER, tok) <= FEE, "never more than the fee");
        // Nobody twice: the split is gone, a second claim pays nothing.
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.NothingHeld.selector, id));
        EscrowFees(address(escrow)).distributeFee(id);
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.NothingHeld.selector, id));
        EscrowFees(address(escrow)).includeSigners(id, _bits(0x01), s0);
        for (uint256 i; i < 8; ++i) {
            require(_claim(i) == _share(i, TOTAL), "claimed once");
            vm.prank(_operator(i));
            vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.NoRewards.selector, i, tok));
            EscrowFees(address(escrow)).claimRewards(tok, i, _epochs(), _operator(i));
        }
        require(tok.balanceOf(ESCROW) == escrow.liabilities(tok), "conserved");
    }

    /// @notice Both left-out signers proven in one aggregate.
    function testOneAggregateIncludesSeveralSigners() public {
        (bytes32 id, VerdictCommitment memory c) = _resolveLeavingOut(1, 0x03);
        EscrowFees(address(escrow)).includeSigners(id, _bits(0x03), _sig(c, 0x03));
        require(_closesAt(id) == 0, "split");
        require(_pending(0) == _share(0, TOTAL) && _pending(1) == _share(1, TOTAL), "paid");
    }

    /// @notice Proving a signer twice, or a member that is already a signer, is refused; so are
    ///         an empty set, a position beyond the committee and a forged signature.
    function testProvingTheSameSignerTwiceFails() public {
        (bytes32 id, VerdictCommitment memory c) = _resolveLeavingOut(0, 0x03);
        bytes memory s0 = _sig(c, 0x01);
        bytes memory s1 = _sig(c, 0x02);
        bytes memory s01 = _sig(c, 0x03);
        bytes memory s2 = _sig(c, 0x04);
        bytes memory other = _sig(_commitmentOf(1, id), 0x02);
        EscrowFees(address(escrow)).includeSigners(id, _bits(0x01), s0);
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.NotNonSigners.selector, id));
        EscrowFees(address(escrow)).includeSigners(id, _bits(0x01), s0);
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.NotNonSigners.selector, id));
        EscrowFees(address(escrow)).includeSigners(id, _bits(0x03), s01);
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.NotNonSigners.selector, id));
        EscrowFees(address(escrow)).includeSigners(id, _bits(0x04), s2);
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.NotNonSigners.selector, id));
        EscrowFees(address(escrow)).includeSigners(id, _bits(0x00), s1);
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.NotNonSigners.selector, id));
        EscrowFees(address(escrow)).includeSigners(id, hex"0001", s1);
        // Resolver 0's signature does not prove resolver 1, nor a signature over another digest.
        vm.expectRevert(IResolverRegistryErrors.InvalidSignature.selector);
        EscrowFees(address(escrow)).includeSigners(id, _bits(0x02), s0);
        vm.expectRevert(IResolverRegistryErrors.InvalidSignature.selector);
        EscrowFees(address(escrow)).includeSigners(id, _bits(0x02), other);
        EscrowFees(address(escrow)).includeSigners(id, _bits(0x02), s1);
        require(_pending(1) == _share(1, TOTAL), "then paid once");
    }

    /// @notice After the window the proof is late; the split excludes whoever is still out
    ///         (over the stake proven by then) and that exclusion holds only for this dispute:
    ///         the next certificate of the same epoch pays the left-out resolver again.
    function testWindowClosesThenRemainingNonSignersAreExcluded() public {
        (bytes32 id, VerdictCommitment memory c) = _resolveLeavingOut(0, 0x03);
        EscrowFees(address(escrow)).includeSigners(id, _bits(0x01), _sig(c, 0x01));
        uint256 closesAt = _closesAt(id);
        bytes memory s1 = _sig(c, 0x02);
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.TooEarly.selector, id, closesAt + 1));
        EscrowFees(address(escrow)).distributeFee(id);
        vm.warp(closesAt + 1);
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.TooLate.selector, id, closesAt));
        EscrowFees(address(escrow)).includeSigners(id, _bits(0x02), s1);
        vm.prank(STRANGER);
        EscrowFees(address(escrow)).distributeFee(id);
        uint256 signed = TOTAL - 2 * BOND;
        require(_pending(1) == 0, "resolver 1 never proven: excluded");
        for (uint256 i; i < 8; ++i) {
            if (i != 1) require(_pending(i) == _share(i, signed), "split over the proven stake");
        }
        require(escrow.claimable(SUBMITTER, tok) >= CAP, "the submitter keeps its refund");
        vm.prank(_operator(1));
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.NoRewards.selector, 1, tok));
        EscrowFees(address(escrow)).claimRewards(tok, 1, _epochs(), _operator(1));
        require(_claim(0) == _share(0, signed), "0 claims deal A");
        // Deal B: everyone signs, split at once.
        bytes32 idB = _disputed(1);
        VerdictCommitment memory cB = _commitmentOf(1, idB);
        escrow.resolve(cB, "", _sig(cB, 0xff));
        require(_closesAt(idB) == 0, "nothing held without non-signers");
        require(_pending(1) == _share(1, TOTAL), "1 owed deal B only");
        require(_pending(0) == _share(0, TOTAL), "0 owed deal B (claimed A)");
        require(_claim(1) == _share(1, TOTAL), "1 claims B");
        // Deal C leaves 1 out again; after its window 1 is owed nothing more, 2 all three.
        (bytes32 idC,) = _resolveLeavingOut(2, 0x02);
        vm.warp(_closesAt(idC) + 1);
        EscrowFees(address(escrow)).distributeFee(idC);
        require(_pending(1) == 0, "excluded from C");
        uint256 expected2 = _share(2, signed) + _share(2, TOTAL) + _share(2, TOTAL - 2 * BOND);
        require(_pending(2) >= expected2 && _pending(2) <= expected2 + 2, "2 owed A + B + C");
        require(tok.balanceOf(ESCROW) == escrow.liabilities(tok), "conserved");
    }

    /// @notice The index-list overload is the same certificate: it holds the fee the same way.
    function testIndexListCertificateHoldsTheFeeToo() public {
        bytes32 id = _disputed(0);
        VerdictCommitment memory c = _commitmentOf(0, id);
        uint256[] memory non = new uint256[](1);
        non[0] = 6;
        escrow.resolve(c, non, _sig(c, 0xbf));
        uint256 w = escrow.nonSignerBits(id, 0);
        require(w == uint256(0x40) << 248, "position 6 stored");
        EscrowFees(address(escrow)).includeSigners(id, _bits(0x40), _sig(c, 0x40));
        require(_pending(6) == _share(6, TOTAL), "paid");
    }

    // ------------------------------------------------------------------ bitmap certificates

    /// @notice The registry's bitmap views agree with the index form, and malformed bitmaps
    ///         are refused.
    function testBitmapViewsAndBounds() public {
        uint256[] memory members = registry.epochMembers(1);
        require(members.length == 8, "8 members");
        for (uint256 i; i < 8; ++i) {
            require(members[i] == i && registry.positionOf(1, i) == i, "positions");
        }
        uint256[] memory idx = new uint256[](2);
        (idx[0], idx[1]) = (1, 6);
        require(keccak256(registry.signerBitmap(1, idx)) == keccak256(_bits(0x42)), "bitmap");
        vm.expectRevert(abi.encodeWithSelector(IResolverRegistryErrors.NotAMember.selector, 9, 1));
        registry.positionOf(1, 9);
        bytes32 digest = keccak256("d");
        vm.expectRevert(
            abi.encodeWithSelector(IResolverRegistryErrors.BitmapTooLong.selector, 2, 1)
        );
        registry.verifyCertificate(1, digest, hex"0000", new bytes(256));
        bytes memory sig = Signer.sign(members, digest);
        (uint256 signed, uint256 total) = registry.verifyCertificate(1, digest, "", sig);
        require(signed == TOTAL && total == TOTAL, "full bitmap certificate");
        vm.expectRevert(IResolverRegistryErrors.EmptySignerSet.selector);
        registry.verifySigners(1, digest, "", sig);
        require(registry.verifySigners(1, digest, _bits(0xff), sig) == TOTAL, "all signers");
    }

    /// @notice A bitmap bit beyond the committee is refused (epoch 2 has 7 members: bit 7 of
    ///         byte 0 is position 7).
    function testPositionOutOfRange() public {
        vm.prank(_operator(7));
        registry.requestExit();
        bytes32 digest = keccak256("d");
        vm.expectRevert(
            abi.encodeWithSelector(IResolverRegistryErrors.PositionOutOfRange.selector, 7, 7)
        );
        registry.verifyCertificate(2, digest, _bits(0x80), new bytes(256));
        uint256[] memory members = registry.epochMembers(2);
        require(members.length == 7 && members[6] == 6, "7 left");
    }
}
