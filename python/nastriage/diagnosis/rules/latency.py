"""Where the NFS/SMB request time goes (``diagnosis.timeline``):

* server-latency: requests wait at the server (processing beyond the network round trip);
* client-concurrency-limit: requests wait on the round trip, a flat small number of them
  outstanding, while the server answers fast and the link idles;
* request-size-limited: the same round-trip wait, with small I/O sizes;
* credit-starvation: SMB2 requests held back for lack of credits.
"""

from __future__ import annotations

import math
from collections import defaultdict

from nastriage.diagnosis.context import Context
from nastriage.diagnosis.finding import Evidence, Finding, Impact
from nastriage.diagnosis.rules._util import (
    bitrate,
    frames,
    ms,
    pct,
    size,
    stream_filter,
    weighted_share,
)
from nastriage.diagnosis.timeline import Profile, profile, profiles
from nastriage.sanitize import one_line


def _judged(ctx: Context, *, min_bytes: bool = False) -> dict[int, Profile]:
    """Connections with enough answered requests (and data, if ``min_bytes``) to judge
    (read from the profiles' columns; the same for every rule that asks)."""

    def build() -> dict[int, Profile]:
        least = {"answered": ctx.th.min_requests}
        if min_bytes:
            least["data_bytes"] = ctx.th.min_stream_bytes
        return profiles(ctx).at_least(least)

    return ctx._cached(f"judged:{min_bytes}", build)  # type: ignore[no-any-return]


def _time_filter(p: Profile, ctx: Context, seconds: float) -> str:
    protos = set(p.protocols) or set(ctx.storage_protocols(p.stream))
    parts = []
    if "nfs" in protos:
        parts.append(f"rpc.time >= {seconds:.3f}")
    if protos & {"smb2", "smb3"}:
        parts.append(f"smb2.time >= {seconds:.3f}")
    if protos & {"smb", "smb1"}:
        parts.append(f"smb.time >= {seconds:.3f}")
    return stream_filter([p.stream], " || ".join(parts) or "rpc.time || smb2.time")


def _top(d: dict[str, float], n: int = 3) -> list[tuple[str, float]]:
    return sorted(((k, v) for k, v in d.items() if v > 0), key=lambda kv: -kv[1])[:n]


def _protocol_names(ctx: Context, stream: int) -> str:
    p = profile(ctx, stream)
    protos = p.protocols if p is not None else []
    if not protos:
        protos = ctx.storage_protocols(stream)
    return "/".join(p.upper() for p in protos) or "NFS/SMB"


