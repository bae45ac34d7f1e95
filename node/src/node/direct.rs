//! Aggregation's direct messages.
//!
//! - **Where members are.** Each member signs a [`MemberRecord`] (its peer id
//!   and listen addresses, under the member-record DST, never the verdict
//!   one) and gossips it when it first finds its key in a committee, again
//!   after [`RECORD_FIRST`], twice that, and so on up to every
//!   [`RECORD_EVERY`] (the first copies may go out before a mesh carries
//!   them), and whenever the newest epoch changes. It also sends it
//!   straight to every peer that connects. A re-gossip sends the record
//!   signed last, unchanged, when its addresses and epoch are the same and
//!   its last copy has left the seen caches (gossipsub drops a copy of the
//!   same bytes as a duplicate for `seen_ttl`; 1.5 × that as a margin);
//!   otherwise (addresses, epoch, a twin, or sooner than that) it signs one
//!   with a higher `seq`, and so it does when gossipsub still refuses the
//!   copy (it forgets expired ids only when another message comes in). A record is taken only from a key of a loaded
//!   committee, with a valid signature and a `seq` above the one held, at
//!   most once per [`RECORD_MIN_GAP`] per key: one verification per member
//!   and period, whatever a peer sends. A copy of the record held (the same
//!   bytes) is never verified again: a gossiped one is forwarded at most once
//!   per [`RECORD_COPY_GAP`] per key (so a re-gossip still reaches the
//!   members that lack the record, and a peer replaying records makes each
//!   node forward each of them at most that often, twice the steady
//!   re-gossip rate) and ignored otherwise.
//! - **Doppelgängers.** A record of this node's own key naming another peer,
//!   sent by that peer itself, means the key runs in another process: with
//!   doppelgänger detection on, the node stops as it does for a partial of
//!   its key that it did not make (see [`Node::on_own_key_elsewhere`]).
//! - **Sending.** The engine's `Action::Send` goes to each member's peer over
//!   [`DIRECT_PROTOCOL`]: one long-lived stream per peer, written by a
//!   task of its own from a queue of [`QUEUE`] frames (dialling the member's
//!   recorded addresses first when it is not connected). A frame costs one
//!   write, not a stream's opening, negotiation, answer and closing. A member
//!   without a record, a full queue, and a stream that fails to open, to
//!   take a frame or to show the receiver's ready byte within
//!   [`DIRECT_TIMEOUT`] fall back to gossip (the frames not known to have
//!   reached a reader, and the rest of the queue), which reaches the member
//!   among everyone; the next send opens a new stream, and so does one after
//!   the receiver closed the stream. Frames are not answered: one written
//!   on a ready stream just before its connection drops is lost, as a lost
//!   packet is, and the engine's escalation and republishing route around
//!   it.
//! - **Receiving.** One task accepts the streams, at most
//!   [`DIRECT_STREAMS_PER_PEER`] per peer (each answered with the ready
//!   byte, [`DIRECT_READY`]), and reads their frames into
//!   a queue of [`INBOX`] frames (a full queue stops the reading, and so the
//!   sender, not the memory). A direct message is decoded as gossip on its
//!   topic and judged by the engine, but never forwarded. A rejected one
//!   (malformed, bad signature, not a member) raises its sender's penalty,
//!   and a malformed frame also ends its stream; the penalty is the sender's
//!   gossipsub application score (`-100 × penalty²`, decaying 1 %/s like a
//!   topic's invalid deliveries), so one rejection graylists a peer for about
//!   11 s on gossip and direct messages alike.

use super::{Internal, Node};
use crate::{
    config::DisseminationMode,
    dispute::Origin,
    metrics::ResultLabel,
    p2p::{
        read_direct, write_direct, Direct, Gossip, Topic, DIRECT_PROTOCOL, DIRECT_READY,
        DIRECT_STREAMS_PER_PEER, DIRECT_TIMEOUT, MAX_DIRECT_MESSAGES,
    },
};
use futures::{
    future::BoxFuture,
    io::{ReadHalf, WriteHalf},
    stream::FuturesUnordered,
    AsyncReadExt, AsyncWriteExt, FutureExt, StreamExt,
};
use libp2p::{
    gossipsub::MessageAcceptance,
    multiaddr::Protocol,
    swarm::dial_opts::{DialOpts, PeerCondition},
    Multiaddr, PeerId, Stream,
};
use libp2p_stream::{Control, IncomingStreams};
use resolvd_consensus::{PublicKey, Signature};
use resolvd_proto::wire::{MemberRecord, MAX_RECORD_ADDRS};
use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

