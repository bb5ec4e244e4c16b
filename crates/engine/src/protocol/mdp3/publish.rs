//! An MDP3 channel's instruments written into the state table (and so
//! into the shared-memory publication readers check): each instrument's
//! visible outright top as decimal mantissas (exponent −9), suspect (or
//! unverified), halted and closed in its own slot; the channel's liveness
//! and source watermark in the feed's status.
//!
//! Written once per receive cycle and before each check, for the
//! instruments the channel lists as touched ([`Feed::drain_touched`]), so
//! the cost follows the traffic. An instrument takes a slot when its book
//! first has a side (before that its answer is `no_quote` with or without
//! one: a definitions file naming thousands of instruments does not fill
//! the table), keyed by its SecurityID ([`key`]) and published under
//! `#SecurityID`, then under its Symbol once a definition maps it.
//!
//! The publisher also counts the instruments that need the snapshot loop
//! (suspect or unverified), and how many turned needy or healed, for the
//! on-demand joining of the snapshot lines; and, for the channel's
//! counters, the published instruments (those with a slot) suspect,
//! unverified and overflowed, each apart: an instrument only defined,
//! never traded, has no baseline but answers `no_quote`, and the loop does
//! not carry it. Each instrument's flags as last seen make these counts a
//! compare per touched instrument.

use super::feed::{id_name, Entry, Feed};
use super::name::SymbolKey;
use crate::state::slot::{Level, Top};
use crate::state::{FeedStatus, SlotId, StateTable};
use crate::symbol::Symbol;
use crate::verdict::Thresholds;
use std::collections::HashMap;

/// MDP3 prices are mantissas of 10⁻⁹.
pub const PRICE_EXPONENT: i8 = -9;

/// No slot yet.
const NO_SLOT: SlotId = SlotId::MAX;
/// Refused a slot: the table was full (slots are never freed).
const REFUSED: SlotId = SlotId::MAX - 1;

/// The slot key of SecurityID `id`: `#` and the id's 32 bits in seven
/// characters of 6 bits each (`0` + value, so `0`..`o`), printable and
/// unique per id. Readers never see it as a name: they look instruments
/// up by `#SecurityID` and Symbol.
pub fn key(id: i32) -> Symbol {
    let v = id as u32 as u64;
    let mut bytes = [b'#'; 8];
    for (k, b) in bytes[1..].iter_mut().enumerate() {
        *b = b'0' + ((v >> (6 * (6 - k))) & 0x3f) as u8;
    }
    Symbol::from_checked(bytes)
}

/// The SecurityID whose slot key is `key` ([`key`]'s inverse): `None`
/// for a key no SecurityID has. A verdict change names an MDP3
/// instrument by its key; this gives the id (`#` and it is a name
/// readers look up).
pub fn security_id(key: Symbol) -> Option<i32> {
    let bytes = key.to_wire();
    if bytes[0] != b'#' {
        return None;
    }
    let mut v = 0u64;
    for &b in &bytes[1..] {
        let d = b.checked_sub(b'0').filter(|&d| d < 64)?;
        v = v << 6 | u64::from(d);
    }
    u32::try_from(v).ok().map(|v| v as i32)
}

/// An instrument's sequencing flags, as [`Published::flags`] keeps them.
const SUSPECT: u8 = 1;
const UNVERIFIED: u8 = 2;
const OVERFLOWED: u8 = 4;
/// Needs the snapshot loop.
const NEEDY: u8 = SUSPECT | UNVERIFIED;

/// `e`'s sequencing flags now.
fn flags_of(e: &Entry) -> u8 {
    let q = &e.instrument.seq;
    [
        (q.suspect(), SUSPECT),
        (q.unverified(), UNVERIFIED),
        (q.overflowed(), OVERFLOWED),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .fold(0, |f, (_, bit)| f | bit)
}

/// Published instruments with each flag set, as of the last publish.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flagged {
    /// No baseline, or a hole open; or shown suspect while a stale name
    /// finds it (the publisher's misnamed count).
    pub suspect: usize,
    /// A packet gap given up since their last entry applied.
    pub unverified: usize,
    /// Their cache overflowed: only a snapshot restores them.
    pub overflowed: usize,
}

