//! Content by hash over libp2p request-response: the p2p service's fetching
//! and serving side, with the limits that keep a hostile peer from turning
//! it into a memory or CPU sink.
//!
//! Serving: each request is read from the store on a blocking worker (never
//! on the event loop); at most [`MAX_SERVING`] requests are in flight (a
//! slot each, from the request's arrival until its response is written out),
//! at most [`MAX_SERVING_PER_PEER`] of them one peer's, and only one once
//! half the slots are taken (so a few peers cannot hold them all). Each peer
//! is charged per byte ([`PEER_BYTES_PER_WINDOW`]) and per slot-second
//! ([`PEER_SLOT_TIME_PER_WINDOW`]) per [`BUDGET_WINDOW`]; beyond any limit
//! the answer is `NotFound` at once (the requester asks someone else). A
//! response not written out within [`SERVE_DEADLINE`] (a peer that does not
//! read) closes that connection, which frees its slot. Fetching: up to
//! [`FETCH_FANOUT`] connected peers chosen at random, never the same peer
//! twice for one hash until every peer was asked (so a crowd of sybils that
//! answer `NotFound` cannot eclipse the honest peers); when a round finds
//! nothing, the next one goes out at once until every peer was asked. A peer that serves
//! bytes with a wrong hash is banned for the process's life.
//! Connections: at most [`MAX_CONNECTIONS_PER_IP`] per remote IP (loopback
//! exempt: local devnets) and [`MAX_INBOUND`] inbound in all.

use crate::{
    metrics::Metrics,
    p2p::{self, Behaviour},
    store::Store,
};
use alloy_primitives::B256;
use libp2p::{
    core::ConnectedPoint,
    multiaddr::Protocol,
    request_response::{self, InboundRequestId, OutboundRequestId, ResponseChannel},
    swarm::ConnectionId,
    PeerId, Swarm,
};
use rand::seq::SliceRandom;
use resolvd_proto::wire::{ContentRequest, ContentResponse, ContentUnavailable};
use std::{
    collections::{HashMap, HashSet},
    net::IpAddr,
    sync::Arc,
    time::{Duration, Instant},
};
use tracing::{debug, error, warn};

/// Most peers asked for one piece of content at once.
pub const FETCH_FANOUT: usize = 8;
/// Requests of one peer served at once.
pub const MAX_SERVING_PER_PEER: usize = 2;
/// Requests served at once, all peers together (each holds up to one document).
pub const MAX_SERVING: usize = 8;
/// Bytes one peer may be served per [`BUDGET_WINDOW`].
pub const PEER_BYTES_PER_WINDOW: usize = 64 << 20;
/// Slot time one peer may use per [`BUDGET_WINDOW`] (its requests' time in
/// flight, added up).
pub const PEER_SLOT_TIME_PER_WINDOW: Duration = Duration::from_secs(20);
/// A response still not written out this long after its request arrived
/// closes the connection (16 MiB in 10 s: 1.6 MB/s).
pub const SERVE_DEADLINE: Duration = Duration::from_secs(10);
/// The serving budget's window.
pub const BUDGET_WINDOW: Duration = Duration::from_secs(60);
/// Connections from one remote IP (loopback exempt).
pub const MAX_CONNECTIONS_PER_IP: usize = 8;
/// Inbound connections in all.
pub const MAX_INBOUND: usize = 256;

/// A store read finished on a blocking worker: the response to send.
pub struct Served {
    peer: PeerId,
    channel: ResponseChannel<ContentResponse>,
    response: ContentResponse,
}

/// A request being served.
struct Slot {
    peer: PeerId,
    connection: ConnectionId,
    since: Instant,
    /// Slot time is charged up to here.
    charged: Instant,
    /// Its connection was closed for missing [`SERVE_DEADLINE`].
    cut: bool,
}

/// The content service's state.
pub struct ContentService {
    metrics: Arc<Metrics>,
    fetches: HashMap<OutboundRequestId, (ContentRequest, PeerId)>,
    fetching: HashSet<B256>,
    asked: HashMap<B256, HashSet<PeerId>>,
    banned: HashSet<PeerId>,
    serving: HashMap<InboundRequestId, Slot>,
    serving_per_peer: HashMap<PeerId, usize>,
    budget: HashMap<PeerId, usize>,
    slot_time: HashMap<PeerId, Duration>,
    window_start: Instant,
    connections_by_ip: HashMap<IpAddr, HashSet<ConnectionId>>,
    connection_ip: HashMap<ConnectionId, IpAddr>,
    inbound: HashSet<ConnectionId>,
}

