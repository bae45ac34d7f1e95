//! `resolvd-sim`: one simulated run (JSON and a table row), or the
//! benchmark matrix as a Markdown table (`resolvd-sim bench`).

#![allow(clippy::disallowed_macros)] // the CLI's own output

use clap::{Parser, Subcommand};
use resolvd_engine::{Aggregation, Dissemination, EngineConfig};
use resolvd_sim::{Config, Faults, Latency, Partition, PublishTo, Report};
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(name = "resolvd-sim", about = "Deterministic simulation of N real resolvd engines")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Runs every N of `--sizes`, own partials flooded and sent to
    /// aggregators, honest, with 1/3 withholding, with 1/3 sending garbage and
    /// with 1/3 withholding placed first in the submitter order; prints a
    /// Markdown table (with the wall time of each run).
    Bench {
        /// Committee sizes.
        #[arg(long, value_delimiter = ',', default_value = "16,32,64,256,1024")]
        sizes: Vec<usize>,
        /// Fault mixes (each as `--faults`), `;`-separated; a mix may add run
        /// options after `+`: `commit-reveal=MS`, `partition=SPEC` (as
        /// `--partition`), `cores=K`, `transport-us=T`, `cpu-scale=F`,
        /// `publish=mesh|all` (as the flags), `up-to=N` (only at sizes up to
        /// N), e.g.
        /// `forge=1/3+commit-reveal=500+up-to=256`.
        #[arg(
            long,
            value_delimiter = ';',
            default_value = "none;withhold=1/3;garbage=1/3;withhold=1/3,ground-deal;withhold=1/3,adversarial"
        )]
        mixes: Vec<String>,
        /// Dissemination of own partials, each run: 0 floods them on gossip,
        /// K > 0 sends them to aggregators (K in the first group).
        #[arg(long = "each-aggregators", value_delimiter = ',', default_value = "0,8")]
        each_aggregators: Vec<usize>,
        /// Also write the table into this Markdown file, between the lines
        /// `<!-- TABLE:begin -->` and `<!-- TABLE:end -->`.
        #[arg(long)]
        write: Option<std::path::PathBuf>,
        /// The marker name of `--write`.
        #[arg(long, default_value = "sim-table")]
        table: String,
        /// Also write an SVG plot of p99 and bytes against N here.
        #[arg(long)]
        plot: Option<std::path::PathBuf>,
        #[command(flatten)]
        run: RunArgs,
    },
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Committee members.
    #[arg(long, default_value_t = 64)]
    nodes: usize,
    /// Seed of every random draw.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Faulty members: crash=, withhold=, garbage=, equivocate=, forge=,
    /// slow=[xK], each a count or a fraction (0.33 or 1/3), comma-separated;
    /// `adversarial` places them first in the dispute's submitter order,
    /// `ground-deal` first in the deal id's own order (what grinding it reaches).
    #[arg(long, default_value = "none")]
    faults: String,
    /// One-way link latency: MEAN_MS:SPREAD_MS (uniform) or geo.
    #[arg(long, default_value = "50:10")]
    latency: String,
    /// Packet loss probability.
    #[arg(long, default_value_t = 0.01)]
    loss: f64,
    /// Upload bandwidth per node, Mbit/s.
    #[arg(long, default_value_t = 100)]
    uplink_mbit: u64,
    /// Gossip mesh degree D.
    #[arg(long, default_value_t = 8)]
    mesh: usize,
    /// Own messages go to the mesh peers (`mesh`) or every member (`all`).
    #[arg(long, default_value = "mesh")]
    publish: String,
    /// Own partials go to aggregators, K in the first group (then 2K, 4K, …);
    /// 0: flooded on gossip.
    #[arg(long, default_value_t = 0)]
    aggregators: usize,
    /// With aggregators: members per slice (0: partials go to the
    /// aggregators directly).
    #[arg(long, default_value_t = 32)]
    slice: usize,
    /// With aggregators: collectors per slice.
    #[arg(long, default_value_t = 8)]
    collectors: usize,
    /// With aggregators: without a certificate this long (ms) after sending,
    /// a member sends to the next group.
    #[arg(long, default_value_t = 1000)]
    escalate_ms: u64,
    /// With aggregators: a collector sends a slice's aggregate this long (ms)
    /// after its first partial, unless the slice is complete sooner.
    #[arg(long, default_value_t = 50)]
    collect_ms: u64,
    /// How long (ms) a submitter waits after its certificate for more
    /// signers (the engine's `widen_wait`).
    #[arg(long, default_value_t = EngineConfig::default().widen_wait.as_millis() as u64)]
    widen_ms: u64,
    /// Commit-reveal's window, ms (the registry's `commitRevealMs`; 0: off).
    #[arg(long, default_value_t = 0)]
    commit_reveal_ms: u64,
    /// Cut COUNT_OR_FRACTION of the members off from the others from FROM_MS
    /// until UNTIL_MS of virtual time: `1/2@0-3000`.
    #[arg(long)]
    partition: Option<String>,
    /// CPUs all nodes share, as the processes of `make bench-scale` share the
    /// machine's (0: each node has its own).
    #[arg(long, default_value_t = 0)]
    cores: usize,
    /// Every modelled CPU cost × this (e.g. the real node's CPU per dispute
    /// over the simulated one).
    #[arg(long, default_value_t = 1.0)]
    cpu_scale: f64,
    /// CPU (µs) added to every message copy sent and every copy received:
    /// the real transport's, which the modelled costs leave out.
    #[arg(long, default_value_t = 0)]
    transport_us: u64,
    /// Stop after this much virtual time, seconds.
    #[arg(long, default_value_t = 40)]
    max_secs: u64,
    /// Output: json, row or both.
    #[arg(long, default_value = "both")]
    format: String,
}

