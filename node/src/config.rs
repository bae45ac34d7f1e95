//! `node.toml`: every option of `resolvd run`, with defaults.
//!
//! Precedence: built-in defaults < the TOML file < `RESOLVD_*` environment
//! variables < command-line flags (the last two through clap, see
//! `RunArgs` in the `resolvd` binary). Unknown keys in the file are errors, so a typo
//! never silently falls back to a default.

use alloy_primitives::Address;
use serde::{Deserialize, Serialize};
use std::{collections::BTreeMap, net::SocketAddr, path::PathBuf, time::Duration};

/// The whole configuration.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct NodeConfig {
    /// Directory of the RocksDB database and the p2p identity key.
    pub data_dir: PathBuf,
    /// `human` or `json` log lines (filter with `RUST_LOG`).
    pub log_format: LogFormat,
    /// Chain access.
    pub chain: ChainConfig,
    /// The resolver's BLS key.
    pub keys: KeysConfig,
    /// libp2p.
    pub p2p: P2pSection,
    /// HTTP API.
    pub api: ApiConfig,
    /// Dispute pipeline.
    pub pipeline: PipelineConfig,
    /// Fault injection for tests and the chaos suite. Never set these in production.
    pub fault: FaultConfig,
}

impl Default for NodeConfig {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("./resolvd-data"),
            log_format: LogFormat::Human,
            chain: ChainConfig::default(),
            keys: KeysConfig::default(),
            p2p: P2pSection::default(),
            api: ApiConfig::default(),
            pipeline: PipelineConfig::default(),
            fault: FaultConfig::default(),
        }
    }
}

/// Log line format.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable.
    Human,
    /// One JSON object per line.
    Json,
}

/// `chain.rpc_url` when nothing is set: a local node.
pub const DEFAULT_RPC_URL: &str = "http://127.0.0.1:8545";

/// `chain.confirmations`: a depth under the head, or a block tag.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum Confirmations {
    /// This many blocks under the latest block (0: the head itself, except
    /// that a head holding a `Disputed` log is read once the next block is
    /// there: its `prevrandao` seeds the dispute's order).
    Blocks(u64),
    /// The block a tag names.
    Tag(BlockTag),
}

/// A block tag the node can confirm at.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BlockTag {
    /// `safe`.
    Safe,
    /// `finalized`.
    Finalized,
}

impl std::str::FromStr for Confirmations {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "safe" => Ok(Self::Tag(BlockTag::Safe)),
            "finalized" => Ok(Self::Tag(BlockTag::Finalized)),
            n => n
                .parse()
                .map(Self::Blocks)
                .map_err(|_| format!("{n:?}: a number of blocks, \"safe\" or \"finalized\"")),
        }
    }
}

/// Chain access.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct ChainConfig {
    /// JSON-RPC endpoint: `http://`, `https://`, `ws://` or `wss://`. The
    /// one-element form of `rpc_urls`; leave it unset when that is set.
    pub rpc_url: String,
    /// Several JSON-RPC endpoints in order of preference: requests go to the
    /// first one that is up and fail over to the next on errors or timeouts.
    /// Replaces `rpc_url` (setting both is refused).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rpc_urls: Vec<String>,
    /// PEM file of CA certificates trusted for `https://` and `wss://`
    /// endpoints in addition to the webpki (Mozilla) roots: a private CA.
    pub ca_file: Option<PathBuf>,
    /// How many endpoints of `rpc_urls` must each find an anchor canonical
    /// and final before the node signs for it (1 to the number of
    /// endpoints; unset: 2 with several endpoints, else 1).
    pub rpc_quorum: Option<usize>,
    /// The escrow contract (the registry is read from it).
    pub escrow: Address,
    /// More escrows served by this node: each must use `escrow`'s registry
    /// (checked at start) and signs under its own EIP-712 domain.
    pub escrows: Vec<Address>,
    /// When a block counts as confirmed: a number of blocks under the head,
    /// or the `"safe"` / `"finalized"` block tag. Logs are acted on, and
    /// committees and announcements read, at the confirmed block.
    pub confirmations: Confirmations,
    /// How often the head, and a sent transaction's receipt, are polled, in
    /// milliseconds.
    pub poll_interval_ms: u64,
    /// First block to scan when the database has no cursor yet.
    pub start_block: u64,
    /// Most blocks per `eth_getLogs` request.
    pub max_log_range: u64,
    /// Encrypted JSON keystore (Web3 Secret Storage) of the account that sends
    /// `resolve` and `slashEquivocation`; without one the node only signs and gossips.
    pub account_keystore: Option<PathBuf>,
    /// File holding that keystore's password.
    pub account_password_file: Option<PathBuf>,
    /// JSON-RPC endpoints of other chains that deals anchor on, by chain id
    /// (`"10" = "https://…"`). An anchor on a chain neither this one nor
    /// listed here cannot be checked, and is never signed.
    pub anchor_rpc: BTreeMap<String, String>,
    /// Most the node pays per gas (base fee + tip), in wei.
    pub max_fee_per_gas: u64,
    /// Tip: this percentile (0–100) of the tips in the last five blocks.
    pub priority_fee_percentile: u8,
    /// A transaction not mined after this many blocks is replaced (same
    /// nonce, fees +12.5 % or the fresh estimate, up to `max_fee_per_gas`).
    pub replace_after_blocks: u64,
}

