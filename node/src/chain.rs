//! Chain access over JSON-RPC (alloy, over the endpoints and failover of
//! [`crate::chain::rpc`]): event scanning with confirmations,
//! views at a confirmed block, committee loading, and transaction sending
//! with revert decoding.
//!
//! This is an IO edge: it turns logs into [`ChainEvent`]s and calls into
//! typed results; what to do with them is the node's state machine.

/// Anchor finality: a prestate anchor is canonical and final, cross-checked.
pub mod anchor;
/// An Attestor's questions and answers as a requester reads them.
pub mod attestation;
/// The hand-written ABI of the contracts the node calls.
pub mod contracts;
/// The JSON-RPC transport: failover, TLS, health, timeouts.
pub mod rpc;

use crate::chain::contracts::{
    deal_state, Deal, Evidence, IEscrow, IRegistry, VerdictCommitment as AbiCommitment, IERC20,
};
use crate::chain::rpc::{ConnectError, EndpointHealth, Failover};
pub use crate::chain::rpc::{RpcOptions, RPC_CONNECT_TIMEOUT, RPC_TIMEOUT};
use crate::{
    config::{BlockTag, Confirmations},
    dispute::Confirmation,
};
use alloy_network::{EthereumWallet, TransactionBuilder};
use alloy_primitives::{Address, Bytes, B256, U256};
use alloy_provider::{DynProvider, Provider, ProviderBuilder};
use alloy_rpc_types_eth::{BlockId, BlockNumberOrTag, Filter, TransactionRequest};
use alloy_signer_local::PrivateKeySigner;
use alloy_sol_types::{SolCall, SolEvent, SolInterface};
use futures::Stream;
use resolvd_consensus::{Committee, Member, PublicKey, QuorumCertificate, Threshold};
use resolvd_proto::{wire::DisputeAnnouncement, VerdictCommitment, VerdictDomain};
use std::{collections::HashMap, time::Duration};

/// Chains whose `prevrandao` is the beacon chain's RANDAO mix, so that a
/// dispute's order entropy is the next block's `prevrandao`: Ethereum,
/// Sepolia, Holesky, Hoodi, and the local development chain id (anvil draws
/// a `mixHash` per block). On other chains the `mixHash` field is not drawn
/// that way (an Arbitrum chain's carries sequencer data; an OP chain's is its
/// L1 origin's `prevrandao`, public before the L2 block that adopts it, so a
/// challenger could time its challenge for the value it wants): the entropy
/// is the hash of the block holding the log, which only its sequencer
/// chooses. A fixed list, so that every node of one version draws the same.
pub const RANDAO_CHAINS: [u64; 5] = [1, 11_155_111, 17_000, 560_048, 31_337];

/// Longest wait for a sent transaction's receipt (the caller retries after it).
pub const RECEIPT_TIMEOUT: Duration = Duration::from_secs(60);

/// A chain failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChainError {
    /// Transport or node error (retry later).
    #[error("rpc: {0}")]
    Rpc(String),
    /// The call reverted; the raw revert data and its decoding, if known.
    #[error("reverted: {reason}")]
    Reverted {
        /// Decoded reason (custom error name and fields) or hex data.
        reason: String,
        /// Raw revert data.
        data: Bytes,
    },
    /// The chain returned something the contracts cannot produce.
    #[error("unexpected chain data: {0}")]
    Unexpected(String),
    /// A transaction was requested but the node has no account.
    #[error("no transaction account configured (chain.account_keystore)")]
    NoAccount,
    /// The account cannot pay for a transaction at the fee cap.
    #[error("account {account} holds {balance} wei, a transaction needs up to {needed} wei (gas limit × chain.max_fee_per_gas): fund it")]
    InsufficientFunds {
        /// The account.
        account: Address,
        /// Its balance.
        balance: U256,
        /// Gas limit × max fee per gas.
        needed: U256,
    },
    /// The next block's base fee alone is above `chain.max_fee_per_gas`.
    #[error("base fee {base_fee} wei is above chain.max_fee_per_gas {cap} wei: not sending")]
    FeeCap {
        /// The next block's base fee.
        base_fee: u128,
        /// The cap.
        cap: u128,
    },
    /// An RPC endpoint serves another chain than the others (not retryable).
    #[error("{0}")]
    WrongChain(String),
    /// The RPC configuration cannot work: a bad URL or `chain.ca_file` (not retryable).
    #[error("configuration: {0}")]
    Config(String),
    /// The transaction journal could not be read or written (nothing was
    /// broadcast after a failed write).
    #[error("transaction journal: {0}")]
    Journal(String),
    /// A transaction could not be signed.
    #[error("signing the transaction: {0}")]
    Sign(String),
}

fn rpc<E: std::fmt::Display>(e: E) -> ChainError {
    ChainError::Rpc(e.to_string())
}

/// A decoded, confirmed log.
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)] // short-lived, one batch at a time
pub enum ChainEvent {
    /// `Escrow.Disputed`, as the announcement nodes gossip.
    Disputed(Box<DisputeAnnouncement>),
    /// `Escrow.SpecPublished`.
    SpecPublished {
        /// Canonical spec bytes.
        spec: Bytes,
        /// Canonical anchor bytes.
        anchor: Bytes,
    },
    /// `Escrow.DeliveryPublished`.
    DeliveryPublished {
        /// Canonical delivery bytes.
        delivery: Bytes,
    },
    /// `Escrow.VerdictCommitted`.
    VerdictCommitted {
        /// The deal.
        deal_id: B256,
        /// The certified commitment.
        commitment: Option<VerdictCommitment>,
        /// The transaction.
        tx_hash: B256,
    },
    /// `Escrow.Settled` (any settlement).
    Settled {
        /// The deal.
        deal_id: B256,
        /// Settlement code.
        settlement: u8,
    },
    /// `Registry.EpochStarted`.
    EpochStarted {
        /// The new epoch.
        epoch: u64,
    },
    /// `Registry.Slashed`.
    Slashed {
        /// Resolver index.
        resolver: u64,
        /// The deal of the evidence.
        deal_id: B256,
    },
}

/// A block as the chain watcher reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockHeader {
    /// Its number.
    pub number: u64,
    /// Its hash.
    pub hash: B256,
    /// Its parent's hash.
    pub parent: B256,
    /// Its timestamp.
    pub time: u64,
}

/// The chain's head and its confirmed block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Confirmed {
    /// Latest block number.
    pub head: u64,
    /// Its timestamp.
    pub time: u64,
    /// The confirmed block (at most `head`).
    pub block: u64,
}

/// What a sent transaction did.
#[derive(Clone, Copy, Debug)]
pub struct TxOutcome {
    /// Transaction hash.
    pub tx_hash: B256,
    /// Gas used.
    pub gas_used: u64,
    /// Block it was included in.
    pub block: u64,
    /// How many times it was replaced with higher fees before it was mined.
    pub replacements: u32,
}

/// How the node prices its transactions (EIP-1559).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FeePolicy {
    /// Never pay more than this per gas (base fee + tip).
    pub max_fee_per_gas: u128,
    /// The tip: this percentile of the tips paid in the last blocks.
    pub priority_percentile: f64,
    /// Replace a transaction not mined after this many blocks (same nonce,
    /// fees raised by at least the 12.5 % replacement minimum, up to the cap).
    pub replace_after_blocks: u64,
}

impl Default for FeePolicy {
    fn default() -> Self {
        Self {
            max_fee_per_gas: 500_000_000_000,
            priority_percentile: 50.0,
            replace_after_blocks: 3,
        }
    }
}

/// The fees of one transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Fees {
    /// `maxFeePerGas`.
    pub max_fee_per_gas: u128,
    /// `maxPriorityFeePerGas`.
    pub max_priority_fee_per_gas: u128,
}

impl Fees {
    /// From `eth_feeHistory`: the next block's base fee and the tip
    /// percentile of recent blocks; the max fee leaves room for the base fee
    /// to double. Refused if the base fee alone exceeds the cap.
    pub fn from_history(next_base_fee: u128, tips: &[u128], cap: u128) -> Result<Self, ChainError> {
        if next_base_fee > cap {
            return Err(ChainError::FeeCap { base_fee: next_base_fee, cap });
        }
        let mut tips = tips.to_vec();
        tips.sort_unstable();
        let tip = tips.get(tips.len() / 2).copied().unwrap_or(0).max(1);
        let max_fee = next_base_fee.saturating_mul(2).saturating_add(tip).min(cap);
        Ok(Self { max_fee_per_gas: max_fee, max_priority_fee_per_gas: tip.min(max_fee) })
    }

