//! The committed content types of seed 004 ("VM-neutral waist", "Minimal
//! committed spec", "EVM V1 backend") and their canonical encodings.
//!
//! Each type's field tags are listed on the type. Top-level content types carry
//! the protocol version in tag 1; backend bodies ([`EvmAnchorV1`],
//! [`EvmCallPlanV1`]) are versioned by the backend id / execution schema hash
//! that names them.

use crate::{
    codec::{Canonical, Reader, Writer, PROTOCOL_VERSION},
    hash::{content_hash, ContentType},
    ContentHash, DecodeError,
};
use alloy_primitives::{Address, Bytes, B256, U256};
use serde::{Deserialize, Serialize};

/// Longest accepted attachment retrieval hint, in bytes.
pub const MAX_RETRIEVAL_HINT_LEN: usize = 2048;

/// Declares a `u64`-coded enum with its canonical values.
macro_rules! coded_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident = $value:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
        pub enum $name { $($(#[$vm])* $variant = $value),+ }

        impl $name {
            /// The canonical integer value.
            pub const fn code(self) -> u64 { self as u64 }

            pub(crate) fn read(r: &mut Reader<'_>, tag: u64) -> Result<Self, DecodeError> {
                match r.uint(tag)? {
                    $($value => Ok(Self::$variant),)+
                    value => Err(DecodeError::UnknownVariant { tag, value }),
                }
            }
        }
    };
}

coded_enum! {
    /// How a spec accepts backend versions. V1 knows only exact pinning.
    BackendVersionPolicy { /// Only `acceptedBackendVersionHash` may replay.
    Exact = 1 }
}

coded_enum! {
    /// What a delivery attachment is.
    AttachmentKind {
        /// The state-proof and code witness the plan is replayed on.
        ReplayWitness = 1,
        /// Anything else the seller publishes alongside (not read by replay).
        Supplementary = 2,
    }
}

coded_enum! {
    /// The EVM rule set an anchor commits to.
    EvmSpecId { /// Shanghai.
    Shanghai = 1, /// Cancun.
    Cancun = 2, /// Prague.
    Prague = 3, /// Osaka.
    Osaka = 4 }
}

coded_enum! {
    /// Where the transaction nonce of a replayed call comes from.
    NoncePolicy {
        /// The caller's nonce as proven in the witness; the call increments it.
        Prestate = 1,
        /// No nonce check (the call runs as `eth_call` would).
        Unchecked = 2,
    }
}

coded_enum! {
    /// The replay verdict (seed `ReexecVerdict`). `Failed` is a verdict, not an error.
    ReexecVerdict {
        /// The plan ran and satisfied the predicate.
        Reproduced = 1,
        /// Revert or halt, result mismatch, or a false predicate.
        Failed = 2,
    }
}

/// A buyer-funded spec. Tags: 1 protocolVersion, 2 backendId,
/// 3 backendVersionPolicy, 4 acceptedBackendVersionHash, 5 prestateAnchor
/// (nested), 6 executionSchemaHash, 7 predicate (nested union), 8 expiry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpecV1 {
    /// The backend that must replay the deal.
    pub backend_id: B256,
    /// How backend versions are accepted.
    pub backend_version_policy: BackendVersionPolicy,
    /// The exact backend version accepted.
    pub accepted_backend_version_hash: ContentHash,
    /// The committed world state; `specHash` binds this snapshot.
    pub prestate_anchor: PrestateAnchorV1,
    /// The plan schema the seller must deliver in.
    pub execution_schema_hash: ContentHash,
    /// What the plan's execution must satisfy.
    pub predicate: PredicateCommitmentV1,
    /// Unix time after which the spec may not be funded.
    pub expiry: u64,
}

impl Canonical for SpecV1 {
    fn encode_fields(&self, w: &mut Writer) {
        w.uint(1, PROTOCOL_VERSION);
        w.b256(2, &self.backend_id);
        w.uint(3, self.backend_version_policy.code());
        w.b256(4, &self.accepted_backend_version_hash);
        w.nested(5, &self.prestate_anchor);
        w.b256(6, &self.execution_schema_hash);
        w.nested(7, &self.predicate);
        w.uint(8, self.expiry);
    }

    fn decode_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.version()?;
        Ok(Self {
            backend_id: r.b256(2)?,
            backend_version_policy: BackendVersionPolicy::read(r, 3)?,
            accepted_backend_version_hash: r.b256(4)?,
            prestate_anchor: r.nested(5)?,
            execution_schema_hash: r.b256(6)?,
            predicate: r.nested(7)?,
            expiry: r.uint(8)?,
        })
    }
}

