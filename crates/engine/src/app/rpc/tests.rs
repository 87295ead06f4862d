//! Chunk-level tests of the RPC parser: byte streams built with the synth
//! crate's encoders, cut into chunks and holes the way the reassembler
//! delivers them.

use std::net::{IpAddr, Ipv4Addr};

use nastriage_synth::nfs3::{Call, FileHandle, Server, Stable};
use nastriage_synth::rpc::{
    encode_call, encode_reply, encode_reply_success, record_mark, record_mark_fragments, AuthSys,
    Xdr,
};

use super::*;
use crate::reassembly::HoleKind;
use crate::transactions::LogView;

const NFS: u32 = 100003;

fn cred() -> AuthSys {
    AuthSys::new("client", 1000, 1000)
}

/// A parser with its log; feeds chunks with consecutive frame numbers.
struct H {
    p: RpcParser,
    log: TransactionLog,
    off: [u64; 2],
    frame: u64,
}

impl H {
    fn new() -> Self {
        H {
            p: RpcParser::new(7, SharedRef::default()),
            log: TransactionLog::default(),
            off: [0; 2],
            frame: 0,
        }
    }

    fn ctx(&mut self) -> Ctx<'_> {
        Ctx {
            stream: 7,
            log: &mut self.log,
        }
    }

    /// Captured bytes in direction `dir`, as one frame.
    fn data(&mut self, dir: u8, b: &[u8]) {
        self.frame += 1;
        let (frame, off) = (self.frame, self.off[dir as usize]);
        self.off[dir as usize] += b.len() as u64;
        let c = Chunk::Data {
            offset: off,
            bytes: b,
            frame,
            ts: frame as i64 * 1000,
        };
        let mut p = std::mem::replace(&mut self.p, RpcParser::new(0, SharedRef::default()));
        p.chunk(dir, c, &mut self.ctx());
        self.p = p;
    }

    /// `len` uncaptured bytes in direction `dir`, in the current frame
    /// (a snaplen cut) or a new one (a missing segment).
    fn hole(&mut self, dir: u8, len: u64, kind: HoleKind) {
        if kind == HoleKind::Missing {
            self.frame += 1;
        }
        let (frame, off) = (self.frame, self.off[dir as usize]);
        self.off[dir as usize] += len;
        let c = Chunk::Hole {
            offset: off,
            len,
            kind,
            frame,
            ts: frame as i64 * 1000,
        };
        let mut p = std::mem::replace(&mut self.p, RpcParser::new(0, SharedRef::default()));
        p.chunk(dir, c, &mut self.ctx());
        self.p = p;
    }

    /// A frame of `wire` bytes of which only the first `snap` are captured.
    fn snap(&mut self, dir: u8, b: &[u8], snap: usize) {
        let n = snap.min(b.len());
        self.data(dir, &b[..n]);
        if n < b.len() {
            self.hole(dir, (b.len() - n) as u64, HoleKind::Snaplen);
        }
    }

    fn finish(mut self) -> LogView {
        let mut p = std::mem::replace(&mut self.p, RpcParser::new(0, SharedRef::default()));
        p.finish(&mut self.ctx());
        let mut view = LogView::new(self.log);
        view.transactions.sort_by_key(|t| t.request.first_frame);
        view
    }
}

fn nfs3(xid: u32, c: &Call) -> Vec<u8> {
    encode_call(xid, NFS, 3, c.procedure(), &cred(), &c.encode_args())
}

fn nfs3_reply(xid: u32, s: &mut Server, c: &Call) -> Vec<u8> {
    encode_reply_success(xid, &s.handle(c))
}

fn server_with_file() -> (Server, FileHandle) {
    let mut s = Server::new(1, 1_700_000_000_000_000_000);
    let root = s.root();
    let f = s.add_file(&root, "data.bin", 1 << 20);
    (s, f)
}

#[test]
fn call_and_reply_fields() {
    let (mut s, fh) = server_with_file();
    let read = Call::Read {
        fh,
        offset: 4096,
        count: 512,
    };
    let mut h = H::new();
    h.data(0, &record_mark(&nfs3(1, &read)));
    h.data(1, &record_mark(&nfs3_reply(1, &mut s, &read)));
    let log = h.finish();
    assert_eq!(log.transactions.len(), 1);
    let t = &log.transactions[0];
    assert_eq!(
        (t.protocol, t.version, &*t.op, t.op_code),
        ("nfs", 3, "READ", 6)
    );
    assert_eq!(
        (t.offset, t.count, t.reply_count),
        (Some(4096), Some(512), Some(512))
    );
    assert_eq!(
        (t.status, t.status_name.as_deref()),
        (Some(0), Some("NFS3_OK"))
    );
    assert_eq!(t.eof, Some(false));
    assert_eq!(t.auth, Some("AUTH_SYS"));
    assert_eq!(t.file_handle.as_deref(), Some(&fh.0[..]));
    let (q, r) = (t.request, t.reply.unwrap());
    assert_eq!((q.first_frame, q.last_frame, r.first_frame), (1, 1, 2));
    assert!(q.complete && r.complete);
    assert_eq!(q.bytes, record_mark(&nfs3(1, &read)).len() as u64);
    assert_eq!(t.srt_ns(), Some(1000));
    assert!(log.orphan_replies.is_empty());
    assert_eq!(log.resyncs, 0);
}

