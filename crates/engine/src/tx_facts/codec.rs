//! How a block of request facts is written to the spill: each field a
//! LEB128 varint, times and frames as differences (from the previous fact
//! of the block, or from the request's own start), zigzagged.
//!
//! A block is sorted in request order, so the differences are small: most
//! fields take a byte or two. The digest reads every connection's facts
//! back twice, and bincode's serde path spent about a thousand instructions
//! a fact on it (a third of the digest of a lossy copy); this loop is a few
//! hundred. Every value round-trips exactly, whatever it is: differences
//! wrap, and a block that does not decode (only a bug could make one) gives
//! `None`, never a panic.

use super::TxFacts;

fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A signed difference as an unsigned varint's value (small either way).
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(u: u64) -> i64 {
    (u >> 1) as i64 ^ -((u & 1) as i64)
}

/// `b - a` as a zigzagged varint value (wrapping: any two values).
fn diff(a: u64, b: u64) -> u64 {
    zigzag(b.wrapping_sub(a) as i64)
}

fn undiff(a: u64, d: u64) -> u64 {
    a.wrapping_add(unzigzag(d) as u64)
}

/// The facts' bytes (see the module documentation).
pub(super) fn encode(facts: &[TxFacts]) -> Vec<u8> {
    let mut out = Vec::with_capacity(facts.len() * 32);
    put(&mut out, facts.len() as u64);
    let mut prev = Prev::default();
    for f in facts {
        let ts = |t: i64| t as u64;
        put(&mut out, diff(prev.seq, f.seq));
        put(&mut out, diff(prev.frame, f.req_first_frame));
        put(&mut out, diff(f.req_first_frame, f.req_last_frame));
        put(&mut out, diff(prev.ts, ts(f.req_first_ts)));
        put(&mut out, diff(ts(f.req_first_ts), ts(f.req_last_ts)));
        put(&mut out, diff(ts(f.req_last_ts), ts(f.reply_first_ts)));
        put(&mut out, diff(ts(f.reply_first_ts), ts(f.reply_last_ts)));
        for v in [f.req_bytes, f.reply_bytes, f.count, f.reply_count] {
            put(&mut out, v);
        }
        for v in [
            f.stream,
            f.op,
            f.file,
            f.slot,
            f.highest_slot,
            f.target_highest_slot,
        ] {
            put(&mut out, u64::from(v));
        }
        for v in [f.credit_charge, f.credit_grant, f.flags] {
            put(&mut out, u64::from(v));
        }
        put(&mut out, u64::from(f.protocol));
        prev = Prev {
            seq: f.seq,
            frame: f.req_first_frame,
            ts: ts(f.req_first_ts),
        };
    }
    out
}

/// What the previous fact's differences are taken from.
#[derive(Default)]
struct Prev {
    seq: u64,
    frame: u64,
    ts: u64,
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn u64(&mut self) -> Option<u64> {
        // (Most fields take one byte: no loop for them.)
        let b = *self.bytes.get(self.at)?;
        if b < 0x80 {
            self.at += 1;
            return Some(u64::from(b));
        }
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.bytes.get(self.at)?;
            self.at += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Some(v);
            }
        }
        None
    }

    fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.u64()?).ok()
    }

    fn u16(&mut self) -> Option<u16> {
        u16::try_from(self.u64()?).ok()
    }
}