impl ContentType for SpecV1 {
    const TYPE_TAG: &'static str = "spec";
}

/// A reference to published content. Tags: 1 kind, 2 hash, 3 retrievalHint (optional).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AttachmentV1 {
    /// What the attachment is.
    pub kind: AttachmentKind,
    /// Its content hash (under its own type tag).
    pub hash: ContentHash,
    /// Where it may be fetched; only a hint, never trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieval_hint: Option<String>,
}

impl Canonical for AttachmentV1 {
    fn encode_fields(&self, w: &mut Writer) {
        w.uint(1, self.kind.code());
        w.b256(2, &self.hash);
        if let Some(hint) = &self.retrieval_hint {
            w.text(3, hint);
        }
    }

    fn decode_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            kind: AttachmentKind::read(r, 1)?,
            hash: r.b256(2)?,
            retrieval_hint: r.opt_text(3, MAX_RETRIEVAL_HINT_LEN)?,
        })
    }
}

/// A seller's delivery. Tags: 1 protocolVersion, 2 executionSchemaHash,
/// 3 executionPlan, 4 claimedResult, 5 attachments (list; at most one
/// `REPLAY_WITNESS`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeliveryV1 {
    /// The schema `executionPlan` is written in.
    pub execution_schema_hash: ContentHash,
    /// Backend-owned plan bytes (for EVM: canonical [`EvmCallPlanV1`]).
    pub execution_plan: Bytes,
    /// What the seller claims the plan returns.
    pub claimed_result: Bytes,
    /// Published material the delivery relies on.
    pub attachments: Vec<AttachmentV1>,
}

impl DeliveryV1 {
    /// The hash of the replay witness, if the delivery names one.
    pub fn witness_hash(&self) -> Option<ContentHash> {
        self.attachments.iter().find(|a| a.kind == AttachmentKind::ReplayWitness).map(|a| a.hash)
    }
}

impl Canonical for DeliveryV1 {
    fn encode_fields(&self, w: &mut Writer) {
        w.uint(1, PROTOCOL_VERSION);
        w.b256(2, &self.execution_schema_hash);
        w.bytes(3, &self.execution_plan);
        w.bytes(4, &self.claimed_result);
        w.list(5, &self.attachments);
    }

    fn decode_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.version()?;
        let delivery = Self {
            execution_schema_hash: r.b256(2)?,
            execution_plan: r.bytes(3)?.into(),
            claimed_result: r.bytes(4)?.into(),
            attachments: r.list(5)?,
        };
        let witnesses =
            delivery.attachments.iter().filter(|a| a.kind == AttachmentKind::ReplayWitness).count();
        if witnesses > 1 {
            return Err(DecodeError::DuplicateWitness);
        }
        Ok(delivery)
    }
}

impl ContentType for DeliveryV1 {
    const TYPE_TAG: &'static str = "delivery";
}

/// The committed world state of a deal (seed `PrestateAnchorV1`). Tags:
/// 1 protocolVersion, 2 backendId, 3 body (backend-owned; for EVM a canonical
/// [`EvmAnchorV1`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrestateAnchorV1 {
    /// The backend that owns the body.
    pub backend_id: B256,
    /// Backend-owned anchor bytes.
    pub body: Bytes,
}

impl Canonical for PrestateAnchorV1 {
    fn encode_fields(&self, w: &mut Writer) {
        w.uint(1, PROTOCOL_VERSION);
        w.b256(2, &self.backend_id);
        w.bytes(3, &self.body);
    }

    fn decode_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.version()?;
        Ok(Self { backend_id: r.b256(2)?, body: r.bytes(3)?.into() })
    }
}

impl ContentType for PrestateAnchorV1 {
    const TYPE_TAG: &'static str = "prestate-anchor";
}

/// The id of the EVM V1 backend, `content_hash("backend-id", "resolvd-evm-v1")`:
/// the `backend_id` of a [`PrestateAnchorV1`] whose body is an [`EvmAnchorV1`]
/// and of a [`SpecV1`] the revm backend (`resolvd-replay`) replays. Defined
/// here so that code which only reads anchors needs no EVM.
pub static EVM_BACKEND_ID: std::sync::LazyLock<B256> =
    std::sync::LazyLock::new(|| content_hash("backend-id", b"resolvd-evm-v1"));

