//! An instrument's market-by-price books: outright and implied, each a
//! bid and an offer side of a fixed depth (the definition's MarketDepth,
//! else the feed's default), edited by price level as CME's incremental
//! book updates say.
//!
//! A side is an array of `depth` slots, level 1 first; a slot may be
//! empty. The actions, at level `n` (1-based):
//!
//! - **New** inserts at `n`; deeper levels shift one down, and one pushed
//!   past the depth is dropped.
//! - **Change** and **Overlay** overwrite `n`.
//! - **Delete** removes `n`; deeper levels shift one up, the last slot
//!   empties.
//! - **DeleteFrom** removes levels 1 to `n`; the rest shift up (`n` at or
//!   past the depth empties the side).
//! - **DeleteThru** empties the side.
//!
//! A level outside `1..=depth` changes nothing (DeleteFrom and DeleteThru
//! aside). Entry type `J` empties both books; `w` and `x` (market best
//! offer and bid) change none. An unknown action or entry type, or a New,
//! Change or Overlay without a price or size, changes nothing and is an
//! anomaly for the caller to count.
//!
//! Prices are the wire's mantissas (exponent −9), compared as signed
//! integers: never floats. The top of book is level 1, read in O(1). The
//! slots are allocated once, with the instrument (again when a definition
//! changes its depths); an update allocates only the first time an
//! instrument's unfinished event outgrows its undo records (the visible
//! books then kept whole, [`Undo`]).
//!
//! Each change can be recorded as it is made ([`Undo`]), so that the books
//! as they were before a run of changes (an unfinished event's) can be
//! had again without keeping a second copy.

/// Most levels a side holds (MarketDepth is an `i8`).
pub const MAX_DEPTH: u8 = 127;

/// One price level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level {
    /// Price mantissa, exponent −9.
    pub price: i64,
    /// Quantity at the price.
    pub size: u64,
    /// Orders at the price, when sent.
    pub orders: Option<i32>,
}

/// What an update does to a level (MDUpdateAction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// 0.
    New,
    /// 1.
    Change,
    /// 2.
    Delete,
    /// 3.
    DeleteThru,
    /// 4.
    DeleteFrom,
    /// 5.
    Overlay,
}

impl Action {
    /// The action of wire code `c`, `None` for an unknown one.
    pub fn from_code(c: u8) -> Option<Action> {
        Some(match c {
            0 => Action::New,
            1 => Action::Change,
            2 => Action::Delete,
            3 => Action::DeleteThru,
            4 => Action::DeleteFrom,
            5 => Action::Overlay,
            _ => return None,
        })
    }
}

/// Which book and side an entry is for (MDEntryType).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// `0`.
    Bid,
    /// `1`.
    Offer,
    /// `E`.
    ImpliedBid,
    /// `F`.
    ImpliedOffer,
    /// `J`: both books empty.
    Reset,
    /// `w` or `x`: market best offer or bid, no book change.
    MarketBest,
}

impl Entry {
    /// The entry type of wire character `c`, `None` for one that is not a
    /// book entry.
    pub fn from_code(c: u8) -> Option<Entry> {
        Some(match c {
            b'0' => Entry::Bid,
            b'1' => Entry::Offer,
            b'E' => Entry::ImpliedBid,
            b'F' => Entry::ImpliedOffer,
            b'J' => Entry::Reset,
            b'w' | b'x' => Entry::MarketBest,
            _ => return None,
        })
    }
}

/// The side of each MDEntryType code ([`Books::side_mut`]): 0 bid, 1
/// offer, 2 implied bid, 3 implied offer; 4 for every other code.
const SIDE_OF: [u8; 256] = {
    let mut t = [4; 256];
    t[b'0' as usize] = 0;
    t[b'1' as usize] = 1;
    t[b'E' as usize] = 2;
    t[b'F' as usize] = 3;
    t
};

/// One book update, as an incremental entry carries it (nulls as `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Update {
    /// MDUpdateAction, as sent.
    pub action: u8,
    /// MDEntryType, as sent.
    pub entry: u8,
    /// MDPriceLevel, 1-based.
    pub level: u8,
    /// MDEntryPx mantissa.
    pub price: Option<i64>,
    /// MDEntrySize.
    pub size: Option<u64>,
    /// NumberOfOrders.
    pub orders: Option<i32>,
}

/// What an update did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// A book changed (or may have: a level past the depth did not).
    Changed,
    /// Nothing to change (`w`/`x`, a level outside the depth).
    Unchanged,
    /// An unknown action or entry type, or a level update without a price
    /// or size: nothing changed.
    Anomaly,
}

/// One side: `depth` slots, level 1 first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Side {
    slots: Box<[Option<Level>]>,
}

impl Side {
    /// An empty side of `depth` levels (at most [`MAX_DEPTH`]).
    pub fn new(depth: u8) -> Side {
        Side {
            slots: vec![None; usize::from(depth.min(MAX_DEPTH))].into_boxed_slice(),
        }
    }

    /// Its depth.
    pub fn depth(&self) -> u8 {
        self.slots.len() as u8
    }

    /// Level 1, `None` when the side is empty.
    #[inline]
    pub fn top(&self) -> Option<Level> {
        self.slots.first().copied().flatten()
    }

