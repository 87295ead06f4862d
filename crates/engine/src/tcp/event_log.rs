//! Every flagged segment's events ([`TcpEvent`]), kept as the spill keeps
//! requests' records: the newest in memory, the rest in serialised blocks in
//! a temporary file (`crate::spill`). A lossy copy flags hundreds of
//! thousands of segments (most of them duplicate ACKs), all on one
//! connection; at 48 bytes each in memory they were the largest thing a
//! long capture grew. Read back in order, a block at a time, whole
//! ([`EventLog::iter`]) or a range of rows ([`EventLog::range`], for the
//! `tcp_events` table read a piece at a time).

use super::TcpEvent;
use crate::spill::{Codec, Packed, Spill};

/// Events per block (about 200 KB before compression).
const BLOCK: usize = 4096;

#[derive(Debug, Default)]
pub struct EventLog {
    /// Full blocks, in order, each of [`BLOCK`] events.
    blocks: Vec<Packed>,
    tail: Vec<TcpEvent>,
    spill: Spill,
}

impl EventLog {
    pub(crate) fn push(&mut self, e: TcpEvent) {
        self.tail.push(e);
        if self.tail.len() >= BLOCK {
            if let Some(block) = self.spill.put_packed(&self.tail, Codec::Plain) {
                self.blocks.push(block);
                self.tail.clear();
            }
            // (Not encodable: never in practice; the tail keeps them.)
        }
    }

    /// See [`super::TcpAnalysis::relocate`].
    pub(crate) fn relocate(&mut self) {
        crate::heap::renew(&mut self.blocks);
        crate::heap::renew(&mut self.tail);
        self.spill.relocate();
    }

    /// Events so far.
    pub fn len(&self) -> usize {
        // A tail that could not be packed holds more than a block.
        self.blocks.len() * BLOCK + self.tail.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every event, in order.
    pub fn iter(&self) -> impl Iterator<Item = TcpEvent> + '_ {
        self.range(0, self.len())
    }

    /// Events `start..stop` (clamped), in order; only their blocks are
    /// read.
    pub fn range(&self, start: usize, stop: usize) -> impl Iterator<Item = TcpEvent> + '_ {
        let stop = stop.min(self.len());
        let start = start.min(stop);
        let first = start / BLOCK;
        let last = stop.div_ceil(BLOCK);
        (first..last)
            .flat_map(move |b| {
                let events: Vec<TcpEvent> = match self.blocks.get(b) {
                    // The log wrote these bytes itself: a block that does
                    // not read back is a bug, which must not drop events.
                    Some(p) => self.spill.get_packed(*p).unwrap_or_else(|| {
                        panic!("a block of TCP events does not read back (a bug)")
                    }),
                    None => self.tail.clone(),
                };
                let base = b * BLOCK;
                events
                    .into_iter()
                    .enumerate()
                    .map(move |(i, e)| (base + i, e))
            })
            .skip_while(move |(i, _)| *i < start)
            .take_while(move |(i, _)| *i < stop)
            .map(|(_, e)| e)
    }

    /// The last event (only its block is read).
    pub fn last(&self) -> Option<TcpEvent> {
        let n = self.len();
        self.range(n.saturating_sub(1), n).next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::{Detail, Flag};

    #[test]
    fn events_come_back_in_order_whole_and_by_range() {
        let mut log = EventLog::default();
        let n = 3 * BLOCK + 17;
        for i in 0..n as u64 {
            log.push(TcpEvent {
                frame: i,
                ts: i as i64 * 10,
                stream: (i % 5) as u32,
                dir: (i % 2) as u8,
                kind: if i % 3 == 0 {
                    Flag::DuplicateAck
                } else {
                    Flag::Retransmission
                },
                detail: Detail::DupAck {
                    num: i as u32,
                    frame: i / 2,
                },
            });
        }
        assert_eq!(log.len(), n);
        let all: Vec<u64> = log.iter().map(|e| e.frame).collect();
        assert_eq!(all, (0..n as u64).collect::<Vec<_>>());
        for (a, b) in [
            (0, 0),
            (5, 9),
            (BLOCK - 1, BLOCK + 1),
            (2 * BLOCK, n + 9),
            (n, n),
        ] {
            let got: Vec<u64> = log.range(a, b).map(|e| e.frame).collect();
            let want: Vec<u64> = (a.min(n) as u64..b.min(n) as u64).collect();
            assert_eq!(got, want, "{a}..{b}");
        }
        assert_eq!(log.last().map(|e| e.frame), Some(n as u64 - 1));
        assert!(log.blocks.len() == 3);
    }
}
