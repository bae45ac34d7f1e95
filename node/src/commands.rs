//! The one-shot commands and `run`.

use crate::SignerArgs;
use crate::{
    print_json, AccountArgs, AccountChainArgs, AnchorArgs, AttestCommand, AttestRequestArgs,
    AttestStatusArgs, AttestVerifyArgs, ChainArgs, ContentCommand, DataDirArgs, ProtectionCommand,
    RegisterArgs, ResolverArgs, RewardsArgs, SlashArgs, VerifyArgs, WitnessArgs,
};
use alloy_primitives::{hex, Address, Bytes, B256, U256};
use alloy_provider::{Provider, ProviderBuilder};
use alloy_rpc_types_eth::{BlockNumberOrTag, Filter};
use alloy_sol_types::SolEvent;
use eyre::{bail, ensure, eyre, WrapErr};
use resolvd_consensus::{Attestation, ConflictEvidence};
use resolvd_node::{
    anchor::AnchorChecker,
    api, attestation,
    chain::Chain,
    config::{LogFormat, NodeConfig},
    contracts::IProofVerifier,
    contracts::{deal_state, IAttestor, IEscrow, IRegistry},
    dispute::{AnchorRef, AnchorStatus},
    keys,
    node::Node,
};
use resolvd_proto::{
    content_hash, decode_committed,
    wire::{self, WireMessage},
    Canonical, ContentType, DeliveryV1, EvmAnchorV1, EvmCallPlanV1, EvmSpecId, PrestateAnchorV1,
    ReexecRequestV1, VerdictCommitment,
};
use resolvd_replay::{rpc, EvmBackend, BACKEND_ID};
use std::collections::BTreeMap;
use tracing_subscriber::EnvFilter;

/// EVM rule sets a new anchor can name.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum EvmRules {
    Shanghai,
    Cancun,
    Prague,
    Osaka,
}

impl From<EvmRules> for EvmSpecId {
    fn from(r: EvmRules) -> Self {
        match r {
            EvmRules::Shanghai => Self::Shanghai,
            EvmRules::Cancun => Self::Cancun,
            EvmRules::Prague => Self::Prague,
            EvmRules::Osaka => Self::Osaka,
        }
    }
}

/// Logs to stderr, filtered by `RUST_LOG` (else `default`).
pub(crate) fn init_logging(format: LogFormat, default: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = ctrl_c.await;
        }
    }
}

/// `resolvd run`.
pub(crate) async fn run(config: NodeConfig) -> eyre::Result<()> {
    let api_config = config.api.clone();
    // Fail before any work when the token file is unreadable.
    api::Writes::new(&api_config)?;
    let (node, shared) = Node::start(config).await?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut api_stop = stop_rx.clone();
    let api = tokio::spawn(api::serve(shared, api_config, async move {
        let _ = api_stop.wait_for(|s| *s).await;
    }));
    let mut node_stop = stop_rx;
    let node = tokio::spawn(node.run(async move {
        let _ = node_stop.wait_for(|s| *s).await;
    }));
    tokio::pin!(node);
    tokio::pin!(api);
    tokio::select! {
        () = shutdown_signal() => {
            let _ = stop_tx.send(true);
            node.await??;
        }
        r = &mut node => {
            let _ = stop_tx.send(true);
            r??;
            bail!("node stopped");
        }
        r = &mut api => {
            let _ = stop_tx.send(true);
            r??;
            bail!("API stopped");
        }
    }
    Ok(())
}

async fn connect(args: &ChainArgs, account: Option<&AccountArgs>) -> eyre::Result<Chain> {
    let signer = match account {
        Some(a) => Some(keys::load_account(&a.account_keystore, &a.account_password_file)?),
        None => None,
    };
    let rpc = resolvd_node::chain::RpcOptions {
        urls: vec![args.rpc_url.clone()],
        ca_file: args.ca_file.clone(),
    };
    Ok(Chain::connect_with(&rpc, args.escrow, signer).await?)
}

/// `resolvd register`.
pub(crate) async fn register(args: RegisterArgs) -> eyre::Result<()> {
    let secret = keys::load(&args.keystore, &args.password)?;
    let chain = connect(&args.chain, Some(&args.account)).await?;
    let bond = match args.bond {
        Some(b) => b,
        None => chain.view(chain.registry, IRegistry::minimumBondCall {}, None).await?,
    };
    let (tx, index) = chain.register(&secret, bond).await?;
    print_json(&serde_json::json!({
        "resolver": index,
        "operator": chain.account,
        "publicKey": hex::encode_prefixed(secret.public_key().compress()),
        "bond": bond.to_string(),
        "tx": tx.tx_hash,
        "gasUsed": tx.gas_used,
    }))
}