#[test]
fn several_records_per_chunk_and_records_over_many_chunks() {
    let (mut s, fh) = server_with_file();
    let calls: Vec<Call> = (0..5)
        .map(|i| Call::Read {
            fh,
            offset: i * 100,
            count: 100,
        })
        .collect();
    let mut h = H::new();
    let mut all = Vec::new();
    for (i, c) in calls.iter().enumerate() {
        all.extend(record_mark(&nfs3(10 + i as u32, c)));
    }
    // All calls in one chunk.
    h.data(0, &all);
    // Replies byte by byte.
    let mut replies = Vec::new();
    for (i, c) in calls.iter().enumerate() {
        replies.extend(record_mark(&nfs3_reply(10 + i as u32, &mut s, c)));
    }
    for b in replies.chunks(1) {
        h.data(1, b);
    }
    let log = h.finish();
    assert_eq!(log.transactions.len(), 5);
    for (i, t) in log.transactions.iter().enumerate() {
        assert_eq!(t.id, 10 + i as u64);
        assert_eq!(t.offset, Some(i as u64 * 100));
        assert_eq!(t.reply_count, Some(100));
        let r = t.reply.unwrap();
        assert!(r.last_frame > r.first_frame, "reply spans frames");
        assert!(r.complete);
    }
    assert_eq!(log.resyncs, 0);
}

#[test]
fn multi_fragment_records() {
    let (mut s, fh) = server_with_file();
    let w = Call::Write {
        fh,
        offset: 0,
        stable: Stable::FileSync,
        data: vec![7; 3000],
    };
    let mut h = H::new();
    // In sync first (a scan only finds records whose first fragment holds
    // the RPC header).
    let g = Call::Getattr { fh };
    h.data(0, &record_mark(&nfs3(4, &g)));
    h.data(1, &record_mark(&nfs3_reply(4, &mut s, &g)));
    let call = nfs3(5, &w);
    let rec = record_mark_fragments(&call, 100);
    h.data(0, &rec);
    // Tiny fragments, split across chunks at odd places.
    let reply = record_mark_fragments(&nfs3_reply(5, &mut s, &w), 7);
    for b in reply.chunks(13) {
        h.data(1, b);
    }
    let log = h.finish();
    assert_eq!(log.transactions.len(), 2);
    let t = &log.transactions[1];
    assert_eq!((&*t.op, t.count, t.stable), ("WRITE", Some(3000), Some(2)));
    assert_eq!((t.reply_count, t.committed), (Some(3000), Some(2)));
    assert_eq!(t.request.bytes, rec.len() as u64);
    assert_eq!(t.reply.unwrap().bytes, reply.len() as u64);
}

#[test]
fn snaplen_holes_are_walked_by_record_marks() {
    let (mut s, fh) = server_with_file();
    let w = Call::Write {
        fh,
        offset: 65536,
        stable: Stable::Unstable,
        data: vec![1; 20000],
    };
    let r = Call::Read {
        fh,
        offset: 0,
        count: 30000,
    };
    let mut h = H::new();
    // WRITE call in 1448-byte segments cut at 200 bytes, then a READ call
    // in the same last segment as the WRITE's tail.
    let mut stream = record_mark(&nfs3(1, &w));
    stream.extend(record_mark(&nfs3(2, &r)));
    let boundary = record_mark(&nfs3(1, &w)).len();
    let mut pos = 0;
    for seg in stream.chunks(1448) {
        // Keep the segment holding the READ call's start fully captured.
        let has_read_start = pos <= boundary && boundary < pos + seg.len();
        h.snap(0, seg, if has_read_start { seg.len() } else { 200 });
        pos += seg.len();
    }
    // Each reply starts a segment (a server sends one reply per write).
    let write_reply = record_mark(&nfs3_reply(1, &mut s, &w));
    let read_reply = record_mark(&nfs3_reply(2, &mut s, &r));
    for seg in write_reply.chunks(1448).chain(read_reply.chunks(1448)) {
        h.snap(1, seg, 200);
    }
    let log = h.finish();
    assert_eq!(log.resyncs, 0, "record marks carry past the holes");
    assert_eq!(log.transactions.len(), 2);
    let (tw, tr) = (&log.transactions[0], &log.transactions[1]);
    assert_eq!(
        (&*tw.op, tw.count, tw.reply_count),
        ("WRITE", Some(20000), Some(20000))
    );
    assert!(
        tw.request.complete,
        "WRITE header captured; data is payload"
    );
    assert!(tw.request.last_frame > tw.request.first_frame);
    assert_eq!(
        (&*tr.op, tr.reply_count, tr.eof),
        ("READ", Some(30000), Some(false))
    );
    assert!(tr.reply.unwrap().complete);
    assert_eq!(tr.reply.unwrap().bytes, read_reply.len() as u64);
}

