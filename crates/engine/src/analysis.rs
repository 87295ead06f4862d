//! What an analysis run produces.

use std::sync::Arc;

use arrow_array::RecordBatch;

use crate::conversations::ConversationTable;
use crate::deferred::Deferred;
use crate::tables;
use crate::tcp::{FlagCounts, TcpAnalysis};
use crate::transactions::TransactionLog;

/// Per-input-file facts.
#[derive(Debug, Clone, Default)]
pub struct CaptureSummary {
    pub path: String,
    /// "pcap", "pcapng" or "snoop".
    pub format: String,
    pub format_description: String,
    /// "none", "gzip" or "zstd".
    pub compression: String,
    pub link_types: Vec<String>,
    pub frames: u64,
    /// Sum of frame lengths on the wire.
    pub bytes: u64,
    /// Sum of captured lengths.
    pub captured_bytes: u64,
    pub first_ts: Option<i64>,
    pub last_ts: Option<i64>,
    /// Frames cut by the snaplen (captured < wire length).
    pub truncated_frames: u64,
    /// Frames whose timestamp did not fit in 64-bit nanoseconds.
    pub clamped_ts_frames: u64,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolCount {
    pub protocol: String,
    pub frames: u64,
    pub bytes: u64,
}

/// The result of [`crate::analyze`].
pub struct Analysis {
    pub captures: Vec<CaptureSummary>,
    pub protocols: Vec<ProtocolCount>,
    pub warnings: Vec<String>,
    pub frames: u64,
    /// (Shared with the digest's thread.)
    pub(crate) conversations: Arc<ConversationTable>,
    pub(crate) tcp: Arc<TcpAnalysis>,
    pub(crate) transactions: TransactionLog,
    /// The tables derived from the transactions, made after the pass on a
    /// thread of their own: the TCP tables can be read meanwhile, and a
    /// table made from the digest waits for it.
    pub(crate) digest: Deferred<Digest>,
    /// The whole `srt` table, made when first asked for (a capture of
    /// thousands of connections has tens of thousands of rows: client,
    /// server and file breakdowns; a summary reads only the operations',
    /// [`Analysis::srt_rows`]).
    pub(crate) srt: std::sync::OnceLock<RecordBatch>,
}

/// Everything derived from the transactions that is not the transactions
/// themselves, made from what was gathered as each was logged
/// ([`crate::derived::Derived`]): the compressed log is not read again.
pub(crate) struct Digest {
    srt: crate::srt_table::SrtBuilder,
    /// The operations' rows of `srt`, which every summary reads (the
    /// rules' request totals, the terminal's and the JSON's tables): made
    /// here, on the digest's threads, rather than on the caller's.
    srt_ops: Option<RecordBatch>,
    concurrency: crate::concurrency::ConcurrencyResult,
    profiles: Vec<crate::time_profile::TimeProfile>,
    failed: crate::tx_store::TxStore,
    unanswered: RecordBatch,
    /// One row per TCP connection with transactions (`stream_transactions`).
    streams: RecordBatch,
    udp_transactions: u64,
}

impl Digest {
    /// `time_back`: the most a frame's time fell behind an earlier frame's
    /// in the capture (0 when times only go forward).
    pub(crate) fn new(
        derived: crate::derived::Derived,
        tcp: &TcpAnalysis,
        convs: &ConversationTable,
        time_back: i64,
    ) -> Self {
        let d = derived.seal();
        let facts = &d.facts;
        let interval = crate::concurrency::interval_for(facts);
        // One connection at a time (`connection_digest`: its facts read back
        // once or twice, in request order, never all at once). Connections are
        // independent, so two threads share them: a helper from the smallest
        // up, this one (after the srt groups) from the largest down, until
        // they meet, so the largest ones are never left for last. The results
        // are put back in connection order, so the tables do not depend on
        // the threading.
        let mut by_size = facts.stream_keys();
        by_size.sort_unstable_by_key(|&(key, n)| (n, key));
        // The part of `by_size` not taken yet.
        let left = std::sync::Mutex::new(&by_size[..]);
        let take = |largest: bool| {
            let mut left = left.lock().unwrap_or_else(|e| e.into_inner());
            let (key, rest) = if largest {
                let (last, rest) = left.split_last()?;
                (last.0, rest)
            } else {
                let (first, rest) = left.split_first()?;
                (first.0, rest)
            };
            *left = rest;
            Some(key)
        };
        let inputs = crate::connection_digest::Inputs {
            facts,
            interval,
            tcp,
            convs,
            time_back,
        };
        let work = |largest: bool| {
            let mut done = Vec::new();
            while let Some(key) = take(largest) {
                done.push((key, crate::connection_digest::digest(key, &inputs)));
            }
            done
        };
        let (srt_ops, mut parts) = std::thread::scope(|scope| {
            // (No second thread: this one takes every connection.)
            let helper = std::thread::Builder::new()
                .name("nastriage-digest".into())
                .spawn_scoped(scope, || work(false));
            // The operations' srt rows first, while the helper starts on the
            // connections (5 ms with 4,743 connections).
            let srt_ops =
                crate::srt_table::breakdown_number("op").map(|by| d.srt.table(convs, Some(by)));
            let mut parts = work(true);
            if let Ok(h) = helper {
                parts.extend(crate::driver::joined(h.join()));
            }
            (srt_ops, parts)
        });
        // Connection order, as `Facts::stream_keys` lists them.
        parts.sort_unstable_by_key(|(key, _)| *key);
        // (Every list sized at once: grown by doubling, the moves and copies
        // took 4 ms with 4,743 connections.)
        let total = |n: fn(&crate::connection_digest::StreamDigest) -> usize| {
            parts.iter().map(|(_, p)| n(p)).sum::<usize>()
        };
        let mut concurrency = crate::concurrency::ConcurrencyResult::new(interval);
        concurrency
            .conns
            .reserve_exact(total(|p| p.concurrency.len()));
        concurrency.series.reserve_exact(total(|p| p.series.len()));
        let mut profiles = Vec::with_capacity(total(|p| usize::from(p.profile.is_some())));
        let mut unanswered = Vec::with_capacity(total(|p| p.unanswered.len()));
        let mut streams = Vec::with_capacity(total(|p| usize::from(p.summary.is_some())));
        for (_, part) in parts {
            concurrency.conns.extend(part.concurrency);
            concurrency.series.extend(part.series);
            profiles.extend(part.profile);
            streams.extend(part.summary);
            unanswered.extend(part.unanswered);
        }
        let udp_transactions = by_size
            .iter()
            .filter(|((udp, _), _)| *udp)
            .map(|(_, n)| *n as u64)
            .sum();
        Digest {
            unanswered: crate::tx_facts::unanswered_table(unanswered, facts),
            streams: crate::stream_summary::table(&streams, &facts.names),
            udp_transactions,
            srt_ops,
            srt: d.srt,
            concurrency,
            profiles,
            failed: d.failed,
        }
    }
}

impl Analysis {
    /// The digest, waiting for its thread if need be.
    fn digest(&self) -> &Digest {
        self.digest.get()
    }

