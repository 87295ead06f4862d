//! NFSv4.x COMPOUNDs: every operation walked, the COMPOUND reported as its
//! principal operation (the proto crate's rule: first operation that is not
//! SEQUENCE/PUTFH/PUTROOTFH/PUTPUBFH/GETATTR/GETFH/SAVEFH/RESTOREFH, else
//! the first GETATTR, else the first operation), with the SEQUENCE slot and
//! session, per-operation status and paths followed through
//! PUTROOTFH/PUTFH/LOOKUP/LOOKUPP/OPEN/CREATE/SAVEFH/RESTOREFH so that
//! GETFH results can be named.

use nastriage_proto::nfs4_records::{
    nfs4_op_name, nfs4_status_name, parse_compound4_args, parse_compound4_res, principal_op_index,
    Nfs4OpArgs, Nfs4OpRes, OP_LOOKUPP, OP_PUTPUBFH, OP_PUTROOTFH, OP_RESTOREFH, OP_SAVEFH,
};
use nastriage_proto::ParseError;

use super::decode::{OpNumbers, ReplyCtx, Want};
use super::joined::CompoundTexts;
use super::names::{join, parent, NameMap};
use crate::transactions::{FileName, IdBytes, Transaction};

type Res = Result<(), ParseError>;

/// The current handle's path, as a COMPOUND's operations change it.
#[derive(Clone)]
enum Path<'a> {
    /// The name map's own, for a handle it knows: shared as it is (most
    /// COMPOUNDs only PUTFH a known handle, and every request copied it).
    Known(&'a FileName),
    Made(String),
    Root,
}

impl Path<'_> {
    /// As a transaction's file name.
    fn file_name(&self) -> FileName {
        match self {
            Path::Known(n) => FileName::clone(n),
            Path::Made(s) => FileName::from(s.as_str()),
            Path::Root => FileName::from("/"),
        }
    }
}

impl std::ops::Deref for Path<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        match self {
            Path::Known(n) => n,
            Path::Made(s) => s,
            Path::Root => "/",
        }
    }
}

fn owned(path: &Option<Path<'_>>) -> Option<String> {
    path.as_deref().map(str::to_string)
}

fn set_principal(tx: &mut Transaction, opnums: &[u32]) -> Option<usize> {
    let principal = principal_op_index(opnums);
    match principal.and_then(|i| opnums.get(i)) {
        Some(&op) => {
            tx.op = nfs4_op_name(op).into();
            tx.op_code = op;
        }
        None => {
            tx.op = "COMPOUND".into();
            tx.op_code = 1;
        }
    }
    principal
}

