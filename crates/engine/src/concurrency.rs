//! Concurrency of the storage protocols, from the transactions: how many
//! requests each connection had outstanding over time, what each new request
//! saw (a hard cap — 16 sunrpc slots, 16 server threads, SMB2 credits —
//! shows as a flat maximum), NFSv4.1 slot use, the SMB2 credit balance and
//! the moments the client was credit-starved, and a Little's-law check.
//!
//! A request is outstanding, as seen at the capture point, from its first
//! byte to the last byte of its reply. Unanswered requests count until the
//! end of their connection.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, StringBuilder, TimestampNanosecondBuilder, UInt32Builder,
    UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};

use crate::in_order::InOrder;
#[cfg(test)]
use crate::transactions::{Transaction, TransactionLog};
#[cfg(test)]
use crate::tx_facts::Names;
use crate::tx_facts::{Facts, TxFacts};

/// Series interval from a duration: about 500 bins, clamped to [1 ms, 10 s].
pub fn default_interval_ns(duration_ns: i64) -> i64 {
    // Past 10 s the bins widen with the span, so that a connection has at
    // most MAX_SERIES_BINS of them: a corrupt or wrapped timestamp can make
    // the span decades long (3e8 bins of 10 s, gigabytes).
    (duration_ns / 500)
        .clamp(1_000_000, 10_000_000_000)
        .max(duration_ns / MAX_SERIES_BINS)
}

/// Most series bins over a capture's span (at 10 s each, 11.5 days).
pub const MAX_SERIES_BINS: i64 = 100_000;

/// One connection's concurrency facts.
#[derive(Debug, Clone, Default)]
pub struct ConnConcurrency {
    pub stream: u32,
    pub protocol: &'static str,
    pub requests: u64,
    pub max_outstanding: u32,
    /// Time-weighted mean over the time the connection had ≥ 1 request
    /// outstanding ("busy"), and over the whole span first request → last reply.
    pub mean_outstanding_busy: f64,
    pub mean_outstanding: f64,
    pub busy_ns: i64,
    pub span_ns: i64,
    /// Outstanding count seen by each new request (itself included):
    /// histogram value → requests.
    pub seen_at_arrival: BTreeMap<u32, u64>,
    /// Share of requests that arrived when `max_outstanding` were already
    /// in use including themselves (a saturated cap).
    pub at_max_fraction: f64,
    pub mean_request_bytes: f64,
    pub mean_srt_ms: f64,
    /// Little's law: outstanding × bytes per request ÷ latency, bits/s,
    /// against the bits/s actually moved by the requests.
    pub littles_law_bps: f64,
    pub observed_bps: f64,
    /// NFSv4.1: highest slot id used, highest_slotid and target_highest_slotid seen.
    pub max_slot: Option<u32>,
    pub max_highest_slot: Option<u32>,
    pub min_target_highest_slot: Option<u32>,
    /// SMB2 credits: the client's spendable balance (granted − charged,
    /// offset so it never goes negative when the grant history before the
    /// capture is unknown), minimum, and credit-starved time and requests.
    pub credits_tracked: bool,
    pub credit_balance_inferred: bool,
    pub min_credit_balance: Option<i64>,
    pub max_credit_balance: Option<i64>,
    pub credit_starved_ns: i64,
    pub credit_starved_requests: u64,
}

/// A request's arrival or completion: (time, -1 completion or +1 arrival
/// (completions first at equal times), request number (request order breaks
/// the remaining ties), credits charged, credits granted).
type Event = (i64, i8, u64, i64, i64);

/// A change of the SMB2 credit balance for the first reading: time, +1 a
/// request (a charge) or -1 a response (a grant), and the change. Only the
/// lowest balance is wanted, and at one time and kind every change has
/// the same sign (a charge lowers the balance, a grant raises it), so the
/// lowest is the same whatever their order: the request numbers that order
/// [`Event`]s are not needed, and the points are smaller to sort.
type Credit = (i64, i8, i64);

