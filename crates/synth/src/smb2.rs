//! A minimal SMB2/3 (MS-SMB2) encoder: NetBIOS session framing, the 64-byte
//! header, and the bodies of the commands a file copy uses.
//!
//! SMB fixtures let the analyser's SMB layer be tested the same way as NFS:
//! requests and responses matched by MessageId (including asynchronous
//! STATUS_PENDING interim responses), credits, tree and session IDs, FileIds
//! from CREATE, and READ/WRITE offsets and lengths. Authentication is not
//! simulated: SESSION_SETUP carries a syntactically valid but minimal SPNEGO
//! token, enough for dissectors to parse without complaint. Messages are not
//! signed or encrypted.

/// Command codes.
pub mod cmd {
    pub const NEGOTIATE: u16 = 0x0000;
    pub const SESSION_SETUP: u16 = 0x0001;
    pub const LOGOFF: u16 = 0x0002;
    pub const TREE_CONNECT: u16 = 0x0003;
    pub const TREE_DISCONNECT: u16 = 0x0004;
    pub const CREATE: u16 = 0x0005;
    pub const CLOSE: u16 = 0x0006;
    pub const READ: u16 = 0x0008;
    pub const WRITE: u16 = 0x0009;
    pub const QUERY_INFO: u16 = 0x0010;
}

/// NTSTATUS values used here.
pub mod status {
    pub const SUCCESS: u32 = 0x0000_0000;
    pub const PENDING: u32 = 0x0000_0103;
    pub const MORE_PROCESSING_REQUIRED: u32 = 0xC000_0016;
    pub const END_OF_FILE: u32 = 0xC000_0011;
    pub const OBJECT_NAME_NOT_FOUND: u32 = 0xC000_0034;
}

/// Header flags.
pub mod flags {
    pub const SERVER_TO_REDIR: u32 = 0x0000_0001;
    pub const ASYNC_COMMAND: u32 = 0x0000_0002;
    pub const RELATED_OPERATIONS: u32 = 0x0000_0004;
    pub const SIGNED: u32 = 0x0000_0008;
}

/// Dialects.
pub const DIALECT_2_1: u16 = 0x0210;
pub const DIALECT_3_0_2: u16 = 0x0302;
pub const DIALECT_3_1_1: u16 = 0x0311;

/// CREATE dispositions.
pub mod disposition {
    pub const SUPERSEDE: u32 = 0;
    pub const OPEN: u32 = 1;
    pub const CREATE: u32 = 2;
    pub const OPEN_IF: u32 = 3;
    pub const OVERWRITE: u32 = 4;
    pub const OVERWRITE_IF: u32 = 5;
}

/// CREATE actions reported in the response.
pub mod create_action {
    pub const SUPERSEDED: u32 = 0;
    pub const OPENED: u32 = 1;
    pub const CREATED: u32 = 2;
    pub const OVERWRITTEN: u32 = 3;
}

/// Access mask bits for CREATE.
pub mod access {
    pub const FILE_READ_DATA: u32 = 0x0000_0001;
    pub const FILE_WRITE_DATA: u32 = 0x0000_0002;
    pub const FILE_READ_ATTRIBUTES: u32 = 0x0000_0080;
    pub const FILE_WRITE_ATTRIBUTES: u32 = 0x0000_0100;
    pub const SYNCHRONIZE: u32 = 0x0010_0000;
    pub const GENERIC_READ: u32 = 0x8000_0000;
    pub const GENERIC_WRITE: u32 = 0x4000_0000;
}

/// A FileId: persistent then volatile part.
pub type FileId = [u8; 16];

/// Fields of the 64-byte SMB2 header.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Header {
    pub command: u16,
    pub credit_charge: u16,
    /// CreditRequest in requests, CreditResponse in responses.
    pub credits: u16,
    /// NTSTATUS (responses; 0 in requests).
    pub status: u32,
    pub flags: u32,
    pub message_id: u64,
    pub tree_id: u32,
    pub session_id: u64,
    /// Set for asynchronous responses (with [`flags::ASYNC_COMMAND`]).
    pub async_id: Option<u64>,
}

