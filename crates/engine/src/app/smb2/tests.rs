//! Chunk-level tests of the SMB2 parser: messages built with the synth
//! crate's encoders (and by hand where it has none), cut into chunks and
//! holes the way the reassembler delivers them.

use nastriage_synth::smb2::{
    self as s, close_request, close_response, create_request, create_response, error_response,
    negotiate_request, negotiate_response, read_request, read_response, session_setup_request,
    session_setup_response, tree_connect_request, tree_connect_response, write_request,
    write_response, FileInfo, Header,
};

use super::*;
use crate::reassembly::HoleKind;
use crate::transactions::{LogView, TransactionLog};

const FID: [u8; 16] = [0x11, 0, 0, 0, 0, 0, 0, 0, 0x22, 0, 0, 0, 0, 0, 0, 0];
const SESSION: u64 = 0x0000_0400_0000_0001;
const TREE: u32 = 5;

/// A parser with its log; feeds chunks with consecutive frame numbers
/// (frame n at time n µs).
struct H {
    p: Smb2Parser,
    log: TransactionLog,
    off: [u64; 2],
    frame: u64,
}

impl H {
    fn new() -> Self {
        H {
            p: Smb2Parser::new(7),
            log: TransactionLog::default(),
            off: [0; 2],
            frame: 0,
        }
    }

    fn feed(&mut self, dir: u8, c: Chunk<'_>) {
        let mut ctx = Ctx {
            stream: 7,
            log: &mut self.log,
        };
        self.p.chunk(dir, c, &mut ctx);
    }

    /// Captured bytes in direction `dir`, as one frame.
    fn data(&mut self, dir: u8, b: &[u8]) {
        self.frame += 1;
        let (frame, offset) = (self.frame, self.off[dir as usize]);
        self.off[dir as usize] += b.len() as u64;
        self.feed(
            dir,
            Chunk::Data {
                offset,
                bytes: b,
                frame,
                ts: frame as i64 * 1000,
            },
        );
    }

    /// `len` uncaptured bytes: in the current frame (snaplen cut) or in a
    /// new one (segments missing from the capture).
    fn hole(&mut self, dir: u8, len: u64, kind: HoleKind) {
        if kind == HoleKind::Missing {
            self.frame += 1;
        }
        let (frame, offset) = (self.frame, self.off[dir as usize]);
        self.off[dir as usize] += len;
        self.feed(
            dir,
            Chunk::Hole {
                offset,
                len,
                kind,
                frame,
                ts: frame as i64 * 1000,
            },
        );
    }

    /// One frame of which only the first `snap` bytes were captured.
    fn snap(&mut self, dir: u8, b: &[u8], snap: usize) {
        let n = snap.min(b.len());
        self.data(dir, &b[..n]);
        if n < b.len() {
            self.hole(dir, (b.len() - n) as u64, HoleKind::Snaplen);
        }
    }

    /// `b` cut into frames of `mss` bytes, each captured up to `snap`.
    fn segments(&mut self, dir: u8, b: &[u8], mss: usize, snap: usize) {
        for seg in b.chunks(mss) {
            self.snap(dir, seg, snap);
        }
    }

    fn finish(mut self) -> LogView {
        let mut ctx = Ctx {
            stream: 7,
            log: &mut self.log,
        };
        self.p.finish(&mut ctx);
        let mut view = LogView::new(self.log);
        view.transactions
            .sort_by_key(|t| (t.request.first_frame, t.id));
        view
    }
}

fn hdr(command: u16, message_id: u64) -> Header {
    Header {
        command,
        credit_charge: 1,
        credits: 8,
        message_id,
        tree_id: TREE,
        session_id: SESSION,
        ..Header::default()
    }
}

fn resp(req: &Header, status: u32) -> Header {
    s::response_header(req, status, 3)
}

/// An SMB2 message without NBSS framing.
fn raw(h: &Header, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::new();
    h.encode(&mut m);
    m.extend_from_slice(body);
    m
}

/// Messages chained by NextCommand (8-byte aligned) in one NBSS frame.
fn compound(msgs: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let mut m = m.clone();
        if i + 1 < msgs.len() {
            while m.len() % 8 != 0 {
                m.push(0);
            }
            let next = m.len() as u32;
            m[20..24].copy_from_slice(&next.to_le_bytes());
        }
        out.extend_from_slice(&m);
    }
    s::nbss(&out)
}

fn query_info_request(fid: [u8; 16]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&41u16.to_le_bytes());
    v.extend_from_slice(&[1, 5]); // file info, standard
    v.extend_from_slice(&4096u32.to_le_bytes());
    v.extend_from_slice(&[0; 4]); // input offset/reserved
    v.extend_from_slice(&0u32.to_le_bytes()); // input length
    v.extend_from_slice(&0u32.to_le_bytes()); // additional info
    v.extend_from_slice(&0u32.to_le_bytes()); // flags
    v.extend_from_slice(&fid);
    v.push(0);
    v
}

fn query_info_response(n: usize) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&9u16.to_le_bytes());
    v.extend_from_slice(&72u16.to_le_bytes());
    v.extend_from_slice(&(n as u32).to_le_bytes());
    v.extend(std::iter::repeat_n(0u8, n.max(1)));
    v
}

