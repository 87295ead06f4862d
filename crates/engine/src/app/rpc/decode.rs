//! Program-specific decoding of call arguments and reply results into
//! transaction fields: NFSv2/v3, MOUNT, NFS_ACL, NLM (NFSv4 COMPOUNDs are
//! in [`super::nfs4`]). Names found on the way feed the handle → path map.

use nastriage_proto::mount_records::{mount_status_name, parse_mnt_call, parse_mnt_reply};
use nastriage_proto::nfs2_records::{self as v2, parse_nfs2_call, parse_nfs2_reply};
use nastriage_proto::nfs3_records::{
    self as v3, nfs3_status_name, parse_nfs3_call, parse_nfs3_reply, NfsCall, NfsReply,
};
use nastriage_proto::rpc_records::{PROG_MOUNT, PROG_NFS, PROG_NFSACL, PROG_NLM};
use nastriage_proto::{ParseError, XdrCursor};

use super::joined::CompoundTexts;
use super::names::{join, NameMap};
use super::nfs4;
use super::progs::{nfs2_status_name, nlm_status_name};
use crate::transactions::{FileName, IdBytes, Name, Transaction};

/// What decoding a reply needs to remember from its call.
#[derive(Debug, Clone, Default)]
pub struct ReplyCtx {
    pub prog: u32,
    pub vers: u32,
    pub proc_: u32,
    /// RPCSEC_GSS service of a data call (its results are wrapped alike).
    pub gss_service: Option<u32>,
    pub want: Want,
}

/// A COMPOUND's operation numbers: a handful, in place (a `Vec` was an
/// allocation per NFSv4 request).
pub type OpNumbers = smallvec::SmallVec<[u32; 8]>;

#[derive(Debug, Clone, Default)]
pub enum Want {
    #[default]
    Nothing,
    /// The handle in a successful result names this path (LOOKUP, CREATE,
    /// MKDIR, SYMLINK, MKNOD).
    Named(String),
    /// A READDIRPLUS listing of this directory.
    Listing(Option<String>),
    /// MOUNT MNT of this export path.
    Mount(String),
    /// NFSv4 COMPOUND: path of the current handle after each operation,
    /// the operations named by the call and the principal's index;
    /// `cut`: the call's operation list was not fully captured (the
    /// reply's, which repeats the operation numbers, may complete it).
    Compound {
        paths: Vec<Option<String>>,
        ops: OpNumbers,
        principal: Option<usize>,
        cut: bool,
    },
}

impl ReplyCtx {
    /// The reply carries a directory listing worth keeping more of.
    pub fn wants_listing(&self) -> bool {
        matches!(self.want, Want::Listing(_))
    }
}

type Res = Result<(), ParseError>;

