//! The shared-memory publication: the state table in a file under `/dev/shm`
//! that other processes map read-only.
//!
//! ```text
//! offset            size               section
//! 0                 128                Header
//! FEEDS (=128)      1024 × feeds       FeedBlock per feed, in configuration order
//! DIRECTORY         48 × capacity      DirEntry per occupied slot, in insertion order
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
//! FeedBlock (1024 bytes): 0..64 name (UTF-8, NUL padded), 64 kind (0 full,
//! 1 delta), 72 protocol (0 sqf, 1 itch50), 80 reserved (zero), 88 line A, 96 line B
//! (`ipv4 << 16 | port`, 0 = none), 104 counters stamp (seqlock over every
//! counter of the block: odd while the writer stores a heartbeat's set, +2
//! per set), 112 and 120 reserved (zero), 128 offset stamp (seqlock), 136 offset
//! low word, 144 offset high word (i128, ns, local − provider), 152..256
//! counters 32..45 (appended ids, in words the block had reserved), 256..512
//! counters 0..32 (u64 each, ids in [`counter`]). The feed extension, for
//! protocols that keep state per feed (SQF leaves it zero):
//!
//! | offset | field | notes |
//! |---|---|---|
//! | 512 | state_stamp | seqlock over 520..544: odd while written, +2 per write |
//! | 520 | flags | bit 0 suspect, 1 closed, 2 joined, 3 orders refused |
//! | 528 | last_alive | ns since the Unix epoch, local clock; 0 = none |
//! | 536 | source_watermark | ns since the Unix epoch, provider clock; 0 = none |
//! | 544..1024 | counters 64..124 | [`counter::EXT`] on, under the counters stamp |
//!
//! DirEntry (48 bytes): 0 key (SQF and ITCH: the 8 symbol bytes as a
//! little-endian u64), 8 `feed << 32 | slot`, 16..48 name (UTF-8, NUL
//! padded; SQF and ITCH: the symbol without its trailing spaces). Readers
//! look an instrument up by its name.
//!
//! One writer per path: it holds an exclusive `flock` on `<path>.lock`
//! ([`WriterLock`], which also holds its pid) for its whole life. It builds
//! the file under a temporary name in the same directory (blocks reserved
//! with `posix_fallocate`, so a full filesystem is a start-up error rather
//! than a SIGBUS later), fills everything, stores `version` last and only
//! then renames the file over `path`. It never replaces a file at `path`
//! that is not a tickguard publication.
//!
//! A reader refuses a file it cannot trust (not a regular file, owned by
//! another user than the expected one or root, writable by group or
//! others), one whose magic or version differ or whose length is shorter
//! than its header says; and treats a stale `heartbeat_ns`, a writer time
//! in its future, a `closed` state or a different pid/start time as a dead
//! writer: every answer is then `stale`.

#![allow(unsafe_code)]