/// A member re-signs and gossips its record this long after the first
/// time, then after doubling waits …
const RECORD_FIRST: Duration = Duration::from_secs(3);
/// … up to this one.
const RECORD_EVERY: Duration = Duration::from_secs(600);
/// A key's record is replaced at most this often (each replacement costs a
/// pairing).
const RECORD_MIN_GAP: Duration = Duration::from_secs(2);
/// A copy of a held record (the same bytes) is forwarded at most this often
/// per key: about the re-gossip period, with slack for the links' jitter.
const RECORD_COPY_GAP: Duration = Duration::from_secs(300);
/// After a remote signer failed to sign the record, it is asked again this
/// much later.
const RECORD_RETRY: Duration = Duration::from_secs(30);
/// gossipsub's default graylist threshold: direct messages from a peer
/// scored below it are dropped unread, as its gossip is.
const GRAYLIST: f64 = -80.0;
/// The application score of one unit of penalty (that of one invalid
/// message delivery on a topic).
const PENALTY_WEIGHT: f64 = -100.0;
/// Penalties decay by this factor per second.
const PENALTY_DECAY: f64 = 0.99;
/// Other holders of this node's key dialled, at most.
const MAX_TWIN_DIALS: usize = 16;
/// Frames queued for one peer's stream, at most; more go out on gossip.
pub(super) const QUEUE: usize = 32;
/// Frames read from every peer's streams and not yet judged, at most.
pub(super) const INBOX: usize = 64;

/// What the stream tasks tell the node.
#[derive(Debug)]
pub(super) enum DirectIn {
    /// A frame read from `peer`.
    Frame { peer: PeerId, direct: Direct },
    /// `peer` sent a malformed frame (its stream is closed).
    Malformed { peer: PeerId, error: std::io::Error },
}

/// The queue of one peer's outbound stream (see [`send_stream`]).
#[derive(Debug)]
struct Outbox {
    tx: mpsc::Sender<Vec<Gossip>>,
    /// Which stream task this is (a failure report names it).
    id: u64,
}

/// This node's record, when it was published, the newest epoch then and
/// the wait before the next one.
#[derive(Debug)]
struct Own {
    record: MemberRecord,
    at: Instant,
    epoch: u64,
    next: Duration,
}

/// A member's verified record.
#[derive(Debug)]
struct Known {
    peer: PeerId,
    addrs: Vec<Multiaddr>,
    /// The record as verified (a copy of it is never verified again).
    record: MemberRecord,
    at: Instant,
    /// When a gossiped copy of it was last forwarded.
    copied: Option<Instant>,
}

/// Member records, direct sends in flight and direct-message penalties.
#[derive(Debug, Default)]
pub(super) struct Directory {
    /// Verified records by compressed member key.
    records: HashMap<[u8; 48], Known>,
    /// This node's record as last published.
    own: Option<Own>,
    /// The outbound stream of each peer sent to, while it lives.
    outboxes: HashMap<PeerId, Outbox>,
    /// The id of the next outbound stream task.
    next_outbox: u64,
    /// Rejected direct messages per peer (decaying).
    penalties: HashMap<PeerId, f64>,
    /// A peer that sent a record of this node's key itself.
    twin: Option<PeerId>,
    /// Peers named by records of this node's key, dialled once each.
    dialed: HashSet<PeerId>,
    /// Publish this node's record at the next tick.
    republish: bool,
    /// When this node's record was sent to the remote signer (its answer
    /// is awaited, for [`RECORD_RETRY`] at most).
    signing_record: Option<Instant>,
    /// After the remote signer failed to sign the record: not asked before.
    record_retry_at: Option<Instant>,
    decayed_at: Option<Instant>,
    /// Gossipsub's seen-cache lifetime: a copy of the same record published
    /// sooner than this after the last one would be dropped as a duplicate.
    seen_ttl: Duration,
}

impl Directory {
    /// An empty directory for a swarm whose seen cache lasts `seen_ttl`.
    pub(super) fn new(seen_ttl: Duration) -> Self {
        Self { seen_ttl, ..Self::default() }
    }
}

impl Node {
    fn count_direct(&self, result: &'static str) {
        self.count_direct_n(result, 1);
    }

