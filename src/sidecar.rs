//! The live sidecar: one receiver thread polling every line socket,
//! applying datagrams through the [`Handler`] into the shared-memory
//! publication, and keeping the writer heartbeat fresh.
//!
//! It is a duty cycle: read the wall clock once (and the monotonic one
//! around the cycle, for its length), take one `recvmmsg` batch from
//! every socket, apply the datagrams of all lines merged in kernel-timestamp
//! order, then (every heartbeat period) refresh the heartbeat and publish
//! counters; when a cycle found nothing, idle as configured.
//!
//! The merge is the A/B arbitration: line B's copy of a tick that line A
//! lost is applied before A's later ticks, as it arrived, so the per-symbol
//! sequence filter sees no gap (as far as the kernel's stamps and queues
//! agree: see `merge` for the one case they don't). Draining one socket and then the other
//! would report the ticks in between as lost (and make a delta feed suspect).
//! The `merge` module says how the order is chosen and why it always makes progress,
//! whatever the kernel timestamps do. The kernel's drop counter is read from
//! every batch received, applied or not.
//!
//! The wall clock read is the cycle's `now`: the arrival time of datagrams
//! the kernel did not timestamp, the bound of the merge's horizon, and the
//! time gaps are given up at and the heartbeat and a clock step are told
//! by. The cycle's datagram path (receive, merge, apply, publish) does not
//! lock or log, nor allocate after warm-up (a new instrument or Symbol
//! published takes its room once; an MDP3 Symbol or group membership
//! that moves takes none); beside it, rare events do: rate-limited log
//! lines (a rejected packet, a membership change), a membership
//! `setsockopt`, a cycle's re-requests (one `sendmmsg` a channel), a snapshot connection attempt
//! started or finished (a channel send that may wake its thread, taking
//! the channel's lock), and, for a program that subscribed to verdict
//! changes ([`Sidecar::subscribe`]) and waits on them, a change sent (the
//! same wake: poll with `try_recv` to spare the receive thread it). A
//! recording (`--record`) copies each record into a chunk of a pool
//! allocated at its start, and hands full chunks to a thread of its own
//! that writes them (see `record`): a disk that blocks stops the
//! recording once the pool is spent, never the receive loop; a GLIMPSE
//! snapshot's segments, handed over from the connection thread, are
//! freed here once copied.

use crate::config::services::{line_index, listen_takes, Receive, COPIES};
use crate::config::{Config, Idle};
use crate::handler::Handler;
use crate::protocol::publication_feeds;
use crate::shm::{counter, Publication, Republish, WriterLock};
use crate::state::seqlock::SeqLock;
use crate::state::verdict;
use crate::state::StateTable;
use crate::symbol::Symbol;
use crate::sys::udp::{Batch, LineSocket, SendBatch, STEP_BACK_NS};
use crate::time::now_ns;
use crate::verdict::Reasons;
use anyhow::Context;
use crossbeam_channel::{Receiver, Sender, TrySendError};
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

mod merge;
mod record;

pub use record::{RECORD_BOUND_REACHED, RECORD_FELL_BEHIND, RECORD_QUEUE_BYTES};

/// A symbol's verdict changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerdictChange {
    /// Feed id (configuration order).
    pub feed: u16,
    /// The symbol.
    pub symbol: Symbol,
    /// Reasons before.
    pub old: Reasons,
    /// Reasons now.
    pub new: Reasons,
    /// When the change was seen: ns since the Unix epoch, local clock.
    pub time_ns: u64,
}

/// Receiver statistics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Duty cycles run.
    pub cycles: u64,
    /// Cycles that received something.
    pub busy_cycles: u64,
    /// Datagrams received.
    pub datagrams: u64,
    /// Longest cycle, ns.
    pub worst_cycle_ns: u64,
    /// Datagrams larger than the receive buffer (dropped).
    pub oversized: u64,
    /// Socket errors other than "nothing to read".
    pub socket_errors: u64,
    /// OS error number of the last of them (0: none yet, or not an OS error).
    pub last_socket_errno: i32,
    /// Verdict changes not delivered because the subscriber was behind.
    pub change_drops: u64,
    /// Datagrams and stream segments left out of the recording (`run
    /// --record`): those whose time does not fit the file, and every one
    /// after it stopped. Its thread writes behind the receive thread: the
    /// count is whole once [`Sidecar::end_recording`] returned.
    pub unrecorded: u64,
    /// OS error number of the write that stopped the recording (0: none,
    /// or not an OS error; [`RECORD_BOUND_REACHED`]: no error, the
    /// `--record-max-mb` bound; [`RECORD_FELL_BEHIND`]: no error, the disk
    /// fell behind by its queue, about [`RECORD_QUEUE_BYTES`]).
    pub record_errno: i32,
    /// Whether the recording stopped (a failed write, its bound, the disk
    /// fallen behind).
    pub record_stopped: bool,
    /// Why finishing the recording at the stop failed, if it did (its
    /// last records may be missing); not shared while running.
    pub record_unfinished: Option<String>,
    /// Receives by datagrams taken: bucket i counts batches of 2^i to 2^(i+1) − 1
    /// (the last bucket: 128 and more).
    pub batch_sizes: [u64; BATCH_BUCKETS],
}

impl std::fmt::Debug for SharedStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.load().fmt(f)
    }
}

impl SharedStats {
    /// Publishes `st` as one set. Receiver thread only.
    pub fn store(&self, st: &RunStats) {
        self.stamp.write(|| {
            // Relaxed: ordered by the seqlock's stamp and fences.
            self.cycles.store(st.cycles, Ordering::Relaxed);
            self.busy_cycles.store(st.busy_cycles, Ordering::Relaxed);
            self.datagrams.store(st.datagrams, Ordering::Relaxed);
            self.worst_cycle_ns
                .store(st.worst_cycle_ns, Ordering::Relaxed);
            self.oversized.store(st.oversized, Ordering::Relaxed);
            self.socket_errors
                .store(st.socket_errors, Ordering::Relaxed);
            self.last_socket_errno
                .store(st.last_socket_errno as u32 as u64, Ordering::Relaxed);
            self.change_drops.store(st.change_drops, Ordering::Relaxed);
            self.unrecorded.store(st.unrecorded, Ordering::Relaxed);
            let stopped = u64::from(st.record_stopped) << 32 | u64::from(st.record_errno as u32);
            self.record_stopped.store(stopped, Ordering::Relaxed);
            for (a, v) in self.batch_sizes.iter().zip(&st.batch_sizes) {
                a.store(*v, Ordering::Relaxed);
            }
        })
    }

    /// Records the start time of the publication this writer serves now.
    pub fn set_publication_start(&self, ns: u64) {
        // Relaxed: a value of its own, read as one.
        self.publication_start_ns.store(ns, Ordering::Relaxed);
    }

    /// The start time of the publication this writer serves (0 before one
    /// is published).
    pub fn publication_start(&self) -> u64 {
        // Relaxed: see `set_publication_start`.
        self.publication_start_ns.load(Ordering::Relaxed)
    }

    /// The last set published (waits out a store in progress).
    pub fn load(&self) -> RunStats {
        let (st, _, _) = self.stamp.read(|| {
            // Relaxed: ordered by the seqlock's stamp and fences.
            let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
            RunStats {
                cycles: get(&self.cycles),
                busy_cycles: get(&self.busy_cycles),
                datagrams: get(&self.datagrams),
                worst_cycle_ns: get(&self.worst_cycle_ns),
                oversized: get(&self.oversized),
                socket_errors: get(&self.socket_errors),
                last_socket_errno: get(&self.last_socket_errno) as u32 as i32,
                change_drops: get(&self.change_drops),
                unrecorded: get(&self.unrecorded),
                record_errno: get(&self.record_stopped) as u32 as i32,
                record_stopped: get(&self.record_stopped) >> 32 != 0,
                record_unfinished: None,
                batch_sizes: std::array::from_fn(|i| get(&self.batch_sizes[i])),
            }
        });
        st
    }
}

/// Buckets of [`RunStats::batch_sizes`].
pub const BATCH_BUCKETS: usize = 8;

