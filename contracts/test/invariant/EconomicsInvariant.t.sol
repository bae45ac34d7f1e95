// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Escrow} from "../../src/Escrow.sol";
import {RegistrySlashing} from "../../src/RegistrySlashing.sol";
import {ResolverRegistry} from "../../src/ResolverRegistry.sol";
import {EscrowBase} from "../utils/EscrowBase.sol";
import {EconomicsHandler} from "./EconomicsHandler.sol";
import {
    BondToBuyerOnReproducedEscrow,
    DABondToBuyerOnFailedEscrow,
    IncluderTakesRefundEscrow,
    PerHeadRewardsRegistry
} from "./EconomicsMutants.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice Who is paid, per party, against the payout table of ECONOMICS.md and the slashing
///         rule: resolvers of unequal stake (3, 2, 2, 1, 1, 1, 2, 3 bonds), two submitters,
///         claims to non-operators, strangers' claims, held fees with left-out signers proven
///         late, a whistleblower (escrow and registry proceeds) and a separate sweeper.
abstract contract EconomicsChecks is EscrowBase {
    EconomicsHandler internal handler;
    uint256 internal constant P = 1e30;

    function _setUpEconomics() internal {
        string memory ev = _read("consensus/vectors/escrow.json");
        _deploySystem();
        // Before any committee exists the owner's settings apply at once.
        RegistrySlashing(address(registry)).setGasRefundCap(token, 0.05e18);
        uint8[8] memory bonds = [3, 2, 2, 1, 1, 1, 2, 3];
        uint256[] memory all = new uint256[](8);
        for (uint256 i; i < 8; ++i) {
            all[i] = _registerOne(ev, i, _operator(i), bonds[i] * BOND);
        }
        vm.warp(block.timestamp + ACTIVATION);
        registry.activate(all);
        escrow.setBackend(
            vm.parseJsonBytes32(ev, ".deals[0].terms.backendId"),
            vm.parseJsonBytes32(ev, ".deals[0].terms.backendVersionHash"),
            true
        );
        handler = new EconomicsHandler(escrow, registry, token, ev);
    }

    /// @dev The parties of the payout table, in a fixed order.
    function _parties() internal view returns (address[5] memory) {
        return [
            BUYER,
            handler.SELLER(),
            handler.SUBMITTER_A(),
            handler.SUBMITTER_B(),
            handler.WHISTLEBLOWER()
        ];
    }

    /// @notice Every party was credited exactly what the payout table gives it: buyer, seller,
    ///         both submitters and the whistleblower (claimed + still claimable), and the sink
    ///         (its shares of swept rewards plus flushed dust). The escrow holds what it owes.
    function checkPartiesPaidPerTable() public view {
        IERC20 t = IERC20(address(token));
        address[5] memory parties = _parties();
        for (uint256 j; j < 5; ++j) {
            address p = parties[j];
            require(
                escrow.claimable(p, t) + handler.claimed(p) == handler.credited(p),
                "a party's credit differs from the payout table"
            );
        }
        require(
            escrow.claimable(SINK, t) + handler.sinkOut() == handler.sinkCredited(),
            "the sink's credit differs"
        );
        require(token.balanceOf(address(escrow)) == escrow.liabilities(t), "balance");
    }

    /// @notice Every resolver is paid (claimed, swept or pending) exactly its stake's share of
    ///         the certificates it signed, down to under one wei per payout and per epoch; no
    ///         stranger and no slashed resolver's operator is ever paid.
    function checkRewardsByStake() public view {
        uint256 epochs = registry.currentEpoch();
        for (uint256 i; i < 8; ++i) {
            uint256 got = handler.rewardsPaid(i) + handler.rewardsSwept(i) + handler.pendingOf(i);
            uint256 earned = handler.earnedScaled(i);
            require(got * P <= earned, "paid beyond its stake's share");
            require(
                earned < (got + handler.payouts(i) + epochs + 1) * P, "paid below its stake's share"
            );
        }
        require(!handler.strangerPaid(), "a stranger claimed a resolver's rewards");
        require(!handler.slashedPaid(), "a slashed resolver's operator was paid");
    }

    /// @notice The registry's slashing proceeds: the whistleblower's and the sink's credits
    ///         (claimed or flushed + still claimable) equal the slashing rule's, and the
    ///         registry holds exactly the unslashed bonds plus those credits.
    function checkRegistryProceeds() public view {
        address wb = handler.WHISTLEBLOWER();
        require(
            registry.claimable(wb) + handler.registryClaimed(wb) == handler.registryCredited(wb),
            "the whistleblower's registry credit differs from the slashing rule"
        );
        require(
            registry.claimable(SINK) + handler.registryClaimed(SINK)
                == handler.registryCredited(SINK),
            "the sink's registry credit differs from the slashing rule"
        );
        uint256 bonds;
        for (uint256 i; i < 8; ++i) {
            (ResolverRegistry.Resolver memory r,,) = registry.resolverInfo(i);
            if (r.slashed) require(r.bond == 0, "a slashed bond stayed");
            bonds += r.bond;
        }
        require(
            token.balanceOf(address(registry))
                == bonds + registry.claimable(wb) + registry.claimable(SINK),
            "the registry holds other than bonds and proceeds"
        );
    }

    /// @notice Per party, tokens are conserved across both contracts: what it holds equals
    ///         what it was minted, less what it paid into the escrow, plus what it withdrew from
    ///         the escrow and the registry; the sink holds what both flushed to it; each rewards
    ///         recipient holds exactly the rewards sent to it. No forged inclusion proof was
    ///         accepted and settling exclusions never changed what a resolver is owed.
    function checkPartiesHoldWhatTheyWithdrew() public view {
        address[5] memory parties = _parties();
        for (uint256 j; j < 5; ++j) {
            address p = parties[j];
            require(
                token.balanceOf(p) + handler.paidIn(p)
                    == handler.minted(p) + handler.claimed(p) + handler.registryClaimed(p),
                "a party's tokens are not conserved"
            );
        }
        require(
            token.balanceOf(SINK) == handler.sinkOut() + handler.registryClaimed(SINK),
            "the sink holds other than what was flushed to it"
        );
        for (uint256 j; j < 3; ++j) {
            // forge-lint: disable-next-line(unsafe-typecast)
            address r = address(uint160(0xc1a10 + j));
            require(token.balanceOf(r) == handler.rewardsReceived(r), "a recipient's rewards");
        }
        require(!handler.forgedIncluded(), "a forged inclusion proof was accepted");
        require(!handler.settleMovedPending(), "settling exclusions changed a resolver's due");
    }

    function checkAll() external view {
        checkPartiesPaidPerTable();
        checkRewardsByStake();
        checkRegistryProceeds();
        checkPartiesHoldWhatTheyWithdrew();
    }

    /// @dev One pseudo-random action of the handler, weighted towards the deal phases so that
    ///      a short sequence reaches every payout path.
    function _step(uint256 r) internal {
        uint256 a = r % 20;
        uint256 x = r >> 8;
        if (a < 2) handler.fund(x, x >> 16, x >> 32);
        else if (a < 4) handler.deliver(x);
        else if (a < 6) handler.challenge(x);
        else if (a < 9) handler.resolve(x, (x >> 8) & 1 == 0, x >> 16, (x >> 40) & 1 == 0);
        else if (a == 9) handler.timeout(x);
        else if (a == 10) handler.releaseOrReclaim(x);
        else if (a == 11) handler.claim(x);
        else if (a == 12) handler.claimRewards(x, x >> 8);
        else if (a == 13) handler.slash(x, x >> 24);
        else if (a == 14) handler.sweep(x);
        else if (a == 15) handler.includeSigners(x, x >> 8, (x >> 16) & 3 == 0);
        else if (a == 16) handler.distributeHeld(x);
        else if (a == 17) handler.registryClaim(x % 2 == 0);
        else if (a == 18) handler.settleExclusions(x, x >> 8, x >> 16);
        else if (x % 2 == 0) handler.flush();
        else handler.strangerClaims(x);
    }

    /// @notice A deterministic campaign: `runs` sequences of `depth` actions from `seed`, the
    ///         checks after every action. Returns whether a check failed (the target was
    ///         killed). Each run starts from the same deployment (state snapshot).
    function _campaign(uint256 seed, uint256 runs, uint256 depth) internal returns (bool) {
        return _campaign(seed, 0, runs, depth);
    }

    /// @dev Runs `[from, to)` of the campaign.
    function _campaign(uint256 seed, uint256 from, uint256 to, uint256 depth)
        internal
        returns (bool)
    {
        uint256 snapshot = vm.snapshotState();
        for (uint256 run = from; run < to; ++run) {
            for (uint256 s; s < depth; ++s) {
                uint256 r = uint256(keccak256(abi.encode(seed, run, s)));
                try this.step(r) {} catch {}
                try this.checkAll() {}
                catch {
                    vm.revertToState(snapshot);
                    return true;
                }
            }
            vm.revertToState(snapshot);
        }
        return false;
    }

    function step(uint256 r) external {
        _step(r);
    }
}

