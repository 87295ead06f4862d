//! A small discrete-event TCP conversation simulator.
//!
//! Hand-written segment lists drift out of consistency as soon as anything
//! interesting happens (a loss shifts every later ACK, window and timestamp),
//! and the analysis engine is exactly about such details. So instead of
//! scripting segments, fixtures simulate two endpoints: each has a send
//! buffer, a receive buffer, an ACK policy (every N segments, delayed-ACK
//! timer, immediate ACKs for out-of-order data), a retransmission timer,
//! NewReno-style fast retransmit after three duplicate ACKs (with SACK blocks
//! in those ACKs when negotiated), a persist timer with zero-window probes,
//! and keep-alives. Packets are recorded when they pass the *capture point*,
//! placed on the path by two one-way delays: `client_delay_ns` between the
//! client and the capture point and `server_delay_ns` between the capture
//! point and the server. A client-side capture (`client_delay_ns == 0`) thus
//! sees a full RTT between SYN and SYN/ACK, as real client captures do.
//!
//! Losses, duplicates and reordering ([`Impairment`]) happen on the server
//! side of the capture point: a lost client segment is captured and then
//! retransmitted; a lost server segment never appears and the capture shows
//! the gap, the client's duplicate ACKs and the retransmission.
//!
//! Applications interact through messages: [`TcpSim::send`] queues bytes on a
//! side and returns a [`MsgId`]; when the peer has received every byte of the
//! message the run loop reports a [`Delivered`] event, on which a driver can
//! queue the response (see `scenario.rs`). Everything is deterministic given
//! [`TcpConfig::seed`].

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::net::IpAddr;

use crate::packet::{self, ipproto, tcp_flags, Mac, NetPacket, TcpHeader, TcpOption};
use crate::rng::Rng;

/// One end of the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The active opener; the capture host when `client_delay_ns` is 0.
    Client,
    Server,
}

impl Side {
    pub fn peer(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }

    fn idx(self) -> usize {
        match self {
            Side::Client => 0,
            Side::Server => 1,
        }
    }
}

/// Addresses of one endpoint.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// MAC address on the capture segment (the router's for remote hosts).
    pub mac: Mac,
    pub ip: IpAddr,
    pub port: u16,
}

impl Endpoint {
    pub fn new(mac: Mac, ip: IpAddr, port: u16) -> Self {
        Endpoint { mac, ip, port }
    }
}

/// Per-endpoint TCP behaviour.
#[derive(Debug, Clone)]
pub struct HostConfig {
    pub endpoint: Endpoint,
    /// MSS advertised in the SYN (MTU minus 40 for IPv4, 60 for IPv6).
    pub mss: u16,
    /// Window-scale shift offered in the SYN (`None`: option not sent).
    pub window_scale: Option<u8>,
    /// Initial sequence number (`None`: random from the seed), e.g. near
    /// 2^32 to make the sequence numbers wrap.
    pub isn: Option<u32>,
    pub sack_permitted: bool,
    pub timestamps: bool,
    /// Receive buffer, i.e. the largest window advertised.
    pub rcv_buf: u32,
    /// TTL (hop limit) of this host's packets as seen at the capture point.
    pub ttl: u8,
    /// Set DF on IPv4 packets (Linux does for TCP).
    pub dont_fragment: bool,
    /// ACK after this many in-order data segments.
    pub ack_every: u32,
    /// Delayed-ACK timeout.
    pub delayed_ack_ns: i64,
    /// Lower bound of the retransmission timeout (Linux: 200 ms).
    pub min_rto_ns: i64,
    /// Initial congestion window, in segments.
    pub initial_cwnd: u32,
    /// Time the stack takes to answer a segment (ACK, SYN/ACK).
    pub stack_delay_ns: i64,
    /// Time between seeing the peer's FIN and closing our side.
    pub close_delay_ns: i64,
    /// End segments at message boundaries, so every message starts a new
    /// segment (Linux with GSO mostly behaves so: one skb per send()).
    /// When false, queued messages are packed into full-sized segments.
    pub message_aligned: bool,
    /// Largest segment handed to the NIC (TSO/GSO), in payload bytes; 0
    /// for none. A capture taken on this host then shows segments larger
    /// than the MSS (up to 64 KiB), as tcpdump on a Linux host does.
    pub tso_max: u32,
}

impl HostConfig {
    /// Linux-like defaults for an Ethernet MTU of 1500.
    pub fn new(endpoint: Endpoint) -> Self {
        let mss = if endpoint.ip.is_ipv4() { 1460 } else { 1440 };
        HostConfig {
            endpoint,
            mss,
            window_scale: Some(7),
            isn: None,
            sack_permitted: true,
            timestamps: true,
            rcv_buf: 1 << 20,
            ttl: 64,
            dont_fragment: true,
            ack_every: 2,
            delayed_ack_ns: 40_000_000,
            min_rto_ns: 200_000_000,
            initial_cwnd: 10,
            stack_delay_ns: 6_000,
            close_delay_ns: 60_000,
            message_aligned: true,
            tso_max: 0,
        }
    }

    /// Set the MSS for a link MTU (e.g. 9000 for jumbo frames).
    pub fn with_mtu(mut self, mtu: u16) -> Self {
        self.mss = if self.endpoint.ip.is_ipv4() {
            mtu - 40
        } else {
            mtu - 60
        };
        self
    }
}

/// What happens to a matched segment on the server side of the capture point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Lost (once; the retransmission goes through).
    Drop,
    /// Delivered twice (a server segment is then also captured twice).
    Duplicate,
    /// Delayed by this many extra nanoseconds, so later segments overtake it.
    Delay(i64),
}

/// Apply `action` to the `nth_data_segment` (0-based, original
/// transmissions carrying payload) sent by `from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Impairment {
    pub from: Side,
    pub nth_data_segment: usize,
    pub action: Action,
}

/// Path and simulation parameters.
#[derive(Debug, Clone)]
pub struct TcpConfig {
    pub client: HostConfig,
    pub server: HostConfig,
    /// One-way delay between the client and the capture point.
    pub client_delay_ns: i64,
    /// One-way delay between the capture point and the server.
    pub server_delay_ns: i64,
    /// Link rate used to space back-to-back packets.
    pub bandwidth_bps: u64,
    /// Random extra stack delay, uniform in `0..jitter_ns`.
    pub jitter_ns: i64,
    /// Time of the first event (ns since the epoch).
    pub start_ns: i64,
    pub seed: u64,
    pub impairments: Vec<Impairment>,
    /// Impairments drawn at random for every original data segment.
    pub random: RandomImpairments,
    /// Impairments happen on the client side of the capture point instead
    /// of the server side (a capture taken on or next to the server): a
    /// lost client segment is then never captured, a lost server segment
    /// is captured and retransmitted.
    pub impair_client_side: bool,
}

