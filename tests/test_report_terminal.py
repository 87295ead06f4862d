"""The terminal's per-operation SRT tables (views/srt.py) and their place in the summary."""

from __future__ import annotations

import io
import random
import re
from typing import Any

import pyarrow as pa
import pytest

from fakes import conversation, conversations_table
from helpers import run_cli
from nastriage.capture import Capture
from nastriage.views.srt import SRT_COLUMNS, seconds6, srt_blocks, srt_groups
from nastriage.views.summary import TableBlock, build_summary
from nastriage.views.terminal import fit_columns, print_summary, render_plain, render_rich
from report_fakes import EXAMPLES, TablesAnalysis

SRT_SCHEMA = pa.schema(
    [
        ("breakdown", pa.string()),
        ("key", pa.string()),
        ("protocol", pa.string()),
        ("version", pa.uint32()),
        ("op", pa.string()),
        ("code", pa.uint32()),
        ("calls", pa.uint64()),
        ("answered", pa.uint64()),
        ("unanswered", pa.uint64()),
        ("errors", pa.uint64()),
        ("min_ms", pa.float64()),
        ("max_ms", pa.float64()),
        ("avg_ms", pa.float64()),
        ("sum_ms", pa.float64()),
        ("p50_ms", pa.float64()),
        ("p90_ms", pa.float64()),
        ("p99_ms", pa.float64()),
        ("p99_9_ms", pa.float64()),
        ("p95_ms", pa.float64()),
        ("histogram_log2_us", pa.list_(pa.uint64())),
    ]
)


def srt_row(op: str, code: int, answered: int, **kw: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "breakdown": "op",
        "key": "",
        "protocol": "nfs",
        "version": 3,
        "op": op,
        "code": code,
        "calls": answered + kw.get("unanswered", 0),
        "answered": answered,
        "unanswered": 0,
        "errors": 0,
        "min_ms": 0.5,
        "max_ms": 2.5,
        "avg_ms": 1.0,
        "sum_ms": answered * 1.0,
        "p50_ms": 0.9,
        "p90_ms": 1.8,
        "p99_ms": 2.4,
        "p99_9_ms": 2.49,
        "p95_ms": 2.1,
        "histogram_log2_us": [0] * 28,
    }
    row.update(kw)
    return row


def capture_with_srt(rows: list[dict[str, Any]]) -> Capture:
    tables = {
        "conversations": conversations_table([conversation(0)]),
        "srt": pa.Table.from_pylist(rows, schema=SRT_SCHEMA),
    }
    return Capture(TablesAnalysis(tables), ["/data/x.pcap"])


def test_seconds_like_tshark() -> None:
    assert seconds6(0.5635) == "0.000564"  # half up, as tshark prints 0.0005635 s
    assert seconds6(1.0) == "0.001000"
    assert seconds6(6201.0) == "6.201000"
    assert seconds6(None) == "-"
    assert seconds6(float("nan")) == "-"
    assert seconds6(float("inf")) == "-"


def test_seconds_round_half_up_from_the_decimal_value() -> None:
    """Every way a value's repr can look (exponents, halves, negatives, huge and tiny)
    gives what decimal's half-up rounding of that repr gives."""
    from decimal import ROUND_HALF_UP, Decimal, localcontext

    def reference(ms: float) -> str:
        with localcontext(prec=400):  # (the largest floats have 309 digits)
            seconds = (
                Decimal(repr(ms)).scaleb(-3).quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP)
            )
            return f"{seconds:.6f}"

    rng = random.Random(7)
    values = [0.0, -0.0, 0.0005, 0.0004999, 0.0015, 1e-05, 5e-4, 2.5e-3, 1e16, 1.5e22]
    values += [-0.5635, 123456.0005, 999.9995, 1e-300, 5e-324, 1.7976931348623157e308]
    for _ in range(3000):
        scale = 10 ** rng.randint(-8, 12)
        values.append(rng.random() * scale * rng.choice((1, -1)))
        values.append(round(rng.random() * 1000, rng.randint(0, 6)) + 0.0005)
    for v in values:
        assert seconds6(v) == reference(v), v


