//! Per-connection application state: reassembly of both directions,
//! protocol detection by content (or `--decode-as`), and the parser.

use std::collections::HashMap;
use std::net::IpAddr;

use nastriage_net::{tcp_flags, IpInfo, TcpSegment, UdpDatagram};

use super::rpc::{RpcParser, SharedRef};
use super::smb2::{Smb2Parser, SpareRequests};
use super::{Ctx, StreamParser};
use crate::reassembly::{Chunk, Reassembler, Segment};
use crate::transactions::TransactionLog;

/// Application protocols the engine decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppKind {
    Rpc,
    Smb,
}

/// How many payload-carrying segments a connection may show before we stop
/// looking for a protocol in it (and stop buffering it).
const DETECT_SEGMENTS: u32 = 8;
/// The same on NFS, portmapper, mountd and SMB ports.
const DETECT_SEGMENTS_STORAGE: u32 = 256;
const STORAGE_PORTS: [u16; 6] = [2049, 111, 20048, 635, 445, 139];

enum App {
    Undecided { seen: u32 },
    Parsing(Box<dyn StreamParser>),
    Ignored,
}

struct Flow {
    reasm: [Reassembler; 2],
    app: App,
    fin: [bool; 2],
    /// Sequence number of each direction's FIN (it consumes one: the
    /// peer's ACK of it is not an unseen data byte).
    fin_seq: [Option<u32>; 2],
}

/// Forced decoding by port (`--decode-as PORT=nfs|smb`).
pub type DecodeAs = Vec<(u16, AppKind)>;

/// Well-known ports of RPC over UDP (NFS, portmapper, mountd, NLM): a
/// datagram there that decodes as an RPC message starts a flow even if it
/// is a reply.
const RPC_UDP_PORTS: [u16; 5] = [2049, 111, 20048, 635, 4045];
/// Most UDP flows decoded at once; datagrams of further flows are counted.
const MAX_UDP_FLOWS: usize = 1 << 16;

type UdpEndpoint = (IpAddr, u16);

/// One RPC-over-UDP flow (address/port pair, either direction).
struct UdpFlow {
    /// Sender of direction 0 (the first datagram seen).
    a: UdpEndpoint,
    index: u32,
    parser: RpcParser,
}

#[derive(Default)]
pub struct AppLayer {
    /// Boxed: a flow is about 250 bytes, and the map holds up to twice as
    /// many slots as flows (with 8,640 connections open at once, 4.1 MB of
    /// slots unboxed).
    flows: foldhash::HashMap<u32, Box<Flow>>,
    decode_as: DecodeAs,
    pub log: TransactionLog,
    /// State shared by the RPC parsers (file handle → name map).
    rpc: SharedRef,
    /// Request boxes shared by the SMB2 parsers.
    smb_spare: SpareRequests,
    udp: HashMap<(UdpEndpoint, UdpEndpoint), UdpFlow>,
    udp_flows: u32,
    udp_untracked: u64,
}

fn detect(payload: &[u8]) -> Option<AppKind> {
    if nastriage_proto::rpc_records::looks_like_rpc_call(payload) {
        return Some(AppKind::Rpc);
    }
    if nastriage_proto::smb2_records::looks_like_smb2_nbss(payload)
        || super::smb2::looks_like_smb_session(payload)
    {
        return Some(AppKind::Smb);
    }
    None
}

fn make(kind: AppKind, stream: u32, rpc: &SharedRef, smb: &SpareRequests) -> Box<dyn StreamParser> {
    match kind {
        AppKind::Rpc => Box::new(RpcParser::new(stream, rpc.clone())),
        AppKind::Smb => Box::new(Smb2Parser::with_spares(stream, smb.clone())),
    }
}

impl AppLayer {
    pub fn new(decode_as: DecodeAs) -> Self {
        AppLayer {
            decode_as,
            ..Default::default()
        }
    }

