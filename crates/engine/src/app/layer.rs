//! Per-connection application state: reassembly of both directions,
//! protocol detection by content (or `--decode-as`), and the parser.

use std::collections::HashMap;

use nastriage_net::{tcp_flags, TcpSegment};

use super::rpc::RpcParser;
use super::smb2::Smb2Parser;
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
}

/// Forced decoding by port (`--decode-as PORT=nfs|smb`).
pub type DecodeAs = Vec<(u16, AppKind)>;

#[derive(Default)]
pub struct AppLayer {
    flows: HashMap<u32, Flow>,
    decode_as: DecodeAs,
    pub log: TransactionLog,
}

fn detect(payload: &[u8]) -> Option<AppKind> {
    if nastriage_proto::rpc_records::looks_like_rpc_call(payload) {
        return Some(AppKind::Rpc);
    }
    if nastriage_proto::smb2_records::looks_like_smb2_nbss(payload) {
        return Some(AppKind::Smb);
    }
    None
}

fn make(kind: AppKind, stream: u32) -> Box<dyn StreamParser> {
    match kind {
        AppKind::Rpc => Box::new(RpcParser::new(stream)),
        AppKind::Smb => Box::new(Smb2Parser::new(stream)),
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
        let flow = self.flows.entry(stream).or_insert_with(|| Flow {
            reasm: [Reassembler::default(), Reassembler::default()],
            app: App::Undecided { seen: 0 },
            fin: [false; 2],
        });
        if let App::Undecided { seen } = &mut flow.app {
            if tcp.payload_len > 0 {
                let forced = self
                    .decode_as
                    .iter()
                    .find(|(p, _)| *p == tcp.src_port || *p == tcp.dst_port)
                    .map(|(_, k)| *k);
                match forced.or_else(|| detect(tcp.payload)) {
                    Some(kind) => flow.app = App::Parsing(make(kind, stream)),
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
            flow.reasm[1 - d].acked(tcp.ack, frame, ts, &mut |c| feed(1 - dir, c));
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

    /// End of capture: flush everything.
    pub fn finish(&mut self) {
        let mut streams: Vec<u32> = self.flows.keys().copied().collect();
        streams.sort_unstable();
        for s in streams {
            self.close(s);
        }
    }
}
