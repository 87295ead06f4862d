//! What the derived tables (concurrency, time profile, unanswered requests)
//! read of each transaction, in about a hundred bytes (names are numbered,
//! options are flag bits) rather than as full [`Transaction`]s, kept by
//! connection and mostly set aside in a spill (see [`Facts`]).

use crate::interner::{FileNames, Interner};
use crate::spill::{ReadAhead, Span, Spill, TailBudget};
use crate::transactions::Transaction;

mod codec;

/// First and last byte times of a request or reply.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ends {
    pub first_ts: i64,
    pub last_ts: i64,
}

const HAS_REPLY: u16 = 1;
const TCP: u16 = 1 << 1;
const NEGOTIATE: u16 = 1 << 2;
const HAS_COUNT: u16 = 1 << 3;
const HAS_REPLY_COUNT: u16 = 1 << 4;
const HAS_SLOT: u16 = 1 << 5;
const HAS_HIGHEST_SLOT: u16 = 1 << 6;
const HAS_TARGET_SLOT: u16 = 1 << 7;
const HAS_CHARGE: u16 = 1 << 8;
const HAS_GRANT: u16 = 1 << 9;
const HAS_FILE: u16 = 1 << 10;

/// One transaction's facts (serde: a sweep may set them aside sorted, see
/// `in_order`; the store itself has a denser codec).
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub(crate) struct TxFacts {
    /// Emission number in the log (request order ties).
    seq: u64,
    req_last_frame: u64,
    pub req_first_ts: i64,
    pub req_last_ts: i64,
    pub req_first_frame: u64,
    pub req_bytes: u64,
    reply_first_ts: i64,
    reply_last_ts: i64,
    reply_bytes: u64,
    count: u64,
    reply_count: u64,
    pub stream: u32,
    /// Index into [`Names::ops`].
    pub op: u32,
    file: u32,
    slot: u32,
    highest_slot: u32,
    target_highest_slot: u32,
    credit_charge: u16,
    credit_grant: u16,
    flags: u16,
    /// Index into [`Names::protocols`].
    protocol: u8,
}

/// The names the facts refer to by number.
#[derive(Debug, Default)]
pub(crate) struct Names {
    protocols: Vec<&'static str>,
    /// Operation names, and whether each moves file data.
    pub ops: Interner,
    data_ops: Vec<bool>,
    pub files: FileNames,
}

impl Names {
    /// See [`crate::derived::Derived::relocate`].
    fn relocate(&mut self) {
        crate::heap::renew(&mut self.protocols);
        self.ops.relocate();
        crate::heap::renew(&mut self.data_ops);
        self.files.relocate();
    }

    fn protocol_id(&mut self, p: &'static str) -> u8 {
        match self.protocols.iter().position(|x| *x == p) {
            Some(i) => i as u8,
            None if self.protocols.len() < usize::from(u8::MAX) => {
                self.protocols.push(p);
                (self.protocols.len() - 1) as u8
            }
            // (Never: protocol names are a handful of constants.)
            None => u8::MAX,
        }
    }

    fn op_id(&mut self, op: &str) -> u32 {
        let n = self.ops.len();
        let i = self.ops.id(op);
        if self.ops.len() > n {
            self.data_ops.push(crate::time_profile::is_data_op(op));
        }
        i
    }

    pub fn protocol(&self, f: &TxFacts) -> &'static str {
        self.protocol_named(usize::from(f.protocol))
    }

    /// The name of protocol number `id` ("" for an unknown one).
    pub fn protocol_named(&self, id: usize) -> &'static str {
        self.protocols.get(id).copied().unwrap_or("")
    }

    pub fn is_data_op(&self, f: &TxFacts) -> bool {
        self.data_ops.get(f.op as usize).copied().unwrap_or(false)
    }
}

/// Facts per spilled block (about 16 KB in memory, a few KB encoded):
/// small, as every connection keeps one partly filled in memory (all of
/// them together bounded by a [`TailBudget`]: a capture may hold thousands
/// of connections of a few dozen requests each).
const BLOCK: usize = 128;

/// Request order of a fact ([`TxFacts::order`]).
type Order = (u64, u64, u64);

