//! A small chain: an EOA `caller` and a `credit(slot, amount)` contract.

use alloy_primitives::{address, bytes, keccak256, Address, Bytes, B256, U256};
use resolvd_proto::{
    AttachmentKind, AttachmentV1, BackendVersionPolicy, Canonical, ContentType, DeliveryV1,
    EvmCallPlanV1, EvmSpecId, EvmWitnessV1, NoncePolicy, PredicateCommitmentV1, PrestateAnchorV1,
    ReexecRequestV1, SpecV1,
};
use resolvd_replay::{
    testkit::{TestAccount, TestChain},
    BACKEND_ID, BACKEND_VERSION_HASH,
};

pub(crate) const CALLER: Address = address!("0x00000000000000000000000000000000000ca11e");
pub(crate) const TARGET: Address = address!("0x00000000000000000000000000000000c0ffee00");
pub(crate) const BLOCKHASH_CONTRACT: Address =
    address!("0x00000000000000000000000000000000b10c4a54");
pub(crate) const SPEC: EvmSpecId = EvmSpecId::Prague;

/// `credit(slot, amount)`: reverts on amount 0, else `storage[slot] += amount`
/// and returns the new value. Calldata: slot (32 bytes) || amount (32 bytes).
pub(crate) const CREDIT_CODE: Bytes =
    bytes!("6020358015601a576000358054820180915560005260206000f35b600080fd");

/// Returns `BLOCKHASH(NUMBER - 1)`.
pub(crate) const BLOCKHASH_CODE: Bytes = bytes!("43600190034060005260206000f3");

pub(crate) const TOKEN: Address = address!("0x00000000000000000000000000000000000070c0");
pub(crate) const RECIPIENT: Address = address!("0x0000000000000000000000000000000000000bee");

/// Runtime bytecode of an OpenZeppelin ERC-20 (contracts/test/fixtures/FixtureToken.sol).
pub(crate) fn token_code() -> Bytes {
    alloy_primitives::hex::decode(include_str!("../fixtures/fixture_token.hex").trim())
        .unwrap()
        .into()
}

/// `_balances[holder]`: `keccak256(abi.encode(holder, 0))`.
pub(crate) fn balance_slot(holder: Address) -> B256 {
    let mut preimage = [0u8; 64];
    preimage[12..32].copy_from_slice(holder.as_slice());
    keccak256(preimage)
}

/// Calldata of `transfer(to, amount)`.
pub(crate) fn transfer_calldata(to: Address, amount: U256) -> Bytes {
    let mut data = vec![0xa9, 0x05, 0x9c, 0xbb];
    data.extend_from_slice(&B256::left_padding_from(to.as_slice()).0);
    data.extend_from_slice(&B256::from(amount).0);
    data.into()
}

/// `POSTSTATE_DELTA`: `_balances[holder]` of `token` grows by exactly `amount`.
pub(crate) fn credited(token: Address, holder: Address, amount: u64) -> PredicateCommitmentV1 {
    PredicateCommitmentV1::PoststateDelta(resolvd_proto::Checks {
        checks: vec![resolvd_proto::SlotBounds {
            address: token,
            slot: balance_slot(holder),
            min: U256::from(amount),
            max: U256::from(amount),
        }],
    })
}

/// `transfer(RECIPIENT, 250)` of a real ERC-20 from CALLER (balance 1000).
pub(crate) fn erc20_case() -> Case {
    let mut chain = chain();
    chain.accounts.insert(
        TOKEN,
        TestAccount {
            code: token_code(),
            storage: [(balance_slot(CALLER), U256::from(1000u64))].into(),
            ..Default::default()
        },
    );
    let witness = chain.witness(
        SPEC,
        &[CALLER, TOKEN, chain.coinbase],
        &[(TOKEN, balance_slot(CALLER)), (TOKEN, balance_slot(RECIPIENT))],
    );
    Case {
        chain,
        plan: EvmCallPlanV1 {
            target: TOKEN,
            calldata: transfer_calldata(RECIPIENT, U256::from(250u64)),
            ..credit(0, 0)
        },
        claimed: word(1),
        predicate: credited(TOKEN, RECIPIENT, 250),
        witness,
        backend_id: *BACKEND_ID,
        accepted_version: *BACKEND_VERSION_HASH,
    }
}

pub(crate) fn slot(n: u8) -> B256 {
    B256::with_last_byte(n)
}

pub(crate) fn word(v: u64) -> Bytes {
    B256::from(U256::from(v)).to_vec().into()
}

