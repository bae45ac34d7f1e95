//! The chain watcher: confirmed log ranges, in order, with backoff on errors.
//!
//! Before each step it checks that the last handled block is still
//! canonical; if not it walks back through the remembered batches to the
//! newest one still canonical, reports the logs it had handled above it
//! (undone by the loop and the engine) and re-scans from there. An endpoint
//! that has no block yet at a handled height (a backup behind the endpoint
//! that failed) is no evidence of a reorg: the watcher waits for it; only
//! another block at a handled height is.
//!
//! The walk ([`Watcher::step`]) reads the chain through [`ChainReader`]: the
//! node's [`Chain`], or a scripted chain in the unit tests.

use super::Internal;
use crate::{
    backoff::Backoff,
    chain::{Chain, ChainError, ChainEvent, Confirmed},
    config::Confirmations,
};
use alloy_primitives::B256;
use std::{collections::VecDeque, future::Future, pin::Pin, time::Duration};
use tokio::sync::mpsc;
use tracing::{info, warn};

/// Batches the watcher remembers for reorg detection.
const REORG_MEMORY: usize = 256;
/// After a restart only the cursor's hash is known: if that block is no
/// longer canonical, re-scan this many blocks below it.
const RESTART_REWIND: u64 = 64;
/// Longest backoff of the chain watcher.
const MAX_WATCH_BACKOFF: Duration = Duration::from_secs(60);

/// New-head notifications that wake the watcher early.
pub(crate) type Heads = Pin<Box<dyn futures::Stream<Item = u64> + Send>>;

/// What the watcher reads from the chain.
pub(crate) trait ChainReader: Sync {
    /// The latest block number.
    fn head(&self) -> impl Future<Output = Result<u64, ChainError>> + Send;
    /// The hash of block `number` on the canonical chain (`None`: no such block yet).
    fn block_hash(
        &self,
        number: u64,
    ) -> impl Future<Output = Result<Option<B256>, ChainError>> + Send;
    /// The head and the confirmed block.
    fn confirmed(
        &self,
        c: Confirmations,
    ) -> impl Future<Output = Result<Confirmed, ChainError>> + Send;
    /// The decoded logs of blocks `from..=to`, in order.
    fn events(
        &self,
        from: u64,
        to: u64,
    ) -> impl Future<Output = Result<Vec<ChainEvent>, ChainError>> + Send;
}

impl ChainReader for Chain {
    fn head(&self) -> impl Future<Output = Result<u64, ChainError>> + Send {
        Chain::head(self)
    }

    fn block_hash(
        &self,
        number: u64,
    ) -> impl Future<Output = Result<Option<B256>, ChainError>> + Send {
        Chain::block_hash(self, number)
    }

    fn confirmed(
        &self,
        c: Confirmations,
    ) -> impl Future<Output = Result<Confirmed, ChainError>> + Send {
        Chain::confirmed(self, c)
    }

    fn events(
        &self,
        from: u64,
        to: u64,
    ) -> impl Future<Output = Result<Vec<ChainEvent>, ChainError>> + Send {
        Chain::events(self, from, to)
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

/// The outcome of one watcher step.
#[derive(Debug)]
pub(crate) enum Step {
    /// Nothing confirmed past the cursor.
    Idle { head: u64, time: u64 },
    /// The logs of `from..=to`.
    Batch { events: Vec<ChainEvent>, from: u64, to: u64, hash: B256, head: u64, time: u64 },
    /// Blocks from `from` on were replaced: the `Disputed` / `Settled` logs
    /// handled there are undone and the range is scanned again.
    Reorg { from: u64, disputed: Vec<B256>, settled: Vec<B256>, depth: u64 },
    /// The range's last block changed while its logs were read: read again.
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
        Self { next, handled, confirmations, max_range: max_range.max(1), waiting_for: None }
    }

    /// One step: a reorg walk if the last handled block changed, else the
    /// next confirmed range (at most `max_range` blocks).
    pub(crate) async fn step(&mut self, chain: &impl ChainReader) -> Result<Step, ChainError> {
        if let Some(newest) = self.handled.back() {
            let tip = newest.to;
            let at_tip = chain.block_hash(tip).await?;
            if at_tip != Some(newest.hash) {
                return self.walk_back(chain, tip, at_tip.is_some()).await;
            }
        }
        let c = chain.confirmed(self.confirmations).await?;
        if self.next > c.block {
            return Ok(Step::Idle { head: c.head, time: c.time });
        }
        let (from, to) = (self.next, c.block.min(self.next + self.max_range - 1));
        let Some(hash) = chain.block_hash(to).await? else { return Ok(Step::Raced) };
        let events = chain.events(from, to).await?;
        if chain.block_hash(to).await? != Some(hash) {
            return Ok(Step::Raced);
        }
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
            return Ok(Step::Idle { head: c.head, time: c.time });
        }
        let mut batch = Handled { from, to, hash, disputed: Vec::new(), settled: Vec::new() };
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
        Ok(Step::Batch { events, from, to, hash, head: c.head, time: c.time })
    }

