//! SecurityID → instrument index: the lookup every incremental entry
//! makes. An open-addressing table of (SecurityID, index) pairs, linear
//! probing from a multiplicative hash, at most a quarter full: one
//! multiply and usually one 8-byte load per lookup, where a `HashMap` with
//! the standard library's SipHash spent several times that hashing alone.
//! Instruments are never removed (a definition's `D` drops only the
//! Symbol), so the table only grows, doubling when a quarter full: it
//! allocates when a new instrument appears, never per packet.

/// A slot: SecurityID and index, [`EMPTY`] when free.
type Slot = (i32, u32);

/// A free slot's index (no instrument has it: indices are below the
/// number of instruments, which is far below `u32::MAX`).
const EMPTY: u32 = u32::MAX;

/// The table is kept at most 1/`LOAD` full: at a quarter, a lookup
/// probes about 1.2 slots (a half: about 1.5, each further probe a branch
/// the processor may mispredict), for 32 bytes per instrument.
const LOAD: usize = 4;

/// SecurityID → index of the instrument in the feed's list.
#[derive(Debug, Clone)]
pub struct IdIndex {
    slots: Box<[Slot]>,
    /// log2 of the slot count.
    bits: u32,
    len: usize,
}

impl Default for IdIndex {
    fn default() -> IdIndex {
        IdIndex::new()
    }
}

impl IdIndex {
    /// An empty index (64 slots).
    pub fn new() -> IdIndex {
        IdIndex::with_bits(6)
    }

    fn with_bits(bits: u32) -> IdIndex {
        IdIndex {
            slots: vec![(0, EMPTY); 1 << bits].into_boxed_slice(),
            bits,
            len: 0,
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

    /// The home slot of `id` (Fibonacci hashing: the top bits of the
    /// product, which every bit of the id reaches).
    #[inline]
    fn home(&self, id: i32) -> usize {
        ((id as u32 as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - self.bits)) as usize
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
            let mut bigger = IdIndex::with_bits(self.bits + 1);
            for &(k, v) in self.slots.iter().filter(|s| s.1 != EMPTY) {
                bigger.put(k, v);
            }
            *self = bigger;
        }
        self.put(id, index);
    }

    fn put(&mut self, id: i32, index: u32) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(id);
        while self.slots[i].1 != EMPTY {
            i = (i + 1) & mask;
        }
        self.slots[i] = (id, index);
        self.len += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

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
}