use crate::config::Protocol;
use crate::state::region::{Owner, Region};
use crate::state::seqlock::SeqLock;
use crate::state::slot::Slot;
use crate::state::FeedKind;
use crate::state::{FeedStatus, FeedStatusWords, SlotId, StateTable};
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// "TKGUARD1", little-endian.
pub const MAGIC: u64 = u64::from_le_bytes(*b"TKGUARD1");
/// Layout version of this file format.
pub const LAYOUT_VERSION: u64 = 2;
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
    /// The state table was full: SQF counts the messages dropped for
    /// symbols with no slot, an exchange feed the symbols refused a slot
    /// (each once).
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
    /// `DUPLICATES - LINE_COPIES` came twice on the same line. ITCH: the
    /// messages of the other line's copy of a packet.
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
    /// First id of the feed extension's counters (bytes 544..1024), written
    /// by protocols that sequence a whole feed (ITCH).
    pub const EXT: usize = 64;
    /// Counter slots in the feed extension (ids `EXT..EXT + EXT_COUNT`).
    pub const EXT_COUNT: usize = 60;
    /// One past the highest counter id: the length of a full copy.
    pub const ALL: usize = EXT + EXT_COUNT;
    /// The next sequence number to apply; 0 unset.
    pub const NEXT: usize = EXT;
    /// The highest sequence number seen.
    pub const HIGH: usize = EXT + 1;
    /// Messages held back behind a gap.
    pub const HELD: usize = EXT + 2;
    /// Gaps not yet filled.
    pub const GAPS_OPEN: usize = EXT + 3;
    /// Messages recovered by re-request.
    pub const RECOVERED: usize = EXT + 4;
    /// Session changes.
    pub const SESSION_CHANGES: usize = EXT + 5;
    /// Packets of a session no longer current.
    pub const STALE_SESSION: usize = EXT + 6;
    /// Messages naming an order the book does not know.
    pub const UNKNOWN_ORDERS: usize = EXT + 7;
    /// Messages the book could not apply consistently.
    pub const ANOMALIES: usize = EXT + 8;
    /// Re-requests sent.
    pub const REQUESTS_SENT: usize = EXT + 9;
    /// Gaps given up after their deadline.
    pub const GAPS_EXPIRED: usize = EXT + 10;
    /// Sequence numbers whose content differed between lines A and B.
    pub const LINE_MISMATCHES: usize = EXT + 11;
    /// The session's 10 bytes, NUL padded: bytes 0..8 as a little-endian word…
    pub const SESSION_LO: usize = EXT + 12;
    /// … and bytes 8..10.
    pub const SESSION_HI: usize = EXT + 13;
    /// BinaryFILE records that were not valid messages.
    pub const INVALID_RECORDS: usize = EXT + 14;
    /// Adds the books refused because they held `max_orders` live orders.
    pub const ORDERS_REFUSED: usize = EXT + 15;
    /// Gaps filled by their deadline, by the time from the packet that
    /// revealed the gap to its last fill: `RECOVERY_LATENCY + i` counts
    /// those up to 16 µs × 2^i (the last bucket, those above), live only.
    pub const RECOVERY_LATENCY: usize = EXT + 16;
    /// Buckets of `RECOVERY_LATENCY`.
    pub const RECOVERY_BUCKETS: usize = 16;

    /// Upper bound of `RECOVERY_LATENCY` bucket `i`, ns: 16 µs × 2^i (the
    /// last is open).
    pub const fn recovery_bucket_bound_ns(i: usize) -> u64 {
        16_000 << i
    }
    /// Re-requests that could not be sent (a full socket buffer, no route).
    pub const REQUEST_ERRORS: usize = EXT + 32;
    /// Times the feed's `request_rate` held re-requests back for a later
    /// cycle.
    pub const REQUESTS_DEFERRED: usize = EXT + 33;
    /// Names of the extension counters tools print (protocols other than SQF only).
    pub const EXT_NAMES: [(usize, &str); 16] = [
        (NEXT, "next"),
        (HIGH, "high"),
        (HELD, "held"),
        (GAPS_OPEN, "gaps_open"),
        (RECOVERED, "recovered"),
        (SESSION_CHANGES, "session_changes"),
        (STALE_SESSION, "stale_session"),
        (UNKNOWN_ORDERS, "unknown_orders"),
        (ANOMALIES, "anomalies"),
        (REQUESTS_SENT, "requests_sent"),
        (GAPS_EXPIRED, "gaps_expired"),
        (LINE_MISMATCHES, "line_mismatches"),
        (INVALID_RECORDS, "invalid_records"),
        (ORDERS_REFUSED, "orders_refused"),
        (REQUEST_ERRORS, "request_errors"),
        (REQUESTS_DEFERRED, "requests_deferred"),
    ];
    /// The session as text from the two session words (up to the first
    /// NUL, trailing spaces dropped, [`printable`](super::printable): the bytes came off the
    /// network); empty when unset.
    pub fn session(lo: u64, hi: u64) -> String {
        let mut b = [0u8; 10];
        b[..8].copy_from_slice(&lo.to_le_bytes());
        b[8..].copy_from_slice(&hi.to_le_bytes()[..2]);
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        super::printable(b[..end].trim_ascii_end())
    }
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
    /// Word 72: the feed's protocol (0 sqf, 1 itch50).
    pub protocol: AtomicU64,
    /// Word 80: reserved, zero (once a default threshold, which no reader
    /// used: each slot holds the thresholds in force).
    reserved0: AtomicU64,
    pub lines: [AtomicU64; 2],
    /// Word 104: seqlock stamp of the counters, +2 per heartbeat's set
    /// (see [`Publication::write_counters`]).
    pub counters_stamp: SeqLock,
    reserved1: [AtomicU64; 2],
    pub offset_stamp: SeqLock,
    pub offset_lo: AtomicU64,
    pub offset_hi: AtomicU64,
    /// Counters `counter::COUNT..`; use [`FeedBlock::counter`].
    pub more_counters: [AtomicU64; counter::MORE],
    pub counters: [AtomicU64; counter::COUNT],
    /// Bytes 512..544: the feed's status (see [`crate::state::FeedStatus`]).
    pub status: FeedStatusWords,
    /// Counters `counter::EXT..`; use [`FeedBlock::counter`].
    pub ext_counters: [AtomicU64; counter::EXT_COUNT],
}

impl FeedBlock {
    /// Counter `id` (ids in [`counter`]), wherever in the block it lives.
    #[inline]
    pub fn counter(&self, id: usize) -> Option<&AtomicU64> {
        if id >= counter::EXT {
            self.ext_counters.get(id - counter::EXT)
        } else if id >= counter::COUNT {
            self.more_counters.get(id - counter::COUNT)
        } else {
            self.counters.get(id)
        }
    }
}

/// Bytes of a directory entry's name.
pub const NAME_LEN: usize = 32;

