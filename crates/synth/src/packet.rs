//! Packet builder: link, network and transport headers with correct
//! lengths and checksums.
//!
//! Everything the decoder must handle in the field is produced here from
//! first principles so that tests can exercise it without shipping third-party
//! captures: Ethernet II with stacked 802.1Q/802.1ad tags, Linux cooked
//! captures (SLL and SLL2), BSD loopback (NULL) and raw IP; IPv4 (with header
//! checksum, TTL, IP ID, DF, and fragmentation) and IPv6; TCP with the options
//! real stacks send (MSS, window scale, SACK-permitted, SACK blocks,
//! timestamps) and UDP, both with pseudo-header checksums; ICMP echo and ARP.
//!
//! Scenarios work at the network layer ([`NetPacket`]: an IP or ARP packet
//! plus the addresses a link layer needs) and a [`LinkConfig`] renders them
//! into frames at the end, so every scenario can be written with every link
//! type.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use nastriage_capture::linktype;

/// An Ethernet MAC address.
pub type Mac = [u8; 6];

/// The Ethernet broadcast address.
pub const BROADCAST: Mac = [0xff; 6];

/// EtherType values used here.
pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const VLAN: u16 = 0x8100;
    pub const QINQ: u16 = 0x88A8;
    pub const IPV6: u16 = 0x86DD;
}

/// IP protocol numbers used here.
pub mod ipproto {
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ICMPV6: u8 = 58;
}

/// TCP header flag bits.
pub mod tcp_flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;
}

// ---------------------------------------------------------------------------
// Checksums

/// Sum of big-endian 16-bit words, an odd trailing byte padded with zero.
fn sum16(data: &[u8]) -> u64 {
    let mut acc = 0u64;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u16::from_be_bytes([c[0], c[1]]) as u64;
    }
    if let [b] = chunks.remainder() {
        acc += (*b as u64) << 8;
    }
    acc
}

fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// The Internet checksum (RFC 1071) over the concatenation of `parts`.
/// Every part but the last must have an even length.
pub fn internet_checksum(parts: &[&[u8]]) -> u16 {
    let mut acc = 0u64;
    for (i, p) in parts.iter().enumerate() {
        debug_assert!(
            i + 1 == parts.len() || p.len() % 2 == 0,
            "odd-length checksum part"
        );
        acc += sum16(p);
    }
    fold(acc)
}

/// The TCP/UDP pseudo-header for `src`/`dst` (same family), protocol and
/// upper-layer length.
pub fn pseudo_header(src: IpAddr, dst: IpAddr, protocol: u8, len: usize) -> Vec<u8> {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut v = Vec::with_capacity(12);
            v.extend_from_slice(&s.octets());
            v.extend_from_slice(&d.octets());
            v.push(0);
            v.push(protocol);
            v.extend_from_slice(&(len as u16).to_be_bytes());
            v
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut v = Vec::with_capacity(40);
            v.extend_from_slice(&s.octets());
            v.extend_from_slice(&d.octets());
            v.extend_from_slice(&(len as u32).to_be_bytes());
            v.extend_from_slice(&[0, 0, 0, protocol]);
            v
        }
        _ => panic!("pseudo_header: mixed address families {src} / {dst}"),
    }
}

// ---------------------------------------------------------------------------
// Network layer

/// Fields of an IPv4 header that callers choose.
#[derive(Debug, Clone)]
pub struct Ipv4Header {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub protocol: u8,
    pub ttl: u8,
    pub id: u16,
    pub dont_fragment: bool,
    /// DSCP and ECN bits (the old TOS byte).
    pub tos: u8,
}

impl Ipv4Header {
    pub fn new(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8) -> Self {
        Ipv4Header {
            src,
            dst,
            protocol,
            ttl: 64,
            id: 0,
            dont_fragment: false,
            tos: 0,
        }
    }
}

