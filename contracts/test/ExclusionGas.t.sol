// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {EscrowFees} from "../src/EscrowFees.sol";
import {RegistrySlashing} from "../src/RegistrySlashing.sol";
import {Terms} from "../src/interfaces/IEscrow.sol";
import {VerdictCommitment} from "../src/libraries/VerdictHash.sol";
import {EscrowBase} from "./utils/EscrowBase.sol";
import {Signer} from "./utils/Signer.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {Math} from "@openzeppelin/contracts/utils/math/Math.sol";

/// @notice What a resolver left out of fee splits pays when it claims, and the bounded way to
///         settle its exclusions first. Eight vector resolvers of equal bond (epoch 1). Every
///         member signs deal 0 (resolver 7 earns one share). Then a third party, acting as
///         buyer, seller and submitter, makes `_entries()` more fee-paying disputes of the
///         same epoch and certifies each with resolver 7 named a non-signer; nobody proves
///         resolver 7 within the inclusion window, so each split logs one exclusion entry that
///         names it. Resolver 7's claim of epoch 1 scans every entry (each names it: three cold
///         reads); `settleExclusions` does the same in calls of at most `maxEntries` entries.
///         The measured calls are the only calls of their tests (cold storage); recorded in
///         snapshots/ExclusionGas.json.
abstract contract ExclusionGasBase is EscrowBase {
    string internal ev;
    IERC20 internal tok;
    uint256 internal constant P = 1e30;
    uint256 internal constant FEE = 1e18;
    uint256 internal constant CAP = 0.01e18;
    uint256 internal constant LEFT_OUT = 7;
    address internal constant THIRD_PARTY = address(uint160(0x3e3e));
    /// @dev Gas of one entry that names the claimant: up to three cold reads and the loop.
    uint256 internal constant PER_ENTRY = 7000;
    /// @dev A claim or a settlement without entries to scan, cold: the call through the
    ///      fallback, the registry's `rewardInfo` and `positionOf`, the reads, the fresh debt
    ///      and cursor slots, the transfer.
    uint256 internal constant CLAIM_BASE = 100_000;
    uint256 internal constant SETTLE_BASE = 80_000;

    uint256 internal sumAll;
    uint256 internal sumSigners;

    function _entries() internal pure virtual returns (uint256);

    function setUp() public {
        ev = _read("consensus/vectors/escrow.json");
        _deploySystem();
        // Before the first epoch the owner's parameters apply at once.
        RegistrySlashing(address(registry)).setGasRefundCap(IERC20(TOKEN), CAP);
        tok = IERC20(TOKEN);
        _registerCommittee(ev, 8);
        for (uint256 i; i < 8; ++i) {
            sumAll = addmod(sumAll, Signer.secret(i), Signer.R);
        }
        sumSigners = addmod(sumAll, Signer.R - Signer.secret(LEFT_OUT), Signer.R);
        bytes32 first = _disputed(0);
        escrow.resolve(_commitment(first), "", Signer.signScalar(sumAll, _digest(first)));
        uint256 n = _entries();
        bytes32[] memory ids = new bytes32[](n);
        for (uint256 k; k < n; ++k) {
            // One call frame per deal: its memory is released after it.
            ids[k] = this.disputeLeavingOut(k + 1);
        }
        vm.warp(block.timestamp + escrow.INCLUSION_WINDOW() + 1);
        for (uint256 k; k < n; ++k) {
            vm.prank(THIRD_PARTY);
            EscrowFees(address(escrow)).distributeFee(ids[k]);
        }
        require(EscrowFees(address(escrow)).exclusionCount(tok, 1) == n, "one entry per split");
    }

    /// @dev A disputed deal certified with resolver 7 left out (external: see `setUp`).
    function disputeLeavingOut(uint256 k) external returns (bytes32 id) {
        require(msg.sender == address(this), "setup only");
        id = _disputed(k);
        _leaveOut(id);
    }

    function _disputed(uint256 k) internal returns (bytes32 id) {
        Terms memory t = _terms(ev, ".deals[0]");
        t.resolverFee = FEE;
        t.salt = bytes32(k + 1000);
        _allowBackend(t);
        id = _fund(t);
        _deliver(id, t, vm.parseJsonBytes32(ev, ".deals[0].deliveryHash"));
        _challenge(id);
    }

    function _commitment(bytes32 id) internal view returns (VerdictCommitment memory c) {
        c = _vectorCommitment(ev, ".deals[0].reproduced");
        c.dealId = id;
    }

    function _digest(bytes32 id) internal view returns (bytes32) {
        return escrow.verdictDigest(_commitment(id));
    }

    /// @dev The third party certifies `id` with resolver 7 (position 7) named a non-signer.
    function _leaveOut(bytes32 id) internal {
        bytes memory sig = Signer.signScalar(sumSigners, _digest(id));
        vm.prank(THIRD_PARTY);
        escrow.resolve(_commitment(id), abi.encodePacked(uint8(1 << LEFT_OUT)), sig);
    }

    function _epoch1() internal pure returns (uint256[] memory es) {
        es = new uint256[](1);
        es[0] = 1;
    }

    /// @dev One share of deal 0 (all eight signed): what resolver 7 is owed.
    function _share() internal pure returns (uint256) {
        return Math.mulDiv(BOND, (FEE - CAP) * P / (8 * BOND), P);
    }

    function _name(string memory what) internal pure returns (string memory) {
        return string.concat(what, "-entries", vm.toString(_entries()));
    }

    /// @notice Resolver 7 claims epoch 1 in one call: it scans every entry.
    function testGasClaimLeftOut() public {
        token.mint(_operator(LEFT_OUT), 1); // the recipient already holds the token
        vm.prank(_operator(LEFT_OUT));
        uint256 amount =
            EscrowFees(address(escrow)).claimRewards(tok, LEFT_OUT, _epoch1(), _operator(LEFT_OUT));
        uint256 used = vm.snapshotGasLastCall("ExclusionGas", _name("claimRewards-left-out"));
        require(amount == _share(), "deal 0 only");
        uint256 budget = CLAIM_BASE + PER_ENTRY * _entries();
        require(used <= budget, string.concat("claim over budget: ", vm.toString(used)));
    }

    /// @notice A signer of every split claims the same epoch: no scan.
    function testGasClaimSigner() public {
        token.mint(_operator(0), 1);
        vm.prank(_operator(0));
        EscrowFees(address(escrow)).claimRewards(tok, 0, _epoch1(), _operator(0));
        uint256 used = vm.snapshotGasLastCall("ExclusionGas", _name("claimRewards-signer"));
        require(used <= CLAIM_BASE, string.concat("signer's claim scans: ", vm.toString(used)));
    }

    /// @notice Settling all of resolver 7's entries in one call (anyone may).
    function testGasSettleAll() public {
        vm.prank(THIRD_PARTY);
        uint256 remaining =
            EscrowFees(address(escrow)).settleExclusions(tok, LEFT_OUT, 1, type(uint256).max);
        uint256 used = vm.snapshotGasLastCall("ExclusionGas", _name("settleExclusions-all"));
        require(remaining == 0, "all settled");
        uint256 budget = SETTLE_BASE + PER_ENTRY * _entries();
        require(used <= budget, string.concat("settle over budget: ", vm.toString(used)));
    }

    /// @notice Settling in chunks, then claiming, pays exactly what one claim would: deal 0's
    ///         share. Each chunk costs at most `SETTLE_BASE + PER_ENTRY * chunk`, so a chunk of
    ///         2,000 entries fits 2^24 with room to spare; the claim after it scans nothing.
    function testSettleInChunksThenClaim() public {
        uint256 n = _entries();
        uint256 chunk = n / 3 + 1;
        EscrowFees fees = EscrowFees(address(escrow));
        require(fees.pendingRewards(tok, LEFT_OUT, 1) == _share(), "pending before");
        require(fees.settleExclusions(tok, LEFT_OUT, 1, 0) == n, "nothing settled by 0");
        uint256 left = n;
        while (left > 0) {
            uint256 before = gasleft();
            uint256 remaining = fees.settleExclusions(tok, LEFT_OUT, 1, chunk);
            uint256 used = before - gasleft();
            uint256 done = left < chunk ? left : chunk;
            require(remaining == left - done, "remaining");
            require(used <= SETTLE_BASE + PER_ENTRY * done, "chunk over budget");
            require(fees.pendingRewards(tok, LEFT_OUT, 1) == _share(), "pending unchanged");
            left = remaining;
        }
        require(fees.exclusionCursor(tok, 1, LEFT_OUT) == n, "cursor at the end");
        require(fees.settleExclusions(tok, LEFT_OUT, 1, chunk) == 0, "nothing left");
        vm.prank(_operator(LEFT_OUT));
        uint256 before = gasleft();
        uint256 amount = fees.claimRewards(tok, LEFT_OUT, _epoch1(), _operator(LEFT_OUT));
        require(before - gasleft() <= CLAIM_BASE + 30_000, "the claim scans nothing");
        require(amount == _share(), "exactly deal 0's share");
        // A signer (never named, unmarked) settles nothing and keeps all its shares.
        require(fees.settleExclusions(tok, 0, 1, chunk) == 0, "unmarked");
        uint256 toSigner = Math.mulDiv(BOND, (FEE - CAP) * P / (7 * BOND), P);
        uint256 pending0 = fees.pendingRewards(tok, 0, 1);
        require(
            pending0 >= _share() + n * toSigner && pending0 <= _share() + n * toSigner + n,
            "a signer's shares intact"
        );
        require(tok.balanceOf(ESCROW) == escrow.liabilities(tok), "conserved");
    }
}

