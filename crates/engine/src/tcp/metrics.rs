//! Per-connection metrics beyond Wireshark's flags, in the same pass:
//! retransmission classes, zero-window episodes, window scaling, RTT,
//! congestion window, where the time went, idle periods, series and
//! sequence-graph points. This module keeps each direction's sequence state
//! (independent of Wireshark's quirks: positions are 64-bit, relative to the
//! initial sequence number, so they survive wrapping) and feeds the
//! one-concern modules next to it; [`ConnMetrics::finish`] turns the state
//! into a compact [`ConnSummary`].

use std::collections::VecDeque;

use nastriage_net::tcp_flags::{ACK, FIN, RST, SYN};
use nastriage_net::{IpInfo, TcpSegment};

use super::cwnd::{CcHint, CwndTracker, Send, Vantage};
use super::flags::{Flag, FlagSet};
use super::limitation::{DirState, Limitation, BUCKETS};
use super::retrans_class::{
    classify, Evidence, LossSite, Reclassified, RetransClass, RetransCounts, RetransTracker,
};
use super::rtt::{Rtt, Source};
use super::segments::{SegPoint, SegmentStore};
use super::seq_points::SeqPoints;
use super::series::Series;
use super::window::WindowScale;
use super::zero_window::{Episode, ZeroWindow};

/// Unacknowledged segments remembered per direction for RTT samples.
pub const MAX_SENT: usize = 4096;
/// Gaps (segments not captured) remembered per direction.
pub const MAX_HOLES: usize = 32;
/// Shortest idle period counted (or the full RTT, when larger).
pub const IDLE_MIN_NS: i64 = 1_000_000;
/// A data segment this much shorter than a full one ends what the sender had.
const SHORT_BY: u32 = 40;
/// Segments this long or longer can be full-sized (RFC 9293's default MSS).
const MIN_FULL: u32 = 536;
/// Window edges remembered per direction (to know the edge the sender had).
const MAX_EDGES: usize = 64;
/// Consecutive IPv4 IDs of a direction checked before trusting their order.
const MIN_ID_STEPS: u32 = 20;

/// Where the outputs of all connections go.
#[derive(Debug, Clone, Default)]
pub struct Sinks {
    pub series: Series,
    pub segments: SegmentStore,
    pub seq_points: SeqPoints,
    pub episodes: Vec<Episode>,
}

impl Sinks {
    /// See [`super::TcpAnalysis::relocate`].
    pub(crate) fn relocate(&mut self) {
        self.series.relocate();
        self.segments = self.segments.clone();
        self.seq_points = self.seq_points.clone();
        crate::heap::renew(&mut self.episodes);
    }
}

/// One frame, as the metrics see it.
pub struct Input<'a, 'b> {
    pub frame: u64,
    pub ts: i64,
    pub dir: usize,
    pub tcp: &'a TcpSegment<'b>,
    pub ip: Option<&'a IpInfo>,
    /// Wireshark's flags on this frame, as reported.
    pub flags: FlagSet,
    /// [`payload_hash`] of the segment's captured payload (the only use of
    /// the payload here; the pipeline computes it where the bytes are hot).
    pub payload_hash: u64,
}

#[derive(Debug, Clone, Copy)]
struct Sent {
    start: i64,
    end: i64,
    ts: i64,
    /// Retransmitted or filled out of order: no RTT sample (Karn).
    retx: bool,
}

/// A gap in the sequence: data above it passed the capture point first.
#[derive(Debug, Clone, Copy)]
struct Hole {
    l: i64,
    r: i64,
    /// When it appeared, and the IPv4 ID of the segment that opened it.
    ts: i64,
    opener_id: Option<u32>,
}

/// Sequence state and counters of one direction (the data it sends).
#[derive(Debug, Clone)]
struct Flow {
    isn: Option<u32>,
    /// First position seen (data before it was sent before the capture).
    seen_from: i64,
    /// Highest position sent (exclusive) and highest acknowledged.
    hi: i64,
    una: i64,
    sent: VecDeque<Sent>,
    holes: Vec<Hole>,
    dup_acks: u32,
    sacked_above: bool,
    in_recovery: bool,
    recovery_fast: bool,
    recovery_point: i64,
    last_send_ts: Option<i64>,
    drained: bool,
    /// Last window this side advertised (outside SYNs).
    adv_win: Option<u16>,
    /// MSS this side advertised in its SYN.
    mss: Option<u16>,
    ttl_max: Option<u8>,
    first_ip_id: Option<u32>,
    ids_vary: bool,
    /// IPv4 IDs: last one, consecutive pairs seen and pairs stepping
    /// forward by 1..=4096 (a per-connection or per-host counter).
    last_ip_id: Option<u32>,
    id_steps: u32,
    id_forward: u32,
    /// Right edges (ack + window) the receiver advertised for this
    /// direction, when they grew: (time seen, edge).
    edges: VecDeque<(i64, i64)>,
    /// The last new data reached the window edge the sender knew.
    at_edge: bool,
    bytes: u64,
    data_segs: u64,
    pure_acks: u64,
    large_segs: u64,
    max_seg: u32,
    max_flight: u64,
    window_limited: u64,
    untracked: u64,
    retrans: RetransTracker,
    cwnd: CwndTracker,
}

impl Flow {
    fn new() -> Self {
        Flow {
            isn: None,
            seen_from: 0,
            hi: 0,
            una: 0,
            sent: VecDeque::new(),
            holes: Vec::new(),
            dup_acks: 0,
            sacked_above: false,
            in_recovery: false,
            recovery_fast: false,
            recovery_point: 0,
            last_send_ts: None,
            drained: false,
            adv_win: None,
            mss: None,
            ttl_max: None,
            first_ip_id: None,
            ids_vary: false,
            last_ip_id: None,
            id_steps: 0,
            id_forward: 0,
            edges: VecDeque::new(),
            at_edge: false,
            bytes: 0,
            data_segs: 0,
            pure_acks: 0,
            large_segs: 0,
            max_seg: 0,
            max_flight: 0,
            window_limited: 0,
            untracked: 0,
            retrans: RetransTracker::default(),
            cwnd: CwndTracker::default(),
        }
    }

