//! Large, realistic benchmark captures, written while they are generated.
//!
//! The named scenarios build a whole capture in memory, which is fine for
//! fixtures of a few megabytes but not for the gigabyte captures a
//! benchmark needs. The `bench` generator instead keeps a fixed number of
//! connection *slots*, each running one [`TcpSim`] with a small client and
//! server model on top (NFSv3, NFSv4.1 with SEQUENCE, or SMB 3.1.1). A
//! priority queue orders the slots by the time of their next event; the
//! earliest one is advanced by a short quantum, and its captured packets
//! join a second queue ordered by timestamp. A packet is written once every
//! slot's next event lies after it (no simulation can still produce an
//! earlier one), so memory stays bounded by what is in flight, not by the
//! capture's size, and the file is written front to back.
//!
//! The traffic is meant to look like a busy NAS seen from a capture on the
//! NAS itself (most connections) or on a client (the others):
//!
//! * many concurrent clients; connections that live for the whole capture,
//!   connections that come and go, and connections already under way when
//!   the capture starts;
//! * jobs per connection: metadata bursts (GETATTR/LOOKUP/ACCESS, NFSv4.1
//!   OPEN/CLOSE, SMB CREATE/QUERY_INFO/CLOSE, some lookups of missing
//!   names), sequential reads and writes, random reads; I/O sizes from 4 KiB
//!   to 1 MiB, 1 to 32 requests in flight;
//! * round-trip times from 0.1 to 10 ms, 1 and 10 Gbit/s, MTU 1500 or 9000,
//!   TSO/GSO segments of up to 64 KiB from the capturing host;
//! * on some connections random loss (fast and timeout retransmissions),
//!   duplicates, reordering, slow servers, and readers that stall so the
//!   window closes (zero windows and probes) on either side.
//!
//! Everything is a pure function of the seed and the options.

use std::cell::Cell;
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::rc::Rc;

use nastriage_capture::writer::{PcapNgWriter, PcapWriter, SnoopWriter};

use crate::nfs3::{self, Fattr3, FileHandle};
use crate::nfs4::{self, Op as Op4, OpRes as Res4, StateId};
use crate::rng::Rng;
use crate::rpc::{self, AuthSys, Xdr};
use crate::smb2;
use crate::tcp::{Delivered, Endpoint, MsgId, RandomImpairments, Side, TcpConfig, TcpSim};
use crate::{Format, WriteOptions};

/// What to generate.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub seed: u64,
    /// Stop once the file has at least this many bytes.
    pub target_bytes: u64,
    /// Connections open at any time.
    pub slots: usize,
    /// Timestamp of the first captured packet.
    pub start_ns: i64,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            seed: 1,
            target_bytes: 100 << 20,
            slots: 48,
            start_ns: crate::scenario::DEFAULT_START_NS,
        }
    }
}

/// Parse a size such as `100M`, `1G`, `4G`, `512K` or a plain byte count
/// (binary units: `1G` is 2^30 bytes).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last()? {
        (i, 'k' | 'K') => (&s[..i], 1u64 << 10),
        (i, 'm' | 'M') => (&s[..i], 1 << 20),
        (i, 'g' | 'G') => (&s[..i], 1 << 30),
        (i, 't' | 'T') => (&s[..i], 1 << 40),
        _ => (s, 1),
    };
    let v: f64 = num.parse().ok()?;
    (v.is_finite() && v > 0.0).then_some((v * mult as f64) as u64)
}

/// What was written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BenchSummary {
    pub frames: u64,
    pub bytes: u64,
    /// Connections started, by protocol: NFSv3, NFSv4.1, SMB3.
    pub connections: [u64; 3],
    /// Requests sent, by protocol.
    pub requests: [u64; 3],
    pub retransmissions: u64,
    pub zero_window_probes: u64,
    /// Capture duration (last minus first timestamp).
    pub duration_ns: i64,
}

// ---------------------------------------------------------------------------
// Output

/// A writer counting the bytes that went through it (the count is shared
/// so it can be read while a capture writer owns the stream).
struct Counting<W> {
    inner: W,
    n: Rc<Cell<u64>>,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let k = self.inner.write(buf)?;
        self.n.set(self.n.get() + k as u64);
        Ok(k)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.inner.write_all(buf)?;
        self.n.set(self.n.get() + buf.len() as u64);
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

enum Writer<W: Write> {
    Pcap(PcapWriter<Counting<W>>),
    PcapNg(PcapNgWriter<Counting<W>>, u32),
    Snoop(SnoopWriter<Counting<W>>),
}

struct Sink<W: Write> {
    w: Writer<W>,
    n: Rc<Cell<u64>>,
}

impl<W: Write> Sink<W> {
    fn new(out: W, opts: &WriteOptions) -> io::Result<Self> {
        let n = Rc::new(Cell::new(0));
        let out = Counting {
            inner: out,
            n: n.clone(),
        };
        let w = match opts.format {
            Format::Pcap => Writer::Pcap(PcapWriter::new(
                out,
                opts.link.linktype(),
                opts.snaplen,
                opts.nanosecond,
            )?),
            Format::PcapNg => {
                let mut w = PcapNgWriter::new(out)?;
                let linktype = u16::try_from(opts.link.linktype()).map_err(|_| {
                    io::Error::new(io::ErrorKind::InvalidInput, "link type does not fit pcapng")
                })?;
                let id = w.add_interface(linktype, opts.snaplen)?;
                Writer::PcapNg(w, id)
            }
            Format::Snoop => Writer::Snoop(SnoopWriter::new(out, opts.snaplen)?),
        };
        Ok(Sink { w, n })
    }

    /// Write a frame; returns the bytes written so far.
    fn write(&mut self, ts: i64, frame: &[u8]) -> io::Result<u64> {
        match &mut self.w {
            Writer::Pcap(w) => w.write(ts, frame)?,
            Writer::PcapNg(w, id) => w.write(*id, ts, frame)?,
            Writer::Snoop(w) => w.write(ts, frame)?,
        }
        Ok(self.n.get())
    }

    fn bytes(&self) -> u64 {
        self.n.get()
    }

    fn finish(self) -> io::Result<W> {
        let mut c = match self.w {
            Writer::Pcap(w) => w.into_inner(),
            Writer::PcapNg(w, _) => w.into_inner(),
            Writer::Snoop(w) => w.into_inner(),
        };
        c.flush()?;
        Ok(c.inner)
    }
}

/// A captured frame waiting for the slots to catch up; ordered by time,
/// then by production order.
struct Queued {
    ts: i64,
    order: u64,
    frame: Vec<u8>,
}

impl PartialEq for Queued {
    fn eq(&self, o: &Self) -> bool {
        self.ts == o.ts && self.order == o.order
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Queued {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.ts, self.order).cmp(&(o.ts, o.order))
    }
}

/// Write a benchmark capture to `out`; stops at the first frame that takes
/// the file to `opts.target_bytes` or beyond.
pub fn write_bench<W: Write>(
    out: W,
    opts: &BenchOptions,
    write: &WriteOptions,
) -> io::Result<BenchSummary> {
    write
        .validate()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut sink = Sink::new(io::BufWriter::with_capacity(1 << 20, out), write)?;
    let mut gen = Generator::new(opts);
    let mut pending: BinaryHeap<Reverse<Queued>> = BinaryHeap::new();
    let mut order = 0u64;
    let mut summary = BenchSummary::default();
    let mut first_ts = None;
    'outer: loop {
        let (t, slot) = gen.next_slot();
        while pending.peek().is_some_and(|q| q.0.ts < t) {
            let Reverse(q) = pending.pop().expect("peeked");
            let bytes = sink.write(q.ts, &q.frame)?;
            summary.frames += 1;
            summary.duration_ns = q.ts - *first_ts.get_or_insert(q.ts);
            if bytes >= opts.target_bytes {
                break 'outer;
            }
        }
        for p in gen.advance(slot, t + QUANTUM_NS) {
            if p.ts_ns < opts.start_ns {
                continue;
            }
            if let Some(frame) = write.link.frame(&p) {
                order += 1;
                pending.push(Reverse(Queued {
                    ts: p.ts_ns,
                    order,
                    frame,
                }));
            }
        }
    }
    summary.bytes = sink.bytes();
    gen.finish(&mut summary);
    sink.finish()?.flush()?;
    Ok(summary)
}