fn info() -> FileInfo {
    FileInfo {
        size: 1 << 20,
        ..FileInfo::default()
    }
}

/// The usual opening: NEGOTIATE, SESSION_SETUP, TREE_CONNECT.
fn open_session(h: &mut H, dialect: u16) {
    let mut q = hdr(s::cmd::NEGOTIATE, 0);
    q.session_id = 0;
    q.tree_id = 0;
    h.data(
        0,
        &s::message(&q, &negotiate_request(&[0x0202, 0x0311], [1; 16], [2; 32])),
    );
    let mut r = resp(&q, 0);
    r.session_id = 0;
    h.data(
        1,
        &s::message(&r, &negotiate_response(dialect, [3; 16], 0, 0, [4; 32])),
    );
    let mut q = hdr(s::cmd::SESSION_SETUP, 1);
    q.session_id = 0;
    q.tree_id = 0;
    h.data(0, &s::message(&q, &session_setup_request()));
    let mut r = resp(&q, 0);
    r.session_id = SESSION;
    h.data(1, &s::message(&r, &session_setup_response()));
    let mut q = hdr(s::cmd::TREE_CONNECT, 2);
    q.tree_id = 0;
    h.data(0, &s::message(&q, &tree_connect_request("\\\\srv\\share")));
    let r = resp(&hdr(s::cmd::TREE_CONNECT, 2), 0);
    h.data(1, &s::message(&r, &tree_connect_response()));
}

fn open_file(h: &mut H, id: u64, name: &str, fid: [u8; 16]) {
    let q = hdr(s::cmd::CREATE, id);
    h.data(0, &s::message(&q, &create_request(name, 0x1_0089, 1)));
    h.data(
        1,
        &s::message(&resp(&q, 0), &create_response(fid, 1, &info())),
    );
}

fn by_id(log: &LogView, id: u64) -> &Transaction {
    log.transactions
        .iter()
        .find(|t| t.id == id)
        .unwrap_or_else(|| panic!("no transaction {id}: {:#?}", log.transactions))
}

#[test]
fn session_tree_file_and_io() {
    let mut h = H::new();
    open_session(&mut h, 0x0311);
    open_file(&mut h, 3, "dir\\a.txt", FID);
    let q = hdr(s::cmd::READ, 4);
    h.data(0, &s::message(&q, &read_request(FID, 4096, 8192)));
    h.data(1, &s::message(&resp(&q, 0), &read_response(&[7; 8192])));
    let q = hdr(s::cmd::WRITE, 5);
    h.data(0, &s::message(&q, &write_request(FID, 0, &[9; 100])));
    h.data(1, &s::message(&resp(&q, 0), &write_response(100)));
    let mut q = hdr(s::cmd::CLOSE, 6);
    q.flags |= s::flags::SIGNED;
    h.data(0, &s::message(&q, &close_request(FID)));
    h.data(1, &s::message(&resp(&q, 0), &close_response(&info())));
    // The FileId is unmapped after CLOSE.
    let q = hdr(s::cmd::READ, 7);
    h.data(0, &s::message(&q, &read_request(FID, 0, 10)));
    h.data(1, &s::message(&resp(&q, 0xc000_0128), &error_response()));
    let log = h.finish();

    assert_eq!(log.transactions.len(), 8);
    let ops: Vec<&str> = log.transactions.iter().map(|t| &*t.op).collect();
    assert_eq!(
        ops,
        [
            "Negotiate Protocol",
            "Session Setup",
            "Tree Connect",
            "Create",
            "Read",
            "Write",
            "Close",
            "Read"
        ]
    );
    for t in &log.transactions {
        assert_eq!(t.protocol, "smb2");
        assert_eq!((t.version, t.minor_version), (3, 0x0311), "{}", t.op);
        assert_eq!(t.credit_charge, Some(1));
        assert_eq!(t.credit_request, Some(8));
        assert_eq!(t.credit_grant, Some(3));
        assert_eq!(t.status_name.is_some(), t.reply.is_some());
        assert!(t.request.complete && t.reply.is_some_and(|r| r.complete));
        assert_eq!(t.srt_ns(), Some(1000));
    }
    let ss = by_id(&log, 1);
    assert_eq!(ss.session.as_deref(), Some(&SESSION.to_be_bytes()[..]));
    assert_eq!(ss.status_name.as_deref(), Some("STATUS_SUCCESS"));
    assert_eq!(by_id(&log, 2).share.as_deref(), Some("\\\\srv\\share"));
    let c = by_id(&log, 3);
    assert_eq!(c.file_name.as_deref(), Some("dir\\a.txt"));
    assert_eq!(c.file_handle.as_deref(), Some(&FID[..]));
    assert_eq!(c.share.as_deref(), Some("\\\\srv\\share"));
    let r = by_id(&log, 4);
    assert_eq!(
        (r.offset, r.count, r.reply_count),
        (Some(4096), Some(8192), Some(8192))
    );
    assert_eq!(r.file_name.as_deref(), Some("dir\\a.txt"));
    assert_eq!(r.eof, Some(false));
    assert_eq!(r.request.bytes, 64 + 49);
    assert_eq!(r.reply.map(|p| p.bytes), Some(64 + 16 + 8192));
    let w = by_id(&log, 5);
    assert_eq!(
        (w.offset, w.count, w.reply_count),
        (Some(0), Some(100), Some(100))
    );
    let cl = by_id(&log, 6);
    assert_eq!(cl.file_name.as_deref(), Some("dir\\a.txt"));
    assert_eq!(cl.auth, Some("signed"));
    let late = by_id(&log, 7);
    assert_eq!(late.file_name, None);
    assert_eq!(late.status_name.as_deref(), Some("STATUS_FILE_CLOSED"));
    assert!(log.orphan_replies.is_empty() && log.warnings.is_empty());
    assert_eq!(log.resyncs, 0);
}