    /// 64-bit position of `seq`, unwrapped near `reference`.
    fn pos(&self, seq: u32, reference: i64) -> i64 {
        let rel = seq.wrapping_sub(self.isn.unwrap_or(0));
        reference + i64::from(rel.wrapping_sub(reference as u32) as i32)
    }

    fn start_at(&mut self, isn: u32, pos: i64) {
        self.isn = Some(isn);
        self.seen_from = pos;
        self.hi = pos;
        self.una = pos;
        self.sent.clear();
        self.holes.clear();
    }

    fn outstanding(&self) -> u64 {
        (self.hi - self.una).max(0) as u64
    }

    fn in_hole(&self, s: i64, e: i64) -> bool {
        self.holes.iter().any(|h| s < h.r && h.l < e)
    }

    fn hole_at(&self, s: i64, e: i64) -> Option<Hole> {
        self.holes.iter().find(|h| s < h.r && h.l < e).copied()
    }

    /// The direction's IPv4 IDs follow the order of sending.
    fn ids_sequential(&self) -> bool {
        self.id_steps >= MIN_ID_STEPS && self.id_forward * 10 >= self.id_steps * 9
    }

    /// The window edge the sender knew at `at` (the latest advertised at
    /// or before it).
    fn known_edge(&mut self, at: i64) -> Option<i64> {
        while self.edges.len() >= 2 && self.edges[1].0 <= at {
            self.edges.pop_front();
        }
        self.edges.front().filter(|x| x.0 <= at).map(|x| x.1)
    }

    fn note_edge(&mut self, ts: i64, edge: i64) {
        if self.edges.back().is_some_and(|x| x.1 >= edge) {
            return;
        }
        if self.edges.len() == MAX_EDGES {
            self.edges.pop_front();
        }
        self.edges.push_back((ts, edge));
    }

    fn fill_holes(&mut self, s: i64, e: i64) {
        if !self.in_hole(s, e) {
            return;
        }
        let mut out = Vec::with_capacity(self.holes.len() + 1);
        for &h in &self.holes {
            if e <= h.l || h.r <= s {
                out.push(h);
                continue;
            }
            if h.l < s {
                out.push(Hole { r: s, ..h });
            }
            if e < h.r {
                out.push(Hole { l: e, ..h });
            }
        }
        self.holes = out;
    }

    /// Mark what [s, e) overlaps as retransmitted (Karn), or remember it as
    /// an ambiguous segment.
    fn mark_retx(&mut self, s: i64, e: i64, ts: i64) {
        let mut any = false;
        for x in self.sent.iter_mut() {
            if x.start < e && s < x.end {
                x.retx = true;
                any = true;
            }
        }
        if !any && e > self.una && self.sent.len() < MAX_SENT {
            let p = self.sent.partition_point(|x| x.start < s);
            self.sent.insert(
                p,
                Sent {
                    start: s.max(self.una),
                    end: e,
                    ts,
                    retx: true,
                },
            );
        }
    }
}

/// Round-trip statistics of one side (capture point → that host → back).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SideRtt {
    pub min_ns: f64,
    pub median_ns: f64,
    pub p95_ns: f64,
    pub samples: u64,
    pub source: Source,
}

/// What one direction did (its data; "far side" is its receiver).
#[derive(Debug, Clone)]
pub struct DirSummary {
    /// MSS this side advertised, and the shift of the windows it advertises.
    pub mss: Option<u16>,
    pub window_scale: u8,
    pub ttl_max: Option<u8>,
    /// RTT of the far side of this direction's data.
    pub far_rtt: Option<SideRtt>,
    /// Smallest far-side time over every source, handshake included: the
    /// network part of that side, without ACK delays.
    pub far_min_ns: Option<i64>,
    pub retrans: RetransCounts,
    pub bytes: u64,
    pub data_segs: u64,
    /// Pure ACKs this side sent (acknowledging the other direction).
    pub pure_acks: u64,
    pub large_segs: u64,
    pub max_seg: u32,
    pub max_flight: u64,
    pub window_limited: u64,
    /// Receiver's ACK delay for single segments (minus the far-side
    /// minimum RTT), median.
    pub delayed_ack_ns: Option<f64>,
    pub delayed_ack_samples: u64,
    pub limitation_ns: [i64; BUCKETS],
    pub limitation: Option<[f64; BUCKETS]>,
    pub cc: CcHint,
    pub slow_start_ns: i64,
    pub congestion_avoidance_ns: i64,
    pub slow_start_rounds: u32,
    pub congestion_avoidance_rounds: u32,
    pub cwnd_max: u64,
    /// Zero-window episodes this side advertised, their time and the
    /// probes the other side sent.
    pub zw_episodes: u32,
    pub zw_ns: i64,
    pub zw_probes: u32,
}

/// What a connection did, for the `tcp_connections` table. Indexed by
/// direction (0 = `a` → `b`); client/server naming happens at table time.
#[derive(Debug, Clone)]
pub struct ConnSummary {
    pub first_ts: i64,
    pub last_ts: i64,
    /// SYN/ACK → ACK and SYN → SYN/ACK.
    pub hs_client_ns: Option<i64>,
    pub hs_server_ns: Option<i64>,
    pub syn_retransmitted: bool,
    pub window_scale_inferred: bool,
    pub dirs: [DirSummary; 2],
    pub idle_count: u32,
    pub idle_ns: i64,
    pub rtt_samples: u64,
}

impl ConnSummary {
    pub fn duration_ns(&self) -> i64 {
        (self.last_ts - self.first_ts).max(0)
    }
}

/// The metrics state of one live connection.
#[derive(Debug, Clone)]
pub struct ConnMetrics {
    stream: u32,
    first_ts: Option<i64>,
    last_ts: i64,
    flows: [Flow; 2],
    rtt: Rtt,
    ws: WindowScale,
    zw: ZeroWindow,
    lim: Limitation,
    quiet_since: Option<i64>,
    idle_count: u32,
    idle_ns: i64,
}

