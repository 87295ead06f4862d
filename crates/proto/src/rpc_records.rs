//! ONC RPC v2 (RFC 5531) message headers and TCP record marking.
//!
//! Only the headers are decoded here; the procedure arguments/results are
//! left to the program-specific modules, which start at
//! [`CallHeader::body_offset`] / [`ReplyHeader::body_offset`].

use crate::error::{ParseError, Result};
use crate::xdr::XdrCursor;

// Program numbers (RFC 5531 appendix / IANA rpc-program-numbers).
pub const PROG_PORTMAP: u32 = 100000;
pub const PROG_NFS: u32 = 100003;
pub const PROG_MOUNT: u32 = 100005;
pub const PROG_RQUOTA: u32 = 100011;
pub const PROG_NLM: u32 = 100021;
pub const PROG_NSM: u32 = 100024;
pub const PROG_NFSACL: u32 = 100227;

/// Name of a well-known RPC program.
pub fn program_name(prog: u32) -> Option<&'static str> {
    Some(match prog {
        PROG_PORTMAP => "portmapper",
        PROG_NFS => "nfs",
        PROG_MOUNT => "mount",
        PROG_RQUOTA => "rquota",
        PROG_NLM => "nlockmgr",
        PROG_NSM => "status",
        PROG_NFSACL => "nfs_acl",
        _ => return None,
    })
}

// Authentication flavors (RFC 5531 section 8.2, RFC 2203).
pub const AUTH_NONE: u32 = 0;
pub const AUTH_SYS: u32 = 1;
pub const AUTH_SHORT: u32 = 2;
pub const AUTH_DH: u32 = 3;
pub const RPCSEC_GSS: u32 = 6;

pub fn auth_flavor_name(flavor: u32) -> &'static str {
    match flavor {
        AUTH_NONE => "AUTH_NONE",
        AUTH_SYS => "AUTH_SYS",
        AUTH_SHORT => "AUTH_SHORT",
        AUTH_DH => "AUTH_DH",
        RPCSEC_GSS => "RPCSEC_GSS",
        _ => "AUTH_UNKNOWN",
    }
}

/// RFC 5531: credential and verifier bodies are at most 400 bytes.
pub const MAX_AUTH_BYTES: u32 = 400;

/// Largest record fragment considered plausible (NFS moves at most a few
/// MiB per READ/WRITE; anything beyond 16 MiB is a desynchronised stream).
pub const MAX_FRAGMENT_LEN: u32 = 16 << 20;

/// Smallest CALL: xid, type, rpcvers, prog, vers, proc, cred(8), verf(8).
pub const MIN_CALL_LEN: usize = 40;
/// Smallest REPLY: xid, type, reply_stat and 12 bytes of accepted/denied body.
pub const MIN_REPLY_LEN: usize = 24;

/// TCP record marking (RFC 5531 section 11): one 32-bit word per fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordMark {
    /// This fragment ends the record.
    pub last: bool,
    /// Fragment length in bytes, excluding the 4-byte mark.
    pub len: u32,
}

impl RecordMark {
    /// Length is within what an RPC message could have.
    pub fn is_plausible(&self) -> bool {
        (MIN_REPLY_LEN as u32..=MAX_FRAGMENT_LEN).contains(&self.len)
    }
}

pub fn parse_record_mark(b: &[u8]) -> Result<RecordMark> {
    let w = XdrCursor::new(b).u32()?;
    Ok(RecordMark {
        last: w & 0x8000_0000 != 0,
        len: w & 0x7fff_ffff,
    })
}

pub const MSG_CALL: u32 = 0;
pub const MSG_REPLY: u32 = 1;

/// AUTH_SYS credential body (RFC 5531 appendix A), borrowed from the
/// message: a call is parsed without allocating (every call of a capture
/// carries one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthSys<'a> {
    pub stamp: u32,
    /// As sent: an XDR string need not be UTF-8 (see [`AuthSys::machine_name_lossy`]).
    pub machine_name: &'a [u8],
    pub uid: u32,
    pub gid: u32,
    /// The auxiliary gids as sent, 4 bytes each (at most 16; see [`AuthSys::gids`]).
    gids_xdr: &'a [u8],
}

