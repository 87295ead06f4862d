"""What a diagnosis rule produces: a :class:`Finding`, with its evidence.

Findings are data, not text: views (terminal, JSON, HTML) render them, and
other tools key on their stable ``id`` (see docs/findings.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Severity = Literal["critical", "warning", "info"]

#: Stable finding ids (other tools key on them; never rename, only add).
FINDING_IDS: tuple[str, ...] = (
    "receiver-stall",
    "congestion-loss",
    "reordering",
    "receive-window-limited",
    "server-latency",
    "client-concurrency-limit",
    "credit-starvation",
    "request-size-limited",
    "metadata-heavy",
    "protocol-errors",
    "connection-resets",
    "capture-incomplete",
    "encrypted-smb",
    # Not a problem: what limits the transfer when nothing is wrong.
    "healthy",
)

SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}


@dataclass(frozen=True)
class TimeRange:
    """A span of capture time, nanoseconds since the epoch."""

    start_ns: int
    end_ns: int
    stream: int | None = None
    label: str = ""


@dataclass
class Evidence:
    """The numbers that prove a finding, and where to look."""

    #: Named numbers, units in the name: {"zero_window_episodes": 7, "stalled_fraction": 0.41}.
    numbers: dict[str, float | int | str] = field(default_factory=dict)
    time_ranges: list[TimeRange] = field(default_factory=list)
    #: Up to a few dozen frame numbers (open in Wireshark with ``frame.number == N``).
    frames: list[int] = field(default_factory=list)
    #: A Wireshark display filter that shows the evidence.
    wireshark_filter: str = ""


@dataclass
class Impact:
    """What the problem costs."""

    #: Estimated share of the transfer time (0..1) lost to it, if known.
    time_share: float | None = None
    #: Throughput observed, and what it would be without the problem (bit/s).
    observed_bps: float | None = None
    potential_bps: float | None = None
    #: One sentence: how the potential figure was estimated (e.g. "window ÷ RTT").
    basis: str = ""


@dataclass
class Finding:
    id: str
    severity: Severity
    title: str
    #: A few sentences in the user's terms: what happens and what it means.
    explanation: str
    evidence: Evidence
    impact: Impact
    next_steps: list[str]
    #: 0..1: how sure the rule is.
    confidence: float
    streams: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.id not in FINDING_IDS:
            raise ValueError(f"unknown finding id {self.id!r}")
        if self.severity not in SEVERITY_RANK:
            raise ValueError(f"unknown severity {self.severity!r}")

    def rank_key(self) -> tuple[int, float, float]:
        """Sort key: severity first, then impact (time share), then confidence."""
        share = self.impact.time_share if self.impact.time_share is not None else 0.0
        return (SEVERITY_RANK[self.severity], -share, -self.confidence)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
