#!/usr/bin/env python3
"""nastriage scenario lab: real NFS/SMB transfers through controlled faults.

Builds three network namespaces (client, router, server) joined by veth pairs,
optionally runs the userspace WAN emulator (wanem.py) on the router, starts
real servers (Samba smbd, nfs-ganesha + rpcbind) in the server namespace, runs
a real client (smbclient, libnfs nfs-cp, or loadgen.py) in the client
namespace, captures with tcpdump at the client and at the server, and writes

    OUT/SCENARIO/client.pcap  OUT/SCENARIO/server.pcap  OUT/SCENARIO/label.json

Everything it starts runs inside namespaces it created; on exit (normal,
error, SIGINT, SIGTERM) it stops every process in them, deletes them, unmounts
its tmpfs and removes its cgroup.  Use lab/run.sh rather than this file.
Stdlib only; run as root.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import hashlib
import json
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PREFIX = "ntlab"
CLIENT_IP, ROUTER_CIP, ROUTER_SIP, SERVER_IP = "10.77.1.2", "10.77.1.1", "10.77.2.1", "10.77.2.2"
CLIENT_NET, SERVER_NET = "10.77.1.0/24", "10.77.2.0/24"
FILE_NAME = "payload.bin"
PYTHON = sys.executable or "python3"
CGROUP_CPU = Path("/sys/fs/cgroup/cpu")
CGROUP_CPU_V2 = Path("/sys/fs/cgroup")



def wait_until_stable(paths: list[Path], quiet_s: float, limit_s: float) -> None:
    """Return once none of `paths` has grown for `quiet_s` (at most `limit_s`)."""
    deadline = time.monotonic() + limit_s
    sizes = None
    stable_since = time.monotonic()
    while time.monotonic() < deadline:
        now = [p.stat().st_size if p.exists() else 0 for p in paths]
        if now != sizes:
            sizes, stable_since = now, time.monotonic()
        elif time.monotonic() - stable_since >= quiet_s:
            return
        time.sleep(0.1)

def log(msg: str) -> None:
    ts = time.strftime("%H:%M:%S")
    print(f"[lab {ts}] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------
# Scenarios
# ----------------------------------------------------------------------------
#
# Keys:
#   protocol   nfs3 | nfs4 | smb2
#   op         read (server -> client bulk) | write (client -> server bulk)
#   client     smbclient | nfs-cp | loadgen
#   expected   expected finding id ("none" for baselines)
#   impairment free text for the label
#   size       default transfer size in MiB
#   wan        emulator config {"c2s": {...}, "s2c": {...}} (see wanem.py) or None
#              (None = the router forwards in the kernel, no emulator)
#   tbf        {"client": mbit, "server": mbit}: token bucket on that host's
#              egress veth (a local qdisc: TCP Small Queues push back, no drops)
#   sysctl     {"client": {...}, "server": {...}} per-namespace sysctls
#   starve     {"mode": "stop", "stop_ms", "run_ms", "first_run_ms", "max_cycles"}
#              SIGSTOP/SIGCONT duty cycle of the server daemon, or
#              {"mode": "cgroup", "quota_us", "period_us"} CPU quota on it
#   outstanding, io_size   for loadgen: fixed number of outstanding requests

WAN15 = {"c2s": {"delay_ms": 7.5}, "s2c": {"delay_ms": 7.5}}
WAN30 = {"c2s": {"delay_ms": 15.0}, "s2c": {"delay_ms": 15.0}}
RENO = {"net.ipv4.tcp_congestion_control": "reno"}
CUBIC = {"net.ipv4.tcp_congestion_control": "cubic"}
# veth forwarding on 2 cores drops bursts from an unpaced multi-Gbit/s sender
# (per-CPU backlog overflow); a 1 Gbit/s token bucket at each host's egress is
# a loss-free "1 GbE LAN" (TCP Small Queues push back on the local qdisc)
LAN1G = {"client": 1000, "server": 1000}


def _congested(rate_mbit: float, buf: int) -> dict:
    return {
        "c2s": {"delay_ms": 7.5},
        "s2c": {"delay_ms": 7.5, "rate_bps": int(rate_mbit * 1e6), "buffer_pkts": buf},
    }


def _reordering(every: int, burst: int, hold_ms: float) -> dict:
    return {
        "c2s": {"delay_ms": 7.5},
        "s2c": {
            "delay_ms": 7.5,
            "reorder": {"every": every, "burst": burst, "hold_ms": hold_ms},
        },
    }


STALL = {"mode": "stop", "first_run_ms": 300, "stop_ms": 1000, "run_ms": 400, "max_cycles": 8}
# a server receive buffer of at most 1 MiB fills within ~40 ms at 200 Mbit/s
SMALL_RMEM = {"net.ipv4.tcp_rmem": "4096 131072 1048576"}
SLOW_CG = {"mode": "cgroup", "period_us": 30000, "quota_us": 1000}

SCENARIOS: dict[str, dict] = {
    # --- healthy baselines ---------------------------------------------------
    "nfs3-healthy-lan": {
        "protocol": "nfs3", "op": "read", "client": "nfs-cp", "expected": "none",
        "impairment": "none: 1 Gbit/s LAN (paced at the hosts), kernel forwarding, cubic",
        "size": 32, "tbf": LAN1G, "sysctl": {"client": CUBIC, "server": CUBIC},
    },
    "nfs4-healthy-lan": {
        "protocol": "nfs4", "op": "read", "client": "nfs-cp", "expected": "none",
        "impairment": "none: 1 Gbit/s LAN (paced at the hosts), kernel forwarding, cubic",
        "size": 32, "tbf": LAN1G, "sysctl": {"client": CUBIC, "server": CUBIC},
    },
    "smb2-healthy-lan": {
        "protocol": "smb2", "op": "read", "client": "smbclient", "expected": "none",
        "impairment": "none: 1 Gbit/s LAN (paced at the hosts), kernel forwarding, cubic",
        "size": 32, "tbf": LAN1G, "sysctl": {"client": CUBIC, "server": CUBIC},
    },
    "nfs3-healthy-wan": {
        "protocol": "nfs3", "op": "read", "client": "nfs-cp", "expected": "none",
        "impairment": "none: 15 ms RTT WAN, 100 Mbit/s paced at the hosts, no loss",
        "size": 16, "wan": WAN15, "tbf": {"client": 100, "server": 100},
        "sysctl": {"client": CUBIC, "server": CUBIC},
    },
    "smb2-healthy-wan": {
        "protocol": "smb2", "op": "read", "client": "smbclient", "expected": "none",
        "impairment": "none: 15 ms RTT WAN, 100 Mbit/s paced at the hosts, no loss",
        "size": 16, "wan": WAN15, "tbf": {"client": 100, "server": 100},
        "sysctl": {"client": CUBIC, "server": CUBIC},
    },
    # --- receiver stall: the server stops reading its socket during a write ---
    "smb2-receiver-stall": {
        "protocol": "smb2", "op": "write", "client": "smbclient", "expected": "receiver-stall",
        "impairment": "smbd SIGSTOPped 1 s of every 1.4 s during an SMB2 write at 200 Mbit/s "
                      "(stops reading its socket, 1 MiB max receive buffer: zero windows)",
        "size": 32, "tbf": {"client": 200}, "starve": STALL,
        "sysctl": {"client": CUBIC, "server": {**CUBIC, **SMALL_RMEM}},
    },
    "nfs3-receiver-stall": {
        "protocol": "nfs3", "op": "write", "client": "loadgen", "expected": "receiver-stall",
        "impairment": "ganesha SIGSTOPped 1 s of every 1.4 s during an NFSv3 write at 200 "
                      "Mbit/s (stops reading its socket, 1 MiB max receive buffer: zero windows)",
        "size": 32, "tbf": {"client": 200}, "starve": STALL,
        "outstanding": 16, "io_size": 65536,
        "sysctl": {"client": CUBIC, "server": {**CUBIC, **SMALL_RMEM}},
    },
    # --- congestion loss at a speed mismatch ----------------------------------
    "smb2-congestion-loss": {
        "protocol": "smb2", "op": "read", "client": "smbclient", "expected": "congestion-loss",
        "impairment": "speed mismatch: server link unlimited, 20 Mbit/s bottleneck with a "
                      "16-packet drop-tail buffer towards the client, 15 ms RTT, reno sender",
        "size": 12, "wan": _congested(20, 16),
        "sysctl": {"client": CUBIC, "server": RENO},
    },
    "nfs3-congestion-loss": {
        "protocol": "nfs3", "op": "read", "client": "nfs-cp", "expected": "congestion-loss",
        "impairment": "speed mismatch: server link unlimited, 20 Mbit/s bottleneck with a "
                      "16-packet drop-tail buffer towards the client, 15 ms RTT, reno sender",
        "size": 12, "wan": _congested(20, 16),
        "sysctl": {"client": CUBIC, "server": RENO},
    },
    # --- reordering without loss -----------------------------------------------
    "nfs3-reordering": {
        "protocol": "nfs3", "op": "read", "client": "nfs-cp", "expected": "reordering",
        "impairment": "every 50th data segment towards the client (with the one after it) "
                      "held back 1 ms, no loss, 15 ms RTT, 100 Mbit/s paced at the server",
        "size": 16, "wan": _reordering(50, 2, 1.0), "tbf": {"client": 100, "server": 100},
        "sysctl": {"client": CUBIC, "server": CUBIC},
    },
    "smb2-reordering": {
        "protocol": "smb2", "op": "read", "client": "smbclient", "expected": "reordering",
        "impairment": "every 50th data segment towards the client (with the one after it) "
                      "held back 1 ms, no loss, 15 ms RTT, 100 Mbit/s paced at the server",
        "size": 16, "wan": _reordering(50, 2, 1.0), "tbf": {"client": 100, "server": 100},
        "sysctl": {"client": CUBIC, "server": CUBIC},
    },
    # --- receive window limited ------------------------------------------------
    "nfs3-receive-window-limited": {
        "protocol": "nfs3", "op": "read", "client": "nfs-cp",
        "expected": "receive-window-limited",
        "impairment": "client has TCP window scaling off (64 KiB max window), 30 ms RTT, "
                      "no rate limit: at most ~17 Mbit/s",
        "size": 12, "wan": WAN30,
        "sysctl": {"client": {**CUBIC, "net.ipv4.tcp_window_scaling": "0"}, "server": CUBIC},
    },
    "smb2-receive-window-limited": {
        "protocol": "smb2", "op": "read", "client": "smbclient",
        "expected": "receive-window-limited",
        "impairment": "client has TCP window scaling off (64 KiB max window), 30 ms RTT, "
                      "no rate limit: at most ~17 Mbit/s",
        "size": 12, "wan": WAN30,
        "sysctl": {"client": {**CUBIC, "net.ipv4.tcp_window_scaling": "0"}, "server": CUBIC},
    },
    # --- slow server -------------------------------------------------------------
    "nfs3-server-latency": {
        "protocol": "nfs3", "op": "read", "client": "loadgen", "expected": "server-latency",
        "impairment": "ganesha CPU-starved: cgroup CPU quota 1 ms per 30 ms period (LAN), "
                      "reads with 4 outstanding 256 KiB requests",
        "size": 16, "starve": SLOW_CG, "outstanding": 4, "io_size": 262144,
        "sysctl": {"client": CUBIC, "server": CUBIC},
    },
    "smb2-server-latency": {
        "protocol": "smb2", "op": "read", "client": "loadgen", "expected": "server-latency",
        "impairment": "smbd CPU-starved: cgroup CPU quota 1 ms per 30 ms period (LAN), "
                      "reads with 4 outstanding 64 KiB requests",
        "size": 8, "starve": SLOW_CG, "outstanding": 4, "io_size": 65536,
        "sysctl": {"client": CUBIC, "server": CUBIC},
    },
    # --- client concurrency limit -------------------------------------------------
    "nfs3-client-concurrency-limit": {
        "protocol": "nfs3", "op": "read", "client": "loadgen",
        "expected": "client-concurrency-limit",
        "impairment": "client keeps exactly 1 READ of 64 KiB outstanding over a 15 ms RTT "
                      "path with spare capacity (~35 Mbit/s at most)",
        "size": 6, "wan": WAN15, "outstanding": 1, "io_size": 65536,
        "sysctl": {"client": CUBIC, "server": CUBIC},
    },
    "smb2-client-concurrency-limit": {
        "protocol": "smb2", "op": "read", "client": "loadgen",
        "expected": "client-concurrency-limit",
        "impairment": "client keeps exactly 1 READ of 64 KiB outstanding over a 15 ms RTT "
                      "path with spare capacity (~35 Mbit/s at most)",
        "size": 6, "wan": WAN15, "outstanding": 1, "io_size": 65536,
        "sysctl": {"client": CUBIC, "server": CUBIC},
    },
}


# ----------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------


def run(argv: list[str], check: bool = True, timeout: float = 30,
        **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def ns_pids(ns: str) -> list[int]:
    r = run(["ip", "netns", "pids", ns], check=False, timeout=10)
    return [int(x) for x in r.stdout.split()] if r.returncode == 0 else []


def kill_ns_processes(ns: str) -> None:
    """SIGCONT then SIGTERM, then SIGKILL, every process in ns (bounded)."""
    for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
        pids = ns_pids(ns)
        if not pids:
            return
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGCONT)
                os.kill(p, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and ns_pids(ns):
            time.sleep(0.05)


def list_lab_namespaces() -> list[str]:
    r = run(["ip", "netns", "list"], check=False, timeout=10)
    return [ln.split()[0] for ln in r.stdout.splitlines() if ln.startswith(PREFIX + "-")]


def tags_present() -> set[str]:
    """Tags of every lab run with something left on this machine."""
    tags = {ns.split("-")[1] for ns in list_lab_namespaces()}
    for p in Path("/tmp").glob(f"{PREFIX}-*"):
        tags.add(p.name.split("-", 1)[1])
    for base in (CGROUP_CPU, CGROUP_CPU_V2):
        if base.is_dir():
            for p in base.glob(f"{PREFIX}-*"):
                tags.add(p.name.split("-", 1)[1])
    return tags


def tag_owner(tag: str) -> int | None:
    """The pid of the process that owns a tag ("<pid>" or "<pid>s<n>")."""
    m = re.match(r"(\d+)", tag)
    return int(m.group(1)) if m else None


def remove_tag(tag: str) -> list[str]:
    """Remove everything a run with this tag may have left: namespaces, mounts, cgroup."""
    removed = []
    for ns in list_lab_namespaces():
        if ns.startswith(f"{PREFIX}-{tag}-"):
            kill_ns_processes(ns)
            run(["ip", "netns", "del", ns], check=False, timeout=10)
            removed.append(ns)
    for base in (CGROUP_CPU, CGROUP_CPU_V2):
        cg = base / f"{PREFIX}-{tag}"
        if cg.is_dir():
            with contextlib.suppress(OSError):
                for p in (cg / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        os.kill(int(p), signal.SIGKILL)
            for _ in range(20):
                try:
                    cg.rmdir()
                    removed.append(str(cg))
                    break
                except OSError:
                    time.sleep(0.1)
    work = Path(f"/tmp/{PREFIX}-{tag}")
    if work.exists():
        mounts = Path("/proc/mounts").read_text().splitlines()
        for ln in reversed(mounts):
            mp = ln.split()[1]
            if mp.startswith(str(work) + "/"):
                run(["umount", "-l", mp], check=False, timeout=10)
        shutil.rmtree(work, ignore_errors=True)
        removed.append(str(work))
    return removed


def cleanup_tags(owner: int | None = None) -> list[str]:
    """Remove leftovers of runs owned by `owner`, and of runs whose owner is gone."""
    removed = []
    for tag in sorted(tags_present()):
        pid = tag_owner(tag)
        if pid is not None and pid != owner and pid_alive(pid):
            continue
        removed += remove_tag(tag)
    return removed


def pcap_summary(path: Path) -> dict:
    """Packet count, bytes, first/last timestamps of a classic pcap (stdlib)."""
    out = {"file": path.name, "bytes": path.stat().st_size, "packets": 0}
    with path.open("rb") as f:
        hdr = f.read(24)
        if len(hdr) < 24:
            return out
        magic = hdr[:4]
        endian = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
        out["snaplen"] = struct.unpack(endian + "I", hdr[16:20])[0]
        first = last = None
        n = 0
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                break
            sec, frac, incl, _orig = struct.unpack(endian + "IIII", rec)
            f.seek(incl, 1)
            t = sec + frac / (1e9 if nano else 1e6)
            first = t if first is None else first
            last = t
            n += 1
        out["packets"] = n
        if first is not None:
            out["duration_s"] = round(last - first, 3)
    return out


# ----------------------------------------------------------------------------
# The lab
# ----------------------------------------------------------------------------


class Lab:
    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.ns = {r: f"{PREFIX}-{tag}-{r[0]}" for r in ("client", "router", "server")}
        self.work = Path(f"/tmp/{PREFIX}-{tag}")
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.starver: Starver | None = None
        self.cgroup: Path | None = None
        # Every server, client and the emulator share CPU 0, tcpdump gets the
        # rest.  Spread over 2 CPUs, veth forwarding reorders a host's own
        # segments (a data segment queued on one CPU's backlog, an ACK on the
        # other's): that would be noise in every capture.
        ncpu = os.cpu_count() or 1
        self.app_cpus = "0" if ncpu > 1 else None
        self.cap_cpus = f"1-{ncpu - 1}" if ncpu > 1 else None

    # -- plumbing -------------------------------------------------------------
    def nsx(self, role: str, *argv: str, cpus: str | None = None) -> list[str]:
        pin = ["taskset", "-c", cpus] if cpus else []
        return ["ip", "netns", "exec", self.ns[role], *pin, *argv]

    def sh(self, role: str, *argv: str, check: bool = True, timeout: float = 30,
           cpus: str | None = None):
        return run(self.nsx(role, *argv, cpus=cpus), check=check, timeout=timeout)

    def sysctl(self, role: str, key: str, value: str) -> None:
        self.sh(role, "sysctl", "-q", "-w", f"{key}={value}")

    def start(self, name: str, role: str, argv: list[str], cpus: str | None = "app",
              **kw) -> subprocess.Popen:
        logf = open(self.work / f"{name}.log", "w")  # noqa: SIM115 (closed by the child's exit)
        kw.setdefault("stdout", logf)
        kw.setdefault("stderr", subprocess.STDOUT)
        cpus = self.app_cpus if cpus == "app" else cpus
        p = subprocess.Popen(self.nsx(role, *argv, cpus=cpus), start_new_session=True,
                             stdin=subprocess.DEVNULL, **kw)
        self.procs.append((name, p))
        return p

    def stop(self, name: str, p: subprocess.Popen, sig: int = signal.SIGTERM,
             timeout: float = 5.0) -> int | None:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGCONT)
                os.kill(p.pid, sig)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(3)
        return p.returncode

    # -- topology -------------------------------------------------------------
    def build(self, emulator: bool) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        for ns in self.ns.values():
            run(["ip", "netns", "add", ns])
        c, r, s = self.ns["client"], self.ns["router"], self.ns["server"]
        for role in self.ns:
            self.sh(role, "ip", "link", "set", "lo", "up")
            self.sysctl(role, "net.ipv6.conf.all.disable_ipv6", "1")
            self.sysctl(role, "net.ipv6.conf.default.disable_ipv6", "1")
            self.sysctl(role, "net.ipv4.tcp_no_metrics_save", "1")
        run(["ip", "-n", c, "link", "add", "c0", "type", "veth", "peer", "name", "r0", "netns", r])
        run(["ip", "-n", s, "link", "add", "s0", "type", "veth", "peer", "name", "r1", "netns", r])
        for role, dev, addr in (("client", "c0", CLIENT_IP), ("router", "r0", ROUTER_CIP),
                                ("router", "r1", ROUTER_SIP), ("server", "s0", SERVER_IP)):
            self.sh(role, "ip", "addr", "add", f"{addr}/24", "dev", dev)
            self.sh(role, "ip", "link", "set", dev, "up")
            # one packet per frame on the wire: captures show what a NIC would send
            self.sh(role, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off",
                    check=False)
        self.sh("client", "ip", "route", "add", SERVER_NET, "via", ROUTER_CIP)
        self.sh("server", "ip", "route", "add", CLIENT_NET, "via", ROUTER_SIP)
        self.sysctl("router", "net.ipv4.ip_forward", "1")
        if emulator:
            for k in ("all", "default"):
                self.sysctl("router", f"net.ipv4.conf.{k}.rp_filter", "0")
            self.sh("router", "ip", "tuntap", "add", "dev", "wan0", "mode", "tun")
            self.sh("router", "ip", "link", "set", "wan0", "mtu", "1500", "txqueuelen", "2000",
                    "up")
            self.sysctl("router", "net.ipv4.conf.wan0.rp_filter", "0")
            # traffic entering from either veth goes into the emulator; what it
            # writes back enters with iif wan0 and uses the main table
            self.sh("router", "ip", "route", "add", SERVER_NET, "dev", "wan0", "table", "100")
            self.sh("router", "ip", "route", "add", CLIENT_NET, "dev", "wan0", "table", "101")
            self.sh("router", "ip", "rule", "add", "iif", "r0", "lookup", "100", "pref", "100")
            self.sh("router", "ip", "rule", "add", "iif", "r1", "lookup", "101", "pref", "101")

    def tbf(self, role: str, mbit: float) -> None:
        dev = {"client": "c0", "server": "s0"}[role]
        burst = max(15000, int(mbit * 1e6 / 8 / 250))  # ~4 ms worth, at least 10 packets
        self.sh(role, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{mbit}mbit",
                "burst", str(burst), "limit", str(8 * 1024 * 1024))

    def start_wanem(self, cfg: dict, seed: int) -> None:
        ready = self.work / "wanem.ready"
        self.wanem_stats = self.work / "wanem.json"
        self.wanem = self.start("wanem", "router", [
            PYTHON, str(HERE / "wanem.py"), "--tun", "wan0", "--client-net", CLIENT_NET,
            "--server-net", SERVER_NET, "--config", json.dumps(cfg), "--seed", str(seed),
            "--max-seconds", "900", "--stats", str(self.wanem_stats), "--ready", str(ready)])
        wait_for(lambda: ready.exists(), 10, "wanem to attach to the tun")

    # -- servers --------------------------------------------------------------
    def mount_tmpfs(self, path: Path, size_mb: int) -> None:
        path.mkdir(parents=True, exist_ok=True)
        run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=1777", "tmpfs", str(path)])

    def start_smbd(self, share_mb: int) -> Path:
        d = self.work / "smb"
        for sub in ("state", "priv", "lock", "cache", "pid", "ncalrpc", "log"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        share = d / "share"
        self.mount_tmpfs(share, share_mb)
        conf = d / "smb.conf"
        conf.write_text(f"""[global]
  workgroup = LAB
  netbios name = LABSRV
  server role = standalone server
  security = user
  map to guest = Bad User
  guest account = nobody
  restrict anonymous = 0
  server min protocol = SMB2_02
  interfaces = {SERVER_IP}/24
  bind interfaces only = yes
  smb ports = 445
  disable netbios = yes
  load printers = no
  printing = bsd
  printcap name = /dev/null
  disable spoolss = yes
  log level = 1
  log file = {d}/log/log.%m
  max log size = 1000
  lock directory = {d}/lock
  state directory = {d}/state
  cache directory = {d}/cache
  pid directory = {d}/pid
  private dir = {d}/priv
  ncalrpc dir = {d}/ncalrpc
  passdb backend = tdbsam:{d}/priv/passdb.tdb
