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
import json
import math
import queue
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, TextIO

import orjson

from nastriage.capture import PlainTable, iter_rows, read_columns, readable_table, srt_rows
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
    "start_texts",
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


def _ints(values: list[Any]) -> list[Any]:
    """:func:`_int` over a column (a comprehension: per value, function calls were much of
    the writer's time on thousands of connections)."""
    return [v if v.__class__ is int else _int(v) for v in values]


def _nums(values: list[Any]) -> list[Any]:
    """:func:`_num` over a column."""
    return [v if v.__class__ is float and v - v == 0.0 else _num(v) for v in values]


def _counts(values: list[Any]) -> list[int]:
    """``int`` over a column without nulls."""
    return [v if v.__class__ is int else int(v) for v in values]


Columns = dict[str, list[Any]]

#: The ``tcp_connections`` columns a ``tcp`` object reads, converted by (kind, name):
#: ``n`` :func:`_nums`, ``i`` :func:`_ints`, ``c`` :func:`_counts`, ``-`` as they are.
_TCP_READ: tuple[tuple[str, str], ...] = (
    ("n", "rtt_handshake_client_ms"),
    ("n", "rtt_handshake_server_ms"),
    ("n", "rtt_handshake_ms"),
    ("n", "rtt_min_ms"),
    ("n", "rtt_median_ms"),
    ("n", "rtt_p95_ms"),
    ("-", "rtt_complete"),
    ("c", "rtt_samples"),
    ("n", "rtt_client_side_ms"),
    ("n", "rtt_server_side_ms"),
    ("i", "mss_client"),
    ("i", "mss_server"),
    ("i", "window_scale_client"),
    ("i", "window_scale_server"),
    ("-", "window_scale_inferred"),
    ("c", "zero_window_episodes"),
    ("n", "zero_window_s"),
    ("n", "stalled_fraction"),
    *(("c", c) for _, to_server, to_client in _RETRANS_COLUMNS for c in (to_server, to_client)),
    ("c", "lost_before_capture"),
    ("c", "lost_after_capture"),
    ("c", "lost_unknown_place"),
    ("n", "timeout_stall_max_ms"),
    ("-", "capture_point"),
    ("-", "capture_point_reason"),
    *(("n", column) for suffix in ("c2s", "s2c") for _, column in _LIMIT_COLUMNS[suffix]),
    ("-", "cc_hint"),
    ("n", "cc_confidence"),
    ("-", "cc_direction"),
    ("-", "cc_reasoning"),
    ("n", "ack_ratio_c2s"),
    ("n", "ack_ratio_s2c"),
    ("n", "delayed_ack_ms_c2s"),
    ("n", "delayed_ack_ms_s2c"),
    ("i", "max_in_flight_c2s"),
    ("i", "max_in_flight_s2c"),
    ("-", "tso_seen"),
    ("c", "idle_periods"),
    ("n", "idle_s"),
)
#: The ``tcp_connections`` columns a ``tcp`` object reads.
TCP_COLUMNS: tuple[str, ...] = ("stream", *(name for _, name in _TCP_READ))
#: Where the retransmission counts start in a row of :data:`_TCP_READ`.
_FIRST_RETRANS = [name for _, name in _TCP_READ].index(_RETRANS_COLUMNS[0][1])
_CONVERT: dict[str, Callable[[list[Any]], list[Any]]] = {
    "n": _nums,
    "i": _ints,
    "c": _counts,
    "-": list,
}


def _limitation(values: tuple[Any, ...]) -> dict[str, Any] | None:
    return None if all(v is None for v in values) else dict(zip(LIMIT_BUCKETS, values))


