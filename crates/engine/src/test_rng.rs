//! A deterministic random stream for tests: xorshift64, the same numbers
//! from the same seed on every run.

/// The numbers of xorshift64 (shifts 13, 7, 17) from `seed` (not 0).
pub fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}