def server_latency(ctx: Context) -> list[Finding]:
    th = ctx.th
    hits: dict[int, Profile] = {}
    for s, p in _judged(ctx).items():
        rtt = p.client_rtt_ms + p.server_rtt_ms
        med = p.median_processing_ms
        if (
            p.share("server") >= th.server_latency_share
            and med >= th.server_latency_min_ms
            and med >= th.server_latency_rtt_factor * rtt
        ):
            hits[s] = p
    if not hits:
        return []
    by_server: dict[str, list[Profile]] = defaultdict(list)
    for p in hits.values():
        by_server[ctx.streams[p.stream].server_ip if p.stream in ctx.streams else "?"].append(p)
    findings = []
    for server, ps in by_server.items():
        worst = max(ps, key=lambda p: p.ns["server"])
        med = worst.median_processing_ms
        p90 = worst.processing_p90_ms
        rtt = worst.client_rtt_ms + worst.server_rtt_ms
        share = worst.share("server")
        by_op: dict[str, float] = defaultdict(float)
        by_file: dict[str, float] = defaultdict(float)
        for p in ps:
            for k, v in p.processing_by_op.items():
                by_op[k] += v
            for k, v in p.processing_by_file.items():
                by_file[k] += v
        ops = _top(by_op)
        files = _top(by_file)
        total_proc = sum(by_op.values()) or 1.0
        ops_text = ", ".join(f"{one_line(k)} ({pct(v / total_proc)})" for k, v in ops)
        files_text = ", ".join(one_line(k, limit=60) for k, _ in files)
        span_s = worst.span_ns / 1e9
        observed = worst.observed_bps
        potential = (
            worst.data_bytes * 8 / max(1e-9, span_s - worst.ns["server"] / 1e9)
            if span_s > 0
            else None
        )
        explanation = (
            f"The server {server} took a median of {ms(med)} (90th percentile {ms(p90)}) to "
            f"answer each request, beyond the network round trip of {ms(rtt)}: requests "
            f"spent {pct(share)} of the connection's busy time waiting at the server, with no "
            f"data moving. The network is not the problem here. Most of that time went to: "
            f"{ops_text}."
        )
        if files_text:
            explanation += f" Slowest files: {files_text}."
        proto = _protocol_names(ctx, worst.stream)
        findings.append(
            Finding(
                id="server-latency",
                severity="warning",
                title=f"Slow server: {server} answers {proto} requests in {ms(med)} "
                f"(network RTT {ms(rtt)})",
                explanation=explanation,
                evidence=Evidence(
                    numbers={
                        "server_processing_median_ms": round(med, 3),
                        "server_processing_p90_ms": round(p90, 3),
                        "rtt_ms": round(rtt, 3),
                        "server_wait_share": round(share, 4),
                        "server": server,
                        "requests": worst.answered,
                        "max_outstanding": worst.max_outstanding,
                        "top_operations": ", ".join(k for k, _ in ops),
                        "top_files": ", ".join(k for k, _ in files),
                        "rtt_source": worst.rtt_source,
                    },
                    frames=frames(worst.slow_frames),
                    wireshark_filter=_time_filter(worst, ctx, max(0.001, med / 1000.0)),
                ),
                impact=Impact(
                    time_share=round(
                        weighted_share(ctx, {p.stream: p.share("server") for p in ps}), 4
                    ),
                    observed_bps=observed,
                    potential_bps=potential,
                    basis="the same requests with the server's waiting time removed",
                ),
                next_steps=[
                    f"On {server}: check the NFS/SMB service's CPU (is it saturated or "
                    "throttled?), its thread pool, and the storage latency behind it "
                    "(iostat -x, the array's latency statistics) for the operations above.",
                    "Check whether other clients or background jobs (backups, scrubs, "
                    "snapshots) load the server at the same time.",
                ],
                confidence=0.85 if worst.rtt_source.startswith("tcp") else 0.7,
                streams=sorted(p.stream for p in ps),
            )
        )
    return findings


def _latency_bound(ctx: Context) -> dict[int, Profile]:
    """Connections whose data phase waited mostly on the network (two rules read them)."""
    return ctx._cached("latency_bound", lambda: _find_latency_bound(ctx))  # type: ignore[no-any-return]


def _find_latency_bound(ctx: Context) -> dict[int, Profile]:
    th = ctx.th
    out = {}
    for s, p in _judged(ctx, min_bytes=True).items():
        # the data phase only: set-up and metadata requests are one round trip each anyway
        net = p.data_share("network")
        if (
            p.io_requests >= th.min_requests
            and net >= th.latency_bound_share
            and p.data_share("server") < net
            and p.client_rtt_ms + p.server_rtt_ms >= 0.5
        ):
            out[s] = p
    return out


def _credit_starved_share(ctx: Context, stream: int) -> float:
    """Share of the connection's span with requests held back for lack of credits (0 when
    too few requests were held back to matter)."""
    return _credit_starved_shares(ctx).get(stream, 0.0)


def _credit_starved_shares(ctx: Context) -> dict[int, float]:
    """:func:`_credit_starved_share` of every connection with a ``concurrency`` row."""

    def build() -> dict[int, float]:
        names = ("credit_starved_ms", "span_ns", "credit_starved_requests", "min_credit_balance")
        out: dict[int, float] = {}
        for s, (starved, span, held, low) in ctx.concurrency_values(names).items():
            if not starved or not span or int(held or 0) < ctx.th.credit_starved_min_requests:
                out[s] = 0.0
            elif int(low or 0) < 0:
                out[s] = 0.0  # the balance went negative: the capture started mid-session
            else:
                out[s] = float(starved) * 1e6 / float(span)
        return out

    return ctx._cached("credit_starved_shares", build)  # type: ignore[no-any-return]


