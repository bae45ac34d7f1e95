//! What the engine asks of the shell and what it hears back: [`Action`]s, the
//! results of the IO they start, gossip verdicts ([`Validation`]) and the
//! origin type the shell names messages by ([`MessageOrigin`]).

use super::*;
use alloy_primitives::{Address, B256};
use resolvd_consensus::{Attestation, ConflictEvidence, QuorumCertificate};
use resolvd_proto::{
    decode_committed,
    wire::{DisputeAnnouncement, SignedVerdict},
    ReexecRequestV1, VerdictCommitment, VerdictEnvelopeV1, EVM_BACKEND_ID,
};
use serde::Serialize;
use std::time::Duration;

/// Where a gossip message came from, as the shell names it (for libp2p, the
/// gossipsub message id and the peer that propagated it). The engine compares
/// origins, charges their peer's quotas, logs the peer, and hands the origin
/// back with its verdict in [`Action::Report`].
pub trait MessageOrigin: Clone + std::fmt::Debug + Eq {
    /// The peer a message came from.
    type Peer: Clone + std::fmt::Debug + std::fmt::Display + Eq + std::hash::Hash;
    /// The peer this message came from.
    fn peer(&self) -> &Self::Peer;
}

/// The verdict on a gossiped message, for the shell to report to its gossip
/// layer (libp2p's `Validation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Validation {
    /// Valid: forward it.
    Accept,
    /// Not forwarded, no penalty (duplicate, unknown yet, over a bound).
    Ignore,
    /// Invalid: not forwarded, the sender is penalised.
    Reject,
}

/// A deal's EVM anchor block, as the anchor document names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct AnchorRef {
    /// The chain the block is on.
    pub chain_id: u64,
    /// Its number.
    pub block_number: u64,
    /// Its hash.
    pub block_hash: B256,
}

impl AnchorRef {
    /// The EVM anchor of a replay request, if its anchor document is an EVM
    /// anchor that decodes (hash first). Anything else is left to the replay,
    /// which decides it deterministically.
    pub fn of(request: &ReexecRequestV1) -> Option<Self> {
        let doc = decode_committed::<resolvd_proto::PrestateAnchorV1>(
            &request.prestate_anchor,
            &request.prestate_anchor_hash,
        )
        .ok()?;
        if doc.backend_id != *EVM_BACKEND_ID {
            return None;
        }
        let evm = <resolvd_proto::EvmAnchorV1 as resolvd_proto::Canonical>::from_canonical_bytes(
            &doc.body,
        )
        .ok()?;
        Some(Self {
            chain_id: evm.chain_id,
            block_number: evm.block_number,
            block_hash: evm.block_hash,
        })
    }
}

/// Whether an anchor block is canonical and final on its chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum AnchorStatus {
    /// On the canonical chain at or below the finalized block: replay.
    Final,
    /// Not final yet (beyond the finalized block; canonical or not yet
    /// decided): wait and check again, until the resolve deadline.
    NotFinal {
        /// The chain's finalized block when checked.
        finalized: u64,
    },
    /// A final block with another hash is at that height (or the anchor's
    /// chain cannot be read here): never signed.
    NotCanonical {
        /// The canonical hash at that height, if the chain is readable.
        canonical: Option<B256>,
        /// Why.
        reason: String,
    },
}

/// Who asked for a confirmation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfirmSource {
    /// A gossiped announcement: compared field by field at the node's confirmed head.
    Gossip,
    /// The node's own watcher saw the log: is the deal still disputed now?
    Chain,
    /// The log was reorged out: is the deal disputed at all now? If not, it
    /// is dropped without a trace (not recorded as settled).
    Reorg,
}

/// What the node's own RPC says of an announced dispute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Confirmation {
    /// Disputed with exactly the announced fields.
    Disputed,
    /// The deal exists but is not (or not yet, or no longer) disputed as announced.
    NotDisputed,
    /// No such deal exists at all (only asked for gossip: the announcement is made up).
    NoSuchDeal,
    /// Disputed as announced, but its `Disputed` log is not in the announced
    /// transaction and block, or the announced order entropy is not the one
    /// drawn after that block, as this node's RPC has them (only asked for
    /// gossip): a peer chose what seeds the dispute's order, or a reorg
    /// moved the challenge, or the RPC has no receipt for it.
    Misplaced,
}

/// The result of a `resolve` submission.
#[derive(Clone, Debug)]
pub enum SubmitResult {
    /// Mined and successful.
    Sent {
        /// Transaction hash.
        tx: B256,
        /// Gas used.
        gas: u64,
    },
    /// The deal is no longer disputed (another node settled it).
    AlreadyResolved,
    /// The escrow rejects this certificate deterministically (a revert that
    /// retrying cannot change): the certificate is dropped, a better one may
    /// replace it.
    Rejected(String),
    /// A transient failure (RPC, timeout, nonce): retried with backoff.
    Failed(String),
}