impl<'a> AuthSys<'a> {
    /// The machine name, invalid UTF-8 replaced.
    pub fn machine_name_lossy(&self) -> std::borrow::Cow<'a, str> {
        String::from_utf8_lossy(self.machine_name)
    }

    /// The auxiliary gids.
    pub fn gids(&self) -> impl ExactSizeIterator<Item = u32> + 'a {
        self.gids_xdr
            .chunks_exact(4)
            .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
    }
}

// RPCSEC_GSS procedures and services (RFC 2203 section 5).
pub const RPCSEC_GSS_DATA: u32 = 0;
pub const RPCSEC_GSS_INIT: u32 = 1;
pub const RPCSEC_GSS_CONTINUE_INIT: u32 = 2;
pub const RPCSEC_GSS_DESTROY: u32 = 3;
pub const RPC_GSS_SVC_NONE: u32 = 1;
pub const RPC_GSS_SVC_INTEGRITY: u32 = 2;
pub const RPC_GSS_SVC_PRIVACY: u32 = 3;

/// RPCSEC_GSS credential body (RFC 2203 section 5), borrowed from the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GssCred<'a> {
    pub version: u32,
    pub procedure: u32,
    pub seq_num: u32,
    pub service: u32,
    pub handle: &'a [u8],
}

/// The decoded credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential<'a> {
    None,
    Sys(AuthSys<'a>),
    Gss(GssCred<'a>),
    /// AUTH_SHORT, AUTH_DH or an unknown flavor: the flavor and body length.
    Other {
        flavor: u32,
        len: u32,
    },
}

impl Credential<'_> {
    pub fn flavor(&self) -> u32 {
        match self {
            Credential::None => AUTH_NONE,
            Credential::Sys(_) => AUTH_SYS,
            Credential::Gss(_) => RPCSEC_GSS,
            Credential::Other { flavor, .. } => *flavor,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallHeader<'a> {
    pub xid: u32,
    pub rpcvers: u32,
    pub prog: u32,
    pub vers: u32,
    pub proc_: u32,
    pub cred: Credential<'a>,
    pub verf_flavor: u32,
    /// Offset of the procedure arguments from the start of the message
    /// (the xid), i.e. after the verifier.
    pub body_offset: usize,
}

impl CallHeader<'_> {
    /// Where the program's own arguments start, unwrapping RPCSEC_GSS
    /// integrity (`databody_integ` length + seq_num, RFC 2203 5.3.2.2).
    /// `None` when the arguments are encrypted (privacy) or the call is a
    /// GSS context-control call rather than data.
    pub fn args_offset(&self) -> Option<usize> {
        match &self.cred {
            Credential::Gss(g) => match (g.procedure, g.service) {
                (RPCSEC_GSS_DATA, RPC_GSS_SVC_NONE) => Some(self.body_offset),
                (RPCSEC_GSS_DATA, RPC_GSS_SVC_INTEGRITY) => Some(self.body_offset + 8),
                _ => None,
            },
            _ => Some(self.body_offset),
        }
    }
}

/// accept_stat (RFC 5531 section 9), with PROG_MISMATCH's version range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptStat {
    Success,
    ProgUnavail,
    ProgMismatch { low: u32, high: u32 },
    ProcUnavail,
    GarbageArgs,
    SystemErr,
}

impl AcceptStat {
    pub fn name(&self) -> &'static str {
        match self {
            AcceptStat::Success => "SUCCESS",
            AcceptStat::ProgUnavail => "PROG_UNAVAIL",
            AcceptStat::ProgMismatch { .. } => "PROG_MISMATCH",
            AcceptStat::ProcUnavail => "PROC_UNAVAIL",
            AcceptStat::GarbageArgs => "GARBAGE_ARGS",
            AcceptStat::SystemErr => "SYSTEM_ERR",
        }
    }
}

/// Why a call was denied (reject_stat).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectReason {
    RpcMismatch { low: u32, high: u32 },
    AuthError(u32),
}