def tcp_objects(t: Columns) -> list[dict[str, Any]]:
    """``tcp_connections`` rows, as columns (:data:`TCP_COLUMNS`), -> the conversations'
    ``tcp`` objects. The values are converted a column at a time; each object is then made
    whole, so that its parts lie together in memory for the encoder."""
    out: list[dict[str, Any]] = []
    columns = [_CONVERT[kind](t[name]) for kind, name in _TCP_READ]
    nr = len(RETRANS_CLASSES)
    nl = len(LIMIT_BUCKETS)
    for v in zip(*columns):
        # (The names unpacked are _TCP_READ's, in its order: a column added or removed
        # there without its name here fails the last unpacking.)
        (hs_client, hs_server, hs_total, rtt_min, rtt_median, rtt_p95, rtt_complete,
         rtt_samples, side_client, side_server, mss_client, mss_server, ws_client, ws_server,
         ws_inferred, zw_episodes, zw_s, stalled) = v[:_FIRST_RETRANS]  # fmt: skip
        at = _FIRST_RETRANS
        c2s = dict(zip(RETRANS_CLASSES, v[at : at + 2 * nr : 2]))
        s2c = dict(zip(RETRANS_CLASSES, v[at + 1 : at + 2 * nr : 2]))
        retransmissions: dict[str, Any] = {name: c2s[name] + s2c[name] for name in RETRANS_CLASSES}
        at += 2 * nr
        (lost_before, lost_after, lost_unknown, stall_max, capture_point, capture_point_reason
         ) = v[at : at + 6]  # fmt: skip
        at += 6
        limit_c2s = _limitation(v[at : at + nl])
        limit_s2c = _limitation(v[at + nl : at + 2 * nl])
        at += 2 * nl
        (cc_hint, cc_confidence, cc_direction, cc_reasoning, ack_c2s, ack_s2c, delayed_c2s,
         delayed_s2c, flight_c2s, flight_s2c, tso_seen, idle_periods, idle_s) = v[at:]  # fmt: skip
        retransmissions["lost_before_capture"] = lost_before
        retransmissions["lost_after_capture"] = lost_after
        retransmissions["lost_unknown_place"] = lost_unknown
        retransmissions["timeout_stall_max_ms"] = stall_max
        retransmissions["by_direction"] = {"client_to_server": c2s, "server_to_client": s2c}
        out.append({
            "rtt_handshake_ms": {
                "client_side": hs_client, "server_side": hs_server, "total": hs_total,
            },
            "rtt_min_ms": rtt_min,
            "rtt_median_ms": rtt_median,
            "rtt_p95_ms": rtt_p95,
            "rtt_complete": bool(rtt_complete),
            "rtt_samples": rtt_samples,
            "rtt_side_median_ms": {"client_side": side_client, "server_side": side_server},
            "mss": {"client": mss_client, "server": mss_server},
            "window_scale": {
                "client": ws_client, "server": ws_server, "inferred": bool(ws_inferred),
            },
            "zero_window_episodes": zw_episodes,
            "zero_window_s": zw_s,
            "stalled_fraction": stalled,
            "retransmissions": retransmissions,
            "capture_point": capture_point,
            "capture_point_reason": capture_point_reason,
            "limitation": {"client_to_server": limit_c2s, "server_to_client": limit_s2c},
            "cc_hint": cc_hint,
            "cc_confidence": cc_confidence,
            "cc_direction": "client_to_server" if cc_direction == "c2s" else "server_to_client",
            "cc_reasoning": cc_reasoning,
            "ack_ratio": {"client_to_server": ack_c2s, "server_to_client": ack_s2c},
            "delayed_ack_ms": {"client_to_server": delayed_c2s, "server_to_client": delayed_s2c},
            "max_in_flight": {"client_to_server": flight_c2s, "server_to_client": flight_s2c},
            "tso_seen": bool(tso_seen),
            "idle": {"periods": idle_periods, "seconds": idle_s},
        })  # fmt: skip
    return out


def tcp_object(t: Row) -> dict[str, Any]:
    """One ``tcp_connections`` row -> the conversation's ``tcp`` object."""
    return tcp_objects({name: [t[name]] for name in TCP_COLUMNS})[0]


#: The ``conversations`` columns a conversation object reads.
CONVERSATION_COLUMNS: tuple[str, ...] = (
    "stream", "ip_version", "client_ip", "client_port", "server_ip", "server_port",
    "client_rule", "first_frame", "last_frame", "start", "duration_s", "frames_c2s",
    "frames_s2c", "bytes_c2s", "bytes_s2c", "payload_bytes_c2s", "payload_bytes_s2c",
    "throughput_c2s_bps", "throughput_s2c_bps", "syn", "fin", "rst",
)  # fmt: skip


