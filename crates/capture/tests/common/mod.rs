//! Byte-level builders for capture files, written independently of the
//! crate's own writers so that the readers are checked against the formats,
//! not against themselves.
#![allow(dead_code)]

use std::io::{Cursor, Read, Write};
use std::path::PathBuf;

use nastriage_capture::{CaptureError, CaptureReader, Warning};

/// One packet as the tests expect to read it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pkt {
    pub ts_ns: i64,
    pub linktype: u32,
    pub interface: u32,
    pub orig_len: u32,
    pub data: Vec<u8>,
    pub offset: u64,
}

/// Everything read from one capture.
#[derive(Debug)]
pub struct ReadAll {
    pub packets: Vec<Pkt>,
    pub error: Option<CaptureError>,
    pub warnings: Vec<Warning>,
    pub linktypes: Vec<u32>,
}

/// Read a capture to its end (or first error). Panics if it yields more
/// packets than `limit` (a hang guard).
pub fn read_all_limited(mut r: CaptureReader, limit: usize) -> ReadAll {
    let mut packets = Vec::new();
    let mut error = None;
    loop {
        match r.advance() {
            Ok(true) => {
                let p = r.packet();
                packets.push(Pkt {
                    ts_ns: p.ts_ns,
                    linktype: p.linktype,
                    interface: p.interface,
                    orig_len: p.orig_len,
                    data: p.data.to_vec(),
                    offset: p.offset,
                });
                assert!(
                    packets.len() <= limit,
                    "more packets than the input can hold"
                );
            }
            Ok(false) => break,
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    // After the end or an error, the reader stays finished.
    assert!(matches!(r.advance(), Ok(false)));
    assert!(r.current().is_none());
    ReadAll {
        packets,
        error,
        warnings: r.warnings().to_vec(),
        linktypes: r.linktypes(),
    }
}

pub fn read_all(r: CaptureReader) -> ReadAll {
    read_all_limited(r, usize::MAX)
}

/// Open in-memory bytes through `from_reader`.
pub fn open_bytes(name: &str, bytes: &[u8]) -> Result<CaptureReader, CaptureError> {
    CaptureReader::from_reader(name, Box::new(Cursor::new(bytes.to_vec())))
}

pub fn read_bytes(bytes: &[u8]) -> ReadAll {
    read_all(open_bytes("mem", bytes).expect("open"))
}

/// A reader that hands out at most `chunk` bytes per `read` call, to
/// exercise buffer refills at every boundary.
pub struct Trickle {
    data: Vec<u8>,
    pos: usize,
    chunk: usize,
}

impl Trickle {
    pub fn new(data: Vec<u8>, chunk: usize) -> Self {
        Trickle {
            data,
            pos: 0,
            chunk,
        }
    }
}

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.chunk).min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

pub fn zstd(data: &[u8]) -> Vec<u8> {
    zstd::stream::encode_all(Cursor::new(data), 3).unwrap()
}

/// A scratch directory unique to one test, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "nastriage-capture-test-{}-{tag}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn write(&self, name: &str, bytes: &[u8]) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_string_lossy().into_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Deterministic xorshift64* generator.
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

/// Deterministic packet bytes of a given length.
pub fn payload(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_add((i * 7) as u8)).collect()
}

// ---------------------------------------------------------------- pcap

/// Classic pcap writer with any byte order and magic.
pub struct PcapBuilder {
    pub out: Vec<u8>,
    be: bool,
    modified: bool,
    /// (offset, end) of every record.
    pub records: Vec<(u64, u64)>,
}

pub const MAGIC_USEC: u32 = 0xa1b2_c3d4;
pub const MAGIC_NSEC: u32 = 0xa1b2_3c4d;
pub const MAGIC_MODIFIED: u32 = 0xa1b2_cd34;

impl PcapBuilder {
    pub fn new(be: bool, magic: u32, version: (u16, u16), snaplen: u32, linktype: u32) -> Self {
        let mut b = PcapBuilder {
            out: Vec::new(),
            be,
            modified: magic == MAGIC_MODIFIED,
            records: Vec::new(),
        };
        b.u32(magic);
        b.u16(version.0);
        b.u16(version.1);
        b.u32(0); // thiszone
        b.u32(0); // sigfigs
        b.u32(snaplen);
        b.u32(linktype);
        b
    }

    pub fn u16(&mut self, v: u16) {
        let b = if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.out.extend_from_slice(&b);
    }

    pub fn u32(&mut self, v: u32) {
        let b = if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.out.extend_from_slice(&b);
    }