def _credit_starved(ctx: Context, stream: int) -> bool:
    return _credit_starved_share(ctx, stream) >= ctx.th.credit_starved_share


def client_concurrency_limit(ctx: Context) -> list[Finding]:
    th = ctx.th
    hits = {
        s: p
        for s, p in _latency_bound(ctx).items()
        if 0 < p.max_outstanding <= th.concurrency_max_k
        and p.at_max_fraction >= th.concurrency_at_max_share
        and not _credit_starved(ctx, s)
    }
    if not hits:
        return []
    worst = max(hits.values(), key=lambda p: p.data_ns["network"])
    info = ctx.streams.get(worst.stream)
    k = worst.max_outstanding
    # the latency the client sees: the response time plus the round trip between the
    # capture point and the client (about 0 at a client-side capture)
    latency = worst.response_median_ms + worst.client_rtt_ms
    io = worst.mean_io_bytes or (worst.data_bytes / max(1, worst.answered))
    little = k * io * 8 / (latency / 1000.0) if latency > 0 else None
    rtt = worst.client_rtt_ms + worst.server_rtt_ms
    potential = worst.transfer_rate_bps
    k_needed = (
        math.ceil(potential * latency / 1000.0 / (io * 8)) if potential and io and latency else None
    )
    client = info.client_ip if info else "?"
    proto = _protocol_names(ctx, worst.stream)
    share = worst.data_share("network")
    explanation = (
        f"The client {client} never had more than {k} {proto} request(s) outstanding on this "
        f"connection (at that maximum {pct(worst.at_max_fraction)} of the busy time) while the "
        f"server answered in {ms(worst.median_processing_ms)}: each request waits for the "
        f"round trip ({ms(rtt)}), and the link is idle {pct(share)} of the time. "
        f"Throughput = K x size / latency = {k} x {size(io)} / {ms(latency)} ≈ "
        f"{bitrate(little)}."
    )
    if potential:
        explanation += f" The path moves data at {bitrate(potential)} when it is used; " + (
            f"about {k_needed} requests in flight would fill it." if k_needed else ""
        )
    return [
        Finding(
            id="client-concurrency-limit",
            severity="warning",
            title=f"Client keeps only {k} request(s) in flight: latency-bound at {bitrate(little)}",
            explanation=explanation,
            evidence=Evidence(
                numbers={
                    "max_outstanding": k,
                    "mean_io_bytes": round(io),
                    "response_time_median_ms": round(latency, 3),
                    "server_processing_median_ms": round(worst.median_processing_ms, 3),
                    "network_wait_share": round(share, 4),
                    "at_max_fraction": round(worst.at_max_fraction, 4),
                    "mean_outstanding_busy": round(worst.mean_outstanding_busy, 3),
                    "rtt_ms": round(rtt, 3),
                    "littles_law_bps": round(little) if little else 0,
                    "requests_needed_to_fill_path": k_needed or "unknown",
                    "client": client,
                },
                frames=frames(worst.first_frames),
                wireshark_filter=stream_filter([worst.stream], "rpc || smb2"),
            ),
            impact=Impact(
                time_share=round(
                    weighted_share(ctx, {s: p.data_share("network") for s, p in hits.items()}), 4
                ),
                observed_bps=worst.observed_bps,
                potential_bps=potential,
                basis=(
                    f"now K x size / latency; with enough requests in flight the rate the path "
                    f"showed while data flowed ({bitrate(potential)})"
                ),
            ),
            next_steps=[
                f"On the client {client}: let it keep more requests in flight. NFS on Linux: "
                "mount with nconnect=4..16, raise sunrpc.tcp_max_slot_table_entries, use "
                "larger read-ahead; SMB: enable multichannel, use a copy tool with parallel "
                "or asynchronous I/O (robocopy /MT, rsync in parallel).",
                "Check the application: a single-threaded, synchronous reader/writer "
                "waits one round trip per request whatever the network.",
            ],
            confidence=0.85 if worst.at_max_fraction >= 0.8 else 0.7,
            streams=sorted(hits),
        )
    ]