    fn count_direct_n(&self, result: &'static str, messages: usize) {
        self.shared.metrics.direct.get_or_create(&ResultLabel { result }).inc_by(messages as u64);
    }

    /// Performs `Action::Send`: `messages`, in frames of at most
    /// [`MAX_DIRECT_MESSAGES`], to each member's peer directly; gossip for the
    /// rest (once).
    pub(super) fn send_direct(&mut self, epoch: u64, to: &[u32], messages: Vec<Gossip>) {
        let local = *self.swarm.local_peer_id();
        let mut targets = Vec::with_capacity(to.len());
        let mut fallback = false;
        if let Some(committee) = self.engine.committee(epoch) {
            for &index in to {
                let known = committee
                    .member(index)
                    .ok()
                    .and_then(|m| self.peers.directory.records.get(&m.key.compress()));
                match known {
                    Some(k) if k.peer != local => targets.push((k.peer, k.addrs.clone())),
                    Some(_) => {}
                    None => fallback = true,
                }
            }
        } else {
            fallback = true;
        }
        let mut unsent = Vec::new();
        for chunk in messages.chunks(MAX_DIRECT_MESSAGES) {
            let mut full = false;
            for (peer, addrs) in &targets {
                if self.queue_direct(*peer, addrs, chunk.to_vec()) {
                    self.count_direct_n("sent", chunk.len());
                } else {
                    full = true;
                }
            }
            // Gossiped once, however many peers' queues were full.
            if full && !fallback {
                unsent.extend_from_slice(chunk);
            }
        }
        if fallback {
            unsent = messages;
        }
        if !unsent.is_empty() {
            self.count_direct_n("fallback", unsent.len());
            for gossip in unsent {
                self.publish(gossip);
            }
        }
    }

    /// Queues one frame for `peer`'s stream, starting the stream (and
    /// dialling `addrs` when not connected) if it has none. False when its
    /// queue is full.
    fn queue_direct(&mut self, peer: PeerId, addrs: &[Multiaddr], messages: Vec<Gossip>) -> bool {
        let messages = match self.peers.directory.outboxes.get(&peer) {
            Some(outbox) => match outbox.tx.try_send(messages) {
                Ok(()) => return true,
                Err(mpsc::error::TrySendError::Full(_)) => return false,
                // Its task ended (its failure report is on the way): a new one.
                Err(mpsc::error::TrySendError::Closed(messages)) => messages,
            },
            None => messages,
        };
        if !self.swarm.is_connected(&peer) {
            let dial = DialOpts::peer_id(peer)
                .addresses(addrs.to_vec())
                .condition(PeerCondition::DisconnectedAndNotDialing)
                .build();
            if let Err(e) = self.swarm.dial(dial) {
                // Opening the stream fails too, and its frames go by gossip.
                debug!(target: "p2p", %peer, error = %e, "cannot dial a member");
            }
        }
        let (tx, rx) = mpsc::channel(QUEUE);
        let directory = &mut self.peers.directory;
        let id = directory.next_outbox;
        directory.next_outbox += 1;
        let _ = tx.try_send(messages);
        directory.outboxes.insert(peer, Outbox { tx, id });
        let control = self.swarm.behaviour().direct.new_control();
        tokio::spawn(send_stream(control, peer, id, rx, self.inbox.tx.clone()));
        true
    }

    /// A peer's outbound stream failed: its unsent frames go by gossip.
    pub(super) fn on_direct_failed(&mut self, peer: PeerId, id: u64, messages: Vec<Gossip>) {
        let outboxes = &mut self.peers.directory.outboxes;
        if outboxes.get(&peer).is_some_and(|o| o.id == id) {
            outboxes.remove(&peer);
        }
        self.count_direct_n("failed", messages.len());
        for gossip in messages {
            self.publish(gossip);
        }
    }

    /// A peer is no longer connected: its outbound stream ends with the
    /// connection, and the next send opens one on a new connection.
    pub(super) fn on_direct_disconnected(&mut self, peer: &PeerId) {
        self.peers.directory.outboxes.remove(peer);
    }

    /// What the stream tasks read.
    pub(super) fn on_direct_in(&mut self, event: DirectIn, now: Instant) {
        match event {
            DirectIn::Frame { peer, direct } => self.on_direct_message(peer, &direct, now),
            // A frame the reader refused (unknown topic, truncated, too
            // long, too many messages): as a malformed message.
            DirectIn::Malformed { peer, error } => {
                warn!(target: "p2p", %peer, %error, "rejecting a malformed direct frame");
                self.penalize(peer);
            }
        }
    }

