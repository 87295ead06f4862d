"""Type stubs for the Rust engine binding (crates/py). The binding is thin:
it runs the one-pass analysis and hands back metadata and Arrow tables."""

from typing import Any, Callable, Protocol

__version__: str
#: "profile-guided" (optimised from a profile by the package's build backend) or "plain".
__build__: str

class CaptureError(Exception):
    """Unreadable input. ``str(err)`` is one line: ``PATH: byte offset N: message``.
    Attributes ``path`` (str) and ``offset`` (int) are set."""

    path: str
    offset: int

class ArrowStream(Protocol):
    """Anything exposing the Arrow PyCapsule stream interface."""

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...

class TableStream:
    """One result table: an Arrow C stream, and its columns as plain Python values."""

    #: Rows in the table.
    num_rows: int
    #: Column names, in table order.
    column_names: list[str]

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...
    def columns(
        self, names: list[str] | None = None, start: int = 0, stop: int | None = None
    ) -> dict[str, list[object]]:
        """The named columns (all by default) as lists, by name; names the table lacks are
        left out. Timestamps as integer nanoseconds since the epoch, nulls None. ``start``
        and ``stop`` (not negative) choose rows as a slice does, so that a long table can be
        read a piece at a time."""
    def value(self, column: int, row: int) -> object:
        """The value at ``column`` (its position in ``column_names``) and ``row``, as
        :meth:`columns` gives it, the table's other values left in place (``RowView``).
        IndexError past the table."""

class Analysis:
    """Result of one analysis run over one or more capture files (merged).

    The tables derived from the transactions (``srt``, ``concurrency``,
    ``outstanding_*``, ``time_profile``, ``stream_transactions``,
    ``failed_transactions``, ``unanswered_requests``) and ``app_stats`` are made after
    the pass on a thread of the engine's own: reading one waits for them (without the
    GIL); the other tables can be read meanwhile."""

    #: One dict per input file, in the order given:
    #: {"path": str, "format": "pcap"|"pcapng"|"snoop",
    #:  "format_description": str, "compression": "none"|"gzip"|"zstd",
    #:  "link_types": list[str], "frames": int, "bytes": int (sum of frame lengths on the wire),
    #:  "captured_bytes": int, "first_time_ns": int | None, "last_time_ns": int | None,
    #:  "truncated_frames": int (caplen < wire length), "warnings": list[str]}
    captures: list[dict[str, object]]
    #: One dict per protocol seen, most frames first:
    #: {"protocol": str, "frames": int, "bytes": int}. Names: "ethernet", "vlan",
    #: "ipv4", "ipv6", "ip-fragment", "tcp", "udp", "icmp", "icmpv6", "arp",
    #: "ethertype-0x88cc", "ip-proto-47", "linktype-253", "malformed-ipv4", ...
    protocols: list[dict[str, object]]
    #: Warnings from all files and stages, one line each.
    warnings: list[str]
    #: Total frames over all inputs.
    frames: int
    #: Counters of the NFS/SMB parsers: "transactions", "unanswered_requests",
    #: "orphan_replies", "resyncs", "smb_encrypted_messages",
    #: "smb_compressed_messages", "smb1_messages".
    app_stats: dict[str, int]

    def table_names(self) -> list[str]: ...
    def wait_for_digest(self) -> None:
        """Wait until the tables derived from the transactions are made (reading one of
        them waits too); the GIL is released meanwhile."""
    def table(self, name: str) -> TableStream:
        """An Arrow C stream over the named table (e.g. "conversations").
        Each call gives a fresh stream; pyarrow: ``pa.table(analysis.table(n))``."""
    def table_rows(self, name: str, start: int, stop: int) -> TableStream:
        """Rows ``start..stop`` (clamped) of the named table, made from those rows alone
        where the engine can (``tcp_events``, which a lossy capture makes long)."""
    def table_len(self, name: str) -> int:
        """Rows of the named table, without making it where the engine can."""
    def srt_rows(self, breakdown: str) -> TableStream:
        """The ``srt`` rows of one breakdown ("op", "client", "server", "file", "status"),
        in the table's order, made without the other breakdowns' rows (KeyError for
        another name)."""
    def tcp_series_by_direction(
        self, stream: int | None = None
    ) -> list[tuple[int, str, int, bytes, bytes]]:
        """The ``tcp_series`` rows that carried payload, grouped by (stream, direction)
        in table order, without making the table: ``(stream, direction, interval_ns,
        throughput_bps, receive_window)``, the last two native-endian float64 bytes
        (NaN where no window was seen); ``stream``: that connection's only."""
    def tcp_series_window_medians(self) -> list[tuple[int, str, float]]:
        """The median receive window offered to each sender direction over its
        ``tcp_series`` bins with payload (those that saw a window): ``(stream, direction,
        median)`` in table order; the median of an even count is the mean of the middle
        two, as ``statistics.median``."""
    def tcp_events_by_stream(
        self, start: int, stop: int, labels: list[tuple[str, str]], part: str = "all"
    ) -> tuple[
        list[tuple[str, str]],
        dict[
            int,
            tuple[
                bytes,
                bytes,
                bytes,
                list[str | None],
                bytes,
                bytes,
                bool,
                tuple[
                    bytes,
                    bytes,
                    bytes,
                    bytes,
                    bytes,
                    bytes,
                    bool,
                    list[tuple[int, int, int, int, int | None, int, int, int, bool]],
                ]
                | None,
                bytes,
            ],
        ],
    ]:
        """Rows ``start..stop`` (clamped) of ``tcp_events`` regrouped by connection: the
        (direction, kind) labels numbered by first appearance (``labels``, those of the
        rows before, and those these rows add; every event's, whatever ``part``), and per
        stream (in order of its first event in these rows) its frames, times (native
        int64 bytes), label codes (uint16), details (None for a duplicate ACK, and but
        for ``part="all"`` for a retransmission's "rto=…", whose number is in the last
        column), acknowledged frames and duplicate-ACK numbers (int64; -1 and 0 for other
        events; empty but for ``part="all"``), whether these rows of it are in (time,
        frame) order, its duplicate ACKs as runs or None, and each event's seconds after
        "rto=" (native float64, NaN without). ``part``: "all" (every event in the
        columns) or "rows+runs" (all but duplicate ACKs in the columns, and those as
        runs; ValueError for another). Runs are one per label and acknowledged frame in these
        rows, in order of their first duplicate ACK: label codes (uint16), acknowledged
        frames, time and frame of the first, time of the last and counts (native int64
        bytes), whether they are in order of their first's (time, frame), and the runs
        summed up per label, in order of each label's first run (``events.CodeRuns``: the
        code; the first run's acknowledged frame, first time and first frame; the second
        run's first time or None; the last run's three; whether the acknowledged frames
        rise from run to run)."""

