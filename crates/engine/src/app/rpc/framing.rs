//! TCP record marking (RFC 5531 section 11) for one direction of a
//! connection: in-order chunks (captured bytes and holes) in, whole RPC
//! records out.
//!
//! Fragment lengths carry the parser across holes: a READ reply or WRITE
//! call whose payload was cut by the snaplen or lost is walked past by its
//! record marks, and only the first bytes of each record (the headers) are
//! kept. When a record mark itself is not captured (it lies in a hole) the
//! framer loses its place and *scans*: it resumes at the first position
//! that validates as a record mark followed by an RPC CALL header of a
//! known program, or a REPLY whose XID answers an outstanding call (at a
//! segment boundary, any well-formed REPLY header). Each loss is counted.

use nastriage_proto::rpc_records::{
    looks_like_rpc_call_header, parse_rpc_message, program_name, MAX_FRAGMENT_LEN, MIN_CALL_LEN,
    MIN_REPLY_LEN, MSG_CALL, MSG_REPLY,
};

use crate::transactions::PduSpan;

/// Leading bytes of a record kept for decoding (headers, names, the
/// operations of a COMPOUND before any bulk data).
pub const HEADER_CAP: usize = 4096;
/// Kept for replies listing a directory (READDIR/READDIRPLUS), whose names
/// feed the handle → name map.
pub const LISTING_CAP: usize = 64 * 1024;
/// As a record's kept prefix reaches each of these sizes (and the record
/// goes on), the sink is asked whether the prefix already holds all the
/// decoder reads ([`Sink::prefix_suffices`]). A READ reply's or WRITE
/// call's header mostly fits in the first, with a long credential or file
/// handle in the second; copying the first 4 KiB of every payload instead
/// costs a copy of most of a bulk transfer and evicts the parser's working
/// set.
const PROBES: [usize; 2] = [256, 1024];
/// Bytes carried from one chunk to the next while scanning, enough to
/// validate a record mark and an RPC header.
const SCAN_WINDOW: usize = 64;
/// Bytes needed to validate a CALL: mark + 8 header words.
const CALL_PROBE: usize = 4 + 32;

/// One RPC record (all its fragments), as far as it was captured.
#[derive(Debug)]
pub struct Record<'a> {
    /// The first bytes of the record content (fragments joined, marks
    /// removed), up to the header cap or the first hole.
    pub hdr: &'a [u8],
    /// Frames and times of the first and last byte; `bytes` includes the
    /// marks. `complete` is left for the decoder to decide.
    pub span: PduSpan,
    /// A hole hid bytes the header prefix would otherwise hold (so a parse
    /// running out of bytes means "not captured", not "our cap").
    pub cut: bool,
}

/// What the framer needs from the connection.
pub trait Sink {
    fn record(&mut self, rec: Record<'_>);
    /// An outstanding call from the other direction has this XID.
    fn awaits_reply(&self, xid: u32) -> bool;
    /// How many leading bytes to keep of a record starting with this XID
    /// and message type.
    fn header_cap(&self, xid: u32, mtype: u32) -> usize;
    /// Given the first bytes of a longer record (see [`PROBES`]),
    /// true when decoding reads nothing past them (the rest is bulk data
    /// whose bytes no decoder looks at): the framer then keeps no more.
    fn prefix_suffices(&self, _hdr: &[u8]) -> bool {
        false
    }
    /// The framer lost its place (a record mark was not captured, or the
    /// bytes at a record boundary are not RPC).
    fn lost_sync(&mut self);
}

#[derive(Debug, Clone, Copy)]
enum Mode {
    /// Not synchronised: scanning for a record start.
    Lost,
    /// Reading a record mark, `n` bytes of it so far.
    Mark { buf: [u8; 4], n: u8 },
    /// Inside a fragment with `left` bytes to go; `last` ends the record.
    Body { left: u64, last: bool },
}

/// The record being assembled.
#[derive(Debug, Default)]
struct Acc {
    active: bool,
    span: PduSpan,
    len: u64,
    hdr: Vec<u8>,
    cap: usize,
    cap_decided: bool,
    cut: bool,
    /// The start of the content was checked to be RPC.
    checked: bool,
    /// How many of [`PROBES`] were made (the sink asked whether the
    /// prefix suffices).
    probes: usize,
}

impl Acc {
    fn begin(&mut self, frame: u64, ts: i64) {
        self.active = true;
        self.span = PduSpan {
            first_frame: frame,
            first_ts: ts,
            last_frame: frame,
            last_ts: ts,
            bytes: 0,
            complete: true,
        };
        self.len = 0;
        self.hdr.clear();
        self.cap = HEADER_CAP;
        self.cap_decided = false;
        self.cut = false;
        self.checked = false;
        self.probes = 0;
    }

