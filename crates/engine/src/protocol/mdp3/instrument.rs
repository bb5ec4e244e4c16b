//! One instrument: its RptSeq, its working books (every applied entry)
//! and its visible books (what a check reads), and when the first become
//! the second.
//!
//! The books are kept once, as the working books. The visible books are
//! the working books with the changes not covered yet reverted: each
//! change is recorded as it is applied (in the feed's [`UndoLog`], chained
//! from the instrument's [`Undo`]), and covering them forgets the
//! records. So the usual event costs a record per change, not
//! a second copy of the levels it touched, and a check (or the
//! publication) that comes while an event is unfinished reverts the
//! records on a copy.
//!
//! CME's books are consistent only at the end of a Globex event (the
//! EndOfEvent bit of MatchEventIndicator), and an event may span packets.
//! An applied change at position `p` (MsgSeqNum, message index) is
//! **covered** once an EndOfEvent at a position `q ≥ p` was processed and
//! no packet in `[p.S, q.S]` is missing (each received, or its gap given
//! up). When all of an instrument's pending changes are covered its
//! visible books are the working ones.
//!
//! Each change needs its own look: the nearest end of event after one
//! change may lie before a missing packet that the nearest end after
//! another spans, and a packet filling a gap brings ends of event below
//! those already processed. So an instrument keeps the position of each
//! change not covered yet (one per message: a message's entries share
//! it), and the feed keeps the ends of event processed ([`Ends`]): the
//! highest one below the first missing packet — what covers any change
//! there — and each one from that packet on, a few while a gap is open.
//! Coverage only grows (packets only stop being missing, ends of event
//! only come), so a change found covered is forgotten.
//!
//! A packet lost with an event's end therefore keeps the instruments the
//! event changed on their previous visible books while the gap is open;
//! a fill or a give-up lets a later end of event publish them. A snapshot
//! replaces the books, visible at once, and drops what was pending.

use super::book::{Applied, Books, Level, Recorder, Undo, UndoLog, Update};
use super::rptseq::{Next, RptSeq, Snapshot, Took};
use super::sequence::Sequence;
use super::status::Position;
use std::borrow::Cow;
use std::collections::VecDeque;

/// An entry waiting in the cache: its position and, for a book entry,
/// its update (statistics, trades and volume only take their RptSeq).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cached {
    /// Where it arrived.
    pub at: Position,
    /// Its TransactTime, ns since the Unix epoch.
    pub transact_time: u64,
    /// The book update, if it is one.
    pub update: Option<Update>,
}

/// The ends of event processed since the sequence (re)started, as
/// coverage needs them: the highest below the first missing packet, and
/// those from that packet on, ascending. A restart or a channel reset
/// forgets them: a new sequence's positions come after the old one's,
/// whatever their numbers.
///
/// Those past the first missing packet are a sorted ring, its capacity
/// kept: a gap filled in order folds them from its front, and one filled
/// from its top down (a hostile line B's worst order for a sorted
/// vector) inserts each fill's ends at its front, both O(1); an end
/// anywhere else costs its distance to the nearer end.
#[derive(Debug, Clone, Default)]
pub struct Ends {
    below: Option<Position>,
    above: VecDeque<Position>,
}

impl Ends {
    /// No end of event processed.
    pub fn clear(&mut self) {
        self.below = None;
        self.above.clear();
    }

    /// An end of event processed at `at`.
    #[inline]
    pub fn push(&mut self, at: Position, seq: &Sequence) {
        // The usual case: no packet missing.
        if seq.gaps_open() == 0 {
            self.raise_below(at);
            return;
        }
        match seq.first_missing() {
            Some(m) if at.0 >= m => {
                let i = self.above.partition_point(|&q| q < at);
                if self.above.get(i) != Some(&at) {
                    self.above.insert(i, at);
                }
            }
            _ => self.raise_below(at),
        }
    }

    /// `below` becomes `at` if higher.
    #[inline]
    fn raise_below(&mut self, at: Position) {
        if self.below.is_none_or(|q| q < at) {
            self.below = Some(at);
        }
    }

    /// Folds the ends below the first missing packet into the highest of
    /// them (after a fill or a give-up: the first missing rose).
    #[inline]
    pub fn settle(&mut self, seq: &Sequence) {
        if self.above.is_empty() {
            return;
        }
        let m = seq.first_missing();
        let k = self.above.partition_point(|q| m.is_none_or(|m| q.0 < m));
        if k > 0 {
            self.raise_below(self.above[k - 1]);
            self.above.drain(..k);
        }
    }

    /// A change at `p` is covered by the highest end of event below the
    /// first missing packet (every end kept in `below` lies before it).
    #[inline]
    fn below_covers(&self, p: Position) -> bool {
        self.below.is_some_and(|q| q >= p)
    }

