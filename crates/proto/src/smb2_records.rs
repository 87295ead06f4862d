//! SMB2/3 (MS-SMB2) framing, headers and the message bodies a transaction
//! table needs.
//!
//! Everything here is little-endian and offset-based: variable parts of a
//! body are found through offsets relative to the start of the SMB2 header,
//! so body parsers take the whole message (header included). Sizes come
//! from length fields, never from how many bytes were captured: with a
//! snaplen-cut frame the 64-byte header and the fixed part of the body still
//! decode, and `complete == false` says that a name or payload was cut.

use crate::error::{ParseError, Result};

// ---- little-endian reader ----------------------------------------------

/// Bounded little-endian reads at absolute offsets.
#[derive(Clone, Copy)]
struct Le<'a>(&'a [u8]);

impl<'a> Le<'a> {
    fn bytes(&self, off: usize, n: usize) -> Result<&'a [u8]> {
        let end = off.checked_add(n).ok_or(ParseError::Incomplete)?;
        self.0.get(off..end).ok_or(ParseError::Incomplete)
    }
    fn u8(&self, off: usize) -> Result<u8> {
        self.0.get(off).copied().ok_or(ParseError::Incomplete)
    }
    fn u16(&self, off: usize) -> Result<u16> {
        let b = self.bytes(off, 2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&self, off: usize) -> Result<u32> {
        let b = self.bytes(off, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&self, off: usize) -> Result<u64> {
        Ok(self.u32(off)? as u64 | (self.u32(off + 4)? as u64) << 32)
    }
    fn arr16(&self, off: usize) -> Result<[u8; 16]> {
        let mut a = [0u8; 16];
        a.copy_from_slice(self.bytes(off, 16)?);
        Ok(a)
    }
}

/// UTF-16LE bytes to a String (lossy). Odd trailing bytes are ignored.
pub fn utf16le_lossy(b: &[u8]) -> String {
    char::decode_utf16(b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])))
        .map(|r| r.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect()
}

// ---- NetBIOS session service ---------------------------------------------

pub const NBSS_SESSION_MESSAGE: u8 = 0x00;
pub const NBSS_SESSION_REQUEST: u8 = 0x81;
pub const NBSS_POSITIVE_RESPONSE: u8 = 0x82;
pub const NBSS_NEGATIVE_RESPONSE: u8 = 0x83;
pub const NBSS_RETARGET_RESPONSE: u8 = 0x84;
pub const NBSS_KEEP_ALIVE: u8 = 0x85;

pub fn nbss_type_name(t: u8) -> &'static str {
    match t {
        NBSS_SESSION_MESSAGE => "SESSION_MESSAGE",
        NBSS_SESSION_REQUEST => "SESSION_REQUEST",
        NBSS_POSITIVE_RESPONSE => "POSITIVE_SESSION_RESPONSE",
        NBSS_NEGATIVE_RESPONSE => "NEGATIVE_SESSION_RESPONSE",
        NBSS_RETARGET_RESPONSE => "RETARGET_SESSION_RESPONSE",
        NBSS_KEEP_ALIVE => "SESSION_KEEP_ALIVE",
        _ => "UNKNOWN",
    }
}

/// The 4-byte NetBIOS session header (RFC 1002 4.3.1), which is also the
/// direct-TCP transport header on port 445 (MS-SMB2 2.1: a zero byte and a
/// 24-bit length).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NbssHeader {
    pub msg_type: u8,
    /// The byte after the type: RFC 1002 flags (bit 0 extends the length).
    pub flags: u8,
    /// Payload length read as 24 bits (direct TCP form).
    pub length: u32,
}

impl NbssHeader {
    /// Payload length read as RFC 1002's 17 bits (E bit + 16-bit length).
    pub fn length_rfc1002(&self) -> u32 {
        ((self.flags as u32 & 1) << 16) | (self.length & 0xffff)
    }
}

pub const NBSS_HEADER_LEN: usize = 4;

pub fn parse_nbss_header(b: &[u8]) -> Result<NbssHeader> {
    let h = Le(b).bytes(0, 4)?;
    Ok(NbssHeader {
        msg_type: h[0],
        flags: h[1],
        length: u32::from_be_bytes([0, h[1], h[2], h[3]]),
    })
}

// ---- protocol detection ------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmbProtocol {
    /// 0xFF 'SMB': SMB1/CIFS.
    Smb1,
    /// 0xFE 'SMB': SMB2/3.
    Smb2,
    /// 0xFD 'SMB': SMB3 transform (encrypted) header.
    Transform,
    /// 0xFC 'SMB': SMB 3.1.1 compression transform header.
    Compressed,
}

/// Identify an SMB message from its 4-byte protocol id.
pub fn detect_protocol(b: &[u8]) -> Option<SmbProtocol> {
    match b.get(..4)? {
        [0xff, b'S', b'M', b'B'] => Some(SmbProtocol::Smb1),
        [0xfe, b'S', b'M', b'B'] => Some(SmbProtocol::Smb2),
        [0xfd, b'S', b'M', b'B'] => Some(SmbProtocol::Transform),
        [0xfc, b'S', b'M', b'B'] => Some(SmbProtocol::Compressed),
        _ => None,
    }
}

/// SMB2 TRANSFORM_HEADER (MS-SMB2 2.2.41): the rest of the message is
/// encrypted; only these fields are visible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransformHeader {
    pub signature: [u8; 16],
    pub nonce: [u8; 16],
    /// Size of the encrypted SMB2 message once decrypted.
    pub original_size: u32,
    /// Flags (3.1.1) / EncryptionAlgorithm (3.0).
    pub flags: u16,
    pub session_id: u64,
}

pub const TRANSFORM_HEADER_LEN: usize = 52;

pub fn parse_transform_header(b: &[u8]) -> Result<TransformHeader> {
    let r = Le(b);
    if detect_protocol(b) != Some(SmbProtocol::Transform) {
        return Err(if b.len() < 4 {
            ParseError::Incomplete
        } else {
            ParseError::Malformed("smb2 transform protocol id")
        });
    }
    Ok(TransformHeader {
        signature: r.arr16(4)?,
        nonce: r.arr16(20)?,
        original_size: r.u32(36)?,
        flags: r.u16(42)?,
        session_id: r.u64(44)?,
    })
}

/// SMB2 COMPRESSION_TRANSFORM_HEADER (MS-SMB2 2.2.42).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompressionHeader {
    pub original_size: u32,
    pub algorithm: u16,
    /// 0 = unchained, 1 = chained.
    pub flags: u16,
    /// Offset (unchained) or Length (chained) of the compressed data.
    pub offset_or_length: u32,
}

pub const COMPRESSION_HEADER_LEN: usize = 16;

pub fn parse_compression_header(b: &[u8]) -> Result<CompressionHeader> {
    let r = Le(b);
    if detect_protocol(b) != Some(SmbProtocol::Compressed) {
        return Err(if b.len() < 4 {
            ParseError::Incomplete
        } else {
            ParseError::Malformed("smb2 compression protocol id")
        });
    }
    Ok(CompressionHeader {
        original_size: r.u32(4)?,
        algorithm: r.u16(8)?,
        flags: r.u16(10)?,
        offset_or_length: r.u32(12)?,
    })
}

// ---- SMB2 header -------------------------------------------------------

pub const SMB2_HEADER_LEN: usize = 64;

pub const SMB2_FLAGS_SERVER_TO_REDIR: u32 = 0x0000_0001;
pub const SMB2_FLAGS_ASYNC_COMMAND: u32 = 0x0000_0002;
pub const SMB2_FLAGS_RELATED_OPERATIONS: u32 = 0x0000_0004;
pub const SMB2_FLAGS_SIGNED: u32 = 0x0000_0008;
pub const SMB2_FLAGS_PRIORITY_MASK: u32 = 0x0000_0070;
pub const SMB2_FLAGS_DFS_OPERATIONS: u32 = 0x1000_0000;
pub const SMB2_FLAGS_REPLAY_OPERATION: u32 = 0x2000_0000;
const SMB2_FLAGS_KNOWN: u32 = 0x3000_007f;

