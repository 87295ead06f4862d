//! NFSv4.1 (RFC 8881) COMPOUND encoding for the operations of ordinary
//! session traffic: SEQUENCE, PUTFH/PUTROOTFH, LOOKUP, GETFH, GETATTR,
//! ACCESS, OPEN, CLOSE, READ, WRITE and COMMIT, with their results.
//!
//! Only the encoder is here (arguments and results as the wire carries
//! them); what a client does with them is up to the caller (see
//! `bench.rs`). Session creation (EXCHANGE_ID, CREATE_SESSION) is not
//! encoded: with SP4_NONE state protection a client may use an existing
//! session on a new connection straight away, as captures that start
//! mid-session show.

use crate::rpc::Xdr;

pub const PROGRAM: u32 = 100003;
pub const VERSION: u32 = 4;
pub const MINOR_VERSION: u32 = 1;

/// Procedure numbers.
pub mod procs {
    pub const NULL: u32 = 0;
    pub const COMPOUND: u32 = 1;
}

/// Operation numbers used here.
pub mod op {
    pub const ACCESS: u32 = 3;
    pub const CLOSE: u32 = 4;
    pub const COMMIT: u32 = 5;
    pub const GETATTR: u32 = 9;
    pub const GETFH: u32 = 10;
    pub const LOOKUP: u32 = 15;
    pub const OPEN: u32 = 18;
    pub const PUTFH: u32 = 22;
    pub const PUTROOTFH: u32 = 24;
    pub const READ: u32 = 25;
    pub const WRITE: u32 = 38;
    pub const SEQUENCE: u32 = 53;
}

/// `nfsstat4` values used here.
pub mod status {
    pub const OK: u32 = 0;
    pub const NOENT: u32 = 2;
    pub const DELAY: u32 = 10008;
}

/// `stable_how4`.
pub mod stable {
    pub const UNSTABLE: u32 = 0;
    pub const DATA_SYNC: u32 = 1;
    pub const FILE_SYNC: u32 = 2;
}

/// OPEN share access bits.
pub mod share {
    pub const READ: u32 = 1;
    pub const WRITE: u32 = 2;
    pub const BOTH: u32 = 3;
}

/// A file handle (Linux knfsd v4 handles are 28 bytes or so).
pub type Fh = [u8; 28];
pub type SessionId = [u8; 16];

/// `stateid4`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateId {
    pub seqid: u32,
    pub other: [u8; 12],
}

impl StateId {
    fn encode(&self, x: &mut Xdr) {
        x.u32(self.seqid).opaque_fixed(&self.other);
    }
}

/// The attributes a Linux client asks for in most GETATTRs: type, change,
/// size, fsid, fileid; mode, numlinks, owner, owner_group, rawdev,
/// space_used, time_access, time_metadata, time_modify,
/// mounted_on_fileid.
pub const GETATTR_BITMAP: [u32; 2] = [0x0010_011a, 0x00b0_a23a];

/// The `mode` attribute (33) in the second bitmap word.
pub const MODE_BIT: u32 = 1 << 1;

/// The special "invalid" stateid RFC 8881 tells servers to return from
/// CLOSE.
pub const INVALID_STATEID: StateId = StateId {
    seqid: u32::MAX,
    other: [0; 12],
};

/// Values of the [`GETATTR_BITMAP`] attributes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attrs {
    /// 1 = regular file, 2 = directory.
    pub ftype: u32,
    pub change: u64,
    pub size: u64,
    pub fsid: (u64, u64),
    pub fileid: u64,
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    /// (seconds, nanoseconds).
    pub atime: (i64, u32),
    pub ctime: (i64, u32),
    pub mtime: (i64, u32),
}

fn nfstime(x: &mut Xdr, t: (i64, u32)) {
    x.u64(t.0 as u64).u32(t.1);
}

impl Attrs {
    /// `fattr4`: the bitmap, then the values as one opaque.
    pub fn encode(&self, x: &mut Xdr) {
        x.u32(2).u32(GETATTR_BITMAP[0]).u32(GETATTR_BITMAP[1]);
        let mut a = Xdr::with_capacity(160);
        a.u32(self.ftype).u64(self.change).u64(self.size);
        a.u64(self.fsid.0).u64(self.fsid.1).u64(self.fileid);
        a.u32(self.mode).u32(self.nlink);
        a.string(&self.uid.to_string())
            .string(&self.gid.to_string());
        a.u32(0).u32(0); // rawdev
        a.u64(self.size.div_ceil(4096) * 4096);
        nfstime(&mut a, self.atime);
        nfstime(&mut a, self.ctime);
        nfstime(&mut a, self.mtime);
        a.u64(self.fileid);
        x.opaque(&a.buf);
    }
}

