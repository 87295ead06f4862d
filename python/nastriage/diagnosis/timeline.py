"""Where a connection's time goes, from its NFS/SMB transactions.

Each instant of a connection's active span is put in exactly one state, the first that
applies:

1. ``transfer``: request or reply data is on the wire (a request's first to last segment,
   a reply's first to last segment);
2. ``server``: a request has reached the server and its reply has not left it yet
   (the request's last segment plus the round trip behind the capture point, to the
   reply's first segment minus it);
3. ``network``: requests are outstanding but neither of the above: the request or the
   reply is travelling (round-trip latency);
4. ``idle``: nothing is outstanding: the client sends nothing (application think time).

The round trips come from ``Context.side_rtts_ms`` (from the capture point to each side),
so a client-side and a server-side capture of the same transfer give the same shares.

The engine computes these profiles in its ``time_profile`` table (one row per connection,
``crates/engine/src/time_profile.rs``), so no per-request work happens in Python. The
functions below are the reference definition, used for tables without it (older engines,
hand-made tables in tests); ``tests/test_time_profile.py`` keeps the two equal.
"""

from __future__ import annotations

import bisect
import itertools
import sys
from array import array
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar, overload

from nastriage.capture import read_columns
from nastriage.diagnosis.context import Context, Tx, median

_T = TypeVar("_T")

__all__ = ["Profile", "Profiles", "partition", "profile", "profiles", "union_ns"]

STATES = ("transfer", "server", "network")

#: Operations that move file data (the rest is metadata).
DATA_OPS = frozenset(
    {"READ", "WRITE", "COMMIT", "Read", "Write", "Flush", "READ_PLUS", "COPY", "CLONE"}
)


def union_ns(intervals: list[tuple[int, int]]) -> int:
    """Total length of the union of [start, end) intervals."""
    return union_sorted_ns(sorted(intervals))


def union_sorted_ns(intervals: Iterable[tuple[int, int]]) -> int:
    """Total length of the union of [start, end) intervals given in order of their starts
    (any order among equal starts)."""
    total = 0
    cur_s: int | None = None
    cur_e = 0
    for s, e in intervals:
        if e <= s:
            continue
        if cur_s is None or s > cur_e:
            if cur_s is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_s is not None:
        total += cur_e - cur_s
    return total


def partition(intervals: list[tuple[int, int, int]], n_states: int) -> list[int]:
    """Nanoseconds per state for (start, end, state) intervals; at any instant the lowest
    state number present wins. Returns one total per state."""
    points: list[tuple[int, int, int]] = []
    for s, e, st in intervals:
        if e > s:
            points.append((s, 1, st))
            points.append((e, -1, st))
    points.sort()
    counts = [0] * n_states
    totals = [0] * n_states
    last_t: int | None = None
    for t, delta, st in points:
        if last_t is not None and t > last_t:
            for i in range(n_states):
                if counts[i] > 0:
                    totals[i] += t - last_t
                    break
        counts[st] += delta
        last_t = t
    return totals


#: Integer and float fields of a profile, each kept as one array over all connections.
_INT_FIELDS = (
    "transactions", "answered", "span_ns", "data_bytes", "io_bytes", "io_requests",
    "metadata_requests", "metadata_only_ns", "outstanding_ns", "max_outstanding",
)  # fmt: skip
_FLOAT_FIELDS = (
    "client_rtt_ms", "server_rtt_ms", "processing_median_ms", "processing_p90_ms",
    "at_max_fraction", "mean_outstanding_busy", "response_median_ms",
)  # fmt: skip


class _Lists:
    """Lists of varying length, one per connection, kept end to end in one array (an
    array or a list per connection was a sixth of the profiles' memory)."""

    __slots__ = ("at", "values")

    def __init__(self, typecode: str) -> None:
        self.values = array(typecode)
        self.at = array("q", [0])

    def append(self, values: Iterable[Any]) -> None:
        self.values.extend(values)
        self.at.append(len(self.values))

    def extend(self, lists: list[Any]) -> None:
        """Several connections' lists (None: empty), at once."""
        sizes = _sizes(lists)
        self.values.extend(_flat(lists))
        self.at.extend(_ends(self.at[-1], sizes))

    def get(self, i: int) -> Any:
        return self.values[self.at[i] : self.at[i + 1]]


