//! The node's cost per message on its transport (TCP on 127.0.0.1, noise,
//! yamux, and gossipsub or a direct stream), sender and receiver together,
//! in one process and with nothing else running: the two swarms are the
//! node's own (`build_swarm`), each driven by a task of its own as the node
//! drives its swarm, and the direct frames are read with the node's own
//! `read_direct` on a task of their own.
//!
//! The figure is the process's CPU time per message
//! (`CLOCK_PROCESS_CPUTIME_ID`), not wall time. Each message is a partial (a signed verdict's
//! canonical bytes), sent only once the one before it has arrived: dispute
//! traffic is a few messages per peer, so each one wakes its sender and its
//! receiver, as here.

#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{criterion_group, criterion_main, Criterion};
use futures::{AsyncWriteExt, StreamExt};
use libp2p::{gossipsub, identity::Keypair, swarm::SwarmEvent, Multiaddr, Swarm};
use resolvd_node::p2p::{
    build_swarm, read_direct, write_direct, Behaviour, BehaviourEvent, Direct, Gossip, P2pConfig,
    Topic, TopicExt, DIRECT_PROTOCOL,
};
use resolvd_proto::{wire::SignedVerdict, ReexecVerdict, VerdictCommitment};
use std::time::Duration;
use tokio::sync::mpsc;

/// The process's CPU time so far (every thread's, those ended too).
fn cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// A partial; `n` makes its bytes, and so its gossip message id, unique.
fn partial(n: u64) -> Gossip {
    let mut deal_id = [1u8; 32];
    deal_id[..8].copy_from_slice(&n.to_be_bytes());
    Gossip::Verdict(SignedVerdict {
        commitment: VerdictCommitment {
            deal_id: deal_id.into(),
            spec_hash: [2; 32].into(),
            delivery_hash: [3; 32].into(),
            prestate_anchor_hash: [4; 32].into(),
            prestate_root: [5; 32].into(),
            backend_id: [6; 32].into(),
            backend_version_hash: [7; 32].into(),
            outcome: ReexecVerdict::Reproduced,
            result_hash: [8; 32].into(),
            trace_hash: [9; 32].into(),
        },
        epoch: 1,
        signer_index: 3,
        signature: [0xab; 96],
    })
}

fn config() -> P2pConfig {
    P2pConfig {
        listen: "/ip4/127.0.0.1/tcp/0".parse().unwrap(),
        // The operator default (its work, a few µs per heartbeat with one
        // peer, is in the figures, spread over the messages).
        heartbeat: Duration::from_millis(700),
        mesh: 4,
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

/// Two connected swarms: the sender's own messages to publish go in through
/// the returned channel; the receiver reports each gossip message it took
/// and each direct frame it read on the other.
struct Pair {
    publish: mpsc::UnboundedSender<Vec<u8>>,
    arrived: mpsc::UnboundedReceiver<()>,
    control: libp2p_stream::Control,
    receiver: libp2p::PeerId,
}

async fn pair() -> Pair {
    let mut a = build_swarm(Keypair::generate_ed25519(), &config()).unwrap();
    let mut b = build_swarm(Keypair::generate_ed25519(), &config()).unwrap();
    let receiver = *b.local_peer_id();
    let b_addr = listen_addr(&mut b).await;
    a.dial(b_addr).unwrap();
    let (arrived_tx, arrived) = mpsc::unbounded_channel();
    let mut incoming = b.behaviour().direct.new_control().accept(DIRECT_PROTOCOL).unwrap();
    let frames = arrived_tx.clone();
    tokio::spawn(async move {
        while let Some((_, mut stream)) = incoming.next().await {
            let frames = frames.clone();
            tokio::spawn(async move {
                stream.write_all(&[resolvd_node::p2p::DIRECT_READY]).await.unwrap();
                stream.flush().await.unwrap();
                while let Ok(Some(direct)) = read_direct(&mut stream).await {
                    for m in direct.decode() {
                        m.expect("a partial");
                    }
                    let _ = frames.send(());
                }
            });
        }
    });
    tokio::spawn(async move {
        loop {
            if let SwarmEvent::Behaviour(BehaviourEvent::Gossipsub(gossipsub::Event::Message {
                propagation_source,
                message_id,
                message,
            })) = b.select_next_some().await
            {
                Gossip::decode(Topic::Verdicts, &message.data).expect("a partial");
                b.behaviour_mut().gossipsub.report_message_validation_result(
                    &message_id,
                    &propagation_source,
                    gossipsub::MessageAcceptance::Accept,
                );
                let _ = arrived_tx.send(());
            }
        }
    });
    let control = a.behaviour().direct.new_control();
    let (publish, mut to_publish) = mpsc::unbounded_channel::<Vec<u8>>();
    let (subscribed_tx, mut subscribed) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                event = a.select_next_some() => {
                    if let SwarmEvent::Behaviour(BehaviourEvent::Gossipsub(
                        gossipsub::Event::Subscribed { topic, .. },
                    )) = event
                    {
                        if topic == Topic::Verdicts.ident().hash() {
                            let _ = subscribed_tx.send(());
                        }
                    }
                }
                Some(bytes) = to_publish.recv() => {
                    a.behaviour_mut().gossipsub.publish(Topic::Verdicts.ident(), bytes).unwrap();
                }
            }
        }
    });
    subscribed.recv().await.expect("the receiver subscribed");
    Pair { publish, arrived, control, receiver }
}

fn transport(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let mut p = rt.block_on(pair());
    let mut stream = rt.block_on(p.control.open_stream(p.receiver, DIRECT_PROTOCOL)).unwrap();
    let mut n = 0u64;
    let mut g = c.benchmark_group("transport_cpu");
    g.measurement_time(Duration::from_secs(10));
    for (name, direct) in [("direct_frame", true), ("gossip_message", false)] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = cpu_time();
                    for _ in 0..iters {
                        n += 1;
                        if direct {
                            write_direct(&mut stream, &Direct::of(&[partial(n)])).await.unwrap();
                        } else {
                            p.publish.send(partial(n).encode().1).unwrap();
                        }
                        p.arrived.recv().await.unwrap();
                    }
                    cpu_time() - start
                })
            });
        });
    }
    g.finish();
}

criterion_group!(benches, transport);
criterion_main!(benches);
