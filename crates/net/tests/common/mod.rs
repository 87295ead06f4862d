//! Frame builders (byte by byte, so that malformed and unusual layouts can be
//! made) and an owned view of what the decoder returns.
#![allow(dead_code)]

use nastriage_capture::Packet;
use nastriage_net::{Decoder, IpInfo, TcpOptions, Transport};

pub const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
pub const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];
pub const V4_A: [u8; 4] = [192, 168, 1, 10];
pub const V4_B: [u8; 4] = [10, 0, 0, 2];
pub const V6_A: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
pub const V6_B: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

pub fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&MAC_B);
    v.extend_from_slice(&MAC_A);
    v.extend_from_slice(&ethertype.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

/// Ethernet with stacked tags, outermost first: (TPID, VLAN id).
pub fn eth_tagged(tags: &[(u16, u16)], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&MAC_B);
    v.extend_from_slice(&MAC_A);
    for (tpid, vid) in tags {
        v.extend_from_slice(&tpid.to_be_bytes());
        v.extend_from_slice(&vid.to_be_bytes());
    }
    v.extend_from_slice(&ethertype.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

fn checksum(data: &[u8]) -> u16 {
    let mut sum = 0u32;
    for c in data.chunks(2) {
        let w = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            u16::from(c[0]) << 8
        };
        sum += u32::from(w);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// IPv4 header fields a test may set.
#[derive(Clone)]
pub struct V4 {
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub proto: u8,
    pub id: u16,
    pub df: bool,
    pub mf: bool,
    /// Fragment offset in bytes (a multiple of 8).
    pub frag_off: u16,
    pub ttl: u8,
    pub options: Vec<u8>,
    /// Total length field; computed when `None`.
    pub total_len: Option<u16>,
}

impl V4 {
    pub fn new(proto: u8) -> Self {
        V4 {
            src: V4_A,
            dst: V4_B,
            proto,
            id: 0x1234,
            df: false,
            mf: false,
            frag_off: 0,
            ttl: 64,
            options: Vec::new(),
            total_len: None,
        }
    }

    pub fn build(&self, payload: &[u8]) -> Vec<u8> {
        assert!(self.options.len().is_multiple_of(4));
        let hlen = 20 + self.options.len();
        let total = self.total_len.unwrap_or((hlen + payload.len()) as u16);
        let mut h = vec![0x40 | (hlen / 4) as u8, 0];
        h.extend_from_slice(&total.to_be_bytes());
        h.extend_from_slice(&self.id.to_be_bytes());
        let flags = (u16::from(self.df) << 14) | (u16::from(self.mf) << 13) | (self.frag_off / 8);
        h.extend_from_slice(&flags.to_be_bytes());
        h.push(self.ttl);
        h.push(self.proto);
        h.extend_from_slice(&[0, 0]);
        h.extend_from_slice(&self.src);
        h.extend_from_slice(&self.dst);
        h.extend_from_slice(&self.options);
        let c = checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h.extend_from_slice(payload);
        h
    }
}

pub fn ipv4(proto: u8, payload: &[u8]) -> Vec<u8> {
    V4::new(proto).build(payload)
}

/// IPv6 header + `rest` (extension headers and payload); `plen` overrides
/// the payload length field.
pub fn ipv6_raw(next: u8, rest: &[u8], plen: Option<u16>) -> Vec<u8> {
    let mut v = vec![0x60, 0, 0, 0];
    v.extend_from_slice(&plen.unwrap_or(rest.len() as u16).to_be_bytes());
    v.push(next);
    v.push(64);
    v.extend_from_slice(&V6_A);
    v.extend_from_slice(&V6_B);
    v.extend_from_slice(rest);
    v
}

pub fn ipv6(next: u8, rest: &[u8]) -> Vec<u8> {
    ipv6_raw(next, rest, None)
}

/// A hop-by-hop, destination-options or routing header (padded with PadN
/// to a multiple of 8 bytes).
pub fn ext(next: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![next, 0];
    v.extend_from_slice(body);
    let padded = v.len().next_multiple_of(8);
    let pad = padded - v.len();
    if pad == 1 {
        v.push(0); // Pad1
    } else if pad >= 2 {
        v.push(1); // PadN
        v.push((pad - 2) as u8);
        v.resize(padded, 0);
    }
    v[1] = (v.len() / 8 - 1) as u8;
    v
}

/// A routing header (type 0 style, segments left 0) with one address.
pub fn routing(next: u8) -> Vec<u8> {
    let mut v = vec![next, 2, 0, 0, 0, 0, 0, 0];
    v.extend_from_slice(&V6_B);
    v
}

/// IPv6 fragment header: offset in bytes.
pub fn frag6(next: u8, offset: u16, more: bool, id: u32) -> Vec<u8> {
    let mut v = vec![next, 0];
    v.extend_from_slice(&(offset | u16::from(more)).to_be_bytes());
    v.extend_from_slice(&id.to_be_bytes());
    v
}

pub struct Tcp {
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    /// Low 9 bits: NS..FIN.
    pub flags: u16,
    pub window: u16,
    /// Raw option bytes; padded with zeros (EOL) to 4 bytes.
    pub options: Vec<u8>,
}

impl Tcp {
    pub fn new(sport: u16, dport: u16) -> Self {
        Tcp {
            sport,
            dport,
            seq: 1000,
            ack: 2000,
            flags: 0x18,
            window: 512,
            options: Vec::new(),
        }
    }

    pub fn build(&self, payload: &[u8]) -> Vec<u8> {
        let mut opts = self.options.clone();
        opts.resize(opts.len().next_multiple_of(4), 0);
        let hlen = 20 + opts.len();
        let mut v = Vec::new();
        v.extend_from_slice(&self.sport.to_be_bytes());
        v.extend_from_slice(&self.dport.to_be_bytes());
        v.extend_from_slice(&self.seq.to_be_bytes());
        v.extend_from_slice(&self.ack.to_be_bytes());
        v.push(((hlen / 4) as u8) << 4 | (self.flags >> 8) as u8 & 1);
        v.push(self.flags as u8);
        v.extend_from_slice(&self.window.to_be_bytes());
        v.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
        v.extend_from_slice(&opts);
        v.extend_from_slice(payload);
        v
    }
}

pub fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    udp_len(sport, dport, payload, (8 + payload.len()) as u16)
}

pub fn udp_len(sport: u16, dport: u16, payload: &[u8], len: u16) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&sport.to_be_bytes());
    v.extend_from_slice(&dport.to_be_bytes());
    v.extend_from_slice(&len.to_be_bytes());
    v.extend_from_slice(&[0, 0]);
    v.extend_from_slice(payload);
    v
}

