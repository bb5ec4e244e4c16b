//! A map from `u64` keys (order references, sequence numbers) to small
//! `Copy` values: open addressing with linear probing, deletion by backward
//! shift (no tombstones build up over a day of inserts and removals). It
//! doubles when it would be more than 70% full: the only allocation,
//! amortised over the inserts; sized up front it allocates nothing after
//! warm-up.
//!
//! The keys come off the wire, so a sender may choose them to collide: the
//! hash is keyed ([`HashKey`], random per map), so that which keys share a
//! probe run cannot be known from outside, and a probe run longer than
//! [`MAX_PROBE`] slots (which random keys all but never make) draws a new
//! key and rehashes, as a second line. Clearing costs what was inserted
//! since the last clear, not the table's size: the keys inserted are noted
//! (up to an eighth of the slots; past that a clear fills the table, an
//! eighth of a slot's cost per insert), and only their probe runs are
//! emptied.

use crate::sys::memory::{huge_vec, prefetch};

/// Marks an empty slot. A real entry with this key is kept apart.
const EMPTY: u64 = u64::MAX;

/// Longest probe run an insert accepts before the map draws a new hash key
/// and rehashes (slots). At 70% load, random keys make runs of a few dozen
/// slots in the largest tables.
pub const MAX_PROBE: usize = 512;

pub use crate::sys::hash::HashKey;

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct U64Map<V: Copy> {
    keys: Vec<u64>,
    values: Vec<V>,
    /// `keys.len() - 1` (a power of two minus one).
    mask: usize,
    /// log2 of `keys.len()`.
    bits: u32,
    len: usize,
    /// The entry whose key is `EMPTY`, if any.
    max_key: Option<V>,
    /// What fills empty value slots.
    vacant: V,
    hash: HashKey,
    /// `hash` is fixed ([`with_key`](Self::with_key)), its successors too.
    fixed: bool,
    /// Keys inserted since the last clear, up to an eighth of the slots
    /// (allocated with the table).
    inserted: Vec<u64>,
    /// More keys were inserted since the last clear than `inserted` holds.
    uncounted: bool,
}

impl<V: Copy> U64Map<V> {
    /// Room for `n` entries before the first growth; `vacant` fills unused
    /// value slots (any value).
    pub fn with_capacity(n: usize, vacant: V) -> U64Map<V> {
        U64Map::keyed(n, vacant, HashKey::random(), false)
    }

    /// [`with_capacity`](Self::with_capacity) with a fixed hash key, for
    /// tests and measurements that must repeat (what the map holds never
    /// depends on the key, only where).
    pub fn with_key(n: usize, vacant: V, key: HashKey) -> U64Map<V> {
        U64Map::keyed(n, vacant, key, true)
    }

    fn keyed(n: usize, vacant: V, hash: HashKey, fixed: bool) -> U64Map<V> {
        let want = (n.max(8) * 10 / 7 + 1).next_power_of_two();
        U64Map {
            keys: huge_vec(want, EMPTY),
            values: huge_vec(want, vacant),
            mask: want - 1,
            bits: want.trailing_zeros(),
            len: 0,
            max_key: None,
            vacant,
            hash,
            fixed,
            inserted: Vec::with_capacity(want / 8),
            uncounted: false,
        }
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        (self.hash.hash(key) >> (64 - self.bits)) as usize
    }

