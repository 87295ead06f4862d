"""TCP analysis beyond Wireshark's flags (docs/tcp-analysis.md): retransmission classes,
zero-window episodes, RTT, capture point, window scaling, time limitation, congestion
control, series and sequence-graph points.

Ground truth comes from the project's simulator (``nastriage-synth``), whose scenarios
configure the RTT, where the capture was taken, what is lost, held or duplicated; plus a
few real captures from ../shared/captures with sensible expectations.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import nastriage
from helpers import ROOT, capture
from minischema import validate
from nastriage import schema
from nastriage.diagnosis.run import diagnose
from nastriage.views import json_out
from oracle import SHARED, readable_captures

pytestmark = pytest.mark.usefixtures("engine")

BUCKETS = ("zero_window", "loss_recovery", "receive_window", "application", "bandwidth")
CLASSES = ("timeout", "fast", "spurious", "network_duplicate", "reordered")
MS = 1e-3


@pytest.fixture(scope="session")
def synth() -> Path:
    if shutil.which("cargo") is None:
        pytest.skip("cargo is needed to build nastriage-synth")
    subprocess.run(["cargo", "build", "-q", "-p", "nastriage-synth"], cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / "nastriage-synth"


@pytest.fixture(scope="session")
def scenario(synth: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp("tcp-scenarios")

    @cache
    def make(name: str) -> Path:
        path = out / f"{name}.pcap"
        subprocess.run([str(synth), name, str(path)], check=True, capture_output=True)
        return path

    return make


@cache
def _open(path: Path) -> nastriage.Capture:
    return nastriage.open(path)


def rows(table: Any) -> list[dict[str, Any]]:
    """Rows as dicts, without the timestamp columns (pyarrow cannot turn nanosecond
    timestamps into Python objects without pandas)."""
    import pyarrow as pa

    keep = [f.name for f in table.schema if not pa.types.is_timestamp(f.type)]
    return table.select(keep).to_pylist()  # type: ignore[no-any-return]


def connections(path: Path) -> dict[int, dict[str, Any]]:
    """tcp_connections rows by client port (the scenarios use one connection per port),
    with the conversation's columns merged in."""
    cap = _open(path)
    convs = {r["stream"]: r for r in rows(cap.table("conversations"))}
    out = {}
    for row in rows(cap.table("tcp_connections")):
        conv = convs[row["stream"]]
        merged = {**conv, **row}
        out[conv["client_port"]] = merged
    return out


def near(value: float | None, want: float) -> bool:
    """Within max(10 %, 0.5 ms) of the generator's RTT (values in ms)."""
    assert value is not None
    return abs(value - want) <= max(0.1 * want, 0.5)


def wireshark_retransmissions(path: Path) -> dict[int, int]:
    """Frames Wireshark flags ``tcp.analysis.retransmission``, per stream."""
    out: dict[int, int] = {}
    for e in rows(_open(path).table("tcp_events")):
        if e["kind"] == "retransmission":
            out[e["stream"]] = out.get(e["stream"], 0) + 1
    return out


def total(row: dict[str, Any], cls: str) -> int:
    return int(row[f"retrans_{cls}_c2s"] + row[f"retrans_{cls}_s2c"])


def check_invariants(path: Path) -> None:
    """What holds on any capture: limitation shares add up to 1, each Wireshark
    retransmission has exactly one class (duplicates may add out-of-order frames)."""
    cap = _open(path)
    ws = wireshark_retransmissions(path)
    conns = rows(cap.table("tcp_connections"))
    assert [r["stream"] for r in conns] == list(range(cap.conversations.num_rows))
    durations = dict(
        zip(
            cap.conversations.column("stream").to_pylist(),
            cap.conversations.column("duration_s").to_pylist(),
        )
    )
    for r in conns:
        for d in ("c2s", "s2c"):
            shares = [r[f"limit_{b}_{d}"] for b in BUCKETS]
            if durations[r["stream"]] > 0:
                assert all(s is not None and 0 <= s <= 1 for s in shares), r
                assert sum(shares) == pytest.approx(1.0, abs=1e-9), (r["stream"], d, shares)
            else:
                assert all(s is None for s in shares)
        classes = sum(total(r, c) for c in CLASSES)
        dups = total(r, "network_duplicate")
        assert classes - dups <= ws.get(r["stream"], 0) <= classes, r["stream"]
        if r["stalled_fraction"] is not None:
            assert 0 <= r["stalled_fraction"] <= 1
        assert 0 <= r["cc_confidence"] <= 1
        assert r["capture_point"] in ("near_client", "near_server", "mid_path", "unknown")


