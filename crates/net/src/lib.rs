//! Link, network and transport decoding for one captured frame.
//!
//! [`Decoder::decode`] walks the layers of a frame (Ethernet with any depth
//! of 802.1Q/802.1ad tags, PPPoE, MPLS, Linux SLL/SLL2, BSD NULL/loopback,
//! raw IP → IPv4 with options / IPv6 with extension headers → TCP or UDP),
//! reassembles IP fragments within fixed memory bounds, and counts every
//! protocol it meets so that nothing is dropped silently. IP and transport
//! headers are sliced with `etherparse`; the decoder itself allocates
//! nothing per frame (fragment reassembly reuses its buffers).
//!
//! Lengths come from header fields, not from how much was captured, so a
//! snaplen-truncated frame still tells how much payload was on the wire.

mod counters;
mod defrag;
mod ip;
mod link;
mod transport;

use std::net::IpAddr;

pub use counters::{Proto, ProtoCounters};
pub use defrag::DefragLimits;
pub use transport::{SackBlocks, TcpOptions};

use nastriage_capture::Packet;

/// TCP flag bits (low byte of the flags field, plus NS as 0x100).
pub mod tcp_flags {
    pub const FIN: u16 = 0x01;
    pub const SYN: u16 = 0x02;
    pub const RST: u16 = 0x04;
    pub const PSH: u16 = 0x08;
    pub const ACK: u16 = 0x10;
    pub const URG: u16 = 0x20;
    pub const ECE: u16 = 0x40;
    pub const CWR: u16 = 0x80;
    pub const NS: u16 = 0x100;
}

/// The IP layer of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpInfo {
    pub version: u8,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// TTL (IPv4) or hop limit (IPv6).
    pub ttl: u8,
    /// IPv4 identification, or the IPv6 fragment identification (0 if none).
    pub id: u32,
    /// Transport protocol number.
    pub proto: u8,
    /// Length of the transport segment on the wire, from the IP header.
    pub payload_len: u32,
    pub dont_fragment: bool,
    /// The transport payload was reassembled from several fragments.
    pub reassembled: bool,
}

/// A TCP segment.
#[derive(Debug, Clone, Copy)]
pub struct TcpSegment<'a> {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    /// Flag bits, see [`tcp_flags`].
    pub flags: u16,
    /// Advertised window, unscaled.
    pub window: u16,
    pub header_len: u8,
    pub options: TcpOptions,
    /// Payload bytes on the wire (from IP lengths), even if not captured.
    pub payload_len: u32,
    /// The captured part of the payload (shorter than `payload_len` when the
    /// capture was snaplen-truncated).
    pub payload: &'a [u8],
}

impl TcpSegment<'_> {
    #[inline]
    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }
}

/// A UDP datagram.
#[derive(Debug, Clone, Copy)]
pub struct UdpDatagram<'a> {
    pub src_port: u16,
    pub dst_port: u16,
    /// Payload bytes on the wire (from the UDP length field).
    pub payload_len: u32,
    pub payload: &'a [u8],
}

#[derive(Debug, Clone, Copy)]
pub enum Transport<'a> {
    /// No transport layer (not IP, a fragment still being reassembled, or a
    /// truncated/malformed header).
    None,
    Tcp(TcpSegment<'a>),
    Udp(UdpDatagram<'a>),
    /// Another IP protocol (ICMP, GRE, ...), counted but not decoded.
    Other(u8),
}

/// Everything decoded from one frame.
#[derive(Debug, Clone, Copy)]
pub struct Decoded<'a> {
    pub ip: Option<IpInfo>,
    pub transport: Transport<'a>,
    /// 802.1Q/802.1ad tags crossed.
    pub vlan_depth: u8,
}

/// Stateful decoder: protocol counters and the fragment reassembler.
pub struct Decoder {
    counters: ProtoCounters,
    defrag: defrag::Defragmenter,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new(DefragLimits::default())
    }
}

impl Decoder {
    pub fn new(limits: DefragLimits) -> Self {
        Decoder {
            counters: ProtoCounters::default(),
            defrag: defrag::Defragmenter::new(limits),
        }
    }

    /// Decode one frame. Every protocol layer met is counted with the
    /// frame's wire length; the result borrows from the packet or, for a
    /// reassembled datagram, from the decoder.
    pub fn decode<'a>(&'a mut self, pkt: &Packet<'a>) -> Decoded<'a> {
        let wire = pkt.orig_len as u64;
        let mut out = Decoded {
            ip: None,
            transport: Transport::None,
            vlan_depth: 0,
        };
        let Some(net) = link::strip(
            pkt.linktype,
            pkt.data,
            wire,
            &mut self.counters,
            &mut out.vlan_depth,
        ) else {
            return out;
        };
        // `net.data` is a suffix of the frame: what precedes it is link
        // headers, which the wire length must also hold.
        let link_len = (pkt.data.len() - net.data.len()) as u64;
        let net = link::NetSlice {
            wire_avail: net.wire_avail.min(wire.saturating_sub(link_len)),
            ..net
        };
        ip::decode(
            net,
            pkt.ts_ns,
            wire,
            &mut self.counters,
            &mut self.defrag,
            &mut out,
        );
        out
    }

    pub fn counters(&self) -> &ProtoCounters {
        &self.counters
    }

    /// End of capture: fragmented datagrams still incomplete count as
    /// abandoned.
    pub fn finish(&mut self) {
        self.defrag.finish();
    }

    /// Fragment reassembly statistics: (datagrams reassembled, datagrams
    /// abandoned because of memory limits or timeouts).
    pub fn defrag_stats(&self) -> (u64, u64) {
        self.defrag.stats()
    }
}
