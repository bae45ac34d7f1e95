// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {EscrowFees} from "../src/EscrowFees.sol";
import {RegistrySlashing} from "../src/RegistrySlashing.sol";
import {Terms} from "../src/interfaces/IEscrow.sol";
import {Evidence, IResolverRegistryErrors} from "../src/interfaces/IResolverRegistry.sol";
import {BLS} from "../src/libraries/BLS.sol";
import {Outcome, VerdictCommitment} from "../src/libraries/VerdictHash.sol";
import {EscrowBase} from "./utils/EscrowBase.sol";
import {Signer} from "./utils/Signer.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice Gas of a certificate with a fee whose non-signers are named by position bitmap, per
///         committee size and non-signer share (0, 10 %, 1/3 of the members at equal stake), of
///         proving late signers (`includeSigners`), of the split after the inclusion window
///         (`distributeFee`) and of the claims after it; plus the sybil worst case at the
///         largest committee: one resolver with 2/3 of the stake signs, every other member
///         (minimum bond, 1/3 of the stake) does not. Keys are generated here (scalar
///         `KEY0 + i`, proofs of possession made with G2MSM). Each measured call is the only
///         call of its test (setUp state is cold). Recorded in snapshots/NonSignerGas.json and
///         checked against ECONOMICS.md's targets: at most 5,000 gas per non-signer, and the
///         largest committee with 1/3 of its stake not signing under 2,000,000.
abstract contract NonSignerGasBase is EscrowBase {
    string internal ev;
    IERC20 internal tok;
    uint256 internal constant KEY0 = 1000;
    uint256 internal constant FEE = 1e18;
    uint256 internal constant CAP = 0.01e18;
    /// @dev Marginal gas budget of one non-signer in a `resolve` with a fee.
    uint256 internal constant PER_NON_SIGNER = 5000;

    bytes32 internal id;
    VerdictCommitment internal commitment;
    bytes32 internal digest;
    /// @dev Non-signer bitmaps and signatures of the three scenarios: 0, 10 %, 1/3.
    bytes[3] internal bitmaps;
    bytes[3] internal signatures;
    uint256[3] internal missing;

    function _n() internal pure virtual returns (uint256);

    /// @dev Sybil layout: resolver 0 bonds 2 (n - 1) BOND, everyone else BOND.
    function _sybil() internal pure virtual returns (bool) {
        return false;
    }

    function _pop(uint256 sk, bytes memory pk, address op) internal view returns (bytes memory) {
        bytes memory h = BLS.hashToG2(
            bytes.concat(BLS.compressG1(pk), abi.encodePacked(block.chainid, REGISTRY, op)),
            BLS.POP_DST
        );
        (bool ok, bytes memory r) = address(0x0e).staticcall(abi.encodePacked(h, sk));
        require(ok && r.length == 256, "G2MSM");
        return r;
    }

    function _register(uint256 i, uint256 bond) internal returns (uint256 index) {
        bytes memory pk = Signer.publicKey(KEY0 + i);
        address op = _operator(i);
        bytes memory pop = _pop(KEY0 + i, pk, op);
        token.mint(op, bond);
        vm.startPrank(op);
        token.approve(address(registry), bond);
        index = registry.register(pk, pop, bond);
        vm.stopPrank();
    }

    /// @dev Position p does not sign in scenario s: none, every tenth, every third (all but
    ///      position 0 in the sybil layout's last scenario).
    function _absent(uint256 s, uint256 p) internal pure returns (bool) {
        if (s == 0) return false;
        if (_sybil()) return s == 2 ? p != 0 : p % 10 == 9;
        return s == 1 ? p % 10 == 9 : p % 3 == 2;
    }

    function setUp() public {
        ev = _read("consensus/vectors/escrow.json");
        _deploySystem();
        // Before the first epoch the owner's parameters apply at once.
        RegistrySlashing(address(registry)).setGasRefundCap(IERC20(TOKEN), CAP);
        tok = IERC20(TOKEN);
        uint256 n = _n();
        uint256[] memory all = new uint256[](n);
        for (uint256 i; i < n; ++i) {
            all[i] = _register(i, _sybil() && i == 0 ? 2 * (n - 1) * BOND : BOND);
        }
        vm.warp(block.timestamp + ACTIVATION);
        registry.activate(all);
        Terms memory t = _terms(ev, _at(".deals", 0));
        t.resolverFee = FEE;
        t.challengeBond = 1e18;
        _allowBackend(t);
        id = _fund(t);
        _deliver(id, t, vm.parseJsonBytes32(ev, string.concat(_at(".deals", 0), ".deliveryHash")));
        _challenge(id);
        VerdictCommitment memory c =
            _vectorCommitment(ev, string.concat(_at(".deals", 0), ".reproduced"));
        c.dealId = id;
        commitment = c;
        digest = _vectorDigest(c);
        for (uint256 s; s < 3; ++s) {
            bytes memory bitmap = new bytes((n + 7) / 8);
            uint256 sum;
            for (uint256 p; p < n; ++p) {
                if (_absent(s, p)) {
                    bitmap[p >> 3] |= bytes1(uint8(1 << (p & 7)));
                    ++missing[s];
                } else {
                    sum = addmod(sum, KEY0 + p, Signer.R);
                }
            }
            bitmaps[s] = bitmap;
            signatures[s] = Signer.signScalar(sum, digest);
        }
    }

    function _name(string memory what, uint256 s) internal view returns (string memory) {
        return string.concat(
            what,
            _sybil() ? "-sybil-n" : "-n",
            vm.toString(_n()),
            "-missing",
            vm.toString(missing[s])
        );
    }

    /// @dev Budget: a full certificate with a fee to a fresh submitter (350k), the fee held
    ///      with its non-signer bitmap if anyone is missing (100k), and 5,000 per non-signer.
    function _resolve(uint256 s) internal returns (uint256 used) {
        escrow.resolve(commitment, bitmaps[s], signatures[s]);
        used = vm.snapshotGasLastCall("NonSignerGas", _name("resolve-fee", s));
        require(_owed(SELLER) > 0, "settled");
        uint256 budget = 350_000 + (missing[s] > 0 ? 100_000 : 0) + PER_NON_SIGNER * missing[s];
        require(used <= budget, string.concat("resolve over budget: ", vm.toString(used)));
    }

    function testGasResolveFull() public {
        _resolve(0);
    }

    function testGasResolveTenPercent() public {
        _resolve(1);
    }

    function testGasResolveThird() public {
        uint256 used = _resolve(2);
        require(used <= 2_000_000, "1/3 of the stake missing: over 2M gas");
    }

    /// @dev Resolves scenario 2 (1/3 missing).
    function _resolveThird() internal {
        escrow.resolve(commitment, bitmaps[2], signatures[2]);
    }

    /// @notice Late inclusion of two left-out signers (one aggregate).
    function testGasIncludeTwoSigners() public {
        _resolveThird();
        uint256 n = _n();
        bytes memory two = new bytes((n + 7) / 8);
        uint256 sum;
        uint256 found;
        for (uint256 p; p < n && found < 2; ++p) {
            if (_absent(2, p)) {
                two[p >> 3] |= bytes1(uint8(1 << (p & 7)));
                sum = addmod(sum, KEY0 + p, Signer.R);
                ++found;
            }
        }
        bytes memory sig = Signer.signScalar(sum, digest);
        EscrowFees(address(escrow)).includeSigners(id, two, sig);
        vm.snapshotGasLastCall("NonSignerGas", _name("includeSigners-2", 2));
    }

    /// @notice The split after the inclusion window (the remaining non-signers excluded).
    function testGasDistributeFee() public {
        _resolveThird();
        vm.warp(block.timestamp + escrow.INCLUSION_WINDOW() + 1);
        EscrowFees(address(escrow)).distributeFee(id);
        vm.snapshotGasLastCall("NonSignerGas", _name("distributeFee", 2));
    }

    function _claimAfterSplit(uint256 resolver, string memory what) internal {
        _resolveThird();
        vm.warp(block.timestamp + escrow.INCLUSION_WINDOW() + 1);
        EscrowFees(address(escrow)).distributeFee(id);
        token.mint(_operator(resolver), 1); // the recipient already holds the token
        uint256[] memory epochs = new uint256[](1);
        epochs[0] = 1;
        vm.prank(_operator(resolver));
        if (_absent(2, resolver)) {
            vm.expectRevert();
            EscrowFees(address(escrow)).claimRewards(tok, resolver, epochs, _operator(resolver));
            return;
        }
        EscrowFees(address(escrow)).claimRewards(tok, resolver, epochs, _operator(resolver));
        vm.snapshotGasLastCall("NonSignerGas", _name(what, 2));
    }

    /// @notice The largest equivocating coalition the committee allows: every member signed
    ///         both outcomes of the deal. One `slashEquivocation` slashes them all; with the
    ///         intrinsic and calldata gas the transaction must fit EIP-7825's 2^24 cap.
    function testGasSlashWholeCommittee() public {
        uint256 n = _n();
        VerdictCommitment memory other = commitment;
        other.outcome = Outcome.Failed;
        Evidence memory a = _evidence(commitment);
        Evidence memory b = _evidence(other);
        bytes32 ds = escrow.domainSeparator();
        uint256 slashed = RegistrySlashing(address(registry)).slashEquivocation(ds, a, b);
        uint256 used = vm.snapshotGasLastCall(
            "NonSignerGas",
            string.concat(
                "slashEquivocation-",
                _sybil() ? "sybil-n" : "n",
                vm.toString(n),
                "-of-",
                vm.toString(n)
            )
        );
        require(slashed == n, "all slashed");
        bytes memory data = abi.encodeCall(RegistrySlashing.slashEquivocation, (ds, a, b));
        uint256 intrinsic = 21_000;
        for (uint256 i; i < data.length; ++i) {
            intrinsic += data[i] == 0 ? 4 : 16;
        }
        require(
            used + intrinsic <= 1 << 24,
            string.concat("slashing over 2^24: ", vm.toString(used + intrinsic))
        );
    }

    /// @dev Every member's signature over `c`, aggregated (one G2 scalar multiplication).
    function _evidence(VerdictCommitment memory c) internal view returns (Evidence memory e) {
        uint256 n = _n();
        e.commitment = c;
        e.epoch = 1;
        e.signers = new uint256[](n);
        uint256 sum;
        for (uint256 i; i < n; ++i) {
            e.signers[i] = i;
            sum = addmod(sum, KEY0 + i, Signer.R);
        }
        e.signature = Signer.signScalar(sum, _vectorDigest(c));
    }

    /// @notice A signer's claim of an epoch with one exclusion entry (the position lookup and
    ///         one missed-bit read on top of the plain claim).
    function testGasClaimSigner() public {
        _claimAfterSplit(0, "claimRewards-signer");
    }
}