pub const SMB2_NEGOTIATE: u16 = 0x00;
pub const SMB2_SESSION_SETUP: u16 = 0x01;
pub const SMB2_LOGOFF: u16 = 0x02;
pub const SMB2_TREE_CONNECT: u16 = 0x03;
pub const SMB2_TREE_DISCONNECT: u16 = 0x04;
pub const SMB2_CREATE: u16 = 0x05;
pub const SMB2_CLOSE: u16 = 0x06;
pub const SMB2_FLUSH: u16 = 0x07;
pub const SMB2_READ: u16 = 0x08;
pub const SMB2_WRITE: u16 = 0x09;
pub const SMB2_LOCK: u16 = 0x0a;
pub const SMB2_IOCTL: u16 = 0x0b;
pub const SMB2_CANCEL: u16 = 0x0c;
pub const SMB2_ECHO: u16 = 0x0d;
pub const SMB2_QUERY_DIRECTORY: u16 = 0x0e;
pub const SMB2_CHANGE_NOTIFY: u16 = 0x0f;
pub const SMB2_QUERY_INFO: u16 = 0x10;
pub const SMB2_SET_INFO: u16 = 0x11;
pub const SMB2_OPLOCK_BREAK: u16 = 0x12;

const COMMAND_NAMES: [&str; 19] = [
    "NEGOTIATE",
    "SESSION_SETUP",
    "LOGOFF",
    "TREE_CONNECT",
    "TREE_DISCONNECT",
    "CREATE",
    "CLOSE",
    "FLUSH",
    "READ",
    "WRITE",
    "LOCK",
    "IOCTL",
    "CANCEL",
    "ECHO",
    "QUERY_DIRECTORY",
    "CHANGE_NOTIFY",
    "QUERY_INFO",
    "SET_INFO",
    "OPLOCK_BREAK",
];

pub fn smb2_command_name(cmd: u16) -> &'static str {
    COMMAND_NAMES
        .get(cmd as usize)
        .copied()
        .unwrap_or("UNKNOWN")
}

/// The 64-byte SMB2 packet header (MS-SMB2 2.2.1), sync or async form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Smb2Header {
    pub credit_charge: u16,
    /// NTSTATUS in responses; in SMB 3.x requests the same four bytes are
    /// ChannelSequence + Reserved.
    pub status: u32,
    pub command: u16,
    /// CreditRequest (request) or CreditResponse (response).
    pub credits: u16,
    pub flags: u32,
    /// Offset from this header to the next compounded one, 0 if last.
    pub next_command: u32,
    pub message_id: u64,
    /// Set when SMB2_FLAGS_ASYNC_COMMAND is.
    pub async_id: Option<u64>,
    /// Sync form only (0 in the async form).
    pub process_id: u32,
    /// Sync form only (0 in the async form).
    pub tree_id: u32,
    pub session_id: u64,
    pub signature: [u8; 16],
}

impl Smb2Header {
    pub fn is_response(&self) -> bool {
        self.flags & SMB2_FLAGS_SERVER_TO_REDIR != 0
    }
    pub fn is_async(&self) -> bool {
        self.flags & SMB2_FLAGS_ASYNC_COMMAND != 0
    }
    /// Part of a related compound chain (inherits ids from the previous).
    pub fn is_related(&self) -> bool {
        self.flags & SMB2_FLAGS_RELATED_OPERATIONS != 0
    }
    pub fn is_signed(&self) -> bool {
        self.flags & SMB2_FLAGS_SIGNED != 0
    }
    pub fn command_name(&self) -> &'static str {
        smb2_command_name(self.command)
    }
}

/// Decode the SMB2 header at the start of `b` (needs 64 bytes).
pub fn parse_smb2_header(b: &[u8]) -> Result<Smb2Header> {
    match detect_protocol(b) {
        Some(SmbProtocol::Smb2) => {}
        None if b.len() < 4 => return Err(ParseError::Incomplete),
        _ => return Err(ParseError::Malformed("smb2 protocol id")),
    }
    let r = Le(b);
    if r.u16(4)? != SMB2_HEADER_LEN as u16 {
        return Err(ParseError::Malformed("smb2 header structure size"));
    }
    let flags = r.u32(16)?;
    let is_async = flags & SMB2_FLAGS_ASYNC_COMMAND != 0;
    Ok(Smb2Header {
        credit_charge: r.u16(6)?,
        status: r.u32(8)?,
        command: r.u16(12)?,
        credits: r.u16(14)?,
        flags,
        next_command: r.u32(20)?,
        message_id: r.u64(24)?,
        async_id: if is_async { Some(r.u64(32)?) } else { None },
        process_id: if is_async { 0 } else { r.u32(32)? },
        tree_id: if is_async { 0 } else { r.u32(36)? },
        session_id: r.u64(40)?,
        signature: r.arr16(48)?,
    })
}

/// Content check for an SMB2 header at the start of `b`, for detection and
/// resynchronisation: protocol id, structure size 64, a known command and
/// no undefined flag bits. Needs only the first 20 bytes.
pub fn looks_like_smb2_header(b: &[u8]) -> bool {
    let r = Le(b);
    detect_protocol(b) == Some(SmbProtocol::Smb2)
        && r.u16(4) == Ok(64)
        && r.u16(12).is_ok_and(|c| c <= SMB2_OPLOCK_BREAK)
        && r.u32(16).is_ok_and(|f| f & !SMB2_FLAGS_KNOWN == 0)
}

/// Content check for a direct-TCP/NetBIOS framed SMB2/3 message at the
/// start of `b`: a session-message header whose length can hold the
/// message, followed by an SMB2 header, a transform or a compression
/// header.
pub fn looks_like_smb2_nbss(b: &[u8]) -> bool {
    let Ok(h) = parse_nbss_header(b) else {
        return false;
    };
    let rest = b.get(NBSS_HEADER_LEN..).unwrap_or(&[]);
    h.msg_type == NBSS_SESSION_MESSAGE
        && match detect_protocol(rest) {
            Some(SmbProtocol::Smb2) => {
                h.length >= SMB2_HEADER_LEN as u32 && looks_like_smb2_header(rest)
            }
            Some(SmbProtocol::Transform) => h.length > TRANSFORM_HEADER_LEN as u32,
            Some(SmbProtocol::Compressed) => h.length > COMPRESSION_HEADER_LEN as u32,
            _ => false,
        }
}

/// Iterator over the messages of a compound chain (linked by NextCommand).
/// Yields each header with its message bytes (header included, possibly
/// cut short by the capture), then stops; an error ends the iteration.
pub struct CompoundIter<'a> {
    buf: &'a [u8],
    pos: usize,
    done: bool,
}

/// Iterate over the compounded SMB2 messages in one NetBIOS payload.
pub fn compound_messages(b: &[u8]) -> CompoundIter<'_> {
    CompoundIter {
        buf: b,
        pos: 0,
        done: false,
    }
}

