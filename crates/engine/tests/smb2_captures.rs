//! SMB2/3 over the shared reference captures (skipped when they are not
//! present): encrypted, compressed and SMB1 counters and warnings, and
//! robustness against truncated, cut and corrupted copies.

use std::path::{Path, PathBuf};

use nastriage_engine::{analyze, AnalyzeOptions};

fn shared(name: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/captures")
        .join(name);
    p.is_file().then_some(p)
}

fn run(path: &Path) -> nastriage_engine::Analysis {
    analyze(
        &[path.to_string_lossy().to_string()],
        AnalyzeOptions::default(),
    )
    .expect("capture opens")
}

#[test]
fn encrypted_sessions_are_counted_and_warned() {
    for (name, encrypted, decoded) in [
        ("zeek__zeek__smb3.pcap", 44, 5),
        ("zeek__zeek__smb311.pcap", 28, 3),
    ] {
        let Some(p) = shared(name) else { return };
        let a = run(&p);
        let log = a.transactions();
        assert_eq!(log.encrypted_messages, encrypted, "{name}");
        let smb: Vec<_> = log
            .transactions
            .iter()
            .filter(|t| t.protocol == "smb2")
            .collect();
        assert_eq!(smb.len(), decoded, "{name}");
        assert!(smb.iter().all(|t| t.version == 3), "{name}");
        assert_eq!(log.warnings.len(), 1, "{name}: {:?}", log.warnings);
        assert!(log.warnings[0].starts_with("tcp.stream 0:"));
        assert!(log.warnings[0].contains("encrypted"));
        assert_eq!(log.resyncs, 0);
    }
}

#[test]
fn smb1_is_counted_and_warned_only_when_used() {
    // An SMB1-only connection (file transfer over SMB1).
    if let Some(p) = shared("OISF__suricata-verify__filecontainer-smb.pcap") {
        let a = run(&p);
        let log = a.transactions();
        assert!(log.smb1_messages > 1000);
        assert!(log.transactions.iter().all(|t| t.protocol != "smb2"));
        assert_eq!(log.warnings.len(), 1);
        assert!(log.warnings[0].contains("SMB1"));
    }
    // Multi-protocol negotiation only: counted, no warning; the SMB2
    // NEGOTIATE response to the SMB1 request is an orphan, as in tshark.
    if let Some(p) = shared("zeek__zeek__smb2.pcap") {
        let a = run(&p);
        let log = a.transactions();
        assert_eq!(log.smb1_messages, 1);
        assert!(log.warnings.is_empty(), "{:?}", log.warnings);
        assert_eq!(log.orphan_replies.len(), 1);
        assert_eq!(log.orphan_replies[0].id, 0);
        assert_eq!(log.resyncs, 0);
        let smb = log.transactions.iter().filter(|t| t.protocol == "smb2");
        assert_eq!(smb.count(), 49);
    }
}

/// A record of a classic pcap file: its 16-byte header and data.
type Record = ([u8; 16], Vec<u8>);

/// File header and records of a classic little-endian pcap file.
fn pcap_records(b: &[u8]) -> Option<(Vec<u8>, Vec<Record>)> {
    if b.len() < 24 || b[..4] != [0xd4, 0xc3, 0xb2, 0xa1] {
        return None;
    }
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= b.len() {
        let mut h = [0u8; 16];
        h.copy_from_slice(&b[at..at + 16]);
        let incl = u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as usize;
        let data = b.get(at + 16..at + 16 + incl)?.to_vec();
        out.push((h, data));
        at += 16 + incl;
    }
    Some((b[..24].to_vec(), out))
}

fn pcap_bytes(header: &[u8], recs: &[Record]) -> Vec<u8> {
    let mut v = header.to_vec();
    for (h, d) in recs {
        let mut h = *h;
        h[8..12].copy_from_slice(&(d.len() as u32).to_le_bytes());
        v.extend_from_slice(&h);
        v.extend_from_slice(d);
    }
    v
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Cut frames, dropped frames, corrupted payload bytes and truncated files
/// never make the analysis panic, and it always ends.
#[test]
fn damaged_smb_captures_never_panic() {
    let names = [
        "zeek__zeek__smb2.pcap",
        "zeek__zeek__smb2readwrite.pcap",
        "zeek__zeek__smb3.pcap",
        "OISF__suricata-verify__smb2-async-read-input.pcap",
        "epam__nfstrace__eth-ipv4-tcp-smb2-putty.pcap",
        "zeek__zeek__smb2-multiple-pdus.pcap",
    ];
    let dir = std::env::temp_dir().join(format!("nastriage-smb2-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    for name in names {
        let Some(p) = shared(name) else { continue };
        let Ok(bytes) = std::fs::read(&p) else {
            continue;
        };
        let Some((hdr, recs)) = pcap_records(&bytes) else {
            continue;
        };
        for round in 0..20 {
            let mut recs = recs.clone();
            // Drop frames.
            if round % 2 == 0 {
                let n = rng.below(recs.len() as u64 / 10 + 1);
                for _ in 0..n {
                    let i = rng.below(recs.len() as u64) as usize;
                    recs.remove(i);
                }
            }
            // Cut frames (snaplen-like or arbitrary).
            for (_, d) in recs.iter_mut() {
                if rng.below(4) == 0 {
                    let keep = rng.below(d.len() as u64 + 1) as usize;
                    d.truncate(keep);
                }
            }
            // Corrupt bytes past the Ethernet/IP/TCP headers.
            for _ in 0..rng.below(200) {
                let i = rng.below(recs.len() as u64) as usize;
                if let Some((_, d)) = recs.get_mut(i) {
                    if d.len() > 54 {
                        let at = 54 + rng.below((d.len() - 54) as u64) as usize;
                        d[at] = rng.next() as u8;
                    }
                }
            }
            let mut out = pcap_bytes(&hdr, &recs);
            if round % 5 == 4 {
                let keep = rng.below(out.len() as u64) as usize;
                out.truncate(keep.max(24));
            }
            let f = dir.join(format!("{round}-{name}"));
            std::fs::write(&f, &out).expect("write temp capture");
            if let Ok(a) = analyze(
                &[f.to_string_lossy().to_string()],
                AnalyzeOptions::default(),
            ) {
                let log = a.transactions();
                for t in log.transactions.iter().filter(|t| t.protocol == "smb2") {
                    assert!(t.request.last_frame >= t.request.first_frame);
                    if let Some(r) = t.reply {
                        assert!(r.last_frame >= r.first_frame);
                    }
                }
            }
            let _ = std::fs::remove_file(&f);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