/// `resolvd content put|get`.
pub(crate) async fn content(cmd: ContentCommand) -> eyre::Result<()> {
    match cmd {
        ContentCommand::Put { api, type_tag, file, token_file } => {
            let bytes =
                std::fs::read(&file).wrap_err_with(|| format!("reading {}", file.display()))?;
            let tag = resolvd_proto::hash::TYPE_TAGS
                .iter()
                .map(|(t, _)| *t)
                .find(|t| *t == type_tag)
                .ok_or_else(|| eyre!("unknown type tag {type_tag:?}"))?;
            let hash = content_hash(tag, &bytes);
            let url = format!("{}/content/{hash}?type={tag}", api.trim_end_matches('/'));
            let mut req = reqwest::Client::new().put(&url).body(bytes);
            if let Some(path) = token_file {
                let token = std::fs::read_to_string(&path)
                    .wrap_err_with(|| format!("reading {}", path.display()))?;
                req = req.bearer_auth(token.trim());
            }
            let res = req.send().await?;
            let status = res.status();
            let body = res.text().await.unwrap_or_default();
            ensure!(status.is_success(), "PUT {url}: {status}: {body}");
            print_json(&serde_json::json!({ "hash": hash, "typeTag": tag }))
        }
        ContentCommand::Get { api, hash, out } => {
            let url = format!("{}/content/{hash}", api.trim_end_matches('/'));
            let res = reqwest::get(&url).await?;
            ensure!(res.status().is_success(), "GET {url}: {}", res.status());
            let tag = res
                .headers()
                .get("x-resolvd-type-tag")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
                .ok_or_else(|| eyre!("the node sent no type tag"))?;
            let bytes = res.bytes().await?;
            // Trust nothing: re-hash before writing.
            ensure!(
                content_hash(&tag, &bytes) == hash,
                "the node served bytes that do not hash to {hash}"
            );
            match out {
                Some(path) => std::fs::write(&path, &bytes)?,
                None => {
                    use std::io::Write;
                    std::io::stdout().write_all(&bytes)?;
                }
            }
            Ok(())
        }
    }
}

/// `resolvd anchor`.
pub(crate) async fn anchor(args: AnchorArgs) -> eyre::Result<()> {
    let provider = ProviderBuilder::new().connect_http(args.rpc_url.parse()?);
    let finalized = provider
        .get_block_by_number(BlockNumberOrTag::Finalized)
        .await?
        .ok_or_else(|| eyre!("the endpoint has no finalized block"))?
        .header
        .number;
    let block = args.block.unwrap_or(finalized);
    ensure!(
        block <= finalized || args.allow_unfinalized,
        "block {block} is not final (finalized is {finalized}): resolvers replay only anchors on \
         final blocks; pass --allow-unfinalized to freeze it anyway"
    );
    let body = rpc::freeze_anchor(&provider, block, args.evm.into()).await?;
    let doc = PrestateAnchorV1 { backend_id: *BACKEND_ID, body: body.to_canonical_bytes().into() };
    std::fs::write(&args.out, doc.to_canonical_bytes())?;
    print_json(&serde_json::json!({
        "prestateAnchorHash": doc.content_hash(),
        "prestateRoot": body.state_root,
        "chainId": body.chain_id,
        "blockNumber": body.block_number,
        "blockHash": body.block_hash,
        "out": args.out,
    }))
}

fn parse_slot(text: &str) -> eyre::Result<(Address, B256)> {
    let (a, s) =
        text.split_once(':').ok_or_else(|| eyre!("--slot takes ADDRESS:SLOT, got {text}"))?;
    Ok((a.parse()?, s.parse()?))
}

/// `resolvd witness`.
pub(crate) async fn witness(args: WitnessArgs) -> eyre::Result<()> {
    let doc_bytes = std::fs::read(&args.anchor)?;
    let doc = PrestateAnchorV1::from_canonical_bytes(&doc_bytes)
        .map_err(|e| eyre!("{}: not a PrestateAnchorV1: {e}", args.anchor.display()))?;
    let anchor = EvmAnchorV1::from_canonical_bytes(&doc.body)
        .map_err(|e| eyre!("anchor body is not an EvmAnchorV1: {e}"))?;
    let plan = EvmCallPlanV1::from_canonical_bytes(&std::fs::read(&args.plan)?)
        .map_err(|e| eyre!("{}: not an EvmCallPlanV1: {e}", args.plan.display()))?;
    let slots = args.slots.iter().map(|s| parse_slot(s)).collect::<eyre::Result<Vec<_>>>()?;
    let provider = ProviderBuilder::new().connect_http(args.rpc_url.parse()?);
    let witness = rpc::build_witness(&provider, &anchor, &plan, &slots, args.ancestors).await?;
    std::fs::write(&args.out, witness.to_canonical_bytes())?;
    print_json(&serde_json::json!({
        "witnessHash": witness.content_hash(),
        "accounts": witness.accounts.len(),
        "codes": witness.codes.len(),
        "out": args.out,
    }))
}