impl ConnMetrics {
    pub fn new(stream: u32) -> Self {
        let seed = u64::from(stream).wrapping_mul(0x100_0000_01b3) ^ 0xcbf2_9ce4_8422_2325;
        ConnMetrics {
            stream,
            first_ts: None,
            last_ts: 0,
            flows: [Flow::new(), Flow::new()],
            rtt: Rtt::new(seed),
            ws: WindowScale::default(),
            zw: ZeroWindow::default(),
            lim: Limitation::default(),
            quiet_since: None,
            idle_count: 0,
            idle_ns: 0,
        }
    }

    /// Segments not kept in the bounded lists.
    pub fn untracked(&self) -> u64 {
        self.flows[0].untracked + self.flows[1].untracked
    }

    /// Full RTT estimate: the sum of the two sides' smallest times, once
    /// both are known.
    fn full_rtt(&self) -> Option<i64> {
        Some(self.rtt.far_min_ns(0)? + self.rtt.far_min_ns(1)?)
    }

    /// The state of `dir` after the frame at `now`. A direction that sent
    /// data within the last RTT counts as busy even with nothing
    /// unacknowledged at the capture point (near the receiver, data is
    /// acknowledged moments after it passes).
    fn dir_state(&self, dir: usize, now: i64) -> DirState {
        let fl = &self.flows[dir];
        let recent = fl.cwnd.bytes_per_rtt_at(now);
        let active = fl.outstanding() > 0
            || (recent > 0
                && fl
                    .last_send_ts
                    .zip(self.full_rtt())
                    .is_some_and(|(t, r)| now - t < r));
        let outstanding = if active { fl.outstanding().max(1) } else { 0 };
        let flight = if active {
            fl.outstanding().max(recent)
        } else {
            0
        };
        DirState {
            zero_window: self.zw.is_open(1 - dir),
            in_recovery: fl.in_recovery,
            flight,
            outstanding,
            rwnd: self.ws.current(1 - dir),
            at_edge: active && fl.at_edge,
            drained: fl.drained,
        }
    }

    pub fn update(&mut self, x: &Input<'_, '_>, sink: &mut Sinks) {
        let d = x.dir;
        let f = 1 - d;
        let ts = x.ts;
        let t = x.tcp;
        let stream = self.stream;
        let syn = t.has(SYN);
        let rst = t.has(RST);

        // The interval since the previous frame, classified per direction.
        match self.first_ts {
            None => {
                self.first_ts = Some(ts);
                self.last_ts = ts;
            }
            Some(_) if ts > self.last_ts => {
                let (from, dt) = (self.last_ts, ts - self.last_ts);
                for dir in 0..2 {
                    let st = self.dir_state(dir, from);
                    self.lim.add(dir, &st, dt);
                    if st.zero_window {
                        sink.series
                            .add_span(stream, dir, from, ts, |b, ns| b.stalled_ns += ns);
                    }
                }
                self.last_ts = ts;
            }
            Some(_) => {}
        }
        sink.series.observe(ts);

        // Per-frame facts.
        if let Some(ip) = x.ip {
            let fl = &mut self.flows[d];
            // (TTL 0 cannot be seen on a network: rewritten or anonymised.)
            if ip.ttl > 0 {
                fl.ttl_max = Some(fl.ttl_max.map_or(ip.ttl, |m| m.max(ip.ttl)));
            }
            if ip.version == 4 {
                match fl.first_ip_id {
                    None => fl.first_ip_id = Some(ip.id),
                    Some(id) if id != ip.id => fl.ids_vary = true,
                    _ => {}
                }
                if let Some(last) = fl.last_ip_id {
                    fl.id_steps = fl.id_steps.saturating_add(1);
                    if (1..=4096).contains(&(ip.id.wrapping_sub(last) & 0xffff)) {
                        fl.id_forward = fl.id_forward.saturating_add(1);
                    }
                }
                fl.last_ip_id = Some(ip.id);
            }
        }
        self.rtt.hs.on_segment(d, ts, t.flags, t.seq, t.ack);
        if syn {
            if let Some(m) = t.options.mss {
                self.flows[d].mss = Some(m);
                self.flows[f].cwnd.set_mss(u64::from(m));
            }
        }
        self.ws.on_segment(d, syn, t.options.window_scale, t.window);
        if rst {
            sink.episodes.extend(self.zw.close_all(stream, ts));
        } else if !syn {
            if let Some(e) = self.zw.on_window(stream, d, x.frame, ts, t.window) {
                sink.episodes.push(e);
            }
        }
        let probe = x.flags.contains(Flag::ZeroWindowProbe) || x.flags.contains(Flag::KeepAlive);
        if probe {
            self.zw.on_probe(d);
        }

        if t.has(ACK) {
            self.on_ack(x, sink);
        }
        let class = self.on_data(x, sink, probe);
        if let Some((val, _)) = t.options.timestamp {
            let elicits = (t.payload_len > 0 && !probe) || syn || t.has(FIN);
            self.rtt.on_tsval(d, ts, val, elicits);
        }
        if !syn {
            self.flows[d].adv_win = Some(t.window);
        }

        // Idle: nothing outstanding either way, until new data.
        let outstanding = self.flows.iter().any(|fl| fl.outstanding() > 0);
        if !outstanding {
            if self.quiet_since.is_none() {
                self.quiet_since = Some(ts);
            }
        } else if let Some(q) = self.quiet_since.take() {
            self.note_idle(ts - q);
        }

        // Series.
        let flight = self.flows[d].outstanding();
        if let Some(b) = sink.series.bin(stream, d, ts) {
            b.segments += 1;
            b.bytes += u64::from(t.payload_len);
            if class.is_some() {
                b.retransmissions += 1;
            }
            if t.payload_len > 0 {
                b.max_in_flight = b.max_in_flight.max(flight);
            }
        }
        if !syn && !rst {
            if let Some(b) = sink.series.bin(stream, f, ts) {
                b.window_raw = u32::from(t.window);
            }
        }

        // Sequence-graph points.
        let want_segment = sink.segments.wants(stream);
        if want_segment || sink.seq_points.enabled() {
            let fl = &self.flows[d];
            let peer = &self.flows[f];
            let mut sack = [(0i64, 0i64); 4];
            let blocks = t.options.sack.as_slice();
            for (o, &(l, r)) in sack.iter_mut().zip(blocks) {
                *o = (peer.pos(l, peer.una), peer.pos(r, peer.una));
            }
            let seq = fl.pos(t.seq, fl.hi);
            let p = SegPoint {
                frame: x.frame,
                ts,
                stream,
                dir: d as u8,
                seq,
                len: t.payload_len,
                ack: t.has(ACK).then(|| peer.pos(t.ack, peer.una)),
                window_raw: t.window,
                syn,
                flags: t.flags,
                sack,
                sack_len: blocks.len() as u8,
                in_flight: flight,
                class,
                analysis: x.flags,
            };
            if want_segment {
                sink.segments.push(p);
            }
            sink.seq_points.push(p);
        }
    }

