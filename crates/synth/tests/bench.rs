//! The streamed benchmark generator: deterministic, time-ordered, valid
//! checksums, the three protocols present, and the size target honoured.

mod common;

use std::collections::HashSet;

use common::{read_all, strip_link, tmp_path, Checker};
use nastriage_synth::bench::{self, BenchOptions};
use nastriage_synth::{Format, LinkConfig, LinkKind, WriteOptions};

fn generate(seed: u64, target: u64, format: Format) -> (Vec<u8>, bench::BenchSummary) {
    let opts = BenchOptions {
        seed,
        target_bytes: target,
        ..BenchOptions::default()
    };
    let write = WriteOptions {
        format,
        ..WriteOptions::default()
    };
    let mut out = Vec::new();
    let s = bench::write_bench(&mut out, &opts, &write).unwrap();
    (out, s)
}

#[test]
fn parse_sizes() {
    assert_eq!(bench::parse_size("100M"), Some(100 << 20));
    assert_eq!(bench::parse_size("1G"), Some(1 << 30));
    assert_eq!(bench::parse_size("4g"), Some(4 << 30));
    assert_eq!(bench::parse_size("1.5K"), Some(1536));
    assert_eq!(bench::parse_size("12345"), Some(12345));
    assert_eq!(bench::parse_size("x"), None);
    assert_eq!(bench::parse_size("-1M"), None);
}

#[test]
fn deterministic_and_sized() {
    let target = 3 << 20;
    let (a, sa) = generate(7, target, Format::Pcap);
    let (b, sb) = generate(7, target, Format::Pcap);
    assert_eq!(a, b);
    assert_eq!(sa, sb);
    let (c, _) = generate(8, target, Format::Pcap);
    assert_ne!(a, c);
    assert_eq!(sa.bytes, a.len() as u64);
    // Stops at the first frame reaching the target: at most one frame over.
    assert!(a.len() as u64 >= target && (a.len() as u64) < target + 70_000);
}

#[test]
fn time_ordered_valid_and_varied() {
    let (data, summary) = generate(3, 8 << 20, Format::PcapNg);
    let path = tmp_path("bench.pcapng");
    std::fs::write(&path, &data).unwrap();
    let packets = read_all(&path);
    assert_eq!(packets.len() as u64, summary.frames);
    let mut checker = Checker::default();
    let mut ports = HashSet::new();
    let mut tso = 0;
    let mut last = i64::MIN;
    for (i, p) in packets.iter().enumerate() {
        assert!(p.ts_ns >= last, "frame {i} goes back in time");
        last = p.ts_ns;
        let (et, ip) = strip_link(p.linktype, &p.data);
        checker
            .check(et, ip)
            .unwrap_or_else(|e| panic!("frame {i}: {e}"));
        if et == 0x0800 && ip[9] == 6 {
            let ihl = (ip[0] & 0x0f) as usize * 4;
            let sport = u16::from_be_bytes([ip[ihl], ip[ihl + 1]]);
            let dport = u16::from_be_bytes([ip[ihl + 2], ip[ihl + 3]]);
            ports.insert(sport);
            ports.insert(dport);
            if u16::from_be_bytes([ip[2], ip[3]]) > 9000 {
                tso += 1;
            }
        }
    }
    assert!(ports.contains(&2049) && ports.contains(&445));
    assert!(tso > 0, "no TSO-sized segments");
    assert!(summary.connections.iter().all(|&n| n > 0), "{summary:?}");
    assert!(summary.requests.iter().all(|&n| n > 0), "{summary:?}");
}

#[test]
fn snaplen_and_link_types_apply() {
    let opts = BenchOptions {
        target_bytes: 1 << 20,
        ..BenchOptions::default()
    };
    let write = WriteOptions {
        snaplen: 128,
        link: LinkConfig::new(LinkKind::Sll2),
        ..WriteOptions::default()
    };
    let mut out = Vec::new();
    bench::write_bench(&mut out, &opts, &write).unwrap();
    let path = tmp_path("bench-sll2.pcap");
    std::fs::write(&path, &out).unwrap();
    let packets = read_all(&path);
    assert!(packets.iter().all(|p| p.data.len() <= 128));
    assert!(packets.iter().any(|p| p.orig_len > 1500));
}
