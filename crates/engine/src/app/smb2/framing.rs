//! One direction of an SMB connection: NetBIOS session framing over the
//! reassembled stream, walking past holes by the NBSS length, collecting
//! only the bytes each message's header and fixed body need (never READ or
//! WRITE data), and resynchronising on content when the framing is lost.
//!
//! The output is one [`Pdu`] per NBSS frame, emitted once its last byte has
//! gone by (so its span is known), with the SMB2 messages of a compound
//! chain already decoded.

use nastriage_proto::smb2_records::{
    detect_protocol, looks_like_smb2_header, parse_compression_header, parse_nbss_header,
    parse_smb2_body, parse_smb2_header, Smb2Body, Smb2Header, SmbProtocol, COMPRESSION_HEADER_LEN,
    NBSS_HEADER_LEN, NBSS_KEEP_ALIVE, NBSS_SESSION_MESSAGE, NBSS_SESSION_REQUEST, SMB2_CREATE,
    SMB2_HEADER_LEN, SMB2_TREE_CONNECT, TRANSFORM_HEADER_LEN,
};

use smallvec::SmallVec;

use crate::reassembly::{Chunk, HoleKind};

/// Largest variable part (names) kept for a CREATE or TREE_CONNECT request.
const NAME_CAP: usize = 4096;
/// Most messages kept from one compound chain (the rest are counted).
pub(super) const MAX_MEMBERS: usize = 64;
/// Lookahead that content validation may need (NBSS + transform header up
/// to OriginalMessageSize).
const VALIDATE_LEN: usize = NBSS_HEADER_LEN + 40;
/// Largest NBSS payload of a control frame (session request etc.).
const MAX_CONTROL_LEN: u32 = 1024;

/// What an NBSS frame carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PduKind {
    /// SMB2 messages (one or a compound chain).
    Smb2,
    /// SMB3 transform header: encrypted.
    Encrypted,
    /// SMB 3.1.1 compression transform; members hold what the uncompressed
    /// prefix let us decode.
    Compressed,
    /// SMB1 (0xFF 'SMB').
    Smb1,
    /// NBSS control frame (session request/response, keep-alive).
    Control,
    /// The message header was not captured.
    Unknown,
}

/// One decoded SMB2 message of a frame.
#[derive(Debug, Clone)]
pub(super) struct Member {
    pub header: Smb2Header,
    pub body: Option<Smb2Body>,
    /// Message length (NextCommand, or up to the end of the frame).
    pub len: u64,
    /// The header and fixed body (and names we use) were captured.
    pub complete: bool,
}

/// One NBSS frame, emitted after its last byte.
#[derive(Debug, Clone)]
pub(super) struct Pdu {
    pub kind: PduKind,
    pub first_frame: u64,
    pub first_ts: i64,
    pub last_frame: u64,
    pub last_ts: i64,
    /// NBSS payload length.
    pub len: u64,
    /// Every byte we needed was captured.
    pub complete: bool,
    /// Inline: nearly every frame carries one message, and a vector of its
    /// own was an allocation per message (half of the SMB2 stage's).
    pub members: SmallVec<[Member; 1]>,
    /// Members beyond [`MAX_MEMBERS`] or whose header was lost.
    pub lost_members: u32,
    /// A compounded member had an invalid header or offset.
    pub malformed_chain: bool,
    /// SMB1: the command byte (0x72 = NEGOTIATE).
    pub smb1_command: Option<u8>,
    /// The stream ended before the frame did (end of connection or of the
    /// capture): `last_*` is the last byte seen.
    pub cut_at_end: bool,
}

/// What the framer reports besides frames.
#[derive(Debug)]
// (A frame inline: boxing it would be the allocation per message its
// members are inline to avoid; events are drained a chunk at a time.)
#[allow(clippy::large_enum_variant)]
pub(super) enum Event {
    Pdu(Pdu),
    /// The framing was lost (header in a hole or invalid content).
    LostSync,
}