    /// A change at `p` is covered: an end of event at or after it, no
    /// packet missing from its packet to the end's.
    pub fn covers(&self, p: Position, seq: &Sequence) -> bool {
        if self.below_covers(p) {
            return true;
        }
        // Else the nearest end after it (a later one spans more).
        let i = self.above.partition_point(|&q| q < p);
        self.above.get(i).is_some_and(|q| seq.complete(p.0, q.0))
    }
}

/// Positions of an instrument's changes not covered yet: the first kept
/// in the instrument itself, the rest (a gap open, an event over several
/// messages) in `more`, so that the usual one touches no other memory.
#[derive(Debug, Clone, Default)]
struct Pending {
    head: Option<Position>,
    /// Listed in the feed's list of instruments to look at (kept by the
    /// feed; clearing the positions leaves it).
    listed: bool,
    more: Vec<Position>,
    /// `more`'s length after its last fold: the next waits until it has
    /// doubled (and reached [`FOLD_AT`]), so folds cost O(1) a position
    /// amortised even while a gap keeps them from shrinking it.
    folded: u32,
}

/// `Pending::more` is folded from this length on.
pub(super) const FOLD_AT: usize = 16;

impl Pending {
    #[inline]
    fn is_empty(&self) -> bool {
        self.head.is_none()
    }

    #[inline]
    fn last(&self) -> Option<Position> {
        self.more.last().copied().or(self.head)
    }

    #[inline]
    fn push(&mut self, at: Position) {
        if self.head.is_none() {
            self.head = Some(at);
        } else {
            self.more.push(at);
        }
    }

    #[inline]
    fn clear(&mut self) {
        self.head = None;
        self.more.clear();
        // Room for a fold's worth kept; more, which a long gap once took,
        // is given back (or a sender could leave every instrument holding
        // its peak).
        if self.more.capacity() > 2 * FOLD_AT {
            self.more.shrink_to(2 * FOLD_AT);
        }
        self.folded = 0;
    }

    #[inline]
    fn all(&self, f: impl Fn(Position) -> bool) -> bool {
        self.head.is_none_or(&f) && self.more.iter().all(|&p| f(p))
    }

    /// [`fold_below`](Self::fold_below) is due: `more` has doubled since
    /// the last fold.
    #[inline]
    fn wants_fold(&self) -> bool {
        self.more.len() >= FOLD_AT.max(2 * self.folded as usize)
    }

    /// Folds the positions before packet `m` (the first missing; `None`:
    /// none is) into the highest of them: with no packet missing among
    /// them, an end of event that covers the highest covers every one.
    fn fold_below(&mut self, m: Option<u32>) {
        let below = |p: Position| m.is_none_or(|m| p.0 < m);
        let top = self
            .head
            .iter()
            .chain(&self.more)
            .copied()
            .filter(|&p| below(p))
            .max();
        if let Some(top) = top {
            self.retain(|p| !below(p));
            self.push(top);
        }
        // The room the positions folded took is given back (an event never
        // ended, on instrument after instrument, would otherwise leave each
        // holding its peak).
        let len = self.more.len();
        if self.more.capacity() > 4 * len + 2 * FOLD_AT {
            self.more.shrink_to(2 * len + FOLD_AT);
        }
        self.folded = self.more.len() as u32;
    }

    /// Keeps the positions `keep` holds, in order.
    fn retain(&mut self, keep: impl Fn(Position) -> bool) {
        self.more.retain(|&p| keep(p));
        self.folded = self.folded.min(self.more.len() as u32);
        if self.head.is_some_and(|p| !keep(p)) {
            self.head = (!self.more.is_empty()).then(|| self.more.remove(0));
        }
    }

    fn set_all(&mut self, at: Position) {
        for p in self.head.iter_mut().chain(self.more.iter_mut()) {
            *p = at;
        }
    }
}

/// One instrument's sequencing and books.
///
/// Laid out in declaration order (`repr(C)`), what every applied entry
/// reads and writes first: its RptSeq state, then the pending changes,
/// then the books' slot pointers and the undo records, so that an entry
/// touches two or three adjacent cache lines of it.
///
/// The books are kept once, as every applied entry left them (the
/// working books); the visible books are those with the changes not
/// visible yet reverted ([`Undo`]), which is done only when a check or
/// the publication reads them while an event is unfinished.
#[derive(Debug, Clone)]
#[repr(C)]
pub struct Instrument {
    /// Its RptSeq and cache.
    pub seq: RptSeq<Cached>,
    /// Positions of the changes not visible yet and not yet known
    /// covered (ascending but for fills and cached entries). Usually one;
    /// more while a gap is open or an event spans messages, their room
    /// given back as they fold and clear.
    pending: Pending,
    /// TransactTime of the last applied entry, ns.
    last_transact_time: Option<u64>,
    /// Entries that changed nothing for an odd value (unknown action or
    /// entry type, a level update without price or size).
    anomalies: u64,
    /// The working books.
    books: Books,
    /// What reverts the changes not visible yet.
    undo: Undo,
}