impl Header {
    pub const LEN: usize = 64;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[0xFE, b'S', b'M', b'B']);
        out.extend_from_slice(&64u16.to_le_bytes());
        out.extend_from_slice(&self.credit_charge.to_le_bytes());
        out.extend_from_slice(&self.status.to_le_bytes());
        out.extend_from_slice(&self.command.to_le_bytes());
        out.extend_from_slice(&self.credits.to_le_bytes());
        let mut fl = self.flags;
        if self.async_id.is_some() {
            fl |= flags::ASYNC_COMMAND;
        }
        out.extend_from_slice(&fl.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes()); // NextCommand
        out.extend_from_slice(&self.message_id.to_le_bytes());
        match self.async_id {
            Some(a) => out.extend_from_slice(&a.to_le_bytes()),
            None => {
                out.extend_from_slice(&0x0000_FEFFu32.to_le_bytes()); // Reserved (ProcessId)
                out.extend_from_slice(&self.tree_id.to_le_bytes());
            }
        }
        out.extend_from_slice(&self.session_id.to_le_bytes());
        out.extend_from_slice(&[0u8; 16]); // Signature
    }
}

/// NetBIOS session service framing (RFC 1002 session message; for direct
/// TCP on 445 the first byte is 0 and the length has 24 bits).
pub fn nbss(msg: &[u8]) -> Vec<u8> {
    assert!(
        msg.len() < 1 << 24,
        "SMB2 message too long for NetBIOS framing"
    );
    let mut v = Vec::with_capacity(4 + msg.len());
    v.push(0);
    v.extend_from_slice(&(msg.len() as u32).to_be_bytes()[1..]);
    v.extend_from_slice(msg);
    v
}

/// A complete framed message: NetBIOS header, SMB2 header, body.
pub fn message(h: &Header, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(Header::LEN + body.len());
    h.encode(&mut m);
    m.extend_from_slice(body);
    nbss(&m)
}

/// UTF-16LE encoding of `s`.
pub fn utf16le(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect()
}

/// FILETIME (100 ns units since 1601) for a Unix time in ns.
pub fn filetime(unix_ns: i64) -> u64 {
    (unix_ns / 100 + 116_444_736_000_000_000) as u64
}

// -- Minimal SPNEGO tokens (DER) -----------------------------------------------

fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut v = vec![tag];
    let n = content.len();
    if n < 0x80 {
        v.push(n as u8);
    } else if n < 0x100 {
        v.extend_from_slice(&[0x81, n as u8]);
    } else {
        v.extend_from_slice(&[0x82, (n >> 8) as u8, n as u8]);
    }
    v.extend_from_slice(content);
    v
}

const OID_SPNEGO: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x02];
const OID_NTLMSSP: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0x37, 0x02, 0x02, 0x0a];

/// GSS-API wrapped SPNEGO negTokenInit offering NTLMSSP only.
pub fn spnego_init() -> Vec<u8> {
    let mech_list = der(0x30, &der(0x06, OID_NTLMSSP));
    let init = der(0x30, &der(0xa0, &mech_list));
    let mut inner = der(0x06, OID_SPNEGO);
    inner.extend(der(0xa0, &init));
    der(0x60, &inner)
}

/// SPNEGO negTokenResp with negState accept-completed.
pub fn spnego_accept() -> Vec<u8> {
    der(0xa1, &der(0x30, &der(0xa0, &[0x0a, 0x01, 0x00])))
}

// -- Bodies ---------------------------------------------------------------------

fn u16le(v: &mut Vec<u8>, x: u16) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn u32le(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn u64le(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_le_bytes());
}

/// Offset from the header start of a body byte at `body_pos`.
fn off(body_pos: usize) -> usize {
    Header::LEN + body_pos
}

fn pad8(v: &mut Vec<u8>) {
    while off(v.len()) & 7 != 0 {
        v.push(0);
    }
}

/// A PREAUTH_INTEGRITY_CAPABILITIES negotiate context (SHA-512, 32-byte salt).
fn preauth_context(salt: &[u8; 32]) -> Vec<u8> {
    let mut c = Vec::new();
    u16le(&mut c, 1);
    u16le(&mut c, 38);
    u32le(&mut c, 0);
    u16le(&mut c, 1);
    u16le(&mut c, 32);
    u16le(&mut c, 1);
    c.extend_from_slice(salt);
    c
}

