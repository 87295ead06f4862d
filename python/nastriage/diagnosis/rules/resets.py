"""connection-resets: NFS/SMB connections torn down by a TCP reset (requests lost)."""

from __future__ import annotations

from nastriage.diagnosis.context import Context
from nastriage.diagnosis.finding import Evidence, Finding, Impact, Severity
from nastriage.diagnosis.rules._util import frames, stream_filter, time_range


def connection_resets(ctx: Context) -> list[Finding]:
    reset = [s for s in ctx.streams.values() if s.rst]
    if not reset:
        return []
    storage = []
    lost_requests = 0
    lost_frames: list[int] = []
    for info in reset:
        unanswered = ctx.unanswered_storage_frames(info.stream)
        if unanswered is None:
            continue
        storage.append(info)
        lost_requests += len(unanswered)
        lost_frames += unanswered
    if not storage:
        if ctx.has_tcp_transactions():
            return []  # portmapper/mount side connections reset: routine
        # no NFS/SMB traffic at all: the resets may be refused connections
        severity: Severity = "info"
        subject = reset
    else:
        severity = "warning" if lost_requests else "info"
        subject = storage
    servers = sorted({s.server_ip for s in subject})
    if storage and lost_requests:
        explanation = (
            f"{len(storage)} NFS/SMB connection(s) ended with a TCP reset while "
            f"{lost_requests} request(s) were still unanswered: the client has to reconnect, "
            "re-establish its session and retry, which stalls the application (often for "
            "seconds) and can surface as I/O errors."
        )
    elif storage:
        explanation = (
            f"{len(storage)} NFS/SMB connection(s) ended with a TCP reset, with no request "
            "left unanswered (some clients and servers close idle connections this way)."
        )
    else:
        explanation = (
            f"{len(reset)} TCP connection(s) without NFS/SMB traffic were reset "
            "(refused or aborted connections)."
        )
    return [
        Finding(
            id="connection-resets",
            severity=severity,
            title=f"{len(subject)} connection(s) reset"
            + (f", {lost_requests} request(s) lost" if lost_requests else ""),
            explanation=explanation,
            evidence=Evidence(
                numbers={
                    "reset_connections": len(reset),
                    "reset_storage_connections": len(storage),
                    "unanswered_requests": lost_requests,
                    "servers": ", ".join(servers[:5]),
                },
                time_ranges=[time_range(s.end, s.end, s.stream, "reset") for s in subject[:10]],
                frames=frames(lost_frames),
                wireshark_filter=stream_filter([s.stream for s in subject], "tcp.flags.reset == 1"),
            ),
            impact=Impact(basis="lost requests are retried after a reconnect"),
            next_steps=[
                "Find which side sent the reset (the filter above) and check that host's "
                "logs at that time (service restart, idle timeout, firewall session "
                "expiry, keep-alive settings).",
                "Check firewalls and load balancers on the path for idle timeouts shorter than "
                "the clients' keep-alive interval.",
            ],
            confidence=0.8 if lost_requests else 0.6,
            streams=sorted(s.stream for s in subject),
        )
    ]
