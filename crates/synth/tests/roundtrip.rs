//! Every container format × link type through the capture crate's reader,
//! checksums checked by independent code, determinism, example sizes, and
//! the command-line tool.

mod common;

use std::process::Command;

use common::{read_all, strip_link, tmp_path, Checker};
use nastriage_synth::scenario::{self, CopyParams, Options, SCENARIOS};
use nastriage_synth::{render, write_capture, Format, LinkConfig, LinkKind, WriteOptions};

fn vlan_variants(kind: LinkKind) -> Vec<Vec<u16>> {
    if kind.has_ethertype() {
        vec![vec![], vec![100], vec![100, 200, 300]]
    } else {
        vec![vec![]]
    }
}

#[test]
fn every_format_and_link_type_round_trips() {
    let packets = scenario::build("tcp-basic", &Options::default()).unwrap();
    let mut combos = 0;
    for format in Format::ALL {
        for kind in LinkKind::ALL {
            for vlans in vlan_variants(kind) {
                let link = LinkConfig::new(kind).with_vlans(&vlans);
                let frames = render(&packets, &link);
                for snaplen in [262_144u32, 96] {
                    for nanosecond in [false, true] {
                        let opts = WriteOptions {
                            format,
                            link: link.clone(),
                            snaplen,
                            nanosecond,
                        };
                        if format == Format::Snoop && kind != LinkKind::Ethernet {
                            assert!(opts.validate().is_err());
                            let err = write_capture(Vec::new(), &frames, &opts).unwrap_err();
                            assert!(err.to_string().contains("snoop"), "{err}");
                            continue;
                        }
                        let path = tmp_path(&format!(
                            "rt-{}-{}-{}-{snaplen}-{nanosecond}",
                            format.name(),
                            kind.name(),
                            vlans.len()
                        ));
                        let n =
                            write_capture(std::fs::File::create(&path).unwrap(), &frames, &opts)
                                .unwrap();
                        assert_eq!(n, frames.len());
                        let back = read_all(&path);
                        std::fs::remove_file(&path).unwrap();
                        let what = format!(
                            "{} {} vlans={vlans:?} snaplen={snaplen}",
                            format.name(),
                            kind.name()
                        );
                        assert_eq!(back.len(), frames.len(), "{what}");
                        let exact_ns =
                            format == Format::PcapNg || (format == Format::Pcap && nanosecond);
                        for ((ts, f), r) in frames.iter().zip(&back) {
                            let want_ts = if exact_ns {
                                *ts
                            } else {
                                ts.div_euclid(1000) * 1000
                            };
                            assert_eq!(r.ts_ns, want_ts, "{what}");
                            assert_eq!(r.linktype, kind.linktype(), "{what}");
                            assert_eq!(r.orig_len as usize, f.len(), "{what}");
                            assert_eq!(r.data, f[..f.len().min(snaplen as usize)], "{what}");
                        }
                        combos += 1;
                    }
                }
            }
        }
    }
    // pcap and pcapng: 5 kinds, 3+3+3+1+1 link variants; snoop: 3.
    assert_eq!(combos, (11 + 11 + 3) * 4);
}

#[test]
fn frames_carry_every_packet_that_the_link_can() {
    let packets = scenario::build("tcp-basic", &Options::default()).unwrap();
    let arp = packets.iter().filter(|p| p.ethertype == 0x0806).count();
    assert_eq!(arp, 2);
    for kind in LinkKind::ALL {
        let frames = render(&packets, &LinkConfig::new(kind));
        let expected = if kind.has_ethertype() {
            packets.len()
        } else {
            packets.len() - arp
        };
        assert_eq!(frames.len(), expected, "{}", kind.name());
    }
}

#[test]
fn checksums_verify_independently() {
    for (name, _) in SCENARIOS {
        let packets = scenario::build(name, &Options::default()).unwrap();
        for kind in LinkKind::ALL {
            let vlans: &[u16] = if kind.has_ethertype() { &[7, 8] } else { &[] };
            let link = LinkConfig::new(kind).with_vlans(vlans);
            let mut checker = Checker::default();
            for (i, (_, f)) in render(&packets, &link).iter().enumerate() {
                let (et, ip) = strip_link(kind.linktype(), f);
                checker
                    .check(et, ip)
                    .unwrap_or_else(|e| panic!("{name} {} frame {i}: {e}", kind.name()));
            }
            assert!(checker.checked_l4 > 10, "{name}");
            if *name == "tcp-basic" {
                // Both UDP echo datagrams were fragmented and reassembled.
                assert_eq!(checker.reassembled, 2);
            }
        }
    }
}

