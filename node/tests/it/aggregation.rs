//! Aggregation in the daemon: members find each other through signed member
//! records and send partials straight to a dispute's aggregators; flooding
//! still works; a peer that sends garbage directly is penalised like one
//! that gossips it.

use crate::network::{launch, metric, metric_sum, RELEASED, SETTLE};
use futures::{AsyncWriteExt, StreamExt};
use libp2p::swarm::SwarmEvent;
use resolvd_devnet::DealKind;
use resolvd_node::{
    config::DisseminationMode,
    p2p::{
        build_swarm, write_direct, BehaviourEvent, Direct, Gossip, Topic, TopicExt, DIRECT_PROTOCOL,
    },
};
use resolvd_proto::wire::{MemberRecord, WireMessage};
use std::time::Duration;

/// Settles one honest dispute in `mode` and returns, summed over the nodes:
/// direct messages sent, sent on gossip instead, and partials received on
/// gossip; and each node's count of member records.
async fn settle_in(mode: DisseminationMode) -> (f64, f64, f64, Vec<f64>) {
    let mut net = launch(|o| o.dissemination = Some(mode)).await;
    let content = net.0.deal_content(DealKind::Honest).await.unwrap();
    let open = net.0.open_dispute(&content, &[0]).await.unwrap();
    let deal = net.0.wait_settled(open.deal_id, SETTLE).await.unwrap();
    assert_eq!(deal.settlement, RELEASED);
    let sent = metric_sum(&net.0, "resolvd_direct_messages_total", "result=\"sent\"").await;
    let fallback = metric_sum(&net.0, "resolvd_direct_messages_total", "result=\"fallback\"").await;
    let gossiped = metric_sum(&net.0, "resolvd_gossip_messages_total", "topic=\"verdicts\"").await;
    let mut records = Vec::new();
    for n in &net.0.nodes {
        records.push(metric(&n.metrics().await.unwrap(), "resolvd_member_records", ""));
    }
    (sent, fallback, gossiped, records)
}

/// With aggregation (the default), every member holds the record of every
/// other one, and partials go straight to the aggregators (in a committee
/// of four, every member), none on gossip for want of a record. (A member
/// with no certificate 1 s after sending escalates, which past the whole
/// committee is gossip: partials may also arrive on gossip here.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregation_sends_partials_straight_to_members_found_by_their_records() {
    let (sent, fallback, gossiped, records) = settle_in(DisseminationMode::Aggregators).await;
    assert_eq!(records, vec![3.0; 4], "member records held per node");
    // Four partials, each to the three other members.
    assert!(sent >= 12.0, "direct messages sent: {sent}");
    assert_eq!(fallback, 0.0, "direct messages sent on gossip instead");
    #[allow(clippy::disallowed_macros)]
    {
        eprintln!(
            "aggregation: {sent} direct messages, {gossiped} partials on gossip (escalation)"
        );
    }
}

/// Flooding is still there: partials are gossiped, nothing is sent
/// directly, and no member record is published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flooding_still_gossips_every_partial() {
    let (sent, _, gossiped, records) = settle_in(DisseminationMode::Flood).await;
    assert_eq!(sent, 0.0, "direct messages sent");
    assert!(gossiped >= 4.0, "partials received on gossip: {gossiped}");
    assert_eq!(records, vec![0.0; 4], "member records held per node");
}