/// How far a slot runs ahead each time it is picked.
const QUANTUM_NS: i64 = 200_000;

// ---------------------------------------------------------------------------
// The slots

/// Shared pseudo-random file contents: I/O payloads are slices of it.
struct Pattern(Vec<u8>);

impl Pattern {
    const LEN: usize = 2 << 20;

    fn new(seed: u64) -> Self {
        let mut v = vec![0u8; Self::LEN];
        Rng::new(seed ^ 0x7061_7474).fill(&mut v);
        Pattern(v)
    }

    /// `len` (at most 1 MiB) bytes of file `fileid` at `offset`.
    fn slice(&self, fileid: u64, offset: u64, len: usize) -> &[u8] {
        let room = (Self::LEN - len.min(Self::LEN / 2)) as u64;
        let start = (fileid.wrapping_mul(0x9E37_79B9) ^ offset) % room;
        &self.0[start as usize..start as usize + len]
    }
}

struct Generator {
    rng: Rng,
    start_ns: i64,
    slots: Vec<Option<Conn>>,
    /// Per slot: connections started so far (for ports and seeds).
    started: Vec<u32>,
    queue: BinaryHeap<Reverse<(i64, usize)>>,
    /// The time of the last slot taken from the queue: nothing may be
    /// captured before it any more.
    watermark: i64,
    pattern: Pattern,
    summary: BenchSummary,
}

impl Generator {
    fn new(opts: &BenchOptions) -> Self {
        let n = opts.slots.max(1);
        let mut g = Generator {
            rng: Rng::new(opts.seed).fork(0xbe7c),
            start_ns: opts.start_ns,
            slots: (0..n).map(|_| None).collect(),
            started: vec![0; n],
            queue: BinaryHeap::new(),
            watermark: i64::MIN,
            pattern: Pattern::new(opts.seed),
            summary: BenchSummary::default(),
        };
        for slot in 0..n {
            // A third of the first connections began before the capture
            // (their early packets are not written); the others start
            // during the first 50 ms.
            let at = if g.rng.below(3) == 0 {
                opts.start_ns - 1_000_000 - g.rng.below(200_000_000) as i64
            } else {
                opts.start_ns + g.rng.below(50_000_000) as i64
            };
            g.spawn(slot, at);
        }
        g
    }

    fn spawn(&mut self, slot: usize, at: i64) {
        let k = self.started[slot];
        self.started[slot] += 1;
        let seed = self.rng.next_u64();
        let conn = Conn::new(slot, k, seed, at, &self.pattern);
        self.summary.connections[conn.proto as usize] += 1;
        let next = conn.sim.next_event_at().unwrap_or(at);
        self.slots[slot] = Some(conn);
        self.queue.push(Reverse((next, slot)));
    }

    /// The slot with the earliest next event, and that time (no slot can
    /// capture a packet before it).
    fn next_slot(&mut self) -> (i64, usize) {
        let Reverse((t, slot)) = self.queue.pop().expect("every slot is always queued");
        self.watermark = t;
        (t, slot)
    }

    /// Run `slot` up to `horizon`; returns its new packets and queues it
    /// again (or a successor once its connection has ended).
    fn advance(&mut self, slot: usize, horizon: i64) -> Vec<crate::NetPacket> {
        let conn = self.slots[slot].as_mut().expect("slot in use");
        conn.advance(horizon, &self.pattern);
        let packets = conn.sim.take_packets();
        match conn.sim.next_event_at() {
            Some(t) => self.queue.push(Reverse((t, slot))),
            None => {
                let conn = self.slots[slot].take().expect("slot in use");
                // (The clock can lag behind a cancelled timer that was
                // the slot's queue key, hence the watermark.)
                let end = conn.sim.now().max(self.watermark).max(self.start_ns);
                conn.add_to(&mut self.summary);
                let gap = 1_000_000 + self.rng.below(80_000_000) as i64;
                self.spawn(slot, end + gap);
            }
        }
        packets
    }

