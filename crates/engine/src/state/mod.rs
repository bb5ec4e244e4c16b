//! The per-(feed, symbol) state table: fixed capacity, one writer, lock-free readers.
//!
//! Slots are handed out densely in arrival order and never freed, so slot
//! numbers are stable handles and `0..len` are exactly the occupied slots.
//!
//! Feeds that share the table may each have slots held for them
//! ([`StateTable::reserve`]): a feed takes a new slot only while the
//! free slots still cover what every other feed has not used of its
//! reservation, so a flood of new symbols on one feed cannot take the
//! slots another was promised.

mod index;
pub use crate::sys::memory::prefetch;
pub mod region;
use tickguard_reader::reader::MAX_RETRIES;
pub use tickguard_reader::status::{feed_flag, verdict, FeedStatus, FeedStatusWords};
pub use tickguard_reader::{price, quote, seqlock, slot};

use crate::symbol::Symbol;
use crate::verdict::{Reasons, Thresholds};
use index::Index;
pub use price::Price;
pub use quote::{FeedKind, SeqTrack, SymbolState};
use region::{Owner, Region};
pub use slot::{Level, Record, Side, Slot, Top};
use std::sync::Arc;

// SAFETY: a slot is a stamp and words, every one an `AtomicU64`, for
// which zero bytes are the value 0: the default. Nothing in it needs a
// drop. (The engine is never built with the reader's loom model, whose
// atomics are not zero bytes.)
#[allow(unsafe_code)]
unsafe impl crate::sys::memory::Zeroable for Slot {}

/// Slot number: a stable handle for one (feed, symbol).
pub type SlotId = u32;

/// A lookup under way (see [`StateTable::probe`]).
#[derive(Debug, Clone, Copy)]
pub struct Probe(usize);

impl Probe {
    /// A probe of nothing, for filling arrays.
    pub const NONE: Probe = Probe(0);
}

/// A heap table's slots: on fresh pages, which the kernel maps as they are
/// first written, so slots never used cost nothing (a table sized for
/// thousands of SQF symbols in a replay of ITCH alone, say).
type HeapSlots = crate::sys::memory::Pages<Slot>;

fn heap_slots(n: usize) -> HeapSlots {
    crate::sys::memory::Pages::new(n)
}

/// Where the slots live.
#[derive(Clone)]
enum Store {
    /// On this process's heap (replay, tests, embedding): slots, and each
    /// feed's status.
    Heap(Arc<HeapSlots>, Arc<[FeedStatusWords]>),
    /// In memory another module owns: a shared-memory publication other
    /// processes read.
    Shared(Region),
}

impl Store {
    #[inline]
    fn slots(&self) -> &[Slot] {
        match self {
            Store::Heap(s, _) => s,
            Store::Shared(r) => r.slots(),
        }
    }

    #[inline]
    fn feed_status(&self, feed: u16) -> Option<&FeedStatusWords> {
        match self {
            Store::Heap(_, f) => f.get(feed as usize),
            Store::Shared(r) => r.feed_status(feed),
        }
    }
}

/// One feed's reservation and the slots it holds, in slots.
#[derive(Debug, Clone, Copy)]
struct Share {
    reserved: usize,
    used: usize,
    /// Directory entries beyond a slot's first held for the feed
    /// ([`StateTable::reserve_names`]), and those it made (another name
    /// for a slot, a name withdrawn).
    names: usize,
    aliases: usize,
}

impl Share {
    /// Slots of the reservation not used yet.
    fn unused(&self) -> usize {
        self.reserved.saturating_sub(self.used)
    }

    /// Entries of the reservation of names beyond a slot's first not
    /// used yet.
    fn aliases_unused(&self) -> usize {
        self.names.saturating_sub(self.aliases)
    }
}

/// The table as its single writer sees it.
pub struct StateTable {
    store: Store,
    index: Index,
    len: usize,
    /// Directory entries made (a shared table's: one per name).
    names: usize,
    /// Each feed's share, by feed id (the writer's own count, not
    /// published); empty: no slot is held for any feed.
    shares: Box<[Share]>,
    /// The feeds' unused reservations together, slots.
    owed: usize,
    /// The feeds' unused reservations of directory entries beyond a
    /// slot's first, together.
    aliases_owed: usize,
}

