//! Per-connection sequence-number analysis with the semantics of Wireshark's
//! `tcp_analyze_sequence_number()` (epan/dissectors/packet-tcp.c, 4.0) and
//! the parts of `dissect_tcp()` around it that feed it (port reuse, window
//! scale, first RTT), so that every frame gets the same `tcp.analysis.*`
//! flags as `tshark` with default preferences.
//!
//! The checks run in Wireshark's order, because several of them end the
//! forward checks early (zero-window probe, keep-alive ACK, zero-window
//! probe ACK) or the retransmission checks (keep-alive, spurious, fast
//! retransmission, out-of-order). Like Wireshark, sequence number 0 doubles
//! as "not seen yet" for `nextseq`, `lastack` and `maxseqtobeacked`.

use nastriage_net::tcp_flags::{ACK, FIN, RST, SYN};

use super::flags::{Flag, FlagSet};
use super::unacked::{Segment, Unacked};

/// Un-acknowledged segments remembered per direction. Wireshark keeps up to
/// 10000; none of the flags depends on the list (it gives the RTO reference
/// frame), so past this bound segments are only counted.
pub const MAX_UNACKED: usize = 4096;

/// `dupacknum` after an "ACKed unseen segment" (Wireshark's -1).
const NEUTRAL: u32 = u32::MAX;
/// A fast retransmission follows the duplicate ACKs within this time.
const FAST_RETRANS_NS: u64 = 20_000_000;
/// Out-of-order threshold when the handshake RTT is unknown.
const OOO_DEFAULT_NS: u64 = 3_000_000;

#[inline]
fn lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}
#[inline]
pub(super) fn gt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}
#[inline]
pub(super) fn le(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) <= 0
}

/// Elapsed time as Wireshark computes it: an unsigned 64-bit difference, so
/// a timestamp going backwards gives a huge value (never "within" a bound).
#[inline]
fn elapsed(now: i64, then: i64) -> u64 {
    now.wrapping_sub(then) as u64
}

/// The fields of one TCP segment the analysis needs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Seg {
    pub frame: u64,
    pub ts: i64,
    pub seq: u32,
    pub ack: u32,
    /// Payload length on the wire.
    pub len: u32,
    pub flags: u16,
    /// Advertised window, unscaled.
    pub window: u16,
    /// Window-scale option, if present.
    pub wscale: Option<u8>,
}

impl Seg {
    #[inline]
    fn has(&self, f: u16) -> bool {
        self.flags & f != 0
    }
}

/// State of one direction (Wireshark's `tcp_flow_t` and its
/// `tcp_analyze_seq_flow_info_t`).
#[derive(Debug, Clone)]
struct Flow {
    base_seq: Option<u32>,
    nextseq: u32,
    nextseq_frame: u64,
    nextseq_ts: i64,
    lastack: u32,
    lastack_ts: i64,
    maxseqtobeacked: u32,
    /// Duplicate ACKs in a row; [`NEUTRAL`] after an "ACKed unseen
    /// segment" (unsigned as in Wireshark 4.0, so it also counts as "at
    /// least two duplicate ACKs" for the fast-retransmission test).
    dupacknum: u32,
    lastnondupack: u64,
    /// Last advertised window, unscaled (`u32::MAX` before the first).
    window: u32,
    /// -1 unknown, -2 no scaling, else the shift.
    win_scale: i8,
    is_first_ack: bool,
    lastsegmentflags: FlagSet,
    /// Sequence number just past this side's FIN, once sent, and whether
    /// the peer has acknowledged it.
    fin_end: Option<u32>,
    fin_acked: bool,
    unacked: Unacked,
    /// Segments not remembered because `unacked` was full.
    untracked: u64,
}

impl Default for Flow {
    fn default() -> Self {
        Flow {
            base_seq: None,
            nextseq: 0,
            nextseq_frame: 0,
            nextseq_ts: 0,
            lastack: 0,
            lastack_ts: 0,
            maxseqtobeacked: 0,
            dupacknum: 0,
            lastnondupack: 0,
            window: u32::MAX,
            win_scale: -1,
            is_first_ack: false,
            lastsegmentflags: FlagSet::EMPTY,
            fin_end: None,
            fin_acked: false,
            unacked: Unacked::default(),
            untracked: 0,
        }
    }
}

