//! Witness verification against the anchor, and the closed-world revm database
//! over the verified state.

use crate::OperationalError;
use alloy_consensus::Header;
use alloy_primitives::{keccak256, map::HashMap, Address, Bytes, B256, U256};
use alloy_rlp::Decodable;
use alloy_trie::{proof::verify_proof, Nibbles, TrieAccount, EMPTY_ROOT_HASH, KECCAK_EMPTY};
use resolvd_proto::{EvmAnchorV1, EvmWitnessV1};
use revm::{
    bytecode::Bytecode,
    primitives::{StorageKey, StorageValue},
    state::AccountInfo,
    Database,
};

/// One proven account: its state (None: proven absent) and proven slots.
#[derive(Clone, Debug)]
struct ProvenAccount {
    info: Option<TrieAccount>,
    storage: HashMap<B256, U256>,
}

/// State proven against an anchor: every entry was checked against the anchor's
/// state root (accounts, slots), its code hash (code) or the anchor header's
/// parent chain (block hashes).
#[derive(Clone, Debug)]
pub struct VerifiedState {
    accounts: HashMap<Address, ProvenAccount>,
    codes: HashMap<B256, Bytecode>,
    block_hashes: HashMap<u64, B256>,
}

fn header_of(rlp: &Bytes) -> Result<Header, OperationalError> {
    let mut slice = rlp.as_ref();
    let header = Header::decode(&mut slice)
        .map_err(|e| OperationalError::HeaderMismatch(format!("not an RLP header: {e}")))?;
    if !slice.is_empty() {
        return Err(OperationalError::HeaderMismatch("trailing bytes after the header".into()));
    }
    Ok(header)
}

fn mismatch(field: &str) -> OperationalError {
    OperationalError::HeaderMismatch(format!("{field} differs from the anchor"))
}

/// Checks the anchor header: `keccak(rlp(header)) == blockHash` and every field
/// the anchor commits to.
fn check_header(
    anchor: &EvmAnchorV1,
    header: &Header,
    rlp: &Bytes,
) -> Result<(), OperationalError> {
    if keccak256(rlp) != anchor.block_hash {
        return Err(mismatch("block hash"));
    }
    let checks = [
        (header.state_root == anchor.state_root, "state root"),
        (header.number == anchor.block_number, "number"),
        (header.timestamp == anchor.timestamp, "timestamp"),
        (header.base_fee_per_gas == Some(anchor.base_fee), "base fee"),
        (header.gas_limit == anchor.gas_limit, "gas limit"),
        (header.beneficiary == anchor.coinbase, "coinbase"),
        (header.mix_hash == anchor.prevrandao, "prevrandao"),
        (header.excess_blob_gas == anchor.excess_blob_gas, "excess blob gas"),
    ];
    match checks.iter().find(|(ok, _)| !ok) {
        Some((_, field)) => Err(mismatch(field)),
        None => Ok(()),
    }
}

