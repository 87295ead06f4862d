"""The capture's TCP events (the ``tcp_events`` table) regrouped by connection.

A lossy or long capture flags hundreds of thousands of segments (most of them duplicate
ACKs), and a single file copy puts them all on one connection. As one tuple each, with
their integers and strings, they took about 230 bytes an event for the whole diagnosis,
more than every other table together, and memory grew with the capture.

The table is therefore read a range of rows at a time, regrouped by connection
(:data:`Chunk`): by the engine for a live analysis (``Capture.tcp_events_by_stream``), or
by :func:`table_chunks` for a table read back from elsewhere. Duplicate ACKs come as runs
(per label and acknowledged frame: first and last time, first frame, how many), all the
loss analysis reads of them (``diagnosis/retrans.py``, which reads the ranges as they
come and holds none of it).

:class:`EventsByStream` holds connections whole, as columns (integer arrays, a small code
per event; a retransmission's "rto=… since frame …" text only as its number, in
:attr:`_Stream.rto`), for what needs a connection's whole list: a rule or the API asking
for it (``events[stream]`` reads the duplicate ACKs and the texts not kept again from
where they came from), and a connection the loss analysis must read sorted (its events
go back in time). :meth:`EventsByStream.ordered` and :meth:`EventsByStream.dup_runs` walk
them without making an object per event.
"""

from __future__ import annotations

import math
import operator
import re
from array import array
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from nastriage import _core
from nastriage.capture import column_chunks

__all__ = ["DupRunRow", "Event", "EventsByStream", "Range"]


class Event(NamedTuple):
    """One ``tcp_events`` row (a tuple: a capture with heavy loss has millions, and a
    frozen dataclass takes three times as long to make)."""

    frame: int
    time: int
    direction: str  # "c2s" / "s2c"
    kind: str
    detail: str


#: Events in time order, frames breaking ties.
BY_TIME = operator.itemgetter(1, 0)


def time_order(times: array[int], frames: array[int]) -> array[int]:
    """The positions of rows in (time, frame) order, ties kept in table order (a stable
    sort, as ``sorted(rows, key=BY_TIME)``), 8 bytes a row. Sorting the rows themselves
    as tuples took about 170 bytes a row: most of what a connection whose events go back
    in time (a clock step) cost the loss analysis, which holds it whole."""
    out = array("q")
    out.frombytes(_core.time_order(times.tobytes(), frames.tobytes()))
    return out


def permuted(a: array[Any], order: array[int]) -> array[Any]:
    """``a``'s values at the positions ``order`` lists."""
    return array(a.typecode, (a[i] for i in order))


_COLUMNS = ("frame", "time", "stream", "direction", "kind", "detail")

#: A duplicate ACK's detail, ``dup_ack=N of frame F``: F is the ACK it repeats (the key
#: of its run). Text not of this form (a table not written by the engine) puts the
#: duplicate ACK in a run of its own frame.
_DUP_ACK = re.compile(r"dup_ack=(\d+) of frame (\d+)")

#: A retransmission's time since the oldest unacknowledged segment, in its detail text.
_RTO = re.compile(r"rto=([0-9.]+)s")

#: Shorter detail texts (flag names, byte counts) repeat, and are shared.
SHARED_TEXT = 24

#: One event other than a duplicate ACK as :meth:`EventsByStream.ordered` gives it:
#: frame, time, label code, detail (None for a retransmission's "rto=…", not kept), and
#: the seconds after ``rto=`` in the detail (NaN when there are none).
Row = tuple[int, int, int, "str | None", float]


def rto_seconds(detail: str) -> float:
    """The seconds after ``rto=`` in a detail text (a retransmission's time since the
    oldest unacknowledged segment), or NaN."""
    m = _RTO.search(detail)
    return float(m.group(1)) if m else math.nan


#: One duplicate-ACK run as :meth:`EventsByStream.dup_runs` gives it: label code,
#: acknowledged frame, time and frame of the first duplicate ACK, time of the last, count.
DupRunRow = tuple[int, int, int, int, int, int]

#: A range of the table's rows regrouped by connection: the labels numbered so far, and
#: per stream ``(frames, times, codes, details, acked, dup_numbers, in_order, runs,
#: rto)`` as the engine hands them over (``Analysis.tcp_events_by_stream``: machine
#: integers and floats as bytes), or :func:`table_chunks` from a table.
Chunk = tuple[list[tuple[str, str]], dict[int, Any]]

