//! Request/reply transactions of the storage protocols (NFS and the other
//! ONC RPC programs, SMB2/3), one record per request, built by the stream
//! parsers in `app/` and turned into the `transactions` table.

use serde::{Deserialize, Serialize};

/// Where a PDU lies in the capture: the frames (and their times) holding its
/// first and its last byte. Wireshark dissects a PDU in the frame of its last
/// byte; the first byte tells when the sender started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PduSpan {
    pub first_frame: u64,
    pub first_ts: i64,
    pub last_frame: u64,
    pub last_ts: i64,
    /// Length of the PDU on the wire (record / message length), bytes.
    pub bytes: u64,
    /// Every byte the parser needed (headers) was captured; false when the
    /// PDU was cut by the snaplen or crossed a gap in the capture.
    pub complete: bool,
}

/// A name from a protocol's tables, or made for a value not in them.
pub type Name = std::borrow::Cow<'static, str>;

/// Raw identifier bytes (a file handle, an SMB2 FileId, a session id): up
/// to 32 in place, so that an SMB2 request's FileId and session id and the
/// NFS handles of Linux servers (28 bytes) allocate nothing; longer ones go
/// to the heap.
pub type IdBytes = smallvec::SmallVec<[u8; 32]>;

/// A file or share name a parser maps a handle or id to: shared with its
/// map, so that naming a request's file copies nothing.
pub type FileName = std::sync::Arc<str>;

/// One request and, when seen, its reply. Serialisable so that the log can
/// keep completed ones compressed (`tx_store.rs`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Transaction {
    /// "nfs", "mount", "portmap", "nfsacl", "nlm", "rpc" (other programs), "smb2".
    /// (Static names are written beside the record by the store.)
    #[serde(skip)]
    pub protocol: &'static str,
    /// NFS version (2, 3, 4), RPC program version, or SMB dialect major (2, 3).
    pub version: u32,
    /// Minor version: NFSv4 minor version; SMB dialect revision (e.g. 0x0311).
    pub minor_version: u32,
    /// Operation name as tshark shows it (e.g. "READ", "GETATTR", "Create");
    /// borrowed from the protocols' tables, as names of known operations
    /// are (one allocation less per request).
    pub op: Name,
    /// NFS procedure / NFSv4 operation number / SMB2 command code.
    pub op_code: u32,
    /// RPC program number (0 for SMB).
    pub program: u32,
    /// tcp.stream (or the UDP flow index for RPC over UDP).
    pub stream: u32,
    /// Transport: "tcp" or "udp".
    #[serde(skip)]
    pub transport: &'static str,
    /// Direction (0 or 1, in the conversation's a→b terms) of the request.
    pub request_dir: u8,
    /// RPC XID or SMB2 MessageId.
    pub id: u64,
    pub request: PduSpan,
    pub reply: Option<PduSpan>,
    /// SMB2: time of an interim (STATUS_PENDING) response.
    pub interim_ts: Option<i64>,
    /// The same request (same XID / MessageId) seen again before its reply.
    pub retransmissions: u32,
    pub offset: Option<u64>,
    /// Bytes requested (READ count, WRITE data length, ...).
    pub count: Option<u64>,
    /// Bytes the reply says it transferred (READ data length, WRITE count).
    pub reply_count: Option<u64>,
    /// NFS status / SMB NTSTATUS (None until a reply is seen, or if the RPC
    /// layer itself failed: see `rpc_status`).
    pub status: Option<u32>,
    pub status_name: Option<Name>,
    /// RPC accept/reject status when not SUCCESS (e.g. "PROC_UNAVAIL").
    pub rpc_status: Option<String>,
    /// File handle (NFS) or FileId (SMB2), as raw bytes.
    pub file_handle: Option<IdBytes>,
    /// File name, from the request itself or mapped from the handle.
    pub file_name: Option<FileName>,
    /// SMB2 share (\\server\share) from TREE_CONNECT, by TreeId.
    pub share: Option<FileName>,
    /// NFS WRITE stable_how / committed; SMB2: unused.
    pub stable: Option<u32>,
    pub committed: Option<u32>,
    pub eof: Option<bool>,
    /// SMB2 credits: charge and request on the request, grant on the reply.
    pub credit_charge: Option<u16>,
    pub credit_request: Option<u16>,
    pub credit_grant: Option<u16>,
    /// NFSv4.1 SEQUENCE: slot id, highest slot id; target highest slot id
    /// from the reply.
    pub slot: Option<u32>,
    pub highest_slot: Option<u32>,
    pub target_highest_slot: Option<u32>,
    /// NFSv4.1 session id (16 bytes), SMB2 SessionId (8 bytes).
    pub session: Option<IdBytes>,
    /// NFSv4: all operations of the COMPOUND, "SEQUENCE,PUTFH,READ" (shared:
    /// a few lists make most of a capture's).
    pub compound_ops: Option<std::sync::Arc<str>>,
    /// Authentication: RPC auth flavour name, SMB "signed"/"encrypted".
    #[serde(skip)]
    pub auth: Option<&'static str>,
    /// Also set for PDUs the parser could not fully decode (why).
    pub note: Option<String>,
    /// NFSv4: status of every operation in the reply, in order, joined by
    /// "," (the reply stops at the first operation that failed); shared as
    /// `compound_ops`.
    pub compound_status: Option<std::sync::Arc<str>>,
    /// Client and server (address, port) for transports without a
    /// conversation-table entry (RPC over UDP); TCP transactions are
    /// oriented through the conversation of `stream` instead.
    pub client_addr: Option<(std::net::IpAddr, u16)>,
    pub server_addr: Option<(std::net::IpAddr, u16)>,
}

