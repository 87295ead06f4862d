//! Reduced sequence-graph points for every connection, in the single pass
//! (the `tcp_seq_points` and `tcp_seq_reduction` tables).
//!
//! Unlike [`super::segments::SegmentStore`] (every segment, for streams
//! named in advance), this keeps a bounded log per connection and direction,
//! reduced as it streams (no look-ahead):
//!
//! * **flagged** points are always kept: a Wireshark flag or a
//!   retransmission class on the segment;
//! * **context**: the [`SeqPointsConfig::context`] segments before and after
//!   a flagged one, in both directions of the connection (at most
//!   `per_dir` such points per direction);
//! * the **ordinary** rest is exact until it exceeds `per_dir` points, then
//!   bucketed by time: each bucket keeps its first and last point, the data
//!   segments reaching lowest and highest, the ACKs with the lowest and
//!   highest window edge (ACK + window), the point with the most bytes in
//!   flight and the SACK block reaching furthest. The bucket width starts at
//!   1 µs and doubles (merging pairs of buckets) whenever the direction's
//!   ordinary points exceed `per_dir`.
//!
//! A global cap bounds the points of all connections: past it, the logs of
//! the connections with the fewest segments so far are dropped (until 90 %
//! of the cap is left) and recorded no more.

use std::collections::{HashMap, HashSet, VecDeque};

use super::retrans_class::RetransClass;
use super::segments::SegPoint;

/// Points one bucket keeps at most (see [`select`]).
pub const PER_BUCKET: usize = 8;
/// First bucket width when a direction starts being reduced.
const FIRST_WIDTH_NS: i64 = 1_000;

#[derive(Debug, Clone, Copy)]
pub struct SeqPointsConfig {
    /// Ordinary points kept per connection and direction; 0 disables.
    pub per_dir: usize,
    /// Points kept over all connections (flagged ones included).
    pub total: usize,
    /// Segments kept before and after each flagged one.
    pub context: usize,
}

impl Default for SeqPointsConfig {
    fn default() -> Self {
        SeqPointsConfig {
            per_dir: 4000,
            total: 1_000_000,
            context: 8,
        }
    }
}

/// One kept point; `bucketed` when it stands for a reduced bucket.
#[derive(Debug, Clone, Copy)]
pub struct Kept {
    pub p: SegPoint,
    pub bucketed: bool,
}

#[derive(Debug, Clone, Default)]
pub struct DirLog {
    /// Flagged and context points, in arrival order.
    kept: Vec<SegPoint>,
    /// The last ordinary points (possible context of a coming flag).
    recent: VecDeque<SegPoint>,
    /// Ordinary points: (bucket, point), sorted by bucket.
    ord: Vec<(i64, SegPoint)>,
    /// Bucket width (0: not reduced, every ordinary point kept).
    width: i64,
    origin: i64,
    /// Context points still to keep after a flag.
    after: usize,
    pub seen: u64,
    pub flagged: u64,
    pub context: u64,
}

impl DirLog {
    fn len(&self) -> usize {
        self.kept.len() + self.recent.len() + self.ord.len()
    }

    /// Bucket width in ns (0 when every point was kept).
    pub fn width(&self) -> i64 {
        self.width
    }

    /// Points kept, in frame order.
    pub fn points(&self) -> Vec<Kept> {
        let bucketed = self.width > 0;
        let mut v: Vec<Kept> = self
            .kept
            .iter()
            .chain(self.recent.iter())
            .map(|&p| Kept { p, bucketed: false })
            .chain(self.ord.iter().map(|&(_, p)| Kept { p, bucketed }))
            .collect();
        v.sort_by_key(|k| k.p.frame);
        v
    }

    fn key(&self, ts: i64) -> i64 {
        ts.saturating_sub(self.origin).div_euclid(self.width)
    }

