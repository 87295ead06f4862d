"""The TCP metrics on real captures from the scenario lab (docs/tcp-analysis.md, "Measured
on the scenario lab").

A small set of lab runs (real Linux TCP stacks in network namespaces, the userspace WAN
emulator; about 40 s in all) with known path RTT and sender congestion control, analysed
at both capture points (``client.pcap`` next to the receiver of the bulk data,
``server.pcap`` next to its sender):

* RTT: a 0.5 ms LAN, 15 ms and 30 ms WANs. ``rtt_min_ms`` (and the sum of the per-side
  ``rtt_client_side_ms`` + ``rtt_server_side_ms``) must be within max(10 %, 0.5 ms) of the
  label's ``rtt_ms``. The emulator's departures are late by 0.1-0.8 ms on average, but the
  minimum over thousands of samples sees the least late ones (measured: +0.03 to
  +0.75 ms), so the tolerance is not widened. The handshake, a single sample, is only
  required not to be below the path RTT (one was seen 5 ms high).
* Congestion control: the congestion-loss scenario (20 Mbit/s bottleneck, 16-packet
  drop-tail buffer, 15 ms RTT) with the server's algorithm set to reno, cubic and bbr: the
  hint must name it from both capture points (next to the receiver the rounds are clocked
  by TCP timestamps, which Linux sends), except that next to the receiver BBR may be
  reported ``unknown`` with a confidence of at most 0.2 when its losses were too few to
  measure (mostly at startup). Loss-free runs must say ``unknown``.
* Reordering seen next to the receiver is not retransmission; the receive-window-limited
  share is right at both capture points; a starved server's slow ACKs do not inflate its
  side of the RTT.

Skipped without root, ``ip netns`` or the lab's packages (tests/lab_env.py);
``NASTRIAGE_LAB=0`` skips too. ``NASTRIAGE_TCP_LAB_DIR`` reuses the captures of an earlier
run of this module (the directory it printed), then no root is needed.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from lab_env import lab_unavailable

pytestmark = pytest.mark.lab

LAB = Path(__file__).resolve().parents[2] / "lab"

#: Bound on one lab run (they take 3-7 s each).
RUN_TIMEOUT_S = 120


def cc(name: str) -> str:
    return f'sysctl.server={{"net.ipv4.tcp_congestion_control":"{name}"}}'


#: run name -> (scenario, extra lab/run.sh arguments)
RUNS: dict[str, tuple[str, list[str]]] = {
    "lan-0.5ms": (
        "nfs3-healthy-lan",
        [
            "--size", "4",
            "--set", 'wan={"c2s":{"delay_ms":0.25},"s2c":{"delay_ms":0.25}}',
            "--set", 'tbf={"client":100,"server":100}',
        ],
    ),
    "wan-15ms": ("smb2-healthy-wan", ["--size", "4"]),
    "wan-30ms": ("nfs3-receive-window-limited", ["--size", "3"]),
    "reno": ("nfs3-congestion-loss", ["--size", "6", "--set", cc("reno")]),
    "cubic": ("nfs3-congestion-loss", ["--size", "6", "--set", cc("cubic")]),
    "bbr": ("nfs3-congestion-loss", ["--size", "6", "--set", cc("bbr")]),
    "smb2-bbr": ("smb2-congestion-loss", ["--size", "6", "--set", cc("bbr")]),
    "reordering": ("nfs3-reordering", ["--size", "4"]),
    # (its default 16 MiB: shorter transfers end before the CPU quota bites)
    "server-latency": ("nfs3-server-latency", []),
}  # fmt: skip

RTT_RUNS = ("lan-0.5ms", "wan-15ms", "wan-30ms", "reno", "cubic", "bbr")
CC_RUNS = {"reno": "reno-like", "cubic": "cubic-like", "bbr": "bbr-like", "smb2-bbr": "bbr-like"}


@pytest.fixture(scope="module")
def lab_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reuse = os.environ.get("NASTRIAGE_TCP_LAB_DIR")
    if reuse:
        return Path(reuse)
    why = lab_unavailable()
    if why:
        pytest.skip(why)
    out = tmp_path_factory.mktemp("tcp-lab")
    started = time.monotonic()
    for run, (scenario, extra) in RUNS.items():
        p = subprocess.run(
            ["bash", str(LAB / "run.sh"), scenario, "--out", str(out / run), *extra],
            capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
        )  # fmt: skip
        assert p.returncode == 0, (run, p.stderr[-3000:])
    print(f"lab runs in {out} ({time.monotonic() - started:.0f} s)")
    return out


def label(lab_dir: Path, run: str) -> dict[str, Any]:
    scenario = RUNS[run][0]
    return json.loads((lab_dir / run / scenario / "label.json").read_text())  # type: ignore[no-any-return]


def capture(lab_dir: Path, run: str, side: str) -> Any:
    """The run's capture on one side, analysed."""
    import nastriage

    return nastriage.open(lab_dir / run / RUNS[run][0] / f"{side}.pcap")


