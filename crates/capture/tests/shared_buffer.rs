//! Packets kept by reference to the reader's buffer (as the engine's
//! analysis threads do) stay intact while the reader goes on: a refill never
//! writes into a buffer someone holds.

mod common;

use std::io::Cursor;

use common::*;
use nastriage_capture::writer::PcapWriter;
use nastriage_capture::{CaptureReader, Shared};

#[test]
fn held_packets_keep_their_bytes() {
    // Records of every size up to 9000 bytes across many refills, some
    // straddling buffer ends, read through small reads.
    let packets: Vec<Vec<u8>> = (0..3000u32)
        .map(|i| (0..(i * 7919) % 9000 + 14).map(|b| (b ^ i) as u8).collect())
        .collect();
    let mut w = PcapWriter::new(Vec::new(), 1, 65535, false).expect("header");
    for (i, p) in packets.iter().enumerate() {
        w.write(i as i64 * 1000, p).expect("record");
    }
    let bytes = w.into_inner();
    for reader in [
        Box::new(Cursor::new(bytes.clone())) as Box<dyn std::io::Read + Send>,
        Box::new(Trickle::new(bytes.clone(), 4093)),
    ] {
        let mut r = CaptureReader::from_reader("mem", reader).expect("open");
        // (buffer held, offset, length) of every packet, all kept to the end.
        let mut held: Vec<(Shared, usize, usize)> = Vec::new();
        while r.advance().expect("read") {
            let pkt = r.packet();
            let buf = r.shared_buffer().clone();
            let at = pkt.data.as_ptr() as usize - buf.as_ptr() as usize;
            assert!(at + pkt.data.len() <= buf.len());
            held.push((buf, at, pkt.data.len()));
        }
        assert_eq!(held.len(), packets.len());
        for (i, (buf, at, len)) in held.iter().enumerate() {
            assert_eq!(&buf[*at..at + len], &packets[i][..], "packet {i}");
        }
    }
}