/// Receiver statistics shared with other threads of the process (the
/// metrics exporter): copied from the receiver's plain counters once per
/// heartbeat, never per packet, as one set under a seqlock: use
/// [`SharedStats::store`] and [`SharedStats::load`].
#[derive(Default)]
pub struct SharedStats {
    /// Seqlock stamp over every word below.
    stamp: SeqLock,
    /// Duty cycles.
    pub cycles: AtomicU64,
    /// Cycles that received something.
    pub busy_cycles: AtomicU64,
    /// Datagrams received.
    pub datagrams: AtomicU64,
    /// Longest cycle, ns.
    pub worst_cycle_ns: AtomicU64,
    /// Oversized datagrams dropped.
    pub oversized: AtomicU64,
    /// Socket errors.
    pub socket_errors: AtomicU64,
    /// See [`RunStats::last_socket_errno`] (an `i32` stored as `u64`).
    pub last_socket_errno: AtomicU64,
    /// Verdict changes a subscriber missed.
    pub change_drops: AtomicU64,
    /// See [`RunStats::unrecorded`].
    pub unrecorded: AtomicU64,
    /// See [`RunStats::record_errno`] (an `i32` stored as `u64`), and
    /// bit 32 set when [`RunStats::record_stopped`].
    pub record_stopped: AtomicU64,
    /// See [`RunStats::batch_sizes`].
    pub batch_sizes: [AtomicU64; BATCH_BUCKETS],
    /// The start time in the header of the publication this writer
    /// serves now (ns; 0 before one is published): with the pid, what
    /// tells its file from another writer's (another pid namespace's
    /// sidecar is pid 1 too). Outside the seqlock: one word.
    publication_start_ns: AtomicU64,
}

struct Line {
    feed: u16,
    /// 0 = line A, 1 = line B of the feed's `lines`; its protocol's other
    /// services after them ([`line_index`]).
    index: usize,
    socket: LineSocket,
    kernel_drops: u64,
    packets: u64,
    messages: u64,
    rejected: u64,
    /// This line's receive buffers.
    batch: Batch,
    /// Datagrams in `batch` from the last receive, and how many are applied.
    received: usize,
    next: usize,
    /// This cycle received into `batch` (it held nothing unapplied).
    fresh: bool,
    /// What its receives told of its kernel queue.
    told: merge::Told,
    /// The socket's cumulative drop count (SO_RXQ_OVFL) last seen.
    drops_seen: u32,
    /// A channel's server: datagrams from any other sender are dropped.
    peer: Option<SocketAddrV4>,
    /// Datagrams dropped for coming from another sender than `peer`.
    wrong_source: u64,
    /// Whether the feed wants this line's datagrams now
    /// ([`Handler::wants`]); while not, its group is left and what still
    /// arrives is dropped unapplied.
    wanted: bool,
    /// Datagrams dropped because the feed did not want the line.
    unwanted: u64,
    /// A membership change failed: when to try it again (loop clock, ns),
    /// and how many attempts in a row have failed.
    membership_retry_at: Option<u64>,
    membership_failures: u32,
    /// The membership change lines' limit (loop clock): joined and left
    /// again and again (a snapshot loop wanted and done with, or forged
    /// packets making it so), a few lines a second, not four a datagram.
    membership_log: crate::ratelimit::Limiter,
    /// The failed changes' warnings' limit (loop clock): the first of a
    /// trouble (no change done since the last warning), then one a
    /// minute however the wants turn meanwhile; and the failures not
    /// warned about since the last warning.
    membership_warn: crate::ratelimit::Limiter,
    membership_unwarned: u32,
    /// A change was done since the last warning: the next failure starts
    /// a new trouble, warned about at once.
    membership_recovered: bool,
}

impl Line {
    fn new(feed: u16, index: usize, socket: LineSocket, batch: usize) -> Line {
        Line {
            feed,
            index,
            socket,
            kernel_drops: 0,
            packets: 0,
            messages: 0,
            rejected: 0,
            batch: Batch::new(batch),
            received: 0,
            next: 0,
            fresh: true,
            told: merge::Told::default(),
            drops_seen: 0,
            peer: None,
            wrong_source: 0,
            wanted: true,
            unwanted: 0,
            membership_retry_at: None,
            membership_failures: 0,
            membership_log: crate::ratelimit::Limiter::new(MEMBERSHIP_LOG_NS),
            membership_warn: crate::ratelimit::Limiter::new(MEMBERSHIP_WARN_NS),
            membership_unwarned: 0,
            membership_recovered: true,
        }
    }
}

impl merge::Queue for Line {
    #[inline]
    fn feed(&self) -> usize {
        usize::from(self.feed)
    }

    #[inline]
    fn next_arrival(&self) -> Option<u64> {
        if self.next < self.received {
            self.batch.arrival_ns(self.next)
        } else {
            None
        }
    }

    #[inline]
    fn complete_until(&self, now: u64) -> u64 {
        // Drained to empty by this cycle's receive, or a short batch: the
        // kernel held nothing more when `now` was read. A full batch, or
        // datagrams held over from an earlier cycle: later ones may wait in
        // the kernel, and they arrived after everything in hand.
        let maybe_more = !self.fresh || self.received == self.batch.capacity();
        if maybe_more && self.next < self.received {
            self.batch.max_arrival_ns()
        } else {
            self.told.horizon(now)
        }
    }
}

struct Changes {
    tx: Sender<VerdictChange>,
    /// Per slot, the (feed, symbol) it held and its verdict, when last
    /// swept (a recreated publication hands slots out again).
    last: Vec<(Option<(u16, Symbol)>, Reasons)>,
    cursor: usize,
}

impl Changes {
    /// Sends `change`, counting it in `drops` when the subscriber is
    /// behind; whether it was queued (or the subscriber is gone: nobody
    /// to tell again).
    fn send(&self, change: VerdictChange, drops: &mut u64) -> bool {
        match self.tx.try_send(change) {
            Err(TrySendError::Full(_)) => {
                *drops += 1;
                false
            }
            _ => true,
        }
    }

    /// The publication was recreated at `now`, every symbol starting over:
    /// each one known not `no_quote` is told so, and the slots forgotten.
    fn start_over(&mut self, now: u64, drops: &mut u64) {
        for i in 0..self.last.len() {
            if let (Some((feed, symbol)), old) = self.last[i] {
                if old != Reasons::NO_QUOTE {
                    let change = VerdictChange {
                        feed,
                        symbol,
                        old,
                        new: Reasons::NO_QUOTE,
                        time_ns: now,
                    };
                    // Dropped (the subscriber behind), it is not told
                    // again: the slots are forgotten. Its counted drop
                    // says the subscriber's view needs a fresh read.
                    let _ = self.send(change, drops);
                }
            }
            self.last[i] = (None, Reasons::NO_QUOTE);
        }
        self.cursor = 0;
    }
}

/// Slots whose verdict is re-evaluated per cycle for subscribers.
const SWEEP_PER_CYCLE: usize = 256;

/// The sidecar, set up and ready to run.
pub struct Sidecar {
    config: Config,
    handler: Handler,
    publication: Arc<Publication>,
    lines: Vec<Line>,
    /// Each feed's merge horizon this cycle ([`merge::horizons`]), ns.
    horizons: Vec<u64>,
    /// Feeds with a unicast channel: (feed, its channel's index in
    /// `lines`, the server).
    channels: Vec<(u16, usize, SocketAddrV4)>,
    /// A channel's requests of one cycle, sent in one `sendmmsg`.
    requests: SendBatch,
    /// By channel (as `channels`): its last cycle's requests all failed,
    /// so this cycle's send one (the rest wait, as a failed request ends a
    /// poll), not a burst a millisecond for as long as the error lasts.
    requests_failing: Vec<bool>,
    changes: Option<Changes>,
    recording: Option<record::Tap>,
    stats: RunStats,
    shared: Arc<SharedStats>,
    last_beat: u64,
    /// The last cycle's time, ns: one more than [`STEP_BACK_NS`] above
    /// this cycle's is a clock stepped back.
    last_now: u64,
    /// When a lost publication may next be recreated (after a failure).
    recreate_at: u64,
    /// When a cut file may next be closed through its descriptor while no
    /// recreation replaces it (a syscall: once a retry period).
    fd_close_at: u64,
    /// Failures to recreate it: a line a minute.
    recreate_log: crate::ratelimit::Limiter,
    /// The orphaned publication's truncation was said.
    orphan_truncated: bool,
    /// Why the sidecar must stop, if it must: a feed's file it read at
    /// start unreadable when the publication was recreated.
    fatal: Option<String>,
}

