"""The loss analysis as it was before it streamed (``nastriage.diagnosis.retrans`` up
to the fourteenth session): one connection and direction at a time, over its whole list
of flags and duplicate-ACK runs held in memory. The tests hold the streaming analysis
to it, result for result."""

from __future__ import annotations

import bisect
import heapq
import re
from array import array
from collections.abc import Iterator, Sequence

from nastriage.diagnosis.context import Context, Event, reverse
from nastriage.diagnosis.events import DupRunRow
from nastriage.diagnosis.retrans import (
    _DUP_ACK,
    _HOLE,
    _SKIP,
    _SPURIOUS,
    DEFAULT_LONG_RUN_MS,
    KEEP,
    DupRun,
    LossAnalysis,
    Spans,
    _action,
    _zero_window_spans,
)
from nastriage.diagnosis.timeline import union_sorted_ns

#: The bytes an ACK of unseen data acknowledged, in its detail (ASCII digits, as the
#: engine's reading takes them).
_BYTES = re.compile(r"=(\d+) bytes", re.ASCII)


def analyse_stream(ctx: Context, stream: int, d: str) -> LossAnalysis:
    """One direction of one connection. Its events are walked as plain rows, and only
    those kept become :class:`Event` tuples (a lossy copy has most of its capture's
    hundreds of thousands of flags, duplicate ACKs mostly, on one connection)."""
    th = ctx.th
    info = ctx.streams.get(stream)
    tcp = info.tcp if info else {}
    rtt = ctx.path_rtt_ms(stream)
    long_ms = (
        max(th.reorder_run_min_ms, th.reorder_run_rtt_share * rtt)
        if rtt is not None
        else DEFAULT_LONG_RUN_MS
    )
    long_ns = int(long_ms * 1e6)
    zw = _zero_window_spans(ctx, stream, int(th.timeout_min_s * 1e9))
    rd = reverse(d)

    # The last resent frame taken: a frame with several flags (a retransmission that is
    # also a fast one) counts once, and its flags are next to each other in time order.
    last_resent: int | None = None
    # The resent segments as columns (a lossy copy has tens of thousands): frame, time,
    # and the time since the oldest unacknowledged segment (s; NaN when not given).
    resent_frames = array("q")
    resent_times = array("q")
    resent_rto = array("d")
    spurious = 0
    hole_times = array("q")
    ack_unseen: list[Event] = []
    ack_unseen_count = 0
    unseen_times = array("q")
    unseen_bytes = 0
    # What each (direction, kind) label means here, looked up once per label and not
    # once per event (a lossy copy walks a hundred thousand events per direction).
    actions = [_action(label, d, rd) for label in ctx.events.labels]
    # (Duplicate ACKs come as runs, not one by one: see dup_runs below.)
    for frame, time, code, detail, rto in ctx.events.ordered(stream):
        action = actions[code]
        if action == _SKIP:
            continue
        elif action <= _SPURIOUS:
            if frame != last_resent and time not in zw:
                last_resent = frame
                resent_frames.append(frame)
                resent_times.append(time)
                resent_rto.append(rto)
            if action == _SPURIOUS:
                spurious += 1
        elif action == _HOLE:
            hole_times.append(time)
        else:  # _UNSEEN
            ack_unseen_count += 1
            if len(ack_unseen) < KEEP:
                direction, kind = ctx.events.labels[code]
                ack_unseen.append(Event(frame, time, direction, kind, detail or ""))
            unseen_times.append(time)
            m = _BYTES.search(detail or "")
            if m:
                unseen_bytes += int(m.group(1))

    # The duplicate-ACK runs against this direction's data, by their first duplicate ACK
    # (walked twice as plain rows: a lossy copy has tens of thousands, and a DupRun is made
    # only for those a finding keeps).
    def runs() -> Iterator[DupRunRow]:
        for run in ctx.events.dup_runs(stream):
            if actions[run[0]] == _DUP_ACK and run[2] not in zw:
                yield run

    run_count = sum(1 for _ in runs())
    # Holes explained by capture drops do not make the capture "downstream" of a loss.
    # A hole the receiver then acknowledges although the capture never saw its data was
    # dropped by the capture (the ACK follows within a round trip plus a delayed ACK).
    ack_wait = int(((rtt or DEFAULT_LONG_RUN_MS) * 2 + 250.0) * 1e6)
    real_holes = sum(1 for h in hole_times if not _followed(h, unseen_times, ack_wait))
    # The capture is downstream of the losses when it sees their holes (about one per run).
    downstream = bool(real_holes) and real_holes >= 0.25 * run_count

    recovery_until = -1
    # The loss episodes' starts and ends, in order of their starts (a lossy copy has tens
    # of thousands: columns, not a tuple each).
    ep_starts = array("q")
    ep_ends = array("q")
    loss_runs: list[DupRun] = []
    reorder_runs: list[DupRun] = []
    loss_run_count = reorder_run_count = 0
    for _, key, first, first_frame, last, count in runs():
        i = bisect.bisect_left(resent_times, first - int(1e6))
        nxt = resent_times[i] if i < len(resent_times) else None
        fill_delay_ns = None
        retransmitted = nxt is not None and nxt <= last + long_ns
        if downstream:
            fill_delay_ns = None if nxt is None else max(0, nxt - first)
            if first <= recovery_until:
                kind = "loss-continued"
            elif fill_delay_ns is None:
                kind = "unknown"
            else:
                kind = "loss" if fill_delay_ns >= long_ns else "reorder"
        elif first <= recovery_until:
            kind = "loss-continued"
        else:
            kind = "loss" if retransmitted else "reorder"
        if kind in ("loss", "loss-continued"):
            end = max(last, (nxt or last) if retransmitted else last)
            end += int((rtt or long_ms) * 1e6)
            recovery_until = max(recovery_until, end)
            if kind == "loss" or not ep_starts:
                ep_starts.append(first)
                ep_ends.append(end)
            else:
                ep_ends[-1] = max(ep_ends[-1], end)
        kept = None
        if kind == "loss":
            loss_run_count += 1
            kept = loss_runs if len(loss_runs) < KEEP else None
        elif kind == "reorder":
            reorder_run_count += 1
            kept = reorder_runs if len(reorder_runs) < KEEP else None
        if kept is not None:
            run = DupRun(key, first, first_frame)
            run.last, run.count = last, count
            run.fill_delay_ns, run.retransmitted, run.kind = fill_delay_ns, retransmitted, kind
            kept.append(run)

    in_episodes = Spans(zip(ep_starts, ep_ends))
    timeout_count = 0
    timeout_frames: list[int] = []
    timeout_spans: list[tuple[int, int]] = []
    lost = reordered = needless = 0
    episode_resent_frames: list[int] = []
    first_episode = 0
    for frame, time, rto in zip(resent_frames, resent_times, resent_rto):
        in_episode = time in in_episodes
        if not in_episode and rto >= th.timeout_min_s:  # (NaN: no rto given)
            timeout_count += 1
            if len(timeout_frames) < KEEP:
                timeout_frames.append(frame)
            timeout_spans.append((time - int(rto * 1e9), time))
            lost += 1
        elif in_episode:
            lost += 1
            if len(episode_resent_frames) < KEEP:
                episode_resent_frames.append(frame)
        else:
            reordered += 1
            if not downstream:
                needless += 1
        if ep_starts and ep_starts[0] <= time <= ep_ends[0]:
            first_episode += 1
    # (Both in order of their starts, merged without a list of every episode.)
    recovery = union_sorted_ns(heapq.merge(zip(ep_starts, ep_ends), sorted(timeout_spans)))
    segments = (info.frames_c2s if d == "c2s" else info.frames_s2c) if info else 0
    return LossAnalysis(
        stream=stream,
        direction=d,
        rtt_ms=rtt,
        long_run_ms=long_ms,
        downstream=downstream,
        loss_runs=loss_runs,
        loss_run_count=loss_run_count,
        reorder_runs=reorder_runs,
        reorder_run_count=reorder_run_count,
        resent_count=len(resent_frames),
        resent_frames=list(resent_frames[:KEEP]),
        episode_resent_frames=episode_resent_frames,
        last_resent_time=resent_times[-1] if resent_times else None,
        timeout_count=timeout_count,
        timeout_frames=timeout_frames,
        hole_count=len(hole_times),
        ack_unseen=ack_unseen,
        ack_unseen_count=ack_unseen_count,
        unseen_bytes=unseen_bytes,
        spurious=spurious,
        dsack_blocks=int(tcp.get("dsack_blocks") or 0) if tcp else 0,
        data_segments=max(segments, len(resent_frames)),
        lost_segments=lost,
        reordered_segments=reordered,
        needless_retransmissions=needless,
        recovery_ns=recovery,
        episodes=list(zip(ep_starts[:KEEP], ep_ends[:KEEP])),
        episode_count=len(ep_starts),
        first_episode_segments=first_episode,
    )


def _followed(t: int, times: Sequence[int], window_ns: int) -> bool:
    """Whether a time in the sorted ``times`` lies in [t, t + window_ns]."""
    i = bisect.bisect_left(times, t)
    return i < len(times) and times[i] <= t + window_ns
