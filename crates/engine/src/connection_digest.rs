//! One connection's part of the digest (`analysis.rs`): its concurrency
//! rows and series bins, its time profile, its `stream_transactions` row
//! and its unanswered requests, from its request facts read back from the
//! spill in request order.
//!
//! The facts are read twice and never held all at once: a first reading
//! gathers what the sweeps must know before they start (the round-trip
//! floors the time profile's half round trips come from, where unanswered
//! requests end, the SMB2 credit balance before the capture) and the
//! summary row; the second sweeps concurrency and time profile. Each sweep
//! keeps only what is outstanding (see `in_order`), so memory is about 16
//! bytes a request (the processing and response times, kept for exact
//! medians) instead of the connection's every fact: a capture of one long
//! copy is one connection with millions of requests.
//!
//! The sweeps release points early only when the connection's times keep
//! the order they rely on: requests come by start, and nothing of a request
//! lies before its start. When they do not (a clock step inside the
//! capture), the first reading says so, and the connection is digested the
//! way it always was: all its facts in memory, every sweep sorting at the
//! end. Both ways give the same tables (tests below).

use std::collections::BTreeMap;

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
}

/// The digest of connection `key` (see [`Facts::stream_keys`]).
pub(crate) fn digest(key: (bool, u32), inputs: &Inputs<'_>) -> StreamDigest {
    let (udp, stream) = key;
    let facts = inputs.facts;
    if udp {
        // RPC over UDP: only its unanswered requests are listed.
        return StreamDigest {
            unanswered: facts.iter(key).filter(|t| t.reply().is_none()).collect(),
            ..Default::default()
        };
    }
    let scan = Scan::run(stream, facts.iter(key), &facts.names, true);
    if scan.ordered {
        return sweep(stream, scan, inputs, || facts.iter(key), None);
    }
    in_memory(stream, key, inputs)
}

/// The digest with every fact in memory and no point released early (the
/// way for times out of order).
fn in_memory(stream: u32, key: (bool, u32), inputs: &Inputs<'_>) -> StreamDigest {
    let facts = inputs.facts;
    let all: Vec<TxFacts> = facts.iter(key).collect();
    let scan = Scan::run(stream, all.iter().copied(), &facts.names, false);
    sweep(stream, scan, inputs, || all.iter().copied(), Some(&all))
}

/// The first reading of a connection's facts.
struct Scan {
    /// Requests came by start, and nothing of one lay before its start.
    ordered: bool,
    summary: StreamSummary,
    protocols: BTreeMap<&'static str, ScanResult>,
    unanswered: Vec<TxFacts>,
    /// Earliest and latest time of any of the requests.
    bounds: (i64, i64),
}