# -- the simulator's pathologies ---------------------------------------------------------------


def test_pathologies_are_classified(scenario: Any) -> None:
    path = scenario("tcp-pathologies")
    check_invariants(path)
    c = connections(path)
    # 801: a server segment lost before the (client-side) capture point: fast retransmit.
    fast = c[801]
    assert fast["retrans_fast_s2c"] >= 1
    assert total(fast, "timeout") == 0
    assert fast["lost_before_capture"] >= 1 and fast["lost_after_capture"] == 0
    # 802: the client's call lost after the capture point: RTO ~201 ms (min RTO + RTT).
    rto = c[802]
    assert rto["retrans_timeout_c2s"] == 1 and total(rto, "fast") == 0
    assert rto["lost_after_capture"] == 1 and rto["lost_before_capture"] == 0
    assert 200 <= rto["timeout_stall_max_ms"] <= 215
    assert rto["limit_loss_recovery_c2s"] > 0.5
    # 803: the client stops reading: one zero-window episode with probes, then reopened.
    zw = c[803]
    assert zw["zero_window_episodes"] == 1 and zw["zero_window_probes"] >= 2
    assert 0.6 <= zw["zero_window_s"] <= 0.75
    assert zw["stalled_fraction"] > 0.5
    assert zw["limit_zero_window_s2c"] == pytest.approx(zw["stalled_fraction"])
    assert zw["window_limited_s2c"] > 0
    # 804: one server segment delivered twice (same IP ID and payload).
    dup = c[804]
    assert dup["retrans_network_duplicate_s2c"] == 1
    assert total(dup, "timeout") + total(dup, "fast") + total(dup, "spurious") == 0
    assert dup["lost_before_capture"] + dup["lost_after_capture"] == 0
    # 805: idle, three keep-alives over ~6 s.
    idle = c[805]
    assert idle["idle_periods"] >= 1 and idle["idle_s"] > 5
    assert sum(total(idle, k) for k in CLASSES) == 0
    for port, row in c.items():
        assert row["capture_point"] == "near_client", (port, row["capture_point_reason"])
        assert row["ttl_client"] == 64 and row["ttl_server"] == 63
        assert row["mss_client"] == row["mss_server"] == 1460
        assert row["window_scale_client"] == row["window_scale_server"] == 7
        assert not row["window_scale_inferred"]
        assert near(row["rtt_handshake_ms"], 1.0), port
        assert near(row["rtt_min_ms"], 1.0), port
        assert near(row["rtt_median_ms"], 1.0), port
        assert row["rtt_handshake_client_ms"] < 0.1 * row["rtt_handshake_ms"]
        assert row["rtt_complete"]


def test_zero_window_episode_table(scenario: Any) -> None:
    path = scenario("tcp-pathologies")
    (ep,) = rows(_open(path).table("zero_window_episodes"))
    zw = connections(path)[803]
    assert ep["stream"] == zw["stream"]
    assert ep["host"] == "client" and ep["stalled_direction"] == "s2c"
    assert ep["resolved"] and ep["end_frame"] > ep["start_frame"]
    assert ep["probes"] == zw["zero_window_probes"]
    assert ep["duration_s"] == pytest.approx(zw["zero_window_s"])
    assert ep["connection_fraction"] == pytest.approx(zw["stalled_fraction"])


