"""Reduce series before they reach the page, keeping the extremes.

A browser draws a few thousand points per chart quickly; a long capture has millions. Every
reduction here keeps what a reader must not miss:

* :func:`envelope` (line series such as throughput, bytes in flight, RTT): the points are
  cut into at most ``max_points / 2`` buckets of equal time; each bucket keeps its lowest
  and its highest point (in time order), so peaks, stalls and drops to zero survive.
* Per-segment points (time-sequence graph, bytes in flight) are reduced by the engine in
  its one pass (``tcp_seq_points``; see docs/tcp-analysis.md), keeping every flagged one.
* Latency: the heatmap aggregates every transaction (nothing is dropped), and the slowest
  transactions are drawn as individual points (:func:`slowest`).

Each function returns whether it reduced anything, and the page says so on the chart.
Pure Python on lists plus pyarrow.compute for the heavy grouping; no numpy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "MAX_LINE_POINTS",
    "MAX_MARKERS",
    "Reduced",
    "bin_sums",
    "envelope",
    "nice_interval_ns",
    "slowest",
]

#: Most points of one line trace on the page (after reduction).
MAX_LINE_POINTS = 4000
#: Most individual markers of one kind on a chart before markers at the same spot merge.
MAX_MARKERS = 20000


@dataclass
class Reduced:
    """A reduced series and what happened to it."""

    x: list[float]
    y: list[float | None]
    #: Points before reduction.
    total: int
    #: True if points were dropped.
    reduced: bool


def envelope(
    x: Sequence[float], y: Sequence[float | None], max_points: int = MAX_LINE_POINTS
) -> Reduced:
    """Keep the lowest and highest point of each of ``max_points // 2`` equal-time buckets.

    ``x`` must be sorted. ``None`` values (gaps) are kept as gaps at most once per bucket.
    With ``len(x) <= max_points`` the series is returned as it is.
    """
    n = len(x)
    if n <= max_points or n == 0:
        return Reduced(list(x), list(y), n, False)
    buckets = max(1, max_points // 2)
    x0, x1 = float(x[0]), float(x[-1])
    width = (x1 - x0) / buckets or 1.0
    out_x: list[float] = []
    out_y: list[float | None] = []
    i = 0
    while i < n:
        b = min(int((x[i] - x0) / width), buckets - 1)
        end_x = x0 + (b + 1) * width
        lo_i = hi_i = -1
        gap = False
        j = i
        while j < n and (x[j] < end_x or b == buckets - 1):
            v = y[j]
            if v is None or (isinstance(v, float) and math.isnan(v)):
                gap = True
            else:
                if lo_i < 0 or v < y[lo_i]:  # type: ignore[operator]
                    lo_i = j
                if hi_i < 0 or v > y[hi_i]:  # type: ignore[operator]
                    hi_i = j
            j += 1
        if j == i:  # float edge case: make progress
            j = i + 1
            lo_i = hi_i = i
        keep = sorted({k for k in (lo_i, hi_i) if k >= 0})
        for k in keep:
            out_x.append(float(x[k]))
            out_y.append(y[k])
        if gap:
            out_x.append(float(x[j - 1]))
            out_y.append(None)
        i = j
    return Reduced(out_x, out_y, n, True)


def slowest(values: Sequence[float], k: int) -> list[int]:
    """Indices of the ``k`` largest values (ties: earlier first), in index order."""
    if k <= 0:
        return []
    order = sorted(range(len(values)), key=lambda i: (-values[i], i))[:k]
    return sorted(order)


#: Wireshark's I/O graph intervals (1 ms to 10 s), in nanoseconds, with their labels.
IO_INTERVALS: tuple[tuple[int, str], ...] = (
    (1_000_000, "1 ms"),
    (2_000_000, "2 ms"),
    (5_000_000, "5 ms"),
    (10_000_000, "10 ms"),
    (20_000_000, "20 ms"),
    (50_000_000, "50 ms"),
    (100_000_000, "100 ms"),
    (200_000_000, "200 ms"),
    (500_000_000, "500 ms"),
    (1_000_000_000, "1 s"),
    (2_000_000_000, "2 s"),
    (5_000_000_000, "5 s"),
    (10_000_000_000, "10 s"),
)


def nice_interval_ns(span_ns: int, target_bins: int) -> int:
    """The smallest of 1-2-5 x 10^k ns (>= 1 us) giving at most ``target_bins`` bins."""
    want = max(span_ns / max(target_bins, 1), 1000.0)
    exp = 10 ** math.floor(math.log10(want))
    for m in (1, 2, 5, 10):
        if m * exp >= want:
            return int(m * exp)
    return int(10 * exp)  # pragma: no cover


def bin_sums(
    times_ns: pa.Array | pa.ChunkedArray,
    values: pa.Array | pa.ChunkedArray | None,
    origin_ns: int,
    width_ns: int,
) -> tuple[list[int], list[float], list[int]]:
    """Group by ``(time - origin) // width``: sorted bin indices, value sums, counts.

    Times before ``origin`` are dropped. ``values`` None counts only (sums are counts).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    t = pc.cast(times_ns, pa.int64())
    rel = pc.subtract(t, pa.scalar(origin_ns, pa.int64()))
    keep = pc.greater_equal(rel, 0)
    rel = pc.filter(rel, keep)
    b = pc.divide(rel, pa.scalar(width_ns, pa.int64()))  # integer division (non-negative)
    cols: dict[str, Any] = {"b": b}
    if values is not None:
        cols["v"] = pc.cast(pc.filter(values, keep), pa.float64(), safe=False)
    else:  # counts: a column of ones
        cols["v"] = pc.cast(pc.equal(b, b), pa.float64())
    table = pa.table(cols)
    if table.num_rows == 0:
        return [], [], []
    grouped = table.group_by("b").aggregate([("v", "sum"), ("v", "count")])
    grouped = grouped.sort_by("b")
    return (
        grouped["b"].to_pylist(),
        grouped["v_sum"].to_pylist(),
        grouped["v_count"].to_pylist(),
    )
