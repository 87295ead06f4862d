//! SMB2/3 over NetBIOS session framing (direct TCP on 445, NBSS on 139):
//! requests matched to responses by MessageId, with compound chains, async
//! interim responses, credits, dialect, shares and file names.
//!
//! - [`framing`] turns each direction's reassembled chunks into NBSS frames
//!   (walking past snaplen cuts and gaps by the NBSS length, resynchronising
//!   on content when a frame header is lost) with their SMB2 messages
//!   decoded from the captured header bytes.
//! - [`Smb2Parser`] matches them. See `docs/transactions-smb2.md` for the
//!   rules and every known difference from tshark's `-z smb2,srt`.

mod framing;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};

// Looked up for every request (its FileId's name): a fast hasher (seeded
// per process).
use foldhash::HashMap;

use nastriage_proto::smb2_records::{
    nt_status_name, Smb2Body, Smb2Header, SMB2_CANCEL, SMB2_CLOSE, SMB2_CREATE, SMB2_FLAGS_SIGNED,
    SMB2_NEGOTIATE, SMB2_OPLOCK_BREAK, SMB2_READ, SMB2_TREE_CONNECT, SMB2_WRITE,
    STATUS_END_OF_FILE, STATUS_PENDING, STATUS_SUCCESS,
};

use self::framing::{Event, Framer, Member, Pdu, PduKind};
use super::{Ctx, StreamParser};
use crate::reassembly::Chunk;
use crate::transactions::{FileName, IdBytes, Name, OrphanReply, PduSpan, Transaction};

/// Outstanding requests kept per connection; beyond it the oldest is
/// emitted unanswered (and counted).
pub const MAX_PENDING: usize = 16384;
/// FileId → name entries per connection (oldest evicted, counted).
pub const MAX_FILES: usize = 65536;
/// TreeId → share entries per connection (oldest evicted, counted).
pub const MAX_TREES: usize = 4096;
/// Responses held while waiting for a request delivered late (out-of-order
/// reassembly); beyond it they become orphans at once.
const MAX_EARLY: usize = 1024;

/// SMB2 command name as tshark's `-z smb2,srt` table prints it.
pub fn op_name(cmd: u16) -> Name {
    const NAMES: [&str; 19] = [
        "Negotiate Protocol",
        "Session Setup",
        "Session Logoff",
        "Tree Connect",
        "Tree Disconnect",
        "Create",
        "Close",
        "Flush",
        "Read",
        "Write",
        "Lock",
        "Ioctl",
        "Cancel",
        "KeepAlive",
        "Find",
        "Notify",
        "GetInfo",
        "SetInfo",
        "Break",
    ];
    match NAMES.get(cmd as usize) {
        Some(n) => Name::Borrowed(n),
        None => format!("unknown-0x{cmd:02x}").into(),
    }
}

/// A map with a bound: inserting beyond it evicts the oldest entry.
struct Bounded<K, V> {
    /// Value and the generation of its insertion.
    map: HashMap<K, (V, u64)>,
    /// Insertion order; entries whose generation no longer matches the
    /// map's are stale and skipped.
    order: VecDeque<(K, u64)>,
    gen: u64,
    cap: usize,
    evicted: u64,
}

impl<K: std::hash::Hash + Eq + Clone, V> Bounded<K, V> {
    fn new(cap: usize) -> Self {
        Bounded {
            map: HashMap::default(),
            order: VecDeque::new(),
            gen: 0,
            cap,
            evicted: 0,
        }
    }
    fn get(&self, k: &K) -> Option<&V> {
        self.map.get(k).map(|(v, _)| v)
    }
    fn insert(&mut self, k: K, v: V) {
        self.gen += 1;
        self.map.insert(k.clone(), (v, self.gen));
        self.order.push_back((k, self.gen));
        while self.map.len() > self.cap {
            let Some((old, g)) = self.order.pop_front() else {
                break;
            };
            if self.map.get(&old).is_some_and(|(_, cur)| *cur == g) {
                self.map.remove(&old);
                self.evicted += 1;
            }
        }
        // Drop stale entries so `order` stays bounded too.
        if self.order.len() > 2 * self.cap.max(1) {
            let map = &self.map;
            self.order
                .retain(|(k, g)| map.get(k).is_some_and(|(_, cur)| cur == g));
        }
    }
    fn remove(&mut self, k: &K) {
        self.map.remove(k);
    }
}

