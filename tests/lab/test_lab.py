"""Tests of the scenario lab (lab/): the WAN emulator's model, and real runs.

The real runs build network namespaces, start smbd / nfs-ganesha, and capture
with tcpdump: they need root, a working `ip netns`, and the packages of
lab/install.sh; otherwise they are skipped (NASTRIAGE_LAB=0 skips them too).
Three short scenarios run in one lab/run.sh call (about 20 s in all).
"""

from __future__ import annotations

import collections
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab_env import lab_unavailable

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "lab"
LABEL_KEYS = (
    "scenario", "impairment", "expected_finding", "protocol", "rtt_ms", "bottleneck_mbps",
    "buffer_packets", "loss", "reorder", "congestion_control", "window_scaling",
    "outstanding_limit", "server_delay_ms", "bytes_transferred", "started_at", "captures",
)  # fmt: skip
FINDINGS = {
    "none", "receiver-stall", "congestion-loss", "reordering", "receive-window-limited",
    "server-latency", "client-concurrency-limit",
}  # fmt: skip


def load_module(name: str):
    spec = importlib.util.spec_from_file_location(f"lab_{name}", LAB / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


# --- no root needed ---------------------------------------------------------


def test_scenario_list_covers_every_finding() -> None:
    r = subprocess.run(
        [sys.executable, str(LAB / "lab.py"), "list", "--json"],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    scen = json.loads(r.stdout)
    assert {s["expected"] for s in scen.values()} == FINDINGS
    for proto in ("nfs3", "smb2"):
        for finding in FINDINGS:
            assert any(
                s["protocol"] == proto and s["expected"] == finding for s in scen.values()
            ), (proto, finding)


def pkt(payload: int) -> bytes:
    """A minimal IPv4/TCP packet with `payload` bytes of data, client -> server."""
    total = 40 + payload
    ip = bytes([0x45, 0, total >> 8, total & 0xFF, 0, 0, 0, 0, 64, 6, 0, 0])
    ip += bytes([10, 77, 1, 2, 10, 77, 2, 2])
    tcp = bytes(12) + bytes([0x50, 0x10]) + bytes(6)
    return ip + tcp + bytes(payload)


def test_wanem_rate_and_droptail() -> None:
    w = load_module("wanem")
    d = w.Direction("s2c", {"rate_bps": 12_000_000, "buffer_pkts": 4, "delay_ms": 5}, 1)
    p = pkt(1460)  # 1500 bytes = 1 ms at 12 Mbit/s
    times = [d.schedule(p, 0.0) for _ in range(6)]
    assert times[:4] == pytest.approx([0.006, 0.007, 0.008, 0.009])
    assert times[4:] == [None, None]
    assert d.stats["drop_queue"] == 2
    # once the queue drains, packets pass again
    assert d.schedule(p, 0.0095) == pytest.approx(0.0155)


def test_wanem_burst_loss_and_reorder_are_deterministic() -> None:
    w = load_module("wanem")
    d = w.Direction("s2c", {"burst": [3, 10]}, 7)
    lost = [d.schedule(pkt(100), 0.0) is None for _ in range(30)]
    assert [i for i, x in enumerate(lost) if x] == [9, 10, 11, 19, 20, 21, 29]
    # pure ACKs are not touched by loss
    assert d.schedule(pkt(0), 0.0) is not None
    r = w.Direction("s2c", {"reorder": {"every": 5, "burst": 2, "hold_ms": 3}}, 7)
    t = [r.schedule(pkt(100), 0.0) for _ in range(10)]
    held = [i for i, x in enumerate(t) if x and x > 0]
    assert held == [4, 5, 9]
    assert r.stats["reordered"] == 3
    g1 = w.Direction("c2s", {"ge": [0.05, 0.3, 1.0], "loss": 0.01}, 3)
    g2 = w.Direction("c2s", {"ge": [0.05, 0.3, 1.0], "loss": 0.01}, 3)
    a = [g1.schedule(pkt(10), 0.0) is None for _ in range(2000)]
    b = [g2.schedule(pkt(10), 0.0) is None for _ in range(2000)]
    assert a == b and 0 < sum(a) < 600


# --- real runs ----------------------------------------------------------------

RUNS = {
    # scenario: (extra arguments, protocol tshark must see)
    "nfs3-healthy-lan": (["--size", "2"], "nfs"),
    "smb2-client-concurrency-limit": (["--size", "1"], "smb2"),
    "nfs3-congestion-loss": (["--size", "2"], "nfs"),
}


def lab_leftovers(tag: str) -> list[str]:
    out = []
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10)
    out += [ln.split()[0] for ln in r.stdout.splitlines() if ln.startswith(f"ntlab-{tag}")]
    out += [str(p) for p in Path("/tmp").glob(f"ntlab-{tag}*")]
    out += [str(p) for p in Path("/sys/fs/cgroup/cpu").glob(f"ntlab-{tag}*")]
    return out


def lab_pids(out: Path) -> set[int]:
    """Processes that belong to a lab run: their command line names the lab's
    work or output directory or one of its scripts, or they are an rpcbind in
    a network namespace other than the host's."""
    host_net = os.stat("/proc/self/ns/net").st_ino
    marks = (b"/tmp/ntlab-", str(out).encode(), b"wanem.py", b"loadgen.py")
    pids = set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            comm = (d / "comm").read_text().strip()
            cmd = (d / "cmdline").read_bytes()
            net = os.stat(d / "ns" / "net").st_ino
        except OSError:
            continue
        if any(m in cmd for m in marks) or (comm == "rpcbind" and net != host_net):
            pids.add(int(d.name))
    return pids


@pytest.fixture(scope="module")
def lab_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    why = lab_unavailable()
    if why:
        pytest.skip(why)
    out = tmp_path_factory.mktemp("lab")
    before = lab_pids(out)
    results = {}
    for name, (extra, _) in RUNS.items():
        p = subprocess.run(
            ["bash", str(LAB / "run.sh"), name, "--out", str(out), *extra],
            capture_output=True, text=True, timeout=150,
        )  # fmt: skip
        results[name] = p
    # run.sh's pid is the tag; it is gone now, so look for any ntlab- leftovers
    # newer than this test session instead: every namespace/dir/cgroup it made
    leftovers = []
    for p in results.values():
        for ln in p.stderr.splitlines():
            if "building namespaces" in ln:
                tag = ln.split("ntlab-")[1].split("-")[0]
                leftovers += lab_leftovers(tag)
    return {"out": out, "results": results, "before": before, "leftovers": leftovers}


@pytest.mark.lab
@pytest.mark.parametrize("name", list(RUNS))
def test_scenario_produces_labelled_captures(lab_run: dict, name: str) -> None:
    p = lab_run["results"][name]
    assert p.returncode == 0, p.stderr[-3000:]
    d = lab_run["out"] / name
    for cap in ("client.pcap", "server.pcap"):
        f = d / cap
        assert f.exists() and f.stat().st_size > 10_000, f
    label = json.loads((d / "label.json").read_text())
    for k in LABEL_KEYS:
        assert k in label, k
    assert label["scenario"] == name
    assert label["expected_finding"] in FINDINGS
    assert label["bytes_transferred"] == int(float(RUNS[name][0][1]) * 1024 * 1024)
    for side in ("client", "server"):
        cap = label["captures"][side]
        assert cap["packets"] > 100
        assert cap.get("dropped_by_kernel", 0) == 0
    if shutil.which("tshark"):
        proto = RUNS[name][1]
        # The NFS clients bind a random reserved port; tshark decodes by the
        # lower port first, so a client on e.g. 524 (NCP) hides the NFS on
        # 2049 unless the RPC heuristic runs first.
        r = subprocess.run(
            ["tshark", "-n", "-r", str(d / "client.pcap"), "-o", "tcp.try_heuristic_first:TRUE",
             "-Y", proto, "-T", "fields", "-e", "frame.number"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert r.stdout.strip(), f"tshark sees no {proto} in {name}"


@pytest.mark.lab
def test_congestion_loss_really_drops(lab_run: dict) -> None:
    label = json.loads((lab_run["out"] / "nfs3-congestion-loss" / "label.json").read_text())
    assert label["rtt_ms"] == 15.0 and label["bottleneck_mbps"] == 20.0
    assert label["congestion_control"]["server"] == "reno"
    assert label["emulator"]["s2c"]["drop_queue"] > 0
    if shutil.which("tshark"):
        # The server sent some data segments twice. (Counted from the segments
        # themselves, not from Wireshark's labels: a resend that follows the duplicate
        # ACKs within its out-of-order window, 3 ms, is labelled out-of-order rather
        # than a retransmission, and on a fast run all of them can be.)
        r = subprocess.run(
            ["tshark", "-n", "-r", str(lab_run["out"] / "nfs3-congestion-loss" / "server.pcap"),
             "-Y", "tcp.len > 0", "-T", "fields",
             "-e", "ip.src", "-e", "tcp.srcport", "-e", "tcp.seq_raw", "-e", "tcp.len"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        segments = r.stdout.split("\n")
        resent = [s for s, n in collections.Counter(segments).items() if s and n > 1]
        assert resent, "no data segment was sent twice"


@pytest.mark.lab
def test_concurrency_limit_label(lab_run: dict) -> None:
    d = lab_run["out"] / "smb2-client-concurrency-limit"
    label = json.loads((d / "label.json").read_text())
    assert label["outstanding_limit"] == 1
    assert label["loadgen"]["max_outstanding_observed"] == 1
    assert label["loadgen"]["latency_ms"]["min"] >= 15.0  # one 15 ms round trip each


@pytest.mark.lab
def test_nothing_left_behind(lab_run: dict) -> None:
    assert lab_run["leftovers"] == []
    assert lab_pids(lab_run["out"]) - lab_run["before"] == set()