class _Named:
    """Name -> value mappings, one per connection, kept as names (interned) and values
    end to end."""

    __slots__ = ("at", "names", "values")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.values = array("d")
        self.at = array("q", [0])

    def append(self, names: Iterable[Any], values: Iterable[Any]) -> None:
        for k, v in zip(names, values):
            self.names.append(sys.intern(str(k)))
            self.values.append(float(v))
        self.at.append(len(self.names))

    def extend(self, names: list[Any], values: list[Any]) -> None:
        """Several connections' mappings (None: empty), at once."""
        sizes = _sizes(names)
        if sizes != _sizes(values):
            # A mapping with more names than values or the reverse: one at a time (as
            # many pairs as the shorter has).
            for k, v in zip(names, values):
                self.append(k or (), v or ())
            return
        self.names.extend(map(sys.intern, map(str, _flat(names))))
        self.values.extend(map(float, _flat(values)))
        self.at.extend(_ends(self.at[-1], sizes))

    def get(self, i: int) -> dict[str, float]:
        a, b = self.at[i], self.at[i + 1]
        return dict(zip(self.names[a:b], self.values[a:b]))


def _flat(lists: list[Any]) -> Iterator[Any]:
    """The items of several lists (None: empty), end to end."""
    return itertools.chain.from_iterable(filter(None, lists))


def _sizes(lists: list[Any]) -> list[int]:
    """The lengths of several lists (None: 0)."""
    return [len(x) if x else 0 for x in lists]


def _ends(start: int, sizes: list[int]) -> Iterator[int]:
    """Where lists of these sizes end, put end to end after ``start`` items."""
    ends = itertools.accumulate(sizes, initial=start)
    next(ends)
    return ends


def _int_array(values: list[Any]) -> array[int]:
    """``values`` as integers (converted one by one only when the column is not integers
    already: floats)."""
    try:
        return array("q", values)
    except TypeError:
        return array("q", [int(v) for v in values])


def _float_array(values: list[Any]) -> array[float]:
    try:
        return array("d", values)
    except TypeError:
        return array("d", [float(v) for v in values])


class ProfileColumns:
    """The profiles of many connections, a column per field: numbers in arrays, the few
    distinct texts shared. Made of Python objects per connection (a dataclass with dicts
    and lists), 15,540 connections' profiles took 16 MB."""

    def __init__(self) -> None:
        self.streams = array("q")
        self.ints = {name: array("q") for name in _INT_FIELDS}
        self.floats = {name: array("d") for name in _FLOAT_FIELDS}
        self.ns = {state: array("q") for state in STATES}
        self.data_ns = {state: array("q") for state in STATES}
        self.rtt_source: list[str] = []
        self.protocols: list[tuple[str, ...]] = []
        self.slow_frames = _Lists("q")
        self.first_frames = _Lists("q")
        self.by_op = _Named()
        self.by_file = _Named()
        self._texts: dict[Any, Any] = {}

    def __len__(self) -> int:
        return len(self.streams)

    def _shared(self, value: Any) -> Any:
        return self._texts.setdefault(value, value)

    def append(self, f: dict[str, Any]) -> None:
        """One connection's profile, from its fields (see :class:`Profile`)."""
        self.streams.append(int(f["stream"]))
        for name in _INT_FIELDS:
            self.ints[name].append(int(f[name]))
        for name in _FLOAT_FIELDS:
            self.floats[name].append(float(f[name]))
        for state in STATES:
            self.ns[state].append(int(f["ns"][state]))
            self.data_ns[state].append(int(f["data_ns"][state]))
        self.rtt_source.append(self._shared(str(f["rtt_source"])))
        self.protocols.append(self._shared(tuple(str(p) for p in f["protocols"])))
        self.slow_frames.append(f["slow_frames"])
        self.first_frames.append(f["first_frames"])
        by_op, by_file = f["processing_by_op"], f["processing_by_file"]
        self.by_op.append(by_op.keys(), by_op.values())
        self.by_file.append(by_file.keys(), by_file.values())

    def in_order(self) -> ProfileColumns:
        """The same profiles in the order of their streams, one per stream (the last)."""
        last = {s: i for i, s in enumerate(self.streams)}
        order = [last[s] for s in sorted(last)]
        if order == list(range(len(self))):
            return self
        out = ProfileColumns()
        for i in order:
            out.append(Profile(self, i).fields())
        return out


