//! NFS version 2 (RFC 1094): procedure names and the same field
//! extraction as NFSv3, into [`NfsCall`] / [`NfsReply`]. v2 handles are a
//! fixed 32 bytes and offsets/counts/sizes are 32-bit.

use crate::error::{ParseError, Result};
use crate::nfs3_records::{DirEntry, FsInfo, NfsCall, NfsReply, MAX_DIR_ENTRIES};
use crate::xdr::{pad4, XdrCursor};

pub const NFS2_FHSIZE: usize = 32;

pub const NFSPROC_NULL: u32 = 0;
pub const NFSPROC_GETATTR: u32 = 1;
pub const NFSPROC_SETATTR: u32 = 2;
pub const NFSPROC_ROOT: u32 = 3;
pub const NFSPROC_LOOKUP: u32 = 4;
pub const NFSPROC_READLINK: u32 = 5;
pub const NFSPROC_READ: u32 = 6;
pub const NFSPROC_WRITECACHE: u32 = 7;
pub const NFSPROC_WRITE: u32 = 8;
pub const NFSPROC_CREATE: u32 = 9;
pub const NFSPROC_REMOVE: u32 = 10;
pub const NFSPROC_RENAME: u32 = 11;
pub const NFSPROC_LINK: u32 = 12;
pub const NFSPROC_SYMLINK: u32 = 13;
pub const NFSPROC_MKDIR: u32 = 14;
pub const NFSPROC_RMDIR: u32 = 15;
pub const NFSPROC_READDIR: u32 = 16;
pub const NFSPROC_STATFS: u32 = 17;

const PROC2_NAMES: [&str; 18] = [
    "NULL",
    "GETATTR",
    "SETATTR",
    "ROOT",
    "LOOKUP",
    "READLINK",
    "READ",
    "WRITECACHE",
    "WRITE",
    "CREATE",
    "REMOVE",
    "RENAME",
    "LINK",
    "SYMLINK",
    "MKDIR",
    "RMDIR",
    "READDIR",
    "STATFS",
];

pub fn nfs2_proc_name(proc_: u32) -> &'static str {
    PROC2_NAMES
        .get(proc_ as usize)
        .copied()
        .unwrap_or("UNKNOWN")
}

/// fattr (RFC 1094 2.3.5): 17 words; size is the 6th.
const FATTR2_LEN: usize = 68;

fn fh2(c: &mut XdrCursor) -> Result<Vec<u8>> {
    Ok(c.opaque_fixed(NFS2_FHSIZE)?.to_vec())
}

fn fattr2_size(c: &mut XdrCursor) -> Result<u64> {
    let a = c.take(FATTR2_LEN)?;
    XdrCursor::new(a.get(20..24).unwrap_or(&[]))
        .u32()
        .map(u64::from)
}

fn dirop2(c: &mut XdrCursor, r: &mut NfsCall) -> Result<()> {
    r.fh = Some(fh2(c)?);
    r.name = Some(c.name()?);
    Ok(())
}

/// Decode NFSv2 call arguments; `body` starts at the RPC procedure body.
pub fn parse_nfs2_call(proc_: u32, body: &[u8]) -> Result<NfsCall> {
    let mut c = XdrCursor::new(body);
    let mut r = NfsCall {
        proc_,
        complete: true,
        ..Default::default()
    };
    match proc_ {
        NFSPROC_NULL | NFSPROC_ROOT | NFSPROC_WRITECACHE => {}
        NFSPROC_GETATTR | NFSPROC_SETATTR | NFSPROC_READLINK | NFSPROC_STATFS => {
            r.fh = Some(fh2(&mut c)?)
        }
        NFSPROC_LOOKUP | NFSPROC_CREATE | NFSPROC_REMOVE | NFSPROC_MKDIR | NFSPROC_RMDIR => {
            dirop2(&mut c, &mut r)?
        }
        NFSPROC_SYMLINK => {
            dirop2(&mut c, &mut r)?;
            r.target = Some(c.name()?);
        }
        NFSPROC_RENAME => {
            dirop2(&mut c, &mut r)?;
            r.fh2 = Some(fh2(&mut c)?);
            r.name2 = Some(c.name()?);
        }
        NFSPROC_LINK => {
            r.fh = Some(fh2(&mut c)?);
            r.fh2 = Some(fh2(&mut c)?);
            r.name2 = Some(c.name()?);
        }
        NFSPROC_READ => {
            r.fh = Some(fh2(&mut c)?);
            r.offset = Some(c.u32()?.into());
            r.count = Some(c.u32()?);
        }
        NFSPROC_WRITE => {
            r.fh = Some(fh2(&mut c)?);
            c.skip(4)?; // beginoffset, unused
            r.offset = Some(c.u32()?.into());
            c.skip(4)?; // totalcount, unused
            let len = c.u32()?;
            r.count = Some(len);
            r.data_len = Some(len);
            r.complete = c.remaining() >= pad4(len as usize);
        }
        NFSPROC_READDIR => {
            r.fh = Some(fh2(&mut c)?);
            r.cookie = Some(c.u32()?.into());
            r.count = Some(c.u32()?);
        }
        _ => return Err(ParseError::Malformed("nfs2 procedure number")),
    }
    Ok(r)
}

