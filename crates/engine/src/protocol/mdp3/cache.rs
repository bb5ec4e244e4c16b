//! One instrument's cache: the entries waiting for a hole in its RptSeq
//! to close, read back ascending by RptSeq.
//!
//! A venue sends an instrument's entries in RptSeq order, so while a hole
//! is open each entry cached is above the last: a push onto `run`, whose
//! buffer is reused from hole to hole (no allocation after warm-up), and
//! the entries a closing hole lets apply leave from its front (a head
//! index, compacted when half the buffer is behind it). The values come
//! off the wire, though, and a sender may choose the worst order for one
//! sorted vector: from the top down (every insert at its front), or every
//! other value (each applied one unblocking one at the front). An entry
//! below the run's last goes to `rest`, a B-tree map: O(log n) whatever
//! the order. It allocates its nodes as it grows and frees them as it
//! empties, so entries out of RptSeq order (lines delivering a channel's
//! packets out of order, or a hostile sender) allocate; a venue's entries
//! in order never reach it.
//!
//! An instrument that never cached holds only an empty pointer (8 bytes
//! of its entry, which an entry applied reads); the rest is allocated
//! the first time it caches, and kept, with room for [`KEPT`] entries once
//! it empties: `max_cached` bounds the entries held at once, so the room
//! a long hole once needed is given back, or a sender could fill the
//! memory instrument by instrument.

use std::collections::BTreeMap;

/// Entries of room a cache's run keeps once emptied (more is given back).
pub const KEPT: usize = 32;

/// Entries by RptSeq, each value at most once.
#[derive(Debug, Clone)]
pub struct Cache<T> {
    /// `None` until the first entry cached.
    stores: Option<Box<Stores<T>>>,
}

/// What a cache holds.
#[derive(Debug, Clone)]
struct Stores<T> {
    /// Ascending; the entries are `run[head..]`.
    run: Vec<(u32, T)>,
    head: usize,
    /// Entries that came below the run's last.
    rest: BTreeMap<u32, T>,
}

impl<T> Default for Cache<T> {
    fn default() -> Cache<T> {
        Cache { stores: None }
    }
}

impl<T: Copy> Cache<T> {
    /// Empty, nothing allocated.
    pub fn new() -> Cache<T> {
        Cache::default()
    }

    /// Empty: nothing was ever cached, or nothing is now.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.stores.as_ref().is_none_or(|s| s.is_empty())
    }

    /// Entries cached.
    pub fn len(&self) -> usize {
        self.stores.as_ref().map_or(0, |s| s.len())
    }

    /// `r` is cached.
    pub fn contains(&self, r: u32) -> bool {
        self.stores.as_ref().is_some_and(|s| s.contains(r))
    }

    /// Caches `entry` of RptSeq `r` (not cached yet).
    pub fn insert(&mut self, r: u32, entry: T) {
        let s = self.stores.get_or_insert_with(|| {
            Box::new(Stores {
                run: Vec::new(),
                head: 0,
                rest: BTreeMap::new(),
            })
        });
        s.insert(r, entry);
    }

    /// The lowest RptSeq cached.
    pub fn first(&self) -> Option<u32> {
        self.stores.as_ref().and_then(|s| s.first())
    }

    /// Takes the entry of the lowest RptSeq.
    pub fn pop_first(&mut self) -> Option<(u32, T)> {
        self.stores.as_mut().and_then(|s| s.pop_first())
    }

    /// Entries cached with RptSeq in `lo..=hi`.
    pub fn count_in(&self, lo: u32, hi: u32) -> usize {
        self.stores.as_ref().map_or(0, |s| s.count_in(lo, hi))
    }

    /// Drops the entries of RptSeq at or below `r`; returns how many.
    pub fn drop_through(&mut self, r: u32) -> usize {
        self.stores.as_mut().map_or(0, |s| s.drop_through(r))
    }

    /// Every entry cached, in no particular order.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.stores.iter_mut().flat_map(|s| s.values_mut())
    }

    /// Drops every entry (the stores kept).
    pub fn clear(&mut self) {
        if let Some(s) = &mut self.stores {
            s.clear();
        }
    }
}