/// NEGOTIATE request offering `dialects` (a 3.1.1 offer adds a
/// pre-authentication integrity context).
pub fn negotiate_request(dialects: &[u16], client_guid: [u8; 16], salt: [u8; 32]) -> Vec<u8> {
    let smb311 = dialects.contains(&DIALECT_3_1_1);
    let mut v = Vec::new();
    u16le(&mut v, 36);
    u16le(&mut v, dialects.len() as u16);
    u16le(&mut v, 1); // signing enabled
    u16le(&mut v, 0);
    u32le(&mut v, 0x7f);
    v.extend_from_slice(&client_guid);
    let ctx_field = v.len();
    u64le(&mut v, 0); // context offset/count, or ClientStartTime
    for d in dialects {
        u16le(&mut v, *d);
    }
    if smb311 {
        pad8(&mut v);
        let at = off(v.len()) as u32;
        v[ctx_field..ctx_field + 4].copy_from_slice(&at.to_le_bytes());
        v[ctx_field + 4..ctx_field + 6].copy_from_slice(&1u16.to_le_bytes());
        v.extend(preauth_context(&salt));
    }
    v
}

/// NEGOTIATE response selecting `dialect`.
pub fn negotiate_response(
    dialect: u16,
    server_guid: [u8; 16],
    now_ns: i64,
    boot_ns: i64,
    salt: [u8; 32],
) -> Vec<u8> {
    let smb311 = dialect == DIALECT_3_1_1;
    let blob = spnego_init();
    let mut v = Vec::new();
    u16le(&mut v, 65);
    u16le(&mut v, 1);
    u16le(&mut v, dialect);
    u16le(&mut v, smb311 as u16);
    v.extend_from_slice(&server_guid);
    u32le(&mut v, 0x2f);
    for _ in 0..3 {
        u32le(&mut v, 8 << 20); // max transact/read/write
    }
    u64le(&mut v, filetime(now_ns));
    u64le(&mut v, filetime(boot_ns));
    u16le(&mut v, off(64) as u16);
    u16le(&mut v, blob.len() as u16);
    let ctx_field = v.len();
    u32le(&mut v, 0);
    v.extend_from_slice(&blob);
    if smb311 {
        pad8(&mut v);
        let at = off(v.len()) as u32;
        v[ctx_field..ctx_field + 4].copy_from_slice(&at.to_le_bytes());
        v.extend(preauth_context(&salt));
    }
    v
}

/// SESSION_SETUP request with a minimal SPNEGO token.
pub fn session_setup_request() -> Vec<u8> {
    let blob = spnego_init();
    let mut v = Vec::new();
    u16le(&mut v, 25);
    v.push(0); // flags
    v.push(1); // security mode: signing enabled
    u32le(&mut v, 1); // capabilities: DFS
    u32le(&mut v, 0); // channel
    u16le(&mut v, off(24) as u16);
    u16le(&mut v, blob.len() as u16);
    u64le(&mut v, 0); // previous session
    v.extend_from_slice(&blob);
    v
}

/// SESSION_SETUP response accepting the session.
pub fn session_setup_response() -> Vec<u8> {
    let blob = spnego_accept();
    let mut v = Vec::new();
    u16le(&mut v, 9);
    u16le(&mut v, 0); // session flags
    u16le(&mut v, off(8) as u16);
    u16le(&mut v, blob.len() as u16);
    v.extend_from_slice(&blob);
    v
}

/// TREE_CONNECT request for a UNC path such as `\\server\share`.
pub fn tree_connect_request(unc: &str) -> Vec<u8> {
    let path = utf16le(unc);
    let mut v = Vec::new();
    u16le(&mut v, 9);
    u16le(&mut v, 0);
    u16le(&mut v, off(8) as u16);
    u16le(&mut v, path.len() as u16);
    v.extend_from_slice(&path);
    v
}

/// TREE_CONNECT response for a disk share.
pub fn tree_connect_response() -> Vec<u8> {
    let mut v = Vec::new();
    u16le(&mut v, 16);
    v.push(1); // disk
    v.push(0);
    u32le(&mut v, 0); // share flags
    u32le(&mut v, 0); // capabilities
    u32le(&mut v, 0x001f_01ff); // maximal access
    v
}

/// CREATE request for file `name` (relative to the share).
pub fn create_request(name: &str, desired_access: u32, disposition: u32) -> Vec<u8> {
    let name = utf16le(name);
    let mut v = Vec::new();
    u16le(&mut v, 57);
    v.push(0); // security flags
    v.push(0); // oplock: none
    u32le(&mut v, 2); // impersonation
    u64le(&mut v, 0);
    u64le(&mut v, 0);
    u32le(&mut v, desired_access);
    u32le(&mut v, 0x80); // FILE_ATTRIBUTE_NORMAL
    u32le(&mut v, 0x07); // share read|write|delete
    u32le(&mut v, disposition);
    u32le(&mut v, 0x40); // FILE_NON_DIRECTORY_FILE
    u16le(&mut v, off(56) as u16);
    u16le(&mut v, name.len() as u16);
    u32le(&mut v, 0);
    u32le(&mut v, 0);
    if name.is_empty() {
        v.push(0);
    } else {
        v.extend_from_slice(&name);
    }
    v
}

