//! TCP analysis: Wireshark's TCP expert flags (`tcp.analysis.*`) for every
//! frame, computed in the single pass.
//!
//! [`TcpAnalyzer::update`] is called for each TCP frame after the
//! conversation table has assigned it a stream and a direction; it keeps one
//! [`seq_analysis::Connection`] per open conversation and records an
//! [`TcpEvent`] per flagged frame and flag, plus per-stream counts.
//!
//! Beyond Wireshark's flags, the same call feeds [`metrics::ConnMetrics`]
//! (retransmission classes, zero-window episodes, window scaling, RTT,
//! congestion window, where the time went; see docs/tcp-analysis.md), whose
//! summary is kept per stream when the connection's state is released, plus
//! the `tcp_series` bins and, for chosen streams, the `tcp_segments` points.
//!
//! Memory: the state of a conversation is a few hundred bytes plus its
//! un-acknowledged segments (at most [`MAX_UNACKED`] per direction). It is
//! released when the connection is closed (RST, or FIN both ways and the ACK
//! of the second FIN) once [`CLOSED_LINGER_NS`] of capture time has passed
//! (so late retransmissions and RSTs are still judged as Wireshark judges
//! them), and at once when a new SYN reuses the 4-tuple. Counts and events
//! are kept.

pub mod capture_point;
pub mod cwnd;
mod event_log;
mod flags;
pub mod limitation;
pub mod loss_reading;
pub mod metrics;
pub mod reservoir;
pub mod retrans_class;
pub mod rtt;
pub mod segments;
pub mod seq_analysis;
pub mod seq_points;
pub mod series;
pub(crate) mod tables;
pub mod unacked;
pub mod window;
pub mod zero_window;

use std::collections::{BTreeMap, VecDeque};

use nastriage_net::{IpInfo, TcpSegment};

use crate::conversations::Assignment;
pub use event_log::EventLog;
pub use flags::{Flag, FlagCounts, FlagSet};
use metrics::{ConnMetrics, ConnSummary, Input, Sinks};
use segments::SegmentStore;
pub use seq_analysis::MAX_UNACKED;
use seq_analysis::{Connection, Outcome, Seg};
use seq_points::{SeqPoints, SeqPointsConfig};
use series::{Series, SeriesConfig};
pub use tables::DirectionSeries;
use zero_window::Episode;

/// How long (in capture time) a closed connection's state is kept for
/// frames that still arrive after the close (Linux's TIME_WAIT).
pub const CLOSED_LINGER_NS: i64 = 60_000_000_000;

/// Kind-specific facts of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Detail {
    None,
    /// Duplicate ACK number `num` of the ACK in frame `frame`.
    DupAck {
        num: u32,
        frame: u64,
    },
    /// Retransmission: time since the oldest un-acked segment (frame).
    Rto {
        ns: i64,
        frame: u64,
    },
    /// The generic `retransmission` item that Wireshark also puts on a
    /// fast or spurious retransmission.
    AlsoFlagged(Flag),
    /// Lost segment: bytes missing; ACKed unseen segment: bytes never seen.
    Bytes(u32),
}

/// One flag on one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TcpEvent {
    pub frame: u64,
    pub ts: i64,
    pub stream: u32,
    /// Direction of the segment in its conversation: 0 = `a` → `b`.
    pub dir: u8,
    pub kind: Flag,
    pub detail: Detail,
}

impl TcpEvent {
    /// Human-readable detail ("dup_ack=3 of frame 17", ...), or "".
    pub fn detail_text(&self) -> String {
        match (self.kind, self.detail) {
            (_, Detail::DupAck { num, frame }) => format!("dup_ack={num} of frame {frame}"),
            (_, Detail::Rto { ns, frame }) => {
                format!("rto={:.6}s since frame {frame}", ns as f64 / 1e9)
            }
            (_, Detail::AlsoFlagged(f)) => f.name().to_string(),
            (Flag::AckLostSegment, Detail::Bytes(n)) => format!("unseen={n} bytes"),
            (_, Detail::Bytes(n)) => format!("missing={n} bytes"),
            (_, Detail::None) => String::new(),
        }
    }
}

/// Options of the TCP analysis.
#[derive(Debug, Clone, Default)]
pub struct TcpAnalysisConfig {
    /// Streams whose segments go to the `tcp_segments` table.
    pub segments_for: Vec<u32>,
    pub series: SeriesConfig,
    /// Reduced points of every connection (`tcp_seq_points`).
    pub seq_points: SeqPointsConfig,
}

/// The state of one open conversation.
struct Live {
    conn: Connection,
    metrics: ConnMetrics,
}

