//! The pass on several cores without changing its results: the reading
//! thread decodes frames and numbers conversations (`tcp.stream` depends on
//! the order of every frame), then hands batches of decoded segments to two
//! stages that each see every segment in capture order — the TCP analysis
//! and the NFS/SMB layer. Nothing is split by connection, so every analyser
//! runs exactly as it would on one thread.
//!
//! A batch carries the segments' headers and where their payload lies: in
//! the capture reader's buffers, which the batch holds (see
//! `nastriage_capture::Shared`; the reader moves on to another buffer
//! rather than overwrite a held one), or, for the few payloads that are not
//! there (IP datagrams reassembled from fragments), in the batch's own
//! arena. Both stages share a batch through an `Arc`, and the last one to
//! finish with it sends it back to be filled again.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use nastriage_capture::Shared;
use nastriage_net::{IpInfo, TcpSegment, UdpDatagram};

use crate::conversations::Assignment;

/// Segments and payload bytes per batch: small enough to keep memory low
/// (a batch holds the reader's buffers its payloads lie in), large enough
/// that hand-overs are rare.
const ITEMS: usize = 2048;
const PAYLOAD_BYTES: usize = 1 << 19;
/// Reader buffers one batch may hold (several files are read at once when
/// they are merged).
const BUFFERS: usize = 4;
/// Batches in flight per stage (each holds the reader buffers of up to
/// 512 KiB of payload).
/// Four rather than two: on one lossy connection of small requests the
/// stages' work per batch varies (bursts of duplicate ACKs for the TCP
/// analysis, of replies for the NFS/SMB layer), and with two a stage often
/// waited while the other held the reader back: the pass 0.255 -> 0.244 s
/// (median of twelve alternating runs), the mix unchanged, 2.5 MB more.
/// Eight or sixteen were no faster.
const DEPTH: usize = 4;
/// `Place::buf` of a payload copied into the arena.
const ARENA: u8 = u8::MAX;

/// Where a payload lies: in `bufs[buf]`, or in the arena.
#[derive(Clone, Copy)]
pub(crate) struct Place {
    buf: u8,
    start: u32,
    len: u32,
}

pub(crate) enum Item {
    Tcp {
        frame: u64,
        ts: i64,
        asg: Assignment,
        /// The segment with an empty payload; the payload is at `range`.
        seg: TcpSegment<'static>,
        ip: IpInfo,
        range: Place,
        /// The TCP analysis' hash of the payload, taken while it is in cache.
        hash: u64,
    },
    Udp {
        frame: u64,
        ts: i64,
        ip: IpInfo,
        udp: UdpDatagram<'static>,
        range: Place,
    },
}

#[derive(Default)]
pub(crate) struct Batch {
    items: Vec<Item>,
    bufs: Vec<Shared>,
    arena: Vec<u8>,
    /// Payload bytes of the items, wherever they lie.
    bytes: usize,
}

impl Batch {
    fn copy(&mut self, payload: &[u8]) -> Place {
        self.bytes += payload.len();
        let start = self.arena.len();
        self.arena.extend_from_slice(payload);
        Place {
            buf: ARENA,
            start: start as u32,
            len: payload.len() as u32,
        }
    }

    fn full(&self) -> bool {
        self.items.len() >= ITEMS || self.bytes >= PAYLOAD_BYTES
    }

    fn payload(&self, p: Place) -> &[u8] {
        let (s, l) = (p.start as usize, p.len as usize);
        let bytes = match p.buf {
            ARENA => &self.arena[..],
            i => self.bufs.get(usize::from(i)).map_or(&[][..], |b| &b[..]),
        };
        bytes.get(s..s + l).unwrap_or(&[])
    }

    /// The items with their payloads, in capture order.
    pub(crate) fn for_each(&self, mut f: impl FnMut(Seg<'_>)) {
        for item in &self.items {
            match item {
                Item::Tcp {
                    frame,
                    ts,
                    asg,
                    seg,
                    ip,
                    range,
                    hash,
                } => f(Seg::Tcp {
                    frame: *frame,
                    ts: *ts,
                    asg,
                    seg: TcpSegment {
                        payload: self.payload(*range),
                        ..*seg
                    },
                    ip,
                    hash: *hash,
                }),
                Item::Udp {
                    frame,
                    ts,
                    ip,
                    udp,
                    range,
                } => f(Seg::Udp {
                    frame: *frame,
                    ts: *ts,
                    ip,
                    udp: UdpDatagram {
                        payload: self.payload(*range),
                        ..*udp
                    },
                }),
            }
        }
    }
}

/// One decoded segment as a stage sees it.
pub(crate) enum Seg<'a> {
    Tcp {
        frame: u64,
        ts: i64,
        asg: &'a Assignment,
        seg: TcpSegment<'a>,
        ip: &'a IpInfo,
        hash: u64,
    },
    Udp {
        frame: u64,
        ts: i64,
        ip: &'a IpInfo,
        udp: UdpDatagram<'a>,
    },
}