/// A finished window's buffer is kept for the next window up to this
/// capacity (every header and fixed body, short names); a longer one (a
/// long CREATE name) is let go, so that no connection keeps kilobytes.
pub(super) const SPARE_CAP: usize = 512;

/// Bytes collected from stream offset `start`. Its buffer passes from one
/// window to the next and from frame to frame ([`Cur::spare`]): a new
/// buffer per window was two or three allocations per message, a third of
/// the SMB2 stage's, and bytes held in place made every move of a window
/// (several per message) a copy of them (`bench/README.md`).
struct Win {
    start: u64,
    want: usize,
    buf: Vec<u8>,
    cut: bool,
}

impl Win {
    fn new(start: u64, want: usize) -> Self {
        Win::with_buf(start, want, Vec::new())
    }

    /// A window from `start` in `buf` (emptied).
    fn with_buf(start: u64, want: usize, mut buf: Vec<u8>) -> Self {
        buf.clear();
        Win {
            start,
            want,
            buf,
            cut: false,
        }
    }

    /// This window's buffer, for the next one.
    fn into_spare(self) -> Vec<u8> {
        if self.buf.capacity() > SPARE_CAP {
            Vec::new()
        } else {
            self.buf
        }
    }
    fn next_wanted(&self) -> u64 {
        self.start + self.buf.len() as u64
    }
    fn full(&self) -> bool {
        self.buf.len() >= self.want
    }
}

enum Phase {
    /// The 4-byte NBSS header.
    Nbss,
    /// The first bytes of the payload: protocol id and first header.
    Lead,
    /// A member at `win.start`, of `len` bytes.
    Member {
        len: u64,
        header: Option<Smb2Header>,
    },
    /// Nothing more wanted from this frame.
    Skip,
}

struct Cur {
    start: u64,
    /// The NBSS header bytes (kept for a rescan).
    nbss: [u8; 4],
    /// Stream offset one past the frame, once the NBSS header is known.
    end: Option<u64>,
    pdu: Pdu,
    phase: Phase,
    win: Option<Win>,
    /// Members end here (the compression prefix; else `end`).
    members_end: u64,
    /// The last finished window's buffer (see [`Win`]).
    spare: Vec<u8>,
}

enum St {
    /// Scanning captured data for a frame start; `tail` holds the last
    /// bytes (starting at stream offset `tail_off`) that may begin one.
    Resync {
        tail: Vec<u8>,
        tail_off: u64,
        tail_frame: u64,
        tail_ts: i64,
    },
    Frame(Box<Cur>),
}

/// Result of checking whether a frame starts at the beginning of `b`.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Check {
    Valid,
    Invalid,
    NeedMore,
}

/// Strict content check used to resynchronise: an NBSS session message
/// holding an SMB2 header, a transform or a compression header whose sizes
/// agree with the NBSS length.
pub(super) fn check_frame_start(b: &[u8]) -> Check {
    let Some(&t) = b.first() else {
        return Check::NeedMore;
    };
    if t != NBSS_SESSION_MESSAGE {
        return Check::Invalid;
    }
    let Ok(h) = parse_nbss_header(b) else {
        return Check::NeedMore;
    };
    let rest = b.get(NBSS_HEADER_LEN..).unwrap_or(&[]);
    if rest.len() < 4 {
        return Check::NeedMore;
    }
    let len = h.length as usize;
    match detect_protocol(rest) {
        Some(SmbProtocol::Smb2) => {
            if rest.len() < 20 {
                Check::NeedMore
            } else if len >= SMB2_HEADER_LEN && looks_like_smb2_header(rest) {
                Check::Valid
            } else {
                Check::Invalid
            }
        }
        Some(SmbProtocol::Transform) => match rest.get(36..40) {
            None => Check::NeedMore,
            Some(o) => {
                let orig = u32::from_le_bytes([o[0], o[1], o[2], o[3]]) as usize;
                if len > TRANSFORM_HEADER_LEN && len == TRANSFORM_HEADER_LEN + orig {
                    Check::Valid
                } else {
                    Check::Invalid
                }
            }
        },
        Some(SmbProtocol::Compressed) => match parse_compression_header(rest) {
            Err(e) if e.is_incomplete() => Check::NeedMore,
            Ok(c) if len > COMPRESSION_HEADER_LEN && c.original_size < 1 << 24 => Check::Valid,
            _ => Check::Invalid,
        },
        _ => Check::Invalid,
    }
}

