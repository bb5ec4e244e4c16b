//! The sequence numbers received into a gap, in any order, read back
//! ascending: what a protocol's sequencing keeps of a gap being filled.
//! The numbers come off the wire, and a hostile sender may fill a huge gap
//! in the worst order for one sorted vector (from its top down, every
//! insert at the front): here any order costs O(√n) an insert,
//! amortised. What lies below the sequence a stream applies next is
//! dropped as it goes ([`Filled::remove_below`]), so a gap kept open for
//! long while the stream goes on through it keeps only what is held.

/// The sequences received into a gap, in any order, read back ascending.
///
/// Line B and recovery answers fill a gap mostly in ascending order, which
/// is a push. Fills in any other order (answers to requests in flight
/// together, or a hostile sender filling a huge gap from its top down) go
/// to a short sorted `recent` list, merged into `main` once it holds more
/// than about √`main`: an insert costs O(√n) amortised (the one that
/// merges, O(n), comes once every 2√n or so), not the O(n) each of one
/// sorted vector, and both vectors are reused from gap to gap.
#[derive(Debug, Clone, Default)]
pub struct Filled {
    /// Ascending; `main[..dead]` are removed and never read.
    main: Vec<u64>,
    /// Leading elements of `main` removed by [`Filled::remove_below`]:
    /// at most half of it (beyond, it is compacted).
    dead: usize,
    /// Ascending; merged into `main` when longer than [`Filled::recent_max`].
    recent: Vec<u64>,
}

impl Filled {
    /// Adds `q`, not present yet.
    #[inline]
    pub fn insert(&mut self, q: u64) {
        if self.recent.is_empty() && self.live().last().is_none_or(|&l| l < q) {
            self.main.push(q);
            return;
        }
        let at = self.recent.partition_point(|&f| f < q);
        self.recent.insert(at, q);
        if self.recent.len() > self.recent_max() {
            self.merge();
        }
    }

    /// `main` without its removed head.
    #[inline]
    fn live(&self) -> &[u64] {
        &self.main[self.dead..]
    }

    /// Drops `main`'s removed head: O(n).
    fn compact(&mut self) {
        self.main.drain(..self.dead);
        self.dead = 0;
    }

    /// The longest `recent` may grow: about √`main`, at least 64.
    fn recent_max(&self) -> usize {
        (self.live().len().isqrt() * 2).max(64)
    }

    /// Moves `recent` into `main`, from the back: O(n), in place.
    fn merge(&mut self) {
        self.compact();
        let (m, r) = (self.main.len(), self.recent.len());
        self.main.resize(m + r, 0);
        let (mut i, mut j) = (m, r);
        for k in (0..m + r).rev() {
            if j == 0 {
                break;
            }
            if i > 0 && self.main[i - 1] > self.recent[j - 1] {
                self.main[k] = self.main[i - 1];
                i -= 1;
            } else {
                self.main[k] = self.recent[j - 1];
                j -= 1;
            }
        }
        self.recent.clear();
    }

