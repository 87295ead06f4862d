//! Test-only helpers: a tiny XDR/little-endian encoder and a deterministic
//! xorshift mutator for fuzz-style robustness tests (no external crates).

/// Big-endian XDR encoder.
#[derive(Default, Clone)]
pub struct Xdr(pub Vec<u8>);

impl Xdr {
    pub fn new() -> Self {
        Self(Vec::new())
    }
    pub fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn bool(self, v: bool) -> Self {
        self.u32(v as u32)
    }
    /// Fixed opaque with padding.
    pub fn fixed(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        let n = self.0.len().next_multiple_of(4);
        self.0.resize(n, 0);
        self
    }
    /// Variable opaque: length, bytes, padding.
    pub fn opaque(self, b: &[u8]) -> Self {
        self.u32(b.len() as u32).fixed(b)
    }
    pub fn string(self, s: &str) -> Self {
        self.opaque(s.as_bytes())
    }
    pub fn bytes(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self
    }
    pub fn done(self) -> Vec<u8> {
        self.0
    }
}

/// xorshift64* PRNG: deterministic, good enough to drive mutations.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Feed `f` with `iters` mutated/truncated variants of the `seeds`. The
/// parser under test must neither panic nor hang; results are ignored.
pub fn fuzz(seeds: &[Vec<u8>], iters: usize, mut f: impl FnMut(&[u8])) {
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    for s in seeds {
        // Every prefix of every seed.
        for n in 0..=s.len() {
            f(&s[..n]);
        }
    }
    for _ in 0..iters {
        let mut m = seeds[rng.below(seeds.len())].clone();
        for _ in 0..1 + rng.below(4) {
            if m.is_empty() {
                break;
            }
            let i = rng.below(m.len());
            match rng.below(6) {
                0 => m[i] ^= 1 << rng.below(8),
                1 => m[i] = rng.next() as u8,
                2 => {
                    // Overwrite an aligned word with an extreme value.
                    let i = i & !3;
                    let v: u32 = match rng.below(5) {
                        0 => 0,
                        1 => u32::MAX,
                        2 => 0x7fff_ffff,
                        3 => rng.below(300) as u32,
                        _ => rng.next() as u32,
                    };
                    for (k, b) in v.to_be_bytes().iter().enumerate() {
                        if let Some(x) = m.get_mut(i + k) {
                            *x = *b;
                        }
                    }
                }
                3 => m.truncate(i),
                4 => {
                    m.remove(i);
                }
                _ => m.insert(i, rng.next() as u8),
            }
        }
        f(&m);
    }
}

/// Check that `parse` fails with `Incomplete` on every prefix shorter than
/// some length and succeeds on every longer one; returns that length.
pub fn prefix_threshold<T, E: std::fmt::Debug>(
    b: &[u8],
    mut parse: impl FnMut(&[u8]) -> Result<T, E>,
    is_incomplete: impl Fn(&E) -> bool,
) -> usize {
    let need = (0..=b.len())
        .find(|&n| parse(&b[..n]).is_ok())
        .expect("full input must parse");
    for n in 0..b.len() {
        match parse(&b[..n]) {
            Err(e) => assert!(n < need && is_incomplete(&e), "len {n}: {e:?}"),
            Ok(_) => assert!(n >= need, "len {n}"),
        }
    }
    need
}

/// Little-endian encoder for SMB structures.
#[derive(Default, Clone)]
pub struct Le(pub Vec<u8>);

impl Le {
    pub fn new() -> Self {
        Self(Vec::new())
    }
    pub fn u8(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }
    pub fn u16(mut self, v: u16) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn bytes(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self
    }
    pub fn zeros(self, n: usize) -> Self {
        self.bytes(&vec![0; n])
    }
    pub fn utf16(mut self, s: &str) -> Self {
        for u in s.encode_utf16() {
            self.0.extend_from_slice(&u.to_le_bytes());
        }
        self
    }
    pub fn done(self) -> Vec<u8> {
        self.0
    }
}
