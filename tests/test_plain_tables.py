"""The engine's tables read as plain Python values (``Capture.plain_table``, no pyarrow) give
exactly what the same tables read through pyarrow give, column by column, on every reference
capture and the shipped examples; and the command line's JSON and terminal runs, which read
them that way, never import pyarrow (about 60 MB and a tenth of a second of CPU)."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import Without, bench_capture, cli_env
from oracle import SHARED, readable_captures

pytestmark = pytest.mark.usefixtures("engine")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(str(p) for p in (ROOT / "examples").glob("*.pcap*"))
CAPTURES = [str(SHARED / n) for n in readable_captures()] if SHARED.exists() else []


def _same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to NaN and lists compared item by item."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("path", CAPTURES + EXAMPLES, ids=lambda p: Path(p).name)
def test_plain_columns_equal_the_arrow_ones(path: str) -> None:
    from nastriage.capture import Capture, PlainTable, read_columns

    # Segments for stream 0 too, so that tcp_segments has rows.
    capture = Capture.analyze(path, segments_for=[0])
    for name in capture.table_names:
        plain = capture.plain_table(name)  # before the Arrow import, which it would reuse
        assert isinstance(plain, PlainTable)
        arrow = capture.table(name)
        assert plain.column_names == arrow.schema.names, name
        assert plain.num_rows == arrow.num_rows, name
        names = [*plain.column_names, "no_such_column"]
        got, want = read_columns(plain, names), read_columns(arrow, names)
        for column in names:
            assert len(got[column]) == plain.num_rows, (name, column)
            bad = [i for i, (g, w) in enumerate(zip(got[column], want[column])) if not _same(g, w)]
            assert not bad, (name, column, bad[:3], got[column][bad[0]], want[column][bad[0]])


@pytest.mark.parametrize(
    "path",
    [p for p in CAPTURES if "smb" in Path(p).name or "nfs" in Path(p).name][:12] + EXAMPLES,
    ids=lambda p: Path(p).name,
)
def test_findings_and_json_are_the_same_read_either_way(path: str) -> None:
    from nastriage.capture import Capture
    from nastriage.diagnosis.run import diagnose
    from nastriage.views import json_out

    def document(capture: Any) -> dict[str, Any]:
        buf = io.StringIO()
        json_out.write(capture, buf, findings=diagnose(capture, strict=True))
        result: dict[str, Any] = json.loads(buf.getvalue())
        return result

    plain = document(Capture.analyze(path, segment_points=0))
    arrow = document(Without(Capture.analyze(path, segment_points=0), "plain_table"))
    for key in arrow:
        assert plain[key] == arrow[key], key
    assert plain.keys() == arrow.keys()


def test_the_json_and_terminal_runs_do_not_import_pyarrow(tmp_path: Path) -> None:
    """Nor :mod:`statistics` (3 ms of start-up with its fractions and decimals, for a
    median: ``context.median``)."""
    example = ROOT / "examples" / "nfs3-copy.pcap"
    script = (
        "import sys\n"
        "from nastriage import cli\n"
        "status = cli.main(sys.argv[1:])\n"
        "sys.stdout.flush()\n"
        "heavy = [m for m in ('pyarrow', 'statistics') if m in sys.modules]\n"
        "print(' '.join(heavy).upper() or 'NO-PYARROW', file=sys.stderr)\n"
        "sys.exit(status)\n"
    )
    out = tmp_path / "out.json"
    done = subprocess.run(
        [sys.executable, "-c", script, "analyze", str(example), "--json", str(out)],
        capture_output=True,
        env=cli_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr.decode().strip().splitlines()[-1] == "NO-PYARROW"
    assert b"NFSv3 service response time" in done.stdout
    assert json.loads(out.read_text())["srt"]


def test_long_tables_are_not_kept_converted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A summary table's columns are converted once and kept; a longer one's (events,
    series) each time they are asked for, so that its readers' own objects are not
    doubled by a kept copy."""
    import nastriage.capture as capture_module
    from nastriage.capture import Capture

    path = EXAMPLES[0]
    capture = Capture.analyze(path)
    long_name = max(capture.table_names, key=lambda n: capture.plain_table(n).num_rows)
    long_table = capture.plain_table(long_name)
    assert long_table.num_rows > 1
    monkeypatch.setattr(capture_module, "KEEP_COLUMNS_ROWS", long_table.num_rows - 1)
    first = long_table.columns(long_table.column_names)
    assert not long_table._cols
    again = long_table.columns(long_table.column_names)
    for name, values in again.items():  # converted anew, to the same values
        assert values is not first[name]
        assert all(_same(a, b) for a, b in zip(values, first[name], strict=True)), name
    small = capture.plain_table("conversations")
    assert 0 < small.num_rows <= capture_module.KEEP_COLUMNS_ROWS
    kept = small.columns(["stream"])["stream"]
    assert small.columns(["stream"])["stream"] is kept


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: Path(p).name)
def test_row_slices_read_what_the_whole_table_reads(path: str) -> None:
    """``read_columns(table, names, start, stop)`` (plain and pyarrow tables alike) and
    ``column_chunks`` give the rows a slice of the whole gives; ``read_rows`` with
    ``where`` the rows a filter of the whole gives, whatever runs they form."""
    from nastriage.capture import Capture, column_chunks, read_columns, read_rows

    capture = Capture.analyze(path)
    for name in capture.table_names:
        for table in (capture.plain_table(name), capture.table(name)):
            names = [*capture.table(name).schema.names, "no_such_column"]
            whole = read_columns(table, names)
            n = table.num_rows
            for start, stop in [(0, 0), (0, 1), (3, 17), (max(n - 5, 0), n + 10), (n + 3, n + 9)]:
                got = read_columns(table, names, start, stop)
                for column in names:
                    assert _same(got[column], whole[column][start:stop]), (name, column, start)
            chunks = list(column_chunks(table, names, rows=7))
            assert len(chunks) == -(-n // 7)
            for column in names:
                joined = [v for c in chunks for v in c[column]]
                assert _same(joined, whole[column]), (name, column)
            if not n:
                continue
            # Every third row, and a value of the first column.
            key = names[0]
            value = whole[key][n // 2]
            want = [
                {k: whole[k][i] for k in names[:-1]} for i, v in enumerate(whole[key]) if v == value
            ]
            got_rows = read_rows(table, names[:-1], where=(key, value))
            assert len(got_rows) == len(want), name
            assert all(_same(list(g.values()), list(w.values())) for g, w in zip(got_rows, want)), (
                name
            )


@pytest.mark.parametrize("path", CAPTURES[:20] + EXAMPLES, ids=lambda p: Path(p).name)
def test_row_views_read_what_read_rows_reads(path: str) -> None:
    """``row_views`` of an engine table gives mappings equal to ``read_rows``' dicts (of
    the Arrow table), read in place; other tables fall back to the dicts."""
    from nastriage.capture import MADE_BY_ROWS, Capture, RowView, read_rows, row_views

    capture = Capture.analyze(path)
    for name in capture.table_names:
        plain = capture.plain_table(name)
        views = row_views(plain)
        want = read_rows(capture.table(name))
        assert len(views) == len(want) == plain.num_rows, name
        if views:
            assert isinstance(views[0], RowView) != (name in MADE_BY_ROWS), name
        for view, row in zip(views, want):
            assert list(view) == list(row) and len(view) == len(row), name
            assert all(_same(view[k], row[k]) and _same(view.get(k), row[k]) for k in row), name
            assert _same(list(dict(view).values()), list(row.values())), name
            assert "no_such_column" not in view and view.get("no_such_column", 7) == 7
            with pytest.raises(KeyError):
                view["no_such_column"]
    stream = capture.plain_table("conversations")._source
    with pytest.raises(IndexError):
        stream.value(0, stream.num_rows)
    with pytest.raises(IndexError):
        stream.value(len(stream.column_names), 0)


@pytest.mark.parametrize("path", CAPTURES[:10] + EXAMPLES, ids=lambda p: Path(p).name)
def test_rows_read_a_batch_at_a_time_are_the_whole_tables_rows(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``iter_rows`` (the JSON writer's rows, the time profiles) read a few rows at a time
    gives the rows read all at once."""

    from nastriage.capture import Capture, iter_rows, read_rows
    from nastriage.diagnosis import timeline
    from nastriage.diagnosis.context import Context

    capture = Capture.analyze(path)
    for name in capture.table_names:
        for table in (capture.plain_table(name), capture.table(name)):
            want = read_rows(table)
            for batch in (1, 3, 1 << 20):
                got = list(iter_rows(table, batch_rows=batch))
                assert len(got) == len(want), (name, batch)
                assert all(
                    list(g) == list(w) and _same(list(g.values()), list(w.values()))
                    for g, w in zip(got, want)
                ), (name, batch)

    def profiles(rows: int) -> list[tuple[int, dict[str, Any]]]:
        monkeypatch.setattr(timeline, "_PROFILE_ROWS", rows)
        found = timeline.profiles(Context(capture))
        return [(s, p.fields()) for s, p in found.items()]

    whole = profiles(1 << 20)
    assert [s for s, _ in whole] == sorted(s for s, _ in whole)
    assert repr(profiles(1)) == repr(profiles(2)) == repr(whole)


def test_runs_of_matching_rows() -> None:
    from nastriage.capture import _runs

    assert list(_runs([])) == []
    assert list(_runs([0, 1, 2, 5, 7, 8])) == [(0, 3), (5, 6), (7, 9)]
    assert list(_runs([4])) == [(4, 5)]


@pytest.mark.parametrize("keep_rows", [None, 0])
def test_long_tables_are_made_again_when_asked_again(
    keep_rows: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Capture.plain_table`` keeps the summary tables it made and the per-connection
    ones at any length, not the other long ones (their readers keep compact forms of
    their own). (With ``keep_rows`` 0 every table is long.)"""
    import nastriage.capture as capture_module
    from nastriage.capture import Capture

    if keep_rows is not None:
        monkeypatch.setattr(capture_module, "KEEP_COLUMNS_ROWS", keep_rows)
    capture = Capture.analyze(EXAMPLES[0])
    sizes = {n: capture.plain_table(n).num_rows for n in capture.table_names}
    assert sizes.keys() >= capture_module.KEEP_TABLES
    for name, rows in sizes.items():
        again = capture.plain_table(name) is capture.plain_table(name)
        kept = (
            rows <= capture_module.KEEP_COLUMNS_ROWS or name in capture_module.KEEP_TABLES
        ) and name not in capture_module.MADE_BY_ROWS
        assert again == kept, name


def test_events_are_made_a_range_at_a_time(tmp_path: Path) -> None:
    """``tcp_events`` is read from the engine a range of rows at a time (a lossy capture
    flags hundreds of thousands of segments), giving what the whole table gives."""
    from nastriage.capture import Capture, column_chunks, read_columns

    # (Seed 3 at 60 MB: two thousand events.)
    capture = Capture.analyze(str(bench_capture(tmp_path, size="60M", seed=3)))
    plain = capture.plain_table("tcp_events")
    arrow = capture.table("tcp_events")
    assert plain.num_rows == arrow.num_rows > 10
    names = arrow.schema.names
    whole = read_columns(arrow, names)
    joined: dict[str, list[Any]] = {n: [] for n in names}
    for c in column_chunks(plain, names, rows=333):
        for n in names:
            joined[n] += c[n]
    assert all(_same(joined[n], whole[n]) for n in names)
    analysis = capture._analysis
    assert analysis.table_len("tcp_events") == arrow.num_rows
    assert analysis.table_rows("tcp_events", 10**9, 10**9 + 5).num_rows == 0
    assert analysis.table_rows("conversations", 0, 1).num_rows == 1
    with pytest.raises(KeyError):
        analysis.table_rows("no_such_table", 0, 1)
