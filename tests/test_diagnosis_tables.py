"""The diagnosis's compact readers of the two tables that grow with the capture
(``tcp_events`` a connection at a time, ``tcp_series`` by connection and direction) give
what the rules derived from the whole tables' rows, on every reference capture, the
examples and a generated benchmark capture (thousands of events and bins)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

from helpers import bench_capture, stepped_bench_capture
from oracle import SHARED, readable_captures

pytestmark = pytest.mark.usefixtures("engine")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(str(p) for p in (ROOT / "examples").glob("*.pcap*"))
CAPTURES = [str(SHARED / n) for n in readable_captures()] if SHARED.exists() else []


def _events_from_rows(capture: Any) -> dict[int, list[tuple[Any, ...]]]:
    from nastriage.capture import read_columns

    t = capture.plain_table("tcp_events")
    c = read_columns(t, ["frame", "time", "stream", "direction", "kind", "detail"])
    out: dict[int, list[tuple[Any, ...]]] = {}
    for f, tm, s, d, k, det in zip(
        c["frame"], c["time"], c["stream"], c["direction"], c["kind"], c["detail"]
    ):
        out.setdefault(s, []).append((f, tm or 0, d, k, det or ""))
    for evs in out.values():
        evs.sort(key=lambda e: (e[1], e[0]))
    return out


def _runs_from_rows(
    evs: list[tuple[Any, ...]], labels: list[tuple[str, str]]
) -> list[tuple[int, ...]]:
    """A connection's duplicate-ACK runs made from its rows (in time order) one by one:
    (label code, acknowledged frame, first time, first frame, last time, count)."""
    import re

    runs: dict[tuple[int, int], list[int]] = {}
    for frame, time, direction, kind, detail in evs:
        if kind != "duplicate_ack":
            continue
        m = re.search(r"dup_ack=(\d+) of frame (\d+)", detail)
        key = (labels.index((direction, kind)), int(m.group(2)) if m else frame)
        run = runs.setdefault(key, [*key, time, frame, time, 0])
        run[4] = time
        run[5] += 1
    return [tuple(r) for r in runs.values()]


def _series_from_rows(capture: Any) -> tuple[dict[tuple[int, str], float], Any]:
    """The receive-window medians and the rows, as the rules read them from the rows."""
    from nastriage.capture import read_columns

    t = capture.plain_table("tcp_series")
    c = read_columns(
        t, ["stream", "direction", "interval_ns", "bytes", "throughput_bps", "receive_window"]
    )
    acc: dict[tuple[int, str], list[float]] = {}
    for s, d, b, w in zip(c["stream"], c["direction"], c["bytes"], c["receive_window"]):
        if b and w is not None:
            acc.setdefault((int(s), str(d)), []).append(float(w))
    return {k: statistics.median(v) for k, v in acc.items()}, c


def _peak_rate_from_rows(c: Any, stream: int, d: str, rtt_ms: float | None) -> float | None:
    rates = sorted(
        float(r)
        for s, dd, iv, b, r in zip(
            c["stream"], c["direction"], c["interval_ns"], c["bytes"], c["throughput_bps"]
        )
        if s == stream
        and dd == d
        and b
        and r is not None
        and (rtt_ms is None or (iv or 0) >= rtt_ms * 1e6)
    )
    if len(rates) < 5:
        return None
    return rates[int(0.9 * (len(rates) - 1))]


def _nan_none(x: float) -> float | None:
    return None if x != x else x


def _plain(rows: Any) -> list[tuple[Any, ...]]:
    """Rows of ``EventsByStream.ordered`` with NaN as None (NaN equals nothing)."""
    return [(*r[:-1], _nan_none(r[-1])) for r in rows]


class _TablesOnly:
    """A capture without the engine's own groupings: the diagnosis reads its tables."""

    def __init__(self, capture: Any) -> None:
        self._capture = capture

    def __getattr__(self, name: str) -> Any:
        if name in ("tcp_series_by_direction", "tcp_series_window_medians", "tcp_events_by_stream"):
            raise AttributeError(name)
        return getattr(self._capture, name)


