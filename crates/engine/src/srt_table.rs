//! Service-response-time statistics over the transactions: the columns of
//! tshark's `-z rpc,srt` / `-z smb2,srt` tables (calls, min, max, avg, sum)
//! plus exact percentiles and a log2 latency histogram, per protocol,
//! version and operation — and the same broken down by client, by server, by
//! file or share, and (for failed requests) by error status.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::builder::{
    Float64Builder, ListBuilder, StringBuilder, UInt32Builder, UInt64Builder,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};

use crate::conversations::ConversationTable;
use crate::interner::FileNames;
use crate::spill::{Span, Spill, TailBudget};
use crate::transactions::Transaction;

/// Histogram buckets: bucket 0 holds SRT < 1 µs, bucket i (i ≥ 1) holds
/// [2^(i-1), 2^i) µs; the last bucket is open-ended (≥ ~67 s).
pub const HIST_BUCKETS: usize = 28;

fn bucket(srt_ns: i64) -> usize {
    let us = (srt_ns.max(0) / 1000) as u64;
    if us == 0 {
        0
    } else {
        ((64 - us.leading_zeros()) as usize).min(HIST_BUCKETS - 1)
    }
}

/// Linear-interpolated percentile of sorted values (as numpy's default).
#[cfg(test)]
fn percentile(sorted: &[i64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    percentile_of(sorted.len(), p, |r| sorted[r])
}

/// The ranks (0-based) [`percentile_of`] reads for `p` of `n` values.
fn percentile_ranks(n: usize, p: f64) -> (usize, usize, f64) {
    let rank = p / 100.0 * (n - 1) as f64;
    let lo = rank.floor() as usize;
    (lo, rank.ceil() as usize, rank - lo as f64)
}

/// [`percentile`] of `n` (> 0) values, given the value of each rank it reads.
fn percentile_of(n: usize, p: f64, at: impl Fn(usize) -> i64) -> f64 {
    let (lo, hi, frac) = percentile_ranks(n, p);
    at(lo) as f64 + (at(hi) - at(lo)) as f64 * frac
}

/// The percentiles of the table, in its columns' order.
const PERCENTILES: [f64; 5] = [50.0, 90.0, 99.0, 99.9, 95.0];

/// A group's response times in at most this many at once: more are not
/// sorted but selected by narrowing (`order_stats::select`), so that one
/// long copy's hundreds of thousands of READs do not make memory grow with
/// the capture.
const SORTED_MAX: usize = 1 << 16;

/// What the table says of a group's response times: count, min, max, sum,
/// the [`PERCENTILES`] and the histogram.
#[derive(Clone)]
struct SrtStats {
    n: usize,
    min: i64,
    max: i64,
    sum: i128,
    pct: [f64; 5],
    hist: [u64; HIST_BUCKETS],
}

impl SrtStats {
    /// Of the samples in `parts` (at most [`SORTED_MAX`] held at once);
    /// None without any. `buf` is reused from group to group.
    fn of(parts: &[&Samples], spill: &Spill, buf: &mut Vec<i64>) -> Option<Self> {
        let n: usize = parts.iter().map(|p| p.len()).sum();
        if n == 0 {
            return None;
        }
        // The parts' spilled blocks in the order they lie in the spill, next
        // ones read together: a group of many cells (an operation over
        // thousands of files) has as many partly filled blocks, which the
        // `TailBudget` set aside one after the other.
        let blocks = spill.joined(parts.iter().flat_map(|p| p.blocks.iter().copied()));
        let each = |f: &mut dyn FnMut(i64)| {
            for span in &blocks {
                let bytes = spill.get(*span);
                bytes
                    .chunks_exact(8)
                    .filter_map(|c| c.try_into().ok().map(i64::from_le_bytes))
                    .for_each(&mut *f);
            }
            parts.iter().for_each(|p| p.tail.iter().for_each(|&v| f(v)));
        };
        // One pass for what needs no order; the samples are kept for sorting
        // only when few enough.
        let sort = n <= SORTED_MAX;
        buf.clear();
        let (mut min, mut max, mut sum) = (i64::MAX, i64::MIN, 0i128);
        let mut hist = [0u64; HIST_BUCKETS];
        each(&mut |v| {
            (min, max, sum) = (min.min(v), max.max(v), sum + v as i128);
            hist[bucket(v)] += 1;
            if sort {
                buf.push(v);
            }
        });
        let pct = if sort {
            buf.sort_unstable();
            let sorted = &buf[..];
            PERCENTILES.map(|p| percentile_of(n, p, |r| sorted[r]))
        } else {
            let mut ranks: Vec<u64> = PERCENTILES
                .iter()
                .flat_map(|&p| {
                    let (lo, hi, _) = percentile_ranks(n, p);
                    [lo as u64, hi as u64]
                })
                .collect();
            ranks.sort_unstable();
            ranks.dedup();
            let each = |f: &mut dyn FnMut(u64)| each(&mut |v| f(order_key(v)));
            let range = (order_key(min), order_key(max));
            let keys = crate::order_stats::select(&ranks, range, SORTED_MAX, &each);
            let at = |r: usize| {
                let i = ranks.partition_point(|&x| x < r as u64);
                keys.get(i).map_or(0, |&k| from_order_key(k))
            };
            PERCENTILES.map(|p| percentile_of(n, p, at))
        };
        Some(SrtStats {
            n,
            min,
            max,
            sum,
            pct,
            hist,
        })
    }
}

/// `v`'s bits as an integer ordered as the values are.
fn order_key(v: i64) -> u64 {
    (v as u64) ^ 1 << 63
}

/// The value of an [`order_key`].
fn from_order_key(k: u64) -> i64 {
    (k ^ 1 << 63) as i64
}

/// Response times per spilled block (2 KB: a group fills one in memory;
/// all the partly filled ones together are bounded by a [`TailBudget`]:
/// a copy goes through thousands of files, each a group of the file
/// breakdown).
const SAMPLES_BLOCK: usize = 256;

/// A group's response times: the newest in memory, blocks in the spill
/// (exact percentiles need every one, but only at the end, and one group
/// at a time).
#[derive(Debug, Default, Clone)]
struct Samples {
    tail: Vec<i64>,
    /// (Most cells have one block, or none: inline.)
    blocks: smallvec::SmallVec<[Span; 1]>,
    count: usize,
}

impl Samples {
    /// Add a response time; true when it filled a block, which went to the
    /// spill.
    fn push(&mut self, ns: i64, spill: &mut Spill) -> bool {
        self.tail.push(ns);
        self.count += 1;
        if self.tail.len() >= SAMPLES_BLOCK {
            self.spill_tail(spill);
            self.tail.clear();
            return true;
        }
        false
    }

    /// The newest response times to the spill (they stay in the tail).
    fn spill_tail(&mut self, spill: &mut Spill) {
        if !self.tail.is_empty() {
            let bytes = self.tail.iter().flat_map(|v| v.to_le_bytes()).collect();
            self.blocks.push(spill.put(bytes));
        }
    }

    fn len(&self) -> usize {
        self.count
    }
}

/// A row's counts and cells: those of its cells, summed (and of the rows of
/// different connections whose endpoints name the same host:port).
#[derive(Debug, Default)]
struct Merged {
    calls: u64,
    errors: u64,
    unanswered: u64,
    cells: Vec<u32>,
}

type Key = (&'static str, &'static str, u32, String, u32, String);

/// One end of a transaction as recorded: resolved to "address:port" when
/// the table is built (the conversation table is complete only then).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct EndRef {
    stream: u32,
    tcp: bool,
    request_dir: u8,
    client: bool,
    /// The parser's own record of the endpoint (RPC over UDP).
    addr: Option<(std::net::IpAddr, u16)>,
}