def analyze(
    paths: list[str],
    progress: Callable[[int, int], None] | None = None,
    progress_interval_bytes: int = 64 << 20,
    decode_as: list[tuple[int, str]] = ...,
    segments_for: list[int] = ...,
    segment_points: int = 4000,
    segment_points_total: int = 1_000_000,
    keep_transactions: bool = True,
) -> Analysis:
    """Analyse captures in one streaming pass (``"-"`` is standard input).
    ``progress(bytes_read, total_bytes)`` is called every
    ``progress_interval_bytes`` of input (``total_bytes`` is 0 when unknown,
    e.g. stdin or compressed input). ``decode_as`` lists (port, "nfs"|"smb")
    pairs whose TCP connections are decoded as that protocol whatever their
    content. ``segments_for`` lists TCP streams (``tcp.stream``) whose every segment goes to
    the ``tcp_segments`` table (sequence graphs; empty by default).
    ``segment_points`` bounds the ordinary points per connection and direction of the
    reduced ``tcp_seq_points`` table (every connection; flagged segments always kept;
    0 disables it), ``segment_points_total`` all its points (past it the smallest
    connections are dropped, with a warning).
    ``keep_transactions=False`` only counts the transactions: the ``transactions`` table
    is then absent (every other table is the same).
    Raises ValueError for an unknown protocol name, CaptureError for unreadable input;
    a capture cut mid-record gives a warning and all results before the cut."""

def time_order(times: bytes, frames: bytes) -> bytes:
    """Positions of rows in (time, frame) order, ties in row order (a stable sort):
    ``times`` and ``frames`` as native int64 bytes of one length (ValueError otherwise),
    the positions the same."""

def conversation_json(
    conversations: TableStream,
    tcp_connections: TableStream | None,
    tcp_flag_counts: TableStream | None,
    start: int,
    stop: int,
) -> str:
    """The JSON view's conversation objects of rows ``start..stop`` (clamped) of the
    ``conversations`` table, each with its ``tcp_connections`` row (at the same position)
    and its frames per flag, as the view writes them, separated by ``",\n    "``
    (RuntimeError if the two tables' rows do not line up)."""

class LossReading:
    """The loss analysis' reading of one data direction of a connection
    (``nastriage.diagnosis.retrans``): ``first`` for each range of its events, ``decide``,
    ``second`` for each range, then ``finish`` once. Columns are the native bytes of the
    range's arrays (int64; label codes uint16; ``rto`` float64); ``actions`` one byte per
    label code (ValueError for a code past them, a missing column or columns of unequal
    length)."""

    # What a reading does with an event (``actions``: one per label code).
    SKIP: int
    RESENT: int
    SPURIOUS: int
    HOLE: int
    DUP_ACK: int
    UNSEEN: int

    def __init__(
        self,
        long_ns: int,
        episode_tail_ns: int,
        wait_ns: int,
        timeout_min_s: float,
        zw_starts: bytes,
        zw_reach: bytes,
        block: int,
    ) -> None: ...
    @property
    def selected(self) -> bool: ...
    def first(self, range: tuple[bytes, ...], details: list[str | None], actions: bytes) -> None:
        """The first reading of a range: ``range`` its columns' bytes (the rows' frames,
        times, codes, rto; the runs' codes, acknowledged frames, first times, first
        frames, last times, counts); ``details`` its rows' texts."""
    def decide(self) -> bool: ...
    def second(self, range: tuple[bytes, ...], actions: bytes) -> None: ...
    def finish(self) -> dict[str, Any]:
        """What was found, by the names of ``LossAnalysis``'s fields (runs as tuples)."""
