//! The shared-memory publication: the state table in a file under `/dev/shm`
//! that other processes map read-only.
//!
//! ```text
//! offset            size               section
//! 0                 128                Header
//! FEEDS (=128)      512 × feeds        FeedBlock per feed, in configuration order
//! DIRECTORY         16 × capacity      DirEntry per occupied slot, in insertion order
//! SLOTS (4096-al.)  128 × capacity     Slot (see `state::slot`), one per (feed, symbol)
//! ```
//!
//! Header (every field a little-endian u64):
//!
//! | offset | field | notes |
//! |---|---|---|
//! | 0 | magic | `MAGIC` ("TKGUARD1") |
//! | 8 | version | `LAYOUT_VERSION`, stored last with Release: 0 means "not ready" |
//! | 16 | state | 1 running, 2 closed by the writer |
//! | 24 | writer_pid | |
//! | 32 | start_time_ns | writer start, ns since the Unix epoch (CLOCK_REALTIME) |
//! | 40 | heartbeat_ns | writer's last sign of life, ns since the Unix epoch (CLOCK_REALTIME) |
//! | 48 | heartbeat_period_ns | how often the writer refreshes `heartbeat_ns` |
//! | 56 | capacity | slots |
//! | 64 | feed_count | |
//! | 72 | directory_len | entries published (Release after the entry) |
//! | 80 | feeds_offset | bytes from the start of the file |
//! | 88 | directory_offset | |
//! | 96 | slots_offset | |
//! | 104 | file_len | |
//! | 112 | worst_cycle_ns | longest receiver duty cycle so far |
//! | 120 | datagrams | datagrams received so far, all lines |
//!
//! FeedBlock (512 bytes): 0..64 name (UTF-8, NUL padded), 64 kind (0 full,
//! 1 delta), 72 stale_ns, 80 source_ns (feed defaults), 88 line A, 96 line B
//! (`ipv4 << 16 | port`, 0 = none), 128 offset stamp (seqlock), 136 offset
//! low word, 144 offset high word (i128, ns, local − provider), 152..256
//! counters 32..45 (appended ids, in words the block had reserved), 256..512
//! counters 0..32 (u64 each, ids in [`counter`]).
//!
//! DirEntry (16 bytes): 0 symbol key, 8 `feed << 32 | slot`.
//!
//! The writer creates the file fresh, fills everything, then stores
//! `version` last. A reader refuses a file whose magic or version differ and
//! treats a stale `heartbeat_ns`, a `closed` state or a different
//! pid/start time as a dead writer: every answer is then `stale`.

#![allow(unsafe_code)]

use crate::config::Config;
use crate::rules::FeedKind;
use crate::state::slot::Slot;
use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// "TKGUARD1", little-endian.
pub const MAGIC: u64 = u64::from_le_bytes(*b"TKGUARD1");
/// Layout version of this file format.
pub const LAYOUT_VERSION: u64 = 1;
/// `state`: the writer is running.
pub const STATE_RUNNING: u64 = 1;
/// `state`: the writer closed the publication on a clean shutdown.
pub const STATE_CLOSED: u64 = 2;

/// The file header.
#[repr(C, align(128))]
pub struct Header {
    pub magic: AtomicU64,
    pub version: AtomicU64,
    pub state: AtomicU64,
    pub writer_pid: AtomicU64,
    pub start_time_ns: AtomicU64,
    pub heartbeat_ns: AtomicU64,
    pub heartbeat_period_ns: AtomicU64,
    pub capacity: AtomicU64,
    pub feed_count: AtomicU64,
    pub directory_len: AtomicU64,
    pub feeds_offset: AtomicU64,
    pub directory_offset: AtomicU64,
    pub slots_offset: AtomicU64,
    pub file_len: AtomicU64,
    /// Longest receiver duty cycle so far, ns.
    pub worst_cycle_ns: AtomicU64,
    /// Datagrams received so far, all lines.
    pub datagrams: AtomicU64,
}

