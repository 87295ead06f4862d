//! Where each connection's time goes, from its NFS/SMB transactions: the
//! `time_profile` table, one row per TCP connection with answered storage
//! requests.
//!
//! Each instant of the connection's active span is in exactly one state, the
//! first that applies: `transfer` (request or reply data on the wire),
//! `server` (the request reached the server and its reply has not left it),
//! `network` (a request is outstanding and travelling), else idle. The round
//! trips behind the capture point come from the TCP analysis (handshake and
//! data samples), so client- and server-side captures of one transfer give
//! the same shares.
//!
//! This is the engine's home of the computation the diagnosis rules read
//! (`python/nastriage/diagnosis/timeline.py` holds the same definition as a
//! reference for tables without this one, and a test keeps the two equal).
//! It runs once, at table time, over every transaction: O(n log n) per
//! connection, so per-request work never reaches Python.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::{Float64Builder, ListBuilder, StringBuilder, UInt64Builder};
use arrow_array::{ArrayRef, RecordBatch};

use crate::columns::Cols;
use crate::conversations::ConversationTable;
use crate::in_order::InOrder;
use crate::order_stats::OrderStats;
use crate::tcp::TcpAnalysis;
use crate::tx_facts::{Names, TxFacts};

/// Protocols whose transactions the latency rules judge (not portmap, mount...).
pub(crate) fn is_storage(protocol: &str) -> bool {
    matches!(protocol, "nfs" | "smb2")
}

/// Operations that move file data (the rest is metadata).
pub fn is_data_op(op: &str) -> bool {
    const DATA: [&str; 9] = [
        "READ",
        "WRITE",
        "COMMIT",
        "Read",
        "Write",
        "Flush",
        "READ_PLUS",
        "COPY",
        "CLONE",
    ];
    DATA.contains(&op) || DATA.contains(&op.to_ascii_uppercase().as_str())
}

/// Most operations and files kept per connection, by processing time.
const TOP_FILES: usize = 20;
const SLOW_FRAMES: usize = 20;
const FIRST_FRAMES: usize = 30;

/// One connection's profile (names as in `timeline.Profile`).
#[derive(Debug, Clone, Default)]
pub struct TimeProfile {
    pub stream: u32,
    pub transactions: u64,
    pub answered: u64,
    pub span_ns: i64,
    /// transfer, server, network (ns); idle is the rest of the span.
    pub ns: [i64; 3],
    /// The same over data requests (READ/WRITE...) only.
    pub data_ns: [i64; 3],
    pub client_rtt_ms: f64,
    pub server_rtt_ms: f64,
    pub rtt_source: &'static str,
    pub processing_median_ms: f64,
    pub processing_p90_ms: f64,
    /// Processing time (ms) by operation (all) and by file (the top ones).
    pub by_op: Vec<(String, f64)>,
    pub by_file: Vec<(String, f64)>,
    pub data_bytes: u64,
    pub io_bytes: u64,
    pub io_requests: u64,
    pub metadata_requests: u64,
    pub metadata_only_ns: i64,
    pub outstanding_ns: i64,
    pub max_outstanding: u32,
    pub at_max_fraction: f64,
    pub mean_outstanding_busy: f64,
    pub slow_frames: Vec<u64>,
    pub protocols: Vec<&'static str>,
    /// Median response time (ms) of the answered storage requests (the upper
    /// middle value for an even count), and the first requests' frames.
    pub response_median_ms: f64,
    pub first_frames: Vec<u64>,
}

/// Nanoseconds per state for (start, end, state) intervals, swept as the
/// intervals come (see `in_order`); at any instant the lowest state present
/// wins.
///
/// A point is packed in a `u64` that sorts as (time, end before start,
/// state): time since `lo` (no point is earlier) in the high bits. Half the
/// memory of a tuple and a faster sort; times more than 2^60 ns apart (none
/// in a real capture) take the tuple path.
struct Partition {
    points: Points,
    counts: [i64; 3],
    totals: [i64; 3],
    last: Option<i64>,
    /// Per lane ([`Partition::push_lane`]), the union of its intervals so
    /// far whose end is not yet a point.
    lanes: [Option<(i64, i64)>; LANES],
}

/// Lanes of intervals merged before they become points: the kinds of a
/// request's moments (see [`ProfileSweep::take`]), each in its state
/// (transferring, at the server, in the network).
const LANES: usize = 4;
const LANE_STATES: [u8; LANES] = [0, 0, 1, 2];

enum Points {
    Packed { lo: i64, waiting: InOrder<u64> },
    Wide(InOrder<(i64, i8, u8)>),
}

