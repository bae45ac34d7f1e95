//! Attestations of an `Attestor` (contracts/ATTESTATIONS.md) as a requester
//! or a verifier reads them: the question some content asks, the hashes that
//! name it, the record of its answer, and the certificate a `resolve`
//! transaction carried, as the ERC-8301 proof `ResolvdProofVerifier` checks
//! without the Attestor's record.
//!
//! The nodes serve an Attestor like any escrow (`chain.escrows`): its
//! requests are `Disputed` logs and its answers `resolve` calls.

use crate::chain::contracts::{
    deal_state, IAttestor, IEscrow, IRegistry, Question, VerdictCommitment,
};
use crate::chain::{Chain, ChainError};
use alloy_consensus::Transaction as _;
use alloy_primitives::{keccak256, Address, Bytes, B256, U256};
use alloy_provider::Provider;
use alloy_rpc_types_eth::Filter;
use alloy_sol_types::{SolEvent, SolInterface, SolValue};
use resolvd_proto::{
    content_hash, Canonical, ContentType, DeliveryV1, EvmAnchorV1, PrestateAnchorV1, SpecV1,
};

/// Settlement code of an attested request (`Settlement.Attested`).
pub const ATTESTED: u8 = 6;

/// The question `spec`, `anchor` and `delivery` (canonical bytes) ask: the
/// six input fields of the commitments that answer it. Each is hashed before
/// it is parsed; the spec must commit to the anchor, and the anchor must be
/// an EVM anchor (its state root is the question's `prestateRoot`).
pub fn question(spec: &[u8], anchor: &[u8], delivery: &[u8]) -> Result<Question, String> {
    let spec_hash = content_hash(SpecV1::TYPE_TAG, spec);
    let anchor_hash = content_hash(PrestateAnchorV1::TYPE_TAG, anchor);
    let delivery_hash = content_hash(DeliveryV1::TYPE_TAG, delivery);
    let parsed = SpecV1::from_canonical_bytes(spec).map_err(|e| format!("spec: {e}"))?;
    let anchor =
        PrestateAnchorV1::from_canonical_bytes(anchor).map_err(|e| format!("anchor: {e}"))?;
    DeliveryV1::from_canonical_bytes(delivery).map_err(|e| format!("delivery: {e}"))?;
    if parsed.prestate_anchor.content_hash() != anchor_hash {
        return Err(format!("the spec commits to another anchor than {anchor_hash}"));
    }
    let evm = EvmAnchorV1::from_canonical_bytes(&anchor.body)
        .map_err(|e| format!("anchor body is not an EVM anchor: {e}"))?;
    Ok(Question {
        specHash: spec_hash,
        deliveryHash: delivery_hash,
        prestateAnchorHash: anchor_hash,
        prestateRoot: evm.state_root,
        backendId: parsed.backend_id,
        backendVersionHash: parsed.accepted_backend_version_hash,
    })
}

/// The question's ERC-8301 `inputHash`: `keccak256(abi.encode(question))`.
pub fn input_hash(question: &Question) -> B256 {
    keccak256(question.abi_encode())
}

/// The id of the question `input_hash` at `attestor` (the `dealId` its
/// commitments carry): `keccak256(abi.encode(chainid, attestor, inputHash))`.
pub fn request_id(chain_id: u64, attestor: Address, input_hash: B256) -> B256 {
    keccak256((U256::from(chain_id), attestor, input_hash).abi_encode_params())
}

/// A verdict's ERC-8301 `outputHash`:
/// `keccak256(abi.encode(uint8 outcome, resultHash, traceHash))`.
pub fn output_hash(outcome: u8, result_hash: B256, trace_hash: B256) -> B256 {
    keccak256((U256::from(outcome), result_hash, trace_hash).abi_encode_params())
}

/// The `outputHash` a commitment answers with.
pub fn output_of(c: &VerdictCommitment) -> B256 {
    output_hash(c.outcome, c.resultHash, c.traceHash)
}

/// A certificate as `ResolvdProofVerifier` takes it for a stateless check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateProof {
    /// The certified commitment.
    pub commitment: VerdictCommitment,
    /// The epoch whose committee signed (the request's pinned epoch).
    pub epoch: u64,
    /// Position bitmap of the epoch's members who did not sign.
    pub non_signers: Bytes,
    /// The aggregate signature, EIP-2537 G2 (256 bytes).
    pub signature: Bytes,
}

impl CertificateProof {
    /// `abi.encode(VerdictCommitment, uint256 epoch, bytes nonSigners, bytes signature)`.
    pub fn encode(&self) -> Bytes {
        (
            self.commitment.clone(),
            U256::from(self.epoch),
            self.non_signers.clone(),
            self.signature.clone(),
        )
            .abi_encode_params()
            .into()
    }
}

