//! Exact order statistics (medians, percentiles) of a connection's
//! per-request times in bounded memory.
//!
//! A capture of one long copy is one connection with millions of requests;
//! its time profile's medians were taken by sorting every request's times,
//! 16 bytes a request held to the end (13 MB of a 4 GiB capture's 31 MB
//! peak). Here the values go to the spill (`spill.rs`, a temporary file) in
//! blocks once there are more than a block of them, and a value of a given
//! rank is found by narrowing: count the values per bucket of a key range,
//! keep the bucket where the rank falls, and again within it until it holds
//! at most a block of values (or one value), which are then sorted. A key
//! is the value's bits ordered as [`f64::total_cmp`] orders values, so the
//! result is exactly the sorted vector's element. Sixteen bits per pass:
//! at most four passes over the spilled values, read back a block at a
//! time, shared by all the ranks asked ([`select`]). Fewer values than a
//! block are kept and sorted as before.
//!
//! [`select`] works on any keys a caller can visit again: the SRT table's
//! percentiles use it on response times spilled in blocks of its own.

use crate::spill::{Span, Spill};

/// Values held in memory, and per spilled block (512 KiB).
const BLOCK: usize = 1 << 16;
/// Buckets per narrowing pass.
const BUCKETS: u64 = 1 << 16;

/// The values added, to be asked for the ones of given ranks.
#[derive(Default)]
pub(crate) struct OrderStats {
    held: Vec<f64>,
    spill: Spill,
    blocks: Vec<Span>,
    /// Smallest and largest key so far.
    range: Option<(u64, u64)>,
}

/// `v`'s bits as an integer ordered as `f64::total_cmp` orders values.
fn key(v: f64) -> u64 {
    let b = v.to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | 1 << 63
    }
}

/// The value of a [`key`].
fn value(k: u64) -> f64 {
    f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k })
}

impl OrderStats {
    pub(crate) fn push(&mut self, v: f64) {
        let k = key(v);
        self.range = Some(match self.range {
            Some((lo, hi)) => (lo.min(k), hi.max(k)),
            None => (k, k),
        });
        self.held.push(v);
        if self.held.len() == BLOCK {
            let bytes: Vec<u8> = self.held.iter().flat_map(|v| v.to_ne_bytes()).collect();
            self.blocks.push(self.spill.put(bytes));
            self.held.clear();
        }
    }

    /// Whether some values went to the spill (asking for ranks reads them
    /// back).
    pub(crate) fn spilled(&self) -> bool {
        !self.blocks.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.blocks.len() * BLOCK + self.held.len()
    }

    /// The values of ranks `ranks` (0-based, in `f64::total_cmp` order;
    /// None for a rank past the last).
    pub(crate) fn at(mut self, ranks: &[usize]) -> Vec<Option<f64>> {
        let n = self.len();
        if self.blocks.is_empty() {
            // Each rank selected in what lies past the one before (a full
            // sort of a long connection's times was a tenth of its digest).
            let mut by_rank: Vec<usize> = (0..ranks.len()).collect();
            by_rank.sort_unstable_by_key(|&i| ranks[i]);
            let mut out = vec![None; ranks.len()];
            // Values before `from` are placed: each at its rank.
            let mut from = 0;
            for i in by_rank {
                let r = ranks[i];
                if r >= n {
                    continue;
                }
                if r >= from {
                    self.held[from..].select_nth_unstable_by(r - from, f64::total_cmp);
                    from = r + 1;
                }
                out[i] = Some(self.held[r]);
            }
            return out;
        }
        let Some(range) = self.range else {
            return vec![None; ranks.len()];
        };
        let within: Vec<u64> = ranks
            .iter()
            .filter(|&&r| r < n)
            .map(|&r| r as u64)
            .collect();
        let mut keys = select(&within, range, BLOCK, &|f| self.each_key(f)).into_iter();
        ranks
            .iter()
            .map(|&r| if r < n { keys.next().map(value) } else { None })
            .collect()
    }

    /// Every value's key, spilled blocks first (order does not matter).
    fn each_key(&self, f: &mut dyn FnMut(u64)) {
        for &span in &self.blocks {
            let bytes = self.spill.get(span);
            for c in bytes.chunks_exact(8) {
                f(key(f64::from_ne_bytes([
                    c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7],
                ])));
            }
        }
        self.held.iter().for_each(|&v| f(key(v)));
    }
}

/// Visits every key (in any order), giving each to the function.
pub(crate) type Keys<'a> = dyn Fn(&mut dyn FnMut(u64)) + 'a;