#: Reads the events again with every duplicate ACK (see ``from_grouped``).
Reread = Callable[[], "Iterable[Chunk] | None"]

#: The parts of the events a reading hands over (``Analysis.tcp_events_by_stream``):
#: "all" of them in the columns (a connection's full list), or "rows+runs" (all but the
#: duplicate ACKs in the columns, and those as runs: what the loss analysis reads).
PARTS = ("all", "rows+runs")


def dup_ack_key(detail: str, frame: int) -> int:
    """The run a duplicate ACK belongs to: the frame of the ACK it repeats (its own for
    a text that names none, or a number no frame has)."""
    m = _DUP_ACK.search(detail)
    key = int(m.group(2)) if m else frame
    return key if key < 1 << 48 else frame


#: A range's duplicate-ACK runs of one label, as :func:`code_runs` sums them up: the label
#: code; the acknowledged frame, first time and first frame of its first run; the first
#: time of its second run (None with one run); the acknowledged frame, first time and first
#: frame of its last run; and whether the acknowledged frames rise from run to run.
CodeRuns = tuple[int, int, int, int, "int | None", int, int, int, bool]


def code_runs(
    codes: Iterable[int], keys: Iterable[int], first: Iterable[int], first_frame: Iterable[int]
) -> list[CodeRuns]:
    """A range's runs (in the order they come) summed up per label, in order of each
    label's first run: what the loss analysis checks of a range's order
    (``_Connection.still_in_order``) without going through every run. Handed over with
    the runs, by the engine (``Runs::per_code``) and by :func:`table_chunks` alike."""
    out: dict[int, list[Any]] = {}
    for code, key, time, frame in zip(codes, keys, first, first_frame):
        s = out.get(code)
        if s is None:
            out[code] = [code, key, time, frame, None, key, time, frame, True]
            continue
        if s[4] is None:
            s[4] = time
        s[8] = s[8] and key > s[5]
        s[5], s[6], s[7] = key, time, frame
    return [tuple(s) for s in out.values()]


class Range:
    """One connection's events in one range of rows (a :data:`Chunk`'s item), decoded:
    those other than duplicate ACKs as columns (see :meth:`EventsByStream.ordered`) and,
    if the range has them, its duplicate-ACK runs (see :meth:`EventsByStream.dup_runs`),
    with whether each came in order, and summed up per label (:func:`code_runs`)."""

    __slots__ = (
        "code_runs",
        "codes",
        "details",
        "frames",
        "has_runs",
        "rows_in_order",
        "rto",
        "run_cols",
        "runs_in_order",
        "times",
    )

    def __init__(self, item: tuple[Any, ...] | None = None) -> None:
        self.frames, self.times, self.codes, self.rto = (array(t) for t in "qqHd")
        self.details: list[str | None] = []
        #: label codes, acknowledged frames, first times, first frames, last times, counts
        self.run_cols = [array(t) for t in "Hqqqqq"]
        self.rows_in_order = self.runs_in_order = True
        self.has_runs = False
        self.code_runs: list[CodeRuns] = []
        if item is None:
            return
        self.frames.frombytes(item[0])
        self.times.frombytes(item[1])
        self.codes.frombytes(item[2])
        self.details = item[3]
        self.rows_in_order = bool(item[6])
        runs = item[7]
        if runs is not None:
            self.has_runs = True
            for a, data in zip(self.run_cols, runs[:6]):
                a.frombytes(data)
            self.runs_in_order = bool(runs[6])
            self.code_runs = runs[7]
        self.rto.frombytes(item[8])

    def rows(self) -> Iterator[Row]:
        return zip(self.frames, self.times, self.codes, self.details, self.rto)

    def runs(self) -> Iterator[DupRunRow]:
        return zip(*self.run_cols)


