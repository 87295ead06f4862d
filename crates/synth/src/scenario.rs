//! Named scenarios: complete, deterministic conversations rendered as
//! network-layer packets.
//!
//! Each scenario exists to exercise a part of the analyser with a capture
//! whose ground truth is known:
//!
//! * `nfs3-copy`: a healthy NFSv3 file copy (the README's first example).
//! * `smb2-copy`: the same copy over SMB 3.1.1.
//! * `tcp-basic`: connection tracking edge cases (4-tuple reuse, a capture
//!   starting mid-connection, IPv6, UDP with IPv4 fragments, ICMP, ARP).
//! * `tcp-pathologies`: retransmissions (timeout and fast), duplicate ACKs,
//!   zero window with probes and update, reordering, duplicates, keep-alives.
//! * `tcp-spurious`: spurious timeout retransmissions, proved by a D-SACK and
//!   by an ACK too early to answer the retransmission.
//! * `tcp-midstream`: a capture starting mid-transfer (window scale must be
//!   inferred) and a transfer whose sequence numbers wrap past 2^32.
//! * `tcp-capture-points`: the same exchange captured next to the client,
//!   next to the server and mid-path (handshake split and TTLs).
//! * `tcp-cc-reno`: a bulk transfer with periodic losses through a
//!   NewReno sender (halving, linear regrowth).
//!
//! Request/response protocols are driven by [`pipeline`], which keeps up to
//! N requests outstanding over a [`TcpSim`] and lets a responder produce the
//! answer when a request has fully arrived at the server.

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::nfs3::{self, Call, Stable};
use crate::packet::{self, ethertype, ipproto, Mac, NetPacket, BROADCAST};
use crate::rng::Rng;
use crate::rpc::{self, AuthSys, RpcClient};
use crate::smb2;
use crate::tcp::{Action, Endpoint, Impairment, Side, TcpConfig, TcpSim};

/// 2024-01-15 10:00:00 UTC, the default start of every scenario.
pub const DEFAULT_START_NS: i64 = 1_705_312_800_000_000_000;

/// Options common to all scenarios.
#[derive(Debug, Clone)]
pub struct Options {
    pub seed: u64,
    /// Timestamp of the start of the capture.
    pub start_ns: i64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            seed: 1,
            start_ns: DEFAULT_START_NS,
        }
    }
}

/// Scenario names and one-line descriptions.
pub const SCENARIOS: &[(&str, &str)] = &[
    (
        "nfs3-copy",
        "healthy NFSv3 copy: 4 MiB read, 2 MiB written, RTT 0.5 ms, jumbo frames",
    ),
    (
        "smb2-copy",
        "healthy SMB 3.1.1 copy: 4 MiB read, 2 MiB written, RTT 0.5 ms, jumbo frames",
    ),
    (
        "tcp-basic",
        "4-tuple reuse, mid-connection start, IPv6, fragmented UDP, ICMP echo, ARP",
    ),
    (
        "tcp-pathologies",
        "fast and timeout retransmissions, dup ACKs, zero window, reordering, keep-alive",
    ),
    (
        "tcp-spurious",
        "spurious timeout retransmissions: proved by D-SACK, and by an early ACK",
    ),
    (
        "tcp-midstream",
        "capture starting mid-transfer (no handshake), sequence numbers wrapping",
    ),
    (
        "tcp-capture-points",
        "one exchange captured near the client, near the server and mid-path",
    ),
    (
        "tcp-cc-reno",
        "bulk transfer with periodic losses, NewReno sender, RTT 10 ms",
    ),
];

/// Build scenario `name`.
pub fn build(name: &str, opts: &Options) -> Result<Vec<NetPacket>, String> {
    match name {
        "nfs3-copy" => Ok(nfs3_copy(opts, &CopyParams::default())),
        "smb2-copy" => Ok(smb2_copy(opts, &CopyParams::default())),
        "tcp-basic" => Ok(tcp_basic(opts)),
        "tcp-pathologies" => Ok(tcp_pathologies(opts)),
        "tcp-spurious" => Ok(tcp_spurious(opts)),
        "tcp-midstream" => Ok(tcp_midstream(opts)),
        "tcp-capture-points" => Ok(tcp_capture_points(opts)),
        "tcp-cc-reno" => Ok(tcp_cc_reno(opts)),
        other => {
            let names: Vec<&str> = SCENARIOS.iter().map(|(n, _)| *n).collect();
            Err(format!(
                "unknown scenario {other:?}; known: {}",
                names.join(", ")
            ))
        }
    }
}

/// Merge packet lists by timestamp (stable: equal times keep list order).
pub fn merge(lists: Vec<Vec<NetPacket>>) -> Vec<NetPacket> {
    let mut all: Vec<NetPacket> = lists.into_iter().flatten().collect();
    all.sort_by_key(|p| p.ts_ns);
    all
}

// ---------------------------------------------------------------------------
// Request/response driver

