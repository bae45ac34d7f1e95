//! Anchor and witness builders over JSON-RPC (feature `rpc`; async; used by
//! the node and the CLI, never by replay itself).
//!
//! The witness is collected from `eth_createAccessList` plus the plan's caller,
//! target, the coinbase and the predicate's slots, fetched with `eth_getProof`
//! and `eth_getCode` at the anchor block, then verified offline against the
//! anchor. The plan is then executed on the verified witness; any
//! `Missing*Witness` read (a precompile, an account the access list left out)
//! is added and the witness rebuilt, so the result is complete for the plan.
//! An RPC whose block hash differs from the anchor's is refused.

use crate::{run_plan, state::VerifiedState, OperationalError};
use alloy_primitives::{keccak256, Address, Bytes, TxKind, B256};
use alloy_provider::Provider;
use alloy_rpc_types_eth::{BlockId, BlockNumberOrTag, TransactionInput, TransactionRequest};
use alloy_trie::{EMPTY_ROOT_HASH, KECCAK_EMPTY};
use resolvd_proto::{
    AccountStateV1, AccountWitnessV1, EvmAnchorV1, EvmCallPlanV1, EvmSpecId, EvmWitnessV1,
    StorageWitnessV1,
};
use std::collections::BTreeMap;

/// Most rebuild rounds before giving up on a plan whose reads keep growing.
const MAX_ROUNDS: usize = 8;

/// Why an anchor or witness could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The RPC failed.
    #[error("rpc: {0}")]
    Rpc(String),
    /// The RPC does not know the block.
    #[error("block {0} not found")]
    BlockNotFound(u64),
    /// The RPC's block hash is not the hash of its header, or not the anchor's.
    #[error("block {number}: header hashes to {computed}, expected {expected}")]
    BlockHashMismatch {
        /// Block number.
        number: u64,
        /// The hash required.
        expected: B256,
        /// keccak256 of the RLP header the RPC returned.
        computed: B256,
    },
    /// The header has no base fee (pre-London): not supported.
    #[error("block {0} has no base fee")]
    NoBaseFee(u64),
    /// The collected witness does not verify, or the plan keeps reading more.
    #[error("witness: {0}")]
    Witness(#[from] OperationalError),
}

fn rpc<E: std::fmt::Display>(e: E) -> BuildError {
    BuildError::Rpc(e.to_string())
}

async fn header_rlp<P: Provider>(
    provider: &P,
    number: u64,
) -> Result<(Bytes, alloy_consensus::Header, B256), BuildError> {
    let block = provider
        .get_block_by_number(BlockNumberOrTag::Number(number))
        .await
        .map_err(rpc)?
        .ok_or(BuildError::BlockNotFound(number))?;
    let header = block.header.inner.clone();
    let rlp: Bytes = alloy_rlp::encode(&header).into();
    let computed = keccak256(&rlp);
    if computed != block.header.hash {
        return Err(BuildError::BlockHashMismatch {
            number,
            expected: block.header.hash,
            computed,
        });
    }
    Ok((rlp, header, computed))
}

/// Freezes block `number` into an anchor: every environment field from its
/// header, which is checked to hash to the block hash.
pub async fn freeze_anchor<P: Provider>(
    provider: &P,
    number: u64,
    spec_id: EvmSpecId,
) -> Result<EvmAnchorV1, BuildError> {
    let chain_id = provider.get_chain_id().await.map_err(rpc)?;
    let (rlp, header, hash) = header_rlp(provider, number).await?;
    Ok(EvmAnchorV1 {
        chain_id,
        block_number: header.number,
        block_hash: hash,
        state_root: header.state_root,
        timestamp: header.timestamp,
        base_fee: header.base_fee_per_gas.ok_or(BuildError::NoBaseFee(number))?,
        gas_limit: header.gas_limit,
        coinbase: header.beneficiary,
        prevrandao: header.mix_hash,
        spec_id,
        excess_blob_gas: header.excess_blob_gas,
        header: Some(rlp),
    })
}