def request_size_limited(ctx: Context) -> list[Finding]:
    th = ctx.th
    hits = {
        s: p for s, p in _latency_bound(ctx).items() if 0 < p.mean_io_bytes <= th.small_io_bytes
    }
    if not hits:
        return []
    worst = max(hits.values(), key=lambda p: p.data_ns["network"])
    info = ctx.streams.get(worst.stream)
    client = info.client_ip if info else "?"
    rtt = worst.client_rtt_ms + worst.server_rtt_ms
    io = worst.mean_io_bytes
    share = worst.data_share("network")
    return [
        Finding(
            id="request-size-limited",
            severity="warning",
            title=f"Small I/O: {size(io)} per request over a {ms(rtt)} round trip",
            explanation=(
                f"The client {client} reads/writes only {size(io)} per request on average; "
                f"over a round trip of {ms(rtt)} each request spends most of its time "
                f"travelling, and the link is idle {pct(share)} of the busy time. Larger "
                "requests move more data per round trip."
            ),
            evidence=Evidence(
                numbers={
                    "mean_io_bytes": round(io),
                    "rtt_ms": round(rtt, 3),
                    "network_wait_share": round(share, 4),
                    "io_requests": worst.io_requests,
                    "max_outstanding": worst.max_outstanding,
                    "client": client,
                },
                frames=frames(worst.first_frames),
                wireshark_filter=stream_filter([worst.stream], "nfs.count3 || smb2.read_length"),
            ),
            impact=Impact(
                time_share=round(
                    weighted_share(ctx, {s: p.data_share("network") for s, p in hits.items()}), 4
                ),
                observed_bps=worst.observed_bps,
                potential_bps=worst.transfer_rate_bps,
                basis="the rate the path showed while data flowed",
            ),
            next_steps=[
                f"On the client {client}: use larger I/O sizes (NFS: rsize/wsize=1048576 in "
                "the mount options; SMB: check the negotiated MaxReadSize/MaxWriteSize and "
                "the application's buffer size).",
                "Check the server's maximum transfer size (NFS: the server's max rsize; "
                "SMB: the server's negotiate response).",
            ],
            confidence=0.75,
            streams=sorted(hits),
        )
    ]


def credit_starvation(ctx: Context) -> list[Finding]:
    hits = []
    for s, share in _credit_starved_shares(ctx).items():
        if share >= ctx.th.credit_starved_share:
            hits.append((share, s, ctx.concurrency[s]))
    if not hits:
        return []
    hits.sort(reverse=True)
    share, s, conc = hits[0]
    info = ctx.streams.get(s)
    server = info.server_ip if info else "?"
    return [
        Finding(
            id="credit-starvation",
            severity="warning",
            title=f"SMB2 credits run out: requests held back {pct(share)} of the time",
            explanation=(
                f"The SMB server {server} grants too few credits: the client had to hold back "
                f"{conc.get('credit_starved_requests') or 0} request(s) until credits came back, "
                f"{ms(conc.get('credit_starved_ms'))} in all ({pct(share)} of the "
                "connection's time), so fewer requests were in flight than the client wanted."
            ),
            evidence=Evidence(
                numbers={
                    "credit_starved_ms": round(float(conc.get("credit_starved_ms") or 0), 3),
                    "credit_starved_requests": int(conc.get("credit_starved_requests") or 0),
                    "min_credit_balance": conc.get("min_credit_balance") or 0,
                    "max_outstanding": int(conc.get("max_outstanding") or 0),
                    "credit_balance_inferred": "yes"
                    if conc.get("credit_balance_inferred")
                    else "no",
                    "server": server,
                },
                wireshark_filter=stream_filter([s], "smb2.credits.granted || smb2.credit.charge"),
            ),
            impact=Impact(
                time_share=round(weighted_share(ctx, {h[1]: h[0] for h in hits}), 4),
                basis="time with requests waiting for credits",
            ),
            next_steps=[
                f"On {server}: raise the credit limit (Samba: 'smb2 max credits'; Windows: "
                "Smb2CreditsMax) and check the server is not throttling a busy session.",
            ],
            confidence=0.7 if conc.get("credit_balance_inferred") else 0.85,
            streams=sorted(h[1] for h in hits),
        )
    ]