/// One directory entry.
#[repr(C)]
pub struct DirEntry {
    /// The instrument's key (SQF, ITCH: the symbol's 8 bytes).
    pub key: AtomicU64,
    pub feed_slot: AtomicU64,
    /// The instrument's name, UTF-8, NUL padded.
    pub name: [AtomicU64; NAME_LEN / 8],
}

/// A name as directory name words (NUL padded); `None` when longer than
/// [`NAME_LEN`] or holding a NUL (no entry could match it).
pub fn name_words(name: &[u8]) -> Option<[u64; NAME_LEN / 8]> {
    if name.len() > NAME_LEN || name.contains(&0) {
        return None;
    }
    let mut bytes = [0u8; NAME_LEN];
    bytes[..name.len()].copy_from_slice(name);
    Some(std::array::from_fn(|i| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[8 * i..8 * i + 8]);
        u64::from_le_bytes(w)
    }))
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

/// The writer's side: owns the file, its read-write mapping and the
/// writer lock of its path.
pub struct Publication {
    path: PathBuf,
    /// Where the file is built before [`publish`](Self::publish) renames it to `path`.
    staging: PathBuf,
    /// Renamed into place (a file not yet published is removed on drop).
    published: AtomicBool,
    /// (device, inode) of the file, to remove it only while it is still ours.
    dev_ino: (u64, u64),
    // Field order: `views` points into `map` and is dropped first.
    views: Views,
    _map: memmap2::MmapMut,
    _lock: WriterLock,
}

impl Drop for Publication {
    fn drop(&mut self) {
        if !self.published.load(Ordering::Relaxed) {
            let _ = std::fs::remove_file(&self.staging);
        }
    }
}

/// An exclusive claim on a publication path for the writer's life: an
/// `flock` on `<path>.lock`, released when the process ends however it
/// ends. The file holds the holder's pid; a writer that ends normally
/// removes it (one killed leaves it, unlocked and harmless).
#[derive(Debug)]
pub struct WriterLock {
    shm_path: PathBuf,
    lock_path: PathBuf,
    dev_ino: (u64, u64),
    // Closed after `drop` removed the file: the lock is held until then.
    _file: File,
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        // Still locked here; a writer that opened this file meanwhile sees it
        // gone once it has the lock, and retakes it on a new file.
        if let Ok(m) = std::fs::symlink_metadata(&self.lock_path) {
            if (m.dev(), m.ino()) == self.dev_ino {
                let _ = std::fs::remove_file(&self.lock_path);
            }
        }
    }
}

/// `<path>.lock`.
pub fn lock_path(shm_path: &Path) -> PathBuf {
    let mut s = OsString::from(shm_path.as_os_str());
    s.push(".lock");
    PathBuf::from(s)
}

fn refuse(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, msg)
}

use crate::sys::file::{effective_uid as euid, try_lock_exclusive};

impl WriterLock {
    /// Takes the lock of `shm_path`, or says which pid holds it. Refuses a
    /// lock file that is a symbolic link or owned by another user.
    pub fn acquire(shm_path: &Path) -> io::Result<WriterLock> {
        let path = lock_path(shm_path);
        let fail = |e: io::Error| io::Error::new(e.kind(), format!("lock {}: {e}", path.display()));
        // A writer that ends removes its lock file while still holding it: a
        // lock taken on a file no longer at the path is retaken on the new one.
        loop {
            let file = crate::sys::file::open_or_create(&path, 0o644).map_err(fail)?;
            let meta = file.metadata()?;
            if !meta.file_type().is_file() || meta.uid() != euid() {
                return Err(refuse(format!(
                    "lock {} is not a regular file of this user (uid {}, owner uid {}): remove it",
                    path.display(),
                    euid(),
                    meta.uid()
                )));
            }
            if !try_lock_exclusive(&file).map_err(fail)? {
                let mut text = String::new();
                let _ = (&file).take(32).read_to_string(&mut text);
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!(
                        "in use by another writer, pid {} (it holds {}): one writer per path",
                        text.trim(),
                        path.display()
                    ),
                ));
            }
            let here = std::fs::symlink_metadata(&path).ok();
            if here.map(|m| (m.dev(), m.ino())) != Some((meta.dev(), meta.ino())) {
                continue;
            }
            file.set_len(0)?;
            file.write_all_at(format!("{}\n", std::process::id()).as_bytes(), 0)?;
            return Ok(WriterLock {
                shm_path: shm_path.to_path_buf(),
                lock_path: path,
                dev_ino: (meta.dev(), meta.ino()),
                _file: file,
            });
        }
    }

    /// The publication path this lock guards.
    pub fn shm_path(&self) -> &Path {
        &self.shm_path
    }
}

