//! Committee snapshots: the ordered, staked key set of one epoch.

use crate::{Error, PublicKey, Result};
use alloy_primitives::{Address, U256};
use std::collections::HashSet;

/// Basis points in 100 %.
pub const BPS: u16 = 10_000;
/// The default quorum threshold: 2/3 of stake, rounded up to 6667 bps.
pub const DEFAULT_THRESHOLD_BPS: u16 = 6_667;

/// One bonded resolver in an epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// The operator's address (receives rewards, is slashed).
    pub operator: Address,
    /// The operator's BLS key (PoP-checked at registration).
    pub key: PublicKey,
    /// Bonded stake counted towards quorums.
    pub stake: U256,
}

/// The committee of one epoch: members in index order, their total stake, the
/// aggregate of all keys and the quorum threshold.
#[derive(Clone, Debug)]
pub struct Committee {
    epoch: u64,
    members: Vec<Member>,
    total_stake: U256,
    aggregate_key: PublicKey,
    threshold_bps: u16,
}

impl Committee {
    /// Builds a committee. Rejects an empty member list, zero stake, repeated
    /// keys, a threshold outside `(5000, 10000]` (at most half would allow two
    /// disjoint quorums) and stake totals that overflow.
    pub fn new(epoch: u64, members: Vec<Member>, threshold_bps: u16) -> Result<Self> {
        if members.is_empty() {
            return Err(Error::InvalidCommittee { reason: "no members" });
        }
        if members.len() > u32::MAX as usize {
            return Err(Error::InvalidCommittee { reason: "too many members" });
        }
        if threshold_bps <= BPS / 2 || threshold_bps > BPS {
            return Err(Error::InvalidCommittee {
                reason: "threshold must be in (5000, 10000] bps",
            });
        }
        let mut seen = HashSet::new();
        let mut total = U256::ZERO;
        for m in &members {
            if m.stake.is_zero() {
                return Err(Error::InvalidCommittee { reason: "member with zero stake" });
            }
            if !seen.insert(m.key.compress()) {
                return Err(Error::InvalidCommittee { reason: "repeated key" });
            }
            // Overflow would make the threshold meaningless: refuse the committee.
            total = total
                .checked_add(m.stake)
                .ok_or(Error::InvalidCommittee { reason: "total stake overflows" })?;
        }
        total
            .checked_mul(U256::from(BPS))
            .ok_or(Error::InvalidCommittee { reason: "total stake too large" })?;
        let aggregate_key = PublicKey::aggregate(members.iter().map(|m| &m.key))?;
        Ok(Self { epoch, members, total_stake: total, aggregate_key, threshold_bps })
    }

    /// The epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Members in index order.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the committee has no members (never true for a built committee).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Total stake.
    pub fn total_stake(&self) -> U256 {
        self.total_stake
    }

    /// Aggregate of every member's key.
    pub fn aggregate_key(&self) -> &PublicKey {
        &self.aggregate_key
    }

    /// Quorum threshold in basis points.
    pub fn threshold_bps(&self) -> u16 {
        self.threshold_bps
    }

    /// The member at `index`.
    pub fn member(&self, index: u32) -> Result<&Member> {
        self.members
            .get(index as usize)
            .ok_or(Error::IndexOutOfRange { index, size: self.members.len() })
    }

    /// The index of `key`, if it is a member.
    pub fn index_of(&self, key: &PublicKey) -> Option<u32> {
        self.members.iter().position(|m| m.key == *key).map(|i| i as u32)
    }

    /// `signed * 10000 >= total * threshold_bps`. Cannot overflow: the
    /// constructor checked `total * 10000` fits and `signed <= total`.
    pub fn meets_threshold(&self, signed: U256) -> bool {
        let signed = signed.min(self.total_stake);
        signed * U256::from(BPS) >= self.total_stake * U256::from(self.threshold_bps)
    }

