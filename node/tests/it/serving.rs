//! Content serving over libp2p against peers that never read their answers:
//! a real `ContentService` behind a real swarm on 127.0.0.1, real RocksDB.

use alloy_primitives::B256;
use futures::{AsyncWriteExt, StreamExt};
use libp2p::{
    identity::Keypair,
    noise,
    request_response::{self, ProtocolSupport},
    swarm::SwarmEvent,
    tcp, yamux, Multiaddr, StreamProtocol, Swarm, SwarmBuilder,
};
use resolvd_node::{
    content::{ContentService, Served, SERVE_DEADLINE},
    metrics::Metrics,
    p2p::{build_swarm, BehaviourEvent, CONTENT_PROTOCOL},
    store::Store,
};
use resolvd_proto::wire::{ContentRequest, ContentResponse, WireMessage};
use std::{io, sync::Arc, time::Duration};

/// Sends content requests as a node does and never reads an answer: the
/// server's write stalls once the stream's flow-control window is full.
#[derive(Clone, Copy, Debug, Default)]
struct NeverReads;

impl request_response::Codec for NeverReads {
    type Protocol = StreamProtocol;
    type Request = ContentRequest;
    type Response = ContentResponse;

    async fn read_request<T>(&mut self, _: &StreamProtocol, _: &mut T) -> io::Result<ContentRequest>
    where
        T: futures::AsyncRead + Unpin + Send,
    {
        Err(io::ErrorKind::Unsupported.into())
    }

    async fn read_response<T>(
        &mut self,
        _: &StreamProtocol,
        _: &mut T,
    ) -> io::Result<ContentResponse>
    where
        T: futures::AsyncRead + Unpin + Send,
    {
        futures::future::pending().await
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
        let bytes = req.encode_wire();
        io.write_all(&u32::try_from(bytes.len()).unwrap().to_be_bytes()).await?;
        io.write_all(&bytes).await?;
        io.close().await
    }

    async fn write_response<T>(
        &mut self,
        _: &StreamProtocol,
        _: &mut T,
        _: ContentResponse,
    ) -> io::Result<()>
    where
        T: futures::AsyncWrite + Unpin + Send,
    {
        Err(io::ErrorKind::Unsupported.into())
    }
}

fn never_reads() -> Swarm<request_response::Behaviour<NeverReads>> {
    SwarmBuilder::with_new_identity()
        .with_tokio()
        .with_tcp(tcp::Config::default(), noise::Config::new, yamux::Config::default)
        .unwrap()
        .with_behaviour(|_| {
            request_response::Behaviour::with_codec(
                NeverReads,
                [(CONTENT_PROTOCOL, ProtocolSupport::Outbound)],
                request_response::Config::default().with_request_timeout(Duration::from_secs(120)),
            )
        })
        .unwrap()
        .with_swarm_config(|c| c.with_idle_connection_timeout(Duration::from_secs(120)))
        .build()
}

