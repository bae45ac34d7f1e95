//! The node's RocksDB store: one database, one column family per kind of record.
//!
//! | column family | key | value | durability |
//! | --- | --- | --- | --- |
//! | `content` | content hash (32) | type tag length (1), type tag, canonical bytes | WAL |
//! | `protection` | domain separator ‖ dealId (64) | signed digest (32) | **fsync before return** |
//! | `disputes` | dealId (32) | dispute state bytes | WAL |
//! | `partials` | dealId ‖ signer index (36) | wire `SignedVerdict` | WAL |
//! | `certificates` | dealId (32) | wire `QuorumCertificate` | WAL |
//! | `cursor` | name | u64 big-endian | fsync |
//! | `evidence` | dealId ‖ resolver index (36) | slashing transaction hash (32) | WAL |
//! | `txs` | intent key | in-flight transaction, JSON | fsync |
//! | `ledger` | `ledger` | the fee ledger, JSON | fsync |
//!
//! Content is stored hash-first: bytes go in only under the hash they hash to.
//! Slashing-protection records are applied atomically (a process-wide lock)
//! and synced to disk before the decision is returned, so a signature never
//! leaves the process before its record is durable, and a restart never signs
//! a different commitment for the same deal.

/// EIP-3076 slashing-protection interchange.
pub mod interchange;

use alloy_primitives::B256;
use resolvd_consensus::protection::{decide, Decision, ProtectionKey, ProtectionStore};
pub use resolvd_engine::DisputeStatus;
use resolvd_proto::{
    content_hash,
    hash::TYPE_TAGS,
    wire::{DisputeAnnouncement, QuorumCertificate, SignedVerdict, WireMessage},
    ContentHash,
};
use rocksdb::{ColumnFamilyDescriptor, Options, WriteOptions, DB};
use std::{path::Path, sync::Mutex};

/// Column families, in creation order.
pub const COLUMN_FAMILIES: [&str; 9] = [
    "content",
    "protection",
    "disputes",
    "partials",
    "certificates",
    "cursor",
    "evidence",
    "txs",
    "ledger",
];

/// A store failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// RocksDB failed.
    #[error("rocksdb: {0}")]
    Rocks(#[from] rocksdb::Error),
    /// Bytes offered under a hash they do not hash to.
    #[error("content does not hash to {expected} under {type_tag}: it hashes to {computed}")]
    HashMismatch {
        /// Type tag used.
        type_tag: String,
        /// Hash claimed.
        expected: ContentHash,
        /// Hash of the bytes.
        computed: ContentHash,
    },
    /// A JSON record that does not (de)serialise.
    #[error("corrupt record {key} in {column}: {source}")]
    Json {
        /// Its column family.
        column: &'static str,
        /// Its key.
        key: String,
        /// What serde_json said.
        source: serde_json::Error,
    },
    /// A type tag resolvd does not know.
    #[error("unknown content type tag {0:?}")]
    UnknownTypeTag(String),
    /// A stored record does not decode (disk corruption or a foreign database).
    #[error("corrupt {what} record")]
    Corrupt {
        /// Which record.
        what: &'static str,
    },
}

/// Name of the chain-id record (in the cursor column).
const CHAIN_ID: &str = "meta#chain_id";
const RECORD_SEQ: &str = "meta#member_record_seq";

/// One slashing-protection record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProtectionEntry {
    /// Domain and deal.
    pub key: ProtectionKey,
    /// Digest of the commitment signed.
    pub digest: ContentHash,
    /// Unix seconds, when recorded (absent in records older than that).
    pub signed_at: Option<u64>,
}

/// An import refused.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// Records contradicting the data dir's (or each other).
    #[error("{} conflicting protection record(s)", .0.len())]
    Conflicts(Vec<ProtectionKey>),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// `digest ‖ signed_at (u64 BE)`; records written before `signed_at` was
/// kept are the 32-byte digest alone.
fn protection_bytes(digest: ContentHash, signed_at: Option<u64>) -> Vec<u8> {
    let mut v = digest.to_vec();
    if let Some(t) = signed_at {
        v.extend_from_slice(&t.to_be_bytes());
    }
    v
}