    fn finish(self, summary: &mut BenchSummary) {
        let mut s = self.summary;
        for c in self.slots.into_iter().flatten() {
            c.add_to(&mut s);
        }
        summary.connections = s.connections;
        summary.requests = s.requests;
        summary.retransmissions = s.retransmissions;
        summary.zero_window_probes = s.zero_window_probes;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proto {
    Nfs3 = 0,
    Nfs41 = 1,
    Smb3 = 2,
}

/// What a request does; interpreted per protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// NFSv3 NULL; NFSv4.1 a lone SEQUENCE (lease renewal).
    Ping,
    Negotiate,
    SessionSetup,
    TreeConnect,
    Getattr,
    /// NFS LOOKUP; SMB CREATE of a name that does not exist when `found`
    /// is false.
    Lookup {
        found: bool,
    },
    Access,
    /// NFSv3 CREATE (when `create`), NFSv4.1 OPEN, SMB CREATE.
    Open {
        create: bool,
    },
    /// NFSv4.1 and SMB CLOSE.
    Close,
    QueryInfo(u8),
    Read {
        offset: u64,
        len: u32,
    },
    Write {
        offset: u64,
        len: u32,
        sync: bool,
    },
    Commit,
}

#[derive(Debug, Clone, Copy)]
struct Op {
    kind: Kind,
    file: usize,
    /// Sent alone, and nothing else until its reply (opens, closes, ...).
    serial: bool,
}

struct IoPlan {
    file: usize,
    write: bool,
    next: u64,
    end: u64,
    io: u32,
    /// Random reads: requests left (offsets drawn within the file).
    random_left: u32,
    sync_every: u32,
    sent: u32,
}

impl IoPlan {
    fn next(&mut self, rng: &mut Rng, size: u64) -> Option<Op> {
        let kind = if self.random_left > 0 {
            self.random_left -= 1;
            let blocks = (size / self.io as u64).max(1);
            Kind::Read {
                offset: rng.below(blocks) * self.io as u64,
                len: self.io,
            }
        } else if self.next < self.end {
            let len = (self.end - self.next).min(self.io as u64) as u32;
            let offset = self.next;
            self.next += len as u64;
            self.sent += 1;
            if self.write {
                Kind::Write {
                    offset,
                    len,
                    sync: self.sync_every > 0 && self.sent.is_multiple_of(self.sync_every),
                }
            } else {
                Kind::Read { offset, len }
            }
        } else {
            return None;
        };
        Some(Op {
            kind,
            file: self.file,
            serial: false,
        })
    }
}

#[derive(Default)]
struct Job {
    ops: VecDeque<Op>,
    io: Option<IoPlan>,
    post: Vec<Op>,
}

struct File {
    fileid: u64,
    name: String,
    size: u64,
    smb_fid: smb2::FileId,
    stateid: StateId,
}

/// A request on its way, with what the server needs to answer it.
struct Pending {
    op: Op,
    xid: u32,
    smb: Option<smb2::Header>,
    /// NFSv4.1 slot and sequence ID.
    slot: (u32, u32),
}

/// One connection with its client and server models.
struct Conn {
    proto: Proto,
    sim: TcpSim,
    rng: Rng,
    // Profile.
    io: u32,
    max_out: usize,
    /// Server think-time multiplier, percent.
    slowness: i64,
    client_stalls: bool,
    server_stalls: bool,
    jobs_left: u32,
    // Client state.
    job: Job,
    in_flight: usize,
    blocked: bool,
    closing: bool,
    next_send: i64,
    reqs: HashMap<MsgId, Pending>,
    /// Server replies completing a request: whether it was serial, and
    /// its NFSv4.1 slot (freed when the client has the reply).
    finals: HashMap<MsgId, (bool, Option<u32>)>,
    requests: u64,
    // Namespace.
    fsid: u64,
    dir: u64,
    files: Vec<File>,
    next_fileid: u64,
    // Protocol state.
    cred: AuthSys,
    xid: u32,
    verf: [u8; 8],
    smb: smb2::Client,
    smb_session: u64,
    smb_tree: u32,
    /// Credits the client holds, as the server counts them.
    smb_balance: u16,
    async_id: u64,
    server_guid: [u8; 16],
    client_guid: [u8; 16],
    salt: [u8; 32],
    session4: nfs4::SessionId,
    clientid4: u64,
    slots4: Vec<u32>,
    busy4: Vec<bool>,
}

fn pick<T: Copy>(rng: &mut Rng, items: &[(u32, T)]) -> T {
    let total: u32 = items.iter().map(|(w, _)| w).sum();
    let mut x = rng.below(total as u64) as u32;
    for &(w, v) in items {
        if x < w {
            return v;
        }
        x -= w;
    }
    items[items.len() - 1].1
}

/// Log-uniform in `lo..hi`.
fn log_uniform(rng: &mut Rng, lo: u64, hi: u64) -> u64 {
    let (a, b) = ((lo as f64).ln(), (hi as f64).ln());
    let u = rng.below(1 << 30) as f64 / (1u64 << 30) as f64;
    (a + (b - a) * u).exp() as u64
}

/// `Op::file` of requests about the directory (or no file at all).
const NO_FILE: usize = usize::MAX;

const MAC_ROUTER: [u8; 6] = [0x02, 0x5e, 0x20, 0x00, 0x00, 0x01];

impl Conn {
    fn new(slot: usize, k: u32, seed: u64, at: i64, pat: &Pattern) -> Self {
        let mut rng = Rng::new(seed);
        let proto = pick(
            &mut rng,
            &[(40, Proto::Nfs3), (30, Proto::Nfs41), (30, Proto::Smb3)],
        );
        let client_ip = IpAddr::V4(Ipv4Addr::new(
            10,
            10,
            (slot / 200) as u8,
            (10 + slot % 200) as u8,
        ));
        let (server_ip, server_port, client_port) = match proto {
            Proto::Nfs3 | Proto::Nfs41 => {
                let nas = if slot % 4 == 3 { 7 } else { 5 };
                (
                    IpAddr::V4(Ipv4Addr::new(10, 20, 0, nas)),
                    2049,
                    // Privileged ports, as Linux clients use by default.
                    (700 + (slot as u32 * 7 + k * 13) % 320) as u16,
                )
            }
            Proto::Smb3 => (
                IpAddr::V4(Ipv4Addr::new(10, 20, 0, 6)),
                445,
                (49_152 + (slot as u32 * 131 + k * 7) % 16_000) as u16,
            ),
        };
        let client_mac = [0x02, 0x5e, 0x10, (slot >> 8) as u8, slot as u8, 0x01];
        let server_mac = [0x02, 0x5e, 0x20, 0x00, 0x00, server_ip_last(server_ip)];
        let rtt = pick(
            &mut rng,
            &[
                (30, 120_000i64),
                (30, 400_000),
                (20, 1_500_000),
                (12, 4_000_000),
                (8, 10_000_000),
            ],
        );
        let rtt = rng.jitter(rtt, rtt / 4);
        // Routed clients (RTT over a millisecond) appear behind a router.
        let client_mac = if rtt > 1_000_000 {
            MAC_ROUTER
        } else {
            client_mac
        };
        let mut cfg = TcpConfig::new(
            Endpoint::new(client_mac, client_ip, client_port),
            Endpoint::new(server_mac, server_ip, server_port),
            rtt,
        );
        cfg.seed = rng.next_u64();
        cfg.start_ns = at;
        cfg.jitter_ns = 6_000;
        cfg.bandwidth_bps = pick(
            &mut rng,
            &[
                (75, 1_000_000_000u64),
                (22, 10_000_000_000),
                (3, 25_000_000_000),
            ],
        );
        if rng.below(5) == 0 {
            cfg.client = cfg.client.with_mtu(9000);
            cfg.server = cfg.server.with_mtu(9000);
        }
        // Readers that stall now and then (so the window closes) have
        // smaller buffers.
        let client_stalls = rng.below(4) == 0;
        let server_stalls = rng.below(6) == 0;
        cfg.server.rcv_buf = if server_stalls {
            pick(&mut rng, &[(1, 256u32 << 10), (1, 1 << 20)])
        } else {
            4 << 20
        };
        cfg.client.rcv_buf = if client_stalls {
            pick(&mut rng, &[(1, 128u32 << 10), (1, 512 << 10)])
        } else {
            pick(&mut rng, &[(70, 1u32 << 20), (30, 4 << 20)])
        };
        // Where the capture was taken: mostly on the NAS, which then shows
        // its own TSO/GSO segments; sometimes on a client.
        if rng.below(4) == 0 {
            if rng.below(2) == 0 {
                cfg.client.tso_max = 65_535;
            }
        } else {
            cfg.client_delay_ns = rtt / 2 - 3_000;
            cfg.server_delay_ns = 3_000;
            cfg.impair_client_side = true;
            cfg.server.ttl = 64;
            cfg.client.ttl = if rtt > 1_000_000 { 61 } else { 64 };
            if rng.below(5) < 3 {
                cfg.server.tso_max = 65_535;
            }
        }
        cfg.random = match rng.below(100) {
            0..=54 => RandomImpairments::default(),
            55..=79 => RandomImpairments {
                loss_ppm: rng.below(2_000) as u32 + 100,
                ..RandomImpairments::default()
            },
            80..=91 => RandomImpairments {
                reorder_ppm: rng.below(10_000) as u32 + 1_000,
                reorder_delay_ns: 20_000 + rng.below(300_000) as i64,
                duplicate_ppm: rng.below(1_000) as u32,
                ..RandomImpairments::default()
            },
            _ => RandomImpairments {
                loss_ppm: rng.below(15_000) as u32 + 5_000,
                reorder_ppm: rng.below(2_000) as u32,
                reorder_delay_ns: 50_000,
                ..RandomImpairments::default()
            },
        };
        let mut sim = TcpSim::new(cfg);
        sim.start_connect();

        let io = pick(
            &mut rng,
            &[
                (8, 4u32 << 10),
                (6, 8 << 10),
                (10, 32 << 10),
                (22, 64 << 10),
                (14, 128 << 10),
                (15, 256 << 10),
                (25, 1 << 20),
            ],
        );
        let max_out = pick(
            &mut rng,
            &[(10, 1usize), (15, 2), (25, 4), (25, 8), (15, 16), (10, 32)],
        )
        .min(((8 << 20) / io as usize).max(1));
        let slowness = pick(&mut rng, &[(70, 100i64), (20, 250), (10, 800)]);
        let jobs_left = if rng.below(2) == 0 {
            u32::MAX
        } else {
            2 + rng.below(10) as u32
        };
        let machine = format!("client{slot:03}");
        let cred = AuthSys {
            stamp: rng.next_u32(),
            ..AuthSys::new(&machine, 1000 + slot as u32, 1000)
        };
        let mut g = |n: usize| {
            let mut v = vec![0u8; n];
            rng.fill(&mut v);
            v
        };
        let verf: [u8; 8] = g(8).try_into().expect("8");
        let server_guid: [u8; 16] = g(16).try_into().expect("16");
        let client_guid: [u8; 16] = g(16).try_into().expect("16");
        let salt: [u8; 32] = g(32).try_into().expect("32");
        let session4: [u8; 16] = g(16).try_into().expect("16");
        let mut conn = Conn {
            proto,
            sim,
            io,
            max_out,
            slowness,
            client_stalls,
            server_stalls,
            jobs_left,
            job: Job::default(),
            in_flight: 0,
            blocked: false,
            closing: false,
            next_send: at,
            reqs: HashMap::new(),
            finals: HashMap::new(),
            requests: 0,
            fsid: 0x5e00 + (server_ip_last(server_ip) as u64),
            dir: 0x10_0000 + slot as u64 * 0x1_0000,
            files: Vec::new(),
            next_fileid: 0x10_0001 + slot as u64 * 0x1_0000 + k as u64 * 0x1000,
            cred,
            xid: rng.next_u32(),
            verf,
            smb: smb2::Client::new(),
            smb_session: 0x0000_1000_0000_0000 | (rng.next_u32() as u64 & 0xffff) << 16 | 0x41,
            smb_tree: 1 + rng.below(8) as u32,
            smb_balance: 1,
            async_id: 0x100 + rng.below(0x1000),
            server_guid,
            client_guid,
            salt,
            session4,
            clientid4: rng.next_u64(),
            slots4: Vec::new(),
            busy4: Vec::new(),
            rng,
        };
        conn.job = conn.opening_job();
        conn.pump(at, pat);
        conn
    }

