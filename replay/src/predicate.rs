//! Predicate evaluation over the replay's return data and post-state.

use crate::{state::VerifiedState, OperationalError};
use alloy_primitives::{keccak256, Address, B256, U256};
use resolvd_proto::{PredicateCommitmentV1, SlotBounds};
use revm::state::EvmState;

/// The post-state word of a slot: the replay's write if any, else the proven
/// pre-state (so every slot a predicate reads must be in the witness).
fn post(
    address: Address,
    slot: B256,
    pre: &VerifiedState,
    changes: &EvmState,
) -> Result<U256, OperationalError> {
    let written = changes
        .get(&address)
        .and_then(|a| a.storage.get(&U256::from_be_bytes(slot.0)))
        .map(|s| s.present_value);
    match written {
        Some(v) => Ok(v),
        None => pre.storage(address, slot),
    }
}

fn within(value: U256, c: &SlotBounds) -> bool {
    c.min <= value && value <= c.max
}

/// Evaluates `predicate`. An unproven slot is an operational error, not `false`.
pub fn evaluate(
    predicate: &PredicateCommitmentV1,
    output: &[u8],
    pre: &VerifiedState,
    changes: &EvmState,
) -> Result<bool, OperationalError> {
    match predicate {
        PredicateCommitmentV1::ResultEquals(r) => Ok(keccak256(output) == r.expected_result_hash),
        PredicateCommitmentV1::PoststateEquals(c) => {
            for check in &c.checks {
                if post(check.address, check.slot, pre, changes)? != check.expected {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        PredicateCommitmentV1::PoststateBounded(c) => {
            for check in &c.checks {
                if !within(post(check.address, check.slot, pre, changes)?, check) {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        PredicateCommitmentV1::PoststateDelta(c) => {
            for check in &c.checks {
                let before = pre.storage(check.address, check.slot)?;
                let after = post(check.address, check.slot, pre, changes)?;
                if !within(after.saturating_sub(before), check) {
                    return Ok(false);
                }
            }
            Ok(true)
        }
    }
}
