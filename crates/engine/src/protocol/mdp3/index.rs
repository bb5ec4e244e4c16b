//! SecurityID → instrument index: the lookup every incremental entry
//! makes. An open-addressing table of (SecurityID, index) pairs, linear
//! probing, at most a quarter full: one multiply and usually one 8-byte
//! load per lookup, where a `HashMap` with the standard library's SipHash
//! spent several times that hashing alone. Instruments are never removed
//! (a definition's `D` drops only the Symbol), so the table only grows,
//! doubling when a quarter full: it allocates when a new instrument
//! appears, never per packet.
//!
//! SecurityIDs come off the wire (definitions and incremental entries
//! create instruments), so a sender may choose them to collide: the hash
//! is keyed ([`HashKey`], random per index), so which ids share a probe
//! run cannot be known from outside, and an insert that would sit more
//! than [`MAX_PROBE`] slots from its home (which random ids all but never
//! make at a quarter full) draws a new key and rehashes.

use crate::sys::hash::HashKey;

/// A slot: SecurityID and index, [`EMPTY`] when free.
type Slot = (i32, u32);

/// A free slot's index (no instrument has it: indices are below the
/// number of instruments, which is far below `u32::MAX`).
const EMPTY: u32 = u32::MAX;

/// The table is kept at most 1/`LOAD` full: at a quarter, a lookup
/// probes about 1.2 slots (a half: about 1.5, each further probe a branch
/// the processor may mispredict), for 32 bytes per instrument.
const LOAD: usize = 4;

/// Longest distance from its home an insert accepts before the index
/// draws a new hash key and rehashes (slots). At a quarter full, random
/// ids make runs of about a dozen slots in a table of millions.
pub const MAX_PROBE: usize = 64;

/// SecurityID → index of the instrument in the feed's list.
#[derive(Debug, Clone)]
pub struct IdIndex {
    slots: Box<[Slot]>,
    /// log2 of the slot count.
    bits: u32,
    len: usize,
    hash: HashKey,
    /// `hash` is fixed ([`with_key`](Self::with_key)), its successors too.
    fixed: bool,
}

impl Default for IdIndex {
    fn default() -> IdIndex {
        IdIndex::new()
    }
}

impl IdIndex {
    /// An empty index (64 slots) with a key of its own.
    pub fn new() -> IdIndex {
        IdIndex::keyed(6, HashKey::random(), false)
    }

    /// [`new`](Self::new) with a fixed hash key, for tests that must
    /// repeat (what the index answers never depends on the key).
    #[cfg(test)]
    fn with_key(key: HashKey) -> IdIndex {
        IdIndex::keyed(6, key, true)
    }

    fn keyed(bits: u32, hash: HashKey, fixed: bool) -> IdIndex {
        IdIndex {
            slots: vec![(0, EMPTY); 1 << bits].into_boxed_slice(),
            bits,
            len: 0,
            hash,
            fixed,
        }
    }

    /// Instruments indexed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when none is.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The home slot of `id`: the top bits of its keyed hash.
    #[inline]
    fn home(&self, id: i32) -> usize {
        (self.hash.hash(u64::from(id as u32)) >> (64 - self.bits)) as usize
    }