    /// Feed one TCP segment of connection `stream`, direction `dir`
    /// (0 = a→b). `ports` are (src, dst) of this segment.
    pub fn tcp(&mut self, stream: u32, dir: u8, frame: u64, ts: i64, tcp: &TcpSegment<'_>) {
        let flow = self.flows.entry(stream).or_insert_with(|| {
            Box::new(Flow {
                reasm: [Reassembler::default(), Reassembler::default()],
                app: App::Undecided { seen: 0 },
                fin: [false; 2],
                fin_seq: [None; 2],
            })
        });
        if let App::Undecided { seen } = &mut flow.app {
            if tcp.payload_len > 0 {
                let forced = self
                    .decode_as
                    .iter()
                    .find(|(p, _)| *p == tcp.src_port || *p == tcp.dst_port)
                    .map(|(_, k)| *k);
                match forced.or_else(|| detect(tcp.payload)) {
                    Some(kind) => {
                        flow.app = App::Parsing(make(kind, stream, &self.rpc, &self.smb_spare))
                    }
                    None => {
                        *seen += 1;
                        // A capture that starts mid-connection shows a
                        // record boundary only at the next request: on the
                        // storage ports, keep looking longer.
                        let storage_port = [tcp.src_port, tcp.dst_port]
                            .iter()
                            .any(|p| STORAGE_PORTS.contains(p));
                        let limit = if storage_port {
                            DETECT_SEGMENTS_STORAGE
                        } else {
                            DETECT_SEGMENTS
                        };
                        if *seen >= limit {
                            flow.app = App::Ignored;
                        }
                    }
                }
            }
        }
        let App::Parsing(parser) = &mut flow.app else {
            return;
        };
        let mut ctx = Ctx {
            stream,
            log: &mut self.log,
        };
        let d = dir as usize;
        let mut feed = |dir: u8, c: Chunk<'_>| parser.chunk(dir, c, &mut ctx);
        // Data the peer acknowledged but we never saw is a proven gap.
        if tcp.has(tcp_flags::ACK) {
            let ack = match flow.fin_seq[1 - d] {
                Some(f) if tcp.ack == f.wrapping_add(1) => f,
                _ => tcp.ack,
            };
            flow.reasm[1 - d].acked(ack, frame, ts, &mut |c| feed(1 - dir, c));
        }
        let seg = Segment {
            seq: tcp.seq,
            syn: tcp.has(tcp_flags::SYN),
            payload: tcp.payload,
            wire_len: tcp.payload_len,
            frame,
            ts,
        };
        flow.reasm[d].segment(seg, &mut |c| feed(dir, c));
        if tcp.has(tcp_flags::FIN) {
            flow.fin[d] = true;
            let syn = tcp.has(tcp_flags::SYN) as u32;
            flow.fin_seq[d] = Some(tcp.seq.wrapping_add(syn).wrapping_add(tcp.payload_len));
        }
        if tcp.has(tcp_flags::RST) || (flow.fin[0] && flow.fin[1]) {
            self.close(stream);
        }
    }

    /// Flush and release one connection's state.
    pub fn close(&mut self, stream: u32) {
        let Some(mut flow) = self.flows.remove(&stream) else {
            return;
        };
        if let App::Parsing(parser) = &mut flow.app {
            let mut ctx = Ctx {
                stream,
                log: &mut self.log,
            };
            for d in 0..2u8 {
                flow.reasm[d as usize].finish(&mut |c| parser.chunk(d, c, &mut ctx));
            }
            parser.finish(&mut ctx);
        }
    }

    /// Feed one UDP datagram. RPC is recognised by content (a CALL
    /// header), by a well-known RPC port with a valid RPC message, or by
    /// `--decode-as PORT=nfs`; each address/port pair is one flow, numbered
    /// in order of appearance (the `stream` of its transactions).
    pub fn udp(&mut self, ip: &IpInfo, udp: &UdpDatagram<'_>, frame: u64, ts: i64) {
        if udp.payload_len == 0 {
            return;
        }
        let src = (ip.src, udp.src_port);
        let dst = (ip.dst, udp.dst_port);
        let key = if src <= dst { (src, dst) } else { (dst, src) };
        if !self.udp.contains_key(&key) {
            let ports = [udp.src_port, udp.dst_port];
            let forced = self
                .decode_as
                .iter()
                .any(|(p, k)| *k == AppKind::Rpc && ports.contains(p));
            let rpc = forced
                || nastriage_proto::rpc_records::looks_like_rpc_call_header(udp.payload)
                || (ports.iter().any(|p| RPC_UDP_PORTS.contains(p))
                    && nastriage_proto::rpc_records::parse_rpc_message(udp.payload).is_ok());
            if !rpc {
                return;
            }
            if self.udp.len() >= MAX_UDP_FLOWS {
                self.udp_untracked += 1;
                return;
            }
            let index = self.udp_flows;
            self.udp_flows += 1;
            let parser = RpcParser::new_udp(index, [src, dst], self.rpc.clone());
            self.udp.insert(
                key,
                UdpFlow {
                    a: src,
                    index,
                    parser,
                },
            );
        }
        let Some(flow) = self.udp.get_mut(&key) else {
            return;
        };
        let dir = u8::from(flow.a != src);
        let mut ctx = Ctx {
            stream: flow.index,
            log: &mut self.log,
        };
        flow.parser
            .datagram(dir, udp.payload, udp.payload_len, frame, ts, &mut ctx);
    }

    /// End of capture: flush everything.
    pub fn finish(&mut self) {
        let mut streams: Vec<u32> = self.flows.keys().copied().collect();
        streams.sort_unstable();
        for s in streams {
            self.close(s);
        }
        let mut udp: Vec<UdpFlow> = self.udp.drain().map(|(_, f)| f).collect();
        udp.sort_by_key(|f| f.index);
        for mut f in udp {
            let mut ctx = Ctx {
                stream: f.index,
                log: &mut self.log,
            };
            f.parser.finish(&mut ctx);
        }
        if self.udp_untracked > 0 {
            self.log.warnings.push(format!(
                "{} RPC-over-UDP datagram(s) were not decoded: more than {MAX_UDP_FLOWS} UDP flows",
                self.udp_untracked
            ));
        }
        self.rpc.borrow().finish(&mut self.log);
        // The store reads back in request order (parsers emit transactions as
        // replies arrive); from now on it is only read: compress all of it.
        self.log.transactions.seal();
    }
}
