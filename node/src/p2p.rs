//! The p2p layer: libp2p over TCP + noise + yamux, identify, gossipsub with
//! application-side validation and peer scoring, a request-response
//! protocol to fetch content by hash, and a long-lived stream per peer to
//! send messages straight to it (aggregation's sends to a dispute's
//! collectors and aggregators).
//!
//! This module knows wire formats, not disputes: every gossip message is
//! decoded into its validated wire type ([`decode_gossip`]) before anything
//! judges it; malformed or oversized messages are REJECTed (which lowers the
//! sender's peer score), and the node decides the rest (signatures,
//! membership) and reports it to gossipsub. Content responses are unverified bytes until the requester
//! hashes them ([`verify_content`]).
//!
//! Limits: gossip messages, and each message of a direct request (at most
//! [`MAX_DIRECT_MESSAGES`]), at most [`MAX_GOSSIP_LEN`] (64 KiB); content requests
//! at most 256 bytes; content responses at most [`MAX_CONTENT_RESPONSE_LEN`]
//! (16 MiB + 1 KiB).

use futures::{AsyncReadExt, AsyncWriteExt};
use libp2p::{
    gossipsub::{self, IdentTopic, TopicHash},
    identify, identity, noise,
    request_response::{self, ProtocolSupport},
    tcp, yamux, Multiaddr, StreamProtocol, Swarm, SwarmBuilder,
};
use resolvd_proto::{
    content_hash,
    wire::{
        ContentRequest, ContentResponse, WireMessage, MAX_CONTENT_RESPONSE_LEN, MAX_GOSSIP_LEN,
    },
    WireError,
};
use std::{io, time::Duration};

/// Concurrent content streams (inbound + outbound) per connection.
pub const CONTENT_STREAMS: usize = 8;

/// The request-response protocol for content by hash.
pub const CONTENT_PROTOCOL: StreamProtocol = StreamProtocol::new("/resolvd/content/1");

/// The stream protocol for direct messages: a sender keeps one stream open
/// to each peer it sends to and writes [`Direct`] frames on it
/// ([`write_direct`]), unanswered, as long as the stream lives. The receiver
/// writes one byte, [`DIRECT_READY`], when it takes the stream, and nothing
/// else: the sender keeps the frames it wrote until that byte arrives, so
/// that a peer which does not speak the protocol (the dialer does not wait
/// for multistream-select's confirmation) or refuses the stream costs no
/// frame. Each message of a frame is judged as if gossiped on its topic, in
/// order, but never forwarded.
pub const DIRECT_PROTOCOL: StreamProtocol = StreamProtocol::new("/resolvd/direct/4");

/// The byte a receiver writes on a [`DIRECT_PROTOCOL`] stream it reads.
pub const DIRECT_READY: u8 = 1;

/// Inbound direct streams read at once from one peer, at most (a sender
/// replacing a failed stream may open its next before the last one closed);
/// more are closed unread.
pub const DIRECT_STREAMS_PER_PEER: usize = 2;

/// How long opening a direct stream, writing one frame to it, or its
/// receiver's [`DIRECT_READY`] may take before the send counts as failed
/// (and its messages go out on gossip).
pub const DIRECT_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a receiver waits for the rest of a direct frame once its first
/// byte came, after which it closes the stream. A frame (at most
/// `MAX_DIRECT_FRAME`, about 256 KiB; a partial is under 1 KiB) from a live
/// sender arrives a round trip or so after its first byte; a frame cut off
/// this way is lost to its sender, which counts a confirmed stream's frames
/// as delivered (escalation routes around it).
pub const DIRECT_FRAME_TIMEOUT: Duration = Duration::from_secs(6);

/// What a frame's buffer is allocated with before its bytes arrive.
const READ_CHUNK: usize = 16 * 1024;

pub use resolvd_proto::wire::{Gossip, Topic};

