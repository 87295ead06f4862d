//! NFS version 3 (RFC 1813) call arguments and reply results.
//!
//! Each call/reply is decoded only as far as needed to fill [`NfsCall`] /
//! [`NfsReply`]: the file handles, names, offsets and counts a transaction
//! table needs. Bulk data (WRITE/READ payloads) is never copied; its length
//! comes from the XDR length field, so a snaplen-cut payload still yields
//! the header fields (with `complete == false`). The same two structs are
//! filled by the NFSv2 parsers in [`crate::nfs2_records`].

use crate::error::{ParseError, Result};
use crate::xdr::{pad4, XdrCursor};

pub const NFS3_FHSIZE: u32 = 64;

pub const NFSPROC3_NULL: u32 = 0;
pub const NFSPROC3_GETATTR: u32 = 1;
pub const NFSPROC3_SETATTR: u32 = 2;
pub const NFSPROC3_LOOKUP: u32 = 3;
pub const NFSPROC3_ACCESS: u32 = 4;
pub const NFSPROC3_READLINK: u32 = 5;
pub const NFSPROC3_READ: u32 = 6;
pub const NFSPROC3_WRITE: u32 = 7;
pub const NFSPROC3_CREATE: u32 = 8;
pub const NFSPROC3_MKDIR: u32 = 9;
pub const NFSPROC3_SYMLINK: u32 = 10;
pub const NFSPROC3_MKNOD: u32 = 11;
pub const NFSPROC3_REMOVE: u32 = 12;
pub const NFSPROC3_RMDIR: u32 = 13;
pub const NFSPROC3_RENAME: u32 = 14;
pub const NFSPROC3_LINK: u32 = 15;
pub const NFSPROC3_READDIR: u32 = 16;
pub const NFSPROC3_READDIRPLUS: u32 = 17;
pub const NFSPROC3_FSSTAT: u32 = 18;
pub const NFSPROC3_FSINFO: u32 = 19;
pub const NFSPROC3_PATHCONF: u32 = 20;
pub const NFSPROC3_COMMIT: u32 = 21;

const PROC3_NAMES: [&str; 22] = [
    "NULL",
    "GETATTR",
    "SETATTR",
    "LOOKUP",
    "ACCESS",
    "READLINK",
    "READ",
    "WRITE",
    "CREATE",
    "MKDIR",
    "SYMLINK",
    "MKNOD",
    "REMOVE",
    "RMDIR",
    "RENAME",
    "LINK",
    "READDIR",
    "READDIRPLUS",
    "FSSTAT",
    "FSINFO",
    "PATHCONF",
    "COMMIT",
];

pub fn nfs3_proc_name(proc_: u32) -> &'static str {
    PROC3_NAMES
        .get(proc_ as usize)
        .copied()
        .unwrap_or("UNKNOWN")
}

pub const NFS3_OK: u32 = 0;
pub const NFS3ERR_JUKEBOX: u32 = 10008;

/// Name of an nfsstat3 value (RFC 1813 section 2.6). NFSv2 shares the
/// low values (plus NFSERR_WFLUSH 99).
pub fn nfs3_status_name(status: u32) -> &'static str {
    match status {
        0 => "NFS3_OK",
        1 => "NFS3ERR_PERM",
        2 => "NFS3ERR_NOENT",
        5 => "NFS3ERR_IO",
        6 => "NFS3ERR_NXIO",
        13 => "NFS3ERR_ACCES",
        17 => "NFS3ERR_EXIST",
        18 => "NFS3ERR_XDEV",
        19 => "NFS3ERR_NODEV",
        20 => "NFS3ERR_NOTDIR",
        21 => "NFS3ERR_ISDIR",
        22 => "NFS3ERR_INVAL",
        27 => "NFS3ERR_FBIG",
        28 => "NFS3ERR_NOSPC",
        30 => "NFS3ERR_ROFS",
        31 => "NFS3ERR_MLINK",
        63 => "NFS3ERR_NAMETOOLONG",
        66 => "NFS3ERR_NOTEMPTY",
        69 => "NFS3ERR_DQUOT",
        70 => "NFS3ERR_STALE",
        71 => "NFS3ERR_REMOTE",
        99 => "NFSERR_WFLUSH",
        10001 => "NFS3ERR_BADHANDLE",
        10002 => "NFS3ERR_NOT_SYNC",
        10003 => "NFS3ERR_BAD_COOKIE",
        10004 => "NFS3ERR_NOTSUPP",
        10005 => "NFS3ERR_TOOSMALL",
        10006 => "NFS3ERR_SERVERFAULT",
        10007 => "NFS3ERR_BADTYPE",
        10008 => "NFS3ERR_JUKEBOX",
        _ => "NFS3ERR_UNKNOWN",
    }
}