#[test]
fn dialect_before_negotiate_is_unknown() {
    let mut h = H::new();
    let q = hdr(s::cmd::READ, 40);
    h.data(0, &s::message(&q, &read_request(FID, 0, 10)));
    h.data(1, &s::message(&resp(&q, 0), &read_response(&[1; 10])));
    let log = h.finish();
    assert_eq!(
        (
            log.transactions[0].version,
            log.transactions[0].minor_version
        ),
        (2, 0)
    );
    let mut h = H::new();
    open_session(&mut h, 0x0202);
    let log = h.finish();
    assert!(log
        .transactions
        .iter()
        .all(|t| (t.version, t.minor_version) == (2, 0x0202)));
}

#[test]
fn compound_related_members_inherit_file() {
    let mut h = H::new();
    open_session(&mut h, 0x0302);
    let c = hdr(s::cmd::CREATE, 10);
    let mut q = hdr(0x10, 11);
    q.flags |= s::flags::RELATED_OPERATIONS;
    q.session_id = u64::MAX;
    q.tree_id = u32::MAX;
    let mut cl = hdr(s::cmd::CLOSE, 12);
    cl.flags |= s::flags::RELATED_OPERATIONS;
    let none = [0xff; 16];
    let req = compound(&[
        raw(&c, &create_request("x\\y.doc", 0x80, 1)),
        raw(&q, &query_info_request(none)),
        raw(&cl, &close_request(none)),
    ]);
    // The request arrives in two segments.
    h.data(0, &req[..150]);
    h.data(0, &req[150..]);
    let rsp = compound(&[
        raw(&resp(&c, 0), &create_response(FID, 1, &info())),
        raw(&resp(&q, 0), &query_info_response(24)),
        raw(&resp(&cl, 0), &close_response(&info())),
    ]);
    h.data(1, &rsp);
    let log = h.finish();
    let (a, b, d) = (by_id(&log, 10), by_id(&log, 11), by_id(&log, 12));
    assert_eq!((&*a.op, &*b.op, &*d.op), ("Create", "GetInfo", "Close"));
    // All members share the frame's span; bytes are each message's own.
    assert_eq!(a.request.first_frame, b.request.first_frame);
    assert_eq!(a.request.last_frame, d.request.last_frame);
    assert_eq!(a.request.last_frame, a.request.first_frame + 1);
    assert_eq!(
        a.reply,
        b.reply.map(|r| PduSpan {
            bytes: a.reply.unwrap().bytes,
            ..r
        })
    );
    let total: u64 = [a, b, d].iter().map(|t| t.request.bytes).sum();
    assert_eq!(total + 4, req.len() as u64);
    for t in [a, b, d] {
        assert_eq!(t.file_name.as_deref(), Some("x\\y.doc"), "{}", t.op);
        assert_eq!(t.share.as_deref(), Some("\\\\srv\\share"), "{}", t.op);
        assert_eq!(t.session.as_deref(), Some(&SESSION.to_be_bytes()[..]));
        assert_eq!(t.file_handle.as_deref(), Some(&FID[..]), "{}", t.op);
        assert!(t.note.is_none());
    }
}

/// A name longer than a window's buffer is kept for the next window, with
/// the request cut into small segments (a window filled across many
/// chunks), then many frames in a row in buffers passed from window to
/// window: every message's name, op and frames as for one frame alone.
#[test]
fn long_names_across_segments_and_many_frames() {
    let mut h = H::new();
    open_session(&mut h, 0x0311);
    let name: String = (0..600)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let name = format!("dir\\{name}.bin");
    let q = hdr(s::cmd::CREATE, 3);
    let req = s::message(&q, &create_request(&name, 0x1_0089, 1));
    assert!(req.len() > 4 + super::framing::SPARE_CAP + 100);
    h.segments(0, &req, 7, 7);
    h.data(
        1,
        &s::message(&resp(&q, 0), &create_response(FID, 1, &info())),
    );
    // Frames back to back, requests and responses in one chunk each.
    let mut reqs = Vec::new();
    let mut rsps = Vec::new();
    for id in 4..40 {
        let q = hdr(s::cmd::READ, id);
        reqs.extend(s::message(&q, &read_request(FID, id * 10, 10)));
        rsps.extend(s::message(&resp(&q, 0), &read_response(&[1; 10])));
    }
    h.data(0, &reqs);
    h.data(1, &rsps);
    let log = h.finish();
    assert_eq!(by_id(&log, 3).file_name.as_deref(), Some(name.as_str()));
    assert_eq!(by_id(&log, 3).request.bytes, req.len() as u64 - 4);
    for id in 4..40 {
        let r = by_id(&log, id);
        assert_eq!(r.op, "Read");
        assert_eq!(r.file_name.as_deref(), Some(name.as_str()));
        assert_eq!(
            (r.offset, r.count, r.reply_count),
            (Some(id * 10), Some(10), Some(10))
        );
        assert!(r.request.complete && r.reply.is_some_and(|p| p.complete));
    }
    assert_eq!(log.transactions.len(), 3 + 1 + 36);
    assert_eq!(log.resyncs, 0);
}

