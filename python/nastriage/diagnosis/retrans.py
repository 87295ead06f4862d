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

The events are read twice, a range of the table's rows at a time, every connection at
once (see :class:`_Direction`), and nothing is kept per event but a retransmission's
time and a loss episode's span: a single lossy file copy flags a hundred thousand
segments per GiB, all on one connection, and holding them made memory grow with the
capture.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import re
from array import array
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from nastriage.diagnosis.context import Context, Event, reverse
from nastriage.diagnosis.events import DupRunRow, EventsByStream, Range, Row
from nastriage.diagnosis.spilled import Column, Reader, Spill
from nastriage.diagnosis.timeline import union_sorted_ns

__all__ = ["KEEP", "DupRun", "LossAnalysis", "Spans", "analyse"]

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
    return ctx._cached("loss", lambda: _analyse(ctx))  # type: ignore[no-any-return]


def _zero_window_spans(ctx: Context, stream: int, margin_ns: int) -> Spans:
    return Spans(
        (ep.start - margin_ns, ep.end + margin_ns)
        for ep in ctx.zero_window_episodes.get(stream, [])
    )


class Spans:
    """Closed time spans, possibly overlapping, asked whether a time lies in any of them
    in O(log n) (the zero-window episodes of a connection, asked at every retransmission
    and run)."""

    __slots__ = ("_reach", "_starts")

    def __init__(self, spans: Iterable[tuple[int, int]]) -> None:
        ordered = sorted(spans)
        self._starts = array("q", (s for s, _ in ordered))
        # The latest end among the spans that start at or before each one.
        self._reach = array("q", itertools.accumulate((e for _, e in ordered), max))

    def __contains__(self, t: int) -> bool:
        i = bisect.bisect_right(self._starts, t)
        return i > 0 and self._reach[i - 1] >= t

    def __bool__(self) -> bool:
        return bool(self._starts)


def _analyse(ctx: Context) -> dict[tuple[int, str], LossAnalysis]:
    """Two readings of the events (see :class:`_Direction`), over every connection at
    once: the engine regroups a range of the table's rows at a time, and nothing is kept
    per event."""
    spill = Spill()
    try:
        return _read(ctx, spill)
    finally:
        spill.close()


def _read(ctx: Context, spill: Spill) -> dict[tuple[int, str], LossAnalysis]:
    streams: dict[int, _Connection] = {}
    actions = _Actions()
    for labels, chunk in ctx.event_chunks("rows+runs"):
        acts = actions.of(labels)
        for stream, item in chunk.items():
            c = streams.get(stream)
            if c is None:
                c = streams[stream] = _Connection(ctx, stream, spill)
            r = Range(item)
            if c.in_order:
                c.in_order = c.still_in_order(r)
            c.first(r, acts)
    # A connection whose events go back in time (a clock step), or whose duplicate ACKs
    # repeat an earlier ACK after a later one (a table not written by the engine), is
    # held whole and read sorted (as the analysis read every connection before it
    # streamed).
    disordered = {s for s, c in streams.items() if not c.in_order}
    held = (
        EventsByStream.from_grouped(ctx.event_chunks("rows+runs"), only=disordered)
        if disordered
        else EventsByStream(None)
    )
    held_acts = actions.of(held.labels)
    for stream in disordered:
        c = streams[stream] = _Connection(ctx, stream, spill)
        c.first(held.whole(stream), held_acts)
    # (Every connection decides, the held ones too.)
    live = {s: c for s, c in streams.items() if c.decide()}
    read = {s: c for s, c in live.items() if s not in disordered}
    if read:
        for labels, chunk in ctx.event_chunks("rows+runs"):
            acts = actions.of(labels)
            for stream, item in chunk.items():
                c = read.get(stream)
                if c is not None:
                    c.second(Range(item), acts)
    for stream in disordered & live.keys():
        streams[stream].second(held.whole(stream), held_acts)
    return {(stream, la.direction): la for stream, c in streams.items() for la in c.results()}


class _Actions:
    """What the loss analysis does with each label's events, per data direction (see
    :func:`_action`), extended as the readings number more labels."""

    def __init__(self) -> None:
        self._by_dir: dict[str, list[int]] = {"c2s": [], "s2c": []}

    def of(self, labels: list[tuple[str, str]]) -> dict[str, list[int]]:
        for d, acts in self._by_dir.items():
            # (Every reading numbers the labels alike: by first appearance in the table.)
            if len(acts) < len(labels):
                acts.extend(_action(label, d, reverse(d)) for label in labels[len(acts) :])
        return self._by_dir


