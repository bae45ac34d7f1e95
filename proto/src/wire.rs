//! Wire messages (protobuf, prost) and their validated domain forms.
//!
//! Decoding is size-checked first ([`WireMessage::MAX_LEN`]), then parsed by
//! prost, then converted: every length, range and ordering rule is checked in
//! the conversion, so a domain value is always well-formed. Protobuf bytes are
//! never hashed or signed; what is signed is the EIP-712 digest of the
//! [`VerdictCommitment`] inside.

use crate::{codec::MAX_DOCUMENT_LEN, hash::TYPE_TAGS, ContentHash, VerdictCommitment, WireError};
use alloy_primitives::{Address, Bytes, B256};
use prost::Message;

/// Generated protobuf types (`wire/resolvd_wire.proto`).
#[allow(missing_docs, unreachable_pub, clippy::all, clippy::pedantic)]
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/resolvd.wire.v1.rs"));
}

/// Length of a compressed BLS12-381 G2 signature.
pub const SIGNATURE_LEN: usize = 96;
/// Most signer / non-signer indices one message may list.
pub const MAX_INDICES: usize = 4096;
/// Largest gossip message (any topic): 64 KiB.
pub const MAX_GOSSIP_LEN: usize = 64 * 1024;
/// Largest content response: one maximal canonical document plus framing.
pub const MAX_CONTENT_RESPONSE_LEN: usize = MAX_DOCUMENT_LEN + 1024;

/// A compressed BLS signature as carried on the wire; the consensus crate
/// deserialises and subgroup-checks it.
pub type SignatureBytes = [u8; SIGNATURE_LEN];

/// A validated wire message.
pub trait WireMessage: Sized {
    /// Message name, for errors and logs.
    const NAME: &'static str;
    /// Largest encoding accepted; larger input is rejected undecoded.
    const MAX_LEN: usize;
    /// The generated protobuf type.
    type Proto: Message + Default;

    /// Validates a decoded protobuf value.
    fn from_proto(p: Self::Proto) -> Result<Self, WireError>;
    /// The protobuf value of this message.
    fn to_proto(&self) -> Self::Proto;

    /// Size check, protobuf decode, validation.
    fn decode_wire(bytes: &[u8]) -> Result<Self, WireError> {
        if bytes.len() > Self::MAX_LEN {
            return Err(WireError::TooLarge {
                message: Self::NAME,
                len: bytes.len(),
                max: Self::MAX_LEN,
            });
        }
        let p = Self::Proto::decode(bytes)
            .map_err(|e| WireError::Malformed { message: Self::NAME, reason: e.to_string() })?;
        Self::from_proto(p)
    }

    /// [`Self::decode_wire`], and the bytes must be the message's own
    /// encoding ([`Self::encode_wire`] of the decoded value). Protobuf is
    /// malleable (field order, repeated or unknown fields, non-minimal
    /// varints): gossip is decoded with this, so each message has exactly
    /// one encoding and byte-different variants of it are rejected rather
    /// than accepted and forwarded as distinct messages.
    fn decode_canonical(bytes: &[u8]) -> Result<Self, WireError> {
        let m = Self::decode_wire(bytes)?;
        if m.encode_wire() != bytes {
            return Err(WireError::NonCanonical { message: Self::NAME });
        }
        Ok(m)
    }

    /// The protobuf encoding of this message.
    fn encode_wire(&self) -> Vec<u8> {
        self.to_proto().encode_to_vec()
    }
}

fn fixed<const N: usize>(
    message: &'static str,
    field: &'static str,
    v: &[u8],
) -> Result<[u8; N], WireError> {
    v.try_into().map_err(|_| WireError::InvalidLength {
        message,
        field,
        expected: N,
        found: v.len(),
    })
}

fn b256(message: &'static str, field: &'static str, v: &[u8]) -> Result<B256, WireError> {
    fixed::<32>(message, field, v).map(B256::from)
}

fn indices(
    message: &'static str,
    field: &'static str,
    v: Vec<u32>,
    non_empty: bool,
) -> Result<Vec<u32>, WireError> {
    if v.len() > MAX_INDICES {
        return Err(WireError::OutOfRange { message, field, reason: "too many indices" });
    }
    if non_empty && v.is_empty() {
        return Err(WireError::OutOfRange { message, field, reason: "must not be empty" });
    }
    if v.windows(2).any(|w| w[0] >= w[1]) {
        return Err(WireError::NotAscending { message, field });
    }
    Ok(v)
}

