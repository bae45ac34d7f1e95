// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Attestor} from "../src/Attestor.sol";
import {EscrowFees} from "../src/EscrowFees.sol";
import {RegistrySlashing} from "../src/RegistrySlashing.sol";
import {Attestation, IAttestorErrors, RequestTerms} from "../src/interfaces/IAttestor.sol";
import {
    Deal,
    DealState,
    IEscrowErrors,
    IEscrowEvents,
    Settlement
} from "../src/interfaces/IEscrow.sol";
import {Evidence, IResolverRegistryErrors} from "../src/interfaces/IResolverRegistry.sol";
import {AttestationHash, Question} from "../src/libraries/AttestationHash.sol";
import {Outcome, VerdictCommitment} from "../src/libraries/VerdictHash.sol";
import {AttestorBase} from "./utils/AttestorBase.sol";
import {VmLog} from "./utils/Vm.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice The Attestor end to end on a 4-member committee with real BLS signatures: requests,
///         certificates, the recorded attestation, fees to signers (left-out signers
///         included), timeouts, equivocation slashing under the attestor's own domain, and the
///         escrow-shaped events and views the nodes read.
/// @notice The non-indexed fields of the Escrow's `Disputed` event.
struct DisputedData {
    bytes32 specHash;
    bytes32 deliveryHash;
    bytes32 prestateAnchorHash;
    bytes32 prestateRoot;
    bytes32 backendId;
    bytes32 backendVersionHash;
    uint256 epoch;
    uint256 challengedAt;
    uint256 resolveDeadline;
}