    fn add_ordinary(&mut self, p: SegPoint, budget: usize) {
        if self.ord.is_empty() && self.width == 0 {
            self.origin = p.ts;
        }
        if self.width == 0 {
            self.ord.push((0, p));
            if self.ord.len() > budget {
                self.width = FIRST_WIDTH_NS;
                let ks: Vec<i64> = self.ord.iter().map(|(_, q)| self.key(q.ts)).collect();
                for (e, k) in self.ord.iter_mut().zip(ks) {
                    e.0 = k;
                }
                // (arrival order; a timestamp going back is rare)
                self.ord.sort_by_key(|(k, q)| (*k, q.frame));
                self.merge_all();
            }
        } else {
            let k = self.key(p.ts);
            // Timestamps mostly grow: the point usually joins the last bucket.
            let at = match self.ord.last() {
                Some((b, _)) if *b <= k => self.ord.len(),
                _ => self.ord.partition_point(|(b, _)| *b <= k),
            };
            self.ord.insert(at, (k, p));
            let start = self.ord[..at].partition_point(|(b, _)| *b < k);
            let end = at + 1;
            if end - start > PER_BUCKET {
                reduce_range(&mut self.ord, start, end);
            }
        }
        while self.width > 0 && self.ord.len() > budget.max(PER_BUCKET) {
            self.width = self.width.saturating_mul(2);
            for e in self.ord.iter_mut() {
                e.0 = e.0.div_euclid(2);
            }
            self.merge_all();
        }
    }

    /// Re-select every bucket (after keys changed).
    fn merge_all(&mut self) {
        let old = std::mem::take(&mut self.ord);
        let mut i = 0;
        while i < old.len() {
            let k = old[i].0;
            let mut j = i;
            while j < old.len() && old[j].0 == k {
                j += 1;
            }
            let (idx, n) = select_idx(j - i, |x| &old[i + x].1);
            self.ord.extend(idx[..n].iter().map(|&x| old[i + x]));
            i = j;
        }
    }
}

fn is_data(p: &SegPoint) -> bool {
    p.len > 0
}

fn edge(p: &SegPoint) -> Option<i64> {
    p.ack.map(|a| a + i64::from(p.window_raw))
}

/// The points of one bucket to keep (at most [`PER_BUCKET`], frame order):
/// first, last, lowest and highest data, lowest and highest window edge,
/// most in flight, furthest SACK block.
pub fn select(group: &[SegPoint]) -> Vec<SegPoint> {
    let (idx, n) = select_idx(group.len(), |i| &group[i]);
    idx[..n].iter().map(|&i| group[i]).collect()
}

/// [`select`] as indices into a group of `len` points given by `at` (in
/// frame order), without allocating: it runs for every ordinary segment.
/// Every criterion is an extreme with a unique tie-break (the frame), so
/// reducing a bucket in steps keeps the same points as reducing it at once.
fn select_idx<'a>(len: usize, at: impl Fn(usize) -> &'a SegPoint) -> ([usize; PER_BUCKET], usize) {
    let mut out = [0usize; PER_BUCKET];
    if len <= 2 {
        for (i, o) in out.iter_mut().enumerate().take(len) {
            *o = i;
        }
        return (out, len);
    }
    // Best index per criterion: smaller key wins.
    let mut best: [Option<(usize, (i64, u64))>; PER_BUCKET] = [None; PER_BUCKET];
    let mut offer = |slot: usize, i: usize, key: (i64, u64)| {
        let better = match best[slot] {
            Some((_, k)) => key < k,
            None => true,
        };
        if better {
            best[slot] = Some((i, key));
        }
    };
    for i in 0..len {
        let p = at(i);
        let f = p.frame;
        offer(0, i, (0, f)); // first frame
        offer(1, i, (0, u64::MAX - f)); // last frame
        if is_data(p) {
            offer(2, i, (p.seq, f));
            offer(3, i, ((p.seq + i64::from(p.len)).saturating_neg(), f));
        }
        if let Some(e) = edge(p) {
            offer(4, i, (e, f));
            offer(5, i, (e.saturating_neg(), f));
        }
        if p.sack_len > 0 {
            let reach = p.sack[..p.sack_len as usize].iter().map(|b| b.1).max();
            // Furthest block, the later frame among equals.
            offer(
                7,
                i,
                (reach.map_or(i64::MAX, i64::saturating_neg), u64::MAX - f),
            );
        }
    }
    // Most in flight (a u64): its own scan.
    best[6] = (0..len)
        .max_by_key(|&i| (at(i).in_flight, u64::MAX - at(i).frame))
        .map(|i| (i, (0, 0)));
    let mut n = 0;
    for (i, _) in best.iter().flatten() {
        out[n] = *i;
        n += 1;
    }
    out[..n].sort_unstable_by_key(|&i| at(i).frame);
    // Dedup (the same point may win several criteria).
    let mut w = 0;
    for r in 0..n {
        if w == 0 || at(out[w - 1]).frame != at(out[r]).frame {
            out[w] = out[r];
            w += 1;
        }
    }
    (out, w)
}

