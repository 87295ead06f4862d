//! A passive replica of a sender's congestion window, after Jaiswal et al.
//! ("Inferring TCP connection characteristics through passive
//! measurements", INFOCOM 2004), kept deliberately simple.
//!
//! Rounds: a sender that is window-limited sends one window per round trip,
//! so the bytes it sends in one RTT estimate its window, wherever the
//! capture was taken (next to the sender the flight is also visible as
//! unacknowledged bytes; next to the receiver it is not). A round starts at
//! the first data segment after the previous round and lasts the current
//! minimum full RTT; the bytes sent in it (new and retransmitted) are the
//! round's window estimate. Each finished round is classified:
//!
//! * rounds in loss recovery are skipped (fast recovery) or restart the
//!   estimate (timeout: every algorithm restarts from one segment);
//! * rounds reaching 90 % of the receive window are receive-window
//!   limited, and rounds under 3 MSS too small to tell (application);
//! * otherwise, against the previous round: ×1.5 or more is slow start,
//!   a drop below ×0.75 without loss is the application sending less, and
//!   anything else is congestion avoidance.
//!
//! On a fast retransmission the window before the loss is the last full
//! round's bytes; the first full round after the recovery gives the
//! reduction factor β = after / before, and the following rounds the
//! regrowth per round (in MSS). The congestion-control hint:
//!
//! * β < 0.6: **Reno-like** (halving; Reno then regrows 1 MSS per RTT, or
//!   0.5 when it counts ACKs and the receiver ACKs every other segment);
//! * 0.6 ≤ β < 0.85: **CUBIC-like** (β = 0.7, faster concave regrowth);
//! * β ≥ 0.85: **BBR-like** (no loss-driven reduction; BBR paces at the
//!   estimated bandwidth and keeps about one BDP in flight).
//!
//! Confidence grows with the number of measured reductions (0.35 for one,
//! up to 0.7), drops when they disagree, and moves ±0.1–0.15 with whether
//! the regrowth matches. With no fast-retransmission loss the algorithm is
//! not observable: "unknown" with confidence ≤ 0.1. Application-limited
//! senders (request/response) rarely reach a window-limited state: their
//! hint stays unknown. The round clock is not synchronised with the
//! sender's ACK clock, so a single round can be off by a burst.

/// Reductions and regrowth increments kept (bounded memory).
const MAX_BETAS: usize = 32;
const MAX_INCREMENTS: usize = 64;
/// Regrowth is followed for this many rounds after a reduction.
const REGROWTH_ROUNDS: u8 = 8;

#[derive(Debug, Clone, PartialEq)]
pub struct CcHint {
    /// "reno-like", "cubic-like", "bbr-like" or "unknown".
    pub hint: &'static str,
    pub confidence: f64,
    pub reasoning: String,
}

#[derive(Debug, Clone, Default)]
pub struct CwndTracker {
    mss: u64,
    round_start: Option<i64>,
    round_len: i64,
    round_bytes: u64,
    round_rwnd: Option<u64>,
    /// Bytes of the previous classified round (0: no base to compare).
    prev: u64,
    in_recovery: bool,
    recovery_fast: bool,
    loss_bytes: u64,
    pending_beta: Option<u64>,
    after_loss: u8,
    betas: Vec<f32>,
    increments: Vec<f32>,
    pub ss_ns: i64,
    pub ca_ns: i64,
    pub ss_rounds: u32,
    pub ca_rounds: u32,
    pub rwnd_rounds: u32,
    pub app_rounds: u32,
    pub fast_losses: u32,
    pub timeouts: u32,
    /// Largest window estimate of a classified round, and the last one.
    pub cwnd_max: u64,
    pub cwnd_last: u64,
}

impl CwndTracker {
    /// Largest segment the sender uses (the peer's MSS, or the largest seen).
    pub fn set_mss(&mut self, mss: u64) {
        self.mss = self.mss.max(mss);
    }

    /// The sender's recent bytes per round trip (an estimate of its flight
    /// that does not depend on the capture point): the larger of the last
    /// full round and the current one.
    pub fn bytes_per_rtt(&self) -> u64 {
        self.prev.max(self.round_bytes)
    }

    /// [`Self::bytes_per_rtt`], or 0 when nothing was sent in the last two
    /// rounds before `now` (the estimate is stale).
    pub fn bytes_per_rtt_at(&self, now: i64) -> u64 {
        match self.round_start {
            Some(s) if now < s + 2 * self.round_len => self.bytes_per_rtt(),
            _ => 0,
        }
    }

