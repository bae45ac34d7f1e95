//! A local resolvd network on one machine: anvil (Prague), the contracts
//! (compiled by the pinned solc into `contracts/out`), N registered
//! resolvers running as `resolvd run` child processes, and a buyer and a
//! seller who open real deals against a real prestate of the same chain.
//!
//! Used by the integration tests and by the `resolvd-devnet` binary. Everything listens
//! on 127.0.0.1; every run gets its own directory and free ports.

use alloy_network::TransactionBuilder;
use alloy_primitives::{address, keccak256, Address, Bytes, TxKind, B256, U256};
use alloy_provider::{DynProvider, Provider, ProviderBuilder};
use alloy_rpc_types_eth::{TransactionReceipt, TransactionRequest};
use alloy_signer_local::PrivateKeySigner;
use alloy_sol_types::SolCall;
use eyre::{bail, ensure, eyre, WrapErr};
use resolvd_node::{
    chain::Chain,
    config::{FaultConfig, NodeConfig},
    contracts::{deal_state, Deal, IEscrow, IRegistry, Terms, IERC20},
    keys,
    keystore::Kdf,
};
use resolvd_proto::{
    AttachmentKind, AttachmentV1, BackendVersionPolicy, Canonical, ContentType, DeliveryV1,
    EvmAnchorV1, EvmCallPlanV1, EvmSpecId, EvmWitnessV1, NoncePolicy, PredicateCommitmentV1,
    PrestateAnchorV1, SpecV1,
};
use resolvd_replay::{rpc, BACKEND_ID, BACKEND_VERSION_HASH};
use std::{
    net::{SocketAddr, TcpListener},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

mod attest;
pub use attest::OpenRequest;

/// Password of every devnet keystore (a throwaway network).
pub const PASSWORD: &str = "resolvd-devnet";
/// Bond per resolver, in bond-token units (18 decimals).
pub const BOND: u128 = 1_000 * 10u128.pow(18);
/// Deal amount.
pub const AMOUNT: u128 = 100 * 10u128.pow(18);
/// Seller data-availability bond per deal.
pub const SELLER_BOND: u128 = 10 * 10u128.pow(18);
/// Where transfers in the demo plans go.
pub const RECIPIENT: Address = address!("0x0000000000000000000000000000000000000bee");
/// The amount the buyer's predicate requires to arrive at [`RECIPIENT`].
pub const REQUIRED: u64 = 250;
/// Resolver fee per disputed deal (paid by the buyer at `challenge`).
pub const RESOLVER_FEE: u128 = 10u128.pow(18);
/// The buyer's challenge bond per disputed deal.
pub const CHALLENGE_BOND: u128 = 5 * 10u128.pow(18);
/// The registry's gas refund cap (deal-token units) for the `resolve` sender.
pub const GAS_REFUND_CAP: u128 = 10u128.pow(16);
/// Where slashed bonds go (the registry's sink).
pub const SLASH_SINK: Address = address!("0x000000000000000000000000000000000000dEaD");

/// Every HTTP request the devnet sends (JSON-RPC, node APIs) gives up after
/// this: a request lost on an emulated link is an error naming it, not a
/// test that waits forever.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

/// The devnet's HTTP client ([`HTTP_TIMEOUT`]). It drops a pooled
/// connection after 5 s idle: the node's API closes one after 10 s without a
/// request (`api.header_timeout_secs`), and a request sent on a connection
/// the server is closing fails.
pub fn http_client() -> eyre::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .timeout(HTTP_TIMEOUT)
        .connect_timeout(Duration::from_secs(10))
        .pool_idle_timeout(Duration::from_secs(5))
        .build()?)
}

/// A provider for `url` whose requests time out ([`HTTP_TIMEOUT`]).
pub fn http_provider(url: &str) -> eyre::Result<DynProvider> {
    let url: reqwest::Url = url.parse()?;
    let local = alloy_transport::utils::guess_local_url(url.as_str());
    let transport = alloy_transport_http::Http::with_client(http_client()?, url);
    let client = alloy_rpc_client::RpcClient::new(transport, local);
    Ok(ProviderBuilder::new().connect_client(client).erased())
}

/// A free TCP port on 127.0.0.1 for a process started later.
///
/// The port is only reserved until the caller's child binds it, so it is
/// drawn from below the kernel's ephemeral range
/// (`/proc/sys/net/ipv4/ip_local_port_range`): an outgoing connection of any
/// process on the machine (an RPC client, a dialing peer) is given a local
/// port from that range and could otherwise take the port in between. Ports
/// handed out once by this process are not handed out again, and none that
/// another process holds a reservation for: each port handed out is
/// reserved by an exclusive lock on `$TMPDIR/resolvd-ports/<port>`, held
/// until this process exits (nextest runs every test in its own process, so
/// parallel tests would otherwise draw the same port now and then).
pub fn free_port() -> eyre::Result<u16> {
    use rand::Rng;
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    static HELD: std::sync::Mutex<Vec<std::fs::File>> = std::sync::Mutex::new(Vec::new());
    let locks = std::env::temp_dir().join("resolvd-ports");
    std::fs::create_dir_all(&locks)?;
    let reserve = |port: u16| -> bool {
        let Ok(file) = std::fs::File::create(locks.join(port.to_string())) else { return false };
        if file.try_lock().is_err() {
            return false;
        }
        HELD.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(file);
        true
    };
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (low, high) = (10_000u16, ephemeral_low.max(10_001));
    let mut given = GIVEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut rng = rand::thread_rng();
    for _ in 0..1000 {
        let port = rng.gen_range(low..high);
        if !given.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() && reserve(port)
        {
            given.push(port);
            return Ok(port);
        }
    }
    // Everything below the ephemeral range is taken: let the kernel choose.
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// `port` if it is free on 127.0.0.1.
fn check_port(port: u16) -> eyre::Result<u16> {
    TcpListener::bind(("127.0.0.1", port))
        .map(drop)
        .wrap_err_with(|| format!("port {port} is in use (is another devnet still running?)"))?;
    Ok(port)
}

/// An anvil child process; killed on drop.
#[derive(Debug)]
pub struct Anvil {
    child: Child,
    /// JSON-RPC URL.
    pub url: String,
}

impl Anvil {
    /// Starts anvil on `port` with `block_time` seconds per block, logging to
    /// `log`. `finality_slots` is anvil's `--slots-in-an-epoch`: the
    /// `finalized` block trails the head by about twice that many blocks.
    pub fn start(
        bin: &Path,
        port: u16,
        block_time: u64,
        finality_slots: u64,
        log: &Path,
    ) -> eyre::Result<Self> {
        Self::spawn(Command::new(bin), bin, "127.0.0.1", port, block_time, finality_slots, log)
    }

    /// Like [`Self::start`], with `cmd` (anvil, possibly wrapped, e.g. in
    /// [`resolvd_netns::NsHost::command`]) listening on `host`.
    pub fn spawn(
        mut cmd: Command,
        bin: &Path,
        host: &str,
        port: u16,
        block_time: u64,
        finality_slots: u64,
        log: &Path,
    ) -> eyre::Result<Self> {
        let out = std::fs::File::create(log)?;
        let child = cmd
            .args(["--hardfork", "prague", "--host", host, "--port", &port.to_string()])
            .args(["--block-time", &block_time.to_string(), "--accounts", "10"])
            .args(["--slots-in-an-epoch", &finality_slots.max(1).to_string()])
            .stdout(Stdio::from(out.try_clone()?))
            .stderr(Stdio::from(out))
            .spawn()
            .wrap_err_with(|| {
                format!("starting {} (run deploy/toolchain/bootstrap.sh)", bin.display())
            })?;
        Ok(Self { child, url: format!("http://{host}:{port}") })
    }
}

impl Drop for Anvil {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TCP proxy that carries one directed p2p link (node i dialling node j)
/// and can cut it: existing connections are dropped, new ones refused.
/// Partitions in the chaos suite are made of these.
#[derive(Debug)]
pub struct LinkProxy {
    /// Where the dialling node connects.
    pub addr: SocketAddr,
    up: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl LinkProxy {
    /// Starts a proxy to `target` on a free 127.0.0.1 port.
    pub async fn start(target: SocketAddr) -> eyre::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (up, rx) = tokio::sync::watch::channel(true);
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if !*rx.borrow() {
                    continue; // dropped: the link is cut
                }
                let mut rx = rx.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = rx.wait_for(|up| !*up) => {}
                    }
                });
            }
        });
        Ok(Self { addr, up, task })
    }

    /// Cuts (`false`) or restores (`true`) the link.
    pub fn set_up(&self, up: bool) {
        self.up.send_replace(up);
    }
}

