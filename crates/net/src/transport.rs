//! TCP and UDP headers, and TCP options.

use etherparse::{TcpHeaderSlice, TcpOptionElement, UdpHeaderSlice};

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
    /// An option could not be parsed (the rest were skipped).
    pub malformed: bool,
}

fn parse_options(h: &TcpHeaderSlice<'_>) -> TcpOptions {
    let mut o = TcpOptions::default();
    for el in h.options_iterator() {
        match el {
            Ok(TcpOptionElement::MaximumSegmentSize(m)) => o.mss = Some(m),
            Ok(TcpOptionElement::WindowScale(s)) => o.window_scale = Some(s),
            Ok(TcpOptionElement::SelectiveAcknowledgementPermitted) => o.sack_permitted = true,
            Ok(TcpOptionElement::SelectiveAcknowledgement(first, rest)) => {
                o.sack.blocks[0] = first;
                let mut n = 1;
                for b in rest.iter().flatten() {
                    o.sack.blocks[n] = *b;
                    n += 1;
                }
                o.sack.len = n as u8;
            }
            Ok(TcpOptionElement::Timestamp(v, e)) => o.timestamp = Some((v, e)),
            Ok(TcpOptionElement::Noop) => {}
            Err(_) => {
                // Unknown kinds (MPTCP, TFO, ...) end the iterator with an
                // error in etherparse; everything before them was kept.
                o.malformed = true;
                break;
            }
        }
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
                options: parse_options(&h),
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
            let udp_len = if field >= 8 && field <= wire_len { field } else { wire_len };
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