    /// `bytes` of data sent at `ts`; `rtt`: the current full RTT estimate;
    /// `rwnd`: the receive window it was sent into.
    pub fn on_send(&mut self, ts: i64, bytes: u64, rtt: Option<i64>, rwnd: Option<u64>) {
        let Some(r) = rtt.filter(|r| *r > 0) else {
            return;
        };
        let r = r.max(10_000);
        if let Some(start) = self.round_start {
            if ts >= start + self.round_len {
                self.close_round();
                if ts >= start + 2 * self.round_len {
                    // A silent round: the sender had nothing to send.
                    self.prev = 0;
                }
                self.round_start = None;
            }
        }
        if self.round_start.is_none() {
            self.round_start = Some(ts);
            self.round_len = r;
            self.round_bytes = 0;
            self.round_rwnd = None;
        }
        self.round_bytes += bytes;
        if rwnd.is_some() {
            self.round_rwnd = rwnd;
        }
    }

    fn close_round(&mut self) {
        let b = self.round_bytes;
        let dur = self.round_len;
        self.round_bytes = 0;
        let mss = self.mss.max(1);
        if self.in_recovery {
            return;
        }
        if self.round_rwnd.is_some_and(|w| b * 10 >= w * 9) {
            self.rwnd_rounds += 1;
            self.prev = b;
            return;
        }
        if b < 3 * mss {
            self.app_rounds += 1;
            self.prev = 0;
            return;
        }
        self.cwnd_last = b;
        self.cwnd_max = self.cwnd_max.max(b);
        if let Some(before) = self.pending_beta.take() {
            if self.betas.len() < MAX_BETAS {
                self.betas.push(b as f32 / before as f32);
            }
            self.after_loss = 1;
            self.ca_rounds += 1;
            self.ca_ns += dur;
            self.prev = b;
            return;
        }
        if self.prev >= 3 * mss {
            let g = b as f64 / self.prev as f64;
            if g >= 1.5 {
                self.ss_rounds += 1;
                self.ss_ns += dur;
                self.after_loss = 0;
            } else if g < 0.75 {
                self.app_rounds += 1;
                self.after_loss = 0;
            } else {
                self.ca_rounds += 1;
                self.ca_ns += dur;
                if (1..=REGROWTH_ROUNDS).contains(&self.after_loss) {
                    if self.increments.len() < MAX_INCREMENTS {
                        self.increments
                            .push((b as f64 - self.prev as f64) as f32 / mss as f32);
                    }
                    self.after_loss += 1;
                }
            }
        }
        self.prev = b;
    }

    /// A retransmission starting a loss recovery (`fast`: after duplicate
    /// ACKs/SACKs; else a timeout).
    pub fn on_loss(&mut self, fast: bool) {
        if self.in_recovery {
            return;
        }
        self.in_recovery = true;
        self.recovery_fast = fast;
        self.after_loss = 0;
        if fast {
            self.fast_losses += 1;
            self.loss_bytes = self.prev.max(self.round_bytes);
        } else {
            self.timeouts += 1;
            self.pending_beta = None;
        }
    }

    /// All data outstanding at the loss has been acknowledged.
    pub fn on_recovery_end(&mut self) {
        if !self.in_recovery {
            return;
        }
        self.in_recovery = false;
        let mss = self.mss.max(1);
        if self.recovery_fast && self.loss_bytes >= 4 * mss {
            self.pending_beta = Some(self.loss_bytes);
        }
        self.round_start = None;
        self.round_bytes = 0;
        self.prev = 0;
    }

    pub fn in_recovery(&self) -> bool {
        self.in_recovery
    }