fn ipv4_raw(h: &Ipv4Header, more_fragments: bool, offset_bytes: usize, payload: &[u8]) -> Vec<u8> {
    let total = 20 + payload.len();
    assert!(
        total <= 65535,
        "IPv4 packet of {total} bytes exceeds the 65535-byte limit"
    );
    assert!(
        offset_bytes & 7 == 0 && offset_bytes / 8 < 8192,
        "bad fragment offset {offset_bytes}"
    );
    let mut flags_frag = (offset_bytes / 8) as u16;
    if h.dont_fragment {
        flags_frag |= 0x4000;
    }
    if more_fragments {
        flags_frag |= 0x2000;
    }
    let mut v = Vec::with_capacity(total);
    v.push(0x45);
    v.push(h.tos);
    v.extend_from_slice(&(total as u16).to_be_bytes());
    v.extend_from_slice(&h.id.to_be_bytes());
    v.extend_from_slice(&flags_frag.to_be_bytes());
    v.push(h.ttl);
    v.push(h.protocol);
    v.extend_from_slice(&[0, 0]);
    v.extend_from_slice(&h.src.octets());
    v.extend_from_slice(&h.dst.octets());
    let c = internet_checksum(&[&v[..20]]);
    v[10..12].copy_from_slice(&c.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

/// One unfragmented IPv4 packet (20-byte header, no options) around `payload`.
pub fn ipv4(h: &Ipv4Header, payload: &[u8]) -> Vec<u8> {
    ipv4_raw(h, false, 0, payload)
}

/// Split an IPv4 datagram into fragments carrying at most
/// `max_fragment_payload` bytes each (rounded down to a multiple of 8, as
/// fragment offsets are in 8-byte units). `payload` is the whole upper-layer
/// datagram (e.g. UDP header and data, checksummed as a whole). DF is cleared.
pub fn ipv4_fragments(h: &Ipv4Header, payload: &[u8], max_fragment_payload: usize) -> Vec<Vec<u8>> {
    let step = max_fragment_payload / 8 * 8;
    assert!(step > 0, "fragment payload size must be at least 8 bytes");
    let h = Ipv4Header {
        dont_fragment: false,
        ..h.clone()
    };
    if payload.len() <= step {
        return vec![ipv4(&h, payload)];
    }
    let mut out = Vec::new();
    let mut off = 0;
    while off < payload.len() {
        let end = (off + step).min(payload.len());
        out.push(ipv4_raw(&h, end < payload.len(), off, &payload[off..end]));
        off = end;
    }
    out
}

/// Fields of an IPv6 header that callers choose.
#[derive(Debug, Clone)]
pub struct Ipv6Header {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub next_header: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    /// 20-bit flow label.
    pub flow_label: u32,
}

impl Ipv6Header {
    pub fn new(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8) -> Self {
        Ipv6Header {
            src,
            dst,
            next_header,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
        }
    }
}

/// One IPv6 packet (fixed header, no extension headers) around `payload`.
pub fn ipv6(h: &Ipv6Header, payload: &[u8]) -> Vec<u8> {
    assert!(
        payload.len() <= 65535,
        "IPv6 payload of {} bytes needs a jumbogram",
        payload.len()
    );
    let mut v = Vec::with_capacity(40 + payload.len());
    let word = (6u32 << 28) | ((h.traffic_class as u32) << 20) | (h.flow_label & 0xF_FFFF);
    v.extend_from_slice(&word.to_be_bytes());
    v.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    v.push(h.next_header);
    v.push(h.hop_limit);
    v.extend_from_slice(&h.src.octets());
    v.extend_from_slice(&h.dst.octets());
    v.extend_from_slice(payload);
    v
}

/// An IP packet of either family; returns the EtherType and the bytes.
/// `id` and `dont_fragment` only apply to IPv4; `ttl` is the hop limit for
/// IPv6.
pub fn ip_packet(
    src: IpAddr,
    dst: IpAddr,
    protocol: u8,
    ttl: u8,
    id: u16,
    dont_fragment: bool,
    payload: &[u8],
) -> (u16, Vec<u8>) {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let h = Ipv4Header {
                ttl,
                id,
                dont_fragment,
                ..Ipv4Header::new(s, d, protocol)
            };
            (ethertype::IPV4, ipv4(&h, payload))
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let h = Ipv6Header {
                hop_limit: ttl,
                ..Ipv6Header::new(s, d, protocol)
            };
            (ethertype::IPV6, ipv6(&h, payload))
        }
        _ => panic!("ip_packet: mixed address families {src} / {dst}"),
    }
}

// ---------------------------------------------------------------------------
// Transport layer

