//! Why each retransmission happened.
//!
//! Every frame Wireshark flags `retransmission` (including its fast and
//! spurious retransmissions) gets exactly one class, tested in this order:
//!
//! 1. `network_duplicate`: the same IP ID and the same payload as one of the
//!    last [`RECENT_TX`] transmissions of that direction: the network (or a
//!    SPAN port) delivered one packet twice; the sender did not retransmit.
//!    Only where the direction's IP IDs vary (IPv6 and hosts sending ID 0
//!    cannot be told apart). Out-of-order frames that are exact duplicates
//!    count here too.
//! 2. `spurious`: the data was already acknowledged when it was sent
//!    (Wireshark's `spurious_retransmission`) — or proved unneeded later:
//!    by a D-SACK (RFC 2883, RFC 3708: a SACK block below the cumulative
//!    ACK, or inside the second block) covering it, or by the first ACK
//!    covering it arriving too early to be its answer: it echoes an older
//!    TSval than the retransmission's (the Eifel test, RFC 3522), or,
//!    without timestamps (or with equal TSvals), it came sooner than half
//!    the smallest far-side RTT after the retransmission. (Half, not all:
//!    near the receiver the far side is only the receiver's ACK delay,
//!    whose jitter would otherwise prove genuine retransmissions spurious.)
//! 3. `reordered`: not a retransmission at all but a late original: it fills
//!    a hole (data above it passed the capture point first) and either its
//!    IPv4 ID is older than that of the segment that opened the hole (where
//!    the sender's IDs count up, as Linux's and Windows' do), or — IDs not
//!    usable — it came less than half the minimum RTT after the hole
//!    opened, sooner than any retransmission can (the receiver's duplicate
//!    ACKs must reach the sender and the new copy come back: a full RTT at
//!    any capture point). Wireshark's flags on it stay as they are.
//! 4. `fast`: Wireshark's `fast_retransmission`, or sent after at least two
//!    duplicate ACKs, or while the receiver SACKs data above the
//!    acknowledged point, or during a loss recovery started by a fast
//!    retransmission (later holes of the same window).
//! 5. `timeout`: anything else: the retransmission timer (or a tail-loss
//!    probe) fired. Its *stall* is the time since the direction's previous
//!    transmission.
//!
//! Losses are located with respect to the capture point: a retransmission
//! whose original was captured was lost *after* it (or between it and the
//! receiver); one that fills a gap (Wireshark's `lost_segment`) was lost
//! *before* it; otherwise (original sent before the capture started, or not
//! tracked) the place is unknown. Spurious retransmissions, duplicates and
//! reordered originals are not losses and have no place.

use std::collections::VecDeque;

/// Recent transmissions remembered per direction for duplicate detection.
pub const RECENT_TX: usize = 64;
/// Retransmissions remembered per direction, waiting for a spurious proof.
pub const RECENT_RTX: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RetransClass {
    Timeout = 0,
    Fast,
    Spurious,
    NetworkDuplicate,
    /// Not a retransmission: a late original (reordering).
    Reordered,
}

impl RetransClass {
    pub const ALL: [RetransClass; 5] = [
        RetransClass::Timeout,
        RetransClass::Fast,
        RetransClass::Spurious,
        RetransClass::NetworkDuplicate,
        RetransClass::Reordered,
    ];

    pub fn name(self) -> &'static str {
        match self {
            RetransClass::Timeout => "timeout",
            RetransClass::Fast => "fast",
            RetransClass::Spurious => "spurious",
            RetransClass::NetworkDuplicate => "network_duplicate",
            RetransClass::Reordered => "reordered",
        }
    }
}

/// Where a lost segment was lost, relative to the capture point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum LossSite {
    BeforeCapture = 0,
    AfterCapture,
    Unknown,
}