/// What the analysis found for one segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The flags as Wireshark stores them (see [`FlagSet::reported`]).
    pub flags: FlagSet,
    /// Duplicate ACK: its number (1, 2, ...) and the frame it repeats.
    pub dup_ack_num: u32,
    pub dup_ack_frame: u64,
    /// Retransmission: time since, and frame of, the oldest un-acked
    /// segment (or the last new data), as Wireshark's `tcp.analysis.rto`.
    pub rto: Option<(i64, u64)>,
    /// Lost segment: bytes missing before this one.
    pub lost_bytes: u32,
    /// ACKed unseen segment: bytes acknowledged beyond what was seen.
    pub unseen_bytes: u32,
}

/// Analysis state of one TCP conversation (Wireshark's `tcp_analysis`).
#[derive(Debug, Clone, Default)]
pub struct Connection {
    flows: [Flow; 2],
    /// Time of the last bare SYN (0 = none), and the handshake RTT measured
    /// from it to the first pure ACK (0 = unknown).
    ts_mru_syn: i64,
    ts_first_rtt: i64,
    closed: bool,
}

impl Connection {
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Segments not kept in the un-acked lists (bound reached).
    pub fn untracked(&self) -> u64 {
        self.flows[0].untracked + self.flows[1].untracked
    }

    /// Analyse one segment sent in direction `dir` (0 or 1).
    /// `opened_by_reuse`: this SYN started the conversation on a 4-tuple
    /// already used (Wireshark's port-reuse rule, applied by the
    /// conversation table).
    pub fn analyze(&mut self, dir: usize, s: &Seg, opened_by_reuse: bool) -> Outcome {
        let mut out = Outcome::default();
        let [f0, f1] = &mut self.flows;
        let (fwd, rev) = if dir == 0 { (f0, f1) } else { (f1, f0) };
        let mut fl = FlagSet::EMPTY;
        if opened_by_reuse {
            fl.insert(Flag::ReusedPorts);
        }
        // dissect_tcp(): a SYN/ACK with another ISN than the one seen before
        // is flagged as port reuse and becomes the new base.
        if s.has(SYN) && s.has(ACK) {
            if let Some(b) = fwd.base_seq {
                if s.seq != b {
                    fwd.base_seq = Some(s.seq);
                    fl.insert(Flag::ReusedPorts);
                }
            }
        }

        // tcp_analyze_sequence_number()
        if fwd.base_seq.is_none() {
            fwd.base_seq = Some(if s.has(SYN) {
                s.seq
            } else {
                s.seq.wrapping_sub(1)
            });
        }
        if rev.base_seq.is_none() && s.has(ACK) {
            rev.base_seq = Some(s.ack.wrapping_sub(1));
        }
        let (seq, ack, len) = (s.seq, s.ack, s.len);
        let window = u32::from(s.window);
        let sfr = s.has(SYN | FIN | RST);

        'fwd: {
            // Zero-window probe: the next byte, alone, into a closed window.
            if len == 1 && seq == fwd.nextseq && rev.window == 0 {
                fl.insert(Flag::ZeroWindowProbe);
                break 'fwd;
            }
            if window == 0 && !sfr {
                fl.insert(Flag::ZeroWindow);
            }
            // Lost segment: beyond the next expected sequence number.
            if fwd.nextseq != 0 && gt(seq, fwd.nextseq) && !s.has(RST) {
                fl.insert(Flag::LostSegment);
                out.lost_bytes = seq.wrapping_sub(fwd.nextseq);
            }
            // Keep-alive: 0 or 1 byte starting one byte before the next.
            if len <= 1 && seq == fwd.nextseq.wrapping_sub(1) && !sfr {
                fl.insert(Flag::KeepAlive);
            }
            let same_pos = seq == fwd.nextseq && ack == fwd.lastack && !sfr;
            // Window update: empty, same SEQ/ACK, new non-zero window.
            if len == 0 && window != 0 && window != fwd.window && same_pos {
                fl.insert(Flag::WindowUpdate);
            }
            // Window full: the data reaches the edge of the peer's window.
            if len > 0 && rev.win_scale != -1 && !sfr {
                let shift = if rev.is_first_ack || rev.win_scale == -2 {
                    0
                } else {
                    rev.win_scale as u32
                };
                let edge = rev.lastack.wrapping_add(rev.window.wrapping_shl(shift));
                if seq.wrapping_add(len) == edge {
                    fl.insert(Flag::WindowFull);
                }
            }
            if len == 0 && window == fwd.window && same_pos {
                if window != 0 && rev.lastsegmentflags.contains(Flag::KeepAlive) {
                    fl.insert(Flag::KeepAliveAck);
                    break 'fwd;
                }
                if window == 0 && rev.lastsegmentflags.contains(Flag::ZeroWindowProbe) {
                    fl.insert(Flag::ZeroWindowProbeAck);
                    break 'fwd;
                }
                if window != 0 {
                    fwd.dupacknum = if fwd.dupacknum == NEUTRAL {
                        1
                    } else {
                        fwd.dupacknum.wrapping_add(1)
                    };
                    fl.insert(Flag::DuplicateAck);
                    out.dup_ack_num = fwd.dupacknum;
                    out.dup_ack_frame = fwd.lastnondupack;
                }
            }
        }

