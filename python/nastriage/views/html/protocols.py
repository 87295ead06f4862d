"""Per-protocol views: SRT table, latency heatmap, outstanding requests, SMB2 credits and
the breakdown by operation, client and file or share."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nastriage.views.html.figures import COLORS, Figure, base_layout, time_axis
from nastriage.views.html.reduce import MAX_LINE_POINTS, envelope, nice_interval_ns
from nastriage.views.html.text import ptext
from nastriage.views.srt import SrtGroup, srt_groups

if TYPE_CHECKING:
    import pyarrow as pa

    from nastriage.capture import Capture

__all__ = ["ProtocolView", "protocol_views", "stream_groups"]

#: Latency heatmap: rows per decade of latency, most time columns.
HEAT_ROWS_PER_DECADE = 10
HEAT_MAX_COLUMNS = 300
#: Slowest transactions drawn individually on the heatmap.
HEAT_OUTLIERS = 300
#: Keys shown in a breakdown chart (the rest are summed as "others").
BREAKDOWN_TOP = 20
#: Streams drawn individually in the outstanding/credit charts.
SERIES_STREAMS = 8


@dataclass
class ProtocolView:
    group: SrtGroup
    figures: list[Figure] = field(default_factory=list)
    streams: list[int] = field(default_factory=list)
    transactions: int = 0
    #: breakdown ("file", "client") -> (top keys with their totals, number of keys)
    tables: dict[str, tuple[list[dict[str, Any]], int]] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return self.group.key

    @property
    def label(self) -> str:
        return self.group.label


def _ns(table: pa.Table, name: str) -> list[int | None]:
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.cast(table[name], pa.int64()).to_pylist()  # type: ignore[no-any-return]


#: The ``transactions`` columns the protocol views read. Selected (without a copy) before
#: the views filter the table by protocol and by answer, so that the filters copy these
#: alone rather than every column of every request (on the 4 GiB generated mix the
#: table is 90 MB, and each filtered copy of it was most of the report's peak memory).
VIEW_COLUMNS = (
    "protocol",
    "version",
    "stream",
    "id",
    "srt_ms",
    "request_first_time",
    "request_first_frame",
    "op",
    "file_name",
)


def _view_columns(table: pa.Table) -> pa.Table:
    return table.select([c for c in VIEW_COLUMNS if c in table.schema.names])


def _group_filter(table: pa.Table, group: SrtGroup) -> pa.Table:
    import pyarrow.compute as pc

    mask = pc.equal(table["protocol"], group.protocol)
    if group.version is not None and "version" in table.schema.names:
        mask = pc.and_(mask, pc.equal(table["version"], group.version))
    return table.filter(mask)


def stream_groups(capture: Capture) -> dict[int, str]:
    """Stream -> the key of the protocol group most of its transactions belong to."""
    if "transactions" not in capture.table_names:
        return {}
    t = capture.table("transactions")
    if t.num_rows == 0:
        return {}
    counts = t.group_by(["stream", "protocol", "version"]).aggregate([("id", "count")])
    best: dict[int, tuple[int, str]] = {}
    for row in counts.to_pylist():
        proto = str(row["protocol"])
        key = "smb2-x" if proto == "smb2" else f"{proto}-{row['version']}"
        n = int(row["id_count"])
        s = int(row["stream"])
        if s not in best or n > best[s][0]:
            best[s] = (n, key)
    return {s: k for s, (_, k) in best.items()}


def _fmt_ms(ms: float) -> str:
    if ms < 1:
        return f"{ms * 1000:.0f} \u00b5s"
    if ms < 1000:
        return f"{ms:.3g} ms"
    return f"{ms / 1000:.3g} s"


def _latency_ticks(lo: int, hi: int) -> tuple[list[float], list[str]]:
    """Ticks at 1, 2 and 5 times whole decades of milliseconds, log10 values lo..hi (only
    the decades when the range spans more than three)."""
    vals, texts = [], []
    steps = (1,) if hi - lo > 3 else (1, 2, 5)
    for d in range(lo, hi + 1):
        for m in steps:
            if d == hi and m > 1:
                break
            v = m * 10.0**d
            vals.append(round(math.log10(v), 6))
            texts.append(_fmt_ms(v))
    return vals, texts


def heatmap_figure(fig_id: str, tx: pa.Table, t0: int, t0_text: str) -> Figure:
    """Time on x, latency (log) on y, count as colour; the slowest as points on top."""
    import pyarrow as pa
    import pyarrow.compute as pc

    caption = (
        "Each column is a slice of time, each row a latency band (10 per decade, log scale); "
        "the colour is the number of requests that started in that slice and took that long "
        "(log colour scale: a single request is visible). The slowest requests are drawn as "
        "circles on top (hover for the frame)."
    )
    fig = Figure(fig_id, "Latency heatmap", caption, height=420)
    answered = tx.filter(pc.and_(pc.is_valid(tx["srt_ms"]), pc.greater(tx["srt_ms"], 0.0)))
    n = answered.num_rows
    if n == 0:
        fig.missing = "no answered requests with a response time"
        return fig
    times = pc.cast(answered["request_first_time"], pa.int64())
    t_min = int(pc.min(times).as_py())
    t_max = int(pc.max(times).as_py())
    # Columns: up to HEAT_MAX_COLUMNS, fewer for few requests (so that each is visible).
    columns = int(min(HEAT_MAX_COLUMNS, max(30, 4 * math.sqrt(n))))
    width = nice_interval_ns(max(t_max - t_min, 1), columns)
    origin = t_min - (t_min - t0) % width  # columns aligned on the report's time axis
    col = pc.divide(pc.subtract(times, pa.scalar(origin, pa.int64())), pa.scalar(width, pa.int64()))
    log_ms = pc.log10(pc.cast(answered["srt_ms"], pa.float64()))
    row = pc.cast(pc.floor(pc.multiply(log_ms, float(HEAT_ROWS_PER_DECADE))), pa.int64())
    grouped = (
        pa.table({"c": col, "r": row}).group_by(["c", "r"]).aggregate([("c", "count")]).to_pylist()
    )
    r_min = min(g["r"] for g in grouped)
    r_max = max(g["r"] for g in grouped)
    c_max = max(g["c"] for g in grouped)
    ncols, nrows = c_max + 1, r_max - r_min + 1
    z: list[list[float | None]] = [[None] * ncols for _ in range(nrows)]
    counts: list[list[int]] = [[0] * ncols for _ in range(nrows)]
    top = 1
    for g in grouped:
        count = int(g["c_count"])
        z[g["r"] - r_min][g["c"]] = math.log2(count) + 1.0
        counts[g["r"] - r_min][g["c"]] = count
        top = max(top, count)
    x = [round((origin - t0 + (c + 0.5) * width) / 1e9, 6) for c in range(ncols)]
    y = [round((r_min + r + 0.5) / HEAT_ROWS_PER_DECADE, 4) for r in range(nrows)]
    ticks_lo = math.floor(r_min / HEAT_ROWS_PER_DECADE)
    ticks_hi = math.ceil((r_max + 1) / HEAT_ROWS_PER_DECADE)
    tickvals, ticktext = _latency_ticks(ticks_lo, ticks_hi)
    cbar_vals, cbar_text = [], []
    c = 1
    while c <= top:
        cbar_vals.append(math.log2(c) + 1.0)
        cbar_text.append(str(c))
        c *= 4
    heat = {
        "type": "heatmap",
        "x": x,
        "y": y,
        "z": z,
        "customdata": counts,
        "colorscale": [
            [0.0, "#fde0a0"],
            [0.35, "#f89540"],
            [0.7, "#cc4778"],
            [1.0, "#3b0f70"],
        ],
        "zmin": 1.0,
        "zmax": max(math.log2(top) + 1.0, 1.5),
        "colorbar": {"title": {"text": "requests"}, "tickvals": cbar_vals, "ticktext": cbar_text},
        "hovertemplate": "t %{x:.3f} s<br>latency band %{y:.2f} (log10 ms)"
        "<br>%{customdata} requests<extra></extra>",
        "hoverongaps": False,
        "xgap": 0,
        "ygap": 0,
        "name": "requests",
    }
    # The slowest requests, individually.
    k = min(HEAT_OUTLIERS, n)
    slow = answered.take(pc.select_k_unstable(answered, k, [("srt_ms", "descending")]))
    slow_t = pc.cast(slow["request_first_time"], pa.int64()).to_pylist()
    slow_ms = slow["srt_ms"].to_pylist()
    ops = slow["op"].to_pylist()
    frames = slow["request_first_frame"].to_pylist()
    files = slow["file_name"].to_pylist() if "file_name" in slow.schema.names else [None] * k
    outliers = {
        "type": "scatter",
        "mode": "markers",
        "name": f"slowest {k}",
        "x": [round((t - t0) / 1e9, 6) for t in slow_t],
        "y": [round(math.log10(ms), 5) for ms in slow_ms],
        "customdata": [
            [ptext(op), int(fr), ptext(f or ""), _fmt_ms(ms)]
            for op, fr, f, ms in zip(ops, frames, files, slow_ms)
        ],
        "marker": {
            "symbol": "circle-open",
            "size": 7,
            "color": COLORS["outlier"],
            "line": {"width": 1.5},
        },
        "hovertemplate": "%{customdata[0]} %{customdata[3]}<br>frame %{customdata[1]}"
        "<br>%{customdata[2]}<extra></extra>",
    }
    fig.spec = {
        "data": [heat, outliers],
        "layout": base_layout(
            xaxis=time_axis(t0_text),
            yaxis={
                "title": {"text": "response time (log scale)"},
                "tickvals": tickvals,
                "ticktext": ticktext,
                "zeroline": False,
                "automargin": True,
            },
        ),
    }
    fig.reduced_note = (
        f"aggregated: {n:,} requests in {ncols} columns of {_fmt_ms(width / 1e6)}; "
        f"every request is counted; the {k} slowest are also drawn individually"
    )
    return fig


def _series_by_stream(
    capture: Capture, streams: list[int], column: str
) -> dict[int, tuple[list[int], list[float | None], int]]:
    """outstanding_series ``column`` per stream: (start ns, value, interval ns)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if "outstanding_series" not in capture.table_names:
        return {}
    table = capture.table("outstanding_series")
    if column not in table.schema.names or table.num_rows == 0:
        return {}
    table = table.filter(pc.is_in(table["stream"], pa.array(streams, pa.uint32())))
    table = table.sort_by([("stream", "ascending"), ("start", "ascending")])
    out: dict[int, tuple[list[int], list[float | None], int]] = {}
    st = table["stream"].to_pylist()
    starts = _ns(table, "start")
    values = table[column].to_pylist()
    intervals = table["interval_ns"].to_pylist()
    for s, t, v, w in zip(st, starts, values, intervals):
        entry = out.get(s)
        if entry is None:
            entry = ([], [], int(w))
            out[s] = entry
        entry[0].append(int(t or 0))
        entry[1].append(None if v is None else float(v))
    return out