impl<T: Copy> Stores<T> {
    /// The run's entries.
    #[inline]
    fn live(&self) -> &[(u32, T)] {
        self.run.get(self.head..).unwrap_or_default()
    }

    fn len(&self) -> usize {
        self.live().len() + self.rest.len()
    }

    fn is_empty(&self) -> bool {
        self.head == self.run.len() && self.rest.is_empty()
    }

    fn contains(&self, r: u32) -> bool {
        self.live().binary_search_by_key(&r, |e| e.0).is_ok() || self.rest.contains_key(&r)
    }

    fn insert(&mut self, r: u32, entry: T) {
        debug_assert!(!self.contains(r));
        if self.live().last().is_none_or(|l| l.0 < r) {
            self.run.push((r, entry));
        } else {
            self.rest.insert(r, entry);
        }
    }

    fn first(&self) -> Option<u32> {
        let run = self.live().first().map(|e| e.0);
        let rest = self.rest.first_key_value().map(|(&q, _)| q);
        match (run, rest) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn pop_first(&mut self) -> Option<(u32, T)> {
        let run = self.live().first().copied();
        match (run, self.rest.first_key_value()) {
            (Some(e), rest) if rest.is_none_or(|(&q, _)| e.0 < q) => {
                self.head += 1;
                self.settle();
                Some(e)
            }
            _ => self.rest.pop_first(),
        }
    }

    /// Empties the run's buffer once everything is behind its head, or
    /// moves the entries down once half of it is: O(1) a pop, amortised.
    /// The room a long hole took is given back as the run drains (at most
    /// about eight times what it holds, and [`KEPT`]), not only once it
    /// empties: a hole closed with one entry left above the next would
    /// otherwise keep it all.
    fn settle(&mut self) {
        if self.head == self.run.len() {
            self.empty_run();
        } else if self.head > self.run.len() / 2 {
            self.run.drain(..self.head);
            self.head = 0;
            let len = self.run.len();
            if self.run.capacity() > 4 * len + KEPT {
                self.run.shrink_to(2 * len + KEPT);
            }
        }
    }

    fn count_in(&self, lo: u32, hi: u32) -> usize {
        if lo > hi {
            return 0;
        }
        let live = self.live();
        let run = live.partition_point(|e| e.0 <= hi) - live.partition_point(|e| e.0 < lo);
        run + self.rest.range(lo..=hi).count()
    }

    fn drop_through(&mut self, r: u32) -> usize {
        let below = self.live().partition_point(|e| e.0 <= r);
        self.head += below;
        self.settle();
        let mut dropped = below;
        let (Some((&lo, _)), Some((&hi, _))) =
            (self.rest.first_key_value(), self.rest.last_key_value())
        else {
            return dropped;
        };
        if hi <= r {
            dropped += self.rest.len();
            self.rest.clear();
        } else if lo <= r {
            // Some on either side (so `r + 1` does not overflow).
            let kept = self.rest.split_off(&(r + 1));
            dropped += self.rest.len();
            self.rest = kept;
        }
        dropped
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        let head = self.head;
        let run = self.run.iter_mut().skip(head).map(|(_, e)| e);
        run.chain(self.rest.values_mut())
    }

    fn clear(&mut self) {
        self.empty_run();
        self.rest.clear();
    }

    /// The run emptied, with room for [`KEPT`] entries at most.
    fn empty_run(&mut self) {
        self.run.clear();
        self.head = 0;
        if self.run.capacity() > KEPT {
            self.run.shrink_to(KEPT);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Entries of room a cache's run keeps once emptied (more is given back).
    pub const KEPT: usize = 32;

    /// Against a map, in random orders mixing runs up and down: the
    /// entries read back ascending, counts and drops as a map's.
    #[test]
    fn it_answers_as_a_map_does() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move |n: u32| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % u64::from(n)) as u32
        };
        for _ in 0..200 {
            let mut c = Cache::new();
            let mut m = BTreeMap::new();
            let mut next = rand(1000);
            for _ in 0..rand(300) {
                match rand(10) {
                    // Mostly ascending, as a venue sends.
                    0..=4 => next += 1 + rand(3),
                    5..=6 => next = rand(1500),
                    7 => {
                        let r = rand(1500);
                        let want = m.range(..=r).count();
                        m.retain(|&q, _| q > r);
                        assert_eq!(c.drop_through(r), want);
                    }
                    8 => assert_eq!(c.pop_first(), m.pop_first()),
                    _ => {
                        let (lo, hi) = (rand(1500), rand(1500));
                        let want = if lo <= hi {
                            m.range(lo..=hi).count()
                        } else {
                            0
                        };
                        assert_eq!(c.count_in(lo, hi), want);
                    }
                }
                assert_eq!(c.contains(next), m.contains_key(&next));
                if let std::collections::btree_map::Entry::Vacant(v) = m.entry(next) {
                    c.insert(next, u64::from(next) * 3);
                    v.insert(u64::from(next) * 3);
                }
                assert_eq!(c.len(), m.len());
                assert_eq!(c.is_empty(), m.is_empty());
                assert_eq!(c.first(), m.keys().next().copied());
            }
            for v in c.values_mut() {
                *v += 1;
            }
            let mut read = Vec::new();
            while let Some(e) = c.pop_first() {
                read.push(e);
            }
            let want: Vec<(u32, u64)> = m.into_iter().map(|(q, v)| (q, v + 1)).collect();
            assert_eq!(read, want);
            assert!(c.is_empty());
        }
    }

