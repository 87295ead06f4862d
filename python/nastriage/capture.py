"""``Capture``: the result of analysing one or more capture files, as Arrow tables.

Every result the engine produces is a named Arrow table (``conversations`` now; later
``tcp_events``, ``transactions``, ...). Tables are imported zero-copy through the Arrow
PyCapsule stream interface and cached, so they can be handed on to DuckDB or polars
without copying.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

TYPE_CHECKING = False  # (see nastriage/cli.py: no `typing` at run time on the way in)
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence
    from typing import Any, Callable, Union

    import duckdb
    import pyarrow as pa

    from nastriage._core import Analysis, ArrowStream

    PathArg = Union[str, "os.PathLike[str]"]

__all__ = [
    "Capture",
    "PlainTable",
    "RowView",
    "SeriesGroup",
    "arrow_table",
    "column_names",
    "iter_rows",
    "read_columns",
    "read_rows",
    "readable_table",
    "row_views",
    "timestamps_ns",
]


def _as_path_list(path_or_paths: PathArg | Sequence[PathArg]) -> list[str]:
    if isinstance(path_or_paths, (str, os.PathLike)):
        items: Sequence[PathArg] = [path_or_paths]
    else:
        items = path_or_paths
    paths = [os.fspath(p) for p in items]
    if not paths:
        raise ValueError("no capture file given")
    for p in paths:
        if not isinstance(p, str):
            raise TypeError(f"capture paths must be str or os.PathLike[str], not {type(p)!r}")
    return paths


def arrow_table(stream: ArrowStream) -> pa.Table:
    """Import an object exposing ``__arrow_c_stream__`` as a ``pyarrow.Table`` (zero-copy)."""
    import pyarrow as pa

    from_stream = getattr(pa.RecordBatchReader, "from_stream", None)
    if from_stream is not None:  # pyarrow >= 15
        return from_stream(stream).read_all()
    # pyarrow 14: the capsule import is there but the public constructor is not
    capsule = stream.__arrow_c_stream__()
    return pa.RecordBatchReader._import_from_c_capsule(capsule).read_all()


_NS_PER_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def timestamps_ns(column: Any) -> list[int | None]:
    """A timestamp column (Array or ChunkedArray, any unit) as integer nanoseconds since
    the epoch. A zero-copy view as int64, not a cast: a cast loads ``pyarrow.compute``,
    whose import is a good part of a short run's time."""
    import pyarrow as pa

    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    scale = _NS_PER_UNIT[column.type.unit]
    out: list[int | None] = []
    for chunk in chunks:
        values = chunk.view(pa.int64()).to_pylist()
        out.extend(values if scale == 1 else [None if v is None else v * scale for v in values])
    return out


#: Longest table whose converted columns a :class:`PlainTable` keeps, and that
#: :meth:`Capture.plain_table` keeps (the per-connection summaries; a longer one is made
#: and converted again when asked again).
KEEP_COLUMNS_ROWS = 2048

#: Tables of a row per connection, which :meth:`Capture.plain_table` keeps at any length
#: (not their converted columns, past :data:`KEEP_COLUMNS_ROWS` rows): the diagnosis keeps
#: views of their rows, which hold the table anyway, and the JSON writer reads them again
#: (``tcp_connections`` of 4,743 connections took 15 ms to make).
KEEP_TABLES = frozenset(
    {"conversations", "tcp_connections", "time_profile", "concurrency", "stream_transactions"}
)