/// One connection's facts (or a UDP endpoint pair's, under stream 0): the
/// newest in memory, older ones in serialised blocks in the spill, each
/// block sorted in request order and listed with its first (smallest) key.
#[derive(Debug, Default)]
struct StreamFacts {
    tail: Vec<TxFacts>,
    blocks: Vec<(Order, Span)>,
    /// Facts in `blocks` (not all full: see [`TailBudget`]).
    spilled: usize,
    gathered: Gathered,
}

/// What a connection's digest must know before its sweeps start, gathered
/// as its facts come (none of it depends on their order), so that one
/// reading of the facts can serve both the first reading and the sweeps
/// (`connection_digest`): the same figures the first reading finds.
#[derive(Debug)]
pub(crate) struct Gathered {
    /// Earliest and latest time of any of the requests.
    bounds: Option<(i64, i64)>,
    /// Most any request's times lie before its own start
    /// ([`TxFacts::earliest`]).
    late: i64,
    /// Requests with a server time (ms, not negative), and the smallest.
    server: (usize, f64),
    /// Per protocol (its number), where its requests end: the latest reply,
    /// or request when unanswered.
    ends: smallvec::SmallVec<[(u8, i64); 2]>,
}

impl Default for Gathered {
    fn default() -> Self {
        Gathered {
            bounds: None,
            late: 0,
            server: (0, f64::INFINITY),
            ends: smallvec::SmallVec::new(),
        }
    }
}

impl Gathered {
    fn add(&mut self, t: &TxFacts) {
        let (lo, hi) = t.span();
        self.bounds = Some(
            self.bounds
                .map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))),
        );
        self.late = self.late.max(t.req_first_ts.saturating_sub(lo));
        if let Some(v) = t.server_ms() {
            self.server = (self.server.0 + 1, self.server.1.min(v));
        }
        let done = t.done();
        match self.ends.iter_mut().find(|(p, _)| *p == t.protocol) {
            Some((_, end)) => *end = (*end).max(done),
            None => self.ends.push((t.protocol, done)),
        }
    }

    /// Earliest and latest time of any of the requests ((0, 0) for none).
    pub fn bounds(&self) -> (i64, i64) {
        self.bounds.unwrap_or((0, 0))
    }

    /// The fastest server response (ms), as `RttFloors::server_ms` (none
    /// under 3 samples).
    pub fn server_floor(&self) -> Option<f64> {
        (self.server.0 >= 3).then_some(self.server.1)
    }

    /// Each protocol (its number) and where its requests end.
    pub fn ends(&self) -> impl Iterator<Item = (usize, i64)> + '_ {
        self.ends.iter().map(|&(p, end)| (usize::from(p), end))
    }
}

impl StreamFacts {
    fn len(&self) -> usize {
        self.spilled + self.tail.len()
    }

    /// The tail to the spill, sorted, so that a connection reads back as a
    /// merge of sorted blocks (see `FactsIter`); facts are added about in
    /// request order (as replies come), so the blocks barely overlap. Its
    /// memory goes too (an idle connection keeps none).
    fn set_aside(&mut self, spill: &mut Spill) {
        let mut tail = std::mem::take(&mut self.tail);
        tail.sort_unstable_by_key(TxFacts::order);
        if let Some(first) = tail.first() {
            self.blocks
                .push((first.order(), spill.put(codec::encode(&tail))));
            self.spilled += tail.len();
        }
    }
}

/// Every transaction's facts, by connection, and the names they use. The
/// tables read them one connection at a time ([`Facts::for_each_stream`]),
/// so only the newest few hundred of each connection stay in memory while
/// the pass runs, and one connection's at a time after it.
#[derive(Debug, Default)]
pub(crate) struct Facts {
    /// Keyed by (not TCP, stream): TCP connections first, in stream order.
    streams: foldhash::HashMap<(bool, u32), StreamFacts>,
    pub names: Names,
    spill: Spill,
    /// Facts in the connections' partly filled blocks.
    held: TailBudget,
    /// Earliest request and latest end (reply, or request when unanswered)
    /// over all facts.
    span: Option<(i64, i64)>,
}