    /// Level `n` (1-based).
    pub fn level(&self, n: u8) -> Option<Level> {
        self.slots
            .get(usize::from(n).checked_sub(1)?)
            .copied()
            .flatten()
    }

    /// Empties every level.
    pub fn clear(&mut self) {
        self.slots.fill(None);
    }

    /// Sets level `n` (a snapshot's entry); outside the depth, nothing.
    pub fn set(&mut self, n: u8, level: Level) {
        if let Some(i) = index(n, self.slots.len()) {
            self.slots[i] = Some(level);
        }
    }

    /// Applies `action` at level `n` with `level` (present for New,
    /// Change, Overlay), first noting in `rec` what reverts it (as side
    /// `side` of [`SIDE_OF`]). Returns whether the side may have changed.
    #[inline(always)]
    fn apply(
        &mut self,
        action: Action,
        n: u8,
        level: Option<Level>,
        side: u8,
        rec: &mut Recorder<'_>,
    ) -> bool {
        let depth = self.slots.len();
        let i = match action {
            Action::DeleteThru => {
                self.delete_from(depth, side, rec);
                return true;
            }
            Action::DeleteFrom => {
                if n == 0 {
                    return false;
                }
                self.delete_from(usize::from(n).min(depth), side, rec);
                return true;
            }
            Action::New => {
                let Some(i) = index(n, depth) else {
                    return false;
                };
                rec.push(Undone::New, side, i, self.slots[depth - 1]);
                self.slots.copy_within(i..depth - 1, i + 1);
                i
            }
            Action::Change | Action::Overlay => {
                let Some(i) = index(n, depth) else {
                    return false;
                };
                rec.push(Undone::Set, side, i, self.slots[i]);
                i
            }
            Action::Delete => {
                let Some(i) = index(n, depth) else {
                    return false;
                };
                rec.push(Undone::Delete, side, i, self.slots[i]);
                self.slots.copy_within(i + 1.., i);
                self.slots[depth - 1] = None;
                return true;
            }
        };
        self.slots[i] = level;
        true
    }

    /// Removes levels 1 to `m` (at most the depth): the deeper ones shift
    /// up, the last `m` slots empty. The removed levels are saved in
    /// `rec` first.
    fn delete_from(&mut self, m: usize, side: u8, rec: &mut Recorder<'_>) {
        let depth = self.slots.len();
        rec.save(side, &self.slots[..m]);
        self.slots.copy_within(m.., 0);
        self.slots[depth - m..].fill(None);
    }

    /// Every slot of `other`, without allocating when the depths agree.
    fn copy_from(&mut self, other: &Side) {
        if self.slots.len() == other.slots.len() {
            self.slots.copy_from_slice(&other.slots);
        } else {
            self.slots.clone_from(&other.slots);
        }
    }

    /// Keeps the first `depth` levels' slots (a definition lowering the
    /// depth cuts the deeper levels; raising it adds empty ones).
    fn resize(&mut self, depth: u8) {
        let depth = usize::from(depth.min(MAX_DEPTH));
        if depth != self.slots.len() {
            let mut slots = vec![None; depth].into_boxed_slice();
            let keep = depth.min(self.slots.len());
            slots[..keep].copy_from_slice(&self.slots[..keep]);
            self.slots = slots;
        }
    }
}

/// Slot index of level `n` in a side of `depth`, `None` outside `1..=depth`.
#[inline]
fn index(n: u8, depth: usize) -> Option<usize> {
    let i = usize::from(n).checked_sub(1)?;
    (i < depth).then_some(i)
}

/// Reverts record `r` on the slots of its side (`saved`: the slots it
/// saved, for [`Undone::Saved`]).
fn revert(slots: &mut [Option<Level>], r: &Record, saved: &[Option<Level>]) {
    let depth = slots.len();
    let i = usize::from(r.i);
    match r.kind {
        Undone::Set => slots[i] = r.old,
        Undone::New => {
            slots.copy_within(i + 1.., i);
            slots[depth - 1] = r.old;
        }
        Undone::Delete => {
            slots.copy_within(i..depth - 1, i + 1);
            slots[i] = r.old;
        }
        Undone::Saved => {
            let m = saved.len();
            slots.copy_within(..depth - m, m);
            slots[..m].copy_from_slice(saved);
        }
    }
}

/// What a [`Record`] reverts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Undone {
    /// A Change or Overlay: slot `i` held `old`.
    Set,
    /// A New at `i`: it pushed `old` out of the last slot.
    New,
    /// A Delete at `i`: slot `i` held `old` (and the last slot was empty
    /// after it).
    Delete,
    /// A DeleteFrom, DeleteThru or `J`: the first `n` slots were removed,
    /// saved in the log's `saved` from `at`.
    Saved,
}

/// No record (the end of an instrument's chain).
const NONE: u32 = u32::MAX;

/// One change to a side, as [`UndoLog`] keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Record {
    old: Option<Level>,
    kind: Undone,
    /// Side, as [`SIDE_OF`] numbers them.
    side: u8,
    /// Slot (0-based).
    i: u8,
    /// Slots saved, for [`Undone::Saved`].
    n: u8,
    /// Where they are in the log's `saved`.
    at: u32,
    /// The instrument's record before this one ([`NONE`]: none).
    prev: u32,
}

