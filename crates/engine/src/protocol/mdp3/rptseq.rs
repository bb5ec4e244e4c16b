//! One instrument's RptSeq: which of its entries apply, in what order,
//! which wait in its cache for a hole to close, and what a snapshot
//! repairs.
//!
//! Every entry naming the instrument (book updates, trades, volume,
//! statistics, limits) carries the next RptSeq `r`; the instrument's
//! history is whole when every value from 1 was applied in order. The
//! states:
//!
//! - **No baseline** (`rpt_seq` unset: nothing from 1 seen since the
//!   start or a restart): `r = 1` starts the history; anything else waits
//!   in the cache. The instrument is suspect, and one that cached an
//!   entry stays so once a baseline comes (RptSeq 1 or a snapshot) while
//!   the hole before that entry is open.
//! - **Healthy**: `r ≤ rpt_seq` is a duplicate; `r = rpt_seq + 1` applies;
//!   a higher `r` reveals a hole: the instrument turns suspect and the
//!   entry is cached.
//! - **Suspect**: a duplicate as above (or a value already cached); `r =
//!   rpt_seq + 1` applies, then the cached entries that continue it; any
//!   other is cached. An instrument whose cache overflowed caches nothing
//!   and applies nothing until a snapshot.
//!
//! After every application the instrument heals when its cache is empty,
//! it has not overflowed and `rpt_seq` reaches the highest value received
//! (and the last one applied before a depth change forgot its baseline,
//! [`forget_applied`](RptSeq::forget_applied)): a late copy of the lost
//! packet closes a hole without a snapshot.
//! Otherwise it is suspect, whatever it was: a baseline (RptSeq 1, or a
//! snapshot) with later entries still waiting in the cache leaves a hole.
//!
//! A snapshot (its RptSeq `r′`: the last value it reflects) applies to a
//! suspect instrument when it has no baseline or `r′ > rpt_seq`, to an
//! unverified one when `r′ ≥ rpt_seq`, and never rolls a healthy one
//! back. Applying it loses for good the values between what was applied
//! (or the lowest value ever received) and `r′` that are not cached.
//!
//! The cache is bounded per feed (`max_cached`): caching one more entry
//! when the feed holds that many drops the instrument's cache and the
//! entry, and marks it overflowed until its next snapshot. Each cache
//! ([`Cache`]) takes entries in RptSeq order as a push onto a reused
//! buffer, and those in any other order (a hostile sender's) in O(log n).

use super::cache::Cache;

/// The instrument's sequencing. Laid out in declaration order
/// (`repr(C)`): what an entry in order reads first, the counters last.
#[derive(Debug, Clone, Default)]
#[repr(C)]
pub struct RptSeq<T> {
    /// Last RptSeq applied; `None`: no baseline.
    rpt_seq: Option<u32>,
    /// Highest and lowest RptSeq received.
    high_seen: Option<u32>,
    watch_from: Option<u32>,
    suspect: bool,
    unverified: bool,
    overflowed: bool,
    /// The RptSeq [`take_next`](Self::take_next) takes without looking
    /// further (0: none): `rpt_seq + 1` while the instrument is healthy,
    /// verified, nothing cached and nothing higher received; kept by
    /// [`refresh`](Self::refresh) after every other change.
    fast: u32,
    /// Since [`forget_applied`](Self::forget_applied), until a snapshot
    /// at or past it: the last RptSeq applied before (0: none), at or
    /// below which a snapshot counts nothing lost.
    applied: u32,
    /// Entries waiting for a hole to close, ascending by RptSeq.
    cache: Cache<T>,
    /// Values lost for good (skipped by a snapshot).
    ticks_lost: u64,
    /// Entries received again.
    duplicates: u64,
}

/// What [`RptSeq::take_next`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Not the usual case: nothing changed.
    Left,
    /// Taken.
    Taken,
    /// Taken, and the instrument, unverified until then, no longer is.
    Verified,
}

/// What one entry did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Took {
    /// Applied (with any cached entries it unblocked).
    Applied,
    /// A duplicate: nothing.
    Duplicate,
    /// Cached until a hole closes.
    Cached,
    /// Dropped: the cache overflowed (now or before).
    Dropped,
}

/// What a snapshot did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Snapshot {
    /// Applied: the books are to be replaced; this many values were lost
    /// for good.
    Applied {
        /// RptSeq values skipped for good.
        lost: u64,
    },
    /// Older than what the instrument has: ignored.
    Ignored,
}