/// A request waiting for its response.
#[derive(Default)]
pub(crate) struct Pending {
    tx: Transaction,
    /// TREE_CONNECT: the path, mapped to the TreeId of the response.
    tree_path: Option<FileName>,
    /// CREATE: the name, mapped to the FileId of the response.
    create_name: Option<FileName>,
    /// Related compound member operating on the previous member's FileId.
    chained_fid: bool,
}

/// What a frame says about all of its members.
#[derive(Debug, Clone, Copy, Default)]
struct FrameFlags {
    /// Part of the compound chain was lost or malformed.
    malformed: bool,
    /// The stream ended before the frame did.
    cut_at_end: bool,
}

/// Ids carried from one member of a compound chain to the next related one.
#[derive(Default)]
struct Chain {
    session: u64,
    tree: u32,
    file_id: Option<[u8; 16]>,
    file_name: Option<FileName>,
}

/// The request boxes shared by an analysis' SMB2 parsers.
pub(crate) type SpareRequests = super::spares::SharedSpares<Pending>;

pub struct Smb2Parser {
    stream: u32,
    framers: [Framer; 2],
    events: Vec<Event>,
    /// Boxed: a request is about 650 bytes, and a map's first node has
    /// room for eleven; most connections have a few outstanding (see
    /// `PendingCalls` of RPC).
    pending: BTreeMap<u64, Box<Pending>>,
    /// Boxes of logged requests, for the next requests of any connection.
    spare: SpareRequests,
    /// Responses whose request has not been seen (yet).
    early: BTreeMap<u64, (u8, Member, PduSpan, FrameFlags)>,
    files: Bounded<[u8; 16], FileName>,
    trees: Bounded<(u64, u32), FileName>,
    /// Negotiated dialect (e.g. 0x0311).
    dialect: Option<u16>,
    encrypted: u64,
    compressed: u64,
    smb1: u64,
    /// SMB1 messages other than the NEGOTIATE that opens a multi-protocol
    /// negotiation.
    smb1_other: u64,
    smb2_seen: bool,
    evicted_requests: u64,
    lost_members: u64,
}

const FID_NONE: [u8; 16] = [0xff; 16];
const SMB1_NEGOTIATE: u8 = 0x72;

fn session_bytes(id: u64) -> IdBytes {
    IdBytes::from_slice(&id.to_be_bytes())
}

fn body_file_id(b: &Smb2Body) -> Option<[u8; 16]> {
    match b {
        Smb2Body::CloseRequest { file_id, .. }
        | Smb2Body::FlushRequest { file_id }
        | Smb2Body::ReadRequest { file_id, .. }
        | Smb2Body::WriteRequest { file_id, .. }
        | Smb2Body::LockRequest { file_id, .. }
        | Smb2Body::IoctlRequest { file_id, .. }
        | Smb2Body::QueryDirectoryRequest { file_id, .. }
        | Smb2Body::ChangeNotifyRequest { file_id, .. }
        | Smb2Body::QueryInfoRequest { file_id, .. }
        | Smb2Body::SetInfoRequest { file_id, .. }
        | Smb2Body::OplockBreak { file_id, .. } => Some(*file_id),
        _ => None,
    }
}

impl Smb2Parser {
    /// Parser of TCP connection `stream`, with a pool of request boxes of
    /// its own.
    pub fn new(stream: u32) -> Self {
        Self::with_spares(stream, SpareRequests::default())
    }

