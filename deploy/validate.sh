#!/usr/bin/env bash
# Offline checks of the deployment artefacts. No Docker engine or cluster runs
# here, so this validates what can be validated without them:
#   1. Kustomize renders the base and the example overlay, and the output is
#      valid Kubernetes 1.31 (kubernetes-validate --strict: unknown fields fail);
#   2. every node.toml (example, base, overlay, the one rendered into the
#      ConfigMap) parses against resolvd's schema (unknown keys are errors) and
#      the complete ones pass `resolvd run`'s checks;
#   3. every flag the StatefulSet, compose file and systemd unit pass to
#      resolvd (resolvd-devnet for compose's setup job) exists (`--help`), and
#      every RESOLVD_* variable they set is one resolvd reads;
#   4. the compose file parses, and its services, dependencies and volumes
#      refer to each other consistently;
#   5. the operator build (RESOLVD_OPERATOR_BIN) has no fault injection and no devnet;
#   6. the systemd unit passes `systemd-analyze verify`;
#   7. the Grafana dashboard, its provisioning and the Prometheus config and alert
#      rules have the expected structure (promtool too when it is installed), and
#      every metric name a dashboard query or an alert uses is on a running
#      node's /metrics: a devnet (anvil + 4 nodes, the demo's disputes, slashing
#      and content exchange, so that every metric family has samples) is
#      started, scraped and stopped. Names in deploy/grafana/pending-metrics.txt
#      are warnings. RESOLVD_CONTRACTS: the Foundry project (default contracts/,
#      built with forge when it has no out/).
# Needs the resolvd binary (RESOLVD_BIN, default $CARGO_TARGET_DIR/debug/resolvd),
# built with the fault-injection feature for step 7 (the demo's byzantine node),
# and resolvd-devnet (RESOLVD_DEVNET_BIN, default next to RESOLVD_BIN).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools=${RESOLVD_TOOLS:-$root/.tools}
resolvd=${RESOLVD_BIN:-${CARGO_TARGET_DIR:-$root/target}/debug/resolvd}
[ -x "$resolvd" ] || { echo "validate: $resolvd not built (cargo build --workspace)"; exit 1; }
devnet=${RESOLVD_DEVNET_BIN:-$(dirname "$resolvd")/resolvd-devnet}
[ -x "$devnet" ] || { echo "validate: $devnet not built (cargo build --workspace)"; exit 1; }
# PyYAML comes with kubernetes-validate in the bootstrap's venv.
python="$tools/venv/bin/python"
command -v kubectl >/dev/null || { echo "validate: kubectl (with built-in Kustomize) is required"; exit 1; }
tmp=$(mktemp -d)
devnet_pid=
# Stops the devnet of step 7 (its own process group: resolvd-devnet, anvil and
# the nodes), whatever way the script ends.
cleanup() {
  if [ -n "$devnet_pid" ]; then
    kill -INT -- "-$devnet_pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 -- "-$devnet_pid" 2>/dev/null || break
      sleep 0.2
    done
    kill -KILL -- "-$devnet_pid" 2>/dev/null || true
    wait "$devnet_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
say() { printf 'deploy: %s\n' "$*"; }
cd "$root"

# 1. Kustomize + Kubernetes schemas.
kubectl kustomize deploy/k8s/base >"$tmp/base.yaml"
kubectl kustomize deploy/k8s/overlays/example >"$tmp/example.yaml"
"$tools/venv/bin/kubernetes-validate" --strict --quiet -k 1.31.0 "$tmp/base.yaml" "$tmp/example.yaml"
say "kustomize base and example overlay render and validate (Kubernetes 1.31, strict)"

# 2. node.toml files against the schema.
"$python" - "$tmp/example.yaml" "$tmp/rendered-node.toml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
cms = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("resolvd-config")]
assert len(cms) == 1, "one resolvd-config ConfigMap"
open(sys.argv[2], "w").write(cms[0]["data"]["node.toml"])
sts = [d for d in docs if d["kind"] == "StatefulSet"][0]
vols = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
assert vols["config"]["configMap"]["name"] == cms[0]["metadata"]["name"], "StatefulSet mounts the generated ConfigMap"
PY
for f in deploy/node.example.toml deploy/k8s/overlays/example/node.toml "$tmp/rendered-node.toml"; do
  "$resolvd" run --config "$f" --print-config >/dev/null