impl RunArgs {
    /// The run's configuration for `nodes` and a mix: faults (as
    /// `--faults`), then optional `+commit-reveal=MS`, `+partition=SPEC`,
    /// `+cores=K`, `+transport-us=T`, `+cpu-scale=F` and `+publish=TO`,
    /// which override the flags.
    fn config(&self, nodes: usize, mix: &str) -> eyre::Result<Config> {
        let mut parts = mix.split('+');
        let faults = parts.next().unwrap_or("none");
        let mut cfg = Config::new(nodes, self.seed);
        cfg.faults = Faults::parse(faults, nodes)?;
        cfg.net.latency = self.latency.parse::<Latency>()?;
        cfg.net.loss = self.loss;
        cfg.net.uplink_bps = self.uplink_mbit * 1_000_000;
        cfg.net.mesh = self.mesh;
        cfg.net.publish = self.publish.parse::<PublishTo>()?;
        cfg.max_time = Duration::from_secs(self.max_secs);
        cfg.widen_wait = Duration::from_millis(self.widen_ms);
        cfg.cores = (self.cores > 0).then_some(self.cores);
        cfg.cpu_scale = self.cpu_scale;
        cfg.transport = Duration::from_micros(self.transport_us);
        cfg.commit_reveal =
            (self.commit_reveal_ms > 0).then(|| Duration::from_millis(self.commit_reveal_ms));
        cfg.net.partition =
            self.partition.as_deref().map(|p| Partition::parse(p, nodes)).transpose()?;
        for option in parts {
            match option.split_once('=') {
                Some(("commit-reveal", ms)) => {
                    let ms: u64 = ms.parse()?;
                    cfg.commit_reveal = (ms > 0).then(|| Duration::from_millis(ms));
                }
                Some(("partition", spec)) => {
                    cfg.net.partition = Some(Partition::parse(spec, nodes)?)
                }
                Some(("cores", k)) => {
                    let k: usize = k.parse()?;
                    cfg.cores = (k > 0).then_some(k);
                }
                Some(("transport-us", us)) => cfg.transport = Duration::from_micros(us.parse()?),
                Some(("cpu-scale", f)) => cfg.cpu_scale = f.parse()?,
                Some(("publish", to)) => cfg.net.publish = to.parse::<PublishTo>()?,
                Some(("up-to", _)) => {}
                _ => eyre::bail!(
                    "`{option}` in `{mix}`: expected commit-reveal=MS, partition=SPEC, cores=K, \
                     transport-us=T, cpu-scale=F, publish=mesh|all or up-to=N"
                ),
            }
        }
        if self.aggregators > 0 {
            cfg.dissemination = Dissemination::Aggregators(Aggregation {
                group: self.aggregators,
                slice: self.slice,
                collectors: self.collectors,
                escalate_after: Duration::from_millis(self.escalate_ms),
                collect_wait: Duration::from_millis(self.collect_ms),
            });
        }
        Ok(cfg)
    }
}

