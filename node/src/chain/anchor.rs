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
//!
//! With several endpoints for the escrow's chain (`chain.rpc_urls`), one of
//! them alone does not decide: every endpoint that is up is asked (every one
//! whose chain id was checked, when fewer are up than needed), and the anchor is final only when at least `chain.rpc_quorum` of
//! them (default 2) find the block at its height with the anchor's hash at or
//! below their `finalized` block, and none finds another block there that it
//! calls final. It is refused only when `rpc_quorum` agree on that other
//! block and none calls the anchor final. Anything else (an endpoint that
//! lies about `finalized` or a block hash, one that lags) reads as not final
//! yet: checked again, never signed on one endpoint's word. Fewer answers
//! than `rpc_quorum` is an RPC failure (retried). An endpoint that called the
//! anchor final, or another block canonical, without the check following it
//! is counted in its health (`disagreements`, `last_disagreement` in
//! `/status`; `resolvd_rpc_endpoint_disagreements_total`): a lie, or an
//! honest endpoint a block ahead of the others at the edge of finality (a
//! steady rise on one endpoint is the former).

use crate::chain::rpc::{EndpointReader, RPC_CONNECT_TIMEOUT, RPC_TIMEOUT};
use crate::{
    chain::ChainError,
    dispute::{AnchorRef, AnchorStatus},
};
use alloy_primitives::B256;
use alloy_provider::{DynProvider, Provider, ProviderBuilder};
use alloy_rpc_types_eth::BlockNumberOrTag;
use std::{collections::BTreeMap, collections::HashMap, sync::Arc};

/// Checks anchors against the chains' own RPC endpoints.
#[derive(Clone, Debug)]
pub struct AnchorChecker {
    chains: Arc<HashMap<u64, DynProvider>>,
    cross: Option<Arc<CrossCheck>>,
}

/// The escrow chain's endpoints, each asked on its own.
#[derive(Debug)]
struct CrossCheck {
    chain_id: u64,
    readers: Vec<EndpointReader>,
    quorum: usize,
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
        Ok(Self { chains: Arc::new(chains), cross: None })
    }

    /// Checks anchors on `chain_id` against every endpoint of `readers` (the
    /// chain's own, see [`crate::chain::Chain::readers`]): final only when
    /// `quorum` of them agree (see the module documentation). A quorum of 1
    /// or a single endpoint keeps the provider given to [`Self::connect`].
    pub fn with_cross_check(
        mut self,
        chain_id: u64,
        readers: Vec<EndpointReader>,
        quorum: usize,
    ) -> Self {
        self.cross = (quorum >= 2 && readers.len() >= 2)
            .then(|| Arc::new(CrossCheck { chain_id, readers, quorum }));
        self
    }

    /// Whether `anchor` is canonical and final. An `Err` is an RPC failure
    /// (the caller retries); every answer about the block itself is `Ok`.
    pub async fn check(&self, anchor: &AnchorRef) -> Result<AnchorStatus, ChainError> {
        if let Some(cross) = self.cross.as_ref().filter(|c| c.chain_id == anchor.chain_id) {
            return cross.check(anchor).await;
        }
        let Some(provider) = self.chains.get(&anchor.chain_id) else {
            return Ok(AnchorStatus::NotCanonical {
                canonical: None,
                reason: format!(
                    "the anchor is on chain {} and chain.anchor_rpc has no endpoint for it",
                    anchor.chain_id
                ),
            });
        };
        Ok(check_one(provider, anchor).await?.0)
    }
}

/// `anchor`'s status on one endpoint, and that endpoint's finalized block.
async fn check_one(
    provider: &DynProvider,
    anchor: &AnchorRef,
) -> Result<(AnchorStatus, u64), ChainError> {
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
    Ok((status, finalized))
}

/// The kind of an answer, for comparing endpoints (a `NotFinal`'s finalized
/// block may differ between honest endpoints; a `NotCanonical`'s block may not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Final,
    NotFinal,
    Other(Option<B256>),
}

fn verdict(status: &AnchorStatus) -> Verdict {
    match status {
        AnchorStatus::Final => Verdict::Final,
        AnchorStatus::NotFinal { .. } => Verdict::NotFinal,
        AnchorStatus::NotCanonical { canonical, .. } => Verdict::Other(*canonical),
    }
}

