//! Reading every supported container and compression, from files and streams.

mod common;

use std::io::Cursor;

use common::*;
use nastriage_capture::writer::{PcapNgWriter, PcapWriter, SnoopWriter};
use nastriage_capture::{linktype, CaptureReader, Compression, FileFormat, MergedReader};

// ------------------------------------------------------------ classic pcap

#[test]
fn pcap_le_be_usec_nsec() {
    for be in [false, true] {
        for nsec in [false, true] {
            let magic = if nsec { MAGIC_NSEC } else { MAGIC_USEC };
            let mut b = PcapBuilder::new(be, magic, (2, 4), 262_144, linktype::ETHERNET);
            let d0 = payload(1, 60);
            let d1 = payload(2, 1514);
            let d2 = payload(3, 0);
            b.record(1_600_000_000, 999_999, 60, &d0);
            b.record(1_600_000_001, 1, 9000, &d1); // snaplen-cut: orig > caplen
            b.record(0, 0, 64, &d2);
            let r = read_bytes(&b.out);
            assert!(r.error.is_none() && r.warnings.is_empty(), "{:?}", r);
            let unit = if nsec { 1 } else { 1000 };
            let want = [
                (1_600_000_000 * 1_000_000_000 + 999_999 * unit, 60, d0),
                (1_600_000_001 * 1_000_000_000 + unit, 9000, d1),
                (0, 64, d2),
            ];
            assert_eq!(r.packets.len(), 3);
            for (i, (p, (ts, orig, data))) in r.packets.iter().zip(want).enumerate() {
                assert_eq!(p.ts_ns, ts, "be={be} nsec={nsec} packet {i}");
                assert_eq!(p.orig_len, orig);
                assert_eq!(p.data, data);
                assert_eq!(p.linktype, 1);
                assert_eq!(p.interface, 0);
                assert_eq!(p.offset, b.records[i].0);
            }
            let info = open_bytes("x", &b.out).unwrap().info().clone();
            assert_eq!(
                info.format,
                FileFormat::Pcap {
                    big_endian: be,
                    nanosecond: nsec,
                    modified: false,
                    version_major: 2,
                    version_minor: 4
                }
            );
            assert_eq!(info.compression, Compression::None);
            assert_eq!(r.linktypes, vec![1]);
        }
    }
}

/// A pcap record lying whole in the read buffer is read in place; one that
/// does not (at a buffer's end, or fed a few bytes at a time) is read piece
/// by piece. Both give the same packets, warnings and errors, in every
/// pcap flavour, for records of every size, a record cut short and a
/// corrupt length.
#[test]
fn pcap_records_in_place_and_piecewise_agree() {
    let mut rng = XorShift(0x5EED_0F9C_A9B1);
    for be in [false, true] {
        for magic in [MAGIC_USEC, MAGIC_NSEC, MAGIC_MODIFIED] {
            let mut b = PcapBuilder::new(be, magic, (2, 4), 262_144, linktype::ETHERNET);
            for i in 0..300u32 {
                let len = match i % 4 {
                    0 => rng.below(64),
                    1 => rng.below(1600),
                    2 => 1514,
                    _ => rng.below(9000),
                };
                let data = payload(i as u8, len);
                let orig = len as u32 + (i % 3) * 100;
                b.record(1_700_000_000 + i, rng.below(1_000_000) as u32, orig, &data);
            }
            let whole = b.out.clone();
            // Cut inside the last record's data, and a corrupt length after
            // the records.
            let cut = whole[..whole.len() - 5].to_vec();
            let mut corrupt = b;
            corrupt.raw_record(9, 0, 0xFFFF_FFF0, 4, &[1, 2, 3, 4]);
            for bytes in [whole, cut, corrupt.out] {
                let in_place = read_bytes(&bytes);
                assert!(in_place.packets.len() >= 299, "be={be} magic={magic:x}");
                for chunk in [1, 7, 1500] {
                    let piecewise = read_all(
                        CaptureReader::from_reader(
                            "mem",
                            Box::new(Trickle::new(bytes.clone(), chunk)),
                        )
                        .unwrap(),
                    );
                    assert_eq!(piecewise.packets, in_place.packets, "chunk {chunk}");
                    assert_eq!(piecewise.warnings, in_place.warnings, "chunk {chunk}");
                    assert_eq!(
                        piecewise.error.as_ref().map(|e| (e.offset, e.to_string())),
                        in_place.error.as_ref().map(|e| (e.offset, e.to_string())),
                        "chunk {chunk}"
                    );
                }
            }
        }
    }
}

