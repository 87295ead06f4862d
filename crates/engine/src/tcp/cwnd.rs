//! A passive replica of a sender's congestion window, after Jaiswal et al.
//! ("Inferring TCP connection characteristics through passive
//! measurements", INFOCOM 2004), and the congestion-control hint drawn from
//! it.
//!
//! **Rounds, clocked by ACKs.** A round starts with a data segment; it ends
//! at the first data segment the sender sent *after it received the ACK of
//! that first segment*, which starts the next round. The bytes sent in a
//! round (new and retransmitted) are its *flight*: a window-limited sender
//! sends one window per round, so the flight tracks the congestion window
//! round by round, in step with the sender's own ACK clock (a round lasts
//! the RTT of the moment, queueing included). "Sent after the sender
//! received the ACK" is decided from what the capture shows:
//!
//! * the data segment is seen at least the *near-side* minimum RTT (capture
//!   point → sender → capture point, about 0 next to the sender) after the
//!   ACK was seen, and
//! * with TCP timestamps, it echoes (TSecr) the ACK's TSval or a later one:
//!   the sender had received that ACK. Next to the receiver this is what
//!   keeps the rounds right: without it a round lasts the minimum RTT, and
//!   behind a bottleneck with a queue that shows the path's BDP, not the
//!   window (the confidence says so).
//!
//! **Round kinds.** A finished round is receive-window limited (flight ≥
//! 90 % of the window), application limited (under 3 MSS, a silence longer
//! than the minimum RTT, or a short segment — the sender ran out of data —
//! with a smaller flight than the round before), or window limited: slow
//! start (×1.5 or more over the previous window-limited round) or congestion
//! avoidance. Rounds in loss recovery are skipped; after the recovery the
//! rounds restart at the first data sent after the sender saw the ACK that
//! ended it.
//!
//! **Loss response.** At a fast retransmission the window before the loss
//! is the median flight of the last four window-limited rounds (next to the
//! receiver, taken when the hole appeared: the rounds between the loss and
//! its retransmission are the sender's recovery); the mean of the first two
//! rounds after the recovery gives the reduction factor β = after / before,
//! and the next rounds (up to [`REGROWTH_ROUNDS`]) the regrowth: the slope
//! in MSS per round, and whether it slows down (concave) or speeds up
//! (convex). A loss that ends slow start is not measured (the window grew
//! during the round that lost). A timeout restarts everything (every
//! algorithm goes back to one segment).
//!
//! **Departures.** Next to the sender, each full new data segment that
//! follows another is checked: was it *clocked* — sent within about 64 µs
//! (under 128 µs: log2 bins; or twice the near-side RTT) of an ACK
//! arriving, or back-to-back after the previous segment at the line rate
//! (a gap in the bin of the 2nd percentile of the gaps or the next one,
//! always under 8 µs, or at the rate of a slower link or shaper between the
//! sender and the capture point: the lowest gap bin above 8 µs holding 10 %
//! of the gaps when it is also the most common one, or next to it) — or
//! *paced* (neither: sent on a timer)? Reno and CUBIC without a pacing
//! qdisc send in ACK-clocked bursts; BBR paces (in the lab: quanta of two
//! segments, then the pacing interval). Pacing one segment at a time at a
//! steady rate cannot be told from a link at that rate.
//!
//! **Hint.** β < 0.6: Reno-like (halving; Linux Reno then regrows about 1
//! MSS per round, 0.5 when it counts ACKs against delayed ACKs); 0.65–0.8:
//! CUBIC-like (β = 0.7; concave then convex regrowth, faster than Reno far
//! from the previous maximum, about 0.5 MSS per round in its Reno-friendly
//! region); ≥ 0.88: BBR-like (no multiplicative decrease on loss; flight
//! about one BDP, cycling 1.25/0.75), with half votes in between. Paced
//! departures vote for BBR and ACK-clocked ones discount it; with no
//! measured reduction, paced departures alone give a BBR-like hint. See
//! [`CwndTracker::hint`] for the confidence.

use crate::order_stats::median;
use std::collections::VecDeque;

/// Reductions and regrowth slopes kept (bounded memory).
const MAX_BETAS: usize = 32;
/// Regrowth is followed for this many rounds after a reduction.
pub const REGROWTH_ROUNDS: usize = 10;
/// Window-limited rounds whose median is the window before a loss.
const RECENT: usize = 4;
/// Log2 bins of departure gaps and ACK lags in µs: [0, 1), [1, 2), [2, 4),
/// …, the last open-ended (≥ 2^(BINS-2) µs, 1 ms).
const BINS: usize = 12;
/// A departure this soon after an ACK (or twice the near-side RTT when
/// longer) was triggered by it.
const ACK_TRIGGER_NS: i64 = 64_000;
/// Gaps longer than this between departures are idle time, not spacing.
const MAX_GAP_NS: i64 = 200_000_000;
/// Departures needed before the pacing share is used.
const MIN_DEPARTURES: u64 = 100;
/// Share of paced departures above which the sender paces, and below which
/// it clearly does not.
const PACED: f64 = 0.3;
const UNPACED: f64 = 0.1;

