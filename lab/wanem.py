#!/usr/bin/env python3
"""Userspace WAN emulator for the nastriage scenario lab (stdlib only).

It runs inside the lab's router namespace and owns a TUN device.  Policy
routing on the router sends every packet travelling between the client subnet
and the server subnet into the TUN device; this process reads it, applies the
impairments of its direction and writes it back into the TUN device at the
scheduled time, from where the kernel forwards it out of the real veth
(packets written to the TUN come in with iif=tun, which the policy rules leave
to the main table).

Per direction (c2s = towards the server subnet, s2c = towards the client
subnet) it models, in this order:

  1. random loss            p                      ("loss")
  2. burst loss             Gilbert-Elliott ("ge": [p_good_to_bad, p_bad_to_good, loss_in_bad])
                            or K consecutive drops every M packets ("burst": [K, M])
  3. bottleneck             rate in bit/s with a drop-tail queue of N packets
                            ("rate_bps", "buffer_pkts"); 0 = unlimited
  4. one-way delay          fixed, after the bottleneck ("delay_ms")
  5. reordering             every M-th data packet (and the K-1 after it, a burst)
                            is held back for X ms ("reorder": {"every": M, "burst": K,
                            "hold_ms": X}) and released after the packets behind it

Loss and reordering only touch TCP segments that carry payload unless
"data_only" is false, so handshakes and pure ACKs pass (the usual shape of a
congested or reordering path for a bulk transfer).  Everything is driven by a
seeded random.Random per direction, so a run is reproducible up to timing.

Bounded: the delay line holds at most --max-inflight packets (further packets
are dropped and counted), the process exits after --max-seconds, on SIGTERM or
SIGINT, and writes its counters as JSON to --stats.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import heapq
import ipaddress
import json
import os
import random
import select
import signal
import struct
import sys
import time
from collections import deque

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000

DEFAULT_DIR = {
    "delay_ms": 0.0,
    "rate_bps": 0,
    "buffer_pkts": 1000,
    "loss": 0.0,
    "ge": None,
    "burst": None,
    "reorder": None,
    "data_only": True,
}


def open_tun(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR)
    ifr = struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI)
    fcntl.ioctl(fd, TUNSETIFF, ifr)
    os.set_blocking(fd, False)
    return fd


def tcp_payload_len(pkt: bytes) -> int:
    """Payload length of an IPv4 TCP segment, -1 if it is not one."""
    if len(pkt) < 20 or pkt[0] >> 4 != 4 or pkt[9] != 6:
        return -1
    ihl = (pkt[0] & 0x0F) * 4
    total = (pkt[2] << 8) | pkt[3]
    if len(pkt) < ihl + 13:
        return -1
    doff = (pkt[ihl + 12] >> 4) * 4
    return max(0, total - ihl - doff)


class Direction:
    def __init__(self, name: str, cfg: dict, seed: int) -> None:
        c = dict(DEFAULT_DIR)
        c.update(cfg or {})
        self.name = name
        self.cfg = c
        self.rng = random.Random(f"{seed}-{name}")
        self.delay = float(c["delay_ms"]) / 1000.0
        self.rate = float(c["rate_bps"] or 0)
        self.buffer = int(c["buffer_pkts"])
        self.loss = float(c["loss"] or 0.0)
        self.ge = c["ge"]
        self.ge_bad = False
        self.burst = c["burst"]
        self.burst_left = 0
        self.reorder = c["reorder"]
        self.reorder_left = 0
        self.data_only = bool(c["data_only"])
        self.count = 0  # packets eligible for loss/reorder seen so far
        self.link_free = 0.0  # time the bottleneck finishes its last packet
        self.in_queue: deque[float] = deque()  # finish times of packets in the bottleneck
        self.stats = {
            "packets_in": 0,
            "bytes_in": 0,
            "packets_out": 0,
            "bytes_out": 0,
            "drop_random": 0,
            "drop_burst": 0,
            "drop_queue": 0,
            "drop_overflow": 0,
            "reordered": 0,
            "max_queue_pkts": 0,
        }

    def lose(self) -> str | None:
        if self.loss and self.rng.random() < self.loss:
            return "drop_random"
        if self.ge:
            p_gb, p_bg, loss_bad = self.ge
            if self.ge_bad:
                if self.rng.random() < p_bg:
                    self.ge_bad = False
            elif self.rng.random() < p_gb:
                self.ge_bad = True
            if self.ge_bad and self.rng.random() < loss_bad:
                return "drop_burst"
        if self.burst:
            k, m = self.burst
            if self.burst_left > 0:
                self.burst_left -= 1
                return "drop_burst"
            if self.count % m == m - 1:
                self.burst_left = k - 1
                return "drop_burst"
        return None

    def schedule(self, pkt: bytes, now: float) -> float | None:
        """Departure time of pkt from the emulator, or None if it is dropped."""
        st = self.stats
        st["packets_in"] += 1
        st["bytes_in"] += len(pkt)
        eligible = (not self.data_only) or tcp_payload_len(pkt) > 0
        if eligible:
            why = self.lose()
            self.count += 1
            if why:
                st[why] += 1
                return None
        t = now
        if self.rate > 0:
            q = self.in_queue
            while q and q[0] <= now:
                q.popleft()
            if len(q) >= self.buffer:
                st["drop_queue"] += 1
                return None
            start = max(now, self.link_free)
            self.link_free = start + len(pkt) * 8.0 / self.rate
            q.append(self.link_free)
            st["max_queue_pkts"] = max(st["max_queue_pkts"], len(q))
            t = self.link_free
        t += self.delay
        if eligible and self.reorder:
            every = int(self.reorder.get("every", 0))
            burst = int(self.reorder.get("burst", 1))
            hold = float(self.reorder.get("hold_ms", 1.0)) / 1000.0
            if self.reorder_left > 0:
                self.reorder_left -= 1
                t += hold
                st["reordered"] += 1
            elif every and self.count % every == 0:
                self.reorder_left = burst - 1
                t += hold
                st["reordered"] += 1
        return t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tun", required=True, help="existing TUN device to attach to")
    ap.add_argument("--client-net", default="10.77.1.0/24")
    ap.add_argument("--server-net", default="10.77.2.0/24")
    ap.add_argument("--config", default="{}", help='JSON: {"c2s": {...}, "s2c": {...}}')
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-seconds", type=float, default=600.0)
    ap.add_argument("--max-inflight", type=int, default=20000)
    ap.add_argument("--stats", help="write counters as JSON here on exit")
    ap.add_argument("--ready", help="touch this file once the TUN is attached")
    a = ap.parse_args()

    cfg = json.loads(a.config)
    cnet = ipaddress.ip_network(a.client_net)
    snet = ipaddress.ip_network(a.server_net)
    c_val, c_mask = int(cnet.network_address), int(cnet.netmask)
    s_val, s_mask = int(snet.network_address), int(snet.netmask)
    dirs = {
        "c2s": Direction("c2s", cfg.get("c2s", {}), a.seed),
        "s2c": Direction("s2c", cfg.get("s2c", {}), a.seed),
    }
    c2s, s2c = dirs["c2s"], dirs["s2c"]
    other = {"packets": 0}

    stop = False

    def on_signal(_sig: int, _frm: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    fd = open_tun(a.tun)
    if a.ready:
        with open(a.ready, "w") as f:
            f.write(str(os.getpid()))

    heap: list[tuple[float, int, bytes, Direction]] = []
    seq = 0
    lateness_max = 0.0
    lateness_sum = 0.0
    lateness_n = 0
    write_errors = 0
    t0 = time.monotonic()
    deadline = t0 + a.max_seconds
    mono = time.monotonic
    rd = os.read
    wr = os.write
    push = heapq.heappush
    pop = heapq.heappop
    sel = select.select

    while not stop:
        now = mono()
        if now >= deadline:
            break
        wait = min(heap[0][0] - now, 0.2) if heap else 0.2
        if wait > 0:
            with contextlib.suppress(InterruptedError):
                sel([fd], [], [], wait)
        # drain the TUN (bounded batch)
        now = mono()
        for _ in range(256):
            try:
                pkt = rd(fd, 65536)
            except BlockingIOError:
                break
            except InterruptedError:
                break
            if len(pkt) < 20:
                continue
            dst = int.from_bytes(pkt[16:20], "big")
            if dst & s_mask == s_val:
                d = c2s
            elif dst & c_mask == c_val:
                d = s2c
            else:
                other["packets"] += 1
                continue
            if len(heap) >= a.max_inflight:
                d.stats["drop_overflow"] += 1
                continue
            t = d.schedule(pkt, now)
            if t is None:
                continue
            seq += 1
            push(heap, (t, seq, pkt, d))
        # release what is due
        now = mono()
        while heap and heap[0][0] <= now:
            t, _, pkt, d = pop(heap)
            late = now - t
            if late > lateness_max:
                lateness_max = late
            lateness_sum += late
            lateness_n += 1
            try:
                wr(fd, pkt)
                d.stats["packets_out"] += 1
                d.stats["bytes_out"] += len(pkt)
            except OSError:
                write_errors += 1

    os.close(fd)
    elapsed = time.monotonic() - t0
    result = {
        "config": {k: v.cfg for k, v in dirs.items()},
        "seed": a.seed,
        "elapsed_s": round(elapsed, 3),
        "c2s": c2s.stats,
        "s2c": s2c.stats,
        "other_dropped": other["packets"],
        "undelivered_at_exit": len(heap),
        "write_errors": write_errors,
        "lateness_ms_max": round(lateness_max * 1000, 3),
        "lateness_ms_mean": round(lateness_sum / lateness_n * 1000, 4) if lateness_n else 0.0,
    }
    if a.stats:
        with open(a.stats, "w") as f:
            json.dump(result, f, indent=1)
    else:
        json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