/// COMPOUND4args into `tx`.
pub fn call(
    tx: &mut Transaction,
    rc: &mut ReplyCtx,
    args: &[u8],
    names: &NameMap,
    texts: &mut CompoundTexts,
) -> Res {
    let a = parse_compound4_args(args)?;
    tx.minor_version = a.minorversion;
    // Operations decoded, plus the one decoding stopped at if its number
    // was read: the principal op is chosen among what the call names.
    let mut opnums: OpNumbers = a.ops.iter().map(|o| o.op).collect();
    if let Some(op) = a.stopped.and_then(|s| s.op) {
        opnums.push(op);
    }
    tx.compound_ops = Some(texts.ops.text(&opnums, nfs4_op_name));
    let principal = set_principal(tx, &opnums);

    // Follow the current handle's path through the operations.
    let mut cur: Option<Path<'_>> = None;
    let mut cur_fh: Option<&[u8]> = None;
    let mut saved: (Option<Path<'_>>, Option<&[u8]>) = (None, None);
    // The paths are kept only for a GETFH's result to be named.
    let has_getfh = a
        .ops
        .iter()
        .any(|o| o.op == nastriage_proto::nfs4_records::OP_GETFH);
    let mut paths = Vec::with_capacity(if has_getfh { a.ops.len() } else { 0 });
    for (i, o) in a.ops.iter().enumerate() {
        // The path before the principal operation (its file's, for most).
        let before = if Some(i) == principal {
            cur.clone()
        } else {
            None
        };
        match &o.args {
            Nfs4OpArgs::PutFh { fh } => {
                cur_fh = Some(fh);
                cur = names.get(fh).map(Path::Known);
            }
            Nfs4OpArgs::Lookup { name } => {
                cur = join(cur.as_deref(), name).map(Path::Made);
                cur_fh = None;
            }
            Nfs4OpArgs::Open { name, .. } => {
                if let Some(n) = name {
                    cur = join(cur.as_deref(), n).map(Path::Made);
                    cur_fh = None;
                }
            }
            Nfs4OpArgs::Create { name, .. } => {
                cur = join(cur.as_deref(), name).map(Path::Made);
                cur_fh = None;
            }
            _ => match o.op {
                OP_PUTROOTFH | OP_PUTPUBFH => {
                    cur = Some(Path::Root);
                    cur_fh = None;
                }
                OP_LOOKUPP => {
                    cur = cur.as_deref().and_then(parent).map(Path::Made);
                    cur_fh = None;
                }
                OP_SAVEFH => saved = (cur.clone(), cur_fh),
                OP_RESTOREFH => (cur, cur_fh) = saved.clone(),
                _ => {}
            },
        }
        if Some(i) == principal {
            if tx.file_handle.is_none() {
                tx.file_handle = cur_fh.map(IdBytes::from_slice);
            }
            // (Made from the path in place: a `String` first would be a
            // second allocation per request.)
            tx.file_name = match &o.args {
                Nfs4OpArgs::Lookup { .. } | Nfs4OpArgs::Create { .. } => {
                    cur.as_ref().map(Path::file_name)
                }
                Nfs4OpArgs::Open { name: Some(_), .. } => cur.as_ref().map(Path::file_name),
                Nfs4OpArgs::Remove { name } | Nfs4OpArgs::Link { name } => {
                    join(before.as_deref(), name).map(FileName::from)
                }
                Nfs4OpArgs::Rename { old, .. } => join(before.as_deref(), old).map(FileName::from),
                _ => before.as_ref().map(Path::file_name),
            };
            match &o.args {
                Nfs4OpArgs::Read { offset, count, .. } => {
                    tx.offset = Some(*offset);
                    tx.count = Some(u64::from(*count));
                }
                Nfs4OpArgs::Write {
                    offset,
                    stable,
                    data_len,
                    ..
                } => {
                    tx.offset = Some(*offset);
                    tx.count = Some(u64::from(*data_len));
                    tx.stable = Some(*stable);
                }
                Nfs4OpArgs::Commit { offset, count } => {
                    tx.offset = Some(*offset);
                    tx.count = Some(u64::from(*count));
                }
                _ => {}
            }
        }
        if let Nfs4OpArgs::Sequence {
            session_id,
            slot_id,
            highest_slot_id,
            ..
        } = &o.args
        {
            tx.session = Some(IdBytes::from_slice(session_id));
            tx.slot = Some(*slot_id);
            tx.highest_slot = Some(*highest_slot_id);
        }
        if has_getfh {
            paths.push(owned(&cur));
        }
    }
    let cut = a.stopped.is_some_and(|s| s.error == ParseError::Incomplete);
    rc.want = Want::Compound {
        paths,
        ops: opnums,
        principal,
        cut,
    };
    match a.stopped {
        Some(s) => Err(s.error),
        None => Ok(()),
    }
}

/// COMPOUND4res into `tx`.
pub fn reply(
    tx: &mut Transaction,
    rc: &ReplyCtx,
    res: &[u8],
    names: &mut NameMap,
    texts: &mut CompoundTexts,
) -> Res {
    let r = match parse_compound4_res(res) {
        Ok(r) => r,
        Err(e) => {
            if let Ok(s) = nastriage_proto::XdrCursor::new(res).u32() {
                tx.status = Some(s);
                tx.status_name = Some(nfs4_status_name(s).into());
            }
            return Err(e);
        }
    };
    tx.status = Some(r.status);
    tx.status_name = Some(nfs4_status_name(r.status).into());
    let statuses: smallvec::SmallVec<[u32; 8]> = r.ops.iter().map(|o| o.status).collect();
    tx.compound_status = Some(texts.statuses.text(&statuses, nfs4_status_name));
    let (paths, principal) = match &rc.want {
        Want::Compound {
            paths,
            ops,
            principal,
            cut,
        } => {
            // The call was cut before all its operations: the reply names
            // them too (up to the first that failed).
            let res_ops = cut.then(|| {
                let mut res_ops: OpNumbers = r.ops.iter().map(|o| o.op).collect();
                if let Some(op) = r.stopped.and_then(|s| s.op) {
                    res_ops.push(op);
                }
                res_ops
            });
            match res_ops {
                Some(res_ops) if res_ops.len() > ops.len() && res_ops.starts_with(ops) => {
                    tx.compound_ops = Some(texts.ops.text(&res_ops, nfs4_op_name));
                    (paths.as_slice(), set_principal(tx, &res_ops))
                }
                _ => (paths.as_slice(), *principal),
            }
        }
        _ => (&[][..], None),
    };
    for (i, o) in r.ops.iter().enumerate() {
        match &o.res {
            Nfs4OpRes::GetFh { fh } => {
                if let Some(Some(p)) = paths.get(i) {
                    names.insert(fh, p.clone());
                }
                if tx.file_handle.is_none() {
                    tx.file_handle = Some(IdBytes::from_slice(fh));
                }
            }
            Nfs4OpRes::Sequence {
                session_id,
                slot_id,
                highest_slot_id,
                target_highest_slot_id,
                ..
            } => {
                tx.target_highest_slot = Some(*target_highest_slot_id);
                if tx.session.is_none() {
                    tx.session = Some(IdBytes::from_slice(session_id));
                    tx.slot = Some(*slot_id);
                    tx.highest_slot = Some(*highest_slot_id);
                }
            }
            Nfs4OpRes::Read { eof, data_len, .. } if Some(i) == principal => {
                tx.reply_count = Some(u64::from(*data_len));
                tx.eof = Some(*eof);
            }
            Nfs4OpRes::Write { count, committed } if Some(i) == principal => {
                tx.reply_count = Some(u64::from(*count));
                tx.committed = Some(*committed);
            }
            _ => {}
        }
    }
    if tx.file_name.is_none() {
        tx.file_name = tx
            .file_handle
            .as_deref()
            .and_then(|fh| names.get(fh))
            .cloned();
    }
    match r.stopped {
        Some(s) => Err(s.error),
        None => Ok(()),
    }
}
