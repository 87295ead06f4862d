//! Pure wire-format parsers for the protocols nastriage diagnoses: ONC RPC
//! (RFC 5531) carrying NFS v2/v3/v4.0/4.1/4.2, MOUNT and NFS_ACL, and
//! SMB2/3 (MS-SMB2).
//!
//! # What lives here, and what does not
//!
//! Each parser takes the bytes of one already-delimited message — an RPC
//! record after TCP record marking, a UDP payload, an SMB2 message inside a
//! NetBIOS/direct-TCP frame — and returns plain structs. Fields that most
//! messages carry (an RPC credential's machine name and gids, an NFSv4
//! COMPOUND's tag and file handles) borrow from the input instead of being
//! copied: every request of a capture goes through these parsers, some twice
//! (the engine first asks whether a prefix suffices). There is no
//! I/O, no TCP reassembly and no state carried from one message to the
//! next. Matching replies to calls (XID, MessageId), service times, maps
//! from file handles/FileIds to names, credit and slot accounting all live
//! in the engine, which feeds reassembled payloads to these functions. The
//! split keeps the parsers small, deterministic and fuzzable.
//!
//! # Errors and truncated captures
//!
//! Every parser returns [`Result`]; [`ParseError::Incomplete`] means the
//! input stopped early (a segment still to come, or a snaplen-cut frame)
//! while [`ParseError::Malformed`] means the bytes are not a valid message.
//! Lengths are taken from length fields, never from how much was captured,
//! and bulk payloads (READ/WRITE data) are skipped rather than copied, so
//! the interesting header fields decode from the first bytes of a message;
//! `complete` flags tell whether everything the message declares was
//! present. No input can make a parser panic, loop without bound or
//! allocate more than the input could justify.
//!
//! # Modules
//!
//! - [`xdr`]: bounded big-endian XDR cursor.
//! - [`rpc_records`]: record marking, CALL/REPLY headers, credentials,
//!   content-based RPC detection.
//! - [`nfs3_records`], [`nfs2_records`], [`mount_records`]: per-procedure
//!   fields of NFSv3/v2 calls and replies, MOUNT and NFS_ACL.
//! - [`nfs4_records`]: NFSv4.x COMPOUND walking and the principal-operation
//!   rule.
//! - [`smb2_records`]: NetBIOS framing, SMB2 header, compound chains,
//!   transform headers and message bodies.

mod error;
pub mod mount_records;
pub mod nfs2_records;
pub mod nfs3_records;
pub mod nfs4_records;
pub mod rpc_records;
pub mod smb2_records;
#[cfg(test)]
mod testutil;
pub mod xdr;

pub use error::{ParseError, Result};
pub use nfs3_records::{parse_nfs3_call, parse_nfs3_reply, NfsCall, NfsReply};
pub use nfs4_records::{
    parse_compound4_args, parse_compound4_res, principal_op_index, Compound4Args, Compound4Res,
};
pub use rpc_records::{
    looks_like_rpc_call, parse_record_mark, parse_rpc_message, CallHeader, RecordMark, ReplyHeader,
    RpcMessage,
};
pub use smb2_records::{
    compound_messages, looks_like_smb2_header, parse_smb2_header, parse_smb2_message, Smb2Body,
    Smb2Header, Smb2Message,
};
pub use xdr::XdrCursor;

/// Procedure name for a well-known RPC program/version, e.g. `(100003, 3,
/// 6)` → `"READ"`; `None` for programs this crate does not know.
pub fn rpc_proc_name(prog: u32, vers: u32, proc_: u32) -> Option<&'static str> {
    use rpc_records::{PROG_MOUNT, PROG_NFS, PROG_NFSACL};
    Some(match (prog, vers) {
        (PROG_NFS, 2) => nfs2_records::nfs2_proc_name(proc_),
        (PROG_NFS, 3) => nfs3_records::nfs3_proc_name(proc_),
        (PROG_NFS, 4) => nfs4_records::nfs4_proc_name(proc_),
        (PROG_MOUNT, _) => mount_records::mount_proc_name(proc_),
        (PROG_NFSACL, _) => mount_records::nfsacl_proc_name(vers, proc_),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn proc_names() {
        assert_eq!(super::rpc_proc_name(100003, 3, 6), Some("READ"));
        assert_eq!(super::rpc_proc_name(100003, 2, 17), Some("STATFS"));
        assert_eq!(super::rpc_proc_name(100003, 4, 1), Some("COMPOUND"));
        assert_eq!(super::rpc_proc_name(100005, 3, 1), Some("MNT"));
        assert_eq!(super::rpc_proc_name(100227, 3, 1), Some("GETACL"));
        assert_eq!(super::rpc_proc_name(4, 1, 1), None);
    }
}