#[test]
fn mark_in_hole_resyncs_on_next_call_and_matching_reply() {
    let (mut s, fh) = server_with_file();
    let g = Call::Getattr { fh };
    let mut h = H::new();
    h.data(0, &record_mark(&nfs3(1, &g)));
    h.data(1, &record_mark(&nfs3_reply(1, &mut s, &g)));
    // A whole record lost (its mark in a missing gap).
    h.hole(0, record_mark(&nfs3(2, &g)).len() as u64, HoleKind::Missing);
    h.hole(
        1,
        record_mark(&nfs3_reply(2, &mut s, &g)).len() as u64,
        HoleKind::Missing,
    );
    // Next call starts mid-chunk after garbage-looking bytes.
    let mut b = vec![0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 9];
    b.extend(record_mark(&nfs3(3, &g)));
    h.data(0, &b);
    let mut b = vec![0x11; 10];
    b.extend(record_mark(&nfs3_reply(3, &mut s, &g)));
    h.data(1, &b);
    // And the parser is in sync again.
    h.data(0, &record_mark(&nfs3(4, &g)));
    h.data(1, &record_mark(&nfs3_reply(4, &mut s, &g)));
    let log = h.finish();
    let ids: Vec<u64> = log.transactions.iter().map(|t| t.id).collect();
    assert_eq!(ids, vec![1, 3, 4]);
    assert!(log.transactions.iter().all(|t| t.reply.is_some()));
    assert_eq!(log.resyncs, 2);
}

#[test]
fn resync_across_chunk_boundary_uses_carried_bytes() {
    let (mut s, fh) = server_with_file();
    let g = Call::Getattr { fh };
    let mut h = H::new();
    h.data(0, &record_mark(&nfs3(1, &g)));
    h.hole(0, 100, HoleKind::Missing);
    let mut b = vec![0x55; 6];
    b.extend(record_mark(&nfs3(2, &g)));
    // The call's header straddles two chunks.
    h.data(0, &b[..20]);
    h.data(0, &b[20..]);
    h.data(1, &record_mark(&nfs3_reply(2, &mut s, &g)));
    let log = h.finish();
    let t = log.transactions.iter().find(|t| t.id == 2).unwrap();
    assert!(t.reply.is_some());
    assert_eq!(
        t.request.first_frame, 3,
        "record starts in the carried chunk"
    );
    assert_eq!(log.resyncs, 1);
}

#[test]
fn missing_gap_inside_a_record_is_walked() {
    let (mut s, fh) = server_with_file();
    let r = Call::Read {
        fh,
        offset: 0,
        count: 8000,
    };
    let mut h = H::new();
    h.data(0, &record_mark(&nfs3(1, &r)));
    let reply = record_mark(&nfs3_reply(1, &mut s, &r));
    h.data(1, &reply[..1000]);
    h.hole(1, 3000, HoleKind::Missing);
    h.data(1, &reply[4000..]);
    h.data(0, &record_mark(&nfs3(2, &r)));
    h.data(1, &record_mark(&nfs3_reply(2, &mut s, &r)));
    let log = h.finish();
    assert_eq!(log.transactions.len(), 2);
    assert_eq!(log.resyncs, 0);
    assert!(log.transactions.iter().all(|t| t.reply_count == Some(8000)));
}

#[test]
fn retransmission_keeps_first_request_times() {
    let (mut s, fh) = server_with_file();
    let g = Call::Getattr { fh };
    let mut h = H::new();
    h.data(0, &record_mark(&nfs3(1, &g)));
    h.data(0, &record_mark(&nfs3(1, &g)));
    h.data(0, &record_mark(&nfs3(1, &g)));
    h.data(1, &record_mark(&nfs3_reply(1, &mut s, &g)));
    let log = h.finish();
    assert_eq!(log.transactions.len(), 1);
    let t = &log.transactions[0];
    assert_eq!((t.retransmissions, t.request.first_frame), (2, 1));
    assert_eq!(t.srt_ns(), Some(3000));
}

#[test]
fn unmatched_replies_and_unanswered_calls_are_kept() {
    let (mut s, fh) = server_with_file();
    let g = Call::Getattr { fh };
    let mut h = H::new();
    // A reply first (its call before the capture), at a segment boundary.
    h.data(1, &record_mark(&nfs3_reply(99, &mut s, &g)));
    h.data(0, &record_mark(&nfs3(1, &g)));
    h.data(0, &record_mark(&nfs3(2, &g)));
    h.data(1, &record_mark(&nfs3_reply(2, &mut s, &g)));
    let log = h.finish();
    assert_eq!(log.orphan_replies.len(), 1);
    assert_eq!(log.orphan_replies[0].id, 99);
    assert_eq!(log.transactions.len(), 2);
    assert!(log.transactions[0].reply.is_none());
    assert!(log.transactions[1].reply.is_some());
}

#[test]
fn rpc_errors_and_other_programs() {
    let mut h = H::new();
    let c = encode_call(
        2,
        100000,
        2,
        3,
        &cred(),
        &[0, 1, 0x86, 0xa3, 0, 0, 0, 3, 0, 0, 0, 6, 0, 0, 0, 0],
    );
    h.data(0, &record_mark(&c));
    h.data(1, &record_mark(&encode_reply_success(2, &[0, 0, 8, 1])));
    // A procedure the program does not have (once in sync).
    let c = encode_call(1, NFS, 3, 30, &cred(), &[]);
    h.data(0, &record_mark(&c));
    h.data(1, &record_mark(&encode_reply(1, 3, &[])));
    let log = h.finish();
    assert_eq!(log.transactions.len(), 2);
    assert_eq!(
        log.transactions[1].rpc_status.as_deref(),
        Some("PROC_UNAVAIL")
    );
    assert_eq!(log.transactions[1].op, "UNKNOWN");
    let p = &log.transactions[0];
    assert_eq!(
        (p.protocol, &*p.op, p.rpc_status.as_deref()),
        ("portmap", "GETPORT", None)
    );
}