impl StateTable {
    /// A table of `capacity` slots (at least 1) on the heap, without feed
    /// status (see [`with_feeds`](Self::with_feeds)).
    pub fn new(capacity: usize) -> StateTable {
        StateTable::with_feeds(capacity, 0)
    }

    /// A table of `capacity` slots (at least 1) on the heap, and the status
    /// of `feeds` feeds, all allocated now on zeroed pages that the kernel
    /// maps as they are first written (a replay's table, mostly unused:
    /// the first write into each page takes a page fault, so a live writer
    /// uses [`shared`](Self::shared), whose memory is written up front).
    pub fn with_feeds(capacity: usize, feeds: usize) -> StateTable {
        let capacity = capacity.clamp(1, u32::MAX as usize);
        let status = (0..feeds.min(1 << 16))
            .map(|_| FeedStatusWords::default())
            .collect();
        StateTable {
            store: Store::Heap(Arc::new(heap_slots(capacity)), status),
            index: Index::untouched(capacity),
            len: 0,
            names: 0,
            shares: Box::new([]),
            owed: 0,
            aliases_owed: 0,
        }
    }

    /// A table whose slots are those of a region another module owns (a
    /// shared-memory publication, `Arc<Publication>`); every new slot is
    /// also entered in the owner's directory.
    pub fn shared(region: impl Into<Region>) -> StateTable {
        let region = region.into();
        let capacity = region.slots().len();
        StateTable {
            store: Store::Shared(region),
            index: Index::new(capacity),
            len: 0,
            names: 0,
            shares: Box::new([]),
            owed: 0,
            aliases_owed: 0,
        }
    }

    /// Holds `reserved[f]` slots for feed `f` (feed ids are positions):
    /// from now on a feed takes a new slot only if the slots left free
    /// after it still hold every other feed's unused reservation, so a
    /// feed within its own reservation always gets one while the
    /// reservations together fit the capacity. A feed past the list
    /// reserves nothing. With one feed this changes nothing. Slots
    /// already taken count against their feeds' reservations.
    pub fn reserve(&mut self, reserved: &[usize]) {
        let mut shares: Box<[Share]> = reserved
            .iter()
            .map(|&reserved| Share {
                reserved,
                used: 0,
                names: 0,
                aliases: 0,
            })
            .collect();
        for s in &self.store.slots()[..self.len] {
            if let Some(share) = shares.get_mut(s.load_own().feed as usize) {
                share.used += 1;
            }
        }
        self.owed = shares.iter().map(Share::unused).sum();
        self.aliases_owed = 0;
        self.shares = shares;
    }

    /// Holds `names[f]` directory entries beyond its slots' first for
    /// feed `f` (after [`reserve`](Self::reserve), which lists the feeds):
    /// from now on a feed makes one more (another name for a slot, a name
    /// withdrawn) only if the room left still holds every other feed's
    /// unused reservation of them, as slots are held. The reservations
    /// together must fit the room the directory keeps beyond one entry a
    /// slot (the configuration's slot reservations bound them).
    pub fn reserve_names(&mut self, names: &[usize]) {
        for (share, &n) in self.shares.iter_mut().zip(names) {
            share.names = n;
        }
        self.aliases_owed = self.shares.iter().map(Share::aliases_unused).sum();
    }

    /// The feeds' unused reservations of names beyond a slot's first,
    /// together ([`reserve_names`](Self::reserve_names)).
    pub fn names_owed(&self) -> usize {
        self.aliases_owed
    }

    /// Whether `feed` may take a new slot: one is free, and the rest
    /// still hold every other feed's unused reservation.
    fn may_take(&self, feed: u16) -> bool {
        let own = self.shares.get(feed as usize).map_or(0, Share::unused);
        let free = self.capacity() - self.len;
        // `owed` counts `own` too: `owed - own` is the others'; one free
        // slot more than theirs leaves them theirs.
        free > self.owed - own
    }

    /// True when every slot is taken.
    pub fn is_full(&self) -> bool {
        self.len == self.capacity()
    }

    /// The owner of the memory the slots live in, if shared (the
    /// publication: `Publication::of` finds it).
    pub fn owner(&self) -> Option<&Arc<dyn Owner>> {
        match &self.store {
            Store::Heap(..) => None,
            Store::Shared(r) => Some(r.owner()),
        }
    }