    /// Parser of TCP connection `stream`, taking its request boxes from
    /// `spare` (shared by the connections of an analysis).
    pub(crate) fn with_spares(stream: u32, spare: SpareRequests) -> Self {
        Smb2Parser {
            stream,
            framers: [Framer::default(), Framer::default()],
            events: Vec::new(),
            pending: BTreeMap::new(),
            spare,
            early: BTreeMap::new(),
            files: Bounded::new(MAX_FILES),
            trees: Bounded::new(MAX_TREES),
            dialect: None,
            encrypted: 0,
            compressed: 0,
            smb1: 0,
            smb1_other: 0,
            smb2_seen: false,
            evicted_requests: 0,
            lost_members: 0,
        }
    }

    fn version(&self) -> (u32, u32) {
        match self.dialect {
            Some(d) => ((d >> 8).max(2) as u32, d as u32),
            None => (2, 0),
        }
    }

    fn drain(&mut self, dir: u8, ctx: &mut Ctx<'_>) {
        let mut events = std::mem::take(&mut self.events);
        for ev in events.drain(..) {
            match ev {
                Event::LostSync => ctx.log.resyncs += 1,
                Event::Pdu(p) => self.pdu(dir, p, ctx),
            }
        }
        self.events = events;
    }

    fn pdu(&mut self, dir: u8, p: Pdu, ctx: &mut Ctx<'_>) {
        match p.kind {
            PduKind::Encrypted => {
                self.encrypted += 1;
                ctx.log.encrypted_messages += 1;
                return;
            }
            PduKind::Compressed => {
                self.compressed += 1;
                ctx.log.compressed_messages += 1;
            }
            PduKind::Smb1 => {
                self.smb1 += 1;
                if p.smb1_command != Some(SMB1_NEGOTIATE) {
                    self.smb1_other += 1;
                }
                ctx.log.smb1_messages += 1;
                return;
            }
            PduKind::Control | PduKind::Unknown => {}
            PduKind::Smb2 => self.smb2_seen = true,
        }
        self.lost_members += p.lost_members as u64;
        let base = PduSpan {
            first_frame: p.first_frame,
            first_ts: p.first_ts,
            last_frame: p.last_frame,
            last_ts: p.last_ts,
            bytes: p.len,
            complete: p.complete,
        };
        let mut chain = Chain::default();
        let mut resp_chain: Option<[u8; 16]> = None;
        let flags = FrameFlags {
            malformed: p.malformed_chain || p.lost_members > 0,
            cut_at_end: p.cut_at_end,
        };
        for m in p.members {
            let span = PduSpan {
                bytes: m.len,
                complete: base.complete,
                ..base
            };
            if m.header.is_response() {
                self.response(dir, m, span, flags, &mut resp_chain, ctx);
            } else {
                self.request(dir, m, span, flags, &mut chain, ctx);
            }
        }
    }