class _Connection:
    """One connection in the readings: its two data directions (each made on the first
    event that concerns it; None when it carried no data), and whether its events came
    in time order."""

    __slots__ = ("ctx", "dirs", "in_order", "last_row", "runs_at", "spill", "stream")

    def __init__(self, ctx: Context, stream: int, spill: Spill) -> None:
        self.ctx = ctx
        self.stream = stream
        self.spill = spill
        self.dirs: dict[str, _Direction | None] = {}
        self.in_order = True
        #: The (time, frame) of the latest row, and per label the latest run's
        #: acknowledged frame and first (time, frame).
        self.last_row: tuple[int, int] | None = None
        self.runs_at: dict[int, tuple[int, int, int]] = {}

    def still_in_order(self, r: Range) -> bool:
        """Whether a range's rows and runs keep what the readings rely on: the rows in
        (time, frame) order; each label's runs in order of their first, with later and
        later acknowledged frames (so that a run going on past a range's end is the next
        range's first of its label, and is joined to it); and no run starting before a
        row of an earlier range (so that a retransmission is placed once every run
        starting at or before it is read)."""
        if not (r.rows_in_order and r.runs_in_order):
            return False
        before = self.last_row
        for code, key, first, first_frame, _, _ in r.runs():
            at = self.runs_at.get(code)
            if at is not None and (key < at[0] or (first, first_frame) < at[1:]):
                return False
            if at is not None and key == at[0]:
                continue  # (the same run, from the rows before)
            if before is not None and first < before[0]:
                return False
            self.runs_at[code] = (key, first, first_frame)
        if r.frames:
            if before is not None and (r.times[0], r.frames[0]) < before:
                return False
            self.last_row = (r.times[-1], r.frames[-1])
        return True

    def first(self, r: Range, acts: dict[str, list[int]]) -> None:
        # (The labels here, once: a direction is made on the first event concerning it.)
        labels: tuple[set[int], set[int]] | None = None
        for d in ("c2s", "s2c"):
            a = acts[d]
            if d not in self.dirs:
                if labels is None:
                    labels = ({*r.codes}, {*r.run_cols[0]})
                rows, runs = labels
                if all(a[c] == _SKIP for c in rows) and all(a[c] != _DUP_ACK for c in runs):
                    continue
                info = self.ctx.streams.get(self.stream)
                carried = info is None or info.payload_dir(d) != 0
                self.dirs[d] = _Direction(self.ctx, self.stream, d, self.spill) if carried else None
            x = self.dirs[d]
            if x is not None:
                x.first_rows(r.rows(), a)
                x.first_runs(r.runs(), a)

    def decide(self) -> bool:
        """After the first reading: whether any direction is analysed further."""
        return any([x.decide() for x in self.dirs.values() if x is not None])

    def second(self, r: Range, acts: dict[str, list[int]]) -> None:
        for d, x in self.dirs.items():
            if x is not None and x.selected:
                x.second(r, acts[d])

    def results(self) -> Iterator[LossAnalysis]:
        for d in ("c2s", "s2c"):
            x = self.dirs.get(d)
            if x is not None and x.selected:
                yield x.result()


