//! XDR (RFC 4506) and ONC RPC (RFC 5531) encoding with TCP record marking.
//!
//! NFS fixtures need real RPC framing: the analyser matches calls and
//! replies by XID, finds message boundaries through record marks that may
//! straddle TCP segments, and reads the program/version/procedure from the
//! call header. Only what clients and servers actually send on the wire is
//! implemented: calls with AUTH_SYS credentials and AUTH_NONE verifiers, and
//! accepted, successful replies (plus the other accept states, for
//! completeness).

/// RPC message types.
pub const CALL: u32 = 0;
pub const REPLY: u32 = 1;

/// Authentication flavors.
pub const AUTH_NONE: u32 = 0;
pub const AUTH_SYS: u32 = 1;

/// `accept_stat` values of an accepted reply.
pub mod accept_stat {
    pub const SUCCESS: u32 = 0;
    pub const PROG_UNAVAIL: u32 = 1;
    pub const PROG_MISMATCH: u32 = 2;
    pub const PROC_UNAVAIL: u32 = 3;
    pub const GARBAGE_ARGS: u32 = 4;
    pub const SYSTEM_ERR: u32 = 5;
}

/// An XDR encoder appending big-endian, 4-byte aligned items to a buffer.
#[derive(Debug, Clone, Default)]
pub struct Xdr {
    pub buf: Vec<u8>,
}

impl Xdr {
    pub fn new() -> Self {
        Xdr::default()
    }

    pub fn with_capacity(n: usize) -> Self {
        Xdr {
            buf: Vec::with_capacity(n),
        }
    }

    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u32(v as u32)
    }

    /// Fixed-length opaque data, zero-padded to a multiple of 4.
    pub fn opaque_fixed(&mut self, data: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(data);
        let pad = (4 - data.len() % 4) % 4;
        self.buf.extend_from_slice(&[0u8; 3][..pad]);
        self
    }

    /// Variable-length opaque data: length, bytes, padding.
    pub fn opaque(&mut self, data: &[u8]) -> &mut Self {
        self.u32(data.len() as u32);
        self.opaque_fixed(data)
    }

    pub fn string(&mut self, s: &str) -> &mut Self {
        self.opaque(s.as_bytes())
    }

    pub fn bytes(&mut self, raw: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(raw);
        self
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

/// AUTH_SYS (formerly AUTH_UNIX) credentials, RFC 5531 appendix A.
#[derive(Debug, Clone)]
pub struct AuthSys {
    pub stamp: u32,
    pub machine_name: String,
    pub uid: u32,
    pub gid: u32,
    pub gids: Vec<u32>,
}

impl AuthSys {
    pub fn new(machine_name: &str, uid: u32, gid: u32) -> Self {
        AuthSys {
            stamp: 0,
            machine_name: machine_name.to_string(),
            uid,
            gid,
            gids: vec![gid],
        }
    }

    fn encode(&self, x: &mut Xdr) {
        let mut body = Xdr::new();
        body.u32(self.stamp)
            .string(&self.machine_name)
            .u32(self.uid)
            .u32(self.gid);
        body.u32(self.gids.len() as u32);
        for g in &self.gids {
            body.u32(*g);
        }
        x.u32(AUTH_SYS).opaque(&body.buf);
    }
}

/// An RPC call message (without record mark).
pub fn encode_call(
    xid: u32,
    prog: u32,
    vers: u32,
    procedure: u32,
    cred: &AuthSys,
    args: &[u8],
) -> Vec<u8> {
    let mut x = Xdr::with_capacity(96 + cred.machine_name.len() + args.len());
    x.u32(xid)
        .u32(CALL)
        .u32(2)
        .u32(prog)
        .u32(vers)
        .u32(procedure);
    cred.encode(&mut x);
    x.u32(AUTH_NONE).u32(0);
    x.bytes(args);
    x.into_bytes()
}

/// An accepted RPC reply with `accept_stat` and, for SUCCESS, `results`.
pub fn encode_reply(xid: u32, stat: u32, results: &[u8]) -> Vec<u8> {
    let mut x = Xdr::with_capacity(24 + results.len());
    x.u32(xid).u32(REPLY).u32(0); // MSG_ACCEPTED
    x.u32(AUTH_NONE).u32(0);
    x.u32(stat);
    if stat == accept_stat::PROG_MISMATCH {
        x.u32(2).u32(4);
    }
    x.bytes(results);
    x.into_bytes()
}

/// A successful reply carrying `results`.
pub fn encode_reply_success(xid: u32, results: &[u8]) -> Vec<u8> {
    encode_reply(xid, accept_stat::SUCCESS, results)
}

/// Frame a message for TCP (RFC 5531 section 11): one record made of
/// fragments of at most `max_fragment` bytes, the last flagged.
pub fn record_mark_fragments(msg: &[u8], max_fragment: usize) -> Vec<u8> {
    assert!(max_fragment > 0 && max_fragment < (1 << 31));
    let mut out = Vec::with_capacity(msg.len() + 4 * (msg.len() / max_fragment + 1));
    let mut chunks = msg.chunks(max_fragment).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&0x8000_0000u32.to_be_bytes());
    }
    while let Some(c) = chunks.next() {
        let last = chunks.peek().is_none();
        let mark = c.len() as u32 | if last { 0x8000_0000 } else { 0 };
        out.extend_from_slice(&mark.to_be_bytes());
        out.extend_from_slice(c);
    }
    out
}

