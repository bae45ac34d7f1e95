// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {EscrowFees} from "./EscrowFees.sol";
import {EscrowStorage} from "./EscrowStorage.sol";
import {Deal} from "./interfaces/IEscrow.sol";
import {IResolverRegistry} from "./interfaces/IResolverRegistry.sol";
import {Delegate} from "./libraries/Delegate.sol";
import {VerdictCommitment, VerdictHash} from "./libraries/VerdictHash.sol";

/// @title VerdictContract
/// @notice What the Escrow and the Attestor share beyond storage: the EIP-712 domain their
///         verdicts are signed under (name "resolvd", version "1", chain id, own address), the
///         EscrowFees contract deployed by the constructor and run by DELEGATECALL from the
///         fallback on this contract's storage, and the deal record the nodes read.
abstract contract VerdictContract is EscrowStorage {
    /// @notice The EscrowFees contract this contract runs its fee and reward functions on (by
    ///         DELEGATECALL from the fallback, on this contract's storage): deployed by the
    ///         constructor, never changed.
    address public immutable fees;

    uint256 internal immutable _cachedChainId;
    bytes32 internal immutable _cachedDomainSeparator;

    constructor(IResolverRegistry registry_, address owner_) EscrowStorage(registry_, owner_) {
        fees = _deployFees(registry_);
        _cachedChainId = block.chainid;
        _cachedDomainSeparator =
            VerdictHash.domainSeparator(NAME, VERSION, block.chainid, address(this));
    }

    /// @notice Every function of EscrowFees (`includeSigners`, `distributeFee`, `claimRewards`,
    ///         `settleExclusions`, `pendingRewards`, `sweepSlashedRewards`, `exclusionCount`,
    ///         `flushSink`, `recoverExcess`), run on this contract's storage. Takes no ether: EscrowFees'
    ///         functions are not payable, so a call with value reverts.
    fallback() external {
        Delegate.forward(fees);
    }

    /// @notice A deal's record (an Attestor's requests are deals in the same layout).
    function deal(bytes32 dealId) external view returns (Deal memory) {
        return _deals[dealId];
    }

    /// @notice The EIP-712 domain separator verdicts for this contract are signed under.
    function domainSeparator() public view returns (bytes32) {
        if (block.chainid == _cachedChainId) return _cachedDomainSeparator;
        return VerdictHash.domainSeparator(NAME, VERSION, block.chainid, address(this));
    }

    /// @notice The digest resolvers sign for `commitment`.
    function verdictDigest(VerdictCommitment calldata commitment) external view returns (bytes32) {
        return VerdictHash.digest(domainSeparator(), commitment);
    }

    /// @dev Deploys the fee and reward code. Virtual only so that test/mutants can break it.
    function _deployFees(IResolverRegistry registry_) internal virtual returns (address) {
        return address(new EscrowFees(registry_));
    }
}