impl EndRef {
    fn of(t: &Transaction, client: bool) -> Self {
        EndRef {
            stream: t.stream,
            tcp: t.transport == "tcp",
            request_dir: t.request_dir,
            client,
            addr: if client { t.client_addr } else { t.server_addr },
        }
    }

    fn name(&self, convs: &ConversationTable) -> String {
        match convs.get(self.stream).filter(|_| self.tcp) {
            Some(c) => {
                let (cl, sv) = if self.request_dir == 0 {
                    (c.a, c.b)
                } else {
                    (c.b, c.a)
                };
                let e = if self.client { cl } else { sv };
                match e.0 {
                    std::net::IpAddr::V6(a) => format!("[{a}]:{}", e.1),
                    std::net::IpAddr::V4(a) => format!("{a}:{}", e.1),
                }
            }
            // RPC over UDP: the parser recorded the endpoints itself.
            None => match self.addr {
                Some((std::net::IpAddr::V6(a), p)) => format!("[{a}]:{p}"),
                Some((a, p)) => format!("{a}:{p}"),
                None => format!("udp-flow-{}", self.stream),
            },
        }
    }
}

/// Breakdowns, in the order of the `breakdown` column's values.
const BREAKDOWNS: [&str; 5] = ["op", "client", "server", "file", "status"];

/// The number of a breakdown by its name (see [`SrtBuilder::table`]).
pub(crate) fn breakdown_number(name: &str) -> Option<u8> {
    BREAKDOWNS.iter().position(|b| *b == name).map(|i| i as u8)
}