impl Partition {
    /// For intervals within [lo, hi].
    fn new(lo: i64, hi: i64) -> Self {
        let fits = hi
            .checked_sub(lo)
            .is_some_and(|span| (0..1 << 60).contains(&span));
        Partition {
            points: if fits {
                Points::Packed {
                    lo,
                    waiting: InOrder::default(),
                }
            } else {
                Points::Wide(InOrder::default())
            },
            counts: [0; 3],
            totals: [0; 3],
            last: None,
            lanes: [None; LANES],
        }
    }

    /// Add [s, e) in state `st` (nothing when empty).
    fn push(&mut self, s: i64, e: i64, st: u8) {
        if e <= s {
            return;
        }
        self.point(s, true, st);
        self.point(e, false, st);
    }

    /// Add [s, e) to `lane` (in its state, [`LANE_STATES`]): an interval
    /// that starts within the lane's union so far extends it rather than
    /// adding two points. Only whether a state is present at an instant
    /// counts, so the totals are those of adding every interval; with many
    /// requests outstanding, their network and server moments overlap, and
    /// most points were these.
    fn push_lane(&mut self, lane: usize, s: i64, e: i64) {
        if e <= s {
            return;
        }
        let st = LANE_STATES[lane];
        match self.lanes[lane] {
            Some((cs, ce)) if cs <= s && s <= ce => self.lanes[lane] = Some((cs, ce.max(e))),
            Some((_, ce)) if s > ce => {
                self.point(ce, false, st);
                self.point(s, true, st);
                self.lanes[lane] = Some((s, e));
            }
            // (Before the union's start: on its own.)
            Some(_) => self.push(s, e, st),
            None => {
                self.point(s, true, st);
                self.lanes[lane] = Some((s, e));
            }
        }
    }

    /// The lanes' ends before `t` (all of them: `None`) become points.
    fn close_lanes(&mut self, t: Option<i64>) {
        for (lane, st) in LANE_STATES.into_iter().enumerate() {
            if let Some((_, ce)) = self.lanes[lane].filter(|l| t.is_none_or(|t| l.1 < t)) {
                self.point(ce, false, st);
                self.lanes[lane] = None;
            }
        }
    }

    fn point(&mut self, t: i64, start: bool, st: u8) {
        match &mut self.points {
            Points::Packed { lo, waiting } => {
                waiting.push(((t - *lo) as u64) << 3 | u64::from(start) << 2 | u64::from(st));
            }
            Points::Wide(waiting) => waiting.push((t, if start { 1 } else { -1 }, st)),
        }
    }

    /// Sweep the points before `t`, if enough wait: no interval added later
    /// starts before `t`.
    fn release(&mut self, t: i64) {
        // A lane's end before `t` is final: no later interval can extend it.
        self.close_lanes(Some(t));
        let (counts, totals, last) = (&mut self.counts, &mut self.totals, &mut self.last);
        match &mut self.points {
            Points::Packed { lo, waiting } => {
                // (Nothing lies before `lo`.)
                if waiting.due() && t > *lo {
                    let lo = *lo;
                    let bound = ((t - lo) as u64) << 3;
                    waiting.release(bound, |p| visit(counts, totals, last, unpack(lo, p)));
                }
            }
            Points::Wide(waiting) => {
                if waiting.due() {
                    waiting.release((t, i8::MIN, 0), |p| visit(counts, totals, last, p));
                }
            }
        }
    }

    fn finish(mut self) -> [i64; 3] {
        self.close_lanes(None);
        let (mut counts, mut totals, mut last) = (self.counts, self.totals, self.last);
        match self.points {
            Points::Packed { lo, waiting } => {
                waiting.finish(|p| visit(&mut counts, &mut totals, &mut last, unpack(lo, p)));
            }
            Points::Wide(waiting) => {
                waiting.finish(|p| visit(&mut counts, &mut totals, &mut last, p));
            }
        }
        totals
    }
}

fn unpack(lo: i64, p: u64) -> (i64, i8, u8) {
    let delta = if p & 4 != 0 { 1 } else { -1 };
    (lo + (p >> 3) as i64, delta, (p & 3) as u8)
}

/// One point of the [`Partition`] sweep, in order.
fn visit(
    counts: &mut [i64; 3],
    totals: &mut [i64; 3],
    last: &mut Option<i64>,
    (t, delta, st): (i64, i8, u8),
) {
    if let Some(l) = *last {
        if t > l {
            if let Some(i) = counts.iter().position(|&c| c > 0) {
                totals[i] += t - l;
            }
        }
    }
    counts[usize::from(st)] += i64::from(delta);
    *last = Some(t);
}