/// @notice One entry, plus what making one costs the third party.
contract ExclusionGas1Test is ExclusionGasBase {
    function _entries() internal pure override returns (uint256) {
        return 1;
    }

    /// @notice The calls a third party makes for one exclusion entry against resolver 7: fund,
    ///         deliver, challenge, `resolve` naming it a non-signer, `distributeFee` after the
    ///         inclusion window (each measured warm, after the setup's deals).
    function testGasOfMakingAnEntry() public {
        Terms memory t = _terms(ev, ".deals[0]");
        t.resolverFee = FEE;
        t.salt = bytes32(uint256(77));
        token.mint(BUYER, t.amount + FEE);
        vm.startPrank(BUYER);
        token.approve(ESCROW, t.amount + FEE);
        bytes32 id = escrow.fund(t, "", "");
        vm.stopPrank();
        uint256 total = vm.snapshotGasLastCall("ExclusionGas", "entry-fund");
        vm.warp(block.timestamp + 1);
        uint256 locked = t.sellerBond + FEE;
        token.mint(SELLER, locked);
        vm.startPrank(SELLER);
        token.approve(ESCROW, locked);
        escrow.deliver(id, vm.parseJsonBytes32(ev, ".deals[0].deliveryHash"), "");
        vm.stopPrank();
        total += vm.snapshotGasLastCall("ExclusionGas", "entry-deliver");
        vm.warp(block.timestamp + 1);
        vm.prank(BUYER);
        escrow.challenge(id);
        total += vm.snapshotGasLastCall("ExclusionGas", "entry-challenge");
        bytes memory sig = Signer.signScalar(sumSigners, _digest(id));
        VerdictCommitment memory c = _commitment(id);
        vm.prank(THIRD_PARTY);
        escrow.resolve(c, abi.encodePacked(uint8(1 << LEFT_OUT)), sig);
        total += vm.snapshotGasLastCall("ExclusionGas", "entry-resolve");
        vm.warp(block.timestamp + escrow.INCLUSION_WINDOW() + 1);
        EscrowFees(address(escrow)).distributeFee(id);
        total += vm.snapshotGasLastCall("ExclusionGas", "entry-distributeFee");
        require(EscrowFees(address(escrow)).exclusionCount(tok, 1) == 2, "a second entry");
        require(total >= 100 * PER_ENTRY, "an entry costs far more than its scan");
    }
}

contract ExclusionGas16Test is ExclusionGasBase {
    function _entries() internal pure override returns (uint256) {
        return 16;
    }
}

contract ExclusionGas64Test is ExclusionGasBase {
    function _entries() internal pure override returns (uint256) {
        return 64;
    }
}

contract ExclusionGas256Test is ExclusionGasBase {
    function _entries() internal pure override returns (uint256) {
        return 256;
    }
}
