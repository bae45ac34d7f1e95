#!/usr/bin/env bash
# The Escrow, the Attestor and the ResolverRegistry run part of their ABI in a second contract
# by DELEGATECALL (EscrowFees, RegistrySlashing), on their own storage. This check fails unless
# the Escrow and the registry have exactly the same storage layout (slot, offset, label and
# type of every variable) as their extension, so a variable added to only one side cannot
# shift the other's slots; and unless the Attestor's layout starts with EscrowFees' whole
# layout (its own variables come after it, where EscrowFees never reaches).
set -euo pipefail
cd "$(dirname "$0")"
forge build > /dev/null 2>&1 || forge build
layout() {
    # Type names carry AST ids, which differ between compilation units: drop them.
    forge inspect "$1" storageLayout --json 2> /dev/null | python3 -c '
import json, re, sys
for v in json.load(sys.stdin)["storage"]:
    print(v["slot"], v["offset"], v["label"], re.sub(r"\)\d+", ")", v["type"]))'
}
# An artifact cached before storage layouts were requested has none: rebuild once.
if [ -z "$(layout Escrow)" ]; then forge build --force > /dev/null 2>&1; fi
status=0
for pair in "Escrow EscrowFees" "ResolverRegistry RegistrySlashing"; do
    read -r main extension <<< "$pair"
    a=$(layout "$main")
    b=$(layout "$extension")
    if [ -z "$a" ] || [ "$a" != "$b" ]; then
        echo "storage layouts of $main and $extension differ:" >&2
        diff <(echo "$a") <(echo "$b") >&2 || true
        status=1
    else
        echo "storage layout of $main = $extension ($(echo "$a" | wc -l) variables)"
    fi
done
fees=$(layout EscrowFees)
attestor=$(layout Attestor)
n=$(echo "$fees" | wc -l)
prefix=$(echo "$attestor" | head -n "$n")
if [ -z "$fees" ] || [ "$prefix" != "$fees" ]; then
    echo "storage layout of Attestor does not start with EscrowFees':" >&2
    diff <(echo "$prefix") <(echo "$fees") >&2 || true
    status=1
else
    echo "storage layout of Attestor = EscrowFees + $(($(echo "$attestor" | wc -l) - n)) own variable(s)"
fi
exit $status