/// (stream, bin start, max outstanding, time-weighted mean, credit balance at bin end)
pub(crate) type SeriesRow = (u32, i64, u32, f64, Option<i64>);

pub(crate) struct ConcurrencyResult {
    pub conns: Vec<ConnConcurrency>,
    pub series: Vec<SeriesRow>,
    pub interval_ns: i64,
}

fn bytes_moved(t: &TxFacts) -> u64 {
    t.reply_count().or(t.count()).unwrap_or(0)
}

/// The concurrency analysis of a log (tests; the engine adds each
/// connection's facts as it builds its digest, see `analysis.rs`).
#[cfg(test)]
pub(crate) fn analyze(log: &TransactionLog, interval_ns: Option<i64>) -> ConcurrencyResult {
    let mut facts = Facts::default();
    for (i, t) in log.transactions.iter().enumerate() {
        facts.add(&t, i as u64);
    }
    let mut r = ConcurrencyResult::new(interval_ns.unwrap_or_else(|| interval_for(&facts)));
    facts.for_each_stream(|tcp, stream, txs| {
        if tcp {
            r.add_stream(stream, &txs, &facts.names);
        }
    });
    r
}

/// The series interval for these facts' time span.
pub(crate) fn interval_for(facts: &Facts) -> i64 {
    let (lo, hi) = facts.span().unwrap_or((0, 0));
    default_interval_ns(hi.saturating_sub(lo).max(0))
}

impl ConcurrencyResult {
    pub(crate) fn new(interval_ns: i64) -> Self {
        ConcurrencyResult {
            conns: Vec::new(),
            series: Vec::new(),
            interval_ns,
        }
    }

    /// Add one TCP connection from its facts in request order: a row per
    /// protocol on it, in protocol-name order (tests; the digest sweeps each
    /// connection as it reads it back, see `analysis.rs`).
    #[cfg(test)]
    pub(crate) fn add_stream(&mut self, stream: u32, all: &[TxFacts], names: &Names) {
        let mut scans: BTreeMap<&'static str, ProtocolScan> = BTreeMap::new();
        for t in all {
            let p = names.protocol(t);
            let scan = scans.entry(p).or_insert_with(|| ProtocolScan::new(p));
            scan.add(t, None);
        }
        let mut sweeps: BTreeMap<&'static str, ProtocolSweep> = scans
            .into_iter()
            .map(|(p, scan)| {
                (
                    p,
                    ProtocolSweep::new(stream, self.interval_ns, scan.finish()),
                )
            })
            .collect();
        for (i, t) in all.iter().enumerate() {
            if let Some(sw) = sweeps.get_mut(names.protocol(t)) {
                sw.add(i as u64, t, None);
            }
        }
        for sw in sweeps.into_values() {
            sw.finish(&mut self.conns, &mut self.series);
        }
    }
}

/// What the concurrency sweep of one protocol on one connection needs to
/// know before it starts, gathered in a first reading of its requests: where
/// unanswered requests end (the latest end of any), whether the SMB2
/// NEGOTIATE was seen, and otherwise the lowest credit balance the grants
/// and charges reach, from which the balance before the capture is inferred.
pub(crate) struct ProtocolScan {
    protocol: &'static str,
    smb: bool,
    end: Option<i64>,
    saw_negotiate: bool,
    credits: InOrder<Credit>,
    /// Unanswered requests' grants, placed at `end` once it is known.
    unanswered: Vec<i64>,
    balance: i64,
    lowest: i64,
}

/// What [`ProtocolScan`] found.
#[derive(Debug, PartialEq)]
pub(crate) struct ScanResult {
    protocol: &'static str,
    end: i64,
    saw_negotiate: bool,
    lowest: i64,
}

impl ScanResult {
    /// What a scan finds of a protocol other than SMB2, whose requests'
    /// ends alone matter (no credits): its requests end at `end`.
    pub(crate) fn without_credits(protocol: &'static str, end: i64) -> Self {
        ScanResult {
            protocol,
            end,
            saw_negotiate: false,
            lowest: 0,
        }
    }
}