/// [`Partition`] of intervals given all at once (tests).
#[cfg(test)]
fn partition(intervals: impl Iterator<Item = (i64, i64, u8)> + Clone) -> [i64; 3] {
    let nonempty = intervals.clone().filter(|(s, e, _)| e > s);
    let lo = nonempty.clone().map(|i| i.0).min().unwrap_or(0);
    let hi = nonempty.map(|i| i.1).max().unwrap_or(0);
    let mut p = Partition::new(lo, hi);
    for (s, e, st) in intervals {
        p.push(s, e, st);
    }
    p.finish()
}

/// The total length of the union of [start, end) intervals that come in
/// order of their starts (any order among equal starts; saturating, for
/// times read from a hand-made table).
#[derive(Debug, Default)]
pub(crate) struct Union {
    cur: Option<(i64, i64)>,
    total: i64,
}

impl Union {
    pub(crate) fn add(&mut self, s: i64, e: i64) {
        if e <= s {
            return;
        }
        match self.cur {
            Some((cs, ce)) if s <= ce => self.cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                self.total = self.total.saturating_add(ce.saturating_sub(cs));
                self.cur = Some((s, e));
            }
            None => self.cur = Some((s, e)),
        }
    }

    pub(crate) fn total(&self) -> i64 {
        let cur = self.cur.map_or(0, |(cs, ce)| ce.saturating_sub(cs));
        self.total.saturating_add(cur)
    }
}

pub(crate) fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

/// Smallest of the values that are present and not negative.
fn smallest(values: &[Option<f64>]) -> Option<f64> {
    values
        .iter()
        .flatten()
        .copied()
        .filter(|v| *v >= 0.0)
        .reduce(f64::min)
}

/// The median of `values` as Python's `statistics.median` (the mean of the
/// middle two), and the value at `share` of the way from the smallest to
/// the largest (index `share` × (n − 1), truncated).
fn median_and(values: OrderStats, share: f64) -> (f64, f64) {
    let n = values.len();
    let at = (share * n.saturating_sub(1) as f64) as usize;
    let [lo, hi, at] = values.at(&[n.saturating_sub(1) / 2, n / 2, at])[..] else {
        unreachable!("a value per rank asked");
    };
    let median = match (lo, hi) {
        (Some(lo), Some(hi)) if n.is_multiple_of(2) => (lo + hi) / 2.0,
        (_, Some(hi)) => hi,
        _ => 0.0,
    };
    (median, at.unwrap_or(0.0))
}

/// What a connection's requests alone tell of the round trips behind the
/// capture point (ms; None under 3 samples), for when the TCP analysis has
/// none: made once per connection, with its `stream_transactions` row.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct RttFloors {
    /// Fastest server response (first reply byte after the last request
    /// byte): an upper bound of the server-side round trip.
    pub server_ms: Option<f64>,
    /// Shortest time from a reply's last byte to the next request's first:
    /// a lower bound of the client-side round trip.
    pub turnaround_ms: Option<f64>,
}

/// [`RttFloors`] from a connection's requests, read in request order.
#[derive(Debug)]
pub(crate) struct FloorsScan {
    requests: usize,
    server: (usize, f64),
    /// Requests' starts (kind 0) and replies' ends (kind 1): a reply's
    /// turnaround ends at the first start after it (starts first at equal
    /// times, so "after" is strict).
    points: InOrder<(i64, u8)>,
    /// Replies' ends not followed by a start yet: how many, the latest.
    pending: (usize, i64),
    turnaround: (usize, i64),
}

impl Default for FloorsScan {
    fn default() -> Self {
        FloorsScan {
            requests: 0,
            server: (0, f64::INFINITY),
            points: InOrder::default(),
            pending: (0, 0),
            turnaround: (0, i64::MAX),
        }
    }
}

impl FloorsScan {
    /// Add the next request (`bound`: see `ProtocolScan::add`).
    pub(crate) fn add(&mut self, t: &TxFacts, bound: Option<i64>) {
        self.requests += 1;
        if let Some(v) = t.server_ms() {
            self.server = (self.server.0 + 1, self.server.1.min(v));
        }
        if let Some(bound) = bound.filter(|_| self.points.due()) {
            let mut points = std::mem::take(&mut self.points);
            points.release((bound, 0), |p| self.visit(p));
            self.points = points;
        }
        self.points.push((t.req_first_ts, 0));
        if let Some(r) = t.reply() {
            self.points.push((r.last_ts, 1));
        }
    }

    fn visit(&mut self, (t, kind): (i64, u8)) {
        if kind == 1 {
            self.pending = (self.pending.0 + 1, t);
        } else if self.pending.0 > 0 {
            let gap = t - self.pending.1;
            self.turnaround = (
                self.turnaround.0 + self.pending.0,
                self.turnaround.1.min(gap),
            );
            self.pending.0 = 0;
        }
    }

