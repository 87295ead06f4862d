"""receiver-stall: a host advertises a zero receive window: it does not drain its socket."""

from __future__ import annotations

from collections import defaultdict

from nastriage.diagnosis.context import Context, ZeroWindowEpisode, reverse
from nastriage.diagnosis.finding import Evidence, Finding, Impact
from nastriage.diagnosis.retrans import analyse
from nastriage.diagnosis.rules._util import (
    bitrate,
    frames,
    grade,
    ms,
    pct,
    stream_filter,
    time_range,
    weighted_share,
)
from nastriage.diagnosis.timeline import union_ns


def receiver_stall(ctx: Context) -> list[Finding]:
    th = ctx.th
    # (host ip, role) -> [(stream, episodes)]
    by_host: dict[tuple[str, str], list[tuple[int, list[ZeroWindowEpisode]]]] = defaultdict(list)
    for stream, eps in ctx.zero_window_episodes.items():
        info = ctx.streams.get(stream)
        if info is None:
            continue
        for d in ("c2s", "s2c"):
            mine = [e for e in eps if e.direction == d]
            if mine:
                by_host[(info.host(d), info.role(d))].append((stream, mine))
    findings = []
    for (host, role), items in by_host.items():
        stalled_ns = 0
        shares: dict[int, float] = {}
        n_eps = probes = unresolved = 0
        longest: ZeroWindowEpisode | None = None
        ranges = []
        fr: list[int] = []
        observed = potential = None
        for stream, eps in items:
            info = ctx.streams[stream]
            s_ns = union_ns([(e.start, max(e.end, e.start)) for e in eps])
            stalled_ns += s_ns
            shares[stream] = min(1.0, s_ns / info.duration_ns) if info.duration_ns else 0.0
            n_eps += len(eps)
            probes += sum(e.probes for e in eps)
            unresolved += sum(1 for e in eps if not e.resolved)
            for e in eps:
                if longest is None or e.duration_ns > longest.duration_ns:
                    longest = e
                fr += [e.start_frame, e.end_frame or 0]
            ranges += [
                time_range(e.start, e.end, stream, "zero window")
                for e in sorted(eps, key=lambda e: -e.duration_ns)[:5]
            ]
            d = reverse(eps[0].direction)  # the stalled data flows towards the host
            secs = info.duration_ns / 1e9
            if secs > 0 and observed is None:
                observed = info.payload_dir(d) * 8 / secs
                active = max(1e-9, secs - s_ns / 1e9)
                potential = info.payload_dir(d) * 8 / active
        share = weighted_share(ctx, shares)
        worst = max(shares.values()) if shares else 0.0
        stalled_ms = stalled_ns / 1e6
        if stalled_ms < th.stall_min_ms and (worst < th.stall_warning_share or stalled_ms < 1.0):
            continue
        severity = grade(worst, ctx)
        if severity is None:
            severity = "warning" if worst >= th.stall_warning_share else "info"
        loss = sum(
            la.loss_events
            for (s, _), la in analyse(ctx).items()
            if s in {i[0] for i in items} and la.lost_segments > 0
        )
        streams = [s for s, _ in items]
        assert longest is not None
        explanation = (
            f"The {role} {host} advertised a zero receive window {n_eps} time(s): its "
            f"application did not read the data arriving on its socket, so the sender had to "
            f"stop and wait for {ms(stalled_ns / 1e6)} in all ({pct(worst)} of the connection's "
            f"time; longest stall {ms(longest.duration_ns / 1e6)}). This is a problem of that "
            f"host (the NFS/SMB service, its CPU or its storage), not of the network"
        )
        explanation += (
            "." if not loss else f"; the network also lost packets ({loss} loss episode(s))."
        )
        if unresolved:
            explanation += f" {unresolved} stall(s) had not ended when the capture stopped."
        next_steps = [
            f"On {host}: check what the {'NFS/SMB server' if role == 'server' else 'client'} "
            "process was doing during the stalls (CPU saturation, blocked threads, "
            "paging), e.g. with top/pidstat and the service's logs.",
            f"On {host}: check storage latency during the stalls (iostat -x, the array's "
            "statistics): a slow disk makes the service stop reading the network.",
            "Compare the stall times below with the host's own logs; the network needs no "
            "change for this.",
        ]
        findings.append(
            Finding(
                id="receiver-stall",
                severity=severity,
                title=f"The {role} {host} stopped reading: zero-window stalls of "
                f"{ms(stalled_ns / 1e6)}",
                explanation=explanation,
                evidence=Evidence(
                    numbers={
                        "zero_window_episodes": n_eps,
                        "stalled_ms": round(stalled_ns / 1e6, 3),
                        "stalled_fraction": round(worst, 4),
                        "longest_stall_ms": round(longest.duration_ns / 1e6, 3),
                        "loss_episodes": loss,
                        "zero_window_probes": probes,
                        "unresolved_episodes": unresolved,
                        "host": host,
                        "host_role": role,
                    },
                    time_ranges=ranges[:10],
                    frames=frames(fr),
                    wireshark_filter=stream_filter(
                        streams,
                        "tcp.analysis.zero_window || tcp.analysis.zero_window_probe || "
                        "tcp.analysis.window_update",
                    ),
                ),
                impact=Impact(
                    time_share=round(share, 4),
                    observed_bps=observed,
                    potential_bps=potential,
                    basis=(
                        f"the same bytes without the stalled time: {bitrate(potential)} instead "
                        f"of {bitrate(observed)}"
                    ),
                ),
                next_steps=next_steps,
                confidence=0.95 if n_eps >= 2 else 0.8,
                streams=sorted(streams),
            )
        )
    return findings
