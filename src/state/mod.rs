//! The per-(feed, symbol) state table: fixed capacity, one writer, lock-free readers.
//!
//! Slots are handed out densely in arrival order and never freed, so slot
//! numbers are stable handles and `0..len` are exactly the occupied slots.

mod index;
pub use crate::sys::memory::prefetch;
pub mod price;
pub mod quote;
pub mod region;
pub mod seqlock;
pub mod slot;

use crate::symbol::Symbol;
use crate::verdict::{Reasons, Thresholds};
use index::Index;
pub use price::Price;
pub use quote::{FeedKind, SeqTrack, SymbolState};
use region::{Owner, Region};
use seqlock::SeqLock;
pub use slot::{Level, Record, Side, Slot, Top};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What an exchange feed keeps per feed rather than per symbol (ITCH:
/// liveness, source watermark, suspect while a gap is open, trading hours).
/// SQF leaves it all zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FeedStatus {
    /// Every symbol of the feed is suspect (a gap open or given up, a
    /// mid-session join, or orders refused for room this session).
    pub suspect: bool,
    /// The market is closed: every symbol answers `closed`.
    pub closed: bool,
    /// The feed's session is joined (informational).
    pub joined: bool,
    /// The books refused an add for room (`max_orders`) this session: one
    /// reason for `suspect`, which lasts until the session changes.
    pub orders_refused: bool,
    /// Last sign of life of the feed, ns since the Unix epoch (local clock); 0 = none.
    pub last_alive: u64,
    /// Latest source time seen on the feed, ns since the Unix epoch
    /// (provider clock); 0 = none.
    pub source_watermark: u64,
}

/// Bits of [`FeedStatusWords::flags`].
pub mod feed_flag {
    pub const SUSPECT: u64 = 1 << 0;
    pub const CLOSED: u64 = 1 << 1;
    pub const JOINED: u64 = 1 << 2;
    pub const ORDERS_REFUSED: u64 = 1 << 3;
}

/// A [`FeedStatus`] behind its seqlock: bytes 512..544 of a publication's
/// feed block (`state_stamp`, `flags`, `last_alive`, `source_watermark`),
/// and the heap table's copy.
#[repr(C)]
#[derive(Default)]
pub struct FeedStatusWords {
    /// Odd while written, +2 per write.
    pub stamp: SeqLock,
    /// [`feed_flag`] bits.
    pub flags: AtomicU64,
    pub last_alive: AtomicU64,
    pub source_watermark: AtomicU64,
}

