#!/usr/bin/env bash
# The engine is pure by construction: fails if an IO crate (an async runtime,
# the network stack, the database, an RPC provider or transport, the EVM) is
# in its normal dependency tree. Run by `make lint`.
set -euo pipefail
forbidden='^(tokio|libp2p|rocksdb|librocksdb-sys|alloy-provider|alloy-transport|revm)([-_][A-Za-z0-9_-]*)? v'
tree=$(cargo tree -p resolvd-engine -e normal --all-features --prefix none --locked)
found=$(grep -E "$forbidden" <<<"$tree" | sort -u || true)
if [ -n "$found" ]; then
  echo "check-deps: resolvd-engine must not depend on IO crates; found:" >&2
  echo "$found" >&2
  echo "(cargo tree -p resolvd-engine -e normal -i <crate> shows the path)" >&2
  exit 1
fi
echo "check-deps: resolvd-engine's dependency tree has no IO crates"