    fn request(
        &mut self,
        dir: u8,
        m: Member,
        span: PduSpan,
        flags: FrameFlags,
        chain: &mut Chain,
        ctx: &mut Ctx<'_>,
    ) {
        let h = &m.header;
        let related = h.is_related();
        let session = if related && (h.session_id == u64::MAX || h.session_id == 0) {
            chain.session
        } else {
            h.session_id
        };
        let tree = if related && (h.tree_id == u32::MAX || h.tree_id == 0) {
            chain.tree
        } else {
            h.tree_id
        };
        let (version, minor_version) = self.version();
        // Made in its box (its transaction is about 570 bytes), where it
        // stays until logged.
        let mut pend = self.spare.borrow_mut().take();
        let tx = &mut pend.tx;
        tx.protocol = "smb2";
        tx.version = version;
        tx.minor_version = minor_version;
        tx.op = op_name(h.command);
        tx.op_code = h.command as u32;
        tx.stream = self.stream;
        tx.transport = "tcp";
        tx.request_dir = dir;
        tx.id = h.message_id;
        tx.request = span;
        tx.credit_charge = Some(h.credit_charge);
        tx.credit_request = Some(h.credits);
        tx.session = Some(session_bytes(session));
        tx.auth = (h.flags & SMB2_FLAGS_SIGNED != 0).then_some("signed");
        if flags.cut_at_end {
            tx.note = Some("request cut by the end of the capture".into());
        } else if !m.complete {
            tx.note = Some("request header bytes not captured".into());
        } else if flags.malformed {
            tx.note = Some("compound chain partly lost or malformed".into());
        }
        if h.async_id.is_none() {
            tx.share = self.share(session, tree);
        }
        let mut create_name = None;
        match &m.body {
            Some(Smb2Body::TreeConnectRequest { path, .. }) => {
                let path = FileName::from(path.as_str());
                tx.share = Some(path.clone());
                pend.tree_path = Some(path);
            }
            Some(Smb2Body::CreateRequest { name, .. }) => {
                let n: FileName = if name.is_empty() {
                    "\\".into()
                } else {
                    name.as_str().into()
                };
                tx.file_name = Some(n.clone());
                create_name = Some(n);
            }
            Some(b) => {
                if let Some(fid) = body_file_id(b) {
                    if fid == FID_NONE && related {
                        pend.chained_fid = true;
                        tx.file_handle = chain.file_id.map(|f| IdBytes::from_slice(&f));
                        tx.file_name = chain.file_name.clone();
                    } else {
                        tx.file_handle = Some(IdBytes::from_slice(&fid));
                        tx.file_name = self.files.get(&fid).cloned();
                    }
                }
                match b {
                    Smb2Body::ReadRequest { length, offset, .. } => {
                        tx.offset = Some(*offset);
                        tx.count = Some(*length as u64);
                    }
                    Smb2Body::WriteRequest { length, offset, .. } => {
                        tx.offset = Some(*offset);
                        tx.count = Some(*length as u64);
                    }
                    _ => {}
                }
            }
            None => {}
        }
        // Carry ids to the next related member (names are shared: no copy).
        chain.session = session;
        chain.tree = tree;
        if create_name.is_some() {
            chain.file_id = None;
            chain.file_name = create_name.clone();
        } else if !pend.chained_fid {
            chain.file_id = tx.file_handle.as_deref().and_then(|f| f.try_into().ok());
            chain.file_name = tx.file_name.clone();
        }
        pend.create_name = create_name;

        if h.command == SMB2_CANCEL {
            // CANCEL has no response (the cancelled request gets one).
            pend.tx.note = Some("CANCEL has no response".into());
            ctx.log.push_from(&mut pend.tx);
            self.spare.borrow_mut().give(pend);
            return;
        }
        let id = h.message_id;
        if let Some(p) = self.pending.get_mut(&id) {
            // The same MessageId again before its response.
            p.tx.retransmissions += 1;
            self.spare.borrow_mut().give(pend);
            return;
        }
        // A response delivered before its request (out-of-order data).
        if let Some((rdir, rm, rspan, rflags)) = self.early.remove(&id) {
            if rdir != dir && rspan.last_ts >= pend.tx.request.first_ts {
                pend.tx
                    .note
                    .get_or_insert_with(|| "response reassembled before its request".to_string());
                self.pending.insert(id, pend);
                let mut rc = None;
                self.response(rdir, rm, rspan, rflags, &mut rc, ctx);
                return;
            }
            self.orphan(rm.header, rspan, ctx);
        }
        if self.pending.len() >= MAX_PENDING {
            if let Some((_, mut old)) = self.pending.pop_first() {
                self.evicted_requests += 1;
                ctx.log.smb2_evicted_requests += 1;
                old.tx.note = Some("evicted: too many outstanding requests".into());
                ctx.log.push_from(&mut old.tx);
                self.spare.borrow_mut().give(old);
            }
        }
        self.pending.insert(id, pend);
    }