impl Flagged {
    /// Counts an instrument whose flags went from `old` to `new`.
    fn change(&mut self, old: u8, new: u8) {
        for (bit, n) in [
            (SUSPECT, &mut self.suspect),
            (UNVERIFIED, &mut self.unverified),
            (OVERFLOWED, &mut self.overflowed),
        ] {
            match (old & bit != 0, new & bit != 0) {
                (false, true) => *n += 1,
                (true, false) => *n -= 1,
                _ => {}
            }
        }
    }
}

/// What the publisher keeps per instrument.
#[derive(Debug, Clone)]
struct Published {
    slot: SlotId,
    /// Its sequencing flags as last seen ([`SUSPECT`], [`UNVERIFIED`],
    /// [`OVERFLOWED`]).
    flags: u8,
    /// The publisher's count of turns to needy when it last turned needy
    /// (its own turn's number), to tell turns after a mark
    /// ([`Publisher::mark_needy_at`]).
    turn: u64,
    /// The flags counted in [`Publisher::flagged`]: as published
    /// ([`shown`](Published::shown)) once it has a slot, none before.
    counted: u8,
    /// The Symbol the slot was last published under (empty: none yet).
    symbol: String,
    /// Its Symbol found the directory full (counted in `table_full` once
    /// until it is entered).
    name_refused: bool,
    /// Symbols the directory could not move or withdraw (full) that
    /// still find this instrument's slot, though they name another
    /// instrument or none now: while any does, the slot is published
    /// suspect, so that a check by such a name is never answered `ok`
    /// with this book.
    misnamed: u16,
}

impl Default for Published {
    fn default() -> Published {
        Published {
            slot: NO_SLOT,
            flags: 0,
            turn: 0,
            counted: 0,
            symbol: String::new(),
            name_refused: false,
            misnamed: 0,
        }
    }
}

/// What one MDP3 feed has written into the table.
#[derive(Debug, Default)]
pub struct Publisher {
    /// By instrument index (the channel's order of first appearance).
    published: Vec<Published>,
    /// The status last written.
    status: Option<FeedStatus>,
    /// Instruments suspect or unverified now.
    needy: usize,
    /// Published instruments suspect, unverified and overflowed now.
    flagged: Flagged,
    /// Instruments that turned suspect or unverified (from healthy, or
    /// new), and that turned healthy, so far.
    turned_needy: u64,
    healed: u64,
    /// Turns to needy up to the last [`mark_needy_at`](Self::mark_needy_at), and
    /// the instruments needy now that turned after it.
    mark: u64,
    needy_since_mark: usize,
    /// Instruments refused a slot, or their Symbol an entry in the
    /// directory, for want of room: each once (until it fits again, for a
    /// name).
    pub table_full: u64,
    /// Symbol → the instrument (index) whose slot the directory's entry in
    /// force for it names; absent: none, or withdrawn.
    owners: HashMap<SymbolKey, u32>,
    /// The channel's Symbol moves when names were last checked.
    symbol_moves: u64,
    /// Symbol → the instrument its stale entry finds
    /// ([`Published::misnamed`]).
    stale: HashMap<SymbolKey, u32>,
}

impl Publisher {
    /// Instruments suspect or unverified now (as of the last publish).
    pub fn needy(&self) -> usize {
        self.needy
    }

    /// Published instruments (those with a slot) suspect, unverified and
    /// overflowed now (as of the last publish), each counted apart: one
    /// may be several.
    pub fn flagged(&self) -> Flagged {
        self.flagged
    }

    /// A publisher that has counted `needy` instruments needy now, and
    /// `since_mark` of them turned needy after the mark (a test's stand-in
    /// for a channel's).
    #[cfg(test)]
    pub(crate) fn with_needy(needy: usize, since_mark: usize) -> Publisher {
        Publisher {
            needy,
            needy_since_mark: since_mark,
            ..Publisher::default()
        }
    }

