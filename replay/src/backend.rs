//! The EVM V1 replay backend.

use crate::{
    predicate::evaluate,
    state::{ClosedWorldDb, VerifiedState},
    OperationalError,
};
use alloy_primitives::{Bytes, B256};
use resolvd_proto::{
    content_hash, decode_committed, evm_result_hash, BackendVersionPolicy, Canonical, DeliveryV1,
    EvmAnchorV1, EvmCallPlanV1, EvmSpecId, EvmWitnessV1, NoncePolicy, PrestateAnchorV1,
    ReexecRequestV1, ReexecVerdict, ReplayRecordV1, SpecV1, VerdictEnvelopeV1,
};
use revm::{
    context::{BlockEnv, TxEnv},
    context_interface::{block::BlobExcessGasAndPrice, result::EVMError},
    primitives::{hardfork::SpecId, TxKind, U256},
    Context, ExecuteEvm, MainBuilder, MainContext,
};
use std::sync::LazyLock;

/// The exact configuration this backend replays with. Its content hash is
/// [`BACKEND_VERSION_HASH`]: changing any of it (or the revm version) changes
/// the version, so a spec pinned to the old one is never replayed by the new.
pub const BACKEND_CONFIG: &str = "\
resolvd-evm-v1
revm=43.0.3 (default features: blst, c-kzg, secp256k1 precompile backends)
spec=anchor.specId (Shanghai|Cancun|Prague|Osaka) with revm mainnet gas params
chain_id=anchor.chainId; tx chain id = Some(anchor.chainId)
block: number, timestamp, gasLimit, baseFee, coinbase, prevrandao from the anchor; difficulty=0;
  blob excess gas from the anchor when present (price with the spec's update fraction)
tx: one CALL plan.caller -> plan.target, data, value, gasLimit; gas price = base fee (no tip);
  nonce = caller's proven nonce (policy PRESTATE) or unchecked (policy UNCHECKED)
checks: revm defaults (balance, block gas limit, EIP-3607, fee charge) all enabled
verdict: Reproduced iff success AND return data == claimedResult AND predicate true;
  invalid transaction, revert, halt, claim mismatch or false predicate = Failed
resultHash=content_hash(evm-return-data, output); POSTSTATE_DELTA saturates at 0";

/// `content_hash("backend-id", "resolvd-evm-v1")`, defined in
/// [`resolvd_proto::EVM_BACKEND_ID`] (code that reads anchors needs no revm).
pub use resolvd_proto::EVM_BACKEND_ID as BACKEND_ID;

/// `content_hash("backend-version", BACKEND_CONFIG)`.
pub static BACKEND_VERSION_HASH: LazyLock<B256> =
    LazyLock::new(|| content_hash("backend-version", BACKEND_CONFIG.as_bytes()));

/// The deterministic revm backend (closed world, proof-verified prestate).
#[derive(Clone, Copy, Debug, Default)]
pub struct EvmBackend;

fn committed<T: resolvd_proto::ContentType>(
    what: &'static str,
    bytes: &[u8],
    hash: &B256,
) -> Result<T, OperationalError> {
    decode_committed(bytes, hash).map_err(|source| OperationalError::Committed { what, source })
}

const fn spec_id(spec: EvmSpecId) -> SpecId {
    match spec {
        EvmSpecId::Shanghai => SpecId::SHANGHAI,
        EvmSpecId::Cancun => SpecId::CANCUN,
        EvmSpecId::Prague => SpecId::PRAGUE,
        EvmSpecId::Osaka => SpecId::OSAKA,
    }
}

/// Everything a replay runs on, decoded and checked.
#[derive(Debug)]
pub struct Inputs {
    /// The spec.
    pub spec: SpecV1,
    /// The delivery.
    pub delivery: DeliveryV1,
    /// The anchor body.
    pub anchor: EvmAnchorV1,
    /// The seller's plan.
    pub plan: EvmCallPlanV1,
    /// The verified prestate.
    pub state: VerifiedState,
}

impl EvmBackend {
    /// This backend's id.
    pub fn id(&self) -> B256 {
        *BACKEND_ID
    }

    /// This backend's version hash.
    pub fn version_hash(&self) -> B256 {
        *BACKEND_VERSION_HASH
    }

    /// Hash-checks, decodes and cross-checks every committed input, then
    /// verifies the witness against the anchor. Nothing here executes code.
    pub fn prepare(&self, req: &ReexecRequestV1) -> Result<Inputs, OperationalError> {
        let spec: SpecV1 = committed("spec", &req.spec, &req.spec_hash)?;
        let delivery: DeliveryV1 = committed("delivery", &req.delivery, &req.delivery_hash)?;
        let anchor_doc: PrestateAnchorV1 =
            committed("prestate anchor", &req.prestate_anchor, &req.prestate_anchor_hash)?;

        for found in [spec.backend_id, anchor_doc.backend_id] {
            if found != *BACKEND_ID {
                return Err(OperationalError::ForeignBackend { found });
            }
        }
        // Irrefutable today: a new version policy must be handled here before it compiles.
        let BackendVersionPolicy::Exact = spec.backend_version_policy;
        if spec.accepted_backend_version_hash != *BACKEND_VERSION_HASH {
            return Err(OperationalError::UnacceptedBackendVersion {
                accepted: spec.accepted_backend_version_hash,
                ours: *BACKEND_VERSION_HASH,
            });
        }
        let in_spec = resolvd_proto::ContentType::content_hash(&spec.prestate_anchor);
        if in_spec != req.prestate_anchor_hash {
            return Err(OperationalError::AnchorMismatch {
                in_spec,
                in_request: req.prestate_anchor_hash,
            });
        }
        let schema = EvmCallPlanV1::schema_hash();
        if spec.execution_schema_hash != schema {
            return Err(OperationalError::SchemaMismatch("spec schema is not EvmCallPlanV1"));
        }
        if delivery.execution_schema_hash != schema {
            return Err(OperationalError::SchemaMismatch(
                "delivery schema differs from the spec's",
            ));
        }
        let anchor = EvmAnchorV1::from_canonical_bytes(&anchor_doc.body).map_err(|source| {
            OperationalError::Committed {
                what: "EVM anchor body",
                source: resolvd_proto::CommittedError::Decode { type_tag: "evm-anchor", source },
            }
        })?;
        let plan =
            EvmCallPlanV1::from_canonical_bytes(&delivery.execution_plan).map_err(|source| {
                OperationalError::Committed {
                    what: "EVM call plan",
                    source: resolvd_proto::CommittedError::Decode {
                        type_tag: "evm-call-plan",
                        source,
                    },
                }
            })?;
        if plan.chain_id != anchor.chain_id {
            return Err(OperationalError::ChainIdMismatch {
                plan: plan.chain_id,
                anchor: anchor.chain_id,
            });
        }
        let witness_hash = delivery
            .witness_hash()
            .ok_or(OperationalError::MissingWitness("the delivery names none"))?;
        let witness_bytes = req
            .witness
            .as_ref()
            .ok_or(OperationalError::MissingWitness("the request carries none"))?;
        let witness: EvmWitnessV1 = committed("witness", witness_bytes, &witness_hash)?;
        let state = VerifiedState::verify(&anchor, &witness)?;
        Ok(Inputs { spec, delivery, anchor, plan, state })
    }

    /// Replays `req`: the same request gives byte-identical envelope bytes, or
    /// the same operational error, on every node.
    pub fn verdict(&self, req: &ReexecRequestV1) -> Result<VerdictEnvelopeV1, OperationalError> {
        let inputs = self.prepare(req)?;
        let (outcome, output) = self.execute(&inputs)?;
        let record = ReplayRecordV1 {
            backend_id: *BACKEND_ID,
            backend_version_hash: *BACKEND_VERSION_HASH,
            spec_hash: req.spec_hash,
            delivery_hash: req.delivery_hash,
            prestate_anchor_hash: req.prestate_anchor_hash,
            prestate_root: inputs.anchor.state_root,
            outcome,
            result_hash: evm_result_hash(&output),
        };
        Ok(VerdictEnvelopeV1::new(req.deal_id, record))
    }

    /// Runs the plan in the closed world and evaluates claim and predicate.
    /// Returns the verdict and the raw return data.
    pub fn execute(&self, inputs: &Inputs) -> Result<(ReexecVerdict, Bytes), OperationalError> {
        let Inputs { delivery, anchor, plan, state, spec } = inputs;
        let Some(run) = run_plan(anchor, plan, state)? else {
            // The plan cannot run as a transaction on this prestate (nonce,
            // balance, gas limit...): deterministic, so a verdict.
            return Ok((ReexecVerdict::Failed, Bytes::new()));
        };
        if !run.success || run.output != delivery.claimed_result {
            return Ok((ReexecVerdict::Failed, run.output));
        }
        let holds = evaluate(&spec.predicate, &run.output, state, &run.changes)?;
        Ok((if holds { ReexecVerdict::Reproduced } else { ReexecVerdict::Failed }, run.output))
    }
}

/// The outcome of one plan execution.
#[derive(Debug)]
pub struct Run {
    /// Whether the call succeeded (no revert, no halt).
    pub success: bool,
    /// Return or revert data (empty on halt).
    pub output: Bytes,
    /// Touched accounts and slots after the call.
    pub changes: revm::state::EvmState,
}

/// The revm spec, block and transaction environments of `plan` on `anchor`
/// with transaction nonce `nonce`, exactly as [`BACKEND_CONFIG`] describes.
pub fn evm_env(
    anchor: &EvmAnchorV1,
    plan: &EvmCallPlanV1,
    nonce: u64,
) -> Result<(SpecId, BlockEnv, TxEnv), OperationalError> {
    let spec_id = spec_id(anchor.spec_id);
    let block = BlockEnv {
        number: U256::from(anchor.block_number),
        beneficiary: anchor.coinbase,
        timestamp: U256::from(anchor.timestamp),
        gas_limit: anchor.gas_limit,
        basefee: anchor.base_fee,
        difficulty: U256::ZERO,
        prevrandao: Some(anchor.prevrandao),
        blob_excess_gas_and_price: anchor
            .excess_blob_gas
            .map(|g| BlobExcessGasAndPrice::new_with_spec(g, spec_id)),
        ..Default::default()
    };
    let tx = TxEnv::builder()
        .caller(plan.caller)
        .kind(TxKind::Call(plan.target))
        .data(plan.calldata.clone())
        .value(plan.value)
        .gas_limit(plan.gas_limit)
        .gas_price(u128::from(anchor.base_fee))
        .nonce(nonce)
        .chain_id(Some(anchor.chain_id))
        .build()
        .map_err(|e| OperationalError::Evm(format!("transaction: {e:?}")))?;
    Ok((spec_id, block, tx))
}

/// Executes `plan` on `state` with the anchor's environment, exactly as
/// [`BACKEND_CONFIG`] describes. `Ok(None)`: the transaction is invalid on this
/// prestate. Reads outside `state` are `Missing*Witness` errors.
pub fn run_plan(
    anchor: &EvmAnchorV1,
    plan: &EvmCallPlanV1,
    state: &VerifiedState,
) -> Result<Option<Run>, OperationalError> {
    let nonce = match plan.nonce_policy {
        NoncePolicy::Prestate => state.nonce(plan.caller)?,
        NoncePolicy::Unchecked => 0,
    };
    let (spec_id, block, tx) = evm_env(anchor, plan, nonce)?;
    let mut evm = Context::mainnet()
        .modify_cfg_chained(|cfg| {
            cfg.set_spec_and_mainnet_gas_params(spec_id);
            cfg.chain_id = anchor.chain_id;
            cfg.disable_nonce_check = plan.nonce_policy == NoncePolicy::Unchecked;
        })
        .with_block(block)
        .with_db(ClosedWorldDb::new(state))
        .build_mainnet();
    match evm.transact(tx) {
        Ok(r) => Ok(Some(Run {
            success: r.result.is_success(),
            output: r.result.output().cloned().unwrap_or_default(),
            changes: r.state,
        })),
        Err(EVMError::Database(e)) => Err(e),
        Err(EVMError::Transaction(_)) => Ok(None),
        Err(other) => Err(OperationalError::Evm(format!("{other:?}"))),
    }
}
