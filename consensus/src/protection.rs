//! Slashing protection: a node never signs two different commitments for one deal.
//!
//! The rule ([`decide`]) is pure: signing digest `C` for deal `D` is allowed iff
//! no record exists for `D`, or the record is `C` (re-signing is harmless: the
//! same signature). Records are keyed by (EIP-712 domain separator, dealId), so
//! deals of two escrows never collide.
//!
//! A [`ProtectionStore`] applies the rule atomically and, when it records, makes
//! the record durable before returning; [`ProtectedSigner`] only signs after
//! that. A crash after the record and before the signature leaves the record:
//! the node may later sign that same commitment, never another one.

use crate::{Error, Result, SecretKey, Signature};
use alloy_primitives::B256;
use resolvd_proto::{VerdictCommitment, VerdictDomain};

/// The key of a slashing-protection record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProtectionKey {
    /// EIP-712 domain separator (chain + escrow).
    pub domain_separator: B256,
    /// The deal.
    pub deal_id: B256,
}

impl ProtectionKey {
    /// 64 bytes: `domainSeparator ‖ dealId`, for byte-keyed stores.
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut out = [0u8; 64];
        out[..32].copy_from_slice(self.domain_separator.as_slice());
        out[32..].copy_from_slice(self.deal_id.as_slice());
        out
    }
}

/// What the rule allows for one signing request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No record: write `digest`, then sign.
    Record,
    /// The record is this digest: sign again.
    Resign,
    /// Another digest is recorded: refuse.
    Refuse {
        /// The digest already signed.
        recorded: B256,
    },
}

/// The slashing-protection rule.
pub fn decide(recorded: Option<B256>, digest: B256) -> Decision {
    match recorded {
        None => Decision::Record,
        Some(r) if r == digest => Decision::Resign,
        Some(recorded) => Decision::Refuse { recorded },
    }
}

/// Storage for slashing-protection records.
pub trait ProtectionStore {
    /// Applies [`decide`] to the record of `key` atomically; on
    /// [`Decision::Record`] it writes `digest` and returns only once the write
    /// is durable (fsync'd). Errors mean nothing may be signed.
    fn check_and_record(&mut self, key: &ProtectionKey, digest: B256) -> Result<Decision>;
}

/// In-memory records, for tests (not durable; feature `test-utils`).
#[cfg(any(test, feature = "test-utils"))]
#[derive(Debug, Default)]
pub struct MemoryStore {
    records: std::collections::HashMap<ProtectionKey, B256>,
}

#[cfg(any(test, feature = "test-utils"))]
impl ProtectionStore for MemoryStore {
    fn check_and_record(&mut self, key: &ProtectionKey, digest: B256) -> Result<Decision> {
        let decision = decide(self.records.get(key).copied(), digest);
        if decision == Decision::Record {
            self.records.insert(*key, digest);
        }
        Ok(decision)
    }
}

/// A secret key that only signs through slashing protection.
#[derive(Debug)]
pub struct ProtectedSigner<S> {
    key: SecretKey,
    store: S,
}

impl<S: ProtectionStore> ProtectedSigner<S> {
    /// Wraps `key` with `store`.
    pub fn new(key: SecretKey, store: S) -> Self {
        Self { key, store }
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Signs a commit-reveal commitment message ([`crate::COMMIT_DST`]): not
    /// a verdict signature, so no protection record is involved.
    pub fn sign_commit(&self, message: &B256) -> Signature {
        self.key.sign_commit(message)
    }

    /// Signs a member record's message ([`crate::RECORD_DST`]): not a
    /// verdict signature, so no protection record is involved.
    pub fn sign_record(&self, message: &B256) -> Signature {
        self.key.sign_record(message)
    }

    /// Signs the EIP-712 digest of `commitment` under `domain`, unless a
    /// different commitment for the same deal was signed before.
    pub fn sign(
        &mut self,
        domain: &VerdictDomain,
        commitment: &VerdictCommitment,
    ) -> Result<Signature> {
        let digest = commitment.eip712_digest(domain);
        let key = ProtectionKey {
            domain_separator: domain.eip712().separator(),
            deal_id: commitment.deal_id,
        };
        match self.store.check_and_record(&key, digest)? {
            Decision::Record | Decision::Resign => Ok(self.key.sign(&digest)),
            Decision::Refuse { recorded } => Err(Error::SlashingProtection {
                deal_id: commitment.deal_id,
                recorded,
                requested: digest,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::Address;
    use resolvd_proto::ReexecVerdict;

    fn commitment(deal: u8, outcome: ReexecVerdict) -> VerdictCommitment {
        VerdictCommitment {
            deal_id: B256::repeat_byte(deal),
            spec_hash: B256::repeat_byte(1),
            delivery_hash: B256::repeat_byte(2),
            prestate_anchor_hash: B256::repeat_byte(3),
            prestate_root: B256::repeat_byte(4),
            backend_id: B256::repeat_byte(5),
            backend_version_hash: B256::repeat_byte(6),
            outcome,
            result_hash: B256::repeat_byte(7),
            trace_hash: B256::repeat_byte(8),
        }
    }

    fn domain(escrow: u8) -> VerdictDomain {
        VerdictDomain {
            name: "resolvd".into(),
            version: "1".into(),
            chain_id: 1,
            verifying_contract: Address::repeat_byte(escrow),
        }
    }

    #[test]
    fn rule() {
        let (a, b) = (B256::repeat_byte(1), B256::repeat_byte(2));
        assert_eq!(decide(None, a), Decision::Record);
        assert_eq!(decide(Some(a), a), Decision::Resign);
        assert_eq!(decide(Some(a), b), Decision::Refuse { recorded: a });
    }

    #[test]
    fn never_signs_two_commitments_for_one_deal() {
        let key = SecretKey::from_seed(&[9; 32]).unwrap();
        let mut signer = ProtectedSigner::new(key, MemoryStore::default());
        let d = domain(1);
        let ok = commitment(1, ReexecVerdict::Reproduced);
        let s1 = signer.sign(&d, &ok).unwrap();
        // Re-signing the same commitment gives the same signature.
        assert_eq!(signer.sign(&d, &ok).unwrap(), s1);
        let err = signer.sign(&d, &commitment(1, ReexecVerdict::Failed)).unwrap_err();
        assert!(matches!(err, Error::SlashingProtection { .. }), "{err}");
        // Another deal, or the same deal id at another escrow, is independent.
        signer.sign(&d, &commitment(2, ReexecVerdict::Failed)).unwrap();
        signer.sign(&domain(2), &commitment(1, ReexecVerdict::Failed)).unwrap();
    }
}
