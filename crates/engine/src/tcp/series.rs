//! Per-connection, per-direction time series in fixed-width bins (the
//! `tcp_series` table).
//!
//! Bins are aligned on multiples of the interval since the Unix epoch, and
//! kept sparse: a (stream, direction) holds only the bins in which something
//! happened, as a vector sorted by bin index (frames arrive in time order, so
//! updates touch the last bin).
//!
//! Interval: fixed when configured; otherwise chosen in the single pass
//! without knowing the capture's length. It starts at 1 ms and doubles
//! (merging pairs of bins, which epoch alignment makes exact) whenever the
//! time span seen so far exceeds [`TARGET_BINS`] intervals, up to 8.192 s
//! (the largest power-of-two multiple of 1 ms within 10 s). A capture thus
//! ends with 250 to 500 bins across its span (more only beyond 68 minutes).
//! Memory: at most [`SeriesConfig::max_rows`] bins in all; bins that would
//! go beyond are dropped and counted (a warning says so).

/// Aim for at most this many bins over the capture's span.
pub const TARGET_BINS: i64 = 500;
pub const MIN_AUTO_INTERVAL_NS: i64 = 1_000_000;
pub const MAX_AUTO_INTERVAL_NS: i64 = 10_000_000_000;
/// Default bound on the number of bins (table rows).
pub const DEFAULT_MAX_ROWS: usize = 2_000_000;

#[derive(Debug, Clone)]
pub struct SeriesConfig {
    /// Fixed bin width; `None` chooses it from the capture's span.
    pub interval_ns: Option<i64>,
    pub max_rows: usize,
}

impl Default for SeriesConfig {
    fn default() -> Self {
        SeriesConfig {
            interval_ns: None,
            max_rows: DEFAULT_MAX_ROWS,
        }
    }
}

/// What happened in one direction of one connection during one bin.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bin {
    /// Payload bytes sent (retransmissions included).
    pub bytes: u64,
    /// Segments sent (pure ACKs included).
    pub segments: u32,
    pub retransmissions: u32,
    /// Time the sender was stalled by a zero receive window.
    pub stalled_ns: i64,
    /// Largest bytes in flight after a send.
    pub max_in_flight: u64,
    /// Last receive window advertised to this sender, unscaled
    /// (`u32::MAX`: none in this bin); scaled when the table is built.
    pub window_raw: u32,
    pub rtt_sum_ns: f64,
    pub rtt_samples: u32,
}

impl Default for Bin {
    fn default() -> Self {
        Bin {
            bytes: 0,
            segments: 0,
            retransmissions: 0,
            stalled_ns: 0,
            max_in_flight: 0,
            window_raw: u32::MAX,
            rtt_sum_ns: 0.0,
            rtt_samples: 0,
        }
    }
}

impl Bin {
    /// Fold a later bin into this one.
    fn merge(&mut self, later: &Bin) {
        self.bytes += later.bytes;
        self.segments += later.segments;
        self.retransmissions += later.retransmissions;
        self.stalled_ns += later.stalled_ns;
        self.max_in_flight = self.max_in_flight.max(later.max_in_flight);
        if later.window_raw != u32::MAX {
            self.window_raw = later.window_raw;
        }
        self.rtt_sum_ns += later.rtt_sum_ns;
        self.rtt_samples += later.rtt_samples;
    }
}

/// The series of every connection.
#[derive(Debug, Clone)]
pub struct Series {
    cfg: SeriesConfig,
    interval: i64,
    span: Option<(i64, i64)>,
    /// Per stream, per direction (0 = a→b): (bin index, bin), sorted.
    bins: Vec<[Vec<(i64, Bin)>; 2]>,
    rows: usize,
    /// Bins not kept because of `max_rows`.
    pub dropped: u64,
    /// The bin of the last time asked for, as [start, end) and index: a
    /// segment asks for its bin several times, and frames come in time
    /// order, so this spares most of the divisions.
    last_bin: Option<(i64, i64, i64)>,
}

impl Default for Series {
    fn default() -> Self {
        Series::new(SeriesConfig::default())
    }
}

impl Series {
    pub fn new(cfg: SeriesConfig) -> Self {
        let interval = cfg
            .interval_ns
            .filter(|i| *i > 0)
            .unwrap_or(MIN_AUTO_INTERVAL_NS);
        Series {
            cfg,
            interval,
            span: None,
            bins: Vec::new(),
            rows: 0,
            dropped: 0,
            last_bin: None,
        }
    }

