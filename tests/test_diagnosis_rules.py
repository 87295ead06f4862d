"""Each diagnosis rule on small synthetic tables (no engine, no capture files)."""

from __future__ import annotations

import io
import json
import warnings
from dataclasses import fields
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from minischema import validate, validate_structurally
from nastriage import schema
from nastriage.diagnosis import Evidence, Finding, Impact
from nastriage.diagnosis.run import RuleError, diagnose, top_problem
from nastriage.diagnosis.thresholds import Thresholds
from nastriage.views.json_out import finding_object
from nastriage.views.verdicts import print_verdicts

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
TS = pa.timestamp("ns", tz="UTC")
ROOT = Path(__file__).resolve().parents[1]


class FakeCapture:
    """What the rules use of a Capture: table_names, table(name), warnings."""

    def __init__(self, tables: dict[str, pa.Table], warnings: list[str] | None = None) -> None:
        self._tables = tables
        self.warnings = warnings or []

    @property
    def table_names(self) -> list[str]:
        return list(self._tables)

    def table(self, name: str) -> pa.Table:
        return self._tables[name]


def table(rows: list[dict[str, Any]], types: dict[str, pa.DataType]) -> pa.Table:
    cols = {}
    for name, typ in types.items():
        cols[name] = pa.array([r.get(name) for r in rows], typ)
    return pa.table(cols)


def conversations(*convs: dict[str, Any]) -> pa.Table:
    rows = []
    for c in convs:
        row = {
            "stream": 0,
            "client_ip": "10.0.0.1",
            "client_port": 40000,
            "server_ip": "10.0.0.2",
            "server_port": 2049,
            "start": T0,
            "end": T0 + 2000 * MS,
            "payload_bytes_c2s": 10_000,
            "payload_bytes_s2c": 20_000_000,
            "frames_c2s": 5000,
            "frames_s2c": 14000,
            "rst": False,
            "fin": True,
        }
        row.update(c)
        rows.append(row)
    return table(
        rows,
        {
            "stream": pa.uint32(),
            "client_ip": pa.utf8(),
            "client_port": pa.uint16(),
            "server_ip": pa.utf8(),
            "server_port": pa.uint16(),
            "start": TS,
            "end": TS,
            "payload_bytes_c2s": pa.uint64(),
            "payload_bytes_s2c": pa.uint64(),
            "frames_c2s": pa.uint64(),
            "frames_s2c": pa.uint64(),
            "rst": pa.bool_(),
            "fin": pa.bool_(),
        },
    )


def events(rows: list[tuple[int, int, str, str, str]]) -> pa.Table:
    """(frame, time ns, direction, kind, detail), stream 0."""
    return table(
        [
            {"frame": f, "time": t, "stream": 0, "direction": d, "kind": k, "detail": x}
            for f, t, d, k, x in rows
        ],
        {
            "frame": pa.uint64(),
            "time": TS,
            "stream": pa.uint32(),
            "direction": pa.utf8(),
            "kind": pa.utf8(),
            "detail": pa.utf8(),
        },
    )


def tcp_connections(**values: Any) -> pa.Table:
    row = {"stream": 0, **values}
    types: dict[str, pa.DataType] = {"stream": pa.uint32()}
    for k, v in values.items():
        types[k] = pa.utf8() if isinstance(v, str) else pa.float64()
    return table([row], types)


TX_TYPES: dict[str, pa.DataType] = {
    "protocol": pa.utf8(),
    "op": pa.utf8(),
    "stream": pa.uint32(),
    "transport": pa.utf8(),
    "request_first_frame": pa.uint64(),
    "request_first_time": TS,
    "request_last_time": TS,
    "reply_first_frame": pa.uint64(),
    "reply_first_time": TS,
    "reply_last_time": TS,
    "srt_ms": pa.float64(),
    "server_time_ms": pa.float64(),
    "request_bytes": pa.uint64(),
    "reply_bytes": pa.uint64(),
    "count": pa.uint64(),
    "status": pa.uint32(),
    "status_name": pa.utf8(),
    "file_name": pa.utf8(),
}


