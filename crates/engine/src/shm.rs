//! The shared-memory publication's writer: creates the file under
//! `/dev/shm` (or wherever `shm_path` says), holds its writer lock, and
//! stores the table, the feed blocks and the counters that other
//! processes map read-only. The layout itself, which readers share, is
//! [`layout`](tickguard_reader::layout), re-exported here.

#![allow(unsafe_code)]

pub use tickguard_reader::layout::*;

use crate::state::region::{Owner, Region};
use crate::state::FeedKind;
use crate::state::{FeedStatus, SlotId, StateTable};
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use tickguard_reader::guard::Guard;

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
    /// The file a [`recreate`](Self::recreate)d publication replaces even
    /// though it no longer looks like one (truncated): (device, inode).
    predecessor: Option<(u64, u64)>,
    /// Built under a lock whose file it made itself, no writer's being at
    /// the path: a running publication of another live writer there is
    /// refused ([`live_writer`]).
    fresh_lock: bool,
    /// What it was built from, to build it again.
    spec: Spec,
    /// The file, to restore its length once truncated.
    file: File,
    /// Probes since the file's length was last read ([`probe`](Self::probe)).
    probes: std::sync::atomic::AtomicU32,
    /// The file was found shorter than the mapping: cut inside its last
    /// page, which does not fault.
    shrunk: AtomicBool,
    /// The path was found no longer naming the file (removed or renamed):
    /// readers opening it would find nothing, or something else.
    moved: AtomicBool,
    /// The start time this writer published in the header (ns).
    start_time_ns: u64,
    /// A heartbeat's clock was found before the start time ([`behind_start`](Self::behind_start)).
    behind_start: AtomicBool,
    /// The file's header was found no longer this writer's (its owner or
    /// root wrote over the file in place: an old copy, zeros).
    overwritten: AtomicBool,
    /// The heartbeat this writer last stored (CLOCK_REALTIME ns): a header
    /// holding another one was written over.
    last_heartbeat_ns: AtomicU64,
    /// (device, inode) the path gave once the file was renamed to it (as
    /// the path's own `lstat` reads them, to compare with the same call).
    path_id: std::sync::OnceLock<(u64, u64)>,
    /// The path is no longer watched ([`should_republish`](Self::should_republish)).
    unwatched: AtomicBool,
    // Field order: `views` points into `map` and is dropped first; `guard`
    // is unregistered before `map` is unmapped.
    views: Views,
    guard: Option<Guard>,
    _map: memmap2::MmapRaw,
    lock: Arc<WriterLock>,
}

/// What a writer whose publication's path moved does
/// ([`Publication::should_republish`]).
#[derive(Debug)]
pub enum Republish {
    /// Nothing: the path names its file again.
    No,
    /// Publish a new file at the path, under this lock.
    Under(Arc<WriterLock>),
    /// Another writer holds the path now (the refusal says which).
    Taken(io::Error),
}

/// What a publication is built from, besides its lock and the time.
#[derive(Debug, Clone)]
struct Spec {
    mode: u32,
    capacity: usize,
    feeds: Vec<FeedInfo>,
    heartbeat_period_ns: u64,
}

impl Drop for Publication {
    fn drop(&mut self) {
        if !self.published.load(Ordering::Relaxed) {
            let _ = std::fs::remove_file(&self.staging);
        } else if std::thread::panicking() {
            // Its owner (the receive thread) panicked and the process is
            // ending: readers answer `stale` now, not once the heartbeat
            // is `dead_after` old, as they must after a SIGKILL.
            self.close();
        }
    }
}

/// Heartbeat probes between two reads of the publication's length and of
/// what its path names (about 0.1 s at the default 1 ms heartbeat: one
/// `fstat` and one `lstat` per interval, off the per-datagram path).
pub const LENGTH_EVERY: u32 = 128;

/// An exclusive claim on a publication path for the writer's life: an
/// `flock` on `<path>.lock`, released when the process ends however it
/// ends. The file holds the holder's pid and is readable by its owner
/// only (mode 0600: no other user can open it, so none can hold its lock);
/// a writer that ends normally removes it (one killed leaves it, unlocked
/// and harmless).
#[derive(Debug)]
pub struct WriterLock {
    shm_path: PathBuf,
    lock_path: PathBuf,
    dev_ino: (u64, u64),
    /// Its file was made by this writer, none being at the path: no
    /// writer's lock proves the path free (one that ended removed it, or a
    /// cleanup did under a live one).
    created: bool,
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

/// Why a publication of mode `mode` (`[sidecar] shm_mode`) cannot be
/// made, if it cannot: a group or other write bit, which readers refuse,
/// or no owner read bit (its owner's `check` and `stat`, and the next
/// writer checking what it replaces, could not read it).
pub fn mode_problem(mode: u32) -> Option<String> {
    if mode & 0o022 != 0 {
        return Some(format!("[sidecar] shm_mode {mode:04o} lets group or others write the publication, which readers refuse: use at most 0644"));
    }
    (mode & 0o400 == 0).then(|| {
        format!("[sidecar] shm_mode {mode:04o} denies its owner reading the publication (its check and stat, and the next start, could not): use 0600, 0640 or 0644")
    })
}

/// The pid a held lock names: the file's text when it is one, else (the
/// holder caught between emptying the file and writing its pid) the
/// holders `/proc/locks` lists, else `unknown`.
fn holder_pid(text: &str, holders: &[(u32, Option<u32>)]) -> String {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text.to_string();
    }
    let pids: Vec<String> = holders.iter().map(|(pid, _)| pid.to_string()).collect();
    if pids.is_empty() {
        "unknown".into()
    } else {
        pids.join(", ")
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

/// Removes the staging files (`.NAME.PID.tmp`, regular, this user's) that
/// earlier writers of `path` left beside it; only the lock's holder calls
/// it, so none is in use. Returns how many went.
fn remove_leftovers(path: &Path) -> usize {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return 0;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    use std::os::unix::ffi::OsStrExt;
    // Compared as bytes: a name need not be UTF-8 (two names lossily alike
    // must not be taken for one another).
    let mut prefix = b".".to_vec();
    prefix.extend_from_slice(name.as_bytes());
    prefix.push(b'.');
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            let n = e.file_name();
            let pid = n
                .as_bytes()
                .strip_prefix(prefix.as_slice())
                .and_then(|r| r.strip_suffix(b".tmp"));
            pid.is_some_and(|p| !p.is_empty() && p.iter().all(u8::is_ascii_digit))
                && e.metadata()
                    .is_ok_and(|m| m.file_type().is_file() && m.uid() == euid())
                && std::fs::remove_file(e.path()).is_ok()
        })
        .count()
}