/// Send `requests` from the client, at most `max_outstanding` at a time.
/// When request `i` has fully reached the server at time `t`,
/// `respond(i, t)` returns the server's messages as (send time, bytes); the
/// last one completes the request (earlier ones are interim responses, e.g.
/// SMB2 STATUS_PENDING). An empty answer completes the request at once. The
/// client issues the next request `client_gap_ns` (plus up to 50% jitter)
/// after a completion (the first requests that long after now). Returns
/// when every request is complete.
pub fn pipeline<R>(
    sim: &mut TcpSim,
    requests: Vec<Vec<u8>>,
    max_outstanding: usize,
    client_gap_ns: i64,
    rng: &mut Rng,
    mut respond: R,
) where
    R: FnMut(usize, i64) -> Vec<(i64, Vec<u8>)>,
{
    let n = requests.len();
    if n == 0 {
        return;
    }
    let mut todo: VecDeque<(usize, Vec<u8>)> = requests.into_iter().enumerate().collect();
    let mut pending: HashMap<u64, usize> = HashMap::new();
    let mut finals: HashMap<u64, usize> = HashMap::new();
    let done = Cell::new(0usize);
    let mut t = sim.now() + rng.jitter(client_gap_ns, client_gap_ns / 2);
    for _ in 0..max_outstanding.max(1).min(n) {
        let (i, r) = todo.pop_front().expect("non-empty");
        pending.insert(sim.send_at(Side::Client, t, r), i);
        t += rng.jitter(2_000, 2_000);
    }
    let mut next = |sim: &mut TcpSim, at: i64, rng: &mut Rng, pending: &mut HashMap<u64, usize>| {
        done.set(done.get() + 1);
        if let Some((i, r)) = todo.pop_front() {
            let gap = rng.jitter(client_gap_ns, client_gap_ns / 2);
            pending.insert(sim.send_at(Side::Client, at + gap, r), i);
        }
    };
    sim.run_until(
        |sim, d| match d.to {
            Side::Server => {
                if let Some(i) = pending.remove(&d.id) {
                    let answers = respond(i, d.at_ns);
                    if answers.is_empty() {
                        next(sim, d.at_ns, rng, &mut pending);
                    }
                    let last = answers.len().saturating_sub(1);
                    for (k, (at, bytes)) in answers.into_iter().enumerate() {
                        let id = sim.send_at(Side::Server, at, bytes);
                        if k == last {
                            finals.insert(id, i);
                        }
                    }
                }
            }
            Side::Client => {
                if finals.remove(&d.id).is_some() {
                    next(sim, d.at_ns, rng, &mut pending);
                }
            }
        },
        |_| done.get() == n,
    );
}

// ---------------------------------------------------------------------------
// Shared pieces

fn mac(last: u8) -> Mac {
    [0x02, 0x5e, 0x10, 0x00, 0x00, last]
}

fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

/// Sizes and path of the copy scenarios.
#[derive(Debug, Clone)]
pub struct CopyParams {
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// READ/WRITE size.
    pub io_size: u32,
    pub max_outstanding: usize,
    pub rtt_ns: i64,
    pub mtu: u16,
    pub bandwidth_bps: u64,
}

impl Default for CopyParams {
    /// Jumbo frames keep the committed example small (about 1,300 frames)
    /// while moving whole 64 KiB I/Os.
    fn default() -> Self {
        CopyParams {
            read_bytes: 4 << 20,
            write_bytes: 2 << 20,
            io_size: 64 << 10,
            max_outstanding: 4,
            rtt_ns: 500_000,
            mtu: 9000,
            bandwidth_bps: 1_000_000_000,
        }
    }
}

fn copy_sim(opts: &Options, p: &CopyParams, client_port: u16, server_port: u16) -> TcpSim {
    let client = Endpoint::new(mac(0x21), v4(192, 168, 10, 21), client_port);
    let server = Endpoint::new(mac(0x05), v4(192, 168, 10, 5), server_port);
    let mut cfg = TcpConfig::new(client, server, p.rtt_ns);
    cfg.client = cfg.client.with_mtu(p.mtu);
    cfg.server = cfg.server.with_mtu(p.mtu);
    cfg.bandwidth_bps = p.bandwidth_bps;
    cfg.start_ns = opts.start_ns;
    cfg.seed = opts.seed ^ server_port as u64;
    TcpSim::new(cfg)
}

// ---------------------------------------------------------------------------
// nfs3-copy

struct NfsSession {
    fs: nfs3::Server,
    rpc: RpcClient,
    rng: Rng,
}

/// The TCP test scenarios' NFS set-up: one server with `data.bin` of
/// `size` bytes, and a client with a fixed XID base and machine name.
/// Returns the session, the server's root and the file's handles.
fn test_nfs_session(
    opts: &Options,
    size: u64,
    fork: u64,
    xid_base: u32,
    machine: &str,
) -> (NfsSession, nfs3::FileHandle, nfs3::FileHandle) {
    let mut fs = nfs3::Server::new(opts.seed, opts.start_ns);
    let root = fs.root();
    let file = fs.add_file(&root, "data.bin", size);
    let session = NfsSession {
        fs,
        rpc: RpcClient::new(xid_base, AuthSys::new(machine, 1000, 1000)),
        rng: Rng::new(opts.seed).fork(fork),
    };
    (session, root, file)
}

impl NfsSession {
    /// Server processing time for a call, with jitter.
    fn think(&mut self, call: &Call) -> i64 {
        let (base, spread) = match call {
            Call::Read { .. } => (120_000, 180_000),
            Call::Write {
                stable: Stable::Unstable,
                ..
            } => (90_000, 110_000),
            Call::Write { .. } => (1_500_000, 1_500_000),
            Call::Commit { .. } => (3_000_000, 3_000_000),
            Call::Create { .. } => (250_000, 150_000),
            Call::Readdirplus { .. } => (150_000, 100_000),
            _ => (35_000, 40_000),
        };
        self.rng.jitter(base, spread)
    }

