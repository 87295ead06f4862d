//! Every reference capture in ../shared/captures (read in place, never
//! copied): packet counts equal the catalogue's, and the crafted malformed
//! files give an error or warning that names a byte offset. Skipped when the
//! directory is absent.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use nastriage_capture::{CaptureReader, MergedReader};

fn captures_dir() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/captures");
    p.join("CATALOG.tsv").is_file().then_some(p)
}

struct Row {
    packets: Option<u64>,
    malformed: bool,
}

fn catalog(dir: &Path) -> HashMap<String, Row> {
    let text = std::fs::read_to_string(dir.join("CATALOG.tsv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (c_file, c_packets, c_prov) = (col("filename"), col("packets"), col("provenance"));
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let row = Row {
                packets: f[c_packets].trim().parse().ok(),
                malformed: f[c_prov].contains("crafted malformed file"),
            };
            (f[c_file].to_string(), row)
        })
        .collect()
}

#[test]
fn shared_captures_match_catalog() {
    let Some(dir) = captures_dir() else {
        eprintln!("skipped: ../shared/captures not found");
        return;
    };
    let cat = catalog(&dir);
    let mut seen = 0;
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().map(|t| t.is_file()).unwrap_or(false))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "CATALOG.tsv" && n != "README.md")
        .collect();
    names.sort();
    let mut failures = Vec::new();
    for name in &names {
        let Some(row) = cat.get(name) else {
            failures.push(format!("{name}: not in CATALOG.tsv"));
            continue;
        };
        seen += 1;
        let path = dir.join(name).to_string_lossy().into_owned();
        let (count, error, warnings) = match CaptureReader::open(&path) {
            Err(e) => (0, Some(e.to_string()), Vec::new()),
            Ok(mut r) => {
                let mut n = 0u64;
                let mut err = None;
                loop {
                    match r.advance() {
                        Ok(true) => {
                            let p = r.packet();
                            assert!(p.data.len() <= nastriage_capture::MAX_RECORD_LEN);
                            n += 1;
                        }
                        Ok(false) => break,
                        Err(e) => {
                            err = Some(e.to_string());
                            break;
                        }
                    }
                }
                (
                    n,
                    err,
                    r.warnings()
                        .iter()
                        .map(|w| w.to_string())
                        .collect::<Vec<_>>(),
                )
            }
        };
        if row.malformed {
            let problems: Vec<&String> = error.iter().chain(warnings.iter()).collect();
            if problems.is_empty() || !problems.iter().all(|m| m.contains("byte offset")) {
                failures.push(format!(
                    "{name}: malformed file read without an error or warning with an offset"
                ));
            }
        } else {
            if let Some(e) = &error {
                failures.push(format!("{name}: unexpected error {e}"));
            }
            match row.packets {
                Some(want) if want == count => {}
                want => failures.push(format!("{name}: {count} packets, catalog says {want:?}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(seen >= 90, "only {seen} captures checked");
}

/// Small real captures merged: every packet comes out once, and the merged
/// stream is in timestamp order wherever each file is.
#[test]
fn shared_captures_merge() {
    let Some(dir) = captures_dir() else {
        return;
    };
    let names = [
        "chrissanders__packets__latency1.pcapng",
        "seladb__PcapPlusPlus__microsecs_big_endian.pcap",
        "seladb__PcapPlusPlus__nanosecs_big_endian.pcap",
        "seladb__PcapPlusPlus__pcapng-example.pcapng.zst",
    ];
    let readers: Vec<CaptureReader> = names
        .iter()
        .map(|n| CaptureReader::open(&dir.join(n).to_string_lossy()).unwrap())
        .collect();
    let mut m = MergedReader::new(readers);
    let mut per_file = [0u64; 4];
    let mut last_ts = [i64::MIN; 4];
    while m.advance() {
        let (i, p) = m.packet().unwrap();
        per_file[i] += 1;
        last_ts[i] = last_ts[i].max(p.ts_ns);
    }
    assert!(m.errors().is_empty());
    assert_eq!(per_file, [6, 13, 10, 159]);
}