    /// The index of `id`, if known.
    #[inline]
    pub fn get(&self, id: i32) -> Option<u32> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(id);
        loop {
            let (k, v) = self.slots[i];
            if v == EMPTY {
                return None;
            }
            if k == id {
                return Some(v);
            }
            i = (i + 1) & mask;
        }
    }

    /// Indexes `id` as `index` (`id` not yet indexed; `index` below
    /// `u32::MAX`).
    pub fn insert(&mut self, id: i32, index: u32) {
        debug_assert!(index != EMPTY && self.get(id).is_none());
        if LOAD * (self.len + 1) > self.slots.len() {
            self.rehash(self.bits + 1, self.hash);
        }
        while !self.put(id, index) {
            self.rehash(self.bits, self.hash.next(self.fixed));
        }
    }

    /// Every entry moved into a table of 2^`bits` slots hashed by `hash`
    /// (a rehash that itself makes a run too long draws again).
    #[cold]
    fn rehash(&mut self, bits: u32, hash: HashKey) {
        let mut hash = hash;
        'draw: loop {
            let mut bigger = IdIndex::keyed(bits, hash, self.fixed);
            for &(k, v) in self.slots.iter().filter(|s| s.1 != EMPTY) {
                if !bigger.put(k, v) {
                    hash = hash.next(self.fixed);
                    continue 'draw;
                }
            }
            *self = bigger;
            return;
        }
    }

    /// Puts `id` in the first free slot from its home; false (nothing
    /// changed) if that lies more than [`MAX_PROBE`] slots from it.
    fn put(&mut self, id: i32, index: u32) -> bool {
        let mask = self.slots.len() - 1;
        let home = self.home(id);
        let mut i = home;
        while self.slots[i].1 != EMPTY {
            i = (i + 1) & mask;
            if (i.wrapping_sub(home) & mask) > MAX_PROBE {
                return false;
            }
        }
        self.slots[i] = (id, index);
        self.len += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Each index draws its own hash key (SecurityIDs found colliding
    /// under one channel's are no worse than any under another's).
    #[test]
    fn each_index_draws_its_own_key() {
        assert_ne!(IdIndex::new().hash, IdIndex::new().hash);
    }

    /// Whatever the ids (negative, zero, extremes, runs that collide),
    /// the index answers as a `HashMap` does, through every growth.
    #[test]
    fn answers_as_a_map_does() {
        let mut index = IdIndex::new();
        let mut map = HashMap::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut ids: Vec<i32> = vec![0, -1, 1, i32::MIN, i32::MAX, i32::MAX - 1];
        ids.extend((0..3_000).map(|k| k * 64));
        ids.extend((0..3_000).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as i32
        }));
        for id in ids {
            if map.contains_key(&id) {
                continue;
            }
            assert_eq!(index.get(id), None, "{id}");
            let n = map.len() as u32;
            index.insert(id, n);
            map.insert(id, n);
            assert_eq!(index.get(id), Some(n));
        }
        assert_eq!(index.len(), map.len());
        for (&id, &n) in &map {
            assert_eq!(index.get(id), Some(n), "{id}");
        }
        assert!(LOAD * index.len() <= index.slots.len());
        assert_eq!(index.get(12_345_677), map.get(&12_345_677).copied());
    }

    /// The longest distance of an entry from its home, slots.
    fn longest_probe(ix: &IdIndex) -> usize {
        let mask = ix.slots.len() - 1;
        (0..ix.slots.len())
            .filter(|&i| ix.slots[i].1 != EMPTY)
            .map(|i| i.wrapping_sub(ix.home(ix.slots[i].0)) & mask)
            .max()
            .unwrap_or(0)
    }

    /// Ids that share one home under a known hash key (as a sender who
    /// knew it could pick) would make a run past [`MAX_PROBE`]: the index
    /// draws a new key, and keeps answering for every id.
    #[test]
    fn a_probe_run_too_long_draws_a_new_hash_key() {
        let key = HashKey::fixed(11);
        let mut index = IdIndex::with_key(key);
        // 300 ids grow the table to 2,048 slots (11 bits): those whose
        // home there is slot 0.
        let colliding: Vec<i32> = (0..i32::MAX)
            .filter(|&id| key.hash(u64::from(id as u32)) >> (64 - 11) == 0)
            .take(300)
            .collect();
        for (n, &id) in colliding.iter().enumerate() {
            index.insert(id, n as u32);
        }
        assert_eq!(index.bits, 11);
        assert_ne!(index.hash, key, "rehashed with a new key");
        assert!(
            longest_probe(&index) <= MAX_PROBE,
            "{}",
            longest_probe(&index)
        );
        for (n, &id) in colliding.iter().enumerate() {
            assert_eq!(index.get(id), Some(n as u32));
        }
        assert_eq!(index.len(), colliding.len());
    }

    /// Ids a sender can choose without the key (here: those an unkeyed
    /// multiplicative hash, the obvious guess, sends to one home) cost
    /// what random ids do.
    #[test]
    fn ids_chosen_without_the_key_do_not_collide() {
        let unkeyed =
            |id: i32| (u64::from(id as u32).wrapping_mul(0x9e37_79b9_7f4a_7c15)) >> (64 - 12);
        let chosen: Vec<i32> = (0..i32::MAX)
            .filter(|&id| unkeyed(id) == 0)
            .take(1_000)
            .collect();
        let mut index = IdIndex::new();
        for (n, &id) in chosen.iter().enumerate() {
            index.insert(id, n as u32);
        }
        assert_eq!(index.bits, 12);
        assert!(longest_probe(&index) < 32, "{}", longest_probe(&index));
    }
}
