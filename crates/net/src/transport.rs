//! TCP and UDP headers, and TCP options.

use etherparse::{TcpHeaderSlice, UdpHeaderSlice};

use crate::counters::{Proto, ProtoCounters};
use crate::{TcpSegment, Transport, UdpDatagram};

/// Up to four SACK blocks (left edge, right edge).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SackBlocks {
    pub len: u8,
    pub blocks: [(u32, u32); 4],
}

impl SackBlocks {
    pub fn as_slice(&self) -> &[(u32, u32)] {
        &self.blocks[..self.len as usize]
    }
}

/// Decoded TCP options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpOptions {
    pub mss: Option<u16>,
    pub window_scale: Option<u8>,
    pub sack_permitted: bool,
    pub sack: SackBlocks,
    /// (TSval, TSecr)
    pub timestamp: Option<(u32, u32)>,
    /// An option had an impossible length (the rest were skipped) or a
    /// known kind had the wrong size (that one was skipped). Unknown kinds
    /// with a sound length are skipped without setting this.
    pub malformed: bool,
}

/// The options of a segment (see [`walk_options`]).
fn parse_options(opts: &[u8]) -> TcpOptions {
    // What nearly every segment of an established Linux connection carries:
    // two no-operations and the timestamps (what the walk gives it).
    if let [1, 1, 8, 10, a0, a1, a2, a3, e0, e1, e2, e3] = *opts {
        return TcpOptions {
            timestamp: Some((
                u32::from_be_bytes([a0, a1, a2, a3]),
                u32::from_be_bytes([e0, e1, e2, e3]),
            )),
            ..TcpOptions::default()
        };
    }
    walk_options(opts)
}

/// Walk the options as kind-length-value records. Not etherparse's option
/// iterator: it stops at the first kind it does not know (MPTCP, TCP-MD5,
/// TFO, ...), which would lose SACK blocks or timestamps placed after one.
fn walk_options(opts: &[u8]) -> TcpOptions {
    let mut o = TcpOptions::default();
    let be32 = |v: &[u8]| u32::from_be_bytes([v[0], v[1], v[2], v[3]]);
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            0 => break, // end of option list
            1 => {
                i += 1; // no-operation
                continue;
            }
            _ => {}
        }
        let len = opts.get(i + 1).map_or(0, |l| *l as usize);
        if len < 2 || i + len > opts.len() {
            // No way to find the next option.
            o.malformed = true;
            break;
        }
        let v = &opts[i + 2..i + len];
        let fits = match (opts[i], v.len()) {
            (2, 2) => {
                o.mss = Some(u16::from_be_bytes([v[0], v[1]]));
                true
            }
            (3, 1) => {
                o.window_scale = Some(v[0]);
                true
            }
            (4, 0) => {
                o.sack_permitted = true;
                true
            }
            (5, n) if n % 8 == 0 && (8..=32).contains(&n) => {
                let mut sack = SackBlocks::default();
                for (k, b) in v.chunks_exact(8).enumerate() {
                    sack.blocks[k] = (be32(&b[..4]), be32(&b[4..]));
                }
                sack.len = (n / 8) as u8;
                o.sack = sack;
                true
            }
            (8, 8) => {
                o.timestamp = Some((be32(&v[..4]), be32(&v[4..])));
                true
            }
            (2..=5 | 8, _) => false,
            // Other kinds are skipped by their length.
            _ => true,
        };
        if !fits {
            o.malformed = true;
        }
        i += len;
    }
    o
}

/// Decode a transport header. `data` is the captured transport segment,
/// `wire_len` its length on the wire (from the IP header).
pub(crate) fn decode<'a>(
    proto: u8,
    data: &'a [u8],
    wire_len: u32,
    frame_wire: u64,
    c: &mut ProtoCounters,
) -> Transport<'a> {
    match proto {
        6 => {
            let Ok(h) = TcpHeaderSlice::from_slice(data) else {
                c.add(Proto::MalformedTcp, frame_wire);
                return Transport::None;
            };
            let hlen = h.slice().len();
            if (wire_len as usize) < hlen {
                c.add(Proto::MalformedTcp, frame_wire);
                return Transport::None;
            }
            c.add(Proto::Tcp, frame_wire);
            let payload_len = wire_len - hlen as u32;
            let end = data.len().min(hlen + payload_len as usize);
            let raw = h.slice();
            let flags = u16::from(raw[13]) | (u16::from(raw[12] & 0x01) << 8);
            Transport::Tcp(TcpSegment {
                src_port: h.source_port(),
                dst_port: h.destination_port(),
                seq: h.sequence_number(),
                ack: h.acknowledgment_number(),
                flags,
                window: h.window_size(),
                header_len: hlen as u8,
                options: parse_options(h.options()),
                payload_len,
                payload: &data[hlen..end],
            })
        }
        17 => {
            let Ok(h) = UdpHeaderSlice::from_slice(data) else {
                c.add(Proto::MalformedUdp, frame_wire);
                return Transport::None;
            };
            c.add(Proto::Udp, frame_wire);
            let field = h.length() as u32;
            // Length 0 occurs with jumbograms and some offloads: trust IP.
            let udp_len = if field >= 8 && field <= wire_len {
                field
            } else {
                wire_len
            };
            let payload_len = udp_len.saturating_sub(8);
            let end = data.len().min(8 + payload_len as usize);
            Transport::Udp(UdpDatagram {
                src_port: h.source_port(),
                dst_port: h.destination_port(),
                payload_len,
                payload: &data[8.min(end)..end],
            })
        }
        other => {
            let p = match other {
                1 => Some(Proto::Icmp),
                2 => Some(Proto::Igmp),
                47 => Some(Proto::Gre),
                50 => Some(Proto::Esp),
                58 => Some(Proto::Icmpv6),
                132 => Some(Proto::Sctp),
                _ => None,
            };
            match p {
                Some(p) => c.add(p, frame_wire),
                None => c.add_other(crate::counters::OtherKey::IpProto(other), frame_wire),
            }
            Transport::Other(other)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shortcut for no-operation, no-operation, timestamps gives what
    /// the walk gives, for every value, and leaves every other layout to it.
    #[test]
    fn timestamps_shortcut_agrees_with_the_walk() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..2000 {
            let r = next().to_be_bytes();
            let ts = [1, 1, 8, 10, r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]];
            let o = parse_options(&ts);
            assert_eq!(o, walk_options(&ts));
            assert_eq!(
                o.timestamp,
                Some((
                    u32::from_be_bytes([r[0], r[1], r[2], r[3]]),
                    u32::from_be_bytes([r[4], r[5], r[6], r[7]])
                ))
            );
            // Near misses (a byte changed, one short, one more) and random
            // blocks: the walk's answer.
            let mut near = ts;
            near[(next() % 4) as usize] = (next() % 16) as u8;
            let random: Vec<u8> = (0..(next() % 41) as usize).map(|_| next() as u8).collect();
            let longer = [&ts[..], &[1]].concat();
            for opts in [&near[..], &ts[..11], &longer[..], &random[..]] {
                assert_eq!(parse_options(opts), walk_options(opts), "{opts:?}");
            }
        }
    }
}
