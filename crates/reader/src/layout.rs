//! The layout of a publication, which the writer and every reader share.
//!
//! ```text
//! offset            size               section
//! 0                 128                Header
//! FEEDS (=128)      1024 × feeds       FeedBlock per feed, in configuration order
//! DESCRIPTORS       32768 × feeds      per feed, 128 counter Descriptors of 256 bytes
//!                   (= FEEDS + 1024 × feeds)
//! DIRECTORY         96 × capacity      DirEntry per name, in insertion order (2 × capacity)
//!                   (= align(DESCRIPTORS + 32768 × feeds, 128))
//! SLOTS (4096-al.)  128 × capacity     Slot (see `slot`), one per (feed, symbol)
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
//! 1 delta), 72 protocol (its name, ASCII, NUL padded), 80 [`traits`] bits
//! (bits 8..16: the prices' decimals + 1), 88 line A, 96 line B
//! (`ipv4 << 16 | port`, 0 = none), 104 counters stamp (seqlock over every
//! counter of the block: odd while the writer stores a heartbeat's set, +2
//! per set), 112 descriptors offset (bytes from the start of the file: the
//! feed's table in DESCRIPTORS), 120 descriptor count (≤ 128), 128 offset stamp (seqlock), 136 offset
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
//! Counter descriptors (as Aeron's counter metadata: what a counter is,
//! apart from its value). The writer stores each feed's once, before the
//! file is ready, from the list its protocol's engine declares (the
//! counters every feed has, then the protocol's own); readers print and
//! export every counter from them, knowing no protocol. Values stay in the
//! feed block, under its counters stamp. [`Descriptor`] (256 bytes):
//!
//! | offset | field | notes |
//! |---|---|---|
//! | 0 | id | u16: the counter holding the value ([`FeedBlock::counter`]) |
//! | 2 | kind | u8, [`CounterKind`]: 1 counter, 2 gauge, 3 timestamp_ns, 4 text, 5 bucket, 6 reason, 7 flag |
//! | 3 | width | u8: counters the value spans (text), else 1 |
//! | 4..8 | reserved | zero |
//! | 8 | param | u64: a bucket's bound (ns, `u64::MAX` open), a flag's bit, a reason's index |
//! | 16..48 | name | ASCII, NUL padded: `packets`, `gaps_open`, `session` |
//! | 48..112 | metric | Prometheus name less `tickguard_` (`packets_total`); empty: not exported |
//! | 112..128 | key | attribute name (`line`, `reason`); empty: none |
//! | 128..192 | value | attribute value (`A`, `bad_magic`) |
//! | 192..256 | note | printed after the value (a reason's hint: ` (not SQF?)`) |
//!
//! Descriptors of one name form a family (`rejected`, `rejected{line=A}`,
//! `rejected{reason=short}`); a histogram is a run of buckets of one name.
//! A reader skips a descriptor of a kind it does not know.
//!
//! DirEntry (48 bytes): 0 key (the slot's key word: SQF and ITCH the 8
//! symbol bytes as a little-endian u64), 8 `feed << 32 | slot`, bit 63 of
//! it [`DIR_MOVABLE`], 16..48 name (UTF-8, NUL padded; SQF and ITCH: the
//! symbol without its trailing spaces). Readers look an instrument up by
//! its name. A slot has one entry per name it is published under, at most
//! [`NAMES_PER_SLOT`] on average (MDP3: `#SecurityID` when the slot is
//! made, its Symbol when a definition gives one); a name entered again
//! later (a Symbol given to another instrument) means the later entry:
//! readers take the last entry of a name. The slot the name found until
//! then counts it in its `names_left` word after the new entry is
//! published, so a handle found by a movable name (one that kept the
//! count it saw) learns that the name left.
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
pub const LAYOUT_VERSION: u64 = 4;
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
    /// SO_RCVBUF in effect, bytes, per line: as the kernel holds it
    /// (Linux doubles what it accepts, for its own bookkeeping).
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
    /// Of `DUPLICATES`, those that came twice on the same line
    /// (`DUPLICATES - LINE_COPIES`).
    pub const SAME_LINE_DUPLICATES: usize = 36;
    /// 1 while every packet of the feed is rejected (`ALL_REJECTED_SINCE`
    /// set), 0 otherwise.
    pub const ALL_REJECTED: usize = 37;
    /// 1 while the kernel holds less receive buffer than `rcvbuf_bytes`
    /// asked (refused, or capped by `net.core.rmem_max`), per line:
    /// `LINE_RCVBUF_CAPPED + line`; 0 otherwise.
    pub const LINE_RCVBUF_CAPPED: usize = 38;
    /// Datagrams dropped unapplied because their feed did not want their
    /// line then (a line it had left), every line (written by the
    /// receiver).
    pub const UNWANTED: usize = 40;
    /// Clock-offset samples the live estimator merged because its queue
    /// (`[sidecar] offset_queue`) was full: its offset may read quotes
    /// older than a replay of the same datagrams does.
    pub const OFFSET_MERGES: usize = 41;
    /// Counter slots at 152..256 of a block (ids `COUNT..COUNT + MORE`).
    pub const MORE: usize = 13;
    /// First id of the feed extension's counters (bytes 544..1024), where
    /// each protocol writes its own.
    ///
    /// The named ids from here on are an ITCH feed's: each protocol lays
    /// out this range for itself (an MDP3 channel's `EXT + 10` is
    /// `stale_sequence`, not [`GAPS_EXPIRED`]), and its descriptors
    /// (`Reader::readings`, `FeedInfo::counters`) say which id is which.
    /// Read another protocol's counters by descriptor name, never by
    /// these constants. [`CHANNEL_WRONG_SOURCE`] alone is written by the
    /// receiver itself, for any feed with a channel.
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
    /// Times the feed's `request_rate`, or its full table of recent
    /// requests, held re-requests back for a later cycle.
    pub const REQUESTS_DEFERRED: usize = EXT + 33;
    /// Answers on the recovery channel of another session than the
    /// current one, ignored.
    pub const RECOVERY_WRONG_SESSION: usize = EXT + 34;
    /// Datagrams on a feed's channel from another address than its
    /// server's, dropped unread (written by the receiver).
    pub const CHANNEL_WRONG_SOURCE: usize = EXT + 35;
    /// Messages refused a new symbol because the session held
    /// `max_symbols` symbols.
    pub const SYMBOLS_REFUSED: usize = EXT + 36;
    /// A feed's snapshot state as text: `idle` or `awaiting`; empty for
    /// a feed without snapshots.
    pub const SNAPSHOT_STATE: usize = EXT + 37;
    /// 1 while the feed awaits a snapshot, else 0.
    pub const SNAPSHOT_AWAITING: usize = EXT + 38;
    // `EXT + 39` is free: snapshots merged count in `SNAPSHOTS`.
    /// Snapshot connections started.
    pub const SNAPSHOT_ATTEMPTS: usize = EXT + 40;
    /// Snapshot failures by class: `SNAPSHOT_FAILURES + i` for the
    /// protocol's class `i` (its descriptors name them).
    pub const SNAPSHOT_FAILURES: usize = EXT + 41;
    /// Classes of `SNAPSHOT_FAILURES`.
    pub const SNAPSHOT_FAILURE_CLASSES: usize = 7;
    /// Waits for a snapshot given up.
    pub const SNAPSHOT_GAVE_UP: usize = EXT + 48;
    /// Held messages below a merged snapshot's next sequence, discarded.
    pub const SNAPSHOT_DISCARDED: usize = EXT + 49;
    /// Held messages discarded for room while awaiting a snapshot.
    pub const SNAPSHOT_OVERFLOW: usize = EXT + 50;
    /// The last merged snapshot's next sequence; 0 none.
    pub const SNAPSHOT_NEXT: usize = EXT + 51;
    /// The last merged snapshot's session (10 bytes, NUL padded, over
    /// two counters as `SESSION_LO`/`SESSION_HI`).
    pub const SNAPSHOT_SESSION: usize = EXT + 52;
    /// Messages of the last merged snapshot.
    pub const SNAPSHOT_MESSAGES: usize = EXT + 54;
    /// Snapshots merged, by the time from the trigger to the merge:
    /// `SNAPSHOT_LATENCY + i` counts those up to
    /// [`snapshot_bucket_bound_ns`]`(i)` (the last bucket, those above).
    pub const SNAPSHOT_LATENCY: usize = EXT + 55;
    /// Buckets of `SNAPSHOT_LATENCY`.
    pub const SNAPSHOT_BUCKETS: usize = 5;

    /// Upper bound of `SNAPSHOT_LATENCY` bucket `i`, ns: 0.5 s, 2 s, 10 s,
    /// 60 s, then open.
    pub const fn snapshot_bucket_bound_ns(i: usize) -> u64 {
        match i {
            0 => 500_000_000,
            1 => 2_000_000_000,
            2 => 10_000_000_000,
            3 => 60_000_000_000,
            _ => u64::MAX,
        }
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

/// Bits of a feed block's `traits` word (word 80): what readers need to
/// know of a feed's protocol without knowing the protocol.
pub mod traits {
    /// Each slot counts its symbol's own lost ticks and duplicates (SQF);
    /// without it the feed counts them for its whole stream only.
    pub const SYMBOL_COUNTS: u64 = 1 << 0;
    /// Bits 8..16: the least decimals the feed's prices print with, plus 1
    /// (0: not said; print them as they are).
    pub const PRICE_DECIMALS_SHIFT: u32 = 8;

    /// The bits saying a feed's prices print with `decimals` (0 to 254).
    pub const fn price_decimals(decimals: u8) -> u64 {
        ((decimals as u64 + 1) & 0xff) << PRICE_DECIMALS_SHIFT
    }
}

/// Bytes of a counter descriptor.
pub const DESCRIPTOR_LEN: usize = 256;
/// Descriptors per feed (the table of each feed has room for this many).
pub const MAX_DESCRIPTORS: usize = 128;
/// Bytes of one feed's descriptor table.
pub const DESCRIPTOR_TABLE_LEN: usize = DESCRIPTOR_LEN * MAX_DESCRIPTORS;

/// A gauge's `param`: its 0 means none ([`CounterKind::Gauge`]).
pub const ZERO_IS_NONE: u64 = 1;

/// What a counter's value means (descriptor word 0, bits 16..24).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CounterKind {
    /// 1: a total that only grows (Prometheus counter).
    Counter,
    /// 2: a level that goes up and down (Prometheus gauge); with `param`
    /// [`ZERO_IS_NONE`], 0 means none (a sequence not known yet).
    Gauge,
    /// 3: ns since the Unix epoch; 0 none.
    TimestampNs,
    /// 4: ASCII text over `width` consecutive counters (little-endian
    /// bytes, NUL padded; bytes off the network: print with [`printable`]).
    Text,
    /// 5: one bucket of a histogram: the events up to `param` ns
    /// (`u64::MAX`: those above the previous bucket). A histogram's buckets
    /// are consecutive descriptors of one name, bounds ascending; each
    /// counts its own events (not cumulative).
    Bucket,
    /// 6: a reject reason: 0 none, else 1 + the `param` of the feed's
    /// descriptor whose key is `reason`.
    Reason,
    /// 7: a feed status flag, read from the status words (bytes 512..544),
    /// not from a counter: bit `param` of `flags`.
    Flag,
}

