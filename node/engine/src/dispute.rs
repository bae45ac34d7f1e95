//! One dispute: its state ([`Dispute`]), what it persists
//! ([`DisputeStatus`]) and its API view ([`DisputeView`], [`CommitReveal`]).

use super::*;
use alloy_primitives::{Bytes, B256};
use resolvd_consensus::QuorumCertificate;
use resolvd_proto::{
    wire::{DisputeAnnouncement, PartialCommit, SignedVerdict},
    ReexecVerdict, VerdictCommitment,
};
use serde::Serialize;
use std::{
    collections::{BTreeMap, HashMap, HashSet},
    time::{Duration, Instant},
};

/// What the engine persists about one dispute (the store keeps it with the
/// announcement and hands it back at start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum DisputeStatus {
    /// Confirmed on chain, not settled.
    Active = 0,
    /// Settled on chain (or found settled at start).
    Settled = 1,
    /// Past its resolve deadline without settlement seen.
    Expired = 2,
}

/// Where a dispute is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Waiting for content (or retrying after an operational error).
    Fetching,
    /// Replay queued or running.
    Replaying,
    /// This node signed; waiting for a certificate.
    Signed,
    /// Replayed, but this node is not a member of the dispute's epoch.
    Observing,
    /// Slashing protection refused a different commitment (never signed).
    Refused,
    /// The anchor is not a canonical block of its chain (or cannot be checked
    /// here): an operational error that is never signed; the deal times out.
    AnchorRejected,
    /// A certificate is held; submission pending.
    Certified,
    /// Settled on chain.
    Settled,
    /// Past the resolve deadline unsettled.
    Expired,
}

impl Phase {
    /// Settled or expired: nothing more to do.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Settled | Self::Expired)
    }
}

/// The API view of one dispute.
#[derive(Clone, Debug, Serialize)]
pub struct DisputeView {
    /// Deal id.
    pub deal_id: B256,
    /// Phase.
    pub phase: Phase,
    /// Pinned committee epoch.
    pub epoch: u64,
    /// Unix deadline for `resolve`.
    pub resolve_deadline: u64,
    /// The commitment this node's replay produced.
    pub commitment: Option<VerdictCommitment>,
    /// Its EIP-712 digest.
    pub digest: Option<B256>,
    /// This node's partial signature (compressed G2, hex).
    pub own_signature: Option<Bytes>,
    /// Verified signers per digest.
    pub signers: BTreeMap<B256, Vec<u32>>,
    /// Non-signers of the certificate held, if any.
    pub certificate_non_signers: Option<Vec<u32>>,
    /// The certified outcome.
    pub certified_outcome: Option<ReexecVerdict>,
    /// This node's successful `resolve` transaction.
    pub resolve_tx: Option<B256>,
    /// Gas used by it.
    pub resolve_gas: Option<u64>,
    /// The `resolve` transaction that settled it (whoever sent it).
    pub settled_by: Option<B256>,
    /// Milliseconds from first seeing the dispute to holding a certificate.
    pub certificate_ms: Option<u64>,
    /// Milliseconds from first seeing the dispute to seeing it settled.
    pub settlement_ms: Option<u64>,
    /// The last operational error.
    pub last_error: Option<String>,
    /// What this node's RPC says of the deal's anchor block.
    pub anchor: Option<AnchorStatus>,
    /// Commit-reveal state (when the network has it on).
    pub commit_reveal: Option<CommitReveal>,
}

/// Commit-reveal of partials for one dispute, as this node saw it.
///
/// A signer first gossips a [`PartialCommit`] (signed by its registered key;
/// verified before it counts or is forwarded), and its partial only when the
/// commit phase closes: verified commitments from at least the threshold
/// stake were seen, or `window_ms` passed since its own commitment, or a
/// verified reveal arrived. The reveal phase begins when the first reveal
/// that verifies *arrived* (its own included; not when its verification
/// batch ran): a commitment that arrived later is late. A revealed partial
/// counts towards this node's certificate only if its commitment arrived no
/// later than that, so a node that copies a revealed partial instead of
/// replaying is not in honest nodes' certificates and is not paid.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CommitReveal {
    /// The commit phase timeout after the node's own commitment.
    pub window_ms: u64,
    /// Verified commitments that arrived before the reveal phase, by signer.
    pub committed: BTreeMap<u32, Vec<B256>>,
    /// Signers whose verified commitment arrived in the reveal phase.
    pub late: Vec<u32>,
    /// Whether this node has gossiped its partial (the reveal).
    pub revealed: bool,
    /// Milliseconds from first seeing the dispute to the reveal phase.
    pub reveal_phase_ms: Option<u64>,
    /// Verified reveals that do not count (no timely commitment).
    pub uncounted: Vec<u32>,
    /// Whether the fallback ran (no certificate in time): it counts the
    /// reveals that arrived no later than the reveal phase began.
    pub fallback: bool,
    /// Whether the late fallback ran (still no certificate): it counts
    /// every verified reveal.
    pub late_fallback: bool,
}