/// What is known when a retransmission is seen.
#[derive(Debug, Clone, Copy, Default)]
pub struct Evidence {
    pub network_duplicate: bool,
    /// All of it was below the peer's cumulative ACK.
    pub already_acked: bool,
    /// It filled a hole too soon to be a retransmission, or its IP ID shows
    /// it was sent before the data above the hole: a late original.
    pub reordered: bool,
    pub wireshark_fast: bool,
    pub dup_acks: u32,
    pub sacked_above: bool,
    pub in_fast_recovery: bool,
}

pub fn classify(e: &Evidence) -> RetransClass {
    if e.network_duplicate {
        RetransClass::NetworkDuplicate
    } else if e.already_acked {
        RetransClass::Spurious
    } else if e.reordered {
        RetransClass::Reordered
    } else if e.wireshark_fast || e.dup_acks >= 2 || e.sacked_above || e.in_fast_recovery {
        RetransClass::Fast
    } else {
        RetransClass::Timeout
    }
}

/// A fast, non-cryptographic hash of the captured payload: its length and
/// its first and last 64 bytes.
pub fn payload_hash(p: &[u8]) -> u64 {
    // A network duplicate also has the same IP ID and length as its
    // original, so the edges tell it apart from a real retransmission well
    // enough; hashing every byte of every segment cost about a tenth of the
    // whole analysis (bench/results/2026-11-22-baseline.md).
    const EDGE: usize = 64;
    let n = p.len() as u64;
    if p.len() > 2 * EDGE {
        let (head, tail) = (&p[..EDGE], &p[p.len() - EDGE..]);
        finish(edge_hash(n, head) ^ edge_hash(n ^ K[2], tail).rotate_left(32))
    } else {
        finish(edge_hash(n, p))
    }
}

const K: [u64; 4] = [
    0x9E37_79B9_7F4A_7C15,
    0xBF58_476D_1CE4_E5B9,
    0x94D0_49BB_1331_11EB,
    0xD6E8_FEB8_6659_FD93,
];

/// The 128-bit product folded to 64 bits (as in wyhash): one multiply
/// mixes two words.
#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let m = u128::from(a) * u128::from(b);
    (m as u64) ^ ((m >> 64) as u64)
}

#[inline]
fn u64_at(p: &[u8], i: usize) -> u64 {
    u64::from_le_bytes([
        p[i],
        p[i + 1],
        p[i + 2],
        p[i + 3],
        p[i + 4],
        p[i + 5],
        p[i + 6],
        p[i + 7],
    ])
}

#[inline]
fn u32_at(p: &[u8], i: usize) -> u64 {
    u64::from(u32::from_le_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]))
}

/// Up to 15 bytes as two words, every byte in one of them, with
/// fixed-size loads only (overlapping ones, as wyhash reads its tail).
#[inline]
fn tail_words(r: &[u8]) -> (u64, u64) {
    let n = r.len();
    if n >= 8 {
        (u64_at(r, 0), u64_at(r, n - 8))
    } else if n >= 4 {
        (u32_at(r, 0) << 32 | u32_at(r, n - 4), 0)
    } else if n > 0 {
        let b = |i: usize| u64::from(r[i]);
        (b(0) << 16 | b(n / 2) << 8 | b(n - 1), 0)
    } else {
        (0, 0)
    }
}

/// Each 16-byte chunk is folded on its own, salted by its place, and the
/// results are XORed: the multiplies do not wait for each other, where a
/// word-by-word chain made the CPU wait on every step (this hash is taken
/// for every segment on the reading thread, the pass's busiest).
fn edge_hash(seed: u64, p: &[u8]) -> u64 {
    let mut acc = seed.wrapping_mul(K[0]);
    let mut salt = seed ^ K[1];
    let mut chunks = p.chunks_exact(16);
    for c in &mut chunks {
        acc ^= fold(u64_at(c, 0) ^ salt, u64_at(c, 8) ^ K[3]);
        salt = salt.wrapping_add(K[0]);
    }
    let r = chunks.remainder();
    if !r.is_empty() {
        let (a, b) = tail_words(r);
        acc ^= fold(a ^ salt ^ ((r.len() as u64) << 56), b ^ K[2]);
    }
    acc
}

