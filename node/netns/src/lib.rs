//! A multi-host network on one machine: one Linux network namespace per
//! resolvd node and one for anvil, joined by emulated WAN links, created and
//! removed by an RAII [`Netns`].
//!
//! Topology (every name starts with the run prefix `rsvd<pid>-<k>`):
//!
//! - namespaces `<prefix>-n<i>` (node `i`) and `<prefix>-anvil`, each with a
//!   loopback and one point-to-point device `wan0` holding an address of the
//!   run's subnet `10.213.S.0/24` (node `i` is `.i+1`, anvil `.250`); no other
//!   route exists there, so nothing in them can reach beyond the run;
//! - in the root namespace one device `<prefix>-o` (`.254`, the *observer*:
//!   the test process reaching node APIs and anvil), the only address the
//!   harness adds outside its namespaces;
//! - the link emulator (`wan.py`, a child process killed with the test)
//!   holding every device's TUN file descriptor: it routes IPv4 packets by
//!   destination and applies each node's egress [`LinkShape`] (loss, one-way
//!   delay with jitter, rate cap) to what the node sends to nodes and anvil.
//!   Traffic to and from the observer is not shaped (unless asked), so the
//!   harness measures the network without being part of it.
//!
//! Why not `tc netem` on veth pairs: the kernel this was built on has no
//! `sch_netem` (nor `fq`, whose departure times BPF could set), and the
//! workspace forbids `unsafe`, which opening a TUN device from Rust needs
//! (`TUNSETIFF`). The emulator is ~200 lines of Python over TUN devices; it
//! counts what each namespace sent and received by peer kind, which gives the
//! per-node traffic figures directly.
//!
//! Cleanup: [`Drop`] kills every process inside the run's namespaces, stops
//! the emulator (its TUN devices vanish with it) and deletes the namespaces.
//! Processes started through [`NsHost::command`] get `PDEATHSIG=KILL`
//! (`setpriv --pdeathsig`), so they die with the thread that spawned them if
//! the test is killed; [`Netns::create`] first sweeps namespaces and links
//! left by runs whose process is gone ([`sweep_dead_runs`]).
//!
//! When the machine cannot do this (not root, no `ip`, `setpriv`, `python3`
//! or `/dev/net/tun`), [`Netns::create`] returns
//! [`NetnsError::Unsupported`] with the reason.

use serde::Deserialize;
use std::{
    ffi::OsStr,
    io::{BufRead, BufReader, Write},
    net::{Ipv4Addr, SocketAddr},
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Mutex,
    },
    time::{Duration, Instant},
};

/// The link emulator, run as `python3 -c`.
const WAN_PY: &str = include_str!("wan.py");

/// TCP handshake timer run inside a namespace: prints the connect times in
/// milliseconds as a JSON list.
const RTT_PY: &str = r#"
import json, socket, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
out = []
for _ in range(n):
    t = time.monotonic()
    s = socket.create_connection((host, port), timeout=10)
    out.append((time.monotonic() - t) * 1e3)
    s.close()
    time.sleep(0.05)
print(json.dumps(out))
"#;

/// Where `ip netns` keeps its namespaces.
const NETNS_DIR: &str = "/run/netns";
/// Every name the harness creates starts with this.
const NAME_PREFIX: &str = "rsvd";
/// Topologies created by this process so far (part of the run prefix).
static RUNS: AtomicUsize = AtomicUsize::new(0);

/// Errors of the harness.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetnsError {
    /// This machine or user cannot create the topology; tests skip with this.
    #[error("network namespaces unavailable: {0}")]
    Unsupported(String),
    /// Options the harness cannot honour.
    #[error("invalid netns options: {0}")]
    InvalidOptions(String),
    /// A command failed.
    #[error("`{cmd}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        cmd: String,
        /// Its exit status.
        status: String,
        /// Its standard error.
        stderr: String,
    },
    /// The link emulator misbehaved (exited, answered garbage or an error).
    #[error("link emulator: {0}")]
    Emulator(String),
    /// Filesystem or process IO.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Result alias of this module.
pub type Result<T, E = NetnsError> = std::result::Result<T, E>;