def _step_trace(
    name: str,
    times: list[int],
    values: list[float | None],
    interval: int,
    t0: int,
    color: str | None,
    dash: str | None = None,
) -> tuple[dict[str, Any], bool, int]:
    """A line over the series, with zeros in the empty intervals, reduced if long."""
    x: list[float] = []
    y: list[float | None] = []
    prev: int | None = None
    for t, v in zip(times, values):
        if prev is not None and interval and t - prev > interval:
            # an interval with no row: nothing outstanding
            x.append((prev + interval - t0) / 1e9)
            y.append(0.0)
            if t - prev > 2 * interval:
                x.append((t - interval - t0) / 1e9)
                y.append(0.0)
        x.append((t - t0) / 1e9)
        y.append(v)
        prev = t
    red = envelope(x, y, MAX_LINE_POINTS)
    line: dict[str, Any] = {"shape": "hv", "width": 1.5}
    if color:
        line["color"] = color
    if dash:
        line["dash"] = dash
    trace = {
        "type": "scatter",
        "mode": "lines",
        "name": name,
        "x": [round(v, 6) for v in red.x],
        "y": red.y,
        "line": line,
    }
    return trace, red.reduced, red.total


def outstanding_figure(
    fig_id: str, capture: Capture, streams: list[int], t0: int, t0_text: str
) -> Figure:
    caption = (
        "Requests sent and not yet answered, per connection: the highest count in each "
        "interval (solid) and the time-weighted mean (dotted). A flat top at a small "
        "number means the client never asks for more at once."
    )
    fig = Figure(fig_id, "Outstanding requests over time", caption)
    shown = streams[:SERIES_STREAMS]
    max_s = _series_by_stream(capture, shown, "max_outstanding")
    mean_s = _series_by_stream(capture, shown, "mean_outstanding")
    if not max_s:
        fig.missing = (
            "no outstanding-request series (the engine's outstanding_series table is "
            "missing or empty)"
        )
        return fig
    traces = []
    reduced = False
    interval = 0
    for i, s in enumerate(shown):
        if s not in max_s:
            continue
        times, values, interval = max_s[s]
        color = _palette(i)
        tr, red, _ = _step_trace(f"stream {s} max", times, values, interval, t0, color)
        traces.append(tr)
        reduced |= red
        if s in mean_s:
            mt, mv, _ = mean_s[s]
            tr, red, _ = _step_trace(f"stream {s} mean", mt, mv, interval, t0, color, "dot")
            traces.append(tr)
            reduced |= red
    fig.spec = {
        "data": traces,
        "layout": base_layout(
            xaxis=time_axis(t0_text),
            yaxis={"title": {"text": "outstanding requests"}, "rangemode": "tozero"},
        ),
    }
    notes = [f"intervals of {_fmt_ms(interval / 1e6)}" if interval else ""]
    if len(streams) > len(shown):
        notes.append(f"the {len(shown)} busiest of {len(streams)} connections")
    if reduced:
        notes.append(
            f"reduced to at most {MAX_LINE_POINTS:,} points per line, keeping each "
            "bucket's lowest and highest value"
        )
    fig.reduced_note = "; ".join(n for n in notes if n)
    return fig


