"""The loss analysis streams (``nastriage.diagnosis.retrans``: two readings of the events
a range of rows at a time, nothing kept per event). It must say exactly what the analysis
over each connection's whole list said (``loss_oracle``): on every reference capture, with
ranges so short that runs go on from one to the next, from the engine and from a table,
with a clock step (a connection then held whole), and on random flags made to hit the
edges (equal times, a run's first at a retransmission's time, zero windows, capture
drops, several flags on one frame)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from helpers import Without, bench_capture, stepped_bench_capture
from loss_oracle import analyse_stream
from oracle import SHARED, readable_captures
from test_diagnosis_rules import MS, T0, FakeCapture, conversations, events, tcp_connections

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(str(p) for p in (ROOT / "examples").glob("*.pcap*"))
CAPTURES = [str(SHARED / n) for n in readable_captures()] if SHARED.exists() else []


def _plain(la: Any) -> dict[str, Any]:
    """A LossAnalysis as comparable values (its kept runs by their fields)."""
    out = dict(vars(la))
    for name in ("loss_runs", "reorder_runs"):
        out[name] = [tuple(getattr(r, a) for a in r.__slots__) for r in out[name]]
    return out


def _whole(ctx: Any) -> dict[tuple[int, str], dict[str, Any]]:
    """The analysis over each connection's whole list, as it chose connections."""
    from nastriage.diagnosis.context import reverse
    from nastriage.diagnosis.retrans import RESENT_KINDS

    out = {}
    for stream in ctx.events:
        info = ctx.streams.get(stream)
        flagged = ctx.events.kinds(stream)
        for d in ("c2s", "s2c"):
            if info is not None and info.payload_dir(d) == 0:
                continue
            if not any((d, k) in flagged for k in RESENT_KINDS) and not any(
                (reverse(d), k) in flagged for k in ("duplicate_ack", "ack_lost_segment")
            ):
                continue
            out[(stream, d)] = _plain(analyse_stream(ctx, stream, d))
    return out


def _streamed(capture: Any, rows: int | None = None) -> dict[tuple[int, str], dict[str, Any]]:
    from nastriage.diagnosis.context import Context
    from nastriage.diagnosis.retrans import analyse

    ctx = Context(capture)
    if rows is not None:
        ctx.event_rows = rows
    return {k: _plain(v) for k, v in analyse(ctx).items()}


def _check(capture: Any, rows: tuple[int, ...]) -> int:
    from nastriage.diagnosis.context import Context

    want = _whole(Context(capture))
    assert _streamed(capture) == want
    if want:
        for n in rows:
            assert _streamed(capture, n) == want, n
            assert _streamed(Without(capture, "tcp_events_by_stream"), n) == want, ("table", n)
    return len(want)


@pytest.mark.usefixtures("engine")
@pytest.mark.parametrize("path", CAPTURES + EXAMPLES, ids=lambda p: Path(p).name)
def test_streaming_equals_the_whole_lists(path: str) -> None:
    from nastriage.capture import Capture

    _check(Capture.analyze(path), (1, 7))


@pytest.mark.usefixtures("engine")
def test_streaming_on_a_lossy_benchmark_capture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thousands of runs and retransmissions, ranges cut anywhere among them, and the
    retransmissions' times and episodes written out in blocks of 100."""
    from nastriage.capture import Capture
    from nastriage.diagnosis import retrans

    capture = Capture.analyze(str(bench_capture(tmp_path, size="8M", seed=3)))
    assert _check(capture, (5, 64, 999)) > 2
    monkeypatch.setattr(retrans, "SPILL_BLOCK", 100)
    assert _check(capture, (999,)) > 2


@pytest.mark.usefixtures("engine")
def test_a_connection_out_of_time_order_is_held_whole(tmp_path: Path) -> None:
    """A clock step puts a lossy connection's flags out of time order: that connection
    is read sorted, whole, and the result is the same; the others still stream."""
    from nastriage.capture import Capture
    from nastriage.diagnosis.context import Context
    from nastriage.diagnosis.events import EventsByStream
    from nastriage.diagnosis.retrans import _analyse

    _, stepped = stepped_bench_capture(tmp_path)
    capture = Capture.analyze(str(stepped))
    ctx = Context(capture)
    assert any(not s.in_order for s in ctx.events._streams.values())
    held: list[int] = []
    real = EventsByStream.from_grouped

    def spy(chunks: Any, reread: Any = None, only: Any = None) -> EventsByStream:
        held.extend(only or ())
        return real(chunks, reread, only)

    EventsByStream.from_grouped = spy  # type: ignore[method-assign]
    try:
        _analyse(Context(capture))
    finally:
        EventsByStream.from_grouped = real  # type: ignore[method-assign]
    assert held and len(held) < len(ctx.events)
    assert _check(capture, (5, 64)) > 2


