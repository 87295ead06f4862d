"""receive-window-limited: the receiver's advertised window caps the throughput at
window ÷ RTT (window scaling off, or small buffers)."""

from __future__ import annotations

from nastriage.diagnosis.context import Context, reverse
from nastriage.diagnosis.finding import Evidence, Finding, Impact
from nastriage.diagnosis.rules._util import (
    bitrate,
    pct,
    size,
    stream_filter,
    weighted_share,
    who,
)
from nastriage.diagnosis.timeline import profile


def _series_window(ctx: Context) -> dict[tuple[int, str], float]:
    """Median receive window offered to each (stream, sender direction), from tcp_series."""
    return ctx.series_windows


def receive_window_limited(ctx: Context) -> list[Finding]:
    th = ctx.th
    windows = _series_window(ctx)
    hits = []
    for stream, info in ctx.streams.items():
        tcp = info.tcp
        if not tcp:
            continue
        # (The round trip only for a connection that moved enough: with thousands of
        # connections, looking it up for every one was most of the rule's time.)
        dirs = [d for d in ("c2s", "s2c") if info.payload_dir(d) >= th.min_stream_bytes]
        rtt = ctx.path_rtt_ms(stream) if dirs else None
        if not rtt:
            continue
        for d in dirs:
            segments = info.frames_c2s if d == "c2s" else info.frames_s2c
            limited = int(tcp.get(f"window_limited_{d}") or 0)
            wl_share = limited / segments if segments else 0.0
            rwnd_share = float(tcp.get(f"limit_receive_window_{d}") or 0.0)
            in_flight = float(tcp.get(f"max_in_flight_{d}") or 0.0)
            window = windows.get((stream, d)) or in_flight
            if window <= 0:
                continue
            ceiling = window * 8 / (rtt / 1000.0)
            p = profile(ctx, stream)
            rate = p.transfer_rate_bps if p is not None and p.transfer_rate_bps else None
            if rate is None:
                secs = info.duration_ns / 1e9
                rate = info.payload_dir(d) * 8 / secs if secs > 0 else 0.0
            by_share = rwnd_share >= th.rwnd_limited_share
            by_window = (
                wl_share >= 0.3
                and in_flight >= th.rwnd_flight_share * window
                and rate >= th.rwnd_throughput_share * ceiling
            )
            if by_share or by_window:
                share = max(rwnd_share, min(1.0, wl_share))
                hits.append((share, stream, d, window, rtt, ceiling, rate, wl_share, rwnd_share))
    if not hits:
        return []
    hits.sort(reverse=True)
    share, stream, d, window, rtt, ceiling, rate, wl_share, rwnd_share = hits[0]
    info = ctx.streams[stream]
    tcp = info.tcp
    receiver_dir = reverse(d)
    role = info.role(receiver_dir)
    host = info.host(receiver_dir)
    ws = tcp.get(f"window_scale_{role}")
    ws_inferred = bool(tcp.get("window_scale_inferred"))
    scaling_off = ws is not None and int(ws) == 0 and not ws_inferred and window <= 65535
    if scaling_off:
        cause = (
            "window scaling is off for this connection (no window-scale option in the "
            "handshake), so the window can never exceed 64 KiB"
        )
        steps = [
            f"On {host} (and the {info.role(d)}): enable TCP window scaling "
            "(Linux: sysctl net.ipv4.tcp_window_scaling=1; Windows: netsh int tcp set global "
            "autotuninglevel=normal), then reconnect.",
            "Check for a firewall or WAN optimiser between the hosts that strips the "
            "window-scale option from SYN segments.",
        ]
    else:
        cause = (
            f"the receiver's buffer keeps the window at about {size(window)}, less than the "
            f"bandwidth-delay product of the path"
        )
        steps = [
            f"On {host}: raise the receive buffer limit (Linux: net.core.rmem_max and the "
            "third value of net.ipv4.tcp_rmem; check the NFS/SMB socket buffer settings).",
            "Check that no application sets a small SO_RCVBUF (it disables autotuning).",
        ]
    need = rate * (rtt / 1000.0) / 8
    shares = {h[1]: h[0] for h in hits}
    return [
        Finding(
            id="receive-window-limited",
            severity="warning",
            title=f"Receive window of {size(window)} limits throughput to {bitrate(ceiling)} "
            f"over a {rtt:.1f} ms RTT",
            explanation=(
                f"The {role} {host} advertises a receive window of about {size(window)}, and "
                f"the {who(info, d)} keeps exactly that much in flight, then waits for the "
                f"ACKs: at most one window per round trip. With an RTT of {rtt:.1f} ms that is "
                f"{bitrate(ceiling)}, and the transfer ran at {bitrate(rate)} while data "
                f"flowed. Cause: {cause}."
            ),
            evidence=Evidence(
                numbers={
                    "window_bytes": round(window),
                    "rtt_ms": round(rtt, 3),
                    "window_over_rtt_bps": round(ceiling),
                    "throughput_bps": round(rate),
                    "max_in_flight_bytes": int(tcp.get(f"max_in_flight_{d}") or 0),
                    "window_limited_segments_share": round(wl_share, 4),
                    "receive_window_limited_share": round(rwnd_share, 4),
                    "window_scale": int(ws) if ws is not None else "unknown",
                    "window_scale_inferred": "yes" if ws_inferred else "no",
                    "window_needed_bytes_at_this_rate": round(need),
                    "receiver": host,
                    "receiver_role": role,
                },
                frames=[],
                wireshark_filter=stream_filter(
                    [stream], "tcp.analysis.window_full || tcp.window_size_scalefactor"
                ),
            ),
            impact=Impact(
                time_share=round(weighted_share(ctx, shares), 4),
                observed_bps=rate,
                potential_bps=None,
                basis=(
                    f"throughput ≈ window ÷ RTT = {size(window)} ÷ {rtt:.1f} ms = "
                    f"{bitrate(ceiling)}; a larger window lets it grow up to the path's "
                    f"rate ({pct(share)} of the transfer was window-limited)"
                ),
            ),
            next_steps=steps,
            confidence=0.9 if rwnd_share >= th.rwnd_limited_share or wl_share >= 0.5 else 0.7,
            streams=sorted(shares),
        )
    ]