/// The egress shape of a namespace's link (what `tc netem` would be given).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkShape {
    /// Mean one-way delay.
    pub delay: Duration,
    /// Standard deviation of the delay (normal distribution, clipped at 0;
    /// packets of one sender stay in order).
    pub jitter: Duration,
    /// Probability that a packet is lost, in [0, 1].
    pub loss: f64,
    /// Rate cap in bits per second (serialisation at the sender), if any.
    pub rate_bps: Option<u64>,
    /// Packets queued in the link at most (beyond: dropped).
    pub limit: usize,
}

impl Default for LinkShape {
    /// 50 ms ± 10 ms, 1 % loss, 100 Mbit/s, 1000 packets (netem's limit).
    fn default() -> Self {
        Self {
            delay: Duration::from_millis(50),
            jitter: Duration::from_millis(10),
            loss: 0.01,
            rate_bps: Some(100_000_000),
            limit: 1_000,
        }
    }
}

impl LinkShape {
    fn validate(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.loss) {
            return Err(NetnsError::InvalidOptions(format!("loss {} not in [0, 1]", self.loss)));
        }
        if self.rate_bps == Some(0) || self.limit == 0 {
            return Err(NetnsError::InvalidOptions("rate and limit must be > 0".into()));
        }
        Ok(())
    }

    fn to_json(self) -> serde_json::Value {
        serde_json::json!({
            "delay_ms": self.delay.as_secs_f64() * 1e3,
            "jitter_ms": self.jitter.as_secs_f64() * 1e3,
            "loss": self.loss,
            "rate_bps": self.rate_bps,
            "limit": self.limit,
        })
    }
}

/// Options of [`Netns::create`].
#[derive(Clone, Debug)]
pub struct NetnsOptions {
    /// Node namespaces (1..=200).
    pub nodes: usize,
    /// Egress shape of every node.
    pub node_link: LinkShape,
    /// Egress shape of anvil (unshaped if `None`).
    pub anvil_link: Option<LinkShape>,
    /// Shape traffic to the observer (the test process) too.
    pub shape_to_observer: bool,
    /// The Python interpreter of the link emulator.
    pub python: PathBuf,
    /// Seed of the emulator's loss and jitter.
    pub seed: u64,
}

impl NetnsOptions {
    /// `nodes` nodes with [`LinkShape::default`] links, anvil unshaped;
    /// `python3` from `$RESOLVD_PYTHON` or the `PATH`.
    pub fn new(nodes: usize) -> Self {
        Self {
            nodes,
            node_link: LinkShape::default(),
            anvil_link: None,
            shape_to_observer: false,
            python: std::env::var_os("RESOLVD_PYTHON").map_or("python3".into(), PathBuf::from),
            seed: 1,
        }
    }
}

/// A namespace of the topology and its address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NsHost {
    /// `ip netns` name.
    pub name: String,
    /// Its address on the run's subnet.
    pub ip: Ipv4Addr,
}

impl NsHost {
    /// A command running `program` inside this namespace (`ip netns exec`),
    /// with `PDEATHSIG=KILL` (`setpriv`), so it dies with the thread that
    /// spawns it. The pid of the spawned child is `program`'s own (both
    /// wrappers `exec`).
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--pdeathsig", "KILL", "ip", "netns", "exec", &self.name]).arg(program);
        cmd
    }
}

/// Where everything of a [`Netns`] is; plain data, handed to the devnet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetnsLayout {
    /// Node namespaces, by node index.
    pub nodes: Vec<NsHost>,
    /// anvil's namespace.
    pub anvil: NsHost,
    /// The observer's (test process's) address in the root namespace.
    pub observer: Ipv4Addr,
}

/// Traffic counters of one direction, by the kind of peer.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct ByPeer {
    /// To or from node namespaces.
    pub node: u64,
    /// To or from anvil.
    pub anvil: u64,
    /// To or from the observer.
    pub observer: u64,
}

