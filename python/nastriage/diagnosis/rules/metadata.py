"""metadata-heavy: GETATTR/ACCESS/LOOKUP or Create/Close storms dominate the time."""

from __future__ import annotations

from collections import Counter

from nastriage.diagnosis.context import Context
from nastriage.diagnosis.finding import Evidence, Finding, Impact
from nastriage.diagnosis.rules._util import frames, ms, pct, stream_filter
from nastriage.diagnosis.timeline import profiles
from nastriage.sanitize import one_line


def metadata_heavy(ctx: Context) -> list[Finding]:
    th = ctx.th
    ps = profiles(ctx)
    calls = ps.total("metadata_requests")
    outstanding = ps.total("outstanding_ns")
    meta_ns = ps.total("metadata_only_ns")
    if calls < th.metadata_min_calls or not outstanding:
        return []
    share = meta_ns / outstanding
    if share < th.metadata_time_share:
        return []
    counts: dict[str, int] = {}
    srt: dict[str, float] = {}
    first_frames: list[int] = []
    # Per connection, then over them: the engine's summary sums the same way.
    for stream_ops, stream_frames in ctx.metadata_ops_of(ps):
        for op, n, op_ms in stream_ops:
            counts[op] = counts.get(op, 0) + n
            srt[op] = srt.get(op, 0.0) + op_ms
        if len(first_frames) < 30:
            first_frames += stream_frames[: 30 - len(first_frames)]
    # (Ties in order of first appearance, as counted.)
    top = Counter(counts).most_common(4)
    top_text = ", ".join(f"{one_line(op)} x{n}" for op, n in top)
    span_s = ps.total("span_ns") / 1e9
    rate = calls / span_s if span_s > 0 else 0.0
    data = ps.total("io_requests")
    streams = ps.streams_with("metadata_requests")
    return [
        Finding(
            id="metadata-heavy",
            severity="warning",
            title=f"Metadata storm: {calls} metadata requests take {pct(share)} of the time",
            explanation=(
                f"Most of the time requests were outstanding went to metadata, not to data: "
                f"{calls} metadata requests ({top_text}; {rate:.0f} per second) against "
                f"{data} read/write requests. Each costs at least a round trip, so a workload "
                "of many small files or repeated attribute checks is slow whatever the "
                "bandwidth."
            ),
            evidence=Evidence(
                numbers={
                    "metadata_requests": calls,
                    "data_requests": data,
                    "metadata_time_share": round(share, 4),
                    "metadata_per_second": round(rate, 1),
                    "top_operations": ", ".join(op for op, _ in top),
                    "metadata_time_ms": round(sum(srt.values()), 3),
                },
                frames=frames(first_frames),
                wireshark_filter=stream_filter(
                    streams,
                    "nfs.procedure_v3 in {1 3 4} || smb2.cmd in {5 6 16}",
                ),
            ),
            impact=Impact(
                time_share=round(share, 4),
                basis="share of busy time with only metadata requests outstanding "
                f"({ms(meta_ns / 1e6)})",
            ),
            next_steps=[
                "On the clients: cache attributes longer (NFS: actimeo / noac off; SMB: "
                "directory and file info caching, leases), and avoid tools that stat every "
                "file repeatedly.",
                "Package many small files (tar/zip) before moving them, or run several "
                "transfers in parallel to hide the round trips.",
            ],
            confidence=0.75,
            streams=streams,
        )
    ]