/// Line `addr` of feed `name` open (joined from `source` if set), with the
/// log lines an operator needs about it.
fn open_line(
    name: &str,
    addr: SocketAddrV4,
    source: Option<std::net::Ipv4Addr>,
    sc: &crate::config::SidecarConfig,
) -> anyhow::Result<LineSocket> {
    let socket = LineSocket::open(addr, source, sc.interface, sc.rcvbuf_bytes)
        .with_context(|| format!("feed '{name}': line {addr}"))?;
    let i = &socket.info;
    tracing::info!(
        feed = %name,
        line = %addr,
        membership = %i.membership,
        rcvbuf_bytes = i.rcvbuf,
        rcvbuf_requested = sc.rcvbuf_bytes,
        rcvbuf_capped = i.rcvbuf_capped(),
        kernel_timestamps = i.timestamps,
        kernel_drop_counter = i.drop_counter,
        "line open"
    );
    warn_of_socket(name, i);
    Ok(socket)
}

/// What an operator must hear of socket `i` of feed `name` (a line's or a
/// recovery channel's): a receive buffer granted short of what was asked,
/// arrival times without kernel stamps.
fn warn_of_socket(name: &str, i: &crate::sys::udp::LineInfo) {
    if let Some(line) = i.rcvbuf_shortfall() {
        tracing::warn!(feed = %name, "{line}");
    }
    if !i.timestamps {
        tracing::warn!(line = %i.addr, "no kernel receive timestamps: arrival times are read per cycle (a datagram that waited in the kernel reads as arriving when it was read, so liveness may look fresher by that wait)");
    }
    if !i.drop_counter {
        tracing::warn!(line = %i.addr, "no kernel drop counter: datagrams the kernel drops for a full receive buffer are not counted (kernel_drops stays 0)");
    }
}

/// Membership change lines per line, at most one each this interval (ns
/// of the loop's clock), with the count held back; the state the changes
/// held back left is logged once the interval has passed.
const MEMBERSHIP_LOG_NS: u64 = 250_000_000;

/// Logs the membership `line` is left in after changes held back.
#[cold]
fn membership_settled(config: &Config, line: &mut Line, now: u64) {
    let feed = config
        .feeds
        .get(line.feed as usize)
        .map_or("?", |f| f.name.as_str());
    let addr = line.socket.info.addr;
    let Some(unlogged) = line.membership_log.due(now, false) else {
        return;
    };
    let want = line.wanted;
    // The fields and words of `membership_changed`'s lines.
    if line.socket.is_group() {
        tracing::info!(feed = %feed, line = %addr, joined = want, unlogged, "line {} (after {unlogged} changes not logged)", if want { "joined" } else { "left" });
    } else {
        tracing::info!(feed = %feed, line = %addr, wanted = want, unlogged, "line {} (after {unlogged} changes not logged)", if want { "wanted again" } else { "not wanted: what arrives is dropped" });
    }
}

/// Joins or leaves `line`'s group as its feed now wants (`want`), and
/// says so in the log (a snapshot loop needed or done with; at most one
/// line a [`MEMBERSHIP_LOG_NS`] a line).
#[cold]
fn membership_changed(config: &Config, line: &mut Line, want: bool, now: u64) {
    let feed = config
        .feeds
        .get(line.feed as usize)
        .map_or("?", |f| f.name.as_str());
    let result = line.socket.set_joined(want);
    membership_result(feed, line, want, result, now);
}

/// What [`membership_changed`]'s change of `line` to `want` gave
/// (`result`: whether it changed the membership), logged as it says.
fn membership_result(
    feed: &str,
    line: &mut Line,
    want: bool,
    result: std::io::Result<bool>,
    now: u64,
) {
    let addr = line.socket.info.addr;
    let change = if want { "join" } else { "leave" };
    match result {
        Ok(changed) => {
            let failed = std::mem::take(&mut line.membership_failures);
            line.membership_retry_at = None;
            line.membership_recovered |= changed;
            // A change done after failures is said at once; nothing to
            // change (wanted as it stands) waits its turn.
            let Some(unlogged) = line.membership_log.due(now, failed > 0 && changed) else {
                return;
            };
            if failed > 0 && changed {
                tracing::info!(feed = %feed, line = %addr, joined = want, failed, unlogged, "line {}: {change} done after {failed} failed attempts", if want { "joined" } else { "left" });
            } else if changed {
                tracing::info!(feed = %feed, line = %addr, joined = want, unlogged, "line {}", if want { "joined" } else { "left" })
            } else {
                tracing::info!(feed = %feed, line = %addr, wanted = want, unlogged, "line {}", if want { "wanted again" } else { "not wanted: what arrives is dropped" })
            }
        }
        Err(e) => {
            line.membership_failures = line.membership_failures.saturating_add(1);
            line.membership_retry_at = Some(now.saturating_add(MEMBERSHIP_RETRY_NS));
            // The first failure of a trouble, then one line a minute while
            // failures go on, wanted and not wanted in turn or not.
            let n = line.membership_failures;
            line.membership_unwarned = line.membership_unwarned.saturating_add(1);
            let first = std::mem::take(&mut line.membership_recovered);
            if line.membership_warn.due(now, first).is_some() {
                let since = std::mem::take(&mut line.membership_unwarned);
                tracing::warn!(feed = %feed, line = %addr, error = %e, failed = n, since_last_warning = since, "line {change} failed ({n} in a row, {since} since the last warning); tried again every second, and until then what arrives unwanted is dropped");
            }
        }
    }
}

/// Least time between two warnings of a line's failed membership
/// changes, ns.
const MEMBERSHIP_WARN_NS: u64 = 60_000_000_000;

/// Time between attempts at a membership change that failed (an
/// interface address gone, say), ns.
const MEMBERSHIP_RETRY_NS: u64 = 1_000_000_000;

/// Requests a feed's channel may send in one cycle, in one `sendmmsg`:
/// more are refused for that cycle (counted as send errors, asked again
/// a millisecond on).
const REQUESTS_A_CYCLE: usize = 1024;

/// Bytes a channel's request holds at most.
const REQUEST_MAX_BYTES: usize = 128;

/// Time between attempts at recreating a lost publication, ns.
const RECREATE_RETRY_NS: u64 = 1_000_000_000;

impl Sidecar {
    /// [`prepare`](Self::prepare)s, then [`publish`](Self::publish)es.
    pub fn start(config: &Config) -> anyhow::Result<Sidecar> {
        let mut sidecar = Sidecar::prepare(config)?;
        sidecar.publish()?;
        Ok(sidecar)
    }