    /// Run `calls` with up to `outstanding` in flight.
    fn batch(&mut self, sim: &mut TcpSim, calls: Vec<Call>, outstanding: usize) {
        let mut xids = Vec::with_capacity(calls.len());
        let mut records = Vec::with_capacity(calls.len());
        for c in &calls {
            let (xid, rec) = self.rpc.call(
                nfs3::PROGRAM,
                nfs3::VERSION,
                c.procedure(),
                &c.encode_args(),
            );
            xids.push(xid);
            records.push(rec);
        }
        let mut rng = self.rng.fork(xids[0] as u64);
        pipeline(sim, records, outstanding, 25_000, &mut rng, |i, at| {
            self.fs.set_time(at);
            let results = self.fs.handle(&calls[i]);
            let think = self.think(&calls[i]);
            vec![(
                at + think,
                rpc::record_mark(&rpc::encode_reply_success(xids[i], &results)),
            )]
        });
    }

    fn one(&mut self, sim: &mut TcpSim, call: Call) {
        self.batch(sim, vec![call], 1);
    }
}

/// A healthy NFSv3 copy over one TCP connection (client port 876 to 2049):
/// NULL/FSINFO/GETATTR as at mount, LOOKUP+ACCESS of the source, pipelined
/// READs of the whole file, READDIRPLUS, LOOKUP (NOENT) + CREATE of the copy,
/// pipelined UNSTABLE WRITEs with a GETATTR among them, COMMIT, and a small
/// FILE_SYNC write.
pub fn nfs3_copy(opts: &Options, p: &CopyParams) -> Vec<NetPacket> {
    let mut rng = Rng::new(opts.seed).fork(3);
    let mut fs = nfs3::Server::new(opts.seed, opts.start_ns);
    let root = fs.root();
    let src = fs.add_file(&root, "big.bin", p.read_bytes);
    fs.add_file(&root, "notes.txt", 1234);
    let cred = AuthSys {
        stamp: rng.next_u32() & 0xffff,
        ..AuthSys::new("client01", 1000, 1000)
    };
    let mut s = NfsSession {
        fs,
        rpc: RpcClient::new(rng.next_u32(), cred),
        rng,
    };
    let mut sim = copy_sim(opts, p, 876, 2049);
    sim.connect();

    // "Mount": the root handle comes from MOUNT, which is not captured.
    s.one(&mut sim, Call::Null);
    s.one(&mut sim, Call::Fsinfo { fh: root });
    s.one(&mut sim, Call::Getattr { fh: root });
    sim.advance_to(sim.now() + 3_000_000);

    // Open and read the source.
    s.one(
        &mut sim,
        Call::Lookup {
            dir: root,
            name: "big.bin".into(),
        },
    );
    s.one(
        &mut sim,
        Call::Access {
            fh: src,
            access: nfs3::access::READ | nfs3::access::LOOKUP | nfs3::access::EXECUTE,
        },
    );
    let io = p.io_size as u64;
    let reads: Vec<Call> = (0..p.read_bytes.div_ceil(io))
        .map(|k| Call::Read {
            fh: src,
            offset: k * io,
            count: p.io_size,
        })
        .collect();
    s.batch(&mut sim, reads, p.max_outstanding);
    s.one(&mut sim, Call::Getattr { fh: src });
    sim.advance_to(sim.now() + 2_000_000);

    // List the directory, create the copy.
    s.one(
        &mut sim,
        Call::Readdirplus {
            dir: root,
            cookie: 0,
            cookieverf: [0; 8],
            dircount: 4096,
            maxcount: 32768,
        },
    );
    s.one(
        &mut sim,
        Call::Lookup {
            dir: root,
            name: "copy.bin".into(),
        },
    );
    s.one(
        &mut sim,
        Call::Create {
            dir: root,
            name: "copy.bin".into(),
            mode: 0o644,
        },
    );
    let dst = created_handle(&s.fs, &root, "copy.bin");
    s.one(
        &mut sim,
        Call::Access {
            fh: dst,
            access: nfs3::access::READ | nfs3::access::MODIFY | nfs3::access::EXTEND,
        },
    );
    let n_writes = p.write_bytes.div_ceil(io);
    let mut writes = Vec::new();
    for k in 0..n_writes {
        let len = io.min(p.write_bytes - k * io) as usize;
        writes.push(Call::Write {
            fh: dst,
            offset: k * io,
            stable: Stable::Unstable,
            data: nfs3::Server::content(7, k * io, len),
        });
        if k + 1 == n_writes / 2 {
            writes.push(Call::Getattr { fh: dst });
        }
    }
    s.batch(&mut sim, writes, p.max_outstanding);
    s.one(
        &mut sim,
        Call::Commit {
            fh: dst,
            offset: 0,
            count: 0,
        },
    );
    s.one(&mut sim, Call::Getattr { fh: dst });
    sim.advance_to(sim.now() + 1_500_000);

    // A small synchronous write (FILE_SYNC, no COMMIT needed).
    s.one(
        &mut sim,
        Call::Create {
            dir: root,
            name: "copy.log".into(),
            mode: 0o644,
        },
    );
    let log = created_handle(&s.fs, &root, "copy.log");
    s.one(
        &mut sim,
        Call::Write {
            fh: log,
            offset: 0,
            stable: Stable::FileSync,
            data: b"copied big.bin to copy.bin\n".repeat(16),
        },
    );
    sim.run();
    sim.into_packets()
}

/// The handle the server assigned to `name` (what the client learns from
/// the CREATE reply).
fn created_handle(fs: &nfs3::Server, dir: &nfs3::FileHandle, name: &str) -> nfs3::FileHandle {
    fs.lookup(dir, name).expect("file was created")
}

// ---------------------------------------------------------------------------
// smb2-copy