/// A TCP option. Encoding follows RFC 9293 / RFC 7323 / RFC 2018.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TcpOption {
    Eol,
    Nop,
    Mss(u16),
    WindowScale(u8),
    SackPermitted,
    /// SACK blocks as (left edge, right edge) sequence numbers; at most 4.
    Sack(Vec<(u32, u32)>),
    Timestamps {
        val: u32,
        ecr: u32,
    },
}

impl TcpOption {
    /// Encoded length in bytes.
    pub fn len(&self) -> usize {
        match self {
            TcpOption::Eol | TcpOption::Nop => 1,
            TcpOption::Mss(_) => 4,
            TcpOption::WindowScale(_) => 3,
            TcpOption::SackPermitted => 2,
            TcpOption::Sack(b) => 2 + 8 * b.len(),
            TcpOption::Timestamps { .. } => 10,
        }
    }

    /// Always false: every option takes at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            TcpOption::Eol => out.push(0),
            TcpOption::Nop => out.push(1),
            TcpOption::Mss(m) => {
                out.extend_from_slice(&[2, 4]);
                out.extend_from_slice(&m.to_be_bytes());
            }
            TcpOption::WindowScale(s) => out.extend_from_slice(&[3, 3, *s]),
            TcpOption::SackPermitted => out.extend_from_slice(&[4, 2]),
            TcpOption::Sack(blocks) => {
                assert!(
                    !blocks.is_empty() && blocks.len() <= 4,
                    "SACK option needs 1..=4 blocks"
                );
                out.push(5);
                out.push((2 + 8 * blocks.len()) as u8);
                for (l, r) in blocks {
                    out.extend_from_slice(&l.to_be_bytes());
                    out.extend_from_slice(&r.to_be_bytes());
                }
            }
            TcpOption::Timestamps { val, ecr } => {
                out.extend_from_slice(&[8, 10]);
                out.extend_from_slice(&val.to_be_bytes());
                out.extend_from_slice(&ecr.to_be_bytes());
            }
        }
    }
}

/// Encode options in the given order, padded with EOL to a multiple of 4.
/// Panics beyond the 40-byte limit.
pub fn encode_tcp_options(opts: &[TcpOption]) -> Vec<u8> {
    let mut v = Vec::with_capacity(40);
    for o in opts {
        o.encode(&mut v);
    }
    while v.len() % 4 != 0 {
        v.push(0);
    }
    assert!(
        v.len() <= 40,
        "TCP options take {} bytes, more than 40",
        v.len()
    );
    v
}

/// Fields of a TCP header.
#[derive(Debug, Clone, Default)]
pub struct TcpHeader {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    /// See [`tcp_flags`].
    pub flags: u8,
    pub window: u16,
    pub urgent: u16,
    pub options: Vec<TcpOption>,
}

/// A TCP segment (header, options, payload) with its checksum computed over
/// the pseudo-header for `src`/`dst`.
pub fn tcp(src: IpAddr, dst: IpAddr, h: &TcpHeader, payload: &[u8]) -> Vec<u8> {
    let opts = encode_tcp_options(&h.options);
    let hlen = 20 + opts.len();
    let mut v = Vec::with_capacity(hlen + payload.len());
    v.extend_from_slice(&h.src_port.to_be_bytes());
    v.extend_from_slice(&h.dst_port.to_be_bytes());
    v.extend_from_slice(&h.seq.to_be_bytes());
    v.extend_from_slice(&h.ack.to_be_bytes());
    v.push(((hlen / 4) as u8) << 4);
    v.push(h.flags);
    v.extend_from_slice(&h.window.to_be_bytes());
    v.extend_from_slice(&[0, 0]);
    v.extend_from_slice(&h.urgent.to_be_bytes());
    v.extend_from_slice(&opts);
    v.extend_from_slice(payload);
    let ph = pseudo_header(src, dst, ipproto::TCP, v.len());
    let c = internet_checksum(&[&ph, &v]);
    v[16..18].copy_from_slice(&c.to_be_bytes());
    v
}