    /// A publisher whose instruments are needy or not (`needy`), each
    /// having turned needy last as turn `turn` (a test's stand-in).
    #[cfg(test)]
    pub(crate) fn with_turns(turns: &[(bool, u64)]) -> Publisher {
        let published: Vec<Published> = turns
            .iter()
            .map(|&(needy, turn)| Published {
                flags: if needy { NEEDY } else { 0 },
                turn,
                ..Published::default()
            })
            .collect();
        Publisher {
            needy: turns.iter().filter(|t| t.0).count(),
            turned_needy: turns.iter().map(|t| t.1).max().unwrap_or(0),
            needy_since_mark: turns.iter().filter(|t| t.0).count(),
            published,
            ..Publisher::default()
        }
    }

    /// Instruments that turned suspect or unverified so far.
    pub fn turned_needy(&self) -> u64 {
        self.turned_needy
    }

    /// From now on [`needy_since_mark`](Self::needy_since_mark) counts
    /// the instruments that turn needy (and are still) after
    /// [`turned_needy`](Self::turned_needy) was `turn`, those needy now
    /// that turned after it included. (A pass over the instruments: once
    /// a snapshot loop.)
    pub fn mark_needy_at(&mut self, turn: u64) {
        self.mark = turn.min(self.turned_needy);
        let mark = self.mark;
        self.needy_since_mark = self
            .published
            .iter()
            .filter(|p| p.flags & NEEDY != 0 && p.turn > mark)
            .count();
    }

    /// Instruments needy now that turned needy after the last
    /// [`mark_needy_at`](Self::mark_needy_at) (all needy ones without a
    /// mark).
    pub fn needy_since_mark(&self) -> usize {
        self.needy_since_mark
    }

    /// Instruments that turned healthy so far.
    pub fn healed(&self) -> u64 {
        self.healed
    }

