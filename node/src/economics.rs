//! The operator's profit and loss, from the chain: fee rewards earned
//! (claimed and still pending), gas refunds credited to the account as the
//! sender of `resolve`, and the gas the account paid.
//!
//! [`crate::chain::Chain::update_ledger`] scans the served escrows' `FeeDistributed` and
//! `RewardsClaimed` logs from where it stopped, then reads what is pending
//! (`pendingRewards` for every (token, epoch) that received fees) and what the
//! escrows hold for the account (`claimable`). The node refreshes it every
//! 30 s and persists it (so a restart does not rescan); `/status` shows it
//! and the metrics export it. `resolvd rewards` claims.

use alloy_primitives::{Address, U256};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Profit and loss of one resolver and its account.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub struct Ledger {
    /// Last block whose fee logs were scanned.
    pub scanned_to: u64,
    /// Per deal token.
    pub tokens: BTreeMap<Address, TokenLedger>,
    /// Wei the account paid for its mined transactions (reverted ones
    /// included), over the life of this data dir.
    pub gas_spent_wei: U256,
    /// `resolve` transactions this account got a fee refund for.
    pub resolves_refunded: u64,
}

/// One token's side of the [`Ledger`].
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub struct TokenLedger {
    /// Epochs that received fees in this token (rewards may be pending there).
    pub epochs: BTreeSet<u64>,
    /// Rewards the resolver claimed (`RewardsClaimed`).
    pub claimed: U256,
    /// Rewards accrued and not claimed yet (`pendingRewards` over `epochs`).
    pub pending: U256,
    /// Gas refunds credited to the account for sending `resolve`.
    pub refunds: U256,
    /// What the escrows hold for the account now (refunds not claimed yet).
    pub claimable: U256,
}

impl TokenLedger {
    /// Fees earned as a signer: claimed plus pending.
    pub fn earned(&self) -> U256 {
        self.claimed + self.pending
    }
}

impl Ledger {
    /// Applies fee events of `resolver` / `account`.
    pub fn apply(&mut self, events: &[FeeEvent], account: Option<Address>) {
        for e in events {
            match e {
                FeeEvent::Distributed { token, epoch, submitter, refund } => {
                    let t = self.tokens.entry(*token).or_default();
                    t.epochs.insert(*epoch);
                    if Some(*submitter) == account {
                        t.refunds += *refund;
                        self.resolves_refunded += 1;
                    }
                }
                FeeEvent::Claimed { token, amount } => {
                    self.tokens.entry(*token).or_default().claimed += *amount;
                }
            }
        }
    }
}

/// A fee event of an escrow ([`crate::chain::Chain::fee_events`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FeeEvent {
    /// A certificate's fee was paid out.
    Distributed {
        /// The deal token.
        token: Address,
        /// The deal's pinned epoch (whose signers accrued).
        epoch: u64,
        /// Who sent `resolve` (credited the refund).
        submitter: Address,
        /// The refund credited to it.
        refund: U256,
    },
    /// The resolver claimed rewards.
    Claimed {
        /// The token.
        token: Address,
        /// The amount sent.
        amount: U256,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_add_up_per_token_and_only_own_refunds_count() {
        let (t1, t2) = (Address::repeat_byte(1), Address::repeat_byte(2));
        let me = Address::repeat_byte(9);
        let mut l = Ledger::default();
        let distributed = |token, epoch, submitter, refund: u64| FeeEvent::Distributed {
            token,
            epoch,
            submitter,
            refund: U256::from(refund),
        };
        l.apply(
            &[
                distributed(t1, 3, me, 10),
                distributed(t1, 4, Address::repeat_byte(8), 99),
                distributed(t2, 3, me, 5),
                FeeEvent::Claimed { token: t1, amount: U256::from(700) },
            ],
            Some(me),
        );
        assert_eq!(l.tokens[&t1].epochs, BTreeSet::from([3, 4]));
        assert_eq!(l.tokens[&t1].refunds, U256::from(10));
        assert_eq!(l.tokens[&t2].refunds, U256::from(5));
        assert_eq!(l.resolves_refunded, 2);
        let mut t = l.tokens[&t1].clone();
        t.pending = U256::from(300);
        assert_eq!(t.earned(), U256::from(1000));
        let back: Ledger = serde_json::from_str(&serde_json::to_string(&l).unwrap()).unwrap();
        assert_eq!(back, l);
    }
}
