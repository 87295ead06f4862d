//! ONC RPC (RFC 5531) over TCP record marking and over UDP: calls matched
//! to replies by connection and XID, retransmitted calls recognised, and
//! NFS v2/v3/v4.x, MOUNT, portmapper, NFS_ACL and NLM decoded into
//! transactions.
//!
//! - [`framing`]: record marking per direction, walking past holes by the
//!   record-mark lengths and resynchronising when a mark is not captured;
//! - [`pending`]: the bounded table of outstanding calls;
//! - [`decode`], [`nfs4`]: program-specific fields of calls and replies;
//! - [`names`]: the bounded file handle → path map shared by all flows;
//! - [`progs`]: program and procedure names.
//!
//! A call becomes a [`Transaction`] when it is seen; its reply completes
//! it. A call seen again with the same XID before the reply is a
//! retransmission (counted; the first call's times are kept). Calls never
//! answered are emitted unanswered at the end of the connection (or when
//! evicted from a full table, with a note); replies without a call go to
//! [`TransactionLog::orphan_replies`](crate::transactions::TransactionLog).

mod decode;
mod framing;
mod joined;
mod names;
mod nfs4;
mod pending;
mod progs;
#[cfg(test)]
mod tests;

use std::cell::RefCell;
use std::net::IpAddr;
use std::rc::Rc;

use nastriage_proto::rpc_records::{
    auth_stat_name, gss_integ_unwrap, parse_rpc_message, AcceptStat, Credential, RejectReason,
    ReplyStat, RpcMessage, MSG_CALL, MSG_REPLY, RPCSEC_GSS_DATA, RPC_GSS_SVC_INTEGRITY,
    RPC_GSS_SVC_NONE, RPC_GSS_SVC_PRIVACY,
};
use nastriage_proto::ParseError;

use super::{Ctx, StreamParser};
use crate::reassembly::Chunk;
use crate::transactions::{OrphanReply, PduSpan, TransactionLog};

use decode::{ReplyCtx, Want};
use framing::{Framer, Record, Sink, HEADER_CAP, LISTING_CAP};
use names::NameMap;
use pending::{PendingCall, PendingCalls, RecentlyAnswered, MAX_OUTSTANDING};

/// State shared by every RPC flow of one analysis.
#[derive(Debug, Default)]
pub struct Shared {
    pub names: NameMap,
    /// NFSv4 COMPOUND operation and status lists as text, made once each.
    pub texts: joined::CompoundTexts,
    /// Boxes of answered calls, for the next calls of any connection.
    pub(crate) spare: super::spares::Spares<PendingCall>,
    /// Records whose RPC header was not captured or did not decode.
    pub undecoded: u64,
    /// Records dropped by the framers because their start was not RPC.
    pub discarded: u64,
    /// Calls evicted from a full outstanding-call table.
    pub evicted_calls: u64,
}

pub type SharedRef = Rc<RefCell<Shared>>;

impl Shared {
    /// End of the analysis: turn the counters into warnings.
    pub fn finish(&self, log: &mut TransactionLog) {
        if self.undecoded > 0 {
            log.warnings.push(format!(
                "{} RPC record(s) could not be decoded (header not captured or malformed)",
                self.undecoded
            ));
        }
        if self.discarded > 0 {
            log.warnings.push(format!(
                "{} RPC record(s) were skipped because their start was not an RPC header \
                 (the parser resynchronised after them)",
                self.discarded
            ));
        }
        if self.evicted_calls > 0 {
            log.warnings.push(format!(
                "{} RPC call(s) were evicted unanswered from a full outstanding-call table \
                 ({MAX_OUTSTANDING} per connection)",
                self.evicted_calls
            ));
        }
        if self.names.evictions > 0 {
            log.warnings.push(format!(
                "the file handle → name map reached {} entries; {} older entries were evicted",
                names::MAX_NAMES,
                self.names.evictions
            ));
        }
    }
}

/// Decoder of one TCP connection or UDP flow.
pub struct RpcParser {
    framers: [Framer; 2],
    core: Core,
}

struct Core {
    stream: u32,
    transport: &'static str,
    /// UDP: the (address, port) sending in direction 0 and 1.
    endpoints: Option<[(IpAddr, u16); 2]>,
    pending: PendingCalls,
    /// Boxes of logged calls, for the next calls.
    answered: RecentlyAnswered,
    shared: SharedRef,
}