/// Records an instrument's chain holds before it keeps its visible books
/// whole instead.
const MAX_RECORDS: u16 = 64;

/// Slots its records may save (levels removed by DeleteFrom, DeleteThru
/// and `J`) before it keeps its visible books whole instead: what two
/// sides of the deepest book hold.
const MAX_SAVED: u16 = 2 * MAX_DEPTH as u16;

/// The log is compacted when it holds more records than this and more
/// than twice those still wanted.
const COMPACT_AT: usize = 4096;

/// The records of a feed's instruments' changes not visible yet: one log
/// for all of them, so that it stays small and in cache (the usual event
/// is recorded and forgotten before the next), each instrument's records
/// chained newest first from its [`Undo`].
///
/// A change records the slot it overwrites or pushes out (Change,
/// Overlay, New, Delete), or saves the levels it removes (DeleteFrom,
/// DeleteThru, `J`). Covering an instrument drops its chain; the log is
/// emptied when no chain is left, and compacted (the chains still
/// wanted copied, in order) when dropped records outnumber them past
/// `COMPACT_AT` (4,096) records, so an instrument whose event never ends
/// cannot grow it without bound. Its buffers grow (amortised) to the most
/// needed at once and are kept.
#[derive(Debug, Clone, Default)]
pub struct UndoLog {
    records: Vec<Record>,
    /// Slots saved by [`Undone::Saved`] records.
    saved: Vec<Option<Level>>,
    /// Records still in a chain.
    live: usize,
    /// Compaction's buffers, kept.
    spare_records: Vec<Record>,
    spare_saved: Vec<Option<Level>>,
    chain: Vec<u32>,
}

/// An instrument's changes not visible yet: the newest of its records in
/// the [`UndoLog`], whose chain reverted newest first gives its visible
/// books. Past `MAX_RECORDS` (64) changes or `MAX_SAVED` (254) levels
/// saved, and when a definition changes the depths (records revert at the
/// depths they were made at), the visible books are kept whole instead
/// ([`keep_whole`]), and nothing is recorded until [`clear`]: an
/// instrument's part of the log stays within about a copy of its books
/// however long an event stays open.
///
/// [`keep_whole`]: Undo::keep_whole
/// [`clear`]: Undo::clear
#[derive(Debug, Clone)]
pub struct Undo {
    /// Its newest record ([`NONE`]: none).
    last: u32,
    /// Records in its chain.
    count: u16,
    /// Slots those records saved.
    saved: u16,
    /// `whole` holds the visible books; nothing is recorded.
    whole_on: bool,
    /// The visible books, once kept whole (allocated the first time).
    whole: Option<Box<Books>>,
}

impl Default for Undo {
    fn default() -> Undo {
        Undo {
            last: NONE,
            count: 0,
            saved: 0,
            whole_on: false,
            whole: None,
        }
    }
}

/// Where a change is recorded: an instrument's [`Undo`] and the log.
pub struct Recorder<'a> {
    /// The instrument's chain.
    undo: &'a mut Undo,
    /// The feed's log.
    log: &'a mut UndoLog,
    /// Changes are recorded: not while the visible books are kept whole,
    /// nor for a change made visible before anything reads the books.
    on: bool,
}

impl<'a> Recorder<'a> {
    /// Records into `undo`'s chain in `log` (unless `undo` keeps the
    /// visible books whole).
    #[inline(always)]
    pub fn new(undo: &'a mut Undo, log: &'a mut UndoLog) -> Recorder<'a> {
        let on = !undo.whole_on;
        Recorder { undo, log, on }
    }

    /// Records nothing: for changes the caller makes visible before
    /// anything reads the books (their event ends in the same datagram)
    /// on an instrument with nothing pending.
    #[inline(always)]
    pub fn off(undo: &'a mut Undo, log: &'a mut UndoLog) -> Recorder<'a> {
        Recorder {
            undo,
            log,
            on: false,
        }
    }

    /// Whether the chain reached its bound ([`Undo::full`]).
    #[inline(always)]
    pub fn full(&self) -> bool {
        self.undo.full()
    }

    /// [`Undo::keep_whole`]: nothing more is recorded.
    pub fn keep_whole(&mut self, books: &Books) {
        self.undo.keep_whole(books, self.log);
        self.on = false;
    }

    /// Records a one-slot change.
    #[inline(always)]
    fn push(&mut self, kind: Undone, side: u8, i: usize, old: Option<Level>) {
        if self.on {
            self.record(Record {
                old,
                kind,
                side,
                i: i as u8,
                n: 0,
                at: 0,
                prev: NONE,
            });
        }
    }

    /// Records the removal of `slots` (the first of a side).
    fn save(&mut self, side: u8, slots: &[Option<Level>]) {
        if self.on {
            let at = self.log.saved.len() as u32;
            self.log.saved.extend_from_slice(slots);
            self.undo.saved += slots.len() as u16;
            self.record(Record {
                old: None,
                kind: Undone::Saved,
                side,
                i: 0,
                n: slots.len() as u8,
                at,
                prev: NONE,
            });
        }
    }

    #[inline(always)]
    fn record(&mut self, mut r: Record) {
        r.prev = self.undo.last;
        self.undo.last = self.log.records.len() as u32;
        self.undo.count += 1;
        self.log.live += 1;
        self.log.records.push(r);
    }
}

