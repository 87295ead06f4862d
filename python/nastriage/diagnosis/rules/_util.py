"""Small helpers shared by the rules: wording, numbers, filters."""

from __future__ import annotations

from collections.abc import Iterable

from nastriage.diagnosis.context import Context, StreamInfo
from nastriage.diagnosis.finding import Severity, TimeRange
from nastriage.units import human_bitrate, human_bytes, human_duration

__all__ = [
    "MAX_FRAMES",
    "bitrate",
    "frames",
    "grade",
    "ms",
    "pct",
    "size",
    "stream_filter",
    "time_range",
    "weighted_share",
]

#: Most frame numbers a finding lists.
MAX_FRAMES = 30


def pct(x: float) -> str:
    return f"{100.0 * x:.0f}%" if x >= 0.01 or x == 0 else f"{100.0 * x:.1f}%"


def ms(x: float | None) -> str:
    if x is None:
        return "?"
    return human_duration(x / 1000.0)


def bitrate(bps: float | None) -> str:
    return human_bitrate(bps) if bps is not None else "?"


def size(n: float | None) -> str:
    return human_bytes(n) if n is not None else "?"


def frames(values: Iterable[int], limit: int = MAX_FRAMES) -> list[int]:
    """Distinct frame numbers, in order, at most ``limit``."""
    out: list[int] = []
    seen: set[int] = set()
    for f in values:
        if f and f not in seen:
            seen.add(f)
            out.append(int(f))
            if len(out) >= limit:
                break
    return sorted(out)


def stream_filter(streams: Iterable[int], extra: str = "") -> str:
    ss = sorted(set(streams))
    if not ss:
        return extra
    if len(ss) == 1:
        base = f"tcp.stream == {ss[0]}"
    else:
        base = "tcp.stream in {" + " ".join(str(s) for s in ss[:20]) + "}"
    return f"{base} && ({extra})" if extra else base


def time_range(start: int, end: int, stream: int | None = None, label: str = "") -> TimeRange:
    return TimeRange(int(start), int(max(start, end)), stream, label)


def grade(share: float, ctx: Context, *, critical: bool = True) -> Severity | None:
    """Severity from a time share (None: below the warning threshold)."""
    if critical and share >= ctx.th.critical_share:
        return "critical"
    if share >= ctx.th.warning_share:
        return "warning"
    return None


def weighted_share(ctx: Context, shares: dict[int, float]) -> float:
    """Per-connection shares weighted by the connections' payload, over all connections
    that carry a meaningful amount of data (so a problem on a tiny side connection does
    not outrank one on the main transfer)."""
    if not shares:
        return 0.0
    total = _meaningful_payload(ctx) or sum(
        ctx.streams[s].payload for s in shares if s in ctx.streams
    )
    if total <= 0:
        return max(shares.values())
    acc = sum(share * ctx.streams[s].payload for s, share in shares.items() if s in ctx.streams)
    return min(1.0, acc / total)


def _meaningful_payload(ctx: Context) -> int:
    """Payload of the connections that carry a meaningful amount of data (once per
    context: the rules weigh their shares by it, finding after finding)."""
    return ctx._cached(  # type: ignore[no-any-return]
        "meaningful_payload",
        lambda: sum(
            s.payload for s in ctx.streams.values() if s.payload >= ctx.th.min_stream_bytes
        ),
    )


def who(info: StreamInfo, direction: str) -> str:
    """``server 10.0.0.5`` for the host sending in ``direction``."""
    return f"{info.role(direction)} {info.host(direction)}"
