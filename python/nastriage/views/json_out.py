"""The JSON contract (``nastriage analyze --json``), documented in docs/json-schema.md and
described by ``nastriage/schema/analysis.schema.json``.

The document is one object: fixed metadata keys (``schema_version``, ``tool``,
``captures``, ``protocols``, ``warnings``) followed by one list per *table section*. A
section is a result table of the engine turned into a list of objects, one per row, by a
row function (``SECTIONS``). Adding a table to the JSON means adding a ``TableSection``:
that is an additive change and bumps the minor ``SCHEMA_VERSION``.

The output is written incrementally (one list element per line), so a capture with
millions of connections never needs the whole document in memory (and the rows are made
a batch at a time). It is pure ASCII (everything else escaped as ``\\uXXXX``, see
``_dumps``), valid JSON (no NaN/Infinity: non-finite numbers become ``null``) and key
order is stable.
"""

from __future__ import annotations

import codecs
import functools
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, TextIO

import orjson

from nastriage.capture import iter_rows, read_columns, read_rows, readable_table
from nastriage.units import rfc3339_ns, seconds_between
from nastriage.views import destination

if TYPE_CHECKING:
    from nastriage.capture import Capture
    from nastriage.diagnosis.finding import Finding

__all__ = [
    "SCHEMA_VERSION",
    "SECTIONS",
    "TCP_FLAGS",
    "TableSection",
    "capture_object",
    "conversation_object",
    "document",
    "finding_object",
    "output",
    "tcp_object",
    "write",
]

#: MAJOR.MINOR. Minor: additive changes (new keys, new sections, new enum values).
#: Major: anything that removes, renames or changes the meaning or type of a key.
SCHEMA_VERSION = "1.4"

Row = dict[str, Any]


def _int(value: Any) -> int | None:
    if value.__class__ is int:  # (the usual case, first)
        return value
    return None if value is None else int(value)


def _num(value: Any) -> float | None:
    """A finite float, or None (JSON has no NaN/Infinity)."""
    if value.__class__ is float:  # (the usual case, first: a table has thousands)
        return value if value - value == 0.0 else None  # (inf - inf and NaN are NaN)
    if value is None:
        return None
    f = float(value)
    return f if math.isfinite(f) else None


@functools.cache
def _pair(prefix: str, a: str, b: str) -> tuple[str, str]:
    """Column names by prefix and suffixes, made once (a capture can have tens of thousands
    of connections, each row read through a dozen of them)."""
    return f"{prefix}_{a}", f"{prefix}_{b}"


def _directions(row: Row, prefix: str, convert: Callable[[Any], Any] = _int) -> dict[str, Any]:
    c2s, s2c = _pair(prefix, "c2s", "s2c")
    return {"client_to_server": convert(row[c2s]), "server_to_client": convert(row[s2c])}


#: Wireshark's TCP analysis flags (``tcp.analysis.<name>``), in the engine's order.
TCP_FLAGS: tuple[str, ...] = (
    "retransmission",
    "fast_retransmission",
    "spurious_retransmission",
    "out_of_order",
    "lost_segment",
    "ack_lost_segment",
    "duplicate_ack",
    "zero_window",
    "zero_window_probe",
    "zero_window_probe_ack",
    "window_full",
    "window_update",
    "keep_alive",
    "keep_alive_ack",
    "reused_ports",
)

#: Retransmission classes (``tcp_connections`` ``retrans_<class>_<dir>``).
RETRANS_CLASSES = ("timeout", "fast", "spurious", "network_duplicate", "reordered")
#: Time-limitation buckets (``tcp_connections`` ``limit_<bucket>_<dir>``).
LIMIT_BUCKETS = ("zero_window", "loss_recovery", "receive_window", "application", "bandwidth")
# (The column names, made once: a capture can have tens of thousands of connections.)
_RETRANS_COLUMNS = tuple(
    (name, f"retrans_{name}_c2s", f"retrans_{name}_s2c") for name in RETRANS_CLASSES
)
_LIMIT_COLUMNS = {
    suffix: tuple((b, f"limit_{b}_{suffix}") for b in LIMIT_BUCKETS) for suffix in ("c2s", "s2c")
}