/// @notice Forge's invariant campaign over the handler (CI profile: 256 runs x 64 calls).
contract EconomicsInvariantTest is EconomicsChecks {
    function setUp() public {
        _setUpEconomics();
    }

    function targetContracts() public view returns (address[] memory targets) {
        targets = new address[](1);
        targets[0] = address(handler);
    }

    function invariant_partiesPaidPerTable() public view {
        checkPartiesPaidPerTable();
    }

    function invariant_rewardsByStake() public view {
        checkRewardsByStake();
    }

    function invariant_registryProceeds() public view {
        checkRegistryProceeds();
    }

    function invariant_partiesHoldWhatTheyWithdrew() public view {
        checkPartiesHoldWhatTheyWithdrew();
    }
}

/// @notice The same campaign kills each mutant and spares the real contracts: 16 runs of 64
///         actions, 256 of 64 under the CI profile (`FOUNDRY_PROFILE=ci`, the invariant
///         settings of foundry.toml's `ci` profile). A mutant dies in its first runs; the
///         control's 256 runs are split over 16 tests (16 runs each fit a test's gas limit),
///         of which only the first runs outside the CI profile.
abstract contract EconomicsMutantCampaign is EconomicsChecks {
    uint256 internal constant DEPTH = 64;
    uint256 internal constant RUNS_PER_TEST = 16;

    function setUp() public {
        _setUpEconomics();
    }

    function _ci() internal view returns (bool) {
        string memory profile = vm.envOr("FOUNDRY_PROFILE", string("default"));
        return keccak256(bytes(profile)) == keccak256("ci");
    }

    /// @dev Whether part `p` of the 256 runs (16 each) spares the real contracts; parts
    ///      after the first run only under the CI profile.
    function _controlPart(uint256 p) internal {
        if (p > 0 && !_ci()) return;
        require(
            !_campaign(1, p * RUNS_PER_TEST, (p + 1) * RUNS_PER_TEST, DEPTH),
            "a check failed on the real contracts"
        );
    }
}