impl Facts {
    /// See [`crate::derived::Derived::relocate`]. (The map of connections
    /// is one allocation: left where it is, as the srt builder's maps.)
    pub(crate) fn relocate(&mut self) {
        for s in self.streams.values_mut() {
            crate::heap::renew(&mut s.tail);
            crate::heap::renew(&mut s.blocks);
        }
        self.names.relocate();
        self.spill.relocate();
    }

    /// Add one transaction; `seq` is its emission number in the log.
    pub fn add(&mut self, t: &Transaction, seq: u64) {
        let fact = self.fact(t, seq);
        let end = fact.done();
        self.span = Some(match self.span {
            Some((lo, hi)) => (lo.min(fact.req_first_ts), hi.max(end)),
            None => (fact.req_first_ts, end),
        });
        let s = self.streams.entry((!fact.tcp(), fact.stream)).or_default();
        s.gathered.add(&fact);
        s.tail.push(fact);
        self.held.add();
        if s.tail.len() >= BLOCK {
            self.held.set_aside(s.tail.len());
            s.set_aside(&mut self.spill);
        }
        if self.held.exhausted() {
            for s in self.streams.values_mut() {
                s.set_aside(&mut self.spill);
            }
        }
    }

    fn fact(&mut self, t: &Transaction, seq: u64) -> TxFacts {
        let mut flags = 0u16;
        let mut set = |bit: u16, on: bool| {
            if on {
                flags |= bit;
            }
        };
        set(HAS_REPLY, t.reply.is_some());
        set(TCP, t.transport == "tcp");
        set(NEGOTIATE, t.id == 0);
        set(HAS_COUNT, t.count.is_some());
        set(HAS_REPLY_COUNT, t.reply_count.is_some());
        set(HAS_SLOT, t.slot.is_some());
        set(HAS_HIGHEST_SLOT, t.highest_slot.is_some());
        set(HAS_TARGET_SLOT, t.target_highest_slot.is_some());
        set(HAS_CHARGE, t.credit_charge.is_some());
        set(HAS_GRANT, t.credit_grant.is_some());
        let file = t.file_name.as_deref().filter(|f| !f.is_empty());
        set(HAS_FILE, file.is_some());
        let r = t.reply.unwrap_or_default();
        TxFacts {
            seq,
            req_last_frame: t.request.last_frame,
            req_first_ts: t.request.first_ts,
            req_last_ts: t.request.last_ts,
            req_first_frame: t.request.first_frame,
            req_bytes: t.request.bytes,
            reply_first_ts: r.first_ts,
            reply_last_ts: r.last_ts,
            reply_bytes: r.bytes,
            count: t.count.unwrap_or(0),
            reply_count: t.reply_count.unwrap_or(0),
            stream: t.stream,
            op: self.names.op_id(&t.op),
            file: file.map_or(0, |f| self.names.files.id(f)),
            slot: t.slot.unwrap_or(0),
            highest_slot: t.highest_slot.unwrap_or(0),
            target_highest_slot: t.target_highest_slot.unwrap_or(0),
            credit_charge: t.credit_charge.unwrap_or(0),
            credit_grant: t.credit_grant.unwrap_or(0),
            flags,
            protocol: self.names.protocol_id(t.protocol),
        }
    }

    /// Earliest request and latest end over all facts.
    pub fn span(&self) -> Option<(i64, i64)> {
        self.span
    }

    /// Each connection's facts in request order ([`TxFacts::order`]): TCP
    /// connections in stream order, then the UDP ones (`tcp` false).
    #[cfg(test)]
    pub fn for_each_stream(&self, mut f: impl FnMut(bool, u32, Vec<TxFacts>)) {
        for (key, _) in self.stream_keys() {
            f(!key.0, key.1, self.stream(key));
        }
    }

    /// The connections in the order [`Facts::for_each_stream`] visits them
    /// (TCP first, then by stream), each with its number of requests.
    pub fn stream_keys(&self) -> Vec<((bool, u32), usize)> {
        let mut keys: Vec<((bool, u32), usize)> =
            self.streams.iter().map(|(k, s)| (*k, s.len())).collect();
        keys.sort_unstable();
        keys
    }