impl Instrument {
    /// An instrument with no baseline and empty books of `depth`
    /// (outright) and `implied_depth` levels.
    pub fn new(depth: u8, implied_depth: u8) -> Instrument {
        Instrument {
            seq: RptSeq::new(),
            pending: Pending::default(),
            last_transact_time: None,
            anomalies: 0,
            books: Books::new(depth, implied_depth),
            undo: Undo::default(),
        }
    }

    /// The books a check reads: the working books, or (while changes wait
    /// for their event's end) a copy of them with those changes reverted
    /// (their records in `log`, the feed's).
    pub fn visible<'a>(&'a self, log: &UndoLog) -> Cow<'a, Books> {
        self.undo.visible(&self.books, log)
    }

    /// Level 1 of the visible outright bid and offer, without allocating.
    #[inline]
    pub fn visible_top(&self, log: &UndoLog) -> (Option<Level>, Option<Level>) {
        (
            self.undo.visible_top(&self.books, log, 0),
            self.undo.visible_top(&self.books, log, 1),
        )
    }

    /// What reverts the changes not visible yet.
    pub fn undo(&self) -> &Undo {
        &self.undo
    }

    /// The same, to compact the log it chains into.
    pub(super) fn undo_mut(&mut self) -> &mut Undo {
        &mut self.undo
    }

    /// The books every applied entry changed.
    pub fn working(&self) -> &Books {
        &self.books
    }

    /// Changes are waiting for their event's end.
    pub fn pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The lowest position of its changes not visible yet and not known
    /// covered.
    pub fn first_pending(&self) -> Option<Position> {
        let p = &self.pending;
        p.head.iter().chain(&p.more).copied().min()
    }

    /// Lists it, if it has changes waiting and is not listed yet: whether
    /// the caller is to add it to its list (each instrument once).
    #[inline]
    pub fn list(&mut self) -> bool {
        let p = &mut self.pending;
        let new = !p.listed && p.head.is_some();
        p.listed |= new;
        new
    }

    /// Off the caller's list.
    #[inline]
    pub fn unlist(&mut self) {
        self.pending.listed = false;
    }

    /// Its pending positions have doubled since they were last folded
    /// ([`fold_pending`](Self::fold_pending) is due).
    #[inline]
    pub fn wants_fold(&self) -> bool {
        self.pending.wants_fold()
    }

    /// Folds the positions of its pending changes before packet `m` (the
    /// first missing; `None`: none is) into the highest of them, exactly
    /// (an end of event that covers it covers them all), so that an
    /// event left unfinished keeps a position per gap among its changes,
    /// not one per message.
    pub fn fold_pending(&mut self, m: Option<u32>) {
        self.pending.fold_below(m);
    }

    /// Positions kept for its pending changes.
    #[cfg(test)]
    pub(super) fn pending_positions(&self) -> usize {
        usize::from(self.pending.head.is_some()) + self.pending.more.len()
    }

    /// Positions the pending changes have room for past the first.
    #[cfg(test)]
    pub(super) fn pending_room(&self) -> usize {
        self.pending.more.capacity()
    }

    /// TransactTime of the last applied entry.
    pub fn last_transact_time(&self) -> Option<u64> {
        self.last_transact_time
    }

    /// Anomalous entries applied.
    pub fn anomalies(&self) -> u64 {
        self.anomalies
    }

    /// One entry of RptSeq `r`; `cached` and `max_cached` bound the
    /// feed's cache, `log` records its changes.
    pub fn on_entry(
        &mut self,
        r: u32,
        entry: Cached,
        cached: &mut usize,
        max_cached: usize,
        log: &mut UndoLog,
    ) -> Took {
        let Instrument {
            seq,
            books,
            undo,
            pending,
            last_transact_time,
            anomalies,
            ..
        } = self;
        let mut rec = Recorder::new(undo, log);
        seq.on_entry(r, entry, cached, max_cached, |_, e| {
            apply(books, &mut rec, pending, last_transact_time, anomalies, e)
        })
    }

    /// A book entry of RptSeq `r` at `at` applied at once when it is the
    /// usual case (the next value, nothing cached: see
    /// [`RptSeq::take_next`]), as [`on_entry`](Self::on_entry) would apply
    /// it; false, changing nothing, when it must go through `on_entry`.
    ///
    /// `ends_here`: an end of event at or after `at` comes in the same
    /// datagram, so the change is covered before anything (a check, the
    /// publication) reads the books. With nothing pending either, the
    /// working books are then the visible ones at the datagram's end, and
    /// the change is neither recorded nor kept pending.
    #[inline]
    pub fn apply_next(
        &mut self,
        r: u32,
        at: Position,
        transact_time: u64,
        u: &Update,
        log: &mut UndoLog,
        ends_here: bool,
    ) -> Next {
        let next = self.seq.take_next(r);
        if next == Next::Left {
            return next;
        }
        self.last_transact_time = Some(transact_time);
        if ends_here && self.pending.is_empty() {
            let rec = &mut Recorder::off(&mut self.undo, log);
            if self.books.apply_recording(u, rec) == Applied::Anomaly {
                self.anomalies += 1;
            }
            return next;
        }
        update(
            &mut self.books,
            &mut Recorder::new(&mut self.undo, log),
            &mut self.pending,
            &mut self.anomalies,
            at,
            u,
        );
        next
    }

    /// A snapshot of RptSeq `r` whose entries `set` puts in the (cleared)
    /// books: when it applies, the books are replaced and visible at
    /// once, what was pending dropped, and the cached entries continuing
    /// `r` applied (pending again until their event's end).
    pub fn on_snapshot(
        &mut self,
        r: u32,
        cached: &mut usize,
        log: &mut UndoLog,
        set: impl FnOnce(&mut Books),
    ) -> Snapshot {
        let Instrument {
            seq,
            books,
            undo,
            pending,
            last_transact_time,
            anomalies,
        } = self;
        // The books are replaced before the cached entries continuing the
        // snapshot apply: whether it applies is asked first, so that they
        // apply straight from the cache (nothing collected meanwhile).
        if seq.snapshot_applies(r) {
            books.clear();
            set(books);
            pending.clear();
            undo.clear(log);
        }
        let mut rec = Recorder::new(undo, log);
        seq.on_snapshot(r, cached, |_, e| {
            apply(books, &mut rec, pending, last_transact_time, anomalies, e)
        })
    }

    /// Makes the working books visible if every pending change is covered
    /// by the ends of event processed, given which packets `seq` knows to
    /// be missing. Returns whether it did: the changes' records are
    /// forgotten, nothing is copied.
    #[inline(always)]
    pub fn cover(&mut self, ends: &Ends, seq: &Sequence, log: &mut UndoLog) -> bool {
        if self.pending.is_empty() {
            return false;
        }
        // The usual case: every change at or before an end of event below
        // the first missing packet, one comparison each.
        if !self.pending.all(|p| ends.below_covers(p)) && !self.cover_each(ends, seq) {
            return false;
        }
        self.pending.clear();
        self.undo.clear(log);
        true
    }

    /// Forgets the pending changes covered one by one (a gap is or was
    /// open); true when none is left.
    #[cold]
    fn cover_each(&mut self, ends: &Ends, seq: &Sequence) -> bool {
        self.pending.retain(|p| !ends.covers(p, seq));
        self.pending.is_empty()
    }

    /// A channel reset: books emptied (visible too), cache and pending
    /// changes dropped, RptSeq restarting at 1.
    pub fn reset(&mut self, cached: &mut usize, log: &mut UndoLog) {
        self.books.clear();
        self.pending.clear();
        self.undo.clear(log);
        self.seq.reset(cached);
    }

    /// In the state [`reset`](Self::reset) leaves (then, with `forget`,
    /// [`forget_baseline`](Self::forget_baseline)): for debug checks.
    pub fn is_reset(&self, forget: bool) -> bool {
        let seq = &self.seq;
        self.books.outright.is_empty()
            && self.books.implied.is_empty()
            && !self.pending()
            && self.undo.is_empty()
            && seq.rpt_seq() == (!forget).then_some(0)
            && (forget || !seq.suspect())
            && seq.high_seen().is_none()
            && seq.watch_from().is_none()
            && !seq.unverified()
            && !seq.overflowed()
            && seq.cached() == 0
    }

    /// No baseline any more (a ChannelReset that came after packets that
    /// follow it): suspect until a snapshot.
    pub fn forget_baseline(&mut self) {
        // Just reset: nothing applied to keep (see `RptSeq::forget_applied`).
        self.seq.forget_applied();
    }

    /// The incremental sequence restarted: pending changes and cached
    /// entries are moved to position `at` (before the new sequence).
    pub fn restart_positions(&mut self, at: Position) {
        self.pending.set_all(at);
        self.seq.cached_mut(|e| e.at = at);
    }

    /// New depths (a definition): a lower one cuts deeper levels of the
    /// working and the visible books.
    pub fn set_depths(&mut self, depth: u8, implied_depth: u8, log: &mut UndoLog) {
        // The definition loop repeats a definition: the same depths change
        // nothing, and an unfinished event keeps recording its changes.
        if self.books.has_depths(depth, implied_depth) {
            return;
        }
        // Entries applied at another depth than the venue's leave a book
        // that may not be its: kept shallower, it lost the levels below it
        // (once deeper, a Delete would shift an empty level up where the
        // venue has a price); kept deeper, it kept a level a New pushed
        // past the venue's depth, which the venue dropped (a Delete would
        // shift that level up where the venue has none, to the top in
        // the end: a price no one quotes, read `ok`). With entries
        // applied, no baseline until a snapshot fills it (suspect).
        if self.seq.rpt_seq().is_some_and(|r| r > 0) {
            self.seq.forget_applied();
        }
        self.undo.set_depths(&self.books, log, depth, implied_depth);
        self.books.set_depths(depth, implied_depth);
    }
}