/// The refusal of a lock file of `meta` (`shown`) held by a process of
/// the user owning it (a writer of that user), if one holds it.
fn held_by_its_owner(
    meta: &std::fs::Metadata,
    shown: &impl std::fmt::Display,
) -> Option<io::Error> {
    let holders = crate::sys::lock_holders((meta.dev(), meta.ino())).unwrap_or_default();
    // A holder whose user cannot be read (`/proc` mounted with `hidepid`,
    // another pid namespace) may be that writer too.
    let &(pid, uid) = holders
        .iter()
        .find(|&&(_, uid)| uid.is_none_or(|u| u == meta.uid()))?;
    let uid = uid.map_or("unknown".to_string(), |u| u.to_string());
    Some(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!("in use by another writer, pid {pid} of uid {uid} (it holds {shown}): one writer per path"),
    ))
}

/// Mode of a lock file this writer creates.
const LOCK_MODE: u32 = 0o600;

/// True for what a writer leaves in its lock file: nothing yet, or its
/// pid and a newline.
fn is_lock_text(text: &[u8]) -> bool {
    match text {
        [] => true,
        [digits @ .., b'\n'] => !digits.is_empty() && digits.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

impl WriterLock {
    /// Takes the lock of `shm_path`, or says which pid holds it. The lock
    /// file is created by this writer (mode 0600) or, left by an earlier
    /// one, must be a regular file of this user with one link holding
    /// nothing but a pid: a symbolic link, a hard link (to a publication,
    /// say), another user's file or any other content is refused in one
    /// line and left as it is. A lock file held only by other users'
    /// processes (one that opened a lock file left readable by an older
    /// writer) is not a writer's: it is removed and the lock retaken on a
    /// new file.
    pub fn acquire(shm_path: &Path) -> io::Result<WriterLock> {
        let path = lock_path(shm_path);
        let shown = path.display();
        let fail = |e: io::Error| io::Error::new(e.kind(), format!("lock {shown}: {e}"));
        // A writer that ends removes its lock file while still holding it: a
        // lock taken on a file no longer at the path is retaken on the new one.
        loop {
            let (file, created) = match crate::sys::file::create_new(&path, LOCK_MODE) {
                Ok(f) => (f, true),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    match crate::sys::file::open_write(&path) {
                        Ok(f) => (f, false),
                        Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                        // Another user's, held by its owner: a writer of
                        // that user (this one not root).
                        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                            let meta = std::fs::symlink_metadata(&path).ok();
                            if let Some(held) =
                                meta.as_ref().and_then(|m| held_by_its_owner(m, &shown))
                            {
                                return Err(held);
                            }
                            // Left by a writer of another user (root's,
                            // killed), or put there: named with its owner
                            // and mode, left as it is.
                            return Err(match meta {
                                Some(m) => refuse(format!(
                                    "lock {shown} cannot be opened for writing by this user \
                                     (uid {}; owner uid {}, mode {:o}) and no process of its \
                                     owner holds it: refusing it (remove it)",
                                    euid(),
                                    m.uid(),
                                    m.mode() & 0o7777
                                )),
                                None => fail(e),
                            });
                        }
                        Err(e) if crate::sys::file::is_symlink_error(&e) => {
                            return Err(refuse(format!(
                                "lock {shown} is a symbolic link: refusing it (remove it)"
                            )))
                        }
                        Err(e) => return Err(fail(e)),
                    }
                }
                Err(e) => return Err(fail(e)),
            };
            let meta = file.metadata().map_err(fail)?;
            if !meta.file_type().is_file() || meta.uid() != euid() || meta.nlink() != 1 {
                // Held by a live writer (of another user: one started as
                // root beside the service, say), it is that writer's: it
                // must not be removed.
                if let Some(e) = held_by_its_owner(&meta, &shown) {
                    return Err(e);
                }
                return Err(refuse(format!(
                    "lock {shown} is not a regular file of this user with one link \
                     (uid {}; owner uid {}, {} links): refusing it (remove it)",
                    euid(),
                    meta.uid(),
                    meta.nlink()
                )));
            }
            let dev_ino = (meta.dev(), meta.ino());
            if !try_lock_exclusive(&file).map_err(fail)? {
                let holders = crate::sys::lock_holders(dev_ino).unwrap_or_default();
                if !holders.is_empty()
                    && holders
                        .iter()
                        .all(|&(_, uid)| uid.is_some_and(|u| u != euid()))
                {
                    // No writer of this user holds it: another user opened
                    // it to block this path. Replace it.
                    if std::fs::symlink_metadata(&path).is_ok_and(|m| (m.dev(), m.ino()) == dev_ino)
                    {
                        std::fs::remove_file(&path).map_err(fail)?;
                    }
                    tracing::warn!(
                        lock = %shown,
                        holders = ?holders,
                        "lock file held by other users' processes only: replaced"
                    );
                    continue;
                }
                let mut text = String::new();
                let _ = (&file).take(32).read_to_string(&mut text);
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!(
                        "in use by another writer, pid {} (it holds {shown}): one writer per path",
                        holder_pid(text.trim(), &holders),
                    ),
                ));
            }
            let here = std::fs::symlink_metadata(&path).ok();
            if here.map(|m| (m.dev(), m.ino())) != Some(dev_ino) {
                continue;
            }
            if !created {
                // Rewritten only if it is what a writer left: a pid.
                let mut text = Vec::new();
                (&file).take(64).read_to_end(&mut text).map_err(fail)?;
                if meta.len() > 32 || !is_lock_text(&text) {
                    return Err(refuse(format!(
                        "lock {shown} holds something other than a writer's pid ({} bytes): refusing it (remove it)",
                        meta.len()
                    )));
                }
            }
            // Exactly 0600, made or found: the umask may have narrowed a
            // file made here (0400 under umask 0277, which the next start
            // after a kill could not open for writing).
            file.set_permissions(std::fs::Permissions::from_mode(LOCK_MODE))
                .map_err(fail)?;
            file.set_len(0).map_err(fail)?;
            file.write_all_at(format!("{}\n", std::process::id()).as_bytes(), 0)
                .map_err(fail)?;
            return Ok(WriterLock {
                shm_path: shm_path.to_path_buf(),
                lock_path: path,
                dev_ino,
                created,
                _file: file,
            });
        }
    }

    /// The publication path this lock guards.
    pub fn shm_path(&self) -> &Path {
        &self.shm_path
    }

    /// Whether its lock file is still the one at the lock path (not
    /// removed, nor replaced by another writer's).
    fn at_its_path(&self) -> bool {
        std::fs::symlink_metadata(&self.lock_path).is_ok_and(|m| (m.dev(), m.ino()) == self.dev_ino)
    }
}