#[test]
fn checksum_verifier_catches_corruption() {
    let packets = scenario::build("tcp-basic", &Options::default()).unwrap();
    let tcp = packets
        .iter()
        .position(|p| p.ethertype == 0x0800 && p.data[9] == 6 && p.data.len() > 100)
        .unwrap();
    let mut bad = packets[tcp].data.clone();
    *bad.last_mut().unwrap() ^= 0x01;
    assert!(Checker::default().check(0x0800, &bad).is_err());
    let mut bad = packets[tcp].data.clone();
    bad[8] ^= 0x01; // TTL: header checksum
    assert!(Checker::default().check(0x0800, &bad).is_err());
}

#[test]
fn scenarios_are_deterministic_and_seeded() {
    for (name, _) in SCENARIOS {
        let a = scenario::build(name, &Options::default()).unwrap();
        let b = scenario::build(name, &Options::default()).unwrap();
        assert!(a == b, "{name} differs between runs");
        let c = scenario::build(
            name,
            &Options {
                seed: 2,
                ..Options::default()
            },
        )
        .unwrap();
        assert!(a != c, "{name} ignores the seed");
        assert!(
            a.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns),
            "{name} not in time order"
        );
        assert!(a[0].ts_ns >= Options::default().start_ns);
    }
    assert!(scenario::build("nope", &Options::default()).is_err());
}

fn example_bytes(name: &str) -> usize {
    let frames = render(
        &scenario::build(name, &Options::default()).unwrap(),
        &LinkConfig::ethernet(),
    );
    let opts = WriteOptions {
        snaplen: 256,
        ..WriteOptions::default()
    };
    let mut out = Vec::new();
    write_capture(&mut out, &frames, &opts).unwrap();
    out.len()
}

#[test]
fn copy_examples_stay_small() {
    for name in ["nfs3-copy", "smb2-copy"] {
        let n = example_bytes(name);
        assert!(n < 300_000, "{name}: {n} bytes");
        assert!(n > 150_000, "{name}: {n} bytes, suspiciously small");
    }
}

#[test]
fn copy_transfers_the_promised_bytes() {
    // Total TCP payload in each direction covers the data moved.
    let p = CopyParams::default();
    for name in ["nfs3-copy", "smb2-copy"] {
        let packets = scenario::build(name, &Options::default()).unwrap();
        let (mut up, mut down) = (0u64, 0u64);
        for pk in &packets {
            let ip = &pk.data;
            let ihl = (ip[0] & 0x0f) as usize * 4;
            let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
            let doff = (ip[ihl + 12] >> 4) as usize * 4;
            let len = (total - ihl - doff) as u64;
            if pk.outgoing {
                up += len;
            } else {
                down += len;
            }
        }
        assert!(
            down > p.read_bytes && down < p.read_bytes + p.read_bytes / 20,
            "{name} down {down}"
        );
        assert!(
            up > p.write_bytes && up < p.write_bytes + p.write_bytes / 20,
            "{name} up {up}"
        );
    }
}

#[test]
fn command_line_tool() {
    let bin = env!("CARGO_BIN_EXE_nastriage-synth");
    let path = tmp_path("cli.pcapng");
    let out = Command::new(bin)
        .args([
            "tcp-basic",
            path.to_str().unwrap(),
            "--format",
            "pcapng",
            "--linktype",
            "sll2",
        ])
        .args(["--vlan", "5,6", "--snaplen", "128", "--seed", "3"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout).unwrap();
    let n: usize = line.split_whitespace().next().unwrap().parse().unwrap();
    assert_eq!(line.lines().count(), 1);
    let back = read_all(&path);
    assert_eq!(back.len(), n);
    assert!(back.iter().all(|p| p.data.len() <= 128));
    std::fs::remove_file(&path).unwrap();

    let out = Command::new(bin)
        .args([
            "tcp-basic",
            "/dev/null",
            "--format",
            "snoop",
            "--linktype",
            "raw",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("snoop") && err.contains("Ethernet"), "{err}");

    let out = Command::new(bin)
        .args(["no-such-scenario", "/dev/null"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nfs3-copy"));

    let out = Command::new(bin)
        .args([
            "tcp-basic",
            "/dev/null",
            "--linktype",
            "null",
            "--vlan",
            "3",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
}