/// Counters of one namespace's link, as the emulator saw them (IP bytes).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceStats {
    /// Kernel name the device had in the root namespace before it moved.
    pub name: String,
    /// `node`, `anvil` or `observer`.
    pub kind: String,
    /// Bytes the namespace sent (before loss).
    pub sent_bytes: ByPeer,
    /// Packets the namespace sent (before loss).
    pub sent_packets: ByPeer,
    /// Bytes delivered into the namespace.
    pub recv_bytes: ByPeer,
    /// Packets delivered into the namespace.
    pub recv_packets: ByPeer,
    /// Of the TCP packets sent to nodes: IP and TCP header bytes.
    pub sent_tcp_header_bytes: u64,
    /// Of the TCP packets sent to nodes: those without payload
    /// (acknowledgements, and SYN / FIN / RST segments).
    pub sent_tcp_empty_packets: u64,
    /// The bytes of [`Self::sent_tcp_empty_packets`].
    pub sent_tcp_empty_bytes: u64,
    /// Packets lost to the shape's loss rate.
    pub lost: u64,
    /// Packets dropped because the link's queue was full.
    pub overflow: u64,
    /// Packets dropped by a partition.
    pub partitioned: u64,
    /// Packets to addresses outside the run.
    pub unroutable: u64,
}

/// Counters of every link: nodes by index, then anvil, then the observer.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct LinkStats {
    /// Per device.
    pub devices: Vec<DeviceStats>,
    /// Packets in flight in the emulator.
    pub queued: u64,
}

/// The emulator child and its command pipe.
#[derive(Debug)]
struct Emulator {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Emulator {
    fn read_line(&mut self) -> Result<serde_json::Value> {
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line)?;
        if n == 0 {
            let status = self.child.try_wait().ok().flatten();
            return Err(NetnsError::Emulator(format!("exited ({status:?})")));
        }
        let value: serde_json::Value = serde_json::from_str(&line)
            .map_err(|e| NetnsError::Emulator(format!("bad answer {line:?}: {e}")))?;
        if let Some(err) = value.get("error") {
            return Err(NetnsError::Emulator(err.to_string()));
        }
        Ok(value)
    }

    fn request(&mut self, cmd: &serde_json::Value) -> Result<serde_json::Value> {
        writeln!(self.stdin, "{cmd}")?;
        self.stdin.flush()?;
        self.read_line()
    }
}

/// The topology of one run; everything it made is removed on drop.
#[derive(Debug)]
pub struct Netns {
    prefix: String,
    layout: NetnsLayout,
    /// Namespaces created so far (removed on drop even if `create` failed midway).
    created: Vec<String>,
    emulator: Option<Mutex<Emulator>>,
    observer_dev: String,
    python: PathBuf,
}

/// Runs `cmd`, returning its stdout, or [`NetnsError::Command`].
fn run(cmd: &mut Command) -> Result<String> {
    run_with_input(cmd, None)
}