    /// The index of the bin holding `ts`: `ts.div_euclid(interval)`.
    #[inline]
    fn index(&mut self, ts: i64) -> i64 {
        if let Some((lo, hi, idx)) = self.last_bin {
            if lo <= ts && ts < hi {
                return idx;
            }
        }
        let idx = ts.div_euclid(self.interval);
        let lo = idx.checked_mul(self.interval);
        self.last_bin = lo.and_then(|lo| Some((lo, lo.checked_add(self.interval)?, idx)));
        idx
    }

    pub fn interval_ns(&self) -> i64 {
        self.interval
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Note a frame time; with an automatic interval, widen the bins when
    /// the span outgrows them.
    pub fn observe(&mut self, ts: i64) {
        let (lo, hi) = match self.span {
            None => (ts, ts),
            Some((lo, hi)) => (lo.min(ts), hi.max(ts)),
        };
        self.span = Some((lo, hi));
        if self.cfg.interval_ns.is_some() {
            return;
        }
        // (hi - lo) / interval >= TARGET_BINS, without a division a frame.
        while hi - lo >= TARGET_BINS * self.interval && self.interval * 2 <= MAX_AUTO_INTERVAL_NS {
            self.coarsen();
        }
    }

    fn coarsen(&mut self) {
        self.interval *= 2;
        self.last_bin = None;
        let mut rows = 0;
        for dirs in &mut self.bins {
            for v in dirs.iter_mut() {
                let mut out: Vec<(i64, Bin)> = Vec::with_capacity(v.len() / 2 + 1);
                for (idx, b) in v.drain(..) {
                    let k = idx.div_euclid(2);
                    match out.last_mut() {
                        Some((last, acc)) if *last == k => acc.merge(&b),
                        _ => out.push((k, b)),
                    }
                }
                rows += out.len();
                *v = out;
            }
        }
        self.rows = rows;
    }

    /// The bin of `ts` for (stream, dir), created if needed (None when the
    /// row bound is reached).
    pub fn bin(&mut self, stream: u32, dir: usize, ts: i64) -> Option<&mut Bin> {
        let idx = self.index(ts);
        let s = stream as usize;
        if self.bins.len() <= s {
            self.bins.resize_with(s + 1, Default::default);
        }
        let v = &mut self.bins[s][dir];
        let pos = match v.last() {
            Some((last, _)) if *last == idx => v.len() - 1,
            Some((last, _)) if *last > idx => match v.binary_search_by_key(&idx, |(i, _)| *i) {
                Ok(p) => p,
                Err(p) => {
                    if self.rows >= self.cfg.max_rows {
                        self.dropped += 1;
                        return None;
                    }
                    self.rows += 1;
                    v.insert(p, (idx, Bin::default()));
                    p
                }
            },
            _ => {
                if self.rows >= self.cfg.max_rows {
                    self.dropped += 1;
                    return None;
                }
                self.rows += 1;
                v.push((idx, Bin::default()));
                v.len() - 1
            }
        };
        Some(&mut v[pos].1)
    }

    /// Spread the time span [from, to) over the bins it covers, giving each
    /// its overlap in ns.
    pub fn add_span(
        &mut self,
        stream: u32,
        dir: usize,
        from: i64,
        to: i64,
        mut f: impl FnMut(&mut Bin, i64),
    ) {
        let mut t = from;
        while t < to {
            let end = (t.div_euclid(self.interval) + 1) * self.interval;
            let part_end = end.min(to);
            if let Some(b) = self.bin(stream, dir, t) {
                f(b, part_end - t);
            }
            t = part_end;
        }
    }

    /// See [`super::TcpAnalysis::relocate`].
    pub(crate) fn relocate(&mut self) {
        crate::heap::renew(&mut self.bins);
    }

    /// Every kept bin: (stream, dir, bin start ns, bin), by stream, direction
    /// and time.
    pub fn iter(&self) -> impl Iterator<Item = (u32, usize, i64, &Bin)> + '_ {
        (0..self.streams()).flat_map(move |s| self.iter_stream(s))
    }

    /// Streams with bins are below this.
    pub fn streams(&self) -> u32 {
        self.bins.len() as u32
    }