def tx(
    start_ms: float,
    srt_ms: float,
    *,
    op: str = "READ",
    size: int = 65536,
    xfer_ms: float = 0.5,
    frame: int = 1,
    status: str | None = None,
    answered: bool = True,
) -> dict[str, Any]:
    start = T0 + int(start_ms * MS)
    reply = start + int(srt_ms * MS)
    return {
        "protocol": "nfs",
        "op": op,
        "stream": 0,
        "transport": "tcp",
        "request_first_frame": frame,
        "request_first_time": start,
        "request_last_time": start,
        "reply_first_frame": frame + 1 if answered else None,
        "reply_first_time": reply if answered else None,
        "reply_last_time": reply + int(xfer_ms * MS) if answered else None,
        "srt_ms": srt_ms if answered else None,
        "server_time_ms": srt_ms if answered else None,
        "request_bytes": 120,
        "reply_bytes": size + 100 if answered else None,
        "count": size if op in ("READ", "WRITE") else None,
        "status": 1 if status else 0,
        "status_name": status,
        "file_name": "data.bin",
    }


def ids(findings: list[Finding], *severities: str) -> list[str]:
    return [f.id for f in findings if not severities or f.severity in severities]


def problems(findings: list[Finding]) -> list[str]:
    return ids(findings, "critical", "warning")


# -- receiver-stall -----------------------------------------------------------------------


def test_zero_window_episode_is_a_stall_of_the_advertising_host() -> None:
    cap = FakeCapture(
        {
            "conversations": conversations({"payload_bytes_c2s": 30_000_000}),
            "tcp_events": events(
                [
                    (100, T0 + 500 * MS, "s2c", "zero_window", ""),
                    (101, T0 + 700 * MS, "c2s", "zero_window_probe", ""),
                    (102, T0 + 1300 * MS, "s2c", "window_update", ""),
                ]
            ),
        }
    )
    findings = diagnose(cap, strict=True)
    top = top_problem(findings)
    assert top is not None and top.id == "receiver-stall"
    assert top.severity == "critical"  # 0.8 s of 2 s
    assert top.evidence.numbers["host"] == "10.0.0.2"
    assert top.evidence.numbers["host_role"] == "server"
    assert top.evidence.numbers["zero_window_probes"] == 1
    assert top.impact.time_share == pytest.approx(0.4)
    assert "not of the network" in top.explanation
    assert 100 in top.evidence.frames and 102 in top.evidence.frames
    assert "tcp.analysis.zero_window" in top.evidence.wireshark_filter
    assert "congestion-loss" not in ids(findings)


def test_zero_window_episodes_table_is_used_when_present() -> None:
    episodes = table(
        [
            {
                "stream": 0,
                "host": "client",
                "stalled_direction": "s2c",
                "start_frame": 7,
                "start": T0,
                "end_frame": 9,
                "end": T0 + 100 * MS,
                "probes": 0,
                "resolved": True,
            }
        ],
        {
            "stream": pa.uint32(),
            "host": pa.utf8(),
            "stalled_direction": pa.utf8(),
            "start_frame": pa.uint64(),
            "start": TS,
            "end_frame": pa.uint64(),
            "end": TS,
            "probes": pa.uint32(),
            "resolved": pa.bool_(),
        },
    )
    cap = FakeCapture(
        {
            "conversations": conversations({}),
            "tcp_connections": tcp_connections(rtt_handshake_ms=1.0),
            "zero_window_episodes": episodes,
        }
    )
    f = top_problem(diagnose(cap, strict=True))
    assert f is not None and f.id == "receiver-stall" and f.severity == "warning"
    assert f.evidence.numbers["host"] == "10.0.0.1"  # the client stopped reading


def test_tiny_zero_window_in_a_long_connection_is_ignored() -> None:
    cap = FakeCapture(
        {
            "conversations": conversations({"end": T0 + 100_000 * MS}),
            "tcp_events": events(
                [
                    (1, T0 + 10 * MS, "s2c", "zero_window", ""),
                    (2, T0 + 12 * MS, "s2c", "window_update", ""),
                ]
            ),
        }
    )
    findings = diagnose(cap, strict=True)
    assert "receiver-stall" not in ids(findings)
    assert findings[0].id == "healthy"


# -- loss, reordering, capture drops ---------------------------------------------------------