fn charge(t: &TxFacts) -> i64 {
    i64::from(t.credit_charge().unwrap_or(1).max(1))
}

fn grant(t: &TxFacts) -> i64 {
    i64::from(t.credit_grant().unwrap_or(0))
}

impl ProtocolScan {
    pub(crate) fn new(protocol: &'static str) -> Self {
        ProtocolScan {
            protocol,
            smb: protocol == "smb2",
            end: None,
            saw_negotiate: false,
            credits: InOrder::default(),
            unanswered: Vec::new(),
            balance: 0,
            lowest: 0,
        }
    }

    /// Add the next request, in request order. `bound`: no time of this
    /// request or a later one lies before it (see `in_order`), so points
    /// before it are swept now (None: everything waits for the end).
    pub(crate) fn add(&mut self, t: &TxFacts, bound: Option<i64>) {
        let done = t.done();
        self.end = Some(self.end.map_or(done, |e| e.max(done)));
        if !self.smb {
            return;
        }
        self.saw_negotiate |= t.negotiate();
        if let Some(bound) = bound.filter(|_| self.credits.due()) {
            let (balance, lowest) = (&mut self.balance, &mut self.lowest);
            self.credits.release((bound, i8::MIN, i64::MIN), |e| {
                *balance += e.2;
                *lowest = (*lowest).min(*balance);
            });
        }
        self.credits.push((t.req_first_ts, 1, -charge(t)));
        match t.reply() {
            Some(r) => self.credits.push((r.last_ts, -1, grant(t))),
            None => self.unanswered.push(grant(t)),
        }
    }

    pub(crate) fn finish(mut self) -> ScanResult {
        let end = self.end.unwrap_or(0);
        for g in std::mem::take(&mut self.unanswered) {
            self.credits.push((end, -1, g));
        }
        let (mut balance, mut lowest) = (self.balance, self.lowest);
        self.credits.finish(|e| {
            balance += e.2;
            lowest = lowest.min(balance);
        });
        ScanResult {
            protocol: self.protocol,
            end,
            saw_negotiate: self.saw_negotiate,
            lowest,
        }
    }
}

/// The concurrency sweep of one protocol on one connection, fed its
/// requests in request order (see `in_order`): a [`ConnConcurrency`] row
/// and its series bins.
pub(crate) struct ProtocolSweep {
    c: ConnConcurrency,
    smb: bool,
    interval: i64,
    /// Where unanswered requests end.
    end: i64,
    events: InOrder<Event>,
    req_bytes: u64,
    srt_sum: i64,
    srt_n: u64,
    moved: u64,
    // The sweep so far.
    first: Option<i64>,
    last_ts: i64,
    out: i64,
    max_out: u32,
    area: f64,
    busy: i64,
    bal: i64,
    min_bal: i64,
    max_bal: i64,
    /// Sparse series: bin index -> (max outstanding, area, balance at end).
    bins: BTreeMap<i64, Bin>,
    /// The latest bin, kept out of `bins` until the sweep passes it:
    /// events come in time order, so nearly every one falls in it (a map
    /// lookup and a division per event were a fifth of the sweep).
    cur: Option<(i64, Bin)>,
    /// Requests by the number outstanding on their arrival, counted here
    /// and moved to the row's map at the end.
    arrivals: Vec<u64>,
}

/// A series bin: max outstanding, area (outstanding × ns), balance at its
/// end.
type Bin = (u32, f64, i64);