/// Counter ids in a [`FeedBlock`]: stable, append-only.
pub mod counter {
    pub const PACKETS: usize = 0;
    pub const REJECTED: usize = 1;
    pub const MESSAGES: usize = 2;
    pub const QUOTES: usize = 3;
    pub const SNAPSHOTS: usize = 4;
    pub const HEARTBEATS: usize = 5;
    pub const UNKNOWN: usize = 6;
    pub const DUPLICATES: usize = 7;
    pub const TICKS_LOST: usize = 8;
    pub const TABLE_FULL: usize = 9;
    pub const KERNEL_DROPS: usize = 10;
    /// Snapshots that moved a symbol's sequence backwards (provider resets).
    pub const RESETS: usize = 11;
    /// Messages in accepted packets, per line: `LINE_MESSAGES + line`.
    pub const LINE_MESSAGES: usize = 12;
    /// Rejected packets, per line: `LINE_REJECTED + line`.
    pub const LINE_REJECTED: usize = 14;
    /// Rejections by reason: `REJECTED_BY_REASON + Reject::index()`.
    pub const REJECTED_BY_REASON: usize = 16;
    /// Datagrams, per line: `LINE_PACKETS + line` (line 0 = A, 1 = B).
    pub const LINE_PACKETS: usize = 26;
    /// Kernel drops (SO_RXQ_OVFL), per line.
    pub const LINE_KERNEL_DROPS: usize = 28;
    /// SO_RCVBUF in effect, bytes, per line.
    pub const LINE_RCVBUF: usize = 30;
    /// Counter slots at 256..512 of a block (ids below this).
    pub const COUNT: usize = 32;
    /// Of `DUPLICATES`, the quotes whose sequence was last applied from the
    /// other line: line B's copy of a tick line A delivered (or A's of B's).
    /// `DUPLICATES - LINE_COPIES` came twice on the same line.
    pub const LINE_COPIES: usize = 32;
    /// While every packet of the feed is rejected (see
    /// `handler::RejectRun::all_rejected`): arrival time of the first of
    /// them, ns since the Unix epoch; 0 otherwise.
    pub const ALL_REJECTED_SINCE: usize = 33;
    /// Packets rejected in a row so far while `ALL_REJECTED_SINCE` is set.
    pub const ALL_REJECTED_PACKETS: usize = 34;
    /// The most frequent reject reason of that run: `Reject::index() + 1`; 0 none.
    pub const ALL_REJECTED_REASON: usize = 35;
    /// Counter slots at 152..256 of a block (ids `COUNT..COUNT + MORE`).
    pub const MORE: usize = 13;
    /// Names, for tools that print them.
    pub const NAMES: [(usize, &str); 12] = [
        (PACKETS, "packets"),
        (REJECTED, "rejected"),
        (MESSAGES, "messages"),
        (QUOTES, "quotes"),
        (SNAPSHOTS, "snapshots"),
        (HEARTBEATS, "heartbeats"),
        (UNKNOWN, "unknown_messages"),
        (DUPLICATES, "duplicates"),
        (TICKS_LOST, "ticks_lost"),
        (TABLE_FULL, "table_full_drops"),
        (KERNEL_DROPS, "kernel_drops"),
        (RESETS, "resets"),
    ];
}

/// One feed's block.
#[repr(C, align(128))]
pub struct FeedBlock {
    pub name: [AtomicU64; 8],
    pub kind: AtomicU64,
    pub stale_ns: AtomicU64,
    pub source_ns: AtomicU64,
    pub lines: [AtomicU64; 2],
    reserved0: [AtomicU64; 3],
    pub offset_stamp: AtomicU64,
    pub offset_lo: AtomicU64,
    pub offset_hi: AtomicU64,
    /// Counters `counter::COUNT..`; use [`FeedBlock::counter`].
    pub more_counters: [AtomicU64; counter::MORE],
    pub counters: [AtomicU64; counter::COUNT],
}

impl FeedBlock {
    /// Counter `id` (ids in [`counter`]), wherever in the block it lives.
    #[inline]
    pub fn counter(&self, id: usize) -> Option<&AtomicU64> {
        match id.checked_sub(counter::COUNT) {
            None => self.counters.get(id),
            Some(more) => self.more_counters.get(more),
        }
    }
}

/// One directory entry.
#[repr(C)]
pub struct DirEntry {
    pub symbol: AtomicU64,
    pub feed_slot: AtomicU64,
}