    /// Publishes `feed`'s status (in the publication's feed extension, under
    /// its seqlock, or the heap table's copy); an unknown feed is ignored.
    /// Single writer only; a status equal to the last one costs no write.
    pub fn set_feed_status(&self, feed: u16, s: &FeedStatus) {
        if let Some(w) = self.store.feed_status(feed) {
            w.write(s);
        }
    }

    /// `feed`'s status as last set (all zero for an unknown feed): the
    /// writer's own words, read without the seqlock (see
    /// [`FeedStatusWords::load_own`]).
    pub fn feed_status(&self, feed: u16) -> FeedStatus {
        self.store
            .feed_status(feed)
            .map_or(FeedStatus::default(), FeedStatusWords::load_own)
    }

    /// The verdict for slot `id` at local time `now` ([`verdict`], with
    /// the feed's status), `offset` the feed's clock offset, ns.
    pub fn check(&self, id: SlotId, offset: i128, now: u64) -> Reasons {
        let f = self.record(id).facts();
        verdict(&f, &self.feed_status(f.feed), offset, now)
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.store.slots().len()
    }

    /// Occupied slots.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no slot is occupied.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The slot of (feed, symbol), if it has one.
    #[inline]
    pub fn find(&self, feed: u16, symbol: Symbol) -> Option<SlotId> {
        self.index.get(feed, symbol)
    }

    /// First half of a lookup: hashes (feed, symbol) and starts loading the
    /// index bucket, so that [`find_from`](Self::find_from) a little later
    /// does not wait on memory.
    #[inline]
    pub fn probe(&self, feed: u16, symbol: Symbol) -> Probe {
        let home = self.index.home(feed, symbol.key());
        prefetch(self.index.bucket(home));
        Probe(home)
    }

    /// Second half of a lookup: the slot of (feed, symbol), if it has one.
    /// (Start loading it with [`prefetch`] before updating it.)
    #[inline]
    pub fn find_from(&self, probe: Probe, feed: u16, symbol: Symbol) -> Option<SlotId> {
        self.index.get_from(probe.0, feed, symbol)
    }

    /// Gives (feed, symbol) a slot with a fresh state and `thresholds`;
    /// `None` when the table is full, or when the slots left are held for
    /// other feeds ([`reserve`](Self::reserve)). The caller has checked
    /// [`find`](Self::find).
    pub fn insert(&mut self, feed: u16, symbol: Symbol, thresholds: Thresholds) -> Option<SlotId> {
        // The name: the symbol's bytes without their space padding.
        let wire = symbol.to_wire();
        let n = wire.iter().position(|&b| b == b' ').unwrap_or(wire.len());
        self.insert_named(feed, symbol, &wire[..n], thresholds)
    }

    /// As [`insert`](Self::insert), the slot published under `name` (at
    /// most [`NAME_LEN`](tickguard_reader::layout::NAME_LEN) bytes, UTF-8)
    /// rather than the key's characters: an instrument whose key is made
    /// from an id of the venue's.
    pub fn insert_named(
        &mut self,
        feed: u16,
        key: Symbol,
        name: &[u8],
        thresholds: Thresholds,
    ) -> Option<SlotId> {
        if !self.may_take(feed) {
            return None;
        }
        let slot = self.store.slots().get(self.len)?;
        let id = self.len as SlotId;
        slot.init(feed, key, thresholds);
        self.index.insert(feed, key, id);
        self.len += 1;
        if let Some(share) = self.shares.get_mut(feed as usize) {
            if share.used < share.reserved {
                self.owed -= 1;
            }
            share.used += 1;
        }
        self.enter(feed, key.key(), name, id, false);
        Some(id)
    }

    /// Publishes slot `id` (of `feed`, key `key`) under one more name:
    /// readers looking `name` up find it, in place of any slot entered
    /// under that name before. `left`: the slot the name found until now,
    /// if another: counted in its `names_left` once the entry is
    /// published, so that handles found by the name there answer
    /// `no_quote`. False when the directory is full (it holds two names
    /// per slot of the capacity) or the table is not shared.
    pub fn alias(
        &mut self,
        feed: u16,
        key: Symbol,
        name: &[u8],
        id: SlotId,
        left: Option<SlotId>,
    ) -> bool {
        self.enter_alias(feed, key.key(), name, id, left.filter(|&l| l != id))
    }