#[test]
fn async_interim_response() {
    let mut h = H::new();
    open_session(&mut h, 0x0311);
    let mut q = hdr(s::cmd::READ, 20);
    q.credit_charge = 2;
    h.data(0, &s::message(&q, &read_request(FID, 0, 131072)));
    let mut interim = resp(&q, s::status::PENDING);
    interim.async_id = Some(99);
    interim.credits = 2;
    h.data(1, &s::message(&interim, &error_response())); // frame +1
                                                         // Other traffic meanwhile (MessageIds 22.. after a charge of 2).
    let e = hdr(s::cmd::READ, 22);
    h.data(0, &s::message(&e, &read_request(FID, 0, 1)));
    h.data(1, &s::message(&resp(&e, 0), &read_response(&[1])));
    let mut fin = resp(&q, 0);
    fin.async_id = Some(99);
    fin.credits = 0;
    h.data(1, &s::message(&fin, &read_response(&[5; 1000])));
    let log = h.finish();
    let t = by_id(&log, 20);
    let r = t.reply.unwrap();
    assert_eq!(t.interim_ts, Some((t.request.last_frame as i64 + 1) * 1000));
    assert_eq!(r.last_frame, t.request.last_frame + 4);
    assert_eq!(t.srt_ns(), Some(4000));
    assert_eq!(t.credit_charge, Some(2));
    assert_eq!(t.credit_grant, Some(2));
    assert_eq!(t.reply_count, Some(1000));
    assert_eq!(t.status_name.as_deref(), Some("STATUS_SUCCESS"));
    assert_eq!(by_id(&log, 22).srt_ns(), Some(1000));
    assert!(log.orphan_replies.is_empty());
}

#[test]
fn credit_charge_consumes_message_ids() {
    let mut h = H::new();
    let mut a = hdr(s::cmd::READ, 100);
    a.credit_charge = 4;
    let b = hdr(s::cmd::READ, 104);
    // Two requests in one segment, responses in reverse order.
    let mut seg = s::message(&a, &read_request(FID, 0, 262144));
    seg.extend(s::message(&b, &read_request(FID, 262144, 10)));
    h.data(0, &seg);
    h.data(1, &s::message(&resp(&b, 0), &read_response(&[0; 10])));
    h.data(1, &s::message(&resp(&a, 0), &read_response(&[0; 300])));
    let log = h.finish();
    assert_eq!(log.transactions.len(), 2);
    assert_eq!(by_id(&log, 100).credit_charge, Some(4));
    assert_eq!(by_id(&log, 100).srt_ns(), Some(2000));
    assert_eq!(by_id(&log, 104).srt_ns(), Some(1000));
    assert_eq!(
        by_id(&log, 100).request.last_frame,
        by_id(&log, 104).request.last_frame
    );
}

/// READ data and WRITE data cut by a 190-byte snaplen (as `-s 256` on
/// Ethernet), over many segments: the headers are in the captured bytes.
#[test]
fn snaplen_holes_are_walked_by_length() {
    let build = |snap: usize| {
        let mut h = H::new();
        open_session(&mut h, 0x0210);
        open_file(&mut h, 3, "big.bin", FID);
        let q = hdr(s::cmd::READ, 4);
        h.segments(0, &s::message(&q, &read_request(FID, 0, 65536)), 1448, snap);
        h.segments(
            1,
            &s::message(&resp(&q, 0), &read_response(&[3; 65536])),
            1448,
            snap,
        );
        let q = hdr(s::cmd::WRITE, 5);
        h.segments(
            0,
            &s::message(&q, &write_request(FID, 65536, &[4; 65536])),
            1448,
            snap,
        );
        h.segments(
            1,
            &s::message(&resp(&q, 0), &write_response(65536)),
            1448,
            snap,
        );
        let q = hdr(s::cmd::CLOSE, 6);
        h.segments(0, &s::message(&q, &close_request(FID)), 1448, snap);
        h.segments(
            1,
            &s::message(&resp(&q, 0), &close_response(&info())),
            1448,
            snap,
        );
        h.finish()
    };
    let full = build(usize::MAX);
    let cut = build(190);
    assert_eq!(cut.resyncs, 0);
    assert_eq!(full.transactions.len(), 7);
    assert_eq!(full.transactions.len(), cut.transactions.len());
    for (a, b) in full.transactions.iter().zip(&cut.transactions) {
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
    }
    let r = by_id(&cut, 4);
    assert_eq!((r.count, r.reply_count), (Some(65536), Some(65536)));
    assert!(r.reply.unwrap().complete);
    assert_eq!(
        r.reply.unwrap().last_frame - r.reply.unwrap().first_frame,
        45
    );
    assert_eq!(by_id(&cut, 5).count, Some(65536));
}

