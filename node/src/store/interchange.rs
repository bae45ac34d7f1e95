//! Slashing-protection interchange: every protection record of a data dir as
//! a versioned JSON document, modelled on EIP-3076 (which does the same for
//! Ethereum validators' blocks and attestations), so a resolver can move to a
//! new machine without ever signing a second commitment for a deal.
//!
//! ```json
//! {
//!   "metadata": {
//!     "interchange_format": "resolvd.slashing-protection",
//!     "interchange_format_version": "1",
//!     "chain_id": "31337"
//!   },
//!   "data": [{
//!     "pubkey": "0x…48 bytes…",
//!     "signed_verdicts": [{
//!       "domain_separator": "0x…", "deal_id": "0x…",
//!       "commitment_digest": "0x…", "signed_at": "1796219996"
//!     }]
//!   }]
//! }
//! ```
//!
//! Numbers are decimal strings (as in EIP-3076). `signed_at` (Unix seconds)
//! is absent for records written before it was kept. Importing merges: a
//! record already present with the same digest is skipped, one with another
//! digest is a conflict and nothing at all is written.

use crate::store::{ProtectionEntry, Store, StoreError};
use alloy_primitives::B256;
use resolvd_consensus::protection::ProtectionKey;
use serde::{Deserialize, Serialize};

/// `metadata.interchange_format`.
pub const FORMAT: &str = "resolvd.slashing-protection";
/// `metadata.interchange_format_version`.
pub const VERSION: &str = "1";

/// The document.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interchange {
    /// Format, version, chain.
    pub metadata: Metadata,
    /// Records per BLS key.
    pub data: Vec<KeyRecords>,
}

/// `metadata`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    /// [`FORMAT`].
    pub interchange_format: String,
    /// [`VERSION`].
    pub interchange_format_version: String,
    /// The chain the escrows live on (decimal).
    pub chain_id: String,
}

/// The records of one BLS public key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyRecords {
    /// Compressed G1 public key, 0x-hex.
    pub pubkey: String,
    /// One per (domain, deal) signed.
    pub signed_verdicts: Vec<SignedRecord>,
}

/// One signed verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedRecord {
    /// EIP-712 domain separator of the escrow.
    pub domain_separator: B256,
    /// The deal.
    pub deal_id: B256,
    /// The EIP-712 digest of the commitment signed.
    pub commitment_digest: B256,
    /// When (Unix seconds, decimal), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_at: Option<String>,
}

/// An interchange failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InterchangeError {
    /// Not a document of this format or version.
    #[error("not a resolvd slashing-protection document: {0}")]
    Format(String),
    /// Another chain than the data dir's.
    #[error("the document is for chain {document}, the data dir for chain {data_dir}")]
    WrongChain {
        /// In the document.
        document: String,
        /// Recorded in the data dir.
        data_dir: u64,
    },
    /// Records of another key than this node's.
    #[error("the document holds records of key {0}, not of this node's key {1}")]
    WrongKey(String, String),
    /// Records that contradict ones already in the data dir (or each other).
    #[error("{} record(s) conflict with the data dir's (nothing was imported): {}", .0.len(), .0.iter().map(|c| format!("domain {} deal {}", c.domain_separator, c.deal_id)).collect::<Vec<_>>().join(", "))]
    Conflicts(Vec<ProtectionKey>),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What an import did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ImportSummary {
    /// Records written.
    pub imported: usize,
    /// Records already present with the same digest.
    pub unchanged: usize,
}

/// Every record of `store`, as signed by `pubkey` (the data dir's key).
pub fn export(store: &Store, pubkey: &str, chain_id: u64) -> Result<Interchange, StoreError> {
    let signed_verdicts = store
        .protection_records()?
        .into_iter()
        .map(|e| SignedRecord {
            domain_separator: e.key.domain_separator,
            deal_id: e.key.deal_id,
            commitment_digest: e.digest,
            signed_at: e.signed_at.map(|t| t.to_string()),
        })
        .collect();
    Ok(Interchange {
        metadata: Metadata {
            interchange_format: FORMAT.into(),
            interchange_format_version: VERSION.into(),
            chain_id: chain_id.to_string(),
        },
        data: vec![KeyRecords { pubkey: pubkey.to_owned(), signed_verdicts }],
    })
}

/// Merges `doc` into `store` for `pubkey` (the data dir's key); all or
/// nothing. `chain_id` is the data dir's chain, if it recorded one.
pub fn import(
    store: &Store,
    doc: &Interchange,
    pubkey: &str,
    chain_id: Option<u64>,
) -> Result<ImportSummary, InterchangeError> {
    let m = &doc.metadata;
    if m.interchange_format != FORMAT {
        return Err(InterchangeError::Format(format!("format {:?}", m.interchange_format)));
    }
    if m.interchange_format_version != VERSION {
        return Err(InterchangeError::Format(format!(
            "version {:?} (this resolvd reads {VERSION:?})",
            m.interchange_format_version
        )));
    }
    let doc_chain: u64 = m
        .chain_id
        .parse()
        .map_err(|_| InterchangeError::Format(format!("chain_id {:?}", m.chain_id)))?;
    if let Some(ours) = chain_id.filter(|c| *c != doc_chain) {
        return Err(InterchangeError::WrongChain { document: m.chain_id.clone(), data_dir: ours });
    }
    let mut entries = Vec::new();
    for k in &doc.data {
        if !k.pubkey.eq_ignore_ascii_case(pubkey) {
            return Err(InterchangeError::WrongKey(k.pubkey.clone(), pubkey.to_owned()));
        }
        for r in &k.signed_verdicts {
            let signed_at = match &r.signed_at {
                None => None,
                Some(t) => Some(t.parse::<u64>().map_err(|_| {
                    InterchangeError::Format(format!("signed_at {t:?} of deal {}", r.deal_id))
                })?),
            };
            entries.push(ProtectionEntry {
                key: ProtectionKey { domain_separator: r.domain_separator, deal_id: r.deal_id },
                digest: r.commitment_digest,
                signed_at,
            });
        }
    }
    let (imported, unchanged) = store.import_protection(&entries).map_err(|e| match e {
        crate::store::ImportError::Conflicts(c) => InterchangeError::Conflicts(c),
        crate::store::ImportError::Store(e) => InterchangeError::Store(e),
    })?;
    Ok(ImportSummary { imported, unchanged })
}