impl ProtocolSweep {
    pub(crate) fn new(stream: u32, interval: i64, scan: ScanResult) -> Self {
        let smb = scan.protocol == "smb2";
        // SMB2 credits: the balance before the capture is unknown unless the
        // connection's NEGOTIATE (MessageId 0) was seen; then start from the
        // smallest balance that never goes negative.
        let bal = match (smb, scan.saw_negotiate) {
            (false, _) => 0,
            (true, true) => 1,
            (true, false) => -scan.lowest,
        };
        ProtocolSweep {
            c: ConnConcurrency {
                stream,
                protocol: scan.protocol,
                credits_tracked: smb,
                credit_balance_inferred: smb && !scan.saw_negotiate,
                ..Default::default()
            },
            smb,
            interval,
            end: scan.end,
            events: InOrder::default(),
            req_bytes: 0,
            srt_sum: 0,
            srt_n: 0,
            moved: 0,
            first: None,
            last_ts: 0,
            out: 0,
            max_out: 0,
            area: 0.0,
            busy: 0,
            bal,
            min_bal: bal,
            max_bal: bal,
            bins: BTreeMap::new(),
            cur: None,
            arrivals: Vec::new(),
        }
    }

    /// The bin holding time `t` (bins are asked for in time order, but
    /// for times equal to the last ones; a new bin starts at `bal`).
    fn bin(&mut self, t: i64, bal: i64) -> (&mut Bin, i64) {
        let interval = self.interval;
        let holds = |idx: i64| {
            let start = idx * interval;
            start <= t && t - start < interval
        };
        if let Some((old, b)) = self.cur.take_if(|(idx, _)| !holds(*idx)) {
            self.bins.insert(old, b);
        }
        let bins = &mut self.bins;
        let (idx, b) = self.cur.get_or_insert_with(|| {
            let idx = t.div_euclid(interval);
            // (A bin left earlier is taken back: never with times in
            // order, but the series must not depend on it.)
            (idx, bins.remove(&idx).unwrap_or((0, 0.0, bal)))
        });
        (b, (*idx + 1) * interval)
    }

    /// Add request number `i`, in request order (`bound`: as for
    /// [`ProtocolScan::add`]).
    pub(crate) fn add(&mut self, i: u64, t: &TxFacts, bound: Option<i64>) {
        if let Some(bound) = bound.filter(|_| self.events.due()) {
            let mut events = std::mem::take(&mut self.events);
            events.release((bound, i8::MIN, 0, 0, 0), |e| self.step(e));
            self.events = events;
        }
        let smb = self.smb;
        self.c.requests += 1;
        self.events
            .push((t.req_first_ts, 1, i, if smb { charge(t) } else { 0 }, 0));
        let done = t.reply().map_or(self.end, |r| r.last_ts);
        self.events
            .push((done, -1, i, 0, if smb { grant(t) } else { 0 }));
        self.req_bytes += t.count().unwrap_or(0);
        self.moved += bytes_moved(t);
        if let Some(s) = t.srt_ns() {
            self.srt_sum += s;
            self.srt_n += 1;
        }
        let c = &mut self.c;
        if let Some(s) = t.slot() {
            c.max_slot = Some(c.max_slot.map_or(s, |m| m.max(s)));
        }
        if let Some(s) = t.highest_slot() {
            c.max_highest_slot = Some(c.max_highest_slot.map_or(s, |m| m.max(s)));
        }
        if let Some(s) = t.target_highest_slot() {
            c.min_target_highest_slot = Some(c.min_target_highest_slot.map_or(s, |m| m.min(s)));
        }
    }

    /// One event of the sweep, in time order.
    fn step(&mut self, (ts, delta, _, charge, grant): Event) {
        if self.first.is_none() {
            self.first = Some(ts);
            self.last_ts = ts;
        }
        let (smb, bal, out) = (self.smb, self.bal, self.out);
        let dt = ts - self.last_ts;
        self.area += out as f64 * dt as f64;
        if out > 0 {
            self.busy += dt;
            if smb && bal <= 0 {
                self.c.credit_starved_ns += dt;
            }
            // Spread [last_ts, ts) over the bins it covers.
            let mut t = self.last_ts;
            while t < ts {
                let (slot, bin_end) = self.bin(t, bal);
                let upto = bin_end.min(ts);
                slot.0 = slot.0.max(out as u32);
                slot.1 += out as f64 * (upto - t) as f64;
                slot.2 = bal;
                t = upto;
            }
        }
        let c = &mut self.c;
        self.last_ts = ts;
        self.out += i64::from(delta);
        self.bal += grant - charge;
        self.min_bal = self.min_bal.min(self.bal);
        self.max_bal = self.max_bal.max(self.bal);
        if delta > 0 {
            let k = self.out.max(0) as u32;
            let n = k as usize;
            if n >= self.arrivals.len() {
                self.arrivals.resize(n + 1, 0);
            }
            self.arrivals[n] += 1;
            self.max_out = self.max_out.max(k);
            if smb && self.bal <= 0 {
                c.credit_starved_requests += 1;
            }
            let bal = self.bal;
            let (slot, _) = self.bin(ts, bal);
            slot.0 = slot.0.max(k);
            slot.2 = bal;
        }
    }