impl CounterKind {
    /// Every kind, by code − 1.
    pub const ALL: [CounterKind; 7] = [
        CounterKind::Counter,
        CounterKind::Gauge,
        CounterKind::TimestampNs,
        CounterKind::Text,
        CounterKind::Bucket,
        CounterKind::Reason,
        CounterKind::Flag,
    ];

    /// Its code in a descriptor.
    pub fn code(self) -> u8 {
        match self {
            CounterKind::Counter => 1,
            CounterKind::Gauge => 2,
            CounterKind::TimestampNs => 3,
            CounterKind::Text => 4,
            CounterKind::Bucket => 5,
            CounterKind::Reason => 6,
            CounterKind::Flag => 7,
        }
    }

    /// The kind of a code; `None` for a code this reader does not know.
    pub fn from_code(code: u8) -> Option<CounterKind> {
        CounterKind::ALL
            .get(usize::from(code).checked_sub(1)?)
            .copied()
    }

    /// Its name: `counter`, `gauge`, `timestamp_ns`, `text`, `bucket`,
    /// `reason`, `flag`.
    pub fn as_str(self) -> &'static str {
        match self {
            CounterKind::Counter => "counter",
            CounterKind::Gauge => "gauge",
            CounterKind::TimestampNs => "timestamp_ns",
            CounterKind::Text => "text",
            CounterKind::Bucket => "bucket",
            CounterKind::Reason => "reason",
            CounterKind::Flag => "flag",
        }
    }
}