fn commitment(
    message: &'static str,
    p: Option<pb::VerdictCommitment>,
) -> Result<VerdictCommitment, WireError> {
    let p = p.ok_or(WireError::MissingField { message, field: "commitment" })?;
    let outcome =
        u8::try_from(p.outcome).ok().and_then(VerdictCommitment::outcome_from_onchain).ok_or(
            WireError::OutOfRange { message, field: "commitment.outcome", reason: "not 0 or 1" },
        )?;
    Ok(VerdictCommitment {
        deal_id: b256(message, "commitment.deal_id", &p.deal_id)?,
        spec_hash: b256(message, "commitment.spec_hash", &p.spec_hash)?,
        delivery_hash: b256(message, "commitment.delivery_hash", &p.delivery_hash)?,
        prestate_anchor_hash: b256(
            message,
            "commitment.prestate_anchor_hash",
            &p.prestate_anchor_hash,
        )?,
        prestate_root: b256(message, "commitment.prestate_root", &p.prestate_root)?,
        backend_id: b256(message, "commitment.backend_id", &p.backend_id)?,
        backend_version_hash: b256(
            message,
            "commitment.backend_version_hash",
            &p.backend_version_hash,
        )?,
        outcome,
        result_hash: b256(message, "commitment.result_hash", &p.result_hash)?,
        trace_hash: b256(message, "commitment.trace_hash", &p.trace_hash)?,
    })
}

fn commitment_proto(c: &VerdictCommitment) -> pb::VerdictCommitment {
    pb::VerdictCommitment {
        deal_id: c.deal_id.to_vec(),
        spec_hash: c.spec_hash.to_vec(),
        delivery_hash: c.delivery_hash.to_vec(),
        prestate_anchor_hash: c.prestate_anchor_hash.to_vec(),
        prestate_root: c.prestate_root.to_vec(),
        backend_id: c.backend_id.to_vec(),
        backend_version_hash: c.backend_version_hash.to_vec(),
        outcome: u32::from(c.onchain_outcome()),
        result_hash: c.result_hash.to_vec(),
        trace_hash: c.trace_hash.to_vec(),
    }
}

/// A dispute seen on chain, gossiped so lagging nodes hear of it. Receivers act
/// on it only after their own RPC confirms it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DisputeAnnouncement {
    /// Chain of the escrow.
    pub chain_id: u64,
    /// The escrow contract.
    pub escrow: Address,
    /// The disputed deal.
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
    /// The committee epoch pinned at challenge.
    pub epoch: u64,
    /// Unix time after which the deal can only time out.
    pub resolve_deadline: u64,
    /// Block of the `Disputed` event.
    pub block_number: u64,
    /// Transaction of the `Disputed` event.
    pub tx_hash: B256,
    /// Block of the `Disputed` event (its hash). Zero means unknown: encoded
    /// as an absent field, as a record stored before the field existed
    /// decodes. Receivers check it against their own chain.
    pub block_hash: B256,
    /// What seeds the dispute's submitter and aggregator order with the deal
    /// id: on a chain whose `prevrandao` is the beacon RANDAO, the
    /// `prevrandao` (`mixHash`) of the block after `block_hash`; elsewhere
    /// `block_hash` itself (the node's `RANDAO_CHAINS`). Zero means
    /// unknown (a record stored before the field existed): the order then
    /// falls back to `block_hash`. Encoded like `block_hash`; receivers check
    /// it against their own chain.
    pub order_entropy: B256,
}

impl WireMessage for DisputeAnnouncement {
    const NAME: &'static str = "DisputeAnnouncement";
    const MAX_LEN: usize = 1024;
    type Proto = pb::DisputeAnnouncement;

    fn from_proto(p: Self::Proto) -> Result<Self, WireError> {
        const M: &str = "DisputeAnnouncement";
        Ok(Self {
            chain_id: p.chain_id,
            escrow: Address::from(fixed::<20>(M, "escrow", &p.escrow)?),
            deal_id: b256(M, "deal_id", &p.deal_id)?,
            spec_hash: b256(M, "spec_hash", &p.spec_hash)?,
            delivery_hash: b256(M, "delivery_hash", &p.delivery_hash)?,
            prestate_anchor_hash: b256(M, "prestate_anchor_hash", &p.prestate_anchor_hash)?,
            prestate_root: b256(M, "prestate_root", &p.prestate_root)?,
            backend_id: b256(M, "backend_id", &p.backend_id)?,
            backend_version_hash: b256(M, "backend_version_hash", &p.backend_version_hash)?,
            epoch: p.epoch,
            resolve_deadline: p.resolve_deadline,
            block_number: p.block_number,
            tx_hash: b256(M, "tx_hash", &p.tx_hash)?,
            block_hash: optional_b256(M, "block_hash", &p.block_hash)?,
            order_entropy: optional_b256(M, "order_entropy", &p.order_entropy)?,
        })
    }