/// The keys of ranks `ranks` (0-based, each below the number of keys) among
/// the keys `each` visits, all within `range` (inclusive), holding at most
/// `limit` of them at once, by narrowing (module text). The ranks share the
/// passes over the keys: a pass counts per bucket of a key range for every
/// rank whose bucket is that range, and one pass collects the buckets of
/// several ranks (up to `limit` keys in all) to sort them. A few hundred
/// thousand response times take three passes: the counts, the few buckets
/// holding the ranks, and nothing more.
pub(crate) fn select(ranks: &[u64], range: (u64, u64), limit: usize, each: &Keys<'_>) -> Vec<u64> {
    let mut out = vec![0u64; ranks.len()];
    let all = Bucket {
        lo: range.0,
        hi: range.1,
        below: 0,
        keys: 0,
        ranks: (0..ranks.len()).collect(),
    };
    // Key ranges still to narrow, and buckets to collect and sort.
    let mut narrow = vec![all];
    let mut gather: Vec<Bucket> = Vec::new();
    while let Some(Bucket {
        lo,
        hi,
        below,
        ranks: mut idx,
        ..
    }) = narrow.pop()
    {
        let width = hi - lo;
        let mut shift = 0;
        while width >> shift >= BUCKETS {
            shift += 1;
        }
        let mut counts = vec![0u64; (width >> shift) as usize + 1];
        each(&mut |k| {
            if (lo..=hi).contains(&k) {
                counts[((k - lo) >> shift) as usize] += 1;
            }
        });
        idx.sort_unstable_by_key(|&i| ranks[i]);
        let (mut b, mut b_below) = (0usize, below);
        let mut i = 0;
        while i < idx.len() {
            // The bucket of the next rank (ranks ascend, so buckets do).
            while b + 1 < counts.len() && b_below + counts[b] <= ranks[idx[i]] {
                b_below += counts[b];
                b += 1;
            }
            let mut j = i + 1;
            while j < idx.len() && ranks[idx[j]] < b_below + counts[b] {
                j += 1;
            }
            let b_lo = lo + ((b as u64) << shift);
            let bucket = Bucket {
                lo: b_lo,
                hi: hi.min(b_lo.saturating_add((1u64 << shift) - 1)),
                below: b_below,
                keys: counts[b],
                ranks: idx[i..j].to_vec(),
            };
            if shift == 0 {
                // One key: every value in the bucket is this one.
                bucket.ranks.iter().for_each(|&t| out[t] = b_lo);
            } else if bucket.keys <= limit as u64 {
                gather.push(bucket);
            } else {
                narrow.push(bucket);
            }
            i = j;
        }
    }
    // The buckets are disjoint; sorted, as many per pass as `limit` allows.
    gather.sort_unstable_by_key(|g| g.lo);
    let mut first = 0;
    while first < gather.len() {
        let mut end = first + 1;
        let mut held = gather[first].keys;
        while end < gather.len() && held + gather[end].keys <= limit as u64 {
            held += gather[end].keys;
            end += 1;
        }
        let part = &gather[first..end];
        let mut keys: Vec<Vec<u64>> = part
            .iter()
            .map(|g| Vec::with_capacity(g.keys as usize))
            .collect();
        let (lo, hi) = (part[0].lo, part[part.len() - 1].hi);
        each(&mut |k| {
            if (lo..=hi).contains(&k) {
                let at = part.partition_point(|g| g.hi < k);
                if let (Some(g), Some(v)) = (part.get(at), keys.get_mut(at)) {
                    if g.lo <= k {
                        v.push(k);
                    }
                }
            }
        });
        for (g, v) in part.iter().zip(&mut keys) {
            v.sort_unstable();
            for &t in &g.ranks {
                out[t] = v
                    .get((ranks[t] - g.below) as usize)
                    .copied()
                    .unwrap_or(g.lo);
            }
        }
        first = end;
    }
    out
}

/// A key range in [`select`]: its keys `lo..=hi`, how many keys lie below
/// it, how many in it (once counted), and the indices of the ranks in it.
struct Bucket {
    lo: u64,
    hi: u64,
    below: u64,
    keys: u64,
    ranks: Vec<usize>,
}