def test_columns_are_tsharks_then_percentiles() -> None:
    headers = [h for h, _, _ in SRT_COLUMNS]
    assert headers[:7] == [
        "Index",
        "Procedure",
        "Calls",
        "Min SRT",
        "Max SRT",
        "Avg SRT",
        "Sum SRT",
    ]
    assert headers[7:] == ["p50", "p90", "p99", "p99.9"]


def test_srt_table_content_and_notes() -> None:
    cap = capture_with_srt(
        [
            srt_row("WRITE", 7, 3, unanswered=2, errors=1, sum_ms=4.5, avg_ms=1.5),
            srt_row("GETATTR", 1, 10, min_ms=0.1234565, sum_ms=10.0),
            srt_row("READ", 6, 0, unanswered=4, min_ms=None, max_ms=None, avg_ms=None,
                    sum_ms=0.0, p50_ms=None, p90_ms=None, p99_ms=None, p99_9_ms=None),
            srt_row("Read", 8, 5, protocol="smb2", version=3, sum_ms=50.0),
            srt_row("Read", 8, 2, protocol="smb2", version=2, sum_ms=4.0, min_ms=0.2, max_ms=9.0),
            srt_row("x", 1, 1, breakdown="file", key="/export/a"),
        ]
    )  # fmt: skip
    blocks = srt_blocks(cap)
    # the busiest protocol (by total time) first; SMB2 dialects in one table, as tshark does
    assert [b.title for b in blocks] == [
        "SMB2 service response time",
        "NFSv3 service response time",
    ]
    smb, nfs = blocks
    assert [c.header for c in smb.columns][1] == "Commands"
    assert [c.header for c in nfs.columns][1] == "Procedure"
    # ops by Index (the op code), as tshark lists them
    assert [r[1] for r in nfs.rows] == ["GETATTR", "READ", "WRITE"]
    getattr_row = nfs.rows[0]
    assert getattr_row[:7] == ["1", "GETATTR", "10", "0.000123", "0.002500", "0.001000", "0.010000"]
    assert getattr_row[7:] == ["0.000900", "0.001800", "0.002400", "0.002490"]
    # no answered call: no times
    assert nfs.rows[1][2] == "0" and set(nfs.rows[1][3:]) == {"-"}
    assert nfs.note is not None
    assert "tshark -q -z rpc,srt,100003,3" in nfs.note
    assert "6 unanswered" in nfs.note and "1 answered with an error" in nfs.note
    # the two SMB2 parts merged: counts and min/max exact
    merged = smb.rows[0]
    assert merged[:7] == ["8", "Read", "7", "0.000200", "0.009000", "0.007714", "0.054000"]
    assert "smb2,srt" in (smb.note or "")


def test_no_srt_table_no_blocks() -> None:
    cap = Capture(TablesAnalysis({"conversations": conversations_table([])}), ["/x"])
    assert srt_blocks(cap) == []
    assert srt_groups(cap) == []


def test_summary_order_conversations_then_srt_then_capture() -> None:
    cap = capture_with_srt([srt_row("READ", 6, 4)])
    titles = [b.title for b in build_summary(cap)]
    conv = titles.index("TCP conversations")
    srt = titles.index("NFSv3 service response time")
    assert conv < srt < titles.index("Capture") < titles.index("Protocols")


def test_plain_output_is_aligned_and_undecorated() -> None:
    cap = capture_with_srt([srt_row("GETATTR", 1, 10), srt_row("READDIRPLUS", 17, 1)])
    buf = io.StringIO()
    print_summary(cap, file=buf)
    out = buf.getvalue()
    assert "\x1b" not in out
    lines = out.splitlines()
    start = lines.index("NFSv3 service response time:")
    header, first, second = lines[start + 1 : start + 4]
    assert header.split() == [
        "Index", "Procedure", "Calls", "Min", "SRT", "Max", "SRT", "Avg", "SRT", "Sum", "SRT",
        "p50", "p90", "p99", "p99.9",
    ]  # fmt: skip
    assert first.split()[:3] == ["1", "GETATTR", "10"]
    assert second.split()[:3] == ["17", "READDIRPLUS", "1"]
    # right-aligned numbers: the columns end at the same place
    assert len(first) == len(second) == len(header)


