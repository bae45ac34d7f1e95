//! Committee snapshots: the ordered, staked key set of one epoch.

use crate::{Error, PublicKey, Result};
use alloy_primitives::{Address, U256, U512};
use std::collections::HashSet;

/// Basis points in 100 %.
pub const BPS: u16 = 10_000;
/// 2/3 of stake rounded up to basis points. Deprecated: the registry's
/// threshold is the exact fraction [`Threshold::TWO_THIRDS`]; 6667 bps demands
/// 3 of 3 where 2/3 accepts 2 of 3. Kept for [`Committee::new`] callers.
pub const DEFAULT_THRESHOLD_BPS: u16 = 6_667;

/// A quorum threshold as an exact fraction of stake, the rule of
/// `ResolverRegistry.meetsThreshold`: `signed * denominator >= total *
/// numerator`, with `1/2 < numerator/denominator <= 1` (two quorums always
/// overlap) and `denominator <= 2^64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Threshold {
    numerator: u64,
    denominator: u64,
}

impl Threshold {
    /// Two thirds, the default: two conflicting quorums overlap in at least a
    /// third of the stake.
    pub const TWO_THIRDS: Self = Self { numerator: 2, denominator: 3 };

    /// `numerator / denominator`; rejects fractions of at most one half, above
    /// one, or with a zero denominator.
    pub fn new(numerator: u64, denominator: u64) -> Result<Self> {
        if denominator == 0
            || u128::from(numerator) * 2 <= u128::from(denominator)
            || numerator > denominator
        {
            return Err(Error::InvalidCommittee { reason: "threshold must be in (1/2, 1]" });
        }
        Ok(Self { numerator, denominator })
    }

    /// `bps / 10000` (the pre-fraction registry parameter).
    pub fn from_bps(bps: u16) -> Result<Self> {
        Self::new(u64::from(bps), u64::from(BPS))
    }

    /// The numerator.
    pub fn numerator(&self) -> u64 {
        self.numerator
    }

    /// The denominator.
    pub fn denominator(&self) -> u64 {
        self.denominator
    }

    /// Whether `signed` of `total` stake meets the threshold. Like the
    /// contract: an empty total never does, nor does `signed > total`. No
    /// overflow: both products are computed in 512 bits.
    pub fn is_met(&self, signed: U256, total: U256) -> bool {
        if total.is_zero() || signed > total {
            return false;
        }
        let lhs = U512::from(signed) * U512::from(self.denominator);
        let rhs = U512::from(total) * U512::from(self.numerator);
        lhs >= rhs
    }

    /// The threshold rounded up to basis points (as `thresholdBps()` reports).
    pub fn ceil_bps(&self) -> u16 {
        let bps =
            (u128::from(self.numerator) * u128::from(BPS)).div_ceil(u128::from(self.denominator));
        // numerator <= denominator, so bps <= 10000.
        u16::try_from(bps).unwrap_or(BPS)
    }
}

impl std::fmt::Display for Threshold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.numerator, self.denominator)
    }
}

/// One bonded resolver in an epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// The resolver's registry index: stable across epochs, so certificates
    /// and evidence name the same resolver by the same number in every epoch.
    pub index: u32,
    /// The operator's address (receives rewards, is slashed).
    pub operator: Address,
    /// The operator's BLS key (PoP-checked at registration).
    pub key: PublicKey,
    /// Bonded stake counted towards quorums.
    pub stake: U256,
}

/// The committee of one epoch: members in ascending registry-index order
/// (indices may have gaps where resolvers left), their total stake, the
/// aggregate of all keys and the quorum threshold.
#[derive(Clone, Debug)]
pub struct Committee {
    epoch: u64,
    members: Vec<Member>,
    total_stake: U256,
    aggregate_key: PublicKey,
    threshold: Threshold,
}

impl Committee {
    /// Builds a committee with a threshold in basis points (`bps / 10000`).
    ///
    /// Deprecated in favour of [`Self::with_threshold`]: the registry's
    /// threshold is an exact fraction (`thresholdNumerator()` /
    /// `thresholdDenominator()`), and a bps approximation of 2/3 (6667) needs
    /// more signers than the contract in small committees.
    pub fn new(epoch: u64, members: Vec<Member>, threshold_bps: u16) -> Result<Self> {
        if threshold_bps <= BPS / 2 || threshold_bps > BPS {
            return Err(Error::InvalidCommittee {
                reason: "threshold must be in (5000, 10000] bps",
            });
        }
        Self::with_threshold(epoch, members, Threshold::from_bps(threshold_bps)?)
    }