fn main() -> eyre::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        None => {
            let cfg = cli.run.config(cli.run.nodes, &cli.run.faults)?;
            let started = Instant::now();
            let report = resolvd_sim::run(cfg)?;
            if cli.run.format != "row" {
                println!("{}", report.to_json());
            }
            if cli.run.format != "json" {
                println!("{}", report.table_row());
            }
            eprintln!("simulated in {:.1} s", started.elapsed().as_secs_f64());
        }
        Some(Command::Bench {
            sizes,
            mixes,
            each_aggregators,
            write,
            table: marker,
            plot,
            mut run,
        }) => {
            let header = Report::TABLE_HEADER.replace(" |\n", " | simulated in |\n") + " --- |";
            println!("{header}");
            let mut table = vec![header];
            let mut runs = Vec::new();
            for n in sizes {
                for (k, f) in
                    each_aggregators.iter().flat_map(|k| mixes.iter().map(move |f| (k, f)))
                {
                    if up_to(f)?.is_some_and(|max| n > max) {
                        continue;
                    }
                    run.aggregators = *k;
                    let cfg = run.config(n, f)?;
                    let started = Instant::now();
                    let report = resolvd_sim::run(cfg)?;
                    let wall = started.elapsed().as_secs_f64();
                    let row = format!("{} {wall:.1} s |", report.table_row());
                    println!("{row}");
                    table.push(row);
                    let how = if *k == 0 { "flood" } else { "aggregators" };
                    runs.push((format!("{how}, {f}"), report));
                }
            }
            if let Some(path) = write {
                let (begin, end) =
                    (format!("<!-- {marker}:begin -->"), format!("<!-- {marker}:end -->"));
                write_between(&path, &begin, &end, &table)?;
            }
            if let Some(path) = plot {
                std::fs::write(&path, resolvd_sim::plot::svg(&runs))?;
            }
        }
    }
    Ok(())
}

/// A mix's `+up-to=N`: `bench` runs it only at sizes up to N.
fn up_to(mix: &str) -> eyre::Result<Option<usize>> {
    for option in mix.split('+').skip(1) {
        if let Some(("up-to", n)) = option.split_once('=') {
            return Ok(Some(n.parse()?));
        }
    }
    Ok(None)
}

/// Replaces the lines between `begin` and `end` in the file at `path`.
fn write_between(
    path: &std::path::Path,
    begin: &str,
    end: &str,
    lines: &[String],
) -> eyre::Result<()> {
    let text = std::fs::read_to_string(path)?;
    let (Some(b), Some(e)) = (text.find(begin), text.find(end)) else {
        eyre::bail!("{}: no `{begin}` … `{end}` lines to write the table between", path.display());
    };
    eyre::ensure!(b < e, "{}: `{end}` comes before `{begin}`", path.display());
    let out = format!("{}{begin}\n{}\n{}", &text[..b], lines.join("\n"), &text[e..]);
    std::fs::write(path, out)?;
    Ok(())
}