const HEADER_LEN: usize = std::mem::size_of::<Header>();
const FEED_LEN: usize = std::mem::size_of::<FeedBlock>();
const DIR_LEN: usize = std::mem::size_of::<DirEntry>();
const SLOT_LEN: usize = std::mem::size_of::<Slot>();
const PAGE: usize = 4096;

fn align(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

/// Section offsets and the file length for a shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub feeds: usize,
    pub capacity: usize,
    pub feeds_offset: usize,
    pub directory_offset: usize,
    pub slots_offset: usize,
    pub file_len: usize,
}

impl Shape {
    /// The layout of a file with `feeds` feeds and `capacity` slots.
    pub fn new(feeds: usize, capacity: usize) -> Option<Shape> {
        let feeds_offset = HEADER_LEN;
        let directory_offset = align(feeds_offset.checked_add(feeds.checked_mul(FEED_LEN)?)?, 128);
        let slots_offset = align(
            directory_offset.checked_add(capacity.checked_mul(DIR_LEN)?)?,
            PAGE,
        );
        let file_len = align(
            slots_offset.checked_add(capacity.checked_mul(SLOT_LEN)?)?,
            PAGE,
        );
        Some(Shape {
            feeds,
            capacity,
            feeds_offset,
            directory_offset,
            slots_offset,
            file_len,
        })
    }
}

/// Typed views over a mapped region laid out as [`Shape`] says.
///
/// Everything in the region is an `AtomicU64` (or arrays and structs of
/// them, `repr(C)`), for which every bit pattern is valid, so shared
/// references into the mapping are sound however the bytes were written.
pub(crate) struct Views {
    base: *const u8,
    shape: Shape,
}

// SAFETY: the views only hand out shared references to atomics; the mapping
// they point into is kept alive by the owner (`Publication` or the reader's
// mapping) for as long as the `Views`.
unsafe impl Send for Views {}
unsafe impl Sync for Views {}

impl Views {
    /// # Safety
    /// `base` must point to a live mapping of at least `shape.file_len`
    /// bytes, aligned to a page, that outlives the returned value.
    pub(crate) unsafe fn new(base: *const u8, shape: Shape) -> Views {
        Views { base, shape }
    }

    pub(crate) fn header(&self) -> &Header {
        // SAFETY: offset 0, 128 bytes, within the mapping (file_len >= PAGE);
        // page alignment satisfies Header's 128-byte alignment.
        unsafe { &*(self.base as *const Header) }
    }

    pub(crate) fn feeds(&self) -> &[FeedBlock] {
        // SAFETY: `feeds` blocks of FEED_LEN from feeds_offset (a multiple of
        // 128) lie within file_len by construction of `Shape`.
        unsafe {
            std::slice::from_raw_parts(
                self.base.add(self.shape.feeds_offset) as *const FeedBlock,
                self.shape.feeds,
            )
        }
    }

    pub(crate) fn directory(&self) -> &[DirEntry] {
        // SAFETY: as for `feeds`; DirEntry needs 8-byte alignment, and
        // directory_offset is a multiple of 128.
        unsafe {
            std::slice::from_raw_parts(
                self.base.add(self.shape.directory_offset) as *const DirEntry,
                self.shape.capacity,
            )
        }
    }

    pub(crate) fn slots(&self) -> &[Slot] {
        // SAFETY: as for `feeds`; slots_offset is page aligned, so each Slot
        // is 128-byte aligned.
        unsafe {
            std::slice::from_raw_parts(
                self.base.add(self.shape.slots_offset) as *const Slot,
                self.shape.capacity,
            )
        }
    }
}

/// The writer's side: owns the file and its read-write mapping.
pub struct Publication {
    path: PathBuf,
    // Field order: `views` points into `map` and is dropped first.
    views: Views,
    _map: memmap2::MmapMut,
}

impl std::fmt::Debug for Publication {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publication")
            .field("path", &self.path)
            .finish()
    }
}

/// Packs a line for the feed block.
pub fn pack_line(l: std::net::SocketAddrV4) -> u64 {
    (u32::from(*l.ip()) as u64) << 16 | l.port() as u64
}