/// Whether `c` commits to the deal fields `a` pins on chain (everything but
/// the outcome, result and trace, which the replay decides).
pub fn matches_deal(c: &VerdictCommitment, a: &DisputeAnnouncement) -> bool {
    c.deal_id == a.deal_id
        && c.spec_hash == a.spec_hash
        && c.delivery_hash == a.delivery_hash
        && c.prestate_anchor_hash == a.prestate_anchor_hash
        && c.prestate_root == a.prestate_root
        && c.backend_id == a.backend_id
        && c.backend_version_hash == a.backend_version_hash
}

/// Whether two announcements describe the same dispute.
pub(crate) fn same_dispute(a: &DisputeAnnouncement, b: &DisputeAnnouncement) -> bool {
    a.deal_id == b.deal_id
        && a.spec_hash == b.spec_hash
        && a.delivery_hash == b.delivery_hash
        && a.prestate_anchor_hash == b.prestate_anchor_hash
        && a.prestate_root == b.prestate_root
        && a.backend_id == b.backend_id
        && a.backend_version_hash == b.backend_version_hash
        && a.epoch == b.epoch
        && a.resolve_deadline == b.resolve_deadline
}

pub(crate) struct Dispute {
    pub(crate) info: DisputeAnnouncement,
    /// Where the dispute is.
    pub(crate) phase: Phase,
    /// The EIP-712 digest of this node's replayed commitment.
    pub(crate) digest: Option<B256>,
    /// What the API shows besides the state ([`Dispute::view`] adds the
    /// phase, the digest and the commit-reveal flags from the state; the
    /// record's own copies of those are not kept).
    pub(crate) record: DisputeView,
    pub(crate) seen: Instant,
    pub(crate) next_attempt: Instant,
    pub(crate) backoff: Duration,
    pub(crate) gathering: bool,
    pub(crate) own: Option<SignedVerdict>,
    /// Second signatures: only fault injection's equivocator makes them.
    #[cfg(feature = "fault-injection")]
    pub(crate) extra: Vec<SignedVerdict>,
    pub(crate) last_publish: Instant,
    pub(crate) finished_at: Option<Instant>,
    /// The certificate held and its submission.
    pub(crate) submission: Submission,
    /// Commit-reveal (off unless `reveal.reveal_window` is set).
    pub(crate) reveal: Reveal,
    /// Which aggregators the own partial went to ([`Dissemination::Aggregators`]).
    pub(crate) aggregators: aggregators::Escalation,
}

/// A dispute's certificate and its submission.
#[derive(Default)]
pub(crate) struct Submission {
    pub(crate) certificate: Option<QuorumCertificate>,
    /// Certificates the escrow rejected (by hash of their wire bytes).
    pub(crate) rejected: HashSet<B256>,
    pub(crate) submit_at: Option<Instant>,
    pub(crate) submit_backoff: Duration,
    pub(crate) submitting: bool,
    /// Whether this node gossiped its certificate (see [`CERTIFICATE_GOSSIPERS`]).
    pub(crate) certificate_gossiped: bool,
    /// Whether its certificate came verified from a peer (the network has one).
    pub(crate) certificate_from_peer: bool,
    /// When this aggregator gossips the certificate it built, unless one
    /// from a peer verifies first (see [`CERTIFICATE_STAGGER`]).
    pub(crate) gossip_at: Option<Instant>,
}

/// A dispute's commit-reveal state.
#[derive(Default)]
pub(crate) struct Reveal {
    /// The commit window (None: off for this dispute).
    pub(crate) reveal_window: Option<Duration>,
    /// Whether `reveal_window` is the value pinned by the dispute's epoch
    /// (known once that epoch's committee is loaded; off until then).
    pub(crate) known: bool,
    /// When this node gossiped its own commitment.
    pub(crate) own_commit_at: Option<Instant>,
    /// Its own (signed) commitment, re-gossiped until it reveals.
    pub(crate) own_commit: Option<PartialCommit>,
    /// When the first reveal that verified arrived (the reveal phase).
    pub(crate) reveal_phase_at: Option<Instant>,
    /// Per digest, when its first reveal that verified arrived: a signer
    /// cannot have copied a digest before it was revealed, so a commitment
    /// that arrived no later counts for it.
    pub(crate) first_reveal: HashMap<B256, Instant>,
    /// Verified commitments (one per signer: an honest signer makes one per
    /// deal) and when they arrived.
    pub(crate) commits: BTreeMap<u32, (B256, Instant)>,
    /// Verified reveals not counted, their digest, and when they arrived
    /// (for the fallbacks).
    pub(crate) uncounted: Vec<(SignedVerdict, B256, Instant)>,
    /// (digest, signer) of reveals verified (counted or not): a re-gossiped
    /// copy is not verified again.
    pub(crate) reveals_verified: HashSet<(B256, u32)>,
    /// Whether this node gossiped its partial (the reveal).
    pub(crate) revealed: bool,
    /// Whether the fallback ran.
    pub(crate) fallback: bool,
    /// Whether the late fallback ran.
    pub(crate) late_fallback: bool,
}