done
# The base is a template without an escrow: schema only.
"$resolvd" run --config deploy/k8s/base/node.toml --escrow 0x0000000000000000000000000000000000000001 --print-config >/dev/null
say "node.toml files parse and pass resolvd's checks"

# 3. Flags and environment variables.
"$resolvd" run --help >"$tmp/run.help"
"$devnet" --help >"$tmp/devnet.help"
"$python" - "$tmp" <<'PY'
import os, re, sys, yaml
tmp = sys.argv[1]
run_help, devnet_help = open(f"{tmp}/run.help").read(), open(f"{tmp}/devnet.help").read()
global_env = {"RUST_LOG", "RESOLVD_LOG_FORMAT", "POD_NAME"}
def flags(args):
    return [a.split("=")[0] for a in args if a.startswith("--")]
def check(args, help_text, where):
    for f in flags(args):
        assert re.search(rf"(^|\s){re.escape(f)}[\s=,<]", help_text, re.M), f"{where}: resolvd has no flag {f}"
def check_env(names, where):
    for n in names:
        if n in global_env:
            continue
        assert f"env: {n}" in run_help or f"env: {n}" in devnet_help, f"{where}: resolvd reads no {n}"
docs = [d for d in yaml.safe_load_all(open(f"{tmp}/example.yaml")) if d]
sts = [d for d in docs if d["kind"] == "StatefulSet"][0]
c = sts["spec"]["template"]["spec"]["containers"][0]
assert c["args"][0] == "run"
check(c["args"][1:], run_help, "StatefulSet")
check_env([e["name"] for e in c.get("env", [])], "StatefulSet")
for probe in ("readinessProbe", "livenessProbe"):
    assert c[probe]["httpGet"]["path"] == "/health", probe
compose = yaml.safe_load(open("deploy/docker/docker-compose.yml"))
services, volumes = compose["services"], set(compose.get("volumes", {}))
assert {"anvil", "setup", "node0", "node1", "node2", "node3"} <= set(services)
for name, svc in services.items():
    for dep in svc.get("depends_on", {}):
        assert dep in services, f"compose {name}: depends on unknown {dep}"
    for v in svc.get("volumes", []):
        src = v.split(":")[0]
        if src.startswith((".", "/")):
            # A bind mount: relative to the compose file, and in the repository.
            assert src.startswith("../"), f"compose {name}: bind mount {src} outside deploy/"
            assert os.path.exists(os.path.join("deploy/docker", src)), f"compose {name}: {src} does not exist"
        else:
            assert src in volumes, f"compose {name}: undeclared volume {src}"
    if svc.get("image", "").startswith("resolvd:"):
        check_env(svc.get("environment", {}), f"compose {name}")
    cmd = svc.get("command", [])
    if name == "setup":
        assert svc.get("entrypoint") == ["resolvd-devnet"], "compose setup: runs resolvd-devnet"
        assert "--setup-only" in cmd, "compose setup: --setup-only"
        check(cmd, devnet_help, "compose setup")
    elif name.startswith("node"):
        assert cmd[0] == "run"
        check(cmd[1:], run_help, f"compose {name}")
unit = open("deploy/systemd/resolvd.service").read()
exec_start = re.search(r"^ExecStart=(\S+) (.*)$", unit, re.M).group(2).split()
assert exec_start[0] == "run"
check(exec_start[1:], run_help, "systemd")
check_env(re.findall(r"^Environment=([A-Z_]+)=", unit, re.M), "systemd")
PY
say "flags and environment variables used by the manifests, compose and systemd exist"
say "compose file parses; services, dependencies and volumes are consistent"