/// Per-segment probabilities (parts per million) of an [`Action`] applied
/// to original data transmissions, drawn from a generator of their own so
/// that enabling them does not change any other random choice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RandomImpairments {
    pub loss_ppm: u32,
    pub duplicate_ppm: u32,
    pub reorder_ppm: u32,
    /// Extra delay of a reordered segment.
    pub reorder_delay_ns: i64,
}

impl RandomImpairments {
    fn any(&self) -> bool {
        self.loss_ppm > 0 || self.duplicate_ppm > 0 || self.reorder_ppm > 0
    }
}

impl TcpConfig {
    /// A client-side capture with round-trip time `rtt_ns` on 1 Gbit/s.
    pub fn new(client: Endpoint, server: Endpoint, rtt_ns: i64) -> Self {
        TcpConfig {
            client: HostConfig::new(client),
            server: HostConfig::new(server),
            client_delay_ns: 0,
            server_delay_ns: rtt_ns / 2,
            bandwidth_bps: 1_000_000_000,
            jitter_ns: 4_000,
            start_ns: 0,
            seed: 1,
            impairments: Vec::new(),
            random: RandomImpairments::default(),
            impair_client_side: false,
        }
    }
}

/// Identifies an application message queued with [`TcpSim::send`].
pub type MsgId = u64;

/// A message fully received by `to` at `at_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    pub to: Side,
    pub id: MsgId,
    pub at_ns: i64,
}

/// Counters of what the simulation did, for tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TcpStats {
    pub segments: u64,
    pub retransmissions: u64,
    pub fast_retransmits: u64,
    pub timeouts: u64,
    pub dup_acks: u64,
    pub zero_window_probes: u64,
    pub keepalives: u64,
}

#[derive(Debug, Clone)]
struct Seg {
    from: Side,
    seq: u32,
    ack: u32,
    flags: u8,
    window: u16,
    options: Vec<TcpOption>,
    payload: Vec<u8>,
}

enum Ev {
    Connect,
    Arrive(Seg),
    Rto(Side, u64),
    DelAck(Side, u64),
    Persist(Side, u64),
    AppSend(Side, Vec<u8>, MsgId),
    AppClose(Side),
    AppStall(Side, bool),
    KeepAlive(Side, u32, i64),
    Reset(Side),
}

struct Scheduled {
    at: i64,
    order: u64,
    ev: Ev,
}