    /// The prefix size of the next probe, if one is to come.
    fn next_probe(&self) -> Option<usize> {
        if self.cut {
            return None;
        }
        PROBES.get(self.probes).copied()
    }

    /// Bytes of `avail` to hand to [`Acc::content`] now: up to the next
    /// probe's size, so that no more is copied before it.
    fn take_before_probe(&self, avail: usize) -> usize {
        match self.next_probe() {
            Some(at) if at > self.hdr.len() => avail.min(at - self.hdr.len()),
            _ => avail,
        }
    }

    fn touch(&mut self, n: u64, frame: u64, ts: i64) {
        self.span.bytes += n;
        self.span.last_frame = frame;
        self.span.last_ts = ts;
    }

    fn content(&mut self, b: &[u8], frame: u64, ts: i64) {
        self.touch(b.len() as u64, frame, ts);
        self.len += b.len() as u64;
        if !self.cut && self.hdr.len() < self.cap {
            let room = self.cap - self.hdr.len();
            self.hdr.extend_from_slice(&b[..b.len().min(room)]);
        }
    }

    fn hole(&mut self, n: u64, frame: u64, ts: i64) {
        self.touch(n, frame, ts);
        self.len += n;
        if self.hdr.len() < self.cap {
            self.cut = true;
        }
    }
}

enum Probe {
    Valid,
    Invalid,
    NeedMore,
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
}

/// Does `b` start with a record mark and the start of an RPC message?
/// `boundary`: `b` starts a captured segment, where a well-formed REPLY
/// header is accepted even if its XID is not outstanding.
fn probe(b: &[u8], boundary: bool, sink: &dyn Sink) -> Probe {
    let Some(mark) = be32(b, 0) else {
        return Probe::NeedMore;
    };
    let len = mark & 0x7fff_ffff;
    if len < MIN_REPLY_LEN as u32 || len > MAX_FRAGMENT_LEN {
        return Probe::Invalid;
    }
    let Some(mtype) = be32(b, 8) else {
        return Probe::NeedMore;
    };
    match mtype {
        MSG_CALL => {
            if len < MIN_CALL_LEN as u32 {
                return Probe::Invalid;
            }
            if b.len() < CALL_PROBE {
                return Probe::NeedMore;
            }
            let prog_known = be32(b, 16).and_then(program_name).is_some();
            if prog_known && looks_like_rpc_call_header(&b[4..]) {
                Probe::Valid
            } else {
                Probe::Invalid
            }
        }
        MSG_REPLY => {
            let Some(stat) = be32(b, 12) else {
                return Probe::NeedMore;
            };
            if stat > 1 {
                return Probe::Invalid;
            }
            let xid = be32(b, 4).unwrap_or(0);
            if sink.awaits_reply(xid) {
                return Probe::Valid;
            }
            if !boundary {
                return Probe::Invalid;
            }
            let end = (4 + len as usize).min(b.len());
            match parse_rpc_message(&b[4..end]) {
                Ok(_) => Probe::Valid,
                _ => Probe::Invalid,
            }
        }
        _ => Probe::Invalid,
    }
}

/// Record-marking state of one direction.
#[derive(Debug)]
pub struct Framer {
    mode: Mode,
    acc: Acc,
    /// Has been in sync at least once (losing sync before that is the
    /// normal start of a capture, not a resynchronisation).
    synced: bool,
    /// Stream offset of the next byte expected.
    next: u64,
    /// Scan window carried over from the previous chunk.
    carry: Vec<u8>,
    carry_frame: u64,
    carry_ts: i64,
    /// Records dropped because their start was not RPC.
    pub discarded: u64,
}

impl Default for Framer {
    fn default() -> Self {
        Framer {
            mode: Mode::Lost,
            acc: Acc::default(),
            synced: false,
            next: 0,
            carry: Vec::new(),
            carry_frame: 0,
            carry_ts: 0,
            discarded: 0,
        }
    }
}

impl Framer {
    fn synced_at_mark(&mut self) {
        self.mode = Mode::Mark { buf: [0; 4], n: 0 };
        self.synced = true;
    }

