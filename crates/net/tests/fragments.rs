//! IPv4 and IPv6 fragment reassembly through the decoder.

mod common;

use common::*;
use nastriage_capture::linktype;
use nastriage_net::{Decoder, DefragLimits, Proto};

/// A UDP datagram (header + payload) to be fragmented.
fn datagram(n: usize) -> Vec<u8> {
    udp(2049, 1023, &bytes(3, n))
}

/// IPv4 fragments of `dgram` at the given byte boundaries.
fn v4_frags(dgram: &[u8], cuts: &[usize], id: u16) -> Vec<Vec<u8>> {
    let mut bounds = vec![0];
    bounds.extend_from_slice(cuts);
    bounds.push(dgram.len());
    bounds
        .windows(2)
        .map(|w| {
            let mut h = V4::new(17);
            h.id = id;
            h.frag_off = w[0] as u16;
            h.mf = w[1] != dgram.len();
            h.build(&dgram[w[0]..w[1]])
        })
        .collect()
}

/// IPv6 fragments; `unfrag` goes before the Fragment header, `after` (e.g.
/// destination options) is part of the fragmentable payload.
fn v6_frags(dgram_with_exts: &[u8], first_next: u8, cuts: &[usize], id: u32) -> Vec<Vec<u8>> {
    let mut bounds = vec![0];
    bounds.extend_from_slice(cuts);
    bounds.push(dgram_with_exts.len());
    bounds
        .windows(2)
        .map(|w| {
            let mut rest = frag6(first_next, w[0] as u16, w[1] != dgram_with_exts.len(), id);
            rest.extend_from_slice(&dgram_with_exts[w[0]..w[1]]);
            ipv6(44, &rest)
        })
        .collect()
}

fn feed(d: &mut Decoder, frames: &[Vec<u8>], order: &[usize]) -> Vec<Out> {
    order
        .iter()
        .map(|&i| decode(d, linktype::RAW, &frames[i]))
        .collect()
}

fn assert_reassembled(outs: &[Out], dgram: &[u8]) {
    // Only the frame that completes the datagram carries its transport.
    let (last, rest) = outs.split_last().unwrap();
    for o in rest {
        assert_eq!(o.tp, Tp::None);
        assert!(!o.ip.unwrap().reassembled);
    }
    let ip = last.ip.unwrap();
    assert!(ip.reassembled);
    assert_eq!(ip.payload_len as usize, dgram.len());
    let (sp, dp, len, payload) = last.udp_payload();
    assert_eq!((sp, dp), (2049, 1023));
    assert_eq!(len as usize, dgram.len() - 8);
    assert_eq!(payload, &dgram[8..]);
}

#[test]
fn ipv4_in_order_and_out_of_order() {
    let dgram = datagram(3000);
    let frames = v4_frags(&dgram, &[1480, 2960], 7);
    for order in [[0, 1, 2], [2, 1, 0], [1, 2, 0], [2, 0, 1]] {
        let mut d = Decoder::default();
        let outs = feed(&mut d, &frames, &order);
        assert_reassembled(&outs, &dgram);
        assert_eq!(d.defrag_stats(), (1, 0));
        assert_eq!(d.counters().get(Proto::IpFragment).0, 3);
        assert_eq!(d.counters().get(Proto::Udp).0, 1);
        // The fragment's own IP info on the non-final frames.
        assert_eq!(outs[0].ip.unwrap().id, 7);
    }
}

#[test]
fn ipv4_overlapping_and_duplicate_fragments() {
    let dgram = datagram(2000);
    // 0..1000, 800..1600 (overlaps), 1600..end, plus a duplicate of the first.
    let mut frames = v4_frags(&dgram, &[1000], 9);
    let mut h = V4::new(17);
    h.id = 9;
    h.frag_off = 800;
    h.mf = true;
    let overlap = h.build(&dgram[800..1600]);
    let mut h = V4::new(17);
    h.id = 9;
    h.frag_off = 1600;
    let tail = h.build(&dgram[1600..]);
    frames.truncate(1); // keep 0..1000
    frames.extend([overlap, tail, frames[0].clone()]);
    let mut d = Decoder::default();
    let outs = feed(&mut d, &frames, &[0, 3, 2, 1]);
    assert_reassembled(&outs, &dgram);
    assert_eq!(d.defrag_stats(), (1, 0));
}

