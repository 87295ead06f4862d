//! Receive-window scaling: known from the handshake, or inferred.
//!
//! RFC 7323: both SYNs must carry the window-scale option for scaling to be
//! on; each side's option gives the shift applied to the windows *it*
//! advertises (SYN segments themselves are never scaled). When the SYN/ACK
//! is seen with the option, the SYN had it too (a server only answers a
//! client that offered it), so the SYN/ACK's side is known even if the SYN
//! was not captured; without the option in either SYN, nothing is scaled.
//!
//! When a side's shift is not known (handshake not captured) it is inferred
//! as the smallest shift that makes that side's advertised window at least
//! the bytes in flight towards it: a sender never has more unacknowledged
//! data than the receiver's window. This is a lower bound (the true shift
//! may be larger when flights were small), reported with
//! `window_scale_inferred`, and it can only grow during the pass.

/// Largest shift allowed by RFC 7323.
pub const MAX_SHIFT: u8 = 14;

#[derive(Debug, Clone, Default)]
pub struct WindowScale {
    /// Per direction: the SYN (or SYN/ACK) seen from that side, with its
    /// window-scale option.
    syn: [Option<Option<u8>>; 2],
    /// Inferred lower bound of the shift of each side's windows.
    required: [u8; 2],
    /// Last window each side advertised outside SYNs, unscaled.
    last_raw: [Option<u16>; 2],
}

impl WindowScale {
    /// A segment from `dir`.
    pub fn on_segment(&mut self, dir: usize, syn: bool, ws: Option<u8>, window: u16) {
        if syn {
            self.syn[dir] = Some(ws.map(|s| s.min(MAX_SHIFT)));
        } else {
            self.last_raw[dir] = Some(window);
        }
    }

    /// Shift applied to the windows advertised by `dir`, and whether it was
    /// inferred.
    pub fn shift(&self, dir: usize) -> (u8, bool) {
        match (self.syn[dir], self.syn[1 - dir]) {
            // Both SYNs seen: on only if both offered it.
            (Some(Some(s)), Some(Some(_))) => (s, false),
            (Some(_), Some(_)) => (0, false),
            // A SYN without the option turns scaling off for both.
            (Some(None), None) | (None, Some(None)) => (0, false),
            // Only our own SYN/ACK with the option: the SYN had it too.
            // Only our SYN with the option (no SYN/ACK seen): assumed agreed.
            (Some(Some(s)), None) => (s, false),
            // Only the peer's SYN(/ACK) with the option: ours is unknown.
            (None, Some(Some(_))) | (None, None) => (self.required[dir], true),
        }
    }

    /// The last window `dir` advertised (outside SYNs), scaled with what is
    /// known now.
    pub fn current(&self, dir: usize) -> Option<u64> {
        self.last_raw[dir].map(|w| self.scaled(dir, w))
    }

    pub fn scaled(&self, dir: usize, raw: u16) -> u64 {
        u64::from(raw) << self.shift(dir).0
    }

    /// Bytes in flight towards `receiver`: raise the inferred shift so the
    /// last advertised window covers them.
    pub fn observe_flight(&mut self, receiver: usize, flight: u64) {
        if !self.shift(receiver).1 {
            return;
        }
        let Some(raw) = self.last_raw[receiver] else {
            return;
        };
        if raw == 0 {
            return;
        }
        let mut s = self.required[receiver];
        while s < MAX_SHIFT && (u64::from(raw) << s) < flight {
            s += 1;
        }
        self.required[receiver] = s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_with_and_without_option() {
        let mut w = WindowScale::default();
        w.on_segment(0, true, Some(7), 64240);
        w.on_segment(1, true, Some(9), 65160);
        assert_eq!(w.shift(0), (7, false));
        assert_eq!(w.shift(1), (9, false));
        w.on_segment(1, false, None, 100);
        assert_eq!(w.current(1), Some(100 << 9));

        let mut w = WindowScale::default();
        w.on_segment(0, true, Some(7), 64240);
        w.on_segment(1, true, None, 65160);
        assert_eq!(w.shift(0), (0, false));
        assert_eq!(w.shift(1), (0, false));

        // Only the SYN/ACK captured, with the option.
        let mut w = WindowScale::default();
        w.on_segment(1, true, Some(8), 65160);
        assert_eq!(w.shift(1), (8, false));
        assert!(w.shift(0).1);
    }

    #[test]
    fn shift_is_inferred_from_flight() {
        let mut w = WindowScale::default();
        w.on_segment(1, false, None, 512);
        assert_eq!(w.shift(1), (0, true));
        w.observe_flight(1, 100);
        assert_eq!(w.shift(1), (0, true));
        w.observe_flight(1, 60_000); // 512 << 7 = 65536 >= 60000
        assert_eq!(w.shift(1), (7, true));
        w.observe_flight(1, 1000); // never shrinks
        assert_eq!(w.shift(1), (7, true));
        w.observe_flight(1, u64::MAX);
        assert_eq!(w.shift(1), (MAX_SHIFT, true));
        // The other side has advertised nothing: no inference.
        w.observe_flight(0, 1 << 20);
        assert_eq!(w.shift(0), (0, true));
    }
}