/// Errors unless a file at `path` may be replaced: nothing there, the
/// `predecessor` file (device, inode), or a tickguard publication (magic)
/// this user may replace; with the lock file `fresh` (made by this writer),
/// not one a live writer is running ([`live_writer`]).
fn check_replaceable(path: &Path, predecessor: Option<(u64, u64)>, fresh: bool) -> io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if predecessor == Some((meta.dev(), meta.ino())) {
        return Ok(());
    }
    let not_ours = |what: &str| {
        refuse(format!(
            "the existing file {what}: refusing to replace it (remove it, or choose another [sidecar] shm_path)"
        ))
    };
    if !meta.file_type().is_file() {
        return Err(not_ours("is not a regular file"));
    }
    if meta.uid() != euid() && euid() != 0 {
        return Err(not_ours(&format!(
            "is owned by uid {}, not this user (uid {})",
            meta.uid(),
            euid()
        )));
    }
    let mut magic = [0u8; 8];
    let read = crate::sys::file::open_read(path).and_then(|f| f.read_exact_at(&mut magic, 0));
    match read {
        // Unreadable is not proof of another kind of file.
        Err(e) if e.kind() != io::ErrorKind::UnexpectedEof => {
            Err(not_ours(&format!("cannot be read ({e})")))
        }
        _ if u64::from_le_bytes(magic) != MAGIC => Err(not_ours(
            "is not a tickguard publication (no TKGUARD1 magic)",
        )),
        _ => match live_writer(path).filter(|_| fresh) {
            // Its lock file removed (a cleanup of `*.lock`), the lock alone
            // would let a second writer take the path from a live one.
            Some(pid) => Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!(
                    "in use by another writer, pid {pid} (its publication {} is running, \
                     though its lock file is gone): one writer per path",
                    path.display()
                ),
            )),
            None => Ok(()),
        },
    }
}

/// How recent a publication's heartbeat is for its writer to count as
/// alive when its lock file is gone, ns (wall clock): far longer than any
/// heartbeat period, so that only a writer dead (or stopped) that long
/// has its path taken.
const LIVE_HEARTBEAT_NS: u64 = 10_000_000_000;

/// The pid of the writer of the publication at `path`, if it is another
/// process of this machine still running it: its header says running,
/// the process exists (a process, not a thread of one; not a zombie) and
/// its heartbeat is less than [`LIVE_HEARTBEAT_NS`] old (or ahead). A
/// writer killed leaves its header running, and its pid may be reused:
/// its heartbeat has aged. (A writer in another pid namespace is not
/// seen, or seen as whichever process has its number here.)
fn live_writer(path: &Path) -> Option<u64> {
    use std::mem::offset_of;
    use tickguard_reader::layout::Header;
    let file = crate::sys::file::open_read(path).ok()?;
    let word = |at: usize| {
        let mut b = [0u8; 8];
        file.read_exact_at(&mut b, at as u64).ok()?;
        Some(u64::from_le_bytes(b))
    };
    let state = word(offset_of!(Header, state))?;
    let pid = word(offset_of!(Header, writer_pid))?;
    let beat = word(offset_of!(Header, heartbeat_ns))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let alive = state == STATE_RUNNING
        && pid != 0
        && pid != u64::from(std::process::id())
        && now.saturating_sub(beat) < LIVE_HEARTBEAT_NS
        && process_running(pid);
    alive.then_some(pid)
}

/// Whether `pid` is a running process of this pid namespace: its
/// `/proc/<pid>/status` names it its own thread group (a thread's id
/// resolves there too) and not a zombie (killed, not yet reaped).
fn process_running(pid: u64) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    field("Tgid:") == Some(pid.to_string().as_str())
        && !field("State:").is_some_and(|s| s.starts_with('Z') || s.starts_with('X'))
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
    /// The name of the protocol the feed speaks (`Protocol::as_str`), as
    /// word 72 holds it.
    pub protocol: &'static str,
    /// Its protocol's [`traits`] bits.
    pub traits: u64,
    /// Its counters, as the publication describes them (its protocol's:
    /// `FeedInfo::new` fills them in).
    pub counters: Vec<Descriptor>,
}