/// `resolvd verify`: keyless.
pub(crate) async fn verify(args: VerifyArgs) -> eyre::Result<()> {
    let (report, matches) = verify_report(&args).await?;
    print_json(&report)?;
    ensure!(matches, "the replayed commitment differs from the certified one");
    Ok(())
}

/// Replays a settled deal from public inputs; the report and whether it matches.
pub(crate) async fn verify_report(args: &VerifyArgs) -> eyre::Result<(serde_json::Value, bool)> {
    let chain = connect(&args.chain, None).await?;
    let deal = chain.deal(args.deal_id, None).await?;
    ensure!(
        deal.state == deal_state::RESOLVED,
        "deal {} is not resolved (state {})",
        args.deal_id,
        deal.state
    );
    let Published { spec, anchor, delivery, on_chain } = published(&chain, args.deal_id).await?;
    let parsed: DeliveryV1 = decode_committed(&delivery, &deal.deliveryHash)?;
    let witness = match parsed.witness_hash() {
        None => None,
        Some(hash) => Some(witness_of(args, hash).await?),
    };
    let request = ReexecRequestV1 {
        deal_id: args.deal_id,
        spec,
        spec_hash: deal.specHash,
        delivery,
        delivery_hash: deal.deliveryHash,
        prestate_anchor: anchor,
        prestate_anchor_hash: deal.prestateAnchorHash,
        witness,
    };
    // The check every resolver makes before replaying.
    let anchor_status = match AnchorRef::of(&request) {
        Some(a) => {
            let others = args.anchor_rpc.iter().cloned().collect();
            let checker =
                AnchorChecker::connect(chain.chain_id, chain.provider().clone(), &others).await?;
            let status = checker.check(&a).await?;
            ensure!(
                status == AnchorStatus::Final,
                "the anchor (block {} of chain {}) is not canonical and final: {status:?}",
                a.block_number,
                a.chain_id
            );
            Some(status)
        }
        None => None,
    };
    let envelope = tokio::task::spawn_blocking(move || EvmBackend.verdict(&request)).await??;
    let replayed = envelope.commitment();
    let matches = replayed == on_chain;
    let report = serde_json::json!({
        "dealId": args.deal_id,
        "match": matches,
        "anchor": anchor_status,
        "replayed": replayed,
        "onChain": on_chain,
    });
    Ok((report, matches))
}

/// What a settled deal published on chain: its content and the certified
/// commitment.
struct Published {
    spec: Bytes,
    anchor: Bytes,
    delivery: Bytes,
    on_chain: VerdictCommitment,
}

async fn published(chain: &Chain, deal_id: B256) -> eyre::Result<Published> {
    let logs = chain
        .provider()
        .get_logs(&Filter::new().address(chain.escrow).topic1(deal_id).from_block(0u64))
        .await?;
    let (mut spec, mut anchor, mut delivery, mut on_chain) = (None, None, None, None);
    for log in &logs {
        match log.topic0() {
            Some(&IEscrow::SpecPublished::SIGNATURE_HASH) => {
                let e = IEscrow::SpecPublished::decode_log(&log.inner)?.data;
                spec = Some(e.spec);
                anchor = Some(e.prestateAnchor);
            }
            Some(&IEscrow::DeliveryPublished::SIGNATURE_HASH) => {
                delivery = Some(IEscrow::DeliveryPublished::decode_log(&log.inner)?.data.delivery);
            }
            Some(&IEscrow::VerdictCommitted::SIGNATURE_HASH) => {
                on_chain = IEscrow::VerdictCommitted::decode_log(&log.inner)?
                    .data
                    .commitment
                    .to_commitment();
            }
            _ => {}
        }
    }
    Ok(Published {
        on_chain: on_chain
            .ok_or_else(|| eyre!("no VerdictCommitted for {deal_id} (settled another way)"))?,
        spec: spec.ok_or_else(|| eyre!("the spec was not published on chain"))?,
        anchor: anchor.ok_or_else(|| eyre!("the anchor was not published on chain"))?,
        delivery: delivery.ok_or_else(|| eyre!("the delivery was not published on chain"))?,
    })
}

/// The replay witness a delivery names: from `--witness` or a node's API.
async fn witness_of(args: &VerifyArgs, hash: B256) -> eyre::Result<Bytes> {
    match (&args.witness, &args.api) {
        (Some(path), _) => Ok(Bytes::from(std::fs::read(path)?)),
        (None, Some(api)) => {
            let url = format!("{}/content/{hash}", api.trim_end_matches('/'));
            let res = reqwest::get(&url).await?;
            ensure!(res.status().is_success(), "GET {url}: {}", res.status());
            Ok(res.bytes().await?.to_vec().into())
        }
        (None, None) => bail!("the delivery names witness {hash}: pass --api or --witness"),
    }
}