/// Byte ranges of a descriptor's text fields (ASCII, NUL padded).
mod field {
    pub const NAME: std::ops::Range<usize> = 16..48;
    pub const METRIC: std::ops::Range<usize> = 48..112;
    pub const KEY: std::ops::Range<usize> = 112..128;
    pub const VALUE: std::ops::Range<usize> = 128..192;
    pub const NOTE: std::ops::Range<usize> = 192..256;
}

/// One counter as the publication describes it (see the module docs for
/// its 256 bytes): which counter holds its value, what the value means,
/// its name and an optional attribute (`line=A`, `reason=bad_magic`).
/// The writer stores each feed's descriptors once, before the file is
/// ready; tools print and export counters from them alone.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Descriptor {
    /// The counter id holding the value (the first of `width` for text;
    /// 0 and unused for a flag).
    pub id: usize,
    /// What the value means.
    pub kind: CounterKind,
    /// Counters the value spans (text); 1 otherwise.
    pub width: usize,
    /// A bucket's upper bound (ns, `u64::MAX` open), a flag's bit, a
    /// reason's index; 0 otherwise.
    pub param: u64,
    /// snake_case, up to 32 bytes: what tools print (`packets`, `gaps_open`).
    /// Descriptors of one name with different attributes are one family.
    pub name: String,
    /// The Prometheus metric name without the `tickguard_` prefix, up to
    /// 64 bytes (`packets_total`; a histogram's without `_bucket`); empty:
    /// not exported.
    pub metric: String,
    /// The attribute's name (`line`, `reason`), up to 16 bytes; empty: none.
    pub key: String,
    /// The attribute's value (`A`, `bad_magic`), up to 64 bytes.
    pub value: String,
    /// Shown after the value (a reason's hint: ` (not SQF?)`), up to 64 bytes.
    pub note: String,
}