def credits_figure(
    fig_id: str, capture: Capture, streams: list[int], t0: int, t0_text: str
) -> Figure:
    caption = (
        "SMB2 credits the client holds and has not used, per connection, at the end of each "
        "interval. At zero the client must wait for the server to grant more before it can "
        "send another request."
    )
    fig = Figure(fig_id, "SMB2 credit balance over time", caption)
    tracked = _credit_streams(capture, streams)
    shown = tracked[:SERIES_STREAMS]
    series = _series_by_stream(capture, shown, "credit_balance")
    series = {s: v for s, v in series.items() if any(x is not None for x in v[1])}
    if not series:
        fig.missing = "no credit balance in the capture (credits were not tracked)"
        return fig
    traces = []
    reduced = False
    for i, s in enumerate(shown):
        if s not in series:
            continue
        times, values, _ = series[s]
        tr, red, _ = _step_trace(f"stream {s}", times, values, 0, t0, _palette(i))
        traces.append(tr)
        reduced |= red
    fig.spec = {
        "data": traces,
        "layout": base_layout(
            xaxis=time_axis(t0_text),
            yaxis={"title": {"text": "credits available"}, "rangemode": "tozero"},
        ),
    }
    notes = []
    if len(tracked) > len(shown):
        notes.append(f"the {len(shown)} busiest of {len(tracked)} connections")
    if reduced:
        notes.append("reduced, keeping each bucket's lowest and highest balance")
    fig.reduced_note = "; ".join(notes)
    return fig


