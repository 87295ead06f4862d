//! Round-trip times seen from the capture point.
//!
//! A capture point splits the path in two: every sample measures one part,
//! "capture point → a host → capture point". We keep samples per part and
//! name the part by its host (the *client side* and the *server side*); the
//! full RTT is their sum, at any capture point.
//!
//! * Handshake: SYN → SYN/ACK is the server side, SYN/ACK → ACK the client
//!   side (neither includes a delayed ACK). A retransmitted SYN is timed from
//!   its last copy; the first SYN/ACK answering it and the first ACK of that
//!   SYN/ACK are used.
//! * Data → ACK, per direction, the far side (the receiver's part): an ACK
//!   that acknowledges new data gives one sample, from the latest segment it
//!   fully covers, unless any segment it covers was retransmitted (Karn's
//!   rule; the caller checks that). A pure ACK of a single segment may be a
//!   *delayed* ACK (RFC 1122 allows up to 500 ms; 40 ms on Linux, 200 ms on
//!   Windows), so such samples are kept apart: they give the delayed-ACK
//!   timing, count for the minimum, and stand in for the median only when
//!   there is nothing else. Other samples include whatever the receiver
//!   took before answering (e.g. a server's processing time when the ACK
//!   rides on its reply).
//! * TCP timestamps, as pping does: the first appearance of each TSval in a
//!   direction is remembered; the first segment the other way echoing it in
//!   TSecr closes the sample. Only TSvals that call for an answer (data,
//!   SYN, FIN) are matched, or pure-ACK TSvals echoed by data sent while
//!   data was already in flight (ACK-clocked): an idle peer's next request
//!   echoes an old TSval and would time the idleness. TSval clocks tick at
//!   1 ms (Linux) to 10 ms, so these samples can be high by up to a tick;
//!   they are used only for a direction with fewer than
//!   [`MIN_DATA_SAMPLES`] data → ACK samples (e.g. the pure-ACK direction
//!   of a one-way transfer). An echo riding on a pure ACK of a single
//!   segment is a possible delayed ACK too and gives no sample.
//!
//! Per side: the minimum is over every source (handshake included); the
//! median and 95th percentile come from data → ACK samples when there are
//! [`MIN_DATA_SAMPLES`], else from timestamps, else from whatever exists.
//!
//! Quantiles come from bounded reservoirs (see `reservoir.rs`); minima are
//! exact.

use std::collections::VecDeque;

use nastriage_net::tcp_flags::{ACK, SYN};

use super::reservoir::Reservoir;

/// Below this many data → ACK samples a direction's part uses timestamps.
pub const MIN_DATA_SAMPLES: u64 = 3;
/// TSvals remembered per direction while waiting for their echo.
pub const TS_PENDING: usize = 64;

#[inline]
fn ts_gt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// The three-way handshake's times.
#[derive(Debug, Clone, Default)]
pub struct Handshake {
    /// (direction, time, ISN) of the last bare SYN before the SYN/ACK.
    syn: Option<(usize, i64, u32)>,
    pub syn_retransmitted: bool,
    /// (direction, time, ISN) of the first SYN/ACK.
    synack: Option<(usize, i64, u32)>,
    ack_ts: Option<i64>,
}

impl Handshake {
    pub fn on_segment(&mut self, dir: usize, ts: i64, flags: u16, seq: u32, ack: u32) {
        let syn = flags & SYN != 0;
        let has_ack = flags & ACK != 0;
        if syn && !has_ack {
            if self.synack.is_some() {
                return;
            }
            match self.syn {
                Some((d, _, s)) if d == dir && s == seq => {
                    self.syn_retransmitted = true;
                    self.syn = Some((dir, ts, seq));
                }
                Some(_) => {}
                None => self.syn = Some((dir, ts, seq)),
            }
        } else if syn {
            if self.synack.is_some() {
                return;
            }
            match self.syn {
                Some((d, _, s)) if d != dir && ack == s.wrapping_add(1) => {
                    self.synack = Some((dir, ts, seq));
                }
                None => self.synack = Some((dir, ts, seq)),
                Some(_) => {}
            }
        } else if has_ack && self.ack_ts.is_none() {
            if let Some((d, t, s)) = self.synack {
                if d != dir && ack == s.wrapping_add(1) && ts >= t {
                    self.ack_ts = Some(ts);
                }
            }
        }
    }