    fn note_idle(&mut self, gap: i64) {
        let threshold = IDLE_MIN_NS.max(self.full_rtt().unwrap_or(0));
        if gap >= threshold {
            self.idle_count += 1;
            self.idle_ns += gap;
        }
    }

    /// `r.seg` is the frame of the segment's point (see `on_data`).
    fn apply_reclass(stream: u32, sink: &mut Sinks, r: Reclassified) {
        if let Some(frame) = r.seg {
            let frame = frame as u64;
            sink.segments.set_class(frame, RetransClass::Spurious);
            sink.seq_points
                .set_class(stream, frame, RetransClass::Spurious);
        }
    }

    /// The ACK part of a segment sent in `x.dir`: it acknowledges the other
    /// direction's data.
    fn on_ack(&mut self, x: &Input<'_, '_>, sink: &mut Sinks) {
        let d = x.dir;
        let fi = 1 - d;
        let t = x.tcp;
        let ts = x.ts;
        if self.flows[fi].isn.is_none() {
            self.flows[fi].start_at(t.ack.wrapping_sub(1), 1);
        }
        let pure = t.payload_len == 0 && !t.has(SYN | FIN | RST);
        let same_window = self.flows[d].adv_win == Some(t.window);
        let far_min = self.rtt.far_min_ns(fi);
        let tsecr = t.options.timestamp.map(|(_, e)| e);
        let tsval = t.options.timestamp.map(|(v, _)| v);
        let win = (!t.has(SYN | RST)).then(|| self.ws.current(d)).flatten();
        let fl = &mut self.flows[fi];
        let a = fl.pos(t.ack, fl.una);
        let mut single = false;
        fl.cwnd.on_ack(ts, a, tsval);
        if let Some(w) = win {
            fl.note_edge(ts, a + w as i64);
        }

        // SACK blocks: D-SACK (RFC 2883) and data held above the ACK.
        let blocks = t.options.sack.as_slice();
        let mut above = false;
        for (i, &(l, r)) in blocks.iter().enumerate() {
            let (l, r) = (fl.pos(l, a), fl.pos(r, a));
            if r > a && l >= a {
                above = true;
            }
            let inside_second = i == 0
                && blocks.get(1).is_some_and(|&(l2, r2)| {
                    let (l2, r2) = (fl.pos(l2, a), fl.pos(r2, a));
                    l >= l2 && r <= r2
                });
            if i == 0 && l < r && (r <= a || inside_second) {
                if let Some(rc) = fl.retrans.on_dsack(l, r) {
                    Self::apply_reclass(self.stream, sink, rc);
                }
            }
        }

        if a > fl.una {
            let mut popped = 0u32;
            let mut any_retx = false;
            let mut last: Option<Sent> = None;
            while let Some(front) = fl.sent.front_mut() {
                if front.end <= a {
                    let s = *front;
                    fl.sent.pop_front();
                    popped += 1;
                    any_retx |= s.retx;
                    last = Some(s);
                } else {
                    if front.start < a {
                        any_retx |= front.retx;
                        front.start = a;
                    }
                    break;
                }
            }
            single = pure && popped == 1;
            if let Some(s) = last.filter(|s| !any_retx && ts >= s.ts) {
                let ns = ts - s.ts;
                self.rtt.add_data_sample(fi, ns, single);
                if !single {
                    if let Some(b) = sink.series.bin(self.stream, fi, ts) {
                        b.rtt_sum_ns += ns as f64;
                        b.rtt_samples += 1;
                    }
                }
            }
            for rc in fl.retrans.on_ack(a, ts, tsecr, far_min) {
                Self::apply_reclass(self.stream, sink, rc);
            }
            fl.holes.retain_mut(|h| {
                if h.r <= a {
                    false
                } else {
                    h.l = h.l.max(a);
                    true
                }
            });
            fl.hi = fl.hi.max(a);
            fl.una = a;
            fl.dup_acks = 0;
            fl.sacked_above = above;
            self.lim.commit(fi);
            if fl.in_recovery && a >= fl.recovery_point {
                fl.in_recovery = false;
                fl.cwnd.on_recovery_end(ts, tsval);
            }
        } else if a == fl.una {
            if pure && same_window && fl.hi > fl.una {
                fl.dup_acks += 1;
            }
            fl.sacked_above |= above;
        }

        // Timestamps: this segment echoes the other direction's TSval.
        if let Some(ecr) = tsecr {
            let prompt = t.payload_len > 0 && self.flows[d].outstanding() > 0;
            if let Some(ns) = self.rtt.on_tsecr(d, ts, ecr, prompt, single) {
                if let Some(b) = sink.series.bin(self.stream, fi, ts) {
                    if self.rtt.far_side(fi).map(|r| r.1) == Some(Source::Timestamps) {
                        b.rtt_sum_ns += ns as f64;
                        b.rtt_samples += 1;
                    }
                }
            }
        }
    }