    /// Writes what changed in `it` since the last call into `table` as
    /// feed `feed`: the touched instruments, then the feed's status if it
    /// changed. `thresholds` gives an instrument's limits by name.
    pub fn publish(
        &mut self,
        feed: u16,
        it: &mut Feed,
        table: &mut StateTable,
        thresholds: impl Fn(&Feed, &str) -> Thresholds,
    ) {
        let moves = it.symbol_moves();
        let names_moved = moves != self.symbol_moves;
        self.symbol_moves = moves;
        let Publisher {
            published,
            needy,
            flagged,
            turned_needy,
            healed,
            mark,
            needy_since_mark,
            table_full,
            owners,
            ..
        } = self;
        let thresholds = &thresholds;
        it.drain_touched(|f, i, e| {
            let i = i as usize;
            if i >= published.len() {
                published.resize(i + 1, Published::default());
            }
            let p = &mut published[i];
            let flags = flags_of(e);
            let (was_needy, now_needy) = (p.flags & NEEDY != 0, flags & NEEDY != 0);
            p.flags = flags;
            if now_needy != was_needy {
                if now_needy {
                    *needy += 1;
                    *turned_needy += 1;
                    p.turn = *turned_needy;
                    *needy_since_mark += 1;
                } else {
                    *needy -= 1;
                    *healed += 1;
                    if p.turn > *mark {
                        *needy_since_mark -= 1;
                    }
                }
            }
            let name = names_moved
                .then(|| Naming::check(f, e, i as u32, p, owners, feed, table))
                .or_else(|| Naming::first(f, e, i as u32, p, owners))
                .flatten();
            let top = slot_top(f, e);
            if p.slot == NO_SLOT {
                // Its Symbol entered for another instrument before: it
                // takes a slot, empty or not, so that the name finds it.
                let taken = name.is_some_and(|s| owners.contains_key(s));
                if top.bid.is_none() && top.ask.is_none() && !taken {
                    return;
                }
                let mut buf = [0u8; 12];
                let name = id_name(e.security_id, &mut buf);
                p.slot = match table.insert_named(
                    feed,
                    key(e.security_id),
                    name.as_bytes(),
                    thresholds(f, name),
                ) {
                    Some(id) => id,
                    None => {
                        *table_full += 1;
                        REFUSED
                    }
                };
            }
            if p.slot == REFUSED {
                return;
            }
            p.count(flagged);
            if names_moved {
                // Its limits as a check by any of its names finds them
                // (an override of its Symbol may have come or gone with
                // its definition), whether or not the directory can take
                // its name.
                let mut buf = [0u8; 12];
                let id = id_name(e.security_id, &mut buf);
                table.set_thresholds(p.slot, thresholds(f, id));
            }
            // Its top first: the name must not find the slot before it
            // shows what the instrument is now.
            write_top(table, p, top);
            if let Some(symbol) = name {
                let (slot, left) = (p.slot, found(published, owners, symbol));
                let p = &mut published[i];
                if table.alias(feed, key(e.security_id), symbol.as_bytes(), slot, left) {
                    match owners.get_mut(symbol) {
                        Some(o) => *o = i as u32,
                        // Allocates once per Symbol the channel publishes.
                        None => {
                            owners.insert(SymbolKey::new(symbol), i as u32);
                        }
                    }
                    p.symbol.clear();
                    p.symbol.push_str(symbol);
                    p.name_refused = false;
                } else if !p.name_refused {
                    // The directory is full (Symbols moved too often for
                    // the table's capacity): readers do not find the
                    // instrument by this name. Tried again at each publish.
                    p.name_refused = true;
                    *table_full += 1;
                }
            }
        });
        if names_moved {
            let stale = &mut self.stale;
            it.drain_renamed(|f, symbol, left| {
                let wrong = settle_name(f, symbol, published, owners, feed, table);
                // The instrument the name left keeps no override of it:
                // its limits as a check by its `#SecurityID` finds them
                // (whether or not the directory named it by the Symbol).
                if let Some(j) = left.filter(|&j| f.symbol_index(symbol) != Some(j)) {
                    if let (Some(p), Some(e)) =
                        (published.get(j as usize), f.instruments().get(j as usize))
                    {
                        if slotted(p) {
                            let mut buf = [0u8; 12];
                            let id = id_name(e.security_id, &mut buf);
                            table.set_thresholds(p.slot, thresholds(f, id));
                        }
                    }
                }
                // A name the full directory could not withdraw: the
                // instrument it still finds counted once (as one refused a
                // name is: an entry refused was counted for the instrument
                // it was for), for the table-full alert.
                let withdrawal = wrong.filter(|_| f.symbol_index(symbol).is_none());
                if let Some(p) = withdrawal.map(|j| &mut published[j as usize]) {
                    if !p.name_refused {
                        p.name_refused = true;
                        *table_full += 1;
                    }
                }
                mark_stale(f, symbol, wrong, stale, published, flagged, table);
            });
        }
        let status = FeedStatus {
            last_alive: it.last_alive().unwrap_or(0),
            source_watermark: it
                .source_watermark()
                .map_or(0, |w| w.clamp(0, u64::MAX as i128) as u64),
            ..FeedStatus::default()
        };
        if self.status != Some(status) {
            table.set_feed_status(feed, &status);
            self.status = Some(status);
        }
    }
}

/// Writes `top` into `p`'s slot, suspect too while a stale name finds it
/// ([`Published::misnamed`]).
fn write_top(table: &StateTable, p: &Published, mut top: Top) {
    top.suspect |= p.misnamed > 0;
    table.slots()[p.slot as usize].write_top(&top);
}

/// Whether instrument `p` has a slot of its own.
fn slotted(p: &Published) -> bool {
    p.slot != NO_SLOT && p.slot != REFUSED
}

impl Published {
    /// Its flags as its slot shows them: [`SUSPECT`] too while a stale
    /// name finds it ([`misnamed`](Published::misnamed)).
    fn shown(&self) -> u8 {
        self.flags | if self.misnamed > 0 { SUSPECT } else { 0 }
    }

    /// Counts in `flagged` what its slot shows now, if it has one.
    fn count(&mut self, flagged: &mut Flagged) {
        let shown = self.shown();
        if slotted(self) && shown != self.counted {
            flagged.change(self.counted, shown);
            self.counted = shown;
        }
    }
}