/// Fixed body size (StructureSize without its variable byte) of a command.
fn fixed_body(cmd: u16, response: bool) -> usize {
    use nastriage_proto::smb2_records::*;
    let s = if response {
        match cmd {
            SMB2_NEGOTIATE => 64,
            SMB2_SESSION_SETUP => 8,
            SMB2_TREE_CONNECT => 16,
            SMB2_CREATE => 88,
            SMB2_CLOSE => 60,
            SMB2_READ | SMB2_WRITE => 16,
            SMB2_IOCTL => 48,
            SMB2_QUERY_DIRECTORY | SMB2_CHANGE_NOTIFY | SMB2_QUERY_INFO => 8,
            SMB2_SET_INFO => 2,
            SMB2_OPLOCK_BREAK => 44,
            _ => 4,
        }
    } else {
        match cmd {
            SMB2_NEGOTIATE => 36,
            SMB2_SESSION_SETUP => 24,
            SMB2_TREE_CONNECT => 8,
            SMB2_CREATE => 56,
            SMB2_CLOSE | SMB2_FLUSH | SMB2_OPLOCK_BREAK => 24,
            SMB2_READ | SMB2_WRITE | SMB2_LOCK => 48,
            SMB2_IOCTL => 56,
            SMB2_QUERY_DIRECTORY | SMB2_CHANGE_NOTIFY | SMB2_SET_INFO => 32,
            SMB2_QUERY_INFO => 40,
            _ => 4,
        }
    };
    SMB2_HEADER_LEN + s
}

fn le16(b: &[u8], at: usize) -> Option<usize> {
    b.get(at..at + 2)
        .map(|x| u16::from_le_bytes([x[0], x[1]]) as usize)
}

/// Bytes of a member (from its header) that we need, given what is in
/// `buf` so far: header, fixed body, and the name of a CREATE or
/// TREE_CONNECT request.
fn needed(h: &Smb2Header, buf: &[u8]) -> usize {
    let fixed = fixed_body(h.command, h.is_response());
    if h.is_response() || buf.len() < fixed {
        return fixed;
    }
    let field = match h.command {
        SMB2_CREATE => SMB2_HEADER_LEN + 44,
        SMB2_TREE_CONNECT => SMB2_HEADER_LEN + 4,
        _ => return fixed,
    };
    match (le16(buf, field), le16(buf, field + 2)) {
        (Some(off), Some(len)) if off >= SMB2_HEADER_LEN && len > 0 => {
            fixed.max((off + len).min(fixed + NAME_CAP))
        }
        _ => fixed,
    }
}

impl Cur {
    fn new(start: u64, frame: u64, ts: i64) -> Box<Self> {
        Box::new(Cur::fresh(start, frame, ts))
    }

    fn fresh(start: u64, frame: u64, ts: i64) -> Self {
        Cur::fresh_with(start, frame, ts, Vec::new())
    }

    /// [`Cur::fresh`], its first window in `buf`.
    fn fresh_with(start: u64, frame: u64, ts: i64, buf: Vec<u8>) -> Self {
        Cur {
            start,
            nbss: [0; 4],
            end: None,
            pdu: empty_pdu(frame, ts),
            phase: Phase::Nbss,
            win: Some(Win::with_buf(start, NBSS_HEADER_LEN, buf)),
            members_end: u64::MAX,
            spare: Vec::new(),
        }
    }