    /// Takes the publication path's writer lock, builds the publication
    /// under a temporary name, then opens every line: the file at
    /// `shm_path` is not touched until [`publish`](Self::publish), so a
    /// start that fails leaves a running writer's publication (or any other
    /// file) as it was. Fails with a message naming the file or line that
    /// could not be set up.
    pub fn prepare(config: &Config) -> anyhow::Result<Sidecar> {
        let sc = &config.sidecar;
        let shm = || format!("shared memory {}", sc.shm_path.display());
        shared_ports(config)?;
        if let Some(cpu) = sc.cpu {
            // A CPU the receiver cannot be pinned to (a typo, a smaller
            // machine, a cpuset) would leave it unpinned.
            if let Err(e) = crate::sys::can_pin_to(cpu) {
                let online = crate::sys::cpus_online()
                    .map_or(String::new(), |c| format!("; CPUs online: {c}"));
                anyhow::bail!(
                    "[sidecar] cpu = {cpu}: the receiver cannot be pinned there ({e}{online})"
                );
            }
        }
        // A publication truncated under the writer faults into zero pages
        // instead of killing it (see `recreate_publication`).
        crate::sys::guard::install().context("installing the SIGBUS handler")?;
        let lock = WriterLock::acquire(&sc.shm_path).with_context(shm)?;
        let now = now_ns();
        let publication = Arc::new(
            Publication::build(
                lock,
                sc.shm_mode,
                config.capacity,
                &publication_feeds(config),
                now,
                sc.heartbeat_ns,
            )
            .with_context(shm)?,
        );
        let table = StateTable::shared(publication.clone());
        let mut handler = Handler::with_table(config, table, sc.offset_queue);
        // Secrets (a snapshot server's password) are read, and the feeds'
        // own connection threads started, before any socket opens.
        handler.go_live().map_err(anyhow::Error::msg)?;
        // Files a feed reads before its first datagram (MDP3's
        // `definitions`), as a replay does.
        handler.preload().map_err(anyhow::Error::msg)?;
        let mut lines = Vec::new();
        let mut channels = Vec::new();
        for (id, f) in config.feeds.iter().enumerate() {
            if f.source.is_none() && f.lines.iter().any(|l| l.ip().is_multicast()) {
                // Neither protocol authenticates its datagrams: only the
                // network can keep a forger off the group.
                tracing::warn!(
                    feed = %f.name,
                    "groups joined from any source: whoever can reach a group can forge this feed's packets; set `source` for a source-specific join"
                );
            }
            for (s, service) in f.services().iter().enumerate() {
                let key = service.key;
                match &service.receive {
                    Receive::Lines(addrs) => {
                        for (copy, &addr) in addrs.iter().enumerate() {
                            let socket = open_line(&f.name, addr, f.source, sc)?;
                            lines.push(Line::new(id as u16, line_index(s, copy), socket, sc.batch));
                        }
                    }
                    // The feed's engine opens its streams itself.
                    Receive::Stream(_) => {}
                    Receive::Channel(c) => {
                        let (Some(server), listen) = (c.server, c.listen) else {
                            continue;
                        };
                        let socket = LineSocket::open(listen, None, sc.interface, sc.rcvbuf_bytes)
                            .with_context(|| format!("feed '{}': {key} {listen}", f.name))?;
                        let i = &socket.info;
                        tracing::info!(
                            feed = %f.name,
                            service = key,
                            server = %server,
                            listen = %i.addr,
                            rcvbuf_bytes = i.rcvbuf,
                            rcvbuf_requested = sc.rcvbuf_bytes,
                            rcvbuf_capped = i.rcvbuf_capped(),
                            kernel_timestamps = i.timestamps,
                            kernel_drop_counter = i.drop_counter,
                            "channel open"
                        );
                        // As a line's: its answers are datagrams the kernel
                        // buffers and stamps alike.
                        warn_of_socket(&f.name, i);
                        channels.push((id as u16, lines.len(), server));
                        let mut line = Line::new(id as u16, line_index(s, 0), socket, sc.batch);
                        // Answers are taken from the server only: a forged
                        // answer would fill a gap with whatever its sender chose.
                        line.peer = Some(server);
                        line.batch = Batch::new(sc.batch).with_senders();
                        lines.push(line);
                    }
                }
            }
        }
        Ok(Sidecar {
            config: config.clone(),
            handler,
            publication,
            lines,
            horizons: vec![0; config.feeds.len()],
            requests_failing: vec![false; channels.len()],
            channels,
            requests: SendBatch::new(REQUESTS_A_CYCLE, REQUEST_MAX_BYTES),
            changes: None,
            recording: None,
            stats: RunStats::default(),
            shared: Arc::new(SharedStats::default()),
            last_beat: now,
            last_now: now,
            recreate_at: 0,
            fd_close_at: 0,
            recreate_log: crate::ratelimit::Limiter::new(60_000_000_000),
            orphan_truncated: false,
            fatal: None,
        })
    }

    /// Makes the prepared publication visible: stores its layout version
    /// and renames it over `shm_path` (replacing only a tickguard
    /// publication). Call it right before [`run`](Self::run).
    pub fn publish(&mut self) -> anyhow::Result<()> {
        let sc = &self.config.sidecar;
        let now = now_ns();
        self.publication.heartbeat(now);
        self.last_beat = now;
        self.publication
            .publish()
            .with_context(|| format!("shared memory {}", sc.shm_path.display()))?;
        self.shared
            .set_publication_start(self.publication.start_time_ns());
        tracing::info!(
            shm = %sc.shm_path.display(),
            capacity = self.config.capacity,
            feeds = self.config.feeds.len(),
            idle = ?sc.idle,
            cpu = ?sc.cpu,
            batch = sc.batch,
            heartbeat_ms = sc.heartbeat_ns / 1_000_000,
            "sidecar ready"
        );
        Ok(())
    }

    /// The publication (it holds the path's writer lock while alive).
    pub fn publication(&self) -> Arc<Publication> {
        self.publication.clone()
    }

    /// Records every applied datagram into a pcap (ns, raw IPv4) at `path`,
    /// in the order applied, written by a thread of its own (see the
    /// `record` module: the receive thread only copies each record). `path`
    /// must be a regular file (created or emptied), or `/dev/null` or
    /// `/dev/full`: a FIFO, a socket, a terminal or another device, whose
    /// open or writes could wait, is refused
    /// ([`create_output`](crate::sys::create_output)). With `max_bytes`,
    /// the file grows no further: the write that would pass it stops the
    /// recording (EFBIG), as a full disk would. [`end_recording`]
    /// (Self::end_recording) ends it; [`run`](Self::run) does at its end.
    pub fn record(&mut self, path: &std::path::Path, max_bytes: Option<u64>) -> anyhow::Result<()> {
        // By place, not by file: neither may exist yet.
        let shm = &self.config.sidecar.shm_path;
        let publication = [shm.clone(), crate::shm::lock_path(shm)];
        if let Some(p) = publication.iter().find(|p| same_place(p, path)) {
            anyhow::bail!(
                "--record {} is the publication's path ({}): refusing to record there (name another file)",
                path.display(),
                p.display()
            );
        }
        refuse_to_replace(path).with_context(|| format!("record {}", path.display()))?;
        let file = crate::sys::create_output(path)
            .with_context(|| format!("record {}", path.display()))?;
        let tap = record::Tap::start(file, max_bytes)
            .with_context(|| format!("record {}", path.display()))?;
        self.recording = Some(tap);
        self.handler.record_wire();
        Ok(())
    }

    /// Subscribes to verdict changes over a bounded channel of `capacity`.
    /// A subscriber that falls behind misses changes (counted in
    /// [`RunStats::change_drops`]); the receiver never waits for it. A
    /// subscriber blocked in `recv` is woken by each cycle that sends one
    /// (a lock and a futex call on the receive thread): poll with
    /// `try_recv` where that matters.
    pub fn subscribe(&mut self, capacity: usize) -> Receiver<VerdictChange> {
        let (tx, rx) = crossbeam_channel::bounded(capacity.max(1));
        self.changes = Some(Changes {
            tx,
            last: vec![(None, Reasons::NO_QUOTE); self.config.capacity],
            cursor: 0,
        });
        rx
    }

    /// The handler (counters, records).
    pub fn handler(&self) -> &Handler {
        &self.handler
    }

    /// The handler, to hand it datagrams directly (a bench's in-memory
    /// reference: the cycle's work without its sockets).
    pub fn handler_mut(&mut self) -> &mut Handler {
        &mut self.handler
    }

    /// Statistics so far.
    pub fn stats(&self) -> &RunStats {
        &self.stats
    }

    /// Closes the publication (readers answer `stale`, writer closed, at
    /// once): a start that fails after publishing.
    pub fn close(&self) {
        self.publication.close();
    }

    /// Statistics for other threads, refreshed every heartbeat period.
    pub fn shared_stats(&self) -> Arc<SharedStats> {
        self.shared.clone()
    }