[share]
  path = {share}
  guest ok = yes
  guest only = yes
  read only = no
  force user = root
""")
        self.server_proc = self.start("smbd", "server", [
            "smbd", "--foreground", "--no-process-group", "-s", str(conf), "--debug-stdout"])
        self.server_comm = ("smbd",)
        wait_for(lambda: self.listening(445), 15, "smbd to listen on 445")
        return share

    def start_ganesha(self, share_mb: int) -> Path:
        d = self.work / "nfs"
        (d / "recov").mkdir(parents=True, exist_ok=True)
        export = d / "export"
        self.mount_tmpfs(export, share_mb)
        conf = d / "ganesha.conf"
        conf.write_text(f"""NFS_CORE_PARAM {{
  Bind_addr = {SERVER_IP};
  Protocols = 3, 4;
  Enable_NLM = false;
  Enable_RQUOTA = false;
  NFS_Port = 2049;
  MNT_Port = 20048;
  Mount_Path_Pseudo = true;
}}
NFSV4 {{
  Graceless = true;
  RecoveryBackend = fs;
  RecoveryRoot = {d}/recov;
}}
NFS_KRB5 {{ Active_krb5 = false; }}
EXPORT {{
  Export_Id = 1;
  Path = {export};
  Pseudo = /export;
  FSAL {{ Name = VFS; }}
  Protocols = 3, 4;
  Transports = TCP;
  Access_Type = RW;
  Squash = No_Root_Squash;
  SecType = sys;
  CLIENT {{ Clients = *; Access_Type = RW; }}
}}
LOG {{ Default_Log_Level = EVENT; }}
""")
        # rpcbind and ganesha share a private /run so that neither touches the
        # host's rpcbind socket or pid files (ip netns exec only isolates the net)
        script = (
            "mount -t tmpfs tmpfs /run && mkdir -p /run/rpcbind /run/ganesha && "
            "(rpcbind -f -w &) && sleep 0.3 && "
            f"exec ganesha.nfsd -F -f {conf} -L {d}/ganesha.log -p /run/ganesha/ganesha.pid "
            "-N NIV_EVENT")
        self.server_proc = self.start("ganesha", "server", [
            "unshare", "-m", "--propagation", "private", "sh", "-c", script])
        self.server_comm = ("ganesha.nfsd",)
        wait_for(lambda: self.listening(2049) and self.listening(20048) and self.listening(111),
                 20, "ganesha to listen on 2049/20048 and rpcbind on 111")
        return export

    def listening(self, port: int) -> bool:
        r = self.sh("server", "ss", "-Hltn", f"sport = :{port}", check=False)
        return bool(r.stdout.strip())

    def server_pids(self) -> list[int]:
        """Server daemon processes in the server namespace (a /proc scan, no fork)."""
        ino = os.stat(f"/run/netns/{self.ns['server']}").st_ino
        out = []
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                if Path(f"/proc/{d}/comm").read_text().strip() not in self.server_comm:
                    continue
                if os.stat(f"/proc/{d}/ns/net").st_ino == ino:
                    out.append(int(d))
            except OSError:
                continue
        return out

    def tcp_probe(self, port: int) -> None:
        """One TCP connect from the client: resolves ARP before capturing starts."""
        code = (f"import socket;s=socket.create_connection(('{SERVER_IP}',{port}),5);s.close()")
        self.sh("client", PYTHON, "-c", code, timeout=15, cpus=self.app_cpus)

    # -- captures -------------------------------------------------------------
    def start_capture(self, role: str, path: Path, snaplen: int) -> subprocess.Popen:
        dev = {"client": "c0", "server": "s0"}[role]
        p = self.start(f"tcpdump-{role}", role, [
            "tcpdump", "-i", dev, "-n", "-U", "--immediate-mode", "-B", "32768",
            "-s", str(snaplen), "-Z", "root",
            "-w", str(path), "ip"], cpus=self.cap_cpus, stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL)
        assert p.stderr is not None
        deadline = time.monotonic() + 10
        buf = b""
        while time.monotonic() < deadline:
            r, _, _ = select.select([p.stderr], [], [], 0.2)
            if r:
                chunk = os.read(p.stderr.fileno(), 4096)
                if not chunk:
                    break
                buf += chunk
                if b"listening on" in buf:
                    break
            if p.poll() is not None:
                break
        if b"listening on" not in buf:
            raise RuntimeError(f"tcpdump ({role}) did not start: {buf.decode(errors='replace')}")
        p._lab_stderr = buf  # type: ignore[attr-defined]
        return p

    def stop_capture(self, p: subprocess.Popen) -> dict:
        self.stop("tcpdump", p, signal.SIGINT, 10)
        rest = b""
        if p.stderr:
            with contextlib.suppress(OSError, ValueError):
                rest = p.stderr.read()
            p.stderr.close()
        text = (p._lab_stderr + rest).decode(errors="replace")  # type: ignore[attr-defined]
        info = {}
        for key, pat in (("captured", r"(\d+) packets? captured"),
                         ("dropped_by_kernel", r"(\d+) packets? dropped by kernel")):
            m = re.search(pat, text)
            if m:
                info[key] = int(m.group(1))
        return info

    # -- CPU starvation ---------------------------------------------------------
    def cgroup_quota(self, pids: list[int], quota_us: int, period_us: int) -> None:
        if not (CGROUP_CPU / "cpu.cfs_quota_us").exists():
            raise RuntimeError("cgroup v1 cpu controller not found at /sys/fs/cgroup/cpu")
        cg = CGROUP_CPU / f"{PREFIX}-{self.tag}"
        cg.mkdir(exist_ok=True)
        self.cgroup = cg
        (cg / "cpu.cfs_period_us").write_text(str(period_us))
        (cg / "cpu.cfs_quota_us").write_text(str(quota_us))
        for p in pids:
            with contextlib.suppress(OSError):
                (cg / "cgroup.procs").write_text(str(p))

    # -- teardown -------------------------------------------------------------
    def cleanup(self) -> None:
        if self.starver:
            self.starver.stop()
        for name, p in reversed(self.procs):
            self.stop(name, p, timeout=3)
        if self.cgroup:
            # put tasks back to the root group before removing
            with contextlib.suppress(OSError):
                for p in (self.cgroup / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        (CGROUP_CPU / "cgroup.procs").write_text(p)
        remove_tag(self.tag)


class Starver:
    """SIGSTOP/SIGCONT duty cycle of the server daemon (bounded cycles)."""

    def __init__(self, lab: Lab, cfg: dict) -> None:
        self.lab = lab
        self.cfg = cfg
        self.halt = threading.Event()
        self.cycles = 0
        self.stopped_s = 0.0
        self.seen: set[int] = set()
        self.t = threading.Thread(target=self.loop, daemon=True)

    def start(self) -> None:
        self.t.start()

    def refresh(self) -> list[int]:
        pids = self.lab.server_pids()
        self.seen.update(pids)
        self.refreshed = time.monotonic()
        return pids

    @staticmethod
    def signal(pids, sig: int) -> None:
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, sig)

    def loop(self) -> None:
        c = self.cfg
        pids = self.refresh()
        if self.halt.wait(c.get("first_run_ms", 0) / 1000):
            return
        try:
            for _ in range(int(c["max_cycles"])):
                # new smbd children appear when a client connects: look again
                # now and then (a /proc scan, a few ms of the run phase)
                if time.monotonic() - self.refreshed > 0.25:
                    pids = self.refresh()
                t0 = time.monotonic()
                self.signal(pids, signal.SIGSTOP)
                self.halt.wait(c["stop_ms"] / 1000)
                self.signal(pids, signal.SIGCONT)
                t1 = time.monotonic()
                self.stopped_s += t1 - t0
                self.cycles += 1
                if self.halt.is_set():
                    return
                left = c["run_ms"] / 1000 - (time.monotonic() - t1)
                if left > 0 and self.halt.wait(left):
                    return
        finally:
            self.signal(self.seen, signal.SIGCONT)

    def stop(self) -> None:
        self.halt.set()
        self.t.join(5)
        self.signal(self.seen, signal.SIGCONT)


def allow_congestion_control(name: str) -> None:
    """A namespace may only default to an algorithm in the host's allowed list."""
    allowed = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
    avail = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    if name not in avail:
        raise RuntimeError(f"congestion control {name} not available (have {avail})")
    cur = allowed.read_text().split()
    if name not in cur:
        log(f"adding {name} to net.ipv4.tcp_allowed_congestion_control (host)")
        allowed.write_text(" ".join([*cur, name]))