class _Runs:
    """Duplicate-ACK runs (label code and acknowledged frame: time and frame of the
    first, time of the last, how many), in order of their first as they came."""

    __slots__ = ("codes", "count", "first", "first_frame", "in_order", "index", "keys", "last")

    def __init__(self) -> None:
        # By label code and acknowledged frame, as one number (a tuple per run took three
        # times the memory), while they are gathered; made only if runs are merged.
        self.index: dict[int, int] | None = {}
        self.codes = array("H")
        self.keys = array("q")
        self.first = array("q")
        self.first_frame = array("q")
        self.last = array("q")
        self.count = array("q")
        #: In order of their first duplicate ACK's (time, frame).
        self.in_order = True

    def take(self, r: Range) -> None:
        """A range's runs (runs of a label going on from the ranges before join theirs)."""
        if not self.codes:
            # The first for this connection: taken as they come.
            self.codes, self.keys, self.first, self.first_frame, self.last, self.count = r.run_cols
            self.in_order = r.runs_in_order
            self.index = None
            return
        for run in r.runs():
            self.add(*run)

    def add(self, code: int, key: int, first: int, first_frame: int, last: int, count: int) -> None:
        index = self.index
        if index is None:
            index = self.index = {
                k << 16 | c: i for i, (c, k) in enumerate(zip(self.codes, self.keys))
            }
        # (One number per (code, key), codes being below 2**16.)
        i = index.get(key << 16 | code)
        if i is None:
            n = len(self.codes)
            if n and (first, first_frame) < (self.first[n - 1], self.first_frame[n - 1]):
                self.in_order = False
            index[key << 16 | code] = n
            self.codes.append(code)
            self.keys.append(key)
            self.first.append(first)
            self.first_frame.append(first_frame)
            self.last.append(last)
            self.count.append(count)
            return
        # The first and the last in (time, frame) order, whatever the rows' order.
        if (first, first_frame) < (self.first[i], self.first_frame[i]):
            self.first[i], self.first_frame[i] = first, first_frame
            self.in_order = False
        if last > self.last[i]:
            self.last[i] = last
        self.count[i] += count

    def rows(self) -> Iterator[DupRunRow]:
        """In order of their first (time, frame)."""
        return zip(*self.columns())

    def columns(self) -> tuple[array[int], ...]:
        """Codes, keys, first times, first frames, last times and counts, in order of
        their first (time, frame)."""
        columns = (self.codes, self.keys, self.first, self.first_frame, self.last, self.count)
        # Gathered in that order unless the table's times go back (a clock step).
        if self.in_order:
            return columns
        order = time_order(self.first, self.first_frame)
        return tuple(permuted(a, order) for a in columns)

    def item(self) -> tuple[Any, ...]:
        """As the engine hands them over (see :meth:`take`)."""
        columns = (self.codes, self.keys, self.first, self.first_frame, self.last, self.count)
        summary = code_runs(self.codes, self.keys, self.first, self.first_frame)
        return (*(a.tobytes() for a in columns), self.in_order, summary)

    def state(self) -> tuple[Any, ...]:
        """The runs (not their index, nor whether they came in order, which depends on
        how the rows came, in one piece or several, not on what they say)."""
        return (self.codes, self.keys, self.first, self.first_frame, self.last, self.count)


class _Stream:
    """One connection's events: those other than duplicate ACKs in table order, and its
    duplicate-ACK runs."""

    __slots__ = ("codes", "details", "frames", "in_order", "rto", "runs", "times")

    def __init__(self) -> None:
        self.frames = array("q")
        self.times = array("q")
        self.codes = array("H")  # index into EventsByStream.labels
        self.details: list[str | None] = []
        #: The seconds after ``rto=`` in each detail (see :func:`rto_seconds`).
        self.rto = array("d")
        #: The table's order is already (time, frame) order.
        self.in_order = True
        self.runs = _Runs()

    def seal(self) -> None:
        """No more events: the runs' index goes (a lossy copy has tens of thousands)."""
        self.runs.index = None

    def state(self) -> tuple[Any, ...]:
        """Everything held (for comparing two readers; NaN as None, as NaN equals
        nothing)."""
        return (
            self.frames,
            self.times,
            self.codes,
            self.details,
            [None if math.isnan(v) else v for v in self.rto],
            self.in_order,
            self.runs.state(),
        )