/// Name of an auth_stat value (RFC 5531 section 9, RFC 2203).
pub fn auth_stat_name(stat: u32) -> &'static str {
    match stat {
        0 => "AUTH_OK",
        1 => "AUTH_BADCRED",
        2 => "AUTH_REJECTEDCRED",
        3 => "AUTH_BADVERF",
        4 => "AUTH_REJECTEDVERF",
        5 => "AUTH_TOOWEAK",
        6 => "AUTH_INVALIDRESP",
        7 => "AUTH_FAILED",
        8 => "AUTH_KERB_GENERIC",
        9 => "AUTH_TIMEEXPIRE",
        10 => "AUTH_TKT_FILE",
        11 => "AUTH_DECODE",
        12 => "AUTH_NET_ADDR",
        13 => "RPCSEC_GSS_CREDPROBLEM",
        14 => "RPCSEC_GSS_CTXPROBLEM",
        _ => "AUTH_UNKNOWN",
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyStat {
    Accepted { verf_flavor: u32, stat: AcceptStat },
    Denied(RejectReason),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyHeader {
    pub xid: u32,
    pub stat: ReplyStat,
    /// Offset of the procedure results (meaningful when accepted with
    /// SUCCESS; otherwise the end of the header).
    pub body_offset: usize,
}

impl ReplyHeader {
    pub fn is_success(&self) -> bool {
        matches!(
            self.stat,
            ReplyStat::Accepted {
                stat: AcceptStat::Success,
                ..
            }
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RpcMessage<'a> {
    Call(CallHeader<'a>),
    Reply(ReplyHeader),
}

impl RpcMessage<'_> {
    pub fn xid(&self) -> u32 {
        match self {
            RpcMessage::Call(c) => c.xid,
            RpcMessage::Reply(r) => r.xid,
        }
    }
}

/// Decode an RPC message header. `b` starts at the xid (after the record
/// mark on TCP, at the UDP payload start otherwise).
pub fn parse_rpc_message(b: &[u8]) -> Result<RpcMessage<'_>> {
    let mut c = XdrCursor::new(b);
    let xid = c.u32()?;
    match c.u32()? {
        MSG_CALL => parse_call_rest(xid, &mut c).map(RpcMessage::Call),
        MSG_REPLY => parse_reply_rest(xid, &mut c).map(RpcMessage::Reply),
        _ => Err(ParseError::Malformed("rpc msg_type")),
    }
}

/// Decode a CALL header; fails with `Malformed` on a REPLY.
pub fn parse_rpc_call(b: &[u8]) -> Result<CallHeader<'_>> {
    match parse_rpc_message(b)? {
        RpcMessage::Call(c) => Ok(c),
        RpcMessage::Reply(_) => Err(ParseError::Malformed("rpc reply where call expected")),
    }
}

/// Decode a REPLY header; fails with `Malformed` on a CALL.
pub fn parse_rpc_reply(b: &[u8]) -> Result<ReplyHeader> {
    match parse_rpc_message(b)? {
        RpcMessage::Reply(r) => Ok(r),
        RpcMessage::Call(_) => Err(ParseError::Malformed("rpc call where reply expected")),
    }
}

fn parse_call_rest<'a>(xid: u32, c: &mut XdrCursor<'a>) -> Result<CallHeader<'a>> {
    let rpcvers = c.u32()?;
    if rpcvers != 2 {
        return Err(ParseError::Malformed("rpc version not 2"));
    }
    let prog = c.u32()?;
    let vers = c.u32()?;
    let proc_ = c.u32()?;
    let flavor = c.u32()?;
    let body = c.opaque(MAX_AUTH_BYTES)?;
    let cred = parse_credential(flavor, body).map_err(|e| e.within_blob("rpc credential"))?;
    let verf_flavor = c.u32()?;
    c.skip_opaque(MAX_AUTH_BYTES)?;
    Ok(CallHeader {
        xid,
        rpcvers,
        prog,
        vers,
        proc_,
        cred,
        verf_flavor,
        body_offset: c.pos(),
    })
}

fn parse_credential(flavor: u32, body: &[u8]) -> Result<Credential<'_>> {
    let mut c = XdrCursor::new(body);
    Ok(match flavor {
        AUTH_NONE => Credential::None,
        AUTH_SYS => {
            let stamp = c.u32()?;
            let machine_name = c.string(255)?;
            let uid = c.u32()?;
            let gid = c.u32()?;
            let n = c.count(16)?;
            let gids_xdr = c.take(n as usize * 4)?;
            Credential::Sys(AuthSys {
                stamp,
                machine_name,
                uid,
                gid,
                gids_xdr,
            })
        }
        RPCSEC_GSS => Credential::Gss(GssCred {
            version: c.u32()?,
            procedure: c.u32()?,
            seq_num: c.u32()?,
            service: c.u32()?,
            handle: c.opaque(MAX_AUTH_BYTES)?,
        }),
        _ => Credential::Other {
            flavor,
            len: body.len() as u32,
        },
    })
}

