// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";

import {VerdictContract} from "./VerdictContract.sol";
import {IERC3009} from "./interfaces/IERC3009.sol";
import {Authorization, Deal, DealState, Settlement, Terms} from "./interfaces/IEscrow.sol";
import {IResolverRegistry} from "./interfaces/IResolverRegistry.sol";
import {Outcome, VerdictCommitment, VerdictHash} from "./libraries/VerdictHash.sol";

/// @title Escrow
/// @notice Seed 004's deal state machine (Held -> Delivered -> Disputed -> Resolved), settled by
///         a BLS quorum certificate of the ResolverRegistry's committee: Reproduced releases to
///         the seller, Failed refunds the buyer. No certificate by the resolve deadline refunds
///         the buyer and forfeits the seller's data-availability bond to them.
/// @dev Terms are validated at funding so every funded deal can reach every terminal state
///      (windows non-zero, a challenge window of at least two seconds, deliver + challenge
///      within the registry's warm-up, resolve within its maximum, a committee with the minimum
///      stake). Payouts are pull payments: a settlement only credits the parties (`claimable`), and
///      each withdraws with `claim`, so no recipient (a token hook, a reverting contract, a
///      blocklisted address) can make `resolve` or any other settlement revert. The owner only
///      curates the backend allow-list, which is checked at funding, and may sweep tokens held
///      beyond `liabilities`; it cannot touch funds of deals or credits. Every value-moving
///      function is non-reentrant and follows checks-effects-interactions.
///      Economics (contracts/ECONOMICS.md): the buyer posts the deal's resolver fee and challenge
///      bond at `challenge`. A certificate accrues the fee, less a capped gas refund to the
///      submitter, to a per-(token, epoch) reward-per-stake accumulator. A certificate with
///      non-signers holds the fee for `INCLUSION_WINDOW`, in which anyone may prove further
///      signers (`includeSigners`); the split then logs one exclusion entry and marks the
///      remaining non-signers' positions, so `resolve` is O(1) + O(non-signer bitmap words),
///      and each resolver's operator `claimRewards` in O(epochs claimed) (plus, for a resolver
///      that was left out, the entries since its last claim, which `settleExclusions` settles
///      in bounded calls). A timeout returns fee and bond to the buyer.
///      A slashed resolver's unclaimed rewards follow its slashed bond (`sweepSlashedRewards`).
contract Escrow is VerdictContract {
    using SafeERC20 for IERC20;
    using SafeCast for uint256;

    constructor(IResolverRegistry registry_, address owner_) VerdictContract(registry_, owner_) {}

    // ------------------------------------------------------------------ funding

    /// @notice The id of a deal `buyer` funds with `terms` (also its EIP-3009 nonce).
    function dealIdOf(address buyer, Terms calldata terms) public view returns (bytes32) {
        return keccak256(abi.encode(block.chainid, address(this), buyer, terms));
    }

    /// @notice Funds a deal from the caller's approved `terms.amount` of `terms.token`.
    /// @param spec Canonical SpecV1 bytes to publish (hash-checked), or empty if published elsewhere.
    /// @param prestateAnchor Canonical PrestateAnchorV1 bytes to publish, or empty.
    function fund(Terms calldata terms, bytes calldata spec, bytes calldata prestateAnchor)
        external
        nonReentrant
        returns (bytes32 dealId)
    {
        dealId = _open(msg.sender, terms, spec, prestateAnchor);
        liabilities[terms.token] += terms.amount;
        _pull(terms.token, msg.sender, terms.amount);
    }

    /// @notice Funds a deal for `auth.buyer` with an EIP-3009 `receiveWithAuthorization` whose
    ///         nonce is the deal id, so the signature commits to every term (including the
    ///         seller bond) and a relayer can change none of them. The spec and anchor bytes
    ///         must be published here: their hashes are terms, so the buyer's signature fixes
    ///         them, and a relayer can neither alter nor withhold them.
    function fundWithAuthorization(
        Terms calldata terms,
        bytes calldata spec,
        bytes calldata prestateAnchor,
        Authorization calldata auth
    ) external nonReentrant returns (bytes32 dealId) {
        if (spec.length == 0 || prestateAnchor.length == 0) {
            revert PublicationRequired();
        }
        dealId = _open(auth.buyer, terms, spec, prestateAnchor);
        liabilities[terms.token] += terms.amount;
        _receive(terms, dealId, auth);
    }

    // ------------------------------------------------------------------ phases

    /// @notice The seller delivers: commits the delivery hash (and publishes the bytes if given)
    ///         and locks the data-availability bond the buyer required plus a dispute deposit
    ///         equal to the deal's resolver fee (one `transferFrom`; approve their sum). The
    ///         deposit returns to the seller unless a certificate finds the delivery Failed;
    ///         then it reimburses the buyer's resolver fee (the loser pays).
    function deliver(bytes32 dealId, bytes32 deliveryHash, bytes calldata delivery)
        external
        nonReentrant
    {
        Deal storage d = _in(dealId, DealState.Held);
        if (msg.sender != d.seller) revert NotSeller(dealId, msg.sender);
        if (block.timestamp <= d.fundedAt) revert TooEarly(dealId, uint256(d.fundedAt) + 1);
        if (block.timestamp > d.deliverDeadline) revert TooLate(dealId, d.deliverDeadline);
        if (delivery.length > 0) {
            _checkContent("reckn/v1/delivery", delivery, deliveryHash);
            emit DeliveryPublished(dealId, delivery);
        }
        d.state = DealState.Delivered;
        d.deliveryHash = deliveryHash;
        d.verdictFieldsHash = VerdictHash.fieldsHash(
            d.specHash,
            deliveryHash,
            d.prestateAnchorHash,
            d.prestateRoot,
            d.backendId,
            d.backendVersionHash
        );
        d.deliveredAt = block.timestamp.toUint64();
        d.challengeDeadline = (block.timestamp + d.challengeWindow).toUint64();
        emit Delivered(dealId, deliveryHash, block.timestamp, d.challengeDeadline, d.sellerBond);
        // The DA bond and the seller's dispute deposit (the resolver fee, paid to the buyer
        // only if a certificate finds the delivery Failed): one transfer.
        uint256 locked = uint256(d.sellerBond) + d.resolverFee;
        if (locked > 0) {
            liabilities[d.token] += locked;
            _pull(d.token, msg.sender, locked);
        }
    }

    /// @notice The buyer accepts a delivery early: the seller is paid now.
    function accept(bytes32 dealId) external nonReentrant {
        Deal storage d = _in(dealId, DealState.Delivered);
        if (msg.sender != d.buyer) revert NotBuyer(dealId, msg.sender);
        _settle(dealId, d, Settlement.Released);
    }

    /// @notice Releases an unchallenged delivery to the seller once the challenge window closed.
    function release(bytes32 dealId) external nonReentrant {
        Deal storage d = _in(dealId, DealState.Delivered);
        if (block.timestamp < d.challengeDeadline) revert TooEarly(dealId, d.challengeDeadline);
        _settle(dealId, d, Settlement.Released);
    }

    /// @notice Refunds the buyer of a deal that was not delivered by its deadline.
    function reclaim(bytes32 dealId) external nonReentrant {
        Deal storage d = _in(dealId, DealState.Held);
        if (block.timestamp <= d.deliverDeadline) {
            revert TooEarly(dealId, uint256(d.deliverDeadline) + 1);
        }
        _settle(dealId, d, Settlement.Reclaimed);
    }

    /// @notice The buyer disputes a delivery: pins the committee the deal was funded against
    ///         (`registry.committeeFor(epoch at funding)`: the current epoch, or, if stake was
    ///         activated since the funding, the epoch just before that activation) and opens
    ///         the resolve window. Emits everything a resolver node needs. Every member of that
    ///         epoch was a member when the deal was funded, so stake activated later (also in
    ///         the challenge's block) never judges it. If the committee holds less than
    ///         the registry's minimum stake no verdict is possible: the deal is cancelled
    ///         instead (buyer refunded, DA bond returned, nobody marked) and no fee or bond is
    ///         taken. Otherwise the buyer pays the deal's resolver fee plus its challenge bond
    ///         (one `transferFrom`; approve their sum first). The dispute pins the gas refund
    ///         `min(fee, registry.gasRefundCap(token))` now (`pinnedGasRefund`), so no later
    ///         owner change moves its fee. The first fee-paying challenge of an epoch and token
    ///         also initialises that accumulator, so that `resolve` never pays for a fresh
    ///         storage slot there.
    function challenge(bytes32 dealId) external nonReentrant {
        Deal storage d = _in(dealId, DealState.Delivered);
        if (msg.sender != d.buyer) revert NotBuyer(dealId, msg.sender);
        if (block.timestamp >= d.challengeDeadline) revert TooLate(dealId, d.challengeDeadline);
        if (block.timestamp <= d.deliveredAt) revert TooEarly(dealId, uint256(d.deliveredAt) + 1);
        (uint256 epoch, uint256 committeeStake) = registry.committeeFor(d.epoch);
        uint256 minimum = registry.minimumCommitteeStake();
        if (committeeStake < minimum) {
            emit CommitteeUnavailable(dealId, epoch, committeeStake, minimum);
            _settle(dealId, d, Settlement.Cancelled);
            return;
        }
        d.state = DealState.Disputed;
        d.epoch = epoch.toUint64();
        d.challengedAt = block.timestamp.toUint64();
        d.resolveDeadline = (block.timestamp + d.resolveWindow).toUint64();
        emit Disputed(
            dealId,
            d.specHash,
            d.deliveryHash,
            d.prestateAnchorHash,
            d.prestateRoot,
            d.backendId,
            d.backendVersionHash,
            epoch,
            block.timestamp,
            d.resolveDeadline
        );
        uint256 fee = d.resolverFee;
        uint256 bond = d.challengeBond;
        if (fee == 0 && bond == 0) return;
        IERC20 token = d.token;
        if (fee > 0) {
            if (rewardPerStake[token][epoch] == 0) rewardPerStake[token][epoch] = 1;
            uint256 refund = registry.gasRefundCap(token);
            if (refund > fee) refund = fee;
            if (refund > 0) pinnedGasRefund[dealId] = refund;
        }
        emit ChallengeFunded(dealId, fee, bond);
        liabilities[token] += fee + bond;
        _pull(token, msg.sender, fee + bond);
    }

    /// @notice Settles a dispute with a quorum certificate over `commitment`: every field must
    ///         match the deal, and the committee of the deal's pinned epoch must have signed it.
    ///         Reproduced releases to the seller, Failed refunds the buyer; the DA bond returns
    ///         to the seller either way; the challenge bond goes to the seller on Reproduced and
    ///         back to the buyer on Failed; the seller's dispute deposit returns to the seller
    ///         on Reproduced and reimburses the buyer's fee on Failed. The resolver fee is
    ///         split: the gas refund pinned at `challenge` plus the split's rounding remainder
    ///         is credited to the caller, the rest accrues to the signers pro rata to stake
    ///         (`claimRewards`). With non-signers, the split waits for the inclusion window
    ///         (`includeSigners`, `distributeFee`). Signers slashed since the epoch started do
    ///         not count toward the quorum (`SlashedSignersDecide`). Callable by anyone, once,
    ///         until the resolve deadline.
    /// @param nonSigners Position bitmap of the non-signers (`registry.verifyCertificate`).
    function resolve(
        VerdictCommitment calldata commitment,
        bytes calldata nonSigners,
        bytes calldata aggregateSignature
    ) external nonReentrant {
        Deal storage d = _in(commitment.dealId, DealState.Disputed);
        _checkResolveDeadline(commitment.dealId, d);
        _resolve(d, commitment, nonSigners, aggregateSignature);
    }

    /// @notice `resolve` with the non-signers as registry indices (strictly ascending), turned
    ///         into the position bitmap by `registry.signerBitmap` (a binary search each).
    function resolve(
        VerdictCommitment calldata commitment,
        uint256[] calldata nonSigners,
        bytes calldata aggregateSignature
    ) external nonReentrant {
        Deal storage d = _in(commitment.dealId, DealState.Disputed);
        _checkResolveDeadline(commitment.dealId, d);
        _checkCommitment(d, commitment);
        _resolve(d, commitment, registry.signerBitmap(d.epoch, nonSigners), aggregateSignature);
    }

    /// @notice After the resolve deadline without a certificate: refunds the buyer, forfeits the
    ///         seller's data-availability bond to them and records evidence withheld. The
    ///         resolver fee and the challenge bond return to the buyer.
    function timeoutRefund(bytes32 dealId) external nonReentrant {
        Deal storage d = _in(dealId, DealState.Disputed);
        if (block.timestamp <= d.resolveDeadline) {
            revert TooEarly(dealId, uint256(d.resolveDeadline) + 1);
        }
        emit ReputationEvidence(d.seller, false, dealId, bytes32(0), d.backendId);
        _settle(dealId, d, Settlement.TimedOut);
    }

    /// @notice Withdraws the caller's settled funds in `token` to `to` (the caller itself, or
    ///         another address if the caller cannot receive the token).
    /// @return amount The amount sent.
    function claim(IERC20 token, address to) external nonReentrant returns (uint256 amount) {
        return _claim(token, to);
    }

    // ------------------------------------------------------------------ admin

    /// @notice Allows or disallows funding deals against a replay backend version. Funded deals
    ///         keep the backend they pinned.
    function setBackend(bytes32 backendId, bytes32 versionHash, bool allowed) external onlyOwner {
        backendAllowed[backendId][versionHash] = allowed;
        emit BackendAllowed(backendId, versionHash, allowed);
    }

    // ------------------------------------------------------------------ internals

    function _open(
        address buyer,
        Terms calldata t,
        bytes calldata spec,
        bytes calldata prestateAnchor
    ) internal returns (bytes32 dealId) {
        if (buyer == address(0)) revert ZeroAddress("buyer");
        if (t.seller == address(0)) revert ZeroAddress("seller");
        if (address(t.token) == address(0)) revert ZeroAddress("token");
        if (t.amount == 0) revert ZeroAmount();
        if (t.deliverWindow == 0) revert ZeroWindow("deliver");
        if (t.challengeWindow == 0) revert ZeroWindow("challenge");
        // A challenge must land in a later block than the delivery and before the deadline.
        if (t.challengeWindow < MIN_CHALLENGE_WINDOW) {
            revert WindowTooShort("challenge", MIN_CHALLENGE_WINDOW);
        }
        if (t.resolveWindow == 0) revert ZeroWindow("resolve");
        uint256 epoch = _checkAgainstRegistry(t);
        uint256 minFee = registry.minResolverFee(t.token);
        if (t.resolverFee < minFee) revert FeeBelowMinimum(t.token, t.resolverFee, minFee);
        if (!backendAllowed[t.backendId][t.backendVersionHash]) {
            revert BackendNotAllowed(t.backendId, t.backendVersionHash);
        }
        dealId = dealIdOf(buyer, t);
        Deal storage d = _deals[dealId];
        if (d.state != DealState.None) revert DealExists(dealId);
        if (spec.length > 0 || prestateAnchor.length > 0) {
            _checkContent("reckn/v1/spec", spec, t.specHash);
            _checkContent("reckn/v1/prestate-anchor", prestateAnchor, t.prestateAnchorHash);
            emit SpecPublished(dealId, spec, prestateAnchor);
        }
        d.buyer = buyer;
        d.state = DealState.Held;
        // The committee the deal is funded against; `challenge` pins it (`committeeFor`).
        d.epoch = epoch.toUint64();
        d.seller = t.seller;
        d.fundedAt = block.timestamp.toUint64();
        d.token = t.token;
        d.deliverDeadline = (block.timestamp + t.deliverWindow).toUint64();
        d.challengeWindow = t.challengeWindow;
        d.resolveWindow = t.resolveWindow;
        d.amount = t.amount.toUint128();
        d.sellerBond = t.sellerBond.toUint128();
        d.resolverFee = t.resolverFee.toUint128();
        d.challengeBond = t.challengeBond.toUint128();
        d.specHash = t.specHash;
        d.prestateAnchorHash = t.prestateAnchorHash;
        d.prestateRoot = t.prestateRoot;
        d.backendId = t.backendId;
        d.backendVersionHash = t.backendVersionHash;
        emit DealFunded(dealId, buyer, t.seller, t, block.timestamp, d.deliverDeadline);
    }

    /// @dev Terms the registry bounds: the resolve window (at least its minimum, for
    ///      confirmations, commit-reveal and a submission; at most its maximum), the span from funding to the last
    ///      possible challenge (within the warm-up of new stake, so only stake registered
    ///      before funding can decide the deal), and a committee with at least the minimum stake.
    ///      Returns the current epoch: the committee the deal is funded against.
    function _checkAgainstRegistry(Terms calldata t) internal view returns (uint256 epoch) {
        uint256 maxResolve = registry.maxResolveWindow();
        if (t.resolveWindow > maxResolve) revert ResolveWindowTooLong(t.resolveWindow, maxResolve);
        uint256 minResolve = registry.minResolveWindow();
        if (t.resolveWindow < minResolve) revert WindowTooShort("resolve", minResolve);
        uint256 span = uint256(t.deliverWindow) + t.challengeWindow;
        uint256 warmUp = registry.activationDelay();
        if (span > warmUp) revert WindowsExceedActivationDelay(span, warmUp);
        uint256 committeeStake;
        (epoch, committeeStake) = registry.currentCommittee();
        uint256 minimum = registry.minimumCommitteeStake();
        if (committeeStake < minimum) revert CommitteeTooSmall(epoch, committeeStake, minimum);
    }

    /// @dev A certificate counts only until the resolve deadline (then `timeoutRefund`).
    function _checkResolveDeadline(bytes32 dealId, Deal storage d) internal view virtual {
        if (block.timestamp > d.resolveDeadline) revert TooLate(dealId, d.resolveDeadline);
    }

    function _in(bytes32 dealId, DealState expected) internal view returns (Deal storage d) {
        d = _deals[dealId];
        if (d.state != expected) revert WrongState(dealId, expected, d.state);
    }

    function _receive(Terms calldata terms, bytes32 nonce, Authorization calldata auth) internal {
        uint256 before = terms.token.balanceOf(address(this));
        IERC3009(address(terms.token))
            .receiveWithAuthorization(
                auth.buyer,
                address(this),
                terms.amount,
                auth.validAfter,
                auth.validBefore,
                nonce,
                auth.v,
                auth.r,
                auth.s
            );
        uint256 received = terms.token.balanceOf(address(this)) - before;
        if (received != terms.amount) revert TransferMismatch(terms.amount, received);
    }

    /// @dev The only way a deal's funds become withdrawable: marks the deal resolved and credits
    ///      the parties; nothing is transferred, so it cannot revert on a recipient. Virtual
    ///      only so that test/mutants can break it (same bytecode as non-virtual). A delivered
    ///      deal's DA bond goes to the buyer only on a timeout; the seller's dispute deposit
    ///      (the resolver fee) goes to the buyer only on Failed. A disputed deal's challenge
    ///      bond goes with the amount (seller on Released, buyer otherwise); a timeout also
    ///      returns the resolver fee to the buyer (`resolve` accrued it before).
    function _settle(bytes32 dealId, Deal storage d, Settlement how) internal virtual {
        bool delivered = d.deliveredAt != 0;
        uint256 bond = delivered ? d.sellerBond : 0;
        uint256 deposit = delivered ? d.resolverFee : 0;
        uint256 amount = d.amount;
        address paidTo = how == Settlement.Released ? d.seller : d.buyer;
        address bondPaidTo = how == Settlement.TimedOut ? d.buyer : d.seller;
        d.state = DealState.Resolved;
        d.settlement = how;
        d.settledAt = block.timestamp.toUint64();
        emit Settled(dealId, how, paidTo, amount, bondPaidTo, bond, block.timestamp);
        uint256 toBuyer;
        uint256 toSeller;
        if (how == Settlement.Released) {
            toSeller = amount + bond + deposit;
        } else if (how == Settlement.TimedOut) {
            (toBuyer, toSeller) = (amount + bond, deposit);
        } else if (how == Settlement.Refunded) {
            (toBuyer, toSeller) = (amount + deposit, bond);
        } else {
            (toBuyer, toSeller) = (amount, bond + deposit);
        }
        if (deposit > 0) {
            emit DepositSettled(dealId, how == Settlement.Refunded ? d.buyer : d.seller, deposit);
        }
        if (d.challengedAt != 0) {
            uint256 extra = _disputeFunds(dealId, d, paidTo, how);
            if (how == Settlement.Released) toSeller += extra;
            else toBuyer += extra;
        }
        IERC20 token = d.token;
        if (toBuyer > 0) _credit(d.buyer, token, toBuyer);
        if (toSeller > 0) _credit(d.seller, token, toSeller);
    }

    /// @dev What a disputed deal's settlement adds to `paidTo`'s credit: the challenge bond, and
    ///      on a timeout the resolver fee (the buyer is `paidTo` then).
    function _disputeFunds(bytes32 dealId, Deal storage d, address paidTo, Settlement how)
        internal
        returns (uint256 extra)
    {
        uint256 challengeBond = d.challengeBond;
        if (challengeBond > 0) {
            extra = challengeBond;
            emit ChallengeBondSettled(dealId, paidTo, challengeBond);
        }
        if (how == Settlement.TimedOut) {
            uint256 fee = d.resolverFee;
            if (fee > 0) {
                extra += fee;
                emit FeeRefunded(dealId, paidTo, fee);
            }
        }
    }

    function _resolve(
        Deal storage d,
        VerdictCommitment calldata commitment,
        bytes memory nonSigners,
        bytes calldata aggregateSignature
    ) internal {
        bytes32 dealId = commitment.dealId;
        _checkCommitment(d, commitment);
        bytes32 digest = VerdictHash.digest(domainSeparator(), commitment);
        (uint256 signedStake, uint256 totalStake) =
            registry.verifyCertificate(d.epoch, digest, nonSigners, aggregateSignature);
        _checkUnslashedQuorum(d.epoch, signedStake, totalStake, nonSigners);
        bool reproduced = commitment.outcome == Outcome.Reproduced;
        emit VerdictCommitted(dealId, commitment, signedStake, totalStake);
        _accrueFee(dealId, d, digest, signedStake, nonSigners);
        emit ReputationEvidence(
            d.seller, reproduced, dealId, commitment.traceHash, commitment.backendId
        );
        _settle(dealId, d, reproduced ? Settlement.Released : Settlement.Refunded);
    }
}