impl Dispute {
    /// The second signatures fault injection's equivocator made (none
    /// without the `fault-injection` feature).
    pub(crate) fn extra(&self) -> &[SignedVerdict] {
        #[cfg(feature = "fault-injection")]
        {
            &self.extra
        }
        #[cfg(not(feature = "fault-injection"))]
        {
            &[]
        }
    }

    pub(crate) fn new(info: DisputeAnnouncement, now: Instant) -> Self {
        Self {
            phase: Phase::Fetching,
            digest: None,
            record: DisputeView {
                deal_id: info.deal_id,
                phase: Phase::Fetching,
                epoch: info.epoch,
                resolve_deadline: info.resolve_deadline,
                commitment: None,
                digest: None,
                own_signature: None,
                signers: BTreeMap::new(),
                certificate_non_signers: None,
                certified_outcome: None,
                resolve_tx: None,
                resolve_gas: None,
                settled_by: None,
                certificate_ms: None,
                settlement_ms: None,
                last_error: None,
                anchor: None,
                commit_reveal: None,
            },
            info,
            seen: now,
            next_attempt: now,
            backoff: FIRST_BACKOFF,
            gathering: false,
            own: None,
            #[cfg(feature = "fault-injection")]
            extra: Vec::new(),
            last_publish: now,
            finished_at: None,
            submission: Submission::default(),
            reveal: Reveal::default(),
            aggregators: Default::default(),
        }
    }

    /// The API view: the record with the phase, the digest and the
    /// commit-reveal flags of the state.
    pub(crate) fn view(&self) -> DisputeView {
        let mut view = self.record.clone();
        view.phase = self.phase;
        view.digest = self.digest;
        if let Some(cr) = view.commit_reveal.as_mut() {
            cr.revealed = self.reveal.revealed;
            cr.fallback = self.reveal.fallback;
            cr.late_fallback = self.reveal.late_fallback;
        }
        view
    }

    /// Pins the commit-reveal window of the dispute's epoch.
    pub(crate) fn set_reveal(&mut self, window: Option<Duration>) {
        self.reveal.known = true;
        self.reveal.reveal_window = window;
        self.record.commit_reveal =
            window.map(|w| CommitReveal { window_ms: w.as_millis() as u64, ..Default::default() });
    }

    pub(crate) fn operational(&mut self, reason: String, now: Instant) {
        self.phase = Phase::Fetching;
        self.record.last_error = Some(reason);
        self.next_attempt = now + self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    pub(crate) fn finish(&mut self, phase: Phase, now: Instant) {
        self.phase = phase;
        self.submission.submit_at = None;
        self.finished_at = Some(now);
    }

    /// Whether `signer`'s verified commitment is `commit` and arrived no
    /// later than the first reveal of `digest` (the partial it opens to): a
    /// reveal of another digest (a wrong outcome revealed at once) does not
    /// make it late.
    pub(crate) fn timely(&self, signer: u32, commit: &B256, digest: &B256) -> bool {
        let revealed = self.reveal.first_reveal.get(digest);
        self.reveal
            .commits
            .get(&signer)
            .is_some_and(|(c, at)| c == commit && revealed.is_none_or(|first| at <= first))
    }

    /// Enters the reveal phase at `at` (the arrival of a reveal that
    /// verified), or moves its start earlier; the view's committed / late
    /// lists follow the arrival times.
    pub(crate) fn enter_reveal_phase(&mut self, at: Instant) -> bool {
        if self.reveal.reveal_phase_at.is_some_and(|t| t <= at) {
            return false;
        }
        self.reveal.reveal_phase_at = Some(at);
        let seen = self.seen;
        let commits: Vec<(u32, B256, bool)> =
            self.reveal.commits.iter().map(|(i, (c, t))| (*i, *c, *t <= at)).collect();
        if let Some(cr) = self.record.commit_reveal.as_mut() {
            cr.reveal_phase_ms = Some(at.saturating_duration_since(seen).as_millis() as u64);
            cr.committed.clear();
            cr.late.clear();
            for (i, c, timely) in commits {
                if timely {
                    cr.committed.entry(i).or_default().push(c);
                } else {
                    cr.late.push(i);
                }
            }
        }
        true
    }

    /// Records a verified commitment (the first of its signer) that arrived at `at`.
    pub(crate) fn record_commit(&mut self, signer: u32, commit: B256, at: Instant) -> bool {
        if self.reveal.commits.contains_key(&signer) {
            return false;
        }
        self.reveal.commits.insert(signer, (commit, at));
        let timely = self.reveal.reveal_phase_at.is_none_or(|phase| at <= phase);
        if let Some(cr) = self.record.commit_reveal.as_mut() {
            if timely {
                cr.committed.entry(signer).or_default().push(commit);
            } else {
                cr.late.push(signer);
                cr.late.sort_unstable();
            }
        }
        true
    }
}