contract AttestorTest is AttestorBase {
    function setUp() public {
        _setUpAttestor();
    }

    /// @notice A request with its content published, attested by all four members: the
    ///         answer is recorded with its epoch, the request is settled, the fee is split
    ///         among the signers (equal stakes: equal shares, less the submitter's refund).
    function testRequestAttestedByTheCommitteeIsRecorded() public {
        Question memory q = _question(1);
        token.mint(REQUESTER, FEE);
        vm.startPrank(REQUESTER);
        token.approve(address(attestor), FEE);
        (bytes32 id, bytes32 inputHash) =
            attestor.request(q, _requestTerms(FEE), _spec(1), _anchor(1), _delivery(1));
        vm.stopPrank();
        require(inputHash == keccak256(abi.encode(q)), "input hash = keccak256(abi.encode(q))");
        require(
            id == keccak256(abi.encode(block.chainid, address(attestor), inputHash)), "request id"
        );
        Deal memory d = attestor.deal(id);
        require(d.state == DealState.Disputed && d.epoch == 1, "pending at epoch 1");
        require(d.buyer == REQUESTER && d.resolverFee == FEE, "requester and fee");
        require(d.specHash == q.specHash && d.prestateRoot == q.prestateRoot, "question stored");
        require(attestor.liabilities(tok) == FEE, "fee held");
        (bytes32 out, uint256 epoch) = attestor.outputOf(inputHash);
        require(out == 0 && epoch == 1, "pending: no output, pinned epoch");

        VerdictCommitment memory c = _commitment(q, Outcome.Reproduced);
        _resolve(c, ALL);

        Attestation memory a = attestor.attestation(inputHash);
        require(a.attestedAt == block.timestamp && a.epoch == 1, "recorded at epoch 1");
        require(a.outcome == Outcome.Reproduced, "outcome");
        require(a.resultHash == c.resultHash && a.traceHash == c.traceHash, "result and trace");
        (out, epoch) = attestor.outputOf(inputHash);
        require(out == AttestationHash.outputHash(c) && epoch == 1, "output recorded");
        require(
            out == keccak256(abi.encode(uint8(0), c.resultHash, c.traceHash)),
            "output hash = keccak256(abi.encode(outcome, resultHash, traceHash))"
        );
        d = attestor.deal(id);
        require(d.state == DealState.Resolved && d.settlement == Settlement.Attested, "settled");
        require(attestor.claimable(SUBMITTER, tok) == CAP, "submitter's gas refund");
        uint256 share = (FEE - CAP) / N;
        for (uint256 i; i < N; ++i) {
            vm.prank(_operator(i));
            uint256 paid =
                EscrowFees(address(attestor)).claimRewards(tok, i, _epochs(1), _operator(i));
            require(paid == share, "equal share per signer");
        }
        vm.prank(SUBMITTER);
        attestor.claim(tok, SUBMITTER);
        require(token.balanceOf(SUBMITTER) == CAP, "refund claimed");
    }

    /// @notice The nodes serve the attestor like an escrow: one request emits SpecPublished,
    ///         DeliveryPublished and then Disputed (the escrow's signatures and fields), one
    ///         certificate emits VerdictCommitted, FeeDistributed and Settled.
    function testRequestAndResolveEmitTheEscrowEventsTheNodesRead() public {
        Question memory q = _question(2);
        token.mint(REQUESTER, FEE);
        vm.startPrank(REQUESTER);
        token.approve(address(attestor), FEE);
        vm.recordLogs();
        (bytes32 id,) = attestor.request(q, _requestTerms(FEE), _spec(2), _anchor(2), _delivery(2));
        vm.stopPrank();
        VmLog[] memory logs = vm.getRecordedLogs();
        uint256 spec = _find(logs, IEscrowEvents.SpecPublished.selector, id);
        uint256 delivery = _find(logs, IEscrowEvents.DeliveryPublished.selector, id);
        uint256 disputed = _find(logs, IEscrowEvents.Disputed.selector, id);
        require(spec < disputed && delivery < disputed, "content before the announcement");
        (bytes memory specBytes, bytes memory anchorBytes) =
            abi.decode(logs[spec].data, (bytes, bytes));
        require(keccak256(specBytes) == keccak256(_spec(2)), "spec bytes");
        require(keccak256(anchorBytes) == keccak256(_anchor(2)), "anchor bytes");
        require(
            keccak256(abi.decode(logs[delivery].data, (bytes))) == keccak256(_delivery(2)),
            "delivery bytes"
        );
        DisputedData memory e = abi.decode(logs[disputed].data, (DisputedData));
        require(e.specHash == q.specHash && e.deliveryHash == q.deliveryHash, "disputed hashes");
        require(
            e.prestateAnchorHash == q.prestateAnchorHash && e.prestateRoot == q.prestateRoot,
            "disputed anchor"
        );
        require(
            e.backendId == BACKEND && e.backendVersionHash == BACKEND_VERSION, "disputed backend"
        );
        require(e.epoch == 1 && e.challengedAt == block.timestamp, "disputed epoch and time");
        require(e.resolveDeadline == block.timestamp + WINDOW, "disputed deadline");
        require(attestor.deal(id).resolveDeadline == e.resolveDeadline, "deal() matches");

        vm.recordLogs();
        _resolve(_commitment(q, Outcome.Failed), ALL);
        logs = vm.getRecordedLogs();
        uint256 verdict = _find(logs, IEscrowEvents.VerdictCommitted.selector, id);
        uint256 fee = _find(logs, IEscrowEvents.FeeDistributed.selector, id);
        uint256 settled = _find(logs, IEscrowEvents.Settled.selector, id);
        require(verdict < settled && fee < settled, "settled last");
        (VerdictCommitment memory c, uint256 signedStake, uint256 totalStake) =
            abi.decode(logs[verdict].data, (VerdictCommitment, uint256, uint256));
        require(c.outcome == Outcome.Failed && c.dealId == id, "committed verdict");
        require(signedStake == totalStake && totalStake == N * BOND, "stakes");
        Settlement how = abi.decode(logs[settled].data, (Settlement));
        require(how == Settlement.Attested, "settlement code Attested");
    }

    /// @notice Requests are checked: backend, resolve window within the registry's bounds, fee
    ///         at least the registry's minimum, content hashes, one pending request per
    ///         question, none once attested.
    function testRequestChecks() public {
        Question memory q = _question(3);
        RequestTerms memory t = _requestTerms(FEE);
        token.mint(REQUESTER, 10 * FEE);
        vm.startPrank(REQUESTER);
        token.approve(address(attestor), 10 * FEE);
        Question memory unknown = _question(3);
        unknown.backendVersionHash = keccak256("reexec-evm 9");
        vm.expectRevert(
            abi.encodeWithSelector(
                IEscrowErrors.BackendNotAllowed.selector, BACKEND, unknown.backendVersionHash
            )
        );
        attestor.request(unknown, t, "", "", "");
        t.resolveWindow = MAX_RESOLVE + 1;
        vm.expectRevert(
            abi.encodeWithSelector(
                IEscrowErrors.ResolveWindowTooLong.selector, MAX_RESOLVE + 1, MAX_RESOLVE
            )
        );
        attestor.request(q, t, "", "", "");
        t.resolveWindow = registry.minResolveWindow() - 1;
        vm.expectRevert(
            abi.encodeWithSelector(
                IEscrowErrors.WindowTooShort.selector, "resolve", registry.minResolveWindow()
            )
        );
        attestor.request(q, t, "", "", "");
        t.resolveWindow = WINDOW;
        vm.expectRevert(
            abi.encodeWithSelector(
                IEscrowErrors.ContentHashMismatch.selector, q.specHash, _question(4).specHash
            )
        );
        attestor.request(q, t, _spec(4), _anchor(3), "");
        vm.expectRevert(
            abi.encodeWithSelector(
                IEscrowErrors.ContentHashMismatch.selector,
                q.deliveryHash,
                _question(4).deliveryHash
            )
        );
        attestor.request(q, t, "", "", _delivery(4));
        (bytes32 id,) = attestor.request(q, t, "", "", "");
        vm.expectRevert(abi.encodeWithSelector(IAttestorErrors.RequestPending.selector, id));
        attestor.request(q, t, "", "", "");
        vm.stopPrank();
        _resolve(_commitment(q, Outcome.Reproduced), ALL);
        vm.prank(REQUESTER);
        vm.expectRevert(
            abi.encodeWithSelector(
                IAttestorErrors.AlreadyAttested.selector, AttestationHash.inputHash(q)
            )
        );
        attestor.request(q, t, "", "", "");

        RegistrySlashing(address(registry)).setMinResolverFee(tok, FEE);
        _afterParameterDelay();
        t.fee = FEE - 1;
        Question memory q5 = _question(5);
        vm.prank(REQUESTER);
        vm.expectRevert(
            abi.encodeWithSelector(IEscrowErrors.FeeBelowMinimum.selector, tok, FEE - 1, FEE)
        );
        attestor.request(q5, t, "", "", "");
    }

    /// @notice Anyone may publish a pending request's content later (hash-checked against the
    ///         stored question), so a request made without content cannot keep the committee
    ///         from answering; nothing can be published once the request is answered.
    function testContentOfAPendingRequestCanBePublishedByAnyone() public {
        Question memory q = _question(11);
        (bytes32 id,) = _request(q, FEE);
        vm.expectRevert(
            abi.encodeWithSelector(
                IEscrowErrors.ContentHashMismatch.selector, q.specHash, _question(12).specHash
            )
        );
        attestor.publish(id, _spec(12), _anchor(11), "");
        vm.recordLogs();
        vm.prank(SUBMITTER);
        attestor.publish(id, _spec(11), _anchor(11), _delivery(11));
        VmLog[] memory logs = vm.getRecordedLogs();
        uint256 spec = _find(logs, IEscrowEvents.SpecPublished.selector, id);
        uint256 delivery = _find(logs, IEscrowEvents.DeliveryPublished.selector, id);
        require(spec < delivery, "both published");
        _resolve(_commitment(q, Outcome.Reproduced), ALL);
        vm.expectRevert(
            abi.encodeWithSelector(
                IEscrowErrors.WrongState.selector, id, DealState.Disputed, DealState.Resolved
            )
        );
        attestor.publish(id, _spec(11), _anchor(11), "");
    }

    /// @notice A certificate must carry the question's fields under the attestor's own domain:
    ///         one signed for the escrow's domain, or with a field changed, is refused.
    function testResolveRefusesAnotherDomainOrQuestion() public {
        Question memory q = _question(6);
        (bytes32 id,) = _request(q, FEE);
        VerdictCommitment memory c = _commitment(q, Outcome.Reproduced);
        (bytes memory nonSigners, bytes memory sig) = _certify(c, ALL, escrow.domainSeparator());
        vm.expectRevert(IResolverRegistryErrors.InvalidSignature.selector);
        attestor.resolve(c, nonSigners, sig);
        VerdictCommitment memory other = _commitment(q, Outcome.Reproduced);
        other.prestateRoot = keccak256("another root");
        (nonSigners, sig) = _certify(other, ALL, attestor.domainSeparator());
        vm.expectRevert(
            abi.encodeWithSelector(IEscrowErrors.CommitmentMismatch.selector, id, "prestateRoot")
        );
        attestor.resolve(other, nonSigners, sig);
        (nonSigners, sig) = _certify(c, 0x7, attestor.domainSeparator());
        uint256[] memory none = new uint256[](1);
        none[0] = 3;
        attestor.resolve(c, none, sig); // the index-list overload
        require(attestor.deal(id).settlement == Settlement.Attested, "attested");
        vm.expectRevert(
            abi.encodeWithSelector(
                IEscrowErrors.WrongState.selector, id, DealState.Disputed, DealState.Resolved
            )
        );
        attestor.resolve(c, nonSigners, sig);
    }

    /// @notice One member left out of the certificate: the fee waits for the inclusion window;
    ///         proving its signature includes it, and all four are paid equally. A member never
    ///         included gets nothing after the window.
    function testLeftOutSignerIsIncludedAndPaid() public {
        Question memory q = _question(7);
        (bytes32 id,) = _request(q, FEE);
        VerdictCommitment memory c = _commitment(q, Outcome.Reproduced);
        _resolve(c, 0x7); // member 3 left out
        (,,,, uint64 closesAt,) = attestor.held(id);
        require(closesAt != 0, "fee held");
        (, bytes memory sig3) = _certify(c, 0x8, attestor.domainSeparator());
        bytes memory member3 = new bytes(1);
        member3[0] = bytes1(uint8(0x8));
        EscrowFees(address(attestor)).includeSigners(id, member3, sig3);
        uint256 share = (FEE - CAP) / N;
        for (uint256 i; i < N; ++i) {
            vm.prank(_operator(i));
            uint256 paid =
                EscrowFees(address(attestor)).claimRewards(tok, i, _epochs(1), _operator(i));
            require(paid == share, "included: equal shares");
        }

        Question memory q2 = _question(8);
        (bytes32 id2,) = _request(q2, FEE);
        _resolve(_commitment(q2, Outcome.Failed), 0x7);
        (,,,, closesAt,) = attestor.held(id2);
        vm.warp(uint256(closesAt) + 1);
        EscrowFees(address(attestor)).distributeFee(id2);
        require(EscrowFees(address(attestor)).pendingRewards(tok, 3, 1) == 0, "left out: 0");
        uint256 third = (FEE - CAP) / 3;
        require(
            EscrowFees(address(attestor)).pendingRewards(tok, 0, 1) >= third - 1, "signers: 1/3"
        );
    }

    /// @notice No certificate by the deadline: a late certificate is refused, the fee is
    ///         credited back to the requester, and the question can be requested again under
    ///         the same id (pinning the then current epoch) and answered.
    function testExpiredRequestRefundsItsFee() public {
        Question memory q = _question(9);
        (bytes32 id,) = _request(q, FEE);
        vm.expectRevert(
            abi.encodeWithSelector(
                IEscrowErrors.TooEarly.selector, id, block.timestamp + WINDOW + 1
            )
        );
        attestor.timeoutRefund(id);
        vm.warp(block.timestamp + WINDOW + 1);
        VerdictCommitment memory c = _commitment(q, Outcome.Reproduced);
        (bytes memory nonSigners, bytes memory sig) = _certify(c, ALL, attestor.domainSeparator());
        vm.expectRevert(
            abi.encodeWithSelector(IEscrowErrors.TooLate.selector, id, block.timestamp - 1)
        );
        attestor.resolve(c, nonSigners, sig);
        attestor.timeoutRefund(id);
        Deal memory d = attestor.deal(id);
        require(d.state == DealState.Resolved && d.settlement == Settlement.TimedOut, "timed out");
        require(attestor.claimable(REQUESTER, tok) == FEE, "fee credited back");
        vm.prank(REQUESTER);
        attestor.claim(tok, REQUESTER);
        require(token.balanceOf(REQUESTER) == FEE, "fee refunded");
        require(attestor.liabilities(tok) == 0, "nothing owed");
        require(attestor.pinnedGasRefund(id) == 0, "refund unpinned");

        (bytes32 again,) = _request(q, FEE);
        require(again == id, "same id");
        d = attestor.deal(id);
        require(d.state == DealState.Disputed && d.settlement == Settlement.None, "pending again");
        _resolve(c, ALL);
        require(attestor.attestation(AttestationHash.inputHash(q)).attestedAt != 0, "attested");
    }

    /// @notice Two conflicting certificates about one request under the attestor's domain are
    ///         equivocation: the members who signed both are slashed through the registry, and
    ///         the same evidence under the escrow's domain is not valid.
    function testEquivocationOnAnAttestationIsSlashed() public {
        Question memory q = _question(10);
        (bytes32 id,) = _request(q, FEE);
        Evidence memory a = _evidence(_commitment(q, Outcome.Reproduced), 0x7);
        Evidence memory b = _evidence(_commitment(q, Outcome.Failed), 0xe);
        bytes32 escrowDomain = escrow.domainSeparator();
        vm.expectRevert(IResolverRegistryErrors.InvalidSignature.selector);
        RegistrySlashing(address(registry)).slashEquivocation(escrowDomain, a, b);
        bytes32 domain = attestor.domainSeparator();
        vm.prank(SLASHER);
        uint256 slashed = RegistrySlashing(address(registry)).slashEquivocation(domain, a, b);
        require(slashed == 2, "members 1 and 2 signed both");
        require(registry.slashedFor(domain, id, 1) && registry.slashedFor(domain, id, 2), "1, 2");
        require(!registry.slashedFor(domain, id, 0), "0 signed one");
        // The certificate of the pinned epoch now needs a quorum of the unslashed members.
        VerdictCommitment memory c = _commitment(q, Outcome.Reproduced);
        (bytes memory nonSigners, bytes memory sig) = _certify(c, 0x7, domain);
        vm.expectRevert(
            abi.encodeWithSelector(IEscrowErrors.SlashedSignersDecide.selector, BOND, 2 * BOND)
        );
        attestor.resolve(c, nonSigners, sig);
    }

    /// @notice The attestor's fee code runs only through the attestor that deployed it.
    function testFeesRunOnlyThroughTheirAttestor() public {
        EscrowFees fees = EscrowFees(attestor.fees());
        vm.expectRevert(IEscrowErrors.NotThroughEscrow.selector);
        fees.distributeFee(bytes32(0));
        require(attestor.fees() != escrow.fees(), "its own");
        (bool ok,) = address(attestor).call(abi.encodeWithSignature("noSuchFunction()"));
        require(!ok, "unknown selector");
    }

    function _evidence(VerdictCommitment memory c, uint256 signers)
        internal
        view
        returns (Evidence memory e)
    {
        (, bytes memory sig) = _certify(c, signers, attestor.domainSeparator());
        uint256 n;
        for (uint256 p; p < N; ++p) {
            if (signers >> p & 1 == 1) ++n;
        }
        e.signers = new uint256[](n);
        n = 0;
        for (uint256 p; p < N; ++p) {
            if (signers >> p & 1 == 1) e.signers[n++] = p;
        }
        e.commitment = c;
        e.epoch = 1;
        e.signature = sig;
    }

    function _find(VmLog[] memory logs, bytes32 selector, bytes32 id)
        internal
        view
        returns (uint256)
    {
        for (uint256 i; i < logs.length; ++i) {
            if (
                logs[i].emitter == address(attestor) && logs[i].topics[0] == selector
                    && logs[i].topics.length > 1 && logs[i].topics[1] == id
            ) return i;
        }
        revert("event not found");
    }
}
