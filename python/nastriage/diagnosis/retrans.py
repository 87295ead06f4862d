"""Loss, reordering and capture drops told apart, per connection and data direction.

The evidence is in ``tcp_events`` (Wireshark's flags) plus the round trip:

* A **duplicate-ACK run** is the receiver repeating one ACK (``dup_ack=N of frame F``,
  grouped by F) while a hole is open. What fills the hole tells loss from reordering:

  - At a capture downstream of the hole (it sees the hole: ``lost_segment``), the
    segment that fills it arrives either within a fraction of the RTT (it was only late:
    **reordering**) or after at least about one RTT (the sender had to notice and
    retransmit: **loss**). Runs that start while a loss recovery is still going on belong
    to it (several holes repaired one after the other).
  - At a capture upstream of the hole (the sender's side: it sees no hole), a run answered
    by a retransmission is **loss**; a run that ends with no retransmission is
    **reordering** (the receiver got the segment anyway, a little late).

* **Timeouts**: a retransmission without a duplicate-ACK run, ``rto`` (time since the
  oldest unacknowledged segment) of at least ``timeout_min_s``.
* **Capture drops**: the receiver acknowledges data the capture never saw
  (``ack_lost_segment``, Wireshark's "ACKed unseen segment"): the capture dropped it, the
  network did not. Such holes are never counted as loss.

Zero-window probes, keep-alives and retransmissions around zero-window episodes are left
out (they belong to the receiver stall).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import re
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from nastriage.diagnosis.context import Context, Event, reverse
from nastriage.diagnosis.events import DupRunRow
from nastriage.diagnosis.timeline import union_sorted_ns

__all__ = ["KEEP", "DupRun", "LossAnalysis", "Spans", "analyse", "analyse_stream"]

_BYTES = re.compile(r"=(\d+) bytes")

#: Flags of data segments that do not advance the sequence (sent again, or late).
RESENT_KINDS = frozenset(
    {"retransmission", "out_of_order", "fast_retransmission", "spurious_retransmission"}
)
#: Without a round-trip figure, runs at least this long (ms) count as loss.
DEFAULT_LONG_RUN_MS = 3.0


#: Runs, retransmissions, timeouts, capture drops and episodes kept per connection and
#: direction for the findings (their frames and time ranges: a finding lists 30 frames at
#: most); the rest are only counted, as a lossy copy has tens of thousands of each.
KEEP = 30


class DupRun:
    """A duplicate-ACK run (slots: a lossy copy has tens of thousands)."""

    __slots__ = (
        "ack_frame",
        "count",
        "fill_delay_ns",
        "first",
        "first_frame",
        "kind",
        "last",
        "retransmitted",
    )

    def __init__(self, ack_frame: int, first: int, first_frame: int) -> None:
        self.ack_frame = ack_frame
        self.first = first
        self.last = first
        self.count = 0
        self.first_frame = first_frame
        #: Time from the run's start to the segment that filled the hole (downstream),
        #: or whether a retransmission answered it (upstream).
        self.fill_delay_ns: int | None = None
        self.retransmitted = False
        self.kind = ""  # "loss", "loss-continued", "reorder", "unknown"


@dataclass
class LossAnalysis:
    """One connection and data direction. Lists hold the first :data:`KEEP` items in time
    order; the counts hold them all."""

    stream: int
    direction: str  # data direction (the sender sends in it)
    rtt_ms: float | None
    long_run_ms: float
    downstream: bool  # the capture sees the holes (it is after the loss point)
    loss_runs: list[DupRun]
    loss_run_count: int
    reorder_runs: list[DupRun]
    reorder_run_count: int
    #: Retransmitted or late segments: how many, their first frames, the first of those
    #: within loss episodes, and the time of the last.
    resent_count: int
    resent_frames: list[int]
    episode_resent_frames: list[int]
    last_resent_time: int | None
    timeout_count: int
    timeout_frames: list[int]
    hole_count: int
    ack_unseen: list[Event]
    ack_unseen_count: int
    unseen_bytes: int
    spurious: int
    dsack_blocks: int
    data_segments: int
    #: Resent segments that belong to loss episodes (retransmissions that were needed).
    lost_segments: int = 0
    #: Resent segments that were reordering (late originals, or needless retransmissions).
    reordered_segments: int = 0
    needless_retransmissions: int = 0
    recovery_ns: int = 0
    episodes: list[tuple[int, int]] = field(default_factory=list)
    episode_count: int = 0
    first_episode_segments: int = 0

    @property
    def loss_events(self) -> int:
        return self.loss_run_count + self.timeout_count

    @property
    def loss_rate(self) -> float:
        return self.lost_segments / self.data_segments if self.data_segments else 0.0

    @property
    def reorder_rate(self) -> float:
        return self.reordered_segments / self.data_segments if self.data_segments else 0.0


def analyse(ctx: Context) -> dict[tuple[int, str], LossAnalysis]:
    """Every connection and direction that carried data and has any TCP flags."""

    def build() -> dict[tuple[int, str], LossAnalysis]:
        out: dict[tuple[int, str], LossAnalysis] = {}
        for stream in ctx.events:
            info = ctx.streams.get(stream)
            flagged = ctx.events.kinds(stream)
            for d in ("c2s", "s2c"):
                if info is not None and info.payload_dir(d) == 0:
                    continue
                if not any((d, k) in flagged for k in RESENT_KINDS) and not any(
                    (reverse(d), k) in flagged for k in ("duplicate_ack", "ack_lost_segment")
                ):
                    continue
                out[(stream, d)] = analyse_stream(ctx, stream, d)
        return out

    return ctx._cached("loss", build)  # type: ignore[no-any-return]


def _zero_window_spans(ctx: Context, stream: int, margin_ns: int) -> Spans:
    return Spans(
        (ep.start - margin_ns, ep.end + margin_ns)
        for ep in ctx.zero_window_episodes.get(stream, [])
    )


class Spans:
    """Closed time spans, possibly overlapping, asked whether a time lies in any of them
    in O(log n) (a lossy connection has thousands of episodes and of retransmissions)."""

    __slots__ = ("_reach", "_starts")

    def __init__(self, spans: Iterable[tuple[int, int]]) -> None:
        ordered = sorted(spans)
        self._starts = array("q", (s for s, _ in ordered))
        # The latest end among the spans that start at or before each one.
        self._reach = array("q", itertools.accumulate((e for _, e in ordered), max))

    @classmethod
    def by_start(cls, starts: array[int], ends: array[int]) -> Spans:
        """The spans ``starts[i]``..``ends[i]``, already in order of their starts (the
        order of equal starts does not matter: the reach past them is their latest end)."""
        out = cls(())
        out._starts = array("q", starts)
        out._reach = array("q", itertools.accumulate(ends, max))
        return out

    def __contains__(self, t: int) -> bool:
        i = bisect.bisect_right(self._starts, t)
        return i > 0 and self._reach[i - 1] >= t


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

    in_episodes = Spans.by_start(ep_starts, ep_ends)
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


#: What :func:`analyse_stream` does with an event, by its label (see :func:`_action`).
_SKIP, _RESENT, _SPURIOUS, _HOLE, _DUP_ACK, _UNSEEN = range(6)


def _action(label: tuple[str, str], d: str, rd: str) -> int:
    """The action for events labelled (direction, kind) when the data flows in ``d``
    (``rd`` the other way)."""
    direction, kind = label
    if direction == d:
        if kind == "spurious_retransmission":
            return _SPURIOUS
        if kind in RESENT_KINDS:
            return _RESENT
        if kind == "lost_segment":
            return _HOLE
    elif direction == rd:
        if kind == "duplicate_ack":
            return _DUP_ACK
        if kind == "ack_lost_segment":
            return _UNSEEN
    return _SKIP


def _followed(t: int, times: Sequence[int], window_ns: int) -> bool:
    """Whether a time in the sorted ``times`` lies in [t, t + window_ns]."""
    i = bisect.bisect_left(times, t)
    return i < len(times) and times[i] <= t + window_ns