    fn on_direct_message(&mut self, peer: PeerId, message: &Direct, now: Instant) {
        if self.swarm.behaviour().gossipsub.peer_score(&peer).is_some_and(|s| s < GRAYLIST) {
            self.count_direct("graylisted");
            debug!(target: "p2p", %peer, "direct message from a graylisted peer: dropped");
            return;
        }
        self.count_direct_n("received", message.messages.len());
        // All or nothing: one malformed message rejects the request.
        let messages = match message.decode().collect::<Result<Vec<_>, _>>() {
            Ok(messages) => messages,
            Err(e) => {
                warn!(target: "p2p", %peer, error = %e, "rejecting a malformed direct message");
                return self.penalize(peer);
            }
        };
        // In order, at one instant: a commitment counts as arrived no later
        // than the reveal sent with it.
        for gossip in messages {
            match gossip {
                Gossip::Member(record) => {
                    let verdict = self.on_record(&record, Some(peer), now);
                    self.report(&Origin { id: None, peer }, Topic::Members, verdict);
                }
                gossip => self.engine.on_gossip(Origin { id: None, peer }, gossip, now),
            }
        }
    }

    /// Raises `peer`'s penalty for a rejected direct message.
    pub(super) fn penalize(&mut self, peer: PeerId) {
        self.count_direct("rejected");
        let p = self.peers.directory.penalties.entry(peer).or_default();
        *p += 1.0;
        let score = PENALTY_WEIGHT * *p * *p;
        self.swarm.behaviour_mut().gossipsub.set_application_score(&peer, score);
    }

    /// A member record from gossip or a peer: its validation verdict.
    /// `from`: the peer that sent it directly (`None`: gossip).
    pub(super) fn on_record(
        &mut self,
        r: &MemberRecord,
        from: Option<PeerId>,
        now: Instant,
    ) -> MessageAcceptance {
        let Ok(key) = PublicKey::from_compressed(&r.public_key) else {
            return MessageAcceptance::Reject;
        };
        if !self.engine.is_member(&key) {
            return MessageAcceptance::Ignore;
        }
        if self.sign.key == Some(key) && r.peer_id != self.swarm.local_peer_id().to_bytes() {
            return self.on_own_key_elsewhere(r, &key, from);
        }
        if let Some(k) = self.peers.directory.records.get_mut(&r.public_key) {
            if k.record == *r {
                // The bytes verified when it was taken: never verified again
                // (a direct copy has nowhere to go).
                if from.is_some() || k.copied.is_some_and(|t| now < t + RECORD_COPY_GAP) {
                    return MessageAcceptance::Ignore;
                }
                k.copied = Some(now);
                return MessageAcceptance::Accept;
            }
            if r.seq <= k.record.seq || now < k.at + RECORD_MIN_GAP {
                return MessageAcceptance::Ignore;
            }
        }
        let signed = Signature::from_compressed(&r.signature)
            .and_then(|s| s.verify_record(&key, &r.signing_message()));
        let peer = PeerId::from_bytes(&r.peer_id);
        let addrs: Result<Vec<Multiaddr>, _> =
            r.addrs.iter().map(|a| Multiaddr::try_from(a.clone())).collect();
        let (Ok(()), Ok(peer), Ok(addrs)) = (signed, peer, addrs) else {
            warn!(target: "p2p", key = %alloy_primitives::hex::encode(r.public_key), "invalid member record");
            return MessageAcceptance::Reject;
        };
        debug!(target: "p2p", %peer, seq = r.seq, "member record");
        self.peers
            .directory
            .records
            .insert(r.public_key, Known { peer, addrs, record: r.clone(), at: now, copied: None });
        self.shared.metrics.member_records.set(self.peers.directory.records.len() as i64);
        MessageAcceptance::Accept
    }