    /// The data part of a segment sent in `x.dir`. Returns its
    /// retransmission class.
    fn on_data(
        &mut self,
        x: &Input<'_, '_>,
        sink: &mut Sinks,
        probe: bool,
    ) -> Option<RetransClass> {
        let d = x.dir;
        let t = x.tcp;
        let ts = x.ts;
        let syn = t.has(SYN);
        let fin = t.has(FIN);
        let len = t.payload_len;
        let peer_mss = self.flows[1 - d].mss;
        let full = self.full_rtt();
        let v = Vantage {
            near_min_ns: self.rtt.far_min_ns(1 - d),
            full_min_ns: full,
        };
        let rwnd = self.ws.current(1 - d);
        let fl = &mut self.flows[d];
        match fl.isn {
            None if syn => fl.start_at(t.seq, 0),
            None => fl.start_at(t.seq.wrapping_sub(1), 1),
            // A SYN with another ISN (Wireshark's port reuse): start over.
            Some(isn) if syn && isn != t.seq => fl.start_at(t.seq, 0),
            Some(_) => {}
        }
        if probe {
            return None;
        }
        let s = fl.pos(t.seq, fl.hi);
        let e = s + i64::from(len) + i64::from(syn) + i64::from(fin);
        if e == s {
            if t.has(ACK) && !t.has(RST) {
                fl.pure_acks += 1;
            }
            return None;
        }
        let retx = x.flags.contains(Flag::Retransmission);
        let ooo = x.flags.contains(Flag::OutOfOrder);
        let hash = x.payload_hash ^ u64::from(t.flags & (SYN | FIN));
        let ip_id = x.ip.filter(|ip| ip.version == 4).map(|ip| ip.id);
        let netdup =
            fl.ids_vary && ip_id.is_some_and(|id| fl.retrans.is_duplicate(s, len, id, hash));
        let hi_before = fl.hi;
        // A segment filling a hole is a late original (reordering), not a
        // retransmission, when the sender's IPv4 IDs (sent in order) show it
        // left before the data above the hole, or, without usable IDs, when
        // it came sooner than half the minimum RTT after the hole opened: a
        // retransmission needs the receiver's duplicate ACKs to reach the
        // sender and the new copy to come back, a full RTT at any capture
        // point.
        let reordered = len > 0
            && fl.hole_at(s, e).is_some_and(|h| {
                let by_id = match (fl.ids_sequential(), h.opener_id, ip_id) {
                    (true, Some(o), Some(id)) => {
                        Some((1..0x8000).contains(&(o.wrapping_sub(id) & 0xffff)))
                    }
                    _ => None,
                };
                by_id.unwrap_or_else(|| full.is_some_and(|m| 2 * (ts - h.ts) < m))
            });
        let mut class = None;
        if retx || (ooo && netdup) {
            let ev = Evidence {
                network_duplicate: netdup,
                already_acked: x.flags.contains(Flag::SpuriousRetransmission)
                    || (len > 0 && e <= fl.una),
                reordered,
                wireshark_fast: x.flags.contains(Flag::FastRetransmission),
                dup_acks: fl.dup_acks,
                sacked_above: fl.sacked_above,
                in_fast_recovery: fl.in_recovery && fl.recovery_fast,
            };
            let c = classify(&ev);
            let site = match c {
                RetransClass::Spurious
                | RetransClass::NetworkDuplicate
                | RetransClass::Reordered => None,
                _ if fl.in_hole(s, e) => Some(LossSite::BeforeCapture),
                _ if s >= fl.seen_from && e <= fl.hi => Some(LossSite::AfterCapture),
                _ => Some(LossSite::Unknown),
            };
            let stall = match (c, fl.last_send_ts) {
                (RetransClass::Timeout, Some(l)) => Some(ts - l),
                _ => None,
            };
            let seg = (sink.segments.wants(self.stream) || sink.seq_points.enabled())
                .then_some(x.frame as usize);
            let tsval = t.options.timestamp.map(|(v, _)| v);
            fl.retrans.record(c, site, s, e, ts, tsval, stall, seg);
            class = Some(c);
            if c != RetransClass::NetworkDuplicate {
                fl.mark_retx(s, e, ts);
            }
            fl.fill_holes(s, e);
            if matches!(c, RetransClass::Timeout | RetransClass::Fast) {
                self.lim.to_loss(d);
                if !fl.in_recovery {
                    fl.in_recovery = true;
                    fl.recovery_fast = c == RetransClass::Fast;
                    fl.recovery_point = fl.hi.max(e);
                }
                fl.cwnd.on_loss(c == RetransClass::Fast, ts, v);
            }
        } else if ooo {
            fl.mark_retx(s, e, ts);
            fl.fill_holes(s, e);
        }

        if e > fl.hi {
            if s > fl.hi && !syn && fl.holes.len() < MAX_HOLES {
                fl.holes.push(Hole {
                    l: fl.hi,
                    r: s,
                    ts,
                    opener_id: ip_id,
                });
                fl.cwnd.on_hole(ts);
            }
            if len > 0 {
                if fl.sent.len() < MAX_SENT {
                    fl.sent.push_back(Sent {
                        start: s.max(fl.hi),
                        end: e,
                        ts,
                        retx: class.is_some(),
                    });
                } else {
                    fl.untracked += 1;
                }
            }
            fl.hi = e;
            if len > 0 {
                // A full segment: the MSS, or the largest seen when smaller
                // (options, path MTU), once full-sized ones were seen.
                let seen = fl.max_seg.max(len);
                let full = if seen >= MIN_FULL {
                    peer_mss.map_or(seen, |m| seen.min(u32::from(m)))
                } else {
                    peer_mss.map_or(MIN_FULL, u32::from)
                };
                fl.drained = len + SHORT_BY < full;
            }
            if fin {
                fl.drained = true;
            }
        }
        if len > 0 {
            fl.bytes += u64::from(len);
            fl.data_segs += 1;
            let limit = peer_mss.map_or(8960, u32::from);
            if len > limit {
                fl.large_segs += 1;
            }
            fl.max_seg = fl.max_seg.max(len);
            fl.cwnd.set_mss(u64::from(len.min(limit)));
        }
        if let Some(id) = ip_id {
            fl.retrans.note_tx(s, len, id, hash);
        }
        fl.last_send_ts = Some(ts);
        let flight = fl.outstanding();
        fl.max_flight = fl.max_flight.max(flight);
        if len > 0 {
            let new_data = class.is_none() && !ooo && e > hi_before;
            if new_data {
                // The sender filled the window it knew (the edge advertised
                // a near-side RTT ago): receive-window limited, whatever
                // the capture point.
                let mss = i64::from(peer_mss.map_or(fl.max_seg, |m| u32::from(m).min(fl.max_seg)));
                fl.at_edge = fl
                    .known_edge(ts - v.near_min_ns.unwrap_or(0))
                    .is_some_and(|k| k - e < mss.max(1));
            }
            fl.cwnd.on_send(
                &Send {
                    ts,
                    end: e,
                    bytes: u64::from(len),
                    new_data,
                    tsecr: t.options.timestamp.map(|(_, ecr)| ecr),
                    drained: new_data && fl.drained,
                    rwnd,
                },
                v,
            );
            let est = flight.max(fl.cwnd.bytes_per_rtt_at(ts));
            if rwnd.is_some_and(|w| w > 0 && est * 10 >= w * 9) || (new_data && fl.at_edge) {
                fl.window_limited += 1;
            }
        }
        // Near the receiver the flight is not visible as unacknowledged
        // bytes; what was sent in the last round trip stands for it.
        let est = flight.max(fl.cwnd.bytes_per_rtt_at(ts));
        self.ws.observe_flight(1 - d, est);
        class
    }