    fn add_to(&self, s: &mut BenchSummary) {
        s.requests[self.proto as usize] += self.requests;
        let st = self.sim.stats();
        s.retransmissions += st.retransmissions;
        s.zero_window_probes += st.zero_window_probes;
    }

    fn advance(&mut self, horizon: i64, pat: &Pattern) {
        while self.sim.step_due(horizon) {
            while let Some(d) = self.sim.pop_delivered() {
                self.on_delivered(d, pat);
            }
        }
    }

    fn on_delivered(&mut self, d: Delivered, pat: &Pattern) {
        match d.to {
            Side::Server => {
                if let Some(p) = self.reqs.remove(&d.id) {
                    self.respond(p, d.at_ns, pat);
                }
            }
            Side::Client => {
                if let Some((serial, slot)) = self.finals.remove(&d.id) {
                    if let Some(s) = slot {
                        self.busy4[s as usize] = false;
                    }
                    self.in_flight -= 1;
                    if serial {
                        self.blocked = false;
                    }
                    self.pump(d.at_ns, pat);
                }
            }
        }
    }

    // -- Client ------------------------------------------------------------

    fn new_file(&mut self, size: u64) -> usize {
        let fileid = self.next_fileid;
        self.next_fileid += 1 + self.rng.below(3);
        let mut smb_fid = [0u8; 16];
        self.rng.fill(&mut smb_fid);
        let mut other = [0u8; 12];
        self.rng.fill(&mut other);
        self.files.push(File {
            fileid,
            name: format!("data/f{fileid:07x}.bin"),
            size,
            smb_fid,
            stateid: StateId { seqid: 1, other },
        });
        self.files.len() - 1
    }

    fn serial(kind: Kind, file: usize) -> Op {
        Op {
            kind,
            file,
            serial: true,
        }
    }

    fn opening_job(&mut self) -> Job {
        let mut job = Job::default();
        let steps: &[Kind] = match self.proto {
            // A NULL ping (or a lone SEQUENCE), then the export's root.
            Proto::Nfs3 | Proto::Nfs41 => &[Kind::Ping, Kind::Getattr],
            Proto::Smb3 => &[Kind::Negotiate, Kind::SessionSetup, Kind::TreeConnect],
        };
        for &k in steps {
            job.ops.push_back(Self::serial(k, NO_FILE));
        }
        job
    }

    fn new_job(&mut self) -> Job {
        let mut job = Job::default();
        let what = pick(&mut self.rng, &[(30, 0u8), (34, 1), (26, 2), (10, 3)]);
        let size = log_uniform(&mut self.rng, 256 << 10, 48 << 20);
        match what {
            0 => {
                // Metadata burst.
                let n = 4 + self.rng.below(40) as usize;
                for _ in 0..n {
                    let f = if self.files.len() > 2 && self.rng.below(3) > 0 {
                        self.rng.below(self.files.len() as u64) as usize
                    } else {
                        let size = log_uniform(&mut self.rng, 100, 8 << 20);
                        self.new_file(size)
                    };
                    let missing = self.rng.below(10) == 0;
                    match self.proto {
                        Proto::Smb3 => {
                            if missing {
                                job.ops
                                    .push_back(Self::serial(Kind::Lookup { found: false }, f));
                            } else {
                                let class = pick(
                                    &mut self.rng,
                                    &[
                                        (2, smb2::file_info::NETWORK_OPEN),
                                        (1, smb2::file_info::STANDARD),
                                        (1, smb2::file_info::BASIC),
                                    ],
                                );
                                job.ops
                                    .push_back(Self::serial(Kind::Open { create: false }, f));
                                job.ops.push_back(Self::serial(Kind::QueryInfo(class), f));
                                job.ops.push_back(Self::serial(Kind::Close, f));
                            }
                        }
                        _ => {
                            let kind = if missing {
                                Kind::Lookup { found: false }
                            } else {
                                pick(
                                    &mut self.rng,
                                    &[
                                        (5, Kind::Getattr),
                                        (3, Kind::Lookup { found: true }),
                                        (2, Kind::Access),
                                    ],
                                )
                            };
                            job.ops.push_back(Op {
                                kind,
                                file: f,
                                serial: false,
                            });
                        }
                    }
                }
            }
            1 | 3 => {
                // Sequential or random reads of an existing file.
                let f = self.new_file(size);
                self.open_ops(&mut job, f, false);
                let random = what == 3;
                let io = if random {
                    pick(
                        &mut self.rng,
                        &[(3, 4u32 << 10), (2, 8 << 10), (1, 64 << 10)],
                    )
                } else {
                    self.io
                };
                job.io = Some(IoPlan {
                    file: f,
                    write: false,
                    next: 0,
                    end: size,
                    io,
                    random_left: if random {
                        16 + self.rng.below(400) as u32
                    } else {
                        0
                    },
                    sync_every: 0,
                    sent: 0,
                });
                self.close_ops(&mut job, f, false);
                if self.client_stalls && self.rng.below(3) > 0 {
                    let at = self.next_send + 1_000_000 + self.rng.below(20_000_000) as i64;
                    let dur = 5_000_000 + self.rng.below(300_000_000) as i64;
                    self.sim.stall_reader(Side::Client, at, dur);
                }
            }
            _ => {
                // Sequential write of a new file.
                let f = self.new_file(0);
                self.files[f].size = size;
                self.open_ops(&mut job, f, true);
                job.io = Some(IoPlan {
                    file: f,
                    write: true,
                    next: 0,
                    end: size,
                    io: self.io,
                    random_left: 0,
                    sync_every: if self.rng.below(10) == 0 { 1 } else { 0 },
                    sent: 0,
                });
                self.close_ops(&mut job, f, true);
                if self.server_stalls && self.rng.below(3) > 0 {
                    let at = self.next_send + 1_000_000 + self.rng.below(20_000_000) as i64;
                    let dur = 5_000_000 + self.rng.below(200_000_000) as i64;
                    self.sim.stall_reader(Side::Server, at, dur);
                }
            }
        }
        job
    }