def _bins(b: Any) -> tuple[list[Any], ...]:
    """A direction's series bins as lists (NaN as None: NaN equals nothing)."""
    return list(b.interval_ns), [_nan_none(x) for x in b.rate], [_nan_none(x) for x in b.window]


def _check(path: str) -> int:
    from nastriage.capture import Capture
    from nastriage.diagnosis.context import Context, SeriesBins, _bins_of
    from nastriage.diagnosis.events import EventsByStream, rto_seconds
    from nastriage.diagnosis.rules.loss import _peak_rate_bps
    from nastriage.diagnosis.rules.window import _series_window

    capture = Capture.analyze(path)
    ctx = Context(capture)
    want = _events_from_rows(capture)
    assert sorted(ctx.events) == sorted(want)
    assert ctx.events.count() == sum(len(v) for v in want.values())
    labels = ctx.events.labels
    for stream, evs in want.items():
        # The full list reads the duplicate ACKs again from the engine.
        assert [tuple(e) for e in ctx.events[stream]] == evs, stream
        assert ctx.events.get(stream) == ctx.events[stream]
        # The plain rows the loss analysis walks: the same events other than duplicate
        # ACKs, in the same order.
        # (A retransmission's text is not kept there, only the number the loss analysis
        # reads of it.)
        others = [e for e in evs if e[3] != "duplicate_ack"]
        rows = list(ctx.events.ordered(stream))
        assert [(f, t, *labels[c], d) for f, t, c, d, _ in rows] == [
            (*e[:4], None if e[4].startswith("rto=") else e[4]) for e in others
        ]
        assert [_nan_none(r) for *_, r in rows] == [_nan_none(rto_seconds(e[4])) for e in others]
        assert [tuple(e) for e in ctx.events.without_dup_acks(stream)] == others
        # The duplicate ACKs as runs: by label and acknowledged frame, as the loss
        # analysis grouped them one by one before.
        assert list(ctx.events.dup_runs(stream)) == _runs_from_rows(evs, labels)
        assert ctx.events.kinds(stream) == {(e[2], e[3]) for e in evs}
    # The live analysis regroups the events in the engine; the Python reader of the table
    # (for tables read back from a file) keeps exactly the same columns and runs.
    # (Also when the engine hands them over a few rows at a time.)
    from_table = EventsByStream(capture.plain_table("tcp_events"))
    grouped = capture.tcp_events_by_stream(rows=7, part="rows+runs")
    assert grouped is not None
    in_pieces = EventsByStream.from_grouped(
        grouped, reread=lambda: capture.tcp_events_by_stream(part="all")
    )
    for other in (from_table, in_pieces):
        assert other.labels == labels and list(other) == list(ctx.events)
        assert other.count() == ctx.events.count()
        for stream in want:
            assert ctx.events._streams[stream].state() == other._streams[stream].state()
            assert other[stream] == ctx.events[stream]
    windows, rows = _series_from_rows(capture)
    # The engine's medians (the live analysis) and those of the table's rows.
    assert _series_window(ctx) == windows
    tables_only = Context(_TablesOnly(capture))
    assert _series_window(tables_only) == windows
    # The engine's grouping of the series gives what grouping the table's rows gives
    # (the same bins, in the same order), whole and one connection at a time.
    from_table = tables_only.series
    for k, v in from_table.items():
        one = Context(capture).series_bins(*k)
        assert one is not None and _bins(one) == _bins(v), k
        assert _bins(tables_only.series_bins(*k) or SeriesBins()) == _bins(v), k
    assert Context(capture).series_bins(10**6, "c2s") is None
    whole = capture.tcp_series_by_direction()
    assert whole is not None
    assert [((s, d), _bins(_bins_of(group))) for s, d, *group in whole] == [
        (k, _bins(v)) for k, v in from_table.items()
    ]
    keys = {(int(s), str(d)) for s, d in zip(rows["stream"], rows["direction"])}
    for stream, d in keys:
        for rtt in (None, 0.0, 0.5, 5.0, 50.0):
            assert _peak_rate_bps(ctx, stream, d, rtt) == _peak_rate_from_rows(
                rows, stream, d, rtt
            ), (stream, d, rtt)
    return ctx.events.count()


