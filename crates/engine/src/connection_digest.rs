//! One connection's part of the digest (`analysis.rs`): its concurrency
//! rows and series bins, its time profile, its `stream_transactions` row
//! and its unanswered requests, from its request facts read back from the
//! spill in request order.
//!
//! The facts are never held all at once; they are read twice. Each sweep
//! turns requests into time points that it must visit in time order, and
//! knows, at each request, a time no later point can come before, from two
//! distances measured while the capture was read: how far a request's times
//! lie before its start (a request whose first segment was retransmitted,
//! `Facts::lateness`), and how far a frame's time falls behind an earlier
//! frame's (a clock step; a start is a frame's time, so starts in request
//! order fall behind no further). It sorts and visits the points before
//! that time now and then and keeps only the rest (see `in_order`). The
//! first reading gathers what the sweeps must know before they start (the
//! round-trip floors the time profile's half round trips come from, where
//! unanswered requests end, the SMB2 credit balance before the capture) and
//! the summary row; the second sweeps concurrency and time profile. Memory
//! is then what is outstanding (and the processing and response times kept
//! for exact medians, in the spill past 65,536, see `order_stats`) instead
//! of every fact of the connection: a capture of one long copy is one
//! connection with millions of requests. The order visited is a full
//! sort's, so the tables are those of sorting everything at the end (tests
//! below). The first reading checks that the starts keep within the
//! measured distance; should they not, the connection is digested with
//! nothing released early, and the sweeps' points wait in sorted runs in
//! the spill (an external sort, see `in_order`).

use crate::concurrency::{ConnConcurrency, ProtocolScan, ProtocolSweep, ScanResult, SeriesRow};
use crate::conversations::ConversationTable;
use crate::stream_summary::{StreamSummary, SummaryScan};
use crate::tcp::TcpAnalysis;
use crate::time_profile::{is_storage, outstanding_stats, ProfileSweep, TimeProfile};
use crate::tx_facts::{Facts, Names, TxFacts};

/// What the digest makes of one connection.
#[derive(Default)]
pub(crate) struct StreamDigest {
    pub concurrency: Vec<ConnConcurrency>,
    pub series: Vec<SeriesRow>,
    pub profile: Option<TimeProfile>,
    pub summary: Option<StreamSummary>,
    pub unanswered: Vec<TxFacts>,
}

/// What the digest reads besides the connection's facts.
pub(crate) struct Inputs<'a> {
    pub facts: &'a Facts,
    pub interval: i64,
    pub tcp: &'a TcpAnalysis,
    pub convs: &'a ConversationTable,
    /// The most a frame's time fell behind an earlier frame's.
    pub time_back: i64,
}

/// The digest of connection `key` (see [`Facts::stream_keys`]).
pub(crate) fn digest(key: (bool, u32), inputs: &Inputs<'_>) -> StreamDigest {
    digest_with(key, inputs, true, None)
}

/// [`digest`]; without `release`, every sweep keeps its points to the end
/// and sorts them all then (tests: the reference the releases must match);
/// `split` overrides [`SPLIT_SWEEPS`] (tests: both ways give one digest).
fn digest_with(
    key: (bool, u32),
    inputs: &Inputs<'_>,
    release: bool,
    split: Option<bool>,
) -> StreamDigest {
    let (udp, stream) = key;
    let facts = inputs.facts;
    if udp {
        // RPC over UDP: only its unanswered requests are listed.
        return StreamDigest {
            unanswered: facts.iter(key).filter(|t| t.reply().is_none()).collect(),
            ..Default::default()
        };
    }
    let order = release.then(|| Disorder {
        late: facts.lateness(key),
        back: inputs.time_back,
    });
    let split = split.unwrap_or(facts.count(key) >= SPLIT_SWEEPS);
    let scan_of = |facts_in_order: &mut dyn Iterator<Item = TxFacts>| {
        Scan::run(stream, facts_in_order, &facts.names, order)
    };
    // A long connection's first reading too is read (and decoded) on a
    // thread of its own, which hands the facts over in blocks.
    let scan = if split {
        read_beside(|| facts.iter(key), scan_of)
    } else {
        scan_of(&mut facts.iter(key))
    };
    if order.is_some_and(|o| scan.back > o.back) {
        // (Never, as starts are frames' times: a bug, and not a reason to
        // give wrong tables.)
        return digest_with(key, inputs, false, Some(split));
    }
    sweep(stream, scan, inputs, || facts.iter(key), order, split)
}

