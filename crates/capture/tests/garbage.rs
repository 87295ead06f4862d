//! Random and mutated inputs (deterministic xorshift): never a panic, never
//! a hang, and memory stays bounded however the lengths lie. One test only
//! in this binary, so the allocation counter sees nothing else.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use nastriage_capture::{CaptureReader, MAX_RECORD_LEN};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            let now = CURRENT.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(l);
        if !p.is_null() {
            let now = CURRENT.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l);
        CURRENT.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = System.realloc(p, l, new);
        if !q.is_null() {
            if new >= l.size() {
                let now = CURRENT.fetch_add(new - l.size(), Ordering::Relaxed) + new - l.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                CURRENT.fetch_sub(l.size() - new, Ordering::Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Run one input; returns the number of packets. `plain_len` bounds the
/// packets (each record takes at least 12 bytes) and the offsets reported.
fn run(input: Vec<u8>, chunk: usize, plain_len: Option<usize>) -> usize {
    let len = input.len();
    let reader: Box<dyn std::io::Read + Send> = if chunk == 0 {
        Box::new(std::io::Cursor::new(input))
    } else {
        Box::new(Trickle::new(input, chunk))
    };
    let r = match CaptureReader::from_reader("fuzz", reader) {
        Ok(r) => r,
        Err(e) => {
            assert!(e.to_string().contains("byte offset"));
            if plain_len.is_some() {
                assert!(e.offset <= len as u64);
            }
            return 0;
        }
    };
    // A hang guard: no input of n bytes holds more than n / 12 records
    // (after decompression at most 1032x larger for deflate).
    let limit = plain_len.unwrap_or(len * 1100) / 12 + 1;
    let all = read_all_limited(r, limit);
    if let Some(n) = plain_len {
        if let Some(e) = &all.error {
            assert!(e.offset <= n as u64, "{e}");
        }
        for w in &all.warnings {
            assert!(w.offset <= n as u64, "{w}");
        }
        for p in &all.packets {
            assert!(p.data.len() <= n && p.offset < n as u64);
        }
    }
    all.packets.len()
}

fn valid_samples() -> Vec<Vec<u8>> {
    let mut v = vec![small_pcap().0, small_pcapng().0, small_snoop().0];
    for (be, magic) in [
        (true, MAGIC_NSEC),
        (false, MAGIC_MODIFIED),
        (true, MAGIC_MODIFIED),
    ] {
        let mut b = PcapBuilder::new(be, magic, (2, 4), 65535, 1);
        for i in 0..4u32 {
            b.record(i, i, 64, &payload(i as u8, 10 + i as usize));
        }
        v.push(b.out);
    }
    let mut ng = NgBuilder::new();
    ng.shb(true);
    ng.idb(1, 20, &[opt(9, &[0x80 | 20])]);
    ng.spb(40, &payload(0, 20));
    ng.epb(0, 99, 10, &payload(1, 10), &[]);
    v.push(ng.out);
    v
}

/// Headers a reader accepts, to push random bytes past the magic check.
fn headers() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for (be, magic) in [
        (false, MAGIC_USEC),
        (true, MAGIC_USEC),
        (false, MAGIC_NSEC),
        (false, MAGIC_MODIFIED),
        (true, MAGIC_MODIFIED),
    ] {
        v.push(PcapBuilder::new(be, magic, (2, 4), 65535, 1).out);
    }
    for be in [false, true] {
        let mut ng = NgBuilder::new();
        ng.shb(be);
        v.push(ng.out.clone());
        ng.idb(1, 0, &[]);
        v.push(ng.out);
    }
    v.push(snoop_header(4));
    v
}

const INTERESTING: [u32; 11] = [
    0,
    1,
    4,
    11,
    12,
    13,
    48 << 20,
    0x7FFF_FFFF,
    0xFFFF_FFFF,
    0xFFFF_FFF0,
    MAX_RECORD_LEN as u32 + 4,
];

fn mutate(rng: &mut XorShift, base: &[u8]) -> Vec<u8> {
    let mut v = base.to_vec();
    for _ in 0..1 + rng.below(6) {
        if v.len() < 4 {
            break;
        }
        match rng.below(4) {
            0 => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(v.len());
                v[i] = rng.next_u64() as u8;
            }
            2 => {
                let i = rng.below(v.len() - 3);
                let x = INTERESTING[rng.below(INTERESTING.len())];
                let b = if rng.below(2) == 0 {
                    x.to_le_bytes()
                } else {
                    x.to_be_bytes()
                };
                v[i..i + 4].copy_from_slice(&b);
            }
            _ => {
                let n = rng.below(v.len());
                v.truncate(n.max(1));
            }
        }
    }
    v
}

#[test]
fn garbage_never_panics_hangs_or_balloons() {
    let base = CURRENT.load(Ordering::Relaxed);
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let samples = valid_samples();
    let heads = headers();
    let mut opened_packets = 0usize;

    // Plain inputs: memory must stay near the 4 MiB read buffer.
    PEAK.store(CURRENT.load(Ordering::Relaxed), Ordering::Relaxed);
    for i in 0..6000 {
        let input = match i % 3 {
            0 => {
                let n = rng.below(600);
                rng.bytes(n)
            }
            1 => {
                let mut v = heads[rng.below(heads.len())].clone();
                let n = rng.below(600);
                v.extend(rng.bytes(n));
                v
            }
            _ => {
                let k = rng.below(samples.len());
                mutate(&mut rng, &samples[k])
            }
        };
        let chunk = [0, 1, 3, 64][rng.below(4)];
        let n = input.len();
        opened_packets += run(input, chunk, Some(n));
    }
    let plain_peak = PEAK.load(Ordering::Relaxed) - base;
    assert!(
        plain_peak < 16 << 20,
        "plain garbage peaked at {plain_peak} bytes"
    );
    assert!(
        opened_packets > 0,
        "mutations should still yield some packets"
    );

    // Compressed inputs: mutated captures compressed, and random bytes after
    // a compression magic. The decompressor's own state is bounded too.
    PEAK.store(CURRENT.load(Ordering::Relaxed), Ordering::Relaxed);
    for i in 0..1500 {
        let input = match i % 4 {
            0 => gzip(&{
                let k = rng.below(samples.len());
                mutate(&mut rng, &samples[k])
            }),
            1 => zstd(&{
                let k = rng.below(samples.len());
                mutate(&mut rng, &samples[k])
            }),
            2 => {
                let mut v = vec![0x1f, 0x8b];
                let n = rng.below(300);
                v.extend(rng.bytes(n));
                v
            }
            _ => {
                let mut v = vec![0x28, 0xb5, 0x2f, 0xfd];
                let n = rng.below(300);
                v.extend(rng.bytes(n));
                v
            }
        };
        let corrupt = rng.below(3) == 0;
        let input = if corrupt {
            mutate(&mut rng, &input)
        } else {
            input
        };
        run(input, [0, 1, 7][rng.below(3)], None);
    }
    let compressed_peak = PEAK.load(Ordering::Relaxed) - base;
    assert!(
        compressed_peak < 192 << 20,
        "compressed garbage peaked at {compressed_peak} bytes"
    );
    // Nothing leaks across inputs.
    let now = CURRENT.load(Ordering::Relaxed);
    assert!(now < base + (1 << 20), "still allocated: {}", now - base);
}
