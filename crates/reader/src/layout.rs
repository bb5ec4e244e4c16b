//! The layout of a publication, which the writer and every reader share.
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
//! 1 delta), 72 protocol (its name, ASCII, NUL padded), 80 reserved (zero), 88 line A, 96 line B
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

use crate::seqlock::SeqLock;
use crate::slot::Slot;
use crate::status::FeedStatusWords;
use std::sync::atomic::{AtomicU64, Ordering};

/// "TKGUARD1", little-endian.
pub const MAGIC: u64 = u64::from_le_bytes(*b"TKGUARD1");
/// Layout version of this file format.
pub const LAYOUT_VERSION: u64 = 3;
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
    /// Word 72: the name of the feed's protocol (`sqf`, `itch50`, ...):
    /// up to 8 bytes of ASCII, NUL padded, as a little-endian word.
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
    /// Bytes 512..544: the feed's status (see [`crate::status::FeedStatus`]).
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
pub struct Views {
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
    pub unsafe fn new(base: *const u8, shape: Shape) -> Views {
        Views { base, shape }
    }

    pub fn header(&self) -> &Header {
        // SAFETY: offset 0, 128 bytes, within the mapping (file_len >= PAGE);
        // page alignment satisfies Header's 128-byte alignment.
        unsafe { &*(self.base as *const Header) }
    }

    pub fn feeds(&self) -> &[FeedBlock] {
        // SAFETY: `feeds` blocks of FEED_LEN from feeds_offset (a multiple of
        // 128) lie within file_len by construction of `Shape`.
        unsafe {
            std::slice::from_raw_parts(
                self.base.add(self.shape.feeds_offset) as *const FeedBlock,
                self.shape.feeds,
            )
        }
    }

    pub fn directory(&self) -> &[DirEntry] {
        // SAFETY: as for `feeds`; DirEntry needs 8-byte alignment, and
        // directory_offset is a multiple of 128.
        unsafe {
            std::slice::from_raw_parts(
                self.base.add(self.shape.directory_offset) as *const DirEntry,
                self.shape.capacity,
            )
        }
    }

    pub fn slots(&self) -> &[Slot] {
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

/// Every counter of a feed block (index = counter id), or `None` while a
/// write is in progress.
pub fn read_counters(b: &FeedBlock) -> Option<[u64; counter::ALL]> {
    let (c, _) = b.counters_stamp.try_read(|| {
        // Relaxed: ordered by the seqlock's stamp and fences.
        std::array::from_fn(|id| b.counter(id).map_or(0, |c| c.load(Ordering::Relaxed)))
    })?;
    Some(c)
}

/// Reads a feed block's clock offset; `None` while a write is in progress.
pub fn read_offset(b: &FeedBlock) -> Option<i128> {
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
pub fn feed_name(b: &FeedBlock) -> String {
    let mut bytes = Vec::with_capacity(64);
    for w in &b.name {
        bytes.extend_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
    }
    let end = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
    printable(&bytes[..end])
}

/// The word that holds a protocol's name in a feed block (the first 8
/// bytes of `name`, NUL padded).
pub fn protocol_word(name: &str) -> u64 {
    let mut b = [0u8; 8];
    let n = name.len().min(8);
    b[..n].copy_from_slice(&name.as_bytes()[..n]);
    u64::from_le_bytes(b)
}

/// The name of a feed block's protocol ([`printable`]; empty if unset).
pub fn protocol_name(b: &FeedBlock) -> String {
    let bytes = b.protocol.load(Ordering::Relaxed).to_le_bytes();
    let end = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
    printable(&bytes[..end])
}

/// Text from bytes read out of the publication or off the network: a
/// control character or escape sequence printed raw would drive the
/// reader's terminal, so each byte goes through [`write_byte`].
pub fn printable(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        let _ = write_byte(&mut out, b);
    }
    out
}

/// Byte `b` as text: printable ASCII (space to `~`) as is, any other
/// byte as `\xNN` (lower-case hex).
pub fn write_byte(f: &mut impl std::fmt::Write, b: u8) -> std::fmt::Result {
    if b == b' ' || b.is_ascii_graphic() {
        f.write_char(char::from(b))
    } else {
        write!(f, "\\x{b:02x}")
    }
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
        assert_eq!(LAYOUT_VERSION, 3);
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
        use crate::status::feed_flag;
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
}