class PlainTable:
    """A result table read as plain Python values, column by column, without pyarrow.

    The command line reads only small summary tables, and importing pyarrow would cost it
    about 60 MB and a tenth of a second of CPU. Columns are converted by the engine when
    first asked for, then kept, except for tables longer than :data:`KEEP_COLUMNS_ROWS`
    (events and series, whose readers make their own objects of them at once: keeping both
    would double their memory); timestamps are integer nanoseconds since the epoch, nulls
    ``None``. Use :meth:`Capture.table` for the Arrow table itself."""

    __slots__ = ("_cols", "_source", "column_names", "num_rows")

    def __init__(self, source: Any) -> None:
        self._source = source
        self.num_rows: int = int(source.num_rows)
        self.column_names: list[str] = list(source.column_names)
        self._cols: dict[str, list[Any]] = {}

    def columns(
        self, names: Sequence[str], start: int = 0, stop: int | None = None
    ) -> dict[str, list[Any]]:
        """The named columns as lists; a name the table lacks gives a list of None (so
        readers work with older or newer schemas). ``start``/``stop`` read only those rows
        (as a slice; never kept)."""
        present = set(self.column_names)
        if start or stop is not None:
            stop = self.num_rows if stop is None else min(stop, self.num_rows)
            start = min(start, stop)
            wanted = [n for n in names if n in present]
            got = self._source.columns(wanted, start, stop) if wanted else {}
            return {n: got[n] if n in present else [None] * (stop - start) for n in names}
        if self.num_rows > KEEP_COLUMNS_ROWS:
            wanted = [n for n in names if n in present]
            got = self._source.columns(wanted) if wanted else {}
        else:
            todo = [n for n in names if n in present and n not in self._cols]
            if todo:
                self._cols.update(self._source.columns(todo))
            got = self._cols
        return {n: got[n] if n in present else [None] * self.num_rows for n in names}

    def row_views(self) -> list[RowView] | None:
        """Every row as a :class:`RowView`; None when the table is not one the engine made
        whole (then read its rows with :func:`read_rows`)."""
        if not hasattr(self._source, "value"):
            return None
        index = {name: i for i, name in enumerate(self.column_names)}
        return [RowView(self._source, index, row) for row in range(self.num_rows)]

    def engine_stream(self) -> Any | None:
        """The engine's Arrow stream this table reads (``_core.TableStream``), for the
        engine's own writers of it (``_core.conversation_json``); None for another source
        (rows made piecewise, a stand-in)."""
        from nastriage import _core

        return self._source if isinstance(self._source, _core.TableStream) else None


class RowView(Mapping):  # type: ignore[type-arg]  # (Mapping[str, Any]: no typing here)
    """One row of an engine table, read in place: a value becomes a Python object when it is
    read (``TableStream.value``), never before, and the row is not copied. The diagnosis
    keeps a row of several per-connection tables for every connection (77 columns of
    ``tcp_connections`` alone); as dicts of Python values they took kilobytes per
    connection, hundreds of megabytes on a capture of tens of thousands of connections.
    Read-only; ``dict(view)`` makes a plain copy."""

    __slots__ = ("_index", "_row", "_source")

    def __init__(self, source: Any, index: dict[str, int], row: int) -> None:
        self._source = source
        #: column name -> position (shared by the table's views)
        self._index = index
        self._row = row

    def __getitem__(self, key: str) -> Any:
        return self._source.value(self._index[key], self._row)

    def get(self, key: str, default: Any = None) -> Any:
        i = self._index.get(key)
        return default if i is None else self._source.value(i, self._row)

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __repr__(self) -> str:
        return f"RowView({dict(self)!r})"


#: Tables the command line reads a piece at a time from the engine, never made whole: a
#: lossy capture flags hundreds of thousands of segments.
MADE_BY_ROWS = frozenset({"tcp_events"})


class _RowsSource:
    """A table the engine makes a range of rows at a time (``Analysis.table_rows``), with
    the ``TableStream`` attributes :class:`PlainTable` reads."""

    __slots__ = ("_analysis", "_name", "column_names", "num_rows")

    def __init__(self, analysis: Any, name: str) -> None:
        self._analysis = analysis
        self._name = name
        self.num_rows: int = int(analysis.table_len(name))
        self.column_names: list[str] = list(analysis.table_rows(name, 0, 0).column_names)

    def columns(
        self, names: list[str] | None = None, start: int = 0, stop: int | None = None
    ) -> dict[str, list[Any]]:
        stop = self.num_rows if stop is None else stop
        rows = self._analysis.table_rows(self._name, start, stop)
        return rows.columns(names)  # type: ignore[no-any-return]


