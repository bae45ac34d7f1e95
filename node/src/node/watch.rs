//! The chain watcher: confirmed log ranges, in order, with backoff on errors.
//!
//! Each step reads the head. A head with the hash the watcher last went idle
//! at changed nothing (its hash commits to every block under it): the step
//! ends there, [`IDLE_POLLS_TRUSTED`] times in a row at most. Otherwise the
//! watcher checks that the last handled block is still canonical (from the
//! head, or the parent hash of the block it scans next, when those are it or
//! follow it; else by reading it); if not it walks back through the
//! remembered batches to the newest one still canonical, reports the logs it
//! had handled above it (undone by the loop and the engine) and re-scans
//! from there. An endpoint that has no block
//! yet at a handled height (a backup behind the endpoint that failed) is no
//! evidence of a reorg: the watcher waits for it; only another block at a
//! handled height is.
//!
//! A range of one block is read by its hash (EIP-234: its logs and none of
//! another block at that height), in one JSON-RPC batch with the block, so
//! an endpoint without the block cannot pass for one whose block has no
//! logs; a longer one by number, its last block's hash read before and after
//! (read again if it changed in between).
//!
//! The walk ([`Watcher::step`]) reads the chain through [`ChainReader`]: the
//! node's [`Chain`], or a scripted chain in the unit tests.

use super::Internal;
use crate::{
    backoff::Backoff,
    chain::{BlockHeader, Chain, ChainError, ChainEvent},
    config::{BlockTag, Confirmations},
};
use alloy_primitives::B256;
use alloy_rpc_types_eth::BlockNumberOrTag;
use std::{collections::VecDeque, future::Future, pin::Pin, time::Duration};
use tokio::sync::mpsc;
use tracing::{info, warn};

/// Batches the watcher remembers for reorg detection.
const REORG_MEMORY: usize = 256;
/// After a restart only the cursor's hash is known: if that block is no
/// longer canonical, re-scan this many blocks below it.
const RESTART_REWIND: u64 = 64;
/// Polls in a row that end at an unchanged head without another read. The
/// reads of the step that went idle were not one atomic view with its head
/// (a chain that flipped away and back between them, or an endpoint behind
/// another); the poll after these checks the last handled block again.
const IDLE_POLLS_TRUSTED: u32 = 4;
/// Longest backoff of the chain watcher.
const MAX_WATCH_BACKOFF: Duration = Duration::from_secs(60);

/// New-head notifications that wake the watcher early.
pub(crate) type Heads = Pin<Box<dyn futures::Stream<Item = u64> + Send>>;

/// What the watcher reads from the chain.
pub(crate) trait ChainReader: Sync {
    /// The latest block.
    fn latest(&self) -> impl Future<Output = Result<BlockHeader, ChainError>> + Send;
    /// Block `number` of the canonical chain (`None`: no such block yet).
    fn header(
        &self,
        number: u64,
    ) -> impl Future<Output = Result<Option<BlockHeader>, ChainError>> + Send;
    /// The number of the `safe` or `finalized` block.
    fn tagged(&self, tag: BlockTag) -> impl Future<Output = Result<u64, ChainError>> + Send;
    /// The decoded logs of blocks `from..=to`, in order.
    fn events(
        &self,
        from: u64,
        to: u64,
    ) -> impl Future<Output = Result<Vec<ChainEvent>, ChainError>> + Send;
    /// The decoded logs of the block with hash `hash`, in order (`None`:
    /// the endpoint does not have that block).
    fn events_in(
        &self,
        hash: B256,
    ) -> impl Future<Output = Result<Option<Vec<ChainEvent>>, ChainError>> + Send;
}

impl ChainReader for Chain {
    fn latest(&self) -> impl Future<Output = Result<BlockHeader, ChainError>> + Send {
        Chain::latest(self)
    }

    fn header(
        &self,
        number: u64,
    ) -> impl Future<Output = Result<Option<BlockHeader>, ChainError>> + Send {
        Chain::header(self, BlockNumberOrTag::Number(number))
    }

    fn tagged(&self, tag: BlockTag) -> impl Future<Output = Result<u64, ChainError>> + Send {
        Chain::tagged(self, tag)
    }

