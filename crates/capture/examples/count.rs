//! Count the packets of each capture given: `cargo run --example count FILE...`
use nastriage_capture::CaptureReader;

fn main() {
    for path in std::env::args().skip(1) {
        match CaptureReader::open(&path) {
            Err(e) => println!("{path}\tERROR\t{e}"),
            Ok(mut r) => {
                let mut n = 0u64;
                let mut err = None;
                loop {
                    match r.advance() {
                        Ok(true) => n += 1,
                        Ok(false) => break,
                        Err(e) => {
                            err = Some(e);
                            break;
                        }
                    }
                }
                let w: Vec<String> = r.warnings().iter().map(|w| w.to_string()).collect();
                println!(
                    "{path}\t{n}\t{:?}\t{}\t{}",
                    err.map(|e| e.to_string()),
                    r.info().format.describe(),
                    w.join("; ")
                );
            }
        }
    }
}