    /// Re-requests sent so far, every feed's recovery channel together
    /// (send errors not included).
    pub fn requests_sent(&self) -> u64 {
        self.handler
            .feeds()
            .iter()
            .map(|f| f.engine().requests_sent())
            .sum()
    }

    /// The feeds' configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Why the run stopped on its own, if it did (the loop of [`run`](Self::run)
    /// ended without a signal).
    pub fn fatal(&self) -> Option<&str> {
        self.fatal.as_deref()
    }

    /// Pins the calling thread as configured, then runs duty cycles until
    /// `shutdown` is set, or the sidecar must stop ([`fatal`](Self::fatal));
    /// closes the publication on the way out.
    pub fn run(&mut self, shutdown: &AtomicBool) -> RunStats {
        if let Some(cpu) = self.config.sidecar.cpu {
            match crate::sys::pin_to_cpu(cpu) {
                Ok(()) => tracing::info!(cpu, "receiver pinned"),
                Err(e) => {
                    tracing::warn!(cpu, error = %e, "could not pin the receiver; running unpinned")
                }
            }
        }
        let idle = self.config.sidecar.idle;
        let sleep = std::time::Duration::from_micros(self.config.sidecar.idle_sleep_us);
        let resync = match crate::sys::resync_on_sigusr1() {
            Ok(flag) => Some(flag),
            Err(e) => {
                tracing::warn!(error = %e, "no SIGUSR1 handler: operators cannot ask for snapshots");
                None
            }
        };
        // Acquire: pairs with a failing thread's Release store of the flag
        // (`logq::on_panic`), so its failure is seen once the loop ends.
        while !shutdown.load(Ordering::Acquire) && self.fatal.is_none() {
            let start = now_ns();
            if resync.is_some_and(|r| r.load(Ordering::Relaxed) && r.swap(false, Ordering::Relaxed))
            {
                let feeds = self.handler.resync(start);
                tracing::info!(
                    feeds,
                    "SIGUSR1: snapshots asked for (feeds that take one on request)"
                );
            }
            // The cycle's length on the monotonic clock: a wall clock
            // stepped during it would make a step the worst cycle for good.
            let began = std::time::Instant::now();
            let work = self.cycle(start);
            let took = u64::try_from(began.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.stats.worst_cycle_ns = self.stats.worst_cycle_ns.max(took);
            if work == 0 {
                match idle {
                    Idle::Spin => std::hint::spin_loop(),
                    Idle::Yield => std::thread::yield_now(),
                    Idle::Sleep => std::thread::sleep(sleep),
                }
            }
        }
        self.publish_counters();
        // Closed before the recording is finished: its flush and sync can
        // take seconds, in which readers would still take the stopped
        // writer for a running one.
        self.publication.close();
        self.end_recording();
        tracing::info!(
            datagrams = self.stats.datagrams,
            "sidecar stopped; publication closed"
        );
        self.stats.clone()
    }

    /// Ends the recording (`run --record`), if one runs: every record
    /// taken written, the file cut back to its last whole record and
    /// synced, its counts into [`stats`](Self::stats). Waits for the disk.
    pub fn end_recording(&mut self) {
        let Some(tap) = self.recording.take() else {
            return;
        };
        if let Some(e) = tap.finish(&mut self.stats) {
            tracing::error!(error = %e, "finishing the recording");
            // Its last records may be lost.
            self.stats.record_unfinished = Some(e.to_string());
        }
        if self.stats.unrecorded > 0 {
            tracing::error!(
                unrecorded = self.stats.unrecorded,
                stopped = self.stats.record_stopped,
                "datagrams and segments not recorded"
            );
        }
    }

    /// One duty cycle at local time `now` (ns since the Unix epoch). Returns
    /// the datagrams received.
    #[inline]
    pub fn cycle(&mut self, now: u64) -> usize {
        self.cycle_with(now, |_| {})
    }

    /// [`cycle`](Self::cycle), calling `applied(arrival_ns)` right after each
    /// datagram is applied: an SQF datagram's state is published by then
    /// (benchmarks time tick-to-publish with it); an ITCH feed publishes the
    /// cycle's symbols once, after the cycle's datagrams.
    #[inline]
    pub fn cycle_with(&mut self, now: u64, mut applied: impl FnMut(u64)) -> usize {
        self.stats.cycles += 1;
        if now.saturating_add(STEP_BACK_NS) < self.last_now {
            // Deadlines set by the time before the step would otherwise
            // hold for as long as the step.
            self.handler.on_clock_stepped_back(now);
        }
        self.last_now = now;
        let mut work = 0;
        // Receive on every line whose last batch is applied; a line still
        // holding datagrams keeps them for this cycle's merge.
        for line in &mut self.lines {
            line.fresh = line.next >= line.received;
            if !line.fresh {
                continue;
            }
            line.received = match line.batch.recv(&line.socket, now) {
                Ok(n) => {
                    line.told.received(now, n < line.batch.capacity());
                    n
                }
                Err(e) => {
                    // Counted here, logged by the metrics thread.
                    self.stats.socket_errors += 1;
                    self.stats.last_socket_errno = e.raw_os_error().unwrap_or(0);
                    line.told.failed();
                    0
                }
            };
            line.next = 0;
            work += line.received;
            if line.received > 0 {
                let bucket = (usize::BITS - 1 - line.received.leading_zeros()) as usize;
                self.stats.batch_sizes[bucket.min(BATCH_BUCKETS - 1)] += 1;
                // Every batch, applied or not: a flood must show as drops.
                if let Some(d) = line.batch.drops() {
                    line.kernel_drops += u64::from(d.wrapping_sub(line.drops_seen));
                    line.drops_seen = d;
                }
            }
        }
        // Apply, earliest arrival first, up to each feed's horizon (see
        // `merge`).
        merge::horizons(&self.lines, now, &mut self.horizons);
        while let Some((i, t)) = merge::pick(&self.lines, now, &self.horizons) {
            let line = &mut self.lines[i];
            let Some((payload, meta)) = line.batch.get(line.next) else {
                break;
            };
            line.next += 1;
            // The sender first: another's datagram, oversized or not, is
            // counted as another's.
            if line.peer.is_some_and(|p| meta.from != Some(p)) {
                line.wrong_source += 1;
                continue;
            }
            if meta.truncated {
                self.stats.oversized += 1;
                continue;
            }
            if !line.wanted {
                line.unwanted += 1;
                continue;
            }
            if let Some(r) = &mut self.recording {
                let src = std::net::SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0);
                let dst = line.socket.info.addr;
                r.write(|w| w.write_udp(t, src, dst, payload));
            }
            line.packets += 1;
            match self
                .handler
                .on_datagram_line(line.feed, line.index, payload, t)
            {
                Ok(()) => line.messages += self.handler.messages_in(line.feed, payload),
                Err(_) => line.rejected += 1,
            }
            applied(t);
        }
        // Exchange feeds: gaps past their deadline given up, whether or not
        // anything arrived (spec itch50 §3.2), at the feed's horizon: a copy
        // that arrived by the deadline, still held or in the kernel behind a
        // backlog, is applied first (as replay applies it).
        for (feed, &at) in self.horizons.iter().enumerate() {
            self.handler.before_check(feed as u16, at);
        }
        self.follow_wants(now);
        // What the feeds' streams exchanged this cycle, after the datagrams
        // applied before it (as a replay reads them). Drained with no
        // recording too: a recording ended while the loop goes on leaves
        // its feeds' streams recorded, which must not pile up.
        let recording = &mut self.recording;
        self.handler.drain_wire(&mut |t, s| {
            if let Some(r) = recording {
                r.write(|w| w.write_tcp(t, s.src, s.dst, s.seq, s.flags, s.payload));
            }
        });
        if let Some(r) = &mut self.recording {
            r.tick(now);
            r.count(&mut self.stats);
        }
        self.request_gaps(now);
        self.stats.datagrams += work as u64;
        if work > 0 {
            self.stats.busy_cycles += 1;
        }
        // At once after a clock stepped back: a heartbeat left ahead of
        // the readers' clock reads as a writer that cannot be trusted.
        if now < self.last_beat || now - self.last_beat >= self.config.sidecar.heartbeat_ns {
            self.publication.heartbeat(now);
            self.publication.probe();
            self.publish_counters();
            self.last_beat = now;
        }
        if self.publication.lost() {
            self.recreate_publication(now);
        }
        self.sweep(now);
        work
    }