impl RpcParser {
    /// Parser of TCP connection `stream`.
    pub fn new(stream: u32, shared: SharedRef) -> Self {
        RpcParser {
            framers: Default::default(),
            core: Core {
                stream,
                transport: "tcp",
                endpoints: None,
                pending: PendingCalls::default(),
                answered: RecentlyAnswered::default(),
                shared,
            },
        }
    }

    /// Parser of UDP flow number `flow`, whose direction 0 is sent by
    /// `endpoints[0]`.
    pub fn new_udp(flow: u32, endpoints: [(IpAddr, u16); 2], shared: SharedRef) -> Self {
        let mut p = Self::new(flow, shared);
        p.core.transport = "udp";
        p.core.endpoints = Some(endpoints);
        p
    }

    /// One UDP datagram of this flow: one RPC message. `wire_len` is the
    /// payload length on the wire (`payload` may be cut by the snaplen).
    pub fn datagram(
        &mut self,
        dir: u8,
        payload: &[u8],
        wire_len: u32,
        frame: u64,
        ts: i64,
        ctx: &mut Ctx<'_>,
    ) {
        let rec = Record {
            hdr: payload,
            span: PduSpan {
                first_frame: frame,
                first_ts: ts,
                last_frame: frame,
                last_ts: ts,
                bytes: u64::from(wire_len),
                complete: true,
            },
            cut: payload.len() < wire_len as usize,
        };
        self.core.record(dir & 1, rec, ctx);
    }
}

impl StreamParser for RpcParser {
    fn chunk(&mut self, dir: u8, chunk: Chunk<'_>, ctx: &mut Ctx<'_>) {
        let d = (dir & 1) as usize;
        let mut sink = DirSink {
            core: &mut self.core,
            dir: dir & 1,
            ctx,
        };
        match chunk {
            Chunk::Data {
                offset,
                bytes,
                frame,
                ts,
            } => self.framers[d].data(offset, bytes, frame, ts, &mut sink),
            Chunk::Hole {
                offset,
                len,
                frame,
                ts,
                ..
            } => self.framers[d].hole(offset, len, frame, ts, &mut sink),
        }
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        for d in 0..2u8 {
            let mut sink = DirSink {
                core: &mut self.core,
                dir: d,
                ctx,
            };
            self.framers[d as usize].finish(&mut sink);
            self.core.shared.borrow_mut().discarded += self.framers[d as usize].discarded;
            self.framers[d as usize].discarded = 0;
        }
        self.core.finish(ctx);
    }
}

/// The framer's view of the connection for one direction.
struct DirSink<'a, 'b> {
    core: &'a mut Core,
    dir: u8,
    ctx: &'a mut Ctx<'b>,
}

impl Sink for DirSink<'_, '_> {
    fn record(&mut self, rec: Record<'_>) {
        self.core.record(self.dir, rec, self.ctx);
    }

    fn awaits_reply(&self, xid: u32) -> bool {
        self.core.pending.contains(&(1 - self.dir, xid))
    }

    fn header_cap(&self, xid: u32, mtype: u32) -> usize {
        let listing = mtype == MSG_REPLY
            && self
                .core
                .pending
                .get(&(1 - self.dir, xid))
                .is_some_and(|p| p.ctx.wants_listing());
        if listing {
            LISTING_CAP
        } else {
            HEADER_CAP
        }
    }

    fn prefix_suffices(&self, hdr: &[u8]) -> bool {
        match parse_rpc_message(hdr) {
            // RPCSEC_GSS wraps (integrity) or encrypts (privacy) the body.
            Ok(RpcMessage::Call(h)) if !matches!(h.cred, Credential::Gss(_)) => h
                .args_offset()
                .and_then(|off| hdr.get(off..))
                .is_some_and(|args| decode::call_prefix_suffices(h.prog, h.vers, h.proc_, args)),
            Ok(RpcMessage::Reply(h)) => {
                let success = matches!(
                    h.stat,
                    ReplyStat::Accepted {
                        stat: AcceptStat::Success,
                        ..
                    }
                );
                let pending = self.core.pending.get(&(1 - self.dir, h.xid));
                match (pending, hdr.get(h.body_offset..)) {
                    (Some(p), Some(res)) if success && p.ctx.gss_service.is_none() => {
                        decode::reply_prefix_suffices(&p.ctx, res)
                    }
                    _ => false,
                }
            }
            _ => false,
        }
    }

    fn lost_sync(&mut self) {
        self.ctx.log.resyncs += 1;
    }
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
}