impl<'a> Iterator for CompoundIter<'a> {
    type Item = Result<(Smb2Header, &'a [u8])>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let rest = self.buf.get(self.pos..).unwrap_or(&[]);
        let hdr = match parse_smb2_header(rest) {
            Ok(h) => h,
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        let next = hdr.next_command as usize;
        if next == 0 {
            self.done = true;
            return Some(Ok((hdr, rest)));
        }
        // Each step advances at least one header, so this terminates.
        if next < SMB2_HEADER_LEN {
            self.done = true;
            return Some(Err(ParseError::Malformed("smb2 next command offset")));
        }
        let msg = rest.get(..next).unwrap_or(rest);
        self.pos = self.pos.saturating_add(next);
        Some(Ok((hdr, msg)))
    }
}

// ---- status codes and other names ----------------------------------------

pub const STATUS_SUCCESS: u32 = 0x0000_0000;
pub const STATUS_PENDING: u32 = 0x0000_0103;
pub const STATUS_BUFFER_OVERFLOW: u32 = 0x8000_0005;
pub const STATUS_NO_MORE_FILES: u32 = 0x8000_0006;
pub const STATUS_MORE_PROCESSING_REQUIRED: u32 = 0xc000_0016;
pub const STATUS_END_OF_FILE: u32 = 0xc000_0011;
pub const STATUS_ACCESS_DENIED: u32 = 0xc000_0022;
pub const STATUS_OBJECT_NAME_NOT_FOUND: u32 = 0xc000_0034;
pub const STATUS_INSUFFICIENT_RESOURCES: u32 = 0xc000_009a;
pub const STATUS_NETWORK_NAME_DELETED: u32 = 0xc000_00c9;
pub const STATUS_USER_SESSION_DELETED: u32 = 0xc000_0203;
pub const STATUS_CANCELLED: u32 = 0xc000_0120;

const STATUS_NAMES: [(u32, &str); 78] = [
    (0x0000_0000, "STATUS_SUCCESS"),
    (0x0000_0103, "STATUS_PENDING"),
    (0x0000_010b, "STATUS_NOTIFY_CLEANUP"),
    (0x0000_010c, "STATUS_NOTIFY_ENUM_DIR"),
    (0x8000_0005, "STATUS_BUFFER_OVERFLOW"),
    (0x8000_0006, "STATUS_NO_MORE_FILES"),
    (0x8000_001a, "STATUS_NO_MORE_ENTRIES"),
    (0x8000_002d, "STATUS_STOPPED_ON_SYMLINK"),
    (0xc000_0001, "STATUS_UNSUCCESSFUL"),
    (0xc000_0002, "STATUS_NOT_IMPLEMENTED"),
    (0xc000_0003, "STATUS_INVALID_INFO_CLASS"),
    (0xc000_0004, "STATUS_INFO_LENGTH_MISMATCH"),
    (0xc000_0008, "STATUS_INVALID_HANDLE"),
    (0xc000_000d, "STATUS_INVALID_PARAMETER"),
    (0xc000_000e, "STATUS_NO_SUCH_DEVICE"),
    (0xc000_000f, "STATUS_NO_SUCH_FILE"),
    (0xc000_0010, "STATUS_INVALID_DEVICE_REQUEST"),
    (0xc000_0011, "STATUS_END_OF_FILE"),
    (0xc000_0016, "STATUS_MORE_PROCESSING_REQUIRED"),
    (0xc000_0017, "STATUS_NO_MEMORY"),
    (0xc000_001e, "STATUS_INVALID_LOCK_SEQUENCE"),
    (0xc000_0022, "STATUS_ACCESS_DENIED"),
    (0xc000_0023, "STATUS_BUFFER_TOO_SMALL"),
    (0xc000_0033, "STATUS_OBJECT_NAME_INVALID"),
    (0xc000_0034, "STATUS_OBJECT_NAME_NOT_FOUND"),
    (0xc000_0035, "STATUS_OBJECT_NAME_COLLISION"),
    (0xc000_0039, "STATUS_OBJECT_PATH_INVALID"),
    (0xc000_003a, "STATUS_OBJECT_PATH_NOT_FOUND"),
    (0xc000_003b, "STATUS_OBJECT_PATH_SYNTAX_BAD"),
    (0xc000_0043, "STATUS_SHARING_VIOLATION"),
    (0xc000_0044, "STATUS_QUOTA_EXCEEDED"),
    (0xc000_0054, "STATUS_FILE_LOCK_CONFLICT"),
    (0xc000_0055, "STATUS_LOCK_NOT_GRANTED"),
    (0xc000_0056, "STATUS_DELETE_PENDING"),
    (0xc000_0061, "STATUS_PRIVILEGE_NOT_HELD"),
    (0xc000_0064, "STATUS_NO_SUCH_USER"),
    (0xc000_006a, "STATUS_WRONG_PASSWORD"),
    (0xc000_006d, "STATUS_LOGON_FAILURE"),
    (0xc000_006e, "STATUS_ACCOUNT_RESTRICTION"),
    (0xc000_0071, "STATUS_PASSWORD_EXPIRED"),
    (0xc000_0072, "STATUS_ACCOUNT_DISABLED"),
    (0xc000_007e, "STATUS_RANGE_NOT_LOCKED"),
    (0xc000_007f, "STATUS_DISK_FULL"),
    (0xc000_009a, "STATUS_INSUFFICIENT_RESOURCES"),
    (0xc000_00a5, "STATUS_BAD_IMPERSONATION_LEVEL"),
    (0xc000_00b5, "STATUS_IO_TIMEOUT"),
    (0xc000_00ba, "STATUS_FILE_IS_A_DIRECTORY"),
    (0xc000_00bb, "STATUS_NOT_SUPPORTED"),
    (0xc000_00c3, "STATUS_INVALID_NETWORK_RESPONSE"),
    (0xc000_00c4, "STATUS_UNEXPECTED_NETWORK_ERROR"),
    (0xc000_00c9, "STATUS_NETWORK_NAME_DELETED"),
    (0xc000_00ca, "STATUS_NETWORK_ACCESS_DENIED"),
    (0xc000_00cb, "STATUS_BAD_DEVICE_TYPE"),
    (0xc000_00cc, "STATUS_BAD_NETWORK_NAME"),
    (0xc000_00d0, "STATUS_REQUEST_NOT_ACCEPTED"),
    (0xc000_00d4, "STATUS_NOT_SAME_DEVICE"),
    (0xc000_00e2, "STATUS_OPLOCK_NOT_GRANTED"),
    (0xc000_00e5, "STATUS_INTERNAL_ERROR"),
    (0xc000_0101, "STATUS_DIRECTORY_NOT_EMPTY"),
    (0xc000_0103, "STATUS_NOT_A_DIRECTORY"),
    (0xc000_011f, "STATUS_TOO_MANY_OPENED_FILES"),
    (0xc000_0120, "STATUS_CANCELLED"),
    (0xc000_0121, "STATUS_CANNOT_DELETE"),
    (0xc000_0128, "STATUS_FILE_CLOSED"),
    (0xc000_015b, "STATUS_LOGON_TYPE_NOT_GRANTED"),
    (0xc000_0184, "STATUS_INVALID_DEVICE_STATE"),
    (0xc000_019c, "STATUS_FS_DRIVER_REQUIRED"),
    (0xc000_0203, "STATUS_USER_SESSION_DELETED"),
    (0xc000_020c, "STATUS_CONNECTION_DISCONNECTED"),
    (0xc000_020d, "STATUS_CONNECTION_RESET"),
    (0xc000_0225, "STATUS_NOT_FOUND"),
    (0xc000_023d, "STATUS_HOST_UNREACHABLE"),
    (0xc000_0257, "STATUS_PATH_NOT_COVERED"),
    (0xc000_026e, "STATUS_VOLUME_DISMOUNTED"),
    (0xc000_035c, "STATUS_NETWORK_SESSION_EXPIRED"),
    (0xc000_0427, "STATUS_FILE_SYSTEM_LIMITATION"),
    (0xc000_0467, "STATUS_FILE_NOT_AVAILABLE"),
    (0xc000_a000, "STATUS_INVALID_SIGNATURE"),
];

/// Name of a common NTSTATUS value, `None` for others.
pub fn nt_status_name(status: u32) -> Option<&'static str> {
    STATUS_NAMES
        .binary_search_by_key(&status, |(v, _)| *v)
        .ok()
        .and_then(|i| STATUS_NAMES.get(i))
        .map(|(_, n)| *n)
}

/// NTSTATUS severity: error (0xC...) codes.
pub fn nt_status_is_error(status: u32) -> bool {
    status >> 30 == 3
}

pub fn dialect_name(d: u16) -> &'static str {
    match d {
        0x0202 => "SMB 2.0.2",
        0x0210 => "SMB 2.1",
        0x02ff => "SMB 2.???",
        0x0300 => "SMB 3.0",
        0x0302 => "SMB 3.0.2",
        0x0311 => "SMB 3.1.1",
        _ => "UNKNOWN",
    }
}

pub fn share_type_name(t: u8) -> &'static str {
    match t {
        1 => "DISK",
        2 => "PIPE",
        3 => "PRINT",
        _ => "UNKNOWN",
    }
}

pub fn create_disposition_name(d: u32) -> &'static str {
    match d {
        0 => "FILE_SUPERSEDE",
        1 => "FILE_OPEN",
        2 => "FILE_CREATE",
        3 => "FILE_OPEN_IF",
        4 => "FILE_OVERWRITE",
        5 => "FILE_OVERWRITE_IF",
        _ => "UNKNOWN",
    }
}

pub fn create_action_name(a: u32) -> &'static str {
    match a {
        0 => "FILE_SUPERSEDED",
        1 => "FILE_OPENED",
        2 => "FILE_CREATED",
        3 => "FILE_OVERWRITTEN",
        _ => "UNKNOWN",
    }
}

// ---- bodies ------------------------------------------------------------