/// A [`Topic`] as gossipsub names it.
pub trait TopicExt: Sized {
    /// The gossipsub topic.
    fn ident(self) -> IdentTopic;
    /// The topic of a gossipsub topic hash, if it is one of ours.
    fn from_hash(hash: &TopicHash) -> Option<Self>;
}

impl TopicExt for Topic {
    fn ident(self) -> IdentTopic {
        IdentTopic::new(self.name())
    }

    fn from_hash(hash: &TopicHash) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.ident().hash() == *hash)
    }
}

/// Why a gossip message was not decoded (REJECT it).
#[derive(Debug, thiserror::Error)]
pub enum GossipError {
    /// Not one of the [`Topic`]s.
    #[error("gossip on an unknown topic")]
    UnknownTopic,
    /// Malformed or oversized for its topic's message type.
    #[error("malformed gossip on {0:?}: {1}")]
    Malformed(Topic, WireError),
}

/// Decodes a gossipsub message into its topic's validated wire type. What a
/// well-formed message means (signatures, membership) is the caller's
/// judgement, reported with `report_message_validation_result`.
pub fn decode_gossip(message: &gossipsub::Message) -> Result<(Topic, Gossip), GossipError> {
    let topic = Topic::from_hash(&message.topic).ok_or(GossipError::UnknownTopic)?;
    let gossip =
        Gossip::decode(topic, &message.data).map_err(|e| GossipError::Malformed(topic, e))?;
    Ok((topic, gossip))
}

/// Messages in one direct request, at most: a commit-reveal reveal goes with
/// its commitment, and the rare equivocation test's extra partials with it.
pub const MAX_DIRECT_MESSAGES: usize = 4;

/// The topics a direct frame may carry: what the engine sends to members
/// (partials, commitments, slice aggregates) and member records. The others
/// are only gossiped; a certificate arriving directly would, for one, stand
/// in for the gossiped one at the aggregators holding theirs back (the
/// certificate stagger) while nobody else saw it.
pub const DIRECT_TOPICS: [Topic; 4] =
    [Topic::Verdicts, Topic::Commits, Topic::Aggregates, Topic::Members];

/// A frame sent straight to one peer ([`DIRECT_PROTOCOL`]): messages, each
/// the topic it would be gossiped on and its wire bytes, that the receiver
/// takes in this order at one instant (a reveal never arrives before its
/// commitment).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Direct {
    /// Its messages (1 to [`MAX_DIRECT_MESSAGES`]).
    pub messages: Vec<(Topic, Vec<u8>)>,
}

impl Direct {
    /// The request that sends `gossip` directly, in order (at most
    /// [`MAX_DIRECT_MESSAGES`] of it; callers send fewer).
    pub fn of(gossip: &[Gossip]) -> Self {
        Self { messages: gossip.iter().take(MAX_DIRECT_MESSAGES).map(Gossip::encode).collect() }
    }

    /// Decodes each message exactly as gossip on its topic is decoded.
    pub fn decode(&self) -> impl Iterator<Item = Result<Gossip, GossipError>> + '_ {
        self.messages.iter().map(|(topic, data)| {
            Gossip::decode(*topic, data).map_err(|e| GossipError::Malformed(*topic, e))
        })
    }

    fn to_frame(&self) -> Vec<u8> {
        let len = self.messages.iter().map(|(_, d)| 5 + d.len()).sum();
        let mut frame = Vec::with_capacity(len);
        for (topic, data) in &self.messages {
            let tag = Topic::ALL.iter().position(|t| t == topic).expect("a topic") as u8;
            frame.push(tag);
            frame.extend_from_slice(&(data.len() as u32).to_be_bytes());
            frame.extend_from_slice(data);
        }
        frame
    }

    fn from_frame(frame: &[u8]) -> io::Result<Self> {
        let invalid = |why: &str| io::Error::new(io::ErrorKind::InvalidData, why.to_owned());
        let mut messages = Vec::new();
        let mut rest = frame;
        while let Some((&tag, tail)) = rest.split_first() {
            if messages.len() == MAX_DIRECT_MESSAGES {
                return Err(invalid("too many direct messages"));
            }
            let topic = Topic::ALL
                .get(usize::from(tag))
                .copied()
                .ok_or_else(|| invalid("unknown topic"))?;
            if !DIRECT_TOPICS.contains(&topic) {
                return Err(invalid("a topic that is only gossiped"));
            }
            let (len, tail) = tail.split_first_chunk::<4>().ok_or_else(|| invalid("truncated"))?;
            let len = u32::from_be_bytes(*len) as usize;
            if len > MAX_GOSSIP_LEN || len > tail.len() {
                return Err(invalid("direct message too long or truncated"));
            }
            let (data, tail) = tail.split_at(len);
            messages.push((topic, data.to_vec()));
            rest = tail;
        }
        if messages.is_empty() {
            return Err(invalid("empty direct request"));
        }
        Ok(Self { messages })
    }
}

