//! Captures cut at every byte offset: a clean end with every complete packet
//! before the cut and a warning naming where the cut record starts, or an
//! error; never a panic, and never fewer packets for a longer prefix.

mod common;

use common::*;

/// Check every prefix of `bytes`; `packets` are the (offset, end) extents
/// of the records that carry packets, `header_len` the bytes before the
/// first record that a reader needs to open the file.
fn check_every_cut(name: &str, bytes: &[u8], packets: &[(u64, u64)], blocks: &[(u64, u64)]) {
    let full = read_bytes(bytes);
    assert!(
        full.error.is_none() && full.warnings.is_empty(),
        "{name}: {full:?}"
    );
    assert_eq!(full.packets.len(), packets.len(), "{name}");
    let mut last = 0;
    for cut in 0..=bytes.len() {
        let prefix = &bytes[..cut];
        let r = match open_bytes(name, prefix) {
            Ok(r) => read_all(r),
            Err(e) => {
                assert!(e.offset <= cut as u64, "{name} cut {cut}: {e}");
                assert_eq!(
                    last, 0,
                    "{name} cut {cut}: open failed after packets were readable"
                );
                continue;
            }
        };
        let n = r.packets.len();
        assert!(n >= last, "{name} cut {cut}: {n} packets after {last}");
        last = n;
        // Whatever was read is a prefix of the full capture.
        assert_eq!(r.packets[..], full.packets[..n], "{name} cut {cut}");
        if let Some(e) = &r.error {
            assert!(e.offset <= cut as u64, "{name} cut {cut}: {e}");
            continue;
        }
        // Clean end: every packet whose record is complete was read.
        let complete = packets.iter().filter(|(_, end)| *end <= cut as u64).count();
        assert_eq!(n, complete, "{name} cut {cut}: {:?}", r.warnings);
        // A cut inside a record or block is reported where it starts.
        let inside = blocks
            .iter()
            .find(|(start, end)| *start < cut as u64 && (cut as u64) < *end);
        match inside {
            Some((start, _)) => {
                assert!(
                    r.warnings
                        .iter()
                        .any(|w| w.offset == *start && w.message.contains("cut short")),
                    "{name} cut {cut}: no warning at {start}: {:?}",
                    r.warnings
                );
                assert!(r
                    .warnings
                    .iter()
                    .all(|w| w.to_string().contains("byte offset")));
            }
            None => assert!(
                r.warnings.iter().all(|w| !w.message.contains("cut short")),
                "{name} cut {cut} at a boundary: {:?}",
                r.warnings
            ),
        }
    }
    assert_eq!(last, packets.len());
}

#[test]
fn truncated_pcap_at_every_offset() {
    let (bytes, recs) = small_pcap();
    check_every_cut("pcap", &bytes, &recs, &recs);
    for (be, magic) in [
        (true, MAGIC_USEC),
        (false, MAGIC_MODIFIED),
        (true, MAGIC_MODIFIED),
    ] {
        let mut b = PcapBuilder::new(be, magic, (2, 4), 65535, 1);
        for i in 0..3u32 {
            b.record(i, i, 50, &payload(i as u8, 3 + i as usize * 5));
        }
        check_every_cut("pcap-variant", &b.out, &b.records, &b.records);
    }
}

#[test]
fn truncated_pcapng_at_every_offset() {
    let (bytes, pkts) = small_pcapng();
    // Every block (the section header at 0 included) counts for warnings;
    // a cut inside the first section header is an error instead.
    let blocks = block_extents(&bytes);
    check_every_cut("pcapng", &bytes, &pkts, &blocks);
}

/// Walk a well-formed pcapng and list its block extents.
fn block_extents(bytes: &[u8]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut at = 0usize;
    let mut be = false;
    while at < bytes.len() {
        let t = &bytes[at..at + 4];
        if t == [0x0a, 0x0d, 0x0d, 0x0a] {
            be = bytes[at + 8..at + 12] == [0x1a, 0x2b, 0x3c, 0x4d];
        }
        let l = [bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]];
        let len = if be {
            u32::from_be_bytes(l)
        } else {
            u32::from_le_bytes(l)
        } as usize;
        out.push((at as u64, (at + len) as u64));
        at += len;
    }
    out
}

#[test]
fn truncated_snoop_at_every_offset() {
    let (bytes, recs) = small_snoop();
    check_every_cut("snoop", &bytes, &recs, &recs);
}

/// Compressed captures cut anywhere: packets are a prefix of the full list,
/// non-decreasing with the cut; no panic. (The decompressors report the
/// missing end of stream as a read error.)
#[test]
fn truncated_compressed_at_every_offset() {
    for (name, plain) in [
        ("pcap", small_pcap().0),
        ("pcapng", small_pcapng().0),
        ("snoop", small_snoop().0),
    ] {
        let full = read_bytes(&plain);
        for (comp, bytes) in [("gzip", gzip(&plain)), ("zstd", zstd(&plain))] {
            let mut last = 0;
            for cut in 0..=bytes.len() {
                let r = match open_bytes(name, &bytes[..cut]) {
                    Ok(r) => read_all(r),
                    Err(e) => {
                        assert_eq!(e.offset, 0, "{name} {comp} cut {cut}: {e}");
                        continue;
                    }
                };
                let n = r.packets.len();
                assert!(n >= last, "{name} {comp} cut {cut}");
                last = n;
                assert_eq!(r.packets[..], full.packets[..n]);
                if n < full.packets.len() {
                    // Packets are missing: never silently.
                    assert!(
                        r.error.is_some() || !r.warnings.is_empty(),
                        "{name} {comp} cut {cut}"
                    );
                }
            }
            assert_eq!(last, full.packets.len(), "{name} {comp}");
        }
    }
}