@pytest.mark.usefixtures("engine")
def test_the_engines_runs_per_label_are_the_runs_summed_up(tmp_path: Path) -> None:
    """The engine hands each range's runs over summed up per label, as
    ``events.code_runs`` sums up the runs themselves: ranges cut anywhere, with a clock
    step (runs out of order) and without."""
    from nastriage.capture import Capture
    from nastriage.diagnosis.events import Range, code_runs

    seen = 0
    for path in stepped_bench_capture(tmp_path):
        capture = Capture.analyze(str(path))
        for rows in (3, 64, 16384):
            for _labels, chunk in capture.tcp_events_by_stream(rows=rows, part="rows+runs"):
                for item in chunk.values():
                    if item[7] is None:
                        continue
                    r = Range(item)
                    assert len(item[7]) == 8
                    assert r.code_runs == code_runs(*r.run_cols[:4])
                    seen += len(r.code_runs)
    assert seen > 100


def _in_order_per_run(state: dict[str, Any], r: Any) -> bool:
    """``_Connection.still_in_order`` as it was, going through every run (the reference)."""
    if not (r.rows_in_order and r.runs_in_order):
        return False
    before = state["last_row"]
    for code, key, first, first_frame, _, _ in r.runs():
        at = state["runs_at"].get(code)
        if at is not None and (key < at[0] or (first, first_frame) < at[1:]):
            return False
        if at is not None and key == at[0]:
            continue
        if before is not None and first < before[0]:
            return False
        state["runs_at"][code] = (key, first, first_frame)
    if r.frames:
        if before is not None and (r.times[0], r.frames[0]) < before:
            return False
        state["last_row"] = (r.times[-1], r.frames[-1])
    return True


def _random_range(rng: random.Random, t: int, key: int) -> tuple[Any, int, int]:
    """A range of rows and runs near time ``t`` and acknowledged frame ``key``, mostly in
    order: runs go on from the ranges before, keys and times step back now and then."""
    from array import array

    from nastriage.diagnosis.events import Range, code_runs

    r = Range()
    if rng.random() < 0.3:
        t -= rng.randint(1, 4)  # (before the rows of the ranges before)
    codes = rng.sample(range(4), rng.randint(1, 3))
    runs: list[tuple[int, int, int, int]] = []
    for _ in range(rng.randint(0, 6)):
        code = rng.choice(codes)
        key += rng.choice((0, 1, 1, 2, 5, -1)) if rng.random() < 0.3 else rng.randint(1, 3)
        t += rng.choice((0, 1, 2, -1)) if rng.random() < 0.2 else rng.randint(1, 4)
        if any(c == code and k == key for c, k, _, _ in runs):
            continue  # (one run per label and acknowledged frame in a range)
        runs.append((code, key, t, t * 10 + rng.randint(0, 9)))
    for n in range(rng.randint(0, 3)):
        t += rng.choice((0, 1, 3)) if rng.random() < 0.9 else -2
        r.frames.append(t * 10 + n)
        r.times.append(t)
    firsts = [(f, ff) for _, _, f, ff in runs]
    r.runs_in_order = firsts == sorted(firsts)
    r.rows_in_order = list(zip(r.times, r.frames)) == sorted(zip(r.times, r.frames))
    for col, values in zip(r.run_cols, zip(*runs)):
        col.extend(values)
    for col in r.run_cols[4:]:
        col.extend(array("q", [0] * len(runs)))
    r.code_runs = code_runs(*r.run_cols[:4])
    return r, t, key


