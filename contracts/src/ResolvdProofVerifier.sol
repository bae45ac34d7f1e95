// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {IAttestor} from "./interfaces/IAttestor.sol";
import {IProofVerifier} from "./interfaces/IProofVerifier.sol";
import {IResolverRegistry} from "./interfaces/IResolverRegistry.sol";
import {AttestationHash} from "./libraries/AttestationHash.sol";
import {VerdictCommitment, VerdictHash} from "./libraries/VerdictHash.sol";

/// @title ResolvdProofVerifier
/// @notice ERC-8301 `IProofVerifier` (seed 000) for resolvd replay attestations: `inputHash` is
///         a question's AttestationHash.inputHash, `outputHash` its AttestationHash.outputHash,
///         `metadata` is `abi.encode(attestor)` (an Attestor on this verifier's registry), and
///         `proof` is either
///         - empty: valid iff the Attestor recorded exactly `outputHash` for `inputHash`; or
///         - a certificate `abi.encode(VerdictCommitment commitment, uint256 epoch, bytes
///           nonSigners, bytes signature)`: valid iff the commitment answers `inputHash` with
///           `outputHash` under the Attestor's request id and EIP-712 domain (both computed
///           here from the Attestor's address, not asked of it), `epoch` is the epoch the
///           question's request pinned, the registry verifies the aggregate signature of the
///           members not in the position bitmap `nonSigners` at that epoch (a quorum,
///           `verifyCertificate`; only while the epoch is fresh), the signers slashed since
///           the epoch started do not decide it, and the Attestor has not recorded a different
///           answer. It needs no `resolve`: a workflow may use a certificate before (or
///           without) its submission to the Attestor.
///         `verify` never reverts on bad input: every failure is `false`. `checkCertificate`
///         gives the reason of a certificate's failure as a revert.
/// @dev Holds no state. The recorded mode trusts the named Attestor's storage; the certificate
///      mode trusts only the registry's committee (a contract posing as an Attestor gets a
///      domain of its own address, which no resolver signs under).
contract ResolvdProofVerifier is IProofVerifier {
    /// @notice The registry whose certificates this verifier accepts.
    IResolverRegistry public immutable registry;

    /// @notice The Attestor certifies through another registry.
    error ForeignRegistry(address attestor, IResolverRegistry registry);
    /// @notice The question was never requested at the Attestor.
    error NotRequested(bytes32 inputHash);
    /// @notice The certificate's epoch is not the one the question's request pinned.
    error WrongEpoch(uint256 epoch, uint256 pinned);
    /// @notice The commitment answers another question, or at another Attestor.
    error WrongQuestion(bytes32 inputHash, bytes32 committed);
    /// @notice The commitment's verdict does not hash to `outputHash`.
    error WrongOutput(bytes32 outputHash, bytes32 committed);
    /// @notice The Attestor recorded a different answer.
    error Contradicted(bytes32 recorded);
    /// @notice Without the members slashed since the epoch started, the signers are no quorum.
    error SlashedSignersDecide(uint256 signedStake, uint256 totalStake);

    constructor(IResolverRegistry registry_) {
        registry = registry_;
    }

    /// @inheritdoc IProofVerifier
    function verify(
        bytes32 inputHash,
        bytes32 outputHash,
        bytes calldata metadata,
        bytes calldata proof
    ) external view returns (bool valid) {
        address attestor = _attestor(metadata);
        if (attestor == address(0)) return false;
        if (proof.length == 0) {
            try this.recorded(attestor, inputHash) returns (bytes32 recordedHash, uint256) {
                return recordedHash != 0 && recordedHash == outputHash;
            } catch {
                return false;
            }
        }
        try this.checkCertificate(attestor, inputHash, outputHash, proof) {
            return true;
        } catch {
            return false;
        }
    }

    /// @notice The Attestor's recorded output hash for `inputHash` (0 until attested) and the
    ///         epoch its latest request pinned; reverts unless it is on this registry.
    function recorded(address attestor, bytes32 inputHash)
        public
        view
        returns (bytes32 outputHash, uint256 epoch)
    {
        IResolverRegistry r = IAttestor(attestor).registry();
        if (r != registry) revert ForeignRegistry(attestor, r);
        return IAttestor(attestor).outputOf(inputHash);
    }

    /// @notice The certificate check of `verify` for the Attestor `attestor`, reverting with
    ///         the reason it fails.
    function checkCertificate(
        address attestor,
        bytes32 inputHash,
        bytes32 outputHash,
        bytes calldata proof
    ) external view {
        (VerdictCommitment memory c, uint256 epoch, bytes memory nonSigners, bytes memory sig) =
            abi.decode(proof, (VerdictCommitment, uint256, bytes, bytes));
        _checkClaim(attestor, inputHash, outputHash, c, epoch);
        _checkQuorum(attestor, c, epoch, nonSigners, sig);
    }

    /// @dev The commitment answers `inputHash` at `attestor` with `outputHash`, at the epoch the
    ///      question's request pinned, and the Attestor recorded no other answer.
    function _checkClaim(
        address attestor,
        bytes32 inputHash,
        bytes32 outputHash,
        VerdictCommitment memory c,
        uint256 epoch
    ) internal view {
        bytes32 committedInput = AttestationHash.inputHash(c);
        if (
            committedInput != inputHash
                || c.dealId != AttestationHash.requestId(block.chainid, attestor, inputHash)
        ) {
            revert WrongQuestion(inputHash, committedInput);
        }
        bytes32 committedOutput = AttestationHash.outputHash(c);
        if (committedOutput != outputHash) revert WrongOutput(outputHash, committedOutput);
        (bytes32 recordedHash, uint256 pinned) = recorded(attestor, inputHash);
        if (pinned == 0) revert NotRequested(inputHash);
        if (epoch != pinned) revert WrongEpoch(epoch, pinned);
        if (recordedHash != 0 && recordedHash != outputHash) revert Contradicted(recordedHash);
    }

    /// @dev The registry verifies the certificate under the Attestor's EIP-712 domain, and the
    ///      signers slashed since the epoch started do not decide it (as in `resolve`).
    function _checkQuorum(
        address attestor,
        VerdictCommitment memory c,
        uint256 epoch,
        bytes memory nonSigners,
        bytes memory sig
    ) internal view {
        bytes32 separator = VerdictHash.domainSeparator("resolvd", "1", block.chainid, attestor);
        (uint256 signedStake, uint256 totalStake) =
            registry.verifyCertificate(epoch, VerdictHash.digest(separator, c), nonSigners, sig);
        (uint256 slashedTotal, uint256 slashedSigned) = registry.slashedStake(epoch, nonSigners);
        if (slashedTotal == 0) return;
        uint256 signed = signedStake - slashedSigned;
        uint256 total = totalStake - slashedTotal;
        if (!registry.meetsThreshold(signed, total)) revert SlashedSignersDecide(signed, total);
    }

    /// @dev The attestor `metadata` names, or 0 if it is not exactly one ABI-encoded address.
    function _attestor(bytes calldata metadata) internal pure returns (address) {
        if (metadata.length != 32) return address(0);
        uint256 word = uint256(bytes32(metadata));
        if (word >> 160 != 0) return address(0);
        return address(uint160(word));
    }
}