contract NonSignerGas16Test is NonSignerGasBase {
    function _n() internal pure override returns (uint256) {
        return 16;
    }
}

contract NonSignerGas64Test is NonSignerGasBase {
    function _n() internal pure override returns (uint256) {
        return 64;
    }
}

contract NonSignerGas256Test is NonSignerGasBase {
    function _n() internal pure override returns (uint256) {
        return 256;
    }
}

contract NonSignerGas400Test is NonSignerGasBase {
    function _n() internal pure override returns (uint256) {
        return 400;
    }

    /// @notice The committee is bounded: a 401st member cannot be activated.
    function testCommitteeIsBounded() public {
        uint256 index = _register(400, BOND);
        vm.warp(block.timestamp + ACTIVATION);
        uint256[] memory one = new uint256[](1);
        one[0] = index;
        vm.expectRevert(
            abi.encodeWithSelector(IResolverRegistryErrors.CommitteeFull.selector, 400, 1, 400)
        );
        registry.activate(one);
    }
}

/// @notice The worst case the bound allows: 400 members, 399 of them minimum-bond sybils
///         holding 1/3 of the stake that never sign.
contract NonSignerGasSybil400Test is NonSignerGasBase {
    function _n() internal pure override returns (uint256) {
        return 400;
    }

    function _sybil() internal pure override returns (bool) {
        return true;
    }
}
