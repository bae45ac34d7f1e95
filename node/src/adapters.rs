//! Adapters between leaf modules, wired by the composition root
//! ([`crate::node::Node::start`]): one leaf implements another's trait here,
//! so that neither names the other.

use crate::{
    chain::{PendingTx, TxJournal},
    store::{JsonColumn, Store},
};
use std::sync::Arc;

/// The chain's transaction journal in the store's `txs` column (fsync'd JSON
/// records, one per intent key).
#[derive(Clone, Debug)]
pub struct StoreJournal(pub Arc<Store>);

impl TxJournal for StoreJournal {
    fn load(&self, key: &str) -> Result<Option<PendingTx>, String> {
        self.0.json(JsonColumn::Txs, key).map_err(|e| e.to_string())
    }

    fn save(&self, key: &str, tx: &PendingTx) -> Result<(), String> {
        self.0.put_json(JsonColumn::Txs, key, tx).map_err(|e| e.to_string())
    }

    fn clear(&self, key: &str) -> Result<(), String> {
        self.0.delete_json(JsonColumn::Txs, key).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::Address;
    use alloy_rpc_types_eth::TransactionRequest;

    #[test]
    fn journal_round_trips_through_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let journal = StoreJournal(Arc::new(Store::open(dir.path()).unwrap()));
        assert!(journal.load("resolve:1").unwrap().is_none());
        let tx = PendingTx {
            from: Address::repeat_byte(1),
            nonce: 7,
            request: TransactionRequest::default(),
            sent: Vec::new(),
        };
        journal.save("resolve:1", &tx).unwrap();
        let back = journal.load("resolve:1").unwrap().unwrap();
        assert_eq!((back.from, back.nonce), (tx.from, tx.nonce));
        journal.clear("resolve:1").unwrap();
        assert!(journal.load("resolve:1").unwrap().is_none());
    }
}