/// Reduce the bucket `v[start..end]` in place to the points [`select`] keeps
/// (frame order), moving what follows it down. Returns the bucket's new end.
fn reduce_range(v: &mut Vec<(i64, SegPoint)>, start: usize, end: usize) -> usize {
    let (idx, n) = select_idx(end - start, |i| &v[start + i].1);
    for (w, &i) in idx[..n].iter().enumerate() {
        // idx is increasing (group in frame order), so i >= w: no overwrite.
        v.swap(start + w, start + i);
    }
    v.drain(start + n..end);
    start + n
}

#[derive(Debug, Clone, Default)]
struct StreamLog {
    dirs: [DirLog; 2],
}

/// Reduced points of every connection.
#[derive(Debug, Clone, Default)]
pub struct SeqPoints {
    cfg: Option<SeqPointsConfig>,
    logs: HashMap<u32, StreamLog>,
    /// Streams whose log was dropped (global cap).
    dropped: HashSet<u32>,
    /// Segments seen of the dropped streams, before the drop.
    dropped_seen: HashMap<u32, [u64; 2]>,
    total: usize,
}

impl SeqPoints {
    pub fn new(cfg: SeqPointsConfig) -> Self {
        SeqPoints {
            cfg: (cfg.per_dir > 0).then_some(cfg),
            ..Default::default()
        }
    }

    #[inline]
    pub fn enabled(&self) -> bool {
        self.cfg.is_some()
    }

    /// Record the point of one segment.
    pub fn push(&mut self, p: SegPoint) {
        let Some(cfg) = self.cfg else { return };
        if self.dropped.contains(&p.stream) {
            return;
        }
        let log = self.logs.entry(p.stream).or_default();
        let before = log.dirs[0].len() + log.dirs[1].len();
        let d = (p.dir & 1) as usize;
        let flagged = p.class.is_some() || !p.analysis.is_empty();
        log.dirs[d].seen += 1;
        if flagged {
            for (i, l) in log.dirs.iter_mut().enumerate() {
                // The segments before the flag (both directions) become context.
                while let Some(q) = l.recent.pop_front() {
                    if l.context < cfg.per_dir as u64 {
                        l.context += 1;
                        l.kept.push(q);
                    } else {
                        l.add_ordinary(q, cfg.per_dir);
                    }
                }
                l.after = cfg.context;
                if i == d {
                    l.flagged += 1;
                    l.kept.push(p);
                }
            }
        } else {
            let l = &mut log.dirs[d];
            if l.after > 0 && l.context < cfg.per_dir as u64 {
                l.after -= 1;
                l.context += 1;
                l.kept.push(p);
            } else {
                l.recent.push_back(p);
                if l.recent.len() > cfg.context {
                    if let Some(q) = l.recent.pop_front() {
                        l.add_ordinary(q, cfg.per_dir);
                    }
                }
            }
        }
        let after = log.dirs[0].len() + log.dirs[1].len();
        self.total = self.total + after - before;
        if self.total > cfg.total {
            self.evict(cfg.total - cfg.total / 10);
        }
    }

    /// Drop the logs of the connections with the fewest segments until at
    /// most `target` points are left.
    fn evict(&mut self, target: usize) {
        let mut sizes: Vec<(u64, u32)> = self
            .logs
            .iter()
            .map(|(s, l)| (l.dirs[0].seen + l.dirs[1].seen, *s))
            .collect();
        sizes.sort_unstable();
        for (_, s) in sizes {
            if self.total <= target {
                break;
            }
            if let Some(l) = self.logs.remove(&s) {
                self.total -= l.dirs[0].len() + l.dirs[1].len();
                self.dropped.insert(s);
                self.dropped_seen
                    .insert(s, [l.dirs[0].seen, l.dirs[1].seen]);
            }
        }
    }