    /// Give up the current position: emit the record in progress if it
    /// was recognised as RPC, and scan from here on.
    fn lose(&mut self, sink: &mut dyn Sink) {
        if self.acc.active {
            if self.acc.checked {
                self.acc.cut = true;
                self.emit(sink);
            } else {
                self.discarded += 1;
                self.acc.active = false;
            }
        }
        if self.synced {
            sink.lost_sync();
        }
        self.synced = false;
        self.mode = Mode::Lost;
        self.carry.clear();
    }

    fn emit(&mut self, sink: &mut dyn Sink) {
        let a = &mut self.acc;
        a.active = false;
        sink.record(Record {
            hdr: &a.hdr,
            span: a.span,
            cut: a.cut,
        });
    }

    /// Once the prefix of a record that goes on reaches the next probe's
    /// size, stop keeping bytes if the sink says the prefix suffices. Only
    /// for the default cap: a listing's larger cap is kept whole.
    fn probe(&mut self, sink: &dyn Sink) {
        let a = &mut self.acc;
        let Some(at) = a.next_probe() else {
            return;
        };
        if a.hdr.len() < at || !a.cap_decided {
            return;
        }
        a.probes += 1;
        if a.cap != HEADER_CAP {
            a.probes = PROBES.len();
        } else if sink.prefix_suffices(&a.hdr) {
            a.cap = a.hdr.len();
            a.probes = PROBES.len();
        }
    }

    /// Check the start of the record content once enough of it is there;
    /// false if it is not RPC (the caller then loses sync).
    fn check_start(&mut self, sink: &dyn Sink, ended: bool) -> bool {
        let a = &mut self.acc;
        if !a.cap_decided && a.hdr.len() >= 8 {
            let xid = be32(&a.hdr, 0).unwrap_or(0);
            let mtype = be32(&a.hdr, 4).unwrap_or(0);
            a.cap = sink.header_cap(xid, mtype).max(HEADER_CAP);
            a.cap_decided = true;
        }
        if a.checked {
            return true;
        }
        if a.hdr.len() < 12 {
            if ended || a.cut {
                // Too short, or its start not captured: trust the record
                // marks and let the decoder judge what there is.
                a.checked = true;
            }
            return true;
        }
        let ok = match be32(&a.hdr, 4) {
            Some(MSG_CALL) => be32(&a.hdr, 8) == Some(2),
            Some(MSG_REPLY) => matches!(be32(&a.hdr, 8), Some(0 | 1)),
            _ => false,
        };
        a.checked = ok;
        ok
    }

    /// Captured bytes at stream offset `off`.
    pub fn data(&mut self, off: u64, bytes: &[u8], frame: u64, ts: i64, sink: &mut dyn Sink) {
        if off != self.next {
            // The reassembler delivers in order; anything else is a gap.
            self.carry.clear();
            if !matches!(self.mode, Mode::Lost) {
                self.lose(sink);
            }
        }
        self.next = off + bytes.len() as u64;
        let mut i = 0;
        while i < bytes.len() {
            match self.mode {
                Mode::Lost => match self.scan(off + i as u64, &bytes[i..], frame, ts, sink) {
                    Some(p) => i += p,
                    None => return,
                },
                Mode::Mark { mut buf, mut n } => {
                    if n == 0 && !self.acc.active {
                        self.acc.begin(frame, ts);
                    }
                    let take = (4 - n as usize).min(bytes.len() - i);
                    match bytes[i..i + take].try_into() {
                        // The whole mark at once (nearly always): a copy of
                        // a length not known here called memcpy every record.
                        Ok(whole) if n == 0 => buf = whole,
                        _ => {
                            buf[n as usize..n as usize + take].copy_from_slice(&bytes[i..i + take])
                        }
                    }
                    n += take as u8;
                    i += take;
                    self.acc.touch(take as u64, frame, ts);
                    if n < 4 {
                        self.mode = Mode::Mark { buf, n };
                        continue;
                    }
                    let w = u32::from_be_bytes(buf);
                    let last = w & 0x8000_0000 != 0;
                    let len = w & 0x7fff_ffff;
                    let first = self.acc.len == 0;
                    let ok = len <= MAX_FRAGMENT_LEN
                        && (!first || !last || len >= MIN_REPLY_LEN as u32)
                        && (len > 0 || !first);
                    if !ok {
                        self.lose(sink);
                        continue;
                    }
                    if len == 0 {
                        self.end_fragment(last, sink);
                    } else {
                        self.mode = Mode::Body {
                            left: len as u64,
                            last,
                        };
                    }
                }
                Mode::Body { left, last } => {
                    let take = (left.min((bytes.len() - i) as u64)) as usize;
                    let take = self.acc.take_before_probe(take);
                    self.acc.content(&bytes[i..i + take], frame, ts);
                    i += take;
                    let left = left - take as u64;
                    if !self.check_start(sink, left == 0 && last) {
                        self.lose(sink);
                        continue;
                    }
                    if !(left == 0 && last) {
                        self.probe(sink);
                    }
                    if left == 0 {
                        self.end_fragment(last, sink);
                    } else {
                        self.mode = Mode::Body { left, last };
                    }
                }
            }
        }
    }