#[test]
fn pcap_modified_format_both_byte_orders() {
    for be in [false, true] {
        let mut b = PcapBuilder::new(be, MAGIC_MODIFIED, (2, 4), 65535, linktype::ETHERNET);
        let d0 = payload(9, 42);
        let d1 = payload(8, 77);
        b.record(100, 5, 42, &d0);
        b.record(101, 6, 80, &d1);
        let r = read_bytes(&b.out);
        assert!(
            r.error.is_none() && r.warnings.is_empty(),
            "be={be}: {:?}",
            r
        );
        assert_eq!(r.packets.len(), 2);
        assert_eq!(r.packets[0].data, d0);
        assert_eq!(r.packets[1].data, d1);
        assert_eq!(r.packets[1].ts_ns, 101_000_006_000);
        assert_eq!(r.packets[1].orig_len, 80);
        assert_eq!(r.packets[1].offset, 24 + 24 + 42);
        let info = open_bytes("x", &b.out).unwrap().info().clone();
        assert!(
            matches!(info.format, FileFormat::Pcap { modified: true, big_endian, .. } if big_endian == be)
        );
        assert!(info.format.describe().contains("modified"));
    }
}

#[test]
fn pcap_version_2_1_and_linktype_fcs_bits() {
    // Old v2.1 header; the upper bits of the link-type field carry the FCS
    // length and must not leak into the link type.
    let fcs = 0x1000_0000 | 0x0400_0000;
    let mut b = PcapBuilder::new(true, MAGIC_USEC, (2, 1), 1600, fcs | linktype::LINUX_SLL);
    b.record(5, 0, 20, &payload(0, 20));
    let r = read_bytes(&b.out);
    assert!(r.error.is_none());
    assert_eq!(r.packets.len(), 1);
    assert_eq!(r.packets[0].linktype, linktype::LINUX_SLL);
    let info = open_bytes("x", &b.out).unwrap().info().clone();
    assert_eq!(
        info.format.describe(),
        "pcap (big-endian, microsecond, v2.1)"
    );
    assert_eq!(info.format.name(), "pcap");
}

#[test]
fn pcap_bad_headers() {
    // Reserved link-type bits.
    let b = PcapBuilder::new(false, MAGIC_USEC, (2, 4), 65535, 0x0001_0001);
    let e = open_bytes("x", &b.out).err().expect("reserved bits");
    assert_eq!(e.offset, 20);
    // Version 1.x does not exist.
    let b = PcapBuilder::new(false, MAGIC_USEC, (1, 4), 65535, 1);
    let e = open_bytes("x", &b.out).err().expect("version");
    assert_eq!(e.offset, 4);
    assert!(e.to_string().contains("byte offset 4"));
    // A header cut short.
    let b = PcapBuilder::new(false, MAGIC_USEC, (2, 4), 65535, 1);
    for cut in 4..24 {
        let e = open_bytes("x", &b.out[..cut]).err().expect("short header");
        assert_eq!(e.offset, cut as u64);
    }
}

// ------------------------------------------------------------------ pcapng

/// As `pcap_records_in_place_and_piecewise_agree`, for pcapng: enhanced
/// packet blocks without options are read in place, every other block (and
/// any block not whole in the buffer) is parsed. Sections in both byte
/// orders with two interfaces (one with its own resolution and offset),
/// blocks with options, simple and obsolete packets and blocks to skip,
/// then each way of going wrong: a cut, a wrong trailing length, an unknown
/// interface, a captured length past the block, an option past the block.
#[test]
fn pcapng_blocks_in_place_and_piecewise_agree() {
    let mut rng = XorShift(0x0DD_B10C_5EED);
    let mut b = NgBuilder::new();
    for (section, be) in [false, true, false].into_iter().enumerate() {
        b.shb(be);
        b.idb(1, 0, &[]);
        b.idb(101, 4096, &[opt(9, &[0x86]), opt(14, &b.i64_bytes(-7))]);
        for i in 0..150u32 {
            let len = match i % 3 {
                0 => rng.below(64),
                1 => rng.below(1600),
                _ => rng.below(5000),
            };
            let data = payload((i + section as u32) as u8, len);
            let ts = 1_700_000_000_000_000 + u64::from(i) * 1_000_003;
            match i % 10 {
                7 => b.epb(i % 2, ts, len as u32, &data, &[opt(1, b"a comment")]),
                8 => b.spb(len as u32 + 10, &data),
                9 => {
                    b.opb(1, ts, len as u32, &data);
                    b.noise();
                }
                _ => b.epb(i % 2, ts, len as u32 + (i % 4), &data, &[]),
            }
        }
    }
    b.epb(0, 1_800_000_000_000_000, 100, &payload(1, 100), &[]);
    let whole = b.out.clone();
    let last = b.blocks[b.blocks.len() - 1];
    let mut variants = vec![whole.clone(), whole[..whole.len() - 7].to_vec()];
    // The last block (an EPB without options, little-endian) made wrong.
    let at = last.0 as usize;
    let mut trailing = whole.clone();
    trailing[last.1 as usize - 4] ^= 4;
    let mut iface = whole.clone();
    iface[at + 8..at + 12].copy_from_slice(&9u32.to_le_bytes());
    let mut caplen = whole.clone();
    caplen[at + 20..at + 24].copy_from_slice(&100_000u32.to_le_bytes());
    // An EPB whose option runs past the block (left to the parse, which
    // tolerates it).
    b.epb(
        0,
        1_800_000_000_000_001,
        100,
        &payload(2, 100),
        &[opt(1, b"note")],
    );
    let opt_at = b.blocks[b.blocks.len() - 1].0 as usize + 28 + 100;
    let mut options = b.out.clone();
    options[opt_at + 2..opt_at + 4].copy_from_slice(&0xFFF0u16.to_le_bytes());
    variants.extend([trailing, iface, caplen, options]);
    for (v, bytes) in variants.iter().enumerate() {
        let in_place = read_bytes(bytes);
        assert!(
            in_place.packets.len() >= 450,
            "variant {v}: {:?}",
            in_place.error
        );
        for chunk in [1, 5, 1500] {
            let piecewise = read_all(
                CaptureReader::from_reader("mem", Box::new(Trickle::new(bytes.clone(), chunk)))
                    .unwrap(),
            );
            assert_eq!(
                piecewise.packets, in_place.packets,
                "variant {v} chunk {chunk}"
            );
            assert_eq!(
                piecewise.warnings, in_place.warnings,
                "variant {v} chunk {chunk}"
            );
            assert_eq!(
                piecewise.error.as_ref().map(|e| (e.offset, e.to_string())),
                in_place.error.as_ref().map(|e| (e.offset, e.to_string())),
                "variant {v} chunk {chunk}"
            );
        }
    }
}