    /// A retransmission found spurious later (the point is a flagged one).
    pub fn set_class(&mut self, stream: u32, frame: u64, c: RetransClass) {
        let Some(log) = self.logs.get_mut(&stream) else {
            return;
        };
        for l in log.dirs.iter_mut() {
            if let Some(p) = l.kept.iter_mut().rev().find(|p| p.frame == frame) {
                p.class = Some(c);
                return;
            }
        }
    }

    /// Streams with a log, in order.
    pub fn streams(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.logs.keys().copied().collect();
        v.sort_unstable();
        v
    }

    pub fn log(&self, stream: u32, dir: usize) -> Option<&DirLog> {
        self.logs.get(&stream).map(|l| &l.dirs[dir])
    }

    /// Dropped streams and their segments seen per direction, in order.
    pub fn dropped(&self) -> Vec<(u32, [u64; 2])> {
        let mut v: Vec<(u32, [u64; 2])> = self.dropped_seen.iter().map(|(s, n)| (*s, *n)).collect();
        v.sort_unstable();
        v
    }

    /// Points held now.
    pub fn total(&self) -> usize {
        self.total
    }

    pub fn warnings(&self) -> Vec<String> {
        match self.cfg {
            Some(cfg) if !self.dropped.is_empty() => vec![format!(
                "tcp_seq_points: {} connection(s) left out (more than {} points in all; \
                 the smallest connections were dropped first)",
                self.dropped.len(),
                cfg.total
            )],
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::flags::{Flag, FlagSet};
    use super::*;

    fn pt(frame: u64, ts: i64, seq: i64, len: u32) -> SegPoint {
        SegPoint {
            frame,
            ts,
            stream: 0,
            dir: 0,
            seq,
            len,
            ack: Some(1),
            window_raw: 1000,
            syn: false,
            flags: 0x10,
            sack: [(0, 0); 4],
            sack_len: 0,
            in_flight: 0,
            class: None,
            analysis: FlagSet::EMPTY,
        }
    }

    fn cfg(per_dir: usize, total: usize) -> SeqPointsConfig {
        SeqPointsConfig {
            per_dir,
            total,
            context: 2,
        }
    }

    #[test]
    fn small_logs_are_exact() {
        let mut s = SeqPoints::new(cfg(100, 10_000));
        for i in 0..50 {
            s.push(pt(i, i as i64 * 10, i as i64 * 100, 100));
        }
        let l = s.log(0, 0).unwrap();
        assert_eq!(l.width(), 0);
        let pts = l.points();
        assert_eq!(pts.len(), 50);
        assert!(pts.iter().all(|k| !k.bucketed));
        assert!(!SeqPoints::new(cfg(0, 10)).enabled());
    }

    #[test]
    fn flagged_survive_budget_holds_time_monotone_and_wraps() {
        let mut s = SeqPoints::new(cfg(200, 1_000_000));
        let mut flagged = Vec::new();
        // Sequence numbers past 2^32 (unwrapped by the metrics).
        let base = (1i64 << 32) - 50_000;
        for i in 0..100_000u64 {
            let mut p = pt(i + 1, i as i64 * 1_000, base + i as i64 * 1448, 1448);
            p.in_flight = i % 97;
            if i % 5_000 == 17 {
                p.class = Some(RetransClass::Fast);
                flagged.push(i + 1);
            } else if i % 7_919 == 3 {
                p.analysis.insert(Flag::ZeroWindow);
                flagged.push(i + 1);
            }
            s.push(p);
        }
        let l = s.log(0, 0).unwrap();
        assert!(l.width() > 0);
        let pts = l.points();
        let ord = pts.iter().filter(|k| k.bucketed).count();
        assert!(ord <= 200, "{ord} ordinary points");
        assert!(pts.len() <= 200 + 200 + flagged.len() + 2);
        for f in &flagged {
            assert!(pts.iter().any(|k| k.p.frame == *f), "frame {f} lost");
        }
        // context: the segments around the first flag are kept
        for f in [16, 17, 19, 20] {
            assert!(
                pts.iter().any(|k| k.p.frame == f && !k.bucketed),
                "frame {f}"
            );
        }
        assert!(pts.windows(2).all(|w| w[0].p.ts <= w[1].p.ts));
        assert!(pts.windows(2).all(|w| w[0].p.seq < w[1].p.seq));
        // the first and last points and the extremes survive
        assert_eq!(pts.first().unwrap().p.frame, 1);
        assert_eq!(pts.last().unwrap().p.frame, 100_000);
        assert!(pts.iter().any(|k| k.p.seq > 1 << 32));
        assert_eq!(s.total(), pts.len());
    }

    #[test]
    fn reclass_and_global_cap_drop_smallest() {
        let mut s = SeqPoints::new(cfg(1000, 300));
        let mut big = pt(1, 0, 0, 10);
        big.class = Some(RetransClass::Timeout);
        s.push(big);
        s.set_class(0, 1, RetransClass::Spurious);
        assert_eq!(
            s.log(0, 0).unwrap().points()[0].p.class,
            Some(RetransClass::Spurious)
        );
        for i in 0..250 {
            s.push(pt(i + 2, i as i64, i as i64, 10));
        }
        let mut frame = 1000;
        for st in 1..=5u32 {
            for i in 0..20 {
                let mut p = pt(frame, i, i, 10);
                p.stream = st;
                s.push(p);
                frame += 1;
            }
        }
        assert!(s.total() <= 300);
        assert!(s.log(0, 0).is_some(), "the biggest stays");
        assert!(!s.dropped().is_empty());
        assert_eq!(s.dropped()[0].0, 1, "the smallest (earliest) goes first");
        assert_eq!(s.warnings().len(), 1);
    }

    #[test]
    fn analyzer_points_unwrap_past_2_32() {
        use crate::conversations::Assignment;
        use crate::tcp::{TcpAnalysisConfig, TcpAnalyzer};
        use nastriage_net::{tcp_flags::ACK, TcpOptions, TcpSegment};
        let mut t = TcpAnalyzer::new(TcpAnalysisConfig {
            seq_points: cfg(10, 1000),
            ..Default::default()
        });
        let asg = Assignment {
            stream: 0,
            dir: 0,
            reused_ports: false,
            replaced: None,
        };
        let isn = u32::MAX - 5_000;
        for i in 0..100u32 {
            let seg = TcpSegment {
                src_port: 1,
                dst_port: 2,
                seq: isn.wrapping_add(i * 100),
                ack: 1,
                flags: ACK,
                window: 100,
                header_len: 20,
                options: TcpOptions::default(),
                payload_len: 100,
                payload: &[],
            };
            t.update(u64::from(i) + 1, i64::from(i) * 1000, &asg, &seg, None);
        }
        let out = t.finish();
        let pts = out.seq_points().log(0, 0).unwrap().points();
        assert!(out.seq_points().log(0, 0).unwrap().width() > 0);
        assert!(
            pts.windows(2).all(|w| w[0].p.seq < w[1].p.seq),
            "monotone across the wrap"
        );
        assert_eq!(pts.last().unwrap().p.seq, 1 + 99 * 100);
        assert!(std::mem::size_of::<SegPoint>() <= 144);
    }

    #[test]
    fn select_keeps_extremes() {
        let mut g: Vec<SegPoint> = (0..20)
            .map(|i| pt(i, i as i64, 1000 - i as i64, 10))
            .collect();
        g[7].in_flight = 99;
        g[9].ack = Some(5_000);
        let k = select(&g);
        let frames: Vec<u64> = k.iter().map(|p| p.frame).collect();
        assert!(frames.contains(&0) && frames.contains(&19)); // first, last, highest, lowest
        assert!(frames.contains(&7) && frames.contains(&9));
        assert!(k.len() <= PER_BUCKET);
    }
}
