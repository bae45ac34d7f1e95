// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";

import {Evidence, RegistryParameters} from "./interfaces/IResolverRegistry.sol";

import {ResolverRegistryStorage} from "./ResolverRegistryStorage.sol";

/// @title RegistrySlashing
/// @notice The ResolverRegistry's slashing (`slashEquivocation`, `slashEquivocationUpTo`), its
///         proceeds (`claim`, `flushSink`) and the owner's parameter settings. The registry
///         deploys it in its constructor and runs it by DELEGATECALL from its fallback, on the
///         registry's own storage and bonds: callers see one contract and one ABI. Split out
///         only so that the registry fits EIP-170's code-size limit. Calls made to this
///         contract directly revert (`NotThroughRegistry`).
contract RegistrySlashing is ResolverRegistryStorage {
    using SafeERC20 for IERC20;
    using SafeCast for uint256;

    /// @dev The registry that deployed this contract: the only storage its functions run on.
    address internal immutable _registry;

    constructor(RegistryParameters memory p) ResolverRegistryStorage(p) {
        _registry = msg.sender;
    }

    modifier throughRegistry() {
        if (address(this) != _registry) revert NotThroughRegistry();
        _;
    }

    /// @notice Slashes every resolver that signed both `a` and `b`: two aggregates over
    ///         different commitments for the same deal under the same verdict domain. Each is
    ///         verified against its own epoch. A resolver is slashed at most once (its whole
    ///         remaining bond); resolvers already slashed are skipped. The ones still in the
    ///         committee leave it through one new epoch. Proceeds are credited, not sent:
    ///         `min(bond * whistleblowerBps / 10000, whistleblowerCap())` per resolver to the
    ///         caller (nothing if the caller operates an equivocator or a slashed resolver),
    ///         the rest to `slashSink`. Permissionless.
    /// @dev Gas: the two evidence checks (a stored-key load, a membership read and a G1ADD per
    ///      listed signer, two pairings) plus about 33k per slashed resolver (about 36.4k
    ///      with the evidence checks of the largest committee spread over it); measured in
    ///      test/EscrowGas.t.sol (`slashEquivocation-<n>-of-<n>`) and
    ///      test/EconomicsSoundness.t.sol. A coalition too large for one transaction is slashed
    ///      across several with `slashEquivocationUpTo`.
    /// @param domainSeparator EIP-712 domain separator of the escrow the verdicts were signed for.
    /// @return slashed Number of resolvers slashed by this call.
    function slashEquivocation(bytes32 domainSeparator, Evidence calldata a, Evidence calldata b)
        external
        throughRegistry
        nonReentrant
        returns (uint256 slashed)
    {
        return _slashEquivocation(domainSeparator, a, b, type(uint256).max);
    }

    /// @notice `slashEquivocation`, slashing at most `maxSlashed` resolvers not yet slashed (the
    ///         lowest indices first). Calling it again with the same evidence continues where
    ///         the last call stopped, so any coalition is slashed in transactions of bounded
    ///         gas. Reverts `NoEquivocator` once every equivocator of the pair is slashed.
    function slashEquivocationUpTo(
        bytes32 domainSeparator,
        Evidence calldata a,
        Evidence calldata b,
        uint256 maxSlashed
    ) external throughRegistry nonReentrant returns (uint256 slashed) {
        if (maxSlashed == 0) revert NoEquivocator();
        return _slashEquivocation(domainSeparator, a, b, maxSlashed);
    }

    /// @notice Sends the slash sink's credited proceeds to it. Permissionless, so proceeds
    ///         leave the registry even when the sink is a burn address no one can call from.
    /// @return amount The amount sent.
    function flushSink() external throughRegistry nonReentrant returns (uint256 amount) {
        address sink = _slashSink;
        amount = claimable[sink];
        if (amount == 0) revert NothingToClaim(sink);
        claimable[sink] = 0;
        emit Claimed(sink, sink, amount);
        bondToken.safeTransfer(sink, amount);
    }

    /// @notice Sends the caller's credited slashing proceeds to `to`.
    /// @return amount The amount sent.
    function claim(address to) external throughRegistry nonReentrant returns (uint256 amount) {
        if (to == address(0)) revert ZeroAddress();
        amount = claimable[msg.sender];
        if (amount == 0) revert NothingToClaim(msg.sender);
        claimable[msg.sender] = 0;
        emit Claimed(msg.sender, to, amount);
        bondToken.safeTransfer(to, amount);
    }

    /// @notice Schedules the smallest resolver fee escrows accept for deals in `token`
    ///         (checked at funding only). Takes effect `parameterDelay()` from now.
    function setMinResolverFee(IERC20 token, uint256 minimum) external throughRegistry onlyOwner {
        uint256 at = _schedule(_minResolverFee[token], minimum);
        emit MinResolverFeeSet(token, minimum, at);
    }

    /// @notice Schedules the most of a resolver fee in `token` credited to `resolve`'s
    ///         submitter. Takes effect `parameterDelay()` from now; a dispute pins the value in
    ///         force when it is challenged.
    function setGasRefundCap(IERC20 token, uint256 cap) external throughRegistry onlyOwner {
        uint256 at = _schedule(_gasRefundCap[token], cap);
        emit GasRefundCapSet(token, cap, at);
    }

    /// @notice Schedules the shortest resolve window escrows accept (checked at funding only),
    ///         within `[min(MIN_RESOLVE_WINDOW_FLOOR, maxResolveWindow), maxResolveWindow]`
    ///         and long enough for the latest commit-reveal setting. Takes effect
    ///         `parameterDelay()` from now.
    function setMinResolveWindow(uint256 window) external throughRegistry onlyOwner {
        uint256 floor = _min(MIN_RESOLVE_WINDOW_FLOOR, _maxResolveWindow);
        if (window < floor || window > _maxResolveWindow) {
            revert ParameterOutOfRange("minResolveWindow", window, floor, _maxResolveWindow);
        }
        uint256 latest = _latestCommitReveal();
        if (!_commitRevealFits(latest, window)) {
            uint256 needed = (2 * COMMIT_REVEAL_WINDOWS * latest + 999) / 1000;
            revert ParameterOutOfRange("minResolveWindow", window, needed, _maxResolveWindow);
        }
        uint256 at = _schedule(_minResolveWindow, window);
        emit MinResolveWindowSet(window, at);
    }

    /// @notice Schedules the most a whistleblower is credited per resolver it slashes (in bond
    ///         tokens; the share is `min(bond * whistleblowerBps / 10000, cap)`). Takes effect
    ///         `parameterDelay()` from now.
    function setWhistleblowerCap(uint256 cap) external throughRegistry onlyOwner {
        uint256 at = _schedule(_whistleblowerCap, cap);
        emit WhistleblowerCapSet(cap, at);
    }

    /// @notice Sets the commit-reveal setting of the epochs that start from now on (0 = off,
    ///         otherwise the commit phase's timeout in milliseconds); the current epoch, and so
    ///         every open dispute, keeps its pinned value (`commitRevealMsAt`). Bounded:
    ///         `COMMIT_REVEAL_WINDOWS` phases must fit in half of both the minimum resolve
    ///         window in force and the one scheduled. Only stored here; the nodes implement it.
    function setCommitRevealMs(uint32 commitPhaseMs) external throughRegistry onlyOwner {
        uint256 window = _smallestMinResolveWindow();
        if (!_commitRevealFits(commitPhaseMs, window)) {
            revert ParameterOutOfRange(
                "commitRevealMs", commitPhaseMs, 0, window * 1000 / (2 * COMMIT_REVEAL_WINDOWS)
            );
        }
        uint256 from = _epochs.length;
        uint256 n = _commitReveal.length;
        if (n > 0 && _commitReveal[n - 1].fromEpoch == from) {
            _commitReveal[n - 1].commitPhaseMs = commitPhaseMs;
        } else {
            _commitReveal.push(
                CommitRevealCheckpoint({fromEpoch: from.toUint64(), commitPhaseMs: commitPhaseMs})
            );
        }
        emit CommitRevealSet(commitPhaseMs, from);
    }

    /// @notice The pending change of a timelocked parameter (`which`: "minResolverFee" and
    ///         "gasRefundCap" of `token`, "minResolveWindow", "whistleblowerCap"): the value
    ///         and when it takes effect (0 if none is pending).
    function scheduled(string calldata which, IERC20 token)
        external
        view
        throughRegistry
        returns (uint256 next, uint256 effectiveAt)
    {
        bytes32 k = keccak256(bytes(which));
        Timelocked storage p;
        if (k == keccak256("minResolverFee")) p = _minResolverFee[token];
        else if (k == keccak256("gasRefundCap")) p = _gasRefundCap[token];
        else if (k == keccak256("minResolveWindow")) p = _minResolveWindow;
        else if (k == keccak256("whistleblowerCap")) p = _whistleblowerCap;
        else revert InvalidParameters(which);
        if (p.effectiveAt == 0 || block.timestamp >= p.effectiveAt) return (0, 0);
        return (p.next, p.effectiveAt);
    }
}
