// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {IEscrowErrors, Settlement, Terms} from "../src/interfaces/IEscrow.sol";
import {VerdictCommitment} from "../src/libraries/VerdictHash.sol";
import {HookToken, RefusingRecipient} from "./mocks/HookToken.sol";
import {EscrowBase} from "./utils/EscrowBase.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice Pull payments (issue 16, Low): with a token that calls its recipients, a buyer that
///         refuses the refund cannot turn a Failed verdict into a timeout. Before the fix,
///         `testRefundSettlesWhateverTheBuyerDoes` reverted inside `resolve` with
///         `Refused()` (verified), which would have let the deal time out against the seller.
contract PullPaymentsTest is EscrowBase {
    string internal ev;
    HookToken internal hook;

    function setUp() public {
        ev = _read("consensus/vectors/escrow.json");
        _deploySystem();
        _rekeyAll(ev, ".deals");
        // The vector deal ids commit to the token address: the hook token lives there.
        vm.etch(TOKEN, address(new HookToken()).code);
        hook = HookToken(TOKEN);
        _registerResolvers(ev, 8);
    }

    function _failedCertificate(uint256 k)
        internal
        view
        returns (VerdictCommitment memory c, uint256[] memory non, bytes memory sig)
    {
        string memory s = string.concat(_at(".deals", k), ".failed");
        c = _commitment(ev, s);
        non = vm.parseJsonUintArray(ev, string.concat(s, ".quorum.nonSigners"));
        sig = _quorumSignature(ev, s);
    }

    function testRefundSettlesWhateverTheBuyerDoes() public {
        Terms memory t = _terms(ev, ".deals[1]");
        bytes32 id = _dispute(ev, ".deals[1]");
        // The buyer is a contract that reverts on every receipt of the token.
        vm.etch(BUYER, address(new RefusingRecipient()).code);
        hook.setHooked(BUYER, true);
        (VerdictCommitment memory c, uint256[] memory non, bytes memory sig) = _failedCertificate(1);
        escrow.resolve(c, non, sig);
        require(escrow.deal(id).settlement == Settlement.Refunded, "settled");
        require(_owed(BUYER) == t.amount && _owed(SELLER) == t.sellerBond, "credited");

        // The seller is unaffected by the buyer's hook.
        vm.prank(SELLER);
        require(escrow.claim(IERC20(TOKEN), SELLER) == t.sellerBond, "bond claimed");
        require(hook.balanceOf(SELLER) == t.sellerBond, "bond paid");
        // The buyer's own refusal only blocks its own claim, which it can redirect.
        vm.prank(BUYER);
        vm.expectRevert(RefusingRecipient.Refused.selector);
        escrow.claim(IERC20(TOKEN), BUYER);
        vm.prank(BUYER);
        escrow.claim(IERC20(TOKEN), address(0xb0b2));
        require(hook.balanceOf(address(0xb0b2)) == t.amount, "redirected");
        require(hook.balanceOf(ESCROW) == 0 && escrow.liabilities(IERC20(TOKEN)) == 0, "empty");
    }

    function testClaimRules() public {
        vm.expectRevert(
            abi.encodeWithSelector(IEscrowErrors.NothingToClaim.selector, SELLER, IERC20(TOKEN))
        );
        vm.prank(SELLER);
        escrow.claim(IERC20(TOKEN), SELLER);
        vm.expectRevert(abi.encodeWithSelector(IEscrowErrors.ZeroAddress.selector, "to"));
        vm.prank(SELLER);
        escrow.claim(IERC20(TOKEN), address(0));
        // A claim empties the credit: a second one has nothing to send.
        _dispute(ev, ".deals[2]");
        string memory s = ".deals[2].reproduced";
        escrow.resolve(
            _commitment(ev, s),
            vm.parseJsonUintArray(ev, string.concat(s, ".quorum.nonSigners")),
            _quorumSignature(ev, s)
        );
        vm.startPrank(SELLER);
        escrow.claim(IERC20(TOKEN), SELLER);
        vm.expectRevert(
            abi.encodeWithSelector(IEscrowErrors.NothingToClaim.selector, SELLER, IERC20(TOKEN))
        );
        escrow.claim(IERC20(TOKEN), SELLER);
        vm.stopPrank();
    }
}