/// Connected peers not yet asked for a hash in the current round.
fn unasked<'a>(
    swarm: &'a Swarm<Behaviour>,
    asked: &'a HashSet<PeerId>,
) -> impl Iterator<Item = &'a PeerId> + 'a {
    swarm.connected_peers().filter(move |p| !asked.contains(p))
}

impl ContentService {
    /// An empty service.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self {
            metrics,
            fetches: HashMap::new(),
            fetching: HashSet::new(),
            asked: HashMap::new(),
            banned: HashSet::new(),
            serving: HashMap::new(),
            serving_per_peer: HashMap::new(),
            budget: HashMap::new(),
            slot_time: HashMap::new(),
            window_start: Instant::now(),
            connections_by_ip: HashMap::new(),
            connection_ip: HashMap::new(),
            inbound: HashSet::new(),
        }
    }

    /// Peers banned for wrong content.
    pub fn banned(&self) -> impl Iterator<Item = &PeerId> {
        self.banned.iter()
    }

    /// Asks up to [`FETCH_FANOUT`] random peers not asked before for `hash`.
    pub fn fetch(&mut self, swarm: &mut Swarm<Behaviour>, hash: B256, tag: &'static str) {
        if self.fetching.contains(&hash) {
            return;
        }
        let asked = self.asked.entry(hash).or_default();
        let mut peers: Vec<PeerId> = unasked(swarm, asked).copied().collect();
        if peers.is_empty() {
            // Every connected peer was asked: start a new round.
            asked.clear();
            peers = swarm.connected_peers().copied().collect();
        }
        if peers.is_empty() {
            return;
        }
        peers.shuffle(&mut rand::thread_rng());
        peers.truncate(FETCH_FANOUT);
        self.fetching.insert(hash);
        for peer in peers {
            asked.insert(peer);
            let request = ContentRequest { hash, type_tag: tag };
            let id = swarm.behaviour_mut().content.send_request(&peer, request.clone());
            self.fetches.insert(id, (request, peer));
        }
    }

    /// One request for `request.hash` finished without storing it. When it
    /// was the last one in flight, the next round goes at once to peers not
    /// asked yet: content starts on one node and spreads as nodes fetch it,
    /// so in a large network most first rounds miss, and waiting for the
    /// engine's retry (2 s) per round would put seconds on the dispute. Once
    /// every connected peer was asked, the engine's retry starts a new cycle.
    fn fetch_done(&mut self, swarm: &mut Swarm<Behaviour>, request: &ContentRequest) {
        let hash = request.hash;
        if !self.fetching.contains(&hash) || self.fetches.values().any(|(r, _)| r.hash == hash) {
            return;
        }
        self.fetching.remove(&hash);
        let any_unasked = match self.asked.get(&hash) {
            Some(asked) => unasked(swarm, asked).next().is_some(),
            None => swarm.connected_peers().next().is_some(),
        };
        if any_unasked {
            self.fetch(swarm, hash, request.type_tag);
        }
    }

    /// Handles a request-response event. Returns whether new content was stored.
    pub fn on_event(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        store: &Arc<Store>,
        served: &(impl Fn(Served) + Send + Sync + Clone + 'static),
        event: request_response::Event<ContentRequest, ContentResponse>,
    ) -> bool {
        match event {
            request_response::Event::Message { peer, connection_id, message } => match message {
                request_response::Message::Request { request_id, request, channel } => {
                    let from = (peer, connection_id, request_id);
                    self.on_request(swarm, store, served, from, request, channel);
                    false
                }
                request_response::Message::Response { request_id, response } => {
                    self.on_response(swarm, store, peer, request_id, response)
                }
            },
            request_response::Event::OutboundFailure { request_id, peer, error, .. } => {
                if let Some((req, _)) = self.fetches.remove(&request_id) {
                    debug!(target: "p2p", %peer, hash = %req.hash, %error, "content request failed");
                    self.fetch_done(swarm, &req);
                    Metrics::count(&self.metrics.content_fetches, "failed");
                }
                false
            }
            request_response::Event::InboundFailure { request_id, .. }
            | request_response::Event::ResponseSent { request_id, .. } => {
                self.finish_serving(request_id, Instant::now());
                false
            }
        }
    }

    fn finish_serving(&mut self, request_id: InboundRequestId, now: Instant) {
        if let Some(slot) = self.serving.remove(&request_id) {
            let peer = slot.peer;
            *self.slot_time.entry(peer).or_default() += now.saturating_duration_since(slot.charged);
            if let Some(n) = self.serving_per_peer.get_mut(&peer) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.serving_per_peer.remove(&peer);
                }
            }
        }
    }

    fn on_request(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        store: &Arc<Store>,
        served: &(impl Fn(Served) + Send + Sync + Clone + 'static),
        (peer, connection, request_id): (PeerId, ConnectionId, InboundRequestId),
        request: ContentRequest,
        channel: ResponseChannel<ContentResponse>,
    ) {
        let now = Instant::now();
        // A peer's second slot only while half of them are free.
        let per_peer = if self.serving.len() < MAX_SERVING / 2 { MAX_SERVING_PER_PEER } else { 1 };
        let busy = self.serving.len() >= MAX_SERVING
            || self.serving_per_peer.get(&peer).copied().unwrap_or(0) >= per_peer
            || self.budget.get(&peer).copied().unwrap_or(0) >= PEER_BYTES_PER_WINDOW
            || self.slot_time_used(&peer, now) >= PEER_SLOT_TIME_PER_WINDOW;
        if busy {
            Metrics::count(&self.metrics.content_served, "busy");
            let response =
                ContentResponse { hash: request.hash, result: Err(ContentUnavailable::NotFound) };
            let _ = swarm.behaviour_mut().content.send_response(channel, response);
            return;
        }
        self.serving
            .insert(request_id, Slot { peer, connection, since: now, charged: now, cut: false });
        *self.serving_per_peer.entry(peer).or_default() += 1;
        let (store, served) = (store.clone(), served.clone());
        tokio::task::spawn_blocking(move || {
            let result = match store.get_content(&request.hash) {
                Ok(Some((tag, bytes))) if tag == request.type_tag => Ok(bytes.into()),
                Ok(_) => Err(ContentUnavailable::NotFound),
                Err(e) => {
                    error!(target: "store", error = %e, "reading content");
                    Err(ContentUnavailable::NotFound)
                }
            };
            served(Served {
                peer,
                channel,
                response: ContentResponse { hash: request.hash, result },
            });
        });
    }

    /// Sends a response read by a blocking worker, and charges the peer's budget.
    pub fn respond(&mut self, swarm: &mut Swarm<Behaviour>, served: Served) {
        let Served { peer, channel, response } = served;
        let len = response.result.as_ref().map_or(0, |b| b.len());
        *self.budget.entry(peer).or_default() += len;
        Metrics::count(
            &self.metrics.content_served,
            if response.result.is_ok() { "ok" } else { "not_found" },
        );
        // A closed channel (the peer went away) frees its slot through InboundFailure.
        let _ = swarm.behaviour_mut().content.send_response(channel, response);
    }

    fn on_response(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        store: &Arc<Store>,
        peer: PeerId,
        id: OutboundRequestId,
        response: ContentResponse,
    ) -> bool {
        let Some((request, _)) = self.fetches.remove(&id) else { return false };
        let metrics = &self.metrics.content_fetches;
        let mut stored = false;
        match response.result {
            Ok(bytes) if p2p::verify_content(&request, &bytes) => {
                if matches!(store.get_content(&request.hash), Ok(Some(_))) {
                    // Stored meanwhile (another answer, or an upload).
                    Metrics::count(metrics, "duplicate");
                    self.fetching.remove(&request.hash);
                    self.asked.remove(&request.hash);
                } else {
                    match store.put_content_expecting(request.type_tag, &bytes, &request.hash) {
                        Ok(()) => {
                            Metrics::count(metrics, "ok");
                            debug!(target: "p2p", %peer, hash = %request.hash, "content fetched");
                            // Later answers from other peers are still hash-checked
                            // (a lying peer is caught even when it is slow).
                            self.fetching.remove(&request.hash);
                            self.asked.remove(&request.hash);
                            stored = true;
                        }
                        Err(e) => {
                            self.metrics.store_errors.inc();
                            error!(target: "store", error = %e, "storing fetched content");
                        }
                    }
                }
            }
            Ok(_) => {
                // Honest nodes hash what they store and re-hash what they serve:
                // wrong bytes are proof of a hostile peer.
                Metrics::count(metrics, "wrong_hash");
                warn!(target: "p2p", %peer, hash = %request.hash, "peer served content with a wrong hash: banning it");
                self.banned.insert(peer);
                swarm.behaviour_mut().gossipsub.blacklist_peer(&peer);
                let _ = swarm.disconnect_peer_id(peer);
            }
            Err(_) => Metrics::count(metrics, "not_found"),
        }
        if !stored {
            self.fetch_done(swarm, &request);
        }
        stored
    }

    /// Admits a new connection, or closes it (banned peer, too many
    /// connections from its IP, too many inbound). Returns whether admitted.
    pub fn admit(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        peer: PeerId,
        connection: ConnectionId,
        endpoint: &ConnectedPoint,
    ) -> bool {
        if self.banned.contains(&peer) {
            let _ = swarm.disconnect_peer_id(peer);
            return false;
        }
        let ip = endpoint.get_remote_address().iter().find_map(|p| match p {
            Protocol::Ip4(ip) => Some(IpAddr::V4(ip)),
            Protocol::Ip6(ip) => Some(IpAddr::V6(ip)),
            _ => None,
        });
        let inbound = endpoint.is_listener();
        if inbound && self.inbound.len() >= MAX_INBOUND {
            warn!(target: "p2p", %peer, "inbound connection limit reached: closing");
            swarm.close_connection(connection);
            return false;
        }
        if let Some(ip) = ip.filter(|ip| !ip.is_loopback()) {
            let conns = self.connections_by_ip.entry(ip).or_default();
            if conns.len() >= MAX_CONNECTIONS_PER_IP {
                warn!(target: "p2p", %peer, %ip, "too many connections from this IP: closing");
                swarm.close_connection(connection);
                return false;
            }
            conns.insert(connection);
            self.connection_ip.insert(connection, ip);
        }
        if inbound {
            self.inbound.insert(connection);
        }
        true
    }

    /// A connection closed.
    pub fn closed(&mut self, connection: ConnectionId) {
        self.inbound.remove(&connection);
        if let Some(ip) = self.connection_ip.remove(&connection) {
            if let Some(set) = self.connections_by_ip.get_mut(&ip) {
                set.remove(&connection);
                if set.is_empty() {
                    self.connections_by_ip.remove(&ip);
                }
            }
        }
    }

    /// `peer`'s slot time this window, its requests in flight included.
    fn slot_time_used(&self, peer: &PeerId, now: Instant) -> Duration {
        let in_flight: Duration = self
            .serving
            .values()
            .filter(|s| s.peer == *peer)
            .map(|s| now.saturating_duration_since(s.charged))
            .sum();
        self.slot_time.get(peer).copied().unwrap_or_default() + in_flight
    }

    /// Charges slot time, closes the connections of responses past
    /// [`SERVE_DEADLINE`], and resets the budgets every [`BUDGET_WINDOW`].
    pub fn on_tick(&mut self, swarm: &mut Swarm<Behaviour>, now: Instant) {
        for slot in self.serving.values_mut() {
            *self.slot_time.entry(slot.peer).or_default() +=
                now.saturating_duration_since(slot.charged);
            slot.charged = now;
            if !slot.cut && now.saturating_duration_since(slot.since) >= SERVE_DEADLINE {
                // Its slot is freed by the InboundFailure the close causes.
                slot.cut = true;
                Metrics::count(&self.metrics.content_served, "too_slow");
                warn!(target: "p2p", peer = %slot.peer, "content response not read within {SERVE_DEADLINE:?}: closing the connection");
                swarm.close_connection(slot.connection);
            }
        }
        if now.saturating_duration_since(self.window_start) >= BUDGET_WINDOW {
            self.window_start = now;
            self.budget.clear();
            self.slot_time.clear();
        }
    }
}