#[test]
fn pcapng_sections_interfaces_resolutions() {
    let mut b = NgBuilder::new();
    // Section 1, little-endian: default resolution (µs), ns, ms, 2^-10 s.
    b.shb(false);
    b.idb(1, 0, &[opt(2, b"eth0")]);
    b.idb(101, 0, &[opt(9, &[9])]);
    b.idb(113, 0, &[opt(9, &[3])]);
    b.idb(276, 0, &[opt(9, &[0x80 | 10])]);
    b.epb(0, 1_500_000_000_123_456, 60, &payload(1, 60), &[]);
    b.noise();
    b.epb(
        1,
        1_500_000_000_123_456_789,
        40,
        &payload(2, 40),
        &[opt(1, b"a comment")],
    );
    b.epb(2, 1_500_000_000_123, 50, &payload(3, 50), &[]);
    b.epb(3, 3 * 1024 + 512, 44, &payload(4, 44), &[]);
    // Section 2, big-endian: interface ids restart, if_tsoffset applies.
    b.shb(true);
    let off = b.i64_bytes(1_000_000_000);
    b.idb(229, 0, &[opt(9, &[6]), opt(14, &off)]);
    b.idb(1, 0, &[]);
    b.epb(0, 250_000, 33, &payload(5, 33), &[]);
    b.epb(1, 7, 31, &payload(6, 31), &[]);
    b.opb(1, 8, 29, &payload(7, 29));
    // Section 3, little-endian again, binary resolution with an offset.
    b.shb(false);
    let off = b.i64_bytes(-5);
    b.idb(0, 0, &[opt(9, &[0x80 | 1]), opt(14, &off)]);
    b.epb(0, 21, 12, &payload(8, 12), &[]);

    for chunk in [usize::MAX, 1, 3, 7] {
        let r = if chunk == usize::MAX {
            read_bytes(&b.out)
        } else {
            read_all(
                CaptureReader::from_reader("t", Box::new(Trickle::new(b.out.clone(), chunk)))
                    .unwrap(),
            )
        };
        assert!(r.error.is_none() && r.warnings.is_empty(), "{:?}", r);
        let got: Vec<(i64, u32, u32, u32, usize)> = r
            .packets
            .iter()
            .map(|p| (p.ts_ns, p.linktype, p.interface, p.orig_len, p.data.len()))
            .collect();
        assert_eq!(
            got,
            vec![
                (1_500_000_000_123_456_000, 1, 0, 60, 60),
                (1_500_000_000_123_456_789, 101, 1, 40, 40),
                (1_500_000_000_123_000_000, 113, 2, 50, 50),
                (3_500_000_000, 276, 3, 44, 44),
                (1_000_000_000_000_000_000 + 250_000_000, 229, 0, 33, 33),
                (7_000, 1, 1, 31, 31),
                (8_000, 1, 1, 29, 29),
                (-5_000_000_000 + 10_500_000_000, 0, 0, 12, 12),
            ]
        );
        assert_eq!(r.packets[1].data, payload(2, 40));
        assert_eq!(r.packets[6].data, payload(7, 29));
        assert_eq!(r.linktypes, vec![1, 101, 113, 276, 229, 0]);
    }
    let info = open_bytes("x", &b.out).unwrap().info().clone();
    assert_eq!(info.format, FileFormat::PcapNg);
}

