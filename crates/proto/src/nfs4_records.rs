//! NFSv4.0/4.1/4.2 COMPOUND arguments and results (RFC 7530, RFC 8881,
//! RFC 7862, plus the RFC 8276 extended-attribute operations).
//!
//! A COMPOUND is an array of operations with no per-operation length, so
//! finding operation N means decoding operations 0..N. Every operation
//! (3..=75 and OP_ILLEGAL) is therefore walked field by field; only the
//! fields a transaction table needs are kept ([`Nfs4OpArgs`],
//! [`Nfs4OpRes`]). When an operation cannot be walked (unknown number,
//! malformed or cut by the capture), decoding stops and [`Stopped`] says at
//! which index and why; the operations before it are still returned.
//!
//! Bulk payloads (WRITE/READ/READ_PLUS data, xattr values) are skipped by
//! their length field. A payload cut by the capture still yields the
//! operation with `data_complete == false`; decoding then stops at the next
//! operation, if any.
//!
//! # Principal operation
//!
//! A COMPOUND usually wraps one "real" operation in plumbing: `SEQUENCE,
//! PUTFH, READ` or `PUTFH, LOOKUP, GETFH, GETATTR`. The principal operation
//! — the one a request is reported as — is the first operation that is
//! not SEQUENCE, PUTFH, PUTROOTFH, PUTPUBFH, GETATTR, GETFH, SAVEFH or
//! RESTOREFH. If there is none, it is the first GETATTR (a pure attribute
//! fetch), and failing that the first operation (e.g. a lone SEQUENCE used
//! as a lease renewal). See [`principal_op_index`].

use std::borrow::Cow;

use crate::error::{ParseError, Result};
use crate::xdr::{pad4, XdrCursor, MAX_NAME_LEN};

pub const NFSPROC4_NULL: u32 = 0;
pub const NFSPROC4_COMPOUND: u32 = 1;

pub fn nfs4_proc_name(proc_: u32) -> &'static str {
    match proc_ {
        NFSPROC4_NULL => "NULL",
        NFSPROC4_COMPOUND => "COMPOUND",
        _ => "UNKNOWN",
    }
}

pub const NFS4_FHSIZE: u32 = 128;
pub const NFS4_OPAQUE_LIMIT: u32 = 1024;
/// Bound on bulk opaques (data, attribute lists, layouts): far above any
/// rsize/wsize, small enough to reject garbage lengths.
pub const MAX_DATA_LEN: u32 = 64 << 20;
/// Most operations accepted in one COMPOUND (servers allow a few dozen).
pub const MAX_OPS: u32 = 4096;
const MAX_BITMAP_WORDS: u32 = 64;

pub const OP_ACCESS: u32 = 3;
pub const OP_CLOSE: u32 = 4;
pub const OP_COMMIT: u32 = 5;
pub const OP_CREATE: u32 = 6;
pub const OP_DELEGPURGE: u32 = 7;
pub const OP_DELEGRETURN: u32 = 8;
pub const OP_GETATTR: u32 = 9;
pub const OP_GETFH: u32 = 10;
pub const OP_LINK: u32 = 11;
pub const OP_LOCK: u32 = 12;
pub const OP_LOCKT: u32 = 13;
pub const OP_LOCKU: u32 = 14;
pub const OP_LOOKUP: u32 = 15;
pub const OP_LOOKUPP: u32 = 16;
pub const OP_NVERIFY: u32 = 17;
pub const OP_OPEN: u32 = 18;
pub const OP_OPENATTR: u32 = 19;
pub const OP_OPEN_CONFIRM: u32 = 20;
pub const OP_OPEN_DOWNGRADE: u32 = 21;
pub const OP_PUTFH: u32 = 22;
pub const OP_PUTPUBFH: u32 = 23;
pub const OP_PUTROOTFH: u32 = 24;
pub const OP_READ: u32 = 25;
pub const OP_READDIR: u32 = 26;
pub const OP_READLINK: u32 = 27;
pub const OP_REMOVE: u32 = 28;
pub const OP_RENAME: u32 = 29;
pub const OP_RENEW: u32 = 30;
pub const OP_RESTOREFH: u32 = 31;
pub const OP_SAVEFH: u32 = 32;
pub const OP_SECINFO: u32 = 33;
pub const OP_SETATTR: u32 = 34;
pub const OP_SETCLIENTID: u32 = 35;
pub const OP_SETCLIENTID_CONFIRM: u32 = 36;
pub const OP_VERIFY: u32 = 37;
pub const OP_WRITE: u32 = 38;
pub const OP_RELEASE_LOCKOWNER: u32 = 39;
pub const OP_BACKCHANNEL_CTL: u32 = 40;
pub const OP_BIND_CONN_TO_SESSION: u32 = 41;
pub const OP_EXCHANGE_ID: u32 = 42;
pub const OP_CREATE_SESSION: u32 = 43;
pub const OP_DESTROY_SESSION: u32 = 44;
pub const OP_FREE_STATEID: u32 = 45;
pub const OP_GET_DIR_DELEGATION: u32 = 46;
pub const OP_GETDEVICEINFO: u32 = 47;
pub const OP_GETDEVICELIST: u32 = 48;
pub const OP_LAYOUTCOMMIT: u32 = 49;
pub const OP_LAYOUTGET: u32 = 50;
pub const OP_LAYOUTRETURN: u32 = 51;
pub const OP_SECINFO_NO_NAME: u32 = 52;
pub const OP_SEQUENCE: u32 = 53;
pub const OP_SET_SSV: u32 = 54;
pub const OP_TEST_STATEID: u32 = 55;
pub const OP_WANT_DELEGATION: u32 = 56;
pub const OP_DESTROY_CLIENTID: u32 = 57;
pub const OP_RECLAIM_COMPLETE: u32 = 58;
pub const OP_ALLOCATE: u32 = 59;
pub const OP_COPY: u32 = 60;
pub const OP_COPY_NOTIFY: u32 = 61;
pub const OP_DEALLOCATE: u32 = 62;
pub const OP_IO_ADVISE: u32 = 63;
pub const OP_LAYOUTERROR: u32 = 64;
pub const OP_LAYOUTSTATS: u32 = 65;
pub const OP_OFFLOAD_CANCEL: u32 = 66;
pub const OP_OFFLOAD_STATUS: u32 = 67;
pub const OP_READ_PLUS: u32 = 68;
pub const OP_SEEK: u32 = 69;
pub const OP_WRITE_SAME: u32 = 70;
pub const OP_CLONE: u32 = 71;
pub const OP_GETXATTR: u32 = 72;
pub const OP_SETXATTR: u32 = 73;
pub const OP_LISTXATTRS: u32 = 74;
pub const OP_REMOVEXATTR: u32 = 75;
pub const OP_ILLEGAL: u32 = 10044;

const OP_NAMES: [&str; 73] = [
    "ACCESS",
    "CLOSE",
    "COMMIT",
    "CREATE",
    "DELEGPURGE",
    "DELEGRETURN",
    "GETATTR",
    "GETFH",
    "LINK",
    "LOCK",
    "LOCKT",
    "LOCKU",
    "LOOKUP",
    "LOOKUPP",
    "NVERIFY",
    "OPEN",
    "OPENATTR",
    "OPEN_CONFIRM",
    "OPEN_DOWNGRADE",
    "PUTFH",
    "PUTPUBFH",
    "PUTROOTFH",
    "READ",
    "READDIR",
    "READLINK",
    "REMOVE",
    "RENAME",
    "RENEW",
    "RESTOREFH",
    "SAVEFH",
    "SECINFO",
    "SETATTR",
    "SETCLIENTID",
    "SETCLIENTID_CONFIRM",
    "VERIFY",
    "WRITE",
    "RELEASE_LOCKOWNER",
    "BACKCHANNEL_CTL",
    "BIND_CONN_TO_SESSION",
    "EXCHANGE_ID",
    "CREATE_SESSION",
    "DESTROY_SESSION",
    "FREE_STATEID",
    "GET_DIR_DELEGATION",
    "GETDEVICEINFO",
    "GETDEVICELIST",
    "LAYOUTCOMMIT",
    "LAYOUTGET",
    "LAYOUTRETURN",
    "SECINFO_NO_NAME",
    "SEQUENCE",
    "SET_SSV",
    "TEST_STATEID",
    "WANT_DELEGATION",
    "DESTROY_CLIENTID",
    "RECLAIM_COMPLETE",
    "ALLOCATE",
    "COPY",
    "COPY_NOTIFY",
    "DEALLOCATE",
    "IO_ADVISE",
    "LAYOUTERROR",
    "LAYOUTSTATS",
    "OFFLOAD_CANCEL",
    "OFFLOAD_STATUS",
    "READ_PLUS",
    "SEEK",
    "WRITE_SAME",
    "CLONE",
    "GETXATTR",
    "SETXATTR",
    "LISTXATTRS",
    "REMOVEXATTR",
];

pub fn nfs4_op_name(op: u32) -> &'static str {
    if op == OP_ILLEGAL {
        return "ILLEGAL";
    }
    op.checked_sub(OP_ACCESS)
        .and_then(|i| OP_NAMES.get(i as usize))
        .copied()
        .unwrap_or("UNKNOWN")
}

pub const NFS4_OK: u32 = 0;
pub const NFS4ERR_TOOSMALL: u32 = 10005;
pub const NFS4ERR_DELAY: u32 = 10008;
pub const NFS4ERR_DENIED: u32 = 10010;
pub const NFS4ERR_CLID_INUSE: u32 = 10017;
pub const NFS4ERR_LAYOUTTRYLATER: u32 = 10058;
pub const NFS4ERR_OFFLOAD_NO_REQS: u32 = 10094;

