//! One connection's part of the digest (`analysis.rs`): its concurrency
//! rows and series bins, its time profile, its `stream_transactions` row
//! and its unanswered requests, from its request facts read back from the
//! spill in request order.
//!
//! The facts are never held all at once; they are read once or twice. Each sweep
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
//! the summary row; the second sweeps concurrency and time profile. When
//! the pass gathered what the sweeps need ([`Before`]: no SMB2, round trips
//! from TCP), the first reading's row is made beside the sweeps, in one
//! reading. Memory
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
use crate::time_profile::{
    is_storage, outstanding_stats, side_rtts, tcp_side_rtts, ProfileSweep, Rtts, TimeProfile,
};
use crate::tx_facts::{Facts, Gathered, Names, TxFacts};

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
    digest_with(key, inputs, true, None, None, true)
}

/// [`digest`]; without `release`, every sweep keeps its points to the end
/// and sorts them all then (tests: the reference the releases must match);
/// `split` overrides [`SPLIT_SWEEPS`], `rtts` the round trips the time
/// profile takes, and without `fuse` the first reading is always a reading
/// of its own (tests: every way gives one digest).
fn digest_with(
    key: (bool, u32),
    inputs: &Inputs<'_>,
    release: bool,
    split: Option<bool>,
    rtts: Option<Rtts>,
    fuse: bool,
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
    let sweep_with = |before: Before, scan: Option<&mut ScanState<'_>>| {
        sweep(
            stream,
            before,
            inputs,
            || facts.iter(key),
            order,
            split,
            scan,
        )
    };
    let (mut d, scan) = match gathered_before(key, inputs, rtts).filter(|_| fuse) {
        // What the sweeps need first was gathered during the pass: one
        // reading of the facts serves the first reading and the sweeps.
        Some(before) => {
            let mut scan = ScanState::new(stream, &facts.names);
            let d = sweep_with(before, Some(&mut scan));
            (d, scan.finish())
        }
        None => {
            // A long connection's first reading too is read (and decoded)
            // on a thread of its own, which hands the facts over in blocks.
            let scan_of = |facts_in_order: &mut dyn Iterator<Item = TxFacts>| {
                Scan::run(stream, facts_in_order, &facts.names, order)
            };
            let mut scan = if split {
                read_beside(|| facts.iter(key), scan_of)
            } else {
                scan_of(&mut facts.iter(key))
            };
            let before = Before {
                rtts: rtts.unwrap_or_else(|| {
                    side_rtts(stream, scan.summary.floors, inputs.tcp, inputs.convs)
                }),
                protocols: std::mem::take(&mut scan.protocols),
                bounds: facts.gathered(key).map_or((0, 0), Gathered::bounds),
            };
            (sweep_with(before, None), scan)
        }
    };
    if order.is_some_and(|o| scan.back > o.back) {
        // (Never, as starts are frames' times: a bug, and not a reason to
        // give wrong tables.)
        return digest_with(key, inputs, false, Some(split), rtts, fuse);
    }
    d.unanswered = scan.unanswered;
    d.summary = Some(scan.summary);
    d
}

/// What the sweeps must know before they start: where each protocol's
/// requests end (and for SMB2 the credit balance), the span of the
/// requests' times, the round trips the time profile takes.
struct Before {
    protocols: ByProtocol<ScanResult>,
    bounds: (i64, i64),
    rtts: Rtts,
}

/// [`Before`] from what the pass gathered ([`Gathered`]), when that is all
/// of it: no SMB2 (its credit balance before the capture takes a sweep of
/// its own) and round trips from the TCP analysis (`rtts`, or none: then
/// the turnaround floor, which takes a sweep too, plays no part).
fn gathered_before(key: (bool, u32), inputs: &Inputs<'_>, rtts: Option<Rtts>) -> Option<Before> {
    let names = &inputs.facts.names;
    let g = inputs.facts.gathered(key)?;
    let mut protocols = ByProtocol::default();
    for (id, end) in g.ends() {
        let protocol = names.protocol_named(id);
        if protocol == "smb2" {
            return None;
        }
        protocols.insert(id, protocol, ScanResult::without_credits(protocol, end));
    }
    let rtts = match rtts {
        Some(r) => r,
        None => tcp_side_rtts(key.1, g.server_floor(), inputs.tcp, inputs.convs)?,
    };
    Some(Before {
        protocols,
        bounds: g.bounds(),
        rtts,
    })
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

    /// `v` for protocol number `id`, named `protocol`.
    fn insert(&mut self, id: usize, protocol: &'static str, v: T) {
        if id >= self.0.len() {
            self.0.resize_with(id + 1, || None);
        }
        self.0[id] = Some((protocol, v));
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
        let mut scan = ScanState::new(stream, names);
        let mut at = Bounds::new(order);
        for t in facts {
            at.next(&t);
            scan.add(&t, &at);
        }
        scan.finish()
    }
}

