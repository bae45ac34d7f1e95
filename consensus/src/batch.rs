//! Batch verification of partial signatures.
//!
//! - **Same digest** ([`verify_same_digest`]): aggregate the keys and the
//!   signatures and run ONE pairing check; if it fails, bisect to find the
//!   invalid partials (`O(k log n)` checks for `k` bad ones). There are no
//!   random coefficients (they would cost two multi-scalar multiplications,
//!   far more than the pairing). So two colluding signers can submit partials
//!   that are each invalid but cancel in the sum; the batch then accepts both.
//!   That cannot forge anything (their keys are in the aggregate and proven by
//!   PoP), but such a partial is not evidence on its own: [`crate::conflict`]
//!   re-verifies every aggregate before it becomes slashing evidence, and the
//!   certificate builder checks every certificate once before emitting it.
//! - **Different digests** ([`verify_distinct`]): blst's multi-verification
//!   with 64-bit random scalars, derived from a caller-supplied seed (this crate
//!   draws no randomness itself). Falls back to one check per item on failure.

use crate::{PublicKey, Signature, COMMIT_DST, SIGNATURE_DST};
use alloy_primitives::B256;
use blst::{blst_scalar, BLST_ERROR};
use sha2::{Digest, Sha256};

/// One partial to check: a key, the digest it signed, its signature.
#[derive(Clone, Copy, Debug)]
pub struct Item<'a> {
    /// Signer key.
    pub key: &'a PublicKey,
    /// Signature.
    pub signature: &'a Signature,
}

