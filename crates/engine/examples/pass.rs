//! The engine's pass and every table, without Python: for profilers
//! (`perf`, `heaptrack`) and for timing the core alone.
//!
//! `cargo run --release -p nastriage-engine --example pass -- FILE...`

use std::time::Instant;

fn main() {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        eprintln!("usage: pass FILE...");
        std::process::exit(2);
    }
    let t = Instant::now();
    // As `analyze --json`: no sequence-graph points and no transaction log
    // (they are for --html).
    let opts = nastriage_engine::AnalyzeOptions {
        keep_transactions: false,
        seq_points: nastriage_engine::tcp::seq_points::SeqPointsConfig {
            per_dir: 0,
            ..Default::default()
        },
        ..Default::default()
    };
    let analysis = match nastriage_engine::analyze(&paths, opts) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let pass = t.elapsed();
    // The digest is made on its own thread after the pass: waited for here
    // so that the tables' time is their making alone.
    analysis.wait_for_digest();
    let digest = t.elapsed() - pass;
    let mut rows = 0;
    // As the command line reads them: `tcp_events` is never made whole.
    for name in analysis.table_names() {
        rows += analysis.table_len(name).unwrap_or(0);
    }
    eprintln!(
        "{} frames; pass {:.3} s; digest {:.3} s; tables {:.3} s ({rows} rows)",
        analysis.frames,
        pass.as_secs_f64(),
        digest.as_secs_f64(),
        (t.elapsed() - pass - digest).as_secs_f64()
    );
}