#[derive(Debug, Clone, PartialEq)]
pub struct CcHint {
    /// "reno-like", "cubic-like", "bbr-like" or "unknown".
    pub hint: &'static str,
    pub confidence: f64,
    pub reasoning: String,
}

#[inline]
fn ts_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

fn bin_us(ns: i64) -> usize {
    let us = (ns.max(0) / 1000) as u64;
    if us == 0 {
        0
    } else {
        ((64 - us.leading_zeros()) as usize).min(BINS - 1)
    }
}

/// An ACK as the sender's clock: when it was seen, and its TSval.
#[derive(Debug, Clone, Copy)]
struct Clock {
    ts: i64,
    tsval: Option<u32>,
}

impl Clock {
    /// Data seen at `ts` echoing `tsecr` was sent after the sender received
    /// this ACK.
    fn passed(&self, ts: i64, tsecr: Option<u32>, near: i64) -> (bool, bool) {
        if ts < self.ts + near {
            return (false, false);
        }
        match (self.tsval, tsecr) {
            (Some(v), Some(e)) => (!ts_lt(e, v), true),
            _ => (true, false),
        }
    }
}

#[derive(Debug, Clone)]
struct Round {
    start: i64,
    /// End of its first segment: the ACK covering it clocks the round.
    mark: i64,
    bytes: u64,
    rwnd: Option<u64>,
    drained: bool,
    last: i64,
    max_gap: i64,
    ack: Option<Clock>,
}

/// Following the rounds after a measured recovery.
#[derive(Debug, Clone)]
struct After {
    before: u64,
    flights: Vec<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Rwnd,
    App,
    First,
    SlowStart,
    Avoidance,
}

#[derive(Debug, Clone, Default)]
pub struct CwndTracker {
    mss: u64,
    round: Option<Round>,
    /// Flight of the last finished round of any kind, and its duration.
    last_round_bytes: u64,
    round_len: i64,
    /// Flights of the last window-limited rounds.
    recent: VecDeque<u64>,
    /// Flight of the previous window-limited round (0: no base to compare).
    prev: u64,
    prev_slow_start: bool,
    in_recovery: bool,
    recovery_fast: bool,
    /// (time, window, slow start) when a hole appeared.
    snapshot: Option<(i64, u64, bool)>,
    loss_before: Option<(u64, bool)>,
    /// Waiting for the first data sent after the recovery's end.
    restart: Option<Clock>,
    after: Option<After>,
    betas: Vec<f32>,
    /// Regrowth slope (MSS per round) and its change between the halves.
    slopes: Vec<(f32, f32)>,
    ts_rounds: u32,
    time_rounds: u32,
    last_ack_ts: Option<i64>,
    last_new_ts: Option<i64>,
    /// Departures by (ACK lag bin, gap bin); halved when a cell fills up
    /// (288 bytes, allocated for a direction that sends in bulk).
    departures: Option<Box<[[u16; BINS]; BINS]>>,
    departure_count: u64,
    pub ss_ns: i64,
    pub ca_ns: i64,
    pub ss_rounds: u32,
    pub ca_rounds: u32,
    pub rwnd_rounds: u32,
    pub app_rounds: u32,
    pub fast_losses: u32,
    pub timeouts: u32,
    pub ss_exit_losses: u32,
    /// Largest window estimate of a window-limited round, and the last one.
    pub cwnd_max: u64,
    pub cwnd_last: u64,
}

/// What the capture point tells the hint.
#[derive(Debug, Clone, Copy, Default)]
pub struct Vantage {
    /// Minimum RTT capture point → sender → capture point.
    pub near_min_ns: Option<i64>,
    /// Minimum full RTT.
    pub full_min_ns: Option<i64>,
}

impl Vantage {
    /// The capture point is next to the sender (its part of the RTT is at
    /// most 15 %): departures are seen as the sender made them.
    pub fn at_sender(&self) -> bool {
        match (self.near_min_ns, self.full_min_ns) {
            (Some(n), Some(f)) => f > 0 && n * 100 <= f * 15,
            _ => false,
        }
    }
}