    /// The fees of a replacement: each at least 12.5 % (+1 wei) above these
    /// (what nodes require to replace a pending transaction), or the fresh
    /// estimate if that is higher; capped. `None` if the cap leaves no room.
    pub fn bumped(self, fresh: Option<Fees>, cap: u128) -> Option<Self> {
        let bump = |v: u128| v.saturating_add(v / 8).saturating_add(1);
        let fresh = fresh.unwrap_or(self);
        let max_fee = bump(self.max_fee_per_gas).max(fresh.max_fee_per_gas);
        let tip = bump(self.max_priority_fee_per_gas).max(fresh.max_priority_fee_per_gas);
        if max_fee > cap || tip > max_fee {
            return None;
        }
        Some(Self { max_fee_per_gas: max_fee, max_priority_fee_per_gas: tip })
    }

    fn apply(self, tx: TransactionRequest) -> TransactionRequest {
        tx.with_max_fee_per_gas(self.max_fee_per_gas)
            .with_max_priority_fee_per_gas(self.max_priority_fee_per_gas)
    }
}

/// What [`Chain::resume`] found.
enum Resumed {
    Mined(Box<(alloy_rpc_types_eth::TransactionReceipt, TransactionRequest)>),
    Pending(Box<PendingTx>),
}

/// A connection to the chain and the two contracts.
#[derive(Clone, Debug)]
pub struct Chain {
    provider: DynProvider,
    /// The escrow this handle sends to and reads (see [`Self::for_escrow`]).
    pub escrow: Address,
    /// Every escrow served (the first is the one connected with); all use
    /// [`Self::registry`]. Their logs are watched together.
    pub escrows: Vec<Address>,
    /// Its registry.
    pub registry: Address,
    /// The sending account, if any.
    pub account: Option<Address>,
    /// Chain id.
    pub chain_id: u64,
    /// Serialises nonce reads and sends of the account (see [`Self::send`]).
    send_lock: std::sync::Arc<tokio::sync::Mutex<()>>,
    /// Wei paid for mined transactions (see [`Self::gas_spent_wei`]); shared by clones.
    spent: std::sync::Arc<std::sync::Mutex<u128>>,
    /// Transaction pricing.
    pub fees: FeePolicy,
    /// The endpoints under the provider, with their health.
    transport: Failover,
    /// Signs the account's transactions (locally, so the hash is known and
    /// journaled before anything is broadcast).
    wallet: Option<EthereumWallet>,
    /// Where keyed sends are persisted (see [`Self::send_keyed`]).
    journal: Option<std::sync::Arc<dyn TxJournal>>,
}

pub use crate::economics::FeeEvent;
use crate::economics::Ledger;

/// Persists the node's in-flight transactions, so that a restart resumes a
/// pending `resolve` or `slash` (same nonce, same signed bytes) instead of
/// sending it a second time. The node implements it over its store.
pub trait TxJournal: Send + Sync + std::fmt::Debug {
    /// The transaction in flight for `key`, if any.
    fn load(&self, key: &str) -> Result<Option<PendingTx>, String>;
    /// Records (durably: fsync) `tx` under `key`, replacing what was there.
    fn save(&self, key: &str, tx: &PendingTx) -> Result<(), String>;
    /// Forgets `key`'s transaction (mined, or its nonce taken).
    fn clear(&self, key: &str) -> Result<(), String>;
}

/// A transaction sent and not yet seen mined: every signed version of it
/// (the first and its fee replacements, all with one nonce).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct PendingTx {
    /// The sending account.
    pub from: Address,
    /// Its nonce.
    pub nonce: u64,
    /// The request without fees (for re-pricing and revert decoding).
    pub request: TransactionRequest,
    /// Each signed version, oldest first.
    pub sent: Vec<SignedTx>,
}

/// One signed version of a [`PendingTx`].
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct SignedTx {
    /// Its hash.
    pub hash: B256,
    /// Its fees.
    pub fees: Fees,
    /// The EIP-2718 bytes broadcast.
    pub raw: Bytes,
}

impl Chain {
    /// Connects to one endpoint, trusting the webpki roots only (the one-shot
    /// commands' `--rpc-url`); see [`Self::connect_with`].
    pub async fn connect(
        rpc_url: &str,
        escrow: Address,
        signer: Option<PrivateKeySigner>,
    ) -> Result<Self, ChainError> {
        Self::connect_with(&RpcOptions::single(rpc_url), escrow, signer).await
    }

    /// Connects to every endpoint of `rpc` (reads and sends fail over in
    /// their order, see [`crate::chain::rpc`]), checks that all that answer report
    /// one chain id ([`ChainError::WrongChain`] names one that does not), and
    /// reads the escrow's registry.
    pub async fn connect_with(
        rpc: &RpcOptions,
        escrow: Address,
        signer: Option<PrivateKeySigner>,
    ) -> Result<Self, ChainError> {
        let account = signer.as_ref().map(|s| s.address());
        let transport = Failover::connect(rpc).await.map_err(|e| match e {
            ConnectError::WrongChain { .. } => ChainError::WrongChain(e.to_string()),
            ConnectError::Setup(e) => ChainError::Config(e.to_string()),
            e => ChainError::Rpc(e.to_string()),
        })?;
        let client = transport.client();
        let wallet = signer.map(EthereumWallet::from);
        let provider = match &wallet {
            Some(w) => ProviderBuilder::new().wallet(w.clone()).connect_client(client).erased(),
            None => ProviderBuilder::new().connect_client(client).erased(),
        };
        let mut chain = Self {
            provider,
            escrow,
            escrows: vec![escrow],
            registry: Address::ZERO,
            account,
            chain_id: transport.chain_id(),
            send_lock: Default::default(),
            spent: Default::default(),
            fees: FeePolicy::default(),
            transport,
            wallet,
            journal: None,
        };
        chain.registry = chain.view(escrow, IEscrow::registryCall {}, None).await?;
        Ok(chain)
    }

    /// How often a sent transaction's receipt is polled. alloy's default is
    /// 250 ms for a transport on this machine and 7 s for any other, which
    /// would hold every submission of an operator with a remote RPC up to
    /// 7 s after it was mined.
    pub fn set_receipt_poll(&self, every: Duration) {
        self.provider.client().set_poll_interval(every);
    }

    /// Also serves `escrow`: refused ([`ChainError::Config`]) unless it uses
    /// this chain's registry (its committees, bonds and slashing are that
    /// registry's).
    pub async fn serve_escrow(&mut self, escrow: Address) -> Result<(), ChainError> {
        let registry: Address = self.view(escrow, IEscrow::registryCall {}, None).await?;
        if registry != self.registry {
            return Err(ChainError::Config(format!(
                "escrow {escrow} uses registry {registry}, not {} (the registry of chain.escrow {}): one node serves one registry",
                self.registry, self.escrows[0]
            )));
        }
        if !self.escrows.contains(&escrow) {
            self.escrows.push(escrow);
        }
        Ok(())
    }

    /// [`Self::serve_escrow`] by value (for retry loops).
    pub async fn serve_escrow_owned(mut self, escrow: Address) -> Result<Self, ChainError> {
        self.serve_escrow(escrow).await?;
        Ok(self)
    }

    /// This connection acting for `escrow` (one of [`Self::escrows`]): same
    /// endpoints, account, nonce lock and journal.
    pub fn for_escrow(&self, escrow: Address) -> Self {
        debug_assert!(self.escrows.contains(&escrow), "{escrow} is not served");
        Self { escrow, ..self.clone() }
    }

    /// Every RPC endpoint's health (in `chain.rpc_urls` order): up or down,
    /// head, consecutive errors, last error, latency. For `/status`; the
    /// metrics take the same list through
    /// [`crate::observe::endpoints`].
    pub fn endpoints(&self) -> Vec<EndpointHealth> {
        self.transport.endpoints()
    }

    /// Every RPC endpoint on its own (the anchor cross-check).
    pub fn readers(&self) -> Vec<crate::chain::rpc::EndpointReader> {
        self.transport.readers()
    }

