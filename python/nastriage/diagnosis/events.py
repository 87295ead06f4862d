"""The capture's TCP events (the ``tcp_events`` table) by connection, held compactly.

A lossy or long capture flags hundreds of thousands of segments (most of them duplicate
ACKs). As one tuple each, with their integers and strings, they took about 230 bytes an
event for the whole diagnosis, more than every other table together, and memory then grew
with the capture. Here a connection's events are columns (two integer arrays, a small code
per event, the detail strings) and become :class:`Event` tuples only while a rule walks
that connection; the table itself is read a few thousand rows at a time.
"""

from __future__ import annotations

import operator
from array import array
from collections.abc import Iterator, Mapping
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


class _Columns:
    """One connection's events in table order."""

    __slots__ = ("codes", "details", "frames", "times")

    def __init__(self) -> None:
        self.frames = array("q")
        self.times = array("q")
        self.codes = array("H")  # index into EventsByStream._labels
        self.details: list[str] = []


class EventsByStream(Mapping[int, list[Event]]):
    """stream -> that connection's events in time order (frames breaking ties). Each
    lookup makes the list anew from the compact columns: keep it while you use it, and
    walk :meth:`items` to visit every connection with one list in memory at a time."""

    def __init__(self, table: Any | None) -> None:
        self._streams: dict[int, _Columns] = {}
        #: (direction, kind) pairs, numbered by first appearance.
        self._labels: list[tuple[str, str]] = []
        if table is None:
            return
        code_of: dict[tuple[str, str], int] = {}
        details: dict[str, str] = {}  # one object per repeated text ("", flag names)
        for c in column_chunks(table, _COLUMNS):
            for frame, time, stream, direction, kind, detail in zip(*(c[n] for n in _COLUMNS)):
                cols = self._streams.get(stream)
                if cols is None:
                    cols = self._streams[stream] = _Columns()
                label = (direction, kind)
                code = code_of.get(label)
                if code is None:
                    code = code_of[label] = len(self._labels)
                    self._labels.append(label)
                cols.frames.append(frame)
                cols.times.append(time or 0)
                cols.codes.append(code)
                text = detail or ""
                # Short texts repeat (flag names); long ones (a duplicate ACK's frame)
                # rarely do, and are kept as they come.
                cols.details.append(details.setdefault(text, text) if len(text) < 24 else text)

    def __getitem__(self, stream: int) -> list[Event]:
        cols = self._streams[stream]
        labels = self._labels
        evs = [
            Event(frame, time, *labels[code], detail)
            for frame, time, code, detail in zip(cols.frames, cols.times, cols.codes, cols.details)
        ]
        evs.sort(key=BY_TIME)
        return evs

    def __iter__(self) -> Iterator[int]:
        return iter(self._streams)

    def __len__(self) -> int:
        return len(self._streams)

    def count(self) -> int:
        """Events over every connection."""
        return sum(len(c.frames) for c in self._streams.values())