/// Where a request stands (`Attestor.deal` and `Attestor.attestation`).
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestStatus {
    /// The question.
    pub input_hash: B256,
    /// Its id at the Attestor.
    pub request_id: B256,
    /// `none` (never requested), `pending`, `attested` or `timedOut` (may be
    /// requested again).
    pub state: &'static str,
    /// The epoch the latest request pinned.
    pub epoch: u64,
    /// Unix time after which the latest request can only time out.
    pub resolve_deadline: u64,
    /// The answer's `outputHash` (when attested).
    pub output_hash: Option<B256>,
    /// The answer (when attested): 0 Reproduced, 1 Failed.
    pub outcome: Option<u8>,
    /// The answer's result hash (when attested).
    pub result_hash: Option<B256>,
    /// The answer's replay-record hash (when attested).
    pub trace_hash: Option<B256>,
    /// Block time of the certificate (when attested).
    pub attested_at: Option<u64>,
}

/// The request for `input_hash` at `chain.escrow` (an Attestor).
pub async fn status(chain: &Chain, input_hash: B256) -> Result<RequestStatus, ChainError> {
    let request_id = request_id(chain.chain_id, chain.escrow, input_hash);
    let deal = chain.deal(request_id, None).await?;
    let record = chain
        .view(chain.escrow, IAttestor::attestationCall { inputHash: input_hash }, None)
        .await?;
    let attested = record.attestedAt != 0;
    let state = match deal.state {
        _ if attested => "attested",
        deal_state::NONE => "none",
        deal_state::DISPUTED => "pending",
        _ => "timedOut",
    };
    Ok(RequestStatus {
        input_hash,
        request_id,
        state,
        epoch: deal.epoch,
        resolve_deadline: deal.resolveDeadline,
        output_hash: attested
            .then(|| output_hash(record.outcome, record.resultHash, record.traceHash)),
        outcome: attested.then_some(record.outcome),
        result_hash: attested.then_some(record.resultHash),
        trace_hash: attested.then_some(record.traceHash),
        attested_at: attested.then_some(record.attestedAt),
    })
}

/// The certificate the `resolve` transaction that answered `request_id` at
/// `chain.escrow` carried, as a stateless proof (`None` if it was not
/// answered). A certificate sent through another contract (not a direct
/// `resolve` call) is [`ChainError::Unexpected`]: pass its proof by hand.
pub async fn proof_from_chain(
    chain: &Chain,
    request_id: B256,
) -> Result<Option<CertificateProof>, ChainError> {
    let rpc = |e: alloy_json_rpc::RpcError<alloy_transport::TransportErrorKind>| {
        ChainError::Rpc(e.to_string())
    };
    let filter = Filter::new()
        .address(chain.escrow)
        .event_signature(IEscrow::VerdictCommitted::SIGNATURE_HASH)
        .topic1(request_id)
        .from_block(0u64);
    let logs = chain.provider().get_logs(&filter).await.map_err(rpc)?;
    let Some(tx_hash) = logs.last().and_then(|l| l.transaction_hash) else { return Ok(None) };
    let tx = chain
        .provider()
        .get_transaction_by_hash(tx_hash)
        .await
        .map_err(rpc)?
        .ok_or_else(|| ChainError::Unexpected(format!("no transaction {tx_hash}")))?;
    let epoch = chain.deal(request_id, None).await?.epoch;
    let not_direct = || ChainError::Unexpected(format!("{tx_hash} is not a direct resolve call"));
    let (commitment, non_signers, signature) =
        match IAttestor::IAttestorCalls::abi_decode(tx.input()).map_err(|_| not_direct())? {
            IAttestor::IAttestorCalls::resolve_0(c) => {
                (c.commitment, c.nonSigners, c.aggregateSignature)
            }
            IAttestor::IAttestorCalls::resolve_1(c) => {
                let call =
                    IRegistry::signerBitmapCall { epoch: U256::from(epoch), indices: c.nonSigners };
                (c.commitment, chain.view(chain.registry, call, None).await?, c.aggregateSignature)
            }
            _ => return Err(not_direct()),
        };
    if commitment.dealId != request_id {
        return Err(not_direct());
    }
    Ok(Some(CertificateProof { commitment, epoch, non_signers, signature }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The encodings of AttestationHash.sol, word by word (the devnet test
    /// checks the hashes against the deployed Attestor's own).
    #[test]
    fn hashes_are_keccak_of_the_abi_encodings() {
        let q = Question {
            specHash: B256::repeat_byte(1),
            deliveryHash: B256::repeat_byte(2),
            prestateAnchorHash: B256::repeat_byte(3),
            prestateRoot: B256::repeat_byte(4),
            backendId: B256::repeat_byte(5),
            backendVersionHash: B256::repeat_byte(6),
        };
        let words: Vec<u8> = (1..=6u8).flat_map(|b| [b; 32]).collect();
        assert_eq!(input_hash(&q), keccak256(&words));
        let attestor = Address::repeat_byte(0xaa);
        let mut pre = U256::from(31_337u64).to_be_bytes::<32>().to_vec();
        pre.extend_from_slice(&[0u8; 12]);
        pre.extend_from_slice(attestor.as_slice());
        pre.extend_from_slice(input_hash(&q).as_slice());
        assert_eq!(request_id(31_337, attestor, input_hash(&q)), keccak256(&pre));
        let mut out = [0u8; 96];
        out[31] = 1;
        out[32..64].copy_from_slice(&[7; 32]);
        out[64..].copy_from_slice(&[8; 32]);
        assert_eq!(output_hash(1, B256::repeat_byte(7), B256::repeat_byte(8)), keccak256(out));
    }
}