impl UndoLog {
    /// Records held (dropped ones included).
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// No record held.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Dropped records outnumber those still chained, past `COMPACT_AT`.
    #[inline]
    pub fn wants_compaction(&self) -> bool {
        self.records.len() > COMPACT_AT && self.records.len() > 2 * self.live
    }

    /// Keeps only the chains of `undos` (which must include every
    /// instrument with records), each in order, relinked; the rest of the
    /// log is dropped.
    pub fn compact<'u>(&mut self, undos: impl Iterator<Item = &'u mut Undo>) {
        let mut records = std::mem::take(&mut self.spare_records);
        let mut saved = std::mem::take(&mut self.spare_saved);
        records.clear();
        saved.clear();
        for u in undos {
            self.chain.clear();
            let mut k = u.last;
            while k != NONE {
                self.chain.push(k);
                k = self.records[k as usize].prev;
            }
            let mut prev = NONE;
            for &k in self.chain.iter().rev() {
                let mut r = self.records[k as usize];
                if r.kind == Undone::Saved {
                    let from = r.at as usize;
                    r.at = saved.len() as u32;
                    saved.extend_from_slice(&self.saved[from..from + usize::from(r.n)]);
                }
                r.prev = prev;
                prev = records.len() as u32;
                records.push(r);
            }
            u.last = prev;
        }
        self.live = records.len();
        self.spare_records = std::mem::replace(&mut self.records, records);
        self.spare_saved = std::mem::replace(&mut self.saved, saved);
    }

    /// Hands `f` each record of the chain from `last`, newest first, with
    /// the slots it saved.
    fn each(&self, last: u32, mut f: impl FnMut(&Record, &[Option<Level>])) {
        let mut k = last;
        while k != NONE {
            let r = &self.records[k as usize];
            let saved = match r.kind {
                Undone::Saved => {
                    let from = r.at as usize;
                    &self.saved[from..from + usize::from(r.n)]
                }
                _ => &[][..],
            };
            f(r, saved);
            k = r.prev;
        }
    }
}

impl Undo {
    /// The visible books kept as a whole copy (records stopped).
    #[cfg(test)]
    pub fn keeps_whole(&self) -> bool {
        self.whole_on
    }

    /// Nothing to revert: the books are the visible books.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.last == NONE && !self.whole_on
    }

    /// Forgets its records: the books are visible as they are. The log
    /// empties when no chain is left.
    #[inline]
    pub fn clear(&mut self, log: &mut UndoLog) {
        log.live -= usize::from(self.count);
        if log.live == 0 {
            log.records.clear();
            log.saved.clear();
        }
        self.last = NONE;
        self.count = 0;
        self.saved = 0;
        self.whole_on = false;
    }

    /// Heap bytes it holds (the whole books, once kept).
    pub fn heap_bytes(&self) -> usize {
        self.whole.as_ref().map_or(0, |w| {
            std::mem::size_of::<Books>() + w.slots() * std::mem::size_of::<Option<Level>>()
        })
    }

    /// More records than `MAX_RECORDS`, or more slots saved than
    /// `MAX_SAVED`: time to keep the books whole.
    #[inline]
    pub fn full(&self) -> bool {
        self.count > MAX_RECORDS || self.saved > MAX_SAVED
    }

    /// Keeps the visible books whole (`books` reverted) and forgets the
    /// records; nothing is recorded until [`clear`](Self::clear).
    pub fn keep_whole(&mut self, books: &Books, log: &mut UndoLog) {
        if self.whole_on {
            return;
        }
        let mut whole = match self.whole.take() {
            Some(mut w) => {
                w.copy_from(books);
                w
            }
            None => Box::new(books.clone()),
        };
        self.revert(&mut whole, log);
        self.whole = Some(whole);
        self.clear(log);
        self.whole_on = true;
    }

    /// New depths for the books these records are of: records revert at
    /// the depths they were made at, so the visible books are kept whole
    /// first, at the new depths too.
    pub fn set_depths(&mut self, books: &Books, log: &mut UndoLog, depth: u8, implied: u8) {
        if self.last != NONE {
            self.keep_whole(books, log);
        }
        if let (true, Some(w)) = (self.whole_on, self.whole.as_mut()) {
            w.set_depths(depth, implied);
        }
    }

    /// The visible books of `books`: themselves when nothing is recorded.
    pub fn visible<'b>(&'b self, books: &'b Books, log: &UndoLog) -> std::borrow::Cow<'b, Books> {
        use std::borrow::Cow;
        match (&self.whole, self.whole_on) {
            (Some(w), true) => Cow::Borrowed(w),
            _ if self.last == NONE => Cow::Borrowed(books),
            _ => {
                let mut b = books.clone();
                self.revert(&mut b, log);
                Cow::Owned(b)
            }
        }
    }

    /// Level 1 of visible side `side` (0 outright bid, 1 outright offer, 2
    /// implied bid, 3 implied offer) of `books`, without allocating: the
    /// side is reverted on the stack when a record is of it.
    pub fn visible_top(&self, books: &Books, log: &UndoLog, side: u8) -> Option<Level> {
        if let (Some(w), true) = (&self.whole, self.whole_on) {
            return w.side(side).top();
        }
        let live = books.side(side);
        let mut touched = false;
        log.each(self.last, |r, _| touched |= r.side == side);
        if !touched {
            return live.top();
        }
        let mut copy = [None; MAX_DEPTH as usize];
        let slots = &mut copy[..live.slots.len()];
        slots.copy_from_slice(&live.slots);
        log.each(self.last, |r, saved| {
            if r.side == side {
                revert(slots, r, saved);
            }
        });
        slots.first().copied().flatten()
    }

    /// Reverts its records onto `books` (at the depths they were made
    /// at), newest first.
    fn revert(&self, books: &mut Books, log: &UndoLog) {
        log.each(self.last, |r, saved| {
            if let Some(side) = books.side_mut(usize::from(r.side)) {
                revert(&mut side.slots, r, saved);
            }
        });
    }
}