impl CrossCheck {
    async fn check(&self, anchor: &AnchorRef) -> Result<AnchorStatus, ChainError> {
        // Every endpoint that is up (more answers catch more lies); the
        // failing ones too when that is not enough.
        let mut usable: Vec<&EndpointReader> = self.readers.iter().filter(|r| r.up()).collect();
        if usable.len() < self.quorum {
            usable = self.readers.iter().filter(|r| r.usable()).collect();
        }
        if usable.len() < self.quorum {
            return Err(ChainError::Rpc(format!(
                "the anchor check needs {} rpc endpoints with a checked chain id (chain.rpc_quorum); {} have one",
                self.quorum,
                usable.len()
            )));
        }
        let answers =
            futures::future::join_all(usable.iter().map(|r| check_one(r.provider(), anchor))).await;
        let mut ok = Vec::with_capacity(answers.len());
        let mut failed = Vec::new();
        for (reader, answer) in usable.iter().zip(answers) {
            match answer {
                Ok((status, finalized)) => ok.push((*reader, status, finalized)),
                Err(e) => failed.push(format!("{}: {e}", reader.label())),
            }
        }
        if ok.len() < self.quorum {
            return Err(ChainError::Rpc(format!(
                "the anchor check needs {} rpc endpoints to answer (chain.rpc_quorum); {} did: {}",
                self.quorum,
                ok.len(),
                failed.join("; ")
            )));
        }
        let answers: Vec<(AnchorStatus, u64)> =
            ok.iter().map(|(_, s, f)| (s.clone(), *f)).collect();
        let outcome = decide(&answers, self.quorum);
        let finals = answers.iter().filter(|(s, _)| *s == AnchorStatus::Final).count();
        let conflict = finals > 0
            && answers.iter().any(|(s, _)| matches!(s, AnchorStatus::NotCanonical { .. }));
        let decided = verdict(&outcome);
        for (reader, status, their_finalized) in &ok {
            // "Not final" is never acted on: only a claim not followed counts.
            if verdict(status) == decided || verdict(status) == Verdict::NotFinal {
                continue;
            }
            let what = format!(
                "anchor block {} ({}): answered {} (its finalized block {their_finalized}), the cross-check of {} endpoints (quorum {}) decided {}",
                anchor.block_number,
                anchor.block_hash,
                describe(status),
                ok.len(),
                self.quorum,
                describe(&outcome),
            );
            if conflict || verdict(status) != Verdict::Final {
                tracing::warn!(target: "chain", endpoint = reader.label(), "{what}");
            } else {
                // Final on one, not yet on others: a lie, or a lag at the edge.
                tracing::info!(target: "chain", endpoint = reader.label(), "{what}");
            }
            reader.disagreed(what);
        }
        Ok(outcome)
    }
}

/// The cross-check's outcome from the endpoints' answers (status, finalized
/// block): final when `quorum` say final and none names another block;
/// another block when `quorum` name the same one and none says final; else
/// not final (at the lowest finalized block reported).
fn decide(answers: &[(AnchorStatus, u64)], quorum: usize) -> AnchorStatus {
    let finals = answers.iter().filter(|(s, _)| *s == AnchorStatus::Final).count();
    let others: Vec<(&AnchorStatus, Option<B256>)> = answers
        .iter()
        .filter_map(|(s, _)| match s {
            AnchorStatus::NotCanonical { canonical, .. } => Some((s, *canonical)),
            _ => None,
        })
        .collect();
    let finalized = answers.iter().map(|(_, f)| *f).min().unwrap_or_default();
    if finals >= quorum && others.is_empty() {
        return AnchorStatus::Final;
    }
    match others.first() {
        Some((first, hash))
            if finals == 0 && others.len() >= quorum && others.iter().all(|(_, h)| h == hash) =>
        {
            (*first).clone()
        }
        _ => AnchorStatus::NotFinal { finalized },
    }
}

fn describe(status: &AnchorStatus) -> String {
    match status {
        AnchorStatus::Final => "final".into(),
        AnchorStatus::NotFinal { .. } => "not final".into(),
        AnchorStatus::NotCanonical { canonical: Some(h), .. } => {
            format!("another block ({h}) final there")
        }
        AnchorStatus::NotCanonical { canonical: None, reason } => {
            format!("not canonical ({reason})")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn other(byte: u8) -> AnchorStatus {
        AnchorStatus::NotCanonical {
            canonical: Some(B256::repeat_byte(byte)),
            reason: "another block".into(),
        }
    }

    #[test]
    fn one_endpoint_alone_decides_nothing() {
        let fin = AnchorStatus::Final;
        let not = |f| AnchorStatus::NotFinal { finalized: f };
        // Two say final: final.
        assert_eq!(decide(&[(fin.clone(), 30), (fin.clone(), 29)], 2), fin);
        // A liar ahead: not final, at the lowest finalized block.
        assert_eq!(decide(&[(fin.clone(), 33), (not(29), 29)], 2), not(29));
        // Final and another block at that height: not final, never refused.
        assert_eq!(decide(&[(fin.clone(), 33), (other(1), 30)], 2), not(30));
        assert_eq!(decide(&[(fin.clone(), 33), (fin.clone(), 33), (other(1), 30)], 2), not(30));
        // Refused only when a quorum names the same other block.
        assert_eq!(decide(&[(other(1), 30), (other(1), 31)], 2), other(1));
        assert_eq!(decide(&[(other(1), 30), (other(2), 31)], 2), not(30));
        assert_eq!(decide(&[(other(1), 30), (not(28), 28)], 2), not(28));
        // Three endpoints, quorum 2: one lagging does not hold the others up.
        assert_eq!(decide(&[(fin.clone(), 30), (fin.clone(), 30), (not(25), 25)], 2), fin);
        // Quorum 1 follows one endpoint.
        assert_eq!(decide(&[(fin.clone(), 30)], 1), fin);
    }
}