@pytest.mark.parametrize("path", CAPTURES + EXAMPLES, ids=lambda p: Path(p).name)
def test_compact_readers_equal_the_rows(path: str) -> None:
    _check(path)


def test_compact_readers_on_a_benchmark_capture(tmp_path: Path) -> None:
    # (Seed 3 at 60 MB: two thousand events, most of them duplicate ACKs.)
    assert _check(str(bench_capture(tmp_path, size="60M", seed=3))) > 1000


def test_no_events() -> None:
    from nastriage.diagnosis.events import EventsByStream

    empty = EventsByStream(None)
    assert len(empty) == 0 and empty.get(3) is None and empty.count() == 0


def _events_of(rows: list[tuple[Any, ...]]) -> Any:
    """The events of a hand-made ``tcp_events`` table with these rows."""
    import pyarrow as pa

    from nastriage.diagnosis.events import EventsByStream

    names = ["frame", "time", "stream", "direction", "kind", "detail"]
    return EventsByStream(pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)}))


def test_events_out_of_time_order_come_sorted() -> None:
    """A connection whose flags are not in time order in the table (a clock step) is walked
    in time order, frames breaking ties; a duplicate ACK's text that is not the engine's
    is kept as it is."""
    rows = [
        (7, 300, 1, "c2s", "retransmission", "rto=0.200000s since frame 3"),
        (8, 100, 1, "s2c", "duplicate_ack", "dup_ack=1 of frame 5"),
        (9, 100, 1, "s2c", "duplicate_ack", "dup_ack=02 of frame 5"),
        (4, 200, 2, "c2s", "lost_segment", "missing=10 bytes"),
    ]
    events = _events_of(rows)
    assert [(f, t, d, rto) for f, t, _, d, rto in events.ordered(1)] == [(7, 300, None, 0.2)]
    # Both duplicate ACKs repeat frame 5 (whatever the text's form): one run.
    dup = events.labels.index(("s2c", "duplicate_ack"))
    assert list(events.dup_runs(1)) == [(dup, 5, 100, 8, 100, 2)]
    assert [tuple(e) for e in events[1]] == [
        rows[1][:2] + rows[1][3:],
        rows[2][:2] + rows[2][3:],
        rows[0][:2] + rows[0][3:],
    ]
    assert events.kinds(2) == {("c2s", "lost_segment")} and events.count() == 4
    assert events.kinds(1) == {
        ("c2s", "retransmission"),
        ("s2c", "duplicate_ack"),
    }


def test_duplicate_ack_runs_in_any_order() -> None:
    """A run's first duplicate ACK is the first in (time, frame) order and its last time
    the latest, whatever the table's order (a clock step); a duplicate ACK whose text does
    not name the ACK it repeats is a run of its own frame; runs come by their first."""
    rows = [
        (20, 500, 1, "s2c", "duplicate_ack", "dup_ack=3 of frame 10"),
        (12, 200, 1, "s2c", "duplicate_ack", "dup_ack=1 of frame 10"),
        (13, 200, 1, "s2c", "duplicate_ack", "dup_ack=2 of frame 10"),
        (30, 100, 1, "s2c", "duplicate_ack", "dup_ack=1 of frame 25"),
        (31, 150, 1, "s2c", "duplicate_ack", ""),
        (32, 150, 1, "c2s", "duplicate_ack", "dup_ack=1 of frame 25"),
        # (A number no frame has, from a table not written by the engine: its own run.)
        (33, 900, 1, "c2s", "duplicate_ack", "dup_ack=1 of frame 99999999999999999999999"),
    ]
    events = _events_of(rows)
    s2c = events.labels.index(("s2c", "duplicate_ack"))
    c2s = events.labels.index(("c2s", "duplicate_ack"))
    assert list(events.dup_runs(1)) == [
        (s2c, 25, 100, 30, 100, 1),
        (s2c, 31, 150, 31, 150, 1),
        (c2s, 25, 150, 32, 150, 1),
        (s2c, 10, 200, 12, 500, 3),
        (c2s, 33, 900, 33, 900, 1),
    ]
    assert list(events.ordered(1)) == [] and events.count() == 7
    assert [e.frame for e in events[1]] == [30, 31, 32, 12, 13, 20, 33]