    /// The row and its series bins.
    pub(crate) fn finish(mut self, conns: &mut Vec<ConnConcurrency>, series: &mut Vec<SeriesRow>) {
        let events = std::mem::take(&mut self.events);
        events.finish(|e| self.step(e));
        if let Some((idx, b)) = self.cur.take() {
            self.bins.insert(idx, b);
        }
        for (k, &n) in self.arrivals.iter().enumerate() {
            if n > 0 {
                self.c.seen_at_arrival.insert(k as u32, n);
            }
        }
        let (interval, smb) = (self.interval, self.smb);
        for (idx, (m, a, b)) in std::mem::take(&mut self.bins) {
            series.push((
                self.c.stream,
                idx * interval,
                m,
                a / interval as f64,
                smb.then_some(b),
            ));
        }
        let mut c = self.c;
        let (area, busy) = (self.area, self.busy);
        let span = self.last_ts - self.first.unwrap_or(0);
        c.max_outstanding = self.max_out;
        c.span_ns = span;
        c.busy_ns = busy;
        c.mean_outstanding = if span > 0 { area / span as f64 } else { 0.0 };
        c.mean_outstanding_busy = if busy > 0 { area / busy as f64 } else { 0.0 };
        c.at_max_fraction = if c.requests > 0 {
            c.seen_at_arrival.get(&self.max_out).copied().unwrap_or(0) as f64 / c.requests as f64
        } else {
            0.0
        };
        c.mean_request_bytes = if c.requests > 0 {
            self.req_bytes as f64 / c.requests as f64
        } else {
            0.0
        };
        c.mean_srt_ms = if self.srt_n > 0 {
            self.srt_sum as f64 / self.srt_n as f64 / 1e6
        } else {
            0.0
        };
        let bytes_per_req = if c.requests > 0 {
            self.moved as f64 / c.requests as f64
        } else {
            0.0
        };
        c.littles_law_bps = if c.mean_srt_ms > 0.0 {
            c.mean_outstanding_busy * bytes_per_req * 8.0 / (c.mean_srt_ms / 1e3)
        } else {
            0.0
        };
        c.observed_bps = if busy > 0 {
            self.moved as f64 * 8.0 / (busy as f64 / 1e9)
        } else {
            0.0
        };
        if smb {
            c.min_credit_balance = Some(self.min_bal);
            c.max_credit_balance = Some(self.max_bal);
        }
        conns.push(c);
    }
}

fn ts_field(name: &str) -> Field {
    Field::new(
        name,
        DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
        false,
    )
}