    /// A window from `start` in the spare buffer.
    fn window(&mut self, start: u64, want: usize) -> Win {
        Win::with_buf(start, want, std::mem::take(&mut self.spare))
    }

    /// Bytes of this frame from its second byte, for a rescan after the
    /// content at its start turned out not to be a frame.
    fn rescan_bytes(&self, lead: &Win) -> (u64, Vec<u8>) {
        let mut v = Vec::with_capacity(3 + lead.buf.len());
        v.extend_from_slice(&self.nbss[1..]);
        v.extend_from_slice(&lead.buf);
        (self.start + 1, v)
    }
}

fn empty_pdu(frame: u64, ts: i64) -> Pdu {
    Pdu {
        kind: PduKind::Unknown,
        first_frame: frame,
        first_ts: ts,
        last_frame: frame,
        last_ts: ts,
        len: 0,
        complete: true,
        members: SmallVec::new(),
        lost_members: 0,
        malformed_chain: false,
        smb1_command: None,
        cut_at_end: false,
    }
}

/// What handling a finished window decided.
enum After {
    Go,
    /// Framing lost: rescan from stream offset `from`, starting with
    /// `bytes` (buffered bytes from there).
    Lost {
        from: u64,
        bytes: Vec<u8>,
    },
}

/// Progress of a frame over some bytes.
enum Step {
    /// Consumed up to this offset.
    To(u64),
    /// Framing lost after consuming up to `at`: rescan from `from` with the
    /// frame's buffered `bytes` (they end at `at`), then go on at `at`.
    Lost { from: u64, bytes: Vec<u8>, at: u64 },
}

pub(super) struct Framer {
    st: St,
    /// Offset of the next byte expected from the reassembler.
    next: u64,
    started: bool,
}

impl Default for Framer {
    fn default() -> Self {
        Framer {
            st: St::Resync {
                tail: Vec::new(),
                tail_off: 0,
                tail_frame: 0,
                tail_ts: 0,
            },
            next: 0,
            started: false,
        }
    }
}

impl Framer {
    /// Feed one chunk of this direction; frames and events go to `out`.
    pub fn chunk(&mut self, c: Chunk<'_>, out: &mut Vec<Event>) {
        match c {
            Chunk::Data {
                offset,
                bytes,
                frame,
                ts,
            } => {
                self.align(offset, frame, ts);
                self.data(offset, bytes, frame, ts, out);
                self.next = offset + bytes.len() as u64;
            }
            Chunk::Hole {
                offset,
                len,
                kind,
                frame,
                ts,
            } => {
                self.align(offset, frame, ts);
                let missing = kind == HoleKind::Missing;
                self.hole(offset, len, missing, frame, ts, out);
                self.next = offset + len;
            }
        }
    }

    /// The first chunk of a direction: expect a frame there (it is
    /// validated like any other; a capture that starts mid-stream
    /// resynchronises).
    fn align(&mut self, offset: u64, frame: u64, ts: i64) {
        if !self.started {
            self.started = true;
            self.next = offset;
            self.st = St::Frame(Cur::new(offset, frame, ts));
        }
    }

    /// End of the stream: a frame whose length is known is emitted, cut.
    pub fn finish(&mut self, out: &mut Vec<Event>) {
        if let St::Frame(cur) = &mut self.st {
            if cur.end.is_some() {
                if let Some(mut w) = cur.win.take() {
                    w.cut = true;
                    let _ = window_done(cur, w);
                }
                cur.pdu.complete = false;
                cur.pdu.cut_at_end = true;
                let pdu = std::mem::replace(&mut cur.pdu, empty_pdu(0, 0));
                out.push(Event::Pdu(pdu));
            }
        }
        self.st = St::Resync {
            tail: Vec::new(),
            tail_off: self.next,
            tail_frame: 0,
            tail_ts: 0,
        };
    }

