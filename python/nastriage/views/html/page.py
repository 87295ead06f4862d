"""Assemble the self-contained HTML report.

Layout: header (what was read), the verdicts, the conversations table, one article per
charted connection, one per protocol, and notes on how the page was made. Text is written
here, HTML-escaped (:func:`text.esc`); chart data goes into one JSON block that the page's
script hands to Plotly. plotly.js and the script are inlined, and a Content-Security-Policy
allows exactly those two scripts (by SHA-256) and nothing from the network.
"""

from __future__ import annotations

import base64
import hashlib
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nastriage.views.html.figures import Figure
from nastriage.views.html.protocols import ProtocolView, protocol_views, stream_groups
from nastriage.views.html.streams import StreamView, load_segments, stream_view, table_rows
from nastriage.views.html.text import attr_num, esc, json_for_script

if TYPE_CHECKING:
    from nastriage.capture import Capture
    from nastriage.diagnosis.finding import Finding

__all__ = ["ReportInfo", "build_report"]

HERE = Path(__file__).resolve().parent

#: Connections that get their own charts: those named by findings first, then the
#: busiest by bytes, up to this many in all.
DEFAULT_MAX_STREAMS = 6
#: Most rows of the conversations table (the busiest by bytes).
MAX_TABLE_ROWS = 5000
#: Most frames listed per finding.
MAX_FRAMES_SHOWN = 40


@dataclass
class ReportInfo:
    """What went into a report (for the CLI and tests)."""

    size_bytes: int = 0
    figures: int = 0
    streams: list[int] = field(default_factory=list)
    protocols: list[str] = field(default_factory=list)
    findings: int = 0
    build_seconds: float = 0.0


def _plotly_js() -> str:
    try:
        from plotly.offline import get_plotlyjs
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the HTML report needs the plotly package (pip install plotly)") from exc
    js: str = get_plotlyjs()
    return js


def _csp_hash(script: str) -> str:
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def _t0_text(ns: int) -> str:
    from nastriage.units import rfc3339_ns

    text = rfc3339_ns(ns) or "?"
    return text[:10] + " " + text[11:26] + " UTC"


def _time_origin(capture: Capture) -> int:
    firsts = [
        int(c["first_time_ns"]) for c in capture.captures if c.get("first_time_ns") is not None
    ]
    return min(firsts) if firsts else 0


# -- findings --------------------------------------------------------------------------------


def run_diagnosis(capture: Capture) -> tuple[list[Finding] | None, str]:
    """The findings, or None and why not."""
    try:
        from nastriage.diagnosis.run import diagnose
    except ImportError:
        return None, "the diagnosis rules are not part of this version of nastriage"
    try:
        findings = list(diagnose(capture))
    except Exception as exc:  # a broken rule must not cost the whole report
        return None, f"the diagnosis failed: {type(exc).__name__}: {exc}"
    return sorted(findings, key=lambda f: f.rank_key()), ""


#: Which charts show the evidence of each finding, best first. "{s}": the stream,
#: "{d}": its data direction, "{g}": its protocol group.
_FINDING_CHARTS: dict[str, tuple[str, ...]] = {
    "receiver-stall": ("seq-{s}-{d}", "inflight-{s}", "io-{s}"),
    "congestion-loss": ("seq-{s}-{d}", "io-{s}", "limits-{s}"),
    "reordering": ("seq-{s}-{d}",),
    "receive-window-limited": ("inflight-{s}", "seq-{s}-{d}", "limits-{s}"),
    "server-latency": ("heat-{g}", "rtt-{s}"),
    "client-concurrency-limit": ("outst-{g}", "inflight-{s}"),
    "credit-starvation": ("credits-{g}", "outst-{g}"),
    "request-size-limited": ("brk-op-{g}", "io-{s}"),
    "metadata-heavy": ("brk-op-{g}", "heat-{g}"),
    "protocol-errors": ("heat-{g}",),
    "connection-resets": ("io-{s}",),
    "capture-incomplete": ("seq-{s}-{d}",),
    "encrypted-smb": ("io-{s}",),
    "healthy": ("limits-{s}", "io-{s}"),
}


@dataclass
class _Link:
    """A chart that shows a finding, and the time ranges to zoom to (label, x0, x1)."""

    fig_id: str
    title: str
    ranges: list[tuple[str, float | None, float | None]] = field(default_factory=list)


