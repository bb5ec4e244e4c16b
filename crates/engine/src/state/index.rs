//! (feed, symbol) → slot lookup for the writer: open addressing over integer
//! keys, so the hot path hashes a `u64`, never a string.

use crate::symbol::Symbol;
use crate::sys::hash::HashKey;
use crate::sys::memory::{zeroed_box, Zeroable};

/// Marks an empty bucket (no valid symbol has key 0).
const EMPTY: u64 = 0;

#[derive(Clone, Copy, Default)]
struct Bucket {
    /// Symbol key; `EMPTY` when free.
    symbol: u64,
    /// Feed id in the high 32 bits, slot in the low 32.
    tag: u64,
}

// SAFETY: two `u64`s, for which zero bytes are valid: 0, the default (and
// an empty bucket, `EMPTY` being 0). Nothing to drop.
#[allow(unsafe_code)]
unsafe impl Zeroable for Bucket {}

/// Writer-private index from (feed, symbol) to slot number.
pub struct Index {
    buckets: Box<[Bucket]>,
    mask: usize,
    shift: u32,
    /// The hash's secret, drawn per index: symbols come off the wire, and
    /// a sender must not be able to choose ones that share a probe run.
    key: HashKey,
}

impl Index {
    /// An index for up to `capacity` entries, kept at most half full,
    /// every page of it written now: a live writer's first insert into a
    /// page then costs no page fault.
    pub fn new(capacity: usize) -> Index {
        let n = Index::buckets(capacity);
        Index::over(vec![Bucket::default(); n].into_boxed_slice())
    }

    /// [`new`](Self::new) on zeroed memory whose pages the kernel maps as
    /// entries first land in them (a replay's table, whose capacity is
    /// mostly unused).
    pub fn untouched(capacity: usize) -> Index {
        Index::over(zeroed_box(Index::buckets(capacity)))
    }

    /// Buckets for `capacity` entries: a power of two, at least twice it.
    fn buckets(capacity: usize) -> usize {
        (capacity.max(1) * 2).next_power_of_two()
    }

    fn over(buckets: Box<[Bucket]>) -> Index {
        let n = buckets.len();
        Index {
            buckets,
            mask: n - 1,
            shift: 64 - n.trailing_zeros(),
            key: HashKey::random(),
        }
    }

    /// Bucket where the probe for (feed, symbol) starts: the keyed hash
    /// ([`HashKey`]) of the folded key, whose high bits depend on every
    /// byte of the symbol.
    #[inline]
    pub fn home(&self, feed: u16, key: u64) -> usize {
        let x = key ^ (key >> 29) ^ ((feed as u64) << 48);
        (self.key.hash(x) >> (self.shift & 63)) as usize & self.mask
    }

    /// Bucket `i` (for prefetching).
    #[inline]
    pub fn bucket(&self, i: usize) -> &impl Sized {
        &self.buckets[i & self.mask]
    }

    /// The slot of (feed, symbol), if inserted.
    #[inline]
    pub fn get(&self, feed: u16, symbol: Symbol) -> Option<u32> {
        self.get_from(self.home(feed, symbol.key()), feed, symbol)
    }