def _credit_streams(capture: Capture, streams: list[int]) -> list[int]:
    if "concurrency" not in capture.table_names:
        return []
    table = capture.table("concurrency")
    if "credits_tracked" not in table.schema.names:
        return []
    tracked = {
        int(r["stream"])
        for r in table.select(["stream", "credits_tracked"]).to_pylist()
        if r["credits_tracked"]
    }
    return [s for s in streams if s in tracked]


_PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)


def _palette(i: int) -> str:
    return _PALETTE[i % len(_PALETTE)]


_BREAKDOWN_TITLES = {
    "op": ("Time by operation", "operation"),
    "client": ("Time by client", "client"),
    "server": ("Time by server", "server"),
    "file": ("Time by file or share", "file or share"),
}


def breakdown_figure(fig_id: str, capture: Capture, group: SrtGroup, breakdown: str) -> Figure:
    """Total response time per key (stacked by operation), the top keys."""
    import pyarrow.compute as pc

    title, what = _BREAKDOWN_TITLES[breakdown]
    caption = (
        f"Sum of the response times per {what}, split by operation; hover for the calls "
        "and the mean. Where the waiting adds up."
    )
    fig = Figure(fig_id, title, caption, height=0)
    if "srt" not in capture.table_names:
        fig.missing = "no srt table"
        return fig
    table = _group_filter(capture.table("srt"), group)
    table = table.filter(pc.equal(table["breakdown"], breakdown))
    if table.num_rows == 0:
        fig.missing = f"no breakdown by {what}"
        return fig
    rows = table.select(["key", "op", "calls", "answered", "sum_ms"]).to_pylist()
    if breakdown == "op":
        for r in rows:
            r["key"] = r["op"]
    per_key: dict[str, float] = {}
    per_op: dict[str, float] = {}
    for r in rows:
        k = str(r["key"] if r["key"] is not None else "")
        per_key[k] = per_key.get(k, 0.0) + float(r["sum_ms"] or 0.0)
        per_op[str(r["op"])] = per_op.get(str(r["op"]), 0.0) + float(r["sum_ms"] or 0.0)
    keys = sorted(per_key, key=lambda k: (-per_key[k], k))
    top_keys = keys[:BREAKDOWN_TOP]
    others = keys[BREAKDOWN_TOP:]
    ops = sorted(per_op, key=lambda o: (-per_op[o], o))[:10]
    other_ops = set(per_op) - set(ops)
    labels = [ptext(k if k != "" else "(none)") for k in top_keys]
    others_label = f"({len(others)} others)"
    if others:
        labels.append(others_label)
    traces = []
    for i, op in enumerate([*ops, *(["other operations"] if other_ops else [])]):
        sums = dict.fromkeys(range(len(labels)), 0.0)
        calls = dict.fromkeys(range(len(labels)), 0)
        for r in rows:
            k = str(r["key"] if r["key"] is not None else "")
            r_op = str(r["op"])
            if (op == "other operations" and r_op in other_ops) or r_op == op:
                idx = top_keys.index(k) if k in per_key and k in top_keys else len(top_keys)
                sums[idx] += float(r["sum_ms"] or 0.0)
                calls[idx] += int(r["answered"] or 0)
        if not any(sums.values()) and not any(calls.values()):
            continue
        traces.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": ptext(op),
                "y": labels,
                "x": [round(sums[j] / 1000.0, 6) for j in range(len(labels))],
                "customdata": [
                    [calls[j], _fmt_ms(sums[j] / calls[j]) if calls[j] else "-"]
                    for j in range(len(labels))
                ],
                "marker": {"color": _palette(i)},
                "showlegend": breakdown != "op",
                "hovertemplate": "%{y}<br>"
                + ptext(op)
                + ": %{x:.3f} s in %{customdata[0]} calls (mean %{customdata[1]})<extra></extra>",
            }
        )
    fig.height = max(220, 60 + 22 * len(labels))
    fig.spec = {
        "data": traces,
        "layout": base_layout(
            barmode="stack",
            xaxis={"title": {"text": "total response time (s)"}, "rangemode": "tozero"},
            yaxis={"autorange": "reversed", "automargin": True, "type": "category"},
            margin={"l": 10, "r": 20, "t": 10, "b": 50},
        ),
    }
    if others:
        fig.reduced_note = (
            f"the {len(top_keys)} {what}s with the most time; "
            f"{len(others)} more are summed in '{others_label}'"
        )
    return fig