impl Default for ChainConfig {
    fn default() -> Self {
        Self {
            rpc_url: DEFAULT_RPC_URL.into(),
            rpc_urls: Vec::new(),
            ca_file: None,
            rpc_quorum: None,
            escrow: Address::ZERO,
            escrows: Vec::new(),
            confirmations: Confirmations::Blocks(2),
            poll_interval_ms: 1_000,
            start_block: 0,
            max_log_range: 2_000,
            account_keystore: None,
            account_password_file: None,
            anchor_rpc: BTreeMap::new(),
            max_fee_per_gas: 500_000_000_000,
            priority_fee_percentile: 50,
            replace_after_blocks: 3,
        }
    }
}

impl ChainConfig {
    /// `rpc_quorum` for `endpoints` endpoints (its default when unset),
    /// checked to be between 1 and `endpoints`.
    pub fn quorum(&self, endpoints: usize) -> eyre::Result<usize> {
        let quorum = self.rpc_quorum.unwrap_or(endpoints.min(2));
        eyre::ensure!(
            (1..=endpoints.max(1)).contains(&quorum),
            "chain.rpc_quorum = {quorum}: between 1 and the number of endpoints ({endpoints})"
        );
        Ok(quorum)
    }
}

/// The resolver's BLS key.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct KeysConfig {
    /// EIP-2335 keystore of the BLS key (`resolvd keys new`). Without it the
    /// node observes, aggregates, submits and slashes, but never signs.
    pub bls_keystore: Option<PathBuf>,
    /// File holding its password (else `RESOLVD_KEYSTORE_PASSWORD`).
    pub password_file: Option<PathBuf>,
    /// Doppelgänger protection: stay silent (sign nothing) this long after
    /// start and listen; a partial signed by this key that this data dir did
    /// not produce (the key runs elsewhere) stops the node, non-zero. `0`
    /// turns the protection off (`--disable-doppelganger`).
    pub doppelganger_wait_secs: u64,
    /// A separate signer (`resolvd signer`) to sign through instead of a
    /// local keystore, e.g. `http://127.0.0.1:9600`.
    pub remote_signer: Option<String>,
    /// File holding the signer's bearer token.
    pub remote_signer_token_file: Option<PathBuf>,
}

impl Default for KeysConfig {
    fn default() -> Self {
        // Two republish periods of an own partial (16 s each), and slack.
        Self {
            bls_keystore: None,
            password_file: None,
            doppelganger_wait_secs: 36,
            remote_signer: None,
            remote_signer_token_file: None,
        }
    }
}

/// libp2p.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct P2pSection {
    /// Listen multiaddr.
    pub listen: String,
    /// Peers dialled at start (multiaddrs, `/p2p/<id>` optional).
    pub bootstrap: Vec<String>,
    /// gossipsub heartbeat in milliseconds.
    pub heartbeat_ms: u64,
    /// gossipsub mesh degree.
    pub mesh: usize,
    /// Publish own messages to every connected peer, not only to the mesh
    /// (gossipsub flood publishing).
    pub flood_publish: bool,
    /// How partials reach the committee: `aggregators` (each member sends its
    /// partial straight to a few members, which aggregate) or `flood` (every
    /// partial is gossiped to everyone). Every member of a network must run
    /// the same one.
    pub dissemination: DisseminationMode,
    /// The addresses this node's member record publishes, where members
    /// dial it for direct messages (multiaddrs). Unset: its listen addresses
    /// (without `0.0.0.0`). Empty: none; members then reach it only over
    /// connections that exist, and gossip otherwise.
    pub advertise: Option<Vec<String>>,
}