/// Name of an nfsstat4 value (RFC 8881 section 15, RFC 7862, RFC 8276).
pub fn nfs4_status_name(status: u32) -> &'static str {
    const LOW: [(u32, &str); 19] = [
        (0, "NFS4_OK"),
        (1, "NFS4ERR_PERM"),
        (2, "NFS4ERR_NOENT"),
        (5, "NFS4ERR_IO"),
        (6, "NFS4ERR_NXIO"),
        (13, "NFS4ERR_ACCESS"),
        (17, "NFS4ERR_EXIST"),
        (18, "NFS4ERR_XDEV"),
        (20, "NFS4ERR_NOTDIR"),
        (21, "NFS4ERR_ISDIR"),
        (22, "NFS4ERR_INVAL"),
        (27, "NFS4ERR_FBIG"),
        (28, "NFS4ERR_NOSPC"),
        (30, "NFS4ERR_ROFS"),
        (31, "NFS4ERR_MLINK"),
        (63, "NFS4ERR_NAMETOOLONG"),
        (66, "NFS4ERR_NOTEMPTY"),
        (69, "NFS4ERR_DQUOT"),
        (70, "NFS4ERR_STALE"),
    ];
    // 10001..=10096, in order; 10002 and 10073 are unassigned.
    const HIGH: [&str; 96] = [
        "NFS4ERR_BADHANDLE",
        "NFS4ERR_UNKNOWN",
        "NFS4ERR_BAD_COOKIE",
        "NFS4ERR_NOTSUPP",
        "NFS4ERR_TOOSMALL",
        "NFS4ERR_SERVERFAULT",
        "NFS4ERR_BADTYPE",
        "NFS4ERR_DELAY",
        "NFS4ERR_SAME",
        "NFS4ERR_DENIED",
        "NFS4ERR_EXPIRED",
        "NFS4ERR_LOCKED",
        "NFS4ERR_GRACE",
        "NFS4ERR_FHEXPIRED",
        "NFS4ERR_SHARE_DENIED",
        "NFS4ERR_WRONGSEC",
        "NFS4ERR_CLID_INUSE",
        "NFS4ERR_RESOURCE",
        "NFS4ERR_MOVED",
        "NFS4ERR_NOFILEHANDLE",
        "NFS4ERR_MINOR_VERS_MISMATCH",
        "NFS4ERR_STALE_CLIENTID",
        "NFS4ERR_STALE_STATEID",
        "NFS4ERR_OLD_STATEID",
        "NFS4ERR_BAD_STATEID",
        "NFS4ERR_BAD_SEQID",
        "NFS4ERR_NOT_SAME",
        "NFS4ERR_LOCK_RANGE",
        "NFS4ERR_SYMLINK",
        "NFS4ERR_RESTOREFH",
        "NFS4ERR_LEASE_MOVED",
        "NFS4ERR_ATTRNOTSUPP",
        "NFS4ERR_NO_GRACE",
        "NFS4ERR_RECLAIM_BAD",
        "NFS4ERR_RECLAIM_CONFLICT",
        "NFS4ERR_BADXDR",
        "NFS4ERR_LOCKS_HELD",
        "NFS4ERR_OPENMODE",
        "NFS4ERR_BADOWNER",
        "NFS4ERR_BADCHAR",
        "NFS4ERR_BADNAME",
        "NFS4ERR_BAD_RANGE",
        "NFS4ERR_LOCK_NOTSUPP",
        "NFS4ERR_OP_ILLEGAL",
        "NFS4ERR_DEADLOCK",
        "NFS4ERR_FILE_OPEN",
        "NFS4ERR_ADMIN_REVOKED",
        "NFS4ERR_CB_PATH_DOWN",
        "NFS4ERR_BADIOMODE",
        "NFS4ERR_BADLAYOUT",
        "NFS4ERR_BAD_SESSION_DIGEST",
        "NFS4ERR_BADSESSION",
        "NFS4ERR_BADSLOT",
        "NFS4ERR_COMPLETE_ALREADY",
        "NFS4ERR_CONN_NOT_BOUND_TO_SESSION",
        "NFS4ERR_DELEG_ALREADY_WANTED",
        "NFS4ERR_BACK_CHAN_BUSY",
        "NFS4ERR_LAYOUTTRYLATER",
        "NFS4ERR_LAYOUTUNAVAILABLE",
        "NFS4ERR_NOMATCHING_LAYOUT",
        "NFS4ERR_RECALLCONFLICT",
        "NFS4ERR_UNKNOWN_LAYOUTTYPE",
        "NFS4ERR_SEQ_MISORDERED",
        "NFS4ERR_SEQUENCE_POS",
        "NFS4ERR_REQ_TOO_BIG",
        "NFS4ERR_REP_TOO_BIG",
        "NFS4ERR_REP_TOO_BIG_TO_CACHE",
        "NFS4ERR_RETRY_UNCACHED_REP",
        "NFS4ERR_UNSAFE_COMPOUND",
        "NFS4ERR_TOO_MANY_OPS",
        "NFS4ERR_OP_NOT_IN_SESSION",
        "NFS4ERR_HASH_ALG_UNSUPP",
        "NFS4ERR_UNKNOWN",
        "NFS4ERR_CLIENTID_BUSY",
        "NFS4ERR_PNFS_IO_HOLE",
        "NFS4ERR_SEQ_FALSE_RETRY",
        "NFS4ERR_BAD_HIGH_SLOT",
        "NFS4ERR_DEADSESSION",
        "NFS4ERR_ENCR_ALG_UNSUPP",
        "NFS4ERR_PNFS_NO_LAYOUT",
        "NFS4ERR_NOT_ONLY_OP",
        "NFS4ERR_WRONG_CRED",
        "NFS4ERR_WRONG_TYPE",
        "NFS4ERR_DIRDELEG_UNAVAIL",
        "NFS4ERR_REJECT_DELEG",
        "NFS4ERR_RETURNCONFLICT",
        "NFS4ERR_DELEG_REVOKED",
        "NFS4ERR_PARTNER_NOTSUPP",
        "NFS4ERR_PARTNER_NO_AUTH",
        "NFS4ERR_UNION_NOTSUPP",
        "NFS4ERR_OFFLOAD_DENIED",
        "NFS4ERR_WRONG_LFS",
        "NFS4ERR_BADLABEL",
        "NFS4ERR_OFFLOAD_NO_REQS",
        "NFS4ERR_NOXATTR",
        "NFS4ERR_XATTR2BIG",
    ];
    if let Some((_, n)) = LOW.iter().find(|(v, _)| *v == status) {
        return n;
    }
    status
        .checked_sub(10001)
        .and_then(|i| HIGH.get(i as usize))
        .copied()
        .unwrap_or("NFS4ERR_UNKNOWN")
}

/// Fields kept from an operation's arguments (handles borrowed from the
/// message: most COMPOUNDs carry one, and they are parsed without a copy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nfs4OpArgs<'a> {
    /// Walked; nothing kept.
    None,
    PutFh {
        fh: &'a [u8],
    },
    Lookup {
        name: String,
    },
    /// `name` is set for the name-based claims (CLAIM_NULL,
    /// CLAIM_DELEGATE_CUR, CLAIM_DELEGATE_PREV).
    Open {
        seqid: u32,
        share_access: u32,
        share_deny: u32,
        create: bool,
        claim: u32,
        name: Option<String>,
    },
    Create {
        objtype: u32,
        name: String,
    },
    Remove {
        name: String,
    },
    Rename {
        old: String,
        new: String,
    },
    Link {
        name: String,
    },
    /// READ and READ_PLUS.
    Read {
        stateid: [u8; 16],
        offset: u64,
        count: u32,
    },
    Write {
        stateid: [u8; 16],
        offset: u64,
        stable: u32,
        /// Payload length from its length field.
        data_len: u32,
        data_complete: bool,
    },
    Commit {
        offset: u64,
        count: u32,
    },
    Sequence {
        session_id: [u8; 16],
        sequence_id: u32,
        slot_id: u32,
        highest_slot_id: u32,
        cache_this: bool,
    },
}

/// Fields kept from an operation's result (beyond its status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nfs4OpRes<'a> {
    /// Walked; nothing kept (or the status was an error).
    None,
    GetFh {
        fh: &'a [u8],
    },
    /// Size and change attribute, when the reply carried them.
    Getattr {
        change: Option<u64>,
        size: Option<u64>,
    },
    Open {
        stateid: [u8; 16],
        rflags: u32,
        delegation: u32,
    },
    /// READ and READ_PLUS (for READ_PLUS `data_len` sums the data segments).
    Read {
        eof: bool,
        data_len: u32,
        data_complete: bool,
    },
    Write {
        count: u32,
        committed: u32,
    },
    Sequence {
        session_id: [u8; 16],
        sequence_id: u32,
        slot_id: u32,
        highest_slot_id: u32,
        target_highest_slot_id: u32,
        status_flags: u32,
    },
    /// Fore-channel limits the server granted.
    CreateSession {
        session_id: [u8; 16],
        max_request_size: u32,
        max_response_size: u32,
        max_requests: u32,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nfs4ArgOp<'a> {
    pub op: u32,
    pub args: Nfs4OpArgs<'a>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nfs4ResOp<'a> {
    pub op: u32,
    pub status: u32,
    pub res: Nfs4OpRes<'a>,
}

/// Where and why walking the operation array stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped {
    /// Index of the first operation that could not be decoded.
    pub index: usize,
    /// Its operation number, if that much could be read.
    pub op: Option<u32>,
    pub error: ParseError,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compound4Args<'a> {
    /// Invalid UTF-8 replaced (a copy only then).
    pub tag: Cow<'a, str>,
    pub minorversion: u32,
    /// Number of operations declared by the array length.
    pub num_ops: u32,
    pub ops: Vec<Nfs4ArgOp<'a>>,
    pub stopped: Option<Stopped>,
    /// A bulk payload (WRITE data, xattr value) was cut by the capture.
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compound4Res<'a> {
    pub status: u32,
    /// Invalid UTF-8 replaced (a copy only then).
    pub tag: Cow<'a, str>,
    pub num_ops: u32,
    pub ops: Vec<Nfs4ResOp<'a>>,
    pub stopped: Option<Stopped>,
    /// A bulk payload (READ/READ_PLUS data, xattr value) was cut.
    pub truncated: bool,
}