class _Field(Generic[_T]):
    """A profile's number, read from its column in :class:`ProfileColumns` (``ints`` or
    ``floats``, by the attribute's name)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> _Field[_T]: ...
    @overload
    def __get__(self, obj: Profile, owner: type) -> _T: ...
    def __get__(self, obj: Profile | None, owner: type) -> _Field[_T] | _T:
        if obj is None:
            return self
        value: _T = getattr(obj._c, self.kind)[self.name][obj._i]
        return value


class Profile:
    """One connection's time profile: a view of its row in :class:`ProfileColumns`."""

    __slots__ = ("_c", "_i")

    def __init__(self, columns: ProfileColumns, row: int) -> None:
        self._c = columns
        self._i = row

    @property
    def stream(self) -> int:
        return self._c.streams[self._i]

    transactions = _Field[int]("ints")
    answered = _Field[int]("ints")
    span_ns = _Field[int]("ints")
    """Active span (first request to last reply, widened by the client-side round trip)."""

    @property
    def ns(self) -> dict[str, int]:
        """Nanoseconds per state; idle = span - the rest."""
        return {state: self._c.ns[state][self._i] for state in STATES}

    @property
    def data_ns(self) -> dict[str, int]:
        """The same over the data requests only (READ/WRITE...): the data phase, without
        the session set-up and metadata round trips."""
        return {state: self._c.data_ns[state][self._i] for state in STATES}

    client_rtt_ms = _Field[float]("floats")
    server_rtt_ms = _Field[float]("floats")

    @property
    def rtt_source(self) -> str:
        return self._c.rtt_source[self._i]

    processing_median_ms = _Field[float]("floats")
    """Server processing time per answered request (ms: response time minus the round
    trip behind the capture point): median, and 90th percentile below."""

    processing_p90_ms = _Field[float]("floats")

    @property
    def processing_by_op(self) -> dict[str, float]:
        """Processing time by operation (ms, summed), for "which ops"."""
        return self._c.by_op.get(self._i)

    @property
    def processing_by_file(self) -> dict[str, float]:
        """Processing time by file (ms, summed), for "which files"."""
        return self._c.by_file.get(self._i)

    data_bytes = _Field[int]("ints")
    io_bytes = _Field[int]("ints")
    """Bytes moved by data operations (READ/WRITE...); their count below."""

    io_requests = _Field[int]("ints")
    metadata_requests = _Field[int]("ints")
    metadata_only_ns = _Field[int]("ints")
    """Time during which only metadata requests were outstanding."""

    outstanding_ns = _Field[int]("ints")
    max_outstanding = _Field[int]("ints")
    """Highest number of requests outstanding at once (share of busy time at it below)."""

    at_max_fraction = _Field[float]("floats")
    mean_outstanding_busy = _Field[float]("floats")

    @property
    def slow_frames(self) -> array[int]:
        """Frames of the slowest requests (up to 20)."""
        return self._c.slow_frames.get(self._i)  # type: ignore[no-any-return]

    @property
    def protocols(self) -> list[str]:
        """Storage protocols seen on the connection ("nfs", "smb2"), sorted."""
        return list(self._c.protocols[self._i])

    response_median_ms = _Field[float]("floats")
    """Median response time (ms) of the answered requests (upper middle value)."""

    @property
    def first_frames(self) -> array[int]:
        """Frames of the first requests (up to 30), in request order."""
        return self._c.first_frames.get(self._i)  # type: ignore[no-any-return]

    def fields(self) -> dict[str, Any]:
        """Every field, by name (what :meth:`ProfileColumns.append` takes)."""
        return {name: getattr(self, name) for name in PROFILE_FIELDS}

    def __repr__(self) -> str:
        return f"Profile({self.fields()!r})"

    @property
    def active_ns(self) -> int:
        ns, i = self._c.ns, self._i
        return sum(ns[s][i] for s in STATES)

    def share(self, state: str) -> float:
        """Share of the active time (requests outstanding) spent in ``state``."""
        active = self.active_ns
        return self._c.ns[state][self._i] / active if active else 0.0

    def data_share(self, state: str) -> float:
        """Like :meth:`share`, over the data requests only."""
        ns, i = self._c.data_ns, self._i
        active = sum(ns[s][i] for s in STATES)
        return ns[state][i] / active if active else 0.0

    @property
    def idle_share(self) -> float:
        span = self.span_ns
        return 1.0 - self.active_ns / span if span else 0.0

    @property
    def transfer_rate_bps(self) -> float | None:
        """Data rate while data flows: what the path carries when it is used."""
        transfer = self._c.ns["transfer"][self._i]
        data_bytes = self.data_bytes
        if transfer <= 0 or data_bytes <= 0:
            return None
        return data_bytes * 8e9 / transfer

    @property
    def observed_bps(self) -> float | None:
        span = self.span_ns
        if span <= 0:
            return None
        return self.data_bytes * 8e9 / span

    @property
    def median_processing_ms(self) -> float:
        return self.processing_median_ms

    @property
    def mean_io_bytes(self) -> float:
        requests = self.io_requests
        return self.io_bytes / requests if requests else 0.0


