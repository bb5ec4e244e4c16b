//! Reading the shared-memory publication from another process: open once,
//! look a symbol up once into a [`Handle`], then [`Reader::check`] it as
//! often as needed — no system call, no lock, no allocation per check.
//!
//! A dead sidecar must never read as `ok`: a missing or unready file, a
//! writer whose heartbeat is older than the bound, a writer that closed the
//! publication, or one replaced by another process all answer `stale`, and
//! [`Verdict::health`] says which.
//!
//! Nor must a file anyone else made: the reader opens the path without
//! following a symbolic link and, on the opened file, requires a regular
//! file owned by the expected user ([`ReaderOptions::owner`]; this
//! process's effective uid by default) or root, not writable by group or
//! others, and at least as long as its header says (checked before mapping:
//! nothing past the end is ever touched). A writer heartbeat or start time
//! more than [`MAX_AHEAD_NS`] ahead of the reader's clock answers `stale`
//! too. These checks happen at open and [`Reader::refresh`], not per check.
//!
//! A file truncated after it was mapped (by its owner or root) raises
//! SIGBUS on the next read of a lost page, unless the program called
//! [`crate::guard::install`]: then the mapping reads as zeros from the
//! fault on, which answers `stale` (an unusable publication: its state word
//! reads 0, neither running nor closed) until
//! [`Reader::refresh`] maps the file a restarted or recovering writer put
//! at the path.

#![allow(unsafe_code)]

use crate::layout::{self, Shape, Views, LAYOUT_VERSION, MAGIC, STATE_CLOSED, STATE_RUNNING};
pub use crate::price::Price;
use crate::quote::FeedKind;
pub use crate::slot::{Record, Side};
pub use crate::status::FeedStatus;
use crate::symbol::Symbol;
use crate::verdict::Reasons;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Default bound on the writer heartbeat's age before the writer counts as dead, ns.
pub const DEFAULT_DEAD_AFTER_NS: u64 = 100_000_000;

pub use crate::verdict::MAX_AHEAD_NS;

/// How a [`Reader`] opens: `Reader::open_with(path, options)`; a plain `u64`
/// converts into the default options with that dead-writer bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderOptions {
    /// Bound on the writer heartbeat's age, ns.
    pub dead_after_ns: u64,
    /// The uid that must own the file (root is always accepted); `None`:
    /// this process's effective uid.
    pub owner: Option<u32>,
}

impl Default for ReaderOptions {
    fn default() -> ReaderOptions {
        ReaderOptions {
            dead_after_ns: DEFAULT_DEAD_AFTER_NS,
            owner: None,
        }
    }
}

impl From<u64> for ReaderOptions {
    fn from(dead_after_ns: u64) -> ReaderOptions {
        ReaderOptions {
            dead_after_ns,
            ..ReaderOptions::default()
        }
    }
}

impl ReaderOptions {
    /// The expected owner's uid.
    pub fn owner_uid(&self) -> u32 {
        self.owner.unwrap_or_else(crate::file::effective_uid)
    }
}

/// Why answers are (or are not) to be trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// The writer is alive.
    Ok,
    /// No publication at the path (or it could not be opened). (The
    /// texts are shared, not copied: a check while the publication is
    /// unusable allocates nothing.)
    Missing(Arc<str>),
    /// A file that is not a publication of this layout, or not ready yet.
    BadLayout(Arc<str>),
    /// A file that cannot be trusted: a symbolic link, not a regular file,
    /// owned by another user than the expected one or root, or writable by
    /// group or others.
    Untrusted(Arc<str>),
    /// The writer's heartbeat or start time is more than [`MAX_AHEAD_NS`]
    /// ahead of the reader's clock: a forged file, or the clock stepped back.
    WriterAhead {
        /// How far ahead, ns.
        ahead_ns: u64,
    },
    /// The writer's heartbeat is older than the bound.
    WriterDead {
        /// Heartbeat age at the check, ns.
        age_ns: u64,
    },
    /// The writer shut down and closed the publication.
    WriterClosed,
    /// The header's state word is neither running nor closed: the file
    /// was cut under the mapping (read as zeros once [`crate::guard`] is
    /// installed) or written by someone else. No usable publication:
    /// [`Reader::refresh`].
    BadState(u64),
    /// Another writer process replaced the one this reader opened.
    WriterRestarted,
    /// A slot or offset stayed mid-update for [`MAX_RETRIES`] reads: the
    /// writer died while writing it (or is stopped).
    Busy,
    /// The handle was looked up in another writer's publication (before
    /// [`Reader::refresh`] mapped a restarted writer's file, or in a
    /// `Reader` of another writer's file): its slot may hold another
    /// feed's instrument now. Look the symbol up again.
    ForeignHandle,
}

/// Reads of a slot, offset or feed status in the middle of an update, over
/// one check, before the reader gives up and answers `stale` (a few
/// milliseconds of spinning).
pub const MAX_RETRIES: u32 = 1 << 16;

/// Reads of each later slot in a pass over them once one stayed
/// mid-update for [`MAX_RETRIES`] ([`read_each`]): a live writer finishes
/// an update within a few.
const AFTER_STUCK_RETRIES: u32 = 64;

