//! The tests' pseudo-random numbers: xorshift64 (Marsaglia), seeded, so
//! that every run sees the same data.

/// The next number of each call (the seed must not be 0).
pub(crate) fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// [`xorshift`]'s numbers below the bound given to each call.
pub(crate) fn xorshift_below(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut next = xorshift(seed);
    move |m| next() % m
}