/// `concurrency`: one row per connection with requests.
pub(crate) fn summary_table(r: &ConcurrencyResult) -> RecordBatch {
    let n = r.conns.len();
    let mut stream = UInt32Builder::with_capacity(n);
    let mut proto = StringBuilder::new();
    let mut u64s: Vec<UInt64Builder> = (0..3).map(|_| UInt64Builder::with_capacity(n)).collect();
    let mut maxo = UInt32Builder::with_capacity(n);
    let mut f64s: Vec<Float64Builder> = (0..8).map(|_| Float64Builder::with_capacity(n)).collect();
    let mut slots: Vec<UInt32Builder> = (0..3).map(|_| UInt32Builder::with_capacity(n)).collect();
    let mut tracked = BooleanBuilder::new();
    let mut inferred = BooleanBuilder::new();
    let mut bals: Vec<arrow_array::builder::Int64Builder> = (0..2)
        .map(|_| arrow_array::builder::Int64Builder::with_capacity(n))
        .collect();
    let mut starved_ms = Float64Builder::with_capacity(n);
    let mut starved_req = UInt64Builder::with_capacity(n);
    for c in &r.conns {
        stream.append_value(c.stream);
        proto.append_value(c.protocol);
        maxo.append_value(c.max_outstanding);
        for (b, v) in
            u64s.iter_mut()
                .zip([c.requests, c.busy_ns.max(0) as u64, c.span_ns.max(0) as u64])
        {
            b.append_value(v);
        }
        for (b, v) in f64s.iter_mut().zip([
            c.mean_outstanding,
            c.mean_outstanding_busy,
            c.at_max_fraction,
            c.mean_request_bytes,
            c.mean_srt_ms,
            c.littles_law_bps,
            c.observed_bps,
            if c.span_ns > 0 {
                c.busy_ns as f64 / c.span_ns as f64
            } else {
                0.0
            },
        ]) {
            b.append_value(v);
        }
        for (b, v) in
            slots
                .iter_mut()
                .zip([c.max_slot, c.max_highest_slot, c.min_target_highest_slot])
        {
            b.append_option(v);
        }
        tracked.append_value(c.credits_tracked);
        inferred.append_value(c.credit_balance_inferred);
        bals[0].append_option(c.min_credit_balance);
        bals[1].append_option(c.max_credit_balance);
        if c.credits_tracked {
            starved_ms.append_value(c.credit_starved_ns as f64 / 1e6);
            starved_req.append_value(c.credit_starved_requests);
        } else {
            starved_ms.append_null();
            starved_req.append_null();
        }
    }
    let mut fields = vec![
        Field::new("stream", DataType::UInt32, false),
        Field::new("protocol", DataType::Utf8, false),
        Field::new("max_outstanding", DataType::UInt32, false),
    ];
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(stream.finish()),
        Arc::new(proto.finish()),
        Arc::new(maxo.finish()),
    ];
    for (name, mut b) in ["requests", "busy_ns", "span_ns"].iter().zip(u64s) {
        fields.push(Field::new(*name, DataType::UInt64, false));
        cols.push(Arc::new(b.finish()));
    }
    for (name, mut b) in [
        "mean_outstanding",
        "mean_outstanding_busy",
        "at_max_fraction",
        "mean_request_bytes",
        "mean_srt_ms",
        "littles_law_bps",
        "observed_bps",
        "busy_fraction",
    ]
    .iter()
    .zip(f64s)
    {
        fields.push(Field::new(*name, DataType::Float64, false));
        cols.push(Arc::new(b.finish()));
    }
    for (name, mut b) in ["max_slot", "max_highest_slot", "min_target_highest_slot"]
        .iter()
        .zip(slots)
    {
        fields.push(Field::new(*name, DataType::UInt32, true));
        cols.push(Arc::new(b.finish()));
    }
    fields.push(Field::new("credits_tracked", DataType::Boolean, false));
    cols.push(Arc::new(tracked.finish()));
    fields.push(Field::new(
        "credit_balance_inferred",
        DataType::Boolean,
        false,
    ));
    cols.push(Arc::new(inferred.finish()));
    for (name, mut b) in ["min_credit_balance", "max_credit_balance"]
        .iter()
        .zip(bals)
    {
        fields.push(Field::new(*name, DataType::Int64, true));
        cols.push(Arc::new(b.finish()));
    }
    fields.push(Field::new("credit_starved_ms", DataType::Float64, true));
    cols.push(Arc::new(starved_ms.finish()));
    fields.push(Field::new(
        "credit_starved_requests",
        DataType::UInt64,
        true,
    ));
    cols.push(Arc::new(starved_req.finish()));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
        .expect("concurrency columns match their schema")
}