/// `read` of each item that gives one, each read up to [`MAX_RETRIES`]
/// times. A live writer keeps a slot mid-update for nanoseconds; once one
/// item stayed unread that long (a writer dead or stopped mid-update, a
/// corrupt file), the rest are read up to [`AFTER_STUCK_RETRIES`] times
/// each: a file of slots all stuck costs one slot's wait and a little
/// more per slot, not one wait per slot, while a writer that goes on
/// (stopped for a while, then resumed) still has its slots read.
fn read_each<S, T>(items: &[S], mut read: impl FnMut(&S) -> Option<T>) -> Vec<T> {
    let mut tries = MAX_RETRIES;
    items
        .iter()
        .filter_map(|s| {
            let r = (0..tries).find_map(|_| read(s));
            if r.is_none() {
                tries = AFTER_STUCK_RETRIES;
            }
            r
        })
        .collect()
}

/// Repeats a seqlock read `attempt` while it overlaps a write, counting the
/// failed attempts in `retries`; `None` once they reach [`MAX_RETRIES`].
#[inline(always)]
fn retry<T>(retries: &mut u32, mut attempt: impl FnMut() -> Option<T>) -> Option<T> {
    loop {
        if let Some(v) = attempt() {
            return Some(v);
        }
        *retries += 1;
        if *retries >= MAX_RETRIES {
            return None;
        }
        std::hint::spin_loop();
    }
}

impl Health {
    fn missing(why: String) -> Health {
        Health::Missing(why.into())
    }

    fn bad_layout(why: String) -> Health {
        Health::BadLayout(why.into())
    }

    fn untrusted(why: String) -> Health {
        Health::Untrusted(why.into())
    }

    /// True when answers can be trusted.
    pub fn is_ok(&self) -> bool {
        matches!(self, Health::Ok)
    }

    /// True when there is no usable publication at the path at all
    /// (missing, not a publication of this layout or not ready, not
    /// trusted, or a state word no writer stores) — an error for `check`
    /// and `stat` (exit 2), where the other
    /// unhealthy states are a verdict on a real publication (`stale`).
    pub fn is_unusable(&self) -> bool {
        matches!(
            self,
            Health::Missing(_) | Health::BadLayout(_) | Health::Untrusted(_) | Health::BadState(_)
        )
    }
}

impl Health {
    /// A short, stable name (the `health` field of `stat --json`).
    pub fn name(&self) -> &'static str {
        match self {
            Health::Ok => "ok",
            Health::Missing(_) => "missing",
            Health::BadLayout(_) => "bad_layout",
            Health::Untrusted(_) => "untrusted",
            Health::WriterDead { .. } => "writer_dead",
            Health::WriterAhead { .. } => "writer_ahead",
            Health::WriterClosed => "writer_closed",
            Health::BadState(_) => "bad_state",
            Health::WriterRestarted => "writer_restarted",
            Health::Busy => "busy",
            Health::ForeignHandle => "foreign_handle",
        }
    }
}

impl std::fmt::Display for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Health::Ok => f.write_str("writer alive"),
            Health::Missing(e) => write!(f, "no publication: {e}"),
            Health::BadLayout(e) => write!(f, "unusable publication: {e}"),
            Health::Untrusted(e) => write!(f, "untrusted publication: {e}"),
            Health::WriterAhead { ahead_ns } => write!(
                f,
                "writer time {} ms ahead of this clock: forged, or the clock stepped back",
                ahead_ns / 1_000_000
            ),
            Health::WriterDead { age_ns } => {
                write!(f, "writer dead: heartbeat {} ms old", age_ns / 1_000_000)
            }
            Health::WriterClosed => f.write_str("writer closed the publication"),
            Health::BadState(word) => write!(
                f,
                "unusable publication: state word {word} is neither running nor closed \
                 (the file was truncated or overwritten): refresh"
            ),
            Health::WriterRestarted => f.write_str("writer restarted: reopen"),
            Health::Busy => f.write_str("slot never finished updating: writer died mid-write?"),
            Health::ForeignHandle => {
                f.write_str("handle from another writer's publication: look the symbol up again")
            }
        }
    }
}

/// The answer to a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Reasons to reject; empty means ok. Always `stale` when `health` is not ok.
    pub reasons: Reasons,
    /// Whether the writer could be trusted.
    pub health: Health,
    /// The slot's change counter at the read (even; grows on every write to
    /// the symbol's slot: book, flags, liveness, sequence, thresholds).
    /// Just before sending, check again:
    /// send if that answer is ok and its version is this one (the feed's
    /// own flags, which a feed's every packet rewrites with its times, are
    /// in the answer's reasons, not in the version).
    pub version: u64,
}

impl Verdict {
    fn dead(health: Health) -> Verdict {
        Verdict {
            reasons: Reasons::STALE,
            health,
            version: 0,
        }
    }

    /// True when the order may go.
    pub fn is_ok(&self) -> bool {
        self.reasons.is_ok() && self.health.is_ok()
    }
}

/// A looked-up (feed, symbol): a slot number and what it must hold, in
/// the publication of one writer (its pid and start time): checked with
/// another's, it answers `stale` ([`Health::ForeignHandle`]). Found by a
/// name that may move (an MDP3 Symbol), it answers `no_quote` once the
/// name has left its slot (entered for another SecurityID, or withdrawn):
/// look the name up again to follow it. Found by a name that never moves
/// (an SQF or ITCH symbol, an MDP3 `#SecurityID`), it always answers for
/// its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle {
    feed: u16,
    slot: u32,
    symbol: Symbol,
    writer: (u64, u64),
    /// The slot's `names_left` count when the movable name was found in
    /// force there; `None` for a name that never moves.
    names_left: Option<u64>,
}