/// A Symbol whose mapping changed (after the touched instruments are
/// published): the directory's entry for it is made to find the
/// instrument it names now (entered for it), or nothing (withdrawn) when
/// it names none, or one without a slot. Returns the instrument the entry
/// still wrongly finds, when the directory is full and it cannot be
/// mended.
fn settle_name(
    f: &Feed,
    symbol: &str,
    published: &mut [Published],
    owners: &mut HashMap<SymbolKey, u32>,
    feed: u16,
    table: &mut StateTable,
) -> Option<u32> {
    let want = f
        .symbol_index(symbol)
        .filter(|&k| published.get(k as usize).is_some_and(slotted));
    let current = owners.get(symbol).copied();
    if current == want {
        // Found where it names (its instrument's own record of the name
        // brought back, should a failed withdrawal have cleared it).
        if let Some(p) = want.map(|k| &mut published[k as usize]) {
            if p.symbol != symbol {
                p.symbol.clear();
                p.symbol.push_str(symbol);
                p.name_refused = false;
            }
        }
        return None;
    }
    // (The limits of the instrument taking it were set as it was
    // published: its definition changed.)
    let left = found(published, owners, symbol);
    match want {
        Some(k) => {
            let p = &mut published[k as usize];
            let id = f.instruments()[k as usize].security_id;
            if table.alias(feed, key(id), symbol.as_bytes(), p.slot, left) {
                owners.insert(SymbolKey::new(symbol), k);
                p.symbol.clear();
                p.symbol.push_str(symbol);
                p.name_refused = false;
                return None;
            }
        }
        None => {
            if table.withdraw(feed, symbol.as_bytes(), left) {
                owners.remove(symbol);
                return None;
            }
        }
    }
    current
}

/// The slot the directory's entry in force for `symbol` finds, if any.
fn found(
    published: &[Published],
    owners: &HashMap<SymbolKey, u32>,
    symbol: &str,
) -> Option<SlotId> {
    let p = published.get(*owners.get(symbol)? as usize)?;
    slotted(p).then_some(p.slot)
}

/// Records that `symbol`'s entry wrongly finds instrument `wrong` (or no
/// longer does, `None`), and writes the slot of an instrument whose
/// [`Published::misnamed`] count turns from or to zero.
fn mark_stale(
    f: &Feed,
    symbol: &str,
    wrong: Option<u32>,
    stale: &mut HashMap<SymbolKey, u32>,
    published: &mut [Published],
    flagged: &mut Flagged,
    table: &StateTable,
) {
    let was = stale.get(symbol).copied();
    if was == wrong {
        return;
    }
    let mut count = |j: u32, up: bool| {
        let p = &mut published[j as usize];
        let before = p.misnamed > 0;
        p.misnamed = if up {
            p.misnamed.saturating_add(1)
        } else {
            p.misnamed.saturating_sub(1)
        };
        if before != (p.misnamed > 0) && slotted(p) {
            write_top(table, p, slot_top(f, &f.instruments()[j as usize]));
            p.count(flagged);
        }
    };
    if let Some(j) = was {
        count(j, false);
    }
    match wrong {
        Some(j) => {
            count(j, true);
            stale.insert(SymbolKey::new(symbol), j);
        }
        None => {
            stale.remove(symbol);
        }
    }
}

/// Which Symbol an instrument's slot must be entered under now.
struct Naming;