impl VerifiedState {
    /// Verifies `witness` against `anchor` before anything runs: the header,
    /// the ancestor chain, every account and slot proof, and every code hash.
    pub fn verify(anchor: &EvmAnchorV1, witness: &EvmWitnessV1) -> Result<Self, OperationalError> {
        let header = header_of(&witness.header)?;
        check_header(anchor, &header, &witness.header)?;

        // Ancestors: each the parent of the one before, back from the anchor.
        let mut block_hashes = HashMap::default();
        let mut child = header;
        for (index, rlp) in witness.ancestors.iter().enumerate() {
            let parent = header_of(rlp)?;
            let hash = keccak256(rlp);
            if hash != child.parent_hash || parent.number.checked_add(1) != Some(child.number) {
                return Err(OperationalError::AncestorNotLinked { index });
            }
            block_hashes.insert(parent.number, hash);
            child = parent;
        }

        let mut accounts = HashMap::default();
        let mut code_hashes = Vec::new();
        for a in &witness.accounts {
            let invalid = |reason: String| OperationalError::InvalidAccountProof {
                address: a.address,
                reason,
            };
            // Only an empty trie has no node to show.
            if a.proof.is_empty() && anchor.state_root != EMPTY_ROOT_HASH {
                return Err(invalid("empty proof".into()));
            }
            let info = a.account.as_ref().map(|s| TrieAccount {
                nonce: s.nonce,
                balance: s.balance,
                storage_root: s.storage_root,
                code_hash: s.code_hash,
            });
            let key = Nibbles::unpack(keccak256(a.address));
            let expected = info.as_ref().map(alloy_rlp::encode);
            verify_proof(anchor.state_root, key, expected, &a.proof)
                .map_err(|e| invalid(e.to_string()))?;
            let mut storage = HashMap::default();
            for s in &a.storage {
                // The decoder refuses this already; checked again as it guards proofs.
                let Some(info) = &info else {
                    return Err(invalid("storage under an absent account".into()));
                };
                if s.proof.is_empty() && info.storage_root != EMPTY_ROOT_HASH {
                    return Err(OperationalError::InvalidStorageProof {
                        address: a.address,
                        slot: s.slot,
                        reason: "empty proof".into(),
                    });
                }
                let key = Nibbles::unpack(keccak256(s.slot));
                let expected = (!s.value.is_zero()).then(|| alloy_rlp::encode(s.value));
                verify_proof(info.storage_root, key, expected, &s.proof).map_err(|e| {
                    OperationalError::InvalidStorageProof {
                        address: a.address,
                        slot: s.slot,
                        reason: e.to_string(),
                    }
                })?;
                storage.insert(s.slot, s.value);
            }
            if let Some(info) = &info {
                code_hashes.push(info.code_hash);
            }
            accounts.insert(a.address, ProvenAccount { info, storage });
        }

        let mut codes = HashMap::default();
        for code in &witness.codes {
            let hash = keccak256(code);
            if !code_hashes.contains(&hash) {
                return Err(OperationalError::UnreferencedCode(hash));
            }
            codes.insert(hash, Bytecode::new_raw(code.clone()));
        }
        Ok(Self { accounts, codes, block_hashes })
    }

    /// The proven pre-state of a slot (zero for a proven-absent account).
    pub fn storage(&self, address: Address, slot: B256) -> Result<U256, OperationalError> {
        let account =
            self.accounts.get(&address).ok_or(OperationalError::MissingAccountWitness(address))?;
        if account.info.is_none() {
            return Ok(U256::ZERO);
        }
        account
            .storage
            .get(&slot)
            .copied()
            .ok_or(OperationalError::MissingStorageWitness { address, slot })
    }

    /// The proven nonce of an account (zero if proven absent).
    pub fn nonce(&self, address: Address) -> Result<u64, OperationalError> {
        let account =
            self.accounts.get(&address).ok_or(OperationalError::MissingAccountWitness(address))?;
        Ok(account.info.as_ref().map_or(0, |i| i.nonce))
    }
}

/// A revm database that answers only from verified state. Any other read is a
/// typed operational error, never a default value.
#[derive(Debug)]
pub struct ClosedWorldDb<'a> {
    state: &'a VerifiedState,
}

impl<'a> ClosedWorldDb<'a> {
    /// A database over `state`.
    pub fn new(state: &'a VerifiedState) -> Self {
        Self { state }
    }
}

impl Database for ClosedWorldDb<'_> {
    type Error = OperationalError;

    fn basic(&mut self, address: Address) -> Result<Option<AccountInfo>, Self::Error> {
        let account = self
            .state
            .accounts
            .get(&address)
            .ok_or(OperationalError::MissingAccountWitness(address))?;
        Ok(account.info.as_ref().map(|i| AccountInfo {
            balance: i.balance,
            nonce: i.nonce,
            code_hash: i.code_hash,
            code: None,
            ..Default::default()
        }))
    }

    fn code_by_hash(&mut self, code_hash: B256) -> Result<Bytecode, Self::Error> {
        if code_hash == KECCAK_EMPTY {
            return Ok(Bytecode::default());
        }
        self.state
            .codes
            .get(&code_hash)
            .cloned()
            .ok_or(OperationalError::MissingCodeWitness(code_hash))
    }

    fn storage(
        &mut self,
        address: Address,
        index: StorageKey,
    ) -> Result<StorageValue, Self::Error> {
        self.state.storage(address, B256::from(index))
    }

    fn block_hash(&mut self, number: u64) -> Result<B256, Self::Error> {
        self.state
            .block_hashes
            .get(&number)
            .copied()
            .ok_or(OperationalError::MissingBlockHashWitness(number))
    }
}