impl Drop for LinkProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Creation bytecode of the contracts, from forge's artifacts.
#[derive(Clone, Debug)]
pub struct Artifacts {
    /// `TestToken` (open mint; bond and deal token of the devnet).
    pub token: Bytes,
    /// `ResolverRegistry`.
    pub registry: Bytes,
    /// `Escrow`.
    pub escrow: Bytes,
    /// `Attestor`.
    pub attestor: Bytes,
    /// `ResolvdProofVerifier`.
    pub verifier: Bytes,
}

impl Artifacts {
    /// Reads `out/<Name>.sol/<Name>.json` under `contracts_dir` (run `forge build` first).
    pub fn load(contracts_dir: &Path) -> eyre::Result<Self> {
        let read = |name: &str| -> eyre::Result<Bytes> {
            let path = contracts_dir.join(format!("out/{name}.sol/{name}.json"));
            let text = std::fs::read_to_string(&path).wrap_err_with(|| {
                format!("reading {} (run `forge build` in contracts/)", path.display())
            })?;
            let json: serde_json::Value = serde_json::from_str(&text)?;
            let hex = json["bytecode"]["object"]
                .as_str()
                .ok_or_else(|| eyre!("{}: no bytecode.object", path.display()))?;
            Ok(alloy_primitives::hex::decode(hex)?.into())
        };
        Ok(Self {
            token: read("TestToken")?,
            registry: read("ResolverRegistry")?,
            escrow: read("Escrow")?,
            attestor: read("Attestor")?,
            verifier: read("ResolvdProofVerifier")?,
        })
    }
}

/// Addresses of a deployment.
#[derive(Clone, Copy, Debug)]
pub struct Deployment {
    /// Bond and deal token.
    pub token: Address,
    /// Registry.
    pub registry: Address,
    /// Escrow.
    pub escrow: Address,
    /// Attestor on the same registry (every node serves it too).
    pub attestor: Address,
    /// The ERC-8301 proof verifier of the registry.
    pub verifier: Address,
    /// Block of the escrow deployment (nodes scan from here).
    pub block: u64,
}