/// `outstanding_at_arrival`: per connection, how many requests arrived with
/// k requests outstanding (themselves included).
pub(crate) fn arrival_table(r: &ConcurrencyResult) -> RecordBatch {
    let mut stream = UInt32Builder::new();
    let mut proto = StringBuilder::new();
    let mut k = UInt32Builder::new();
    let mut n = UInt64Builder::new();
    for c in &r.conns {
        for (kk, nn) in &c.seen_at_arrival {
            stream.append_value(c.stream);
            proto.append_value(c.protocol);
            k.append_value(*kk);
            n.append_value(*nn);
        }
    }
    let fields = vec![
        Field::new("stream", DataType::UInt32, false),
        Field::new("protocol", DataType::Utf8, false),
        Field::new("outstanding", DataType::UInt32, false),
        Field::new("requests", DataType::UInt64, false),
    ];
    let cols: Vec<ArrayRef> = vec![
        Arc::new(stream.finish()),
        Arc::new(proto.finish()),
        Arc::new(k.finish()),
        Arc::new(n.finish()),
    ];
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
        .expect("arrival columns match their schema")
}

/// `outstanding_series`: per connection and interval bin (sparse: bins with
/// requests outstanding), the maximum and time-weighted mean outstanding,
/// and the SMB2 credit balance at the end of the bin.
pub(crate) fn series_table(r: &ConcurrencyResult) -> RecordBatch {
    let mut stream = UInt32Builder::new();
    let mut start = TimestampNanosecondBuilder::new().with_timezone("UTC");
    let mut interval = UInt64Builder::new();
    let mut maxo = UInt32Builder::new();
    let mut mean = Float64Builder::new();
    let mut bal = arrow_array::builder::Int64Builder::new();
    for (s, t, m, a, b) in &r.series {
        stream.append_value(*s);
        start.append_value(*t);
        interval.append_value(r.interval_ns.max(0) as u64);
        maxo.append_value(*m);
        mean.append_value(*a);
        bal.append_option(*b);
    }
    let fields = vec![
        Field::new("stream", DataType::UInt32, false),
        ts_field("start"),
        Field::new("interval_ns", DataType::UInt64, false),
        Field::new("max_outstanding", DataType::UInt32, false),
        Field::new("mean_outstanding", DataType::Float64, false),
        Field::new("credit_balance", DataType::Int64, true),
    ];
    let cols: Vec<ArrayRef> = vec![
        Arc::new(stream.finish()),
        Arc::new(start.finish()),
        Arc::new(interval.finish()),
        Arc::new(maxo.finish()),
        Arc::new(mean.finish()),
        Arc::new(bal.finish()),
    ];
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
        .expect("series columns match their schema")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transactions::PduSpan;

    #[test]
    fn the_interval_keeps_the_bins_bounded_over_any_span() {
        // As before up to 10 s bins.
        assert_eq!(default_interval_ns(0), 1_000_000);
        assert_eq!(default_interval_ns(60_000_000_000), 120_000_000);
        assert_eq!(default_interval_ns(86_400_000_000_000), 10_000_000_000);
        // A span of decades (a corrupt timestamp): still at most the bound.
        for span in [3_000_000_000_000_000_000i64, i64::MAX] {
            let iv = default_interval_ns(span);
            assert!(span / iv <= MAX_SERIES_BINS, "{span}: {iv}");
        }
    }

    fn tx(
        stream: u32,
        protocol: &'static str,
        start: i64,
        end: i64,
        charge: u16,
        grant: u16,
        id: u64,
    ) -> Transaction {
        Transaction {
            protocol,
            stream,
            transport: "tcp",
            id,
            request: PduSpan {
                first_ts: start,
                last_ts: start,
                ..Default::default()
            },
            reply: Some(PduSpan {
                first_ts: end,
                last_ts: end,
                ..Default::default()
            }),
            count: Some(65536),
            reply_count: Some(65536),
            credit_charge: Some(charge),
            credit_grant: Some(grant),
            ..Default::default()
        }
    }

    #[test]
    fn a_client_cap_of_k_shows_as_flat_maximum() {
        // A client that keeps exactly 4 requests in flight, 1 ms each.
        let mut log = TransactionLog::default();
        for i in 0..400i64 {
            let start = (i / 4) * 1_000_000;
            log.push(tx(7, "nfs", start, start + 1_000_000, 1, 1, i as u64));
        }
        let r = analyze(&log, Some(10_000_000));
        let c = &r.conns[0];
        assert_eq!(c.max_outstanding, 4);
        assert_eq!(c.requests, 400);
        assert!(
            (c.mean_outstanding_busy - 4.0).abs() < 0.01,
            "{}",
            c.mean_outstanding_busy
        );
        assert!(c.at_max_fraction >= 0.25);
        // Little's law: 4 × 64 KiB / 1 ms.
        let expect = 4.0 * 65536.0 * 8.0 / 1e-3;
        assert!((c.littles_law_bps - expect).abs() / expect < 0.01);
        assert!((c.observed_bps - expect).abs() / expect < 0.01);
        assert!(!r.series.is_empty());
        assert!(r.series.iter().all(|s| s.2 == 4));
    }

    #[test]
    fn smb_credit_starvation() {
        // Negotiate (id 0) grants 2 credits; then requests charging 1 each,
        // two at a time, each reply granting 1 back: the client runs dry.
        let mut log = TransactionLog::default();
        log.push(tx(1, "smb2", 0, 10, 1, 2, 0));
        for i in 1..=10i64 {
            let start = 100 + (i - 1) / 2 * 1000;
            log.push(tx(1, "smb2", start, start + 1000, 1, 1, i as u64));
        }
        let r = analyze(&log, None);
        let c = &r.conns[0];
        assert!(c.credits_tracked && !c.credit_balance_inferred);
        assert_eq!(c.min_credit_balance, Some(0));
        assert!(c.credit_starved_requests >= 5);
        assert!(c.credit_starved_ns > 0);
    }

    /// The first reading's lowest credit balance, from changes ordered by
    /// time and kind only, is the lowest of the balance with every event
    /// in the sweep's full order (time, kind, request number, charge,
    /// grant): many requests and responses at the same instants, charges
    /// and grants of several credits, some unanswered, released as they
    /// come and all at the end.
    #[test]
    fn lowest_credit_balance_does_not_need_the_full_order() {
        let mut rand = crate::test_rng::xorshift_below(5);
        let mut facts = Facts::default();
        for i in 0..5_000u64 {
            // Coarse times: ties of starts, ends, and starts with ends.
            let start = (i / 4) as i64 * 10;
            let mut t = tx(3, "smb2", start, start + rand(6) as i64 * 10, 1, 0, i);
            t.credit_charge = Some(rand(4) as u16);
            t.credit_grant = Some(rand(5) as u16);
            if rand(50) == 0 {
                t.reply = None;
            }
            facts.add(&t, i);
        }
        let all: Vec<TxFacts> = facts.iter((false, 3)).collect();
        let end = all
            .iter()
            .map(|t| t.reply().map_or(t.req_last_ts, |r| r.last_ts))
            .max()
            .unwrap_or(0);
        let mut events: Vec<Event> = Vec::new();
        for (i, t) in all.iter().enumerate() {
            let i = i as u64;
            events.push((t.req_first_ts, 1, i, charge(t), 0));
            let done = t.reply().map_or(end, |r| r.last_ts);
            events.push((done, -1, i, 0, grant(t)));
        }
        events.sort_unstable();
        let (mut balance, mut lowest) = (0i64, 0i64);
        for e in &events {
            balance += e.4 - e.3;
            lowest = lowest.min(balance);
        }
        assert!(lowest < -10, "{lowest}");
        for release in [true, false] {
            let mut scan = ProtocolScan::new("smb2");
            let mut latest = i64::MIN;
            for t in &all {
                latest = latest.max(t.req_first_ts);
                scan.add(t, release.then_some(latest));
            }
            assert_eq!(scan.finish().lowest, lowest, "released: {release}");
        }
    }
}