impl Descriptor {
    /// A descriptor of counter `id` of `kind` named `name`, exported by
    /// default as `feed_<name>_total` (counter), `feed_<name>` (gauge,
    /// bucket, flag) and not at all (timestamp, text, reason).
    pub fn new(id: usize, kind: CounterKind, name: &str) -> Descriptor {
        let metric = match kind {
            CounterKind::Counter => format!("feed_{name}_total"),
            CounterKind::Gauge | CounterKind::Bucket | CounterKind::Flag => format!("feed_{name}"),
            CounterKind::TimestampNs | CounterKind::Text | CounterKind::Reason => String::new(),
        };
        Descriptor {
            id,
            kind,
            width: 1,
            param: 0,
            name: name.into(),
            metric,
            key: String::new(),
            value: String::new(),
            note: String::new(),
        }
    }

    /// A total that only grows.
    pub fn counter(id: usize, name: &str) -> Descriptor {
        Descriptor::new(id, CounterKind::Counter, name)
    }

    /// A level.
    pub fn gauge(id: usize, name: &str) -> Descriptor {
        Descriptor::new(id, CounterKind::Gauge, name)
    }

    /// Exported as `tickguard_<metric>`; empty: not exported.
    pub fn metric(mut self, metric: &str) -> Descriptor {
        self.metric = metric.into();
        self
    }

    /// With attribute `key=value`.
    pub fn attr(mut self, key: &str, value: &str) -> Descriptor {
        self.key = key.into();
        self.value = value.into();
        self
    }

    /// With `param`.
    pub fn param(mut self, param: u64) -> Descriptor {
        self.param = param;
        self
    }

    /// Spanning `width` counters.
    pub fn width(mut self, width: usize) -> Descriptor {
        self.width = width;
        self
    }

    /// With a note.
    pub fn note(mut self, note: &str) -> Descriptor {
        self.note = note.into();
        self
    }

    /// `name`, or `name{key=value}`.
    pub fn label(&self) -> String {
        if self.key.is_empty() {
            self.name.clone()
        } else {
            format!("{}{{{}={}}}", self.name, self.key, self.value)
        }
    }