def test_order_is_checked_per_label_as_per_run() -> None:
    """Summed up per label, the check of a range's order says what the check of each run
    said, and keeps the same state, range after range until one is out of order."""
    from nastriage.diagnosis.retrans import _Connection

    verdicts = {True: 0, False: 0}
    for seed in range(3000):
        rng = random.Random(seed)
        c = _Connection(None, 0)  # type: ignore[arg-type]
        state: dict[str, Any] = {"last_row": None, "runs_at": {}}
        t, key = 100, 1000
        for _ in range(rng.randint(1, 8)):
            r, t, key = _random_range(rng, t, key)
            want = _in_order_per_run(state, r)
            assert c.still_in_order(r) == want, seed
            verdicts[want] += 1
            if not want:
                break
            assert (c.last_row, c.runs_at) == (state["last_row"], state["runs_at"]), seed
    assert min(verdicts.values()) > 500, verdicts


def test_time_order_is_a_stable_sort_by_time_then_frame() -> None:
    """The order a connection held whole is read in (the engine sorts the positions):
    that of sorting its rows by (time, frame), ties in table order."""
    from array import array

    from nastriage import _core
    from nastriage.diagnosis.events import time_order

    rng = random.Random(7)
    # Few distinct times and frames: many ties, negative times too.
    times = array("q", (rng.randrange(-3, 40) for _ in range(5000)))
    frames = array("q", (rng.randrange(0, 30) for _ in range(5000)))
    want = sorted(range(5000), key=lambda i: (times[i], frames[i]))
    assert list(time_order(times, frames)) == want
    assert list(time_order(array("q"), array("q"))) == []
    with pytest.raises(ValueError, match="one length"):
        _core.time_order(b"\0" * 8, b"")


# -- random flags ------------------------------------------------------------------------


def _random_flags(rng: random.Random, disorder: bool) -> list[tuple[int, int, str, str, str]]:
    """One connection's flags, data c2s: runs of duplicate ACKs (later and later ACKs),
    retransmissions of every kind (some with several flags on one frame, some with an
    rto), holes, capture drops, zero windows; times on a coarse grid so that many are
    equal."""
    out: list[tuple[int, int, str, str, str]] = []
    frame, t, acked = 1, T0, 0
    for _ in range(rng.randrange(1, 120)):
        frame += rng.randrange(1, 4)
        t += rng.choice((0, 0, 1, 2, 5, 40, 300)) * MS // 4
        r = rng.random()
        if r < 0.3:
            acked = frame if rng.random() < 0.5 else acked or frame
            for n in range(rng.randrange(1, 6)):
                out.append((frame, t, "s2c", "duplicate_ack", f"dup_ack={n + 1} of frame {acked}"))
                frame += 1
                t += rng.choice((0, 1, 3)) * MS // 4
        elif r < 0.6:
            kind = rng.choice(
                (
                    "retransmission",
                    "fast_retransmission",
                    "spurious_retransmission",
                    "out_of_order",
                )
            )
            rto = rng.choice(("", f"rto={rng.choice((0.05, 0.3, 1.5)):.6f}s since frame 1"))
            out.append((frame, t, "c2s", kind, rto))
            if rng.random() < 0.3:
                out.append((frame, t, "c2s", "fast_retransmission", ""))
        elif r < 0.75:
            out.append((frame, t, "c2s", "lost_segment", ""))
        elif r < 0.85:
            out.append(
                (frame, t, "s2c", "ack_lost_segment", f"unseen={rng.randrange(1, 9000)} bytes")
            )
        elif r < 0.9:
            out.append((frame, t, "s2c", "zero_window", ""))
            frame += 1
            t += rng.randrange(1, 2000) * MS // 4
            out.append((frame, t, "s2c", "window_update", ""))
        else:
            out.append((frame, t, "c2s", "window_update", ""))
    if disorder and len(out) > 2:
        i = rng.randrange(len(out))
        f, tm, *rest = out[i]
        out[i] = (f, tm - rng.randrange(1, 500) * MS, *rest)  # type: ignore[assignment]
        if rng.random() < 0.5:
            # An earlier ACK repeated after a later one (not what the engine writes).
            j = rng.randrange(len(out))
            f, tm, _d, _, _ = out[j]
            out[j] = (f, tm, "s2c", "duplicate_ack", "dup_ack=1 of frame 0")
    return out


def _fake(rng: random.Random, flags: list[tuple[int, int, str, str, str]]) -> Any:
    rtt = rng.choice((None, 0.2, 1.0, 40.0))
    tables = {
        "conversations": conversations(
            {"payload_bytes_c2s": 30_000_000, "end": T0 + 60_000 * MS, "frames_c2s": 5000}
        ),
        "tcp_events": events(flags),
    }
    if rtt is not None:
        tables["tcp_connections"] = tcp_connections(rtt_handshake_ms=rtt)
    return FakeCapture(tables)