    /// Block numbers of new heads, pushed by a `newHeads` subscription on the
    /// first WebSocket endpoint that is up; `None` when no endpoint is a
    /// WebSocket (poll instead).
    ///
    /// A wake-up, not a source of truth: numbers may repeat or skip (a
    /// reconnection, a reorg, a slow reader sees only the latest), so the
    /// watcher still scans logs from its cursor to the confirmed head. A
    /// dropped connection is reopened by alloy's pubsub service (which also
    /// re-subscribes); a subscription that fails or ends is made again after
    /// a backoff doubling from 1 s to 30 s, on the next WebSocket endpoint
    /// that is up. The stream does not end while the chain is in use.
    pub async fn subscribe_heads(
        &self,
    ) -> Option<impl Stream<Item = u64> + Send + Unpin + 'static> {
        self.transport.subscribe_heads()
    }

    /// The provider.
    pub fn provider(&self) -> &DynProvider {
        &self.provider
    }

    /// The EIP-712 domain of verdicts on this escrow.
    pub fn domain(&self) -> VerdictDomain {
        VerdictDomain {
            name: "resolvd".into(),
            version: "1".into(),
            chain_id: self.chain_id,
            verifying_contract: self.escrow,
        }
    }

    /// The latest block number.
    pub async fn head(&self) -> Result<u64, ChainError> {
        self.provider.get_block_number().await.map_err(rpc)
    }

    /// The latest block's number and timestamp (the escrow's clock).
    pub async fn head_and_time(&self) -> Result<(u64, u64), ChainError> {
        self.latest().await.map(|b| (b.number, b.time))
    }

    /// The latest block.
    pub async fn latest(&self) -> Result<BlockHeader, ChainError> {
        self.header(BlockNumberOrTag::Latest)
            .await?
            .ok_or_else(|| ChainError::Rpc("no latest block".into()))
    }

    /// The latest block (number and timestamp) and the confirmed block's
    /// number under `c` (a depth under the head, or a block tag).
    pub async fn confirmed(&self, c: Confirmations) -> Result<Confirmed, ChainError> {
        let (head, time) = self.head_and_time().await?;
        let block = match c {
            Confirmations::Blocks(n) => head.saturating_sub(n),
            Confirmations::Tag(tag) => self.tagged(tag).await?,
        };
        Ok(Confirmed { head, time, block: block.min(head) })
    }

    /// Block `at` of the endpoint's canonical chain: its number, hash, parent
    /// hash and timestamp (`None` if it has no such block).
    pub async fn header(&self, at: BlockNumberOrTag) -> Result<Option<BlockHeader>, ChainError> {
        Ok(self.provider.get_block_by_number(at).await.map_err(rpc)?.map(|b| BlockHeader {
            number: b.header.number,
            hash: b.header.hash,
            parent: b.header.parent_hash,
            time: b.header.timestamp,
        }))
    }

    /// The number of the endpoint's `safe` or `finalized` block.
    pub async fn tagged(&self, tag: BlockTag) -> Result<u64, ChainError> {
        let tag = match tag {
            BlockTag::Safe => BlockNumberOrTag::Safe,
            BlockTag::Finalized => BlockNumberOrTag::Finalized,
        };
        self.header(tag)
            .await?
            .map(|b| b.number)
            .ok_or_else(|| ChainError::Rpc(format!("the endpoint has no {tag} block")))
    }

    /// The registry's current epoch at `block` (latest if `None`).
    pub async fn current_epoch(&self, block: Option<u64>) -> Result<u64, ChainError> {
        to_u64(self.view(self.registry, IRegistry::currentEpochCall {}, block).await?)
    }

    /// The commit-reveal window pinned for disputes of `epoch` (the
    /// registry's `commitRevealMsAt(epoch)`, fixed once the epoch started;
    /// `None` when 0: off), read at `block`.
    pub async fn commit_reveal(
        &self,
        epoch: u64,
        block: Option<u64>,
    ) -> Result<Option<Duration>, ChainError> {
        let call = IRegistry::commitRevealMsAtCall { epoch: U256::from(epoch) };
        let ms = self.view(self.registry, call, block).await?;
        Ok((ms > 0).then(|| Duration::from_millis(u64::from(ms))))
    }

    /// Wei this handle's account paid for mined transactions (reverted ones
    /// included) since the process started.
    pub fn gas_spent_wei(&self) -> u128 {
        *self.spent.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether a gossiped announcement is true at this node's confirmed head
    /// (`confirmations` below its latest block): the deal is disputed with
    /// exactly these fields, epoch and deadline, and its `Disputed` log is in
    /// the announced transaction, block number and block hash (else
    /// [`Confirmation::Misplaced`]). A deal that exists nowhere, not even at
    /// the latest block, is [`Confirmation::NoSuchDeal`].
    pub async fn confirm_announcement(
        &self,
        a: &DisputeAnnouncement,
        confirmations: Confirmations,
    ) -> Result<Confirmation, ChainError> {
        if a.chain_id != self.chain_id || !self.escrows.contains(&a.escrow) {
            return Ok(Confirmation::NotDisputed);
        }
        let this = self.for_escrow(a.escrow);
        let at = this.confirmed(confirmations).await?.block;
        if this.confirms(a, Some(at)).await? {
            // The block and the entropy drawn after it seed the dispute's
            // submitter and aggregator order: a peer must not choose them
            // either (nor an earlier request's).
            let block = this.dispute_block(a).await?;
            if block != Some((a.block_number, a.block_hash)) || a.block_number > at {
                return Ok(Confirmation::Misplaced);
            }
            // So is the entropy drawn after it: a peer must not choose that.
            let drawn = this.drawn_order_entropy(a.block_number, a.block_hash).await?;
            return Ok(if drawn == a.order_entropy {
                Confirmation::Disputed
            } else {
                Confirmation::Misplaced
            });
        }
        let latest = this.deal(a.deal_id, None).await?;
        Ok(if latest.state == deal_state::NONE {
            Confirmation::NoSuchDeal
        } else {
            Confirmation::NotDisputed
        })
    }

    /// The block (number and hash) of the `Disputed` log of `a.deal_id` with
    /// `a`'s epoch and deadline (not an earlier request of the same id) in
    /// transaction `a.tx_hash`, as this node's RPC has it now; `None` if the
    /// transaction is not mined (any more) or holds no such log.
    pub async fn dispute_block(
        &self,
        a: &DisputeAnnouncement,
    ) -> Result<Option<(u64, B256)>, ChainError> {
        let Some(receipt) = self.provider.get_transaction_receipt(a.tx_hash).await.map_err(rpc)?
        else {
            return Ok(None);
        };
        // (Decoding checks the event's signature topic.)
        let disputed = receipt.inner.logs().iter().any(|log| {
            log.address() == a.escrow
                && IEscrow::Disputed::decode_log(&log.inner).is_ok_and(|e| {
                    e.data.dealId == a.deal_id
                        && to_u64(e.data.epoch).ok() == Some(a.epoch)
                        && to_u64(e.data.resolveDeadline).ok() == Some(a.resolve_deadline)
                })
        });
        Ok(match (disputed, receipt.block_number, receipt.block_hash) {
            (true, Some(number), Some(hash)) => Some((number, hash)),
            _ => None,
        })
    }

    /// The entropy of a dispute's order (`DisputeAnnouncement::order_entropy`)
    /// whose `Disputed` log is in block `number` with hash `hash`. On a chain
    /// of [`RANDAO_CHAINS`]: the `prevrandao` (`mixHash`) of the block after
    /// it, the RANDAO mix after block `number` (whichever block follows, its
    /// `prevrandao` is that mix; `hash` if it is zero, a development chain
    /// that draws none); `None` while the endpoint has no block after it.
    /// Elsewhere: `hash`. An error if the endpoint's next block
    /// does not follow `hash` (a log of a block no longer canonical).
    pub async fn order_entropy(&self, number: u64, hash: B256) -> Result<Option<B256>, ChainError> {
        if !RANDAO_CHAINS.contains(&self.chain_id) {
            return Ok(Some(hash));
        }
        let next = self
            .provider
            .get_block_by_number(BlockNumberOrTag::Number(number + 1))
            .await
            .map_err(rpc)?;
        let Some(next) = next.map(|b| b.header) else { return Ok(None) };
        if next.parent_hash != hash {
            return Err(ChainError::Unexpected(format!(
                "block {} does not follow block {number} {hash} (reorged meanwhile?)",
                number + 1
            )));
        }
        // A development chain that draws no prevrandao: the block's hash.
        Ok(Some(if next.mix_hash.is_zero() { hash } else { next.mix_hash }))
    }

    /// [`Self::order_entropy`], an error while it is not drawn yet (no block
    /// after `number` at the endpoint: to be asked again).
    pub async fn drawn_order_entropy(&self, number: u64, hash: B256) -> Result<B256, ChainError> {
        self.order_entropy(number, hash).await?.ok_or_else(|| {
            ChainError::Rpc(format!("block {number} ({hash}) has no successor at the endpoint yet"))
        })
    }

    /// Whether `deal_id` is disputed at the latest block.
    pub async fn still_disputed(&self, deal_id: B256) -> Result<Confirmation, ChainError> {
        let d = self.deal(deal_id, None).await?;
        Ok(if d.state == deal_state::DISPUTED {
            Confirmation::Disputed
        } else {
            Confirmation::NotDisputed
        })
    }

    /// A view call at `block` (latest if `None`).
    pub async fn view<C: SolCall>(
        &self,
        to: Address,
        call: C,
        block: Option<u64>,
    ) -> Result<C::Return, ChainError> {
        let tx = TransactionRequest::default().with_to(to).with_input(call.abi_encode());
        let call = self.provider.call(tx);
        let out = match block {
            Some(n) => call.block(BlockId::number(n)).await,
            // Explicitly `latest`: some nodes (anvil) answer an `eth_call`
            // without a block on the pending state, where an unmined
            // `resolve` already looks settled.
            None => call.block(BlockId::latest()).await,
        }
        .map_err(|e| revert_or_rpc(&e))?;
        C::abi_decode_returns(&out).map_err(|e| ChainError::Unexpected(e.to_string()))
    }

    /// Sends `call` to `to` from the node's account and waits for the
    /// receipt. A revert (at estimation or on-chain) is [`ChainError::Reverted`].
    ///
    /// The nonce is the account's `pending` transaction count, read for every
    /// send under a lock that is released once the node accepted the
    /// transaction (not across the receipt wait): a send that failed at the
    /// RPC leaves no gap, and a slow receipt does not hold up other sends.
    /// Fees follow [`Self::fees`] (EIP-1559 from `eth_feeHistory`, capped);
    /// the account must hold gas limit × cap. A transaction not mined after
    /// `replace_after_blocks` blocks is replaced (same nonce, higher fees)
    /// while the cap allows; the wait ends [`RECEIPT_TIMEOUT`] after the last
    /// (re)send.
    pub async fn send<C: SolCall>(&self, to: Address, call: C) -> Result<TxOutcome, ChainError> {
        self.send_inner(None, to, call.abi_encode().into()).await
    }

    /// [`Self::send`] for an intent named `key` (e.g. `resolve/<deal>`),
    /// journaled when [`Self::with_journal`] set a journal: every signed
    /// version is recorded (fsync) before it is broadcast, and cleared once
    /// one is mined. A send for a `key` already in flight (a restart, or a
    /// retry after [`RECEIPT_TIMEOUT`]) resumes that transaction, with its
    /// nonce and bytes, instead of sending a second one; the new `call` is
    /// not sent then (the intent is the same). If the journaled nonce was
    /// taken by a transaction the journal does not know, it is forgotten and
    /// `call` is sent anew.
    pub async fn send_keyed<C: SolCall>(
        &self,
        key: &str,
        to: Address,
        call: C,
    ) -> Result<TxOutcome, ChainError> {
        self.send_inner(Some(key), to, call.abi_encode().into()).await
    }

    /// Persists keyed sends in `journal` from now on.
    pub fn with_journal(mut self, journal: std::sync::Arc<dyn TxJournal>) -> Self {
        self.journal = Some(journal);
        self
    }

    async fn send_inner(
        &self,
        key: Option<&str>,
        to: Address,
        input: Bytes,
    ) -> Result<TxOutcome, ChainError> {
        let from = self.account.ok_or(ChainError::NoAccount)?;
        let journal = match (key, &self.journal) {
            (Some(k), Some(j)) => Some((k, j.as_ref())),
            _ => None,
        };
        let pending = {
            let _one_at_a_time = self.send_lock.lock().await;
            match self.resume(journal, from).await? {
                Some(Resumed::Mined(mined)) => {
                    let (receipt, request) = *mined;
                    return self.finish(journal, receipt, request, 0).await;
                }
                Some(Resumed::Pending(p)) => *p,
                None => {
                    let tx = TransactionRequest::default()
                        .with_from(from)
                        .with_to(to)
                        .with_input(input)
                        .with_chain_id(self.chain_id);
                    let nonce =
                        self.provider.get_transaction_count(from).pending().await.map_err(rpc)?;
                    let request = with_gas_headroom(&self.provider, tx.with_nonce(nonce)).await?;
                    let fees = self.current_fees().await?;
                    let needed = U256::from(request.gas.unwrap_or_default())
                        * U256::from(self.fees.max_fee_per_gas);
                    let balance = self.provider.get_balance(from).await.map_err(rpc)?;
                    if balance < needed {
                        return Err(ChainError::InsufficientFunds {
                            account: from,
                            balance,
                            needed,
                        });
                    }
                    let mut p = PendingTx { from, nonce, request, sent: Vec::new() };
                    let signed = self.sign(&p.request, fees).await?;
                    p.sent.push(signed);
                    if let Some((k, j)) = journal {
                        j.save(k, &p).map_err(ChainError::Journal)?;
                    }
                    match self.broadcast(&p.sent[0]).await {
                        Ok(()) => {}
                        // "Already known", or no answer: it may be in a pool
                        // (sent through another endpoint or before a timeout).
                        // Kept in the journal and waited for like an accepted
                        // one; a retry resumes it rather than sending another.
                        Err(Broadcast { error, maybe_sent: true }) => {
                            tracing::warn!(target: "chain", key = key.unwrap_or("-"), nonce = p.nonce, tx = %p.sent[0].hash, %error, "broadcast not confirmed, but the transaction may be in a pool: waiting for it");
                        }
                        Err(Broadcast { error, maybe_sent: false }) => {
                            // Refused: nothing is in flight under this key.
                            if let Some((k, j)) = journal {
                                j.clear(k).map_err(ChainError::Journal)?;
                            }
                            return Err(error);
                        }
                    }
                    p
                }
            }
        };
        let (receipt, request, replacements) = self.mined(journal, pending).await?;
        self.finish(journal, receipt, request, replacements).await
    }

    /// A journaled transaction of `journal`'s key: mined, still pending
    /// (re-broadcast), or none (never sent, or its nonce was taken).
    async fn resume(
        &self,
        journal: Option<(&str, &dyn TxJournal)>,
        from: Address,
    ) -> Result<Option<Resumed>, ChainError> {
        let Some((key, j)) = journal else { return Ok(None) };
        let Some(p) = j.load(key).map_err(ChainError::Journal)? else { return Ok(None) };
        for s in &p.sent {
            if let Some(r) = self.provider.get_transaction_receipt(s.hash).await.map_err(rpc)? {
                return Ok(Some(Resumed::Mined(Box::new((r, s.fees.apply(p.request.clone()))))));
            }
        }
        let mined_nonce = self.provider.get_transaction_count(from).latest().await.map_err(rpc)?;
        if p.from != from || mined_nonce > p.nonce {
            tracing::warn!(target: "chain", key, nonce = p.nonce, "the journaled transaction's nonce was taken by another transaction: sending anew");
            j.clear(key).map_err(ChainError::Journal)?;
            return Ok(None);
        }
        let last = p.sent.last().ok_or_else(|| ChainError::Journal(format!("{key}: empty")))?;
        if let Err(e) = self.broadcast(last).await {
            // Typically "already known": the pool still holds it.
            tracing::debug!(target: "chain", key, error = %e.error, "re-broadcast not accepted");
        }
        tracing::info!(target: "chain", key, nonce = p.nonce, tx = %last.hash, versions = p.sent.len(), "resumed a transaction in flight (not sending another)");
        Ok(Some(Resumed::Pending(Box::new(p))))
    }

    /// Clears the journal entry and turns `receipt` into the outcome.
    async fn finish(
        &self,
        journal: Option<(&str, &dyn TxJournal)>,
        receipt: alloy_rpc_types_eth::TransactionReceipt,
        request: TransactionRequest,
        replacements: u32,
    ) -> Result<TxOutcome, ChainError> {
        if let Some((k, j)) = journal {
            j.clear(k).map_err(ChainError::Journal)?;
        }
        let paid = u128::from(receipt.gas_used).saturating_mul(receipt.effective_gas_price);
        {
            let mut spent = self.spent.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            *spent = spent.saturating_add(paid);
        }
        let receipt = succeeded(&self.provider, receipt, request).await?;
        Ok(TxOutcome {
            tx_hash: receipt.transaction_hash,
            gas_used: receipt.gas_used,
            block: receipt.block_number.unwrap_or_default(),
            replacements,
        })
    }

    /// Signs `request` priced at `fees` with the account's key.
    async fn sign(&self, request: &TransactionRequest, fees: Fees) -> Result<SignedTx, ChainError> {
        use alloy_network::{eip2718::Encodable2718, NetworkTransactionBuilder};
        let wallet = self.wallet.as_ref().ok_or(ChainError::NoAccount)?;
        let envelope = fees
            .apply(request.clone())
            .build(wallet)
            .await
            .map_err(|e| ChainError::Sign(e.to_string()))?;
        Ok(SignedTx { hash: *envelope.tx_hash(), fees, raw: envelope.encoded_2718().into() })
    }

    async fn broadcast(&self, tx: &SignedTx) -> Result<(), Broadcast> {
        match self.provider.send_raw_transaction(&tx.raw).await {
            Ok(_accepted) => Ok(()),
            Err(e) => Err(Broadcast { maybe_sent: maybe_sent(&e), error: revert_or_rpc(&e) }),
        }
    }

    /// The fees to send with now.
    pub async fn current_fees(&self) -> Result<Fees, ChainError> {
        let history = self
            .provider
            .get_fee_history(5, BlockNumberOrTag::Latest, &[self.fees.priority_percentile])
            .await
            .map_err(rpc)?;
        // The last entry is the base fee of the block after the newest.
        let next_base = history.base_fee_per_gas.last().copied().unwrap_or_default();
        let tips: Vec<u128> =
            history.reward.unwrap_or_default().iter().filter_map(|r| r.first().copied()).collect();
        Fees::from_history(next_base, &tips, self.fees.max_fee_per_gas)
    }

    /// Waits for the receipt of `p` (any of its versions), replacing it when
    /// it stays unmined (each replacement journaled before its broadcast).
    /// Returns the receipt, the request mined (for revert data), and the
    /// number of replacements made here.
    async fn mined(
        &self,
        journal: Option<(&str, &dyn TxJournal)>,
        mut p: PendingTx,
    ) -> Result<(alloy_rpc_types_eth::TransactionReceipt, TransactionRequest, u32), ChainError>
    {
        let versions = p.sent.len();
        let mut last_send = std::time::Instant::now();
        let mut sent_at = self.head().await?;
        loop {
            for s in &p.sent {
                if let Some(r) = self.provider.get_transaction_receipt(s.hash).await.map_err(rpc)? {
                    let replacements = (p.sent.len() - versions) as u32;
                    return Ok((r, s.fees.apply(p.request.clone()), replacements));
                }
            }
            let last = p.sent.last().map(|s| (s.hash, s.fees));
            let Some((last_hash, last_fees)) = last else {
                return Err(ChainError::Journal("a pending transaction without versions".into()));
            };
            if last_send.elapsed() > RECEIPT_TIMEOUT {
                return Err(ChainError::Rpc(format!(
                    "transaction {last_hash} (nonce {}) not mined within {RECEIPT_TIMEOUT:?}",
                    p.nonce
                )));
            }
            let head = self.head().await?;
            if head >= sent_at + self.fees.replace_after_blocks.max(1) {
                sent_at = head;
                let fresh = self.current_fees().await.ok();
                match last_fees.bumped(fresh, self.fees.max_fee_per_gas) {
                    Some(higher) => {
                        let signed = self.sign(&p.request, higher).await?;
                        p.sent.push(signed.clone());
                        if let Some((k, j)) = journal {
                            j.save(k, &p).map_err(ChainError::Journal)?;
                        }
                        match self.broadcast(&signed).await {
                            Ok(()) => {
                                tracing::info!(target: "chain", replaced = %last_hash, by = %signed.hash, nonce = p.nonce, max_fee = higher.max_fee_per_gas, tip = higher.max_priority_fee_per_gas, "transaction not mined: replaced with higher fees");
                                last_send = std::time::Instant::now();
                            }
                            // Typically "nonce too low": an earlier one was
                            // mined meanwhile; its receipt is found next round.
                            // (The unaccepted version stays listed: it has no
                            // receipt, so it is harmless.)
                            Err(e) => {
                                tracing::debug!(target: "chain", error = %e.error, "replacement not accepted")
                            }
                        }
                    }
                    None => {
                        tracing::warn!(target: "chain", nonce = p.nonce, cap = self.fees.max_fee_per_gas, "transaction not mined and the fee cap leaves no room to replace it")
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Brings `ledger` up to block `to`: scans fee logs (in `max_range`
    /// chunks) from where it stopped, then reads pending rewards and
    /// claimable credits at `to`.
    pub async fn update_ledger(
        &self,
        ledger: &mut Ledger,
        resolver: Option<u32>,
        account: Option<Address>,
        to: u64,
        max_range: u64,
    ) -> Result<(), ChainError> {
        let mut from = ledger.scanned_to + 1;
        while from <= to {
            let end = to.min(from + max_range.max(1) - 1);
            let events = self.fee_events(from, end, resolver).await?;
            ledger.apply(&events, account);
            ledger.scanned_to = end;
            from = end + 1;
        }
        for (token, t) in &mut ledger.tokens {
            if let Some(r) = resolver {
                let mut pending = U256::ZERO;
                for &epoch in &t.epochs {
                    for &escrow in &self.escrows {
                        let call = IEscrow::pendingRewardsCall {
                            token: *token,
                            resolver: U256::from(r),
                            epoch: U256::from(epoch),
                        };
                        pending += self.view(escrow, call, Some(to)).await?;
                    }
                }
                t.pending = pending;
            }
            if let Some(a) = account {
                let mut claimable = U256::ZERO;
                for &escrow in &self.escrows {
                    let call = IEscrow::claimableCall { account: a, token: *token };
                    claimable += self.view(escrow, call, Some(to)).await?;
                }
                t.claimable = claimable;
            }
        }
        Ok(())
    }

    /// The served escrows' fee events in `[from, to]`, in chain order:
    /// `FeeDistributed` (every one) and `RewardsClaimed` of `resolver`.
    pub async fn fee_events(
        &self,
        from: u64,
        to: u64,
        resolver: Option<u32>,
    ) -> Result<Vec<FeeEvent>, ChainError> {
        let filter = Filter::new()
            .address(self.escrows.clone())
            .event_signature(vec![
                IEscrow::FeeDistributed::SIGNATURE_HASH,
                IEscrow::RewardsClaimed::SIGNATURE_HASH,
            ])
            .from_block(from)
            .to_block(to);
        let logs = self.provider.get_logs(&filter).await.map_err(rpc)?;
        let bad = |e: alloy_sol_types::Error| ChainError::Unexpected(e.to_string());
        let mut out = Vec::new();
        for log in logs {
            match log.topic0() {
                Some(&IEscrow::FeeDistributed::SIGNATURE_HASH) => {
                    let e = IEscrow::FeeDistributed::decode_log(&log.inner).map_err(bad)?.data;
                    out.push(FeeEvent::Distributed {
                        token: e.token,
                        epoch: to_u64(e.epoch)?,
                        submitter: e.submitter,
                        refund: e.refund,
                    });
                }
                Some(&IEscrow::RewardsClaimed::SIGNATURE_HASH) => {
                    let e = IEscrow::RewardsClaimed::decode_log(&log.inner).map_err(bad)?.data;
                    if resolver.is_some_and(|r| e.resolver == U256::from(r)) {
                        out.push(FeeEvent::Claimed { token: e.token, amount: e.amount });
                    }
                }
                _ => {}
            }
        }
        Ok(out)
    }

    /// Logs of both contracts in `[from, to]`, decoded, in chain order.
    /// Logs of other events are skipped; logs of known events that do not
    /// decode are errors (a wrong contract address).
    pub async fn events(&self, from: u64, to: u64) -> Result<Vec<ChainEvent>, ChainError> {
        let filter = self.contracts_filter().from_block(from).to_block(to);
        self.decode_logs(self.provider.get_logs(&filter).await.map_err(rpc)?).await
    }

    /// Logs of both contracts in the block with hash `hash`, decoded, in
    /// order; `None` if the endpoint does not have that block. The logs
    /// (EIP-234: `eth_getLogs` with `blockHash`, of that block whatever the
    /// canonical chain is by then) and the block are asked in one JSON-RPC
    /// batch, which one endpoint answers: an endpoint without the block (a
    /// lagging backup; anvil and some clients answer `[]` for an unknown
    /// hash) cannot pass for one whose block has no logs.
    pub async fn events_in(&self, hash: B256) -> Result<Option<Vec<ChainEvent>>, ChainError> {
        let filter = self.contracts_filter().at_block_hash(hash);
        let mut batch = alloy_rpc_client::BatchRequest::new(self.provider.client());
        let logs = batch
            .add_call::<_, Vec<alloy_rpc_types_eth::Log>>("eth_getLogs", &(filter,))
            .map_err(rpc)?;
        let block = batch
            .add_call::<_, Option<alloy_rpc_types_eth::Block>>("eth_getBlockByHash", &(hash, false))
            .map_err(rpc)?;
        batch.send().await.map_err(rpc)?;
        if block.await.map_err(rpc)?.is_none_or(|b| b.header.hash != hash) {
            return Ok(None);
        }
        let logs = logs.await.map_err(rpc)?;
        if let Some(other) = logs.iter().find(|l| l.block_hash != Some(hash)) {
            return Err(ChainError::Unexpected(format!(
                "eth_getLogs for block {hash} answered a log of block {:?}",
                other.block_hash
            )));
        }
        self.decode_logs(logs).await.map(Some)
    }

    /// A log filter on both contracts.
    fn contracts_filter(&self) -> Filter {
        Filter::new().address([self.escrows.as_slice(), &[self.registry]].concat())
    }

    /// `logs` of the contracts decoded (see [`Self::events`]).
    async fn decode_logs(
        &self,
        logs: Vec<alloy_rpc_types_eth::Log>,
    ) -> Result<Vec<ChainEvent>, ChainError> {
        let mut out = Vec::with_capacity(logs.len());
        for log in logs {
            let bad = |e: alloy_sol_types::Error| ChainError::Unexpected(e.to_string());
            let Some(&topic0) = log.topic0() else { continue };
            let inner = &log.inner;
            let event = if self.escrows.contains(&inner.address) {
                match topic0 {
                    IEscrow::Disputed::SIGNATURE_HASH => {
                        let e = IEscrow::Disputed::decode_log(inner).map_err(bad)?.data;
                        ChainEvent::Disputed(Box::new(DisputeAnnouncement {
                            chain_id: self.chain_id,
                            escrow: inner.address,
                            deal_id: e.dealId,
                            spec_hash: e.specHash,
                            delivery_hash: e.deliveryHash,
                            prestate_anchor_hash: e.prestateAnchorHash,
                            prestate_root: e.prestateRoot,
                            backend_id: e.backendId,
                            backend_version_hash: e.backendVersionHash,
                            epoch: to_u64(e.epoch)?,
                            resolve_deadline: to_u64(e.resolveDeadline)?,
                            block_number: log.block_number.unwrap_or_default(),
                            tx_hash: log.transaction_hash.unwrap_or_default(),
                            block_hash: log.block_hash.unwrap_or_default(),
                            // Below, once every log is decoded.
                            order_entropy: B256::ZERO,
                        }))
                    }
                    IEscrow::SpecPublished::SIGNATURE_HASH => {
                        let e = IEscrow::SpecPublished::decode_log(inner).map_err(bad)?.data;
                        ChainEvent::SpecPublished { spec: e.spec, anchor: e.prestateAnchor }
                    }
                    IEscrow::DeliveryPublished::SIGNATURE_HASH => {
                        let e = IEscrow::DeliveryPublished::decode_log(inner).map_err(bad)?.data;
                        ChainEvent::DeliveryPublished { delivery: e.delivery }
                    }
                    IEscrow::VerdictCommitted::SIGNATURE_HASH => {
                        let e = IEscrow::VerdictCommitted::decode_log(inner).map_err(bad)?.data;
                        ChainEvent::VerdictCommitted {
                            deal_id: e.dealId,
                            commitment: e.commitment.to_commitment(),
                            tx_hash: log.transaction_hash.unwrap_or_default(),
                        }
                    }
                    IEscrow::Settled::SIGNATURE_HASH => {
                        let e = IEscrow::Settled::decode_log(inner).map_err(bad)?.data;
                        ChainEvent::Settled { deal_id: e.dealId, settlement: e.settlement }
                    }
                    _ => continue,
                }
            } else {
                match topic0 {
                    IRegistry::EpochStarted::SIGNATURE_HASH => {
                        let e = IRegistry::EpochStarted::decode_log(inner).map_err(bad)?.data;
                        ChainEvent::EpochStarted { epoch: to_u64(e.epoch)? }
                    }
                    IRegistry::Slashed::SIGNATURE_HASH => {
                        let e = IRegistry::Slashed::decode_log(inner).map_err(bad)?.data;
                        ChainEvent::Slashed { resolver: to_u64(e.resolver)?, deal_id: e.dealId }
                    }
                    _ => continue,
                }
            };
            out.push(event);
        }
        // Each dispute's order entropy (left zero while it is drawn from a
        // block not there yet: the watcher reads the range again).
        let mut entropy = HashMap::new();
        for e in &mut out {
            let ChainEvent::Disputed(a) = e else { continue };
            let key = (a.block_number, a.block_hash);
            if key.1.is_zero() {
                return Err(ChainError::Unexpected(format!(
                    "a Disputed log of deal {} without its block hash",
                    a.deal_id
                )));
            }
            a.order_entropy = match entropy.get(&key) {
                Some(&e) => e,
                None => {
                    let e = self.order_entropy(key.0, key.1).await?.unwrap_or_default();
                    entropy.insert(key, e);
                    e
                }
            };
        }
        Ok(out)
    }

    /// The escrow's record of `deal_id` at `block` (latest if `None`).
    pub async fn deal(&self, deal_id: B256, block: Option<u64>) -> Result<Deal, ChainError> {
        Ok(self.view(self.escrow, IEscrow::dealCall { dealId: deal_id }, block).await?.into())
    }

    /// Whether `announcement` matches the escrow's state at `block`: the deal
    /// is disputed with exactly these fields, epoch and deadline.
    pub async fn confirms(
        &self,
        a: &DisputeAnnouncement,
        block: Option<u64>,
    ) -> Result<bool, ChainError> {
        if a.chain_id != self.chain_id || a.escrow != self.escrow {
            return Ok(false);
        }
        let d = self.deal(a.deal_id, block).await?;
        Ok(d.state == deal_state::DISPUTED
            && d.specHash == a.spec_hash
            && d.deliveryHash == a.delivery_hash
            && d.prestateAnchorHash == a.prestate_anchor_hash
            && d.prestateRoot == a.prestate_root
            && d.backendId == a.backend_id
            && d.backendVersionHash == a.backend_version_hash
            && d.epoch == a.epoch
            && d.resolveDeadline == a.resolve_deadline)
    }

    /// The committee of `epoch`, read from the registry at `block` (latest if
    /// `None`). An epoch that has not started at that block is an error: the
    /// registry would describe a committee that does not exist yet (and may
    /// never exist in that form), and a node must never cache one.
    pub async fn committee(&self, epoch: u64, block: Option<u64>) -> Result<Committee, ChainError> {
        let r = self.registry;
        let current = self.current_epoch(block).await?;
        if epoch == 0 || epoch > current {
            return Err(ChainError::Unexpected(format!(
                "epoch {epoch} does not exist at block {block:?} (current epoch {current})"
            )));
        }
        let numerator = to_u64(self.view(r, IRegistry::thresholdNumeratorCall {}, block).await?)?;
        let denominator =
            to_u64(self.view(r, IRegistry::thresholdDenominatorCall {}, block).await?)?;
        // The epoch's member list (bounded by the registry's committee
        // size), not a scan of every registration ever made.
        let e = U256::from(epoch);
        let list = self.view(r, IRegistry::epochMembersCall { epoch: e }, block).await?;
        let bound = to_u64(self.view(r, IRegistry::MAX_COMMITTEE_SIZECall {}, block).await?)?;
        if list.len() as u64 > bound {
            return Err(ChainError::Unexpected(format!(
                "epoch {epoch} lists {} members, over the registry's bound {bound}",
                list.len()
            )));
        }
        let mut members = Vec::with_capacity(list.len());
        for i in list {
            let index = to_u64(i)?;
            let info = self.view(r, IRegistry::resolverInfoCall { index: i }, block).await?;
            let key = PublicKey::from_eip2537(&info.publicKey)
                .map_err(|err| ChainError::Unexpected(format!("resolver {index} key: {err}")))?;
            members.push(Member {
                index: u32::try_from(index)
                    .map_err(|_| ChainError::Unexpected("resolver index > u32".into()))?,
                operator: info.entry.operator,
                key,
                stake: U256::from(info.membership.stake),
            });
        }
        let threshold = Threshold::new(numerator, denominator)
            .map_err(|e| ChainError::Unexpected(format!("threshold: {e}")))?;
        Committee::with_threshold(epoch, members, threshold)
            .map_err(|err| ChainError::Unexpected(format!("epoch {epoch} committee: {err}")))
    }

    /// Sends `resolve` with `certificate`, its non-signers given as the
    /// position bitmap `non_signers` (`Committee::position_bitmap`): the
    /// overload that costs no search per non-signer.
    pub async fn resolve(
        &self,
        certificate: &QuorumCertificate,
        non_signers: &[u8],
    ) -> Result<TxOutcome, ChainError> {
        let call = IEscrow::resolveCall {
            commitment: AbiCommitment::from(&certificate.commitment),
            nonSigners: Bytes::copy_from_slice(non_signers),
            aggregateSignature: Bytes::copy_from_slice(&certificate.signature.to_eip2537()),
        };
        // Keyed by deal: any certificate settles it, so a restart resumes the
        // one in flight rather than sending another aggregate.
        let key = format!("resolve/{}", certificate.commitment.deal_id);
        self.send_keyed(&key, self.escrow, call).await
    }

    /// Sends `slashEquivocationUpTo(domainSeparator, a, b, SLASH_CHUNK)`:
    /// at most [`SLASH_CHUNK`] resolvers per transaction, so that slashing
    /// the largest coalition is several transactions each under EIP-7825's
    /// per-transaction gas cap. `done` is how many of the evidence's
    /// equivocators the chain shows slashed: each chunk is keyed by it, so
    /// after a restart or a retry the transaction in flight for that state
    /// is resumed, not sent again beside a new one.
    pub async fn slash(
        &self,
        a: Evidence,
        b: Evidence,
        done: usize,
    ) -> Result<TxOutcome, ChainError> {
        let separator = self.domain().eip712().separator();
        let call = IRegistry::slashEquivocationUpToCall {
            domainSeparator: separator,
            a,
            b,
            maxSlashed: U256::from(SLASH_CHUNK),
        };
        let key = format!("slash/{}/{done}", alloy_primitives::keccak256(call.abi_encode()));
        self.send_keyed(&key, self.registry, call).await
    }

    /// Slashes every not yet slashed resolver of `resolvers` that the
    /// evidence pair `a`, `b` convicts: one bounded [`Self::slash`] after
    /// another until each of them is slashed (by this handle or anyone
    /// else). Returns the transactions this handle sent.
    pub async fn slash_all(
        &self,
        resolvers: &[u32],
        a: Evidence,
        b: Evidence,
    ) -> Result<Vec<TxOutcome>, ChainError> {
        let mut sent = Vec::new();
        // Each round slashes at least one of `resolvers` or ends the loop.
        for _ in 0..=resolvers.len() {
            let mut done = 0;
            for r in resolvers {
                done += usize::from(self.is_slashed(*r).await?);
            }
            if done == resolvers.len() {
                break;
            }
            match self.slash(a.clone(), b.clone(), done).await {
                Ok(o) => sent.push(o),
                Err(ChainError::Reverted { data, .. }) if is_already_slashed(&data) => break,
                Err(e) => return Err(e),
            }
        }
        Ok(sent)
    }

    /// Whether resolver `index` has been slashed.
    pub async fn is_slashed(&self, index: u32) -> Result<bool, ChainError> {
        let info = self
            .view(self.registry, IRegistry::resolverInfoCall { index: U256::from(index) }, None)
            .await?;
        Ok(info.entry.slashed)
    }

    /// Registers `secret` as a resolver with `bond` bond tokens: approves the
    /// registry, then calls `register(publicKey, proofOfPossession, bond)`.
    /// Returns the registration transaction and the new resolver index.
    pub async fn register(
        &self,
        secret: &resolvd_consensus::SecretKey,
        bond: U256,
    ) -> Result<(TxOutcome, u64), ChainError> {
        let token = self.view(self.registry, IRegistry::bondTokenCall {}, None).await?;
        self.send(token, IERC20::approveCall { spender: self.registry, amount: bond }).await?;
        let key = secret.public_key();
        let index = to_u64(self.view(self.registry, IRegistry::resolverCountCall {}, None).await?)?;
        let call = IRegistry::registerCall {
            publicKey: Bytes::copy_from_slice(&key.to_eip2537()),
            proofOfPossession: Bytes::copy_from_slice(
                &secret
                    .prove_possession_for(&resolvd_consensus::PossessionBinding {
                        chain_id: self.chain_id,
                        registry: self.registry,
                        operator: self.account.ok_or(ChainError::NoAccount)?,
                    })
                    .to_eip2537(),
            ),
            bond,
        };
        Ok((self.send(self.registry, call).await?, index))
    }
}

fn to_u64(v: U256) -> Result<u64, ChainError> {
    u64::try_from(v).map_err(|_| ChainError::Unexpected(format!("{v} does not fit u64")))
}

/// Decodes a revert of one of the contracts' known errors.
pub fn decode_revert(data: &[u8]) -> String {
    if let Ok(e) = IEscrow::IEscrowErrors::abi_decode(data) {
        return format!("{e:?}");
    }
    if let Ok(e) = IRegistry::IRegistryErrors::abi_decode(data) {
        return format!("{e:?}");
    }
    if let Ok(e) = crate::chain::contracts::IAttestor::IAttestorErrors::abi_decode(data) {
        return format!("{e:?}");
    }
    if let Ok(e) = crate::chain::contracts::IProofVerifier::IProofVerifierErrors::abi_decode(data) {
        return format!("{e:?}");
    }
    format!("0x{}", alloy_primitives::hex::encode(data))
}

/// Sends `tx` with [`with_gas_headroom`] and waits for its receipt. A revert,
/// at estimation or mined, is [`ChainError::Reverted`] with its data.
pub async fn send_and_confirm(
    provider: &DynProvider,
    tx: TransactionRequest,
) -> Result<alloy_rpc_types_eth::TransactionReceipt, ChainError> {
    let tx = with_gas_headroom(provider, tx).await?;
    let pending = provider.send_transaction(tx.clone()).await.map_err(|e| revert_or_rpc(&e))?;
    confirm(provider, pending, tx).await
}

/// Waits at most [`RECEIPT_TIMEOUT`] for `pending`'s receipt; a mined revert
/// is [`ChainError::Reverted`] with its data.
async fn confirm(
    provider: &DynProvider,
    pending: alloy_provider::PendingTransactionBuilder<alloy_network::Ethereum>,
    tx: TransactionRequest,
) -> Result<alloy_rpc_types_eth::TransactionReceipt, ChainError> {
    let hash = *pending.tx_hash();
    let receipt = pending
        .with_timeout(Some(RECEIPT_TIMEOUT))
        .get_receipt()
        .await
        .map_err(|e| ChainError::Rpc(format!("no receipt for {hash}: {e}")))?;
    succeeded(provider, receipt, tx).await
}

/// `receipt` if its transaction succeeded, else [`ChainError::Reverted`]
/// with the revert data (see [`mined_revert_data`]) decoded.
async fn succeeded(
    provider: &DynProvider,
    receipt: alloy_rpc_types_eth::TransactionReceipt,
    tx: TransactionRequest,
) -> Result<alloy_rpc_types_eth::TransactionReceipt, ChainError> {
    if receipt.status() {
        return Ok(receipt);
    }
    let data = mined_revert_data(provider, &receipt, tx).await;
    Err(ChainError::Reverted {
        reason: format!(
            "transaction {} (block {:?}) reverted: {}",
            receipt.transaction_hash,
            receipt.block_number,
            decode_revert(&data)
        ),
        data,
    })
}

/// Whether position `position` is set in `word`, the word `position >> 8` of
/// a position bitmap as the escrow stores it (`nonSignerBits`,
/// `missedBits`): bit `p & 7` of byte `p >> 3`, a word being 32 bytes
/// read big-endian.
pub fn position_bit(word: U256, position: usize) -> bool {
    word.bit(8 * (31 - ((position & 255) >> 3)) + (position & 7))
}

/// EIP-7825's cap on one transaction's gas limit (2^24): a limit above it
/// is refused by the pool of every chain that activated it.
pub const MAX_TX_GAS: u64 = 1 << 24;

/// Resolvers slashed per `slashEquivocationUpTo` transaction. The registry
/// measures about 36.4k gas per slashed resolver with the evidence checks of
/// the largest committee (400) included (`contracts/ECONOMICS.md`): 200 take
/// about 9M, whose limit with headroom (11.3M) stays under [`MAX_TX_GAS`].
pub const SLASH_CHUNK: u64 = 200;

/// `tx` with a gas limit of its estimate plus a quarter and 25,000, at most
/// [`MAX_TX_GAS`]; an estimate above that cap is an error (no chain that
/// enforces it would take the transaction).
///
/// An estimate is exact for the state it ran on, but a transaction can be
/// mined after another one of the same block that makes it dearer: a resolve
/// that empties the escrow's token balance makes the next deal's funding write
/// that balance from zero again (~20,000 gas more). Without headroom such a
/// transaction runs out of gas and reverts; unused gas is not charged.
/// A revert at estimation is [`ChainError::Reverted`].
pub async fn with_gas_headroom(
    provider: &DynProvider,
    mut tx: TransactionRequest,
) -> Result<TransactionRequest, ChainError> {
    // At `latest`, not the endpoint's default (anvil estimates on the pending
    // state, others on latest): the same answer from every endpoint.
    let estimate = provider
        .estimate_gas(tx.clone())
        .block(BlockId::latest())
        .await
        .map_err(|e| revert_or_rpc(&e))?;
    tx.gas = Some(gas_limit(estimate)?);
    Ok(tx)
}

/// The gas limit for an estimate: a quarter and 25,000 more, at most
/// [`MAX_TX_GAS`].
fn gas_limit(estimate: u64) -> Result<u64, ChainError> {
    if estimate > MAX_TX_GAS {
        return Err(ChainError::Unexpected(format!(
            "the transaction needs {estimate} gas, over the per-transaction cap {MAX_TX_GAS}"
        )));
    }
    Ok(estimate.saturating_add(estimate / 4).saturating_add(25_000).min(MAX_TX_GAS))
}

/// The revert data of a transaction that was mined and reverted (a receipt
/// carries none): from `debug_traceTransaction` (call tracer) where the RPC
/// offers it, else by re-running `tx` on the state before its block (the
/// same answer unless another transaction of that block changed it first).
/// Empty if neither answers.
pub async fn mined_revert_data(
    provider: &DynProvider,
    receipt: &alloy_rpc_types_eth::TransactionReceipt,
    tx: TransactionRequest,
) -> Bytes {
    let traced: Result<serde_json::Value, _> = provider
        .raw_request(
            "debug_traceTransaction".into(),
            (receipt.transaction_hash, serde_json::json!({ "tracer": "callTracer" })),
        )
        .await;
    if let Some(out) = traced.ok().as_ref().and_then(|t| t["output"].as_str()) {
        if let Ok(data) = alloy_primitives::hex::decode(out) {
            return data.into();
        }
    }
    let Some(parent) = receipt.block_number.and_then(|n| n.checked_sub(1)) else {
        return Bytes::new();
    };
    match provider.call(tx).block(BlockId::number(parent)).await {
        Err(e) => e.as_error_resp().and_then(|p| p.as_revert_data()).unwrap_or_default(),
        Ok(_) => Bytes::new(),
    }
}

/// Whether revert `data` says the deal is no longer disputed (someone else resolved it).
pub fn is_already_resolved(data: &[u8]) -> bool {
    matches!(
        IEscrow::IEscrowErrors::abi_decode(data),
        Ok(IEscrow::IEscrowErrors::WrongState(e)) if e.actual == deal_state::RESOLVED
    )
}

/// Whether revert `data` says the escrow rejects a certificate for a reason
/// that retrying the same certificate cannot change (a wrong signature or
/// signer set, a committee that is not the deal's, fields that do not match,
/// the deadline passed).
pub fn is_certificate_rejection(data: &[u8]) -> bool {
    use IEscrow::IEscrowErrors as E;
    use IRegistry::IRegistryErrors as R;
    matches!(E::abi_decode(data), Ok(E::TooLate(_) | E::CommitmentMismatch(_)))
        || matches!(
            R::abi_decode(data),
            Ok(R::InvalidSignature(_)
                | R::BelowThreshold(_)
                | R::NotAMember(_)
                | R::UnknownEpoch(_)
                | R::StaleEpoch(_)
                | R::IndicesNotAscending(_)
                | R::EmptySignerSet(_))
        )
}

/// Whether revert `data` says every signer was already slashed for the evidence.
pub fn is_already_slashed(data: &[u8]) -> bool {
    matches!(
        IRegistry::IRegistryErrors::abi_decode(data),
        Ok(IRegistry::IRegistryErrors::NoEquivocator(_))
    )
}

/// A broadcast that failed: the error, and whether the transaction may
/// still be in a pool.
#[derive(Debug)]
struct Broadcast {
    error: ChainError,
    maybe_sent: bool,
}

/// Whether a failed `eth_sendRawTransaction` may have left the transaction in
/// a pool: no answer (a timeout or a dropped connection after the request
/// left), or an answer that it is there already ("already known" (geth,
/// reth), "known transaction" (older geth), "already imported" (Nethermind,
/// OpenEthereum), "transaction already exists" (Erigon, Besu's
/// "ALREADY_KNOWN")). A revert, "nonce too low" or "insufficient funds" is
/// a refusal.
fn maybe_sent<E: std::fmt::Display>(e: &alloy_json_rpc::RpcError<E>) -> bool {
    if matches!(e, alloy_json_rpc::RpcError::Transport(_)) {
        return true;
    }
    already_known(&e.to_string())
}

/// Whether an error message says the transaction is already in the pool.
pub fn already_known(message: &str) -> bool {
    let m = message.to_ascii_lowercase().replace('_', " ");
    ["already known", "known transaction", "already imported", "already exists", "alreadyknown"]
        .iter()
        .any(|p| m.contains(p))
}

fn revert_or_rpc<E>(e: &alloy_json_rpc::RpcError<E>) -> ChainError
where
    E: std::fmt::Display,
{
    match e.as_error_resp().and_then(|p| p.as_revert_data()) {
        Some(data) => ChainError::Reverted { reason: decode_revert(&data), data },
        None => rpc(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gas_limits_keep_headroom_and_never_exceed_the_transaction_cap() {
        assert_eq!(gas_limit(100_000).unwrap(), 150_000);
        // 15.1M (the registry's 400-of-400 slash): 18.9M with headroom, capped.
        assert_eq!(gas_limit(15_111_102).unwrap(), MAX_TX_GAS);
        assert_eq!(gas_limit(MAX_TX_GAS).unwrap(), MAX_TX_GAS);
        assert!(gas_limit(MAX_TX_GAS + 1).is_err());
        // A full chunk of the largest committee's slash, with headroom, fits.
        let chunk = 1_900_000 + SLASH_CHUNK * 36_400;
        assert!(chunk + chunk / 4 + 25_000 < MAX_TX_GAS);
    }
}