    /// The descriptor as its 16 words; `None` when a field does not fit
    /// (a text too long or not ASCII, an id or width out of range).
    pub fn encode(&self) -> Option<[u64; DESCRIPTOR_LEN / 8]> {
        let mut b = [0u8; DESCRIPTOR_LEN];
        if self.id.checked_add(self.width)? > counter::ALL || self.width == 0 || self.width > 255 {
            return None;
        }
        b[..2].copy_from_slice(&(self.id as u16).to_le_bytes());
        b[2] = self.kind.code();
        b[3] = self.width as u8;
        b[8..16].copy_from_slice(&self.param.to_le_bytes());
        for (range, text) in [
            (field::NAME, &self.name),
            (field::METRIC, &self.metric),
            (field::KEY, &self.key),
            (field::VALUE, &self.value),
            (field::NOTE, &self.note),
        ] {
            if text.len() > range.len() || !text.is_ascii() || text.contains('\0') {
                return None;
            }
            b[range.start..range.start + text.len()].copy_from_slice(text.as_bytes());
        }
        Some(std::array::from_fn(|i| {
            u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().unwrap_or_default())
        }))
    }

    /// A descriptor from its 16 words ([`printable`] text); `None` for a
    /// kind this reader does not know or a counter outside the block.
    pub fn decode(words: &[u64; DESCRIPTOR_LEN / 8]) -> Option<Descriptor> {
        let mut b = [0u8; DESCRIPTOR_LEN];
        for (chunk, w) in b.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        let id = usize::from(u16::from_le_bytes([b[0], b[1]]));
        let kind = CounterKind::from_code(b[2])?;
        let width = usize::from(b[3]);
        if width == 0 || id + width > counter::ALL {
            return None;
        }
        let text = |r: std::ops::Range<usize>| {
            let f = &b[r];
            let end = f.iter().position(|&c| c == 0).unwrap_or(f.len());
            printable(&f[..end])
        };
        Some(Descriptor {
            id,
            kind,
            width,
            param: u64::from_le_bytes(b[8..16].try_into().ok()?),
            name: text(field::NAME),
            metric: text(field::METRIC),
            key: text(field::KEY),
            value: text(field::VALUE),
            note: text(field::NOTE),
        })
    }

    /// The value in `counters` (a feed's copy, index = id) and the feed's
    /// status `flags`: the counter, or the flag's bit (0 or 1); 0 for text.
    pub fn value(&self, counters: &[u64; counter::ALL], flags: u64) -> u64 {
        match self.kind {
            CounterKind::Flag => (flags >> self.param.min(63)) & 1,
            CounterKind::Text => 0,
            _ => counters.get(self.id).copied().unwrap_or(0),
        }
    }

    /// A text counter's text ([`printable`], trailing ASCII whitespace
    /// dropped, up to the first NUL); empty for other kinds.
    pub fn text(&self, counters: &[u64; counter::ALL]) -> String {
        if self.kind != CounterKind::Text {
            return String::new();
        }
        let words = counters.get(self.id..self.id + self.width).unwrap_or(&[]);
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let end = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
        printable(bytes[..end].trim_ascii_end())
    }
}

/// One descriptor in the mapping (`DESCRIPTOR_LEN` bytes).
#[repr(C)]
pub struct DescriptorWords(pub [AtomicU64; DESCRIPTOR_LEN / 8]);

impl DescriptorWords {
    /// Stores `words` (relaxed: before the file is ready).
    pub fn store(&self, words: &[u64; DESCRIPTOR_LEN / 8]) {
        for (w, v) in self.0.iter().zip(words) {
            w.store(*v, Ordering::Relaxed);
        }
    }

    /// The words (relaxed: written before the version's Release store).
    pub fn load(&self) -> [u64; DESCRIPTOR_LEN / 8] {
        std::array::from_fn(|i| self.0[i].load(Ordering::Relaxed))
    }
}

