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

import statistics
from array import array
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from nastriage.capture import read_columns
from nastriage.diagnosis.context import Context, Tx

__all__ = ["Profile", "partition", "profile", "profiles", "union_ns"]

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


@dataclass
class Profile:
    stream: int
    transactions: int
    answered: int
    #: Active span (first request to last reply, widened by the client-side round trip).
    span_ns: int
    #: Nanoseconds per state; idle = span - the rest.
    ns: dict[str, int]
    #: The same over the data requests only (READ/WRITE...): the data phase, without the
    #: session set-up and metadata round trips.
    data_ns: dict[str, int]
    client_rtt_ms: float
    server_rtt_ms: float
    rtt_source: str
    #: Server processing time per answered request (ms: response time minus the round
    #: trip behind the capture point): median and 90th percentile.
    processing_median_ms: float
    processing_p90_ms: float
    #: Processing time by operation and by file (ms, summed), for "which ops, which files".
    processing_by_op: dict[str, float] = field(default_factory=dict)
    processing_by_file: dict[str, float] = field(default_factory=dict)
    data_bytes: int = 0
    #: Bytes moved by data operations (READ/WRITE...), and their count.
    io_bytes: int = 0
    io_requests: int = 0
    metadata_requests: int = 0
    #: Time during which only metadata requests were outstanding.
    metadata_only_ns: int = 0
    outstanding_ns: int = 0
    #: Highest number of requests outstanding at once, share of busy time at it.
    max_outstanding: int = 0
    at_max_fraction: float = 0.0
    mean_outstanding_busy: float = 0.0
    #: Frame numbers as arrays, not lists of Python ints: they are read only for the
    #: evidence of the worst connection, and as lists they were a sixth of the profiles'
    #: memory (3 MB of 19 MB for 7,770 connections).
    slow_frames: array[int] = field(default_factory=lambda: array("q"))
    #: Storage protocols seen on the connection ("nfs", "smb2"), sorted.
    protocols: list[str] = field(default_factory=list)
    #: Median response time (ms) of the answered requests (upper middle value).
    response_median_ms: float = 0.0
    #: Frames of the first requests (up to 30), in request order.
    first_frames: array[int] = field(default_factory=lambda: array("q"))

    @property
    def active_ns(self) -> int:
        return sum(self.ns[s] for s in STATES)

    def share(self, state: str) -> float:
        """Share of the active time (requests outstanding) spent in ``state``."""
        active = self.active_ns
        return self.ns[state] / active if active else 0.0

    def data_share(self, state: str) -> float:
        """Like :meth:`share`, over the data requests only."""
        active = sum(self.data_ns[s] for s in STATES)
        return self.data_ns[state] / active if active else 0.0

    @property
    def idle_share(self) -> float:
        return 1.0 - self.active_ns / self.span_ns if self.span_ns else 0.0

    @property
    def transfer_rate_bps(self) -> float | None:
        """Data rate while data flows: what the path carries when it is used."""
        if self.ns["transfer"] <= 0 or self.data_bytes <= 0:
            return None
        return self.data_bytes * 8e9 / self.ns["transfer"]

    @property
    def observed_bps(self) -> float | None:
        if self.span_ns <= 0:
            return None
        return self.data_bytes * 8e9 / self.span_ns

    @property
    def median_processing_ms(self) -> float:
        return self.processing_median_ms

    @property
    def mean_io_bytes(self) -> float:
        return self.io_bytes / self.io_requests if self.io_requests else 0.0


def is_data_op(op: str) -> bool:
    return op in DATA_OPS or op.upper() in DATA_OPS


def profile(ctx: Context, stream: int) -> Profile | None:
    """The time profile of one connection's NFS/SMB traffic (None: no answered requests).
    Computed once per connection and context."""
    return profiles(ctx).get(stream)


def profiles(ctx: Context) -> dict[int, Profile]:
    """Profiles of every connection with answered NFS/SMB requests, by stream."""
    return ctx._cached("profiles", lambda: _profiles(ctx))  # type: ignore[no-any-return]


def _profiles(ctx: Context) -> dict[int, Profile]:
    table = ctx.time_profile_table()
    if table is not None:
        # Every value of every row is read: converted a column at a time (the rows the
        # context keeps are read in place, a value at a time), a batch of rows at a time
        # (all at once, the values of 7,770 connections' rows took 23 MB).
        found = {p.stream: p for p in _from_table(table)}
        return dict(sorted(found.items()))
    out = {}
    for stream in sorted(ctx.transactions):
        p = _profile(ctx, stream)
        if p is not None:
            out[stream] = p
    return out


#: Rows of the time_profile table converted at a time.
_PROFILE_ROWS = 1024


def _named(names: list[str] | None, values: list[float] | None) -> dict[str, float]:
    return {str(k): float(v) for k, v in zip(names or [], values or [])}


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


def _from_table(table: Any) -> Iterable[Profile]:
    """Profiles from the rows of the engine's ``time_profile`` table, from its columns read
    a batch of rows at a time (every value is read; through a row's mapping, a value at a
    time, the lookups were most of the profiles' time on thousands of connections)."""
    for start in range(0, table.num_rows, _PROFILE_ROWS):
        c = read_columns(table, _PROFILE_COLUMNS, start, start + _PROFILE_ROWS)
        for (stream, transactions, answered, span, transfer, server, network, data_transfer,
             data_server, data_network, client_rtt, server_rtt, rtt_source, processing_median,
             processing_p90, ops, ops_ms, files, files_ms, data_bytes, io_bytes, io_requests,
             metadata_requests, metadata_only, outstanding, max_outstanding, at_max,
             mean_busy, slow_frames, protocols, response_median, first_frames) in zip(
            *(c[name] for name in _PROFILE_COLUMNS)
        ):  # fmt: skip
            yield Profile(
                stream=int(stream),
                transactions=int(transactions),
                answered=int(answered),
                span_ns=max(int(span), 1),
                ns=dict(zip(STATES, (int(transfer), int(server), int(network)))),
                data_ns=dict(
                    zip(STATES, (int(data_transfer), int(data_server), int(data_network)))
                ),
                client_rtt_ms=float(client_rtt),
                server_rtt_ms=float(server_rtt),
                rtt_source=str(rtt_source),
                processing_median_ms=float(processing_median),
                processing_p90_ms=float(processing_p90),
                processing_by_op=_named(ops, ops_ms),
                processing_by_file=_named(files, files_ms),
                data_bytes=int(data_bytes),
                io_bytes=int(io_bytes),
                io_requests=int(io_requests),
                metadata_requests=int(metadata_requests),
                metadata_only_ns=int(metadata_only),
                outstanding_ns=int(outstanding),
                max_outstanding=int(max_outstanding),
                at_max_fraction=float(at_max),
                mean_outstanding_busy=float(mean_busy),
                slow_frames=array("q", slow_frames or ()),
                protocols=[str(p) for p in protocols or []],
                response_median_ms=float(response_median or 0.0),
                first_frames=array("q", first_frames or ()),
            )


def _profile(ctx: Context, stream: int) -> Profile | None:
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
    return Profile(
        stream=stream,
        transactions=len(storage),
        answered=len(txs),
        span_ns=max(span_ns, 1),
        ns=dict(zip(STATES, totals)),
        data_ns=dict(zip(STATES, data_totals)),
        client_rtt_ms=cli_rtt,
        server_rtt_ms=srv_rtt,
        rtt_source=source,
        processing_median_ms=statistics.median(processing) if processing else 0.0,
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
