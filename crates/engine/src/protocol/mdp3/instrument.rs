//! One instrument: its RptSeq, its working books (every applied entry)
//! and its visible books (what a check reads), and when the first become
//! the second.
//!
//! CME's books are consistent only at the end of a Globex event (the
//! EndOfEvent bit of MatchEventIndicator), and an event may span packets.
//! An applied change at position `p` (MsgSeqNum, message index) is
//! **covered** once an EndOfEvent at a position `q ≥ p` was processed and
//! no packet in `[p.S, q.S]` is missing (each received, or its gap given
//! up). When all of an instrument's pending changes are covered its
//! visible books take the working ones. It is enough to keep the first
//! and the last pending position: the first's range contains every
//! later one's, and the last bounds which end of event may cover them.
//!
//! A packet lost with an event's end therefore keeps the instruments the
//! event changed on their previous visible books while the gap is open;
//! a fill or a give-up lets a later end of event publish them. A snapshot
//! replaces both books at once and drops what was pending.

use super::book::{Applied, Books, Changed, Update};
use super::rptseq::{RptSeq, Snapshot, Took};
use super::sequence::Sequence;
use super::status::Position;

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

/// One instrument's sequencing and books.
#[derive(Debug, Clone)]
pub struct Instrument {
    /// Its RptSeq and cache.
    pub seq: RptSeq<Cached>,
    working: Books,
    visible: Books,
    /// First and last position of the changes not visible yet, packed
    /// ([`pack`]); [`NOTHING_PENDING`] when none is.
    pending: (u64, u64),
    /// The slots of the working books those changes touched: all that
    /// the visible books lack (they equal the working books elsewhere).
    changed: Changed,
    /// TransactTime of the last applied entry, ns.
    last_transact_time: Option<u64>,
    /// Entries that changed nothing for an odd value (unknown action or
    /// entry type, a level update without price or size).
    anomalies: u64,
}

impl Instrument {
    /// An instrument with no baseline and empty books of `depth`
    /// (outright) and `implied_depth` levels.
    pub fn new(depth: u8, implied_depth: u8) -> Instrument {
        let books = Books::new(depth, implied_depth);
        Instrument {
            seq: RptSeq::new(),
            working: books.clone(),
            visible: books,
            pending: NOTHING_PENDING,
            changed: Changed::NONE,
            last_transact_time: None,
            anomalies: 0,
        }
    }

    /// The books a check reads.
    pub fn visible(&self) -> &Books {
        &self.visible
    }

    /// The books every applied entry changed.
    pub fn working(&self) -> &Books {
        &self.working
    }