def _recovery(
    start_ms: float, fill_ms: float, frame: int, *, hole: bool, retransmit: bool = True
) -> list[tuple[int, int, str, str, str]]:
    """One hole: (optionally) Wireshark's lost_segment, duplicate ACKs until the fill,
    and the segment that fills it (a retransmission, or the late original)."""
    t = T0 + int(start_ms * MS)
    rows = []
    if hole:
        rows.append((frame, t, "s2c", "lost_segment", "missing=1448 bytes"))
    n = 4
    for i in range(n):
        at = t + int(fill_ms * MS * i / n)
        rows.append(
            (frame + 1 + i, at, "c2s", "duplicate_ack", f"dup_ack={i + 1} of frame {frame - 1}")
        )
    if retransmit or hole:
        kind = "retransmission" if fill_ms > 5 else "out_of_order"
        rows.append((frame + 10, t + int(fill_ms * MS), "s2c", kind, ""))
    return rows


def _loss_capture(rows: list[tuple[int, int, str, str, str]]) -> FakeCapture:
    return FakeCapture(
        {
            "conversations": conversations({}),
            "tcp_events": events(sorted(rows, key=lambda r: r[1])),
            "tcp_connections": tcp_connections(rtt_handshake_ms=15.0, rtt_min_ms=15.0),
        }
    )


@pytest.mark.parametrize("downstream", [True, False], ids=["receiver-side", "sender-side"])
def test_real_loss_is_congestion_loss(downstream: bool) -> None:
    rows = []
    for i in range(8):
        rows += _recovery(100 + 200 * i, 18.0, 1000 + 100 * i, hole=downstream)
    findings = diagnose(_loss_capture(rows), strict=True)
    assert problems(findings)[:1] == ["congestion-loss"]
    assert "reordering" not in ids(findings)
    f = findings[0]
    assert f.evidence.numbers["loss_episodes"] == 8
    assert f.evidence.numbers["capture_sees_holes"] == ("yes" if downstream else "no")
    assert f.impact.time_share is not None and f.impact.time_share > 0


@pytest.mark.parametrize("downstream", [True, False], ids=["receiver-side", "sender-side"])
def test_late_segments_are_reordering_not_loss(downstream: bool) -> None:
    rows = []
    for i in range(30):
        # receiver side: the hole closes after 0.8 ms (< RTT/2); sender side: the
        # duplicate ACKs stop without any retransmission
        rows += _recovery(100 + 50 * i, 0.8, 1000 + 100 * i, hole=downstream, retransmit=False)
    findings = diagnose(_loss_capture(rows), strict=True)
    assert problems(findings)[:1] == ["reordering"]
    assert "congestion-loss" not in ids(findings)
    assert findings[0].evidence.numbers["reorder_events"] == 30


def test_capture_drops_are_not_network_loss() -> None:
    rows = []
    for i in range(6):
        t = T0 + (100 + 200 * i) * MS
        rows.append((1000 + 10 * i, t, "s2c", "lost_segment", "missing=2896 bytes"))
        rows.append((1001 + 10 * i, t + 16 * MS, "c2s", "ack_lost_segment", "unseen=2896 bytes"))
    findings = diagnose(_loss_capture(rows), strict=True)
    assert problems(findings) == ["capture-incomplete"]
    f = findings[0]
    assert f.evidence.numbers["acked_unseen_events"] == 6
    assert f.evidence.numbers["unseen_bytes"] == 6 * 2896
    assert "not packet loss" in f.explanation


def test_timeouts_count_as_loss() -> None:
    rows = [
        (100 + i, T0 + (200 + 500 * i) * MS, "s2c", "retransmission", f"rto={0.3 * 2**i:.3f}s")
        for i in range(3)
    ]
    findings = diagnose(_loss_capture(rows), strict=True)
    f = top_problem(findings)
    assert f is not None and f.id == "congestion-loss"
    assert f.evidence.numbers["timeouts"] == 3


def test_a_single_fast_retransmission_is_only_info() -> None:
    findings = diagnose(_loss_capture(_recovery(100, 18.0, 1000, hole=False)), strict=True)
    assert problems(findings) == []
    assert findings[0].id == "healthy"
    assert "congestion-loss" in ids(findings, "info")


# -- receive window --------------------------------------------------------------------------