    /// A record of this node's key naming another peer. Sent directly by
    /// that peer, it proves that a process holding the key runs now: a
    /// doppelgänger ([`Directory::twin`]). Seen on gossip, it may be an old
    /// record of an earlier process: the peer is dialled (once), and if it
    /// is up, the record it sends on connecting proves it. Either way this
    /// node re-publishes its own record, so members route to it again.
    fn on_own_key_elsewhere(
        &mut self,
        r: &MemberRecord,
        key: &PublicKey,
        from: Option<PeerId>,
    ) -> MessageAcceptance {
        let Ok(peer) = PeerId::from_bytes(&r.peer_id) else {
            return MessageAcceptance::Reject;
        };
        let live = from == Some(peer);
        let d = &self.peers.directory;
        if (live && d.twin.is_some())
            || (!live && (d.dialed.contains(&peer) || d.dialed.len() >= MAX_TWIN_DIALS))
        {
            return MessageAcceptance::Ignore;
        }
        let signed = Signature::from_compressed(&r.signature)
            .and_then(|s| s.verify_record(key, &r.signing_message()));
        if signed.is_err() {
            return MessageAcceptance::Reject;
        }
        warn!(target: "p2p", %peer, live, "a member record of this node's BLS key names another peer");
        self.peers.directory.republish = true;
        if live {
            self.peers.directory.twin = Some(peer);
        } else {
            self.peers.directory.dialed.insert(peer);
            let addrs = r.addrs.iter().filter_map(|a| Multiaddr::try_from(a.clone()).ok());
            let dial = DialOpts::peer_id(peer).addresses(addrs.collect()).build();
            if let Err(e) = self.swarm.dial(dial) {
                debug!(target: "p2p", %peer, error = %e, "cannot dial the other holder of this key");
            }
        }
        // Not forwarded from here: the other process's record.
        MessageAcceptance::Ignore
    }

    /// A process elsewhere that holds this node's key and proved it is up
    /// (taken once).
    pub(super) fn take_twin(&mut self) -> Option<PeerId> {
        self.peers.directory.twin.take()
    }

    /// Signs and gossips this node's record when it is due (see the module).
    /// Also decays direct-message penalties and drops records of keys no
    /// longer in a loaded committee. With a `Signing::Remote` signer the
    /// record is signed there (one request at a time; after a failure, again
    /// [`RECORD_RETRY`] later) and published when it answers.
    pub(super) fn on_direct_tick(&mut self, now: Instant) {
        self.decay_penalties(now);
        if self.cfg.p2p.dissemination != DisseminationMode::Aggregators
            || self.sign.signer.is_none()
        {
            return;
        }
        let directory = &self.peers.directory;
        let awaited = directory.signing_record.is_some_and(|at| now < at + RECORD_RETRY);
        if awaited || directory.record_retry_at.is_some_and(|at| now < at) {
            return;
        }
        let Some(key) = self.sign.key.filter(|k| self.engine.is_member(k)) else { return };
        let newest = self.engine.loaded_epochs().max().unwrap_or(0);
        let own = self.peers.directory.own.as_ref();
        let republish = std::mem::take(&mut self.peers.directory.republish);
        if !republish && own.is_some_and(|o| o.epoch == newest && now < o.at + o.next) {
            return;
        }
        let next = own
            .filter(|o| o.epoch == newest && !republish)
            .map_or(RECORD_FIRST, |o| (o.next * 2).min(RECORD_EVERY));
        let engine = &self.engine;
        self.peers
            .directory
            .records
            .retain(|k, _| PublicKey::from_compressed(k).is_ok_and(|k| engine.is_member(&k)));
        self.shared.metrics.member_records.set(self.peers.directory.records.len() as i64);
        let addrs: Vec<Vec<u8>> = match &self.peers.advertise {
            Some(list) => list.iter().take(MAX_RECORD_ADDRS).map(|a| a.to_vec()).collect(),
            None => self
                .swarm
                .listeners()
                .chain(self.swarm.external_addresses())
                .filter(|a| dialable(a))
                .take(MAX_RECORD_ADDRS)
                .map(|a| a.to_vec())
                .collect(),
        };
        // Nothing changed and the last copy has left the seen caches (half
        // their lifetime again as a margin: gossipsub forgets expired ids
        // lazily): the same signed record again (holders take it without a
        // pairing).
        let directory = &self.peers.directory;
        let unchanged = directory.own.as_ref().filter(|o| {
            o.epoch == newest
                && !republish
                && o.record.addrs == addrs
                && now.saturating_duration_since(o.at) >= directory.seen_ttl * 3 / 2
        });
        if let Some(o) = unchanged {
            let record = o.record.clone();
            if self.publish(Gossip::Member(Box::new(record.clone()))) {
                debug!(target: "p2p", epoch = newest, "re-publishing the member record unchanged");
                self.peers.directory.own = Some(Own { record, at: now, epoch: newest, next });
                return;
            }
            // Still in this node's seen cache (gossipsub forgets expired ids
            // only when it takes a new one): a new record goes out instead.
        }
        let wall = crate::signer::wall_clock_ms();
        let last = self.store.record_seq().unwrap_or_else(|e| {
            warn!(target: "p2p", error = %e, "cannot read the last member record's seq");
            None
        });
        let seq = record_seq(wall, last);
        // Stored before it is published: a restart with a clock set back
        // still signs a later record, which peers take over this one.
        if let Err(e) = self.store.set_record_seq(seq) {
            warn!(target: "p2p", error = %e, "cannot store the member record's seq: not published");
            return;
        }
        let mut record = MemberRecord {
            public_key: key.compress(),
            seq,
            peer_id: self.swarm.local_peer_id().to_bytes(),
            addrs,
            signature: [0; 96],
        };
        match &self.sign.signer {
            Some(super::Signing::Local(signer)) => {
                record.signature = signer.sign_record(&record.signing_message()).compress();
                self.publish_record(record, newest, next, now);
            }
            Some(super::Signing::Remote(remote, _)) => {
                self.peers.directory.signing_record = Some(now);
                let (remote, tx) = (remote.clone(), self.inbox.tx.clone());
                tokio::spawn(async move {
                    let result = remote.sign_record(&record, &key).await.map_err(|e| e.to_string());
                    let signed = Box::new(record);
                    let _ = tx.send(Internal::RecordSigned {
                        record: signed,
                        epoch: newest,
                        next,
                        result,
                    });
                });
            }
            None => {}
        }
    }