/// Timestamps and sizes reported by CREATE and CLOSE.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileInfo {
    pub creation_ns: i64,
    pub access_ns: i64,
    pub write_ns: i64,
    pub change_ns: i64,
    pub size: u64,
}

impl FileInfo {
    fn encode(&self, v: &mut Vec<u8>) {
        for t in [
            self.creation_ns,
            self.access_ns,
            self.write_ns,
            self.change_ns,
        ] {
            u64le(v, filetime(t));
        }
        u64le(v, self.size.div_ceil(4096) * 4096);
        u64le(v, self.size);
    }
}

/// CREATE response.
pub fn create_response(file_id: FileId, action: u32, info: &FileInfo) -> Vec<u8> {
    let mut v = Vec::new();
    u16le(&mut v, 89);
    v.push(0); // oplock
    v.push(0); // flags
    u32le(&mut v, action);
    info.encode(&mut v);
    u32le(&mut v, 0x80); // attributes
    u32le(&mut v, 0);
    v.extend_from_slice(&file_id);
    u32le(&mut v, 0);
    u32le(&mut v, 0);
    v
}

/// READ request.
pub fn read_request(file_id: FileId, offset: u64, length: u32) -> Vec<u8> {
    let mut v = Vec::new();
    u16le(&mut v, 49);
    v.push(0x50); // padding: data offset wanted in the response
    v.push(0);
    u32le(&mut v, length);
    u64le(&mut v, offset);
    v.extend_from_slice(&file_id);
    u32le(&mut v, 1); // minimum count
    u32le(&mut v, 0); // channel
    u32le(&mut v, 0); // remaining
    u16le(&mut v, 0);
    u16le(&mut v, 0);
    v.push(0);
    v
}

/// READ response carrying `data`.
pub fn read_response(data: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(16 + data.len());
    u16le(&mut v, 17);
    v.push(off(16) as u8);
    v.push(0);
    u32le(&mut v, data.len() as u32);
    u32le(&mut v, 0);
    u32le(&mut v, 0);
    v.extend_from_slice(data);
    v
}

/// WRITE request carrying `data`.
pub fn write_request(file_id: FileId, offset: u64, data: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(48 + data.len());
    u16le(&mut v, 49);
    u16le(&mut v, off(48) as u16);
    u32le(&mut v, data.len() as u32);
    u64le(&mut v, offset);
    v.extend_from_slice(&file_id);
    u32le(&mut v, 0); // channel
    u32le(&mut v, 0); // remaining
    u16le(&mut v, 0);
    u16le(&mut v, 0);
    u32le(&mut v, 0); // flags
    v.extend_from_slice(data);
    v
}

/// WRITE response for `count` bytes written.
pub fn write_response(count: u32) -> Vec<u8> {
    let mut v = Vec::new();
    u16le(&mut v, 17);
    u16le(&mut v, 0);
    u32le(&mut v, count);
    u32le(&mut v, 0);
    u16le(&mut v, 0);
    u16le(&mut v, 0);
    v
}

/// CLOSE request asking for the final attributes.
pub fn close_request(file_id: FileId) -> Vec<u8> {
    let mut v = Vec::new();
    u16le(&mut v, 24);
    u16le(&mut v, 1); // SMB2_CLOSE_FLAG_POSTQUERY_ATTRIB
    u32le(&mut v, 0);
    v.extend_from_slice(&file_id);
    v
}

/// CLOSE response with the file's attributes.
pub fn close_response(info: &FileInfo) -> Vec<u8> {
    let mut v = Vec::new();
    u16le(&mut v, 60);
    u16le(&mut v, 1);
    u32le(&mut v, 0);
    info.encode(&mut v);
    u32le(&mut v, 0x80);
    v
}

/// QUERY_INFO classes (InfoType SMB2_0_INFO_FILE).
pub mod file_info {
    pub const BASIC: u8 = 4;
    pub const STANDARD: u8 = 5;
    pub const NETWORK_OPEN: u8 = 34;
}

