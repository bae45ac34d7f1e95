//! Replay request, replay record, verdict envelope and the signed
//! `VerdictCommitment` with its EIP-712 digest.

use crate::{
    codec::{Canonical, Reader, Writer, PROTOCOL_VERSION},
    hash::{content_hash, ContentType},
    types::ReexecVerdict,
    ContentHash, DecodeError,
};
use alloy_primitives::{Address, Bytes, B256, U256};
use alloy_sol_types::{Eip712Domain, SolStruct};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// The committed inputs of one replay (seed `ReexecRequestV1`). Tags:
/// 1 protocolVersion, 2 dealId, 3 spec, 4 specHash, 5 delivery, 6 deliveryHash,
/// 7 prestateAnchor, 8 prestateAnchorHash, 9 witness (optional; its hash is the
/// delivery's `REPLAY_WITNESS` attachment).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReexecRequestV1 {
    /// The disputed deal.
    pub deal_id: B256,
    /// Canonical `SpecV1` bytes.
    pub spec: Bytes,
    /// The on-chain spec commitment.
    pub spec_hash: ContentHash,
    /// Canonical `DeliveryV1` bytes.
    pub delivery: Bytes,
    /// The on-chain delivery commitment.
    pub delivery_hash: ContentHash,
    /// Canonical `PrestateAnchorV1` bytes.
    pub prestate_anchor: Bytes,
    /// The on-chain anchor commitment.
    pub prestate_anchor_hash: ContentHash,
    /// The replay witness bytes, when the backend needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness: Option<Bytes>,
}

impl Canonical for ReexecRequestV1 {
    fn encode_fields(&self, w: &mut Writer) {
        w.uint(1, PROTOCOL_VERSION);
        w.b256(2, &self.deal_id);
        w.bytes(3, &self.spec);
        w.b256(4, &self.spec_hash);
        w.bytes(5, &self.delivery);
        w.b256(6, &self.delivery_hash);
        w.bytes(7, &self.prestate_anchor);
        w.b256(8, &self.prestate_anchor_hash);
        if let Some(witness) = &self.witness {
            w.bytes(9, witness);
        }
    }

    fn decode_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.version()?;
        Ok(Self {
            deal_id: r.b256(2)?,
            spec: r.bytes(3)?.into(),
            spec_hash: r.b256(4)?,
            delivery: r.bytes(5)?.into(),
            delivery_hash: r.b256(6)?,
            prestate_anchor: r.bytes(7)?.into(),
            prestate_anchor_hash: r.b256(8)?,
            witness: r.opt_bytes(9)?.map(Into::into),
        })
    }
}

impl ContentType for ReexecRequestV1 {
    const TYPE_TAG: &'static str = "reexec-request";
}

/// The canonical record of what a replay decided; its content hash is the
/// `traceHash`. Tags (seed, 1-byte tag / 1-byte length in practice):
/// 1 protocolVersion, 2 backendId, 3 backendVersionHash, 4 specHash,
/// 5 deliveryHash, 6 prestateAnchorHash, 7 prestateRoot, 8 outcome
/// (1 Reproduced, 2 Failed), 9 resultHash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplayRecordV1 {
    /// The backend that replayed.
    pub backend_id: B256,
    /// Its exact version.
    pub backend_version_hash: ContentHash,
    /// The spec replayed.
    pub spec_hash: ContentHash,
    /// The delivery replayed.
    pub delivery_hash: ContentHash,
    /// The anchor replayed on.
    pub prestate_anchor_hash: ContentHash,
    /// The anchor's state root.
    pub prestate_root: B256,
    /// The verdict.
    pub outcome: ReexecVerdict,
    /// `content_hash("evm-return-data", returnData)`.
    pub result_hash: ContentHash,
}

impl Canonical for ReplayRecordV1 {
    fn encode_fields(&self, w: &mut Writer) {
        w.uint(1, PROTOCOL_VERSION);
        w.b256(2, &self.backend_id);
        w.b256(3, &self.backend_version_hash);
        w.b256(4, &self.spec_hash);
        w.b256(5, &self.delivery_hash);
        w.b256(6, &self.prestate_anchor_hash);
        w.b256(7, &self.prestate_root);
        w.uint(8, self.outcome.code());
        w.b256(9, &self.result_hash);
    }