class EventsByStream(Mapping[int, list[Event]]):
    """stream -> that connection's events in time order (frames breaking ties). Each
    lookup makes the list anew (reading the duplicate ACKs again); :meth:`ordered` and
    :meth:`dup_runs` walk the events without making it."""

    def __init__(self, table: Any | None) -> None:
        self._streams: dict[int, _Stream] = {}
        #: (direction, kind) pairs, numbered by first appearance.
        self.labels: list[tuple[str, str]] = []
        self._reread: Reread | None = None
        if table is not None:
            self._fill(table_chunks(table, part="rows+runs"))
            self._reread = lambda: table_chunks(table, part="all")

    @classmethod
    def from_grouped(
        cls,
        chunks: Iterable[Chunk],
        reread: Reread | None = None,
        only: Container[int] | None = None,
    ) -> EventsByStream:
        """The same, from a regrouping of the table a range of rows at a time
        (:func:`table_chunks`, or the engine's own: ``Capture.tcp_events_by_stream
        (part="rows+runs")``): columns as bytes, duplicate ACKs as runs.
        ``reread()`` gives the events again with every duplicate ACK (``part="all"``),
        for a connection's full list; ``only``: the connections to keep (all by
        default)."""
        out = cls(None)
        out._reread = reread
        out._fill(chunks, only)
        return out

    def _fill(self, chunks: Iterable[Chunk], only: Container[int] | None = None) -> None:
        streams = self._streams
        for labels, chunk in chunks:
            self.labels = [(str(d), str(k)) for d, k in labels]
            for stream, item in chunk.items():
                if only is not None and stream not in only:
                    continue
                r = Range(item)
                s = streams.get(stream)
                if s is None:
                    s = streams[stream] = _Stream()
                n = len(s.frames)
                s.frames.extend(r.frames)
                s.times.extend(r.times)
                s.codes.extend(r.codes)
                s.rto.extend(r.rto)
                s.details.extend(r.details)
                if s.in_order:
                    # In order within these rows, and from the rows before to them.
                    s.in_order = r.rows_in_order and (
                        n == 0
                        or n == len(s.frames)
                        or (s.times[n], s.frames[n]) >= (s.times[n - 1], s.frames[n - 1])
                    )
                if r.has_runs:
                    s.runs.take(r)
        for s in streams.values():
            s.seal()

    def ordered(self, stream: int) -> Iterator[Row]:
        """The connection's events other than duplicate ACKs, in time order (frames
        breaking ties), as plain rows (see :data:`Row`; ``labels[code]`` is the event's
        direction and kind)."""
        s = self._streams.get(stream)
        if s is None:
            return iter(())
        if s.in_order:
            return zip(s.frames, s.times, s.codes, s.details, s.rto)
        order = time_order(s.times, s.frames)
        details = s.details
        return zip(
            *(permuted(a, order) for a in (s.frames, s.times, s.codes)),
            (details[i] for i in order),
            permuted(s.rto, order),
        )

    def dup_runs(self, stream: int) -> Iterator[DupRunRow]:
        """The connection's duplicate-ACK runs (see :data:`DupRunRow`), by the time and
        frame of their first duplicate ACK."""
        s = self._streams.get(stream)
        if s is None:
            return iter(())
        return s.runs.rows()

    def whole(self, stream: int) -> Range:
        """The connection's events as one range, in order (:meth:`ordered`,
        :meth:`dup_runs`)."""
        out = Range()
        out.has_runs = True
        s = self._streams.get(stream)
        if s is None:
            return out
        order = None if s.in_order else time_order(s.times, s.frames)
        targets: tuple[array[Any], ...] = (out.frames, out.times, out.codes, out.rto)
        sources: tuple[array[Any], ...] = (s.frames, s.times, s.codes, s.rto)
        for a, column in zip(targets, sources):
            a.extend(column if order is None else permuted(column, order))
        out.details = list(s.details) if order is None else [s.details[i] for i in order]
        for a, column in zip(out.run_cols, s.runs.columns()):
            a.extend(column)
        return out

    def kinds(self, stream: int) -> set[tuple[str, str]]:
        """The (direction, kind) pairs the connection has events of."""
        s = self._streams.get(stream)
        if s is None:
            return set()
        return {self.labels[c] for c in {*s.codes, *s.runs.codes}}

    def without_dup_acks(self, stream: int) -> list[Event]:
        """The connection's events other than duplicate ACKs, in time order (the texts
        not kept read again from where they came from)."""
        return self._events(stream, with_dup_acks=False)

    def __getitem__(self, stream: int) -> list[Event]:
        if stream not in self._streams:
            raise KeyError(stream)
        return self._events(stream, with_dup_acks=True)

    def _events(self, stream: int, with_dup_acks: bool) -> list[Event]:
        labels = self.labels
        s = self._streams.get(stream)
        if s is None:
            return []
        details: Iterable[str | None] = s.details
        dup_acks: list[Event] = []
        texts_missing = None in s.details
        if texts_missing or (with_dup_acks and s.runs.codes):
            texts, dup_acks = self._read_again(stream)
            if texts_missing:
                details = texts
        rows = zip(s.frames, s.times, s.codes, details)
        out = [
            Event(frame, time, *labels[code], detail or "")
            for frame, time, code, detail in (rows if s.in_order else sorted(rows, key=BY_TIME))
        ]
        if with_dup_acks and dup_acks:
            out.extend(dup_acks)
            out.sort(key=BY_TIME)
        return out

    def _read_again(self, stream: int) -> tuple[list[str], list[Event]]:
        """The connection's events read again from their source: the detail texts of
        those other than duplicate ACKs, in table order, and the duplicate ACKs one by
        one."""
        texts: list[str] = []
        dup_acks: list[Event] = []
        chunks = self._reread() if self._reread is not None else None
        if chunks is None:
            raise LookupError("the events of this connection cannot be read again")
        for labels, chunk in chunks:
            item = chunk.get(stream)
            if item is None:
                continue
            frames, times, codes, acked, dups = (array(t) for t in "qqHqq")
            for a, data in zip((frames, times, codes, acked, dups), (*item[:3], *item[4:6])):
                a.frombytes(data)
            for frame, time, code, detail, ack, num in zip(
                frames, times, codes, item[3], acked, dups
            ):
                direction, kind = labels[code]
                if kind != "duplicate_ack":
                    texts.append(detail or "")
                elif detail is None:
                    # (Its text's numbers are in columns.)
                    dup_acks.append(
                        Event(frame, time, direction, kind, f"dup_ack={num} of frame {ack}")
                    )
                else:
                    dup_acks.append(Event(frame, time, direction, kind, detail))
        return texts, dup_acks

    def __iter__(self) -> Iterator[int]:
        return iter(self._streams)

    def __len__(self) -> int:
        return len(self._streams)

    def count(self) -> int:
        """Events over every connection."""
        return sum(len(s.frames) + sum(s.runs.count) for s in self._streams.values())