# 5. The operator's build (no cargo features) has no fault injection and no devnet.
if [ -n "${RESOLVD_OPERATOR_BIN:-}" ]; then
  printf '[chain]\nescrow = "0x0000000000000000000000000000000000000001"\n[fault]\ncrash_after_persist = true\n' >"$tmp/fault.toml"
  if out=$("$RESOLVD_OPERATOR_BIN" run --config "$tmp/fault.toml" --print-config 2>&1); then
    echo "validate: the operator build accepted a [fault] section"; exit 1
  fi
  grep -q "built without fault injection" <<<"$out" || { echo "validate: unexpected error: $out"; exit 1; }
  if "$RESOLVD_OPERATOR_BIN" devnet --help >/dev/null 2>&1; then
    echo "validate: the operator build has a devnet command"; exit 1
  fi
  say "operator build refuses [fault] and has no devnet command"
fi

# 6. systemd unit (ExecStart pointed at the built binary, which must exist).
if command -v systemd-analyze >/dev/null; then
  sed "s|/usr/local/bin/resolvd|$resolvd|" deploy/systemd/resolvd.service >"$tmp/resolvd.service"
  out=$(systemd-analyze verify "$tmp/resolvd.service" 2>&1 || true)
  # Only problems with this unit count (the host's other units are not ours).
  if grep -F "$tmp/resolvd.service" <<<"$out" | grep -v "Unknown section 'Unit'" | grep -q .; then
    echo "$out"
    exit 1
  fi
  say "systemd unit verifies"
else
  say "systemd-analyze not available: unit not verified"
fi

# 7. Dashboards and alert rules.
"$python" deploy/check-observability.py selftest
"$python" deploy/check-observability.py static
promtool=${PROMTOOL:-$(command -v promtool || true)}
if [ -n "$promtool" ]; then
  "$promtool" check config deploy/prometheus/prometheus.yml >/dev/null
  "$promtool" check rules deploy/prometheus/rules/*.yml >/dev/null
  say "promtool: prometheus.yml and the alert rules check"
else
  say "promtool not available: alert rules checked for structure only"
fi
say "dashboard, provisioning, prometheus.yml and alert rules are consistent"
# The metric names against running nodes.
contracts=${RESOLVD_CONTRACTS:-$root/contracts}
if [ ! -d "$contracts/out" ]; then
  (cd "$contracts" && FOUNDRY_SOLC="$tools/bin/solc" "$tools/bin/forge" build >/dev/null)
fi
printf '[chain]\nescrow = "0x0000000000000000000000000000000000000001"\n[fault]\nreplay_delay_ms = 1\n' >"$tmp/fault-devnet.toml"
"$resolvd" run --config "$tmp/fault-devnet.toml" --print-config >/dev/null 2>&1 ||
  { echo "validate: $resolvd has no fault injection, which the demo's byzantine node needs (build with --all-features)"; exit 1; }
mkdir "$tmp/devnet"
anvil=()
[ -x "$tools/bin/anvil" ] && anvil=(--anvil "$tools/bin/anvil")
# setsid: a process group of its own, so cleanup() stops the nodes and anvil too.
setsid "$devnet" --resolvd "$resolvd" --nodes 4 --keep --base-dir "$tmp/devnet" --contracts "$contracts" "${anvil[@]}" \
  >"$tmp/devnet.out" 2>"$tmp/devnet.err" </dev/null &
devnet_pid=$!
deadline=$((SECONDS + ${RESOLVD_DEVNET_TIMEOUT:-300}))
until grep -qs "keeps running" "$tmp/devnet.out"; do
  if ! kill -0 "$devnet_pid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
    echo "validate: the devnet did not come up:"
    tail -n 30 "$tmp/devnet.out" "$tmp/devnet.err"
    exit 1
  fi
  sleep 1
done
mapfile -t scrape < <(grep -o 'metrics http://[^ ]*' "$tmp/devnet.out" | cut -d' ' -f2)
[ "${#scrape[@]}" -eq 4 ] || { echo "validate: expected 4 metrics URLs:"; cat "$tmp/devnet.out"; exit 1; }
"$python" deploy/check-observability.py metrics "${scrape[@]}"
say "every metric the dashboard and the alert rules use is exported by a running node (or pending)"
