// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {EscrowFees} from "../src/EscrowFees.sol";
import {RegistrySlashing} from "../src/RegistrySlashing.sol";
import {DealState, IEscrowErrors, Terms} from "../src/interfaces/IEscrow.sol";
import {Evidence} from "../src/interfaces/IResolverRegistry.sol";
import {VerdictCommitment} from "../src/libraries/VerdictHash.sol";
import {EscrowBase} from "./utils/EscrowBase.sol";
import {Signer} from "./utils/Signer.sol";
import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";

/// @notice A deal token that can misbehave on demand: `transfer` returning false or reverting,
///         `transferFrom` returning false, a cut burned out of every moved value (the recipient
///         gets less), a surcharge burned from the sender on top, and a one-shot callback made
///         after the balances moved (the re-entry point of a hook token).
contract HostileToken is ERC20 {
    error Broken();

    bool public transferReturnsFalse;
    bool public transferReverts;
    bool public transferFromReturnsFalse;
    /// @dev Burned out of every moved value: the recipient gets `value - cut`.
    uint256 public cut;
    /// @dev Burned from the sender on top of every moved value.
    uint256 public surcharge;

    address public callback;
    bytes public callbackData;
    bool public bubble;
    bool public hookRan;
    bool public hookOk;
    bytes public hookReturn;

    constructor() ERC20("Hostile", "HOST") {}

    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    function setFailures(bool returnsFalse, bool reverts, bool fromReturnsFalse) external {
        transferReturnsFalse = returnsFalse;
        transferReverts = reverts;
        transferFromReturnsFalse = fromReturnsFalse;
    }

    function setFees(uint256 cut_, uint256 surcharge_) external {
        cut = cut_;
        surcharge = surcharge_;
    }

    /// @notice On the next transfer, calls `target` with `data`; if that reverts and `bubble_`,
    ///         the transfer reverts with its data, else the result is recorded.
    function arm(address target, bytes calldata data, bool bubble_) external {
        callback = target;
        callbackData = data;
        bubble = bubble_;
        hookRan = false;
        hookOk = false;
        delete hookReturn;
    }

    function transfer(address to, uint256 value) public override returns (bool) {
        if (transferReverts) revert Broken();
        if (transferReturnsFalse) return false;
        _move(msg.sender, to, value);
        return true;
    }

    function transferFrom(address from, address to, uint256 value) public override returns (bool) {
        if (transferFromReturnsFalse) return false;
        _spendAllowance(from, msg.sender, value);
        _move(from, to, value);
        return true;
    }

    function _move(address from, address to, uint256 value) internal {
        if (surcharge > 0) _burn(from, surcharge);
        if (cut > 0) {
            _burn(from, cut);
            value -= cut;
        }
        _transfer(from, to, value);
        address target = callback;
        if (target == address(0)) return;
        callback = address(0);
        (bool ok, bytes memory ret) = target.call(callbackData);
        if (!ok && bubble) {
            assembly ("memory-safe") {
                revert(add(ret, 32), mload(ret))
            }
        }
        hookRan = true;
        hookOk = ok;
        hookReturn = ret;
    }
}

/// @notice Etched at an operator's or creditor's address: the token's callback makes it call
///         the escrow again as itself (so `msg.sender` is the operator / creditor), bubbling
///         any revert.
contract Reenterer {
    function forward(address target, bytes calldata data) external returns (bytes memory ret) {
        bool ok;
        (ok, ret) = target.call(data);
        if (!ok) {
            assembly ("memory-safe") {
                revert(add(ret, 32), mload(ret))
            }
        }
    }
}

