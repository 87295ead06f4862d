"""Per-connection views: I/O graph, time-sequence graph, bytes in flight against the
receive window, RTT over time and the time-limitation breakdown.

Sources: ``tcp_seq_points`` (per-segment points of every connection, reduced by the engine
in its one pass: every flagged segment kept, the rest per time bucket; ``tcp_seq_reduction``
says what was reduced), else the binned ``tcp_series``; ``tcp_connections`` for the
per-connection numbers and ``zero_window_episodes`` for the stalls.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nastriage.views.html.figures import COLORS, Figure, base_layout, time_axis
from nastriage.views.html.reduce import IO_INTERVALS, MAX_LINE_POINTS, envelope
from nastriage.views.html.text import ptext

if TYPE_CHECKING:
    import pyarrow as pa

    from nastriage.capture import Capture

__all__ = ["LIMIT_NAMES", "StreamView", "load_segments", "stream_view"]

#: Most points per direction and interval in the I/O graph's data.
MAX_IO_POINTS = 2000
#: Flagged points of one kind beyond which they are no longer drawn one by one.
MAX_FLAGGED = 100_000

#: Time-limitation buckets (tcp_connections ``limit_<name>_<dir>``), in priority order.
LIMIT_NAMES: tuple[tuple[str, str, str], ...] = (
    ("zero_window", "zero window (receiver stalled)", "#000000"),
    ("loss_recovery", "loss recovery", "#d62728"),
    ("receive_window", "receive window full", "#c9a800"),
    ("application", "application (nothing to send)", "#9aa5b1"),
    ("bandwidth", "bandwidth / congestion window", "#2ca02c"),
)

#: Flags of a data segment that make it a point to keep and mark.
DATA_FLAGS = (
    ("retransmission", "retransmission", COLORS["retransmission"]),
    ("lost_segment", "previous segment not captured", COLORS["lost_segment"]),
    ("out_of_order", "out of order", COLORS["out_of_order"]),
    ("zero_window_probe", "zero-window probe", "#7f7f7f"),
)
#: Flags of an ACK (the reverse direction) to mark.
ACK_FLAGS = (
    ("zero_window", "zero window", COLORS["zero_window"]),
    ("duplicate_ack", "duplicate ACK", "#2ca02c"),
)


@dataclass
class StreamView:
    stream: int
    client: str
    server: str
    #: Direction carrying most payload ("c2s" or "s2c").
    data_dir: str
    summary: list[tuple[str, str]] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    #: I/O graph data for the interval selector: label -> per direction series.
    io: dict[str, Any] | None = None
    episodes: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def load_segments(capture: Capture, streams: list[int]) -> tuple[pa.Table | None, str]:
    """The ``tcp_seq_points`` rows of ``streams`` (recorded in the one pass, so standard
    input works too), or None and why not."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not streams:
        return None, "no connection chosen"
    if "tcp_seq_points" not in capture.table_names:
        return None, "this engine records no per-segment data (tcp_seq_points)"
    table = capture.table("tcp_seq_points")
    return table.filter(pc.is_in(table["stream"], pa.array(streams, pa.uint32()))), ""


def _reduction(capture: Capture, stream: int) -> dict[str, dict[str, Any]]:
    """``tcp_seq_reduction`` rows of ``stream`` by direction."""
    import pyarrow.compute as pc

    if "tcp_seq_reduction" not in capture.table_names:
        return {}
    t = capture.table("tcp_seq_reduction")
    return {r["direction"]: r for r in t.filter(pc.equal(t["stream"], stream)).to_pylist()}


def _reduction_note(red: dict[str, Any] | None, what: str) -> str:
    """What the engine did to the points of one direction ("" if it kept them all)."""
    if not red or not red.get("reduced"):
        return ""
    bucket = red.get("bucket_ns") or 0
    return (
        f"{what}: {int(red['points_kept']):,} of {int(red['points_seen']):,} segments kept "
        f"by the engine (every flagged one and its neighbours; of the others, per "
        f"{bucket / 1e6:g} ms slice the first, last, lowest, highest and window extremes)"
    )


# -- helpers -----------------------------------------------------------------------------


def _secs(values: pa.Array | pa.ChunkedArray, t0: int) -> list[float]:
    import pyarrow as pa
    import pyarrow.compute as pc

    ns = pc.subtract(pc.cast(values, pa.int64()), pa.scalar(t0, pa.int64()))
    secs = pc.divide(pc.cast(ns, pa.float64(), safe=False), 1e9)
    return pc.round(secs, 6).to_pylist()  # type: ignore[no-any-return]