    pub(crate) fn finish(mut self) -> RttFloors {
        let points = std::mem::take(&mut self.points);
        points.finish(|p| self.visit(p));
        let (n, min) = self.server;
        let (tn, tmin) = self.turnaround;
        RttFloors {
            server_ms: (n >= 3).then_some(min),
            turnaround_ms: (self.requests >= 4 && tn >= 3).then(|| ms(tmin)),
        }
    }
}

/// Round trips from the capture point to the client and to the server (ms)
/// and their source, as `Context.side_rtts_ms`.
pub(crate) fn side_rtts(
    stream: u32,
    floors: RttFloors,
    tcp: &TcpAnalysis,
    convs: &ConversationTable,
) -> Rtts {
    tcp_side_rtts(stream, floors.server_ms, tcp, convs).unwrap_or((
        floors.turnaround_ms.unwrap_or(0.0),
        floors.server_ms.unwrap_or(0.0),
        "fastest response and turnaround",
    ))
}

/// [`side_rtts`] when the TCP analysis gives both sides (`server_floor`:
/// the fastest server response, [`RttFloors::server_ms`]): then the
/// turnaround floor plays no part. None when it does not.
pub(crate) fn tcp_side_rtts(
    stream: u32,
    server_floor: Option<f64>,
    tcp: &TcpAnalysis,
    convs: &ConversationTable,
) -> Option<Rtts> {
    let (conv, m) = (convs.get(stream)?, tcp.summary(stream)?);
    let c = conv.client_direction().0 as usize;
    let s = 1 - c;
    let cli = smallest(&[m.hs_client_ns.map(ms), m.dirs[s].far_min_ns.map(ms)])?;
    let srv = smallest(&[m.hs_server_ns.map(ms), m.dirs[c].far_min_ns.map(ms)])?;
    Some((
        cli,
        smallest(&[Some(srv), server_floor]).unwrap_or(0.0),
        "tcp_connections",
    ))
}

/// Round trips behind the capture point, client side and server side (ms),
/// and where they come from.
pub(crate) type Rtts = (f64, f64, &'static str);

/// (max outstanding, share of busy time at it, mean outstanding while busy)
/// from the requests themselves (when the concurrency analysis has no row):
/// the answered storage requests, each with its bound (see
/// `ProtocolScan::add`).
pub(crate) fn outstanding_stats(
    txs: impl Iterator<Item = (TxFacts, Option<i64>)>,
) -> (u32, f64, f64) {
    let mut points: InOrder<(i64, i32)> = InOrder::default();
    let mut level = 0i32;
    let mut last: Option<i64> = None;
    let mut time_at: HashMap<i32, i64> = HashMap::new();
    let mut visit = |(t, d): (i64, i32)| {
        if let Some(l) = last {
            if t > l && level > 0 {
                *time_at.entry(level).or_default() += t - l;
            }
        }
        level += d;
        last = Some(t);
    };
    for (t, bound) in txs {
        if let Some(bound) = bound.filter(|_| points.due()) {
            points.release((bound, i32::MIN), &mut visit);
        }
        let end = t.reply().map_or(t.req_first_ts, |r| r.first_ts);
        if end > t.req_first_ts {
            points.push((t.req_first_ts, 1));
            points.push((end, -1));
        }
    }
    points.finish(&mut visit);
    let Some(&k) = time_at.keys().max() else {
        return (0, 0.0, 0.0);
    };
    let busy: i64 = time_at.values().sum();
    let mean = time_at
        .iter()
        .map(|(l, ns)| *l as f64 * *ns as f64)
        .sum::<f64>()
        / busy as f64;
    (k as u32, time_at[&k] as f64 / busy as f64, mean)
}

/// A request's processing time and first frame, ordered slowest first and,
/// among equals, the later frame first (as the reference).
#[derive(Debug, Clone, Copy)]
struct Slow(f64, u64);

impl PartialEq for Slow {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}
impl Eq for Slow {}
impl PartialOrd for Slow {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Slow {
    /// `Less` is slower (comes first).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.0.total_cmp(&self.0).then(other.1.cmp(&self.1))
    }
}

/// The [`SLOW_FRAMES`] slowest requests, kept as they come (a max-heap of
/// the kept ones: its top is the fastest of them, the one to replace).
#[derive(Debug, Default)]
struct Slowest(std::collections::BinaryHeap<Slow>);

impl Slowest {
    fn push(&mut self, proc: f64, frame: u64) {
        let s = Slow(proc, frame);
        if self.0.len() < SLOW_FRAMES {
            self.0.push(s);
        } else if self.0.peek().is_some_and(|top| s < *top) {
            self.0.pop();
            self.0.push(s);
        }
    }

    /// Their first frames, slowest first.
    fn frames(self) -> Vec<u64> {
        self.0.into_sorted_vec().into_iter().map(|s| s.1).collect()
    }
}

/// A request waiting to be profiled in order of starts (request order
/// breaking ties, as a stable sort).
#[derive(Clone, Copy, serde::Serialize, serde::Deserialize)]
struct ByStart(i64, u64, TxFacts);

impl PartialEq for ByStart {
    fn eq(&self, other: &Self) -> bool {
        (self.0, self.1) == (other.0, other.1)
    }
}
impl Eq for ByStart {}
impl crate::in_order::SortPoints for ByStart {}
impl PartialOrd for ByStart {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ByStart {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.0, self.1).cmp(&(other.0, other.1))
    }
}

