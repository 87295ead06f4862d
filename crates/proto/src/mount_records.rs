//! MOUNT (RFC 1094 appendix A, RFC 1813 section 5) and NFS_ACL procedure
//! names, plus the MNT call/reply, which maps an export path to the root
//! file handle that later NFS calls carry.

use crate::error::{ParseError, Result};
use crate::xdr::XdrCursor;

pub const MOUNTPROC_NULL: u32 = 0;
pub const MOUNTPROC_MNT: u32 = 1;
pub const MOUNTPROC_DUMP: u32 = 2;
pub const MOUNTPROC_UMNT: u32 = 3;
pub const MOUNTPROC_UMNTALL: u32 = 4;
pub const MOUNTPROC_EXPORT: u32 = 5;

/// MNTPATHLEN.
pub const MNTPATHLEN: u32 = 1024;

pub fn mount_proc_name(proc_: u32) -> &'static str {
    match proc_ {
        0 => "NULL",
        1 => "MNT",
        2 => "DUMP",
        3 => "UMNT",
        4 => "UMNTALL",
        5 => "EXPORT",
        6 => "EXPORTALL",
        7 => "PATHCONF",
        _ => "UNKNOWN",
    }
}

pub fn mount_status_name(status: u32) -> &'static str {
    match status {
        0 => "MNT3_OK",
        1 => "MNT3ERR_PERM",
        2 => "MNT3ERR_NOENT",
        5 => "MNT3ERR_IO",
        13 => "MNT3ERR_ACCES",
        20 => "MNT3ERR_NOTDIR",
        22 => "MNT3ERR_INVAL",
        63 => "MNT3ERR_NAMETOOLONG",
        10004 => "MNT3ERR_NOTSUPP",
        10006 => "MNT3ERR_SERVERFAULT",
        _ => "MNT3ERR_UNKNOWN",
    }
}

/// NFS_ACL (program 100227) procedures; v2 has GETATTR and ACCESS too.
pub fn nfsacl_proc_name(vers: u32, proc_: u32) -> &'static str {
    match (vers, proc_) {
        (_, 0) => "NULL",
        (_, 1) => "GETACL",
        (_, 2) => "SETACL",
        (2, 3) => "GETATTR",
        (2, 4) => "ACCESS",
        _ => "UNKNOWN",
    }
}

/// MNT / UMNT argument: the export path.
pub fn parse_mnt_call(body: &[u8]) -> Result<String> {
    let s = XdrCursor::new(body).string(MNTPATHLEN)?;
    Ok(String::from_utf8_lossy(s).into_owned())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MntReply {
    pub status: u32,
    /// Root handle of the export (v1/v2: 32 bytes fixed, v3: up to 64).
    pub fh: Option<Vec<u8>>,
    /// Auth flavors the server accepts (v3 only).
    pub auth_flavors: Vec<u32>,
}

/// MNT reply; `vers` is the MOUNT program version of the call.
pub fn parse_mnt_reply(vers: u32, body: &[u8]) -> Result<MntReply> {
    let mut c = XdrCursor::new(body);
    let status = c.u32()?;
    let mut r = MntReply {
        status,
        fh: None,
        auth_flavors: Vec::new(),
    };
    if status != 0 {
        return Ok(r);
    }
    match vers {
        1 | 2 => r.fh = Some(c.opaque_fixed(32)?.to_vec()),
        3 => {
            r.fh = Some(c.opaque(64)?.to_vec());
            let n = c.count(64)?;
            r.auth_flavors.reserve(c.capacity_hint(n, 4));
            for _ in 0..n {
                r.auth_flavors.push(c.u32()?);
            }
        }
        _ => return Err(ParseError::Malformed("mount version")),
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{fuzz, prefix_threshold, Xdr};

    #[test]
    fn mnt() {
        let call = Xdr::new().string("/export/data").done();
        assert_eq!(parse_mnt_call(&call).as_deref(), Ok("/export/data"));
        prefix_threshold(&call, parse_mnt_call, ParseError::is_incomplete);
        let reply = Xdr::new()
            .u32(0)
            .opaque(&[3; 20])
            .u32(2)
            .u32(1)
            .u32(390003)
            .done();
        let r = parse_mnt_reply(3, &reply).unwrap();
        assert_eq!(r.fh.as_deref(), Some(&[3u8; 20][..]));
        assert_eq!(r.auth_flavors, vec![1, 390003]);
        prefix_threshold(&reply, |b| parse_mnt_reply(3, b), ParseError::is_incomplete);
        let v1 = Xdr::new().u32(0).fixed(&[4; 32]).done();
        assert_eq!(
            parse_mnt_reply(1, &v1).unwrap().fh.map(|f| f.len()),
            Some(32)
        );
        let err = Xdr::new().u32(13).done();
        assert_eq!(parse_mnt_reply(3, &err).unwrap().status, 13);
        assert_eq!(mount_status_name(13), "MNT3ERR_ACCES");
        assert_eq!(mount_proc_name(MOUNTPROC_MNT), "MNT");
        assert_eq!(nfsacl_proc_name(3, 1), "GETACL");
        assert_eq!(nfsacl_proc_name(3, 4), "UNKNOWN");
        fuzz(&[call, reply, v1], 10_000, |b| {
            let _ = parse_mnt_call(b);
            let _ = parse_mnt_reply(3, b);
            let _ = parse_mnt_reply(1, b);
        });
    }
}
