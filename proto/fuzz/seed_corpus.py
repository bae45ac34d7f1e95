#!/usr/bin/env python3
"""Seeds each canonical fuzz target's corpus with the golden vectors' bytes."""
import json, os, pathlib

here = pathlib.Path(__file__).resolve().parent
vectors = here.parent / "vectors"
target_of = {
    "SpecV1": "spec", "DeliveryV1": "delivery", "PrestateAnchorV1": "prestate_anchor",
    "EvmAnchorV1": "evm_anchor", "EvmCallPlanV1": "evm_call_plan",
    "PredicateCommitmentV1": "predicate", "ReexecRequestV1": "reexec_request",
    "ReplayRecordV1": "replay_record", "VerdictEnvelopeV1": "verdict_envelope",
    "EvmWitnessV1": "evm_witness",
}
count = 0
for name, key in (("content.json", "canonical"), ("negative.json", "bytes")):
    for v in json.loads((vectors / name).read_text())["vectors"]:
        out = here / "corpus" / target_of[v["type"]]
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name[:-5]}-{v['name']}").write_bytes(bytes.fromhex(v[key][2:]))
        count += 1
print(f"seeded {count} corpus files")