def read_columns(
    table: Any, names: Sequence[str], start: int = 0, stop: int | None = None
) -> dict[str, list[Any]]:
    """Columns of a table (a :class:`PlainTable` or a pyarrow table) as Python lists;
    timestamps as int ns; absent columns as lists of None (so readers work with older or
    newer schemas). ``start``/``stop`` (not negative) read only those rows, as a slice."""
    if isinstance(table, PlainTable):
        return table.columns(names, start, stop)
    import pyarrow as pa

    if start or stop is not None:
        stop = table.num_rows if stop is None else min(stop, table.num_rows)
        start = min(start, stop)
        table = table.slice(start, stop - start)
    n = table.num_rows
    out: dict[str, list[Any]] = {}
    present = set(table.schema.names)
    for name in names:
        if name not in present:
            out[name] = [None] * n
            continue
        col = table.column(name)
        # (dictionary columns decode themselves in to_pylist)
        if pa.types.is_timestamp(col.type):
            out[name] = timestamps_ns(col)
        else:
            out[name] = col.to_pylist()
    return out


def column_chunks(
    table: Any, names: Sequence[str], rows: int = 8192
) -> Iterator[dict[str, list[Any]]]:
    """The named columns of a table :func:`read_columns`-style, ``rows`` rows at a time:
    a long table (hundreds of thousands of TCP events) is turned into Python objects a
    piece at a time, never all at once."""
    for start in range(0, table.num_rows, rows):
        yield read_columns(table, names, start, start + rows)


def _grouped_events(
    analysis: Any, rows: int, part: str
) -> Iterator[tuple[list[tuple[str, str]], dict[int, Any]]]:
    labels: list[tuple[str, str]] = []
    for start in range(0, int(analysis.table_len("tcp_events")), rows):
        labels, streams = analysis.tcp_events_by_stream(start, start + rows, labels, part)
        yield labels, streams


def readable_table(capture: Any, name: str) -> Any:
    """A capture's table for :func:`read_columns` / :func:`read_rows`: its
    :meth:`Capture.plain_table` (no pyarrow), or ``table(name)`` for a stand-in capture
    object that has only that."""
    plain = getattr(capture, "plain_table", None)
    return plain(name) if plain is not None else capture.table(name)