    fn to_proto(&self) -> Self::Proto {
        pb::DisputeAnnouncement {
            chain_id: self.chain_id,
            escrow: self.escrow.to_vec(),
            deal_id: self.deal_id.to_vec(),
            spec_hash: self.spec_hash.to_vec(),
            delivery_hash: self.delivery_hash.to_vec(),
            prestate_anchor_hash: self.prestate_anchor_hash.to_vec(),
            prestate_root: self.prestate_root.to_vec(),
            backend_id: self.backend_id.to_vec(),
            backend_version_hash: self.backend_version_hash.to_vec(),
            epoch: self.epoch,
            resolve_deadline: self.resolve_deadline,
            block_number: self.block_number,
            tx_hash: self.tx_hash.to_vec(),
            block_hash: optional_bytes(&self.block_hash),
            order_entropy: optional_bytes(&self.order_entropy),
        }
    }
}

/// A 32-byte field that may be absent: absent (empty) is zero.
fn optional_b256(m: &'static str, field: &'static str, b: &[u8]) -> Result<B256, WireError> {
    if b.is_empty() {
        Ok(B256::ZERO)
    } else {
        b256(m, field, b)
    }
}

/// Zero is encoded as an absent field (its canonical form).
fn optional_bytes(v: &B256) -> Vec<u8> {
    if v.is_zero() {
        Vec::new()
    } else {
        v.to_vec()
    }
}

/// One resolver's partial signature over a commitment's EIP-712 digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedVerdict {
    /// What was signed.
    pub commitment: VerdictCommitment,
    /// The committee epoch the signer belongs to.
    pub epoch: u64,
    /// The signer's index in that epoch.
    pub signer_index: u32,
    /// Compressed G2 signature.
    pub signature: SignatureBytes,
}

impl WireMessage for SignedVerdict {
    const NAME: &'static str = "SignedVerdict";
    const MAX_LEN: usize = MAX_GOSSIP_LEN;
    type Proto = pb::SignedVerdict;

    fn from_proto(p: Self::Proto) -> Result<Self, WireError> {
        Ok(Self {
            commitment: commitment(Self::NAME, p.commitment)?,
            epoch: p.epoch,
            signer_index: p.signer_index,
            signature: fixed(Self::NAME, "signature", &p.signature)?,
        })
    }

    fn to_proto(&self) -> Self::Proto {
        pb::SignedVerdict {
            commitment: Some(commitment_proto(&self.commitment)),
            epoch: self.epoch,
            signer_index: self.signer_index,
            signature: self.signature.to_vec(),
        }
    }
}

/// Domain prefix of [`partial_commit`].
pub const PARTIAL_COMMIT_DOMAIN: &[u8] = b"resolvd/v1/partial-commit";

/// The commitment to a partial gossiped before the partial itself:
/// `SHA-256("resolvd/v1/partial-commit" || epoch_be8 || signer_index_be4 || signature)`.
/// The signature already binds the deal and the escrow (it is over the
/// EIP-712 digest), and BLS signing is deterministic, so a node that
/// re-signs after a crash recomputes the same commitment.
pub fn partial_commit(epoch: u64, signer_index: u32, signature: &SignatureBytes) -> B256 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::new()
        .chain_update(PARTIAL_COMMIT_DOMAIN)
        .chain_update(epoch.to_be_bytes())
        .chain_update(signer_index.to_be_bytes())
        .chain_update(signature)
        .finalize();
    B256::from_slice(&digest)
}

/// Domain prefix of [`PartialCommit::signing_message`].
pub const PARTIAL_COMMIT_SIGNATURE_DOMAIN: &[u8] = b"resolvd/v1/partial-commit-signature";

/// A resolver's commitment to its partial ([`partial_commit`]), gossiped while
/// the commit phase of a dispute is open, signed by the resolver's registered
/// BLS key over [`Self::signing_message`] (under the consensus crate's
/// commitment DST, never the verdict DST): only a member can commit for its
/// own index, so nobody can fill or fake another member's commitment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PartialCommit {
    /// The deal.
    pub deal_id: B256,
    /// The committee epoch the signer belongs to.
    pub epoch: u64,
    /// The signer's index in that epoch.
    pub signer_index: u32,
    /// [`partial_commit`] of the partial.
    pub commit: B256,
    /// The signer's BLS signature over [`Self::signing_message`] (compressed G2).
    pub signature: SignatureBytes,
}