    fn end_fragment(&mut self, last: bool, sink: &mut dyn Sink) {
        if last {
            self.emit(sink);
        }
        self.mode = Mode::Mark { buf: [0; 4], n: 0 };
    }

    /// `len` bytes at `off` that were not captured.
    pub fn hole(&mut self, off: u64, len: u64, frame: u64, ts: i64, sink: &mut dyn Sink) {
        self.carry.clear();
        if off != self.next && !matches!(self.mode, Mode::Lost) {
            self.lose(sink);
        }
        self.next = off + len;
        let mut rest = len;
        while rest > 0 {
            match self.mode {
                Mode::Lost => return,
                Mode::Mark { .. } => {
                    // A record mark is not captured: the rest of the record
                    // (if any) and the next boundary are unknown.
                    self.lose(sink);
                    return;
                }
                Mode::Body { left, last } => {
                    let take = left.min(rest);
                    self.acc.hole(take, frame, ts);
                    rest -= take;
                    let left = left - take;
                    if !self.check_start(sink, left == 0 && last) {
                        self.lose(sink);
                        return;
                    }
                    if left == 0 {
                        self.end_fragment(last, sink);
                    } else {
                        self.mode = Mode::Body { left, last };
                    }
                }
            }
        }
    }

    /// End of the connection or capture: a record still being assembled
    /// is emitted as cut.
    pub fn finish(&mut self, sink: &mut dyn Sink) {
        if self.acc.active {
            if self.acc.checked || self.acc.hdr.len() >= 8 {
                self.acc.cut = true;
                self.emit(sink);
            } else {
                self.acc.active = false;
            }
        }
        self.mode = Mode::Lost;
        self.carry.clear();
    }