    fn events(
        &self,
        from: u64,
        to: u64,
    ) -> impl Future<Output = Result<Vec<ChainEvent>, ChainError>> + Send {
        Chain::events(self, from, to)
    }

    fn events_in(
        &self,
        hash: B256,
    ) -> impl Future<Output = Result<Option<Vec<ChainEvent>>, ChainError>> + Send {
        Chain::events_in(self, hash)
    }
}

/// A batch handed to the loop: its range, the hash of its last block, and the
/// deals whose `Disputed` / `Settled` logs it carried.
#[derive(Debug)]
struct Handled {
    from: u64,
    to: u64,
    hash: B256,
    disputed: Vec<B256>,
    settled: Vec<B256>,
}

/// A confirmed range's logs, for the loop: the logs of `from..=to`, the hash
/// of block `to`, and the head's number and timestamp.
#[derive(Debug)]
pub(crate) struct Logs {
    pub(crate) events: Vec<ChainEvent>,
    pub(crate) from: u64,
    pub(crate) to: u64,
    pub(crate) hash: B256,
    pub(crate) head: u64,
    pub(crate) time: u64,
}

/// The outcome of one watcher step.
#[derive(Debug)]
pub(crate) enum Step {
    /// Nothing confirmed past the cursor.
    Idle { head: u64, time: u64 },
    /// A range's logs; `more` if the confirmed block is past its end.
    Batch { logs: Logs, more: bool },
    /// Blocks from `from` on were replaced: the `Disputed` / `Settled` logs
    /// handled there are undone and the range is scanned again.
    Reorg { from: u64, disputed: Vec<B256>, settled: Vec<B256>, depth: u64 },
    /// The range's last block changed while its logs were read, or the
    /// endpoint that answered does not have it: read again shortly.
    Raced,
    /// The endpoint has not reached the last handled block (a backup that
    /// lags after a failover): unknown, not a reorg; wait.
    Behind { head: u64, handled: u64 },
}

/// The watcher's position: the next block to scan and the batches handled.
pub(crate) struct Watcher {
    next: u64,
    handled: VecDeque<Handled>,
    confirmations: Confirmations,
    max_range: u64,
    /// The block of a `Disputed` log waiting for its successor (logged once).
    waiting_for: Option<u64>,
    /// The head's hash when a step last found nothing more to scan, and the
    /// polls since that ended there without another read (with
    /// confirmations counted in blocks: a `safe` or `finalized` block can
    /// move under an unchanged head).
    idle_at: Option<(B256, u32)>,
}

impl Watcher {
    /// Scans from `next`; `last` is the cursor's block and hash (after a
    /// restart: checked before anything is scanned).
    pub(crate) fn new(
        next: u64,
        last: Option<(u64, B256)>,
        confirmations: Confirmations,
        max_range: u64,
    ) -> Self {
        let mut handled = VecDeque::new();
        if let Some((to, hash)) = last {
            let from = to.saturating_sub(RESTART_REWIND).max(1);
            handled.push_back(Handled {
                from,
                to,
                hash,
                disputed: Vec::new(),
                settled: Vec::new(),
            });
        }
        Self {
            next,
            handled,
            confirmations,
            max_range: max_range.max(1),
            waiting_for: None,
            idle_at: None,
        }
    }