impl PartialCommit {
    /// The commitment hash of `p` ([`partial_commit`]).
    pub fn commit_of(p: &SignedVerdict) -> B256 {
        partial_commit(p.epoch, p.signer_index, &p.signature)
    }

    /// The commitment to `p` with `signature` (which the caller makes over
    /// [`Self::signing_message`] of the returned fields).
    pub fn of(p: &SignedVerdict, signature: SignatureBytes) -> Self {
        Self {
            deal_id: p.commitment.deal_id,
            epoch: p.epoch,
            signer_index: p.signer_index,
            commit: Self::commit_of(p),
            signature,
        }
    }

    /// What the signer signs: `SHA-256("resolvd/v1/partial-commit-signature"
    /// ‖ dealId ‖ epoch_be8 ‖ signerIndex_be4 ‖ commit)`. The deal is bound
    /// here (the commit hash binds it only through the hidden partial), so a
    /// commitment cannot be replayed onto another deal.
    pub fn signing_message(&self) -> B256 {
        Self::message(&self.deal_id, self.epoch, self.signer_index, &self.commit)
    }

    /// [`Self::signing_message`] of these fields.
    pub fn message(deal_id: &B256, epoch: u64, signer_index: u32, commit: &B256) -> B256 {
        use sha2::{Digest, Sha256};
        let digest = Sha256::new()
            .chain_update(PARTIAL_COMMIT_SIGNATURE_DOMAIN)
            .chain_update(deal_id)
            .chain_update(epoch.to_be_bytes())
            .chain_update(signer_index.to_be_bytes())
            .chain_update(commit)
            .finalize();
        B256::from_slice(&digest)
    }

    /// Whether `p` is the partial this commits to.
    pub fn opens_to(&self, p: &SignedVerdict) -> bool {
        self.deal_id == p.commitment.deal_id
            && self.epoch == p.epoch
            && self.signer_index == p.signer_index
            && self.commit == Self::commit_of(p)
    }
}

impl WireMessage for PartialCommit {
    const NAME: &'static str = "PartialCommit";
    const MAX_LEN: usize = 256;
    type Proto = pb::PartialCommit;

    fn from_proto(p: Self::Proto) -> Result<Self, WireError> {
        Ok(Self {
            deal_id: b256(Self::NAME, "deal_id", &p.deal_id)?,
            epoch: p.epoch,
            signer_index: p.signer_index,
            commit: b256(Self::NAME, "commit", &p.commit)?,
            signature: fixed(Self::NAME, "signature", &p.signature)?,
        })
    }

    fn to_proto(&self) -> Self::Proto {
        pb::PartialCommit {
            deal_id: self.deal_id.to_vec(),
            epoch: self.epoch,
            signer_index: self.signer_index,
            commit: self.commit.to_vec(),
            signature: self.signature.to_vec(),
        }
    }
}

/// A quorum certificate: all members of `epoch` signed except `non_signer_indices`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumCertificate {
    /// What was signed.
    pub commitment: VerdictCommitment,
    /// The committee epoch.
    pub epoch: u64,
    /// Members who did not sign, strictly ascending.
    pub non_signer_indices: Vec<u32>,
    /// Aggregate of the signers' signatures.
    pub aggregate_signature: SignatureBytes,
}

impl WireMessage for QuorumCertificate {
    const NAME: &'static str = "QuorumCertificate";
    const MAX_LEN: usize = MAX_GOSSIP_LEN;
    type Proto = pb::QuorumCertificate;

    fn from_proto(p: Self::Proto) -> Result<Self, WireError> {
        Ok(Self {
            commitment: commitment(Self::NAME, p.commitment)?,
            epoch: p.epoch,
            non_signer_indices: indices(
                Self::NAME,
                "non_signer_indices",
                p.non_signer_indices,
                false,
            )?,
            aggregate_signature: fixed(Self::NAME, "aggregate_signature", &p.aggregate_signature)?,
        })
    }

    fn to_proto(&self) -> Self::Proto {
        pb::QuorumCertificate {
            commitment: Some(commitment_proto(&self.commitment)),
            epoch: self.epoch,
            non_signer_indices: self.non_signer_indices.clone(),
            aggregate_signature: self.aggregate_signature.to_vec(),
        }
    }
}