// stable_how (WRITE) and its echo in the reply's `committed`.
pub const UNSTABLE: u32 = 0;
pub const DATA_SYNC: u32 = 1;
pub const FILE_SYNC: u32 = 2;

pub fn stable_how_name(v: u32) -> &'static str {
    match v {
        UNSTABLE => "UNSTABLE",
        DATA_SYNC => "DATA_SYNC",
        FILE_SYNC => "FILE_SYNC",
        _ => "UNKNOWN",
    }
}

/// Most directory entries kept from one READDIR(PLUS) reply.
pub const MAX_DIR_ENTRIES: usize = 16384;

/// What a call targets. Fields a procedure does not have stay `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NfsCall {
    pub proc_: u32,
    /// The object's handle, or the directory's for name-based procedures.
    pub fh: Option<Vec<u8>>,
    /// The entry name (LOOKUP, CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR,
    /// RENAME source).
    pub name: Option<String>,
    /// Destination directory (RENAME target, LINK directory).
    pub fh2: Option<Vec<u8>>,
    /// Destination name (RENAME target, LINK new name).
    pub name2: Option<String>,
    /// SYMLINK target path.
    pub target: Option<String>,
    /// READ/WRITE/COMMIT offset.
    pub offset: Option<u64>,
    /// READ/WRITE/COMMIT count; READDIR count; READDIRPLUS maxcount.
    pub count: Option<u32>,
    /// WRITE stable_how.
    pub stable: Option<u32>,
    /// WRITE payload length from its length field.
    pub data_len: Option<u32>,
    /// READDIR(PLUS) cookie.
    pub cookie: Option<u64>,
    /// CREATE createmode3 (UNCHECKED/GUARDED/EXCLUSIVE).
    pub create_mode: Option<u32>,
    /// All bytes the arguments declare (including WRITE data) were present.
    pub complete: bool,
}

/// One READDIR/READDIRPLUS entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub fileid: u64,
    pub name: String,
    pub cookie: u64,
    /// READDIRPLUS only, when the server sent one.
    pub fh: Option<Vec<u8>>,
}

/// FSINFO transfer sizes: the server's limits on rsize/wsize.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsInfo {
    pub rtmax: u32,
    pub rtpref: u32,
    pub wtmax: u32,
    pub wtpref: u32,
    pub maxfilesize: u64,
}

/// What a reply says. Result fields are only set for successful replies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NfsReply {
    pub proc_: u32,
    pub status: u32,
    /// Resulting handle (LOOKUP, CREATE, MKDIR, SYMLINK, MKNOD).
    pub fh: Option<Vec<u8>>,
    /// READ/WRITE count.
    pub count: Option<u32>,
    /// READ/READDIR(PLUS) end of file/directory.
    pub eof: Option<bool>,
    /// WRITE committed (stable_how).
    pub committed: Option<u32>,
    /// READ payload length from its length field.
    pub data_len: Option<u32>,
    /// File size from the (post-operation) attributes, when present.
    pub size: Option<u64>,
    pub entries: Vec<DirEntry>,
    pub fsinfo: Option<FsInfo>,
    /// Everything the reply declares was present and decoded (false when a
    /// READ payload or directory listing was cut or capped).
    pub complete: bool,
}

impl NfsReply {
    pub fn is_ok(&self) -> bool {
        self.status == NFS3_OK
    }
}

