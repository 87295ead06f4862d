"""congestion-loss, reordering, capture-incomplete: what the retransmission analysis says
(``diagnosis.retrans``)."""

from __future__ import annotations

import math

from nastriage.diagnosis.context import Context, reverse
from nastriage.diagnosis.finding import Evidence, Finding, Impact, Severity
from nastriage.diagnosis.retrans import LossAnalysis, analyse
from nastriage.diagnosis.rules._util import (
    bitrate,
    frames,
    grade,
    ms,
    pct,
    size,
    stream_filter,
    time_range,
    weighted_share,
    who,
)


def _relevant(ctx: Context, min_bytes: int = 0) -> list[LossAnalysis]:
    out = []
    for (s, _), la in analyse(ctx).items():
        info = ctx.streams.get(s)
        if info is not None and info.payload >= min_bytes:
            out.append(la)
    return out


def _reordering_dominates(la: LossAnalysis) -> bool:
    return la.reorder_run_count > 2 * la.loss_run_count


def _significant_loss(ctx: Context, la: LossAnalysis) -> bool:
    th = ctx.th
    if la.loss_events >= th.loss_min_events and la.loss_rate >= th.loss_min_rate:
        return True
    if (
        la.loss_events >= 1
        and la.lost_segments >= th.loss_high_rate_min_segments
        and la.loss_rate >= th.loss_high_rate
    ):
        return True
    # retransmission timeouts are expensive whatever the rate; but a lone timeout that the
    # receiver reports as a duplicate (D-SACK) was spurious: the original had arrived
    if la.timeout_count and not la.loss_run_count and la.dsack_blocks >= la.timeout_count:
        return False
    info = ctx.streams.get(la.stream)
    share = la.recovery_ns / info.duration_ns if info and info.duration_ns else 0.0
    return la.timeout_count > 0 and share >= th.warning_share


def _peak_rate_bps(ctx: Context, stream: int, d: str, rtt_ms: float | None) -> float | None:
    """The 90th percentile of the per-bin rate in ``tcp_series`` (bins at least one RTT
    wide): about the bottleneck's rate when the sender keeps it busy."""
    bins = ctx.series_bins(stream, d)
    if bins is None:
        return None
    rates = sorted(
        r
        for iv, r in zip(bins.interval_ns, bins.rate)
        if not math.isnan(r) and (rtt_ms is None or iv >= rtt_ms * 1e6)
    )
    if len(rates) < 5:
        return None
    return rates[int(0.9 * (len(rates) - 1))]


