"""Every threshold the diagnosis rules use, in one place (documented in docs/findings.md).

Rules read them from a :class:`Thresholds` instance (``diagnose(capture, thresholds=...)``),
so a test or a user can tune one without editing a rule. Shares are fractions (0..1) of a
connection's active time unless the name says otherwise; times are milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["DEFAULT", "Thresholds", "describe"]


@dataclass(frozen=True)
class Thresholds:
    # -- general ----------------------------------------------------------------------------
    #: A connection must carry at least this much payload (both directions) for the
    #: throughput rules (loss, reordering, window, latency) to judge it.
    min_stream_bytes: int = 256 * 1024
    #: A finding whose time share reaches this is critical (where the rule grades by share).
    critical_share: float = 0.30
    #: ... and a warning from this share on (below: info, or no finding).
    warning_share: float = 0.05

    # -- receiver-stall ---------------------------------------------------------------------
    #: Zero-window time (union of episodes) that makes a stall worth a finding, whatever
    #: its share (a stall of at least 1 ms counts when its share reaches the next one)...
    stall_min_ms: float = 50.0
    #: ... and the share of the connection's duration that makes it a warning.
    stall_warning_share: float = 0.02

    # -- congestion-loss / reordering / capture-incomplete ----------------------------------
    #: A duplicate-ACK run (the receiver repeating one ACK while a hole is open) lasting at
    #: least this share of the RTT means the hole was filled by a retransmission (loss);
    #: shorter runs mean the missing segment was only late (reordering).
    reorder_run_rtt_share: float = 0.5
    #: Never call a run shorter than this "long" (RTT estimates below it are noise).
    reorder_run_min_ms: float = 1.0
    #: A retransmission with no duplicate-ACK run around it whose ``rto`` (time since the
    #: oldest unacknowledged segment) is at least this is a retransmission timeout.
    timeout_min_s: float = 0.2
    #: Loss episodes (long duplicate-ACK runs + timeouts) needed for congestion-loss...
    loss_min_events: int = 3
    #: ... and retransmitted segments as a share of data segments.
    loss_min_rate: float = 0.0005
    #: Or: a single episode will do when the retransmissions reach this share of the
    #: segments (a small connection that lost a lot). Below both: an info finding.
    loss_high_rate: float = 0.01
    #: Retransmitted segments needed with the high rate.
    loss_high_rate_min_segments: int = 3
    #: Reordering episodes (short runs without a retransmission) needed for reordering.
    reorder_min_events: int = 5
    #: ACKs of data the capture never saw needed for a capture-incomplete warning
    #: (fewer: info).
    capture_drop_warning_events: int = 3

    # -- receive-window-limited -------------------------------------------------------------
    #: Share of the transfer time the sender was limited by the receiver's window.
    rwnd_limited_share: float = 0.5
    #: ... or: bytes in flight reach at least this share of the advertised window while the
    #: throughput is at least this share of window / RTT.
    rwnd_flight_share: float = 0.85
    rwnd_throughput_share: float = 0.6

    # -- server-latency / client-concurrency-limit / request-size-limited --------------------
    #: Answered requests a connection needs before its request timing is judged.
    min_requests: int = 8
    #: Share of the connection's active time spent waiting for the server (requests
    #: outstanding, no data flowing, beyond the network round trip).
    server_latency_share: float = 0.3
    #: Median server processing time (response time minus the network round trip) needed,
    #: in ms and as a multiple of the round trip behind the capture point.
    server_latency_min_ms: float = 2.0
    server_latency_rtt_factor: float = 2.0
    #: Share of the active time spent waiting on network round trips (requests outstanding,
    #: no data flowing, the server already done).
    latency_bound_share: float = 0.35
    #: A client that never had more than this many requests outstanding is "capped".
    concurrency_max_k: int = 32
    #: ... and sat at that maximum for at least this share of its busy time.
    concurrency_at_max_share: float = 0.5
    #: Requests moving at most this many bytes on average are "small".
    small_io_bytes: int = 32 * 1024
    #: SMB2: share of the active time with requests held back for lack of credits.
    credit_starved_share: float = 0.1
    #: ... and at least this many requests held back (the session set-up, where the client
    #: has one credit, always holds back a few).
    credit_starved_min_requests: int = 10

    # -- metadata-heavy ---------------------------------------------------------------------
    #: Metadata requests needed (a storm, not a few lookups)...
    metadata_min_calls: int = 100
    #: ... and their share of the time requests were outstanding.
    metadata_time_share: float = 0.5

    # -- protocol-errors ---------------------------------------------------------------------
    #: Errors of a harmless kind (e.g. NFS3ERR_NOENT) only matter above this share of calls.
    benign_error_share: float = 0.2
    benign_error_min_calls: int = 50

    # -- healthy ----------------------------------------------------------------------------
    #: Share of active time with data flowing above which a transfer is "link-limited".
    link_limited_share: float = 0.6


DEFAULT = Thresholds()


def describe() -> list[tuple[str, object]]:
    """(name, default value) of every threshold, in declaration order."""
    return [(f.name, getattr(DEFAULT, f.name)) for f in fields(Thresholds)]