    /// Changes are waiting for their event's end.
    pub fn pending(&self) -> bool {
        self.pending != NOTHING_PENDING
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
    /// feed's cache.
    pub fn on_entry(
        &mut self,
        r: u32,
        entry: Cached,
        cached: &mut usize,
        max_cached: usize,
    ) -> Took {
        let Instrument {
            seq,
            working,
            pending,
            changed,
            last_transact_time,
            anomalies,
            ..
        } = self;
        seq.on_entry(r, entry, cached, max_cached, |_, e| {
            apply(working, pending, changed, last_transact_time, anomalies, e)
        })
    }

    /// A book entry of RptSeq `r` at `at` applied at once when it is the
    /// usual case (the next value, nothing cached: see
    /// [`RptSeq::take_next`]), as [`on_entry`](Self::on_entry) would apply
    /// it; false, changing nothing, when it must go through `on_entry`.
    #[inline]
    pub fn apply_next(&mut self, r: u32, at: Position, transact_time: u64, u: &Update) -> bool {
        if !self.seq.take_next(r) {
            return false;
        }
        self.last_transact_time = Some(transact_time);
        update(
            &mut self.working,
            &mut self.pending,
            &mut self.changed,
            &mut self.anomalies,
            at,
            u,
        );
        true
    }

    /// A snapshot of RptSeq `r` whose entries `set` puts in the (cleared)
    /// books: when it applies, both books are replaced and visible at
    /// once, what was pending dropped, and the cached entries continuing
    /// `r` applied (pending again until their event's end).
    pub fn on_snapshot(
        &mut self,
        r: u32,
        cached: &mut usize,
        set: impl FnOnce(&mut Books),
    ) -> Snapshot {
        let Instrument {
            seq,
            working,
            visible,
            pending,
            changed,
            last_transact_time,
            anomalies,
        } = self;
        // The books are replaced before the cached entries continuing the
        // snapshot apply, and whether it applies is known only once
        // matched: those entries wait in a short list (the snapshot path,
        // not the incremental one, pays for it).
        let mut later = Vec::new();
        let s = seq.on_snapshot(r, cached, |_, e| later.push(e));
        if let Snapshot::Applied { .. } = s {
            working.clear();
            set(working);
            visible.copy_from(working);
            *pending = NOTHING_PENDING;
            *changed = Changed::NONE;
            for e in later {
                apply(working, pending, changed, last_transact_time, anomalies, e);
            }
        }
        s
    }

    /// Publishes the working books if every pending change is covered by
    /// the end of event at `eoe` (the last processed), given which
    /// packets `seq` knows to be missing. Returns whether it did. Only the
    /// levels the pending changes touched are copied.
    #[inline]
    pub fn cover(&mut self, eoe: Option<Position>, seq: &Sequence) -> bool {
        let ((first, last), Some(q)) = (self.pending, eoe) else {
            return false;
        };
        if self.pending == NOTHING_PENDING
            || last > pack(q)
            || !seq.complete((first >> 16) as u32, q.0)
        {
            return false;
        }
        self.visible
            .copy_changed_from(&self.working, &mut self.changed);
        self.pending = NOTHING_PENDING;
        true
    }

    /// A channel reset: books emptied (visible too), cache and pending
    /// changes dropped, RptSeq restarting at 1.
    pub fn reset(&mut self, cached: &mut usize) {
        self.working.clear();
        self.visible.clear();
        self.pending = NOTHING_PENDING;
        self.changed = Changed::NONE;
        self.seq.reset(cached);
    }

    /// New depths (a definition): a lower one cuts deeper levels of both
    /// copies.
    pub fn set_depths(&mut self, depth: u8, implied_depth: u8) {
        self.working.set_depths(depth, implied_depth);
        self.visible.set_depths(depth, implied_depth);
    }
}

/// No change pending: a first position above any packed one, a last
/// below (so that the first change sets both by `min` and `max`).
const NOTHING_PENDING: (u64, u64) = (u64::MAX, 0);

/// A position as one integer, in the same order: MsgSeqNum in the high
/// bits, the message index in the low 16.
#[inline(always)]
fn pack((s, k): Position) -> u64 {
    u64::from(s) << 16 | u64::from(k)
}

/// Applies one entry to the working books, noting it pending and the
/// slots it touched.
#[inline]
fn apply(
    working: &mut Books,
    pending: &mut (u64, u64),
    changed: &mut Changed,
    last_transact_time: &mut Option<u64>,
    anomalies: &mut u64,
    e: Cached,
) {
    *last_transact_time = Some(e.transact_time);
    if let Some(u) = e.update {
        update(working, pending, changed, anomalies, e.at, &u);
    }
}

/// Applies a book update at `at` to the working books, noting it pending
/// and the slots it touched.
#[inline]
fn update(
    working: &mut Books,
    pending: &mut (u64, u64),
    changed: &mut Changed,
    anomalies: &mut u64,
    at: Position,
    u: &Update,
) {
    match working.apply_marking(u, changed) {
        Applied::Changed => {
            let at = pack(at);
            *pending = (pending.0.min(at), pending.1.max(at));
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

    #[test]
    fn a_change_is_visible_only_at_the_end_of_its_event() {
        let mut seq = sequence();
        let mut i = Instrument::new(3, 2);
        let mut cached = 0;
        seq.on_packet(10, 0);
        i.on_entry(1, new_bid(100, (10, 0)), &mut cached, 10);
        assert_eq!((bid(i.working()), bid(i.visible())), (Some(100), None));
        // An end of event before the change does not cover it.
        assert!(!i.cover(Some((9, 3)), &seq));
        assert!(!i.cover(None, &seq));
        // The event spans packets: its end in packet 11.
        seq.on_packet(11, 1);
        assert!(i.cover(Some((11, 0)), &seq));
        assert_eq!(bid(i.visible()), Some(100));
        assert!(!i.pending());
    }

    #[test]
    fn a_lost_packet_keeps_the_last_complete_book_until_filled_or_given_up() {
        let mut seq = sequence();
        let mut i = Instrument::new(3, 2);
        let mut cached = 0;
        seq.on_packet(10, 0);
        i.on_entry(1, new_bid(100, (10, 0)), &mut cached, 10);
        seq.on_packet(11, 0);
        i.cover(Some((11, 0)), &seq);
        // A change in 12; 13 lost; a later event's end in 14.
        seq.on_packet(12, 1);
        i.on_entry(2, new_bid(101, (12, 0)), &mut cached, 10);
        seq.on_packet(14, 1);
        assert!(!i.cover(Some((14, 0)), &seq), "13 missing");
        assert_eq!(bid(i.visible()), Some(100));
        // Given up: the next look publishes.
        seq.expire(100);
        assert!(i.cover(Some((14, 0)), &seq));
        assert_eq!(bid(i.visible()), Some(101));
    }

    #[test]
    fn a_snapshot_replaces_both_books_at_once_and_applies_what_continues_it() {
        let mut seq = sequence();
        seq.on_packet(10, 0);
        let mut i = Instrument::new(3, 2);
        let mut cached = 0;
        // No baseline: 5 and 6 cached.
        i.on_entry(5, new_bid(105, (10, 0)), &mut cached, 10);
        i.on_entry(6, new_bid(106, (10, 1)), &mut cached, 10);
        assert_eq!(cached, 2);
        let s = i.on_snapshot(5, &mut cached, |b| {
            b.set(b'1', 1, Some(200), 3, None);
        });
        assert_eq!(s, Snapshot::Applied { lost: 0 });
        // The snapshot is visible at once; 6 applied, pending its event.
        assert_eq!(i.visible().outright.offer.top().map(|l| l.price), Some(200));
        assert_eq!(bid(i.visible()), None);
        assert_eq!(bid(i.working()), Some(106));
        assert!(i.pending() && cached == 0);
        assert!(i.cover(Some((10, 1)), &seq));
        assert_eq!(bid(i.visible()), Some(106));
    }

    #[test]
    fn anomalies_and_entries_without_a_book_keep_their_rpt_seq_place() {
        let mut i = Instrument::new(3, 2);
        let mut cached = 0;
        let mut odd = new_bid(1, (1, 0));
        odd.update.as_mut().unwrap().action = 9;
        assert_eq!(i.on_entry(1, odd, &mut cached, 10), Took::Applied);
        let trade = Cached {
            at: (1, 1),
            transact_time: 77,
            update: None,
        };
        assert_eq!(i.on_entry(2, trade, &mut cached, 10), Took::Applied);
        assert_eq!(
            (i.anomalies(), i.seq.rpt_seq(), i.pending()),
            (1, Some(2), false)
        );
        assert_eq!(i.last_transact_time(), Some(77));
        i.reset(&mut cached);
        assert_eq!(i.seq.rpt_seq(), Some(0));
    }
}