contract EconomicsCampaignControlTest is EconomicsMutantCampaign {
    function testCampaignPassesOnTheRealContracts() public {
        _controlPart(0);
        require(handler.calls("fund") == 0, "each run started afresh");
        // The campaign's actions reach the payout paths (a longer run, kept, checked throughout).
        for (uint256 s; s < 4 * DEPTH; ++s) {
            try this.step(uint256(keccak256(abi.encode(uint256(2), s)))) {} catch {}
            this.checkAll();
        }
        require(
            handler.calls("resolve") > 0 && handler.calls("timeout") + handler.calls("release") > 0
                && handler.calls("claim-rewards") > 0 && handler.calls("claim") > 0,
            "the campaign misses a payout path"
        );
        require(
            handler.calls("include") > 0 && handler.calls("distribute") > 0
                && handler.calls("slash") > 0
                && handler.calls("registry-claim") + handler.calls("registry-flush") > 0
                && handler.calls("settle") > 0,
            "the campaign misses late inclusion, slashing or the registry's proceeds"
        );
    }

    function testCampaignPart1() public {
        _controlPart(1);
    }

    function testCampaignPart2() public {
        _controlPart(2);
    }

    function testCampaignPart3() public {
        _controlPart(3);
    }

    function testCampaignPart4() public {
        _controlPart(4);
    }

    function testCampaignPart5() public {
        _controlPart(5);
    }

    function testCampaignPart6() public {
        _controlPart(6);
    }

    function testCampaignPart7() public {
        _controlPart(7);
    }

    function testCampaignPart8() public {
        _controlPart(8);
    }

    function testCampaignPart9() public {
        _controlPart(9);
    }

    function testCampaignPart10() public {
        _controlPart(10);
    }

    function testCampaignPart11() public {
        _controlPart(11);
    }

    function testCampaignPart12() public {
        _controlPart(12);
    }

    function testCampaignPart13() public {
        _controlPart(13);
    }

    function testCampaignPart14() public {
        _controlPart(14);
    }

    function testCampaignPart15() public {
        _controlPart(15);
    }
}

contract BondToBuyerOnReproducedMutantTest is EconomicsMutantCampaign {
    function _escrowCode() internal pure override returns (bytes memory) {
        return type(BondToBuyerOnReproducedEscrow).creationCode;
    }

    function testCampaignKillsTheMutant() public {
        require(
            _campaign(1, RUNS_PER_TEST, DEPTH), "challenge bond to the buyer on Reproduced survived"
        );
    }
}

contract DABondToBuyerOnFailedMutantTest is EconomicsMutantCampaign {
    function _escrowCode() internal pure override returns (bytes memory) {
        return type(DABondToBuyerOnFailedEscrow).creationCode;
    }

    function testCampaignKillsTheMutant() public {
        require(_campaign(1, RUNS_PER_TEST, DEPTH), "DA bond to the buyer on Failed survived");
    }
}

contract PerHeadRewardsMutantTest is EconomicsMutantCampaign {
    function _registryCode() internal pure override returns (bytes memory) {
        return type(PerHeadRewardsRegistry).creationCode;
    }

    function testCampaignKillsTheMutant() public {
        require(_campaign(1, RUNS_PER_TEST, DEPTH), "fee split per head survived");
    }
}

contract IncluderTakesRefundMutantTest is EconomicsMutantCampaign {
    function _escrowCode() internal pure override returns (bytes memory) {
        return type(IncluderTakesRefundEscrow).creationCode;
    }

    function testCampaignKillsTheMutant() public {
        require(
            _campaign(1, RUNS_PER_TEST, DEPTH),
            "the includer taking the submitter's refund survived"
        );
    }
}