    /// The publication's file was truncated (by its owner or root) and
    /// the mapping is zero pages, or its path no longer names it (removed
    /// or renamed: readers opening the path would find nothing):
    /// publishes a new, empty file in its place and starts the feeds'
    /// state over on it (as a restart would, keeping the sockets and
    /// counters of lines). Retried a second later if that fails.
    #[cold]
    fn recreate_publication(&mut self, now: u64) {
        if !crate::time::retry_due(now, self.recreate_at, RECREATE_RETRY_NS) {
            // A copy written over the file while a retry waits (or after
            // the path was given up), or a cut, is closed at once: this
            // writer's heartbeat would otherwise keep its quiet symbols
            // `ok` on the copy's prices until the retry, and readers of a
            // cut file's surviving pages would read it frozen until its
            // heartbeat aged. Through the descriptor (a cut by pages: a
            // copy may be written back over it, which the zeroed mapping
            // cannot see) once a retry period, a path given up included.
            let faulted = self.publication.faulted();
            if self.untrue()
                && (!faulted || crate::time::retry_due(now, self.fd_close_at, RECREATE_RETRY_NS))
            {
                self.publication.close();
                if faulted {
                    self.fd_close_at = now.saturating_add(RECREATE_RETRY_NS);
                }
            }
            return;
        }
        let lock = if self.publication.moved() {
            match self.publication.should_republish() {
                Ok(Republish::No) => return,
                Ok(Republish::Under(lock)) => lock,
                Ok(Republish::Taken(e)) => return self.path_taken(&e),
                Err(e) => {
                    let what = "publication and its lock file removed under the writer: taking \
                                the lock again";
                    return self.recreate_failed(now, what, &e);
                }
            }
        } else if self.publication.unwatched() {
            // Orphaned (the path another writer's), and now lost too
            // (truncated, written over, or the clock behind its start):
            // never published again, so not looked at again either.
            self.recreate_at = u64::MAX;
            self.close_if_untrue();
            if !std::mem::replace(&mut self.orphan_truncated, true) {
                tracing::error!(
                    shm = %self.config.sidecar.shm_path.display(),
                    "publication of a writer that lost its path is lost too (truncated, written \
                     over, or the clock stepped back before its start): not published again; \
                     stop this writer"
                );
            }
            return;
        } else {
            self.publication.lock()
        };
        let shm = self.config.sidecar.shm_path.display().to_string();
        let moved = self.publication.moved();
        let what = if moved {
            "publication removed or renamed under the writer (its path names another file or none)"
        } else if self.publication.truncated() {
            "publication truncated under the writer (by its owner or root)"
        } else if self.publication.behind_start() {
            "clock stepped back to before the publication's start time (readers would take it for a forged file)"
        } else if self.publication.overwritten() {
            "publication overwritten under the writer (its header no longer this writer's: a copy or zeros written over it)"
        } else {
            "publication truncated under the writer (by its owner or root)"
        };
        // Closed at once if it no longer holds this writer's state: the
        // new file and handler take a while to build (its blocks reserved,
        // the feeds' files read again), under the heartbeat this writer
        // keeps beating into it.
        self.close_if_untrue();
        let carry = |p: &Publication| {
            p.write_counters(|| self.publish_line_counters(p));
            p.set_receiver(self.stats.worst_cycle_ns, self.stats.datagrams);
        };
        match self.publication.recreate(now, lock, carry) {
            Ok(p) => {
                let p = Arc::new(p);
                let table = StateTable::shared(p.clone());
                let mut handler =
                    Handler::with_table(&self.config, table, self.config.sidecar.offset_queue);
                // The feeds' own connection threads (and their recording)
                // go on: the password is not read again.
                handler.carry_over(&mut self.handler);
                if let Err(e) = handler.preload() {
                    // Read at start, so it was readable then: moved or
                    // changed since. Without it a feed's instruments would
                    // go unnamed and out of their groups (a group's halt
                    // unseen): fatal, as at start. The loop ends at once
                    // and closes the new publication (readers answer
                    // stale), and `run` exits 2 naming the file.
                    self.fatal = Some(format!(
                        "reading a feed's files again after recreating the publication: {e}"
                    ));
                }
                self.handler = handler;
                // Closed: readers of the old file whose header is whole
                // (moved, or cut inside a later page) would answer `ok` on
                // it until its heartbeat aged; closed, they answer `stale`
                // at once and look for the new one. (Where the header's
                // page is gone, the write faults into the guard's zero
                // pages, as every access to it now does.)
                self.publication.close();
                self.publication = p;
                self.publication.heartbeat(now);
                self.shared
                    .set_publication_start(self.publication.start_time_ns());
                if let Some(ch) = &mut self.changes {
                    ch.start_over(now, &mut self.stats.change_drops);
                }
                self.publish_counters();
                tracing::error!(shm = %shm, "{what}: recreated, every symbol starts over");
            }
            // Its lock file gone too, another writer's running
            // publication found at the path.
            Err(e) if moved && e.kind() == std::io::ErrorKind::AddrInUse => {
                self.publication.give_up_path();
                self.path_taken(&e);
            }
            Err(e) => self.recreate_failed(now, &format!("{what}: recreating it"), &e),
        }
    }

    /// Another writer took the path (said once: it is no longer watched).
    #[cold]
    fn path_taken(&self, e: &std::io::Error) {
        tracing::error!(
            shm = %self.config.sidecar.shm_path.display(),
            error = %e,
            "publication and its lock file removed under the writer, and another \
             writer took the path: not published again; this one serves only the \
             readers that mapped its file: stop it"
        );
    }

    /// Closes the publication if what it holds is no longer what this
    /// writer wrote (written over, or cut), for as long as no new one
    /// replaces it: its readers would otherwise read, under this writer's
    /// fresh heartbeat, a copy's old prices for every symbol quiet since.
    /// Closed, they answer `stale` (writer closed). One that only lost its
    /// path stays open: it still holds the writer's state.
    fn close_if_untrue(&self) {
        if self.untrue() {
            self.publication.close();
        }
    }

    /// Whether the publication no longer holds what this writer wrote
    /// (written over, or cut).
    fn untrue(&self) -> bool {
        self.publication.overwritten() || self.publication.truncated()
    }

    /// `what` failed at `now` with `e`: the publication closed if it no
    /// longer holds this writer's state ([`close_if_untrue`](Self::close_if_untrue)),
    /// tried again a second later, said once a minute (a lasting cause, something at the path it may not
    /// replace or no room, would otherwise log every second).
    #[cold]
    fn recreate_failed(&mut self, now: u64, what: &str, e: &std::io::Error) {
        self.close_if_untrue();
        self.recreate_at = now.saturating_add(RECREATE_RETRY_NS);
        if let Some(held) = self.recreate_log.due(now, false) {
            let shm = self.config.sidecar.shm_path.display();
            tracing::error!(
                shm = %shm,
                error = %e,
                unlogged = held,
                "{what} failed; retrying every second"
            );
        }
    }

    /// Joins or leaves the lines whose feed's want changed this cycle
    /// (MDP3's snapshot lines), and tries again a change that failed a
    /// second ago ([`MEMBERSHIP_RETRY_NS`]): one `setsockopt` each, none
    /// otherwise.
    #[inline]
    fn follow_wants(&mut self, now: u64) {
        for line in &mut self.lines {
            let want = self.handler.wants(line.feed, line.index);
            let retry = line
                .membership_retry_at
                .is_some_and(|at| crate::time::retry_due(now, at, MEMBERSHIP_RETRY_NS));
            if want != line.wanted || retry {
                line.wanted = want;
                membership_changed(&self.config, line, want, now);
            } else if line.membership_retry_at.is_none()
                && line.membership_log.held() > 0
                && line.membership_log.is_due(now)
            {
                // Changes held back: the state they left, once due (a
                // change failing is said by its own line).
                membership_settled(&self.config, line, now);
            }
        }
    }