/// Errors unless a file at `path` may be replaced: nothing there, or a
/// tickguard publication (magic) this user may replace.
fn check_replaceable(path: &Path) -> io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let not_ours = |what: &str| {
        refuse(format!(
            "the existing file {what}: refusing to replace it (remove it, or choose another [sidecar] shm_path)"
        ))
    };
    if !meta.file_type().is_file() {
        return Err(not_ours("is not a regular file"));
    }
    let mut magic = [0u8; 8];
    let read = crate::sys::file::open_read(path).and_then(|f| f.read_exact_at(&mut magic, 0));
    if read.is_err() || u64::from_le_bytes(magic) != MAGIC {
        return Err(not_ours(
            "is not a tickguard publication (no TKGUARD1 magic)",
        ));
    }
    if meta.uid() != euid() && euid() != 0 {
        return Err(not_ours(&format!(
            "is owned by uid {}, not this user (uid {})",
            meta.uid(),
            euid()
        )));
    }
    Ok(())
}

impl std::fmt::Debug for Publication {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publication")
            .field("path", &self.path)
            .finish()
    }
}

/// What the publication shows of one feed, in its feed block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedInfo {
    /// Feed name (the first 64 bytes are stored).
    pub name: String,
    /// Full or delta.
    pub kind: FeedKind,
    /// Line A, then line B if any.
    pub lines: Vec<std::net::SocketAddrV4>,
    /// The protocol the feed speaks.
    pub protocol: Protocol,
}

/// Packs a line for the feed block.
pub fn pack_line(l: std::net::SocketAddrV4) -> u64 {
    (u32::from(*l.ip()) as u64) << 16 | l.port() as u64
}

impl Publication {
    /// Creates the file at `path` with permission bits `mode`, sized for
    /// `capacity` slots and `feeds`, and fills the header and feed blocks: [`build`](Self::build)
    /// then renamed into place at once. Readers see it once
    /// [`ready`](Self::ready) is called. Takes the path's [`WriterLock`].
    pub fn create(
        path: &Path,
        mode: u32,
        capacity: usize,
        feeds: &[FeedInfo],
        now_ns: u64,
        heartbeat_period_ns: u64,
    ) -> io::Result<Publication> {
        let p = Publication::build(
            WriterLock::acquire(path)?,
            mode,
            capacity,
            feeds,
            now_ns,
            heartbeat_period_ns,
        )?;
        p.rename_into_place()?;
        Ok(p)
    }