#[test]
fn pcapng_spb_uses_snaplen_and_orig_len() {
    for be in [false, true] {
        let mut b = NgBuilder::new();
        b.shb(be);
        b.idb(1, 16, &[]);
        // Orig 100 bytes, 16 captured (block holds the snaplen-cut data).
        b.spb(100, &payload(1, 16));
        // Block carries more than the snaplen: the snaplen wins.
        b.spb(24, &payload(2, 24));
        // Orig shorter than the block data: the padding is not packet data.
        b.spb(5, &payload(3, 8));
        let r = read_bytes(&b.out);
        assert!(r.error.is_none(), "{:?}", r.error);
        let lens: Vec<(usize, u32, i64)> = r
            .packets
            .iter()
            .map(|p| (p.data.len(), p.orig_len, p.ts_ns))
            .collect();
        assert_eq!(lens, vec![(16, 100, 0), (16, 24, 0), (5, 5, 0)]);
        assert_eq!(r.packets[2].data, payload(3, 5));
    }
}

#[test]
fn pcapng_epb_padding_and_truncated_capture() {
    let mut b = NgBuilder::new();
    b.shb(false);
    b.idb(1, 0, &[]);
    for len in 0..9 {
        b.epb(
            0,
            len as u64,
            1500,
            &payload(len as u8, len),
            &[opt(1, b"x")],
        );
    }
    let r = read_bytes(&b.out);
    assert!(r.error.is_none());
    for (i, p) in r.packets.iter().enumerate() {
        assert_eq!(p.data, payload(i as u8, i));
        assert_eq!(p.orig_len, 1500);
        assert_eq!(p.offset, b.blocks[2 + i].0);
    }
}

#[test]
fn pcapng_packet_before_any_idb() {
    for kind in ["epb", "spb", "opb"] {
        let mut b = NgBuilder::new();
        b.shb(false);
        match kind {
            "epb" => b.epb(0, 0, 4, &[1, 2, 3, 4], &[]),
            "spb" => b.spb(4, &[1, 2, 3, 4]),
            _ => b.opb(0, 0, 4, &[1, 2, 3, 4]),
        }
        let r = read_bytes(&b.out);
        let e = r.error.expect(kind);
        assert_eq!(e.offset, b.blocks[1].0, "{kind}: {e}");
        assert!(r.packets.is_empty());
    }
    // An interface id beyond those declared in this section (the previous
    // section's interfaces do not count).
    let mut b = NgBuilder::new();
    b.shb(false);
    b.idb(1, 0, &[]);
    b.idb(1, 0, &[]);
    b.epb(1, 0, 4, &[1, 2, 3, 4], &[]);
    b.shb(false);
    b.idb(1, 0, &[]);
    b.epb(1, 0, 4, &[1, 2, 3, 4], &[]);
    let r = read_bytes(&b.out);
    assert_eq!(r.packets.len(), 1);
    assert_eq!(r.error.expect("if_id 1 in section 2").offset, b.blocks[6].0);
}

#[test]
fn pcapng_without_interfaces_warns() {
    let mut b = NgBuilder::new();
    b.shb(false);
    b.noise();
    let r = read_bytes(&b.out);
    assert!(r.packets.is_empty() && r.error.is_none());
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert_eq!(r.warnings[0].offset, b.out.len() as u64);
    assert!(r.linktypes.is_empty());
}

#[test]
fn pcapng_unusable_tsresol() {
    for bad in [20u8, 0x80 | 64, 0xff] {
        let mut b = NgBuilder::new();
        b.shb(false);
        b.idb(1, 0, &[opt(9, &[bad])]);
        let r = read_bytes(&b.out);
        let e = r.error.expect("bad tsresol");
        assert_eq!(e.offset, b.blocks[1].0);
    }
    // The extremes that do fit: 10^19 and 2^63 units per second.
    for good in [19u8, 0x80 | 63, 0, 0x80] {
        let mut b = NgBuilder::new();
        b.shb(false);
        b.idb(1, 0, &[opt(9, &[good])]);
        b.epb(0, u64::MAX, 4, &[0; 4], &[]);
        let r = read_bytes(&b.out);
        assert!(r.error.is_none(), "{good:#x}: {:?}", r.error);
        assert_eq!(r.packets.len(), 1);
    }
}

#[test]
fn pcapng_bad_byte_order_magic() {
    let mut b = NgBuilder::new();
    b.shb(false);
    b.out[8..12].copy_from_slice(&[1, 2, 3, 4]);
    let e = open_bytes("x", &b.out).unwrap().advance().unwrap_err();
    assert_eq!(e.offset, 8);
}

