"""The JSON contract (``nastriage analyze --json``), documented in docs/json-schema.md and
described by ``nastriage/schema/analysis.schema.json``.

The document is one object: fixed metadata keys (``schema_version``, ``tool``,
``captures``, ``protocols``, ``warnings``) followed by one list per *table section*. A
section is a result table of the engine turned into a list of objects, one per row, by a
row function (``SECTIONS``). Adding a table to the JSON means adding a ``TableSection``:
that is an additive change and bumps the minor ``SCHEMA_VERSION``.

The output is written incrementally (one list element per line), so a capture with
millions of connections never needs the whole document in memory. It is pure ASCII
(``json.dumps`` escapes everything else), valid JSON (no NaN/Infinity: non-finite numbers
become ``null``) and key order is stable.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, TextIO

from nastriage.units import rfc3339_ns, seconds_between

if TYPE_CHECKING:
    from nastriage.capture import Capture

__all__ = [
    "SCHEMA_VERSION",
    "SECTIONS",
    "TableSection",
    "capture_object",
    "conversation_object",
    "document",
    "output",
    "write",
]

#: MAJOR.MINOR. Minor: additive changes (new keys, new sections, new enum values).
#: Major: anything that removes, renames or changes the meaning or type of a key.
SCHEMA_VERSION = "1.0"

Row = dict[str, Any]


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _num(value: Any) -> float | None:
    """A finite float, or None (JSON has no NaN/Infinity)."""
    if value is None:
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def _directions(row: Row, prefix: str, convert: Callable[[Any], Any] = _int) -> dict[str, Any]:
    return {
        "client_to_server": convert(row[f"{prefix}_c2s"]),
        "server_to_client": convert(row[f"{prefix}_s2c"]),
    }


def conversation_object(row: Row) -> dict[str, Any]:
    """One ``conversations`` row (timestamps as int ns) -> its JSON object."""
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
    }


@dataclass(frozen=True)
class TableSection:
    """A JSON list built from an engine table, one object per row."""

    #: Key in the JSON document.
    key: str
    #: Name of the engine table (``Capture.table(name)``).
    table: str
    #: Row (a dict of column -> Python value; timestamps as int ns) -> JSON object.
    row: Callable[[Row], dict[str, Any]]


#: The table sections, in document order. Later issues append tcp_events, transactions, ...
SECTIONS: tuple[TableSection, ...] = (
    TableSection("conversations", "conversations", conversation_object),
)


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


def iter_rows(table: Any, batch_rows: int = 8192) -> Iterator[Row]:
    """Rows of a ``pyarrow.Table`` as dicts, batch by batch; timestamps as int ns since epoch.

    (pyarrow cannot convert nanosecond timestamps to Python objects without pandas, and
    datetime has only microseconds anyway.)
    """
    import pyarrow as pa

    names = table.schema.names
    ts_columns = {i for i, f in enumerate(table.schema) if pa.types.is_timestamp(f.type)}
    for batch in table.to_batches(max_chunksize=batch_rows):
        columns = []
        for i in range(batch.num_columns):
            column = batch.column(i)
            if i in ts_columns:
                column = column.cast(pa.timestamp("ns", tz="UTC")).cast(pa.int64())
            columns.append(column.to_pylist())
        for values in zip(*columns):
            yield dict(zip(names, values))


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=True, allow_nan=False, separators=(", ", ": "))


def _header(capture: Capture) -> dict[str, Any]:
    from nastriage import __version__

    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "nastriage", "version": __version__},
        "captures": [capture_object(c) for c in capture.captures],
        "protocols": [_protocol_object(p) for p in capture.protocols],
        "warnings": [str(w) for w in capture.warnings],
    }


def write(capture: Capture, out: TextIO) -> None:
    """Write the JSON document for ``capture`` to ``out``, incrementally."""
    header = _header(capture)
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
        table = capture.table(section.table)
        write_list(section.row(r) for r in iter_rows(table))
    out.write("\n}\n")
    out.flush()


def document(capture: Capture) -> dict[str, Any]:
    """The JSON document as Python objects (what ``json.load`` of ``write`` gives)."""
    import io

    buf = io.StringIO()
    write(capture, buf)
    result: dict[str, Any] = json.loads(buf.getvalue())
    return result


@contextlib.contextmanager
def output(path: str) -> Iterator[TextIO]:
    """Open the JSON destination before the (long) analysis, so a bad path fails fast.

    ``"-"`` is standard output. A regular file is written to a temporary file next to it
    and renamed into place only when the block succeeds, so an error or Ctrl-C never leaves
    a half-written document (or destroys the previous one). Other targets (``/dev/stdout``,
    a FIFO) are written directly.
    """
    if path == "-":
        yield sys.stdout
        return
    target = os.path.abspath(path)
    if os.path.exists(target) and not os.path.isfile(target):
        if os.path.isdir(target):
            raise IsADirectoryError(21, "is a directory", path)
        with open(target, "w", encoding="ascii", newline="\n") as special:
            yield special
        return
    directory = os.path.dirname(target)
    fd, tmp = tempfile.mkstemp(prefix=".nastriage-", suffix=".json.tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="ascii", newline="\n") as f:
            yield f
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