    /// Builds the publication for `lock`'s path under a temporary name in
    /// the same directory, its blocks reserved (a full filesystem fails
    /// here, not with a SIGBUS later), nothing at the path touched yet:
    /// [`publish`](Self::publish) makes it visible. Refuses a `mode` that
    /// lets group or others write (readers would refuse the file) and a
    /// file at the path that is not a tickguard publication.
    pub fn build(
        lock: WriterLock,
        mode: u32,
        capacity: usize,
        feeds: &[FeedInfo],
        now_ns: u64,
        heartbeat_period_ns: u64,
    ) -> io::Result<Publication> {
        let shape = Shape::new(feeds.len(), capacity).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "shared memory size overflows")
        })?;
        if mode & 0o022 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("[sidecar] shm_mode {mode:04o} lets group or others write the publication, which readers refuse: use at most 0644"),
            ));
        }
        let path = lock.shm_path().to_path_buf();
        check_replaceable(&path)?;
        let name = path.file_name().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "shared memory path has no file name",
            )
        })?;
        let mut staged = OsString::from(".");
        staged.push(name);
        staged.push(format!(".{}.tmp", std::process::id()));
        let staging = path.with_file_name(staged);
        // A leftover of an earlier writer of this path with the same pid.
        let _ = std::fs::remove_file(&staging);
        let file = crate::sys::file::create_new(&staging, mode)?;
        let (map, dev_ino) = match Publication::reserve_and_map(file, shape, mode) {
            Ok(f) => f,
            Err(e) => {
                let _ = std::fs::remove_file(&staging);
                return Err(e);
            }
        };
        // SAFETY: the mapping is page aligned, `file_len` long, and owned by
        // the returned Publication next to the views.
        let views = unsafe { Views::new(map.as_ptr(), shape) };
        let p = Publication {
            path,
            staging,
            published: AtomicBool::new(false),
            dev_ino,
            views,
            _map: map,
            _lock: lock,
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
        for (block, f) in p.views.feeds().iter().zip(feeds) {
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
            block.protocol.store(f.protocol.code(), Ordering::Relaxed);
            for (w, l) in block.lines.iter().zip(&f.lines) {
                w.store(pack_line(*l), Ordering::Relaxed);
            }
        }
        Ok(p)
    }

    /// Sets the staged file's mode exactly, reserves its blocks and maps it.
    fn reserve_and_map(
        file: File,
        shape: Shape,
        mode: u32,
    ) -> io::Result<(memmap2::MmapMut, (u64, u64))> {
        // The umask may have narrowed the mode: set it exactly.
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        if let Err(e) = crate::sys::file::reserve(&file, shape.file_len as u64) {
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "reserving {:.1} MB for the file: {e}{}",
                    shape.file_len as f64 / 1e6,
                    if e.kind() == io::ErrorKind::StorageFull {
                        " (the filesystem holding it is too small or full; [state] capacity sets the size)"
                    } else {
                        ""
                    }
                ),
            ));
        }
        let meta = file.metadata()?;
        // SAFETY: the file was just created by this process with its blocks
        // reserved; only its owner could truncate it, and this writer never does.
        let map = unsafe { memmap2::MmapMut::map_mut(&file)? };
        Ok((map, (meta.dev(), meta.ino())))
    }

    /// Makes the publication visible: stores the layout version, then
    /// renames the built file over the path (replacing only a tickguard
    /// publication). Idempotent.
    pub fn publish(&self) -> io::Result<()> {
        self.ready();
        self.rename_into_place()
    }

    fn rename_into_place(&self) -> io::Result<()> {
        if self.published.load(Ordering::Relaxed) {
            return Ok(());
        }
        check_replaceable(&self.path)?;
        std::fs::rename(&self.staging, &self.path)?;
        self.published.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Removes the file at the path if it is still this publication (for a
    /// writer that should leave nothing behind, like the demo).
    pub fn remove(&self) -> io::Result<()> {
        let here = std::fs::symlink_metadata(&self.path)?;
        if (here.dev(), here.ino()) == self.dev_ino {
            std::fs::remove_file(&self.path)?;
        }
        Ok(())
    }

    /// Stores the layout version last: readers of the file at the path
    /// accept it from then on (see [`publish`](Self::publish) for a file
    /// built with [`build`](Self::build)).
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

    /// Appends (feed, key, name) → slot to the directory as entry `index`
    /// (a name longer than [`NAME_LEN`] is cut there).
    #[inline]
    fn publish_entry(&self, index: usize, feed: u16, key: u64, name: &[u8], slot: u32) {
        let Some(e) = self.views.directory().get(index) else {
            return;
        };
        let name = name_words(&name[..name.len().min(NAME_LEN)]).unwrap_or_default();
        // Relaxed: published by the Release store of directory_len below.
        e.key.store(key, Ordering::Relaxed);
        e.feed_slot
            .store((feed as u64) << 32 | slot as u64, Ordering::Relaxed);
        for (w, v) in e.name.iter().zip(name) {
            w.store(v, Ordering::Relaxed);
        }
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
        let (lo, hi) = (offset as u64, (offset >> 64) as u64);
        // Relaxed: the writer reads back its own stores.
        if b.offset_lo.load(Ordering::Relaxed) == lo && b.offset_hi.load(Ordering::Relaxed) == hi {
            return;
        }
        b.offset_stamp.write(|| {
            // Relaxed: published by the Release store of the stamp in `SeqLock::write`.
            b.offset_lo.store(lo, Ordering::Relaxed);
            b.offset_hi.store(hi, Ordering::Relaxed);
        });
    }

    /// Publishes `feed`'s status in its feed extension (seqlock; see
    /// [`crate::state::StateTable::set_feed_status`]).
    pub fn set_feed_status(&self, feed: u16, s: &FeedStatus) {
        if let Some(b) = self.views.feeds().get(feed as usize) {
            b.status.write(s);
        }
    }

    /// Runs `store` (which sets counters with [`set_counter`](Self::set_counter))
    /// as one write of every feed's counters: a reader of a feed's
    /// [`read_counters`] copy sees all of a set or none of it.
    pub fn write_counters(&self, store: impl FnOnce()) {
        write_all(self.views.feeds(), store);
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

impl Publication {
    /// The publication a table lives in, if it lives in one
    /// ([`StateTable::shared`]).
    pub fn of(table: &StateTable) -> Option<Arc<Publication>> {
        let owner: Arc<dyn std::any::Any + Send + Sync> = table.owner()?.clone();
        owner.downcast().ok()
    }
}

impl Owner for Publication {
    fn enter(&self, index: usize, feed: u16, key: u64, name: &[u8], slot: SlotId) {
        self.publish_entry(index, feed, key, name, slot);
    }
}

/// A table's memory in the publication: its slots, and the status words of
/// each feed block.
impl From<Arc<Publication>> for Region {
    fn from(p: Arc<Publication>) -> Region {
        let views = &p.views;
        let (slots, feeds) = (views.slots(), views.feeds());
        let status = feeds
            .first()
            .map_or(NonNull::dangling(), |b| NonNull::from(&b.status));
        // SAFETY: the slots and the feed blocks lie in the publication's
        // mapping, which `p` (kept by the region) holds for its whole life
        // and never moves; the status words of feed `f` are a field of block
        // `f`, `size_of::<FeedBlock>()` bytes after those of block `f - 1`,
        // in the one mapping; all of it is atomics, only ever shared.
        unsafe {
            Region::new(
                p.clone(),
                slots,
                status,
                feeds.len(),
                std::mem::size_of::<FeedBlock>(),
            )
        }
    }
}

/// Runs `store` inside the counters seqlock of every block in `blocks`.
fn write_all(blocks: &[FeedBlock], store: impl FnOnce()) {
    match blocks.split_first() {
        None => store(),
        Some((b, rest)) => b.counters_stamp.write(|| write_all(rest, store)),
    }
}

/// Every counter of a feed block (index = counter id), or `None` while a
/// write is in progress.
pub(crate) fn read_counters(b: &FeedBlock) -> Option<[u64; counter::ALL]> {
    let (c, _) = b.counters_stamp.try_read(|| {
        // Relaxed: ordered by the seqlock's stamp and fences.
        std::array::from_fn(|id| b.counter(id).map_or(0, |c| c.load(Ordering::Relaxed)))
    })?;
    Some(c)
}

/// Reads a feed block's clock offset; `None` while a write is in progress.
pub(crate) fn read_offset(b: &FeedBlock) -> Option<i128> {
    let ((lo, hi), _) = b.offset_stamp.try_read(|| {
        // Relaxed: ordered by the seqlock's stamp and fences.
        (
            b.offset_lo.load(Ordering::Relaxed),
            b.offset_hi.load(Ordering::Relaxed),
        )
    })?;
    Some(((hi as i128) << 64) | lo as i128)
}

/// A feed block's name ([`printable`]: a forged file's name must not
/// drive a terminal).
pub(crate) fn feed_name(b: &FeedBlock) -> String {
    let mut bytes = Vec::with_capacity(64);
    for w in &b.name {
        bytes.extend_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
    }
    let end = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
    printable(&bytes[..end])
}

/// Text from bytes read out of the publication, as a session is written
/// ([`write_byte`](crate::protocol::itch50::mold::write_byte)): a control
/// character or escape sequence printed raw would drive the reader's
/// terminal.
pub fn printable(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        let _ = crate::protocol::itch50::mold::write_byte(&mut out, b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn a_session_off_the_network_prints_without_driving_a_terminal() {
        let b = *b"\x1b[2J\x07ok\n  ";
        let lo = u64::from_le_bytes(b[..8].try_into().unwrap());
        let hi = u64::from(u16::from_le_bytes([b[8], b[9]]));
        assert_eq!(counter::session(lo, hi), "\\x1b[2J\\x07ok");
        assert_eq!(
            counter::session(u64::from_le_bytes(*b"20260105"), 0),
            "20260105"
        );
    }

    #[test]
    fn layout_is_pinned() {
        assert_eq!(LAYOUT_VERSION, 2);
        assert_eq!(size_of::<Header>(), 128);
        assert_eq!(offset_of!(Header, version), 8);
        assert_eq!(offset_of!(Header, heartbeat_ns), 40);
        assert_eq!(offset_of!(Header, directory_len), 72);
        assert_eq!(offset_of!(Header, file_len), 104);
        assert_eq!(size_of::<FeedBlock>(), 1024);
        assert_eq!(offset_of!(FeedBlock, kind), 64);
        assert_eq!(offset_of!(FeedBlock, protocol), 72);
        assert_eq!(offset_of!(FeedBlock, lines), 88);
        assert_eq!(offset_of!(FeedBlock, counters_stamp), 104);
        assert_eq!(offset_of!(FeedBlock, offset_stamp), 128);
        assert_eq!(offset_of!(FeedBlock, more_counters), 152);
        assert_eq!(offset_of!(FeedBlock, counters), 256);
        assert_eq!(offset_of!(FeedBlock, status), 512);
        let status = 512;
        assert_eq!(status + offset_of!(FeedStatusWords, stamp), 512);
        assert_eq!(status + offset_of!(FeedStatusWords, flags), 520);
        assert_eq!(status + offset_of!(FeedStatusWords, last_alive), 528);
        assert_eq!(status + offset_of!(FeedStatusWords, source_watermark), 536);
        assert_eq!(offset_of!(FeedBlock, ext_counters), 544);
        use crate::state::feed_flag;
        assert_eq!(
            (feed_flag::SUSPECT, feed_flag::CLOSED, feed_flag::JOINED),
            (1, 2, 4)
        );
        assert_eq!(size_of::<DirEntry>(), 48);
        assert_eq!(offset_of!(DirEntry, key), 0);
        assert_eq!(offset_of!(DirEntry, feed_slot), 8);
        assert_eq!(offset_of!(DirEntry, name), 16);
        assert_eq!(align_of::<Slot>(), 128);
        let s = Shape::new(2, 100).unwrap();
        assert_eq!(s.feeds_offset, 128);
        assert_eq!(s.directory_offset, 128 + 2048);
        assert_eq!(s.slots_offset % PAGE, 0);
        assert!(s.slots_offset >= s.directory_offset + 4800);
        assert_eq!(s.file_len, s.slots_offset + align(100 * 128, PAGE));
    }

    /// Every counter id, and where each lives in the block.
    #[test]
    fn counter_ids_are_pinned() {
        use counter::*;
        let ids = [
            PACKETS,
            REJECTED,
            MESSAGES,
            QUOTES,
            SNAPSHOTS,
            HEARTBEATS,
            UNKNOWN,
            DUPLICATES,
            TICKS_LOST,
            TABLE_FULL,
            KERNEL_DROPS,
            RESETS,
            LINE_MESSAGES,
            LINE_REJECTED,
            REJECTED_BY_REASON,
            LINE_PACKETS,
            LINE_KERNEL_DROPS,
            LINE_RCVBUF,
            LINE_COPIES,
            ALL_REJECTED_SINCE,
            ALL_REJECTED_PACKETS,
            ALL_REJECTED_REASON,
        ];
        assert_eq!(
            ids,
            [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, 26, 28, 30, 32, 33, 34, 35]
        );
        let ext = [
            NEXT,
            HIGH,
            HELD,
            GAPS_OPEN,
            RECOVERED,
            SESSION_CHANGES,
            STALE_SESSION,
            UNKNOWN_ORDERS,
            ANOMALIES,
            REQUESTS_SENT,
            GAPS_EXPIRED,
            LINE_MISMATCHES,
            SESSION_LO,
            SESSION_HI,
            INVALID_RECORDS,
            ORDERS_REFUSED,
        ];
        assert_eq!(ext, std::array::from_fn(|i| 64 + i));
        assert_eq!((EXT, EXT_COUNT, ALL), (64, 60, 124));
        let block: FeedBlock = unsafe_zeroed_block();
        let base = &block as *const FeedBlock as usize;
        let at = |id: usize| {
            block
                .counter(id)
                .map(|c| c as *const AtomicU64 as usize - base)
        };
        assert_eq!(at(PACKETS), Some(256));
        assert_eq!(at(LINE_RCVBUF + 1), Some(256 + 8 * 31));
        assert_eq!(at(LINE_COPIES), Some(152));
        assert_eq!(at(COUNT + MORE - 1), Some(248));
        assert_eq!(at(COUNT + MORE), None);
        assert_eq!(at(NEXT), Some(544));
        assert_eq!(at(INVALID_RECORDS), Some(544 + 8 * 14));
        assert_eq!(at(ALL - 1), Some(1016));
        assert_eq!(at(ALL), None);
        assert_eq!(
            session(u64::from_le_bytes(*b"000000AB"), 0x4443),
            "000000ABCD"
        );
        assert_eq!(session(u64::from_le_bytes(*b"S1\0\0\0\0\0\0"), 0), "S1");
        assert_eq!(session(0, 0), "");
    }

    /// A block of zero words (every field is an atomic or a seqlock stamp).
    fn unsafe_zeroed_block() -> FeedBlock {
        // SAFETY: FeedBlock is repr(C) of AtomicU64s (SeqLock is a
        // transparent AtomicU64), for which all-zero bytes are valid.
        unsafe { std::mem::zeroed() }
    }

    /// Names become NUL-padded words; too long or holding a NUL, none.
    #[test]
    fn directory_names() {
        let w = name_words(b"EURUSD").unwrap();
        assert_eq!(w, [u64::from_le_bytes(*b"EURUSD\0\0"), 0, 0, 0]);
        let long = [b'x'; 32];
        assert_eq!(name_words(&long).unwrap()[3], u64::from_le_bytes([b'x'; 8]));
        assert_eq!(name_words(&[b'x'; 33]), None);
        assert_eq!(name_words(b"A\0"), None);
    }

    /// The feed block holds name, kind, protocol and lines; word 80 and
    /// 112..128 stay zero; 104 is the counters stamp, even at rest; the feed
    /// extension is zero until a status or an extension counter is written.
    #[test]
    fn feed_block_reserved_words_are_zero() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tickguard");
        let line: std::net::SocketAddrV4 = "239.1.1.1:30001".parse().unwrap();
        let feeds = [FeedInfo {
            name: "lp1".into(),
            kind: FeedKind::Delta,
            lines: vec![line],
            protocol: Protocol::Itch50,
        }];
        let p = Publication::create(&path, 0o600, 16, &feeds, 1, 1_000_000).unwrap();
        p.ready();
        let bytes = std::fs::read(&path).unwrap();
        let word = |at: usize| {
            let at = 128 + at;
            u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
        };
        assert_eq!(word(0), u64::from_le_bytes(*b"lp1\0\0\0\0\0"));
        assert_eq!(word(64), 1);
        assert_eq!(word(72), 1);
        assert_eq!(word(80), 0);
        for at in (512..1024).step_by(8) {
            assert_eq!(word(at), 0, "word {at}");
        }
        assert_eq!(word(88), pack_line(line));
        assert_eq!(word(96), 0);
        assert_eq!(word(104), 0);
        p.write_counters(|| p.set_counter(0, counter::PACKETS, 5));
        let bytes = std::fs::read(&path).unwrap();
        let word = |at: usize| {
            let at = 128 + at;
            u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
        };
        assert_eq!(word(104), 2);
        assert_eq!(word(256 + 8 * counter::PACKETS), 5);
        for at in [112, 120] {
            assert_eq!(word(at), 0, "word {at}");
        }
        p.write_counters(|| {
            p.set_counter(0, counter::GAPS_OPEN, 3);
            p.set_counter(0, counter::INVALID_RECORDS, 9);
        });
        let s = FeedStatus {
            suspect: true,
            closed: false,
            joined: true,
            orders_refused: true,
            last_alive: 11,
            source_watermark: 12,
        };
        p.set_feed_status(0, &s);
        p.set_feed_status(0, &s);
        let bytes = std::fs::read(&path).unwrap();
        let word = |at: usize| {
            let at = 128 + at;
            u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
        };
        assert_eq!(word(104), 4);
        assert_eq!(word(544 + 8 * 3), 3);
        assert_eq!(word(544 + 8 * 14), 9);
        assert_eq!(
            [word(512), word(520), word(528), word(536)],
            [2, 0b1101, 11, 12],
            "one write: an unchanged status is not written again"
        );
        assert_eq!(p.views.feeds()[0].status.try_read(), Some(s));
    }

    /// A table on the publication's region writes its slots, each feed's
    /// status and the directory in the file; the publication is found from
    /// the table, and from no heap table.
    #[test]
    fn a_shared_table_lives_in_the_publication() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tickguard");
        let feed = |name: &str| FeedInfo {
            name: name.into(),
            kind: FeedKind::Full,
            lines: vec!["239.1.1.1:30001".parse().unwrap()],
            protocol: Protocol::Sqf,
        };
        let p = Arc::new(
            Publication::create(&path, 0o600, 4, &[feed("a"), feed("b")], 1, 1_000_000).unwrap(),
        );
        let mut table = StateTable::shared(p.clone());
        assert!(Publication::of(&table).is_some_and(|q| Arc::ptr_eq(&q, &p)));
        assert!(Publication::of(&StateTable::new(4)).is_none());
        assert_eq!(table.capacity(), 4);
        assert!(std::ptr::eq(table.slots(), p.views.slots()));
        let symbol = crate::symbol::Symbol::parse("EURUSD").unwrap();
        let id = table
            .insert(
                1,
                symbol,
                crate::verdict::Thresholds {
                    stale_ns: 1,
                    source_ns: 1,
                },
            )
            .unwrap();
        let e = &p.views.directory()[0];
        assert_eq!(e.feed_slot.load(Ordering::Relaxed), 1 << 32 | id as u64);
        assert_eq!(e.key.load(Ordering::Relaxed), symbol.key());
        assert_eq!(p.views.header().directory_len.load(Ordering::Relaxed), 1);
        let s = FeedStatus {
            suspect: true,
            last_alive: 7,
            ..FeedStatus::default()
        };
        table.set_feed_status(1, &s);
        table.set_feed_status(2, &s);
        assert_eq!(p.views.feeds()[1].status.try_read(), Some(s));
        assert_eq!(
            p.views.feeds()[0].status.try_read(),
            Some(FeedStatus::default())
        );
        assert_eq!(table.feed_status(1), s);
        assert_eq!(table.feed_status(2), FeedStatus::default());
    }

    /// A heartbeat's counters are one set: a copy never holds a line's
    /// packets ahead of its feed's, whatever order the writer stores them in
    /// (here the line first, the order that would show the feed behind).
    #[test]
    fn counters_are_read_as_one_set() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tickguard");
        let feeds = [FeedInfo {
            name: "lp1".into(),
            kind: FeedKind::Full,
            lines: vec!["127.0.0.1:30001".parse().unwrap()],
            protocol: Protocol::Sqf,
        }];
        let p = Publication::create(&path, 0o600, 16, &feeds, 1, 1_000_000).unwrap();
        const SETS: u64 = 200_000;
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                for n in 1..=SETS {
                    p.write_counters(|| {
                        p.set_counter(0, counter::LINE_PACKETS, n);
                        p.set_counter(0, counter::PACKETS, n);
                    });
                }
                done.store(true, Ordering::Relaxed);
            });
            let block = &p.views.feeds()[0];
            let (mut copies, mut last) = (0u64, 0);
            while !done.load(Ordering::Relaxed) || copies == 0 {
                if let Some(c) = read_counters(block) {
                    assert_eq!(
                        c[counter::PACKETS],
                        c[counter::LINE_PACKETS],
                        "{copies} copies"
                    );
                    assert!(c[counter::PACKETS] >= last);
                    last = c[counter::PACKETS];
                    copies += 1;
                }
            }
        });
        assert_eq!(
            read_counters(&p.views.feeds()[0]).unwrap()[counter::PACKETS],
            SETS
        );
    }
}