// ------------------------------------------------------------------- snoop

#[test]
fn snoop_records() {
    let (bytes, recs) = small_snoop();
    let r = read_bytes(&bytes);
    assert!(r.error.is_none() && r.warnings.is_empty());
    assert_eq!(r.packets.len(), 4);
    for (i, p) in r.packets.iter().enumerate() {
        assert_eq!(p.data, payload(i as u8 + 40, 20 + i));
        assert_eq!(
            p.ts_ns,
            (1_000 + i as i64) * 1_000_000_000 + i as i64 * 10_000
        );
        assert_eq!(p.orig_len, 100 + i as u32);
        assert_eq!(p.offset, recs[i].0);
        assert_eq!(p.linktype, linktype::ETHERNET);
    }
    assert_eq!(
        open_bytes("x", &bytes).unwrap().info().format,
        FileFormat::Snoop
    );
    // FDDI maps to LINKTYPE_FDDI; other datalinks and versions are refused.
    let mut fddi = snoop_header(8);
    snoop_record(&mut fddi, 1, 2, 3, &[1, 2, 3]);
    assert_eq!(read_bytes(&fddi).packets[0].linktype, linktype::FDDI);
    assert_eq!(open_bytes("x", &snoop_header(2)).err().unwrap().offset, 12);
    let mut v3 = snoop_header(4);
    v3[11] = 3;
    assert_eq!(open_bytes("x", &v3).err().unwrap().offset, 8);
    // A record length that cannot hold its data.
    let mut bad = snoop_header(4);
    let at = bad.len() as u64;
    snoop_record(&mut bad, 1, 2, 3, &[0; 8]);
    bad[16 + 8..16 + 12].copy_from_slice(&20u32.to_be_bytes());
    let r = read_bytes(&bad);
    assert_eq!(r.error.unwrap().offset, at);
}

// ------------------------------------------------------------ compression

fn samples() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("pcap", small_pcap().0),
        ("pcapng", small_pcapng().0),
        ("snoop", small_snoop().0),
        ("pcap-be-ns", {
            let mut b = PcapBuilder::new(true, MAGIC_NSEC, (2, 4), 65535, 101);
            b.record(1, 2, 3, &[0x45, 0, 0]);
            b.out
        }),
    ]
}

#[test]
fn compressed_files_detected_by_content() {
    let dir = TempDir::new("compressed");
    for (name, plain) in samples() {
        let want = read_bytes(&plain);
        assert!(want.error.is_none() && !want.packets.is_empty(), "{name}");
        let mut two_members = gzip(&plain[..plain.len() / 2]);
        two_members.extend(gzip(&plain[plain.len() / 2..]));
        for (comp, bytes) in [
            (Compression::None, plain.clone()),
            (Compression::Gzip, gzip(&plain)),
            (Compression::Gzip, two_members),
            (Compression::Zstd, zstd(&plain)),
        ] {
            // No telling extension: detection is by content only.
            let path = dir.write(&format!("{name}-{}-capture", comp.name()), &bytes);
            let r = CaptureReader::open(&path).unwrap();
            assert_eq!(r.info().compression, comp, "{name}");
            assert_eq!(r.info().path, path);
            let got = read_all(r);
            assert!(
                got.error.is_none() && got.warnings.is_empty(),
                "{name} {comp:?}: {got:?}"
            );
            assert_eq!(got.packets, want.packets, "{name} {comp:?}");
            // Standard input is the same stream through from_reader,
            // whatever the read sizes.
            for chunk in [1, 5, 4096] {
                let r =
                    CaptureReader::from_reader("-", Box::new(Trickle::new(bytes.clone(), chunk)))
                        .unwrap();
                assert_eq!(
                    read_all(r).packets,
                    want.packets,
                    "{name} {comp:?} chunk {chunk}"
                );
            }
        }
    }
}

#[test]
fn compressed_garbage_is_an_error() {
    // A gzip or zstd stream whose content is not a capture.
    for bytes in [
        gzip(b"hello, this is not a capture"),
        zstd(b"not a capture either"),
    ] {
        let e = open_bytes("x", &bytes).err().expect("not a capture");
        assert_eq!(e.offset, 0);
        assert!(e.message.contains("not a capture"), "{e}");
    }
    // Empty after decompression.
    for bytes in [gzip(b""), zstd(b"")] {
        assert!(open_bytes("x", &bytes).is_err());
    }
    // Corrupt compressed data: an error, not a panic.
    let mut g = gzip(&small_pcap().0);
    let n = g.len();
    for b in &mut g[12..n - 8] {
        *b ^= 0x5a;
    }
    match open_bytes("x", &g) {
        Err(e) => assert_eq!(e.offset, 0),
        Ok(r) => assert!(read_all(r).error.is_some()),
    }
}