#: Most time ranges linked per chart of a finding.
MAX_RANGE_LINKS = 12


def _finding_links(
    f: Finding,
    figures: dict[str, Figure],
    data_dirs: dict[int, str],
    groups: dict[int, str],
    t0: int,
) -> list[_Link]:
    """The charts that show ``f``: for each stream it names, the best chart with every time
    range, and the other relevant charts with the span of all of them."""
    templates = _FINDING_CHARTS.get(f.id, ("io-{s}",))
    ranges = list(f.evidence.time_ranges)
    streams: list[int | None] = []
    for tr in ranges:
        if tr.stream is not None and tr.stream not in streams:
            streams.append(tr.stream)
    for st in f.streams:
        if st not in streams:
            streams.append(st)
    if not streams:
        streams = [None]
    links: list[_Link] = []
    seen: set[str] = set()
    for s in streams[:3]:
        mine = [tr for tr in ranges if tr.stream is None or tr.stream == s]
        first = True
        for tpl in templates:
            fig_id = tpl.format(
                s=s if s is not None else "?",
                d=data_dirs.get(s, "s2c") if s is not None else "?",
                g=groups.get(s, "?") if s is not None else _any_group(figures),
            )
            fig = figures.get(fig_id)
            if fig is None or not fig.present or fig_id in seen:
                continue
            seen.add(fig_id)
            title = fig.title
            if s is not None and not fig_id.startswith(("heat-", "outst-", "credits-", "brk-")):
                title += f", stream {s}"
            link = _Link(fig_id, title)
            timed = fig_id.split("-")[0] not in ("brk", "limits")
            if timed and mine:
                if first:
                    for tr in mine[:MAX_RANGE_LINKS]:
                        x0 = (tr.start_ns - t0) / 1e9
                        x1 = (tr.end_ns - t0) / 1e9
                        label = f"{x0:.3f}\u2013{x1:.3f} s" + (f" ({tr.label})" if tr.label else "")
                        link.ranges.append((label, x0, x1))
                else:
                    x0 = (min(tr.start_ns for tr in mine) - t0) / 1e9
                    x1 = (max(tr.end_ns for tr in mine) - t0) / 1e9
                    link.ranges.append((f"{x0:.3f}\u2013{x1:.3f} s", x0, x1))
            links.append(link)
            first = False
    return links


def _any_group(figures: dict[str, Figure]) -> str:
    for fig_id in figures:
        if fig_id.startswith("heat-"):
            return fig_id[len("heat-") :]
    return "?"


