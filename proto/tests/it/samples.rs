//! Sample values the golden vectors are generated from.

use alloy_primitives::{address, b256, bytes, Bytes, B256, U256};
use resolvd_proto::{
    content_hash, AttachmentKind, AttachmentV1, BackendVersionPolicy, Canonical, Checks,
    ContentType, DeliveryV1, EvmAnchorV1, EvmCallPlanV1, EvmSpecId, NoncePolicy,
    PredicateCommitmentV1, PrestateAnchorV1, ReexecRequestV1, ReexecVerdict, ReplayRecordV1,
    ResultEquals, SlotBounds, SlotEquals, SpecV1, VerdictDomain, VerdictEnvelopeV1,
};
use resolvd_proto::{AccountStateV1, AccountWitnessV1, EvmWitnessV1, StorageWitnessV1};

pub(crate) const DEAL_ID: B256 =
    b256!("0x5eed000000000000000000000000000000000000000000000000000000000001");

pub(crate) fn backend_id() -> B256 {
    content_hash("backend-id", b"evm-revm")
}

pub(crate) fn backend_version() -> B256 {
    content_hash("backend-id", b"evm-revm/sample-version")
}

pub(crate) fn evm_anchor() -> EvmAnchorV1 {
    EvmAnchorV1 {
        chain_id: 1,
        block_number: 21_000_000,
        block_hash: b256!("0x1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809"),
        state_root: b256!("0xd7f8974fb5ac78d9ac099b9ad5018bedc2ce0a72dad1827a1709da30580f0544"),
        timestamp: 1_730_000_000,
        base_fee: 7_000_000_000,
        gas_limit: 30_000_000,
        coinbase: address!("0x95222290dd7278aa3ddd389cc1e1d165cc4bafe5"),
        prevrandao: b256!("0x0101010101010101010101010101010101010101010101010101010101010101"),
        spec_id: EvmSpecId::Cancun,
        excess_blob_gas: Some(0),
        header: None,
    }
}

pub(crate) fn evm_anchor_with_header() -> EvmAnchorV1 {
    EvmAnchorV1 {
        spec_id: EvmSpecId::Prague,
        excess_blob_gas: None,
        header: Some(bytes!("f90200a0")),
        ..evm_anchor()
    }
}

pub(crate) fn prestate_anchor() -> PrestateAnchorV1 {
    PrestateAnchorV1 { backend_id: backend_id(), body: evm_anchor().to_canonical_bytes().into() }
}

pub(crate) fn call_plan() -> EvmCallPlanV1 {
    EvmCallPlanV1 {
        chain_id: 1,
        caller: address!("0x00000000000000000000000000000000000b0b00"),
        target: address!("0xe592427a0aece92de3edee1f18e0157c05861564"),
        calldata: bytes!("a9059cbb000000000000000000000000000000000000000000000000000000000000beef0000000000000000000000000000000000000000000000000de0b6b3a7640000"),
        value: U256::ZERO,
        gas_limit: 500_000,
        nonce_policy: NoncePolicy::Prestate,
    }
}

pub(crate) fn call_plan_with_value() -> EvmCallPlanV1 {
    EvmCallPlanV1 {
        value: U256::from(10u64).pow(U256::from(18u64)),
        calldata: Bytes::new(),
        nonce_policy: NoncePolicy::Unchecked,
        ..call_plan()
    }
}

pub(crate) fn predicates() -> Vec<(&'static str, PredicateCommitmentV1)> {
    let token = address!("0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48");
    let slot = b256!("0x0000000000000000000000000000000000000000000000000000000000000009");
    vec![
        (
            "result-equals",
            PredicateCommitmentV1::ResultEquals(ResultEquals {
                expected_result_hash: alloy_primitives::keccak256([0u8; 32]),
            }),
        ),
        (
            "poststate-equals",
            PredicateCommitmentV1::PoststateEquals(Checks {
                checks: vec![
                    SlotEquals { address: token, slot, expected: U256::from(1_000_000u64) },
                    SlotEquals { address: token, slot: B256::ZERO, expected: U256::ZERO },
                ],
            }),
        ),
        (
            "poststate-bounded",
            PredicateCommitmentV1::PoststateBounded(Checks {
                checks: vec![SlotBounds {
                    address: token,
                    slot,
                    min: U256::from(990_000u64),
                    max: U256::MAX,
                }],
            }),
        ),
        (
            "poststate-delta",
            PredicateCommitmentV1::PoststateDelta(Checks {
                checks: vec![SlotBounds {
                    address: token,
                    slot,
                    min: U256::from(1u64),
                    max: U256::from(1u64),
                }],
            }),
        ),
    ]
}