    /// The last handled block `tip` changed: which remembered batches does
    /// the endpoint still have? One it has no block for yet says nothing (a
    /// lagging endpoint); a reorg is another block at a handled height.
    async fn walk_back(
        &mut self,
        chain: &impl ChainReader,
        tip: u64,
        tip_replaced: bool,
    ) -> Result<Step, ChainError> {
        let head = chain.head().await?;
        let (mut gone, mut differs) = (0, tip_replaced);
        for b in self.handled.iter().rev() {
            if b.to <= head {
                match chain.block_hash(b.to).await? {
                    Some(h) if h == b.hash => break,
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

/// Runs the watcher until the loop's channel closes: each step's result is
/// sent to the loop; errors back off from `poll` doubling to a minute; a
/// WebSocket head wakes an idle watcher early (polling stays the source of
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
            Ok(Step::Batch { events, from, to, hash, head, time }) => {
                backoff.reset();
                tx.send(Internal::Batch { events, from, to, hash, head, time })
            }
            Ok(Step::Reorg { from, disputed, settled, depth }) => {
                warn!(target: "chain", from, depth, disputes = disputed.len(), settlements = settled.len(), "reorg: re-scanning from the common ancestor");
                tx.send(Internal::Reorg { from, disputed, settled, depth })
            }
            Ok(Step::Raced) => continue,
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
                match heads.as_mut() {
                    Some(h) => {
                        if let Ok(None) =
                            tokio::time::timeout(poll, futures::StreamExt::next(h)).await
                        {
                            heads = None; // ended: poll only
                        }
                    }
                    None => tokio::time::sleep(poll).await,
                }
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

    impl ChainReader for Script {
        async fn head(&self) -> Result<u64, ChainError> {
            Ok(self.tip())
        }

        async fn block_hash(&self, number: u64) -> Result<Option<B256>, ChainError> {
            if number > self.tip() {
                return Ok(None);
            }
            Ok(self.hashes.lock().unwrap().get(number as usize).copied())
        }

        async fn confirmed(&self, c: Confirmations) -> Result<Confirmed, ChainError> {
            let head = self.tip();
            let Confirmations::Blocks(n) = c else { unreachable!("blocks only here") };
            Ok(Confirmed { head, time: 1_000 + head, block: head.saturating_sub(n) })
        }

        /// As the chain's: a `Disputed` log has order entropy once its
        /// block has a successor.
        async fn events(&self, from: u64, to: u64) -> Result<Vec<ChainEvent>, ChainError> {
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
            Ok(out)
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
                Step::Batch { events, to, hash: h, .. } => {
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
            Step::Batch { events, to: 6, .. } => match &events[..] {
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
            Step::Batch { events, to, hash: h, .. } => {
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
        assert!(matches!(w.step(&chain).await.unwrap(), Step::Batch { to: 100, .. }));
        chain.reorg(71, 40, 1);
        let mut w = Watcher::new(81, Some((80, hash(80, 0))), Confirmations::Blocks(0), 1_000);
        match w.step(&chain).await.unwrap() {
            Step::Reorg { from, depth, .. } => assert_eq!((from, depth), (80 - RESTART_REWIND, 65)),
            other => panic!("{other:?}"),
        }
        assert!(matches!(w.step(&chain).await.unwrap(), Step::Batch { to: 110, .. }));
    }
}