    fn decode_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.version()?;
        Ok(Self {
            backend_id: r.b256(2)?,
            backend_version_hash: r.b256(3)?,
            spec_hash: r.b256(4)?,
            delivery_hash: r.b256(5)?,
            prestate_anchor_hash: r.b256(6)?,
            prestate_root: r.b256(7)?,
            outcome: ReexecVerdict::read(r, 8)?,
            result_hash: r.b256(9)?,
        })
    }
}

impl ContentType for ReplayRecordV1 {
    const TYPE_TAG: &'static str = "replay-record";
}

/// The hash of raw EVM return data that envelopes commit to.
pub fn evm_result_hash(return_data: &[u8]) -> ContentHash {
    content_hash("evm-return-data", return_data)
}

/// A backend's answer for one deal (seed `VerdictEnvelopeV1`). Tags:
/// 1 protocolVersion, 2 dealId, 3 backendId, 4 backendVersionHash, 5 specHash,
/// 6 deliveryHash, 7 prestateAnchorHash, 8 prestateRoot, 9 verdict,
/// 10 resultHash, 11 traceHash.
///
/// Every field of the replay record is also a field of the envelope, so the
/// decoder checks that `traceHash` commits to exactly those fields
/// (`InconsistentTraceHash`). Build envelopes with [`VerdictEnvelopeV1::new`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VerdictEnvelopeV1 {
    /// The disputed deal.
    pub deal_id: B256,
    /// The record this envelope commits to.
    #[serde(flatten)]
    pub record: ReplayRecordV1,
    /// `content_hash("replay-record", record)`.
    pub trace_hash: ContentHash,
}

impl VerdictEnvelopeV1 {
    /// The envelope of `record` for `deal_id`, with its trace hash.
    pub fn new(deal_id: B256, record: ReplayRecordV1) -> Self {
        let trace_hash = record.content_hash();
        Self { deal_id, record, trace_hash }
    }

    /// The commitment resolvers sign for this envelope.
    pub fn commitment(&self) -> VerdictCommitment {
        let r = &self.record;
        VerdictCommitment {
            deal_id: self.deal_id,
            spec_hash: r.spec_hash,
            delivery_hash: r.delivery_hash,
            prestate_anchor_hash: r.prestate_anchor_hash,
            prestate_root: r.prestate_root,
            backend_id: r.backend_id,
            backend_version_hash: r.backend_version_hash,
            outcome: r.outcome,
            result_hash: r.result_hash,
            trace_hash: self.trace_hash,
        }
    }
}

impl Canonical for VerdictEnvelopeV1 {
    fn encode_fields(&self, w: &mut Writer) {
        let r = &self.record;
        w.uint(1, PROTOCOL_VERSION);
        w.b256(2, &self.deal_id);
        w.b256(3, &r.backend_id);
        w.b256(4, &r.backend_version_hash);
        w.b256(5, &r.spec_hash);
        w.b256(6, &r.delivery_hash);
        w.b256(7, &r.prestate_anchor_hash);
        w.b256(8, &r.prestate_root);
        w.uint(9, r.outcome.code());
        w.b256(10, &r.result_hash);
        w.b256(11, &self.trace_hash);
    }

    fn decode_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.version()?;
        let deal_id = r.b256(2)?;
        let record = ReplayRecordV1 {
            backend_id: r.b256(3)?,
            backend_version_hash: r.b256(4)?,
            spec_hash: r.b256(5)?,
            delivery_hash: r.b256(6)?,
            prestate_anchor_hash: r.b256(7)?,
            prestate_root: r.b256(8)?,
            outcome: ReexecVerdict::read(r, 9)?,
            result_hash: r.b256(10)?,
        };
        let envelope = Self::new(deal_id, record);
        if r.b256(11)? != envelope.trace_hash {
            return Err(DecodeError::InconsistentTraceHash);
        }
        Ok(envelope)
    }
}

impl ContentType for VerdictEnvelopeV1 {
    const TYPE_TAG: &'static str = "verdict-envelope";
}

/// The Solidity ABI of the commitment, as the escrow declares it.
pub mod abi {
    alloy_sol_types::sol! {
        /// The EIP-712 struct resolvers sign (seed "On-chain commitment").
        /// `outcome`: 0 = Reproduced, 1 = Failed.
        #[derive(Debug, PartialEq, Eq)]
        struct VerdictCommitment {
            bytes32 dealId;
            bytes32 specHash;
            bytes32 deliveryHash;
            bytes32 prestateAnchorHash;
            bytes32 prestateRoot;
            bytes32 backendId;
            bytes32 backendVersionHash;
            uint8 outcome;
            bytes32 resultHash;
            bytes32 traceHash;
        }
    }
}