def _flag_counts(counts: dict[str, int] | None) -> dict[str, int]:
    out = dict.fromkeys(TCP_FLAGS, 0)
    for name, n in (counts or {}).items():
        if name in out:
            out[name] = int(n)
    return out


def _sides(row: Row, prefix: str, convert: Callable[[Any], Any] = _int) -> dict[str, Any]:
    client, server = _pair(prefix, "client", "server")
    return {"client": convert(row[client]), "server": convert(row[server])}


def tcp_object(t: Row) -> dict[str, Any]:
    """One ``tcp_connections`` row -> the conversation's ``tcp`` object."""

    def limitation(suffix: str) -> dict[str, float | None] | None:
        values = {b: _num(t[column]) for b, column in _LIMIT_COLUMNS[suffix]}
        return None if all(v is None for v in values.values()) else values

    c2s: dict[str, int] = {}
    s2c: dict[str, int] = {}
    retransmissions: dict[str, Any] = {}
    for name, to_server, to_client in _RETRANS_COLUMNS:
        a, b = int(t[to_server]), int(t[to_client])
        c2s[name], s2c[name] = a, b
        retransmissions[name] = a + b
    retransmissions.update(
        {
            "lost_before_capture": int(t["lost_before_capture"]),
            "lost_after_capture": int(t["lost_after_capture"]),
            "lost_unknown_place": int(t["lost_unknown_place"]),
            "timeout_stall_max_ms": _num(t["timeout_stall_max_ms"]),
            "by_direction": {"client_to_server": c2s, "server_to_client": s2c},
        }
    )
    cc_dir = "client_to_server" if t["cc_direction"] == "c2s" else "server_to_client"
    return {
        "rtt_handshake_ms": {
            "client_side": _num(t["rtt_handshake_client_ms"]),
            "server_side": _num(t["rtt_handshake_server_ms"]),
            "total": _num(t["rtt_handshake_ms"]),
        },
        "rtt_min_ms": _num(t["rtt_min_ms"]),
        "rtt_median_ms": _num(t["rtt_median_ms"]),
        "rtt_p95_ms": _num(t["rtt_p95_ms"]),
        "rtt_complete": bool(t["rtt_complete"]),
        "rtt_samples": int(t["rtt_samples"]),
        "rtt_side_median_ms": {
            "client_side": _num(t["rtt_client_side_ms"]),
            "server_side": _num(t["rtt_server_side_ms"]),
        },
        "mss": _sides(t, "mss"),
        "window_scale": {**_sides(t, "window_scale"), "inferred": bool(t["window_scale_inferred"])},
        "zero_window_episodes": int(t["zero_window_episodes"]),
        "zero_window_s": _num(t["zero_window_s"]),
        "stalled_fraction": _num(t["stalled_fraction"]),
        "retransmissions": retransmissions,
        "capture_point": t["capture_point"],
        "capture_point_reason": t["capture_point_reason"],
        "limitation": {
            "client_to_server": limitation("c2s"),
            "server_to_client": limitation("s2c"),
        },
        "cc_hint": t["cc_hint"],
        "cc_confidence": _num(t["cc_confidence"]),
        "cc_direction": cc_dir,
        "cc_reasoning": t["cc_reasoning"],
        "ack_ratio": _directions(t, "ack_ratio", _num),
        "delayed_ack_ms": _directions(t, "delayed_ack_ms", _num),
        "max_in_flight": _directions(t, "max_in_flight"),
        "tso_seen": bool(t["tso_seen"]),
        "idle": {"periods": int(t["idle_periods"]), "seconds": _num(t["idle_s"])},
    }