def test_window_without_scaling_limits_throughput() -> None:
    series = table(
        [
            {"stream": 0, "direction": "s2c", "bytes": 65535, "receive_window": 65535}
            for _ in range(20)
        ],
        {
            "stream": pa.uint32(),
            "direction": pa.utf8(),
            "bytes": pa.uint64(),
            "receive_window": pa.uint64(),
        },
    )
    # 12 MiB in 6.5 s over a 30 ms RTT: 64 KiB / 30 ms = 17.5 Mbit/s
    conv = conversations({"end": T0 + 6500 * MS, "payload_bytes_s2c": 12 << 20, "frames_s2c": 8700})
    cap = FakeCapture(
        {
            "conversations": conv,
            "tcp_connections": tcp_connections(
                rtt_handshake_ms=30.0,
                window_scale_client=0.0,
                window_scale_server=0.0,
                max_in_flight_s2c=65535.0,
                window_limited_s2c=8000.0,
                limit_receive_window_s2c=0.06,
            ),
            "tcp_series": series,
        }
    )
    f = top_problem(diagnose(cap, strict=True))
    assert f is not None and f.id == "receive-window-limited"
    assert f.evidence.numbers["window_bytes"] == 65535
    assert f.evidence.numbers["receiver"] == "10.0.0.1"
    assert f.evidence.numbers["window_over_rtt_bps"] == pytest.approx(65535 * 8 / 0.030, rel=1e-3)
    assert "window scaling is off" in f.explanation
    assert "window ÷ RTT" in f.impact.basis


# -- request timing ------------------------------------------------------------------------


def _tx_capture(txs: list[dict[str, Any]], rtt_server_ms: float, rtt_client_ms: float = 0.01,
                **conv: Any) -> FakeCapture:  # fmt: skip
    end = max(t["reply_last_time"] or t["request_first_time"] for t in txs)
    return FakeCapture(
        {
            "conversations": conversations(
                {"end": end, "payload_bytes_s2c": sum(t["reply_bytes"] or 0 for t in txs), **conv}
            ),
            "transactions": table(txs, TX_TYPES),
            "tcp_connections": tcp_connections(
                rtt_handshake_ms=rtt_server_ms + rtt_client_ms,
                rtt_handshake_client_ms=rtt_client_ms,
                rtt_handshake_server_ms=rtt_server_ms,
            ),
        }
    )


def test_one_request_at_a_time_over_a_long_rtt_is_a_client_concurrency_limit() -> None:
    # client-side view: each 64 KiB READ takes the 15 ms round trip + 0.2 ms at the server
    txs = [tx(16.0 * i, 15.7, frame=2 * i + 1) for i in range(100)]
    f = top_problem(diagnose(_tx_capture(txs, rtt_server_ms=15.5), strict=True))
    assert f is not None and f.id == "client-concurrency-limit"
    assert f.evidence.numbers["max_outstanding"] == 1
    assert f.evidence.numbers["mean_io_bytes"] == 65536
    # K x size / latency
    assert f.evidence.numbers["littles_law_bps"] == pytest.approx(65536 * 8 / 0.0157, rel=0.02)


def test_same_transfer_seen_at_the_server_gives_the_same_verdict() -> None:
    # server-side view: 0.2 ms answers, the 15.5 ms round trip is outside the request
    txs = [tx(16.0 * i, 0.2, frame=2 * i + 1) for i in range(100)]
    f = top_problem(diagnose(_tx_capture(txs, rtt_server_ms=0.01, rtt_client_ms=15.5), strict=True))
    assert f is not None and f.id == "client-concurrency-limit"
    assert f.evidence.numbers["response_time_median_ms"] == pytest.approx(15.7, abs=0.1)


def test_slow_answers_over_a_short_rtt_are_server_latency() -> None:
    # 4 requests always outstanding, each answered after 30 ms; RTT 0.1 ms
    txs = []
    for i in range(100):
        txs.append(tx(7.5 * i, 30.0, size=262144, xfer_ms=2.0, frame=2 * i + 1))
    findings = diagnose(_tx_capture(txs, rtt_server_ms=0.1), strict=True)
    f = top_problem(findings)
    assert f is not None and f.id == "server-latency"
    assert f.evidence.numbers["server"] == "10.0.0.2"
    assert f.evidence.numbers["server_processing_median_ms"] == pytest.approx(29.9, abs=0.2)
    assert "READ" in str(f.evidence.numbers["top_operations"])
    assert "data.bin" in str(f.evidence.numbers["top_files"])
    assert "rpc.time >=" in f.evidence.wireshark_filter
    assert "client-concurrency-limit" not in problems(findings)


