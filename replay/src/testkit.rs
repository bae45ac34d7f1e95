//! Builds real Merkle-Patricia state tries, proofs and block headers offline,
//! for tests and benchmarks: what an RPC's `eth_getProof` would return for a
//! chain holding exactly this state.

use alloy_consensus::Header;
use alloy_primitives::{keccak256, Address, Bytes, B256, U256};
use alloy_trie::{
    proof::ProofRetainer, HashBuilder, Nibbles, TrieAccount, EMPTY_ROOT_HASH, KECCAK_EMPTY,
};
use resolvd_proto::{
    AccountStateV1, AccountWitnessV1, EvmAnchorV1, EvmSpecId, EvmWitnessV1, StorageWitnessV1,
};
use std::collections::BTreeMap;

/// An account of a test chain.
#[derive(Clone, Debug, Default)]
pub struct TestAccount {
    /// Nonce.
    pub nonce: u64,
    /// Balance.
    pub balance: U256,
    /// Code (empty for an externally owned account).
    pub code: Bytes,
    /// Non-zero storage.
    pub storage: BTreeMap<B256, U256>,
}

/// A chain state plus the block environment of its anchor block.
#[derive(Clone, Debug)]
pub struct TestChain {
    /// Accounts that exist.
    pub accounts: BTreeMap<Address, TestAccount>,
    /// Chain id.
    pub chain_id: u64,
    /// Anchor block number.
    pub number: u64,
    /// Anchor timestamp.
    pub timestamp: u64,
    /// Anchor base fee.
    pub base_fee: u64,
    /// Anchor gas limit.
    pub gas_limit: u64,
    /// Anchor coinbase.
    pub coinbase: Address,
    /// Anchor prevrandao.
    pub prevrandao: B256,
    /// Number of ancestor headers to include in witnesses.
    pub ancestors: u64,
}

impl Default for TestChain {
    fn default() -> Self {
        Self {
            accounts: BTreeMap::new(),
            chain_id: 1,
            number: 1_000,
            timestamp: 1_700_000_000,
            base_fee: 1_000_000_000,
            gas_limit: 30_000_000,
            coinbase: Address::repeat_byte(0xc0),
            prevrandao: B256::repeat_byte(0x42),
            ancestors: 0,
        }
    }
}

/// Root and per-target proofs of a trie with `leaves` (key hash -> value).
fn trie(leaves: &BTreeMap<B256, Vec<u8>>, targets: &[B256]) -> (B256, Vec<Vec<Bytes>>) {
    let nibbles: Vec<Nibbles> = targets.iter().map(|t| Nibbles::unpack(t)).collect();
    let mut hb = HashBuilder::default().with_proof_retainer(ProofRetainer::new(nibbles.clone()));
    for (key, value) in leaves {
        hb.add_leaf(Nibbles::unpack(key), value);
    }
    let root = hb.root();
    let nodes = hb.take_proof_nodes();
    let proofs = nibbles
        .iter()
        .map(|n| nodes.matching_nodes_sorted(n).into_iter().map(|(_, node)| node).collect())
        .collect();
    (root, proofs)
}

impl TestChain {
    fn storage_trie(account: &TestAccount, slots: &[B256]) -> (B256, Vec<Vec<Bytes>>) {
        let leaves = account
            .storage
            .iter()
            .filter(|(_, v)| !v.is_zero())
            .map(|(k, v)| (keccak256(k), alloy_rlp::encode(v)))
            .collect();
        let targets: Vec<B256> = slots.iter().map(keccak256).collect();
        trie(&leaves, &targets)
    }

    fn trie_account(account: &TestAccount) -> TrieAccount {
        TrieAccount {
            nonce: account.nonce,
            balance: account.balance,
            storage_root: Self::storage_trie(account, &[]).0,
            code_hash: if account.code.is_empty() {
                KECCAK_EMPTY
            } else {
                keccak256(&account.code)
            },
        }
    }

    /// The state root of the chain.
    pub fn state_root(&self) -> B256 {
        self.state(&[]).0
    }

    fn state(&self, targets: &[Address]) -> (B256, Vec<Vec<Bytes>>) {
        let leaves = self
            .accounts
            .iter()
            .map(|(a, acc)| (keccak256(a), alloy_rlp::encode(Self::trie_account(acc))))
            .collect();
        let keys: Vec<B256> = targets.iter().map(keccak256).collect();
        trie(&leaves, &keys)
    }