@pytest.mark.parametrize("seed", range(300))
def test_streaming_equals_the_whole_lists_on_random_flags(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nastriage.diagnosis import retrans

    # Half of them with the retransmissions' times and the episodes written out every
    # two values (read back across blocks, the last episode's end still growing).
    monkeypatch.setattr(retrans, "SPILL_BLOCK", 2 if seed % 2 else retrans.SPILL_BLOCK)
    rng = random.Random(seed)
    flags = _random_flags(rng, disorder=seed % 5 == 4)
    capture = _fake(rng, flags)
    from nastriage.diagnosis.context import Context

    want = _whole(Context(capture))
    for rows in (1, 2, 3, 7, 16384):
        assert _streamed(capture, rows) == want, rows


def test_random_flags_reach_the_edges() -> None:
    """The random flags above do make what the streaming must get right: every kind of
    run, timeouts, capture drops, several ranges per run, connections held whole."""
    from nastriage.diagnosis.context import Context
    from nastriage.diagnosis.retrans import _Connection, analyse

    seen: dict[str, int] = {}
    held = 0
    for seed in range(300):
        rng = random.Random(seed)
        capture = _fake(rng, _random_flags(rng, disorder=seed % 5 == 4))
        ctx = Context(capture)
        ctx.event_rows = 3
        for la in analyse(ctx).values():
            for name in ("loss_run_count", "reorder_run_count", "timeout_count", "unseen_bytes"):
                seen[name] = seen.get(name, 0) + bool(getattr(la, name))
            seen["downstream"] = seen.get("downstream", 0) + la.downstream
            seen["upstream"] = seen.get("upstream", 0) + (not la.downstream)
            seen["in_episode"] = seen.get("in_episode", 0) + bool(la.episode_resent_frames)
        c = _Connection(ctx, 0)
        for _labels, chunk in ctx.event_chunks("rows+runs"):
            from nastriage.diagnosis.events import Range

            if 0 in chunk and c.in_order:
                c.in_order = c.still_in_order(Range(chunk[0]))
        held += not c.in_order
    assert all(
        seen.get(k, 0) >= 10
        for k in (
            "loss_run_count",
            "reorder_run_count",
            "timeout_count",
            "unseen_bytes",
            "downstream",
            "upstream",
            "in_episode",
        )
    ), seen
    assert held >= 20, held


def test_a_table_with_no_events() -> None:
    from nastriage.diagnosis.context import Context
    from nastriage.diagnosis.retrans import analyse

    empty = events([])
    capture = FakeCapture({"conversations": conversations({}), "tcp_events": empty})
    assert analyse(Context(capture)) == {}
    assert analyse(Context(FakeCapture({"conversations": conversations({})}))) == {}
    assert isinstance(empty, pa.Table)


@pytest.mark.usefixtures("engine")
def test_an_unknown_part_of_the_events_is_refused() -> None:
    from nastriage.capture import Capture
    from nastriage.diagnosis.events import table_chunks

    capture = Capture.analyze(EXAMPLES[0])
    with pytest.raises(ValueError, match="no part"):
        capture._analysis.tcp_events_by_stream(0, 10, [], "dup_acks")
    with pytest.raises(ValueError, match="no part"):
        next(table_chunks(capture.plain_table("tcp_events"), part="dup_acks"))


def test_without_a_temporary_file_the_columns_stay_in_memory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No temporary file to be had (a missing temporary directory): the loss analysis
    keeps its blocks in memory and says the same."""
    from nastriage.diagnosis import retrans
    from nastriage.diagnosis.context import Context

    monkeypatch.setattr(retrans, "SPILL_BLOCK", 2)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "missing"))
    for seed in range(40):
        rng = random.Random(seed)
        capture = _fake(rng, _random_flags(rng, disorder=False))
        assert _streamed(capture, 3) == _whole(Context(capture)), seed


@pytest.mark.usefixtures("engine")
def test_the_engines_reading_refuses_bad_columns() -> None:
    """``_core.LossReading`` (the per-event reading) says what is wrong with what it is
    given, rather than reading past a column or panicking: columns of unequal length, a
    column that is not whole values, a label code with no action, a second finish."""
    from array import array

    from nastriage import _core

    def q(*v: int) -> bytes:
        return array("q", v).tobytes()

    def h(*v: int) -> bytes:
        return array("H", v).tobytes()

    def rng(frames: bytes, times: bytes, codes: bytes, rto: bytes) -> tuple[bytes, ...]:
        return (frames, times, codes, rto, *[b""] * 6)

    nan = array("d", [float("nan")]).tobytes()
    acts = bytes([0, 1])
    r = _core.LossReading(1, 1, 1, 1.0, b"", b"", 8192)
    with pytest.raises(ValueError, match="one length"):
        r.first(rng(q(1, 2), q(1), h(1), nan), [None], acts)
    with pytest.raises(ValueError, match="one length"):
        r.first(rng(q(1), q(1), h(1), nan), [], acts)
    with pytest.raises(ValueError, match="one length"):
        r.first((q(1), q(1), h(1), nan, h(4), q(1), *[b""] * 4), [None], acts)
    with pytest.raises(ValueError, match="whole number"):
        r.first(rng(q(1)[:5], q(1), h(1), nan), [None], acts)
    with pytest.raises(ValueError, match="10 columns"):
        r.first(rng(q(1), q(1), h(1), nan)[:9], [None], acts)
    with pytest.raises(ValueError, match="label code 3"):
        r.first(rng(q(1), q(1), h(3), nan), [None], acts)
    with pytest.raises(ValueError, match="one length"):
        _core.LossReading(1, 1, 1, 1.0, q(1, 2), q(1), 8192)
    # A retransmission selects the direction; the reading finishes once.
    r.first(rng(q(7), q(100), h(1), nan), [None], acts)
    assert r.selected and r.decide()
    r.second(rng(q(7), q(100), h(1), nan), acts)
    found = r.finish()
    assert found["resent_count"] == 1 and found["resent_frames"] == [7]
    assert found["reordered_segments"] == 1 and found["needless_retransmissions"] == 1
    with pytest.raises(RuntimeError, match="finished"):
        r.finish()


class _Counting:
    """A capture whose engine regroupings of ``tcp_events`` (each range of rows) are
    counted."""

    def __init__(self, capture: Any) -> None:
        self._capture = capture
        self.ranges = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._capture, name)

    def tcp_events_by_stream(self, **kw: Any) -> Any:
        found = self._capture.tcp_events_by_stream(**kw)
        if found is None:
            return None

        def counted() -> Any:
            for chunk in found:
                self.ranges += 1
                yield chunk

        return counted()


@pytest.mark.usefixtures("engine")
def test_a_reading_of_the_events_is_kept_for_the_next_within_a_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loss analysis reads the events twice: within the bound the engine regroups
    each range once and the second reading takes the kept ranges; past it (judged from
    the table's length: here a bound of 0 bytes, or of fewer than the rows could take),
    or found past it on the way (the first ranges fit and the rest do not), every
    reading asks the engine again. The analysis is the same every way."""
    from nastriage.capture import Capture
    from nastriage.diagnosis import context
    from nastriage.diagnosis.context import Context
    from nastriage.diagnosis.retrans import analyse

    capture = Capture.analyze(str(bench_capture(tmp_path, size="8M", seed=3)))
    events = Context(capture).table("tcp_events")
    assert events is not None
    rows = events.num_rows

    def run(kept: int | None) -> tuple[dict[Any, Any], int]:
        counting = _Counting(capture)
        ctx = Context(counting)
        ctx.event_rows = 8
        if kept is not None:
            ctx.event_bytes_kept = kept
        return {k: _plain(v) for k, v in analyse(ctx).items()}, counting.ranges

    want, one_reading = run(None)
    assert len(want) > 2
    assert one_reading == -(-rows // 8) > 10
    for kept in (0, rows * context.EVENT_BYTES_MOST - 1):
        assert run(kept) == (want, 2 * one_reading), kept
    # Judged to fit, found not to on the way: dropped, and read again.
    monkeypatch.setattr(context, "EVENT_BYTES_MOST", 0)
    assert run(400) == (want, 2 * one_reading)
    monkeypatch.undo()
    # A second context reads through the engine again: the kept ranges are its own.
    counting = _Counting(capture)
    ctx = Context(counting)
    ctx.event_rows = 8
    analyse(ctx)
    assert counting.ranges == one_reading
    assert list(ctx.event_chunks("rows+runs")) == list(ctx.event_chunks("rows+runs"))
    assert counting.ranges == one_reading