pub fn bytes(seed: u8, n: usize) -> Vec<u8> {
    (0..n).map(|i| seed.wrapping_add((i * 13) as u8)).collect()
}

// ----------------------------------------------------------- decoding

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedTcp {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u16,
    pub window: u16,
    pub header_len: u8,
    pub options: TcpOptions,
    pub payload_len: u32,
    pub payload: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tp {
    None,
    Tcp(OwnedTcp),
    Udp {
        src_port: u16,
        dst_port: u16,
        payload_len: u32,
        payload: Vec<u8>,
    },
    Other(u8),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Out {
    pub ip: Option<IpInfo>,
    pub tp: Tp,
    pub vlan_depth: u8,
}

impl Out {
    pub fn tcp(&self) -> &OwnedTcp {
        match &self.tp {
            Tp::Tcp(t) => t,
            other => panic!("not TCP: {other:?}"),
        }
    }

    pub fn udp_payload(&self) -> (u16, u16, u32, &[u8]) {
        match &self.tp {
            Tp::Udp {
                src_port,
                dst_port,
                payload_len,
                payload,
            } => (*src_port, *dst_port, *payload_len, payload),
            other => panic!("not UDP: {other:?}"),
        }
    }
}

/// Decode one frame captured whole.
pub fn decode(d: &mut Decoder, linktype: u32, frame: &[u8]) -> Out {
    decode_at(d, linktype, frame, frame.len() as u32, 0)
}

/// Decode one frame with an explicit wire length and timestamp.
pub fn decode_at(d: &mut Decoder, linktype: u32, frame: &[u8], orig_len: u32, ts_ns: i64) -> Out {
    let pkt = Packet {
        ts_ns,
        linktype,
        interface: 0,
        orig_len,
        data: frame,
        offset: 0,
    };
    let r = d.decode(&pkt);
    let tp = match r.transport {
        Transport::None => Tp::None,
        Transport::Tcp(t) => Tp::Tcp(OwnedTcp {
            src_port: t.src_port,
            dst_port: t.dst_port,
            seq: t.seq,
            ack: t.ack,
            flags: t.flags,
            window: t.window,
            header_len: t.header_len,
            options: t.options,
            payload_len: t.payload_len,
            payload: t.payload.to_vec(),
        }),
        Transport::Udp(u) => Tp::Udp {
            src_port: u.src_port,
            dst_port: u.dst_port,
            payload_len: u.payload_len,
            payload: u.payload.to_vec(),
        },
        Transport::Other(p) => Tp::Other(p),
    };
    Out {
        ip: r.ip,
        tp,
        vlan_depth: r.vlan_depth,
    }
}

/// (frames, bytes) of a protocol in the summary, by name; (0, 0) if absent.
pub fn count(d: &Decoder, name: &str) -> (u64, u64) {
    d.counters()
        .summary()
        .into_iter()
        .find(|(n, _, _)| n == name)
        .map(|(_, f, b)| (f, b))
        .unwrap_or((0, 0))
}

/// Deterministic xorshift64* generator.
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}