def connection(lab_dir: Path, run: str, side: str) -> dict[str, Any]:
    """The ``tcp_connections`` row of the run's bulk connection (most payload)."""
    import pyarrow as pa

    cap = capture(lab_dir, run, side)
    cols = ["stream", "payload_bytes_c2s", "payload_bytes_s2c"]
    payload = {
        r["stream"]: r["payload_bytes_c2s"] + r["payload_bytes_s2c"]
        for r in cap.table("conversations").select(cols).to_pylist()
    }
    t = cap.table("tcp_connections")
    t = t.select([f.name for f in t.schema if not pa.types.is_timestamp(f.type)])
    rows = t.to_pylist()
    return max(rows, key=lambda r: (payload.get(r["stream"], 0), r["rtt_samples"]))  # type: ignore[no-any-return]


def within(value: float | None, want: float) -> bool:
    return value is not None and abs(value - want) <= max(0.1 * want, 0.5)


@pytest.mark.parametrize("side", ["client", "server"])
@pytest.mark.parametrize("run", RTT_RUNS)
def test_rtt_estimate(lab_dir: Path, run: str, side: str) -> None:
    want = label(lab_dir, run)["rtt_ms"]
    row = connection(lab_dir, run, side)
    got = row["rtt_min_ms"]
    assert within(got, want), (run, side, got, want)
    sides = row["rtt_client_side_ms"] + row["rtt_server_side_ms"]
    assert within(sides, want), (run, side, sides, want)
    # The handshake is one sample: it cannot be shorter than the path, but a packet the
    # emulator was slow to read can inflate it (seen: +5 ms on a 15 ms path).
    hs = row["rtt_handshake_ms"]
    assert hs is not None and hs >= want - max(0.1 * want, 0.5), row
    # Next to a host its own side is about 0, the other side carries the RTT.
    near = row["rtt_client_side_ms"] if side == "client" else row["rtt_server_side_ms"]
    assert near < 0.25 * want + 0.1, (run, side, row)
    if run not in CC_RUNS:
        # No loss: nothing tells the algorithms apart (a token bucket's spacing at the
        # sender must not pass for BBR's pacing).
        assert row["cc_hint"] == "unknown" and row["cc_confidence"] <= 0.1, row["cc_reasoning"]


@pytest.mark.parametrize("side", ["client", "server"])
@pytest.mark.parametrize("run", list(CC_RUNS))
def test_congestion_control_hint(lab_dir: Path, run: str, side: str) -> None:
    algo = run.split("-")[-1]
    assert label(lab_dir, run)["congestion_control"]["server"] == algo
    row = connection(lab_dir, run, side)
    why = (run, side, row["cc_hint"], row["cc_confidence"], row["cc_reasoning"])
    assert row["retrans_fast_s2c"] > 0
    if side == "client" and algo == "bbr" and row["cc_hint"] != "bbr-like":
        # Next to the receiver BBR shows only as loss events without a reduction; when
        # its losses are few (often only at startup), the client side cannot tell, and
        # must say so.
        assert row["cc_hint"] == "unknown" and row["cc_confidence"] <= 0.2, why
        return
    if side == "server" and algo == "bbr" and "(ACK-clocked bursts)" in row["cc_reasoning"]:
        # On some machines the lab's BBR sender does not pace at all (0 % of about 4,300
        # departures on a 2-core VM, idle or not): BBR is then told only by the missing
        # reduction after a loss, and when no reduction could be measured it cannot be told.
        # Either way, never Reno or CUBIC.
        if row["cc_hint"] == "bbr-like":
            assert row["cc_confidence"] >= 0.4, why
        else:
            assert row["cc_hint"] == "unknown" and row["cc_confidence"] <= 0.2, why
        return
    assert row["cc_direction"] == "s2c", why
    assert row["cc_hint"] == CC_RUNS[run], why
    # Next to the sender the departures (paced or ACK-clocked) add to the reductions. How
    # many of BBR's departures look paced depends on the machine's timers and load (47 % to
    # 85 % over runs here): below half they are worth 2 votes (confidence 0.55), above
    # half 3 (0.65), so the floor is 0.5, still above what the receiver side can reach.
    assert row["cc_confidence"] >= (0.5 if side == "server" else 0.4), why
    if side == "server":
        assert "departures paced" in row["cc_reasoning"], why