def breakdown_totals(
    capture: Capture, group: SrtGroup, breakdown: str, top: int = BREAKDOWN_TOP
) -> tuple[list[dict[str, Any]], int]:
    """Per key of a breakdown: calls, errors, unanswered, total/max/mean response time
    (over all operations), the ``top`` keys by total time, and the number of keys."""
    import pyarrow.compute as pc

    if "srt" not in capture.table_names:
        return [], 0
    table = _group_filter(capture.table("srt"), group)
    table = table.filter(pc.equal(table["breakdown"], breakdown))
    if table.num_rows == 0:
        return [], 0
    per: dict[str, dict[str, Any]] = {}
    cols = ["key", "op", "answered", "errors", "unanswered", "sum_ms", "max_ms"]
    for r in table.select(cols).to_pylist():
        key = str(r["key"] if r["key"] is not None else "")
        e = per.setdefault(
            key,
            {
                "key": key,
                "calls": 0,
                "errors": 0,
                "unanswered": 0,
                "sum_ms": 0.0,
                "max_ms": None,
                "ops": {},
            },
        )
        e["calls"] += int(r["answered"] or 0)
        e["errors"] += int(r["errors"] or 0)
        e["unanswered"] += int(r["unanswered"] or 0)
        e["sum_ms"] += float(r["sum_ms"] or 0.0)
        if r["max_ms"] is not None:
            e["max_ms"] = max(float(r["max_ms"]), e["max_ms"] or 0.0)
        e["ops"][str(r["op"])] = e["ops"].get(str(r["op"]), 0) + int(r["answered"] or 0)
    rows = sorted(per.values(), key=lambda e: (-e["sum_ms"], -e["calls"], e["key"]))
    for e in rows:
        e["mean_ms"] = e["sum_ms"] / e["calls"] if e["calls"] else None
        ops = sorted(e["ops"].items(), key=lambda kv: -kv[1])
        e["ops"] = ops[:4]
    return rows[:top], len(rows)


