//! Anchor checks (seed 004, "EVM V1 backend"): an anchor commits a
//! *finalized* block of its chain. Before replaying, the node asks its own RPC
//! whether the block at the anchor's number has exactly the anchor's hash and
//! is at or below the `finalized` block tag. A header that hashes correctly
//! but is not on the chain (a forged block with its own state root) is
//! thereby refused, and never signed; a canonical block that is not final yet
//! is waited for.
//!
//! Anchors on another chain than the escrow's are read through that chain's
//! endpoint in `[chain.anchor_rpc]`; without one they cannot be checked here
//! and are refused (never signed).

use crate::{
    chain::{ChainError, RPC_CONNECT_TIMEOUT, RPC_TIMEOUT},
    dispute::{AnchorRef, AnchorStatus},
};
use alloy_provider::{DynProvider, Provider, ProviderBuilder};
use alloy_rpc_types_eth::BlockNumberOrTag;
use std::{collections::BTreeMap, collections::HashMap, sync::Arc};

/// Checks anchors against the chains' own RPC endpoints.
#[derive(Clone, Debug)]
pub struct AnchorChecker {
    chains: Arc<HashMap<u64, DynProvider>>,
}

fn rpc<E: std::fmt::Display>(e: E) -> ChainError {
    ChainError::Rpc(e.to_string())
}

/// A read-only provider for `url` with the node's timeouts.
pub fn read_provider(url: &str) -> Result<DynProvider, ChainError> {
    let parsed = url.parse().map_err(|e| ChainError::Rpc(format!("rpc url {url}: {e}")))?;
    let http = reqwest::Client::builder()
        .timeout(RPC_TIMEOUT)
        .connect_timeout(RPC_CONNECT_TIMEOUT)
        .build()
        .map_err(|e| ChainError::Rpc(format!("http client: {e}")))?;
    Ok(ProviderBuilder::new().connect_reqwest(http, parsed).erased())
}

impl AnchorChecker {
    /// The escrow's own chain (`chain_id`, read through `own`) and the
    /// endpoints of `anchor_rpc` (chain id → URL), each of which must report
    /// the chain id it is listed under.
    pub async fn connect(
        chain_id: u64,
        own: DynProvider,
        anchor_rpc: &BTreeMap<String, String>,
    ) -> Result<Self, ChainError> {
        let mut chains = HashMap::from([(chain_id, own)]);
        for (id, url) in anchor_rpc {
            let id: u64 = id.parse().map_err(|_| {
                ChainError::Rpc(format!("chain.anchor_rpc: {id:?} is not a chain id"))
            })?;
            let provider = read_provider(url)?;
            let reported = provider.get_chain_id().await.map_err(rpc)?;
            if reported != id {
                return Err(ChainError::Rpc(format!(
                    "chain.anchor_rpc.{id}: the endpoint reports chain id {reported}"
                )));
            }
            chains.insert(id, provider);
        }
        Ok(Self { chains: Arc::new(chains) })
    }

    /// Whether `anchor` is canonical and final. An `Err` is an RPC failure
    /// (the caller retries); every answer about the block itself is `Ok`.
    pub async fn check(&self, anchor: &AnchorRef) -> Result<AnchorStatus, ChainError> {
        let Some(provider) = self.chains.get(&anchor.chain_id) else {
            return Ok(AnchorStatus::NotCanonical {
                canonical: None,
                reason: format!(
                    "the anchor is on chain {} and chain.anchor_rpc has no endpoint for it",
                    anchor.chain_id
                ),
            });
        };
        // Finalized first: a block at or below it cannot change afterwards.
        let finalized = provider
            .get_block_by_number(BlockNumberOrTag::Finalized)
            .await
            .map_err(rpc)?
            .map(|b| b.header.number)
            .ok_or_else(|| ChainError::Rpc("the endpoint has no finalized block".into()))?;
        let block = provider
            .get_block_by_number(BlockNumberOrTag::Number(anchor.block_number))
            .await
            .map_err(rpc)?;
        let status = match block {
            // Not produced yet: it may still appear (and then be checked).
            None => AnchorStatus::NotFinal { finalized },
            Some(b) if b.header.hash == anchor.block_hash => {
                if anchor.block_number <= finalized {
                    AnchorStatus::Final
                } else {
                    AnchorStatus::NotFinal { finalized }
                }
            }
            // Another block at that height: decided only once it is final
            // (a fork the anchor is on could still win before that).
            Some(b) if anchor.block_number <= finalized => AnchorStatus::NotCanonical {
                canonical: Some(b.header.hash),
                reason: format!(
                    "block {} of chain {} is {}, not the anchor's {}",
                    anchor.block_number, anchor.chain_id, b.header.hash, anchor.block_hash
                ),
            },
            Some(_) => AnchorStatus::NotFinal { finalized },
        };
        Ok(status)
    }
}
