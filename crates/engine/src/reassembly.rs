//! In-order delivery of one direction of a TCP connection.
//!
//! Segments arrive as captured: retransmitted, overlapping, out of order,
//! missing (lost before the capture point, dropped by the capture) or cut by
//! the snaplen. The reassembler turns them into an ordered sequence of
//! [`Chunk`]s over a 64-bit stream offset (sequence numbers unwrapped):
//! captured bytes, and *holes* whose length is known but whose bytes are not
//! (snaplen cuts and proven gaps). Protocol parsers walk past holes using
//! their own length fields, or resynchronise after them.
//!
//! A gap is declared only when it is proven: the peer acknowledged bytes we
//! never saw (the capture missed them), the out-of-order buffer reached its
//! bound, or the connection ended. Out-of-order data is copied (the only
//! allocation on this path, and only for data that really arrived early).

use std::collections::BTreeMap;

/// What a parser receives, in stream order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunk<'a> {
    /// Captured bytes starting at stream offset `offset`.
    Data {
        offset: u64,
        bytes: &'a [u8],
        frame: u64,
        ts: i64,
    },
    /// `len` bytes at `offset` that exist on the wire but were not captured.
    Hole {
        offset: u64,
        len: u64,
        kind: HoleKind,
        frame: u64,
        ts: i64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoleKind {
    /// Cut by the capture's snaplen (the segment itself was seen).
    Snaplen,
    /// Segments never captured (acknowledged by the peer, or given up on).
    Missing,
}

/// Counters kept per direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReassemblyStats {
    /// Bytes delivered (captured or hole) in order.
    pub delivered: u64,
    /// Bytes seen again (retransmissions, overlaps).
    pub duplicate_bytes: u64,
    /// Segments that arrived ahead of a gap and were buffered.
    pub out_of_order_segments: u64,
    /// Proven gaps and their bytes.
    pub gaps: u64,
    pub gap_bytes: u64,
    /// Times the buffer bound forced a gap to be declared.
    pub overflows: u64,
}

struct Pending {
    data: Vec<u8>,
    wire_len: u64,
    frame: u64,
    ts: i64,
}

/// Bound on buffered out-of-order bytes per direction.
pub const DEFAULT_MAX_BUFFER: usize = 4 << 20;

/// One captured segment of this direction.
#[derive(Debug, Clone, Copy)]
pub struct Segment<'a> {
    pub seq: u32,
    /// Carries SYN (which consumes one sequence number).
    pub syn: bool,
    /// Captured payload.
    pub payload: &'a [u8],
    /// Payload length on the wire.
    pub wire_len: u32,
    pub frame: u64,
    pub ts: i64,
}

pub struct Reassembler {
    /// Sequence number of stream offset 0.
    base: Option<u32>,
    /// Next stream offset expected.
    next: u64,
    pending: BTreeMap<u64, Pending>,
    buffered: usize,
    max_buffer: usize,
    stats: ReassemblyStats,
}

impl Default for Reassembler {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_BUFFER)
    }
}

impl Reassembler {
    pub fn new(max_buffer: usize) -> Self {
        Reassembler {
            base: None,
            next: 0,
            pending: BTreeMap::new(),
            buffered: 0,
            max_buffer,
            stats: ReassemblyStats::default(),
        }
    }

    pub fn stats(&self) -> ReassemblyStats {
        self.stats
    }

    /// Stream offset of the next byte expected.
    pub fn next_offset(&self) -> u64 {
        self.next
    }

    /// Unwrap a sequence number to the stream offset nearest to `next`.
    fn offset_of(&self, seq: u32, base: u32) -> Option<u64> {
        let rel = seq.wrapping_sub(base) as u64;
        let cur = self.next;
        let epoch = cur & !0xFFFF_FFFF;
        // Candidates in this 4 GiB epoch and its neighbours; take the nearest.
        [
            epoch.checked_sub(1 << 32),
            Some(epoch),
            epoch.checked_add(1 << 32),
        ]
        .into_iter()
        .flatten()
        .map(|e| e + rel)
        .min_by_key(|c| c.abs_diff(cur))
    }

