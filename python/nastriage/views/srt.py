"""Service response time (SRT) tables per protocol and operation, as tshark prints them.

tshark's ``-z rpc,srt,PROGRAM,VERSION`` and ``-z smb2,srt`` tables have the columns
Index, Procedure (Commands for SMB2), Calls, Min SRT, Max SRT, Avg SRT and Sum SRT, in
seconds with six decimals. The same columns come first here, with the same numbers (calls
counts answered calls, as tshark does), followed by exact percentiles (p50, p90, p99,
p99.9). Unanswered calls and error replies are counted under the table.

The rows come from the engine's ``srt`` table (``breakdown == "op"``). Shared by the
terminal summary and the HTML report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nastriage.capture import srt_rows
from nastriage.sanitize import clean
from nastriage.units import human_count
from nastriage.views.summary import Column, TableBlock

if TYPE_CHECKING:
    from nastriage.capture import Capture

__all__ = [
    "SRT_COLUMNS",
    "SrtGroup",
    "protocol_label",
    "seconds6",
    "srt_blocks",
    "srt_cell",
    "srt_groups",
]

#: (header, key in the srt row, priority): tshark's columns, then percentiles.
#: Priority >= 90 is never dropped on a narrow terminal.
SRT_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("Index", "code", 45),
    ("Procedure", "op", 100),
    ("Calls", "answered", 95),
    ("Min SRT", "min_ms", 50),
    ("Max SRT", "max_ms", 85),
    ("Avg SRT", "avg_ms", 90),
    ("Sum SRT", "sum_ms", 80),
    ("p50", "p50_ms", 75),
    ("p90", "p90_ms", 55),
    ("p99", "p99_ms", 70),
    ("p99.9", "p99_9_ms", 40),
)

_NAMES = {
    "nfs": "NFSv{v}",
    "mount": "MOUNT v{v}",
    "portmap": "Portmap v{v}",
    "nfsacl": "NFSACL v{v}",
    "nlm": "NLM v{v}",
    "smb2": "SMB2",
    "rpc": "RPC v{v}",
}

#: tshark's filter for each table (shown so the numbers can be checked against it).
_TSHARK = {
    "nfs": "rpc,srt,100003,{v}",
    "mount": "rpc,srt,100005,{v}",
    "portmap": "rpc,srt,100000,{v}",
    "nfsacl": "rpc,srt,100227,{v}",
    "nlm": "rpc,srt,100021,{v}",
    "smb2": "smb2,srt",
}


def protocol_label(protocol: str, version: int | None) -> str:
    """``("nfs", 3)`` -> ``"NFSv3"``; ``("smb2", 3)`` -> ``"SMB2"`` (all dialects)."""
    protocol = clean(protocol)
    template = _NAMES.get(protocol)
    v = "?" if version is None else str(version)
    if template is None:
        return f"{protocol} v{v}" if version is not None else protocol
    return template.format(v=v)


def tshark_option(protocol: str, version: int | None) -> str | None:
    template = _TSHARK.get(protocol)
    if template is None or (version is None and "{v}" in template):
        return None
    return "-z " + template.format(v=version)


def seconds6(ms: Any) -> str:
    """Milliseconds as seconds with six decimals, as tshark prints SRTs; ``-`` for none."""
    if ms is None:
        return "-"
    value = float(ms)
    if not math.isfinite(value):
        return "-"
    # Round half up from the decimal value (0.5635 ms -> 0.000564), not from the binary
    # float, which may sit just below the half: the digits of its shortest repr, in whole
    # microseconds. (What `Decimal(repr(value))` quantized half up gives, without loading
    # `decimal`: 1.5 ms of imports in every run that prints a summary.)
    text = repr(value)
    sign = "-" if text.startswith("-") else ""
    mantissa, _, exponent = text.lstrip("-").partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = int(whole + fraction)
    # digits x 10^shift microseconds.
    shift = int(exponent or 0) - len(fraction) + 3
    if shift >= 0:
        micros = digits * 10**shift
    else:
        unit = 10**-shift
        micros, rest = divmod(digits, unit)
        micros += 2 * rest >= unit
    return f"{sign}{micros // 1_000_000}.{micros % 1_000_000:06d}"


@dataclass
class SrtGroup:
    """One tshark-style SRT table: a protocol and version, its operations."""

    protocol: str
    version: int | None
    label: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0
    unanswered: int = 0
    errors: int = 0
    sum_ms: float = 0.0

    @property
    def key(self) -> str:
        return f"{self.protocol}-{self.version if self.version is not None else 'x'}"

    @property
    def tshark(self) -> str | None:
        return tshark_option(self.protocol, self.version)


def srt_groups(capture: Capture) -> list[SrtGroup]:
    """The per-operation rows of the ``srt`` table, one group per protocol and version.

    Groups are ordered by total response time (the busiest first), operations by their
    code (tshark's Index). SMB2's dialect families are merged as tshark does (one table).
    Empty when the engine has no ``srt`` table.
    """
    if "srt" not in capture.table_names:
        return []
    groups: dict[tuple[str, int | None], SrtGroup] = {}
    for row in srt_rows(capture, "op", drop=("histogram_log2_us",)):
        protocol = str(row.get("protocol") or "?")
        version = row.get("version")
        if protocol == "smb2":
            version = None  # tshark's smb2,srt covers every dialect
        gkey = (protocol, None if version is None else int(version))
        group = groups.get(gkey)
        if group is None:
            group = SrtGroup(protocol, gkey[1], protocol_label(protocol, gkey[1]))
            groups[gkey] = group
        group.rows.append(row)
    for group in groups.values():
        group.rows = _merge_same_op(group.rows)
        group.rows.sort(key=lambda r: (_int(r.get("code"), 1 << 30), str(r.get("op"))))
        group.calls = sum(_int(r.get("calls")) for r in group.rows)
        group.unanswered = sum(_int(r.get("unanswered")) for r in group.rows)
        group.errors = sum(_int(r.get("errors")) for r in group.rows)
        group.sum_ms = sum(float(r.get("sum_ms") or 0.0) for r in group.rows)
    return sorted(groups.values(), key=lambda g: (-g.sum_ms, -g.calls, g.label))


def _int(value: Any, default: int = 0) -> int:
    return default if value is None else int(value)


def _merge_same_op(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of the same operation (SMB2 over two dialect families) as one.

    Counts, min, max and sums combine exactly; percentiles cannot be combined, so a merged
    row keeps those of its busiest part (the common case is one part only).
    """
    by_op: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for row in rows:
        by_op.setdefault((row.get("code"), row.get("op")), []).append(row)
    merged = []
    for parts in by_op.values():
        if len(parts) == 1:
            merged.append(parts[0])
            continue
        parts.sort(key=lambda r: -_int(r.get("answered")))
        row = dict(parts[0])
        for name in ("calls", "answered", "unanswered", "errors"):
            row[name] = sum(_int(p.get(name)) for p in parts)
        mins = [float(p["min_ms"]) for p in parts if p.get("min_ms") is not None]
        maxs = [float(p["max_ms"]) for p in parts if p.get("max_ms") is not None]
        row["min_ms"] = min(mins) if mins else None
        row["max_ms"] = max(maxs) if maxs else None
        row["sum_ms"] = sum(float(p.get("sum_ms") or 0.0) for p in parts)
        answered = _int(row.get("answered"))
        row["avg_ms"] = row["sum_ms"] / answered if answered else None
        merged.append(row)
    return merged


def srt_cell(row: dict[str, Any], key: str) -> str:
    """The text of one cell of an SRT row (seconds with six decimals for times)."""
    value = row.get(key)
    if key == "op":
        return clean(value if value is not None else "?")
    if key in ("code", "answered", "calls"):
        return "-" if value is None else str(int(value))
    if _int(row.get("answered")) == 0:
        return "-"
    return seconds6(value)


def srt_block(group: SrtGroup) -> TableBlock:
    """One group as a terminal table (tshark's layout plus percentiles)."""
    columns = []
    for header, key, priority in SRT_COLUMNS:
        if key == "op" and group.protocol == "smb2":
            header = "Commands"  # tshark's word for SMB2
        columns.append(Column(header, "left" if key == "op" else "right", priority))
    rows = [[srt_cell(r, key) for _, key, _ in SRT_COLUMNS] for r in group.rows]
    notes = ["times in seconds"]
    if group.tshark:
        notes[0] += f" (compare: tshark -q {group.tshark})"
    if group.unanswered:
        notes.append(f"{human_count(group.unanswered)} unanswered (not in Calls)")
    if group.errors:
        notes.append(f"{human_count(group.errors)} answered with an error")
    title = f"{group.label} service response time"
    return TableBlock(title, columns, rows, "; ".join(notes))


def srt_blocks(capture: Capture) -> list[TableBlock]:
    """A terminal table per protocol and version that has calls."""
    return [srt_block(g) for g in srt_groups(capture) if g.calls]