/// `p2p.dissemination`.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DisseminationMode {
    /// Partials go to the dispute's aggregators through its slices'
    /// collectors, found through signed member records.
    #[default]
    Aggregators,
    /// Every partial is gossiped to every node.
    Flood,
}

impl std::str::FromStr for DisseminationMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "aggregators" => Ok(Self::Aggregators),
            "flood" => Ok(Self::Flood),
            other => Err(format!("p2p.dissemination: {other:?} is not aggregators or flood")),
        }
    }
}

impl Default for P2pSection {
    fn default() -> Self {
        Self {
            listen: "/ip4/0.0.0.0/tcp/9400".into(),
            bootstrap: Vec::new(),
            heartbeat_ms: 700,
            mesh: 4,
            flood_publish: false,
            dissemination: DisseminationMode::default(),
            advertise: None,
        }
    }
}

/// HTTP API.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct ApiConfig {
    /// Listen address of `/health`, `/status`, `/disputes`, `/content`, `/metrics`.
    pub listen: SocketAddr,
    /// Largest `PUT /content` body in bytes.
    pub max_content_len: usize,
    /// File holding a bearer token that `PUT /content` must present. Without
    /// one, `PUT /content` is accepted only when `listen` is a loopback address.
    pub content_token_file: Option<PathBuf>,
    /// `PUT /content` requests handled at once (each buffers up to
    /// `max_content_len`); more are answered 503 without reading their body.
    pub max_concurrent_puts: usize,
    /// `PUT /content` is refused (507) once the content store holds about this
    /// many bytes.
    pub content_quota_bytes: u64,
    /// Open HTTP connections at once; more are closed on accept.
    pub max_connections: usize,
    /// Seconds a connection may take to send a request's headers, also while
    /// idle between keep-alive requests; then it is closed.
    pub header_timeout_secs: u64,
    /// `GET /content` responses sent at once (each holds its document until
    /// the last byte is handed to the connection); more are answered 503.
    pub max_concurrent_gets: usize,
    /// Seconds a client has to take a `GET /content` response; then its
    /// connection is closed.
    pub response_timeout_secs: u64,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:9500".parse().expect("valid address"),
            max_content_len: resolvd_proto::codec::MAX_DOCUMENT_LEN,
            content_token_file: None,
            max_concurrent_puts: 2,
            content_quota_bytes: 4 << 30,
            max_connections: 256,
            header_timeout_secs: 10,
            max_concurrent_gets: 8,
            response_timeout_secs: 60,
        }
    }
}

/// Dispute pipeline.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct PipelineConfig {
    /// Concurrent replays (blocking worker threads).
    pub replay_workers: usize,
    /// Delay before retrying an operational error (missing content, RPC), in ms.
    pub retry_ms: u64,
    /// Submitter slot length, in ms: the submitter at rank k of a deal's order
    /// waits k slots for k < 8, then the next 1, 2, 4, … share a slot
    /// (`resolvd_engine::submit_delay`).
    pub submit_slot_ms: u64,
    /// How long every submitter's wait starts after its certificate, in ms,
    /// unless every member signed: signers that reach it meanwhile are taken
    /// into the certificate it sends (paid without `includeSigners`, and
    /// cheaper for `resolve`).
    pub widen_wait_ms: u64,
    /// Partials held for disputes not yet confirmed here (all deals together).
    pub max_buffered_partials: usize,
    /// Seconds a settled or expired dispute stays in memory (and in `/status`)
    /// before it is evicted; the store keeps it.
    pub retain_settled_secs: u64,
    /// Seconds between refreshes of the fee ledger (`/status` `economics`,
    /// the `rewards_*` / `gas_*` metrics).
    pub ledger_refresh_secs: u64,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        Self {
            replay_workers: 2,
            retry_ms: 2_000,
            submit_slot_ms: 4_000,
            widen_wait_ms: 500,
            max_buffered_partials: 4_096,
            retain_settled_secs: 600,
            ledger_refresh_secs: 30,
        }
    }
}

/// Fault injection (tests, chaos suite). Only a build with the cargo feature
/// `fault-injection` acts on it; any other build refuses a config that sets it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct FaultConfig {
    /// Abort the process right after the first signature is persisted and
    /// before it is gossiped (crash-safety test).
    pub crash_after_persist: bool,
    /// Byzantine behaviour (see [`Byzantine`]).
    pub byzantine: Option<Byzantine>,
    /// Wait this long before every replay (a slow honest node).
    pub replay_delay_ms: u64,
}

