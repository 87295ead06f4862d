//! `stream_transactions`: one row per TCP connection with NFS/RPC or SMB2
//! transactions, holding what the diagnosis rules read of a connection's
//! requests beyond the other summaries (time profile, concurrency, srt,
//! failed and unanswered requests): how many there were, which storage
//! protocols, the round-trip floors the rules fall back on when TCP gives
//! none, and the metadata operations a metadata storm is described by.
//!
//! With it the rules never read the transaction log, so a run that shows
//! no transaction (`analyze --json`, the terminal summary) need not keep one
//! (`AnalyzeOptions::keep_transactions`): serialising and compressing every
//! request is about a tenth of the pass. Each figure is computed as the
//! rules' own derivation from the log (`diagnosis/context.py`) computes it,
//! and a test keeps the two equal.

use std::sync::Arc;

use arrow_array::builder::{Float64Builder, ListBuilder, StringBuilder, UInt64Builder};
use arrow_array::RecordBatch;

use crate::columns::Cols;
use crate::time_profile::{is_storage, FloorsScan, RttFloors};
use crate::tx_facts::{Names, TxFacts};

/// First frames of metadata requests kept per connection (the rule shows
/// the first 30 over all connections).
const FIRST_FRAMES: usize = 30;

/// One connection's row.
#[derive(Debug, Clone, Default)]
pub(crate) struct StreamSummary {
    pub stream: u32,
    pub transactions: u64,
    /// NFS and SMB2 among its protocols, sorted.
    pub storage_protocols: Vec<&'static str>,
    /// The round-trip floors (also the time profile's, when TCP has none).
    pub floors: RttFloors,
    /// Storage requests that move no file data: operation (in order of
    /// first appearance), requests, and their response times summed in
    /// request order (an unanswered one adds nothing).
    pub metadata: Vec<(u32, u64, f64)>,
    pub metadata_first_frames: Vec<u64>,
}

/// The row of one TCP connection, from its facts in request order.
#[derive(Debug, Default)]
pub(crate) struct SummaryScan {
    s: StreamSummary,
    floors: FloorsScan,
}

impl SummaryScan {
    pub(crate) fn new(stream: u32) -> Self {
        SummaryScan {
            s: StreamSummary {
                stream,
                ..Default::default()
            },
            floors: FloorsScan::default(),
        }
    }

    /// Add the next request (`bound`: see `ProtocolScan::add`).
    pub(crate) fn add(&mut self, t: &TxFacts, names: &Names, bound: Option<i64>) {
        let s = &mut self.s;
        s.transactions += 1;
        self.floors.add(t, bound);
        let protocol = names.protocol(t);
        if !is_storage(protocol) {
            return;
        }
        if !s.storage_protocols.contains(&protocol) {
            s.storage_protocols.push(protocol);
        }
        if names.is_data_op(t) {
            return;
        }
        let srt = t.srt_ns().map_or(0.0, |ns| ns as f64 / 1e6);
        match s.metadata.iter_mut().find(|m| m.0 == t.op) {
            Some(m) => {
                m.1 += 1;
                m.2 += srt;
            }
            None => s.metadata.push((t.op, 1, srt)),
        }
        if s.metadata_first_frames.len() < FIRST_FRAMES {
            s.metadata_first_frames.push(t.req_first_frame);
        }
    }

    pub(crate) fn finish(self) -> StreamSummary {
        let mut s = self.s;
        s.floors = self.floors.finish();
        s.storage_protocols.sort_unstable();
        s
    }
}

/// The row of one TCP connection from its facts in request order (tests).
#[cfg(test)]
pub(crate) fn summarize(stream: u32, txs: &[TxFacts], names: &Names) -> StreamSummary {
    let mut scan = SummaryScan::new(stream);
    for t in txs {
        scan.add(t, names, None);
    }
    scan.finish()
}

