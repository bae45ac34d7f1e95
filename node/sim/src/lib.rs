//! resolvd-sim: a deterministic network simulator that drives N real
//! `resolvd-engine` instances in one process, one thread, under virtual time.
//!
//! A [`Simulation`] is a discrete-event loop over a priority queue of
//! (virtual time, sequence number, event). Each member has its own engine,
//! its own BLS key (signing through slashing protection) and a shell that
//! performs the engine's [`resolvd_engine::Action`]s as `resolvd-node` does,
//! without IO: gossip goes through a modelled network ([`net`]: per-link
//! latency, TCP-like loss recovery, a serializing uplink, a gossip mesh with
//! flood publish, forwarding after validation and dedup by content id), chain
//! reads answer after a modelled RPC round trip, and every piece of work
//! occupies the node's CPU (a single-server queue) for a modelled time taken
//! from the repository's criterion benchmarks ([`Costs`]). Partials are
//! signed and verified for real (blst, inside the engine); the replay is a
//! precomputed envelope with a modelled cost.
//!
//! It never reads a clock to decide anything (one base `Instant` plus
//! virtual offsets is handed to the engines) and draws every random number
//! from the run's seed: the same [`Config`] gives the same [`Report`], byte
//! for byte. No async runtime, network, database or EVM.

mod config;
mod error;
pub mod net;
pub mod plot;
mod report;
mod rng;
mod sim;

pub use config::{
    ChainConfig, Config, Costs, Faults, Latency, NetConfig, Partition, Placement, PublishTo,
    MESSAGE_OVERHEAD,
};
pub use error::{Error, Result};
pub use report::{NodeStats, Percentiles, Report, Role, Spread, Verdicts};
pub use sim::{
    announcement, domain, member_key, message_id, Message, Origin, SendRecord, Simulation, EPOCH,
};

/// Runs one simulation.
pub fn run(cfg: Config) -> Result<Report> {
    Ok(Simulation::new(cfg)?.run())
}