fn protection_value(v: &[u8]) -> Result<(ContentHash, Option<u64>), StoreError> {
    match v.len() {
        32 => Ok((ContentHash::from_slice(v), None)),
        40 => Ok((
            ContentHash::from_slice(&v[..32]),
            Some(u64::from_be_bytes(v[32..].try_into().expect("8 bytes"))),
        )),
        _ => Err(StoreError::Corrupt { what: "protection" }),
    }
}

/// The node's database.
#[derive(Debug)]
pub struct Store {
    db: DB,
    /// Serialises check-and-record of slashing protection.
    protection: Mutex<()>,
}

fn synced() -> WriteOptions {
    let mut w = WriteOptions::default();
    w.set_sync(true);
    w
}

fn known_tag(tag: &str) -> Result<&'static str, StoreError> {
    TYPE_TAGS
        .iter()
        .map(|(t, _)| *t)
        .find(|t| *t == tag)
        .ok_or_else(|| StoreError::UnknownTypeTag(tag.into()))
}

impl Store {
    /// Opens (creating if needed) the database in `path`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        let cfs =
            COLUMN_FAMILIES.iter().map(|n| ColumnFamilyDescriptor::new(*n, Options::default()));
        let db = DB::open_cf_descriptors(&opts, path, cfs)?;
        Ok(Self { db, protection: Mutex::new(()) })
    }

    fn cf(&self, name: &'static str) -> &rocksdb::ColumnFamily {
        // Every name in COLUMN_FAMILIES is created by `open`.
        self.db.cf_handle(name).expect("column family created at open")
    }

    /// Stores `bytes` under their content hash for `type_tag`; returns the hash.
    pub fn put_content(&self, type_tag: &str, bytes: &[u8]) -> Result<ContentHash, StoreError> {
        let tag = known_tag(type_tag)?;
        let hash = content_hash(tag, bytes);
        let mut value = Vec::with_capacity(1 + tag.len() + bytes.len());
        value.push(tag.len() as u8);
        value.extend_from_slice(tag.as_bytes());
        value.extend_from_slice(bytes);
        self.db.put_cf(self.cf("content"), hash, value)?;
        Ok(hash)
    }

    /// Stores `bytes` only if they hash to `expected` (hash before store).
    pub fn put_content_expecting(
        &self,
        type_tag: &str,
        bytes: &[u8],
        expected: &ContentHash,
    ) -> Result<(), StoreError> {
        let computed = content_hash(known_tag(type_tag)?, bytes);
        if computed != *expected {
            return Err(StoreError::HashMismatch {
                type_tag: type_tag.into(),
                expected: *expected,
                computed,
            });
        }
        self.put_content(type_tag, bytes).map(drop)
    }

    /// The content stored under `hash`: its type tag and bytes.
    pub fn get_content(&self, hash: &ContentHash) -> Result<Option<(String, Vec<u8>)>, StoreError> {
        let Some(value) = self.db.get_cf(self.cf("content"), hash)? else { return Ok(None) };
        let corrupt = || StoreError::Corrupt { what: "content" };
        let (&len, rest) = value.split_first().ok_or_else(corrupt)?;
        let len = usize::from(len);
        if rest.len() < len {
            return Err(corrupt());
        }
        let (tag, bytes) = rest.split_at(len);
        let tag = std::str::from_utf8(tag).map_err(|_| corrupt())?;
        // Re-check on the way out: what is served is what was committed.
        if content_hash(tag, bytes) != *hash {
            return Err(corrupt());
        }
        Ok(Some((tag.to_owned(), bytes.to_vec())))
    }

    /// The slashing-protection record of `key`, if any.
    pub fn protection_record(
        &self,
        key: &ProtectionKey,
    ) -> Result<Option<ContentHash>, StoreError> {
        match self.db.get_cf(self.cf("protection"), key.to_bytes())? {
            None => Ok(None),
            Some(v) => Ok(Some(protection_value(&v)?.0)),
        }
    }

    /// Every slashing-protection record (for the interchange export).
    pub fn protection_records(&self) -> Result<Vec<ProtectionEntry>, StoreError> {
        let mut out = Vec::new();
        for item in self.db.iterator_cf(self.cf("protection"), rocksdb::IteratorMode::Start) {
            let (k, v) = item?;
            if k.len() != 64 {
                return Err(StoreError::Corrupt { what: "protection" });
            }
            let (digest, signed_at) = protection_value(&v)?;
            out.push(ProtectionEntry {
                key: ProtectionKey {
                    domain_separator: B256::from_slice(&k[..32]),
                    deal_id: B256::from_slice(&k[32..]),
                },
                digest,
                signed_at,
            });
        }
        Ok(out)
    }

    /// Merges `entries` into the protection records, all or nothing (one
    /// synced batch, under the signing lock): a key already recorded with
    /// the same digest is left as it is; one recorded with another digest,
    /// or listed twice with different digests, is a conflict and nothing is
    /// written. Returns (written, unchanged).
    pub fn import_protection(
        &self,
        entries: &[ProtectionEntry],
    ) -> Result<(usize, usize), ImportError> {
        let _guard = self.protection.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut conflicts = Vec::new();
        let mut new: std::collections::BTreeMap<[u8; 64], &ProtectionEntry> = Default::default();
        let mut unchanged = 0;
        for e in entries {
            let k = e.key.to_bytes();
            match (self.protection_record(&e.key)?, new.get(&k)) {
                (Some(d), _) if d == e.digest => unchanged += 1,
                (Some(_), _) => conflicts.push(e.key),
                (None, Some(other)) if other.digest != e.digest => conflicts.push(e.key),
                (None, Some(_)) => unchanged += 1,
                (None, None) => {
                    new.insert(k, e);
                }
            }
        }
        if !conflicts.is_empty() {
            return Err(ImportError::Conflicts(conflicts));
        }
        let mut batch = rocksdb::WriteBatch::default();
        for (k, e) in &new {
            batch.put_cf(self.cf("protection"), k, protection_bytes(e.digest, e.signed_at));
        }
        self.db.write_opt(batch, &synced()).map_err(StoreError::from)?;
        Ok((new.len(), unchanged))
    }

    /// Records the chain id the data dir is used on (the first run's).
    pub fn set_chain_id(&self, chain_id: u64) -> Result<(), StoreError> {
        self.set_cursor(CHAIN_ID, chain_id)
    }

    /// The chain id recorded by [`Self::set_chain_id`].
    pub fn chain_id(&self) -> Result<Option<u64>, StoreError> {
        self.cursor(CHAIN_ID)
    }

    /// Records the `seq` of the last member record this node signed (fsync'd).
    pub fn set_record_seq(&self, seq: u64) -> Result<(), StoreError> {
        self.set_cursor(RECORD_SEQ, seq)
    }

    /// The `seq` recorded by [`Self::set_record_seq`].
    pub fn record_seq(&self) -> Result<Option<u64>, StoreError> {
        self.cursor(RECORD_SEQ)
    }

    /// Persists the chain cursor `name` (fsync'd).
    pub fn set_cursor(&self, name: &str, block: u64) -> Result<(), StoreError> {
        self.db.put_cf_opt(self.cf("cursor"), name, block.to_be_bytes(), &synced())?;
        Ok(())
    }

    /// Persists the chain cursor `name` and the hash of that block
    /// (atomically), so a restart can tell whether the block is still
    /// canonical. Not fsync'd: it is written once per block, and a cursor
    /// lost to a power cut (never to a process crash) is an older one, from
    /// which the node scans those blocks again; handling them is idempotent,
    /// and what they led to was written (fsync'd) before the cursor.
    pub fn set_cursor_at(&self, name: &str, block: u64, hash: B256) -> Result<(), StoreError> {
        let mut batch = rocksdb::WriteBatch::default();
        batch.put_cf(self.cf("cursor"), name, block.to_be_bytes());
        batch.put_cf(self.cf("cursor"), format!("{name}#hash"), hash);
        self.db.write(batch)?;
        Ok(())
    }

    /// The cursor `name` with its block hash, if both are set.
    pub fn cursor_at(&self, name: &str) -> Result<Option<(u64, B256)>, StoreError> {
        let Some(block) = self.cursor(name)? else { return Ok(None) };
        match self.db.get_cf(self.cf("cursor"), format!("{name}#hash"))? {
            Some(v) if v.len() == 32 => Ok(Some((block, B256::from_slice(&v)))),
            Some(_) => Err(StoreError::Corrupt { what: "cursor hash" }),
            None => Ok(None),
        }
    }

    /// The chain cursor `name`, if set.
    pub fn cursor(&self, name: &str) -> Result<Option<u64>, StoreError> {
        match self.db.get_cf(self.cf("cursor"), name)? {
            None => Ok(None),
            Some(v) => v
                .as_slice()
                .try_into()
                .map(|b| Some(u64::from_be_bytes(b)))
                .map_err(|_| StoreError::Corrupt { what: "cursor" }),
        }
    }
}

