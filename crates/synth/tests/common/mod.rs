//! Helpers shared by the integration tests: temporary paths, reading a
//! capture back, and an independent link/IP/transport parser with its own
//! checksum code (deliberately not the crate's) to verify what was written.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;

use nastriage_capture::{linktype, CaptureReader};

pub fn tmp_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nastriage-synth-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// One packet read back.
#[derive(Debug)]
pub struct ReadPacket {
    pub ts_ns: i64,
    pub linktype: u32,
    pub orig_len: u32,
    pub data: Vec<u8>,
}

pub fn read_all(path: &std::path::Path) -> Vec<ReadPacket> {
    let mut r = CaptureReader::open(path.to_str().unwrap()).expect("open capture");
    let mut out = Vec::new();
    while r.advance().expect("read packet") {
        let p = r.packet();
        out.push(ReadPacket {
            ts_ns: p.ts_ns,
            linktype: p.linktype,
            orig_len: p.orig_len,
            data: p.data.to_vec(),
        });
    }
    out
}

/// Strip the link layer: (EtherType, network-layer bytes).
pub fn strip_link(lt: u32, d: &[u8]) -> (u16, &[u8]) {
    let (mut et, mut rest) = match lt {
        linktype::ETHERNET => (u16::from_be_bytes([d[12], d[13]]), &d[14..]),
        linktype::LINUX_SLL => (u16::from_be_bytes([d[14], d[15]]), &d[16..]),
        linktype::LINUX_SLL2 => (u16::from_be_bytes([d[0], d[1]]), &d[20..]),
        linktype::NULL => {
            let af = u32::from_le_bytes([d[0], d[1], d[2], d[3]]);
            let et = match af {
                2 => 0x0800,
                24 | 28 | 30 => 0x86dd,
                other => panic!("unexpected AF {other}"),
            };
            (et, &d[4..])
        }
        linktype::RAW => (if d[0] >> 4 == 4 { 0x0800 } else { 0x86dd }, d),
        other => panic!("unexpected link type {other}"),
    };
    while et == 0x8100 || et == 0x88a8 {
        et = u16::from_be_bytes([rest[2], rest[3]]);
        rest = &rest[4..];
    }
    (et, rest)
}

/// Plain RFC 1071 sum over one buffer, folded; 0xffff-complemented result.
fn csum(buf: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut i = 0;
    while i < buf.len() {
        let hi = buf[i] as u32;
        let lo = if i + 1 < buf.len() {
            buf[i + 1] as u32
        } else {
            0
        };
        sum += (hi << 8) | lo;
        sum = (sum & 0xffff) + (sum >> 16);
        i += 2;
    }
    !(sum as u16)
}

fn verify_l4(proto: u8, src: &[u8], dst: &[u8], l4: &[u8], what: &str) -> Result<(), String> {
    let mut buf = Vec::new();
    buf.extend_from_slice(src);
    buf.extend_from_slice(dst);
    if src.len() == 4 {
        buf.extend_from_slice(&[0, proto]);
        buf.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    } else {
        buf.extend_from_slice(&(l4.len() as u32).to_be_bytes());
        buf.extend_from_slice(&[0, 0, 0, proto]);
    }
    if proto == 1 {
        buf.clear(); // ICMPv4 has no pseudo-header
    }
    buf.extend_from_slice(l4);
    match proto {
        6 | 17 | 1 | 58 => {
            if csum(&buf) != 0 {
                return Err(format!("bad {what} checksum (proto {proto})"));
            }
            if proto == 17 && l4[6] == 0 && l4[7] == 0 {
                return Err("UDP checksum left zero".into());
            }
            if proto == 17 && u16::from_be_bytes([l4[4], l4[5]]) as usize != l4.len() {
                return Err("UDP length mismatch".into());
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// IPv4 fragments of one datagram: (offset, more fragments, payload).
type Fragments = Vec<(usize, bool, Vec<u8>)>;

/// Verifies checksums, reassembling IPv4 fragments as they come.
#[derive(Default)]
pub struct Checker {
    frags: HashMap<(Vec<u8>, Vec<u8>, u16), Fragments>,
    pub checked_l4: usize,
    pub reassembled: usize,
}

impl Checker {
    pub fn check(&mut self, ethertype: u16, ip: &[u8]) -> Result<(), String> {
        match ethertype {
            0x0806 => Ok(()),
            0x0800 => {
                let ihl = (ip[0] & 0x0f) as usize * 4;
                if csum(&ip[..ihl]) != 0 {
                    return Err("bad IPv4 header checksum".into());
                }
                let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
                if total > ip.len() {
                    return Err(format!(
                        "IPv4 total length {total} beyond {} bytes",
                        ip.len()
                    ));
                }
                let ff = u16::from_be_bytes([ip[6], ip[7]]);
                let (mf, off) = (ff & 0x2000 != 0, (ff & 0x1fff) as usize * 8);
                let (src, dst, proto) = (ip[12..16].to_vec(), ip[16..20].to_vec(), ip[9]);
                let payload = &ip[ihl..total];
                if !mf && off == 0 {
                    self.checked_l4 += 1;
                    return verify_l4(proto, &src, &dst, payload, "IPv4");
                }
                let key = (src.clone(), dst.clone(), u16::from_be_bytes([ip[4], ip[5]]));
                let list = self.frags.entry(key.clone()).or_default();
                list.push((off, mf, payload.to_vec()));
                list.sort_by_key(|f| f.0);
                let mut whole = Vec::new();
                for (o, _, p) in list.iter() {
                    if *o != whole.len() {
                        return Ok(()); // not complete yet
                    }
                    whole.extend_from_slice(p);
                }
                if list.last().is_some_and(|f| !f.1) {
                    self.frags.remove(&key);
                    self.reassembled += 1;
                    self.checked_l4 += 1;
                    return verify_l4(proto, &src, &dst, &whole, "reassembled IPv4");
                }
                Ok(())
            }
            0x86dd => {
                let plen = u16::from_be_bytes([ip[4], ip[5]]) as usize;
                if 40 + plen > ip.len() {
                    return Err("IPv6 payload length beyond frame".into());
                }
                self.checked_l4 += 1;
                verify_l4(ip[6], &ip[8..24], &ip[24..40], &ip[40..40 + plen], "IPv6")
            }
            other => Err(format!("unexpected EtherType {other:#06x}")),
        }
    }
}