/// Largest direct frame.
const MAX_DIRECT_FRAME: usize = MAX_DIRECT_MESSAGES * (5 + MAX_GOSSIP_LEN);

/// Writes one [`Direct`] frame to a [`DIRECT_PROTOCOL`] stream and flushes
/// it, leaving the stream open: a 4-byte big-endian length, then 1 to
/// [`MAX_DIRECT_MESSAGES`] messages, each a topic byte (its place in
/// [`Topic::ALL`]), a 4-byte big-endian length and at most
/// [`MAX_GOSSIP_LEN`] bytes.
pub async fn write_direct<T: futures::AsyncWrite + Unpin + Send>(
    io: &mut T,
    direct: &Direct,
) -> io::Result<()> {
    let frame = direct.to_frame();
    let mut bytes = Vec::with_capacity(4 + frame.len());
    bytes.extend_from_slice(&(frame.len() as u32).to_be_bytes());
    bytes.extend_from_slice(&frame);
    io.write_all(&bytes).await?;
    io.flush().await
}

/// Reads the next [`Direct`] frame of a [`DIRECT_PROTOCOL`] stream: `None`
/// when the sender closed it between frames; `InvalidData` for a frame that
/// is too long or malformed (unknown topic, truncated, too many messages);
/// `TimedOut` for one not read whole within [`DIRECT_FRAME_TIMEOUT`] of its
/// first byte (a stream may idle between frames, not inside one).
pub async fn read_direct<T: futures::AsyncRead + Unpin + Send>(
    io: &mut T,
) -> io::Result<Option<Direct>> {
    read_direct_within(io, DIRECT_FRAME_TIMEOUT).await
}

/// [`read_direct`], a frame's rest due within `stall` of its first byte.
async fn read_direct_within<T: futures::AsyncRead + Unpin + Send>(
    io: &mut T,
    stall: Duration,
) -> io::Result<Option<Direct>> {
    let mut len = [0u8; 4];
    // A clean end is one before the first byte of a frame.
    if io.read(&mut len[..1]).await? == 0 {
        return Ok(None);
    }
    let rest = async {
        io.read_exact(&mut len[1..]).await?;
        read_body(io, len, MAX_DIRECT_FRAME).await
    };
    let frame = tokio::time::timeout(stall, rest).await.map_err(|_| {
        io::Error::new(io::ErrorKind::TimedOut, "a direct frame stalled after its first byte")
    })??;
    Direct::from_frame(&frame).map(Some)
}

/// Length-prefixed protobuf codec for [`ContentRequest`] / [`ContentResponse`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ContentCodec;

async fn read_frame<T: futures::AsyncRead + Unpin + Send>(
    io: &mut T,
    max: usize,
) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    io.read_exact(&mut len).await?;
    read_body(io, len, max).await
}

