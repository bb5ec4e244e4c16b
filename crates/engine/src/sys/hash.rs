//! Keyed hashing for tables whose keys come off the wire (order
//! references, sequence numbers, symbols): a sender who could choose keys
//! that share one probe run would turn every look-up into a walk of it.
//! The key is a secret drawn per table from the process's random source.

/// The secret of a map's hash: `home(k) = fold((k ^ k0) × k1)`, the top
/// bits of the 128-bit product's halves xored (one multiply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashKey([u64; 2]);

impl HashKey {
    /// A key drawn from the process's random source (std's hasher keys,
    /// which come from the kernel's `getrandom`): each map has its own.
    pub fn random() -> HashKey {
        use std::hash::{BuildHasher, RandomState};
        let s = RandomState::new();
        HashKey([s.hash_one(0x6b30_u64), s.hash_one(0x6b31_u64) | 1])
    }

    /// A fixed key, for tests and measurements that must repeat.
    pub const fn fixed(seed: u64) -> HashKey {
        HashKey([seed, splitmix(seed) | 1])
    }

    /// The key drawn after this one when a probe run grew too long: a
    /// fixed key's successor is fixed too.
    pub fn next(self, fixed: bool) -> HashKey {
        if fixed {
            HashKey::fixed(splitmix(self.0[0] ^ self.0[1]))
        } else {
            HashKey::random()
        }
    }

    /// The hash of `key`: take its top bits for a table of a power of two.
    #[inline(always)]
    pub fn hash(self, key: u64) -> u64 {
        let p = u128::from(key ^ self.0[0]) * u128::from(self.0[1]);
        (p as u64) ^ ((p >> 64) as u64)
    }
}

/// One step of SplitMix64.
const fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each table draws its own key: a sender who found keys colliding
    /// under one table's (or a build's) cannot reuse them on another.
    #[test]
    fn each_key_is_drawn_afresh() {
        let keys: Vec<HashKey> = (0..8).map(|_| HashKey::random()).collect();
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_ne!(HashKey::random(), HashKey::fixed(0));
    }
}