#[test]
fn ipv4_interleaved_datagrams_and_keys() {
    // Same id from different sources, and a different protocol: separate.
    let a = datagram(1500);
    let b = datagram(1700);
    let fa = v4_frags(&a, &[800], 1);
    let mut fb = Vec::new();
    for (i, (off, end)) in [(0usize, 800usize), (800, b.len())].iter().enumerate() {
        let mut h = V4::new(17);
        h.id = 1;
        h.src = [172, 16, 0, 1];
        h.frag_off = *off as u16;
        h.mf = i == 0;
        fb.push(h.build(&b[*off..*end]));
    }
    let mut d = Decoder::default();
    let o1 = decode(&mut d, linktype::RAW, &fa[0]);
    let o2 = decode(&mut d, linktype::RAW, &fb[0]);
    let o3 = decode(&mut d, linktype::RAW, &fb[1]);
    let o4 = decode(&mut d, linktype::RAW, &fa[1]);
    assert_reassembled(&[o1, o4], &a);
    assert_reassembled(&[o2, o3], &b);
    assert_eq!(d.defrag_stats(), (2, 0));
}

#[test]
fn ipv6_fragments_with_extension_headers() {
    // Hop-by-hop before the Fragment header (unfragmentable part); a
    // destination-options header after it belongs to the fragmentable part.
    let dgram = datagram(2500);
    for with_dest in [false, true] {
        let mut payload = Vec::new();
        let first_next = if with_dest {
            payload.extend(ext(17, &[0x1e, 2, 0, 0]));
            60
        } else {
            17
        };
        payload.extend(&dgram);
        let frames: Vec<Vec<u8>> = v6_frags(&payload, first_next, &[1232, 2464], 0xABCD_0001)
            .into_iter()
            .map(|f| {
                // Insert a hop-by-hop header before the Fragment header.
                let mut rest = ext(44, &[]);
                rest.extend_from_slice(&f[40..]);
                ipv6(0, &rest)
            })
            .collect();
        for order in [[0, 1, 2], [2, 0, 1]] {
            let mut d = Decoder::default();
            let outs = feed(&mut d, &frames, &order);
            for o in &outs[..2] {
                let ip = o.ip.expect("fragment has IP info");
                assert_eq!(ip.id, 0xABCD_0001);
                assert_eq!(ip.proto, first_next);
            }
            // The destination options after the Fragment header are skipped
            // in the reassembled payload.
            assert_reassembled(&outs, &dgram);
            assert_eq!(outs[2].ip.unwrap().proto, 17);
            assert_eq!(d.defrag_stats(), (1, 0));
            assert_eq!(d.counters().get(Proto::MalformedIp).0, 0);
        }
    }
}