    fn open_ops(&mut self, job: &mut Job, f: usize, write: bool) {
        match (self.proto, write) {
            (Proto::Nfs3, false) => {
                job.ops
                    .push_back(Self::serial(Kind::Lookup { found: true }, f));
                job.ops.push_back(Self::serial(Kind::Access, f));
            }
            (Proto::Nfs3, true) => {
                job.ops
                    .push_back(Self::serial(Kind::Open { create: true }, f));
            }
            (_, create) => job.ops.push_back(Self::serial(Kind::Open { create }, f)),
        }
    }

    fn close_ops(&mut self, job: &mut Job, f: usize, write: bool) {
        if write && self.proto != Proto::Smb3 {
            job.post.push(Self::serial(Kind::Commit, f));
        }
        match self.proto {
            Proto::Nfs3 => job.post.push(Self::serial(Kind::Getattr, f)),
            _ => job.post.push(Self::serial(Kind::Close, f)),
        }
    }

    fn peek_op(&mut self) -> Option<Op> {
        if self.job.ops.is_empty() {
            if let Some(io) = self.job.io.as_mut() {
                let size = self.files[io.file].size;
                match io.next(&mut self.rng, size) {
                    Some(op) => self.job.ops.push_back(op),
                    None => {
                        self.job.io = None;
                        let post = std::mem::take(&mut self.job.post);
                        self.job.ops.extend(post);
                    }
                }
            } else if !self.job.post.is_empty() {
                let post = std::mem::take(&mut self.job.post);
                self.job.ops.extend(post);
            }
        }
        self.job.ops.front().copied()
    }

    /// Send what the job allows, no earlier than `at`.
    fn pump(&mut self, at: i64, pat: &Pattern) {
        loop {
            if self.closing || self.blocked {
                return;
            }
            let Some(op) = self.peek_op() else {
                if self.in_flight > 0 {
                    return;
                }
                if self.jobs_left == 0 {
                    self.closing = true;
                    let t = at + 200_000 + self.rng.below(5_000_000) as i64;
                    self.sim.close_at(Side::Client, t);
                    return;
                }
                self.jobs_left = self.jobs_left.saturating_sub(1);
                let idle = pick(
                    &mut self.rng,
                    &[(30, 5_000_000i64), (40, 100_000_000), (30, 1_000_000_000)],
                );
                self.next_send = self.next_send.max(at) + self.rng.jitter(idle, idle);
                self.job = self.new_job();
                continue;
            };
            if op.serial && self.in_flight > 0 {
                return;
            }
            if !op.serial && self.in_flight >= self.max_out {
                return;
            }
            self.job.ops.pop_front();
            let t = self
                .next_send
                .max(at + self.rng.jitter(8_000, 30_000))
                .max(self.sim.now());
            self.next_send = t + self.rng.jitter(1_500, 3_000);
            self.send(op, t, pat);
            self.in_flight += 1;
            self.blocked = op.serial;
        }
    }

    fn send(&mut self, op: Op, at: i64, pat: &Pattern) {
        self.requests += 1;
        let (bytes, pending) = match self.proto {
            Proto::Nfs3 => self.nfs3_call(op, pat),
            Proto::Nfs41 => self.nfs4_call(op, pat),
            Proto::Smb3 => self.smb_request(op, pat),
        };
        let id = self.sim.send_at(Side::Client, at, bytes);
        self.reqs.insert(id, pending);
    }

    fn rpc_start(&mut self, prog: u32, vers: u32, procedure: u32, cap: usize) -> (u32, Xdr) {
        let xid = self.xid;
        self.xid = self.xid.wrapping_add(1);
        let hdr = rpc::encode_call(xid, prog, vers, procedure, &self.cred, &[]);
        let mut x = Xdr::with_capacity(4 + hdr.len() + cap);
        x.u32(0).bytes(&hdr);
        (xid, x)
    }

    fn fh3(&self, fileid: u64) -> FileHandle {
        let mut fh = [0u8; 32];
        fh[..4].copy_from_slice(&[1, 0, 7, 1]);
        fh[4..12].copy_from_slice(&self.fsid.to_le_bytes());
        fh[12..20].copy_from_slice(&fileid.to_le_bytes());
        let g = Rng::new(fileid ^ self.fsid).next_u64();
        fh[20..28].copy_from_slice(&g.to_le_bytes());
        fh[28..].copy_from_slice(&(fileid as u32 ^ 0x5a5a).to_le_bytes());
        FileHandle(fh)
    }

    fn fh4(&self, fileid: u64) -> nfs4::Fh {
        let mut fh = [0u8; 28];
        fh.copy_from_slice(&self.fh3(fileid).0[..28]);
        fh[2] = 6;
        fh
    }