/// QUERY_INFO request for file information `class` (see [`file_info`]).
pub fn query_info_request(file_id: FileId, class: u8) -> Vec<u8> {
    let mut v = Vec::new();
    u16le(&mut v, 41);
    v.push(1); // SMB2_0_INFO_FILE
    v.push(class);
    u32le(&mut v, 4096); // output buffer length
    u16le(&mut v, 0); // input buffer offset
    u16le(&mut v, 0);
    u32le(&mut v, 0); // input buffer length
    u32le(&mut v, 0); // additional information
    u32le(&mut v, 0); // flags
    v.extend_from_slice(&file_id);
    v.push(0); // the one-byte buffer the structure size counts
    v
}

/// QUERY_INFO response for file information `class` about `info`.
pub fn query_info_response(class: u8, info: &FileInfo) -> Vec<u8> {
    let mut data = Vec::new();
    match class {
        file_info::BASIC => {
            for t in [
                info.creation_ns,
                info.access_ns,
                info.write_ns,
                info.change_ns,
            ] {
                u64le(&mut data, filetime(t));
            }
            u32le(&mut data, 0x80);
            u32le(&mut data, 0);
        }
        file_info::STANDARD => {
            u64le(&mut data, info.size.div_ceil(4096) * 4096);
            u64le(&mut data, info.size);
            u32le(&mut data, 1); // links
            data.push(0); // delete pending
            data.push(0); // directory
            u16le(&mut data, 0);
        }
        _ => {
            // FileNetworkOpenInformation.
            info.encode(&mut data);
            u32le(&mut data, 0x80);
            u32le(&mut data, 0);
        }
    }
    let mut v = Vec::with_capacity(8 + data.len());
    u16le(&mut v, 9);
    u16le(&mut v, off(8) as u16);
    u32le(&mut v, data.len() as u32);
    v.extend_from_slice(&data);
    v
}

/// The error response body, as sent in STATUS_PENDING interim responses.
pub fn error_response() -> Vec<u8> {
    vec![9, 0, 0, 0, 0, 0, 0, 0, 0]
}

/// Client-side bookkeeping: MessageIds (advanced by each request's credit
/// charge), session and tree IDs, and the credits the server granted.
#[derive(Debug, Clone, Default)]
pub struct Client {
    pub next_message_id: u64,
    pub session_id: u64,
    pub tree_id: u32,
    pub credits_requested: u16,
}

impl Client {
    pub fn new() -> Self {
        Client {
            credits_requested: 1,
            ..Client::default()
        }
    }

    /// Credit charge for a payload of `len` bytes (one per 64 KiB).
    pub fn charge(len: usize) -> u16 {
        len.div_ceil(65536).max(1) as u16
    }

    /// A request header for `command`, consuming MessageIds for `charge`.
    pub fn header(&mut self, command: u16, charge: u16) -> Header {
        let h = Header {
            command,
            credit_charge: charge,
            credits: self.credits_requested,
            message_id: self.next_message_id,
            tree_id: self.tree_id,
            session_id: self.session_id,
            ..Header::default()
        };
        self.next_message_id += charge.max(1) as u64;
        h
    }
}

/// The response header for request `req` with `status` and `credits`.
pub fn response_header(req: &Header, status: u32, credits: u16) -> Header {
    Header {
        status,
        credits,
        flags: flags::SERVER_TO_REDIR,
        ..req.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_64_bytes() {
        let mut v = Vec::new();
        Header::default().encode(&mut v);
        assert_eq!(v.len(), 64);
        let mut v = Vec::new();
        Header {
            async_id: Some(7),
            ..Header::default()
        }
        .encode(&mut v);
        assert_eq!(v.len(), 64);
        assert_eq!(
            u32::from_le_bytes(v[16..20].try_into().unwrap()) & flags::ASYNC_COMMAND,
            2
        );
    }

    #[test]
    fn fixed_body_sizes() {
        assert_eq!(read_request([0; 16], 0, 65536).len(), 49);
        assert_eq!(create_response([0; 16], 1, &FileInfo::default()).len(), 88);
        assert_eq!(close_response(&FileInfo::default()).len(), 60);
        assert_eq!(write_request([0; 16], 0, &[]).len(), 48);
        assert_eq!(close_request([0; 16]).len(), 24);
        assert_eq!(nbss(&[1, 2, 3]), vec![0, 0, 0, 3, 1, 2, 3]);
    }

    #[test]
    fn spnego_lengths_consistent() {
        let t = spnego_init();
        assert_eq!(t[0], 0x60);
        assert_eq!(t[1] as usize, t.len() - 2);
        let r = spnego_accept();
        assert_eq!(r[1] as usize, r.len() - 2);
    }
}