/// The body of a frame whose 4-byte big-endian length is `len`: at most
/// `max` bytes (`InvalidData` past it, before anything is allocated). The
/// buffer grows with the bytes that arrive, not with the length the peer
/// claims: a peer announcing a large frame and sending little of it holds
/// little memory.
async fn read_body<T: futures::AsyncRead + Unpin + Send>(
    io: &mut T,
    len: [u8; 4],
    max: usize,
) -> io::Result<Vec<u8>> {
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes exceeds {max}"),
        ));
    }
    // Doubling from READ_CHUNK, capped at `len`: the buffer ends at exactly
    // `len` bytes of capacity.
    let mut buf = Vec::new();
    let mut filled = 0;
    while filled < len {
        let grow = (len - filled).min(filled.max(READ_CHUNK));
        buf.reserve_exact(grow);
        buf.resize(filled + grow, 0);
        while filled < buf.len() {
            match io.read(&mut buf[filled..]).await? {
                0 => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("frame ended after {filled} of {len} bytes"),
                    ))
                }
                n => filled += n,
            }
        }
    }
    Ok(buf)
}

async fn write_frame<T: futures::AsyncWrite + Unpin + Send>(
    io: &mut T,
    bytes: &[u8],
) -> io::Result<()> {
    let len = u32::try_from(bytes.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too large"))?;
    io.write_all(&len.to_be_bytes()).await?;
    io.write_all(bytes).await?;
    io.close().await
}

fn invalid(e: WireError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl request_response::Codec for ContentCodec {
    type Protocol = StreamProtocol;
    type Request = ContentRequest;
    type Response = ContentResponse;

    async fn read_request<T>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
    ) -> io::Result<ContentRequest>
    where
        T: futures::AsyncRead + Unpin + Send,
    {
        ContentRequest::decode_wire(&read_frame(io, ContentRequest::MAX_LEN).await?)
            .map_err(invalid)
    }

    async fn read_response<T>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
    ) -> io::Result<ContentResponse>
    where
        T: futures::AsyncRead + Unpin + Send,
    {
        ContentResponse::decode_wire(&read_frame(io, MAX_CONTENT_RESPONSE_LEN).await?)
            .map_err(invalid)
    }

    async fn write_request<T>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
        req: ContentRequest,
    ) -> io::Result<()>
    where
        T: futures::AsyncWrite + Unpin + Send,
    {
        write_frame(io, &req.encode_wire()).await
    }

    async fn write_response<T>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
        res: ContentResponse,
    ) -> io::Result<()>
    where
        T: futures::AsyncWrite + Unpin + Send,
    {
        write_frame(io, &res.encode_wire()).await
    }
}

/// Checks that content received for `request` hashes to the requested hash.
pub fn verify_content(request: &ContentRequest, bytes: &[u8]) -> bool {
    content_hash(request.type_tag, bytes) == request.hash
}

mod behaviour {
    // The derive generates `BehaviourEvent` without documentation.
    #![allow(missing_docs)]

    use super::ContentCodec;
    use libp2p::{gossipsub, identify, request_response, swarm::NetworkBehaviour};

    /// The one libp2p behaviour of a node.
    #[derive(NetworkBehaviour)]
    pub struct Behaviour {
        /// Gossip of disputes, partials, certificates and evidence.
        pub gossipsub: gossipsub::Behaviour,
        /// Peer identification (protocol versions, listen addresses).
        pub identify: identify::Behaviour,
        /// Content by hash.
        pub content: request_response::Behaviour<ContentCodec>,
        /// Streams of messages sent straight to a peer ([`super::DIRECT_PROTOCOL`]).
        pub direct: libp2p_stream::Behaviour,
    }
}

pub use behaviour::{Behaviour, BehaviourEvent};