/// One feed's block.
#[repr(C, align(128))]
pub struct FeedBlock {
    pub name: [AtomicU64; 8],
    pub kind: AtomicU64,
    /// Word 72: the name of the feed's protocol (`sqf`, `itch50`, ...):
    /// up to 8 bytes of ASCII, NUL padded, as a little-endian word.
    pub protocol: AtomicU64,
    /// Word 80: [`traits`] bits.
    pub traits: AtomicU64,
    pub lines: [AtomicU64; 2],
    /// Word 104: seqlock stamp of the counters, +2 per heartbeat's set
    /// (see [`Publication::write_counters`]).
    pub counters_stamp: SeqLock,
    /// Word 112: where the feed's counter descriptors start, bytes from the
    /// start of the file.
    pub descriptors_offset: AtomicU64,
    /// Word 120: how many descriptors the feed has (at most
    /// [`MAX_DESCRIPTORS`]).
    pub descriptor_count: AtomicU64,
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

/// Directory entries per slot: an instrument may be published under two
/// names (an exchange's id and its symbol), so the directory holds up to
/// `NAMES_PER_SLOT × capacity` entries.
pub const NAMES_PER_SLOT: usize = 2;

/// Bit 63 of a directory entry's `feed_slot`: the name may be entered
/// later for another slot, or withdrawn (an MDP3 Symbol, not its
/// `#SecurityID`). A handle found by such an entry keeps the slot's
/// `names_left` count it saw, and answers for the name only while the
/// slot's count is still that one.
pub const DIR_MOVABLE: u64 = 1 << 63;

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

/// `n` rounded up to a multiple of `to`; `None` past `usize::MAX` (a
/// forged header's shape).
fn align(n: usize, to: usize) -> Option<usize> {
    n.checked_next_multiple_of(to)
}

/// Section offsets and the file length for a shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub feeds: usize,
    pub capacity: usize,
    pub feeds_offset: usize,
    /// Feed `f`'s descriptor table is at `descriptors_offset + f × DESCRIPTOR_TABLE_LEN`.
    pub descriptors_offset: usize,
    pub directory_offset: usize,
    pub slots_offset: usize,
    pub file_len: usize,
}

/// Most feeds a file holds: feed ids are 16 bits (a header naming more is
/// forged, however long the file).
pub const MAX_FEEDS: usize = u16::MAX as usize;
/// Most slots a file holds (`[state] capacity`'s top: a header naming
/// more is forged, however long a sparse file makes it look).
pub const MAX_CAPACITY: usize = 1 << 24;