impl Naming {
    /// After the channel's Symbol mapping changed: the name `e`'s slot was
    /// entered under that no longer finds `e` is withdrawn if it finds no
    /// instrument now (a delete; a name moved to another is entered again
    /// for that one), and `e`'s own Symbol, if it names `e` and the
    /// directory's entry in force for it does not, is returned.
    fn check<'e>(
        f: &Feed,
        e: &'e Entry,
        i: u32,
        p: &mut Published,
        owners: &mut HashMap<SymbolKey, u32>,
        feed: u16,
        table: &mut StateTable,
    ) -> Option<&'e str> {
        let mine = |name: &str| f.find(name).map(|x| x.security_id) == Some(e.security_id);
        if !p.symbol.is_empty() && !mine(&p.symbol) {
            let gone = f.find(&p.symbol).is_none();
            if gone
                && owners.get(p.symbol.as_str()) == Some(&i)
                && table.withdraw(feed, p.symbol.as_bytes(), Some(p.slot))
            {
                owners.remove(p.symbol.as_str());
            }
            p.symbol.clear();
        }
        Self::wanted(e, i, owners).filter(|s| mine(s))
    }

    /// Without a change of the mapping: `e`'s Symbol, the first time it
    /// has one that names it (a cheap compare otherwise).
    fn first<'e>(
        f: &Feed,
        e: &'e Entry,
        i: u32,
        p: &Published,
        owners: &HashMap<SymbolKey, u32>,
    ) -> Option<Option<&'e str>> {
        // The usual case, its Symbol entered already: one compare.
        let s = e.definition.as_ref().map(|d| d.symbol.as_str())?;
        if s == p.symbol {
            return None;
        }
        let s = Self::wanted(e, i, owners)?;
        Some((f.find(s).map(|x| x.security_id) == Some(e.security_id)).then_some(s))
    }

    /// `e`'s Symbol, when the directory's entry in force for it is not
    /// `e`'s.
    fn wanted<'e>(e: &'e Entry, i: u32, owners: &HashMap<SymbolKey, u32>) -> Option<&'e str> {
        let s = e.definition.as_ref().map(|d| d.symbol.as_str())?;
        (!s.is_empty() && owners.get(s) != Some(&i)).then_some(s)
    }
}