#[test]
fn names_from_mount_lookup_and_readdirplus() {
    let (mut s, fh) = server_with_file();
    let root = s.root();
    let mut h = H::new();
    // MOUNT MNT /export → root handle.
    let mut args = Xdr::new();
    args.string("/export");
    h.data(
        0,
        &record_mark(&encode_call(1, 100005, 3, 1, &cred(), &args.buf)),
    );
    let mut res = Xdr::new();
    res.u32(0).opaque(&root.0).u32(1).u32(1);
    h.data(1, &record_mark(&encode_reply_success(1, &res.buf)));
    // LOOKUP data.bin in the root.
    let l = Call::Lookup {
        dir: root,
        name: "data.bin".into(),
    };
    h.data(0, &record_mark(&nfs3(2, &l)));
    h.data(1, &record_mark(&nfs3_reply(2, &mut s, &l)));
    let g = Call::Getattr { fh };
    h.data(0, &record_mark(&nfs3(3, &g)));
    h.data(1, &record_mark(&nfs3_reply(3, &mut s, &g)));
    // READDIRPLUS names a second file.
    let f2 = s.add_file(&root, "other.txt", 10);
    let rd = Call::Readdirplus {
        dir: root,
        cookie: 0,
        cookieverf: [0; 8],
        dircount: 4096,
        maxcount: 32768,
    };
    h.data(0, &record_mark(&nfs3(4, &rd)));
    h.data(1, &record_mark(&nfs3_reply(4, &mut s, &rd)));
    let g2 = Call::Getattr { fh: f2 };
    h.data(0, &record_mark(&nfs3(5, &g2)));
    h.data(1, &record_mark(&nfs3_reply(5, &mut s, &g2)));
    let log = h.finish();
    let names: Vec<Option<&str>> = log
        .transactions
        .iter()
        .map(|t| t.file_name.as_deref())
        .collect();
    assert_eq!(
        names,
        vec![
            Some("/export"),
            Some("/export/data.bin"),
            Some("/export/data.bin"),
            Some("/export"),
            Some("/export/other.txt")
        ]
    );
    assert_eq!(log.transactions[0].protocol, "mount");
    assert_eq!(log.transactions[0].status_name.as_deref(), Some("MNT3_OK"));
}

// ---- NFSv4 ---------------------------------------------------------------

const SESSION: [u8; 16] = [0x5e; 16];

fn v4_call(xid: u32, ops: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let mut x = Xdr::new();
    x.string("").u32(1).u32(ops.len() as u32);
    for (op, body) in ops {
        x.u32(*op).bytes(body);
    }
    encode_call(xid, NFS, 4, 1, &cred(), &x.buf)
}

fn v4_reply(xid: u32, status: u32, ops: &[(u32, u32, Vec<u8>)]) -> Vec<u8> {
    let mut x = Xdr::new();
    x.u32(status).string("").u32(ops.len() as u32);
    for (op, st, body) in ops {
        x.u32(*op).u32(*st).bytes(body);
    }
    encode_reply_success(xid, &x.buf)
}

fn sequence_args(slot: u32) -> (u32, Vec<u8>) {
    let mut x = Xdr::new();
    x.opaque_fixed(&SESSION).u32(1).u32(slot).u32(7).bool(false);
    (53, x.buf)
}

fn sequence_res(slot: u32) -> (u32, u32, Vec<u8>) {
    let mut x = Xdr::new();
    x.opaque_fixed(&SESSION)
        .u32(1)
        .u32(slot)
        .u32(7)
        .u32(31)
        .u32(0);
    (53, 0, x.buf)
}

fn fh_arg(fh: &[u8]) -> Vec<u8> {
    let mut x = Xdr::new();
    x.opaque(fh);
    x.buf
}

#[test]
fn nfs4_compound_principal_op_sequence_and_names() {
    let mut h = H::new();
    // PUTROOTFH, LOOKUP "export", LOOKUP "f", GETFH
    let mut lk = Xdr::new();
    lk.string("export");
    let mut lk2 = Xdr::new();
    lk2.string("f");
    let c = v4_call(
        1,
        &[
            sequence_args(3),
            (24, vec![]),
            (15, lk.buf),
            (15, lk2.buf),
            (10, vec![]),
        ],
    );
    h.data(0, &record_mark(&c));
    let fh = [0xf4u8; 20];
    let r = v4_reply(
        1,
        0,
        &[
            sequence_res(3),
            (24, 0, vec![]),
            (15, 0, vec![]),
            (15, 0, vec![]),
            (10, 0, fh_arg(&fh)),
        ],
    );
    h.data(1, &record_mark(&r));
    // SEQUENCE, PUTFH fh, READ 100 @ 4096
    let mut rd = Xdr::new();
    rd.u32(0).opaque_fixed(&[0; 12]).u64(4096).u32(100);
    let c = v4_call(2, &[sequence_args(4), (22, fh_arg(&fh)), (25, rd.buf)]);
    h.data(0, &record_mark(&c));
    let mut rr = Xdr::new();
    rr.bool(true).opaque(&[9; 100]);
    let r = v4_reply(2, 0, &[sequence_res(4), (22, 0, vec![]), (25, 0, rr.buf)]);
    h.data(1, &record_mark(&r));
    // An error: PUTFH fails.
    let c = v4_call(
        3,
        &[
            sequence_args(5),
            (22, fh_arg(&[1; 8])),
            (9, {
                let mut x = Xdr::new();
                x.u32(1).u32(0x10);
                x.buf
            }),
        ],
    );
    h.data(0, &record_mark(&c));
    let r = v4_reply(3, 70, &[sequence_res(5), (22, 70, vec![])]);
    h.data(1, &record_mark(&r));
    let log = h.finish();
    assert_eq!(log.transactions.len(), 3);
    let t = &log.transactions[0];
    assert_eq!((t.version, t.minor_version), (4, 1));
    assert_eq!((&*t.op, t.op_code), ("LOOKUP", 15));
    assert_eq!(
        t.compound_ops.as_deref(),
        Some("SEQUENCE,PUTROOTFH,LOOKUP,LOOKUP,GETFH")
    );
    assert_eq!(t.file_name.as_deref(), Some("/export"));
    assert_eq!(
        (t.slot, t.highest_slot, t.target_highest_slot),
        (Some(3), Some(7), Some(31))
    );
    assert_eq!(t.session.as_deref(), Some(&SESSION[..]));
    let t = &log.transactions[1];
    assert_eq!((&*t.op, t.op_code), ("READ", 25));
    assert_eq!(
        (t.offset, t.count, t.reply_count, t.eof),
        (Some(4096), Some(100), Some(100), Some(true))
    );
    assert_eq!(t.file_name.as_deref(), Some("/export/f"));
    assert_eq!(t.file_handle.as_deref(), Some(&fh[..]));
    assert_eq!(
        t.compound_status.as_deref(),
        Some("NFS4_OK,NFS4_OK,NFS4_OK")
    );
    let t = &log.transactions[2];
    assert_eq!(t.op, "GETATTR");
    assert_eq!(t.status_name.as_deref(), Some("NFS4ERR_STALE"));
    assert_eq!(t.compound_status.as_deref(), Some("NFS4_OK,NFS4ERR_STALE"));
}