def test_small_requests_over_a_long_rtt_are_request_size_limited() -> None:
    txs = [tx(16.0 * i, 15.7, size=4096, frame=2 * i + 1) for i in range(100)]
    findings = diagnose(
        _tx_capture(txs, rtt_server_ms=15.5, payload_bytes_s2c=1 << 20), strict=True
    )
    assert "request-size-limited" in problems(findings)
    f = next(f for f in findings if f.id == "request-size-limited")
    assert f.evidence.numbers["mean_io_bytes"] == 4096


def test_metadata_storm() -> None:
    ops = ["GETATTR", "ACCESS", "LOOKUP"]
    txs = [tx(1.0 * i, 0.8, op=ops[i % 3], size=0, frame=2 * i + 1) for i in range(300)]
    findings = diagnose(_tx_capture(txs, rtt_server_ms=0.5), strict=True)
    assert "metadata-heavy" in problems(findings)
    f = next(f for f in findings if f.id == "metadata-heavy")
    assert f.evidence.numbers["metadata_requests"] == 300


def test_jukebox_errors_are_a_warning_and_noent_is_not() -> None:
    txs = [tx(10.0 * i, 1.0, frame=2 * i + 1) for i in range(30)]
    txs[5] = tx(50.0, 1.0, op="READ", frame=11, status="NFS3ERR_JUKEBOX")
    txs[6] = tx(60.0, 1.0, op="LOOKUP", size=0, frame=13, status="NFS3ERR_NOENT")
    findings = diagnose(_tx_capture(txs, rtt_server_ms=0.5), strict=True)
    f = next(f for f in findings if f.id == "protocol-errors")
    assert f.severity == "warning"
    assert "NFS3ERR_JUKEBOX" in f.title and "NOENT" not in f.title
    assert 12 in f.evidence.frames
    txs[5] = tx(50.0, 1.0, frame=11)
    assert "protocol-errors" not in ids(diagnose(_tx_capture(txs, rtt_server_ms=0.5), strict=True))


def test_reset_with_unanswered_requests() -> None:
    txs = [tx(10.0 * i, 1.0, frame=2 * i + 1) for i in range(10)]
    txs.append(tx(200.0, 0.0, frame=99, answered=False))
    findings = diagnose(_tx_capture(txs, rtt_server_ms=0.5, rst=True), strict=True)
    f = next(f for f in findings if f.id == "connection-resets")
    assert f.severity == "warning" and f.evidence.numbers["unanswered_requests"] == 1
    assert f.evidence.frames == [99]


def test_smb2_credit_starvation() -> None:
    conc = table(
        [
            {
                "stream": 0,
                "protocol": "smb2",
                "max_outstanding": 2,
                "span_ns": 2000 * MS,
                "credit_starved_ms": 600.0,
                "credit_starved_requests": 40,
                "min_credit_balance": 0,
                "credit_balance_inferred": False,
            }
        ],
        {
            "stream": pa.uint32(),
            "protocol": pa.utf8(),
            "max_outstanding": pa.uint32(),
            "span_ns": pa.uint64(),
            "credit_starved_ms": pa.float64(),
            "credit_starved_requests": pa.uint64(),
            "min_credit_balance": pa.int64(),
            "credit_balance_inferred": pa.bool_(),
        },
    )
    cap = FakeCapture({"conversations": conversations({}), "concurrency": conc})
    f = top_problem(diagnose(cap, strict=True))
    assert f is not None and f.id == "credit-starvation"
    assert f.impact.time_share == pytest.approx(0.3)


def test_encrypted_smb_is_info() -> None:
    cap = FakeCapture(
        {"conversations": conversations({"server_port": 445})},
        warnings=["tcp.stream 0: 12 encrypted SMB3 message(s) (transform header): ..."],
    )
    findings = diagnose(cap, strict=True)
    assert findings[0].id == "healthy"
    f = next(f for f in findings if f.id == "encrypted-smb")
    assert f.severity == "info" and f.evidence.numbers["encrypted_messages"] == 12