def conversation_objects(
    c: Columns, tcp: list[dict[str, Any] | None], flags: list[dict[str, int] | None]
) -> list[dict[str, Any]]:
    """``conversations`` rows, as columns (:data:`CONVERSATION_COLUMNS`; timestamps as int
    ns), with each row's ``tcp`` object (:func:`tcp_objects`; None if it has none) and its
    frames per Wireshark flag -> their JSON objects, each made whole (see
    :func:`tcp_objects`)."""
    out: list[dict[str, Any]] = []
    for (stream, ip_version, client_ip, client_port, server_ip, server_port, client_rule,
         first_frame, last_frame, start, duration, frames_c2s, frames_s2c, bytes_c2s,
         bytes_s2c, payload_c2s, payload_s2c, rate_c2s, rate_s2c, syn, fin, rst, tcp_obj,
         flag_counts) in zip(
        _ints(c["stream"]), _ints(c["ip_version"]), c["client_ip"], _ints(c["client_port"]),
        c["server_ip"], _ints(c["server_port"]), c["client_rule"], _ints(c["first_frame"]),
        _ints(c["last_frame"]), c["start"], _nums(c["duration_s"]), _ints(c["frames_c2s"]),
        _ints(c["frames_s2c"]), _ints(c["bytes_c2s"]), _ints(c["bytes_s2c"]),
        _ints(c["payload_bytes_c2s"]), _ints(c["payload_bytes_s2c"]),
        _nums(c["throughput_c2s_bps"]), _nums(c["throughput_s2c_bps"]), c["syn"], c["fin"],
        c["rst"], tcp, flags,
    ):  # fmt: skip
        out.append({
            "stream": stream,
            "ip_version": ip_version,
            "client": {"ip": client_ip, "port": client_port},
            "server": {"ip": server_ip, "port": server_port},
            "client_rule": client_rule,
            "first_frame": first_frame,
            "last_frame": last_frame,
            "start": rfc3339_ns(start),
            "duration_s": duration,
            "frames": {"client_to_server": frames_c2s, "server_to_client": frames_s2c},
            "bytes": {"client_to_server": bytes_c2s, "server_to_client": bytes_s2c},
            "payload_bytes": {"client_to_server": payload_c2s, "server_to_client": payload_s2c},
            "throughput_bps": {"client_to_server": rate_c2s, "server_to_client": rate_s2c},
            "flags": {"syn": bool(syn), "fin": bool(fin), "rst": bool(rst)},
            "tcp": tcp_obj,
            "tcp_flags": _flag_counts(flag_counts),
        })  # fmt: skip
    return out


def conversation_object(row: Row) -> dict[str, Any]:
    """One ``conversations`` row (timestamps as int ns) -> its JSON object.

    The row may carry ``_tcp`` (its ``tcp_connections`` row) and ``_tcp_flags`` (frames per
    Wireshark flag)."""
    tcp = row.get("_tcp")
    return conversation_objects(
        {name: [row[name]] for name in CONVERSATION_COLUMNS},
        [None if tcp is None else tcp_object(tcp)],
        [row.get("_tcp_flags")],
    )[0]


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


#: Rows of ``conversations`` made into objects at a time.
_BATCH_ROWS = 1024


def _conversations(capture: Capture) -> Iterator[dict[str, Any]]:
    """The ``conversations`` section: each row joined with its ``tcp_connections`` row (at
    the same position: the engine writes both in stream order) and its flag counts, a
    batch of rows at a time."""
    flags = tcp_flag_counts(capture)
    conv = readable_table(capture, "conversations")
    tcp = (
        readable_table(capture, "tcp_connections")
        if "tcp_connections" in capture.table_names
        else None
    )
    tcp_rows = 0 if tcp is None else tcp.num_rows
    for start in range(0, conv.num_rows, _BATCH_ROWS):
        c = read_columns(conv, CONVERSATION_COLUMNS, start, start + _BATCH_ROWS)
        streams = c["stream"]
        objects: list[dict[str, Any] | None] = [None] * len(streams)
        if start < tcp_rows:
            t = read_columns(tcp, TCP_COLUMNS, start, min(start + _BATCH_ROWS, tcp_rows))
            if t["stream"] != streams[: len(t["stream"])]:
                raise RuntimeError("tcp_connections is not aligned with conversations")
            objects[: len(t["stream"])] = tcp_objects(t)
        yield from conversation_objects(c, objects, [flags.get(int(s)) for s in streams])


def _conversation_texts(capture: Capture) -> Iterator[str] | None:
    """The ``conversations`` section's objects (:func:`_conversations`) as JSON text made by
    the engine from the same tables (``nastriage_engine::json_text``), a batch of rows at a
    time: made in Python, thousands of connections' objects were a fifth of the command's
    time. None when the tables are not the engine's (a stand-in capture)."""
    from nastriage import _core

    names = capture.table_names
    # (The flag counts as the engine counts them: not from tcp_events, as without them.)
    if "conversations" not in names or "tcp_flag_counts" not in names:
        return None

    def source(name: str) -> _core.TableStream | None:
        table = readable_table(capture, name)
        return table.engine_stream() if isinstance(table, PlainTable) else None

    conv, flags = source("conversations"), source("tcp_flag_counts")
    tcp = source("tcp_connections") if "tcp_connections" in names else None
    if conv is None or flags is None or ("tcp_connections" in names and tcp is None):
        return None
    rows = int(conv.num_rows)

    def texts() -> Iterator[str]:
        for start in range(0, rows, _BATCH_ROWS):
            yield _core.conversation_json(conv, tcp, flags, start, start + _BATCH_ROWS)

    return texts()


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
    #: The section's objects, when they are made a batch of rows at a time (``row`` then
    #: makes the same for one row).
    objects: Callable[[Capture], Iterable[dict[str, Any]]] | None = None
    #: The same objects as JSON text written by the engine, batches of them separated as
    #: :func:`write` separates items (None when the engine cannot: other tables).
    texts: Callable[[Capture], Iterable[str] | None] | None = None


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
    yield from srt_rows(capture, "op")