def _has_flag(analysis: pa.Array | pa.ChunkedArray, flag: str) -> pa.Array:
    import pyarrow.compute as pc

    # "a,b,c" lists of names; match whole names only
    return pc.match_substring_regex(analysis, f"(^|,){flag}(,|$)")


def table_rows(table: pa.Table) -> list[dict[str, Any]]:
    """Rows as dicts, timestamps as int ns (pyarrow would need pandas for datetime ns)."""
    import pyarrow as pa

    cols = {}
    for name in table.schema.names:
        col = table[name]
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.int64())
        cols[name] = col.to_pylist()
    return [dict(zip(cols, values)) for values in zip(*cols.values())]


def _bars(
    x: Sequence[float], lo: Sequence[float], hi: Sequence[float]
) -> tuple[list[Any], list[Any]]:
    """Vertical bars as one line trace: x,x,None / lo,hi,None."""
    xs: list[Any] = []
    ys: list[Any] = []
    for a, b, c in zip(x, lo, hi):
        xs.extend((a, a, None))
        ys.extend((b, c, None))
    return xs, ys


def _triple(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        out.extend((v, v, None))
    return out


def _fmt_bytes(n: float | None) -> str:
    from nastriage.units import human_bytes

    return human_bytes(n)


# -- the I/O graph -------------------------------------------------------------------------


def _io_from_points(
    times: dict[str, pa.Array], lengths: dict[str, pa.Array], t_start: int, t_end: int, t0: int
) -> tuple[dict[str, Any], str]:
    """Throughput per direction at every interval of IO_INTERVALS, reduced where long.

    The points are binned once at the finest interval (every interval is a multiple of
    it, on the same grid), then the sparse sums are added up for the coarser ones.
    """
    from nastriage.views.html.reduce import bin_sums

    span = max(t_end - t_start, 1)
    finest = IO_INTERVALS[0][0]
    grid = t0 - (t0 % finest)  # bins aligned on multiples of the finest interval
    fine: dict[str, tuple[list[int], list[float]]] = {}
    for d in times:
        bins, sums, _ = bin_sums(times[d], lengths[d], grid, finest)
        fine[d] = (bins, sums)
    out: dict[str, Any] = {}
    default = ""
    for width, label in IO_INTERVALS:
        origin = t_start - (t_start - t0) % width
        nbins = (t_end - origin) // width + 1
        entry: dict[str, Any] = {}
        reduced_any = False
        factor = 8e9 / width  # bytes per interval -> bit/s
        x0 = (origin - t0) / 1e9
        dx = width / 1e9
        for d, (fbins, fsums) in fine.items():
            merged: dict[int, float] = {}
            for b, v in zip(fbins, fsums):
                k = (grid + b * finest - origin) // width
                merged[k] = merged.get(k, 0.0) + v
            bins = sorted(merged)
            values = [merged[b] * factor for b in bins]
            series = _dense_or_envelope(bins, values, nbins, MAX_IO_POINTS)
            if series is None:  # short: sent dense, x implied by x0 and dx
                dense = [0] * nbins
                for b, v in zip(bins, values):
                    if 0 <= b < nbins:
                        dense[b] = round(v)
                entry[d] = {"x0": round(x0, 6), "dx": dx, "y": dense}
            else:
                xs, ys = series
                reduced_any = True
                entry[d] = {"x": [round(x0 + b * dx, 6) for b in xs], "y": [round(v) for v in ys]}
        entry["note"] = (
            f"{label} intervals: {nbins:,} per direction, reduced to at most "
            f"{MAX_IO_POINTS:,} points keeping each group's lowest and highest interval"
            if reduced_any
            else ""
        )
        out[label] = entry
        if not default and 100 <= nbins <= 1000:
            default = label
    if not default:
        # short captures: the coarsest interval with at least 20 bins, else 1 ms
        default = IO_INTERVALS[0][1]
        for width, label in reversed(IO_INTERVALS):
            if span // width >= 20:
                default = label
                break
    return out, default


def _dense_or_envelope(
    bins: list[int], values: list[float], nbins: int, max_points: int
) -> tuple[list[float], list[float]] | None:
    """None if the zero-filled series has at most ``max_points`` bins (send it dense);
    else its envelope: per group of bins, the lowest and highest (0 for an empty bin)."""
    if nbins <= max_points:
        return None
    groups = max(1, max_points // 2)
    per = math.ceil(nbins / groups)
    lo: dict[int, tuple[float, int]] = {}
    hi: dict[int, tuple[float, int]] = {}
    filled: dict[int, int] = {}
    for b, v in zip(bins, values):
        g = b // per
        filled[g] = filled.get(g, 0) + 1
        if g not in lo or v < lo[g][0]:
            lo[g] = (v, b)
        if g not in hi or v > hi[g][0]:
            hi[g] = (v, b)
    xs: list[float] = []
    ys: list[float] = []
    ngroups = math.ceil(nbins / per)
    for g in range(ngroups):
        first = g * per
        size = min(per, nbins - first)
        points: list[tuple[float, float]] = []
        if g not in hi:
            points = [(float(first), 0.0)]
        else:
            low: tuple[float, float] = (float(lo[g][1]), lo[g][0])
            if filled[g] < size:
                low = (float(first), 0.0)  # an empty bin: the low is zero
            high: tuple[float, float] = (float(hi[g][1]), hi[g][0])
            points = sorted({low, high})
        for px, py in points:
            xs.append(px)
            ys.append(py)
    return xs, ys


def io_figure(
    view: StreamView,
    seg: pa.Table | None,
    series: pa.Table | None,
    t0: int,
    t0_text: str,
) -> Figure:
    import pyarrow as pa
    import pyarrow.compute as pc

    s = view.stream
    caption = (
        "TCP payload throughput each way (retransmissions included), per interval; choose "
        "the interval (1 ms to 10 s, as in Wireshark's I/O graph)."
    )
    fig = Figure(f"io-{s}", "I/O graph", caption, controls=["io-interval"])
    times: dict[str, pa.Array] = {}
    lengths: dict[str, pa.Array] = {}
    t_start = t_end = None
    if seg is not None and seg.num_rows:
        for d in ("c2s", "s2c"):
            part = seg.filter(pc.equal(seg["direction"], d))
            if part.num_rows:
                times[d] = pc.cast(part["time"], pa.int64())
                lengths[d] = part["len"]
        t_all = pc.cast(seg["time"], pa.int64())
        t_start, t_end = int(pc.min(t_all).as_py()), int(pc.max(t_all).as_py())
    elif series is not None and series.num_rows:
        # No per-segment data: the engine's bins (one interval, and multiples of it).
        width = int(series["interval_ns"][0].as_py())
        for d in ("c2s", "s2c"):
            part = series.filter(pc.equal(series["direction"], d))
            if part.num_rows:
                # put each bin's bytes at its start: binning again at a multiple is exact
                times[d] = pc.cast(part["start"], pa.int64())
                lengths[d] = part["bytes"]
        t_all = pc.cast(series["start"], pa.int64())
        t_start = int(pc.min(t_all).as_py())
        t_end = int(pc.max(t_all).as_py()) + width - 1
        view.notes.append(
            f"I/O graph from the engine's {width / 1e6:g} ms bins (the per-segment points of "
            "this connection are reduced or missing): finer intervals are not available"
        )
    if not times or t_start is None or t_end is None:
        fig.missing = "no TCP segments recorded for this connection"
        return fig
    io, default = _io_from_points(times, lengths, t_start, t_end, t0)
    if seg is None and series is not None:
        width = int(series["interval_ns"][0].as_py())
        io = {k: v for (w, k), v in zip(IO_INTERVALS, io.values()) if w >= width and w % width == 0}
        if not io:
            fig.missing = "the engine's bins are coarser than 10 s"
            return fig
        if default not in io:
            default = next(iter(io))
    view.io = {"default": default, "intervals": list(io), "series": io}
    first = io[default]
    traces = []
    names = {
        "c2s": f"client \u2192 server ({view.client})",
        "s2c": f"server \u2192 client ({view.server})",
    }
    for d in ("c2s", "s2c"):
        if d not in first:
            continue
        sd = first[d]
        xs = sd.get("x") or [round(sd["x0"] + i * sd["dx"], 6) for i in range(len(sd["y"]))]
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": ptext(names[d]),
                "x": xs,
                "y": sd["y"],
                "meta": {"dir": d},
                "line": {"color": COLORS[d], "width": 1.5, "shape": "hv"},
                "hovertemplate": "%{x:.6f} s: %{y:.4s}bit/s<extra>" + d + "</extra>",
            }
        )
    fig.spec = {
        "data": traces,
        "layout": base_layout(
            xaxis=time_axis(t0_text),
            yaxis={"title": {"text": "bit/s"}, "rangemode": "tozero", "exponentformat": "SI"},
        ),
    }
    fig.reduced_note = first.get("note", "")
    return fig


