//! The per-(feed, symbol) state table: fixed capacity, one writer, lock-free readers.
//!
//! Slots are handed out densely in arrival order and never freed, so slot
//! numbers are stable handles and `0..len` are exactly the occupied slots.

mod index;
mod prefetch;
pub use prefetch::prefetch;
pub mod seqlock;
pub mod slot;

use crate::shm::Publication;
use crate::symbol::Symbol;
use crate::verdict::Thresholds;
use index::Index;
pub use slot::{Record, Slot};
use std::sync::Arc;

/// Slot number: a stable handle for one (feed, symbol).
pub type SlotId = u32;

/// A lookup under way (see [`StateTable::probe`]).
#[derive(Debug, Clone, Copy)]
pub struct Probe(usize);

impl Probe {
    /// A probe of nothing, for filling arrays.
    pub const NONE: Probe = Probe(0);
}

/// Where the slots live.
#[derive(Clone)]
enum Store {
    /// On this process's heap (replay, tests, embedding).
    Heap(Arc<[Slot]>),
    /// In a shared-memory publication other processes read.
    Shared(Arc<Publication>),
}

impl Store {
    #[inline]
    fn slots(&self) -> &[Slot] {
        match self {
            Store::Heap(s) => s,
            Store::Shared(p) => p.views().slots(),
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
    /// A table of `capacity` slots (at least 1) on the heap, all allocated now.
    pub fn new(capacity: usize) -> StateTable {
        let capacity = capacity.clamp(1, u32::MAX as usize);
        StateTable {
            store: Store::Heap((0..capacity).map(|_| Slot::default()).collect()),
            index: Index::new(capacity),
            len: 0,
        }
    }

    /// A table whose slots are those of a shared-memory publication; every
    /// new slot is also entered in its directory.
    pub fn shared(publication: Arc<Publication>) -> StateTable {
        let capacity = publication.views().slots().len();
        StateTable {
            store: Store::Shared(publication),
            index: Index::new(capacity),
            len: 0,
        }
    }

    /// The publication the slots live in, if shared.
    #[inline]
    pub fn publication(&self) -> Option<&Publication> {
        match &self.store {
            Store::Heap(_) => None,
            Store::Shared(p) => Some(p),
        }
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
        prefetch::prefetch(self.index.bucket(home));
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
        if let Store::Shared(p) = &self.store {
            p.publish_entry(self.len, feed, symbol.key(), id);
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
        t.slots()[id as usize].update(|s| crate::protocol::sqf::rules::heartbeat(s, 10, 5));
        let r = reader.read(id).unwrap();
        assert_eq!(r.feed, 3);
        assert_eq!(r.state.seq.last_seq, 9);
        assert!(reader.read(4).is_none());
    }
}