impl<'a> Compound4Args<'a> {
    pub fn opnums(&self) -> Vec<u32> {
        self.ops.iter().map(|o| o.op).collect()
    }
    /// The principal operation (see the module documentation).
    pub fn principal_op(&self) -> Option<&Nfs4ArgOp<'a>> {
        principal_in(self.ops.iter().map(|o| o.op)).and_then(|i| self.ops.get(i))
    }
    /// Every declared operation was decoded with all its payload.
    pub fn complete(&self) -> bool {
        self.stopped.is_none() && !self.truncated
    }
    /// The SEQUENCE arguments, if the COMPOUND starts a v4.1+ session slot.
    pub fn sequence(&self) -> Option<&Nfs4OpArgs<'a>> {
        self.ops
            .iter()
            .map(|o| &o.args)
            .find(|a| matches!(a, Nfs4OpArgs::Sequence { .. }))
    }
}

impl<'a> Compound4Res<'a> {
    pub fn opnums(&self) -> Vec<u32> {
        self.ops.iter().map(|o| o.op).collect()
    }
    pub fn principal_op(&self) -> Option<&Nfs4ResOp<'a>> {
        principal_in(self.ops.iter().map(|o| o.op)).and_then(|i| self.ops.get(i))
    }
    pub fn complete(&self) -> bool {
        self.stopped.is_none() && !self.truncated
    }
    pub fn sequence(&self) -> Option<&Nfs4OpRes<'a>> {
        self.ops
            .iter()
            .map(|o| &o.res)
            .find(|r| matches!(r, Nfs4OpRes::Sequence { .. }))
    }
}

/// Operations that only set up or report context for the real work.
fn is_plumbing(op: u32) -> bool {
    matches!(
        op,
        OP_SEQUENCE
            | OP_PUTFH
            | OP_PUTROOTFH
            | OP_PUTPUBFH
            | OP_GETATTR
            | OP_GETFH
            | OP_SAVEFH
            | OP_RESTOREFH
    )
}

/// Index of the principal operation: the first non-plumbing operation,
/// else the first GETATTR, else the first operation; `None` if empty.
pub fn principal_op_index(ops: &[u32]) -> Option<usize> {
    principal_in(ops.iter().copied())
}

fn principal_in(ops: impl Iterator<Item = u32> + Clone) -> Option<usize> {
    ops.clone()
        .position(|op| !is_plumbing(op))
        .or_else(|| ops.clone().position(|op| op == OP_GETATTR))
        .or_else(|| ops.clone().next().map(|_| 0))
}

/// Decode COMPOUND4args; `body` starts at the RPC procedure body of a
/// NFSPROC4_COMPOUND call. Errors only if the header (tag, minorversion,
/// array length) cannot be read; later failures are reported in `stopped`.
pub fn parse_compound4_args(body: &[u8]) -> Result<Compound4Args<'_>> {
    let mut c = XdrCursor::new(body);
    let tag = String::from_utf8_lossy(c.opaque(NFS4_OPAQUE_LIMIT)?);
    let minorversion = c.u32()?;
    let num_ops = c.count(MAX_OPS)?;
    let mut ops = Vec::with_capacity(c.capacity_hint(num_ops, 4));
    let mut stopped = None;
    let mut truncated = false;
    for index in 0..num_ops as usize {
        let op = match c.u32() {
            Ok(op) => op,
            Err(error) => {
                stopped = Some(Stopped {
                    index,
                    op: None,
                    error,
                });
                break;
            }
        };
        match walk_args(op, &mut c, &mut truncated) {
            Ok(args) => ops.push(Nfs4ArgOp { op, args }),
            Err(error) => {
                stopped = Some(Stopped {
                    index,
                    op: Some(op),
                    error,
                });
                break;
            }
        }
    }
    Ok(Compound4Args {
        tag,
        minorversion,
        num_ops,
        ops,
        stopped,
        truncated,
    })
}

/// Decode COMPOUND4res; `body` starts at the RPC results. The array holds
/// the operations executed, up to and including the first that failed.
pub fn parse_compound4_res(body: &[u8]) -> Result<Compound4Res<'_>> {
    let mut c = XdrCursor::new(body);
    let status = c.u32()?;
    let tag = String::from_utf8_lossy(c.opaque(NFS4_OPAQUE_LIMIT)?);
    let num_ops = c.count(MAX_OPS)?;
    let mut ops = Vec::with_capacity(c.capacity_hint(num_ops, 8));
    let mut stopped = None;
    let mut truncated = false;
    for index in 0..num_ops as usize {
        let op = match c.u32() {
            Ok(op) => op,
            Err(error) => {
                stopped = Some(Stopped {
                    index,
                    op: None,
                    error,
                });
                break;
            }
        };
        let r = c
            .u32()
            .and_then(|st| walk_res(op, st, &mut c, &mut truncated).map(|res| (st, res)));
        match r {
            Ok((status, res)) => ops.push(Nfs4ResOp { op, status, res }),
            Err(error) => {
                stopped = Some(Stopped {
                    index,
                    op: Some(op),
                    error,
                });
                break;
            }
        }
    }
    Ok(Compound4Res {
        status,
        tag,
        num_ops,
        ops,
        stopped,
        truncated,
    })
}

// ---- shared XDR pieces -------------------------------------------------

fn stateid(c: &mut XdrCursor) -> Result<[u8; 16]> {
    c.array::<16>()
}

fn bitmap(c: &mut XdrCursor) -> Result<()> {
    c.skip_u32_array(MAX_BITMAP_WORDS)
}

fn fattr4(c: &mut XdrCursor) -> Result<()> {
    bitmap(c)?;
    c.skip_opaque(MAX_DATA_LEN)
}

fn utf8(c: &mut XdrCursor) -> Result<()> {
    c.skip_opaque(MAX_NAME_LEN)
}

fn state_owner(c: &mut XdrCursor) -> Result<()> {
    c.skip(8)?;
    c.skip_opaque(NFS4_OPAQUE_LIMIT)
}

const NFSTIME4: usize = 12;
const CHANGE_INFO4: usize = 20;

fn netaddr(c: &mut XdrCursor) -> Result<()> {
    utf8(c)?;
    utf8(c)
}

fn netloc(c: &mut XdrCursor) -> Result<()> {
    match c.u32()? {
        1 | 2 => utf8(c),
        3 => netaddr(c),
        _ => Err(ParseError::Malformed("nfs4 netloc type")),
    }
}

fn netloc_array(c: &mut XdrCursor) -> Result<()> {
    for _ in 0..c.count(MAX_OPS)? {
        netloc(c)?;
    }
    Ok(())
}

/// callback_sec_parms4<> (CREATE_SESSION, BACKCHANNEL_CTL).
fn cb_sec_parms(c: &mut XdrCursor) -> Result<()> {
    for _ in 0..c.count(MAX_OPS)? {
        match c.u32()? {
            0 => {}
            1 => {
                c.skip(4)?;
                c.skip_opaque(255)?;
                c.skip(8)?;
                c.skip_u32_array(16)?;
            }
            6 => {
                c.skip(4)?;
                c.skip_opaque(MAX_DATA_LEN)?;
                c.skip_opaque(MAX_DATA_LEN)?;
            }
            _ => return Err(ParseError::Malformed("nfs4 callback_sec_parms flavor")),
        }
    }
    Ok(())
}

fn channel_attrs(c: &mut XdrCursor) -> Result<[u32; 6]> {
    let mut a = [0u32; 6];
    for x in a.iter_mut() {
        *x = c.u32()?;
    }
    c.skip_u32_array(1)?; // ca_rdma_ird<1>
    Ok(a)
}

fn impl_id(c: &mut XdrCursor) -> Result<()> {
    for _ in 0..c.count(1)? {
        utf8(c)?;
        utf8(c)?;
        c.skip(NFSTIME4)?;
    }
    Ok(())
}

fn state_protect_ops(c: &mut XdrCursor) -> Result<()> {
    bitmap(c)?;
    bitmap(c)
}

fn opaque_array(c: &mut XdrCursor, max: u32) -> Result<()> {
    for _ in 0..c.count(MAX_OPS)? {
        c.skip_opaque(max)?;
    }
    Ok(())
}

fn nfsace(c: &mut XdrCursor) -> Result<()> {
    c.skip(12)?;
    utf8(c)
}

/// open_delegation4; returns the delegation type.
fn open_delegation(c: &mut XdrCursor) -> Result<u32> {
    let t = c.u32()?;
    match t {
        0 => {}
        1 => {
            c.skip(16 + 4)?;
            nfsace(c)?;
        }
        2 => {
            c.skip(16 + 4)?;
            match c.u32()? {
                1 => c.skip(8)?,
                2 => c.skip(8)?,
                _ => return Err(ParseError::Malformed("nfs4 space limit type")),
            }
            nfsace(c)?;
        }
        3 => {
            // WND4_CONTENTION / WND4_RESOURCE carry a bool.
            if matches!(c.u32()?, 1 | 2) {
                c.bool()?;
            }
        }
        _ => return Err(ParseError::Malformed("nfs4 delegation type")),
    }
    Ok(t)
}

fn secinfo_res(c: &mut XdrCursor) -> Result<()> {
    for _ in 0..c.count(MAX_OPS)? {
        if c.u32()? == 6 {
            c.skip_opaque(NFS4_OPAQUE_LIMIT)?;
            c.skip(8)?;
        }
    }
    Ok(())
}

fn layoutupdate(c: &mut XdrCursor) -> Result<()> {
    c.skip(4)?;
    c.skip_opaque(MAX_DATA_LEN)
}

fn write_response(c: &mut XdrCursor) -> Result<()> {
    for _ in 0..c.count(1)? {
        c.skip(16)?;
    }
    c.skip(8 + 4 + 8)
}

fn lock_denied(c: &mut XdrCursor) -> Result<()> {
    c.skip(8 + 8 + 4)?;
    state_owner(c)
}

/// A bulk payload: returns its declared length and whether all of it (with
/// padding) is present. A cut payload consumes the rest of the input.
fn payload(c: &mut XdrCursor, cut: &mut bool) -> Result<(u32, bool)> {
    let len = c.opaque_len(MAX_DATA_LEN)?;
    if c.remaining() >= pad4(len as usize) {
        c.skip_padded(len as usize)?;
        Ok((len, true))
    } else {
        c.skip_to_end();
        *cut = true;
        Ok((len, false))
    }
}