impl<T: Copy> RptSeq<T> {
    /// An instrument before any entry: no baseline.
    pub fn new() -> RptSeq<T> {
        RptSeq {
            rpt_seq: None,
            high_seen: None,
            watch_from: None,
            applied: 0,
            suspect: false,
            unverified: false,
            overflowed: false,
            fast: 0,
            cache: Cache::new(),
            ticks_lost: 0,
            duplicates: 0,
        }
    }

    /// Last RptSeq applied (`None`: no baseline).
    pub fn rpt_seq(&self) -> Option<u32> {
        self.rpt_seq
    }

    /// No baseline, or a hole open: the books are not the venue's.
    pub fn suspect(&self) -> bool {
        self.suspect || self.rpt_seq.is_none()
    }

    /// A packet gap was given up since the last entry applied: the
    /// instrument may have missed anything.
    pub fn unverified(&self) -> bool {
        self.unverified
    }

    /// The cache overflowed: nothing applies until a snapshot.
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Entries cached.
    pub fn cached(&self) -> usize {
        self.cache.len()
    }

    /// Values lost for good.
    pub fn ticks_lost(&self) -> u64 {
        self.ticks_lost
    }

    /// Entries received again.
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }

    /// Highest RptSeq received (`None`: none since the start or a reset).
    pub fn high_seen(&self) -> Option<u32> {
        self.high_seen
    }

    /// Lowest RptSeq received (`None`: none since the start or a reset).
    pub fn watch_from(&self) -> Option<u32> {
        self.watch_from
    }

    /// Values in `(rpt_seq, high_seen]` neither applied nor cached; 0
    /// without a baseline.
    pub fn missing(&self) -> u64 {
        match (self.rpt_seq, self.high_seen) {
            (Some(r), Some(h)) if h > r => {
                let cached = self.cache.count_in(r + 1, h);
                u64::from(h - r) - cached as u64
            }
            _ => 0,
        }
    }

    /// Calls `f` on every cached entry, in no particular order.
    pub fn cached_mut(&mut self, f: impl FnMut(&mut T)) {
        self.cache.values_mut().for_each(f);
    }

    /// A packet gap was given up: the instrument is unverified until an
    /// entry applies in order or a snapshot.
    pub fn unverify(&mut self) {
        self.unverified = true;
        self.refresh();
    }

    /// What [`fast`](Self::fast) is for the state as it stands.
    fn fast_now(&self) -> u32 {
        match self.rpt_seq {
            Some(s)
                if self.high_seen == Some(s)
                    && self.watch_from.is_some_and(|w| w <= s.wrapping_add(1))
                    && self.cache.is_empty()
                    && !self.overflowed
                    && !self.suspect
                    && !self.unverified =>
            {
                s.wrapping_add(1)
            }
            _ => 0,
        }
    }

    /// Sets [`fast`](Self::fast) after a change other than its own step.
    #[inline]
    fn refresh(&mut self) {
        self.fast = self.fast_now();
    }

    /// One entry of RptSeq `r`. `apply` gets each entry applied, in
    /// RptSeq order (this one, then any cached ones it unblocked);
    /// `cached` is the feed's count of cached entries, at most
    /// `max_cached`.
    pub fn on_entry(
        &mut self,
        r: u32,
        entry: T,
        cached: &mut usize,
        max_cached: usize,
        apply: impl FnMut(u32, T),
    ) -> Took {
        let took = self.entry(r, entry, cached, max_cached, apply);
        self.refresh();
        took
    }

    /// [`on_entry`](Self::on_entry) but for [`fast`](Self::fast).
    fn entry(
        &mut self,
        r: u32,
        entry: T,
        cached: &mut usize,
        max_cached: usize,
        mut apply: impl FnMut(u32, T),
    ) -> Took {
        if self.take_next(r) != Next::Left {
            apply(r, entry);
            return Took::Applied;
        }
        self.high_seen = Some(self.high_seen.map_or(r, |h| h.max(r)));
        self.watch_from = Some(self.watch_from.map_or(r, |w| w.min(r)));
        let next = match self.rpt_seq {
            Some(s) if r <= s => {
                self.duplicates += 1;
                return Took::Duplicate;
            }
            Some(s) => s.checked_add(1),
            // No baseline: 1 starts the history.
            None => Some(1),
        };
        if self.cache.contains(r) {
            self.duplicates += 1;
            return Took::Duplicate;
        }
        if self.overflowed {
            return Took::Dropped;
        }
        if next == Some(r) {
            // In order on a whole history verifies the instrument again.
            if !self.suspect() {
                self.unverified = false;
            }
            self.rpt_seq = Some(r);
            apply(r, entry);
            self.drain(cached, &mut apply);
            return Took::Applied;
        }
        // A hole, with a baseline or not: once one is set (a snapshot, or
        // RptSeq 1), the instrument stays suspect until the hole closes.
        self.suspect = true;
        if *cached >= max_cached {
            *cached -= self.cache.len();
            self.cache.clear();
            self.overflowed = true;
            return Took::Dropped;
        }
        self.cache.insert(r, entry);
        *cached += 1;
        Took::Cached
    }

    /// Whether a snapshot of RptSeq `r` applies (as the module says), which
    /// [`on_snapshot`](Self::on_snapshot) would do: a caller replaces the
    /// books first, then lets it apply the cached entries continuing `r`.
    pub fn snapshot_applies(&self, r: u32) -> bool {
        match self.rpt_seq {
            None => true,
            Some(s) if self.suspect => r > s,
            Some(s) if self.unverified => r >= s,
            Some(_) => false,
        }
    }

    /// [`take_next`](Self::take_next) takes `r` on its fast path (the
    /// next value of a healthy instrument, nothing else to look at).
    #[inline]
    pub fn is_fast(&self, r: u32) -> bool {
        r == self.fast && r != 0
    }

    /// Takes `r` if it is the usual case — the next value, past every one
    /// received, nothing cached, no overflow — doing what
    /// [`on_entry`](Self::on_entry) does then, without its cache searches
    /// (the heal rule holds); the caller applies the entry.
    /// Otherwise returns [`Next::Left`] and changes nothing.
    #[inline]
    pub fn take_next(&mut self, r: u32) -> Next {
        debug_assert_eq!(self.fast, self.fast_now(), "refreshed after every change");
        // Healthy and in order, nothing higher received: only the values
        // move (what the general case below computes then).
        if r == self.fast && r != 0 {
            self.high_seen = Some(r);
            self.rpt_seq = Some(r);
            self.fast = r.wrapping_add(1);
            return Next::Taken;
        }
        self.take_next_slow(r)
    }

    /// [`take_next`](Self::take_next) off its fast path.
    fn take_next_slow(&mut self, r: u32) -> Next {
        let Some(s) = self.rpt_seq else {
            return Next::Left;
        };
        // Not past a value received (the caller may have to see RptSeq
        // going back: `Feed::went_back`): left to `on_entry`.
        if Some(r) != s.checked_add(1)
            || !self.cache.is_empty()
            || self.overflowed
            || self.high_seen.is_some_and(|h| r <= h)
            || r < self.applied
        {
            return Next::Left;
        }
        // The highest value received, nothing cached: whole, so healed
        // and verified.
        self.high_seen = Some(r);
        self.watch_from = Some(self.watch_from.map_or(r, |w| w.min(r)));
        let was = self.unverified;
        self.unverified = false;
        self.suspect = false;
        self.rpt_seq = Some(r);
        self.refresh();
        if was && !self.unverified {
            Next::Verified
        } else {
            Next::Taken
        }
    }

    /// A snapshot reflecting every value up to `r` (its RptSeq), matched
    /// as the module says. When it applies, the caller replaces the books
    /// first; then cached entries at or below `r` are dropped and those
    /// continuing `r + 1, r + 2, …` are applied.
    pub fn on_snapshot(
        &mut self,
        r: u32,
        cached: &mut usize,
        apply: impl FnMut(u32, T),
    ) -> Snapshot {
        let done = self.snapshot(r, cached, apply);
        self.refresh();
        done
    }

    /// [`on_snapshot`](Self::on_snapshot) but for [`fast`](Self::fast).
    fn snapshot(&mut self, r: u32, cached: &mut usize, mut apply: impl FnMut(u32, T)) -> Snapshot {
        if !self.snapshot_applies(r) {
            return Snapshot::Ignored;
        }
        // Values skipped for good: above what was applied (or below the
        // lowest ever received), up to `r`, not cached.
        let lost = match self.watch_from {
            None => 0,
            Some(w) => {
                let from = self
                    .rpt_seq
                    .unwrap_or(0)
                    .max(self.applied)
                    .max(w.saturating_sub(1));
                // The cached values in (from, r]: those dropped below, so
                // counting them costs what dropping them does.
                let cached_in = match from.checked_add(1) {
                    Some(lo) => self.cache.count_in(lo, r) as u64,
                    None => 0,
                };
                u64::from(r.saturating_sub(from)).saturating_sub(cached_in)
            }
        };
        self.ticks_lost += lost;
        self.rpt_seq = Some(r);
        // (One older than what was applied before the baseline went, from
        // an older loop, leaves those values counted applied still.)
        if r >= self.applied {
            self.applied = 0;
        }
        self.overflowed = false;
        *cached -= self.cache.drop_through(r);
        self.drain(cached, &mut apply);
        Snapshot::Applied { lost }
    }

    /// Applies cached entries while they continue `rpt_seq`, then heals:
    /// with the cache empty, no overflow and `rpt_seq` at the highest value
    /// received, and at least at the last one applied before the baseline
    /// was forgotten (an older snapshot from a lagging loop shows a book
    /// from before values this instrument already had), the instrument is
    /// healthy and verified again.
    fn drain(&mut self, cached: &mut usize, apply: &mut impl FnMut(u32, T)) {
        while let (Some(s), Some(q)) = (self.rpt_seq, self.cache.first()) {
            if Some(q) != s.checked_add(1) {
                break;
            }
            let Some((_, e)) = self.cache.pop_first() else {
                break;
            };
            self.rpt_seq = Some(q);
            apply(q, e);
            *cached -= 1;
        }
        let whole = self.cache.is_empty()
            && !self.overflowed
            && self
                .rpt_seq
                .is_some_and(|s| self.high_seen.is_none_or(|h| s >= h) && s >= self.applied);
        if whole {
            self.suspect = false;
            self.unverified = false;
        } else {
            // A hole left: entries still wait (a first entry or a snapshot
            // that a cached one does not continue), or values were dropped.
            // Without a baseline a hole did not set the flag (nothing was
            // whole to begin with); the baseline just set must not read
            // whole either.
            self.suspect = true;
        }
    }

    /// No baseline, though the values up to the last one applied were
    /// applied (its book kept at another depth than its definition came with): suspect until a
    /// snapshot, which counts lost only values past those.
    pub fn forget_applied(&mut self) {
        if let Some(r) = self.rpt_seq.take() {
            // (After an older snapshot, what was applied before it stays.)
            self.applied = self.applied.max(r);
        }
        self.refresh();
    }

    /// A channel reset (or weekly restart): RptSeq starts again at 1, the
    /// cache is dropped, the instrument healthy.
    pub fn reset(&mut self, cached: &mut usize) {
        *cached -= self.cache.len();
        self.cache.clear();
        self.rpt_seq = Some(0);
        self.high_seen = None;
        self.watch_from = None;
        self.applied = 0;
        self.suspect = false;
        self.unverified = false;
        self.overflowed = false;
        self.refresh();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Run {
        i: RptSeq<u32>,
        cached: usize,
        max: usize,
        applied: Vec<u32>,
    }

    impl Run {
        fn new(max: usize) -> Run {
            Run {
                i: RptSeq::new(),
                cached: 0,
                max,
                applied: Vec::new(),
            }
        }

        fn entry(&mut self, r: u32) -> Took {
            let applied = &mut self.applied;
            self.i.on_entry(r, r, &mut self.cached, self.max, |q, e| {
                assert_eq!(q, e);
                applied.push(q)
            })
        }

        fn snapshot(&mut self, r: u32) -> Snapshot {
            let applied = &mut self.applied;
            self.i
                .on_snapshot(r, &mut self.cached, |q, _| applied.push(q))
        }
    }

    #[test]
    fn no_baseline_caches_until_one_and_then_applies_in_order() {
        let mut r = Run::new(100);
        assert!(r.i.suspect());
        assert_eq!(r.entry(3), Took::Cached);
        assert_eq!(r.entry(2), Took::Cached);
        assert_eq!(r.i.missing(), 0, "no baseline");
        assert_eq!(r.entry(1), Took::Applied);
        assert_eq!(r.applied, [1, 2, 3]);
        assert!(!r.i.suspect());
        assert_eq!((r.cached, r.i.rpt_seq()), (0, Some(3)));
        assert_eq!(r.entry(2), Took::Duplicate);
        assert_eq!(r.i.duplicates(), 1);
    }

    /// `high_seen` is the highest value received, whatever came after it
    /// (a value dropped for an overflowed cache included); `watch_from`
    /// the lowest received without a baseline. A snapshot then counts
    /// from them: what is still missing above it, what was skipped for
    /// good below it.
    #[test]
    fn high_seen_and_watch_from_are_the_highest_and_lowest_received() {
        let mut r = Run::new(1);
        r.entry(1);
        assert_eq!(r.entry(3), Took::Cached);
        assert_eq!(r.entry(9), Took::Dropped);
        assert_eq!(r.entry(5), Took::Dropped);
        assert_eq!(r.i.high_seen(), Some(9));
        assert!(matches!(r.snapshot(5), Snapshot::Applied { .. }));
        assert!(r.i.suspect());
        assert_eq!(r.i.missing(), 4, "6 to 9");
        let mut r = Run::new(100);
        r.entry(5);
        r.entry(3);
        assert_eq!(r.i.watch_from(), Some(3));
        assert_eq!(r.snapshot(6), Snapshot::Applied { lost: 2 }, "4 and 6");
        // Without a baseline, `watch_from`'s own value dropped for an
        // overflowed cache is skipped for good too: counted from
        // `watch_from − 1`.
        let mut r = Run::new(1);
        assert_eq!(r.entry(5), Took::Cached);
        assert_eq!(r.entry(6), Took::Dropped);
        assert_eq!((r.i.watch_from(), r.cached), (Some(5), 0));
        assert_eq!(r.snapshot(8), Snapshot::Applied { lost: 4 }, "5 to 8");
    }

    #[test]
    fn a_hole_is_healed_by_a_late_copy() {
        let mut r = Run::new(100);
        r.entry(1);
        assert_eq!(r.entry(4), Took::Cached);
        assert!(r.i.suspect());
        assert_eq!(r.entry(4), Took::Duplicate, "already cached");
        assert_eq!(r.i.missing(), 2);
        assert_eq!(r.entry(2), Took::Applied);
        assert!(r.i.suspect(), "3 still missing");
        assert_eq!(r.entry(3), Took::Applied);
        assert_eq!(r.applied, [1, 2, 3, 4]);
        assert!(!r.i.suspect());
        assert_eq!(r.i.missing(), 0);
    }

    /// The worst orders for a sorted vector, with entries as big as the
    /// feed's: a hole filled from the top down (every insert at the
    /// front), then every other value cached and the rest sent in order
    /// (each one applied unblocking one cached at the front). Each step is
    /// O(log n) here; one sorted vector moved about 700 GB for these
    /// 300,000 entries.
    #[test]
    fn the_worst_orders_cost_a_log_each() {
        type Big = [u64; 8];
        let n = 100_000u32;
        let (mut i, mut cached) = (RptSeq::<Big>::new(), 0usize);
        let mut applied = Vec::new();
        let mut entry = |i: &mut RptSeq<Big>, cached: &mut usize, r: u32| {
            i.on_entry(r, [u64::from(r); 8], cached, usize::MAX, |q, e| {
                assert_eq!(e[7], u64::from(q));
                applied.push(q)
            })
        };
        assert_eq!(entry(&mut i, &mut cached, 1), Took::Applied);
        for r in (3..=n).rev() {
            assert_eq!(entry(&mut i, &mut cached, r), Took::Cached);
        }
        assert_eq!((cached, i.missing()), (n as usize - 2, 1));
        assert_eq!(entry(&mut i, &mut cached, 2), Took::Applied);
        assert_eq!((cached, i.suspect()), (0, false));
        // n + 2, n + 4, …, 3n cached; then n + 1, n + 3, … in order.
        for r in (n + 2..=3 * n).step_by(2) {
            assert_eq!(entry(&mut i, &mut cached, r), Took::Cached);
        }
        for r in (n + 1..3 * n).step_by(2) {
            assert_eq!(entry(&mut i, &mut cached, r), Took::Applied);
        }
        assert_eq!((cached, i.suspect(), i.rpt_seq()), (0, false, Some(3 * n)));
        assert!(applied.iter().copied().eq(1..=3 * n));
    }

    #[test]
    fn the_bound_drops_the_cache_until_a_snapshot() {
        let mut r = Run::new(2);
        r.entry(1);
        r.entry(3);
        r.entry(4);
        assert_eq!(r.cached, 2);
        assert_eq!(r.entry(5), Took::Dropped);
        assert!(r.i.overflowed() && r.i.suspect());
        assert_eq!((r.cached, r.i.cached()), (0, 0));
        // Nothing applies while overflowed, the next in order included.
        assert_eq!(r.entry(2), Took::Dropped);
        assert_eq!(r.entry(6), Took::Dropped);
        assert_eq!(r.snapshot(6), Snapshot::Applied { lost: 5 });
        assert!(!r.i.overflowed() && !r.i.suspect());
        assert_eq!(r.entry(7), Took::Applied);
    }

    /// Overflowed, a duplicate is still a duplicate (counted as one), not
    /// dropped: only non-duplicates are (clarification 7).
    #[test]
    fn a_duplicate_to_an_overflowed_instrument_is_a_duplicate() {
        let mut r = Run::new(1);
        r.entry(1);
        r.entry(3);
        assert_eq!(r.entry(4), Took::Dropped);
        assert!(r.i.overflowed());
        assert_eq!(r.entry(1), Took::Duplicate);
    }

    /// "Checked after each application" (spec mdp3 §3.2): an instrument
    /// suspect with nothing cached (its cache dropped at the bound, then a
    /// snapshot older than the highest RptSeq received) heals on the
    /// in-order entry that reaches the highest received, not before.
    #[test]
    fn a_suspect_instrument_heals_on_the_in_order_entry_that_reaches_the_highest_seen() {
        let mut r = Run::new(1);
        r.entry(1);
        r.entry(3);
        assert_eq!(r.entry(5), Took::Dropped);
        assert!(matches!(r.snapshot(2), Snapshot::Applied { .. }));
        assert!(r.i.suspect() && !r.i.overflowed() && r.cached == 0);
        for q in 3..=4 {
            assert_eq!(r.entry(q), Took::Applied);
            assert!(r.i.suspect(), "{q}");
        }
        assert_eq!(r.entry(5), Took::Applied);
        assert!(!r.i.suspect(), "healed at the highest received");
        assert_eq!(r.i.missing(), 0);
        assert_eq!(r.entry(6), Took::Applied);
        assert!(!r.i.suspect());
    }

    /// "Healed: … → healthy, `unverified` cleared" (spec mdp3 §3.2 step
    /// 5): an instrument suspect and unverified (a gap given up) heals on
    /// the in-order entry reaching the highest RptSeq received, and is
    /// verified by it too.
    #[test]
    fn healing_on_an_in_order_entry_also_verifies() {
        let mut r = Run::new(1);
        r.entry(1);
        r.entry(3);
        assert_eq!(r.entry(5), Took::Dropped);
        assert!(matches!(r.snapshot(2), Snapshot::Applied { .. }));
        r.i.unverify();
        for q in 3..=4 {
            assert_eq!(r.entry(q), Took::Applied);
            assert!(r.i.suspect() && r.i.unverified(), "{q}");
        }
        assert_eq!(r.entry(5), Took::Applied);
        assert!(!r.i.suspect() && !r.i.unverified(), "healed, so verified");
    }

    /// Entries dropped while overflowed still raise the highest RptSeq
    /// received: a snapshot older than them leaves the instrument
    /// suspect, the values between missing.
    #[test]
    fn entries_dropped_while_overflowed_still_count_as_received() {
        let mut r = Run::new(1);
        r.entry(1);
        r.entry(3);
        assert_eq!(r.entry(4), Took::Dropped);
        assert_eq!(r.entry(9), Took::Dropped);
        assert_eq!(r.i.high_seen(), Some(9));
        assert_eq!(r.snapshot(5), Snapshot::Applied { lost: 4 });
        assert!(r.i.suspect() && !r.i.overflowed());
        assert_eq!(r.i.missing(), 4);
    }

    #[test]
    fn snapshots_are_matched_by_rpt_seq_and_count_what_they_skip() {
        let mut r = Run::new(100);
        r.entry(5);
        r.entry(6);
        // No baseline: applied; 1..4 were never seen (watch_from 5), so
        // nothing is lost below 5; 5 and 6 are in the cache and dropped.
        assert_eq!(r.snapshot(6), Snapshot::Applied { lost: 0 });
        assert!(r.applied.is_empty());
        assert_eq!((r.i.rpt_seq(), r.cached), (Some(6), 0));
        // Healthy: never rolled back, even to the same value.
        assert_eq!(r.snapshot(9), Snapshot::Ignored);
        // A hole at 7..8, 9 and 11 cached: a snapshot at 9 loses 7 and 8,
        // keeps 11 waiting for 10.
        r.entry(9);
        r.entry(11);
        assert_eq!(r.snapshot(8), Snapshot::Applied { lost: 2 });
        assert_eq!(r.applied, [9]);
        assert_eq!(r.i.rpt_seq(), Some(9));
        assert!(r.i.suspect());
        assert_eq!(r.snapshot(9), Snapshot::Ignored, "suspect: only newer");
        assert_eq!(r.snapshot(10), Snapshot::Applied { lost: 1 });
        assert_eq!(r.applied, [9, 11]);
        assert!(!r.i.suspect());
        assert_eq!(r.i.ticks_lost(), 3);
        // Unverified: a snapshot at the same value applies.
        r.i.unverify();
        assert_eq!(r.snapshot(11), Snapshot::Applied { lost: 0 });
        assert!(!r.i.unverified());
        r.i.unverify();
        assert_eq!(r.entry(12), Took::Applied);
        assert!(!r.i.unverified(), "an entry in order verifies it");
        // Suspect and unverified: applying in order does not verify it
        // while a hole is left; healing does.
        r.entry(14);
        r.i.unverify();
        assert_eq!(r.entry(13), Took::Applied);
        assert!(!r.i.unverified() && !r.i.suspect(), "healed");
        r.entry(17);
        r.i.unverify();
        r.entry(15);
        assert!(r.i.unverified() && r.i.suspect(), "16 still missing");
        // Both: matched as suspect, only a newer snapshot applies.
        assert_eq!(r.snapshot(15), Snapshot::Ignored, "suspect and unverified");
        assert_eq!(r.snapshot(16), Snapshot::Applied { lost: 1 });
        assert_eq!(r.applied.last(), Some(&17));
        assert!(!r.i.unverified() && !r.i.suspect());
    }

    /// Without a baseline, entries past a hole: a snapshot (or RptSeq 1)
    /// that leaves the hole open leaves the instrument suspect.
    #[test]
    fn a_hole_found_before_a_baseline_stays_after_it() {
        let mut r = Run::new(100);
        r.entry(3);
        r.entry(5);
        assert_eq!(r.snapshot(2), Snapshot::Applied { lost: 0 });
        assert_eq!(r.applied, [3]);
        assert!(r.i.suspect(), "4 missing");
        assert_eq!(r.snapshot(3), Snapshot::Ignored, "suspect: only newer");
        assert_eq!(r.entry(4), Took::Applied);
        assert!(!r.i.suspect());
        // The same with RptSeq 1 as the baseline.
        let mut r = Run::new(100);
        r.entry(3);
        assert_eq!(r.entry(1), Took::Applied);
        assert!(r.i.suspect(), "2 missing");
        r.entry(2);
        assert!(!r.i.suspect());
        // And with the cache bound: the dropped entry is a hole too.
        let mut r = Run::new(0);
        assert_eq!(r.entry(2), Took::Dropped);
        assert_eq!(r.snapshot(1), Snapshot::Applied { lost: 0 });
        assert!(r.i.suspect() && r.i.missing() == 1);
    }

    /// Forgetting the baseline of values applied (a book kept at another depth than its definition):
    /// no snapshot counts those lost, an older one from an older loop
    /// included, nor the one after it that heals.
    #[test]
    fn values_applied_before_a_forgotten_baseline_are_never_lost() {
        let mut r = Run::new(100);
        for v in 1..=4 {
            assert_eq!(r.entry(v), Took::Applied);
        }
        r.i.forget_applied();
        assert!(r.i.suspect() && r.i.rpt_seq().is_none());
        assert_eq!(r.entry(5), Took::Cached);
        assert_eq!(r.snapshot(2), Snapshot::Applied { lost: 0 });
        assert!(r.i.suspect(), "behind what it had received");
        assert_eq!(r.snapshot(4), Snapshot::Applied { lost: 0 });
        assert_eq!(r.i.rpt_seq(), Some(5), "the cached entry after it");
        assert!(!r.i.suspect());
        assert_eq!(r.i.ticks_lost(), 0);
        // Forgotten again after an older snapshot: still from 4 on.
        let mut r = Run::new(100);
        for v in 1..=4 {
            r.entry(v);
        }
        r.i.forget_applied();
        assert_eq!(r.entry(5), Took::Cached);
        assert_eq!(r.snapshot(2), Snapshot::Applied { lost: 0 });
        r.i.forget_applied();
        assert_eq!(r.snapshot(6), Snapshot::Applied { lost: 1 }, "6 alone");
    }

    /// A baseline a snapshot alone set (no entry received), forgotten by
    /// a depth change: an older snapshot from a lagging loop does not
    /// read whole (its book is from before values the instrument had),
    /// nor does an entry continuing it; one at or past them does.
    #[test]
    fn an_older_snapshot_after_a_forgotten_baseline_is_not_whole() {
        let mut r = Run::new(100);
        assert_eq!(r.snapshot(50), Snapshot::Applied { lost: 0 });
        assert!(!r.i.suspect());
        r.i.forget_applied();
        assert_eq!(r.snapshot(40), Snapshot::Applied { lost: 0 });
        assert!(r.i.suspect(), "a book from before RptSeq 50");
        assert_eq!(r.entry(41), Took::Applied);
        assert!(r.i.suspect(), "still before RptSeq 50");
        assert_eq!(r.snapshot(50), Snapshot::Applied { lost: 0 });
        assert!(!r.i.suspect());
    }

    #[test]
    fn a_reset_starts_again_at_one() {
        let mut r = Run::new(100);
        r.entry(1);
        r.entry(5);
        r.i.reset(&mut r.cached);
        assert_eq!(
            (r.cached, r.i.rpt_seq(), r.i.suspect()),
            (0, Some(0), false)
        );
        assert_eq!(r.entry(1), Took::Applied);
    }

    /// A baseline that leaves cached entries waiting behind a hole is
    /// suspect, whether RptSeq 1 or a snapshot set it: neither reads
    /// healthy until the hole closes.
    #[test]
    fn a_baseline_with_a_hole_left_is_suspect() {
        let mut r = Run::new(100);
        assert_eq!(r.entry(3), Took::Cached);
        assert_eq!(r.entry(5), Took::Cached);
        assert_eq!(r.entry(1), Took::Applied);
        assert_eq!((r.i.rpt_seq(), r.cached), (Some(1), 2));
        assert!(r.i.suspect(), "2 and 4 missing");
        assert_eq!(r.i.missing(), 2);
        assert_eq!(r.entry(2), Took::Applied);
        assert!(r.i.suspect(), "4 missing");
        assert_eq!(r.entry(4), Took::Applied);
        assert!(!r.i.suspect());
        assert_eq!(r.applied, [1, 2, 3, 4, 5]);

        // Joined mid-week: 500, 501 and 503 wait for a snapshot at 499.
        let mut r = Run::new(100);
        for q in [500, 501, 503] {
            assert_eq!(r.entry(q), Took::Cached);
        }
        assert_eq!(r.snapshot(499), Snapshot::Applied { lost: 0 });
        assert_eq!((r.i.rpt_seq(), r.cached), (Some(501), 1));
        assert!(r.i.suspect(), "502 missing");
        assert_eq!(r.entry(502), Took::Applied);
        assert!(!r.i.suspect());
        assert_eq!(r.applied, [500, 501, 502, 503]);
    }

    proptest::proptest! {
        /// Whatever the order, loss and duplication of entries 1..=n, the
        /// applied ones are an ascending run from 1, the feed's cache count
        /// matches, and once every value came the instrument is healthy
        /// with all applied (a big enough cache).
        #[test]
        fn any_arrival_order_applies_in_order(
            n in 1u32..60,
            seed in proptest::prelude::any::<u64>(),
        ) {
            let mut order: Vec<u32> = (1..=n).chain(1..=n / 3).collect();
            let mut x = seed | 1;
            for i in (1..order.len()).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                order.swap(i, (x % (i as u64 + 1)) as usize);
            }
            let mut r = Run::new(1_000);
            for &q in &order {
                r.entry(q);
                proptest::prop_assert_eq!(r.cached, r.i.cached());
                let want: Vec<u32> = (1..=r.applied.len() as u32).collect();
                proptest::prop_assert_eq!(&r.applied, &want);
            }
            proptest::prop_assert_eq!(r.applied.len() as u32, n);
            proptest::prop_assert!(!r.i.suspect());
            proptest::prop_assert_eq!(r.i.duplicates(), u64::from(n / 3));
        }
    }
}