    /// One step: nothing if the head is the one the last step went idle at;
    /// else a reorg walk if the last handled block changed, else the next
    /// confirmed range (at most `max_range` blocks).
    pub(crate) async fn step(&mut self, chain: &impl ChainReader) -> Result<Step, ChainError> {
        let latest = chain.latest().await?;
        let (head, time) = (latest.number, latest.time);
        if let Some((hash, polls)) = self.idle_at.take() {
            if hash == latest.hash && polls < IDLE_POLLS_TRUSTED {
                self.idle_at = Some((hash, polls + 1));
                return Ok(Step::Idle { head, time });
            }
        }
        let confirmed = match self.confirmations {
            Confirmations::Blocks(n) => head.saturating_sub(n),
            Confirmations::Tag(tag) => chain.tagged(tag).await?.min(head),
        };
        let range = (self.next <= confirmed)
            .then(|| (self.next, confirmed.min(self.next + self.max_range - 1)));
        // The range's last block (the head needs no second read).
        let last = match range {
            Some((_, to)) if to == head => Some(latest),
            Some((_, to)) => match chain.header(to).await? {
                Some(b) => Some(b),
                None => return Ok(Step::Raced),
            },
            None => None,
        };
        if let Some(newest) = self.handled.back() {
            let tip = newest.to;
            // Known without a read when the head is the tip, or when the
            // range starts right after it (its parent hash).
            let at_tip = if tip == head {
                Some(latest.hash)
            } else if let Some(b) = last.filter(|b| b.number == tip + 1) {
                Some(b.parent)
            } else {
                chain.header(tip).await?.map(|b| b.hash)
            };
            if at_tip != Some(newest.hash) {
                return self.walk_back(chain, head, tip, at_tip.is_some()).await;
            }
        }
        let (Some((from, to)), Some(last)) = (range, last) else {
            self.idle_when_counting_blocks(latest.hash);
            return Ok(Step::Idle { head, time });
        };
        let events = if from == to {
            match chain.events_in(last.hash).await? {
                Some(events) => events,
                None => return Ok(Step::Raced),
            }
        } else {
            let events = chain.events(from, to).await?;
            if chain.header(to).await?.map(|b| b.hash) != Some(last.hash) {
                return Ok(Step::Raced);
            }
            events
        };
        // A `Disputed` log in a block with no successor yet (the head's logs,
        // with `confirmations = 0`) has no order entropy: the range is read
        // again once the next block is there.
        if let Some(a) = events.iter().find_map(|e| match e {
            ChainEvent::Disputed(a) if a.order_entropy.is_zero() => Some(a),
            _ => None,
        }) {
            if self.waiting_for != Some(a.block_number) {
                self.waiting_for = Some(a.block_number);
                info!(target: "chain", block = a.block_number, deal = %a.deal_id, "a Disputed log waits for the block after it (its order entropy)");
            }
            self.idle_when_counting_blocks(latest.hash);
            return Ok(Step::Idle { head, time });
        }
        let mut batch =
            Handled { from, to, hash: last.hash, disputed: Vec::new(), settled: Vec::new() };
        for e in &events {
            match e {
                ChainEvent::Disputed(a) => batch.disputed.push(a.deal_id),
                ChainEvent::Settled { deal_id, .. } => batch.settled.push(*deal_id),
                _ => {}
            }
        }
        self.next = to + 1;
        self.handled.push_back(batch);
        if self.handled.len() > REORG_MEMORY {
            self.handled.pop_front();
        }
        let more = to < confirmed;
        if !more {
            self.idle_when_counting_blocks(latest.hash);
        }
        Ok(Step::Batch { logs: Logs { events, from, to, hash: last.hash, head, time }, more })
    }

    /// Nothing more to scan under the head `hash`: the next step ends at once
    /// if the head is still that block. Not with a `safe` / `finalized`
    /// confirmation, which can move without a new head.
    fn idle_when_counting_blocks(&mut self, hash: B256) {
        if matches!(self.confirmations, Confirmations::Blocks(_)) {
            self.idle_at = Some((hash, 0));
        }
    }

    /// The last handled block `tip` changed: which remembered batches does
    /// the endpoint (at `head`) still have? One it has no block for yet says
    /// nothing (a lagging endpoint); a reorg is another block at a handled
    /// height.
    async fn walk_back(
        &mut self,
        chain: &impl ChainReader,
        head: u64,
        tip: u64,
        tip_replaced: bool,
    ) -> Result<Step, ChainError> {
        let (mut gone, mut differs) = (0, tip_replaced);
        for b in self.handled.iter().rev() {
            if b.to <= head {
                match chain.header(b.to).await? {
                    Some(h) if h.hash == b.hash => break,
                    Some(_) => differs = true,
                    None => {}
                }
            }
            gone += 1;
        }
        if !differs {
            return Ok(Step::Behind { head, handled: tip });
        }
        let (mut disputed, mut settled, mut from) = (Vec::new(), Vec::new(), self.next);
        for _ in 0..gone {
            let Some(b) = self.handled.pop_back() else { break };
            from = b.from;
            disputed.extend(b.disputed);
            settled.extend(b.settled);
        }
        self.next = from;
        Ok(Step::Reorg { from, disputed, settled, depth: tip + 1 - from })
    }
}

