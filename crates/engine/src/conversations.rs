//! TCP conversations numbered exactly like Wireshark's `tcp.stream`.
//!
//! Wireshark (packet-tcp.c) gives every new address/port 4-tuple the next
//! stream index when it first appears, in frame order. A bare SYN (no ACK)
//! whose sequence number differs from the first sequence number seen in its
//! direction starts a *new* conversation on the same 4-tuple (port reuse);
//! a SYN with the same sequence number is a retransmission of the old one.
//! We apply the same rule in the same single pass, so stream numbers match.
//!
//! Client and server: the sender of a bare SYN is the client; failing that,
//! the receiver of a SYN/ACK; failing that (handshake not captured), the side
//! using a well-known service port (NFS, SMB, RPC, ... see [`SERVICE_PORTS`])
//! is the server; failing that, the lower port; and when the ports are equal,
//! the sender of the first frame is the client. The rule applied is kept per
//! conversation (`client_rule`).

use std::net::IpAddr;

use nastriage_net::{tcp_flags, IpInfo, TcpSegment};

/// Ports whose owner is taken to be the server when no handshake was seen.
pub const SERVICE_PORTS: &[u16] = &[
    2049, 445, 139, 111, 635, 892, 4045, 20048, 32803, 662, 875, 21, 22, 23, 25, 53, 80, 88, 110,
    143, 389, 443, 636, 993, 995, 1433, 3260, 3306, 5432, 8080,
];

pub type Endpoint = (IpAddr, u16);

/// Statistics of one conversation. Direction 0 is from `a` (the source of
/// the first frame) to `b`.
#[derive(Debug, Clone)]
pub struct Conversation {
    pub stream: u32,
    pub a: Endpoint,
    pub b: Endpoint,
    pub first_frame: u64,
    pub last_frame: u64,
    pub first_ts: i64,
    pub last_ts: i64,
    pub frames: [u64; 2],
    pub bytes: [u64; 2],
    pub payload: [u64; 2],
    /// Direction that sent the first bare SYN / first SYN+ACK, if any.
    pub syn_dir: Option<u8>,
    pub synack_dir: Option<u8>,
    pub fin: bool,
    pub rst: bool,
    /// First sequence number seen per direction (SYN's ISN, else seq - 1).
    base_seq: [Option<u32>; 2],
}

/// How the client side was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientRule {
    Syn,
    SynAck,
    Port,
    FirstSeen,
}

impl ClientRule {
    pub fn name(self) -> &'static str {
        match self {
            ClientRule::Syn => "syn",
            ClientRule::SynAck => "syn-ack",
            ClientRule::Port => "port",
            ClientRule::FirstSeen => "first-seen",
        }
    }
}

impl Conversation {
    /// Which direction is client → server, and why.
    pub fn client_direction(&self) -> (u8, ClientRule) {
        if let Some(d) = self.syn_dir {
            return (d, ClientRule::Syn);
        }
        if let Some(d) = self.synack_dir {
            return (1 - d, ClientRule::SynAck);
        }
        let a_svc = SERVICE_PORTS.contains(&self.a.1);
        let b_svc = SERVICE_PORTS.contains(&self.b.1);
        if a_svc != b_svc {
            // The service side is the server: if a serves, data a→b is s→c.
            return (if a_svc { 1 } else { 0 }, ClientRule::Port);
        }
        if self.a.1 != self.b.1 {
            return (if self.a.1 < self.b.1 { 1 } else { 0 }, ClientRule::Port);
        }
        (0, ClientRule::FirstSeen)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct FlowKey {
    lo: Endpoint,
    hi: Endpoint,
}

/// Hashed as a few whole words (an IPv4 endpoint is one) rather than field
/// by field, as the derived hash does (the enum's tag, the address's length
/// and bytes, the port): the key is hashed once a frame.
impl std::hash::Hash for FlowKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        for (ip, port) in [self.lo, self.hi] {
            match ip {
                IpAddr::V4(a) => h.write_u64(u64::from(a.to_bits()) << 16 | u64::from(port)),
                IpAddr::V6(a) => {
                    h.write_u128(a.to_bits());
                    h.write_u64(1 << 32 | u64::from(port));
                }
            }
        }
    }
}

fn key(src: Endpoint, dst: Endpoint) -> FlowKey {
    if src <= dst {
        FlowKey { lo: src, hi: dst }
    } else {
        FlowKey { lo: dst, hi: src }
    }
}

/// Assigns frames to conversations.
#[derive(Default)]
pub struct ConversationTable {
    by_key: foldhash::HashMap<FlowKey, u32>,
    convs: Vec<Conversation>,
    /// The last frame's conversation: most frames follow one of the same
    /// (a copy, a request and its reply), which then skip ordering and
    /// hashing the key.
    last: Option<u32>,
}

/// Where a frame went: stream index and direction (0 = a→b).
#[derive(Debug, Clone, Copy)]
pub struct Assignment {
    pub stream: u32,
    pub dir: u8,
    /// This SYN opened a new conversation on a 4-tuple already used.
    pub reused_ports: bool,
    /// The conversation that this one replaced on its 4-tuple (port reuse).
    pub replaced: Option<u32>,
}