/// The EVM anchor body: a finalized block and its full execution environment.
/// Tags: 1 chainId, 2 blockNumber, 3 blockHash, 4 stateRoot, 5 timestamp,
/// 6 baseFee, 7 gasLimit, 8 coinbase, 9 prevrandao, 10 specId,
/// 11 excessBlobGas (optional), 12 header (optional RLP block header).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EvmAnchorV1 {
    /// EIP-155 chain id.
    pub chain_id: u64,
    /// Block number.
    pub block_number: u64,
    /// `keccak256(rlp(header))`.
    pub block_hash: B256,
    /// The state root every read is proven against.
    pub state_root: B256,
    /// Block timestamp.
    pub timestamp: u64,
    /// Block base fee per gas.
    pub base_fee: u64,
    /// Block gas limit.
    pub gas_limit: u64,
    /// Block beneficiary.
    pub coinbase: Address,
    /// `mixHash` / prevrandao.
    pub prevrandao: B256,
    /// The EVM rules of the block.
    pub spec_id: EvmSpecId,
    /// Excess blob gas (Cancun and later), which fixes `BLOBBASEFEE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excess_blob_gas: Option<u64>,
    /// The RLP-encoded block header, when the buyer publishes it with the anchor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<Bytes>,
}

impl Canonical for EvmAnchorV1 {
    fn encode_fields(&self, w: &mut Writer) {
        w.uint(1, self.chain_id);
        w.uint(2, self.block_number);
        w.b256(3, &self.block_hash);
        w.b256(4, &self.state_root);
        w.uint(5, self.timestamp);
        w.uint(6, self.base_fee);
        w.uint(7, self.gas_limit);
        w.address(8, &self.coinbase);
        w.b256(9, &self.prevrandao);
        w.uint(10, self.spec_id.code());
        if let Some(g) = self.excess_blob_gas {
            w.uint(11, g);
        }
        if let Some(h) = &self.header {
            w.bytes(12, h);
        }
    }

    fn decode_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            chain_id: r.uint(1)?,
            block_number: r.uint(2)?,
            block_hash: r.b256(3)?,
            state_root: r.b256(4)?,
            timestamp: r.uint(5)?,
            base_fee: r.uint(6)?,
            gas_limit: r.uint(7)?,
            coinbase: r.address(8)?,
            prevrandao: r.b256(9)?,
            spec_id: EvmSpecId::read(r, 10)?,
            excess_blob_gas: r.opt_uint(11)?,
            header: r.opt_bytes(12)?.map(Into::into),
        })
    }
}

impl ContentType for EvmAnchorV1 {
    const TYPE_TAG: &'static str = "evm-anchor";
}

/// The EVM V1 execution plan: one fully specified CALL. Tags: 1 chainId,
/// 2 caller, 3 target, 4 calldata, 5 value, 6 gasLimit, 7 noncePolicy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EvmCallPlanV1 {
    /// Must equal the anchor's chain id.
    pub chain_id: u64,
    /// `msg.sender` and `tx.origin`.
    pub caller: Address,
    /// The called contract.
    pub target: Address,
    /// Call data.
    pub calldata: Bytes,
    /// Wei sent with the call.
    pub value: U256,
    /// Gas limit of the call.
    pub gas_limit: u64,
    /// Where the nonce comes from.
    pub nonce_policy: NoncePolicy,
}

impl EvmCallPlanV1 {
    /// The execution schema hash of this plan type:
    /// `content_hash("execution-schema", "evm-call-plan/v1")`.
    pub fn schema_hash() -> ContentHash {
        content_hash("execution-schema", b"evm-call-plan/v1")
    }
}

impl Canonical for EvmCallPlanV1 {
    fn encode_fields(&self, w: &mut Writer) {
        w.uint(1, self.chain_id);
        w.address(2, &self.caller);
        w.address(3, &self.target);
        w.bytes(4, &self.calldata);
        w.u256(5, &self.value);
        w.uint(6, self.gas_limit);
        w.uint(7, self.nonce_policy.code());
    }

    fn decode_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            chain_id: r.uint(1)?,
            caller: r.address(2)?,
            target: r.address(3)?,
            calldata: r.bytes(4)?.into(),
            value: r.u256(5)?,
            gas_limit: r.uint(6)?,
            nonce_policy: NoncePolicy::read(r, 7)?,
        })
    }
}

impl ContentType for EvmCallPlanV1 {
    const TYPE_TAG: &'static str = "evm-call-plan";
}

/// A post-state equality check. Tags: 1 address, 2 slot, 3 expected.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SlotEquals {
    /// The account.
    pub address: Address,
    /// The storage slot.
    pub slot: B256,
    /// The word the slot must hold after the plan.
    pub expected: U256,
}

impl Canonical for SlotEquals {
    fn encode_fields(&self, w: &mut Writer) {
        w.address(1, &self.address);
        w.b256(2, &self.slot);
        w.u256(3, &self.expected);
    }