/// One data segment as the tracker sees it.
#[derive(Debug, Clone, Copy)]
pub struct Send {
    pub ts: i64,
    pub end: i64,
    pub bytes: u64,
    /// New data (not a retransmission).
    pub new_data: bool,
    pub tsecr: Option<u32>,
    /// The sender had nothing more to send (a short segment).
    pub drained: bool,
    /// The receive window it was sent into.
    pub rwnd: Option<u64>,
}

impl CwndTracker {
    /// Largest segment the sender uses (the peer's MSS, or the largest seen).
    pub fn set_mss(&mut self, mss: u64) {
        self.mss = self.mss.max(mss);
    }

    /// The sender's recent bytes per round trip (an estimate of its flight
    /// that does not depend on the capture point): the larger of the last
    /// finished round and the current one.
    pub fn bytes_per_rtt(&self) -> u64 {
        self.last_round_bytes
            .max(self.round.as_ref().map_or(0, |r| r.bytes))
    }

    /// [`Self::bytes_per_rtt`], or 0 when nothing was sent in the last two
    /// rounds before `now` (the estimate is stale).
    pub fn bytes_per_rtt_at(&self, now: i64) -> u64 {
        match &self.round {
            Some(r) if now < r.last + 2 * self.round_len.max(1_000_000) => self.bytes_per_rtt(),
            _ => 0,
        }
    }

    /// An ACK of this direction's data (cumulative position `ack`) seen at
    /// `ts`, carrying `tsval`.
    pub fn on_ack(&mut self, ts: i64, ack: i64, tsval: Option<u32>) {
        self.last_ack_ts = Some(ts);
        if let Some(r) = self.round.as_mut() {
            if r.ack.is_none() && ack >= r.mark {
                r.ack = Some(Clock { ts, tsval });
            }
        }
    }

    /// A hole appeared in the sequence (data lost before the capture
    /// point): remember the window before it, for a loss that follows.
    pub fn on_hole(&mut self, ts: i64) {
        if self.in_recovery {
            return;
        }
        if let Some(b) = self.recent_window() {
            self.snapshot = Some((ts, b, self.prev_slow_start));
        }
    }

    fn recent_window(&self) -> Option<u64> {
        if self.recent.len() < 2 {
            return None;
        }
        let mut v: Vec<f64> = self.recent.iter().map(|&b| b as f64).collect();
        median(&mut v).map(|m| m as u64)
    }

    /// A data segment sent; `v` says where the capture point is.
    pub fn on_send(&mut self, s: &Send, v: Vantage) {
        let ts = s.ts;
        if s.new_data {
            // Only full segments following full segments: a bulk sender's
            // spacing, not an application's writes (requests, replies).
            let full = !s.drained && s.bytes + 40 >= self.mss;
            if let (Some(a), Some(l), true) = (self.last_ack_ts, self.last_new_ts, full) {
                let gap = ts - l;
                if (0..MAX_GAP_NS).contains(&gap) && ts >= a {
                    let h = self
                        .departures
                        .get_or_insert_with(|| Box::new([[0; BINS]; BINS]));
                    let cell = &mut h[bin_us(ts - a)][bin_us(gap)];
                    if *cell == u16::MAX {
                        for c in h.iter_mut().flatten() {
                            *c /= 2;
                        }
                    }
                    h[bin_us(ts - a)][bin_us(gap)] += 1;
                    self.departure_count += 1;
                }
            }
            self.last_new_ts = full.then_some(ts);
        }
        // Without the near side nor timestamps the ACK clock is unknown.
        let Some(near) = v.near_min_ns.or(s.tsecr.map(|_| 0)) else {
            return;
        };
        if let Some(c) = self.restart {
            if !c.passed(ts, s.tsecr, near).0 {
                return;
            }
            self.restart = None;
        }
        let close = self
            .round
            .as_ref()
            .and_then(|r| r.ack)
            .map(|c| c.passed(ts, s.tsecr, near));
        if let Some((true, by_ts)) = close {
            if by_ts {
                self.ts_rounds += 1;
            } else {
                self.time_rounds += 1;
            }
            self.close_round(ts, v);
        }
        let r = self.round.get_or_insert(Round {
            start: ts,
            mark: s.end,
            bytes: 0,
            rwnd: None,
            drained: false,
            last: ts,
            max_gap: 0,
            ack: None,
        });
        r.bytes += s.bytes;
        if s.rwnd.is_some() {
            r.rwnd = s.rwnd;
        }
        r.drained |= s.drained;
        r.max_gap = r.max_gap.max(ts - r.last);
        r.last = ts;
    }