def congestion_loss(ctx: Context) -> list[Finding]:
    th = ctx.th
    candidates = [
        la
        for la in _relevant(ctx)
        if la.loss_events >= 1 and la.lost_segments >= 1 and not _reordering_dominates(la)
    ]
    hits = [la for la in candidates if _significant_loss(ctx, la)]
    minor = not hits
    if minor:
        hits = candidates
    if not hits:
        return []
    shares: dict[int, float] = {}
    for la in hits:
        info = ctx.streams[la.stream]
        share = la.recovery_ns / info.duration_ns if info.duration_ns else 0.0
        shares[la.stream] = max(shares.get(la.stream, 0.0), min(1.0, share))
    worst = max(hits, key=lambda la: (la.recovery_ns, la.lost_segments))
    info = ctx.streams[worst.stream]
    d = worst.direction
    secs = info.duration_ns / 1e9
    observed = info.payload_dir(d) * 8 / secs if secs > 0 else None
    wshare = shares[worst.stream]
    peak = _peak_rate_bps(ctx, worst.stream, d, worst.rtt_ms)
    potential = None
    if observed is not None:
        potential = observed / max(0.05, 1.0 - wshare)
        if peak is not None and peak > potential:
            potential = peak
    timeouts = worst.timeout_count
    tcp = info.tcp or {}
    severity: Severity
    if minor:
        severity = "info"
    elif grade(wshare, ctx) == "critical":
        severity = "critical"
    else:
        severity = "warning"
    notes = []
    if worst.episodes and worst.first_episode_segments >= 8:
        first_at = (worst.episodes[0][0] - info.start) / 1e9
        notes.append(
            f"the first loss, {first_at:.2f} s into the connection, took "
            f"{worst.first_episode_segments} retransmissions at once: burst loss when the "
            "sender's window outgrew the bottleneck's buffer at the end of slow start"
        )
    if timeouts:
        notes.append(
            f"{timeouts} loss(es) were only repaired by a retransmission timeout (the "
            "sender waited at least "
            f"{ms(th.timeout_min_s * 1000)} with nothing moving)"
        )
    cc = str(tcp.get("cc_hint") or "")
    if cc.startswith("reno") and float(tcp.get("cc_confidence") or 0) >= 0.4:
        notes.append(
            "the sender's window regrows linearly after each loss (Reno-like), "
            "so each loss costs many round trips"
        )
    if (
        peak is not None
        and observed is not None
        and peak > 1.5 * observed
        and worst.loss_run_count >= th.loss_min_events
        and info.payload >= th.min_stream_bytes
    ):
        notes.append(
            f"the sender pushes bursts at {bitrate(peak)} into a path that delivers "
            f"{bitrate(observed)} on average: a speed mismatch (fast sender, slower link) with "
            "a small buffer at the step"
        )
    explanation = (
        f"Packets sent by the {who(info, d)} were really lost in the network: "
        f"{worst.loss_events} loss episode(s), {worst.lost_segments} retransmitted segment(s) "
        f"({pct(worst.loss_rate)} of the segments); each time the sender cut its window and "
        f"spent {ms(worst.recovery_ns / 1e6 / max(1, worst.episode_count + timeouts))} on "
        "average recovering."
    )
    if worst.loss_run_count:
        explanation += (
            f" The duplicate ACKs lasted a full round trip (RTT {ms(worst.rtt_ms)}) until the "
            "retransmission arrived, which tells loss from mere reordering."
        )
    last = worst.last_resent_time
    if (
        timeouts
        and worst.timeout_count == worst.resent_count
        and last is not None
        and info.end - last <= max(int(th.timeout_min_s * 1e9), info.duration_ns // 50)
    ):
        notes.append(
            f"the connection ends in retransmissions that got no answer: the "
            f"{info.role(reverse(d))} {info.host(reverse(d))} stopped responding (host "
            "down, or a firewall dropping the connection)"
        )
    if notes:
        explanation += " Also: " + "; ".join(notes) + "."
    if minor:
        explanation += " This is too little to slow the transfer noticeably."
    fr = frames(
        [r.first_frame for r in worst.loss_runs]
        + worst.episode_resent_frames
        + worst.timeout_frames
    )
    next_steps = [
        "Find the bottleneck between "
        f"{info.client_ip} and {info.server_ip}: a link slower than the sender's (e.g. "
        "10G to 1G, or a WAN link), and check its drop counters and buffer size "
        "(switch/router interface statistics).",
        "Enable flow control or deeper buffers at the speed step, or pace/shape the sender "
        "to the bottleneck's rate.",
    ]
    if timeouts:
        next_steps.append(
            f"On the {info.role(d)} {info.host(d)}: check that SACK is on and the congestion "
            "control is modern (cubic/bbr); timeouts cost far more than fast retransmits."
        )
    return [
        Finding(
            id="congestion-loss",
            severity=severity,
            title=f"Packet loss in the network: {worst.lost_segments} retransmissions, "
            f"{pct(wshare)} of the time recovering",
            explanation=explanation,
            evidence=Evidence(
                numbers={
                    "loss_episodes": worst.loss_events,
                    "retransmitted_segments": worst.lost_segments,
                    "retransmission_rate": round(worst.loss_rate, 5),
                    "recovery_ms": round(worst.recovery_ns / 1e6, 3),
                    "rtt_ms": round(worst.rtt_ms, 3) if worst.rtt_ms is not None else "unknown",
                    "timeouts": timeouts,
                    "sender": info.host(d),
                    "direction": d,
                    "capture_sees_holes": "yes" if worst.downstream else "no",
                    "dsack_blocks": worst.dsack_blocks,
                    "congestion_control_hint": cc or "unknown",
                },
                time_ranges=[
                    time_range(s, e, worst.stream, "loss recovery") for s, e in worst.episodes[:10]
                ],
                frames=fr,
                wireshark_filter=stream_filter(
                    [la.stream for la in hits],
                    "tcp.analysis.retransmission || tcp.analysis.fast_retransmission || "
                    "tcp.analysis.duplicate_ack || tcp.analysis.lost_segment",
                ),
            ),
            impact=Impact(
                time_share=round(weighted_share(ctx, shares), 4),
                observed_bps=observed,
                potential_bps=potential,
                basis="the transfer without its recovery time"
                + (", or the path's sustained rate when higher" if peak else ""),
            ),
            next_steps=next_steps,
            confidence=0.9 if worst.rtt_ms is not None else 0.6,
            streams=sorted({la.stream for la in hits}),
        )
    ]


def reordering(ctx: Context) -> list[Finding]:
    th = ctx.th
    hits = [
        la
        for la in _relevant(ctx, th.min_stream_bytes)
        if la.reorder_run_count >= th.reorder_min_events and _reordering_dominates(la)
    ]
    if not hits:
        return []
    worst = max(hits, key=lambda la: la.reorder_run_count)
    info = ctx.streams[worst.stream]
    d = worst.direction
    n = worst.reorder_run_count
    rate = n / worst.data_segments if worst.data_segments else 0.0
    if rate < 0.001:
        return []
    needless = worst.needless_retransmissions + worst.spurious
    cuts = worst.loss_run_count if not worst.downstream else 0
    rtt = worst.rtt_ms or 0.0
    shares = {}
    for la in hits:
        i = ctx.streams[la.stream]
        cost = (la.spurious + (la.loss_run_count if not la.downstream else 0)) * rtt * 1e6
        shares[la.stream] = min(1.0, cost / i.duration_ns) if i.duration_ns else 0.0
    secs = info.duration_ns / 1e9
    observed = info.payload_dir(d) * 8 / secs if secs > 0 else None
    if worst.downstream:
        view = (
            f"At this capture point {worst.reordered_segments} segment(s) arrived out of "
            "order; Wireshark flags them as retransmissions or out-of-order, but they were the "
            f"originals, only late: each hole closed within {ms(worst.long_run_ms)} (less than "
            f"half the RTT of {ms(worst.rtt_ms)}), too soon for a retransmission."
        )
    else:
        view = (
            f"The receiver sent {n} short bursts of duplicate ACKs that stopped without any "
            "retransmission: the missing segment arrived anyway, a little late."
        )
    explanation = (
        f"Segments from the {who(info, d)} were delivered out of order, without real loss: "
        f"{n} reordering event(s) ({pct(rate)} of the segments). {view}"
    )
    if cuts or worst.spurious or worst.dsack_blocks:
        explanation += (
            f" The sender took {max(cuts, worst.spurious)} of them for loss (needless "
            f"retransmissions, {worst.dsack_blocks} D-SACK block(s) from the receiver), and "
            "each such false alarm cuts its window."
        )
    else:
        explanation += (
            " The sender's TCP recognised the reordering, so the cost here is small; "
            "a less tolerant stack would cut its window each time."
        )
    fr = frames([r.first_frame for r in worst.reorder_runs] + worst.resent_frames)
    return [
        Finding(
            id="reordering",
            severity="warning",
            title=f"Packets reordered on the path: {n} out-of-order deliveries, no real loss",
            explanation=explanation,
            evidence=Evidence(
                numbers={
                    "reorder_events": n,
                    "reorder_rate": round(rate, 5),
                    "loss_episodes": worst.loss_events,
                    "needless_retransmissions": needless,
                    "dsack_blocks": worst.dsack_blocks,
                    "late_segments_flagged": worst.reordered_segments if worst.downstream else 0,
                    "hole_closed_within_ms": round(worst.long_run_ms, 3),
                    "rtt_ms": round(rtt, 3),
                    "sender": info.host(d),
                    "direction": d,
                },
                time_ranges=[
                    time_range(r.first, r.last, worst.stream, "duplicate ACKs")
                    for r in worst.reorder_runs[:10]
                ],
                frames=fr,
                wireshark_filter=stream_filter(
                    [la.stream for la in hits],
                    "tcp.analysis.out_of_order || tcp.analysis.duplicate_ack || "
                    "tcp.analysis.retransmission || tcp.options.sack.dsack",
                ),
            ),
            impact=Impact(
                time_share=round(weighted_share(ctx, shares), 4),
                observed_bps=observed,
                potential_bps=None,
                basis="window cuts after false loss signals, one round trip each",
            ),
            next_steps=[
                "Look for what reorders packets between "
                f"{info.client_ip} and {info.server_ip}: link aggregation (LACP/ECMP) hashing "
                "one flow over several links, a firewall or load balancer with several "
                "queues, or a WAN optimiser.",
                "Hash per flow (layer 3+4) on bonds and ECMP routes; on Linux senders, "
                "net.ipv4.tcp_reordering and RACK (default) make TCP more tolerant.",
            ],
            confidence=0.85 if worst.rtt_ms is not None else 0.6,
            streams=sorted({la.stream for la in hits}),
        )
    ]


def capture_incomplete(ctx: Context) -> list[Finding]:
    th = ctx.th
    hits = [la for la in analyse(ctx).values() if la.ack_unseen_count]
    if not hits:
        return []
    events = sum(la.ack_unseen_count for la in hits)
    unseen = sum(la.unseen_bytes for la in hits)
    worst = max(hits, key=lambda la: la.ack_unseen_count)
    info = ctx.streams.get(worst.stream)
    total = ctx.total_payload()
    severity: Severity = "warning" if events >= th.capture_drop_warning_events else "info"
    fr = frames(e.frame for la in hits for e in la.ack_unseen)
    where = f" The largest gap count is on stream {worst.stream} ({info.label()})." if info else ""
    return [
        Finding(
            id="capture-incomplete",
            severity=severity,
            title=f"The capture missed packets: {events} gap(s) acknowledged by the receiver",
            explanation=(
                f"{events} time(s) a receiver acknowledged data that is not in the capture "
                f"(about {size(unseen)}): those segments crossed the network but the "
                "capture dropped them (capture buffer, mirror port or tap overload, or a "
                "snapshot started late). This is not packet loss in the network; results that "
                "depend on the missing packets (retransmission counts, some response times) "
                f"are partial.{where}"
            ),
            evidence=Evidence(
                numbers={
                    "acked_unseen_events": events,
                    "unseen_bytes": unseen,
                    "unseen_share_of_payload": round(unseen / total, 6) if total else 0,
                    "streams_affected": len(hits),
                },
                time_ranges=[
                    time_range(e.time, e.time, la.stream, "ACKed unseen")
                    for la in hits
                    for e in la.ack_unseen[:3]
                ][:10],
                frames=fr,
                wireshark_filter=stream_filter(
                    [la.stream for la in hits],
                    "tcp.analysis.ack_lost_segment || tcp.analysis.lost_segment",
                ),
            ),
            impact=Impact(
                time_share=None,
                basis="none on the transfer itself; the analysis is incomplete",
            ),
            next_steps=[
                "Capture again with a larger buffer (tcpdump -B 65536 or dumpcap -B), write "
                "to a fast local disk, and use a snapshot length that keeps headers only "
                "(-s 256) to lower the load.",
                "Check the capture's drop counters (tcpdump prints 'dropped by kernel'; on a "
                "SPAN port the switch's oversubscription).",
            ],
            confidence=0.9,
            streams=sorted({la.stream for la in hits}),
        )
    ]
