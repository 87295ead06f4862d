//! Points that arrive nearly in order, handed over in order, without holding
//! them all.
//!
//! The sweeps after the pass (concurrency, time profile, round-trip floors)
//! read each connection's requests in request order and turn each into a few
//! time points (its start, its reply's end, ...), which a sweep must visit
//! in time order. A request's points never lie before its own start (less a
//! fixed margin), and requests come by start, so once the next request's
//! start is known, every point before it is final: [`InOrder`] sorts what
//! waits now and then, hands those over and keeps the rest (the ends of the
//! requests still outstanding). Memory is what is outstanding plus a chunk,
//! not the connection; the order handed over is exactly a full sort's.
//!
//! When a connection's times do not keep that promise (a clock step within
//! a capture), its sweeps never release early: everything waits and is
//! sorted at the end, as a full sort would.

/// Points waiting before they are sorted and released.
const CHUNK: usize = 4096;

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct InOrder<T> {
    waiting: Vec<T>,
    /// Release (sort) when this many wait: a chunk more than what was kept
    /// at the last release, or twice that when much was kept (a bound far
    /// behind, after a clock step), so that each point is sorted a few
    /// times at most, not once per chunk.
    next_release: usize,
}

impl<T> Default for InOrder<T> {
    fn default() -> Self {
        InOrder {
            waiting: Vec::new(),
            next_release: CHUNK,
        }
    }
}

impl<T: Ord + Copy> InOrder<T> {
    pub(crate) fn push(&mut self, point: T) {
        self.waiting.push(point);
    }

    /// Whether enough points wait for a [`InOrder::release`] to be worth it.
    pub(crate) fn due(&self) -> bool {
        self.waiting.len() >= self.next_release
    }

    /// Hand over, in order, the waiting points below `bound`: the caller
    /// promises that no point pushed later is below it.
    pub(crate) fn release(&mut self, bound: T, mut visit: impl FnMut(T)) {
        self.waiting.sort_unstable();
        let n = self.waiting.partition_point(|p| *p < bound);
        for p in self.waiting.drain(..n) {
            visit(p);
        }
        self.next_release = self.waiting.len() + self.waiting.len().max(CHUNK);
    }

    /// Hand over every waiting point, in order.
    pub(crate) fn finish(mut self, visit: impl FnMut(T)) {
        self.waiting.sort_unstable();
        self.waiting.into_iter().for_each(visit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Points pushed nearly in order with a bound that holds come out as a
    /// full sort gives them, however often they are released.
    #[test]
    fn released_points_come_out_sorted() {
        let mut all = Vec::new();
        let mut o = InOrder::default();
        let mut out = Vec::new();
        let mut x: u64 = 7;
        for start in 0..20_000u64 {
            // Pseudo-random ends after each start.
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let end = start + (x >> 58);
            for p in [start, end] {
                o.push(p);
                all.push(p);
            }
            if o.due() {
                o.release(start + 1, |p| out.push(p));
            }
        }
        o.finish(|p| out.push(p));
        all.sort_unstable();
        assert_eq!(out, all);
    }
}
