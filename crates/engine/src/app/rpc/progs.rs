//! Names of RPC programs and procedures as the transactions table shows
//! them, for the programs the proto crate does not name itself.

use nastriage_proto::rpc_records::{PROG_MOUNT, PROG_NFS, PROG_NFSACL, PROG_NLM, PROG_PORTMAP};

use crate::transactions::Name;

/// `protocol` column value for an RPC program.
pub fn protocol(prog: u32) -> &'static str {
    match prog {
        PROG_NFS => "nfs",
        PROG_MOUNT => "mount",
        PROG_PORTMAP => "portmap",
        PROG_NFSACL => "nfsacl",
        PROG_NLM => "nlm",
        _ => "rpc",
    }
}

const PMAP2: [&str; 6] = ["NULL", "SET", "UNSET", "GETPORT", "DUMP", "CALLIT"];
const RPCB: [&str; 16] = [
    "NULL",
    "SET",
    "UNSET",
    "GETADDR",
    "DUMP",
    "CALLIT",
    "GETTIME",
    "UADDR2TADDR",
    "TADDR2UADDR",
    "GETVERSADDR",
    "INDIRECT",
    "GETADDRLIST",
    "GETSTAT",
    "UNKNOWN",
    "UNKNOWN",
    "UNKNOWN",
];
const NLM: [&str; 24] = [
    "NULL",
    "TEST",
    "LOCK",
    "CANCEL",
    "UNLOCK",
    "GRANTED",
    "TEST_MSG",
    "LOCK_MSG",
    "CANCEL_MSG",
    "UNLOCK_MSG",
    "GRANTED_MSG",
    "TEST_RES",
    "LOCK_RES",
    "CANCEL_RES",
    "UNLOCK_RES",
    "GRANTED_RES",
    "UNKNOWN",
    "UNKNOWN",
    "UNKNOWN",
    "UNKNOWN",
    "SHARE",
    "UNSHARE",
    "NM_LOCK",
    "FREE_ALL",
];

/// Procedure name of a call (NFSv4 COMPOUNDs are named by their principal
/// operation elsewhere).
pub fn proc_name(prog: u32, vers: u32, proc_: u32) -> Name {
    if let Some(n) = nastriage_proto::rpc_proc_name(prog, vers, proc_) {
        return n.into();
    }
    let table: &[&str] = match (prog, vers) {
        (PROG_PORTMAP, 2) => &PMAP2,
        (PROG_PORTMAP, _) => &RPCB,
        (PROG_NLM, _) => &NLM,
        _ => &[],
    };
    match table.get(proc_ as usize) {
        Some(n) => Name::Borrowed(n),
        None if proc_ == 0 => "NULL".into(),
        None => format!("PROC_{proc_}").into(),
    }
}

/// NLM reply status (nlm4_stats).
pub fn nlm_status_name(s: u32) -> &'static str {
    match s {
        0 => "NLM4_GRANTED",
        1 => "NLM4_DENIED",
        2 => "NLM4_DENIED_NOLOCKS",
        3 => "NLM4_BLOCKED",
        4 => "NLM4_DENIED_GRACE_PERIOD",
        5 => "NLM4_DEADLCK",
        6 => "NLM4_ROFS",
        7 => "NLM4_STALE_FH",
        8 => "NLM4_FBIG",
        9 => "NLM4_FAILED",
        _ => "NLM4_UNKNOWN",
    }
}

/// NFSv2 status names (RFC 1094 uses NFSERR_*; values are shared with v3).
pub fn nfs2_status_name(s: u32) -> String {
    if s == 0 {
        return "NFS_OK".to_string();
    }
    let n = nastriage_proto::nfs3_records::nfs3_status_name(s);
    n.replacen("NFS3ERR_", "NFSERR_", 1)
}

/// Authentication column value.
pub fn auth_name(flavor: u32, gss_service: Option<u32>) -> &'static str {
    use nastriage_proto::rpc_records::{
        auth_flavor_name, RPCSEC_GSS, RPC_GSS_SVC_INTEGRITY, RPC_GSS_SVC_PRIVACY,
    };
    match (flavor, gss_service) {
        (RPCSEC_GSS, Some(RPC_GSS_SVC_INTEGRITY)) => "RPCSEC_GSS_INTEGRITY",
        (RPCSEC_GSS, Some(RPC_GSS_SVC_PRIVACY)) => "RPCSEC_GSS_PRIVACY",
        _ => auth_flavor_name(flavor),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(proc_name(100003, 3, 6), "READ");
        assert_eq!(proc_name(100000, 2, 3), "GETPORT");
        assert_eq!(proc_name(100000, 4, 3), "GETADDR");
        assert_eq!(proc_name(100021, 4, 2), "LOCK");
        assert_eq!(proc_name(100024, 1, 0), "NULL");
        assert_eq!(proc_name(100024, 1, 3), "PROC_3");
        assert_eq!(protocol(100227), "nfsacl");
        assert_eq!(protocol(100024), "rpc");
        assert_eq!(nfs2_status_name(2), "NFSERR_NOENT");
        assert_eq!(nfs2_status_name(0), "NFS_OK");
    }
}