    /// Sends the requests due on the feeds' channels (re-requests for
    /// open gaps), after the cycle's data is applied.
    fn request_gaps(&mut self, now: u64) {
        for (k, &(feed, line, server)) in self.channels.iter().enumerate() {
            let batch = &mut self.requests;
            let probe = self.requests_failing[k];
            self.handler
                .poll_requests(feed, now, |b| (batch.is_empty() || !probe) && batch.push(b));
            if batch.is_empty() {
                continue;
            }
            let queued = batch.len();
            let (sent, _) = batch.send(&self.lines[line].socket, server);
            if sent < queued {
                self.handler.requests_unsent(feed, queued - sent, now);
            }
            self.requests_failing[k] = sent == 0;
        }
    }

    /// Copies the handler's plain counters into the publication, every
    /// feed's and line's as one set (see [`Publication::write_counters`]).
    fn publish_counters(&self) {
        let p = &self.publication;
        p.write_counters(|| self.publish_feed_counters());
        let st = &self.stats;
        p.set_receiver(st.worst_cycle_ns, st.datagrams);
        self.shared.store(st);
    }

    /// Feed and line counters; inside [`Publication::write_counters`].
    fn publish_feed_counters(&self) {
        self.handler.publish_counters();
        self.publish_line_counters(&self.publication);
    }

    /// The counters the receive loop keeps of the lines, into `p`: carried
    /// on across publications made anew.
    fn publish_line_counters(&self, p: &Publication) {
        self.line_counters(|feed, id, value| p.set_counter(feed, id, value));
    }

    /// Hands `set` each (feed, counter id, value) the sidecar keeps for
    /// the feeds' lines ([`carried_counter`]: carried over to a
    /// publication made anew).
    fn line_counters(&self, mut set: impl FnMut(u16, usize, u64)) {
        for id in 0..self.config.feeds.len() as u16 {
            let (mut drops, mut unwanted) = (0, 0);
            for l in self.lines.iter().filter(|l| l.feed == id) {
                drops += l.kernel_drops;
                unwanted += l.unwanted;
            }
            set(id, counter::KERNEL_DROPS, drops);
            set(id, counter::UNWANTED, unwanted);
        }
        for l in self.lines.iter().filter(|l| l.peer.is_some()) {
            set(l.feed, counter::CHANNEL_WRONG_SOURCE, l.wrong_source);
        }
        // The publication counts the feed's `lines` (A and B) one by one.
        for l in self.lines.iter().filter(|l| l.index < COPIES) {
            let i = l.index;
            set(l.feed, counter::LINE_PACKETS + i, l.packets);
            set(l.feed, counter::LINE_MESSAGES + i, l.messages);
            set(l.feed, counter::LINE_REJECTED + i, l.rejected);
            set(l.feed, counter::LINE_KERNEL_DROPS + i, l.kernel_drops);
            set(
                l.feed,
                counter::LINE_RCVBUF + i,
                l.socket.info.rcvbuf as u64,
            );
            set(
                l.feed,
                counter::LINE_RCVBUF_CAPPED + i,
                u64::from(l.socket.info.rcvbuf_capped()),
            );
        }
    }

    /// Re-evaluates a few slots per cycle and tells the subscriber of changes.
    fn sweep(&mut self, now: u64) {
        let Some(ch) = &mut self.changes else { return };
        let table = self.handler.table();
        let n = table.len();
        if n == 0 {
            return;
        }
        for _ in 0..SWEEP_PER_CYCLE.min(n) {
            let id = ch.cursor % n;
            ch.cursor = (ch.cursor + 1) % n;
            let r = table.record(id as u32);
            let Some(symbol) = r.symbol else { continue };
            let offset = self.handler.offset(r.feed);
            let new = verdict(&r.facts(), &table.feed_status(r.feed), offset, now);
            let who = Some((r.feed, symbol));
            // A slot given to another symbol: that one's first verdict.
            let old = match ch.last[id] {
                (w, old) if w == who => old,
                _ => Reasons::NO_QUOTE,
            };
            if new != old {
                let change = VerdictChange {
                    feed: r.feed,
                    symbol,
                    old,
                    new,
                    time_ns: now,
                };
                if !ch.send(change, &mut self.stats.change_drops) {
                    // Kept as last told: the next sweep tells the change
                    // again (as it then stands), rather than never.
                    continue;
                }
            }
            ch.last[id] = (who, new);
        }
    }
}

/// Refuses a channel whose `listen` takes a line's port (any feed's): a
/// replay routes that (the line's address first), but live the two
/// sockets cannot both bind it; said plainly, before anything starts,
/// not as "Address already in use".
fn shared_ports(config: &Config) -> anyhow::Result<()> {
    let lines: Vec<(&str, std::net::SocketAddrV4)> = config
        .feeds
        .iter()
        .flat_map(|g| g.services().into_iter().map(move |s| (g.name.as_str(), s)))
        .filter_map(|(g, s)| match s.receive {
            Receive::Lines(a) => Some(a.into_iter().map(move |l| (g, l))),
            _ => None,
        })
        .flatten()
        .collect();
    for f in &config.feeds {
        for s in f.services() {
            let Receive::Channel(c) = s.receive else {
                continue;
            };
            let listen = c.listen;
            if let (Some(_), Some((g, l))) = (
                c.server,
                lines.iter().find(|(_, l)| listen_takes(listen, *l)),
            ) {
                anyhow::bail!(
                    "feed '{}': {} {listen} takes the port of feed '{g}' line {l}: live, the two \
                     sockets cannot both bind it (choose another port)",
                    f.name,
                    s.key
                );
            }
        }
    }
    Ok(())
}

/// Whether `a` and `b` name the same place (their directories the same,
/// links and `..` resolved, and the same name in it), whether or not a
/// file is there yet; a symbolic link names where it points (followed
/// a few times), dangling or not.
fn same_place(a: &std::path::Path, b: &std::path::Path) -> bool {
    let place = |p: &std::path::Path| {
        let mut p = p.to_path_buf();
        for _ in 0..8 {
            match std::fs::read_link(&p) {
                Ok(to) => p = p.parent().map_or(to.clone(), |d| d.join(&to)),
                Err(_) => break,
            }
        }
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => std::path::Path::new("."),
        };
        Some(std::fs::canonicalize(dir).ok()?.join(p.file_name()?))
    };
    place(a).is_some_and(|x| Some(x) == place(b))
}

/// Refuses to empty a file that holds something other than a capture (a
/// configuration, a publication, anyone's data named by mistake): only an
/// empty file or an earlier capture is replaced.
fn refuse_to_replace(path: &std::path::Path) -> anyhow::Result<()> {
    use std::io::Read;
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() && m.len() > 0 => {}
        _ => return Ok(()),
    }
    let mut magic = [0u8; 4];
    // The open file is checked to be regular (never a FIFO swapped in).
    let read = crate::sys::open_regular(path).and_then(|f| f.take(4).read(&mut magic));
    match read {
        Ok(4) if crate::capture::is_capture_magic(magic) => Ok(()),
        Ok(_) => anyhow::bail!(
            "the file holds something other than a capture: refusing to replace it (remove it, or name another file)"
        ),
        Err(e) => Err(e.into()),
    }
}