/// @notice Hostile deal tokens against the fee/reward economics (ECONOMICS.md): re-entry through
///         a transfer hook into `claim`, `claimRewards` and `sweepSlashedRewards`; `transfer` /
///         `transferFrom` that return false or revert; fee-on-transfer and surcharging tokens;
///         repeated claims of one epoch. Real BLS certificates (test/utils/Signer.sol) over the
///         vector deals, re-keyed to the hostile token. Eight resolvers of equal bond; epoch 8
///         holds all of them. Fee 9e18 with a refund cap of 1e18: the submitter gets 1e18 and
///         each of eight signers exactly 1e18 (no dust), so the books can be checked exactly.
contract EconomicsHostileTest is EscrowBase {
    string internal ev;
    HostileToken internal hx;
    IERC20 internal hxi;

    address internal constant SUBMITTER = address(uint160(0x5b5b));
    uint256 internal constant FEE = 9e18;
    uint256 internal constant CAP = 1e18;
    uint256 internal constant CBOND = 5e18;
    uint256 internal constant SHARE = 1e18;

    bytes internal guardError =
        abi.encodeWithSelector(ReentrancyGuard.ReentrancyGuardReentrantCall.selector);

    function setUp() public {
        ev = _read("consensus/vectors/escrow.json");
        _deploySystem();
        _registerResolvers(ev, 8);
        hx = new HostileToken();
        hxi = IERC20(address(hx));
        RegistrySlashing(address(registry)).setGasRefundCap(hxi, CAP);
        _afterParameterDelay();
    }

    // ------------------------------------------------------------------ helpers

    function _hostileTerms(uint256 k, uint256 fee, uint256 bond)
        internal
        view
        returns (Terms memory t)
    {
        t = _terms(ev, _at(".deals", k));
        t.token = hxi;
        t.resolverFee = fee;
        t.challengeBond = bond;
    }

    /// @dev Funds and delivers vector deal `k` under `t` (token behaving), one second before a
    ///      challenge may land.
    function _fundAndDeliver(Terms memory t, uint256 k) internal returns (bytes32 id) {
        _allowBackend(t);
        hx.mint(BUYER, t.amount);
        vm.startPrank(BUYER);
        hx.approve(ESCROW, t.amount);
        id = escrow.fund(t, "", "");
        vm.stopPrank();
        vm.warp(block.timestamp + 1);
        hx.mint(SELLER, t.sellerBond + t.resolverFee);
        vm.startPrank(SELLER);
        hx.approve(ESCROW, t.sellerBond + t.resolverFee);
        escrow.deliver(
            id, vm.parseJsonBytes32(ev, string.concat(_at(".deals", k), ".deliveryHash")), ""
        );
        vm.stopPrank();
        vm.warp(block.timestamp + 1);
    }

    /// @dev Mints the buyer `due` and approves it to the escrow (no challenge yet).
    function _prepareChallenge(uint256 due) internal {
        hx.mint(BUYER, due);
        vm.prank(BUYER);
        hx.approve(ESCROW, due);
    }

    function _disputeIn(uint256 k, uint256 fee, uint256 bond)
        internal
        returns (bytes32 id, Terms memory t)
    {
        t = _hostileTerms(k, fee, bond);
        id = _fundAndDeliver(t, k);
        _prepareChallenge(fee + bond);
        vm.prank(BUYER);
        escrow.challenge(id);
    }

    /// @dev Resolves deal `k` (under `id`) Reproduced with the resolvers in `mask` signing,
    ///      submitted by `submitter`.
    function _resolve(uint256 k, bytes32 id, uint256 mask, address submitter) internal {
        VerdictCommitment memory c =
            _vectorCommitment(ev, string.concat(_at(".deals", k), ".reproduced"));
        c.dealId = id;
        uint256 n;
        for (uint256 i; i < 8; ++i) {
            if (mask & (1 << i) != 0) ++n;
        }
        uint256[] memory signers = new uint256[](n);
        uint256[] memory non = new uint256[](8 - n);
        (uint256 a, uint256 b) = (0, 0);
        for (uint256 i; i < 8; ++i) {
            if (mask & (1 << i) != 0) signers[a++] = i;
            else non[b++] = i;
        }
        bytes memory sig = Signer.sign(signers, escrow.verdictDigest(c));
        vm.prank(submitter);
        escrow.resolve(c, non, sig);
        _distributeHeld(id);
    }

    function _epochs(uint256 e) internal pure returns (uint256[] memory es) {
        es = new uint256[](1);
        es[0] = e;
    }

    function _pending(uint256 i) internal view returns (uint256) {
        return EscrowFees(address(escrow)).pendingRewards(hxi, i, 8);
    }

    function _claimRewards(uint256 i) internal returns (uint256) {
        vm.prank(_operator(i));
        return EscrowFees(address(escrow)).claimRewards(hxi, i, _epochs(8), _operator(i));
    }

    function _claim(address who) internal returns (uint256) {
        vm.prank(who);
        return escrow.claim(hxi, who);
    }

    function _forward(bytes memory inner) internal pure returns (bytes memory) {
        return abi.encodeCall(Reenterer.forward, (ESCROW, inner));
    }

    function _refusedByGuard() internal view {
        require(hx.hookRan(), "hook ran");
        require(!hx.hookOk(), "re-entry went through");
        require(keccak256(hx.hookReturn()) == keccak256(guardError), "not refused by the guard");
    }

    /// @dev The escrow's books in the hostile token: `liabilities` covers every credit of the
    ///      known creditors, every resolver's pending reward of epoch 8 and `locked` (amounts,
    ///      bonds and fees of open deals), with at most a few wei of tracked rounding; and the
    ///      escrow holds at least `liabilities`.
    function _solvent(uint256 locked) internal view {
        address[6] memory creditors = [SELLER, BUYER, SUBMITTER, SLASHER, SINK, _operator(0)];
        uint256 owed = locked;
        for (uint256 i; i < creditors.length; ++i) {
            owed += escrow.claimable(creditors[i], hxi);
        }
        for (uint256 i; i < 8; ++i) {
            owed += _pending(i);
        }
        uint256 liab = escrow.liabilities(hxi);
        require(liab >= owed, "liabilities below what is owed");
        require(liab - owed < 8, "untracked remainder");
        require(hx.balanceOf(ESCROW) >= liab, "balance below liabilities");
    }

    /// @dev Resolvers 2..5 are slashed by SLASHER (the vector's equivocating certificates).
    function _slash() internal {
        string memory r = ".deals[1].reproduced";
        string memory f = ".deals[1].failed";
        Evidence memory a = Evidence(
            _vectorCommitment(ev, r),
            8,
            vm.parseJsonUintArray(ev, string.concat(r, ".quorum.signers")),
            vm.parseJsonBytes(ev, string.concat(r, ".quorum.signature"))
        );
        Evidence memory b = Evidence(
            _vectorCommitment(ev, f),
            8,
            vm.parseJsonUintArray(ev, string.concat(f, ".quorum.signers")),
            vm.parseJsonBytes(ev, string.concat(f, ".quorum.signature"))
        );
        bytes32 ds = escrow.domainSeparator();
        vm.prank(SLASHER);
        require(
            RegistrySlashing(address(registry)).slashEquivocation(ds, a, b) == 4, "2..5 slashed"
        );
    }

    // ------------------------------------------------------------------ 1. re-entry

    /// @notice An operator contract re-enters `claimRewards` from the token's hook: the guard
    ///         refuses the re-entry, the outer claim pays the share once. If the operator
    ///         bubbles the refusal, the whole claim reverts and the reward stays claimable.
    function testReentrantClaimRewardsIsRefused() public {
        (bytes32 id, Terms memory t) = _disputeIn(0, FEE, CBOND);
        _resolve(0, id, 0xff, SUBMITTER);
        address op = _operator(3);
        vm.etch(op, type(Reenterer).runtimeCode);
        hx.arm(
            op, _forward(abi.encodeCall(EscrowFees.claimRewards, (hxi, 3, _epochs(8), op))), false
        );
        uint256 before = hx.balanceOf(ESCROW);
        require(_claimRewards(3) == SHARE, "owed once");
        _refusedByGuard();
        require(hx.balanceOf(op) == SHARE, "paid exactly the share");
        require(before - hx.balanceOf(ESCROW) == SHARE, "escrow paid once");
        require(_pending(3) == 0, "settled");
        _solvent(0);

        // Bubbling: the claim reverts as a whole; nothing moves, nothing is settled.
        address op4 = _operator(4);
        vm.etch(op4, type(Reenterer).runtimeCode);
        hx.arm(
            op4, _forward(abi.encodeCall(EscrowFees.claimRewards, (hxi, 4, _epochs(8), op4))), true
        );
        uint256 debt = escrow.rewardDebt(hxi, 8, 4);
        uint256 liab = escrow.liabilities(hxi);
        vm.prank(op4);
        vm.expectRevert(guardError);
        EscrowFees(address(escrow)).claimRewards(hxi, 4, _epochs(8), op4);
        require(_pending(4) == SHARE && escrow.rewardDebt(hxi, 8, 4) == debt, "still owed");
        require(escrow.liabilities(hxi) == liab && hx.balanceOf(op4) == 0, "nothing moved");
        hx.arm(address(0), "", false);
        require(_claimRewards(4) == SHARE, "claimable later");

        // Everyone else is paid exactly its share; the escrow ends holding exactly nothing.
        for (uint256 i; i < 8; ++i) {
            if (i != 3 && i != 4) require(_claimRewards(i) == SHARE, "share");
        }
        require(_claim(SELLER) == t.amount + t.sellerBond + t.resolverFee + CBOND, "seller");
        require(_claim(SUBMITTER) == CAP, "refund");
        require(escrow.liabilities(hxi) == 0 && hx.balanceOf(ESCROW) == 0, "all paid, once");
    }

    /// @notice A creditor contract re-enters `claim` from the hook (double withdrawal), and an
    ///         operator that is also a creditor re-enters `claimRewards` from its `claim`
    ///         (cross-function): both refused; each pays exactly what was owed.
    function testReentrantClaimIsRefused() public {
        (bytes32 id, Terms memory t) = _disputeIn(0, FEE, CBOND);
        address op0 = _operator(0);
        _resolve(0, id, 0xff, op0); // operator 0 submits: it holds the refund and a reward
        uint256 credit = t.amount + t.sellerBond + t.resolverFee + CBOND;
        require(escrow.claimable(SELLER, hxi) == credit, "seller credit");

        vm.etch(SELLER, type(Reenterer).runtimeCode);
        hx.arm(SELLER, _forward(abi.encodeCall(escrow.claim, (hxi, SELLER))), false);
        require(_claim(SELLER) == credit, "claimed");
        _refusedByGuard();
        require(hx.balanceOf(SELLER) == credit, "paid once");
        require(escrow.claimable(SELLER, hxi) == 0, "credit emptied");
        _solvent(0);

        vm.etch(op0, type(Reenterer).runtimeCode);
        hx.arm(
            op0, _forward(abi.encodeCall(EscrowFees.claimRewards, (hxi, 0, _epochs(8), op0))), false
        );
        require(_claim(op0) == CAP, "refund claimed");
        _refusedByGuard();
        require(hx.balanceOf(op0) == CAP && _pending(0) == SHARE, "reward not paid inside");
        require(_claimRewards(0) == SHARE, "reward claimed on its own");
        require(hx.balanceOf(op0) == CAP + SHARE, "refund + share, each once");
        _solvent(0);
    }

    /// @notice `sweepSlashedRewards` moves no tokens (it only credits), so it cannot be entered
    ///         from its own transfer; re-entering it from a `claim` (the whistleblower's hook)
    ///         or from a `claimRewards` (the token itself calling back) is refused, and the
    ///         sweep then works once, outside.
    function testReentrantSweepIsRefused() public {
        (bytes32 id, Terms memory t) = _disputeIn(0, FEE, CBOND);
        _resolve(0, id, 0xff, SUBMITTER);
        _slash();
        require(
            EscrowFees(address(escrow)).sweepSlashedRewards(hxi, 2, _epochs(8)) == SHARE, "swept 2"
        );
        require(escrow.claimable(SLASHER, hxi) == SHARE / 10, "whistleblower share");

        vm.etch(SLASHER, type(Reenterer).runtimeCode);
        hx.arm(
            SLASHER,
            _forward(abi.encodeCall(EscrowFees.sweepSlashedRewards, (hxi, 3, _epochs(8)))),
            false
        );
        require(_claim(SLASHER) == SHARE / 10, "whistleblower claimed");
        _refusedByGuard();
        require(_pending(3) == SHARE, "3 not swept inside");
        require(escrow.claimable(SINK, hxi) == SHARE * 9 / 10, "sink unchanged");

        hx.arm(ESCROW, abi.encodeCall(EscrowFees.sweepSlashedRewards, (hxi, 3, _epochs(8))), false);
        require(_claimRewards(0) == SHARE, "honest claim");
        _refusedByGuard();
        require(_pending(3) == SHARE, "3 still not swept");
        _solvent(0);

        for (uint256 i = 3; i < 6; ++i) {
            require(
                EscrowFees(address(escrow)).sweepSlashedRewards(hxi, i, _epochs(8)) == SHARE,
                "swept"
            );
        }
        vm.prank(_operator(3));
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.RewardsForfeited.selector, 3));
        EscrowFees(address(escrow)).claimRewards(hxi, 3, _epochs(8), _operator(3));
        for (uint256 i = 1; i < 8; ++i) {
            if (i < 2 || i > 5) require(_claimRewards(i) == SHARE, "honest share");
        }
        require(_claim(SLASHER) == 3 * SHARE / 10, "whistleblower rest");
        require(_claim(SINK) == 4 * SHARE * 9 / 10, "sink");
        require(_claim(SELLER) == t.amount + t.sellerBond + t.resolverFee + CBOND, "seller");
        require(_claim(SUBMITTER) == CAP, "refund");
        require(escrow.liabilities(hxi) == 0 && hx.balanceOf(ESCROW) == 0, "all paid, once");
    }

    // ------------------------------------------------------------------ 2. failing tokens

    /// @notice `transfer` returning false, then reverting: `claimRewards` and `claim` revert
    ///         as a whole, the reward and the credit stay owed, and are paid once the token
    ///         works again.
    function testBrokenTransferKeepsRewardsAndCredits() public {
        (bytes32 id, Terms memory t) = _disputeIn(0, FEE, CBOND);
        _resolve(0, id, 0xff, SUBMITTER);
        address op = _operator(3);
        uint256 debt = escrow.rewardDebt(hxi, 8, 3);
        uint256 liab = escrow.liabilities(hxi);
        uint256 bal = hx.balanceOf(ESCROW);
        uint256 credit = escrow.claimable(SELLER, hxi);

        hx.setFailures(true, false, false);
        vm.prank(op);
        vm.expectRevert(abi.encodeWithSelector(SafeERC20.SafeERC20FailedOperation.selector, hx));
        EscrowFees(address(escrow)).claimRewards(hxi, 3, _epochs(8), op);
        vm.prank(SELLER);
        vm.expectRevert(abi.encodeWithSelector(SafeERC20.SafeERC20FailedOperation.selector, hx));
        escrow.claim(hxi, SELLER);

        hx.setFailures(false, true, false);
        vm.prank(op);
        vm.expectRevert(HostileToken.Broken.selector);
        EscrowFees(address(escrow)).claimRewards(hxi, 3, _epochs(8), op);
        vm.prank(SELLER);
        vm.expectRevert(HostileToken.Broken.selector);
        escrow.claim(hxi, SELLER);

        require(_pending(3) == SHARE && escrow.rewardDebt(hxi, 8, 3) == debt, "reward kept");
        require(escrow.claimable(SELLER, hxi) == credit, "credit kept");
        require(escrow.liabilities(hxi) == liab && hx.balanceOf(ESCROW) == bal, "books unchanged");
        require(hx.balanceOf(op) == 0 && hx.balanceOf(SELLER) == 0, "nothing paid");

        hx.setFailures(false, false, false);
        require(_claimRewards(3) == SHARE && hx.balanceOf(op) == SHARE, "claimed later");
        require(_claim(SELLER) == t.amount + t.sellerBond + t.resolverFee + CBOND, "seller later");
        _solvent(0);
    }

    /// @notice `transferFrom` returning false at `challenge`: the challenge reverts, the deal
    ///         stays Delivered, nothing is taken and no accumulator slot is written; the buyer
    ///         can challenge once the token works (within the window).
    function testChallengeWithFailingTransferFromTakesNothing() public {
        Terms memory t = _hostileTerms(0, FEE, CBOND);
        bytes32 id = _fundAndDeliver(t, 0);
        uint256 due = FEE + CBOND;
        _prepareChallenge(due);
        hx.setFailures(false, false, true);
        vm.prank(BUYER);
        vm.expectRevert(abi.encodeWithSelector(SafeERC20.SafeERC20FailedOperation.selector, hx));
        escrow.challenge(id);
        _nothingTaken(id, t, due);

        hx.setFailures(false, false, false);
        vm.prank(BUYER);
        escrow.challenge(id);
        require(escrow.deal(id).state == DealState.Disputed, "disputed");
        require(
            escrow.liabilities(hxi) == t.amount + t.sellerBond + t.resolverFee + due,
            "fee + bond booked"
        );
        _solvent(t.amount + t.sellerBond + t.resolverFee + due);
    }

    function _nothingTaken(bytes32 id, Terms memory t, uint256 due) internal view {
        require(escrow.deal(id).state == DealState.Delivered, "still Delivered");
        require(escrow.deal(id).challengedAt == 0, "not challenged");
        require(
            escrow.liabilities(hxi) == t.amount + t.sellerBond + t.resolverFee, "nothing booked"
        );
        require(hx.balanceOf(ESCROW) == t.amount + t.sellerBond + t.resolverFee, "nothing received");
        require(hx.balanceOf(BUYER) == due, "buyer kept its funds");
        require(hx.allowance(BUYER, ESCROW) == due, "allowance untouched");
        require(escrow.rewardPerStake(hxi, 8) == 0, "no accumulator slot");
    }

    // ------------------------------------------------------------------ 3. fee on transfer

    /// @notice A fee-on-transfer token at `challenge` (the escrow receives less than fee + bond)
    ///         is refused with `TransferMismatch`, whether the cut is one wei or the whole fee;
    ///         nothing is taken. A token that charges the sender on top (the escrow receives
    ///         exactly fee + bond) is accepted, and the books hold through resolve and claims.
    function testFeeOnTransferAtChallengeIsRefused() public {
        Terms memory t = _hostileTerms(0, FEE, CBOND);
        bytes32 id = _fundAndDeliver(t, 0);
        uint256 due = FEE + CBOND;
        _prepareChallenge(due);

        hx.setFees(1, 0);
        vm.prank(BUYER);
        vm.expectRevert(
            abi.encodeWithSelector(IEscrowErrors.TransferMismatch.selector, due, due - 1)
        );
        escrow.challenge(id);
        _nothingTaken(id, t, due);

        hx.setFees(FEE, 0);
        vm.prank(BUYER);
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.TransferMismatch.selector, due, CBOND));
        escrow.challenge(id);
        _nothingTaken(id, t, due);

        // Surcharged to the sender: the escrow gets exactly what it booked.
        hx.setFees(0, 1);
        hx.mint(BUYER, 1);
        vm.prank(BUYER);
        escrow.challenge(id);
        hx.setFees(0, 0);
        require(hx.balanceOf(BUYER) == 0, "buyer paid due + surcharge");
        require(
            hx.balanceOf(ESCROW) == t.amount + t.sellerBond + t.resolverFee + due,
            "received exactly due"
        );
        _solvent(t.amount + t.sellerBond + t.resolverFee + due);
        _resolve(0, id, 0xff, SUBMITTER);
        _solvent(0);
        for (uint256 i; i < 8; ++i) {
            require(_claimRewards(i) == SHARE, "share");
        }
        _claim(SELLER);
        _claim(SUBMITTER);
        require(escrow.liabilities(hxi) == 0 && hx.balanceOf(ESCROW) == 0, "all paid");
    }

    /// @notice Payouts are not balance-checked. A token that cuts the payout only shorts the
    ///         recipient: the escrow's balance and `liabilities` fall by the same amount. A token
    ///         that over-debits the escrow (surcharge on its transfers) leaves the escrow short
    ///         in that token only (documented limitation, not fixable by the escrow: such a
    ///         token can move any holder's balance): the last claimer of that token fails, while
    ///         the books of every other token (here the vector token) stay exact.
    function testLossyPayoutsOnlyHurtTheirOwnToken() public {
        Terms memory other = _terms(ev, ".deals[2]");
        _allowBackend(other);
        _fund(other); // an open deal in the well-behaved token
        (bytes32 id, Terms memory t) = _disputeIn(0, FEE, CBOND);
        _resolve(0, id, 0xff, SUBMITTER);

        hx.setFees(SHARE / 10, 0);
        require(_claimRewards(3) == SHARE, "booked the whole share");
        require(hx.balanceOf(_operator(3)) == SHARE * 9 / 10, "recipient shorted by the token");
        require(hx.balanceOf(ESCROW) == escrow.liabilities(hxi), "books still exact");
        _solvent(0);

        hx.setFees(0, SHARE);
        require(_claimRewards(4) == SHARE, "claimed");
        hx.setFees(0, 0);
        require(
            hx.balanceOf(ESCROW) + SHARE == escrow.liabilities(hxi), "short by the surcharge only"
        );
        require(token.balanceOf(ESCROW) == escrow.liabilities(IERC20(TOKEN)), "other token exact");
        require(escrow.liabilities(IERC20(TOKEN)) == other.amount, "other deal intact");
        for (uint256 i; i < 8; ++i) {
            if (i != 3 && i != 4) _claimRewards(i);
        }
        _claim(SUBMITTER);
        vm.prank(SELLER);
        vm.expectRevert(); // ERC20InsufficientBalance inside the token
        escrow.claim(hxi, SELLER);
        require(
            escrow.claimable(SELLER, hxi) == t.amount + t.sellerBond + t.resolverFee + CBOND,
            "still owed"
        );
    }

    // ------------------------------------------------------------------ 4. repeated claims

    /// @notice Not in Economics.t.sol: a second claim of the same epoch after a further
    ///         certificate of that epoch pays only the new accrual; a non-signer of the second
    ///         certificate gets only the first one, whether it claimed before it or not; a
    ///         registered operator cannot claim another index.
    function testSecondClaimOfAnEpochPaysOnlyNewAccruals() public {
        (bytes32 id1,) = _disputeIn(0, FEE, 0);
        _resolve(0, id1, 0xff, SUBMITTER);
        require(_claimRewards(0) == SHARE, "0: first");
        require(_claimRewards(6) == SHARE, "6: first");

        (bytes32 id2,) = _disputeIn(1, 7e18, 0); // pool 6e18 over six signers
        require(escrow.deal(id2).epoch == 8, "same epoch");
        _resolve(1, id2, 0x3f, SUBMITTER); // 0..5 sign, 6 and 7 do not

        require(_claimRewards(0) == SHARE, "0: only the new accrual");
        vm.prank(_operator(0));
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.NoRewards.selector, 0, hxi));
        EscrowFees(address(escrow)).claimRewards(hxi, 0, _epochs(8), _operator(0));
        vm.prank(_operator(6));
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.NoRewards.selector, 6, hxi));
        EscrowFees(address(escrow)).claimRewards(hxi, 6, _epochs(8), _operator(6));
        require(_claimRewards(7) == SHARE, "7: first certificate only");

        vm.prank(_operator(0));
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.NotOperator.selector, 1, _operator(0)));
        EscrowFees(address(escrow)).claimRewards(hxi, 1, _epochs(8), _operator(0));
        for (uint256 i = 1; i < 6; ++i) {
            require(_claimRewards(i) == 2 * SHARE, "both certificates");
        }
        _solvent(0);
        for (uint256 i; i < 3; ++i) {
            address who = [SELLER, BUYER, SUBMITTER][i];
            if (escrow.claimable(who, hxi) > 0) _claim(who);
        }
        require(escrow.liabilities(hxi) == 0 && hx.balanceOf(ESCROW) == 0, "paid once");
    }
}