    fn close_round(&mut self, now: i64, v: Vantage) {
        let Some(r) = self.round.take() else {
            return;
        };
        let b = r.bytes;
        let dur = (now - r.start).max(0);
        self.last_round_bytes = b;
        self.round_len = dur;
        if self.in_recovery {
            return;
        }
        let mss = self.mss.max(1);
        let idle = v
            .full_min_ns
            .is_some_and(|f| r.max_gap.max(now - r.last) > f + 1_000_000);
        let kind = if r.rwnd.is_some_and(|w| b * 10 >= w * 9) {
            Kind::Rwnd
        } else if b < 3 * mss || idle || (r.drained && b * 10 < self.prev * 9) {
            Kind::App
        } else if self.after.as_ref().is_some_and(|a| a.flights.is_empty()) {
            Kind::Avoidance
        } else if self.prev >= 3 * mss {
            let g = b as f64 / self.prev as f64;
            if g >= 1.5 {
                Kind::SlowStart
            } else if g < 0.75 {
                Kind::App
            } else {
                Kind::Avoidance
            }
        } else {
            Kind::First
        };
        match kind {
            Kind::Rwnd => {
                self.rwnd_rounds += 1;
                self.prev = 0;
                self.recent.clear();
                self.finish_after();
                return;
            }
            Kind::App => {
                self.app_rounds += 1;
                self.prev = 0;
                return;
            }
            Kind::SlowStart => {
                self.ss_rounds += 1;
                self.ss_ns += dur;
            }
            Kind::Avoidance => {
                self.ca_rounds += 1;
                self.ca_ns += dur;
            }
            Kind::First => {}
        }
        self.cwnd_last = b;
        self.cwnd_max = self.cwnd_max.max(b);
        self.prev = b;
        self.prev_slow_start = kind == Kind::SlowStart;
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(b);
        if let Some(a) = self.after.as_mut() {
            a.flights.push(b);
            if a.flights.len() == 2 && self.betas.len() < MAX_BETAS {
                let after = (a.flights[0] + a.flights[1]) as f64 / 2.0;
                self.betas.push((after / a.before as f64) as f32);
            }
            if a.flights.len() >= REGROWTH_ROUNDS {
                self.finish_after();
            }
        }
    }

    /// The regrowth after a measured recovery ends (enough rounds, a new
    /// loss, or a change of regime): its slope, per round, in MSS.
    fn finish_after(&mut self) {
        let Some(a) = self.after.take() else {
            return;
        };
        let f = &a.flights;
        if f.len() < 4 || self.slopes.len() >= MAX_BETAS {
            return;
        }
        let mss = self.mss.max(1) as f64;
        let slope = |ys: &[u64]| -> f64 {
            let n = ys.len() as f64;
            let mx = (n - 1.0) / 2.0;
            let my = ys.iter().map(|&y| y as f64).sum::<f64>() / n;
            let (mut num, mut den) = (0.0, 0.0);
            for (i, &y) in ys.iter().enumerate() {
                let dx = i as f64 - mx;
                num += dx * (y as f64 - my);
                den += dx * dx;
            }
            if den > 0.0 {
                num / den / mss
            } else {
                0.0
            }
        };
        let all = slope(f);
        let h = f.len() / 2;
        let bend = slope(&f[h..]) - slope(&f[..=h]);
        self.slopes.push((all as f32, bend as f32));
    }

    /// A retransmission starting a loss recovery (`fast`: after duplicate
    /// ACKs/SACKs; else a timeout), seen at `ts`.
    pub fn on_loss(&mut self, fast: bool, ts: i64, v: Vantage) {
        if self.in_recovery {
            return;
        }
        self.finish_after();
        self.in_recovery = true;
        self.recovery_fast = fast;
        self.round = None;
        self.restart = None;
        let snap = self.snapshot.take();
        if fast {
            self.fast_losses += 1;
            let horizon = 3 * v.full_min_ns.unwrap_or(0) + 10_000_000;
            self.loss_before = snap
                .filter(|s| ts - s.0 <= horizon)
                .map(|s| (s.1, s.2))
                .or_else(|| self.recent_window().map(|b| (b, self.prev_slow_start)));
        } else {
            self.timeouts += 1;
            self.loss_before = None;
        }
        self.recent.clear();
        self.prev = 0;
    }

    /// All data outstanding at the loss has been acknowledged, by an ACK
    /// seen at `ts` carrying `tsval`.
    pub fn on_recovery_end(&mut self, ts: i64, tsval: Option<u32>) {
        if !self.in_recovery {
            return;
        }
        self.in_recovery = false;
        let mss = self.mss.max(1);
        if let Some((before, slow_start)) = self.loss_before.take() {
            if slow_start {
                self.ss_exit_losses += 1;
            } else if self.recovery_fast && before >= 4 * mss {
                self.after = Some(After {
                    before,
                    flights: Vec::new(),
                });
            }
        }
        self.restart = Some(Clock { ts, tsval });
        self.round = None;
        self.prev = 0;
    }