    /// Wait until the tables derived from the transactions (`srt`,
    /// `concurrency`, `time_profile`, ...) are made; every other table
    /// can be read while they are. Those tables wait by themselves; this is
    /// for timing the digest apart from them (`examples/pass`).
    pub fn wait_for_digest(&self) {
        self.digest.get();
    }

    /// Names of the tables this analysis can produce.
    pub fn table_names(&self) -> Vec<&'static str> {
        let mut names = vec![
            "conversations",
            "tcp_events",
            "tcp_flag_counts",
            "transactions",
            "stream_transactions",
            "failed_transactions",
            "unanswered_requests",
            "srt",
            "concurrency",
            "outstanding_at_arrival",
            "outstanding_series",
            "orphan_replies",
            "tcp_connections",
            "zero_window_episodes",
            "tcp_series",
            "tcp_segments",
            "tcp_seq_points",
            "tcp_seq_reduction",
            "time_profile",
        ];
        if !self.transactions.transactions.kept() {
            names.retain(|n| *n != "transactions");
        }
        names
    }

    /// Rows `start..stop` (clamped) of a table (None for an unknown name).
    /// `tcp_events`, which a lossy capture makes long, is made from those
    /// rows' events alone; another table is made whole and sliced.
    pub fn table_rows(&self, name: &str, start: usize, stop: usize) -> Option<RecordBatch> {
        if name == "tcp_events" {
            let rows = tables::tcp_events_rows(&self.tcp, &self.conversations, start, stop);
            return Some(rows);
        }
        let whole = self.table(name)?;
        let stop = stop.min(whole.num_rows());
        let start = start.min(stop);
        Some(whole.slice(start, stop - start))
    }