    fn nfs3_call(&mut self, op: Op, pat: &Pattern) -> (Vec<u8>, Pending) {
        let dir = self.fh3(self.dir);
        let f = self.files.get(op.file);
        let fh = self.fh3(f.map_or(self.dir, |f| f.fileid));
        let name = f.map_or(String::new(), |f| f.name[5..].to_string());
        let (procedure, call) = match op.kind {
            Kind::Ping => (nfs3::procs::NULL, Some(nfs3::Call::Null)),
            Kind::Getattr => (nfs3::procs::GETATTR, Some(nfs3::Call::Getattr { fh })),
            Kind::Lookup { found } => (
                nfs3::procs::LOOKUP,
                Some(nfs3::Call::Lookup {
                    dir,
                    name: if found { name } else { format!("{name}.tmp") },
                }),
            ),
            Kind::Access => (
                nfs3::procs::ACCESS,
                Some(nfs3::Call::Access { fh, access: 0x1f }),
            ),
            Kind::Open { .. } => (
                nfs3::procs::CREATE,
                Some(nfs3::Call::Create {
                    dir,
                    name,
                    mode: 0o644,
                }),
            ),
            Kind::Read { offset, len } => (
                nfs3::procs::READ,
                Some(nfs3::Call::Read {
                    fh,
                    offset,
                    count: len,
                }),
            ),
            Kind::Commit => (
                nfs3::procs::COMMIT,
                Some(nfs3::Call::Commit {
                    fh,
                    offset: 0,
                    count: 0,
                }),
            ),
            Kind::Write { .. } => (nfs3::procs::WRITE, None),
            other => unreachable!("{other:?} on NFSv3"),
        };
        let cap = match op.kind {
            Kind::Write { len, .. } => len as usize + 64,
            _ => 128,
        };
        let (xid, mut x) = self.rpc_start(nfs3::PROGRAM, nfs3::VERSION, procedure, cap);
        match call {
            Some(c) => {
                x.bytes(&c.encode_args());
            }
            None => {
                let Kind::Write { offset, len, sync } = op.kind else {
                    unreachable!()
                };
                let fileid = self.files[op.file].fileid;
                x.opaque(&fh.0).u64(offset).u32(len);
                x.u32(if sync { 2 } else { 0 });
                x.opaque(pat.slice(fileid, offset, len as usize));
            }
        }
        (
            finish_record(x.buf),
            Pending {
                op,
                xid,
                smb: None,
                slot: (0, 0),
            },
        )
    }

    fn nfs4_call(&mut self, op: Op, pat: &Pattern) -> (Vec<u8>, Pending) {
        // Take the lowest free slot.
        let slot = match self.busy4.iter().position(|b| !b) {
            Some(s) => s,
            None => {
                self.slots4.push(0);
                self.busy4.push(false);
                self.slots4.len() - 1
            }
        };
        self.busy4[slot] = true;
        self.slots4[slot] += 1;
        let seq = self.slots4[slot];
        let highest = self.busy4.iter().rposition(|b| *b).unwrap_or(0) as u32;
        let sequence = Op4::Sequence {
            session: self.session4,
            sequenceid: seq,
            slotid: slot as u32,
            highest_slotid: highest,
            cachethis: false,
        };
        let dir = self.fh4(self.dir);
        let (fileid, name, stateid) = match self.files.get(op.file) {
            Some(f) => (f.fileid, f.name[5..].to_string(), f.stateid),
            None => (self.dir, String::new(), StateId::default()),
        };
        let fh = self.fh4(fileid);
        let missing = format!("{name}.tmp");
        let owner = format!("open id:{:08x}", self.clientid4 as u32).into_bytes();
        let ops: Vec<Op4> = match op.kind {
            Kind::Ping => vec![sequence],
            Kind::Getattr => vec![sequence, Op4::PutFh(fh), Op4::Getattr],
            Kind::Lookup { found } => vec![
                sequence,
                Op4::PutFh(dir),
                Op4::Lookup(if found { &name } else { &missing }),
                Op4::GetFh,
                Op4::Getattr,
            ],
            Kind::Access => vec![sequence, Op4::PutFh(fh), Op4::Access(0x1f)],
            Kind::Open { create } => vec![
                sequence,
                Op4::PutFh(dir),
                Op4::Open {
                    seqid: 0,
                    share_access: if create {
                        nfs4::share::BOTH
                    } else {
                        nfs4::share::READ
                    },
                    clientid: self.clientid4,
                    owner: &owner,
                    create,
                    name: &name,
                },
                Op4::GetFh,
                Op4::Getattr,
            ],
            Kind::Close => vec![sequence, Op4::PutFh(fh), Op4::Close { seqid: 0, stateid }],
            Kind::Read { offset, len } => vec![
                sequence,
                Op4::PutFh(fh),
                Op4::Read {
                    stateid,
                    offset,
                    count: len,
                },
            ],
            Kind::Commit => vec![
                sequence,
                Op4::PutFh(fh),
                Op4::Commit {
                    offset: 0,
                    count: 0,
                },
            ],
            Kind::Write { offset, len, sync } => vec![
                sequence,
                Op4::PutFh(fh),
                Op4::Write {
                    stateid,
                    offset,
                    stable: if sync {
                        nfs4::stable::FILE_SYNC
                    } else {
                        nfs4::stable::UNSTABLE
                    },
                    data: pat.slice(fileid, offset, len as usize),
                },
            ],
            other => unreachable!("{other:?} on NFSv4.1"),
        };
        let cap = match op.kind {
            Kind::Write { len, .. } => len as usize + 128,
            _ => 256,
        };
        let (xid, mut x) = self.rpc_start(nfs4::PROGRAM, nfs4::VERSION, nfs4::procs::COMPOUND, cap);
        nfs4::encode_compound_args(&mut x, "", &ops);
        (
            finish_record(x.buf),
            Pending {
                op,
                xid,
                smb: None,
                slot: (slot as u32, seq),
            },
        )
    }

    fn smb_request(&mut self, op: Op, pat: &Pattern) -> (Vec<u8>, Pending) {
        let (fid, name) = match self.files.get(op.file) {
            Some(f) => (f.smb_fid, f.name.replace('/', "\\")),
            None => ([0u8; 16], String::new()),
        };
        let (command, charge, body) = match op.kind {
            Kind::Negotiate => (
                smb2::cmd::NEGOTIATE,
                0,
                smb2::negotiate_request(
                    &[0x0202, 0x0210, 0x0300, 0x0302, 0x0311],
                    self.client_guid,
                    self.salt,
                ),
            ),
            Kind::SessionSetup => (smb2::cmd::SESSION_SETUP, 1, smb2::session_setup_request()),
            Kind::TreeConnect => (
                smb2::cmd::TREE_CONNECT,
                1,
                smb2::tree_connect_request(r"\\nas02\projects"),
            ),
            Kind::Open { create } => {
                let (access, disp) = if create {
                    (
                        smb2::access::FILE_READ_DATA
                            | smb2::access::FILE_WRITE_DATA
                            | smb2::access::FILE_READ_ATTRIBUTES
                            | smb2::access::SYNCHRONIZE,
                        smb2::disposition::OVERWRITE_IF,
                    )
                } else {
                    (
                        smb2::access::FILE_READ_DATA
                            | smb2::access::FILE_READ_ATTRIBUTES
                            | smb2::access::SYNCHRONIZE,
                        smb2::disposition::OPEN,
                    )
                };
                (
                    smb2::cmd::CREATE,
                    1,
                    smb2::create_request(&name, access, disp),
                )
            }
            Kind::Lookup { .. } => (
                smb2::cmd::CREATE,
                1,
                smb2::create_request(
                    &format!("{name}.tmp"),
                    smb2::access::FILE_READ_ATTRIBUTES,
                    smb2::disposition::OPEN,
                ),
            ),
            Kind::QueryInfo(class) => (
                smb2::cmd::QUERY_INFO,
                1,
                smb2::query_info_request(fid, class),
            ),
            Kind::Close => (smb2::cmd::CLOSE, 1, smb2::close_request(fid)),
            Kind::Read { offset, len } => (
                smb2::cmd::READ,
                smb2::Client::charge(len as usize),
                smb2::read_request(fid, offset, len),
            ),
            Kind::Write { offset, len, .. } => {
                let fileid = self.files[op.file].fileid;
                let data = pat.slice(fileid, offset, len as usize);
                (
                    smb2::cmd::WRITE,
                    smb2::Client::charge(len as usize),
                    smb2::write_request(fid, offset, data),
                )
            }
            other => unreachable!("{other:?} on SMB"),
        };
        self.smb.credits_requested = if command == smb2::cmd::NEGOTIATE {
            1
        } else {
            64
        };
        let h = self.smb.header(command, charge);
        match op.kind {
            Kind::SessionSetup => self.smb.session_id = self.smb_session,
            Kind::TreeConnect => self.smb.tree_id = self.smb_tree,
            _ => {}
        }
        (
            smb_message(&h, &body),
            Pending {
                op,
                xid: 0,
                smb: Some(h),
                slot: (0, 0),
            },
        )
    }