    fn data(&mut self, off: u64, b: &[u8], frame: u64, ts: i64, out: &mut Vec<Event>) {
        let end = off + b.len() as u64;
        let mut pos = off;
        while pos < end {
            let rel = (pos - off) as usize;
            let step = match &mut self.st {
                St::Resync { .. } => {
                    pos = self.scan(pos, &b[rel..], frame, ts, out);
                    continue;
                }
                St::Frame(cur) => {
                    touch(cur, pos, frame, ts);
                    frame_data(cur, pos, &b[rel..])
                }
            };
            match step {
                Step::To(p) => {
                    pos = p;
                    self.maybe_done(pos, frame, ts, out);
                }
                Step::Lost { from, bytes, at } => {
                    // Rescanning only the buffered bytes (at most a header)
                    // keeps the recursion shallow; the rest of the chunk
                    // goes on in this loop.
                    self.lose(from, &bytes, frame, ts, out);
                    pos = pos.max(at).min(end);
                }
            }
        }
    }

    /// Emit the frame if `pos` is its end.
    fn maybe_done(&mut self, pos: u64, frame: u64, ts: i64, out: &mut Vec<Event>) {
        let St::Frame(cur) = &mut self.st else { return };
        let Some(end) = cur.end else { return };
        if pos < end {
            return;
        }
        if let Some(mut w) = cur.win.take() {
            // The frame ended before the window filled (sizes disagree).
            w.cut = true;
            let _ = window_done(cur, w);
        }
        // The next frame in the same box, with the last window's buffer.
        let buf = std::mem::take(&mut cur.spare);
        let done = std::mem::replace(&mut **cur, Cur::fresh_with(end, frame, ts, buf));
        out.push(Event::Pdu(done.pdu));
    }

    /// Framing lost: count it and rescan from `from` with `bytes`.
    fn lose(&mut self, from: u64, bytes: &[u8], frame: u64, ts: i64, out: &mut Vec<Event>) {
        out.push(Event::LostSync);
        self.st = St::Resync {
            tail: Vec::new(),
            tail_off: from,
            tail_frame: frame,
            tail_ts: ts,
        };
        if !bytes.is_empty() {
            self.data(from, bytes, frame, ts, out);
        }
    }

    /// Scan `b` (at stream offset `off`) for a frame start. Returns the
    /// offset up to which the bytes were consumed (the frame start when
    /// one is found in `b`).
    fn scan(&mut self, off: u64, b: &[u8], frame: u64, ts: i64, out: &mut Vec<Event>) -> u64 {
        let St::Resync {
            tail,
            tail_off,
            tail_frame,
            tail_ts,
        } = &mut self.st
        else {
            return off;
        };
        let b_end = off + b.len() as u64;
        // Positions inside the saved tail first (joined with new bytes).
        if !tail.is_empty() && *tail_off + tail.len() as u64 == off {
            let mut joined = std::mem::take(tail);
            let tail_len = joined.len();
            joined.extend_from_slice(&b[..b.len().min(VALIDATE_LEN)]);
            let (t_off, t_frame, t_ts) = (*tail_off, *tail_frame, *tail_ts);
            for j in 0..tail_len {
                match check_frame_start(&joined[j..]) {
                    Check::Valid => {
                        let start = t_off + j as u64;
                        self.st = St::Frame(Cur::new(start, t_frame, t_ts));
                        let pre = joined[j..tail_len].to_vec();
                        self.data(start, &pre, t_frame, t_ts, out);
                        return off;
                    }
                    Check::NeedMore => {
                        // `joined` holds all of `b`: keep it for later.
                        self.st = St::Resync {
                            tail: joined[j..].to_vec(),
                            tail_off: t_off + j as u64,
                            tail_frame: t_frame,
                            tail_ts: t_ts,
                        };
                        return b_end;
                    }
                    Check::Invalid => {}
                }
            }
        }
        let St::Resync {
            tail,
            tail_off,
            tail_frame,
            tail_ts,
        } = &mut self.st
        else {
            return off;
        };
        for j in 0..b.len() {
            // Quick reject: a session message type byte.
            if b[j] != NBSS_SESSION_MESSAGE {
                continue;
            }
            match check_frame_start(&b[j..]) {
                Check::Valid => {
                    let start = off + j as u64;
                    self.st = St::Frame(Cur::new(start, frame, ts));
                    return start;
                }
                Check::NeedMore => {
                    *tail = b[j..].to_vec();
                    *tail_off = off + j as u64;
                    *tail_frame = frame;
                    *tail_ts = ts;
                    return b_end;
                }
                Check::Invalid => {}
            }
        }
        tail.clear();
        *tail_off = b_end;
        b_end
    }