/// A byzantine behaviour.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Byzantine {
    /// Sign both outcomes for every dispute, bypassing slashing protection
    /// for the second (slashable).
    Equivocate,
    /// Sign only the opposite of the replayed outcome (a wrong verdict; not
    /// slashable on its own: dissent is not equivocation).
    Flip,
    /// Replay but never sign or gossip a partial.
    Withhold,
    /// Never replay: sign the commitment of the first verified partial of
    /// another signer (the verifier's dilemma; commit-reveal keeps it out of
    /// honest nodes' certificates).
    Lazy,
    /// For every dispute it sees, gossip commit-reveal commitments in every
    /// member's name, signed with a key that is not theirs (an attacker
    /// with no stake; run it on a node without a BLS key).
    #[serde(rename = "forge_commits")]
    ForgeCommits,
}

impl NodeConfig {
    /// Parses TOML text.
    pub fn from_toml(text: &str) -> eyre::Result<Self> {
        Ok(toml::from_str(text)?)
    }

    /// Reads a TOML file.
    pub fn load(path: &std::path::Path) -> eyre::Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| eyre::eyre!("cannot read config {}: {e}", path.display()))?;
        Self::from_toml(&text).map_err(|e| eyre::eyre!("config {}: {e}", path.display()))
    }

    /// Checks values that parse but cannot work (the RPC endpoints are
    /// checked by [`crate::chain::rpc::RpcOptions::from_config`]).
    pub fn validate(&self) -> eyre::Result<()> {
        eyre::ensure!(self.chain.escrow != Address::ZERO, "chain.escrow is not set");
        eyre::ensure!(
            self.keys.bls_keystore.is_none() || self.keys.remote_signer.is_none(),
            "keys.bls_keystore and keys.remote_signer are both set: sign locally or remotely, not both"
        );
        eyre::ensure!(
            self.keys.remote_signer.is_none() || self.keys.remote_signer_token_file.is_some(),
            "keys.remote_signer needs keys.remote_signer_token_file"
        );
        eyre::ensure!(self.chain.max_log_range > 0, "chain.max_log_range must be > 0");
        eyre::ensure!(self.pipeline.replay_workers > 0, "pipeline.replay_workers must be > 0");
        eyre::ensure!(
            (1..=16).contains(&self.p2p.mesh),
            "p2p.mesh must be 1..=16 (gossipsub D; default 4), not {}",
            self.p2p.mesh
        );
        eyre::ensure!(
            self.chain.account_keystore.is_some() == self.chain.account_password_file.is_some(),
            "chain.account_keystore and chain.account_password_file go together"
        );
        if !cfg!(feature = "fault-injection") {
            eyre::ensure!(
                self.fault == FaultConfig::default(),
                "this resolvd was built without fault injection: remove the [fault] section \
                 (it exists for the test suite and the devnet only)"
            );
        }
        Ok(())
    }

    /// `chain.poll_interval_ms` as a duration.
    pub fn poll_interval(&self) -> Duration {
        Duration::from_millis(self.chain.poll_interval_ms.max(50))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_roundtrip_and_unknown_keys_fail() {
        let text = toml::to_string(&NodeConfig::default()).unwrap();
        assert_eq!(NodeConfig::from_toml(&text).unwrap(), NodeConfig::default());
        assert_eq!(NodeConfig::from_toml("").unwrap(), NodeConfig::default());
        let err = NodeConfig::from_toml("[chain]\nconfirmation = 3\n").unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
        let partial = NodeConfig::from_toml("[chain]\nconfirmations = 5\n").unwrap();
        assert_eq!(partial.chain.confirmations, Confirmations::Blocks(5));
        let tagged = NodeConfig::from_toml("[chain]\nconfirmations = \"finalized\"\n").unwrap();
        assert_eq!(tagged.chain.confirmations, Confirmations::Tag(BlockTag::Finalized));
        assert!(NodeConfig::from_toml("[chain]\nconfirmations = \"latest\"\n").is_err());
        assert_eq!(partial.chain.poll_interval_ms, 1_000);
    }

    #[test]
    fn mesh_degree_is_bounded() {
        let mut c = NodeConfig::default();
        c.chain.escrow = Address::repeat_byte(1);
        c.validate().unwrap();
        for mesh in [0, 17] {
            c.p2p.mesh = mesh;
            assert!(c.validate().unwrap_err().to_string().contains("p2p.mesh"), "{mesh}");
        }
    }
}
