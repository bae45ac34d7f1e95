// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Ownable, Ownable2Step} from "@openzeppelin/contracts/access/Ownable2Step.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {Math} from "@openzeppelin/contracts/utils/math/Math.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";

import {Deal, IEscrowErrors, IEscrowEvents} from "./interfaces/IEscrow.sol";
import {IResolverRegistry} from "./interfaces/IResolverRegistry.sol";

/// @title EscrowStorage
/// @notice What the Escrow and EscrowFees share: constants, storage layout, the registry and the
///         fee split. Both inherit it and declare no storage of their own, so the layout is
///         identical by construction; EscrowFees runs only by DELEGATECALL from the Escrow.
abstract contract EscrowStorage is IEscrowErrors, IEscrowEvents, ReentrancyGuard, Ownable2Step {
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
    /// @notice How many of `_exclusions[token][epoch]` a resolver's claims already accounted for.
    mapping(IERC20 token => mapping(uint256 epoch => mapping(uint256 resolver => uint256))) public
        exclusionCursor;

    constructor(IResolverRegistry registry_, address owner_) Ownable(owner_) {
        if (address(registry_) == address(0)) revert ZeroAddress("registry");
        registry = registry_;
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