    /// A connection's number of requests (0 for an unknown key).
    pub fn count(&self, key: (bool, u32)) -> usize {
        self.streams.get(&key).map_or(0, StreamFacts::len)
    }

    /// How far before its own start any of a connection's facts has a time
    /// (a request whose first segment was retransmitted saw its last byte
    /// first): 0 for an unknown key.
    pub fn lateness(&self, key: (bool, u32)) -> i64 {
        self.streams.get(&key).map_or(0, |s| s.gathered.late)
    }

    /// What was gathered of a connection's facts as they came (see
    /// [`Gathered`]); None for an unknown key.
    pub fn gathered(&self, key: (bool, u32)) -> Option<&Gathered> {
        self.streams.get(&key).map(|s| &s.gathered)
    }

    /// One connection's facts in request order (empty for an unknown key).
    #[cfg(test)]
    pub fn stream(&self, key: (bool, u32)) -> Vec<TxFacts> {
        self.iter(key).collect()
    }

    /// One connection's facts in request order, read from the spill as
    /// they are needed (empty for an unknown key). Several threads may read
    /// connections at once.
    pub fn iter(&self, key: (bool, u32)) -> FactsIter<'_> {
        let mut runs = Vec::new();
        if let Some(s) = self.streams.get(&key) {
            runs.reserve(s.blocks.len() + 1);
            runs.extend(s.blocks.iter().map(|&(first, b)| (first, Run::Spilled(b))));
            let mut tail = s.tail.clone();
            tail.sort_unstable_by_key(TxFacts::order);
            if let Some(first) = tail.first() {
                runs.push((first.order(), Run::Open(tail.into_iter())));
            }
        }
        // By first key, so that a run is opened only when its turn comes.
        runs.sort_unstable_by_key(|r| r.0);
        FactsIter {
            facts: self,
            runs,
            next_run: 0,
            open: std::collections::BinaryHeap::new(),
            heads: Vec::new(),
            free: Vec::new(),
            ahead: ReadAhead::default(),
        }
    }
}

/// A sorted run of one connection's facts: a block still in the spill, or
/// one being read.
#[derive(Debug)]
enum Run {
    Spilled(Span),
    Open(std::vec::IntoIter<TxFacts>),
}

/// [`Facts::iter`]: a merge of the connection's sorted runs that opens
/// (decompresses) a run only when its first key comes up and lets it go when
/// it is read out, so that only the runs that overlap the current position
/// are in memory: a few, as runs barely overlap (a request answered much
/// later keeps its run open until then).
pub(crate) struct FactsIter<'a> {
    facts: &'a Facts,
    /// Runs by first key; those before `next_run` were opened.
    runs: Vec<(Order, Run)>,
    next_run: usize,
    /// (key of the run's next fact, index into `heads`), smallest on top.
    open: std::collections::BinaryHeap<std::cmp::Reverse<(Order, usize)>>,
    /// Open runs: their next fact and the rest.
    heads: Vec<(TxFacts, std::vec::IntoIter<TxFacts>)>,
    /// Slots of `heads` whose run was read out, for the next run opened.
    free: Vec<usize>,
    /// The next blocks, read with the one opened.
    ahead: ReadAhead,
}

/// Blocks that the run opened is read with, at most (see [`ReadAhead`]).
const READ_WITH: usize = 64;

impl FactsIter<'_> {
    fn open_next(&mut self) {
        let run = std::mem::replace(
            &mut self.runs[self.next_run].1,
            Run::Open(Vec::new().into_iter()),
        );
        self.next_run += 1;
        let mut facts = match run {
            // The facts wrote these bytes themselves: a block that does not
            // read back is a bug, which must not drop requests.
            Run::Spilled(span) => {
                let next = self.runs[self.next_run..]
                    .iter()
                    .take(READ_WITH)
                    .filter_map(|r| match r.1 {
                        Run::Spilled(s) => Some(s),
                        Run::Open(_) => None,
                    });
                codec::decode(&self.ahead.get(&self.facts.spill, span, next))
                    .unwrap_or_else(|| {
                        panic!("a block of request facts does not read back (a bug)")
                    })
                    .into_iter()
            }
            Run::Open(it) => it,
        };
        if let Some(first) = facts.next() {
            let slot = match self.free.pop() {
                Some(i) => {
                    self.heads[i] = (first, facts);
                    i
                }
                None => {
                    self.heads.push((first, facts));
                    self.heads.len() - 1
                }
            };
            self.open.push(std::cmp::Reverse((first.order(), slot)));
        }
    }
}