/// `resolvd slash`.
pub(crate) async fn slash(args: SlashArgs) -> eyre::Result<()> {
    let text = std::fs::read_to_string(&args.evidence)?;
    let bytes = hex::decode(text.trim()).map_err(|e| eyre!("evidence file is not hex: {e}"))?;
    let ev = wire::ConflictEvidence::decode_wire(&bytes)?;
    let (a, b) = (Attestation::from_wire(&ev.first)?, Attestation::from_wire(&ev.second)?);
    let chain = connect(&args.chain, Some(&args.account)).await?;
    let mut committees = BTreeMap::new();
    for epoch in [a.epoch, b.epoch] {
        if let std::collections::btree_map::Entry::Vacant(e) = committees.entry(epoch) {
            e.insert(chain.committee(epoch, None).await?);
        }
    }
    let checked = ConflictEvidence::verify(a, b, &committees, &chain.domain())?;
    let committee = &committees[&checked.first.epoch];
    let resolvers: Vec<u32> =
        checked.equivocators.iter().filter_map(|k| committee.index_of(k)).collect();
    let sent =
        chain.slash_all(&resolvers, (&checked.first).into(), (&checked.second).into()).await?;
    ensure!(!sent.is_empty(), "every equivocator of this evidence is already slashed");
    print_json(&serde_json::json!({
        "dealId": checked.first.commitment.deal_id,
        "equivocators": checked.equivocators.iter().map(|k| hex::encode_prefixed(k.compress())).collect::<Vec<_>>(),
        "tx": sent.last().map(|o| o.tx_hash),
        "txs": sent.iter().map(|o| o.tx_hash).collect::<Vec<_>>(),
        "gasUsed": sent.iter().map(|o| o.gas_used).sum::<u64>(),
    }))
}

/// `resolvd status`.
pub(crate) async fn status(api: &str) -> eyre::Result<()> {
    let url = format!("{}/status", api.trim_end_matches('/'));
    let res = reqwest::get(&url).await.wrap_err_with(|| format!("GET {url}"))?;
    ensure!(res.status().is_success(), "GET {url}: {}", res.status());
    print_json(&res.json().await?)
}

/// The data dir (opened) and the BLS public key of a protection command.
fn protection_target(dir: &DataDirArgs) -> eyre::Result<(resolvd_node::store::Store, String)> {
    let mut cfg = match &dir.config {
        Some(path) => resolvd_node::config::NodeConfig::load(path)?,
        None => resolvd_node::config::NodeConfig::default(),
    };
    if let Some(d) = &dir.data_dir {
        cfg.data_dir.clone_from(d);
    }
    let keystore = dir.keystore.clone().or(cfg.keys.bls_keystore.clone()).ok_or_else(|| {
        eyre!("no BLS keystore: pass --keystore or set keys.bls_keystore in --config")
    })?;
    let json = std::fs::read_to_string(&keystore)
        .wrap_err_with(|| format!("reading {}", keystore.display()))?;
    let pk = resolvd_node::keystore::Keystore::from_json(&json)?
        .public_key()
        .ok_or_else(|| eyre!("{} stores no valid pubkey", keystore.display()))?;
    let db = cfg.data_dir.join("db");
    let store = resolvd_node::store::Store::open(&db)
        .wrap_err_with(|| format!("opening {} (is the node still running?)", db.display()))?;
    Ok((store, hex::encode_prefixed(pk.compress())))
}

/// `resolvd protection export|import`.
pub(crate) fn protection(cmd: ProtectionCommand) -> eyre::Result<()> {
    use resolvd_node::interchange;
    match cmd {
        ProtectionCommand::Export { dir, chain_id, out } => {
            let (store, pubkey) = protection_target(&dir)?;
            let chain_id = match (store.chain_id()?, chain_id) {
                (Some(a), Some(b)) if a != b => {
                    bail!("--chain-id {b}, but the data dir was used on chain {a}")
                }
                (Some(a), _) | (None, Some(a)) => a,
                (None, None) => bail!("the data dir records no chain id: pass --chain-id"),
            };
            let doc = interchange::export(&store, &pubkey, chain_id)?;
            let json = serde_json::to_string_pretty(&doc)? + "\n";
            match out {
                Some(path) => {
                    std::fs::write(&path, json)
                        .wrap_err_with(|| format!("writing {}", path.display()))?;
                    tracing::info!(target: "protection", records = doc.data[0].signed_verdicts.len(), path = %path.display(), "exported");
                }
                None => {
                    #[allow(clippy::disallowed_macros)]
                    {
                        print!("{json}");
                    }
                }
            }
        }
        ProtectionCommand::Import { dir, file } => {
            let bytes =
                std::fs::read(&file).wrap_err_with(|| format!("reading {}", file.display()))?;
            let doc: interchange::Interchange = serde_json::from_slice(&bytes)
                .wrap_err_with(|| format!("{} is not an interchange document", file.display()))?;
            let (store, pubkey) = protection_target(&dir)?;
            let summary = interchange::import(&store, &doc, &pubkey, store.chain_id()?)?;
            if store.chain_id()?.is_none() {
                if let Ok(id) = doc.metadata.chain_id.parse() {
                    store.set_chain_id(id)?;
                }
            }
            print_json(&serde_json::to_value(summary)?)?;
        }
    }
    Ok(())
}