/// Publishes `feed`'s clock offset with what `publish` writes (its slots
/// and its feed status): a falling offset before them, a rising one after.
///
/// A source age is `now − source − offset`, and a heartbeat's part of the
/// watermark is its arrival less the offset in force
/// ([`crate::clock::heartbeat_watermark`]). Falling first, the new offset
/// meets the old watermark, whose heartbeat part was taken at the higher
/// offset; rising last, the old offset meets the new slots and watermark.
/// Either way every state a reader can read whole in between (the reader
/// checks the slot's and the offset's stamps again after the status) is at
/// least as old at the source as the one the writes end in: a check caught
/// between them answers `stale_at_source` rather than a fresher `ok`.
/// Without a publication, `publish` alone.
pub fn publish_around_offset<R>(
    pb: Option<&Publication>,
    feed: u16,
    offset: i128,
    publish: impl FnOnce() -> R,
) -> R {
    let Some(pb) = pb else {
        return publish();
    };
    // Read once; unchanged (or no such feed), nothing to write.
    let old = match pb.published_offset(feed) {
        Some(o) if o != offset => o,
        _ => return publish(),
    };
    let rises = offset > old;
    if !rises {
        pb.write_offset(feed, offset);
    }
    let r = publish();
    if rises {
        pb.write_offset(feed, offset);
    }
    r
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
        let spec = Spec {
            mode,
            capacity,
            feeds: feeds.to_vec(),
            heartbeat_period_ns,
        };
        let fresh = lock.created;
        Publication::build_with(Arc::new(lock), spec, now_ns, None, fresh)
    }

    /// [`build`](Self::build) from a spec; a file at the path that is
    /// `predecessor` may be replaced whatever it holds.
    fn build_with(
        lock: Arc<WriterLock>,
        spec: Spec,
        now_ns: u64,
        predecessor: Option<(u64, u64)>,
        fresh_lock: bool,
    ) -> io::Result<Publication> {
        let (mode, capacity, feeds) = (spec.mode, spec.capacity, &spec.feeds[..]);
        let heartbeat_period_ns = spec.heartbeat_period_ns;
        let shape = Shape::new(feeds.len(), capacity).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "shared memory size overflows")
        })?;
        if let Some(e) = mode_problem(mode) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, e));
        }
        let path = lock.shm_path().to_path_buf();
        check_replaceable(&path, predecessor, fresh_lock)?;
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
        // The lock is ours: every staging file of this path is an earlier
        // writer's, killed before it renamed it (each as large as a
        // publication, on a tmpfs that is memory).
        remove_leftovers(&path);
        // Named: a file left there (another user's, say) blocks every
        // start and recreation of this writer until it is removed.
        let file = crate::sys::file::create_new(&staging, mode).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("creating its staging file {}: {e}", staging.display()),
            )
        })?;
        let (file, map, dev_ino) = match Publication::reserve_and_map(file, shape, mode) {
            Ok(f) => f,
            Err(e) => {
                let _ = std::fs::remove_file(&staging);
                return Err(e);
            }
        };
        // Raw: its pointers are the mapping's own, never taken through a
        // reference to its bytes (the views store through them, atomics,
        // which a pointer from a shared slice may not; and a slice made
        // for every heartbeat's probe would reborrow what the views use).
        let map = memmap2::MmapRaw::from(map);
        // SAFETY: the mapping is page aligned, `file_len` long, and owned by
        // the returned Publication next to the views.
        let views = unsafe { Views::new(map.as_mut_ptr().cast_const(), shape) };
        let p = Publication {
            path,
            staging,
            published: AtomicBool::new(false),
            dev_ino,
            predecessor,
            fresh_lock,
            file,
            probes: std::sync::atomic::AtomicU32::new(0),
            shrunk: AtomicBool::new(false),
            moved: AtomicBool::new(false),
            overwritten: AtomicBool::new(false),
            last_heartbeat_ns: AtomicU64::new(now_ns),
            start_time_ns: now_ns,
            behind_start: AtomicBool::new(false),
            path_id: std::sync::OnceLock::new(),
            unwatched: AtomicBool::new(false),
            views,
            // SAFETY: `map` is one live mapping of `map.len()` bytes, and
            // the field order drops the guard before `_map`.
            guard: unsafe { Guard::register(map.as_ptr(), map.len(), true) },
            _map: map,
            lock,
            spec: spec.clone(),
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
        for (i, (block, f)) in p.views.feeds().iter().zip(feeds).enumerate() {
            p.describe(i, &f.counters)?;
            block.traits.store(f.traits, Ordering::Relaxed);
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
                .protocol
                .store(protocol_word(f.protocol), Ordering::Relaxed);
            for (w, l) in block.lines.iter().zip(&f.lines) {
                w.store(pack_line(*l), Ordering::Relaxed);
            }
        }
        Ok(p)
    }

    /// Stores feed `feed`'s counter descriptors in its table (before the
    /// file is ready: relaxed, published by the version's Release).
    fn describe(&self, feed: usize, descriptors: &[Descriptor]) -> io::Result<()> {
        let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidInput, what);
        if descriptors.len() > MAX_DESCRIPTORS {
            return Err(invalid(format!(
                "{} counter descriptors for feed {feed}, room for {MAX_DESCRIPTORS}",
                descriptors.len()
            )));
        }
        let table = self.views.descriptors(feed);
        for (slot, d) in table.iter().zip(descriptors) {
            let words = d
                .encode()
                .ok_or_else(|| invalid(format!("counter descriptor {d:?} does not fit")))?;
            slot.store(&words);
        }
        let block = &self.views.feeds()[feed];
        let at = self.views.shape().descriptors_offset + feed * DESCRIPTOR_TABLE_LEN;
        block.descriptors_offset.store(at as u64, Ordering::Relaxed);
        block
            .descriptor_count
            .store(descriptors.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Sets the staged file's mode exactly, reserves its blocks and maps it.
    fn reserve_and_map(
        file: File,
        shape: Shape,
        mode: u32,
    ) -> io::Result<(File, memmap2::MmapMut, (u64, u64))> {
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
        // reserved; this writer never truncates it, and a truncation by its
        // owner or root faults into `guard`'s zero pages once the sidecar
        // installed it (see `recreate`).
        // Mapped at the layout's length, not the file's as it is now: a file
        // cut meanwhile (its owner or root) faults into the guard then,
        // never leaves the views reaching past the mapping.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .len(shape.file_len)
                .map_mut(&file)?
        };
        Ok((file, map, (meta.dev(), meta.ino())))
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
        check_replaceable(&self.path, self.predecessor, self.fresh_lock)?;
        std::fs::rename(&self.staging, &self.path)?;
        self.published.store(true, Ordering::Relaxed);
        // Unreadable just after the rename (hardly): the file's own.
        let here = std::fs::symlink_metadata(&self.path).map(|m| (m.dev(), m.ino()));
        let _ = self.path_id.set(here.unwrap_or(self.dev_ino));
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

    /// The writer is alive at `now_ns` (CLOCK_REALTIME ns). First reads
    /// back the heartbeat it stored last: another value there means the
    /// file was written over in place since (an earlier copy of this very
    /// file passes every other check of [`lost`](Self::lost), while its
    /// quiet symbols would show the copy's prices under this writer's
    /// fresh heartbeat). Such a file is never given the heartbeat: until
    /// the caller closes it, readers judge the copy by its own, old one.
    #[inline]
    pub fn heartbeat(&self, now_ns: u64) {
        if now_ns.saturating_add(tickguard_reader::verdict::MAX_AHEAD_NS) < self.start_time_ns {
            self.behind_start.store(true, Ordering::Relaxed);
        }
        let word = &self.views.header().heartbeat_ns;
        // Relaxed: a timestamp on its own; readers compare it with their
        // clock, and only this writer (or a forger) stores it.
        let found = word.load(Ordering::Relaxed);
        if found != self.last_heartbeat_ns.load(Ordering::Relaxed) && !self.truncated() {
            // (Zeros the guard put in place of a cut file are a
            // truncation, told as such.)
            self.overwritten.store(true, Ordering::Relaxed);
        }
        if self.overwritten() {
            return;
        }
        word.store(now_ns, Ordering::Relaxed);
        self.last_heartbeat_ns.store(now_ns, Ordering::Relaxed);
    }

    /// True once the clock was found stepped back to before the start
    /// time this file publishes (by more than readers allow,
    /// [`MAX_AHEAD_NS`](tickguard_reader::verdict::MAX_AHEAD_NS)): readers
    /// take a start time ahead of their clock for a forged file and answer
    /// `stale` until the clock catches up with it, however alive the
    /// writer. [`recreate`](Self::recreate) it, with a start time of now.
    pub fn behind_start(&self) -> bool {
        self.behind_start.load(Ordering::Relaxed)
    }

    /// Reads the mapping's last byte: a file truncated by a page or more
    /// has lost its last page, so this faults into the guard's zero pages
    /// (see [`lost`](Self::lost)) even when nothing else touched a lost
    /// page. Once per heartbeat; every [`LENGTH_EVERY`] probes it also reads
    /// the file's length, which finds a cut inside the last page (no fault:
    /// the writer would carry on, but readers refuse the short file).
    #[inline]
    pub fn probe(&self) {
        let len = self._map.len();
        // SAFETY: the mapping is `len` > 0 bytes long and lives as long as
        // `self`; a byte of shared memory is read as an atomic.
        let last = unsafe { &*self._map.as_ptr().add(len - 1).cast::<AtomicU8>() };
        // Relaxed: only the access matters.
        last.load(Ordering::Relaxed);
        if self
            .probes
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(LENGTH_EVERY)
        {
            self.check_length();
        }
    }

    #[cold]
    fn check_length(&self) {
        if self
            .file
            .metadata()
            .is_ok_and(|m| m.len() < self._map.len() as u64)
        {
            self.shrunk.store(true, Ordering::Relaxed);
        }
        if !self.unwatched.load(Ordering::Relaxed) && self.path_moved() {
            self.moved.store(true, Ordering::Relaxed);
        }
        // A mapping the guard turned to zeros reads no header: that is a
        // truncation, told as such.
        if !self.truncated() && !self.header_is_ours() {
            self.overwritten.store(true, Ordering::Relaxed);
        }
    }

    /// Whether the mapped header still says what this writer wrote: its
    /// magic, layout, running state, identity (pid, start time) and shape.
    /// A file written over in place (`cp` of an older copy, whose
    /// directory names other slots; zeros) keeps its inode and length, so
    /// neither the length nor the path shows it, while readers opening it
    /// would take the copy's directory for this writer's.
    fn header_is_ours(&self) -> bool {
        let h = self.views.header();
        let shape = self.views.shape();
        // Relaxed: words only this writer stores (or a forger).
        let word = |w: &std::sync::atomic::AtomicU64| w.load(Ordering::Relaxed);
        let version = word(&h.version);
        word(&h.magic) == MAGIC
            && (version == 0 || version == LAYOUT_VERSION)
            && word(&h.state) == STATE_RUNNING
            && word(&h.writer_pid) == u64::from(std::process::id())
            && word(&h.start_time_ns) == self.start_time_ns
            && word(&h.capacity) == shape.capacity as u64
            && word(&h.feed_count) == shape.feeds as u64
            && word(&h.file_len) == shape.file_len as u64
    }

    /// Whether the path, published, now names another file or none. An
    /// error other than the name gone (a directory made unreadable, say)
    /// proves nothing.
    fn path_moved(&self) -> bool {
        let Some(&ours) = self.path_id.get() else {
            return false;
        };
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) => (m.dev(), m.ino()) != ours,
            Err(e) => e.kind() == io::ErrorKind::NotFound,
        }
    }

    /// True once the file was found truncated (by its owner or root): by a
    /// page or more (the guard turned the lost pages to zeros; without the
    /// guard, [`tickguard_reader::guard::install`], the process dies of
    /// SIGBUS instead), or inside its last page (its length read back
    /// short); or its path no longer naming it ([`moved`](Self::moved));
    /// or its header no longer this writer's
    /// ([`overwritten`](Self::overwritten)); or the clock stepped back to
    /// before its start time ([`behind_start`](Self::behind_start)).
    /// [`recreate`](Self::recreate) it.
    #[inline]
    pub fn lost(&self) -> bool {
        self.faulted()
            || self.shrunk.load(Ordering::Relaxed)
            || self.moved.load(Ordering::Relaxed)
            || self.overwritten()
            || self.behind_start()
    }

    /// True once the file was cut by a page or more under the mapping: the
    /// guard turned it to zeros, and [`close`](Self::close) writes through
    /// the descriptor (a syscall).
    pub fn faulted(&self) -> bool {
        self.guard.as_ref().is_some_and(Guard::faulted)
    }

    /// True once the file was found truncated: a fault turned the mapping
    /// to zeros, or its length read back short.
    pub fn truncated(&self) -> bool {
        self.faulted() || self.shrunk.load(Ordering::Relaxed)
    }

    /// True once the file's header was found no longer this writer's
    /// (its heartbeat at the next [`heartbeat`](Self::heartbeat), the rest
    /// every [`LENGTH_EVERY`] probes):
    /// [`recreate`](Self::recreate) it.
    pub fn overwritten(&self) -> bool {
        self.overwritten.load(Ordering::Relaxed)
    }

    /// True once its path was found no longer naming the file (removed or
    /// renamed; found as [`lost`](Self::lost) is, every [`LENGTH_EVERY`]
    /// probes): [`recreate`](Self::recreate) it, so that readers opening
    /// the path find a publication again.
    pub fn moved(&self) -> bool {
        self.moved.load(Ordering::Relaxed)
    }

    /// True once [`should_republish`](Self::should_republish) found the
    /// lock file gone too: the path is no longer watched nor published.
    pub fn unwatched(&self) -> bool {
        self.unwatched.load(Ordering::Relaxed)
    }

    /// After [`moved`](Self::moved), read again now: what to do.
    /// [`Republish::No`], the mark cleared, if the path names this file
    /// again (moved back). If this writer's lock file is gone from its path
    /// too (a cleanup removed both), the lock is taken again on a new
    /// file: [`Republish::Under`] it if no one holds it, or, when another
    /// writer took the path meanwhile, [`Republish::Taken`] and the path
    /// is no longer watched (republishing would take the path from that
    /// writer, and it from this one, in turn): this one goes on serving
    /// only the readers that mapped its file. An error taking the lock
    /// otherwise is returned, to try again later.
    pub fn should_republish(&self) -> io::Result<Republish> {
        if !self.path_moved() {
            self.moved.store(false, Ordering::Relaxed);
            return Ok(Republish::No);
        }
        if self.lock.at_its_path() {
            return Ok(Republish::Under(self.lock.clone()));
        }
        match WriterLock::acquire(&self.lock.shm_path) {
            Ok(lock) => Ok(Republish::Under(Arc::new(lock))),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                self.give_up_path();
                Ok(Republish::Taken(e))
            }
            Err(e) => Err(e),
        }
    }

    /// Another writer holds the path (its lock, or its running
    /// publication there): it is no longer watched nor published again,
    /// as [`Republish::Taken`] says.
    pub fn give_up_path(&self) {
        self.unwatched.store(true, Ordering::Relaxed);
        self.moved.store(false, Ordering::Relaxed);
    }

    /// This writer's lock.
    pub fn lock(&self) -> Arc<WriterLock> {
        self.lock.clone()
    }

    /// After [`lost`](Self::lost): gives the truncated file its length back
    /// (zeros: readers still mapping it answer `stale` instead of faulting),
    /// then builds a new publication as this one was built, under `lock`
    /// (its own, or one taken again: [`should_republish`](Self::should_republish)),
    /// empty, and publishes it in place of the old file. Its slots,
    /// directory and counters start over, but for what `carry` writes into
    /// it before it is published (the counts its writer carries on: read
    /// as zeros first, they would pass for a restart).
    pub fn recreate(
        &self,
        now_ns: u64,
        lock: Arc<WriterLock>,
        carry: impl FnOnce(&Publication),
    ) -> io::Result<Publication> {
        // Best effort: without the room, readers still mapping the old file
        // fault on it (into their own guard, or die) until they re-open.
        let _ = crate::sys::file::reserve(&self.file, self.views.shape().file_len as u64);
        // A lock taken again on a file of its own (the old one removed):
        // nothing proves the path free of another writer.
        let fresh = lock.created && !Arc::ptr_eq(&lock, &self.lock);
        let p =
            Publication::build_with(lock, self.spec.clone(), now_ns, Some(self.dev_ino), fresh)?;
        carry(&p);
        p.publish()?;
        Ok(p)
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
        if self.faulted() {
            // The mapping is the guard's zero pages now: the store above
            // reached none of the file. Written through the descriptor, the
            // word reaches the page readers still map, when its page is
            // left (a cut past the header): they answer `stale` at once
            // instead of reading frozen slots until the heartbeat ages. A
            // file cut shorter than the word is not lengthened.
            let at = std::mem::offset_of!(Header, state) as u64;
            if self.file.metadata().is_ok_and(|m| m.len() >= at + 8) {
                let _ = self.file.write_all_at(&STATE_CLOSED.to_le_bytes(), at);
            }
        }
    }

    /// The writer start time its header holds (ns since the Unix epoch):
    /// with the pid, what tells this writer's file from another's.
    pub fn start_time_ns(&self) -> u64 {
        self.start_time_ns
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends (feed, key, name) → slot to the directory as entry `index`
    /// (a name longer than [`NAME_LEN`] is cut there), marked
    /// [`DIR_MOVABLE`](tickguard_reader::layout::DIR_MOVABLE) if `movable`.
    #[inline]
    fn publish_entry(
        &self,
        index: usize,
        feed: u16,
        key: u64,
        name: &[u8],
        slot: u32,
        movable: bool,
    ) {
        let Some(e) = self.views.directory().get(index) else {
            return;
        };
        let name = name_words(&name[..name.len().min(NAME_LEN)]).unwrap_or_default();
        // Relaxed: published by the Release store of directory_len below.
        e.key.store(key, Ordering::Relaxed);
        let movable = if movable {
            tickguard_reader::layout::DIR_MOVABLE
        } else {
            0
        };
        e.feed_slot.store(
            movable | (feed as u64) << 32 | slot as u64,
            Ordering::Relaxed,
        );
        for (w, v) in e.name.iter().zip(name) {
            w.store(v, Ordering::Relaxed);
        }
        // Release: pairs with the reader's Acquire load of directory_len.
        self.views
            .header()
            .directory_len
            .store(index as u64 + 1, Ordering::Release);
    }

    /// Publishes a feed's clock offset (seqlock over two words); an
    /// unchanged one costs a compare, not a write.
    #[inline]
    pub fn publish_offset(&self, feed: u16, offset: i128) {
        if self.published_offset(feed).is_some_and(|o| o != offset) {
            self.write_offset(feed, offset);
        }
    }

    /// Writes `feed`'s clock offset, changed or not.
    #[inline]
    fn write_offset(&self, feed: u16, offset: i128) {
        let Some(b) = self.views.feeds().get(feed as usize) else {
            return;
        };
        let (lo, hi) = (offset as u64, (offset >> 64) as u64);
        b.offset_stamp.write(|| {
            // Relaxed: published by the Release store of the stamp in `SeqLock::write`.
            b.offset_lo.store(lo, Ordering::Relaxed);
            b.offset_hi.store(hi, Ordering::Relaxed);
        });
    }

    /// The offset last published for `feed` (0 before any). Writer thread
    /// only.
    fn published_offset(&self, feed: u16) -> Option<i128> {
        let b = self.views.feeds().get(feed as usize)?;
        // Relaxed: the writer reads back its own stores.
        let (lo, hi) = (
            b.offset_lo.load(Ordering::Relaxed),
            b.offset_hi.load(Ordering::Relaxed),
        );
        Some(((hi as i128) << 64) | lo as i128)
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
    fn enter(&self, index: usize, feed: u16, key: u64, name: &[u8], slot: SlotId, movable: bool) {
        self.publish_entry(index, feed, key, name, slot, movable);
    }
}

/// A table's memory in the publication: its slots, and the status words of
/// each feed block.
impl From<Arc<Publication>> for Region {
    fn from(p: Arc<Publication>) -> Region {
        let views = &p.views;
        let (slots, feeds) = (views.slots(), views.feeds());
        // From the whole slice of blocks, not a reference to the first
        // block's field: the pointer may then reach every block's words.
        let status = match feeds.is_empty() {
            true => NonNull::dangling(),
            // SAFETY: the slice is not empty: its first block is in bounds,
            // and `addr_of!` takes its field's address without a reference.
            false => unsafe {
                let first = feeds.as_ptr();
                NonNull::new_unchecked(std::ptr::addr_of!((*first).status).cast_mut())
            },
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A refused second writer names the holder's pid even when it caught
    /// the holder between emptying the lock file and writing its pid.
    #[test]
    fn a_held_lock_names_its_holder_whatever_the_file_holds() {
        assert_eq!(holder_pid("4242", &[(7, Some(0))]), "4242");
        assert_eq!(holder_pid("", &[(4242, Some(0))]), "4242");
        assert_eq!(holder_pid("42x", &[(1, None), (2, None)]), "1, 2");
        assert_eq!(holder_pid("", &[]), "unknown");
    }

    /// A feed block's description with a few counters of its own (what a
    /// protocol declares is the registry's business, tested there).
    fn feed_info(name: &str, kind: FeedKind, lines: Vec<std::net::SocketAddrV4>) -> FeedInfo {
        FeedInfo {
            name: name.into(),
            kind,
            lines,
            protocol: "test",
            traits: 0,
            counters: vec![
                Descriptor::counter(counter::PACKETS, "packets"),
                Descriptor::counter(counter::GAPS_OPEN, "gaps_open"),
            ],
        }
    }

    /// The feed block holds name, kind, protocol, traits, lines and where
    /// its descriptors are; 104 is the counters stamp, even at rest; the
    /// feed extension is zero until a status or an extension counter is
    /// written.
    /// Staging files earlier writers of the path left (killed before the
    /// rename) are removed by the next writer; others are not.
    /// Names are compared as bytes: another path whose name differs only
    /// in bytes that are not UTF-8 keeps its staging file.
    #[test]
    fn leftovers_are_matched_by_their_bytes() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let os = |b: &[u8]| std::ffi::OsStr::from_bytes(b).to_os_string();
        let path = dir.path().join(os(b"tg\xff"));
        let other = dir.path().join(os(b".tg\xfe.4000000.tmp"));
        let mine = dir.path().join(os(b".tg\xff.4000000.tmp"));
        std::fs::write(&other, b"").unwrap();
        std::fs::write(&mine, b"").unwrap();
        assert_eq!(remove_leftovers(&path), 1);
        assert!(other.exists() && !mine.exists());
    }

    #[test]
    fn a_writer_removes_the_staging_files_earlier_ones_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tickguard");
        let left = dir.path().join(".tickguard.4000000.tmp");
        let kept = [
            ".tickguard.x.tmp",
            ".other.4000000.tmp",
            "tickguard.4000000.tmp",
        ];
        std::fs::write(&left, [0u8; 64]).unwrap();
        for k in kept {
            std::fs::write(dir.path().join(k), b"").unwrap();
        }
        let p = one_feed(&path);
        assert!(!left.exists());
        for k in kept {
            assert!(dir.path().join(k).exists(), "{k}");
        }
        drop(p);
    }

    /// Something at this writer's staging name that is not a staging file
    /// (a link another user left, say) is not removed: the start fails
    /// naming it, and nothing is published.
    #[test]
    fn a_staging_name_taken_fails_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tickguard");
        let taken = dir
            .path()
            .join(format!(".tickguard.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink("/nonexistent", &taken).unwrap();
        let line: std::net::SocketAddrV4 = "239.1.1.1:30001".parse().unwrap();
        let feeds = [feed_info("lp1", FeedKind::Delta, vec![line])];
        let e = Publication::create(&path, 0o600, 16, &feeds, 1, 1_000_000).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
        let text = e.to_string();
        assert!(
            text.contains(&format!("creating its staging file {}", taken.display())),
            "{text}"
        );
        assert!(!path.exists());
    }

    /// A panic unwinding through the publication's owner closes it (the
    /// process ends with it); a drop without one (a publication replaced
    /// by a new file at the path) leaves it as it was.
    #[test]
    fn a_panic_unwinding_through_the_owner_closes_the_publication() {
        let dir = tempfile::tempdir().unwrap();
        let state = |p: &Path| {
            let mut word = [0u8; 8];
            let at = std::mem::offset_of!(Header, state) as u64;
            std::fs::File::open(p)
                .unwrap()
                .read_exact_at(&mut word, at)
                .unwrap();
            u64::from_le_bytes(word)
        };
        let kept = dir.path().join("kept");
        drop(one_feed(&kept));
        assert_eq!(state(&kept), STATE_RUNNING);
        let path = dir.path().join("tickguard");
        let p = one_feed(&path);
        assert_eq!(state(&path), STATE_RUNNING);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let _owned = p;
            panic!("the receive thread's bug");
        }));
        assert!(caught.is_err());
        assert_eq!(state(&path), STATE_CLOSED);
    }

    /// A publication at `path` of one delta feed, lp1, on 239.1.1.1:30001.
    fn one_feed(path: &Path) -> Publication {
        let line: std::net::SocketAddrV4 = "239.1.1.1:30001".parse().unwrap();
        let feeds = [feed_info("lp1", FeedKind::Delta, vec![line])];
        Publication::create(path, 0o600, 16, &feeds, 1, 1_000_000).unwrap()
    }

    /// A feed renaming without end (forged definitions moving a Symbol
    /// from name to name) takes the directory's names no other feed was
    /// promised, never those another feed reserves: that feed's
    /// instruments still get their Symbols; a feed reserving none shares
    /// what is left.
    #[test]
    fn a_feeds_renames_leave_another_feed_its_reserved_names() {
        let dir = tempfile::tempdir().unwrap();
        let line = |port| vec![format!("239.1.1.1:{port}").parse().unwrap()];
        let feeds = [
            feed_info("a", FeedKind::Delta, line(30001)),
            feed_info("b", FeedKind::Delta, line(30002)),
        ];
        let p =
            Publication::create(&dir.path().join("tg"), 0o600, 4, &feeds, 1, 1_000_000).unwrap();
        let mut table = StateTable::shared(Arc::new(p));
        table.reserve(&[2, 2]);
        table.reserve_names(&[2, 2]);
        let th = crate::verdict::Thresholds {
            stale_ns: 1,
            source_ns: 1,
        };
        let key = |s: &str| crate::symbol::Symbol::parse(s).unwrap();
        let a = table.insert_named(0, key("A1"), b"#1", th).unwrap();
        let renamed = (0..100)
            .take_while(|n| table.alias(0, key("A1"), format!("X{n}").as_bytes(), a, None))
            .count();
        // Its own 2, and none of b's: 4 slots × 2 names, 1 entered, 3
        // kept for the slots not handed out, b's 2.
        assert_eq!(renamed, 2);
        assert!(!table.withdraw(0, b"X0", None));
        let b = table.insert_named(1, key("B1"), b"#2", th).unwrap();
        assert!(table.alias(1, key("B1"), b"ESZ6", b, None));
        assert!(table.withdraw(1, b"ESZ6", Some(b)));
        // Past its reservation, b shares what is left with a: nothing.
        assert!(!table.alias(1, key("B1"), b"ESH7", b, None));
        // Without reservations (one feed, or none reserved), the whole
        // room is anyone's, as before.
        let p =
            Publication::create(&dir.path().join("tg2"), 0o600, 4, &feeds, 1, 1_000_000).unwrap();
        let mut table = StateTable::shared(Arc::new(p));
        table.reserve(&[2, 2]);
        let a = table.insert_named(0, key("A1"), b"#1", th).unwrap();
        let renamed = (0..100)
            .take_while(|n| table.alias(0, key("A1"), format!("X{n}").as_bytes(), a, None))
            .count();
        assert_eq!(renamed, 4);
    }

    /// An earlier copy of this very file written back over it in place
    /// has its identity, directory and shape, so its header passes every
    /// check but one: the heartbeat read back is not the one last stored.
    /// Found at the next heartbeat, as a write-over, not a truncation.
    #[test]
    fn an_earlier_copy_written_over_the_file_is_found_at_the_next_heartbeat() {
        let dir = tempfile::tempdir().unwrap();
        let p = one_feed(&dir.path().join("tickguard"));
        p.heartbeat(2_000_000);
        let mut copy = vec![0u8; p._map.len()];
        p.file.read_exact_at(&mut copy, 0).unwrap();
        p.heartbeat(3_000_000);
        p.probe();
        assert!(!p.lost(), "its own file, untouched");
        p.file.write_all_at(&copy, 0).unwrap();
        for _ in 0..LENGTH_EVERY {
            p.probe();
        }
        assert!(!p.lost(), "the header alone passes");
        p.heartbeat(4_000_000);
        assert!(p.overwritten() && p.lost() && !p.truncated());
        // Not given the heartbeat, then or after: until it is closed, its
        // readers judge the copy by the copy's own.
        p.heartbeat(5_000_000);
        let header = p.views.header();
        assert_eq!(header.heartbeat_ns.load(Ordering::Relaxed), 2_000_000);
    }

    /// The word a seqlock's stamp is, in place.
    type SeqLockWord = u64;

    /// A feed status's stamp or a slot's left odd in the file (a copy taken
    /// mid-write written over it, a quiet feed that never writes it again)
    /// holds up none of the writer's own reads: a seqlock read of them
    /// spun for ever on the sidecar's thread.
    #[test]
    fn stamps_left_odd_hold_up_none_of_the_writers_reads() {
        let dir = tempfile::tempdir().unwrap();
        let p = Arc::new(one_feed(&dir.path().join("tickguard")));
        let mut table = StateTable::shared(p.clone());
        let symbol = crate::symbol::Symbol::parse("EURUSD").unwrap();
        let th = crate::verdict::Thresholds {
            stale_ns: 1,
            source_ns: 1,
        };
        let id = table.insert(0, symbol, th).unwrap();
        let status = FeedStatus {
            last_alive: 7,
            ..FeedStatus::default()
        };
        table.set_feed_status(0, &status);
        let base = p._map.as_ptr() as usize;
        let at = |word: *const SeqLockWord| word as usize - base;
        let odd = 1u64.to_le_bytes();
        let stamps = [
            at(std::ptr::addr_of!(p.views.feeds()[0].status).cast()),
            at(std::ptr::addr_of!(p.views.slots()[id as usize]).cast()),
        ];
        for stamp in stamps {
            p.file.write_all_at(&odd, stamp as u64).unwrap();
        }
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send((table.feed_status(0), table.records().count()));
        });
        let read = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(read.expect("the reads never returned"), (status, 1));
    }

    /// A falling offset is published before the feed's slots and status,
    /// a rising one after them; the same one, not again.
    #[test]
    fn an_offset_is_published_on_the_side_that_leaves_states_older() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tickguard");
        let p = one_feed(&path);
        let stamp = || p.views.feeds()[0].offset_stamp.writer_stamp();
        let during = |offset: i128| {
            publish_around_offset(Some(&p), 0, offset, || p.published_offset(0).unwrap())
        };
        assert_eq!(during(-3), -3, "falling: before");
        assert_eq!(p.published_offset(0), Some(-3));
        assert_eq!(during(1 << 70), -3, "rising: after");
        assert_eq!(p.published_offset(0), Some(1 << 70));
        let before = stamp();
        assert_eq!(during(1 << 70), 1 << 70);
        assert_eq!(stamp(), before, "unchanged: not written");
        assert_eq!(publish_around_offset(None, 0, 9, || 4), 4);
    }

    #[test]
    fn feed_block_words() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tickguard");
        let p = one_feed(&path);
        p.ready();
        let bytes = std::fs::read(&path).unwrap();
        let word = |at: usize| {
            let at = 128 + at;
            u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
        };
        assert_eq!(word(0), u64::from_le_bytes(*b"lp1\0\0\0\0\0"));
        assert_eq!(word(64), 1);
        assert_eq!(word(72), u64::from_le_bytes(*b"test\0\0\0\0"));
        assert_eq!(word(80), 0, "no traits");
        assert_eq!(
            word(112),
            128 + 1024,
            "the descriptor table after the block"
        );
        assert_eq!(word(120), 2, "two descriptors");
        for at in (512..1024).step_by(8) {
            assert_eq!(word(at), 0, "word {at}");
        }
        assert_eq!(word(88), pack_line("239.1.1.1:30001".parse().unwrap()));
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
        let feed = |name: &str| {
            feed_info(
                name,
                FeedKind::Full,
                vec!["239.1.1.1:30001".parse().unwrap()],
            )
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
        let feeds = [feed_info(
            "lp1",
            FeedKind::Full,
            vec!["127.0.0.1:30001".parse().unwrap()],
        )];
        let p = Publication::create(&path, 0o600, 16, &feeds, 1, 1_000_000).unwrap();
        const SETS: u64 = 200_000;
        let (done, reading) = (AtomicBool::new(false), AtomicBool::new(false));
        // Sets written so far: a read tried between the writer's first and
        // last, as the writer counts them, raced it (refused, or whole: a
        // torn copy taken then would fail the test).
        let written = std::sync::atomic::AtomicU64::new(0);
        let within = std::thread::scope(|s| {
            s.spawn(|| {
                while !reading.load(Ordering::Relaxed) {
                    std::thread::yield_now();
                }
                for n in 1..=SETS {
                    p.write_counters(|| {
                        p.set_counter(0, counter::LINE_PACKETS, n);
                        p.set_counter(0, counter::PACKETS, n);
                    });
                    written.store(n, Ordering::Relaxed);
                    if n.is_multiple_of(100) {
                        // The reader gets its turns on a busy machine.
                        std::thread::yield_now();
                    }
                }
                done.store(true, Ordering::Relaxed);
            });
            let block = &p.views.feeds()[0];
            let (mut copies, mut last, mut within) = (0u64, 0, 0u64);
            while !done.load(Ordering::Relaxed) || copies == 0 {
                let before = written.load(Ordering::Relaxed);
                let copy = read_counters(block);
                let after = written.load(Ordering::Relaxed);
                within += u64::from(before > 0 && after < SETS);
                if let Some(c) = copy {
                    assert_eq!(
                        c[counter::PACKETS],
                        c[counter::LINE_PACKETS],
                        "{copies} copies"
                    );
                    assert!(c[counter::PACKETS] >= last);
                    last = c[counter::PACKETS];
                    copies += 1;
                    reading.store(true, Ordering::Relaxed);
                }
            }
            within
        });
        assert!(within >= 100, "{within} reads while the writer wrote");
        assert_eq!(
            read_counters(&p.views.feeds()[0]).unwrap()[counter::PACKETS],
            SETS
        );
    }
}