/// A UDP datagram with its checksum (0 is sent as 0xFFFF, as RFC 768 says).
pub fn udp(src: IpAddr, dst: IpAddr, src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
    let len = 8 + payload.len();
    assert!(len <= 65535, "UDP datagram of {len} bytes is too long");
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&src_port.to_be_bytes());
    v.extend_from_slice(&dst_port.to_be_bytes());
    v.extend_from_slice(&(len as u16).to_be_bytes());
    v.extend_from_slice(&[0, 0]);
    v.extend_from_slice(payload);
    let ph = pseudo_header(src, dst, ipproto::UDP, len);
    let mut c = internet_checksum(&[&ph, &v]);
    if c == 0 {
        c = 0xffff;
    }
    v[6..8].copy_from_slice(&c.to_be_bytes());
    v
}

/// An ICMPv4 echo request (`request`) or reply.
pub fn icmpv4_echo(request: bool, id: u16, seq: u16, data: &[u8]) -> Vec<u8> {
    let mut v = vec![if request { 8 } else { 0 }, 0, 0, 0];
    v.extend_from_slice(&id.to_be_bytes());
    v.extend_from_slice(&seq.to_be_bytes());
    v.extend_from_slice(data);
    let c = internet_checksum(&[&v]);
    v[2..4].copy_from_slice(&c.to_be_bytes());
    v
}

/// An ICMPv6 echo request or reply (checksum over the IPv6 pseudo-header).
pub fn icmpv6_echo(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    request: bool,
    id: u16,
    seq: u16,
    data: &[u8],
) -> Vec<u8> {
    let mut v = vec![if request { 128 } else { 129 }, 0, 0, 0];
    v.extend_from_slice(&id.to_be_bytes());
    v.extend_from_slice(&seq.to_be_bytes());
    v.extend_from_slice(data);
    let ph = pseudo_header(IpAddr::V6(src), IpAddr::V6(dst), ipproto::ICMPV6, v.len());
    let c = internet_checksum(&[&ph, &v]);
    v[2..4].copy_from_slice(&c.to_be_bytes());
    v
}

/// An ARP packet for IPv4 over Ethernet (`op` 1 = request, 2 = reply).
pub fn arp(
    op: u16,
    sender_mac: Mac,
    sender_ip: Ipv4Addr,
    target_mac: Mac,
    target_ip: Ipv4Addr,
) -> Vec<u8> {
    let mut v = Vec::with_capacity(28);
    v.extend_from_slice(&1u16.to_be_bytes()); // hardware: Ethernet
    v.extend_from_slice(&ethertype::IPV4.to_be_bytes());
    v.push(6);
    v.push(4);
    v.extend_from_slice(&op.to_be_bytes());
    v.extend_from_slice(&sender_mac);
    v.extend_from_slice(&sender_ip.octets());
    v.extend_from_slice(&target_mac);
    v.extend_from_slice(&target_ip.octets());
    v
}

// ---------------------------------------------------------------------------
// Link layer

/// A network-layer packet plus what a link layer needs to frame it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetPacket {
    /// Capture time, nanoseconds since the Unix epoch.
    pub ts_ns: i64,
    pub src_mac: Mac,
    pub dst_mac: Mac,
    /// Sent by the capturing host (Linux cooked captures record this).
    pub outgoing: bool,
    /// EtherType of `data` (IPv4, IPv6 or ARP).
    pub ethertype: u16,
    /// The IP (or ARP) packet.
    pub data: Vec<u8>,
}

/// The link layers synthetic captures can be written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    Ethernet,
    /// Linux cooked capture v1 (16-byte header).
    Sll,
    /// Linux cooked capture v2 (20-byte header).
    Sll2,
    /// BSD loopback: 4-byte address family in host (here little-endian) order.
    Null,
    /// Raw IP, no link header.
    Raw,
}

impl LinkKind {
    pub const ALL: [LinkKind; 5] = [
        LinkKind::Ethernet,
        LinkKind::Sll,
        LinkKind::Sll2,
        LinkKind::Null,
        LinkKind::Raw,
    ];

    /// The LINKTYPE_* value written to the capture header.
    pub fn linktype(self) -> u32 {
        match self {
            LinkKind::Ethernet => linktype::ETHERNET,
            LinkKind::Sll => linktype::LINUX_SLL,
            LinkKind::Sll2 => linktype::LINUX_SLL2,
            LinkKind::Null => linktype::NULL,
            LinkKind::Raw => linktype::RAW,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            LinkKind::Ethernet => "ethernet",
            LinkKind::Sll => "sll",
            LinkKind::Sll2 => "sll2",
            LinkKind::Null => "null",
            LinkKind::Raw => "raw",
        }
    }