    /// Withdraws `name` of `feed`: readers looking it up find nothing (an
    /// instrument's Symbol deleted, or moved to none). `left`: the slot the
    /// name found until now, counted as in [`alias`](Self::alias). False
    /// when the directory is full or the table is not shared.
    pub fn withdraw(&mut self, feed: u16, name: &[u8], left: Option<SlotId>) -> bool {
        // Key 0 is no symbol: the entry names no slot.
        self.enter_alias(feed, 0, name, 0, left)
    }

    /// Whether one more name of `feed` fits beside one entry kept for each
    /// slot not handed out yet (so that every slot can still be entered)
    /// and the other feeds' unused reservations of names (as their slots
    /// are held: a feed renaming without end does not take the names
    /// another feed was promised).
    fn aliases_fit(&self, feed: u16) -> bool {
        let room = tickguard_reader::layout::NAMES_PER_SLOT * self.store.slots().len();
        let kept = self.store.slots().len() - self.len;
        let own = self
            .shares
            .get(feed as usize)
            .map_or(0, Share::aliases_unused);
        self.names + kept + (self.aliases_owed - own) < room
    }

    /// [`enter`](Self::enter) of a name beyond a slot's first (movable),
    /// counted against `feed`'s reservation of names, then the move
    /// counted in slot `left`.
    fn enter_alias(
        &mut self,
        feed: u16,
        key: u64,
        name: &[u8],
        id: SlotId,
        left: Option<SlotId>,
    ) -> bool {
        if !self.aliases_fit(feed) || !self.enter(feed, key, name, id, true) {
            return false;
        }
        if let Some(share) = self.shares.get_mut(feed as usize) {
            if share.aliases_unused() > 0 {
                self.aliases_owed -= 1;
            }
            share.aliases += 1;
        }
        // After the entry: a reader that sees the count sees the entry.
        if let Some(s) = left.and_then(|l| self.store.slots().get(l as usize)) {
            s.name_left();
        }
        true
    }

    fn enter(&mut self, feed: u16, key: u64, name: &[u8], id: SlotId, movable: bool) -> bool {
        let Store::Shared(r) = &self.store else {
            return false;
        };
        let room = tickguard_reader::layout::NAMES_PER_SLOT * r.slots().len();
        if self.names >= room {
            return false;
        }
        r.enter(self.names, feed, key, name, id, movable);
        self.names += 1;
        true
    }

    /// Sets slot `id`'s thresholds (an instrument whose override is known
    /// only once a later name is). Single writer only.
    pub fn set_thresholds(&self, id: SlotId, thresholds: Thresholds) {
        if let Some(s) = self.store.slots().get(id as usize) {
            s.set_thresholds(thresholds);
        }
    }

    /// The slots, for the writer to update in place ([`Slot::update`]).
    #[inline]
    pub fn slots(&self) -> &[Slot] {
        self.store.slots()
    }

    /// The writer's copy of a whole slot (identity and thresholds too).
    pub fn record(&self, id: SlotId) -> Record {
        self.store.slots()[id as usize].load_own()
    }

    /// A reader handle sharing the slots.
    pub fn reader(&self) -> TableReader {
        TableReader {
            store: self.store.clone(),
        }
    }

    /// The occupied slots, in slot order, as the writer left them (read
    /// without the seqlock, as [`record`](Self::record) is).
    pub fn records(&self) -> impl Iterator<Item = Record> + '_ {
        self.store.slots()[..self.len].iter().map(|s| s.load_own())
    }
}

/// Read access to the slots, from any thread.
#[derive(Clone)]
pub struct TableReader {
    store: Store,
}

impl TableReader {
    /// A consistent copy of slot `id`; `None` past the capacity, or when
    /// the slot stayed mid-update for [`MAX_RETRIES`] reads (a live writer
    /// finishes within a few; a stamp left odd in a shared-memory file
    /// written over in place never would).
    #[inline]
    pub fn read(&self, id: SlotId) -> Option<Record> {
        let slot = self.store.slots().get(id as usize)?;
        bounded(|| slot.try_read())
    }

    /// `feed`'s status; `None` for an unknown feed, or one that stayed
    /// mid-update for [`MAX_RETRIES`] reads.
    pub fn feed_status(&self, feed: u16) -> Option<FeedStatus> {
        let words = self.store.feed_status(feed)?;
        bounded(|| words.try_read())
    }
}

