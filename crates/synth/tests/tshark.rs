//! Cross-checks with Wireshark's tshark, when installed: it must decode the
//! expected number of NFS and SMB2 READ/WRITE calls and flag nothing as
//! malformed or badly checksummed. Skipped (with a message) without tshark.

mod common;

use std::path::Path;
use std::process::Command;

use common::tmp_path;
use nastriage_synth::scenario::{self, CopyParams, Options, SCENARIOS};
use nastriage_synth::{render, write_capture, Format, LinkConfig, LinkKind, WriteOptions};

fn have_tshark() -> bool {
    let ok = Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("tshark not installed; skipping tshark cross-checks");
    }
    ok
}

fn tshark(file: &Path, args: &[&str]) -> String {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(file)
        .args(args)
        .output()
        .expect("run tshark");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tshark {args:?} failed: {stderr}");
    assert!(!stderr.contains("tshark:"), "tshark {args:?}: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn write(name: &str, format: Format, kind: LinkKind, snaplen: u32) -> std::path::PathBuf {
    let link = LinkConfig::new(kind);
    let frames = render(&scenario::build(name, &Options::default()).unwrap(), &link);
    let opts = WriteOptions {
        format,
        link,
        snaplen,
        nanosecond: false,
    };
    let path = tmp_path(&format!(
        "tshark-{name}-{}-{}-{snaplen}",
        format.name(),
        kind.name()
    ));
    write_capture(std::fs::File::create(&path).unwrap(), &frames, &opts).unwrap();
    path
}

/// "Calls" column of the SRT table row whose procedure name is `proc_name`.
fn srt_calls(table: &str, proc_name: &str) -> Option<u64> {
    table.lines().find_map(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        let i = cols.iter().position(|c| *c == proc_name)?;
        cols.get(i + 1)?.parse().ok()
    })
}

fn assert_clean(file: &Path, what: &str) {
    let expert = tshark(
        file,
        &[
            "-q",
            "-z",
            "expert",
            "-o",
            "tcp.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
            "-o",
            "ip.check_checksum:TRUE",
        ],
    );
    let lower = expert.to_lowercase();
    assert!(!lower.contains("malformed"), "{what}: {expert}");
    assert!(!lower.contains("bad checksum"), "{what}: {expert}");
    assert!(!expert.contains("Errors ("), "{what}: {expert}");
}

#[test]
fn tshark_decodes_nfs3_and_smb2_copies() {
    if !have_tshark() {
        return;
    }
    let p = CopyParams::default();
    let reads = p.read_bytes.div_ceil(p.io_size as u64);
    let writes = p.write_bytes.div_ceil(p.io_size as u64);
    for snaplen in [256, 262_144] {
        let f = write("nfs3-copy", Format::Pcap, LinkKind::Ethernet, snaplen);
        let srt = tshark(&f, &["-q", "-z", "rpc,srt,100003,3"]);
        assert_eq!(
            srt_calls(&srt, "READ"),
            Some(reads),
            "snaplen {snaplen}: {srt}"
        );
        // The UNSTABLE writes plus one small FILE_SYNC write.
        assert_eq!(
            srt_calls(&srt, "WRITE"),
            Some(writes + 1),
            "snaplen {snaplen}: {srt}"
        );
        assert_eq!(srt_calls(&srt, "COMMIT"), Some(1), "{srt}");
        assert_eq!(srt_calls(&srt, "CREATE"), Some(2), "{srt}");
        for proc_name in [
            "NULL",
            "LOOKUP",
            "ACCESS",
            "GETATTR",
            "READDIRPLUS",
            "FSINFO",
        ] {
            assert!(
                srt_calls(&srt, proc_name).is_some_and(|n| n >= 1),
                "{proc_name}: {srt}"
            );
        }
        assert_clean(&f, "nfs3-copy");
        std::fs::remove_file(&f).unwrap();

        let f = write("smb2-copy", Format::Pcap, LinkKind::Ethernet, snaplen);
        let srt = tshark(&f, &["-q", "-z", "smb2,srt"]);
        assert_eq!(
            srt_calls(&srt, "Read"),
            Some(reads),
            "snaplen {snaplen}: {srt}"
        );
        assert_eq!(
            srt_calls(&srt, "Write"),
            Some(writes),
            "snaplen {snaplen}: {srt}"
        );
        assert_eq!(srt_calls(&srt, "Create"), Some(2), "{srt}");
        assert_eq!(srt_calls(&srt, "Close"), Some(2), "{srt}");
        assert_clean(&f, "smb2-copy");
        let pending = tshark(
            &f,
            &[
                "-Y",
                "smb2.nt_status == 0x103",
                "-T",
                "fields",
                "-e",
                "frame.number",
            ],
        );
        assert_eq!(
            pending.lines().count(),
            1,
            "one STATUS_PENDING interim response"
        );
        std::fs::remove_file(&f).unwrap();
    }
}