impl Scan {
    /// Read `facts` (in request order); `release`: let the sweeps release
    /// points early while the times keep their order.
    fn run(
        stream: u32,
        facts: impl Iterator<Item = TxFacts>,
        names: &Names,
        release: bool,
    ) -> Self {
        let mut summary = SummaryScan::new(stream);
        let mut protocols: BTreeMap<&'static str, ProtocolScan> = BTreeMap::new();
        let mut unanswered = Vec::new();
        let mut ordered = true;
        let mut last_start = i64::MIN;
        let mut bounds: Option<(i64, i64)> = None;
        for (i, t) in facts.enumerate() {
            let rq = t.req_first_ts;
            let reply = t.reply();
            let (lo, hi) = match reply {
                Some(r) => (
                    rq.min(t.req_last_ts).min(r.first_ts).min(r.last_ts),
                    rq.max(t.req_last_ts).max(r.first_ts).max(r.last_ts),
                ),
                None => (rq.min(t.req_last_ts), rq.max(t.req_last_ts)),
            };
            ordered &= rq >= last_start && lo == rq;
            last_start = rq;
            bounds = Some(bounds.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
            let release = release && ordered;
            summary.add(&t, names, release);
            let p = names.protocol(&t);
            protocols
                .entry(p)
                .or_insert_with(|| ProtocolScan::new(p))
                .add(i as u64, &t, release);
            if reply.is_none() {
                unanswered.push(t);
            }
        }
        Scan {
            ordered,
            summary: summary.finish(),
            protocols: protocols
                .into_iter()
                .map(|(p, s)| (p, s.finish()))
                .collect(),
            unanswered,
            bounds: bounds.unwrap_or((0, 0)),
        }
    }
}

/// The second reading: concurrency and time profile. `read` gives the facts
/// in request order; `all` holds them when the times are out of order (then
/// nothing is released early, and the profile reads them by start).
fn sweep<I: Iterator<Item = TxFacts>>(
    stream: u32,
    scan: Scan,
    inputs: &Inputs<'_>,
    read: impl Fn() -> I,
    all: Option<&[TxFacts]>,
) -> StreamDigest {
    let names = &inputs.facts.names;
    let release = all.is_none();
    let mut sweeps: BTreeMap<&'static str, ProtocolSweep> = scan
        .protocols
        .into_iter()
        .map(|(p, r)| (p, ProtocolSweep::new(stream, inputs.interval, r)))
        .collect();
    let mut profile = ProfileSweep::new(
        stream,
        scan.bounds,
        scan.summary.floors,
        names,
        inputs.tcp,
        inputs.convs,
        release,
    );
    let storage = |t: &TxFacts| is_storage(names.protocol(t));
    // The profile reads the storage requests by start (a stable sort: in
    // request order when the times keep theirs).
    let by_start: Vec<TxFacts> = match all {
        Some(all) => {
            let mut v: Vec<TxFacts> = all.iter().copied().filter(storage).collect();
            v.sort_by_key(|t| t.req_first_ts);
            v
        }
        None => Vec::new(),
    };
    for (i, t) in read().enumerate() {
        if let Some(sw) = sweeps.get_mut(names.protocol(&t)) {
            sw.add(i as u64, &t, release);
        }
        if release && storage(&t) {
            profile.add(&t);
        }
    }
    for t in &by_start {
        profile.add(t);
    }
    let mut d = StreamDigest {
        unanswered: scan.unanswered,
        ..Default::default()
    };
    for sw in sweeps.into_values() {
        sw.finish(&mut d.concurrency, &mut d.series);
    }
    // The last storage row, as the rules read them.
    let conc = d.concurrency.iter().rfind(|c| is_storage(c.protocol));
    let answered = |t: &TxFacts| storage(t) && t.reply().is_some();
    d.profile = profile.finish(conc, || {
        if release {
            outstanding_stats(read().filter(answered), true)
        } else {
            outstanding_stats(by_start.iter().copied().filter(answered), false)
        }
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
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rand = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let mut txs: Vec<(i64, Transaction)> = Vec::new();
        for i in 0..n {
            let first_ts = start(i);
            let smb = rand(3) == 0;
            let last_ts = first_ts + rand(3) as i64 * 10_000;
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
                file_name: Some(format!("f{}", rand(30))),
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

    fn both_ways(f: &Facts) -> (String, String, bool) {
        let tcp = TcpAnalysis::default();
        let convs = ConversationTable::default();
        let inputs = Inputs {
            facts: f,
            interval: crate::concurrency::interval_for(f),
            tcp: &tcp,
            convs: &convs,
        };
        let key = (false, 5);
        let ordered = Scan::run(5, f.iter(key), &f.names, true).ordered;
        let show = |d: StreamDigest| {
            format!(
                "{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
                d.concurrency, d.series, d.profile, d.summary, d.unanswered
            )
        };
        (
            show(digest(key, &inputs)),
            show(in_memory(5, key, &inputs)),
            ordered,
        )
    }

    /// Thousands of requests (many releases of every sweep): swept as they
    /// come back, the tables are those of the digest with every fact in
    /// memory and every sweep sorted at the end.
    #[test]
    fn streamed_digest_equals_the_one_in_memory() {
        // Up to 8 requests at a time, starts often equal.
        let f = connection(20_000, |i| (i / 3) as i64 * 150_000);
        let (streamed, in_memory, ordered) = both_ways(&f);
        assert!(ordered);
        assert!(streamed.contains("smb2") && streamed.contains("nfs"));
        assert_eq!(streamed, in_memory);
    }

    /// A clock step back within the capture: the digest notices, and gives
    /// what the digest in memory gives.
    #[test]
    fn times_out_of_order_are_digested_in_memory() {
        let f = connection(9_000, |i| {
            let t = i as i64 * 100_000;
            if i >= 6_000 {
                t - 400_000_000
            } else {
                t
            }
        });
        let (streamed, in_memory, ordered) = both_ways(&f);
        assert!(!ordered);
        assert_eq!(streamed, in_memory);
    }
}