/// An aggregate signature over one commitment by an explicit, non-empty signer set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignerAggregate {
    /// What was signed.
    pub commitment: VerdictCommitment,
    /// The committee epoch.
    pub epoch: u64,
    /// Signers, strictly ascending, non-empty.
    pub signer_indices: Vec<u32>,
    /// Aggregate of their signatures.
    pub aggregate_signature: SignatureBytes,
}

impl WireMessage for SignerAggregate {
    const NAME: &'static str = "SignerAggregate";
    const MAX_LEN: usize = MAX_GOSSIP_LEN;
    type Proto = pb::SignerAggregate;

    fn from_proto(p: Self::Proto) -> Result<Self, WireError> {
        Self::from_proto_in(Self::NAME, p)
    }

    fn to_proto(&self) -> Self::Proto {
        self.proto()
    }
}

impl SignerAggregate {
    fn from_proto_in(message: &'static str, p: pb::SignerAggregate) -> Result<Self, WireError> {
        Ok(Self {
            commitment: commitment(message, p.commitment)?,
            epoch: p.epoch,
            signer_indices: indices(message, "signer_indices", p.signer_indices, true)?,
            aggregate_signature: fixed(message, "aggregate_signature", &p.aggregate_signature)?,
        })
    }

    fn proto(&self) -> pb::SignerAggregate {
        pb::SignerAggregate {
            commitment: Some(commitment_proto(&self.commitment)),
            epoch: self.epoch,
            signer_indices: self.signer_indices.clone(),
            aggregate_signature: self.aggregate_signature.to_vec(),
        }
    }
}

/// Two aggregates over different commitments for the same deal. Only the shape
/// is checked here; signatures and the signer intersection are the consensus
/// crate's and the registry's to verify.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConflictEvidence {
    /// One aggregate.
    pub first: SignerAggregate,
    /// The other, over a different commitment for the same deal.
    pub second: SignerAggregate,
}

impl WireMessage for ConflictEvidence {
    const NAME: &'static str = "ConflictEvidence";
    const MAX_LEN: usize = MAX_GOSSIP_LEN;
    type Proto = pb::ConflictEvidence;

    fn from_proto(p: Self::Proto) -> Result<Self, WireError> {
        const M: &str = "ConflictEvidence";
        let first = p.first.ok_or(WireError::MissingField { message: M, field: "first" })?;
        let second = p.second.ok_or(WireError::MissingField { message: M, field: "second" })?;
        let first = SignerAggregate::from_proto_in(M, first)?;
        let second = SignerAggregate::from_proto_in(M, second)?;
        if first.commitment.deal_id != second.commitment.deal_id {
            return Err(WireError::NotAConflict { reason: "different deals" });
        }
        if first.commitment == second.commitment {
            return Err(WireError::NotAConflict { reason: "same commitment" });
        }
        Ok(Self { first, second })
    }

    fn to_proto(&self) -> Self::Proto {
        pb::ConflictEvidence { first: Some(self.first.proto()), second: Some(self.second.proto()) }
    }
}

/// Domain prefix of [`MemberRecord::signing_message`].
pub const MEMBER_RECORD_SIGNATURE_DOMAIN: &[u8] = b"resolvd/v1/member-record";
/// Most listen addresses one [`MemberRecord`] carries.
pub const MAX_RECORD_ADDRS: usize = 8;
/// Longest peer id or address in a [`MemberRecord`].
pub const MAX_RECORD_FIELD: usize = 128;

/// Where a committee member can be reached: its libp2p peer id and listen
/// addresses, signed by its registered BLS key (under the consensus crate's
/// member-record DST, never the verdict DST) over [`Self::signing_message`].
/// Aggregation sends partials and aggregates straight to a dispute's
/// collectors and aggregators; this record is how a node finds them, and
/// only the key's holder can point its index at a peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberRecord {
    /// The member's compressed BLS public key.
    pub public_key: [u8; 48],
    /// The signer's counter: a record replaces one of the same key with a
    /// lower `seq` (nodes use unix milliseconds).
    pub seq: u64,
    /// The libp2p peer id (multihash bytes; the p2p layer parses it).
    pub peer_id: Vec<u8>,
    /// Listen multiaddrs (bytes; the p2p layer parses them).
    pub addrs: Vec<Vec<u8>>,
    /// The signature over [`Self::signing_message`] (compressed G2).
    pub signature: SignatureBytes,
}