/// One operation's arguments. WRITE borrows its data so large writes are
/// copied once, into the message.
#[derive(Debug, Clone)]
pub enum Op<'a> {
    Sequence {
        session: SessionId,
        sequenceid: u32,
        slotid: u32,
        highest_slotid: u32,
        cachethis: bool,
    },
    PutRootFh,
    PutFh(Fh),
    Lookup(&'a str),
    GetFh,
    Getattr,
    Access(u32),
    /// OPEN by name in the current directory (CLAIM_NULL); `create` makes
    /// it an UNCHECKED4 create.
    Open {
        seqid: u32,
        share_access: u32,
        clientid: u64,
        owner: &'a [u8],
        create: bool,
        name: &'a str,
    },
    Close {
        seqid: u32,
        stateid: StateId,
    },
    Read {
        stateid: StateId,
        offset: u64,
        count: u32,
    },
    Write {
        stateid: StateId,
        offset: u64,
        stable: u32,
        data: &'a [u8],
    },
    Commit {
        offset: u64,
        count: u32,
    },
}

impl Op<'_> {
    pub fn number(&self) -> u32 {
        match self {
            Op::Sequence { .. } => op::SEQUENCE,
            Op::PutRootFh => op::PUTROOTFH,
            Op::PutFh(_) => op::PUTFH,
            Op::Lookup(_) => op::LOOKUP,
            Op::GetFh => op::GETFH,
            Op::Getattr => op::GETATTR,
            Op::Access(_) => op::ACCESS,
            Op::Open { .. } => op::OPEN,
            Op::Close { .. } => op::CLOSE,
            Op::Read { .. } => op::READ,
            Op::Write { .. } => op::WRITE,
            Op::Commit { .. } => op::COMMIT,
        }
    }

    /// Append `nfs_argop4` (operation number and arguments).
    pub fn encode(&self, x: &mut Xdr) {
        x.u32(self.number());
        match self {
            Op::Sequence {
                session,
                sequenceid,
                slotid,
                highest_slotid,
                cachethis,
            } => {
                x.opaque_fixed(session)
                    .u32(*sequenceid)
                    .u32(*slotid)
                    .u32(*highest_slotid)
                    .bool(*cachethis);
            }
            Op::PutRootFh | Op::GetFh => {}
            Op::PutFh(fh) => {
                x.opaque(fh);
            }
            Op::Lookup(name) => {
                x.string(name);
            }
            Op::Getattr => {
                x.u32(2).u32(GETATTR_BITMAP[0]).u32(GETATTR_BITMAP[1]);
            }
            Op::Access(a) => {
                x.u32(*a);
            }
            Op::Open {
                seqid,
                share_access,
                clientid,
                owner,
                create,
                name,
            } => {
                x.u32(*seqid).u32(*share_access).u32(0); // deny none
                x.u64(*clientid).opaque(owner);
                if *create {
                    // OPEN4_CREATE, UNCHECKED4 setting the mode (0644).
                    x.u32(1).u32(0);
                    x.u32(2).u32(0).u32(MODE_BIT).u32(4).u32(0o644);
                } else {
                    x.u32(0);
                }
                x.u32(0).string(name); // CLAIM_NULL
            }
            Op::Close { seqid, stateid } => {
                x.u32(*seqid);
                stateid.encode(x);
            }
            Op::Read {
                stateid,
                offset,
                count,
            } => {
                stateid.encode(x);
                x.u64(*offset).u32(*count);
            }
            Op::Write {
                stateid,
                offset,
                stable,
                data,
            } => {
                stateid.encode(x);
                x.u64(*offset).u32(*stable).opaque(data);
            }
            Op::Commit { offset, count } => {
                x.u64(*offset).u32(*count);
            }
        }
    }
}

/// `COMPOUND4args`.
pub fn encode_compound_args(x: &mut Xdr, tag: &str, ops: &[Op]) {
    x.string(tag).u32(MINOR_VERSION).u32(ops.len() as u32);
    for o in ops {
        o.encode(x);
    }
}

/// One operation's result.
#[derive(Debug, Clone)]
pub enum OpRes<'a> {
    Sequence {
        session: SessionId,
        sequenceid: u32,
        slotid: u32,
        highest_slotid: u32,
        target_highest_slotid: u32,
    },
    PutRootFh,
    PutFh,
    Lookup,
    GetFh(Fh),
    Getattr(Attrs),
    Access {
        supported: u32,
        access: u32,
    },
    /// `created`: the attributes set at creation (the mode) are reported.
    Open {
        stateid: StateId,
        change_before: u64,
        change_after: u64,
        created: bool,
    },
    Close(StateId),
    Read {
        eof: bool,
        data: &'a [u8],
    },
    Write {
        count: u32,
        committed: u32,
        verf: [u8; 8],
    },
    Commit([u8; 8]),
    /// Operation `op` failed with `status` (it ends the COMPOUND).
    Failed {
        op: u32,
        status: u32,
    },
}