def conversation_object(row: Row) -> dict[str, Any]:
    """One ``conversations`` row (timestamps as int ns) -> its JSON object.

    The row may carry ``_tcp`` (its ``tcp_connections`` row) and ``_tcp_flags`` (frames per
    Wireshark flag): see ``_conversation_rows``."""
    tcp = row.get("_tcp")
    return {
        "stream": _int(row["stream"]),
        "ip_version": _int(row["ip_version"]),
        "client": {"ip": row["client_ip"], "port": _int(row["client_port"])},
        "server": {"ip": row["server_ip"], "port": _int(row["server_port"])},
        "client_rule": row["client_rule"],
        "first_frame": _int(row["first_frame"]),
        "last_frame": _int(row["last_frame"]),
        "start": rfc3339_ns(row["start"]),
        "duration_s": _num(row["duration_s"]),
        "frames": _directions(row, "frames"),
        "bytes": _directions(row, "bytes"),
        "payload_bytes": _directions(row, "payload_bytes"),
        "throughput_bps": {
            "client_to_server": _num(row["throughput_c2s_bps"]),
            "server_to_client": _num(row["throughput_s2c_bps"]),
        },
        "flags": {"syn": bool(row["syn"]), "fin": bool(row["fin"]), "rst": bool(row["rst"])},
        "tcp": None if tcp is None else tcp_object(tcp),
        "tcp_flags": _flag_counts(row.get("_tcp_flags")),
    }


def tcp_flag_counts(capture: Capture) -> dict[int | None, dict[str, int]]:
    """Frames per Wireshark flag from ``tcp_events``, per stream and (key None) in total."""
    out: dict[int | None, dict[str, int]] = {None: {}}
    if "tcp_flag_counts" in capture.table_names:  # the engine's own count
        names = ("stream", "kind", "frames")
        counted = read_columns(readable_table(capture, "tcp_flag_counts"), names)
        columns = (counted[c] for c in names)
    elif "tcp_events" in capture.table_names:
        events = capture.table("tcp_events")
        if events.num_rows == 0:
            return out
        grouped = events.group_by(["stream", "kind"]).aggregate([("frame", "count_distinct")])
        columns = (
            grouped.column(c).to_pylist() for c in ("stream", "kind", "frame_count_distinct")
        )
    else:
        return out
    for stream, kind, n in zip(*columns):
        per = out.setdefault(int(stream), {})
        per[kind] = per.get(kind, 0) + int(n)
        out[None][kind] = out[None].get(kind, 0) + int(n)
    return out


def _conversation_rows(capture: Capture) -> Iterator[Row]:
    """``conversations`` rows joined with their ``tcp_connections`` row and flag counts."""
    flags = tcp_flag_counts(capture)
    tcp_rows: Iterator[Row] | None = None
    if "tcp_connections" in capture.table_names:
        tcp_rows = iter_rows(readable_table(capture, "tcp_connections"))
    for row in iter_rows(readable_table(capture, "conversations")):
        tcp = next(tcp_rows, None) if tcp_rows is not None else None
        if tcp is not None and tcp["stream"] != row["stream"]:
            raise RuntimeError("tcp_connections is not aligned with conversations")
        row["_tcp"] = tcp
        row["_tcp_flags"] = flags.get(int(row["stream"]))
        yield row


@dataclass(frozen=True)
class TableSection:
    """A JSON list built from an engine table, one object per row."""

    #: Key in the JSON document.
    key: str
    #: Name of the engine table (``Capture.table(name)``).
    table: str
    #: Row (a dict of column -> Python value; timestamps as int ns) -> JSON object.
    row: Callable[[Row], dict[str, Any]]
    #: Where the rows come from when not simply ``table``'s rows (e.g. a row-by-row join).
    rows: Callable[[Capture], Iterable[Row]] | None = None


_SRT_NUMBERS = ("min_ms", "max_ms", "avg_ms", "sum_ms", "p50_ms", "p90_ms", "p99_ms", "p99_9_ms")


def srt_object(row: Row) -> dict[str, Any]:
    """One ``srt`` row (breakdown "op") -> its JSON object: tshark's SRT columns
    (calls, min, max, avg, sum) plus percentiles and a log2 histogram."""
    obj: dict[str, Any] = {
        "protocol": row["protocol"],
        "version": _int(row["version"]),
        "op": row["op"],
        "code": _int(row["code"]),
        "calls": _int(row["calls"]),
        "answered": _int(row["answered"]),
        "unanswered": _int(row["unanswered"]),
        "errors": _int(row["errors"]),
    }
    for key in _SRT_NUMBERS:
        obj[key] = _num(row[key])
    obj["histogram_log2_us"] = [int(x) for x in row["histogram_log2_us"] or []]
    return obj


