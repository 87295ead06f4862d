//! Where the time went, per direction of a connection (in the spirit of
//! T-RAT, Zhang et al. 2002, and Siekkinen et al. 2005).
//!
//! The connection's duration (first to last frame) is cut at every frame of
//! the connection; each interval between two consecutive frames goes, for
//! each direction (the data that direction sends), into exactly one bucket,
//! from the state after the earlier frame, in this priority order:
//!
//! 1. `zero_window`: the receiver advertises a zero window;
//! 2. `loss_recovery`: the sender is retransmitting (from its first
//!    retransmission until everything outstanding then is acknowledged),
//!    or — decided when the retransmission appears — was waiting for it:
//!    time provisionally put in 3–5 since the last progress (new data
//!    acknowledged) moves here when a retransmission follows;
//! 3. `receive_window`: data outstanding, and the sender's last new data
//!    reached the right edge of the window it knew (the edge advertised a
//!    near-side RTT before: next to the receiver that is the edge of about
//!    one RTT ago), or its flight (unacknowledged bytes, or bytes sent in
//!    the last round where larger: see `cwnd.rs`) is at least 90 % of the
//!    receiver's advertised window;
//! 4. `application`: nothing outstanding and nothing sent in the last
//!    round trip (the application has nothing to send, e.g. between
//!    requests, or waits for the peer), or the last new segment was shorter
//!    than a full one (the sender drained what it had);
//! 5. `bandwidth`: data outstanding and none of the above: the path (its
//!    bandwidth or the congestion window) sets the pace.
//!
//! So the shares of a direction add up to 1 (the duration). Everything
//! before a direction's first data counts as `application`.

pub const BUCKETS: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Limit {
    ZeroWindow = 0,
    LossRecovery,
    ReceiveWindow,
    Application,
    Bandwidth,
}

impl Limit {
    pub const ALL: [Limit; BUCKETS] = [
        Limit::ZeroWindow,
        Limit::LossRecovery,
        Limit::ReceiveWindow,
        Limit::Application,
        Limit::Bandwidth,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Limit::ZeroWindow => "zero_window",
            Limit::LossRecovery => "loss_recovery",
            Limit::ReceiveWindow => "receive_window",
            Limit::Application => "application",
            Limit::Bandwidth => "bandwidth",
        }
    }
}

/// The state of one direction at the start of an interval.
#[derive(Debug, Clone, Copy, Default)]
pub struct DirState {
    pub zero_window: bool,
    pub in_recovery: bool,
    /// Estimated bytes in flight.
    pub flight: u64,
    /// Unacknowledged bytes seen at the capture point; at least 1 when data
    /// was sent within the last round trip (0: the sender is idle).
    pub outstanding: u64,
    /// The receiver's advertised window, scaled (None: unknown).
    pub rwnd: Option<u64>,
    /// The last new data reached the window edge the sender knew.
    pub at_edge: bool,
    pub drained: bool,
}

/// The bucket of an interval, and whether it is provisional (could turn
/// out to be a wait for a retransmission).
pub fn classify(s: &DirState) -> (Limit, bool) {
    if s.zero_window {
        (Limit::ZeroWindow, false)
    } else if s.in_recovery {
        (Limit::LossRecovery, false)
    } else if s.outstanding == 0 {
        (Limit::Application, false)
    } else if s.at_edge || s.rwnd.is_some_and(|w| s.flight * 10 >= w * 9) {
        (Limit::ReceiveWindow, true)
    } else if s.drained {
        (Limit::Application, true)
    } else {
        (Limit::Bandwidth, true)
    }
}

#[derive(Debug, Clone, Default)]
pub struct Limitation {
    done: [[i64; BUCKETS]; 2],
    pending: [[i64; BUCKETS]; 2],
}

impl Limitation {
    /// Add an interval of `ns` for direction `dir`.
    pub fn add(&mut self, dir: usize, s: &DirState, ns: i64) {
        if ns <= 0 {
            return;
        }
        let (b, provisional) = classify(s);
        if provisional {
            self.pending[dir][b as usize] += ns;
        } else {
            self.done[dir][b as usize] += ns;
        }
    }

    /// Progress in `dir` (new data acknowledged): provisional time stands.
    pub fn commit(&mut self, dir: usize) {
        for (d, p) in self.done[dir].iter_mut().zip(self.pending[dir].iter_mut()) {
            *d += *p;
            *p = 0;
        }
    }

    /// `dir` retransmits: the provisional time was a wait for it.
    pub fn to_loss(&mut self, dir: usize) {
        let moved: i64 = self.pending[dir].iter().sum();
        self.pending[dir] = [0; BUCKETS];
        self.done[dir][Limit::LossRecovery as usize] += moved;
    }

    /// Nanoseconds per bucket for `dir` (provisional time included as is).
    pub fn totals(&self, dir: usize) -> [i64; BUCKETS] {
        let mut t = self.done[dir];
        for (a, p) in t.iter_mut().zip(self.pending[dir]) {
            *a += p;
        }
        t
    }

    /// Shares of `duration_ns` per bucket (None for a zero duration).
    pub fn shares(&self, dir: usize, duration_ns: i64) -> Option<[f64; BUCKETS]> {
        let t = self.totals(dir);
        let sum: i64 = t.iter().sum();
        let total = sum.max(duration_ns);
        if total <= 0 {
            return None;
        }
        let mut out = [0.0; BUCKETS];
        for (o, v) in out.iter_mut().zip(t) {
            *o = v as f64 / total as f64;
        }
        // Anything the intervals did not cover is application time.
        out[Limit::Application as usize] += (total - sum) as f64 / total as f64;
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_order() {
        let s = DirState {
            zero_window: true,
            in_recovery: true,
            flight: 100,
            outstanding: 100,
            rwnd: Some(100),
            at_edge: false,
            drained: true,
        };
        assert_eq!(classify(&s), (Limit::ZeroWindow, false));
        let s = DirState {
            zero_window: false,
            ..s
        };
        assert_eq!(classify(&s), (Limit::LossRecovery, false));
        let s = DirState {
            in_recovery: false,
            ..s
        };
        assert_eq!(classify(&s), (Limit::ReceiveWindow, true));
        let s = DirState {
            rwnd: Some(1000),
            ..s
        };
        assert_eq!(classify(&s), (Limit::Application, true));
        let s = DirState {
            drained: false,
            ..s
        };
        assert_eq!(classify(&s), (Limit::Bandwidth, true));
        let s = DirState {
            outstanding: 0,
            ..s
        };
        assert_eq!(classify(&s), (Limit::Application, false));
    }

    #[test]
    fn pending_time_commits_or_becomes_loss() {
        let busy = DirState {
            flight: 10,
            outstanding: 10,
            ..Default::default()
        };
        let idle = DirState::default();
        let mut l = Limitation::default();
        l.add(0, &idle, 100);
        l.add(0, &busy, 50);
        l.commit(0);
        l.add(0, &busy, 200);
        l.to_loss(0);
        l.add(0, &busy, 30);
        l.add(1, &idle, 380);
        assert_eq!(l.totals(0), [0, 200, 0, 100, 80]);
        let s = l.shares(0, 380).unwrap();
        assert!((s.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!((s[Limit::LossRecovery as usize] - 200.0 / 380.0).abs() < 1e-12);
        // Uncovered time (e.g. no frame yet) is application time.
        let s = l.shares(1, 400).unwrap();
        assert!((s[Limit::Application as usize] - 1.0).abs() < 1e-12);
        assert_eq!(Limitation::default().shares(0, 0), None);
    }
}