    /// Entries in order, then taken from the front, one at a time: the
    /// run's buffer is reused (up to [`KEPT`] entries), nothing goes to
    /// `rest`.
    #[test]
    fn entries_in_order_stay_in_the_run() {
        let mut c = Cache::new();
        let n = KEPT as u32;
        for round in 0..3u32 {
            for r in 0..n {
                c.insert(round * 1000 + r, r);
            }
            let s = c.stores.as_ref().unwrap();
            assert!(s.rest.is_empty());
            let room = s.run.as_ptr();
            for r in 0..n {
                assert_eq!(c.pop_first(), Some((round * 1000 + r, r)));
                let s = c.stores.as_ref().unwrap();
                assert!(s.run.len() - s.head <= (n - r) as usize);
            }
            let s = c.stores.as_ref().unwrap();
            assert!(c.is_empty() && s.run.capacity() >= KEPT);
            assert_eq!(s.run.as_ptr(), room, "the same buffer");
        }
    }

    /// Emptied (all applied, dropped by a snapshot, or cleared), a cache
    /// keeps room for [`KEPT`] entries, not for the most it ever held.
    #[test]
    fn an_emptied_cache_gives_back_what_a_long_hole_took() {
        let room = |c: &Cache<u64>| c.stores.as_ref().map_or(0, |s| s.run.capacity());
        let fill = |c: &mut Cache<u64>| {
            for r in 1..=10_000 {
                c.insert(r, u64::from(r));
            }
            assert!(room(c) >= 10_000);
        };
        let mut c = Cache::new();
        fill(&mut c);
        while c.pop_first().is_some() {}
        assert!(room(&c) <= KEPT, "{}", room(&c));
        fill(&mut c);
        assert_eq!(c.drop_through(10_000), 10_000);
        assert!(room(&c) <= KEPT, "{}", room(&c));
        fill(&mut c);
        c.clear();
        assert!(room(&c) <= KEPT, "{}", room(&c));
        // Closed with one entry left above the next hole: the room goes
        // back as the run drains, not only once it empties.
        fill(&mut c);
        c.insert(10_002, 0);
        for _ in 0..10_000 {
            c.pop_first();
        }
        assert!(room(&c) <= 4 + KEPT, "{}", room(&c));
        c.clear();
        fill(&mut c);
        c.insert(10_002, 0);
        assert_eq!(c.drop_through(10_000), 10_000);
        assert!(room(&c) <= 4 + KEPT, "{}", room(&c));
    }
}