def _srt_rows(capture: Capture) -> Iterator[Row]:
    if "srt" not in capture.table_names:
        return
    yield from read_rows(readable_table(capture, "srt"), where=("breakdown", "op"))


def concurrency_object(row: Row) -> dict[str, Any]:
    """One ``concurrency`` row -> its JSON object."""
    obj: dict[str, Any] = {
        "stream": _int(row["stream"]),
        "protocol": row["protocol"],
        "requests": _int(row["requests"]),
        "max_outstanding": _int(row["max_outstanding"]),
    }
    for key in ("mean_outstanding", "mean_outstanding_busy", "at_max_fraction",
                "busy_fraction", "mean_request_bytes", "mean_srt_ms",
                "littles_law_bps", "observed_bps"):  # fmt: skip
        obj[key] = _num(row[key])
    obj["nfs41_slots"] = {
        "max_slot": _int(row["max_slot"]),
        "max_highest_slot": _int(row["max_highest_slot"]),
        "min_target_highest_slot": _int(row["min_target_highest_slot"]),
    }
    obj["smb2_credits"] = (
        {
            "balance_inferred": bool(row["credit_balance_inferred"]),
            "min_balance": _int(row["min_credit_balance"]),
            "max_balance": _int(row["max_credit_balance"]),
            "starved_ms": _num(row["credit_starved_ms"]),
            "starved_requests": _int(row["credit_starved_requests"]),
        }
        if row["credits_tracked"]
        else None
    )
    return obj


def _concurrency_rows(capture: Capture) -> Iterator[Row]:
    if "concurrency" in capture.table_names:
        yield from iter_rows(readable_table(capture, "concurrency"))


#: The table sections, in document order.
SECTIONS: tuple[TableSection, ...] = (
    TableSection("conversations", "conversations", conversation_object, _conversation_rows),
    TableSection("srt", "srt", srt_object, _srt_rows),
    TableSection("concurrency", "concurrency", concurrency_object, _concurrency_rows),
)


def finding_object(f: Finding) -> dict[str, Any]:
    """One diagnosis finding -> its JSON object (see docs/findings.md for the ids)."""
    ev = f.evidence
    numbers: dict[str, Any] = {}
    for key, value in ev.numbers.items():
        numbers[str(key)] = value if isinstance(value, str) else _jsonable_number(value)
    return {
        "id": f.id,
        "severity": f.severity,
        "title": f.title,
        "explanation": f.explanation,
        "evidence": {
            "numbers": numbers,
            "time_ranges": [
                {
                    "start": rfc3339_ns(r.start_ns),
                    "end": rfc3339_ns(r.end_ns),
                    "stream": _int(r.stream),
                    "label": r.label,
                }
                for r in ev.time_ranges
            ],
            "frames": [int(x) for x in ev.frames],
            "wireshark_filter": ev.wireshark_filter,
        },
        "impact": {
            "time_share": _num(f.impact.time_share),
            "observed_bps": _num(f.impact.observed_bps),
            "potential_bps": _num(f.impact.potential_bps),
            "basis": f.impact.basis,
        },
        "next_steps": [str(s) for s in f.next_steps],
        "confidence": _num(f.confidence),
        "streams": [int(s) for s in f.streams],
    }


def _jsonable_number(value: Any) -> int | float | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    return _num(value)


def capture_object(c: dict[str, Any]) -> dict[str, Any]:
    """One entry of ``Analysis.captures`` -> its JSON object."""
    first = _int(c.get("first_time_ns"))
    last = _int(c.get("last_time_ns"))
    return {
        "path": str(c.get("path", "")),
        "format": c.get("format"),
        "format_description": c.get("format_description"),
        "compression": c.get("compression"),
        "link_types": [str(x) for x in c.get("link_types") or []],
        "frames": int(c.get("frames") or 0),
        "bytes": int(c.get("bytes") or 0),
        "captured_bytes": int(c.get("captured_bytes") or 0),
        "first_time": rfc3339_ns(first),
        "last_time": rfc3339_ns(last),
        "duration_s": seconds_between(first, last),
        "truncated_frames": int(c.get("truncated_frames") or 0),
        "warnings": [str(w) for w in c.get("warnings") or []],
    }