#[test]
fn open_errors() {
    let dir = TempDir::new("open-errors");
    let e = CaptureReader::open(&dir.0.to_string_lossy()).err().unwrap();
    assert!(e.message.contains("directory"), "{e}");
    let missing = dir.0.join("missing.pcap");
    let e = CaptureReader::open(&missing.to_string_lossy())
        .err()
        .unwrap();
    assert!(e.message.contains("cannot open"), "{e}");
    let empty = dir.write("empty", b"");
    let e = CaptureReader::open(&empty).err().unwrap();
    assert_eq!(e.offset, 0);
    assert!(e.message.contains("empty"));
    let e = open_bytes("x", b"GET / HTTP/1.1\r\n").err().unwrap();
    assert!(e.message.contains("47 45 54 20"), "{e}");
    // Short inputs of every kind of prefix.
    for bytes in [
        &b"\xd4"[..],
        b"\xd4\xc3\xb2",
        b"\x0a\x0d\x0d",
        b"snoop\0\0",
        b"\x1f",
    ] {
        assert!(open_bytes("x", bytes).is_err());
    }
}

#[test]
fn big_records_grow_the_buffer() {
    // Larger than the initial 4 MiB read buffer.
    let big = payload(7, 5 << 20);
    let mut b = PcapBuilder::new(false, MAGIC_USEC, (2, 4), u32::MAX, 1);
    b.record(1, 0, big.len() as u32, &[1, 2, 3]);
    b.record(2, 0, big.len() as u32, &big);
    b.record(3, 0, 3, &[4, 5, 6]);
    let mut ng = NgBuilder::new();
    ng.shb(false);
    ng.idb(1, 0, &[]);
    ng.epb(0, 1, big.len() as u32, &big, &[]);
    ng.epb(0, 2, 2, &[9, 9], &[]);
    for bytes in [b.out, ng.out] {
        let r = read_all(
            CaptureReader::from_reader("x", Box::new(Trickle::new(bytes, 1 << 16))).unwrap(),
        );
        assert!(r.error.is_none() && r.warnings.is_empty());
        let lens: Vec<usize> = r.packets.iter().map(|p| p.data.len()).collect();
        assert!(lens.contains(&big.len()));
        assert!(r.packets.iter().any(|p| p.data == big));
    }
}

#[test]
fn corrupt_lengths_name_the_offset() {
    // pcap caplen 0xFFFFFFF0, in both byte orders and the modified format.
    for (be, magic) in [
        (false, MAGIC_USEC),
        (true, MAGIC_NSEC),
        (false, MAGIC_MODIFIED),
    ] {
        let mut b = PcapBuilder::new(be, magic, (2, 4), 65535, 1);
        b.record(1, 0, 4, &[1, 2, 3, 4]);
        b.raw_record(2, 0, 0xFFFF_FFF0, 4, &[1, 2, 3, 4]);
        let r = read_bytes(&b.out);
        assert_eq!(r.packets.len(), 1);
        let e = r.error.expect("corrupt caplen");
        assert_eq!(e.offset, b.records[1].0);
        assert!(e
            .to_string()
            .contains(&format!("byte offset {}", b.records[1].0)));
    }
    // pcapng block lengths: not a multiple of 4, below 12, huge.
    for bad_len in [21u32, 4, 0, 8, 0xFFFF_FFF0, 0x7FFF_FFFC] {
        for be in [false, true] {
            let mut b = NgBuilder::new();
            b.shb(be);
            b.idb(1, 0, &[]);
            b.epb(0, 0, 4, &[1, 2, 3, 4], &[]);
            let at = b.blocks[2].0 as usize;
            let enc = if be {
                bad_len.to_be_bytes()
            } else {
                bad_len.to_le_bytes()
            };
            b.out[at + 4..at + 8].copy_from_slice(&enc);
            let r = read_bytes(&b.out);
            assert!(r.packets.is_empty());
            let e = r
                .error
                .unwrap_or_else(|| panic!("length {bad_len}: {:?}", r.warnings));
            assert_eq!(e.offset, at as u64, "{e}");
        }
    }
    // The same on the section header itself.
    for bad_len in [21u32, 4, 0xFFFF_FFF0] {
        let mut b = NgBuilder::new();
        b.shb(false);
        b.out[4..8].copy_from_slice(&bad_len.to_le_bytes());
        let e = open_bytes("x", &b.out).unwrap().advance().unwrap_err();
        assert_eq!(e.offset, 0);
    }
    // Trailing length disagreeing with the leading one.
    let mut b = NgBuilder::new();
    b.shb(false);
    b.idb(1, 0, &[]);
    b.epb(0, 0, 4, &[1, 2, 3, 4], &[]);
    let end = b.out.len();
    assert_eq!(&b.out[end - 4..], &36u32.to_le_bytes());
    b.out[end - 4..].copy_from_slice(&40u32.to_le_bytes());
    let r = read_bytes(&b.out);
    assert_eq!(r.error.expect("trailing length").offset, b.blocks[2].0);
    // An EPB whose caplen exceeds the block.
    let mut b = NgBuilder::new();
    b.shb(false);
    b.idb(1, 0, &[]);
    b.epb(0, 0, 4, &[1, 2, 3, 4], &[]);
    let at = b.blocks[2].0 as usize;
    b.out[at + 20..at + 24].copy_from_slice(&1000u32.to_le_bytes());
    let r = read_bytes(&b.out);
    assert_eq!(r.error.expect("caplen beyond block").offset, at as u64);
    // An OPB whose caplen exceeds the block.
    let mut b = NgBuilder::new();
    b.shb(false);
    b.idb(1, 0, &[]);
    b.opb(0, 0, 4, &[1, 2, 3, 4]);
    let at = b.blocks[2].0 as usize;
    b.out[at + 20..at + 24].copy_from_slice(&1000u32.to_le_bytes());
    let r = read_bytes(&b.out);
    assert_eq!(r.error.expect("OPB caplen").offset, at as u64);
}