impl Store {
    /// Persists a dispute: status byte, then the wire announcement.
    pub fn put_dispute(
        &self,
        announcement: &DisputeAnnouncement,
        status: DisputeStatus,
    ) -> Result<(), StoreError> {
        let mut value = vec![status as u8];
        value.extend_from_slice(&announcement.encode_wire());
        self.db.put_cf(self.cf("disputes"), announcement.deal_id, value)?;
        Ok(())
    }

    /// Every persisted dispute.
    pub fn disputes(&self) -> Result<Vec<(DisputeAnnouncement, DisputeStatus)>, StoreError> {
        let corrupt = || StoreError::Corrupt { what: "dispute" };
        let mut out = Vec::new();
        for item in self.db.iterator_cf(self.cf("disputes"), rocksdb::IteratorMode::Start) {
            let (_, value) = item?;
            let (&status, rest) = value.split_first().ok_or_else(corrupt)?;
            let status = match status {
                0 => DisputeStatus::Active,
                1 => DisputeStatus::Settled,
                2 => DisputeStatus::Expired,
                _ => return Err(corrupt()),
            };
            out.push((DisputeAnnouncement::decode_wire(rest).map_err(|_| corrupt())?, status));
        }
        Ok(out)
    }

    /// Deletes a finished dispute's records: the dispute, its partials and its
    /// certificate, in one atomic batch. Slashing-protection and slashing
    /// records are never pruned (protection must outlive every restart).
    pub fn prune_deal(&self, deal_id: &B256) -> Result<(), StoreError> {
        let mut batch = rocksdb::WriteBatch::default();
        batch.delete_cf(self.cf("disputes"), deal_id);
        batch.delete_cf(self.cf("certificates"), deal_id);
        let mut end = deal_id.to_vec();
        end.extend_from_slice(&[0xff; 5]);
        // Partial keys are dealId ‖ u32 index: every one sorts below dealId ‖ ff×5.
        batch.delete_range_cf(self.cf("partials"), deal_id.as_slice(), end.as_slice());
        self.db.write(batch)?;
        Ok(())
    }