impl Shape {
    /// The layout of a file with `feeds` feeds and `capacity` slots; `None`
    /// beyond [`MAX_FEEDS`] or [`MAX_CAPACITY`].
    pub fn new(feeds: usize, capacity: usize) -> Option<Shape> {
        if feeds > MAX_FEEDS || capacity > MAX_CAPACITY {
            return None;
        }
        let feeds_offset = HEADER_LEN;
        let descriptors_offset = feeds_offset.checked_add(feeds.checked_mul(FEED_LEN)?)?;
        let directory_offset = align(
            descriptors_offset.checked_add(feeds.checked_mul(DESCRIPTOR_TABLE_LEN)?)?,
            128,
        )?;
        let slots_offset = align(
            directory_offset.checked_add(capacity.checked_mul(NAMES_PER_SLOT * DIR_LEN)?)?,
            PAGE,
        )?;
        let file_len = align(
            slots_offset.checked_add(capacity.checked_mul(SLOT_LEN)?)?,
            PAGE,
        )?;
        Some(Shape {
            feeds,
            capacity,
            feeds_offset,
            descriptors_offset,
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

    /// The shape the views were made for.
    pub fn shape(&self) -> Shape {
        self.shape
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

    /// Feed `feed`'s descriptor table (`MAX_DESCRIPTORS` entries; the
    /// feed block's `descriptor_count` says how many are in use); empty for
    /// a feed the shape does not have.
    pub fn descriptors(&self, feed: usize) -> &[DescriptorWords] {
        if feed >= self.shape.feeds {
            return &[];
        }
        // SAFETY: table `feed` lies between descriptors_offset and
        // directory_offset by construction of `Shape` (checked above);
        // descriptors_offset is a multiple of 128 (header and blocks are),
        // and DescriptorWords needs 8.
        unsafe {
            std::slice::from_raw_parts(
                self.base
                    .add(self.shape.descriptors_offset + feed * DESCRIPTOR_TABLE_LEN)
                    as *const DescriptorWords,
                MAX_DESCRIPTORS,
            )
        }
    }

    pub fn directory(&self) -> &[DirEntry] {
        // SAFETY: as for `feeds`; DirEntry needs 8-byte alignment, and
        // directory_offset is a multiple of 128.
        unsafe {
            std::slice::from_raw_parts(
                self.base.add(self.shape.directory_offset) as *const DirEntry,
                NAMES_PER_SLOT * self.shape.capacity,
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

/// Feed `feed`'s counter descriptors, as the writer stored them before
/// the file was ready (call after the Acquire load of the version). A
/// block whose `descriptors_offset` is not where the shape puts its table
/// has none; descriptors of a kind this reader does not know are skipped.
pub fn read_descriptors(views: &Views, feed: usize) -> Vec<Descriptor> {
    let Some(block) = views.feeds().get(feed) else {
        return Vec::new();
    };
    let shape = views.shape();
    let at = shape.descriptors_offset + feed * DESCRIPTOR_TABLE_LEN;
    // Relaxed: published by the version's Release store.
    if block.descriptors_offset.load(Ordering::Relaxed) != at as u64 {
        return Vec::new();
    }
    let n = (block.descriptor_count.load(Ordering::Relaxed) as usize).min(MAX_DESCRIPTORS);
    views.descriptors(feed)[..n]
        .iter()
        .filter_map(|d| Descriptor::decode(&d.load()))
        .collect()
}

/// Reads a feed block's clock offset; `None` while a write is in progress.
pub fn read_offset(b: &FeedBlock) -> Option<i128> {
    read_offset_stamped(b).map(|(offset, _)| offset)
}

/// [`read_offset`] with the stamp of the copy read, for a
/// [`SeqLock::unchanged_since`] check after other words.
pub fn read_offset_stamped(b: &FeedBlock) -> Option<(i128, u64)> {
    let ((lo, hi), stamp) = b.offset_stamp.try_read(|| {
        // Relaxed: ordered by the seqlock's stamp and fences.
        (
            b.offset_lo.load(Ordering::Relaxed),
            b.offset_hi.load(Ordering::Relaxed),
        )
    })?;
    Some((clamp_offset(((hi as i128) << 64) | lo as i128), stamp))
}

/// A clock offset as verdicts take it: within ±2^64 ns, which any pair of
/// u64 clocks gives; a forged one beyond is taken as the nearest end, so
/// that no arithmetic on it overflows (the C header does the same).
pub fn clamp_offset(offset: i128) -> i128 {
    const LIMIT: i128 = 1 << 64;
    offset.clamp(-LIMIT, LIMIT)
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
    fn text_off_the_network_prints_without_driving_a_terminal() {
        let d = Descriptor::new(0, CounterKind::Text, "session").width(2);
        let mut c = [0u64; counter::ALL];
        let b = *b"\x1b[2J\x07ok\n  ";
        c[0] = u64::from_le_bytes(b[..8].try_into().unwrap());
        c[1] = u64::from(u16::from_le_bytes([b[8], b[9]]));
        assert_eq!(d.text(&c), "\\x1b[2J\\x07ok");
        c[0] = u64::from_le_bytes(*b"000000AB");
        c[1] = 0x4443;
        assert_eq!(d.text(&c), "000000ABCD");
        c[0] = u64::from_le_bytes(*b"S1\0\0\0\0\0\0");
        assert_eq!(d.text(&c), "S1");
        assert_eq!(d.text(&[0; counter::ALL]), "");
    }

    /// A descriptor's bytes: id, kind, width, param, then the text fields.
    #[test]
    fn descriptors_are_pinned() {
        let d = Descriptor::counter(counter::REJECTED_BY_REASON + 1, "rejected")
            .metric("rejected_packets_total")
            .attr("reason", "bad_magic")
            .param(1)
            .note(" (not SQF?)");
        let w = d.encode().unwrap();
        assert_eq!(w[0], 17 | 1 << 16 | 1 << 24);
        assert_eq!(w[1], 1);
        assert_eq!(w[2], u64::from_le_bytes(*b"rejected"));
        assert_eq!(w[6], u64::from_le_bytes(*b"rejected"));
        assert_eq!(w[14], u64::from_le_bytes(*b"reason\0\0"));
        assert_eq!(w[16], u64::from_le_bytes(*b"bad_magi"));
        assert_eq!(w[24], u64::from_le_bytes(*b" (not SQ"));
        assert_eq!(Descriptor::decode(&w), Some(d.clone()));
        assert_eq!(d.label(), "rejected{reason=bad_magic}");
        for (i, k) in CounterKind::ALL.iter().enumerate() {
            assert_eq!(usize::from(k.code()), i + 1);
            assert_eq!(CounterKind::from_code(k.code()), Some(*k));
        }
        assert_eq!(CounterKind::from_code(0), None);
        assert_eq!(CounterKind::from_code(8), None);
        let mut unknown = w;
        unknown[0] = 17 | 9 << 16 | 1 << 24;
        assert_eq!(
            Descriptor::decode(&unknown),
            None,
            "a kind of a newer writer"
        );
        assert_eq!(Descriptor::counter(counter::ALL, "x").encode(), None);
        assert_eq!(Descriptor::counter(0, &"x".repeat(33)).encode(), None);
        assert_eq!(
            Descriptor::counter(0, "packets").metric,
            "feed_packets_total"
        );
        let flag = Descriptor::new(0, CounterKind::Flag, "closed").param(1);
        assert_eq!(flag.value(&[7; counter::ALL], 0b10), 1);
        assert_eq!(flag.value(&[7; counter::ALL], 0b01), 0);
    }

    #[test]
    fn layout_is_pinned() {
        assert_eq!(LAYOUT_VERSION, 4);
        assert_eq!(size_of::<Header>(), 128);
        assert_eq!(offset_of!(Header, version), 8);
        assert_eq!(offset_of!(Header, heartbeat_ns), 40);
        assert_eq!(offset_of!(Header, directory_len), 72);
        assert_eq!(offset_of!(Header, file_len), 104);
        assert_eq!(size_of::<FeedBlock>(), 1024);
        assert_eq!(offset_of!(FeedBlock, kind), 64);
        assert_eq!(offset_of!(FeedBlock, protocol), 72);
        assert_eq!(offset_of!(FeedBlock, traits), 80);
        assert_eq!(offset_of!(FeedBlock, lines), 88);
        assert_eq!(offset_of!(FeedBlock, counters_stamp), 104);
        assert_eq!(offset_of!(FeedBlock, descriptors_offset), 112);
        assert_eq!(offset_of!(FeedBlock, descriptor_count), 120);
        assert_eq!(size_of::<DescriptorWords>(), DESCRIPTOR_LEN);
        assert_eq!((DESCRIPTOR_LEN, MAX_DESCRIPTORS), (256, 128));
        assert_eq!(traits::SYMBOL_COUNTS, 1);
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
        assert_eq!(DIR_MOVABLE, 1 << 63);
        assert_eq!(align_of::<Slot>(), 128);
        let s = Shape::new(2, 100).unwrap();
        assert_eq!(s.feeds_offset, 128);
        assert_eq!(s.descriptors_offset, 128 + 2048);
        assert_eq!(s.directory_offset, 128 + 2048 + 2 * 32768);
        assert_eq!(s.slots_offset % PAGE, 0);
        assert!(s.slots_offset >= s.directory_offset + 2 * 4800);
        assert_eq!(s.file_len, s.slots_offset + align(100 * 128, PAGE).unwrap());
    }

    /// A shape whose rounding up would pass `usize::MAX` (a forged
    /// header's) is no shape: it never wraps to a small file length.
    #[test]
    fn a_shape_past_the_address_space_is_none() {
        // slots_offset + 128 × capacity lands just below 2^64, so that
        // only the last rounding up to a page overflows.
        assert_eq!(Shape::new(1, 82_351_536_043_346_037), None);
        assert_eq!(Shape::new(usize::MAX, 1), None);
        assert_eq!(Shape::new(1, usize::MAX / 128), None);
        assert!(Shape::new(1, 1 << 24).is_some());
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
            SAME_LINE_DUPLICATES,
            ALL_REJECTED,
            LINE_RCVBUF_CAPPED,
            UNWANTED,
        ];
        assert_eq!(
            ids,
            [
                0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, 26, 28, 30, 32, 33, 34, 35, 36,
                37, 38, 40
            ]
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