/// A name longer than the snaplen: the CREATE is matched, the name is
/// cut and the request flagged incomplete.
#[test]
fn snaplen_cut_in_needed_bytes_is_flagged() {
    let mut h = H::new();
    let name = "a-rather-long-directory-name\\and-a-long-file-name.txt";
    let q = hdr(s::cmd::CREATE, 3);
    h.snap(0, &s::message(&q, &create_request(name, 0x80, 1)), 150);
    h.data(
        1,
        &s::message(&resp(&q, 0), &create_response(FID, 1, &info())),
    );
    let log = h.finish();
    let t = by_id(&log, 3);
    assert!(!t.request.complete);
    assert!(t.reply.unwrap().complete);
    let got = t.file_name.as_deref().unwrap();
    assert!(name.starts_with(got) && got.len() < name.len(), "{got}");
}

/// Segments missing from the capture: a gap inside a READ's data is walked
/// by length; a gap that swallows a header makes the parser resynchronise
/// on the next valid frame.
#[test]
fn gaps_and_resync() {
    let mut h = H::new();
    let q = hdr(s::cmd::READ, 1);
    h.data(0, &s::message(&q, &read_request(FID, 0, 4000)));
    let r = s::message(&resp(&q, 0), &read_response(&[1; 4000]));
    h.data(1, &r[..1000]);
    h.hole(1, 2000, HoleKind::Missing);
    h.data(1, &r[3000..]);
    // Request 2 is lost with the start of request 3; 4 follows.
    let q2 = hdr(s::cmd::READ, 2);
    let q3 = hdr(s::cmd::WRITE, 3);
    let q4 = hdr(s::cmd::CLOSE, 4);
    let m2 = s::message(&q2, &read_request(FID, 0, 1));
    let m3 = s::message(
        &q3,
        &write_request(FID, 0, &[0x00, 0xfe, b'S', b'M', b'B', 0, 0, 0, 0, 0]),
    );
    let m4 = s::message(&q4, &close_request(FID));
    h.hole(0, (m2.len() + 20) as u64, HoleKind::Missing);
    h.data(0, &m3[20..]);
    h.data(0, &m4);
    for (q, body) in [
        (&q2, read_response(&[1])),
        (&q3, write_response(10)),
        (&q4, close_response(&info())),
    ] {
        h.data(1, &s::message(&resp(q, 0), &body));
    }
    let log = h.finish();
    assert_eq!(log.resyncs, 1);
    let ids: Vec<u64> = log.transactions.iter().map(|t| t.id).collect();
    assert_eq!(ids, [1, 4]);
    let t1 = by_id(&log, 1);
    assert_eq!(t1.reply_count, Some(4000));
    assert!(t1.reply.unwrap().complete);
    assert!(by_id(&log, 4).reply.is_some());
    let mut orphans: Vec<u64> = log.orphan_replies.iter().map(|o| o.id).collect();
    orphans.sort();
    assert_eq!(orphans, [2, 3]);
}

/// A capture that starts in the middle of a message.
#[test]
fn mid_stream_start() {
    let mut h = H::new();
    let q = hdr(s::cmd::WRITE, 8);
    let w = s::message(&q, &write_request(FID, 0, &[0xfe; 300]));
    let q2 = hdr(s::cmd::CLOSE, 9);
    let mut seg = w[100..].to_vec();
    seg.extend(s::message(&q2, &close_request(FID)));
    h.data(0, &seg);
    h.data(1, &s::message(&resp(&q, 0), &write_response(300)));
    h.data(1, &s::message(&resp(&q2, 0), &close_response(&info())));
    let log = h.finish();
    assert_eq!(log.resyncs, 1);
    assert_eq!(log.transactions.len(), 1);
    assert_eq!(log.transactions[0].id, 9);
    assert_eq!(log.orphan_replies.len(), 1);
}

/// Any split of the byte stream into chunks gives the same result.
#[test]
fn chunking_does_not_matter() {
    let mut msgs = Vec::new();
    let mut rsps = Vec::new();
    for i in 0..6u64 {
        let q = hdr(s::cmd::READ, i);
        msgs.extend(s::message(&q, &read_request(FID, i * 100, 100)));
        rsps.extend(s::message(&resp(&q, 0), &read_response(&[i as u8; 100])));
    }
    let run = |sizes: &[usize]| {
        let mut h = H::new();
        let mut at = 0;
        let mut k = 0;
        while at < msgs.len() {
            let n = sizes[k % sizes.len()].min(msgs.len() - at);
            h.data(0, &msgs[at..at + n]);
            at += n;
            k += 1;
        }
        h.data(1, &rsps);
        let log = h.finish();
        log.transactions
            .iter()
            .map(|t| (t.id, t.offset, t.reply_count, t.request.bytes))
            .collect::<Vec<_>>()
    };
    let whole = run(&[usize::MAX]);
    assert_eq!(whole.len(), 6);
    for sizes in [&[1][..], &[3, 7], &[64, 1, 2], &[113]] {
        assert_eq!(run(sizes), whole, "{sizes:?}");
    }
}

