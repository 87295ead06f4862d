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
//! a capture), its sweeps never release early: everything waits to the end.
//! So that this does not make memory grow with the connection, what waits
//! past a bound ([`HELD_BYTES`]) is sorted and set aside in a spill as a
//! run, and the runs are merged as they are handed over: an external merge
//! sort. Runs are merged in levels ([`FAN`] of one level make one of the
//! next), so only a few are ever open, each holding one block in memory.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::spill::{Codec, Packed, Spill};

/// How a sweep's points are sorted when they are not nearly in order (see
/// [`InOrder::sort_waiting`]): by comparison, or by radix (sorting was half
/// of the digest's sweeps: `bench/README.md`): the time profile's points
/// packed in a `u64`, the other sweeps' tuples by their fields
/// ([`radix_sort_words`]). Every way gives the same order (equal keys are
/// the same point).
pub(crate) trait SortPoints: Ord + Sized {
    /// Sort `v`; `scratch` is room the sort may use, kept between calls.
    fn sort_points(v: &mut [Self], _scratch: &mut Vec<Self>) {
        v.sort_unstable();
    }
}

impl SortPoints for u64 {
    fn sort_points(v: &mut [u64], scratch: &mut Vec<u64>) {
        radix_sort_words(v, scratch, |&x| [x]);
    }
}

/// A signed value's bits as an unsigned one ordered as the values are.
fn ordered(v: i64) -> u64 {
    (v as u64) ^ 1 << 63
}

impl SortPoints for (i64, i8, u8) {
    fn sort_points(v: &mut [Self], scratch: &mut Vec<Self>) {
        radix_sort_words(v, scratch, |&(t, a, b)| {
            [ordered(t), u64::from(a as u8 ^ 0x80) << 8 | u64::from(b)]
        });
    }
}
impl SortPoints for (i64, u8) {
    fn sort_points(v: &mut [Self], scratch: &mut Vec<Self>) {
        radix_sort_words(v, scratch, |&(t, k)| [ordered(t), u64::from(k)]);
    }
}
// The SMB2 credit changes: a change of -1 and one of 1 differ in every
// bit, so radix over it takes every digit (see `radix_by_time`).
impl SortPoints for (i64, i8, i64) {
    fn sort_points(v: &mut [Self], scratch: &mut Vec<Self>) {
        radix_by_time(v, scratch, |p| p.0);
    }
}
impl SortPoints for (i64, i32) {
    fn sort_points(v: &mut [Self], scratch: &mut Vec<Self>) {
        radix_sort_words(v, scratch, |&(t, k)| [ordered(t), ordered(i64::from(k))]);
    }
}
// The concurrency sweep's events: their request numbers, charges and
// grants differ in many bits, and radix over every field was slower than
// comparison (see `radix_by_time`).
impl SortPoints for (i64, i8, u64, i64, i64) {
    fn sort_points(v: &mut [Self], scratch: &mut Vec<Self>) {
        radix_by_time(v, scratch, |p| p.0);
    }
}

/// Sort points ordered by their time first by radix on the time alone (a
/// few digits: points waiting together lie close in time), then each run of
/// equal times by comparison: the full order, for points whose other fields
/// differ in too many bits for radix to pay.
fn radix_by_time<T: Copy + Ord>(v: &mut [T], scratch: &mut Vec<T>, time: impl Fn(&T) -> i64) {
    radix_sort_words(v, scratch, |p| [ordered(time(p))]);
    let mut rest = v;
    while let Some(first) = rest.first() {
        let t = time(first);
        let same = rest.iter().take_while(|p| time(p) == t).count();
        let (run, after) = rest.split_at_mut(same);
        if run.len() > 1 {
            run.sort_unstable();
        }
        rest = after;
    }
}

/// Moves per point an insertion sort of waiting points may make before it
/// gives up (see [`InOrder::sort_waiting`]).
const MOVES_PER_POINT: usize = 4;

/// Releases after an insertion sort gave up before the next is tried.
const RETRY_INSERTION: u32 = 16;