impl ConversationTable {
    pub fn update(
        &mut self,
        frame: u64,
        ts: i64,
        wire_len: u64,
        ip: &IpInfo,
        tcp: &TcpSegment<'_>,
    ) -> Assignment {
        let src = (ip.src, tcp.src_port);
        let dst = (ip.dst, tcp.dst_port);
        let bare_syn = tcp.flags & (tcp_flags::SYN | tcp_flags::ACK) == tcp_flags::SYN;
        let mut replaced = None;
        // (A bare SYN takes the full way: it may open a new conversation on
        // the same 4-tuple.)
        let same = self.last.filter(|&i| {
            !bare_syn
                && self
                    .convs
                    .get(i as usize)
                    .is_some_and(|c| (c.a == src && c.b == dst) || (c.a == dst && c.b == src))
        });
        let known = match same {
            Some(i) => Some(i),
            None => self.by_key.get(&key(src, dst)).copied(),
        };
        let idx = match known {
            Some(i) => {
                let c = &self.convs[i as usize];
                let dir = if c.a == src { 0 } else { 1 };
                if bare_syn && c.base_seq[dir].is_some_and(|b| b != tcp.seq) {
                    replaced = Some(i);
                    self.open(key(src, dst), src, dst, frame, ts)
                } else {
                    i
                }
            }
            None => self.open(key(src, dst), src, dst, frame, ts),
        };
        self.last = Some(idx);
        let c = &mut self.convs[idx as usize];
        let dir: u8 = if c.a == src { 0 } else { 1 };
        let d = dir as usize;
        if c.base_seq[d].is_none() {
            c.base_seq[d] = Some(if tcp.has(tcp_flags::SYN) {
                tcp.seq
            } else {
                tcp.seq.wrapping_sub(1)
            });
        }
        c.last_frame = frame;
        if ts > c.last_ts {
            c.last_ts = ts;
        }
        if ts < c.first_ts {
            c.first_ts = ts;
        }
        c.frames[d] += 1;
        c.bytes[d] += wire_len;
        c.payload[d] += tcp.payload_len as u64;
        if tcp.has(tcp_flags::SYN) {
            if tcp.has(tcp_flags::ACK) {
                c.synack_dir.get_or_insert(dir);
            } else {
                c.syn_dir.get_or_insert(dir);
            }
        }
        c.fin |= tcp.has(tcp_flags::FIN);
        c.rst |= tcp.has(tcp_flags::RST);
        Assignment {
            stream: c.stream,
            dir,
            reused_ports: replaced.is_some(),
            replaced,
        }
    }

    fn open(&mut self, k: FlowKey, src: Endpoint, dst: Endpoint, frame: u64, ts: i64) -> u32 {
        let stream = self.convs.len() as u32;
        self.convs.push(Conversation {
            stream,
            a: src,
            b: dst,
            first_frame: frame,
            last_frame: frame,
            first_ts: ts,
            last_ts: ts,
            frames: [0; 2],
            bytes: [0; 2],
            payload: [0; 2],
            syn_dir: None,
            synack_dir: None,
            fin: false,
            rst: false,
            base_seq: [None; 2],
        });
        self.by_key.insert(k, stream);
        stream
    }

    pub fn conversations(&self) -> &[Conversation] {
        &self.convs
    }

    pub fn get(&self, stream: u32) -> Option<&Conversation> {
        self.convs.get(stream as usize)
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use nastriage_net::tcp_flags::{ACK, SYN};
    use nastriage_net::{IpInfo, TcpOptions, TcpSegment};

    use super::*;

    fn frame(
        t: &mut ConversationTable,
        n: u64,
        from: (u8, u16),
        to: (u8, u16),
        flags: u16,
        seq: u32,
    ) -> Assignment {
        let ip = IpInfo {
            version: 4,
            src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, from.0)),
            dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, to.0)),
            ttl: 64,
            id: 0,
            proto: 6,
            payload_len: 20,
            dont_fragment: true,
            reassembled: false,
        };
        let tcp = TcpSegment {
            src_port: from.1,
            dst_port: to.1,
            seq,
            ack: 0,
            flags,
            window: 100,
            header_len: 20,
            options: TcpOptions::default(),
            payload_len: 0,
            payload: &[],
        };
        t.update(n, n as i64, 60, &ip, &tcp)
    }

    /// Frames of one connection in a row, others in between, both
    /// directions, a retransmitted SYN, and new SYNs on used 4-tuples.
    #[test]
    fn runs_interleaving_and_port_reuse() {
        let mut t = ConversationTable::default();
        let (c, s, c2) = ((1, 700), (2, 2049), (3, 800));
        let a = |x: Assignment| (x.stream, x.dir, x.replaced);
        assert_eq!(a(frame(&mut t, 1, c, s, SYN, 10)), (0, 0, None));
        assert_eq!(a(frame(&mut t, 2, s, c, SYN | ACK, 90)), (0, 1, None));
        assert_eq!(a(frame(&mut t, 3, c, s, ACK, 11)), (0, 0, None));
        assert_eq!(a(frame(&mut t, 4, c2, s, SYN, 50)), (1, 0, None));
        assert_eq!(a(frame(&mut t, 5, s, c, ACK, 91)), (0, 1, None));
        assert_eq!(a(frame(&mut t, 6, s, c2, SYN | ACK, 70)), (1, 1, None));
        // The same SYN again is a retransmission, not a new connection.
        assert_eq!(a(frame(&mut t, 7, c2, s, SYN, 50)), (1, 0, None));
        // Reuse right after a frame of the same connection ...
        assert_eq!(a(frame(&mut t, 8, c2, s, SYN, 5000)), (2, 0, Some(1)));
        assert_eq!(a(frame(&mut t, 9, s, c2, ACK, 71)), (2, 1, None));
        // ... and after another connection's frame.
        assert_eq!(a(frame(&mut t, 10, c, s, SYN, 7000)), (3, 0, Some(0)));
        assert_eq!(a(frame(&mut t, 11, s, c2, ACK, 72)), (2, 1, None));
        assert_eq!(a(frame(&mut t, 12, s, c, ACK, 92)), (3, 1, None));
        let frames: Vec<[u64; 2]> = t.conversations().iter().map(|c| c.frames).collect();
        assert_eq!(frames, [[2, 2], [2, 1], [1, 2], [1, 1]]);
    }
}