/// p2p settings.
#[derive(Clone, Debug)]
pub struct P2pConfig {
    /// Address to listen on (e.g. `/ip4/127.0.0.1/tcp/0`).
    pub listen: Multiaddr,
    /// gossipsub heartbeat.
    pub heartbeat: Duration,
    /// Target mesh degree (D); D_low = ⌈3D/4⌉, D_high = D + ⌊D/2⌋ (the ratios
    /// of Ethereum's consensus layer, 8 / 6 / 12), D_lazy = D and no extra
    /// gossip factor.
    pub mesh: usize,
    /// Publish own messages to every connected peer subscribed to the topic
    /// (gossipsub's flood publishing) rather than to the mesh peers. Off by
    /// default: members connect to most of the committee for direct
    /// messages, so every publish would cost a copy per connected peer (a
    /// certificate 63 copies at N = 64) where the mesh needs D, and gossip
    /// (IHAVE to D_lazy peers outside the mesh each heartbeat) still covers
    /// a mesh that drops it.
    pub flood_publish: bool,
    /// Largest gossip message sent or accepted (default [`MAX_GOSSIP_LEN`]).
    pub max_message: usize,
    /// How long a message id stays in the seen cache: a message with the same
    /// bytes (ids are content-addressed, see [`message_id`]) is neither
    /// re-forwarded nor re-published for this long. Must exceed how long a
    /// message can still circulate (propagation plus gossipsub's IHAVE window,
    /// `history_length` = 5 heartbeats) and stay below the engine's republish
    /// period, or republishing sends nothing.
    pub seen_ttl: Duration,
    /// Take slice aggregates and member records (aggregation); a node that
    /// floods partials takes neither.
    pub aggregation: bool,
}

impl Default for P2pConfig {
    fn default() -> Self {
        Self {
            listen: "/ip4/0.0.0.0/tcp/9400".parse().expect("valid multiaddr"),
            heartbeat: Duration::from_secs(1),
            mesh: 4,
            flood_publish: false,
            max_message: MAX_GOSSIP_LEN,
            seen_ttl: Duration::from_secs(12),
            aggregation: false,
        }
    }
}

/// Why the swarm could not be built.
#[derive(Debug, thiserror::Error)]
#[error("p2p setup: {0}")]
pub struct P2pError(String);

fn setup<E: std::fmt::Display>(e: E) -> P2pError {
    P2pError(e.to_string())
}

/// Bytes of a [`message_id`].
pub const MESSAGE_ID_LEN: usize = 20;

/// The gossipsub id of a message: the first 20 bytes of
/// `SHA-256(topic hash ‖ 0x00 ‖ data)`. Content-addressed, as in Ethereum's
/// consensus layer: messages carry no libp2p author, sequence number or
/// signature (every payload authenticates itself: partials and
/// certificates by BLS, announcements and evidence against the chain), so
/// copies of one payload, from any peer or a republish, are one message.
pub fn message_id(message: &gossipsub::Message) -> gossipsub::MessageId {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(message.topic.as_str().as_bytes());
    h.update([0u8]);
    h.update(&message.data);
    gossipsub::MessageId::new(&h.finalize()[..MESSAGE_ID_LEN])
}