def wait_for(pred, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}")


# ----------------------------------------------------------------------------
# One scenario
# ----------------------------------------------------------------------------


def tool_version(argv: list[str]) -> str:
    try:
        r = run(argv, check=False, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return (r.stdout or r.stderr).strip().splitlines()[0] if (r.stdout or r.stderr) else "?"


def write_random(path: Path, size: int, seed: str) -> str:
    """Deterministic incompressible content; returns its sha256."""
    h = hashlib.sha256()
    block = hashlib.sha256(seed.encode()).digest()
    with path.open("wb") as f:
        left = size
        i = 0
        while left > 0:
            chunk = b"".join(hashlib.sha256(block + struct.pack("<QI", i, j)).digest()
                             for j in range(2048))  # 64 KiB
            chunk = chunk[:left]
            f.write(chunk)
            h.update(chunk)
            left -= len(chunk)
            i += 1
    return h.hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def client_command(lab: Lab, sc: dict, size: int, local: Path,
                   file_name: str = FILE_NAME, probes: tuple[str, ...] = ()) -> list[str]:
    proto, op, client = sc["protocol"], sc["op"], sc["client"]
    if probes and client != "loadgen":
        raise ValueError("--probe-name needs a loadgen scenario")
    if client == "smbclient":
        maxp = sc.get("smb_max_protocol", "SMB3")
        if any(c in file_name for c in '";'):
            raise ValueError(
                "smbclient cannot name a file with '\"' or ';' (use a loadgen scenario)"
            )
        name = f'"{file_name}"'
        cmd = f"get {name} {local}" if op == "read" else f"put {local} {name}"
        return ["smbclient", f"//{SERVER_IP}/share", "-N", "-m", maxp, "-c", cmd]
    if client == "nfs-cp":
        if any(c in file_name for c in "?#% "):
            raise ValueError(
                "nfs-cp takes a URL: no '?', '#', '%' or space (use a loadgen scenario)"
            )
        url = f"nfs://{SERVER_IP}/export/{file_name}"
        if proto == "nfs4":
            url += "?version=4"
        return ["nfs-cp", url, str(local)] if op == "read" else ["nfs-cp", str(local), url]
    if client == "loadgen":
        argv = [PYTHON, str(HERE / "loadgen.py"), "smb2" if proto == "smb2" else "nfs3",
                "--server", SERVER_IP, "--op", op, "--file", file_name,
                "--outstanding", str(sc.get("outstanding", 1)),
                "--io-size", str(sc.get("io_size", 65536)), "--bytes", str(size),
                "--max-seconds", "120", "--json", str(lab.work / "loadgen.json")]
        argv += ["--share", "share"] if proto == "smb2" else ["--export", "/export"]
        for probe in probes:
            argv += ["--probe", probe]
        return argv
    raise ValueError(client)


def apply_overrides(sc: dict, sets: list[str]) -> dict:
    """--set a.b.c=VALUE (VALUE as JSON, else a string) on a copy of a scenario."""
    sc = json.loads(json.dumps(sc))
    for item in sets:
        key, _, raw = item.partition("=")
        try:
            val = json.loads(raw)
        except ValueError:
            val = raw
        parts = key.split(".")
        d = sc
        for p in parts[:-1]:
            if not isinstance(d.get(p), dict):
                d[p] = {}
            d = d[p]
        d[parts[-1]] = val
    return sc


def run_scenario(name: str, args: argparse.Namespace, tag: str) -> dict:
    sc = apply_overrides(SCENARIOS[name], args.set)
    if sc.get("starve") and sc["starve"].get("mode") not in ("stop", "cgroup"):
        raise RuntimeError(f"starve needs mode stop or cgroup: {sc['starve']}")
    size = int(float(args.size if args.size is not None else sc["size"]) * 1024 * 1024)
    file_name = args.file_name
    if not file_name or "/" in file_name or "\0" in file_name or file_name in (".", ".."):
        raise ValueError(f"--file-name must be one path component, not {file_name!r}")
    snaplen = args.snaplen
    client_snaplen = args.client_snaplen or snaplen
    server_snaplen = args.server_snaplen or snaplen
    out = Path(args.out) / name
    out.mkdir(parents=True, exist_ok=True)
    for f in ("client.pcap", "server.pcap", "label.json"):
        with contextlib.suppress(FileNotFoundError):
            (out / f).unlink()
    lab = Lab(tag)
    started = _dt.datetime.now(_dt.timezone.utc)
    t_start = time.monotonic()
    log(f"{name}: building namespaces {', '.join(lab.ns.values())}")
    label: dict = {}
    try:
        wan = sc.get("wan")
        lab.build(emulator=wan is not None)
        for role, kv in (sc.get("sysctl") or {}).items():
            for k, v in kv.items():
                if k == "net.ipv4.tcp_congestion_control":
                    allow_congestion_control(v)
                lab.sysctl(role, k, v)
        for role, mbit in (sc.get("tbf") or {}).items():
            lab.tbf(role, mbit)
        if wan is not None:
            lab.start_wanem(wan, args.seed)
        share_mb = max(64, size // (1 << 20) * 2 + 32)
        if sc["protocol"] == "smb2":
            export = lab.start_smbd(share_mb)
            port = 445
        else:
            export = lab.start_ganesha(share_mb)
            port = 2049
        local = lab.work / ("client-" + FILE_NAME)
        if sc["op"] == "read":
            digest = write_random(export / file_name, size, name)
        else:
            digest = write_random(local, size, name)
        lab.tcp_probe(port)
        if sc.get("starve", {}).get("mode") == "cgroup":
            st = sc["starve"]
            lab.cgroup_quota(lab.server_pids(), st["quota_us"], st["period_us"])
        log(f"{name}: capturing; {sc['client']} {sc['op']} of {size >> 20} MiB")
        cap_c = lab.start_capture("client", out / "client.pcap", client_snaplen)
        cap_s = lab.start_capture("server", out / "server.pcap", server_snaplen)
        time.sleep(0.2)
        if sc.get("starve", {}).get("mode") == "stop":
            lab.starver = Starver(lab, sc["starve"])
            lab.starver.start()
        argv = client_command(lab, sc, size, local, file_name, tuple(args.probe_name))
        t0 = time.monotonic()
        cp = lab.sh("client", *argv, check=False, timeout=args.timeout, cpus=lab.app_cpus)
        elapsed = time.monotonic() - t0
        if lab.starver:
            lab.starver.stop()
        time.sleep(0.3)  # let the last ACKs / FINs reach both captures
        # tcpdump (on its own CPU) may lag behind a fast transfer; SIGINT
        # stops it at once and what it has not read yet is lost. Wait until
        # both capture files stop growing (bounded).
        wait_until_stable([out / "client.pcap", out / "server.pcap"], quiet_s=0.5, limit_s=15)
        cinfo = lab.stop_capture(cap_c)
        sinfo = lab.stop_capture(cap_s)
        (lab.work / "client.out").write_text(cp.stdout + cp.stderr)
        if cp.returncode != 0:
            raise RuntimeError(f"client failed ({cp.returncode}): {(cp.stdout + cp.stderr)[-800:]}")
        # verify the data really moved
        if sc["client"] != "loadgen":
            got = local if sc["op"] == "read" else export / file_name
            if not got.exists() or sha256_file(got) != digest:
                raise RuntimeError(f"transferred file differs from the original ({got})")
        lg = {}
        if sc["client"] == "loadgen":
            lg = json.loads((lab.work / "loadgen.json").read_text())
            if lg.get("bytes") != size:
                raise RuntimeError(f"loadgen moved {lg.get('bytes')} of {size} bytes")
        wstats = None
        if wan is not None:
            lab.stop("wanem", lab.wanem, signal.SIGTERM, 5)
            with contextlib.suppress(OSError, ValueError):
                wstats = json.loads(lab.wanem_stats.read_text())
        label = make_label(name, sc, args, size, started, elapsed, lab, cinfo, sinfo,
                           out, wstats, lg, client_snaplen, server_snaplen)
        (out / "label.json").write_text(json.dumps(label, indent=2) + "\n")
        log(f"{name}: done in {time.monotonic() - t_start:.1f} s "
            f"(transfer {elapsed:.2f} s, {size * 8 / elapsed / 1e6:.1f} Mbit/s)")
        if args.keep_logs:
            dst = out / "logs"
            shutil.rmtree(dst, ignore_errors=True)
            dst.mkdir()
            for f in lab.work.glob("*.log"):
                shutil.copy(f, dst / f.name)
            for f in lab.work.glob("*.json"):
                shutil.copy(f, dst / f.name)
            with contextlib.suppress(OSError):
                shutil.copy(lab.work / "client.out", dst / "client.out")
            for f in (lab.work / "nfs").glob("*.log") if (lab.work / "nfs").exists() else []:
                shutil.copy(f, dst / f.name)
    finally:
        lab.cleanup()
    return label


def make_label(name, sc, args, size, started, elapsed, lab, cinfo, sinfo, out, wstats, lg,
               client_snaplen, server_snaplen) -> dict:
    wan = sc.get("wan") or {}
    c2s, s2c = wan.get("c2s", {}), wan.get("s2c", {})
    rtt = float(c2s.get("delay_ms", 0)) + float(s2c.get("delay_ms", 0))
    rates = [d["rate_bps"] / 1e6 for d in (c2s, s2c) if d.get("rate_bps")]
    tbf = sc.get("tbf") or {}
    bottleneck = min(rates) if rates else (min(tbf.values()) if tbf else None)
    bufs = [d.get("buffer_pkts") for d in (c2s, s2c) if d.get("rate_bps")]
    sysc = sc.get("sysctl") or {}

    def cc(role: str) -> str:
        return (sysc.get(role) or {}).get("net.ipv4.tcp_congestion_control", "default")

    def ws(role: str) -> bool:
        return (sysc.get(role) or {}).get("net.ipv4.tcp_window_scaling", "1") != "0"

    starve = sc.get("starve")
    server_delay_ms = None
    if starve and starve["mode"] == "stop":
        server_delay_ms = starve["stop_ms"]
    elif starve and starve["mode"] == "cgroup":
        # a request arriving while the group is throttled waits for the next period
        server_delay_ms = (starve["period_us"] - starve["quota_us"]) / 1000
    loss = {d: {k: v for k, v in cfg.items() if k in ("loss", "ge", "burst") and v}
            for d, cfg in (("c2s", c2s), ("s2c", s2c))}
    reorder = {d: cfg["reorder"] for d, cfg in (("c2s", c2s), ("s2c", s2c)) if cfg.get("reorder")}
    transfer_s = lg.get("elapsed_s", elapsed) if lg else elapsed
    label = {
        "scenario": name,
        "impairment": sc["impairment"],
        "expected_finding": sc["expected"],
        "protocol": sc["protocol"],
        "operation": sc["op"],
        "file_name": getattr(args, "file_name", FILE_NAME),
        "probe_names": list(getattr(args, "probe_name", [])),
        "client_tool": sc["client"],
        "client_ip": CLIENT_IP,
        "server_ip": SERVER_IP,
        "server_port": 445 if sc["protocol"] == "smb2" else 2049,
        "rtt_ms": rtt,
        "one_way_delay_ms": {"c2s": c2s.get("delay_ms", 0), "s2c": s2c.get("delay_ms", 0)},
        "bottleneck_mbps": bottleneck,
        "bottleneck_where": ("router (wanem, drop-tail)" if rates else
                             ("host egress tbf " + json.dumps(tbf)) if tbf else None),
        "buffer_packets": bufs[0] if bufs else None,
        "loss": loss if any(loss.values()) else None,
        "reorder": reorder or None,
        "congestion_control": {"client": cc("client"), "server": cc("server")},
        "window_scaling": {"client": ws("client"), "server": ws("server")},
        "sysctl": sysc,
        "outstanding_limit": sc.get("outstanding") if sc["client"] == "loadgen" else None,
        "io_size": sc.get("io_size") if sc["client"] == "loadgen" else None,
        "server_starvation": starve,
        "server_delay_ms": server_delay_ms,
        "stall_cycles": lab.starver.cycles if lab.starver else None,
        "bytes_transferred": size,
        "transfer_seconds": round(transfer_s, 3),
        "throughput_mbps": round(size * 8 / transfer_s / 1e6, 2) if transfer_s else None,
        "started_at": started.isoformat(timespec="milliseconds"),
        "seed": args.seed,
        "overrides": args.set or None,
        "captures": {
            "client": {**pcap_summary(out / "client.pcap"), "interface": "c0 (client namespace)",
                       **cinfo},
            "server": {**pcap_summary(out / "server.pcap"), "interface": "s0 (server namespace)",
                       **sinfo},
        },
        "emulator": wstats,
        "loadgen": lg or None,
        "versions": {
            "kernel": os.uname().release,
            "smbd": tool_version(["smbd", "--version"]) if sc["protocol"] == "smb2" else None,
            "ganesha": tool_version(["dpkg-query", "-W", "-f", "${Version}", "nfs-ganesha"])
            if sc["protocol"] != "smb2" else None,
            "libnfs": tool_version(["dpkg-query", "-W", "-f", "${Version}", "libnfs-utils"])
            if sc["client"] == "nfs-cp" else None,
        },
    }
    return label


def bench_wanem(args: argparse.Namespace, tag: str) -> dict:
    """How fast the emulator forwards: iperf3 (server -> client) through it."""
    if not shutil.which("iperf3"):
        raise RuntimeError("bench-wanem needs iperf3 (apt-get install iperf3)")
    results = {}
    for i, rate in enumerate(args.bench_rates):
        lab = Lab(f"{tag}b{i}")
        try:
            d = {"delay_ms": args.bench_delay / 2}
            if rate:
                d.update(rate_bps=int(rate * 1e6), buffer_pkts=args.bench_buffer)
            lab.build(emulator=True)
            lab.start_wanem({"c2s": {"delay_ms": args.bench_delay / 2}, "s2c": d}, 1)
            lab.start("iperf3-server", "server", ["iperf3", "-s", "-1", "-B", SERVER_IP])
            time.sleep(0.5)
            r = lab.sh("client", "iperf3", "-c", SERVER_IP, "-R", "-t", str(args.bench_seconds),
                       "-J", timeout=args.bench_seconds + 30, cpus=lab.app_cpus)
            ip = json.loads(r.stdout)["end"]
            tun = json.loads(lab.sh("router", "ip", "-j", "-s", "link", "show", "wan0").stdout)
            lab.stop("wanem", lab.wanem, signal.SIGTERM, 5)
            w = json.loads(lab.wanem_stats.read_text())
            res = {
                "received_mbps": round(ip["sum_received"]["bits_per_second"] / 1e6, 1),
                "sender_retransmits": ip["sum_sent"].get("retransmits"),
                "tun_tx_dropped": tun[0]["stats64"]["tx"]["dropped"],
                "emulator_queue_drops": w["s2c"]["drop_queue"],
                "emulator_packets_s2c": w["s2c"]["packets_out"],
                "lateness_ms_mean": w["lateness_ms_mean"],
                "lateness_ms_max": w["lateness_ms_max"],
            }
            results[f"{rate or 'unlimited'}"] = res
            log(f"bench rate={rate or 'unlimited'} Mbit/s: {res}")
        finally:
            lab.cleanup()
    return results


# ----------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(prog="lab/run.sh", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario", nargs="*", help="scenario names, 'list', 'all' or 'cleanup'")
    ap.add_argument("--out", default="/tmp/nastriage-lab",
                    help="output directory (default /tmp/nastriage-lab)")
    ap.add_argument("--size", type=float, help="transfer size in MiB (default: per scenario)")
    ap.add_argument("--snaplen", type=int, default=262144, help="tcpdump -s for both captures")
    ap.add_argument("--client-snaplen", type=int, help="tcpdump -s for the client capture")
    ap.add_argument("--server-snaplen", type=int, help="tcpdump -s for the server capture")
    ap.add_argument("--seed", type=int, default=1, help="emulator random seed")
    ap.add_argument("--timeout", type=float, default=180, help="client time limit in seconds")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a scenario parameter, e.g. --set tbf.client=20 "
                         "--set starve.first_run_ms=150 (VALUE is JSON or a string)")
    ap.add_argument("--file-name", default=FILE_NAME,
                    help=f"name of the transferred file (default {FILE_NAME}); any bytes but '/' "
                         "and NUL, e.g. hostile names for the report's escaping tests")
    ap.add_argument("--probe-name", action="append", default=[], metavar="NAME",
                    help="loadgen scenarios: the client also tries to open NAME before the "
                         "transfer and ignores the result (repeatable; e.g. names with '<' "
                         "that smbd refuses but that the capture should contain)")
    ap.add_argument("--keep-logs", action="store_true", help="copy daemon logs to OUT/SCEN/logs")
    ap.add_argument("--tag", default=str(os.getppid()), help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true", help="with 'list': print JSON")
    ap.add_argument("--bench-rates", type=float, nargs="*", default=[0, 50, 100, 200, 400],
                    help="bench-wanem: bottleneck rates in Mbit/s to try (0 = unlimited)")
    ap.add_argument("--bench-delay", type=float, default=15.0, help="bench-wanem: RTT in ms")
    ap.add_argument("--bench-buffer", type=int, default=1000, help="bench-wanem: buffer pkts")
    ap.add_argument("--bench-seconds", type=int, default=5, help="bench-wanem: iperf3 -t")
    args = ap.parse_args()

    if not args.scenario or args.scenario == ["list"]:
        if args.json:
            print(json.dumps({k: {kk: v[kk] for kk in ("protocol", "op", "client", "expected",
                                                       "impairment", "size")}
                              for k, v in SCENARIOS.items()}, indent=1))
        else:
            for k, v in SCENARIOS.items():
                print(f"{k:32s} {v['expected']:26s} {v['impairment']}")
        return 0
    if args.scenario == ["cleanup"]:
        removed = cleanup_tags(tag_owner(args.tag))
        for r in removed:
            print(f"removed {r}")
        return 0
    if os.geteuid() != 0:
        print("lab: must run as root (network namespaces, tcpdump, mounts)", file=sys.stderr)
        return 2
    if args.scenario == ["bench-wanem"]:
        cleanup_tags()
        print(json.dumps(bench_wanem(args, args.tag), indent=1))
        return 0
    names = list(SCENARIOS) if args.scenario == ["all"] else args.scenario
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        print(f"lab: unknown scenario(s): {', '.join(unknown)} (see 'lab/run.sh list')",
              file=sys.stderr)
        return 2

    def on_term(signum, _frm):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    cleanup_tags()
    failed = []
    try:
        return run_all(names, args, failed)
    except KeyboardInterrupt:
        log("interrupted: everything this run started has been stopped and removed")
        return 130


def run_all(names: list[str], args: argparse.Namespace, failed: list[str]) -> int:
    for i, name in enumerate(names):
        # a distinct tag per scenario keeps a lingering namespace from clashing
        tag = f"{args.tag}s{i}"
        try:
            run_scenario(name, args, tag)
        except Exception as e:  # one failed scenario must not stop the others
            log(f"{name}: FAILED: {type(e).__name__}: {e}")
            failed.append(name)
    if failed:
        log(f"failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