/// Applies one entry to the working books, noting it pending and what
/// reverts it.
#[inline]
fn apply(
    books: &mut Books,
    rec: &mut Recorder<'_>,
    pending: &mut Pending,
    last_transact_time: &mut Option<u64>,
    anomalies: &mut u64,
    e: Cached,
) {
    *last_transact_time = Some(e.transact_time);
    if let Some(u) = e.update {
        update(books, rec, pending, anomalies, e.at, &u);
    }
}

/// Applies a book update at `at` to the working books, noting it pending
/// and what reverts it.
#[inline(always)]
fn update(
    books: &mut Books,
    rec: &mut Recorder<'_>,
    pending: &mut Pending,
    anomalies: &mut u64,
    at: Position,
    u: &Update,
) {
    match books.apply_recording(u, rec) {
        Applied::Changed => {
            // A message's entries share its position: kept once.
            if pending.last() != Some(at) {
                pending.push(at);
            }
            if rec.full() {
                rec.keep_whole(books);
            }
        }
        Applied::Unchanged => {}
        Applied::Anomaly => *anomalies += 1,
    }
}

#[cfg(test)]
mod tests {
    use super::super::sequence::Settings;
    use super::*;

    fn new_bid(price: i64, at: Position) -> Cached {
        Cached {
            at,
            transact_time: u64::from(at.0),
            update: Some(Update {
                action: 0,
                entry: b'0',
                level: 1,
                price: Some(price),
                size: Some(1),
                orders: None,
            }),
        }
    }