/// The exact EIP-712 type string of [`VerdictCommitment`].
pub const VERDICT_COMMITMENT_TYPE: &str = "VerdictCommitment(bytes32 dealId,bytes32 specHash,bytes32 deliveryHash,bytes32 prestateAnchorHash,bytes32 prestateRoot,bytes32 backendId,bytes32 backendVersionHash,uint8 outcome,bytes32 resultHash,bytes32 traceHash)";

/// The fields a resolver signs about one deal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VerdictCommitment {
    /// The deal.
    pub deal_id: B256,
    /// Its spec.
    pub spec_hash: ContentHash,
    /// Its delivery.
    pub delivery_hash: ContentHash,
    /// Its anchor.
    pub prestate_anchor_hash: ContentHash,
    /// The anchor's state root.
    pub prestate_root: B256,
    /// The backend.
    pub backend_id: B256,
    /// The backend version.
    pub backend_version_hash: ContentHash,
    /// The verdict (on-chain: 0 = Reproduced, 1 = Failed).
    pub outcome: ReexecVerdict,
    /// The result hash.
    pub result_hash: ContentHash,
    /// The trace hash.
    pub trace_hash: ContentHash,
}

/// The EIP-712 domain verdicts are signed under; `verifying_contract` is the escrow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VerdictDomain {
    /// Domain name.
    pub name: String,
    /// Domain version.
    pub version: String,
    /// Chain id of the escrow.
    pub chain_id: u64,
    /// The escrow contract.
    pub verifying_contract: Address,
}

impl VerdictDomain {
    /// The alloy domain: `EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)`.
    pub fn eip712(&self) -> Eip712Domain {
        Eip712Domain::new(
            Some(Cow::Owned(self.name.clone())),
            Some(Cow::Owned(self.version.clone())),
            Some(U256::from(self.chain_id)),
            Some(self.verifying_contract),
            None,
        )
    }
}

impl VerdictCommitment {
    /// The on-chain outcome code: 0 = Reproduced, 1 = Failed.
    pub const fn onchain_outcome(&self) -> u8 {
        match self.outcome {
            ReexecVerdict::Reproduced => 0,
            ReexecVerdict::Failed => 1,
        }
    }

    /// The outcome for an on-chain code, if defined.
    pub const fn outcome_from_onchain(code: u8) -> Option<ReexecVerdict> {
        match code {
            0 => Some(ReexecVerdict::Reproduced),
            1 => Some(ReexecVerdict::Failed),
            _ => None,
        }
    }

    /// The ABI struct of this commitment.
    pub fn to_abi(&self) -> abi::VerdictCommitment {
        abi::VerdictCommitment {
            dealId: self.deal_id,
            specHash: self.spec_hash,
            deliveryHash: self.delivery_hash,
            prestateAnchorHash: self.prestate_anchor_hash,
            prestateRoot: self.prestate_root,
            backendId: self.backend_id,
            backendVersionHash: self.backend_version_hash,
            outcome: self.onchain_outcome(),
            resultHash: self.result_hash,
            traceHash: self.trace_hash,
        }
    }

    /// The commitment of an ABI struct; `None` for an undefined outcome code.
    pub fn from_abi(c: &abi::VerdictCommitment) -> Option<Self> {
        Some(Self {
            deal_id: c.dealId,
            spec_hash: c.specHash,
            delivery_hash: c.deliveryHash,
            prestate_anchor_hash: c.prestateAnchorHash,
            prestate_root: c.prestateRoot,
            backend_id: c.backendId,
            backend_version_hash: c.backendVersionHash,
            outcome: Self::outcome_from_onchain(c.outcome)?,
            result_hash: c.resultHash,
            trace_hash: c.traceHash,
        })
    }

    /// `hashStruct(commitment)` per EIP-712.
    pub fn struct_hash(&self) -> B256 {
        self.to_abi().eip712_hash_struct()
    }

    /// The 32-byte EIP-712 digest resolvers sign:
    /// `keccak256(0x1901 || domainSeparator || hashStruct(commitment))`.
    pub fn eip712_digest(&self, domain: &VerdictDomain) -> B256 {
        self.to_abi().eip712_signing_hash(&domain.eip712())
    }
}