#[test]
fn tshark_decodes_smb302_dialect() {
    if !have_tshark() {
        return;
    }
    let p = CopyParams {
        read_bytes: 256 << 10,
        write_bytes: 128 << 10,
        ..CopyParams::default()
    };
    let link = LinkConfig::ethernet();
    let packets = scenario::smb2_copy_dialect(
        &Options::default(),
        &p,
        nastriage_synth::smb2::DIALECT_3_0_2,
    );
    let path = tmp_path("tshark-smb302.pcap");
    write_capture(
        std::fs::File::create(&path).unwrap(),
        &render(&packets, &link),
        &WriteOptions::default(),
    )
    .unwrap();
    let srt = tshark(&path, &["-q", "-z", "smb2,srt"]);
    assert_eq!(srt_calls(&srt, "Read"), Some(4), "{srt}");
    assert_eq!(srt_calls(&srt, "Write"), Some(2), "{srt}");
    let dialect = tshark(
        &path,
        &[
            "-Y",
            "smb2.dialect == 0x0302",
            "-T",
            "fields",
            "-e",
            "frame.number",
        ],
    );
    assert!(dialect.lines().count() >= 1);
    assert_clean(&path, "smb 3.0.2");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn tshark_accepts_every_scenario_and_link_type() {
    if !have_tshark() {
        return;
    }
    for (name, _) in SCENARIOS {
        for kind in LinkKind::ALL {
            let f = write(name, Format::PcapNg, kind, 262_144);
            assert_clean(&f, &format!("{name} {}", kind.name()));
            std::fs::remove_file(&f).unwrap();
        }
    }
}

#[test]
fn tshark_sees_the_pathologies() {
    if !have_tshark() {
        return;
    }
    let f = write("tcp-pathologies", Format::Pcap, LinkKind::Ethernet, 262_144);
    let count = |filter: &str| tshark(&f, &["-Y", filter]).lines().count();
    assert!(count("tcp.analysis.fast_retransmission") >= 1);
    assert!(count("tcp.analysis.retransmission && tcp.port == 802") == 1);
    assert!(count("tcp.analysis.duplicate_ack") >= 3);
    assert!(count("tcp.analysis.zero_window") >= 2);
    assert!(count("tcp.analysis.zero_window_probe") >= 2);
    assert!(count("tcp.analysis.window_update") >= 1);
    assert!(count("tcp.analysis.out_of_order") >= 1);
    assert!(count("tcp.analysis.keep_alive") == 3);
    assert!(count("tcp.analysis.keep_alive_ack") == 3);
    assert!(count("tcp.options.sack_le") >= 1);
    std::fs::remove_file(&f).unwrap();

    let f = write("tcp-basic", Format::Pcap, LinkKind::Ethernet, 262_144);
    let count = |filter: &str| tshark(&f, &["-Y", filter]).lines().count();
    assert_eq!(count("tcp.flags.syn == 1 && tcp.flags.ack == 0"), 3);
    assert_eq!(count("tcp.analysis.reused_ports"), 1);
    assert_eq!(count("tcp.flags.reset == 1"), 1);
    assert_eq!(count("ipv6 && tcp"), 11);
    assert_eq!(count("ip.flags.mf == 1"), 4);
    assert_eq!(count("icmp"), 2);
    assert_eq!(count("arp"), 2);
    std::fs::remove_file(&f).unwrap();
}