/// One connection's time profile, swept as its NFS/SMB requests come (see
/// `in_order`): [`ProfileSweep::add`] each in request order, then
/// [`ProfileSweep::finish`]. The profile reads them in order of starts.
pub(crate) struct ProfileSweep<'a> {
    names: &'a Names,
    /// How far before its start a request's times may lie (None: nothing
    /// is released before the end).
    lateness: Option<i64>,
    /// Requests waiting to be read in order of starts.
    by_start: InOrder<ByStart>,
    p: TimeProfile,
    /// Half round trips (ns), client side and server side.
    a: i64,
    b: i64,
    srv_rtt: f64,
    span: Option<(i64, i64)>,
    outstanding: Union,
    data_spans: Union,
    /// Processing and response times (ms), for their medians and 90th
    /// percentile: held, or spilled on a long connection (`order_stats`).
    processing: OrderStats,
    srts: OrderStats,
    by_op: Vec<(u32, f64)>,
    /// (Added to for every request: a fast hasher.)
    by_file: foldhash::HashMap<u32, (usize, f64)>,
    slow: Slowest,
    all: Partition,
    data: Partition,
}

impl<'a> ProfileSweep<'a> {
    /// For a connection whose requests' times lie within [`lo`, `hi`], and
    /// lie at most `lateness` before their own starts (None: release
    /// nothing before the end), with round trips `rtts` ([`side_rtts`]).
    pub(crate) fn new(
        stream: u32,
        (lo, hi): (i64, i64),
        (cli_rtt, srv_rtt, source): Rtts,
        names: &'a Names,
        lateness: Option<i64>,
    ) -> Self {
        // Half round trips, truncated as the Python reference does.
        let a = (cli_rtt * 1e6 / 2.0) as i64;
        let b = (srv_rtt * 1e6 / 2.0) as i64;
        // Every point of a request lies within a half round trip of its times.
        let margin = a.max(b);
        let (lo, hi) = (lo.saturating_sub(margin), hi.saturating_add(margin));
        ProfileSweep {
            names,
            lateness,
            by_start: InOrder::default(),
            p: TimeProfile {
                stream,
                client_rtt_ms: cli_rtt,
                server_rtt_ms: srv_rtt,
                rtt_source: source,
                ..Default::default()
            },
            a,
            b,
            srv_rtt,
            span: None,
            outstanding: Union::default(),
            data_spans: Union::default(),
            processing: OrderStats::default(),
            srts: OrderStats::default(),
            by_op: Vec::new(),
            by_file: foldhash::HashMap::default(),
            slow: Slowest::default(),
            all: Partition::new(lo, hi),
            data: Partition::new(lo, hi),
        }
    }

    /// Add NFS/SMB request number `i` (answered or not), in request order.
    /// `starts`: no request to come starts before it (None: wait for the
    /// end).
    pub(crate) fn add(&mut self, i: u64, t: &TxFacts, starts: Option<i64>) {
        if let Some(bound) = starts.filter(|_| self.by_start.due()) {
            let mut waiting = std::mem::take(&mut self.by_start);
            waiting.release(ByStart(bound, 0, *t), |r| self.take(&r.2));
            self.by_start = waiting;
        }
        self.by_start.push(ByStart(t.req_first_ts, i, *t));
    }