    fn bid(b: &Books) -> Option<i64> {
        b.outright.bid.top().map(|l| l.price)
    }

    fn sequence() -> Sequence {
        Sequence::new(Settings {
            gap_timeout_ns: 5,
            restart_margin: 100,
        })
    }

    /// A sequence, an instrument of `depth` outright levels (2 implied),
    /// the feed's cache count and undo log, all new.
    fn fresh(depth: u8) -> (Sequence, Instrument, usize, UndoLog) {
        (sequence(), Instrument::new(depth, 2), 0, UndoLog::default())
    }

    /// The ends of event at `at`, processed in that order.
    fn ends(at: &[Position], seq: &Sequence) -> Ends {
        let mut e = Ends::default();
        for &q in at {
            e.push(q, seq);
        }
        e
    }

    /// Ends of event past the first missing packet, from fills in any
    /// order (from the top down, bottom up, shuffled), stay in order and
    /// answer coverage as the ends a set would; the last fill folds them
    /// all below.
    #[test]
    fn ends_past_a_gap_stay_in_order_whatever_the_order_of_the_fills() {
        let n = 90u32;
        let top_down: Vec<u32> = (3..2 + n).rev().collect();
        let bottom_up: Vec<u32> = (3..2 + n).collect();
        let mut shuffled = bottom_up.clone();
        let mut x = 0x9e37_79b9_u64;
        for i in (1..shuffled.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            shuffled.swap(i, (x % (i as u64 + 1)) as usize);
        }
        for order in [top_down, bottom_up, shuffled] {
            let mut seq = sequence();
            seq.on_packet(1, 0, 0);
            seq.on_packet(2 + n, 0, 0); // [2, 2 + n) missing
            let mut e = Ends::default();
            e.push((2 + n, 0), &seq);
            for &s in &order {
                seq.on_packet(s, 0, 0);
                e.push((s, 1), &seq);
                e.settle(&seq);
                assert!(e
                    .above
                    .iter()
                    .zip(e.above.iter().skip(1))
                    .all(|(a, b)| a < b));
            }
            assert_eq!(e.above.len(), order.len() + 1);
            // Packet 2 missing: nothing from it covered, every change after
            // it covered by its own packet's end.
            assert!(!e.covers((2, 0), &seq));
            assert!(order.iter().all(|&s| e.covers((s, 0), &seq)));
            assert!(!e.covers((2 + n, 1), &seq));
            seq.on_packet(2, 0, 0);
            e.settle(&seq);
            assert!(e.above.is_empty() && e.covers((2, 0), &seq));
            assert_eq!(e.below, Some((2 + n, 0)));
        }
    }