fn transform(len: usize, session: u64) -> Vec<u8> {
    let mut m = vec![0xfd, b'S', b'M', b'B'];
    m.extend_from_slice(&[0xaa; 32]); // signature, nonce
    m.extend_from_slice(&(len as u32).to_le_bytes());
    m.extend_from_slice(&[0, 0, 1, 0]);
    m.extend_from_slice(&session.to_le_bytes());
    m.extend(std::iter::repeat_n(0x5a, len));
    s::nbss(&m)
}

#[test]
fn encrypted_messages_are_counted_with_one_warning() {
    let mut h = H::new();
    open_session(&mut h, 0x0300);
    for i in 0..3 {
        h.data(0, &transform(100 + i, SESSION));
        h.data(1, &transform(200, SESSION));
    }
    let log = h.finish();
    assert_eq!(log.encrypted_messages, 6);
    assert_eq!(log.transactions.len(), 3);
    assert_eq!(log.warnings.len(), 1);
    assert!(log.warnings[0].contains("tcp.stream 7") && log.warnings[0].contains("encrypted"));
}

#[test]
fn compressed_with_uncompressed_header_is_decoded() {
    let mut h = H::new();
    let q = hdr(s::cmd::READ, 30);
    h.data(0, &s::message(&q, &read_request(FID, 0, 4096)));
    // Unchained compression: header and fixed body sent uncompressed
    // (Offset = 80), the data compressed.
    let plain = raw(&resp(&q, 0), &read_response(&[0; 4096]));
    let mut m = vec![0xfc, b'S', b'M', b'B'];
    m.extend_from_slice(&(plain.len() as u32).to_le_bytes());
    m.extend_from_slice(&1u16.to_le_bytes()); // LZNT1
    m.extend_from_slice(&0u16.to_le_bytes()); // unchained
    m.extend_from_slice(&80u32.to_le_bytes());
    m.extend_from_slice(&plain[..80]);
    m.extend_from_slice(&[0x33; 57]);
    h.data(1, &s::nbss(&m));
    let log = h.finish();
    assert_eq!(log.compressed_messages, 1);
    let t = by_id(&log, 30);
    assert_eq!(t.reply_count, Some(4096));
    assert_eq!(log.warnings.len(), 1);
}

fn smb1(cmd: u8) -> Vec<u8> {
    let mut m = vec![0xff, b'S', b'M', b'B', cmd];
    m.extend_from_slice(&[0; 27]);
    m.extend_from_slice(&[0, 2, 0]);
    s::nbss(&m)
}

#[test]
fn smb1_is_counted() {
    // Multi-protocol negotiation: an SMB1 NEGOTIATE answered in SMB2.
    let mut h = H::new();
    h.data(0, &smb1(0x72));
    let mut r = resp(&hdr(s::cmd::NEGOTIATE, 0), 0);
    r.session_id = 0;
    h.data(
        1,
        &s::message(&r, &negotiate_response(0x02ff, [3; 16], 0, 0, [4; 32])),
    );
    open_session(&mut h, 0x0311);
    let log = h.finish();
    assert_eq!(log.smb1_messages, 1);
    assert!(log.warnings.is_empty(), "{:?}", log.warnings);
    // The wildcard response has no SMB2 request: an orphan, as in tshark.
    assert_eq!(log.orphan_replies.len(), 1);
    assert_eq!(log.transactions.len(), 3);

    // SMB1 traffic proper.
    let mut h = H::new();
    h.data(0, &smb1(0x72));
    h.data(1, &smb1(0x72));
    h.data(0, &smb1(0x73));
    let log = h.finish();
    assert_eq!(log.smb1_messages, 3);
    assert_eq!(log.warnings.len(), 1);
    assert!(log.warnings[0].contains("SMB1"));
}

#[test]
fn nbss_control_frames_are_skipped() {
    let mut h = H::new();
    let mut req = vec![0x81, 0, 0, 68];
    req.extend_from_slice(&[0x20; 68]);
    h.data(0, &req);
    h.data(1, &[0x82, 0, 0, 0]);
    let q = hdr(s::cmd::CLOSE, 1);
    let mut seg = vec![0x85, 0, 0, 0];
    seg.extend(s::message(&q, &close_request(FID)));
    h.data(0, &seg);
    h.data(1, &s::message(&resp(&q, 0), &close_response(&info())));
    let log = h.finish();
    assert_eq!(log.transactions.len(), 1);
    assert_eq!(log.resyncs, 0);
    assert!(super::looks_like_smb_session(&req));
    assert!(super::looks_like_smb_session(&smb1(0x72)));
    assert!(!super::looks_like_smb_session(&[0x81, 0, 0, 68]));
}