# -- run, ranking, outputs ---------------------------------------------------------------------


def test_empty_capture_is_never_silent() -> None:
    findings = diagnose(FakeCapture({}), strict=True)
    assert [f.id for f in findings] == ["healthy"]
    assert findings[0].severity == "info"


def test_healthy_says_what_limits_the_transfer() -> None:
    # back-to-back 1 MiB reads, data on the wire 90 % of the time
    txs = [tx(10.0 * i, 1.0, size=1 << 20, xfer_ms=9.0, frame=2 * i + 1) for i in range(50)]
    findings = diagnose(_tx_capture(txs, rtt_server_ms=0.3), strict=True)
    assert findings[0].id == "healthy"
    assert "link-limited" in findings[0].title
    assert problems(findings) == []


def test_ranking_severity_then_share() -> None:
    def finding(fid: str, sev: str, share: float) -> Finding:
        return Finding(fid, sev, "t", "e", Evidence(), Impact(time_share=share), [], 0.5)  # type: ignore[arg-type]

    rules = {
        "a": lambda ctx: [finding("reordering", "warning", 0.1)],
        "b": lambda ctx: [finding("receiver-stall", "critical", 0.05)],
        "c": lambda ctx: [finding("server-latency", "warning", 0.6)],
        "d": lambda ctx: [finding("encrypted-smb", "info", 0.9)],
    }
    findings = diagnose(FakeCapture({}), rules=rules)  # type: ignore[arg-type]
    assert ids(findings) == ["receiver-stall", "server-latency", "reordering", "encrypted-smb"]


def test_failing_rule_is_skipped_unless_strict() -> None:
    def boom(ctx: object) -> list[Finding]:
        raise ZeroDivisionError("x")

    with pytest.warns(RuntimeWarning, match="boom"):
        findings = diagnose(FakeCapture({}), rules={"boom": boom}, strict=False)  # type: ignore[dict-item]
    assert ids(findings) == ["healthy"]
    with pytest.raises(RuntimeError, match="boom"):
        diagnose(FakeCapture({}), rules={"boom": boom}, strict=True)  # type: ignore[dict-item]


def test_findings_json_matches_schema() -> None:
    rows = []
    for i in range(8):
        rows += _recovery(100 + 200 * i, 18.0, 1000 + 100 * i, hole=True)
    for cap in (_loss_capture(rows), FakeCapture({})):
        doc = {"findings": [finding_object(f) for f in diagnose(cap, strict=True)]}
        root = schema.load()
        sub = {"$defs": root["$defs"], **root["properties"]["findings"]}
        errors = validate(doc["findings"], sub) + validate_structurally(doc["findings"], sub)
        assert errors == [], errors
        json.dumps(doc, allow_nan=False)


def test_verdicts_plain_and_sanitised() -> None:
    evil = Finding(
        "server-latency",
        "warning",
        "slow \x1b[31mred\x1b[0m file \u202egpj.exe",
        "e",
        Evidence(numbers={"top_files": "a\x07b"}, frames=[1, 2], wireshark_filter="rpc"),
        Impact(time_share=0.5),
        ["look at \x1b]0;title\x07 it"],
        0.9,
    )
    buf = io.StringIO()
    print_verdicts([evil], file=buf, plain=True)
    text = buf.getvalue()
    assert text.startswith("Verdict:\n  WARNING   slow \\x1b[31mred")
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "Evidence: top_files=a\\x07b; frames 1 2" in text
    assert "Next: look at \\x1b]0;title\\x07 it" in text


def test_every_threshold_is_documented() -> None:
    doc = (ROOT / "docs" / "findings.md").read_text()
    missing = [f.name for f in fields(Thresholds) if f"`{f.name}`" not in doc]
    assert missing == []


def test_every_finding_id_is_documented_and_in_the_schema() -> None:
    from nastriage.diagnosis import FINDING_IDS

    doc = (ROOT / "docs" / "findings.md").read_text()
    enum = schema.load()["$defs"]["finding"]["properties"]["id"]["enum"]
    for fid in FINDING_IDS:
        assert f"### `{fid}`" in doc, fid
    assert sorted(enum) == sorted(FINDING_IDS)