    /// Checks that `indices` are strictly ascending members.
    pub fn check_indices(&self, indices: &[u32]) -> Result<()> {
        if indices.windows(2).any(|w| w[0] >= w[1]) {
            return Err(Error::IndicesNotAscending);
        }
        if let Some(&last) = indices.last() {
            self.member(last)?;
        }
        Ok(())
    }

    /// Stake of the members at `indices` (strictly ascending).
    pub fn stake_of(&self, indices: &[u32]) -> Result<U256> {
        self.check_indices(indices)?;
        // Sum of a subset of stakes whose total fits: no overflow.
        Ok(indices.iter().map(|&i| self.members[i as usize].stake).sum())
    }

    /// The signer indices of a certificate with these non-signers: the complement.
    pub fn complement(&self, indices: &[u32]) -> Result<Vec<u32>> {
        self.check_indices(indices)?;
        let mut skip = indices.iter().peekable();
        Ok((0..self.members.len() as u32)
            .filter(|i| {
                if skip.peek() == Some(&i) {
                    skip.next();
                    false
                } else {
                    true
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SecretKey;

    pub(crate) fn committee(stakes: &[u64], bps: u16) -> Result<Committee> {
        let members = stakes
            .iter()
            .enumerate()
            .map(|(i, s)| Member {
                operator: Address::repeat_byte(i as u8),
                key: SecretKey::from_seed(&[i as u8 + 1; 32]).unwrap().public_key(),
                stake: U256::from(*s),
            })
            .collect();
        Committee::new(7, members, bps)
    }

    #[test]
    fn threshold_rule() {
        let c = committee(&[1, 1, 1], DEFAULT_THRESHOLD_BPS).unwrap();
        assert_eq!(c.total_stake(), U256::from(3));
        // 2 of 3 = 6666.6 bps < 6667.
        assert!(!c.meets_threshold(U256::from(2)));
        assert!(c.meets_threshold(U256::from(3)));
        let c = committee(&[1, 1, 1], 6_666).unwrap();
        assert!(c.meets_threshold(U256::from(2)));
        let c = committee(&[10, 20, 70], DEFAULT_THRESHOLD_BPS).unwrap();
        assert!(c.meets_threshold(c.stake_of(&[2]).unwrap()));
        assert!(!c.meets_threshold(c.stake_of(&[0, 1]).unwrap()));
    }

    #[test]
    fn rejects_bad_committees() {
        assert!(committee(&[], DEFAULT_THRESHOLD_BPS).is_err());
        assert!(committee(&[1, 0], DEFAULT_THRESHOLD_BPS).is_err());
        assert!(committee(&[1], 5_000).is_err());
        assert!(committee(&[1], 10_001).is_err());
        let key = SecretKey::from_seed(&[1; 32]).unwrap().public_key();
        let m = Member { operator: Address::ZERO, key, stake: U256::from(1) };
        assert!(Committee::new(0, vec![m.clone(), m], DEFAULT_THRESHOLD_BPS).is_err());
        let big = Member { operator: Address::ZERO, key, stake: U256::MAX };
        assert!(Committee::new(0, vec![big], DEFAULT_THRESHOLD_BPS).is_err());
    }

    #[test]
    fn indices_and_complement() {
        let c = committee(&[1, 2, 3, 4, 5], DEFAULT_THRESHOLD_BPS).unwrap();
        assert_eq!(c.complement(&[1, 3]).unwrap(), vec![0, 2, 4]);
        assert_eq!(c.complement(&[]).unwrap(), vec![0, 1, 2, 3, 4]);
        assert_eq!(c.stake_of(&[1, 3]).unwrap(), U256::from(6));
        assert_eq!(c.check_indices(&[3, 1]), Err(Error::IndicesNotAscending));
        assert_eq!(c.check_indices(&[1, 1]), Err(Error::IndicesNotAscending));
        assert_eq!(c.check_indices(&[5]), Err(Error::IndexOutOfRange { index: 5, size: 5 }));
    }
}