impl Handle {
    /// The feed's id.
    pub fn feed(&self) -> u16 {
        self.feed
    }
    /// Whether a slot read as `facts` still answers for the name this
    /// handle was found by: the (feed, instrument) it found, and a movable
    /// name not gone from it since.
    #[inline]
    fn holds(&self, facts: &crate::slot::Facts) -> bool {
        facts.key == self.symbol.key()
            && facts.feed == self.feed
            && self.names_left.is_none_or(|n| n == facts.names_left)
    }
    /// The symbol.
    pub fn symbol(&self) -> Symbol {
        self.symbol
    }
    /// The slot's index in the publication.
    pub fn slot(&self) -> u32 {
        self.slot
    }
}

/// One feed as the publication describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedInfo {
    /// Name from the configuration.
    pub name: String,
    /// Full or delta.
    pub kind: FeedKind,
    /// The name of the protocol it speaks (`sqf`, `itch50`, ...), as the
    /// writer published it.
    pub protocol: String,
    /// [`layout::traits`] bits.
    pub traits: u64,
    /// Lines the feed has (1 or 2).
    pub lines: usize,
    /// Its counters, as the publication describes them, in the writer's
    /// order (the counters every feed has, then its protocol's own).
    pub counters: Vec<layout::Descriptor>,
}

impl FeedInfo {
    /// Whether each slot counts its symbol's own lost ticks and duplicates
    /// ([`layout::traits::SYMBOL_COUNTS`]).
    pub fn symbol_counts(&self) -> bool {
        self.traits & layout::traits::SYMBOL_COUNTS != 0
    }

    /// The decimals the feed's prices print with
    /// ([`Price::show`](crate::price::Price::show)); `None` when the writer
    /// did not say.
    pub fn price_decimals(&self) -> Option<u8> {
        ((self.traits >> layout::traits::PRICE_DECIMALS_SHIFT) as u8).checked_sub(1)
    }
}

/// One counter of a feed at a read: its descriptor and value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading<'a> {
    /// What the counter is.
    pub descriptor: &'a layout::Descriptor,
    /// Its value ([`layout::Descriptor::value`]); 0 for text.
    pub value: u64,
    /// Its text, for a text counter; empty otherwise.
    pub text: String,
}

struct Mapped {
    // Field order: `views` points into `_map` and is dropped first, and
    // `_guard` is unregistered before `_map` is unmapped.
    views: Views,
    _guard: Option<crate::guard::Guard>,
    _map: memmap2::MmapRaw,
    pid: u64,
    start_time_ns: u64,
    feeds: Vec<FeedInfo>,
    dev_ino: (u64, u64),
}

/// A read-only view of a running sidecar's state.
pub struct Reader {
    path: PathBuf,
    dead_after_ns: u64,
    owner: u32,
    mapped: Result<Mapped, Health>,
}

/// The header words a reader needs before mapping, read with `pread`.
fn read_header(file: &std::fs::File, path: &Path) -> Result<[u64; 16], Health> {
    use std::os::unix::fs::FileExt;
    let mut bytes = [0u8; 128];
    file.read_exact_at(&mut bytes, 0)
        .map_err(|_| Health::bad_layout(format!("{}: too short for a header", path.display())))?;
    let mut words = [0u64; 16];
    for (w, b) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        let mut le = [0u8; 8];
        le.copy_from_slice(b);
        *w = u64::from_le_bytes(le);
    }
    Ok(words)
}