def test_reordering_is_not_loss_next_to_the_receiver(lab_dir: Path) -> None:
    emu = label(lab_dir, "reordering")["emulator"]["s2c"]
    assert emu["reordered"] > 20 and emu["drop_queue"] == 0
    row = connection(lab_dir, "reordering", "client")
    # The late segments fill their holes within about 1 ms of a 15 ms RTT and their IP
    # IDs are older than those of the segments that overtook them: late originals.
    # Wireshark flags most of them out-of-order and the others retransmissions (fast ones,
    # after the receiver's duplicate ACKs). How many get which depends on how many segments
    # overtook each late one, which varies with the host (a third to a half
    # retransmissions in earlier runs, 19 of 116 in one on a slower host), so the test is
    # that the reordering shows and that nastriage calls every one of those
    # retransmissions a late original (or, for a copy the receiver already had, spurious).
    flagged = Counter(
        e["kind"]
        for e in capture(lab_dir, "reordering", "client").table("tcp_events").to_pylist()
        if e["stream"] == row["stream"] and e["direction"] == "s2c"
    )
    assert flagged["retransmission"] + flagged["out_of_order"] >= 0.5 * emu["reordered"], flagged
    assert row["retrans_reordered_s2c"] >= 5, (row, flagged)
    late = row["retrans_reordered_s2c"] + row["retrans_spurious_s2c"]
    assert late >= flagged["retransmission"] - 2, (row, flagged)
    assert row["retrans_fast_s2c"] + row["retrans_timeout_s2c"] <= 2, row
    assert row["lost_before_capture"] <= 2, row
    assert row["limit_loss_recovery_s2c"] < 0.02, row
    # At the sender nothing arrives out of order: at most a spurious retransmission.
    srv = connection(lab_dir, "reordering", "server")
    assert srv["retrans_reordered_s2c"] == 0


def test_congestion_loss_is_still_loss_next_to_the_receiver(lab_dir: Path) -> None:
    row = connection(lab_dir, "reno", "client")
    assert row["retrans_fast_s2c"] > 5 and row["retrans_reordered_s2c"] == 0, row
    assert row["lost_before_capture"] == row["retrans_fast_s2c"] + row["retrans_timeout_s2c"]


@pytest.mark.parametrize("side", ["client", "server"])
def test_receive_window_limited_share(lab_dir: Path, side: str) -> None:
    row = connection(lab_dir, "wan-30ms", side)
    assert row["limit_receive_window_s2c"] >= 0.6, (side, row)


@pytest.mark.parametrize("side", ["client", "server"])
def test_starved_server_does_not_inflate_the_rtt(lab_dir: Path, side: str) -> None:
    # The server was starved: its READs took tens of milliseconds, by the load generator's
    # own timing and by the capture's (the srt table, ~58 ms here) ...
    assert label(lab_dir, "server-latency")["loadgen"]["latency_ms"]["median"] > 5
    reads = [
        r["p50_ms"]
        for r in capture(lab_dir, "server-latency", side).table("srt").to_pylist()
        if r["breakdown"] == "op" and r["op"] == "READ"
    ]
    assert reads and reads[0] > 5, reads
    row = connection(lab_dir, "server-latency", side)
    # ... yet on a LAN the network part is well under a millisecond on both sides.
    assert row["rtt_server_side_ms"] < 0.5 and row["rtt_client_side_ms"] < 0.5, row
    assert row["rtt_min_ms"] < 0.5, row
    # Whether the server's ACKs ride on its late replies (a median of ~27 ms here) is the
    # server kernel's choice: on one CI machine it ACKed the requests at once (median
    # 0.4 ms). Either way the median is the ACKs' own timing, never below the minimum;
    # that late ACKs leave the minimum alone is pinned by crates/engine/src/tcp/rtt.rs's
    # unit tests too.
    assert row["rtt_server_side_median_ms"] >= row["rtt_server_side_ms"], row