    /// Look for a record start in `bytes` (preceded by the carried window).
    /// Returns the position in `bytes` to resume at, the mode set to go on
    /// from there; `None` when the chunk holds no record start.
    fn scan(
        &mut self,
        off: u64,
        bytes: &[u8],
        frame: u64,
        ts: i64,
        sink: &mut dyn Sink,
    ) -> Option<usize> {
        let carry_end = off;
        if !self.carry.is_empty() {
            let mut window = std::mem::take(&mut self.carry);
            let old = window.len();
            window.extend_from_slice(&bytes[..bytes.len().min(SCAN_WINDOW)]);
            for p in 0..old {
                match probe(&window[p..], false, sink) {
                    Probe::Valid => {
                        // Replay the carried bytes from the record start,
                        // then go on with this chunk.
                        let start = carry_end - (old - p) as u64;
                        let (cf, ct) = (self.carry_frame, self.carry_ts);
                        self.synced_at_mark();
                        let next = self.next;
                        self.next = start;
                        let replay = window[p..old].to_vec();
                        self.data(start, &replay, cf, ct, sink);
                        self.next = next;
                        return if matches!(self.mode, Mode::Lost) {
                            // The replayed record start failed after all.
                            self.scan(off, bytes, frame, ts, sink)
                        } else {
                            Some(0)
                        };
                    }
                    Probe::NeedMore if window.len() - p < SCAN_WINDOW => {
                        // Still too short: keep carrying (the chunk is tiny).
                        if bytes.len() <= SCAN_WINDOW {
                            window.drain(..p);
                            self.carry = window;
                            if p > 0 {
                                self.carry_frame = frame;
                                self.carry_ts = ts;
                            }
                            return None;
                        }
                        break;
                    }
                    _ => {}
                }
            }
        }
        for p in 0..bytes.len() {
            match probe(&bytes[p..], p == 0, sink) {
                Probe::Valid => {
                    self.synced_at_mark();
                    return Some(p);
                }
                Probe::NeedMore if bytes.len() - p < SCAN_WINDOW => {
                    self.carry.clear();
                    self.carry.extend_from_slice(&bytes[p..]);
                    self.carry_frame = frame;
                    self.carry_ts = ts;
                    return None;
                }
                _ => {}
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nastriage_synth::rpc::{encode_call, record_mark, AuthSys};

    /// A sink that says a prefix suffices from `suffices_at` bytes on, and
    /// notes the records it got.
    struct Mock {
        suffices_at: usize,
        cap: usize,
        records: Vec<(usize, u64)>,
    }

    impl Mock {
        fn new(suffices_at: usize) -> Self {
            Mock {
                suffices_at,
                cap: HEADER_CAP,
                records: Vec::new(),
            }
        }
    }

    impl Sink for Mock {
        fn record(&mut self, rec: Record<'_>) {
            self.records.push((rec.hdr.len(), rec.span.bytes));
        }
        fn awaits_reply(&self, _xid: u32) -> bool {
            false
        }
        fn header_cap(&self, _xid: u32, _mtype: u32) -> usize {
            self.cap
        }
        fn prefix_suffices(&self, hdr: &[u8]) -> bool {
            hdr.len() >= self.suffices_at
        }
        fn lost_sync(&mut self) {}
    }

    /// A call record of `len` content bytes (an RPC header and padding).
    fn call_record(len: usize) -> Vec<u8> {
        let body = vec![0u8; len.saturating_sub(40)];
        let msg = encode_call(1, 100003, 3, 7, &AuthSys::new("c", 0, 0), &body);
        record_mark(&msg)
    }

    /// Feeds `bytes` in `seg`-byte chunks; returns the kept prefix length
    /// and the record's byte count, per record.
    fn feed(bytes: &[u8], seg: usize, sink: &mut Mock) -> Vec<(usize, u64)> {
        let mut f = Framer::default();
        let mut off = 0u64;
        for (i, c) in bytes.chunks(seg).enumerate() {
            f.data(off, c, i as u64 + 1, i as i64, sink);
            off += c.len() as u64;
        }
        f.finish(sink);
        std::mem::take(&mut sink.records)
    }

    #[test]
    fn a_long_record_keeps_only_the_prefix_that_suffices() {
        let rec = call_record(32 * 1024);
        let whole = rec.len() as u64;
        // Enough at the first probe, at the second, or never.
        for (at, kept) in [
            (PROBES[0], PROBES[0]),
            (PROBES[1], PROBES[1]),
            (usize::MAX, HEADER_CAP),
        ] {
            for seg in [1, 100, 1448, 9000, rec.len()] {
                let mut m = Mock::new(at);
                assert_eq!(
                    feed(&rec, seg, &mut m),
                    vec![(kept, whole)],
                    "at {at} seg {seg}"
                );
            }
        }
        // Records in a row: each starts with a fresh probe.
        let two = [call_record(8000), call_record(300)].concat();
        let mut m = Mock::new(PROBES[0]);
        let got = feed(&two, 1448, &mut m);
        assert_eq!(
            got.iter().map(|r| r.0).collect::<Vec<_>>(),
            [PROBES[0], PROBES[0]]
        );
    }

    #[test]
    fn short_records_and_larger_caps_are_kept_whole() {
        // A record ending at a probe's size is not cut there.
        for len in [100, PROBES[0], PROBES[0] + 4, PROBES[1]] {
            let rec = call_record(len);
            let content = rec.len() - 4;
            let mut m = Mock::new(PROBES[0]);
            let kept = if content > PROBES[0] {
                PROBES[0]
            } else {
                content
            };
            assert_eq!(feed(&rec, 1448, &mut m)[0].0, kept, "len {len}");
            let mut m = Mock::new(usize::MAX);
            assert_eq!(feed(&rec, 1448, &mut m)[0].0, content, "len {len}");
        }
        // A listing's cap is never probed.
        let rec = call_record(20_000);
        let mut m = Mock::new(0);
        m.cap = LISTING_CAP;
        assert_eq!(feed(&rec, 1448, &mut m)[0].0, rec.len() - 4);
    }

    #[test]
    fn a_hole_before_the_probe_ends_the_prefix() {
        let rec = call_record(8000);
        let mut m = Mock::new(PROBES[0]);
        let mut f = Framer::default();
        f.data(0, &rec[..100], 1, 1, &mut m);
        f.hole(100, 1000, 2, 2, &mut m);
        f.data(1100, &rec[1100..], 3, 3, &mut m);
        assert_eq!(m.records, vec![(96, rec.len() as u64)]);
    }
}