fn parse_reply_rest(xid: u32, c: &mut XdrCursor) -> Result<ReplyHeader> {
    let stat = match c.u32()? {
        0 => {
            let verf_flavor = c.u32()?;
            c.skip_opaque(MAX_AUTH_BYTES)?;
            let stat = match c.u32()? {
                0 => AcceptStat::Success,
                1 => AcceptStat::ProgUnavail,
                2 => AcceptStat::ProgMismatch {
                    low: c.u32()?,
                    high: c.u32()?,
                },
                3 => AcceptStat::ProcUnavail,
                4 => AcceptStat::GarbageArgs,
                5 => AcceptStat::SystemErr,
                _ => return Err(ParseError::Malformed("rpc accept_stat")),
            };
            ReplyStat::Accepted { verf_flavor, stat }
        }
        1 => ReplyStat::Denied(match c.u32()? {
            0 => RejectReason::RpcMismatch {
                low: c.u32()?,
                high: c.u32()?,
            },
            1 => RejectReason::AuthError(c.u32()?),
            _ => return Err(ParseError::Malformed("rpc reject_stat")),
        }),
        _ => return Err(ParseError::Malformed("rpc reply_stat")),
    };
    Ok(ReplyHeader {
        xid,
        stat,
        body_offset: c.pos(),
    })
}

/// Unwrap an RPCSEC_GSS integrity body (`rpc_gss_integ_data`): returns the
/// sequence number and the program's arguments/results that follow it.
/// Works on both calls and replies; the checksum after it is not checked.
pub fn gss_integ_unwrap(body: &[u8]) -> Result<(u32, &[u8])> {
    let mut c = XdrCursor::new(body);
    let len = c.u32()? as usize;
    if len < 4 {
        return Err(ParseError::Malformed("rpcsec_gss databody_integ"));
    }
    let seq = c.u32()?;
    let rest = c.rest();
    // The body may be cut by the capture: hand back what is there.
    Ok((seq, rest.get(..len - 4).unwrap_or(rest)))
}

/// Plausible (program, version, max procedure) for well-known programs.
fn known_program(prog: u32, vers: u32, proc_: u32) -> Option<bool> {
    let (lo, hi, max_proc) = match prog {
        PROG_PORTMAP => (2, 4, 15),
        PROG_NFS => (2, 4, 21),
        PROG_MOUNT => (1, 3, 7),
        PROG_RQUOTA => (1, 2, 4),
        PROG_NLM => (1, 4, 23),
        PROG_NSM => (1, 1, 6),
        PROG_NFSACL => (2, 3, 4),
        _ => return None,
    };
    Some((lo..=hi).contains(&vers) && proc_ <= max_proc)
}

/// Content check for an RPC CALL header starting at the xid (no record
/// mark): used on UDP and behind a record mark by [`looks_like_rpc_call`].
/// Requires msg type 0, rpcvers 2, a well-known program with a valid
/// version/procedure (or, for other programs, small version/procedure
/// numbers), a known auth flavor and credential length within bounds.
pub fn looks_like_rpc_call_header(b: &[u8]) -> bool {
    let mut c = XdrCursor::new(b);
    let mut w = [0u32; 8];
    for x in w.iter_mut() {
        match c.u32() {
            Ok(v) => *x = v,
            Err(_) => return false,
        }
    }
    let [_xid, mtype, rpcvers, prog, vers, proc_, flavor, cred_len] = w;
    if mtype != MSG_CALL || rpcvers != 2 {
        return false;
    }
    let prog_ok = match known_program(prog, vers, proc_) {
        Some(ok) => ok,
        // Unknown programs (e.g. NFSv4.0 callback numbers): sane values only.
        None => prog != 0 && vers != 0 && vers < 16 && proc_ < 256,
    };
    let flavor_ok = matches!(
        flavor,
        AUTH_NONE | AUTH_SYS | AUTH_SHORT | AUTH_DH | RPCSEC_GSS
    );
    prog_ok && flavor_ok && cred_len <= MAX_AUTH_BYTES && (flavor != AUTH_NONE || cred_len == 0)
}