impl Transaction {
    /// Service response time as Wireshark computes it: the frame in which
    /// the reply is dissected minus the frame in which the request is
    /// (each PDU is dissected in the frame holding its last byte).
    ///
    /// Checked against tshark 4.0 (`-z rpc,srt`, `rpc.time`) on every shared
    /// NFS capture: last reply byte − last request byte reproduces tshark's
    /// per-reply times to the nanosecond, first − first does not (on the
    /// NFSv4 gz capture, where WRITE calls span several TSO frames, it gives
    /// an average SRT of 11.1 ms against tshark's 5.6 ms). The one exception
    /// is a PDU holding a frame cut by the capture's snaplen: tshark cannot
    /// reassemble it and dissects it in its first frame; we keep the last
    /// byte's frame, so the SRT does not depend on the snaplen
    /// (docs/transactions.md). The same holds for SMB2 against tshark's
    /// `smb2.time` of final responses on every shared SMB capture
    /// (docs/transactions-smb2.md).
    pub fn srt_ns(&self) -> Option<i64> {
        self.reply.map(|r| r.last_ts - self.request.last_ts)
    }

    /// Time the server held the request: last request byte seen to first
    /// reply byte seen.
    pub fn server_time_ns(&self) -> Option<i64> {
        self.reply.map(|r| r.first_ts - self.request.last_ts)
    }
}

/// An unmatched reply (its request was not captured).
#[derive(Debug, Clone, Default)]
pub struct OrphanReply {
    pub protocol: &'static str,
    pub stream: u32,
    pub id: u64,
    pub reply: PduSpan,
    pub status: Option<u32>,
}

/// Where the parsers put what they find.
#[derive(Debug, Default)]
pub struct TransactionLog {
    /// Every request, in capture order of the request (kept compressed).
    /// Add with [`TransactionLog::push`].
    pub transactions: crate::tx_store::TxStore,
    /// What the derived tables need, gathered as transactions are pushed.
    pub derived: crate::derived::Derived,
    pub orphan_replies: Vec<OrphanReply>,
    /// Encrypted SMB3 messages, compressed messages, SMB1 messages, by stream.
    pub encrypted_messages: u64,
    pub compressed_messages: u64,
    pub smb1_messages: u64,
    /// Times a parser lost its place and had to resynchronise.
    pub resyncs: u64,
    /// SMB2: requests emitted unanswered because too many were outstanding
    /// on their connection (`app::smb2::MAX_PENDING`).
    pub smb2_evicted_requests: u64,
    /// SMB2: FileId → name and TreeId → share entries dropped to keep the
    /// per-connection maps bounded.
    pub smb2_evicted_names: u64,
    pub warnings: Vec<String>,
}

impl TransactionLog {
    /// Copies what is kept into the calling thread's allocations (see
    /// [`crate::heap::relocate_after_pass`]).
    pub(crate) fn relocate(&mut self) {
        self.transactions.relocate();
        self.derived.relocate();
        crate::heap::renew(&mut self.orphan_replies);
        crate::heap::renew(&mut self.warnings);
    }

    /// Log one transaction (parsers emit them as their replies arrive).
    pub fn push(&mut self, t: Transaction) {
        self.derived.add(&t, self.transactions.len() as u64);
        self.transactions.push(t);
    }

    /// [`TransactionLog::push`] of a transaction where it lies (a parser's
    /// boxed outstanding request): moved out only when the log keeps
    /// transactions, so a run that keeps none copies none of its 570 bytes.
    pub fn push_from(&mut self, t: &mut Transaction) {
        self.derived.add(t, self.transactions.len() as u64);
        self.transactions.push_from(t);
    }
}

/// A finished log with its transactions read back as a vector, for tests
/// that index them (every other field through `Deref`).
#[cfg(test)]
pub(crate) struct LogView {
    pub transactions: Vec<Transaction>,
    pub log: TransactionLog,
}

#[cfg(test)]
impl LogView {
    pub(crate) fn new(log: TransactionLog) -> Self {
        LogView {
            transactions: log.transactions.to_vec(),
            log,
        }
    }
}

#[cfg(test)]
impl std::ops::Deref for LogView {
    type Target = TransactionLog;
    fn deref(&self) -> &TransactionLog {
        &self.log
    }
}