/// The first of up to [`MAX_RETRIES`] attempts that gives a copy.
fn bounded<T>(mut attempt: impl FnMut() -> Option<T>) -> Option<T> {
    (0..MAX_RETRIES).find_map(|_| {
        let copy = attempt();
        if copy.is_none() {
            std::hint::spin_loop();
        }
        copy
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::{RuleState, Sequence};

    const TH: Thresholds = Thresholds {
        stale_ns: 1,
        source_ns: 2,
    };

    #[test]
    fn insert_until_full() {
        let mut t = StateTable::new(2);
        let a = Symbol::parse("A").unwrap();
        let b = Symbol::parse("B").unwrap();
        let c = Symbol::parse("C").unwrap();
        assert_eq!(t.insert(0, a, TH), Some(0));
        assert_eq!(t.insert(0, b, TH), Some(1));
        assert_eq!(t.insert(0, c, TH), None);
        assert_eq!(t.find(0, b), Some(1));
        assert_eq!(t.find(0, c), None);
        assert_eq!(t.len(), 2);
        let recs: Vec<_> = t.records().collect();
        assert_eq!(recs[1].symbol, Some(b));
        assert_eq!(recs[1].thresholds, TH);
    }

    fn symbol(feed: u16, n: usize) -> Symbol {
        Symbol::parse(&format!("F{feed}N{n}")).unwrap()
    }

    /// A flood of new symbols on one feed leaves another feed the `k`
    /// slots it reserves: the flooding feed (reserving one, as a feed
    /// without a bound does) gets `capacity - k` and no more.
    #[test]
    fn a_flood_leaves_other_feeds_their_reservations() {
        const CAPACITY: usize = 10;
        const K: usize = 4;
        let mut t = StateTable::new(CAPACITY);
        t.reserve(&[K, 1]);
        let flooded = (0..100)
            .map_while(|n| t.insert(1, symbol(1, n), TH))
            .count();
        assert_eq!(flooded, CAPACITY - K);
        assert_eq!(t.insert(1, symbol(1, 100), TH), None, "refused again");
        assert!(!t.is_full());
        for n in 0..K {
            assert!(t.insert(0, symbol(0, n), TH).is_some(), "reserved slot {n}");
        }
        assert!(t.is_full());
        assert_eq!(t.insert(0, symbol(0, K), TH), None, "the table is full");
        assert_eq!(t.records().filter(|r| r.feed == 0).count(), K);
    }

    /// A feed past its reservation shares what the reservations leave;
    /// one within it always gets a slot; a feed past the list reserves
    /// nothing.
    #[test]
    fn past_its_reservation_a_feed_shares_the_rest() {
        let mut t = StateTable::new(8);
        t.reserve(&[2, 3]);
        // Feed 0 takes its 2 and the 3 left over; not feed 1's 3.
        let taken = (0..10).map_while(|n| t.insert(0, symbol(0, n), TH)).count();
        assert_eq!(taken, 5);
        // Feed 2 (unlisted) finds no slot not held for feed 1.
        assert_eq!(t.insert(2, symbol(2, 0), TH), None);
        for n in 0..3 {
            assert!(t.insert(1, symbol(1, n), TH).is_some());
        }
        assert!(t.is_full());
        // Interleaved, the same shares: feed 1's slots are held for it
        // whenever it asks.
        let mut t = StateTable::new(8);
        t.reserve(&[2, 3]);
        let mut got = [0usize; 2];
        for n in 0..10 {
            for (k, f) in [0u16, 0, 0, 1].into_iter().enumerate() {
                if t.insert(f, symbol(f, n * 4 + k), TH).is_some() {
                    got[f as usize] += 1;
                }
            }
        }
        assert_eq!(got, [5, 3]);
    }

    /// One feed, or none held, is the table as before: a feed takes slots
    /// until it is full, whatever it reserves. Slots taken before
    /// [`StateTable::reserve`] count against their feeds' reservations.
    #[test]
    fn a_lone_feed_fills_the_table() {
        for reserved in [&[][..], &[0], &[3], &[100]] {
            let mut t = StateTable::new(5);
            t.reserve(reserved);
            let taken = (0..10).map_while(|n| t.insert(0, symbol(0, n), TH)).count();
            assert_eq!(taken, 5, "{reserved:?}");
        }
        let mut t = StateTable::new(5);
        for n in 0..2 {
            t.insert(1, symbol(1, n), TH).unwrap();
        }
        t.reserve(&[2, 3]);
        // Feed 1 holds 2 of its 3: one slot is kept for it.
        let taken = (0..10).map_while(|n| t.insert(0, symbol(0, n), TH)).count();
        assert_eq!(taken, 2);
        assert!(t.insert(1, symbol(1, 2), TH).is_some());
    }

    #[test]
    fn reader_sees_published_state() {
        let mut t = StateTable::new(4);
        let a = Symbol::parse("A").unwrap();
        let id = t.insert(3, a, TH).unwrap();
        let reader = t.reader();
        // What a first heartbeat naming sequence 10 leaves.
        t.slots()[id as usize].update(|s| {
            s.set_last_seq(9);
            s.set_suspect(true);
            s.set_alive(5);
        });
        let r = reader.read(id).unwrap();
        assert_eq!(r.feed, 3);
        assert_eq!(r.state.seq.last_seq, 9);
        assert!(reader.read(4).is_none());
        // A slot that stays mid-update (as a stamp left odd would) gives
        // no copy after a bounded number of reads, rather than a hang.
        t.slots()[id as usize].update(|_| assert!(reader.read(id).is_none()));
        assert!(reader.read(id).is_some());
    }

    /// The protocol-neutral verdict: the feed's liveness, watermark,
    /// suspect and closed count with the slot's; halted and one-sided books
    /// from the slot; equal to `evaluate` when the feed status is zero.
    #[test]
    fn verdict_combines_slot_and_feed() {
        use quote::Price as QuotePrice;
        let mut t = StateTable::with_feeds(4, 2);
        let th = Thresholds {
            stale_ns: 100,
            source_ns: 100,
        };
        let a = t.insert(1, Symbol::parse("A").unwrap(), th).unwrap();
        let b = t.insert(1, Symbol::parse("B").unwrap(), th).unwrap();
        let check = |t: &StateTable, id| t.check(id, 0, 1_000);
        assert_eq!(check(&t, a), Reasons::NO_QUOTE);
        // A slot of per-symbol state (a first full quote): the same as
        // `evaluate`, at every time.
        let p = QuotePrice {
            bid: 1.0,
            ask: 2.0,
            source_time: 950,
        };
        t.slots()[a as usize].update(|s| {
            s.set_last_seq(1);
            s.set_price(p);
            s.set_alive(920);
        });
        for now in [900, 1_000, 1_021, 1_051, 2_000] {
            let r = t.record(a);
            let want = crate::verdict::evaluate(Some(&r.state), th, 0, now);
            assert_eq!(t.check(a, 0, now), want, "at {now}");
        }
        // An exchange slot: no liveness or source time of its own.
        let top = Top {
            ask: Some(Level { price: 5, size: 1 }),
            exponent: -4,
            halted: true,
            ..Top::default()
        };
        t.slots()[b as usize].write_top(&top);
        assert_eq!(
            check(&t, b),
            Reasons::STALE | Reasons::STALE_AT_SOURCE | Reasons::HALTED
        );
        let status = FeedStatus {
            suspect: true,
            closed: true,
            joined: true,
            orders_refused: true,
            last_alive: 990,
            source_watermark: 995,
        };
        t.set_feed_status(1, &status);
        assert_eq!(t.feed_status(1), status);
        assert_eq!(t.reader().feed_status(1), Some(status));
        assert_eq!(
            check(&t, b),
            Reasons::SUSPECT | Reasons::HALTED | Reasons::CLOSED
        );
        // The feed's liveness also keeps the SQF-style slot alive; a slot's
        // own later times win over the feed's.
        assert_eq!(t.check(a, 0, 1_050), Reasons::SUSPECT | Reasons::CLOSED);
        // Unknown feeds: ignored, zero.
        t.set_feed_status(2, &status);
        assert_eq!(t.feed_status(2), FeedStatus::default());
        assert_eq!(StateTable::new(1).feed_status(0), FeedStatus::default());
        // No side at all: no_quote alone, whatever the feed says.
        t.slots()[b as usize].write_top(&Top {
            halted: true,
            ..Top::default()
        });
        assert_eq!(check(&t, b), Reasons::NO_QUOTE);
    }
}