def test_spurious_retransmissions(scenario: Any) -> None:
    path = scenario("tcp-spurious")
    check_invariants(path)
    c = connections(path)
    # 811: proved by the server's D-SACK for the late original.
    assert c[811]["retrans_spurious_c2s"] == 1 and c[811]["dsack_blocks"] >= 1
    assert total(c[811], "timeout") == 0
    # 812: no SACK, no timestamps: the ACK came too soon after the retransmission.
    assert c[812]["retrans_spurious_c2s"] == 1 and c[812]["dsack_blocks"] == 0
    assert total(c[812], "timeout") == 0
    for row in c.values():
        # Nothing was lost, and Wireshark sees a plain retransmission (not yet acked).
        assert row["lost_before_capture"] + row["lost_after_capture"] == 0
        assert 200 <= row["timeout_stall_max_ms"] <= 215


def test_missing_handshake_and_sequence_wrap(scenario: Any) -> None:
    path = scenario("tcp-midstream")
    check_invariants(path)
    c = connections(path)
    mid = c[40821]
    assert mid["syn"] is False and mid["client_rule"] == "port"
    assert mid["rtt_handshake_ms"] is None and mid["mss_client"] is None
    # The client (scale 7, 256 KiB buffer) limits the sender: inferred from the flight.
    assert mid["window_scale_inferred"]
    assert mid["window_scale_client"] == 7
    assert mid["limit_receive_window_s2c"] > 0.5
    assert mid["capture_point"] == "near_client"
    assert near(mid["rtt_min_ms"], 1.0) and near(mid["rtt_median_ms"], 1.0)
    assert sum(total(mid, k) for k in CLASSES) == 0
    # Both directions' sequence numbers wrap: nothing looks lost or retransmitted.
    wrap = c[40822]
    assert sum(total(wrap, k) for k in CLASSES) == 0
    assert wrap["lost_before_capture"] == 0
    assert near(wrap["rtt_median_ms"], 1.0)
    stream = wrap["stream"]
    cap = nastriage.open(path, segments_for=[stream])
    seg = rows(cap.table("tcp_segments"))
    assert {s["stream"] for s in seg} == {stream}
    data = [s for s in seg if s["direction"] == "s2c" and s["len"] > 0]
    seqs = [s["seq"] for s in data]
    assert seqs == sorted(seqs) and seqs[0] == 1
    assert data[-1]["next_seq"] == (1 << 20) + 1  # 1 MiB, unwrapped
    assert not any(s["is_retransmission"] for s in seg)


def test_port_reuse_gets_fresh_state(scenario: Any) -> None:
    path = scenario("tcp-basic")
    check_invariants(path)
    cap = _open(path)
    convs = rows(cap.conversations)
    reused = [c["stream"] for c in convs if c["client_port"] == 50000]
    assert len(reused) == 2
    by_stream = {r["stream"]: r for r in rows(cap.table("tcp_connections"))}
    for s in reused:
        # Each conversation on the 4-tuple has its own handshake and RTT.
        assert near(by_stream[s]["rtt_handshake_ms"], 0.4)
        assert near(by_stream[s]["rtt_median_ms"], 0.4)
        assert sum(total(by_stream[s], k) for k in CLASSES) == 0
    # The transfer under way when the capture started: no handshake, still an RTT.
    (mid,) = [c["stream"] for c in convs if c["client_port"] == 51000]
    assert by_stream[mid]["rtt_handshake_ms"] is None
    assert near(by_stream[mid]["rtt_median_ms"], 0.3)


def test_capture_point_and_rtt_split(scenario: Any) -> None:
    path = scenario("tcp-capture-points")
    check_invariants(path)
    c = connections(path)
    assert c[831]["capture_point"] == "near_client"
    assert c[832]["capture_point"] == "near_server"
    assert c[833]["capture_point"] == "mid_path"
    for port, row in c.items():
        assert near(row["rtt_handshake_ms"], 2.0), port
        assert near(row["rtt_min_ms"], 2.0), port
        assert near(row["rtt_median_ms"], 2.0), port
    # The split: 0.8 ms on the client side (2 x 0.4 ms) at the mid-path point.
    assert c[833]["rtt_handshake_client_ms"] == pytest.approx(0.8, abs=0.1)
    assert c[833]["rtt_handshake_server_ms"] == pytest.approx(1.2, abs=0.1)
    assert c[832]["rtt_handshake_server_ms"] < 0.1
    assert "0 hop(s)" in c[832]["capture_point_reason"]


