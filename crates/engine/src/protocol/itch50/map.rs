//! A map from `u64` keys (order references, sequence numbers) to small
//! `Copy` values: open addressing with linear probing, deletion by backward
//! shift (no tombstones build up over a day of inserts and removals). It
//! doubles as it fills, a few slots at each insert, never all at once: past
//! 60% full, a table twice the size is allocated (the only allocation;
//! sized up front the map allocates nothing after warm-up) and each insert
//! fills [`FILL_STEP`] of its slots; once filled it takes the inserts, and
//! each moves up to [`MOVE_STEP`] entries of the old table into it (the old
//! one still answers for those not moved yet) until the old one is empty;
//! then each releases [`FREE_STEP`] of its slots. A whole rehash on one
//! insert held the receive thread 0.35 s at 3 M entries and 0.7 s at 6 M,
//! and freeing the old table at once 7 to 16 ms (`examples/map_growth.rs`);
//! the steps finish long before the old table would pass 70% full, which
//! still forces a whole rehash (a safety net the step sizes never reach).
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

use crate::sys::memory::{advise_huge_written, huge_vec, prefetch};

/// Marks an empty slot. A real entry with this key is kept apart.
const EMPTY: u64 = u64::MAX;

/// Longest probe run an insert accepts before the map draws a new hash key
/// and rehashes (slots). At 70% load, random keys make runs of a few dozen
/// slots in the largest tables.
pub const MAX_PROBE: usize = 512;

/// Slots of a growing map's next table filled with empty ones at each
/// insert: it has twice the slots of the old table, which takes at most a
/// tenth of its slots more inserts (60% to 70% full) meanwhile, so any
/// step above 20 finishes first.
pub const FILL_STEP: usize = 64;

/// Entries of a growing map's old table moved into the new one at each
/// insert (looking at no more than [`SCAN_STEP`] of its slots): the old
/// table empties within its slots ÷ 8 inserts, while the new one, twice
/// as large, takes half its slots' inserts before it would grow again.
pub const MOVE_STEP: usize = 8;

/// Most slots of the old table one insert looks at while moving entries.
pub const SCAN_STEP: usize = 64;

/// Slots of an emptied old table released at each insert (its memory
/// given back as its vectors shrink; one release of a table of millions
/// of slots took 7 to 16 ms).
pub const FREE_STEP: usize = 1 << 15;

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
    /// (allocated with the table, and with each next table as it grows).
    inserted: Vec<u64>,
    /// More keys were inserted since the last clear than `inserted` holds.
    uncounted: bool,
    /// A growth under way, if any.
    growth: Option<Growth<V>>,
}

/// A [`U64Map`]'s growth, step by step (see the module documentation).
#[derive(Debug, Clone)]
enum Growth<V: Copy> {
    /// The next table, `slots` long once filled: inserts fill it, and
    /// copy the clear's notes into room for an eighth of its slots.
    Filling {
        keys: Vec<u64>,
        values: Vec<V>,
        slots: usize,
        notes: Vec<u64>,
    },
    /// The map's table before the growth: inserts move its entries, from
    /// slot `cursor` up, into the map's (every slot below `cursor` is
    /// empty). Lookups not found in the map's table look here.
    Moving(Old<V>),
    /// The old table, emptied, and its notes: inserts release them a
    /// piece at a time.
    Freeing {
        keys: Vec<u64>,
        values: Vec<V>,
        notes: Vec<u64>,
    },
}