pub(crate) fn spec(predicate: PredicateCommitmentV1) -> SpecV1 {
    SpecV1 {
        backend_id: backend_id(),
        backend_version_policy: BackendVersionPolicy::Exact,
        accepted_backend_version_hash: backend_version(),
        prestate_anchor: prestate_anchor(),
        execution_schema_hash: EvmCallPlanV1::schema_hash(),
        predicate,
        expiry: 1_800_000_000,
    }
}

pub(crate) fn delivery() -> DeliveryV1 {
    DeliveryV1 {
        execution_schema_hash: EvmCallPlanV1::schema_hash(),
        execution_plan: call_plan().to_canonical_bytes().into(),
        claimed_result: bytes!("0000000000000000000000000000000000000000000000000000000000000001"),
        attachments: vec![
            AttachmentV1 {
                kind: AttachmentKind::ReplayWitness,
                hash: b256!("0x77a1e55000000000000000000000000000000000000000000000000000000001"),
                retrieval_hint: Some(
                    "ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi".into(),
                ),
            },
            AttachmentV1 {
                kind: AttachmentKind::Supplementary,
                hash: content_hash("evm-return-data", b"notes"),
                retrieval_hint: None,
            },
        ],
    }
}

pub(crate) fn delivery_bare() -> DeliveryV1 {
    DeliveryV1 { claimed_result: Bytes::new(), attachments: vec![], ..delivery() }
}

pub(crate) fn request() -> ReexecRequestV1 {
    let spec = spec(predicates().remove(3).1);
    let delivery = delivery();
    let anchor = prestate_anchor();
    ReexecRequestV1 {
        deal_id: DEAL_ID,
        spec: spec.to_canonical_bytes().into(),
        spec_hash: spec.content_hash(),
        delivery: delivery.to_canonical_bytes().into(),
        delivery_hash: delivery.content_hash(),
        prestate_anchor: anchor.to_canonical_bytes().into(),
        prestate_anchor_hash: anchor.content_hash(),
        witness: Some(bytes!("0102030405")),
    }
}

pub(crate) fn record(outcome: ReexecVerdict) -> ReplayRecordV1 {
    let req = request();
    ReplayRecordV1 {
        backend_id: backend_id(),
        backend_version_hash: backend_version(),
        spec_hash: req.spec_hash,
        delivery_hash: req.delivery_hash,
        prestate_anchor_hash: req.prestate_anchor_hash,
        prestate_root: evm_anchor().state_root,
        outcome,
        result_hash: resolvd_proto::evm_result_hash(&delivery().claimed_result),
    }
}

pub(crate) fn envelope(outcome: ReexecVerdict) -> VerdictEnvelopeV1 {
    VerdictEnvelopeV1::new(DEAL_ID, record(outcome))
}

pub(crate) fn domains() -> Vec<VerdictDomain> {
    vec![
        VerdictDomain {
            name: "resolvd".into(),
            version: "1".into(),
            chain_id: 31337,
            verifying_contract: address!("0x5FbDB2315678afecb367f032d93F642f64180aa3"),
        },
        VerdictDomain {
            name: "resolvd".into(),
            version: "1".into(),
            chain_id: 1,
            verifying_contract: address!("0x00000000000000000000000000000000e5c40001"),
        },
    ]
}

pub(crate) fn witness() -> EvmWitnessV1 {
    let mut w = EvmWitnessV1 {
        header: bytes!("f90211a0"),
        ancestors: vec![bytes!("f90211a1"), bytes!("f90211a2")],
        accounts: vec![
            AccountWitnessV1 {
                address: address!("0xe592427a0aece92de3edee1f18e0157c05861564"),
                proof: vec![bytes!("f8718080"), bytes!("f851a0")],
                account: Some(AccountStateV1 {
                    nonce: 1,
                    balance: U256::ZERO,
                    storage_root: b256!(
                        "0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421"
                    ),
                    code_hash: alloy_primitives::keccak256([0x60, 0x00]),
                }),
                storage: vec![
                    StorageWitnessV1 {
                        slot: B256::ZERO,
                        value: U256::from(7u64),
                        proof: vec![bytes!("e2a0")],
                    },
                    StorageWitnessV1 {
                        slot: B256::with_last_byte(9),
                        value: U256::ZERO,
                        proof: vec![bytes!("80")],
                    },
                ],
            },
            AccountWitnessV1 {
                address: address!("0x00000000000000000000000000000000000b0b00"),
                proof: vec![bytes!("f8718080")],
                account: None,
                storage: vec![],
            },
        ],
        codes: vec![bytes!("6000"), bytes!("60016000")],
    };
    w.canonicalize();
    w
}
