//! `nastriage-synth`: write a synthetic scenario capture.
//!
//! Used to regenerate test fixtures and the README example, and by hand to
//! get a capture of a known situation in any container and link type.

use std::fs::File;
use std::io;
use std::process::ExitCode;

use nastriage_synth::{
    bench, scenario, write_capture, Format, LinkConfig, LinkKind, Options, WriteOptions,
};

const USAGE: &str = "\
usage: nastriage-synth SCENARIO OUT [options]
       nastriage-synth bench OUT --size SIZE [options]

Write the synthetic capture SCENARIO to OUT ('-' for standard output).
'bench' streams a large benchmark capture (many NFSv3, NFSv4.1 and SMB3
connections, with loss, reordering and zero windows) until OUT reaches
SIZE bytes (100M, 1G, 4G; binary units).

options:
  --format pcap|pcapng|snoop   container (default pcap; snoop is Ethernet only)
  --nanosecond                 nanosecond timestamps (pcap; pcapng is always ns)
  --linktype ethernet|sll|sll2|null|raw
                               link layer (default ethernet)
  --vlan N[,N...]              802.1Q/802.1ad tags, outermost first
  --snaplen N                  bytes kept per frame (default 262144)
  --seed N                     random seed (default 1)
  --size SIZE                  bench: stop at SIZE bytes (default 100M)
  --slots N                    bench: concurrent connections (default 48)
  --list                       list scenarios and exit";

struct Args {
    scenario: String,
    out: String,
    write: WriteOptions,
    seed: u64,
    size: u64,
    slots: usize,
}

fn parse_args(argv: &[String]) -> Result<Option<Args>, String> {
    let mut positional = Vec::new();
    let mut write = WriteOptions::default();
    let mut link = LinkKind::Ethernet;
    let mut vlans = Vec::new();
    let mut seed = 1u64;
    let mut size = 100u64 << 20;
    let mut slots = 48usize;
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match a.as_str() {
            "-h" | "--help" => return Ok(None),
            "--list" => {
                for (name, what) in scenario::SCENARIOS {
                    println!("{name:16} {what}");
                }
                println!(
                    "{:16} streamed benchmark capture of --size bytes (NFSv3, NFSv4.1, SMB3)",
                    "bench"
                );
                std::process::exit(0);
            }
            "--format" => {
                let v = value("--format")?;
                write.format = Format::parse(&v)
                    .ok_or_else(|| format!("unknown format {v:?} (pcap, pcapng, snoop)"))?;
            }
            "--nanosecond" => write.nanosecond = true,
            "--linktype" => {
                let v = value("--linktype")?;
                link = LinkKind::parse(&v).ok_or_else(|| {
                    format!("unknown link type {v:?} (ethernet, sll, sll2, null, raw)")
                })?;
            }
            "--vlan" => {
                let v = value("--vlan")?;
                for part in v.split(',') {
                    let id: u16 = part
                        .trim()
                        .parse()
                        .map_err(|_| format!("bad VLAN ID {part:?}"))?;
                    vlans.push(id);
                }
            }
            "--snaplen" => {
                let v = value("--snaplen")?;
                write.snaplen = v.parse().map_err(|_| format!("bad snaplen {v:?}"))?;
            }
            "--seed" => {
                let v = value("--seed")?;
                seed = v.parse().map_err(|_| format!("bad seed {v:?}"))?;
            }
            "--size" => {
                let v = value("--size")?;
                size = bench::parse_size(&v).ok_or_else(|| format!("bad size {v:?}"))?;
            }
            "--slots" => {
                let v = value("--slots")?;
                slots = v
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("bad slot count {v:?}"))?;
            }
            s if s.starts_with("--") => return Err(format!("unknown option {s}")),
            _ => positional.push(a.clone()),
        }
    }
    if positional.len() != 2 {
        return Err("expected SCENARIO and OUT".into());
    }
    write.link = LinkConfig::new(link).with_vlans(&vlans);
    write.validate()?;
    let out = positional.pop().expect("two positionals");
    let scenario = positional.pop().expect("two positionals");
    Ok(Some(Args {
        scenario,
        out,
        write,
        seed,
        size,
        slots,
    }))
}

fn run_bench(args: &Args) -> Result<String, String> {
    let opts = bench::BenchOptions {
        seed: args.seed,
        target_bytes: args.size,
        slots: args.slots,
        ..bench::BenchOptions::default()
    };
    let started = std::time::Instant::now();
    let s = if args.out == "-" {
        bench::write_bench(io::stdout().lock(), &opts, &args.write)
    } else {
        let f = File::create(&args.out).map_err(|e| format!("cannot create {}: {e}", args.out))?;
        bench::write_bench(f, &opts, &args.write)
    }
    .map_err(|e| format!("writing {}: {e}", args.out))?;
    let secs = started.elapsed().as_secs_f64();
    Ok(format!(
        "{} frames, {} bytes written to {} (bench, seed {}) in {secs:.1} s ({:.0} MB/s); \
         {:.2} s of traffic; connections NFSv3 {} NFSv4.1 {} SMB3 {}; \
         requests NFSv3 {} NFSv4.1 {} SMB3 {}; {} retransmissions, {} zero-window probes",
        s.frames,
        s.bytes,
        args.out,
        args.seed,
        s.bytes as f64 / 1e6 / secs.max(1e-9),
        s.duration_ns as f64 / 1e9,
        s.connections[0],
        s.connections[1],
        s.connections[2],
        s.requests[0],
        s.requests[1],
        s.requests[2],
        s.retransmissions,
        s.zero_window_probes,
    ))
}

fn run(args: Args) -> Result<usize, String> {
    let opts = Options {
        seed: args.seed,
        ..Options::default()
    };
    let frames = nastriage_synth::scenario_frames(&args.scenario, &opts, &args.write.link)?;
    let n = if args.out == "-" {
        write_capture(io::stdout().lock(), &frames, &args.write)
    } else {
        let f = File::create(&args.out).map_err(|e| format!("cannot create {}: {e}", args.out))?;
        write_capture(f, &frames, &args.write)
    }
    .map_err(|e| format!("writing {}: {e}", args.out))?;
    Ok(n)
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse_args(&argv) {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("nastriage-synth: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let (scenario, out, format, link) = (
        args.scenario.clone(),
        args.out.clone(),
        args.write.format.name(),
        args.write.link.kind.name(),
    );
    if args.scenario == "bench" {
        return match run_bench(&args) {
            Ok(line) => {
                if out == "-" {
                    eprintln!("{line}");
                } else {
                    println!("{line}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("nastriage-synth: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match run(args) {
        Ok(n) => {
            let line = format!("{n} frames written to {out} ({scenario}, {format}, {link})");
            if out == "-" {
                eprintln!("{line}");
            } else {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("nastriage-synth: {e}");
            ExitCode::FAILURE
        }
    }
}