class _Group:
    """One connection's events in one range of rows, as the engine groups them."""

    __slots__ = (
        "acked",
        "codes",
        "details",
        "dups",
        "frames",
        "in_order",
        "rto",
        "runs",
        "times",
        "with_runs",
    )

    def __init__(self, runs: bool) -> None:
        self.frames = array("q")
        self.times = array("q")
        self.codes = array("H")
        self.details: list[str | None] = []
        self.rto = array("d")
        self.acked = array("q")
        self.dups = array("q")
        self.in_order = True
        self.runs = _Runs()
        self.with_runs = runs

    def item(self) -> tuple[Any, ...]:
        runs = self.runs.item() if self.with_runs else None
        return (
            self.frames.tobytes(),
            self.times.tobytes(),
            self.codes.tobytes(),
            self.details,
            self.acked.tobytes(),
            self.dups.tobytes(),
            self.in_order,
            runs,
            self.rto.tobytes(),
        )


def table_chunks(table: Any, rows: int = 8192, part: str = "all") -> Iterator[Chunk]:
    """A ``tcp_events`` table (one read back from a file, or a stand-in) regrouped by
    connection ``rows`` rows at a time, as the engine regroups its own (see :data:`Chunk`
    and :data:`PARTS`): a duplicate ACK's text is kept (its number columns hold 0 and
    -1), and its run is the frame its text names (see :func:`dup_ack_key`)."""
    if part not in PARTS:
        raise ValueError(f"no part of the events named {part!r}")
    runs = part == "rows+runs"
    labels: list[tuple[str, str]] = []
    code_of: dict[tuple[str, str], int] = {}
    shared: dict[str, str] = {}  # one object per repeated text ("", flag names)
    for c in column_chunks(table, _COLUMNS, rows):
        groups: dict[int, _Group] = {}
        for frame, time, stream, direction, kind, detail in zip(*(c[n] for n in _COLUMNS)):
            label = (direction, kind)
            code = code_of.get(label)
            if code is None:
                code = code_of[label] = len(labels)
                labels.append(label)
            g = groups.get(stream)
            if g is None:
                g = groups[stream] = _Group(runs)
            time = time or 0
            text = detail or ""
            if runs and kind == "duplicate_ack":
                g.runs.add(code, dup_ack_key(text, frame), time, frame, time, 1)
                continue
            if g.in_order and g.frames:
                last = g.times[-1]
                g.in_order = time > last or (time == last and frame >= g.frames[-1])
            g.frames.append(frame)
            g.times.append(time)
            g.codes.append(code)
            g.rto.append(rto_seconds(text))
            if runs and text.startswith("rto="):
                g.details.append(None)  # (its number is in rto)
            else:
                g.details.append(shared.setdefault(text, text) if len(text) < SHARED_TEXT else text)
            if not runs:
                g.acked.append(-1)
                g.dups.append(0)
        yield list(labels), {stream: g.item() for stream, g in groups.items()}