impl PartialEq for Scheduled {
    fn eq(&self, o: &Self) -> bool {
        self.at == o.at && self.order == o.order
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Scheduled {
    // Reversed: BinaryHeap is a max-heap and we want the earliest event.
    fn cmp(&self, o: &Self) -> Ordering {
        o.at.cmp(&self.at).then(o.order.cmp(&self.order))
    }
}

/// One endpoint's state. Stream positions are 64-bit offsets from the first
/// data byte (sequence number ISN + 1), so long transfers never wrap.
struct Host {
    cfg: HostConfig,
    iss: u32,
    established: bool,
    closed: bool,
    syn_time: i64,
    rtt_est: i64,
    // Negotiated.
    peer_mss: u16,
    snd_shift: u8,
    rcv_shift: u8,
    sack: bool,
    ts: bool,
    ts_off: u32,
    ts_recent: u32,
    // Sending.
    buf: Vec<u8>,
    buf_base: u64,
    queued: u64,
    una: u64,
    nxt: u64,
    high: u64,
    msg_ends: VecDeque<u64>,
    deliver_q: VecDeque<(u64, MsgId)>,
    fin_queued: bool,
    fin_sent: bool,
    fin_acked: bool,
    peer_wnd: u64,
    cwnd: u64,
    ssthresh: u64,
    dupacks: u32,
    recover: Option<u64>,
    rto_gen: u64,
    rto_armed: bool,
    backoff: u32,
    persist_gen: u64,
    persist_armed: bool,
    persist_backoff: u32,
    // Receiving.
    peer_iss: u32,
    rcv_nxt: u64,
    fin_rcvd: bool,
    fin_at: Option<u64>,
    ooo: Vec<(u64, u64)>,
    recent_block: Option<(u64, u64)>,
    dsack: Option<(u64, u64)>,
    pending_acks: u32,
    delack_gen: u64,
    delack_armed: bool,
    stalled: bool,
    unread: u64,
    // Link.
    link_free: i64,
    ip_id: u16,
}

impl Host {
    fn new(cfg: HostConfig, rng: &mut Rng) -> Self {
        Host {
            iss: {
                let random = rng.next_u32();
                cfg.isn.unwrap_or(random)
            },
            established: false,
            closed: false,
            syn_time: 0,
            rtt_est: 0,
            peer_mss: 536,
            snd_shift: 0,
            rcv_shift: 0,
            sack: false,
            ts: false,
            ts_off: rng.next_u32(),
            ts_recent: 0,
            buf: Vec::new(),
            buf_base: 0,
            queued: 0,
            una: 0,
            nxt: 0,
            high: 0,
            msg_ends: VecDeque::new(),
            deliver_q: VecDeque::new(),
            fin_queued: false,
            fin_sent: false,
            fin_acked: false,
            peer_wnd: 0,
            cwnd: 0,
            ssthresh: u64::MAX,
            dupacks: 0,
            recover: None,
            rto_gen: 0,
            rto_armed: false,
            backoff: 0,
            persist_gen: 0,
            persist_armed: false,
            persist_backoff: 0,
            peer_iss: 0,
            rcv_nxt: 0,
            fin_rcvd: false,
            fin_at: None,
            ooo: Vec::new(),
            recent_block: None,
            dsack: None,
            pending_acks: 0,
            delack_gen: 0,
            delack_armed: false,
            stalled: false,
            unread: 0,
            link_free: i64::MIN,
            ip_id: rng.next_u16(),
            cfg,
        }
    }

    fn seq_of(&self, off: u64) -> u32 {
        self.iss.wrapping_add(1).wrapping_add(off as u32)
    }

    fn peer_seq_of(&self, off: u64) -> u32 {
        self.peer_iss.wrapping_add(1).wrapping_add(off as u32)
    }

    /// Offset of peer sequence number `seq`, unwrapped near `rcv_nxt`.
    fn peer_off(&self, seq: u32) -> i64 {
        self.rcv_nxt as i64 + seq.wrapping_sub(self.peer_seq_of(self.rcv_nxt)) as i32 as i64
    }

    fn ack_value(&self) -> u32 {
        self.peer_seq_of(self.rcv_nxt)
            .wrapping_add(self.fin_rcvd as u32)
    }

    /// Sequence number of our next new byte (after the FIN once sent).
    fn snd_seq(&self) -> u32 {
        self.seq_of(self.nxt).wrapping_add(self.fin_sent as u32)
    }

    fn seg_size(&self) -> u64 {
        let mss = self.cfg.mss.min(self.peer_mss) as u64;
        mss - if self.ts { 12 } else { 0 }
    }

    /// Largest segment put on the capture: the MSS, or with TSO the
    /// largest multiple of it within `tso_max` (and an IP packet).
    fn send_size(&self) -> u64 {
        let mss = self.seg_size();
        let tso = (self.cfg.tso_max as u64).min(65_535 - 60 - 40);
        if tso > mss {
            tso / mss * mss
        } else {
            mss
        }
    }

    fn window_bytes(&self) -> u64 {
        (self.cfg.rcv_buf as u64).saturating_sub(self.unread)
    }

    fn adv_window(&self) -> u16 {
        (self.window_bytes() >> self.rcv_shift).min(65535) as u16
    }

    fn tsval(&self, at: i64) -> u32 {
        ((at / 1_000_000) as u32).wrapping_add(self.ts_off)
    }

    fn rto(&self) -> i64 {
        (self.cfg.min_rto_ns + self.rtt_est) << self.backoff.min(6)
    }

    /// SACK blocks for an outgoing ACK: a D-SACK block first, then the most
    /// recently received out-of-order block, then the others.
    fn sack_blocks(&mut self) -> Vec<(u32, u32)> {
        if !self.sack {
            return Vec::new();
        }
        let max = if self.ts { 3 } else { 4 };
        let mut blocks = Vec::new();
        if let Some((l, r)) = self.dsack.take() {
            blocks.push((l, r));
        }
        let recent = self
            .recent_block
            .and_then(|(l, r)| self.ooo.iter().copied().find(|&(a, b)| a <= l && r <= b));
        if let Some(b) = recent {
            blocks.push(b);
        }
        for &b in self.ooo.iter().rev() {
            if Some(b) != recent {
                blocks.push(b);
            }
        }
        blocks.truncate(max);
        blocks
            .into_iter()
            .map(|(l, r)| (self.peer_seq_of(l), self.peer_seq_of(r)))
            .collect()
    }

    fn options(&mut self, at: i64, with_sack: bool) -> Vec<TcpOption> {
        let mut o = Vec::new();
        if self.ts {
            o.extend([
                TcpOption::Nop,
                TcpOption::Nop,
                TcpOption::Timestamps {
                    val: self.tsval(at),
                    ecr: self.ts_recent,
                },
            ]);
        }
        if with_sack {
            let blocks = self.sack_blocks();
            if !blocks.is_empty() {
                o.extend([TcpOption::Nop, TcpOption::Nop, TcpOption::Sack(blocks)]);
            }
        }
        o
    }

    fn syn_options(
        &self,
        at: i64,
        ecr: u32,
        sack: bool,
        ts: bool,
        ws: Option<u8>,
    ) -> Vec<TcpOption> {
        let mut o = vec![TcpOption::Mss(self.cfg.mss)];
        let tso = TcpOption::Timestamps {
            val: self.tsval(at),
            ecr,
        };
        match (sack, ts) {
            (true, true) => o.extend([TcpOption::SackPermitted, tso]),
            (true, false) => o.extend([TcpOption::Nop, TcpOption::Nop, TcpOption::SackPermitted]),
            (false, true) => o.extend([TcpOption::Nop, TcpOption::Nop, tso]),
            (false, false) => {}
        }
        if let Some(s) = ws {
            o.extend([TcpOption::Nop, TcpOption::WindowScale(s)]);
        }
        o
    }

    /// Adopt what the peer's SYN (or SYN/ACK) offered.
    fn negotiate(&mut self, seg: &Seg) {
        self.peer_iss = seg.seq;
        self.peer_wnd = seg.window as u64;
        let mut peer_ws = None;
        let (mut sack, mut ts) = (false, false);
        for o in &seg.options {
            match o {
                TcpOption::Mss(m) => self.peer_mss = *m,
                TcpOption::WindowScale(s) => peer_ws = Some((*s).min(14)),
                TcpOption::SackPermitted => sack = true,
                TcpOption::Timestamps { val, .. } => {
                    ts = true;
                    self.ts_recent = *val;
                }
                _ => {}
            }
        }
        self.sack = sack && self.cfg.sack_permitted;
        self.ts = ts && self.cfg.timestamps;
        if let (Some(ours), Some(theirs)) = (self.cfg.window_scale, peer_ws) {
            self.rcv_shift = ours;
            self.snd_shift = theirs;
        }
        self.cwnd = self.cfg.initial_cwnd as u64 * self.seg_size();
    }

    /// Largest segment starting at `off`: the MSS, cut at the next message
    /// boundary when messages are aligned, and at the end of queued data.
    fn seg_limit(&self, off: u64) -> u64 {
        let mut end = self.queued;
        if self.cfg.message_aligned {
            let i = self.msg_ends.partition_point(|&e| e <= off);
            if let Some(&e) = self.msg_ends.get(i) {
                end = end.min(e);
            }
        }
        self.send_size().min(end - off)
    }

    fn trim_buffer(&mut self) {
        // Drop acknowledged bytes once they are at least half the buffer
        // (and 256 KiB), so the copy this costs stays below one per byte.
        let done = self.una - self.buf_base;
        if done > (256 << 10) && done as usize * 2 >= self.buf.len() {
            self.buf.drain(..done as usize);
            self.buf_base = self.una;
        }
        while self.msg_ends.front().is_some_and(|&e| e <= self.una) {
            self.msg_ends.pop_front();
        }
    }
}

/// The simulator. See the module documentation.
pub struct TcpSim {
    hosts: [Host; 2],
    client_delay_ns: i64,
    server_delay_ns: i64,
    bandwidth_bps: u64,
    jitter_ns: i64,
    impairments: Vec<Impairment>,
    now: i64,
    queue: BinaryHeap<Scheduled>,
    order: u64,
    out: Vec<NetPacket>,
    rng: Rng,
    next_msg: MsgId,
    delivered: VecDeque<Delivered>,
    data_segs: [usize; 2],
    random: RandomImpairments,
    random_rng: Rng,
    impair_client_side: bool,
    stats: TcpStats,
}

impl TcpSim {
    pub fn new(cfg: TcpConfig) -> Self {
        let mut rng = Rng::new(cfg.seed);
        let random_rng = rng.fork(0x001a_9a17);
        let client = Host::new(cfg.client, &mut rng);
        let server = Host::new(cfg.server, &mut rng);
        assert_eq!(
            client.cfg.endpoint.ip.is_ipv4(),
            server.cfg.endpoint.ip.is_ipv4(),
            "client and server must use the same address family"
        );
        TcpSim {
            hosts: [client, server],
            client_delay_ns: cfg.client_delay_ns,
            server_delay_ns: cfg.server_delay_ns,
            bandwidth_bps: cfg.bandwidth_bps.max(1),
            jitter_ns: cfg.jitter_ns,
            impairments: cfg.impairments,
            now: cfg.start_ns,
            queue: BinaryHeap::new(),
            order: 0,
            out: Vec::new(),
            rng,
            next_msg: 0,
            delivered: VecDeque::new(),
            data_segs: [0, 0],
            random: cfg.random,
            random_rng,
            impair_client_side: cfg.impair_client_side,
            stats: TcpStats::default(),
        }
    }

    /// Current simulated time.
    pub fn now(&self) -> i64 {
        self.now
    }

    pub fn stats(&self) -> &TcpStats {
        &self.stats
    }

    /// Whether the connection is established at `side`.
    pub fn is_established(&self, side: Side) -> bool {
        let h = &self.hosts[side.idx()];
        h.established && !h.closed
    }

    /// Packets captured so far, in the order they were produced.
    pub fn packets(&self) -> &[NetPacket] {
        &self.out
    }

    /// Take the packets captured so far (in the order they were produced,
    /// which is not quite timestamp order), leaving none. Every packet
    /// captured later has a timestamp at or after [`TcpSim::next_event_at`]
    /// at the time of the call, so a streaming writer can merge several
    /// simulations with a bounded buffer.
    pub fn take_packets(&mut self) -> Vec<NetPacket> {
        std::mem::take(&mut self.out)
    }

    /// Time of the next pending event (possibly a cancelled timer), a lower
    /// bound for every packet still to be captured; `None` when idle.
    pub fn next_event_at(&self) -> Option<i64> {
        self.queue.peek().map(|s| s.at)
    }

    /// Process the next event if it is due by `until`; false when none is.
    /// Messages it delivered are then available from
    /// [`TcpSim::pop_delivered`].
    pub fn step_due(&mut self, until: i64) -> bool {
        self.step(Some(until))
    }

    /// The next delivered message not yet reported.
    pub fn pop_delivered(&mut self) -> Option<Delivered> {
        self.delivered.pop_front()
    }

    /// Schedule the SYN at the current time without running the simulation
    /// (the non-blocking form of [`TcpSim::connect`]). Data queued before
    /// the handshake completes is sent once it does.
    pub fn start_connect(&mut self) {
        self.schedule(self.now, Ev::Connect);
    }

    /// `side` closes at `at` (FIN after its queued data), without running.
    pub fn close_at(&mut self, side: Side, at: i64) {
        self.schedule(at.max(self.now), Ev::AppClose(side));
    }

    /// All captured packets, sorted by timestamp.
    pub fn into_packets(mut self) -> Vec<NetPacket> {
        self.out.sort_by_key(|p| p.ts_ns);
        self.out
    }

    fn schedule(&mut self, at: i64, ev: Ev) {
        self.order += 1;
        self.queue.push(Scheduled {
            at,
            order: self.order,
            ev,
        });
    }

    fn stack_delay(&mut self, side: Side) -> i64 {
        let base = self.hosts[side.idx()].cfg.stack_delay_ns;
        self.rng.jitter(base, self.jitter_ns)
    }

    // -- Public driving API ------------------------------------------------

    /// Send the SYN now and run until the client is established.
    pub fn connect(&mut self) {
        self.schedule(self.now, Ev::Connect);
        self.run_until(|_, _| {}, |s| s.hosts[0].established || s.hosts[0].closed);
    }

    /// Queue `data` on `side` now; returns the message's id.
    pub fn send(&mut self, side: Side, data: Vec<u8>) -> MsgId {
        self.send_at(side, self.now, data)
    }

    /// Queue `data` on `side` at time `at` (not before now).
    pub fn send_at(&mut self, side: Side, at: i64, data: Vec<u8>) -> MsgId {
        self.next_msg += 1;
        let id = self.next_msg;
        self.schedule(at.max(self.now), Ev::AppSend(side, data, id));
        id
    }

    /// `side` closes (FIN after its queued data); the peer closes in turn.
    /// Runs until the connection is finished.
    pub fn close(&mut self, side: Side) {
        self.schedule(self.now, Ev::AppClose(side));
        self.run();
    }

    /// `side` aborts the connection with RST at time `at`.
    pub fn reset_at(&mut self, side: Side, at: i64) {
        self.schedule(at.max(self.now), Ev::Reset(side));
    }

    /// The application on `side` stops reading at `at` for `duration_ns`,
    /// so its receive window fills up and closes; on resuming it reads
    /// everything and sends a window update.
    pub fn stall_reader(&mut self, side: Side, at: i64, duration_ns: i64) {
        self.schedule(at.max(self.now), Ev::AppStall(side, true));
        self.schedule(at.max(self.now) + duration_ns, Ev::AppStall(side, false));
    }

    /// `side` sends `count` keep-alives, one every `interval_ns`, starting
    /// `interval_ns` from now; the peer answers each.
    pub fn keepalive(&mut self, side: Side, count: u32, interval_ns: i64) {
        if count > 0 {
            self.schedule(
                self.now + interval_ns,
                Ev::KeepAlive(side, count, interval_ns),
            );
        }
    }

    /// Run until no event is left.
    pub fn run(&mut self) {
        self.run_until(|_, _| {}, |_| false);
    }

    /// Run until no event is left, calling `f` for every delivered message.
    pub fn run_with<F: FnMut(&mut TcpSim, Delivered)>(&mut self, f: F) {
        self.run_until(f, |_| false);
    }

    /// Run, calling `f` for every delivered message, until `stop` holds
    /// (checked after each event) or no event is left.
    pub fn run_until<F, S>(&mut self, mut f: F, stop: S)
    where
        F: FnMut(&mut TcpSim, Delivered),
        S: Fn(&TcpSim) -> bool,
    {
        while !stop(self) {
            if !self.step(None) {
                break;
            }
            while let Some(d) = self.delivered.pop_front() {
                f(self, d);
            }
        }
    }

    /// Let time pass: process every event up to `t` (delayed ACKs, timers;
    /// deliveries in that span are not reported), then set the clock to `t`.
    pub fn advance_to(&mut self, t: i64) {
        while self.step(Some(t)) {
            self.delivered.clear();
        }
        self.now = self.now.max(t);
    }

    // -- Event loop --------------------------------------------------------

    fn is_stale(&self, ev: &Ev) -> bool {
        match *ev {
            Ev::Rto(s, g) => {
                let h = &self.hosts[s.idx()];
                !h.rto_armed || h.rto_gen != g || h.closed
            }
            Ev::DelAck(s, g) => {
                let h = &self.hosts[s.idx()];
                !h.delack_armed || h.delack_gen != g || h.closed
            }
            Ev::Persist(s, g) => {
                let h = &self.hosts[s.idx()];
                !h.persist_armed || h.persist_gen != g || h.closed
            }
            _ => false,
        }
    }

    /// Process one event (only if it is due by `until`); false when none.
    fn step(&mut self, until: Option<i64>) -> bool {
        loop {
            let Some(top) = self.queue.peek() else {
                return false;
            };
            if until.is_some_and(|t| top.at > t) {
                return false;
            }
            let s = self.queue.pop().expect("peeked");
            if self.is_stale(&s.ev) {
                continue;
            }
            self.now = self.now.max(s.at);
            self.handle(s.ev);
            return true;
        }
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Connect => self.on_connect(),
            Ev::Arrive(seg) => self.on_arrive(seg),
            Ev::Rto(s, _) => self.on_rto(s),
            Ev::DelAck(s, _) => {
                self.hosts[s.idx()].delack_armed = false;
                self.send_ack(s, self.now);
            }
            Ev::Persist(s, _) => self.on_persist(s),
            Ev::AppSend(s, data, id) => {
                let h = &mut self.hosts[s.idx()];
                if h.closed || h.fin_queued {
                    return;
                }
                h.buf.extend_from_slice(&data);
                h.queued += data.len() as u64;
                h.msg_ends.push_back(h.queued);
                h.deliver_q.push_back((h.queued, id));
                self.try_send(s);
            }
            Ev::AppClose(s) => {
                let h = &mut self.hosts[s.idx()];
                if !h.fin_queued && !h.closed {
                    h.fin_queued = true;
                    self.try_send(s);
                }
            }
            Ev::AppStall(s, on) => {
                let h = &mut self.hosts[s.idx()];
                h.stalled = on;
                if !on {
                    h.unread = 0;
                    let at = self.now;
                    self.send_ack(s, at);
                }
            }
            Ev::KeepAlive(s, left, interval) => {
                let h = &mut self.hosts[s.idx()];
                if h.closed || !h.established {
                    return;
                }
                // RFC 9293 keep-alive: one byte below SND.NXT, no data.
                let at = self.now;
                let seg = Seg {
                    from: s,
                    seq: h.snd_seq().wrapping_sub(1),
                    ack: h.ack_value(),
                    flags: tcp_flags::ACK,
                    window: h.adv_window(),
                    options: h.options(at, false),
                    payload: Vec::new(),
                };
                self.stats.keepalives += 1;
                self.xmit(seg, at, false);
                if left > 1 {
                    self.schedule(at + interval, Ev::KeepAlive(s, left - 1, interval));
                }
            }
            Ev::Reset(s) => {
                let h = &mut self.hosts[s.idx()];
                if h.closed {
                    return;
                }
                h.closed = true;
                let seg = Seg {
                    from: s,
                    seq: h.snd_seq(),
                    ack: h.ack_value(),
                    flags: tcp_flags::RST | tcp_flags::ACK,
                    window: 0,
                    options: Vec::new(),
                    payload: Vec::new(),
                };
                let at = self.now;
                self.xmit(seg, at, false);
            }
        }
    }

    fn on_connect(&mut self) {
        let at = self.now;
        let h = &mut self.hosts[0];
        h.syn_time = at;
        let (sack, ts, ws) = (h.cfg.sack_permitted, h.cfg.timestamps, h.cfg.window_scale);
        let seg = Seg {
            from: Side::Client,
            seq: h.iss,
            ack: 0,
            flags: tcp_flags::SYN,
            window: h.cfg.rcv_buf.min(65535) as u16,
            options: h.syn_options(at, 0, sack, ts, ws),
            payload: Vec::new(),
        };
        self.xmit(seg, at, false);
    }

    /// Put a segment on the wire from `seg.from` no earlier than `at`.
    fn xmit(&mut self, seg: Seg, at: i64, original_data: bool) {
        let from = seg.from;
        let i = from.idx();
        let (src, dst) = (&self.hosts[i].cfg.endpoint, &self.hosts[1 - i].cfg.endpoint);
        let hdr = TcpHeader {
            src_port: src.port,
            dst_port: dst.port,
            seq: seg.seq,
            ack: seg.ack,
            flags: seg.flags,
            window: seg.window,
            urgent: 0,
            options: seg.options.clone(),
        };
        let l4 = packet::tcp(src.ip, dst.ip, &hdr, &seg.payload);
        let h = &self.hosts[i];
        let (ethertype, data) = packet::ip_packet(
            src.ip,
            dst.ip,
            ipproto::TCP,
            h.cfg.ttl,
            h.ip_id,
            h.cfg.dont_fragment,
            &l4,
        );
        let (src_mac, dst_mac) = (src.mac, dst.mac);
        let h = &mut self.hosts[i];
        h.ip_id = h.ip_id.wrapping_add(1);
        // Preamble, Ethernet header, FCS and inter-frame gap add 38 bytes.
        let wire_bits = (data.len() as u64 + 38) * 8;
        let ser = (wire_bits * 1_000_000_000 / self.bandwidth_bps) as i64;
        let depart = at.max(h.link_free);
        h.link_free = depart + ser;
        let (cd, sd) = (self.client_delay_ns, self.server_delay_ns);
        let (cap_ts, arrive) = match from {
            Side::Client => (depart + cd, depart + ser + cd + sd),
            Side::Server => (depart + ser + sd, depart + ser + sd + cd),
        };
        let action = if original_data {
            let n = self.data_segs[i];
            self.data_segs[i] += 1;
            self.impairments
                .iter()
                .find(|imp| imp.from == from && imp.nth_data_segment == n)
                .map(|imp| imp.action)
                .or_else(|| self.random_action())
        } else {
            None
        };
        self.stats.segments += 1;
        let pkt = NetPacket {
            ts_ns: cap_ts,
            src_mac,
            dst_mac,
            outgoing: from == Side::Client,
            ethertype,
            data,
        };
        // Whether the segment passes the capture point before the place
        // where impairments happen.
        let captured_first = (from == Side::Client) != self.impair_client_side;
        match action {
            None => {
                self.out.push(pkt);
                self.schedule(arrive, Ev::Arrive(seg));
            }
            Some(Action::Drop) => {
                if captured_first {
                    self.out.push(pkt);
                }
            }
            Some(Action::Duplicate) => {
                if !captured_first {
                    let mut dup = pkt.clone();
                    dup.ts_ns += 1_000;
                    self.out.push(dup);
                }
                self.out.push(pkt);
                self.schedule(arrive, Ev::Arrive(seg.clone()));
                self.schedule(arrive + 1_000, Ev::Arrive(seg));
            }
            Some(Action::Delay(d)) => {
                let mut pkt = pkt;
                if !captured_first {
                    pkt.ts_ns += d;
                }
                self.out.push(pkt);
                self.schedule(arrive + d, Ev::Arrive(seg));
            }
        }
    }

    fn random_action(&mut self) -> Option<Action> {
        let r = self.random;
        if !r.any() {
            return None;
        }
        let x = self.random_rng.below(1_000_000) as u32;
        if x < r.loss_ppm {
            Some(Action::Drop)
        } else if x < r.loss_ppm + r.duplicate_ppm {
            Some(Action::Duplicate)
        } else if x < r.loss_ppm + r.duplicate_ppm + r.reorder_ppm {
            Some(Action::Delay(r.reorder_delay_ns))
        } else {
            None
        }
    }

    fn send_ack(&mut self, s: Side, at: i64) {
        let h = &mut self.hosts[s.idx()];
        if h.closed {
            return;
        }
        h.pending_acks = 0;
        h.delack_armed = false;
        let seg = Seg {
            from: s,
            seq: h.snd_seq(),
            ack: h.ack_value(),
            flags: tcp_flags::ACK,
            window: h.adv_window(),
            options: h.options(at, true),
            payload: Vec::new(),
        };
        self.xmit(seg, at, false);
    }

    fn arm_rto(&mut self, s: Side, restart: bool) {
        let h = &mut self.hosts[s.idx()];
        if h.rto_armed && !restart {
            return;
        }
        h.rto_armed = true;
        h.rto_gen += 1;
        let (g, at) = (h.rto_gen, self.now + h.rto());
        self.schedule(at, Ev::Rto(s, g));
    }

    fn arm_delack(&mut self, s: Side) {
        let h = &mut self.hosts[s.idx()];
        if h.delack_armed {
            return;
        }
        h.delack_armed = true;
        h.delack_gen += 1;
        let (g, at) = (h.delack_gen, self.now + h.cfg.delayed_ack_ns);
        self.schedule(at, Ev::DelAck(s, g));
    }

    fn arm_persist(&mut self, s: Side) {
        let h = &mut self.hosts[s.idx()];
        if h.persist_armed {
            return;
        }
        h.persist_armed = true;
        h.persist_gen += 1;
        let interval = (h.cfg.min_rto_ns + h.rtt_est) << h.persist_backoff.min(6);
        let (g, at) = (h.persist_gen, self.now + interval);
        self.schedule(at, Ev::Persist(s, g));
    }

    /// A segment of our data `[off, off + len)`; clears pending ACKs since
    /// it carries one.
    fn data_seg(&mut self, s: Side, off: u64, len: u64, at: i64) -> Seg {
        let h = &mut self.hosts[s.idx()];
        let start = (off - h.buf_base) as usize;
        let payload = h.buf[start..start + len as usize].to_vec();
        let end = off + len;
        let psh = end == h.queued || h.msg_ends.binary_search(&end).is_ok();
        h.pending_acks = 0;
        h.delack_armed = false;
        let with_sack = !h.ooo.is_empty();
        Seg {
            from: s,
            seq: h.seq_of(off),
            ack: h.ack_value(),
            flags: tcp_flags::ACK | if psh { tcp_flags::PSH } else { 0 },
            window: h.adv_window(),
            options: h.options(at, with_sack),
            payload,
        }
    }

    fn fin_seg(&mut self, s: Side, at: i64) -> Seg {
        let h = &mut self.hosts[s.idx()];
        h.pending_acks = 0;
        h.delack_armed = false;
        Seg {
            from: s,
            seq: h.seq_of(h.queued),
            ack: h.ack_value(),
            flags: tcp_flags::FIN | tcp_flags::ACK,
            window: h.adv_window(),
            options: h.options(at, false),
            payload: Vec::new(),
        }
    }

    /// Send new data (and the FIN) as far as the windows allow.
    fn try_send(&mut self, s: Side) {
        loop {
            let at = self.now;
            let h = &mut self.hosts[s.idx()];
            if !h.established || h.closed {
                return;
            }
            if h.nxt < h.queued {
                let flight = h.nxt - h.una;
                let wnd = h.peer_wnd.min(h.cwnd);
                if flight >= wnd {
                    if h.peer_wnd == 0 && flight == 0 {
                        self.arm_persist(s);
                    }
                    return;
                }
                let want = h.seg_limit(h.nxt);
                let len = want.min(wnd - flight);
                // Sender-side silly-window avoidance: no window-limited
                // short segment while data is in flight.
                if len < want && flight > 0 {
                    return;
                }
                let off = h.nxt;
                let original = off >= h.high;
                h.nxt += len;
                h.high = h.high.max(h.nxt);
                let seg = self.data_seg(s, off, len, at);
                self.xmit(seg, at, original);
                self.arm_rto(s, false);
                continue;
            }
            if h.fin_queued && !h.fin_sent {
                h.fin_sent = true;
                let seg = self.fin_seg(s, at);
                self.xmit(seg, at, false);
                self.arm_rto(s, false);
            }
            return;
        }
    }

    fn retransmit(&mut self, s: Side, at: i64) {
        let h = &mut self.hosts[s.idx()];
        let off = h.una;
        let len = h.seg_limit(off).min(h.seg_size()).min(h.nxt - off);
        self.stats.retransmissions += 1;
        let seg = if len > 0 {
            self.data_seg(s, off, len, at)
        } else {
            self.fin_seg(s, at)
        };
        self.xmit(seg, at, false);
    }

    fn outstanding(&self, s: Side) -> bool {
        let h = &self.hosts[s.idx()];
        h.una < h.nxt || (h.fin_sent && !h.fin_acked)
    }

    fn on_rto(&mut self, s: Side) {
        self.hosts[s.idx()].rto_armed = false;
        if !self.outstanding(s) {
            return;
        }
        let h = &mut self.hosts[s.idx()];
        let mss = h.seg_size();
        h.ssthresh = ((h.nxt - h.una) / 2).max(2 * mss);
        h.cwnd = mss;
        h.recover = Some(h.nxt);
        h.dupacks = 0;
        h.backoff += 1;
        self.stats.timeouts += 1;
        let at = self.now;
        self.retransmit(s, at);
        self.arm_rto(s, true);
    }

    fn on_persist(&mut self, s: Side) {
        let h = &mut self.hosts[s.idx()];
        h.persist_armed = false;
        if h.closed || h.peer_wnd > 0 || h.nxt >= h.queued || h.una != h.nxt {
            return;
        }
        h.persist_backoff += 1;
        // Zero-window probe: the next byte, which the receiver will refuse.
        let at = self.now;
        let off = h.nxt;
        let seg = self.data_seg(s, off, 1, at);
        self.stats.zero_window_probes += 1;
        self.xmit(seg, at, false);
        self.arm_persist(s);
    }

    fn on_arrive(&mut self, seg: Seg) {
        let me = seg.from.peer();
        let i = me.idx();
        if self.hosts[i].closed {
            return;
        }
        if seg.flags & tcp_flags::RST != 0 {
            self.hosts[i].closed = true;
            return;
        }
        if seg.flags & tcp_flags::SYN != 0 {
            self.on_syn(me, seg);
            return;
        }
        let h = &mut self.hosts[i];
        if !h.established {
            // Server: the ACK completing the handshake.
            if seg.flags & tcp_flags::ACK != 0 && seg.ack == h.iss.wrapping_add(1) {
                h.established = true;
                h.rtt_est = self.now - h.syn_time;
            } else {
                return;
            }
        }
        if h.ts {
            if let Some(TcpOption::Timestamps { val, .. }) = seg
                .options
                .iter()
                .find(|o| matches!(o, TcpOption::Timestamps { .. }))
            {
                if h.peer_off(seg.seq) <= h.rcv_nxt as i64 {
                    h.ts_recent = *val;
                }
            }
        }
        if seg.flags & tcp_flags::ACK != 0 {
            self.on_ack(me, &seg);
        }
        self.on_data(me, seg);
    }

    fn on_syn(&mut self, me: Side, seg: Seg) {
        let at = self.now + self.stack_delay(me);
        let h = &mut self.hosts[me.idx()];
        if seg.flags & tcp_flags::ACK != 0 {
            // Client: SYN/ACK.
            if me != Side::Client || seg.ack != h.iss.wrapping_add(1) {
                return;
            }
            if !h.established {
                h.negotiate(&seg);
                h.established = true;
                h.rtt_est = self.now - h.syn_time;
            }
            self.send_ack(me, at);
            self.try_send(me);
        } else {
            // Server: SYN.
            if me != Side::Server || h.established {
                return;
            }
            h.negotiate(&seg);
            h.syn_time = at;
            let ws = if h.snd_shift > 0
                || seg
                    .options
                    .iter()
                    .any(|o| matches!(o, TcpOption::WindowScale(_)))
            {
                h.cfg.window_scale
            } else {
                None
            };
            let syn_ack = Seg {
                from: me,
                seq: h.iss,
                ack: h.peer_iss.wrapping_add(1),
                flags: tcp_flags::SYN | tcp_flags::ACK,
                window: h.cfg.rcv_buf.min(65535) as u16,
                options: h.syn_options(at, h.ts_recent, h.sack, h.ts, ws),
                payload: Vec::new(),
            };
            self.xmit(syn_ack, at, false);
        }
    }

    fn on_ack(&mut self, me: Side, seg: &Seg) {
        let h = &mut self.hosts[me.idx()];
        let mut ack_off = h.una as i64 + seg.ack.wrapping_sub(h.seq_of(h.una)) as i32 as i64;
        if h.fin_sent && ack_off == h.queued as i64 + 1 {
            h.fin_acked = true;
            ack_off = h.queued as i64;
        }
        let wnd = (seg.window as u64) << h.snd_shift;
        let mss = h.seg_size();
        let at = self.now;
        if ack_off > h.una as i64 && ack_off <= h.nxt as i64 {
            let acked = ack_off as u64 - h.una;
            h.una = ack_off as u64;
            h.dupacks = 0;
            h.backoff = 0;
            h.persist_backoff = 0;
            h.trim_buffer();
            let partial = match h.recover {
                Some(r) if h.una < r => true,
                Some(_) => {
                    h.recover = None;
                    h.cwnd = h.ssthresh.max(2 * mss);
                    false
                }
                None => {
                    h.cwnd += if h.cwnd < h.ssthresh {
                        acked
                    } else {
                        (mss * mss / h.cwnd).max(1)
                    };
                    false
                }
            };
            h.peer_wnd = wnd;
            if partial {
                self.retransmit(me, at);
            }
            if self.outstanding(me) {
                self.arm_rto(me, true);
            }
        } else if ack_off == h.una as i64
            && seg.payload.is_empty()
            && seg.flags & tcp_flags::FIN == 0
            && h.nxt > h.una
            && wnd == h.peer_wnd
        {
            h.dupacks += 1;
            if h.dupacks == 3 && h.recover.is_none() {
                h.ssthresh = ((h.nxt - h.una) / 2).max(2 * mss);
                h.cwnd = h.ssthresh + 3 * mss;
                h.recover = Some(h.nxt);
                self.stats.fast_retransmits += 1;
                self.retransmit(me, at);
                self.arm_rto(me, true);
            } else if h.recover.is_some() {
                h.cwnd += mss;
            }
        }
        let idle = !self.outstanding(me);
        let h = &mut self.hosts[me.idx()];
        if idle {
            h.rto_armed = false;
        }
        if ack_off >= h.una as i64 {
            h.peer_wnd = wnd;
        }
        if h.peer_wnd > 0 {
            h.persist_armed = false;
        }
        self.try_send(me);
    }

    fn on_data(&mut self, me: Side, seg: Seg) {
        let ack_at = self.now + self.stack_delay(me);
        let h = &mut self.hosts[me.idx()];
        let plen = seg.payload.len() as u64;
        let fin = seg.flags & tcp_flags::FIN != 0;
        let start = h.peer_off(seg.seq);
        if plen == 0 && !fin {
            // A keep-alive (below RCV.NXT) is answered at once.
            if start < h.rcv_nxt as i64 {
                self.send_ack(me, ack_at);
            }
            return;
        }
        if fin && h.fin_rcvd {
            // Retransmitted FIN.
            self.send_ack(me, ack_at);
            return;
        }
        let end = start + plen as i64;
        if start > h.rcv_nxt as i64 {
            // Out of order: keep it, answer with a duplicate ACK (+SACK).
            if plen > 0 {
                insert_range(&mut h.ooo, (start as u64, end as u64));
                h.recent_block = Some((start as u64, end as u64));
            }
            if fin {
                h.fin_at = Some(end as u64);
            }
            self.stats.dup_acks += 1;
            self.send_ack(me, ack_at);
            return;
        }
        if end <= h.rcv_nxt as i64 && plen > 0 {
            // Entirely old data: D-SACK it.
            h.dsack = Some((start.max(0) as u64, end as u64));
            self.stats.dup_acks += 1;
            self.send_ack(me, ack_at);
            return;
        }
        let new = (end - h.rcv_nxt as i64) as u64;
        if new > 0 && (new > h.window_bytes() || h.adv_window() == 0) {
            // No room: a zero-window probe (refused even when a few bytes
            // below the window-scale granularity are free), or an overrun.
            self.send_ack(me, ack_at);
            return;
        }
        let had_ooo = !h.ooo.is_empty();
        let old = h.rcv_nxt;
        h.rcv_nxt = end as u64;
        while let Some(pos) = h.ooo.iter().position(|&(l, _)| l <= h.rcv_nxt) {
            let (_, r) = h.ooo.remove(pos);
            h.rcv_nxt = h.rcv_nxt.max(r);
        }
        if h.stalled {
            h.unread += h.rcv_nxt - old;
        }
        let fin_now = fin || h.fin_at == Some(h.rcv_nxt);
        self.check_deliveries(me);
        let h = &mut self.hosts[me.idx()];
        if fin_now {
            h.fin_rcvd = true;
            if h.fin_sent {
                // Our FIN went first: this is the last ACK.
                self.send_ack(me, ack_at);
                let h = &mut self.hosts[me.idx()];
                h.closed = h.fin_acked;
            } else {
                let at = self.now + h.cfg.close_delay_ns;
                self.arm_delack(me);
                self.schedule(at, Ev::AppClose(me));
            }
            return;
        }
        if had_ooo {
            self.send_ack(me, ack_at);
            return;
        }
        h.pending_acks += 1;
        if h.pending_acks >= h.cfg.ack_every {
            self.send_ack(me, ack_at);
        } else {
            self.arm_delack(me);
        }
    }

    fn check_deliveries(&mut self, me: Side) {
        let rcv_nxt = self.hosts[me.idx()].rcv_nxt;
        let peer = &mut self.hosts[me.peer().idx()];
        while let Some(&(end, id)) = peer.deliver_q.front() {
            if end > rcv_nxt {
                break;
            }
            peer.deliver_q.pop_front();
            self.delivered.push_back(Delivered {
                to: me,
                id,
                at_ns: self.now,
            });
        }
    }
}

/// Insert `r` into a sorted list of disjoint ranges, merging overlaps.
fn insert_range(v: &mut Vec<(u64, u64)>, r: (u64, u64)) {
    v.push(r);
    v.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for &(l, h) in v.iter() {
        match merged.last_mut() {
            Some(last) if l <= last.1 => last.1 = last.1.max(h),
            _ => merged.push((l, h)),
        }
    }
    *v = merged;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn cfg(rtt_ns: i64) -> TcpConfig {
        let c = Endpoint::new(
            [2, 0, 0, 0, 0, 1],
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            40000,
        );
        let s = Endpoint::new(
            [2, 0, 0, 0, 0, 2],
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            2049,
        );
        let mut cfg = TcpConfig::new(c, s, rtt_ns);
        cfg.start_ns = 1_000_000_000;
        cfg
    }

    /// (from client, seq, flags, payload) of each captured TCP/IPv4 packet.
    fn segments(pkts: &[NetPacket]) -> Vec<(bool, u32, u8, Vec<u8>)> {
        pkts.iter()
            .map(|p| {
                let ihl = (p.data[0] & 0x0f) as usize * 4;
                let t = &p.data[ihl..];
                let doff = (t[12] >> 4) as usize * 4;
                let seq = u32::from_be_bytes([t[4], t[5], t[6], t[7]]);
                (p.outgoing, seq, t[13], t[doff..].to_vec())
            })
            .collect()
    }

    /// Rebuild one direction's byte stream from captured segments.
    fn stream(pkts: &[NetPacket], from_client: bool) -> Vec<u8> {
        let segs = segments(pkts);
        let isn = segs
            .iter()
            .find(|s| s.0 == from_client && s.2 & tcp_flags::SYN != 0)
            .map(|s| s.1)
            .expect("SYN");
        let mut out: Vec<u8> = Vec::new();
        for (c, seq, _, payload) in segs {
            if c != from_client || payload.is_empty() {
                continue;
            }
            let off = seq.wrapping_sub(isn.wrapping_add(1)) as usize;
            if out.len() < off + payload.len() {
                out.resize(off + payload.len(), 0);
            }
            out[off..off + payload.len()].copy_from_slice(&payload);
        }
        out
    }

    #[test]
    fn client_side_capture_sees_full_rtt_in_handshake() {
        let mut sim = TcpSim::new(cfg(2_000_000));
        sim.connect();
        let p = sim.into_packets();
        let syn = p[0].ts_ns;
        let synack = p[1].ts_ns;
        assert_eq!(syn, 1_000_000_000);
        assert!(
            (2_000_000..2_030_000).contains(&(synack - syn)),
            "{}",
            synack - syn
        );
        // The client's ACK follows the SYN/ACK after only a stack delay.
        assert!(p[2].ts_ns - synack < 20_000);
    }

    #[test]
    fn capture_point_near_server_sees_short_handshake() {
        let mut c = cfg(2_000_000);
        c.client_delay_ns = 900_000;
        c.server_delay_ns = 100_000;
        let mut sim = TcpSim::new(c);
        sim.connect();
        let p = sim.into_packets();
        let d = p[1].ts_ns - p[0].ts_ns;
        assert!((200_000..230_000).contains(&d), "{d}");
    }

    #[test]
    fn data_is_delivered_intact_despite_loss() {
        let mut c = cfg(1_000_000);
        c.impairments = vec![
            Impairment {
                from: Side::Client,
                nth_data_segment: 30,
                action: Action::Drop,
            },
            Impairment {
                from: Side::Client,
                nth_data_segment: 31,
                action: Action::Drop,
            },
            Impairment {
                from: Side::Server,
                nth_data_segment: 5,
                action: Action::Drop,
            },
        ];
        let mut sim = TcpSim::new(c);
        sim.connect();
        let up: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let down: Vec<u8> = (0..100_000u32).map(|i| (i * 13 % 241) as u8).collect();
        let id_up = sim.send(Side::Client, up.clone());
        let id_down = sim.send(Side::Server, down.clone());
        let mut got = Vec::new();
        sim.run_with(|_, d| got.push((d.to, d.id)));
        assert!(got.contains(&(Side::Server, id_up)));
        assert!(got.contains(&(Side::Client, id_down)));
        assert_eq!(got.len(), 2);
        assert!(sim.stats().fast_retransmits >= 1, "{:?}", sim.stats());
        assert_eq!(sim.stats().timeouts, 0, "{:?}", sim.stats());
        sim.close(Side::Client);
        let p = sim.into_packets();
        assert_eq!(stream(&p, true), up);
        // The server's lost segment is not in the capture, only its
        // retransmission, so the stream is still complete.
        assert_eq!(stream(&p, false), down);
        let fins = segments(&p)
            .iter()
            .filter(|s| s.2 & tcp_flags::FIN != 0)
            .count();
        assert_eq!(fins, 2);
    }

    #[test]
    fn lone_lost_segment_times_out() {
        let mut c = cfg(1_000_000);
        c.impairments = vec![Impairment {
            from: Side::Client,
            nth_data_segment: 0,
            action: Action::Drop,
        }];
        let mut sim = TcpSim::new(c);
        sim.connect();
        let t = sim.now();
        sim.send(Side::Client, vec![1; 100]);
        let mut at = 0;
        sim.run_with(|_, d| at = d.at_ns);
        assert_eq!(sim.stats().timeouts, 1);
        assert!(at - t > 200_000_000 && at - t < 210_000_000, "{}", at - t);
    }

    #[test]
    fn zero_window_probes_and_update() {
        let mut c = cfg(1_000_000);
        c.client.rcv_buf = 32 << 10;
        let mut sim = TcpSim::new(c);
        sim.connect();
        sim.stall_reader(Side::Client, sim.now(), 1_000_000_000);
        sim.send(Side::Server, vec![9; 100_000]);
        sim.run();
        assert!(sim.stats().zero_window_probes >= 2, "{:?}", sim.stats());
        let p = sim.into_packets();
        let zero_wins = p
            .iter()
            .filter(|p| {
                p.outgoing
                    && p.data[20 + 14] == 0
                    && p.data[20 + 15] == 0
                    && p.data[20 + 13] & tcp_flags::SYN == 0
            })
            .count();
        assert!(zero_wins >= 3);
        assert_eq!(stream(&p, false).len(), 100_000);
    }

    #[test]
    fn keepalives_are_answered() {
        let mut sim = TcpSim::new(cfg(1_000_000));
        sim.connect();
        sim.send(Side::Client, vec![1; 10]);
        sim.run();
        let before = sim.packets().len();
        sim.keepalive(Side::Client, 2, 1_000_000_000);
        sim.run();
        assert_eq!(sim.stats().keepalives, 2);
        assert_eq!(sim.packets().len(), before + 4);
    }

    #[test]
    fn deterministic_for_a_seed() {
        let run = |seed| {
            let mut c = cfg(500_000);
            c.seed = seed;
            let mut sim = TcpSim::new(c);
            sim.connect();
            sim.send(Side::Client, vec![3; 50_000]);
            sim.run();
            sim.into_packets()
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }
}