/// From a fattr4, the change (attr 3) and size (attr 4) values. Attributes
/// are encoded in bit order, and 0..=2 are decodable without a table.
fn fattr4_change_size(c: &mut XdrCursor) -> Result<(Option<u64>, Option<u64>)> {
    let n = c.count(MAX_BITMAP_WORDS)?;
    let mut word0 = 0u32;
    for i in 0..n {
        let w = c.u32()?;
        if i == 0 {
            word0 = w;
        }
    }
    let vals = c.opaque(MAX_DATA_LEN)?;
    let mut v = XdrCursor::new(vals);
    let has = |bit: u32| word0 & (1 << bit) != 0;
    let mut out = (None, None);
    let mut decode = || -> Result<()> {
        if has(0) {
            v.skip_u32_array(MAX_BITMAP_WORDS)?;
        }
        if has(1) {
            v.skip(4)?;
        }
        if has(2) {
            v.skip(4)?;
        }
        if has(3) {
            out.0 = Some(v.u64()?);
        }
        if has(4) {
            out.1 = Some(v.u64()?);
        }
        Ok(())
    };
    decode().map_err(|e| e.within_blob("nfs4 fattr4 attribute values"))?;
    Ok(out)
}

// ---- per-operation walkers ---------------------------------------------

fn walk_args<'a>(op: u32, c: &mut XdrCursor<'a>, cut: &mut bool) -> Result<Nfs4OpArgs<'a>> {
    use Nfs4OpArgs as A;
    let a = match op {
        OP_ACCESS => c.skip(4).map(|_| A::None)?,
        OP_CLOSE => c.skip(4 + 16).map(|_| A::None)?,
        OP_COMMIT => A::Commit {
            offset: c.u64()?,
            count: c.u32()?,
        },
        OP_CREATE => {
            let objtype = c.u32()?;
            match objtype {
                5 => c.skip_opaque(MAX_NAME_LEN)?, // NF4LNK: link target
                3 | 4 => c.skip(8)?,               // NF4BLK/NF4CHR: specdata4
                _ => {}
            }
            let name = c.name()?;
            fattr4(c)?;
            A::Create { objtype, name }
        }
        OP_DELEGPURGE | OP_RENEW | OP_DESTROY_CLIENTID => c.skip(8).map(|_| A::None)?,
        OP_DELEGRETURN | OP_FREE_STATEID | OP_OFFLOAD_CANCEL | OP_OFFLOAD_STATUS => {
            c.skip(16).map(|_| A::None)?
        }
        OP_GETATTR => bitmap(c).map(|_| A::None)?,
        OP_GETFH | OP_LOOKUPP | OP_PUTPUBFH | OP_PUTROOTFH | OP_READLINK | OP_RESTOREFH
        | OP_SAVEFH | OP_ILLEGAL => A::None,
        OP_LINK => A::Link { name: c.name()? },
        OP_LOCK => {
            c.skip(4)?;
            c.bool()?;
            c.skip(16)?;
            if c.bool()? {
                c.skip(4 + 16 + 4)?;
                state_owner(c)?;
            } else {
                c.skip(16 + 4)?;
            }
            A::None
        }
        OP_LOCKT => {
            c.skip(4 + 16)?;
            state_owner(c).map(|_| A::None)?
        }
        OP_LOCKU => c.skip(4 + 4 + 16 + 16).map(|_| A::None)?,
        OP_LOOKUP => A::Lookup { name: c.name()? },
        OP_NVERIFY | OP_VERIFY => fattr4(c).map(|_| A::None)?,
        OP_OPEN => {
            let seqid = c.u32()?;
            let share_access = c.u32()?;
            let share_deny = c.u32()?;
            state_owner(c)?;
            let create = c.u32()? == 1;
            if create {
                match c.u32()? {
                    0 | 1 => fattr4(c)?,
                    2 => c.skip(8)?,
                    3 => {
                        c.skip(8)?;
                        fattr4(c)?;
                    }
                    _ => return Err(ParseError::Malformed("nfs4 createmode")),
                }
            }
            let claim = c.u32()?;
            let name = match claim {
                0 | 3 => Some(c.name()?),
                1 => c.skip(4).map(|_| None)?,
                2 => {
                    c.skip(16)?;
                    Some(c.name()?)
                }
                4 | 6 => None,
                5 => c.skip(16).map(|_| None)?,
                _ => return Err(ParseError::Malformed("nfs4 open claim type")),
            };
            A::Open {
                seqid,
                share_access,
                share_deny,
                create,
                claim,
                name,
            }
        }
        OP_OPENATTR | OP_RECLAIM_COMPLETE => c.bool().map(|_| A::None)?,
        OP_OPEN_CONFIRM => c.skip(16 + 4).map(|_| A::None)?,
        OP_OPEN_DOWNGRADE => c.skip(16 + 12).map(|_| A::None)?,
        OP_PUTFH => A::PutFh {
            fh: c.opaque(NFS4_FHSIZE)?,
        },
        OP_READ | OP_READ_PLUS => A::Read {
            stateid: stateid(c)?,
            offset: c.u64()?,
            count: c.u32()?,
        },
        OP_READDIR => {
            c.skip(8 + 8 + 4 + 4)?;
            bitmap(c).map(|_| A::None)?
        }
        OP_REMOVE => A::Remove { name: c.name()? },
        OP_RENAME => A::Rename {
            old: c.name()?,
            new: c.name()?,
        },
        OP_SECINFO | OP_GETXATTR | OP_REMOVEXATTR => utf8(c).map(|_| A::None)?,
        OP_SETATTR => {
            c.skip(16)?;
            fattr4(c).map(|_| A::None)?
        }
        OP_SETCLIENTID => {
            c.skip(8)?;
            c.skip_opaque(NFS4_OPAQUE_LIMIT)?;
            c.skip(4)?;
            netaddr(c)?;
            c.skip(4).map(|_| A::None)?
        }
        OP_SETCLIENTID_CONFIRM => c.skip(16).map(|_| A::None)?,
        OP_WRITE => {
            let stateid = stateid(c)?;
            let offset = c.u64()?;
            let stable = c.u32()?;
            let (data_len, data_complete) = payload(c, cut)?;
            A::Write {
                stateid,
                offset,
                stable,
                data_len,
                data_complete,
            }
        }
        OP_RELEASE_LOCKOWNER => state_owner(c).map(|_| A::None)?,
        OP_BACKCHANNEL_CTL => {
            c.skip(4)?;
            cb_sec_parms(c).map(|_| A::None)?
        }
        OP_BIND_CONN_TO_SESSION => {
            c.skip(16 + 4)?;
            c.bool().map(|_| A::None)?
        }
        OP_EXCHANGE_ID => {
            c.skip(8)?;
            c.skip_opaque(NFS4_OPAQUE_LIMIT)?;
            c.skip(4)?;
            match c.u32()? {
                0 => {}
                1 => state_protect_ops(c)?,
                2 => {
                    state_protect_ops(c)?;
                    opaque_array(c, NFS4_OPAQUE_LIMIT)?;
                    opaque_array(c, NFS4_OPAQUE_LIMIT)?;
                    c.skip(8)?;
                }
                _ => return Err(ParseError::Malformed("nfs4 state_protect how")),
            }
            impl_id(c).map(|_| A::None)?
        }
        OP_CREATE_SESSION => {
            c.skip(8 + 4 + 4)?;
            channel_attrs(c)?;
            channel_attrs(c)?;
            c.skip(4)?;
            cb_sec_parms(c).map(|_| A::None)?
        }
        OP_DESTROY_SESSION => c.skip(16).map(|_| A::None)?,
        OP_GET_DIR_DELEGATION => {
            c.bool()?;
            bitmap(c)?;
            c.skip(2 * NFSTIME4)?;
            bitmap(c)?;
            bitmap(c).map(|_| A::None)?
        }
        OP_GETDEVICEINFO => {
            c.skip(16 + 4 + 4)?;
            bitmap(c).map(|_| A::None)?
        }
        OP_GETDEVICELIST => c.skip(4 + 4 + 8 + 8).map(|_| A::None)?,
        OP_LAYOUTCOMMIT => {
            c.skip(16)?;
            c.bool()?;
            c.skip(16)?;
            if c.bool()? {
                c.skip(8)?;
            }
            if c.bool()? {
                c.skip(NFSTIME4)?;
            }
            layoutupdate(c).map(|_| A::None)?
        }
        OP_LAYOUTGET => {
            c.bool()?;
            c.skip(4 + 4 + 8 + 8 + 8 + 16 + 4).map(|_| A::None)?
        }
        OP_LAYOUTRETURN => {
            c.bool()?;
            c.skip(8)?;
            if c.u32()? == 1 {
                c.skip(8 + 8 + 16)?;
                c.skip_opaque(MAX_DATA_LEN)?;
            }
            A::None
        }
        OP_SECINFO_NO_NAME => c.skip(4).map(|_| A::None)?,
        OP_SEQUENCE => A::Sequence {
            session_id: c.array::<16>()?,
            sequence_id: c.u32()?,
            slot_id: c.u32()?,
            highest_slot_id: c.u32()?,
            cache_this: c.bool()?,
        },
        OP_SET_SSV => {
            c.skip_opaque(MAX_DATA_LEN)?;
            c.skip_opaque(MAX_DATA_LEN).map(|_| A::None)?
        }
        OP_TEST_STATEID => {
            let n = c.count(MAX_OPS)? as usize;
            c.skip(n.saturating_mul(16)).map(|_| A::None)?
        }
        OP_WANT_DELEGATION => {
            c.skip(4)?;
            match c.u32()? {
                4 | 6 => {}
                1 => c.skip(4)?,
                _ => return Err(ParseError::Malformed("nfs4 deleg_claim type")),
            }
            A::None
        }
        OP_ALLOCATE | OP_DEALLOCATE => c.skip(16 + 8 + 8).map(|_| A::None)?,
        OP_COPY => {
            c.skip(16 + 16 + 8 + 8 + 8)?;
            c.bool()?;
            c.bool()?;
            netloc_array(c).map(|_| A::None)?
        }
        OP_COPY_NOTIFY => {
            c.skip(16)?;
            netloc(c).map(|_| A::None)?
        }
        OP_IO_ADVISE => {
            c.skip(16 + 8 + 8)?;
            bitmap(c).map(|_| A::None)?
        }
        OP_LAYOUTERROR => {
            c.skip(8 + 8 + 16)?;
            let n = c.count(MAX_OPS)? as usize;
            c.skip(n.saturating_mul(24)).map(|_| A::None)?
        }
        OP_LAYOUTSTATS => {
            c.skip(8 + 8 + 16 + 16 + 16 + 16)?;
            layoutupdate(c).map(|_| A::None)?
        }
        OP_SEEK => c.skip(16 + 8 + 4).map(|_| A::None)?,
        OP_WRITE_SAME => {
            c.skip(16 + 4 + 8 * 4 + 4 + 8)?;
            c.skip_opaque(MAX_DATA_LEN).map(|_| A::None)?
        }
        OP_CLONE => c.skip(16 + 16 + 8 * 3).map(|_| A::None)?,
        OP_SETXATTR => {
            c.skip(4)?;
            utf8(c)?;
            payload(c, cut).map(|_| A::None)?
        }
        OP_LISTXATTRS => c.skip(8 + 4).map(|_| A::None)?,
        _ => return Err(ParseError::Malformed("nfs4 unknown operation")),
    };
    Ok(a)
}