    #[test]
    fn pending_keeps_its_positions_in_order_with_the_first_inline() {
        let mut p = Pending::default();
        assert!(p.is_empty() && p.last().is_none() && p.all(|_| false));
        for at in [(1, 0), (2, 0), (3, 1)] {
            p.push(at);
        }
        assert_eq!(p.last(), Some((3, 1)));
        assert!(p.all(|q| q.0 >= 1) && !p.all(|q| q.0 >= 2));
        // Dropping the first promotes the next, in order.
        p.retain(|q| q.0 != 1);
        assert_eq!((p.head, p.more.as_slice()), (Some((2, 0)), &[(3, 1)][..]));
        p.retain(|q| q.0 == 3);
        assert_eq!((p.head, p.more.len()), (Some((3, 1)), 0));
        p.push((4, 0));
        p.set_all((0, 0));
        assert_eq!((p.head, p.more.as_slice()), (Some((0, 0)), &[(0, 0)][..]));
        p.retain(|_| false);
        assert!(p.is_empty() && p.last().is_none());
        p.push((5, 0));
        p.clear();
        assert!(p.is_empty());
        // What a long gap took is given back once they clear.
        for k in 0..10_000 {
            p.push((k, 0));
        }
        p.clear();
        assert!(p.more.capacity() <= 2 * FOLD_AT, "{}", p.more.capacity());
    }

    /// The bids of `b`, level 1 first (`0`: empty).
    fn bids(b: &Books) -> Vec<i64> {
        let side = &b.outright.bid;
        (1..=side.depth())
            .map(|n| side.level(n).map_or(0, |l| l.price))
            .collect()
    }

    /// While an event is unfinished the visible books stay those before
    /// it, exactly, through more changes than the records kept and
    /// through a definition lowering the depth (each copy cut; the
    /// instrument then without a baseline, its entries waiting for a
    /// snapshot); the end of the event shows every change applied.
    #[test]
    fn an_unfinished_event_hides_its_changes_through_depth_changes_and_long_runs() {
        let (mut seq, mut i, mut cached, mut log) = fresh(4);
        seq.on_packet(1, 0, 0);
        for (r, p) in (1..).zip([10, 20, 30, 40]) {
            i.on_entry(r, new_bid(p, (1, 0)), &mut cached, 10, &mut log);
        }
        assert!(i.cover(&ends(&[(1, 0)], &seq), &seq, &mut log));
        assert_eq!(bids(&i.visible(&log)), [40, 30, 20, 10]);
        // An event in packet 2, its end not yet come: a New at level 1
        // pushes 10 out.
        seq.on_packet(2, 1, 0);
        i.on_entry(5, new_bid(50, (2, 0)), &mut cached, 10, &mut log);
        assert_eq!(bids(i.working()), [50, 40, 30, 20]);
        assert_eq!(bids(&i.visible(&log)), [40, 30, 20, 10]);
        assert_eq!(i.visible_top(&log).0.map(|l| l.price), Some(40));
        // The same depths again (the definition loop repeating it): the
        // event goes on recording.
        i.set_depths(4, 2, &mut log);
        assert!(!i.undo.keeps_whole());
        assert_eq!(bids(&i.visible(&log)), [40, 30, 20, 10]);
        // Many more changes in the same event.
        for r in 6..300 {
            i.on_entry(r, new_bid(i64::from(r), (2, 0)), &mut cached, 10, &mut log);
        }
        assert!(i.undo.keeps_whole());
        assert_eq!(bids(&i.visible(&log)), [40, 30, 20, 10]);
        assert_eq!(i.visible_top(&log).0.map(|l| l.price), Some(40));
        // A lower depth cuts both copies, and leaves no baseline.
        i.set_depths(3, 2, &mut log);
        assert_eq!(bids(i.working()), [299, 298, 297]);
        assert_eq!(bids(&i.visible(&log)), [40, 30, 20]);
        assert!(i.seq.suspect());
        assert!(i.cover(&ends(&[(2, 0)], &seq), &seq, &mut log));
        assert_eq!(bids(&i.visible(&log)), [299, 298, 297]);
        assert_eq!(*i.visible(&log), *i.working());
        // The next event's entry waits for a snapshot.
        seq.on_packet(3, 2, 0);
        i.on_entry(300, new_bid(1, (3, 0)), &mut cached, 10, &mut log);
        assert_eq!(bids(i.working()), [299, 298, 297]);
        assert_eq!(i.seq.cached(), 1);
    }

    #[test]
    fn a_change_is_visible_only_at_the_end_of_its_event() {
        let (mut seq, mut i, mut cached, mut log) = fresh(3);
        seq.on_packet(10, 0, 0);
        i.on_entry(1, new_bid(100, (10, 0)), &mut cached, 10, &mut log);
        assert_eq!((bid(i.working()), bid(&i.visible(&log))), (Some(100), None));
        // An end of event before the change does not cover it.
        assert!(!i.cover(&ends(&[(9, 3)], &seq), &seq, &mut log));
        assert!(!i.cover(&ends(&[], &seq), &seq, &mut log));
        // The event spans packets: its end in packet 11.
        seq.on_packet(11, 1, 0);
        assert!(i.cover(&ends(&[(11, 0)], &seq), &seq, &mut log));
        assert_eq!(bid(&i.visible(&log)), Some(100));
        assert!(!i.pending());
    }