def _fmt_number(name: str, value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return esc(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        if name.endswith(("_fraction", "_share")) and 0 <= value <= 1:
            return f"{value * 100:.1f}%"
        return f"{value:,.4g}"
    return esc(value)


def _render_finding(n: int, f: Finding, links: list[_Link]) -> str:
    from nastriage.units import human_bitrate

    sev = esc(f.severity)
    fid = esc(f.id)
    parts = [f'<article class="finding sev-{sev} id-{fid}" id="finding-{n}">']
    parts.append(
        f'<h3><span class="badge sev-{sev} id-{fid}">{sev}</span>'
        f"<span>{esc(f.title)}</span>"
        f'<span class="conf">{fid} \u00b7 confidence {f.confidence * 100:.0f}%</span></h3>'
    )
    numbers = f.evidence.numbers
    if numbers:
        first = ", ".join(
            f"{esc(k.replace('_', ' '))} {_fmt_number(k, v)}" for k, v in list(numbers.items())[:3]
        )
        parts.append(f'<p class="evidence-line">{first}</p>')
    parts.append(f'<p class="explanation">{esc(f.explanation)}</p>')
    if f.next_steps:
        parts.append('<p><strong>Next steps</strong></p><ol class="next">')
        parts.extend(f"<li>{esc(step)}</li>" for step in f.next_steps)
        parts.append("</ol>")
    dl = []
    for k, v in numbers.items():
        dl.append(f"<dt>{esc(k.replace('_', ' '))}</dt><dd>{_fmt_number(k, v)}</dd>")
    imp = f.impact
    if imp.time_share is not None:
        dl.append(f"<dt>share of the time lost</dt><dd>{imp.time_share * 100:.1f}%</dd>")
    if imp.observed_bps is not None:
        dl.append(f"<dt>throughput observed</dt><dd>{esc(human_bitrate(imp.observed_bps))}</dd>")
    if imp.potential_bps is not None:
        dl.append(f"<dt>throughput possible</dt><dd>{esc(human_bitrate(imp.potential_bps))}</dd>")
    if imp.basis:
        dl.append(f"<dt>estimate</dt><dd>{esc(imp.basis)}</dd>")
    if f.streams:
        refs = ", ".join(f'<a href="#stream-{int(s)}">{int(s)}</a>' for s in f.streams[:20])
        dl.append(f"<dt>connections (tcp.stream)</dt><dd>{refs}</dd>")
    if dl:
        parts.append("<details open><summary>Evidence</summary><dl>" + "".join(dl) + "</dl>")
    else:
        parts.append("<details open><summary>Evidence</summary>")
    frames = [int(x) for x in f.evidence.frames]
    if frames:
        shown = ", ".join(str(x) for x in frames[:MAX_FRAMES_SHOWN])
        more = (
            f" and {len(frames) - MAX_FRAMES_SHOWN} more" if len(frames) > MAX_FRAMES_SHOWN else ""
        )
        parts.append(
            '<p class="frames"><strong>Frames:</strong> '
            f'<span class="mono">{shown}</span>{more}</p>'
        )
    if f.evidence.wireshark_filter:
        parts.append(
            f'<p class="filter"><strong>Wireshark filter:</strong> '
            f'<code id="filter-{n}">{esc(f.evidence.wireshark_filter)}</code> '
            f'<button type="button" class="copy" data-target="filter-{n}">copy</button></p>'
        )
    elif frames:
        flt = "frame.number in {" + " ".join(str(x) for x in frames[:MAX_FRAMES_SHOWN]) + "}"
        parts.append(
            f'<p class="filter"><strong>Wireshark filter:</strong> <code id="filter-{n}">'
            f'{esc(flt)}</code> <button type="button" class="copy" data-target="filter-{n}">'
            "copy</button></p>"
        )
    parts.append("</details>")
    if links:
        items = []
        for link in links:
            fid = esc(link.fig_id)
            if not link.ranges:
                items.append(
                    f'<li><a class="show-range" href="#fig-{fid}" data-fig="{fid}">'
                    f"{esc(link.title)}</a></li>"
                )
                continue
            zooms = ", ".join(
                f'<a class="show-range" href="#fig-{fid}" data-fig="{fid}" '
                f'data-x0="{attr_num(x0)}" data-x1="{attr_num(x1)}">{esc(label)}</a>'
                for label, x0, x1 in link.ranges
            )
            items.append(f"<li>{esc(link.title)}: {zooms}</li>")
        parts.append('<p><strong>See it</strong></p><ul class="links">' + "".join(items) + "</ul>")
    parts.append("</article>")
    return "\n".join(parts)


# -- tables ----------------------------------------------------------------------------------


def _th(label: str, numeric: bool = True, cls: str = "") -> str:
    kind = "num" if numeric else "text"
    c = f' class="{cls}"' if cls else ""
    return f'<th data-type="{kind}"{c}><button type="button">{esc(label)}</button></th>'


def _td(text: str, sort: float | int | str | None = None, cls: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    v = ""
    if sort is not None:
        v = f' data-v="{attr_num(sort) if isinstance(sort, (int, float)) else esc(sort)}"'
    return f"<td{c}{v}>{text}</td>"


def _event_counts(capture: Capture) -> dict[int, dict[str, int]]:
    if "tcp_events" not in capture.table_names:
        return {}
    t = capture.table("tcp_events")
    if t.num_rows == 0:
        return {}
    counts = t.group_by(["stream", "kind"]).aggregate([("frame", "count_distinct")])
    out: dict[int, dict[str, int]] = {}
    for r in counts.to_pylist():
        out.setdefault(int(r["stream"]), {})[str(r["kind"])] = int(r["frame_count_distinct"])
    return out


def _conversations_table(
    capture: Capture, charted: set[int], groups: dict[int, str], labels: dict[str, str]
) -> tuple[str, int, int]:
    from nastriage.units import human_bitrate, human_bytes, human_count, human_duration
    from nastriage.views.summary import endpoint, top_conversations

    rows, total = top_conversations(capture, MAX_TABLE_ROWS)
    events = _event_counts(capture)
    conv = capture.conversations
    flags: dict[int, tuple[bool, bool, bool]] = {}
    if total:
        for r in conv.select(["stream", "syn", "fin", "rst"]).to_pylist():
            flags[int(r["stream"])] = (bool(r["syn"]), bool(r["fin"]), bool(r["rst"]))
    head = (
        "<thead><tr>"
        + _th("Stream")
        + _th("Client", False, "l")
        + _th("Server", False, "l")
        + _th("Protocol", False, "l")
        + _th("Frames")
        + _th("Bytes C\u2192S")
        + _th("Bytes S\u2192C")
        + _th("Duration")
        + _th("Rate C\u2192S")
        + _th("Rate S\u2192C")
        + _th("Retrans.")
        + _th("Zero win.")
        + _th("Lost seg.")
        + _th("RST", False)
        + "</tr></thead>"
    )
    body = []
    for r in rows:
        s = int(r["stream"])
        ev = events.get(s, {})
        frames = int(r["frames_c2s"]) + int(r["frames_s2c"])
        stream_cell = f'<a href="#stream-{s}">{s}</a>' if s in charted else str(s)
        proto = labels.get(groups.get(s, ""), "")
        rst = flags.get(s, (False, False, False))[2]
        body.append(
            "<tr>"
            + _td(stream_cell, s)
            + _td(esc(endpoint(r["client_ip"], r["client_port"])), cls="l")
            + _td(esc(endpoint(r["server_ip"], r["server_port"])), cls="l")
            + _td(esc(proto), cls="l")
            + _td(human_count(frames), frames)
            + _td(esc(human_bytes(r["bytes_c2s"])), int(r["bytes_c2s"]))
            + _td(esc(human_bytes(r["bytes_s2c"])), int(r["bytes_s2c"]))
            + _td(esc(human_duration(r["duration_s"])), r["duration_s"])
            + _td(esc(human_bitrate(r["throughput_c2s_bps"])), r["throughput_c2s_bps"])
            + _td(esc(human_bitrate(r["throughput_s2c_bps"])), r["throughput_s2c_bps"])
            + _td(human_count(ev.get("retransmission", 0)), ev.get("retransmission", 0))
            + _td(human_count(ev.get("zero_window", 0)), ev.get("zero_window", 0))
            + _td(human_count(ev.get("lost_segment", 0)), ev.get("lost_segment", 0))
            + _td("yes" if rst else "", "yes" if rst else "")
            + "</tr>"
        )
    html = (
        '<div class="table-wrap"><table class="sortable" id="conversations-table">'
        + head
        + "<tbody>"
        + "\n".join(body)
        + "</tbody></table></div>"
    )
    return html, len(rows), total


def _srt_table(view: ProtocolView) -> str:
    from nastriage.views.srt import SRT_COLUMNS, srt_cell

    g = view.group
    heads = []
    for header, key, _ in SRT_COLUMNS:
        if key == "op" and g.protocol == "smb2":
            header = "Commands"
        heads.append(
            _th(
                header + (" (s)" if key.endswith("_ms") else ""),
                key != "op",
                "l" if key == "op" else "",
            )
        )
    body = []
    for r in g.rows:
        cells = []
        for _, key, _ in SRT_COLUMNS:
            text = srt_cell(r, key)
            if key == "op":
                cells.append(_td(esc(text), str(r.get("op") or ""), "l"))
            else:
                v = r.get(key)
                cells.append(_td(esc(text), float(v) if v is not None else None))
        body.append("<tr>" + "".join(cells) + "</tr>")
    notes = []
    if g.tshark:
        notes.append(
            f"Times in seconds, as tshark -q {esc(g.tshark)} prints them, plus percentiles."
        )
    if g.unanswered:
        notes.append(f"{g.unanswered:,} calls unanswered (not in Calls).")
    if g.errors:
        notes.append(f"{g.errors:,} answered with an error.")
    return (
        f'<div class="table-wrap"><table class="sortable srt" id="srt-{esc(g.key)}"><thead><tr>'
        + "".join(heads)
        + "</tr></thead><tbody>"
        + "\n".join(body)
        + "</tbody></table></div>"
        + (f'<p class="note">{" ".join(notes)}</p>' if notes else "")
    )


# -- figures ---------------------------------------------------------------------------------


def _render_figure(fig: Figure, stream: int | None = None) -> str:
    fid = esc(fig.id)
    out = [f'<div class="figure" id="fig-{fid}">']
    out.append(f"<h4>{esc(fig.title)}</h4>")
    if fig.caption:
        out.append(f'<p class="caption">{esc(fig.caption)}</p>')
    if not fig.present:
        out.append(f'<p class="missing">Not available: {esc(fig.missing)}.</p></div>')
        return "".join(out)
    controls = []
    if "io-interval" in fig.controls and stream is not None:
        controls.append(
            f'<label>Interval <select class="io-interval" data-fig="{fid}" data-stream="{stream}">'
        )
        controls.append("__IO_OPTIONS__")
        controls.append("</select></label>")
    controls.append(
        f'<button type="button" class="reset-zoom" data-fig="{fid}">reset zoom</button>'
    )
    controls.append('<span class="chart-status">drawing\u2026</span>')
    out.append('<div class="controls">' + "".join(controls) + "</div>")
    height = fig.height or 360
    fity = "1" if fig.id.split("-")[0] in ("seq", "inflight", "io", "outst", "credits") else "0"
    out.append(
        f'<div class="chart" id="chart-{fid}" data-fig="{fid}" data-height="{height}" '
        f'data-fity="{fity}" '
        f'style="height:{height}px" role="img" aria-label="{esc(fig.title)}"></div>'
    )
    out.append(
        f'<p class="reduced" id="note-{fid}"{"" if fig.reduced_note else " hidden"}>'
        f"{esc(fig.reduced_note)}</p>"
    )
    out.append("</div>")
    return "".join(out)


def _stream_article(view: StreamView, t0: int) -> str:
    out = [f'<article class="stream" id="stream-{view.stream}">']
    out.append(f"<h3>Stream {view.stream}: {esc(view.client)} \u2192 {esc(view.server)}</h3>")
    out.append('<dl class="kv">')
    for k, v in view.summary:
        out.append(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>")
    out.append("</dl>")
    if view.episodes:
        out.append("<h4>Zero-window episodes</h4>")
        out.append(
            '<div class="table-wrap"><table><thead><tr><th>From (s)</th><th>To (s)</th>'
            '<th>Duration</th><th class="l">Stalled</th><th>Frames</th><th>Probes</th>'
            '<th class="l">Show</th></tr></thead><tbody>'
        )
        for e in view.episodes[:200]:
            x0 = (int(e.get("start") or t0) - t0) / 1e9
            x1 = (int(e.get("end") or e.get("start") or t0) - t0) / 1e9
            stalled = e.get("stalled_direction") or ""
            who = "client \u2192 server" if stalled == "c2s" else "server \u2192 client"
            fig_id = f"seq-{view.stream}-{stalled or view.data_dir}"
            duration = float(e.get("duration_s") or 0)
            frames = f"{esc(e.get('start_frame'))}\u2013{esc(e.get('end_frame'))}"
            out.append(
                f"<tr><td>{x0:.6f}</td><td>{x1:.6f}</td><td>{duration:.3f} s</td>"
                f'<td class="l">{esc(who)}</td><td>{frames}</td>'
                f"<td>{esc(e.get('probes'))}</td>"
                f'<td class="l"><a class="show-range" href="#fig-{esc(fig_id)}" '
                f'data-fig="{esc(fig_id)}" data-x0="{attr_num(x0)}" data-x1="{attr_num(x1)}">'
                "sequence graph</a></td></tr>"
            )
        out.append("</tbody></table></div>")
        if len(view.episodes) > 200:
            out.append(f'<p class="note">first 200 of {len(view.episodes)} episodes</p>')
    for note in view.notes:
        out.append(f'<p class="note">{esc(note)}</p>')
    io_options = ""
    if view.io is not None:
        default = view.io["default"]
        io_options = "".join(
            f'<option value="{esc(label)}"{" selected" if label == default else ""}>'
            f"{esc(label)}</option>"
            for label in view.io["intervals"]
        )
    for fig in view.figures:
        out.append(_render_figure(fig, view.stream).replace("__IO_OPTIONS__", io_options))
    out.append("</article>")
    return "\n".join(out)


def _breakdown_table(table_id: str, title: str, rows: list[dict[str, Any]], total: int) -> str:
    from nastriage.views.srt import seconds6

    head = (
        "<thead><tr>"
        + _th("Name", False, "l")
        + _th("Calls")
        + _th("Errors")
        + _th("Unanswered")
        + _th("Sum SRT (s)")
        + _th("Avg SRT (s)")
        + _th("Max SRT (s)")
        + _th("Operations", False, "l")
        + "</tr></thead>"
    )
    body = []
    for r in rows:
        name = r["key"] if r["key"] != "" else "(none)"
        ops = ", ".join(f"{op} \u00d7{n}" for op, n in r["ops"])
        body.append(
            "<tr>"
            + _td(esc(name), str(name), "name")
            + _td(f"{r['calls']:,}", r["calls"])
            + _td(f"{r['errors']:,}", r["errors"])
            + _td(f"{r['unanswered']:,}", r["unanswered"])
            + _td(esc(seconds6(r["sum_ms"])), r["sum_ms"])
            + _td(esc(seconds6(r["mean_ms"])), r["mean_ms"])
            + _td(esc(seconds6(r["max_ms"])), r["max_ms"])
            + _td(esc(ops), cls="l")
            + "</tr>"
        )
    more = (
        f'<p class="note">the {len(rows)} with the most time of {total:,}</p>'
        if total > len(rows)
        else ""
    )
    return (
        f"<h4>{esc(title)}</h4>"
        f'<div class="table-wrap"><table class="sortable breakdown" id="{esc(table_id)}">'
        + head
        + "<tbody>"
        + "\n".join(body)
        + "</tbody></table></div>"
        + more
    )


def _protocol_article(view: ProtocolView) -> str:
    key = esc(view.key)
    g = view.group
    out = [f'<article class="protocol" id="proto-{key}">']
    out.append(
        f"<h3>{esc(view.label)}: {g.calls:,} calls"
        + (
            f", {len(view.streams)} connection{'s' if len(view.streams) != 1 else ''}"
            if view.streams
            else ""
        )
        + "</h3>"
    )
    out.append("<h4>Service response time</h4>")
    out.append(_srt_table(view))
    out.extend(_render_figure(fig) for fig in view.figures)
    for breakdown, title in (("file", "Files and shares"), ("client", "Clients")):
        rows, total = view.tables.get(breakdown, ([], 0))
        if rows:
            out.append(_breakdown_table(f"{breakdown}s-{view.key}", title, rows, total))
    out.append("</article>")
    return "\n".join(out)


# -- the page --------------------------------------------------------------------------------


#: A connection with less payload than this (both ways) and less than 1 % of the
#: busiest one's gets no charts unless a problem finding names it.
MIN_CHART_PAYLOAD = 64 * 1024


def _chart_streams(capture: Capture, findings: list[Finding] | None, max_streams: int) -> list[int]:
    """The connections to chart: those named by findings above info level (and the
    ``healthy`` one), then the busiest by bytes, up to ``max_streams`` (more only for
    findings, up to twice that)."""
    from nastriage.views.summary import top_conversations

    chosen: list[int] = []

    def add(stream: int | None, limit: int) -> None:
        if stream is not None and int(stream) not in chosen and len(chosen) < limit:
            chosen.append(int(stream))

    for f in findings or []:
        if f.severity == "info" and f.id != "healthy":
            continue
        for s in f.streams:
            add(s, 2 * max_streams)
        for tr in f.evidence.time_ranges:
            add(tr.stream, 2 * max_streams)
    rows, _ = top_conversations(capture, max_streams)
    payload = {
        int(r["stream"]): int(r["payload_bytes_c2s"] or 0) + int(r["payload_bytes_s2c"] or 0)
        for r in table_rows(
            capture.conversations.select(["stream", "payload_bytes_c2s", "payload_bytes_s2c"])
        )
    }
    biggest = max(payload.values(), default=0)
    for r in rows:
        s = int(r["stream"])
        p = payload.get(s, 0)
        if p < MIN_CHART_PAYLOAD and p < 0.01 * biggest:
            continue
        add(s, max_streams)
    return chosen


def build_report(
    capture: Capture,
    *,
    findings: Sequence[Finding] | None = None,
    diagnosis_note: str = "",
    max_streams: int = DEFAULT_MAX_STREAMS,
    info: ReportInfo | None = None,
) -> str:
    """The report as one HTML document (a string).

    ``findings`` None runs the diagnosis (if this version has it); pass them when they are
    already computed. ``info`` (if given) is filled in with what went into the page.
    """
    started = time.perf_counter()
    from nastriage import __version__
    from nastriage.units import human_bytes, human_count, human_duration, rfc3339_ns

    if findings is None and not diagnosis_note:
        found, diagnosis_note = run_diagnosis(capture)
    else:
        found = sorted(findings, key=lambda f: f.rank_key()) if findings is not None else None

    t0 = _time_origin(capture)
    t0_text = _t0_text(t0)
    conv_rows = {int(r["stream"]): r for r in table_rows(capture.conversations)}
    streams = [s for s in _chart_streams(capture, found, max_streams) if s in conv_rows]
    seg, seg_missing = load_segments(capture, streams) if streams else (None, "")
    stream_views = [
        stream_view(capture, conv_rows[s], seg, t0, t0_text, seg_missing) for s in streams
    ]
    proto_views = protocol_views(capture, t0, t0_text)
    groups = stream_groups(capture)
    group_labels = {v.key: v.label for v in proto_views}

    figures: dict[str, Figure] = {}
    for sv in stream_views:
        figures.update((f.id, f) for f in sv.figures)
    for pv in proto_views:
        figures.update((f.id, f) for f in pv.figures)
    data_dirs = {sv.stream: sv.data_dir for sv in stream_views}

    # -- header
    caps = capture.captures
    firsts = [int(c["first_time_ns"]) for c in caps if c.get("first_time_ns") is not None]
    lasts = [int(c["last_time_ns"]) for c in caps if c.get("last_time_ns") is not None]
    duration = (max(lasts) - min(firsts)) / 1e9 if firsts and lasts else None
    names = [("standard input" if c.get("path") == "-" else str(c.get("path"))) for c in caps]
    title = "nastriage report: " + (names[0] if len(names) == 1 else f"{len(names)} files")
    meta = [
        ", ".join(esc(n) for n in names[:5])
        + (f" and {len(names) - 5} more" if len(names) > 5 else ""),
        f"{human_count(capture.frames)} frames",
        esc(human_bytes(capture.bytes)),
        esc(human_duration(duration)),
        "from " + esc(_t0_text(t0)) if firsts else "empty",
    ]
    body: list[str] = []
    body.append('<header class="top">')
    body.append(f"<h1>{esc(title)}</h1>")
    body.append('<p class="meta">' + "".join(f"<span>{m}</span>" for m in meta) + "</p>")
    body.append("</header>")

    nav = ['<a href="#verdicts">Verdicts</a>', '<a href="#conversations">Conversations</a>']
    if stream_views:
        nav.append('<a href="#streams">Connections</a>')
        nav.extend(f'<a href="#stream-{sv.stream}">stream {sv.stream}</a>' for sv in stream_views)
    if proto_views:
        nav.append('<a href="#protocols">Protocols</a>')
        nav.extend(f'<a href="#proto-{esc(pv.key)}">{esc(pv.label)}</a>' for pv in proto_views)
    nav.append('<a href="#about">About this page</a>')
    body.append('<nav class="toc">' + "".join(nav) + "</nav>")
    body.append("<main>")

    # -- verdicts
    body.append('<section id="verdicts"><h2>Verdicts</h2>')
    if found is None:
        body.append(f'<p class="missing">No verdicts: {esc(diagnosis_note)}.</p>')
    elif not found:
        body.append('<p class="note">No finding: nothing in this capture matched a rule.</p>')
    else:
        counts: dict[str, int] = {}
        for f in found:
            counts[f.severity] = counts.get(f.severity, 0) + 1
        summary = ", ".join(f"{n} {sev}" for sev, n in counts.items())
        plural = "s" if len(found) != 1 else ""
        body.append(
            f'<p class="note">{len(found)} finding{plural} ({esc(summary)}), most severe first.</p>'
        )
        for n, f in enumerate(found, 1):
            links = _finding_links(f, figures, data_dirs, groups, t0)
            body.append(_render_finding(n, f, links))
    if capture.warnings:
        body.append(
            "<details><summary>Warnings while reading the capture "
            f"({len(capture.warnings):,})</summary><ul>"
        )
        body.extend(f"<li>{esc(w)}</li>" for w in capture.warnings[:200])
        body.append("</ul></details>")
    body.append("</section>")

    # -- conversations
    table_html, shown, total = _conversations_table(capture, set(streams), groups, group_labels)
    body.append('<section id="conversations"><h2>Conversations</h2>')
    if total == 0:
        body.append('<p class="missing">No TCP connections in the capture.</p>')
    else:
        note = (
            f"all {total:,} TCP connections"
            if shown == total
            else f"the {shown:,} with the most bytes of {total:,} TCP connections"
        )
        body.append(
            f'<p class="note">{esc(note)}; stream numbers are Wireshark\'s tcp.stream. '
            "Click a column to sort; linked streams have charts below.</p>"
        )
        body.append(table_html)
    body.append("</section>")

    # -- connections
    body.append('<section id="streams"><h2>Connections</h2>')
    if not stream_views:
        body.append('<p class="missing">No TCP connection to chart.</p>')
    else:
        body.append(
            f'<p class="note">Charts for {len(stream_views)} connection'
            f"{'s' if len(stream_views) != 1 else ''}: those the verdicts name, then the busiest. "
            "Time is in seconds since the capture's first frame "
            f"({esc(t0_text)}); drag to zoom, double-click to reset.</p>"
        )
        body.extend(_stream_article(sv, t0) for sv in stream_views)
    body.append("</section>")

    # -- protocols
    body.append('<section id="protocols"><h2>Protocols</h2>')
    if not proto_views:
        body.append('<p class="missing">No NFS or SMB requests in the capture.</p>')
    body.extend(_protocol_article(pv) for pv in proto_views)
    body.append("</section>")

    # -- about
    body.append('<section id="about"><h2>About this page</h2>')
    body.append(
        "<p>Made by nastriage "
        + esc(__version__)
        + " at "
        + esc((rfc3339_ns(time.time_ns()) or "")[:19] + " UTC")
        + ". It is one self-contained file: it loads nothing from the network and runs only "
        "its own script and the embedded plotly.js. Everything taken from the capture "
        "(file and share names, addresses, paths) is shown as text.</p>"
        "<p>Large captures: series are reduced before they reach the page, keeping the "
        "extremes: line charts keep the lowest and highest point of each time slice; the "
        "engine keeps, for the time-sequence graph, every retransmission, zero window, lost "
        "segment and flagged ACK with its neighbours, and thins the other segments and ACKs "
        "per time slice to the first, last, lowest and highest; the latency heatmap counts "
        "every request and draws the slowest individually. A chart that was reduced says so "
        "under it.</p>"
    )
    body.append("</section>")
    body.append("</main>")
    body.append(f"<footer>nastriage {esc(__version__)} \u00b7 {len(figures)} charts</footer>")

    data: dict[str, Any] = {
        "figures": {fid: f.spec for fid, f in figures.items() if f.present},
        "io": {str(sv.stream): sv.io for sv in stream_views if sv.io is not None},
        "t0": t0,
    }
    for fig in figures.values():
        if fig.present and fig.spec is not None:
            fig.spec.setdefault("layout", {})["height"] = fig.height or 360
    app_js = (HERE / "report.js").read_text(encoding="utf-8")
    plotly_js = _plotly_js()
    css = (HERE / "report.css").read_text(encoding="utf-8")
    csp = (
        "default-src 'none'; "
        f"script-src {_csp_hash(plotly_js)} {_csp_hash(app_js)}; "
        "style-src 'unsafe-inline'; img-src data: blob:; font-src data:; "
        "connect-src 'none'; base-uri 'none'; form-action 'none'; frame-src 'none'; "
        "object-src 'none'"
    )
    html = "".join(
        [
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
            f'<meta http-equiv="Content-Security-Policy" content="{esc(csp)}">\n',
            '<meta name="referrer" content="no-referrer">\n',
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
            f'<meta name="generator" content="nastriage {esc(__version__)}">\n',
            f"<title>{esc(title)}</title>\n<style>\n{css}</style>\n</head>\n<body>\n",
            "\n".join(body),
            '\n<script type="application/json" id="report-data">',
            json_for_script(data),
            "</script>\n<script>",
            plotly_js,
            "</script>\n<script>",
            app_js,
            "</script>\n</body>\n</html>\n",
        ]
    )
    if info is not None:
        info.size_bytes = len(html.encode("utf-8"))
        info.figures = sum(1 for f in figures.values() if f.present)
        info.streams = [sv.stream for sv in stream_views]
        info.protocols = [pv.key for pv in proto_views]
        info.findings = len(found or [])
        info.build_seconds = time.perf_counter() - started
    return html
