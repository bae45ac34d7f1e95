#!/usr/bin/env python3
"""The import rules of node/src (see node/ARCHITECTURE.md), checked from the source.

    check-layers.py [--graph] [SRC]     (SRC defaults to node/src next to this file)

For every module it lists the `crate::` modules named in non-comment code
outside `#[cfg(test)]` modules, then fails when
  - the module graph has a cycle,
  - a leaf module names a service-layer module (the event loop, the API,
    the metrics registry, or the modules that wire leaves together),
  - one IO adapter folder (chain, p2p, store, keys) names another, or
  - a path names a re-export (`crate::rpc` for `crate::chain::rpc`).
--graph prints the graph (one `module -> imports` line each).
"""

import os
import re
import sys

# IO adapters and plain data: they may name each other only as listed in
# ARCHITECTURE.md, and never the service layer.
LEAVES = {
    "backoff", "chain", "config", "dispute", "economics", "http", "inspect", "keys", "p2p", "signer",
    "store",
}
# The IO adapters, each a folder (chain/: rpc, anchor, contracts, attestation;
# keys/: keystore; store/: interchange): none names another.
FOLDERS = {"chain", "p2p", "store", "keys"}
SERVICE = {"node", "api", "metrics", "observe", "adapters", "content", "faults"}
# Files that are not modules of the library.
BINARY = {"main", "commands"}


def strip(src):
    src = re.sub(r"//[^\n]*", "", src)
    out, i = [], 0
    test = re.compile(r"#\[cfg\(test\)\]\s*(pub(\(crate\))?\s+)?mod\s+\w+\s*(;|\{)")
    while True:
        m = test.search(src, i)
        if not m:
            out.append(src[i:])
            return "".join(out)
        out.append(src[i:m.start()])
        i = m.end()
        if m.group(3) == "{":
            depth = 1
            while depth and i < len(src):
                depth += {"{": 1, "}": -1}.get(src[i], 0)
                i += 1


def names(src):
    found = set()
    for m in re.finditer(r"\bcrate::(\{|\w+)", src):
        if m.group(1) != "{":
            found.add(m.group(1))
            continue
        depth, item, j = 1, "", m.end()
        while depth and j < len(src):
            c = src[j]
            depth += {"{": 1, "}": -1}.get(c, 0)
            if depth == 1 and c == ",":
                w = re.match(r"\s*(\w+)", item)
                found.update([w.group(1)] if w else [])
                item = ""
            elif depth >= 1:
                item += c
            j += 1
        w = re.match(r"\s*(\w+)", item)
        found.update([w.group(1)] if w else [])
    return found


def graph(root):
    mods = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), root)[:-3]
            top = rel.split(os.sep)[0]
            if top in BINARY or top == "lib" or rel.split(os.sep)[-1] == "tests":
                continue
            with open(os.path.join(dirpath, f)) as fh:
                mods.setdefault(top, set()).update(names(strip(fh.read())))
    return mods


def edges(mods):
    return {m: {d for d in deps if d in mods and d != m} for m, deps in mods.items()}


def hidden(mods):
    """`crate::x` paths where x is no module of node/src: a re-export (say
    `crate::rpc` for `crate::chain::rpc`) would hide an arrow from the check."""
    return sorted(
        (m, d) for m, deps in mods.items() for d in deps if d not in mods and d.islower()
    )


def cycles(g):
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "src")
    mods = graph(root)
    g = edges(mods)
    if "--graph" in argv:
        for m in sorted(g):
            print(f"{m} -> {', '.join(sorted(g[m])) or '(nothing)'}")
    errors = [f"import cycle: {' -> '.join(c)}" for c in cycles(g)]
    for leaf in sorted(LEAVES & set(g)):
        for bad in sorted(g[leaf] & SERVICE):
            errors.append(f"leaf module `{leaf}` names the service-layer module `crate::{bad}`")
    for folder in sorted(FOLDERS & set(g)):
        for bad in sorted(g[folder] & (FOLDERS - {folder})):
            errors.append(f"adapter `{folder}` names the adapter `crate::{bad}`")
    for m, d in hidden(mods):
        errors.append(f"`{m}` names `crate::{d}`, which is no module here: use the full path")
    for e in errors:
        print(f"check-layers: {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
