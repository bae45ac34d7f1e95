# resolvd developer entry points. `make test` is the one command CI runs.
#
# Tools live in .tools/ (see deploy/toolchain/bootstrap.sh); set CARGO_TARGET_DIR
# to share a warm build across clones (.ci/run does).

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
TOOLS := $(CURDIR)/.tools
export PATH := $(TOOLS)/bin:$(PATH)
export FOUNDRY_SOLC := $(TOOLS)/bin/solc

.PHONY: devnet test deploy-test bench-report tools fmt lint rust-test contracts-test vectors fixtures bench bench-node bench-scale bench-sim fuzz

## devnet: install what is missing, build, run the local network demo
## (DEVNET_ARGS="--nodes 5 --keep" for options; see `resolvd-devnet --help`).
## --all-features: the demo's byzantine node needs `resolvd` with fault injection.
DEVNET_ARGS ?=
devnet: tools
	cd contracts && forge build
	cargo build --workspace --locked --all-features
	"$${CARGO_TARGET_DIR:-target}/debug/resolvd-devnet" $(DEVNET_ARGS)

## test: install what is missing, then every check and every test.
test: tools lint contracts-test rust-test deploy-test

## tools: Foundry + solc (npm), libclang-dev (apt), cargo-nextest.
tools:
	deploy/toolchain/bootstrap.sh

## lint and rust-test run twice: as operators build it (no cargo features) and
## with the test features (fault injection, which the devnet tests need).
lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --locked -- -D warnings
	cargo clippy --workspace --all-targets --all-features --locked -- -D warnings
	cd contracts && forge fmt --check
	python3 node/check-layers.py
	node/engine/check-deps.sh

rust-test:
	cargo nextest run --workspace --locked --no-fail-fast --lib --bins
	cargo nextest run --workspace --locked --no-fail-fast --all-features

contracts-test:
	cd contracts && forge test
	cd contracts && FOUNDRY_PROFILE=ci forge test --match-path 'test/invariant/*'
	contracts/check-layout.sh

## deploy-test: offline checks of deploy/ (Kustomize + Kubernetes schemas, node.toml
## keys, flags and env vars, compose consistency, systemd-analyze verify).
deploy-test:
	cargo build --workspace --locked
	cp "$${CARGO_TARGET_DIR:-target}/debug/resolvd" "$${CARGO_TARGET_DIR:-target}/debug/resolvd-operator"
	cargo build --workspace --locked --all-features
	RESOLVD_OPERATOR_BIN="$${CARGO_TARGET_DIR:-target}/debug/resolvd-operator" deploy/validate.sh

## fmt: format Rust and Solidity.
fmt:
	cargo fmt --all
	cd contracts && forge fmt

## vectors: regenerate the generated golden vectors (review the diff!).
vectors:
	cargo test -p resolvd-proto --test it -- --ignored write_golden_vectors
	cargo test -p resolvd-consensus --test it -- --ignored write_bls_vectors
	cargo test -p resolvd-consensus --test it -- --ignored write_escrow_vectors

## fixtures: regenerate contract bytecode the Rust tests run (review the diff!).
fixtures:
	cd contracts && forge inspect FixtureToken deployedBytecode | sed 's/^0x//' > ../replay/tests/fixtures/fixture_token.hex
	cd contracts && forge inspect FixtureToken bytecode | sed 's/^0x//' > ../replay/tests/fixtures/fixture_token_init.hex

## bench: criterion benchmarks and the forge gas snapshot (contracts/snapshots/).
bench:
	cargo bench -p resolvd-consensus --bench bls
	cargo bench -p resolvd-replay --bench replay
	cargo bench -p resolvd-node --bench transport
	cd contracts && forge test --match-contract BLSGas

## bench-node: dispute latency (p50/p99) and RSS on a loopback devnet, release build
## (RESOLVD_BENCH_DISPUTES, default 50; RESOLVD_BENCH_NODES, default 4).
bench-node: tools
	cd contracts && forge build
	cargo nextest run --workspace --release --locked --all-features --run-ignored only \
	  -E 'test(dispute_latency_and_memory)' --no-capture