impl Publication {
    /// Creates the file fresh at `path` (an old one is removed first) with
    /// permission bits `mode`, sized for `config`, and fills the header and
    /// feed blocks. Readers see it once [`ready`](Self::ready) is called.
    pub fn create(
        path: &Path,
        mode: u32,
        config: &Config,
        now_ns: u64,
        heartbeat_period_ns: u64,
    ) -> io::Result<Publication> {
        let shape = Shape::new(config.feeds.len(), config.capacity).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "shared memory size overflows")
        })?;
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(path)?;
        // The umask may have narrowed the mode: set it exactly.
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        file.set_len(shape.file_len as u64)?;
        // SAFETY: the file was just created by this process and is not
        // truncated while mapped; other processes only map it read-only.
        let map = unsafe { memmap2::MmapMut::map_mut(&file)? };
        // SAFETY: the mapping is page aligned, `file_len` long, and owned by
        // the returned Publication next to the views.
        let views = unsafe { Views::new(map.as_ptr(), shape) };
        let p = Publication {
            path: path.to_path_buf(),
            views,
            _map: map,
        };
        let h = p.views.header();
        // Relaxed throughout: published by the Release store of `version` in `ready`.
        h.magic.store(MAGIC, Ordering::Relaxed);
        h.state.store(STATE_RUNNING, Ordering::Relaxed);
        h.writer_pid
            .store(std::process::id() as u64, Ordering::Relaxed);
        h.start_time_ns.store(now_ns, Ordering::Relaxed);
        h.heartbeat_ns.store(now_ns, Ordering::Relaxed);
        h.heartbeat_period_ns
            .store(heartbeat_period_ns, Ordering::Relaxed);
        h.capacity.store(shape.capacity as u64, Ordering::Relaxed);
        h.feed_count.store(shape.feeds as u64, Ordering::Relaxed);
        h.feeds_offset
            .store(shape.feeds_offset as u64, Ordering::Relaxed);
        h.directory_offset
            .store(shape.directory_offset as u64, Ordering::Relaxed);
        h.slots_offset
            .store(shape.slots_offset as u64, Ordering::Relaxed);
        h.file_len.store(shape.file_len as u64, Ordering::Relaxed);
        for (block, f) in p.views.feeds().iter().zip(&config.feeds) {
            let mut name = [0u8; 64];
            let n = f.name.len().min(64);
            name[..n].copy_from_slice(&f.name.as_bytes()[..n]);
            for (w, chunk) in block.name.iter().zip(name.chunks_exact(8)) {
                let mut b = [0u8; 8];
                b.copy_from_slice(chunk);
                w.store(u64::from_le_bytes(b), Ordering::Relaxed);
            }
            block
                .kind
                .store(matches!(f.kind, FeedKind::Delta) as u64, Ordering::Relaxed);
            block
                .stale_ns
                .store(f.thresholds.stale_ns, Ordering::Relaxed);
            block
                .source_ns
                .store(f.thresholds.source_ns, Ordering::Relaxed);
            for (w, l) in block.lines.iter().zip(&f.lines) {
                w.store(pack_line(*l), Ordering::Relaxed);
            }
        }
        Ok(p)
    }

    /// Makes the file visible to readers: stores the layout version last.
    pub fn ready(&self) {
        // Release: everything written in `create` happens-before a reader's
        // Acquire load that sees the version.
        self.views
            .header()
            .version
            .store(LAYOUT_VERSION, Ordering::Release);
    }

    /// The writer is alive at `now_ns` (CLOCK_REALTIME ns).
    #[inline]
    pub fn heartbeat(&self, now_ns: u64) {
        // Relaxed: a timestamp on its own; readers compare it with their clock.
        self.views
            .header()
            .heartbeat_ns
            .store(now_ns, Ordering::Relaxed);
    }

    /// Publishes receiver statistics (relaxed: statistics).
    pub fn set_receiver(&self, worst_cycle_ns: u64, datagrams: u64) {
        let h = self.views.header();
        h.worst_cycle_ns.store(worst_cycle_ns, Ordering::Relaxed);
        h.datagrams.store(datagrams, Ordering::Relaxed);
    }

    /// Marks a clean shutdown: readers answer `stale` at once.
    pub fn close(&self) {
        // Release: ordered after every slot update this writer made.
        self.views
            .header()
            .state
            .store(STATE_CLOSED, Ordering::Release);
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn views(&self) -> &Views {
        &self.views
    }

    /// Appends (feed, symbol) → slot to the directory as entry `index`.
    #[inline]
    pub(crate) fn publish_entry(&self, index: usize, feed: u16, symbol: u64, slot: u32) {
        let Some(e) = self.views.directory().get(index) else {
            return;
        };
        // Relaxed: published by the Release store of directory_len below.
        e.symbol.store(symbol, Ordering::Relaxed);
        e.feed_slot
            .store((feed as u64) << 32 | slot as u64, Ordering::Relaxed);
        // Release: pairs with the reader's Acquire load of directory_len.
        self.views
            .header()
            .directory_len
            .store(index as u64 + 1, Ordering::Release);
    }

    /// Publishes a feed's clock offset (seqlock over two words).
    #[inline]
    pub fn publish_offset(&self, feed: u16, offset: i128) {
        let Some(b) = self.views.feeds().get(feed as usize) else {
            return;
        };
        let s = b.offset_stamp.load(Ordering::Relaxed);
        if b.offset_lo.load(Ordering::Relaxed) == offset as u64
            && b.offset_hi.load(Ordering::Relaxed) == ((offset >> 64) as u64)
        {
            return;
        }
        b.offset_stamp.store(s.wrapping_add(1), Ordering::Relaxed);
        // Release fence: orders the odd stamp before the words (pairs with
        // the reader's Acquire fence).
        fence(Ordering::Release);
        b.offset_lo.store(offset as u64, Ordering::Relaxed);
        b.offset_hi.store((offset >> 64) as u64, Ordering::Relaxed);
        // Release: pairs with the reader's Acquire load of the stamp.
        b.offset_stamp.store(s.wrapping_add(2), Ordering::Release);
    }

    /// Stores counter `id` of `feed` (relaxed: a statistic).
    #[inline]
    pub fn set_counter(&self, feed: u16, id: usize, value: u64) {
        if let Some(c) = self
            .views
            .feeds()
            .get(feed as usize)
            .and_then(|b| b.counter(id))
        {
            c.store(value, Ordering::Relaxed);
        }
    }
}

