//! The decoder over every reference capture in ../shared/captures (read in
//! place; skipped when absent): no panic, every frame accounted for at the
//! link layer, and per-capture checks against the catalogue (tshark's
//! counts of window-scale and SACK options, protocols seen).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use nastriage_capture::CaptureReader;
use nastriage_net::{Decoder, Proto, Transport};

fn captures_dir() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/captures");
    p.join("CATALOG.tsv").is_file().then_some(p)
}

/// (protocol, frames, bytes) as `ProtoCounters::summary` gives them.
type Summary = Vec<(String, u64, u64)>;

#[derive(Default, Debug)]
struct Stats {
    frames: u64,
    wscale: u64,
    sack: u64,
    ts_opt: u64,
    malformed_opts: u64,
    max_vlan: u8,
    reassembled: u64,
}

fn decode_file(path: &str) -> Option<(Decoder, Stats)> {
    let mut r = CaptureReader::open(path).ok()?;
    let mut d = Decoder::default();
    let mut s = Stats::default();
    while let Ok(true) = r.advance() {
        let p = r.packet();
        s.frames += 1;
        let out = d.decode(&p);
        s.max_vlan = s.max_vlan.max(out.vlan_depth);
        if out.ip.is_some_and(|ip| ip.reassembled) {
            s.reassembled += 1;
        }
        if let Transport::Tcp(t) = out.transport {
            s.wscale += u64::from(t.options.window_scale.is_some());
            s.sack += u64::from(t.options.sack.len > 0);
            s.ts_opt += u64::from(t.options.timestamp.is_some());
            s.malformed_opts += u64::from(t.options.malformed);
        }
    }
    Some((d, s))
}

#[test]
fn decode_every_shared_capture() {
    let Some(dir) = captures_dir() else {
        eprintln!("skipped: ../shared/captures not found");
        return;
    };
    let text = std::fs::read_to_string(dir.join("CATALOG.tsv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let (c_file, c_packets, c_protos, c_prov) = (
        col("filename"),
        col("packets"),
        col("protocols"),
        col("provenance"),
    );
    let (c_wscale, c_sack) = (col("wscale_frames"), col("sack_frames"));
    let mut failures = Vec::new();
    let mut by_name: HashMap<String, (Stats, Summary)> = HashMap::new();
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        let name = f[c_file];
        if f[c_prov].contains("crafted malformed file") {
            let _ = decode_file(&dir.join(name).to_string_lossy());
            continue;
        }
        let Some((d, s)) = decode_file(&dir.join(name).to_string_lossy()) else {
            failures.push(format!("{name}: cannot open"));
            continue;
        };
        let c = d.counters();
        let packets: u64 = f[c_packets].parse().unwrap();
        assert_eq!(s.frames, packets, "{name}");
        // Every frame is counted at the link layer (known or not).
        let link: u64 = [
            Proto::Ethernet,
            Proto::LinuxSll,
            Proto::LinuxSll2,
            Proto::Null,
            Proto::RawIp,
            Proto::TruncatedLink,
        ]
        .iter()
        .map(|p| c.get(*p).0)
        .sum::<u64>()
            + c.unsupported_linktypes().iter().map(|x| x.1).sum::<u64>();
        if link != packets {
            failures.push(format!(
                "{name}: {link} frames counted at the link layer of {packets}"
            ));
        }
        let protos: Vec<&str> = f[c_protos].split(',').collect();
        for (tag, p) in [
            ("vlan", Proto::Vlan),
            ("ipv6", Proto::Ipv6),
            ("ip", Proto::Ipv4),
            ("tcp", Proto::Tcp),
            ("udp", Proto::Udp),
            ("pppoes", Proto::Pppoe),
            ("icmp", Proto::Icmp),
            ("icmpv6", Proto::Icmpv6),
        ] {
            if protos.contains(&tag) && c.get(p).0 == 0 {
                failures.push(format!("{name}: tshark saw {tag}, the decoder did not"));
            }
        }
        let want_ws: u64 = f[c_wscale].parse().unwrap();
        let want_sack: u64 = f[c_sack].parse().unwrap();
        if s.wscale != want_ws {
            failures.push(format!(
                "{name}: {} frames with window scale, tshark {want_ws}",
                s.wscale
            ));
        }
        if s.sack != want_sack {
            failures.push(format!(
                "{name}: {} frames with SACK blocks, tshark {want_sack}",
                s.sack
            ));
        }
        // Every protocol the decoder names is one it decodes, except in the
        // fuzzed files.
        if !f[c_prov].contains("fuzzer") {
            for (n, frames, _) in c.summary() {
                if n.starts_with("ethertype-0x08") || n.starts_with("ethertype-0x86dd") {
                    failures.push(format!("{name}: {frames} IP frames left undecoded as {n}"));
                }
            }
        }
        by_name.insert(name.to_string(), (s, c.summary()));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let get = |n: &str| &by_name[n].0;
    let proto = |n: &str, p: &str| by_name[n].1.iter().find(|x| x.0 == p).map_or(0, |x| x.1);
    // Tag stacks and PPPoE over QinQ.
    assert_eq!(get("zeek__zeek__vlan-qinqinq.pcap").max_vlan, 3);
    assert_eq!(get("zeek__zeek__pppoe-over-qinq.pcap").max_vlan, 2);
    assert_eq!(proto("zeek__zeek__pppoe-over-qinq.pcap", "pppoe"), 86);
    // A BSD loopback frame with an Ethernet type in its NULL header.
    assert_eq!(proto("seladb__PcapPlusPlus__null_loopback.pcap", "ipv4"), 2);
    // IPv4 fragments reassembled (NFS over UDP).
    assert_eq!(
        get("seladb__PcapPlusPlus__ip4_fragments.pcap").reassembled,
        6
    );
    assert!(get("epam__nfstrace__eth-ipv4-udp-nfsv3-dup-retransm.pcap").reassembled > 0);
    // Malformed TCP options exactly where tshark's expert info reports them
    // (a SACK of length 2; two timestamps running past the options).
    let malformed: Vec<(&String, u64)> = by_name
        .iter()
        .filter(|(_, (s, _))| s.malformed_opts > 0)
        .map(|(n, (s, _))| (n, s.malformed_opts))
        .collect();
    assert_eq!(malformed.len(), 2, "{malformed:?}");
    assert_eq!(get("OISF__suricata-verify__tcp-opt.pcap").malformed_opts, 1);
    assert_eq!(
        get("epam__nfstrace__eth-ipv6-tcp-nfsv3-bad_alloc.pcap").malformed_opts,
        2
    );
    // MPTCP options do not hide the timestamps.
    assert_eq!(get("the-tcpdump-group__tcpdump__mptcp-v1.pcap").ts_opt, 20);
}
