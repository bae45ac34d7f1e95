//! Bounded collections: the newest ids ([`Recent`]), per-peer quotas
//! ([`Quota`]) and entries held per deal ([`BoundedBuffer`]).

use alloy_primitives::B256;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

/// A set of the newest `cap` ids (insertion order; the oldest is forgotten first).
#[derive(Debug)]
pub(crate) struct Recent {
    set: HashSet<B256>,
    order: VecDeque<B256>,
    cap: usize,
}

impl Recent {
    pub(crate) fn new(cap: usize) -> Self {
        Self { set: HashSet::new(), order: VecDeque::new(), cap: cap.max(1) }
    }

    pub(crate) fn insert(&mut self, id: B256) {
        if self.set.insert(id) {
            self.order.push_back(id);
            while self.order.len() > self.cap {
                if let Some(old) = self.order.pop_front() {
                    self.set.remove(&old);
                }
            }
        }
    }

    pub(crate) fn contains(&self, id: &B256) -> bool {
        self.set.contains(id)
    }

    /// Forgets `id`; whether it was there.
    pub(crate) fn remove(&mut self, id: &B256) -> bool {
        let was = self.set.remove(id);
        if was {
            self.order.retain(|x| x != id);
        }
        was
    }

    pub(crate) fn len(&self) -> usize {
        self.set.len()
    }
}

/// Per-peer counts against a quota.
#[derive(Debug)]
pub(crate) struct Quota<P>(HashMap<P, usize>);

impl<P> Default for Quota<P> {
    fn default() -> Self {
        Self(HashMap::new())
    }
}

impl<P: Clone + Eq + std::hash::Hash> Quota<P> {
    /// Takes one unit for `peer` if it holds fewer than `cap`.
    pub(crate) fn take(&mut self, peer: &P, cap: usize) -> bool {
        let n = self.0.entry(peer.clone()).or_default();
        if *n >= cap {
            return false;
        }
        *n += 1;
        true
    }

    pub(crate) fn give(&mut self, peer: &P) {
        if let Some(n) = self.0.get_mut(peer) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.0.remove(peer);
            }
        }
    }
}

/// Entries held per deal, with their total count (the early buffers).
/// Ordered by deal id, so that what expires at one instant comes out in
/// the same order on every run (the simulator's runs are byte-identical).
pub(crate) struct BoundedBuffer<T> {
    by_deal: BTreeMap<B256, Vec<T>>,
    len: usize,
}

impl<T> Default for BoundedBuffer<T> {
    fn default() -> Self {
        Self { by_deal: BTreeMap::new(), len: 0 }
    }
}

impl<T> BoundedBuffer<T> {
    /// Entries held, all deals together.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Holds `entry` for `deal` (the caller checks the bounds).
    pub(crate) fn push(&mut self, deal: B256, entry: T) {
        self.len += 1;
        self.by_deal.entry(deal).or_default().push(entry);
    }

    /// Takes every entry held for `deal`, in arrival order.
    pub(crate) fn take(&mut self, deal: &B256) -> Vec<T> {
        let taken = self.by_deal.remove(deal).unwrap_or_default();
        self.len -= taken.len();
        taken
    }

    /// Takes every entry `expired` says is: deal by deal in id order, each
    /// deal's in arrival order.
    pub(crate) fn drain_expired(&mut self, mut expired: impl FnMut(&T) -> bool) -> Vec<T> {
        let mut out = Vec::new();
        for list in self.by_deal.values_mut() {
            let (gone, kept): (Vec<T>, Vec<T>) =
                std::mem::take(list).into_iter().partition(|e| expired(e));
            *list = kept;
            out.extend(gone);
        }
        self.by_deal.retain(|_, l| !l.is_empty());
        self.len -= out.len();
        out
    }
}