    fn share(&self, session: u64, tree: u32) -> Option<FileName> {
        self.trees.get(&(session, tree)).cloned()
    }

    fn orphan(&self, h: Smb2Header, span: PduSpan, ctx: &mut Ctx<'_>) {
        ctx.log.orphan_replies.push(OrphanReply {
            protocol: "smb2",
            stream: self.stream,
            id: h.message_id,
            reply: span,
            status: Some(h.status),
        });
    }

    fn response(
        &mut self,
        dir: u8,
        m: Member,
        span: PduSpan,
        flags: FrameFlags,
        chain_fid: &mut Option<[u8; 16]>,
        ctx: &mut Ctx<'_>,
    ) {
        let h = m.header;
        // Oplock/lease break notifications are not responses to anything.
        if h.command == SMB2_OPLOCK_BREAK && h.message_id == u64::MAX {
            return;
        }
        let interim = h.is_async() && h.status == STATUS_PENDING;
        let Some(p) = self.pending.get_mut(&h.message_id) else {
            if interim {
                self.orphan(h, span, ctx);
            } else if self.early.len() < MAX_EARLY && !self.early.contains_key(&h.message_id) {
                self.early.insert(h.message_id, (dir, m, span, flags));
            } else {
                self.orphan(h, span, ctx);
            }
            return;
        };
        let grant = p.tx.credit_grant.unwrap_or(0).saturating_add(h.credits);
        p.tx.credit_grant = Some(grant);
        if interim {
            // Kept if no final response follows (e.g. a CHANGE_NOTIFY
            // still pending at the end of the capture).
            p.tx.interim_ts = Some(span.last_ts);
            p.tx.status = Some(STATUS_PENDING);
            p.tx.status_name = Some("STATUS_PENDING".into());
            return;
        }
        let Some(mut p) = self.pending.remove(&h.message_id) else {
            return;
        };
        let tx = &mut p.tx;
        tx.reply = Some(span);
        tx.status = Some(h.status);
        tx.status_name = Some(match nt_status_name(h.status) {
            Some(n) => n.into(),
            None => format!("0x{:08x}", h.status).into(),
        });
        if h.is_signed() && tx.auth.is_none() {
            tx.auth = Some("signed");
        }
        if flags.cut_at_end {
            tx.note = Some(
                "response cut by the end of the capture: reply times are its last captured byte"
                    .into(),
            );
        } else if !m.complete && tx.note.is_none() {
            tx.note = Some("response header bytes not captured".into());
        }
        // SESSION_SETUP: the session id is assigned by the response.
        if tx.session.as_deref() == Some(&[0u8; 8][..]) && h.session_id != 0 {
            tx.session = Some(session_bytes(h.session_id));
        }
        let ok = h.status == STATUS_SUCCESS;
        match (&m.body, h.command) {
            (Some(Smb2Body::NegotiateResponse { dialect, .. }), SMB2_NEGOTIATE) => {
                self.dialect = Some(*dialect);
                let (v, mv) = self.version();
                tx.version = v;
                tx.minor_version = mv;
            }
            (_, SMB2_TREE_CONNECT) if ok => {
                if let Some(path) = p.tree_path.take() {
                    let before = self.trees.evicted;
                    self.trees.insert((h.session_id, h.tree_id), path);
                    ctx.log.smb2_evicted_names += self.trees.evicted - before;
                }
            }
            (Some(Smb2Body::CreateResponse { file_id, .. }), SMB2_CREATE) => {
                tx.file_handle = Some(IdBytes::from_slice(file_id));
                *chain_fid = Some(*file_id);
                if let Some(name) = p.create_name.take() {
                    let before = self.files.evicted;
                    self.files.insert(*file_id, name);
                    ctx.log.smb2_evicted_names += self.files.evicted - before;
                }
            }
            (Some(Smb2Body::ReadResponse { data_length, .. }), SMB2_READ) => {
                tx.reply_count = Some(*data_length as u64);
                tx.eof = Some(false);
            }
            (_, SMB2_READ) if h.status == STATUS_END_OF_FILE => {
                tx.reply_count = Some(0);
                tx.eof = Some(true);
            }
            (Some(Smb2Body::WriteResponse { count, .. }), SMB2_WRITE) => {
                tx.reply_count = Some(*count as u64);
            }
            (_, SMB2_CLOSE) if ok => {
                if let Some(f) = tx.file_handle.as_deref().and_then(|f| f.try_into().ok()) {
                    self.files.remove(&f);
                }
            }
            _ => {}
        }
        if p.chained_fid && tx.file_handle.is_none() {
            tx.file_handle = chain_fid.map(|f| IdBytes::from_slice(&f));
        }
        ctx.log.push_from(tx);
        self.spare.borrow_mut().give(p);
    }

