//! `resolvd`: the resolver daemon's command-line entry point.
//!
//! Today it offers `resolvd inspect`, which decodes canonical content the way
//! every node does (hash before parse, strict canonical decoding) and prints it
//! as JSON. The daemon itself (`resolvd run`) arrives with the node issue.

use clap::{Parser, Subcommand};
use eyre::{bail, WrapErr};
use resolvd_node::inspect::{inspect, ContentKind};
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
            #[allow(clippy::disallowed_macros)] // the CLI's own output
            {
                println!("{}", serde_json::to_string_pretty(&report)?);
            }
        }
    }
    Ok(())
}