// ---- UDP, bounds, robustness ---------------------------------------------

#[test]
fn udp_datagrams() {
    let (mut s, fh) = server_with_file();
    let g = Call::Getattr { fh };
    let ep = [
        (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 800),
        (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 2049),
    ];
    let mut p = RpcParser::new_udp(3, ep, SharedRef::default());
    let mut log = TransactionLog::default();
    let mut ctx = Ctx {
        stream: 3,
        log: &mut log,
    };
    let call = nfs3(1, &g);
    p.datagram(0, &call, call.len() as u32, 1, 10, &mut ctx);
    p.datagram(0, &call, call.len() as u32, 2, 20, &mut ctx);
    let reply = nfs3_reply(1, &mut s, &g);
    // Cut by the snaplen after the status.
    p.datagram(1, &reply[..28], reply.len() as u32, 3, 30, &mut ctx);
    p.finish(&mut ctx);
    assert_eq!(log.transactions.len(), 1);
    let txs = log.transactions.to_vec();
    let t = &txs[0];
    assert_eq!((t.transport, t.stream, t.retransmissions), ("udp", 3, 1));
    assert_eq!(t.client_addr, Some(ep[0]));
    assert_eq!(t.status, Some(0));
    assert_eq!(t.srt_ns(), Some(20));
    assert!(!t.reply.unwrap().complete);
}

#[test]
fn outstanding_calls_are_bounded() {
    let mut h = H::new();
    let mut b = Vec::new();
    for xid in 0..(MAX_OUTSTANDING as u32 + 10) {
        b.extend(record_mark(&encode_call(xid, NFS, 3, 0, &cred(), &[])));
    }
    h.data(0, &b);
    assert_eq!(h.p.core.pending.len(), MAX_OUTSTANDING);
    let log = h.finish();
    assert_eq!(log.transactions.len(), MAX_OUTSTANDING + 10);
    let evicted = log
        .transactions
        .iter()
        .filter(|t| t.note.as_deref().is_some_and(|n| n.starts_with("evicted")))
        .count();
    assert_eq!(evicted, 10);
}

/// xorshift for the fuzz tests.
fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[test]
fn fuzz_chunks_never_panic() {
    let (mut s, fh) = server_with_file();
    let calls = [
        Call::Getattr { fh },
        Call::Read {
            fh,
            offset: 0,
            count: 3000,
        },
        Call::Write {
            fh,
            offset: 0,
            stable: Stable::DataSync,
            data: vec![3; 2000],
        },
    ];
    let mut streams = [Vec::new(), Vec::new()];
    for (i, c) in calls.iter().cycle().take(30).enumerate() {
        streams[0].extend(record_mark_fragments(&nfs3(i as u32, c), 700));
        streams[1].extend(record_mark(&nfs3_reply(i as u32, &mut s, c)));
    }
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..300 {
        let mut h = H::new();
        let mut st = streams.clone();
        for d in &mut st {
            for _ in 0..(rng(&mut seed) % 8) {
                let n = d.len();
                let i = (rng(&mut seed) as usize) % n;
                d[i] = rng(&mut seed) as u8;
            }
        }
        let mut pos = [0usize; 2];
        while pos[0] < st[0].len() || pos[1] < st[1].len() {
            let d = (rng(&mut seed) % 2) as usize;
            let left = st[d].len() - pos[d];
            if left == 0 {
                continue;
            }
            let n = 1 + (rng(&mut seed) as usize % 1500).min(left - 1);
            let seg = &st[d][pos[d]..pos[d] + n];
            match rng(&mut seed) % 6 {
                0 => h.hole(d as u8, n as u64, HoleKind::Missing),
                1 => h.snap(d as u8, seg, (rng(&mut seed) % 300) as usize),
                _ => h.data(d as u8, seg),
            }
            pos[d] += n;
        }
        let log = h.finish();
        assert!(log.transactions.len() <= 60);
    }
}