/// A hostile peer sends node 0 a member record for node 1's key that node 1
/// did not sign, then partials: the record is rejected (the peer is
/// penalised and graylisted), what follows is dropped unread, and node 0
/// keeps node 1's real record and still settles a dispute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_member_record_is_rejected_and_its_sender_graylisted() {
    let mut net = launch(|o| o.dissemination = Some(DisseminationMode::Aggregators)).await;
    let status = net.0.nodes[0].get("/status").await.unwrap();
    let target: libp2p::PeerId = status["peer_id"].as_str().unwrap().parse().unwrap();
    let key1 = net.0.nodes[1].get("/status").await.unwrap()["bls_key"].as_str().unwrap().to_owned();
    let key1: [u8; 48] = alloy_primitives::hex::decode(key1).unwrap().try_into().unwrap();

    let mut config = crate::p2p::loopback(2, Duration::from_millis(200));
    config.aggregation = true;
    let hostile = libp2p::identity::Keypair::generate_ed25519();
    let mut swarm = build_swarm(hostile, &config).unwrap();
    // Node 0 sends its own record to a peer when it connects: dial once it
    // has one (it publishes it as the others do theirs).
    for _ in 0..150 {
        let m = net.0.nodes[0].metrics().await.unwrap();
        if metric(&m, "resolvd_member_records", "") >= 3.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    swarm.dial(net.0.nodes[0].p2p.parse::<libp2p::Multiaddr>().unwrap()).unwrap();
    let forger = resolvd_consensus::SecretKey::from_seed(&[0x66; 32]).unwrap();
    let mut forged = MemberRecord {
        public_key: key1,
        seq: u64::MAX,
        peer_id: swarm.local_peer_id().to_bytes(),
        addrs: Vec::new(),
        signature: [0; 96],
    };
    forged.signature = forger.sign_record(&forged.signing_message()).compress();
    let partial =
        crate::p2p::verdict(forger.sign(&alloy_primitives::B256::repeat_byte(9)).compress());
    let forged = Direct::of(&[Gossip::Member(Box::new(forged))]);
    let rest = [
        Direct { messages: vec![(Topic::Verdicts, partial.encode_wire())] },
        Direct { messages: vec![(Topic::Verdicts, b"\xffgarbage".to_vec())] },
    ];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let event = tokio::time::timeout_at(deadline, swarm.select_next_some()).await.unwrap();
        if matches!(event, SwarmEvent::ConnectionEstablished { peer_id, .. } if peer_id == target) {
            break;
        }
    }
    // A record of a key is taken at most every 2 s, and node 1 re-publishes
    // its own soon after start: until the forgery is judged, send it again.
    // Direct frames are not answered: the verdict is awaited in the counters.
    let counter = |text: &str, result: &str| {
        metric(text, "resolvd_direct_messages_total", &format!("result=\"{result}\""))
    };
    let mut rejected = 0.0;
    'send: for _ in 0..10 {
        exchange(&mut swarm, target, std::slice::from_ref(&forged)).await;
        for _ in 0..20 {
            rejected = counter(&net.0.nodes[0].metrics().await.unwrap(), "rejected");
            if rejected > 0.0 {
                break 'send;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    assert_eq!(rejected, 1.0, "the forged record was not rejected");
    // Every later message from the peer is dropped unread.
    let before = counter(&net.0.nodes[0].metrics().await.unwrap(), "graylisted");
    exchange(&mut swarm, target, &rest).await;
    let mut m0 = String::new();
    for _ in 0..50 {
        m0 = net.0.nodes[0].metrics().await.unwrap();
        if counter(&m0, "graylisted") >= before + 2.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(counter(&m0, "rejected"), 1.0);
    assert_eq!(counter(&m0, "graylisted") - before, 2.0, "messages dropped unread");
    // (`/status` rescores peers at most every 2 s.)
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = net.0.nodes[0].get("/status").await.unwrap();
    let score = status["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == swarm.local_peer_id().to_string())
        .and_then(|p| p["score"].as_f64());
    assert!(score.is_some_and(|s| s < -80.0), "the hostile peer's score: {score:?}");
    assert_eq!(metric(&m0, "resolvd_member_records", ""), 3.0);
    // The peer does not speak the direct protocol (node 0's stream to it
    // shows no ready byte): the record node 0 sent it on connecting went by
    // gossip instead.
    for _ in 0..100 {
        if counter(&m0, "failed") >= 1.0 {
            break;
        }
        let _ = tokio::time::timeout(Duration::from_millis(100), swarm.select_next_some()).await;
        m0 = net.0.nodes[0].metrics().await.unwrap();
    }
    assert!(counter(&m0, "failed") >= 1.0, "no direct send failed over to gossip");

    // Node 1's real record still stands: partials reach it directly.
    let content = net.0.deal_content(DealKind::Honest).await.unwrap();
    let open = net.0.open_dispute(&content, &[0]).await.unwrap();
    let deal = net.0.wait_settled(open.deal_id, SETTLE).await.unwrap();
    assert_eq!(deal.settlement, RELEASED);
    let fallback = metric_sum(&net.0, "resolvd_direct_messages_total", "result=\"fallback\"").await;
    assert_eq!(fallback, 0.0, "direct messages sent on gossip instead");
}

/// A member re-gossips the record it signed last when nothing in it
/// changed (the copy's bytes are the same, so holders take it without a
/// pairing): a peer of node 1 sees the same `seq` published twice.
///
/// gossipsub forgets an expired id only when it takes a new message, so in
/// a network with no other gossip a member's own last record can still be
/// in its seen cache, and it signs a new one instead. The peer here keeps
/// some gossip going (records of a key outside the committee, which node 1
/// ignores without a penalty), as any live network does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_member_record_is_regossiped_as_signed() {
    let net = launch(|o| o.dissemination = Some(DisseminationMode::Aggregators)).await;
    let status = net.0.nodes[1].get("/status").await.unwrap();
    let target: libp2p::PeerId = status["peer_id"].as_str().unwrap().parse().unwrap();
    let key1 = status["bls_key"].as_str().unwrap().to_owned();
    let key1: [u8; 48] = alloy_primitives::hex::decode(key1).unwrap().try_into().unwrap();
    let mut config = crate::p2p::loopback(2, Duration::from_millis(200));
    config.aggregation = true;
    let mut swarm = build_swarm(libp2p::identity::Keypair::generate_ed25519(), &config).unwrap();
    swarm.dial(net.0.nodes[1].p2p.parse::<libp2p::Multiaddr>().unwrap()).unwrap();
    let outsider = resolvd_consensus::SecretKey::from_seed(&[0x77; 32]).unwrap();
    let mut chatter = MemberRecord {
        public_key: outsider.public_key().compress(),
        seq: 0,
        peer_id: swarm.local_peer_id().to_bytes(),
        addrs: Vec::new(),
        signature: [0; 96],
    };
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    // Re-gossips go out 3, 9, 21, 45 … s after the first record; those at
    // least 1.5 × the seen cache's 12 s after the last one are copies (the
    // one at 45 s first).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let mut seqs = Vec::new();
    loop {
        let event = tokio::select! {
            _ = tokio::time::sleep_until(deadline) => {
                panic!("no record of node 1 was published twice; seqs seen: {seqs:?}")
            }
            _ = tick.tick() => {
                chatter.seq += 1;
                chatter.signature = outsider.sign_record(&chatter.signing_message()).compress();
                let (topic, bytes) = Gossip::Member(Box::new(chatter.clone())).encode();
                let _ = swarm.behaviour_mut().gossipsub.publish(topic.ident(), bytes);
                continue;
            }
            event = swarm.select_next_some() => event,
        };
        let SwarmEvent::Behaviour(BehaviourEvent::Gossipsub(libp2p::gossipsub::Event::Message {
            propagation_source,
            message_id,
            message,
        })) = event
        else {
            continue;
        };
        let _ = swarm.behaviour_mut().gossipsub.report_message_validation_result(
            &message_id,
            &propagation_source,
            libp2p::gossipsub::MessageAcceptance::Ignore,
        );
        let Ok(Gossip::Member(r)) = Gossip::decode(Topic::Members, &message.data) else {
            continue;
        };
        if r.public_key != key1 || propagation_source != target {
            continue;
        }
        if seqs.contains(&r.seq) {
            break;
        }
        seqs.push(r.seq);
    }
    assert_eq!(metric(&net.0.nodes[0].metrics().await.unwrap(), "resolvd_member_records", ""), 3.0);
}

/// Writes `messages` to `target` on one direct stream, then closes it,
/// driving the swarm meanwhile.
async fn exchange(
    swarm: &mut libp2p::Swarm<resolvd_node::p2p::Behaviour>,
    target: libp2p::PeerId,
    messages: &[Direct],
) {
    let mut control = swarm.behaviour().direct.new_control();
    let messages = messages.to_vec();
    let send = async move {
        let mut stream = control.open_stream(target, DIRECT_PROTOCOL).await.expect("a stream");
        for m in &messages {
            write_direct(&mut stream, m).await.expect("a frame written");
        }
        stream.close().await.expect("the stream closed");
    };
    tokio::pin!(send);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        tokio::select! {
            () = &mut send => return,
            _ = swarm.select_next_some() => {}
            () = tokio::time::sleep_until(deadline) => panic!("direct frames not written"),
        }
    }
}