def test_congestion_control_hint(scenario: Any) -> None:
    path = scenario("tcp-cc-reno")
    check_invariants(path)
    (row,) = connections(path).values()
    assert row["retrans_fast_s2c"] == 4 and row["lost_before_capture"] == 4
    assert row["cc_hint"] == "reno-like" and row["cc_direction"] == "s2c"
    assert row["cc_confidence"] >= 0.5
    assert "halving" in row["cc_reasoning"]
    assert 0 < row["slow_start_s_s2c"] < row["congestion_avoidance_s_s2c"]
    assert row["cwnd_max_bytes_s2c"] > 100_000
    assert near(row["rtt_median_ms"], 10.0)
    assert row["limit_bandwidth_s2c"] > 0.5
    # Without loss there is nothing to go by.
    quiet = connections(scenario("tcp-capture-points"))[831]
    assert quiet["cc_hint"] == "unknown" and quiet["cc_confidence"] <= 0.1


# -- series and segments -----------------------------------------------------------------------


def test_series_add_up(scenario: Any) -> None:
    path = scenario("tcp-pathologies")
    cap = _open(path)
    series = rows(cap.table("tcp_series"))
    assert series
    interval = series[0]["interval_ns"]
    assert all(r["interval_ns"] == interval for r in series)
    assert 1_000_000 <= interval <= 10_000_000_000
    span = cap.captures[0]["last_time_ns"] - cap.captures[0]["first_time_ns"]
    assert span / interval <= 500
    bytes_: dict[tuple[int, str], int] = {}
    stalled: dict[int, float] = {}
    for r in series:
        key = (r["stream"], r["direction"])
        bytes_[key] = bytes_.get(key, 0) + r["bytes"]
        stalled[r["stream"]] = stalled.get(r["stream"], 0.0) + r["stalled_s"]
        if r["rtt_ms"] is not None:
            assert 0 < r["rtt_ms"] < 1000
    for conv in rows(cap.conversations):
        s = conv["stream"]
        assert bytes_.get((s, "c2s"), 0) == conv["payload_bytes_c2s"]
        assert bytes_.get((s, "s2c"), 0) == conv["payload_bytes_s2c"]
    zw = connections(path)[803]
    assert stalled[zw["stream"]] == pytest.approx(zw["zero_window_s"])
    windows = [r["receive_window"] for r in series if r["receive_window"] is not None]
    assert max(windows) == 1 << 20  # 8192 << 7: scaled


def test_segments_only_for_chosen_streams(scenario: Any) -> None:
    path = scenario("tcp-pathologies")
    assert _open(path).table("tcp_segments").num_rows == 0
    fast = connections(path)[801]
    cap = nastriage.open(path, segments_for=[fast["stream"]])
    seg = rows(cap.table("tcp_segments"))
    assert len(seg) == fast["frames_c2s"] + fast["frames_s2c"]
    assert seg[0]["flags"] == "SYN" and seg[0]["seq"] == 0
    retx = [s for s in seg if s["is_retransmission"]]
    assert [s["retrans_class"] for s in retx] == ["fast"] * len(retx) and retx
    assert all("retransmission" in s["analysis"] for s in retx)
    assert any(s["sack"] for s in seg if s["direction"] == "c2s")
    assert max(s["window"] for s in seg if not s["flags"].startswith("SYN")) == 1 << 20