/// Waits (up to 10 s) until the chain at `url` answers.
pub async fn wait_for_chain(provider: &DynProvider, url: &str) -> eyre::Result<()> {
    for _ in 0..100 {
        if provider.get_chain_id().await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("the chain did not answer on {url}")
}

/// Sets `account`'s balance on a dev chain: anvil's `anvil_setBalance`, else
/// Hardhat's `hardhat_setBalance`. A chain with neither (not a dev chain)
/// is an error saying so.
pub async fn set_balance(
    provider: &DynProvider,
    account: Address,
    balance: U256,
) -> eyre::Result<()> {
    let mut errors = Vec::new();
    for method in ["anvil_setBalance", "hardhat_setBalance"] {
        match provider.raw_request::<_, serde_json::Value>(method.into(), (account, balance)).await
        {
            Ok(_) => return Ok(()),
            Err(e) => errors.push(format!("{method}: {e}")),
        }
    }
    bail!(
        "the chain cannot set an account's balance ({}): the devnet needs a dev chain with          anvil_setBalance or hardhat_setBalance (anvil, Hardhat) and unlocked dev accounts",
        errors.join("; ")
    )
}

/// Sends a transaction from an anvil-unlocked account and waits for success.
pub async fn send_from(
    provider: &DynProvider,
    from: Address,
    to: TxKind,
    input: Bytes,
) -> eyre::Result<TransactionReceipt> {
    let mut tx = TransactionRequest::default().with_from(from).with_input(input);
    tx.to = Some(to);
    let receipt = resolvd_node::chain::send_and_confirm(provider, tx)
        .await
        .map_err(|e| eyre!("sending from {from}: {e}"))?;
    Ok(receipt)
}

async fn call_from<C: SolCall>(
    provider: &DynProvider,
    from: Address,
    to: Address,
    call: C,
) -> eyre::Result<TransactionReceipt> {
    send_from(provider, from, TxKind::Call(to), call.abi_encode().into()).await
}

async fn create(
    provider: &DynProvider,
    from: Address,
    init: Bytes,
) -> eyre::Result<(Address, u64)> {
    let receipt = send_from(provider, from, TxKind::Create, init).await?;
    let address = receipt.contract_address.ok_or_else(|| eyre!("no contract address"))?;
    Ok((address, receipt.block_number.unwrap_or_default()))
}

/// The registry's warm-up of new stake on the devnet: the deals' deliver +
/// challenge windows (1 h each) must fit in it.
pub const ACTIVATION_DELAY: u64 = 7_200;

/// Moves anvil's clock past the warm-up and activates `indices` from `from`
/// (activation is permissionless); returns the new epoch.
pub async fn activate(
    provider: &DynProvider,
    from: Address,
    registry: Address,
    indices: &[u64],
) -> eyre::Result<u64> {
    let _: serde_json::Value =
        provider.raw_request("evm_increaseTime".into(), (ACTIVATION_DELAY + 1,)).await?;
    let _: String = provider.raw_request("evm_mine".into(), ()).await?;
    let call =
        IRegistry::activateCall { indices: indices.iter().map(|&i| U256::from(i)).collect() };
    call_from(provider, from, registry, call).await?;
    let tx = TransactionRequest::default()
        .with_to(registry)
        .with_input(IRegistry::currentEpochCall {}.abi_encode());
    let epoch = IRegistry::currentEpochCall::abi_decode_returns(&provider.call(tx).await?)?;
    Ok(u64::try_from(epoch)?)
}

/// Deploys token, registry, escrow, attestor and proof verifier from
/// `deployer` and allows the replay backend.
pub async fn deploy(
    provider: &DynProvider,
    artifacts: &Artifacts,
    deployer: Address,
) -> eyre::Result<Deployment> {
    use alloy_sol_types::SolValue;
    let (token, _) = create(provider, deployer, artifacts.token.clone()).await?;
    // RegistryParameters: bondToken, minimumBond, threshold 2/3, maxResolveWindow,
    // slashingWindow, unbondingDelay, activationDelay (>= the deals' deliver +
    // challenge windows), minimumCommitteeStake, whistleblowerBps, slashSink.
    let args = (
        token,
        U256::from(BOND),
        U256::from(2u64),
        U256::from(3u64),
        U256::from(3_600u64),
        U256::from(86_400u64),
        U256::from(2 * 86_400u64),
        U256::from(ACTIVATION_DELAY),
        U256::from(BOND),
        U256::from(1_000u64),
        SLASH_SINK,
    )
        .abi_encode_params();
    let mut init = artifacts.registry.to_vec();
    init.extend_from_slice(&args);
    let (registry, _) = create(provider, deployer, init.into()).await?;
    let (escrow, block) = deploy_escrow(provider, artifacts, deployer, registry).await?;
    let (attestor, _) =
        deploy_verdict_contract(provider, artifacts.attestor.clone(), deployer, registry).await?;
    let mut init = artifacts.verifier.to_vec();
    init.extend_from_slice(&(registry,).abi_encode_params());
    let (verifier, _) = create(provider, deployer, init.into()).await?;
    Ok(Deployment { token, registry, escrow, attestor, verifier, block })
}

/// Deploys an escrow on `registry` (owned by `deployer`) with the EVM V1
/// backend allowed; returns it and its block.
pub async fn deploy_escrow(
    provider: &DynProvider,
    artifacts: &Artifacts,
    deployer: Address,
    registry: Address,
) -> eyre::Result<(Address, u64)> {
    deploy_verdict_contract(provider, artifacts.escrow.clone(), deployer, registry).await
}

/// Deploys an Escrow or an Attestor (`creation` code; both take
/// `(registry, owner)`) owned by `deployer`, with the EVM V1 backend allowed.
async fn deploy_verdict_contract(
    provider: &DynProvider,
    creation: Bytes,
    deployer: Address,
    registry: Address,
) -> eyre::Result<(Address, u64)> {
    use alloy_sol_types::SolValue;
    let mut init = creation.to_vec();
    init.extend_from_slice(&(registry, deployer).abi_encode_params());
    let (escrow, block) = create(provider, deployer, init.into()).await?;
    let allow = IEscrow::setBackendCall {
        backendId: *BACKEND_ID,
        versionHash: *BACKEND_VERSION_HASH,
        allowed: true,
    };
    call_from(provider, deployer, escrow, allow).await?;
    Ok((escrow, block))
}

/// One resolver of the devnet.
#[derive(Debug)]
pub struct DevNode {
    /// Position in the devnet (also its registry index).
    pub index: usize,
    /// Its directory (config, keystores, data, log).
    pub dir: PathBuf,
    /// Its configuration (written to `dir/node.toml` on start).
    pub config: NodeConfig,
    /// HTTP API address.
    pub api: SocketAddr,
    /// p2p multiaddr.
    pub p2p: String,
    /// Operator (transaction) account.
    pub operator: Address,
    /// The network namespace it runs in ([`DevnetOptions::netns`]).
    pub netns: Option<resolvd_netns::NsHost>,
    child: Option<Child>,
    http: reqwest::Client,
}

impl DevNode {
    /// `dir/node.toml`.
    pub fn config_path(&self) -> PathBuf {
        self.dir.join("node.toml")
    }

    /// `dir/node.log` (stdout and stderr, appended across restarts).
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("node.log")
    }

    /// Writes the config and starts `resolvd run`.
    pub fn start(&mut self, bin: &Path) -> eyre::Result<()> {
        ensure!(self.child.is_none(), "node {} already running", self.index);
        std::fs::write(self.config_path(), toml::to_string(&self.config)?)?;
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log_path())?;
        let mut cmd = match &self.netns {
            Some(ns) => ns.command(bin),
            None => Command::new(bin),
        };
        let child = cmd
            .args(["run", "--config"])
            .arg(self.config_path())
            .env("RUST_LOG", std::env::var("RESOLVD_DEVNET_LOG").unwrap_or_else(|_| "info".into()))
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()
            .wrap_err_with(|| format!("starting {}", bin.display()))?;
        self.child = Some(child);
        Ok(())
    }

    /// `kill -9`.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then wait (SIGKILL after 10 s).
    pub fn stop(&mut self) {
        let Some(mut c) = self.child.take() else { return };
        let _ = Command::new("kill").args(["-TERM", &c.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = c.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = c.kill();
        let _ = c.wait();
    }

    /// The last `lines` lines of the node's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(lines).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Resident set size in KiB (`VmRSS` of /proc), while running.
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?.trim().parse().ok())
    }

    /// Whether the process is running (reaps it if it exited).
    pub fn running(&mut self) -> bool {
        match &mut self.child {
            Some(c) => match c.try_wait() {
                Ok(None) => true,
                _ => {
                    self.child = None;
                    false
                }
            },
            None => false,
        }
    }

    /// Exit status if the process has exited (reaped once).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        let status = self.child.as_mut()?.try_wait().ok()??;
        self.child = None;
        Some(status)
    }

    /// `GET` a JSON API path.
    pub async fn get(&self, path: &str) -> eyre::Result<serde_json::Value> {
        let url = format!("http://{}{path}", self.api);
        let res = self.http.get(&url).send().await.wrap_err_with(|| format!("GET {url}"))?;
        ensure!(res.status().is_success(), "GET {url}: {}", res.status());
        Ok(res.json().await?)
    }

    /// `GET /metrics` text.
    pub async fn metrics(&self) -> eyre::Result<String> {
        Ok(self.http.get(format!("http://{}/metrics", self.api)).send().await?.text().await?)
    }

    /// `PUT /content/{hash}?type=tag`; returns the HTTP status.
    pub async fn put_content(&self, tag: &str, hash: B256, bytes: Vec<u8>) -> eyre::Result<u16> {
        let url = format!("http://{}/content/{hash}?type={tag}", self.api);
        let mut req = self.http.put(&url).body(bytes);
        if let Some(token) = &self.config.api.content_token_file {
            req = req.bearer_auth(std::fs::read_to_string(token)?.trim());
        }
        let res = req.send().await?;
        Ok(res.status().as_u16())
    }

    /// The current epoch in `/status`, once the node has read it from the
    /// chain (0 until then: a node can be healthy and meshed before).
    pub async fn epoch(&self, timeout: Duration) -> eyre::Result<u64> {
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.get("/status").await?;
            match status["epoch"].as_u64() {
                Some(epoch) if epoch > 0 => return Ok(epoch),
                _ => ensure!(
                    Instant::now() < deadline,
                    "node {}: no epoch after {timeout:?}",
                    self.index
                ),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until `/health` answers.
    pub async fn wait_healthy(&mut self, timeout: Duration) -> eyre::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(r) = self.http.get(format!("http://{}/health", self.api)).send().await {
                if r.status().is_success() {
                    return Ok(());
                }
            }
            if let Some(status) = self.exited() {
                bail!(
                    "node {} exited ({status}) before it was healthy; {}:\n{}",
                    self.index,
                    self.log_path().display(),
                    self.log_tail(40)
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "node {} not healthy after {timeout:?}; {}:\n{}",
                    self.index,
                    self.log_path().display(),
                    self.log_tail(40)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for DevNode {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Options of [`Devnet::launch`].
#[derive(Clone, Debug)]
pub struct DevnetOptions {
    /// Resolvers.
    pub nodes: usize,
    /// Parent directory; the run gets a fresh subdirectory.
    pub base_dir: PathBuf,
    /// The `resolvd` binary.
    pub bin: PathBuf,
    /// anvil binary.
    pub anvil: PathBuf,
    /// The `contracts/` directory (with `out/`).
    pub contracts: PathBuf,
    /// Seconds per block.
    pub block_time: u64,
    /// anvil's `--slots-in-an-epoch` (its `finalized` tag trails the head by
    /// about twice this many blocks); 1 keeps finality about one block behind.
    pub finality_slots: u64,
    /// Node confirmations.
    pub confirmations: u64,
    /// Submitter slot.
    pub submit_slot_ms: u64,
    /// Per-node fault injection (index, faults).
    pub faults: Vec<(usize, FaultConfig)>,
    /// Nodes that get a transaction account (all if `None`).
    pub with_accounts: Option<Vec<usize>>,
    /// Fixed ports: anvil on `base`, node i's p2p on `base + 1 + 2i` and API
    /// on `base + 2 + 2i` (free ports if `None`).
    pub base_port: Option<u16>,
    /// Route every p2p link through a [`LinkProxy`] so tests can partition.
    pub link_proxies: bool,
    /// Use this dev chain instead of starting anvil: one with unlocked dev
    /// accounts and `anvil_setBalance` or `hardhat_setBalance` (anvil, Hardhat).
    pub rpc_url: Option<String>,
    /// `Terms.resolverFee` of the deals opened.
    pub resolver_fee: u128,
    /// `Terms.challengeBond` of the deals opened.
    pub challenge_bond: u128,
    /// The registry's `gasRefundCap` for the deal token.
    pub gas_refund_cap: u128,
    /// The registry's `commitRevealMs` (0: off).
    pub commit_reveal_ms: u32,
    /// Container layout (docker compose): node i is reachable as `hosts[i]`,
    /// listens on 0.0.0.0 (p2p 9400, API 9500), keeps data in `/data` and
    /// finds its keystores under `/shared/latest/node<i>/`.
    pub hosts: Option<Vec<String>>,
    /// Network-namespace layout ([`resolvd_netns::Netns`]): anvil listens on
    /// its namespace's address (port 8545), node i runs in `nodes[i]`
    /// listening there (p2p 9400, API 9500); the caller keeps the `Netns`
    /// alive while the devnet runs.
    pub netns: Option<resolvd_netns::NetnsLayout>,
    /// `p2p.dissemination` of every node (default: the node's default, or
    /// `RESOLVD_DISSEMINATION`).
    pub dissemination: Option<resolvd_node::config::DisseminationMode>,
    /// Changes node `i`'s config last, before it is written (a test's
    /// per-node setting: one node's timers, say).
    pub node_config: Option<fn(usize, &mut NodeConfig)>,
}

impl DevnetOptions {
    /// Defaults for a checkout: `.tools/bin/anvil`, `contracts/`, 4 nodes.
    pub fn for_workspace(workspace: &Path, bin: PathBuf, base_dir: PathBuf) -> Self {
        let local = workspace.join(".tools/bin/anvil");
        Self {
            nodes: 4,
            base_dir,
            bin,
            anvil: std::env::var_os("ANVIL").map(PathBuf::from).unwrap_or(if local.exists() {
                local
            } else {
                "anvil".into()
            }),
            contracts: workspace.join("contracts"),
            block_time: 1,
            finality_slots: 1,
            confirmations: 1,
            submit_slot_ms: 2_000,
            faults: Vec::new(),
            with_accounts: None,
            base_port: None,
            link_proxies: false,
            rpc_url: None,
            resolver_fee: RESOLVER_FEE,
            challenge_bond: CHALLENGE_BOND,
            gas_refund_cap: GAS_REFUND_CAP,
            commit_reveal_ms: 0,
            hosts: None,
            netns: None,
            dissemination: std::env::var("RESOLVD_DISSEMINATION").ok().and_then(|m| m.parse().ok()),
            node_config: None,
        }
    }
}

/// The kind of deal to open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DealKind {
    /// The seller's plan moves what the predicate requires: Reproduced.
    Honest,
    /// The seller claims success but moves too little: Failed.
    FalseClaim,
}

/// The committed documents of a deal.
#[derive(Clone, Debug)]
pub struct DealContent {
    /// Spec.
    pub spec: SpecV1,
    /// Anchor document.
    pub anchor: PrestateAnchorV1,
    /// Anchor body.
    pub evm_anchor: EvmAnchorV1,
    /// Delivery.
    pub delivery: DeliveryV1,
    /// Witness.
    pub witness: EvmWitnessV1,
}

/// A challenged deal.
#[derive(Clone, Copy, Debug)]
pub struct OpenDeal {
    /// Deal id.
    pub deal_id: B256,
    /// When the challenge transaction was confirmed.
    pub challenged: Instant,
    /// Block of the challenge.
    pub block: u64,
}

/// Peers each node must have before [`Devnet::wait_mesh`] returns, in a
/// network larger than this + 1: more than the mesh degree's upper bound
/// (D_high = 6 at the default D = 4), so each mesh can fill.
pub const MESH_PEERS: usize = 16;

/// A running devnet.
#[derive(Debug)]
pub struct Devnet {
    /// The run's directory.
    pub dir: PathBuf,
    /// anvil, when the devnet started it.
    pub anvil: Option<Anvil>,
    /// The chain's JSON-RPC URL.
    pub rpc_url: String,
    /// Provider (anvil's unlocked accounts send).
    pub provider: DynProvider,
    /// anvil's accounts: 0 deployer, 1 buyer, 2 seller, 3 payer (of the plans).
    pub accounts: Vec<Address>,
    /// Contracts.
    pub deployment: Deployment,
    /// Resolvers.
    pub nodes: Vec<DevNode>,
    /// Options.
    pub options: DevnetOptions,
    /// Directed link proxies `(from, to)` when `options.link_proxies`.
    pub links: Vec<((usize, usize), LinkProxy)>,
    /// The loopback proxy in front of a namespaced anvil (`options.netns`),
    /// held for as long as the devnet runs.
    _rpc_proxy: Option<LinkProxy>,
    salt: u64,
}

/// `_balances[holder]` of an OpenZeppelin ERC-20: `keccak256(abi.encode(holder, 0))`.
pub fn balance_slot(holder: Address) -> B256 {
    use alloy_sol_types::SolValue;
    keccak256((holder, U256::ZERO).abi_encode_params())
}

impl Devnet {
    /// Starts anvil, deploys, registers `nodes` resolvers and starts them.
    pub async fn launch(options: DevnetOptions) -> eyre::Result<Self> {
        let started = Instant::now();
        let mut net = Self::provision(options).await?;
        for i in 0..net.nodes.len() {
            net.start_node(i)?;
        }
        for node in &mut net.nodes {
            node.wait_healthy(Duration::from_secs(60)).await?;
        }
        net.wait_mesh(Duration::from_secs(120)).await?;
        tracing::info!(target: "devnet", elapsed = ?started.elapsed(), dir = %net.dir.display(), "devnet up");
        Ok(net)
    }

    /// Starts anvil (unless `options.rpc_url`), deploys, creates and
    /// registers the resolvers and writes each one's directory (`node.toml`,
    /// keystores, password); starts no node.
    pub async fn provision(options: DevnetOptions) -> eyre::Result<Self> {
        let started = Instant::now();
        std::fs::create_dir_all(&options.base_dir)?;
        let dir = tempfile::Builder::new().prefix("devnet-").tempdir_in(&options.base_dir)?.keep();
        let artifacts = Artifacts::load(&options.contracts)?;
        let port = |k: u16| -> eyre::Result<u16> {
            match options.base_port {
                Some(base) => {
                    check_port(base.checked_add(k).ok_or_else(|| eyre!("port overflow"))?)
                }
                None => free_port(),
            }
        };
        let (anvil, rpc_url) = match &options.rpc_url {
            Some(url) => (None, url.clone()),
            None => {
                let log = dir.join("anvil.log");
                let (bin, blocks, slots) =
                    (&options.anvil, options.block_time, options.finality_slots);
                let a = match &options.netns {
                    Some(l) => {
                        let host = l.anvil.ip.to_string();
                        Anvil::spawn(l.anvil.command(bin), bin, &host, 8545, blocks, slots, &log)?
                    }
                    None => Anvil::start(bin, port(0)?, blocks, slots, &log)?,
                };
                let url = a.url.clone();
                (Some(a), url)
            }
        };
        // A namespaced anvil is reached from here through a loopback proxy:
        // alloy polls receipts every 250 ms for a loopback URL, 7 s otherwise.
        let (node_rpc_url, rpc_url, rpc_proxy) = match (&options.netns, &anvil) {
            (Some(l), Some(_)) => {
                let proxy = LinkProxy::start(SocketAddr::from((l.anvil.ip, 8545))).await?;
                (rpc_url, format!("http://{}", proxy.addr), Some(proxy))
            }
            _ => (rpc_url.clone(), rpc_url, None),
        };
        let provider = http_provider(&rpc_url)?;
        wait_for_chain(&provider, &rpc_url).await?;
        let accounts = provider.get_accounts().await?;
        ensure!(accounts.len() >= 4, "anvil has too few accounts");
        let deployment = deploy(&provider, &artifacts, accounts[0]).await?;
        tracing::info!(target: "devnet", ?deployment, elapsed = ?started.elapsed(), "contracts deployed");
        // The deployer owns the registry: the network's economic settings.
        let registry = deployment.registry;
        if options.gas_refund_cap > 0 {
            let cap = U256::from(options.gas_refund_cap);
            let call = IRegistry::setGasRefundCapCall { token: deployment.token, cap };
            call_from(&provider, accounts[0], registry, call).await?;
        }
        if options.commit_reveal_ms > 0 {
            let call = IRegistry::setCommitRevealMsCall { commitPhaseMs: options.commit_reveal_ms };
            call_from(&provider, accounts[0], registry, call).await?;
        }

        // Buyer, seller and payer hold tokens; buyer and seller have
        // approved the escrow and the attestor once.
        let big = U256::from(10u64).pow(U256::from(30u64));
        for who in &accounts[1..3] {
            call_from(
                &provider,
                accounts[0],
                deployment.token,
                IERC20::mintCall { to: *who, amount: big },
            )
            .await?;
            for spender in [deployment.escrow, deployment.attestor] {
                call_from(
                    &provider,
                    *who,
                    deployment.token,
                    IERC20::approveCall { spender, amount: big },
                )
                .await?;
            }
        }
        call_from(
            &provider,
            accounts[0],
            deployment.token,
            IERC20::mintCall { to: accounts[3], amount: U256::from(1_000u64) },
        )
        .await?;

        let ports: Vec<(u16, u16)> = (0..options.nodes as u16)
            .map(|i| Ok((port(1 + 2 * i)?, port(2 + 2 * i)?)))
            .collect::<eyre::Result<_>>()?;
        let addrs: Vec<String> =
            ports.iter().map(|(p2p, _)| format!("/ip4/127.0.0.1/tcp/{p2p}")).collect();
        let mut links = Vec::new();
        if options.link_proxies {
            for i in 0..options.nodes {
                for (j, &(p2p, _)) in ports.iter().enumerate() {
                    if i != j {
                        let proxy =
                            LinkProxy::start(SocketAddr::from(([127, 0, 0, 1], p2p))).await?;
                        links.push(((i, j), proxy));
                    }
                }
            }
        }
        let mut nodes = Vec::with_capacity(options.nodes);
        for (i, &(_, api_port)) in ports.iter().enumerate() {
            let node_dir = dir.join(format!("node{i}"));
            std::fs::create_dir_all(&node_dir)?;
            let password_file = node_dir.join("password");
            keys::write_private(&password_file, PASSWORD.as_bytes())?;
            let secret = keys::generate()?;
            let bls_keystore = node_dir.join("bls-keystore.json");
            keys::save(
                &secret,
                &bls_keystore,
                &keys::PasswordArgs { password_file: Some(password_file.clone()) },
                Kdf::Pbkdf2,
            )?;
            let mut rng = rand::rngs::OsRng;
            let account = PrivateKeySigner::random_with(&mut rng);
            PrivateKeySigner::encrypt_keystore(
                &node_dir,
                &mut rng,
                account.to_bytes(),
                PASSWORD,
                Some("account.json"),
            )
            .map_err(|e| eyre!("account keystore: {e}"))?;
            // eth-keystore creates the file with the umask's mode (0644): make it private.
            std::fs::set_permissions(
                node_dir.join("account.json"),
                std::os::unix::fs::PermissionsExt::from_mode(0o600),
            )?;
            let operator = account.address();
            set_balance(&provider, operator, U256::from(10u64).pow(U256::from(20u64))).await?;
            call_from(
                &provider,
                accounts[0],
                deployment.token,
                IERC20::mintCall { to: operator, amount: U256::from(BOND) },
            )
            .await?;
            let chain = Chain::connect(&rpc_url, deployment.escrow, Some(account)).await?;
            let (_, index) = chain.register(&secret, U256::from(BOND)).await?;
            ensure!(index == i as u64, "resolver {i} got registry index {index}");

            let mut config = NodeConfig { data_dir: node_dir.join("data"), ..Default::default() };
            config.chain.rpc_url = node_rpc_url.clone();
            config.chain.escrow = deployment.escrow;
            config.chain.escrows = vec![deployment.attestor];
            config.chain.confirmations =
                resolvd_node::config::Confirmations::Blocks(options.confirmations);
            config.chain.poll_interval_ms = 200;
            config.chain.start_block = deployment.block;
            let with_account = options.with_accounts.as_ref().is_none_or(|list| list.contains(&i));
            if with_account {
                config.chain.account_keystore = Some(node_dir.join("account.json"));
                config.chain.account_password_file = Some(password_file.clone());
            }
            config.keys.bls_keystore = Some(bls_keystore);
            config.keys.password_file = Some(password_file);
            // One process per key by construction; tests restart nodes often.
            config.keys.doppelganger_wait_secs = 0;
            config.p2p.listen = addrs[i].clone();
            config.p2p.bootstrap = if options.link_proxies {
                links
                    .iter()
                    .filter(|((from, _), _)| *from == i)
                    .map(|(_, p)| format!("/ip4/127.0.0.1/tcp/{}", p.addr.port()))
                    .collect()
            } else {
                addrs.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, a)| a.clone()).collect()
            };
            config.p2p.heartbeat_ms = 200;
            if let Some(mode) = options.dissemination {
                config.p2p.dissemination = mode;
            }
            if options.link_proxies {
                // Members reach each other only through the links (a direct
                // dial to a listen address would cross a partition).
                config.p2p.advertise = Some(Vec::new());
            }
            config.api.listen = SocketAddr::from(([127, 0, 0, 1], api_port));
            config.pipeline.retry_ms = 500;
            config.pipeline.submit_slot_ms = options.submit_slot_ms;
            config.pipeline.ledger_refresh_secs = 2;
            if let Some((_, f)) = options.faults.iter().find(|(j, _)| *j == i) {
                config.fault = f.clone();
            }
            nodes.push(DevNode {
                index: i,
                dir: node_dir,
                api: config.api.listen,
                p2p: addrs[i].clone(),
                config,
                operator,
                netns: None,
                child: None,
                http: http_client()?,
            });
        }
        // Every resolver joins the committee in one epoch, after the warm-up.
        let all: Vec<u64> = (0..nodes.len() as u64).collect();
        let epoch = activate(&provider, accounts[0], deployment.registry, &all).await?;
        tracing::info!(target: "devnet", epoch, "resolvers activated");
        if let Some(hosts) = &options.hosts {
            ensure!(hosts.len() == nodes.len(), "one host name per node");
            for (i, node) in nodes.iter_mut().enumerate() {
                let c = &mut node.config;
                let shared = PathBuf::from(format!("/shared/latest/node{i}"));
                c.data_dir = "/data".into();
                c.p2p.listen = "/ip4/0.0.0.0/tcp/9400".into();
                c.p2p.bootstrap = hosts
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .map(|(_, h)| format!("/dns4/{h}/tcp/9400"))
                    .collect();
                c.api.listen = SocketAddr::from(([0, 0, 0, 0], 9500));
                c.keys.bls_keystore = Some(shared.join("bls-keystore.json"));
                c.keys.password_file = Some(shared.join("password"));
                c.keys.doppelganger_wait_secs = 0;
                if c.chain.account_keystore.is_some() {
                    c.chain.account_keystore = Some(shared.join("account.json"));
                    c.chain.account_password_file = Some(shared.join("password"));
                }
            }
        }
        if let Some(layout) = &options.netns {
            ensure!(layout.nodes.len() == nodes.len(), "one namespace per node");
            ensure!(!options.link_proxies, "link proxies and namespaces do not mix");
            let addr = |i: usize| format!("/ip4/{}/tcp/9400", layout.nodes[i].ip);
            let defaults = NodeConfig::default();
            for (i, node) in nodes.iter_mut().enumerate() {
                let c = &mut node.config;
                // Namespaced nodes are the scale harness's "hosts": they run
                // the timers an operator gets (chain polling, gossip
                // heartbeat, retries, fee ledger), not the loopback devnet's
                // faster ones, whose wake-ups would be most of the idle CPU
                // the figures report.
                c.chain.poll_interval_ms = defaults.chain.poll_interval_ms;
                c.p2p.heartbeat_ms = defaults.p2p.heartbeat_ms;
                c.pipeline.retry_ms = defaults.pipeline.retry_ms;
                c.pipeline.ledger_refresh_secs = defaults.pipeline.ledger_refresh_secs;
                c.p2p.listen = addr(i);
                c.p2p.bootstrap = (0..layout.nodes.len()).filter(|&j| j != i).map(addr).collect();
                c.api.listen = SocketAddr::from((layout.nodes[i].ip, 9500));
                // A non-loopback API takes `PUT /content` only with a token.
                let token = node.dir.join("content-token");
                let secret = alloy_primitives::hex::encode(rand::random::<[u8; 16]>());
                keys::write_private(&token, secret.as_bytes())?;
                c.api.content_token_file = Some(token);
                node.api = c.api.listen;
                node.p2p = addr(i);
                node.netns = Some(layout.nodes[i].clone());
            }
        }
        for node in &mut nodes {
            if let Some(tweak) = options.node_config {
                tweak(node.index, &mut node.config);
            }
            std::fs::write(node.config_path(), toml::to_string(&node.config)?)?;
        }
        tracing::info!(target: "devnet", nodes = nodes.len(), elapsed = ?started.elapsed(), "resolvers registered");
        Ok(Self {
            dir,
            anvil,
            rpc_url,
            provider,
            accounts,
            deployment,
            nodes,
            options,
            links,
            _rpc_proxy: rpc_proxy,
            salt: 0,
        })
    }

    /// Cuts or restores every link between `a` and `b` (both directions).
    pub fn set_link(&self, a: usize, b: usize, up: bool) {
        for ((from, to), proxy) in &self.links {
            if (*from, *to) == (a, b) || (*from, *to) == (b, a) {
                proxy.set_up(up);
            }
        }
    }

    /// Starts node `i` (after a kill or stop).
    pub fn start_node(&mut self, i: usize) -> eyre::Result<()> {
        let bin = self.options.bin.clone();
        self.nodes[i].start(&bin)
    }

    /// Waits until every running node is connected to every other running
    /// node, or, in a network of more than [`MESH_PEERS`] + 1, to at least
    /// that many (the nodes keep dialling the rest; gossip reaches a node
    /// through any of its peers).
    pub async fn wait_mesh(&mut self, timeout: Duration) -> eyre::Result<()> {
        let deadline = Instant::now() + timeout;
        let running: Vec<usize> =
            (0..self.nodes.len()).filter(|&i| self.nodes[i].running()).collect();
        let need = (running.len().saturating_sub(1)).min(MESH_PEERS);
        'outer: loop {
            ensure!(Instant::now() < deadline, "p2p mesh not formed within {timeout:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
            for &i in &running {
                let Ok(status) = self.nodes[i].get("/status").await else { continue 'outer };
                let peers = status["peers"].as_array().map_or(0, Vec::len);
                if peers < need {
                    continue 'outer;
                }
            }
            return Ok(());
        }
    }

    /// Builds the documents of a deal of `kind` against the chain's latest block.
    pub async fn deal_content(&self, kind: DealKind) -> eyre::Result<DealContent> {
        let finalized = self
            .provider
            .get_block_by_number(alloy_rpc_types_eth::BlockNumberOrTag::Finalized)
            .await?
            .ok_or_else(|| eyre!("no finalized block"))?
            .header
            .number;
        self.deal_content_at(kind, finalized).await
    }

    /// Like [`Self::deal_content`], anchored on block `block` (final or not).
    pub async fn deal_content_at(&self, kind: DealKind, block: u64) -> eyre::Result<DealContent> {
        let payer = self.accounts[3];
        let token = self.deployment.token;
        let evm_anchor = rpc::freeze_anchor(&self.provider, block, EvmSpecId::Prague).await?;
        let amount = match kind {
            DealKind::Honest => REQUIRED,
            DealKind::FalseClaim => REQUIRED - 150,
        };
        let calldata = resolvd_node::contracts::IERC20::transferCall {
            to: RECIPIENT,
            amount: U256::from(amount),
        }
        .abi_encode();
        let plan = EvmCallPlanV1 {
            chain_id: evm_anchor.chain_id,
            caller: payer,
            target: token,
            calldata: calldata.into(),
            value: U256::ZERO,
            gas_limit: 200_000,
            nonce_policy: NoncePolicy::Prestate,
        };
        let slots = [(token, balance_slot(payer)), (token, balance_slot(RECIPIENT))];
        let witness = rpc::build_witness(&self.provider, &evm_anchor, &plan, &slots, 0).await?;
        let anchor = PrestateAnchorV1 {
            backend_id: *BACKEND_ID,
            body: evm_anchor.to_canonical_bytes().into(),
        };
        let predicate = PredicateCommitmentV1::PoststateDelta(resolvd_proto::Checks {
            checks: vec![resolvd_proto::SlotBounds {
                address: token,
                slot: balance_slot(RECIPIENT),
                min: U256::from(REQUIRED),
                max: U256::from(REQUIRED),
            }],
        });
        let spec = SpecV1 {
            backend_id: *BACKEND_ID,
            backend_version_policy: BackendVersionPolicy::Exact,
            accepted_backend_version_hash: *BACKEND_VERSION_HASH,
            prestate_anchor: anchor.clone(),
            execution_schema_hash: EvmCallPlanV1::schema_hash(),
            predicate,
            expiry: u64::MAX / 2,
        };
        let delivery = DeliveryV1 {
            execution_schema_hash: EvmCallPlanV1::schema_hash(),
            execution_plan: plan.to_canonical_bytes().into(),
            // ERC-20 transfer returns true.
            claimed_result: B256::with_last_byte(1).to_vec().into(),
            attachments: vec![AttachmentV1 {
                kind: AttachmentKind::ReplayWitness,
                hash: witness.content_hash(),
                retrieval_hint: None,
            }],
        };
        Ok(DealContent { spec, anchor, evm_anchor, delivery, witness })
    }

    /// Funds, delivers and challenges a deal with `content`; the witness is
    /// uploaded to the nodes in `witness_to` only (the others fetch it from peers).
    pub async fn open_dispute(
        &mut self,
        content: &DealContent,
        witness_to: &[usize],
    ) -> eyre::Result<OpenDeal> {
        let deal_id = self.deliver_deal(content, witness_to).await?;
        self.challenge(deal_id).await
    }

    /// Funds and delivers a deal with `content` (the witness uploaded to the
    /// nodes in `witness_to`); returns its id, ready to be challenged.
    pub async fn deliver_deal(
        &mut self,
        content: &DealContent,
        witness_to: &[usize],
    ) -> eyre::Result<B256> {
        let (buyer, seller) = (self.accounts[1], self.accounts[2]);
        self.salt += 1;
        let terms = Terms {
            seller,
            token: self.deployment.token,
            amount: U256::from(AMOUNT),
            specHash: content.spec.content_hash(),
            prestateAnchorHash: content.anchor.content_hash(),
            prestateRoot: content.evm_anchor.state_root,
            backendId: *BACKEND_ID,
            backendVersionHash: *BACKEND_VERSION_HASH,
            sellerBond: U256::from(SELLER_BOND),
            resolverFee: U256::from(self.options.resolver_fee),
            challengeBond: U256::from(self.options.challenge_bond),
            deliverWindow: 3_600,
            challengeWindow: 3_600,
            resolveWindow: 1_800,
            salt: B256::from(U256::from(self.salt) | (U256::from(std::process::id()) << 128)),
        };
        let escrow = self.deployment.escrow;
        let deal_id =
            self.view(escrow, IEscrow::dealIdOfCall { buyer, terms: terms.clone() }).await?;
        let fund = IEscrow::fundCall {
            terms,
            spec: content.spec.to_canonical_bytes().into(),
            prestateAnchor: content.anchor.to_canonical_bytes().into(),
        };
        let funded = call_from(&self.provider, buyer, escrow, fund).await?;
        // deliver and challenge need a later block timestamp than the step before.
        self.wait_past(funded.block_number.unwrap_or_default()).await?;
        let witness = content.witness.to_canonical_bytes();
        for &i in witness_to {
            let status = self.nodes[i]
                .put_content("evm-witness", content.witness.content_hash(), witness.clone())
                .await?;
            ensure!(status == 201, "node {i} refused the witness: HTTP {status}");
        }
        let deliver = IEscrow::deliverCall {
            dealId: deal_id,
            deliveryHash: content.delivery.content_hash(),
            delivery: content.delivery.to_canonical_bytes().into(),
        };
        let delivered = call_from(&self.provider, seller, escrow, deliver).await?;
        self.wait_past(delivered.block_number.unwrap_or_default()).await?;
        Ok(deal_id)
    }

    /// A fresh provider (its nonce cache forgotten): needed after an
    /// `evm_revert`, which takes the accounts' nonces back.
    pub fn reconnect(&mut self) -> eyre::Result<()> {
        self.provider = http_provider(&self.rpc_url)?;
        Ok(())
    }

    /// The buyer challenges a delivered deal.
    pub async fn challenge(&self, deal_id: B256) -> eyre::Result<OpenDeal> {
        let (buyer, escrow) = (self.accounts[1], self.deployment.escrow);
        let receipt =
            call_from(&self.provider, buyer, escrow, IEscrow::challengeCall { dealId: deal_id })
                .await?;
        Ok(OpenDeal {
            deal_id,
            challenged: Instant::now(),
            block: receipt.block_number.unwrap_or_default(),
        })
    }

    /// Resolver `i`'s fee rewards pending on the escrow (every epoch up to
    /// the current one, deal token) and its operator's escrow credits (the
    /// gas refunds of the `resolve`s it sent, and nothing else in a devnet).
    pub async fn fees_of(&self, i: usize) -> eyre::Result<(U256, U256)> {
        let (escrow, token) = (self.deployment.escrow, self.deployment.token);
        let current: U256 =
            self.view(self.deployment.registry, IRegistry::currentEpochCall {}).await?;
        let mut pending = U256::ZERO;
        for epoch in 1..=current.to::<u64>() {
            let call = IEscrow::pendingRewardsCall {
                token,
                resolver: U256::from(i),
                epoch: U256::from(epoch),
            };
            pending += self.view(escrow, call).await?;
        }
        let account = self.nodes[i].operator;
        let credits = self.view(escrow, IEscrow::claimableCall { account, token }).await?;
        Ok((pending, credits))
    }

    /// Splits the resolver fee of `deal` if its certificate left members out
    /// and the fee is held for the inclusion window: moves anvil's clock past
    /// the window, then waits up to `wait` for the node that submitted the
    /// certificate to send `distributeFee` (and sends it from the deployer if
    /// none did). Returns whether a fee was held and whether a node split it.
    pub async fn distribute_held(&self, deal: B256, wait: Duration) -> eyre::Result<(bool, bool)> {
        let escrow = self.deployment.escrow;
        let held = self.view(escrow, IEscrow::heldCall { dealId: deal }).await?;
        if held.closesAt == 0 {
            return Ok((false, false));
        }
        let window: U256 = self.view(escrow, IEscrow::INCLUSION_WINDOWCall {}).await?;
        let _: serde_json::Value = self
            .provider
            .raw_request("evm_increaseTime".into(), (window.saturating_to::<u64>() + 1,))
            .await?;
        let _: serde_json::Value = self.provider.raw_request("evm_mine".into(), ()).await?;
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            if self.view(escrow, IEscrow::heldCall { dealId: deal }).await?.closesAt == 0 {
                return Ok((true, true));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let call = IEscrow::distributeFeeCall { dealId: deal };
        send_from(&self.provider, self.accounts[0], TxKind::Call(escrow), call.abi_encode().into())
            .await?;
        Ok((true, false))
    }

    /// Waits until the chain is past block `n`.
    pub async fn wait_past(&self, n: u64) -> eyre::Result<()> {
        use alloy_rpc_types_eth::BlockNumberOrTag;
        let deadline = Instant::now() + Duration::from_secs(30);
        let stamp = |b: Option<alloy_rpc_types_eth::Block>| b.map(|b| b.header.timestamp);
        let base = stamp(self.provider.get_block_by_number(BlockNumberOrTag::Number(n)).await?)
            .ok_or_else(|| eyre!("block {n} not found"))?;
        // A later block with a later timestamp (the escrow compares times).
        loop {
            let latest = stamp(self.provider.get_block_by_number(BlockNumberOrTag::Latest).await?);
            if latest.is_some_and(|t| t > base) {
                return Ok(());
            }
            ensure!(Instant::now() < deadline, "chain stuck at block {n}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A view call at the chain's latest (anvil: pending) state.
    pub async fn view<C: SolCall>(&self, to: Address, call: C) -> eyre::Result<C::Return> {
        let tx = TransactionRequest::default().with_to(to).with_input(call.abi_encode());
        // At `latest`, as the node reads: anvil answers an `eth_call` without
        // a block on the pending state, where a transaction not yet mined
        // already shows (a test then races the node's own reads).
        let out = self.provider.call(tx).block(alloy_rpc_types_eth::BlockId::latest()).await?;
        Ok(C::abi_decode_returns(&out)?)
    }

    /// The registry indices named by `bitmap`, a `resolve` call's
    /// non-signer position bitmap for `deal_id` (bit `p & 7` of byte
    /// `p >> 3` is the member at position `p` of the deal's epoch).
    pub async fn non_signers_of(&self, deal_id: B256, bitmap: &[u8]) -> eyre::Result<Vec<u32>> {
        let epoch = U256::from(self.deal(deal_id).await?.epoch);
        let members =
            self.view(self.deployment.registry, IRegistry::epochMembersCall { epoch }).await?;
        let mut indices = Vec::new();
        for (p, index) in members.iter().enumerate() {
            if bitmap.get(p >> 3).is_some_and(|b| b & (1 << (p & 7)) != 0) {
                indices.push(index.to::<u32>());
            }
        }
        Ok(indices)
    }

    /// The escrow's record of a deal.
    pub async fn deal(&self, deal_id: B256) -> eyre::Result<Deal> {
        Ok(self.view(self.deployment.escrow, IEscrow::dealCall { dealId: deal_id }).await?.into())
    }

    /// Waits until the deal is resolved in a mined block (anvil answers
    /// calls from its pending block, so the `Settled` log is what counts).
    pub async fn wait_settled(&self, deal_id: B256, timeout: Duration) -> eyre::Result<Deal> {
        use alloy_sol_types::SolEvent;
        let deadline = Instant::now() + timeout;
        let settled = alloy_rpc_types_eth::Filter::new()
            .address(self.deployment.escrow)
            .event_signature(resolvd_node::contracts::IEscrow::Settled::SIGNATURE_HASH)
            .topic1(deal_id)
            .from_block(0u64);
        loop {
            let deal = self.deal(deal_id).await?;
            if deal.state == deal_state::RESOLVED
                && !self.provider.get_logs(&settled).await?.is_empty()
            {
                return Ok(deal);
            }
            ensure!(Instant::now() < deadline, "deal {deal_id} not settled within {timeout:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Token balance.
    /// Tokens `who` holds plus what the escrow owes it (settlements are pull
    /// payments: credited, then claimed).
    pub async fn balance(&self, who: Address) -> eyre::Result<U256> {
        let held = self.view(self.deployment.token, IERC20::balanceOfCall { who }).await?;
        let token = self.deployment.token;
        let owed = self
            .view(self.deployment.escrow, IEscrow::claimableCall { account: who, token })
            .await?;
        Ok(held + owed)
    }

    /// Registers a new resolver with `secret` from a fresh funded account,
    /// waits out the warm-up on anvil (time travel) and activates it.
    /// Returns its registry index and the epoch it joined.
    pub async fn register_and_activate(
        &self,
        secret: &resolvd_consensus::SecretKey,
    ) -> eyre::Result<(u64, u64)> {
        let account = PrivateKeySigner::random_with(&mut rand::rngs::OsRng);
        set_balance(&self.provider, account.address(), U256::from(10u64).pow(U256::from(20u64)))
            .await?;
        call_from(
            &self.provider,
            self.accounts[0],
            self.deployment.token,
            IERC20::mintCall { to: account.address(), amount: U256::from(BOND) },
        )
        .await?;
        let chain = Chain::connect(&self.rpc_url, self.deployment.escrow, Some(account)).await?;
        let (_, index) = chain.register(secret, U256::from(BOND)).await?;
        let epoch =
            activate(&self.provider, self.accounts[0], self.deployment.registry, &[index]).await?;
        Ok((index, epoch))
    }

    /// Receipts of every `resolve` transaction that succeeded for `deal_id`
    /// (scans the `VerdictCommitted` logs).
    pub async fn verdict_logs(&self, deal_id: B256) -> eyre::Result<Vec<alloy_rpc_types_eth::Log>> {
        use alloy_sol_types::SolEvent;
        let filter = alloy_rpc_types_eth::Filter::new()
            .address(self.deployment.escrow)
            .event_signature(resolvd_node::contracts::IEscrow::VerdictCommitted::SIGNATURE_HASH)
            .topic1(deal_id)
            .from_block(0u64);
        Ok(self.provider.get_logs(&filter).await?)
    }

    /// Reads a node's persisted slashing-protection and partial records
    /// while it is stopped.
    pub fn node_store(&self, i: usize) -> eyre::Result<resolvd_node::store::Store> {
        Ok(resolvd_node::store::Store::open(&self.nodes[i].config.data_dir.join("db"))?)
    }

    /// Stops every node (SIGTERM) and anvil.
    pub fn shutdown(&mut self) {
        for n in &mut self.nodes {
            n.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct_bindable_and_below_the_ephemeral_range() {
        let ephemeral_low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .map(|s| s.split_whitespace().next().unwrap().parse().unwrap())
            .unwrap_or(32768);
        let ports: Vec<u16> = (0..64).map(|_| free_port().unwrap()).collect();
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), ports.len(), "a port was handed out twice: {ports:?}");
        for port in ports {
            assert!(port < ephemeral_low, "{port} is in the ephemeral range");
            TcpListener::bind(("127.0.0.1", port)).unwrap();
        }
    }
}