impl Iterator for FactsIter<'_> {
    type Item = TxFacts;

    fn next(&mut self) -> Option<TxFacts> {
        // Open every run whose first key comes before the smallest open one.
        while let Some((first, _)) = self.runs.get(self.next_run) {
            match self.open.peek() {
                Some(std::cmp::Reverse((top, _))) if top < first => break,
                _ => self.open_next(),
            }
        }
        // The top run's next fact takes its place on top, sifted down once
        // (runs barely overlap: mostly it stays there), rather than popped
        // and pushed.
        let mut top = self.open.peek_mut()?;
        let std::cmp::Reverse((_, i)) = *top;
        let (head, rest) = &mut self.heads[i];
        let out = *head;
        match rest.next() {
            Some(next) => {
                *head = next;
                *top = std::cmp::Reverse((next.order(), i));
            }
            // Read out: its memory goes now, and its slot to the next run.
            None => {
                std::collections::binary_heap::PeekMut::pop(top);
                *rest = Vec::new().into_iter();
                self.free.push(i);
            }
        }
        Some(out)
    }
}

impl TxFacts {
    /// The number of its protocol ([`Names::protocol`] gives the name).
    pub fn protocol_id(&self) -> usize {
        usize::from(self.protocol)
    }

    /// Request order, as the log reads back: first frame, last frame,
    /// emission number.
    pub fn order(&self) -> (u64, u64, u64) {
        (self.req_first_frame, self.req_last_frame, self.seq)
    }

    fn has(&self, bit: u16) -> bool {
        self.flags & bit != 0
    }

    fn opt<T: Copy>(&self, bit: u16, v: T) -> Option<T> {
        self.has(bit).then_some(v)
    }

    pub fn tcp(&self) -> bool {
        self.has(TCP)
    }

    /// SMB2 NEGOTIATE (MessageId 0): the credit history starts there.
    pub fn negotiate(&self) -> bool {
        self.has(NEGOTIATE)
    }

    pub fn reply(&self) -> Option<Ends> {
        self.opt(
            HAS_REPLY,
            Ends {
                first_ts: self.reply_first_ts,
                last_ts: self.reply_last_ts,
            },
        )
    }

    pub fn reply_bytes(&self) -> Option<u64> {
        self.opt(HAS_REPLY, self.reply_bytes)
    }

    pub fn count(&self) -> Option<u64> {
        self.opt(HAS_COUNT, self.count)
    }

    pub fn reply_count(&self) -> Option<u64> {
        self.opt(HAS_REPLY_COUNT, self.reply_count)
    }

    pub fn slot(&self) -> Option<u32> {
        self.opt(HAS_SLOT, self.slot)
    }

    pub fn highest_slot(&self) -> Option<u32> {
        self.opt(HAS_HIGHEST_SLOT, self.highest_slot)
    }

    pub fn target_highest_slot(&self) -> Option<u32> {
        self.opt(HAS_TARGET_SLOT, self.target_highest_slot)
    }

    pub fn credit_charge(&self) -> Option<u16> {
        self.opt(HAS_CHARGE, self.credit_charge)
    }

    pub fn credit_grant(&self) -> Option<u16> {
        self.opt(HAS_GRANT, self.credit_grant)
    }

    pub fn file(&self) -> Option<u32> {
        self.opt(HAS_FILE, self.file)
    }

    /// The earliest and latest time of the request and its reply.
    pub fn span(&self) -> (i64, i64) {
        let hi = self.req_first_ts.max(self.req_last_ts);
        let hi = self
            .reply()
            .map_or(hi, |r| hi.max(r.first_ts).max(r.last_ts));
        (self.earliest(), hi)
    }

    /// When the request is done: its reply's last byte, or its own last
    /// byte when unanswered.
    pub fn done(&self) -> i64 {
        self.reply().map_or(self.req_last_ts, |r| r.last_ts)
    }