/// Content check for a TCP RPC CALL: plausible record mark, then
/// [`looks_like_rpc_call_header`]. Used to detect RPC on unusual ports and
/// to find the next message boundary after a capture gap.
pub fn looks_like_rpc_call(b: &[u8]) -> bool {
    match parse_record_mark(b) {
        Ok(m) if m.len as usize >= MIN_CALL_LEN && m.len <= MAX_FRAGMENT_LEN => {
            b.get(4..).is_some_and(looks_like_rpc_call_header)
        }
        _ => false,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::{fuzz, Xdr};

    /// CALL header with AUTH_SYS credential and AUTH_NONE verifier.
    pub fn call_header(xid: u32, prog: u32, vers: u32, proc_: u32) -> Xdr {
        let cred = Xdr::new()
            .u32(0x1234)
            .string("client")
            .u32(1000)
            .u32(100)
            .u32(2)
            .u32(100)
            .u32(27)
            .done();
        Xdr::new()
            .u32(xid)
            .u32(MSG_CALL)
            .u32(2)
            .u32(prog)
            .u32(vers)
            .u32(proc_)
            .u32(AUTH_SYS)
            .opaque(&cred)
            .u32(AUTH_NONE)
            .u32(0)
    }

    /// Accepted SUCCESS reply header.
    pub fn reply_header(xid: u32) -> Xdr {
        Xdr::new()
            .u32(xid)
            .u32(MSG_REPLY)
            .u32(0)
            .u32(AUTH_NONE)
            .u32(0)
            .u32(0)
    }

    pub fn with_mark(b: &[u8]) -> Vec<u8> {
        let mut v = (0x8000_0000u32 | b.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(b);
        v
    }

    #[test]
    fn call_auth_sys() {
        let b = call_header(7, PROG_NFS, 3, 6).u32(0xdead).done();
        let m = parse_rpc_message(&b).unwrap();
        let RpcMessage::Call(c) = m else { panic!() };
        assert_eq!((c.xid, c.prog, c.vers, c.proc_), (7, PROG_NFS, 3, 6));
        let Credential::Sys(s) = &c.cred else {
            panic!()
        };
        assert_eq!(s.machine_name, b"client");
        assert_eq!(s.machine_name_lossy(), "client");
        assert_eq!(
            (s.uid, s.gid, s.gids().collect::<Vec<_>>()),
            (1000, 100, vec![100, 27])
        );
        assert_eq!(s.gids().len(), 2);
        assert_eq!(c.body_offset, b.len() - 4);
        assert_eq!(c.args_offset(), Some(c.body_offset));
        for n in 0..b.len() - 4 {
            assert_eq!(
                parse_rpc_message(&b[..n]),
                Err(ParseError::Incomplete),
                "{n}"
            );
        }
        assert!(looks_like_rpc_call(&with_mark(&b)));
        assert!(looks_like_rpc_call_header(&b));
    }

    #[test]
    fn call_gss_and_bad_version() {
        let cred = Xdr::new()
            .u32(1)
            .u32(0)
            .u32(42)
            .u32(2)
            .opaque(&[9; 8])
            .done();
        let b = Xdr::new()
            .u32(1)
            .u32(0)
            .u32(2)
            .u32(PROG_NFS)
            .u32(4)
            .u32(1)
            .u32(RPCSEC_GSS)
            .opaque(&cred)
            .u32(RPCSEC_GSS)
            .opaque(&[1; 28])
            .done();
        let c = parse_rpc_call(&b).unwrap();
        let Credential::Gss(g) = &c.cred else {
            panic!()
        };
        assert_eq!((g.seq_num, g.service, g.handle.len()), (42, 2, 8));
        assert_eq!(c.args_offset(), Some(b.len() + 8));
        let body = Xdr::new().u32(8).u32(42).u32(0xabcd).opaque(&[0; 4]).done();
        assert_eq!(gss_integ_unwrap(&body), Ok((42, &[0, 0, 0xab, 0xcd][..])));

        let mut bad = b.clone();
        bad[11] = 3;
        assert!(matches!(
            parse_rpc_message(&bad),
            Err(ParseError::Malformed(_))
        ));
        // Credential body too short for its flavor: malformed, not incomplete.
        let b = Xdr::new()
            .u32(1)
            .u32(0)
            .u32(2)
            .u32(PROG_NFS)
            .u32(3)
            .u32(0)
            .u32(AUTH_SYS)
            .opaque(&[0; 8])
            .u32(0)
            .u32(0)
            .done();
        assert!(matches!(
            parse_rpc_message(&b),
            Err(ParseError::Malformed(_))
        ));
        assert!(!looks_like_rpc_call(&[
            0x80, 0, 0, 40, 0, 0, 0, 1, 0, 0, 0, 1
        ]));
    }

    #[test]
    fn replies() {
        let b = reply_header(9).u32(0).done();
        let r = parse_rpc_reply(&b).unwrap();
        assert!(r.is_success());
        assert_eq!((r.xid, r.body_offset), (9, 24));
        for n in 0..24 {
            assert_eq!(parse_rpc_message(&b[..n]), Err(ParseError::Incomplete));
        }
        let b = Xdr::new()
            .u32(9)
            .u32(1)
            .u32(0)
            .u32(0)
            .u32(0)
            .u32(2)
            .u32(2)
            .u32(3)
            .done();
        let r = parse_rpc_reply(&b).unwrap();
        assert_eq!(
            r.stat,
            ReplyStat::Accepted {
                verf_flavor: 0,
                stat: AcceptStat::ProgMismatch { low: 2, high: 3 }
            }
        );
        for (s, name) in [
            (1, "PROG_UNAVAIL"),
            (3, "PROC_UNAVAIL"),
            (4, "GARBAGE_ARGS"),
            (5, "SYSTEM_ERR"),
        ] {
            let b = Xdr::new().u32(9).u32(1).u32(0).u32(0).u32(0).u32(s).done();
            let ReplyStat::Accepted { stat, .. } = parse_rpc_reply(&b).unwrap().stat else {
                panic!()
            };
            assert_eq!(stat.name(), name);
        }
        let b = Xdr::new().u32(9).u32(1).u32(1).u32(1).u32(5).done();
        assert_eq!(
            parse_rpc_reply(&b).unwrap().stat,
            ReplyStat::Denied(RejectReason::AuthError(5))
        );
        assert_eq!(auth_stat_name(5), "AUTH_TOOWEAK");
        let b = Xdr::new().u32(9).u32(1).u32(1).u32(0).u32(2).u32(2).done();
        assert_eq!(
            parse_rpc_reply(&b).unwrap().stat,
            ReplyStat::Denied(RejectReason::RpcMismatch { low: 2, high: 2 })
        );
        assert!(matches!(
            parse_rpc_message(&Xdr::new().u32(9).u32(2).done()),
            Err(ParseError::Malformed(_))
        ));
    }

    #[test]
    fn record_mark() {
        let m = parse_record_mark(&[0x80, 0, 1, 0]).unwrap();
        assert_eq!(
            m,
            RecordMark {
                last: true,
                len: 256
            }
        );
        assert!(m.is_plausible());
        assert!(!parse_record_mark(&[0x7f, 0xff, 0xff, 0xff])
            .unwrap()
            .is_plausible());
        assert_eq!(parse_record_mark(&[0x80, 0]), Err(ParseError::Incomplete));
        assert_eq!(program_name(PROG_NFSACL), Some("nfs_acl"));
        assert_eq!(program_name(PROG_MOUNT), Some("mount"));
    }

    #[test]
    fn fuzz_rpc() {
        let seeds = vec![
            call_header(1, PROG_NFS, 3, 7).u32(5).done(),
            reply_header(1).u32(0).done(),
            with_mark(&call_header(2, PROG_MOUNT, 3, 1).done()),
        ];
        fuzz(&seeds, 20_000, |b| {
            let _ = parse_rpc_message(b);
            let _ = looks_like_rpc_call(b);
            let _ = looks_like_rpc_call_header(b);
            let _ = gss_integ_unwrap(b);
            if let Ok(RpcMessage::Call(c)) = parse_rpc_message(b) {
                assert!(c.body_offset <= b.len());
            }
        });
    }
}