/// Builds and verifies the witness `plan` needs on `anchor`, including
/// `slots` (e.g. the predicate's) and `ancestors` parent headers.
pub async fn build_witness<P: Provider>(
    provider: &P,
    anchor: &EvmAnchorV1,
    plan: &EvmCallPlanV1,
    slots: &[(Address, B256)],
    ancestors: u64,
) -> Result<EvmWitnessV1, BuildError> {
    let at = BlockId::number(anchor.block_number);
    let (header, _, hash) = header_rlp(provider, anchor.block_number).await?;
    if hash != anchor.block_hash {
        return Err(BuildError::BlockHashMismatch {
            number: anchor.block_number,
            expected: anchor.block_hash,
            computed: hash,
        });
    }
    let mut parents = Vec::new();
    for k in 1..=ancestors.min(anchor.block_number).min(256) {
        parents.push(header_rlp(provider, anchor.block_number - k).await?.0);
    }

    // The read set: access list + caller, target, coinbase, requested slots.
    let mut reads: BTreeMap<Address, Vec<B256>> = BTreeMap::new();
    for a in [plan.caller, plan.target, anchor.coinbase] {
        reads.entry(a).or_default();
    }
    for (a, s) in slots {
        reads.entry(*a).or_default().push(*s);
    }
    let request = TransactionRequest {
        from: Some(plan.caller),
        to: Some(TxKind::Call(plan.target)),
        input: TransactionInput::new(plan.calldata.clone()),
        value: Some(plan.value),
        gas: Some(plan.gas_limit),
        ..Default::default()
    };
    // Some nodes answer a reverting call with an error instead of a partial
    // list; the completion rounds below then find the reads themselves.
    if let Ok(list) = provider.create_access_list(&request).block_id(at).await {
        for item in list.access_list.0 {
            reads.entry(item.address).or_default().extend(item.storage_keys);
        }
    }

    for _ in 0..MAX_ROUNDS {
        let witness = fetch(provider, at, &reads, header.clone(), parents.clone()).await?;
        let state = VerifiedState::verify(anchor, &witness)?;
        match run_plan(anchor, plan, &state) {
            Err(OperationalError::MissingAccountWitness(a)) => {
                reads.entry(a).or_default();
            }
            Err(OperationalError::MissingStorageWitness { address, slot }) => {
                reads.entry(address).or_default().push(slot);
            }
            Err(OperationalError::MissingCodeWitness(_)) => {
                return Err(OperationalError::Evm("code missing from eth_getCode".into()).into())
            }
            Err(e) => return Err(e.into()),
            Ok(_) => return Ok(witness),
        }
    }
    Err(OperationalError::Evm(format!("read set still growing after {MAX_ROUNDS} rounds")).into())
}

async fn fetch<P: Provider>(
    provider: &P,
    at: BlockId,
    reads: &BTreeMap<Address, Vec<B256>>,
    header: Bytes,
    ancestors: Vec<Bytes>,
) -> Result<EvmWitnessV1, BuildError> {
    let mut accounts = Vec::new();
    let mut codes = Vec::new();
    for (address, slots) in reads {
        let mut slots = slots.clone();
        slots.sort();
        slots.dedup();
        let proof = provider.get_proof(*address, slots).block_id(at).await.map_err(rpc)?;
        let empty_code = proof.code_hash == KECCAK_EMPTY || proof.code_hash == B256::ZERO;
        let empty_storage =
            proof.storage_hash == EMPTY_ROOT_HASH || proof.storage_hash == B256::ZERO;
        // An RPC reports a missing account as all-empty; its proof is then an
        // exclusion proof (verified below), so it is recorded as absent.
        let absent = proof.nonce == 0 && proof.balance.is_zero() && empty_code && empty_storage;
        let account = (!absent).then_some(AccountStateV1 {
            nonce: proof.nonce,
            balance: proof.balance,
            storage_root: if empty_storage { EMPTY_ROOT_HASH } else { proof.storage_hash },
            code_hash: if empty_code { KECCAK_EMPTY } else { proof.code_hash },
        });
        if account.as_ref().is_some_and(|a| a.code_hash != KECCAK_EMPTY) {
            codes.push(provider.get_code_at(*address).block_id(at).await.map_err(rpc)?);
        }
        let storage = if absent {
            Vec::new()
        } else {
            proof
                .storage_proof
                .into_iter()
                .map(|s| StorageWitnessV1 { slot: s.key.as_b256(), value: s.value, proof: s.proof })
                .collect()
        };
        accounts.push(AccountWitnessV1 {
            address: *address,
            proof: proof.account_proof,
            account,
            storage,
        });
    }
    let mut witness = EvmWitnessV1 { header, ancestors, accounts, codes };
    witness.codes.sort_by_cached_key(|c| keccak256(c));
    witness.codes.dedup();
    witness.canonicalize();
    Ok(witness)
}