    fn warn(&self, ctx: &mut Ctx<'_>) {
        let s = self.stream;
        if self.encrypted > 0 {
            ctx.log.warnings.push(format!(
                "tcp.stream {s}: {} encrypted SMB3 message(s) (transform header): their commands cannot be decoded, only TCP-level analysis is possible for them",
                self.encrypted
            ));
        }
        if self.compressed > 0 {
            ctx.log.warnings.push(format!(
                "tcp.stream {s}: {} compressed SMB2 message(s): only headers sent uncompressed were decoded, the rest allows only TCP-level analysis",
                self.compressed
            ));
        }
        // An SMB1 NEGOTIATE answered in SMB2 is the usual multi-protocol
        // negotiation, not SMB1 traffic.
        if self.smb1_other > 0 || (self.smb1 > 0 && !self.smb2_seen) {
            ctx.log.warnings.push(format!(
                "tcp.stream {s}: {} SMB1 message(s): SMB1 is not decoded (no transactions), only TCP-level analysis is possible for them",
                self.smb1
            ));
        }
    }
}

impl StreamParser for Smb2Parser {
    fn chunk(&mut self, dir: u8, chunk: Chunk<'_>, ctx: &mut Ctx<'_>) {
        let d = (dir as usize).min(1);
        self.framers[d].chunk(chunk, &mut self.events);
        self.drain(dir, ctx);
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        for d in 0..2u8 {
            self.framers[d as usize].finish(&mut self.events);
            self.drain(d, ctx);
        }
        for (_, mut p) in std::mem::take(&mut self.pending) {
            ctx.log.push_from(&mut p.tx);
        }
        for (_, (_, m, span, _)) in std::mem::take(&mut self.early) {
            self.orphan(m.header, span, ctx);
        }
        self.warn(ctx);
    }
}

/// Content check for the start of an SMB connection that
/// `looks_like_smb2_nbss` does not cover: an NBSS session request (port
/// 139, alone in its segment) or an NBSS-framed SMB1 message (SMB1-only
/// connections, and the SMB1 NEGOTIATE that opens multi-protocol
/// negotiation). Such connections are parsed so that SMB1 is counted.
pub fn looks_like_smb_session(b: &[u8]) -> bool {
    use nastriage_proto::smb2_records::{
        detect_protocol, parse_nbss_header, SmbProtocol, NBSS_SESSION_MESSAGE, NBSS_SESSION_REQUEST,
    };
    let Ok(h) = parse_nbss_header(b) else {
        return false;
    };
    match h.msg_type {
        // Called and calling NetBIOS names: 34 bytes each at least.
        NBSS_SESSION_REQUEST => {
            h.flags == 0 && (68..=512).contains(&h.length) && b.len() == 4 + h.length as usize
        }
        NBSS_SESSION_MESSAGE => {
            h.length >= 32 && detect_protocol(b.get(4..).unwrap_or(&[])) == Some(SmbProtocol::Smb1)
        }
        _ => false,
    }
}