/// One book: a bid side and an offer side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Book {
    /// Buy side.
    pub bid: Side,
    /// Sell side.
    pub offer: Side,
}

impl Book {
    /// An empty book of `depth` levels a side.
    pub fn new(depth: u8) -> Book {
        Book {
            bid: Side::new(depth),
            offer: Side::new(depth),
        }
    }

    /// Empties both sides.
    pub fn clear(&mut self) {
        self.bid.clear();
        self.offer.clear();
    }

    /// Both sides empty.
    pub fn is_empty(&self) -> bool {
        self.bid.top().is_none() && self.offer.top().is_none()
    }

    fn resize(&mut self, depth: u8) {
        self.bid.resize(depth);
        self.offer.resize(depth);
    }
}

/// An instrument's outright and implied books.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Books {
    /// The outright book (entry types `0`, `1`).
    pub outright: Book,
    /// The implied book (entry types `E`, `F`).
    pub implied: Book,
}

impl Books {
    /// Empty books of `depth` (outright) and `implied_depth` levels.
    pub fn new(depth: u8, implied_depth: u8) -> Books {
        Books {
            outright: Book::new(depth),
            implied: Book::new(implied_depth),
        }
    }

    /// Applies one incremental update (its record dropped).
    pub fn apply(&mut self, u: &Update) -> Applied {
        let (mut undo, mut log) = (Undo::default(), UndoLog::default());
        self.apply_recording(u, &mut Recorder::new(&mut undo, &mut log))
    }

    /// Applies one incremental update, first recording what reverts it.
    #[inline(always)]
    pub fn apply_recording(&mut self, u: &Update, rec: &mut Recorder<'_>) -> Applied {
        let Some(action) = Action::from_code(u.action) else {
            return Applied::Anomaly;
        };
        // The side by table lookup: bid and offer alternate at random, so a
        // branch (or a jump) on the entry type would be mispredicted half
        // the time.
        let which = SIDE_OF[usize::from(u.entry)];
        let Some(side) = self.side_mut(usize::from(which)) else {
            return self.apply_whole(u.entry, rec);
        };
        let level = match action {
            Action::New | Action::Change | Action::Overlay => match (u.price, u.size) {
                (Some(price), Some(size)) => Some(Level {
                    price,
                    size,
                    orders: u.orders,
                }),
                _ => return Applied::Anomaly,
            },
            Action::Delete | Action::DeleteThru | Action::DeleteFrom => None,
        };
        if side.apply(action, u.level, level, which, rec) {
            Applied::Changed
        } else {
            Applied::Unchanged
        }
    }

    /// Side `which` of [`SIDE_OF`] (0 outright bid, 1 outright offer, 2
    /// implied bid, 3 implied offer), `None` for any other value.
    #[inline(always)]
    fn side_mut(&mut self, which: usize) -> Option<&mut Side> {
        // Selected, not jumped to: the book (implied entries are few, a
        // branch predicted), then the side by a conditional move.
        let book = match which {
            0 | 1 => &mut self.outright,
            2 | 3 => &mut self.implied,
            _ => return None,
        };
        Some(std::hint::select_unpredictable(
            which & 1 == 0,
            &mut book.bid,
            &mut book.offer,
        ))
    }

    /// Side `which` of [`SIDE_OF`], read (any value past 3: the implied
    /// offer).
    fn side(&self, which: u8) -> &Side {
        match which {
            0 => &self.outright.bid,
            1 => &self.outright.offer,
            2 => &self.implied.bid,
            _ => &self.implied.offer,
        }
    }

    /// An update whose entry type names no side: `J` empties both books,
    /// `w`/`x` change nothing, any other is an anomaly.
    #[cold]
    fn apply_whole(&mut self, entry: u8, rec: &mut Recorder<'_>) -> Applied {
        match Entry::from_code(entry) {
            Some(Entry::Reset) => {
                for which in 0..4 {
                    if let Some(side) = self.side_mut(usize::from(which)) {
                        side.delete_from(side.slots.len(), which, rec);
                    }
                }
                Applied::Changed
            }
            Some(Entry::MarketBest) => Applied::Unchanged,
            _ => Applied::Anomaly,
        }
    }

