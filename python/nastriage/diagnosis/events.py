"""The capture's TCP events (the ``tcp_events`` table) by connection, held compactly.

A lossy or long capture flags hundreds of thousands of segments (most of them duplicate
ACKs), and a single file copy puts them all on one connection. As one tuple each, with
their integers and strings, they took about 230 bytes an event for the whole diagnosis,
more than every other table together, and memory grew with the capture. Here a
connection's events are columns (integer arrays, a small code per event; a duplicate ACK's
detail kept as the two numbers it holds), handed over already grouped by a live analysis
(:meth:`EventsByStream.from_grouped`) or read from the table a few thousand rows at a
time; :meth:`EventsByStream.ordered` walks them without making an object per event, and
:class:`Event` tuples are made only for the events a rule keeps (or when a connection's
list is asked for).
"""

from __future__ import annotations

import operator
import re
from array import array
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from nastriage.capture import column_chunks

__all__ = ["Event", "EventsByStream"]


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

_COLUMNS = ("frame", "time", "stream", "direction", "kind", "detail")

#: A duplicate ACK's detail as the engine writes it (numbers without leading zeros, so
#: that the text made again from them is the same).
_DUP_ACK = re.compile(r"dup_ack=(0|[1-9][0-9]*) of frame (0|[1-9][0-9]*)")

#: One event as :meth:`EventsByStream.ordered` gives it: frame, time, label code, detail
#: (None for a duplicate ACK whose numbers are kept instead), acknowledged frame (a
#: duplicate ACK's, else -1).
Row = tuple[int, int, int, "str | None", int]


class _Columns:
    """One connection's events in table order."""

    __slots__ = ("acked", "codes", "details", "dup_numbers", "frames", "in_order", "times")

    def __init__(self) -> None:
        self.frames = array("q")
        self.times = array("q")
        self.codes = array("H")  # index into EventsByStream.labels
        self.details: list[str | None] = []
        self.acked = array("q")
        self.dup_numbers = array("q")
        #: The table's order is already (time, frame) order.
        self.in_order = True


class EventsByStream(Mapping[int, list[Event]]):
    """stream -> that connection's events in time order (frames breaking ties). Each
    lookup makes the list anew from the compact columns; :meth:`ordered` walks them
    without making the list."""

    def __init__(self, table: Any | None) -> None:
        self._streams: dict[int, _Columns] = {}
        #: (direction, kind) pairs, numbered by first appearance.
        self.labels: list[tuple[str, str]] = []
        if table is None:
            return
        code_of: dict[tuple[str, str], int] = {}
        details: dict[str, str] = {}  # one object per repeated text ("", flag names)
        dup_ack = _DUP_ACK.fullmatch
        for c in column_chunks(table, _COLUMNS):
            for frame, time, stream, direction, kind, detail in zip(*(c[n] for n in _COLUMNS)):
                cols = self._streams.get(stream)
                if cols is None:
                    cols = self._streams[stream] = _Columns()
                label = (direction, kind)
                code = code_of.get(label)
                if code is None:
                    code = code_of[label] = len(self.labels)
                    self.labels.append(label)
                time = time or 0
                if cols.in_order and cols.frames:
                    last = cols.times[-1]
                    cols.in_order = time > last or (time == last and frame >= cols.frames[-1])
                cols.frames.append(frame)
                cols.times.append(time)
                cols.codes.append(code)
                text = detail or ""
                m = dup_ack(text) if kind == "duplicate_ack" else None
                if m is not None:
                    cols.details.append(None)
                    cols.dup_numbers.append(int(m[1]))
                    cols.acked.append(int(m[2]))
                    continue
                # Short texts repeat (flag names); long ones (a retransmission's frame
                # and time since it was first sent) rarely do, and are kept as they come.
                cols.details.append(details.setdefault(text, text) if len(text) < 24 else text)
                cols.dup_numbers.append(0)
                cols.acked.append(-1)

    @classmethod
    def from_grouped(
        cls, chunks: Iterable[tuple[list[tuple[str, str]], dict[int, Any]]]
    ) -> EventsByStream:
        """The same, from the engine's own regrouping of the table a range of rows at a
        time (``Analysis.tcp_events_by_stream``): columns as bytes, made without a Python
        object per cell."""
        out = cls(None)
        streams = out._streams
        for labels, chunk in chunks:
            out.labels = [(str(d), str(k)) for d, k in labels]
            for stream, (frames, times, codes, details, acked, dups, in_order) in chunk.items():
                cols = streams.get(stream)
                if cols is None:
                    cols = streams[stream] = _Columns()
                n = len(cols.frames)
                cols.frames.frombytes(frames)
                cols.times.frombytes(times)
                cols.codes.frombytes(codes)
                cols.details.extend(details)
                cols.acked.frombytes(acked)
                cols.dup_numbers.frombytes(dups)
                if cols.in_order:
                    # In order within these rows, and from the rows before to them.
                    cols.in_order = bool(in_order) and (
                        n == 0
                        or (cols.times[n], cols.frames[n])
                        >= (cols.times[n - 1], cols.frames[n - 1])
                    )
        return out

    def ordered(self, stream: int) -> Iterator[Row]:
        """The connection's events in time order (frames breaking ties) as plain rows
        (see :data:`Row`; ``labels[code]`` is the event's direction and kind)."""
        cols = self._streams.get(stream)
        if cols is None:
            return iter(())
        rows = zip(cols.frames, cols.times, cols.codes, cols.details, cols.acked)
        return rows if cols.in_order else iter(sorted(rows, key=BY_TIME))

    def kinds(self, stream: int) -> set[tuple[str, str]]:
        """The (direction, kind) pairs the connection has events of."""
        cols = self._streams.get(stream)
        return {self.labels[c] for c in set(cols.codes)} if cols is not None else set()

    def __getitem__(self, stream: int) -> list[Event]:
        cols = self._streams[stream]
        labels = self.labels
        out = []
        rows = zip(cols.frames, cols.times, cols.codes, cols.details, cols.acked, cols.dup_numbers)
        for frame, time, code, detail, acked, number in rows:
            if detail is None:
                detail = f"dup_ack={number} of frame {acked}"
            direction, kind = labels[code]
            out.append(Event(frame, time, direction, kind, detail))
        out.sort(key=BY_TIME)
        return out

    def __iter__(self) -> Iterator[int]:
        return iter(self._streams)

    def __len__(self) -> int:
        return len(self._streams)

    def count(self) -> int:
        """Events over every connection."""
        return sum(len(c.frames) for c in self._streams.values())