impl MemberRecord {
    /// What the member signs: `SHA-256("resolvd/v1/member-record" ‖
    /// publicKey ‖ seq_be8 ‖ len_be2(peerId) ‖ peerId ‖ count_be2(addrs) ‖
    /// (len_be2(addr) ‖ addr)…)`.
    pub fn signing_message(&self) -> B256 {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new()
            .chain_update(MEMBER_RECORD_SIGNATURE_DOMAIN)
            .chain_update(self.public_key)
            .chain_update(self.seq.to_be_bytes());
        // Lengths are bounded by validation (and by construction here).
        let len = |n: usize| (n.min(u16::MAX as usize) as u16).to_be_bytes();
        h.update(len(self.peer_id.len()));
        h.update(&self.peer_id);
        h.update(len(self.addrs.len()));
        for a in &self.addrs {
            h.update(len(a.len()));
            h.update(a);
        }
        B256::from_slice(&h.finalize())
    }
}

impl WireMessage for MemberRecord {
    const NAME: &'static str = "MemberRecord";
    const MAX_LEN: usize = 2048;
    type Proto = pb::MemberRecord;

    fn from_proto(p: Self::Proto) -> Result<Self, WireError> {
        let field = |field: &'static str, v: &[u8]| {
            if v.is_empty() || v.len() > MAX_RECORD_FIELD {
                return Err(WireError::OutOfRange {
                    message: Self::NAME,
                    field,
                    reason: "empty or longer than 128 bytes",
                });
            }
            Ok(())
        };
        field("peer_id", &p.peer_id)?;
        if p.addrs.len() > MAX_RECORD_ADDRS {
            return Err(WireError::OutOfRange {
                message: Self::NAME,
                field: "addrs",
                reason: "more than 8 addresses",
            });
        }
        for a in &p.addrs {
            field("addrs", a)?;
        }
        Ok(Self {
            public_key: fixed(Self::NAME, "public_key", &p.public_key)?,
            seq: p.seq,
            peer_id: p.peer_id,
            addrs: p.addrs,
            signature: fixed(Self::NAME, "signature", &p.signature)?,
        })
    }

    fn to_proto(&self) -> Self::Proto {
        pb::MemberRecord {
            public_key: self.public_key.to_vec(),
            seq: self.seq,
            peer_id: self.peer_id.clone(),
            addrs: self.addrs.clone(),
            signature: self.signature.to_vec(),
        }
    }
}

/// A request for content by hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContentRequest {
    /// The content hash.
    pub hash: ContentHash,
    /// The type tag the hash is taken under (one of [`TYPE_TAGS`]).
    pub type_tag: &'static str,
}

impl WireMessage for ContentRequest {
    const NAME: &'static str = "ContentRequest";
    const MAX_LEN: usize = 256;
    type Proto = pb::ContentRequest;

    fn from_proto(p: Self::Proto) -> Result<Self, WireError> {
        let type_tag = TYPE_TAGS.iter().map(|(t, _)| *t).find(|t| *t == p.type_tag).ok_or(
            WireError::OutOfRange {
                message: Self::NAME,
                field: "type_tag",
                reason: "not a known type tag",
            },
        )?;
        Ok(Self { hash: b256(Self::NAME, "hash", &p.hash)?, type_tag })
    }

    fn to_proto(&self) -> Self::Proto {
        pb::ContentRequest { hash: self.hash.to_vec(), type_tag: self.type_tag.to_owned() }
    }
}

/// Why a peer could not serve content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentUnavailable {
    /// The peer does not hold it.
    NotFound,
    /// The content exceeds the response limit.
    TooLarge,
}

/// A response to a [`ContentRequest`]. The bytes are unverified until the
/// requester hashes them (see [`crate::decode_committed`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContentResponse {
    /// The hash requested.
    pub hash: ContentHash,
    /// The content, or why there is none.
    pub result: Result<Bytes, ContentUnavailable>,
}

impl WireMessage for ContentResponse {
    const NAME: &'static str = "ContentResponse";
    const MAX_LEN: usize = MAX_CONTENT_RESPONSE_LEN;
    type Proto = pb::ContentResponse;

    fn from_proto(p: Self::Proto) -> Result<Self, WireError> {
        use pb::content_response::Result as R;
        const M: &str = "ContentResponse";
        let result = match p.result {
            Some(R::Content(bytes)) if bytes.len() <= MAX_DOCUMENT_LEN => Ok(Bytes::from(bytes)),
            Some(R::Content(_)) => {
                return Err(WireError::OutOfRange {
                    message: M,
                    field: "content",
                    reason: "larger than a canonical document may be",
                })
            }
            Some(R::Error(code)) => match pb::ContentError::try_from(code) {
                Ok(pb::ContentError::NotFound) => Err(ContentUnavailable::NotFound),
                Ok(pb::ContentError::TooLarge) => Err(ContentUnavailable::TooLarge),
                _ => {
                    return Err(WireError::OutOfRange {
                        message: M,
                        field: "error",
                        reason: "unknown error code",
                    })
                }
            },
            None => return Err(WireError::MissingField { message: M, field: "result" }),
        };
        Ok(Self { hash: b256(M, "hash", &p.hash)?, result })
    }