fn fh3(c: &mut XdrCursor) -> Result<Vec<u8>> {
    Ok(c.opaque(NFS3_FHSIZE)?.to_vec())
}

/// diropargs3: directory handle + name.
fn dirop3(c: &mut XdrCursor) -> Result<(Vec<u8>, String)> {
    Ok((fh3(c)?, c.name()?))
}

/// set_time: how (DONT_CHANGE/SET_TO_SERVER_TIME/SET_TO_CLIENT_TIME) [+ nfstime3].
fn skip_settime3(c: &mut XdrCursor) -> Result<()> {
    match c.u32()? {
        0 | 1 => Ok(()),
        2 => c.skip(8),
        _ => Err(ParseError::Malformed("nfs3 time_how")),
    }
}

/// sattr3: optional mode, uid, gid, size, atime, mtime.
fn skip_sattr3(c: &mut XdrCursor) -> Result<()> {
    for _ in 0..3 {
        if c.bool()? {
            c.skip(4)?;
        }
    }
    if c.bool()? {
        c.skip(8)?;
    }
    skip_settime3(c)?;
    skip_settime3(c)
}

const FATTR3_LEN: usize = 84;

/// fattr3, returning the file size (5th field, byte 20).
fn fattr3_size(c: &mut XdrCursor) -> Result<u64> {
    let a = c.take(FATTR3_LEN)?;
    let mut s = XdrCursor::new(a.get(20..28).unwrap_or(&[]));
    s.u64()
}

/// post_op_attr: bool + fattr3.
fn post_op_attr(c: &mut XdrCursor) -> Result<Option<u64>> {
    if c.bool()? {
        fattr3_size(c).map(Some)
    } else {
        Ok(None)
    }
}

/// wcc_data: pre_op_attr (bool + 24 bytes) then post_op_attr; returns the
/// post-operation size.
fn wcc_data(c: &mut XdrCursor) -> Result<Option<u64>> {
    if c.bool()? {
        c.skip(24)?;
    }
    post_op_attr(c)
}

/// post_op_fh3: bool + nfs_fh3.
fn post_op_fh3(c: &mut XdrCursor) -> Result<Option<Vec<u8>>> {
    if c.bool()? {
        fh3(c).map(Some)
    } else {
        Ok(None)
    }
}

/// Decode NFSv3 call arguments; `body` starts at the RPC procedure body.
pub fn parse_nfs3_call(proc_: u32, body: &[u8]) -> Result<NfsCall> {
    let mut c = XdrCursor::new(body);
    let mut r = NfsCall {
        proc_,
        complete: true,
        ..Default::default()
    };
    match proc_ {
        NFSPROC3_NULL => {}
        NFSPROC3_GETATTR | NFSPROC3_SETATTR | NFSPROC3_ACCESS | NFSPROC3_READLINK
        | NFSPROC3_FSSTAT | NFSPROC3_FSINFO | NFSPROC3_PATHCONF => r.fh = Some(fh3(&mut c)?),
        NFSPROC3_LOOKUP | NFSPROC3_MKNOD | NFSPROC3_REMOVE | NFSPROC3_RMDIR | NFSPROC3_MKDIR => {
            let (fh, name) = dirop3(&mut c)?;
            r.fh = Some(fh);
            r.name = Some(name);
        }
        NFSPROC3_CREATE => {
            let (fh, name) = dirop3(&mut c)?;
            r.fh = Some(fh);
            r.name = Some(name);
            r.create_mode = Some(c.u32()?);
        }
        NFSPROC3_SYMLINK => {
            let (fh, name) = dirop3(&mut c)?;
            r.fh = Some(fh);
            r.name = Some(name);
            skip_sattr3(&mut c)?;
            r.target = Some(c.name()?);
        }
        NFSPROC3_READ | NFSPROC3_COMMIT => {
            r.fh = Some(fh3(&mut c)?);
            r.offset = Some(c.u64()?);
            r.count = Some(c.u32()?);
        }
        NFSPROC3_WRITE => {
            r.fh = Some(fh3(&mut c)?);
            r.offset = Some(c.u64()?);
            r.count = Some(c.u32()?);
            r.stable = Some(c.u32()?);
            let len = c.u32()?;
            r.data_len = Some(len);
            r.complete = c.remaining() >= pad4(len as usize);
        }
        NFSPROC3_RENAME => {
            let (fh, name) = dirop3(&mut c)?;
            r.fh = Some(fh);
            r.name = Some(name);
            let (fh2, name2) = dirop3(&mut c)?;
            r.fh2 = Some(fh2);
            r.name2 = Some(name2);
        }
        NFSPROC3_LINK => {
            r.fh = Some(fh3(&mut c)?);
            let (fh2, name2) = dirop3(&mut c)?;
            r.fh2 = Some(fh2);
            r.name2 = Some(name2);
        }
        NFSPROC3_READDIR | NFSPROC3_READDIRPLUS => {
            r.fh = Some(fh3(&mut c)?);
            r.cookie = Some(c.u64()?);
            c.skip(8)?; // cookieverf
            let count = c.u32()?;
            // READDIRPLUS: dircount then maxcount; maxcount bounds the reply.
            r.count = Some(if proc_ == NFSPROC3_READDIRPLUS {
                c.u32()?
            } else {
                count
            });
        }
        _ => return Err(ParseError::Malformed("nfs3 procedure number")),
    }
    Ok(r)
}

