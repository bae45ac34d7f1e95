#!/usr/bin/env python3
"""Writes the "Scale" section of BENCHMARKS.md from `make bench-scale` output.

Usage: deploy/scale-report.py BENCHMARKS.md scale-16-flood.json [scale-16-aggregators.json ...]

Each JSON file is what the ignored test `scale_bench` (node/tests/it/scale.rs)
wrote for one N and one `p2p.dissemination`; the table has a column for each,
by N, then flood before aggregators. The section between the markers below is replaced (appended
when the file has none); the rest of BENCHMARKS.md is left as it is, so the
scale table can be regenerated without re-running every other benchmark.
"""

import json
import platform
import subprocess
import sys

BEGIN = "<!-- scale:begin (deploy/scale-report.py) -->"
END = "<!-- scale:end -->"


def sh(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()


def ms(v):
    if v is None:
        return "n/a"
    return f"{v / 1e3:.2f} s" if v >= 1000 else f"{v:.0f} ms"


def pair(d):
    return f"{ms(d.get('p50'))} / {ms(d.get('p99'))}" if d else "n/a"


def kib(v):
    return f"{v / 1024:.0f} KiB"


def section(reports):
    cpu = sh("lscpu | sed -n 's/^Model name: *//p'") or platform.processor()
    first = reports[0]
    link = first["link"]
    L = [BEGIN, "## Scale: N nodes in network namespaces over emulated WAN links\n"]
    L.append(
        f"`make bench-scale` (`SCALE_NODES`, `SCALE_DISPUTES`): each node in its own network namespace, "
        f"all on one machine ({cpu}, {first['machine']['cpus']} cores), anvil in another (1 s blocks, 1 confirmation). "
        f"Each node's egress: {link['oneWayDelayMs']:.0f} ms ± {link['jitterMs']:.0f} ms one way, "
        f"{link['loss'] * 100:.0f} % loss, {link['rateBps'] / 1e6:.0f} Mbit/s ({link['emulator']}; the kernel here has no "
        "`sch_netem`). Disputes run one at a time, alternating an honest delivery and a false claim; the witness goes to one "
        "node and the others fetch it over the links. *Seen → certificate* is each node's own view (from confirming the "
        "dispute to holding a certificate); the *floor* is one process doing one node's share of the critical path "
        "alone when every partial is flooded: one replay, its own signature, and batch verification and aggregation of "
        "the N partials; the *goal floor* is the aggregation goals' (one replay, its own signature and one check of a "
        "certificate of N signers). Nodes run the "
        "operator defaults (1 s chain polling, 700 ms gossipsub heartbeat, D = 4), not the loopback devnet's faster "
        "timers. Per-dispute figures are per node, from the router's counters (p2p bytes; of them, the TCP/IP "
        "headers of every segment, and the segments without payload, mostly acknowledgements), `/proc/<pid>/stat` (CPU, "
        f"also net of the idle rate) and the nodes' metrics. The idle rate is measured over two windows of 30 s, "
        f"one {first.get('quietSeconds', 0)} s after all nodes are up (past the first re-gossips of the member "
        "records, 3, 9, 21, 45 and 93 s after a node starts; the next ones, 189 and 381 s after it, fall among the "
        "disputes and the windows), one after the disputes; the rate is their mean, weighted by length, and *net of "
        "idle* subtracts it for the disputes' duration.\n"
    )
    L.append(
        "*flood*: every partial gossiped to every node (`p2p.dissemination = \"flood\"`); *aggregators*: partials "
        "sent straight to the dispute's aggregators, found through signed member records (the default; "
        "docs/node/dispute-handling.md). In a committee of at most 32 the aggregators are the first 8 members of the "
        "deal's submitter order; slices and collectors start above that (the simulator section covers N = 64 to "
        "1,024).\n"
    )
    L.append(
        "| | "
        + " | ".join(f"N = {r['nodes']}, {r.get('dissemination', 'flood')}" for r in reports)
        + " |"
    )
    L.append("| --- |" + " --- |" * len(reports))

    def row(name, f):
        cells = []
        for r in reports:
            try:
                cells.append(f(r))
            except (KeyError, TypeError, ZeroDivisionError):
                cells.append("n/a")
        L.append(f"| {name} | " + " | ".join(cells) + " |")

    row("build, disputes", lambda r: f"{r['build']}, {r['disputes']}")
    row("launch (all nodes up and connected)", lambda r: f"{r['launchSeconds']:.0f} s")
    row("TCP handshake node → node, p50", lambda r: ms(r["tcpHandshakeNode0ToNode1Ms"]["p50"]))
    row("floor (one process)", lambda r: f"{r['floorMs']:.1f} ms")
    row("goal floor (one process)", lambda r: f"{r['goalFloorMs']:.1f} ms")
    row("**seen → certificate, p50 / p99**", lambda r: pair(r["seenToCertificateMs"]))
    row("seen → settled, p50 / p99", lambda r: pair(r["seenToSettlementMs"]))
    row("challenge → `Settled` mined, p50 / p99", lambda r: pair(r["challengeToSettlementMs"]))
    pd = lambda r: r["perDispute"]
    row(
        "**p2p bytes sent per node per dispute**, mean (max)",
        lambda r: f"{kib(pd(r)['p2pBytesSentPerNode']['mean'])} ({kib(pd(r)['p2pBytesSentPerNode']['max'])})",
    )
    row(
        "… net of idle, mean",
        lambda r: kib(r["p2pBytesSentPerNodePerDisputeNetOfIdle"]),
    )
    row(
        "… of which TCP/IP headers, and of those payload-less segments (acknowledgements), mean",
        lambda r: f"{kib(pd(r)['p2pTcpHeaderBytesSentPerNode']['mean'])}, "
        f"{kib(pd(r)['p2pTcpEmptyBytesSentPerNode']['mean'])} "
        f"({pd(r)['p2pTcpEmptyPacketsSentPerNode']['mean']:,.0f} segments)",
    )
    row(
        "p2p bytes received per node per dispute, mean (max)",
        lambda r: f"{kib(pd(r)['p2pBytesReceivedPerNode']['mean'])} ({kib(pd(r)['p2pBytesReceivedPerNode']['max'])})",
    )
    row("RPC bytes per node per dispute, mean", lambda r: kib(pd(r)["rpcBytesPerNode"]["mean"]))
    row(
        "**CPU per node per dispute**, mean (net of idle)",
        lambda r: f"{pd(r)['cpuSecondsPerNode']['mean'] * 1e3:.0f} ms ({r['cpuSecondsPerNodePerDisputeNetOfIdle'] * 1e3:.0f} ms)",
    )
    row(
        "… net of idle ÷ floor",
        lambda r: f"{r['cpuSecondsPerNodePerDisputeNetOfIdle'] * 1e3 / r['floorMs']:.1f} ×",
    )
    row(
        "… net of idle ÷ goal floor",
        lambda r: f"{r['cpuSecondsPerNodePerDisputeNetOfIdle'] * 1e3 / r['goalFloorMs']:.1f} ×",
    )
    row(
        "all nodes' CPU per dispute ÷ cores",
        lambda r: f"{pd(r)['cpuSecondsPerNode']['mean'] * r['nodes'] / r['machine']['cpus']:.2f} s",
    )
    row("idle CPU per node", lambda r: f"{r['idlePerSecond']['cpuSecondsPerNode']['mean'] * 1e3:.0f} ms/s")
    row(
        "idle p2p bytes sent per node",
        lambda r: f"{r['idlePerSecond']['p2pBytesSentPerNode']['mean'] / 1024:.1f} KiB/s",
    )
    row("disputes' duration, mean", lambda r: f"{r['sequenceSeconds'] / r['disputes']:.1f} s")
    row("peak RSS per node", lambda r: f"{r['rssPeakMiB']['min']:.0f}–{r['rssPeakMiB']['max']:.0f} MiB")
    row("gossip messages validated per dispute, all nodes", lambda r: f"{pd(r)['gossipMessagesValidated']:,.0f}")
    by = lambda r, k: pd(r)["gossipMessagesValidatedByTopic"].get(k, 0.0)
    row(
        "… partials accepted / ignored",
        lambda r: f"{by(r, 'verdicts/accept'):,.0f} / {by(r, 'verdicts/ignore'):,.0f}",
    )
    row(
        "… certificates accepted / ignored",
        lambda r: f"{by(r, 'certificates/accept'):,.0f} / {by(r, 'certificates/ignore'):,.0f}",
    )
    row(
        "partials verified per node per dispute, min / mean / max",
        lambda r: "{min:.1f} / {mean:.1f} / {max:.1f}".format(**pd(r)["partialsVerifiedPerNode"]),
    )
    row(
        "direct messages sent / sent on gossip instead, per dispute, all nodes",
        lambda r: f"{by(r, 'direct/sent'):,.0f} / {by(r, 'direct/fallback'):,.0f}",
    )
    row("packets lost per dispute (all links)", lambda r: f"{pd(r)['packetsLost']:.0f}")

    def under(r):
        p = r["partitions"]["underAThird"]
        return f"{p['isolated']} isolated: settled, challenge → settled {ms(p['challengeToSettlementMs'])}"

    def third(r):
        p = r["partitions"]["aThirdOrMore"]
        held = "settled (!)" if p["settledWhilePartitioned"] else f"unsettled for {p['heldSeconds']} s"
        return f"{p['isolated']} isolated: {held}; heal → settled {ms(p['healToSettlementMs'])}"

    row("partition, under a third of the stake isolated", under)
    row("partition, a third or more isolated", third)
    L.append("")
    L.append(END)
    return "\n".join(L)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    path, files = sys.argv[1], sys.argv[2:]
    modes = {"flood": 0, "aggregators": 1}
    reports = sorted(
        (json.load(open(f)) for f in files),
        key=lambda r: (r["nodes"], modes.get(r.get("dissemination", "flood"), 2)),
    )
    new = section(reports)
    try:
        text = open(path).read()
    except FileNotFoundError:
        text = "# Benchmarks\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        text = head + new + tail
    else:
        text = text.rstrip("\n") + "\n\n" + new + "\n"
    open(path, "w").write(text)
    cols = ", ".join(f"{r['nodes']} {r.get('dissemination', 'flood')}" for r in reports)
    print(f"wrote the scale section of {path} (N = {cols})")


if __name__ == "__main__":
    main()