    /// The summary, and the episodes still open (closed at the last frame).
    pub fn finish(mut self) -> (ConnSummary, Vec<Episode>) {
        let episodes = self.zw.close_all(self.stream, self.last_ts);
        if let Some(q) = self.quiet_since.take() {
            self.note_idle(self.last_ts - q);
        }
        let first = self.first_ts.unwrap_or(self.last_ts);
        let duration = (self.last_ts - first).max(0);
        let mut inferred = false;
        let dirs = [0usize, 1].map(|dir| {
            let fl = &self.flows[dir];
            let (shift, inf) = self.ws.shift(dir);
            // Only a side that advertised windows makes the flag true.
            inferred |= inf && fl.adv_win.is_some();
            let far_rtt = self.rtt.far_side(dir).map(|(r, source)| SideRtt {
                min_ns: r.min().unwrap_or(0.0),
                median_ns: r.quantile(0.5).unwrap_or(0.0),
                p95_ns: r.quantile(0.95).unwrap_or(0.0),
                samples: r.count(),
                source,
            });
            let far_min = self.rtt.far_min_ns(dir).unwrap_or(0) as f64;
            let cc = fl.cwnd.hint(Vantage {
                near_min_ns: self.rtt.far_min_ns(1 - dir),
                full_min_ns: self.full_rtt(),
            });
            DirSummary {
                mss: fl.mss,
                window_scale: shift,
                ttl_max: fl.ttl_max,
                far_rtt,
                far_min_ns: self.rtt.far_min_ns(dir),
                retrans: fl.retrans.counts,
                bytes: fl.bytes,
                data_segs: fl.data_segs,
                pure_acks: fl.pure_acks,
                large_segs: fl.large_segs,
                max_seg: fl.max_seg,
                max_flight: fl.max_flight,
                window_limited: fl.window_limited,
                delayed_ack_ns: self
                    .rtt
                    .single(dir)
                    .quantile_map(0.5, |v| (v - far_min).max(0.0)),
                delayed_ack_samples: self.rtt.single(dir).count(),
                limitation_ns: self.lim.totals(dir),
                limitation: self.lim.shares(dir, duration),
                cc,
                slow_start_ns: fl.cwnd.ss_ns,
                congestion_avoidance_ns: fl.cwnd.ca_ns,
                slow_start_rounds: fl.cwnd.ss_rounds,
                congestion_avoidance_rounds: fl.cwnd.ca_rounds,
                cwnd_max: fl.cwnd.cwnd_max,
                zw_episodes: self.zw.episodes[dir],
                zw_ns: self.zw.stalled_ns[dir],
                zw_probes: self.zw.probes[dir],
            }
        });
        let summary = ConnSummary {
            first_ts: first,
            last_ts: self.last_ts,
            hs_client_ns: self.rtt.hs.client_side_ns(),
            hs_server_ns: self.rtt.hs.server_side_ns(),
            syn_retransmitted: self.rtt.hs.syn_retransmitted,
            window_scale_inferred: inferred,
            dirs,
            idle_count: self.idle_count,
            idle_ns: self.idle_ns,
            rtt_samples: self.rtt.samples(),
        };
        (summary, episodes)
    }
}

#[cfg(test)]
mod tests {
    use nastriage_net::tcp_flags::{ACK, FIN, SYN};
    use nastriage_net::{SackBlocks, TcpOptions};

    use super::super::{TcpAnalysis, TcpAnalyzer};
    use super::*;
    use crate::conversations::Assignment;

    const MS: i64 = 1_000_000;

    /// Drives one connection (stream 0) through the whole TCP analyser;
    /// direction 0 is the client. Times in ms from 1000 s.
    struct Drive {
        t: TcpAnalyzer,
        frame: u64,
        ip_id: [u32; 2],
    }

    impl Drive {
        fn new() -> Self {
            Drive {
                t: TcpAnalyzer::default(),
                frame: 0,
                ip_id: [100, 5000],
            }
        }

        #[allow(clippy::too_many_arguments)]
        fn send(
            &mut self,
            dir: u8,
            at_ms: f64,
            seq: u32,
            ack: u32,
            len: u32,
            flags: u16,
            win: u16,
            opts: TcpOptions,
        ) {
            self.frame += 1;
            let d = dir as usize;
            self.ip_id[d] += 1;
            let payload = vec![seq as u8; len as usize];
            let tcp = TcpSegment {
                src_port: if dir == 0 { 40000 } else { 2049 },
                dst_port: if dir == 0 { 2049 } else { 40000 },
                seq,
                ack,
                flags,
                window: win,
                header_len: 20,
                options: opts,
                payload_len: len,
                payload: &payload,
            };
            let ip = IpInfo {
                version: 4,
                src: [10, 0, 0, 1 + dir].into(),
                dst: [10, 0, 0, 2 - dir].into(),
                ttl: if dir == 0 { 64 } else { 62 },
                id: self.ip_id[d],
                proto: 6,
                payload_len: len + 20,
                dont_fragment: true,
                reassembled: false,
            };
            let asg = Assignment {
                stream: 0,
                dir,
                reused_ports: false,
                replaced: None,
            };
            let ts = 1_000_000 * MS + (at_ms * 1e6) as i64;
            self.t.update(self.frame, ts, &asg, &tcp, Some(&ip));
        }