def test_seq_points_keep_every_flagged_frame(scenario: Any) -> None:
    """tcp_seq_points (every connection, one pass) keeps each frame of tcp_events, and a
    small budget reduces the rest and says so in tcp_seq_reduction."""
    import pyarrow.compute as pc

    path = scenario("tcp-pathologies")
    for budget in (4000, 40):
        cap = nastriage.open(path, segment_points=budget)
        pts = rows(cap.table("tcp_seq_points"))
        kept = {(p["stream"], p["frame"]) for p in pts}
        events = rows(cap.table("tcp_events"))
        assert events
        assert {(e["stream"], e["frame"]) for e in events} <= kept
        red = rows(cap.table("tcp_seq_reduction"))
        assert {(r["stream"], r["direction"]) for r in red} == {
            (p["stream"], p["direction"]) for p in pts
        }
        for r in red:
            mine = [
                p for p in pts if (p["stream"], p["direction"]) == (r["stream"], r["direction"])
            ]
            assert len(mine) == r["points_kept"] <= r["points_seen"]
            assert [p["frame"] for p in mine] == sorted(p["frame"] for p in mine)
            assert any(p["reduced"] for p in mine) == (r["bucket_ns"] is not None)
        conv_frames = pc.sum(
            pc.add(cap.conversations["frames_c2s"], cap.conversations["frames_s2c"])
        )
        seen = sum(r["points_seen"] for r in red)
        assert seen == conv_frames.as_py()
        if budget == 40:
            assert any(r["reduced"] for r in red)
            assert all(
                r["points_kept"] - r["flagged_kept"] - r["context_kept"] <= 40 + 8 for r in red
            )
        else:
            assert not any(r["reduced"] for r in red) and len(pts) == seen
    assert nastriage.open(path, segment_points=0).table("tcp_seq_points").num_rows == 0


# -- JSON ------------------------------------------------------------------------------------


def test_json_tcp_objects(scenario: Any) -> None:
    path = scenario("tcp-pathologies")
    buf = io.StringIO()
    json_out.write(_open(path), buf)
    doc = json.loads(buf.getvalue())
    assert validate(doc, schema.load()) == []
    totals = doc["tcp_flags"]
    assert list(totals) == list(json_out.TCP_FLAGS)
    frames: dict[str, set[int]] = {}
    for e in rows(_open(path).table("tcp_events")):
        frames.setdefault(e["kind"], set()).add(e["frame"])
    assert totals == {k: len(frames.get(k, ())) for k in json_out.TCP_FLAGS}
    summed = {k: sum(c["tcp_flags"][k] for c in doc["conversations"]) for k in totals}
    assert summed == totals
    by_port = {c["client"]["port"]: c for c in doc["conversations"]}
    tcp = by_port[802]["tcp"]
    assert tcp["retransmissions"]["timeout"] == 1
    assert tcp["retransmissions"]["by_direction"]["client_to_server"]["timeout"] == 1
    assert tcp["capture_point"] == "near_client"
    assert set(tcp["rtt_handshake_ms"]) == {"client_side", "server_side", "total"}
    assert near(tcp["rtt_handshake_ms"]["total"], 1.0)
    assert tcp["mss"] == {"client": 1460, "server": 1460}
    assert tcp["window_scale"] == {"client": 7, "server": 7, "inferred": False}
    for conv in doc["conversations"]:
        for shares in conv["tcp"]["limitation"].values():
            assert sum(shares.values()) == pytest.approx(1.0)
    assert by_port[803]["tcp"]["zero_window_episodes"] == 1
    assert by_port[803]["tcp_flags"]["zero_window_probe"] >= 2


#: Scenarios whose conversations the JSON tests write.
_JSON_SCENARIOS = ("tcp-pathologies", "tcp-capture-points", "tcp-midstream")


def _small_mix(synth: Path, directory: Path, seed: int) -> Path:
    """A generated 3 MB mix (NFSv3, NFSv4.1 and SMB3 connections)."""
    mix = directory / f"mix-{seed}.pcap"
    subprocess.run(
        [str(synth), "bench", str(mix), "--size", "3M", "--seed", str(seed)],
        check=True,
        capture_output=True,
    )
    return mix