def srt_rows(capture: Any, breakdown: str, drop: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The ``srt`` rows of one breakdown ("op", ...) as :func:`read_rows` gives them, less
    the ``drop`` columns: made alone by the engine (:meth:`Capture.srt_breakdown`) unless the
    whole table is made already, else filtered from it (a stand-in capture)."""
    made = getattr(capture, "srt_breakdown", None)
    table = made(breakdown) if made is not None else None
    where: tuple[str, Any] | None = None
    if table is None:
        table, where = readable_table(capture, "srt"), ("breakdown", breakdown)
    names = [n for n in column_names(table) if n not in drop]
    return read_rows(table, names, where=where)


def column_names(table: Any) -> list[str]:
    """The column names of a :class:`PlainTable` or a pyarrow table."""
    if isinstance(table, PlainTable):
        return list(table.column_names)
    return list(table.schema.names)


def iter_rows(table: Any, batch_rows: int = 1024) -> Iterator[dict[str, Any]]:
    """Every row of a table (a :class:`PlainTable` or a pyarrow table) as a dict of all its
    columns, as :func:`read_rows` gives them, made ``batch_rows`` rows at a time: a whole
    ``tcp_connections`` table of 8,640 connections took 34 MB as Python values, 1,024 rows
    5 MB (the JSON writer, the time profiles)."""
    names = column_names(table)
    for cols in column_chunks(table, names, batch_rows):
        for values in zip(*(cols[n] for n in names)):
            yield dict(zip(names, values))


def read_rows(
    table: Any, names: Sequence[str] | None = None, where: tuple[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The rows of a table (a :class:`PlainTable` or a pyarrow table) as dicts of the named
    columns (all by default); timestamps as int ns. ``where=(column, value)`` keeps only
    the rows whose column equals the value (dicts are made for those only)."""
    keys = list(names) if names is not None else column_names(table)
    if where is None:
        cols = read_columns(table, keys)
        return [dict(zip(keys, values)) for values in zip(*(cols[k] for k in keys))]
    column, value = where
    test = read_columns(table, [column])[column]
    # Only the matching rows are read (a few runs of them, typically: the srt table's
    # "op" rows are a few dozen of its thousands), not every row of every column.
    out: list[dict[str, Any]] = []
    for start, stop in _runs(i for i, v in enumerate(test) if v == value):
        cols = read_columns(table, keys, start, stop)
        out.extend(dict(zip(keys, values)) for values in zip(*(cols[k] for k in keys)))
    return out


def row_views(table: Any) -> Sequence[Mapping[str, Any]]:
    """Every row of a table as a read-only mapping of column -> value (timestamps as int
    ns): :class:`RowView` for a table the engine made (its values are converted as they are
    read, so keeping the rows costs next to nothing), else :func:`read_rows`' dicts."""
    views = table.row_views() if isinstance(table, PlainTable) else None
    return views if views is not None else read_rows(table)


def _runs(indices: Iterable[int]) -> Iterator[tuple[int, int]]:
    """Increasing indices as [start, stop) runs of consecutive ones."""
    start = stop = -1
    for i in indices:
        if i != stop:
            if stop > start:
                yield start, stop
            start = i
        stop = i + 1
    if stop > start:
        yield start, stop


#: A sender direction's ``tcp_series`` bins with payload, as the engine groups them
#: (:meth:`Capture.tcp_series_by_direction`).
SeriesGroup = tuple[int, str, int, bytes, bytes]


class Capture:
    """One analysis run over one or more capture files (merged in time order).

    Create with :func:`nastriage.open`. Metadata are plain Python objects; results are
    ``pyarrow.Table`` objects by name (see :attr:`table_names`).
    """

    def __init__(self, analysis: Analysis, paths: Sequence[str] = ()) -> None:
        self._analysis = analysis
        self._paths = list(paths)
        self._tables: dict[str, pa.Table] = {}
        self._plain: dict[str, PlainTable | pa.Table] = {}
        self._srt_parts: dict[str, PlainTable] = {}
        self._duckdb: duckdb.DuckDBPyConnection | None = None

    @classmethod
    def analyze(
        cls,
        path_or_paths: PathArg | Sequence[PathArg],
        *,
        progress: Callable[[int, int], None] | None = None,
        progress_interval_bytes: int | None = None,
        decode_as: Sequence[tuple[int, str]] = (),
        segments_for: Sequence[int] = (),
        segment_points: int | None = None,
        transactions: bool = True,
    ) -> Capture:
        """Run the engine over the given files (``"-"`` is standard input).

        ``decode_as`` forces decoding of TCP ports, e.g. ``[(3049, "nfs")]``.
        ``segments_for`` lists TCP streams whose segments fill the ``tcp_segments`` table.
        ``segment_points`` bounds the reduced ``tcp_seq_points`` per connection and
        direction (None: the engine's default; 0: none).
        ``transactions=False`` leaves out the ``transactions`` table (every request, the
        largest part of the work after the pass itself): the diagnosis does not need it, and
        every other table is the same.
        """
        from nastriage import _core

        paths = _as_path_list(path_or_paths)
        analysis = _core.analyze(
            paths,
            progress,
            progress_interval_bytes if progress_interval_bytes is not None else 64 << 20,
            list(decode_as),
            segments_for=[int(s) for s in segments_for],
            keep_transactions=bool(transactions),
            **({} if segment_points is None else {"segment_points": int(segment_points)}),
        )
        return cls(analysis, paths)

    # -- metadata --------------------------------------------------------------------------

    @property
    def paths(self) -> list[str]:
        """The inputs as given (``"-"`` for standard input)."""
        return list(self._paths)

    @property
    def captures(self) -> list[dict[str, Any]]:
        """One dict per input file, in the order given (see ``_core.Analysis.captures``)."""
        return [dict(c) for c in self._analysis.captures]

    @property
    def protocols(self) -> list[dict[str, Any]]:
        """Frames and bytes per protocol seen, most frames first, including unanalysed ones."""
        return [dict(p) for p in self._analysis.protocols]

    @property
    def warnings(self) -> list[str]:
        """Warnings from all files and stages, one line each (raw: sanitise before printing)."""
        return list(self._analysis.warnings)

    @property
    def app_stats(self) -> dict[str, int]:
        """Counters of the NFS/SMB parsers: transactions, unanswered requests, replies
        without a request, resynchronisations, encrypted/compressed/SMB1 messages."""
        return {str(k): int(v) for k, v in self._analysis.app_stats.items()}

    @property
    def frames(self) -> int:
        """Total frames over all inputs."""
        return int(self._analysis.frames)

    @property
    def bytes(self) -> int:
        """Total bytes on the wire over all inputs."""
        return sum(int(c.get("bytes") or 0) for c in self.captures)

    # -- tables ----------------------------------------------------------------------------

    @property
    def table_names(self) -> list[str]:
        """Names of the result tables this engine produces (e.g. ``["conversations"]``)."""
        return list(self._analysis.table_names())

    def wait_for_derived_tables(self) -> None:
        """Wait until the engine has made the tables derived from the transactions
        (``srt``, ``time_profile``, ...; see ``_core.Analysis``), which it makes on a
        thread of its own after the pass. Returns at once for a stand-in analysis."""
        from nastriage import _core

        if isinstance(self._analysis, _core.Analysis):
            self._analysis.wait_for_digest()

    def _require(self, name: str) -> None:
        if name not in self.table_names:
            known = ", ".join(self.table_names) or "none"
            raise KeyError(f"no table named {name!r} (tables: {known})")

    def table(self, name: str) -> pa.Table:
        """The named result table as a ``pyarrow.Table`` (imported once, then cached)."""
        cached = self._tables.get(name)
        if cached is not None:
            return cached
        self._require(name)
        table = arrow_table(self._analysis.table(name))
        self._tables[name] = table
        return table

    def plain_table(self, name: str) -> PlainTable | pa.Table:
        """The named table for reading as Python values (:class:`PlainTable`), without
        importing pyarrow. Only a stand-in analysis whose tables are not the engine's
        (tests) gives the ``pyarrow.Table`` instead; :func:`read_columns` and
        :func:`read_rows` read both."""
        plain = self._plain.get(name)
        if plain is not None:
            return plain
        self._require(name)
        from nastriage import _core

        if name in MADE_BY_ROWS and isinstance(self._analysis, _core.Analysis):
            return PlainTable(_RowsSource(self._analysis, name))
        source = self._analysis.table(name)
        # Another Arrow stream (a stand-in analysis in tests) is read through pyarrow.
        table = PlainTable(source) if isinstance(source, _core.TableStream) else self.table(name)
        # A long table (events, series) is made again when asked for again: its readers
        # keep their own compact form of it, and the Arrow columns kept here as well
        # would grow with the capture.
        if (
            table.num_rows <= KEEP_COLUMNS_ROWS
            or name in KEEP_TABLES
            or not isinstance(table, PlainTable)
        ):
            self._plain[name] = table
        return table

    def tcp_events_by_stream(
        self, rows: int = 16384, part: str = "all"
    ) -> Iterator[tuple[list[tuple[str, str]], dict[int, Any]]] | None:
        """The ``tcp_events`` table regrouped by connection by the engine, ``rows`` rows at
        a time (``Analysis.tcp_events_by_stream``; ``part``: which events, and duplicate
        ACKs one by one or as runs, see :data:`~nastriage.diagnosis.events.PARTS`), or
        None when the tables do not come from a live analysis."""
        from nastriage import _core

        analysis: Any = self._analysis  # (a stand-in in tests)
        if not isinstance(analysis, _core.Analysis):
            return None
        return _grouped_events(analysis, rows, part)

    def srt_breakdown(self, breakdown: str) -> PlainTable | None:
        """The ``srt`` rows of one breakdown ("op", "client", "server", "file", "status")
        made by the engine without the others' (with thousands of connections the table has
        tens of thousands of client, server and file rows, which a summary does not read);
        None once the whole table is made (read it, :func:`srt_rows`), or for a stand-in
        analysis."""
        self._require("srt")
        from nastriage import _core

        made = "srt" in self._plain or "srt" in self._tables
        if isinstance(self._analysis, _core.Analysis) and not made:
            part = self._srt_parts.get(breakdown)
            if part is None:
                part = self._srt_parts[breakdown] = PlainTable(self._analysis.srt_rows(breakdown))
            return part
        return None

    def tcp_series_by_direction(self, stream: int | None = None) -> list[SeriesGroup] | None:
        """The ``tcp_series`` rows that carried payload grouped by (stream, direction) by
        the engine, without making the table (``Analysis.tcp_series_by_direction``):
        ``(stream, direction, interval_ns, throughput_bps, receive_window)``, the last two
        native-endian float64 bytes (NaN: no window); ``stream``: that connection's only.
        None when the tables do not come from a live analysis."""
        analysis = self._live_series()
        if analysis is None:
            return None
        groups: list[SeriesGroup] = analysis.tcp_series_by_direction(stream)
        return groups

    def tcp_series_window_medians(self) -> list[tuple[int, str, float]] | None:
        """The median receive window offered to each sender direction over its
        ``tcp_series`` bins with payload, by the engine (``(stream, direction, median)``);
        None when the tables do not come from a live analysis."""
        analysis = self._live_series()
        if analysis is None:
            return None
        medians: list[tuple[int, str, float]] = analysis.tcp_series_window_medians()
        return medians

    def _live_series(self) -> Any:
        """The engine's analysis, if the tables come from one with ``tcp_series``."""
        from nastriage import _core

        analysis: Any = self._analysis  # (a stand-in in tests)
        if not isinstance(analysis, _core.Analysis) or "tcp_series" not in self.table_names:
            return None
        return analysis

    def tables(self) -> dict[str, pa.Table]:
        """All result tables by name."""
        return {name: self.table(name) for name in self.table_names}

    @property
    def conversations(self) -> pa.Table:
        """One row per TCP connection, numbered like Wireshark's ``tcp.stream``."""
        return self.table("conversations")

    # -- SQL -------------------------------------------------------------------------------

    def duckdb(
        self, connection: duckdb.DuckDBPyConnection | None = None
    ) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection with every result table registered as a view of its name.

        Registration is zero-copy (DuckDB scans the Arrow buffers). Pass ``connection`` to
        add the views to an existing connection; otherwise an in-memory one is created.
        Needs the ``duckdb`` package.
        """
        try:
            import duckdb
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "Capture.duckdb() needs the duckdb package (pip install duckdb)"
            ) from exc
        con = connection if connection is not None else duckdb.connect()
        for name in self.table_names:
            con.register(name, self.table(name))
        return con

    def sql(self, query: str) -> pa.Table:
        """Run a DuckDB SQL query over the result tables; the result as a ``pyarrow.Table``.

        >>> cap.sql("select count(*) as n from conversations where rst")  # doctest: +SKIP
        """
        import pyarrow as pa

        if self._duckdb is None:
            self._duckdb = self.duckdb()
        relation: Any = self._duckdb.sql(query)
        if relation is None:  # a statement without a result (e.g. CREATE VIEW)
            return pa.table({})
        for method in ("to_arrow_table", "fetch_arrow_table"):  # duckdb >= 1.4, older
            fetch = getattr(relation, method, None)
            if fetch is not None:
                return fetch()
        result = relation.arrow()
        return result if isinstance(result, pa.Table) else result.read_all()

    def __repr__(self) -> str:
        from nastriage.sanitize import clean

        names = ", ".join(clean(p) for p in self._paths) if self._paths else "?"
        return f"<nastriage.Capture {names}: {self.frames} frames, tables {self.table_names}>"