#[inline]
fn finish(h: u64) -> u64 {
    fold(h ^ K[3], K[0])
}

/// Per-direction counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetransCounts {
    pub by_class: [u64; 5],
    /// Lost before / after the capture point / place unknown.
    pub by_site: [u64; 3],
    /// Timeout retransmissions: largest and total stall before them.
    pub stall_max_ns: i64,
    pub stall_sum_ns: i64,
    pub stalls: u64,
    /// D-SACK blocks received for this direction's data.
    pub dsacks: u64,
}

impl RetransCounts {
    pub fn get(&self, c: RetransClass) -> u64 {
        self.by_class[c as usize]
    }
    pub fn total(&self) -> u64 {
        self.by_class.iter().sum()
    }
}

#[derive(Debug, Clone, Copy)]
struct Tx {
    start: i64,
    len: u32,
    ip_id: u32,
    hash: u64,
}

/// A retransmission still open to being proved spurious.
#[derive(Debug, Clone, Copy)]
struct Rtx {
    start: i64,
    end: i64,
    ts: i64,
    tsval: Option<u32>,
    class: RetransClass,
    site: Option<LossSite>,
    /// Index of its row in the segments store, if recorded.
    seg: Option<usize>,
    /// The first ACK covering it has been checked.
    acked: bool,
}

/// A class change, for the caller's other records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reclassified {
    pub seg: Option<usize>,
    pub from: RetransClass,
}

/// Retransmission bookkeeping of one direction.
#[derive(Debug, Clone, Default)]
pub struct RetransTracker {
    pub counts: RetransCounts,
    recent_tx: VecDeque<Tx>,
    /// At least the largest start in `recent_tx` (the largest ever noted):
    /// new data starts above it, so most segments need no scan.
    max_start: Option<i64>,
    recent_rtx: VecDeque<Rtx>,
    /// At most the smallest end of a retransmission in `recent_rtx` not yet
    /// acknowledged: an ACK below it acknowledges none, and needs no scan
    /// (most ACKs of a lossy copy, which keeps hundreds of them).
    unacked_end_min: Option<i64>,
}

#[inline]
fn ts_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

impl RetransTracker {
    /// Remember a transmission (original or not) for duplicate detection.
    pub fn note_tx(&mut self, start: i64, len: u32, ip_id: u32, hash: u64) {
        if self.recent_tx.len() == RECENT_TX {
            self.recent_tx.pop_front();
        }
        self.max_start = Some(self.max_start.map_or(start, |m| m.max(start)));
        self.recent_tx.push_back(Tx {
            start,
            len,
            ip_id,
            hash,
        });
    }

    /// Same start, length, IP ID and payload as a recent transmission.
    pub fn is_duplicate(&self, start: i64, len: u32, ip_id: u32, hash: u64) -> bool {
        if self.max_start.is_none_or(|m| start > m) {
            return false;
        }
        self.recent_tx
            .iter()
            .rev()
            .any(|t| t.start == start && t.len == len && t.ip_id == ip_id && t.hash == hash)
    }