/// The resolver of `operator`, from its `ResolverRegistered` log.
async fn index_of(chain: &Chain, operator: Address) -> eyre::Result<u64> {
    let filter = Filter::new()
        .address(chain.registry)
        .event_signature(IRegistry::ResolverRegistered::SIGNATURE_HASH)
        .topic2(operator.into_word())
        .from_block(0u64);
    let logs = chain.provider().get_logs(&filter).await?;
    let log = logs.last().ok_or_else(|| eyre!("{operator} never registered a resolver"))?;
    let index = log.topics().get(1).ok_or_else(|| eyre!("malformed ResolverRegistered log"))?;
    Ok(alloy_primitives::U256::from_be_bytes(index.0).to())
}

/// `resolvd resolver`.
pub(crate) async fn resolver(args: ResolverArgs) -> eyre::Result<()> {
    let chain = connect(&args.chain, None).await?;
    let index = match (args.index, args.operator) {
        (Some(i), _) => i,
        (None, Some(op)) => index_of(&chain, op).await?,
        (None, None) => bail!("pass a resolver index or --operator"),
    };
    print_json(&resolver_json(&chain, index).await?)
}

async fn resolver_json(chain: &Chain, index: u64) -> eyre::Result<serde_json::Value> {
    let count: alloy_primitives::U256 =
        chain.view(chain.registry, IRegistry::resolverCountCall {}, None).await?;
    ensure!(
        alloy_primitives::U256::from(index) < count,
        "no resolver {index} (the registry has {count})"
    );
    let info = chain
        .view(
            chain.registry,
            IRegistry::resolverInfoCall { index: alloy_primitives::U256::from(index) },
            None,
        )
        .await?;
    let delay: alloy_primitives::U256 =
        chain.view(chain.registry, IRegistry::unbondingDelayCall {}, None).await?;
    let (r, m) = (info.entry, info.membership);
    let exit = (r.exitRequestedAt != 0).then_some(r.exitRequestedAt);
    let status = if r.slashed {
        "slashed"
    } else if r.withdrawn {
        "withdrawn"
    } else if exit.is_some() {
        "exiting"
    } else if m.joinedEpoch == 0 {
        "pending activation"
    } else {
        "active"
    };
    Ok(serde_json::json!({
        "resolver": index,
        "operator": r.operator,
        "status": status,
        "bond": r.bond.to_string(),
        "stake": m.stake.to_string(),
        "joinedEpoch": m.joinedEpoch,
        "leftEpoch": (m.leftEpoch != 0).then_some(m.leftEpoch),
        "slashed": r.slashed,
        "withdrawn": r.withdrawn,
        "exitRequestedAt": exit,
        "withdrawableAt": exit.map(|t| alloy_primitives::U256::from(t) + delay).map(|t| t.to_string()),
        "publicKey": hex::encode_prefixed(&info.publicKey),
    }))
}

/// Epochs `resolvd rewards` reads: the newest of the resolver's membership.
const MAX_REWARD_EPOCHS: u64 = 4_096;

/// Epochs one `claimRewards` transaction claims (its gas grows with them).
const CLAIM_EPOCHS_PER_TX: usize = 64;

/// Exclusion entries one `settleExclusions` transaction settles: about
/// 6.8k gas each (`contracts/snapshots/ExclusionGas.json`), 6.9M in all.
const SETTLE_ENTRIES_PER_TX: u64 = 1_000;