    /// The congestion-control hint (see the module documentation).
    pub fn hint(&self) -> CcHint {
        let n = self.betas.len();
        let losses = self.fast_losses + self.timeouts;
        if n == 0 {
            let reasoning = if losses == 0 {
                format!(
                    "no loss: the response to loss, which tells algorithms apart, was not observed ({} slow-start and {} congestion-avoidance rounds)",
                    self.ss_rounds, self.ca_rounds
                )
            } else if self.fast_losses == 0 {
                format!(
                    "{} timeout(s) only: every algorithm restarts from one segment",
                    self.timeouts
                )
            } else {
                format!(
                    "{} fast-retransmission loss(es) but no window-limited round after recovery to measure the reduction",
                    self.fast_losses
                )
            };
            return CcHint {
                hint: "unknown",
                confidence: if losses == 0 { 0.0 } else { 0.1 },
                reasoning,
            };
        }
        let mut b: Vec<f64> = self.betas.iter().map(|x| f64::from(*x)).collect();
        b.sort_by(f64::total_cmp);
        let beta = b[n / 2];
        let spread = b[n - 1] - b[0];
        let inc = (!self.increments.is_empty()).then(|| {
            self.increments.iter().map(|x| f64::from(*x)).sum::<f64>()
                / self.increments.len() as f64
        });
        let mut conf: f64 = match n {
            1 => 0.35,
            2 => 0.5,
            3 => 0.6,
            _ => 0.7,
        };
        if spread > 0.3 {
            conf *= 0.6;
        }
        let hint = if beta < 0.6 {
            "reno-like"
        } else if beta < 0.85 {
            "cubic-like"
        } else {
            "bbr-like"
        };
        let shape = match (hint, inc) {
            ("reno-like", Some(i)) if (0.1..=1.7).contains(&i) => {
                conf += 0.15;
                format!("; regrowth {i:.1} MSS per RTT (linear, as Reno)")
            }
            ("reno-like", Some(i)) => {
                conf -= 0.1;
                format!("; regrowth {i:.1} MSS per RTT (Reno adds 0.5 to 1)")
            }
            ("cubic-like", Some(i)) if i > 1.7 => {
                conf += 0.1;
                format!("; regrowth {i:.1} MSS per RTT (faster than Reno, as CUBIC)")
            }
            (_, Some(i)) => format!("; regrowth {i:.1} MSS per RTT"),
            (_, None) => String::new(),
        };
        let what = match hint {
            "reno-like" => "halving, as Reno/NewReno",
            "cubic-like" => "β ≈ 0.7, as CUBIC",
            _ => "no loss-driven reduction, as BBR",
        };
        CcHint {
            hint,
            confidence: conf.clamp(0.05, 0.9),
            reasoning: format!(
                "{n} loss event(s) measured: window reduced to {:.0}% of its size before the loss ({what}){shape}",
                beta * 100.0
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: i64 = 10_000_000;
    const MSS: u64 = 1000;

    /// Send `segs` segments spread over one round starting at round `k`.
    fn round(t: &mut CwndTracker, k: i64, segs: u64) {
        for i in 0..segs {
            let ts = k * R + (i as i64) * (R / 2) / segs.max(1) as i64;
            t.on_send(ts, MSS, Some(R), Some(1 << 30));
        }
    }

    #[test]
    fn slow_start_then_reno_halving_and_linear_regrowth() {
        let mut t = CwndTracker::default();
        t.set_mss(MSS);
        let mut k = 0;
        for s in [10, 20, 40, 80] {
            round(&mut t, k, s);
            k += 1;
        }
        for s in 81..=85 {
            round(&mut t, k, s);
            k += 1;
        }
        assert_eq!(t.ss_rounds, 3);
        assert!(t.ca_rounds >= 4, "{t:?}");
        // Loss: fast recovery for a round, then half the window.
        t.on_loss(true);
        round(&mut t, k, 42);
        k += 1;
        t.on_recovery_end();
        for s in 43..=50 {
            round(&mut t, k, s);
            k += 1;
        }
        round(&mut t, k, 1);
        assert_eq!(t.fast_losses, 1);
        let h = t.hint();
        assert_eq!(h.hint, "reno-like", "{h:?}");
        assert!(h.confidence > 0.4 && h.confidence < 0.6, "{h:?}");
        assert!(h.reasoning.contains("linear"), "{h:?}");
        assert!(t.cwnd_max >= 84 * MSS);
    }

    #[test]
    fn cubic_and_bbr_by_reduction() {
        for (after, want) in [(70, "cubic-like"), (98, "bbr-like")] {
            let mut t = CwndTracker::default();
            t.set_mss(MSS);
            let mut k = 0;
            for _ in 0..3 {
                for s in [100, 100] {
                    round(&mut t, k, s);
                    k += 1;
                }
                t.on_loss(true);
                round(&mut t, k, 50);
                k += 1;
                t.on_recovery_end();
                for s in [after, after + 5, after + 8] {
                    round(&mut t, k, s);
                    k += 1;
                }
            }
            round(&mut t, k, 1);
            let h = t.hint();
            assert_eq!(h.hint, want, "{h:?}");
            assert!(h.confidence >= 0.6, "{h:?}");
        }
    }

    #[test]
    fn no_loss_or_timeouts_only_is_unknown() {
        let mut t = CwndTracker::default();
        t.set_mss(MSS);
        round(&mut t, 0, 10);
        round(&mut t, 1, 20);
        assert_eq!(t.hint().hint, "unknown");
        assert_eq!(t.hint().confidence, 0.0);
        t.on_loss(false);
        t.on_recovery_end();
        let h = t.hint();
        assert_eq!((h.hint, h.confidence), ("unknown", 0.1));
        assert!(h.reasoning.contains("timeout"));
    }

    #[test]
    fn receive_window_limited_rounds_are_not_growth() {
        let mut t = CwndTracker::default();
        t.set_mss(MSS);
        for k in 0..5 {
            for i in 0..20 {
                t.on_send(k * R + i * 1000, MSS, Some(R), Some(20 * MSS));
            }
        }
        t.on_send(5 * R, MSS, Some(R), None);
        assert_eq!(t.rwnd_rounds, 5);
        assert_eq!(t.ss_rounds + t.ca_rounds, 0);
        assert_eq!(t.bytes_per_rtt(), 20 * MSS);
    }
}