/// A call's header as far as it was captured.
struct CallHead {
    xid: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
    flavor: Option<u32>,
    gss: Option<(u32, u32)>,
    /// Offset of the program's arguments in the record, when known.
    args_offset: Option<usize>,
}

impl Core {
    fn record(&mut self, dir: u8, rec: Record<'_>, ctx: &mut Ctx<'_>) {
        match parse_rpc_message(rec.hdr) {
            Ok(RpcMessage::Call(h)) => {
                let gss = match &h.cred {
                    Credential::Gss(g) => Some((g.procedure, g.service)),
                    _ => None,
                };
                let head = CallHead {
                    xid: h.xid,
                    prog: h.prog,
                    vers: h.vers,
                    proc_: h.proc_,
                    flavor: Some(h.cred.flavor()),
                    gss,
                    args_offset: h.args_offset(),
                };
                self.call(dir, head, &rec, ctx);
            }
            Ok(RpcMessage::Reply(h)) => self.reply(dir, Some(&h), h.xid, &rec, ctx),
            Err(ParseError::Incomplete) if rec.hdr.len() >= 8 => {
                // The header was cut: use what is there.
                let xid = be32(rec.hdr, 0).unwrap_or(0);
                match be32(rec.hdr, 4) {
                    Some(MSG_CALL) if rec.hdr.len() >= 24 && be32(rec.hdr, 8) == Some(2) => {
                        let head = CallHead {
                            xid,
                            prog: be32(rec.hdr, 12).unwrap_or(0),
                            vers: be32(rec.hdr, 16).unwrap_or(0),
                            proc_: be32(rec.hdr, 20).unwrap_or(0),
                            flavor: be32(rec.hdr, 24),
                            gss: None,
                            args_offset: None,
                        };
                        self.call(dir, head, &rec, ctx);
                    }
                    Some(MSG_REPLY) => self.reply(dir, None, xid, &rec, ctx),
                    _ => self.shared.borrow_mut().undecoded += 1,
                }
            }
            Err(_) => self.shared.borrow_mut().undecoded += 1,
        }
    }

    fn call(&mut self, dir: u8, h: CallHead, rec: &Record<'_>, ctx: &mut Ctx<'_>) {
        let key = (dir, h.xid);
        if let Some(p) = self.pending.get_mut(&key) {
            if (p.ctx.prog, p.ctx.vers, p.ctx.proc_) == (h.prog, h.vers, h.proc_) {
                p.tx.retransmissions += 1;
                return;
            }
            // Same XID, different call, no reply in between.
            if let Some(mut old) = self.pending.remove(&key) {
                old.tx.note = Some("XID reused by another call before any reply".into());
                ctx.log.push_from(&mut old.tx);
                self.shared.borrow_mut().spare.give(old);
            }
        }
        // Made in its box (its transaction is about 570 bytes), where it
        // stays until logged.
        let mut call = self.shared.borrow_mut().spare.take();
        let PendingCall { tx, ctx: rc, .. } = &mut *call;
        tx.protocol = progs::protocol(h.prog);
        tx.version = h.vers;
        tx.op = progs::proc_name(h.prog, h.vers, h.proc_);
        tx.op_code = h.proc_;
        tx.program = h.prog;
        tx.stream = self.stream;
        tx.transport = self.transport;
        tx.request_dir = dir;
        tx.id = u64::from(h.xid);
        tx.request = rec.span;
        tx.auth = h
            .flavor
            .map(|f| progs::auth_name(f, h.gss.map(|(_, svc)| svc)));
        if let Some(reply_frame) = self.answered.get(&key) {
            tx.retransmissions = 1;
            tx.note = Some(format!(
                "retransmission of a call answered in frame {reply_frame} \
                 (the reply may come from the server's duplicate request cache)"
            ));
        }
        if let Some(ep) = self.endpoints {
            tx.client_addr = Some(ep[dir as usize]);
            tx.server_addr = Some(ep[1 - dir as usize]);
        }
        *rc = ReplyCtx {
            prog: h.prog,
            vers: h.vers,
            proc_: h.proc_,
            gss_service: match h.gss {
                Some((RPCSEC_GSS_DATA, svc)) => Some(svc),
                _ => None,
            },
            want: Want::Nothing,
        };
        let mut complete = true;
        match (h.args_offset, h.gss) {
            (Some(off), _) => {
                let args = rec.hdr.get(off..).unwrap_or(&[]);
                let shared = &mut *self.shared.borrow_mut();
                match decode::call_args(tx, rc, args, &shared.names, &mut shared.texts) {
                    Ok(()) => {}
                    Err(ParseError::Incomplete) => {
                        complete = !rec.cut;
                        if rec.cut {
                            tx.note = Some("call arguments not fully captured".into());
                        }
                    }
                    Err(ParseError::Malformed(what)) => {
                        tx.note = Some(format!("malformed call arguments: {what}"));
                    }
                }
            }
            (None, Some((RPCSEC_GSS_DATA, RPC_GSS_SVC_PRIVACY))) => {
                tx.note = Some("RPCSEC_GSS privacy: arguments encrypted".into());
            }
            (None, Some(_)) => {
                tx.note = Some("RPCSEC_GSS context control".into());
            }
            (None, None) => {
                complete = false;
                tx.note = Some("call header not fully captured".into());
            }
        }
        tx.request.complete = complete;
        if let Some(mut old) = self.pending.insert(key, call) {
            self.shared.borrow_mut().evicted_calls += 1;
            old.tx.note = Some(format!(
                "evicted unanswered: more than {MAX_OUTSTANDING} outstanding calls"
            ));
            ctx.log.push_from(&mut old.tx);
            self.shared.borrow_mut().spare.give(old);
        }
    }