impl OpRes<'_> {
    pub fn number(&self) -> u32 {
        match self {
            OpRes::Sequence { .. } => op::SEQUENCE,
            OpRes::PutRootFh => op::PUTROOTFH,
            OpRes::PutFh => op::PUTFH,
            OpRes::Lookup => op::LOOKUP,
            OpRes::GetFh(_) => op::GETFH,
            OpRes::Getattr(_) => op::GETATTR,
            OpRes::Access { .. } => op::ACCESS,
            OpRes::Open { .. } => op::OPEN,
            OpRes::Close(_) => op::CLOSE,
            OpRes::Read { .. } => op::READ,
            OpRes::Write { .. } => op::WRITE,
            OpRes::Commit(_) => op::COMMIT,
            OpRes::Failed { op, .. } => *op,
        }
    }

    pub fn status(&self) -> u32 {
        match self {
            OpRes::Failed { status, .. } => *status,
            _ => status::OK,
        }
    }

    /// Append `nfs_resop4` (operation number, status, result).
    pub fn encode(&self, x: &mut Xdr) {
        x.u32(self.number()).u32(self.status());
        match self {
            OpRes::Sequence {
                session,
                sequenceid,
                slotid,
                highest_slotid,
                target_highest_slotid,
            } => {
                x.opaque_fixed(session)
                    .u32(*sequenceid)
                    .u32(*slotid)
                    .u32(*highest_slotid)
                    .u32(*target_highest_slotid)
                    .u32(0); // status flags
            }
            OpRes::PutRootFh | OpRes::PutFh | OpRes::Lookup | OpRes::Failed { .. } => {}
            OpRes::GetFh(fh) => {
                x.opaque(fh);
            }
            OpRes::Getattr(a) => a.encode(x),
            OpRes::Access { supported, access } => {
                x.u32(*supported).u32(*access);
            }
            OpRes::Open {
                stateid,
                change_before,
                change_after,
                created,
            } => {
                stateid.encode(x);
                x.bool(true).u64(*change_before).u64(*change_after);
                x.u32(0x0000_0004); // rflags: OPEN4_RESULT_LOCKTYPE_POSIX
                if *created {
                    x.u32(2).u32(0).u32(MODE_BIT);
                } else {
                    x.u32(0);
                }
                x.u32(0); // OPEN_DELEGATE_NONE
            }
            OpRes::Close(stateid) => stateid.encode(x),
            OpRes::Read { eof, data } => {
                x.bool(*eof).opaque(data);
            }
            OpRes::Write {
                count,
                committed,
                verf,
            } => {
                x.u32(*count).u32(*committed).opaque_fixed(verf);
            }
            OpRes::Commit(verf) => {
                x.opaque_fixed(verf);
            }
        }
    }
}

/// `COMPOUND4res`: the status is the last result's.
pub fn encode_compound_res(x: &mut Xdr, tag: &str, results: &[OpRes]) {
    let status = results.last().map_or(status::OK, |r| r.status());
    x.u32(status).string(tag).u32(results.len() as u32);
    for r in results {
        r.encode(x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_putfh_read_layout() {
        let mut x = Xdr::new();
        let ops = [
            Op::Sequence {
                session: [7; 16],
                sequenceid: 5,
                slotid: 2,
                highest_slotid: 3,
                cachethis: false,
            },
            Op::PutFh([1; 28]),
            Op::Read {
                stateid: StateId::default(),
                offset: 4096,
                count: 65536,
            },
        ];
        encode_compound_args(&mut x, "", &ops);
        // tag 4 + minor 4 + count 4 + SEQUENCE 4+16+16 + PUTFH 4+4+28
        // + READ 4+16+8+4.
        assert_eq!(x.len(), 12 + 36 + 36 + 32);
        assert_eq!(&x.buf[12..16], &op::SEQUENCE.to_be_bytes());
        let mut r = Xdr::new();
        encode_compound_res(
            &mut r,
            "",
            &[OpRes::Read {
                eof: false,
                data: &[1, 2, 3],
            }],
        );
        // status, tag, count, op, status, eof, len, data+pad.
        assert_eq!(r.len(), 4 * 7 + 4);
    }

    #[test]
    fn attrs_are_self_consistent() {
        let mut x = Xdr::new();
        Attrs::default().encode(&mut x);
        let len = u32::from_be_bytes(x.buf[12..16].try_into().unwrap()) as usize;
        assert_eq!(x.len(), 16 + len);
    }
}
