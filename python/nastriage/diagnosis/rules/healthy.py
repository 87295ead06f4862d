"""healthy: no warning applies; say what limits the transfer instead of saying nothing."""

from __future__ import annotations

from nastriage.diagnosis.context import Context, StreamInfo
from nastriage.diagnosis.finding import Evidence, Finding, Impact
from nastriage.diagnosis.rules._util import bitrate, ms, pct, stream_filter
from nastriage.diagnosis.timeline import profiles


def _main_stream(ctx: Context) -> StreamInfo | None:
    ps = profiles(ctx)
    if ps:
        s = max(ps, key=lambda s: (ps[s].data_bytes, -s))
        if s in ctx.streams:
            return ctx.streams[s]
    if ctx.streams:
        return max(ctx.streams.values(), key=lambda i: (i.payload, -i.stream))
    return None


def healthy(ctx: Context, others: list[Finding]) -> Finding:
    info = _main_stream(ctx)
    notes = [f"{f.title} ({f.id})" for f in others if f.severity == "info"]
    if info is None or info.payload == 0:
        udp = ctx.udp_transaction_count()
        return Finding(
            id="healthy",
            severity="info",
            title="Nothing to judge: no TCP data transfer in the capture",
            explanation="The capture holds no TCP connection that carried data, so there is "
            "no transfer whose speed could be judged"
            + (
                f" ({udp} request(s) over UDP: only their error statuses are checked)."
                if udp
                else "."
            ),
            evidence=Evidence(numbers={"tcp_connections": len(ctx.streams)}),
            impact=Impact(basis="nothing to estimate"),
            next_steps=["Capture while the slow transfer runs, on the client or the server."],
            confidence=1.0,
            streams=[],
        )
    p = profiles(ctx).get(info.stream)
    median = (info.tcp or {}).get("rtt_median_ms")
    rtt = float(median) if median else ctx.path_rtt_ms(info.stream)
    d = info.data_direction
    secs = info.duration_ns / 1e9
    observed = info.payload_dir(d) * 8 / secs if secs > 0 else None
    numbers: dict[str, float | int | str] = {
        "throughput_bps": round(observed) if observed else 0,
        "rtt_ms": round(rtt, 3) if rtt is not None else "unknown",
    }
    rate = observed
    if p is not None:
        rate = p.transfer_rate_bps or observed
        shares = {s: p.share(s) for s in ("transfer", "server", "network")}
        numbers.update(
            {
                "rate_while_transferring_bps": round(rate or 0),
                "transfer_share": round(shares["transfer"], 4),
                "server_share": round(shares["server"], 4),
                "network_wait_share": round(shares["network"], 4),
                "idle_share": round(p.idle_share, 4),
                "max_outstanding": p.max_outstanding,
            }
        )
        if shares["transfer"] >= ctx.th.link_limited_share:
            what = f"link-limited at {bitrate(rate)}"
            detail = (
                f"data was on the wire {pct(shares['transfer'])} of the time requests were "
                f"outstanding, at {bitrate(rate)}: the path's rate is the limit"
            )
        elif shares["server"] >= max(shares["network"], shares["transfer"]):
            what = f"server response time ({ms(p.median_processing_ms)} median)"
            detail = (
                "most of the time went to the server's answers, but they stay below the "
                "slow-server thresholds"
            )
        else:
            what = "round-trip latency"
            detail = (
                f"requests spent {pct(shares['network'])} of the time on round trips, "
                "below the thresholds of a concurrency or request-size problem"
            )
        if p.idle_share >= 0.3:
            detail += (
                f"; the client sent nothing {pct(p.idle_share)} of the time (the application "
                "was not asking for more)"
            )
    else:
        tcp = info.tcp or {}
        limits = {
            k: float(tcp.get(f"limit_{k}_{d}") or 0.0)
            for k in ("bandwidth", "application", "receive_window", "loss_recovery")
        }
        top = max(limits, key=lambda k: limits[k]) if any(limits.values()) else None
        if top == "bandwidth":
            what = f"link-limited at {bitrate(observed)}"
        elif top == "application":
            what = "application-limited (the sender had nothing more to send)"
        else:
            what = f"{bitrate(observed)}"
        detail = f"the largest connection ran at {bitrate(observed)}"
        if top:
            numbers.update({f"limit_{k}_share": round(v, 4) for k, v in limits.items()})
    numbers["stream"] = info.stream
    rtt_text = f", RTT {ms(rtt)}" if rtt is not None else ""
    explanation = f"No warning-level problem found. {detail[0].upper() + detail[1:]}."
    if notes:
        explanation += " For information: " + "; ".join(notes) + "."
    return Finding(
        id="healthy",
        severity="info",
        title=f"Nothing wrong: {what}{rtt_text}",
        explanation=explanation,
        evidence=Evidence(
            numbers=numbers,
            wireshark_filter=stream_filter([info.stream]),
        ),
        impact=Impact(
            time_share=0.0,
            observed_bps=observed,
            potential_bps=rate,
            basis="no loss to estimate; the figure is the rate while data flowed",
        ),
        next_steps=[
            "Nothing to fix in the network or the server from this capture; if the transfer "
            "still feels slow, capture a slow period (and both ends) to compare."
        ],
        confidence=0.7,
        streams=[info.stream],
    )
