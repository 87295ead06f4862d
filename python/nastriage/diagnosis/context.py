"""What the rules read: the capture's tables, loaded once, grouped per connection.

Every table is optional (an engine without it, or a capture without such traffic): a rule
asks for what it needs and gets empty results, never an exception. Timestamps are integer
nanoseconds since the epoch. Nothing here parses packets.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from array import array
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from nastriage.capture import (
    column_chunks,
    read_columns,
    read_rows,
    readable_table,
    row_views,
    srt_rows,
)
from nastriage.diagnosis.events import Chunk, Event, EventsByStream, table_chunks
from nastriage.diagnosis.thresholds import DEFAULT, Thresholds

if TYPE_CHECKING:
    from nastriage.capture import Capture

__all__ = [
    "Context",
    "Event",
    "SeriesBins",
    "StreamInfo",
    "Tx",
    "ZeroWindowEpisode",
    "columns",
]

#: Protocols whose transactions the latency rules judge (not portmap, mount, ...).
STORAGE_PROTOCOLS = frozenset({"nfs", "smb2", "smb", "smb1", "smb3"})


#: Readers of a table's values (a :class:`~nastriage.capture.PlainTable` or a pyarrow
#: table), kept under their old names here for the rules.
columns = read_columns
rows = read_rows


_V = TypeVar("_V")


def _by_stream(table: Any) -> dict[int, Mapping[str, Any]]:
    """A per-connection table's rows (read in place, see ``RowView``) by stream (a row
    without one is left out)."""
    return _last_by_stream(read_columns(table, ("stream",))["stream"], row_views(table))


def _last_by_stream(
    streams: Iterable[Any], values: Iterable[_V], keep: Iterable[bool] | None = None
) -> dict[int, _V]:
    """Each stream's value, from a column of streams and one of values: its last row's
    (its first row gives its place in the mapping); rows without a stream, or not
    ``keep``, left out."""
    kept = keep if keep is not None else itertools.repeat(True)
    return {int(s): v for s, v, k in zip(streams, values, kept) if k and s is not None}


def _storage_concurrency(t: Any, values: Iterable[_V]) -> dict[int, _V]:
    """``values`` (one a row) of the ``concurrency`` rows of NFS/SMB connections, by
    stream."""
    cols = read_columns(t, ("stream", "protocol"))
    storage = (str(p or "") in STORAGE_PROTOCOLS for p in cols["protocol"])
    return _last_by_stream(cols["stream"], values, storage)


@dataclass
class Tx:
    """One NFS/SMB request (a ``transactions`` row), the fields the rules use."""

    protocol: str
    op: str
    stream: int
    transport: str
    req_first_frame: int
    req_first: int
    req_last: int
    reply_first_frame: int | None
    reply_first: int | None
    reply_last: int | None
    srt_ms: float | None
    server_time_ms: float | None
    request_bytes: int
    reply_bytes: int | None
    count: int | None
    status: int | None
    status_name: str | None
    rpc_status: str | None
    file_name: str | None
    share: str | None
    auth: str | None
    note: str | None

    @property
    def answered(self) -> bool:
        return self.reply_first is not None

    @property
    def data_bytes(self) -> int:
        """Bytes the request moves: READ/WRITE count, else what was on the wire."""
        if self.count is not None and self.count > 0:
            return int(self.count)
        return int(self.request_bytes) + int(self.reply_bytes or 0)


@dataclass
class ZeroWindowEpisode:
    stream: int
    #: Direction of the segments that advertised the zero window (the stalled receiver
    #: sends them): "s2c" means the server stopped reading.
    direction: str
    start: int
    end: int
    start_frame: int
    end_frame: int | None
    probes: int = 0
    resolved: bool = True

    @property
    def duration_ns(self) -> int:
        return max(0, self.end - self.start)


@dataclass
class StreamInfo:
    """One TCP connection: its ``conversations`` row and derived basics."""

    stream: int
    client_ip: str
    client_port: int
    server_ip: str
    server_port: int
    start: int
    end: int
    payload_c2s: int
    payload_s2c: int
    frames_c2s: int
    frames_s2c: int
    rst: bool
    fin: bool
    tcp: Mapping[str, Any] = field(default_factory=dict)

    @property
    def duration_ns(self) -> int:
        return max(0, self.end - self.start)

    @property
    def payload(self) -> int:
        return self.payload_c2s + self.payload_s2c

    @property
    def data_direction(self) -> str:
        return "s2c" if self.payload_s2c >= self.payload_c2s else "c2s"

    def host(self, direction: str) -> str:
        """The host that sends in ``direction``."""
        return self.client_ip if direction == "c2s" else self.server_ip

    def role(self, direction: str) -> str:
        return "client" if direction == "c2s" else "server"

    def payload_dir(self, direction: str) -> int:
        return self.payload_c2s if direction == "c2s" else self.payload_s2c

    def label(self) -> str:
        c = f"[{self.client_ip}]" if ":" in self.client_ip else self.client_ip
        s = f"[{self.server_ip}]" if ":" in self.server_ip else self.server_ip
        return f"{c}:{self.client_port} \u2192 {s}:{self.server_port}"


def reverse(direction: str) -> str:
    return "s2c" if direction == "c2s" else "c2s"


def _pick(row: Mapping[str, Any] | None, *names: str) -> Any:
    if not row:
        return None
    for n in names:
        v = row.get(n)
        if v is not None:
            return v
    return None


_TX_COLUMNS = (
    "protocol",
    "op",
    "stream",
    "transport",
    "request_first_frame",
    "request_first_time",
    "request_last_time",
    "reply_first_frame",
    "reply_first_time",
    "reply_last_time",
    "srt_ms",
    "server_time_ms",
    "request_bytes",
    "reply_bytes",
    "count",
    "status",
    "status_name",
    "rpc_status",
    "file_name",
    "share",
    "auth",
    "note",
)


def _txs(t: Any) -> list[Tx]:
    """``Tx`` objects for the rows of a ``transactions`` table, in request order."""
    out: list[Tx] = []
    c = columns(t, _TX_COLUMNS)
    for i in range(t.num_rows):
        if c["request_first_time"][i] is None or c["stream"][i] is None:
            continue
        tx = Tx(
            protocol=str(c["protocol"][i] or ""),
            op=str(c["op"][i] or ""),
            stream=int(c["stream"][i]),
            transport=str(c["transport"][i] or "").lower(),
            req_first_frame=int(c["request_first_frame"][i] or 0),
            req_first=int(c["request_first_time"][i]),
            req_last=int(c["request_last_time"][i] or c["request_first_time"][i]),
            reply_first_frame=c["reply_first_frame"][i],
            reply_first=c["reply_first_time"][i],
            reply_last=c["reply_last_time"][i] or c["reply_first_time"][i],
            srt_ms=c["srt_ms"][i],
            server_time_ms=c["server_time_ms"][i],
            request_bytes=int(c["request_bytes"][i] or 0),
            reply_bytes=c["reply_bytes"][i],
            count=c["count"][i],
            status=c["status"][i],
            status_name=c["status_name"][i],
            rpc_status=c["rpc_status"][i],
            file_name=c["file_name"][i],
            share=c["share"][i],
            auth=c["auth"][i],
            note=c["note"][i],
        )
        out.append(tx)
    out.sort(key=lambda x: x.req_first)
    return out


#: The engine's summary tables (see ``Context.summarised``).
_SUMMARIES = ("time_profile", "failed_transactions", "unanswered_requests", "srt", "concurrency")

_ENCRYPTED_WARNING = re.compile(r"tcp\.stream (\d+): (\d+) encrypted SMB3 message")


_NAN = math.nan


class SeriesBins:
    """One direction's ``tcp_series`` bins that carried data, as columns (a long capture
    has tens of thousands of bins); NaN where the table has no value."""

    __slots__ = ("interval_ns", "rate", "window")

    def __init__(self) -> None:
        self.interval_ns = array("q")
        self.rate = array("d")  # throughput_bps
        self.window = array("d")  # receive_window


def _bins_of(group: list[Any]) -> SeriesBins:
    """The bins of one engine group's ``[interval_ns, throughput bytes, window bytes]``
    (see :meth:`nastriage.capture.Capture.tcp_series_by_direction`)."""
    interval_ns, rate, window = group
    bins = SeriesBins()
    bins.rate.frombytes(rate)
    bins.window.frombytes(window)
    bins.interval_ns.extend(itertools.repeat(interval_ns, len(bins.rate)))
    return bins


def median(values: Sequence[float]) -> float:
    """The median of (non-empty) ``values`` as :func:`statistics.median` gives it: the
    middle value, or the mean of the middle two. (Not that module: importing it, with its
    fractions and decimals, was a tenth of the rules' start-up, paid by every run.)"""
    ordered = sorted(values)
    i = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[i]
    return (ordered[i - 1] + ordered[i]) / 2


#: Bytes of regrouped ``tcp_events`` ranges a context keeps from one reading for the
#: next (:meth:`Context.event_chunks`): a lossy copy of a GiB has about 2 MB of them.
EVENT_BYTES_KEPT = 8 << 20

#: The most bytes one event takes in a regrouped range: a row's columns (frame, time,
#: code, seconds, detail, and for a full list a duplicate ACK's two numbers), or a
#: duplicate ACK's run of its own (six numbers). Whether a reading is kept is decided
#: from it and the table's length before it starts, so that a reading that will not fit
#: does not hold memory on the way.
EVENT_BYTES_MOST = 50


def _chunk_bytes(chunk: Chunk) -> int:
    """About how many bytes a regrouped range holds: its columns' bytes, and a word per
    detail (the texts are mostly shared)."""
    n = 0
    for item in chunk[1].values():
        for x in item:
            if isinstance(x, (bytes, bytearray)):
                n += len(x)
            elif isinstance(x, list):
                n += 8 * len(x)
            elif isinstance(x, tuple):
                n += sum(len(y) for y in x if isinstance(y, (bytes, bytearray)))
    return n


class Context:
    """The tables of one capture, for the rules. Cheap to create; loads lazily."""

    def __init__(self, capture: Capture, thresholds: Thresholds = DEFAULT) -> None:
        self.capture = capture
        self.th = thresholds
        self._names = set(capture.table_names)
        self._cache: dict[str, Any] = {}
        #: Rows of ``tcp_events`` per range in :meth:`event_chunks` (tests make it small
        #: so that runs go on from one range to the next).
        self.event_rows = 16384
        #: Bytes of ranges kept from a reading of :meth:`event_chunks` for the next.
        self.event_bytes_kept = EVENT_BYTES_KEPT
        self._kept_chunks: dict[str, list[Chunk]] = {}

    # -- raw tables ------------------------------------------------------------------------

    def has(self, name: str) -> bool:
        return name in self._names

    @property
    def summarised(self) -> bool:
        """The engine's summaries of the transactions are here (``time_profile``,
        ``failed_transactions``, ``unanswered_requests``, with ``srt`` and ``concurrency``):
        the rules read them and never load every request. Hand-made tables (tests, older
        engines) lack them; the rules then derive the same from ``transactions``."""
        return all(self.has(n) for n in _SUMMARIES)

    def table(self, name: str) -> Any | None:
        """The named table for reading with :func:`columns` and :func:`rows` (a
        :class:`PlainTable` from the engine, no pyarrow needed; a pyarrow table from a
        stand-in capture); None when the capture has no such table."""
        if name not in self._names:
            return None
        return readable_table(self.capture, name)

    def arrow(self, name: str) -> Any | None:
        """The named table as a pyarrow table (for filtering with ``pyarrow.compute``)."""
        if name not in self._names:
            return None
        return self.capture.table(name)

    def _cached(self, key: str, build: Any) -> Any:
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    # -- conversations -----------------------------------------------------------------------

    @property
    def streams(self) -> dict[int, StreamInfo]:
        return self._cached("streams", self._build_streams)  # type: ignore[no-any-return]

    def _build_streams(self) -> dict[int, StreamInfo]:
        out: dict[int, StreamInfo] = {}
        conv = self.table("conversations")
        if conv is None:
            return out
        names = (
            "stream",
            "client_ip",
            "client_port",
            "server_ip",
            "server_port",
            "start",
            "end",
            "payload_bytes_c2s",
            "payload_bytes_s2c",
            "frames_c2s",
            "frames_s2c",
            "rst",
            "fin",
        )
        # (Unpacked from the columns: through a dict per row, the lookups were most of the
        # time on thousands of connections.)
        cols = read_columns(conv, names)
        for (stream, client_ip, client_port, server_ip, server_port, start, end, payload_c2s,
             payload_s2c, frames_c2s, frames_s2c, rst, fin) in zip(
            *(cols[n] for n in names)
        ):  # fmt: skip
            s = int(stream)
            start = int(start or 0)
            out[s] = StreamInfo(
                stream=s,
                client_ip=str(client_ip or "?"),
                client_port=int(client_port or 0),
                server_ip=str(server_ip or "?"),
                server_port=int(server_port or 0),
                start=start,
                end=int(end if end is not None else start),
                payload_c2s=int(payload_c2s or 0),
                payload_s2c=int(payload_s2c or 0),
                frames_c2s=int(frames_c2s or 0),
                frames_s2c=int(frames_s2c or 0),
                rst=bool(rst),
                fin=bool(fin),
            )
        tc = self.table("tcp_connections")
        if tc is not None:
            for stream, tcp_row in _by_stream(tc).items():
                if stream in out:
                    out[stream].tcp = tcp_row
        return out

    def total_payload(self) -> int:
        return sum(s.payload for s in self.streams.values())

    # -- tcp_events --------------------------------------------------------------------------

    @property
    def events(self) -> EventsByStream:
        """stream -> its ``tcp_events`` in time order (made anew at each lookup, from
        compact columns: see :mod:`nastriage.diagnosis.events`)."""
        return self._cached("events", self._build_events)  # type: ignore[no-any-return]

    def _build_events(self) -> EventsByStream:
        return EventsByStream.from_grouped(
            self.event_chunks("rows+runs"), reread=lambda: self.event_chunks("all")
        )

    def event_chunks(self, part: str) -> Iterator[Chunk]:
        """The ``tcp_events`` table regrouped by connection a range of rows at a time
        (see :data:`~nastriage.diagnosis.events.Chunk`; ``part`` as in
        :data:`~nastriage.diagnosis.events.PARTS`): by the engine for a live analysis,
        else from the table. The loss analysis reads them twice: a reading that fits
        :attr:`event_bytes_kept` (judged from the table's length, and checked as it
        goes) is kept for the next ones (not made again), a longer one is not (what is
        kept stays bounded)."""
        kept = self._kept_chunks.get(part)
        if kept is not None:
            return iter(kept)
        found = self._event_chunks(part)
        if self._event_count() * EVENT_BYTES_MOST > self.event_bytes_kept:
            return found
        return self._keeping(part, found)

    def _event_count(self) -> int:
        def count() -> int:
            table = self.table("tcp_events")
            return 0 if table is None else int(table.num_rows)

        return self._cached("event_count", count)  # type: ignore[no-any-return]

    def _keeping(self, part: str, chunks: Iterator[Chunk]) -> Iterator[Chunk]:
        kept: list[Chunk] | None = []
        size = 0
        for chunk in chunks:
            if kept is not None:
                size += _chunk_bytes(chunk)
                if size > self.event_bytes_kept:
                    kept = None
                else:
                    kept.append(chunk)
            yield chunk
        if kept is not None:
            self._kept_chunks[part] = kept

    def _event_chunks(self, part: str) -> Iterator[Chunk]:
        # A live analysis regroups the events itself (see Capture.tcp_events_by_stream).
        grouped = getattr(self.capture, "tcp_events_by_stream", None)
        rows = self.event_rows
        found: Iterator[Chunk] | None = (
            grouped(rows=rows, part=part) if grouped is not None else None
        )
        if found is not None:
            return found
        table = self.table("tcp_events")
        return table_chunks(table, rows, part) if table is not None else iter(())

    # -- tcp_series --------------------------------------------------------------------------

    @property
    def series(self) -> dict[tuple[int, str], SeriesBins]:
        """(stream, sender direction) -> its ``tcp_series`` bins that carried data, every
        direction's at once, from the table: for tables that do not come from a live
        analysis (which hands over :attr:`series_windows` and :meth:`series_bins` itself:
        with thousands of connections every direction's bins were tens of MB of Python
        values)."""
        return self._cached("series", self._build_series)  # type: ignore[no-any-return]

    @property
    def series_windows(self) -> dict[tuple[int, str], float]:
        """(stream, sender direction) -> the median receive window offered to it over
        its ``tcp_series`` bins that carried data (directions without a window left
        out)."""
        return self._cached("series_windows", self._build_series_windows)  # type: ignore[no-any-return]

    def _build_series_windows(self) -> dict[tuple[int, str], float]:
        # A live analysis takes the medians itself, a direction at a time.
        medians = getattr(self.capture, "tcp_series_window_medians", None)
        found = medians() if medians is not None else None
        if found is not None:
            return {(stream, d): m for stream, d, m in found}
        out: dict[tuple[int, str], float] = {}
        for key, bins in self.series.items():
            windows = [w for w in bins.window if not math.isnan(w)]
            if windows:
                out[key] = median(windows)
        return out

    def series_bins(self, stream: int, direction: str) -> SeriesBins | None:
        """One sender direction's ``tcp_series`` bins that carried data (None without
        any): from a live analysis, that connection's alone."""
        per_stream: dict[int, dict[str, SeriesBins]] = self._cached("series_of", dict)
        found = per_stream.get(stream)
        if found is None:
            grouped = getattr(self.capture, "tcp_series_by_direction", None)
            groups = grouped(stream) if grouped is not None else None
            if groups is None:  # (tables not from a live analysis)
                return self.series.get((stream, direction))
            found = per_stream[stream] = {d: _bins_of(group) for _, d, *group in groups}
        return found.get(direction)

    def _build_series(self) -> dict[tuple[int, str], SeriesBins]:
        out: dict[tuple[int, str], SeriesBins] = {}
        t = self.table("tcp_series")
        if t is None:
            return out
        names = ("stream", "direction", "interval_ns", "bytes", "throughput_bps", "receive_window")
        for c in column_chunks(t, names):
            for s, d, iv, b, rate, window in zip(*(c[n] for n in names)):
                if not b:
                    continue
                key = (int(s), str(d))
                bins = out.get(key)
                if bins is None:
                    bins = out[key] = SeriesBins()
                bins.interval_ns.append(int(iv or 0))
                bins.rate.append(_NAN if rate is None else float(rate))
                bins.window.append(_NAN if window is None else float(window))
        return out

    def stream_events(self, stream: int, direction: str | None = None, *kinds: str) -> list[Event]:
        evs = self.events.get(stream, [])
        return [
            e
            for e in evs
            if (direction is None or e.direction == direction) and (not kinds or e.kind in kinds)
        ]

    # -- transactions ------------------------------------------------------------------------

    @property
    def transactions(self) -> dict[int, list[Tx]]:
        """TCP transactions by ``tcp.stream`` (UDP ones are in :attr:`all_transactions`)."""

        def build() -> dict[int, list[Tx]]:
            out: dict[int, list[Tx]] = defaultdict(list)
            for tx in self.all_transactions:
                if tx.transport in ("tcp", ""):
                    out[tx.stream].append(tx)
            return out

        return self._cached("tx", build)  # type: ignore[no-any-return]

    @property
    def all_transactions(self) -> list[Tx]:
        """Every transaction (TCP and UDP), in request order."""
        return self._cached("all_tx", self._build_tx)  # type: ignore[no-any-return]

    def _build_tx(self) -> list[Tx]:
        t = self.table("transactions")
        return [] if t is None else _txs(t)

    def stream_transactions(self, stream: int) -> list[Tx]:
        """One connection's TCP transactions, in request order. Built from the rows of that
        stream only (the whole table becomes Python objects only if a rule asks for all)."""
        if "tx" in self._cache:
            return list(self.transactions.get(stream, []))

        def build() -> list[Tx]:
            t = self.arrow("transactions")
            if t is None or "stream" not in t.schema.names:
                return []
            import pyarrow.compute as pc

            rows = t.filter(pc.equal(t.column("stream"), stream))
            return [x for x in _txs(rows) if x.transport in ("tcp", "")]

        return list(self._cached(f"tx:{stream}", build))

    def unanswered_storage_frames(self, stream: int) -> list[int] | None:
        """Frames of the NFS/SMB requests of one connection that got no reply, in request
        order; None when the connection carried no NFS/SMB request."""
        if self.summarised:
            if stream not in self.concurrency:
                return None
            return self._cached("unanswered", self._build_unanswered).get(stream, [])  # type: ignore[no-any-return]
        txs = self.storage_transactions(stream)
        if not txs:
            return None
        return [t.req_first_frame for t in txs if not t.answered]

    def _build_unanswered(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = defaultdict(list)
        t = self.table("unanswered_requests")
        if t is None:
            return out
        c = columns(t, ("stream", "transport", "protocol", "request_first_frame"))
        for stream, transport, protocol, frame in zip(
            c["stream"], c["transport"], c["protocol"], c["request_first_frame"]
        ):
            if transport == "tcp" and protocol in STORAGE_PROTOCOLS:
                out[int(stream)].append(int(frame))
        return out

    def has_tcp_transactions(self) -> bool:
        """Whether the capture holds any NFS/RPC or SMB transaction over TCP."""
        if self.summarised:
            # The concurrency table has a row per TCP connection with requests.
            conc = self.table("concurrency")
            return conc is not None and conc.num_rows > 0
        if "tx" in self._cache:
            return bool(self.transactions)
        t = self.arrow("transactions")
        if t is None or t.num_rows == 0:
            return False
        if "transport" not in t.schema.names:
            return True
        import pyarrow as pa
        import pyarrow.compute as pc

        transport = pc.utf8_lower(t.column("transport"))
        return bool(pc.any(pc.is_in(transport, value_set=pa.array(["tcp", ""]))).as_py())

    def transaction_totals(self) -> tuple[int, float]:
        """(requests, summed response time in ms) over every transaction, TCP and UDP."""
        if self.summarised:
            calls = busy = 0.0
            # (The operations' rows alone: the client, server and file rows of thousands
            # of connections are not made for this.)
            for r in srt_rows(self.capture, "op"):
                calls += int(r["calls"] or 0)
                busy += float(r["sum_ms"] or 0.0)
            return int(calls), busy
        t = self.arrow("transactions")
        if t is None or t.num_rows == 0:
            return 0, 0.0
        import pyarrow.compute as pc

        names = set(t.schema.names)
        kept = t
        for name in ("request_first_time", "stream"):
            if name not in names:
                return 0, 0.0  # rows without them are not transactions for the rules
            kept = kept.filter(pc.is_valid(kept.column(name)))
        total = pc.sum(kept.column("srt_ms")).as_py() if "srt_ms" in names else None
        return kept.num_rows, float(total or 0.0)

    def failed_transactions(self) -> list[Tx]:
        """Transactions answered with an error (a non-zero status or an RPC-level failure),
        TCP and UDP, in request order: only these rows become Python objects."""
        if self.summarised:
            return _txs(self.table("failed_transactions"))
        t = self.arrow("transactions")
        if t is None or t.num_rows == 0:
            return []
        import pyarrow as pa
        import pyarrow.compute as pc

        names = set(t.schema.names)
        failed = pa.array([False] * t.num_rows)
        if "rpc_status" in names:
            failed = pc.or_(failed, pc.is_valid(t.column("rpc_status")))
        if "status" in names:
            status = t.column("status")
            failed = pc.or_(failed, pc.fill_null(pc.not_equal(status, 0), False))
        return _txs(t.filter(failed))

    def transaction_count(self, stream: int) -> int:
        """Number of TCP transactions of one connection."""
        summary = self._stream_rows()
        if summary is not None:
            return int(summary[stream]["transactions"]) if stream in summary else 0
        return len(self.stream_transactions(stream))

    def storage_transactions(self, stream: int) -> list[Tx]:
        return [t for t in self.stream_transactions(stream) if t.protocol in STORAGE_PROTOCOLS]

    def storage_protocols(self, stream: int) -> list[str]:
        """The NFS/SMB protocols of one connection's transactions, sorted."""
        summary = self._stream_rows()
        if summary is not None:
            return [str(p) for p in summary.get(stream, {}).get("storage_protocols", [])]
        return sorted({t.protocol for t in self.storage_transactions(stream)})

    def metadata_ops(self, stream: int) -> tuple[list[tuple[str, int, float]], list[int]]:
        """One connection's NFS/SMB requests that move no file data: (operation, requests,
        summed response time in ms) in order of first appearance, the time summed in request
        order (an unanswered request adds nothing); and the first 30 such requests' frames."""
        summary = self._stream_rows()
        if summary is not None:
            row = summary.get(stream)
            if row is None:
                return [], []
            ops = list(
                zip(
                    (str(o) for o in row["metadata_ops"]),
                    (int(n) for n in row["metadata_calls"]),
                    (float(v) for v in row["metadata_srt_ms"]),
                )
            )
            return ops, [int(f) for f in row["metadata_first_frames"]]
        from nastriage.diagnosis.timeline import is_data_op

        calls: dict[str, int] = {}
        srt: dict[str, float] = {}
        first: list[int] = []
        for t in self.storage_transactions(stream):
            if is_data_op(t.op):
                continue
            calls[t.op] = calls.get(t.op, 0) + 1
            srt[t.op] = srt.get(t.op, 0.0) + (t.srt_ms or 0.0)
            if len(first) < 30:
                first.append(t.req_first_frame)
        return [(op, n, srt[op]) for op, n in calls.items()], first

    def metadata_ops_of(
        self, streams: Iterable[int]
    ) -> Iterator[tuple[list[tuple[str, int, float]], list[int]]]:
        """:meth:`metadata_ops` of each of ``streams``, in their order: from the engine's
        ``stream_transactions`` columns read at once (row by row, the lookups took most of
        the metadata rule's time on thousands of connections)."""
        t = self.table("stream_transactions")
        if t is None:
            yield from (self.metadata_ops(s) for s in streams)
            return
        names = ("stream", "metadata_ops", "metadata_calls", "metadata_srt_ms",
                 "metadata_first_frames")  # fmt: skip
        c = read_columns(t, names)
        # (The last row of a stream, as the rows by stream keep it.)
        at = _last_by_stream(c["stream"], range(len(c["stream"])))
        ops, calls, srt, first = (c[n] for n in names[1:])
        for s in streams:
            i = at.get(s)
            if i is None:
                yield [], []
                continue
            yield (
                list(zip(map(str, ops[i]), map(int, calls[i]), map(float, srt[i]))),
                [int(f) for f in first[i]],
            )

    def udp_transaction_count(self) -> int:
        """Transactions over UDP (NFS/RPC), from the engine's counters when it has them."""
        if self.has("stream_transactions"):
            return int(self.capture.app_stats.get("udp_transactions", 0))
        return sum(1 for t in self.all_transactions if t.transport == "udp")

    def _stream_rows(self) -> dict[int, Mapping[str, Any]] | None:
        """The engine's ``stream_transactions`` rows by stream (a TCP connection without
        transactions has none); None without the table (the callers then read
        ``transactions``)."""

        def build() -> dict[int, Mapping[str, Any]] | None:
            t = self.table("stream_transactions")
            return None if t is None else _by_stream(t)

        return self._cached("stream_rows", build)  # type: ignore[no-any-return]

    # -- time profiles -----------------------------------------------------------------------

    def time_profile_table(self) -> Any | None:
        """The engine's ``time_profile`` table (see :meth:`table`); None without it (the
        rules then derive the profiles from the transactions, ``timeline.py``)."""
        t = self.table("time_profile")
        return t if t is not None and self.summarised else None

    def time_profile_rows(self) -> dict[int, Mapping[str, Any]] | None:
        """Rows of :meth:`time_profile_table` by stream, read in place; None without it."""

        def build() -> dict[int, Mapping[str, Any]] | None:
            t = self.time_profile_table()
            return None if t is None else _by_stream(t)

        return self._cached("time_profile", build)  # type: ignore[no-any-return]

    # -- concurrency -------------------------------------------------------------------------

    @property
    def concurrency(self) -> dict[int, Mapping[str, Any]]:
        def build() -> dict[int, Mapping[str, Any]]:
            t = self.table("concurrency")
            if t is None:
                return {}
            return _storage_concurrency(t, row_views(t))

        return self._cached("concurrency", build)  # type: ignore[no-any-return]

    def concurrency_values(self, names: tuple[str, ...]) -> dict[int, tuple[Any, ...]]:
        """Those columns of the rows of :attr:`concurrency`, by stream, read at once (row
        by row, the lookups took most of a rule's time on thousands of connections)."""
        t = self.table("concurrency")
        if t is None:
            return {}
        cols = read_columns(t, names)
        return _storage_concurrency(t, zip(*(cols[n] for n in names)))

    # -- RTT and capture point -----------------------------------------------------------------

    def rtt_ms(self, stream: int) -> tuple[float | None, str]:
        """The client-server round trip (ms) and where the figure comes from.

        ``tcp_connections``: the smaller of the handshake's and the smallest data/ACK
        sample, else the median; otherwise the round trips estimated from the transactions
        (:meth:`side_rtts_ms`); None when nothing tells."""
        handshake, smallest, median = self._tcp_rtts().get(stream, (None, None, None))
        found = [
            (float(v), name)
            for v, name in ((handshake, "rtt_handshake_ms"), (smallest, "rtt_min_ms"))
            if v is not None and float(v) > 0
        ]
        if found:  # the smaller: a retransmitted SYN or SYN/ACK inflates the handshake's
            v, name = min(found)
            return v, f"tcp_connections.{name}"
        if median is not None and float(median) > 0:
            return float(median), "tcp_connections.rtt_median_ms"
        cli, srv, source = self.side_rtts_ms(stream)
        if cli + srv > 0 and self.transaction_count(stream) >= 3:
            return cli + srv, source
        return None, "unknown"

    def path_rtt_ms(self, stream: int) -> float | None:
        return self.rtt_ms(stream)[0]

    def _tcp_rtts(self) -> dict[int, tuple[Any, Any, Any]]:
        """Each connection's ``tcp_connections`` handshake, smallest and median round trip,
        by stream, for the connections of :attr:`streams` (those rows are their ``tcp``),
        read from the columns at once: row by row, the lookups took most of
        :meth:`rtt_ms` on thousands of connections."""

        def build() -> dict[int, tuple[Any, Any, Any]]:
            tc = self.table("tcp_connections")
            if tc is None:
                return {}
            names = ("stream", "rtt_handshake_ms", "rtt_min_ms", "rtt_median_ms")
            cols = read_columns(tc, names)
            streams = self.streams
            return {
                int(s): (h, m, med)
                for s, h, m, med in zip(*(cols[n] for n in names))
                if s is not None and int(s) in streams
            }

        return self._cached("tcp_rtts", build)  # type: ignore[no-any-return]

    def side_rtts_ms(self, stream: int) -> tuple[float, float, str]:
        """Network round trips from the capture point to the client and to the server (ms).

        From ``tcp_connections`` (the smaller of the handshake's and the data's figure:
        a host slow to acknowledge, like a starved server, inflates the data's). Without
        it, the server side is the fastest server response (an upper bound: it includes
        the fastest processing) and the client side the fastest turnaround from a reply to
        the next request (a lower bound: about 0 at a client-side capture).
        """
        row = (self.time_profile_rows() or {}).get(stream)
        if row is not None:  # the engine's figures, computed the same way
            return float(row["client_rtt_ms"]), float(row["server_rtt_ms"]), str(row["rtt_source"])
        info = self.streams.get(stream)
        tcp = info.tcp if info else {}
        floor = self._srt_floor_ms(stream)

        def smallest(*values: Any) -> float | None:
            vals = [float(v) for v in values if v is not None and float(v) >= 0]
            return min(vals) if vals else None

        cli = smallest(_pick(tcp, "rtt_handshake_client_ms"), _pick(tcp, "rtt_client_side_ms"))
        srv = smallest(_pick(tcp, "rtt_handshake_server_ms"), _pick(tcp, "rtt_server_side_ms"))
        if cli is not None and srv is not None:
            srv = smallest(srv, floor)
            return cli, float(srv or 0.0), "tcp_connections"
        gap = self._turnaround_floor_ms(stream)
        return float(gap or 0.0), float(floor or 0.0), "fastest response and turnaround"

    def _srt_floor_ms(self, stream: int) -> float | None:
        summary = self._stream_rows()
        if summary is not None:
            v = _pick(summary.get(stream), "server_time_floor_ms")
            return None if v is None else float(v)
        times = [
            t.server_time_ms
            for t in self.stream_transactions(stream)
            if t.server_time_ms is not None and t.server_time_ms >= 0
        ]
        if len(times) < 3:
            return None
        return float(min(times))

    def _turnaround_floor_ms(self, stream: int) -> float | None:
        """Shortest time from a reply's last segment to the next request's first one.

        A client that sends a request when a reply arrives shows, at a server-side
        capture, the round trip between the capture point and the client (plus its
        turnaround); at a client-side capture about 0. A lower bound of the client-side
        round trip either way (it is small whenever the client pipelines requests)."""
        summary = self._stream_rows()
        if summary is not None:
            v = _pick(summary.get(stream), "turnaround_floor_ms")
            return None if v is None else float(v)
        txs = self.stream_transactions(stream)
        if len(txs) < 4:
            return None
        starts = sorted(t.req_first for t in txs)
        gaps = []
        for t in txs:
            if t.reply_last is None:
                continue
            i = bisect.bisect_right(starts, t.reply_last)
            if i < len(starts):
                gaps.append(starts[i] - t.reply_last)
        if len(gaps) < 3:
            return None
        return min(gaps) / 1e6

    def capture_point(self, stream: int) -> str | None:
        info = self.streams.get(stream)
        v = _pick(info.tcp if info else None, "capture_point")
        return str(v) if v is not None else None

    # -- zero windows ------------------------------------------------------------------------

    @property
    def zero_window_episodes(self) -> dict[int, list[ZeroWindowEpisode]]:
        return self._cached("zw", self._build_zw)  # type: ignore[no-any-return]

    def _build_zw(self) -> dict[int, list[ZeroWindowEpisode]]:
        out: dict[int, list[ZeroWindowEpisode]] = defaultdict(list)
        t = self.table("zero_window_episodes")
        if t is not None and self.has("tcp_connections"):
            for r in rows(t):
                host = _pick(r, "host")
                stalled = _pick(r, "stalled_direction")
                if host in ("client", "server"):
                    direction = "c2s" if host == "client" else "s2c"
                elif stalled in ("c2s", "s2c"):
                    direction = reverse(str(stalled))
                else:
                    continue
                start = _pick(r, "start")
                if start is None:
                    continue
                end = _pick(r, "end")
                out[int(r["stream"])].append(
                    ZeroWindowEpisode(
                        stream=int(r["stream"]),
                        direction=direction,
                        start=int(start),
                        end=int(end if end is not None else start),
                        start_frame=int(_pick(r, "start_frame") or 0),
                        end_frame=_pick(r, "end_frame"),
                        probes=int(_pick(r, "probes") or 0),
                        resolved=bool(r.get("resolved", True)),
                    )
                )
            return out
        # From tcp_events: a zero window opens an episode, the same host's next window
        # update (a pure ACK re-opening the window) closes it.
        for stream in self.events:
            info = self.streams.get(stream)
            open_: dict[str, ZeroWindowEpisode] = {}
            # (Duplicate ACKs play no part: they are not read again.)
            for e in self.events.without_dup_acks(stream):
                if e.kind == "zero_window" and e.direction not in open_:
                    open_[e.direction] = ZeroWindowEpisode(
                        stream, e.direction, e.time, e.time, e.frame, None
                    )
                elif e.kind in ("zero_window_probe", "keep_alive"):
                    ep = open_.get(reverse(e.direction))
                    if ep is not None:
                        ep.probes += 1
                elif e.kind == "window_update" and e.direction in open_:
                    ep = open_.pop(e.direction)
                    ep.end, ep.end_frame = e.time, e.frame
                    out[stream].append(ep)
            for ep in open_.values():
                ep.end = max(ep.start, info.end if info else ep.start)
                ep.resolved = False
                out[stream].append(ep)
        return out

    # -- encrypted SMB -----------------------------------------------------------------------

    def encrypted_smb_streams(self) -> dict[int, int]:
        """stream -> encrypted SMB3 messages (from the engine's warnings or the tables)."""
        out: dict[int, int] = {}
        for w in self.capture.warnings:
            m = _ENCRYPTED_WARNING.search(w)
            if m:
                out[int(m.group(1))] = out.get(int(m.group(1)), 0) + int(m.group(2))
        if self.summarised:
            # The engine cannot turn encrypted messages into transactions: its warnings
            # are the whole story (and its transaction table is not loaded for it).
            return out
        t = self.arrow("transactions")
        if t is None or not {"auth", "stream", "transport"} <= set(t.schema.names):
            return out
        import pyarrow.compute as pc

        encrypted: dict[int, int] = defaultdict(int)
        rows_ = t.filter(pc.equal(pc.utf8_lower(t.column("auth")), "encrypted"))
        for tx in _txs(rows_):
            if tx.transport in ("tcp", ""):
                encrypted[tx.stream] += 1
        for stream, n in encrypted.items():
            out.setdefault(stream, n)
        return out