#[test]
fn unmatched_and_unanswered() {
    let mut h = H::new();
    let q = hdr(s::cmd::READ, 1);
    h.data(0, &s::message(&q, &read_request(FID, 0, 1)));
    let other = hdr(s::cmd::READ, 77);
    h.data(1, &s::message(&resp(&other, 0), &read_response(&[1])));
    // CANCEL has no response by design; it is kept, with a note.
    let mut c = hdr(s::cmd::READ, 0);
    c.command = 0x0c;
    h.data(0, &s::message(&c, &[4, 0, 0, 0]));
    // An oplock break notification is not a response to anything.
    let mut brk = resp(&hdr(0x12, u64::MAX), 0);
    brk.session_id = 0;
    let mut body = vec![24, 0, 1, 0, 0, 0, 0, 0];
    body.extend_from_slice(&FID);
    h.data(1, &s::message(&brk, &body));
    let log = h.finish();
    assert_eq!(log.transactions.len(), 2);
    assert!(by_id(&log, 1).reply.is_none());
    assert_eq!(by_id(&log, 0).op, "Cancel");
    assert_eq!(log.orphan_replies.len(), 1);
    assert_eq!(log.orphan_replies[0].id, 77);
    assert_eq!(log.orphan_replies[0].protocol, "smb2");
}

/// A response reassembled before its request (the request direction was
/// held back by out-of-order segments) is still matched.
#[test]
fn response_before_request() {
    let mut h = H::new();
    let q = hdr(s::cmd::READ, 5);
    let qm = s::message(&q, &read_request(FID, 0, 1));
    h.frame = 10;
    h.data(1, &s::message(&resp(&q, 0), &read_response(&[1])));
    // The request's frames are earlier in the capture.
    h.frame = 1;
    h.data(0, &qm);
    let log = h.finish();
    assert_eq!(log.transactions.len(), 1);
    assert_eq!(log.transactions[0].srt_ns(), Some(9000));
    assert!(log.orphan_replies.is_empty());
}

#[test]
fn outstanding_requests_are_bounded() {
    let mut h = H::new();
    let mut seg = Vec::new();
    for i in 0..(MAX_PENDING as u64 + 10) {
        seg.extend(s::message(&hdr(s::cmd::READ, i), &read_request(FID, 0, 1)));
        if seg.len() > 60000 {
            h.data(0, &seg);
            seg.clear();
        }
    }
    h.data(0, &seg);
    let log = h.finish();
    assert_eq!(log.smb2_evicted_requests, 10);
    assert_eq!(log.transactions.len(), MAX_PENDING + 10);
    assert!(log.transactions.iter().all(|t| t.reply.is_none()));
}

#[test]
fn name_maps_are_bounded() {
    let mut m: Bounded<u32, String> = Bounded::new(3);
    for i in 0..10 {
        m.insert(i, i.to_string());
    }
    assert_eq!(m.evicted, 7);
    assert!(m.get(&9).is_some() && m.get(&6).is_none());
    for i in 0..100 {
        m.insert(7, i.to_string());
        m.remove(&8);
        m.insert(8, String::new());
    }
    assert!(m.order.len() <= 6);
}

/// xorshift64*, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Random chunking, snaplen cuts, gaps and corrupted bytes: never a panic,
/// and every frame is accounted for.
#[test]
fn fuzz_chunks_holes_and_corruption() {
    let mut stream = [Vec::new(), Vec::new()];
    let mut hh = H::new();
    open_session(&mut hh, 0x0311);
    let c = hdr(s::cmd::CREATE, 10);
    let mut q = hdr(0x10, 11);
    q.flags |= s::flags::RELATED_OPERATIONS;
    stream[0].extend(compound(&[
        raw(&c, &create_request("f", 0x80, 1)),
        raw(&q, &query_info_request([0xff; 16])),
    ]));
    stream[1].extend(compound(&[
        raw(&resp(&c, 0), &create_response(FID, 1, &info())),
        raw(&resp(&q, 0), &query_info_response(40)),
    ]));
    for i in 0..20u64 {
        let q = hdr(s::cmd::READ, 12 + i);
        stream[0].extend(s::message(&q, &read_request(FID, 0, 3000)));
        stream[1].extend(s::message(&resp(&q, 0), &read_response(&[0xfe; 3000])));
        let w = hdr(s::cmd::WRITE, 40 + i);
        stream[0].extend(s::message(
            &w,
            &write_request(FID, 0, b"\0\0\0\x40\xfeSMB@\0"),
        ));
        stream[1].extend(s::message(&resp(&w, 0), &write_response(10)));
    }
    stream[0].extend(transform(60, 1));
    stream[0].extend(smb1(0x72));
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..300 {
        let mut h = H::new();
        let mut pos = [0usize; 2];
        let mut bufs = stream.clone();
        // Corrupt a few bytes in some rounds.
        if round % 3 == 0 {
            for _ in 0..rng.below(20) {
                let d = rng.below(2) as usize;
                let at = rng.below(bufs[d].len() as u64) as usize;
                bufs[d][at] = rng.next() as u8;
            }
        }
        while pos[0] < bufs[0].len() || pos[1] < bufs[1].len() {
            let d = rng.below(2) as usize;
            if pos[d] >= bufs[d].len() {
                continue;
            }
            let n = (1 + rng.below(2000) as usize).min(bufs[d].len() - pos[d]);
            let seg = &bufs[d][pos[d]..pos[d] + n];
            match rng.below(10) {
                0 => h.hole(d as u8, n as u64, HoleKind::Missing),
                1 | 2 => h.snap(d as u8, seg, rng.below(300) as usize),
                _ => h.data(d as u8, seg),
            }
            pos[d] += n;
        }
        let log = h.finish();
        for t in &log.transactions {
            assert_eq!(t.protocol, "smb2");
            if let Some(r) = t.reply {
                assert!(r.last_frame >= r.first_frame);
            }
        }
    }
}