/// The median of `v` (sorted in place), the mean of the middle two for an
/// even count, as Python's `statistics.median`; None when empty.
pub(crate) fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_unstable_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What sorting every value gives.
    fn sorted_at(values: &[f64], ranks: &[usize]) -> Vec<Option<f64>> {
        let mut v = values.to_vec();
        v.sort_unstable_by(f64::total_cmp);
        ranks.iter().map(|&r| v.get(r).copied()).collect()
    }

    fn check(values: &[f64]) {
        let n = values.len();
        let mut ranks = vec![
            0,
            n / 2,
            n.saturating_sub(1) / 2,
            n * 9 / 10,
            n.saturating_sub(1),
            n,
        ];
        ranks.extend((0..n).step_by((n / 37).max(1)));
        let mut s = OrderStats::default();
        for &v in values {
            s.push(v);
        }
        assert_eq!(s.len(), n);
        let got: Vec<Option<u64>> = s.at(&ranks).iter().map(|v| v.map(f64::to_bits)).collect();
        let want: Vec<Option<u64>> = sorted_at(values, &ranks)
            .iter()
            .map(|v| v.map(f64::to_bits))
            .collect();
        assert_eq!(got, want);
    }

    /// A deterministic pseudo-random sequence (xorshift).
    fn noise(n: usize, seed: u64) -> Vec<u64> {
        let mut next = crate::test_rng::xorshift(seed);
        (0..n).map(|_| next()).collect()
    }

    #[test]
    fn keys_order_values_as_total_cmp() {
        let vs = [
            f64::NEG_INFINITY,
            -1e300,
            -1.5,
            -0.0,
            0.0,
            1e-300,
            0.25,
            7.0,
            f64::INFINITY,
            f64::NAN,
        ];
        for w in vs.windows(2) {
            assert!(key(w[0]) < key(w[1]), "{} {}", w[0], w[1]);
        }
        for v in vs {
            assert_eq!(value(key(v)).to_bits(), v.to_bits());
        }
    }

    /// As Python's `statistics.median`: the middle value, or the mean of the
    /// middle two.
    #[test]
    fn median_as_statistics_median() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [3.0]), Some(3.0));
        assert_eq!(median(&mut [5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&mut [65535.0, 131072.0]), Some(98303.5));
    }

    #[test]
    fn few_values_are_ranked_in_memory() {
        check(&[]);
        check(&[3.0]);
        check(&[2.0, 1.0, 2.0, -0.0, 0.0]);
        let v: Vec<f64> = noise(1000, 7)
            .iter()
            .map(|x| (x % 1000) as f64 / 7.0)
            .collect();
        check(&v);
    }

    /// Spilled values: ms times with many repeats, all equal ones, a wide
    /// range (negatives, huge and tiny values) and one outlier far off.
    #[test]
    fn spilled_values_give_the_sorted_ones() {
        let n = 3 * BLOCK + 123;
        let times: Vec<f64> = noise(n, 1)
            .iter()
            .map(|x| (x % 50_000) as f64 / 1000.0)
            .collect();
        check(&times);
        check(&vec![4.5; n]);
        let wide: Vec<f64> = noise(n, 2)
            .iter()
            .map(|&x| f64::from_bits(x & !(0x7ff << 52) | ((x >> 40) % 2000) << 52))
            .collect();
        check(&wide);
        let mut outlier: Vec<f64> = noise(n, 3).iter().map(|x| (x % 100) as f64).collect();
        outlier[77] = 1e300;
        check(&outlier);
        // Exactly a block, then one more.
        check(&times[..BLOCK]);
        check(&times[..BLOCK + 1]);
    }

    /// Narrowing several levels deep and collecting in several passes (a
    /// limit of a few keys): every rank's key is the sorted one's.
    #[test]
    fn select_with_a_small_limit() {
        let cases: Vec<Vec<u64>> = vec![
            noise(5000, 5).iter().map(|x| x % 300).collect(),
            noise(5000, 6),
            noise(5000, 7)
                .iter()
                .map(|x| (x >> 50 << 50) | (x % 3))
                .collect(),
            vec![9; 100],
            // Keys up to the largest, above a range start off the buckets'
            // alignment (a bucket's end must not overflow).
            std::iter::once(5)
                .chain(noise(3000, 8).iter().map(|x| u64::MAX - x % 1000))
                .collect(),
        ];
        for keys in cases {
            let mut sorted = keys.clone();
            sorted.sort_unstable();
            let n = keys.len() as u64;
            let ranks: Vec<u64> = [n - 1, 0, n / 2, n / 2, n / 2 + 1, n * 99 / 100, 1]
                .into_iter()
                .chain((0..n).step_by(97))
                .collect();
            let range = (sorted[0], sorted[sorted.len() - 1]);
            for limit in [1, 3, 64, 10_000] {
                let passes = std::cell::Cell::new(0);
                let got = select(&ranks, range, limit, &|f| {
                    passes.set(passes.get() + 1);
                    keys.iter().for_each(|&k| f(k));
                });
                let want: Vec<u64> = ranks.iter().map(|&r| sorted[r as usize]).collect();
                assert_eq!(got, want, "limit {limit}");
                if limit == 10_000 {
                    // The ranks share the passes: the counts, then the buckets.
                    assert!(passes.get() <= 2, "{} passes", passes.get());
                }
            }
        }
    }

    /// Without a temporary file the blocks stay in memory, with the same
    /// results.
    #[test]
    fn spill_in_memory() {
        let values: Vec<f64> = noise(2 * BLOCK + 5, 4)
            .iter()
            .map(|x| (x % 977) as f64)
            .collect();
        let mut s = OrderStats {
            spill: Spill::in_memory(),
            ..Default::default()
        };
        for &v in &values {
            s.push(v);
        }
        let ranks = [0, 1, values.len() / 2, values.len() - 1];
        assert_eq!(s.at(&ranks), sorted_at(&values, &ranks));
    }
}