    /// Persists a partial signature (ours or a verified one received).
    pub fn put_partial(&self, p: &SignedVerdict) -> Result<(), StoreError> {
        let mut key = p.commitment.deal_id.to_vec();
        key.extend_from_slice(&p.signer_index.to_be_bytes());
        self.db.put_cf(self.cf("partials"), key, p.encode_wire())?;
        Ok(())
    }

    /// The persisted partials of `deal_id` (at most one per signer).
    pub fn partials(&self, deal_id: &B256) -> Result<Vec<SignedVerdict>, StoreError> {
        let mut out = Vec::new();
        let iter = self.db.prefix_iterator_cf(self.cf("partials"), deal_id);
        for item in iter {
            let (key, value) = item?;
            if !key.starts_with(deal_id.as_slice()) {
                break;
            }
            out.push(
                SignedVerdict::decode_wire(&value)
                    .map_err(|_| StoreError::Corrupt { what: "partial" })?,
            );
        }
        Ok(out)
    }

    /// Persists a certificate.
    pub fn put_certificate(&self, c: &QuorumCertificate) -> Result<(), StoreError> {
        self.db.put_cf(self.cf("certificates"), c.commitment.deal_id, c.encode_wire())?;
        Ok(())
    }

    /// The persisted certificate of `deal_id`.
    pub fn certificate(&self, deal_id: &B256) -> Result<Option<QuorumCertificate>, StoreError> {
        self.db
            .get_cf(self.cf("certificates"), deal_id)?
            .map(|v| {
                QuorumCertificate::decode_wire(&v)
                    .map_err(|_| StoreError::Corrupt { what: "certificate" })
            })
            .transpose()
    }

    /// Records that evidence against `resolver` for `deal_id` was dealt with.
    pub fn put_slashed(&self, deal_id: &B256, resolver: u32, tx: B256) -> Result<(), StoreError> {
        let mut key = deal_id.to_vec();
        key.extend_from_slice(&resolver.to_be_bytes());
        self.db.put_cf(self.cf("evidence"), key, tx)?;
        Ok(())
    }

