//! One direction's un-acknowledged segments, as Wireshark's sequence
//! analysis keeps them (`tcp_unacked_t`): a segment is forgotten once an ACK
//! reaches its end, and trimmed when an ACK falls inside it.
//!
//! Wireshark walks the whole list at every segment. In a fast transfer the
//! list holds a window of segments and every ACK walks all of them, although
//! only those at the front can change: this walk was a quarter of the TCP
//! analysis' instructions on the benchmark capture. [`Unacked::forget_acked`]
//! gives exactly the result of that walk ([`forget_acked_walk`]) but, while
//! the list is *ordered* (below), stops at the first segment the ACK does not
//! reach.

use std::collections::VecDeque;

use super::seq_analysis::{gt, le};

/// An un-acknowledged segment: its frame and time (the RTO reference of a
/// retransmission) and its sequence range (`nextseq` includes SYN/FIN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub frame: u64,
    pub ts: i64,
    pub seq: u32,
    pub nextseq: u32,
}

/// What an ACK does to one segment (Wireshark's loop in
/// `tcp_analyze_sequence_number()`, the ACK field used even without the ACK
/// bit): `false` to forget it.
#[inline]
fn apply(ack: u32, u: &mut Segment) -> bool {
    if ack == u.nextseq {
        false
    } else if gt(ack, u.seq) && le(ack, u.nextseq) {
        u.seq = ack;
        true
    } else {
        gt(u.nextseq, ack)
    }
}

/// The plain walk over every segment: the reference for the fast path.
fn forget_acked_walk(list: &mut VecDeque<Segment>, ack: u32) {
    list.retain_mut(|u| apply(ack, u));
}

/// Offsets from the front segment's `seq` stay below this while the list is
/// ordered, so that an ACK within [`SPAN`] of them compares with them as
/// plain integers (see [`Unacked::forget_acked`]).
const SPAN: u32 = 1 << 30;

/// The list, and whether it is *ordered*: taking offsets from the front
/// segment's `seq` (wrapping), every segment's `seq` offset is at least the
/// one before it, and every `nextseq` offset is above its own `seq` offset
/// and below [`SPAN`]. A transfer's segments arrive so, one after the other;
/// a retransmission of older data or a jump in sequence numbers breaks it
/// until a full walk finds it holds again.
#[derive(Debug, Clone)]
pub struct Unacked {
    list: VecDeque<Segment>,
    ordered: bool,
}

impl Default for Unacked {
    fn default() -> Self {
        Unacked {
            list: VecDeque::new(),
            ordered: true,
        }
    }
}

impl Unacked {
    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn first(&self) -> Option<&Segment> {
        self.list.front()
    }

    pub fn push(&mut self, s: Segment) {
        if self.list.is_empty() {
            self.ordered = true;
        }
        if self.ordered {
            let base = self.list.front().map_or(s.seq, |f| f.seq);
            let (os, on) = (s.seq.wrapping_sub(base), s.nextseq.wrapping_sub(base));
            let after_last = self
                .list
                .back()
                .is_none_or(|b| b.seq.wrapping_sub(base) <= os);
            self.ordered = after_last && os < on && on < SPAN;
        }
        self.list.push_back(s);
    }

    /// Forget what `ack` acknowledges and trim what it reaches into, exactly
    /// as [`forget_acked_walk`] does.
    ///
    /// Why stopping early is exact: while the list is ordered, take every
    /// offset from the front's `seq` (`base`), and the ACK's offset `a` as a
    /// signed 32-bit number. With `a` in `[-SPAN, 2^31)` and every segment
    /// offset in `[0, SPAN)`, the differences `apply` computes lie strictly
    /// between -2^31 and 2^31, so its wrapping comparisons are the plain
    /// integer ones. A segment with `seq` offset `s >= a` then has `nextseq`
    /// offset `n > s >= a`: `ack != nextseq`, `ack > seq` fails, and
    /// `nextseq > ack` holds, so `apply` keeps it unchanged. The `seq`
    /// offsets never decrease along the list, so once one reaches `a` all
    /// that follow do: only the segments before it can change.
    ///
    /// The list stays ordered: each of those segments is either forgotten or
    /// trimmed to `seq = ack` (it has `s < a`, so `apply` trims it when
    /// `a <= n`, else forgets it); they stay in front of the rest, whose
    /// offsets are at least `a`; and a new front only lowers every offset
    /// by its own, which is no more than any that follow.
    pub fn forget_acked(&mut self, ack: u32) {
        let Some(front) = self.list.front() else {
            return;
        };
        if !self.ordered {
            self.walk(ack);
            return;
        }
        let base = front.seq;
        let a = i64::from(ack.wrapping_sub(base) as i32);
        if a < -i64::from(SPAN) {
            self.walk(ack);
            return;
        }
        let reached = self
            .list
            .iter()
            .take_while(|u| i64::from(u.seq.wrapping_sub(base)) < a)
            .count();
        if reached == 0 {
            return;
        }
        // Those reached: forgotten or trimmed, kept in their order.
        let mut kept = 0;
        for i in 0..reached {
            let mut u = self.list[i];
            if apply(ack, &mut u) {
                self.list[kept] = u;
                kept += 1;
            }
        }
        self.list.drain(kept..reached);
    }