    /// `missing`: segments never captured (the chunk's frame is the one
    /// that proved the gap, not one that carried the bytes); else a snaplen
    /// cut of the chunk's own frame.
    fn hole(
        &mut self,
        off: u64,
        len: u64,
        missing: bool,
        frame: u64,
        ts: i64,
        out: &mut Vec<Event>,
    ) {
        let end = off + len;
        let mut pos = off;
        while pos < end {
            match &mut self.st {
                St::Resync { tail, tail_off, .. } => {
                    tail.clear();
                    *tail_off = end;
                    return;
                }
                St::Frame(cur) => {
                    // A gap only marks the frame's end when the frame
                    // ends inside it.
                    let ends_inside = cur.end.is_some_and(|e| e <= end);
                    if !missing || pos == cur.start || ends_inside {
                        touch(cur, pos, frame, ts);
                    }
                    let cur: &mut Cur = cur;
                    // Every window whose next byte falls in the hole is cut.
                    let mut lost = false;
                    while let Some(w) = cur.win.as_ref() {
                        let want = w.next_wanted();
                        if want >= end || cur.end.is_some_and(|e| want >= e) {
                            break;
                        }
                        let Some(mut w) = cur.win.take() else { break };
                        w.cut = true;
                        if let After::Lost { .. } = window_done(cur, w) {
                            lost = true;
                            break;
                        }
                    }
                    if lost {
                        // A header in the hole (or garbage before it):
                        // look for the next frame after the hole.
                        out.push(Event::LostSync);
                        self.st = St::Resync {
                            tail: Vec::new(),
                            tail_off: end,
                            tail_frame: frame,
                            tail_ts: ts,
                        };
                        return;
                    }
                    match cur.end {
                        Some(e) if e <= end => {
                            pos = e.max(pos);
                            self.maybe_done(pos, frame, ts, out);
                        }
                        _ => pos = end,
                    }
                }
            }
        }
    }
}

/// A chunk at `pos` holds bytes of the current frame: the first byte's
/// frame, and the latest frame holding any of its bytes (Wireshark
/// dissects a PDU when its last missing byte arrives: with out-of-order
/// segments that is not always the frame of the highest offset).
fn touch(cur: &mut Cur, pos: u64, frame: u64, ts: i64) {
    if pos == cur.start {
        cur.pdu.first_frame = frame;
        cur.pdu.first_ts = ts;
        cur.pdu.last_frame = frame;
        cur.pdu.last_ts = ts;
    } else if frame >= cur.pdu.last_frame {
        cur.pdu.last_frame = frame;
        cur.pdu.last_ts = ts;
    }
}