    /// The remote signer answered for this node's record.
    pub(super) fn on_record_signed(
        &mut self,
        mut record: MemberRecord,
        epoch: u64,
        next: Duration,
        result: Result<Signature, String>,
        now: Instant,
    ) {
        self.peers.directory.signing_record = None;
        match result {
            Ok(sig) => {
                record.signature = sig.compress();
                self.peers.directory.record_retry_at = None;
                self.publish_record(record, epoch, next, now);
            }
            Err(e) => {
                warn!(target: "p2p", error = %e, retry_in = ?RECORD_RETRY, "the remote signer did not sign the member record");
                self.peers.directory.record_retry_at = Some(now + RECORD_RETRY);
                // Whatever asked for this record (an epoch, a twin's record)
                // still wants one.
                self.peers.directory.republish = true;
            }
        }
    }

    fn publish_record(&mut self, record: MemberRecord, epoch: u64, next: Duration, now: Instant) {
        info!(target: "p2p", epoch, addrs = record.addrs.len(), "publishing the member record");
        self.peers.directory.own = Some(Own { record: record.clone(), at: now, epoch, next });
        self.publish(Gossip::Member(Box::new(record)));
    }

    /// Sends this node's record straight to a peer that just connected (or
    /// nowhere, if its queue is full: the record is also gossiped).
    pub(super) fn send_record_to(&mut self, peer: PeerId) {
        if let Some(own) = &self.peers.directory.own {
            let record = vec![Gossip::Member(Box::new(own.record.clone()))];
            self.queue_direct(peer, &[], record);
        }
    }

    fn decay_penalties(&mut self, now: Instant) {
        let Some(at) = self.peers.directory.decayed_at else {
            self.peers.directory.decayed_at = Some(now);
            return;
        };
        let elapsed = now.saturating_duration_since(at);
        if elapsed < Duration::from_secs(1) || self.peers.directory.penalties.is_empty() {
            if self.peers.directory.penalties.is_empty() {
                self.peers.directory.decayed_at = Some(now);
            }
            return;
        }
        self.peers.directory.decayed_at = Some(now);
        let factor = PENALTY_DECAY.powf(elapsed.as_secs_f64());
        let gossipsub = &mut self.swarm.behaviour_mut().gossipsub;
        self.peers.directory.penalties.retain(|peer, p| {
            *p *= factor;
            // Below 0.1 the score (-1) no longer matters.
            let keep = *p >= 0.1;
            let score = if keep { PENALTY_WEIGHT * *p * *p } else { 0.0 };
            gossipsub.set_application_score(peer, score);
            keep
        });
    }
}

