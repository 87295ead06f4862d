"""Captures for the report tests: real engine results with hostile strings swapped in, and
findings built by hand (``from report_fakes import ...``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from fakes import T0, capture_meta, conversation, conversations_table

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

#: Strings a capture may carry in file, share and host names.
HOSTILE = (
    "<img src=x onerror=alert(1)>",
    "<svg onload=alert(2)>",
    "{{7*7}}",
    "</script><script>alert(3)</script>",
    '" onmouseover="alert(4)',
    "javascript:alert(5)",
    "\x1b]0;pwned\x07\x1b[31mred\u202e",
)
HOSTILE_NAME = "".join(HOSTILE) + ".bin"


class TablesAnalysis:
    """Duck-typed ``_core.Analysis`` over given tables and metadata."""

    def __init__(
        self,
        tables: dict[str, pa.Table],
        captures: list[dict[str, object]] | None = None,
        warnings: list[str] | None = None,
    ) -> None:
        self._tables = tables
        self.captures = captures if captures is not None else [capture_meta()]
        self.protocols = [{"protocol": "tcp", "frames": 10, "bytes": 1000}]
        self.warnings = warnings or []
        self.frames = sum(int(c["frames"]) for c in self.captures)  # type: ignore[call-overload]

    def table_names(self) -> list[str]:
        return list(self._tables)

    def table(self, name: str) -> Any:
        return self._tables[name]


def replace_strings(table: pa.Table, column: str, value: str) -> pa.Table:
    """``column`` with every non-null value replaced by ``value``."""
    if column not in table.schema.names:
        return table
    col = table[column]
    new = pc.if_else(pc.is_valid(col), pa.scalar(value, pa.string()), pa.scalar(None, pa.string()))
    idx = table.schema.get_field_index(column)
    return table.set_column(idx, pa.field(column, pa.string()), new)


def hostile_capture(example: str = "smb2-healthy-lan.pcap.gz") -> Any:
    """A real capture's tables with file, share, client and address strings made hostile."""
    import nastriage
    from nastriage.capture import Capture

    cap = nastriage.open(str(EXAMPLES / example))
    tables = {name: cap.table(name) for name in cap.table_names}
    srt = tables["srt"]
    keys = pc.if_else(
        pc.equal(srt["breakdown"], "op"),
        srt["key"],
        pa.scalar(HOSTILE_NAME, pa.string()),
    )
    tables["srt"] = srt.set_column(srt.schema.get_field_index("key"), "key", keys)
    tx = tables["transactions"]
    for column in ("file_name", "share"):
        tx = replace_strings(tx, column, HOSTILE_NAME)
    tables["transactions"] = tx
    conv = tables["conversations"]
    tables["conversations"] = replace_strings(conv, "client_ip", "10.0.0.1" + HOSTILE[0])
    meta = dict(cap.captures[0])
    meta["path"] = "/tmp/" + HOSTILE_NAME + ".pcap"
    analysis = TablesAnalysis(tables, [meta], warnings=["warning about " + HOSTILE_NAME])
    return Capture(analysis, [str(EXAMPLES / example)])


def minimal_capture() -> Any:
    """Only a conversations table (an engine without the other tables)."""
    from nastriage.capture import Capture

    tables = {"conversations": conversations_table([conversation(i) for i in range(3)])}
    return Capture(TablesAnalysis(tables), ["/data/trace.pcapng"])


def sample_findings(stream: int = 0, t0: int = T0, text: str = "") -> list[Any]:
    """Two findings (a warning with time ranges and frames, an info) with ``text`` in
    every free-text field."""
    from nastriage.diagnosis.finding import Evidence, Finding, Impact, TimeRange

    warning = Finding(
        id="receiver-stall",
        severity="critical",
        title="Server stalls on zero windows " + text,
        explanation="The receiver closed its window. " + text,
        evidence=Evidence(
            numbers={"zero_window_episodes": 2, "stalled_fraction": 0.4, "host": text or "x"},
            time_ranges=[
                TimeRange(t0 + 1_000_000, t0 + 2_000_000, stream, "stall " + text),
                TimeRange(t0 + 3_000_000, t0 + 4_000_000, stream, ""),
            ],
            frames=[12, 13, 14],
            wireshark_filter='tcp.analysis.zero_window && frame contains "' + text + '"',
        ),
        impact=Impact(time_share=0.4, observed_bps=1e6, potential_bps=2e6, basis="window " + text),
        next_steps=["Look at the server " + text, "Then the disk"],
        confidence=0.9,
        streams=[stream],
    )
    info = Finding(
        id="connection-resets",
        severity="info",
        title="1 connection reset",
        explanation="A reset.",
        evidence=Evidence(frames=[99]),
        impact=Impact(),
        next_steps=["Check the firewall"],
        confidence=0.5,
        streams=[stream],
    )
    return [info, warning]  # deliberately not in rank order