    fn decode_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self { address: r.address(1)?, slot: r.b256(2)?, expected: r.u256(3)? })
    }
}

/// An inclusive range check on a storage word (or on its change). Tags:
/// 1 address, 2 slot, 3 min, 4 max. `min <= max` is enforced at decode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SlotBounds {
    /// The account.
    pub address: Address,
    /// The storage slot.
    pub slot: B256,
    /// Inclusive lower bound.
    pub min: U256,
    /// Inclusive upper bound.
    pub max: U256,
}

impl Canonical for SlotBounds {
    fn encode_fields(&self, w: &mut Writer) {
        w.address(1, &self.address);
        w.b256(2, &self.slot);
        w.u256(3, &self.min);
        w.u256(4, &self.max);
    }

    fn decode_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self { address: r.address(1)?, slot: r.b256(2)?, min: r.u256(3)?, max: r.u256(4)? })
    }
}

/// `RESULT_EQUALS` body. Tag 1 expectedResultHash (keccak256 of the return data).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResultEquals {
    /// `keccak256(returnData)` the plan must produce.
    pub expected_result_hash: B256,
}

impl Canonical for ResultEquals {
    fn encode_fields(&self, w: &mut Writer) {
        w.b256(1, &self.expected_result_hash);
    }

    fn decode_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self { expected_result_hash: r.b256(1)? })
    }
}

/// A non-empty ordered list of checks. Tag 1 checks (list, non-empty).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Checks<T> {
    /// Checks, evaluated in order.
    pub checks: Vec<T>,
}

impl Canonical for Checks<SlotEquals> {
    fn encode_fields(&self, w: &mut Writer) {
        w.list(1, &self.checks);
    }

    fn decode_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let checks = r.list(1)?;
        if checks.is_empty() {
            return Err(DecodeError::EmptyList { tag: 1 });
        }
        Ok(Self { checks })
    }
}

impl Canonical for Checks<SlotBounds> {
    fn encode_fields(&self, w: &mut Writer) {
        w.list(1, &self.checks);
    }

    fn decode_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let checks: Vec<SlotBounds> = r.list(1)?;
        if checks.is_empty() {
            return Err(DecodeError::EmptyList { tag: 1 });
        }
        if let Some(index) = checks.iter().position(|c| c.min > c.max) {
            return Err(DecodeError::InvertedBounds { index });
        }
        Ok(Self { checks })
    }
}

/// What the replayed plan must satisfy: a union whose variant tag is
/// 1 RESULT_EQUALS, 2 POSTSTATE_EQUALS, 3 POSTSTATE_BOUNDED, 4 POSTSTATE_DELTA.
///
/// `POSTSTATE_EQUALS` takes the EVM backend's concrete form (ordered
/// `(address, slot, expectedWord)` checks) rather than the seed's VM-neutral
/// `assertionProgramHash`: an opaque program hash cannot be evaluated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "SCREAMING_SNAKE_CASE", deny_unknown_fields)]
pub enum PredicateCommitmentV1 {
    /// `keccak256(returnData) == expectedResultHash`.
    ResultEquals(ResultEquals),
    /// Every slot holds its expected word after the plan.
    PoststateEquals(Checks<SlotEquals>),
    /// Every post-state word lies in `[min, max]`.
    PoststateBounded(Checks<SlotBounds>),
    /// Every change `post - pre` (saturating at 0) lies in `[min, max]`.
    PoststateDelta(Checks<SlotBounds>),
}

impl Canonical for PredicateCommitmentV1 {
    fn encode_fields(&self, w: &mut Writer) {
        match self {
            Self::ResultEquals(v) => w.nested(1, v),
            Self::PoststateEquals(v) => w.nested(2, v),
            Self::PoststateBounded(v) => w.nested(3, v),
            Self::PoststateDelta(v) => w.nested(4, v),
        }
    }

    fn decode_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let (tag, value) = r.union()?;
        match tag {
            1 => Ok(Self::ResultEquals(Canonical::from_canonical_bytes(value)?)),
            2 => Ok(Self::PoststateEquals(Canonical::from_canonical_bytes(value)?)),
            3 => Ok(Self::PoststateBounded(Canonical::from_canonical_bytes(value)?)),
            4 => Ok(Self::PoststateDelta(Canonical::from_canonical_bytes(value)?)),
            tag => Err(DecodeError::UnknownTag { tag }),
        }
    }
}

impl ContentType for PredicateCommitmentV1 {
    const TYPE_TAG: &'static str = "predicate";
}