def protocol_views(capture: Capture, t0: int, t0_text: str) -> list[ProtocolView]:
    """One view per protocol and version with calls, busiest first."""
    groups = [g for g in srt_groups(capture) if g.calls or g.unanswered]
    if not groups:
        return []
    tx_all = (
        _view_columns(capture.table("transactions"))
        if "transactions" in capture.table_names
        else None
    )
    by_stream = stream_groups(capture)
    views = []
    for group in groups:
        view = ProtocolView(group)
        tx = _group_filter(tx_all, group) if tx_all is not None else None
        view.transactions = tx.num_rows if tx is not None else 0
        streams = _busiest_streams(tx) if tx is not None else []
        view.streams = [s for s in streams if by_stream.get(s) == group.key] or streams
        key = group.key
        if tx is not None:
            view.figures.append(heatmap_figure(f"heat-{key}", tx, t0, t0_text))
        view.figures.append(outstanding_figure(f"outst-{key}", capture, view.streams, t0, t0_text))
        if group.protocol == "smb2":
            view.figures.append(
                credits_figure(f"credits-{key}", capture, view.streams, t0, t0_text)
            )
        for breakdown in ("op", "client", "file"):
            view.figures.append(
                breakdown_figure(f"brk-{breakdown}-{key}", capture, group, breakdown)
            )
        for breakdown in ("file", "client"):
            view.tables[breakdown] = breakdown_totals(capture, group, breakdown)
        views.append(view)
    return views


def _busiest_streams(tx: pa.Table) -> list[int]:
    if tx.num_rows == 0:
        return []
    counts = tx.group_by("stream").aggregate([("id", "count")]).to_pylist()
    counts.sort(key=lambda r: (-int(r["id_count"]), int(r["stream"])))
    return [int(r["stream"]) for r in counts]