fn aggregate_ok(digest: &B256, items: &[Item<'_>]) -> bool {
    let Ok(key) = PublicKey::aggregate(items.iter().map(|i| i.key)) else { return false };
    let Ok(sig) = Signature::aggregate(items.iter().map(|i| i.signature)) else { return false };
    sig.verify(&key, digest).is_ok()
}

fn bisect(digest: &B256, items: &[Item<'_>], offset: usize, invalid: &mut Vec<usize>) {
    if aggregate_ok(digest, items) {
        return;
    }
    if items.len() == 1 {
        invalid.push(offset);
        return;
    }
    let mid = items.len() / 2;
    bisect(digest, &items[..mid], offset, invalid);
    bisect(digest, &items[mid..], offset + mid, invalid);
}

/// Verifies partials that all signed `digest`. Returns the indices (into
/// `items`) of the invalid ones, ascending; empty means all passed the
/// aggregate check.
pub fn verify_same_digest(digest: &B256, items: &[Item<'_>]) -> Vec<usize> {
    let mut invalid = Vec::new();
    if !items.is_empty() {
        bisect(digest, items, 0, &mut invalid);
    }
    invalid
}

/// 64-bit non-zero scalars derived from `seed`: `SHA-256(seed ‖ i)[..8]`.
fn scalars(seed: &[u8; 32], n: usize) -> Vec<blst_scalar> {
    (0..n as u64)
        .map(|i| {
            let h = Sha256::new().chain_update(seed).chain_update(i.to_le_bytes()).finalize();
            let mut b = [0u8; 32];
            b[..8].copy_from_slice(&h[..8]);
            b[0] |= 1; // never zero
            blst_scalar { b }
        })
        .collect()
}

/// Verifies partials over (possibly) different digests with one randomised
/// multi-pairing. Returns the indices of the invalid ones, ascending.
///
/// `seed` must be unpredictable to whoever produced the signatures (draw it
/// from the OS at the call site).
pub fn verify_distinct(items: &[(B256, Item<'_>)], seed: &[u8; 32]) -> Vec<usize> {
    verify_distinct_under(items, SIGNATURE_DST, seed)
}

/// [`verify_distinct`] for commit-reveal commitment signatures ([`COMMIT_DST`]).
pub fn verify_commits(items: &[(B256, Item<'_>)], seed: &[u8; 32]) -> Vec<usize> {
    verify_distinct_under(items, COMMIT_DST, seed)
}

fn verify_one(dst: &[u8], digest: &B256, item: &Item<'_>) -> bool {
    if dst == COMMIT_DST {
        item.signature.verify_commit(item.key, digest).is_ok()
    } else {
        item.signature.verify(item.key, digest).is_ok()
    }
}

fn verify_distinct_under(items: &[(B256, Item<'_>)], dst: &[u8], seed: &[u8; 32]) -> Vec<usize> {
    match items {
        [] => return Vec::new(),
        [(digest, item)] => return if verify_one(dst, digest, item) { vec![] } else { vec![0] },
        _ => {}
    }
    let msgs: Vec<&[u8]> = items.iter().map(|(d, _)| d.as_slice()).collect();
    let pks: Vec<&blst::min_pk::PublicKey> = items.iter().map(|(_, i)| &i.key.0).collect();
    let sigs: Vec<&blst::min_pk::Signature> = items.iter().map(|(_, i)| &i.signature.0).collect();
    let rands = scalars(seed, items.len());
    let ok = blst::min_pk::Signature::verify_multiple_aggregate_signatures(
        &msgs, dst, &pks, false, &sigs, false, &rands, 64,
    ) == BLST_ERROR::BLST_SUCCESS;
    if ok {
        return Vec::new();
    }
    items.iter().enumerate().filter(|(_, (d, i))| !verify_one(dst, d, i)).map(|(n, _)| n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SecretKey;

    fn keys(n: u8) -> Vec<SecretKey> {
        (0..n).map(|i| SecretKey::from_seed(&[i.wrapping_add(100); 32]).unwrap()).collect()
    }

    #[test]
    fn same_digest_finds_every_bad_partial() {
        let digest = B256::repeat_byte(1);
        let sks = keys(9);
        let pks: Vec<_> = sks.iter().map(SecretKey::public_key).collect();
        let mut sigs: Vec<_> = sks.iter().map(|s| s.sign(&digest)).collect();
        let items = |sigs: &[Signature]| -> Vec<usize> {
            let items: Vec<Item<'_>> =
                pks.iter().zip(sigs).map(|(key, signature)| Item { key, signature }).collect();
            verify_same_digest(&digest, &items)
        };
        assert!(items(&sigs).is_empty());
        // Signatures over another digest at positions 2 and 7.
        sigs[2] = sks[2].sign(&B256::repeat_byte(2));
        sigs[7] = sks[7].sign(&B256::repeat_byte(3));
        assert_eq!(items(&sigs), vec![2, 7]);
        // The documented limit: two partials that are wrong individually but
        // cancel in the sum (here: swapped between signers 0 and 1) pass while
        // they stay in one aggregate. Each is still caught on its own.
        sigs.swap(0, 1);
        assert_eq!(items(&sigs), vec![2, 7]);
        assert!(sigs[0].verify(&pks[0], &digest).is_err());
    }

    #[test]
    fn distinct_digests_with_random_scalars() {
        let sks = keys(5);
        let pks: Vec<_> = sks.iter().map(SecretKey::public_key).collect();
        let digests: Vec<B256> = (0..5).map(|i| B256::repeat_byte(i + 10)).collect();
        let mut sigs: Vec<_> = sks.iter().zip(&digests).map(|(s, d)| s.sign(d)).collect();
        let check = |sigs: &[Signature]| {
            let items: Vec<(B256, Item<'_>)> = digests
                .iter()
                .zip(pks.iter().zip(sigs))
                .map(|(d, (key, signature))| (*d, Item { key, signature }))
                .collect();
            verify_distinct(&items, &[42u8; 32])
        };
        assert!(check(&sigs).is_empty());
        sigs[3] = sks[3].sign(&B256::ZERO);
        assert_eq!(check(&sigs), vec![3]);
    }

    #[test]
    fn commitment_batches_use_their_own_dst() {
        let sks = keys(4);
        let pks: Vec<_> = sks.iter().map(SecretKey::public_key).collect();
        let messages: Vec<B256> = (0..4).map(|i| B256::repeat_byte(i + 20)).collect();
        let mut sigs: Vec<_> = sks.iter().zip(&messages).map(|(s, m)| s.sign_commit(m)).collect();
        fn items<'a>(
            messages: &[B256],
            pks: &'a [PublicKey],
            sigs: &'a [Signature],
        ) -> Vec<(B256, Item<'a>)> {
            messages
                .iter()
                .zip(pks.iter().zip(sigs))
                .map(|(m, (key, signature))| (*m, Item { key, signature }))
                .collect()
        }
        assert!(verify_commits(&items(&messages, &pks, &sigs), &[7u8; 32]).is_empty());
        // Verdict signatures over the same messages are not commitments.
        assert_eq!(verify_distinct(&items(&messages, &pks, &sigs), &[7u8; 32]), vec![0, 1, 2, 3]);
        sigs[1] = sks[1].sign(&messages[1]);
        assert_eq!(verify_commits(&items(&messages, &pks, &sigs), &[7u8; 32]), vec![1]);
    }
}