#: The ``concurrency`` columns a concurrency object reads.
CONCURRENCY_COLUMNS: tuple[str, ...] = (
    "stream", "protocol", "requests", "max_outstanding", "mean_outstanding",
    "mean_outstanding_busy", "at_max_fraction", "busy_fraction", "mean_request_bytes",
    "mean_srt_ms", "littles_law_bps", "observed_bps", "max_slot", "max_highest_slot",
    "min_target_highest_slot", "credits_tracked", "credit_balance_inferred",
    "min_credit_balance", "max_credit_balance", "credit_starved_ms",
    "credit_starved_requests",
)  # fmt: skip


def concurrency_objects(c: Columns) -> list[dict[str, Any]]:
    """``concurrency`` rows, as columns (:data:`CONCURRENCY_COLUMNS`) -> their JSON objects
    (converted a column at a time, each made whole: see :func:`tcp_objects`)."""
    out: list[dict[str, Any]] = []
    for (stream, protocol, requests, max_outstanding, mean_outstanding, mean_busy, at_max,
         busy, mean_bytes, mean_srt, littles, observed, max_slot, max_highest,
         min_target, tracked, inferred, min_balance, max_balance, starved_ms,
         starved_requests) in zip(
        _ints(c["stream"]), c["protocol"], _ints(c["requests"]), _ints(c["max_outstanding"]),
        _nums(c["mean_outstanding"]), _nums(c["mean_outstanding_busy"]),
        _nums(c["at_max_fraction"]), _nums(c["busy_fraction"]),
        _nums(c["mean_request_bytes"]), _nums(c["mean_srt_ms"]), _nums(c["littles_law_bps"]),
        _nums(c["observed_bps"]), _ints(c["max_slot"]), _ints(c["max_highest_slot"]),
        _ints(c["min_target_highest_slot"]), c["credits_tracked"],
        c["credit_balance_inferred"], _ints(c["min_credit_balance"]),
        _ints(c["max_credit_balance"]), _nums(c["credit_starved_ms"]),
        _ints(c["credit_starved_requests"]),
    ):  # fmt: skip
        out.append({
            "stream": stream,
            "protocol": protocol,
            "requests": requests,
            "max_outstanding": max_outstanding,
            "mean_outstanding": mean_outstanding,
            "mean_outstanding_busy": mean_busy,
            "at_max_fraction": at_max,
            "busy_fraction": busy,
            "mean_request_bytes": mean_bytes,
            "mean_srt_ms": mean_srt,
            "littles_law_bps": littles,
            "observed_bps": observed,
            "nfs41_slots": {
                "max_slot": max_slot,
                "max_highest_slot": max_highest,
                "min_target_highest_slot": min_target,
            },
            "smb2_credits": {
                "balance_inferred": bool(inferred),
                "min_balance": min_balance,
                "max_balance": max_balance,
                "starved_ms": starved_ms,
                "starved_requests": starved_requests,
            } if tracked else None,
        })  # fmt: skip
    return out


def concurrency_object(row: Row) -> dict[str, Any]:
    """One ``concurrency`` row -> its JSON object."""
    return concurrency_objects({name: [row[name]] for name in CONCURRENCY_COLUMNS})[0]


def _concurrency(capture: Capture) -> Iterator[dict[str, Any]]:
    """The ``concurrency`` section, a batch of rows at a time."""
    if "concurrency" not in capture.table_names:
        return
    table = readable_table(capture, "concurrency")
    for start in range(0, table.num_rows, _BATCH_ROWS):
        yield from concurrency_objects(
            read_columns(table, CONCURRENCY_COLUMNS, start, start + _BATCH_ROWS)
        )