def test_narrow_terminal_drops_percentiles_before_tshark_columns() -> None:
    cap = capture_with_srt([srt_row("GETATTR", 1, 10)])
    block = srt_blocks(cap)[0]
    keep = [block.columns[i].header for i in fit_columns(block, 80)]
    assert {"Procedure", "Calls", "Avg SRT", "Max SRT"} <= set(keep)
    assert "p99.9" not in keep and "Index" not in keep
    assert [block.columns[i].header for i in fit_columns(block, 400)] == [
        c.header for c in block.columns
    ]
    tiny = [block.columns[i].header for i in fit_columns(block, 20)]
    assert tiny == ["Procedure", "Calls", "Avg SRT"]  # never dropped


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def test_rich_render_fits_width_and_names_hidden_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    cap = capture_with_srt([srt_row("GETATTR", 1, 10), srt_row("READ", 6, 3)])
    buf = _Tty()
    render_rich(srt_blocks(cap), buf, width=72)
    out = buf.getvalue()
    assert "\x1b[" in out  # styled
    plain = _strip_ansi(out)
    assert all(len(line) <= 72 for line in plain.splitlines())
    assert "GETATTR" in plain and "hidden to fit the terminal" in plain


def test_rich_honours_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("TERM", "xterm-256color")
    cap = capture_with_srt([srt_row("GETATTR", 1, 10)])
    buf = _Tty()
    render_rich(srt_blocks(cap), buf, width=200)
    out = buf.getvalue()
    assert "GETATTR" in out
    assert not re.search(r"\x1b\[[0-9;]*3[0-9]m", out)  # no foreground colour


@pytest.mark.parametrize("plain", [True, False])
def test_hostile_operation_names_are_sanitised(plain: bool) -> None:
    evil = "READ\x1b]0;title\x07\x1b[2J[bold]x[/bold]\u202e"
    cap = capture_with_srt([srt_row(evil, 6, 2)])
    buf = _Tty()
    blocks: list[Any] = srt_blocks(cap)
    if plain:
        render_plain(blocks, buf)
    else:
        render_rich(blocks, buf, width=300)
    out = buf.getvalue()
    assert "\x07" not in out and "\x1b]0;" not in out and "\x1b[2J" not in out
    assert "\u202e" not in out
    assert "READ\\x1b]0;title\\x07\\x1b[2J[bold]x[/bold]\\u202e" in _strip_ansi(out)


def test_cli_piped_output_has_srt_tables(engine: None) -> None:
    res = run_cli(["analyze", EXAMPLES / "nfs3-copy.pcap"])
    assert res.returncode == 0, res.stderr
    out = res.stdout.decode()
    assert "\x1b" not in out
    assert "NFSv3 service response time:" in out
    assert out.index("TCP conversations:") < out.index("NFSv3 service response time:")
    line = next(x for x in out.splitlines() if x.split()[:2] == ["1", "GETATTR"])
    assert line.split()[2] == "4"


def test_real_capture_rows_match_the_srt_table(engine: None) -> None:
    import nastriage

    cap = nastriage.open(str(EXAMPLES / "nfs3-copy.pcap"))
    blocks = [b for b in srt_blocks(cap) if b.title.startswith("NFSv3")]
    assert len(blocks) == 1
    table = cap.table("srt").to_pylist()
    ops = {
        r["op"]: r
        for r in table
        if r["breakdown"] == "op" and r["protocol"] == "nfs" and r["version"] == 3
    }
    block: TableBlock = blocks[0]
    assert [r[1] for r in block.rows] == sorted(ops, key=lambda o: ops[o]["code"])
    for row in block.rows:
        r = ops[row[1]]
        assert row[0] == str(r["code"]) and row[2] == str(r["answered"])
        assert row[3:7] == [seconds6(r[k]) for k in ("min_ms", "max_ms", "avg_ms", "sum_ms")]
