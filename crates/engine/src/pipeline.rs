//! The pass on several cores without changing its results: the reading
//! thread decodes frames and numbers conversations (`tcp.stream` depends on
//! the order of every frame), then hands batches of decoded segments to two
//! stages that each see every segment in capture order — the TCP analysis
//! and the NFS/SMB layer. Nothing is split by connection, so every analyser
//! runs exactly as it would on one thread.
//!
//! A batch carries the segments' headers and a copy of their captured
//! payload (the reader's buffer is reused as it goes); both stages share it
//! through an `Arc`, and the last one to finish with it sends its buffers
//! back to be filled again.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use nastriage_net::{IpInfo, TcpSegment, UdpDatagram};

use crate::conversations::Assignment;

/// Payload bytes and segments per batch: small enough to stay in cache and
/// keep memory low, large enough that hand-overs are rare.
const ARENA_BYTES: usize = 1 << 20;
const ITEMS: usize = 2048;
/// Batches in flight per stage.
const DEPTH: usize = 4;

pub(crate) enum Item {
    Tcp {
        frame: u64,
        ts: i64,
        asg: Assignment,
        /// The segment with an empty payload; the payload is `range` of the arena.
        seg: TcpSegment<'static>,
        ip: IpInfo,
        range: (u32, u32),
        /// The TCP analysis' hash of the payload, taken while it is in cache.
        hash: u64,
    },
    Udp {
        frame: u64,
        ts: i64,
        ip: IpInfo,
        udp: UdpDatagram<'static>,
        range: (u32, u32),
    },
}

#[derive(Default)]
pub(crate) struct Batch {
    items: Vec<Item>,
    arena: Vec<u8>,
}

impl Batch {
    fn store(&mut self, payload: &[u8]) -> (u32, u32) {
        let start = self.arena.len();
        self.arena.extend_from_slice(payload);
        (start as u32, payload.len() as u32)
    }

    fn full(&self) -> bool {
        self.items.len() >= ITEMS || self.arena.len() >= ARENA_BYTES
    }

    fn payload(&self, (start, len): (u32, u32)) -> &[u8] {
        let (s, l) = (start as usize, len as usize);
        self.arena.get(s..s + l).unwrap_or(&[])
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
            b.arena.clear();
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
    pub(crate) fn tcp(
        &mut self,
        frame: u64,
        ts: i64,
        asg: Assignment,
        seg: &TcpSegment<'_>,
        ip: &IpInfo,
    ) {
        let range = self.cur.store(seg.payload);
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

    pub(crate) fn udp(&mut self, frame: u64, ts: i64, ip: &IpInfo, d: &UdpDatagram<'_>) {
        let range = self.cur.store(d.payload);
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
            arena: Vec::with_capacity(ARENA_BYTES + 64 * 1024),
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
    /// and its edge hash, across several (recycled) batches.
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
        for i in 0..n {
            let p = payload(i);
            feeder.tcp(i as u64 + 1, i as i64, asg, &seg(&p), &ip);
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