/// Decode an NFSv2 reply for the call's procedure.
pub fn parse_nfs2_reply(proc_: u32, body: &[u8]) -> Result<NfsReply> {
    let mut c = XdrCursor::new(body);
    let mut r = NfsReply {
        proc_,
        complete: true,
        ..Default::default()
    };
    if matches!(proc_, NFSPROC_NULL | NFSPROC_ROOT | NFSPROC_WRITECACHE) {
        return Ok(r);
    }
    if proc_ > NFSPROC_STATFS {
        return Err(ParseError::Malformed("nfs2 procedure number"));
    }
    r.status = c.u32()?;
    if r.status != 0 {
        return Ok(r);
    }
    match proc_ {
        NFSPROC_GETATTR | NFSPROC_SETATTR | NFSPROC_WRITE => r.size = Some(fattr2_size(&mut c)?),
        NFSPROC_LOOKUP | NFSPROC_CREATE | NFSPROC_MKDIR => {
            r.fh = Some(fh2(&mut c)?);
            r.size = Some(fattr2_size(&mut c)?);
        }
        NFSPROC_READ => {
            r.size = Some(fattr2_size(&mut c)?);
            let len = c.u32()?;
            r.count = Some(len);
            r.data_len = Some(len);
            r.complete = c.remaining() >= pad4(len as usize);
        }
        NFSPROC_READDIR => loop {
            let mut one = || -> Result<Option<DirEntry>> {
                if !c.bool()? {
                    r.eof = Some(c.bool()?);
                    return Ok(None);
                }
                Ok(Some(DirEntry {
                    fileid: c.u32()?.into(),
                    name: c.name()?,
                    cookie: c.u32()?.into(),
                    fh: None,
                }))
            };
            match one() {
                Ok(Some(_)) if r.entries.len() >= MAX_DIR_ENTRIES => {
                    r.complete = false;
                    break;
                }
                Ok(Some(e)) => r.entries.push(e),
                Ok(None) => break,
                Err(ParseError::Incomplete) => {
                    r.complete = false;
                    break;
                }
                Err(e) => return Err(e),
            }
        },
        NFSPROC_STATFS => {
            // tsize is the server's preferred transfer size.
            let tsize = c.u32()?;
            r.fsinfo = Some(FsInfo {
                rtmax: tsize,
                rtpref: tsize,
                wtmax: tsize,
                wtpref: tsize,
                maxfilesize: u32::MAX.into(),
            });
        }
        _ => {}
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{fuzz, prefix_threshold, Xdr};

    const FH: [u8; 32] = [7; 32];

    fn fattr(size: u32) -> Vec<u8> {
        let mut x = Xdr::new();
        for i in 0..17u32 {
            x = x.u32(if i == 5 { size } else { i });
        }
        x.done()
    }

    fn calls() -> Vec<(u32, Vec<u8>)> {
        let fh = || Xdr::new().fixed(&FH);
        vec![
            (NFSPROC_LOOKUP, fh().string("etc").done()),
            (NFSPROC_READ, fh().u32(8192).u32(8192).u32(0).done()),
            (
                NFSPROC_WRITE,
                fh().u32(0).u32(512).u32(0).opaque(&[1; 6]).done(),
            ),
            (
                NFSPROC_RENAME,
                fh().string("a").fixed(&FH).string("b").done(),
            ),
            (NFSPROC_LINK, fh().fixed(&FH).string("l").done()),
            (
                NFSPROC_SYMLINK,
                fh().string("s").string("/x").bytes(&[0; 32]).done(),
            ),
            (NFSPROC_READDIR, fh().u32(0).u32(1024).done()),
        ]
    }

    fn replies() -> Vec<(u32, Vec<u8>)> {
        vec![
            (
                NFSPROC_LOOKUP,
                Xdr::new().u32(0).fixed(&FH).bytes(&fattr(9)).done(),
            ),
            (
                NFSPROC_READ,
                Xdr::new().u32(0).bytes(&fattr(9)).opaque(b"12345").done(),
            ),
            (NFSPROC_WRITE, Xdr::new().u32(0).bytes(&fattr(600)).done()),
            (
                NFSPROC_READDIR,
                Xdr::new()
                    .u32(0)
                    .bool(true)
                    .u32(5)
                    .string("f")
                    .u32(1)
                    .bool(false)
                    .bool(true)
                    .done(),
            ),
            (
                NFSPROC_STATFS,
                Xdr::new()
                    .u32(0)
                    .u32(8192)
                    .u32(512)
                    .u32(1)
                    .u32(1)
                    .u32(1)
                    .done(),
            ),
            (NFSPROC_GETATTR, Xdr::new().u32(70).done()),
        ]
    }

    #[test]
    fn calls_and_replies() {
        let c = calls();
        let l = parse_nfs2_call(c[0].0, &c[0].1).unwrap();
        assert_eq!(
            (l.fh.as_deref(), l.name.as_deref()),
            (Some(&FH[..]), Some("etc"))
        );
        let w = parse_nfs2_call(c[2].0, &c[2].1).unwrap();
        assert_eq!((w.offset, w.count, w.complete), (Some(512), Some(6), true));
        let rn = parse_nfs2_call(c[3].0, &c[3].1).unwrap();
        assert_eq!(rn.name2.as_deref(), Some("b"));
        let r = replies();
        let l = parse_nfs2_reply(r[0].0, &r[0].1).unwrap();
        assert_eq!((l.fh.as_deref(), l.size), (Some(&FH[..]), Some(9)));
        let rd = parse_nfs2_reply(r[1].0, &r[1].1).unwrap();
        assert_eq!((rd.count, rd.complete), (Some(5), true));
        let d = parse_nfs2_reply(r[3].0, &r[3].1).unwrap();
        assert_eq!((d.entries[0].name.as_str(), d.eof), ("f", Some(true)));
        let s = parse_nfs2_reply(r[4].0, &r[4].1).unwrap();
        assert_eq!(s.fsinfo.map(|f| f.rtmax), Some(8192));
        assert_eq!(parse_nfs2_reply(r[5].0, &r[5].1).unwrap().status, 70);
        assert_eq!(nfs2_proc_name(NFSPROC_STATFS), "STATFS");
    }

    #[test]
    fn truncation() {
        for (p, b) in calls() {
            prefix_threshold(&b, |b| parse_nfs2_call(p, b), ParseError::is_incomplete);
        }
        for (p, b) in replies() {
            prefix_threshold(&b, |b| parse_nfs2_reply(p, b), ParseError::is_incomplete);
        }
        let (p, b) = &calls()[2];
        let w = parse_nfs2_call(*p, &b[..b.len() - 1]).unwrap();
        assert!(!w.complete);
    }

    #[test]
    fn fuzz_nfs2() {
        let seeds: Vec<Vec<u8>> = calls()
            .into_iter()
            .chain(replies())
            .map(|(_, b)| b)
            .collect();
        let mut i = 0u32;
        fuzz(&seeds, 20_000, |b| {
            i = i.wrapping_add(1);
            let _ = parse_nfs2_call(i % 19, b);
            let _ = parse_nfs2_reply(i % 19, b);
        });
    }
}
