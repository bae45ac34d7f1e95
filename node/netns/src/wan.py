"""Userspace WAN link emulator of resolvd's network-namespace harness.

Started by the `resolvd-netns` crate (`node/netns/src/lib.rs`; never by
hand). It opens one TUN device per namespace (kernel-named `rsvdt%d`, moved
into its namespace by the harness), routes IPv4 packets between them by destination address, and applies each
device's egress shape to what its namespace sends: loss (Bernoulli), one-way
delay (normal, clipped at 0; order kept as netem does with a rate), and a
rate cap (serialisation time at the sender). It exists because the kernel of
the test machine has no `sch_netem`; the TUN devices vanish when it exits.

argv[1] is a JSON config:
  {"seed": int, "devices": [{"ip": "10.213.5.1", "kind": "node"|"anvil"|"observer",
    "shape": null | {"delay_ms", "jitter_ms", "loss", "rate_bps", "limit"}}],
   "shape_to_observer": bool}
It prints `{"devices": [names...]}` once the devices exist, then answers JSON
commands on stdin, one line each, with one JSON line on stdout:
  {"cmd": "stats"}                      -> per device counters
  {"cmd": "partition", "groups": [[i, ...], ...]}  (node-to-node packets
                                           between different groups dropped;
                                           devices in no group are unaffected)
  {"cmd": "heal"}
EOF on stdin ends it.
"""

import fcntl
import heapq
import json
import os
import random
import select
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
KINDS = ("node", "anvil", "observer")


def open_tun():
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    ifr = fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", b"rsvdt%d", IFF_TUN | IFF_NO_PI))
    return fd, ifr[:16].rstrip(b"\0").decode()


class Device:
    def __init__(self, index, spec):
        self.index = index
        self.ip = bytes(int(x) for x in spec["ip"].split("."))
        self.kind = spec["kind"]
        if self.kind not in KINDS:
            raise ValueError(f"unknown device kind {self.kind!r}")
        self.shape = spec.get("shape")
        self.fd, self.name = open_tun()
        self.busy_until = 0.0  # the sender's serialisation clock
        self.last_due = 0.0  # keeps the sender's packets in order
        self.queued = 0
        self.group = None
        zero = lambda: {k: 0 for k in KINDS}
        self.sent_bytes, self.sent_packets = zero(), zero()
        self.recv_bytes, self.recv_packets = zero(), zero()
        # Of the TCP packets sent to nodes: IP and TCP header bytes, and
        # the packets that carry no payload (and their bytes): acknowledgements.
        self.sent_tcp_header_bytes = 0
        self.sent_tcp_empty_packets = 0
        self.sent_tcp_empty_bytes = 0
        self.lost = 0
        self.overflow = 0
        self.partitioned = 0
        self.unroutable = 0

    def count_tcp(self, packet):
        ip_len = (packet[0] & 0x0F) * 4
        if len(packet) < ip_len + 13:
            return
        header = ip_len + (packet[ip_len + 12] >> 4) * 4
        self.sent_tcp_header_bytes += min(header, len(packet))
        if len(packet) <= header:
            self.sent_tcp_empty_packets += 1
            self.sent_tcp_empty_bytes += len(packet)

    def stats(self):
        return {
            "name": self.name,
            "kind": self.kind,
            "sentBytes": self.sent_bytes,
            "sentPackets": self.sent_packets,
            "recvBytes": self.recv_bytes,
            "recvPackets": self.recv_packets,
            "sentTcpHeaderBytes": self.sent_tcp_header_bytes,
            "sentTcpEmptyPackets": self.sent_tcp_empty_packets,
            "sentTcpEmptyBytes": self.sent_tcp_empty_bytes,
            "lost": self.lost,
            "overflow": self.overflow,
            "partitioned": self.partitioned,
            "unroutable": self.unroutable,
        }