/// Reads a feed block's clock offset; `None` while a write is in progress.
pub(crate) fn read_offset(b: &FeedBlock) -> Option<i128> {
    // Acquire: pairs with the Release store of the even stamp.
    let s1 = b.offset_stamp.load(Ordering::Acquire);
    if s1 & 1 == 1 {
        return None;
    }
    let lo = b.offset_lo.load(Ordering::Relaxed);
    let hi = b.offset_hi.load(Ordering::Relaxed);
    // Acquire fence: the word loads stay before the stamp re-load.
    fence(Ordering::Acquire);
    (b.offset_stamp.load(Ordering::Relaxed) == s1).then_some(((hi as i128) << 64) | lo as i128)
}

/// A feed block's name.
pub(crate) fn feed_name(b: &FeedBlock) -> String {
    let mut bytes = Vec::with_capacity(64);
    for w in &b.name {
        bytes.extend_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
    }
    let end = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn layout_is_pinned() {
        assert_eq!(size_of::<Header>(), 128);
        assert_eq!(offset_of!(Header, version), 8);
        assert_eq!(offset_of!(Header, heartbeat_ns), 40);
        assert_eq!(offset_of!(Header, directory_len), 72);
        assert_eq!(offset_of!(Header, file_len), 104);
        assert_eq!(size_of::<FeedBlock>(), 512);
        assert_eq!(offset_of!(FeedBlock, kind), 64);
        assert_eq!(offset_of!(FeedBlock, lines), 88);
        assert_eq!(offset_of!(FeedBlock, offset_stamp), 128);
        assert_eq!(offset_of!(FeedBlock, more_counters), 152);
        assert_eq!(offset_of!(FeedBlock, counters), 256);
        assert_eq!(size_of::<DirEntry>(), 16);
        assert_eq!(align_of::<Slot>(), 128);
        let s = Shape::new(2, 100).unwrap();
        assert_eq!(s.feeds_offset, 128);
        assert_eq!(s.directory_offset, 128 + 1024);
        assert_eq!(s.slots_offset % PAGE, 0);
        assert!(s.slots_offset >= s.directory_offset + 1600);
        assert_eq!(s.file_len, s.slots_offset + align(100 * 128, PAGE));
    }
}