/// Decode the arguments of a call (`args` starts at the procedure's
/// arguments). `Err(Incomplete)` when they ran out before what is needed.
pub fn call_args(
    tx: &mut Transaction,
    rc: &mut ReplyCtx,
    args: &[u8],
    names: &NameMap,
    texts: &mut CompoundTexts,
) -> Res {
    match (rc.prog, rc.vers) {
        (PROG_NFS, 2 | 3) => {
            let c = if rc.vers == 3 {
                parse_nfs3_call(rc.proc_, args)
            } else {
                parse_nfs2_call(rc.proc_, args)
            };
            match c {
                Ok(c) => {
                    nfs_call(tx, rc, c, names, rc.vers);
                    Ok(())
                }
                Err(e) => {
                    // Cut further on: the leading handle may still be there.
                    let mut x = XdrCursor::new(args);
                    let fh = match rc.vers {
                        3 => x.opaque(v3::NFS3_FHSIZE),
                        _ => x.opaque_fixed(v2::NFS2_FHSIZE),
                    };
                    if let (Ok(fh), true) = (fh, rc.proc_ != 0) {
                        // The directory's name is not the name of a
                        // directory operation's target.
                        if !is_dirop(rc.vers, rc.proc_) {
                            tx.file_name = names.get(fh).cloned();
                        }
                        tx.file_handle = Some(IdBytes::from_slice(fh));
                    }
                    Err(e)
                }
            }
        }
        (PROG_NFS, 4) if rc.proc_ == 1 => nfs4::call(tx, rc, args, names, texts),
        (PROG_MOUNT, _) if matches!(rc.proc_, 1 | 3) => {
            let path = parse_mnt_call(args)?;
            tx.file_name = Some(path.as_str().into());
            if rc.proc_ == 1 {
                rc.want = Want::Mount(path);
            }
            Ok(())
        }
        (PROG_NFSACL, _) if rc.proc_ != 0 => {
            let mut c = XdrCursor::new(args);
            let fh = if rc.vers == 2 {
                c.opaque_fixed(v2::NFS2_FHSIZE)?
            } else {
                c.opaque(v3::NFS3_FHSIZE)?
            };
            tx.file_name = names.get(fh).cloned();
            tx.file_handle = Some(IdBytes::from_slice(fh));
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Procedures whose leading handle is the directory of a named entry.
fn is_dirop(vers: u32, proc_: u32) -> bool {
    match vers {
        3 => matches!(proc_, 3 | 8..=14),
        _ => matches!(proc_, 4 | 9..=11 | 13..=15),
    }
}

fn nfs_call(tx: &mut Transaction, rc: &mut ReplyCtx, c: NfsCall, names: &NameMap, vers: u32) {
    tx.offset = c.offset;
    tx.count = c.count.or(c.data_len).map(u64::from);
    tx.stable = c.stable;
    // (Moved, not copied: one allocation less per request.)
    tx.file_handle = c.fh.map(IdBytes::from_vec);
    let known = tx
        .file_handle
        .as_deref()
        .and_then(|fh| names.get(fh))
        .cloned();
    let (lookup, create, mkdir, symlink, mknod, remove, rmdir, rename, readdirplus) = if vers == 3 {
        (
            v3::NFSPROC3_LOOKUP,
            v3::NFSPROC3_CREATE,
            v3::NFSPROC3_MKDIR,
            v3::NFSPROC3_SYMLINK,
            v3::NFSPROC3_MKNOD,
            v3::NFSPROC3_REMOVE,
            v3::NFSPROC3_RMDIR,
            v3::NFSPROC3_RENAME,
            v3::NFSPROC3_READDIRPLUS,
        )
    } else {
        (
            v2::NFSPROC_LOOKUP,
            v2::NFSPROC_CREATE,
            v2::NFSPROC_MKDIR,
            v2::NFSPROC_SYMLINK,
            u32::MAX,
            v2::NFSPROC_REMOVE,
            v2::NFSPROC_RMDIR,
            v2::NFSPROC_RENAME,
            u32::MAX,
        )
    };
    let p = c.proc_;
    let target = c.name.as_deref().and_then(|n| join(known.as_deref(), n));
    if p == lookup || p == create || p == mkdir || p == symlink || p == mknod {
        tx.file_name = target.as_deref().map(FileName::from);
        if let Some(t) = target {
            rc.want = Want::Named(t);
        }
    } else if p == remove || p == rmdir || p == rename {
        tx.file_name = target.map(FileName::from);
    } else if p == readdirplus {
        rc.want = Want::Listing(known.as_deref().map(str::to_string));
        tx.file_name = known;
    } else {
        tx.file_name = known;
    }
}

fn first_word(res: &[u8]) -> Option<u32> {
    XdrCursor::new(res).u32().ok()
}

/// Decode the results of an accepted, successful reply.
pub fn reply_results(
    tx: &mut Transaction,
    rc: &ReplyCtx,
    res: &[u8],
    names: &mut NameMap,
    texts: &mut CompoundTexts,
) -> Res {
    match (rc.prog, rc.vers) {
        (PROG_NFS, 2 | 3) => {
            let r = if rc.vers == 3 {
                parse_nfs3_reply(rc.proc_, res)
            } else {
                parse_nfs2_reply(rc.proc_, res)
            };
            let status_of = |s: u32| {
                if rc.vers == 3 {
                    Name::Borrowed(nfs3_status_name(s))
                } else {
                    Name::Owned(nfs2_status_name(s))
                }
            };
            match r {
                Ok(r) => {
                    if rc.proc_ != 0 {
                        tx.status = Some(r.status);
                        tx.status_name = Some(status_of(r.status));
                    }
                    nfs_reply(tx, rc, &r, names);
                    // A listing cut short lacks names; a READ whose data
                    // is cut has all it needs.
                    let listing = matches!(
                        (rc.vers, rc.proc_),
                        (3, v3::NFSPROC3_READDIR | v3::NFSPROC3_READDIRPLUS)
                            | (2, v2::NFSPROC_READDIR)
                    );
                    if listing && !r.complete {
                        return Err(ParseError::Incomplete);
                    }
                    Ok(())
                }
                Err(e) => {
                    // Keep at least the status when the rest was cut.
                    if let (Some(s), true) = (first_word(res), rc.proc_ != 0) {
                        tx.status = Some(s);
                        tx.status_name = Some(status_of(s));
                    }
                    Err(e)
                }
            }
        }
        (PROG_NFS, 4) if rc.proc_ == 1 => nfs4::reply(tx, rc, res, names, texts),
        (PROG_MOUNT, _) if rc.proc_ == 1 => {
            let r = parse_mnt_reply(rc.vers, res);
            let s = match &r {
                Ok(r) => Some(r.status),
                Err(_) => first_word(res),
            };
            if let Some(s) = s {
                tx.status = Some(s);
                tx.status_name = Some(mount_status_name(s).into());
            }
            let r = r?;
            if let (Some(fh), Want::Mount(path)) = (&r.fh, &rc.want) {
                names.insert(fh, path.clone());
                tx.file_handle = Some(IdBytes::from_slice(fh));
            }
            Ok(())
        }
        (PROG_NFSACL, _) if rc.proc_ != 0 => {
            let s = first_word(res).ok_or(ParseError::Incomplete)?;
            tx.status = Some(s);
            tx.status_name = Some(nfs3_status_name(s).into());
            Ok(())
        }
        (PROG_NLM, _) if (1..=5).contains(&rc.proc_) => {
            let mut c = XdrCursor::new(res);
            c.skip_opaque(1024)?; // cookie
            let s = c.u32()?;
            tx.status = Some(s);
            tx.status_name = Some(nlm_status_name(s).into());
            Ok(())
        }
        _ => Ok(()),
    }
}

fn nfs_reply(tx: &mut Transaction, rc: &ReplyCtx, r: &NfsReply, names: &mut NameMap) {
    tx.reply_count = r.count.map(u64::from);
    tx.eof = r.eof;
    tx.committed = r.committed;
    if !r.is_ok() {
        return;
    }
    match &rc.want {
        Want::Named(path) => {
            if let Some(fh) = &r.fh {
                names.insert(fh, path.clone());
            }
        }
        Want::Listing(dir) => {
            for e in &r.entries {
                if let Some(fh) = &e.fh {
                    if let Some(p) = join(dir.as_deref(), &e.name) {
                        if e.name != "." && e.name != ".." {
                            names.insert(fh, p);
                        }
                    }
                }
            }
        }
        _ => {}
    }
}

/// Whether decoding a call's arguments reads nothing past `args`, a prefix
/// of them: they end in bulk data (an NFSv3 WRITE's payload, or the payload
/// of a WRITE that is the last operation of a COMPOUND) whose first bytes
/// are already in the prefix. Such a record's remaining bytes need not be
/// kept (see [`super::framing::Sink::prefix_suffices`]): the decoders take
/// a payload's length from its length field and never read its bytes.
pub fn call_prefix_suffices(prog: u32, vers: u32, proc_: u32, args: &[u8]) -> bool {
    match (prog, vers, proc_) {
        (PROG_NFS, 3, v3::NFSPROC3_WRITE) => {
            parse_nfs3_call(proc_, args).is_ok_and(|c| c.data_len.is_some() && !c.complete)
        }
        (PROG_NFS, 4, 1) => {
            nastriage_proto::nfs4_records::parse_compound4_args(args).is_ok_and(|a| {
                use nastriage_proto::nfs4_records::Nfs4OpArgs;
                let whole = a.stopped.is_none();
                ends_in(whole, &a.ops, a.num_ops, |o| {
                    matches!(
                        o.args,
                        Nfs4OpArgs::Write {
                            data_complete: false,
                            ..
                        }
                    )
                })
            })
        }
        _ => false,
    }
}

/// As [`call_prefix_suffices`], for a successful reply's results: an
/// NFSv3 READ's data, or the data of a READ that is the last operation of
/// a COMPOUND's results.
pub fn reply_prefix_suffices(rc: &ReplyCtx, res: &[u8]) -> bool {
    match (rc.prog, rc.vers, rc.proc_) {
        (PROG_NFS, 3, v3::NFSPROC3_READ) => {
            parse_nfs3_reply(rc.proc_, res).is_ok_and(|r| r.data_len.is_some() && !r.complete)
        }
        (PROG_NFS, 4, 1) => {
            nastriage_proto::nfs4_records::parse_compound4_res(res).is_ok_and(|r| {
                use nastriage_proto::nfs4_records::Nfs4OpRes;
                let whole = r.stopped.is_none();
                ends_in(whole, &r.ops, r.num_ops, |o| {
                    matches!(
                        o.res,
                        Nfs4OpRes::Read {
                            data_complete: false,
                            ..
                        }
                    )
                })
            })
        }
        _ => false,
    }
}

/// A COMPOUND (arguments or results) parsed to its end, every one of its
/// `num_ops` operations there, whose last operation is `bulk`.
fn ends_in<T>(whole: bool, ops: &[T], num_ops: u32, bulk: impl Fn(&T) -> bool) -> bool {
    whole && ops.len() == num_ops as usize && ops.last().is_some_and(bulk)
}
