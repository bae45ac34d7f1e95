//! Two real libp2p nodes on 127.0.0.1: gossip validation and peer scoring,
//! content fetch by hash.

use alloy_primitives::{Bytes, B256};
use futures::StreamExt;
use libp2p::{
    gossipsub::{self, MessageAcceptance},
    identity::Keypair,
    request_response,
    swarm::SwarmEvent,
    Multiaddr, Swarm,
};
use resolvd_consensus::{PublicKey, SecretKey, Signature};
use resolvd_node::p2p::{
    build_swarm, decode_gossip, verify_content, Behaviour, BehaviourEvent, Gossip, P2pConfig,
    Topic, TopicExt,
};
use resolvd_proto::{
    content_hash,
    wire::{ContentRequest, ContentResponse, ContentUnavailable, SignedVerdict},
    ReexecVerdict, VerdictCommitment,
};
use std::time::Duration;

/// Accepts partials that verify under the one known key; rejects the rest.
fn one_key(key: &PublicKey, message: &Gossip) -> MessageAcceptance {
    let Gossip::Verdict(v) = message else { return MessageAcceptance::Ignore };
    let digest = B256::repeat_byte(0xd1); // stands in for the EIP-712 digest here
    match Signature::from_compressed(&v.signature).and_then(|s| s.verify(key, &digest)) {
        Ok(()) => MessageAcceptance::Accept,
        Err(_) => MessageAcceptance::Reject,
    }
}

/// A partial over a fixed made-up commitment (deal 0x0101…), epoch 1, signer 0.
pub(crate) fn verdict(signature: [u8; 96]) -> SignedVerdict {
    SignedVerdict {
        commitment: VerdictCommitment {
            deal_id: B256::repeat_byte(1),
            spec_hash: B256::repeat_byte(2),
            delivery_hash: B256::repeat_byte(3),
            prestate_anchor_hash: B256::repeat_byte(4),
            prestate_root: B256::repeat_byte(5),
            backend_id: B256::repeat_byte(6),
            backend_version_hash: B256::repeat_byte(7),
            outcome: ReexecVerdict::Reproduced,
            result_hash: B256::repeat_byte(8),
            trace_hash: B256::repeat_byte(9),
        },
        epoch: 1,
        signer_index: 0,
        signature,
    }
}

fn config() -> P2pConfig {
    loopback(1, Duration::from_millis(100))
}

/// A p2p config listening on a free 127.0.0.1 port.
pub(crate) fn loopback(mesh: usize, heartbeat: Duration) -> P2pConfig {
    P2pConfig {
        listen: "/ip4/127.0.0.1/tcp/0".parse().unwrap(),
        heartbeat,
        mesh,
        ..P2pConfig::default()
    }
}