    /// Builds a committee. Rejects an empty member list, indices that are not
    /// strictly ascending, zero stake, repeated keys and stake totals that
    /// overflow.
    pub fn with_threshold(epoch: u64, members: Vec<Member>, threshold: Threshold) -> Result<Self> {
        if members.is_empty() {
            return Err(Error::InvalidCommittee { reason: "no members" });
        }
        if members.windows(2).any(|w| w[0].index >= w[1].index) {
            return Err(Error::InvalidCommittee {
                reason: "member indices not strictly ascending",
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
        Ok(Self { epoch, members, total_stake: total, aggregate_key, threshold })
    }

    /// The epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Members in ascending index order.
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

    /// The quorum threshold.
    pub fn threshold(&self) -> Threshold {
        self.threshold
    }

    /// The quorum threshold rounded up to basis points (deprecated: see
    /// [`Self::threshold`]).
    pub fn threshold_bps(&self) -> u16 {
        self.threshold.ceil_bps()
    }

    /// The member with registry index `index`.
    pub fn member(&self, index: u32) -> Result<&Member> {
        self.members
            .binary_search_by_key(&index, |m| m.index)
            .map(|pos| &self.members[pos])
            .map_err(|_| Error::IndexOutOfRange { index, size: self.members.len() })
    }

    /// The registry index of `key`, if it is a member.
    pub fn index_of(&self, key: &PublicKey) -> Option<u32> {
        self.members.iter().find(|m| m.key == *key).map(|m| m.index)
    }

    /// Whether `signed` stake meets the threshold ([`Threshold::is_met`],
    /// the registry's rule; `signed` above the total counts as the total).
    pub fn meets_threshold(&self, signed: U256) -> bool {
        self.threshold.is_met(signed.min(self.total_stake), self.total_stake)
    }

    /// The members at `indices`, which must be strictly ascending member indices.
    pub fn members_at(&self, indices: &[u32]) -> Result<Vec<&Member>> {
        if indices.windows(2).any(|w| w[0] >= w[1]) {
            return Err(Error::IndicesNotAscending);
        }
        indices.iter().map(|&i| self.member(i)).collect()
    }

    /// Checks that `indices` are strictly ascending member indices.
    pub fn check_indices(&self, indices: &[u32]) -> Result<()> {
        self.members_at(indices).map(drop)
    }

    /// Stake of the members at `indices` (strictly ascending).
    pub fn stake_of(&self, indices: &[u32]) -> Result<U256> {
        // Sum of a subset of stakes whose total fits: no overflow.
        Ok(self.members_at(indices)?.iter().map(|m| m.stake).sum())
    }

    /// The registry's position bitmap of the members at `indices` (strictly
    /// ascending): bit `p & 7` of byte `p >> 3` is set for the member at
    /// position `p` (ascending index order, as `epochMembers`), and the
    /// bitmap is `ceil(len / 8)` bytes. This is the non-signer form that
    /// `resolve(commitment, bytes, signature)` reads without a search.
    pub fn position_bitmap(&self, indices: &[u32]) -> Result<Vec<u8>> {
        if indices.windows(2).any(|w| w[0] >= w[1]) {
            return Err(Error::IndicesNotAscending);
        }
        let mut bitmap = vec![0u8; self.members.len().div_ceil(8)];
        for &index in indices {
            let p = self
                .members
                .binary_search_by_key(&index, |m| m.index)
                .map_err(|_| Error::IndexOutOfRange { index, size: self.members.len() })?;
            bitmap[p >> 3] |= 1 << (p & 7);
        }
        Ok(bitmap)
    }

    /// The member indices not in `indices` (e.g. a certificate's signers from
    /// its non-signers).
    pub fn complement(&self, indices: &[u32]) -> Result<Vec<u32>> {
        self.check_indices(indices)?;
        Ok(self
            .members
            .iter()
            .map(|m| m.index)
            .filter(|i| indices.binary_search(i).is_err())
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
                index: i as u32,
                operator: Address::repeat_byte(i as u8),
                key: SecretKey::from_seed(&[i as u8 + 1; 32]).unwrap().public_key(),
                stake: U256::from(*s),
            })
            .collect();
        Committee::new(7, members, bps)
    }

    #[test]
    fn position_bitmap_is_by_position_not_by_registry_index() {
        // Ten members with registry indices 3, 7, 11, ... (not their positions).
        let members = (0..10u32)
            .map(|p| Member {
                index: 3 + 4 * p,
                operator: Address::repeat_byte(p as u8),
                key: SecretKey::from_seed(&[p as u8 + 1; 32]).unwrap().public_key(),
                stake: U256::from(1),
            })
            .collect();
        let c = Committee::new(7, members, DEFAULT_THRESHOLD_BPS).unwrap();
        assert_eq!(c.position_bitmap(&[]).unwrap(), vec![0, 0]);
        // Index 3 is position 0, 7 position 1, 31 position 7, 39 position 9.
        assert_eq!(c.position_bitmap(&[3, 7, 31, 39]).unwrap(), vec![0b1000_0011, 0b10]);
        assert!(matches!(c.position_bitmap(&[4]), Err(Error::IndexOutOfRange { index: 4, .. })));
        assert!(matches!(c.position_bitmap(&[7, 3]), Err(Error::IndicesNotAscending)));
        assert!(matches!(c.position_bitmap(&[7, 7]), Err(Error::IndicesNotAscending)));
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
    fn exact_fraction_threshold_agrees_with_the_registry() {
        let members = committee(&[1, 1, 1], DEFAULT_THRESHOLD_BPS).unwrap().members().to_vec();
        let c = Committee::with_threshold(7, members, Threshold::TWO_THIRDS).unwrap();
        // Exactly 2/3: two of three equal members are a quorum, one is not.
        assert!(c.meets_threshold(U256::from(2)));
        assert!(!c.meets_threshold(U256::from(1)));
        assert_eq!(c.threshold_bps(), 6_667);
        let t = Threshold::TWO_THIRDS;
        assert!(t.is_met(U256::from(2000), U256::from(3000)));
        assert!(!t.is_met(U256::from(1999), U256::from(3000)));
        assert!(!t.is_met(U256::ZERO, U256::ZERO));
        assert!(!t.is_met(U256::from(4), U256::from(3)));
        assert!(t.is_met(U256::MAX, U256::MAX), "no overflow");
        assert_eq!(Threshold::from_bps(6_667).unwrap().ceil_bps(), 6_667);
        assert!(!Threshold::from_bps(6_667).unwrap().is_met(U256::from(2), U256::from(3)));
        assert!(Threshold::new(1, 2).is_err());
        assert!(Threshold::new(4, 3).is_err());
        assert!(Threshold::new(0, 0).is_err());
        assert!(Threshold::new(1, 1).is_ok());
        assert_eq!(Threshold::TWO_THIRDS.to_string(), "2/3");
    }

    #[test]
    fn rejects_bad_committees() {
        assert!(committee(&[], DEFAULT_THRESHOLD_BPS).is_err());
        assert!(committee(&[1, 0], DEFAULT_THRESHOLD_BPS).is_err());
        assert!(committee(&[1], 5_000).is_err());
        assert!(committee(&[1], 10_001).is_err());
        let key = SecretKey::from_seed(&[1; 32]).unwrap().public_key();
        let m = Member { index: 0, operator: Address::ZERO, key, stake: U256::from(1) };
        let other = SecretKey::from_seed(&[2; 32]).unwrap().public_key();
        let m2 = Member { index: 1, key: other, ..m.clone() };
        assert!(Committee::new(0, vec![m2.clone(), m.clone()], DEFAULT_THRESHOLD_BPS).is_err());
        assert!(Committee::new(
            0,
            vec![m.clone(), Member { index: 1, ..m.clone() }],
            DEFAULT_THRESHOLD_BPS
        )
        .is_err());
        assert!(Committee::new(0, vec![m.clone(), m2], DEFAULT_THRESHOLD_BPS).is_ok());
        let big = Member { index: 0, operator: Address::ZERO, key, stake: U256::MAX };
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

    #[test]
    fn sparse_registry_indices() {
        // Resolvers 1 and 3 left: the epoch holds indices 0, 2, 4.
        let members: Vec<Member> = [0u32, 2, 4]
            .iter()
            .map(|&i| Member {
                index: i,
                operator: Address::ZERO,
                key: SecretKey::from_seed(&[i as u8 + 1; 32]).unwrap().public_key(),
                stake: U256::from(1),
            })
            .collect();
        let c = Committee::new(9, members, DEFAULT_THRESHOLD_BPS).unwrap();
        assert_eq!(c.complement(&[2]).unwrap(), vec![0, 4]);
        assert!(matches!(c.check_indices(&[1]), Err(Error::IndexOutOfRange { index: 1, .. })));
        assert_eq!(c.member(4).unwrap().index, 4);
    }
}