#[derive(Debug, Clone)]
enum SmbOp {
    Negotiate,
    SessionSetup,
    TreeConnect,
    Create {
        file_id: smb2::FileId,
        size: u64,
        created: bool,
    },
    Read {
        offset: u64,
        len: u32,
        size: u64,
    },
    Write {
        len: u32,
        pending: bool,
    },
    Close {
        size: u64,
    },
}

/// A healthy SMB2 copy over one TCP connection (client port 50122 to 445):
/// NEGOTIATE (3.1.1), SESSION_SETUP, TREE_CONNECT `\\nas01\share`, CREATE
/// and pipelined 64 KiB READs of the source, CLOSE, CREATE of the copy,
/// pipelined WRITEs (the first answered with STATUS_PENDING first), CLOSE.
pub fn smb2_copy(opts: &Options, p: &CopyParams) -> Vec<NetPacket> {
    smb2_copy_dialect(opts, p, smb2::DIALECT_3_1_1)
}

/// [`smb2_copy`] negotiating `dialect` (0x0311 or 0x0302).
pub fn smb2_copy_dialect(opts: &Options, p: &CopyParams, dialect: u16) -> Vec<NetPacket> {
    let mut rng = Rng::new(opts.seed).fork(0x5342);
    let mut sim = copy_sim(opts, p, 50122, 445);
    sim.connect();
    let session_id = 0x0000_1000_0000_0000 | (rng.next_u32() as u64 & 0xffff) << 16 | 0x15;
    let tree_id = 1 + rng.below(8) as u32;
    let mut guid = [0u8; 16];
    rng.fill(&mut guid);
    let mut server_guid = [0u8; 16];
    rng.fill(&mut server_guid);
    let mut salt = [0u8; 32];
    rng.fill(&mut salt);
    let mut file_ids = [[0u8; 16]; 2];
    for f in file_ids.iter_mut() {
        rng.fill(f);
    }
    let start = opts.start_ns;
    let mut client = smb2::Client::new();
    let mut async_id = 0x10u64 + rng.below(64);

    // Each batch: list of (request header, body, op).
    let mut run = |sim: &mut TcpSim,
                   client: &mut smb2::Client,
                   ops: Vec<(u16, Vec<u8>, SmbOp)>,
                   outstanding: usize| {
        let mut headers = Vec::new();
        let mut records = Vec::new();
        let mut kinds = Vec::new();
        for (command, body, op) in ops {
            let charge = match op {
                SmbOp::Read { len, .. } | SmbOp::Write { len, .. } => {
                    smb2::Client::charge(len as usize)
                }
                SmbOp::Negotiate => 0,
                _ => 1,
            };
            let h = client.header(command, charge);
            records.push(smb2::message(&h, &body));
            headers.push(h);
            kinds.push(op);
        }
        let mut prng = rng.fork(headers[0].message_id);
        let mut think_rng = rng.fork(headers[0].message_id ^ 0xabc);
        pipeline(sim, records, outstanding, 20_000, &mut prng, |i, at| {
            let req = &headers[i];
            let grant = if req.command == smb2::cmd::SESSION_SETUP {
                32
            } else {
                1
            };
            let ok = |h: &smb2::Header| {
                let mut r = smb2::response_header(h, smb2::status::SUCCESS, grant);
                if h.command == smb2::cmd::SESSION_SETUP {
                    r.session_id = session_id;
                }
                if h.command == smb2::cmd::TREE_CONNECT {
                    r.tree_id = tree_id;
                }
                r
            };
            let now_ns = at;
            let info = |size: u64| smb2::FileInfo {
                creation_ns: start - 86_400_000_000_000 * 30,
                access_ns: now_ns,
                write_ns: start - 86_400_000_000_000 * 2,
                change_ns: start - 86_400_000_000_000 * 2,
                size,
            };
            let (think, body) = match &kinds[i] {
                SmbOp::Negotiate => (
                    60_000,
                    smb2::negotiate_response(
                        dialect,
                        server_guid,
                        at,
                        start - 3_600_000_000_000 * 50,
                        salt,
                    ),
                ),
                SmbOp::SessionSetup => (400_000, smb2::session_setup_response()),
                SmbOp::TreeConnect => (120_000, smb2::tree_connect_response()),
                SmbOp::Create {
                    file_id,
                    size,
                    created,
                } => {
                    let action = if *created {
                        smb2::create_action::CREATED
                    } else {
                        smb2::create_action::OPENED
                    };
                    (
                        200_000,
                        smb2::create_response(*file_id, action, &info(*size)),
                    )
                }
                SmbOp::Read { offset, len, size } => {
                    let n = (*len as u64).min(size.saturating_sub(*offset)) as usize;
                    (
                        think_rng.jitter(120_000, 180_000),
                        smb2::read_response(&nfs3::Server::content(11, *offset, n)),
                    )
                }
                SmbOp::Write { len, pending } => {
                    let think = think_rng.jitter(90_000, 110_000);
                    if *pending {
                        async_id += 1;
                        let interim = smb2::Header {
                            async_id: Some(async_id),
                            ..smb2::response_header(req, smb2::status::PENDING, 1)
                        };
                        let fin = smb2::Header {
                            async_id: Some(async_id),
                            ..smb2::response_header(req, smb2::status::SUCCESS, 0)
                        };
                        return vec![
                            (
                                at + 40_000,
                                smb2::message(&interim, &smb2::error_response()),
                            ),
                            (
                                at + 6_000_000 + think,
                                smb2::message(&fin, &smb2::write_response(*len)),
                            ),
                        ];
                    }
                    (think, smb2::write_response(*len))
                }
                SmbOp::Close { size } => (60_000, smb2::close_response(&info(*size))),
            };
            vec![(at + think, smb2::message(&ok(req), &body))]
        });
    };

    let dialects: Vec<u16> = if dialect == smb2::DIALECT_3_1_1 {
        vec![0x0202, 0x0210, 0x0300, 0x0302, 0x0311]
    } else {
        vec![0x0202, 0x0210, 0x0300, 0x0302]
    };
    run(
        &mut sim,
        &mut client,
        vec![(
            smb2::cmd::NEGOTIATE,
            smb2::negotiate_request(&dialects, guid, salt),
            SmbOp::Negotiate,
        )],
        1,
    );
    client.credits_requested = 32;
    run(
        &mut sim,
        &mut client,
        vec![(
            smb2::cmd::SESSION_SETUP,
            smb2::session_setup_request(),
            SmbOp::SessionSetup,
        )],
        1,
    );
    client.session_id = session_id;
    client.credits_requested = 1;
    run(
        &mut sim,
        &mut client,
        vec![(
            smb2::cmd::TREE_CONNECT,
            smb2::tree_connect_request(r"\\nas01\share"),
            SmbOp::TreeConnect,
        )],
        1,
    );
    client.tree_id = tree_id;
    sim.advance_to(sim.now() + 2_000_000);

    let read_access = smb2::access::FILE_READ_DATA
        | smb2::access::FILE_READ_ATTRIBUTES
        | smb2::access::SYNCHRONIZE;
    run(
        &mut sim,
        &mut client,
        vec![(
            smb2::cmd::CREATE,
            smb2::create_request("big.bin", read_access, smb2::disposition::OPEN),
            SmbOp::Create {
                file_id: file_ids[0],
                size: p.read_bytes,
                created: false,
            },
        )],
        1,
    );
    let io = p.io_size as u64;
    let reads = (0..p.read_bytes.div_ceil(io))
        .map(|k| {
            (
                smb2::cmd::READ,
                smb2::read_request(file_ids[0], k * io, p.io_size),
                SmbOp::Read {
                    offset: k * io,
                    len: p.io_size,
                    size: p.read_bytes,
                },
            )
        })
        .collect();
    run(&mut sim, &mut client, reads, p.max_outstanding);
    run(
        &mut sim,
        &mut client,
        vec![(
            smb2::cmd::CLOSE,
            smb2::close_request(file_ids[0]),
            SmbOp::Close { size: p.read_bytes },
        )],
        1,
    );
    sim.advance_to(sim.now() + 2_000_000);

    let write_access = smb2::access::FILE_READ_DATA
        | smb2::access::FILE_WRITE_DATA
        | smb2::access::FILE_READ_ATTRIBUTES
        | smb2::access::FILE_WRITE_ATTRIBUTES
        | smb2::access::SYNCHRONIZE;
    run(
        &mut sim,
        &mut client,
        vec![(
            smb2::cmd::CREATE,
            smb2::create_request("copy.bin", write_access, smb2::disposition::OVERWRITE_IF),
            SmbOp::Create {
                file_id: file_ids[1],
                size: 0,
                created: true,
            },
        )],
        1,
    );
    let writes = (0..p.write_bytes.div_ceil(io))
        .map(|k| {
            let len = io.min(p.write_bytes - k * io);
            (
                smb2::cmd::WRITE,
                smb2::write_request(
                    file_ids[1],
                    k * io,
                    &nfs3::Server::content(7, k * io, len as usize),
                ),
                SmbOp::Write {
                    len: len as u32,
                    pending: k == 0,
                },
            )
        })
        .collect();
    run(&mut sim, &mut client, writes, p.max_outstanding);
    run(
        &mut sim,
        &mut client,
        vec![(
            smb2::cmd::CLOSE,
            smb2::close_request(file_ids[1]),
            SmbOp::Close {
                size: p.write_bytes,
            },
        )],
        1,
    );
    sim.run();
    sim.into_packets()
}

