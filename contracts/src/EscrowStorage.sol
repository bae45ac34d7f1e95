// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Ownable, Ownable2Step} from "@openzeppelin/contracts/access/Ownable2Step.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {Math} from "@openzeppelin/contracts/utils/math/Math.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";

import {Deal, IEscrowErrors, IEscrowEvents} from "./interfaces/IEscrow.sol";
import {IResolverRegistry} from "./interfaces/IResolverRegistry.sol";
import {VerdictCommitment, VerdictHash} from "./libraries/VerdictHash.sol";

/// @title EscrowStorage
/// @notice What the Escrow, the Attestor and EscrowFees share: constants, storage layout, the
///         registry, the checks of a certificate's commitment and quorum, and the accrual and
///         split of its fee. The Escrow and EscrowFees declare no storage of their own, so their
///         layouts are identical by construction; the Attestor appends one mapping after this
///         layout (check-layout.sh pins both). EscrowFees runs only by DELEGATECALL from the
///         contract that deployed it.
abstract contract EscrowStorage is IEscrowErrors, IEscrowEvents, ReentrancyGuard, Ownable2Step {
    using SafeERC20 for IERC20;
    using SafeCast for uint256;

    /// @notice EIP-712 domain name of verdicts.
    string public constant NAME = "resolvd";
    /// @notice EIP-712 domain version of verdicts.
    string public constant VERSION = "1";

    /// @notice Smallest challenge window: `deliveredAt < challenge < deliveredAt + window`
    ///         needs at least two seconds.
    uint256 public constant MIN_CHALLENGE_WINDOW = 2;

    /// @notice After a certificate with non-signers, how long anyone may prove further signers
    ///         of the certified digest (`includeSigners`). The resolver fee is held until then
    ///         (or until every member is in), then split (`distributeFee`).
    uint256 public constant INCLUSION_WINDOW = 1 hours;

    /// @notice Fixed-point scale of `rewardPerStake`.
    uint256 public constant REWARD_PRECISION = 1e30;
    uint256 internal constant BPS = 10_000;

    /// @notice The committee registry certificates are verified against.
    IResolverRegistry public immutable registry;

    mapping(bytes32 dealId => Deal) internal _deals;
    /// @notice Settled funds an account may `claim`, per token.
    mapping(address account => mapping(IERC20 token => uint256)) public claimable;
    /// @notice Everything the escrow owes in `token`: live deals' amounts and locked DA bonds
    ///         plus unclaimed credits.
    mapping(IERC20 token => uint256) public liabilities;
    /// @notice Replay backends (id, exact version) deals may be funded against.
    mapping(bytes32 backendId => mapping(bytes32 versionHash => bool)) public backendAllowed;
    /// @notice Fee rewards per unit of signing stake of `epoch`'s certificates in `token`,
    ///         scaled by `REWARD_PRECISION`, plus 1 once the first fee-paying dispute of the
    ///         epoch is challenged (0: none yet). Only ever grows.
    mapping(IERC20 token => mapping(uint256 epoch => uint256)) public rewardPerStake;
    /// @notice The part of `rewardPerStake[token][epoch]` a resolver is not (or no longer)
    ///         owed: what it claimed up to, plus every increment of a certificate it did not
    ///         sign. 0 means the base 1.
    mapping(IERC20 token => mapping(uint256 epoch => mapping(uint256 resolver => uint256))) public
        rewardDebt;
    /// @notice The gas refund a disputed deal's `resolve` credits its submitter:
    ///         `min(resolverFee, registry.gasRefundCap(token))`, pinned at `challenge`.
    mapping(bytes32 dealId => uint256) public pinnedGasRefund;
    /// @notice Rounding remainders of reward accruals and claims in `token` not yet handed to the
    ///         slash sink, in units of 1 / REWARD_PRECISION wei: owed to no one (`flushSink`
    ///         moves the whole wei to the sink).
    mapping(IERC20 token => uint256) public dustRemainder;

    /// @notice A certified dispute's fee, held while further signers may be proven.
    struct Held {
        /// @dev The certified digest.
        bytes32 digest;
        /// @dev The signers' part of the fee (fee minus the submitter's capped refund).
        uint128 pool;
        /// @dev Stake of the certificate's signers plus every signer included since.
        uint128 signedStake;
        address submitter;
        /// @dev End of the inclusion window (0: nothing held).
        uint64 closesAt;
        /// @dev Number of 32-byte words of the non-signer bitmap.
        uint8 words;
    }

    /// @dev One certificate of an (token, epoch) whose fee was split while some members were
    ///      still non-signers.
    struct Exclusion {
        uint256 inc;
        bytes32 dealId;
    }

    /// @notice Fees of certified disputes held for their inclusion window.
    mapping(bytes32 dealId => Held) public held;
    /// @notice A certified dispute's non-signers: word `w` is bytes `[32w, 32w + 32)` of the
    ///         position bitmap (bit `p & 7` of byte `p >> 3` = the member at position `p`).
    mapping(bytes32 dealId => mapping(uint256 word => uint256)) public nonSignerBits;
    /// @notice Positions of `epoch` that were a non-signer of at least one fee split in `token`
    ///         (same layout): only they pay for the exclusion scan when they claim.
    mapping(IERC20 token => mapping(uint256 epoch => mapping(uint256 word => uint256))) public
        missedBits;
    mapping(IERC20 token => mapping(uint256 epoch => Exclusion[])) internal _exclusions;
    /// @notice How many of `_exclusions[token][epoch]` a resolver's claims (and
    ///         `settleExclusions`) already accounted for.
    mapping(IERC20 token => mapping(uint256 epoch => mapping(uint256 resolver => uint256))) public
        exclusionCursor;

    constructor(IResolverRegistry registry_, address owner_) Ownable(owner_) {
        if (address(registry_) == address(0)) revert ZeroAddress("registry");
        registry = registry_;
    }

    /// @dev Members of the pinned epoch slashed since it started do not count: the certificate
    ///      must also meet the threshold among the epoch's unslashed members by unslashed
    ///      signers. (Their stake stays in the fee split: a slashed signer's share is swept.)
    function _checkUnslashedQuorum(
        uint256 epoch,
        uint256 signedStake,
        uint256 totalStake,
        bytes memory nonSigners
    ) internal view {
        (uint256 slashedTotal, uint256 slashedSigned) = registry.slashedStake(epoch, nonSigners);
        if (slashedTotal == 0) return;
        uint256 signed = signedStake - slashedSigned;
        uint256 total = totalStake - slashedTotal;
        if (!registry.meetsThreshold(signed, total)) revert SlashedSignersDecide(signed, total);
    }

    /// @dev One storage read on the success path; on a mismatch, names the differing field.
    function _checkCommitment(Deal storage d, VerdictCommitment calldata c) internal view {
        bytes32 fields = VerdictHash.fieldsHash(
            c.specHash,
            c.deliveryHash,
            c.prestateAnchorHash,
            c.prestateRoot,
            c.backendId,
            c.backendVersionHash
        );
        if (fields == d.verdictFieldsHash) return;
        bytes32 id = c.dealId;
        if (c.specHash != d.specHash) revert CommitmentMismatch(id, "specHash");
        if (c.deliveryHash != d.deliveryHash) revert CommitmentMismatch(id, "deliveryHash");
        if (c.prestateAnchorHash != d.prestateAnchorHash) {
            revert CommitmentMismatch(id, "prestateAnchorHash");
        }
        if (c.prestateRoot != d.prestateRoot) revert CommitmentMismatch(id, "prestateRoot");
        if (c.backendId != d.backendId) revert CommitmentMismatch(id, "backendId");
        if (c.backendVersionHash != d.backendVersionHash) {
            revert CommitmentMismatch(id, "backendVersionHash");
        }
        revert CommitmentMismatch(id, "fields");
    }

    /// @dev `SHA-256(prefix || bytes)` must equal `expected` (the content-hash rule).
    function _checkContent(string memory prefix, bytes calldata content, bytes32 expected)
        internal
        pure
    {
        bytes32 computed = sha256(abi.encodePacked(prefix, content));
        if (computed != expected) revert ContentHashMismatch(expected, computed);
    }

    function _pull(IERC20 token, address from, uint256 amount) internal {
        uint256 before = token.balanceOf(address(this));
        token.safeTransferFrom(from, address(this), amount);
        uint256 received = token.balanceOf(address(this)) - before;
        if (received != amount) revert TransferMismatch(amount, received);
    }

    /// @dev A certified dispute's resolver fee: `refund = min(fee, gasRefundCap)` to the caller
    ///      and `pool = fee - refund` to the signers. Without non-signers (or without a pool)
    ///      it is split now; otherwise it is held for the inclusion window, with the certified
    ///      digest and the non-signer bitmap.
    function _accrueFee(
        bytes32 dealId,
        Deal storage d,
        bytes32 digest,
        uint256 signedStake,
        bytes memory nonSigners
    ) internal {
        uint256 fee = d.resolverFee;
        if (fee == 0) return;
        IERC20 token = d.token;
        uint256 pool = fee - pinnedGasRefund[dealId];
        uint256 words = pool == 0 ? 0 : _storeNonSigners(dealId, nonSigners);
        if (words == 0) {
            _split(dealId, token, d.epoch, fee, pool, signedStake, msg.sender, 0);
            return;
        }
        uint256 closesAt = block.timestamp + INCLUSION_WINDOW;
        held[dealId] = Held({
            digest: digest,
            pool: pool.toUint128(),
            signedStake: signedStake.toUint128(),
            submitter: msg.sender,
            closesAt: closesAt.toUint64(),
            words: words.toUint8()
        });
        emit FeeHeld(dealId, msg.sender, fee, closesAt);
    }

    /// @dev Stores the non-empty words of a non-signer bitmap; returns its word count, or 0 if
    ///      no bit is set.
    function _storeNonSigners(bytes32 dealId, bytes memory bitmap) internal returns (uint256) {
        uint256 len = bitmap.length;
        uint256 n = (len + 31) / 32;
        bool any;
        for (uint256 w; w < n; ++w) {
            uint256 chunk;
            assembly ("memory-safe") {
                chunk := mload(add(add(bitmap, 0x20), shl(5, w)))
            }
            uint256 rest = len - 32 * w;
            if (rest < 32) chunk &= ~(type(uint256).max >> (8 * rest));
            if (chunk == 0) continue;
            nonSignerBits[dealId][w] = chunk;
            any = true;
        }
        return any ? n : 0;
    }

    /// @dev Sends the caller's credited funds in `token` to `to` (`claim`).
    function _claim(IERC20 token, address to) internal returns (uint256 amount) {
        if (to == address(0)) revert ZeroAddress("to");
        amount = claimable[msg.sender][token];
        if (amount == 0) revert NothingToClaim(msg.sender, token);
        claimable[msg.sender][token] = 0;
        liabilities[token] -= amount;
        emit Claimed(msg.sender, token, to, amount);
        token.safeTransfer(to, amount);
    }

    /// @dev `pool` over `signedStake` as `inc = pool * P / S` per unit of stake, added to the
    ///      epoch's accumulator; if `words` > 0 the split gets one exclusion entry naming the
    ///      non-signers (the first `words` words of the dispute's bitmap). The signers are owed at most
    ///      `ceil(inc * S / P) <= pool`; the rest of the fee goes to `submitter`.
    function _split(
        bytes32 dealId,
        IERC20 token,
        uint256 epoch,
        uint256 fee,
        uint256 pool,
        uint256 signedStake,
        address submitter,
        uint256 words
    ) internal {
        uint256 toSigners;
        uint256 acc;
        uint256 inc = pool * REWARD_PRECISION / signedStake;
        if (inc != 0) {
            acc = rewardPerStake[token][epoch];
            if (acc == 0) acc = 1;
            acc += inc;
            rewardPerStake[token][epoch] = acc;
            if (words != 0) _exclude(token, epoch, dealId, inc, words);
            toSigners = Math.mulDiv(inc, signedStake, REWARD_PRECISION, Math.Rounding.Ceil);
            // The signers are owed inc * S / P exactly (as a fraction of a wei); `toSigners`
            // rounds it up: the fraction above is owed to no one.
            uint256 fraction = toSigners * REWARD_PRECISION - inc * signedStake;
            if (fraction > 0) dustRemainder[token] += fraction;
        }
        emit FeeDistributed(dealId, token, epoch, submitter, fee - toSigners, toSigners, acc);
        if (fee > toSigners) _credit(submitter, token, fee - toSigners);
    }

    /// @dev The non-signers of a split are not owed its increment: one exclusion entry per
    ///      split (not per non-signer) and their positions marked in `missedBits`; claims of the
    ///      marked positions subtract the entries that name them. Virtual only so that
    ///      test/mutants can break it.
    function _exclude(IERC20 token, uint256 epoch, bytes32 dealId, uint256 inc, uint256 words)
        internal
        virtual
    {
        _exclusions[token][epoch].push(Exclusion({inc: inc, dealId: dealId}));
        for (uint256 w; w < words; ++w) {
            uint256 bits = nonSignerBits[dealId][w];
            if (bits == 0) continue;
            uint256 missed = missedBits[token][epoch][w];
            if (missed | bits != missed) missedBits[token][epoch][w] = missed | bits;
        }
    }

    function _credit(address account, IERC20 token, uint256 amount) internal virtual {
        claimable[account][token] += amount;
        emit Credited(account, token, amount);
    }
}