/// Sort `v` by insertion, unless it takes more than `moves` moves: then
/// false, and `v` holds the same values in some other order.
fn insertion_sort_within<T: Ord + Copy>(v: &mut [T], mut moves: usize) -> bool {
    for i in 1..v.len() {
        let x = v[i];
        let mut j = i;
        while j > 0 && v[j - 1] > x {
            if moves == 0 {
                v[j] = x;
                return false;
            }
            moves -= 1;
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
    true
}

/// Bits per digit of [`radix_sort_words`].
const DIGIT: u32 = 11;
/// Fewer values than this are sorted by comparison (faster on few).
const RADIX_FROM: usize = 256;

/// Sort by radix on `key`, words compared first to last (so the order of
/// the key's words must be the order of the values): least significant
/// digit first, over only the bits in which each word differs among the
/// values, last word first. Points waiting together lie close in time and
/// share most of their other fields, so a few digits in all. Stable, so
/// values of equal keys keep their order (they are equal values for every
/// key here).
fn radix_sort_words<T: Copy, const N: usize>(
    v: &mut [T],
    scratch: &mut Vec<T>,
    key: impl Fn(&T) -> [u64; N],
) {
    let Some(first) = v.first() else { return };
    if v.len() < RADIX_FROM {
        v.sort_unstable_by_key(|x| key(x));
        return;
    }
    let k0 = key(first);
    let mut differ = [0u64; N];
    for x in v.iter() {
        for (d, (a, b)) in differ.iter_mut().zip(key(x).iter().zip(&k0)) {
            *d |= a ^ b;
        }
    }
    scratch.clear();
    scratch.extend_from_slice(v);
    let mask = (1u64 << DIGIT) - 1;
    // Each pass moves the values between `v` and `scratch`.
    let mut in_v = true;
    for w in (0..N).rev() {
        let (lo, hi) = (
            differ[w].trailing_zeros(),
            u64::BITS - differ[w].leading_zeros(),
        );
        let mut shift = lo;
        while shift < hi {
            let (src, dst): (&[T], &mut [T]) = if in_v {
                (v, scratch.as_mut_slice())
            } else {
                (scratch.as_slice(), v)
            };
            let digit = |x: &T| ((key(x)[w] >> shift) & mask) as usize;
            let mut at = [0usize; 1 << DIGIT];
            for x in src {
                at[digit(x)] += 1;
            }
            let mut sum = 0;
            for a in at.iter_mut() {
                (*a, sum) = (sum, sum + *a);
            }
            for x in src {
                let d = digit(x);
                dst[at[d]] = *x;
                at[d] += 1;
            }
            in_v = !in_v;
            shift += DIGIT;
        }
    }
    if !in_v {
        v.copy_from_slice(scratch);
    }
}

/// Points waiting before they are sorted and released.
const CHUNK: usize = 4096;

/// Bytes of points that may wait in memory; past that they are set aside
/// as a sorted run. Far above what waits when releases keep up (the
/// outstanding requests' points and a chunk), so only a connection whose
/// times jump back (or that has this many points outstanding at once)
/// spills.
const HELD_BYTES: usize = 1 << 20;

/// Bytes of points per block of a run: what an open run holds in memory.
const BLOCK_BYTES: usize = 64 << 10;

/// Runs of one level merged into one run of the next: at most `FAN - 1`
/// runs per level are open when points are handed over, and every point is
/// rewritten once per level (log base `FAN` of the runs).
const FAN: usize = 8;

/// How many `T` fit in `bytes` (at least one).
const fn fit<T>(bytes: usize) -> usize {
    let size = std::mem::size_of::<T>();
    if size == 0 || bytes / size == 0 {
        1
    } else {
        bytes / size
    }
}

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct InOrder<T> {
    waiting: Vec<T>,
    /// Room for sorting `waiting` (see [`SortPoints`]).
    scratch: Vec<T>,
    /// Release (sort) when this many wait: a chunk more than what was kept
    /// at the last release, or twice that when much was kept (a bound far
    /// behind, after a clock step), so that each point is sorted a few
    /// times at most, not once per chunk.
    next_release: usize,
    /// Past this many waiting points, they become a run.
    held_max: usize,
    /// Points per block of a run.
    block: usize,
    /// Sorted runs set aside, oldest first; levels never rise toward the
    /// end (a stack, merged from the top).
    runs: Vec<Run<T>>,
    /// The runs' blocks (a file is made at the first block only).
    spill: Spill,
    /// Sorts left before insertion is tried again (see
    /// [`InOrder::sort_waiting`]).
    skip_insertion: u32,
}

impl<T> Default for InOrder<T> {
    fn default() -> Self {
        InOrder {
            waiting: Vec::new(),
            scratch: Vec::new(),
            next_release: CHUNK,
            held_max: fit::<T>(HELD_BYTES),
            block: fit::<T>(BLOCK_BYTES),
            runs: Vec::new(),
            spill: Spill::default(),
            skip_insertion: 0,
        }
    }
}

/// A sorted run set aside: its blocks still in the spill, and the one being
/// read.
#[derive(Debug)]
struct Run<T> {
    level: u32,
    /// Blocks not yet read, last first (popped from the end).
    blocks: Vec<Packed>,
    /// The rest of the block being read.
    open: std::vec::IntoIter<T>,
    /// The run's smallest point not yet handed over (None: read out).
    head: Option<T>,
}

impl<T: Copy + DeserializeOwned> Run<T> {
    fn take(&mut self, spill: &Spill) -> Option<T> {
        let head = self.head?;
        self.head = self.open.next();
        if self.head.is_none() {
            if let Some(p) = self.blocks.pop() {
                self.open = read_block(spill, p).into_iter();
                self.head = self.open.next();
            }
        }
        Some(head)
    }
}

fn read_block<T: DeserializeOwned>(spill: &Spill, p: Packed) -> Vec<T> {
    // The sweep wrote these bytes itself: a block that does not read back
    // is a bug, which must not skew a sweep silently.
    spill
        .get_packed(p)
        .unwrap_or_else(|| panic!("a block of sorted points does not read back (a bug)"))
}

/// Writes sorted points as a run, a block at a time.
struct RunWriter<T> {
    level: u32,
    blocks: Vec<Packed>,
    buf: Vec<T>,
    block: usize,
}

impl<T: Copy + Serialize + DeserializeOwned> RunWriter<T> {
    fn new(level: u32, block: usize) -> Self {
        RunWriter {
            level,
            blocks: Vec::new(),
            buf: Vec::with_capacity(block),
            block,
        }
    }

    fn push(&mut self, spill: &mut Spill, p: T) {
        self.buf.push(p);
        if self.buf.len() == self.block {
            self.flush(spill);
        }
    }

    fn flush(&mut self, spill: &mut Spill) {
        if self.buf.is_empty() {
            return;
        }
        // Serialising plain numbers cannot fail (and blocks are far below
        // the 4 GiB a span holds).
        let p = spill
            .put_packed(&self.buf, Codec::Plain)
            .unwrap_or_else(|| panic!("a block of sorted points does not serialise (a bug)"));
        self.blocks.push(p);
        self.buf.clear();
    }

    fn finish(mut self, spill: &mut Spill) -> Run<T> {
        self.flush(spill);
        self.blocks.reverse();
        let mut run = Run {
            level: self.level,
            blocks: self.blocks,
            open: Vec::new().into_iter(),
            head: None,
        };
        if let Some(p) = run.blocks.pop() {
            run.open = read_block(spill, p).into_iter();
            run.head = run.open.next();
        }
        run
    }
}

/// The runs' heads below a bound, smallest on top, for a k-way merge.
type Heads<T> = BinaryHeap<Reverse<(T, usize)>>;

fn heads<T: Ord + Copy>(runs: &[Run<T>], bound: Option<&T>) -> Heads<T> {
    runs.iter()
        .enumerate()
        .filter_map(|(i, r)| r.head.filter(|h| below(h, bound)).map(|h| Reverse((h, i))))
        .collect()
}

fn below<T: Ord>(p: &T, bound: Option<&T>) -> bool {
    bound.is_none_or(|b| p < b)
}

/// The smallest point of `runs` below `bound`, taken from its run.
fn pop<T: Ord + Copy + DeserializeOwned>(
    heads: &mut Heads<T>,
    runs: &mut [Run<T>],
    spill: &Spill,
    bound: Option<&T>,
) -> Option<T> {
    let Reverse((_, i)) = heads.pop()?;
    let p = runs[i].take(spill);
    if let Some(h) = runs[i].head.filter(|h| below(h, bound)) {
        heads.push(Reverse((h, i)));
    }
    p
}

/// Hand over, in order, the points of `runs` and of sorted `waiting` below
/// `bound` (all of them without one); returns how many of `waiting` went.
fn merge<T: Ord + Copy + DeserializeOwned>(
    runs: &mut [Run<T>],
    spill: &Spill,
    waiting: &[T],
    bound: Option<&T>,
    mut visit: impl FnMut(T),
) -> usize {
    let mut heads = heads(runs, bound);
    let n = bound.map_or(waiting.len(), |b| waiting.partition_point(|p| p < b));
    let mut w = waiting[..n].iter().peekable();
    loop {
        let from_run = match (heads.peek(), w.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(Reverse((h, _))), Some(p)) => h <= *p,
        };
        let next = if from_run {
            pop(&mut heads, runs, spill, bound)
        } else {
            w.next().copied()
        };
        if let Some(p) = next {
            visit(p);
        }
    }
    n
}

impl<T: Ord + Copy + Serialize + DeserializeOwned + SortPoints> InOrder<T> {
    /// With small bounds, to test runs and their merging on few points.
    #[cfg(test)]
    fn with_bounds(held_max: usize, block: usize) -> Self {
        InOrder {
            held_max,
            block,
            ..Default::default()
        }
    }

    pub(crate) fn push(&mut self, point: T) {
        self.waiting.push(point);
        if self.waiting.len() >= self.held_max {
            self.set_aside();
        }
    }

    /// Sort what waits: by insertion when it is nearly in order, as a
    /// sweep's points mostly are (they come from requests in order of their
    /// starts, and each kind of moment of a request in its own order), else
    /// by [`SortPoints::sort_points`]. Where insertion gives up (the points
    /// of concurrency and credit sweeps of SMB2 reads come less in order),
    /// it is not tried again for [`RETRY_INSERTION`] sorts.
    fn sort_waiting(&mut self) {
        if self.skip_insertion == 0 {
            let moves = self.waiting.len().saturating_mul(MOVES_PER_POINT);
            if insertion_sort_within(&mut self.waiting, moves) {
                return;
            }
            self.skip_insertion = RETRY_INSERTION;
        } else {
            self.skip_insertion -= 1;
        }
        T::sort_points(&mut self.waiting, &mut self.scratch);
    }

    /// Sort what waits into a run of level 0, then merge the top runs while
    /// `FAN` of them share a level.
    fn set_aside(&mut self) {
        self.sort_waiting();
        let mut w = RunWriter::new(0, self.block);
        for &p in &self.waiting {
            w.push(&mut self.spill, p);
        }
        self.waiting.clear();
        self.runs.push(w.finish(&mut self.spill));
        self.next_release = CHUNK;
        while let Some(top) = self.runs.len().checked_sub(FAN) {
            let level = self.runs[top].level;
            if self.runs[top..].iter().any(|r| r.level != level) {
                break;
            }
            let mut merged = self.runs.split_off(top);
            let mut w = RunWriter::new(level + 1, self.block);
            let mut heads = heads(&merged, None);
            while let Some(p) = pop(&mut heads, &mut merged, &self.spill, None) {
                w.push(&mut self.spill, p);
            }
            self.runs.push(w.finish(&mut self.spill));
        }
    }

    /// Whether enough points wait for a [`InOrder::release`] to be worth it.
    pub(crate) fn due(&self) -> bool {
        self.waiting.len() >= self.next_release
    }

    /// Hand over, in order, the waiting points below `bound`: the caller
    /// promises that no point pushed later is below it.
    pub(crate) fn release(&mut self, bound: T, visit: impl FnMut(T)) {
        self.sort_waiting();
        let n = merge(
            &mut self.runs,
            &self.spill,
            &self.waiting,
            Some(&bound),
            visit,
        );
        self.waiting.drain(..n);
        self.runs.retain(|r| r.head.is_some());
        self.next_release = self.waiting.len() + self.waiting.len().max(CHUNK);
    }

    /// Hand over every waiting point, in order.
    pub(crate) fn finish(mut self, visit: impl FnMut(T)) {
        self.sort_waiting();
        merge(&mut self.runs, &self.spill, &self.waiting, None, visit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl SortPoints for (u64, u8) {}

    /// The radix sort orders as a comparison sort does, on values that
    /// differ in few or many bits, low or high, with repeats, at sizes
    /// around where it takes over.
    #[test]
    fn radix_sort_orders_as_comparison() {
        let mut next = crate::test_rng::xorshift(0x9E37_79B9_7F4A_7C15);
        let mut scratch = Vec::new();
        for n in [0, 1, 2, 255, 256, 257, 1000, 4096, 20_000] {
            for (lo_bits, shift) in [(0, 0), (3, 0), (12, 3), (30, 0), (40, 20), (64, 0), (5, 59)] {
                let mask = if lo_bits == 64 {
                    u64::MAX
                } else {
                    (1u64 << lo_bits) - 1
                };
                let base = next() & !(mask << shift);
                let mut v: Vec<u64> = (0..n).map(|_| base | ((next() & mask) << shift)).collect();
                // Repeats, and a run already in order.
                if n > 10 {
                    v[n / 2] = v[1];
                    v[n / 3] = v[1];
                    v[..n / 4].sort_unstable();
                }
                let mut want = v.clone();
                want.sort_unstable();
                u64::sort_points(&mut v, &mut scratch);
                assert_eq!(v, want, "{n} values, {lo_bits} bits from {shift}");
            }
        }
    }

    /// The sweeps' tuples sorted by their words give a comparison sort's
    /// order: negative and positive fields, repeats, few and many bits
    /// differing, around the size from which radix is used.
    #[test]
    fn tuples_sorted_by_words_order_as_comparison() {
        fn check<T: SortPoints + Copy + std::fmt::Debug>(v: Vec<T>) {
            let mut want = v.clone();
            want.sort_unstable();
            let mut got = v;
            let mut scratch = Vec::new();
            T::sort_points(&mut got, &mut scratch);
            assert_eq!(got, want);
        }
        /// The tests' numbers (53 bits of each), shaped as the fields need.
        struct Rng<F>(F);
        impl<F: FnMut() -> u64> Rng<F> {
            fn next(&mut self) -> u64 {
                (self.0)() >> 11
            }
            /// A time whose low `spread` bits vary, either sign.
            fn time(&mut self, spread: u32) -> i64 {
                let r = self.next();
                let v = (r & ((1 << spread) - 1)) as i64;
                if r & (1 << 52) != 0 {
                    -v
                } else {
                    v + 1_700_000_000_000_000_000
                }
            }
            /// One of -2..=2.
            fn small(&mut self) -> i64 {
                (self.next() % 5) as i64 - 2
            }
        }
        let mut r = Rng(crate::test_rng::xorshift(3));
        for n in [0, 1, 255, 256, 257, 3000] {
            for spread in [3u32, 20, 52] {
                let a: Vec<(i64, u8)> = (0..n)
                    .map(|_| (r.time(spread), (r.small() + 2) as u8))
                    .collect();
                check(a);
                let b: Vec<(i64, i8, u8)> = (0..n)
                    .map(|_| {
                        let t = r.time(spread);
                        (t, r.small() as i8 * 60, (r.small() + 2) as u8 * 60)
                    })
                    .collect();
                check(b);
                let c: Vec<(i64, i32)> = (0..n)
                    .map(|_| (r.time(spread), r.small() as i32 * 1_000_000_000))
                    .collect();
                check(c);
                let d: Vec<(i64, i8, u64, i64, i64)> = (0..n)
                    .map(|_| {
                        let t = r.time(spread);
                        let k = r.small() as i8;
                        let i = r.next() % 97;
                        (t, k, i, r.small() << 40, r.small())
                    })
                    .collect();
                check(d);
                // SMB2 credit changes: either sign, many equal.
                let e: Vec<(i64, i8, i64)> = (0..n)
                    .map(|_| (r.time(spread), r.small() as i8, r.small() * 3))
                    .collect();
                check(e);
            }
        }
        // Extremes of every field.
        check(
            (0..600)
                .map(|i| {
                    let t = [i64::MIN, -1, 0, 1, i64::MAX][i % 5];
                    let k = [i8::MIN, -1, 0, 1, i8::MAX][(i / 5) % 5];
                    (t, k, [i64::MIN, -1, 0, 1, i64::MAX][(i / 25) % 5])
                })
                .collect::<Vec<_>>(),
        );
        check(
            (0..600)
                .map(|i| {
                    let t = [i64::MIN, -1, 0, 1, i64::MAX][i % 5];
                    let k = [i8::MIN, -1, 0, 1, i8::MAX][(i / 5) % 5];
                    (
                        t,
                        k,
                        u64::MAX - (i as u64 % 3),
                        i64::MIN + (i as i64 % 2),
                        i64::MAX,
                    )
                })
                .collect::<Vec<_>>(),
        );
    }

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

    /// An insertion sort within its moves sorts as a full sort does; past
    /// them it gives up, leaving the same values.
    #[test]
    fn insertion_sort_gives_up_past_its_moves() {
        let mut next = crate::test_rng::xorshift(0x2545_F491_4F6C_DD1D);
        // Nearly in order: each value a few places from its own.
        let near: Vec<u64> = (0..5000u64).map(|i| i * 8 + next() % 20).collect();
        let mut want = near.clone();
        want.sort_unstable();
        let mut v = near.clone();
        let moves = 4 * v.len();
        assert!(insertion_sort_within(&mut v, moves));
        assert_eq!(v, want);
        // Reversed: far more moves than allowed.
        let mut v: Vec<u64> = want.iter().rev().copied().collect();
        let moves = 4 * v.len();
        assert!(!insertion_sort_within(&mut v, moves));
        v.sort_unstable();
        assert_eq!(v, want, "the same values");
        // No moves allowed: only sorted input passes.
        let mut v = want.clone();
        assert!(insertion_sort_within(&mut v, 0));
        let mut v = vec![2u64, 1];
        assert!(!insertion_sort_within(&mut v, 0));
        assert_eq!(v, [2, 1]);
    }

    /// Points in order for a while, then far out of order, then in order
    /// again: insertion gives up, is not tried for a while, is tried again,
    /// and every release hands over what a full sort gives.
    #[test]
    fn sorts_by_insertion_again_after_points_out_of_order() {
        let mut next = crate::test_rng::xorshift(0x9E37_79B9_7F4A_7C15);
        let mut o = InOrder::default();
        let (mut all, mut out) = (Vec::new(), Vec::new());
        let mut gave_up = false;
        for phase in 0..3u64 {
            for i in 0..40 * CHUNK as u64 {
                let t = phase * 1_000_000_000 + i * 1000;
                // The middle phase: each point anywhere within 200 µs ahead.
                let p = if phase == 1 { t + next() % 200_000 } else { t };
                o.push(p);
                all.push(p);
                if o.due() {
                    o.release(t.saturating_sub(200_000), |p| out.push(p));
                    gave_up |= o.skip_insertion > 0;
                }
            }
            if phase == 0 {
                assert_eq!(o.skip_insertion, 0, "in order: by insertion");
            }
        }
        assert!(gave_up, "out of order: gave up");
        assert_eq!(o.skip_insertion, 0, "in order again: tried again");
        o.finish(|p| out.push(p));
        all.sort_unstable();
        assert_eq!(out, all);
    }

    /// Pseudo-random points: `n` (start, end) pairs, ends a little after
    /// starts, starts rising but for a jump back (a clock step) at `step`.
    fn points(n: u64, step: u64) -> Vec<(u64, u64)> {
        let mut x: u64 = 11;
        (0..n)
            .map(|i| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let start = if i < step { 1_000_000 + i } else { i - step };
                (start, start + (x >> 57))
            })
            .collect()
    }

    /// Everything waits to the end (a clock step: no bound holds): with a
    /// small memory bound the points go to runs in levels, memory stays
    /// within the bound, and the order handed over is a full sort's.
    #[test]
    fn runs_set_aside_come_out_sorted() {
        for in_memory in [false, true] {
            let mut o = InOrder::with_bounds(100, 7);
            if in_memory {
                o.spill = Spill::in_memory();
            }
            let mut all = Vec::new();
            for (s, e) in points(20_003, 9_000) {
                for p in [s, e] {
                    o.push(p);
                    all.push(p);
                }
                assert!(o.waiting.len() < 100);
                // 400 runs of 100 made: at most FAN - 1 per level, 3 levels.
                assert!(o.runs.len() < 3 * FAN, "{} runs", o.runs.len());
            }
            assert!(o.runs.iter().any(|r| r.level == 2), "merged in levels");
            let mut out = Vec::new();
            o.finish(|p| out.push(p));
            all.sort_unstable();
            assert_eq!(out, all);
        }
    }

    /// Releases with a bound that holds while runs are set aside (more
    /// points outstanding than the memory bound): runs are read partly at
    /// each release, and what is handed over is still a full sort's, with
    /// repeated points (ties between the runs and what waits) kept.
    #[test]
    fn releases_read_runs_partly() {
        let mut o = InOrder::with_bounds(64, 5);
        let mut all = Vec::new();
        let mut out = Vec::new();
        for (s, e) in points(30_000, u64::MAX) {
            // Coarse times: many points repeat.
            let (s, e) = (s / 4, e / 4 + 30);
            for p in [(s, 1u8), (e, 0u8)] {
                o.push(p);
                all.push(p);
            }
            if o.due() || s % 97 == 0 {
                let before = out.len();
                o.release((s, 0), |p| out.push(p));
                assert!(out[before..].iter().all(|p| *p < (s, 0)));
            }
        }
        assert!(!o.runs.is_empty(), "runs were set aside");
        o.finish(|p| out.push(p));
        all.sort_unstable();
        assert_eq!(out, all);
    }
}