// ---------------------------------------------------------------- writers

#[test]
fn writers_round_trip() {
    let frames: Vec<(i64, Vec<u8>)> = (0..6)
        .map(|i| {
            (
                1_700_000_000_123_456_789 + i * 1_000_001,
                payload(i as u8, 10 + 30 * i as usize),
            )
        })
        .collect();
    // pcap µs and ns, snaplen 64.
    for nsec in [false, true] {
        let mut w = PcapWriter::new(Vec::new(), 1, 64, nsec).unwrap();
        for (ts, d) in &frames {
            w.write(*ts, d).unwrap();
        }
        let r = read_bytes(&w.into_inner());
        assert_eq!(r.packets.len(), frames.len());
        for (p, (ts, d)) in r.packets.iter().zip(&frames) {
            let want_ts = if nsec { *ts } else { ts - ts % 1000 };
            assert_eq!(p.ts_ns, want_ts);
            assert_eq!(p.orig_len as usize, d.len());
            assert_eq!(p.data, d[..d.len().min(64)]);
        }
    }
    // pcapng, two interfaces with different snaplens.
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    let a = w.add_interface(1, 65535).unwrap();
    let b = w.add_interface(101, 50).unwrap();
    for (i, (ts, d)) in frames.iter().enumerate() {
        w.write(if i % 2 == 0 { a } else { b }, *ts, d).unwrap();
    }
    let r = read_bytes(&w.into_inner());
    assert!(r.error.is_none() && r.warnings.is_empty());
    for (i, (p, (ts, d))) in r.packets.iter().zip(&frames).enumerate() {
        assert_eq!(p.ts_ns, *ts);
        assert_eq!(p.interface, (i % 2) as u32);
        assert_eq!(p.linktype, if i % 2 == 0 { 1 } else { 101 });
        let cap = if i % 2 == 0 { d.len() } else { d.len().min(50) };
        assert_eq!(p.data, d[..cap]);
        assert_eq!(p.orig_len as usize, d.len());
    }
    assert_eq!(r.linktypes, vec![1, 101]);
    // snoop.
    let mut w = SnoopWriter::new(Vec::new(), 100).unwrap();
    for (ts, d) in &frames {
        w.write(*ts, d).unwrap();
    }
    let r = read_bytes(&w.into_inner());
    assert!(r.error.is_none() && r.warnings.is_empty());
    for (p, (ts, d)) in r.packets.iter().zip(&frames) {
        assert_eq!(p.ts_ns, ts - ts % 1000);
        assert_eq!(p.data, d[..d.len().min(100)]);
    }
}

// ----------------------------------------------------------------- merging

fn pcap_with(ts: &[i64], tag: u8) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), 1, 65535, true).unwrap();
    for (i, t) in ts.iter().enumerate() {
        w.write(*t, &[tag, i as u8]).unwrap();
    }
    w.into_inner()
}

fn merged_order(m: &mut MergedReader) -> Vec<(usize, i64, u8, u8)> {
    let mut out = Vec::new();
    while m.advance() {
        let (i, p) = m.packet().unwrap();
        out.push((i, p.ts_ns, p.data[0], p.data[1]));
    }
    assert!(!m.advance());
    assert!(m.packet().is_none());
    out
}