        fn plain(&mut self, dir: u8, at: f64, seq: u32, ack: u32, len: u32, flags: u16) {
            self.send(dir, at, seq, ack, len, flags, 500, TcpOptions::default());
        }

        /// Client ISN 1000, server ISN 5000, RTT 10 ms seen from the client.
        fn handshake(&mut self) {
            let syn = TcpOptions {
                mss: Some(1460),
                window_scale: Some(7),
                ..Default::default()
            };
            self.send(0, 0.0, 1000, 0, 0, SYN, 64240, syn);
            self.send(1, 10.0, 5000, 1001, 0, SYN | ACK, 65160, syn);
            self.plain(0, 10.01, 1001, 5001, 0, ACK);
        }

        fn finish(self) -> TcpAnalysis {
            self.t.finish()
        }
    }

    #[test]
    fn handshake_rtt_mss_scale_and_capture_point() {
        let mut d = Drive::new();
        d.handshake();
        d.plain(0, 11.0, 1001, 5001, 100, ACK);
        d.plain(1, 21.0, 5001, 1101, 0, ACK);
        let out = d.finish();
        let m = out.summary(0).unwrap();
        assert_eq!(m.hs_server_ns, Some(10 * MS));
        assert_eq!(m.hs_client_ns, Some(10_000));
        assert_eq!(m.dirs[0].mss, Some(1460));
        assert_eq!(m.dirs[1].window_scale, 7);
        assert!(!m.window_scale_inferred);
        // One data → ACK sample: a single segment acked by a pure ACK.
        assert_eq!(m.dirs[0].far_rtt.unwrap().source, Source::SingleAck);
        assert_eq!(m.dirs[0].far_rtt.unwrap().min_ns, (10 * MS) as f64);
        assert_eq!(m.dirs[1].ttl_max, Some(62));
    }

