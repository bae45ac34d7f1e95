//! `resolvd inspect`: decode canonical content exactly as a node would.

use resolvd_proto::{
    decode_committed, CommittedError, ContentHash, ContentType, DeliveryV1, EvmAnchorV1,
    EvmCallPlanV1, EvmWitnessV1, PredicateCommitmentV1, PrestateAnchorV1, ReexecRequestV1,
    ReplayRecordV1, SpecV1, VerdictEnvelopeV1,
};
use serde::Serialize;

/// The content types `inspect` decodes (CLI values: `spec`, `delivery`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ContentKind {
    /// `SpecV1`.
    Spec,
    /// `DeliveryV1`.
    Delivery,
    /// `PrestateAnchorV1`.
    PrestateAnchor,
    /// `EvmAnchorV1`.
    EvmAnchor,
    /// `EvmCallPlanV1`.
    EvmCallPlan,
    /// `PredicateCommitmentV1`.
    Predicate,
    /// `ReexecRequestV1`.
    ReexecRequest,
    /// `ReplayRecordV1`.
    ReplayRecord,
    /// `VerdictEnvelopeV1`.
    VerdictEnvelope,
    /// `EvmWitnessV1`.
    EvmWitness,
}

/// What `inspect` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The type tag the hash is taken under.
    pub type_tag: &'static str,
    /// The content hash of the bytes.
    pub hash: ContentHash,
    /// The decoded value.
    pub value: serde_json::Value,
}

fn decode<T: ContentType + Serialize>(
    bytes: &[u8],
    expect: Option<&ContentHash>,
) -> Result<Report, CommittedError> {
    let value: T = match expect {
        Some(hash) => decode_committed(bytes, hash)?,
        None => T::from_canonical_bytes(bytes)
            .map_err(|source| CommittedError::Decode { type_tag: T::TYPE_TAG, source })?,
    };
    Ok(Report {
        type_tag: T::TYPE_TAG,
        hash: value.content_hash(),
        value: serde_json::to_value(&value).expect("content types serialise to JSON"),
    })
}

/// Decodes `bytes` as `kind`; with `expect`, checks the hash before parsing.
pub fn inspect(
    kind: ContentKind,
    bytes: &[u8],
    expect: Option<&ContentHash>,
) -> Result<Report, CommittedError> {
    match kind {
        ContentKind::Spec => decode::<SpecV1>(bytes, expect),
        ContentKind::Delivery => decode::<DeliveryV1>(bytes, expect),
        ContentKind::PrestateAnchor => decode::<PrestateAnchorV1>(bytes, expect),
        ContentKind::EvmAnchor => decode::<EvmAnchorV1>(bytes, expect),
        ContentKind::EvmCallPlan => decode::<EvmCallPlanV1>(bytes, expect),
        ContentKind::Predicate => decode::<PredicateCommitmentV1>(bytes, expect),
        ContentKind::ReexecRequest => decode::<ReexecRequestV1>(bytes, expect),
        ContentKind::ReplayRecord => decode::<ReplayRecordV1>(bytes, expect),
        ContentKind::VerdictEnvelope => decode::<VerdictEnvelopeV1>(bytes, expect),
        ContentKind::EvmWitness => decode::<EvmWitnessV1>(bytes, expect),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::B256;
    use resolvd_proto::{content_hash, Canonical, ReexecVerdict};

    fn record() -> ReplayRecordV1 {
        ReplayRecordV1 {
            backend_id: B256::repeat_byte(1),
            backend_version_hash: B256::repeat_byte(2),
            spec_hash: B256::repeat_byte(3),
            delivery_hash: B256::repeat_byte(4),
            prestate_anchor_hash: B256::repeat_byte(5),
            prestate_root: B256::repeat_byte(6),
            outcome: ReexecVerdict::Failed,
            result_hash: B256::repeat_byte(7),
        }
    }

    #[test]
    fn decodes_and_hashes() {
        let bytes = record().to_canonical_bytes();
        let report = inspect(ContentKind::ReplayRecord, &bytes, None).unwrap();
        assert_eq!(report.hash, content_hash("replay-record", &bytes));
        assert_eq!(report.value["outcome"], "FAILED");
    }

    #[test]
    fn checks_hash_before_parse() {
        let bytes = record().to_canonical_bytes();
        let wrong = content_hash("spec", &bytes);
        let err = inspect(ContentKind::ReplayRecord, &bytes, Some(&wrong)).unwrap_err();
        assert!(matches!(err, CommittedError::HashMismatch { .. }), "{err}");
        // The same bytes under the right type tag pass.
        let right = content_hash("replay-record", &bytes);
        assert!(inspect(ContentKind::ReplayRecord, &bytes, Some(&right)).is_ok());
    }

    #[test]
    fn rejects_non_canonical() {
        let err = inspect(ContentKind::Spec, &[0x02, 0x00, 0x01, 0x00], None).unwrap_err();
        assert!(matches!(err, CommittedError::Decode { .. }), "{err}");
    }
}