class _Direction:
    """The loss analysis of one connection's data direction, read twice in time order,
    a range of rows at a time, with nothing kept per event (a lossy copy flags a hundred
    thousand segments per GiB on its one connection):

    1. the retransmissions' times (8 bytes each: the duplicate-ACK runs look ahead in
       them), the holes and the capture drops, and how many runs: whether the capture is
       downstream of the loss;
    2. the runs, each classified once it is all read, and the loss episodes they make
       (16 bytes each); and the retransmissions again, each in an episode, a timeout or
       reordering once every run starting at or before it is classified (they wait for
       that: the run still being read may start before them).

    Only the retransmissions' times and the episodes grow with the connection; the rest
    is counts and the first :data:`KEEP` of each list."""

    __slots__ = (
        "ack_unseen",
        "ack_unseen_count",
        "answers",
        "d",
        "downstream",
        "ep_at",
        "ep_ends",
        "ep_reach",
        "ep_readers",
        "ep_starts",
        "episode_resent_frames",
        "episodes",
        "first_episode",
        "hole_count",
        "horizon",
        "info",
        "last_resent",
        "last_resent_time",
        "last_unseen",
        "long_ms",
        "long_ns",
        "loss_run_count",
        "loss_runs",
        "lost",
        "needless",
        "pending_holes",
        "real_holes",
        "recovery_until",
        "reorder_run_count",
        "reorder_runs",
        "reordered",
        "resent_frames",
        "resent_times",
        "rtt",
        "run",
        "run_count",
        "run_key",
        "selected",
        "spurious",
        "stream",
        "timeout_count",
        "timeout_ends",
        "timeout_frames",
        "timeout_min_s",
        "timeout_starts",
        "unseen_bytes",
        "wait_ns",
        "waiting",
        "zw",
    )

    def __init__(self, ctx: Context, stream: int, d: str, spill: Spill) -> None:
        th = ctx.th
        self.stream, self.d = stream, d
        self.info = ctx.streams.get(stream)
        self.rtt = rtt = ctx.path_rtt_ms(stream)
        self.long_ms = (
            max(th.reorder_run_min_ms, th.reorder_run_rtt_share * rtt)
            if rtt is not None
            else DEFAULT_LONG_RUN_MS
        )
        self.long_ns = int(self.long_ms * 1e6)
        zw = _zero_window_spans(ctx, stream, int(th.timeout_min_s * 1e9))
        #: Times around zero-window episodes (None without any: most connections).
        self.zw = zw if zw else None
        self.timeout_min_s = th.timeout_min_s
        # A hole the receiver then acknowledges although the capture never saw its data
        # was dropped by the capture (the ACK follows within a round trip plus a delayed
        # ACK).
        self.wait_ns = int(((rtt or DEFAULT_LONG_RUN_MS) * 2 + 250.0) * 1e6)
        self.selected = False
        # Both readings: a frame with several flags (a retransmission that is also a
        # fast one) counts once; its flags are next to each other in time order.
        self.last_resent: int | None = None
        # The first reading.
        self.resent_times = Column(spill)
        self.last_resent_time: int | None = None
        self.resent_frames: list[int] = []
        self.spurious = 0
        self.hole_count = 0
        self.real_holes = 0
        #: Holes not yet followed by a capture drop's ACK, within the wait of the latest.
        self.pending_holes: deque[int] = deque()
        self.last_unseen: int | None = None
        self.ack_unseen: list[Event] = []
        self.ack_unseen_count = 0
        self.unseen_bytes = 0
        self.run_key: int | None = None
        self.run_count = 0
        self.downstream = False
        # The second: the runs.
        #: The run being read ([key, first, first frame, last, count]): it may go on in
        #: the next range of rows.
        self.run: list[int] | None = None
        self.recovery_until = -1
        #: The next retransmission a run may be answered by (runs come in order).
        self.answers: Reader | None = None
        self.ep_starts = Column(spill)
        self.ep_ends = Column(spill)
        #: The first KEEP episodes ([start, end]: the last one's end still grows).
        self.episodes: list[list[int]] = []
        self.loss_runs: list[DupRun] = []
        self.reorder_runs: list[DupRun] = []
        self.loss_run_count = self.reorder_run_count = 0
        # The second: the retransmissions.
        #: (frame, time, rto) of those not yet placed, and the latest row's time (a run
        #: starting in a later range starts no earlier).
        self.waiting: deque[tuple[int, int, float]] = deque()
        self.horizon: int | None = None
        #: The episodes that start at or before the retransmission (read in order),
        #: how many, and the latest end among them.
        self.ep_readers: tuple[Reader, Reader] | None = None
        self.ep_at = 0
        self.ep_reach = -1
        #: The timeouts' spans (a few per thousand retransmissions).
        self.timeout_starts = array("q")
        self.timeout_ends = array("q")
        self.timeout_count = 0
        self.timeout_frames: list[int] = []
        self.lost = self.reordered = self.needless = self.first_episode = 0
        self.episode_resent_frames: list[int] = []

    # -- the first reading -----------------------------------------------------------------

    def first_rows(self, rows: Iterable[Row], actions: list[int]) -> None:
        wait = self.wait_ns
        pending = self.pending_holes
        zw = self.zw
        times = array("q")  # (the retransmissions' times, added to the column at once)
        for frame, time, code, detail, _ in rows:
            action = actions[code]
            if action == _SKIP:
                continue
            elif action <= _SPURIOUS:
                self.selected = True
                if frame != self.last_resent and (zw is None or time not in zw):
                    self.last_resent = frame
                    times.append(time)
                    self.last_resent_time = time
                    if len(self.resent_frames) < KEEP:
                        self.resent_frames.append(frame)
                if action == _SPURIOUS:
                    self.spurious += 1
                continue
            # Holes no capture drop's ACK followed within the wait are real (a later ACK
            # would come later still).
            while pending and pending[0] + wait < time:
                pending.popleft()
                self.real_holes += 1
            if action == _HOLE:
                self.hole_count += 1
                # (One at this very time, just before, follows it.)
                if time != self.last_unseen:
                    pending.append(time)
            else:  # _UNSEEN: it follows every hole still waiting
                self.selected = True
                pending.clear()
                self.last_unseen = time
                self.ack_unseen_count += 1
                if len(self.ack_unseen) < KEEP:
                    self.ack_unseen.append(
                        Event(frame, time, reverse(self.d), "ack_lost_segment", detail or "")
                    )
                m = _BYTES.search(detail or "")
                if m:
                    self.unseen_bytes += int(m.group(1))
        self.resent_times.extend(times)

    def first_runs(self, runs: Iterable[DupRunRow], actions: list[int]) -> None:
        zw = self.zw
        for code, key, first, _, _, _ in runs:
            if actions[code] != _DUP_ACK:
                continue
            self.selected = True
            if key == self.run_key:
                continue  # (it goes on from the rows before)
            self.run_key = key
            if zw is None or first not in zw:
                self.run_count += 1

    def decide(self) -> bool:
        """The first reading is over: whether the capture is downstream of the losses.
        It is when it sees their holes (about one per run); holes explained by capture
        drops do not count."""
        self.real_holes += len(self.pending_holes)
        self.pending_holes.clear()
        self.downstream = bool(self.real_holes) and self.real_holes >= 0.25 * self.run_count
        self.last_resent = None
        return self.selected

    # -- the second reading ----------------------------------------------------------------

    def second(self, r: Range, actions: list[int]) -> None:
        """A range's runs (each classified once all read), then its retransmissions."""
        for code, key, first, first_frame, last, count in r.runs():
            if actions[code] != _DUP_ACK:
                continue
            run = self.run
            if run is not None and run[0] == key:
                run[3] = max(run[3], last)
                run[4] += count
                continue
            if run is not None:
                self._classify(*run)
            self.run = [key, first, first_frame, last, count]
        zw = self.zw
        waiting = self.waiting
        for frame, time, code, rto in zip(r.frames, r.times, r.codes, r.rto):
            if (
                _SKIP < actions[code] <= _SPURIOUS
                and frame != self.last_resent
                and (zw is None or time not in zw)
            ):
                self.last_resent = frame
                waiting.append((frame, time, rto))
        if r.times:
            self.horizon = r.times[-1]
        # The run being read may start at or before the retransmissions of its time or
        # later, and a run of a later range at this range's last time.
        limit = self.horizon
        if self.run is not None and (limit is None or self.run[1] < limit):
            limit = self.run[1]
        while waiting and limit is not None and waiting[0][1] < limit:
            self._place(*waiting.popleft())

    def _classify(self, key: int, first: int, first_frame: int, last: int, count: int) -> None:
        """One run, all of it read: loss, part of one, or reordering."""
        if self.zw is not None and first in self.zw:
            return
        long_ns = self.long_ns
        if self.answers is None:
            self.answers = self.resent_times.reader()
        # (The runs come in order of their first.)
        nxt = self.answers.first_at_least(first - 1_000_000)
        fill_delay_ns = None
        retransmitted = nxt is not None and nxt <= last + long_ns
        if self.downstream:
            fill_delay_ns = None if nxt is None else max(0, nxt - first)
            if first <= self.recovery_until:
                kind = "loss-continued"
            elif fill_delay_ns is None:
                kind = "unknown"
            else:
                kind = "loss" if fill_delay_ns >= long_ns else "reorder"
        elif first <= self.recovery_until:
            kind = "loss-continued"
        else:
            kind = "loss" if retransmitted else "reorder"
        if kind in ("loss", "loss-continued"):
            end = max(last, (nxt or last) if retransmitted else last)
            end += int((self.rtt or self.long_ms) * 1e6)
            self.recovery_until = max(self.recovery_until, end)
            ends = self.ep_ends
            if kind == "loss" or not ends.n:
                self.ep_starts.append(first)
                ends.append(end)
                if len(self.episodes) < KEEP:
                    self.episodes.append([first, end])
            else:
                ends.last = max(ends.last, end)
                if ends.n <= KEEP:
                    self.episodes[-1][1] = ends.last
                if self.ep_at == ends.n:
                    # (A retransmission was placed after it: later ones see its end.)
                    self.ep_reach = max(self.ep_reach, ends.last)
        kept = None
        if kind == "loss":
            self.loss_run_count += 1
            kept = self.loss_runs if len(self.loss_runs) < KEEP else None
        elif kind == "reorder":
            self.reorder_run_count += 1
            kept = self.reorder_runs if len(self.reorder_runs) < KEEP else None
        if kept is not None:
            run = DupRun(key, first, first_frame)
            run.last, run.count = last, count
            run.fill_delay_ns, run.retransmitted, run.kind = fill_delay_ns, retransmitted, kind
            kept.append(run)

    def _place(self, frame: int, time: int, rto: float) -> None:
        """One retransmission, every run starting at or before it classified: in a loss
        episode, a timeout, or reordering."""
        if self.ep_readers is None:
            self.ep_readers = (self.ep_starts.reader(), self.ep_ends.reader())
        starts, ends = self.ep_readers
        # The episodes are in order of their starts, and so are the retransmissions.
        k = starts.count_at_most(time)
        if k:
            self.ep_reach = ends.max_of_next(k, self.ep_reach)
            self.ep_at += k
        in_episode = self.ep_at > 0 and self.ep_reach >= time
        if not in_episode and rto >= self.timeout_min_s:  # (NaN: no rto given)
            self.timeout_count += 1
            if len(self.timeout_frames) < KEEP:
                self.timeout_frames.append(frame)
            self.timeout_starts.append(time - int(rto * 1e9))
            self.timeout_ends.append(time)
            self.lost += 1
        elif in_episode:
            self.lost += 1
            if len(self.episode_resent_frames) < KEEP:
                self.episode_resent_frames.append(frame)
        else:
            self.reordered += 1
            if not self.downstream:
                self.needless += 1
        if self.episodes and self.episodes[0][0] <= time <= self.episodes[0][1]:
            self.first_episode += 1

    def result(self) -> LossAnalysis:
        """The second reading is over: the last run, the retransmissions after it."""
        if self.run is not None:
            self._classify(*self.run)
            self.run = None
        while self.waiting:
            self._place(*self.waiting.popleft())
        info, d = self.info, self.d
        tcp = info.tcp if info else {}
        # (Both in order of their starts, merged without a list of every episode.)
        timeouts = sorted(zip(self.timeout_starts, self.timeout_ends))
        recovery = union_sorted_ns(heapq.merge(zip(self.ep_starts, self.ep_ends), timeouts))
        segments = (info.frames_c2s if d == "c2s" else info.frames_s2c) if info else 0
        resent = len(self.resent_times)
        return LossAnalysis(
            stream=self.stream,
            direction=d,
            rtt_ms=self.rtt,
            long_run_ms=self.long_ms,
            downstream=self.downstream,
            loss_runs=self.loss_runs,
            loss_run_count=self.loss_run_count,
            reorder_runs=self.reorder_runs,
            reorder_run_count=self.reorder_run_count,
            resent_count=resent,
            resent_frames=self.resent_frames,
            episode_resent_frames=self.episode_resent_frames,
            last_resent_time=self.last_resent_time,
            timeout_count=self.timeout_count,
            timeout_frames=self.timeout_frames,
            hole_count=self.hole_count,
            ack_unseen=self.ack_unseen,
            ack_unseen_count=self.ack_unseen_count,
            unseen_bytes=self.unseen_bytes,
            spurious=self.spurious,
            dsack_blocks=int(tcp.get("dsack_blocks") or 0) if tcp else 0,
            data_segments=max(segments, resent),
            lost_segments=self.lost,
            reordered_segments=self.reordered,
            needless_retransmissions=self.needless,
            recovery_ns=recovery,
            episodes=[(start, end) for start, end in self.episodes],
            episode_count=len(self.ep_starts),
            first_episode_segments=self.first_episode,
        )


#: What :class:`_Direction` does with an event, by its label (see :func:`_action`).
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