def main():
    config = json.loads(sys.argv[1])
    rng = random.Random(config.get("seed", 0))
    shape_to_observer = bool(config.get("shape_to_observer", False))
    devices = [Device(i, d) for i, d in enumerate(config["devices"])]
    by_ip = {d.ip: d for d in devices}
    by_fd = {d.fd: d for d in devices}
    out = sys.stdout
    out.write(json.dumps({"devices": [d.name for d in devices]}) + "\n")
    out.flush()

    poller = select.epoll()
    for d in devices:
        poller.register(d.fd, select.EPOLLIN)
    poller.register(0, select.EPOLLIN)
    due = []  # (time, seq, destination index, source index, packet)
    seq = 0
    stdin_buf = b""

    def deliver(dst, src, packet):
        try:
            os.write(dst.fd, packet)
        except OSError:
            dst.overflow += 1
            return
        dst.recv_bytes[src.kind] += len(packet)
        dst.recv_packets[src.kind] += 1

    def command(line):
        cmd = json.loads(line)
        if cmd["cmd"] == "stats":
            return {"devices": [d.stats() for d in devices], "queued": len(due)}
        if cmd["cmd"] == "partition":
            for d in devices:
                d.group = None
            for g, members in enumerate(cmd["groups"]):
                for i in members:
                    devices[i].group = g
            return {"ok": True}
        if cmd["cmd"] == "heal":
            for d in devices:
                d.group = None
            return {"ok": True}
        return {"error": f"unknown command {cmd['cmd']!r}"}

    while True:
        now = time.monotonic()
        timeout = 0.5 if not due else max(0.0, min(0.5, due[0][0] - now))
        for fd, _ in poller.poll(timeout):
            if fd == 0:
                chunk = os.read(0, 65536)
                if not chunk:
                    return
                stdin_buf += chunk
                while b"\n" in stdin_buf:
                    line, stdin_buf = stdin_buf.split(b"\n", 1)
                    if line.strip():
                        try:
                            reply = command(line)
                        except (ValueError, KeyError, IndexError, TypeError) as e:
                            reply = {"error": str(e)}
                        out.write(json.dumps(reply) + "\n")
                        out.flush()
                continue
            src = by_fd[fd]
            for _ in range(256):
                try:
                    packet = os.read(fd, 65536)
                except BlockingIOError:
                    break
                except OSError:
                    # The device went away with its namespace (teardown).
                    try:
                        poller.unregister(fd)
                    except OSError:
                        pass
                    break
                if len(packet) < 20 or packet[0] >> 4 != 4:
                    continue  # IPv6 router solicitations and the like
                dst = by_ip.get(packet[16:20])
                if dst is None or dst is src:
                    src.unroutable += 1
                    continue
                src.sent_bytes[dst.kind] += len(packet)
                src.sent_packets[dst.kind] += 1
                if dst.kind == "node" and packet[9] == 6:
                    src.count_tcp(packet)
                if (
                    src.group is not None
                    and dst.group is not None
                    and src.group != dst.group
                ):
                    src.partitioned += 1
                    continue
                shape = src.shape
                if shape is None or (dst.kind == "observer" and not shape_to_observer):
                    deliver(dst, src, packet)
                    continue
                if rng.random() < shape["loss"]:
                    src.lost += 1
                    continue
                if src.queued >= shape["limit"]:
                    src.overflow += 1
                    continue
                now = time.monotonic()
                start = max(now, src.busy_until)
                rate = shape.get("rate_bps")
                src.busy_until = start + (len(packet) * 8 / rate if rate else 0.0)
                delay = max(0.0, rng.gauss(shape["delay_ms"], shape["jitter_ms"])) / 1e3
                at = max(src.busy_until + delay, src.last_due)
                src.last_due = at
                src.queued += 1
                seq += 1
                heapq.heappush(due, (at, seq, dst.index, src.index, packet))
        now = time.monotonic()
        while due and due[0][0] <= now:
            _, _, d, s, packet = heapq.heappop(due)
            devices[s].queued -= 1
            deliver(devices[d], devices[s], packet)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