    fn reply(
        &mut self,
        dir: u8,
        h: Option<&nastriage_proto::rpc_records::ReplyHeader>,
        xid: u32,
        rec: &Record<'_>,
        ctx: &mut Ctx<'_>,
    ) {
        let Some(mut p) = self.pending.remove(&(1 - dir, xid)) else {
            let status = h
                .filter(|h| h.is_success())
                .and_then(|h| be32(rec.hdr, h.body_offset));
            ctx.log.orphan_replies.push(OrphanReply {
                protocol: "rpc",
                stream: self.stream,
                id: u64::from(xid),
                reply: PduSpan {
                    complete: h.is_some(),
                    ..rec.span
                },
                status,
            });
            return;
        };
        let PendingCall { tx, ctx: rc, .. } = &mut *p;
        let mut span = rec.span;
        span.complete = true;
        match h {
            None => {
                span.complete = false;
                tx.note
                    .get_or_insert_with(|| "reply header not fully captured".into());
            }
            Some(h) => match h.stat {
                ReplyStat::Accepted {
                    stat: AcceptStat::Success,
                    ..
                } => {
                    let body = rec.hdr.get(h.body_offset..).unwrap_or(&[]);
                    let res = match rc.gss_service {
                        Some(RPC_GSS_SVC_INTEGRITY) => gss_integ_unwrap(body).map(|(_, b)| b),
                        Some(RPC_GSS_SVC_PRIVACY) => {
                            tx.note = Some("RPCSEC_GSS privacy: results encrypted".into());
                            Err(ParseError::Malformed("encrypted"))
                        }
                        Some(RPC_GSS_SVC_NONE) | None => Ok(body),
                        Some(_) => Err(ParseError::Malformed("rpcsec_gss service")),
                    };
                    let out = res.and_then(|res| {
                        let shared = &mut *self.shared.borrow_mut();
                        decode::reply_results(tx, rc, res, &mut shared.names, &mut shared.texts)
                    });
                    match out {
                        Ok(()) => {}
                        Err(ParseError::Incomplete) => {
                            span.complete = !rec.cut;
                        }
                        Err(ParseError::Malformed(what)) => {
                            if tx.note.is_none() && what != "encrypted" {
                                tx.note = Some(format!("malformed reply results: {what}"));
                            }
                        }
                    }
                }
                ReplyStat::Accepted { stat, .. } => tx.rpc_status = Some(stat.name().to_string()),
                ReplyStat::Denied(RejectReason::RpcMismatch { .. }) => {
                    tx.rpc_status = Some("RPC_MISMATCH".to_string())
                }
                ReplyStat::Denied(RejectReason::AuthError(s)) => {
                    tx.rpc_status = Some(format!("AUTH_ERROR {}", auth_stat_name(s)))
                }
            },
        }
        tx.reply = Some(span);
        self.answered.insert((1 - dir, xid), span.last_frame);
        ctx.log.push_from(tx);
        self.shared.borrow_mut().spare.give(p);
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        for mut p in self.pending.drain() {
            ctx.log.push_from(&mut p.tx);
        }
    }
}