        if ack != fwd.lastack {
            fwd.lastnondupack = s.frame;
            fwd.dupacknum = 0;
        }

        // ACKed unseen segment: acknowledges data never seen going the other way.
        if rev.maxseqtobeacked != 0 && gt(ack, rev.maxseqtobeacked) && s.has(ACK) {
            let unseen = ack.wrapping_sub(rev.maxseqtobeacked);
            // (A plain comparison. This is the rule tshark 4.0.17 follows on
            // the test captures; later Wireshark sources differ here.)
            if rev.maxseqtobeacked < rev.nextseq {
                // Data was seen past the hole: report it and move on.
                rev.maxseqtobeacked = rev.nextseq;
                fl.insert(Flag::AckLostSegment);
                out.unseen_bytes = unseen;
            } else {
                // Report a hole once, not on every ACK that still covers it
                // (until the other side acknowledges something new).
                if rev.dupacknum == 0 {
                    fl.insert(Flag::AckLostSegment);
                    out.unseen_bytes = unseen;
                }
                rev.dupacknum = NEUTRAL;
            }
        }

        // Retransmission, fast retransmission, spurious retransmission or
        // out-of-order: data (or SYN/FIN) that does not advance the sequence.
        if (len > 0 || s.has(SYN | FIN)) && !fl.contains(Flag::KeepAlive) {
            let mut not_advanced = fwd.nextseq != 0 && lt(seq, fwd.nextseq);
            // New data starting one byte early (after a zero-window probe).
            if len > 1 && fwd.nextseq.wrapping_sub(1) == seq {
                not_advanced = false;
            }
            'rt: {
                if len > 0 && rev.lastack != 0 && le(seq.wrapping_add(len), rev.lastack) {
                    fl.insert(Flag::SpuriousRetransmission);
                    break 'rt;
                }
                // Default preference tcp.fastrt_supersedes_ooo = TRUE: fast
                // retransmission is tested before out-of-order.
                if not_advanced
                    && rev.dupacknum >= 2
                    && rev.lastack == seq
                    && elapsed(s.ts, rev.lastack_ts) < FAST_RETRANS_NS
                {
                    fl.insert(Flag::FastRetransmission);
                    break 'rt;
                }
                let ooo_thres = if self.ts_first_rtt == 0 {
                    OOO_DEFAULT_NS
                } else {
                    self.ts_first_rtt as u64
                };
                let syn_fin = u32::from(s.has(SYN | FIN));
                if not_advanced
                    && elapsed(s.ts, fwd.nextseq_ts) < ooo_thres
                    && fwd.nextseq != seq.wrapping_add(len).wrapping_add(syn_fin)
                {
                    fl.insert(Flag::OutOfOrder);
                    break 'rt;
                }
                if not_advanced {
                    fl.insert(Flag::Retransmission);
                    let (ts, frame) = match fwd.unacked.first() {
                        Some(u) => (u.ts, u.frame),
                        None => (fwd.nextseq_ts, fwd.nextseq_frame),
                    };
                    out.rto = Some((s.ts.wrapping_sub(ts), frame));
                }
            }
        }

        let mut nextseq = seq.wrapping_add(len);
        if len > 0 || s.has(SYN | FIN) {
            if fwd.unacked.len() < MAX_UNACKED {
                let end = nextseq.wrapping_add(u32::from(s.has(SYN | FIN)));
                fwd.unacked.push(Segment {
                    frame: s.frame,
                    ts: s.ts,
                    seq,
                    nextseq: end,
                });
            } else {
                fwd.untracked += 1;
            }
            // (Wireshark stops counting SYN/FIN here only once it holds
            // 10000 un-acked segments.)
            if s.has(SYN | FIN) {
                nextseq = nextseq.wrapping_add(1);
            }
        }
        let zwp = fl.contains(Flag::ZeroWindowProbe);
        if (gt(nextseq, fwd.nextseq) || fwd.nextseq == 0) && !zwp {
            fwd.nextseq = nextseq;
            fwd.nextseq_frame = s.frame;
            fwd.nextseq_ts = s.ts;
        }
        if (seq == fwd.maxseqtobeacked || fwd.maxseqtobeacked == 0) && !zwp {
            fwd.maxseqtobeacked = fwd.nextseq;
        }
        fwd.window = window;
        fwd.lastack = ack;
        fwd.lastack_ts = s.ts;
        fwd.lastsegmentflags = fl;

        // Forget the segments this acknowledges (the ACK field is used even
        // without the ACK bit, as Wireshark does).
        rev.unacked.forget_acked(ack);

        // After the analysis, dissect_tcp() notes the handshake.
        if s.has(SYN) {
            if !s.has(ACK) {
                self.ts_mru_syn = s.ts;
            }
            fwd.is_first_ack = true;
        }
        if s.flags & (SYN | ACK) == ACK {
            if self.ts_mru_syn != 0 && self.ts_first_rtt == 0 {
                self.ts_first_rtt = s.ts.wrapping_sub(self.ts_mru_syn);
            }
            fwd.is_first_ack = false;
        }
        if let Some(ws) = s.wscale {
            fwd.win_scale = ws.min(14) as i8;
        }
        if s.has(SYN) {
            // verify_tcp_window_scaling()
            if fwd.win_scale == -1 {
                fwd.win_scale = -2;
                rev.win_scale = -2;
            } else if s.has(ACK) && rev.win_scale == -2 {
                fwd.win_scale = -2;
            }
        }

        // Closed: a RST, or FIN both ways and both acknowledged.
        if s.has(FIN) {
            fwd.fin_end = Some(seq.wrapping_add(len).wrapping_add(1));
        }
        if s.has(ACK) && rev.fin_end.is_some_and(|e| le(e, ack)) {
            rev.fin_acked = true;
        }
        if s.has(RST) || (fwd.fin_acked && rev.fin_acked) {
            self.closed = true;
        }

        out.flags = fl;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    /// Drives one connection with hand-built segments; direction 0 is the
    /// client.
    struct Conn {
        c: Connection,
        frame: u64,
        ts: i64,
    }

    impl Conn {
        fn new() -> Self {
            Conn {
                c: Connection::default(),
                frame: 0,
                ts: 1_000 * MS,
            }
        }
        /// Send after `gap_ms`.
        #[allow(clippy::too_many_arguments)]
        fn send(
            &mut self,
            dir: usize,
            gap_ms: i64,
            seq: u32,
            ack: u32,
            len: u32,
            flags: u16,
            win: u16,
        ) -> Outcome {
            self.send_ws(dir, gap_ms, seq, ack, len, flags, win, None)
        }
        #[allow(clippy::too_many_arguments)]
        fn send_ws(
            &mut self,
            dir: usize,
            gap_ms: i64,
            seq: u32,
            ack: u32,
            len: u32,
            flags: u16,
            win: u16,
            wscale: Option<u8>,
        ) -> Outcome {
            self.frame += 1;
            self.ts += gap_ms * MS;
            let s = Seg {
                frame: self.frame,
                ts: self.ts,
                seq,
                ack,
                len,
                flags,
                window: win,
                wscale,
            };
            self.c.analyze(dir, &s, false)
        }
        /// Handshake: client ISN 1000, server ISN 5000, 10 ms RTT.
        fn handshake(&mut self) {
            assert!(self.send(0, 0, 1000, 0, 0, SYN, 64240).flags.is_empty());
            assert!(self
                .send(1, 5, 5000, 1001, 0, SYN | ACK, 65160)
                .flags
                .is_empty());
            assert!(self.send(0, 5, 1001, 5001, 0, ACK, 502).flags.is_empty());
        }
    }

    fn only(o: Outcome, f: Flag) {
        assert_eq!(o.flags, FlagSet::from(f), "{o:?}");
    }

    #[test]
    fn clean_transfer_has_no_flags() {
        let mut c = Conn::new();
        c.handshake();
        for i in 0..10u32 {
            let o = c.send(1, 1, 5001 + i * 1000, 1001, 1000, ACK, 509);
            assert!(o.flags.is_empty(), "{i}: {o:?}");
            let o = c.send(0, 1, 1001, 5001 + (i + 1) * 1000, 0, ACK, 502);
            assert!(o.flags.is_empty(), "{i}: {o:?}");
        }
        assert!(c
            .send(0, 1, 1001, 15001, 0, FIN | ACK, 502)
            .flags
            .is_empty());
        assert!(c
            .send(1, 1, 15001, 1002, 0, FIN | ACK, 509)
            .flags
            .is_empty());
        assert!(!c.c.is_closed());
        assert!(c.send(0, 1, 1002, 15002, 0, ACK, 502).flags.is_empty());
        assert!(c.c.is_closed());
    }

    #[test]
    fn retransmission_after_timeout() {
        let mut c = Conn::new();
        c.handshake();
        c.send(1, 1, 5001, 1001, 1000, ACK, 509); // frame 4
        c.send(1, 1, 6001, 1001, 1000, ACK, 509);
        let o = c.send(1, 200, 5001, 1001, 1000, ACK, 509);
        only(o, Flag::Retransmission);
        assert_eq!(o.rto, Some((201 * MS, 4)));
        // A retransmitted SYN is a retransmission too.
        let mut c = Conn::new();
        c.send(0, 0, 1000, 0, 0, SYN, 64240);
        only(
            c.send(0, 1000, 1000, 0, 0, SYN, 64240),
            Flag::Retransmission,
        );
    }

    #[test]
    fn lost_segment_dup_acks_fast_retransmission() {
        let mut c = Conn::new();
        c.handshake();
        c.send(1, 1, 5001, 1001, 1000, ACK, 509);
        c.send(0, 1, 1001, 6001, 0, ACK, 502); // frame 5: last non-dup ack
                                               // 6001..7001 is lost; the next segment leaves a hole.
        let o = c.send(1, 1, 7001, 1001, 1000, ACK, 509);
        only(o, Flag::LostSegment);
        assert_eq!(o.lost_bytes, 1000);
        for n in 1..=3 {
            c.send(1, 0, 8001 + (n - 1) * 1000, 1001, 1000, ACK, 509);
            let o = c.send(0, 1, 1001, 6001, 0, ACK, 502);
            only(o, Flag::DuplicateAck);
            assert_eq!((o.dup_ack_num, o.dup_ack_frame), (n, 5));
        }
        // The hole is filled within 20 ms of the third duplicate ACK.
        only(
            c.send(1, 2, 6001, 1001, 1000, ACK, 509),
            Flag::FastRetransmission,
        );
        assert!(c.send(0, 1, 1001, 11001, 0, ACK, 502).flags.is_empty());
    }

    #[test]
    fn fast_retransmission_needs_recent_dup_acks() {
        let mut c = Conn::new();
        c.handshake();
        c.send(1, 1, 5001, 1001, 1000, ACK, 509);
        c.send(0, 1, 1001, 6001, 0, ACK, 502);
        c.send(1, 1, 7001, 1001, 1000, ACK, 509);
        c.send(0, 1, 1001, 6001, 0, ACK, 502);
        c.send(0, 1, 1001, 6001, 0, ACK, 502);
        only(
            c.send(1, 300, 6001, 1001, 1000, ACK, 509),
            Flag::Retransmission,
        );
    }

    #[test]
    fn out_of_order_within_rtt() {
        let mut c = Conn::new();
        c.handshake(); // first RTT 10 ms (SYN to the pure ACK)
        c.send(1, 1, 5001, 1001, 1000, ACK, 509);
        only(c.send(1, 1, 7001, 1001, 1000, ACK, 509), Flag::LostSegment);
        only(c.send(1, 1, 6001, 1001, 1000, ACK, 509), Flag::OutOfOrder);
        // Later than the first RTT it is a retransmission.
        only(c.send(1, 1, 9001, 1001, 1000, ACK, 509), Flag::LostSegment);
        only(
            c.send(1, 20, 8001, 1001, 1000, ACK, 509),
            Flag::Retransmission,
        );
    }

    #[test]
    fn spurious_retransmission_of_acked_data() {
        let mut c = Conn::new();
        c.handshake();
        c.send(1, 1, 5001, 1001, 1000, ACK, 509);
        c.send(0, 1, 1001, 6001, 0, ACK, 502);
        let o = c.send(1, 300, 5001, 1001, 1000, ACK, 509);
        only(o, Flag::SpuriousRetransmission);
        assert!(o.flags.reported().contains(Flag::Retransmission));
    }

    #[test]
    fn ack_of_unseen_segment_is_reported_once() {
        let mut c = Conn::new();
        c.handshake();
        c.send(1, 1, 5001, 1001, 1000, ACK, 509);
        // The client acknowledges 3000 bytes: 2000 were never captured.
        let o = c.send(0, 1, 1001, 8001, 0, ACK, 502);
        only(o, Flag::AckLostSegment);
        assert_eq!(o.unseen_bytes, 2000);
        let o = c.send(0, 1, 1001, 9001, 0, ACK, 502);
        assert!(!o.flags.contains(Flag::AckLostSegment), "{o:?}");
    }

    #[test]
    fn retransmission_after_ack_of_unseen_data_is_fast() {
        // The neutralised (unsigned -1) duplicate-ACK counter passes the
        // "at least two duplicate ACKs" test, as in Wireshark 4.0.
        // (zeek's reassembly.pcap, frame 8.)
        let mut c = Conn::new();
        c.handshake();
        c.send(0, 1, 1001, 5001, 100, ACK, 502);
        assert!(c.send(1, 1, 5001, 1101, 0, ACK | FIN, 509).flags.is_empty());
        c.send(0, 1, 1101, 5001, 92, ACK, 502);
        // The FIN again, acknowledging 8 bytes more than the client sent.
        let o = c.send(1, 1, 5001, 1201, 0, ACK | FIN, 509);
        let mut want = FlagSet::from(Flag::AckLostSegment);
        want.insert(Flag::FastRetransmission);
        assert_eq!(o.flags, want);
        assert_eq!(o.unseen_bytes, 8);
    }

    #[test]
    fn zero_window_probe_and_ack_and_update() {
        let mut c = Conn::new();
        c.handshake();
        c.send(1, 1, 5001, 1001, 1000, ACK, 509);
        only(c.send(0, 1, 1001, 6001, 0, ACK, 0), Flag::ZeroWindow);
        only(
            c.send(1, 200, 6001, 1001, 1, ACK, 509),
            Flag::ZeroWindowProbe,
        );
        let o = c.send(0, 1, 1001, 6001, 0, ACK, 0);
        assert!(o.flags.contains(Flag::ZeroWindowProbeAck), "{o:?}");
        assert!(o.flags.contains(Flag::ZeroWindow), "{o:?}");
        // The probe did not advance nextseq: the same byte again is a probe.
        only(
            c.send(1, 400, 6001, 1001, 1, ACK, 509),
            Flag::ZeroWindowProbe,
        );
        c.send(0, 1, 1001, 6001, 0, ACK, 0);
        only(c.send(0, 50, 1001, 6001, 0, ACK, 300), Flag::WindowUpdate);
        assert!(c.send(1, 1, 6001, 1001, 1000, ACK, 509).flags.is_empty());
    }

    #[test]
    fn keep_alive_and_ack() {
        let mut c = Conn::new();
        c.handshake();
        c.send(1, 1, 5001, 1001, 100, ACK | 0x08, 509);
        c.send(0, 1, 1001, 5101, 0, ACK, 502);
        only(c.send(1, 60_000, 5100, 1001, 0, ACK, 509), Flag::KeepAlive);
        only(c.send(0, 1, 1001, 5101, 0, ACK, 502), Flag::KeepAliveAck);
        // One garbage byte is a keep-alive too, not a retransmission.
        only(c.send(1, 60_000, 5100, 1001, 1, ACK, 509), Flag::KeepAlive);
    }

    #[test]
    fn window_full_with_scaling() {
        let mut c = Conn::new();
        c.send_ws(0, 0, 1000, 0, 0, SYN, 64240, Some(7));
        c.send_ws(1, 5, 5000, 1001, 0, SYN | ACK, 65160, Some(2));
        c.send(0, 5, 1001, 5001, 0, ACK, 16); // window 16 << 7 = 2048 bytes
        assert!(c.send(1, 1, 5001, 1001, 1000, ACK, 509).flags.is_empty());
        only(c.send(1, 1, 6001, 1001, 1048, ACK, 509), Flag::WindowFull);
    }

    #[test]
    fn no_window_full_when_scaling_unknown() {
        let mut c = Conn::new();
        // Mid-stream capture: no handshake, so the scale is unknown.
        c.send(0, 0, 1001, 5001, 0, ACK, 16);
        assert!(c.send(1, 1, 5001, 1001, 16, ACK, 509).flags.is_empty());
    }

    #[test]
    fn syn_ack_with_new_isn_is_port_reuse() {
        let mut c = Conn::new();
        c.handshake();
        // (Wireshark also sees the new ISN as a gap.)
        let o = c.send(1, 1, 9000, 1001, 0, SYN | ACK, 65160);
        assert!(o.flags.contains(Flag::ReusedPorts), "{o:?}");
        let mut c = Connection::default();
        let s = Seg {
            frame: 1,
            ts: 1,
            seq: 7,
            flags: SYN,
            window: 100,
            ..Default::default()
        };
        only(c.analyze(0, &s, true), Flag::ReusedPorts);
    }

    #[test]
    fn rst_closes() {
        let mut c = Conn::new();
        c.handshake();
        assert!(!c.c.is_closed());
        c.send(1, 1, 5001, 1001, 0, RST | ACK, 0);
        assert!(c.c.is_closed());
    }

    #[test]
    fn unacked_list_is_bounded() {
        let mut c = Conn::new();
        c.handshake();
        let n = MAX_UNACKED as u32 + 10;
        for i in 0..n {
            c.send(1, 0, 5001 + i * 100, 1001, 100, ACK, 509);
        }
        assert_eq!(c.c.untracked(), 10);
        // An ACK of everything empties the list.
        c.send(0, 1, 1001, 5001 + n * 100, 0, ACK, 502);
        assert!(c.c.flows[1].unacked.is_empty());
    }
}