    /// A change whose event ends in its own datagram, on an instrument
    /// with nothing pending, is applied unrecorded and not kept pending;
    /// behind a pending change it is recorded as any, so that the visible
    /// books still revert to the last end of event.
    #[test]
    fn a_change_ending_in_its_datagram_is_recorded_only_behind_a_pending_one() {
        let (mut seq, mut i, mut cached, mut log) = fresh(3);
        seq.on_packet(10, 0, 0);
        i.on_entry(1, new_bid(100, (10, 0)), &mut cached, 10, &mut log);
        assert!(i.cover(&ends(&[(10, 0)], &seq), &seq, &mut log));
        assert_eq!(log.len(), 0);
        let up = |price| new_bid(price, (0, 0)).update.unwrap();
        seq.on_packet(11, 1, 0);
        assert_eq!(
            i.apply_next(2, (11, 0), 1, &up(101), &mut log, true),
            Next::Taken
        );
        assert!(!i.pending() && log.is_empty(), "nothing to revert");
        assert_eq!(bids(&i.visible(&log)), [101, 100, 0]);
        // An event left open at its datagram's end is recorded, and so is
        // a change behind it, though its own event ends in its datagram.
        seq.on_packet(12, 2, 0);
        assert_eq!(
            i.apply_next(3, (12, 0), 2, &up(102), &mut log, false),
            Next::Taken
        );
        seq.on_packet(13, 3, 0);
        assert_eq!(
            i.apply_next(4, (13, 0), 3, &up(103), &mut log, true),
            Next::Taken
        );
        assert_eq!(log.len(), 2);
        assert_eq!(bids(i.working()), [103, 102, 101]);
        assert_eq!(bids(&i.visible(&log)), [101, 100, 0]);
        assert!(i.cover(&ends(&[(13, 0)], &seq), &seq, &mut log));
        assert_eq!(bids(&i.visible(&log)), [103, 102, 101]);
        assert!(!i.pending() && log.is_empty());
    }

    #[test]
    fn a_lost_packet_keeps_the_last_complete_book_until_filled_or_given_up() {
        let (mut seq, mut i, mut cached, mut log) = fresh(3);
        seq.on_packet(10, 0, 0);
        i.on_entry(1, new_bid(100, (10, 0)), &mut cached, 10, &mut log);
        seq.on_packet(11, 0, 0);
        i.cover(&ends(&[(11, 0)], &seq), &seq, &mut log);
        // A change in 12; 13 lost; a later event's end in 14.
        seq.on_packet(12, 1, 0);
        i.on_entry(2, new_bid(101, (12, 0)), &mut cached, 10, &mut log);
        seq.on_packet(14, 1, 0);
        let mut e = ends(&[(11, 0), (14, 0)], &seq);
        assert!(!i.cover(&e, &seq, &mut log), "13 missing");
        assert_eq!(bid(&i.visible(&log)), Some(100));
        // Given up: the next look publishes.
        seq.expire(100);
        e.settle(&seq);
        assert!(i.cover(&e, &seq, &mut log));
        assert_eq!(bid(&i.visible(&log)), Some(101));
    }

    /// Of the ends of events processed, the first at or after the last
    /// change is the one that covers: a later one may span a packet still
    /// missing (spec mdp3 §3.4: "an EndOfEvent message at a position q ≥
    /// p has been processed and no MsgSeqNum in [p.S, q.S] is missing").
    #[test]
    fn the_first_end_of_event_after_the_changes_covers_them() {
        let (mut seq, mut i, mut cached, mut log) = fresh(3);
        for s in [3, 4, 5] {
            seq.on_packet(s, 0, 0);
        }
        i.on_entry(1, new_bid(100, (4, 0)), &mut cached, 10, &mut log);
        seq.on_packet(9, 0, 0); // 6 to 8 missing
        assert!(
            !i.cover(&ends(&[(3, 0)], &seq), &seq, &mut log),
            "before the change"
        );
        assert!(
            !i.cover(&ends(&[(9, 0)], &seq), &seq, &mut log),
            "7 missing"
        );
        assert!(i.cover(&ends(&[(3, 0), (5, 0), (9, 0)], &seq), &seq, &mut log));
        assert_eq!(bid(&i.visible(&log)), Some(100));
    }