    pub fn parse(s: &str) -> Option<LinkKind> {
        LinkKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Whether frames carry an EtherType (and so VLAN tags and ARP).
    pub fn has_ethertype(self) -> bool {
        matches!(self, LinkKind::Ethernet | LinkKind::Sll | LinkKind::Sll2)
    }
}

/// How to render [`NetPacket`]s into frames.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    pub kind: LinkKind,
    /// VLAN IDs, outermost first. With several tags the outer ones are
    /// 802.1ad S-tags (0x88A8) and the innermost an 802.1Q C-tag (0x8100).
    pub vlans: Vec<u16>,
    /// Address family written for IPv6 on [`LinkKind::Null`]: 24 (NetBSD,
    /// OpenBSD), 28 (FreeBSD) or 30 (macOS).
    pub null_af_inet6: u32,
    /// Interface index recorded in SLL2 headers.
    pub sll2_ifindex: u32,
    /// Pad received Ethernet frames to the 60-byte minimum, as a NIC
    /// delivers them (outgoing frames are captured before padding).
    pub pad_ethernet: bool,
}

impl LinkConfig {
    pub fn new(kind: LinkKind) -> Self {
        LinkConfig {
            kind,
            vlans: Vec::new(),
            null_af_inet6: 24,
            sll2_ifindex: 2,
            pad_ethernet: true,
        }
    }

    pub fn ethernet() -> Self {
        LinkConfig::new(LinkKind::Ethernet)
    }

    pub fn with_vlans(mut self, vlans: &[u16]) -> Self {
        self.vlans = vlans.to_vec();
        self
    }

    /// Check the combination is representable.
    pub fn validate(&self) -> Result<(), String> {
        if !self.vlans.is_empty() && !self.kind.has_ethertype() {
            return Err(format!(
                "VLAN tags need an EtherType-based link type, not {}",
                self.kind.name()
            ));
        }
        if let Some(v) = self.vlans.iter().find(|v| **v > 4095) {
            return Err(format!("VLAN ID {v} is out of range 0..=4095"));
        }
        Ok(())
    }

    /// The LINKTYPE_* value.
    pub fn linktype(&self) -> u32 {
        self.kind.linktype()
    }

    /// The tag stack followed by the EtherType: `TPID VID ... TPID VID type`.
    fn push_tags_and_type(&self, out: &mut Vec<u8>, ethertype: u16) {
        let n = self.vlans.len();
        for (i, vid) in self.vlans.iter().enumerate() {
            let tpid = if i + 1 == n {
                ethertype::VLAN
            } else {
                ethertype::QINQ
            };
            out.extend_from_slice(&tpid.to_be_bytes());
            out.extend_from_slice(&(vid & 0x0fff).to_be_bytes());
        }
        out.extend_from_slice(&ethertype.to_be_bytes());
    }