async fn listen_addr(swarm: &mut Swarm<Behaviour>) -> Multiaddr {
    loop {
        if let SwarmEvent::NewListenAddr { address, .. } = swarm.select_next_some().await {
            return address;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn gossip_validation_scoring_and_content_fetch() {
    let sk = SecretKey::from_seed(&[3u8; 32]).unwrap();
    let good = verdict(sk.sign(&B256::repeat_byte(0xd1)).compress());
    let forged = verdict(sk.sign(&B256::repeat_byte(0xee)).compress());
    let spec_bytes = b"canonical spec bytes".to_vec();
    let spec_hash = content_hash("spec", &spec_bytes);

    let mut a = build_swarm(Keypair::generate_ed25519(), &config()).unwrap();
    let mut b = build_swarm(Keypair::generate_ed25519(), &config()).unwrap();
    let a_id = *a.local_peer_id();
    let a_addr = listen_addr(&mut a).await;
    b.dial(a_addr).unwrap();

    let key = sk.public_key();
    let mut accepted = Vec::new();
    let mut rejected = 0;
    let mut published = false;
    let mut responses = Vec::new();
    let mut requested = false;
    let deadline = tokio::time::sleep(Duration::from_secs(30));
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            _ = &mut deadline => panic!("timed out: accepted {accepted:?}, rejected {rejected}, responses {responses:?}"),
            ev = a.select_next_some() => match ev {
                SwarmEvent::Behaviour(BehaviourEvent::Gossipsub(gossipsub::Event::Subscribed { topic, .. }))
                    if !published && Topic::from_hash(&topic) == Some(Topic::Verdicts) =>
                {
                    // B is subscribed: publish a good partial, then a garbage message and a
                    // forged partial (after which A is graylisted at B, so order matters).
                    let gs = &mut a.behaviour_mut().gossipsub;
                    gs.publish(Topic::Verdicts.ident(), Gossip::Verdict(good.clone()).encode().1).unwrap();
                    gs.publish(Topic::Verdicts.ident(), b"\xffgarbage".to_vec()).unwrap();
                    gs.publish(Topic::Verdicts.ident(), Gossip::Verdict(forged.clone()).encode().1).unwrap();
                    published = true;
                }
                SwarmEvent::Behaviour(BehaviourEvent::Content(request_response::Event::Message {
                    message: request_response::Message::Request { request, channel, .. }, ..
                })) => {
                    let result = if request.hash == spec_hash {
                        Ok(Bytes::from(spec_bytes.clone()))
                    } else if request.hash == B256::repeat_byte(0xbb) {
                        // A lying peer: bytes that do not hash to the request.
                        Ok(Bytes::from_static(b"not what you asked for"))
                    } else {
                        Err(ContentUnavailable::NotFound)
                    };
                    let _ = a.behaviour_mut().content.send_response(channel, ContentResponse { hash: request.hash, result });
                }
                _ => {}
            },
            ev = b.select_next_some() => match ev {
                SwarmEvent::Behaviour(BehaviourEvent::Gossipsub(gossipsub::Event::Message {
                    propagation_source, message_id, message,
                })) => {
                    let (acceptance, decoded) = match decode_gossip(&message) {
                        Ok((_, g)) => (one_key(&key, &g), Some(g)),
                        Err(_) => (MessageAcceptance::Reject, None),
                    };
                    b.behaviour_mut().gossipsub.report_message_validation_result(
                        &message_id, &propagation_source, acceptance);
                    match (acceptance, decoded) {
                        (MessageAcceptance::Accept, Some(g)) => accepted.push(g),
                        _ => rejected += 1,
                    }
                    // The forged partial may arrive after A is graylisted (then it is dropped
                    // unseen), so one rejection is enough to move on.
                    if accepted.len() == 1 && rejected >= 1 && !requested {
                        let c = &mut b.behaviour_mut().content;
                        for hash in [spec_hash, B256::repeat_byte(0xaa), B256::repeat_byte(0xbb)] {
                            c.send_request(&a_id, ContentRequest { hash, type_tag: "spec" });
                        }
                        requested = true;
                    }
                }
                SwarmEvent::Behaviour(BehaviourEvent::Content(request_response::Event::Message {
                    message: request_response::Message::Response { response, .. }, ..
                })) => {
                    responses.push(response);
                    if responses.len() == 3 {
                        break;
                    }
                }
                _ => {}
            },
        }
    }
    assert_eq!(accepted, vec![Gossip::Verdict(good)]);
    assert!((1..=2).contains(&rejected), "rejected {rejected}");
    // The check refuses the forged partial (whether or not it arrived).
    assert_eq!(one_key(&key, &Gossip::Verdict(forged)), MessageAcceptance::Reject);
    // Rejected messages lowered A's score at B.
    let score = b.behaviour().gossipsub.peer_score(&a_id).unwrap();
    assert!(score < 0.0, "score after rejections: {score}");

    responses.sort_by_key(|r| r.hash);
    let request = |hash| ContentRequest { hash, type_tag: "spec" };
    for r in &responses {
        match &r.result {
            Ok(bytes) if r.hash == spec_hash => assert!(verify_content(&request(r.hash), bytes)),
            Ok(bytes) => assert!(!verify_content(&request(r.hash), bytes), "a lie must not verify"),
            Err(e) => {
                assert_eq!((*e, r.hash), (ContentUnavailable::NotFound, B256::repeat_byte(0xaa)))
            }
        }
    }
}

/// A peer that answers every content request: with `doc`'s bytes if it holds
/// them, else "not found" (a Sybil). Counts the requests it gets.
/// Requests received, per document hash (a late answer to an earlier
/// document's round is still counted for that document).
type Asks = std::sync::Arc<std::sync::Mutex<std::collections::HashMap<B256, usize>>>;

fn serve_content(mut swarm: Swarm<Behaviour>, docs: Vec<(B256, Vec<u8>)>, asked: Asks) {
    tokio::spawn(async move {
        loop {
            if let SwarmEvent::Behaviour(BehaviourEvent::Content(
                request_response::Event::Message {
                    message: request_response::Message::Request { request, channel, .. },
                    ..
                },
            )) = swarm.select_next_some().await
            {
                *asked.lock().unwrap().entry(request.hash).or_default() += 1;
                let result = docs
                    .iter()
                    .find(|(h, _)| *h == request.hash)
                    .map(|(_, b)| Bytes::from(b.clone()))
                    .ok_or(ContentUnavailable::NotFound);
                let response = ContentResponse { hash: request.hash, result };
                let _ = swarm.behaviour_mut().content.send_response(channel, response);
            }
        }
    });
}

/// Twelve Sybils answering "not found" and one honest peer: a fetch asks
/// random peers, never the same one twice in a round, and escalates to the
/// peers not asked yet, so the honest one is always reached (before: the
/// first 8 peers in the swarm's fixed order were asked, and only they).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sybils_answering_not_found_cannot_eclipse_a_content_fetch() {
    use resolvd_node::{content::ContentService, metrics::Metrics, store::Store};
    use std::sync::Arc;
    let docs: Vec<(B256, Vec<u8>)> = (0..5u8)
        .map(|n| {
            let bytes = vec![n; 100];
            (content_hash("spec", &bytes), bytes)
        })
        .collect();
    let mut requester = build_swarm(Keypair::generate_ed25519(), &config()).unwrap();
    let mut addrs = Vec::new();
    let sybil_asks: Asks = Arc::default();
    let honest_asks: Asks = Arc::default();
    for i in 0..13 {
        let mut s = build_swarm(Keypair::generate_ed25519(), &config()).unwrap();
        addrs.push(listen_addr(&mut s).await);
        if i == 6 {
            serve_content(s, docs.clone(), honest_asks.clone());
        } else {
            serve_content(s, Vec::new(), sybil_asks.clone());
        }
    }
    for a in &addrs {
        requester.dial(a.clone()).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    let mut service = ContentService::new(Arc::new(Metrics::default()));
    let no_inbound = |_| {};
    let mut connected = 0;
    let mut next = 0;
    let deadline = tokio::time::sleep(Duration::from_secs(60));
    tokio::pin!(deadline);
    while next < docs.len() {
        tokio::select! {
            _ = &mut deadline => panic!(
                "document {next} never fetched: {} Sybil and {} honest requests",
                sybil_asks.lock().unwrap().get(&docs[next].0).copied().unwrap_or(0),
                honest_asks.lock().unwrap().get(&docs[next].0).copied().unwrap_or(0)
            ),
            ev = requester.select_next_some() => match ev {
                SwarmEvent::ConnectionEstablished { .. } => {
                    connected += 1;
                    if connected == addrs.len() {
                        service.fetch(&mut requester, docs[0].0, "spec");
                    }
                }
                SwarmEvent::Behaviour(BehaviourEvent::Content(event)) => {
                    service.on_event(&mut requester, &store, &no_inbound, event);
                    if store.get_content(&docs[next].0).unwrap().is_some() {
                        // Each peer was asked at most once for this document.
                        let count = |a: &Asks| a.lock().unwrap().get(&docs[next].0).copied().unwrap_or(0);
                        let asked = count(&sybil_asks) + count(&honest_asks);
                        assert!(asked <= addrs.len(), "document {next}: {asked} requests");
                        next += 1;
                        if next < docs.len() {
                            service.fetch(&mut requester, docs[next].0, "spec");
                        }
                    } else {
                        // A round ended with "not found" everywhere: the next one.
                        service.fetch(&mut requester, docs[next].0, "spec");
                    }
                }
                _ => {}
            },
        }
    }
}
