//! `resolvd-devnet`: a local network and a demo a newcomer can follow.
//!
//! Starts anvil, deploys the contracts, registers and runs N `resolvd`
//! nodes (the `resolvd` binary next to this one, built with the cargo
//! feature `fault-injection`: the demo turns one node byzantine), settles
//! three disputes, has one question attested and checked as an ERC-8301
//! proof, and prints what happened. `--setup-only` deploys and
//! writes the node directories for docker compose instead.

#![allow(clippy::disallowed_macros)] // the demo's own terminal output

use alloy_primitives::{Address, B256, U256};
use alloy_provider::Provider;
use clap::Parser;
use eyre::{ensure, WrapErr};
use resolvd_devnet::{DealKind, Devnet, DevnetOptions};
use resolvd_node::{
    attestation,
    chain::Chain,
    config::{Byzantine, FaultConfig, LogFormat},
    contracts::{IEscrow, IProofVerifier, IRegistry},
};
use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};
use tracing_subscriber::EnvFilter;

/// Options of `resolvd-devnet`.
#[derive(Debug, Parser)]
#[command(
    name = "resolvd-devnet",
    version,
    about = "Run a local network (anvil, contracts, N registered resolvers) and a demo: \
             an honest delivery, a false claim, an equivocator slashed and an attestation \
             verified as an ERC-8301 proof"
)]
struct DevnetArgs {
    /// Log format of the library logs (stderr, warn and up unless RUST_LOG says otherwise).
    #[arg(long, env = "RESOLVD_LOG_FORMAT", value_enum, default_value = "human")]
    log_format: LogFormat,
    /// The `resolvd` binary the nodes run (default: the one next to this binary).
    #[arg(long)]
    resolvd: Option<PathBuf>,
    /// Resolvers to run.
    #[arg(long, default_value_t = 4)]
    nodes: usize,
    /// Parent directory of the run's directory (each run gets a fresh one).
    #[arg(long, default_value = "./devnet-runs")]
    base_dir: PathBuf,
    /// First port: anvil, then p2p and API ports per node (0 = free ports).
    #[arg(long, default_value_t = 0)]
    base_port: u16,
    /// The Foundry project with compiled artifacts in `out/`.
    #[arg(long, default_value = "./contracts")]
    contracts: PathBuf,
    /// anvil binary (default: `.tools/bin/anvil`, then `$ANVIL`, then PATH).
    #[arg(long)]
    anvil: Option<PathBuf>,
    /// Seconds per block.
    #[arg(long, default_value_t = 1)]
    block_time: u64,
    /// Leave the network running after the demo (Ctrl-C stops it).
    #[arg(long)]
    keep: bool,
    /// Only deploy and register on `--rpc-url` and write each node's
    /// directory (node.toml, keystores, password) under `--base-dir`, for
    /// docker compose (`--hosts node0,node1,...`); start nothing.
    #[arg(long, requires = "rpc_url")]
    setup_only: bool,
    /// An existing dev chain instead of starting anvil: one with unlocked dev
    /// accounts and anvil_setBalance or hardhat_setBalance (anvil, Hardhat).
    #[arg(long)]
    rpc_url: Option<String>,
    /// The registry's commit-reveal window in ms (0: off): partials are
    /// committed first and revealed when the commit phase closes.
    #[arg(long, default_value_t = 2_000)]
    commit_reveal_ms: u32,
    /// Container host names of the nodes (with --setup-only).
    #[arg(long, value_delimiter = ',')]
    hosts: Option<Vec<String>>,
}

struct Row {
    name: &'static str,
    deal_id: B256,
    verdict: String,
    settlement: &'static str,
    signers: String,
    gas: u64,
    tx: B256,
    latency: Duration,
}

struct Clock(Instant);

impl Clock {
    fn step(&self, text: impl std::fmt::Display) {
        println!("[{:>6.1}s] {text}", self.0.elapsed().as_secs_f64());
    }
}

fn settlement_name(code: u8) -> &'static str {
    match code {
        1 => "released to seller",
        2 => "refunded to buyer",
        3 => "reclaimed",
        4 => "timed out",
        5 => "cancelled (committee below minimum stake)",
        6 => "attested",
        _ => "none",
    }
}