/// A [`Scan`] under way, fed the facts one at a time (by itself, or beside
/// the sweeps in one reading).
struct ScanState<'a> {
    names: &'a Names,
    summary: SummaryScan,
    protocols: ByProtocol<ProtocolScan>,
    unanswered: Vec<TxFacts>,
    lag: StartLag,
}

impl<'a> ScanState<'a> {
    fn new(stream: u32, names: &'a Names) -> Self {
        ScanState {
            names,
            summary: SummaryScan::new(stream),
            protocols: ByProtocol::default(),
            unanswered: Vec::new(),
            lag: StartLag::default(),
        }
    }

    /// The next request (in request order), `at` where it stands.
    fn add(&mut self, t: &TxFacts, at: &Bounds) {
        self.lag.add(t.req_first_ts);
        self.summary.add(t, self.names, at.points());
        self.protocols
            .entry(t, self.names, ProtocolScan::new)
            .add(t, at.points());
        if t.reply().is_none() {
            self.unanswered.push(*t);
        }
    }

    fn finish(self) -> Scan {
        Scan {
            summary: self.summary.finish(),
            protocols: self.protocols.map(ProtocolScan::finish),
            unanswered: self.unanswered,
            back: self.lag.most,
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
/// reading of its own, on two threads), and `scan` fed the same facts (the
/// first reading, when [`Before`] was known without it) beside the
/// concurrency sweeps. `read` gives the facts in request order. The digest
/// comes without its summary and unanswered requests (the scan's).
fn sweep<'a, 'b, I: Iterator<Item = TxFacts>>(
    stream: u32,
    before: Before,
    inputs: &Inputs<'a>,
    read: impl Fn() -> I + Sync,
    order: Option<Disorder>,
    split: bool,
    scan: Option<&mut ScanState<'b>>,
) -> StreamDigest {
    let names = &inputs.facts.names;
    let sweeps: ByProtocol<ProtocolSweep> = before
        .protocols
        .map(|r| ProtocolSweep::new(stream, inputs.interval, r));
    let mut profile = ProfileSweep::new(
        stream,
        before.bounds,
        before.rtts,
        names,
        order.map(|d| d.late),
    );
    let storage = |t: &TxFacts| is_storage(names.protocol(t));
    let each = |visit: &mut dyn FnMut(u64, &TxFacts, &Bounds)| each_request(read(), order, visit);
    // The concurrency sweeps, and the scan when it comes along.
    let mut first = (sweeps, scan);
    let add_first =
        |(sweeps, scan): &mut (ByProtocol<ProtocolSweep>, Option<&mut ScanState<'b>>),
         i: u64,
         t: &TxFacts,
         at: &Bounds| {
            if let Some(scan) = scan {
                scan.add(t, at);
            }
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
        // them was a third of each sweep's time), sweeps concurrency (and
        // scans) and hands them on in blocks to this thread, which sweeps
        // the time profile, the longer of the two. (The helper's part
        // behind a lock only so that this thread can do both when no
        // thread can be had.)
        let shared = std::sync::Mutex::new(first);
        let (mut to_profile, blocks) = hand_over();
        let (shared_ref, each_ref, add_f) = (&shared, &each, &add_first);
        let helper_part = move || {
            let mut first = shared_ref.lock().unwrap_or_else(|e| e.into_inner());
            each_ref(&mut |i, t, at| {
                add_f(&mut first, i, t, at);
                to_profile.push(*t);
            });
            to_profile.finish();
        };
        std::thread::scope(|scope| {
            let helper = std::thread::Builder::new()
                .name("nastriage-digest".into())
                .spawn_scoped(scope, helper_part);
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
                    let mut first = shared.lock().unwrap_or_else(|e| e.into_inner());
                    each(&mut |i, t, at| {
                        add_first(&mut first, i, t, at);
                        add_profile(&mut profile, i, t, at);
                    });
                }
            }
        });
        first = shared.into_inner().unwrap_or_else(|e| e.into_inner());
    } else {
        each(&mut |i, t, at| {
            add_first(&mut first, i, t, at);
            add_profile(&mut profile, i, t, at);
        });
    }
    let (sweeps, _) = first;
    let mut d = StreamDigest::default();
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
        connection_of(n, true, start)
    }

    /// [`connection`]; without `with_smb`, of NFS requests and some of
    /// another RPC program (MOUNT: not storage) instead of SMB2 ones.
    fn connection_of(n: u64, with_smb: bool, start: impl Fn(u64) -> i64) -> Facts {
        let mut rand = crate::test_rng::xorshift_below(0x9e37_79b9_7f4a_7c15);
        let mut txs: Vec<(i64, Transaction)> = Vec::new();
        for i in 0..n {
            let first_ts = start(i);
            let other = rand(3) == 0;
            let smb = with_smb && other;
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
                protocol: match (smb, other) {
                    (true, _) => "smb2",
                    (false, true) => "mount",
                    (false, false) => "nfs",
                },
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

    /// What a digest of `f` reads, with the TCP analysis and conversations
    /// given.
    fn inputs_of<'a>(
        f: &'a Facts,
        tcp: &'a TcpAnalysis,
        convs: &'a ConversationTable,
        time_back: i64,
    ) -> Inputs<'a> {
        Inputs {
            facts: f,
            interval: crate::concurrency::interval_for(f),
            tcp,
            convs,
            time_back,
        }
    }

    /// The digest of connection 5, swept as it comes (told that frame
    /// times fall back by `time_back`, or by as much as its starts do) and
    /// sorted at the end, each the same with its sweeps on one thread or
    /// two, and with its first reading apart or beside the sweeps
    /// (`rtts`: the time profile's round trips; without them the TCP
    /// analysis has none, and the first reading is always apart); and how
    /// far its times stray.
    fn both_ways(
        f: &Facts,
        time_back: Option<i64>,
        rtts: Option<Rtts>,
    ) -> (String, String, Disorder) {
        let key = (false, 5);
        let mut lag = StartLag::default();
        f.iter(key).for_each(|t| lag.add(t.req_first_ts));
        let tcp = TcpAnalysis::default();
        let convs = ConversationTable::default();
        let inputs = inputs_of(f, &tcp, &convs, time_back.unwrap_or(lag.most));
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
        let way = |release, split, fuse| {
            show(digest_with(key, &inputs, release, Some(split), rtts, fuse))
        };
        // One reading for both sweeps, or one each on two threads; the
        // first reading apart or beside them: one digest.
        let streamed = way(true, false, false);
        let sorted = way(false, true, false);
        for (split, fuse) in [(true, false), (false, true), (true, true)] {
            assert_eq!(
                way(true, split, fuse),
                streamed,
                "split {split}, fuse {fuse}"
            );
        }
        for (split, fuse) in [(false, false), (false, true), (true, true)] {
            assert_eq!(
                way(false, split, fuse),
                sorted,
                "split {split}, fuse {fuse}"
            );
        }
        (streamed, sorted, order)
    }

    /// Past a block of values each (read back from the spill, and then on
    /// two threads), the time profile's medians are those of the requests'
    /// times sorted.
    #[test]
    fn spilled_medians_are_the_sorted_ones() {
        let f = connection_of(150_000, false, |i| i as i64 * 40_000);
        let key = (false, 5);
        let (tcp, convs) = (TcpAnalysis::default(), ConversationTable::default());
        let inputs = inputs_of(&f, &tcp, &convs, 0);
        let srv_rtt = 0.4;
        let d = digest_with(key, &inputs, true, None, Some((0.2, srv_rtt, "tcp")), true);
        let p = d.profile.expect("answered storage requests");
        let ms = crate::time_profile::ms;
        let (mut proc, mut srts) = (Vec::new(), Vec::new());
        for t in f.iter(key).filter(|t| is_storage(f.names.protocol(t))) {
            if let Some(r) = t.reply() {
                proc.push((ms(r.first_ts - t.req_last_ts) - srv_rtt).max(0.0));
            }
            srts.extend(t.srt_ns().map(ms));
        }
        assert!(
            proc.len() > 1 << 16 && srts.len() > 1 << 16,
            "{}",
            proc.len()
        );
        proc.sort_by(f64::total_cmp);
        srts.sort_by(f64::total_cmp);
        let n = proc.len();
        let median = if n % 2 == 0 {
            (proc[n / 2 - 1] + proc[n / 2]) / 2.0
        } else {
            proc[n / 2]
        };
        assert_eq!(p.processing_median_ms, median);
        assert_eq!(p.processing_p90_ms, proc[(0.9 * (n - 1) as f64) as usize]);
        assert_eq!(p.response_median_ms, srts[srts.len() / 2]);
    }

    /// Thousands of requests (many releases of every sweep), some whose
    /// first segment came late (times before their start): swept as they
    /// come back, the tables are those of sorting everything at the end.
    #[test]
    fn streamed_digest_equals_the_sorted_one() {
        // Up to 8 requests at a time, starts often equal.
        let f = connection(20_000, |i| (i / 3) as i64 * 150_000);
        let (streamed, sorted, order) = both_ways(&f, None, None);
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
        let (streamed, sorted, order) = both_ways(&f, None, None);
        assert!(order.back > 0, "{order:?}");
        assert_eq!(streamed, sorted);
        // Told less than the starts show (never from a capture): the first
        // reading notices, and nothing is released early.
        let (streamed, sorted, _) = both_ways(&f, Some(0), None);
        assert_eq!(streamed, sorted);
    }

    /// Round trips as the TCP analysis would give them (ms).
    const RTTS: Rtts = (1.5, 0.2, "tcp_connections");

    /// What the pass gathers of a connection's facts is what its facts read
    /// back and its first reading find: the span of its times, how late
    /// its requests' times come, the fastest server response, where each
    /// protocol's requests end.
    #[test]
    fn gathered_facts_are_what_the_first_reading_finds() {
        for with_smb in [false, true] {
            let f = connection_of(5_000, with_smb, |i| (i / 3) as i64 * 150_000);
            let key = (false, 5);
            let scan = Scan::run(5, f.iter(key), &f.names, None);
            let Some(g) = f.gathered(key) else {
                panic!("connection 5 has facts");
            };
            let spans: Vec<(i64, i64)> = f.iter(key).map(|t| t.span()).collect();
            let lo = spans.iter().map(|s| s.0).min();
            let hi = spans.iter().map(|s| s.1).max();
            assert_eq!(Some(g.bounds()), lo.zip(hi));
            let late = f.iter(key).map(|t| t.req_first_ts - t.earliest()).max();
            assert_eq!(Some(f.lateness(key)), late);
            assert!(f.lateness(key) > 0);
            assert_eq!(g.server_floor(), scan.summary.floors.server_ms);
            assert!(g.server_floor().is_some());
            let ends: Vec<(&str, i64)> = g
                .ends()
                .map(|(id, end)| (f.names.protocol_named(id), end))
                .collect();
            assert_eq!(ends.len(), 2, "{ends:?}");
            for (p, result) in scan.protocols.into_sorted() {
                let Some(&(_, end)) = ends.iter().find(|(q, _)| *q == p) else {
                    panic!("{p} gathered");
                };
                if p != "smb2" {
                    assert_eq!(result, ScanResult::without_credits(p, end));
                }
            }
        }
        // A connection without facts gathers nothing.
        assert!(Facts::default().gathered((false, 5)).is_none());
    }

    /// One reading for the first reading and the sweeps only when what
    /// the sweeps need first was gathered: not with SMB2 (its credit
    /// balance), not without round trips from TCP (the turnaround floor).
    #[test]
    fn the_first_reading_joins_the_sweeps_only_when_it_can() {
        let tcp = TcpAnalysis::default();
        let convs = ConversationTable::default();
        for (with_smb, rtts, joins) in [
            (false, Some(RTTS), true),
            (false, None, false),
            (true, Some(RTTS), false),
        ] {
            let f = connection_of(500, with_smb, |i| i as i64 * 150_000);
            let inputs = inputs_of(&f, &tcp, &convs, 0);
            let before = gathered_before((false, 5), &inputs, rtts);
            assert_eq!(before.is_some(), joins, "smb {with_smb}, rtts {rtts:?}");
        }
    }

    /// NFS and another RPC program, with round trips from TCP: the first
    /// reading beside the sweeps gives the digest of reading apart, and of
    /// sorting everything at the end; in order or after a clock step.
    #[test]
    fn one_reading_for_all_gives_the_same_digest() {
        let f = connection_of(20_000, false, |i| (i / 3) as i64 * 150_000);
        let (streamed, sorted, _) = both_ways(&f, None, Some(RTTS));
        assert!(streamed.contains("mount") && streamed.contains("nfs"));
        assert!(!streamed.contains("smb2"));
        assert_eq!(streamed, sorted);
        let f = connection_of(9_000, false, |i| {
            let t = i as i64 * 100_000;
            if i % 3_000 >= 2_000 {
                t - 150_000_000
            } else {
                t
            }
        });
        let (streamed, sorted, order) = both_ways(&f, None, Some(RTTS));
        assert!(order.back > 0, "{order:?}");
        assert_eq!(streamed, sorted);
        let (streamed, sorted, _) = both_ways(&f, Some(0), Some(RTTS));
        assert_eq!(streamed, sorted);
    }
}