#: A profile's fields, in order.
PROFILE_FIELDS: tuple[str, ...] = (
    "stream", "transactions", "answered", "span_ns", "ns", "data_ns", "client_rtt_ms",
    "server_rtt_ms", "rtt_source", "processing_median_ms", "processing_p90_ms",
    "processing_by_op", "processing_by_file", "data_bytes", "io_bytes", "io_requests",
    "metadata_requests", "metadata_only_ns", "outstanding_ns", "max_outstanding",
    "at_max_fraction", "mean_outstanding_busy", "slow_frames", "protocols",
    "response_median_ms", "first_frames",
)  # fmt: skip


class Profiles(Mapping[int, Profile]):
    """Profiles by stream, in stream order (views of one :class:`ProfileColumns`)."""

    __slots__ = ("_c",)

    def __init__(self, columns: ProfileColumns) -> None:
        self._c = columns.in_order()

    def __len__(self) -> int:
        return len(self._c)

    def __iter__(self) -> Iterator[int]:
        return iter(self._c.streams)

    def __getitem__(self, stream: int) -> Profile:
        streams = self._c.streams
        i = bisect.bisect_left(streams, stream)
        if i == len(streams) or streams[i] != stream:
            raise KeyError(stream)
        return Profile(self._c, i)

    def __contains__(self, stream: object) -> bool:
        return isinstance(stream, int) and self.get(stream) is not None

    def items(self) -> Iterator[tuple[int, Profile]]:  # type: ignore[override]
        c = self._c
        return ((s, Profile(c, i)) for i, s in enumerate(c.streams))

    def values(self) -> Iterator[Profile]:  # type: ignore[override]
        c = self._c
        return (Profile(c, i) for i in range(len(c)))

    def total(self, field: str) -> int:
        """The sum of an integer field over every profile (from its column)."""
        return sum(self._c.ints[field])

    def at_least(self, least: Mapping[str, int]) -> dict[int, Profile]:
        """The profiles (by stream, in order) whose integer fields are each at least the
        given value."""
        c = self._c
        rows: Iterable[int] = range(len(c))
        for field, value in least.items():
            column = c.ints[field]
            rows = [i for i in rows if column[i] >= value]
        return {c.streams[i]: Profile(c, i) for i in rows}

    def streams_with(self, field: str) -> list[int]:
        """The streams (in order) whose integer ``field`` is not 0."""
        return [s for s, v in zip(self._c.streams, self._c.ints[field]) if v]


def is_data_op(op: str) -> bool:
    return op in DATA_OPS or op.upper() in DATA_OPS


def profile(ctx: Context, stream: int) -> Profile | None:
    """The time profile of one connection's NFS/SMB traffic (None: no answered requests).
    Computed once per connection and context."""
    return profiles(ctx).get(stream)