    /// The frame for `p`, or `None` when this link type cannot carry it
    /// (ARP on NULL or raw IP).
    pub fn frame(&self, p: &NetPacket) -> Option<Vec<u8>> {
        let is_ip = p.ethertype == ethertype::IPV4 || p.ethertype == ethertype::IPV6;
        match self.kind {
            LinkKind::Ethernet => {
                let mut v = Vec::with_capacity(14 + 4 * self.vlans.len() + p.data.len());
                v.extend_from_slice(&p.dst_mac);
                v.extend_from_slice(&p.src_mac);
                self.push_tags_and_type(&mut v, p.ethertype);
                v.extend_from_slice(&p.data);
                if self.pad_ethernet && !p.outgoing && v.len() < 60 {
                    v.resize(60, 0);
                }
                Some(v)
            }
            LinkKind::Sll => {
                let mut v = Vec::with_capacity(16 + 4 * self.vlans.len() + p.data.len());
                v.extend_from_slice(&sll_packet_type(p).to_be_bytes());
                v.extend_from_slice(&1u16.to_be_bytes()); // ARPHRD_ETHER
                v.extend_from_slice(&6u16.to_be_bytes());
                v.extend_from_slice(&p.src_mac);
                v.extend_from_slice(&[0, 0]);
                self.push_tags_and_type(&mut v, p.ethertype);
                v.extend_from_slice(&p.data);
                Some(v)
            }
            LinkKind::Sll2 => {
                let mut v = Vec::with_capacity(20 + 4 * self.vlans.len() + p.data.len());
                let mut proto = Vec::with_capacity(2 + 4 * self.vlans.len());
                self.push_tags_and_type(&mut proto, p.ethertype);
                v.extend_from_slice(&proto[..2]);
                v.extend_from_slice(&[0, 0]);
                v.extend_from_slice(&self.sll2_ifindex.to_be_bytes());
                v.extend_from_slice(&1u16.to_be_bytes());
                v.push(sll_packet_type(p) as u8);
                v.push(6);
                v.extend_from_slice(&p.src_mac);
                v.extend_from_slice(&[0, 0]);
                v.extend_from_slice(&proto[2..]);
                v.extend_from_slice(&p.data);
                Some(v)
            }
            LinkKind::Null => {
                if !is_ip {
                    return None;
                }
                let af = if p.ethertype == ethertype::IPV4 {
                    2
                } else {
                    self.null_af_inet6
                };
                let mut v = Vec::with_capacity(4 + p.data.len());
                v.extend_from_slice(&af.to_le_bytes());
                v.extend_from_slice(&p.data);
                Some(v)
            }
            LinkKind::Raw => is_ip.then(|| p.data.clone()),
        }
    }
}

/// Linux PACKET_* type: 0 to us, 1 broadcast, 4 outgoing.
fn sll_packet_type(p: &NetPacket) -> u16 {
    if p.outgoing {
        4
    } else if p.dst_mac == BROADCAST {
        1
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_checksum_known_vector() {
        // Header from RFC 1071 style example (wikipedia IPv4 checksum example).
        let hdr = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(internet_checksum(&[&hdr]), 0xb861);
    }

    #[test]
    fn options_are_padded() {
        let o = encode_tcp_options(&[TcpOption::Mss(1460), TcpOption::WindowScale(7)]);
        assert_eq!(o, vec![2, 4, 0x05, 0xb4, 3, 3, 7, 0]);
    }

    #[test]
    fn fragments_cover_payload() {
        let h = Ipv4Header::new(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            ipproto::UDP,
        );
        let payload: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        let frags = ipv4_fragments(&h, &payload, 1480);
        assert_eq!(frags.len(), 3);
        let mut joined = Vec::new();
        for (i, f) in frags.iter().enumerate() {
            let ff = u16::from_be_bytes([f[6], f[7]]);
            assert_eq!((ff & 0x1fff) as usize * 8, joined.len());
            assert_eq!(ff & 0x2000 != 0, i + 1 < frags.len());
            assert_eq!(internet_checksum(&[&f[..20]]), 0);
            joined.extend_from_slice(&f[20..]);
        }
        assert_eq!(joined, payload);
    }

    #[test]
    fn vlan_stack_layout() {
        let p = NetPacket {
            ts_ns: 0,
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            outgoing: true,
            ethertype: ethertype::IPV4,
            data: vec![0x45; 20],
        };
        let f = LinkConfig::ethernet()
            .with_vlans(&[100, 200, 300])
            .frame(&p)
            .unwrap();
        assert_eq!(&f[12..14], &[0x88, 0xa8]);
        assert_eq!(&f[14..16], &100u16.to_be_bytes());
        assert_eq!(&f[16..18], &[0x88, 0xa8]);
        assert_eq!(&f[18..20], &200u16.to_be_bytes());
        assert_eq!(&f[20..22], &[0x81, 0x00]);
        assert_eq!(&f[22..24], &300u16.to_be_bytes());
        assert_eq!(&f[24..26], &[0x08, 0x00]);
        let f = LinkConfig::new(LinkKind::Sll2)
            .with_vlans(&[7])
            .frame(&p)
            .unwrap();
        assert_eq!(&f[0..2], &[0x81, 0x00]);
        assert_eq!(&f[20..22], &7u16.to_be_bytes());
        assert_eq!(&f[22..24], &[0x08, 0x00]);
        assert_eq!(f.len(), 20 + 4 + 20);
    }
}