    /// Sets a snapshot entry's level (after [`clear`](Self::clear)): a
    /// book entry type at a level inside the depth with a price; any other
    /// entry is ignored. Returns whether it was taken.
    pub fn set(
        &mut self,
        entry: u8,
        n: u8,
        price: Option<i64>,
        size: u64,
        orders: Option<i32>,
    ) -> bool {
        let side = match Entry::from_code(entry) {
            Some(Entry::Bid) => &mut self.outright.bid,
            Some(Entry::Offer) => &mut self.outright.offer,
            Some(Entry::ImpliedBid) => &mut self.implied.bid,
            Some(Entry::ImpliedOffer) => &mut self.implied.offer,
            _ => return false,
        };
        let (Some(price), Some(_)) = (price, index(n, usize::from(side.depth()))) else {
            return false;
        };
        side.set(
            n,
            Level {
                price,
                size,
                orders,
            },
        );
        true
    }

    /// Empties both books.
    pub fn clear(&mut self) {
        self.outright.clear();
        self.implied.clear();
    }

    /// Level slots of the four sides together.
    pub fn slots(&self) -> usize {
        [
            &self.outright.bid,
            &self.outright.offer,
            &self.implied.bid,
            &self.implied.offer,
        ]
        .iter()
        .map(|s| s.slots.len())
        .sum()
    }

    /// Whether setting `depth` and `implied_depth` would change nothing
    /// (both as [`MAX_DEPTH`] bounds them).
    pub fn has_depths(&self, depth: u8, implied_depth: u8) -> bool {
        (self.outright.bid.depth(), self.implied.bid.depth())
            == (depth.min(MAX_DEPTH), implied_depth.min(MAX_DEPTH))
    }

    /// Sets the depths (a definition): a lower one cuts deeper levels.
    pub fn set_depths(&mut self, depth: u8, implied_depth: u8) {
        self.outright.resize(depth);
        self.implied.resize(implied_depth);
    }