/// Facts handed from the thread that reads them to another, in blocks of
/// [`SHARED_BLOCK`] that go back to be refilled.
struct BlockSender {
    to: std::sync::mpsc::SyncSender<Vec<TxFacts>>,
    empties: std::sync::mpsc::Receiver<Vec<TxFacts>>,
    block: Vec<TxFacts>,
}

impl BlockSender {
    fn push(&mut self, t: TxFacts) {
        self.block.push(t);
        if self.block.len() == SHARED_BLOCK {
            let empty = self
                .empties
                .try_recv()
                .unwrap_or_else(|_| Vec::with_capacity(SHARED_BLOCK));
            // (The other side gone: it stopped early or panicked, and the
            // thread scope passes a panic on.)
            let _ = self.to.send(std::mem::replace(&mut self.block, empty));
        }
    }

    fn finish(mut self) {
        if !self.block.is_empty() {
            let _ = self.to.send(std::mem::take(&mut self.block));
        }
    }
}

/// The receiving side of [`BlockSender`]: the facts, in the order sent.
struct BlockReceiver {
    from: std::sync::mpsc::Receiver<Vec<TxFacts>>,
    refill: std::sync::mpsc::SyncSender<Vec<TxFacts>>,
    block: Vec<TxFacts>,
    next: usize,
}

impl Iterator for BlockReceiver {
    type Item = TxFacts;

    fn next(&mut self) -> Option<TxFacts> {
        while self.next == self.block.len() {
            let full = self.from.recv().ok()?;
            let mut done = std::mem::replace(&mut self.block, full);
            done.clear();
            let _ = self.refill.try_send(done);
            self.next = 0;
        }
        let t = self.block.get(self.next).copied();
        self.next += 1;
        t
    }
}

/// A block hand-over (see [`SHARED_BLOCKS`]).
fn hand_over() -> (BlockSender, BlockReceiver) {
    let (to, from) = std::sync::mpsc::sync_channel(SHARED_BLOCKS);
    let (refill, empties) = std::sync::mpsc::sync_channel(SHARED_BLOCKS + 2);
    (
        BlockSender {
            to,
            empties,
            block: Vec::with_capacity(SHARED_BLOCK),
        },
        BlockReceiver {
            from,
            refill,
            block: Vec::new(),
            next: 0,
        },
    )
}

/// `consume` over the facts `read` gives, read on a helper thread and
/// handed over in blocks (on this thread alone when no thread can be had).
fn read_beside<I, R>(
    read: impl Fn() -> I + Sync,
    consume: impl FnOnce(&mut dyn Iterator<Item = TxFacts>) -> R,
) -> R
where
    I: Iterator<Item = TxFacts>,
{
    std::thread::scope(|scope| {
        let (mut tx, mut rx) = hand_over();
        let read = &read;
        let reader = std::thread::Builder::new()
            .name("nastriage-digest".into())
            .spawn_scoped(scope, move || {
                read().for_each(|t| tx.push(t));
                tx.finish();
            });
        match reader {
            Ok(h) => {
                let r = consume(&mut rx);
                // (Its receiver dropped first, a reader still sending stops.)
                drop(rx);
                crate::driver::joined(h.join());
                r
            }
            Err(_) => consume(&mut read()),
        }
    })
}

/// From this many requests a connection's second reading feeds two
/// threads: its concurrency sweeps on one, its time profile on the other.
/// Below it, one thread does both (a thread costs more than it saves on a
/// small connection). A capture of one long copy is one connection, and its
/// digest, after the pass, would otherwise keep one core busy and leave the
/// other idle.
const SPLIT_SWEEPS: usize = 16_384;

/// Requests per block handed from the reading thread to the other, and
/// blocks that may wait (120 KB each; the blocks go back to be refilled,
/// so the hand-over allocates nothing after the first few). Fewer or
/// smaller blocks made the threads wait for each other: the digest of the
/// NFSv3 reads of 4 KiB took 0.08-0.09 s with two of 512 waiting, against
/// 0.06 s.
const SHARED_BLOCK: usize = 1024;
const SHARED_BLOCKS: usize = 4;

/// How far a connection's times stray from request order (ns).
#[derive(Debug, Clone, Copy, Default)]
struct Disorder {
    /// Most a request's time lies before its own start.
    late: i64,
    /// Most a start lies before an earlier request's start.
    back: i64,
}

/// How far starts fall behind the latest earlier start, in request order.
#[derive(Debug, Default)]
struct StartLag {
    latest: Option<i64>,
    most: i64,
}

impl StartLag {
    fn add(&mut self, start: i64) {
        let latest = self.latest.map_or(start, |l| l.max(start));
        self.most = self.most.max(latest.saturating_sub(start));
        self.latest = Some(latest);
    }
}

