//! `resolvd`: the resolver daemon's command-line entry point.
//!
//! Today it offers `resolvd inspect`, which decodes canonical content the way
//! every node does (hash before parse, strict canonical decoding) and prints it
//! as JSON, and `resolvd keys`, which manages the resolver's BLS key in an
//! EIP-2335 keystore. The daemon itself (`resolvd run`) is not built yet.

use clap::{Parser, Subcommand};
use eyre::{bail, WrapErr};
use resolvd_node::{
    inspect::{inspect, ContentKind},
    keys::{self, PasswordArgs},
    keystore::{Kdf, Keystore},
};
use std::{io::Read, path::PathBuf};

#[derive(Debug, Parser)]
#[command(name = "resolvd", version, about = "resolvd: a bonded dispute-resolver network")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Decode canonical content bytes and print them as JSON with their content hash.
    Inspect(InspectArgs),
    /// Manage the resolver's BLS key (EIP-2335 keystore).
    #[command(subcommand)]
    Keys(KeysCommand),
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
fn print_json(value: &serde_json::Value) -> eyre::Result<()> {
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

fn main() -> eyre::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Inspect(args) => {
            let bytes = read_input(&args)?;
            let report = inspect(args.kind, &bytes, args.expect_hash.as_ref())?;
            print_json(&serde_json::to_value(report)?)?;
        }
        Command::Keys(cmd) => keys(cmd)?,
    }
    Ok(())
}