#[test]
fn check_frame_start_is_strict() {
    use super::framing::{check_frame_start, Check};
    let m = s::message(&hdr(s::cmd::READ, 1), &read_request(FID, 0, 1));
    assert_eq!(check_frame_start(&m), Check::Valid);
    for n in 0..24 {
        assert_eq!(check_frame_start(&m[..n]), Check::NeedMore, "{n}");
    }
    let mut bad = m.clone();
    bad[4 + 4] = 65; // structure size
    assert_eq!(check_frame_start(&bad), Check::Invalid);
    let t = transform(100, 1);
    assert_eq!(check_frame_start(&t), Check::Valid);
    let mut bad = t.clone();
    bad[3] = 99; // NBSS length disagrees with OriginalMessageSize
    assert_eq!(check_frame_start(&bad), Check::Invalid);
    assert_eq!(
        check_frame_start(&[0x85, 0, 0, 0, 0, 0, 0, 0]),
        Check::Invalid
    );
}

/// With out-of-order segments the bytes after a gap may have been captured
/// before the bytes filling it: the frame is complete (and dissected by
/// Wireshark) in the latest frame holding any of its bytes. The frame that
/// proved a gap is not a frame that carried bytes.
#[test]
fn span_ends_at_the_latest_frame_holding_its_bytes() {
    let mut h = H::new();
    let q = hdr(s::cmd::READ, 1);
    h.data(0, &s::message(&q, &read_request(FID, 0, 3000))); // frame 1
    let r = s::message(&resp(&q, 0), &read_response(&[1; 3000]));
    let tail_frame = 2;
    // Frame 2: the tail (buffered by the reassembler), delivered after
    // frame 4 fills the gap at the start.
    h.frame = 4;
    h.data(1, &r[..1500]);
    let off = h.off[1];
    h.off[1] += (r.len() - 1500) as u64;
    h.feed(
        1,
        Chunk::Data {
            offset: off,
            bytes: &r[1500..],
            frame: tail_frame,
            ts: tail_frame as i64 * 1000,
        },
    );
    // Request 2: its middle is missing, proved by an ACK in frame 9; its
    // last bytes were captured in frame 6.
    let q2 = hdr(s::cmd::WRITE, 2);
    let w = s::message(&q2, &write_request(FID, 0, &[2; 3000]));
    h.frame = 5;
    h.data(0, &w[..1000]);
    h.frame = 8;
    h.hole(0, 1000, HoleKind::Missing); // frame 9
    let off = h.off[0];
    h.off[0] += (w.len() - 2000) as u64;
    h.feed(
        0,
        Chunk::Data {
            offset: off,
            bytes: &w[2000..],
            frame: 6,
            ts: 6000,
        },
    );
    h.data(1, &s::message(&resp(&q2, 0), &write_response(3000))); // frame 10
    let log = h.finish();
    let t = by_id(&log, 1);
    let rs = t.reply.unwrap();
    assert_eq!((rs.first_frame, rs.last_frame), (5, 5));
    let t2 = by_id(&log, 2);
    assert_eq!((t2.request.first_frame, t2.request.last_frame), (6, 6));
    assert!(t2.request.complete);
}

/// A response still streaming when the capture ends: matched (its header
/// and status were seen), flagged incomplete, with a note.
#[test]
fn response_cut_by_the_end_of_the_capture() {
    let mut h = H::new();
    let q = hdr(s::cmd::READ, 9);
    h.data(0, &s::message(&q, &read_request(FID, 0, 1 << 20)));
    let r = s::message(&resp(&q, 0), &read_response(&vec![0; 1 << 20]));
    h.segments(1, &r[..100_000], 9000, usize::MAX);
    let log = h.finish();
    let t = by_id(&log, 9);
    let rs = t.reply.unwrap();
    assert!(!rs.complete);
    assert_eq!(rs.last_frame, rs.first_frame + 11);
    assert_eq!(t.reply_count, Some(1 << 20));
    assert!(t.note.as_deref().unwrap().contains("end of the capture"));
}

/// Framing lost again and again inside one large chunk: each loss rescans
/// only the buffered header bytes, so depth and work stay bounded.
#[test]
fn many_losses_in_one_chunk() {
    let mut chunk = Vec::new();
    for i in 0..1000u64 {
        chunk.extend(s::message(&hdr(s::cmd::CLOSE, i), &close_request(FID)));
        chunk.extend_from_slice(&[0, 0, 0, 9, 1, 2, 3]); // not a frame
    }
    let mut h = H::new();
    h.data(0, &chunk);
    let log = h.finish();
    assert_eq!(log.transactions.len(), 1000);
    // The last garbage reads as an NBSS header whose 9 bytes never come:
    // nothing proves it wrong before the stream ends.
    assert_eq!(log.resyncs, 999);
}