    /// Where `key` is, or the empty slot where it would go.
    #[inline]
    fn find(&self, key: u64) -> (usize, bool) {
        let mut i = self.home(key);
        loop {
            let k = self.keys[i];
            if k == key {
                return (i, true);
            }
            if k == EMPTY {
                return (i, false);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Starts loading the slots where `key` would be found (its home), so
    /// that a later access does not wait on memory.
    #[inline]
    pub fn prefetch(&self, key: u64) {
        let i = self.home(key);
        prefetch(&self.keys[i]);
        prefetch(&self.values[i]);
    }

    /// The value under `key`.
    #[inline]
    pub fn get(&self, key: u64) -> Option<V> {
        if key == EMPTY {
            return self.max_key;
        }
        let (i, found) = self.find(key);
        found.then(|| self.values[i])
    }

    /// True when `key` is present.
    #[inline]
    pub fn contains(&self, key: u64) -> bool {
        self.get(key).is_some()
    }

    /// The value under `key`, to change in place.
    #[inline]
    pub fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        if key == EMPTY {
            return self.max_key.as_mut();
        }
        let (i, found) = self.find(key);
        found.then(move || &mut self.values[i])
    }

    /// Inserts or replaces; returns the value replaced.
    #[inline]
    pub fn insert(&mut self, key: u64, value: V) -> Option<V> {
        if key == EMPTY {
            return self.max_key.replace(value);
        }
        let (i, found) = self.find(key);
        if found {
            return Some(std::mem::replace(&mut self.values[i], value));
        }
        if (self.len + 1) * 10 > self.keys.len() * 7 {
            self.rehash(self.keys.len() * 2, self.hash);
            return self.insert(key, value);
        }
        if (i.wrapping_sub(self.home(key)) & self.mask) > MAX_PROBE {
            self.rekey();
            return self.insert(key, value);
        }
        self.keys[i] = key;
        self.values[i] = value;
        self.len += 1;
        self.note_inserted(key);
        None
    }

    /// Notes `key` for [`clear`](Self::clear), while the notes have room.
    #[inline]
    fn note_inserted(&mut self, key: u64) {
        if self.inserted.len() < self.inserted.capacity() {
            self.inserted.push(key);
        } else {
            self.uncounted = true;
        }
    }

    /// A probe run grew past [`MAX_PROBE`]: a new hash key, every entry
    /// rehashed (same size). With a secret key no sender can make this
    /// happen often; a rare long run of honest keys costs one rehash.
    #[cold]
    fn rekey(&mut self) {
        let key = self.hash.next(self.fixed);
        self.rehash(self.keys.len(), key);
    }

    /// Removes `key`; returns its value.
    #[inline]
    pub fn remove(&mut self, key: u64) -> Option<V> {
        if key == EMPTY {
            return self.max_key.take();
        }
        let (mut i, found) = self.find(key);
        if !found {
            return None;
        }
        let removed = self.values[i];
        self.len -= 1;
        // Backward shift: pull later members of the probe run into the hole
        // when the hole lies between their home and where they sit.
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let k = self.keys[j];
            if k == EMPTY {
                break;
            }
            let home = self.home(k);
            if (j.wrapping_sub(home) & self.mask) >= (j.wrapping_sub(i) & self.mask) {
                self.keys[i] = k;
                self.values[i] = self.values[j];
                i = j;
            }
        }
        self.keys[i] = EMPTY;
        Some(removed)
    }

    /// Moves every entry into a table of `n` slots hashed with `key`.
    #[cold]
    fn rehash(&mut self, n: usize, key: HashKey) {
        let keys = std::mem::take(&mut self.keys);
        let values = std::mem::take(&mut self.values);
        self.keys = huge_vec(n, EMPTY);
        self.values = huge_vec(n, self.vacant);
        self.mask = n - 1;
        self.bits = n.trailing_zeros();
        self.hash = key;
        for (k, v) in keys.into_iter().zip(values).filter(|(k, _)| *k != EMPTY) {
            let (i, _) = self.find(k);
            self.keys[i] = k;
            self.values[i] = v;
        }
        // The notes stay (every live key is among them) with room for an
        // eighth of the new slots.
        let v = &mut self.inserted;
        v.reserve_exact((n / 8).saturating_sub(v.len()));
    }

    /// Removes every entry, keeping the memory: empties the probe runs of
    /// the keys inserted since the last clear (every live key is one), or,
    /// when there were more than the notes hold, the whole table.
    pub fn clear(&mut self) {
        if self.uncounted {
            self.keys.fill(EMPTY);
        } else {
            // A live key's slot lies in the run from its home to the first
            // empty slot; emptying each noted key's run whole empties it
            // (a run emptied earlier ends at an empty slot only where the
            // original run did).
            for &k in &self.inserted {
                let mut i = (self.hash.hash(k) >> (64 - self.bits)) as usize;
                while self.keys[i] != EMPTY {
                    self.keys[i] = EMPTY;
                    i = (i + 1) & self.mask;
                }
            }
        }
        self.inserted.clear();
        self.uncounted = false;
        self.len = 0;
        self.max_key = None;
    }

    /// Entries.
    pub fn len(&self) -> usize {
        self.len + self.max_key.is_some() as usize
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of one slot (key and value), for memory accounting.
    pub const SLOT_BYTES: usize = 8 + std::mem::size_of::<V>();
}

/// A map from `u64` keys that mostly rise, such as a day's order
/// references, to small `Copy` values: the keys of a sliding window of
/// `window` consecutive keys live in a ring indexed by the key itself (one
/// indexed access to add, find or remove), every other key in a [`U64Map`]
/// (the overflow).
///
/// A key above the window slides it up to hold that key (in steps of 64
/// keys, so a slide comes once per 64 rising keys); live entries
/// that fall below it move to the overflow (amortised over the keys the
/// window passes, and bounded by one scan of per-64-slot counts when a key
/// jumps far ahead). A key below the window goes to the overflow. The ring
/// is allocated once (`window` × `size_of::<Option<V>>()` bytes); the
/// overflow grows as a [`U64Map`] does.
#[derive(Debug, Clone)]
pub struct WindowMap<V: Copy> {
    /// Kept a `Vec`: shrinking it to a boxed slice would reallocate it
    /// off its huge pages.
    ring: Vec<Option<V>>,
    /// Live entries per 64 ring slots, to skip empty stretches when the
    /// window slides.
    chunks: Box<[u8]>,
    /// `ring.len() - 1` (a power of two minus one).
    mask: u64,
    /// The lowest key of the window: it holds `base..base + ring.len()`.
    base: u64,
    /// Live entries in the ring.
    in_ring: usize,
    overflow: U64Map<V>,
}

/// Ring slots per live count in [`WindowMap::chunks`].
const CHUNK: usize = 64;

impl<V: Copy> WindowMap<V> {
    /// A window of `window` keys (rounded up to a power of two, at least
    /// 64) starting at 0, and room for `overflow` entries outside it
    /// before the overflow grows; `vacant` fills its unused slots.
    pub fn new(window: usize, overflow: usize, vacant: V) -> WindowMap<V> {
        let n = window.max(CHUNK).next_power_of_two();
        WindowMap {
            ring: huge_vec(n, None),
            chunks: vec![0; n / CHUNK].into_boxed_slice(),
            mask: n as u64 - 1,
            base: 0,
            in_ring: 0,
            overflow: U64Map::with_capacity(overflow, vacant),
        }
    }

    /// True when `key` is in the window.
    #[inline]
    fn in_window(&self, key: u64) -> bool {
        key.wrapping_sub(self.base) <= self.mask
    }

    #[inline]
    fn slot(&self, key: u64) -> usize {
        (key & self.mask) as usize
    }

    /// Starts loading the slot of `key` (its ring slot, or its home in
    /// the overflow), so that a later access does not wait on memory.
    #[inline]
    pub fn prefetch(&self, key: u64) {
        if self.in_window(key) {
            prefetch(&self.ring[self.slot(key)]);
        } else {
            self.overflow.prefetch(key);
        }
    }

    /// The value under `key`.
    #[inline]
    pub fn get(&self, key: u64) -> Option<V> {
        if self.in_window(key) {
            self.ring[self.slot(key)]
        } else {
            self.overflow.get(key)
        }
    }

    /// The value under `key`, to change in place.
    #[inline]
    pub fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        if self.in_window(key) {
            let i = self.slot(key);
            self.ring[i].as_mut()
        } else {
            self.overflow.get_mut(key)
        }
    }

    /// Inserts or replaces; returns the value replaced.
    #[inline]
    pub fn insert(&mut self, key: u64, value: V) -> Option<V> {
        if !self.in_window(key) {
            if key < self.base {
                return self.overflow.insert(key, value);
            }
            self.slide(key);
        }
        let i = self.slot(key);
        let old = self.ring[i].replace(value);
        if old.is_none() {
            self.in_ring += 1;
            self.chunks[i / CHUNK] += 1;
        }
        old
    }

    /// Removes `key`; returns its value.
    #[inline]
    pub fn remove(&mut self, key: u64) -> Option<V> {
        if !self.in_window(key) {
            return self.overflow.remove(key);
        }
        let i = self.slot(key);
        let old = self.ring[i].take();
        if old.is_some() {
            self.in_ring -= 1;
            self.chunks[i / CHUNK] -= 1;
        }
        old
    }

    /// Moves the window up, a whole number of 64-slot chunks, so that it
    /// holds `key` (above it), moving the live entries it leaves behind to
    /// the overflow.
    #[cold]
    fn slide(&mut self, key: u64) {
        // No overflow: `key - mask <= u64::MAX - mask` and `mask >= 63`.
        let base = (key - self.mask).next_multiple_of(CHUNK as u64);
        // Keys base..new leave the window; past a whole window, all do.
        let leaving = (base - self.base).min(self.mask + 1);
        let mut k = self.base;
        let end = self.base + leaving;
        while k < end && self.in_ring > 0 {
            let i = self.slot(k);
            if i.is_multiple_of(CHUNK) && self.chunks[i / CHUNK] == 0 && end - k >= CHUNK as u64 {
                k += CHUNK as u64;
                continue;
            }
            if let Some(v) = self.ring[i].take() {
                self.in_ring -= 1;
                self.chunks[i / CHUNK] -= 1;
                self.overflow.insert(k, v);
            }
            k += 1;
        }
        self.base = base;
    }

    /// Removes every entry, keeping the memory; the window starts at 0
    /// again. Empties only the ring's chunks that hold entries (found in
    /// the per-chunk counts, eight at a time), and stops once all are:
    /// the cost follows what was inserted, not the ring's 16 MiB.
    pub fn clear(&mut self) {
        let mut left = self.in_ring;
        for (g, group) in self.chunks.chunks_mut(8).enumerate() {
            if left == 0 {
                break;
            }
            // Eight counts tested at once (no early exit: one word's test).
            if group.iter().fold(0, |a, &n| a | n) == 0 {
                continue;
            }
            for (k, n) in group.iter_mut().enumerate() {
                if *n > 0 {
                    let c = g * 8 + k;
                    self.ring[c * CHUNK..(c + 1) * CHUNK].fill(None);
                    left -= usize::from(std::mem::take(n));
                }
            }
        }
        self.in_ring = 0;
        self.base = 0;
        self.overflow.clear();
    }

    /// Entries.
    pub fn len(&self) -> usize {
        self.in_ring + self.overflow.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn grows_and_keeps_every_entry() {
        let mut m = U64Map::with_capacity(1, 0u32);
        for k in 0..10_000u64 {
            assert_eq!(m.insert(k * 3, k as u32), None);
        }
        for k in (0..10_000u64).step_by(2) {
            assert_eq!(m.remove(k * 3), Some(k as u32));
        }
        assert_eq!(m.len(), 5_000);
        for k in 0..10_000u64 {
            assert_eq!(m.get(k * 3), (k % 2 == 1).then_some(k as u32), "{k}");
        }
        m.insert(u64::MAX, 7);
        assert_eq!((m.get(u64::MAX), m.len()), (Some(7), 5_001));
        m.clear();
        assert!(m.is_empty() && m.get(3).is_none() && m.get(u64::MAX).is_none());
    }

    #[test]
    fn a_window_slides_up_and_keeps_what_it_leaves() {
        let mut m = WindowMap::new(128, 4, 0u32);
        for k in 0..64u64 {
            assert_eq!(m.insert(k, k as u32), None);
        }
        assert_eq!(m.in_ring, 64);
        // Slides by a chunk of 64: keys 0..64 move to the overflow.
        m.insert(140, 140);
        assert_eq!((m.base, m.in_ring, m.overflow.len()), (64, 1, 64));
        m.insert(73, 73);
        // A far jump moves every live entry out.
        m.insert(1 << 40, 1);
        assert_eq!((m.in_ring, m.overflow.len()), (1, 66));
        // Below the window: the overflow; the largest key is a key.
        m.insert(5, 55);
        m.insert(u64::MAX, 9);
        for k in (0..64u64).chain([73, 140]) {
            let want = if k == 5 { 55 } else { k as u32 };
            assert_eq!(m.get(k), Some(want), "{k}");
        }
        assert_eq!(m.get(1 << 40), Some(1));
        assert_eq!(m.get(u64::MAX), Some(9));
        assert_eq!((m.in_ring, m.len()), (1, 68), "u64::MAX slid the window");
        assert_eq!(m.remove(1 << 40), Some(1));
        assert_eq!(m.len(), 67);
        m.clear();
        assert!(m.is_empty() && m.get(5).is_none() && m.get(u64::MAX).is_none());
    }

    /// The longest distance of an entry from its home, slots.
    fn longest_probe<V: Copy>(m: &U64Map<V>) -> usize {
        (0..m.keys.len())
            .filter(|&i| m.keys[i] != EMPTY)
            .map(|i| i.wrapping_sub(m.home(m.keys[i])) & m.mask)
            .max()
            .unwrap_or(0)
    }

    /// Keys that share one home under a known hash key (as a sender who
    /// knew it could pick) make a probe run past [`MAX_PROBE`]: the map
    /// draws a new key and rehashes, and keeps every entry.
    #[test]
    fn a_probe_run_too_long_draws_a_new_hash_key() {
        let key = HashKey::fixed(7);
        let mut m = U64Map::with_key(700, 0u32, key);
        assert_eq!(m.keys.len(), 1024);
        let bits = m.bits;
        let colliding: Vec<u64> = (0..u64::MAX)
            .filter(|&k| key.hash(k) >> (64 - bits) == 0)
            .take(MAX_PROBE + 100)
            .collect();
        for (v, &k) in colliding.iter().enumerate() {
            m.insert(k, v as u32);
        }
        assert_ne!(m.hash, key, "rehashed with a new key");
        assert!(longest_probe(&m) <= MAX_PROBE, "{}", longest_probe(&m));
        for (v, &k) in colliding.iter().enumerate() {
            assert_eq!(m.get(k), Some(v as u32));
        }
        assert_eq!(m.len(), colliding.len());
    }

    /// A clear empties what was inserted since the last one, by the notes
    /// or (past them) whole, however the entries moved in between.
    #[test]
    fn a_clear_empties_every_entry_noted_or_not() {
        let mut m = U64Map::with_capacity(64, 0u32);
        for round in 0..4u64 {
            // Few (noted), then many (past the notes and through a growth).
            let n = if round % 2 == 0 { 5 } else { 3_000 };
            for k in 0..n {
                m.insert(k * 0x1_0001 + round, 1);
            }
            for k in (0..n).step_by(3) {
                m.remove(k * 0x1_0001 + round);
            }
            m.clear();
            assert!(m.is_empty());
            assert!(m.keys.iter().all(|&k| k == EMPTY), "round {round}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Against std's map: keys that mostly rise (a window of 128 slides
        /// often), now and then far ahead, below the window, or the largest.
        #[test]
        fn a_window_map_matches_a_hash_map(ops in proptest::collection::vec((0u8..3, 0u64..200, any::<u16>()), 0..400)) {
            let mut m = WindowMap::new(128, 4, 0u16);
            let mut model = HashMap::new();
            let mut top = 0u64;
            for (op, k, v) in ops {
                let k = match k {
                    199 => u64::MAX,
                    190.. => top + (k << 20),
                    100.. => top.saturating_sub(k - 100),
                    _ => { top += k / 20; top }
                };
                match op {
                    0 => prop_assert_eq!(m.insert(k, v), model.insert(k, v)),
                    1 => prop_assert_eq!(m.remove(k), model.remove(&k)),
                    // Now and then a new session.
                    _ if v % 32 == 0 => {
                        m.clear();
                        model.clear();
                    }
                    _ => {
                        if let Some(x) = m.get_mut(k) { *x = x.wrapping_add(1); }
                        if let Some(x) = model.get_mut(&k) { *x = x.wrapping_add(1); }
                    }
                }
                prop_assert_eq!(m.len(), model.len());
                prop_assert_eq!(m.in_ring, m.ring.iter().flatten().count());
                for (key, want) in &model {
                    prop_assert_eq!(m.get(*key), Some(*want));
                }
            }
        }

        /// Against std's map, with few keys so that probe runs collide and
        /// backward shifts happen often.
        #[test]
        fn matches_a_hash_map(ops in proptest::collection::vec((0u8..3, 0u64..64, any::<u16>()), 0..400)) {
            let mut m = U64Map::with_capacity(4, 0u16);
            let mut model = HashMap::new();
            for (op, k, v) in ops {
                let k = if k == 63 { u64::MAX } else { k << 20 };
                match op {
                    0 => prop_assert_eq!(m.insert(k, v), model.insert(k, v)),
                    1 => prop_assert_eq!(m.remove(k), model.remove(&k)),
                    // Now and then a new session.
                    _ if v % 32 == 0 => {
                        m.clear();
                        model.clear();
                    }
                    _ => {
                        if let Some(x) = m.get_mut(k) { *x = x.wrapping_add(1); }
                        if let Some(x) = model.get_mut(&k) { *x = x.wrapping_add(1); }
                    }
                }
                prop_assert_eq!(m.len(), model.len());
                for probe in (0..64u64).map(|k| if k == 63 { u64::MAX } else { k << 20 }) {
                    prop_assert_eq!(m.get(probe), model.get(&probe).copied());
                }
            }
        }
    }
}
