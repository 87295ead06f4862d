"""The terminal summary as plain data: blocks of key/value pairs, lists and tables.

Building the summary (this module) is separate from drawing it (``terminal``), so the same
content prints as a rich layout on a terminal and as undecorated text into a pipe, and so
tests can check the content without a terminal. Every string in a block is already
sanitised (``nastriage.sanitize.clean``): renderers print it literally, never as markup.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Union

from nastriage.capture import read_columns, readable_table
from nastriage.sanitize import clean
from nastriage.units import (
    human_bitrate,
    human_bytes,
    human_count,
    human_duration,
    rfc3339_ns,
    seconds_between,
)

if TYPE_CHECKING:
    from nastriage.capture import Capture

__all__ = [
    "Column",
    "KeyValueBlock",
    "ListBlock",
    "TableBlock",
    "build_summary",
    "endpoint",
    "top_conversations",
]

#: Most warnings shown in the terminal; the JSON output has them all.
MAX_WARNINGS = 20
#: Most per-file blocks shown; beyond that only the totals.
MAX_FILE_BLOCKS = 8


@dataclass
class Column:
    header: str
    align: Literal["left", "right"] = "right"
    #: When the terminal is too narrow, columns with the lowest priority are dropped first.
    priority: int = 50
    #: May be folded over several lines (long addresses) instead of being dropped.
    fold: bool = False
    #: Columns of the same group are dropped together (e.g. both directions of a value).
    group: str | None = None


@dataclass
class KeyValueBlock:
    title: str
    items: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class ListBlock:
    title: str
    items: list[str] = field(default_factory=list)


@dataclass
class TableBlock:
    title: str
    columns: list[Column]
    rows: list[list[str]] = field(default_factory=list)
    #: A line under the table, e.g. "showing 10 of 532 conversations".
    note: str | None = None


Block = Union[KeyValueBlock, ListBlock, TableBlock]


def endpoint(ip: str, port: int | None) -> str:
    """``10.0.0.1:445``; IPv6 in brackets: ``[2001:db8::1]:2049``."""
    ip = clean(ip)
    if port is None:
        return ip
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def _display_time(ns: int | None) -> str:
    """Terminal time: RFC 3339 cut to microseconds, with a space: ``2024-01-02 03:04:05.123456``."""
    text = rfc3339_ns(ns)
    if text is None:
        return "-"
    return text[:10] + " " + text[11:26] + " UTC"


def _span(first_ns: int | None, last_ns: int | None) -> str:
    if first_ns is None or last_ns is None:
        return "-"
    return f"{_display_time(first_ns)}  to  {_display_time(last_ns)}"


def _int_or_none(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def _capture_block(title: str, c: dict[str, Any]) -> KeyValueBlock:
    path = str(c.get("path", "?"))
    first = _int_or_none(c.get("first_time_ns"))
    last = _int_or_none(c.get("last_time_ns"))
    fmt = clean(c.get("format", "?"))
    description = c.get("format_description")
    if description:
        described = clean(description)
        # the description usually names the format already: "pcap (little-endian, ...)"
        fmt = described if described.startswith(fmt) else f"{fmt}: {described}"
    frames = int(c.get("frames") or 0)
    truncated = int(c.get("truncated_frames") or 0)
    frames_text = human_count(frames)
    if truncated:
        frames_text += f" ({human_count(truncated)} cut short by the snapshot length)"
    wire = int(c.get("bytes") or 0)
    captured = int(c.get("captured_bytes") or 0)
    bytes_text = f"{human_bytes(wire)} on the wire"
    if captured != wire:
        bytes_text += f", {human_bytes(captured)} captured"
    link_types = c.get("link_types") or []
    items = [
        ("File", "standard input" if path == "-" else clean(path)),
        ("Format", fmt),
        ("Compression", clean(c.get("compression", "none"))),
        ("Link types", ", ".join(clean(x) for x in link_types) or "-"),
        ("Frames", frames_text),
        ("Bytes", bytes_text),
        ("Time (UTC)", _span(first, last)),
        ("Duration", human_duration(seconds_between(first, last))),
    ]
    return KeyValueBlock(title, items)


def _totals_block(capture: Capture, captures: list[dict[str, Any]]) -> KeyValueBlock:
    firsts = [int(c["first_time_ns"]) for c in captures if c.get("first_time_ns") is not None]
    lasts = [int(c["last_time_ns"]) for c in captures if c.get("last_time_ns") is not None]
    first = min(firsts) if firsts else None
    last = max(lasts) if lasts else None
    return KeyValueBlock(
        f"All {len(captures)} files (merged)",
        [
            ("Frames", human_count(capture.frames)),
            ("Bytes", f"{human_bytes(capture.bytes)} on the wire"),
            ("Time (UTC)", _span(first, last)),
            ("Duration", human_duration(seconds_between(first, last))),
        ],
    )


def _warnings_block(warnings: list[str]) -> ListBlock | None:
    if not warnings:
        return None
    items = [clean(w) for w in warnings[:MAX_WARNINGS]]
    if len(warnings) > MAX_WARNINGS:
        items.append(f"... and {len(warnings) - MAX_WARNINGS} more (all are in the --json output)")
    return ListBlock(f"Warnings ({len(warnings)})", items)


def _protocols_block(capture: Capture) -> TableBlock:
    protocols = capture.protocols
    total_frames = capture.frames
    columns = [
        Column("Protocol", "left", 100),
        Column("Frames", "right", 90),
        Column("% of frames", "right", 40),
        Column("Bytes", "right", 80),
    ]
    rows = []
    for p in protocols:
        frames = int(p.get("frames") or 0)
        share = f"{100.0 * frames / total_frames:.1f}%" if total_frames else "-"
        rows.append(
            [
                clean(p.get("protocol", "?")),
                human_count(frames),
                share,
                human_bytes(int(p.get("bytes") or 0)),
            ]
        )
    note = None if rows else "no frames"
    return TableBlock("Protocols", columns, rows, note)


#: Columns of the conversations table needed for the summary.
_CONVERSATION_COLUMNS = (
    "stream",
    "client_ip",
    "client_port",
    "server_ip",
    "server_port",
    "frames_c2s",
    "frames_s2c",
    "bytes_c2s",
    "bytes_s2c",
    "duration_s",
    "throughput_c2s_bps",
    "throughput_s2c_bps",
)


def top_conversations(capture: Capture, n: int) -> tuple[list[dict[str, Any]], int]:
    """The ``n`` conversations with the most bytes (both directions), and the total count.

    Ties go to the lower stream number, so the order is deterministic.
    """
    table = readable_table(capture, "conversations")
    total = table.num_rows
    if n <= 0 or total == 0:
        return [], total
    import heapq

    # Rank on the columns; make dicts for the top rows only (a scan may hold millions of
    # connections).
    cols = read_columns(table, _CONVERSATION_COLUMNS)
    sizes = [int(a or 0) + int(b or 0) for a, b in zip(cols["bytes_c2s"], cols["bytes_s2c"])]
    streams = cols["stream"]
    top = heapq.nsmallest(n, range(total), key=lambda i: (-sizes[i], streams[i]))
    return [
        {**{k: cols[k][i] for k in _CONVERSATION_COLUMNS}, "_bytes": sizes[i]} for i in top
    ], total


def _conversations_block(capture: Capture, top: int, arrow: str) -> TableBlock:
    rows_in, total = top_conversations(capture, top)
    c2s, s2c = f"C{arrow}S", f"S{arrow}C"
    columns = [
        Column("Stream", "right", 100),
        Column(f"Client {arrow} server", "left", 100, fold=True),
        Column(f"Frames {c2s}", "right", 55, group="frames"),
        Column(f"Frames {s2c}", "right", 55, group="frames"),
        Column(f"Bytes {c2s}", "right", 90, group="bytes"),
        Column(f"Bytes {s2c}", "right", 90, group="bytes"),
        Column("Duration", "right", 70),
        Column(f"Rate {c2s}", "right", 80, group="rate"),
        Column(f"Rate {s2c}", "right", 80, group="rate"),
    ]
    rows = [
        [
            str(r["stream"]),
            f"{endpoint(r['client_ip'], r['client_port'])} {arrow} "
            f"{endpoint(r['server_ip'], r['server_port'])}",
            human_count(r["frames_c2s"]),
            human_count(r["frames_s2c"]),
            human_bytes(r["bytes_c2s"]),
            human_bytes(r["bytes_s2c"]),
            human_duration(r["duration_s"]),
            human_bitrate(r["throughput_c2s_bps"]),
            human_bitrate(r["throughput_s2c_bps"]),
        ]
        for r in rows_in
    ]
    if total == 0:
        note = "no TCP connections in the capture"
    elif len(rows) < total:
        note = (
            f"top {len(rows)} of {human_count(total)} TCP connections by bytes (--top N for more)"
        )
    elif total == 1:
        note = "the only TCP connection"
    else:
        note = f"all {human_count(total)} TCP connections, by bytes"
    title = "TCP conversations"
    return TableBlock(title, columns, rows, note)


def build_summary(
    capture: Capture, *, top: int = 10, unicode: bool = True, srt: bool = True
) -> list[Block]:
    """Everything the terminal summary shows, in order: the TCP conversations, the service
    response times per protocol and operation, then what was read (files, warnings,
    protocols). The verdicts, when there are any, come before all of it (``terminal``)."""
    arrow = "\u2192" if unicode else "->"
    blocks: list[Block] = []
    if top > 0:
        blocks.append(_conversations_block(capture, top, arrow))
    if srt:
        from nastriage.views.srt import srt_blocks

        blocks.extend(srt_blocks(capture))
    captures = capture.captures
    if len(captures) == 1:
        blocks.append(_capture_block("Capture", captures[0]))
    else:
        for i, c in enumerate(captures[:MAX_FILE_BLOCKS], 1):
            blocks.append(_capture_block(f"Capture {i} of {len(captures)}", c))
        if len(captures) > MAX_FILE_BLOCKS:
            more = len(captures) - MAX_FILE_BLOCKS
            blocks.append(ListBlock("", [f"... and {more} more files (see the --json output)"]))
        blocks.append(_totals_block(capture, captures))
    warnings = _warnings_block(capture.warnings)
    if warnings is not None:
        blocks.append(warnings)
    blocks.append(_protocols_block(capture))
    return blocks