    /// Feed one segment; chunks ready for the parser go to `out` in order.
    pub fn segment(&mut self, s: Segment<'_>, out: &mut dyn FnMut(Chunk<'_>)) {
        let Segment {
            seq,
            syn,
            payload,
            wire_len,
            frame,
            ts,
        } = s;
        if syn {
            if self.base.is_none() {
                self.base = Some(seq.wrapping_add(1));
            }
            if wire_len == 0 {
                return;
            }
        }
        if wire_len == 0 {
            return;
        }
        let seq = if syn { seq.wrapping_add(1) } else { seq };
        let base = *self.base.get_or_insert(seq);
        let Some(off) = self.offset_of(seq, base) else {
            return;
        };
        let end = off + wire_len as u64;
        if end <= self.next {
            self.stats.duplicate_bytes += wire_len as u64;
            return;
        }
        if off > self.next {
            self.buffer(off, payload, wire_len as u64, frame, ts);
            if self.buffered > self.max_buffer {
                self.stats.overflows += 1;
                self.skip_to_pending(out);
            }
            return;
        }
        self.deliver(off, payload, wire_len as u64, frame, ts, out);
        self.drain(out);
    }

    /// The peer acknowledged everything before `ack`: bytes up to there that
    /// we have not seen were sent and received but not captured.
    pub fn acked(&mut self, ack: u32, frame: u64, ts: i64, out: &mut dyn FnMut(Chunk<'_>)) {
        let Some(base) = self.base else { return };
        let Some(acked) = self.offset_of(ack, base) else {
            return;
        };
        // An ACK more than 1 GiB ahead is not trusted (bogus or FIN-related).
        if acked <= self.next || acked - self.next > 1 << 30 {
            return;
        }
        while acked > self.next {
            match self.pending.first_key_value().map(|(k, _)| *k) {
                Some(k) if k <= acked => {
                    if k > self.next {
                        self.gap(k - self.next, frame, ts, out);
                    }
                    self.drain(out);
                }
                _ => {
                    self.gap(acked - self.next, frame, ts, out);
                    self.drain(out);
                }
            }
        }
    }

    /// End of connection or capture: deliver what is buffered, with gaps.
    pub fn finish(&mut self, out: &mut dyn FnMut(Chunk<'_>)) {
        while !self.pending.is_empty() {
            self.skip_to_pending(out);
        }
    }

    fn gap(&mut self, len: u64, frame: u64, ts: i64, out: &mut dyn FnMut(Chunk<'_>)) {
        self.stats.gaps += 1;
        self.stats.gap_bytes += len;
        out(Chunk::Hole {
            offset: self.next,
            len,
            kind: HoleKind::Missing,
            frame,
            ts,
        });
        self.stats.delivered += len;
        self.next += len;
    }

    fn skip_to_pending(&mut self, out: &mut dyn FnMut(Chunk<'_>)) {
        if let Some((&k, p)) = self.pending.first_key_value() {
            if k > self.next {
                let (frame, ts) = (p.frame, p.ts);
                self.gap(k - self.next, frame, ts, out);
            }
            self.drain(out);
        }
    }

    fn buffer(&mut self, off: u64, payload: &[u8], wire_len: u64, frame: u64, ts: i64) {
        self.stats.out_of_order_segments += 1;
        match self.pending.get(&off) {
            // Keep the longer copy of a retransmitted out-of-order segment.
            Some(p) if p.wire_len >= wire_len => {
                self.stats.duplicate_bytes += wire_len;
            }
            _ => {
                let data = payload.to_vec();
                self.buffered += data.len();
                if let Some(old) = self.pending.insert(
                    off,
                    Pending {
                        data,
                        wire_len,
                        frame,
                        ts,
                    },
                ) {
                    self.buffered -= old.data.len();
                }
            }
        }
    }

    fn drain(&mut self, out: &mut dyn FnMut(Chunk<'_>)) {
        while let Some(entry) = self.pending.first_entry() {
            let off = *entry.key();
            if off > self.next {
                break;
            }
            let p = entry.remove();
            self.buffered -= p.data.len();
            if off + p.wire_len <= self.next {
                self.stats.duplicate_bytes += p.wire_len;
                continue;
            }
            self.deliver(off, &p.data, p.wire_len, p.frame, p.ts, out);
        }
    }

    /// Deliver the part of a segment at `off` that lies at or after `next`.
    fn deliver(
        &mut self,
        off: u64,
        captured: &[u8],
        wire_len: u64,
        frame: u64,
        ts: i64,
        out: &mut dyn FnMut(Chunk<'_>),
    ) {
        let skip = self.next - off;
        self.stats.duplicate_bytes += skip;
        let end = off + wire_len;
        if (skip as usize) < captured.len() {
            let bytes = &captured[skip as usize..];
            out(Chunk::Data {
                offset: self.next,
                bytes,
                frame,
                ts,
            });
            self.next += bytes.len() as u64;
        }
        if self.next < end {
            out(Chunk::Hole {
                offset: self.next,
                len: end - self.next,
                kind: HoleKind::Snaplen,
                frame,
                ts,
            });
            self.next = end;
        }
        self.stats.delivered += wire_len - skip;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Eq)]
    enum Got {
        D(u64, Vec<u8>),
        H(u64, u64, HoleKind),
    }

    fn run(r: &mut Reassembler, seq: u32, data: &[u8], wire: u32, got: &mut Vec<Got>) {
        let s = Segment {
            seq,
            syn: false,
            payload: data,
            wire_len: wire,
            frame: 1,
            ts: 0,
        };
        r.segment(s, &mut |c| push(c, got));
    }

    fn push(c: Chunk<'_>, got: &mut Vec<Got>) {
        match c {
            Chunk::Data { offset, bytes, .. } => got.push(Got::D(offset, bytes.to_vec())),
            Chunk::Hole {
                offset, len, kind, ..
            } => got.push(Got::H(offset, len, kind)),
        }
    }

    #[test]
    fn in_order_retransmission_and_overlap() {
        let mut r = Reassembler::default();
        let mut got = Vec::new();
        let syn = Segment {
            seq: 99,
            syn: true,
            payload: &[],
            wire_len: 0,
            frame: 1,
            ts: 0,
        };
        r.segment(syn, &mut |c| push(c, &mut got));
        run(&mut r, 100, b"abcd", 4, &mut got);
        run(&mut r, 100, b"abcd", 4, &mut got); // retransmission
        run(&mut r, 102, b"cdef", 4, &mut got); // overlap
        assert_eq!(
            got,
            vec![Got::D(0, b"abcd".to_vec()), Got::D(4, b"ef".to_vec())]
        );
        assert_eq!(r.stats().duplicate_bytes, 6);
    }

    #[test]
    fn out_of_order_is_buffered_then_drained() {
        let mut r = Reassembler::default();
        let mut got = Vec::new();
        run(&mut r, 1000, b"aa", 2, &mut got);
        run(&mut r, 1004, b"cc", 2, &mut got);
        run(&mut r, 1002, b"bb", 2, &mut got);
        assert_eq!(
            got,
            vec![
                Got::D(0, b"aa".to_vec()),
                Got::D(2, b"bb".to_vec()),
                Got::D(4, b"cc".to_vec())
            ]
        );
    }

    #[test]
    fn snaplen_cut_becomes_hole() {
        let mut r = Reassembler::default();
        let mut got = Vec::new();
        run(&mut r, 5, b"ab", 10, &mut got);
        run(&mut r, 15, b"xy", 4, &mut got);
        assert_eq!(
            got,
            vec![
                Got::D(0, b"ab".to_vec()),
                Got::H(2, 8, HoleKind::Snaplen),
                Got::D(10, b"xy".to_vec()),
                Got::H(12, 2, HoleKind::Snaplen)
            ]
        );
    }

    #[test]
    fn acked_but_unseen_data_is_a_gap() {
        let mut r = Reassembler::default();
        let mut got = Vec::new();
        run(&mut r, 0, b"aa", 2, &mut got);
        run(&mut r, 6, b"dd", 2, &mut got); // 2..6 missing
        r.acked(8, 9, 0, &mut |c| push(c, &mut got));
        assert_eq!(
            got,
            vec![
                Got::D(0, b"aa".to_vec()),
                Got::H(2, 4, HoleKind::Missing),
                Got::D(6, b"dd".to_vec())
            ]
        );
        assert_eq!(r.stats().gaps, 1);
        // An ack beyond everything seen: the rest was missed too.
        r.acked(20, 10, 0, &mut |c| push(c, &mut got));
        assert_eq!(got.last(), Some(&Got::H(8, 12, HoleKind::Missing)));
    }

    #[test]
    fn buffer_bound_forces_gap() {
        let mut r = Reassembler::new(10);
        let mut got = Vec::new();
        run(&mut r, 0, b"a", 1, &mut got);
        for i in 0..5u32 {
            run(&mut r, 10 + i * 4, b"xxxx", 4, &mut got);
        }
        assert!(r.stats().overflows >= 1);
        assert!(got
            .iter()
            .any(|g| matches!(g, Got::H(1, 9, HoleKind::Missing))));
    }

    #[test]
    fn sequence_wrap() {
        let mut r = Reassembler::default();
        let mut got = Vec::new();
        run(&mut r, u32::MAX - 1, b"ab", 2, &mut got);
        run(&mut r, 0, b"cd", 2, &mut got);
        assert_eq!(
            got,
            vec![Got::D(0, b"ab".to_vec()), Got::D(2, b"cd".to_vec())]
        );
        // Keep going past 4 GiB of stream.
        let mut r = Reassembler::default();
        let mut got = Vec::new();
        run(&mut r, 7, b"", 1 << 31, &mut got);
        run(&mut r, 7u32.wrapping_add(1 << 31), b"", 1 << 31, &mut got);
        run(&mut r, 7, b"z", 1, &mut got);
        assert_eq!(got.last(), Some(&Got::D(1 << 32, b"z".to_vec())));
    }
}