fn detach_tcp(s: &TcpSegment<'_>) -> TcpSegment<'static> {
    TcpSegment {
        src_port: s.src_port,
        dst_port: s.dst_port,
        seq: s.seq,
        ack: s.ack,
        flags: s.flags,
        window: s.window,
        header_len: s.header_len,
        options: s.options,
        payload_len: s.payload_len,
        payload: &[],
    }
}

fn detach_udp(d: &UdpDatagram<'_>) -> UdpDatagram<'static> {
    UdpDatagram {
        src_port: d.src_port,
        dst_port: d.dst_port,
        payload_len: d.payload_len,
        payload: &[],
    }
}

/// The reading side: fills batches and sends each to both stages.
pub(crate) struct Feeder {
    cur: Batch,
    to_tcp: SyncSender<Arc<Batch>>,
    to_app: SyncSender<Arc<Batch>>,
    recycled: Receiver<Batch>,
}

/// A stage's side: batches to process, and where to return them.
pub(crate) struct Stage {
    pub(crate) batches: Receiver<Arc<Batch>>,
    recycle: SyncSender<Batch>,
}

impl Stage {
    /// Done with a batch: the last holder returns its buffers.
    pub(crate) fn done(&self, b: Arc<Batch>) {
        if let Ok(mut b) = Arc::try_unwrap(b) {
            b.items.clear();
            b.bufs.clear();
            b.arena.clear();
            b.bytes = 0;
            let _ = self.recycle.try_send(b);
        }
    }
}

/// A feeder and its two stages (TCP analysis, application layer).
pub(crate) fn pipeline() -> (Feeder, Stage, Stage) {
    let (to_tcp, from_feeder_tcp) = sync_channel(DEPTH);
    let (to_app, from_feeder_app) = sync_channel(DEPTH);
    let (recycle, recycled) = sync_channel(2 * DEPTH + 2);
    (
        Feeder {
            cur: Batch::default(),
            to_tcp,
            to_app,
            recycled,
        },
        Stage {
            batches: from_feeder_tcp,
            recycle: recycle.clone(),
        },
        Stage {
            batches: from_feeder_app,
            recycle,
        },
    )
}

impl Feeder {
    /// Where `payload` lies: in `buf` (the reader's buffer of the packet),
    /// held by the batch, or else copied.
    fn place(&mut self, payload: &[u8], buf: Option<&Shared>) -> Place {
        // Addresses compared as numbers: where `payload` starts in `buf`,
        // if it lies within it.
        let start = buf.filter(|_| !payload.is_empty()).and_then(|b| {
            let at = (payload.as_ptr() as usize).checked_sub(b.as_ptr() as usize)?;
            (at + payload.len() <= b.len()).then_some((b, u32::try_from(at).ok()?))
        });
        let Some((buf, start)) = start else {
            return self.cur.copy(payload);
        };
        let i = match self.cur.bufs.iter().position(|b| Arc::ptr_eq(b, buf)) {
            Some(i) => i,
            None => {
                if self.cur.bufs.len() >= BUFFERS {
                    self.flush();
                }
                self.cur.bufs.push(Arc::clone(buf));
                self.cur.bufs.len() - 1
            }
        };
        self.cur.bytes += payload.len();
        Place {
            buf: i as u8,
            start,
            // (Within a buffer, whose offsets fit in `u32`.)
            len: payload.len() as u32,
        }
    }

    /// `buf`: the reader's buffer the segment lies in (the payload is
    /// copied when it is not there).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn tcp(
        &mut self,
        frame: u64,
        ts: i64,
        asg: Assignment,
        seg: &TcpSegment<'_>,
        ip: &IpInfo,
        buf: Option<&Shared>,
    ) {
        let range = self.place(seg.payload, buf);
        self.cur.items.push(Item::Tcp {
            frame,
            ts,
            asg,
            seg: detach_tcp(seg),
            ip: *ip,
            range,
            hash: crate::tcp::retrans_class::payload_hash(seg.payload),
        });
        if self.cur.full() {
            self.flush();
        }
    }

    pub(crate) fn udp(
        &mut self,
        frame: u64,
        ts: i64,
        ip: &IpInfo,
        d: &UdpDatagram<'_>,
        buf: Option<&Shared>,
    ) {
        let range = self.place(d.payload, buf);
        self.cur.items.push(Item::Udp {
            frame,
            ts,
            ip: *ip,
            udp: detach_udp(d),
            range,
        });
        if self.cur.full() {
            self.flush();
        }
    }

    /// Send the batch being filled (if any) to both stages.
    pub(crate) fn flush(&mut self) {
        if self.cur.items.is_empty() {
            return;
        }
        let next = self.recycled.try_recv().unwrap_or_else(|_| Batch {
            items: Vec::with_capacity(ITEMS),
            bufs: Vec::with_capacity(BUFFERS),
            arena: Vec::new(),
            bytes: 0,
        });
        let b = Arc::new(std::mem::replace(&mut self.cur, next));
        // A stage that stopped (it panicked) drops its receiver: the pass
        // goes on and the panic is reported when the stage is joined.
        let _ = self.to_tcp.send(Arc::clone(&b));
        let _ = self.to_app.send(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nastriage_net::TcpOptions;
    use std::net::{IpAddr, Ipv4Addr};

    fn seg(payload: &[u8]) -> TcpSegment<'_> {
        TcpSegment {
            src_port: 800,
            dst_port: 2049,
            seq: 1,
            ack: 1,
            flags: 0x18,
            window: 100,
            header_len: 20,
            options: TcpOptions::default(),
            payload_len: payload.len() as u32,
            payload,
        }
    }

    /// Every segment reaches both stages in order with its own payload bytes
    /// and its edge hash, across several (recycled) batches, whether its
    /// payload lies in a reader buffer or was copied.
    #[test]
    fn both_stages_see_every_segment_in_order() {
        let ip = IpInfo {
            version: 4,
            src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            ttl: 64,
            id: 7,
            proto: 6,
            payload_len: 0,
            dont_fragment: true,
            reassembled: false,
        };
        let asg = Assignment {
            stream: 3,
            dir: 0,
            reused_ports: false,
            replaced: None,
        };
        let (mut feeder, tcp, app) = pipeline();
        let n = 3 * ITEMS + 17;
        let payload = |i: usize| vec![(i % 251) as u8; i % 300];
        let consumer = |stage: Stage| {
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                for b in stage.batches.iter() {
                    b.for_each(|s| {
                        if let Seg::Tcp {
                            frame, seg, hash, ..
                        } = s
                        {
                            seen.push((frame, seg.payload.to_vec(), hash));
                        }
                    });
                    stage.done(b);
                }
                seen
            })
        };
        let (t, a) = (consumer(tcp), consumer(app));
        // Payloads lie in reader buffers (held by the batches, several to a
        // batch, and dropped here as the reader would move on) or, every
        // fifth one, elsewhere (copied).
        let mut buf: Option<Shared> = None;
        for i in 0..n {
            let p = payload(i);
            if i % 700 == 0 {
                let chunk: Vec<u8> = (i..i + 700).flat_map(payload).collect();
                buf = Some(Arc::new(chunk));
            }
            let shared = buf.as_ref().filter(|_| i % 5 != 0);
            let at: usize = (i - i % 700..i).map(|j| payload(j).len()).sum();
            let bytes = match shared {
                Some(b) => &b[at..at + p.len()],
                None => &p[..],
            };
            feeder.tcp(i as u64 + 1, i as i64, asg, &seg(bytes), &ip, shared);
        }
        feeder.flush();
        drop(feeder);
        for seen in [t.join(), a.join()] {
            let seen = seen.unwrap_or_default();
            assert_eq!(seen.len(), n);
            for (i, (frame, bytes, hash)) in seen.iter().enumerate() {
                assert_eq!(*frame, i as u64 + 1);
                assert_eq!(*bytes, payload(i));
                assert_eq!(*hash, crate::tcp::retrans_class::payload_hash(&payload(i)));
            }
        }
    }
}