    /// Rows `start..stop` (clamped) of the `tcp_events` table as values:
    /// each event with its `direction` column ("c2s" / "s2c"); its `kind`
    /// and `detail` columns are `kind.name()` and `detail_text()`. For
    /// readers that regroup the events (the diagnosis, by connection)
    /// without going through Arrow and a string per row.
    pub fn tcp_event_rows(
        &self,
        start: usize,
        stop: usize,
    ) -> impl Iterator<Item = (crate::tcp::TcpEvent, &'static str)> + '_ {
        self.tcp
            .events()
            .range(start, stop)
            .map(|e| (e, tables::event_direction(&e, &self.conversations)))
    }

    /// The `tcp_series` rows with payload, grouped by stream and sender
    /// direction (three of the table's columns), without making the table:
    /// what the diagnosis reads of it (`stream`: that connection's only).
    pub fn tcp_series_by_direction(&self, stream: Option<u32>) -> Vec<crate::tcp::DirectionSeries> {
        crate::tcp::tables::series_by_direction(&self.tcp, &self.conversations, stream)
    }

    /// The median receive window offered to each sender direction over its
    /// `tcp_series` bins with payload: (stream, direction, median).
    pub fn tcp_series_window_medians(&self) -> Vec<(u32, &'static str, f64)> {
        crate::tcp::tables::series_window_medians(&self.tcp, &self.conversations)
    }

    /// Rows of a table (None for an unknown name), without making
    /// `tcp_events`.
    pub fn table_len(&self, name: &str) -> Option<usize> {
        if name == "tcp_events" {
            return Some(self.tcp.events().len());
        }
        self.table(name).map(|b| b.num_rows())
    }

    /// Build a table by name (None for an unknown name).
    pub fn table(&self, name: &str) -> Option<RecordBatch> {
        match name {
            "conversations" => Some(tables::conversations(&self.conversations)),
            "tcp_connections" => Some(crate::tcp::tables::tcp_connections(
                &self.tcp,
                &self.conversations,
            )),
            "zero_window_episodes" => Some(crate::tcp::tables::zero_window_episodes(
                &self.tcp,
                &self.conversations,
            )),
            "tcp_series" => Some(crate::tcp::tables::tcp_series(
                &self.tcp,
                &self.conversations,
            )),
            "tcp_segments" => Some(crate::tcp::tables::tcp_segments(
                &self.tcp,
                &self.conversations,
            )),
            "tcp_seq_points" => Some(crate::tcp::tables::tcp_seq_points(
                &self.tcp,
                &self.conversations,
            )),
            "tcp_seq_reduction" => Some(crate::tcp::tables::tcp_seq_reduction(
                &self.tcp,
                &self.conversations,
            )),
            "concurrency" => Some(crate::concurrency::summary_table(
                &self.digest().concurrency,
            )),
            "outstanding_at_arrival" => Some(crate::concurrency::arrival_table(
                &self.digest().concurrency,
            )),
            "outstanding_series" => {
                Some(crate::concurrency::series_table(&self.digest().concurrency))
            }
            "orphan_replies" => Some(crate::orphan_table::orphan_replies(&self.transactions)),
            "srt" => Some(
                self.srt
                    .get_or_init(|| self.digest().srt.table(&self.conversations, None))
                    .clone(),
            ),
            "transactions" if !self.transactions.transactions.kept() => None,
            "transactions" => Some(crate::transaction_table::transactions(
                self.transactions.transactions.iter(),
                self.transactions.transactions.len(),
                &self.conversations,
            )),
            "unanswered_requests" => Some(self.digest().unanswered.clone()),
            "stream_transactions" => Some(self.digest().streams.clone()),
            "failed_transactions" => {
                let failed = &self.digest().failed;
                Some(crate::transaction_table::transactions(
                    failed.iter(),
                    failed.len(),
                    &self.conversations,
                ))
            }
            "tcp_events" => Some(tables::tcp_events(&self.tcp, &self.conversations)),
            "tcp_flag_counts" => Some(tables::tcp_flag_counts(&self.tcp)),
            "time_profile" => Some(crate::time_profile::table(&self.digest().profiles)),
            _ => None,
        }
    }

    /// The rows of one breakdown of the `srt` table ("op", "client",
    /// "server", "file" or "status"; None for another name), in the table's
    /// order: made alone, without the other breakdowns' rows.
    pub fn srt_rows(&self, breakdown: &str) -> Option<RecordBatch> {
        let by = crate::srt_table::breakdown_number(breakdown)?;
        let digest = self.digest();
        match &digest.srt_ops {
            Some(rows) if breakdown == "op" => Some(rows.clone()),
            _ => Some(digest.srt.table(&self.conversations, Some(by))),
        }
    }

    /// Where each connection's time goes (see `time_profile`).
    pub fn time_profiles(&self) -> &[crate::time_profile::TimeProfile] {
        &self.digest().profiles
    }

    /// Counters of the application-layer parsers: requests without a
    /// reply, replies without a request, resynchronisations after gaps, and
    /// SMB messages that could not be analysed (encrypted, compressed, SMB1).
    pub fn app_stats(&self) -> Vec<(&'static str, u64)> {
        let t = &self.transactions;
        let unanswered = self.digest().unanswered.num_rows() as u64;
        vec![
            ("transactions", t.transactions.len() as u64),
            ("udp_transactions", self.digest().udp_transactions),
            ("unanswered_requests", unanswered),
            ("orphan_replies", t.orphan_replies.len() as u64),
            ("resyncs", t.resyncs),
            ("smb_encrypted_messages", t.encrypted_messages),
            ("smb_compressed_messages", t.compressed_messages),
            ("smb1_messages", t.smb1_messages),
        ]
    }

    /// NFS/RPC and SMB2 transactions and the parsers' counters.
    pub fn transactions(&self) -> &TransactionLog {
        &self.transactions
    }

    pub fn conversations(&self) -> &ConversationTable {
        &self.conversations
    }

    /// The TCP expert analysis (events, per-stream counts).
    pub fn tcp(&self) -> &TcpAnalysis {
        &self.tcp
    }

    /// Frames per TCP analysis flag over the whole capture.
    pub fn tcp_flag_totals(&self) -> FlagCounts {
        self.tcp.totals()
    }

    /// Frames per TCP analysis flag in one conversation (`tcp.stream`).
    pub fn tcp_flag_counts(&self, stream: u32) -> FlagCounts {
        self.tcp.stream_counts(stream)
    }
}