#: The table sections, in document order.
SECTIONS: tuple[TableSection, ...] = (
    TableSection(
        "conversations",
        "conversations",
        conversation_object,
        objects=_conversations,
        texts=_conversation_texts,
    ),
    TableSection("srt", "srt", srt_object, _srt_rows),
    TableSection("concurrency", "concurrency", concurrency_object, objects=_concurrency),
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


#: Batches of a section's text made ahead of the writer (see :func:`start_texts`), besides
#: the one its thread holds: two of 1,024 conversations are about 5 MB. (Four were no
#: faster with 4,743 connections, and 4 MB more.)
_TEXTS_AHEAD = 2


class SectionTexts:
    """The engine's JSON text of the sections that have it (``TableSection.texts``), made on
    threads of their own ahead of :func:`write` (:func:`start_texts`). Each section's
    batches are read once; dropping this object lets its threads go."""

    def __init__(self, capture: Capture) -> None:
        self._ahead: dict[str, _ReadAhead] = {}
        for section in SECTIONS:
            # The tables are looked up here, on the caller's thread; the threads only
            # run the engine's writer (which releases the GIL).
            texts = section.texts(capture) if section.texts is not None else None
            if texts is not None:
                # Not before the engine's own work after the pass (the tables the rules
                # wait for): it would only take a core from it.
                self._ahead[section.key] = _ReadAhead(
                    iter(texts), _TEXTS_AHEAD, after=capture.wait_for_derived_tables
                )

    def take(self, key: str) -> Iterator[str] | None:
        """The batches of section ``key`` (None when it has none, or they were taken)."""
        return self._ahead.pop(key, None)

    def __del__(self) -> None:
        for ahead in self._ahead.values():
            ahead.close()


def start_texts(capture: Capture) -> SectionTexts:
    """Start making the engine's JSON text of the sections (the conversations) for a
    :func:`write` to come: started before the diagnosis, the engine writes it on the core
    that the rules (Python, one core) leave free. With 4,743 connections that text took
    24 ms of the writer's 34 ms."""
    return SectionTexts(capture)


_ITEM, _END, _ERROR = 0, 1, 2


class _ReadAhead:
    """An iterator's items made on a thread of its own, at most ``depth`` ahead of the
    reader, once ``after()`` has returned. An error in either is raised to the reader;
    :meth:`close` (or dropping the object) lets the thread go without reading the
    rest."""

    def __init__(
        self, items: Iterator[str], depth: int, after: Callable[[], None] | None = None
    ) -> None:
        self._queue: queue.Queue[tuple[int, Any]] = queue.Queue(maxsize=depth)
        self._closed = threading.Event()
        self._done = False
        # (The thread holds the queue and the event, not this object, so that dropping
        # the object closes it.)
        thread = threading.Thread(
            target=_fill,
            args=(items, self._queue, self._closed, after),
            name="nastriage-json",
            daemon=True,
        )
        thread.start()

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        if self._done:
            raise StopIteration
        kind, value = self._queue.get()
        if kind == _ITEM:
            return value  # type: ignore[no-any-return]
        self._done = True
        self._closed.set()
        if kind == _ERROR:
            raise value
        raise StopIteration

    def close(self) -> None:
        self._closed.set()

    def __del__(self) -> None:
        self._closed.set()


def _fill(
    items: Iterator[str],
    out: queue.Queue[tuple[int, Any]],
    closed: threading.Event,
    after: Callable[[], None] | None,
) -> None:
    """The thread of a :class:`_ReadAhead`: ``after()`` (what to wait for first), then the
    items into ``out`` until there are no more or the reader closes it."""

    def put(item: tuple[int, Any]) -> bool:
        while not closed.is_set():
            try:
                out.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    try:
        if after is not None:
            after()
        for text in items:
            if not put((_ITEM, text)):
                return
    except BaseException as exc:  # (raised to the reader)
        put((_ERROR, exc))
        return
    put((_END, None))


def write(
    capture: Capture,
    out: TextIO,
    *,
    findings: list[Finding] | None = None,
    texts: SectionTexts | None = None,
) -> None:
    """Write the JSON document for ``capture`` to ``out``, incrementally.

    ``findings``: the diagnosis (``nastriage.diagnosis.diagnose``), computed when None.
    ``texts``: the sections' text started ahead (:func:`start_texts`), made here when
    None."""
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

    def write_texts(batches: Iterable[str]) -> None:
        out.write("[")
        n = 0
        for text in batches:
            if text:
                # (Apart: joined, megabytes of text were copied again.)
                out.write("\n    " if n == 0 else ",\n    ")
                out.write(text)
                n += 1
        out.write("\n  ]" if n else "]")

    for section in SECTIONS:
        key_line(section.key)
        made: Iterable[str] | None = texts.take(section.key) if texts is not None else None
        if made is None and section.texts is not None:
            made = section.texts(capture)
        if made is not None:
            write_texts(made)
            continue
        if section.objects is not None:
            write_list(section.objects(capture))
            continue
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