    /// The walk over every segment, which also finds whether the list is
    /// ordered again.
    fn walk(&mut self, ack: u32) {
        forget_acked_walk(&mut self.list, ack);
        self.ordered = is_ordered(&self.list);
    }
}

fn is_ordered(list: &VecDeque<Segment>) -> bool {
    let Some(base) = list.front().map(|f| f.seq) else {
        return true;
    };
    let mut last = 0;
    list.iter().all(|u| {
        let (os, on) = (u.seq.wrapping_sub(base), u.nextseq.wrapping_sub(base));
        let ok = last <= os && os < on && on < SPAN;
        last = os;
        ok
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(frame: u64, seq: u32, len: u32) -> Segment {
        Segment {
            frame,
            ts: frame as i64,
            seq,
            nextseq: seq.wrapping_add(len),
        }
    }

    /// A small deterministic generator (xorshift), so that the test needs
    /// no dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Drives the list and the plain walk with the same segments and ACKs
    /// and checks that they hold the same segments after every step.
    fn check_against_walk(seed: u64, steps: usize, start: u32) {
        let mut rng = Rng(seed);
        let (mut fast, mut plain) = (Unacked::default(), VecDeque::new());
        let mut next = start;
        let mut acked = start;
        for step in 0..steps {
            match rng.below(10) {
                // New data, mostly in order.
                0..=4 => {
                    let len = 1 + rng.below(9000) as u32;
                    let s = seg(step as u64, next, len);
                    next = next.wrapping_add(len);
                    fast.push(s);
                    plain.push_back(s);
                }
                // A retransmission of older data, or a segment far away.
                5 => {
                    let back = rng.below(40_000) as u32;
                    let s = if rng.below(8) == 0 {
                        seg(step as u64, rng.next() as u32, 1 + rng.below(1500) as u32)
                    } else {
                        seg(
                            step as u64,
                            next.wrapping_sub(back),
                            1 + rng.below(3000) as u32,
                        )
                    };
                    fast.push(s);
                    plain.push_back(s);
                }
                // ACKs: forward (often into a segment), repeated, backwards,
                // and now and then anywhere at all.
                _ => {
                    let ack = match rng.below(12) {
                        0 => rng.next() as u32,
                        1 => acked.wrapping_sub(rng.below(1 << 31) as u32),
                        2 => acked,
                        _ => {
                            let gap = next.wrapping_sub(acked);
                            acked.wrapping_add(rng.below(u64::from(gap) + 2) as u32)
                        }
                    };
                    if gt(ack, acked) {
                        acked = ack;
                    }
                    fast.forget_acked(ack);
                    forget_acked_walk(&mut plain, ack);
                }
            }
            assert_eq!(fast.list, plain, "seed {seed}, step {step}");
            if fast.ordered {
                assert!(is_ordered(&fast.list), "seed {seed}, step {step}");
            }
        }
    }

    #[test]
    fn same_as_the_walk_over_every_segment() {
        for seed in 1..200 {
            check_against_walk(seed, 400, (seed as u32).wrapping_mul(0x9E37_79B9));
        }
    }

    #[test]
    fn same_across_the_sequence_wrap() {
        for seed in 1..50 {
            check_against_walk(seed, 400, u32::MAX - 20_000);
        }
    }

    #[test]
    fn in_order_data_stays_ordered_and_an_ack_stops_early() {
        let mut u = Unacked::default();
        for i in 0..100u32 {
            u.push(seg(u64::from(i), 1000 + i * 100, 100));
        }
        assert!(u.ordered);
        // Into the middle of the 11th segment: ten forgotten, one trimmed.
        u.forget_acked(1000 + 10 * 100 + 50);
        assert_eq!(u.len(), 90);
        assert_eq!(u.first().map(|f| (f.frame, f.seq)), Some((10, 2050)));
        assert!(u.ordered);
        // An old ACK changes nothing.
        u.forget_acked(500);
        assert_eq!(u.len(), 90);
        // A retransmission of old data breaks the order until a walk.
        u.push(seg(200, 2050, 100));
        assert!(!u.ordered);
        u.forget_acked(2150);
        assert!(u.ordered, "a walk finds it ordered again");
        assert_eq!(u.len(), 89);
        u.forget_acked(1000 + 100 * 100);
        assert!(u.is_empty());
    }
}
