//! Memory a table can live in that another module lays out and keeps
//! alive (the shared-memory publication's file), instead of the heap: where
//! the slots are, where each feed's status words are, and who enters a new
//! slot in the directory readers look names up in.
//!
//! The table holds the [`Region`] by value: a slot or a feed's status is
//! found from a pointer and a length kept here, with no call to the owner
//! (the owner is called once per new slot, to enter it).

#![allow(unsafe_code)]

use super::slot::Slot;
use super::{FeedStatusWords, SlotId};
use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;

/// What owns a [`Region`]'s memory and keeps it mapped while it lives (the
/// shared-memory publication).
pub trait Owner: Any + Send + Sync {
    /// Enters slot `slot` of (feed, key, name) in the directory, as entry
    /// `index` (entries are entered in order, once each), marked movable
    /// ([`DIR_MOVABLE`](tickguard_reader::layout::DIR_MOVABLE)) when the
    /// name may later be entered for another slot. Called by the table's
    /// single writer, once per name entered.
    fn enter(&self, index: usize, feed: u16, key: u64, name: &[u8], slot: SlotId, movable: bool);
}

/// A table's slots and its feeds' status words, in memory an [`Owner`]
/// keeps alive.
#[derive(Clone)]
pub struct Region {
    owner: Arc<dyn Owner>,
    slots: NonNull<Slot>,
    capacity: usize,
    /// Feed 0's status words; feed `f`'s lie `f * stride` bytes further.
    status: NonNull<FeedStatusWords>,
    feeds: usize,
    stride: usize,
}

// SAFETY: the pointers are only turned into shared references to `Slot`s and
// `FeedStatusWords`, which are made of atomics (`Sync`), in memory that the
// owner held here keeps alive and in place (`Region::new`'s contract).
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

impl Region {
    /// A region of `slots`, and of `feeds` feed status words from `status`,
    /// each `stride` bytes after the one before, kept alive by `owner`.
    ///
    /// # Safety
    ///
    /// For as long as `owner` lives: the slots and every one of the status
    /// words are valid, aligned, never moved or freed, and accessed only
    /// through shared references (their atomics); `stride` is at least the
    /// size of the words, and `feeds * stride` bytes from `status` lie in
    /// one allocation (or mapping).
    pub unsafe fn new(
        owner: Arc<dyn Owner>,
        slots: &[Slot],
        status: NonNull<FeedStatusWords>,
        feeds: usize,
        stride: usize,
    ) -> Region {
        Region {
            owner,
            slots: NonNull::from(slots).cast(),
            capacity: slots.len(),
            status,
            feeds,
            stride,
        }
    }

    /// The slots.
    #[inline]
    pub fn slots(&self) -> &[Slot] {
        // SAFETY: `capacity` slots from `slots`, alive and in place while
        // `self.owner` is (`new`'s contract); shared access only.
        unsafe { std::slice::from_raw_parts(self.slots.as_ptr(), self.capacity) }
    }

    /// `feed`'s status words; `None` for a feed the region has none for.
    #[inline]
    pub fn feed_status(&self, feed: u16) -> Option<&FeedStatusWords> {
        let feed = feed as usize;
        if feed >= self.feeds {
            return None;
        }
        // SAFETY: feed < feeds, so the words lie `feed * stride` bytes from
        // the first, in the same allocation, alive and in place while
        // `self.owner` is (`new`'s contract); shared access only.
        unsafe {
            Some(
                &*self
                    .status
                    .as_ptr()
                    .cast::<u8>()
                    .add(feed * self.stride)
                    .cast::<FeedStatusWords>(),
            )
        }
    }

    /// Enters a name of a slot in the owner's directory ([`Owner::enter`]).
    #[inline]
    pub fn enter(
        &self,
        index: usize,
        feed: u16,
        key: u64,
        name: &[u8],
        slot: SlotId,
        movable: bool,
    ) {
        self.owner.enter(index, feed, key, name, slot, movable);
    }

    /// The owner of the memory.
    pub fn owner(&self) -> &Arc<dyn Owner> {
        &self.owner
    }
}