/// Decode an NFSv3 reply; `proc_` comes from the matching call and `body`
/// starts at the RPC results (after an accepted SUCCESS header).
pub fn parse_nfs3_reply(proc_: u32, body: &[u8]) -> Result<NfsReply> {
    let mut c = XdrCursor::new(body);
    let mut r = NfsReply {
        proc_,
        complete: true,
        ..Default::default()
    };
    if proc_ == NFSPROC3_NULL {
        return Ok(r);
    }
    if proc_ > NFSPROC3_COMMIT {
        return Err(ParseError::Malformed("nfs3 procedure number"));
    }
    r.status = c.u32()?;
    if r.status != NFS3_OK {
        // Failure results carry only attributes; the status is what matters.
        return Ok(r);
    }
    match proc_ {
        NFSPROC3_GETATTR => r.size = Some(fattr3_size(&mut c)?),
        NFSPROC3_SETATTR => r.size = wcc_data(&mut c)?,
        NFSPROC3_LOOKUP => {
            r.fh = Some(fh3(&mut c)?);
            r.size = post_op_attr(&mut c)?;
        }
        NFSPROC3_READ => {
            r.size = post_op_attr(&mut c)?;
            r.count = Some(c.u32()?);
            r.eof = Some(c.bool()?);
            let len = c.u32()?;
            r.data_len = Some(len);
            r.complete = c.remaining() >= pad4(len as usize);
        }
        NFSPROC3_WRITE => {
            r.size = wcc_data(&mut c)?;
            r.count = Some(c.u32()?);
            r.committed = Some(c.u32()?);
        }
        NFSPROC3_CREATE | NFSPROC3_MKDIR | NFSPROC3_SYMLINK | NFSPROC3_MKNOD => {
            r.fh = post_op_fh3(&mut c)?;
            r.size = post_op_attr(&mut c)?;
        }
        NFSPROC3_READDIR | NFSPROC3_READDIRPLUS => {
            post_op_attr(&mut c)?;
            c.skip(8)?; // cookieverf
            parse_entries3(&mut c, proc_ == NFSPROC3_READDIRPLUS, &mut r)?;
        }
        NFSPROC3_FSINFO => {
            post_op_attr(&mut c)?;
            let rtmax = c.u32()?;
            let rtpref = c.u32()?;
            c.skip(4)?;
            let wtmax = c.u32()?;
            let wtpref = c.u32()?;
            c.skip(8)?; // wtmult, dtpref
            r.fsinfo = Some(FsInfo {
                rtmax,
                rtpref,
                wtmax,
                wtpref,
                maxfilesize: c.u64()?,
            });
        }
        // ACCESS, READLINK, REMOVE, RMDIR, RENAME, LINK, FSSTAT, PATHCONF,
        // COMMIT: nothing beyond the status is needed.
        _ => {}
    }
    Ok(r)
}