    /// Makes these books a copy of `other`, without allocating when the
    /// depths agree. (A derived `clone_from` would clone and drop every
    /// side's slots: an allocation per side.)
    pub fn copy_from(&mut self, other: &Books) {
        self.outright.bid.copy_from(&other.outright.bid);
        self.outright.offer.copy_from(&other.outright.offer);
        self.implied.bid.copy_from(&other.implied.bid);
        self.implied.offer.copy_from(&other.implied.offer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(action: u8, entry: u8, level: u8, price: i64) -> Update {
        Update {
            action,
            entry,
            level,
            price: Some(price),
            size: Some(price as u64 % 100 + 1),
            orders: Some(1),
        }
    }

    /// The prices of a side, level 1 first (`0` for an empty slot).
    fn prices(s: &Side) -> Vec<i64> {
        (1..=s.depth())
            .map(|n| s.level(n).map_or(0, |l| l.price))
            .collect()
    }

    #[test]
    fn the_side_table_agrees_with_the_entry_types() {
        for c in 0..=u8::MAX {
            let side = match Entry::from_code(c) {
                Some(Entry::Bid) => 0,
                Some(Entry::Offer) => 1,
                Some(Entry::ImpliedBid) => 2,
                Some(Entry::ImpliedOffer) => 3,
                _ => 4,
            };
            assert_eq!(SIDE_OF[usize::from(c)], side, "{c}");
            let mut b = Books::new(2, 2);
            let which = usize::from(side);
            assert_eq!(b.side_mut(which).is_some(), side < 4);
            if let Some(s) = b.side_mut(which) {
                s.set(
                    1,
                    Level {
                        price: 7,
                        size: 1,
                        orders: None,
                    },
                );
            }
            let tops = [
                b.outright.bid.top(),
                b.outright.offer.top(),
                b.implied.bid.top(),
                b.implied.offer.top(),
            ];
            for (i, top) in tops.iter().enumerate() {
                assert_eq!(top.is_some(), i == which, "{c}: side {i}");
            }
        }
    }

    #[test]
    fn new_inserts_and_pushes_the_deepest_out() {
        let mut b = Books::new(3, 2);
        for (n, p) in [(1, 10), (1, 20), (2, 15), (1, 30)] {
            assert_eq!(b.apply(&up(0, b'0', n, p)), Applied::Changed);
        }
        assert_eq!(prices(&b.outright.bid), [30, 20, 15]);
        assert_eq!(b.outright.bid.top().map(|l| l.price), Some(30));
        // A New at the last level replaces it; past the depth, nothing.
        b.apply(&up(0, b'0', 3, 5));
        assert_eq!(prices(&b.outright.bid), [30, 20, 5]);
        assert_eq!(b.apply(&up(0, b'0', 4, 1)), Applied::Unchanged);
        assert_eq!(b.apply(&up(0, b'0', 0, 1)), Applied::Unchanged);
        assert_eq!(prices(&b.outright.bid), [30, 20, 5]);
    }

    #[test]
    fn change_and_overlay_overwrite_delete_shifts_up() {
        let mut b = Books::new(4, 2);
        for p in [40, 30, 20, 10] {
            b.apply(&up(0, b'1', 1, p));
        }
        assert_eq!(prices(&b.outright.offer), [10, 20, 30, 40]);
        b.apply(&up(1, b'1', 2, 21));
        b.apply(&up(5, b'1', 3, 31));
        assert_eq!(prices(&b.outright.offer), [10, 21, 31, 40]);
        b.apply(&up(2, b'1', 2, 0));
        assert_eq!(prices(&b.outright.offer), [10, 31, 40, 0]);
        b.apply(&up(2, b'1', 1, 0));
        assert_eq!(prices(&b.outright.offer), [31, 40, 0, 0]);
        // A Change past the depth: nothing.
        assert_eq!(b.apply(&up(1, b'1', 5, 1)), Applied::Unchanged);
    }

    /// Change and Overlay overwrite the whole level, its size and orders
    /// too, in place (spec mdp3 §3.3: "**Change**, **Overlay** overwrite n
    /// (price, size, orders)").
    #[test]
    fn change_and_overlay_overwrite_price_size_and_orders() {
        let mut b = Books::new(2, 2);
        let at_one = |action, price, size, orders| Update {
            action,
            entry: b'1',
            level: 1,
            price: Some(price),
            size: Some(size),
            orders,
        };
        b.apply(&at_one(0, 10, 5, Some(3)));
        for (action, price, size, orders) in [(1, 11, 7, None), (5, 12, 9, Some(4))] {
            assert_eq!(
                b.apply(&at_one(action, price, size, orders)),
                Applied::Changed
            );
            let level = Level {
                price,
                size,
                orders,
            };
            assert_eq!(b.outright.offer.top(), Some(level), "action {action}");
            assert_eq!(b.outright.offer.level(2), None, "overwritten, not inserted");
        }
    }

    #[test]
    fn delete_from_and_thru() {
        let mut b = Books::new(5, 2);
        for p in [50, 40, 30, 20, 10] {
            b.apply(&up(0, b'0', 1, p));
        }
        b.apply(&up(4, b'0', 2, 0));
        assert_eq!(prices(&b.outright.bid), [30, 40, 50, 0, 0]);
        // DeleteFrom at or past the depth empties the side.
        b.apply(&up(4, b'0', 9, 0));
        assert_eq!(b.outright.bid.top(), None);
        for p in [2, 1] {
            b.apply(&up(0, b'0', 1, p));
        }
        b.apply(&up(3, b'0', 0, 0));
        assert_eq!(b.outright.bid.top(), None);
    }

    #[test]
    fn implied_reset_market_best_and_anomalies() {
        let mut b = Books::new(3, 2);
        b.apply(&up(0, b'0', 1, 7));
        b.apply(&up(0, b'E', 1, 8));
        b.apply(&up(0, b'F', 1, 9));
        assert_eq!(b.implied.bid.top().map(|l| l.price), Some(8));
        assert_eq!(b.implied.offer.top().map(|l| l.price), Some(9));
        assert_eq!(b.apply(&up(0, b'w', 1, 1)), Applied::Unchanged);
        assert_eq!(b.apply(&up(9, b'0', 1, 1)), Applied::Anomaly);
        assert_eq!(b.apply(&up(0, b'Z', 1, 1)), Applied::Anomaly);
        let mut no_price = up(1, b'0', 1, 1);
        no_price.price = None;
        assert_eq!(b.apply(&no_price), Applied::Anomaly);
        let mut no_size = up(0, b'0', 1, 1);
        no_size.size = None;
        assert_eq!(b.apply(&no_size), Applied::Anomaly);
        assert_eq!(b.outright.bid.top().map(|l| l.price), Some(7));
        // A delete needs neither.
        let mut del = up(2, b'0', 1, 0);
        (del.price, del.size) = (None, None);
        assert_eq!(b.apply(&del), Applied::Changed);
        assert_eq!(b.apply(&up(0, b'J', 0, 0)), Applied::Changed);
        assert!(b.outright.is_empty() && b.implied.is_empty());
    }

    #[test]
    fn a_lower_depth_cuts_deeper_levels_and_snapshot_entries_fit_the_depth() {
        let mut b = Books::new(3, 2);
        for p in [3, 2, 1] {
            b.apply(&up(0, b'0', 1, p));
        }
        b.set_depths(2, 1);
        assert_eq!(prices(&b.outright.bid), [1, 2]);
        b.set_depths(4, 2);
        assert_eq!(prices(&b.outright.bid), [1, 2, 0, 0]);
        b.clear();
        assert!(b.set(b'1', 1, Some(5), 3, None));
        assert!(!b.set(b'1', 5, Some(5), 3, None), "past the depth");
        assert!(!b.set(b'1', 0, Some(5), 3, None), "level 0");
        assert!(!b.set(b'1', 2, None, 3, None), "no price");
        assert!(!b.set(b'2', 1, Some(5), 3, None), "not a book entry");
        assert!(!b.set(b'J', 1, Some(5), 3, None), "not a level");
        assert_eq!(
            b.outright.offer.top(),
            Some(Level {
                price: 5,
                size: 3,
                orders: None
            })
        );
        let mut visible = Books::new(4, 2);
        visible.copy_from(&b);
        assert_eq!(visible, b);
        // Depths that differ are taken too.
        let mut other = Books::new(2, 7);
        other.copy_from(&b);
        assert_eq!(other, b);
    }

    /// The levels an unfinished event removes are saved up to two of the
    /// deepest sides' worth; past that the visible books are kept whole,
    /// to the same effect, and the log lets its records go.
    #[test]
    fn the_levels_saved_for_an_unfinished_event_are_bounded() {
        let mut b = Books::new(MAX_DEPTH, 2);
        for n in 1..=MAX_DEPTH {
            b.set(b'0', n, Some(i64::from(n)), 1, None);
            b.set(b'1', n, Some(1_000 + i64::from(n)), 1, None);
        }
        let before = b.clone();
        let (mut undo, mut log) = (Undo::default(), UndoLog::default());
        for (k, entry) in [b'0', b'1', b'0'].into_iter().enumerate() {
            let rec = &mut Recorder::new(&mut undo, &mut log);
            assert_eq!(
                b.apply_recording(&up(3, entry, 0, 0), rec),
                Applied::Changed
            );
            assert_eq!(undo.full(), k == 2, "after DeleteThru {k}");
        }
        assert_eq!(log.len(), 3);
        undo.keep_whole(&b, &mut log);
        assert!(log.is_empty() && !undo.full() && !undo.is_empty());
        assert_eq!(*undo.visible(&b, &log), before);
        assert_eq!(undo.visible_top(&b, &log, 1), before.outright.offer.top());
        assert!(b.outright.is_empty());
    }

    /// "Past 64 records in one unfinished event" (docs/mdp3.md): the
    /// 64th change is still recorded, the 65th makes it time to keep the
    /// books whole.
    #[test]
    fn records_are_kept_for_64_changes_of_an_event() {
        let mut b = Books::new(10, 2);
        let (mut undo, mut log) = (Undo::default(), UndoLog::default());
        for k in 1..=MAX_RECORDS + 1 {
            let rec = &mut Recorder::new(&mut undo, &mut log);
            let price = 100 + i64::from(k);
            b.apply_recording(&up(0, b'0', 1, price), rec);
            assert_eq!(undo.full(), k > 64, "after change {k}");
        }
        assert_eq!(MAX_RECORDS, 64);
    }

    proptest::proptest! {
        /// Reverting the records of any run of updates (every action,
        /// entry type and level, resets and anomalies included) gives the
        /// books as they were before it, whole and level 1 alone, for two
        /// instruments whose records interleave in one log, however many
        /// runs come before, through compactions; past the records kept,
        /// the books are kept whole, to the same effect.
        #[test]
        fn reverting_the_records_gives_the_books_before(
            depth in 1u8..8,
            ops in proptest::collection::vec(
                (
                    (0u8..7, 0usize..7, 0u8..10, -5i64..5),
                    proptest::bool::ANY,
                    proptest::bool::weighted(0.02),
                    proptest::bool::weighted(0.02),
                ),
                0..400,
            ),
        ) {
            let types = [b'0', b'1', b'E', b'F', b'J', b'w', b'Z'];
            let mut log = UndoLog::default();
            let mut books = [Books::new(depth, 2), Books::new(depth + 1, 1)];
            let mut before = books.clone();
            let mut undos = [Undo::default(), Undo::default()];
            for ((action, entry, n, price), second, visible, compact) in ops {
                let k = usize::from(second);
                let (b, undo) = (&mut books[k], &mut undos[k]);
                b.apply_recording(
                    &up(action, types[entry], n, price),
                    &mut Recorder::new(&mut *undo, &mut log),
                );
                if undo.full() {
                    undo.keep_whole(b, &mut log);
                }
                if visible {
                    undo.clear(&mut log);
                    before[k] = b.clone();
                }
                if compact {
                    log.compact(undos.iter_mut());
                }
                for k in 0..2 {
                    let (b, undo) = (&books[k], &undos[k]);
                    proptest::prop_assert_eq!(&*undo.visible(b, &log), &before[k]);
                    for side in 0..4u8 {
                        proptest::prop_assert_eq!(
                            undo.visible_top(b, &log, side),
                            before[k].side(side).top()
                        );
                    }
                }
                if undos.iter().all(Undo::is_empty) {
                    proptest::prop_assert!(log.is_empty());
                }
            }
        }

        /// Any run of updates leaves each side as a plain vector model of
        /// the actions leaves it.
        #[test]
        fn sides_follow_a_vector_model(
            depth in 1u8..8,
            ops in proptest::collection::vec((0u8..7, 0u8..10, -5i64..5), 0..200),
        ) {
            let mut b = Books::new(depth, 2);
            let mut model: Vec<Option<i64>> = vec![None; usize::from(depth)];
            for (action, n, price) in ops {
                let r = b.apply(&up(action, b'0', n, price));
                let d = usize::from(depth);
                let i = usize::from(n).wrapping_sub(1);
                match action {
                    0 if i < d => { model.insert(i, Some(price)); model.truncate(d); }
                    1 | 5 if i < d => model[i] = Some(price),
                    2 if i < d => { model.remove(i); model.push(None); }
                    3 => model.iter_mut().for_each(|m| *m = None),
                    4 if n > 0 => {
                        let k = usize::from(n).min(d);
                        model.drain(..k);
                        model.resize(d, None);
                    }
                    6 => proptest::prop_assert_eq!(r, Applied::Anomaly),
                    _ => proptest::prop_assert_eq!(r, Applied::Unchanged),
                }
                let got: Vec<Option<i64>> = (1..=depth).map(|n| b.outright.bid.level(n).map(|l| l.price)).collect();
                proptest::prop_assert_eq!(&got, &model);
            }
        }
    }
}