    fn to_proto(&self) -> Self::Proto {
        use pb::content_response::Result as R;
        let result = match &self.result {
            Ok(bytes) => R::Content(bytes.to_vec()),
            Err(ContentUnavailable::NotFound) => R::Error(pb::ContentError::NotFound as i32),
            Err(ContentUnavailable::TooLarge) => R::Error(pb::ContentError::TooLarge as i32),
        };
        pb::ContentResponse { hash: self.hash.to_vec(), result: Some(result) }
    }
}

/// Gossip topics. Their names ([`Topic::name`]) are part of the protocol:
/// peers only exchange messages on topics both subscribe to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Topic {
    /// `DisputeAnnouncement`s.
    Disputes,
    /// Partial signatures (`SignedVerdict`).
    Verdicts,
    /// Commitments to partials (`PartialCommit`), when commit-reveal is on.
    Commits,
    /// `QuorumCertificate`s.
    Certificates,
    /// `ConflictEvidence`.
    Evidence,
    /// `SignerAggregate`s of verified partials, sent to a dispute's
    /// aggregators by the collectors of a slice of the committee.
    Aggregates,
    /// `MemberRecord`s: where committee members can be reached.
    Members,
}

impl Topic {
    /// Every topic.
    pub const ALL: [Self; 7] = [
        Self::Disputes,
        Self::Verdicts,
        Self::Commits,
        Self::Certificates,
        Self::Evidence,
        Self::Aggregates,
        Self::Members,
    ];

    /// The gossipsub topic name.
    pub const fn name(self) -> &'static str {
        match self {
            // v2: announcements name their block hash (field 14); a v1
            // node would reject them as non-canonical and penalise the sender.
            Self::Disputes => "resolvd/v2/disputes",
            Self::Verdicts => "resolvd/v1/verdicts",
            Self::Commits => "resolvd/v1/commits",
            Self::Certificates => "resolvd/v1/certificates",
            Self::Evidence => "resolvd/v1/evidence",
            Self::Aggregates => "resolvd/v1/aggregates",
            Self::Members => "resolvd/v1/members",
        }
    }

    /// A short name for metrics labels.
    pub const fn label(self) -> &'static str {
        match self {
            Self::Disputes => "disputes",
            Self::Verdicts => "verdicts",
            Self::Commits => "commits",
            Self::Certificates => "certificates",
            Self::Evidence => "evidence",
            Self::Aggregates => "aggregates",
            Self::Members => "members",
        }
    }
}

/// A gossip message decoded into its topic's validated wire type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gossip {
    /// On `Disputes`.
    Dispute(DisputeAnnouncement),
    /// On `Verdicts`.
    Verdict(SignedVerdict),
    /// On `Commits`.
    Commit(PartialCommit),
    /// On `Certificates`.
    Certificate(Box<QuorumCertificate>),
    /// On `Evidence`.
    Evidence(Box<ConflictEvidence>),
    /// On `Aggregates`.
    Aggregate(Box<SignerAggregate>),
    /// On `Members`.
    Member(Box<MemberRecord>),
}

impl Gossip {
    /// Decodes `data` as the message type of `topic` (size-checked first);
    /// only the canonical encoding is accepted ([`WireMessage::decode_canonical`]).
    pub fn decode(topic: Topic, data: &[u8]) -> Result<Self, WireError> {
        Ok(match topic {
            Topic::Disputes => Self::Dispute(DisputeAnnouncement::decode_canonical(data)?),
            Topic::Verdicts => Self::Verdict(SignedVerdict::decode_canonical(data)?),
            Topic::Commits => Self::Commit(PartialCommit::decode_canonical(data)?),
            Topic::Certificates => {
                Self::Certificate(Box::new(QuorumCertificate::decode_canonical(data)?))
            }
            Topic::Evidence => Self::Evidence(Box::new(ConflictEvidence::decode_canonical(data)?)),
            Topic::Aggregates => {
                Self::Aggregate(Box::new(SignerAggregate::decode_canonical(data)?))
            }
            Topic::Members => Self::Member(Box::new(MemberRecord::decode_canonical(data)?)),
        })
    }