def profiles(ctx: Context) -> Profiles:
    """Profiles of every connection with answered NFS/SMB requests, by stream."""
    return ctx._cached("profiles", lambda: _profiles(ctx))  # type: ignore[no-any-return]


def _profiles(ctx: Context) -> Profiles:
    columns = ProfileColumns()
    table = ctx.time_profile_table()
    if table is not None:
        # Every value of every row is read: converted a column at a time (the rows the
        # context keeps are read in place, a value at a time), a batch of rows at a time
        # (all at once, the values of 7,770 connections' rows took 23 MB).
        for start in range(0, table.num_rows, _PROFILE_ROWS):
            _add_rows(columns, read_columns(table, _PROFILE_COLUMNS, start, start + _PROFILE_ROWS))
        return Profiles(columns)
    for stream in sorted(ctx.transactions):
        fields = _profile(ctx, stream)
        if fields is not None:
            columns.append(fields)
    return Profiles(columns)


#: Rows of the time_profile table converted at a time.
_PROFILE_ROWS = 1024


#: The ``time_profile`` columns a profile is made of.
_PROFILE_COLUMNS: tuple[str, ...] = (
    "stream", "transactions", "answered", "span_ns",
    *(f"{s}_ns" for s in STATES), *(f"data_{s}_ns" for s in STATES),
    "client_rtt_ms", "server_rtt_ms", "rtt_source", "processing_median_ms",
    "processing_p90_ms", "processing_ops", "processing_ops_ms", "processing_files",
    "processing_files_ms", "data_bytes", "io_bytes", "io_requests", "metadata_requests",
    "metadata_only_ns", "outstanding_ns", "max_outstanding", "at_max_fraction",
    "mean_outstanding_busy", "slow_frames", "protocols", "response_median_ms",
    "first_frames",
)  # fmt: skip


def _add_rows(out: ProfileColumns, c: dict[str, list[Any]]) -> None:
    """Rows of the engine's ``time_profile`` table, as columns, to ``out``: a column at a
    time (every value is read; through a row's mapping, a value at a time, the lookups
    were most of the profiles' time on thousands of connections)."""
    out.streams.extend(_int_array(c["stream"]))
    for name in _INT_FIELDS:
        values = c[name]
        if name == "span_ns":
            out.ints[name].extend(max(int(v), 1) for v in values)
        else:
            out.ints[name].extend(_int_array(values))
    for name in _FLOAT_FIELDS:
        if name == "response_median_ms":
            out.floats[name].extend(float(v or 0.0) for v in c[name])
        else:
            out.floats[name].extend(_float_array(c[name]))
    for state in STATES:
        out.ns[state].extend(_int_array(c[f"{state}_ns"]))
        out.data_ns[state].extend(_int_array(c[f"data_{state}_ns"]))
    out.rtt_source.extend(out._shared(str(v)) for v in c["rtt_source"])
    out.protocols.extend(out._shared(tuple(str(p) for p in v or ())) for v in c["protocols"])
    out.slow_frames.extend(c["slow_frames"])
    out.first_frames.extend(c["first_frames"])
    out.by_op.extend(c["processing_ops"], c["processing_ops_ms"])
    out.by_file.extend(c["processing_files"], c["processing_files_ms"])