/// The TCP analyser of one pass.
#[derive(Default)]
pub struct TcpAnalyzer {
    /// Boxed: a state is about 2.9 KB, and a map holds up to twice as many
    /// slots as entries, so unboxed the empty slots cost as much as the
    /// states (the pass on a capture of 4,000 connections open at once:
    /// 78 MB unboxed, 69 MB boxed).
    live: foldhash::HashMap<u32, Box<Live>>,
    /// (close time, stream) of closed connections still held, oldest first.
    closing: VecDeque<(i64, u32)>,
    /// Streams seen so far (stream indices are dense, in order).
    streams_seen: u32,
    out: TcpAnalysis,
}

/// What the TCP analysis produced.
#[derive(Debug, Default)]
pub struct TcpAnalysis {
    events: EventLog,
    per_stream: BTreeMap<u32, FlagCounts>,
    totals: FlagCounts,
    /// Connection states released (closed, or superseded by port reuse).
    pub released: u64,
    /// Frames that arrived for a conversation whose state had already been
    /// released (analysed from a fresh state, so possibly less flagged).
    pub after_release_frames: u64,
    /// Segments not kept in the bounded un-acked lists.
    pub untracked_segments: u64,
    /// Per stream (index), the metrics summary (None: never analysed).
    /// Boxed: a summary is about 900 bytes, and the list grows by doubling
    /// (tens of thousands of connections left megabytes of empty slots).
    conns: Vec<Option<Box<ConnSummary>>>,
    /// Episodes, series bins and segment points.
    sinks: Sinks,
    /// Frames of a stream seen again after its summary was made (they feed
    /// the series and segments but not the summary).
    pub after_summary_frames: u64,
}

impl TcpAnalysis {
    /// Copies what is kept into the calling thread's allocations (see
    /// [`crate::heap::relocate_after_pass`]).
    pub(crate) fn relocate(&mut self) {
        crate::heap::renew(&mut self.conns);
        self.sinks.relocate();
        self.per_stream = self.per_stream.clone();
        self.events.relocate();
    }

    /// Every flagged frame and flag, in frame order (read back from the
    /// spill: see [`EventLog`]).
    pub fn events(&self) -> &EventLog {
        &self.events
    }

    /// Frames per flag over all conversations.
    pub fn totals(&self) -> FlagCounts {
        self.totals
    }

    /// Frames per flag in one conversation (all zero if none was flagged).
    pub fn stream_counts(&self, stream: u32) -> FlagCounts {
        self.per_stream.get(&stream).copied().unwrap_or_default()
    }

    /// Conversations with at least one flag, in stream order.
    pub fn flagged_streams(&self) -> impl Iterator<Item = (u32, &FlagCounts)> {
        self.per_stream.iter().map(|(s, c)| (*s, c))
    }

    /// The metrics summary of a stream.
    pub fn summary(&self, stream: u32) -> Option<&ConnSummary> {
        self.conns.get(stream as usize).and_then(|c| c.as_deref())
    }

    /// Zero-window episodes, by stream and start frame.
    pub fn episodes(&self) -> &[Episode] {
        &self.sinks.episodes
    }

    pub fn series(&self) -> &Series {
        &self.sinks.series
    }

    pub fn segments(&self) -> &SegmentStore {
        &self.sinks.segments
    }

    pub fn seq_points(&self) -> &SeqPoints {
        &self.sinks.seq_points
    }

    /// Warnings about bounds reached.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        let series = &self.sinks.series;
        if series.dropped > 0 {
            w.push(format!(
                "tcp_series: {} bin(s) left out: more than {} rows (choose a longer interval)",
                series.dropped,
                series.rows()
            ));
        }
        w.extend(self.sinks.seq_points.warnings());
        w
    }
}

impl TcpAnalyzer {
    pub fn new(cfg: TcpAnalysisConfig) -> Self {
        let mut t = TcpAnalyzer::default();
        t.out.sinks.series = Series::new(cfg.series);
        t.out.sinks.segments = SegmentStore::new(&cfg.segments_for);
        t.out.sinks.seq_points = SeqPoints::new(cfg.seq_points);
        t
    }

    /// Analyse one TCP frame, after [`crate::conversations::ConversationTable::update`].
    /// `ip` gives the TTL and IP ID (duplicate detection, capture point).
    pub fn update(
        &mut self,
        frame: u64,
        ts: i64,
        asg: &Assignment,
        tcp: &TcpSegment<'_>,
        ip: Option<&IpInfo>,
    ) {
        let hash = retrans_class::payload_hash(tcp.payload);
        self.update_hashed(frame, ts, asg, tcp, ip, hash);
    }