async fn bonds(chain: &Chain, n: usize) -> eyre::Result<Vec<(Address, U256, bool)>> {
    let mut out = Vec::new();
    for i in 0..n {
        let info = chain
            .view(chain.registry, IRegistry::resolverInfoCall { index: U256::from(i) }, None)
            .await?;
        out.push((info.entry.operator, U256::from(info.entry.bond), info.entry.slashed));
    }
    Ok(out)
}

async fn settle_row(
    net: &mut Devnet,
    name: &'static str,
    kind: DealKind,
    clock: &Clock,
) -> eyre::Result<Row> {
    let content = net.deal_content(kind).await?;
    clock.step(format_args!(
        "{name}: seller's plan frozen on block {}, witness {} built over RPC",
        content.evm_anchor.block_number,
        short(resolvd_proto::ContentType::content_hash(&content.witness))
    ));
    let open = net.open_dispute(&content, &[0]).await?;
    clock.step(format_args!(
        "{name}: deal {} funded, delivered (witness uploaded to node 0 only), challenged in block {}",
        short(open.deal_id),
        open.block
    ));
    let deal = net.wait_settled(open.deal_id, Duration::from_secs(120)).await?;
    let latency = open.challenged.elapsed();
    let logs = net.verdict_logs(open.deal_id).await?;
    let log = logs.first().ok_or_else(|| eyre::eyre!("no VerdictCommitted"))?;
    let tx = log.transaction_hash.unwrap_or_default();
    let receipt = net.provider.get_transaction_receipt(tx).await?;
    let gas = receipt.map(|r| r.gas_used).unwrap_or_default();
    // Signers as certified on chain: the non-signers in the resolve calldata.
    let sent = net
        .provider
        .get_transaction_by_hash(tx)
        .await?
        .ok_or_else(|| eyre::eyre!("resolve transaction {tx} not found"))?;
    let input = alloy_consensus::Transaction::input(&sent);
    let call = <IEscrow::resolveCall as alloy_sol_types::SolCall>::abi_decode(input)?;
    let non_signers = net.non_signers_of(open.deal_id, &call.nonSigners).await?;
    let signers: Vec<String> = (0..net.nodes.len() as u32)
        .filter(|i| !non_signers.contains(i))
        .map(|i| i.to_string())
        .collect();
    let verdict = match call.commitment.outcome {
        0 => "reproduced",
        _ => "failed",
    };
    let row = Row {
        name,
        deal_id: open.deal_id,
        verdict: verdict.to_owned(),
        settlement: settlement_name(deal.settlement),
        signers: format!("{} of {} [{}]", signers.len(), net.nodes.len(), signers.join(",")),
        gas,
        tx,
        latency,
    };
    clock.step(format_args!(
        "{name}: {} → {} by certificate of {} (resolve gas {gas}, {:.1}s after the challenge)",
        row.verdict,
        row.settlement,
        row.signers,
        latency.as_secs_f64()
    ));
    Ok(row)
}