impl FeedStatusWords {
    /// Stores `s` as one write (skipped when nothing changed). Single writer only.
    pub fn write(&self, s: &FeedStatus) {
        let flags = [
            (s.suspect, feed_flag::SUSPECT),
            (s.closed, feed_flag::CLOSED),
            (s.joined, feed_flag::JOINED),
            (s.orders_refused, feed_flag::ORDERS_REFUSED),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .fold(0, |f, (_, bit)| f | bit);
        let words = [
            (&self.flags, flags),
            (&self.last_alive, s.last_alive),
            (&self.source_watermark, s.source_watermark),
        ];
        // Relaxed: the writer reads back its own stores.
        if words.iter().all(|(w, v)| w.load(Ordering::Relaxed) == *v) {
            return;
        }
        self.stamp.write(|| {
            for (w, v) in words {
                // Relaxed: published by the Release store of the stamp in `SeqLock::write`.
                w.store(v, Ordering::Relaxed);
            }
        });
    }

    /// One attempt at a consistent copy; `None` if a write overlapped.
    #[inline]
    pub fn try_read(&self) -> Option<FeedStatus> {
        let ([flags, last_alive, source_watermark], _) = self.stamp.try_read(|| {
            // Relaxed: ordered by the seqlock's stamp and fences.
            [
                self.flags.load(Ordering::Relaxed),
                self.last_alive.load(Ordering::Relaxed),
                self.source_watermark.load(Ordering::Relaxed),
            ]
        })?;
        Some(FeedStatus {
            suspect: flags & feed_flag::SUSPECT != 0,
            closed: flags & feed_flag::CLOSED != 0,
            joined: flags & feed_flag::JOINED != 0,
            orders_refused: flags & feed_flag::ORDERS_REFUSED != 0,
            last_alive,
            source_watermark,
        })
    }

    /// A consistent copy, retrying while a write is in progress.
    fn read(&self) -> FeedStatus {
        loop {
            if let Some(s) = self.try_read() {
                return s;
            }
            std::hint::spin_loop();
        }
    }
}

/// The verdict for a slot's record, whatever the protocol (the same in
/// process, in the Rust `Reader` and in `tickguard.h`): liveness and source
/// time are the later of the symbol's and the feed's, suspect either's,
/// closed the feed's, halted and invalid the symbol's; `no_quote` (alone)
/// when the book has neither side. `offset` is the feed's clock offset
/// (local − provider), ns; `now` local ns since the Unix epoch. Differences
/// in 128 bits, comparisons strict, as [`crate::verdict::evaluate`], which
/// it equals for SQF (whose feed status stays zero).
#[inline]
pub fn verdict(r: &Record, feed: &FeedStatus, offset: i128, now: u64) -> Reasons {
    if r.no_quote() {
        return Reasons::NO_QUOTE;
    }
    let s = &r.state;
    let now = now as i128;
    let alive = s.last_alive.max(feed.last_alive) as i128;
    let source = s
        .price
        .map_or(0, |p| p.source_time)
        .max(feed.source_watermark) as i128;
    let mut reasons = Reasons::empty();
    for (on, reason) in [
        (now - alive > r.thresholds.stale_ns as i128, Reasons::STALE),
        (
            now - source - offset > r.thresholds.source_ns as i128,
            Reasons::STALE_AT_SOURCE,
        ),
        (s.suspect || feed.suspect, Reasons::SUSPECT),
        (s.invalid, Reasons::INVALID_PRICE),
        (r.halted, Reasons::HALTED),
        (feed.closed, Reasons::CLOSED),
    ] {
        if on {
            reasons |= reason;
        }
    }
    reasons
}

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
#[cfg(not(tickguard_loom))]
type HeapSlots = crate::sys::memory::Pages<Slot>;
/// Under loom the atomics are loom's, not zero bytes: built one by one.
#[cfg(tickguard_loom)]
type HeapSlots = Box<[Slot]>;

#[cfg(not(tickguard_loom))]
fn heap_slots(n: usize) -> HeapSlots {
    crate::sys::memory::Pages::new(n)
}

#[cfg(tickguard_loom)]
fn heap_slots(n: usize) -> HeapSlots {
    (0..n).map(|_| Slot::default()).collect()
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

/// The table as its single writer sees it.
pub struct StateTable {
    store: Store,
    index: Index,
    len: usize,
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
        }
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

    /// `feed`'s status as last set (all zero for an unknown feed).
    pub fn feed_status(&self, feed: u16) -> FeedStatus {
        self.store
            .feed_status(feed)
            .map_or(FeedStatus::default(), |w| w.read())
    }

    /// The verdict for slot `id` at local time `now` ([`verdict`], with
    /// the feed's status), `offset` the feed's clock offset, ns.
    pub fn check(&self, id: SlotId, offset: i128, now: u64) -> Reasons {
        let r = self.record(id);
        verdict(&r, &self.feed_status(r.feed), offset, now)
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
    /// `None` when the table is full. The caller has checked [`find`](Self::find).
    pub fn insert(&mut self, feed: u16, symbol: Symbol, thresholds: Thresholds) -> Option<SlotId> {
        let slot = self.store.slots().get(self.len)?;
        let id = self.len as SlotId;
        slot.init(feed, symbol, thresholds);
        self.index.insert(feed, symbol, id);
        if let Store::Shared(r) = &self.store {
            // The name: the symbol's bytes without their space padding.
            let wire = symbol.to_wire();
            let n = wire.iter().position(|&b| b == b' ').unwrap_or(wire.len());
            r.enter(self.len, feed, symbol.key(), &wire[..n], id);
        }
        self.len += 1;
        Some(id)
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

    /// Consistent copies of the occupied slots, in slot order.
    pub fn records(&self) -> impl Iterator<Item = Record> + '_ {
        self.store.slots()[..self.len].iter().map(|s| s.read().0)
    }
}

/// Read access to the slots, from any thread.
#[derive(Clone)]
pub struct TableReader {
    store: Store,
}

impl TableReader {
    /// A consistent copy of slot `id`, or `None` past the capacity.
    #[inline]
    pub fn read(&self, id: SlotId) -> Option<Record> {
        self.store.slots().get(id as usize).map(|s| s.read().0)
    }

    /// `feed`'s status (all zero for an unknown feed).
    pub fn feed_status(&self, feed: u16) -> FeedStatus {
        self.store
            .feed_status(feed)
            .map_or(FeedStatus::default(), |w| w.read())
    }
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
        assert_eq!(t.reader().feed_status(1), status);
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