/// The decoded body of one SMB2 message. Request/response variants follow
/// the header's SERVER_TO_REDIR flag. File ids are the 16-byte
/// SMB2_FILEID (persistent + volatile).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Smb2Body {
    NegotiateRequest {
        security_mode: u16,
        capabilities: u32,
        client_guid: [u8; 16],
        dialects: Vec<u16>,
    },
    NegotiateResponse {
        security_mode: u16,
        dialect: u16,
        server_guid: [u8; 16],
        capabilities: u32,
        max_transact_size: u32,
        max_read_size: u32,
        max_write_size: u32,
    },
    SessionSetupRequest {
        flags: u8,
        security_mode: u8,
        capabilities: u32,
        previous_session_id: u64,
        security_buffer_len: u16,
    },
    SessionSetupResponse {
        session_flags: u16,
        security_buffer_len: u16,
    },
    TreeConnectRequest {
        flags: u16,
        path: String,
    },
    TreeConnectResponse {
        share_type: u8,
        share_flags: u32,
        capabilities: u32,
        maximal_access: u32,
    },
    CreateRequest {
        oplock_level: u8,
        impersonation_level: u32,
        desired_access: u32,
        file_attributes: u32,
        share_access: u32,
        create_disposition: u32,
        create_options: u32,
        name: String,
        contexts_len: u32,
    },
    CreateResponse {
        oplock_level: u8,
        flags: u8,
        create_action: u32,
        allocation_size: u64,
        end_of_file: u64,
        file_attributes: u32,
        file_id: [u8; 16],
        contexts_len: u32,
    },
    CloseRequest {
        flags: u16,
        file_id: [u8; 16],
    },
    CloseResponse {
        flags: u16,
        allocation_size: u64,
        end_of_file: u64,
        file_attributes: u32,
    },
    FlushRequest {
        file_id: [u8; 16],
    },
    ReadRequest {
        flags: u8,
        length: u32,
        offset: u64,
        file_id: [u8; 16],
        minimum_count: u32,
        channel: u32,
        remaining_bytes: u32,
    },
    ReadResponse {
        data_offset: u8,
        data_length: u32,
        data_remaining: u32,
    },
    WriteRequest {
        data_offset: u16,
        length: u32,
        offset: u64,
        file_id: [u8; 16],
        channel: u32,
        remaining_bytes: u32,
        flags: u32,
    },
    WriteResponse {
        count: u32,
        remaining: u32,
    },
    LockRequest {
        lock_count: u16,
        lock_sequence: u32,
        file_id: [u8; 16],
    },
    IoctlRequest {
        ctl_code: u32,
        file_id: [u8; 16],
        input_count: u32,
        max_output_response: u32,
        flags: u32,
    },
    IoctlResponse {
        ctl_code: u32,
        file_id: [u8; 16],
        input_count: u32,
        output_count: u32,
    },
    QueryDirectoryRequest {
        info_class: u8,
        flags: u8,
        file_index: u32,
        file_id: [u8; 16],
        pattern: String,
        output_buffer_length: u32,
    },
    ChangeNotifyRequest {
        flags: u16,
        output_buffer_length: u32,
        file_id: [u8; 16],
        completion_filter: u32,
    },
    QueryInfoRequest {
        info_type: u8,
        info_class: u8,
        output_buffer_length: u32,
        additional_information: u32,
        flags: u32,
        file_id: [u8; 16],
    },
    SetInfoRequest {
        info_type: u8,
        info_class: u8,
        buffer_length: u32,
        additional_information: u32,
        file_id: [u8; 16],
    },
    /// QUERY_DIRECTORY, QUERY_INFO and CHANGE_NOTIFY responses.
    OutputResponse {
        output_offset: u16,
        output_length: u32,
    },
    /// Oplock break notification, acknowledgment or response.
    OplockBreak {
        oplock_level: u8,
        file_id: [u8; 16],
    },
    /// Lease break notification (`lease_state` = NewLeaseState),
    /// acknowledgment or response (`lease_state` = LeaseState).
    LeaseBreak {
        lease_key: [u8; 16],
        lease_state: u32,
    },
    /// SMB2 ERROR response (MS-SMB2 2.2.2), also used for interim
    /// STATUS_PENDING responses.
    Error {
        error_context_count: u8,
        byte_count: u32,
    },
    /// LOGOFF, TREE_DISCONNECT, ECHO, CANCEL and the fixed 4-byte
    /// responses (FLUSH, LOCK, SET_INFO, ...): nothing to keep.
    Empty,
}

/// Expected body StructureSize of a normal response.
fn response_structure_size(cmd: u16) -> Option<u16> {
    Some(match cmd {
        SMB2_NEGOTIATE => 65,
        SMB2_SESSION_SETUP => 9,
        SMB2_LOGOFF | SMB2_TREE_DISCONNECT | SMB2_FLUSH | SMB2_LOCK | SMB2_ECHO => 4,
        SMB2_TREE_CONNECT => 16,
        SMB2_CREATE => 89,
        SMB2_CLOSE => 60,
        SMB2_READ | SMB2_WRITE => 17,
        SMB2_IOCTL => 49,
        SMB2_QUERY_DIRECTORY | SMB2_CHANGE_NOTIFY | SMB2_QUERY_INFO => 9,
        SMB2_SET_INFO => 2,
        _ => return None,
    })
}

/// Expected body StructureSize of a request.
fn request_structure_size(cmd: u16) -> Option<u16> {
    Some(match cmd {
        SMB2_NEGOTIATE => 36,
        SMB2_SESSION_SETUP => 25,
        SMB2_LOGOFF | SMB2_TREE_DISCONNECT | SMB2_CANCEL | SMB2_ECHO => 4,
        SMB2_TREE_CONNECT => 9,
        SMB2_CREATE => 57,
        SMB2_CLOSE | SMB2_FLUSH => 24,
        SMB2_READ | SMB2_WRITE => 49,
        SMB2_LOCK => 48,
        SMB2_IOCTL => 57,
        SMB2_QUERY_DIRECTORY | SMB2_SET_INFO => 33,
        SMB2_CHANGE_NOTIFY => 32,
        SMB2_QUERY_INFO => 41,
        _ => return None,
    })
}

/// A response is an ERROR response when its body has StructureSize 9 and
/// the command's normal response does not, or when it does but the status
/// is not one that comes with a normal body.
fn is_error_response(h: &Smb2Header, structure_size: u16) -> bool {
    if !h.is_response() || structure_size != 9 {
        return false;
    }
    match response_structure_size(h.command) {
        Some(9) => {
            h.status != STATUS_SUCCESS
                && h.status != STATUS_BUFFER_OVERFLOW
                && !(h.command == SMB2_SESSION_SETUP && h.status == STATUS_MORE_PROCESSING_REQUIRED)
        }
        _ => true,
    }
}

/// A message with its decoded header and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Smb2Message {
    pub header: Smb2Header,
    /// The body, or why it could not be decoded (`Incomplete` when the
    /// capture cut its fixed part).
    pub body: Result<Smb2Body>,
    /// Every byte the body's offsets/lengths point to was captured.
    pub complete: bool,
}

/// Decode header and body of one message (`msg` starts at the SMB2 header
/// and ends at the message end, e.g. an item of [`compound_messages`]).
/// Fails only if the header itself cannot be decoded.
pub fn parse_smb2_message(msg: &[u8]) -> Result<Smb2Message> {
    let header = parse_smb2_header(msg)?;
    let (body, complete) = match parse_smb2_body(&header, msg) {
        Ok((b, c)) => (Ok(b), c),
        Err(e) => (Err(e), false),
    };
    Ok(Smb2Message {
        header,
        body,
        complete,
    })
}