def _protocol_object(p: dict[str, Any]) -> dict[str, Any]:
    return {
        "protocol": str(p.get("protocol", "")),
        "frames": int(p.get("frames") or 0),
        "bytes": int(p.get("bytes") or 0),
    }


#: For what orjson refuses (an integer past 64 bits, a string with a lone surrogate: a
#: file name not in UTF-8). One encoder for every item (``json.dumps`` with options makes
#: a new one per call).
_ENCODER = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":"))

#: The codec error handler that writes JSON's ``\uXXXX`` escapes.
_ASCII_ESCAPES = "nastriage-json-ascii"


def _escape_non_ascii(err: UnicodeError) -> tuple[str, int]:
    """JSON escapes for the characters ASCII cannot encode (a surrogate pair past
    U+FFFF), as ``json.dumps`` writes them: they can only be inside strings."""
    if not isinstance(err, UnicodeEncodeError):
        raise err
    out = []
    for ch in err.object[err.start : err.end]:
        c = ord(ch)
        if c > 0xFFFF:
            c -= 0x10000
            out.append(f"\\u{0xD800 | (c >> 10):04x}\\u{0xDC00 | (c & 0x3FF):04x}")
        else:
            out.append(f"\\u{c:04x}")
    return "".join(out), err.end


codecs.register_error(_ASCII_ESCAPES, _escape_non_ascii)


def _dumps(obj: Any) -> str:
    """One item as compact ASCII JSON. orjson: the standard encoder took most of the
    writer's time on a capture of thousands of connections (its floats above all)."""
    try:
        text: str = orjson.dumps(obj).decode()
    except orjson.JSONEncodeError:
        return _ENCODER.encode(obj)
    return text if text.isascii() else text.encode("ascii", _ASCII_ESCAPES).decode("ascii")


def _header(capture: Capture, findings: list[Finding] | None = None) -> dict[str, Any]:
    from nastriage import __version__

    if findings is None:
        from nastriage.diagnosis.run import diagnose

        findings = diagnose(capture)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "nastriage", "version": __version__},
        "captures": [capture_object(c) for c in capture.captures],
        "protocols": [_protocol_object(p) for p in capture.protocols],
        "warnings": [str(w) for w in capture.warnings],
        "findings": [finding_object(f) for f in findings],
        "tcp_flags": _flag_counts(tcp_flag_counts(capture)[None]),
        "storage": {k: int(v) for k, v in capture.app_stats.items()},
    }


def write(capture: Capture, out: TextIO, *, findings: list[Finding] | None = None) -> None:
    """Write the JSON document for ``capture`` to ``out``, incrementally.

    ``findings``: the diagnosis (``nastriage.diagnosis.diagnose``), computed when None."""
    header = _header(capture, findings)
    out.write("{\n")
    first = True

    def key_line(key: str) -> None:
        nonlocal first
        out.write(("" if first else ",\n") + f"  {json.dumps(key)}: ")
        first = False

    def write_list(items: Iterable[Any]) -> None:
        out.write("[")
        n = 0
        for item in items:
            out.write(("\n    " if n == 0 else ",\n    ") + _dumps(item))
            n += 1
        out.write("\n  ]" if n else "]")

    for key, value in header.items():
        key_line(key)
        if isinstance(value, list):
            write_list(value)
        else:
            out.write(_dumps(value))
    for section in SECTIONS:
        key_line(section.key)
        rows = (
            section.rows(capture)
            if section.rows is not None
            else iter_rows(readable_table(capture, section.table))
        )
        write_list(section.row(r) for r in rows)
    out.write("\n}\n")
    out.flush()


def document(capture: Capture) -> dict[str, Any]:
    """The JSON document as Python objects (what ``json.load`` of ``write`` gives)."""
    import io

    buf = io.StringIO()
    write(capture, buf)
    result: dict[str, Any] = json.loads(buf.getvalue())
    return result


#: The JSON destination (opened before the analysis, so a bad path fails fast).
output = destination.json_output