/// Where each request stands in its connection's order: before request
/// `i` (in request order) is added, no time of it or a later request lies
/// before `points()`, and no later start before `starts()`.
#[derive(Clone, Copy)]
struct Bounds {
    disorder: Option<Disorder>,
    latest: i64,
}

impl Bounds {
    fn new(disorder: Option<Disorder>) -> Self {
        Bounds {
            disorder,
            latest: i64::MIN,
        }
    }

    fn next(&mut self, t: &TxFacts) {
        self.latest = self.latest.max(t.req_first_ts);
    }

    fn points(&self) -> Option<i64> {
        let d = self.disorder?;
        Some(self.latest.saturating_sub(d.back).saturating_sub(d.late))
    }

    fn starts(&self) -> Option<i64> {
        let d = self.disorder?;
        Some(self.latest.saturating_sub(d.back))
    }
}

/// Per protocol of a connection, by the protocol's number: looked up for
/// every request (by name, a map's string comparisons were a tenth of the
/// first reading), handed over in order of names.
struct ByProtocol<T>(Vec<Option<(&'static str, T)>>);

impl<T> Default for ByProtocol<T> {
    fn default() -> Self {
        ByProtocol(Vec::new())
    }
}

impl<T> ByProtocol<T> {
    /// Request `t`'s protocol's, made by `new` (given the name) if absent.
    fn entry(&mut self, t: &TxFacts, names: &Names, new: impl FnOnce(&'static str) -> T) -> &mut T {
        let id = t.protocol_id();
        if id >= self.0.len() {
            self.0.resize_with(id + 1, || None);
        }
        let slot = &mut self.0[id];
        let (_, v) = slot.get_or_insert_with(|| {
            let p = names.protocol(t);
            (p, new(p))
        });
        v
    }

    fn get_mut(&mut self, t: &TxFacts) -> Option<&mut T> {
        self.0
            .get_mut(t.protocol_id())
            .and_then(|s| s.as_mut())
            .map(|(_, v)| v)
    }

    /// Each with its protocol's name, in order of names (as a map by name
    /// would give them).
    fn into_sorted(self) -> Vec<(&'static str, T)> {
        let mut v: Vec<(&'static str, T)> = self.0.into_iter().flatten().collect();
        v.sort_by_key(|(p, _)| *p);
        v
    }

    fn map<U>(self, mut f: impl FnMut(T) -> U) -> ByProtocol<U> {
        ByProtocol(
            self.0
                .into_iter()
                .map(|s| s.map(|(p, v)| (p, f(v))))
                .collect(),
        )
    }
}

/// The first reading of a connection's facts.
struct Scan {
    summary: StreamSummary,
    protocols: ByProtocol<ScanResult>,
    unanswered: Vec<TxFacts>,
    /// Earliest and latest time of any of the requests.
    bounds: (i64, i64),
    /// The most a start fell behind an earlier one.
    back: i64,
}

impl Scan {
    /// Read `facts` (in request order).
    fn run(
        stream: u32,
        facts: impl Iterator<Item = TxFacts>,
        names: &Names,
        order: Option<Disorder>,
    ) -> Self {
        let mut summary = SummaryScan::new(stream);
        let mut protocols: ByProtocol<ProtocolScan> = ByProtocol::default();
        let mut unanswered = Vec::new();
        let mut at = Bounds::new(order);
        let mut bounds: Option<(i64, i64)> = None;
        let mut lag = StartLag::default();
        for t in facts {
            at.next(&t);
            lag.add(t.req_first_ts);
            let lo = t.earliest();
            let hi = t.req_first_ts.max(t.req_last_ts);
            let hi = t.reply().map_or(hi, |r| hi.max(r.first_ts).max(r.last_ts));
            bounds = Some(bounds.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
            summary.add(&t, names, at.points());
            protocols
                .entry(&t, names, ProtocolScan::new)
                .add(&t, at.points());
            if t.reply().is_none() {
                unanswered.push(t);
            }
        }
        Scan {
            summary: summary.finish(),
            protocols: protocols.map(ProtocolScan::finish),
            unanswered,
            bounds: bounds.unwrap_or((0, 0)),
            back: lag.most,
        }
    }
}

/// One reading of a connection's facts (in request order): each request
/// with its number and where it stands ([`Bounds`]).
fn each_request(
    facts: impl Iterator<Item = TxFacts>,
    order: Option<Disorder>,
    visit: &mut dyn FnMut(u64, &TxFacts, &Bounds),
) {
    let mut at = Bounds::new(order);
    for (i, t) in facts.enumerate() {
        at.next(&t);
        visit(i as u64, &t, &at);
    }
}

/// The second reading: concurrency and time profile (`split`: each from a
/// reading of its own, on two threads). `read` gives the facts in request
/// order.
fn sweep<I: Iterator<Item = TxFacts>>(
    stream: u32,
    scan: Scan,
    inputs: &Inputs<'_>,
    read: impl Fn() -> I + Sync,
    order: Option<Disorder>,
    split: bool,
) -> StreamDigest {
    let names = &inputs.facts.names;
    let mut sweeps: ByProtocol<ProtocolSweep> = scan
        .protocols
        .map(|r| ProtocolSweep::new(stream, inputs.interval, r));
    let mut profile = ProfileSweep::new(
        stream,
        scan.bounds,
        scan.summary.floors,
        names,
        inputs.tcp,
        inputs.convs,
        order.map(|d| d.late),
    );
    let storage = |t: &TxFacts| is_storage(names.protocol(t));
    let each = |visit: &mut dyn FnMut(u64, &TxFacts, &Bounds)| each_request(read(), order, visit);
    let add_concurrency =
        |sweeps: &mut ByProtocol<ProtocolSweep>, i: u64, t: &TxFacts, at: &Bounds| {
            if let Some(sw) = sweeps.get_mut(t) {
                sw.add(i, t, at.points());
            }
        };
    let add_profile = |profile: &mut ProfileSweep, i: u64, t: &TxFacts, at: &Bounds| {
        if storage(t) {
            profile.add(i, t, at.starts());
        }
    };
    if split {
        // One reading for both: the helper reads the facts back (decoding
        // them was a third of each sweep's time), sweeps concurrency and
        // hands them on in blocks to this thread, which sweeps the time
        // profile, the longer of the two. (The sweeps behind a lock only so
        // that this thread can do both when no thread can be had.)
        let shared = std::sync::Mutex::new(std::mem::take(&mut sweeps));
        let (mut to_profile, blocks) = hand_over();
        let (shared_ref, each_ref, add_c) = (&shared, &each, &add_concurrency);
        let concurrency = move || {
            let mut sweeps = shared_ref.lock().unwrap_or_else(|e| e.into_inner());
            each_ref(&mut |i, t, at| {
                add_c(&mut sweeps, i, t, at);
                to_profile.push(*t);
            });
            to_profile.finish();
        };
        std::thread::scope(|scope| {
            let helper = std::thread::Builder::new()
                .name("nastriage-digest".into())
                .spawn_scoped(scope, concurrency);
            match helper {
                Ok(h) => {
                    each_request(blocks, order, &mut |i, t, at| {
                        add_profile(&mut profile, i, t, at);
                    });
                    crate::driver::joined(h.join());
                }
                // (No thread to be had: this one does both, from one
                // reading.)
                Err(_) => {
                    let mut sweeps = shared.lock().unwrap_or_else(|e| e.into_inner());
                    each(&mut |i, t, at| {
                        add_concurrency(&mut sweeps, i, t, at);
                        add_profile(&mut profile, i, t, at);
                    });
                }
            }
        });
        sweeps = shared.into_inner().unwrap_or_else(|e| e.into_inner());
    } else {
        each(&mut |i, t, at| {
            add_concurrency(&mut sweeps, i, t, at);
            add_profile(&mut profile, i, t, at);
        });
    }
    let mut d = StreamDigest {
        unanswered: scan.unanswered,
        ..Default::default()
    };
    for (_, sw) in sweeps.into_sorted() {
        sw.finish(&mut d.concurrency, &mut d.series);
    }
    // The last storage row, as the rules read them.
    let conc = d.concurrency.iter().rfind(|c| is_storage(c.protocol));
    d.profile = profile.finish(conc, || {
        let mut at = Bounds::new(order);
        outstanding_stats(read().filter_map(|t| {
            at.next(&t);
            (storage(&t) && t.reply().is_some()).then(|| (t, at.points()))
        }))
    });
    d.summary = Some(scan.summary);
    d
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::transactions::{PduSpan, Transaction};

    /// A pseudo-random connection of `n` NFS and SMB2 requests (some
    /// unanswered, some charging and granting SMB2 credits), starting at
    /// `start(i)`, added to facts in the order their replies come.
    fn connection(n: u64, start: impl Fn(u64) -> i64) -> Facts {
        let mut rand = crate::test_rng::xorshift_below(0x9e37_79b9_7f4a_7c15);
        let mut txs: Vec<(i64, Transaction)> = Vec::new();
        for i in 0..n {
            let first_ts = start(i);
            let smb = rand(3) == 0;
            // Some requests' first segment was retransmitted: their last
            // byte was seen before their first.
            let last_ts = if rand(30) == 0 {
                first_ts - rand(5_000_000) as i64
            } else {
                first_ts + rand(3) as i64 * 10_000
            };
            let srt = 20_000 + rand(2_000_000) as i64 + if rand(50) == 0 { 30_000_000 } else { 0 };
            let reply = (rand(40) != 0).then(|| PduSpan {
                first_frame: 3 * i + 2,
                first_ts: last_ts + srt,
                last_frame: 3 * i + 2,
                last_ts: last_ts + srt + rand(4) as i64 * 50_000,
                bytes: 200,
                complete: true,
            });
            let op = ["READ", "WRITE", "GETATTR", "LOOKUP"][rand(4) as usize];
            let t = Transaction {
                protocol: if smb { "smb2" } else { "nfs" },
                transport: "tcp",
                stream: 5,
                op: op.into(),
                id: if smb { i } else { i + 1 },
                request: PduSpan {
                    first_frame: 3 * i + 1,
                    first_ts,
                    last_frame: 3 * i + 1,
                    last_ts,
                    bytes: 300,
                    complete: true,
                },
                credit_charge: smb.then(|| rand(3) as u16),
                credit_grant: smb.then(|| rand(4) as u16),
                file_name: Some(format!("f{}", rand(30)).into()),
                count: Some(4096 << rand(5)),
                reply,
                ..Default::default()
            };
            // Emitted as the reply comes; unanswered ones at the end.
            let at = t.reply.map_or(i64::MAX, |r| r.last_ts);
            txs.push((at, t));
        }
        txs.sort_by_key(|(at, _)| *at);
        let mut f = Facts::default();
        for (seq, (_, t)) in txs.iter().enumerate() {
            f.add(t, seq as u64);
        }
        f
    }

    /// The digest of connection 5, swept as it comes (told that frame
    /// times fall back by `time_back`, or by as much as its starts do) and
    /// sorted at the end, each the same with its sweeps on one thread or
    /// two; and how far its times stray.
    fn both_ways(f: &Facts, time_back: Option<i64>) -> (String, String, Disorder) {
        let key = (false, 5);
        let mut lag = StartLag::default();
        f.iter(key).for_each(|t| lag.add(t.req_first_ts));
        let tcp = TcpAnalysis::default();
        let convs = ConversationTable::default();
        let inputs = Inputs {
            facts: f,
            interval: crate::concurrency::interval_for(f),
            tcp: &tcp,
            convs: &convs,
            time_back: time_back.unwrap_or(lag.most),
        };
        let show = |d: StreamDigest| {
            format!(
                "{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
                d.concurrency, d.series, d.profile, d.summary, d.unanswered
            )
        };
        let order = Disorder {
            late: f.lateness(key),
            back: lag.most,
        };
        // One reading for both sweeps, or one each on two threads: one
        // digest.
        let streamed = show(digest_with(key, &inputs, true, Some(false)));
        assert_eq!(show(digest_with(key, &inputs, true, Some(true))), streamed);
        let sorted = show(digest_with(key, &inputs, false, Some(true)));
        assert_eq!(show(digest_with(key, &inputs, false, Some(false))), sorted);
        (streamed, sorted, order)
    }

    /// Thousands of requests (many releases of every sweep), some whose
    /// first segment came late (times before their start): swept as they
    /// come back, the tables are those of sorting everything at the end.
    #[test]
    fn streamed_digest_equals_the_sorted_one() {
        // Up to 8 requests at a time, starts often equal.
        let f = connection(20_000, |i| (i / 3) as i64 * 150_000);
        let (streamed, sorted, order) = both_ways(&f, None);
        assert!(order.late > 0 && order.back == 0, "{order:?}");
        assert!(streamed.contains("smb2") && streamed.contains("nfs"));
        assert_eq!(streamed, sorted);
    }

    /// A clock step back within the capture: starts out of order too.
    #[test]
    fn times_out_of_order_give_the_sorted_tables() {
        let f = connection(9_000, |i| {
            let t = i as i64 * 100_000;
            if i % 3_000 >= 2_000 {
                t - 150_000_000
            } else {
                t
            }
        });
        let (streamed, sorted, order) = both_ways(&f, None);
        assert!(order.back > 0, "{order:?}");
        assert_eq!(streamed, sorted);
        // Told less than the starts show (never from a capture): the first
        // reading notices, and nothing is released early.
        let (streamed, sorted, _) = both_ways(&f, Some(0));
        assert_eq!(streamed, sorted);
    }
}