    #[test]
    fn timeout_then_dsack_is_spurious_and_karn_skips_the_sample() {
        let mut d = Drive::new();
        d.handshake();
        d.plain(0, 20.0, 1001, 5001, 100, ACK);
        d.plain(0, 220.0, 1001, 5001, 100, ACK); // RTO
        d.plain(1, 230.0, 5001, 1101, 0, ACK);
        let sack = TcpOptions {
            sack: SackBlocks {
                len: 1,
                blocks: [(1001, 1101), (0, 0), (0, 0), (0, 0)],
            },
            ..Default::default()
        };
        d.send(1, 231.0, 5001, 1101, 0, ACK, 500, sack); // D-SACK
        let out = d.finish();
        let m = out.summary(0).unwrap();
        let r = &m.dirs[0].retrans;
        assert_eq!(r.get(RetransClass::Spurious), 1);
        assert_eq!(r.get(RetransClass::Timeout), 0);
        assert_eq!(r.by_site, [0, 0, 0]);
        assert_eq!(r.stall_max_ns, 200 * MS);
        assert_eq!(r.dsacks, 1);
        // Karn: the retransmitted segment gave no sample.
        assert!(m.dirs[0].far_rtt.is_none());
        let lim = m.dirs[0].limitation.unwrap();
        assert!((lim.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        assert!(lim[1] > 0.8, "{lim:?}");
    }

    #[test]
    fn hole_filled_later_was_lost_before_capture() {
        let mut d = Drive::new();
        d.handshake();
        d.plain(1, 20.0, 5001, 1001, 1000, ACK);
        d.plain(1, 20.1, 7001, 1001, 1000, ACK); // 6001..7001 never seen
        for k in 0..3 {
            d.plain(0, 20.2 + f64::from(k) * 0.01, 1001, 6001, 0, ACK);
        }
        d.plain(1, 30.0, 6001, 1001, 1000, ACK);
        d.plain(0, 30.01, 1001, 8001, 0, ACK);
        let m = d.finish().summary(0).cloned().unwrap();
        let r = &m.dirs[1].retrans;
        assert_eq!(r.get(RetransClass::Fast), 1);
        assert_eq!(r.by_site, [1, 0, 0]);
        assert_eq!(m.dirs[1].cc.hint, "unknown");
    }

    /// A segment sent twice with the same IP ID, then the client's window
    /// closed for 500 ms (from 22 ms).
    fn duplicate_then_zero_window() -> Drive {
        let mut d = Drive::new();
        d.handshake();
        d.plain(1, 20.0, 5001, 1001, 100, ACK);
        // The same packet again: same IP ID and payload.
        d.ip_id[1] -= 1;
        d.plain(1, 20.001, 5001, 1001, 100, ACK);
        d.plain(0, 21.0, 1001, 5101, 0, ACK); // window 500
        d.send(0, 22.0, 1001, 5101, 0, ACK, 0, TcpOptions::default());
        d.send(0, 522.0, 1001, 5101, 0, ACK, 300, TcpOptions::default());
        d
    }

    #[test]
    fn duplicate_with_same_ip_id_and_zero_window_episode() {
        let mut d = duplicate_then_zero_window();
        d.plain(0, 1022.0, 1001, 5101, 0, ACK | FIN);
        let out = d.finish();
        let m = out.summary(0).unwrap();
        assert_eq!(m.dirs[1].retrans.get(RetransClass::NetworkDuplicate), 1);
        assert_eq!(m.dirs[1].retrans.total(), 1);
        assert_eq!(m.dirs[0].zw_episodes, 1);
        assert_eq!(m.dirs[0].zw_ns, 500 * MS);
        assert_eq!(out.episodes().len(), 1);
        assert!(out.episodes()[0].resolved);
        let lim = m.dirs[1].limitation.unwrap();
        assert!((lim[0] - 500.0 / 1022.0).abs() < 1e-9, "{lim:?}");
        assert!(m.idle_count >= 1);
    }

    /// What the analysis keeps reads the same after it is copied by
    /// another thread (`TcpAnalysis::relocate`, after the pass).
    #[test]
    fn relocated_analysis_reads_the_same() {
        let mut d = duplicate_then_zero_window();
        for k in 0..50u32 {
            d.plain(1, 600.0 + f64::from(k), 5101 + k * 100, 1001, 100, ACK);
        }
        d.plain(0, 1022.0, 1001, 10101, 0, ACK | FIN);
        let mut out = d.finish();
        let read = |t: &TcpAnalysis| {
            format!(
                "{:?} {:?} {:?} {:?} {:?}",
                t.summary(0),
                t.series().iter().collect::<Vec<_>>(),
                t.episodes(),
                t.events().iter().collect::<Vec<_>>(),
                t.flagged_streams().collect::<Vec<_>>(),
            )
        };
        let before = read(&out);
        assert!(before.contains("reasoning"), "{before}");
        std::thread::scope(|s| {
            s.spawn(|| out.relocate());
        });
        assert_eq!(read(&out), before);
    }

    #[test]
    fn late_original_is_reordering_and_a_late_copy_is_a_loss() {
        // Captured next to the client (10 ms to the server and back); the
        // server's IPv4 IDs count up by one per segment.
        let mut d = Drive::new();
        d.handshake();
        let mut seq = 5001u32;
        for k in 0..30 {
            let t = 20.0 + f64::from(k) * 0.1;
            d.plain(1, t, seq, 1001, 1000, ACK);
            seq += 1000;
            d.plain(0, t + 0.05, 1001, seq, 0, ACK);
        }
        // The segment at `seq` is overtaken by the next two, then arrives
        // 1 ms later with its own, older, IP ID.
        let id = d.ip_id[1] + 1;
        d.ip_id[1] = id;
        d.plain(1, 25.0, seq + 1000, 1001, 1000, ACK);
        d.plain(0, 25.01, 1001, seq, 0, ACK);
        d.plain(1, 25.1, seq + 2000, 1001, 1000, ACK);
        d.plain(0, 25.11, 1001, seq, 0, ACK);
        let next = d.ip_id[1];
        d.ip_id[1] = id - 1;
        d.plain(1, 26.0, seq, 1001, 1000, ACK);
        d.ip_id[1] = next;
        seq += 3000;
        d.plain(0, 26.01, 1001, seq, 0, ACK);
        // A real loss: the hole is filled a full RTT later by a new copy
        // (a newer IP ID).
        d.plain(1, 30.0, seq + 1000, 1001, 1000, ACK);
        d.plain(0, 30.01, 1001, seq, 0, ACK);
        d.plain(1, 30.1, seq + 2000, 1001, 1000, ACK);
        d.plain(0, 30.11, 1001, seq, 0, ACK);
        d.plain(1, 30.2, seq + 3000, 1001, 1000, ACK);
        d.plain(0, 30.21, 1001, seq, 0, ACK);
        d.plain(1, 40.1, seq, 1001, 1000, ACK);
        d.plain(0, 40.11, 1001, seq + 4000, 0, ACK);
        let out = d.finish();
        let m = out.summary(0).unwrap();
        let r = &m.dirs[1].retrans;
        assert_eq!(r.get(RetransClass::Reordered), 1, "{r:?}");
        assert_eq!(r.get(RetransClass::Fast), 1, "{r:?}");
        assert_eq!(r.by_site, [1, 0, 0], "only the real loss has a place");
        // Only the real loss put the sender in loss recovery.
        let lim = m.dirs[1].limitation.unwrap();
        assert!(lim[1] > 0.0 && lim[1] < 0.7, "{lim:?}");
    }

    #[test]
    fn window_edge_reached_is_receive_window_limited_next_to_the_receiver() {
        // Next to the client: every ACK opens a 4096-byte window (32 << 7)
        // and the server fills it one RTT (10 ms) later; nothing stays
        // unacknowledged at the capture point.
        let mut d = Drive::new();
        d.handshake();
        let mut seq = 5001u32;
        d.send(0, 10.5, 1001, seq, 0, ACK, 32, TcpOptions::default());
        for k in 0..20 {
            let t = 20.0 + f64::from(k) * 10.0;
            for i in 0..4 {
                d.plain(1, t + f64::from(i) * 0.01, seq, 1001, 1000, ACK);
                seq += 1000;
            }
            d.send(0, t + 0.05, 1001, seq, 0, ACK, 32, TcpOptions::default());
        }
        let m = d.finish().summary(0).cloned().unwrap();
        let lim = m.dirs[1].limitation.unwrap();
        assert!(lim[2] > 0.8, "{lim:?}");
        assert!(
            m.dirs[1].window_limited >= 70,
            "{}",
            m.dirs[1].window_limited
        );
    }

    #[test]
    fn sequence_numbers_wrap_without_false_alarms() {
        let mut d = Drive::new();
        let syn = TcpOptions::default();
        d.send(0, 0.0, 0xffff_fff0, 0, 0, SYN, 64240, syn);
        d.send(1, 1.0, 0xffff_ff00, 0xffff_fff1, 0, SYN | ACK, 65160, syn);
        d.plain(0, 1.01, 0xffff_fff1, 0xffff_ff01, 0, ACK);
        let mut seq = 0xffff_ff01u32;
        for k in 0..10 {
            d.plain(1, 2.0 + f64::from(k), seq, 0xffff_fff1, 100, ACK);
            seq = seq.wrapping_add(100);
            d.plain(0, 2.5 + f64::from(k), 0xffff_fff1, seq, 0, ACK);
        }
        let out = d.finish();
        let m = out.summary(0).unwrap();
        assert_eq!(m.dirs[1].retrans.total(), 0);
        assert_eq!(m.dirs[1].max_flight, 100);
        assert_eq!(m.dirs[1].bytes, 1000);
        assert!(m.dirs[1].far_rtt.is_some());
        assert_eq!(out.totals().total(), 0);
    }
}