    /// The SYN sender (or, without the SYN, the SYN/ACK's receiver).
    pub fn client_dir(&self) -> Option<usize> {
        self.syn
            .map(|s| s.0)
            .or_else(|| self.synack.map(|s| 1 - s.0))
    }

    /// SYN → SYN/ACK: capture point → server → capture point.
    pub fn server_side_ns(&self) -> Option<i64> {
        match (self.syn, self.synack) {
            (Some((_, a, _)), Some((_, b, _))) if b >= a => Some(b - a),
            _ => None,
        }
    }

    /// SYN/ACK → ACK: capture point → client → capture point.
    pub fn client_side_ns(&self) -> Option<i64> {
        match (self.synack, self.ack_ts) {
            (Some((_, a, _)), Some(b)) => Some(b - a),
            _ => None,
        }
    }

    /// The handshake's part on the far side of data sent in `dir`.
    pub fn far_side_ns(&self, dir: usize) -> Option<i64> {
        let client = self.client_dir()?;
        if dir == client {
            self.server_side_ns()
        } else {
            self.client_side_ns()
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct TsMark {
    val: u32,
    ts: i64,
    elicits: bool,
}

/// Where a direction's far-side samples came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    DataAck,
    Timestamps,
    /// Single-segment pure ACKs only (possibly delayed).
    SingleAck,
}

/// Per-connection RTT state.
#[derive(Debug, Clone)]
pub struct Rtt {
    pub hs: Handshake,
    /// Far side of data sent in each direction, from data → ACK.
    data: [Reservoir; 2],
    /// The same from timestamps.
    tsr: [Reservoir; 2],
    /// Pure ACKs of a single segment (possibly delayed ACKs).
    single: [Reservoir; 2],
    pending: [VecDeque<TsMark>; 2],
    last_tsval: [Option<u32>; 2],
    /// The smallest sample of the three reservoirs of each direction, as
    /// their minima give it (the value as `f64`, back to `i64`), kept as
    /// they are added: `far_min_ns` is asked several times a segment.
    sample_min: [Option<i64>; 2],
}

impl Rtt {
    pub fn new(seed: u64) -> Self {
        Rtt {
            hs: Handshake::default(),
            data: [Reservoir::with_seed(seed), Reservoir::with_seed(seed ^ 1)],
            tsr: [
                Reservoir::with_seed(seed ^ 2),
                Reservoir::with_seed(seed ^ 3),
            ],
            single: [
                Reservoir::with_seed(seed ^ 4),
                Reservoir::with_seed(seed ^ 5),
            ],
            pending: Default::default(),
            last_tsval: [None; 2],
            sample_min: [None; 2],
        }
    }

    fn note_min(&mut self, dir: usize, v: f64) {
        let v = v as i64;
        let m = &mut self.sample_min[dir];
        *m = Some(m.map_or(v, |x| x.min(v)));
    }

    /// A data → ACK sample for data sent in `dir`; `single`: taken from a
    /// pure ACK of one segment.
    pub fn add_data_sample(&mut self, dir: usize, ns: i64, single: bool) {
        if single {
            self.single[dir].add(ns as f64);
        } else {
            self.data[dir].add(ns as f64);
        }
        self.note_min(dir, ns as f64);
    }

    /// Single-segment ACK samples for data sent in `dir`.
    pub fn single(&self, dir: usize) -> &Reservoir {
        &self.single[dir]
    }

    /// A segment sent in `dir` carrying `tsval`. `elicits`: data, SYN or
    /// FIN (the peer must answer it).
    pub fn on_tsval(&mut self, dir: usize, ts: i64, tsval: u32, elicits: bool) {
        if let Some(last) = self.last_tsval[dir] {
            if !ts_gt(tsval, last) {
                // Not a first appearance; a data segment sharing the TSval
                // of a pure ACK still makes it worth an answer.
                if tsval == last && elicits {
                    if let Some(m) = self.pending[dir].back_mut() {
                        if m.val == tsval {
                            m.elicits = true;
                        }
                    }
                }
                return;
            }
        }
        self.last_tsval[dir] = Some(tsval);
        let q = &mut self.pending[dir];
        if q.len() == TS_PENDING {
            q.pop_front();
        }
        q.push_back(TsMark {
            val: tsval,
            ts,
            elicits,
        });
    }

    /// A segment sent in `dir` echoing `tsecr`. `prompt`: it carries data
    /// sent while data was already in flight (so it was not delayed by an
    /// idle application); `single`: it is a pure ACK of one segment (maybe
    /// delayed: the mark is used up without a sample). Returns the sample
    /// (for data sent the other way).
    pub fn on_tsecr(
        &mut self,
        dir: usize,
        ts: i64,
        tsecr: u32,
        prompt: bool,
        single: bool,
    ) -> Option<i64> {
        let f = 1 - dir;
        let q = &mut self.pending[f];
        while let Some(m) = q.front().copied() {
            if ts_gt(m.val, tsecr) {
                return None;
            }
            q.pop_front();
            if m.val == tsecr {
                if (m.elicits || prompt) && !single && ts >= m.ts {
                    let ns = ts - m.ts;
                    self.tsr[f].add(ns as f64);
                    self.note_min(f, ns as f64);
                    return Some(ns);
                }
                return None;
            }
        }
        None
    }

    /// The samples used for the far side of data sent in `dir` (for the
    /// median and 95th percentile).
    pub fn far_side(&self, dir: usize) -> Option<(&Reservoir, Source)> {
        let d = &self.data[dir];
        let t = &self.tsr[dir];
        let s = &self.single[dir];
        if d.count() >= MIN_DATA_SAMPLES || (t.is_empty() && !d.is_empty()) {
            Some((d, Source::DataAck))
        } else if !t.is_empty() {
            Some((t, Source::Timestamps))
        } else if !s.is_empty() {
            Some((s, Source::SingleAck))
        } else {
            None
        }
    }

    /// Smallest far-side time for data sent in `dir`, over every source
    /// (handshake part included): also the lower bound used to prove an ACK
    /// came too soon.
    #[inline]
    pub fn far_min_ns(&self, dir: usize) -> Option<i64> {
        let hs = self.hs.far_side_ns(dir);
        match (hs, self.sample_min[dir]) {
            (Some(h), Some(s)) => Some(h.min(s)),
            (h, s) => h.or(s),
        }
    }

    /// `far_min_ns` from the reservoirs themselves (the reference the
    /// kept minimum is tested against).
    #[cfg(test)]
    fn far_min_from_reservoirs(&self, dir: usize) -> Option<i64> {
        let mut m = self.hs.far_side_ns(dir);
        for r in [&self.data[dir], &self.tsr[dir], &self.single[dir]] {
            if let Some(v) = r.min() {
                let v = v as i64;
                m = Some(m.map_or(v, |x| x.min(v)));
            }
        }
        m
    }

    /// Samples taken in total (every source, both directions).
    pub fn samples(&self) -> u64 {
        self.data
            .iter()
            .chain(self.tsr.iter())
            .chain(self.single.iter())
            .map(|r| r.count())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    #[test]
    fn handshake_split() {
        let mut h = Handshake::default();
        h.on_segment(0, 0, SYN, 100, 0);
        h.on_segment(0, 1000 * MS, SYN, 100, 0); // retransmitted SYN
        h.on_segment(1, 1003 * MS, SYN | ACK, 500, 101);
        h.on_segment(0, 1003 * MS + 50_000, ACK, 101, 501);
        h.on_segment(0, 1010 * MS, ACK, 101, 501);
        assert!(h.syn_retransmitted);
        assert_eq!(h.client_dir(), Some(0));
        assert_eq!(h.server_side_ns(), Some(3 * MS));
        assert_eq!(h.client_side_ns(), Some(50_000));
        assert_eq!(h.far_side_ns(0), Some(3 * MS));
        assert_eq!(h.far_side_ns(1), Some(50_000));
        // A SYN/ACK that does not answer the SYN is ignored.
        let mut h = Handshake::default();
        h.on_segment(0, 0, SYN, 100, 0);
        h.on_segment(1, 5, SYN | ACK, 500, 7);
        assert_eq!(h.server_side_ns(), None);
        // Without the SYN: the client side only.
        let mut h = Handshake::default();
        h.on_segment(1, 10, SYN | ACK, 500, 101);
        h.on_segment(0, 30, ACK, 101, 501);
        assert_eq!(h.client_dir(), Some(0));
        assert_eq!((h.server_side_ns(), h.client_side_ns()), (None, Some(20)));
    }

    #[test]
    fn timestamps_first_appearance_and_first_echo() {
        let mut r = Rtt::new(1);
        r.on_tsval(0, 0, 100, true);
        r.on_tsval(0, 5, 100, true); // same TSval: not a new mark
        r.on_tsval(0, 10, 101, true);
        assert_eq!(r.on_tsecr(1, 40, 100, false, false), Some(40));
        assert_eq!(
            r.on_tsecr(1, 45, 100, false, false),
            None,
            "only the first echo"
        );
        assert_eq!(r.on_tsecr(1, 50, 101, false, false), Some(40));
        // A pure ACK's TSval needs a prompt echo.
        r.on_tsval(0, 100, 200, false);
        assert_eq!(r.on_tsecr(1, 900, 200, false, false), None);
        r.on_tsval(0, 1000, 201, false);
        assert_eq!(r.on_tsecr(1, 1010, 201, true, false), Some(10));
        // Older marks than the echo are dropped.
        r.on_tsval(0, 2000, 300, true);
        r.on_tsval(0, 2001, 301, true);
        assert_eq!(r.on_tsecr(1, 2010, 301, false, false), Some(9));
        assert!(r.pending[0].is_empty());
    }

    #[test]
    fn data_samples_preferred_over_timestamps() {
        let mut r = Rtt::new(1);
        r.on_tsval(0, 0, 1, true);
        r.on_tsecr(1, 2 * MS, 1, false, false);
        assert_eq!(r.far_side(0).unwrap().1, Source::Timestamps);
        for _ in 0..3 {
            r.add_data_sample(0, MS, false);
        }
        r.add_data_sample(0, MS / 2, true);
        let (res, src) = r.far_side(0).unwrap();
        assert_eq!(src, Source::DataAck);
        assert_eq!(res.quantile(0.5), Some(MS as f64));
        assert!(r.far_side(1).is_none());
        assert_eq!(r.far_min_ns(0), Some(MS / 2));
        assert_eq!(r.samples(), 5);
        // A possibly delayed ACK uses the mark up without a sample.
        r.on_tsval(1, 0, 9, true);
        assert_eq!(r.on_tsecr(0, 40 * MS, 9, false, true), None);
        // Single-segment samples alone stand in.
        r.add_data_sample(1, 40 * MS, true);
        assert_eq!(r.far_side(1).unwrap().1, Source::SingleAck);
    }

    #[test]
    fn kept_minimum_is_the_reservoirs_minimum() {
        let mut rnd = crate::test_rng::xorshift_below(0x2545_F491_4F6C_DD1D);
        for round in 0..50 {
            let mut r = Rtt::new(round);
            if round % 3 == 0 {
                r.hs.on_segment(0, 0, SYN, 100, 0);
                r.hs.on_segment(1, 5 * MS, SYN | ACK, 900, 101);
                r.hs.on_segment(0, 6 * MS, ACK, 101, 901);
            }
            for step in 0..300 {
                let dir = rnd(2) as usize;
                let ns = rnd(50 * MS as u64) as i64;
                match rnd(3) {
                    0 => r.add_data_sample(dir, ns, false),
                    1 => r.add_data_sample(dir, ns, true),
                    _ => {
                        let val = step as u32;
                        r.on_tsval(1 - dir, step * MS, val, true);
                        r.on_tsecr(dir, step * MS + ns, val, false, false);
                    }
                }
                for d in 0..2 {
                    assert_eq!(r.far_min_ns(d), r.far_min_from_reservoirs(d));
                }
            }
        }
    }
}