/// Waits `poll`, or less if a WebSocket head comes first (then forgets
/// `heads` if that stream ended: polling only).
async fn wait_for_head(heads: &mut Option<Heads>, poll: Duration) {
    match heads.as_mut() {
        Some(h) => {
            if let Ok(None) = tokio::time::timeout(poll, futures::StreamExt::next(h)).await {
                *heads = None;
            }
        }
        None => tokio::time::sleep(poll).await,
    }
}

/// Runs the watcher until the loop's channel closes: each step's result is
/// sent to the loop; a step that found nothing more to scan waits `poll`
/// before the next; errors back off from `poll` doubling to a minute; a
/// WebSocket head wakes a waiting watcher early (polling stays the source of
/// truth: heads may repeat or skip).
pub(super) async fn watch(
    mut heads: Option<Heads>,
    chain: Chain,
    tx: mpsc::UnboundedSender<Internal>,
    mut watcher: Watcher,
    poll: Duration,
) {
    let mut backoff = Backoff::new(poll, MAX_WATCH_BACKOFF);
    let mut behind = false;
    loop {
        let step = watcher.step(&chain).await;
        if behind && !matches!(step, Ok(Step::Behind { .. }) | Err(_)) {
            info!(target: "chain", "the rpc endpoint caught up with the blocks already handled");
            behind = false;
        }
        let sent = match step {
            Ok(Step::Batch { logs, more }) => {
                backoff.reset();
                let sent = tx.send(Internal::Batch(logs));
                if !more {
                    wait_for_head(&mut heads, poll).await;
                }
                sent
            }
            Ok(Step::Reorg { from, disputed, settled, depth }) => {
                warn!(target: "chain", from, depth, disputes = disputed.len(), settlements = settled.len(), "reorg: re-scanning from the common ancestor");
                tx.send(Internal::Reorg { from, disputed, settled, depth })
            }
            Ok(Step::Raced) => {
                // Soon, not at once: an endpoint that keeps lacking the
                // block (a lagging backup) is not asked in a tight loop.
                tokio::time::sleep(poll / 4).await;
                continue;
            }
            Ok(Step::Behind { head, handled }) => {
                if !behind {
                    warn!(target: "chain", head, handled, "the rpc endpoint is behind the blocks already handled (a lagging backup?): waiting for it, not a reorg");
                    behind = true;
                }
                tokio::time::sleep(poll).await;
                continue;
            }
            Ok(Step::Idle { head, time }) => {
                backoff.reset();
                let sent = tx.send(Internal::Head { head, time });
                wait_for_head(&mut heads, poll).await;
                sent
            }
            Err(e) => {
                let retry_in = backoff.next_delay();
                warn!(target: "chain", error = %e, ?retry_in, "chain watcher error");
                tokio::time::sleep(retry_in).await;
                Ok(())
            }
        };
        if sent.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::Address;
    use resolvd_proto::wire::DisputeAnnouncement;
    use std::{collections::BTreeMap, sync::Mutex};

    /// A chain as a list of block hashes (index = number) and the logs of
    /// some blocks; `lag` blocks of it are not visible to the endpoint yet.
    #[derive(Default)]
    struct Script {
        hashes: Mutex<Vec<B256>>,
        logs: Mutex<BTreeMap<u64, Vec<ChainEvent>>>,
        visible: Mutex<Option<u64>>,
        reads: std::sync::atomic::AtomicU64,
        /// The logs are answered by an endpoint without the block.
        logs_lag: std::sync::atomic::AtomicBool,
    }

    impl Script {
        fn new(blocks: u64, fork: u8) -> Self {
            let s = Self::default();
            s.extend(blocks, fork);
            s
        }

        fn extend(&self, blocks: u64, fork: u8) {
            let mut h = self.hashes.lock().unwrap();
            if h.is_empty() {
                h.push(B256::ZERO);
            }
            for _ in 0..blocks {
                let n = h.len() as u64;
                h.push(hash(n, fork));
            }
        }

        /// Replaces the blocks from `from` on with `blocks` of fork `fork`.
        fn reorg(&self, from: u64, blocks: u64, fork: u8) {
            self.hashes.lock().unwrap().truncate(from as usize);
            self.logs.lock().unwrap().retain(|n, _| *n < from);
            self.extend(blocks, fork);
        }

        fn log(&self, block: u64, e: ChainEvent) {
            self.logs.lock().unwrap().entry(block).or_default().push(e);
        }

        fn tip(&self) -> u64 {
            let len = self.hashes.lock().unwrap().len() as u64 - 1;
            self.visible.lock().unwrap().map_or(len, |v| v.min(len))
        }
    }

    fn hash(n: u64, fork: u8) -> B256 {
        let mut h = B256::with_last_byte(fork);
        h[..8].copy_from_slice(&n.to_be_bytes());
        h
    }

    impl Script {
        fn read(&self) {
            self.reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }

        /// Requests made since the last call.
        fn reads(&self) -> u64 {
            self.reads.swap(0, std::sync::atomic::Ordering::Relaxed)
        }

        fn block(&self, number: u64) -> Option<BlockHeader> {
            if number > self.tip() {
                return None;
            }
            let hashes = self.hashes.lock().unwrap();
            Some(BlockHeader {
                number,
                hash: *hashes.get(number as usize)?,
                parent: number.checked_sub(1).map_or(B256::ZERO, |p| hashes[p as usize]),
                time: 1_000 + number,
            })
        }

        fn logs(&self, from: u64, to: u64) -> Vec<ChainEvent> {
            let tip = self.tip();
            let logs = self.logs.lock().unwrap();
            let mut out = Vec::new();
            for (&n, events) in logs.range(from..=to) {
                for e in events {
                    let mut e = e.clone();
                    if let ChainEvent::Disputed(a) = &mut e {
                        if n < tip {
                            a.order_entropy = hash(n + 1, 0xe0);
                        }
                    }
                    out.push(e);
                }
            }
            out
        }
    }

    impl ChainReader for Script {
        async fn latest(&self) -> Result<BlockHeader, ChainError> {
            self.read();
            Ok(self.block(self.tip()).expect("the tip"))
        }

        async fn header(&self, number: u64) -> Result<Option<BlockHeader>, ChainError> {
            self.read();
            Ok(self.block(number))
        }

        async fn tagged(&self, _tag: BlockTag) -> Result<u64, ChainError> {
            unreachable!("blocks only here")
        }

        /// As the chain's: a `Disputed` log has order entropy once its
        /// block has a successor.
        async fn events(&self, from: u64, to: u64) -> Result<Vec<ChainEvent>, ChainError> {
            self.read();
            Ok(self.logs(from, to))
        }

        /// As the node's: `None` for a block the endpoint does not have
        /// (the logs and the block are one batch).
        async fn events_in(&self, hash: B256) -> Result<Option<Vec<ChainEvent>>, ChainError> {
            self.read();
            if self.logs_lag.load(std::sync::atomic::Ordering::Relaxed) {
                return Ok(None);
            }
            let n = self.hashes.lock().unwrap().iter().position(|h| *h == hash);
            Ok(n.map(|n| n as u64).filter(|&n| n <= self.tip()).map(|n| self.logs(n, n)))
        }
    }

    fn disputed(deal: u8) -> ChainEvent {
        ChainEvent::Disputed(Box::new(DisputeAnnouncement {
            chain_id: 31_337,
            escrow: Address::repeat_byte(0xe5),
            deal_id: B256::repeat_byte(deal),
            spec_hash: B256::ZERO,
            delivery_hash: B256::ZERO,
            prestate_anchor_hash: B256::ZERO,
            prestate_root: B256::ZERO,
            backend_id: B256::ZERO,
            backend_version_hash: B256::ZERO,
            epoch: 1,
            resolve_deadline: 0,
            block_number: 0,
            tx_hash: B256::ZERO,
            block_hash: B256::ZERO,
            order_entropy: B256::ZERO,
        }))
    }

    fn settled(deal: u8) -> ChainEvent {
        ChainEvent::Settled { deal_id: B256::repeat_byte(deal), settlement: 1 }
    }

    fn watcher(max_range: u64) -> Watcher {
        Watcher::new(1, None, Confirmations::Blocks(0), max_range)
    }

    /// Confirmed ranges in order, `max_range` blocks at most, then idle.
    #[tokio::test]
    async fn ranges_are_scanned_in_order_then_idle() {
        let chain = Script::new(7, 0);
        chain.log(5, disputed(5));
        let mut w = watcher(3);
        let mut ranges = Vec::new();
        loop {
            match w.step(&chain).await.unwrap() {
                Step::Batch { logs: Logs { events, to, hash: h, .. }, .. } => {
                    assert_eq!(h, hash(to, 0));
                    ranges.push((to, events.len()));
                }
                Step::Idle { head, .. } => {
                    assert_eq!(head, 7);
                    break;
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(ranges, vec![(3, 0), (6, 1), (7, 0)]);
    }

    /// What a step costs in requests: the head alone while it is unchanged;
    /// for each new block the head and that block's logs by hash, and with
    /// confirmations the confirmed block's header (its parent hash checks the
    /// last handled block). A head replaced in place is a reorg.
    #[tokio::test]
    async fn a_step_reads_the_head_and_only_what_changed() {
        for (confirmations, per_block) in [(0, 2), (2, 3)] {
            let chain = Script::new(20, 0);
            let mut w = Watcher::new(1, None, Confirmations::Blocks(confirmations), 1_000);
            assert!(matches!(w.step(&chain).await.unwrap(), Step::Batch { more: false, .. }));
            chain.reads();
            for _ in 0..IDLE_POLLS_TRUSTED {
                assert!(matches!(w.step(&chain).await.unwrap(), Step::Idle { head: 20, .. }));
                assert_eq!(chain.reads(), 1, "an unchanged head");
            }
            // Then the last handled block is checked again (from the head
            // itself when that is it).
            assert!(matches!(w.step(&chain).await.unwrap(), Step::Idle { head: 20, .. }));
            assert_eq!(chain.reads(), if confirmations == 0 { 1 } else { 2 });
            for head in 21..25 {
                chain.log(head - confirmations, settled(head as u8));
                chain.extend(1, 0);
                match w.step(&chain).await.unwrap() {
                    Step::Batch { logs: Logs { events, from, to, .. }, more: false } => {
                        assert_eq!((from, to), (head - confirmations, head - confirmations));
                        assert_eq!(events.len(), 1, "the block's log");
                    }
                    other => panic!("{other:?}"),
                }
                assert_eq!(chain.reads(), per_block, "a new block, confirmations {confirmations}");
                assert!(
                    matches!(w.step(&chain).await.unwrap(), Step::Idle { head: h, .. } if h == head)
                );
                assert_eq!(chain.reads(), 1);
            }
            // The last handled block and those above it replaced, the head's
            // height unchanged.
            chain.reorg(24 - confirmations, 1 + confirmations, 1);
            match w.step(&chain).await.unwrap() {
                Step::Reorg { from, .. } => assert_eq!(from, 24 - confirmations),
                other => panic!("{other:?}"),
            }
        }
    }

    /// A block's logs answered by an endpoint that does not have the block
    /// (a lagging backup, which may answer `[]` for an unknown hash) are not
    /// taken for a block without logs: read again, then handed on.
    #[tokio::test]
    async fn logs_from_an_endpoint_without_the_block_are_read_again() {
        let chain = Script::new(10, 0);
        let mut w = watcher(100);
        assert!(matches!(
            w.step(&chain).await.unwrap(),
            Step::Batch { logs: Logs { to: 10, .. }, .. }
        ));
        chain.log(11, settled(11));
        chain.extend(1, 0);
        chain.logs_lag.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(matches!(w.step(&chain).await.unwrap(), Step::Raced));
        chain.logs_lag.store(false, std::sync::atomic::Ordering::Relaxed);
        match w.step(&chain).await.unwrap() {
            Step::Batch { logs: Logs { events, from: 11, to: 11, .. }, .. } => {
                assert_eq!(events.len(), 1)
            }
            other => panic!("{other:?}"),
        }
    }

    /// With `confirmations = 0` a `Disputed` log in the head block has no
    /// order entropy yet: its range is not handed on (nor the cursor moved)
    /// until the next block is there; then it is, with the entropy.
    #[tokio::test]
    async fn a_disputed_log_in_the_head_waits_for_the_next_block() {
        let chain = Script::new(5, 0);
        chain.log(5, disputed(5));
        let mut w = watcher(10);
        assert!(matches!(w.step(&chain).await.unwrap(), Step::Idle { head: 5, .. }));
        assert!(matches!(w.step(&chain).await.unwrap(), Step::Idle { head: 5, .. }));
        chain.extend(1, 0);
        match w.step(&chain).await.unwrap() {
            Step::Batch { logs: Logs { events, to: 6, .. }, .. } => match &events[..] {
                [ChainEvent::Disputed(a)] => assert_eq!(a.order_entropy, hash(6, 0xe0)),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    /// Blocks 5.. replaced: the walk stops at the newest batch still
    /// canonical ([1, 3]), undoes the logs of the two batches above it and
    /// scans again from 4.
    #[tokio::test]
    async fn a_reorg_is_walked_back_to_the_newest_canonical_batch() {
        let chain = Script::new(9, 0);
        chain.log(5, disputed(5));
        chain.log(8, settled(8));
        chain.log(2, disputed(2));
        let mut w = watcher(3);
        for _ in 0..3 {
            assert!(matches!(w.step(&chain).await.unwrap(), Step::Batch { .. }));
        }
        chain.reorg(5, 6, 1);
        chain.log(6, disputed(6));
        match w.step(&chain).await.unwrap() {
            Step::Reorg { from, disputed, settled, depth } => {
                assert_eq!((from, depth), (4, 6));
                assert_eq!(disputed, vec![B256::repeat_byte(5)]);
                assert_eq!(settled, vec![B256::repeat_byte(8)]);
            }
            other => panic!("{other:?}"),
        }
        match w.step(&chain).await.unwrap() {
            Step::Batch { logs: Logs { events, to, hash: h, .. }, .. } => {
                assert_eq!((to, h), (6, hash(6, 1)));
                assert_eq!(events.len(), 1, "the new fork's log");
            }
            other => panic!("{other:?}"),
        }
    }

    /// An endpoint that has not reached the handled blocks yet (a lagging
    /// backup) is waited for: nothing is undone.
    #[tokio::test]
    async fn a_lagging_endpoint_is_not_a_reorg() {
        let chain = Script::new(9, 0);
        let mut w = watcher(3);
        for _ in 0..3 {
            w.step(&chain).await.unwrap();
        }
        *chain.visible.lock().unwrap() = Some(4);
        assert!(matches!(w.step(&chain).await.unwrap(), Step::Behind { head: 4, handled: 9 }));
        *chain.visible.lock().unwrap() = None;
        assert!(matches!(w.step(&chain).await.unwrap(), Step::Idle { head: 9, .. }));
    }

    /// After a restart only the cursor's block and hash are known: if that
    /// block was replaced, `RESTART_REWIND` blocks below it are scanned again.
    #[tokio::test]
    async fn a_cursor_block_replaced_while_stopped_rewinds() {
        let chain = Script::new(100, 0);
        let mut w = Watcher::new(81, Some((80, hash(80, 0))), Confirmations::Blocks(0), 1_000);
        assert!(matches!(
            w.step(&chain).await.unwrap(),
            Step::Batch { logs: Logs { to: 100, .. }, .. }
        ));
        chain.reorg(71, 40, 1);
        let mut w = Watcher::new(81, Some((80, hash(80, 0))), Confirmations::Blocks(0), 1_000);
        match w.step(&chain).await.unwrap() {
            Step::Reorg { from, depth, .. } => assert_eq!((from, depth), (80 - RESTART_REWIND, 65)),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            w.step(&chain).await.unwrap(),
            Step::Batch { logs: Logs { to: 110, .. }, .. }
        ));
    }
}