/// Frame a message as a single-fragment record.
pub fn record_mark(msg: &[u8]) -> Vec<u8> {
    record_mark_fragments(msg, (1 << 31) - 1)
}

/// A client issuing calls with increasing XIDs and fixed credentials.
#[derive(Debug, Clone)]
pub struct RpcClient {
    pub next_xid: u32,
    pub cred: AuthSys,
}

impl RpcClient {
    pub fn new(first_xid: u32, cred: AuthSys) -> Self {
        RpcClient {
            next_xid: first_xid,
            cred,
        }
    }

    /// A record-marked call; returns its XID and bytes.
    pub fn call(&mut self, prog: u32, vers: u32, procedure: u32, args: &[u8]) -> (u32, Vec<u8>) {
        let xid = self.next_xid;
        self.next_xid = self.next_xid.wrapping_add(1);
        (
            xid,
            record_mark(&encode_call(xid, prog, vers, procedure, &self.cred, args)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdr_padding() {
        let mut x = Xdr::new();
        x.string("abcde");
        assert_eq!(
            x.buf,
            vec![0, 0, 0, 5, b'a', b'b', b'c', b'd', b'e', 0, 0, 0]
        );
    }

    #[test]
    fn record_marks() {
        let r = record_mark(&[1, 2, 3, 4]);
        assert_eq!(r, vec![0x80, 0, 0, 4, 1, 2, 3, 4]);
        let r = record_mark_fragments(&[1, 2, 3, 4, 5], 4);
        assert_eq!(r, vec![0, 0, 0, 4, 1, 2, 3, 4, 0x80, 0, 0, 1, 5]);
    }

    #[test]
    fn call_header_layout() {
        let cred = AuthSys::new("client", 1000, 1000);
        let m = encode_call(0x1234, 100003, 3, 1, &cred, &[]);
        assert_eq!(&m[..4], &0x1234u32.to_be_bytes());
        assert_eq!(&m[12..16], &100003u32.to_be_bytes());
        assert_eq!(&m[24..28], &AUTH_SYS.to_be_bytes());
        // Cred body: stamp 4 + name 4+8 + uid 4 + gid 4 + gids 4+4 = 32.
        assert_eq!(&m[28..32], &32u32.to_be_bytes());
        assert_eq!(m.len(), 32 + 32 + 8);
    }
}
