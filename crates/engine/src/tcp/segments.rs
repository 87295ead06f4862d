//! Per-segment points for sequence graphs (the `tcp_segments` table), kept
//! only for the connections asked for (`AnalyzeOptions::segments_for`).
//!
//! Sequence and ACK numbers are relative to each direction's initial
//! sequence number (the SYN's, else the first seen minus one, as Wireshark's
//! relative numbers) and *unwrapped*: they keep growing past 2^32, so a
//! graph of a long transfer stays monotonic. Windows are stored unscaled and
//! scaled when the table is built (the scale may be inferred late).

use std::collections::HashSet;

use super::flags::FlagSet;
use super::retrans_class::RetransClass;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegPoint {
    pub frame: u64,
    pub ts: i64,
    pub stream: u32,
    pub dir: u8,
    pub seq: i64,
    pub len: u32,
    /// Relative ACK (None without the ACK flag).
    pub ack: Option<i64>,
    pub window_raw: u16,
    /// The window field of a SYN is never scaled.
    pub syn: bool,
    pub flags: u16,
    pub sack: [(i64, i64); 4],
    pub sack_len: u8,
    /// Unacknowledged bytes of this direction after this segment.
    pub in_flight: u64,
    pub class: Option<RetransClass>,
    /// Wireshark's flags on this frame.
    pub analysis: FlagSet,
}

#[derive(Debug, Clone, Default)]
pub struct SegmentStore {
    wanted: HashSet<u32>,
    points: Vec<SegPoint>,
}

impl SegmentStore {
    pub fn new(streams: &[u32]) -> Self {
        SegmentStore {
            wanted: streams.iter().copied().collect(),
            points: Vec::new(),
        }
    }

    #[inline]
    pub fn wants(&self, stream: u32) -> bool {
        !self.wanted.is_empty() && self.wanted.contains(&stream)
    }

    /// Store a point; returns its index.
    pub fn push(&mut self, p: SegPoint) -> usize {
        self.points.push(p);
        self.points.len() - 1
    }

    /// Set the class of the point of `frame` (points are in frame order).
    pub fn set_class(&mut self, frame: u64, c: RetransClass) {
        if let Ok(i) = self.points.binary_search_by_key(&frame, |p| p.frame) {
            self.points[i].class = Some(c);
        }
    }

    pub fn points(&self) -> &[SegPoint] {
        &self.points
    }
}

/// TCP flags as text, e.g. "SYN,ACK".
pub fn flags_text(f: u16) -> String {
    const NAMES: [(u16, &str); 9] = [
        (0x02, "SYN"),
        (0x01, "FIN"),
        (0x04, "RST"),
        (0x08, "PSH"),
        (0x10, "ACK"),
        (0x20, "URG"),
        (0x40, "ECE"),
        (0x80, "CWR"),
        (0x100, "NS"),
    ];
    let v: Vec<&str> = NAMES
        .iter()
        .filter(|(b, _)| f & b != 0)
        .map(|(_, n)| *n)
        .collect();
    v.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_wanted_streams_and_class_updates() {
        let mut s = SegmentStore::new(&[2, 5]);
        assert!(s.wants(5) && !s.wants(3));
        assert!(!SegmentStore::default().wants(0));
        let p = SegPoint {
            frame: 1,
            ts: 0,
            stream: 5,
            dir: 0,
            seq: 1,
            len: 10,
            ack: None,
            window_raw: 0,
            syn: false,
            flags: 0x18,
            sack: [(0, 0); 4],
            sack_len: 0,
            in_flight: 10,
            class: None,
            analysis: FlagSet::EMPTY,
        };
        s.push(p);
        s.set_class(1, RetransClass::Spurious);
        assert_eq!(s.points()[0].class, Some(RetransClass::Spurious));
        assert_eq!(flags_text(0x12), "SYN,ACK");
        assert_eq!(flags_text(0x18), "PSH,ACK");
        assert_eq!(flags_text(0), "");
    }
}