#[test]
fn missing_fragment_abandoned_on_timeout_or_eviction() {
    let dgram = datagram(3000);
    let frames = v4_frags(&dgram, &[1480, 2960], 5);
    let limits = DefragLimits {
        max_pending: 4,
        max_bytes: 1 << 20,
        timeout_ns: 1_000_000_000,
    };
    let mut d = Decoder::new(limits);
    decode_at(&mut d, linktype::RAW, &frames[0], frames[0].len() as u32, 0);
    decode_at(
        &mut d,
        linktype::RAW,
        &frames[2],
        frames[2].len() as u32,
        500_000_000,
    );
    assert_eq!(d.defrag_stats(), (0, 0));
    // The missing middle fragment arrives too late: the datagram has expired
    // and the late fragment starts a new one, which never completes.
    let o = decode_at(
        &mut d,
        linktype::RAW,
        &frames[1],
        frames[1].len() as u32,
        2_000_000_000,
    );
    assert_eq!(o.tp, Tp::None);
    assert_eq!(d.defrag_stats(), (0, 1));
    // Eviction: more pending datagrams than allowed.
    for id in 100..110u16 {
        let f = v4_frags(&dgram, &[1480], id);
        decode_at(
            &mut d,
            linktype::RAW,
            &f[0],
            f[0].len() as u32,
            2_000_000_000 + i64::from(id),
        );
    }
    // 11 pending in total, 4 kept.
    assert_eq!(d.defrag_stats(), (0, 1 + 7));
    // Fragments of an evicted datagram do not resurrect it as complete.
    let f = v4_frags(&dgram, &[1480], 100);
    let o = decode_at(
        &mut d,
        linktype::RAW,
        &f[1],
        f[1].len() as u32,
        2_000_000_200,
    );
    assert_eq!(o.tp, Tp::None);
    // The most recent ones complete normally.
    let f = v4_frags(&dgram, &[1480], 109);
    let o = decode_at(
        &mut d,
        linktype::RAW,
        &f[1],
        f[1].len() as u32,
        2_000_000_300,
    );
    assert!(o.ip.unwrap().reassembled);
    assert_eq!(d.defrag_stats().0, 1);
}

#[test]
fn byte_limit_counts_recycled_buffers() {
    // Each datagram needs ~60 kB; only one fits in 100 kB. With recycled
    // buffers correctly accounted, every new datagram evicts the previous.
    let limits = DefragLimits {
        max_pending: 1000,
        max_bytes: 100_000,
        timeout_ns: i64::MAX,
    };
    let mut d = Decoder::new(limits);
    let big = datagram(60_000);
    for id in 0..6u16 {
        let f = v4_frags(&big, &[59_992], id);
        decode(&mut d, linktype::RAW, &f[0]);
    }
    assert_eq!(d.defrag_stats(), (0, 5));
}

#[test]
fn fragment_cut_by_snaplen_never_completes() {
    let dgram = datagram(3000);
    let frames = v4_frags(&dgram, &[1480], 11);
    let limits = DefragLimits {
        max_pending: 16,
        max_bytes: 1 << 20,
        timeout_ns: 1_000,
    };
    let mut d = Decoder::new(limits);
    // The first fragment captured with a 200-byte snaplen.
    let o = decode_at(
        &mut d,
        linktype::RAW,
        &frames[0][..200],
        frames[0].len() as u32,
        0,
    );
    assert_eq!(o.ip.unwrap().payload_len, 1480);
    let o = decode_at(
        &mut d,
        linktype::RAW,
        &frames[1],
        frames[1].len() as u32,
        10,
    );
    assert_eq!(o.tp, Tp::None);
    assert_eq!(d.defrag_stats(), (0, 0));
    // Abandoned once it times out.
    let other = v4_frags(&dgram, &[1480], 12);
    decode_at(
        &mut d,
        linktype::RAW,
        &other[0],
        other[0].len() as u32,
        5_000,
    );
    assert_eq!(d.defrag_stats(), (0, 1));
}

#[test]
fn oversized_and_odd_fragments() {
    let mut d = Decoder::default();
    // Offset + length beyond 65535: never buffered, never completes.
    let mut h = V4::new(17);
    h.frag_off = 65_528;
    let o = decode(&mut d, linktype::RAW, &h.build(&[0; 100]));
    assert_eq!(o.tp, Tp::None);
    assert_eq!(d.counters().get(Proto::IpFragment).0, 1);
    // A single last fragment at offset 0 with MF clear is not a fragment;
    // MF set with nothing else is pending.
    let mut h = V4::new(17);
    h.mf = true;
    let o = decode(&mut d, linktype::RAW, &h.build(&udp(1, 2, &[0; 16])));
    assert_eq!(o.tp, Tp::None);
    assert_eq!(d.defrag_stats(), (0, 0));
}