def _profile(ctx: Context, stream: int) -> dict[str, Any] | None:
    """One connection's profile fields, from its transactions (None: no answered
    requests)."""
    storage = ctx.storage_transactions(stream)
    txs = [t for t in storage if t.answered]
    if not txs:
        return None
    cli_rtt, srv_rtt, source = ctx.side_rtts_ms(stream)
    a = int(cli_rtt * 1e6 / 2)
    b = int(srv_rtt * 1e6 / 2)
    intervals: list[tuple[int, int, int]] = []
    data_intervals: list[tuple[int, int, int]] = []
    outstanding: list[tuple[int, int]] = []
    metadata: list[tuple[int, int]] = []
    data: list[tuple[int, int]] = []
    processing: list[float] = []
    by_op: dict[str, float] = defaultdict(float)
    by_file: dict[str, float] = defaultdict(float)
    data_bytes = io_bytes = io_requests = meta_requests = 0
    slow: list[tuple[float, int]] = []
    for t in txs:
        assert t.reply_first is not None
        reply_last = t.reply_last if t.reply_last is not None else t.reply_first
        intervals.append((t.req_first, t.req_last, 0))
        intervals.append((t.reply_first, reply_last, 0))
        intervals.append((t.req_last + b, t.reply_first - b, 1))
        span = (t.req_first - a, reply_last + a)
        intervals.append((span[0], span[1], 2))
        if is_data_op(t.op):
            data_intervals.extend(intervals[-4:])
        outstanding.append(span)
        proc = max(0.0, (t.reply_first - t.req_last) / 1e6 - srv_rtt)
        processing.append(proc)
        by_op[t.op] += proc
        if t.file_name:
            by_file[t.file_name] += proc
        slow.append((proc, t.req_first_frame))
        data_bytes += t.request_bytes + int(t.reply_bytes or 0)
        if is_data_op(t.op):
            io_requests += 1
            io_bytes += t.data_bytes
            data.append(span)
        else:
            meta_requests += 1
            metadata.append(span)
    totals = partition(intervals, 3)
    data_totals = partition(data_intervals, 3)
    span_ns = max(r[1] for r in outstanding) - min(r[0] for r in outstanding)
    out_ns = union_ns(outstanding)
    # only metadata outstanding = |meta union data| - |data|
    meta_only = out_ns - union_ns(data)
    conc = ctx.concurrency.get(stream, {})
    k, at_max, mean_busy = _outstanding_stats(txs)
    k = int(conc.get("max_outstanding") or k)
    if conc.get("at_max_fraction") is not None:
        at_max = float(conc["at_max_fraction"])
    mean_busy = float(conc.get("mean_outstanding_busy") or mean_busy)
    slow.sort(reverse=True)
    processing.sort()
    p90 = processing[int(0.9 * (len(processing) - 1))] if processing else 0.0
    srts = sorted(t.srt_ms for t in txs if t.srt_ms is not None)
    # The engine keeps the 20 files with the most processing time per connection.
    top_files = sorted(by_file.items(), key=lambda kv: -kv[1])[:20]
    return dict(
        stream=stream,
        transactions=len(storage),
        answered=len(txs),
        span_ns=max(span_ns, 1),
        ns=dict(zip(STATES, totals)),
        data_ns=dict(zip(STATES, data_totals)),
        client_rtt_ms=cli_rtt,
        server_rtt_ms=srv_rtt,
        rtt_source=source,
        processing_median_ms=median(processing) if processing else 0.0,
        processing_p90_ms=p90,
        processing_by_op=dict(by_op),
        processing_by_file=dict(top_files),
        data_bytes=data_bytes,
        io_bytes=io_bytes,
        io_requests=io_requests,
        metadata_requests=meta_requests,
        metadata_only_ns=max(0, meta_only),
        outstanding_ns=out_ns,
        max_outstanding=k,
        at_max_fraction=at_max,
        mean_outstanding_busy=mean_busy,
        slow_frames=array("q", (f for _, f in slow[:20])),
        protocols=sorted({t.protocol for t in txs}),
        response_median_ms=srts[len(srts) // 2] if srts else 0.0,
        first_frames=array("q", (t.req_first_frame for t in storage[:30])),
    )


def _outstanding_stats(txs: list[Tx]) -> tuple[int, float, float]:
    """(max outstanding, share of busy time at it, mean outstanding while busy)."""
    points: list[tuple[int, int]] = []
    for tx in txs:
        end = tx.reply_first if tx.reply_first is not None else tx.req_first
        if end > tx.req_first:
            points.append((tx.req_first, 1))
            points.append((end, -1))
    points.sort()
    level = 0
    last: int | None = None
    time_at: dict[int, int] = defaultdict(int)
    for t, d in points:
        if last is not None and t > last and level > 0:
            time_at[level] += t - last
        level += d
        last = t
    if not time_at:
        return 0, 0.0, 0.0
    k = max(time_at)
    busy = sum(time_at.values())
    mean = sum(lvl * ns for lvl, ns in time_at.items()) / busy
    return k, time_at[k] / busy, mean