/// A kind of request: protocol, version, operation (a numbered name) and
/// code.
type Kind = (&'static str, u32, u32, u32);

/// What decides a request's cell, each a number: its kind (in
/// [`SrtBuilder::kinds`]), client and server (in [`SrtBuilder::ends`]),
/// file or share (in [`SrtBuilder::files`], or [`NONE`]) and, for a failed
/// request, error status (a name, or [`NONE`]). Small and `Copy`, so adding
/// a transaction allocates nothing; names are resolved once, at the end.
type CellKey = [u32; 5];

/// No file, or no error status, in a [`CellKey`].
const NONE: u32 = u32::MAX;

/// The requests of one [`CellKey`]: their counts and response times. A
/// request's time is kept once, in its cell, and a row's (a group's) are
/// those of its cells: one client reading one file puts each READ in four
/// rows (operation, client, server, file) but in one cell, and the four
/// rows' statistics are computed once.
#[derive(Debug, Default, Clone)]
struct Cell {
    calls: u64,
    errors: u64,
    unanswered: u64,
    samples: Samples,
}

/// A row before endpoints of different connections are merged by name:
/// breakdown, kind, and key (a numbered name, endpoint or file; 0 for the
/// operation breakdown).
type GroupId = (u8, u32, u32);

/// The `srt` table, one transaction at a time (in any order).
///
/// Only the cells are kept during the pass, and the rows are made from
/// them at the end: with thousands of connections open at once, the client
/// and server rows of every connection and operation (57,868 rows and
/// their map with 8,640 connections) took 16 MB, kept through the pass.
#[derive(Debug, Default)]
pub(crate) struct SrtBuilder {
    kinds: Vec<Kind>,
    kind_ids: foldhash::HashMap<Kind, u32>,
    names: crate::interner::Interner,
    ends: Vec<EndRef>,
    end_ids: foldhash::HashMap<EndRef, u32>,
    /// Keys of the file breakdown (bounded).
    pub(crate) files: FileNames,
    /// The cells in order of creation, and their numbers by key.
    cells: Vec<(CellKey, Cell)>,
    cell_ids: foldhash::HashMap<CellKey, u32>,
    spill: Spill,
    /// Response times in the cells' partly filled blocks.
    held: TailBudget,
    /// The cells of the last few kinds of request (see [`Recent`]).
    recent: Vec<Recent>,
    /// The entry of `recent` to replace next.
    recent_next: usize,
}

/// Kinds of request remembered with their cells. A copy alternates a few
/// (READ and WRITE of one file, between one client and one server), and a
/// request matching one of them skips the hash lookups of its names,
/// endpoints and cell.
const RECENT: usize = 4;

/// What decides a request's cell, and that cell.
#[derive(Debug)]
struct Recent {
    protocol: &'static str,
    version: u32,
    op_code: u32,
    op: crate::transactions::Name,
    client: EndRef,
    server: EndRef,
    file: Option<String>,
    /// The error status's name for failed requests.
    status: Option<String>,
    /// Looking the file up counted it under [`crate::interner::OTHER_FILES`]
    /// (the bound was reached before its name was seen), as each repeat of
    /// the lookup would.
    folded: bool,
    /// Its number (in `cells`).
    cell: u32,
}

impl Recent {
    fn matches(&self, t: &Transaction, file: Option<&str>, status: Option<&str>) -> bool {
        self.op_code == t.op_code
            && self.version == t.version
            && self.protocol == t.protocol
            && self.client == EndRef::of(t, true)
            && self.server == EndRef::of(t, false)
            && self.op == t.op
            && self.file.as_deref() == file
            && self.status.as_deref() == status
    }
}

impl SrtBuilder {
    /// See [`crate::derived::Derived::relocate`]. (The maps by key, one
    /// allocation each of plain values, are left where they are: with
    /// 8,640 connections, copying them too gave back 2 MB more for 13 ms.)
    pub(crate) fn relocate(&mut self) {
        self.names.relocate();
        crate::heap::renew(&mut self.ends);
        self.files.relocate();
        crate::heap::renew(&mut self.cells);
        self.spill.relocate();
        // (The few kinds of request remembered are not needed any more.)
        self.recent = Vec::new();
    }

    fn id(&mut self, s: &str) -> u32 {
        self.names.id(s)
    }

    fn end_id(&mut self, e: EndRef) -> u32 {
        let n = self.ends.len() as u32;
        *self.end_ids.entry(e).or_insert_with(|| {
            self.ends.push(e);
            n
        })
    }

    fn kind_id(&mut self, k: Kind) -> u32 {
        let n = self.kinds.len() as u32;
        *self.kind_ids.entry(k).or_insert_with(|| {
            self.kinds.push(k);
            n
        })
    }

    pub(crate) fn add(&mut self, t: &Transaction) {
        let failed = crate::transaction_table::failed(t);
        // Errors by status: the reply's status name (or the RPC-level
        // failure), for requests that did not succeed.
        let status = failed.then(|| {
            t.rpc_status
                .as_deref()
                .or(t.status_name.as_deref())
                .map(str::to_string)
                .or_else(|| t.status.map(|s| format!("0x{s:08x}")))
                .unwrap_or_default()
        });
        let file = t.file_name.as_deref().or(t.share.as_deref());
        let file = file.filter(|f| !f.is_empty());
        let hit = self
            .recent
            .iter()
            .find(|r| r.matches(t, file, status.as_deref()))
            .map(|r| (r.cell, r.folded));
        let cell = match hit {
            Some((cell, folded)) => {
                self.files.folded += u64::from(folded);
                cell
            }
            None => self.cell_of(t, file, status),
        };
        let srt = t.srt_ns();
        let Some((_, c)) = self.cells.get_mut(cell as usize) else {
            return;
        };
        c.calls += 1;
        c.unanswered += u64::from(srt.is_none());
        c.errors += u64::from(failed);
        if let Some(s) = srt {
            self.held.add();
            if c.samples.push(s, &mut self.spill) {
                self.held.set_aside(SAMPLES_BLOCK);
            }
        }
        if self.held.exhausted() {
            for (_, c) in &mut self.cells {
                c.samples.spill_tail(&mut self.spill);
                c.samples.tail = Vec::new();
            }
        }
    }

    /// The cell of a request not among the recent kinds, made at its first
    /// request; the request's kind then joins the recent ones.
    fn cell_of(&mut self, t: &Transaction, file: Option<&str>, status: Option<String>) -> u32 {
        let empty = self.id("");
        let status_id = self.id(status.as_deref().unwrap_or(""));
        let client = self.end_id(EndRef::of(t, true));
        let server = self.end_id(EndRef::of(t, false));
        let folded_before = self.files.folded;
        let file_id = file.map(|f| self.files.id(f));
        let folded = self.files.folded != folded_before;
        let op = self.id(&t.op);
        let kind = self.kind_id((t.protocol, t.version, op, t.op_code));
        // The file and status breakdowns only for requests that have one.
        let key = [
            kind,
            client,
            server,
            file_id.unwrap_or(NONE),
            if status_id != empty { status_id } else { NONE },
        ];
        let n = self.cells.len() as u32;
        let cell = *self.cell_ids.entry(key).or_insert_with(|| {
            self.cells.push((key, Cell::default()));
            n
        });
        let r = Recent {
            protocol: t.protocol,
            version: t.version,
            op_code: t.op_code,
            op: t.op.clone(),
            client: EndRef::of(t, true),
            server: EndRef::of(t, false),
            file: file.map(str::to_string),
            status,
            folded,
            cell,
        };
        if self.recent.len() < RECENT {
            self.recent.push(r);
        } else if let Some(old) = self.recent.get_mut(self.recent_next) {
            *old = r;
            self.recent_next = (self.recent_next + 1) % RECENT;
        }
        cell
    }

    /// The rows of the cells before endpoints are merged by name: each
    /// cell counts in the row of its kind, client, server, and file and
    /// error status if it has them (of breakdown `only`'s rows alone, if
    /// given).
    fn groups(&self, only: Option<u8>) -> Vec<(GroupId, Merged)> {
        let mut groups: Vec<(GroupId, Merged)> = Vec::new();
        let mut ids: foldhash::HashMap<GroupId, usize> = Default::default();
        for (cell, (key, c)) in self.cells.iter().enumerate() {
            let [kind, client, server, file, status] = *key;
            let keys = [
                Some(0),
                Some(client),
                Some(server),
                Some(file),
                Some(status),
            ];
            for (by, k) in keys.into_iter().enumerate() {
                let Some(k) = k.filter(|&k| k != NONE) else {
                    continue;
                };
                if only.is_some_and(|o| usize::from(o) != by) {
                    continue;
                }
                let id = (by as u8, kind, k);
                let i = *ids.entry(id).or_insert_with(|| {
                    groups.push((id, Merged::default()));
                    groups.len() - 1
                });
                if let Some((_, g)) = groups.get_mut(i) {
                    g.calls += c.calls;
                    g.errors += c.errors;
                    g.unanswered += c.unanswered;
                    g.cells.push(cell as u32);
                }
            }
        }
        groups
    }

    /// The statistics of the response times of `cells`.
    fn stats(&self, cells: &[u32], buf: &mut Vec<i64>) -> Option<SrtStats> {
        let parts: Vec<&Samples> = cells
            .iter()
            .filter_map(|&c| self.cells.get(c as usize).map(|(_, c)| &c.samples))
            .collect();
        SrtStats::of(&parts, &self.spill, buf)
    }

    /// The table (the rows of breakdown `only` alone, if given). The
    /// builder is kept: the table is made when asked for, and a summary
    /// asks for the operations' rows alone.
    pub(crate) fn table(&self, convs: &ConversationTable, only: Option<u8>) -> RecordBatch {
        let name = |i: u32| self.names.name(i).to_string();
        let end_names: Vec<String> = self.ends.iter().map(|e| e.name(convs)).collect();
        let mut groups: BTreeMap<Key, Merged> = BTreeMap::new();
        for ((by, kind, key), g) in self.groups(only) {
            let Some(&(p, v, op, code)) = self.kinds.get(kind as usize) else {
                continue;
            };
            let key = match by {
                0 => String::new(),
                1 | 2 => end_names.get(key as usize).cloned().unwrap_or_default(),
                3 => self.files.name(key).to_string(),
                _ => name(key),
            };
            // Endpoints of different connections may name the same host:port.
            let slot = groups
                .entry((BREAKDOWNS[usize::from(by)], p, v, name(op), code, key))
                .or_default();
            slot.calls += g.calls;
            slot.errors += g.errors;
            slot.unanswered += g.unanswered;
            slot.cells.extend(g.cells);
        }
        let n = groups.len();
        let mut by = StringBuilder::with_capacity(n, n * 6);
        let mut key = StringBuilder::with_capacity(n, n * 16);
        let mut proto = StringBuilder::with_capacity(n, n * 4);
        let mut version = UInt32Builder::with_capacity(n);
        let mut op = StringBuilder::with_capacity(n, n * 8);
        let mut code = UInt32Builder::with_capacity(n);
        let mut calls = UInt64Builder::with_capacity(n);
        let mut answered = UInt64Builder::with_capacity(n);
        let mut unanswered = UInt64Builder::with_capacity(n);
        let mut errors = UInt64Builder::with_capacity(n);
        let mut f64s: Vec<Float64Builder> =
            (0..9).map(|_| Float64Builder::with_capacity(n)).collect();
        // (Sized exactly: a capture of many files has thousands of groups, and the
        // table is kept as long as the analysis.)
        let mut hist =
            ListBuilder::with_capacity(UInt64Builder::with_capacity(n * HIST_BUCKETS), n);
        let mut buf: Vec<i64> = Vec::new();
        // Rows of the same cells (the breakdowns of one client reading one
        // file) have the same statistics: computed once. Most rows have one
        // cell, found by its number (boxed: a pointer a cell until then);
        // the others by their list.
        let mut one_cell: Vec<Option<Box<Option<SrtStats>>>> = vec![None; self.cells.len()];
        let mut by_cells: foldhash::HashMap<Vec<u32>, Option<SrtStats>> = Default::default();
        for ((b, p, v, o, c, k), mut g) in groups {
            let stats = match g.cells[..] {
                [cell] => match one_cell.get_mut(cell as usize) {
                    Some(Some(s)) => (**s).clone(),
                    Some(slot) => (**slot.insert(Box::new(self.stats(&g.cells, &mut buf)))).clone(),
                    None => None,
                },
                _ => {
                    g.cells.sort_unstable();
                    match by_cells.get(&g.cells) {
                        Some(s) => s.clone(),
                        None => {
                            let s = self.stats(&g.cells, &mut buf);
                            by_cells.insert(g.cells, s.clone());
                            s
                        }
                    }
                }
            };
            by.append_value(b);
            key.append_value(k);
            proto.append_value(p);
            version.append_value(v);
            op.append_value(o);
            code.append_value(c);
            calls.append_value(g.calls);
            answered.append_value(stats.as_ref().map_or(0, |s| s.n as u64));
            unanswered.append_value(g.unanswered);
            errors.append_value(g.errors);
            let ms = |x: f64| x / 1e6;
            let vals: [Option<f64>; 9] = match &stats {
                None => [None; 9],
                Some(s) => [
                    Some(ms(s.min as f64)),
                    Some(ms(s.max as f64)),
                    Some(ms(s.sum as f64 / s.n as f64)),
                    Some(ms(s.sum as f64)),
                    Some(ms(s.pct[0])),
                    Some(ms(s.pct[1])),
                    Some(ms(s.pct[2])),
                    Some(ms(s.pct[3])),
                    Some(ms(s.pct[4])),
                ],
            };
            for (b, v) in f64s.iter_mut().zip(vals) {
                b.append_option(v);
            }
            let h = stats.map_or([0u64; HIST_BUCKETS], |s| s.hist);
            hist.values().append_slice(&h);
            hist.append(true);
        }
        let mut fields = vec![
            Field::new("breakdown", DataType::Utf8, false),
            Field::new("key", DataType::Utf8, false),
            Field::new("protocol", DataType::Utf8, false),
            Field::new("version", DataType::UInt32, false),
            Field::new("op", DataType::Utf8, false),
            Field::new("code", DataType::UInt32, false),
            Field::new("calls", DataType::UInt64, false),
            Field::new("answered", DataType::UInt64, false),
            Field::new("unanswered", DataType::UInt64, false),
            Field::new("errors", DataType::UInt64, false),
        ];
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(by.finish()),
            Arc::new(key.finish()),
            Arc::new(proto.finish()),
            Arc::new(version.finish()),
            Arc::new(op.finish()),
            Arc::new(code.finish()),
            Arc::new(calls.finish()),
            Arc::new(answered.finish()),
            Arc::new(unanswered.finish()),
            Arc::new(errors.finish()),
        ];
        let names = [
            "min_ms", "max_ms", "avg_ms", "sum_ms", "p50_ms", "p90_ms", "p99_ms", "p99_9_ms",
            "p95_ms",
        ];
        for (name, mut b) in names.iter().zip(f64s) {
            fields.push(Field::new(*name, DataType::Float64, true));
            cols.push(Arc::new(b.finish()));
        }
        let h = hist.finish();
        fields.push(Field::new(
            "histogram_log2_us",
            h.data_type().clone(),
            false,
        ));
        cols.push(Arc::new(h));
        RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
            .expect("srt columns match their schema")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_and_percentiles() {
        assert_eq!(bucket(500), 0);
        assert_eq!(bucket(1_000), 1);
        assert_eq!(bucket(1_999), 1);
        assert_eq!(bucket(2_000), 2);
        assert_eq!(bucket(i64::MAX), HIST_BUCKETS - 1);
        let v = [1, 2, 3, 4, 5];
        assert_eq!(percentile(&v, 50.0), 3.0);
        assert_eq!(percentile(&v, 100.0), 5.0);
        assert_eq!(percentile(&v, 90.0), 4.6);
    }

    /// A walk over more distinct files than the bound keeps the first
    /// ones as keys and counts the rest under one "(other files)" key; the
    /// per-operation rows still count every request.
    #[test]
    fn file_keys_are_bounded() {
        use crate::interner::{MAX_FILE_NAMES, OTHER_FILES};
        use arrow_array::{StringArray, UInt64Array};
        let lookup = |name: String| Transaction {
            protocol: "nfs",
            transport: "tcp",
            version: 3,
            op: "LOOKUP".into(),
            file_name: Some(name.into()),
            ..Default::default()
        };
        let mut b = SrtBuilder::default();
        let n = 2 * MAX_FILE_NAMES;
        for i in 0..n {
            // Every name twice: a kept name seen again stays its own key.
            b.add(&lookup(format!("f{}", i / 2)));
        }
        assert_eq!(b.files.len(), MAX_FILE_NAMES);
        // Names 0 .. MAX-1 (two requests each) are all kept.
        assert_eq!(b.files.folded, 0);
        for i in 0..300 {
            b.add(&lookup(format!("g{i}")));
        }
        assert_eq!(b.files.folded, 300);
        // A folded name repeated (the recent kinds' path) counts each time.
        for _ in 0..5 {
            b.add(&lookup("g7".into()));
        }
        assert_eq!(b.files.folded, 305);
        let table = b.table(&ConversationTable::default(), None);
        let by = table.column_by_name("breakdown").expect("breakdown");
        let by = by.as_any().downcast_ref::<StringArray>().expect("strings");
        let key = table.column_by_name("key").expect("key");
        let key = key.as_any().downcast_ref::<StringArray>().expect("strings");
        let calls = table.column_by_name("calls").expect("calls");
        let calls = calls.as_any().downcast_ref::<UInt64Array>().expect("u64");
        let (mut files, mut other, mut op_calls) = (0, 0, 0);
        for row in 0..table.num_rows() {
            match (by.value(row), key.value(row)) {
                ("file", OTHER_FILES) => other = calls.value(row),
                ("file", _) => files += 1,
                ("op", _) => op_calls += calls.value(row),
                _ => {}
            }
        }
        assert_eq!((files, other), (MAX_FILE_NAMES, 305));
        assert_eq!(op_calls, n as u64 + 305);
    }

    /// Answered NFSv3 request `i` (requests a millisecond apart).
    fn answered_request(i: i64, op: &'static str, file: Option<String>, srt: i64) -> Transaction {
        use crate::transactions::PduSpan;
        Transaction {
            protocol: "nfs",
            transport: "tcp",
            version: 3,
            op: op.into(),
            file_name: file.map(Into::into),
            request: PduSpan {
                last_ts: i * 1_000_000,
                ..Default::default()
            },
            reply: Some(PduSpan {
                last_ts: i * 1_000_000 + srt,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// A column of `table`, as its array type.
    fn column<A: Array + Clone + 'static>(table: &RecordBatch, name: &str) -> A {
        table
            .column_by_name(name)
            .and_then(|c| c.as_any().downcast_ref::<A>().cloned())
            .expect(name)
    }

    /// The statistics of `count` requests spread over three operations
    /// (response times with repeats) are the sorted samples' exactly.
    fn check_exact_statistics(count: i64) {
        use arrow_array::{Float64Array, ListArray, StringArray, UInt64Array};
        let mut b = SrtBuilder::default();
        let mut by_op: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        for i in 0..count {
            let op = ["READ", "WRITE", "GETATTR"][(i % 3) as usize];
            let srt = (i * 7919) % 100_000 + 1_000 + (i % 5 == 0) as i64 * (i % 7) * 1_000_000;
            by_op.entry(op.to_string()).or_default().push(srt);
            b.add(&answered_request(i, op, None, srt));
        }
        // Most samples went to the spill.
        assert!(b.cells.iter().all(|(_, c)| c.samples.blocks.len() >= 3));
        let table = b.table(&ConversationTable::default(), None);
        let by: StringArray = column(&table, "breakdown");
        let op: StringArray = column(&table, "op");
        let answered: UInt64Array = column(&table, "answered");
        let hist: ListArray = column(&table, "histogram_log2_us");
        let f64s = |name: &str| column::<Float64Array>(&table, name);
        let mut seen = 0;
        for row in 0..table.num_rows() {
            if by.value(row) != "op" {
                continue;
            }
            let mut want = by_op[op.value(row)].clone();
            want.sort_unstable();
            let n = want.len();
            assert_eq!(answered.value(row), n as u64);
            let ms = |x: f64| x / 1e6;
            let exact = [
                ("min_ms", ms(want[0] as f64)),
                ("max_ms", ms(want[n - 1] as f64)),
                ("p50_ms", ms(percentile(&want, 50.0))),
                ("p90_ms", ms(percentile(&want, 90.0))),
                ("p99_ms", ms(percentile(&want, 99.0))),
                ("p99_9_ms", ms(percentile(&want, 99.9))),
                ("p95_ms", ms(percentile(&want, 95.0))),
            ];
            for (name, v) in exact {
                assert_eq!(f64s(name).value(row), v, "{name} of {n}");
            }
            let mean = want.iter().sum::<i64>() as f64 / n as f64;
            assert!((f64s("avg_ms").value(row) - mean / 1e6).abs() < 1e-12);
            let mut h = vec![0u64; HIST_BUCKETS];
            want.iter().for_each(|s| h[bucket(*s)] += 1);
            let got = hist.value(row);
            let got = got.as_any().downcast_ref::<UInt64Array>().expect("u64");
            assert_eq!(got.values().to_vec(), h);
            seen += 1;
        }
        assert_eq!(seen, 3);
    }

    /// Groups of thousands of requests (most response times in the spill)
    /// give the same statistics as their samples taken at once.
    #[test]
    fn spilled_samples_give_exact_statistics() {
        check_exact_statistics(9 * SAMPLES_BLOCK as i64 + 17);
    }

    /// Groups of more samples than are sorted at once: selected, with the
    /// same results.
    #[test]
    fn large_groups_give_exact_statistics() {
        check_exact_statistics(3 * SORTED_MAX as i64 + 3 * 1000 + 2);
    }

    /// A copy of many files one after the other, coming back to each: the
    /// files' partly filled blocks are spilled once too many are held, and
    /// every statistic is still exact.
    #[test]
    fn partial_blocks_of_many_files_are_bounded() {
        use arrow_array::{Float64Array, StringArray, UInt64Array};
        let mut b = SrtBuilder::default();
        let mut by_file: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        let mut most_held = 0;
        for i in 0..120_000i64 {
            let file = format!("f{}", (i / 70) % 700);
            let srt = (i * 7919) % 3_000_000 + 500;
            by_file.entry(file.clone()).or_default().push(srt);
            // The operation's row: every file's requests (a group of many
            // cells).
            by_file.entry("(op)".into()).or_default().push(srt);
            b.add(&answered_request(i, "READ", Some(file), srt));
            let held: usize = b.cells.iter().map(|(_, c)| c.samples.tail.capacity()).sum();
            most_held = most_held.max(held);
        }
        // (Every file's partial blocks alone would be 700 × 2 KB.)
        assert!(
            most_held <= 2 * TailBudget::MAX + 4 * SAMPLES_BLOCK,
            "{most_held} held"
        );
        let table = b.table(&ConversationTable::default(), None);
        let by: StringArray = column(&table, "breakdown");
        let key: StringArray = column(&table, "key");
        let answered: UInt64Array = column(&table, "answered");
        let f64s = |name: &str| column::<Float64Array>(&table, name);
        let (p50, p99, max) = (f64s("p50_ms"), f64s("p99_ms"), f64s("max_ms"));
        let mut seen = 0;
        for row in 0..table.num_rows() {
            let k = match by.value(row) {
                "file" => key.value(row),
                "op" => "(op)",
                _ => continue,
            };
            let mut want = by_file[k].clone();
            want.sort_unstable();
            assert_eq!(answered.value(row), want.len() as u64);
            assert_eq!(p50.value(row), percentile(&want, 50.0) / 1e6);
            assert_eq!(p99.value(row), percentile(&want, 99.0) / 1e6);
            assert_eq!(max.value(row), want[want.len() - 1] as f64 / 1e6);
            seen += 1;
        }
        assert_eq!(seen, 701);
    }

    /// A builder copied by another thread after the pass
    /// (`SrtBuilder::relocate`) gives the same table: groups of one cell and
    /// of many, samples in the spill and in partly filled blocks.
    #[test]
    fn relocated_builder_gives_the_same_table() {
        let build = || {
            let mut b = SrtBuilder::default();
            for i in 0..(3 * SAMPLES_BLOCK as i64 + 40) {
                let file = format!("f{}", i % 9);
                let op = ["READ", "WRITE"][(i % 2) as usize];
                b.add(&answered_request(
                    i,
                    op,
                    Some(file),
                    (i * 7919) % 900_000 + 700,
                ));
            }
            b
        };
        let mut moved = build();
        assert!(moved.groups(None).iter().any(|(_, g)| g.cells.len() > 2));
        std::thread::scope(|s| {
            s.spawn(|| moved.relocate());
        });
        let convs = ConversationTable::default();
        assert_eq!(moved.table(&convs, None), build().table(&convs, None));
    }

    #[test]
    fn groups_count_every_request_whatever_the_order() {
        use arrow_array::{StringArray, UInt64Array};
        let ops = ["READ", "WRITE", "GETATTR", "LOOKUP", "ACCESS", "COMMIT"];
        let mut b = SrtBuilder::default();
        let mut want: BTreeMap<(String, String, String), (u64, u64, u64)> = BTreeMap::new();
        for i in 0..5000u32 {
            // Runs of a few kinds that differ only in connection or
            // failure (all remembered), then a cycle over many more.
            let run = i % 100 < 40;
            let k = if run { 0 } else { (i % 6) as usize };
            let op = ops[k];
            let failed = i % 7 == 0;
            let answered = i % 11 != 0;
            let file = if run {
                Some("file0".to_string())
            } else {
                (i % 3 != 0).then(|| format!("file{}", i % 5))
            };
            let stream = if run { (i / 2) % 2 } else { i % 2 };
            let t = Transaction {
                protocol: "nfs",
                transport: "udp",
                version: 3,
                op: op.into(),
                op_code: k as u32,
                stream,
                client_addr: Some(("10.0.0.1".parse().expect("ip"), 700 + stream as u16)),
                server_addr: Some(("10.0.0.2".parse().expect("ip"), 2049)),
                file_name: file.as_deref().map(Into::into),
                status: answered.then_some(if failed { 2 } else { 0 }),
                status_name: (answered && failed).then(|| "NFS3ERR_NOENT".into()),
                reply: answered.then(|| crate::transactions::PduSpan {
                    last_ts: 1_000,
                    ..Default::default()
                }),
                ..Default::default()
            };
            b.add(&t);
            let failed = crate::transaction_table::failed(&t);
            let client = format!("10.0.0.1:{}", 700 + stream);
            let mut keys = vec![
                ("op", String::new()),
                ("client", client),
                ("server", "10.0.0.2:2049".to_string()),
            ];
            if let Some(f) = file {
                keys.push(("file", f));
            }
            if failed {
                keys.push(("status", "NFS3ERR_NOENT".into()));
            }
            for (by, key) in keys {
                let w = want.entry((by.into(), op.into(), key)).or_default();
                w.0 += 1;
                w.1 += u64::from(failed);
                w.2 += u64::from(!answered);
            }
        }
        let table = b.table(&ConversationTable::default(), None);
        let strings = |name: &str| {
            let c = table.column_by_name(name).expect(name);
            let c = c.as_any().downcast_ref::<StringArray>().expect("strings");
            (0..c.len())
                .map(|i| c.value(i).to_string())
                .collect::<Vec<_>>()
        };
        let counts = |name: &str| {
            let c = table.column_by_name(name).expect(name);
            let c = c.as_any().downcast_ref::<UInt64Array>().expect("u64");
            c.values().to_vec()
        };
        let (by, op, key) = (strings("breakdown"), strings("op"), strings("key"));
        let (calls, errors, unanswered) = (counts("calls"), counts("errors"), counts("unanswered"));
        let mut got = BTreeMap::new();
        for i in 0..table.num_rows() {
            got.insert(
                (by[i].clone(), op[i].clone(), key[i].clone()),
                (calls[i], errors[i], unanswered[i]),
            );
        }
        assert_eq!(got, want);
    }
}