/// Builds the swarm, subscribes to every topic and starts listening.
///
/// Gossipsub runs unsigned (`StrictNoSign`: [`gossipsub::ValidationMode::Anonymous`])
/// with content-addressed ids ([`message_id`]): no ed25519 signature is made
/// per publish or checked per received copy (each copy was checked before the
/// seen cache could drop it), and a partial is ~110 bytes smaller. Peers are
/// still scored by the connection a message came over.
pub fn build_swarm(
    key: identity::Keypair,
    config: &P2pConfig,
) -> Result<Swarm<Behaviour>, P2pError> {
    let gossip_config = gossipsub::ConfigBuilder::default()
        .validation_mode(gossipsub::ValidationMode::Anonymous)
        .message_id_fn(message_id)
        .duplicate_cache_time(config.seen_ttl)
        .validate_messages()
        .max_transmit_size(config.max_message)
        .heartbeat_interval(config.heartbeat)
        .mesh_n(config.mesh)
        .mesh_n_low((3 * config.mesh).div_ceil(4))
        .mesh_n_high(config.mesh + config.mesh / 2)
        .mesh_outbound_min(config.mesh.div_ceil(4).min(config.mesh / 2))
        .gossip_lazy(config.mesh)
        .gossip_factor(0.0)
        .flood_publish(config.flood_publish)
        .build()
        .map_err(setup)?;
    let mut swarm = SwarmBuilder::with_existing_identity(key)
        .with_tokio()
        .with_tcp(tcp::Config::default(), noise::Config::new, yamux::Config::default)
        .map_err(setup)?
        .with_behaviour(|key| {
            let mut gossipsub = gossipsub::Behaviour::new(
                gossipsub::MessageAuthenticity::Anonymous,
                gossip_config,
            )?;
            // Rejected messages cost score on their topic (-100 x count^2,
            // decaying ~1 %/s: a half-life of about 70 s); below the graylist
            // threshold (-80) a peer's messages are ignored. Time in mesh earns
            // at most +0.6 per topic, so it never hides misbehaviour. Mesh
            // delivery-rate penalties (P3, P3b) are off: resolvd traffic is a
            // few messages per dispute, and the default threshold of 20
            // deliveries per window would graylist every honest peer.
            let mut params = gossipsub::PeerScoreParams::default();
            for topic in Topic::ALL {
                params.topics.insert(
                    topic.ident().hash(),
                    gossipsub::TopicScoreParams {
                        topic_weight: 1.0,
                        time_in_mesh_weight: 0.01,
                        time_in_mesh_quantum: Duration::from_secs(1),
                        time_in_mesh_cap: 60.0,
                        mesh_message_deliveries_weight: 0.0,
                        mesh_failure_penalty_weight: 0.0,
                        invalid_message_deliveries_weight: -100.0,
                        invalid_message_deliveries_decay: 0.99,
                        ..Default::default()
                    },
                );
            }
            // Rejected direct messages count as the application score (P5),
            // weight 1: the node sets it to -100 x count^2 with the same decay.
            params.app_specific_weight = 1.0;
            gossipsub.with_peer_score(params, gossipsub::PeerScoreThresholds::default())?;
            let identify =
                identify::Behaviour::new(identify::Config::new("/resolvd/1".into(), key.public()));
            let content = request_response::Behaviour::new(
                [(CONTENT_PROTOCOL, ProtocolSupport::Full)],
                // Few streams per connection: each inbound one may hold a
                // 16 MiB document (the service also caps what it serves).
                request_response::Config::default()
                    .with_request_timeout(Duration::from_secs(30))
                    .with_max_concurrent_streams(CONTENT_STREAMS),
            );
            let direct = libp2p_stream::Behaviour::new();
            Ok(Behaviour { gossipsub, identify, content, direct })
        })
        .map_err(setup)?
        .with_swarm_config(|c| {
            // Every substream carries one protocol, which every peer of the
            // network speaks: the dialer sends its request with the
            // protocol's name instead of waiting one round trip for the
            // listener to confirm it (multistream-select's V1Lazy, the same
            // bytes on the wire as V1). A peer that does not speak it fails
            // the request, and a direct send then goes by gossip.
            c.with_idle_connection_timeout(Duration::from_secs(60))
                .with_substream_upgrade_protocol_override(libp2p::core::upgrade::Version::V1Lazy)
        })
        .build();
    // Slice aggregates and member records exist only with aggregation.
    let aggregation_only = |t: &Topic| matches!(t, Topic::Aggregates | Topic::Members);
    for topic in Topic::ALL.into_iter().filter(|t| config.aggregation || !aggregation_only(t)) {
        swarm.behaviour_mut().gossipsub.subscribe(&topic.ident()).map_err(setup)?;
    }
    swarm.listen_on(config.listen.clone()).map_err(setup)?;
    Ok(swarm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use resolvd_proto::wire::PartialCommit;

    /// A direct frame carries its messages in order, each naming its topic by
    /// its place in `Topic::ALL`; an unknown place, a truncated or too long
    /// message, no message or too many are errors, and each message decodes
    /// as gossip does.
    #[test]
    fn direct_frames_carry_known_topics_in_order() {
        for topic in Topic::ALL {
            let d = Direct { messages: vec![(topic, vec![1, 2, 3])] };
            if DIRECT_TOPICS.contains(&topic) {
                assert_eq!(Direct::from_frame(&d.to_frame()).unwrap(), d);
            } else {
                let e = Direct::from_frame(&d.to_frame()).unwrap_err();
                assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{topic:?}");
            }
        }
        assert!(!DIRECT_TOPICS.contains(&Topic::Certificates));
        let two =
            Direct { messages: vec![(Topic::Commits, vec![7; 3]), (Topic::Verdicts, Vec::new())] };
        assert_eq!(Direct::from_frame(&two.to_frame()).unwrap(), two);
        let frame = two.to_frame();
        let first = Direct { messages: vec![(Topic::Commits, vec![7; 3])] };
        assert_eq!(Direct::from_frame(&frame[..8]).unwrap(), first, "ends at a message");
        assert!(Direct::from_frame(&frame[..frame.len() - 1]).is_err(), "a truncated length");
        assert!(Direct::from_frame(&frame[..6]).is_err(), "a truncated message");
        let mut unknown = frame.clone();
        unknown[0] = Topic::ALL.len() as u8;
        assert!(Direct::from_frame(&unknown).is_err());
        assert!(Direct::from_frame(&[]).is_err());
        let five = Direct { messages: vec![(Topic::Verdicts, vec![1]); MAX_DIRECT_MESSAGES + 1] };
        assert!(Direct::from_frame(&five.to_frame()).is_err());
        let mut long = vec![0u8];
        long.extend_from_slice(&(MAX_GOSSIP_LEN as u32 + 1).to_be_bytes());
        long.resize(long.len() + MAX_GOSSIP_LEN + 1, 0);
        assert!(Direct::from_frame(&long).is_err());
        // Every refusal is `InvalidData`: the node penalises its sender.
        for bad in [&frame[..frame.len() - 1], &frame[..6], &unknown[..], &[][..], &long[..]] {
            assert_eq!(Direct::from_frame(bad).unwrap_err().kind(), io::ErrorKind::InvalidData);
        }
        let garbage = Direct { messages: vec![(Topic::Verdicts, b"\xffgarbage".to_vec())] };
        let decoded: Vec<_> = garbage.decode().collect();
        assert!(matches!(decoded[..], [Err(GossipError::Malformed(Topic::Verdicts, _))]));
    }

    /// A direct stream carries frames one after another and ends cleanly
    /// only between frames; a frame longer than the largest one is refused
    /// from its length alone, and a malformed one as `InvalidData`.
    #[tokio::test]
    async fn direct_streams_carry_frames_until_a_clean_end() {
        let one = Direct { messages: vec![(Topic::Verdicts, vec![1, 2, 3])] };
        let two =
            Direct { messages: vec![(Topic::Commits, vec![7; 3]), (Topic::Verdicts, vec![])] };
        let mut bytes = Vec::new();
        write_direct(&mut bytes, &one).await.unwrap();
        write_direct(&mut bytes, &two).await.unwrap();
        let mut io = futures::io::Cursor::new(bytes.clone());
        assert_eq!(read_direct(&mut io).await.unwrap(), Some(one));
        assert_eq!(read_direct(&mut io).await.unwrap(), Some(two));
        assert_eq!(read_direct(&mut io).await.unwrap(), None, "a clean end");
        let mut cut = futures::io::Cursor::new(bytes[..bytes.len() - 1].to_vec());
        read_direct(&mut cut).await.unwrap();
        let e = read_direct(&mut cut).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "an end inside a frame");
        let mut cut = futures::io::Cursor::new(bytes[..2].to_vec());
        assert_eq!(read_direct(&mut cut).await.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        let huge = (MAX_DIRECT_FRAME as u32 + 1).to_be_bytes().to_vec();
        let e = read_direct(&mut futures::io::Cursor::new(huge)).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "too long");
        let mut unknown = 6u32.to_be_bytes().to_vec();
        unknown.extend_from_slice(&[Topic::ALL.len() as u8, 0, 0, 0, 1, 0]);
        let e = read_direct(&mut futures::io::Cursor::new(unknown)).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "an unknown topic");
    }

    /// A frame's buffer grows with the bytes that arrive and ends at exactly
    /// the frame's length.
    #[tokio::test]
    async fn a_frame_buffer_ends_at_its_length() {
        for len in
            [0, 1, READ_CHUNK - 1, READ_CHUNK, READ_CHUNK + 1, 3 * READ_CHUNK + 5, MAX_DIRECT_FRAME]
        {
            let bytes: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut io = futures::io::Cursor::new(bytes.clone());
            let prefix = (len as u32).to_be_bytes();
            let body = read_body(&mut io, prefix, MAX_DIRECT_FRAME).await.unwrap();
            assert_eq!(body, bytes);
            assert_eq!(body.capacity(), len, "capacity of a {len}-byte frame");
        }
    }

    /// A reader with nothing more to give, and no end: a peer that stopped
    /// sending with its stream open.
    struct Stalled;

    impl futures::AsyncRead for Stalled {
        fn poll_read(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            _: &mut [u8],
        ) -> std::task::Poll<io::Result<usize>> {
            std::task::Poll::Pending
        }
    }

    /// A stream may idle between frames but not inside one: a frame whose
    /// rest does not come in time is `TimedOut`, whether it stalls in its
    /// length or in its body; one that ends early says how much came.
    #[tokio::test]
    async fn a_direct_frame_stalled_after_its_first_byte_times_out() {
        let stall = Duration::from_millis(50);
        let one = Direct { messages: vec![(Topic::Verdicts, vec![1, 2, 3])] };
        let mut bytes = Vec::new();
        write_direct(&mut bytes, &one).await.unwrap();
        let mut whole = futures::io::Cursor::new(bytes.clone()).chain(Stalled);
        assert_eq!(read_direct_within(&mut whole, stall).await.unwrap(), Some(one));
        let idle = tokio::time::timeout(stall * 4, read_direct_within(&mut whole, stall)).await;
        assert!(idle.is_err(), "between frames the reader waits");
        for cut in [1, 3, bytes.len() - 1] {
            let mut io = futures::io::Cursor::new(bytes[..cut].to_vec()).chain(Stalled);
            let read = tokio::time::timeout(stall * 10, read_direct_within(&mut io, stall)).await;
            let e = read.expect("a stalled frame ends the read").unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::TimedOut, "stalled after {cut} bytes");
        }
        // The largest length announced, then 100 bytes and the end.
        let mut big = (MAX_DIRECT_FRAME as u32).to_be_bytes().to_vec();
        big.extend_from_slice(&[0; 100]);
        let e = read_direct_within(&mut futures::io::Cursor::new(big), stall).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(e.to_string(), format!("frame ended after 100 of {MAX_DIRECT_FRAME} bytes"));
    }

    /// Byte-different encodings of one message are not accepted as gossip
    /// (each would be a new gossipsub message id: accepted, forwarded and
    /// scored for its sender while the original waits for its batch).
    #[test]
    fn gossip_accepts_only_the_canonical_encoding() {
        let c = PartialCommit {
            deal_id: alloy_primitives::B256::repeat_byte(1),
            epoch: 3,
            signer_index: 2,
            commit: alloy_primitives::B256::repeat_byte(4),
            signature: [5; 96],
        };
        let (topic, bytes) = Gossip::Commit(c).encode();
        assert_eq!(Gossip::decode(topic, &bytes).unwrap(), Gossip::Commit(c));
        for variant in (0..1_000u32).map(|n| {
            // Unknown fields (numbers 16.., varint values) appended.
            let mut v = bytes.clone();
            v.extend_from_slice(&[0x80, 0x01 + (n % 100) as u8, (n / 100) as u8]);
            v
        }) {
            assert_eq!(PartialCommit::decode_wire(&variant).unwrap(), c);
            assert!(matches!(
                Gossip::decode(topic, &variant),
                Err(WireError::NonCanonical { message: "PartialCommit" })
            ));
        }
    }
}