/// `resolvd rewards`.
pub(crate) async fn rewards(args: RewardsArgs) -> eyre::Result<()> {
    let account = match (&args.account_keystore, &args.account_password_file) {
        (Some(k), Some(p)) => {
            Some(AccountArgs { account_keystore: k.clone(), account_password_file: p.clone() })
        }
        _ => None,
    };
    let chain = connect(&args.chain, account.as_ref()).await?;
    let resolver = match (args.resolver, chain.account) {
        (Some(r), _) => r,
        (None, Some(op)) => index_of(&chain, op).await?,
        (None, None) => bail!("pass --resolver or --account-keystore"),
    };
    let token = match args.token {
        Some(t) => t,
        None => chain.view(chain.registry, IRegistry::bondTokenCall {}, None).await?,
    };
    let r = U256::from(resolver);
    let info = chain.view(chain.registry, IRegistry::rewardInfoCall { resolver: r }, None).await?;
    let current: U256 = chain.view(chain.registry, IRegistry::currentEpochCall {}, None).await?;
    let epochs = membership_epochs(info.joinedEpoch, info.leftEpoch, current);
    let pending = pending_rewards(&chain, token, r, epochs).await?;
    let claimable = match chain.account {
        Some(a) => {
            chain.view(chain.escrow, IEscrow::claimableCall { account: a, token }, None).await?
        }
        None => U256::ZERO,
    };
    let total: U256 = pending.iter().map(|(_, a)| *a).sum();
    let mut out = serde_json::json!({
        "resolver": resolver,
        "operator": info.operator,
        "token": token,
        "slashed": info.slashed,
        "pending": pending.iter().map(|(e, a)| serde_json::json!({"epoch": e, "amount": a.to_string()})).collect::<Vec<_>>(),
        "pendingTotal": total.to_string(),
        "account": chain.account,
        "claimable": claimable.to_string(),
    });
    if args.claim {
        let me = chain.account.ok_or_else(|| eyre!("--claim needs --account-keystore"))?;
        let to = args.to.unwrap_or(me);
        let mut txs = Vec::new();
        if total > U256::ZERO {
            ensure!(!info.slashed, "resolver {resolver} was slashed: its rewards are forfeited");
            ensure!(
                info.operator == me,
                "the account {me} is not resolver {resolver}'s operator ({})",
                info.operator
            );
            let epochs: Vec<u64> = pending.iter().map(|(e, _)| *e).collect();
            txs = settle_exclusions(&chain, token, r, &epochs, args.settle_above).await?;
            txs.extend(claim_rewards(&chain, token, r, &epochs, to).await?);
        }
        if claimable > U256::ZERO {
            let tx = chain.send(chain.escrow, IEscrow::claimCall { token, to }).await?;
            txs.push(serde_json::json!({"call": "claim", "tx": tx.tx_hash, "gas": tx.gas_used}));
        }
        if txs.is_empty() {
            bail!("nothing to claim for resolver {resolver} in {token}");
        }
        out["claimed"] = serde_json::json!({
            "to": to,
            "rewards": total.to_string(),
            "credits": claimable.to_string(),
            "transactions": txs,
        });
    }
    print_json(&out)
}

/// The epochs of a membership `[joined, left)` up to `current` (joined 0:
/// never a member), at most the newest [`MAX_REWARD_EPOCHS`].
fn membership_epochs(joined: U256, left: U256, current: U256) -> Vec<u64> {
    if joined == U256::ZERO {
        return Vec::new();
    }
    let last = if left == U256::ZERO { current } else { left - U256::from(1) };
    let (first, last) = (joined.saturating_to::<u64>(), last.saturating_to::<u64>());
    // One view per epoch.
    (first.max(last.saturating_sub(MAX_REWARD_EPOCHS - 1))..=last).collect()
}

/// `pendingRewards` of a resolver per epoch, the epochs with some only.
async fn pending_rewards(
    chain: &Chain,
    token: Address,
    resolver: U256,
    epochs: Vec<u64>,
) -> eyre::Result<Vec<(u64, U256)>> {
    let mut out = Vec::new();
    for e in epochs {
        let call = IEscrow::pendingRewardsCall { token, resolver, epoch: U256::from(e) };
        let amount = chain.view(chain.escrow, call, None).await?;
        if amount > U256::ZERO {
            out.push((e, amount));
        }
    }
    Ok(out)
}