/// `e` as its slot shows it (spec mdp3 §4): the visible outright level 1
/// (locked allowed, crossed invalid), suspect or unverified, the status
/// in force, its RptSeq as its last sequence. Source time stays the
/// channel's watermark.
pub(super) fn slot_top(f: &Feed, e: &Entry) -> Top {
    let level = |l: Option<super::book::Level>| {
        l.map(|l| Level {
            price: l.price,
            size: l.size,
        })
    };
    let shown = f.shown(e);
    Top {
        invalid: shown.invalid,
        bid: level(shown.bid),
        ask: level(shown.ask),
        exponent: PRICE_EXPONENT,
        halted: shown.halted,
        closed: shown.closed,
        suspect: shown.suspect,
        last_seq: e.instrument.seq.rpt_seq().map_or(0, u64::from),
        source_time: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_symbols_unique_per_id() {
        let ids = [0, 1, -1, 63, 64, i32::MAX, i32::MIN, 123_456];
        let keys: std::collections::BTreeSet<u64> = ids.iter().map(|&i| key(i).key()).collect();
        assert_eq!(keys.len(), ids.len());
        for &i in &ids {
            assert_eq!(Symbol::from_key(key(i).key()), Some(key(i)));
            assert_eq!(security_id(key(i)), Some(i));
        }
        // No SecurityID's key: another symbol, a value past 32 bits.
        assert_eq!(security_id(Symbol::parse("ESZ6").unwrap()), None);
        assert_eq!(security_id(Symbol::parse("#o000000").unwrap()), None);
        let mut buf = [0u8; 12];
        assert_eq!(id_name(i32::MIN, &mut buf), "#-2147483648");
    }

    /// The channel's liveness and source watermark reach the feed's
    /// status in the table, where a check reads them: a book whose
    /// TransactTime lags its arrival by 5 s reads `stale_at_source` under
    /// a 1 s threshold (the slot's own times are 0: the feed's decide),
    /// and a heartbeat then, proving the channel up to its arrival, clears
    /// it; nothing received for longer than the stale threshold reads
    /// `stale`.
    #[test]
    fn the_channels_times_are_published_in_the_feeds_status() {
        use super::super::encode::{self, BookEntry, Shape};
        use super::super::template::{EntryType, UpdateAction};
        use crate::verdict::Reasons;
        const MS: u64 = 1_000_000;
        const V: Shape = Shape::new(13);
        let t = super::super::testing::T0;
        let mut f = super::super::testing::feed();
        f.track_touched(true);
        let mut p = Publisher::default();
        let mut table = StateTable::with_feeds(64, 1);
        let th = |_: &Feed, _: &str| Thresholds {
            stale_ns: 10_000 * MS,
            source_ns: 1_000 * MS,
        };
        let entry = |rpt_seq, entry_type| BookEntry {
            price: Some(100),
            size: Some(1),
            security_id: 7,
            rpt_seq,
            orders: None,
            level: 1,
            action: UpdateAction::New,
            entry_type,
        };
        let behind = t - 5_000 * MS;
        let books = [entry(1, EntryType::Bid), entry(2, EntryType::Offer)];
        let book = encode::book(46, V, behind, 0x80, &books, 0);
        f.on_incremental(&encode::packet(1, t, &[book]), t).unwrap();
        p.publish(0, &mut f, &mut table, th);
        let id = table.find(0, key(7)).expect("published");
        let status = table.feed_status(0);
        assert_eq!((status.last_alive, status.source_watermark), (t, behind));
        assert_eq!(table.check(id, 0, t), Reasons::STALE_AT_SOURCE);
        let beat = encode::packet(2, t + MS, &[encode::heartbeat(V)]);
        f.on_incremental(&beat, t + MS).unwrap();
        p.publish(0, &mut f, &mut table, th);
        assert_eq!(table.check(id, 0, t + MS), Reasons::empty());
        assert_eq!(
            table.check(id, 0, t + 10_002 * MS),
            Reasons::STALE | Reasons::STALE_AT_SOURCE
        );
    }

    /// The flags are counted over the published instruments, each apart,
    /// and follow them as they turn and heal; the needy count (for the
    /// joining of the snapshot lines) takes every instrument.
    #[test]
    fn flagged_counts_follow_the_published_instruments() {
        use super::super::synth::{equity_channel, Channel};
        const MS: u64 = 1_000_000;
        let t = super::super::testing::T0;
        let mut f = super::super::testing::feed();
        f.track_touched(true);
        let mut p = Publisher::default();
        let mut table = StateTable::new(64);
        let th = |_: &Feed, _: &str| Thresholds {
            stale_ns: u64::MAX,
            source_ns: u64::MAX,
        };
        let mut ch = Channel::new(3, equity_channel());
        let n = ch.specs().count();
        for d in ch.definition_loop(t) {
            f.on_definitions(&d.bytes).unwrap();
        }
        p.publish(0, &mut f, &mut table, th);
        // Defined only: no baseline, so needy, but nothing published.
        assert_eq!((p.needy(), p.flagged()), (n, Flagged::default()));
        // Marked (the snapshot lines left): those needy now do not count
        // as needy since, nor do they when they heal.
        p.mark_needy_at(p.turned_needy());
        assert_eq!(p.needy_since_mark(), 0);
        for d in ch.fill_books(t) {
            f.on_incremental(&d.bytes, t).unwrap();
        }
        p.publish(0, &mut f, &mut table, th);
        assert_eq!(
            (p.needy(), p.flagged(), table.len()),
            (0, Flagged::default(), n)
        );
        assert_eq!(p.needy_since_mark(), 0);
        // A packet lost: once its gap is given up (within the events that
        // follow), every instrument is unverified until its next entry,
        // and those it touched are suspect (a RptSeq hole).
        let _lost = ch.next_event(t + MS);
        for k in 2..40 {
            for d in ch.next_event(t + k * MS) {
                let _ = f.on_incremental(&d.bytes, t + k * MS);
            }
        }
        p.publish(0, &mut f, &mut table, th);
        // What the feed's instruments hold now, counted afresh.
        let mut recount = Flagged::default();
        let mut needy = 0;
        for s in ch.specs() {
            let flags = flags_of(f.find(&format!("#{}", s.security_id)).unwrap());
            recount.change(0, flags);
            needy += usize::from(flags & NEEDY != 0);
        }
        assert!(recount.suspect > 0, "the lost packet shows: {recount:?}");
        assert_eq!((p.flagged(), p.needy()), (recount, needy));
        // Every one needy now turned needy after the mark.
        assert_eq!(p.needy_since_mark(), needy);
        // The loop heals them all.
        for d in ch.snapshot_loop(t + 200 * MS) {
            f.on_snapshot(&d.bytes, t + 200 * MS).unwrap();
        }
        p.publish(0, &mut f, &mut table, th);
        assert_eq!((p.needy(), p.flagged()), (0, Flagged::default()));
        assert_eq!(p.needy_since_mark(), 0);
        assert!(p.healed() >= n as u64);
    }
}
