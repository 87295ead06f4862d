"""Plotly figure specifications (plain dicts: ``{"data": [...], "layout": {...}}``).

The page hands them to ``Plotly.newPlot`` as they are; nothing here is code. Every string
that came from a capture is passed through :func:`text.ptext` before it gets here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["COLORS", "Figure", "base_layout", "time_axis"]

#: Colours shared by the charts (and the legend text in the page).
COLORS = {
    "c2s": "#1f77b4",  # client -> server
    "s2c": "#ff7f0e",  # server -> client
    "data": "#1f3b73",
    "ack": "#2ca02c",
    "window": "#c9a800",
    "sack": "#9467bd",
    "retransmission": "#d62728",
    "zero_window": "#000000",
    "lost_segment": "#e377c2",
    "out_of_order": "#17becf",
    "rtt": "#8c564b",
    "in_flight": "#1f77b4",
    "outlier": "#d62728",
}


@dataclass
class Figure:
    """One chart of the report."""

    id: str
    title: str
    #: What the chart shows, one or two sentences (plain text).
    caption: str = ""
    spec: dict[str, Any] | None = None
    #: Shown on the chart when the series were reduced (plain text).
    reduced_note: str = ""
    #: Why there is no chart (plain text); the page shows it in place of the chart.
    missing: str = ""
    #: Extra controls: "io-interval" adds the I/O graph's interval selector.
    controls: list[str] = field(default_factory=list)
    height: int = 360

    @property
    def present(self) -> bool:
        return self.spec is not None and not self.missing


def time_axis(t0_text: str) -> dict[str, Any]:
    return {
        "title": {"text": f"seconds since the first frame ({t0_text})"},
        "zeroline": False,
        "showspikes": True,
        "spikemode": "across",
        "spikethickness": 1,
    }


def base_layout(**extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "margin": {"l": 70, "r": 20, "t": 30, "b": 50},
        "hovermode": "closest",
        "legend": {"orientation": "h", "x": 0, "y": 1.0, "xanchor": "left", "yanchor": "bottom"},
        "font": {"family": "system-ui, sans-serif", "size": 12},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "#ffffff",
    }
    layout.update(extra)
    return layout