    /// Count a retransmission; `stall_ns` for timeouts.
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        class: RetransClass,
        site: Option<LossSite>,
        start: i64,
        end: i64,
        ts: i64,
        tsval: Option<u32>,
        stall_ns: Option<i64>,
        seg: Option<usize>,
    ) {
        self.counts.by_class[class as usize] += 1;
        if let Some(s) = site {
            self.counts.by_site[s as usize] += 1;
        }
        if class == RetransClass::Timeout {
            if let Some(st) = stall_ns {
                self.counts.stall_max_ns = self.counts.stall_max_ns.max(st);
                self.counts.stall_sum_ns += st;
                self.counts.stalls += 1;
            }
        }
        if matches!(class, RetransClass::Timeout | RetransClass::Fast) {
            if self.recent_rtx.len() == RECENT_RTX {
                self.recent_rtx.pop_front();
            }
            self.unacked_end_min = Some(self.unacked_end_min.map_or(end, |m| m.min(end)));
            self.recent_rtx.push_back(Rtx {
                start,
                end,
                ts,
                tsval,
                class,
                site,
                seg,
                acked: false,
            });
        }
    }

    fn make_spurious(counts: &mut RetransCounts, r: &mut Rtx) -> Reclassified {
        let from = r.class;
        counts.by_class[from as usize] -= 1;
        counts.by_class[RetransClass::Spurious as usize] += 1;
        if let Some(s) = r.site.take() {
            counts.by_site[s as usize] -= 1;
        }
        r.class = RetransClass::Spurious;
        Reclassified { seg: r.seg, from }
    }

    /// A D-SACK block [l, r) for this direction's data: the latest
    /// retransmission it overlaps was not needed.
    pub fn on_dsack(&mut self, l: i64, r: i64) -> Option<Reclassified> {
        self.counts.dsacks += 1;
        let counts = &mut self.counts;
        let rtx = self
            .recent_rtx
            .iter_mut()
            .rev()
            .find(|x| x.class != RetransClass::Spurious && x.start < r && l < x.end)?;
        Some(Self::make_spurious(counts, rtx))
    }

    /// The peer acknowledged up to `ack` at `ts` (echoing `tsecr`). The first
    /// ACK covering a retransmission proves it spurious when it answers the
    /// original: an older TSval echoed, or (timestamps absent or equal) less
    /// than half `far_min_ns` after the retransmission.
    pub fn on_ack(
        &mut self,
        ack: i64,
        ts: i64,
        tsecr: Option<u32>,
        far_min_ns: Option<i64>,
    ) -> Vec<Reclassified> {
        let mut out = Vec::new();
        if self.unacked_end_min.is_some_and(|m| ack >= m) {
            self.scan_acked(ack, ts, tsecr, far_min_ns, &mut out);
        }
        // Forget what can no longer be proved spurious by an early ACK and
        // is too old for a D-SACK to matter.
        while self
            .recent_rtx
            .front()
            .is_some_and(|r| r.acked && ts - r.ts > 10_000_000_000)
        {
            self.recent_rtx.pop_front();
        }
        out
    }

    /// The retransmissions `ack` acknowledges first, some found spurious.
    fn scan_acked(
        &mut self,
        ack: i64,
        ts: i64,
        tsecr: Option<u32>,
        far_min_ns: Option<i64>,
        out: &mut Vec<Reclassified>,
    ) {
        let counts = &mut self.counts;
        let mut unacked_end_min = None;
        for r in self.recent_rtx.iter_mut() {
            if r.acked {
                continue;
            }
            if r.end > ack {
                unacked_end_min = Some(unacked_end_min.map_or(r.end, |m: i64| m.min(r.end)));
                continue;
            }
            r.acked = true;
            if r.class == RetransClass::Spurious {
                continue;
            }
            let early = match (tsecr, r.tsval) {
                (Some(e), Some(v)) if e != v => ts_lt(e, v),
                _ => far_min_ns.is_some_and(|m| 2 * (ts - r.ts) < m),
            };
            if early {
                out.push(Self::make_spurious(counts, r));
            }
        }
        self.unacked_end_min = unacked_end_min;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RetransClass::*;

    #[test]
    fn classification_order() {
        let e = Evidence::default();
        assert_eq!(classify(&e), Timeout);
        assert_eq!(classify(&Evidence { dup_acks: 2, ..e }), Fast);
        assert_eq!(classify(&Evidence { dup_acks: 1, ..e }), Timeout);
        assert_eq!(
            classify(&Evidence {
                sacked_above: true,
                ..e
            }),
            Fast
        );
        assert_eq!(
            classify(&Evidence {
                in_fast_recovery: true,
                ..e
            }),
            Fast
        );
        assert_eq!(
            classify(&Evidence {
                wireshark_fast: true,
                already_acked: true,
                ..e
            }),
            Spurious
        );
        assert_eq!(
            classify(&Evidence {
                network_duplicate: true,
                already_acked: true,
                ..e
            }),
            NetworkDuplicate
        );
    }

    #[test]
    fn duplicates_need_same_id_and_payload() {
        let mut t = RetransTracker::default();
        let h = payload_hash(b"hello world, twelve");
        t.note_tx(100, 19, 7, h);
        assert!(t.is_duplicate(100, 19, 7, h));
        assert!(!t.is_duplicate(100, 19, 8, h));
        assert!(!t.is_duplicate(100, 19, 7, payload_hash(b"hello world, twelvE")));
        for i in 0..RECENT_TX as i64 {
            t.note_tx(1000 + i, 1, 1, 1);
        }
        assert!(!t.is_duplicate(100, 19, 7, h), "forgotten");
        assert_ne!(payload_hash(b""), payload_hash(b"\0"));
    }

    #[test]
    fn payload_hash_sees_length_edges_and_place() {
        let base: Vec<u8> = (0..200u32).map(|i| (i * 7 + 3) as u8).collect();
        let h = payload_hash(&base);
        // Every byte of the edges counts, wherever it sits in its chunk.
        for i in (0..64).chain(136..200) {
            let mut p = base.clone();
            p[i] ^= 1;
            assert_ne!(payload_hash(&p), h, "byte {i}");
        }
        // The middle is not hashed (by design: only the edges).
        let mut p = base.clone();
        p[100] ^= 1;
        assert_eq!(payload_hash(&p), h);
        // Swapped chunks, head and tail swapped, and zero padding differ.
        let mut p = base.clone();
        p[..32].rotate_left(16);
        assert_ne!(payload_hash(&p), h);
        let mut p = base.clone();
        p.rotate_left(100);
        p.rotate_right(36);
        assert_ne!(payload_hash(&p), h);
        let mut seen = std::collections::HashSet::new();
        for n in 0..=40 {
            assert!(seen.insert(payload_hash(&vec![0u8; n])), "{n} zero bytes");
        }
        // Short payloads: every byte and its place count.
        for n in 1..=128 {
            let p: Vec<u8> = (0..n).map(|i| i as u8).collect();
            for i in 0..n {
                let mut q = p.clone();
                q[i] ^= 0x80;
                assert_ne!(payload_hash(&q), payload_hash(&p), "{n} bytes, byte {i}");
            }
        }
    }

    #[test]
    fn dsack_makes_a_retransmission_spurious() {
        let mut t = RetransTracker::default();
        t.record(
            Timeout,
            Some(LossSite::AfterCapture),
            100,
            200,
            5,
            None,
            Some(200),
            Some(9),
        );
        assert_eq!(t.counts.by_site, [0, 1, 0]);
        assert_eq!((t.counts.stall_max_ns, t.counts.stalls), (200, 1));
        assert_eq!(t.on_dsack(300, 400), None);
        let r = t.on_dsack(100, 200).unwrap();
        assert_eq!(
            r,
            Reclassified {
                seg: Some(9),
                from: Timeout
            }
        );
        assert_eq!(t.counts.get(Timeout), 0);
        assert_eq!(t.counts.get(Spurious), 1);
        assert_eq!(t.counts.by_site, [0, 0, 0]);
        assert_eq!(t.counts.dsacks, 2);
        assert_eq!(t.on_dsack(100, 200), None, "only once");
        assert_eq!(t.counts.total(), 1);
    }

    /// An ACK below every unacknowledged retransmission's end skips the
    /// scan: the outcome is what scanning at every ACK gives, whatever the
    /// order of the retransmissions' ends, the ACKs going back, D-SACKs and
    /// retransmissions forgotten when too many wait.
    #[test]
    fn skipping_the_scan_changes_nothing() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = |n: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % n
        };
        for round in 0..200 {
            let (mut fast, mut every) = (RetransTracker::default(), RetransTracker::default());
            let (mut ack, mut ts) = (0i64, 0i64);
            let mut spurious = 0;
            for _ in 0..400 {
                ts += next(3_000_000_000) as i64;
                match next(10) {
                    0..=3 => {
                        let start = ack + next(20_000) as i64 - 2_000;
                        let end = start + 1 + next(3_000) as i64;
                        let class = if next(2) == 0 { Timeout } else { Fast };
                        let tsval = (next(3) > 0).then(|| next(1000) as u32);
                        for t in [&mut fast, &mut every] {
                            t.record(class, None, start, end, ts, tsval, Some(1), Some(7));
                        }
                    }
                    4..=8 => {
                        // Mostly forward, now and then back (a stale ACK).
                        ack = (ack + next(4_000) as i64 - 500).max(0);
                        let tsecr = (next(3) > 0).then(|| next(1000) as u32);
                        let far = (next(2) == 0).then(|| next(4_000_000_000) as i64);
                        every.unacked_end_min = Some(i64::MIN); // (scan every time)
                        let a = fast.on_ack(ack, ts, tsecr, far);
                        let b = every.on_ack(ack, ts, tsecr, far);
                        assert_eq!(a, b, "round {round}");
                        spurious += a.len();
                    }
                    _ => {
                        let l = ack + next(20_000) as i64 - 10_000;
                        let r = l + 1 + next(2_000) as i64;
                        assert_eq!(fast.on_dsack(l, r), every.on_dsack(l, r), "round {round}");
                    }
                }
                assert_eq!(fast.counts, every.counts, "round {round}");
                assert_eq!(
                    fast.recent_rtx.len(),
                    every.recent_rtx.len(),
                    "round {round}"
                );
            }
            assert!(
                round > 0 || spurious > 0,
                "the test makes no spurious retransmission"
            );
        }
    }

    #[test]
    fn early_ack_by_timestamp_or_time() {
        let mut t = RetransTracker::default();
        t.record(Timeout, None, 0, 10, 1000, Some(50), Some(1), None);
        // The ACK echoes TSval 49 (the original's): spurious.
        assert_eq!(t.on_ack(10, 1100, Some(49), Some(10_000)).len(), 1);
        let mut t = RetransTracker::default();
        t.record(Fast, None, 0, 10, 1000, Some(50), None, None);
        // Echoes the retransmission's TSval: genuine, even if fast.
        assert!(t.on_ack(10, 1001, Some(51), Some(10_000)).is_empty());
        // Only the first covering ACK counts.
        assert!(t.on_ack(20, 1002, Some(49), Some(10_000)).is_empty());
        let mut t = RetransTracker::default();
        t.record(Timeout, None, 0, 10, 1000, None, None, None);
        assert!(t.on_ack(5, 1001, None, Some(500)).is_empty(), "not covered");
        assert_eq!(t.on_ack(10, 1200, None, Some(500)).len(), 1);
        assert_eq!(t.counts.get(Spurious), 1);
        let mut t = RetransTracker::default();
        t.record(Timeout, None, 0, 10, 1000, None, None, None);
        assert!(
            t.on_ack(10, 1300, None, Some(500)).is_empty(),
            "not under half"
        );
        let mut t = RetransTracker::default();
        t.record(Timeout, None, 0, 10, 1000, None, None, None);
        assert!(t.on_ack(10, 1600, None, Some(500)).is_empty());
        assert!(t.on_ack(10, 1600, None, None).is_empty());
    }
}