    /// [`Self::update`] with the payload already hashed
    /// ([`retrans_class::payload_hash`]): the segment's payload is not read.
    pub fn update_hashed(
        &mut self,
        frame: u64,
        ts: i64,
        asg: &Assignment,
        tcp: &TcpSegment<'_>,
        ip: Option<&IpInfo>,
        payload_hash: u64,
    ) {
        self.expire(ts);
        if let Some(old) = asg.replaced {
            self.release(old);
        }
        let seen_before = asg.stream < self.streams_seen;
        if !seen_before {
            self.streams_seen = asg.stream + 1;
        }
        // (One lookup a segment: a stream seen before that is not live was
        // released.)
        let after_release = &mut self.out.after_release_frames;
        let live = self.live.entry(asg.stream).or_insert_with(|| {
            *after_release += u64::from(seen_before);
            Box::new(Live {
                conn: Connection::default(),
                metrics: ConnMetrics::new(asg.stream),
            })
        });
        let conn = &mut live.conn;
        let was_closed = conn.is_closed();
        let seg = Seg {
            frame,
            ts,
            seq: tcp.seq,
            ack: tcp.ack,
            len: tcp.payload_len,
            flags: tcp.flags,
            window: tcp.window,
            wscale: tcp.options.window_scale,
        };
        let o = conn.analyze(asg.dir as usize, &seg, asg.reused_ports);
        let closed_now = !was_closed && conn.is_closed();
        let input = Input {
            frame,
            ts,
            dir: asg.dir as usize,
            tcp,
            ip,
            flags: o.flags.reported(),
            payload_hash,
        };
        live.metrics.update(&input, &mut self.out.sinks);
        if closed_now {
            self.closing.push_back((ts, asg.stream));
        }
        if !o.flags.is_empty() {
            self.record(frame, ts, asg, &o);
        }
    }

    fn record(&mut self, frame: u64, ts: i64, asg: &Assignment, o: &Outcome) {
        let reported = o.flags.reported();
        self.out.totals.add_set(reported);
        self.out
            .per_stream
            .entry(asg.stream)
            .or_default()
            .add_set(reported);
        for kind in reported.iter() {
            let detail = match kind {
                Flag::DuplicateAck => Detail::DupAck {
                    num: o.dup_ack_num,
                    frame: o.dup_ack_frame,
                },
                Flag::Retransmission => match o.rto {
                    Some((ns, frame)) if ns != 0 => Detail::Rto { ns, frame },
                    Some(_) => Detail::None,
                    None if o.flags.contains(Flag::FastRetransmission) => {
                        Detail::AlsoFlagged(Flag::FastRetransmission)
                    }
                    None => Detail::AlsoFlagged(Flag::SpuriousRetransmission),
                },
                Flag::LostSegment => Detail::Bytes(o.lost_bytes),
                Flag::AckLostSegment => Detail::Bytes(o.unseen_bytes),
                _ => Detail::None,
            };
            self.out.events.push(TcpEvent {
                frame,
                ts,
                stream: asg.stream,
                dir: asg.dir,
                kind,
                detail,
            });
        }
    }

    /// Release closed connections whose linger time has passed.
    fn expire(&mut self, now: i64) {
        while let Some(&(t, stream)) = self.closing.front() {
            if now.saturating_sub(t) < CLOSED_LINGER_NS {
                break;
            }
            self.closing.pop_front();
            if self.live.get(&stream).is_some_and(|c| c.conn.is_closed()) {
                self.release(stream);
            }
        }
    }

    fn release(&mut self, stream: u32) {
        if let Some(c) = self.live.remove(&stream) {
            self.out.released += 1;
            self.out.untracked_segments += c.conn.untracked();
            self.summarize(stream, c.metrics);
        }
    }

    fn summarize(&mut self, stream: u32, m: ConnMetrics) {
        self.out.untracked_segments += m.untracked();
        let (summary, episodes) = m.finish();
        self.out.sinks.episodes.extend(episodes);
        let i = stream as usize;
        if self.out.conns.len() <= i {
            self.out.conns.resize(i + 1, None);
        }
        if self.out.conns[i].is_none() {
            self.out.conns[i] = Some(Box::new(summary));
        } else {
            self.out.after_summary_frames += 1;
        }
    }

    /// Connection states currently held.
    pub fn live_connections(&self) -> usize {
        self.live.len()
    }

    pub fn finish(mut self) -> TcpAnalysis {
        let mut live: Vec<(u32, Box<Live>)> = std::mem::take(&mut self.live).into_iter().collect();
        live.sort_by_key(|(s, _)| *s);
        for (stream, c) in live {
            self.out.untracked_segments += c.conn.untracked();
            self.summarize(stream, c.metrics);
        }
        self.out
            .sinks
            .episodes
            .sort_by_key(|e| (e.stream, e.start_frame, e.host_dir));
        self.out
    }
}