/// Decode a message body; `msg` starts at the SMB2 header. Returns the body
/// and whether every byte its offsets/lengths point to was captured.
pub fn parse_smb2_body(h: &Smb2Header, msg: &[u8]) -> Result<(Smb2Body, bool)> {
    const B: usize = SMB2_HEADER_LEN;
    let r = Le(msg);
    let ss = r.u16(B)?;
    if is_error_response(h, ss) {
        let byte_count = r.u32(B + 4)?;
        let body = Smb2Body::Error {
            error_context_count: r.u8(B + 2)?,
            byte_count,
        };
        return Ok((body, covers(msg, B + 8, byte_count as usize)));
    }
    let resp = h.is_response();
    if h.command == SMB2_OPLOCK_BREAK {
        return oplock_break(r, ss).map(|b| (b, true));
    }
    let expected = if resp {
        response_structure_size(h.command)
    } else {
        request_structure_size(h.command)
    };
    if expected != Some(ss) {
        return Err(ParseError::Malformed("smb2 body structure size"));
    }
    let fid = |off: usize| r.arr16(B + off);
    let mut complete = true;
    let body = match (h.command, resp) {
        (SMB2_NEGOTIATE, false) => {
            let count = r.u16(B + 2)? as usize;
            let security_mode = r.u16(B + 4)?;
            let capabilities = r.u32(B + 8)?;
            let client_guid = fid(12)?;
            // Dialects are the variable part: keep those captured.
            let avail = msg.len().saturating_sub(B + 36) / 2;
            complete = avail >= count;
            let dialects = (0..count.min(avail))
                .map(|i| r.u16(B + 36 + 2 * i))
                .collect::<Result<Vec<_>>>()?;
            Smb2Body::NegotiateRequest {
                security_mode,
                capabilities,
                client_guid,
                dialects,
            }
        }
        (SMB2_NEGOTIATE, true) => {
            let body = Smb2Body::NegotiateResponse {
                security_mode: r.u16(B + 2)?,
                dialect: r.u16(B + 4)?,
                server_guid: fid(8)?,
                capabilities: r.u32(B + 24)?,
                max_transact_size: r.u32(B + 28)?,
                max_read_size: r.u32(B + 32)?,
                max_write_size: r.u32(B + 36)?,
            };
            complete = covers(msg, r.u16(B + 56)? as usize, r.u16(B + 58)? as usize);
            body
        }
        (SMB2_SESSION_SETUP, false) => {
            let security_buffer_len = r.u16(B + 14)?;
            complete = covers(msg, r.u16(B + 12)? as usize, security_buffer_len as usize);
            Smb2Body::SessionSetupRequest {
                flags: r.u8(B + 2)?,
                security_mode: r.u8(B + 3)?,
                capabilities: r.u32(B + 4)?,
                previous_session_id: r.u64(B + 16)?,
                security_buffer_len,
            }
        }
        (SMB2_SESSION_SETUP, true) => {
            let security_buffer_len = r.u16(B + 6)?;
            complete = covers(msg, r.u16(B + 4)? as usize, security_buffer_len as usize);
            Smb2Body::SessionSetupResponse {
                session_flags: r.u16(B + 2)?,
                security_buffer_len,
            }
        }
        (SMB2_TREE_CONNECT, false) => {
            let flags = r.u16(B + 2)?;
            let (path, c) = utf16_field(msg, r.u16(B + 4)?, r.u16(B + 6)?)?;
            complete = c;
            Smb2Body::TreeConnectRequest { flags, path }
        }
        (SMB2_TREE_CONNECT, true) => Smb2Body::TreeConnectResponse {
            share_type: r.u8(B + 2)?,
            share_flags: r.u32(B + 4)?,
            capabilities: r.u32(B + 8)?,
            maximal_access: r.u32(B + 12)?,
        },
        (SMB2_CREATE, false) => {
            let contexts_len = r.u32(B + 52)?;
            let (name, c) = utf16_field(msg, r.u16(B + 44)?, r.u16(B + 46)?)?;
            complete = c && covers(msg, r.u32(B + 48)? as usize, contexts_len as usize);
            Smb2Body::CreateRequest {
                oplock_level: r.u8(B + 3)?,
                impersonation_level: r.u32(B + 4)?,
                desired_access: r.u32(B + 24)?,
                file_attributes: r.u32(B + 28)?,
                share_access: r.u32(B + 32)?,
                create_disposition: r.u32(B + 36)?,
                create_options: r.u32(B + 40)?,
                name,
                contexts_len,
            }
        }
        (SMB2_CREATE, true) => {
            let contexts_len = r.u32(B + 84)?;
            complete = covers(msg, r.u32(B + 80)? as usize, contexts_len as usize);
            Smb2Body::CreateResponse {
                oplock_level: r.u8(B + 2)?,
                flags: r.u8(B + 3)?,
                create_action: r.u32(B + 4)?,
                allocation_size: r.u64(B + 40)?,
                end_of_file: r.u64(B + 48)?,
                file_attributes: r.u32(B + 56)?,
                file_id: fid(64)?,
                contexts_len,
            }
        }
        (SMB2_CLOSE, false) => Smb2Body::CloseRequest {
            flags: r.u16(B + 2)?,
            file_id: fid(8)?,
        },
        (SMB2_CLOSE, true) => Smb2Body::CloseResponse {
            flags: r.u16(B + 2)?,
            allocation_size: r.u64(B + 40)?,
            end_of_file: r.u64(B + 48)?,
            file_attributes: r.u32(B + 56)?,
        },
        (SMB2_FLUSH, false) => Smb2Body::FlushRequest { file_id: fid(8)? },
        (SMB2_READ, false) => Smb2Body::ReadRequest {
            flags: r.u8(B + 3)?,
            length: r.u32(B + 4)?,
            offset: r.u64(B + 8)?,
            file_id: fid(16)?,
            minimum_count: r.u32(B + 32)?,
            channel: r.u32(B + 36)?,
            remaining_bytes: r.u32(B + 40)?,
        },
        (SMB2_READ, true) => {
            let data_offset = r.u8(B + 2)?;
            let data_length = r.u32(B + 4)?;
            complete = covers(msg, data_offset as usize, data_length as usize);
            Smb2Body::ReadResponse {
                data_offset,
                data_length,
                data_remaining: r.u32(B + 8)?,
            }
        }
        (SMB2_WRITE, false) => {
            let data_offset = r.u16(B + 2)?;
            let length = r.u32(B + 4)?;
            complete = covers(msg, data_offset as usize, length as usize);
            Smb2Body::WriteRequest {
                data_offset,
                length,
                offset: r.u64(B + 8)?,
                file_id: fid(16)?,
                channel: r.u32(B + 32)?,
                remaining_bytes: r.u32(B + 36)?,
                flags: r.u32(B + 44)?,
            }
        }
        (SMB2_WRITE, true) => Smb2Body::WriteResponse {
            count: r.u32(B + 4)?,
            remaining: r.u32(B + 8)?,
        },
        (SMB2_LOCK, false) => {
            let lock_count = r.u16(B + 2)?;
            // The first lock element is part of the 48-byte fixed body.
            complete = covers(msg, B + 24, 24 * lock_count as usize);
            Smb2Body::LockRequest {
                lock_count,
                lock_sequence: r.u32(B + 4)?,
                file_id: fid(8)?,
            }
        }
        (SMB2_IOCTL, false) => {
            let input_count = r.u32(B + 28)?;
            complete = covers(msg, r.u32(B + 24)? as usize, input_count as usize);
            Smb2Body::IoctlRequest {
                ctl_code: r.u32(B + 4)?,
                file_id: fid(8)?,
                input_count,
                max_output_response: r.u32(B + 44)?,
                flags: r.u32(B + 48)?,
            }
        }
        (SMB2_IOCTL, true) => {
            let input_count = r.u32(B + 28)?;
            let output_count = r.u32(B + 36)?;
            complete = covers(msg, r.u32(B + 24)? as usize, input_count as usize)
                && covers(msg, r.u32(B + 32)? as usize, output_count as usize);
            Smb2Body::IoctlResponse {
                ctl_code: r.u32(B + 4)?,
                file_id: fid(8)?,
                input_count,
                output_count,
            }
        }
        (SMB2_QUERY_DIRECTORY, false) => {
            let (pattern, c) = utf16_field(msg, r.u16(B + 24)?, r.u16(B + 26)?)?;
            complete = c;
            Smb2Body::QueryDirectoryRequest {
                info_class: r.u8(B + 2)?,
                flags: r.u8(B + 3)?,
                file_index: r.u32(B + 4)?,
                file_id: fid(8)?,
                pattern,
                output_buffer_length: r.u32(B + 28)?,
            }
        }
        (SMB2_CHANGE_NOTIFY, false) => Smb2Body::ChangeNotifyRequest {
            flags: r.u16(B + 2)?,
            output_buffer_length: r.u32(B + 4)?,
            file_id: fid(8)?,
            completion_filter: r.u32(B + 24)?,
        },
        (SMB2_QUERY_INFO, false) => {
            complete = covers(msg, r.u16(B + 8)? as usize, r.u32(B + 12)? as usize);
            Smb2Body::QueryInfoRequest {
                info_type: r.u8(B + 2)?,
                info_class: r.u8(B + 3)?,
                output_buffer_length: r.u32(B + 4)?,
                additional_information: r.u32(B + 16)?,
                flags: r.u32(B + 20)?,
                file_id: fid(24)?,
            }
        }
        (SMB2_SET_INFO, false) => {
            let buffer_length = r.u32(B + 4)?;
            complete = covers(msg, r.u16(B + 8)? as usize, buffer_length as usize);
            Smb2Body::SetInfoRequest {
                info_type: r.u8(B + 2)?,
                info_class: r.u8(B + 3)?,
                buffer_length,
                additional_information: r.u32(B + 12)?,
                file_id: fid(16)?,
            }
        }
        (SMB2_QUERY_DIRECTORY | SMB2_QUERY_INFO | SMB2_CHANGE_NOTIFY, true) => {
            let output_offset = r.u16(B + 2)?;
            let output_length = r.u32(B + 4)?;
            complete = covers(msg, output_offset as usize, output_length as usize);
            Smb2Body::OutputResponse {
                output_offset,
                output_length,
            }
        }
        _ => {
            // Fixed bodies with nothing to keep: still require them whole.
            r.bytes(B, ss as usize & !1)?;
            Smb2Body::Empty
        }
    };
    Ok((body, complete))
}

