//! `resolvd`: the resolver daemon's command-line entry point.
//!
//! `resolvd run` is the daemon; the other commands are one-shot tools for
//! operators, sellers, buyers and auditors (see `resolvd --help` and
//! node/README.md).

use alloy_primitives::{Address, B256, U256};
use clap::{Parser, Subcommand};
use eyre::{bail, WrapErr};
use resolvd_node::{
    config::{LogFormat, NodeConfig},
    inspect::{inspect, ContentKind},
    keys::{self, PasswordArgs},
    keystore::{Kdf, Keystore},
};
use std::{io::Read, net::SocketAddr, path::PathBuf};

mod commands;

#[derive(Debug, Parser)]
#[command(name = "resolvd", version, about = "resolvd: a bonded dispute-resolver network")]
struct Cli {
    /// Log format of commands that log (`run`, `signer`).
    #[arg(long, global = true, env = "RESOLVD_LOG_FORMAT", value_enum)]
    log_format: Option<LogFormat>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the resolver daemon (p2p, chain watcher, replay, signing, aggregation,
    /// submission, slasher, HTTP API).
    Run(RunArgs),
    /// Register as a resolver: approve the bond and call the registry with the
    /// BLS key and its proof of possession.
    Register(RegisterArgs),
    /// Put content into, or get it from, a node's content store (hash checked).
    #[command(subcommand)]
    Content(ContentCommand),
    /// Freeze a block of a chain into a prestate anchor.
    Anchor(AnchorArgs),
    /// Build and verify the replay witness of a plan on an anchor.
    Witness(WitnessArgs),
    /// Keyless audit: re-derive a settled deal's verdict from public inputs and
    /// compare it with the escrow's `VerdictCommitted`.
    Verify(VerifyArgs),
    /// Submit equivocation evidence (an evidence file a node wrote) to the registry.
    Slash(SlashArgs),
    /// Leave the committee (`requestExit`): prints when the bond becomes
    /// withdrawable (it stays slashable until then).
    Exit(AccountChainArgs),
    /// Take the bond back once the unbonding delay is over (`withdraw`).
    Withdraw(AccountChainArgs),
    /// Show a resolver: bond, stake, epochs joined/left, slashed, exit time.
    Resolver(ResolverArgs),
    /// Show a resolver's fee rewards per epoch and the account's escrow
    /// credits (gas refunds); `--claim` withdraws both.
    Rewards(RewardsArgs),
    /// Print a node's status (`GET /status`).
    Status {
        /// The node's HTTP API.
        #[arg(long, default_value = "http://127.0.0.1:9500")]
        api: String,
    },
    /// Decode canonical content bytes and print them as JSON with their content hash.
    Inspect(InspectArgs),
    /// Manage the resolver's BLS key (EIP-2335 keystore).
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Run a separate signer: holds the BLS keystore and the slashing
    /// protection, signs verdicts for the configured escrow domains over an
    /// authenticated local HTTP API (`resolvd run --signer URL`).
    Signer(SignerArgs),
    /// Export or import a data dir's slashing protection (EIP-3076-style
    /// interchange JSON), to move a resolver to a new machine. Stop the node
    /// first: the database is opened exclusively.
    #[command(subcommand)]
    Protection(ProtectionCommand),
    /// Replay attestations of an Attestor: request one, read where it
    /// stands, check an answer as an ERC-8301 proof.
    #[command(subcommand)]
    Attest(AttestCommand),
}

/// The Attestor an `attest` command talks to.
#[derive(Debug, clap::Args)]
pub(crate) struct AttestorArgs {
    /// JSON-RPC endpoint.
    #[arg(long, env = "RESOLVD_RPC_URL", default_value = "http://127.0.0.1:8545")]
    pub(crate) rpc_url: String,
    /// The Attestor contract.
    #[arg(long, env = "RESOLVD_ATTESTOR")]
    pub(crate) attestor: Address,
    /// PEM CA certificates trusted for `https://` / `wss://` besides the webpki roots.
    #[arg(long, env = "RESOLVD_CA_FILE")]
    pub(crate) ca_file: Option<PathBuf>,
}

impl AttestorArgs {
    /// The Attestor is reached like an escrow.
    pub(crate) fn chain(&self) -> ChainArgs {
        ChainArgs {
            rpc_url: self.rpc_url.clone(),
            escrow: self.attestor,
            ca_file: self.ca_file.clone(),
        }
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum AttestCommand {
    /// Request an attestation of the question the content files ask,
    /// paying a fee (approved and pulled at once); prints its inputHash and
    /// requestId. The delivery's replay witness must reach the nodes by hash
    /// (`resolvd content put` to a node).
    Request(AttestRequestArgs),
    /// Where the request for a question stands, and its recorded answer.
    Status(AttestStatusArgs),
    /// Check an answer through a `ResolvdProofVerifier` as an ERC-8301
    /// proof; exits non-zero (with the reason) when it does not verify.
    Verify(AttestVerifyArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct AttestRequestArgs {
    #[command(flatten)]
    pub(crate) attestor: AttestorArgs,
    #[command(flatten)]
    pub(crate) account: AccountArgs,
    /// Canonical SpecV1 bytes.
    #[arg(long)]
    pub(crate) spec: PathBuf,
    /// Canonical PrestateAnchorV1 bytes (`resolvd anchor --out`).
    #[arg(long)]
    pub(crate) anchor: PathBuf,
    /// Canonical DeliveryV1 bytes (the plan and claimed result).
    #[arg(long)]
    pub(crate) delivery: PathBuf,
    /// Fee token (default: the registry's bond token).
    #[arg(long)]
    pub(crate) token: Option<Address>,
    /// Fee in token base units (default: the registry's `minResolverFee(token)`).
    #[arg(long)]
    pub(crate) fee: Option<U256>,
    /// Seconds the committee has to answer (default: the registry's `minResolveWindow`).
    #[arg(long)]
    pub(crate) window: Option<u64>,
    /// Do not publish the content on chain (the nodes must fetch it by hash from peers).
    #[arg(long)]
    pub(crate) no_publish: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct AttestStatusArgs {
    #[command(flatten)]
    pub(crate) attestor: AttestorArgs,
    /// The question's inputHash.
    pub(crate) input_hash: B256,
    /// Also print the certificate of the answering `resolve` as a
    /// stateless ERC-8301 proof (hex).
    #[arg(long)]
    pub(crate) proof: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct AttestVerifyArgs {
    #[command(flatten)]
    pub(crate) attestor: AttestorArgs,
    /// The ResolvdProofVerifier of the Attestor's registry.
    #[arg(long, env = "RESOLVD_PROOF_VERIFIER")]
    pub(crate) verifier: Address,
    /// The question's inputHash.
    pub(crate) input_hash: B256,
    /// The outputHash to check (default: the recorded answer's).
    #[arg(long)]
    pub(crate) output_hash: Option<B256>,
    /// A certificate proof (hex of `abi.encode(commitment, epoch, nonSigners, signature)`).
    #[arg(long, conflicts_with = "from_chain")]
    pub(crate) proof: Option<String>,
    /// Check statelessly with the certificate of the answering `resolve`
    /// transaction (default: the recorded answer, an empty proof).
    #[arg(long)]
    pub(crate) from_chain: bool,
}

/// The data dir and key a protection command works on.
#[derive(Debug, clap::Args)]
pub(crate) struct DataDirArgs {
    /// The node.toml (its `data_dir` and `keys.bls_keystore`).
    #[arg(long, env = "RESOLVD_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// Overrides `data_dir`.
    #[arg(long, env = "RESOLVD_DATA_DIR")]
    pub(crate) data_dir: Option<PathBuf>,
    /// Overrides `keys.bls_keystore` (only its public `pubkey` is read).
    #[arg(long)]
    pub(crate) keystore: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ProtectionCommand {
    /// Write every protection record of the data dir.
    Export {
        #[command(flatten)]
        dir: DataDirArgs,
        /// The chain id, if the data dir has none recorded (a node records it on its first run).
        #[arg(long)]
        chain_id: Option<u64>,
        /// Output file (stdout if absent).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Merge a document into the data dir (created if missing): records
    /// already present are skipped; any conflicting record refuses the whole
    /// import, changing nothing.
    Import {
        #[command(flatten)]
        dir: DataDirArgs,
        /// The interchange JSON.
        file: PathBuf,
    },
}

/// Options of `resolvd run`: a TOML file, overridden by `RESOLVD_*`
/// environment variables, overridden by flags.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The node.toml (every key documented in node/README.md); defaults apply without one.
    #[arg(long, env = "RESOLVD_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// Overrides `data_dir`.
    #[arg(long, env = "RESOLVD_DATA_DIR")]
    pub(crate) data_dir: Option<PathBuf>,
    /// Overrides `chain.rpc_url` and `chain.rpc_urls` (one endpoint).
    #[arg(long, env = "RESOLVD_RPC_URL")]
    pub(crate) rpc_url: Option<String>,
    /// Overrides `chain.escrow`.
    #[arg(long, env = "RESOLVD_ESCROW")]
    pub(crate) escrow: Option<Address>,
    /// Overrides `chain.confirmations` (a number of blocks, `safe` or `finalized`).
    #[arg(long, env = "RESOLVD_CONFIRMATIONS")]
    pub(crate) confirmations: Option<resolvd_node::config::Confirmations>,
    /// Overrides `p2p.listen`.
    #[arg(long, env = "RESOLVD_P2P_LISTEN")]
    pub(crate) p2p_listen: Option<String>,
    /// Overrides `p2p.dissemination` (`aggregators` or `flood`).
    #[arg(long, env = "RESOLVD_DISSEMINATION")]
    pub(crate) dissemination: Option<resolvd_node::config::DisseminationMode>,
    /// Overrides `p2p.bootstrap` (comma-separated multiaddrs).
    #[arg(long, env = "RESOLVD_BOOTSTRAP", value_delimiter = ',')]
    pub(crate) bootstrap: Option<Vec<String>>,
    /// Overrides `api.listen`.
    #[arg(long, env = "RESOLVD_API_LISTEN")]
    pub(crate) api_listen: Option<SocketAddr>,
    /// Overrides `keys.bls_keystore`.
    #[arg(long, env = "RESOLVD_BLS_KEYSTORE")]
    pub(crate) bls_keystore: Option<PathBuf>,
    /// Overrides `keys.password_file`.
    #[arg(long, env = "RESOLVD_PASSWORD_FILE")]
    pub(crate) password_file: Option<PathBuf>,
    /// Overrides `chain.account_keystore`.
    #[arg(long, env = "RESOLVD_ACCOUNT_KEYSTORE")]
    pub(crate) account_keystore: Option<PathBuf>,
    /// Overrides `chain.account_password_file`.
    #[arg(long, env = "RESOLVD_ACCOUNT_PASSWORD_FILE")]
    pub(crate) account_password_file: Option<PathBuf>,
    /// Sign through a `resolvd signer` at this URL (`keys.remote_signer`)
    /// instead of a local keystore.
    #[arg(long, env = "RESOLVD_SIGNER")]
    pub(crate) signer: Option<String>,
    /// File holding the signer's bearer token (`keys.remote_signer_token_file`).
    #[arg(long, env = "RESOLVD_SIGNER_TOKEN_FILE")]
    pub(crate) signer_token_file: Option<PathBuf>,
    /// Turn doppelgänger protection off (`keys.doppelganger_wait_secs = 0`):
    /// devnets, or a key known to run nowhere else.
    #[arg(long)]
    pub(crate) disable_doppelganger: bool,
    /// Check the effective configuration, print it as TOML and exit.
    #[arg(long)]
    pub(crate) print_config: bool,
}

impl RunArgs {
    /// Defaults < file < env < flags.
    pub(crate) fn effective(&self, log_format: Option<LogFormat>) -> eyre::Result<NodeConfig> {
        let mut c = match &self.config {
            Some(path) => NodeConfig::load(path)?,
            None => NodeConfig::default(),
        };
        set(&mut c.data_dir, &self.data_dir);
        set(&mut c.chain.rpc_url, &self.rpc_url);
        if self.rpc_url.is_some() {
            c.chain.rpc_urls.clear();
        }
        set(&mut c.chain.escrow, &self.escrow);
        set(&mut c.chain.confirmations, &self.confirmations);
        set(&mut c.p2p.listen, &self.p2p_listen);
        set(&mut c.p2p.bootstrap, &self.bootstrap);
        set(&mut c.p2p.dissemination, &self.dissemination);
        set(&mut c.api.listen, &self.api_listen);
        set(&mut c.log_format, &log_format);
        if self.signer.is_some() {
            c.keys.remote_signer.clone_from(&self.signer);
        }
        if self.signer_token_file.is_some() {
            c.keys.remote_signer_token_file.clone_from(&self.signer_token_file);
        }
        if self.disable_doppelganger {
            c.keys.doppelganger_wait_secs = 0;
        }
        for (slot, value) in [
            (&mut c.keys.bls_keystore, &self.bls_keystore),
            (&mut c.keys.password_file, &self.password_file),
            (&mut c.chain.account_keystore, &self.account_keystore),
            (&mut c.chain.account_password_file, &self.account_password_file),
        ] {
            if value.is_some() {
                slot.clone_from(value);
            }
        }
        Ok(c)
    }
}

/// Overrides `slot` when a value was given.
fn set<T: Clone>(slot: &mut T, value: &Option<T>) {
    if let Some(v) = value {
        slot.clone_from(v);
    }
}

/// Chain access for one-shot commands.
#[derive(Debug, clap::Args)]
pub(crate) struct ChainArgs {
    /// JSON-RPC endpoint.
    #[arg(long, env = "RESOLVD_RPC_URL", default_value = "http://127.0.0.1:8545")]
    pub(crate) rpc_url: String,
    /// The escrow contract.
    #[arg(long, env = "RESOLVD_ESCROW")]
    pub(crate) escrow: Address,
    /// PEM CA certificates trusted for `https://` / `wss://` besides the
    /// webpki roots (as `chain.ca_file`).
    #[arg(long, env = "RESOLVD_CA_FILE")]
    pub(crate) ca_file: Option<PathBuf>,
}

/// The transaction account: an encrypted JSON keystore and its password file.
#[derive(Debug, clap::Args)]
pub(crate) struct AccountArgs {
    /// Encrypted JSON keystore of the sending account.
    #[arg(long)]
    pub(crate) account_keystore: PathBuf,
    /// File holding its password.
    #[arg(long)]
    pub(crate) account_password_file: PathBuf,
}

#[derive(Debug, clap::Args)]
pub(crate) struct RegisterArgs {
    #[command(flatten)]
    pub(crate) chain: ChainArgs,
    #[command(flatten)]
    pub(crate) account: AccountArgs,
    /// The BLS keystore (EIP-2335).
    #[arg(long)]
    pub(crate) keystore: PathBuf,
    #[command(flatten)]
    pub(crate) password: PasswordArgs,
    /// Bond in bond-token base units (defaults to the registry's minimum).
    #[arg(long)]
    pub(crate) bond: Option<U256>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct RewardsArgs {
    #[command(flatten)]
    pub(crate) chain: ChainArgs,
    /// Registry index of the resolver (default: the one `--account-keystore` operates).
    #[arg(long)]
    pub(crate) resolver: Option<u64>,
    /// The deal token the fees are paid in (default: the registry's bond token).
    #[arg(long)]
    pub(crate) token: Option<Address>,
    /// Withdraw: the rewards (`claimRewards`, the operator account only) and
    /// the account's escrow credits (`claim`: gas refunds of `resolve`).
    #[arg(long, requires = "account_keystore")]
    pub(crate) claim: bool,
    /// Where claimed tokens go (default: the account).
    #[arg(long, requires = "claim")]
    pub(crate) to: Option<Address>,
    /// With --claim: first settle (`settleExclusions`) the exclusion entries
    /// of each claimed epoch when more than this many are not yet accounted
    /// for, so that no claim scans more.
    #[arg(long, default_value_t = 256, requires = "claim")]
    pub(crate) settle_above: u64,
    /// Encrypted JSON keystore of the operator account.
    #[arg(long, requires = "account_password_file")]
    pub(crate) account_keystore: Option<PathBuf>,
    /// File holding its password.
    #[arg(long, requires = "account_keystore")]
    pub(crate) account_password_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ContentCommand {
    /// Upload canonical bytes; the node stores them only under the hash they hash to.
    Put {
        /// The node's HTTP API.
        #[arg(long, default_value = "http://127.0.0.1:9500")]
        api: String,
        /// Type tag of the content (spec, delivery, prestate-anchor, evm-witness, ...).
        #[arg(long = "type")]
        type_tag: String,
        /// File with the raw canonical bytes.
        file: PathBuf,
        /// File holding the node's `api.content_token_file` token.
        #[arg(long)]
        token_file: Option<PathBuf>,
    },
    /// Download content by hash (re-hashed locally before it is written).
    Get {
        /// The node's HTTP API.
        #[arg(long, default_value = "http://127.0.0.1:9500")]
        api: String,
        /// Content hash.
        hash: B256,
        /// Output file (stdout if absent).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

#[derive(Debug, clap::Args)]
pub(crate) struct AnchorArgs {
    /// JSON-RPC endpoint.
    #[arg(long, env = "RESOLVD_RPC_URL", default_value = "http://127.0.0.1:8545")]
    pub(crate) rpc_url: String,
    /// Block number (the `finalized` block if absent). A block beyond
    /// `finalized` is refused unless `--allow-unfinalized`: resolvers replay
    /// only anchors on final blocks (others wait, or the deal times out).
    #[arg(long)]
    pub(crate) block: Option<u64>,
    /// Accept a block that is not final yet (devnets without finality).
    #[arg(long)]
    pub(crate) allow_unfinalized: bool,
    /// EVM rules to replay under.
    #[arg(long, value_enum, default_value = "prague")]
    pub(crate) evm: commands::EvmRules,
    /// Where to write the canonical PrestateAnchorV1 bytes.
    #[arg(long)]
    pub(crate) out: PathBuf,
}

#[derive(Debug, clap::Args)]
pub(crate) struct WitnessArgs {
    /// JSON-RPC endpoint (an archive node for old anchors).
    #[arg(long, env = "RESOLVD_RPC_URL", default_value = "http://127.0.0.1:8545")]
    pub(crate) rpc_url: String,
    /// Canonical PrestateAnchorV1 bytes (`resolvd anchor --out`).
    #[arg(long)]
    pub(crate) anchor: PathBuf,
    /// Canonical EvmCallPlanV1 bytes.
    #[arg(long)]
    pub(crate) plan: PathBuf,
    /// Extra storage slots to prove (`ADDRESS:SLOT`, e.g. the predicate's), repeatable.
    #[arg(long = "slot")]
    pub(crate) slots: Vec<String>,
    /// Parent headers to include (for BLOCKHASH).
    #[arg(long, default_value_t = 0)]
    pub(crate) ancestors: u64,
    /// Where to write the canonical EvmWitnessV1 bytes.
    #[arg(long)]
    pub(crate) out: PathBuf,
}

#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {
    #[command(flatten)]
    pub(crate) chain: ChainArgs,
    /// The deal.
    pub(crate) deal_id: B256,
    /// A node API to fetch unpublished content (the witness) from.
    #[arg(long)]
    pub(crate) api: Option<String>,
    /// Or: the witness bytes in a file.
    #[arg(long)]
    pub(crate) witness: Option<PathBuf>,
    /// An endpoint of another chain the anchor is on, as `CHAIN_ID=URL`
    /// (repeatable; the node's `[chain.anchor_rpc]`).
    #[arg(long = "anchor-rpc", value_name = "CHAIN_ID=URL", value_parser = parse_anchor_rpc)]
    pub(crate) anchor_rpc: Vec<(String, String)>,
}

fn parse_anchor_rpc(s: &str) -> Result<(String, String), String> {
    let (id, url) = s.split_once('=').ok_or("expected CHAIN_ID=URL")?;
    id.parse::<u64>().map_err(|_| format!("{id:?} is not a chain id"))?;
    Ok((id.to_owned(), url.to_owned()))
}

#[derive(Debug, clap::Args)]
pub(crate) struct SlashArgs {
    #[command(flatten)]
    pub(crate) chain: ChainArgs,
    #[command(flatten)]
    pub(crate) account: AccountArgs,
    /// Evidence file: hex of a wire ConflictEvidence (nodes write them to
    /// `<data_dir>/evidence/`).
    #[arg(long)]
    pub(crate) evidence: PathBuf,
}

#[derive(Debug, clap::Args)]
pub(crate) struct SignerArgs {
    /// The BLS keystore (EIP-2335).
    #[arg(long)]
    pub(crate) keystore: PathBuf,
    #[command(flatten)]
    pub(crate) password: PasswordArgs,
    /// Where the slashing-protection database lives.
    #[arg(long)]
    pub(crate) data_dir: PathBuf,
    /// Where to listen: `unix:///path/signer.sock` (preferred: a socket of
    /// mode 0660 that only its owner and group can reach, so nobody else can
    /// stand in for the signer) or `HOST:PORT` (keep it on loopback).
    #[arg(long, default_value = "127.0.0.1:9600")]
    pub(crate) listen: String,
    /// File holding the bearer token clients must send, 16+ characters
    /// (create it 0600).
    #[arg(long)]
    pub(crate) token_file: PathBuf,
    /// An escrow domain to sign for, `CHAIN_ID:ESCROW` (repeatable).
    #[arg(long = "domain", required = true)]
    pub(crate) domains: Vec<String>,
}

/// A chain and the operator account.
#[derive(Debug, clap::Args)]
pub(crate) struct AccountChainArgs {
    #[command(flatten)]
    pub(crate) chain: ChainArgs,
    #[command(flatten)]
    pub(crate) account: AccountArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ResolverArgs {
    #[command(flatten)]
    pub(crate) chain: ChainArgs,
    /// Registry index.
    #[arg(conflicts_with = "operator", required_unless_present = "operator")]
    pub(crate) index: Option<u64>,
    /// Look the resolver up by its operator address instead.
    #[arg(long)]
    pub(crate) operator: Option<Address>,
}

#[derive(Debug, Subcommand)]
enum KeysCommand {
    /// Generate a new key into a new keystore file.
    New {
        /// The keystore file to create (must not exist).
        #[arg(long)]
        keystore: PathBuf,
        #[command(flatten)]
        password: PasswordArgs,
        /// Key derivation function of the keystore.
        #[arg(long, value_enum, default_value = "scrypt")]
        kdf: KdfArg,
    },
    /// Import a hex secret key from a file into a new keystore file.
    Import {
        /// File holding the 32-byte secret key in hex.
        #[arg(long)]
        secret_file: PathBuf,
        /// The keystore file to create (must not exist).
        #[arg(long)]
        keystore: PathBuf,
        #[command(flatten)]
        password: PasswordArgs,
        /// Key derivation function of the keystore.
        #[arg(long, value_enum, default_value = "scrypt")]
        kdf: KdfArg,
    },
    /// Print the public key stored in a keystore (no password needed).
    Show {
        /// The keystore file.
        #[arg(long)]
        keystore: PathBuf,
    },
    /// Decrypt a keystore and print the registration data: public key (compressed
    /// and EIP-2537) and proof of possession. The secret is never printed.
    Export {
        /// The keystore file.
        #[arg(long)]
        keystore: PathBuf,
        #[command(flatten)]
        password: PasswordArgs,
    },
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum KdfArg {
    Scrypt,
    Pbkdf2,
}

impl From<KdfArg> for Kdf {
    fn from(k: KdfArg) -> Self {
        match k {
            KdfArg::Scrypt => Kdf::Scrypt,
            KdfArg::Pbkdf2 => Kdf::Pbkdf2,
        }
    }
}

#[allow(clippy::disallowed_macros)] // the CLI's own output
pub(crate) fn print_json(value: &serde_json::Value) -> eyre::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

fn keys(cmd: KeysCommand) -> eyre::Result<()> {
    match cmd {
        KeysCommand::New { keystore, password, kdf } => {
            let sk = keys::generate()?;
            keys::save(&sk, &keystore, &password, kdf.into())?;
            print_json(&keys::registration(&sk))
        }
        KeysCommand::Import { secret_file, keystore, password, kdf } => {
            let sk = keys::read_secret(&secret_file)?;
            keys::save(&sk, &keystore, &password, kdf.into())?;
            print_json(&keys::registration(&sk))
        }
        KeysCommand::Show { keystore } => {
            let json = std::fs::read_to_string(&keystore)
                .wrap_err_with(|| format!("reading {}", keystore.display()))?;
            let ks = Keystore::from_json(&json)?;
            let pk = ks
                .public_key()
                .ok_or_else(|| eyre::eyre!("the keystore stores no valid pubkey"))?;
            print_json(&serde_json::json!({
                "publicKey": alloy_primitives::hex::encode_prefixed(pk.compress()),
                "publicKeyG1": alloy_primitives::hex::encode_prefixed(pk.to_eip2537()),
                "path": ks.path,
                "uuid": ks.uuid,
            }))
        }
        KeysCommand::Export { keystore, password } => {
            print_json(&keys::registration(&keys::load(&keystore, &password)?))
        }
    }
}

#[derive(Debug, clap::Args)]
struct InspectArgs {
    /// The content type of the bytes.
    #[arg(value_enum)]
    kind: ContentKind,
    /// File holding the bytes (`-` for stdin).
    file: PathBuf,
    /// The file holds 0x-prefixed or bare hex instead of raw bytes.
    #[arg(long)]
    hex: bool,
    /// Refuse to parse unless the bytes hash to this commitment (hash before parse).
    #[arg(long, value_name = "HASH")]
    expect_hash: Option<alloy_primitives::B256>,
}

fn read_input(args: &InspectArgs) -> eyre::Result<Vec<u8>> {
    let mut raw = Vec::new();
    if args.file.as_os_str() == "-" {
        std::io::stdin().read_to_end(&mut raw).wrap_err("reading stdin")?;
    } else {
        raw = std::fs::read(&args.file)
            .wrap_err_with(|| format!("reading {}", args.file.display()))?;
    }
    if !args.hex {
        return Ok(raw);
    }
    let text = std::str::from_utf8(&raw).wrap_err("--hex input is not text")?.trim();
    match alloy_primitives::hex::decode(text) {
        Ok(bytes) => Ok(bytes),
        Err(e) => bail!("--hex input is not valid hex ({e}); drop --hex for raw bytes"),
    }
}

fn runtime() -> eyre::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

fn main() -> eyre::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => {
            let config = args.effective(cli.log_format)?;
            if args.print_config {
                config.validate()?;
                resolvd_node::rpc::RpcOptions::from_config(&config.chain)?;
                #[allow(clippy::disallowed_macros)]
                {
                    print!("{}", toml::to_string(&config)?);
                }
                return Ok(());
            }
            commands::init_logging(config.log_format, "info");
            runtime()?.block_on(commands::run(config))?;
        }
        Command::Register(args) => runtime()?.block_on(commands::register(args))?,
        Command::Content(cmd) => runtime()?.block_on(commands::content(cmd))?,
        Command::Anchor(args) => runtime()?.block_on(commands::anchor(args))?,
        Command::Witness(args) => runtime()?.block_on(commands::witness(args))?,
        Command::Verify(args) => runtime()?.block_on(commands::verify(args))?,
        Command::Slash(args) => runtime()?.block_on(commands::slash(args))?,
        Command::Exit(args) => runtime()?.block_on(commands::exit(args))?,
        Command::Withdraw(args) => runtime()?.block_on(commands::withdraw(args))?,
        Command::Resolver(args) => runtime()?.block_on(commands::resolver(args))?,
        Command::Rewards(args) => runtime()?.block_on(commands::rewards(args))?,
        Command::Status { api } => runtime()?.block_on(commands::status(&api))?,
        Command::Inspect(args) => {
            let bytes = read_input(&args)?;
            let report = inspect(args.kind, &bytes, args.expect_hash.as_ref())?;
            print_json(&serde_json::to_value(report)?)?;
        }
        Command::Keys(cmd) => keys(cmd)?,
        Command::Protection(cmd) => commands::protection(cmd)?,
        Command::Attest(cmd) => runtime()?.block_on(commands::attest(cmd))?,
        Command::Signer(args) => {
            commands::init_logging(cli.log_format.unwrap_or(LogFormat::Human), "info");
            runtime()?.block_on(commands::signer(args))?;
        }
    }
    Ok(())
}