#[test]
fn call_seen_again_after_its_reply_is_a_marked_new_request() {
    let (mut s, fh) = server_with_file();
    let g = Call::Getattr { fh };
    let mut h = H::new();
    h.data(0, &record_mark(&nfs3(1, &g)));
    h.data(1, &record_mark(&nfs3_reply(1, &mut s, &g)));
    h.data(0, &record_mark(&nfs3(1, &g)));
    h.data(1, &record_mark(&nfs3_reply(1, &mut s, &g)));
    // A duplicate reply with nothing outstanding is an orphan.
    h.data(1, &record_mark(&nfs3_reply(1, &mut s, &g)));
    let log = h.finish();
    assert_eq!(log.transactions.len(), 2);
    let t = &log.transactions[1];
    assert_eq!((t.retransmissions, t.request.first_frame), (1, 3));
    assert!(t.note.as_deref().is_some_and(|n| n.contains("frame 2")));
    assert_eq!(log.orphan_replies.len(), 1);
}

#[test]
fn nfs4_call_cut_before_its_operations_is_completed_by_the_reply() {
    let mut h = H::new();
    let mut w = Xdr::new();
    w.u32(0)
        .opaque_fixed(&[0; 12])
        .u64(8192)
        .u32(2)
        .opaque(&[0xaa; 4000]);
    let call = record_mark(&v4_call(
        9,
        &[
            sequence_args(1),
            (22, fh_arg(&[3; 28])),
            (38, w.buf),
            (9, {
                let mut x = Xdr::new();
                x.u32(1).u32(0x10);
                x.buf
            }),
        ],
    ));
    // Only the RPC header and SEQUENCE are captured.
    h.snap(0, &call, 120);
    let mut wr = Xdr::new();
    wr.u32(4000).u32(2).opaque_fixed(&[0; 8]);
    let mut ga = Xdr::new();
    ga.u32(0).u32(0);
    let reply = record_mark(&v4_reply(
        9,
        0,
        &[
            sequence_res(1),
            (22, 0, vec![]),
            (38, 0, wr.buf),
            (9, 0, ga.buf),
        ],
    ));
    h.data(1, &reply);
    let log = h.finish();
    let t = &log.transactions[0];
    assert!(!t.request.complete);
    assert_eq!((&*t.op, t.op_code), ("WRITE", 38));
    assert_eq!(
        t.compound_ops.as_deref(),
        Some("SEQUENCE,PUTFH,WRITE,GETATTR")
    );
    assert_eq!(
        (t.offset, t.reply_count, t.committed),
        (None, Some(4000), Some(2))
    );
    assert_eq!(t.slot, Some(1));
}

#[test]
fn long_readdirplus_listing_names_every_entry() {
    let (mut s, _) = server_with_file();
    let root = s.root();
    let files: Vec<FileHandle> = (0..150)
        .map(|i| s.add_file(&root, &format!("file-{i:03}"), 1))
        .collect();
    let mut h = H::new();
    let mut args = Xdr::new();
    args.string("/srv");
    h.data(
        0,
        &record_mark(&encode_call(1, 100005, 3, 1, &cred(), &args.buf)),
    );
    let mut res = Xdr::new();
    res.u32(0).opaque(&root.0).u32(0);
    h.data(1, &record_mark(&encode_reply_success(1, &res.buf)));
    let rd = Call::Readdirplus {
        dir: root,
        cookie: 0,
        cookieverf: [0; 8],
        dircount: 65536,
        maxcount: 65536,
    };
    h.data(0, &record_mark(&nfs3(2, &rd)));
    let reply = record_mark(&nfs3_reply(2, &mut s, &rd));
    assert!(reply.len() > 4 * HEADER_CAP);
    for seg in reply.chunks(1448) {
        h.data(1, seg);
    }
    let last = files[149];
    let g = Call::Getattr { fh: last };
    h.data(0, &record_mark(&nfs3(3, &g)));
    h.data(1, &record_mark(&nfs3_reply(3, &mut s, &g)));
    let log = h.finish();
    assert_eq!(log.transactions[1].eof, Some(true));
    assert!(log.transactions[1].reply.unwrap().complete);
    assert_eq!(
        log.transactions[2].file_name.as_deref(),
        Some("/srv/file-149")
    );
}

