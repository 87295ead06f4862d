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
time and a loss episode's span (in blocks on a temporary file): a single lossy file copy
flags a hundred thousand segments per GiB, all on one connection, and holding them made
memory grow with the capture. The reading of each event is the engine's
(``_core.LossReading``: in Python it was most of the diagnosis' time on a lossy copy);
which connections, the ranges, the connections held whole and the results are here.
"""

from __future__ import annotations

import bisect
import itertools
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from nastriage._core import LossReading
from nastriage.diagnosis.context import Context, Event, reverse
from nastriage.diagnosis.events import EventsByStream, Range

__all__ = ["KEEP", "DupRun", "LossAnalysis", "Spans", "analyse"]

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

#: Values per block of the retransmissions' times and the episodes' spans that the
#: engine's reading writes to its temporary file (tests make it small).
SPILL_BLOCK = 8192


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

    __slots__ = ("reach", "starts")

    def __init__(self, spans: Iterable[tuple[int, int]]) -> None:
        ordered = sorted(spans)
        self.starts = array("q", (s for s, _ in ordered))
        #: The latest end among the spans that start at or before each one.
        self.reach = array("q", itertools.accumulate((e for _, e in ordered), max))

    def __contains__(self, t: int) -> bool:
        i = bisect.bisect_right(self.starts, t)
        return i > 0 and self.reach[i - 1] >= t

    def __bool__(self) -> bool:
        return bool(self.starts)


def _analyse(ctx: Context) -> dict[tuple[int, str], LossAnalysis]:
    """Two readings of the events (see :class:`_Direction`), over every connection at
    once: the engine regroups a range of the table's rows at a time, and nothing is kept
    per event."""
    streams: dict[int, _Connection] = {}
    actions = _Actions()
    for labels, chunk in ctx.event_chunks("rows+runs"):
        acts = actions.of(labels)
        for stream, item in chunk.items():
            c = streams.get(stream)
            if c is None:
                c = streams[stream] = _Connection(ctx, stream)
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
        c = streams[stream] = _Connection(ctx, stream)
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
    :func:`_action`; one byte per label code, as the engine's reading takes them),
    extended as the readings number more labels."""

    def __init__(self) -> None:
        self._by_dir: dict[str, bytearray] = {"c2s": bytearray(), "s2c": bytearray()}

    def of(self, labels: list[tuple[str, str]]) -> dict[str, bytearray]:
        for d, acts in self._by_dir.items():
            # (Every reading numbers the labels alike: by first appearance in the table.)
            if len(acts) < len(labels):
                acts.extend(_action(label, d, reverse(d)) for label in labels[len(acts) :])
        return self._by_dir


class _Connection:
    """One connection in the readings: its two data directions (each made on the first
    event that concerns it; None when it carried no data), and whether its events came
    in time order."""

    __slots__ = ("ctx", "dirs", "in_order", "last_row", "runs_at", "stream")

    def __init__(self, ctx: Context, stream: int) -> None:
        self.ctx = ctx
        self.stream = stream
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
        # Per label, not per run (13,800 runs on one lossy GiB): the runs come in order of
        # their first (`runs_in_order`) and a range has one run per label and
        # acknowledged frame, so a label's runs keep the order when their acknowledged
        # frames rise, and only its first new run can start before `before`.
        for label in r.code_runs:
            code, key, first, first_frame, second = label[:5]
            if not label[8]:  # (acknowledged frames that do not rise)
                return False
            at = self.runs_at.get(code)
            if at is not None and (key < at[0] or (first, first_frame) < at[1:]):
                return False
            if at is not None and key == at[0]:
                # (The same run, from the rows before: the next is the first new one.)
                if second is None:
                    continue
                first = second
            if before is not None and first < before[0]:
                return False
            self.runs_at[code] = label[5:8]
        if r.frames:
            if before is not None and (r.times[0], r.frames[0]) < before:
                return False
            self.last_row = (r.times[-1], r.frames[-1])
        return True

    def first(self, r: Range, acts: dict[str, bytearray]) -> None:
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
                self.dirs[d] = _Direction(self.ctx, self.stream, d) if carried else None
            x = self.dirs[d]
            if x is not None:
                x.first(r, a)

    def decide(self) -> bool:
        """After the first reading: whether any direction is analysed further."""
        return any([x.decide() for x in self.dirs.values() if x is not None])

    def second(self, r: Range, acts: dict[str, bytearray]) -> None:
        for d, x in self.dirs.items():
            if x is not None and x.selected:
                x.second(r, acts[d])

    def results(self) -> Iterator[LossAnalysis]:
        for d in ("c2s", "s2c"):
            x = self.dirs.get(d)
            if x is not None and x.selected:
                yield x.result()


class _Direction:
    """The loss analysis of one connection's data direction: the engine's reading
    (``_core.LossReading``) of its events, read twice in time order, a range of rows at a
    time, with nothing kept per event but the retransmissions' times and the episodes'
    spans (written out in blocks):

    1. the retransmissions' times (the duplicate-ACK runs look ahead in them), the holes
       and the capture drops, and how many runs: whether the capture is downstream of
       the loss;
    2. the runs, each classified once it is all read, and the loss episodes they make;
       and the retransmissions again, each in an episode, a timeout or reordering once
       every run starting at or before it is classified (they wait for that: the run
       still being read may start before them).

    Here: the direction's thresholds and round trip, and its results' form."""

    __slots__ = ("d", "info", "long_ms", "reading", "rtt", "stream")

    def __init__(self, ctx: Context, stream: int, d: str) -> None:
        th = ctx.th
        self.stream, self.d = stream, d
        self.info = ctx.streams.get(stream)
        self.rtt = rtt = ctx.path_rtt_ms(stream)
        self.long_ms = (
            max(th.reorder_run_min_ms, th.reorder_run_rtt_share * rtt)
            if rtt is not None
            else DEFAULT_LONG_RUN_MS
        )
        # Times around zero-window episodes are left out (their events belong to the
        # receiver stall).
        zw = _zero_window_spans(ctx, stream, int(th.timeout_min_s * 1e9))
        self.reading = LossReading(
            int(self.long_ms * 1e6),
            # A loss episode lasts a round trip past its last sign.
            int((rtt or self.long_ms) * 1e6),
            # A hole the receiver then acknowledges although the capture never saw its
            # data was dropped by the capture (the ACK follows within a round trip plus
            # a delayed ACK).
            int(((rtt or DEFAULT_LONG_RUN_MS) * 2 + 250.0) * 1e6),
            th.timeout_min_s,
            zw.starts.tobytes(),
            zw.reach.tobytes(),
            SPILL_BLOCK,
        )

    @property
    def selected(self) -> bool:
        """Whether any event concerned the direction (it is analysed further)."""
        return bool(self.reading.selected)

    def first(self, r: Range, actions: bytearray) -> None:
        """The first reading of a range: its rows, then its runs."""
        self.reading.first(_columns(r), r.details, bytes(actions))

    def decide(self) -> bool:
        """The first reading is over: whether the capture is downstream of the losses
        (it sees their holes, about one per run; holes explained by capture drops do not
        count), and whether the direction is read again."""
        return bool(self.reading.decide())

    def second(self, r: Range, actions: bytearray) -> None:
        """A range's runs (each classified once all read), then its retransmissions."""
        self.reading.second(_columns(r), bytes(actions))

    def result(self) -> LossAnalysis:
        """The second reading is over: the last run, the retransmissions after it."""
        found = self.reading.finish()
        info, d = self.info, self.d
        tcp = info.tcp if info else {}
        segments = (info.frames_c2s if d == "c2s" else info.frames_s2c) if info else 0
        # (The engine names what it found as LossAnalysis' fields.)
        for name in ("loss_runs", "reorder_runs"):
            found[name] = [_dup_run(*r) for r in found[name]]
        found["ack_unseen"] = [
            Event(frame, time, reverse(d), "ack_lost_segment", detail)
            for frame, time, detail in found["ack_unseen"]
        ]
        return LossAnalysis(
            stream=self.stream,
            direction=d,
            rtt_ms=self.rtt,
            long_run_ms=self.long_ms,
            dsack_blocks=int(tcp.get("dsack_blocks") or 0) if tcp else 0,
            data_segments=max(segments, found["resent_count"]),
            **found,
        )


def _columns(r: Range) -> tuple[bytes, ...]:
    """A range's columns as the engine's reading takes them: the rows' frames, times,
    label codes and rto, then the runs' six columns."""
    return tuple(a.tobytes() for a in (r.frames, r.times, r.codes, r.rto, *r.run_cols))


def _dup_run(
    ack_frame: int,
    first: int,
    first_frame: int,
    last: int,
    count: int,
    fill_delay_ns: int | None,
    retransmitted: bool,
    kind: str,
) -> DupRun:
    run = DupRun(ack_frame, first, first_frame)
    run.last, run.count = last, count
    run.fill_delay_ns, run.retransmitted, run.kind = fill_delay_ns, retransmitted, kind
    return run


#: What :class:`_Direction` does with an event, by its label (see :func:`_action`):
#: the engine's numbering (``tcp::loss_reading::action``).
_SKIP, _RESENT, _SPURIOUS, _HOLE, _DUP_ACK, _UNSEEN = (
    LossReading.SKIP,
    LossReading.RESENT,
    LossReading.SPURIOUS,
    LossReading.HOLE,
    LossReading.DUP_ACK,
    LossReading.UNSEEN,
)


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
