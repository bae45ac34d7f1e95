//! Bounded collections: the newest ids ([`Recent`]) and per-peer quotas
//! ([`Quota`]).

use alloy_primitives::B256;
use std::collections::{HashMap, HashSet, VecDeque};

/// A set of the newest `cap` ids (insertion order; the oldest is forgotten first).
#[derive(Debug)]
pub(crate) struct Recent {
    pub(crate) set: HashSet<B256>,
    pub(crate) order: VecDeque<B256>,
    pub(crate) cap: usize,
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