/// Bulk transfers whose payload ends the record are decoded from the
/// prefix kept before the payload (see `framing::PROBES`), with the fields
/// a whole record gives; payloads followed by more operations, and headers
/// longer than the first probe (a long credential), are kept as before.
#[test]
fn bulk_payloads_are_decoded_from_the_prefix_before_them() {
    let (mut s, fh) = server_with_file();
    let data = vec![0x5au8; 40_000];
    let long_cred = AuthSys {
        gids: (0..16).collect(),
        ..AuthSys::new(&"m".repeat(255), 1000, 1000)
    };
    let mut h = H::new();
    let mut seq = 0u32;
    let mut send = |h: &mut H, dir: u8, rec: Vec<u8>| {
        seq += 1;
        // Alternate segment sizes, as TSO and MSS-sized captures do.
        for c in rec.chunks(if seq.is_multiple_of(2) { 1448 } else { 9000 }) {
            h.data(dir, c);
        }
    };
    // NFSv3 WRITE of 32 KiB, with the usual and with a long credential.
    let w = Call::Write {
        fh,
        offset: 65536,
        stable: Stable::Unstable,
        data: data[..32768].to_vec(),
    };
    send(&mut h, 0, record_mark(&nfs3(1, &w)));
    send(&mut h, 1, record_mark(&nfs3_reply(1, &mut s, &w)));
    let long = encode_call(2, NFS, 3, w.procedure(), &long_cred, &w.encode_args());
    send(&mut h, 0, record_mark(&long));
    send(&mut h, 1, record_mark(&nfs3_reply(2, &mut s, &w)));
    // NFSv3 READ of 32 KiB.
    let r = Call::Read {
        fh,
        offset: 0,
        count: 32768,
    };
    send(&mut h, 0, record_mark(&nfs3(3, &r)));
    send(&mut h, 1, record_mark(&nfs3_reply(3, &mut s, &r)));
    // NFSv4.1: SEQUENCE, PUTFH, WRITE (last) of 30000 bytes.
    let stateid = [0u8; 16];
    let write4 = |n: usize| {
        let mut x = Xdr::new();
        x.opaque_fixed(&stateid).u64(4096).u32(2).opaque(&data[..n]);
        (38, x.buf)
    };
    let getattr4 = {
        let mut x = Xdr::new();
        x.u32(1).u32(1 << 4);
        (9, x.buf)
    };
    let (putfh, fh4) = (22, fh_arg(&[7u8; 28]));
    send(
        &mut h,
        0,
        record_mark(&v4_call(
            4,
            &[sequence_args(0), (putfh, fh4.clone()), write4(30000)],
        )),
    );
    let mut wres = Xdr::new();
    wres.u32(30000).u32(2).opaque_fixed(&[1u8; 8]);
    send(
        &mut h,
        1,
        record_mark(&v4_reply(
            4,
            0,
            &[
                sequence_res(0),
                (putfh, 0, vec![]),
                (38, 0, wres.buf.clone()),
            ],
        )),
    );
    // WRITE followed by GETATTR, its payload short enough for the
    // GETATTR to be read: not the last operation, so kept whole.
    send(
        &mut h,
        0,
        record_mark(&v4_call(
            5,
            &[
                sequence_args(1),
                (putfh, fh4.clone()),
                write4(2000),
                getattr4.clone(),
            ],
        )),
    );
    let mut gres = Xdr::new();
    gres.u32(1).u32(1 << 4).opaque(&8192u64.to_be_bytes());
    send(
        &mut h,
        1,
        record_mark(&v4_reply(
            5,
            0,
            &[
                sequence_res(1),
                (putfh, 0, vec![]),
                (38, 0, wres.buf.clone()),
                (9, 0, gres.buf.clone()),
            ],
        )),
    );
    // SEQUENCE, PUTFH, READ (last) of 30000 bytes.
    let mut rarg = Xdr::new();
    rarg.opaque_fixed(&stateid).u64(0).u32(30000);
    send(
        &mut h,
        0,
        record_mark(&v4_call(
            6,
            &[sequence_args(2), (putfh, fh4), (25, rarg.buf)],
        )),
    );
    let mut rres = Xdr::new();
    rres.bool(true).opaque(&data[..30000]);
    send(
        &mut h,
        1,
        record_mark(&v4_reply(
            6,
            0,
            &[sequence_res(2), (putfh, 0, vec![]), (25, 0, rres.buf)],
        )),
    );
    let log = h.finish();
    let t = &log.transactions;
    assert_eq!(t.len(), 6);
    for w in &t[..2] {
        assert_eq!(
            (&*w.op, w.offset, w.count),
            ("WRITE", Some(65536), Some(32768))
        );
        assert_eq!((w.stable, w.reply_count), (Some(0), Some(32768)));
        assert!(w.request.complete && w.reply.unwrap().complete);
    }
    assert_eq!((&*t[2].op, t[2].reply_count), ("READ", Some(32768)));
    assert!(t[2].eof.is_some());
    assert_eq!(t[3].compound_ops.as_deref(), Some("SEQUENCE,PUTFH,WRITE"));
    assert_eq!(
        (&*t[3].op, t[3].offset, t[3].count),
        ("WRITE", Some(4096), Some(30000))
    );
    assert_eq!((t[3].stable, t[3].reply_count), (Some(2), Some(30000)));
    assert_eq!(
        t[4].compound_ops.as_deref(),
        Some("SEQUENCE,PUTFH,WRITE,GETATTR")
    );
    assert_eq!(
        t[4].compound_status.as_deref(),
        Some("NFS4_OK,NFS4_OK,NFS4_OK,NFS4_OK")
    );
    assert_eq!(
        (&*t[5].op, t[5].reply_count, t[5].eof),
        ("READ", Some(30000), Some(true))
    );
    for x in t {
        assert!(x.note.is_none(), "{:?}", x.note);
        assert_eq!(x.slot.is_some(), x.version == 4);
    }
}