/// The result of a slashing transaction.
#[derive(Clone, Debug)]
pub enum SlashResult {
    /// Slashed by this transaction, or already slashed (`None`).
    Done(Option<B256>),
    /// A transient failure: retried.
    Failed(String),
}

/// What the store holds of a dispute's content.
#[derive(Clone, Debug)]
pub enum Gathered {
    /// Everything: the replay request.
    Ready(Box<ReexecRequestV1>),
    /// These (hash, type tag) pairs are missing.
    Missing(Vec<(B256, &'static str)>),
}

/// A slashing the shell should send.
#[derive(Clone, Debug)]
pub struct SlashRequest {
    /// The deal of the evidence.
    pub deal_id: B256,
    /// The escrow whose domain the two sides were signed under.
    pub escrow: Address,
    /// One side.
    pub first: Attestation,
    /// The other side.
    pub second: Attestation,
    /// Registry indices slashed by it.
    pub resolvers: Vec<u32>,
}

/// What the shell must do.
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Action<O> {
    /// Ask the node's own RPC about an announced dispute, after `delay`;
    /// answer with [`Engine::on_confirmed`].
    Confirm {
        /// The announcement.
        announcement: Box<DisputeAnnouncement>,
        /// Who asked.
        source: ConfirmSource,
        /// Wait this long first (a retry).
        delay: Duration,
    },
    /// Load the committee of an epoch that exists at a confirmed block;
    /// answer with [`Engine::on_committee`].
    LoadCommittee(u64),
    /// Read a dispute's content from the store; answer with [`Engine::on_gathered`].
    Gather(Box<DisputeAnnouncement>),
    /// Ask peers for content; a stored answer is reported with [`Engine::on_content_stored`].
    Fetch {
        /// Content hash.
        hash: B256,
        /// Its type tag.
        tag: &'static str,
    },
    /// Check the anchor block against the node's RPC (canonical and final);
    /// answer with [`Engine::on_anchor_checked`], handing the request back.
    CheckAnchor(Box<ReexecRequestV1>, AnchorRef),
    /// Replay on the pool; answer with [`Engine::on_replayed`].
    Replay(Box<ReexecRequestV1>),
    /// Sign through slashing protection and persist the partial, then report
    /// it with [`Engine::on_signed`] (or [`Engine::on_sign_refused`]).
    Sign {
        /// The deal.
        deal_id: B256,
        /// Its escrow (the signing domain).
        escrow: Address,
        /// What to sign.
        commitment: VerdictCommitment,
        /// The pinned epoch.
        epoch: u64,
        /// This node's index in it.
        index: u32,
        /// Commit-reveal is on for the dispute: also sign the commitment to
        /// the partial ([`PartialCommit::signing_message`]) and hand it to
        /// [`Engine::on_signed`].
        commit: bool,
    },
    /// Gossip.
    Publish(Gossip),
    /// Send an own message straight to these committee members (registry
    /// indices): a dispute's aggregators ([`crate::Dissemination`]). It is not
    /// forwarded; the members verify it as a gossiped one (its origin's
    /// verdict comes back in [`Action::Report`]).
    Send {
        /// The committee epoch the indices are of.
        epoch: u64,
        /// The members.
        to: Vec<u32>,
        /// The messages, in one request: each member takes them in this
        /// order at one instant.
        messages: Vec<Gossip>,
    },
    /// Report a gossiped message's validation result.
    Report {
        /// Where it came from.
        origin: O,
        /// Its topic.
        topic: Topic,
        /// The verdict on it.
        acceptance: Validation,
    },
    /// Send `resolve`; answer with [`Engine::on_submitted`].
    Submit {
        /// The deal.
        deal_id: B256,
        /// Its escrow.
        escrow: Address,
        /// The certificate.
        certificate: Box<QuorumCertificate>,
        /// Its non-signers as the registry's position bitmap
        /// ([`resolvd_consensus::Committee::position_bitmap`]).
        non_signers: Vec<u8>,
    },
    /// Send `slashEquivocation`; answer with [`Engine::on_slashed`].
    Slash(Box<SlashRequest>),
    /// Persist a dispute's status.
    PersistDispute(Box<DisputeAnnouncement>, DisputeStatus),
    /// Persist a verified partial of another signer.
    PersistPartial(SignedVerdict),
    /// Persist a certificate.
    PersistCertificate(Box<QuorumCertificate>),
    /// Persist a replayed envelope.
    PersistEnvelope(Box<VerdictEnvelopeV1>),
    /// Record that a resolver was slashed for a deal.
    PersistSlashed {
        /// The deal.
        deal_id: B256,
        /// The resolver.
        resolver: u32,
        /// The slashing transaction (zero if unknown).
        tx: B256,
    },
    /// Write evidence as a file for operators and `resolvd slash`.
    WriteEvidence(Box<ConflictEvidence>, Vec<u32>),
    /// Delete a finished dispute's records (dispute, partials, certificate)
    /// once it left memory. Slashing protection and slashing records stay.
    Prune(B256),
}