    /// The slot of (feed, symbol), probing from `home` (from [`Index::home`]).
    #[inline]
    pub fn get_from(&self, home: usize, feed: u16, symbol: Symbol) -> Option<u32> {
        let key = symbol.key();
        let mut i = home & self.mask;
        loop {
            let b = self.buckets.get(i)?;
            // The hit first: it is the common case.
            if b.symbol == key && b.tag >> 32 == feed as u64 {
                return Some(b.tag as u32);
            }
            if b.symbol == EMPTY {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Records (feed, symbol) → slot. The caller guarantees the key is new
    /// and that at most `capacity` entries are inserted.
    #[inline]
    pub fn insert(&mut self, feed: u16, symbol: Symbol, slot: u32) {
        let key = symbol.key();
        let mut i = self.home(feed, key);
        while self.buckets[i].symbol != EMPTY {
            i = (i + 1) & self.mask;
        }
        self.buckets[i] = Bucket {
            symbol: key,
            tag: (feed as u64) << 32 | slot as u64,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each index draws its own hash key: symbols found colliding under
    /// one writer's are no worse than any under the next.
    #[test]
    fn each_index_draws_its_own_key() {
        let (a, b) = (Index::new(4), Index::untouched(4));
        assert_ne!(a.key, b.key);
        assert_ne!(a.key, Index::new(4).key);
    }

    #[test]
    fn insert_and_get_across_feeds() {
        for mut ix in [Index::new(100), Index::untouched(100)] {
            let a = Symbol::parse("EURUSD").unwrap();
            let b = Symbol::parse("EURJPY").unwrap();
            assert_eq!(ix.get(0, a), None);
            ix.insert(0, a, 7);
            ix.insert(1, a, 8);
            ix.insert(0, b, 9);
            assert_eq!(ix.get(0, a), Some(7));
            assert_eq!(ix.get(1, a), Some(8));
            assert_eq!(ix.get(0, b), Some(9));
            assert_eq!(ix.get(1, b), None);
            assert_eq!(ix.get(2, a), None);
        }
    }

    /// Buckets walked to find each of `symbols` (feed 0) past its home.
    fn probe_steps(ix: &Index, symbols: &[Symbol]) -> usize {
        symbols
            .iter()
            .map(|s| {
                let (home, key) = (ix.home(0, s.key()), s.key());
                (0..ix.buckets.len())
                    .find(|d| ix.buckets[(home + d) & ix.mask].symbol == key)
                    .expect("inserted")
            })
            .sum()
    }

    /// Symbols (printable, as any sender may send) that all shared one
    /// home under the old fixed multiplier cost what random ones do: the
    /// hash is keyed with a secret per index. Counted in buckets walked,
    /// not timed.
    #[test]
    fn symbols_crafted_against_a_fixed_hash_cost_what_random_ones_do() {
        let capacity = 1024;
        let n = 300;
        let old_home = |key: u64| {
            let x = key ^ (key >> 29);
            let shift = 64 - (capacity * 2usize).trailing_zeros();
            (x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> shift) as usize
        };
        let mut rng = 0x5eed_u64;
        let mut random_symbol = || {
            let name: String = (0..8)
                .map(|_| {
                    rng = rng
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    char::from(b'A' + ((rng >> 33) % 26) as u8)
                })
                .collect();
            Symbol::parse(&name).unwrap()
        };
        let random: Vec<Symbol> = (0..n).map(|_| random_symbol()).collect();
        let mut crafted = Vec::new();
        while crafted.len() < n {
            let s = random_symbol();
            if old_home(s.key()) == 0 && !crafted.contains(&s) {
                crafted.push(s);
            }
        }
        let cost = |symbols: &[Symbol]| {
            let mut ix = Index::new(capacity);
            for (i, s) in symbols.iter().enumerate() {
                ix.insert(0, *s, i as u32);
            }
            probe_steps(&ix, symbols)
        };
        let (crafted, random) = (cost(&crafted), cost(&random));
        assert!(
            crafted <= 3 * random + 3 * n,
            "crafted {crafted} buckets walked, random {random}"
        );
    }

    #[test]
    fn full_capacity_with_similar_keys() {
        let n = 10_000;
        let mut ix = Index::new(n);
        let sym = |i: usize| Symbol::parse(&format!("S{i:07}")).unwrap();
        for i in 0..n {
            ix.insert((i % 3) as u16, sym(i), i as u32);
        }
        for i in 0..n {
            assert_eq!(ix.get((i % 3) as u16, sym(i)), Some(i as u32));
            assert_eq!(ix.get((i % 3 + 1) as u16, sym(i)), None);
        }
    }
}