    // -- Server ------------------------------------------------------------

    fn think(&mut self, kind: Kind) -> i64 {
        let (base, spread) = match kind {
            Kind::Read { len, .. } => (60_000 + len as i64 / 20, 200_000),
            Kind::Write { sync: true, .. } => (800_000, 2_000_000),
            Kind::Write { len, .. } => (40_000 + len as i64 / 30, 120_000),
            Kind::Commit => (1_000_000, 6_000_000),
            Kind::Open { create: true } => (150_000, 300_000),
            Kind::SessionSetup => (300_000, 400_000),
            _ => (25_000, 60_000),
        };
        let mut t = self.rng.jitter(base, spread) * self.slowness / 100;
        // Occasional stalls of the back end.
        if self.rng.below(400) == 0 {
            t += 5_000_000 + self.rng.below(40_000_000) as i64;
        }
        t
    }

    fn fattr3(&self, fileid: u64, size: u64, dir: bool, at: i64) -> Fattr3 {
        let now = ((at / 1_000_000_000) as u32, (at % 1_000_000_000) as u32);
        let old = (now.0.saturating_sub(86_400 * 9), 0);
        Fattr3 {
            ftype: if dir { 2 } else { 1 },
            mode: if dir { 0o755 } else { 0o644 },
            nlink: if dir { 2 } else { 1 },
            uid: 1000,
            gid: 1000,
            size,
            used: size.div_ceil(4096) * 4096,
            fsid: self.fsid,
            fileid,
            atime: now,
            mtime: old,
            ctime: old,
        }
    }

    fn attrs4(&self, fileid: u64, size: u64, dir: bool, at: i64) -> nfs4::Attrs {
        let now = (at / 1_000_000_000, (at % 1_000_000_000) as u32);
        let old = (now.0 - 86_400 * 9, 0);
        nfs4::Attrs {
            ftype: if dir { 2 } else { 1 },
            change: (old.0 as u64) << 32 | fileid & 0xffff,
            size,
            fsid: (self.fsid, 0),
            fileid,
            mode: if dir { 0o755 } else { 0o644 },
            nlink: if dir { 2 } else { 1 },
            uid: 1000,
            gid: 1000,
            atime: now,
            ctime: old,
            mtime: old,
        }
    }

    fn respond(&mut self, p: Pending, at: i64, pat: &Pattern) {
        let think = self.think(p.op.kind);
        let mut messages = Vec::with_capacity(2);
        match self.proto {
            Proto::Nfs3 => messages.push((think, self.nfs3_reply(&p, at, pat))),
            Proto::Nfs41 => messages.push((think, self.nfs4_reply(&p, at, pat))),
            Proto::Smb3 => self.smb_reply(&p, at, think, pat, &mut messages),
        }
        let last = messages.len() - 1;
        for (k, (delay, bytes)) in messages.into_iter().enumerate() {
            let id = self.sim.send_at(Side::Server, at + delay, bytes);
            if k == last {
                let slot = (self.proto == Proto::Nfs41).then_some(p.slot.0);
                self.finals.insert(id, (p.op.serial, slot));
            }
        }
    }

    fn file_info(&self, file: usize) -> (u64, u64) {
        self.files
            .get(file)
            .map_or((self.dir, 4096), |f| (f.fileid, f.size))
    }

    fn nfs3_reply(&mut self, p: &Pending, at: i64, pat: &Pattern) -> Vec<u8> {
        let hdr = rpc::encode_reply_success(p.xid, &[]);
        let cap = match p.op.kind {
            Kind::Read { len, .. } => len as usize + 160,
            _ => 256,
        };
        let mut x = Xdr::with_capacity(4 + hdr.len() + cap);
        x.u32(0).bytes(&hdr);
        let (fileid, size) = self.file_info(p.op.file);
        let a = self.fattr3(fileid, size, false, at);
        let d = self.fattr3(self.dir, 4096, true, at);
        match p.op.kind {
            Kind::Ping => {}
            Kind::Getattr => {
                x.u32(nfs3::status::OK);
                a.encode(&mut x);
            }
            Kind::Lookup { found: true } => {
                x.u32(nfs3::status::OK).opaque(&self.fh3(fileid).0);
                nfs3::post_op_attr(&mut x, Some(&a));
                nfs3::post_op_attr(&mut x, Some(&d));
            }
            Kind::Lookup { found: false } => {
                x.u32(nfs3::status::NOENT);
                nfs3::post_op_attr(&mut x, Some(&d));
            }
            Kind::Access => {
                x.u32(nfs3::status::OK);
                nfs3::post_op_attr(&mut x, Some(&a));
                x.u32(0x1d);
            }
            Kind::Open { .. } => {
                let new = Fattr3 {
                    size: 0,
                    used: 0,
                    ..a
                };
                x.u32(nfs3::status::OK)
                    .bool(true)
                    .opaque(&self.fh3(fileid).0);
                nfs3::post_op_attr(&mut x, Some(&new));
                nfs3::wcc_data(&mut x, &d, &d);
            }
            Kind::Read { offset, len } => {
                let n = size.saturating_sub(offset).min(len as u64);
                x.u32(nfs3::status::OK);
                nfs3::post_op_attr(&mut x, Some(&a));
                x.u32(n as u32).bool(offset + n >= size);
                x.opaque(pat.slice(fileid, offset, n as usize));
            }
            Kind::Write { offset, len, sync } => {
                let before = Fattr3 { size: offset, ..a };
                let after = Fattr3 {
                    size: offset + len as u64,
                    ..a
                };
                x.u32(nfs3::status::OK);
                nfs3::wcc_data(&mut x, &before, &after);
                x.u32(len)
                    .u32(if sync { 2 } else { 0 })
                    .opaque_fixed(&self.verf);
            }
            Kind::Commit => {
                x.u32(nfs3::status::OK);
                nfs3::wcc_data(&mut x, &a, &a);
                x.opaque_fixed(&self.verf);
            }
            other => unreachable!("{other:?} on NFSv3"),
        }
        finish_record(x.buf)
    }