/// The table a growth replaces, hashed with the map's key into its
/// `keys.len()` slots.
#[derive(Debug, Clone)]
struct Old<V: Copy> {
    keys: Vec<u64>,
    values: Vec<V>,
    bits: u32,
    len: usize,
    cursor: usize,
    /// The clear's notes the map kept before the growth (copied), to be
    /// released with the table.
    notes: Vec<u64>,
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
        // Room for `n` below 60% full, where a growth begins.
        let want = (n.max(8) * 10 / 6 + 1).next_power_of_two();
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
            growth: None,
        }
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        (self.hash.hash(key) >> (64 - self.bits)) as usize
    }

    /// Where `key` is, or the empty slot where it would go.
    #[inline]
    fn find(&self, key: u64) -> (usize, bool) {
        find(&self.keys, self.home(key), key)
    }

    /// The growth's old table and where `key` is in it, if it is there.
    #[inline]
    fn find_old(&self, key: u64) -> Option<(&Old<V>, usize)> {
        let Some(Growth::Moving(old)) = &self.growth else {
            return None;
        };
        let (i, found) = find(&old.keys, old.home(self.hash, key), key);
        found.then_some((old, i))
    }

    /// Starts loading the slots where `key` would be found (its home), so
    /// that a later access does not wait on memory.
    #[inline]
    pub fn prefetch(&self, key: u64) {
        let i = self.home(key);
        prefetch(&self.keys[i]);
        prefetch(&self.values[i]);
        if let Some(Growth::Moving(old)) = &self.growth {
            let i = old.home(self.hash, key);
            prefetch(&old.keys[i]);
            prefetch(&old.values[i]);
        }
    }

    /// The value under `key`.
    #[inline]
    pub fn get(&self, key: u64) -> Option<V> {
        if key == EMPTY {
            return self.max_key;
        }
        let (i, found) = self.find(key);
        if found {
            return Some(self.values[i]);
        }
        self.find_old(key).map(|(old, i)| old.values[i])
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
        if found {
            return Some(&mut self.values[i]);
        }
        self.get_mut_old(key)
    }

    /// The value under `key` in the growth's old table, to change in place.
    #[inline]
    fn get_mut_old(&mut self, key: u64) -> Option<&mut V> {
        let i = self.find_old(key)?.1;
        match &mut self.growth {
            Some(Growth::Moving(old)) => Some(&mut old.values[i]),
            _ => None,
        }
    }

    /// Inserts or replaces; returns the value replaced.
    #[inline]
    pub fn insert(&mut self, key: u64, value: V) -> Option<V> {
        if key == EMPTY {
            return self.max_key.replace(value);
        }
        if self.growth.is_some() {
            return self.insert_growing(key, value);
        }
        self.insert_here(key, value)
    }

    /// [`insert`](Self::insert) while a growth is under way: its step
    /// first, then a key the old table holds replaced there.
    #[inline(never)]
    fn insert_growing(&mut self, key: u64, value: V) -> Option<V> {
        self.grow_step();
        if let Some(v) = self.get_mut_old(key) {
            return Some(std::mem::replace(v, value));
        }
        self.insert_here(key, value)
    }

    /// [`insert`](Self::insert) into the map's table (`key` in no old
    /// one).
    #[inline]
    fn insert_here(&mut self, key: u64, value: V) -> Option<V> {
        let (i, found) = self.find(key);
        if found {
            return Some(std::mem::replace(&mut self.values[i], value));
        }
        if (self.len + 1) * 10 > self.keys.len() * 7 {
            // Past the steps' reach (they finish first): all at once.
            self.finish_growth();
            if (self.len + 1) * 10 > self.keys.len() * 7 {
                self.rehash(self.keys.len() * 2, self.hash);
            }
            return self.insert(key, value);
        }
        if self.growth.is_none() && (self.len + 1) * 10 > self.keys.len() * 6 {
            self.start_growth();
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
        self.finish_growth();
        let key = self.hash.next(self.fixed);
        self.rehash(self.keys.len(), key);
    }

    /// Removes `key`; returns its value.
    #[inline]
    pub fn remove(&mut self, key: u64) -> Option<V> {
        if key == EMPTY {
            return self.max_key.take();
        }
        let (i, found) = self.find(key);
        if found {
            self.len -= 1;
            let hash = self.hash;
            let bits = self.bits;
            return Some(remove_at(&mut self.keys, &mut self.values, i, |k| {
                home(hash, bits, k)
            }));
        }
        let i = self.find_old(key)?.1;
        let hash = self.hash;
        match &mut self.growth {
            Some(Growth::Moving(old)) => Some(old.remove_at(hash, i)),
            _ => None,
        }
    }

    /// A growth begins: the next table, twice the size, allocated (not
    /// yet filled, nor advised onto huge pages: a first write into a
    /// huge page waits while the kernel finds or makes one, 4 ms here,
    /// where an ordinary page costs a microsecond; it is advised once
    /// filled).
    #[cold]
    fn start_growth(&mut self) {
        let slots = self.keys.len() * 2;
        self.growth = Some(Growth::Filling {
            keys: Vec::with_capacity(slots),
            values: Vec::with_capacity(slots),
            slots,
            notes: Vec::with_capacity(slots / 8),
        });
    }

    /// One insert's share of the growth under way: [`FILL_STEP`] slots of
    /// the next table filled (which, once full, becomes the map's table),
    /// up to [`MOVE_STEP`] entries moved out of the old one, or
    /// [`FREE_STEP`] of its emptied slots released.
    fn grow_step(&mut self) {
        self.advance(FILL_STEP, MOVE_STEP, SCAN_STEP, FREE_STEP);
    }

    /// Ends a growth under way at once (a rekey, or the 70% safety net).
    #[cold]
    fn finish_growth(&mut self) {
        while self.growth.is_some() {
            self.advance(usize::MAX, usize::MAX, usize::MAX, usize::MAX);
        }
    }

    /// The growth's next step: `fill` slots filled, or up to `moves`
    /// entries moved (looking at up to `scan` slots), or `free` slots
    /// released.
    fn advance(&mut self, fill: usize, moves: usize, scan: usize, free: usize) {
        match self.growth.take() {
            Some(Growth::Filling {
                mut keys,
                mut values,
                slots,
                mut notes,
            }) => {
                let upto = keys.len().saturating_add(fill).min(slots);
                #[cfg(test)]
                crate::test_work::add((upto - keys.len()) as u64);
                keys.resize(upto, EMPTY);
                values.resize(upto, self.vacant);
                // The notes so far copied as many (they only grow
                // meanwhile: a clear ends the growth).
                let copied = notes.len();
                let more = (copied.saturating_add(fill)).min(self.inserted.len());
                notes.extend_from_slice(&self.inserted[copied..more]);
                self.growth = Some(if upto < slots {
                    Growth::Filling {
                        keys,
                        values,
                        slots,
                        notes,
                    }
                } else {
                    self.swap_in(keys, values, notes)
                });
            }
            Some(Growth::Moving(mut old)) => {
                self.move_from(&mut old, moves, scan);
                self.growth = Some(if old.cursor < old.keys.len() {
                    Growth::Moving(old)
                } else {
                    Growth::Freeing {
                        keys: old.keys,
                        values: old.values,
                        notes: old.notes,
                    }
                });
            }
            Some(Growth::Freeing {
                mut keys,
                mut values,
                mut notes,
            }) => {
                for v in [&mut keys, &mut notes] {
                    v.truncate(v.len().saturating_sub(free));
                    v.shrink_to_fit();
                }
                values.truncate(values.len().saturating_sub(free));
                values.shrink_to_fit();
                if !(keys.is_empty() && notes.is_empty()) {
                    self.growth = Some(Growth::Freeing {
                        keys,
                        values,
                        notes,
                    });
                }
            }
            None => {}
        }
    }

    /// The filled next table becomes the map's, with the notes copied
    /// (the few left copied now); the one it replaces, with the notes it
    /// had, is returned to be moved out of (and released in steps: one
    /// release of millions of notes would be a pause of its own).
    fn swap_in(
        &mut self,
        mut keys: Vec<u64>,
        mut values: Vec<V>,
        mut notes: Vec<u64>,
    ) -> Growth<V> {
        advise_huge_written(&mut keys);
        advise_huge_written(&mut values);
        notes.extend_from_slice(&self.inserted[notes.len()..]);
        let n = keys.len();
        let old = Old {
            keys: std::mem::replace(&mut self.keys, keys),
            values: std::mem::replace(&mut self.values, values),
            bits: self.bits,
            len: self.len,
            cursor: 0,
            notes: std::mem::replace(&mut self.inserted, notes),
        };
        self.mask = n - 1;
        self.bits = n.trailing_zeros();
        self.len = 0;
        Growth::Moving(old)
    }

    /// Moves up to `entries` entries of `old`, looking at up to `slots` of
    /// its slots, into the map's table.
    fn move_from(&mut self, old: &mut Old<V>, entries: usize, slots: usize) {
        let (mut moved, mut looked) = (0, 0);
        while moved < entries && looked < slots && old.cursor < old.keys.len() {
            let k = old.keys[old.cursor];
            looked += 1;
            #[cfg(test)]
            crate::test_work::add(1);
            if k == EMPTY {
                old.cursor += 1;
                continue;
            }
            // Removed by backward shift, as any removal: a later member
            // of its probe run may move into the slot, looked at again.
            let v = old.remove_at(self.hash, old.cursor);
            let (i, _) = self.find(k);
            self.keys[i] = k;
            self.values[i] = v;
            self.len += 1;
            moved += 1;
        }
    }

    /// Moves every entry into a table of `n` slots hashed with `key`.
    #[cold]
    fn rehash(&mut self, n: usize, key: HashKey) {
        debug_assert!(self.growth.is_none());
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
    /// when there were more than the notes hold, the whole table. A
    /// growth under way ends: the table it was replacing, or the one it
    /// was filling, is freed.
    pub fn clear(&mut self) {
        self.growth = None;
        if self.uncounted {
            #[cfg(test)]
            crate::test_work::add(self.keys.len() as u64);
            self.keys.fill(EMPTY);
        } else {
            // A live key's slot lies in the run from its home to the first
            // empty slot; emptying each noted key's run whole empties it
            // (a run emptied earlier ends at an empty slot only where the
            // original run did).
            for &k in &self.inserted {
                let mut i = (self.hash.hash(k) >> (64 - self.bits)) as usize;
                while self.keys[i] != EMPTY {
                    #[cfg(test)]
                    crate::test_work::add(1);
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
        let old = match &self.growth {
            Some(Growth::Moving(old)) => old.len,
            _ => 0,
        };
        self.len + old + self.max_key.is_some() as usize
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of one slot (key and value), for memory accounting.
    pub const SLOT_BYTES: usize = 8 + std::mem::size_of::<V>();
}

impl<V: Copy> Old<V> {
    #[inline]
    fn home(&self, hash: HashKey, key: u64) -> usize {
        home(hash, self.bits, key)
    }

    /// Removes the entry at slot `i`; returns its value.
    fn remove_at(&mut self, hash: HashKey, i: usize) -> V {
        self.len -= 1;
        let bits = self.bits;
        remove_at(&mut self.keys, &mut self.values, i, |k| home(hash, bits, k))
    }
}

/// The home slot of `key` in a table of 2^`bits` slots hashed with `hash`.
#[inline]
fn home(hash: HashKey, bits: u32, key: u64) -> usize {
    (hash.hash(key) >> (64 - bits)) as usize
}

/// Where `key` is in `keys` (a power of two long), probing from its
/// `home`, or the empty slot where it would go.
#[inline]
fn find(keys: &[u64], home: usize, key: u64) -> (usize, bool) {
    let mask = keys.len() - 1;
    let mut i = home;
    loop {
        #[cfg(test)]
        crate::test_work::add(1);
        let k = keys[i];
        if k == key {
            return (i, true);
        }
        if k == EMPTY {
            return (i, false);
        }
        i = (i + 1) & mask;
    }
}

/// Empties slot `i` of a table by backward shift (later members of its
/// probe run move into the hole when it lies between their home and where
/// they sit); returns the value it held.
#[inline]
fn remove_at<V: Copy>(
    keys: &mut [u64],
    values: &mut [V],
    mut i: usize,
    home: impl Fn(u64) -> usize,
) -> V {
    let mask = keys.len() - 1;
    let removed = values[i];
    let mut j = i;
    loop {
        j = (j + 1) & mask;
        let k = keys[j];
        if k == EMPTY {
            break;
        }
        let h = home(k);
        if (j.wrapping_sub(h) & mask) >= (j.wrapping_sub(i) & mask) {
            keys[i] = k;
            values[i] = values[j];
            i = j;
        }
    }
    keys[i] = EMPTY;
    removed
}

/// A map from `u64` keys that mostly rise, such as a day's order
/// references, to small `Copy` values: the keys of a sliding window of
/// `window` consecutive keys live in a ring indexed by the key itself (one
/// indexed access to add, find or remove), every other key in a [`U64Map`]
/// (the overflow).
///
/// A key above the window slides it up to hold that key (in steps of 64
/// keys, so a slide comes once per 64 rising keys); live entries
/// that fall below it move to the overflow. The 64-slot chunks that hold
/// entries are marked in a two-level bitmap (a bit a chunk, and a bit a
/// word of those), so a slide finds them without looking at the empty
/// ones: it costs the chunks with entries it leaves (64 slots each) and a
/// few words, however far a key jumps and wherever the live entries sit
/// (one at the top of the window, with a key a window ahead each time, made
/// every slide walk 16,384 empty chunks). A key below the window goes to
/// the overflow. The ring is allocated once (`window` ×
/// `size_of::<Option<V>>()` bytes, and a bit for each of its chunks); the
/// overflow grows as a [`U64Map`] does.
#[derive(Debug, Clone)]
pub struct WindowMap<V: Copy> {
    /// Kept a `Vec`: shrinking it to a boxed slice would reallocate it
    /// off its huge pages.
    ring: Vec<Option<V>>,
    /// Live entries per 64 ring slots ([`CHUNK`]).
    chunks: Box<[u8]>,
    /// A bit per chunk, set while it holds entries.
    live: Box<[u64]>,
    /// A bit per word of `live`, set while that word is not 0.
    summary: Box<[u64]>,
    /// `ring.len() - 1` (a power of two minus one).
    mask: u64,
    /// The lowest key of the window: it holds `base..base + ring.len()`.
    base: u64,
    /// Live entries in the ring.
    in_ring: usize,
    overflow: U64Map<V>,
    /// Counts, words and slots a slide looked at (tests).
    #[cfg(test)]
    looks: usize,
}

/// Ring slots per live count in [`WindowMap::chunks`].
const CHUNK: usize = 64;

impl<V: Copy> WindowMap<V> {
    /// A window of `window` keys (rounded up to a power of two, at least
    /// 64) starting at 0, and room for `overflow` entries outside it
    /// before the overflow grows; `vacant` fills its unused slots.
    pub fn new(window: usize, overflow: usize, vacant: V) -> WindowMap<V> {
        let n = window.max(CHUNK).next_power_of_two();
        let words = (n / CHUNK).div_ceil(64);
        WindowMap {
            ring: huge_vec(n, None),
            chunks: vec![0; n / CHUNK].into_boxed_slice(),
            live: vec![0; words].into_boxed_slice(),
            summary: vec![0; words.div_ceil(64)].into_boxed_slice(),
            mask: n as u64 - 1,
            base: 0,
            in_ring: 0,
            overflow: U64Map::with_capacity(overflow, vacant),
            #[cfg(test)]
            looks: 0,
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
            let c = i / CHUNK;
            self.chunks[c] += 1;
            if self.chunks[c] == 1 {
                self.mark(c);
            }
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
            let c = i / CHUNK;
            self.chunks[c] -= 1;
            if self.chunks[c] == 0 {
                self.unmark(c);
            }
        }
        old
    }

    /// Chunk `c` holds entries now.
    #[inline]
    fn mark(&mut self, c: usize) {
        let w = c / 64;
        self.live[w] |= 1 << (c % 64);
        self.summary[w / 64] |= 1 << (w % 64);
    }

    /// Chunk `c` holds none now.
    #[inline]
    fn unmark(&mut self, c: usize) {
        let w = c / 64;
        self.live[w] &= !(1 << (c % 64));
        if self.live[w] == 0 {
            self.summary[w / 64] &= !(1 << (w % 64));
        }
    }

    /// The first chunk from `c` on (not wrapping round the ring) that
    /// holds entries: the rest of `c`'s word, then the summary's words.
    fn next_live(&mut self, c: usize) -> Option<usize> {
        let w = c / 64;
        let bits = self.live.get(w)? & (!0 << (c % 64));
        self.look(1);
        if bits != 0 {
            return Some(w * 64 + bits.trailing_zeros() as usize);
        }
        let w = w + 1;
        let mut s = w / 64;
        let mut bits = self.summary.get(s)? & (!0 << (w % 64));
        loop {
            self.look(1);
            if bits != 0 {
                let w = s * 64 + bits.trailing_zeros() as usize;
                self.look(1);
                return Some(w * 64 + self.live[w].trailing_zeros() as usize);
            }
            s += 1;
            bits = *self.summary.get(s)?;
        }
    }

    /// Counts `n` looks (tests).
    #[inline(always)]
    fn look(&mut self, _n: usize) {
        #[cfg(test)]
        {
            self.looks += _n;
        }
    }

    /// Empties chunk `c`, handing each entry to `f` with its key (the
    /// window's key for the slot).
    fn empty_chunk(&mut self, c: usize, mut f: impl FnMut(&mut U64Map<V>, u64, V)) {
        self.look(CHUNK);
        let first = (c * CHUNK) as u64;
        let key = self.base + (first.wrapping_sub(self.base) & self.mask);
        for j in 0..CHUNK {
            if let Some(v) = self.ring[c * CHUNK + j].take() {
                f(&mut self.overflow, key + j as u64, v);
            }
        }
        self.in_ring -= usize::from(std::mem::take(&mut self.chunks[c]));
        self.unmark(c);
    }

    /// Moves the entries of chunks `a..b` to the overflow (they are
    /// leaving the window), the chunks found by the bitmap.
    fn evict(&mut self, a: usize, b: usize) {
        let mut c = a;
        while self.in_ring > 0 {
            let Some(l) = self.next_live(c).filter(|&l| l < b) else {
                break;
            };
            self.empty_chunk(l, |overflow, k, v| {
                overflow.insert(k, v);
            });
            c = l + 1;
        }
    }

    /// Moves the window up, a whole number of 64-slot chunks, so that it
    /// holds `key` (above it), moving the live entries it leaves behind to
    /// the overflow.
    #[cold]
    fn slide(&mut self, key: u64) {
        // No overflow: `key - mask <= u64::MAX - mask` and `mask >= 63`.
        let base = (key - self.mask).next_multiple_of(CHUNK as u64);
        // Keys base..new leave the window; past a whole window, all do.
        // Both bases are whole chunks: the chunks leaving are `count`
        // from the old base's, round the ring (two runs at most).
        let leaving = (base - self.base).min(self.mask + 1);
        let n = self.chunks.len();
        let first = self.slot(self.base) / CHUNK;
        let count = (leaving / CHUNK as u64) as usize;
        self.evict(first, (first + count).min(n));
        if first + count > n {
            self.evict(0, first + count - n);
        }
        self.base = base;
    }

    /// Removes every entry, keeping the memory; the window starts at 0
    /// again. Empties only the ring's chunks that hold entries (found by
    /// the bitmap), and stops once all are: the cost follows what was
    /// inserted, not the ring's 16 MiB.
    pub fn clear(&mut self) {
        let mut c = 0;
        while self.in_ring > 0 {
            let Some(l) = self.next_live(c) else {
                break;
            };
            // The chunks the scan passed over, and the one emptied.
            #[cfg(test)]
            crate::test_work::add((l + 1 - c) as u64);
            self.empty_chunk(l, |_, _, _| {});
            c = l + 1;
        }
        debug_assert_eq!(self.in_ring, 0);
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

    /// Each map draws its own hash key (order references found colliding
    /// under one feed's are no worse than any under another's).
    #[test]
    fn each_map_draws_its_own_key() {
        let map = || U64Map::with_capacity(16, 0u64);
        assert_ne!(map().hash, map().hash);
    }

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

    /// One live entry at the top of the window while keys jump a whole
    /// window ahead, again and again (each slide leaves the whole window:
    /// 16,384 chunks of 64 at the order store's size): a slide looks at a
    /// few words of occupancy and the chunks that hold entries, not at
    /// every chunk it leaves.
    #[test]
    fn a_far_slide_past_one_entry_at_the_top_looks_at_few_chunks() {
        let n = 1u64 << 20;
        let mut m = WindowMap::new(n as usize, 4_096, 0u32);
        let mut top = n - 1;
        m.insert(top, 0);
        for round in 1..=1_000u32 {
            let looks = m.looks;
            top += n;
            m.insert(top, round);
            assert_eq!((m.base, m.in_ring), (top + 1 - n, 1));
            assert!(m.looks - looks <= 128, "{} looks", m.looks - looks);
        }
        assert_eq!(m.overflow.len(), 1_000);
        for round in 0..=1_000u32 {
            assert_eq!(m.get(n - 1 + u64::from(round) * n), Some(round));
        }
    }

    /// A window of several summary words (2^19 keys: 8,192 chunks), with
    /// entries scattered through it and slides of every length, wrapping
    /// round the ring or not: it answers as a map does, and clears whole.
    #[test]
    fn slides_through_a_large_window_keep_every_entry() {
        let n = 1u64 << 19;
        let mut m = WindowMap::new(n as usize, 1 << 14, 0u64);
        let mut model = HashMap::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut top = n - 1;
        for round in 0..3_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // An entry anywhere in the window, or a jump: short, most of a
            // window, or past it.
            let k = match round % 4 {
                0 => top + 1 + x % 4_096,
                1 => top + (x % n),
                2 => top + n + x % 1_000,
                _ => top.saturating_sub(x % n),
            };
            top = top.max(k);
            assert_eq!(m.insert(k, round), model.insert(k, round));
            if x.is_multiple_of(3) {
                let gone = top.saturating_sub(x % (2 * n));
                assert_eq!(m.remove(gone), model.remove(&gone));
            }
        }
        assert_eq!(m.len(), model.len());
        for (k, v) in &model {
            assert_eq!(m.get(*k), Some(*v), "{k}");
        }
        m.clear();
        assert!(m.is_empty() && m.ring.iter().all(Option::is_none));
        assert!(m.live.iter().chain(m.summary.iter()).all(|&w| w == 0));
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
        let mut m = U64Map::with_key(600, 0u32, key);
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

    /// Whether `m` is growing, and how far: filling the next table, or
    /// moving out of the old one.
    fn phase<V: Copy>(m: &U64Map<V>) -> &'static str {
        match &m.growth {
            None => "none",
            Some(Growth::Filling { .. }) => "filling",
            Some(Growth::Moving(_)) => "moving",
            Some(Growth::Freeing { .. }) => "freeing",
        }
    }

    /// A growing map's old table: every slot below the cursor empty, and
    /// each entry found from its home.
    fn check_old<V: Copy>(m: &U64Map<V>) {
        if let Some(Growth::Moving(old)) = &m.growth {
            assert!(old.keys[..old.cursor].iter().all(|&k| k == EMPTY));
            let live = old.keys.iter().filter(|&&k| k != EMPTY).count();
            assert_eq!(live, old.len);
            for &k in old.keys.iter().filter(|&&k| k != EMPTY) {
                assert!(find(&old.keys, old.home(m.hash, k), k).1, "{k} lost");
            }
        }
    }

    /// A map grows through tables of 2^15 to 2^19 slots a few slots at
    /// each insert: no insert takes more than a few hundred steps (the
    /// probes, slots filled and slots looked at), where one rehash of the
    /// whole table took one for each entry (tens of thousands here), and
    /// every entry stays.
    #[test]
    fn a_growth_costs_each_insert_a_few_steps() {
        let mut m = U64Map::with_capacity(1 << 14, 0u64);
        let key = |k: u64| k.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 3;
        let (mut worst, mut phases) = (0, std::collections::BTreeSet::new());
        for k in 0..300_000u64 {
            let (steps, old) = crate::test_work::during(|| m.insert(key(k), k));
            assert_eq!(old, None);
            worst = worst.max(steps);
            phases.insert(phase(&m));
        }
        assert!(worst <= 300, "an insert took {worst} steps");
        assert_eq!(phases.len(), 4, "{phases:?}");
        assert_eq!(m.keys.len(), 1 << 19);
        assert_eq!(m.len(), 300_000);
        for k in 0..300_000u64 {
            assert_eq!(m.get(key(k)), Some(k));
        }
    }

    /// A map made with room for `n` entries takes `n` before any growth
    /// begins (it begins at 60% full).
    #[test]
    fn the_room_asked_for_comes_before_any_growth() {
        for n in [8, 600, 700, 1_000, 5_500] {
            let mut m = U64Map::with_capacity(n, 0u32);
            for k in 0..n as u64 {
                m.insert(k, 1);
            }
            assert_eq!(phase(&m), "none", "{n}");
        }
    }

    /// The clear's notes grow with the table, a growth in steps too: a
    /// clear after fewer inserts than an eighth of the grown table's slots
    /// empties their probe runs, not the whole table.
    #[test]
    fn a_grown_table_keeps_notes_for_an_eighth_of_its_slots() {
        let mut m = U64Map::with_capacity(64, 0u32);
        assert_eq!(m.keys.len(), 128);
        let mut k = 0u64;
        while m.keys.len() < 1024 || phase(&m) != "none" {
            k += 1;
            m.insert(k, 1);
            // The notes the old table had go with it, released in steps.
            if let Some(Growth::Moving(old)) = &m.growth {
                assert_eq!(old.notes.capacity(), old.keys.len() / 8);
            }
        }
        m.clear();
        for j in 0..100u64 {
            m.insert(j << 32, 1);
        }
        let (steps, ()) = crate::test_work::during(|| m.clear());
        assert!(steps < 300, "{steps} steps to clear 100 entries");
        assert!(m.is_empty() && m.keys.iter().all(|&k| k == EMPTY));
    }

    /// The safety net: a rekey (a probe run too long) in the middle of a
    /// growth finishes it first, and keeps every entry.
    #[test]
    fn a_rekey_during_a_growth_finishes_it_first() {
        let mut m = U64Map::with_capacity(600, 0u32);
        let mut k = 0u64;
        while phase(&m) != "moving" {
            k += 1;
            m.insert(k, k as u32);
        }
        m.rekey();
        assert_eq!(phase(&m), "none");
        assert_eq!(m.len(), k as usize);
        for j in 1..=k {
            assert_eq!(m.get(j), Some(j as u32));
        }
    }

    /// What [`step`] asks of a map.
    trait TestMap {
        fn insert(&mut self, k: u64, v: u16) -> Option<u16>;
        fn remove(&mut self, k: u64) -> Option<u16>;
        fn get_mut(&mut self, k: u64) -> Option<&mut u16>;
        fn clear(&mut self);
        fn len(&self) -> usize;
    }

    macro_rules! test_map {
        ($t:ty) => {
            impl TestMap for $t {
                fn insert(&mut self, k: u64, v: u16) -> Option<u16> {
                    <$t>::insert(self, k, v)
                }
                fn remove(&mut self, k: u64) -> Option<u16> {
                    <$t>::remove(self, k)
                }
                fn get_mut(&mut self, k: u64) -> Option<&mut u16> {
                    <$t>::get_mut(self, k)
                }
                fn clear(&mut self) {
                    <$t>::clear(self)
                }
                fn len(&self) -> usize {
                    <$t>::len(self)
                }
            }
        };
    }
    test_map!(U64Map<u16>);
    test_map!(WindowMap<u16>);

    /// One operation on `m` and on std's map alike, the answers and the
    /// lengths compared: 0 inserts, 1 removes, any other now and then
    /// (`v` a multiple of 32) clears, as a new session does, or else
    /// changes the value in place.
    fn step<M: TestMap>(
        m: &mut M,
        model: &mut HashMap<u64, u16>,
        op: u8,
        k: u64,
        v: u16,
    ) -> Result<(), TestCaseError> {
        match op {
            0 => prop_assert_eq!(m.insert(k, v), model.insert(k, v)),
            1 => prop_assert_eq!(m.remove(k), model.remove(&k)),
            _ if v.is_multiple_of(32) => {
                m.clear();
                model.clear();
            }
            _ => {
                if let Some(x) = m.get_mut(k) {
                    *x = x.wrapping_add(1);
                }
                if let Some(x) = model.get_mut(&k) {
                    *x = x.wrapping_add(1);
                }
            }
        }
        prop_assert_eq!(m.len(), model.len());
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Against std's map while a map of 1,024 slots grows: inserts,
        /// removals, changes and now and then a clear, on keys it held
        /// before the growth (in the old table until moved) and new ones.
        #[test]
        fn a_growing_map_matches_a_hash_map(
            seed in any::<u64>(),
            ops in proptest::collection::vec((0u8..3, 0u64..1_400, any::<u16>()), 0..300),
        ) {
            let mut m = U64Map::with_key(600, 0u16, HashKey::fixed(seed));
            let mut model = HashMap::new();
            // 60% full: the next insert begins the growth.
            for k in 0..615u64 {
                m.insert(k << 8, 1);
                model.insert(k << 8, 1);
            }
            prop_assert_eq!(phase(&m), "filling");
            for (n, (op, k, v)) in ops.into_iter().enumerate() {
                let k = k << 8;
                if n % 16 == 0 {
                    check_old(&m);
                }
                step(&mut m, &mut model, op, k, v)?;
                prop_assert_eq!(m.get(k), model.get(&k).copied());
            }
            check_old(&m);
            for k in 0..1_400u64 {
                prop_assert_eq!(m.get(k << 8), model.get(&(k << 8)).copied());
            }
        }

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
                step(&mut m, &mut model, op, k, v)?;
                prop_assert_eq!(m.in_ring, m.ring.iter().flatten().count());
                for (c, &count) in m.chunks.iter().enumerate() {
                    let live = m.ring[c * CHUNK..(c + 1) * CHUNK].iter().flatten().count();
                    prop_assert_eq!(usize::from(count), live);
                    prop_assert_eq!(m.live[c / 64] >> (c % 64) & 1 == 1, live > 0);
                }
                for (w, &word) in m.live.iter().enumerate() {
                    prop_assert_eq!(m.summary[w / 64] >> (w % 64) & 1 == 1, word != 0);
                }
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
                step(&mut m, &mut model, op, k, v)?;
                for probe in (0..64u64).map(|k| if k == 63 { u64::MAX } else { k << 20 }) {
                    prop_assert_eq!(m.get(probe), model.get(&probe).copied());
                }
            }
        }
    }
}