fn oplock_break(r: Le, ss: u16) -> Result<Smb2Body> {
    const B: usize = SMB2_HEADER_LEN;
    match ss {
        24 => Ok(Smb2Body::OplockBreak {
            oplock_level: r.u8(B + 2)?,
            file_id: r.arr16(B + 8)?,
        }),
        44 => Ok(Smb2Body::LeaseBreak {
            lease_key: r.arr16(B + 8)?,
            lease_state: r.u32(B + 28)?,
        }),
        36 => Ok(Smb2Body::LeaseBreak {
            lease_key: r.arr16(B + 8)?,
            lease_state: r.u32(B + 24)?,
        }),
        _ => Err(ParseError::Malformed("smb2 oplock break structure size")),
    }
}

/// The message holds `len` bytes at `off` (an offset from the header).
fn covers(msg: &[u8], off: usize, len: usize) -> bool {
    len == 0 || off.checked_add(len).is_some_and(|end| end <= msg.len())
}

/// A UTF-16LE string at (offset from header, byte length). A string cut by
/// the capture is decoded as far as present, with `false` for complete.
fn utf16_field(msg: &[u8], off: u16, len: u16) -> Result<(String, bool)> {
    if len == 0 {
        return Ok((String::new(), true));
    }
    let off = off as usize;
    if off < SMB2_HEADER_LEN {
        return Err(ParseError::Malformed("smb2 buffer offset inside header"));
    }
    let end = off + len as usize;
    let avail = msg.get(off..end.min(msg.len())).unwrap_or(&[]);
    Ok((utf16le_lossy(avail), end <= msg.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{fuzz, Le as W};

    const FID: [u8; 16] = [0x42; 16];

    fn header(cmd: u16, flags: u32, status: u32, next: u32) -> W {
        let w = W::new().bytes(&[0xfe, b'S', b'M', b'B']).u16(64).u16(1);
        let w = w
            .u32(status)
            .u16(cmd)
            .u16(31)
            .u32(flags)
            .u32(next)
            .u64(1234);
        let w = if flags & SMB2_FLAGS_ASYNC_COMMAND != 0 {
            w.u64(0xa5a5)
        } else {
            w.u32(0xfeff).u32(7)
        };
        w.u64(0x1122_3344_5566_7788).zeros(16)
    }

    fn req(cmd: u16) -> W {
        header(cmd, 0, 0, 0)
    }
    fn resp(cmd: u16, status: u32) -> W {
        header(cmd, SMB2_FLAGS_SERVER_TO_REDIR, status, 0)
    }

    fn messages() -> Vec<Vec<u8>> {
        let path = "\\\\srv\\share";
        let name = "dir\\file.txt";
        vec![
            req(SMB2_NEGOTIATE)
                .u16(36)
                .u16(3)
                .u16(1)
                .u16(0)
                .u32(0x7f)
                .bytes(&[9; 16])
                .zeros(8)
                .u16(0x0202)
                .u16(0x0300)
                .u16(0x0311)
                .done(),
            resp(SMB2_NEGOTIATE, 0)
                .u16(65)
                .u16(1)
                .u16(0x0311)
                .u16(0)
                .bytes(&[8; 16])
                .u32(0x2f)
                .u32(8 << 20)
                .u32(8 << 20)
                .u32(8 << 20)
                .u64(0)
                .u64(0)
                .u16(128)
                .u16(4)
                .u32(0)
                .bytes(&[0x60, 1, 2, 3])
                .done(),
            req(SMB2_SESSION_SETUP)
                .u16(25)
                .u8(0)
                .u8(1)
                .u32(1)
                .u32(0)
                .u16(88)
                .u16(2)
                .u64(0)
                .bytes(&[1, 2])
                .done(),
            resp(SMB2_SESSION_SETUP, STATUS_MORE_PROCESSING_REQUIRED)
                .u16(9)
                .u16(0)
                .u16(72)
                .u16(1)
                .u8(0xa1)
                .done(),
            req(SMB2_TREE_CONNECT)
                .u16(9)
                .u16(0)
                .u16(72)
                .u16(2 * path.len() as u16)
                .utf16(path)
                .done(),
            resp(SMB2_TREE_CONNECT, 0)
                .u16(16)
                .u8(1)
                .u8(0)
                .u32(0x800)
                .u32(0)
                .u32(0x1f01ff)
                .done(),
            req(SMB2_CREATE)
                .u16(57)
                .u8(0)
                .u8(9)
                .u32(2)
                .u64(0)
                .u64(0)
                .u32(0x0012_0089)
                .u32(0x80)
                .u32(7)
                .u32(1)
                .u32(0x40)
                .u16(120)
                .u16(2 * name.len() as u16)
                .u32(0)
                .u32(0)
                .utf16(name)
                .done(),
            resp(SMB2_CREATE, 0)
                .u16(89)
                .u8(0)
                .u8(0)
                .u32(1)
                .zeros(32)
                .u64(4096)
                .u64(1000)
                .u32(0x20)
                .u32(0)
                .bytes(&FID)
                .u32(0)
                .u32(0)
                .done(),
            req(SMB2_CLOSE).u16(24).u16(1).u32(0).bytes(&FID).done(),
            resp(SMB2_CLOSE, 0)
                .u16(60)
                .u16(1)
                .u32(0)
                .zeros(32)
                .u64(4096)
                .u64(1000)
                .u32(0x20)
                .done(),
            req(SMB2_READ)
                .u16(49)
                .u8(0x50)
                .u8(0)
                .u32(65536)
                .u64(1 << 20)
                .bytes(&FID)
                .u32(1)
                .u32(0)
                .u32(0)
                .u16(0)
                .u16(0)
                .u8(0)
                .done(),
            resp(SMB2_READ, 0)
                .u16(17)
                .u8(80)
                .u8(0)
                .u32(5)
                .u32(0)
                .u32(0)
                .bytes(b"hello")
                .done(),
            req(SMB2_WRITE)
                .u16(49)
                .u16(112)
                .u32(3)
                .u64(4096)
                .bytes(&FID)
                .u32(0)
                .u32(0)
                .u16(0)
                .u16(0)
                .u32(0)
                .bytes(b"abc")
                .done(),
            resp(SMB2_WRITE, 0)
                .u16(17)
                .u16(0)
                .u32(3)
                .u32(0)
                .u16(0)
                .u16(0)
                .done(),
            req(SMB2_IOCTL)
                .u16(57)
                .u16(0)
                .u32(0x0014_0204)
                .bytes(&FID)
                .u32(120)
                .u32(4)
                .u32(0)
                .u32(124)
                .u32(0)
                .u32(1024)
                .u32(1)
                .u32(0)
                .bytes(&[1, 2, 3, 4])
                .done(),
            resp(SMB2_IOCTL, 0)
                .u16(49)
                .u16(0)
                .u32(0x0014_0204)
                .bytes(&FID)
                .u32(112)
                .u32(0)
                .u32(112)
                .u32(2)
                .u32(0)
                .u32(0)
                .bytes(&[5, 6])
                .done(),
            req(SMB2_QUERY_DIRECTORY)
                .u16(33)
                .u8(37)
                .u8(0)
                .u32(0)
                .bytes(&FID)
                .u16(96)
                .u16(2)
                .u32(65536)
                .utf16("*")
                .done(),
            resp(SMB2_QUERY_DIRECTORY, STATUS_NO_MORE_FILES)
                .u16(9)
                .u8(0)
                .u8(0)
                .u32(0)
                .u8(0)
                .done(),
            resp(SMB2_QUERY_DIRECTORY, 0)
                .u16(9)
                .u16(72)
                .u32(4)
                .bytes(&[0; 4])
                .done(),
            req(SMB2_LOCK)
                .u16(48)
                .u16(1)
                .u32(0)
                .bytes(&FID)
                .u64(0)
                .u64(10)
                .u32(2)
                .u32(0)
                .done(),
            req(SMB2_QUERY_INFO)
                .u16(41)
                .u8(1)
                .u8(5)
                .u32(4096)
                .u16(0)
                .u16(0)
                .u32(0)
                .u32(0)
                .u32(0)
                .bytes(&FID)
                .done(),
            req(SMB2_SET_INFO)
                .u16(33)
                .u8(1)
                .u8(20)
                .u32(8)
                .u16(96)
                .u16(0)
                .u32(0)
                .bytes(&FID)
                .u64(5000)
                .done(),
            req(SMB2_CHANGE_NOTIFY)
                .u16(32)
                .u16(1)
                .u32(4096)
                .bytes(&FID)
                .u32(0x17)
                .u32(0)
                .done(),
            resp(SMB2_OPLOCK_BREAK, 0)
                .u16(24)
                .u8(1)
                .u8(0)
                .u32(0)
                .bytes(&FID)
                .done(),
            header(SMB2_READ, 3, STATUS_PENDING, 0)
                .u16(9)
                .u8(0)
                .u8(0)
                .u32(0)
                .u8(0)
                .done(),
            req(SMB2_ECHO).u16(4).u16(0).done(),
            resp(SMB2_FLUSH, 0).u16(4).u16(0).done(),
        ]
    }

    #[test]
    fn header_fields() {
        let b = header(
            SMB2_CREATE,
            SMB2_FLAGS_SIGNED | SMB2_FLAGS_RELATED_OPERATIONS,
            0,
            0,
        )
        .done();
        let h = parse_smb2_header(&b).unwrap();
        assert_eq!(
            (h.command, h.credits, h.credit_charge, h.message_id),
            (SMB2_CREATE, 31, 1, 1234)
        );
        assert_eq!(
            (h.process_id, h.tree_id, h.session_id),
            (0xfeff, 7, 0x1122_3344_5566_7788)
        );
        assert!(h.is_signed() && h.is_related() && !h.is_response() && !h.is_async());
        assert_eq!(h.command_name(), "CREATE");
        let b = header(SMB2_READ, SMB2_FLAGS_ASYNC_COMMAND | 1, STATUS_PENDING, 0).done();
        let h = parse_smb2_header(&b).unwrap();
        assert_eq!(
            (h.async_id, h.tree_id, h.status),
            (Some(0xa5a5), 0, STATUS_PENDING)
        );
        assert!(h.is_response() && h.is_async());
        for n in 0..64 {
            assert_eq!(
                parse_smb2_header(&b[..n]),
                Err(ParseError::Incomplete),
                "{n}"
            );
        }
        assert!(looks_like_smb2_header(&b));
        let mut bad = b.clone();
        bad[0] = 0xff;
        assert_eq!(
            parse_smb2_header(&bad),
            Err(ParseError::Malformed("smb2 protocol id"))
        );
        assert!(!looks_like_smb2_header(&bad));
        let mut bad = b.clone();
        bad[4] = 65;
        assert!(parse_smb2_header(&bad).is_err() && !looks_like_smb2_header(&bad));
        assert_eq!(smb2_command_name(18), "OPLOCK_BREAK");
        assert_eq!(smb2_command_name(19), "UNKNOWN");
    }

    #[test]
    fn bodies() {
        let m = messages();
        let body = |i: usize| {
            let p = parse_smb2_message(&m[i]).unwrap();
            assert!(p.complete, "message {i}: {p:?}");
            p.body.unwrap()
        };
        let Smb2Body::NegotiateRequest { dialects, .. } = body(0) else {
            panic!()
        };
        assert_eq!(dialects, vec![0x0202, 0x0300, 0x0311]);
        let Smb2Body::NegotiateResponse {
            dialect,
            max_read_size,
            ..
        } = body(1)
        else {
            panic!()
        };
        assert_eq!(
            (dialect_name(dialect), max_read_size),
            ("SMB 3.1.1", 8 << 20)
        );
        assert!(matches!(
            body(2),
            Smb2Body::SessionSetupRequest {
                security_buffer_len: 2,
                ..
            }
        ));
        assert!(matches!(
            body(3),
            Smb2Body::SessionSetupResponse {
                security_buffer_len: 1,
                ..
            }
        ));
        assert_eq!(
            body(4),
            Smb2Body::TreeConnectRequest {
                flags: 0,
                path: "\\\\srv\\share".into()
            }
        );
        let Smb2Body::TreeConnectResponse { share_type, .. } = body(5) else {
            panic!()
        };
        assert_eq!(share_type_name(share_type), "DISK");
        let Smb2Body::CreateRequest {
            name,
            desired_access,
            create_disposition,
            ..
        } = body(6)
        else {
            panic!()
        };
        assert_eq!(
            (name.as_str(), desired_access),
            ("dir\\file.txt", 0x0012_0089)
        );
        assert_eq!(create_disposition_name(create_disposition), "FILE_OPEN");
        let Smb2Body::CreateResponse {
            file_id,
            create_action,
            end_of_file,
            ..
        } = body(7)
        else {
            panic!()
        };
        assert_eq!(
            (file_id, create_action_name(create_action), end_of_file),
            (FID, "FILE_OPENED", 1000)
        );
        assert_eq!(
            body(8),
            Smb2Body::CloseRequest {
                flags: 1,
                file_id: FID
            }
        );
        assert!(matches!(
            body(9),
            Smb2Body::CloseResponse {
                end_of_file: 1000,
                ..
            }
        ));
        let Smb2Body::ReadRequest {
            length,
            offset,
            file_id,
            ..
        } = body(10)
        else {
            panic!()
        };
        assert_eq!((length, offset, file_id), (65536, 1 << 20, FID));
        assert_eq!(
            body(11),
            Smb2Body::ReadResponse {
                data_offset: 80,
                data_length: 5,
                data_remaining: 0
            }
        );
        let Smb2Body::WriteRequest {
            data_offset,
            length,
            offset,
            ..
        } = body(12)
        else {
            panic!()
        };
        assert_eq!((data_offset, length, offset), (112, 3, 4096));
        assert_eq!(
            body(13),
            Smb2Body::WriteResponse {
                count: 3,
                remaining: 0
            }
        );
        assert!(matches!(
            body(14),
            Smb2Body::IoctlRequest {
                ctl_code: 0x0014_0204,
                input_count: 4,
                ..
            }
        ));
        assert!(matches!(
            body(15),
            Smb2Body::IoctlResponse {
                output_count: 2,
                ..
            }
        ));
        let Smb2Body::QueryDirectoryRequest {
            pattern,
            info_class,
            ..
        } = body(16)
        else {
            panic!()
        };
        assert_eq!((pattern.as_str(), info_class), ("*", 37));
        assert_eq!(
            body(17),
            Smb2Body::Error {
                error_context_count: 0,
                byte_count: 0
            }
        );
        assert_eq!(
            body(18),
            Smb2Body::OutputResponse {
                output_offset: 72,
                output_length: 4
            }
        );
        assert!(matches!(
            body(19),
            Smb2Body::LockRequest { lock_count: 1, .. }
        ));
        assert!(matches!(
            body(20),
            Smb2Body::QueryInfoRequest {
                info_type: 1,
                info_class: 5,
                ..
            }
        ));
        assert!(matches!(
            body(21),
            Smb2Body::SetInfoRequest {
                info_class: 20,
                buffer_length: 8,
                ..
            }
        ));
        assert!(matches!(
            body(22),
            Smb2Body::ChangeNotifyRequest {
                completion_filter: 0x17,
                ..
            }
        ));
        assert_eq!(
            body(23),
            Smb2Body::OplockBreak {
                oplock_level: 1,
                file_id: FID
            }
        );
        assert!(matches!(body(24), Smb2Body::Error { .. }));
        assert_eq!(body(25), Smb2Body::Empty);
        assert_eq!(body(26), Smb2Body::Empty);
    }

    #[test]
    fn truncated_messages() {
        for (i, m) in messages().iter().enumerate() {
            for n in 0..m.len() {
                let cut = &m[..n];
                match parse_smb2_message(cut) {
                    Err(e) => assert!(n < 64 && e.is_incomplete(), "msg {i} len {n}"),
                    Ok(p) => {
                        assert!(n >= 64);
                        assert!(!p.complete || p.body.is_ok(), "msg {i} len {n}");
                        if let Err(e) = p.body {
                            assert!(e.is_incomplete(), "msg {i} len {n}: {e:?}");
                        }
                    }
                }
            }
        }
        // A cut name: header and fixed body decode, name partially.
        let m = &messages()[6];
        let p = parse_smb2_message(&m[..m.len() - 6]).unwrap();
        let Ok(Smb2Body::CreateRequest { name, .. }) = p.body else {
            panic!()
        };
        assert_eq!((name.as_str(), p.complete), ("dir\\file.", false));
        // A READ response whose data is cut still reports the full length.
        let m = &messages()[11];
        let p = parse_smb2_message(&m[..m.len() - 3]).unwrap();
        assert_eq!(
            p.body,
            Ok(Smb2Body::ReadResponse {
                data_offset: 80,
                data_length: 5,
                data_remaining: 0
            })
        );
        assert!(!p.complete);
    }

    #[test]
    fn compound_chain() {
        let create = {
            let mut b = messages()[6].clone();
            b.resize(b.len().next_multiple_of(8), 0);
            let next = b.len() as u32;
            b[20..24].copy_from_slice(&next.to_le_bytes());
            b
        };
        let mut read = messages()[10].clone();
        read[16] |= SMB2_FLAGS_RELATED_OPERATIONS as u8;
        read.resize(read.len().next_multiple_of(8), 0);
        let next = read.len() as u32;
        read[20..24].copy_from_slice(&next.to_le_bytes());
        let close = messages()[8].clone();
        let all = [create.clone(), read.clone(), close.clone()].concat();
        let items: Vec<_> = compound_messages(&all).collect();
        assert_eq!(items.len(), 3);
        let cmds: Vec<u16> = items
            .iter()
            .map(|r| r.as_ref().unwrap().0.command)
            .collect();
        assert_eq!(cmds, vec![SMB2_CREATE, SMB2_READ, SMB2_CLOSE]);
        let (h, m) = items[1].as_ref().unwrap();
        assert!(h.is_related());
        assert_eq!(m.len(), read.len());
        // Cut inside the second message: first is whole, second cut, end.
        let cut = &all[..create.len() + 70];
        let items: Vec<_> = compound_messages(cut).collect();
        assert_eq!(items.len(), 3);
        assert!(items[1].as_ref().is_ok_and(|(_, m)| m.len() == 70));
        assert_eq!(items[2], Err(ParseError::Incomplete));
        let cut = &all[..create.len() + 10];
        let items: Vec<_> = compound_messages(cut).collect();
        assert_eq!(items[1], Err(ParseError::Incomplete));
        // NextCommand pointing inside the header is malformed.
        let mut bad = all.clone();
        bad[20..24].copy_from_slice(&8u32.to_le_bytes());
        let items: Vec<_> = compound_messages(&bad).collect();
        assert_eq!(
            items,
            vec![Err(ParseError::Malformed("smb2 next command offset"))]
        );
    }

    #[test]
    fn framing_and_transforms() {
        let h = parse_nbss_header(&[0, 0x01, 0x02, 0x03]).unwrap();
        assert_eq!(
            (h.msg_type, h.length, h.length_rfc1002()),
            (0, 0x010203, 0x10203)
        );
        let h = parse_nbss_header(&[0x85, 0, 0, 0]).unwrap();
        assert_eq!(nbss_type_name(h.msg_type), "SESSION_KEEP_ALIVE");
        assert_eq!(parse_nbss_header(&[0, 0]), Err(ParseError::Incomplete));

        let msg = messages()[0].clone();
        let mut framed = vec![0, 0, 0, msg.len() as u8];
        framed.extend_from_slice(&msg);
        assert!(looks_like_smb2_nbss(&framed));
        assert!(!looks_like_smb2_nbss(&framed[1..]));
        assert_eq!(detect_protocol(&framed[4..]), Some(SmbProtocol::Smb2));
        assert_eq!(detect_protocol(b"\xffSMBr"), Some(SmbProtocol::Smb1));
        assert_eq!(detect_protocol(b"\xfeSM"), None);

        let t = W::new()
            .bytes(b"\xfdSMB")
            .bytes(&[1; 16])
            .bytes(&[2; 16])
            .u32(4242)
            .u16(0)
            .u16(1)
            .u64(0xdead_beef)
            .done();
        let th = parse_transform_header(&t).unwrap();
        assert_eq!(
            (th.original_size, th.flags, th.session_id),
            (4242, 1, 0xdead_beef)
        );
        assert_eq!(detect_protocol(&t), Some(SmbProtocol::Transform));
        for n in 0..t.len() {
            assert_eq!(parse_transform_header(&t[..n]), Err(ParseError::Incomplete));
        }
        let mut framed = vec![0, 0, 1, 0];
        framed.extend_from_slice(&t);
        assert!(looks_like_smb2_nbss(&framed));

        let c = W::new()
            .bytes(b"\xfcSMB")
            .u32(8192)
            .u16(1)
            .u16(0)
            .u32(0)
            .done();
        let ch = parse_compression_header(&c).unwrap();
        assert_eq!((ch.original_size, ch.algorithm, ch.flags), (8192, 1, 0));
        assert!(parse_compression_header(&t).is_err());
        assert_eq!(
            parse_compression_header(&c[..15]),
            Err(ParseError::Incomplete)
        );
    }

    #[test]
    fn status_names() {
        assert!(STATUS_NAMES.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(nt_status_name(STATUS_PENDING), Some("STATUS_PENDING"));
        assert_eq!(
            nt_status_name(0xc000_0035),
            Some("STATUS_OBJECT_NAME_COLLISION")
        );
        assert_eq!(
            nt_status_name(STATUS_NETWORK_NAME_DELETED),
            Some("STATUS_NETWORK_NAME_DELETED")
        );
        assert_eq!(nt_status_name(0xc000_007f), Some("STATUS_DISK_FULL"));
        assert_eq!(nt_status_name(0x1234), None);
        assert!(
            nt_status_is_error(STATUS_ACCESS_DENIED) && !nt_status_is_error(STATUS_BUFFER_OVERFLOW)
        );
        assert_eq!(utf16le_lossy(&[0x41, 0, 0x00, 0xd8, 0x42]), "A\u{fffd}");
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len() / 2)
            .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
            .collect()
    }

    /// A real CREATE of the srvsvc pipe (zeek smb2.pcap, frames 16/17),
    /// direct-TCP header included.
    #[test]
    fn real_capture_create() {
        let req = hex(concat!(
            "00000084fe534d424000000000000000050001000000000000000000060000000000000",
            "0fffe00000500000005000000000400000000000000000000000000000000000039000000",
            "02000000000000000000000000000000000000009f0112000000000003000000010000004",
            "000400078000c000000000000000000730072007600730076006300"
        ));
        let resp = hex(concat!(
            "00000098fe534d424000000000000000050001000100000000000000060000000000000",
            "0fffe0000050000000500000000040000000000000000000000000000000000005900000",
            "0010000000000000000000000000000000000000000000000000000000000000000000000",
            "001000000000000000000000000000008000000076007300490000000000000005000000",
            "ffffffff0000000000000000"
        ));
        assert!(looks_like_smb2_nbss(&req) && looks_like_smb2_nbss(&resp));
        let n = parse_nbss_header(&req).unwrap();
        assert_eq!(n.length as usize, req.len() - 4);
        let m = parse_smb2_message(&req[4..]).unwrap();
        assert_eq!(
            (m.header.command, m.header.message_id, m.header.tree_id),
            (SMB2_CREATE, 6, 5)
        );
        assert!(m.complete);
        let Ok(Smb2Body::CreateRequest {
            name,
            desired_access,
            create_disposition,
            ..
        }) = m.body
        else {
            panic!()
        };
        assert_eq!(
            (name.as_str(), desired_access, create_disposition),
            ("srvsvc", 0x0012_019f, 1)
        );
        let m = parse_smb2_message(&resp[4..]).unwrap();
        assert!(m.header.is_response() && m.complete);
        let Ok(Smb2Body::CreateResponse {
            create_action,
            end_of_file,
            allocation_size,
            file_id,
            ..
        }) = m.body
        else {
            panic!()
        };
        assert_eq!((create_action, end_of_file, allocation_size), (1, 0, 4096));
        assert_eq!(&file_id[..], &resp[4 + 128..4 + 144]);
    }

    #[test]
    fn fuzz_smb2() {
        let mut seeds = messages();
        let mut chain = Vec::new();
        for m in messages().iter().take(4) {
            let mut m = m.clone();
            m.resize(m.len().next_multiple_of(8), 0);
            let n = m.len() as u32;
            m[20..24].copy_from_slice(&n.to_le_bytes());
            chain.extend_from_slice(&m);
        }
        seeds.push(chain);
        fuzz(&seeds, 40_000, |b| {
            let _ = parse_smb2_message(b);
            let _ = looks_like_smb2_header(b);
            let _ = looks_like_smb2_nbss(b);
            let _ = parse_transform_header(b);
            let _ = parse_compression_header(b);
            let _ = parse_nbss_header(b);
            let mut n = 0;
            for item in compound_messages(b) {
                n += 1;
                assert!(n <= b.len() / 64 + 1);
                if let Ok((_, m)) = item {
                    let _ = parse_smb2_message(m);
                }
            }
        });
    }
}