def test_engine_grouping_of_events_out_of_time_order(tmp_path: Path) -> None:
    """A clock step puts a connection's flags out of time order in the table: the
    engine's regrouping, handed over a few rows at a time, says so as the Python reader
    does, and both walk the events in the same (time, frame) order."""
    from nastriage.capture import Capture
    from nastriage.diagnosis.events import EventsByStream

    _, stepped = stepped_bench_capture(tmp_path)
    capture = Capture.analyze(str(stepped))
    from_table = EventsByStream(capture.plain_table("tcp_events"))
    assert any(not c.in_order for c in from_table._streams.values())
    for rows in (1, 5, 64, 65536):
        grouped = capture.tcp_events_by_stream(rows=rows, part="rows+runs")
        assert grouped is not None
        pieces = EventsByStream.from_grouped(
            grouped, reread=lambda: capture.tcp_events_by_stream(part="all")
        )
        assert pieces.labels == from_table.labels and list(pieces) == list(from_table)
        for stream, a in from_table._streams.items():
            b = pieces._streams[stream]
            assert a.state() == b.state()
            assert _plain(pieces.ordered(stream)) == _plain(from_table.ordered(stream))
            assert list(pieces.dup_runs(stream)) == list(from_table.dup_runs(stream))


def test_grouped_runs_of_a_connection_in_several_parts_merge() -> None:
    """Runs handed over in more than one range of rows for a connection (a run going on
    past a range's end, or a table whose runs are not in one piece each) merge by label
    and acknowledged frame: earliest first, latest last, counts added, order kept."""
    from array import array

    from nastriage.diagnosis.events import EventsByStream, code_runs

    def runs(rows: list[tuple[int, ...]], in_order: bool) -> tuple[Any, ...]:
        cols = list(zip(*rows))
        data = [array(t, c).tobytes() for t, c in zip("Hqqqqq", cols)]
        return (*data, in_order, code_runs(*cols[:4]))

    def part(rows: list[tuple[int, ...]], in_order: bool = True) -> dict[int, Any]:
        return {1: (b"", b"", b"", [], b"", b"", True, runs(rows, in_order), b"")}

    labels = [("s2c", "duplicate_ack")]
    chunks = [
        (labels, part([(0, 10, 100, 11, 150, 3), (0, 20, 300, 21, 300, 1)])),
        (labels, part([(0, 20, 250, 19, 400, 2), (0, 30, 500, 31, 500, 1)])),
    ]
    events = EventsByStream.from_grouped(chunks)
    assert list(events.dup_runs(1)) == [
        (0, 10, 100, 11, 150, 3),
        (0, 20, 250, 19, 400, 3),
        (0, 30, 500, 31, 500, 1),
    ]
    assert events.count() == 7 and events.kinds(1) == {("s2c", "duplicate_ack")}
    # Out of order as handed over: walked in order of the first all the same.
    late = [(labels, part([(0, 40, 900, 41, 900, 1), (0, 50, 600, 51, 700, 2)], False))]
    assert [r[1] for r in EventsByStream.from_grouped(late).dup_runs(1)] == [50, 40]