/// READDIR entry3 / READDIRPLUS entryplus3 lists. A list cut by the
/// capture yields the entries decoded so far and `complete = false`.
fn parse_entries3(c: &mut XdrCursor, plus: bool, r: &mut NfsReply) -> Result<()> {
    loop {
        let mut one = || -> Result<Option<DirEntry>> {
            if !c.bool()? {
                r.eof = Some(c.bool()?);
                return Ok(None);
            }
            let fileid = c.u64()?;
            let name = c.name()?;
            let cookie = c.u64()?;
            let fh = if plus {
                post_op_attr(c)?;
                post_op_fh3(c)?
            } else {
                None
            };
            Ok(Some(DirEntry {
                fileid,
                name,
                cookie,
                fh,
            }))
        };
        match one() {
            Ok(Some(e)) => {
                if r.entries.len() >= MAX_DIR_ENTRIES {
                    r.complete = false;
                    return Ok(());
                }
                r.entries.push(e);
            }
            Ok(None) => return Ok(()),
            Err(ParseError::Incomplete) => {
                r.complete = false;
                return Ok(());
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::{fuzz, prefix_threshold, Xdr};

    pub const FH: &[u8] = &[0xab; 28];

    fn fattr(size: u64) -> Xdr {
        let mut x = Xdr::new().u32(1).u32(0o644).u32(1).u32(0).u32(0).u64(size);
        x = x.u64(size).u32(0).u32(0).u64(1).u64(99);
        x.u64(0).u64(0).u64(0)
    }

    pub fn calls() -> Vec<(u32, Vec<u8>)> {
        let fh = || Xdr::new().opaque(FH);
        let dirop = |n: &str| fh().string(n);
        let sattr = Xdr::new().bool(true).u32(0o755).bool(false).bool(false);
        let sattr = sattr.bool(false).u32(0).u32(2).u64(5).done();
        vec![
            (NFSPROC3_GETATTR, fh().done()),
            (NFSPROC3_LOOKUP, dirop("file.txt").done()),
            (NFSPROC3_READ, fh().u64(4096).u32(32768).done()),
            (
                NFSPROC3_WRITE,
                fh().u64(8192).u32(5).u32(FILE_SYNC).opaque(b"hello").done(),
            ),
            (NFSPROC3_CREATE, dirop("new").u32(1).bytes(&sattr).done()),
            (NFSPROC3_MKDIR, dirop("d").bytes(&sattr).done()),
            (
                NFSPROC3_SYMLINK,
                dirop("ln").bytes(&sattr).string("/tgt").done(),
            ),
            (NFSPROC3_MKNOD, dirop("fifo").u32(7).done()),
            (NFSPROC3_REMOVE, dirop("old").done()),
            (NFSPROC3_RMDIR, dirop("dd").done()),
            (NFSPROC3_RENAME, dirop("a").bytes(&dirop("b").done()).done()),
            (NFSPROC3_LINK, fh().bytes(&dirop("hard").done()).done()),
            (
                NFSPROC3_READDIRPLUS,
                fh().u64(0).u64(0).u32(512).u32(4096).done(),
            ),
            (NFSPROC3_COMMIT, fh().u64(0).u32(0).done()),
        ]
    }

    pub fn replies() -> Vec<(u32, Vec<u8>)> {
        let entry = |id: u64, n: &str| {
            Xdr::new()
                .bool(true)
                .u64(id)
                .string(n)
                .u64(id * 10)
                .bool(true)
                .bytes(&fattr(id).done())
                .bool(true)
                .opaque(&[id as u8; 8])
                .done()
        };
        vec![
            (
                NFSPROC3_GETATTR,
                Xdr::new().u32(0).bytes(&fattr(77).done()).done(),
            ),
            (
                NFSPROC3_LOOKUP,
                Xdr::new()
                    .u32(0)
                    .opaque(FH)
                    .bool(true)
                    .bytes(&fattr(12).done())
                    .bool(false)
                    .done(),
            ),
            (
                NFSPROC3_READ,
                Xdr::new()
                    .u32(0)
                    .bool(false)
                    .u32(3)
                    .bool(true)
                    .opaque(b"abc")
                    .done(),
            ),
            (
                NFSPROC3_WRITE,
                Xdr::new()
                    .u32(0)
                    .bool(false)
                    .bool(false)
                    .u32(5)
                    .u32(UNSTABLE)
                    .u64(1)
                    .done(),
            ),
            (
                NFSPROC3_CREATE,
                Xdr::new()
                    .u32(0)
                    .bool(true)
                    .opaque(FH)
                    .bool(false)
                    .bool(false)
                    .bool(false)
                    .done(),
            ),
            (
                NFSPROC3_READDIRPLUS,
                Xdr::new()
                    .u32(0)
                    .bool(false)
                    .u64(0)
                    .bytes(&entry(1, "."))
                    .bytes(&entry(2, "x.dat"))
                    .bool(false)
                    .bool(true)
                    .done(),
            ),
            (
                NFSPROC3_FSINFO,
                Xdr::new()
                    .u32(0)
                    .bool(false)
                    .u32(1 << 20)
                    .u32(1 << 20)
                    .u32(4096)
                    .u32(1 << 19)
                    .u32(1 << 19)
                    .u32(4096)
                    .u32(4096)
                    .u64(u64::MAX)
                    .u64(1)
                    .u32(0x1b)
                    .done(),
            ),
            (
                NFSPROC3_READ,
                Xdr::new().u32(NFS3ERR_JUKEBOX).bool(false).done(),
            ),
        ]
    }

    #[test]
    fn call_fields() {
        let all = calls();
        let get =
            |p: u32| parse_nfs3_call(p, &all.iter().find(|(q, _)| *q == p).unwrap().1).unwrap();
        let l = get(NFSPROC3_LOOKUP);
        assert_eq!(
            (l.fh.as_deref(), l.name.as_deref()),
            (Some(FH), Some("file.txt"))
        );
        let w = get(NFSPROC3_WRITE);
        assert_eq!(
            (w.offset, w.count, w.stable, w.data_len),
            (Some(8192), Some(5), Some(2), Some(5))
        );
        assert!(w.complete);
        let rn = get(NFSPROC3_RENAME);
        assert_eq!(
            (rn.name.as_deref(), rn.name2.as_deref()),
            (Some("a"), Some("b"))
        );
        let ln = get(NFSPROC3_LINK);
        assert_eq!(
            (ln.fh2.as_deref(), ln.name2.as_deref()),
            (Some(FH), Some("hard"))
        );
        assert_eq!(get(NFSPROC3_SYMLINK).target.as_deref(), Some("/tgt"));
        assert_eq!(get(NFSPROC3_CREATE).create_mode, Some(1));
        assert_eq!(get(NFSPROC3_READDIRPLUS).count, Some(4096));
        assert_eq!(get(NFSPROC3_READ).offset, Some(4096));
        assert_eq!(nfs3_proc_name(NFSPROC3_READDIRPLUS), "READDIRPLUS");
        assert_eq!(nfs3_proc_name(22), "UNKNOWN");
        assert_eq!(nfs3_status_name(NFS3ERR_JUKEBOX), "NFS3ERR_JUKEBOX");
        // Oversized handle is malformed.
        let b = Xdr::new().opaque(&[0; 65]).done();
        assert!(matches!(
            parse_nfs3_call(1, &b),
            Err(ParseError::Malformed(_))
        ));
    }

    #[test]
    fn write_payload_cut_still_decodes() {
        let b = Xdr::new()
            .opaque(FH)
            .u64(0)
            .u32(65536)
            .u32(0)
            .u32(65536)
            .bytes(&[0; 100])
            .done();
        let w = parse_nfs3_call(NFSPROC3_WRITE, &b).unwrap();
        assert_eq!(
            (w.count, w.data_len, w.complete),
            (Some(65536), Some(65536), false)
        );
    }

    #[test]
    fn truncated_calls_are_incomplete() {
        for (p, b) in calls() {
            let need = prefix_threshold(&b, |b| parse_nfs3_call(p, b), ParseError::is_incomplete);
            // Only WRITE (payload) and CREATE/MKDIR/MKNOD (attributes) have
            // trailing bytes that are not needed.
            let slack = b.len() - need;
            assert!(
                slack == 0 || matches!(p, 7 | 8 | 9 | 11),
                "proc {p} slack {slack}"
            );
        }
    }

    #[test]
    fn reply_fields() {
        let all = replies();
        let r = parse_nfs3_reply(NFSPROC3_GETATTR, &all[0].1).unwrap();
        assert_eq!(r.size, Some(77));
        let r = parse_nfs3_reply(NFSPROC3_LOOKUP, &all[1].1).unwrap();
        assert_eq!((r.fh.as_deref(), r.size), (Some(FH), Some(12)));
        let r = parse_nfs3_reply(NFSPROC3_READ, &all[2].1).unwrap();
        assert_eq!(
            (r.count, r.eof, r.data_len, r.complete),
            (Some(3), Some(true), Some(3), true)
        );
        let r = parse_nfs3_reply(NFSPROC3_WRITE, &all[3].1).unwrap();
        assert_eq!((r.count, r.committed), (Some(5), Some(UNSTABLE)));
        let r = parse_nfs3_reply(NFSPROC3_CREATE, &all[4].1).unwrap();
        assert_eq!(r.fh.as_deref(), Some(FH));
        let r = parse_nfs3_reply(NFSPROC3_READDIRPLUS, &all[5].1).unwrap();
        assert_eq!(r.entries.len(), 2);
        assert_eq!(r.entries[1].name, "x.dat");
        assert_eq!(r.entries[1].fh.as_deref(), Some(&[2u8; 8][..]));
        assert_eq!((r.eof, r.complete), (Some(true), true));
        let r = parse_nfs3_reply(NFSPROC3_FSINFO, &all[6].1).unwrap();
        assert_eq!(
            r.fsinfo.map(|f| (f.rtmax, f.wtpref)),
            Some((1 << 20, 1 << 19))
        );
        let r = parse_nfs3_reply(NFSPROC3_READ, &all[7].1).unwrap();
        assert_eq!((r.status, r.count), (NFS3ERR_JUKEBOX, None));
    }

    #[test]
    fn truncated_replies() {
        // Bytes each reply needs before it decodes (trailing fields that are
        // not extracted do not count); READ/READDIRPLUS decode partially.
        let need = [88, 124, 20, 20, 44, 16, 44, 4];
        for ((p, b), need) in replies().into_iter().zip(need) {
            assert!(parse_nfs3_reply(p, &b).unwrap().complete);
            for n in 0..b.len() {
                match parse_nfs3_reply(p, &b[..n]) {
                    Err(e) => assert!(n < need && e.is_incomplete(), "proc {p} len {n}"),
                    Ok(r) => {
                        assert!(n >= need, "proc {p} len {n}");
                        if matches!(p, NFSPROC3_READ | NFSPROC3_READDIRPLUS) && r.is_ok() {
                            assert!(!r.complete, "proc {p} len {n}");
                        }
                    }
                }
            }
        }
        // READ header fields are decodable with the payload cut.
        let b = &replies()[2].1;
        let r = parse_nfs3_reply(NFSPROC3_READ, &b[..b.len() - 2]).unwrap();
        assert_eq!((r.data_len, r.complete), (Some(3), false));
    }

    #[test]
    fn fuzz_nfs3() {
        let seeds: Vec<Vec<u8>> = calls()
            .into_iter()
            .chain(replies())
            .map(|(_, b)| b)
            .collect();
        let mut i = 0u32;
        fuzz(&seeds, 30_000, |b| {
            i = i.wrapping_add(1);
            let p = i % 23;
            let _ = parse_nfs3_call(p, b);
            let _ = parse_nfs3_reply(p, b);
        });
    }
}