/// The `stream_transactions` table (docs/transactions.md lists its columns).
pub(crate) fn table(rows: &[StreamSummary], names: &Names) -> RecordBatch {
    let mut k = Cols::default();
    k.u32("stream", rows.iter().map(|r| r.stream).collect());
    k.u64(
        "transactions",
        rows.iter().map(|r| r.transactions).collect(),
    );
    let mut protocols = ListBuilder::new(StringBuilder::new());
    let mut ops = ListBuilder::new(StringBuilder::new());
    let mut calls = ListBuilder::new(UInt64Builder::new());
    let mut srt = ListBuilder::new(Float64Builder::new());
    let mut frames = ListBuilder::new(UInt64Builder::new());
    for r in rows {
        for p in &r.storage_protocols {
            protocols.values().append_value(p);
        }
        for &(op, n, ms) in &r.metadata {
            ops.values().append_value(names.ops.name(op));
            calls.values().append_value(n);
            srt.values().append_value(ms);
        }
        frames.values().append_slice(&r.metadata_first_frames);
        protocols.append(true);
        ops.append(true);
        calls.append(true);
        srt.append(true);
        frames.append(true);
    }
    k.push("storage_protocols", true, Arc::new(protocols.finish()));
    k.f64o(
        "server_time_floor_ms",
        rows.iter().map(|r| r.floors.server_ms).collect(),
    );
    k.f64o(
        "turnaround_floor_ms",
        rows.iter().map(|r| r.floors.turnaround_ms).collect(),
    );
    k.push("metadata_ops", true, Arc::new(ops.finish()));
    k.push("metadata_calls", true, Arc::new(calls.finish()));
    k.push("metadata_srt_ms", true, Arc::new(srt.finish()));
    k.push("metadata_first_frames", true, Arc::new(frames.finish()));
    k.finish("stream_transactions")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transactions::{PduSpan, Transaction};
    use crate::tx_facts::Facts;

    fn tx(protocol: &'static str, op: &'static str, first: u64, reply: Option<i64>) -> Transaction {
        Transaction {
            protocol,
            transport: "tcp",
            stream: 3,
            op: op.into(),
            id: first + 1,
            request: PduSpan {
                first_frame: first,
                last_frame: first,
                first_ts: first as i64 * 1_000_000,
                last_ts: first as i64 * 1_000_000,
                ..Default::default()
            },
            reply: reply.map(|d| PduSpan {
                first_ts: first as i64 * 1_000_000 + d,
                last_ts: first as i64 * 1_000_000 + d,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn counts_metadata_by_operation_in_order_of_appearance() {
        let mut f = Facts::default();
        let log = [
            tx("portmap", "GETPORT", 1, Some(100_000)),
            tx("nfs", "LOOKUP", 2, Some(250_000)),
            tx("nfs", "READ", 3, Some(900_000)),
            tx("nfs", "GETATTR", 4, None),
            tx("nfs", "LOOKUP", 5, Some(500_000)),
            tx("smb2", "Create", 6, Some(300_000)),
        ];
        for (i, t) in log.iter().enumerate() {
            f.add(t, i as u64);
        }
        let mut rows = Vec::new();
        for (key, _) in f.stream_keys() {
            rows.push(summarize(key.1, &f.stream(key), &f.names));
        }
        let [s] = &rows[..] else {
            panic!("one connection: {rows:?}")
        };
        assert_eq!((s.stream, s.transactions), (3, 6));
        assert_eq!(s.storage_protocols, ["nfs", "smb2"]);
        let named: Vec<(&str, u64, f64)> = s
            .metadata
            .iter()
            .map(|&(op, n, ms)| (f.names.ops.name(op), n, ms))
            .collect();
        assert_eq!(
            named,
            [("LOOKUP", 2, 0.75), ("GETATTR", 1, 0.0), ("Create", 1, 0.3)]
        );
        assert_eq!(s.metadata_first_frames, [2, 4, 5, 6]);
        // Four answered: the fastest server time, over all protocols.
        assert_eq!(s.floors.server_ms, Some(0.1));
        // Reply ends 1.1, 2.25, 3.9, 5.5, 6.3 ms; next starts 2, 3, 4, 6, none.
        let floor = s.floors.turnaround_ms.expect("four gaps");
        assert!((floor - 0.1).abs() < 1e-9, "{floor}");
        let batch = table(&rows, &f.names);
        assert_eq!(batch.num_rows(), 1);
        assert_eq!(batch.num_columns(), 9);
    }
}