/// Whether counter `id` of a feed is one the sidecar keeps for its lines
/// (`Sidecar::line_counters`), carried over to a publication made anew;
/// every other starts over there with the feeds' state.
pub fn carried_counter(id: usize) -> bool {
    let per_line = [
        counter::LINE_PACKETS,
        counter::LINE_MESSAGES,
        counter::LINE_REJECTED,
        counter::LINE_KERNEL_DROPS,
        counter::LINE_RCVBUF,
        counter::LINE_RCVBUF_CAPPED,
    ];
    matches!(
        id,
        counter::KERNEL_DROPS | counter::UNWANTED | counter::CHANNEL_WRONG_SOURCE
    ) || per_line
        .iter()
        .any(|&first| (first..first + COPIES).contains(&id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_log::logs_of;

    /// A socket without kernel timestamps or without the kernel's drop
    /// counter is warned about, each in a line of its own; one with both,
    /// a receive buffer granted, in none.
    #[test]
    fn a_socket_missing_a_kernel_feature_is_warned_about() {
        let info = |timestamps, drop_counter| crate::sys::udp::LineInfo {
            addr: "239.1.1.1:30001".parse().unwrap(),
            membership: "any-source".into(),
            rcvbuf: 2 << 20,
            rcvbuf_requested: 1 << 20,
            rcvbuf_error: None,
            timestamps,
            drop_counter,
        };
        assert_eq!(logs_of(|| warn_of_socket("lp1", &info(true, true))), "");
        let log = logs_of(|| warn_of_socket("lp1", &info(true, false)));
        assert!(log.contains("no kernel drop counter"), "{log}");
        let log = logs_of(|| warn_of_socket("lp1", &info(false, true)));
        assert!(log.contains("no kernel receive timestamps"), "{log}");
    }

    /// A line wanted and not wanted again and again (a snapshot loop, or
    /// forged packets making it so) logs at most a line each
    /// [`MEMBERSHIP_LOG_NS`], with the count held back; the state the
    /// held-back changes left is logged once the interval has passed.
    #[test]
    fn membership_churn_logs_a_few_lines_and_the_state_it_left() {
        let config = Config::parse(
            "[[feed]]\nname = \"lp1\"\nkind = \"full\"\nlines = [\"127.0.0.1:1\"]\n\
             stale_threshold_ms = 1000\nsource_threshold_ms = 1000\n",
            "t",
        )
        .unwrap();
        let socket = LineSocket::open(
            "127.0.0.1:0".parse().unwrap(),
            None,
            std::net::Ipv4Addr::LOCALHOST,
            1 << 16,
        )
        .unwrap();
        let mut line = Line::new(0, 0, socket, 4);
        let t = 1_000_000_000_000u64;
        let churn = logs_of(|| {
            for k in 0..1_000u64 {
                let want = k % 2 == 1;
                line.wanted = want;
                membership_changed(&config, &mut line, want, t + k * 1_000);
            }
        });
        assert_eq!(churn.lines().count(), 1, "{churn}");
        assert_eq!(line.membership_log.held(), 999);
        // Past the interval, the loop logs where the changes left it.
        let settled = logs_of(|| membership_settled(&config, &mut line, t + MEMBERSHIP_LOG_NS));
        assert!(
            settled.contains("line wanted again (after 999 changes not logged)"),
            "{settled}"
        );
        assert_eq!(line.membership_log.held(), 0);
        // A join failing each time it is wanted, wanted and not wanted in
        // turn (its leave then changes nothing): the first failure is
        // warned about, then one a minute, and nothing else is logged
        // meanwhile but at the membership lines' own pace.
        let t = t + 10 * MEMBERSHIP_LOG_NS;
        let failing = logs_of(|| {
            for k in 0..1_000u64 {
                let want = k % 2 == 0;
                let result = match want {
                    true => Err(std::io::Error::from_raw_os_error(libc::ENODEV)),
                    false => Ok(false),
                };
                membership_result("lp1", &mut line, want, result, t + k * 1_000_000);
            }
        });
        let warned = failing.matches("line join failed").count();
        assert_eq!(warned, 1, "{failing}");
        assert!(failing.lines().count() <= 1 + 4, "{failing}");
        let later = logs_of(|| {
            let e = std::io::Error::from_raw_os_error(libc::ENODEV);
            membership_result("lp1", &mut line, true, Err(e), t + MEMBERSHIP_WARN_NS);
        });
        assert_eq!(later.matches("line join failed").count(), 1, "{later}");
        assert!(later.contains("since the last warning"), "{later}");
        // A change done, then a new failure within the minute: a new
        // trouble, warned about at once.
        let t = t + 2 * MEMBERSHIP_WARN_NS;
        let again = logs_of(|| {
            let e = || Err(std::io::Error::from_raw_os_error(libc::ENODEV));
            membership_result("lp1", &mut line, true, e(), t);
            membership_result("lp1", &mut line, true, Ok(true), t + 1_000_000_000);
            membership_result("lp1", &mut line, false, e(), t + 10_000_000_000);
        });
        assert_eq!(again.matches("line join failed").count(), 1, "{again}");
        assert_eq!(again.matches("line leave failed").count(), 1, "{again}");
    }

    /// What the sidecar writes for the feeds' lines is exactly what
    /// [`carried_counter`] names (the metrics monitor starts every other
    /// count over when the publication is made anew): each id written is
    /// carried, and each carried id is written for a feed of two lines
    /// and a recovery channel.
    #[test]
    fn the_line_counters_written_are_those_carried() {
        let port = || crate::demo::free_port().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let config = Config::parse(
            &format!(
                "[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{}\"\n\
                 [[feed]]\nname = \"nq\"\nprotocol = \"itch50\"\n\
                 lines = [\"127.0.0.1:{}\", \"127.0.0.1:{}\"]\nrecovery = \"127.0.0.1:{}\"\n\
                 stale_threshold_ms = 1000\nsource_threshold_ms = 1000\n",
                dir.path().join("shm").display(),
                port(),
                port(),
                port()
            ),
            "t",
        )
        .unwrap();
        let sidecar = Sidecar::start(&config).unwrap();
        let mut written = std::collections::BTreeSet::new();
        sidecar.line_counters(|feed, id, _| {
            assert_eq!(feed, 0);
            written.insert(id);
        });
        let carried: std::collections::BTreeSet<usize> = (0..counter::ALL)
            .filter(|&id| carried_counter(id))
            .collect();
        assert_eq!(written, carried);
    }

    /// One ITCH data packet of session `LIVE000001` holding one System
    /// Event message at sequence `seq`.
    fn itch_packet(seq: u64) -> Vec<u8> {
        let event = [b'S', 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, b'Q'];
        let mut b = crate::protocol::itch50::PacketBuilder::new(
            crate::protocol::itch50::Session(*b"LIVE000001"),
            seq,
        );
        b.message(&event);
        b.finish().to_vec()
    }

    /// A channel whose last cycle's requests all failed sends one request
    /// the next cycle, not its burst; once one went, the rest follow at
    /// the next poll, a millisecond on.
    #[test]
    fn after_requests_all_failed_a_channel_tries_one() {
        let server = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        server.set_nonblocking(true).unwrap();
        let line = std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cfg = Config::parse(
            &format!(
                "[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{}\"\n\
                 [[feed]]\nname = \"nq\"\nprotocol = \"itch50\"\nlines = [\"{line}\"]\n\
                 recovery = \"{}\"\ngap_timeout_ms = 60000\nrequest_interval_ms = 60000\n\
                 stale_threshold_ms = 1000\nsource_threshold_ms = 1000\n",
                dir.path().join("shm").display(),
                server.local_addr().unwrap()
            ),
            "test",
        )
        .unwrap();
        let mut sidecar = Sidecar::start(&cfg).unwrap();
        // As after a cycle whose every request failed.
        sidecar.requests_failing[0] = true;
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for seq in [1, 3, 5, 7] {
            tx.send_to(&itch_packet(seq), line).unwrap();
        }
        // All four queued before the cycle that takes them: three gaps.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let received = |sidecar: &Sidecar| sidecar.handler().feeds()[0].counters.packets;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut now = now_ns();
        while received(&sidecar) < 4 {
            assert!(std::time::Instant::now() < deadline, "not received");
            sidecar.cycle(now);
            now += 100_000;
        }
        let asked = || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            let mut buf = [0u8; 64];
            std::iter::from_fn(|| server.recv_from(&mut buf).ok()).count()
        };
        assert_eq!(asked(), 1, "one, not the burst");
        assert!(!sidecar.requests_failing[0], "it went");
        sidecar.cycle(now + 2_000_000);
        assert_eq!(asked(), 2, "the rest");
        drop(sidecar);
    }
}