    #[test]
    fn a_snapshot_replaces_both_books_at_once_and_applies_what_continues_it() {
        let mut seq = sequence();
        seq.on_packet(10, 0, 0);
        let mut i = Instrument::new(3, 2);
        let mut cached = 0;
        let mut log = UndoLog::default();
        // No baseline: 5 and 6 cached.
        i.on_entry(5, new_bid(105, (10, 0)), &mut cached, 10, &mut log);
        i.on_entry(6, new_bid(106, (10, 1)), &mut cached, 10, &mut log);
        assert_eq!(cached, 2);
        let s = i.on_snapshot(5, &mut cached, &mut log, |b| {
            b.set(b'1', 1, Some(200), 3, None);
        });
        assert_eq!(s, Snapshot::Applied { lost: 0 });
        // The snapshot is visible at once; 6 applied, pending its event.
        assert_eq!(
            i.visible(&log).outright.offer.top().map(|l| l.price),
            Some(200)
        );
        assert_eq!(bid(&i.visible(&log)), None);
        assert_eq!(bid(i.working()), Some(106));
        assert!(i.pending() && cached == 0);
        assert!(i.cover(&ends(&[(10, 1)], &seq), &seq, &mut log));
        assert_eq!(bid(&i.visible(&log)), Some(106));
    }

    /// A packet filling a gap brings an end of event below one already
    /// processed: the later end still covers the change after the gap.
    #[test]
    fn an_end_of_event_filled_late_does_not_hide_a_later_one() {
        let (mut seq, mut i, mut cached, mut log) = fresh(3);
        seq.on_packet(1, 0, 0);
        // Packet 2 (RptSeq 1, its event's end) is late; packet 3 changes
        // the book (RptSeq 2, cached) and ends its event.
        seq.on_packet(3, 0, 0);
        let mut e = ends(&[(3, 1)], &seq);
        assert_eq!(
            i.on_entry(2, new_bid(102, (3, 0)), &mut cached, 10, &mut log),
            Took::Cached
        );
        // Packet 2 fills the gap: 1 applies, then 2 (at its own place).
        seq.on_packet(2, 1, 0);
        i.on_entry(1, new_bid(101, (2, 0)), &mut cached, 10, &mut log);
        e.push((2, 1), &seq);
        e.settle(&seq);
        assert!(i.cover(&e, &seq, &mut log));
        assert_eq!(bid(&i.visible(&log)), Some(102));
    }

    /// Changes before two gaps, each followed by its event's end: once
    /// the first gap fills, every change has an end after it with nothing
    /// missing in between, though the second gap is still open.
    #[test]
    fn each_change_is_covered_by_the_nearest_end_after_it() {
        let (mut seq, mut i, mut cached, mut log) = fresh(3);
        let mut e = Ends::default();
        seq.on_packet(8, 0, 0);
        i.on_entry(1, new_bid(108, (8, 0)), &mut cached, 10, &mut log);
        // 9 is missing; 10 changes the book and ends its event.
        seq.on_packet(10, 0, 0);
        i.on_entry(2, new_bid(110, (10, 0)), &mut cached, 10, &mut log);
        e.push((10, 1), &seq);
        assert!(!i.cover(&e, &seq, &mut log), "9 missing");
        // 11 is missing; 12 changes and ends.
        seq.on_packet(12, 0, 0);
        i.on_entry(3, new_bid(112, (12, 0)), &mut cached, 10, &mut log);
        e.push((12, 1), &seq);
        assert!(!i.cover(&e, &seq, &mut log), "9 still missing");
        // 9 comes (no end of event in it): 8 and 10 are covered by
        // (10, 1), 12 by (12, 1); 11 missing is between no change and its
        // end.
        seq.on_packet(9, 1, 0);
        e.settle(&seq);
        assert!(i.cover(&e, &seq, &mut log));
        assert_eq!(bid(&i.visible(&log)), Some(112));
        assert_eq!(seq.first_missing(), Some(11));
    }

    #[test]
    fn anomalies_and_entries_without_a_book_keep_their_rpt_seq_place() {
        let mut i = Instrument::new(3, 2);
        let mut cached = 0;
        let mut log = UndoLog::default();
        let mut odd = new_bid(1, (1, 0));
        odd.update.as_mut().unwrap().action = 9;
        assert_eq!(i.on_entry(1, odd, &mut cached, 10, &mut log), Took::Applied);
        let trade = Cached {
            at: (1, 1),
            transact_time: 77,
            update: None,
        };
        assert_eq!(
            i.on_entry(2, trade, &mut cached, 10, &mut log),
            Took::Applied
        );
        assert_eq!(
            (i.anomalies(), i.seq.rpt_seq(), i.pending()),
            (1, Some(2), false)
        );
        assert_eq!(i.last_transact_time(), Some(77));
        i.reset(&mut cached, &mut log);
        assert_eq!(i.seq.rpt_seq(), Some(0));
    }
}