/// Writes `peer`'s frames, from its queue, on one stream until the node
/// drops the queue (the stream is then closed); reports the frames it could
/// not deliver and ends when the stream cannot be opened, a write fails or
/// stalls, the receiver's [`DIRECT_READY`] does not come, or the receiver
/// closes the stream. The frames written before the ready byte came count
/// as undelivered when it does not (the receiver refused the stream, or
/// does not speak the protocol).
async fn send_stream(
    mut control: Control,
    peer: PeerId,
    id: u64,
    mut rx: mpsc::Receiver<Vec<Gossip>>,
    failed: mpsc::UnboundedSender<Internal>,
) {
    let mut unsent = Vec::new();
    match tokio::time::timeout(DIRECT_TIMEOUT, control.open_stream(peer, DIRECT_PROTOCOL)).await {
        Ok(Ok(stream)) => {
            let (reader, mut writer) = stream.split();
            if write_frames(peer, reader, &mut writer, &mut rx, &mut unsent).await {
                let _ = writer.close().await;
                return;
            }
        }
        Ok(Err(e)) => debug!(target: "p2p", %peer, error = %e, "cannot open a direct stream"),
        Err(_) => debug!(target: "p2p", %peer, "opening a direct stream timed out"),
    }
    rx.close();
    while let Ok(messages) = rx.try_recv() {
        unsent.extend(messages);
    }
    let _ = failed.send(Internal::DirectFailed { peer, id, messages: unsent });
}

/// What the read half of an outbound direct stream shows.
enum Receiver {
    /// The ready byte came: the read half, to watch for the stream's end.
    Ready(ReadHalf<Stream>),
    /// The stream ended, failed, or showed no ready byte in time.
    Gone,
}

/// [`send_stream`]'s loop on an open stream: `true` when the node dropped
/// the queue, `false` when the stream failed, with the frames not known
/// delivered in `unsent`.
async fn write_frames(
    peer: PeerId,
    reader: ReadHalf<Stream>,
    writer: &mut WriteHalf<Stream>,
    rx: &mut mpsc::Receiver<Vec<Gossip>>,
    unsent: &mut Vec<Gossip>,
) -> bool {
    let mut ready = false;
    // The frames written before the ready byte.
    let mut unconfirmed: Vec<Gossip> = Vec::new();
    let mut watch: BoxFuture<'static, Receiver> = ready_byte(reader).boxed();
    loop {
        tokio::select! {
            // `stream_end` only ever resolves `Gone`.
            receiver = &mut watch => match receiver {
                Receiver::Ready(reader) => {
                    ready = true;
                    unconfirmed.clear();
                    watch = stream_end(reader).boxed();
                }
                _ => {
                    debug!(target: "p2p", %peer, ready, "direct stream refused or closed by its receiver");
                    *unsent = unconfirmed;
                    return false;
                }
            },
            messages = rx.recv() => {
                let Some(messages) = messages else {
                    // The node dropped the queue (its connection to the
                    // peer closed, say): frames not yet confirmed count as
                    // unsent unless the ready byte still comes.
                    if ready || matches!((&mut watch).await, Receiver::Ready(_)) {
                        return true;
                    }
                    *unsent = unconfirmed;
                    return false;
                };
                let direct = Direct::of(&messages);
                match tokio::time::timeout(DIRECT_TIMEOUT, write_direct(writer, &direct)).await {
                    Ok(Ok(())) => {
                        if !ready {
                            unconfirmed.extend(messages);
                        }
                        continue;
                    }
                    Ok(Err(e)) => debug!(target: "p2p", %peer, error = %e, "direct stream failed"),
                    Err(_) => debug!(target: "p2p", %peer, "direct stream stalled"),
                }
                unconfirmed.extend(messages);
                *unsent = unconfirmed;
                return false;
            }
        }
    }
}

/// Waits at most [`DIRECT_TIMEOUT`] for the receiver's [`DIRECT_READY`].
async fn ready_byte(mut reader: ReadHalf<Stream>) -> Receiver {
    let mut byte = [0u8; 1];
    match tokio::time::timeout(DIRECT_TIMEOUT, reader.read_exact(&mut byte)).await {
        Ok(Ok(())) if byte[0] == DIRECT_READY => Receiver::Ready(reader),
        _ => Receiver::Gone,
    }
}

/// Resolves when the receiver closes the stream (or writes to it, which it
/// must not).
async fn stream_end(mut reader: ReadHalf<Stream>) -> Receiver {
    let mut byte = [0u8; 1];
    let _ = reader.read(&mut byte).await;
    Receiver::Gone
}

