// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {Math} from "@openzeppelin/contracts/utils/math/Math.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";

import {EscrowStorage} from "./EscrowStorage.sol";
import {Deal} from "./interfaces/IEscrow.sol";
import {IResolverRegistry} from "./interfaces/IResolverRegistry.sol";

/// @title EscrowFees
/// @notice The Escrow's fee and reward functions: late inclusion of signers (`includeSigners`,
///         `distributeFee`), resolvers' rewards (`claimRewards`, `settleExclusions`,
///         `pendingRewards`, `sweepSlashedRewards`), the sink (`flushSink`) and `recoverExcess`. The Escrow
///         deploys it in its constructor and runs it by DELEGATECALL from its fallback, on the
///         Escrow's own storage and balance: callers see one contract and one ABI. Split out
///         only so that the Escrow fits EIP-170's code-size limit. An Attestor deploys and runs
///         its own instance the same way (its requests are deals in the same layout). Calls
///         made to this contract directly revert (`NotThroughEscrow`).
contract EscrowFees is EscrowStorage {
    using SafeERC20 for IERC20;
    using SafeCast for uint256;

    /// @dev The Escrow that deployed this contract: the only storage its functions run on.
    address internal immutable _escrow;

    constructor(IResolverRegistry registry_) EscrowStorage(registry_, msg.sender) {
        _escrow = msg.sender;
    }

    modifier throughEscrow() {
        if (address(this) != _escrow) revert NotThroughEscrow();
        _;
    }

    /// @notice Proves more signers of a certified dispute whose fee is still held: `signature`
    ///         is the aggregate, over the certified digest, of the members at the positions set
    ///         in `signers` (each still a non-signer of this dispute). Their stake joins the
    ///         signed stake the fee is split over. Permissionless (the proof is the
    ///         signature); once every member is in, the fee is split at once.
    function includeSigners(bytes32 dealId, bytes calldata signers, bytes calldata signature)
        external
        throughEscrow
        nonReentrant
    {
        Held storage h = held[dealId];
        uint256 closesAt = h.closesAt;
        if (closesAt == 0) revert NothingHeld(dealId);
        if (block.timestamp > closesAt) revert TooLate(dealId, closesAt);
        uint256 words = h.words;
        uint256 n = (signers.length + 31) / 32;
        bool any;
        for (uint256 w; w < n; ++w) {
            uint256 chunk = _chunk(signers, w);
            if (chunk == 0) continue;
            uint256 current = w < words ? nonSignerBits[dealId][w] : 0;
            if (chunk & ~current != 0) revert NotNonSigners(dealId);
            nonSignerBits[dealId][w] = current & ~chunk;
            any = true;
        }
        if (!any) revert NotNonSigners(dealId);
        uint256 stake = registry.verifySigners(_deals[dealId].epoch, h.digest, signers, signature);
        h.signedStake = (h.signedStake + stake).toUint128();
        emit SignersIncluded(dealId, msg.sender, signers, stake);
        for (uint256 w; w < words; ++w) {
            if (nonSignerBits[dealId][w] != 0) return;
        }
        _release(dealId, h, false);
    }

    /// @notice Splits a held resolver fee once its inclusion window closed. Permissionless.
    function distributeFee(bytes32 dealId) external throughEscrow nonReentrant {
        Held storage h = held[dealId];
        uint256 closesAt = h.closesAt;
        if (closesAt == 0) revert NothingHeld(dealId);
        if (block.timestamp <= closesAt) revert TooEarly(dealId, closesAt + 1);
        _release(dealId, h, true);
    }

    /// @notice Sends `to` the fee rewards `resolver` earned in `token` over `epochs` (any order;
    ///         epochs it was not a member of, or holding nothing, are skipped). Only its operator
    ///         may claim, also after it exited and withdrew its bond; a slashed resolver's rewards
    ///         are forfeited (`sweepSlashedRewards`). Cost: O(1) + O(len(epochs)), plus, for an
    ///         epoch in which it was left out of a fee split, about 6.8k gas per exclusion entry
    ///         not yet settled (`settleExclusions` settles them first in bounded calls).
    /// @return amount The amount sent.
    function claimRewards(IERC20 token, uint256 resolver, uint256[] calldata epochs, address to)
        external
        throughEscrow
        nonReentrant
        returns (uint256 amount)
    {
        if (to == address(0)) revert ZeroAddress("to");
        (address operator, uint256 stake, uint256 joined, uint256 left, bool slashed) =
            registry.rewardInfo(resolver);
        if (msg.sender != operator) revert NotOperator(resolver, msg.sender);
        if (slashed) revert RewardsForfeited(resolver);
        amount = _collect(token, resolver, stake, joined, left, epochs);
        if (amount == 0) revert NoRewards(resolver, token);
        liabilities[token] -= amount;
        emit RewardsClaimed(resolver, token, to, amount);
        token.safeTransfer(to, amount);
    }

    /// @notice Settles up to `maxEntries` of `resolver`'s exclusion entries of (`token`,
    ///         `epoch`) that no claim accounted for yet: the increments of those that name it
    ///         as a non-signer move into its reward debt and its cursor moves past them, exactly
    ///         what `claimRewards` (or `sweepSlashedRewards`) would do for them, and nothing is
    ///         paid. Permissionless: it changes what nobody is owed. A resolver left out of a
    ///         split scans every entry since its last claim when it claims; with this it settles
    ///         them in calls of bounded gas first, so that its claim scans only what was added
    ///         since. Cost (test/ExclusionGas.t.sol, cold): about 79k plus, per entry, up to
    ///         three cold reads (6,816 gas for an entry that names it): 2,000 entries fit in
    ///         13.7M gas.
    /// @return remaining The entries still unsettled (0 also for a resolver no entry names,
    ///         or one that was no member of `epoch`).
    function settleExclusions(IERC20 token, uint256 resolver, uint256 epoch, uint256 maxEntries)
        external
        throughEscrow
        nonReentrant
        returns (uint256 remaining)
    {
        uint256 entries = _exclusions[token][epoch].length;
        uint256 from = exclusionCursor[token][epoch][resolver];
        if (from >= entries) return 0;
        (,, uint256 joined, uint256 left,) = registry.rewardInfo(resolver);
        if (!_isMember(epoch, joined, left)) return 0;
        uint256 to = maxEntries < entries - from ? from + maxEntries : entries;
        if (to == from) return entries - from;
        (uint256 sum, bool scanned) = _excluded(token, epoch, resolver, from, to);
        if (!scanned) {
            // Unmarked: no entry so far names it; later scans may start after all of them.
            exclusionCursor[token][epoch][resolver] = entries;
            return 0;
        }
        if (sum > 0) rewardDebt[token][epoch][resolver] = _debt(token, epoch, resolver) + sum;
        exclusionCursor[token][epoch][resolver] = to;
        return entries - to;
    }

    /// @notice Forfeits a slashed resolver's unclaimed rewards in `token` over `epochs` the way
    ///         the registry split its bond: its whistleblower share to the whistleblower, the
    ///         rest to the slash sink, both credited here (`claim`). Permissionless.
    /// @return amount The amount forfeited.
    function sweepSlashedRewards(IERC20 token, uint256 resolver, uint256[] calldata epochs)
        external
        throughEscrow
        nonReentrant
        returns (uint256 amount)
    {
        (, uint256 stake, uint256 joined, uint256 left, bool slashed) =
            registry.rewardInfo(resolver);
        if (!slashed) revert NotSlashed(resolver);
        amount = _collect(token, resolver, stake, joined, left, epochs);
        if (amount == 0) revert NoRewards(resolver, token);
        (address whistleblower, uint256 shareBps, address sink) = registry.slashRecipients(resolver);
        uint256 share = amount * shareBps / BPS;
        emit RewardsSlashed(resolver, token, whistleblower, share, sink, amount - share);
        if (share > 0) _credit(whistleblower, token, share);
        if (amount > share) _credit(sink, token, amount - share);
    }

    /// @notice Hands the slash sink everything it is owed in `token`: its credited shares of
    ///         slashed rewards, plus the whole wei of `dustRemainder` (rounding remainders owed
    ///         to no one). Permissionless, so they leave the escrow even when the sink is a burn
    ///         address no one can call from.
    /// @return amount The amount sent to the sink.
    function flushSink(IERC20 token) external throughEscrow nonReentrant returns (uint256 amount) {
        address sink = registry.slashSink();
        uint256 dust = dustRemainder[token] / REWARD_PRECISION;
        if (dust > 0) {
            dustRemainder[token] -= dust * REWARD_PRECISION;
            _credit(sink, token, dust);
        }
        amount = claimable[sink][token];
        if (amount == 0) revert NothingToClaim(sink, token);
        claimable[sink][token] = 0;
        liabilities[token] -= amount;
        emit Claimed(sink, token, sink, amount);
        token.safeTransfer(sink, amount);
    }

    /// @notice Sends `to` the tokens held beyond everything owed (`liabilities`): tokens sent to
    ///         the escrow outside any deal. Cannot touch a deal's funds or a credit.
    function recoverExcess(IERC20 token, address to)
        external
        throughEscrow
        onlyOwner
        nonReentrant
        returns (uint256 amount)
    {
        if (to == address(0)) revert ZeroAddress("to");
        uint256 balance = token.balanceOf(address(this));
        uint256 owed = liabilities[token];
        if (balance <= owed) revert NothingToRecover(token);
        amount = balance - owed;
        emit Recovered(token, to, amount);
        token.safeTransfer(to, amount);
    }

    /// @notice The rewards in `token` `resolver` may claim for `epoch` now (what `claimRewards`
    ///         pays for it; for a slashed resolver, what `sweepSlashedRewards` forfeits).
    function pendingRewards(IERC20 token, uint256 resolver, uint256 epoch)
        external
        view
        throughEscrow
        returns (uint256)
    {
        (, uint256 stake, uint256 joined, uint256 left,) = registry.rewardInfo(resolver);
        if (!_isMember(epoch, joined, left)) return 0;
        uint256 acc = rewardPerStake[token][epoch];
        uint256 debt = _debt(token, epoch, resolver);
        if (acc <= debt) return 0;
        return Math.mulDiv(stake, acc - debt - _unsettled(token, epoch, resolver), REWARD_PRECISION);
    }

    /// @dev Splits a held fee: over the stake signed by now, excluding the remaining
    ///      non-signers if `excluding`.
    function _release(bytes32 dealId, Held storage h, bool excluding) internal {
        Deal storage d = _deals[dealId];
        uint256 pool = h.pool;
        uint256 signedStake = h.signedStake;
        address submitter = h.submitter;
        uint256 words = excluding ? h.words : 0;
        delete held[dealId];
        _split(dealId, d.token, d.epoch, d.resolverFee, pool, signedStake, submitter, words);
    }

    /// @dev Word `w` of a calldata bitmap (zero-padded past its end).
    function _chunk(bytes calldata bitmap, uint256 w) internal pure returns (uint256 chunk) {
        uint256 len = bitmap.length;
        assembly ("memory-safe") {
            chunk := calldataload(add(bitmap.offset, shl(5, w)))
        }
        uint256 rest = len - 32 * w;
        if (rest < 32) chunk &= ~(type(uint256).max >> (8 * rest));
    }

    /// @dev Sum of the increments of exclusion entries `[from, to)` of (token, epoch) that name
    ///      `resolver` as a non-signer, and whether any entry may name it (its position's
    ///      missed bit). Unmarked, no entry names it and nothing is scanned.
    function _excluded(IERC20 token, uint256 epoch, uint256 resolver, uint256 from, uint256 to)
        internal
        view
        returns (uint256 sum, bool scanned)
    {
        if (from >= to) return (0, false);
        uint256 position = registry.positionOf(epoch, resolver);
        uint256 word = position >> 8;
        uint256 shift = 8 * (31 - ((position & 255) >> 3)) + (position & 7);
        if ((missedBits[token][epoch][word] >> shift) & 1 == 0) return (0, false);
        Exclusion[] storage log = _exclusions[token][epoch];
        for (uint256 k = from; k < to; ++k) {
            Exclusion storage e = log[k];
            if ((nonSignerBits[e.dealId][word] >> shift) & 1 == 1) sum += e.inc;
        }
        return (sum, true);
    }

    /// @dev The exclusions of `resolver` its claims did not account for yet.
    function _unsettled(IERC20 token, uint256 epoch, uint256 resolver)
        internal
        view
        returns (uint256 sum)
    {
        (sum,) = _excluded(
            token,
            epoch,
            resolver,
            exclusionCursor[token][epoch][resolver],
            _exclusions[token][epoch].length
        );
    }

    /// @dev `_unsettled`, and marks the scanned exclusions accounted for. A resolver no entry
    ///      names writes nothing: a later scan from its old cursor finds only new entries that
    ///      name it (its rewards up to now were settled through `rewardDebt`).
    function _settleExclusions(IERC20 token, uint256 epoch, uint256 resolver)
        internal
        returns (uint256 sum)
    {
        uint256 entries = _exclusions[token][epoch].length;
        if (entries == 0) return 0;
        bool scanned;
        (sum, scanned) =
            _excluded(token, epoch, resolver, exclusionCursor[token][epoch][resolver], entries);
        if (scanned) exclusionCursor[token][epoch][resolver] = entries;
    }

    /// @notice Number of exclusion entries of (token, epoch): fee splits that left members out.
    function exclusionCount(IERC20 token, uint256 epoch)
        external
        view
        throughEscrow
        returns (uint256)
    {
        return _exclusions[token][epoch].length;
    }

    function _debt(IERC20 token, uint256 epoch, uint256 resolver) internal view returns (uint256) {
        uint256 debt = rewardDebt[token][epoch][resolver];
        return debt == 0 ? 1 : debt;
    }

    function _isMember(uint256 epoch, uint256 joined, uint256 left) internal pure returns (bool) {
        return joined != 0 && joined <= epoch && (left == 0 || epoch < left);
    }

    /// @dev Settles `resolver`'s rewards over `epochs`: sets each debt to the accumulator and
    ///      returns `sum(floor(stake * (acc - debt) / P))`. What each floor drops is added to
    ///      `dustRemainder` (owed to no one; `flushSink` hands it to the sink).
    function _collect(
        IERC20 token,
        uint256 resolver,
        uint256 stake,
        uint256 joined,
        uint256 left,
        uint256[] calldata epochs
    ) internal returns (uint256 amount) {
        uint256 remainder;
        for (uint256 i; i < epochs.length; ++i) {
            uint256 epoch = epochs[i];
            if (!_isMember(epoch, joined, left)) continue;
            uint256 acc = rewardPerStake[token][epoch];
            uint256 debt = _debt(token, epoch, resolver);
            if (acc <= debt) continue;
            rewardDebt[token][epoch][resolver] = acc;
            uint256 owed = acc - debt - _settleExclusions(token, epoch, resolver);
            amount += Math.mulDiv(stake, owed, REWARD_PRECISION);
            remainder += mulmod(stake, owed, REWARD_PRECISION);
        }
        if (remainder > 0) dustRemainder[token] += remainder;
    }
}