    /// The next request in order of starts.
    fn take(&mut self, t: &TxFacts) {
        let (names, p, a, b) = (self.names, &mut self.p, self.a, self.b);
        p.transactions += 1;
        if p.first_frames.len() < FIRST_FRAMES {
            p.first_frames.push(t.req_first_frame);
        }
        let Some(r) = t.reply() else { return };
        p.answered += 1;
        let (rq, rq_last) = (t.req_first_ts, t.req_last_ts);
        if let Some(late) = self.lateness {
            // No point of this request or a later one lies before this.
            let bound = rq.saturating_sub(late).saturating_sub(a);
            self.all.release(bound);
            self.data.release(bound);
        }
        let span = (rq - a, r.last_ts + a);
        self.span = Some(match self.span {
            Some((lo, hi)) => (lo.min(span.0), hi.max(span.1)),
            None => span,
        });
        self.outstanding.add(span.0, span.1);
        let proc = (ms(r.first_ts - rq_last) - self.srv_rtt).max(0.0);
        self.processing.push(proc);
        match self.by_op.iter_mut().find(|(k, _)| *k == t.op) {
            Some(e) => e.1 += proc,
            None => self.by_op.push((t.op, proc)),
        }
        if let Some(f) = t.file() {
            let n = self.by_file.len();
            self.by_file.entry(f).or_insert((n, 0.0)).1 += proc;
        }
        self.slow.push(proc, t.req_first_frame);
        let reply_bytes = t.reply_bytes().unwrap_or(0);
        p.data_bytes += t.req_bytes + reply_bytes;
        let data = names.is_data_op(t);
        if data {
            p.io_requests += 1;
            p.io_bytes += match t.count() {
                Some(c) if c > 0 => c,
                _ => t.req_bytes + reply_bytes,
            };
            self.data_spans.add(span.0, span.1);
        } else {
            p.metadata_requests += 1;
        }
        let protocol = names.protocol(t);
        if !p.protocols.contains(&protocol) {
            p.protocols.push(protocol);
        }
        // The request's moments, one per lane: transferring (request and
        // reply bytes on the wire), at the server (between them, less the
        // server-side half round trip), in the network (the client-side
        // half round trips around it).
        let moments = [
            (rq, rq_last),
            (r.first_ts, r.last_ts),
            (rq_last + b, r.first_ts - b),
            (rq - a, r.last_ts + a),
        ];
        for (lane, (s, e)) in moments.into_iter().enumerate() {
            self.all.push_lane(lane, s, e);
            if data {
                self.data.push_lane(lane, s, e);
            }
        }
        if let Some(srt) = t.srt_ns() {
            self.srts.push(ms(srt));
        }
    }

    /// The profile (none without answered requests). `conc` is the
    /// connection's concurrency row for its storage protocol, if any;
    /// `own_stats` sweeps the requests again for the outstanding figures
    /// when that row lacks them.
    pub(crate) fn finish(
        mut self,
        conc: Option<&crate::concurrency::ConnConcurrency>,
        own_stats: impl FnOnce() -> (u32, f64, f64),
    ) -> Option<TimeProfile> {
        std::mem::take(&mut self.by_start).finish(|r| self.take(&r.2));
        let mut p = self.p;
        let (lo, hi) = self.span?;
        p.ns = self.all.finish();
        p.data_ns = self.data.finish();
        p.span_ns = (hi - lo).max(1);
        p.outstanding_ns = self.outstanding.total();
        p.metadata_only_ns = (p.outstanding_ns - self.data_spans.total()).max(0);
        // The response times' median beside the processing times' when both
        // are read back from the spill (1.2-1.6 ms each at the end of one
        // lossy GiB's digest, with nothing else left to do).
        let apart = self.srts.spilled() && self.processing.spilled();
        let srts = std::sync::Mutex::new(std::mem::take(&mut self.srts));
        let response = || {
            let srts = std::mem::take(&mut *srts.lock().unwrap_or_else(|e| e.into_inner()));
            let n = srts.len();
            srts.at(&[n / 2])[0].unwrap_or(0.0)
        };
        let processing = std::mem::take(&mut self.processing);
        let ((median, p90), response) = std::thread::scope(|scope| {
            let other = apart.then(|| {
                std::thread::Builder::new()
                    .name("nastriage-digest".into())
                    .spawn_scoped(scope, response)
            });
            let proc = median_and(processing, 0.9);
            match other {
                Some(Ok(h)) => (proc, crate::driver::joined(h.join())),
                // (Not apart, or no thread to be had.)
                _ => (proc, response()),
            }
        });
        (p.processing_median_ms, p.processing_p90_ms) = (median, p90);
        p.response_median_ms = response;
        // The concurrency analysis's figures where it has them; the requests'
        // own sweep only when it lacks one.
        let lacking = conc.is_none_or(|c| c.max_outstanding == 0 || c.mean_outstanding_busy == 0.0);
        let (mut k, mut at_max, mut mean_busy) = if lacking { own_stats() } else { (0, 0.0, 0.0) };
        if let Some(c) = conc {
            if c.max_outstanding > 0 {
                k = c.max_outstanding;
            }
            at_max = c.at_max_fraction;
            if c.mean_outstanding_busy != 0.0 {
                mean_busy = c.mean_outstanding_busy;
            }
        }
        p.max_outstanding = k;
        p.at_max_fraction = at_max;
        p.mean_outstanding_busy = mean_busy;
        p.slow_frames = self.slow.frames();
        let names = self.names;
        p.by_op = self
            .by_op
            .into_iter()
            .map(|(op, v)| (names.ops.name(op).to_string(), v))
            .collect();
        let mut files: Vec<(usize, u32, f64)> = self
            .by_file
            .into_iter()
            .map(|(f, (i, v))| (i, f, v))
            .collect();
        files.sort_unstable_by(|x, y| y.2.total_cmp(&x.2).then(x.0.cmp(&y.0)));
        p.by_file = files
            .into_iter()
            .take(TOP_FILES)
            .map(|(_, f, v)| (names.files.name(f).to_string(), v))
            .collect();
        p.protocols.sort_unstable();
        Some(p)
    }
}