/// Feed captured bytes `b` at stream offset `pos` to the frame; stops at
/// the frame end.
fn frame_data(cur: &mut Cur, pos0: u64, b: &[u8]) -> Step {
    let end = pos0 + b.len() as u64;
    let mut pos = pos0;
    loop {
        let stop = end.min(cur.end.unwrap_or(u64::MAX));
        if pos >= stop {
            return Step::To(stop.max(pos));
        }
        let Some(w) = cur.win.as_mut() else {
            return Step::To(stop);
        };
        let want = w.next_wanted();
        if want >= stop {
            return Step::To(stop);
        }
        if want < pos {
            // Bytes the window needed went by (cannot happen in order).
            w.cut = true;
        } else {
            let from = (want - pos0) as usize;
            let n = (w.want - w.buf.len()).min((stop - want) as usize);
            w.buf.extend_from_slice(&b[from..from + n]);
            pos = want + n as u64;
            if !w.full() {
                return Step::To(pos);
            }
        }
        let Some(w) = cur.win.take() else {
            return Step::To(pos);
        };
        if let After::Lost { from, bytes } = window_done(cur, w) {
            return Step::Lost {
                from,
                bytes,
                at: pos,
            };
        }
    }
}

/// A window is full or cut: decode it and set the next one.
fn window_done(cur: &mut Cur, w: Win) -> After {
    if w.cut {
        cur.pdu.complete = false;
    }
    match std::mem::replace(&mut cur.phase, Phase::Skip) {
        Phase::Nbss => nbss_done(cur, w),
        Phase::Lead => lead_done(cur, w),
        Phase::Member { len, header } => member_window(cur, w, len, header),
        Phase::Skip => {
            cur.spare = w.into_spare();
            After::Go
        }
    }
}

fn nbss_done(cur: &mut Cur, w: Win) -> After {
    let b = &w.buf;
    if b.len() < NBSS_HEADER_LEN {
        return After::Lost {
            from: w.start + b.len() as u64,
            bytes: Vec::new(),
        };
    }
    let Ok(h) = parse_nbss_header(b) else {
        return After::Lost {
            from: w.start + 1,
            bytes: b[1..].to_vec(),
        };
    };
    cur.nbss.copy_from_slice(&b[..4]);
    let len = match h.msg_type {
        NBSS_SESSION_MESSAGE => h.length,
        NBSS_SESSION_REQUEST..=NBSS_KEEP_ALIVE
            if h.flags & 0xfe == 0 && h.length <= MAX_CONTROL_LEN =>
        {
            cur.pdu.kind = PduKind::Control;
            h.length
        }
        _ => {
            return After::Lost {
                from: w.start + 1,
                bytes: b[1..].to_vec(),
            }
        }
    };
    let end = cur.start + NBSS_HEADER_LEN as u64 + len as u64;
    cur.end = Some(end);
    cur.members_end = end;
    cur.pdu.len = len as u64;
    let start = w.start + NBSS_HEADER_LEN as u64;
    if h.msg_type == NBSS_SESSION_MESSAGE && len > 0 {
        cur.phase = Phase::Lead;
        let want = (len as usize).min(SMB2_HEADER_LEN);
        cur.win = Some(Win::with_buf(start, want, w.buf));
    } else {
        cur.spare = w.into_spare();
    }
    After::Go
}