pub(crate) fn chain() -> TestChain {
    let mut chain = TestChain { ancestors: 1, ..TestChain::default() };
    chain.accounts.insert(
        CALLER,
        TestAccount {
            nonce: 3,
            balance: U256::from(10u64).pow(U256::from(19u64)),
            ..Default::default()
        },
    );
    chain.accounts.insert(
        TARGET,
        TestAccount {
            code: CREDIT_CODE,
            storage: [(slot(1), U256::from(10u64)), (slot(2), U256::from(1u64))].into(),
            ..Default::default()
        },
    );
    chain
        .accounts
        .insert(BLOCKHASH_CONTRACT, TestAccount { code: BLOCKHASH_CODE, ..Default::default() });
    chain
}

pub(crate) fn credit(slot_n: u8, amount: u64) -> EvmCallPlanV1 {
    let mut data = slot(slot_n).to_vec();
    data.extend_from_slice(&B256::from(U256::from(amount)).0);
    EvmCallPlanV1 {
        chain_id: 1,
        caller: CALLER,
        target: TARGET,
        calldata: data.into(),
        value: U256::ZERO,
        gas_limit: 100_000,
        nonce_policy: NoncePolicy::Prestate,
    }
}

/// Everything a test changes, then turns into a request.
#[derive(Clone, Debug)]
pub(crate) struct Case {
    pub chain: TestChain,
    pub plan: EvmCallPlanV1,
    pub claimed: Bytes,
    pub predicate: PredicateCommitmentV1,
    pub witness: EvmWitnessV1,
    pub backend_id: B256,
    pub accepted_version: B256,
}

impl Case {
    /// The honest credit of 5 to slot 1 (10 -> 15), with a default witness.
    pub(crate) fn honest(predicate: PredicateCommitmentV1) -> Self {
        let chain = chain();
        let witness = chain.witness(
            SPEC,
            &[CALLER, TARGET, chain.coinbase],
            &[(TARGET, slot(1)), (TARGET, slot(2)), (TARGET, slot(3))],
        );
        Self {
            chain,
            plan: credit(1, 5),
            claimed: word(15),
            predicate,
            witness,
            backend_id: *BACKEND_ID,
            accepted_version: *BACKEND_VERSION_HASH,
        }
    }

    pub(crate) fn request(&self) -> ReexecRequestV1 {
        Request {
            anchor: self.chain.anchor(SPEC),
            plan: &self.plan,
            claimed: &self.claimed,
            predicate: &self.predicate,
            witness: &self.witness,
            backend_id: self.backend_id,
            accepted_version: self.accepted_version,
        }
        .build()
    }
}

/// The committed inputs of one replay, before encoding.
pub(crate) struct Request<'a> {
    pub anchor: resolvd_proto::EvmAnchorV1,
    pub plan: &'a EvmCallPlanV1,
    pub claimed: &'a Bytes,
    pub predicate: &'a PredicateCommitmentV1,
    pub witness: &'a EvmWitnessV1,
    pub backend_id: B256,
    pub accepted_version: B256,
}

impl Request<'_> {
    /// Spec, delivery and anchor documents, hashed, in a request.
    pub(crate) fn build(&self) -> ReexecRequestV1 {
        let anchor = PrestateAnchorV1 {
            backend_id: self.backend_id,
            body: self.anchor.to_canonical_bytes().into(),
        };
        let spec = SpecV1 {
            backend_id: self.backend_id,
            backend_version_policy: BackendVersionPolicy::Exact,
            accepted_backend_version_hash: self.accepted_version,
            prestate_anchor: anchor.clone(),
            execution_schema_hash: EvmCallPlanV1::schema_hash(),
            predicate: self.predicate.clone(),
            expiry: 2_000_000_000,
        };
        let delivery = DeliveryV1 {
            execution_schema_hash: EvmCallPlanV1::schema_hash(),
            execution_plan: self.plan.to_canonical_bytes().into(),
            claimed_result: self.claimed.clone(),
            attachments: vec![AttachmentV1 {
                kind: AttachmentKind::ReplayWitness,
                hash: self.witness.content_hash(),
                retrieval_hint: None,
            }],
        };
        ReexecRequestV1 {
            deal_id: keccak256("deal"),
            spec: spec.to_canonical_bytes().into(),
            spec_hash: spec.content_hash(),
            delivery: delivery.to_canonical_bytes().into(),
            delivery_hash: delivery.content_hash(),
            prestate_anchor: anchor.to_canonical_bytes().into(),
            prestate_anchor_hash: anchor.content_hash(),
            witness: Some(self.witness.to_canonical_bytes().into()),
        }
    }
}