/// Names and values of a per-row list as two list columns.
fn named_list(
    rows: &[TimeProfile],
    pick: impl Fn(&TimeProfile) -> &[(String, f64)],
) -> [ArrayRef; 2] {
    let mut names = ListBuilder::new(StringBuilder::new());
    let mut values = ListBuilder::new(Float64Builder::new());
    for r in rows {
        for (k, v) in pick(r) {
            names.values().append_value(k);
            values.values().append_value(*v);
        }
        names.append(true);
        values.append(true);
    }
    [Arc::new(names.finish()), Arc::new(values.finish())]
}

fn frames_list(rows: &[TimeProfile], pick: impl Fn(&TimeProfile) -> &[u64]) -> ArrayRef {
    let mut b = ListBuilder::new(UInt64Builder::new());
    for r in rows {
        b.values().append_slice(pick(r));
        b.append(true);
    }
    Arc::new(b.finish())
}

/// The `time_profile` table (docs/transactions.md lists its columns).
pub(crate) fn table(rows: &[TimeProfile]) -> RecordBatch {
    let mut k = Cols::default();
    let col = |f: &dyn Fn(&TimeProfile) -> i64| rows.iter().map(f).collect::<Vec<i64>>();
    let fcol = |f: &dyn Fn(&TimeProfile) -> f64| rows.iter().map(f).collect::<Vec<f64>>();
    let ucol = |f: &dyn Fn(&TimeProfile) -> u64| rows.iter().map(f).collect::<Vec<u64>>();
    k.u32("stream", rows.iter().map(|r| r.stream).collect());
    k.u64("transactions", ucol(&|r| r.transactions));
    k.u64("answered", ucol(&|r| r.answered));
    k.i64("span_ns", col(&|r| r.span_ns));
    for (i, state) in ["transfer", "server", "network"].iter().enumerate() {
        k.i64(&format!("{state}_ns"), col(&|r| r.ns[i]));
    }
    for (i, state) in ["transfer", "server", "network"].iter().enumerate() {
        k.i64(&format!("data_{state}_ns"), col(&|r| r.data_ns[i]));
    }
    k.f64("client_rtt_ms", fcol(&|r| r.client_rtt_ms));
    k.f64("server_rtt_ms", fcol(&|r| r.server_rtt_ms));
    k.str("rtt_source", rows.iter().map(|r| r.rtt_source));
    k.f64("processing_median_ms", fcol(&|r| r.processing_median_ms));
    k.f64("processing_p90_ms", fcol(&|r| r.processing_p90_ms));
    let [op_names, op_ms] = named_list(rows, |r| &r.by_op);
    k.push("processing_ops", true, op_names);
    k.push("processing_ops_ms", true, op_ms);
    let [file_names, file_ms] = named_list(rows, |r| &r.by_file);
    k.push("processing_files", true, file_names);
    k.push("processing_files_ms", true, file_ms);
    k.u64("data_bytes", ucol(&|r| r.data_bytes));
    k.u64("io_bytes", ucol(&|r| r.io_bytes));
    k.u64("io_requests", ucol(&|r| r.io_requests));
    k.u64("metadata_requests", ucol(&|r| r.metadata_requests));
    k.i64("metadata_only_ns", col(&|r| r.metadata_only_ns));
    k.i64("outstanding_ns", col(&|r| r.outstanding_ns));
    k.u32(
        "max_outstanding",
        rows.iter().map(|r| r.max_outstanding).collect(),
    );
    k.f64("at_max_fraction", fcol(&|r| r.at_max_fraction));
    k.f64("mean_outstanding_busy", fcol(&|r| r.mean_outstanding_busy));
    k.push("slow_frames", true, frames_list(rows, |r| &r.slow_frames));
    let mut protos = ListBuilder::new(StringBuilder::new());
    for r in rows {
        r.protocols
            .iter()
            .for_each(|p| protos.values().append_value(p));
        protos.append(true);
    }
    k.push("protocols", true, Arc::new(protos.finish()));
    k.f64("response_median_ms", fcol(&|r| r.response_median_ms));
    k.push("first_frames", true, frames_list(rows, |r| &r.first_frames));
    k.finish("time_profile")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_gives_each_instant_to_the_lowest_state() {
        // transfer 0-10, server 5-20, network 0-30: 10 / 10 / 10.
        let t = partition([(0, 10, 0), (5, 20, 1), (0, 30, 2)].into_iter());
        assert_eq!(t, [10, 10, 10]);
        // Empty and reversed intervals count for nothing.
        assert_eq!(partition([(5, 5, 0), (9, 3, 1)].into_iter()), [0, 0, 0]);
        // Ends come before starts at the same instant; negative times and
        // times too far apart to pack give the same answer.
        let touching = [(-20, -10, 1), (-10, 0, 0), (0, 5, 2)];
        assert_eq!(partition(touching.into_iter()), [10, 10, 5]);
        let far = [
            (i64::MIN / 2, i64::MIN / 2 + 10, 0),
            (i64::MAX / 2, i64::MAX / 2 + 7, 1),
        ];
        assert_eq!(partition(far.into_iter()), [10, 7, 0]);
    }

    /// Intervals added by start and swept as they come give the totals of
    /// one sweep at the end.
    #[test]
    fn partition_released_as_intervals_come() {
        let intervals: Vec<(i64, i64, u8)> = (0..30_000i64)
            .map(|i| {
                let s = i / 4 * 1000;
                (s, s + (i * 7919) % 50_000, (i % 3) as u8)
            })
            .collect();
        let mut p = Partition::new(0, 30_000 * 1000);
        for &(s, e, st) in &intervals {
            p.release(s);
            p.push(s, e, st);
        }
        assert_eq!(p.finish(), partition(intervals.iter().copied()));
    }

    /// Intervals merged in lanes give the totals of every interval added
    /// on its own: lanes that overlap, touch, leave gaps and (the second
    /// kind of moment) start before their union so far, swept as they come.
    #[test]
    fn lanes_give_the_totals_of_every_interval() {
        let mut below = crate::test_rng::xorshift_below(12_345);
        let mut next = |m: i64| below(m as u64) as i64;
        for gap in [0, 3_000, 40_000] {
            let mut all = Vec::new();
            let mut p = Partition::new(-100_000, 1_000_000_000);
            for i in 0..20_000i64 {
                let rq = i * 1_000 + next(gap + 1);
                let moments = [
                    (rq, rq + next(300)),
                    (rq + next(9_000), rq + 9_000 + next(2_000)),
                    (rq + 200, rq + next(30_000)),
                    (rq - 500, rq + 500 + next(40_000)),
                ];
                // No moment of this request or a later one starts before
                // this (a request starts at i * 1000 at the earliest).
                p.release(i * 1_000 - 500);
                for (lane, (s, e)) in moments.into_iter().enumerate() {
                    p.push_lane(lane, s, e);
                    all.push((s, e, LANE_STATES[lane]));
                }
            }
            assert_eq!(p.finish(), partition(all.iter().copied()), "gap {gap}");
        }
    }

    #[test]
    fn slowest_keeps_what_a_full_sort_would() {
        let mut all: Vec<(f64, u64)> = (0..500u64)
            .map(|i| (((i * 7919) % 97) as f64 / 4.0, (i * 31) % 211))
            .collect();
        let mut kept = Slowest::default();
        for &(p, f) in &all {
            kept.push(p, f);
        }
        all.sort_unstable_by(|x, y| y.0.total_cmp(&x.0).then(y.1.cmp(&x.1)));
        let want: Vec<u64> = all.iter().take(SLOW_FRAMES).map(|s| s.1).collect();
        assert_eq!(kept.frames(), want);
    }

    #[test]
    fn union_merges_overlaps_and_skips_gaps() {
        let mut u = Union::default();
        assert_eq!(u.total(), 0);
        for (s, e) in [(0, 10), (0, 4), (5, 15), (20, 25), (30, 30), (31, 29)] {
            u.add(s, e);
        }
        assert_eq!(u.total(), 20);
    }

    #[test]
    fn data_ops_as_the_rules_name_them() {
        for op in [
            "READ", "WRITE", "COMMIT", "Read", "Write", "Flush", "read", "copy",
        ] {
            assert!(is_data_op(op), "{op}");
        }
        for op in ["GETATTR", "Create", "flush", "LOOKUP"] {
            assert!(!is_data_op(op), "{op}");
        }
    }

    #[test]
    fn median_as_python_statistics() {
        let stats = |v: &[f64]| {
            let mut s = OrderStats::default();
            v.iter().for_each(|&x| s.push(x));
            s
        };
        assert_eq!(median_and(stats(&[4.0, 1.0, 3.0, 2.0]), 0.9), (2.5, 3.0));
        assert_eq!(median_and(stats(&[9.0, 1.0, 5.0]), 0.9), (5.0, 5.0));
        assert_eq!(median_and(stats(&[]), 0.9), (0.0, 0.0));
    }
}
