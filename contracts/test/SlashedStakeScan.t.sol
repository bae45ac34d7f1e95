// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {RegistrySlashing} from "../src/RegistrySlashing.sol";
import {Settlement, Terms} from "../src/interfaces/IEscrow.sol";
import {Evidence} from "../src/interfaces/IResolverRegistry.sol";
import {BLS} from "../src/libraries/BLS.sol";
import {VerdictCommitment} from "../src/libraries/VerdictHash.sol";
import {EscrowBase} from "./utils/EscrowBase.sol";
import {Signer} from "./utils/Signer.sol";

/// @notice The slashed stake of a pinned epoch (`slashedStake`, which `resolve` asks for) costs
///         at most one read per member of that epoch, however many resolvers were slashed since
///         it started. Committee C (epoch 1) has 8 members of equal bond; a dispute pins it.
///         Then `_late()` newcomers join (epoch 2) and are slashed together with C's member 0
///         in one call (epoch 3): the slashed-member log holds `_late() + 1` entries since C
///         started, of which one is a member of C. Keys are generated here (scalar `KEY0 + i`).
///         The measured calls are the only calls of their tests (cold storage).
abstract contract SlashedStakeScanBase is EscrowBase {
    uint256 internal constant KEY0 = 7000;
    uint256 internal constant MEMBERS = 8;
    /// @dev A read of the slashed stake: the call, the log's or the member list's reads, and
    ///      one cold storage read per entry or member scanned.
    uint256 internal constant PER_SCANNED = 2800;
    uint256 internal constant VIEW_BASE = 30_000;

    bytes32 internal id;
    VerdictCommitment internal commitment;

    /// @dev Resolvers that join after C started and are slashed.
    function _late() internal pure virtual returns (uint256);

    function _pop(uint256 sk, bytes memory pk, address op) internal view returns (bytes memory) {
        bytes memory h = BLS.hashToG2(
            bytes.concat(BLS.compressG1(pk), abi.encodePacked(block.chainid, REGISTRY, op)),
            BLS.POP_DST
        );
        (bool ok, bytes memory r) = address(0x0e).staticcall(abi.encodePacked(h, sk));
        require(ok && r.length == 256, "G2MSM");
        return r;
    }

    function _register(uint256 i) internal returns (uint256 index) {
        bytes memory pk = Signer.publicKey(KEY0 + i);
        address op = _operator(i);
        token.mint(op, BOND);
        vm.startPrank(op);
        token.approve(address(registry), BOND);
        index = registry.register(pk, _pop(KEY0 + i, pk, op), BOND);
        vm.stopPrank();
    }

    function _range(uint256 from, uint256 to) internal pure returns (uint256[] memory r) {
        r = new uint256[](to - from);
        for (uint256 i; i < r.length; ++i) {
            r[i] = from + i;
        }
    }

    /// @dev The aggregate of resolvers `signers` over `digest`.
    function _sign(uint256[] memory signers, bytes32 digest) internal view returns (bytes memory) {
        uint256 sum;
        for (uint256 i; i < signers.length; ++i) {
            sum = addmod(sum, KEY0 + signers[i], Signer.R);
        }
        return Signer.signScalar(sum, digest);
    }

    function setUp() public {
        string memory ev = _read("consensus/vectors/escrow.json");
        _deploySystem();
        uint256 late = _late();
        for (uint256 i; i < MEMBERS + late; ++i) {
            _register(i);
        }
        vm.warp(block.timestamp + ACTIVATION);
        require(registry.activate(_range(0, MEMBERS)) == 1, "C is epoch 1");
        Terms memory t = _terms(ev, ".deals[0]");
        _allowBackend(t);
        id = _fund(t);
        _deliver(id, t, vm.parseJsonBytes32(ev, ".deals[0].deliveryHash"));
        _challenge(id);
        require(escrow.deal(id).epoch == 1, "the dispute pins C");
        VerdictCommitment memory c = _vectorCommitment(ev, ".deals[0].reproduced");
        c.dealId = id;
        commitment = c;
        // The newcomers join, then they and C's member 0 sign both outcomes of another deal.
        require(registry.activate(_range(MEMBERS, MEMBERS + late)) == 2, "epoch 2");
        uint256[] memory equivocators = new uint256[](late + 1);
        for (uint256 i = 1; i <= late; ++i) {
            equivocators[i] = MEMBERS + i - 1;
        }
        Evidence memory a;
        Evidence memory b;
        a.commitment = c;
        a.commitment.dealId = keccak256("another deal");
        b.commitment = _vectorCommitment(ev, ".deals[0].failed");
        b.commitment.dealId = a.commitment.dealId;
        (a.epoch, b.epoch, a.signers, b.signers) = (2, 2, equivocators, equivocators);
        a.signature = _sign(equivocators, escrow.verdictDigest(a.commitment));
        b.signature = _sign(equivocators, escrow.verdictDigest(b.commitment));
        bytes32 ds = escrow.domainSeparator();
        vm.prank(SLASHER);
        require(
            RegistrySlashing(address(registry)).slashEquivocation(ds, a, b) == late + 1,
            "all slashed"
        );
    }

    /// @dev C's position bitmap with position `p` set.
    function _bit(uint256 p) internal pure returns (bytes memory) {
        return abi.encodePacked(uint8(1 << p));
    }

    /// @notice The slashed stake of C: member 0's bond, signed unless position 0 is named a
    ///         non-signer; the read scans at most C's 8 members, not the whole log.
    function testSlashedStakeScansAtMostTheCommittee() public {
        (uint256 total, uint256 signed) = registry.slashedStake(1, _bit(0));
        uint256 used = vm.snapshotGasLastCall(
            "SlashedStakeGas",
            string.concat("slashedStake-n8-slashed-since", vm.toString(_late() + 1))
        );
        require(total == BOND && signed == 0, "member 0 slashed, a non-signer");
        (total, signed) = registry.slashedStake(1, _bit(1));
        require(total == BOND && signed == BOND, "member 0 slashed, a signer");
        (total, signed) = registry.slashedStake(3, "");
        require(total == 0 && signed == 0, "nobody slashed since epoch 3 started");
        uint256 budget = VIEW_BASE + PER_SCANNED * MEMBERS;
        require(used <= budget, string.concat("scan beyond the committee: ", vm.toString(used)));
    }

    /// @notice The dispute pinned to C settles with the certificate of members 1..7 (member 0,
    ///         slashed, does not sign); its quorum check scans at most C's members.
    function testResolveAfterManySlashesScansAtMostTheCommittee() public {
        bytes memory sig = _sign(_range(1, MEMBERS), escrow.verdictDigest(commitment));
        escrow.resolve(commitment, _bit(0), sig);
        uint256 used = vm.snapshotGasLastCall(
            "SlashedStakeGas",
            string.concat("resolve-n8-missing1-slashed-since", vm.toString(_late() + 1))
        );
        require(escrow.deal(id).settlement == Settlement.Released, "settled");
        uint256 budget = 300_000 + PER_SCANNED * MEMBERS;
        require(used <= budget, string.concat("resolve over budget: ", vm.toString(used)));
    }
}

/// @notice Fewer slashed since C started than C has members: the log is scanned.
contract SlashedStakeScanShortLogTest is SlashedStakeScanBase {
    function _late() internal pure override returns (uint256) {
        return 4;
    }
}

/// @notice Far more slashed since C started (97) than C has members (8).
contract SlashedStakeScanLongLogTest is SlashedStakeScanBase {
    function _late() internal pure override returns (uint256) {
        return 96;
    }
}