    /// The topic and bytes to publish.
    pub fn encode(&self) -> (Topic, Vec<u8>) {
        match self {
            Self::Dispute(m) => (Topic::Disputes, m.encode_wire()),
            Self::Verdict(m) => (Topic::Verdicts, m.encode_wire()),
            Self::Commit(m) => (Topic::Commits, m.encode_wire()),
            Self::Certificate(m) => (Topic::Certificates, m.encode_wire()),
            Self::Evidence(m) => (Topic::Evidence, m.encode_wire()),
            Self::Aggregate(m) => (Topic::Aggregates, m.encode_wire()),
            Self::Member(m) => (Topic::Members, m.encode_wire()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> MemberRecord {
        MemberRecord {
            public_key: [7; 48],
            seq: 1_700_000_000_000,
            peer_id: vec![0, 36, 8, 1, 18, 32],
            addrs: vec![vec![4, 127, 0, 0, 1, 6, 0x24, 0xb8]],
            signature: [9; 96],
        }
    }

    /// A member record round-trips through gossip; every field is signed,
    /// and the field lengths are framed (moving a byte from the peer id to
    /// an address changes the message).
    #[test]
    fn member_records_round_trip_and_sign_every_field() {
        let r = record();
        let (topic, bytes) = Gossip::Member(Box::new(r.clone())).encode();
        assert_eq!(topic, Topic::Members);
        assert_eq!(Gossip::decode(topic, &bytes).unwrap(), Gossip::Member(Box::new(r.clone())));
        let m = r.signing_message();
        let mut changed = Vec::new();
        let mut c = r.clone();
        c.public_key[0] ^= 1;
        changed.push(c);
        let mut c = r.clone();
        c.seq += 1;
        changed.push(c);
        let mut c = r.clone();
        c.peer_id.push(0);
        changed.push(c);
        let mut c = r.clone();
        let moved = c.peer_id.pop().unwrap();
        c.addrs[0].insert(0, moved);
        changed.push(c);
        let mut c = r.clone();
        c.addrs.push(vec![1]);
        changed.push(c);
        for c in changed {
            assert_ne!(c.signing_message(), m, "{c:?}");
        }
        // (The signature is what is signed over, not part of it.)
        let mut c = r;
        c.signature[0] ^= 1;
        assert_eq!(c.signing_message(), m);
    }

    /// Oversized or empty fields and too many addresses are rejected.
    #[test]
    fn member_records_are_bounded() {
        let bad = |f: fn(&mut MemberRecord)| {
            let mut r = record();
            f(&mut r);
            MemberRecord::decode_wire(&r.encode_wire()).unwrap_err()
        };
        assert!(matches!(
            bad(|r| r.peer_id.clear()),
            WireError::OutOfRange { field: "peer_id", .. }
        ));
        assert!(matches!(
            bad(|r| r.peer_id = vec![1; MAX_RECORD_FIELD + 1]),
            WireError::OutOfRange { field: "peer_id", .. }
        ));
        assert!(matches!(
            bad(|r| r.addrs = vec![vec![1]; MAX_RECORD_ADDRS + 1]),
            WireError::OutOfRange { field: "addrs", .. }
        ));
        assert!(matches!(
            bad(|r| r.addrs = vec![vec![1; MAX_RECORD_FIELD + 1]]),
            WireError::OutOfRange { field: "addrs", .. }
        ));
        let mut p = record().to_proto();
        p.public_key.pop();
        assert!(matches!(
            MemberRecord::from_proto(p),
            Err(WireError::InvalidLength { field: "public_key", .. })
        ));
        let mut r = record();
        r.addrs = vec![vec![1; MAX_RECORD_FIELD]; MAX_RECORD_ADDRS];
        r.peer_id = vec![1; MAX_RECORD_FIELD];
        assert!(r.encode_wire().len() <= MemberRecord::MAX_LEN);
        assert_eq!(MemberRecord::decode_wire(&r.encode_wire()).unwrap(), r);
    }

    /// Topic names are the protocol's: a node on other names hears no one.
    #[test]
    fn topic_names_and_labels() {
        assert_eq!(
            Topic::ALL.map(Topic::name),
            [
                "resolvd/v2/disputes",
                "resolvd/v1/verdicts",
                "resolvd/v1/commits",
                "resolvd/v1/certificates",
                "resolvd/v1/evidence",
                "resolvd/v1/aggregates",
                "resolvd/v1/members",
            ]
        );
        assert_eq!(
            Topic::ALL.map(Topic::label),
            [
                "disputes",
                "verdicts",
                "commits",
                "certificates",
                "evidence",
                "aggregates",
                "members"
            ]
        );
    }
}