/// The facts [`encode`] wrote, back (None for bytes it did not write).
pub(super) fn decode(bytes: &[u8]) -> Option<Vec<TxFacts>> {
    let mut r = Reader { bytes, at: 0 };
    let n = usize::try_from(r.u64()?).ok()?;
    // (At least a byte per field: a count beyond the bytes is not ours.)
    if n > bytes.len() {
        return None;
    }
    let mut out = Vec::with_capacity(n);
    let mut prev = Prev::default();
    for _ in 0..n {
        let seq = undiff(prev.seq, r.u64()?);
        let req_first_frame = undiff(prev.frame, r.u64()?);
        let req_last_frame = undiff(req_first_frame, r.u64()?);
        let first_ts = undiff(prev.ts, r.u64()?);
        let last_ts = undiff(first_ts, r.u64()?);
        let reply_first_ts = undiff(last_ts, r.u64()?);
        let reply_last_ts = undiff(reply_first_ts, r.u64()?);
        let f = TxFacts {
            seq,
            req_last_frame,
            req_first_ts: first_ts as i64,
            req_last_ts: last_ts as i64,
            req_first_frame,
            req_bytes: r.u64()?,
            reply_first_ts: reply_first_ts as i64,
            reply_last_ts: reply_last_ts as i64,
            reply_bytes: r.u64()?,
            count: r.u64()?,
            reply_count: r.u64()?,
            stream: r.u32()?,
            op: r.u32()?,
            file: r.u32()?,
            slot: r.u32()?,
            highest_slot: r.u32()?,
            target_highest_slot: r.u32()?,
            credit_charge: r.u16()?,
            credit_grant: r.u16()?,
            flags: r.u16()?,
            protocol: u8::try_from(r.u64()?).ok()?,
        };
        prev = Prev {
            seq,
            frame: req_first_frame,
            ts: first_ts,
        };
        out.push(f);
    }
    // Every byte read: a block is exactly its facts.
    (r.at == bytes.len()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Facts with every field pseudo-random: small differences as a block
    /// has them, and extremes (0, the types' limits, far-apart times).
    fn facts(n: usize, seed: u64) -> Vec<TxFacts> {
        let mut rand = crate::test_rng::xorshift(seed | 1);
        let mut pick = move |small: u64| -> u64 {
            let r = rand();
            match r % 8 {
                0 => 0,
                1 => u64::MAX - (r >> 60),
                2 => r,
                3 => 1 << 63,
                _ => small.wrapping_add(r % 5000),
            }
        };
        let mut at = 1_700_000_000_000_000_000u64;
        (0..n as u64)
            .map(|i| {
                at = at.wrapping_add(pick(0) % 1_000_000);
                TxFacts {
                    seq: pick(i),
                    req_last_frame: pick(3 * i),
                    req_first_ts: pick(at) as i64,
                    req_last_ts: pick(at) as i64,
                    req_first_frame: pick(3 * i),
                    req_bytes: pick(300),
                    reply_first_ts: pick(at) as i64,
                    reply_last_ts: pick(at) as i64,
                    reply_bytes: pick(200),
                    count: pick(4096),
                    reply_count: pick(4096),
                    stream: pick(5) as u32,
                    op: pick(3) as u32,
                    file: pick(7) as u32,
                    slot: pick(1) as u32,
                    highest_slot: pick(1) as u32,
                    target_highest_slot: pick(1) as u32,
                    credit_charge: pick(1) as u16,
                    credit_grant: pick(1) as u16,
                    flags: pick(1) as u16,
                    protocol: pick(1) as u8,
                }
            })
            .collect()
    }

    fn show(f: &[TxFacts]) -> String {
        format!("{f:?}")
    }

    #[test]
    fn every_value_comes_back() {
        for (n, seed) in [(0, 1), (1, 2), (128, 3), (1000, 4)] {
            let want = facts(n, seed);
            let got = decode(&encode(&want)).expect("decodes");
            assert_eq!(show(&got), show(&want));
        }
    }

    #[test]
    fn a_block_in_order_takes_few_bytes() {
        // As a connection's block is: request order, times a little apart.
        let want: Vec<TxFacts> = (0..128u64)
            .map(|i| TxFacts {
                seq: 1000 + i,
                req_first_frame: 50_000 + 3 * i,
                req_last_frame: 50_000 + 3 * i,
                req_first_ts: 1_700_000_000_000_000_000 + 200_000 * i as i64,
                req_last_ts: 1_700_000_000_000_000_000 + 200_000 * i as i64,
                reply_first_ts: 1_700_000_000_000_300_000 + 200_000 * i as i64,
                reply_last_ts: 1_700_000_000_000_400_000 + 200_000 * i as i64,
                req_bytes: 200,
                reply_bytes: 1_048_700,
                count: 1 << 20,
                reply_count: 1 << 20,
                stream: 1,
                op: 4,
                file: 2,
                slot: (i % 16) as u32,
                highest_slot: 15,
                target_highest_slot: 15,
                credit_charge: 0,
                credit_grant: 0,
                flags: 0x7b,
                protocol: 1,
            })
            .collect();
        let bytes = encode(&want);
        // (About 34 bytes a fact, against 119 in memory and about 70 as
        // bincode varints of the values themselves.)
        assert!(bytes.len() < 128 * 36, "{} bytes", bytes.len());
        assert_eq!(show(&decode(&bytes).expect("decodes")), show(&want));
    }

    #[test]
    fn bytes_not_written_by_encode_give_none() {
        let bytes = encode(&facts(20, 5));
        // Cut anywhere, or with a byte too many: not a block.
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_none());
        // A varint that never ends, and a count far beyond the bytes.
        assert!(decode(&[0xff; 40]).is_none());
        assert!(decode(&[0xff, 0xff, 0x7f]).is_none());
    }
}