def test_json_conversations_made_in_batches_are_the_rows_objects(
    scenario: Any, synth: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer makes the conversations a batch of rows at a time from columns; each is
    what the one-row functions make of its row (with its tcp_connections row and flags),
    however the rows fall into batches; and so are the concurrency rows."""
    from nastriage.capture import read_rows

    monkeypatch.setattr(json_out, "_BATCH_ROWS", 2)
    # (NFSv3, NFSv4.1 and SMB3 connections: nine concurrency rows, three with credits.)
    mix = _small_mix(synth, tmp_path, seed=1)
    for path in (*map(scenario, _JSON_SCENARIOS), mix):
        cap = _open(path)
        concurrency = read_rows(cap.plain_table("concurrency"))
        written_concurrency = list(json_out._concurrency(cap))
        assert written_concurrency == [json_out.concurrency_object(r) for r in concurrency]
        assert len(concurrency) > 2 or path != mix
        written = list(json_out._conversations(cap))
        flags = json_out.tcp_flag_counts(cap)
        tcp = read_rows(cap.plain_table("tcp_connections"))
        rows = read_rows(cap.plain_table("conversations"))
        assert len(written) == len(rows) > 0
        for i, row in enumerate(rows):
            row["_tcp"] = tcp[i] if i < len(tcp) else None
            row["_tcp_flags"] = flags.get(int(row["stream"]))
            assert written[i] == json_out.conversation_object(row), path


def test_json_conversations_written_by_the_engine_are_the_objects(
    scenario: Any, synth: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine's text of the conversations (what the writer writes) is, object for
    object and byte for byte, what the encoder makes of the Python objects; however the
    rows fall into batches."""
    monkeypatch.setattr(json_out, "_BATCH_ROWS", 3)
    for path in (*map(scenario, _JSON_SCENARIOS), _small_mix(synth, tmp_path, seed=2)):
        cap = _open(path)
        texts = json_out._conversation_texts(cap)
        assert texts is not None, path
        written = ",\n    ".join(t for t in texts if t)
        objects = list(json_out._conversations(cap))
        assert len(objects) > 0
        assert written == ",\n    ".join(json_out._dumps(o) for o in objects), path
        assert json.loads("[" + written + "]") == objects, path


def test_json_written_with_texts_made_ahead_is_the_same_document(
    scenario: Any, synth: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sections' text made on a thread while the rules run (as the command does) gives
    the document the writer makes by itself, byte for byte; with batches of 2 rows, many
    more than the thread makes ahead."""
    monkeypatch.setattr(json_out, "_BATCH_ROWS", 2)
    for path in (scenario("tcp-pathologies"), _small_mix(synth, tmp_path, seed=3)):
        cap = _open(path)
        texts = json_out.start_texts(cap)
        findings = diagnose(cap, strict=True)
        ahead, alone = io.StringIO(), io.StringIO()
        json_out.write(cap, ahead, findings=findings, texts=texts)
        json_out.write(cap, alone, findings=findings)
        assert ahead.getvalue() == alone.getvalue(), path
        assert texts.take("conversations") is None  # (read once)


def test_read_ahead_keeps_order_raises_errors_and_lets_go() -> None:
    import threading
    import time

    items = [str(i) for i in range(50)]
    assert list(json_out._ReadAhead(iter(items), 3)) == items

    def failing() -> Any:
        yield "a"
        raise ValueError("bad table")

    ahead = json_out._ReadAhead(failing(), 3)
    assert next(ahead) == "a"
    with pytest.raises(ValueError, match="bad table"):
        next(ahead)
    with pytest.raises(StopIteration):
        next(ahead)

    # A reader that stops (or drops it) lets the thread go, though the items go on.
    def endless() -> Any:
        while True:
            yield "x"

    before = threading.active_count()
    ahead = json_out._ReadAhead(endless(), 2)
    assert next(ahead) == "x"
    del ahead
    deadline = time.monotonic() + 10
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() == before


def test_json_conversations_of_a_stand_in_capture_are_made_in_python() -> None:
    """Tables that are not the engine's: no text from the engine, the objects instead."""
    import pyarrow as pa

    from fakes import conversation, conversations_table
    from nastriage.capture import Capture
    from report_fakes import TablesAnalysis

    flags = pa.table({"stream": pa.array([0], pa.uint32()), "kind": ["retransmission"]})
    tables = {
        "conversations": conversations_table([conversation(0)]),
        "tcp_flag_counts": flags.append_column("frames", pa.array([1], pa.uint64())),
    }
    cap = Capture(TablesAnalysis(tables), ["/data/trace.pcap"])  # type: ignore[arg-type]
    assert json_out._conversation_texts(cap) is None
    (obj,) = json_out._conversations(cap)
    assert obj["tcp_flags"]["retransmission"] == 1


def test_json_column_conversions_are_the_value_conversions() -> None:
    floats = [0, 3, -(2**70), 1.5, -0.0, 7.0, float("nan"), float("inf"), -float("inf"), None, True]
    assert repr(json_out._nums(floats)) == repr([json_out._num(v) for v in floats])
    ints = [0, 3, -(2**70), 1.5, 7.0, None, True]
    assert repr(json_out._ints(ints)) == repr([json_out._int(v) for v in ints])
    counts = [0, 5, 2**70, True, 3.0]
    assert repr(json_out._counts(counts)) == repr([int(v) for v in counts])


# -- real captures -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", readable_captures() if SHARED.is_dir() else [])
def test_invariants_on_reference_captures(name: str) -> None:
    path = SHARED / name
    check_invariants(path)
    cap = _open(path)
    series = cap.table("tcp_series")
    assert series.num_rows <= 2_000_000
    if series.num_rows:
        interval = series.column("interval_ns")[0].as_py()
        assert 1_000_000 <= interval <= 10_000_000_000
    episodes = rows(cap.table("zero_window_episodes"))
    assert all(e["duration_s"] >= 0 for e in episodes)


def _real(name: str) -> list[dict[str, Any]]:
    path = capture(name)
    check_invariants(path)
    return rows(_open(path).table("tcp_connections"))


def test_real_zero_window_recovered() -> None:
    (row,) = _real("chrissanders__packets__tcp_zerowindowrecovery.pcapng")
    assert row["zero_window_episodes"] == 1 and row["stalled_fraction"] > 0.5
    (ep,) = rows(
        _open(capture("chrissanders__packets__tcp_zerowindowrecovery.pcapng")).table(
            "zero_window_episodes"
        )
    )
    assert ep["resolved"] and ep["host"] == "client"
    assert ep["duration_s"] == pytest.approx(0.01, abs=0.001)


def test_real_zero_window_dead() -> None:
    (row,) = _real("chrissanders__packets__tcp_zerowindowdead.pcapng")
    assert row["zero_window_episodes"] == 1
    assert row["zero_window_probes"] == 3  # Linux probes look like keep-alives
    assert row["stalled_fraction"] > 0.99
    assert row["limit_zero_window_s2c"] > 0.99
    (ep,) = rows(
        _open(capture("chrissanders__packets__tcp_zerowindowdead.pcapng")).table(
            "zero_window_episodes"
        )
    )
    assert not ep["resolved"] and ep["end_frame"] is None
    assert ep["duration_s"] > 20


def test_real_retransmissions_with_duplicated_packets() -> None:
    # Every packet of this capture appears 2-4 times with the same IP ID: most
    # "retransmissions" are copies; a few are genuine timeouts.
    (row,) = _real("arkime__arkime__wireshark-retrans.pcap")
    dups = total(row, "network_duplicate")
    assert dups > 30
    assert total(row, "timeout") >= 1
    assert row["capture_point"] == "near_client"
    assert near(row["rtt_handshake_ms"], 2.25)


def test_real_fast_retransmissions() -> None:
    (row,) = _real("zeek__zeek__retransmit-fast009.pcap")
    assert row["retrans_fast_s2c"] == 3 and total(row, "timeout") == 0
    assert row["lost_after_capture"] == 3
    # The SYN/ACK answers at once, the client's ACK comes ~185 ms later.
    assert row["capture_point"] == "near_server"
    assert row["ttl_client"] is None  # TTL 0 in this capture: not usable
    assert row["mss_client"] == 1452 and row["mss_server"] == 1430