// ---------------------------------------------------------------------------
// tcp-basic

fn http_request(host: &str, path: &str) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: nastriage-synth\r\nAccept: */*\r\n\r\n"
    )
    .into_bytes()
}

fn http_response(body_len: usize) -> Vec<u8> {
    let mut v = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {body_len}\r\n\r\n"
    )
    .into_bytes();
    v.extend((0..body_len).map(|i| b'a' + (i % 26) as u8));
    v
}

/// One HTTP GET over a fresh connection; `reset` ends it with a client RST
/// instead of FIN.
fn http_conversation(cfg: TcpConfig, body_len: usize, reset: bool) -> Vec<NetPacket> {
    let host = cfg.server.endpoint.ip.to_string();
    let mut sim = TcpSim::new(cfg);
    sim.connect();
    let mut rng = Rng::new(body_len as u64);
    pipeline(
        &mut sim,
        vec![http_request(&host, "/data.bin")],
        1,
        30_000,
        &mut rng,
        |_, at| vec![(at + 180_000, http_response(body_len))],
    );
    if reset {
        let t = sim.now() + 300_000;
        sim.reset_at(Side::Client, t);
        sim.run();
    } else {
        sim.advance_to(sim.now() + 200_000);
        sim.close(Side::Client);
    }
    sim.into_packets()
}

/// Connection-tracking edge cases in one capture: a transfer already under
/// way when the capture starts (no handshake), two HTTP connections on the
/// same 4-tuple (FIN-closed, then reopened with a new ISN and reset), an
/// IPv6 connection, a UDP echo exchange whose datagrams are IPv4-fragmented,
/// an ICMP echo, and ARP.
pub fn tcp_basic(opts: &Options) -> Vec<NetPacket> {
    let t0 = opts.start_ns;
    let client_mac = mac(0x10);
    let server_mac = mac(0x20);
    let client = v4(10, 1, 1, 10);
    let server = v4(10, 1, 1, 20);
    let mut lists = Vec::new();

    // ARP for the server before anything else is sent to it.
    let (IpAddr::V4(c4), IpAddr::V4(s4)) = (client, server) else {
        unreachable!()
    };
    lists.push(vec![
        NetPacket {
            ts_ns: t0 + 200_000,
            src_mac: client_mac,
            dst_mac: BROADCAST,
            outgoing: true,
            ethertype: ethertype::ARP,
            data: packet::arp(1, client_mac, c4, [0; 6], s4),
        },
        NetPacket {
            ts_ns: t0 + 340_000,
            src_mac: server_mac,
            dst_mac: client_mac,
            outgoing: false,
            ethertype: ethertype::ARP,
            data: packet::arp(2, server_mac, s4, client_mac, c4),
        },
    ]);

    // A bulk transfer to the discard service that started 3 ms before the
    // capture: the capture begins mid-stream.
    {
        let mut cfg = TcpConfig::new(
            Endpoint::new(client_mac, client, 51000),
            Endpoint::new(mac(0x30), v4(10, 1, 1, 30), 9),
            300_000,
        );
        cfg.start_ns = t0 - 3_000_000;
        cfg.seed = opts.seed ^ 0x51000;
        let mut sim = TcpSim::new(cfg);
        sim.connect();
        sim.send(Side::Client, vec![0x5a; 512 * 1024]);
        sim.run();
        sim.advance_to(sim.now() + 500_000);
        sim.close(Side::Client);
        lists.push(
            sim.into_packets()
                .into_iter()
                .filter(|p| p.ts_ns >= t0)
                .collect(),
        );
    }

    // Two connections on the same 4-tuple: FIN close, then reuse.
    let http_cfg = |start: i64, seed: u64| {
        let mut cfg = TcpConfig::new(
            Endpoint::new(client_mac, client, 50000),
            Endpoint::new(server_mac, server, 80),
            400_000,
        );
        cfg.start_ns = start;
        cfg.seed = seed;
        cfg
    };
    lists.push(http_conversation(
        http_cfg(t0 + 1_000_000, opts.seed ^ 0xa),
        2000,
        false,
    ));
    lists.push(http_conversation(
        http_cfg(t0 + 20_000_000, opts.seed ^ 0xb),
        5000,
        true,
    ));

    // IPv6.
    {
        let c6 = IpAddr::V6(Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 0x10));
        let s6 = IpAddr::V6(Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 0x20));
        let mut cfg = TcpConfig::new(
            Endpoint::new(client_mac, c6, 50010),
            Endpoint::new(server_mac, s6, 80),
            400_000,
        );
        cfg.start_ns = t0 + 40_000_000;
        cfg.seed = opts.seed ^ 0x6;
        lists.push(http_conversation(cfg, 3000, false));
    }

    // UDP echo with 3000-byte datagrams, fragmented at MTU 1500.
    {
        let payload: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
        let mut pkts = Vec::new();
        for (k, (from, to, sm, dm, sport, dport, at)) in [
            (
                c4,
                s4,
                client_mac,
                server_mac,
                40000u16,
                7u16,
                t0 + 60_000_000,
            ),
            (s4, c4, server_mac, client_mac, 7, 40000, t0 + 60_450_000),
        ]
        .into_iter()
        .enumerate()
        {
            let dgram = packet::udp(IpAddr::V4(from), IpAddr::V4(to), sport, dport, &payload);
            let h = packet::Ipv4Header {
                id: 0x3a00 + k as u16,
                ..packet::Ipv4Header::new(from, to, ipproto::UDP)
            };
            for (j, frag) in packet::ipv4_fragments(&h, &dgram, 1480)
                .into_iter()
                .enumerate()
            {
                pkts.push(NetPacket {
                    ts_ns: at + j as i64 * 12_500,
                    src_mac: sm,
                    dst_mac: dm,
                    outgoing: k == 0,
                    ethertype: ethertype::IPV4,
                    data: frag,
                });
            }
        }
        lists.push(pkts);
    }

    // ICMP echo request and reply.
    {
        let data: Vec<u8> = (0..56u8).collect();
        let mut pkts = Vec::new();
        for (k, (from, to, sm, dm, at, request)) in [
            (c4, s4, client_mac, server_mac, t0 + 70_000_000, true),
            (
                s4,
                c4,
                server_mac,
                client_mac,
                t0 + 70_000_000 + 410_000,
                false,
            ),
        ]
        .into_iter()
        .enumerate()
        {
            let icmp = packet::icmpv4_echo(request, 0x4e54, 1, &data);
            let h = packet::Ipv4Header {
                id: 0x7100 + k as u16,
                dont_fragment: true,
                ..packet::Ipv4Header::new(from, to, ipproto::ICMP)
            };
            pkts.push(NetPacket {
                ts_ns: at,
                src_mac: sm,
                dst_mac: dm,
                outgoing: request,
                ethertype: ethertype::IPV4,
                data: packet::ipv4(&h, &icmp),
            });
        }
        lists.push(pkts);
    }
    merge(lists)
}

// ---------------------------------------------------------------------------
// tcp-pathologies

fn nfs_path_sim(
    opts: &Options,
    port: u16,
    start: i64,
    tweak: impl FnOnce(&mut TcpConfig),
) -> TcpSim {
    let mut cfg = TcpConfig::new(
        Endpoint::new(mac(0x41), v4(10, 2, 0, 10), port),
        Endpoint::new(mac(0x42), v4(10, 2, 0, 5), 2049),
        1_000_000,
    );
    cfg.start_ns = start;
    cfg.seed = opts.seed ^ (port as u64) << 8;
    cfg.server.ttl = 63;
    tweak(&mut cfg);
    let mut sim = TcpSim::new(cfg);
    sim.connect();
    sim
}

fn nfs_reads(
    s: &mut NfsSession,
    sim: &mut TcpSim,
    fh: nfs3::FileHandle,
    bytes: u64,
    outstanding: usize,
) {
    let calls = (0..bytes.div_ceil(65536))
        .map(|k| Call::Read {
            fh,
            offset: k * 65536,
            count: 65536,
        })
        .collect();
    s.batch(sim, calls, outstanding);
}

/// TCP trouble on NFS connections (client 10.2.0.10, server 10.2.0.5:2049,
/// RTT 1 ms, MTU 1500), one pathology per connection so each is easy to
/// assert on:
///
/// * port 801: a server segment lost before the capture point; SACKed
///   duplicate ACKs and a fast retransmission;
/// * port 802: a client call lost after the capture point; retransmission
///   after the RTO (~200 ms);
/// * port 803: the client stops reading; the window closes, the server sends
///   zero-window probes, a window update reopens it;
/// * port 804: a server segment overtaken by two others (out of order) and
///   another duplicated;
/// * port 805: an idle connection with three keep-alives.
pub fn tcp_pathologies(opts: &Options) -> Vec<NetPacket> {
    let t0 = opts.start_ns;
    let (mut s, root, file) = test_nfs_session(opts, 1 << 20, 0x9a7, 0x7700_0000, "client02");
    let mut lists = Vec::new();

    // Fast retransmission of a lost server segment.
    let mut sim = nfs_path_sim(opts, 801, t0, |c| {
        c.impairments.push(Impairment {
            from: Side::Server,
            nth_data_segment: 20,
            action: Action::Drop,
        })
    });
    nfs_reads(&mut s, &mut sim, file, 256 << 10, 4);
    sim.close(Side::Client);
    lists.push(sim.into_packets());

    // Timeout retransmission of a lost client call.
    let mut sim = nfs_path_sim(opts, 802, t0 + 100_000_000, |c| {
        c.impairments.push(Impairment {
            from: Side::Client,
            nth_data_segment: 0,
            action: Action::Drop,
        })
    });
    s.one(&mut sim, Call::Getattr { fh: file });
    s.one(&mut sim, Call::Getattr { fh: file });
    s.one(&mut sim, Call::Getattr { fh: root });
    sim.close(Side::Client);
    lists.push(sim.into_packets());

    // Zero window: a 64 KiB receive buffer and a reader stalled for 700 ms.
    let mut sim = nfs_path_sim(opts, 803, t0 + 500_000_000, |c| {
        c.client.rcv_buf = 64 << 10;
    });
    sim.stall_reader(Side::Client, sim.now() + 2_000_000, 700_000_000);
    nfs_reads(&mut s, &mut sim, file, 256 << 10, 2);
    sim.close(Side::Client);
    lists.push(sim.into_packets());

    // Reordering and duplication.
    let mut sim = nfs_path_sim(opts, 804, t0 + 1_500_000_000, |c| {
        c.impairments.push(Impairment {
            from: Side::Server,
            nth_data_segment: 10,
            action: Action::Delay(30_000),
        });
        c.impairments.push(Impairment {
            from: Side::Server,
            nth_data_segment: 60,
            action: Action::Duplicate,
        });
    });
    nfs_reads(&mut s, &mut sim, file, 128 << 10, 2);
    sim.close(Side::Client);
    lists.push(sim.into_packets());

    // Keep-alives on an idle mount.
    let mut sim = nfs_path_sim(opts, 805, t0 + 1_700_000_000, |_| {});
    s.one(&mut sim, Call::Null);
    sim.keepalive(Side::Client, 3, 2_000_000_000);
    sim.run();
    s.one(&mut sim, Call::Getattr { fh: root });
    sim.close(Side::Client);
    lists.push(sim.into_packets());

    merge(lists)
}

// ---------------------------------------------------------------------------
// tcp-spurious

/// Spurious retransmissions (client 10.2.0.10, server 10.2.0.5:2049, RTT
/// 1 ms, client-side capture), one per connection:
///
/// * port 811: the client's first call is held 300 ms beyond the capture
///   point; the client retransmits it after its RTO (~201 ms), the server
///   gets both and reports the late original with a D-SACK;
/// * port 812: the same with SACK and timestamps off and a 200.2 ms hold:
///   the server's answer to the original arrives about 0.25 ms after the
///   retransmission, far less than the 1 ms RTT its own answer would need.
pub fn tcp_spurious(opts: &Options) -> Vec<NetPacket> {
    let t0 = opts.start_ns;
    let (mut s, root, file) = test_nfs_session(opts, 1 << 16, 0x5b5, 0x7800_0000, "client03");
    let mut lists = Vec::new();
    for (port, start, hold, options) in [
        (811u16, t0, 300_000_000i64, true),
        (812, t0 + 1_000_000_000, 200_200_000, false),
    ] {
        let mut sim = nfs_path_sim(opts, port, start, |c| {
            c.impairments.push(Impairment {
                from: Side::Client,
                nth_data_segment: 0,
                action: Action::Delay(hold),
            });
            for h in [&mut c.client, &mut c.server] {
                h.sack_permitted = options;
                h.timestamps = options;
            }
        });
        s.one(&mut sim, Call::Getattr { fh: file });
        sim.advance_to(sim.now() + 150_000_000);
        s.one(&mut sim, Call::Getattr { fh: root });
        sim.close(Side::Client);
        lists.push(sim.into_packets());
    }
    merge(lists)
}

// ---------------------------------------------------------------------------
// tcp-midstream

/// Sequence-tracking edge cases (client 10.3.0.10, server 10.3.0.5):
///
/// * port 40821 → 5001: a 6 MB download whose first 3 ms (handshake
///   included) were not captured; the client (window scale 7, 256 KiB
///   receive buffer) limits the sender, so the scale must be inferred from
///   the bytes in flight; 10 Gbit/s, RTT 1 ms;
/// * port 40822 → 5002: a full 1 MB download whose initial sequence numbers
///   sit just below 2^32, so both directions wrap.
pub fn tcp_midstream(opts: &Options) -> Vec<NetPacket> {
    let t0 = opts.start_ns;
    let client_mac = mac(0x51);
    let server_mac = mac(0x52);
    let client = v4(10, 3, 0, 10);
    let server = v4(10, 3, 0, 5);
    let mut lists = Vec::new();
    {
        let mut cfg = TcpConfig::new(
            Endpoint::new(client_mac, client, 40821),
            Endpoint::new(server_mac, server, 5001),
            1_000_000,
        );
        cfg.start_ns = t0 - 3_000_000;
        cfg.seed = opts.seed ^ 0x821;
        cfg.bandwidth_bps = 10_000_000_000;
        cfg.client.rcv_buf = 256 << 10;
        let mut sim = TcpSim::new(cfg);
        sim.connect();
        sim.send(Side::Server, vec![0x4d; 6 << 20]);
        sim.run();
        sim.advance_to(sim.now() + 1_000_000);
        sim.close(Side::Client);
        lists.push(
            sim.into_packets()
                .into_iter()
                .filter(|p| p.ts_ns >= t0)
                .collect(),
        );
    }
    {
        let mut cfg = TcpConfig::new(
            Endpoint::new(client_mac, client, 40822),
            Endpoint::new(server_mac, server, 5002),
            1_000_000,
        );
        cfg.start_ns = t0 + 200_000_000;
        cfg.seed = opts.seed ^ 0x822;
        cfg.client.isn = Some(0xffff_ff00);
        cfg.server.isn = Some(0xfff8_0000);
        let mut sim = TcpSim::new(cfg);
        sim.connect();
        sim.send(Side::Client, b"GET /1M\r\n".to_vec());
        sim.send(Side::Server, vec![0x57; 1 << 20]);
        sim.run();
        sim.advance_to(sim.now() + 1_000_000);
        sim.close(Side::Client);
        lists.push(sim.into_packets());
    }
    merge(lists)
}

// ---------------------------------------------------------------------------
// tcp-capture-points

/// The same NFS exchange (512 KiB of READs, RTT 2 ms) on three connections
/// captured at three places: next to the client (port 831; TTLs 64/61),
/// next to the server (port 832; TTLs 61/64) and mid-path, 0.4 ms from the
/// client and 0.6 ms from the server (port 833; TTLs 62/62).
pub fn tcp_capture_points(opts: &Options) -> Vec<NetPacket> {
    let t0 = opts.start_ns;
    let (mut s, _root, file) = test_nfs_session(opts, 1 << 20, 0xc9, 0x7900_0000, "client04");
    let mut lists = Vec::new();
    for (k, (port, cd, sd, ttl_c, ttl_s)) in [
        (831u16, 0i64, 1_000_000i64, 64u8, 61u8),
        (832, 1_000_000, 0, 61, 64),
        (833, 400_000, 600_000, 62, 62),
    ]
    .into_iter()
    .enumerate()
    {
        let mut sim = nfs_path_sim(opts, port, t0 + k as i64 * 300_000_000, |c| {
            c.client_delay_ns = cd;
            c.server_delay_ns = sd;
            c.client.ttl = ttl_c;
            c.server.ttl = ttl_s;
        });
        nfs_reads(&mut s, &mut sim, file, 512 << 10, 2);
        sim.close(Side::Client);
        lists.push(sim.into_packets());
    }
    merge(lists)
}

// ---------------------------------------------------------------------------
// tcp-cc-reno

/// An 8 MB download (client 10.4.0.10:40100 from 10.4.0.5:5001, RTT 10 ms,
/// 1 Gbit/s, 4 MiB receive buffer, client-side capture) through the
/// simulator's NewReno sender, with server segments lost before the capture
/// point at data segments 400, 1400, 2400 and 3400: slow start, then four
/// fast retransmissions, each halving the window, with linear regrowth.
pub fn tcp_cc_reno(opts: &Options) -> Vec<NetPacket> {
    let mut cfg = TcpConfig::new(
        Endpoint::new(mac(0x61), v4(10, 4, 0, 10), 40100),
        Endpoint::new(mac(0x62), v4(10, 4, 0, 5), 5001),
        10_000_000,
    );
    cfg.start_ns = opts.start_ns;
    cfg.seed = opts.seed ^ 0xcc;
    cfg.client.rcv_buf = 4 << 20;
    cfg.server.ttl = 57;
    for n in [400, 1400, 2400, 3400] {
        cfg.impairments.push(Impairment {
            from: Side::Server,
            nth_data_segment: n,
            action: Action::Drop,
        });
    }
    let mut sim = TcpSim::new(cfg);
    sim.connect();
    sim.send(Side::Client, b"GET /8M\r\n".to_vec());
    sim.send(Side::Server, vec![0x43; 8 << 20]);
    sim.run();
    sim.advance_to(sim.now() + 1_000_000);
    sim.close(Side::Client);
    sim.into_packets()
}