/// Accepts inbound direct streams (at most [`DIRECT_STREAMS_PER_PEER`] per
/// peer at once; more are closed unread) and reads their frames into `tx`,
/// until the swarm stops accepting or the node stops reading.
pub(super) async fn accept_streams(mut incoming: IncomingStreams, tx: mpsc::Sender<DirectIn>) {
    let mut readers = FuturesUnordered::new();
    let mut open: HashMap<PeerId, usize> = HashMap::new();
    loop {
        tokio::select! {
            accepted = incoming.next() => {
                let Some((peer, stream)) = accepted else { return };
                let n = open.entry(peer).or_default();
                if *n >= DIRECT_STREAMS_PER_PEER {
                    debug!(target: "p2p", %peer, "too many direct streams from one peer: closed");
                    continue;
                }
                *n += 1;
                readers.push(read_stream(peer, stream, tx.clone()));
            }
            Some(peer) = readers.next(), if !readers.is_empty() => {
                if let Some(n) = open.get_mut(&peer) {
                    *n -= 1;
                    if *n == 0 {
                        open.remove(&peer);
                    }
                }
            }
        }
        if tx.is_closed() {
            return;
        }
    }
}

/// Tells the sender the stream is read ([`DIRECT_READY`]), then reads its
/// frames until it ends, fails or sends a malformed frame; returns its peer.
async fn read_stream(peer: PeerId, mut stream: Stream, tx: mpsc::Sender<DirectIn>) -> PeerId {
    let ready = async {
        stream.write_all(&[DIRECT_READY]).await?;
        stream.flush().await
    };
    match tokio::time::timeout(DIRECT_TIMEOUT, ready).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            debug!(target: "p2p", %peer, error = %e, "inbound direct stream failed");
            return peer;
        }
        Err(_) => {
            debug!(target: "p2p", %peer, "inbound direct stream stalled");
            return peer;
        }
    }
    loop {
        let event = match read_direct(&mut stream).await {
            Ok(Some(direct)) => DirectIn::Frame { peer, direct },
            Ok(None) => break,
            Err(error) if error.kind() == std::io::ErrorKind::InvalidData => {
                let _ = tx.send(DirectIn::Malformed { peer, error }).await;
                break;
            }
            // Not penalised: a link that stops mid-frame looks the same.
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                debug!(target: "p2p", %peer, error = %e, "inbound direct stream closed");
                break;
            }
            Err(e) => {
                debug!(target: "p2p", %peer, error = %e, "inbound direct stream failed");
                break;
            }
        };
        if tx.send(event).await.is_err() {
            break;
        }
    }
    peer
}

/// Whether a listen address can be dialled by others (not `0.0.0.0` / `::`).
fn dialable(a: &Multiaddr) -> bool {
    match a.iter().next() {
        Some(Protocol::Ip4(ip)) => !ip.is_unspecified(),
        Some(Protocol::Ip6(ip)) => !ip.is_unspecified(),
        Some(_) => true,
        None => false,
    }
}

/// A member record's `seq`: the wall clock in milliseconds, but always past
/// the last one this node signed (`last`), so a clock set back does not make
/// peers keep an older record (they take only a higher `seq`).
fn record_seq(wall_ms: u64, last: Option<u64>) -> u64 {
    last.map_or(wall_ms, |l| wall_ms.max(l.saturating_add(1)))
}

#[cfg(test)]
mod tests {
    use super::{dialable, record_seq};

    #[test]
    fn a_record_seq_follows_the_clock_but_never_goes_back() {
        assert_eq!(record_seq(5_000, None), 5_000);
        assert_eq!(record_seq(5_000, Some(4_000)), 5_000);
        // The clock set back (or two records in one millisecond).
        assert_eq!(record_seq(5_000, Some(9_000)), 9_001);
        assert_eq!(record_seq(5_000, Some(5_000)), 5_001);
        assert_eq!(record_seq(0, Some(u64::MAX)), u64::MAX);
    }

    #[test]
    fn unspecified_listen_addresses_are_not_published() {
        assert!(!dialable(&"/ip4/0.0.0.0/tcp/9400".parse().unwrap()));
        assert!(!dialable(&"/ip6/::/tcp/9400".parse().unwrap()));
        assert!(dialable(&"/ip4/10.0.0.2/tcp/9400".parse().unwrap()));
        assert!(dialable(&"/dns4/node-1/tcp/9400".parse().unwrap()));
    }
}