/// `settleExclusions` for each of `epochs` in which more than `above`
/// exclusion entries are not yet accounted for `resolver`, in transactions of
/// [`SETTLE_ENTRIES_PER_TX`] entries, so that its claim scans at most `above`
/// entries per epoch (and a claim of many epochs fits one transaction).
async fn settle_exclusions(
    chain: &Chain,
    token: Address,
    resolver: U256,
    epochs: &[u64],
    above: u64,
) -> eyre::Result<Vec<serde_json::Value>> {
    let mut txs = Vec::new();
    for &e in epochs {
        let epoch = U256::from(e);
        let count: U256 =
            chain.view(chain.escrow, IEscrow::exclusionCountCall { token, epoch }, None).await?;
        let cursor = IEscrow::exclusionCursorCall { token, epoch, resolver };
        let mut done: U256 = chain.view(chain.escrow, cursor.clone(), None).await?;
        if count.saturating_sub(done) <= U256::from(above) {
            continue;
        }
        // A resolver no split left out in this epoch is not scanned when it
        // claims (its `missedBits` bit is clear): nothing to settle.
        let at = IRegistry::positionOfCall { epoch, index: resolver };
        let position: usize = chain.view(chain.registry, at, None).await?.saturating_to();
        let word = IEscrow::missedBitsCall { token, epoch, word: U256::from(position >> 8) };
        if !resolvd_node::chain::position_bit(chain.view(chain.escrow, word, None).await?, position)
        {
            continue;
        }
        while count.saturating_sub(done) > U256::from(above) {
            let max_entries = U256::from(SETTLE_ENTRIES_PER_TX);
            let call =
                IEscrow::settleExclusionsCall { token, resolver, epoch, maxEntries: max_entries };
            let tx = chain.send(chain.escrow, call).await?;
            txs.push(serde_json::json!({"call": "settleExclusions", "epoch": e, "tx": tx.tx_hash, "gas": tx.gas_used}));
            // The mined transaction moved the cursor; an endpoint that lags
            // behind it is asked again.
            let mut now: U256 = chain.view(chain.escrow, cursor.clone(), None).await?;
            for _ in 0..10 {
                if now > done {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                now = chain.view(chain.escrow, cursor.clone(), None).await?;
            }
            ensure!(now > done, "settleExclusions made no progress in epoch {e}");
            done = now;
        }
    }
    Ok(txs)
}

/// `claimRewards` for `epochs`, [`CLAIM_EPOCHS_PER_TX`] per transaction.
async fn claim_rewards(
    chain: &Chain,
    token: Address,
    resolver: U256,
    epochs: &[u64],
    to: Address,
) -> eyre::Result<Vec<serde_json::Value>> {
    let mut txs = Vec::new();
    for chunk in epochs.chunks(CLAIM_EPOCHS_PER_TX) {
        let call = IEscrow::claimRewardsCall {
            token,
            resolver,
            epochs: chunk.iter().map(|e| U256::from(*e)).collect(),
            to,
        };
        let tx = chain.send(chain.escrow, call).await?;
        txs.push(serde_json::json!({"call": "claimRewards", "epochs": chunk, "tx": tx.tx_hash, "gas": tx.gas_used}));
    }
    Ok(txs)
}

/// `resolvd exit`.
pub(crate) async fn exit(args: AccountChainArgs) -> eyre::Result<()> {
    operator_call(args, IRegistry::requestExitCall {}).await
}

/// `resolvd withdraw`.
pub(crate) async fn withdraw(args: AccountChainArgs) -> eyre::Result<()> {
    operator_call(args, IRegistry::withdrawCall {}).await
}

/// Sends `call` to the registry from the operator account, then prints the
/// resolver as it is now (and the transaction).
async fn operator_call<C: alloy_sol_types::SolCall>(
    args: AccountChainArgs,
    call: C,
) -> eyre::Result<()> {
    let chain = connect(&args.chain, Some(&args.account)).await?;
    let operator = chain.account.ok_or_else(|| eyre!("no account"))?;
    let tx = chain.send(chain.registry, call).await?;
    let index = index_of(&chain, operator).await?;
    let mut out = resolver_json(&chain, index).await?;
    out["tx"] = serde_json::json!(tx.tx_hash);
    print_json(&out)
}

/// `resolvd signer`.
pub(crate) async fn signer(args: SignerArgs) -> eyre::Result<()> {
    let domains = args
        .domains
        .iter()
        .map(|d| {
            let (chain, escrow) =
                d.split_once(':').ok_or_else(|| eyre!("--domain {d}: expected CHAIN_ID:ESCROW"))?;
            Ok((chain.parse::<u64>()?, escrow.parse::<Address>()?))
        })
        .collect::<eyre::Result<Vec<_>>>()?;
    let token = zeroize::Zeroizing::new(
        std::fs::read_to_string(&args.token_file)
            .wrap_err_with(|| format!("reading {}", args.token_file.display()))?
            .trim()
            .to_owned(),
    );
    resolvd_node::signer::check_token(&token, "--token-file")?;
    let secret = keys::load(&args.keystore, &args.password)?;
    std::fs::create_dir_all(&args.data_dir)?;
    let store = std::sync::Arc::new(resolvd_node::store::Store::open(&args.data_dir.join("db"))?);
    let listener = resolvd_node::signer::SignerListener::bind(&args.listen).await?;
    resolvd_node::signer::serve(listener, secret, store, token, domains, async {
        shutdown_signal().await;
    })
    .await
}

/// `resolvd attest request|status|verify`.
pub(crate) async fn attest(cmd: AttestCommand) -> eyre::Result<()> {
    match cmd {
        AttestCommand::Request(args) => attest_request(args).await,
        AttestCommand::Status(args) => attest_status(args).await,
        AttestCommand::Verify(args) => attest_verify(args).await,
    }
}

async fn attest_request(args: AttestRequestArgs) -> eyre::Result<()> {
    let read =
        |p: &std::path::Path| std::fs::read(p).wrap_err_with(|| format!("reading {}", p.display()));
    let (spec, anchor, delivery) = (read(&args.spec)?, read(&args.anchor)?, read(&args.delivery)?);
    let question = attestation::question(&spec, &anchor, &delivery).map_err(|e| eyre!(e))?;
    let chain = connect(&args.attestor.chain(), Some(&args.account)).await?;
    let token = match args.token {
        Some(t) => t,
        None => chain.view(chain.registry, IRegistry::bondTokenCall {}, None).await?,
    };
    let fee = match args.fee {
        Some(f) => f,
        None => chain.view(chain.registry, IRegistry::minResolverFeeCall { token }, None).await?,
    };
    let window = match args.window {
        Some(w) => U256::from(w),
        None => chain.view(chain.registry, IRegistry::minResolveWindowCall {}, None).await?,
    };
    let input_hash = attestation::input_hash(&question);
    let approve =
        resolvd_node::contracts::IERC20::approveCall { spender: chain.escrow, amount: fee };
    chain.send(token, approve).await?;
    let (spec, anchor, delivery) = if args.no_publish {
        (Bytes::new(), Bytes::new(), Bytes::new())
    } else {
        (spec.into(), anchor.into(), delivery.into())
    };
    let call = IAttestor::requestCall {
        question,
        terms: resolvd_node::contracts::RequestTerms { token, fee, resolveWindow: window },
        spec,
        prestateAnchor: anchor,
        delivery,
    };
    let tx = chain.send(chain.escrow, call).await?;
    let status = attestation::status(&chain, input_hash).await?;
    print_json(&serde_json::json!({
        "inputHash": input_hash,
        "requestId": status.request_id,
        "epoch": status.epoch,
        "resolveDeadline": status.resolve_deadline,
        "fee": fee.to_string(),
        "token": token,
        "tx": tx.tx_hash,
        "gasUsed": tx.gas_used,
    }))
}

async fn attest_status(args: AttestStatusArgs) -> eyre::Result<()> {
    let chain = connect(&args.attestor.chain(), None).await?;
    let status = attestation::status(&chain, args.input_hash).await?;
    let mut out = serde_json::to_value(&status)?;
    if args.proof {
        let p = attestation::proof_from_chain(&chain, status.request_id).await?;
        out["proof"] = serde_json::json!(p.map(|p| p.encode()));
    }
    print_json(&out)
}

async fn attest_verify(args: AttestVerifyArgs) -> eyre::Result<()> {
    let chain = connect(&args.attestor.chain(), None).await?;
    let input_hash = args.input_hash;
    let output_hash = match args.output_hash {
        Some(o) => o,
        None => attestation::status(&chain, input_hash)
            .await?
            .output_hash
            .ok_or_else(|| eyre!("{input_hash} has no recorded answer: pass --output-hash"))?,
    };
    let proof: Bytes = match (args.proof, args.from_chain) {
        (Some(hex_proof), _) => {
            hex::decode(hex_proof.trim()).map_err(|e| eyre!("--proof is not hex: {e}"))?.into()
        }
        (None, true) => {
            let request_id = attestation::request_id(chain.chain_id, chain.escrow, input_hash);
            attestation::proof_from_chain(&chain, request_id)
                .await?
                .ok_or_else(|| eyre!("{input_hash} was not answered by a resolve transaction"))?
                .encode()
        }
        (None, false) => Bytes::new(),
    };
    let metadata: Bytes = alloy_sol_types::SolValue::abi_encode(&chain.escrow).into();
    let call = IProofVerifier::verifyCall {
        inputHash: input_hash,
        outputHash: output_hash,
        metadata,
        proof: proof.clone(),
    };
    let valid = chain.view(args.verifier, call, None).await?;
    let reason = if valid {
        None
    } else {
        refusal(&chain, args.verifier, input_hash, output_hash, &proof).await
    };
    print_json(&serde_json::json!({
        "valid": valid,
        "inputHash": input_hash,
        "outputHash": output_hash,
        "mode": if proof.is_empty() { "recorded" } else { "certificate" },
        "reason": reason,
    }))?;
    ensure!(valid, "the proof does not verify");
    Ok(())
}

/// Why a verifier refused a proof: the revert of the check `verify` runs.
async fn refusal(
    chain: &Chain,
    verifier: Address,
    input_hash: B256,
    output_hash: B256,
    proof: &Bytes,
) -> Option<String> {
    if proof.is_empty() {
        return Some("no such recorded answer".to_owned());
    }
    let check = IProofVerifier::checkCertificateCall {
        attestor: chain.escrow,
        inputHash: input_hash,
        outputHash: output_hash,
        proof: proof.clone(),
    };
    chain.view(verifier, check, None).await.err().map(|e| e.to_string())
}
