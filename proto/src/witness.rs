//! `EvmWitnessV1`: the state-proof and code witness a seller attaches to an
//! EVM delivery (its hash is the delivery's `REPLAY_WITNESS` attachment).
//!
//! Tags:
//! - `EvmWitnessV1`: 1 protocolVersion, 2 header (RLP of the anchor block
//!   header), 3 ancestors (list of RLP headers: the anchor's parent first, each
//!   the parent of the one before), 4 accounts (list, strictly ascending by
//!   address), 5 codes (list of contract codes, strictly ascending by keccak256).
//! - `AccountWitnessV1`: 1 address, 2 proof (list of trie nodes from the state
//!   root), 3 account (optional; absent = an exclusion proof), 4 storage (list,
//!   strictly ascending by slot; empty for an absent account).
//! - `AccountStateV1`: 1 nonce, 2 balance, 3 storageRoot, 4 codeHash.
//! - `StorageWitnessV1`: 1 slot, 2 value (zero = absent from the storage trie),
//!   3 proof (list of trie nodes from the account's storage root).
//!
//! The decoder checks shape only (ordering, no duplicates, no storage under an
//! absent account). Proofs are verified against the anchor by the replay crate.

use crate::{
    codec::{Canonical, Reader, Writer, PROTOCOL_VERSION},
    hash::ContentType,
    DecodeError,
};
use alloy_primitives::{keccak256, Address, Bytes, B256, U256};
use serde::{Deserialize, Serialize};

/// An account's state as committed in the state trie.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccountStateV1 {
    /// Nonce.
    pub nonce: u64,
    /// Balance in wei.
    pub balance: U256,
    /// Root of the account's storage trie.
    pub storage_root: B256,
    /// keccak256 of the account's code.
    pub code_hash: B256,
}

impl Canonical for AccountStateV1 {
    fn encode_fields(&self, w: &mut Writer) {
        w.uint(1, self.nonce);
        w.u256(2, &self.balance);
        w.b256(3, &self.storage_root);
        w.b256(4, &self.code_hash);
    }

    fn decode_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            nonce: r.uint(1)?,
            balance: r.u256(2)?,
            storage_root: r.b256(3)?,
            code_hash: r.b256(4)?,
        })
    }
}

/// One storage slot and its proof.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StorageWitnessV1 {
    /// The slot.
    pub slot: B256,
    /// Its value (zero: proven absent).
    pub value: U256,
    /// Trie nodes from the storage root to the slot.
    pub proof: Vec<Bytes>,
}

impl Canonical for StorageWitnessV1 {
    fn encode_fields(&self, w: &mut Writer) {
        w.b256(1, &self.slot);
        w.u256(2, &self.value);
        w.bytes_list(3, &self.proof);
    }

    fn decode_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            slot: r.b256(1)?,
            value: r.u256(2)?,
            proof: r.bytes_list(3)?.into_iter().map(Bytes::from).collect(),
        })
    }
}

/// One account, its proof and its proven storage slots.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccountWitnessV1 {
    /// The account.
    pub address: Address,
    /// Trie nodes from the state root to the account.
    pub proof: Vec<Bytes>,
    /// Its state; `None` proves it does not exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<AccountStateV1>,
    /// Proven slots, ascending.
    pub storage: Vec<StorageWitnessV1>,
}

impl Canonical for AccountWitnessV1 {
    fn encode_fields(&self, w: &mut Writer) {
        w.address(1, &self.address);
        w.bytes_list(2, &self.proof);
        if let Some(a) = &self.account {
            w.nested(3, a);
        }
        w.list(4, &self.storage);
    }

    fn decode_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let address = r.address(1)?;
        let proof = r.bytes_list(2)?.into_iter().map(Bytes::from).collect();
        let account = r.optional(3)?.map(AccountStateV1::from_canonical_bytes).transpose()?;
        let storage: Vec<StorageWitnessV1> = r.list(4)?;
        if account.is_none() && !storage.is_empty() {
            return Err(DecodeError::InvalidWitness { reason: "storage under an absent account" });
        }
        if storage.windows(2).any(|w| w[0].slot >= w[1].slot) {
            return Err(DecodeError::InvalidWitness {
                reason: "storage slots not strictly ascending",
            });
        }
        Ok(Self { address, proof, account, storage })
    }
}

/// The replay witness of an EVM delivery.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EvmWitnessV1 {
    /// RLP of the anchor block header.
    pub header: Bytes,
    /// RLP headers of ancestors, parent first (for `BLOCKHASH`).
    pub ancestors: Vec<Bytes>,
    /// Proven accounts, ascending by address.
    pub accounts: Vec<AccountWitnessV1>,
    /// Contract codes, ascending by keccak256.
    pub codes: Vec<Bytes>,
}

impl Canonical for EvmWitnessV1 {
    fn encode_fields(&self, w: &mut Writer) {
        w.uint(1, PROTOCOL_VERSION);
        w.bytes(2, &self.header);
        w.bytes_list(3, &self.ancestors);
        w.list(4, &self.accounts);
        w.bytes_list(5, &self.codes);
    }

    fn decode_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.version()?;
        let header = r.bytes(2)?.into();
        let ancestors = r.bytes_list(3)?.into_iter().map(Bytes::from).collect();
        let accounts: Vec<AccountWitnessV1> = r.list(4)?;
        let codes: Vec<Bytes> = r.bytes_list(5)?.into_iter().map(Bytes::from).collect();
        if accounts.windows(2).any(|w| w[0].address >= w[1].address) {
            return Err(DecodeError::InvalidWitness { reason: "accounts not strictly ascending" });
        }
        let hashes: Vec<B256> = codes.iter().map(keccak256).collect();
        if hashes.windows(2).any(|w| w[0] >= w[1]) {
            return Err(DecodeError::InvalidWitness {
                reason: "codes not strictly ascending by hash",
            });
        }
        Ok(Self { header, ancestors, accounts, codes })
    }
}

impl ContentType for EvmWitnessV1 {
    const TYPE_TAG: &'static str = "evm-witness";
}

impl EvmWitnessV1 {
    /// Sorts accounts, slots and codes into their canonical order (for builders).
    pub fn canonicalize(&mut self) {
        self.accounts.sort_by_key(|a| a.address);
        for a in &mut self.accounts {
            a.storage.sort_by_key(|s| s.slot);
        }
        self.codes.sort_by_cached_key(|c| keccak256(c));
    }
}