## bench-scale: for each N in SCALE_NODES and each p2p.dissemination in SCALE_MODES, N nodes
## each in its own network namespace over emulated WAN links (50 ms ± 10 ms one way, 1 % loss,
## 100 Mbit/s; needs root), SCALE_DISPUTES disputes and two partitions, release build; writes
## $CARGO_TARGET_DIR/bench-report/scale-<N>-<mode>.{json,log} and the scale section of BENCHMARKS.md.
SCALE_NODES ?= 16 32 64
SCALE_MODES ?= flood aggregators
SCALE_DISPUTES ?= 10
bench-scale: tools
	cd contracts && forge build
	SCALE_NODES="$(SCALE_NODES)" SCALE_MODES="$(SCALE_MODES)" SCALE_DISPUTES=$(SCALE_DISPUTES) ONLY_SCALE=1 deploy/bench-report.sh

## bench-sim: the simulator's table (Markdown, on stdout and into BENCHMARKS.md) and plot
## (node/sim/bench.svg): N = 16 … 1,024 real engines in one process under a modelled network
## and CPU, own partials flooded and sent to aggregators, honest, with 1/3 withholding, 1/3
## sending garbage, 1/3 withholding placed first by a ground deal id, and 1/3 withholding
## placed first in the dispute's order (node/sim/README.md; release build; a flooded
## N = 1,024 takes minutes per run).
## Then, through aggregators at N = 64 … 1,024: 1/3 equivocating, commit-reveal honest and with
## 1/3 forging commitments (N <= 256: every engine verifies every commitment for real, N² in
## all), and half the committee cut off for 3 s (its own table).
## Last, N = 64 as bench-scale runs it (D = 4, own messages to the mesh peers), on a CPU per node
## and on 2 shared cores, with and without a per-copy transport cost (29 and 47 µs as the
## transport bench measures it, 430 µs fitted to the real runs' CPU), and with own messages to
## every member (gossipsub's flood publishing) (its own table).
SIM_SIZES ?= 16,32,64,256,1024
SIM_FAULT_SIZES ?= 64,256,1024
SIM_FAULT_MIXES ?= equivocate=1/3;none+commit-reveal=500+up-to=256;forge=1/3+commit-reveal=500+up-to=256;none+partition=1/2@0-3000
SIM_HARNESS_MIXES ?= none;none+transport-us=29;none+transport-us=47;none+transport-us=430;none+cores=2;none+cores=2+transport-us=430;none+cores=2+transport-us=430+publish=all;none+cores=2+cpu-scale=7;none+cores=2+transport-us=300;none+cores=2+transport-us=800
SIM_ARGS ?=
bench-sim:
	@cargo build --release --locked -p resolvd-sim
	@"$${CARGO_TARGET_DIR:-target}/release/resolvd-sim" bench --sizes $(SIM_SIZES) \
	  --write BENCHMARKS.md --plot node/sim/bench.svg $(SIM_ARGS)
	@"$${CARGO_TARGET_DIR:-target}/release/resolvd-sim" bench --sizes $(SIM_FAULT_SIZES) \
	  --each-aggregators 8 --mixes "$(SIM_FAULT_MIXES)" --write BENCHMARKS.md --table sim-faults $(SIM_ARGS)
	@"$${CARGO_TARGET_DIR:-target}/release/resolvd-sim" bench --sizes 64 --mesh 4 \
	  --each-aggregators 8 --mixes "$(SIM_HARNESS_MIXES)" --write BENCHMARKS.md --table sim-harness $(SIM_ARGS)

## bench-report: regenerate BENCHMARKS.md (criterion, forge gas, devnet latency for N = 4, 7, 10,
## and the scale table of bench-scale).
bench-report: tools
	cd contracts && forge build
	deploy/bench-report.sh

## fuzz: run every proto fuzz target for FUZZ_SECONDS (default 60) each.
FUZZ_SECONDS ?= 60
fuzz:
	cd proto/fuzz && ./seed_corpus.py && for t in $$(cargo fuzz list); do \
	  RUSTC_BOOTSTRAP=1 cargo fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS) -max_len=4096; done