/// Runs `resolvd verify` as an auditor would (no key): it exits non-zero
/// unless the replayed commitment equals the certified one.
fn verify(bin: &Path, net: &Devnet, deal_id: B256) -> eyre::Result<()> {
    let out = Command::new(bin)
        .arg("verify")
        .arg(deal_id.to_string())
        .args(["--rpc-url", &net.rpc_url])
        .args(["--escrow", &net.deployment.escrow.to_string()])
        .args(["--api", &format!("http://{}", net.nodes[0].api)])
        .output()
        .wrap_err_with(|| format!("running {} verify", bin.display()))?;
    ensure!(
        out.status.success(),
        "resolvd verify disagrees with the chain: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

/// Step 5: the question of an honest delivery, asked of the Attestor with no
/// deal; the answer's certificate checked by `ResolvdProofVerifier` as an
/// ERC-8301 proof, statelessly.
async fn attest(net: &mut Devnet, clock: &Clock) -> eyre::Result<()> {
    let content = net.deal_content(DealKind::Honest).await?;
    let request = net.request_attestation(&content, &[0], 1_800).await?;
    let started = Instant::now();
    clock.step(format_args!(
        "5 attestation requested (no deal): inputHash {}, requestId {}",
        short(request.input_hash),
        short(request.request_id)
    ));
    let record = net.wait_attested(request.input_hash, Duration::from_secs(120)).await?;
    let latency = started.elapsed();
    let deal: resolvd_node::contracts::Deal = net
        .view(net.deployment.attestor, IEscrow::dealCall { dealId: request.request_id })
        .await?
        .into();
    let output = attestation::output_hash(record.outcome, record.resultHash, record.traceHash);
    let chain = Chain::connect(&net.rpc_url, net.deployment.attestor, None).await?;
    let proof = attestation::proof_from_chain(&chain, request.request_id)
        .await?
        .ok_or_else(|| eyre::eyre!("no resolve transaction answered the request"))?;
    let metadata = alloy_sol_types::SolValue::abi_encode(&net.deployment.attestor);
    let call = IProofVerifier::verifyCall {
        inputHash: request.input_hash,
        outputHash: output,
        metadata: metadata.into(),
        proof: proof.encode(),
    };
    let valid = net.view(net.deployment.verifier, call).await?;
    ensure!(valid, "ResolvdProofVerifier refused the certificate");
    clock.step(format_args!(
        "5 {} → {} by certificate of epoch {} ({:.1}s); ResolvdProofVerifier.verify(inputHash, \
         outputHash {}, attestor, certificate) = {valid}",
        if record.outcome == 0 { "reproduced" } else { "failed" },
        settlement_name(deal.settlement),
        record.epoch,
        latency.as_secs_f64(),
        short(output)
    ));
    Ok(())
}

fn short(h: B256) -> String {
    let s = h.to_string();
    format!("{}…{}", &s[..10], &s[s.len() - 4..])
}

fn main() -> eyre::Result<()> {
    let args = DevnetArgs::parse();
    // The demo prints its own progress; library logs only from warn up.
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = match args.log_format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(devnet(args))
}

/// The `resolvd` binary: `--resolvd`, else the one next to this executable
/// (`--setup-only` starts no node).
fn resolvd_bin(args: &DevnetArgs) -> eyre::Result<PathBuf> {
    if let Some(bin) = &args.resolvd {
        return Ok(bin.clone());
    }
    let me = std::env::current_exe()?;
    let bin = me.with_file_name("resolvd");
    ensure!(
        bin.exists() || args.setup_only,
        "no resolvd binary next to {} (build the workspace with --all-features, or pass --resolvd)",
        me.display()
    );
    Ok(bin)
}

/// Runs the demo; Ctrl-C at any point stops every process.
async fn devnet(args: DevnetArgs) -> eyre::Result<()> {
    let workspace = std::env::current_dir()?;
    let mut options =
        DevnetOptions::for_workspace(&workspace, resolvd_bin(&args)?, args.base_dir.clone());
    options.nodes = args.nodes;
    options.contracts = args.contracts.clone();
    options.block_time = args.block_time;
    options.base_port = (args.base_port != 0).then_some(args.base_port);
    if let Some(a) = &args.anvil {
        options.anvil = a.clone();
    }
    options.rpc_url = args.rpc_url.clone();
    options.hosts = args.hosts.clone();
    options.commit_reveal_ms = args.commit_reveal_ms;
    if args.setup_only {
        let net = Devnet::provision(options).await?;
        println!(
            "deployed on {}: token {}, registry {}, escrow {}; {} node directories in {}",
            net.rpc_url,
            net.deployment.token,
            net.deployment.registry,
            net.deployment.escrow,
            net.nodes.len(),
            net.dir.display()
        );
        // The run directory's name is random: leave a stable link for the nodes.
        let latest = args.base_dir.join("latest");
        let _ = std::fs::remove_file(&latest);
        let name = net.dir.file_name().ok_or_else(|| eyre::eyre!("run directory"))?;
        std::os::unix::fs::symlink(name, &latest)?;
        return Ok(());
    }
    ensure!(args.nodes >= 4, "the demo needs at least 4 resolvers (one turns byzantine)");
    tokio::select! {
        r = demo(options, args.keep) => r,
        _ = tokio::signal::ctrl_c() => {
            println!("\ninterrupted: stopping every node (and anvil, if the demo started it)");
            Ok(())
        }
    }
}

async fn demo(options: DevnetOptions, keep: bool) -> eyre::Result<()> {
    let clock = Clock(Instant::now());
    let n = options.nodes;
    match &options.rpc_url {
        Some(url) => clock.step(format_args!(
            "using the dev chain at {}, deploying, registering {n} resolvers",
            resolvd_node::rpc::RpcOptions::single(url)
        )),
        None => clock
            .step(format_args!("starting anvil (Prague), deploying, registering {n} resolvers")),
    }
    let mut net = Devnet::launch(options).await.wrap_err("launching the devnet")?;
    clock.step(format_args!(
        "devnet up in {}: escrow {}, registry {}, {n} resolvd nodes meshed",
        net.dir.display(),
        net.deployment.escrow,
        net.deployment.registry
    ));
    let chain = Chain::connect(&net.rpc_url, net.deployment.escrow, None).await?;
    let before = bonds(&chain, n).await?;

    let mut rows = Vec::new();
    rows.push(settle_row(&mut net, "1 honest delivery", DealKind::Honest, &clock).await?);
    rows.push(settle_row(&mut net, "2 false claim", DealKind::FalseClaim, &clock).await?);

    let byzantine = n - 1;
    clock.step(format_args!("3 resolver {byzantine} turns byzantine: it will sign both outcomes"));
    net.nodes[byzantine].stop();
    net.nodes[byzantine].config.fault =
        FaultConfig { byzantine: Some(Byzantine::Equivocate), ..Default::default() };
    net.start_node(byzantine)?;
    net.nodes[byzantine].wait_healthy(Duration::from_secs(30)).await?;
    net.wait_mesh(Duration::from_secs(30)).await?;
    rows.push(settle_row(&mut net, "3 honest, one equivocator", DealKind::Honest, &clock).await?);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !chain.is_slashed(byzantine as u32).await? {
        ensure!(Instant::now() < deadline, "the equivocator was not slashed in time");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    clock.step(format_args!(
        "3 the other nodes' slashers submitted the equivocation evidence: resolver {byzantine} slashed"
    ));

    verify(&net.options.bin, &net, rows[0].deal_id)?;
    clock.step(format_args!(
        "4 `resolvd verify {}` (no key): replayed commitment == certified commitment",
        short(rows[0].deal_id)
    ));
    attest(&mut net, &clock).await?;
    let after = bonds(&chain, n).await?;
    let mut fees = Vec::new();
    for i in 0..n {
        fees.push(net.fees_of(i).await?);
    }

    println!("\nDeals");
    println!(
        "| {:<26} | {:<10} | {:<18} | {:<16} | {:>11} | {:<66} | {:>9} |",
        "deal", "verdict", "settlement", "signers", "resolve gas", "resolve tx", "latency"
    );
    println!("|{}|", "-".repeat(180));
    for r in &rows {
        println!(
            "| {:<26} | {:<10} | {:<18} | {:<16} | {:>11} | {:<66} | {:>8.1}s |",
            r.name,
            r.verdict,
            r.settlement,
            r.signers,
            r.gas,
            r.tx,
            r.latency.as_secs_f64()
        );
    }
    println!("\nResolvers (bond and fees in TUSD; fees earned are claimable with `resolvd rewards --claim`)");
    println!(
        "| {:<5} | {:<42} | {:>12} | {:>12} | {:<8} | {:>12} | {:>11} |",
        "index", "operator", "bond before", "bond after", "slashed", "fees earned", "gas refunds"
    );
    println!("|{}|", "-".repeat(124));
    let tusd = |v: U256| v / U256::from(10u64).pow(U256::from(18u64));
    let decimal = |v: U256| f64::from(v) / 1e18;
    for (i, ((b, a), (earned, refunds))) in before.iter().zip(&after).zip(&fees).enumerate() {
        let earned = if a.2 {
            format!("{:.4} (forfeit)", decimal(*earned))
        } else {
            format!("{:.4}", decimal(*earned))
        };
        println!(
            "| {:<5} | {:<42} | {:>12} | {:>12} | {:<8} | {:>12} | {:>11.4} |",
            i,
            b.0,
            tusd(b.1),
            tusd(a.1),
            if a.2 { "yes" } else { "no" },
            earned,
            decimal(*refunds)
        );
    }
    if keep {
        println!("\nThe network keeps running (Ctrl-C stops it):");
        println!("  chain       {}", net.rpc_url);
        println!("  escrow      {}", net.deployment.escrow);
        println!("  attestor    {}", net.deployment.attestor);
        println!("  verifier    {}", net.deployment.verifier);
        for node in &net.nodes {
            println!(
                "  node {}      api http://{}/status  metrics http://{}/metrics  log {}",
                node.index,
                node.api,
                node.api,
                node.log_path().display()
            );
        }
        std::future::pending::<()>().await;
    }
    let started_anvil = net.anvil.is_some();
    net.shutdown();
    clock.step(if started_anvil { "stopped every node and anvil" } else { "stopped every node" });
    Ok(())
}