fn lead_done(cur: &mut Cur, w: Win) -> After {
    let b = &w.buf;
    if b.len() < 4 {
        cur.pdu.complete = false;
        cur.pdu.lost_members += 1;
        return After::Go;
    }
    let lost = |cur: &Cur, w: &Win| {
        let (from, bytes) = cur.rescan_bytes(w);
        After::Lost { from, bytes }
    };
    match detect_protocol(b) {
        Some(SmbProtocol::Smb2) => {
            if (b.len() >= 20 && !looks_like_smb2_header(b)) || cur.pdu.len < SMB2_HEADER_LEN as u64
            {
                return lost(cur, &w);
            }
            cur.pdu.kind = PduKind::Smb2;
            let start = w.start;
            member_start(cur, start, Some(w))
        }
        Some(SmbProtocol::Transform) => {
            if cur.pdu.len <= TRANSFORM_HEADER_LEN as u64 {
                return lost(cur, &w);
            }
            cur.pdu.kind = PduKind::Encrypted;
            After::Go
        }
        Some(SmbProtocol::Compressed) => {
            if cur.pdu.len <= COMPRESSION_HEADER_LEN as u64 {
                return lost(cur, &w);
            }
            cur.pdu.kind = PduKind::Compressed;
            let Ok(c) = parse_compression_header(b) else {
                cur.pdu.complete = false;
                return After::Go;
            };
            // The uncompressed prefix: unchained Offset, or a chained first
            // payload sent with algorithm NONE. It may hold an SMB2 header.
            let chained = c.flags & 1 != 0;
            let prefix = if !chained || c.algorithm == 0 {
                c.offset_or_length as u64
            } else {
                0
            };
            if prefix < SMB2_HEADER_LEN as u64 {
                return After::Go;
            }
            let start = w.start + COMPRESSION_HEADER_LEN as u64;
            cur.members_end = (start + prefix).min(cur.end.unwrap_or(u64::MAX));
            // The lead already holds the first bytes of the prefix.
            let mut mw = Win::new(start, SMB2_HEADER_LEN);
            mw.buf = b[COMPRESSION_HEADER_LEN..].to_vec();
            mw.cut = w.cut;
            member_start(cur, start, Some(mw))
        }
        Some(SmbProtocol::Smb1) => {
            cur.pdu.kind = PduKind::Smb1;
            cur.pdu.smb1_command = b.get(4).copied();
            After::Go
        }
        None => lost(cur, &w),
    }
}

/// Begin a member at stream offset `start` (reusing `w` when it already
/// holds the member's first bytes).
fn member_start(cur: &mut Cur, start: u64, w: Option<Win>) -> After {
    let avail = cur.members_end.saturating_sub(start);
    if avail < SMB2_HEADER_LEN as u64 {
        cur.pdu.malformed_chain = true;
        return After::Go;
    }
    if cur.pdu.members.len() >= MAX_MEMBERS {
        cur.pdu.lost_members += 1;
        return After::Go;
    }
    let mut w = match w {
        Some(w) => w,
        None => cur.window(start, SMB2_HEADER_LEN),
    };
    w.want = SMB2_HEADER_LEN;
    cur.phase = Phase::Member {
        len: avail,
        header: None,
    };
    if w.full() || w.cut {
        return window_done(cur, w);
    }
    cur.win = Some(w);
    After::Go
}

fn member_window(cur: &mut Cur, mut w: Win, len: u64, header: Option<Smb2Header>) -> After {
    let header = match header {
        Some(h) => h,
        None if w.buf.len() < SMB2_HEADER_LEN => {
            // Header not captured: this member and the rest of the chain
            // are lost.
            cur.pdu.lost_members += 1;
            cur.pdu.complete = false;
            return After::Go;
        }
        None => match parse_smb2_header(&w.buf) {
            Ok(h) => h,
            Err(_) => {
                cur.pdu.malformed_chain = true;
                return After::Go;
            }
        },
    };
    let next = header.next_command as u64;
    let chained = next >= SMB2_HEADER_LEN as u64 && next < len;
    if next != 0 && !chained {
        cur.pdu.malformed_chain = true;
    }
    let mlen = if chained { next } else { len };
    // Extend the window to what this member needs.
    let need = needed(&header, &w.buf).min(mlen as usize);
    if !w.cut && w.buf.len() < need {
        w.want = need;
        cur.phase = Phase::Member {
            len,
            header: Some(header),
        };
        cur.win = Some(w);
        return After::Go;
    }
    let complete = w.buf.len() >= need;
    if !complete {
        cur.pdu.complete = false;
    }
    let body = parse_smb2_body(&header, &w.buf).ok().map(|(b, _)| b);
    cur.pdu.members.push(Member {
        header,
        body,
        len: mlen,
        complete,
    });
    let next_start = w.start + next;
    cur.spare = w.into_spare();
    if chained {
        return member_start(cur, next_start, None);
    }
    After::Go
}