    fn nfs4_reply(&mut self, p: &Pending, at: i64, pat: &Pattern) -> Vec<u8> {
        let (slot, seq) = p.slot;
        let highest = self.slots4.len() as u32 - 1;
        let sequence = Res4::Sequence {
            session: self.session4,
            sequenceid: seq,
            slotid: slot,
            highest_slotid: highest,
            target_highest_slotid: highest.max(15),
        };
        let (fileid, size) = self.file_info(p.op.file);
        let a = self.attrs4(fileid, size, false, at);
        let fh = self.fh4(fileid);
        let stateid = self
            .files
            .get(p.op.file)
            .map_or_else(StateId::default, |f| f.stateid);
        let data;
        let results: Vec<Res4> = match p.op.kind {
            Kind::Ping => vec![sequence],
            Kind::Getattr => vec![sequence, Res4::PutFh, Res4::Getattr(a)],
            Kind::Lookup { found: true } => vec![
                sequence,
                Res4::PutFh,
                Res4::Lookup,
                Res4::GetFh(fh),
                Res4::Getattr(a),
            ],
            Kind::Lookup { found: false } => vec![
                sequence,
                Res4::PutFh,
                Res4::Failed {
                    op: nfs4::op::LOOKUP,
                    status: nfs4::status::NOENT,
                },
            ],
            Kind::Access => vec![
                sequence,
                Res4::PutFh,
                Res4::Access {
                    supported: 0x1f,
                    access: 0x1d,
                },
            ],
            Kind::Open { create } => {
                let change = (at as u64) / 1000;
                vec![
                    sequence,
                    Res4::PutFh,
                    Res4::Open {
                        stateid,
                        change_before: change - create as u64,
                        change_after: change,
                        created: create,
                    },
                    Res4::GetFh(fh),
                    Res4::Getattr(nfs4::Attrs {
                        size: if create { 0 } else { size },
                        ..a
                    }),
                ]
            }
            Kind::Close => vec![sequence, Res4::PutFh, Res4::Close(nfs4::INVALID_STATEID)],
            Kind::Read { offset, len } => {
                let n = size.saturating_sub(offset).min(len as u64);
                data = pat.slice(fileid, offset, n as usize);
                vec![
                    sequence,
                    Res4::PutFh,
                    Res4::Read {
                        eof: offset + n >= size,
                        data,
                    },
                ]
            }
            Kind::Write { len, sync, .. } => vec![
                sequence,
                Res4::PutFh,
                Res4::Write {
                    count: len,
                    committed: if sync {
                        nfs4::stable::FILE_SYNC
                    } else {
                        nfs4::stable::UNSTABLE
                    },
                    verf: self.verf,
                },
            ],
            Kind::Commit => vec![sequence, Res4::PutFh, Res4::Commit(self.verf)],
            other => unreachable!("{other:?} on NFSv4.1"),
        };
        let hdr = rpc::encode_reply_success(p.xid, &[]);
        let cap = match p.op.kind {
            Kind::Read { len, .. } => len as usize + 160,
            _ => 512,
        };
        let mut x = Xdr::with_capacity(4 + hdr.len() + cap);
        x.u32(0).bytes(&hdr);
        nfs4::encode_compound_res(&mut x, "", &results);
        finish_record(x.buf)
    }

    fn smb_reply(
        &mut self,
        p: &Pending,
        at: i64,
        think: i64,
        pat: &Pattern,
        out: &mut Vec<(i64, Vec<u8>)>,
    ) {
        let req = p.smb.as_ref().expect("SMB request header");
        // Grant back what the request cost plus some, so the client's
        // balance climbs towards 512 credits and stays there.
        let charge = req.credit_charge.max(1);
        self.smb_balance = self.smb_balance.saturating_sub(charge);
        let grant = match p.op.kind {
            Kind::Negotiate => 1,
            _ => {
                charge
                    + 512u16
                        .saturating_sub(self.smb_balance + charge)
                        .min(req.credits)
            }
        };
        self.smb_balance += grant;
        let mut h = smb2::response_header(req, smb2::status::SUCCESS, grant);
        match p.op.kind {
            Kind::SessionSetup => h.session_id = self.smb_session,
            Kind::TreeConnect => h.tree_id = self.smb_tree,
            _ => {}
        }
        let (fileid, size) = self.file_info(p.op.file);
        let old = at - 86_400_000_000_000 * 9;
        let info = smb2::FileInfo {
            creation_ns: old - 86_400_000_000_000 * 30,
            access_ns: at,
            write_ns: old,
            change_ns: old,
            size,
        };
        let fid = self.files.get(p.op.file).map_or([0; 16], |f| f.smb_fid);
        let body = match p.op.kind {
            Kind::Negotiate => smb2::negotiate_response(
                smb2::DIALECT_3_1_1,
                self.server_guid,
                at,
                at - 3_600_000_000_000 * 300,
                self.salt,
            ),
            Kind::SessionSetup => smb2::session_setup_response(),
            Kind::TreeConnect => smb2::tree_connect_response(),
            Kind::Open { create } => smb2::create_response(
                fid,
                if create {
                    smb2::create_action::OVERWRITTEN
                } else {
                    smb2::create_action::OPENED
                },
                &smb2::FileInfo {
                    size: if create { 0 } else { size },
                    ..info
                },
            ),
            Kind::Lookup { .. } => {
                h.status = smb2::status::OBJECT_NAME_NOT_FOUND;
                smb2::error_response()
            }
            Kind::QueryInfo(class) => smb2::query_info_response(class, &info),
            Kind::Close => smb2::close_response(&info),
            Kind::Read { offset, len } => {
                let n = size.saturating_sub(offset).min(len as u64) as usize;
                let mut b = smb2::read_response(&[]);
                b.reserve(n);
                b[4..8].copy_from_slice(&(n as u32).to_le_bytes());
                b.extend_from_slice(pat.slice(fileid, offset, n));
                b
            }
            Kind::Write { len, .. } => {
                if self.rng.below(50) == 0 {
                    // Slow write: STATUS_PENDING first, the result later.
                    self.async_id += 1;
                    let interim = smb2::Header {
                        async_id: Some(self.async_id),
                        ..smb2::response_header(req, smb2::status::PENDING, 1)
                    };
                    out.push((30_000, smb_message(&interim, &smb2::error_response())));
                    h.async_id = Some(self.async_id);
                    h.credits = 0;
                    out.push((
                        think + 2_000_000 + self.rng.below(20_000_000) as i64,
                        smb_message(&h, &smb2::write_response(len)),
                    ));
                    return;
                }
                smb2::write_response(len)
            }
            other => unreachable!("{other:?} on SMB"),
        };
        out.push((think, smb_message(&h, &body)));
    }
}

fn server_ip_last(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(a) => a.octets()[3],
        IpAddr::V6(a) => a.octets()[15],
    }
}

/// Fill in the RPC record mark reserved at the start of `v`.
fn finish_record(mut v: Vec<u8>) -> Vec<u8> {
    let n = (v.len() - 4) as u32 | 0x8000_0000;
    v[..4].copy_from_slice(&n.to_be_bytes());
    v
}

fn smb_message(h: &smb2::Header, body: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + 64 + body.len());
    v.extend_from_slice(&[0; 4]);
    h.encode(&mut v);
    v.extend_from_slice(body);
    finish_nbss(v)
}

fn finish_nbss(mut v: Vec<u8>) -> Vec<u8> {
    let n = (v.len() - 4) as u32;
    v[..4].copy_from_slice(&n.to_be_bytes());
    v
}
