"""Append-only integer columns that keep only their newest values in memory.

The loss analysis keeps a time per retransmission and a span per loss episode: on one
long lossy connection, a few hundred thousand per 4 GiB, and memory would grow with the
capture. It reads them back only in order (a run looks ahead for the next retransmission,
a retransmission for the episodes starting before it), so full blocks go to a temporary
file (made on the first full block) and come back a block at a time.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import IO

__all__ = ["BLOCK", "Column", "Reader", "Spill"]

#: Values per block written out (64 KiB of int64).
BLOCK = 8192


class Spill:
    """The temporary file the columns of one analysis write their full blocks to (or,
    should no temporary file be had, or a write fail, memory: the analysis goes on, as
    the engine's spill does)."""

    __slots__ = ("_file", "_memory", "_usable")

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._usable = True
        self._memory: list[array[int]] = []

    def put(self, values: array[int]) -> int:
        """Write ``values``; where to read them back from (a block in memory as a
        negative number)."""
        if self._usable:
            try:
                if self._file is None:
                    # (Imported here: it brings shutil and the compressors, about 5 ms
                    # of every run's start-up, for a file most captures never need.)
                    import tempfile

                    self._file = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
                at = self._file.seek(0, 2)
                values.tofile(self._file)
                return at
            except OSError:
                self._usable = False
        self._memory.append(array("q", values))
        return -len(self._memory)

    def get(self, at: int, count: int) -> array[int]:
        if at < 0:
            return self._memory[-at - 1]
        assert self._file is not None  # (only blocks put are read)
        self._file.seek(at)
        out = array("q")
        out.fromfile(self._file, count)
        return out

    def close(self) -> None:
        self._memory.clear()
        if self._file is not None:
            self._file.close()
            self._file = None


class Column:
    """int64 values appended in order; the last one may still be changed (a loss
    episode's end grows while the runs that go on with it are read)."""

    __slots__ = ("_blocks", "_spill", "_tail", "n")

    def __init__(self, spill: Spill) -> None:
        self._spill = spill
        self._blocks: list[int] = []  # offsets of full blocks, BLOCK values each
        self._tail = array("q")
        #: How many values.
        self.n = 0

    def append(self, v: int) -> None:
        self._tail.append(v)
        self.n += 1
        if len(self._tail) > BLOCK:
            self._write()

    def extend(self, values: array[int]) -> None:
        self._tail.extend(values)
        self.n += len(values)
        if len(self._tail) > BLOCK:
            self._write()

    def _write(self) -> None:
        # (The last stays in memory: it may still change.)
        tail = self._tail
        while len(tail) > BLOCK:
            self._blocks.append(self._spill.put(tail[:BLOCK]))
            del tail[:BLOCK]

    def __len__(self) -> int:
        return self.n

    @property
    def last(self) -> int:
        return self._tail[-1]

    @last.setter
    def last(self, v: int) -> None:
        self._tail[-1] = v

    def reader(self) -> Reader:
        """A reader from the first value on."""
        return Reader(self)

    def __iter__(self) -> Iterator[int]:
        for at in self._blocks:
            yield from self._spill.get(at, BLOCK)
        yield from self._tail


class Reader:
    """A place in a column, moved forward only; it sees the values appended after it
    was made too."""

    __slots__ = ("_base", "_buf", "_column", "_j")

    def __init__(self, column: Column) -> None:
        self._column = column
        #: The block (or the column's own newest values) the place is in, the index of
        #: its first value in the column, and the place in it.
        self._buf = column._tail
        self._base = 0
        self._j = 0
        self._load()

    def _load(self) -> bool:
        """Point at the value at the reader's place; False when there is none yet."""
        c = self._column
        i = self._base + self._j
        spilled = len(c._blocks) * BLOCK
        if i < spilled:
            b = i // BLOCK
            self._buf = c._spill.get(c._blocks[b], BLOCK)
            self._base = b * BLOCK
        else:
            self._buf = c._tail
            self._base = spilled
        self._j = i - self._base
        return self._j < len(self._buf)

    def _fresh(self) -> None:
        # The newest values move when a block is written out.
        c = self._column
        if self._base != len(c._blocks) * BLOCK and self._buf is c._tail:
            self._load()

    def first_at_least(self, x: int) -> int | None:
        """Move to the first value at least ``x`` (values in order) and give it, or
        None if there is none yet (the place is then past every value)."""
        self._fresh()
        while True:
            buf, j = self._buf, self._j
            n = len(buf)
            while j < n and buf[j] < x:
                j += 1
            self._j = j
            if j < n:
                return buf[j]
            if not self._load():
                return None

    def count_at_most(self, x: int) -> int:
        """Move past the values at most ``x`` (values in order); how many."""
        self._fresh()
        k = 0
        while True:
            buf, j = self._buf, self._j
            n, j0 = len(buf), j
            while j < n and buf[j] <= x:
                j += 1
            k += j - j0
            self._j = j
            if j < n or not self._load():
                return k

    def max_of_next(self, k: int, start: int) -> int:
        """Move past the next ``k`` values (there must be as many); the largest of
        them and ``start``."""
        self._fresh()
        m = start
        while k:
            buf, j = self._buf, self._j
            n = len(buf)
            if j >= n:
                if not self._load():
                    raise IndexError("past the column's last value")
                continue
            if k == 1:  # (the usual case: no slice made)
                v = buf[j]
                self._j = j + 1
                return v if v > m else m
            take = min(k, n - j)
            m = max(m, max(buf[j : j + take]))
            self._j = j + take
            k -= take
        return m