    pub fn in_recovery(&self) -> bool {
        self.in_recovery
    }

    /// Departures: (paced share, departures counted), next to the sender.
    pub fn pacing(&self, v: Vantage) -> Option<(f64, u64)> {
        if !v.at_sender() || self.departure_count < MIN_DEPARTURES {
            return None;
        }
        let h = self.departures.as_ref()?;
        // The line rate: the 2nd percentile of the gaps.
        let mut gap_hist = [0u64; BINS];
        for row in h.iter() {
            for (g, n) in row.iter().enumerate() {
                gap_hist[g] += u64::from(*n);
            }
        }
        let total: u64 = gap_hist.iter().sum();
        if total == 0 {
            return None;
        }
        let mut acc = 0;
        let mut line = 0;
        for (g, n) in gap_hist.iter().enumerate() {
            acc += n;
            if acc * 50 >= total {
                line = g;
                break;
            }
        }
        // A link or shaper slower than the sender between it and the capture
        // point spaces packets at its own rate: the lowest gap bin above
        // 8 µs holding 10 % of the gaps, when it is also (next to) the most
        // common such bin, is that line rate too (pacing shows a spread:
        // BBR's quanta of two segments, then the pacing interval).
        let above = bin_us(8000);
        let lowest = (above..BINS).find(|&g| gap_hist[g] * 10 >= total);
        let mode = (above..BINS)
            .max_by(|&a, &b| gap_hist[a].cmp(&gap_hist[b]).then(b.cmp(&a)))
            .unwrap_or(above);
        let shaper = lowest.filter(|&g| g + 1 >= mode).map_or(0, |g| g + 1);
        let gap_max = (line + 1).max(bin_us(4000)).max(shaper);
        let lag_max = bin_us(ACK_TRIGGER_NS.max(2 * v.near_min_ns.unwrap_or(0)));
        let mut clocked = 0u64;
        for (l, row) in h.iter().enumerate() {
            for (g, n) in row.iter().enumerate() {
                if l <= lag_max || g <= gap_max {
                    clocked += u64::from(*n);
                }
            }
        }
        Some((1.0 - clocked as f64 / total as f64, self.departure_count))
    }