    /// The server's time (ms, first reply byte after the last request byte),
    /// when answered and not negative: what the fastest-response floor is
    /// the smallest of.
    pub fn server_ms(&self) -> Option<f64> {
        self.server_time_ns()
            .map(crate::time_profile::ms)
            .filter(|v| *v >= 0.0)
    }

    /// The earliest time of the request and its reply.
    pub fn earliest(&self) -> i64 {
        let rq = self.req_first_ts.min(self.req_last_ts);
        self.reply()
            .map_or(rq, |r| rq.min(r.first_ts).min(r.last_ts))
    }

    /// Service response time: last reply byte minus last request byte.
    pub fn srt_ns(&self) -> Option<i64> {
        self.reply().map(|r| r.last_ts - self.req_last_ts)
    }

    /// Last request byte to first reply byte.
    pub fn server_time_ns(&self) -> Option<i64> {
        self.reply().map(|r| r.first_ts - self.req_last_ts)
    }
}

/// `unanswered_requests`: the requests whose reply was not seen, in request
/// order (one row each: what a reset or a stalled server left hanging).
/// `rows` are those requests, in any order.
pub(crate) fn unanswered_table(mut rows: Vec<TxFacts>, facts: &Facts) -> arrow_array::RecordBatch {
    rows.sort_unstable_by_key(TxFacts::order);
    let mut k = crate::columns::Cols::default();
    k.u32("stream", rows.iter().map(|f| f.stream).collect());
    let transport = |f: &TxFacts| if f.tcp() { "tcp" } else { "udp" };
    k.str("transport", rows.iter().map(transport));
    k.str("protocol", rows.iter().map(|f| facts.names.protocol(f)));
    k.str("op", rows.iter().map(|f| facts.names.ops.name(f.op)));
    k.u64(
        "request_first_frame",
        rows.iter().map(|f| f.req_first_frame).collect(),
    );
    k.ts(
        "request_first_time",
        rows.iter().map(|f| f.req_first_ts).collect(),
    );
    k.finish("unanswered_requests")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transactions::PduSpan;

    #[test]
    fn facts_keep_what_the_tables_read() {
        let t = Transaction {
            protocol: "smb2",
            transport: "tcp",
            op: "Read".into(),
            id: 5,
            file_name: Some("a.bin".into()),
            count: Some(65536),
            credit_charge: Some(1),
            slot: None,
            request: PduSpan {
                first_ts: 10,
                last_ts: 20,
                first_frame: 3,
                bytes: 100,
                ..Default::default()
            },
            reply: Some(PduSpan {
                first_ts: 50,
                last_ts: 70,
                bytes: 65600,
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut f = Facts::default();
        f.add(&t, 0);
        f.add(
            &Transaction {
                protocol: "nfs",
                op: "GETATTR".into(),
                ..Default::default()
            },
            1,
        );
        let mut all = Vec::new();
        f.for_each_stream(|_, _, txs| all.extend(txs));
        let (a, b) = (&all[0], &all[1]);
        assert_eq!(f.names.protocol(a), "smb2");
        assert_eq!(f.names.protocol(b), "nfs");
        assert!(a.tcp() && !a.negotiate() && b.negotiate() && !b.tcp());
        assert!(f.names.is_data_op(a) && !f.names.is_data_op(b));
        assert_eq!((a.srt_ns(), a.server_time_ns()), (Some(50), Some(30)));
        assert_eq!(
            (a.count(), a.reply_count(), a.slot()),
            (Some(65536), None, None)
        );
        assert_eq!((a.credit_charge(), a.credit_grant()), (Some(1), None));
        assert_eq!(a.file().map(|i| f.names.files.name(i)), Some("a.bin"));
        assert!(b.reply().is_none() && b.file().is_none());
        assert!(std::mem::size_of::<TxFacts>() <= 128);
    }

    /// An NFS READ request on `stream`, sent at time `first` in one frame.
    fn read_request(transport: &'static str, stream: u32, first: u64, frame: u64) -> Transaction {
        Transaction {
            protocol: "nfs",
            transport,
            stream,
            op: "READ".into(),
            request: PduSpan {
                first_frame: frame,
                last_frame: frame,
                first_ts: first as i64,
                last_ts: first as i64,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// Request `i`'s time when replies come back out of order within ~10
    /// requests (so facts are added out of request order).
    fn shuffled(i: u64) -> u64 {
        i - i % 10 + (9 - i % 10)
    }

    /// Many requests on several connections, emitted out of order: each
    /// connection's facts come back whole (most of them from the spill), in
    /// request order, TCP connections in stream order and then UDP.
    #[test]
    fn connections_come_back_whole_and_in_request_order() {
        let mut f = Facts::default();
        let n = 5 * BLOCK as u64 + 7;
        let mut seq = 0;
        for i in 0..n {
            for (stream, transport) in [(4u32, "tcp"), (1, "tcp"), (0, "udp")] {
                let first = shuffled(i);
                let frame = first * 3 + u64::from(stream);
                f.add(&read_request(transport, stream, first, frame), seq);
                seq += 1;
            }
        }
        let mut seen = Vec::new();
        f.for_each_stream(|tcp, stream, txs| {
            assert_eq!(txs.len() as u64, n);
            assert!(txs.windows(2).all(|w| w[0].order() < w[1].order()));
            assert!(txs.iter().all(|t| t.stream == stream && t.tcp() == tcp));
            seen.push((tcp, stream));
        });
        assert_eq!(seen, [(true, 1), (true, 4), (false, 0)]);
        let last = (0..n).map(shuffled).max().unwrap_or(0);
        assert_eq!(f.span(), Some((0, last as i64)));
        let blocks: Vec<(usize, usize)> = f
            .streams
            .values()
            .map(|s| (s.blocks.len(), s.tail.len()))
            .collect();
        assert!(blocks.iter().all(|b| *b == (5, 7)), "{blocks:?}");
    }

    /// Facts copied by another thread after the pass (`Facts::relocate`)
    /// come back as before, from the spill and the partly filled blocks.
    #[test]
    fn relocated_facts_come_back_the_same() {
        let mut f = Facts::default();
        let mut seq = 0;
        for i in 0..(3 * BLOCK as u64 + 5) {
            for stream in [2u32, 0, 7] {
                let first = shuffled(i);
                f.add(
                    &read_request("tcp", stream, first, first * 10 + u64::from(stream)),
                    seq,
                );
                seq += 1;
            }
        }
        let read = |f: &Facts| {
            let mut out = Vec::new();
            f.for_each_stream(|tcp, stream, txs| out.push(format!("{tcp} {stream} {txs:?}")));
            (
                out,
                f.span(),
                f.names.ops.len(),
                f.names.ops.name(0).to_string(),
            )
        };
        let before = read(&f);
        std::thread::scope(|s| {
            s.spawn(|| f.relocate());
        });
        assert_eq!(read(&f), before);
    }

    /// Thousands of connections with a few dozen requests each (more than
    /// the bound in partly filled blocks together): what waits in memory
    /// stays within the bound, and each connection still comes back whole
    /// and in request order.
    #[test]
    fn partly_filled_blocks_of_many_connections_are_bounded() {
        let mut f = Facts::default();
        let (conns, per) = (700u32, 70u64);
        let mut seq = 0;
        let mut most = 0;
        for i in 0..per {
            for stream in 0..conns {
                let first = shuffled(i);
                let frame = first * 1000 + u64::from(stream);
                f.add(&read_request("tcp", stream, first, frame), seq);
                seq += 1;
                let held: usize = f.streams.values().map(|s| s.tail.len()).sum();
                assert_eq!(held, f.held.held());
                most = most.max(held);
            }
        }
        assert!(most <= TailBudget::MAX + 1, "{most} facts held");
        let mut seen = 0;
        f.for_each_stream(|_, stream, txs| {
            assert_eq!(txs.len() as u64, per);
            assert_eq!(f.count((false, stream)), per as usize);
            assert!(txs.windows(2).all(|w| w[0].order() < w[1].order()));
            assert!(txs.iter().all(|t| t.stream == stream));
            seen += 1;
        });
        assert_eq!(seen, conns);
    }
}