#[cfg(test)]
mod tests {
    use nastriage_net::tcp_flags::{ACK, RST, SYN};
    use nastriage_net::TcpOptions;

    use super::*;

    const SEC: i64 = 1_000_000_000;

    fn seg(seq: u32, ack: u32, len: u32, flags: u16) -> TcpSegment<'static> {
        TcpSegment {
            src_port: 1,
            dst_port: 2,
            seq,
            ack,
            flags,
            window: 100,
            header_len: 20,
            options: TcpOptions::default(),
            payload_len: len,
            payload: &[],
        }
    }

    fn asg(stream: u32, dir: u8) -> Assignment {
        Assignment {
            stream,
            dir,
            reused_ports: false,
            replaced: None,
        }
    }

    #[test]
    fn events_counts_and_details() {
        let mut t = TcpAnalyzer::default();
        let s = asg(0, 0);
        let r = asg(0, 1);
        t.update(1, SEC, &s, &seg(100, 0, 0, SYN), None);
        t.update(2, SEC, &r, &seg(500, 101, 0, SYN | ACK), None);
        t.update(3, SEC, &s, &seg(101, 501, 0, ACK), None);
        t.update(4, SEC, &r, &seg(501, 101, 10, ACK), None);
        t.update(5, SEC, &s, &seg(101, 511, 0, ACK), None);
        t.update(6, SEC, &r, &seg(521, 101, 10, ACK), None); // 511..521 lost
        t.update(7, SEC, &s, &seg(101, 511, 0, ACK), None);
        t.update(8, SEC, &s, &seg(101, 511, 0, ACK), None);
        t.update(9, SEC, &r, &seg(511, 101, 10, ACK), None); // fast retransmission
        let out = t.finish();
        let rows: Vec<(u64, &str, String)> = out
            .events()
            .iter()
            .map(|e| (e.frame, e.kind.name(), e.detail_text()))
            .collect();
        assert_eq!(
            rows,
            vec![
                (6, "lost_segment", "missing=10 bytes".to_string()),
                (7, "duplicate_ack", "dup_ack=1 of frame 5".to_string()),
                (8, "duplicate_ack", "dup_ack=2 of frame 5".to_string()),
                (9, "retransmission", "fast_retransmission".to_string()),
                (9, "fast_retransmission", String::new()),
            ]
        );
        let c = out.stream_counts(0);
        assert_eq!(c.get(Flag::Retransmission), 1);
        assert_eq!(c.get(Flag::FastRetransmission), 1);
        assert_eq!(c.get(Flag::DuplicateAck), 2);
        assert_eq!(out.totals(), c);
        assert_eq!(out.stream_counts(7), FlagCounts::default());
        assert_eq!(out.flagged_streams().count(), 1);
    }

    #[test]
    fn closed_state_is_released_after_linger_and_reuse() {
        let mut t = TcpAnalyzer::default();
        t.update(1, SEC, &asg(0, 0), &seg(100, 0, 0, SYN), None);
        t.update(2, SEC, &asg(0, 1), &seg(500, 101, 0, RST | ACK), None);
        t.update(3, 2 * SEC, &asg(1, 0), &seg(100, 0, 0, SYN), None);
        assert_eq!(t.live_connections(), 2, "closed state lingers");
        // A late frame within the linger time still uses the old state.
        t.update(4, 30 * SEC, &asg(0, 1), &seg(500, 101, 0, RST | ACK), None);
        assert_eq!(t.live_connections(), 2);
        t.update(
            5,
            SEC + CLOSED_LINGER_NS,
            &asg(1, 0),
            &seg(101, 0, 0, ACK),
            None,
        );
        assert_eq!(t.live_connections(), 1, "released after the linger time");
        // Port reuse releases the replaced conversation at once.
        let reuse = Assignment {
            stream: 2,
            dir: 0,
            reused_ports: true,
            replaced: Some(1),
        };
        t.update(6, 100 * SEC, &reuse, &seg(9000, 0, 0, SYN), None);
        assert_eq!(t.live_connections(), 1);
        t.update(7, 100 * SEC, &asg(0, 0), &seg(101, 501, 0, ACK), None);
        let out = t.finish();
        assert_eq!(out.released, 2);
        assert_eq!(out.after_release_frames, 1);
        let e = out.events().last().unwrap();
        assert_eq!((e.frame, e.kind, e.stream), (6, Flag::ReusedPorts, 2));
    }
}