    /// Whether evidence against `resolver` for `deal_id` was dealt with.
    pub fn slashed(&self, deal_id: &B256, resolver: u32) -> Result<bool, StoreError> {
        let mut key = deal_id.to_vec();
        key.extend_from_slice(&resolver.to_be_bytes());
        Ok(self.db.get_cf(self.cf("evidence"), key)?.is_some())
    }

    /// Estimated bytes of live content (RocksDB's estimate for the column family).
    pub fn content_bytes(&self) -> Result<u64, StoreError> {
        Ok(self
            .db
            .property_int_value_cf(self.cf("content"), "rocksdb.estimate-live-data-size")?
            .unwrap_or(0)
            .saturating_add(
                self.db
                    .property_int_value_cf(self.cf("content"), "rocksdb.cur-size-all-mem-tables")?
                    .unwrap_or(0),
            ))
    }

    /// Every (deal, resolver) whose evidence was dealt with.
    pub fn slashed_all(&self) -> Result<Vec<(B256, u32)>, StoreError> {
        let mut out = Vec::new();
        for item in self.db.iterator_cf(self.cf("evidence"), rocksdb::IteratorMode::Start) {
            let (key, _) = item?;
            if key.len() != 36 {
                return Err(StoreError::Corrupt { what: "slashing record" });
            }
            let resolver = u32::from_be_bytes(key[32..].try_into().expect("4 bytes"));
            out.push((B256::from_slice(&key[..32]), resolver));
        }
        Ok(out)
    }
}

impl ProtectionStore for &Store {
    /// Applies the rule under a process-wide lock; a new record is fsync'd
    /// before the decision is returned.
    fn check_and_record(
        &mut self,
        key: &ProtectionKey,
        digest: ContentHash,
    ) -> resolvd_consensus::Result<Decision> {
        let _guard = self.protection.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let store_err = |e: StoreError| resolvd_consensus::Error::Store(e.to_string());
        let decision = decide(self.protection_record(key).map_err(store_err)?, digest);
        if decision == Decision::Record {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            self.db
                .put_cf_opt(
                    self.cf("protection"),
                    key.to_bytes(),
                    protection_bytes(digest, Some(now)),
                    &synced(),
                )
                .map_err(|e| store_err(e.into()))?;
        }
        Ok(decision)
    }
}

/// A shared store as a slashing-protection store (the signer lives in the
/// node's event loop while the API and workers hold the same store).
#[derive(Clone, Debug)]
pub struct SharedStore(pub std::sync::Arc<Store>);

impl ProtectionStore for SharedStore {
    fn check_and_record(
        &mut self,
        key: &ProtectionKey,
        digest: ContentHash,
    ) -> resolvd_consensus::Result<Decision> {
        (&*self.0).check_and_record(key, digest)
    }
}

/// The fee ledger (JSON, fsync'd).
impl Store {
    /// The operator's fee ledger ([`crate::economics::Ledger`]), if recorded.
    pub fn ledger(&self) -> Result<Option<crate::economics::Ledger>, StoreError> {
        let Some(bytes) = self.db.get_cf(self.cf("ledger"), "ledger")? else { return Ok(None) };
        serde_json::from_slice(&bytes).map(Some).map_err(|_| StoreError::Corrupt { what: "ledger" })
    }

    /// Records the fee ledger (fsync'd).
    pub fn put_ledger(&self, ledger: &crate::economics::Ledger) -> Result<(), StoreError> {
        let bytes =
            serde_json::to_vec(ledger).map_err(|_| StoreError::Corrupt { what: "ledger" })?;
        self.db.put_cf_opt(self.cf("ledger"), "ledger", bytes, &synced())?;
        Ok(())
    }
}

/// Small JSON records (the in-flight transactions of the `txs` column, one
/// per intent key: small, rare and read by operators inspecting a data dir),
/// written with fsync.
impl Store {
    /// The record `key` of `column`, if any.
    pub fn json<T: serde::de::DeserializeOwned>(
        &self,
        column: JsonColumn,
        key: &str,
    ) -> Result<Option<T>, StoreError> {
        let Some(bytes) = self.db.get_cf(self.cf(column.name()), key)? else { return Ok(None) };
        serde_json::from_slice(&bytes).map(Some).map_err(|source| StoreError::Json {
            column: column.name(),
            key: key.to_owned(),
            source,
        })
    }