    /// A record with an explicit caplen field (may lie about the data).
    pub fn raw_record(&mut self, sec: u32, frac: u32, caplen: u32, orig: u32, data: &[u8]) {
        let start = self.out.len() as u64;
        self.u32(sec);
        self.u32(frac);
        self.u32(caplen);
        self.u32(orig);
        if self.modified {
            self.u32(7); // ifindex
            self.u16(0x0800); // protocol
            self.out.push(0); // pkt_type
            self.out.push(0); // pad
        }
        self.out.extend_from_slice(data);
        self.records.push((start, self.out.len() as u64));
    }

    pub fn record(&mut self, sec: u32, frac: u32, orig: u32, data: &[u8]) {
        self.raw_record(sec, frac, data.len() as u32, orig, data);
    }
}

// ---------------------------------------------------------------- pcapng

/// pcapng writer; each section has its own byte order.
pub struct NgBuilder {
    pub out: Vec<u8>,
    be: bool,
    /// (offset, end) of every block written.
    pub blocks: Vec<(u64, u64)>,
}

pub fn opt(code: u16, value: &[u8]) -> (u16, Vec<u8>) {
    (code, value.to_vec())
}

impl Default for NgBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl NgBuilder {
    pub fn new() -> Self {
        NgBuilder {
            out: Vec::new(),
            be: false,
            blocks: Vec::new(),
        }
    }

    fn b16(&self, v: u16) -> [u8; 2] {
        if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }

    fn b32(&self, v: u32) -> [u8; 4] {
        if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }

    pub fn i64_bytes(&self, v: i64) -> [u8; 8] {
        if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }

    fn options(&self, opts: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut body = Vec::new();
        if opts.is_empty() {
            return body;
        }
        for (code, value) in opts {
            body.extend_from_slice(&self.b16(*code));
            body.extend_from_slice(&self.b16(value.len() as u16));
            body.extend_from_slice(value);
            body.resize(body.len().next_multiple_of(4), 0);
        }
        body.extend_from_slice(&[0, 0, 0, 0]); // opt_endofopt
        body
    }

    /// A block with the given type and body (padded to 4 bytes).
    pub fn block(&mut self, block_type: u32, body: &[u8]) {
        let mut body = body.to_vec();
        body.resize(body.len().next_multiple_of(4), 0);
        let len = 12 + body.len() as u32;
        let start = self.out.len() as u64;
        let (t, l) = (self.b32(block_type), self.b32(len));
        self.out.extend_from_slice(&t);
        self.out.extend_from_slice(&l);
        self.out.extend_from_slice(&body);
        self.out.extend_from_slice(&l);
        self.blocks.push((start, self.out.len() as u64));
    }

    /// Start a section in the given byte order.
    pub fn shb(&mut self, be: bool) {
        self.be = be;
        let mut body = Vec::new();
        body.extend_from_slice(&self.b32(0x1A2B_3C4D));
        body.extend_from_slice(&self.b16(1));
        body.extend_from_slice(&self.b16(0));
        body.extend_from_slice(&self.i64_bytes(-1));
        let o = self.options(&[opt(4, b"nastriage tests")]); // shb_userappl
        body.extend_from_slice(&o);
        self.block(0x0A0D_0D0A, &body);
    }

    pub fn idb(&mut self, linktype: u16, snaplen: u32, opts: &[(u16, Vec<u8>)]) {
        let mut body = Vec::new();
        body.extend_from_slice(&self.b16(linktype));
        body.extend_from_slice(&self.b16(0));
        body.extend_from_slice(&self.b32(snaplen));
        let o = self.options(opts);
        body.extend_from_slice(&o);
        self.block(1, &body);
    }

    pub fn epb(&mut self, if_id: u32, ts: u64, orig: u32, data: &[u8], opts: &[(u16, Vec<u8>)]) {
        let mut body = Vec::new();
        body.extend_from_slice(&self.b32(if_id));
        body.extend_from_slice(&self.b32((ts >> 32) as u32));
        body.extend_from_slice(&self.b32(ts as u32));
        body.extend_from_slice(&self.b32(data.len() as u32));
        body.extend_from_slice(&self.b32(orig));
        body.extend_from_slice(data);
        body.resize(body.len().next_multiple_of(4), 0);
        let o = self.options(opts);
        body.extend_from_slice(&o);
        self.block(6, &body);
    }

    pub fn spb(&mut self, orig: u32, data: &[u8]) {
        let mut body = Vec::new();
        body.extend_from_slice(&self.b32(orig));
        body.extend_from_slice(data);
        self.block(3, &body);
    }

