//! Content hashes: `SHA-256("reckn/v1/" || typeTag || canonicalBytes)`.
//!
//! The rule is seed 004's, kept byte-compatible. There is no separator between
//! the type tag and the bytes, so the set of type tags must be prefix-free (no tag
//! is a prefix of another): then the hashed preimage names its type unambiguously.
//! [`TYPE_TAGS`] lists them all and a test enforces the property.

use crate::{codec::Canonical, CommittedError, ContentHash};
use sha2::{Digest, Sha256};

/// The domain prefix of every content hash.
pub const HASH_DOMAIN: &[u8] = b"reckn/v1/";

/// Every type tag in use, with the type it names.
pub const TYPE_TAGS: &[(&str, &str)] = &[
    ("spec", "SpecV1"),
    ("delivery", "DeliveryV1"),
    ("prestate-anchor", "PrestateAnchorV1"),
    ("evm-anchor", "EvmAnchorV1 (the body of an EVM prestate anchor)"),
    ("evm-call-plan", "EvmCallPlanV1 (the execution plan of an EVM delivery)"),
    ("evm-witness", "EvmWitnessV1 (the replay witness of an EVM delivery)"),
    ("predicate", "PredicateCommitmentV1"),
    ("reexec-request", "ReexecRequestV1"),
    ("verdict-envelope", "VerdictEnvelopeV1"),
    ("replay-record", "ReplayRecordV1 (its hash is the traceHash)"),
    ("evm-return-data", "raw EVM return data (its hash is the resultHash)"),
    ("execution-schema", "the name of an execution schema (its hash is executionSchemaHash)"),
    ("backend-id", "the name of a replay backend (its hash is a backendId)"),
    (
        "backend-version",
        "a replay backend's exact configuration (its hash is a backendVersionHash)",
    ),
];

/// `SHA-256("reckn/v1/" || type_tag || bytes)`.
pub fn content_hash(type_tag: &str, bytes: &[u8]) -> ContentHash {
    let digest = Sha256::new()
        .chain_update(HASH_DOMAIN)
        .chain_update(type_tag.as_bytes())
        .chain_update(bytes)
        .finalize();
    ContentHash::from_slice(&digest)
}

/// A canonical type that is addressed by its content hash.
pub trait ContentType: Canonical {
    /// The type tag hashed in front of the canonical bytes.
    const TYPE_TAG: &'static str;

    /// The content hash of this value's canonical bytes.
    fn content_hash(&self) -> ContentHash {
        content_hash(Self::TYPE_TAG, &self.to_canonical_bytes())
    }
}

/// Hash before parse: checks that `bytes` hash to `expected` under `T`'s type
/// tag, and only then decodes them.
pub fn decode_committed<T: ContentType>(
    bytes: &[u8],
    expected: &ContentHash,
) -> Result<T, CommittedError> {
    let computed = content_hash(T::TYPE_TAG, bytes);
    if computed != *expected {
        return Err(CommittedError::HashMismatch {
            type_tag: T::TYPE_TAG,
            expected: *expected,
            computed,
        });
    }
    T::from_canonical_bytes(bytes)
        .map_err(|source| CommittedError::Decode { type_tag: T::TYPE_TAG, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_tags_are_prefix_free() {
        for (a, _) in TYPE_TAGS {
            for (b, _) in TYPE_TAGS {
                assert!(a == b || !b.starts_with(a), "type tag {a:?} is a prefix of {b:?}");
            }
        }
    }

    #[test]
    fn hash_matches_plain_sha256_of_preimage() {
        // SHA-256("reckn/v1/evm-return-data") of empty return data, computed
        // independently with coreutils: printf 'reckn/v1/evm-return-data' | sha256sum
        let h = content_hash("evm-return-data", &[]);
        assert_eq!(
            h.to_string(),
            "0xb93ea97034fab31a5d54b0ecbf65fd1868ce7602a982b22d12a642aa6058ef04"
        );
    }
}