    /// Writes the record `key` of `column` (fsync'd).
    pub fn put_json<T: serde::Serialize>(
        &self,
        column: JsonColumn,
        key: &str,
        value: &T,
    ) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(value).map_err(|source| StoreError::Json {
            column: column.name(),
            key: key.to_owned(),
            source,
        })?;
        self.db.put_cf_opt(self.cf(column.name()), key, bytes, &synced())?;
        Ok(())
    }

    /// Deletes the record `key` of `column` (fsync'd).
    pub fn delete_json(&self, column: JsonColumn, key: &str) -> Result<(), StoreError> {
        self.db.delete_cf_opt(self.cf(column.name()), key, &synced())?;
        Ok(())
    }
}

/// A column family of JSON records ([`Store::json`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JsonColumn {
    /// `txs`: in-flight transactions by intent key.
    Txs,
}

impl JsonColumn {
    const fn name(self) -> &'static str {
        match self {
            Self::Txs => "txs",
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use alloy_primitives::Address;
    use resolvd_consensus::{protection::ProtectedSigner, Error, SecretKey};
    use resolvd_proto::{ReexecVerdict, VerdictCommitment, VerdictDomain};

    /// A made-up commitment (deal 0x0101…) for unit tests.
    pub(crate) fn commitment(outcome: ReexecVerdict) -> VerdictCommitment {
        VerdictCommitment {
            deal_id: B256::repeat_byte(1),
            spec_hash: B256::repeat_byte(2),
            delivery_hash: B256::repeat_byte(3),
            prestate_anchor_hash: B256::repeat_byte(4),
            prestate_root: B256::repeat_byte(5),
            backend_id: B256::repeat_byte(6),
            backend_version_hash: B256::repeat_byte(7),
            outcome,
            result_hash: B256::repeat_byte(8),
            trace_hash: B256::repeat_byte(9),
        }
    }

    fn domain() -> VerdictDomain {
        VerdictDomain {
            name: "resolvd".into(),
            version: "1".into(),
            chain_id: 31337,
            verifying_contract: Address::repeat_byte(0xe5),
        }
    }

    #[test]
    fn content_is_stored_hash_first_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let hash = {
            let store = Store::open(dir.path()).unwrap();
            let hash = store.put_content("spec", b"canonical").unwrap();
            let wrong = content_hash("spec", b"other");
            assert!(matches!(
                store.put_content_expecting("spec", b"canonical", &wrong),
                Err(StoreError::HashMismatch { .. })
            ));
            assert!(matches!(
                store.put_content("nonsense", b"x"),
                Err(StoreError::UnknownTypeTag(_))
            ));
            hash
        };
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.get_content(&hash).unwrap(), Some(("spec".into(), b"canonical".to_vec())));
        assert_eq!(store.get_content(&B256::ZERO).unwrap(), None);
    }

    #[test]
    fn protection_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let d = domain();
        let first = {
            let store = Store::open(dir.path()).unwrap();
            let mut signer = ProtectedSigner::new(SecretKey::from_seed(&[7; 32]).unwrap(), &store);
            signer.sign(&d, &commitment(ReexecVerdict::Reproduced)).unwrap()
        };
        let store = Store::open(dir.path()).unwrap();
        let mut signer = ProtectedSigner::new(SecretKey::from_seed(&[7; 32]).unwrap(), &store);
        assert_eq!(signer.sign(&d, &commitment(ReexecVerdict::Reproduced)).unwrap(), first);
        let err = signer.sign(&d, &commitment(ReexecVerdict::Failed)).unwrap_err();
        assert!(matches!(err, Error::SlashingProtection { .. }), "{err}");
    }

    #[test]
    fn the_member_record_seq_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            assert_eq!(store.record_seq().unwrap(), None);
            store.set_record_seq(1_700_000_000_123).unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.record_seq().unwrap(), Some(1_700_000_000_123));
        assert_eq!(store.chain_id().unwrap(), None, "its own key");
    }

    #[test]
    fn cursor_roundtrip() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.cursor("chain").unwrap(), None);
        store.set_cursor("chain", 42).unwrap();
        assert_eq!(store.cursor_at("chain").unwrap(), None, "no hash recorded yet");
        store.set_cursor_at("chain", 43, B256::repeat_byte(4)).unwrap();
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.cursor("chain").unwrap(), Some(43));
        assert_eq!(store.cursor_at("chain").unwrap(), Some((43, B256::repeat_byte(4))));
    }

    /// A process that records a decision and then dies without any clean-up
    /// (abort: no destructors, no flush) leaves the record behind.
    #[test]
    fn protection_record_survives_a_crash() {
        if let Some(path) = std::env::var_os("RESOLVD_CRASH_CHILD") {
            let store = Store::open(Path::new(&path)).unwrap();
            let d = domain();
            let c = commitment(ReexecVerdict::Reproduced);
            let key =
                ProtectionKey { domain_separator: d.eip712().separator(), deal_id: c.deal_id };
            let mut s = &store;
            assert_eq!(s.check_and_record(&key, c.eip712_digest(&d)).unwrap(), Decision::Record);
            std::process::abort();
        }
        let dir = tempfile::tempdir().unwrap();
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "store::tests::protection_record_survives_a_crash",
                "--test-threads=1",
            ])
            .env("RESOLVD_CRASH_CHILD", dir.path())
            .output()
            .unwrap()
            .status;
        assert!(!status.success(), "the child must have aborted");
        let store = Store::open(dir.path()).unwrap();
        let mut signer = ProtectedSigner::new(SecretKey::from_seed(&[7; 32]).unwrap(), &store);
        let err = signer.sign(&domain(), &commitment(ReexecVerdict::Failed)).unwrap_err();
        assert!(matches!(err, Error::SlashingProtection { .. }), "{err}");
        signer.sign(&domain(), &commitment(ReexecVerdict::Reproduced)).unwrap();
    }

    #[test]
    fn pruning_a_deal_deletes_only_its_records_and_never_protection() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let d = domain();
        let mut signer = ProtectedSigner::new(SecretKey::from_seed(&[7; 32]).unwrap(), &store);
        let c = commitment(ReexecVerdict::Reproduced);
        signer.sign(&d, &c).unwrap();
        // Deal 0x01… and its neighbour 0x01…02 (a shared 31-byte prefix).
        let mut neighbour = c;
        neighbour.deal_id.0[31] = 2;
        let announce = |deal_id: B256| DisputeAnnouncement {
            chain_id: 31337,
            escrow: Address::repeat_byte(0xe5),
            deal_id,
            spec_hash: c.spec_hash,
            delivery_hash: c.delivery_hash,
            prestate_anchor_hash: c.prestate_anchor_hash,
            prestate_root: c.prestate_root,
            backend_id: c.backend_id,
            backend_version_hash: c.backend_version_hash,
            epoch: 1,
            resolve_deadline: 100,
            block_number: 1,
            tx_hash: B256::ZERO,
            block_hash: B256::ZERO,
            order_entropy: B256::ZERO,
        };
        for commitment in [c, neighbour] {
            store.put_dispute(&announce(commitment.deal_id), DisputeStatus::Settled).unwrap();
            for signer_index in [0, 1, u32::MAX] {
                let signature = [signer_index as u8; 96];
                store
                    .put_partial(&SignedVerdict { commitment, epoch: 1, signer_index, signature })
                    .unwrap();
            }
            store
                .put_certificate(&QuorumCertificate {
                    commitment,
                    epoch: 1,
                    non_signer_indices: vec![],
                    aggregate_signature: [9; 96],
                })
                .unwrap();
        }
        store.prune_deal(&c.deal_id).unwrap();
        assert!(store.partials(&c.deal_id).unwrap().is_empty());
        assert_eq!(store.certificate(&c.deal_id).unwrap(), None);
        assert_eq!(store.partials(&neighbour.deal_id).unwrap().len(), 3);
        assert!(store.certificate(&neighbour.deal_id).unwrap().is_some());
        let left: Vec<B256> = store.disputes().unwrap().iter().map(|(a, _)| a.deal_id).collect();
        assert_eq!(left, vec![neighbour.deal_id]);
        // Protection outlives the pruning: a different commitment is still refused.
        let err = signer.sign(&d, &commitment(ReexecVerdict::Failed)).unwrap_err();
        assert!(matches!(err, Error::SlashingProtection { .. }), "{err}");
    }
}
