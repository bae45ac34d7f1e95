#!/usr/bin/env bash
# Installs resolvd's toolchain into .tools/ (git-ignored). Idempotent: what is
# already installed at the pinned version is left alone, so it runs offline once
# the tools are there.
#
#   .tools/npm/     Foundry 1.7.1 (forge, anvil, cast) and solc 0.8.30 (solcjs),
#                   from npm, pinned by deploy/toolchain/package-lock.json
#   .tools/bin/     forge, anvil, cast, and `solc` (our shim over solcjs)
#   contracts/node_modules/   OpenZeppelin 5.7.0, pinned by contracts/package-lock.json
#   apt             libclang-dev (bindgen for RocksDB), python3-venv, iproute2 and
#                   util-linux (the namespace scale test), when missing
#   cargo           cargo-nextest, when missing
#   .tools/venv/    kubernetes-validate 1.31.0 (pip, brings PyYAML), for deploy/validate.sh
#   (kubectl with built-in Kustomize must be on PATH: checked, not installed —
#   it is not in Debian's repositories)
#
# Environment: RESOLVD_TOOLS overrides the install folder.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
tools=${RESOLVD_TOOLS:-$root/.tools}
mkdir -p "$tools/bin" "$tools/npm"

say() { printf 'bootstrap: %s\n' "$*"; }

# --- apt packages the Rust build needs ----------------------------------------
missing=()
dpkg -s libclang-dev >/dev/null 2>&1 || missing+=(libclang-dev)
# `python3 -m venv` (for kubernetes-validate) needs ensurepip: python3-venv on Debian.
python3 -c 'import ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
# The network-namespace scale test (node/tests/it/scale.rs) runs `ip netns` and `setpriv`.
command -v ip >/dev/null || missing+=(iproute2)
command -v setpriv >/dev/null || missing+=(util-linux)
if ((${#missing[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    say "missing apt packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})"
    exit 1
  fi
  say "installing apt packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --- Foundry and solc from npm ------------------------------------------------
command -v npm >/dev/null || { say "npm not found: install Node.js 20+ first"; exit 1; }
lock="$here/package-lock.json"
stamp="$tools/npm/.lock.sha256"
want=$(sha256sum "$lock" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || [ ! -x "$tools/npm/node_modules/.bin/forge" ]; then
  say "installing Foundry and solc from npm into $tools/npm"
  cp "$here/package.json" "$lock" "$tools/npm/"
  npm ci --prefix "$tools/npm" --no-audit --no-fund --loglevel=error >/dev/null
  echo "$want" >"$stamp"
fi
for bin in forge anvil cast; do
  ln -sf "../npm/node_modules/.bin/$bin" "$tools/bin/$bin"
done
install -m 0755 "$here/solc.cjs" "$tools/bin/solc"

# --- Solidity dependencies (OpenZeppelin) -------------------------------------
contracts="$root/contracts"
cstamp="$contracts/node_modules/.lock.sha256"
cwant=$(sha256sum "$contracts/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$cstamp" 2>/dev/null)" != "$cwant" ]; then
  say "installing Solidity dependencies into contracts/node_modules"
  npm ci --prefix "$contracts" --no-audit --no-fund --loglevel=error >/dev/null
  echo "$cwant" >"$cstamp"
fi

# --- cargo-nextest ------------------------------------------------------------
if ! cargo nextest --version >/dev/null 2>&1; then
  say "installing cargo-nextest (one-time, a few minutes)"
  cargo install --locked cargo-nextest >/dev/null
fi

# --- kubernetes-validate (offline schema checks of the Kustomize output) --------
kv_version=1.31.0
if ! "$tools/venv/bin/kubernetes-validate" --version 2>/dev/null | grep -q "$kv_version"; then
  say "installing kubernetes-validate $kv_version into $tools/venv"
  python3 -m venv "$tools/venv"
  "$tools/venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$kv_version"
fi

# --- report -------------------------------------------------------------------
say "forge:   $("$tools/bin/forge" --version | head -n1)"
say "anvil:   $("$tools/bin/anvil" --version | head -n1)"
say "cast:    $("$tools/bin/cast" --version | head -n1)"
say "solc:    $("$tools/bin/solc" --version | tail -n1) (solcjs shim: $tools/bin/solc)"
say "oz:      @openzeppelin/contracts $(node -p "require('$contracts/node_modules/@openzeppelin/contracts/package.json').version")"
say "nextest: $(cargo nextest --version | head -n1)"
say "clang:   $(dpkg-query -W -f='libclang-dev ${Version}' libclang-dev)"
say "k8s:     kubernetes-validate $("$tools/venv/bin/kubernetes-validate" --version 2>&1 | head -n1)"
if command -v kubectl >/dev/null; then
  say "kubectl: $(kubectl version --client 2>/dev/null | head -n1)"
else
  say "kubectl: MISSING — deploy/validate.sh (make test) needs kubectl with built-in Kustomize"
fi