fn run_with_input(cmd: &mut Command, input: Option<&str>) -> Result<String> {
    let line = format!("{cmd:?}");
    cmd.stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| NetnsError::Command {
        cmd: line.clone(),
        status: "not started".into(),
        stderr: e.to_string(),
    })?;
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(input.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        return Err(NetnsError::Command {
            cmd: line,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ip <args>`.
fn ip(args: &[&str]) -> Result<String> {
    run(Command::new("ip").args(args))
}

/// Whether `program --version`-like `args` runs.
fn runs(program: &OsStr, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Checks what the harness needs, or says what is missing.
fn preflight(python: &Path) -> Result<()> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    // CAP_NET_ADMIN = 12, CAP_SYS_ADMIN = 21 (setns, mounting /run/netns).
    for (bit, name) in [(12, "CAP_NET_ADMIN"), (21, "CAP_SYS_ADMIN")] {
        if cap_eff & (1 << bit) == 0 {
            return Err(NetnsError::Unsupported(format!(
                "the test process lacks {name} (run it as root)"
            )));
        }
    }
    for (program, args, why) in [
        ("ip", &["-V"][..], "`ip` (iproute2) is not on the PATH"),
        ("setpriv", &["--version"][..], "`setpriv` (util-linux) is not on the PATH"),
    ] {
        if !runs(OsStr::new(program), args) {
            return Err(NetnsError::Unsupported(why.into()));
        }
    }
    if !runs(python.as_os_str(), &["-c", "import fcntl, select; select.epoll"]) {
        return Err(NetnsError::Unsupported(format!(
            "{} (with fcntl and select.epoll) does not run; set RESOLVD_PYTHON",
            python.display()
        )));
    }
    if std::fs::OpenOptions::new().read(true).write(true).open("/dev/net/tun").is_err() {
        return Err(NetnsError::Unsupported("/dev/net/tun cannot be opened".into()));
    }
    Ok(())
}

/// The pid in a harness name `rsvd<pid>-...`.
fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(NAME_PREFIX)?;
    let (digits, _) = rest.split_once('-')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Names of the namespaces under `/run/netns`.
fn namespaces() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(NETNS_DIR) else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect()
}

/// Pids of the processes whose network namespace is `ns`.
pub fn pids_in(ns: &str) -> Vec<u32> {
    let Ok(target) = std::fs::metadata(Path::new(NETNS_DIR).join(ns)) else { return Vec::new() };
    let Ok(proc) = std::fs::read_dir("/proc") else { return Vec::new() };
    proc.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let m = std::fs::metadata(format!("/proc/{pid}/ns/net")).ok()?;
        (m.ino() == target.ino() && m.dev() == target.dev()).then_some(pid)
    })
    .collect()
}

/// SIGKILLs every process in `ns` and waits (up to 5 s) until none is left.
fn kill_all_in(ns: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let pids = pids_in(ns);
        if pids.is_empty() || Instant::now() > deadline {
            return;
        }
        let _ = Command::new("kill")
            .arg("-KILL")
            .args(pids.iter().map(u32::to_string))
            .stderr(Stdio::null())
            .status();
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Removes namespaces (after killing their processes) and root-namespace
/// links named `rsvd<pid>-*` whose `pid` is not running; returns their names.
pub fn sweep_dead_runs() -> Vec<String> {
    let mut removed = Vec::new();
    for ns in namespaces() {
        if owner_pid(&ns).is_some_and(|pid| !alive(pid)) {
            kill_all_in(&ns);
            if ip(&["netns", "del", &ns]).is_ok() {
                removed.push(ns);
            }
        }
    }
    let links = ip(&["-o", "link", "show"]).unwrap_or_default();
    for line in links.lines() {
        // "12: rsvd123-0-o: <...>" (or "name@peer:").
        let Some(name) = line.split(": ").nth(1) else { continue };
        let name = name.split('@').next().unwrap_or(name);
        if owner_pid(name).is_some_and(|pid| !alive(pid)) && ip(&["link", "del", name]).is_ok() {
            removed.push(name.to_owned());
        }
    }
    removed
}

/// Namespaces of process `pid` (`rsvd<pid>-*`) that exist now.
pub fn namespaces_of(pid: u32) -> Vec<String> {
    namespaces().into_iter().filter(|n| owner_pid(n) == Some(pid)).collect()
}

/// A /24 under 10.213.0.0/16 that no address or route of the root namespace
/// touches, starting from one derived from the pid.
fn free_subnet(pid: u32) -> Result<u8> {
    let used = format!("{}{}", ip(&["-4", "-o", "addr", "show"])?, ip(&["-4", "route", "show"])?);
    let start = (pid % 200) as usize;
    (0..200)
        .map(|k| ((start + k) % 200 + 1) as u8)
        .find(|s| !used.contains(&format!("10.213.{s}.")))
        .ok_or_else(|| NetnsError::InvalidOptions("no free /24 under 10.213.0.0/16".into()))
}

impl Netns {
    /// Creates the topology (see the module docs); sweeps dead runs first.
    pub fn create(options: NetnsOptions) -> Result<Self> {
        if options.nodes == 0 || options.nodes > 200 {
            return Err(NetnsError::InvalidOptions(format!(
                "{} nodes (1..=200 fit the /24)",
                options.nodes
            )));
        }
        options.node_link.validate()?;
        if let Some(s) = &options.anvil_link {
            s.validate()?;
        }
        preflight(&options.python)?;
        let swept = sweep_dead_runs();
        if !swept.is_empty() {
            tracing::info!(target: "netns", ?swept, "removed what dead runs left");
        }
        let pid = std::process::id();
        let run = RUNS.fetch_add(1, Ordering::Relaxed);
        // `<prefix>-o` is a root-namespace interface name: at most 15 bytes.
        let prefix = format!("{NAME_PREFIX}{pid}-{run}");
        if prefix.len() + 2 > 15 {
            return Err(NetnsError::InvalidOptions(format!("run prefix {prefix} too long")));
        }
        let subnet = free_subnet(pid)?;
        let addr = |host: u8| Ipv4Addr::new(10, 213, subnet, host);
        let layout = NetnsLayout {
            nodes: (0..options.nodes)
                .map(|i| NsHost { name: format!("{prefix}-n{i}"), ip: addr(i as u8 + 1) })
                .collect(),
            anvil: NsHost { name: format!("{prefix}-anvil"), ip: addr(250) },
            observer: addr(254),
        };
        let mut net = Self {
            observer_dev: format!("{prefix}-o"),
            prefix,
            layout,
            created: Vec::new(),
            emulator: None,
            python: options.python.clone(),
        };
        net.build(&options)?;
        tracing::info!(target: "netns", prefix = %net.prefix, subnet = %format!("10.213.{subnet}.0/24"), nodes = options.nodes, "topology up");
        Ok(net)
    }

    fn build(&mut self, options: &NetnsOptions) -> Result<()> {
        let hosts: Vec<NsHost> =
            self.layout.nodes.iter().cloned().chain([self.layout.anvil.clone()]).collect();
        for (i, h) in hosts.iter().enumerate() {
            match ip(&["netns", "add", &h.name]) {
                Ok(_) => self.created.push(h.name.clone()),
                Err(NetnsError::Command { stderr, .. }) if i == 0 => {
                    return Err(NetnsError::Unsupported(format!("`ip netns add`: {stderr}")))
                }
                Err(e) => return Err(e),
            }
        }
        let mut devices: Vec<serde_json::Value> = self
            .layout
            .nodes
            .iter()
            .map(|h| serde_json::json!({"ip": h.ip.to_string(), "kind": "node", "shape": options.node_link.to_json()}))
            .collect();
        devices.push(serde_json::json!({
            "ip": self.layout.anvil.ip.to_string(),
            "kind": "anvil",
            "shape": options.anvil_link.map(LinkShape::to_json),
        }));
        devices.push(serde_json::json!({"ip": self.layout.observer.to_string(), "kind": "observer", "shape": null}));
        let config = serde_json::json!({
            "seed": options.seed,
            "devices": devices,
            "shape_to_observer": options.shape_to_observer,
        });
        let mut child = Command::new("setpriv")
            .args(["--pdeathsig", "KILL"])
            .arg(&options.python)
            .args(["-c", WAN_PY])
            .arg(config.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| NetnsError::Emulator(format!("starting it: {e}")))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(NetnsError::Emulator("no pipes".into()));
        };
        let mut emulator = Emulator { child, stdin, stdout: BufReader::new(stdout) };
        let hello = emulator.read_line();
        self.emulator = Some(Mutex::new(emulator));
        let names: Vec<String> = hello?
            .get("devices")
            .and_then(|d| serde_json::from_value(d.clone()).ok())
            .ok_or_else(|| NetnsError::Emulator("no device names".into()))?;
        if names.len() != hosts.len() + 1 {
            return Err(NetnsError::Emulator(format!(
                "{} devices for {}",
                names.len(),
                hosts.len() + 1
            )));
        }
        // Move each device into its namespace, then configure it there.
        let moves: String = hosts
            .iter()
            .zip(&names)
            .map(|(h, d)| format!("link set {d} netns {}\n", h.name))
            .collect();
        run_with_input(Command::new("ip").args(["-batch", "-"]), Some(&moves))?;
        for (h, d) in hosts.iter().zip(&names) {
            let script = format!(
                "link set {d} name wan0\nlink set wan0 addrgenmode none\naddr add {}/24 dev wan0\nlink set wan0 up\nlink set lo up\n",
                h.ip
            );
            run_with_input(Command::new("ip").args(["-n", &h.name, "-batch", "-"]), Some(&script))?;
        }
        let observer = &names[hosts.len()];
        let script = format!(
            "link set {observer} name {dev}\nlink set {dev} addrgenmode none\naddr add {}/24 dev {dev}\nlink set {dev} up\n",
            self.layout.observer,
            dev = self.observer_dev
        );
        run_with_input(Command::new("ip").args(["-batch", "-"]), Some(&script))?;
        Ok(())
    }

    /// The run prefix (`rsvd<pid>-<k>`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Namespaces and addresses.
    pub fn layout(&self) -> &NetnsLayout {
        &self.layout
    }

    fn request(&self, cmd: serde_json::Value) -> Result<serde_json::Value> {
        let emulator =
            self.emulator.as_ref().ok_or_else(|| NetnsError::Emulator("not started".into()))?;
        let mut emulator = emulator.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        emulator.request(&cmd)
    }

    /// Every link's counters now.
    pub fn stats(&self) -> Result<LinkStats> {
        let value = self.request(serde_json::json!({"cmd": "stats"}))?;
        serde_json::from_value(value).map_err(|e| NetnsError::Emulator(format!("stats: {e}")))
    }

    /// Drops node-to-node packets between nodes of different `groups` (by
    /// node index) until [`Self::heal`]; nodes in no group are unaffected,
    /// and so are anvil and the observer.
    pub fn partition(&self, groups: &[Vec<usize>]) -> Result<()> {
        if let Some(&bad) = groups.iter().flatten().find(|&&i| i >= self.layout.nodes.len()) {
            return Err(NetnsError::InvalidOptions(format!("no node {bad}")));
        }
        self.request(serde_json::json!({"cmd": "partition", "groups": groups}))?;
        Ok(())
    }

    /// Ends a partition.
    pub fn heal(&self) -> Result<()> {
        self.request(serde_json::json!({"cmd": "heal"}))?;
        Ok(())
    }

    /// `samples` TCP handshake times from node `from`'s namespace to
    /// `target` (e.g. another node's p2p listener): one round trip each.
    pub fn tcp_rtt(
        &self,
        from: usize,
        target: SocketAddr,
        samples: usize,
    ) -> Result<Vec<Duration>> {
        let host = self
            .layout
            .nodes
            .get(from)
            .ok_or_else(|| NetnsError::InvalidOptions(format!("no node {from}")))?;
        let out = run(host
            .command(&self.python)
            .args(["-c", RTT_PY])
            .arg(target.ip().to_string())
            .arg(target.port().to_string())
            .arg(samples.to_string()))?;
        let ms: Vec<f64> = serde_json::from_str(out.trim())
            .map_err(|e| NetnsError::Emulator(format!("rtt output {out:?}: {e}")))?;
        Ok(ms.into_iter().map(|m| Duration::from_secs_f64(m.max(0.0) / 1e3)).collect())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for ns in &self.created {
            kill_all_in(ns);
        }
        if let Some(emulator) = self.emulator.take() {
            let mut e = emulator.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
            let _ = e.child.kill();
            let _ = e.child.wait();
        }
        for ns in &self.created {
            if let Err(e) = ip(&["netns", "del", ns]) {
                tracing::warn!(target: "netns", %ns, %e, "could not delete a namespace");
            }
        }
        // The TUN devices went with the emulator; this is for a device that
        // something else still holds.
        let _ = ip(&["link", "del", &self.observer_dev]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pids_are_parsed_from_harness_names_only() {
        assert_eq!(owner_pid("rsvd1234-0-n3"), Some(1234));
        assert_eq!(owner_pid("rsvd1234-0-o"), Some(1234));
        assert_eq!(owner_pid("rsvd-0-n3"), None);
        assert_eq!(owner_pid("rsvd12a-0"), None);
        assert_eq!(owner_pid("rsvdt3"), None);
        assert_eq!(owner_pid("eth0"), None);
    }

    #[test]
    fn bad_shapes_are_refused() {
        let mut o = NetnsOptions::new(2);
        o.node_link.loss = 1.5;
        assert!(matches!(Netns::create(o), Err(NetnsError::InvalidOptions(_))));
        assert!(matches!(Netns::create(NetnsOptions::new(0)), Err(NetnsError::InvalidOptions(_))));
        assert!(matches!(
            Netns::create(NetnsOptions::new(201)),
            Err(NetnsError::InvalidOptions(_))
        ));
    }
}
