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

/// Total length of the union of [start, end) intervals.
pub fn union_ns(intervals: &mut [(i64, i64)]) -> i64 {
    intervals.sort_unstable();
    let mut total = 0i64;
    let mut cur: Option<(i64, i64)> = None;
    for &(s, e) in intervals.iter().filter(|(s, e)| e > s) {
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    if let Some((cs, ce)) = cur {
        total += ce - cs;
    }
    total
}

/// Nanoseconds per state for (start, end, state) intervals; at any instant
/// the lowest state present wins. `intervals` is called twice (bounds, then
/// points); `points` is the working buffer (cleared first), so that one
/// serves several calls.
///
/// A point is packed in a `u64` that sorts as (time, end before start,
/// state): time since the earliest start in the high bits. Half the memory
/// of a tuple (a connection may hold millions of requests) and a faster
/// sort; times more than 2^60 ns apart (none in a real capture) take the
/// tuple path.
fn partition<I: Iterator<Item = (i64, i64, u8)>>(
    points: &mut Vec<u64>,
    intervals: impl Fn() -> I,
) -> [i64; 3] {
    points.clear();
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    for (s, e, _) in intervals().filter(|(s, e, _)| e > s) {
        lo = lo.min(s);
        hi = hi.max(e);
    }
    if lo > hi {
        return [0; 3];
    }
    let fits = hi.checked_sub(lo).is_some_and(|span| span < 1 << 60);
    if !fits {
        let mut wide: Vec<(i64, i8, u8)> = Vec::new();
        for (s, e, st) in intervals().filter(|(s, e, _)| e > s) {
            wide.push((s, 1, st));
            wide.push((e, -1, st));
        }
        wide.sort_unstable();
        return sweep(wide.into_iter());
    }
    let pack = |t: i64, start: bool, st: u8| {
        ((t - lo) as u64) << 3 | u64::from(start) << 2 | u64::from(st)
    };
    for (s, e, st) in intervals().filter(|(s, e, _)| e > s) {
        points.push(pack(s, true, st));
        points.push(pack(e, false, st));
    }
    points.sort_unstable();
    sweep(points.iter().map(|&p| {
        let delta = if p & 4 != 0 { 1 } else { -1 };
        (lo + (p >> 3) as i64, delta, (p & 3) as u8)
    }))
}

/// The sweep of [`partition`] over its sorted points.
fn sweep(points: impl Iterator<Item = (i64, i8, u8)>) -> [i64; 3] {
    let mut counts = [0i64; 3];
    let mut totals = [0i64; 3];
    let mut last: Option<i64> = None;
    for (t, delta, st) in points {
        if let Some(l) = last {
            if t > l {
                if let Some(i) = counts.iter().position(|&c| c > 0) {
                    totals[i] += t - l;
                }
            }
        }
        counts[usize::from(st)] += i64::from(delta);
        last = Some(t);
    }
    totals
}

fn ms(ns: i64) -> f64 {
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

/// Median as Python's `statistics.median` (mean of the middle two).
fn median(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
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

impl RttFloors {
    /// From one connection's facts, in any order.
    pub(crate) fn of(txs: &[TxFacts]) -> Self {
        RttFloors {
            server_ms: server_floor_ms(txs),
            turnaround_ms: turnaround_floor_ms(txs),
        }
    }
}

fn server_floor_ms(txs: &[TxFacts]) -> Option<f64> {
    let (n, min) = txs
        .iter()
        .filter_map(|t| t.server_time_ns().map(ms))
        .filter(|v| *v >= 0.0)
        .fold((0usize, f64::INFINITY), |(n, m), v| (n + 1, m.min(v)));
    (n >= 3).then_some(min)
}

fn turnaround_floor_ms(txs: &[TxFacts]) -> Option<f64> {
    if txs.len() < 4 {
        return None;
    }
    let mut starts: Vec<i64> = txs.iter().map(|t| t.req_first_ts).collect();
    starts.sort_unstable();
    let (n, min) = txs
        .iter()
        .filter_map(|t| t.reply().map(|r| r.last_ts))
        .filter_map(|end| {
            let i = starts.partition_point(|&s| s <= end);
            starts.get(i).map(|&s| s - end)
        })
        .fold((0usize, i64::MAX), |(n, m), gap| (n + 1, m.min(gap)));
    (n >= 3).then(|| ms(min))
}

/// Round trips from the capture point to the client and to the server (ms)
/// and their source, as `Context.side_rtts_ms`.
fn side_rtts(
    stream: u32,
    floors: RttFloors,
    tcp: &TcpAnalysis,
    convs: &ConversationTable,
) -> (f64, f64, &'static str) {
    let floor = floors.server_ms;
    let sum = tcp.summary(stream);
    let (cli, srv) = match (convs.get(stream), sum) {
        (Some(conv), Some(m)) => {
            let c = conv.client_direction().0 as usize;
            let s = 1 - c;
            let cli = smallest(&[m.hs_client_ns.map(ms), m.dirs[s].far_min_ns.map(ms)]);
            let srv = smallest(&[m.hs_server_ns.map(ms), m.dirs[c].far_min_ns.map(ms)]);
            (cli, srv)
        }
        _ => (None, None),
    };
    match (cli, srv) {
        (Some(c), Some(s)) => (
            c,
            smallest(&[Some(s), floor]).unwrap_or(0.0),
            "tcp_connections",
        ),
        _ => (
            floors.turnaround_ms.unwrap_or(0.0),
            floor.unwrap_or(0.0),
            "fastest response and turnaround",
        ),
    }
}

/// (max outstanding, share of busy time at it, mean outstanding while busy)
/// from the requests themselves (when the concurrency analysis has no row).
fn outstanding_stats(txs: &[&TxFacts]) -> (u32, f64, f64) {
    let mut points: Vec<(i64, i32)> = Vec::with_capacity(txs.len() * 2);
    for t in txs {
        let end = t.reply().map_or(t.req_first_ts, |r| r.first_ts);
        if end > t.req_first_ts {
            points.push((t.req_first_ts, 1));
            points.push((end, -1));
        }
    }
    points.sort_unstable();
    let mut level = 0i32;
    let mut last: Option<i64> = None;
    let mut time_at: HashMap<i32, i64> = HashMap::new();
    for (t, d) in points {
        if let Some(l) = last {
            if t > l && level > 0 {
                *time_at.entry(level).or_default() += t - l;
            }
        }
        level += d;
        last = Some(t);
    }
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

fn profile(
    stream: u32,
    all: &[&TxFacts],
    floors: RttFloors,
    names: &Names,
    tcp: &TcpAnalysis,
    convs: &ConversationTable,
    conc: Option<&crate::concurrency::ConnConcurrency>,
) -> Option<TimeProfile> {
    let storage: Vec<&TxFacts> = all
        .iter()
        .copied()
        .filter(|t| is_storage(names.protocol(t)))
        .collect();
    let txs: Vec<&TxFacts> = storage
        .iter()
        .copied()
        .filter(|t| t.reply().is_some())
        .collect();
    if txs.is_empty() {
        return None;
    }
    let (cli_rtt, srv_rtt, source) = side_rtts(stream, floors, tcp, convs);
    // Half round trips, truncated as the Python reference does.
    let a = (cli_rtt * 1e6 / 2.0) as i64;
    let b = (srv_rtt * 1e6 / 2.0) as i64;
    let mut p = TimeProfile {
        stream,
        transactions: storage.len() as u64,
        answered: txs.len() as u64,
        client_rtt_ms: cli_rtt,
        server_rtt_ms: srv_rtt,
        rtt_source: source,
        ..Default::default()
    };
    let mut outstanding = Vec::with_capacity(txs.len());
    let mut data_spans = Vec::new();
    let mut processing = Vec::with_capacity(txs.len());
    let mut by_op: Vec<(u32, f64)> = Vec::new();
    let mut by_file: HashMap<u32, (usize, f64)> = HashMap::new();
    let mut slow = Slowest::default();
    let mut protocols: Vec<&'static str> = Vec::new();
    for t in &txs {
        let Some(r) = t.reply() else { continue };
        let (rq, rq_last) = (t.req_first_ts, t.req_last_ts);
        let span = (rq - a, r.last_ts + a);
        outstanding.push(span);
        let proc = (ms(r.first_ts - rq_last) - srv_rtt).max(0.0);
        processing.push(proc);
        match by_op.iter_mut().find(|(k, _)| *k == t.op) {
            Some(e) => e.1 += proc,
            None => by_op.push((t.op, proc)),
        }
        if let Some(f) = t.file() {
            let n = by_file.len();
            by_file.entry(f).or_insert((n, 0.0)).1 += proc;
        }
        slow.push(proc, t.req_first_frame);
        let reply_bytes = t.reply_bytes().unwrap_or(0);
        p.data_bytes += t.req_bytes + reply_bytes;
        if names.is_data_op(t) {
            p.io_requests += 1;
            p.io_bytes += match t.count() {
                Some(c) if c > 0 => c,
                _ => t.req_bytes + reply_bytes,
            };
            data_spans.push(span);
        } else {
            p.metadata_requests += 1;
        }
        let protocol = names.protocol(t);
        if !protocols.contains(&protocol) {
            protocols.push(protocol);
        }
    }
    // Each request's moments: transferring (request and reply bytes on the
    // wire), at the server (between them, less the server-side half round
    // trip), in the network (the client-side half round trips around it).
    // Built twice rather than kept (a connection may hold many requests).
    let four = |t: &&TxFacts| {
        let r = t.reply()?;
        let (rq, rq_last) = (t.req_first_ts, t.req_last_ts);
        Some([
            (rq, rq_last, 0u8),
            (r.first_ts, r.last_ts, 0),
            (rq_last + b, r.first_ts - b, 1),
            (rq - a, r.last_ts + a, 2),
        ])
    };
    let mut points = Vec::with_capacity(txs.len() * 8);
    p.ns = partition(&mut points, || txs.iter().filter_map(four).flatten());
    let data = || {
        txs.iter()
            .filter(|t| names.is_data_op(t))
            .filter_map(four)
            .flatten()
    };
    p.data_ns = partition(&mut points, data);
    drop(points);
    let lo = outstanding.iter().map(|s| s.0).min().unwrap_or(0);
    let hi = outstanding.iter().map(|s| s.1).max().unwrap_or(0);
    p.span_ns = (hi - lo).max(1);
    p.outstanding_ns = union_ns(&mut outstanding);
    p.metadata_only_ns = (p.outstanding_ns - union_ns(&mut data_spans)).max(0);
    processing.sort_unstable_by(f64::total_cmp);
    p.processing_median_ms = median(&processing);
    p.processing_p90_ms = processing
        .get((0.9 * (processing.len() - 1) as f64) as usize)
        .copied()
        .unwrap_or(0.0);
    // The concurrency analysis's figures where it has them; the requests'
    // own sweep only when it lacks one.
    let lacking = conc.is_none_or(|c| c.max_outstanding == 0 || c.mean_outstanding_busy == 0.0);
    let (mut k, mut at_max, mut mean_busy) = if lacking {
        outstanding_stats(&txs)
    } else {
        (0, 0.0, 0.0)
    };
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
    p.slow_frames = slow.frames();
    p.by_op = by_op
        .into_iter()
        .map(|(op, v)| (names.ops.name(op).to_string(), v))
        .collect();
    let mut files: Vec<(usize, u32, f64)> =
        by_file.into_iter().map(|(f, (i, v))| (i, f, v)).collect();
    files.sort_unstable_by(|x, y| y.2.total_cmp(&x.2).then(x.0.cmp(&y.0)));
    p.by_file = files
        .into_iter()
        .take(TOP_FILES)
        .map(|(_, f, v)| (names.files.name(f).to_string(), v))
        .collect();
    protocols.sort_unstable();
    p.protocols = protocols;
    let mut srts: Vec<f64> = txs.iter().filter_map(|t| t.srt_ns().map(ms)).collect();
    srts.sort_unstable_by(f64::total_cmp);
    p.response_median_ms = srts.get(srts.len() / 2).copied().unwrap_or(0.0);
    p.first_frames = storage
        .iter()
        .take(FIRST_FRAMES)
        .map(|t| t.req_first_frame)
        .collect();
    Some(p)
}

/// The profile of one TCP connection from its facts in request order (none
/// without answered NFS/SMB requests); `conc` are the connection's rows of
/// the concurrency analysis (the last storage one is used, as the rules'
/// reading does).
pub(crate) fn stream_profile(
    stream: u32,
    txs: &[TxFacts],
    floors: RttFloors,
    names: &Names,
    tcp: &TcpAnalysis,
    convs: &ConversationTable,
    conc: &[crate::concurrency::ConnConcurrency],
) -> Option<TimeProfile> {
    let mut refs: Vec<&TxFacts> = txs.iter().collect();
    refs.sort_by_key(|t| t.req_first_ts);
    let conc = conc.iter().rfind(|c| is_storage(c.protocol));
    profile(stream, &refs, floors, names, tcp, convs, conc)
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
    k.str(
        "rtt_source",
        rows.iter().map(|r| r.rtt_source.to_string()).collect(),
    );
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
        let mut points = Vec::new();
        let t = partition(&mut points, || {
            [(0, 10, 0), (5, 20, 1), (0, 30, 2)].into_iter()
        });
        assert_eq!(t, [10, 10, 10]);
        // Empty and reversed intervals count for nothing.
        let none = || [(5, 5, 0), (9, 3, 1)].into_iter();
        assert_eq!(partition(&mut points, none), [0, 0, 0]);
        // Ends come before starts at the same instant; negative times and
        // times too far apart to pack give the same answer.
        let touching = || [(-20, -10, 1), (-10, 0, 0), (0, 5, 2)].into_iter();
        assert_eq!(partition(&mut points, touching), [10, 10, 5]);
        let far = || {
            [
                (i64::MIN / 2, i64::MIN / 2 + 10, 0),
                (i64::MAX / 2, i64::MAX / 2 + 7, 1),
            ]
            .into_iter()
        };
        assert_eq!(partition(&mut points, far), [10, 7, 0]);
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
        assert_eq!(union_ns(&mut [(0, 10), (5, 15), (20, 25), (30, 30)]), 20);
        assert_eq!(union_ns(&mut []), 0);
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
        assert_eq!(median(&[1.0, 2.0, 3.0, 4.0]), 2.5);
        assert_eq!(median(&[1.0, 5.0, 9.0]), 5.0);
        assert_eq!(median(&[]), 0.0);
    }
}
