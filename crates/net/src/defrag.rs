//! IPv4/IPv6 fragment reassembly within fixed memory bounds.
//!
//! Fragments are kept per (version, source, destination, id, protocol) until
//! the datagram is complete, its time runs out (capture time), or room is
//! needed; abandoned datagrams are counted, never silently lost. Like
//! Wireshark, the reassembled datagram belongs to the frame that completes it.

use std::net::IpAddr;

/// Bounds on reassembly state.
#[derive(Debug, Clone, Copy)]
pub struct DefragLimits {
    /// Datagrams being reassembled at once.
    pub max_pending: usize,
    /// Bytes buffered over all pending datagrams.
    pub max_bytes: usize,
    /// A datagram not completed within this capture time is abandoned.
    pub timeout_ns: i64,
}

impl Default for DefragLimits {
    fn default() -> Self {
        DefragLimits {
            max_pending: 1024,
            max_bytes: 16 << 20,
            timeout_ns: 30_000_000_000,
        }
    }
}

/// Largest reassembled datagram payload accepted (IPv4 total length limit).
const MAX_DATAGRAM: u32 = 65_535;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FragKey {
    pub(crate) version: u8,
    pub(crate) src: IpAddr,
    pub(crate) dst: IpAddr,
    pub(crate) id: u32,
    pub(crate) proto: u8,
}

struct Pending {
    key: FragKey,
    first_ts: i64,
    buf: Vec<u8>,
    /// Received byte ranges, sorted and merged.
    ranges: Vec<(u32, u32)>,
    total: Option<u32>,
    /// A fragment was cut by the snaplen: the datagram can never complete.
    broken: bool,
}

pub(crate) struct Defragmenter {
    limits: DefragLimits,
    pending: Vec<Pending>,
    buffered: usize,
    out: Vec<u8>,
    spare: Vec<Vec<u8>>,
    reassembled: u64,
    abandoned: u64,
}

impl Defragmenter {
    pub(crate) fn new(limits: DefragLimits) -> Self {
        Defragmenter {
            limits,
            pending: Vec::new(),
            buffered: 0,
            out: Vec::new(),
            spare: Vec::new(),
            reassembled: 0,
            abandoned: 0,
        }
    }

    /// End of capture: datagrams still incomplete are abandoned.
    pub(crate) fn finish(&mut self) {
        while !self.pending.is_empty() {
            let p = self.drop_at(self.pending.len() - 1, false);
            self.recycle(p.buf);
        }
    }

    pub(crate) fn stats(&self) -> (u64, u64) {
        (self.reassembled, self.abandoned)
    }

    fn drop_at(&mut self, i: usize, completed: bool) -> Pending {
        let p = self.pending.swap_remove(i);
        self.buffered = self.buffered.saturating_sub(p.buf.capacity());
        if !completed {
            self.abandoned += 1;
        }
        p
    }

    fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.spare.len() < 8 {
            buf.clear();
            self.spare.push(buf);
        }
    }

    /// Add one fragment: `offset` in bytes, `more` fragments follow,
    /// `data` the captured payload, `wire_len` its length on the wire.
    /// Returns the whole datagram payload when this fragment completes it.
    pub(crate) fn add(
        &mut self,
        key: FragKey,
        ts_ns: i64,
        offset: u32,
        more: bool,
        data: &[u8],
        wire_len: u32,
    ) -> Option<&[u8]> {
        // Expire old datagrams first (capture time).
        let mut i = 0;
        while i < self.pending.len() {
            if ts_ns.saturating_sub(self.pending[i].first_ts) > self.limits.timeout_ns {
                let p = self.drop_at(i, false);
                self.recycle(p.buf);
            } else {
                i += 1;
            }
        }
        let end = offset.checked_add(wire_len)?;
        if end > MAX_DATAGRAM {
            return None;
        }
        let idx = match self.pending.iter().position(|p| p.key == key) {
            Some(i) => i,
            None => {
                while self.pending.len() >= self.limits.max_pending
                    || (self.buffered + end as usize > self.limits.max_bytes
                        && !self.pending.is_empty())
                {
                    // Evict the oldest.
                    let oldest = self
                        .pending
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, p)| p.first_ts)
                        .map(|(i, _)| i)
                        .unwrap_or(0);
                    let p = self.drop_at(oldest, false);
                    self.recycle(p.buf);
                }
                let buf = self.spare.pop().unwrap_or_default();
                // A recycled buffer's capacity is released by `drop_at`, so
                // it must be counted when taken, not only its growth.
                self.buffered += buf.capacity();
                self.pending.push(Pending {
                    key,
                    first_ts: ts_ns,
                    buf,
                    ranges: Vec::new(),
                    total: None,
                    broken: false,
                });
                self.pending.len() - 1
            }
        };
        let before = self.pending[idx].buf.capacity();
        let p = &mut self.pending[idx];
        if (data.len() as u32) < wire_len {
            p.broken = true;
        }
        if p.buf.len() < end as usize {
            p.buf.resize(end as usize, 0);
        }
        let n = data.len().min(wire_len as usize);
        p.buf[offset as usize..offset as usize + n].copy_from_slice(&data[..n]);
        insert_range(&mut p.ranges, (offset, end));
        if !more {
            p.total = Some(end);
        }
        let complete = match p.total {
            Some(t) => !p.broken && p.ranges.len() == 1 && p.ranges[0] == (0, t),
            None => false,
        };
        let after = p.buf.capacity();
        self.buffered = self.buffered + after - before.min(after);
        if !complete {
            return None;
        }
        let done = self.drop_at(idx, true);
        self.reassembled += 1;
        let total = done.total.unwrap_or(0) as usize;
        let old = std::mem::replace(&mut self.out, done.buf);
        self.recycle(old);
        self.out.truncate(total);
        Some(&self.out)
    }
}

fn insert_range(ranges: &mut Vec<(u32, u32)>, r: (u32, u32)) {
    ranges.push(r);
    ranges.sort_unstable();
    let mut merged: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
    for &(s, e) in ranges.iter() {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    *ranges = merged;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn key(id: u32) -> FragKey {
        FragKey {
            version: 4,
            src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            id,
            proto: 17,
        }
    }

    #[test]
    fn reassembles_out_of_order() {
        let a = [1u8; 8];
        let b = [2u8; 8];
        let c = [3u8; 4];
        let mut d = Defragmenter::new(DefragLimits::default());
        // Overlapping fragments: the later one covers the earlier.
        assert!(d.add(key(1), 0, 0, true, &c, 4).is_none());
        assert!(d.add(key(1), 0, 0, false, &b, 8).is_some());
        assert!(d.add(key(2), 0, 8, true, &b, 8).is_none());
        assert!(d.add(key(2), 0, 16, false, &c, 4).is_none());
        let out = d.add(key(2), 0, 0, true, &a, 8).map(|s| s.to_vec());
        let mut want = a.to_vec();
        want.extend_from_slice(&b);
        want.extend_from_slice(&c);
        assert_eq!(out, Some(want));
        assert_eq!(d.stats(), (2, 0));
    }

    #[test]
    fn bounded_and_counted() {
        let limits = DefragLimits {
            max_pending: 4,
            max_bytes: 1 << 20,
            timeout_ns: 1_000,
        };
        let mut d = Defragmenter::new(limits);
        for id in 0..100 {
            assert!(d.add(key(id), id as i64, 0, true, &[0u8; 8], 8).is_none());
        }
        assert!(d.pending.len() <= 4);
        assert_eq!(d.stats().1, 96);
        // Timeout: a later fragment expires everything pending.
        assert!(d.add(key(500), 1_000_000, 8, true, &[0u8; 8], 8).is_none());
        assert_eq!(d.pending.len(), 1);
    }

    #[test]
    fn truncated_fragment_never_completes() {
        let mut d = Defragmenter::new(DefragLimits::default());
        assert!(d.add(key(9), 0, 0, true, &[0u8; 4], 8).is_none());
        assert!(d.add(key(9), 0, 8, false, &[0u8; 8], 8).is_none());
    }
}