fn walk_res<'a>(
    op: u32,
    status: u32,
    c: &mut XdrCursor<'a>,
    cut: &mut bool,
) -> Result<Nfs4OpRes<'a>> {
    use Nfs4OpRes as R;
    if !(OP_ACCESS..=OP_REMOVEXATTR).contains(&op) && op != OP_ILLEGAL {
        return Err(ParseError::Malformed("nfs4 unknown operation"));
    }
    // Results that carry a body even when the status is an error.
    match (op, status) {
        (OP_SETATTR, _) => return bitmap(c).map(|_| R::None),
        (OP_LOCK | OP_LOCKT, NFS4ERR_DENIED) => return lock_denied(c).map(|_| R::None),
        (OP_SETCLIENTID, NFS4ERR_CLID_INUSE) => return netaddr(c).map(|_| R::None),
        (OP_GETDEVICEINFO, NFS4ERR_TOOSMALL) => return c.skip(4).map(|_| R::None),
        (OP_LAYOUTGET, NFS4ERR_LAYOUTTRYLATER) => return c.bool().map(|_| R::None),
        (OP_COPY, NFS4ERR_OFFLOAD_NO_REQS) => {
            c.bool()?;
            return c.bool().map(|_| R::None);
        }
        (_, NFS4_OK) => {}
        _ => return Ok(R::None),
    }
    let r = match op {
        OP_ACCESS => c.skip(8).map(|_| R::None)?,
        OP_CLOSE | OP_LOCK | OP_LOCKU | OP_OPEN_CONFIRM | OP_OPEN_DOWNGRADE => {
            c.skip(16).map(|_| R::None)?
        }
        OP_COMMIT => c.skip(8).map(|_| R::None)?,
        OP_CREATE => {
            c.skip(CHANGE_INFO4)?;
            bitmap(c).map(|_| R::None)?
        }
        OP_GETATTR => {
            let (change, size) = fattr4_change_size(c)?;
            R::Getattr { change, size }
        }
        OP_GETFH => R::GetFh {
            fh: c.opaque(NFS4_FHSIZE)?,
        },
        OP_LINK | OP_REMOVE | OP_SETXATTR | OP_REMOVEXATTR => {
            c.skip(CHANGE_INFO4).map(|_| R::None)?
        }
        OP_RENAME => c.skip(2 * CHANGE_INFO4).map(|_| R::None)?,
        OP_OPEN => {
            let stateid = stateid(c)?;
            c.skip(CHANGE_INFO4)?;
            let rflags = c.u32()?;
            bitmap(c)?;
            let delegation = open_delegation(c)?;
            R::Open {
                stateid,
                rflags,
                delegation,
            }
        }
        OP_READ => {
            let eof = c.bool()?;
            let (data_len, data_complete) = payload(c, cut)?;
            R::Read {
                eof,
                data_len,
                data_complete,
            }
        }
        OP_READDIR => {
            c.skip(8)?;
            while c.bool()? {
                c.skip(8)?;
                utf8(c)?;
                fattr4(c)?;
            }
            c.bool().map(|_| R::None)?
        }
        OP_READLINK => c.skip_opaque(MAX_NAME_LEN).map(|_| R::None)?,
        OP_SECINFO | OP_SECINFO_NO_NAME => secinfo_res(c).map(|_| R::None)?,
        OP_SETCLIENTID => c.skip(16).map(|_| R::None)?,
        OP_WRITE => {
            let count = c.u32()?;
            let committed = c.u32()?;
            c.skip(8)?;
            R::Write { count, committed }
        }
        OP_BIND_CONN_TO_SESSION => {
            c.skip(16 + 4)?;
            c.bool().map(|_| R::None)?
        }
        OP_EXCHANGE_ID => {
            c.skip(8 + 4 + 4)?;
            match c.u32()? {
                0 => {}
                1 => state_protect_ops(c)?,
                2 => {
                    state_protect_ops(c)?;
                    c.skip(16)?;
                    opaque_array(c, MAX_DATA_LEN)?;
                }
                _ => return Err(ParseError::Malformed("nfs4 state_protect how")),
            }
            c.skip(8)?;
            c.skip_opaque(NFS4_OPAQUE_LIMIT)?;
            c.skip_opaque(NFS4_OPAQUE_LIMIT)?;
            impl_id(c).map(|_| R::None)?
        }
        OP_CREATE_SESSION => {
            let session_id = c.array::<16>()?;
            c.skip(8)?;
            let fore = channel_attrs(c)?;
            channel_attrs(c)?;
            R::CreateSession {
                session_id,
                max_request_size: fore[1],
                max_response_size: fore[2],
                max_requests: fore[5],
            }
        }
        OP_GET_DIR_DELEGATION => match c.u32()? {
            0 => {
                c.skip(8 + 16)?;
                bitmap(c)?;
                bitmap(c)?;
                bitmap(c).map(|_| R::None)?
            }
            1 => c.bool().map(|_| R::None)?,
            _ => return Err(ParseError::Malformed("nfs4 gddrnf status")),
        },
        OP_GETDEVICEINFO => {
            c.skip(4)?;
            c.skip_opaque(MAX_DATA_LEN)?;
            bitmap(c).map(|_| R::None)?
        }
        OP_GETDEVICELIST => {
            c.skip(8 + 8)?;
            let n = c.count(MAX_OPS)? as usize;
            c.skip(n.saturating_mul(16))?;
            c.bool().map(|_| R::None)?
        }
        OP_LAYOUTCOMMIT => {
            if c.bool()? {
                c.skip(8)?;
            }
            R::None
        }
        OP_LAYOUTGET => {
            c.bool()?;
            c.skip(16)?;
            for _ in 0..c.count(MAX_OPS)? {
                c.skip(8 + 8 + 4 + 4)?;
                c.skip_opaque(MAX_DATA_LEN)?;
            }
            R::None
        }
        OP_LAYOUTRETURN => {
            if c.bool()? {
                c.skip(16)?;
            }
            R::None
        }
        OP_SEQUENCE => R::Sequence {
            session_id: c.array::<16>()?,
            sequence_id: c.u32()?,
            slot_id: c.u32()?,
            highest_slot_id: c.u32()?,
            target_highest_slot_id: c.u32()?,
            status_flags: c.u32()?,
        },
        OP_SET_SSV => c.skip_opaque(MAX_DATA_LEN).map(|_| R::None)?,
        OP_TEST_STATEID => c.skip_u32_array(MAX_OPS).map(|_| R::None)?,
        OP_WANT_DELEGATION => open_delegation(c).map(|_| R::None)?,
        OP_COPY => {
            write_response(c)?;
            c.bool()?;
            c.bool().map(|_| R::None)?
        }
        OP_COPY_NOTIFY => {
            c.skip(NFSTIME4 + 16)?;
            netloc_array(c).map(|_| R::None)?
        }
        OP_IO_ADVISE => bitmap(c).map(|_| R::None)?,
        OP_OFFLOAD_STATUS => {
            c.skip(8)?;
            c.skip_u32_array(1).map(|_| R::None)?
        }
        OP_READ_PLUS => {
            let eof = c.bool()?;
            let mut data_len = 0u32;
            let mut data_complete = true;
            for _ in 0..c.count(MAX_OPS)? {
                match c.u32()? {
                    0 => {
                        c.skip(8)?;
                        let (len, complete) = payload(c, cut)?;
                        data_len = data_len.saturating_add(len);
                        if !complete {
                            data_complete = false;
                            break;
                        }
                    }
                    1 => c.skip(16)?,
                    _ => {}
                }
            }
            R::Read {
                eof,
                data_len,
                data_complete,
            }
        }
        OP_SEEK => {
            c.bool()?;
            c.skip(8).map(|_| R::None)?
        }
        OP_WRITE_SAME => write_response(c).map(|_| R::None)?,
        OP_GETXATTR => payload(c, cut).map(|_| R::None)?,
        OP_LISTXATTRS => {
            c.skip(8)?;
            opaque_array(c, MAX_NAME_LEN)?;
            c.bool().map(|_| R::None)?
        }
        // Status-only results.
        _ => R::None,
    };
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{fuzz, Xdr};

    const SID: [u8; 16] = [0x5a; 16];
    const SESSION: [u8; 16] = [0x11; 16];

    fn sid(x: Xdr) -> Xdr {
        x.fixed(&SID)
    }
    fn fattr(x: Xdr) -> Xdr {
        x.u32(1).u32(0x18).opaque(&[0, 0, 0, 0, 0, 0, 0, 9])
    }
    fn owner(x: Xdr) -> Xdr {
        x.u64(7).opaque(b"owner")
    }
    fn netaddr(x: Xdr) -> Xdr {
        x.string("tcp").string("10.0.0.1.8.1")
    }
    fn chattrs(x: Xdr, ird: bool) -> Xdr {
        let x = x.u32(0).u32(1 << 20).u32(1 << 20).u32(4096).u32(8).u32(64);
        if ird {
            x.u32(1).u32(5)
        } else {
            x.u32(0)
        }
    }
    fn cinfo(x: Xdr) -> Xdr {
        x.bool(true).u64(1).u64(2)
    }
    fn bitmap(x: Xdr) -> Xdr {
        x.u32(2).u32(0x0010_011a).u32(0x0030_a23a)
    }

    /// Sample arguments for every operation (without the opnum).
    fn args(op: u32) -> Vec<u8> {
        let x = Xdr::new();
        match op {
            OP_ACCESS => x.u32(0x1f),
            OP_CLOSE => sid(x.u32(1)),
            OP_COMMIT => x.u64(0).u32(0),
            OP_CREATE => fattr(x.u32(5).string("target").string("lnk")),
            OP_DELEGPURGE | OP_RENEW | OP_DESTROY_CLIENTID => x.u64(99),
            OP_DELEGRETURN | OP_FREE_STATEID | OP_OFFLOAD_CANCEL | OP_OFFLOAD_STATUS => sid(x),
            OP_GETATTR => bitmap(x),
            OP_LINK => x.string("hard"),
            OP_LOCK => owner(sid(x.u32(2).bool(false).u64(0).u64(10).bool(true).u32(1)).u32(0)),
            OP_LOCKT => owner(x.u32(1).u64(0).u64(1)),
            OP_LOCKU => sid(x.u32(1).u32(3)).u64(0).u64(1),
            OP_LOOKUP => x.string("dir"),
            OP_NVERIFY | OP_VERIFY => fattr(x),
            OP_OPEN => {
                let x = owner(x.u32(0).u32(2).u32(0)).u32(1).u32(3).fixed(&[1; 8]);
                fattr(x).u32(0).string("f.txt")
            }
            OP_OPENATTR | OP_RECLAIM_COMPLETE => x.bool(false),
            OP_OPEN_CONFIRM => sid(x).u32(1),
            OP_OPEN_DOWNGRADE => sid(x).u32(1).u32(1).u32(0),
            OP_PUTFH => x.opaque(&[0xfe; 40]),
            OP_READ | OP_READ_PLUS => sid(x).u64(4096).u32(65536),
            OP_READDIR => bitmap(x.u64(0).fixed(&[0; 8]).u32(8192).u32(32768)),
            OP_REMOVE => x.string("gone"),
            OP_RENAME => x.string("a").string("bb"),
            OP_SECINFO | OP_GETXATTR | OP_REMOVEXATTR => x.string("user.x"),
            OP_SETATTR => fattr(sid(x)),
            OP_SETCLIENTID => netaddr(
                x.fixed(&[2; 8])
                    .opaque(b"Linux NFS client")
                    .u32(0x4000_0000),
            )
            .u32(1),
            OP_SETCLIENTID_CONFIRM => x.u64(5).fixed(&[3; 8]),
            OP_WRITE => sid(x).u64(8192).u32(2).opaque(b"hello"),
            OP_RELEASE_LOCKOWNER => owner(x),
            OP_BACKCHANNEL_CTL => {
                let x = x.u32(0x4000_0000).u32(3).u32(0);
                let x = x.u32(1).u32(0).string("host").u32(0).u32(0).u32(1).u32(10);
                x.u32(6).u32(1).opaque(&[1; 4]).opaque(&[2; 6])
            }
            OP_BIND_CONN_TO_SESSION => x.fixed(&SESSION).u32(3).bool(false),
            OP_EXCHANGE_ID => {
                let x = x.fixed(&[4; 8]).opaque(b"client-owner").u32(0x101);
                let x = bitmap(bitmap(x.u32(2)));
                let x = x.u32(1).opaque(&[1, 2, 3]).u32(0).u32(16).u32(2);
                x.u32(1)
                    .string("kernel.org")
                    .string("Linux 6.1")
                    .u64(0)
                    .u32(0)
            }
            OP_CREATE_SESSION => {
                let x = chattrs(x.u64(1).u32(1).u32(3), false);
                chattrs(x, true).u32(0x4000_0000).u32(1).u32(0)
            }
            OP_DESTROY_SESSION => x.fixed(&SESSION),
            OP_GET_DIR_DELEGATION => {
                bitmap(bitmap(bitmap(x.bool(true)).u64(1).u32(0).u64(1).u32(0)))
            }
            OP_GETDEVICEINFO => bitmap(x.fixed(&[9; 16]).u32(1).u32(4096)),
            OP_GETDEVICELIST => x.u32(1).u32(16).u64(0).fixed(&[0; 8]),
            OP_LAYOUTCOMMIT => {
                let x = sid(x.u64(0).u64(100).bool(false)).bool(true).u64(99);
                x.bool(true).u64(5).u32(6).u32(1).opaque(&[7; 5])
            }
            OP_LAYOUTGET => {
                sid(x.bool(false).u32(1).u32(2).u64(0).u64(u64::MAX).u64(4096)).u32(4096)
            }
            OP_LAYOUTRETURN => sid(x.bool(false).u32(1).u32(3).u32(1).u64(0).u64(8)).opaque(&[1]),
            OP_SECINFO_NO_NAME => x.u32(0),
            OP_SEQUENCE => x.fixed(&SESSION).u32(77).u32(3).u32(9).bool(true),
            OP_SET_SSV => x.opaque(&[1; 32]).opaque(&[2; 20]),
            OP_TEST_STATEID => sid(sid(x.u32(2))),
            OP_WANT_DELEGATION => x.u32(0x300).u32(1).u32(1),
            OP_ALLOCATE | OP_DEALLOCATE => sid(x).u64(0).u64(1 << 20),
            OP_COPY => {
                let x = sid(sid(x))
                    .u64(0)
                    .u64(0)
                    .u64(1 << 30)
                    .bool(false)
                    .bool(true);
                netaddr(
                    x.u32(3)
                        .u32(1)
                        .string("srv")
                        .u32(2)
                        .string("nfs://srv/x")
                        .u32(3),
                )
            }
            OP_COPY_NOTIFY => netaddr(sid(x).u32(3)),
            OP_IO_ADVISE => bitmap(sid(x).u64(0).u64(4096)),
            OP_LAYOUTERROR => sid(x.u64(0).u64(10)).u32(1).fixed(&[8; 16]).u32(5).u32(25),
            OP_LAYOUTSTATS => {
                let x = sid(x.u64(0).u64(10))
                    .u64(1)
                    .u64(2)
                    .u64(3)
                    .u64(4)
                    .fixed(&[8; 16]);
                x.u32(1).opaque(&[])
            }
            OP_SEEK => sid(x).u64(0).u32(1),
            OP_WRITE_SAME => {
                let x = sid(x)
                    .u32(2)
                    .u64(0)
                    .u64(512)
                    .u64(4)
                    .u64(u64::MAX)
                    .u32(0)
                    .u64(0);
                x.opaque(&[0xaa; 7])
            }
            OP_CLONE => sid(sid(x)).u64(0).u64(0).u64(4096),
            OP_SETXATTR => x.u32(0).string("user.k").opaque(b"value"),
            OP_LISTXATTRS => x.u64(0).u32(4096),
            _ => x, // void arguments
        }
        .done()
    }

    /// Sample successful results for every operation (status included).
    fn res(op: u32) -> Vec<u8> {
        let x = Xdr::new().u32(NFS4_OK);
        match op {
            OP_ACCESS => x.u32(0x1f).u32(0x3),
            OP_CLOSE | OP_LOCK | OP_LOCKU | OP_OPEN_CONFIRM | OP_OPEN_DOWNGRADE => sid(x),
            OP_COMMIT => x.fixed(&[6; 8]),
            OP_CREATE => bitmap(cinfo(x)),
            OP_GETATTR => {
                // supported_attrs(bitmap), type, change, size.
                let vals = Xdr::new().u32(1).u32(0xff).u32(1).u64(42).u64(12345).done();
                x.u32(1).u32(0b11011).opaque(&vals)
            }
            OP_GETFH => x.opaque(&[0xfe; 40]),
            OP_LINK | OP_REMOVE | OP_SETXATTR | OP_REMOVEXATTR => cinfo(x),
            OP_RENAME => cinfo(cinfo(x)),
            OP_OPEN => {
                let x = bitmap(cinfo(sid(x)).u32(4));
                let x = sid(x.u32(2)).bool(false).u32(1).u64(1 << 20);
                x.u32(0).u32(0).u32(0x1f).string("OWNER@")
            }
            OP_READ => x.bool(true).opaque(b"data!"),
            OP_READDIR => {
                let x = fattr(x.fixed(&[0; 8]).bool(true).u64(1).string("a"));
                fattr(x.bool(true).u64(2).string("bcd"))
                    .bool(false)
                    .bool(true)
            }
            OP_READLINK => x.string("/target"),
            OP_SECINFO | OP_SECINFO_NO_NAME => x
                .u32(2)
                .u32(1)
                .u32(6)
                .opaque(&[0x2a, 0x86, 0x48])
                .u32(0)
                .u32(1),
            OP_SETATTR => bitmap(x),
            OP_SETCLIENTID => x.u64(1).fixed(&[1; 8]),
            OP_WRITE => x.u32(5).u32(2).fixed(&[3; 8]),
            OP_BIND_CONN_TO_SESSION => x.fixed(&SESSION).u32(3).bool(false),
            OP_EXCHANGE_ID => {
                let x = bitmap(bitmap(x.u64(1).u32(1).u32(0x10000).u32(1)));
                x.u64(0).opaque(b"major").opaque(b"scope").u32(0)
            }
            OP_CREATE_SESSION => chattrs(chattrs(x.fixed(&SESSION).u32(1).u32(0), true), false),
            OP_GET_DIR_DELEGATION => bitmap(bitmap(bitmap(sid(x.u32(0).fixed(&[0; 8]))))),
            OP_GETDEVICEINFO => bitmap(x.u32(1).opaque(&[1; 10])),
            OP_GETDEVICELIST => x.u64(0).fixed(&[0; 8]).u32(1).fixed(&[3; 16]).bool(true),
            OP_LAYOUTCOMMIT => x.bool(true).u64(1000),
            OP_LAYOUTGET => sid(x.bool(false))
                .u32(1)
                .u64(0)
                .u64(4096)
                .u32(2)
                .u32(1)
                .opaque(&[4; 12]),
            OP_LAYOUTRETURN => sid(x.bool(true)),
            OP_SEQUENCE => x.fixed(&SESSION).u32(77).u32(3).u32(9).u32(31).u32(0),
            OP_SET_SSV => x.opaque(&[1; 20]),
            OP_TEST_STATEID => x.u32(2).u32(0).u32(10025),
            OP_WANT_DELEGATION => x.u32(3).u32(1).bool(true),
            OP_COPY => x
                .u32(1)
                .fixed(&SID)
                .u64(100)
                .u32(2)
                .fixed(&[0; 8])
                .bool(true)
                .bool(true),
            OP_COPY_NOTIFY => netaddr(sid(x.u64(90).u32(0)).u32(1).u32(3)),
            OP_IO_ADVISE => bitmap(x),
            OP_OFFLOAD_STATUS => x.u64(100).u32(1).u32(0),
            OP_READ_PLUS => x
                .bool(false)
                .u32(2)
                .u32(0)
                .u64(0)
                .opaque(b"abc")
                .u32(1)
                .u64(3)
                .u64(4093),
            OP_SEEK => x.bool(false).u64(8192),
            OP_WRITE_SAME => x.u32(0).u64(2048).u32(2).fixed(&[0; 8]),
            OP_GETXATTR => x.opaque(b"xattr-value"),
            OP_LISTXATTRS => x
                .u64(9)
                .u32(2)
                .string("user.a")
                .string("user.bb")
                .bool(true),
            _ => x, // status-only results
        }
        .done()
    }

    fn all_ops() -> Vec<u32> {
        let mut v: Vec<u32> = (OP_ACCESS..=OP_REMOVEXATTR).collect();
        v.push(OP_ILLEGAL);
        v
    }

    fn compound_args(tag: &str, minor: u32, ops: &[(u32, Vec<u8>)]) -> Vec<u8> {
        let mut x = Xdr::new().string(tag).u32(minor).u32(ops.len() as u32);
        for (op, a) in ops {
            x = x.u32(*op).bytes(a);
        }
        x.done()
    }

    fn compound_res(status: u32, ops: &[(u32, Vec<u8>)]) -> Vec<u8> {
        let mut x = Xdr::new().u32(status).string("").u32(ops.len() as u32);
        for (op, r) in ops {
            x = x.u32(*op).bytes(r);
        }
        x.done()
    }

    fn marker(i: usize) -> Vec<u8> {
        vec![i as u8; 1 + i % 13]
    }

    #[test]
    fn every_op_args_walks_exactly() {
        // Each operation is followed by a PUTFH with a distinct handle: if
        // any walker consumed the wrong number of bytes the markers break.
        let mut ops = Vec::new();
        for (i, op) in all_ops().into_iter().enumerate() {
            ops.push((op, args(op)));
            ops.push((OP_PUTFH, Xdr::new().opaque(&marker(i)).done()));
        }
        let b = compound_args("all", 2, &ops);
        let c = parse_compound4_args(&b).unwrap();
        assert_eq!(c.stopped, None);
        assert!(c.complete());
        assert_eq!(c.ops.len(), ops.len());
        for (i, pair) in c.ops.chunks(2).enumerate() {
            assert_eq!(pair[0].op, ops[2 * i].0);
            assert_eq!(
                pair[1].args,
                Nfs4OpArgs::PutFh { fh: &marker(i) },
                "after {}",
                nfs4_op_name(pair[0].op)
            );
        }
    }

    #[test]
    fn every_op_res_walks_exactly() {
        let mut ops = Vec::new();
        for (i, op) in all_ops().into_iter().enumerate() {
            ops.push((op, res(op)));
            ops.push((OP_GETFH, Xdr::new().u32(0).opaque(&marker(i)).done()));
        }
        // Results that carry a body on specific errors.
        let errs = [
            (
                OP_LOCK,
                owner(Xdr::new().u32(NFS4ERR_DENIED).u64(0).u64(1).u32(2)),
            ),
            (
                OP_LOCKT,
                owner(Xdr::new().u32(NFS4ERR_DENIED).u64(0).u64(1).u32(2)),
            ),
            (OP_SETCLIENTID, netaddr(Xdr::new().u32(NFS4ERR_CLID_INUSE))),
            (OP_GETDEVICEINFO, Xdr::new().u32(NFS4ERR_TOOSMALL).u32(8192)),
            (
                OP_LAYOUTGET,
                Xdr::new().u32(NFS4ERR_LAYOUTTRYLATER).bool(true),
            ),
            (
                OP_COPY,
                Xdr::new()
                    .u32(NFS4ERR_OFFLOAD_NO_REQS)
                    .bool(true)
                    .bool(false),
            ),
            (OP_SETATTR, bitmap(Xdr::new().u32(NFS4ERR_DELAY))),
            (OP_READ, Xdr::new().u32(NFS4ERR_DELAY)),
        ];
        for (k, (op, x)) in errs.into_iter().enumerate() {
            ops.push((op, x.done()));
            ops.push((OP_GETFH, Xdr::new().u32(0).opaque(&marker(100 + k)).done()));
        }
        let b = compound_res(0, &ops);
        let c = parse_compound4_res(&b).unwrap();
        assert_eq!(c.stopped, None);
        assert_eq!(c.ops.len(), ops.len());
        for (i, pair) in c.ops.chunks(2).enumerate() {
            let m = if i < all_ops().len() {
                marker(i)
            } else {
                marker(100 + i - all_ops().len())
            };
            assert_eq!(
                pair[1].res,
                Nfs4OpRes::GetFh { fh: &m },
                "after {}",
                nfs4_op_name(pair[0].op)
            );
        }
    }

    #[test]
    fn extracted_fields() {
        let ops = [
            (OP_SEQUENCE, args(OP_SEQUENCE)),
            (OP_PUTFH, args(OP_PUTFH)),
            (OP_OPEN, args(OP_OPEN)),
            (OP_GETFH, vec![]),
            (OP_WRITE, args(OP_WRITE)),
            (OP_RENAME, args(OP_RENAME)),
            (OP_GETATTR, args(OP_GETATTR)),
        ];
        let b = compound_args("tag1", 1, &ops);
        let c = parse_compound4_args(&b).unwrap();
        assert_eq!((&*c.tag, c.minorversion, c.num_ops), ("tag1", 1, 7));
        assert_eq!(
            c.sequence(),
            Some(&Nfs4OpArgs::Sequence {
                session_id: SESSION,
                sequence_id: 77,
                slot_id: 3,
                highest_slot_id: 9,
                cache_this: true
            })
        );
        let Nfs4OpArgs::Open {
            create,
            claim,
            name,
            ..
        } = &c.ops[2].args
        else {
            panic!()
        };
        assert_eq!((*create, *claim, name.as_deref()), (true, 0, Some("f.txt")));
        assert_eq!(
            c.ops[4].args,
            Nfs4OpArgs::Write {
                stateid: SID,
                offset: 8192,
                stable: 2,
                data_len: 5,
                data_complete: true
            }
        );
        assert_eq!(
            c.ops[5].args,
            Nfs4OpArgs::Rename {
                old: "a".into(),
                new: "bb".into()
            }
        );
        assert_eq!(c.principal_op().map(|o| o.op), Some(OP_OPEN));

        let ops = [
            (OP_SEQUENCE, res(OP_SEQUENCE)),
            (OP_PUTFH, res(OP_PUTFH)),
            (OP_READ, res(OP_READ)),
            (OP_GETATTR, res(OP_GETATTR)),
        ];
        let b = compound_res(0, &ops);
        let r = parse_compound4_res(&b).unwrap();
        assert_eq!(
            r.sequence(),
            Some(&Nfs4OpRes::Sequence {
                session_id: SESSION,
                sequence_id: 77,
                slot_id: 3,
                highest_slot_id: 9,
                target_highest_slot_id: 31,
                status_flags: 0
            })
        );
        assert_eq!(
            r.ops[2].res,
            Nfs4OpRes::Read {
                eof: true,
                data_len: 5,
                data_complete: true
            }
        );
        assert_eq!(
            r.ops[3].res,
            Nfs4OpRes::Getattr {
                change: Some(42),
                size: Some(12345)
            }
        );
        assert_eq!(r.principal_op().map(|o| o.op), Some(OP_READ));
        let b = compound_res(0, &[(OP_WRITE, res(OP_WRITE))]);
        let w = parse_compound4_res(&b).unwrap();
        assert_eq!(
            w.ops[0].res,
            Nfs4OpRes::Write {
                count: 5,
                committed: 2
            }
        );
        let b = compound_res(0, &[(OP_OPEN, res(OP_OPEN))]);
        let o = parse_compound4_res(&b).unwrap();
        assert_eq!(
            o.ops[0].res,
            Nfs4OpRes::Open {
                stateid: SID,
                rflags: 4,
                delegation: 2
            }
        );
        let b = compound_res(0, &[(OP_CREATE_SESSION, res(OP_CREATE_SESSION))]);
        let s = parse_compound4_res(&b);
        let Nfs4OpRes::CreateSession { max_requests, .. } = s.unwrap().ops[0].res else {
            panic!()
        };
        assert_eq!(max_requests, 64);
        let b = compound_res(0, &[(OP_READ_PLUS, res(OP_READ_PLUS))]);
        let rp = parse_compound4_res(&b).unwrap();
        assert_eq!(
            rp.ops[0].res,
            Nfs4OpRes::Read {
                eof: false,
                data_len: 3,
                data_complete: true
            }
        );
    }

    #[test]
    fn error_status_ends_results() {
        let ops = [
            (OP_PUTFH, Xdr::new().u32(0).done()),
            (OP_LOOKUP, Xdr::new().u32(2).done()),
        ];
        let b = compound_res(2, &ops);
        let r = parse_compound4_res(&b).unwrap();
        assert_eq!((r.status, r.ops[1].status), (2, 2));
        assert_eq!(nfs4_status_name(r.status), "NFS4ERR_NOENT");
        assert_eq!(r.principal_op().map(|o| o.op), Some(OP_LOOKUP));
    }

    #[test]
    fn principal_rule() {
        let p = |ops: &[u32]| principal_op_index(ops);
        assert_eq!(p(&[OP_SEQUENCE, OP_PUTFH, OP_READ]), Some(2));
        assert_eq!(p(&[OP_PUTFH, OP_LOOKUP, OP_GETFH, OP_GETATTR]), Some(1));
        assert_eq!(p(&[OP_SEQUENCE, OP_PUTFH, OP_GETATTR]), Some(2));
        assert_eq!(p(&[OP_PUTROOTFH, OP_GETFH]), Some(0));
        assert_eq!(p(&[OP_SEQUENCE]), Some(0));
        assert_eq!(
            p(&[OP_SEQUENCE, OP_PUTFH, OP_SAVEFH, OP_PUTFH, OP_RENAME]),
            Some(4)
        );
        assert_eq!(p(&[]), None);
    }

    #[test]
    fn names() {
        assert_eq!(nfs4_op_name(OP_ACCESS), "ACCESS");
        assert_eq!(nfs4_op_name(OP_SEQUENCE), "SEQUENCE");
        assert_eq!(nfs4_op_name(OP_CLONE), "CLONE");
        assert_eq!(nfs4_op_name(OP_REMOVEXATTR), "REMOVEXATTR");
        assert_eq!(nfs4_op_name(OP_ILLEGAL), "ILLEGAL");
        assert_eq!(nfs4_op_name(2), "UNKNOWN");
        assert_eq!(nfs4_op_name(76), "UNKNOWN");
        assert_eq!(nfs4_status_name(10008), "NFS4ERR_DELAY");
        assert_eq!(nfs4_status_name(10044), "NFS4ERR_OP_ILLEGAL");
        assert_eq!(nfs4_status_name(10087), "NFS4ERR_DELEG_REVOKED");
        assert_eq!(nfs4_status_name(10094), "NFS4ERR_OFFLOAD_NO_REQS");
        assert_eq!(nfs4_status_name(10096), "NFS4ERR_XATTR2BIG");
        assert_eq!(nfs4_status_name(10097), "NFS4ERR_UNKNOWN");
        assert_eq!(nfs4_proc_name(1), "COMPOUND");
    }

    #[test]
    fn unknown_op_stops_with_index() {
        let ops = [
            (OP_PUTFH, args(OP_PUTFH)),
            (99, vec![0, 0, 0, 0]),
            (OP_GETATTR, args(OP_GETATTR)),
        ];
        let b = compound_args("", 0, &ops);
        let c = parse_compound4_args(&b).unwrap();
        assert_eq!(c.ops.len(), 1);
        assert_eq!(
            c.stopped,
            Some(Stopped {
                index: 1,
                op: Some(99),
                error: ParseError::Malformed("nfs4 unknown operation")
            })
        );
        assert!(!c.complete());
    }

    #[test]
    fn truncation() {
        let ops = [
            (OP_SEQUENCE, args(OP_SEQUENCE)),
            (OP_PUTFH, args(OP_PUTFH)),
            (
                OP_WRITE,
                Xdr::new().fixed(&SID).u64(0).u32(0).opaque(&[7; 64]).done(),
            ),
            (OP_GETATTR, args(OP_GETATTR)),
        ];
        let b = compound_args("t", 1, &ops);
        let header = 4 + 4 + 4 + 4;
        let mut last_ops = 0;
        for n in 0..b.len() {
            match parse_compound4_args(&b[..n]) {
                Err(e) => assert!(n < header && e.is_incomplete(), "len {n}"),
                Ok(c) => {
                    assert!(n >= header);
                    assert!(!c.complete(), "len {n}");
                    assert!(c.ops.len() >= last_ops);
                    last_ops = c.ops.len();
                    if let Some(s) = c.stopped {
                        assert_eq!((s.error, s.index), (ParseError::Incomplete, c.ops.len()));
                    }
                }
            }
        }
        // WRITE payload cut: offset/count still known, decoding stops after.
        let cut = &b[..b.len() - 40];
        let c = parse_compound4_args(cut).unwrap();
        assert!(c.truncated);
        assert_eq!(
            c.ops[2].args,
            Nfs4OpArgs::Write {
                stateid: SID,
                offset: 0,
                stable: 0,
                data_len: 64,
                data_complete: false
            }
        );
        assert_eq!(c.stopped.map(|s| s.index), Some(3));
        assert_eq!(c.principal_op().map(|o| o.op), Some(OP_WRITE));

        let ops = [
            (OP_SEQUENCE, res(OP_SEQUENCE)),
            (OP_PUTFH, res(OP_PUTFH)),
            (OP_READ, res(OP_READ)),
        ];
        let b = compound_res(0, &ops);
        for n in 0..b.len() {
            match parse_compound4_res(&b[..n]) {
                Err(e) => assert!(n < 12 && e.is_incomplete()),
                Ok(r) => assert!(!r.complete(), "len {n}"),
            }
        }
        let r = parse_compound4_res(&b[..b.len() - 3]).unwrap();
        assert_eq!(
            r.ops[2].res,
            Nfs4OpRes::Read {
                eof: true,
                data_len: 5,
                data_complete: false
            }
        );
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len() / 2)
            .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
            .collect()
    }

    /// A real NFSv4.1 LOOKUP exchange (epam nfstrace eth-ipv4-tcp-nfsv41.pcap,
    /// frames 31/32), record mark included.
    #[test]
    fn real_capture_lookup() {
        use crate::rpc_records::{parse_record_mark, parse_rpc_call, parse_rpc_reply};
        let call = hex(concat!(
            "800000cc4597edc10000000000000002000186a300000004000000010000000100000044004562b7",
            "0000000c657062796d696e77313538340000000000000000000000090000000000000001000000",
            "020000000300000004000000060000000a000000130000006c0000000000000000000000000000",
            "00010000000500000035964c91540300000002000000000000000000000c000000000000000000",
            "000000000000160000000801000100000000000000000f00000004686f6d650000000a00000009",
            "000000020010011a0030a23a"
        ));
        let reply = hex(concat!(
            "800001184597edc100000001000000000000000000000000000000000000000000000000000000",
            "050000003500000000964c91540300000002000000000000000000000c000000000000001e0000",
            "001e0000000000000016000000000000000f000000000000000a000000000000001c0100070093",
            "000006000000000000fd000000000000000000000000000000000900000000000000020010011a",
            "0030a23a0000007800000002546deb1a353a54c900000000000000100000fd0000000000000000",
            "00000000000000000006000093000001ed0000000300000001300000000000000130000000000000",
            "00000000000000000000000000000000005497d2421a3c97b200000000546deb1a353a54c9000000",
            "00546deb1a353a54c9"
        ));
        let mark = parse_record_mark(&call).unwrap();
        assert_eq!(mark.len as usize, call.len() - 4);
        let rec = &call[4..];
        let h = parse_rpc_call(rec).unwrap();
        assert_eq!((h.prog, h.vers, h.proc_), (100003, 4, NFSPROC4_COMPOUND));
        let c = parse_compound4_args(&rec[h.body_offset..]).unwrap();
        assert!(c.complete());
        assert_eq!(c.minorversion, 1);
        assert_eq!(
            c.opnums(),
            vec![OP_SEQUENCE, OP_PUTFH, OP_LOOKUP, OP_GETFH, OP_GETATTR]
        );
        assert_eq!(
            c.ops[2].args,
            Nfs4OpArgs::Lookup {
                name: "home".into()
            }
        );
        assert_eq!(c.principal_op().map(|o| o.op), Some(OP_LOOKUP));
        let Some(Nfs4OpArgs::Sequence {
            sequence_id,
            slot_id,
            ..
        }) = c.sequence()
        else {
            panic!()
        };
        assert_eq!((*sequence_id, *slot_id), (12, 0));

        let rec = &reply[4..];
        let h = parse_rpc_reply(rec).unwrap();
        assert_eq!(h.xid, 0x4597_edc1);
        let r = parse_compound4_res(&rec[h.body_offset..]).unwrap();
        assert!(r.complete());
        assert_eq!(r.status, NFS4_OK);
        let Some(Nfs4OpRes::Sequence {
            target_highest_slot_id,
            highest_slot_id,
            ..
        }) = r.sequence()
        else {
            panic!()
        };
        assert_eq!((*highest_slot_id, *target_highest_slot_id), (30, 30));
        assert!(matches!(&r.ops[3].res, Nfs4OpRes::GetFh { fh } if fh.len() == 28));
        assert_eq!(
            r.ops[4].res,
            Nfs4OpRes::Getattr {
                change: Some(0x546d_eb1a_353a_54c9),
                size: Some(16)
            }
        );
    }

    #[test]
    fn fuzz_compound() {
        let mut arg_ops = Vec::new();
        let mut res_ops = Vec::new();
        for op in all_ops() {
            arg_ops.push((op, args(op)));
            res_ops.push((op, res(op)));
        }
        let mut seeds = vec![compound_args("x", 2, &arg_ops), compound_res(0, &res_ops)];
        for chunk in arg_ops.chunks(4) {
            seeds.push(compound_args("", 1, chunk));
        }
        for chunk in res_ops.chunks(4) {
            seeds.push(compound_res(0, chunk));
        }
        fuzz(&seeds, 40_000, |b| {
            if let Ok(c) = parse_compound4_args(b) {
                assert!(c.ops.len() <= c.num_ops as usize);
                let _ = c.principal_op();
            }
            if let Ok(r) = parse_compound4_res(b) {
                assert!(r.ops.len() <= r.num_ops as usize);
            }
        });
    }
}