# -- time-sequence graph ----------------------------------------------------------------------


def seq_figure(
    view: StreamView,
    seg: pa.Table | None,
    t0: int,
    t0_text: str,
    direction: str,
    missing: str = "",
    reduction: dict[str, dict[str, Any]] | None = None,
) -> Figure:
    """tcptrace-style graph of the data sent in ``direction``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    s = view.stream
    who = "client" if direction == "c2s" else "server"
    caption = (
        f"Data sent by the {who} (tcptrace style): each vertical bar is a segment from its "
        "first to its last sequence number; green: the receiver's ACK; yellow: ACK + "
        "receive window (the most the sender may send); purple bars: SACK blocks. "
        "Retransmissions are red, zero windows black crosses, segments after a capture gap "
        "pink triangles."
    )
    fig = Figure(f"seq-{s}-{direction}", f"Time-sequence graph ({who} \u2192)", caption, height=480)
    if seg is None:
        fig.missing = missing or "no per-segment data for this connection"
        return fig
    rev = "s2c" if direction == "c2s" else "c2s"
    reduction = reduction or {}
    data = seg.filter(pc.equal(seg["direction"], direction))
    data = data.filter(pc.greater(data["len"], 0))
    acks = seg.filter(pc.and_(pc.equal(seg["direction"], rev), pc.is_valid(seg["ack"])))
    if data.num_rows == 0:
        fig.missing = f"the {who} sent no data"
        return fig
    traces: list[dict[str, Any]] = []
    notes = [
        n
        for n in (
            _reduction_note(reduction.get(direction), f"segments sent by the {who}"),
            _reduction_note(reduction.get(rev), "ACKs"),
        )
        if n
    ]

    # Flagged data segments are drawn on their own (the engine keeps every one).
    flagged_mask = pc.or_(data["is_retransmission"], pc.not_equal(data["analysis"], ""))
    flagged_idx = pc.indices_nonzero(flagged_mask).to_pylist()
    normal = data.filter(pc.invert(flagged_mask))
    # ACK line and window line (from the reverse direction).
    if acks.num_rows:
        win_edge = pc.add(pc.cast(acks["ack"], pa.int64()), pc.cast(acks["window"], pa.int64()))
        line_tbl = acks.append_column("_edge", win_edge)
        ax = _secs(line_tbl["time"], t0)
        aframes = line_tbl["frame"].to_pylist()
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "ACK",
                "x": ax,
                "y": line_tbl["ack"].to_pylist(),
                "customdata": aframes,
                "line": {"color": COLORS["ack"], "width": 1.2, "shape": "hv"},
                "hovertemplate": "ACK %{y}<br>frame %{customdata}<extra></extra>",
            }
        )
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "receive window (ACK + window)",
                "x": ax,
                "y": line_tbl["_edge"].to_pylist(),
                "customdata": aframes,
                "line": {"color": COLORS["window"], "width": 1.2, "shape": "hv"},
                "hovertemplate": "window edge %{y}<br>frame %{customdata}<extra></extra>",
            }
        )
        traces.append(_data_trace(normal, t0))  # on top of the lines
        # SACK blocks: every one.
        sacked = acks.filter(pc.not_equal(acks["sack"], ""))
        if sacked.num_rows:
            sx: list[float] = []
            slo: list[int] = []
            shi: list[int] = []
            sfr: list[int] = []
            for t, blocks, fr in zip(
                _secs(sacked["time"], t0), sacked["sack"].to_pylist(), sacked["frame"].to_pylist()
            ):
                for block in str(blocks).split():
                    left, _, right = block.partition("-")
                    try:
                        lo_v, hi_v = int(left), int(right)
                    except ValueError:
                        continue
                    sx.append(t)
                    slo.append(lo_v)
                    shi.append(hi_v)
                    sfr.append(int(fr))
            total_blocks = len(sx)
            bx, by = _bars(sx, slo, shi)
            traces.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": f"SACK blocks ({total_blocks:,})",
                    "x": bx,
                    "y": by,
                    "customdata": _triple(sfr),
                    "line": {"color": COLORS["sack"], "width": 2},
                    "hovertemplate": "SACK %{y}<br>frame %{customdata}<extra></extra>",
                }
            )
        # Flagged ACKs (zero window, duplicate ACK).
        for flag, label, color in ACK_FLAGS:
            part = acks.filter(_has_flag(acks["analysis"], flag))
            if part.num_rows == 0:
                continue
            traces.append(
                _markers(
                    part,
                    t0,
                    "ack",
                    f"{label} ({part.num_rows:,})",
                    color,
                    "x" if flag == "zero_window" else "line-ew",
                    9 if flag == "zero_window" else 7,
                )
            )
    if not acks.num_rows:
        traces.append(_data_trace(normal, t0))
    # Flagged data segments by kind.
    flagged = data.take(pa.array(flagged_idx, pa.int64())) if flagged_idx else None
    if flagged is not None and flagged.num_rows:
        retx = flagged.filter(flagged["is_retransmission"])
        if retx.num_rows:
            if retx.num_rows > MAX_FLAGGED:
                notes.append(f"first {MAX_FLAGGED:,} of {retx.num_rows:,} retransmissions drawn")
                retx = retx.slice(0, MAX_FLAGGED)
            rx = _secs(retx["time"], t0)
            bx, by = _bars(rx, retx["seq"].to_pylist(), retx["next_seq"].to_pylist())
            classes = [ptext(c or "") for c in retx["retrans_class"].to_pylist()]
            traces.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": f"retransmissions ({retx.num_rows:,})",
                    "x": bx,
                    "y": by,
                    "customdata": [
                        [f, c] for f, c in zip(_triple(retx["frame"].to_pylist()), _triple(classes))
                    ],
                    "line": {"color": COLORS["retransmission"], "width": 2.5},
                    "marker": {"size": 4, "color": COLORS["retransmission"]},
                    "hovertemplate": "retransmission (%{customdata[1]})<br>frame %{customdata[0]}"
                    "<br>seq %{y}<extra></extra>",
                }
            )
        for flag, label, color in DATA_FLAGS:
            if flag == "retransmission":
                continue
            part = flagged.filter(_has_flag(flagged["analysis"], flag))
            if part.num_rows:
                symbol = "triangle-up" if flag == "lost_segment" else "diamond"
                traces.append(
                    _markers(part, t0, "seq", f"{label} ({part.num_rows:,})", color, symbol, 8)
                )
    fig.spec = {
        "data": traces,
        "layout": base_layout(
            xaxis=time_axis(t0_text),
            yaxis={"title": {"text": "relative sequence number"}, "exponentformat": "SI"},
        ),
    }
    fig.reduced_note = "; ".join(notes)
    return fig


def _with_gaps(x: list[float], y: list[Any], interval_s: float) -> tuple[list[float], list[Any]]:
    """``None`` after a point followed by more than two intervals without a row."""
    out_x: list[float] = []
    out_y: list[Any] = []
    for i, (a, b) in enumerate(zip(x, y)):
        if i and a - x[i - 1] > 2 * interval_s and out_y and out_y[-1] is not None:
            out_x.append(x[i - 1] + interval_s)
            out_y.append(None)
        out_x.append(a)
        out_y.append(b)
    return out_x, out_y


def _data_trace(normal: pa.Table, t0: int) -> dict[str, Any]:
    x = _secs(normal["time"], t0)
    bx, by = _bars(x, normal["seq"].to_pylist(), normal["next_seq"].to_pylist())
    return {
        "type": "scatter",
        "mode": "lines",
        "name": "data segments",
        "x": bx,
        "y": by,
        "customdata": _triple(normal["frame"].to_pylist()),
        "line": {"color": COLORS["data"], "width": 1.5},
        "hovertemplate": "frame %{customdata}<br>seq %{y}<br>%{x:.6f} s<extra></extra>",
    }


def _markers(
    part: pa.Table, t0: int, ycol: str, name: str, color: str, symbol: str, size: int
) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "markers",
        "name": ptext(name),
        "x": _secs(part["time"], t0),
        "y": part[ycol].to_pylist(),
        "customdata": part["frame"].to_pylist(),
        "marker": {
            "symbol": symbol,
            "size": size,
            "color": color,
            "line": {"width": 1.5, "color": color},
        },
        "hovertemplate": ptext(name.split(" (")[0]) + "<br>frame %{customdata}<extra></extra>",
    }


# -- bytes in flight, RTT --------------------------------------------------------------------


def inflight_figure(
    view: StreamView,
    seg: pa.Table | None,
    series: pa.Table | None,
    t0: int,
    t0_text: str,
    reduction: dict[str, dict[str, Any]] | None = None,
) -> Figure:
    import pyarrow.compute as pc

    s = view.stream
    d = view.data_dir
    who = "client" if d == "c2s" else "server"
    caption = (
        f"Bytes the {who} has sent and not yet seen acknowledged (at this capture point), "
        "against the receive window the other side advertises. In flight pressed against "
        "the window: the window limits; well below it: something else does."
    )
    fig = Figure(f"inflight-{s}", "Bytes in flight and receive window", caption)
    traces = []
    notes = []
    if seg is not None and seg.num_rows:
        rev = "s2c" if d == "c2s" else "c2s"
        reduction = reduction or {}
        notes = [
            n
            for n in (
                _reduction_note(reduction.get(d), "bytes in flight"),
                _reduction_note(reduction.get(rev), "receive window"),
            )
            if n
        ]
        data = seg.filter(pc.equal(seg["direction"], d))
        back = seg.filter(pc.and_(pc.equal(seg["direction"], rev), pc.is_valid(seg["ack"])))
        for tbl, col, name, color, shape in (
            (data, "in_flight", "bytes in flight", COLORS["in_flight"], "linear"),
            (back, "window", "receive window", COLORS["window"], "hv"),
        ):
            if tbl.num_rows == 0:
                continue
            traces.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": name,
                    "x": _secs(tbl["time"], t0),
                    "y": tbl[col].to_pylist(),
                    "line": {"color": color, "width": 1.3, "shape": shape},
                    "hovertemplate": "%{x:.6f} s: %{y:,} bytes<extra>" + name + "</extra>",
                }
            )
    elif series is not None and series.num_rows:
        part = series.filter(pc.equal(series["direction"], d))
        x = _secs(part["start"], t0)
        for col, name, color in (
            ("max_in_flight", "bytes in flight (max per interval)", COLORS["in_flight"]),
            ("receive_window", "receive window (last per interval)", COLORS["window"]),
        ):
            red = envelope(x, part[col].to_pylist(), MAX_LINE_POINTS)
            traces.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": name,
                    "x": red.x,
                    "y": red.y,
                    "line": {"color": color, "width": 1.3, "shape": "hv"},
                }
            )
        width = int(series["interval_ns"][0].as_py())
        notes.append(f"from the engine's {width / 1e6:g} ms bins")
    if not traces:
        fig.missing = "no TCP segments recorded for this connection"
        return fig
    fig.spec = {
        "data": traces,
        "layout": base_layout(
            xaxis=time_axis(t0_text),
            yaxis={"title": {"text": "bytes"}, "rangemode": "tozero", "exponentformat": "SI"},
        ),
    }
    fig.reduced_note = "; ".join(notes)
    return fig


def rtt_figure(view: StreamView, series: pa.Table | None, t0: int, t0_text: str) -> Figure:
    import pyarrow.compute as pc

    s = view.stream
    caption = (
        "Round-trip time measured from data to its ACK, mean per interval, for each "
        "sender. Seen from the capture point: a capture near the client shows the client's "
        "data acknowledged almost at once, and the server's data with the full path delay."
    )
    fig = Figure(f"rtt-{s}", "RTT over time", caption)
    if series is None or series.num_rows == 0 or "rtt_ms" not in series.schema.names:
        fig.missing = "no RTT series (the engine's tcp_series table is missing)"
        return fig
    traces = []
    notes = []
    width_s = int(series["interval_ns"][0].as_py()) / 1e9
    for d in ("c2s", "s2c"):
        part = series.filter(pc.equal(series["direction"], d))
        if part.num_rows == 0 or part["rtt_ms"].null_count == part.num_rows:
            continue
        # a gap (no sample, or no row at all) breaks the line instead of bridging it
        x, y = _with_gaps(_secs(part["start"], t0), part["rtt_ms"].to_pylist(), width_s)
        red = envelope(x, y, MAX_LINE_POINTS)
        if red.reduced:
            notes.append(f"{d}: {len(red.x):,} of {red.total:,} intervals")
        who = "client" if d == "c2s" else "server"
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": f"data sent by the {who}",
                "x": red.x,
                "y": [None if v is None else round(float(v), 4) for v in red.y],
                "line": {"color": COLORS[d], "width": 1.2},
                "marker": {"size": 3},
                "hovertemplate": "%{x:.3f} s: %{y:.3f} ms<extra></extra>",
            }
        )
    if not traces:
        fig.missing = "no RTT samples (no data was acknowledged)"
        return fig
    width = int(series["interval_ns"][0].as_py())
    fig.spec = {
        "data": traces,
        "layout": base_layout(
            xaxis=time_axis(t0_text),
            yaxis={"title": {"text": "RTT (ms, log scale)"}, "type": "log", "dtick": 1},
        ),
    }
    notes.insert(0, f"mean per {width / 1e6:g} ms interval")
    fig.reduced_note = "; ".join(notes) if len(notes) > 1 else ""
    fig.caption += f" Intervals of {width / 1e6:g} ms."
    return fig


def limits_figure(view: StreamView, conn: dict[str, Any] | None, duration_s: float) -> Figure:
    s = view.stream
    caption = (
        "Where each direction's time went, from its first to its last frame: every moment "
        "goes to the first cause that applies, in this order: zero window, loss recovery, "
        "receive window full, application (nothing outstanding), bandwidth or congestion "
        "window."
    )
    fig = Figure(f"limits-{s}", "Time-limitation breakdown", caption, height=200)
    if conn is None or not any(k.startswith("limit_") for k in conn):
        fig.missing = "no time-limitation data (the engine's tcp_connections table is missing)"
        return fig
    traces = []
    dirs = [("c2s", "client \u2192 server"), ("s2c", "server \u2192 client")]
    for name, label, color in LIMIT_NAMES:
        xs = []
        hover = []
        for d, _ in dirs:
            v = conn.get(f"limit_{name}_{d}")
            share = float(v) if v is not None and math.isfinite(float(v)) else 0.0
            xs.append(round(share * 100, 3))
            hover.append(f"{share * duration_s:.3f} s")
        traces.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": label,
                "y": [ptext(lbl) for _, lbl in dirs],
                "x": xs,
                "customdata": hover,
                "marker": {"color": color},
                "hovertemplate": label + ": %{x:.1f}% (%{customdata})<extra></extra>",
            }
        )
    fig.spec = {
        "data": traces,
        "layout": base_layout(
            barmode="stack",
            xaxis={"title": {"text": "% of the connection's duration"}, "range": [0, 100]},
            yaxis={"autorange": "reversed", "automargin": True},
            margin={"l": 10, "r": 20, "t": 10, "b": 40},
        ),
    }
    return fig


# -- the view ------------------------------------------------------------------------------


def _num(v: Any, fmt: str = "{:.3f}", unit: str = "") -> str:
    if v is None:
        return "-"
    try:
        f = float(v)
    except (TypeError, ValueError):
        return ptext(v)
    if not math.isfinite(f):
        return "-"
    return fmt.format(f) + unit


def _summary(conv: dict[str, Any], conn: dict[str, Any] | None) -> list[tuple[str, str]]:
    from nastriage.units import human_bitrate, human_bytes, human_duration

    items = [
        ("Duration", human_duration(conv.get("duration_s"))),
        (
            "Payload",
            f"{human_bytes(conv.get('payload_bytes_c2s'))} client \u2192 server, "
            f"{human_bytes(conv.get('payload_bytes_s2c'))} server \u2192 client",
        ),
        (
            "Throughput",
            f"{human_bitrate(conv.get('throughput_c2s_bps'))} \u2192, "
            f"{human_bitrate(conv.get('throughput_s2c_bps'))} \u2190",
        ),
        ("First / last frame", f"{conv.get('first_frame')} / {conv.get('last_frame')}"),
    ]
    if conn:
        items.append(
            (
                "RTT",
                f"handshake {_num(conn.get('rtt_handshake_ms'), unit=' ms')}, "
                f"min {_num(conn.get('rtt_min_ms'), unit=' ms')}, "
                f"median {_num(conn.get('rtt_median_ms'), unit=' ms')}, "
                f"p95 {_num(conn.get('rtt_p95_ms'), unit=' ms')} "
                f"({conn.get('rtt_samples') or 0} samples)",
            )
        )
        if conn.get("capture_point"):
            items.append(("Capture point", str(conn.get("capture_point")).replace("_", " ")))
        ws_c = _num(conn.get("window_scale_client"), "{:.0f}")
        ws_s = _num(conn.get("window_scale_server"), "{:.0f}")
        items.append(
            (
                "MSS / window scale",
                f"client {conn.get('mss_client') or '-'} / {ws_c}, "
                f"server {conn.get('mss_server') or '-'} / {ws_s}"
                + (" (inferred)" if conn.get("window_scale_inferred") else ""),
            )
        )
        retx = []
        for kind in ("timeout", "fast", "spurious", "network_duplicate"):
            c = int(conn.get(f"retrans_{kind}_c2s") or 0)
            sc = int(conn.get(f"retrans_{kind}_s2c") or 0)
            if c or sc:
                retx.append(f"{kind.replace('_', ' ')} {c} \u2192 / {sc} \u2190")
        items.append(("Retransmissions", ", ".join(retx) or "none"))
        zw = int(conn.get("zero_window_episodes") or 0)
        if zw:
            items.append(
                (
                    "Zero windows",
                    f"{zw} episodes, {_num(conn.get('zero_window_s'), unit=' s')} "
                    f"({_num((conn.get('stalled_fraction') or 0) * 100, '{:.1f}', '%')} "
                    "of the time)",
                )
            )
        if conn.get("cc_hint") and conn.get("cc_hint") != "unknown":
            items.append(("Congestion control (guess)", str(conn.get("cc_hint"))))
    return items


def stream_view(
    capture: Capture,
    conv: dict[str, Any],
    seg: pa.Table | None,
    t0: int,
    t0_text: str,
    seg_missing: str = "",
) -> StreamView:
    import pyarrow.compute as pc

    from nastriage.views.summary import endpoint

    s = int(conv["stream"])
    client = endpoint(conv["client_ip"], conv["client_port"])
    server = endpoint(conv["server_ip"], conv["server_port"])
    data_dir = (
        "c2s"
        if int(conv.get("payload_bytes_c2s") or 0) > int(conv.get("payload_bytes_s2c") or 0)
        else "s2c"
    )
    view = StreamView(s, client, server, data_dir)
    conn = None
    if "tcp_connections" in capture.table_names:
        t = capture.table("tcp_connections")
        rows = t.filter(pc.equal(t["stream"], s)).to_pylist()
        conn = rows[0] if rows else None
    view.summary = _summary(conv, conn)
    series = None
    if "tcp_series" in capture.table_names:
        t = capture.table("tcp_series")
        series = t.filter(pc.equal(t["stream"], s))
    if "zero_window_episodes" in capture.table_names:
        t = capture.table("zero_window_episodes")
        eps = t.filter(pc.equal(t["stream"], s))
        if eps.num_rows:
            view.episodes = table_rows(eps)
    stream_seg = seg.filter(pc.equal(seg["stream"], s)) if seg is not None else None
    if stream_seg is not None and stream_seg.num_rows == 0:
        stream_seg = None
    reduction = _reduction(capture, s)
    if any(r.get("dropped") for r in reduction.values()):
        seg_missing = (
            "not recorded: the engine's points of all connections were full "
            "(smaller connections are dropped first)"
        )
    # The I/O graph sums payload: exact only from unreduced points, else the engine's bins.
    reduced = any(r.get("reduced") for r in reduction.values())
    io_seg = None if reduced else stream_seg
    view.figures.append(io_figure(view, io_seg, series, t0, t0_text))
    view.figures.append(seq_figure(view, stream_seg, t0, t0_text, data_dir, seg_missing, reduction))
    other = "s2c" if data_dir == "c2s" else "c2s"
    main_bytes = int(conv.get(f"payload_bytes_{data_dir}") or 0)
    other_bytes = int(conv.get(f"payload_bytes_{other}") or 0)
    if other_bytes and other_bytes >= 0.1 * main_bytes and other_bytes > 65536:
        view.figures.append(
            seq_figure(view, stream_seg, t0, t0_text, other, seg_missing, reduction)
        )
    view.figures.append(inflight_figure(view, stream_seg, series, t0, t0_text, reduction))
    view.figures.append(rtt_figure(view, series, t0, t0_text))
    view.figures.append(limits_figure(view, conn, float(conv.get("duration_s") or 0.0)))
    return view