    /// Headers from the oldest ancestor to the anchor, each the parent of the next.
    fn headers(&self, spec: EvmSpecId) -> Vec<Header> {
        let cancun = !matches!(spec, EvmSpecId::Shanghai);
        let prague = matches!(spec, EvmSpecId::Prague | EvmSpecId::Osaka);
        let mut headers: Vec<Header> = Vec::new();
        for k in (0..=self.ancestors).rev() {
            let parent_hash = headers.last().map_or(B256::ZERO, Header::hash_slow);
            headers.push(Header {
                parent_hash,
                beneficiary: self.coinbase,
                state_root: if k == 0 { self.state_root() } else { B256::repeat_byte(k as u8) },
                number: self.number - k,
                gas_limit: self.gas_limit,
                timestamp: self.timestamp - 12 * k,
                mix_hash: self.prevrandao,
                base_fee_per_gas: Some(self.base_fee),
                withdrawals_root: Some(EMPTY_ROOT_HASH),
                blob_gas_used: cancun.then_some(0),
                excess_blob_gas: cancun.then_some(0),
                parent_beacon_block_root: cancun.then_some(B256::ZERO),
                requests_hash: prague.then_some(B256::ZERO),
                ..Default::default()
            });
        }
        headers
    }

    /// The anchor of the chain's anchor block.
    pub fn anchor(&self, spec: EvmSpecId) -> EvmAnchorV1 {
        let header = self.headers(spec).pop().expect("at least the anchor header");
        EvmAnchorV1 {
            chain_id: self.chain_id,
            block_number: header.number,
            block_hash: header.hash_slow(),
            state_root: header.state_root,
            timestamp: header.timestamp,
            base_fee: self.base_fee,
            gas_limit: header.gas_limit,
            coinbase: header.beneficiary,
            prevrandao: header.mix_hash,
            spec_id: spec,
            excess_blob_gas: header.excess_blob_gas,
            header: Some(alloy_rlp::encode(&header).into()),
        }
    }

    /// A witness proving `addresses` (existing or not) and `slots`, with the
    /// code of every proven contract and the configured ancestor headers.
    pub fn witness(
        &self,
        spec: EvmSpecId,
        addresses: &[Address],
        slots: &[(Address, B256)],
    ) -> EvmWitnessV1 {
        let mut addresses = addresses.to_vec();
        addresses.sort();
        addresses.dedup();
        let (_, proofs) = self.state(&addresses);
        let mut accounts = Vec::new();
        let mut codes = Vec::new();
        for (address, proof) in addresses.iter().zip(proofs) {
            let acc = self.accounts.get(address);
            let my_slots: Vec<B256> =
                slots.iter().filter(|(a, _)| a == address).map(|(_, s)| *s).collect();
            let storage = match acc {
                Some(acc) => {
                    let (_, sproofs) = Self::storage_trie(acc, &my_slots);
                    my_slots
                        .iter()
                        .zip(sproofs)
                        .map(|(slot, proof)| StorageWitnessV1 {
                            slot: *slot,
                            value: acc.storage.get(slot).copied().unwrap_or_default(),
                            proof,
                        })
                        .collect()
                }
                None => Vec::new(),
            };
            if let Some(acc) = acc.filter(|a| !a.code.is_empty()) {
                codes.push(acc.code.clone());
            }
            accounts.push(AccountWitnessV1 {
                address: *address,
                proof,
                account: acc.map(|a| {
                    let t = Self::trie_account(a);
                    AccountStateV1 {
                        nonce: t.nonce,
                        balance: t.balance,
                        storage_root: t.storage_root,
                        code_hash: t.code_hash,
                    }
                }),
                storage,
            });
        }
        let mut headers = self.headers(spec);
        let anchor = headers.pop().expect("anchor header");
        let mut w = EvmWitnessV1 {
            header: alloy_rlp::encode(&anchor).into(),
            ancestors: headers.iter().rev().map(|h| alloy_rlp::encode(h).into()).collect(),
            accounts,
            codes,
        };
        codes_dedup(&mut w);
        w.canonicalize();
        w
    }
}

fn codes_dedup(w: &mut EvmWitnessV1) {
    w.codes.sort_by_cached_key(|c| keccak256(c));
    w.codes.dedup();
}