    /// Every sequence, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.runs().flat_map(|(lo, hi)| lo..hi)
    }

    /// The runs `[lo, hi)` of consecutive sequences, ascending and
    /// disjoint (adjacent runs joined). A run of `main` is crossed in
    /// O(log n) (a binary search for where it stops), so walking k runs
    /// costs O(k log n + √n), not O(n).
    pub fn runs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut i = 0;
        let live = self.live();
        let mut main = std::iter::from_fn(move || {
            let rest = live.get(i..).filter(|r| !r.is_empty())?;
            // `rest[k] - k` is non-decreasing (sequences strictly rise)
            // and equals `rest[0]` exactly while the run goes on.
            let (mut lo, mut hi) = (1, rest.len());
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if rest[mid] - mid as u64 == rest[0] {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            i += lo;
            Some((rest[0], rest[lo - 1].saturating_add(1)))
        })
        .peekable();
        let mut recent = self
            .recent
            .iter()
            .map(|&q| (q, q.saturating_add(1)))
            .peekable();
        let mut next = move || match (main.peek(), recent.peek()) {
            (Some(&a), Some(&b)) if b.0 < a.0 => recent.next(),
            (Some(_), _) => main.next(),
            (None, _) => recent.next(),
        };
        let mut pending = next();
        std::iter::from_fn(move || {
            let (lo, mut hi) = pending?;
            pending = next();
            while let Some((_, h)) = pending.filter(|&(l, _)| l <= hi) {
                hi = hi.max(h);
                pending = next();
            }
            Some((lo, hi))
        })
    }

    /// Sequences held.
    #[inline]
    pub fn len(&self) -> usize {
        self.live().len() + self.recent.len()
    }

    /// True when none is.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.live().is_empty() && self.recent.is_empty()
    }

    /// `q` is held. O(log n).
    #[inline]
    pub fn contains(&self, q: u64) -> bool {
        self.live().binary_search(&q).is_ok() || self.recent.binary_search(&q).is_ok()
    }

    /// Sequences held in `[x, y]`. O(log n).
    pub fn count_in(&self, x: u64, y: u64) -> usize {
        let count = |v: &[u64]| v.partition_point(|&q| q <= y) - v.partition_point(|&q| q < x);
        count(self.live()) + count(&self.recent)
    }

    /// The first sequence from `lo` not held (`lo` itself if it is not):
    /// the end of the run holding `lo`. Walks the runs below it, each in
    /// O(log n): from the lowest sequence a gap can hold, one.
    pub fn first_gap_from(&self, lo: u64) -> u64 {
        match self.runs().find(|&(_, b)| b > lo) {
            Some((a, b)) if a <= lo => b,
            _ => lo,
        }
    }

    /// Keeps only the sequences above `s`.
    pub fn retain_above(&mut self, s: u64) {
        match s.checked_add(1) {
            Some(next) => self.remove_below(next),
            None => self.clear(),
        }
    }

    /// Drops the sequences below `s` (those a stream has applied, `s` its
    /// next). Those of `main`, a prefix, are only counted off (a binary
    /// search), and the vector compacted once they are more than half of
    /// it: O(log n) a call, plus O(1) a sequence dropped, amortised. Those
    /// of `recent` are moved out at once: O(√n).
    pub fn remove_below(&mut self, s: u64) {
        self.dead += self.live().partition_point(|&q| q < s);
        if 2 * self.dead > self.main.len() {
            self.compact();
        }
        let k = self.recent.partition_point(|&q| q < s);
        if k > 0 {
            self.recent.drain(..k);
        }
    }

    /// Elements its vectors can hold without reallocating.
    pub fn capacity(&self) -> usize {
        self.main.capacity() + self.recent.capacity()
    }

    /// Empties it, keeping its capacity.
    pub fn clear(&mut self) {
        self.main.clear();
        self.dead = 0;
        self.recent.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Any order of inserts reads back ascending, merged or not.
        #[test]
        fn filled_reads_back_ascending(
            qs in proptest::collection::btree_set(0u64..5_000, 0..3_000),
            seed in proptest::prelude::any::<u64>(),
        ) {
            let mut order: Vec<u64> = qs.iter().copied().collect();
            // A deterministic shuffle, runs of ascending and descending.
            let mut x = seed | 1;
            for i in (1..order.len()).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if x % 4 != 0 {
                    order.swap(i, (x % (i as u64 + 1)) as usize);
                }
            }
            let mut f = Filled::default();
            for &q in &order {
                f.insert(q);
            }
            proptest::prop_assert!(f.iter().eq(qs.iter().copied()));
            proptest::prop_assert!(f.recent.len() <= f.recent_max());
            // Its runs are the set's maximal runs of consecutive sequences.
            let mut runs: Vec<(u64, u64)> = Vec::new();
            for &q in &qs {
                match runs.last_mut() {
                    Some(r) if r.1 == q => r.1 = q + 1,
                    _ => runs.push((q, q + 1)),
                }
            }
            proptest::prop_assert_eq!(f.runs().collect::<Vec<_>>(), runs);
        }
    }

    /// A huge gap filled from its top down, one sequence at a time (the
    /// worst order for one sorted vector: every insert at the front), stays
    /// in order, with `recent` bounded by about √n.
    #[test]
    fn a_gap_filled_from_the_top_down_stays_in_order() {
        let mut f = Filled::default();
        let n = 200_000u64;
        for q in (0..n).rev() {
            f.insert(q);
            assert!(f.recent.len() <= f.recent_max());
        }
        assert!(f.iter().eq(0..n));
        assert_eq!(f.runs().collect::<Vec<_>>(), [(0, n)]);
        f.clear();
        assert_eq!(f.iter().count(), 0);
    }

    /// What a sequencing asks of it, against a set: membership, counts
    /// in a range, the end of the run from a number, keeping what is
    /// above one, whatever the order of the inserts.
    #[test]
    fn it_answers_as_a_set_does() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut f = Filled::default();
        let mut set = std::collections::BTreeSet::new();
        for _ in 0..3_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let q = 100 + x % 2_000;
            if set.insert(q) {
                f.insert(q);
            }
            let (a, b) = (100 + (x >> 20) % 2_000, 100 + (x >> 40) % 2_000);
            let (a, b) = (a.min(b), a.max(b));
            assert_eq!(f.count_in(a, b), set.range(a..=b).count());
            assert_eq!(f.contains(a), set.contains(&a));
            let want = (a..).find(|q| !set.contains(q)).unwrap();
            assert_eq!(f.first_gap_from(a), want, "from {a}");
            assert_eq!(f.len(), set.len());
        }
        f.retain_above(1_000);
        set.retain(|&q| q > 1_000);
        assert!(f.iter().eq(set.iter().copied()));
    }

    /// Sequences dropped from below as a stream applies them, among
    /// inserts in any order: it still answers as a set does, and what it
    /// keeps of `main` removed is at most half of it.
    #[test]
    fn removing_from_below_answers_as_a_set_does() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut f = Filled::default();
        let mut set = std::collections::BTreeSet::new();
        let mut next = 0;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let q = next + x % 300;
            if set.insert(q) {
                f.insert(q);
            }
            if x.is_multiple_of(5) {
                next += (x >> 8) % 40;
                f.remove_below(next);
                set.retain(|&s| s >= next);
            }
            assert!(2 * f.dead <= f.main.len());
            assert_eq!(f.len(), set.len());
            let a = next + (x >> 20) % 300;
            assert_eq!(f.contains(a), set.contains(&a));
            assert_eq!(f.count_in(next, a), set.range(next..=a).count());
        }
        assert!(f.iter().eq(set.iter().copied()));
        f.remove_below(u64::MAX);
        assert!(f.is_empty() && f.main.is_empty());
    }
}