def test_span_index_agrees_with_a_scan_of_every_span() -> None:
    """The loss analysis asks "is this time around a zero-window episode" with an index
    (overlapping, nested, touching and empty spans; times on the edges)."""
    import random

    from nastriage.diagnosis.retrans import Spans

    rng = random.Random(7)
    for _ in range(300):
        spans = []
        for _ in range(rng.randrange(0, 12)):
            start = rng.randrange(-50, 200)
            spans.append((start, start + rng.randrange(0, 60)))
        index = Spans(spans)
        for t in range(-60, 270):
            inside = any(s <= t <= e for s, e in spans)
            assert (t in index) == inside, (t, spans)
        assert bool(index) == bool(spans)


def test_union_of_spans_in_order_of_starts() -> None:
    """The loss analysis's recovery time: the union of spans merged in order of their
    starts (equal starts in any order, empty and reversed spans ignored) is that of
    sorting them all."""
    import heapq
    import random

    from nastriage.diagnosis.timeline import union_ns, union_sorted_ns

    def covered(spans: list[tuple[int, int]]) -> int:
        return len({t for s, e in spans for t in range(s, e)})

    rng = random.Random(11)
    for _ in range(300):
        a = [(s, s + rng.randrange(-5, 40)) for s in (rng.randrange(0, 200) for _ in range(8))]
        b = [(s, s + rng.randrange(-5, 40)) for s in (rng.randrange(0, 200) for _ in range(5))]
        a.sort(key=lambda sp: sp[0])
        b.sort()
        want = covered(a + b)
        assert union_ns(a + b) == want
        assert union_sorted_ns(heapq.merge(a, b)) == want, (a, b)


def test_a_failing_loss_analysis_is_reported_by_its_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The diagnosis starts with the loss analysis (while the engine digests the
    transactions); that head start does not raise: the rules that use it do, as before."""
    from nastriage.diagnosis import retrans

    def broken(ctx: Any) -> Any:
        raise ValueError("broken loss analysis")

    monkeypatch.setattr(retrans, "_analyse", broken)
    rows = _recovery(100, 18.0, 1000, hole=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        findings = diagnose(_loss_capture(rows))
    failed = {str(w.message).split()[2] for w in caught if "broken loss" in str(w.message)}
    assert failed == {"congestion-loss", "reordering", "capture-incomplete"}
    assert not {"congestion-loss", "reordering"} & set(ids(findings))
    with pytest.raises(RuleError, match="failed: broken loss analysis"):
        diagnose(_loss_capture(rows), strict=True)


def test_the_loss_analysis_runs_once_and_only_for_rules_that_read_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nastriage.diagnosis import retrans
    from nastriage.diagnosis.rules import RULES

    calls = []
    real = retrans._analyse

    def counted(ctx: Any) -> Any:
        calls.append(1)
        return real(ctx)

    monkeypatch.setattr(retrans, "_analyse", counted)
    rows = _recovery(100, 18.0, 1000, hole=True)
    diagnose(_loss_capture(rows), strict=True)
    assert len(calls) == 1  # (the head start's, cached for every rule that reads it)
    calls.clear()
    diagnose(_loss_capture(rows), rules={"metadata-heavy": RULES["metadata-heavy"]}, strict=True)
    assert not calls


def test_every_rule_that_reads_the_loss_analysis_is_listed_for_its_head_start() -> None:
    """``run._READ_THE_LOSS_ANALYSIS`` names the rules whose modules call the loss
    analysis (``retrans.analyse``, by name or through the module). A rule left out would
    still be right (it runs the analysis itself, cached) but lose the head start beside
    the engine's digest; this keeps the list from drifting."""
    import sys

    from nastriage.diagnosis import retrans, run
    from nastriage.diagnosis.rules import RULES

    def reads_it(rule: Any) -> bool:
        names = vars(sys.modules[rule.__module__]).values()
        return any(v is retrans.analyse or v is retrans for v in names)

    readers = {rule_id for rule_id, rule in RULES.items() if reads_it(rule)}
    assert readers == run._READ_THE_LOSS_ANALYSIS