/// A node's content side: a swarm and a `ContentService` over a store
/// holding `docs` (type "spec"), driven as the node's event loop drives them.
async fn content_server(docs: Vec<(B256, Vec<u8>)>) -> Multiaddr {
    let mut swarm = build_swarm(
        Keypair::generate_ed25519(),
        &crate::p2p::loopback(2, Duration::from_millis(200)),
    )
    .unwrap();
    let addr = loop {
        if let SwarmEvent::NewListenAddr { address, .. } = swarm.select_next_some().await {
            break address;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    for (hash, bytes) in &docs {
        store.put_content_expecting("spec", bytes, hash).unwrap();
    }
    let mut service = ContentService::new(Arc::new(Metrics::default()));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Served>();
    let served = move |s| {
        let _ = tx.send(s);
    };
    tokio::spawn(async move {
        let _dir = dir;
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        loop {
            tokio::select! {
                ev = swarm.select_next_some() => match ev {
                    SwarmEvent::Behaviour(BehaviourEvent::Content(e)) => {
                        service.on_event(&mut swarm, &store, &served, e);
                    }
                    SwarmEvent::ConnectionEstablished { peer_id, connection_id, endpoint, .. } => {
                        service.admit(&mut swarm, peer_id, connection_id, &endpoint);
                    }
                    SwarmEvent::ConnectionClosed { connection_id, .. } => service.closed(connection_id),
                    _ => {}
                },
                Some(s) = rx.recv() => service.respond(&mut swarm, s),
                _ = tick.tick() => service.on_tick(&mut swarm, std::time::Instant::now()),
            }
        }
    });
    addr
}

/// Four peers ask for a 16 MiB document again and again and never read the
/// answers; an honest peer asks for a small document every 250 ms. Before:
/// the four held all 8 serving slots (2 each) for the 30 s stream timeout and
/// the honest peer got "not found" every time. Now a peer gets a second slot
/// only while half of them are free, so every honest request is served; a
/// response not read within the deadline (10 s) closes that connection, and
/// each reconnection is charged the slot time its peer already used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_that_never_read_cannot_hold_every_content_slot() {
    let big: Vec<u8> = (0..resolvd_proto::codec::MAX_DOCUMENT_LEN - 1024)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0])
        .collect();
    let big_hash = resolvd_proto::content_hash("spec", &big);
    let small = b"a small document".to_vec();
    let small_hash = resolvd_proto::content_hash("spec", &small);
    let addr = content_server(vec![(big_hash, big), (small_hash, small)]).await;

    // The slow readers, each in its own task: on every connection, three
    // requests for the big document; when the server closes it, dial again.
    let cuts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut slow = Vec::new();
    for _ in 0..4 {
        let (addr, cuts) = (addr.clone(), cuts.clone());
        slow.push(tokio::spawn(async move {
            let mut swarm = never_reads();
            swarm.dial(addr.clone()).unwrap();
            loop {
                match swarm.select_next_some().await {
                    SwarmEvent::ConnectionEstablished { peer_id, .. } => {
                        for _ in 0..3 {
                            let request = ContentRequest { hash: big_hash, type_tag: "spec" };
                            swarm.behaviour_mut().send_request(&peer_id, request);
                        }
                    }
                    SwarmEvent::ConnectionClosed { .. } => {
                        cuts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let _ = swarm.dial(addr.clone());
                    }
                    _ => {}
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;

    let mut honest = build_swarm(
        Keypair::generate_ed25519(),
        &crate::p2p::loopback(2, Duration::from_millis(200)),
    )
    .unwrap();
    honest.dial(addr).unwrap();
    let mut server = None;
    let (mut served, mut refused) = (0usize, 0usize);
    let mut asked = 0usize;
    let mut every = tokio::time::interval(Duration::from_millis(250));
    // Past the deadline, so the reconnections are exercised too.
    let end = tokio::time::Instant::now() + SERVE_DEADLINE + Duration::from_secs(4);
    loop {
        tokio::select! {
            _ = every.tick() => {
                if tokio::time::Instant::now() >= end {
                    break;
                }
                if let Some(peer) = server {
                    let request = ContentRequest { hash: small_hash, type_tag: "spec" };
                    honest.behaviour_mut().content.send_request(&peer, request);
                    asked += 1;
                }
            }
            ev = honest.select_next_some() => match ev {
                SwarmEvent::ConnectionEstablished { peer_id, .. } => server = Some(peer_id),
                SwarmEvent::Behaviour(BehaviourEvent::Content(request_response::Event::Message {
                    message: request_response::Message::Response { response, .. }, ..
                })) => {
                    if response.result.is_ok() { served += 1 } else { refused += 1 }
                }
                SwarmEvent::Behaviour(BehaviourEvent::Content(
                    request_response::Event::OutboundFailure { error, .. },
                )) => panic!("an honest request failed: {error}"),
                _ => {}
            },
        }
    }
    let cuts = cuts.load(std::sync::atomic::Ordering::Relaxed);
    for task in slow {
        task.abort();
    }
    #[allow(clippy::disallowed_macros)]
    {
        eprintln!(
            "4 peers that never read: honest small requests {served} served, {refused} refused of \
             {asked}; slow readers' connections closed {cuts} times"
        );
    }
    assert!(asked >= 40, "only {asked} honest requests");
    assert_eq!(refused, 0, "honest requests refused while slow readers held slots");
    assert!(served + 2 >= asked, "{served} of {asked} honest requests answered");
    assert!(cuts >= 4, "the slow readers' connections were not closed ({cuts})");
}