/// Opens `path` for reading and checks it can be trusted: not a symbolic
/// link (O_NOFOLLOW), a regular file (O_NONBLOCK: a FIFO does not block
/// the open), owned by `owner` or root, not writable by group or others.
/// Checks are on the opened descriptor (fstat), not the path.
fn open_trusted(path: &Path, owner: u32) -> Result<(std::fs::File, std::fs::Metadata), Health> {
    use std::os::unix::fs::MetadataExt;
    let shown = path.display();
    let file = crate::file::open_read(path).map_err(|e| {
        if crate::file::is_symlink_error(&e) {
            Health::untrusted(format!("{shown}: a symbolic link"))
        } else {
            Health::missing(format!("{shown}: {e}"))
        }
    })?;
    let meta = file
        .metadata()
        .map_err(|e| Health::missing(format!("{shown}: {e}")))?;
    if !meta.file_type().is_file() {
        return Err(Health::untrusted(format!("{shown}: not a regular file")));
    }
    if meta.uid() != owner && meta.uid() != 0 {
        return Err(Health::untrusted(format!(
            "{shown}: owned by uid {}, expected uid {owner} or root",
            meta.uid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(Health::untrusted(format!(
            "{shown}: mode {:04o} lets group or others write it",
            meta.mode() & 0o7777
        )));
    }
    Ok((file, meta))
}

fn map(path: &Path, owner: u32) -> Result<Mapped, Health> {
    use std::os::unix::fs::MetadataExt;
    let (file, meta) = open_trusted(path, owner)?;
    let len = meta.len();
    // The length the header claims, checked against the file before mapping.
    let w = read_header(&file, path)?;
    if w[0] != MAGIC {
        return Err(Health::bad_layout(format!(
            "{}: not a tickguard publication",
            path.display()
        )));
    }
    // The version before the shape: another layout's shape differs.
    version_known(w[1], path)?;
    // The shape the header's capacity and feed count make, which its
    // file_len must agree with; then the file must hold it.
    let shape = Shape::new(w[8] as usize, w[7] as usize).map(|s| s.file_len);
    let map_len = match shape {
        Some(n) if n as u64 == w[13] && n as u64 <= len => n,
        Some(n) if n as u64 == w[13] => {
            return Err(Health::bad_layout(format!(
                "{}: {len} bytes, header says {n} (truncated)",
                path.display()
            )))
        }
        _ => {
            return Err(Health::bad_layout(format!(
                "{}: header inconsistent: capacity {} and {} feeds make {}, its file_len says {}",
                path.display(),
                w[7],
                w[8],
                shape.map_or("an impossible size".to_string(), |n| format!("{n} bytes")),
                w[13]
            )))
        }
    };
    // SAFETY: mapped read-only, `map_len` bytes, all within the file as it
    // is now; the file is owned by the expected user or root and writable by
    // no one else, and its writer never truncates it (its owner could: see
    // `guard`). Everything read through it is an atomic, valid for any bit
    // pattern.
    let map = unsafe { memmap2::MmapOptions::new().len(map_len).map(&file) }
        .map_err(|e| Health::missing(format!("{}: {e}", path.display())))?;
    // Raw: the views' pointers are the mapping's own, never taken through
    // a reference to its bytes (they are shared memory another process
    // writes: atomics only).
    let map = memmap2::MmapRaw::from(map);
    // Declared after `map`: dropped (unregistered) before it on every return.
    // SAFETY: `map` is one live mapping of `map.len()` bytes, and the guard
    // is dropped before it (here, and in `Mapped`'s field order).
    let guard = unsafe { crate::guard::Guard::register(map.as_ptr(), map.len(), false) };
    let len = map_len;
    // SAFETY: page-aligned mapping of `len` >= 4096 bytes (every shape is at
    // least a page); only the header (128 bytes) is read until the shape is
    // checked against `len`.
    let probe = unsafe { Views::new(map.as_ptr(), Shape::new(0, 0).unwrap_or(NO_SHAPE)) };
    let h = probe.header();
    // Acquire: pairs with the writer's Release store of the version, so the
    // header fields read below are the ones it wrote.
    version_known(crate::memory::load_acquire(&h.version), path)?;
    let feeds = h.feed_count.load(Ordering::Relaxed) as usize;
    let capacity = h.capacity.load(Ordering::Relaxed) as usize;
    let shape = Shape::new(feeds, capacity).filter(|s| {
        s.file_len <= len
            && s.file_len as u64 == h.file_len.load(Ordering::Relaxed)
            && s.feeds_offset as u64 == h.feeds_offset.load(Ordering::Relaxed)
            && s.directory_offset as u64 == h.directory_offset.load(Ordering::Relaxed)
            && s.slots_offset as u64 == h.slots_offset.load(Ordering::Relaxed)
    });
    let Some(shape) = shape else {
        return Err(Health::bad_layout(format!(
            "{}: inconsistent header",
            path.display()
        )));
    };
    // SAFETY: the shape was checked to fit within the mapping.
    let views = unsafe { Views::new(map.as_ptr(), shape) };
    let infos = views
        .feeds()
        .iter()
        .enumerate()
        .map(|(i, b)| FeedInfo {
            name: layout::feed_name(b),
            kind: if b.kind.load(Ordering::Relaxed) == 1 {
                FeedKind::Delta
            } else {
                FeedKind::Full
            },
            protocol: layout::protocol_name(b),
            // Relaxed: published by the version's Release store.
            traits: b.traits.load(Ordering::Relaxed),
            lines: b
                .lines
                .iter()
                .filter(|l| l.load(Ordering::Relaxed) != 0)
                .count(),
            counters: layout::read_descriptors(&views, i),
        })
        .collect();
    let h = views.header();
    Ok(Mapped {
        _guard: guard,
        pid: h.writer_pid.load(Ordering::Relaxed),
        start_time_ns: h.start_time_ns.load(Ordering::Relaxed),
        feeds: infos,
        dev_ino: (meta.dev(), meta.ino()),
        views,
        _map: map,
    })
}

/// A file of another layout version (or one not ready, version 0) is
/// `BadLayout`, saying which version it has and which this reader expects.
fn version_known(version: u64, path: &Path) -> Result<(), Health> {
    match version {
        LAYOUT_VERSION => Ok(()),
        0 => Err(Health::bad_layout(format!(
            "{}: not ready (layout version 0)",
            path.display()
        ))),
        v => Err(Health::bad_layout(format!(
            "{}: layout version {v}, expected {LAYOUT_VERSION}",
            path.display()
        ))),
    }
}

const NO_SHAPE: Shape = Shape {
    feeds: 0,
    capacity: 0,
    feeds_offset: 128,
    descriptors_offset: 128,
    directory_offset: 128,
    slots_offset: 4096,
    file_len: 4096,
};

impl Reader {
    /// Opens the publication at `path` with the default dead-writer bound.
    /// Never fails: a missing or unusable file gives a reader that answers
    /// `stale` and says why in [`Reader::health`]; [`Reader::refresh`] tries again.
    pub fn open(path: impl AsRef<Path>) -> Reader {
        Reader::open_with(path, ReaderOptions::default())
    }

    /// Opens with [`ReaderOptions`], or a bound (ns) on the writer
    /// heartbeat's age and the default owner.
    pub fn open_with(path: impl AsRef<Path>, options: impl Into<ReaderOptions>) -> Reader {
        let options = options.into();
        let path = path.as_ref().to_path_buf();
        let owner = options.owner_uid();
        let mapped = map(&path, owner);
        Reader {
            path,
            dead_after_ns: options.dead_after_ns,
            owner,
            mapped,
        }
    }

    /// Re-opens the file if it is a different one than mapped (a restarted
    /// writer) or was not usable. Makes system calls: call it when a check's
    /// health is not ok, not before every check. Returns true if it tried
    /// to open the file again (whether that worked is the next health's).
    pub fn refresh(&mut self) -> bool {
        use std::os::unix::fs::MetadataExt;
        let current = std::fs::symlink_metadata(&self.path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        let same = match (&self.mapped, current) {
            (Ok(m), Some(id)) => m.dev_ino == id,
            _ => false,
        };
        if same {
            return false;
        }
        self.mapped = map(&self.path, self.owner);
        true
    }

    /// The writer's health at local time `now` (ns since the Unix epoch).
    pub fn health(&self, now: u64) -> Health {
        match &self.mapped {
            Err(h) => h.clone(),
            Ok(m) => writer_health(m, now, self.dead_after_ns),
        }
    }

    /// The feeds the publication serves, by id.
    pub fn feeds(&self) -> &[FeedInfo] {
        match &self.mapped {
            Ok(m) => &m.feeds,
            Err(_) => &[],
        }
    }

    /// Finds (feed, instrument) by name: the last directory entry of that
    /// feed whose name words equal `symbol`'s. `None` if the feed is unknown, no
    /// entry has that name (the writer has not seen it yet: look it up
    /// again later), or its key is not a symbol; also for a movable entry
    /// naming a slot past the file's, or when the directory grew in each
    /// of [`MAX_RETRIES`] rounds (look it up again). Scans the directory:
    /// do it once, not per check.
    pub fn lookup(&self, feed: &str, symbol: &str) -> Option<Handle> {
        let m = self.mapped.as_ref().ok()?;
        let feed = m.feeds.iter().position(|f| f.name == feed)? as u16;
        let name = layout::name_words(symbol.as_bytes()).filter(|w| w[0] != 0)?;
        let dir = m.views.directory();
        let len = || {
            // Acquire: pairs with the writer's Release store of
            // directory_len, so the entries below it are complete.
            (crate::memory::load_acquire(&m.views.header().directory_len) as usize).min(dir.len())
        };
        // The last entry of a name is in force (a name entered again
        // points at another instrument now).
        let newest = |from: usize, to: usize| {
            dir[from..to].iter().rev().find_map(|e| {
                // Relaxed (all): ordered by the Acquire load of directory_len.
                let fs = e.feed_slot.load(Ordering::Relaxed);
                let same = (fs >> 32) as u16 == feed
                    && e.name
                        .iter()
                        .zip(name)
                        .all(|(w, v)| w.load(Ordering::Relaxed) == v);
                same.then(|| (fs, e.key.load(Ordering::Relaxed)))
            })
        };
        let (mut scanned, mut found) = (0, None);
        // Bounded as every read of a slot is: a live writer only appends,
        // so each round sees new entries, and a file changed under the
        // reader by other hands cannot keep it here.
        for _ in 0..MAX_RETRIES {
            let n = len();
            // Each entry is looked at once: a length that went back (a
            // file changed by other hands) rescans nothing.
            found = newest(scanned.min(n), n).or(found);
            scanned = scanned.max(n);
            // The entry in force decides: one whose key is no symbol (a
            // name withdrawn) finds nothing, as in tickguard.h.
            let (fs, key) = found?;
            let handle = Handle {
                feed,
                slot: fs as u32,
                symbol: Symbol::from_key(key)?,
                writer: (m.pid, m.start_time_ns),
                names_left: None,
            };
            if fs & layout::DIR_MOVABLE == 0 {
                return Some(handle);
            }
            // The count the slot has now, then the directory again: the
            // writer publishes an entry moving the name before it counts
            // the move in the slot it left, so a count that includes a
            // move away is read with that entry visible (and scanned
            // below); one from before it is what a check will find grown.
            let left = m
                .views
                .slots()
                .get(handle.slot as usize)?
                .names_left_acquire();
            if len() == n {
                return Some(Handle {
                    names_left: Some(left),
                    ..handle
                });
            }
            // Entries came meanwhile: the newer ones decide.
        }
        None
    }

    /// The verdict for a looked-up symbol at local time `now` (ns since the
    /// Unix epoch, CLOCK_REALTIME: see [`crate::clock::now_ns`]).
    #[inline]
    pub fn check(&self, handle: &Handle, now: u64) -> Verdict {
        self.check_counting(handle, now).0
    }

    /// As [`check`](Self::check), also returning how many times a read had to
    /// be retried because the writer was updating the slot.
    #[inline]
    pub fn check_counting(&self, handle: &Handle, now: u64) -> (Verdict, u32) {
        let m = match &self.mapped {
            Ok(m) => m,
            Err(h) => return (Verdict::dead(h.clone()), 0),
        };
        let health = writer_health(m, now, self.dead_after_ns);
        if !health.is_ok() {
            return (Verdict::dead(health), 0);
        }
        // The feeds' order and the slots belong to one writer's file.
        let (Some(slot), Some(block), true) = (
            m.views.slots().get(handle.slot as usize),
            m.views.feeds().get(handle.feed as usize),
            handle.writer == (m.pid, m.start_time_ns),
        ) else {
            return (Verdict::dead(Health::ForeignHandle), 0);
        };
        // The slot, then the feed's offset and status, then the slot's and
        // the offset's stamps again: unchanged, all three were in force
        // together when the status was read, a state the writer passed
        // through. A writer clearing `suspect` after the books it waited
        // for cannot pair the old book with the new flag; one moving the
        // offset publishes it on the side that makes every state it passes
        // through at least as old at the source as the last
        // (`tickguard_engine::shm::publish_around_offset`), which holds
        // only for states read whole.
        let mut retries = 0u32;
        let read = retry(&mut retries, || read_in_force(slot, block, || {}));
        let Some((facts, offset, status)) = read else {
            return (Verdict::dead(Health::Busy), retries);
        };
        let reasons = if !handle.holds(&facts) {
            Reasons::NO_QUOTE
        } else {
            crate::status::verdict(&facts, &status, offset, now)
        };
        (
            Verdict {
                reasons,
                health,
                version: facts.version,
            },
            retries,
        )
    }

    /// Looks up and checks in one call: `no_quote` for a symbol the writer
    /// has not seen, `stale` when the writer is not healthy.
    pub fn check_symbol(&self, feed: &str, symbol: &str, now: u64) -> Verdict {
        let health = self.health(now);
        if !health.is_ok() {
            return Verdict::dead(health);
        }
        match self.lookup(feed, symbol) {
            Some(h) => self.check(&h, now),
            None => Verdict {
                reasons: Reasons::NO_QUOTE,
                health,
                version: 0,
            },
        }
    }

    /// The name to show each published instrument by, keyed (feed id,
    /// slot key as in [`Record::symbol`]): of the directory's names that
    /// [`lookup`](Self::lookup) finds it by, the one entered last (an
    /// instrument published under several names, as an MDP3 one under
    /// `#SecurityID` and then its Symbol, shows the later). For SQF and
    /// ITCH the name is the symbol's text; an MDP3 key is not a name
    /// anything accepts. Made printable ([`layout::printable`]). Scans the
    /// directory: for displays, not per check.
    pub fn names(&self) -> std::collections::HashMap<(u16, Symbol), String> {
        let Ok(m) = &self.mapped else {
            return Default::default();
        };
        let dir = m.views.directory();
        let n =
            (crate::memory::load_acquire(&m.views.header().directory_len) as usize).min(dir.len());
        // Relaxed (all): ordered by the Acquire load of directory_len.
        let entries: Vec<(u16, u64, [u64; layout::NAME_LEN / 8])> = dir[..n]
            .iter()
            .map(|e| {
                let feed = (e.feed_slot.load(Ordering::Relaxed) >> 32) as u16;
                let name = std::array::from_fn(|i| e.name[i].load(Ordering::Relaxed));
                (feed, e.key.load(Ordering::Relaxed), name)
            })
            .collect();
        // The last entry of a name is in force.
        let mut in_force = std::collections::HashMap::new();
        for &(feed, key, name) in &entries {
            in_force.insert((feed, name), key);
        }
        let mut names = std::collections::HashMap::new();
        for &(feed, key, name) in &entries {
            let Some(symbol) = Symbol::from_key(key) else {
                continue;
            };
            if in_force[&(feed, name)] == key {
                let bytes: Vec<u8> = name.iter().flat_map(|w| w.to_le_bytes()).collect();
                let len = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
                names.insert((feed, symbol), layout::printable(&bytes[..len]));
            }
        }
        names
    }

    /// Every published (feed id, symbol) with a consistent copy of its slot
    /// (a slot left mid-update by a dead writer is skipped).
    pub fn records(&self) -> Vec<Record> {
        let Ok(m) = &self.mapped else {
            return Vec::new();
        };
        let n = occupied(m);
        read_each(&m.views.slots()[..n], |s| s.try_read())
    }

    /// Whether the file mapped is covered by the SIGBUS guard (once
    /// [`crate::guard::install`]ed, a cut under it reads as zeros, answered
    /// `stale`): false with nothing mapped, or past
    /// [`MAX_GUARDED`](crate::guard::MAX_GUARDED) mappings in the process.
    pub fn guarded(&self) -> bool {
        self.mapped.as_ref().is_ok_and(|m| m._guard.is_some())
    }

    /// Every published symbol's record with the reasons a check at local
    /// time `now` would answer for it: each slot read in force with its
    /// feed's offset and status, as [`check`](Self::check) reads them (a
    /// slot and a status read apart could pair an old book with a newer
    /// flag, a state the writer never showed); every reason `stale` when
    /// the writer is not healthy at `now`, before or after the scan. Slots left mid-update for
    /// [`MAX_RETRIES`] reads are left out (a check of one answers `stale`).
    pub fn judged(&self, now: u64) -> Vec<(Record, Reasons)> {
        let Ok(m) = &self.mapped else {
            return Vec::new();
        };
        let healthy = writer_health(m, now, self.dead_after_ns).is_ok();
        let feeds = m.views.feeds();
        let n = occupied(m);
        let judged = read_each(&m.views.slots()[..n], |slot| {
            let rec = slot.try_read()?;
            let Some(block) = feeds.get(usize::from(rec.feed)) else {
                // A feed the file does not have: no check can name it.
                return Some(None);
            };
            let (offset, status) = offset_and_status(slot, rec.version, block, || {})?;
            let reasons = if healthy {
                crate::status::verdict(&rec.facts(), &status, offset, now)
            } else {
                Reasons::STALE
            };
            Some(Some((rec, reasons)))
        });
        // A writer gone during the scan (or a file cut under it, read as
        // zeros from then on): nothing read is vouched for.
        let mut judged: Vec<_> = judged.into_iter().flatten().collect();
        if !writer_health(m, now, self.dead_after_ns).is_ok() {
            for (_, reasons) in &mut judged {
                *reasons = Reasons::STALE;
            }
        }
        judged
    }

    /// Every counter of a feed (index = id in [`crate::layout::counter`]), as
    /// the writer published them together at one heartbeat; `None` if not
    /// mapped, no such feed, or the writer stayed mid-update for
    /// [`MAX_RETRIES`] reads.
    pub fn counters(&self, feed: u16) -> Option<[u64; layout::counter::ALL]> {
        let m = self.mapped.as_ref().ok()?;
        let b = m.views.feeds().get(feed as usize)?;
        (0..MAX_RETRIES).find_map(|_| layout::read_counters(b))
    }

    /// Every counter of a feed as its descriptors say, from one consistent
    /// copy of its counters (and one of its status, for flags); `None` as
    /// for [`counters`](Self::counters).
    pub fn readings(&self, feed: u16) -> Option<Vec<Reading<'_>>> {
        let info = self.feeds().get(feed as usize)?;
        let values = self.counters(feed)?;
        let flags = self.feed_status(feed).map_or(0, |s| s.flags());
        Some(
            info.counters
                .iter()
                .map(|d| Reading {
                    descriptor: d,
                    value: d.value(&values, flags),
                    text: d.text(&values),
                })
                .collect(),
        )
    }

    /// A feed's status (its feed extension); `None` if not mapped, no such
    /// feed, or the writer stayed mid-update for [`MAX_RETRIES`] reads.
    pub fn feed_status(&self, feed: u16) -> Option<FeedStatus> {
        let m = self.mapped.as_ref().ok()?;
        let b = m.views.feeds().get(feed as usize)?;
        (0..MAX_RETRIES).find_map(|_| b.status.try_read())
    }

    /// A feed's status and clock offset in force together (the offset,
    /// the status, the offset's stamp again, as [`check`](Self::check)
    /// reads them), for verdicts computed from [`records`](Self::records);
    /// `None` if not mapped or a write kept overlapping.
    pub fn feed_state(&self, feed: u16) -> Option<(FeedStatus, i128)> {
        let m = self.mapped.as_ref().ok()?;
        let b = m.views.feeds().get(feed as usize)?;
        (0..MAX_RETRIES).find_map(|_| {
            let (offset, stamp) = layout::read_offset_stamped(b)?;
            let status = b.status.try_read()?;
            b.offset_stamp
                .unchanged_since(stamp)
                .then_some((status, offset))
        })
    }

    /// A consistent copy of a looked-up symbol's slot (its exact prices and
    /// sizes: [`Record::bid`], [`Record::ask`]); `None` if not mapped, the
    /// handle is another writer's, the slot holds another (feed, symbol),
    /// the movable name it was found by has left the slot, or it stayed
    /// mid-update.
    pub fn record(&self, handle: &Handle) -> Option<Record> {
        let m = self.mapped.as_ref().ok()?;
        if handle.writer != (m.pid, m.start_time_ns) {
            return None;
        }
        let slot = m.views.slots().get(handle.slot as usize)?;
        (0..MAX_RETRIES)
            .find_map(|_| slot.try_read())
            .filter(|r| handle.holds(&r.facts()))
    }

    /// A feed's clock offset (local − provider), ns.
    pub fn offset(&self, feed: u16) -> Option<i128> {
        let m = self.mapped.as_ref().ok()?;
        let b = m.views.feeds().get(feed as usize)?;
        (0..MAX_RETRIES).find_map(|_| layout::read_offset(b))
    }

    /// A feed's counter (ids in [`crate::layout::counter`]).
    pub fn counter(&self, feed: u16, id: usize) -> Option<u64> {
        let m = self.mapped.as_ref().ok()?;
        Some(
            m.views
                .feeds()
                .get(feed as usize)?
                .counter(id)?
                .load(Ordering::Relaxed),
        )
    }

    /// The writer's pid, if mapped.
    pub fn writer_pid(&self) -> Option<u64> {
        self.mapped.as_ref().ok().map(|m| m.pid)
    }

    /// The writer's start time, worst duty cycle (ns) and datagrams so far, if mapped.
    pub fn receiver(&self) -> Option<(u64, u64, u64)> {
        let m = self.mapped.as_ref().ok()?;
        let h = m.views.header();
        Some((
            h.start_time_ns.load(Ordering::Relaxed),
            h.worst_cycle_ns.load(Ordering::Relaxed),
            h.datagrams.load(Ordering::Relaxed),
        ))
    }

    /// The writer's last heartbeat (ns since the Unix epoch), if mapped.
    pub fn heartbeat_ns(&self) -> Option<u64> {
        let m = self.mapped.as_ref().ok()?;
        Some(m.views.header().heartbeat_ns.load(Ordering::Relaxed))
    }

    /// Sets the bound on the writer heartbeat's age, ns
    /// ([`ReaderOptions::dead_after_ns`]), for the checks from now on.
    pub fn set_dead_after_ns(&mut self, ns: u64) {
        self.dead_after_ns = ns;
    }

    /// How often the writer refreshes its heartbeat (ns), if mapped.
    pub fn heartbeat_period_ns(&self) -> Option<u64> {
        let m = self.mapped.as_ref().ok()?;
        Some(m.views.header().heartbeat_period_ns.load(Ordering::Relaxed))
    }
}

/// Slots below the highest one the directory names (slots are handed out
/// densely).
fn occupied(m: &Mapped) -> usize {
    let dir = m.views.directory();
    let entries =
        (crate::memory::load_acquire(&m.views.header().directory_len) as usize).min(dir.len());
    dir[..entries]
        .iter()
        // Relaxed: ordered by the Acquire load of directory_len.
        .map(|e| (e.feed_slot.load(Ordering::Relaxed) as u32 as usize).saturating_add(1))
        .max()
        .unwrap_or(0)
        .min(m.views.slots().len())
}

#[inline]
fn writer_health(m: &Mapped, now: u64, dead_after_ns: u64) -> Health {
    let h = m.views.header();
    // Acquire: pairs with the Release store of `state` on close. (It
    // orders nothing the check reads after it: the slots' seqlocks and
    // the feeds' times keep the answer safe whatever lands meanwhile.)
    match crate::memory::load_acquire(&h.state) {
        STATE_RUNNING => {}
        STATE_CLOSED => return Health::WriterClosed,
        // A word the writer never stores: no allocation, as any check.
        word => return Health::BadState(word),
    }
    if h.writer_pid.load(Ordering::Relaxed) != m.pid
        || h.start_time_ns.load(Ordering::Relaxed) != m.start_time_ns
    {
        return Health::WriterRestarted;
    }
    let beat = h.heartbeat_ns.load(Ordering::Relaxed);
    let latest = beat.max(m.start_time_ns);
    if latest > now.saturating_add(MAX_AHEAD_NS) {
        return Health::WriterAhead {
            ahead_ns: latest - now,
        };
    }
    let age = now.saturating_sub(beat);
    if age > dead_after_ns {
        return Health::WriterDead { age_ns: age };
    }
    Health::Ok
}

/// One attempt at a slot's facts, its feed's offset and its feed's status
/// all in force together (see [`Reader::check`]); `None` if a write
/// overlapped. `between` runs after the offset is read (nothing, but in
/// tests).
#[inline(always)]
fn read_in_force(
    slot: &crate::slot::Slot,
    block: &layout::FeedBlock,
    between: impl FnOnce(),
) -> Option<(crate::slot::Facts, i128, crate::status::FeedStatus)> {
    let facts = slot.try_read_facts()?;
    let (offset, status) = offset_and_status(slot, facts.version, block, between)?;
    Some((facts, offset, status))
}

/// After a read of `slot` at `version`: its feed's offset, then status,
/// then the slot's and the offset's stamps again; `None` if either moved
/// (a write overlapped), so the three were in force together. `between`
/// runs after the offset is read (nothing, but in tests).
#[inline(always)]
fn offset_and_status(
    slot: &crate::slot::Slot,
    version: u64,
    block: &layout::FeedBlock,
    between: impl FnOnce(),
) -> Option<(i128, crate::status::FeedStatus)> {
    let (offset, offset_stamp) = layout::read_offset_stamped(block)?;
    between();
    let status = block.status.try_read()?;
    (slot.unchanged_since(version) && block.offset_stamp.unchanged_since(offset_stamp))
        .then_some((offset, status))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An offset published while a check reads its feed's status (after
    /// the offset) fails that attempt: the old offset and the newer status
    /// are never judged together. The next attempt reads the new one.
    #[test]
    fn an_offset_published_during_a_check_is_read_again() {
        // SAFETY: both are plain atomics, for which all-zero bytes are
        // valid values (a slot and a feed block never written).
        let (slot, block) = unsafe {
            (
                Box::<crate::slot::Slot>::new_zeroed().assume_init(),
                Box::<layout::FeedBlock>::new_zeroed().assume_init(),
            )
        };
        let publish = |offset: u64| {
            block.offset_stamp.write(|| {
                block.offset_lo.store(offset, Ordering::Relaxed);
            })
        };
        publish(5);
        assert_eq!(read_in_force(&slot, &block, || {}).map(|r| r.1), Some(5));
        assert!(read_in_force(&slot, &block, || publish(7)).is_none());
        assert_eq!(read_in_force(&slot, &block, || {}).map(|r| r.1), Some(7));
    }

    /// Items read with `read` failing for those in `stuck`: what was
    /// read, and how many reads it took.
    fn reads(items: usize, stuck: &[usize]) -> (Vec<usize>, u64) {
        let all: Vec<usize> = (0..items).collect();
        let mut calls = 0u64;
        let got = read_each(&all, |&i| {
            calls += 1;
            (!stuck.contains(&i)).then_some(i)
        });
        (got, calls)
    }

    /// A live writer's slot is read as soon as it is whole; slots stuck
    /// mid-update cost one item's `MAX_RETRIES` reads in all, then
    /// `AFTER_STUCK_RETRIES` each.
    #[test]
    fn slots_stuck_mid_update_cost_one_slots_wait() {
        assert_eq!(reads(5, &[]), (vec![0, 1, 2, 3, 4], 5));
        let (max, after) = (u64::from(MAX_RETRIES), u64::from(AFTER_STUCK_RETRIES));
        assert_eq!(reads(5, &[1]), (vec![0, 2, 3, 4], 4 + max));
        let every: Vec<usize> = (0..1000).collect();
        assert_eq!(reads(1000, &every), (vec![], max + 999 * after));
        assert_eq!(reads(6, &[0, 3]), (vec![1, 2, 4, 5], max + 4 + after));
    }

    /// A slot whole only at its second read, after one stuck: still read.
    #[test]
    fn a_slot_finished_a_little_later_is_read_after_one_stuck() {
        let mut seen = [0u32; 3];
        let got = read_each(&[0usize, 1, 2], |&i| {
            seen[i] += 1;
            (i != 0 && seen[i] >= 2).then_some(i)
        });
        assert_eq!(got, vec![1, 2]);
    }
}