    /// The congestion-control hint (see the module documentation).
    ///
    /// Evidence is counted as votes for Reno, CUBIC and BBR: each measured
    /// reduction votes by its β (below 0.6 Reno, 0.65–0.8 CUBIC, from 0.88
    /// BBR; half votes for each neighbour in between); paced departures next to the sender are worth two votes
    /// for BBR (three with at least 500 departures, half of them paced),
    /// ACK-clocked ones cut BBR's votes to a quarter. The winner needs 60 %
    /// of the votes (else "unknown"); the confidence is a base that grows
    /// with the votes cast (0.4 for one, up to 0.8 for five or more)
    /// times the winner's share, moved by ±0.1 when the regrowth fits or
    /// contradicts the family, and cut to 70 % for rounds timed without
    /// timestamps away from the sender.
    pub fn hint(&self, v: Vantage) -> CcHint {
        let n = self.betas.len();
        let losses = self.fast_losses + self.timeouts;
        let pacing = self.pacing(v);
        let paced = pacing.is_some_and(|p| p.0 >= PACED);
        let unpaced = pacing.is_some_and(|p| p.0 < UNPACED);
        let pace_text = pacing.map(|(p, k)| {
            format!(
                "{:.0}% of {k} departures paced{}",
                p * 100.0,
                if p >= PACED {
                    " (sent on a timer, not on arriving ACKs, as BBR does)"
                } else if p < UNPACED {
                    " (ACK-clocked bursts)"
                } else {
                    ""
                }
            )
        });
        // Votes: Reno, CUBIC, BBR.
        let mut votes = [0.0f64; 3];
        for &x in &self.betas {
            let x = f64::from(x);
            let split = |v: &mut [f64; 3], a: usize, b: usize| {
                v[a] += 0.5;
                v[b] += 0.5;
            };
            if x < 0.6 {
                votes[0] += 1.0;
            } else if x < 0.65 {
                split(&mut votes, 0, 1);
            } else if x < 0.8 {
                votes[1] += 1.0;
            } else if x < 0.88 {
                split(&mut votes, 1, 2);
            } else {
                votes[2] += 1.0;
            }
        }
        if paced {
            let (p, k) = pacing.unwrap_or_default();
            votes[2] += if k >= 500 && p >= 0.5 { 3.0 } else { 2.0 };
        } else if unpaced {
            votes[2] *= 0.25;
        }
        let total: f64 = votes.iter().sum();
        let mut b: Vec<f64> = self.betas.iter().map(|x| f64::from(*x)).collect();
        let beta = median(&mut b);
        let beta_text = beta.map(|beta| {
            format!(
                "{n} loss event(s) measured: window after recovery {:.0}% of before",
                beta * 100.0
            )
        });
        if total <= 0.0 {
            let mut reasoning = if losses == 0 {
                format!(
                    "no loss: the response to loss, which tells algorithms apart, was not observed ({} slow-start and {} congestion-avoidance rounds)",
                    self.ss_rounds, self.ca_rounds
                )
            } else if self.fast_losses == 0 {
                format!(
                    "{} timeout(s) only: every algorithm restarts from one segment",
                    self.timeouts
                )
            } else if let Some(t) = &beta_text {
                format!("{t}, as BBR's, but the departures are ACK-clocked, not paced as BBR's")
            } else if self.ss_exit_losses == self.fast_losses {
                format!(
                    "{} loss(es), all ending slow start: the reduction cannot be measured",
                    self.fast_losses
                )
            } else {
                format!(
                    "{} fast-retransmission loss(es) but no window-limited rounds around them to measure the reduction",
                    self.fast_losses
                )
            };
            if let Some(t) = pace_text {
                reasoning.push_str("; ");
                reasoning.push_str(&t);
            }
            return CcHint {
                hint: "unknown",
                confidence: if losses == 0 { 0.0 } else { 0.1 },
                reasoning,
            };
        }
        let win = (0..3)
            .max_by(|&a, &c| votes[a].total_cmp(&votes[c]))
            .unwrap_or(0);
        let share = votes[win] / total;
        let names = ["reno-like", "cubic-like", "bbr-like"];
        let mut notes: Vec<String> = Vec::new();
        if let Some(t) = beta_text {
            let what = match beta.unwrap_or(1.0) {
                x if x < 0.6 => "halving, as Reno/NewReno",
                x if x < 0.85 => "β ≈ 0.7, as CUBIC",
                _ => "no multiplicative decrease, as BBR",
            };
            notes.push(format!("{t} ({what})"));
        } else if self.fast_losses > 0 {
            notes.push(format!(
                "{} loss(es), no window reduction measured",
                self.fast_losses
            ));
        }
        if share < 0.6 {
            if let Some(t) = pace_text {
                notes.push(t);
            }
            return CcHint {
                hint: "unknown",
                confidence: 0.15,
                reasoning: format!(
                    "{}: the evidence is split between {} and {}",
                    notes.join("; "),
                    names[win],
                    names[(0..3)
                        .filter(|&i| i != win)
                        .max_by(|&a, &c| votes[a].total_cmp(&votes[c]))
                        .unwrap_or(0)]
                ),
            };
        }
        let hint = names[win];
        let base = match total {
            e if e < 1.5 => 0.4,
            e if e < 2.5 => 0.55,
            e if e < 3.5 => 0.65,
            e if e < 5.0 => 0.75,
            _ => 0.8,
        };
        let mut conf: f64 = base * share;
        let mut sl: Vec<f64> = self.slopes.iter().map(|x| f64::from(x.0)).collect();
        let mut c: Vec<f64> = self.slopes.iter().map(|x| f64::from(x.1)).collect();
        if let (Some(s), Some(bend)) = (median(&mut sl), median(&mut c)) {
            let shape = if bend < -0.3 {
                "slowing down (concave)"
            } else if bend > 0.3 {
                "speeding up (convex)"
            } else {
                "linear"
            };
            // BBR has no regrowth to speak of (its flight follows its
            // bandwidth and RTT estimates): the slope is only reported.
            let fits = match hint {
                "reno-like" => Some((0.3..=1.7).contains(&s) && bend.abs() <= 0.6),
                "cubic-like" => Some(s > 1.7 || bend.abs() > 0.3 || (0.2..=0.8).contains(&s)),
                _ => None,
            };
            let expect = match hint {
                "reno-like" => "Reno adds 0.5 to 1",
                _ => "CUBIC: concave/convex, or about 0.5 while Reno-friendly",
            };
            notes.push(match fits {
                Some(f) => {
                    conf += if f { 0.1 } else { -0.1 };
                    format!(
                        "regrowth {s:.1} MSS per round, {shape} ({}: {expect})",
                        if f { "fits" } else { "does not fit" }
                    )
                }
                None => format!("flight {s:+.1} MSS per round after recovery"),
            });
        }
        if let Some(t) = pace_text {
            if unpaced && hint != "bbr-like" {
                conf += 0.05;
            }
            notes.push(t);
        }
        let ts_share =
            f64::from(self.ts_rounds) / f64::from((self.ts_rounds + self.time_rounds).max(1));
        if !v.at_sender() && ts_share < 0.5 && n > 0 {
            conf *= 0.7;
            notes.push(
                "rounds timed by the minimum RTT (no TCP timestamps, capture not next to the sender): a bottleneck queue hides part of the window".to_string(),
            );
        }
        if hint == "bbr-like" && unpaced {
            notes.push("but the departures are ACK-clocked, not paced as BBR's".to_string());
        } else if hint == "bbr-like" && !paced {
            notes.push(
                "BBR recognised by its missing reduction only (pacing not seen from here)"
                    .to_string(),
            );
        }
        CcHint {
            hint,
            confidence: conf.clamp(0.05, 0.9),
            reasoning: notes.join("; "),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: i64 = 10_000_000;
    const MSS: u64 = 1000;

    /// A sender-side replica: each round of `segs` segments is sent in a
    /// burst right after the ACK of the previous round's first segment.
    struct Sim {
        t: CwndTracker,
        now: i64,
        seq: i64,
        v: Vantage,
        paced: bool,
    }

    impl Sim {
        fn new(paced: bool) -> Self {
            let mut t = CwndTracker::default();
            t.set_mss(MSS);
            Sim {
                t,
                now: 0,
                seq: 0,
                v: Vantage {
                    near_min_ns: Some(20_000),
                    full_min_ns: Some(R),
                },
                paced,
            }
        }

        fn round(&mut self, segs: u64) {
            let base = self.seq;
            let first_end = self.seq + MSS as i64;
            let spacing = R / 2 / segs.max(1) as i64;
            for i in 0..segs {
                let pair = self.now + (i / 2) as i64 * 2 * spacing;
                let at = if self.paced {
                    // Paced pairs, 12 µs apart, on a timer.
                    pair + 30_000 + (i % 2) as i64 * 12_000
                } else {
                    // ACK-clocked pairs: an ACK of older data just before.
                    if i % 2 == 0 {
                        self.t.on_ack(pair, base, None);
                    }
                    pair + 30_000 + (i % 2) as i64 * 1000
                };
                self.seq += MSS as i64;
                self.t.on_send(
                    &Send {
                        ts: at,
                        end: self.seq,
                        bytes: MSS,
                        new_data: true,
                        tsecr: None,
                        drained: false,
                        rwnd: Some(1 << 30),
                    },
                    self.v,
                );
            }
            self.now += R;
            // The ACK of the round's first segment.
            self.t.on_ack(self.now, first_end, None);
        }

        fn loss(&mut self) {
            self.t.on_loss(true, self.now, self.v);
            self.round(10);
            self.t.on_recovery_end(self.now, None);
        }
    }

    #[test]
    fn slow_start_then_reno_halving_and_linear_regrowth() {
        let mut s = Sim::new(false);
        for w in [10, 20, 40, 80] {
            s.round(w);
        }
        for w in 81..=85 {
            s.round(w);
        }
        s.loss();
        for w in 42..=52 {
            s.round(w);
        }
        s.round(1);
        let t = &s.t;
        assert_eq!(t.ss_rounds, 3, "{t:?}");
        assert!(t.ca_rounds >= 4, "{t:?}");
        assert_eq!(t.fast_losses, 1);
        let h = t.hint(s.v);
        assert_eq!(h.hint, "reno-like", "{h:?}");
        assert!(h.confidence >= 0.4 && h.confidence < 0.7, "{h:?}");
        assert!(h.reasoning.contains("linear"), "{h:?}");
        assert!(t.cwnd_max >= 84 * MSS);
    }

    #[test]
    fn cubic_and_bbr_by_reduction() {
        for (after, want, paced) in [
            (70, "cubic-like", false),
            (98, "bbr-like", true),
            (97, "bbr-like", false),
        ] {
            let mut s = Sim::new(paced);
            let before = if want == "bbr-like" { after } else { 100 };
            for _ in 0..4 {
                for _ in 0..4 {
                    s.round(before);
                }
                s.loss();
                for k in 0..5 {
                    s.round(if want == "bbr-like" { after } else { after + k });
                }
            }
            s.round(1);
            let h = s.t.hint(s.v);
            assert_eq!(h.hint, want, "{h:?} {:?}", s.t);
            if paced {
                assert!(h.confidence >= 0.8, "{h:?}");
                assert!(h.reasoning.contains("paced"), "{h:?}");
            } else if want == "bbr-like" {
                // BBR's reduction without pacing: doubtful.
                assert!(h.confidence < 0.5, "{h:?}");
            } else {
                assert!(h.confidence >= 0.6, "{h:?}");
            }
        }
    }

    #[test]
    fn pacing_alone_says_bbr_and_loss_in_slow_start_is_not_measured() {
        let mut s = Sim::new(true);
        for w in [10, 20, 40, 80] {
            s.round(w);
        }
        s.loss();
        for _ in 0..5 {
            s.round(40);
        }
        assert_eq!(s.t.ss_exit_losses, 1);
        let h = s.t.hint(s.v);
        assert_eq!(h.hint, "bbr-like", "{h:?}");
        assert!(h.confidence <= 0.6, "{h:?}");
        // Far from the sender, departures say nothing.
        let far = Vantage {
            near_min_ns: Some(R),
            full_min_ns: Some(R),
        };
        assert_eq!(s.t.hint(far).hint, "unknown");
    }

    #[test]
    fn a_shaper_is_not_pacing() {
        // Departures at a 100 Mbit/s link's rate (120 µs per segment), not
        // aligned with the ACKs: a slower link, not a pacing sender.
        let mut t = CwndTracker::default();
        t.set_mss(MSS);
        let v = Vantage {
            near_min_ns: Some(20_000),
            full_min_ns: Some(R),
        };
        for i in 0..600i64 {
            if i % 2 == 0 {
                t.on_ack(i * 120_000 - 90_000, 0, None);
            }
            t.on_send(
                &Send {
                    // Every tenth pair leaves back-to-back (a token
                    // bucket's burst).
                    ts: i * 120_000 - if i % 10 == 1 { 119_000 } else { 0 },
                    end: (i + 1) * MSS as i64,
                    bytes: MSS,
                    new_data: true,
                    tsecr: None,
                    drained: false,
                    rwnd: None,
                },
                v,
            );
        }
        let (p, n) = t.pacing(v).unwrap();
        assert!(p < 0.1 && n > 500, "{p} {n}");
    }

    #[test]
    fn no_loss_or_timeouts_only_is_unknown() {
        let mut s = Sim::new(false);
        s.round(10);
        s.round(20);
        assert_eq!(s.t.hint(s.v).hint, "unknown");
        assert_eq!(s.t.hint(s.v).confidence, 0.0);
        s.t.on_loss(false, s.now, s.v);
        s.t.on_recovery_end(s.now, None);
        let h = s.t.hint(s.v);
        assert_eq!((h.hint, h.confidence), ("unknown", 0.1));
        assert!(h.reasoning.contains("timeout"));
    }

    #[test]
    fn timestamps_clock_rounds_next_to_the_receiver() {
        // Next to the receiver: data arrives, its ACK leaves at once, and
        // data echoing that ACK's TSval arrives one (queue-inflated) RTT
        // later. Rounds must follow the TSvals, not the minimum RTT.
        let mut t = CwndTracker::default();
        t.set_mss(MSS);
        let v = Vantage {
            near_min_ns: Some(R),
            full_min_ns: Some(R),
        };
        let mut seq = 0i64;
        let mut now = 0i64;
        let rtt = 2 * R; // queueing doubles the RTT
        for (k, w) in [30u64, 31, 32].into_iter().enumerate() {
            for i in 0..w {
                let at = now + i as i64 * rtt / w as i64;
                seq += MSS as i64;
                t.on_send(
                    &Send {
                        ts: at,
                        end: seq,
                        bytes: MSS,
                        new_data: true,
                        tsecr: Some(k as u32),
                        drained: false,
                        rwnd: None,
                    },
                    v,
                );
                t.on_ack(at + 1000, seq, Some(k as u32 + 1));
            }
            now += rtt;
        }
        t.on_send(
            &Send {
                ts: now,
                end: seq + 1000,
                bytes: MSS,
                new_data: true,
                tsecr: Some(4),
                drained: false,
                rwnd: None,
            },
            v,
        );
        assert_eq!(t.cwnd_last, 32 * MSS, "{t:?}");
        assert_eq!(t.ts_rounds, 3);
    }

    #[test]
    fn receive_window_limited_rounds_are_not_growth() {
        let mut t = CwndTracker::default();
        t.set_mss(MSS);
        let v = Vantage {
            near_min_ns: Some(0),
            full_min_ns: Some(R),
        };
        let mut seq = 0;
        for k in 0..6 {
            let first = seq + MSS as i64;
            for i in 0..20 {
                seq += MSS as i64;
                t.on_send(
                    &Send {
                        ts: k * R + i * 1000,
                        end: seq,
                        bytes: MSS,
                        new_data: true,
                        tsecr: None,
                        drained: false,
                        rwnd: Some(20 * MSS),
                    },
                    v,
                );
            }
            t.on_ack(k * R + R - 1, first, None);
        }
        assert_eq!(t.rwnd_rounds, 5);
        assert_eq!(t.ss_rounds + t.ca_rounds, 0);
        assert_eq!(t.bytes_per_rtt(), 20 * MSS);
    }
}