#[test]
fn merged_reader_orders_by_time_ties_to_earlier_file() {
    let dir = TempDir::new("merge");
    let a = dir.write("a", &pcap_with(&[10, 20, 30, 30, 50], b'a'));
    let b = dir.write("b", &gzip(&pcap_with(&[5, 20, 30, 60], b'b')));
    // Not sorted within the file: the merge keeps each file's order.
    let c = dir.write("c", &zstd(&pcap_with(&[20, 1, 70], b'c')));
    let readers = [&a, &b, &c]
        .iter()
        .map(|p| CaptureReader::open(p).unwrap())
        .collect();
    let mut m = MergedReader::new(readers);
    let got: Vec<(usize, i64)> = merged_order(&mut m).iter().map(|x| (x.0, x.1)).collect();
    assert_eq!(
        got,
        vec![
            (1, 5),
            (0, 10),
            (0, 20),
            (1, 20),
            (2, 20),
            (2, 1),
            (0, 30),
            (0, 30),
            (1, 30),
            (0, 50),
            (1, 60),
            (2, 70)
        ]
    );
    assert!(m.errors().is_empty());
    assert_eq!(m.readers().len(), 3);
    // No readers at all.
    assert!(!MergedReader::new(Vec::new()).advance());
}

#[test]
fn merged_reader_survives_a_broken_file() {
    // File 1 breaks after two packets (corrupt caplen); the others go on.
    let mut broken = PcapBuilder::new(false, MAGIC_NSEC, (2, 4), 65535, 1);
    broken.record(0, 15, 2, &[b'b', 0]);
    broken.record(0, 25, 2, &[b'b', 1]);
    broken.raw_record(0, 35, 0xFFFF_FFF0, 2, &[b'b', 2]);
    let bad_at = broken.records[2].0;
    let readers = vec![
        open_bytes("a", &pcap_with(&[10, 20, 30, 40], b'a')).unwrap(),
        open_bytes("b", &broken.out).unwrap(),
        open_bytes("c", &pcap_with(&[5, 45], b'c')).unwrap(),
    ];
    let mut m = MergedReader::new(readers);
    let got: Vec<(usize, i64)> = merged_order(&mut m).iter().map(|x| (x.0, x.1)).collect();
    assert_eq!(
        got,
        vec![
            (2, 5),
            (0, 10),
            (1, 15),
            (0, 20),
            (1, 25),
            (0, 30),
            (0, 40),
            (2, 45)
        ]
    );
    assert_eq!(m.errors().len(), 1);
    assert_eq!(m.errors()[0].0, 1);
    assert_eq!(m.errors()[0].1.offset, bad_at);
    assert_eq!(m.errors()[0].1.path, "b");
    // A file broken before its first packet.
    let mut first_bad = PcapBuilder::new(false, MAGIC_USEC, (2, 4), 65535, 1);
    first_bad.raw_record(0, 0, 0xFFFF_FFF0, 0, &[]);
    let readers = vec![
        open_bytes("x", &first_bad.out).unwrap(),
        open_bytes("y", &pcap_with(&[1, 2], b'y')).unwrap(),
    ];
    let mut m = MergedReader::new(readers);
    assert_eq!(merged_order(&mut m).len(), 2);
    assert_eq!(m.errors().len(), 1);
    assert_eq!(m.errors()[0].0, 0);
}

#[test]
fn position_tracks_consumed_bytes() {
    let (bytes, recs) = small_pcap();
    let mut r = CaptureReader::from_reader("x", Box::new(Cursor::new(bytes.clone()))).unwrap();
    assert_eq!(r.position(), 24);
    for (_, end) in &recs {
        assert!(r.advance().unwrap());
        assert_eq!(r.position(), *end);
    }
    assert!(!r.advance().unwrap());
    assert_eq!(r.position(), bytes.len() as u64);
}

#[test]
fn finish_lets_go_of_the_buffers_and_keeps_the_facts() {
    let (bytes, recs) = small_pcap();
    let mut r = CaptureReader::from_reader("x", Box::new(Cursor::new(bytes.clone()))).unwrap();
    assert!(r.advance().unwrap());
    let held = r.shared_buffer().clone();
    r.finish();
    // Read no further, the position where reading stopped, the buffer
    // dropped (only this test's own reference is left).
    assert!(r.current().is_none());
    assert!(!r.advance().unwrap());
    assert_eq!(r.position(), recs[0].1);
    assert_eq!(std::sync::Arc::strong_count(&held), 1);
    assert!(r.shared_buffer().is_empty());
    assert_eq!(r.linktypes(), [1]);
    let mut m = MergedReader::new(vec![
        CaptureReader::from_reader("a", Box::new(Cursor::new(bytes.clone()))).unwrap(),
        CaptureReader::from_reader("b", Box::new(Cursor::new(bytes))).unwrap(),
    ]);
    assert!(m.advance());
    m.finish();
    assert!(m.packet().is_none() && !m.advance());
    assert!(m.readers().iter().all(|r| r.shared_buffer().is_empty()));
}