    /// One stream's kept bins, as [`Series::iter`] gives them.
    pub fn iter_stream(&self, s: u32) -> impl Iterator<Item = (u32, usize, i64, &Bin)> + '_ {
        let iv = self.interval;
        let dirs = self.bins.get(s as usize).map_or(&[][..], |d| &d[..]);
        dirs.iter()
            .enumerate()
            .flat_map(move |(d, v)| v.iter().map(move |(i, b)| (s, d, i * iv, b)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    #[test]
    fn bins_are_sparse_and_epoch_aligned() {
        let mut s = Series::new(SeriesConfig {
            interval_ns: Some(10 * MS),
            max_rows: 100,
        });
        s.bin(0, 0, 1005 * MS).unwrap().bytes += 100;
        s.bin(0, 0, 1009 * MS).unwrap().bytes += 50;
        s.bin(0, 1, 1500 * MS).unwrap().segments += 1;
        s.bin(2, 0, 1000 * MS).unwrap().segments += 1;
        let rows: Vec<(u32, usize, i64, u64)> =
            s.iter().map(|(st, d, t, b)| (st, d, t, b.bytes)).collect();
        assert_eq!(
            rows,
            vec![
                (0, 0, 1000 * MS, 150),
                (0, 1, 1500 * MS, 0),
                (2, 0, 1000 * MS, 0)
            ]
        );
        // Out-of-order time goes to its own bin, in order.
        s.bin(0, 0, 990 * MS).unwrap().bytes += 1;
        assert_eq!(s.iter().next().unwrap().2, 990 * MS);
    }

    #[test]
    fn span_is_spread_over_bins() {
        let mut s = Series::new(SeriesConfig {
            interval_ns: Some(10 * MS),
            max_rows: 100,
        });
        s.add_span(0, 1, 5 * MS, 32 * MS, |b, ns| b.stalled_ns += ns);
        let v: Vec<i64> = s.iter().map(|(_, _, _, b)| b.stalled_ns).collect();
        assert_eq!(v, vec![5 * MS, 10 * MS, 10 * MS, 2 * MS]);
    }

    #[test]
    fn automatic_interval_doubles_and_merges() {
        let mut s = Series::default();
        for k in 0..2000 {
            let t = 7_000 * MS + k * MS;
            s.observe(t);
            s.bin(0, 0, t).unwrap().bytes += 1;
        }
        // 2 s of span: 1 ms -> 2 ms -> 4 ms, fewer than 500 intervals.
        assert_eq!(s.interval_ns(), 4 * MS);
        let total: u64 = s.iter().map(|(_, _, _, b)| b.bytes).sum();
        assert_eq!(total, 2000);
        assert!(s.rows() <= 500 && s.rows() >= 250, "{}", s.rows());
        assert!(s.iter().all(|(_, _, t, _)| t % (4 * MS) == 0));
    }

    #[test]
    fn row_bound_drops_and_counts() {
        let mut s = Series::new(SeriesConfig {
            interval_ns: Some(MS),
            max_rows: 3,
        });
        for k in 0..5 {
            let _ = s.bin(0, 0, k * MS);
        }
        assert_eq!(s.rows(), 3);
        assert_eq!(s.dropped, 2);
    }

    #[test]
    fn merged_window_keeps_the_later_value() {
        let mut a = Bin {
            window_raw: 10,
            max_in_flight: 5,
            ..Bin::default()
        };
        a.merge(&Bin {
            max_in_flight: 3,
            ..Bin::default()
        });
        assert_eq!((a.window_raw, a.max_in_flight), (10, 5));
        a.merge(&Bin {
            window_raw: 7,
            ..Bin::default()
        });
        assert_eq!(a.window_raw, 7);
    }

    #[test]
    fn remembered_bin_is_the_division() {
        let mut next = crate::test_rng::xorshift(0x9E37_79B9_7F4A_7C15);
        let mut s = Series::default();
        let mut t: i64 = -3 * MS;
        for _ in 0..20_000 {
            // Mostly forward by less than a bin, at times back, far ahead,
            // or at the extremes.
            t = match next() % 20 {
                0 => t.saturating_sub((next() % (5 * MS as u64)) as i64),
                1 => t.saturating_add((next() % (200 * MS as u64)) as i64),
                2 => i64::MAX - (next() % 3) as i64,
                3 => i64::MIN + (next() % 3) as i64,
                _ => t.saturating_add((next() % (MS as u64 / 3)) as i64),
            };
            if next().is_multiple_of(1000) {
                s.observe(t.clamp(-MS, 1000 * s.interval_ns()));
            }
            assert_eq!(s.index(t), t.div_euclid(s.interval_ns()), "at {t}");
        }
    }
}