/// Which prefixes suffice: a payload that ends the record once its length
/// is in the prefix; not before, not a payload with operations after it,
/// not a payload the prefix holds whole.
#[test]
fn prefix_suffices_only_for_a_trailing_payload_already_begun() {
    use nastriage_proto::rpc_records::{parse_rpc_message, RpcMessage};
    let call_says = |msg: &[u8], n: usize| match parse_rpc_message(&msg[..n.min(msg.len())]) {
        Ok(RpcMessage::Call(h)) => h.args_offset().is_some_and(|o| {
            decode::call_prefix_suffices(h.prog, h.vers, h.proc_, &msg[o..n.min(msg.len())])
        }),
        _ => false,
    };
    let (_, fh) = server_with_file();
    let data = vec![1u8; 8000];
    let w = Call::Write {
        fh,
        offset: 0,
        stable: Stable::FileSync,
        data: data.clone(),
    };
    let v3 = nfs3(1, &w);
    assert!(call_says(&v3, 256));
    // Cut before the payload's length; or the payload held whole.
    assert!(!call_says(&v3, 100));
    let small = nfs3(
        1,
        &Call::Write {
            fh,
            offset: 0,
            stable: Stable::FileSync,
            data: vec![1u8; 10],
        },
    );
    assert!(!call_says(&small, small.len()));
    // A long credential: not at the first probe, at the second.
    let long_cred = AuthSys {
        gids: (0..16).collect(),
        ..AuthSys::new(&"m".repeat(255), 1000, 1000)
    };
    let long = encode_call(1, NFS, 3, w.procedure(), &long_cred, &w.encode_args());
    assert!(!call_says(&long, 256));
    assert!(call_says(&long, 1024));
    // NFSv4: WRITE last, or followed by GETATTR.
    let mut wa = Xdr::new();
    wa.opaque_fixed(&[0u8; 16]).u64(0).u32(2).opaque(&data);
    let getattr = (9, vec![0, 0, 0, 1, 0, 0, 0, 16]);
    let last = v4_call(
        2,
        &[
            sequence_args(0),
            (22, fh_arg(&[7; 28])),
            (38, wa.buf.clone()),
        ],
    );
    assert!(call_says(&last, 256));
    let then = v4_call(2, &[sequence_args(0), (38, wa.buf.clone()), getattr]);
    assert!(!call_says(&then, 256));
    // Other procedures never.
    let r = nfs3(
        3,
        &Call::Read {
            fh,
            offset: 0,
            count: 8000,
        },
    );
    assert!(!call_says(&r, r.len()));

    // Replies: NFSv3 READ, NFSv4 READ last; READ then GETATTR not.
    let rc = |vers, proc_| decode::ReplyCtx {
        prog: NFS,
        vers,
        proc_,
        ..Default::default()
    };
    let reply_says =
        |rc: &decode::ReplyCtx, msg: &[u8], n: usize| match parse_rpc_message(&msg[..n]) {
            Ok(RpcMessage::Reply(h)) => decode::reply_prefix_suffices(rc, &msg[h.body_offset..n]),
            _ => false,
        };
    let mut rr = Xdr::new();
    rr.u32(0).u32(0).u32(8000).bool(false).opaque(&data);
    let v3r = encode_reply_success(3, &rr.buf);
    assert!(reply_says(&rc(3, 6), &v3r, 256));
    assert!(!reply_says(&rc(3, 6), &v3r, 30));
    assert!(!reply_says(&rc(3, 7), &v3r, 256));
    let mut r4 = Xdr::new();
    r4.bool(false).opaque(&data);
    let last = v4_reply(4, 0, &[sequence_res(0), (25, 0, r4.buf.clone())]);
    assert!(reply_says(&rc(4, 1), &last, 256));
    let mut g = Xdr::new();
    g.u32(1).u32(16).opaque(&[0; 8]);
    let then = v4_reply(4, 0, &[sequence_res(0), (25, 0, r4.buf), (9, 0, g.buf)]);
    assert!(!reply_says(&rc(4, 1), &then, 256));
}

/// The connections of an analysis share one pool of call boxes: a box freed
/// by one connection's reply serves another connection's next call, emptied.
#[test]
fn connections_share_their_call_boxes() {
    let (mut s, fh) = server_with_file();
    let read = Call::Read {
        fh,
        offset: 4096,
        count: 512,
    };
    let shared = SharedRef::default();
    let mut log = TransactionLog::default();
    let mut feed = |p: &mut RpcParser, stream: u32, dir: u8, off: u64, frame: u64, b: &[u8]| {
        let c = Chunk::Data {
            offset: off,
            bytes: b,
            frame,
            ts: frame as i64 * 1000,
        };
        p.chunk(
            dir,
            c,
            &mut Ctx {
                stream,
                log: &mut log,
            },
        );
    };
    let (mut a, mut b) = (
        RpcParser::new(1, shared.clone()),
        RpcParser::new(2, shared.clone()),
    );
    let call = record_mark(&nfs3(1, &read));
    let reply = record_mark(&nfs3_reply(1, &mut s, &read));
    feed(&mut a, 1, 0, 0, 1, &call);
    feed(&mut a, 1, 1, 0, 2, &reply);
    assert_eq!(shared.borrow().spare.kept(), 1, "a's box back in the pool");
    feed(&mut b, 2, 0, 0, 3, &record_mark(&nfs3(9, &Call::Null)));
    assert_eq!(shared.borrow().spare.kept(), 0, "b took it");
    feed(
        &mut b,
        2,
        1,
        0,
        4,
        &record_mark(&nfs3_reply(9, &mut s, &Call::Null)),
    );
    assert_eq!(shared.borrow().spare.kept(), 1);
    let log = LogView::new(log);
    let t = &log.transactions[1];
    assert_eq!(
        (t.stream, &*t.op, t.offset, t.count),
        (2, "NULL", None, None)
    );
}