    /// Obsolete Packet Block (type 2).
    pub fn opb(&mut self, if_id: u16, ts: u64, orig: u32, data: &[u8]) {
        let mut body = Vec::new();
        body.extend_from_slice(&self.b16(if_id));
        body.extend_from_slice(&self.b16(0)); // drops
        body.extend_from_slice(&self.b32((ts >> 32) as u32));
        body.extend_from_slice(&self.b32(ts as u32));
        body.extend_from_slice(&self.b32(data.len() as u32));
        body.extend_from_slice(&self.b32(orig));
        body.extend_from_slice(data);
        self.block(2, &body);
    }

    /// Blocks a reader must skip: name resolution, interface statistics,
    /// a custom block and an unknown type.
    pub fn noise(&mut self) {
        let mut nrb = Vec::new();
        nrb.extend_from_slice(&self.b16(1)); // nrb_record_ipv4
        nrb.extend_from_slice(&self.b16(12));
        nrb.extend_from_slice(&[10, 0, 0, 1]);
        nrb.extend_from_slice(b"host-a\0\0");
        nrb.extend_from_slice(&[0, 0, 0, 0]); // nrb_record_end
        self.block(4, &nrb);
        let mut isb = Vec::new();
        isb.extend_from_slice(&self.b32(0));
        isb.extend_from_slice(&self.b32(0));
        isb.extend_from_slice(&self.b32(0));
        self.block(5, &isb);
        let mut cb = Vec::new();
        cb.extend_from_slice(&self.b32(32473)); // PEN
        cb.extend_from_slice(b"custom data!");
        self.block(0x0000_0BAD, &cb);
        self.block(0x0000_7777, b"unknown block type body");
    }
}

// ---------------------------------------------------------------- snoop

pub fn snoop_header(datalink: u32) -> Vec<u8> {
    let mut v = b"snoop\0\0\0".to_vec();
    v.extend_from_slice(&2u32.to_be_bytes());
    v.extend_from_slice(&datalink.to_be_bytes());
    v
}

/// Append a snoop record; returns (offset, end).
pub fn snoop_record(out: &mut Vec<u8>, sec: u32, usec: u32, orig: u32, data: &[u8]) -> (u64, u64) {
    let start = out.len();
    let rec_len = (24 + data.len()).next_multiple_of(4);
    out.extend_from_slice(&orig.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(&(rec_len as u32).to_be_bytes());
    out.extend_from_slice(&0u32.to_be_bytes()); // drops
    out.extend_from_slice(&sec.to_be_bytes());
    out.extend_from_slice(&usec.to_be_bytes());
    out.extend_from_slice(data);
    out.resize(start + rec_len, 0);
    (start as u64, out.len() as u64)
}

// ------------------------------------------------------- sample captures

/// A small pcap (LE, µs) with packets of varied sizes; returns the bytes
/// and record extents.
pub fn small_pcap() -> (Vec<u8>, Vec<(u64, u64)>) {
    let mut b = PcapBuilder::new(false, MAGIC_USEC, (2, 4), 65535, 1);
    for i in 0..5u32 {
        let d = payload(i as u8, 14 + i as usize * 9);
        b.record(1_700_000_000 + i, i * 1000, d.len() as u32 + i, &d);
    }
    (b.out, b.records)
}

/// A small pcapng: LE section with two interfaces, then a BE section with
/// an SPB and an OPB; returns bytes and the extents of packet blocks.
pub fn small_pcapng() -> (Vec<u8>, Vec<(u64, u64)>) {
    let mut b = NgBuilder::new();
    let mut pkts = Vec::new();
    b.shb(false);
    b.idb(1, 0, &[opt(9, &[9])]);
    b.idb(101, 128, &[]);
    b.epb(0, 5_000_000_000, 60, &payload(1, 60), &[opt(1, b"comment")]);
    pkts.push(*b.blocks.last().unwrap());
    b.noise();
    b.epb(1, 6_000_000, 41, &payload(2, 41), &[]);
    pkts.push(*b.blocks.last().unwrap());
    b.shb(true);
    b.idb(113, 0, &[opt(9, &[3])]);
    b.spb(30, &payload(3, 30));
    pkts.push(*b.blocks.last().unwrap());
    b.opb(0, 7_000, 23, &payload(4, 23));
    pkts.push(*b.blocks.last().unwrap());
    (b.out, pkts)
}

pub fn small_snoop() -> (Vec<u8>, Vec<(u64, u64)>) {
    let mut out = snoop_header(4);
    let mut recs = Vec::new();
    for i in 0..4u32 {
        let d = payload(i as u8 + 40, 20 + i as usize);
        recs.push(snoop_record(&mut out, 1_000 + i, i * 10, 100 + i, &d));
    }
    (out, recs)
}
