//! Sequencing of one MoldUDP64 stream (spec §3.1–3.2): sessions, hold-back
//! in sequence order, gaps with deadlines, fills from any line or the
//! recovery channel, expiry and give-up. Messages come out, through the
//! caller's `apply`, strictly in sequence order: a book is only ever built
//! that way.
//!
//! Time is passed in (ns since the Unix epoch, local clock). The time a gap
//! opens is clamped to the latest time this stream has seen, so deadlines
//! never decrease from one gap to the next and expiry gives up a prefix of
//! the open gaps, lowest first, as the spec orders. The last sequence,
//! `u64::MAX`, has no successor: once it is applied `next` stays on it, the
//! stream is ended (every later message of the session is a duplicate,
//! however many copies come) and `ticks_lost` saturates.
//!
//! Memory is bounded: at most `max_held` messages are held after a packet
//! (plus one packet's worth while it is applied), each in a 64-byte record
//! (a known ITCH message is at most 50 bytes; of an unknown type only the
//! first 63 bytes are kept, enough for its header); at most [`MAX_GAPS`]
//! gaps are open (beyond, the lowest is given up, as for `max_held`); a
//! gap keeps the sequences it received only until they are applied (one
//! held in the gap and applied later is dropped from it then), so what the
//! gaps keep is within what is held, and the vectors that keep them, the
//! open gaps' and those pooled for reuse, hold at most
//! [`fill_budget`]`(max_held)` sequences together (beyond, pooled ones are
//! freed first, then the lowest gap is given up, as for `max_held`); the
//! last [`PAST_SESSIONS`] sessions are remembered to recognise late packets
//! of an earlier session. Stores grow on demand, amortised, and are kept
//! across sessions: no allocation per message after warm-up.

use super::event::{Event, Outcome};
use super::map::U64Map;
use super::message::Message;
use super::mold::{Kind, Packet, Session};
use crate::filled::Filled;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet, VecDeque};

/// Most gaps open at once; one more gives up the lowest.
pub const MAX_GAPS: usize = 65_536;
/// Sequences that the gaps' fill vectors (open gaps' and pooled ones', by
/// capacity) may hold together, a stream with `max_held` messages held at
/// most: four per message held (what the gaps keep is within what is held,
/// and a vector grows by doubling), and sixteen a gap (a few fills each),
/// 8 bytes each: 32 bytes a `max_held` and 8 MiB.
pub const fn fill_budget(max_held: usize) -> usize {
    max_held.saturating_mul(4).saturating_add(16 * MAX_GAPS)
}
/// Earlier sessions remembered per stream: over fifteen years of one
/// session a trading day.
pub const PAST_SESSIONS: usize = 4096;
/// Bytes of one held record: a length byte and up to 63 message bytes.
const RECORD: usize = 64;

/// What the messages come out to, in sequence order: `apply(q, m)` for
/// message `m` of sequence `q`. A closure is one; the feed's state is
/// another, inlined into the sequencer's loops.
pub trait Apply {
    /// Message `m`, of sequence `q`.
    fn apply(&mut self, q: u64, m: Message<'_>);
}

impl<F: FnMut(u64, Message<'_>)> Apply for F {
    #[inline(always)]
    fn apply(&mut self, q: u64, m: Message<'_>) {
        self(q, m)
    }
}

/// The stream's settings (spec §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// A gap open longer than this is given up, ns.
    pub gap_timeout_ns: u64,
    /// Most messages held after a packet before the lowest gap is given up.
    pub max_held: usize,
    /// A first packet beyond `1 + join_gap_max` is a mid-session join.
    pub join_gap_max: u64,
}

/// The stream's counters (they carry on across sessions).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Blocks in accepted data packets (of the session current at their arrival, not of an earlier one), duplicates included; all sessions.
    pub messages: u64,
    /// Accepted heartbeats (count 0; end of session not counted), all sessions.
    pub heartbeats: u64,
    /// Messages given up: missing when their gap expired or was given up.
    pub ticks_lost: u64,
    /// Messages received again, below `next` or already held.
    pub duplicates: u64,
    /// Messages that filled a gap.
    pub recovered: u64,
    /// New sessions after the first.
    pub session_changes: u64,
    /// Packets of an earlier session.
    pub stale_session: u64,
    /// Gaps given up (expired, or for room).
    pub gaps_given_up: u64,
    /// Snapshots merged (glimpse G3.4).
    pub snapshots: u64,
    /// Held messages below a merged snapshot's N, discarded.
    pub snapshot_discarded: u64,
    /// Held messages discarded for room while awaiting a snapshot.
    pub snapshot_overflow: u64,
    /// Gaps filled (their last missing message received, not given up), by
    /// the time from the packet that revealed them (their opening) to the
    /// one that filled them, per bucket of
    /// [`recovery_bucket_bound_ns`](crate::shm::counter::recovery_bucket_bound_ns)
    /// (the last open).
    pub fill_latency: [u64; crate::shm::counter::RECOVERY_BUCKETS],
}

/// The bucket of [`Counters::fill_latency`] a fill `ns` after its gap
/// opened counts in: the first whose bound it does not exceed, else the
/// open one.
pub fn fill_bucket(ns: u64) -> usize {
    use crate::shm::counter::{recovery_bucket_bound_ns, RECOVERY_BUCKETS};
    (0..RECOVERY_BUCKETS - 1)
        .find(|&i| ns <= recovery_bucket_bound_ns(i))
        .unwrap_or(RECOVERY_BUCKETS - 1)
}

pub use super::config::Triggers;

/// Why a snapshot was asked for (glimpse G3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// A mid-session join, or the session's first gap given up.
    Join,
    /// Any other gap given up.
    Gap,
    /// An operator's request.
    Operator,
}

impl Trigger {
    /// Its name in `snapshot_triggers` and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Join => "join",
            Trigger::Gap => "gap",
            Trigger::Operator => "operator",
        }
    }
}

/// A packet's session against a stream's ([`Sequencer::classify`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionOf {
    /// The stream has had no packet yet: the packet starts its first session.
    First,
    /// The stream's current session.
    Current,
    /// A session the stream has not had: the packet starts it (spec §3.1).
    Next,
    /// A session the stream had before its current one.
    Past,
}

#[derive(Debug, Clone)]
struct Gap {
    lo: u64,
    hi: u64,
    /// Sequences in `lo..hi` not received yet.
    missing: u64,
    /// Given up when an event comes strictly after this, ns.
    deadline: u64,
    /// Sequences received into the gap.
    filled: Filled,
    /// The gap a session's first packet revealed: given up, the stream
    /// counts as joined and its messages are not lost ticks.
    first: bool,
    /// The gap a snapshot's merge opened: given up by its deadline, not
    /// for room while `max_held` more messages are held above it (glimpse
    /// G7.13: a spin longer than `max_held` messages of multicast must
    /// not loop into snapshot after snapshot); past that, as any gap, so
    /// that what is held stays bounded (see [`Sequencer::over_held`]).
    merged: bool,
}

/// Held messages: records by sequence.
#[derive(Debug, Clone)]
struct Held {
    index: U64Map<u32>,
    records: Vec<[u8; RECORD]>,
    free: Vec<u32>,
}

impl Held {
    fn new(capacity: usize) -> Held {
        Held {
            index: U64Map::with_capacity(capacity, 0),
            records: Vec::with_capacity(capacity),
            free: Vec::with_capacity(capacity),
        }
    }

    fn put(&mut self, q: u64, bytes: &[u8]) {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.records.push([0; RECORD]);
                (self.records.len() - 1) as u32
            }
        };
        let r = &mut self.records[slot as usize];
        let n = bytes.len().min(RECORD - 1);
        r[0] = n as u8;
        r[1..1 + n].copy_from_slice(&bytes[..n]);
        self.index.insert(q, slot);
    }

    /// Takes `q` out and hands its bytes to `f`.
    #[inline]
    fn take(&mut self, q: u64, f: impl FnOnce(&[u8])) -> bool {
        // Nothing held (most packets, in order): no probe of the index,
        // whose slot would be a cache miss.
        if self.index.is_empty() {
            return false;
        }
        let Some(slot) = self.index.remove(q) else {
            return false;
        };
        let r = &self.records[slot as usize];
        f(&r[1..1 + r[0] as usize]);
        self.free.push(slot);
        true
    }

    /// Drops every record, keeping the memory: the index empties what
    /// was inserted since its last clear, and the records, plain bytes,
    /// are reused from the first again (no walk over them).
    fn clear(&mut self) {
        self.index.clear();
        self.free.clear();
        self.records.clear();
    }
}

/// The sessions a stream had before its current one, the last
/// [`PAST_SESSIONS`] of them: in arrival order, to forget the oldest, and
/// in a set, so that a packet of a session other than the current one is
/// looked up at once (a flood of them costs a hash each, not a scan).
/// Allocated whole with the stream (about 220 KiB: the set at twice its
/// most entries, so that forgetting and adding rehashes in place), so a
/// session change allocates nothing.
#[derive(Debug)]
struct Past {
    order: VecDeque<Session>,
    set: HashSet<Session>,
}

impl Default for Past {
    fn default() -> Past {
        Past {
            order: VecDeque::with_capacity(PAST_SESSIONS + 1),
            set: HashSet::with_capacity(2 * PAST_SESSIONS),
        }
    }
}

impl Past {
    /// `s` is now an earlier session; the oldest goes when there are more
    /// than [`PAST_SESSIONS`].
    fn push(&mut self, s: Session) {
        if self.set.insert(s) {
            self.order.push_back(s);
        }
        if self.order.len() > PAST_SESSIONS {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
    }
}

/// One stream's sequencing state.
#[derive(Debug)]
pub struct Sequencer {
    settings: Settings,
    session: Option<Session>,
    past: Past,
    /// The next sequence to apply; `None` before the session's first packet.
    next: Option<u64>,
    /// One past the highest sequence received (or revealed by a heartbeat).
    high: u64,
    /// The last sequence, `u64::MAX`, has been applied: `next` cannot move
    /// past it, so this is what tells its copies from it.
    ended: bool,
    /// Open gaps, ascending and disjoint, and gaps filled since (closed:
    /// `missing` 0, kept in place so that closing one in the middle of
    /// many moves none), never at either end; dropped all at once when
    /// they outnumber the open ones.
    gaps: VecDeque<Gap>,
    /// Closed gaps in `gaps`.
    closed: usize,
    /// Emptied gaps' `filled`, for reuse.
    pool: Vec<Filled>,
    /// Sequences the open gaps' `filled` and the pool's can hold together
    /// (their capacities): grows as fills do, kept within `fill_budget`.
    fill_capacity: usize,
    /// [`fill_budget`] of `max_held`.
    fill_budget: usize,
    held: Held,
    joined: bool,
    gave_up: bool,
    latest_t: u64,
    counters: Counters,
    /// Gap events recorded for `--explain` ([`Sequencer::record`]), else `None`.
    log: Option<Vec<Event>>,
    /// Snapshots (glimpse), with what may start one by itself; `None`
    /// without a snapshot server.
    snapshots: Option<Triggers>,
    /// Awaiting a snapshot: nothing is applied, everything from `next` on
    /// is held (glimpse G3.2).
    awaiting: bool,
    /// Triggers may start a snapshot by themselves (cleared by a login
    /// rejected as not authorized, set again by a merge or a new session).
    auto: bool,
    /// The trigger that started awaiting, until [`take_trigger`](Self::take_trigger).
    triggered: Option<Trigger>,
    /// `next` when the current wait began (none: no wait, a merge ended
    /// it, or no stream yet): what a wait given up without a snapshot
    /// skipped for room lies from there to `next`.
    wait_from: Option<u64>,
    /// While awaiting, every held sequence, lowest on top: the lowest
    /// goes first for room, and the merge releases them in order.
    waiting: BinaryHeap<Reverse<u64>>,
}

impl Sequencer {
    /// A stream before its first packet.
    pub fn new(settings: Settings) -> Sequencer {
        Sequencer {
            settings,
            session: None,
            past: Past::default(),
            next: None,
            high: 0,
            ended: false,
            gaps: VecDeque::new(),
            closed: 0,
            pool: Vec::new(),
            fill_capacity: 0,
            fill_budget: fill_budget(settings.max_held),
            held: Held::new(settings.max_held.min(1 << 16)),
            joined: false,
            gave_up: false,
            latest_t: 0,
            counters: Counters::default(),
            log: None,
            snapshots: None,
            awaiting: false,
            auto: true,
            triggered: None,
            wait_from: None,
            waiting: BinaryHeap::new(),
        }
    }

    /// Lets snapshots cure this stream (glimpse G3), `triggers` saying what
    /// starts one by itself; an operator's request always may.
    pub fn enable_snapshots(&mut self, triggers: Triggers) {
        self.snapshots = Some(triggers);
        if self.waiting.capacity() == 0 {
            self.waiting = BinaryHeap::with_capacity(self.settings.max_held.min(1 << 16));
        }
    }

    /// Awaiting a snapshot (glimpse G3.2).
    pub fn awaiting(&self) -> bool {
        self.awaiting
    }

    /// Whether a snapshot's End of Snapshot `n` lies within reach of the
    /// stream: at most `max_held` past `high`, the most multicast a wait
    /// holds (decided where glimpse G3.4 is silent). One further ahead is
    /// not merged: every real packet below it would be a duplicate, the
    /// feed deaf while it reads healthy, until the stream got there.
    pub fn within_reach(&self, n: u64) -> bool {
        n <= self.high.saturating_add(self.settings.max_held as u64)
    }

    /// Triggers may start a snapshot by themselves.
    pub fn auto(&self) -> bool {
        self.auto
    }

    /// Stops (or lets again) triggers starting snapshots by themselves.
    pub fn set_auto(&mut self, on: bool) {
        self.auto = on;
    }

    /// The trigger that started awaiting since the last call, if any.
    pub fn take_trigger(&mut self) -> Option<Trigger> {
        self.triggered.take()
    }

    /// Whether an operator's request would start awaiting now
    /// ([`request_snapshot`](Self::request_snapshot)).
    pub fn may_request(&self) -> bool {
        self.snapshots.is_some() && self.session.is_some() && !self.awaiting
    }

    /// An operator's request for a snapshot (glimpse G3.1): starts
    /// awaiting when snapshots are enabled, the stream has a session and
    /// is not awaiting already. Returns whether it did.
    pub fn request_snapshot(&mut self) -> bool {
        if !self.may_request() {
            return false;
        }
        self.await_snapshot(Trigger::Operator);
        true
    }

    /// Starts a snapshot for `trigger` if it may start one by itself.
    fn trigger(&mut self, trigger: Trigger) {
        let on = match (self.snapshots, trigger) {
            (Some(t), Trigger::Join) => t.join,
            (Some(t), Trigger::Gap) => t.gap,
            (Some(_), Trigger::Operator) => true,
            (None, _) => false,
        };
        if on && self.auto && !self.awaiting {
            self.await_snapshot(trigger);
        }
    }

    /// Starts awaiting (glimpse G3.2): open gaps are dropped (no lost
    /// ticks, no more requests); what they held stays held, listed in
    /// `waiting` with every other held message.
    #[cold]
    fn await_snapshot(&mut self, trigger: Trigger) {
        self.awaiting = true;
        self.triggered = Some(trigger);
        self.wait_from = self.next;
        self.waiting.clear();
        let next = self.next.unwrap_or(1);
        // Held: every received sequence of `[next, high)`, that is all of
        // it but what the open gaps still miss.
        let mut lo = next;
        self.closed = 0;
        while let Some(g) = self.gaps.pop_front() {
            // A closed gap's messages are all held: part of the run up to
            // the next open one.
            if g.missing == 0 {
                continue;
            }
            self.waiting.extend((lo..g.lo.max(lo)).map(Reverse));
            self.waiting
                .extend(g.filled.iter().filter(|&q| q >= next).map(Reverse));
            lo = lo.max(g.hi);
            self.pool.push(g.filled);
        }
        self.waiting.extend((lo..self.high.max(lo)).map(Reverse));
        // The last sequence has no successor for `high` to be: held, it
        // lies at `high` itself.
        if self.high == u64::MAX && self.held.index.contains(u64::MAX) {
            self.waiting.push(Reverse(u64::MAX));
        }
        debug_assert_eq!(self.waiting.len(), self.held.index.len());
    }

    /// Merges a snapshot that reflects every message below `n` (glimpse
    /// G3.4 steps 2–6), at `t`: held messages below `n` are discarded,
    /// the stream goes on from `n`, the rest as [`release`](Self::release).
    /// The caller has replaced the books first. Returns messages applied.
    pub fn merge(&mut self, n: u64, t: u64, apply: &mut impl Apply) -> u32 {
        while let Some(&Reverse(q)) = self.waiting.peek() {
            if q >= n {
                break;
            }
            self.waiting.pop();
            self.held.take(q, |_| {});
            self.counters.snapshot_discarded += 1;
        }
        self.next = Some(n);
        // The snapshot holds what the wait skipped for room.
        self.wait_from = None;
        self.ended = false;
        self.high = self.high.max(n);
        self.joined = false;
        self.gave_up = false;
        self.auto = true;
        self.counters.snapshots += 1;
        self.open_waited(t, apply, true)
    }

    /// Ends awaiting without a snapshot, or after [`merge`](Self::merge)
    /// (glimpse G3.4 steps 4–5): when any sequence of `[next, high)` is
    /// not held, that range becomes one open gap revealed at `t` (its held
    /// messages count as present, not recovered), then held messages are
    /// applied from `next` while contiguous. Without a snapshot, what the
    /// wait's overflow stepped `next` past (discarded, or never received
    /// below those) is lost for good: counted in `ticks_lost`, and the
    /// stream is suspect until a snapshot merges, as after a gap given up
    /// (a stream that joined is suspect already). Returns messages applied.
    pub fn release(&mut self, t: u64, apply: &mut impl Apply) -> u32 {
        self.open_waited(t, apply, false)
    }

    /// [`release`](Self::release); `merged`: after a merge, whose gap may
    /// hold twice `max_held` above it before it is given up for room
    /// (glimpse G7.13: that gap alone; a wait given up opens an ordinary
    /// one).
    fn open_waited(&mut self, t: u64, apply: &mut impl Apply, merged: bool) -> u32 {
        let t = t.max(self.latest_t);
        self.latest_t = t;
        self.awaiting = false;
        if let (Some(from), Some(next)) = (self.wait_from.take(), self.next) {
            let skipped = next.saturating_sub(from);
            if skipped > 0 && !self.joined {
                self.counters.ticks_lost = self.counters.ticks_lost.saturating_add(skipped);
                self.gave_up = true;
            }
        }
        let next = self.next.unwrap_or(1);
        // The last sequence has no successor for `high` to be: held, it
        // lies at `high` itself, outside `[next, high)`, and stays held
        // above the gap (as outside a wait) until `next` reaches it.
        let last = self.high == u64::MAX && self.held.index.contains(u64::MAX);
        let held = (self.waiting.len() as u64).saturating_sub(u64::from(last));
        if held < self.high.saturating_sub(next) {
            let mut filled = self.pool.pop().unwrap_or_default();
            filled.clear();
            let capacity = filled.capacity();
            while let Some(Reverse(q)) = self.waiting.pop() {
                if q < self.high {
                    filled.insert(q);
                }
            }
            self.fill_capacity += filled.capacity() - capacity;
            let deadline = t.saturating_add(self.settings.gap_timeout_ns);
            self.gaps.push_back(Gap {
                lo: next,
                hi: self.high,
                missing: self.high - next - held,
                deadline,
                filled,
                first: false,
                merged,
            });
            if self.log.is_some() {
                self.note(Event::GapOpened {
                    lo: next,
                    hi: self.high,
                    deadline,
                });
            }
        }
        self.waiting.clear();
        let n = self.drain(apply);
        n + self.bound_fills(apply)
    }

    /// The session, `None` before any packet.
    pub fn session(&self) -> Option<Session> {
        self.session
    }

    /// How a packet of `session` stands against this stream's sessions:
    /// the current one's packets (nearly all) need no look-up.
    pub fn classify(&self, session: Session) -> SessionOf {
        match self.session {
            None => SessionOf::First,
            Some(cur) if cur == session => SessionOf::Current,
            // A session this stream had before its current one: a packet
            // of it is a late copy, counted, otherwise ignored.
            Some(_) if self.past.set.contains(&session) => SessionOf::Past,
            Some(_) => SessionOf::Next,
        }
    }

    /// The next sequence to apply, `None` before the session's first packet.
    pub fn next(&self) -> Option<u64> {
        self.next
    }

    /// Gaps open now.
    pub fn gaps_open(&self) -> usize {
        self.gaps.len() - self.closed
    }

    /// The open gaps, lowest first: `[lo, hi)`, still missing, deadline (ns).
    pub fn gaps(&self) -> impl Iterator<Item = (u64, u64, u64, u64)> + '_ {
        self.gaps
            .iter()
            .filter(|g| g.missing > 0)
            .map(|g| (g.lo, g.hi, g.missing, g.deadline))
    }

    /// Whether an open gap starts at `lo`: O(log gaps).
    pub fn has_gap_at(&self, lo: u64) -> bool {
        let i = self.gaps.partition_point(|g| g.lo < lo);
        self.gaps
            .get(i)
            .is_some_and(|g| g.lo == lo && g.missing > 0)
    }

    /// One past the highest sequence received (0 before any packet).
    pub fn high(&self) -> u64 {
        self.high
    }

    /// Calls `f(lo, hi, deadline)` for each run `lo..hi` of sequences the
    /// open gaps still miss, lowest first, with its gap's deadline (ns);
    /// stops once `f` returns false.
    pub fn missing(&self, mut f: impl FnMut(u64, u64, u64) -> bool) {
        // The lowest gap's fills below `next` are applied and dropped
        // from it: its missing runs start at `next`.
        let next = self.next.unwrap_or(0);
        for g in self.gaps.iter().filter(|g| g.missing > 0) {
            let mut lo = g.lo.max(next);
            for (start, end) in g.filled.runs().chain(std::iter::once((g.hi, g.hi))) {
                if start > lo && !f(lo, start, g.deadline) {
                    return;
                }
                lo = lo.max(end);
            }
        }
    }

    /// Messages held now.
    pub fn held(&self) -> usize {
        self.held.index.len()
    }

    /// The stream joined mid-session (or gave up its session's first gap).
    pub fn joined(&self) -> bool {
        self.joined
    }

    /// A gap is open, one was given up, or the stream joined mid-session:
    /// the books cannot be trusted.
    pub fn suspect(&self) -> bool {
        !self.gaps.is_empty() || self.gave_up || self.joined || self.awaiting
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Starts (or stops) recording gap events: opened, filled, given up,
    /// joined. They are taken with [`take_events`](Self::take_events).
    pub fn record(&mut self, on: bool) {
        self.log = on.then(Vec::new);
    }

    /// Moves the gap events recorded so far to the end of `into`.
    pub fn take_events(&mut self, into: &mut Vec<Event>) {
        if let Some(log) = &mut self.log {
            into.append(log);
        }
    }

    #[cold]
    fn note(&mut self, e: Event) {
        if let Some(log) = &mut self.log {
            log.push(e);
        }
    }

    /// The clock stepped back to `now` (live: the receive loop saw it): the
    /// latest time seen is `now` again, and no open gap's deadline lies more
    /// than `gap_timeout` after it. Kept, the step's time would hold every
    /// gap open, and every new gap's deadline, for as long as the step
    /// (deadlines stay in order: each is lowered alike). A replay calls
    /// it at a capture time more than `STEP_BACK_NS` behind the one before,
    /// as live; a smaller step back is clamped instead.
    pub fn on_clock_stepped_back(&mut self, now: u64) {
        self.latest_t = now;
        let bound = now.saturating_add(self.settings.gap_timeout_ns);
        for g in &mut self.gaps {
            g.deadline = g.deadline.min(bound);
        }
    }

    /// Gives up every open gap whose deadline is strictly before `t`, lowest
    /// first, applying what each unblocks. Call before every datagram routed
    /// to the stream (rejected ones too) and before every check. Returns the
    /// gaps given up.
    pub fn expire(&mut self, t: u64, apply: &mut impl FnMut(u64, Message<'_>)) -> u32 {
        self.expire_into(t, apply)
    }

    /// [`expire`](Self::expire), applying to any [`Apply`].
    pub fn expire_into(&mut self, t: u64, apply: &mut impl Apply) -> u32 {
        let mut n = 0;
        while self.gaps.front().is_some_and(|g| g.deadline < t) {
            self.give_up_lowest(false, apply);
            n += 1;
        }
        n
    }

    /// One accepted packet (any line, or the recovery channel) at `t`.
    pub fn on_packet<T: AsRef<[u8]>>(
        &mut self,
        packet: &Packet<T>,
        t: u64,
        apply: &mut impl FnMut(u64, Message<'_>),
    ) -> Outcome {
        self.on_packet_into(packet, t, apply)
    }

    /// [`on_packet`](Self::on_packet), applying to any [`Apply`].
    pub fn on_packet_into<T: AsRef<[u8]>>(
        &mut self,
        packet: &Packet<T>,
        t: u64,
        apply: &mut impl Apply,
    ) -> Outcome {
        let of = self.classify(packet.session());
        self.on_packet_of(packet, of, t, apply)
    }

    /// [`on_packet_into`](Self::on_packet_into) for a packet whose session
    /// the caller has classified (`of`, from [`classify`](Self::classify)
    /// since this stream's last packet), so that the past sessions are
    /// looked up once.
    pub fn on_packet_of<T: AsRef<[u8]>>(
        &mut self,
        packet: &Packet<T>,
        of: SessionOf,
        t: u64,
        apply: &mut impl Apply,
    ) -> Outcome {
        debug_assert_eq!(of, self.classify(packet.session()));
        let mut out = Outcome::default();
        let t = t.max(self.latest_t);
        self.latest_t = t;
        // `of` only tells a past session from a new one: the stream's own
        // state decides the rest.
        let s = packet.session();
        match self.session {
            Some(cur) if cur == s => {}
            Some(_) if of == SessionOf::Past => {
                self.counters.stale_session += 1;
                out.stale_session = true;
                return out;
            }
            Some(cur) => {
                self.past.push(cur);
                out.abandoned = self.awaiting;
                self.reset();
                self.session = Some(s);
                self.counters.session_changes += 1;
                out.new_session = true;
            }
            None => self.session = Some(s),
        }
        let start = packet.sequence();
        let first_packet = self.next.is_none();
        if first_packet {
            let first = if start > self.settings.join_gap_max.saturating_add(1) {
                self.joined = true;
                if self.log.is_some() {
                    self.note(Event::Joined { first: start });
                }
                // A joining packet sets `next` and `high` before its
                // messages are held (glimpse G3.2).
                self.next = Some(start);
                self.high = start;
                self.trigger(Trigger::Join);
                start
            } else {
                1
            };
            self.next = Some(first);
            self.high = first;
        }
        if self.awaiting {
            self.on_packet_awaiting(packet, &mut out);
            return out;
        }
        // Every kind reveals a gap up to its sequence.
        if start > self.high {
            out.gap = Some((self.high, start));
            self.open_gap(self.high, start, t, first_packet);
            self.high = start;
        }
        match packet.kind() {
            Kind::Heartbeat => {
                self.counters.heartbeats += 1;
                out.alive = out.gap.is_none() && self.gaps.is_empty() && self.ahead_of_books(start);
            }
            Kind::EndOfSession => out.end_of_session = true,
            Kind::Data(n) => {
                self.counters.messages += n as u64;
                let fresh = match start.checked_add(n as u64) {
                    Some(end) if self.in_order(start) => {
                        // Every message applied straight from the packet,
                        // as `receive` would one by one.
                        for (q, m) in packet.messages() {
                            apply.apply(q, m);
                        }
                        self.next = Some(end);
                        self.high = self.high.max(end);
                        out.applied += n as u32;
                        true
                    }
                    Some(end) if end <= self.next.unwrap_or(1) => {
                        // Every message below `next` (line B's copy of a
                        // packet applied from line A): each a duplicate, as
                        // `receive` would count it, without the walk.
                        self.counters.duplicates += n as u64;
                        out.duplicates += u32::from(n);
                        false
                    }
                    _ => self.receive_each(packet, t, apply, &mut out),
                };
                out.applied += self.drain(apply);
                while self.over_held() {
                    out.applied += self.give_up_lowest(true, apply);
                    out.given_up += 1;
                }
                if self.fill_capacity > self.fill_budget {
                    let before = self.counters.gaps_given_up;
                    out.applied += self.bound_fills(apply);
                    out.given_up += (self.counters.gaps_given_up - before) as u32;
                }
                out.alive = fresh;
            }
        }
        while self.gaps_open() > MAX_GAPS && !self.awaiting {
            out.applied += self.give_up_lowest(true, apply);
            out.given_up += 1;
        }
        out
    }

    /// More messages are held than the lowest gap may keep (itch50 §3.2:
    /// `max_held`): it is then given up for room. A snapshot merge's gap
    /// may keep twice as many (glimpse G7.13 exempts it until its
    /// deadline, for a spin longer than `max_held` messages of multicast;
    /// the letter would let a merge gap whose copies never come hold the
    /// whole stream for `gap_timeout_ms`, up to an hour: decided here).
    fn over_held(&self) -> bool {
        let (held, max) = (self.held.index.len(), self.settings.max_held);
        !self.awaiting
            && held > max
            && self
                .gaps
                .front()
                .is_some_and(|g| !g.merged || held > max.saturating_mul(2))
    }

    /// Whether a heartbeat of sequence `s` (the next message the server
    /// will send) may prove the stream alive: not when it names a message
    /// already applied (`s < next`). Such a heartbeat is a late copy, or
    /// comes from a stream behind the books (a snapshot whose N the
    /// multicast has not reached, or a bogus N, which would otherwise read
    /// healthy on a frozen book for as long as the stream takes to get
    /// there); the data packets below `next` are duplicates and prove
    /// nothing already (spec itch50 §3.1 step 5). A departure from §3.1
    /// step 3's letter (docs/itch.md).
    #[inline]
    fn ahead_of_books(&self, s: u64) -> bool {
        s >= self.next.unwrap_or(1)
    }

    /// A packet while awaiting a snapshot (glimpse G3.2): nothing is
    /// applied and no gap is revealed; a data message from `next` on not
    /// held yet is held, the rest are duplicates; then, while more than
    /// `max_held` are held, the lowest is discarded and `next` steps past it.
    #[cold]
    fn on_packet_awaiting<T: AsRef<[u8]>>(&mut self, packet: &Packet<T>, out: &mut Outcome) {
        let start = packet.sequence();
        match packet.kind() {
            Kind::Heartbeat | Kind::EndOfSession if start > self.high => self.high = start,
            Kind::Heartbeat => out.alive = self.ahead_of_books(start),
            Kind::EndOfSession => {}
            Kind::Data(n) => {
                self.counters.messages += u64::from(n);
                let next = self.next.unwrap_or(1);
                for (q, m) in packet.messages() {
                    if q < next || self.ended || self.held.index.contains(q) {
                        self.counters.duplicates += 1;
                        out.duplicates += 1;
                        continue;
                    }
                    self.held.put(q, m.bytes());
                    self.waiting.push(Reverse(q));
                    self.high = self.high.max(q.saturating_add(1));
                    out.alive = true;
                }
                while self.held.index.len() > self.settings.max_held {
                    let Some(Reverse(q)) = self.waiting.pop() else {
                        break;
                    };
                    self.held.take(q, |_| {});
                    self.counters.snapshot_overflow += 1;
                    self.next = Some(q.saturating_add(1));
                }
            }
        }
        if let Kind::Heartbeat = packet.kind() {
            self.counters.heartbeats += 1;
        }
        if let Kind::EndOfSession = packet.kind() {
            out.end_of_session = true;
        }
    }

    /// `n` records of a BinaryFILE, the last of sequence `last` (spec §5:
    /// record `i` has sequence `i + 1`; the file has no gaps and no
    /// sessions), the valid ones already applied in order by the caller:
    /// counted in `messages`, and `next` steps past `last`.
    pub fn on_file_records(&mut self, last: u64, n: u64) {
        self.counters.messages += n;
        self.next = Some(last.saturating_add(1));
        self.high = last.saturating_add(1);
    }

    /// Drops closed gaps from both ends, and all of them once they
    /// outnumber the open ones (O(1) a closed gap, amortised).
    fn trim_closed(&mut self) {
        while self.gaps.front().is_some_and(|g| g.missing == 0) {
            self.gaps.pop_front();
            self.closed -= 1;
        }
        while self.gaps.back().is_some_and(|g| g.missing == 0) {
            self.gaps.pop_back();
            self.closed -= 1;
        }
        if self.closed > 0 && 2 * self.closed > self.gaps.len() {
            self.gaps.retain(|g| g.missing > 0);
            self.closed = 0;
        }
    }

    fn open_gap(&mut self, lo: u64, hi: u64, t: u64, first: bool) {
        let mut filled = self.pool.pop().unwrap_or_default();
        filled.clear();
        let deadline = t.saturating_add(self.settings.gap_timeout_ns);
        self.gaps.push_back(Gap {
            lo,
            hi,
            missing: hi - lo,
            deadline,
            filled,
            first,
            merged: false,
        });
        if self.log.is_some() {
            self.note(Event::GapOpened { lo, hi, deadline });
        }
    }

    /// Each message of a data packet through [`receive`](Self::receive),
    /// counted in `out`; true when any was new.
    fn receive_each<T: AsRef<[u8]>>(
        &mut self,
        packet: &Packet<T>,
        t: u64,
        apply: &mut impl Apply,
        out: &mut Outcome,
    ) -> bool {
        let mut fresh = false;
        for (q, m) in packet.messages() {
            match self.receive(q, m, t, apply) {
                Received::Duplicate => {
                    self.counters.duplicates += 1;
                    out.duplicates += 1;
                }
                Received::Fill => {
                    self.counters.recovered += 1;
                    out.fills += 1;
                    fresh = true;
                }
                Received::Held => fresh = true,
                Received::Applied => {
                    out.applied += 1;
                    fresh = true;
                }
            }
        }
        fresh
    }

    /// True when a packet from `start` is next in order with no gap open
    /// (so nothing is held: held messages lie above a gap).
    #[inline]
    fn in_order(&self, start: u64) -> bool {
        start == self.next.unwrap_or(1) && self.gaps.is_empty() && !self.ended
    }

    #[inline]
    fn receive(&mut self, q: u64, m: Message<'_>, t: u64, apply: &mut impl Apply) -> Received {
        let next = self.next.unwrap_or(1);
        if q == next && self.gaps.is_empty() && !self.ended {
            // In order with no gap open, so nothing held (held messages lie
            // above a gap): applied straight from the packet.
            apply.apply(q, m);
            self.next = Some(q.saturating_add(1));
            self.ended = q == u64::MAX;
            self.high = self.high.max(q.saturating_add(1));
            return Received::Applied;
        }
        if q < next || self.ended || self.held.index.contains(q) {
            return Received::Duplicate;
        }
        let i = self.gaps.partition_point(|g| g.hi <= q);
        if let Some(g) = self.gaps.get_mut(i).filter(|g| g.lo <= q && g.missing > 0) {
            let capacity = g.filled.capacity();
            g.filled.insert(q);
            self.fill_capacity += g.filled.capacity() - capacity;
            g.missing -= 1;
            self.held.put(q, m.bytes());
            if g.missing == 0 {
                let (lo, hi) = (g.lo, g.hi);
                // Opened at its deadline less the timeout (both clamped
                // to the stream's latest time, as `t` is).
                let opened = g.deadline.saturating_sub(self.settings.gap_timeout_ns);
                self.counters.fill_latency[fill_bucket(t.saturating_sub(opened))] += 1;
                let filled = std::mem::take(&mut g.filled);
                self.pool.push(filled);
                self.closed += 1;
                self.trim_closed();
                if self.log.is_some() {
                    self.note(Event::GapFilled { lo, hi });
                }
            }
            return Received::Fill;
        }
        self.held.put(q, m.bytes());
        self.high = self.high.max(q.saturating_add(1));
        Received::Held
    }

    /// Applies held messages from `next` while they are there.
    #[inline]
    fn drain(&mut self, apply: &mut impl Apply) -> u32 {
        let Some(mut next) = self.next else { return 0 };
        let mut n = 0;
        while !self.ended && self.held.take(next, |b| apply.apply(next, Message::new(b))) {
            n += 1;
            match next.checked_add(1) {
                Some(q) => next = q,
                // The last sequence has no successor: `next` stays on it.
                None => self.ended = true,
            }
        }
        self.next = Some(next);
        // What the lowest gap received below `next` is applied now: it
        // keeps none of it (a gap kept open far ahead while the stream
        // goes on through it would keep one sequence a message).
        if n > 0 {
            if let Some(g) = self.gaps.front_mut() {
                g.filled.remove_below(next);
            }
        }
        n
    }

    /// While the fill vectors hold more than `fill_budget`: frees pooled
    /// ones, then gives up the lowest gap (for room, as for `max_held`;
    /// not a snapshot merge's, as for `max_held`), whose vector is pooled
    /// and freed in turn. Returns messages applied.
    #[cold]
    fn bound_fills(&mut self, apply: &mut impl Apply) -> u32 {
        let mut n = 0;
        while self.fill_capacity > self.fill_budget {
            if let Some(f) = self.pool.pop() {
                self.fill_capacity -= f.capacity();
            } else if self.gaps.front().is_some_and(|g| !g.merged) && !self.awaiting {
                n += self.give_up_lowest(true, apply);
            } else {
                break;
            }
        }
        n
    }

    /// Gives up the lowest open gap: its missing messages are lost (or, for
    /// a session's first gap, the stream counts as joined), what it holds
    /// is applied in order, and `next` steps over it. `room`: given up to
    /// make room, not by time (for the event log).
    fn give_up_lowest(&mut self, room: bool, apply: &mut impl Apply) -> u32 {
        let Some(mut g) = self.gaps.pop_front() else {
            return 0;
        };
        debug_assert!(g.missing > 0, "a closed gap at the front");
        self.trim_closed();
        if self.log.is_some() {
            self.note(Event::GapGivenUp {
                lo: g.lo,
                hi: g.hi,
                missing: g.missing,
                deadline: g.deadline,
                first: g.first,
                room,
            });
        }
        self.counters.gaps_given_up += 1;
        // The session's first gap given up counts as a join (glimpse G7.5).
        let trigger = if g.first {
            self.joined = true;
            Trigger::Join
        } else {
            self.counters.ticks_lost = self.counters.ticks_lost.saturating_add(g.missing);
            self.gave_up = true;
            Trigger::Gap
        };
        let mut n = 0;
        let next = self.next.unwrap_or(g.lo);
        for f in g.filled.iter().filter(|&f| f >= next) {
            if self.held.take(f, |b| apply.apply(f, Message::new(b))) {
                n += 1;
            }
        }
        self.next = Some(next.max(g.hi));
        g.filled.clear();
        self.pool.push(g.filled);
        let n = n + self.drain(apply);
        self.trigger(trigger);
        n
    }

    fn reset(&mut self) {
        self.next = None;
        self.high = 0;
        self.ended = false;
        while let Some(g) = self.gaps.pop_front() {
            self.pool.push(g.filled);
        }
        self.closed = 0;
        self.held.clear();
        self.joined = false;
        self.gave_up = false;
        // A new session ends awaiting and lets triggers act again
        // (glimpse G3.2, G7.8).
        self.awaiting = false;
        self.auto = true;
        self.triggered = None;
        self.wait_from = None;
        self.waiting.clear();
    }
}

enum Received {
    Duplicate,
    Fill,
    Held,
    Applied,
}

#[cfg(test)]
mod tests {
    use super::super::message::encode;
    use super::super::mold::PacketBuilder;
    use super::*;

    /// `missing` with a gap up to the last sequence (a heartbeat naming
    /// it): no overflow past it.
    #[test]
    fn a_gap_up_to_the_last_sequence_reports_its_missing_runs() {
        let mut r = Run::new(settings());
        r.packet(&data(S1, 1, 1), 1);
        r.packet(&data(S1, 100, 1), 2);
        r.packet(&PacketBuilder::heartbeat(S1, u64::MAX), 3);
        // Fills in the first gap, out of order: 60..63, then 50..53.
        r.packet(&data(S1, 60, 3), 4);
        r.packet(&data(S1, 50, 3), 4);
        let mut out = Vec::new();
        r.seq.missing(|lo, hi, _| {
            out.push((lo, hi));
            true
        });
        assert_eq!(out, [(2, 50), (53, 60), (63, 100), (101, u64::MAX)]);
        assert!(r.seq.has_gap_at(2) && r.seq.has_gap_at(101));
        assert!(!r.seq.has_gap_at(1) && !r.seq.has_gap_at(100) && !r.seq.has_gap_at(3));
    }

    /// The last sequence, `u64::MAX`, is applied once, however many copies
    /// come (lines A and B, a recovery answer, the same packet again), in
    /// order or filled from behind a gap; the copies are duplicates.
    #[test]
    fn the_last_sequence_is_applied_once() {
        let last = |first: u64| {
            let mut b = PacketBuilder::new(S1, first);
            for q in first..=u64::MAX {
                b.message(&encode::delete(0, q, q));
            }
            b.finish()
        };
        // In order.
        let mut r = Run::new(settings());
        r.packet(&data(S1, 1, 1), 1);
        r.packet(&PacketBuilder::heartbeat(S1, u64::MAX - 1), 2);
        r.packet(&data(S1, 2, 1), 3);
        assert_eq!(r.seq.gaps_open(), 1);
        r.packet(&data(S1, u64::MAX - 2, 1), 3);
        // The gap 3..MAX-2 is given up; MAX-2 applied, then MAX-1 and MAX.
        r.expire(u64::MAX);
        r.packet(&last(u64::MAX - 1), 4);
        let dups = r.seq.counters().duplicates;
        for t in 5..9 {
            r.packet(&last(u64::MAX - 1), t);
            r.packet(&last(u64::MAX), t);
        }
        assert_eq!(r.applied.iter().filter(|&&q| q == u64::MAX).count(), 1);
        assert_eq!(r.applied.iter().filter(|&&q| q == u64::MAX - 1).count(), 1);
        assert_eq!(r.seq.counters().duplicates, dups + 4 * 3);
        assert_eq!(r.seq.next(), Some(u64::MAX));
        // Held behind a gap, then drained when the gap fills.
        let mut r = Run::new(settings());
        r.packet(&data(S1, 1, 1), 1);
        r.packet(&PacketBuilder::heartbeat(S1, u64::MAX - 2), 2);
        r.expire(u64::MAX);
        r.packet(&last(u64::MAX - 1), 3);
        r.packet(&last(u64::MAX), 3);
        assert!(!r.applied.contains(&u64::MAX));
        r.packet(&data(S1, u64::MAX - 2, 1), 4);
        r.packet(&last(u64::MAX - 1), 5);
        r.packet(&last(u64::MAX), 5);
        assert_eq!(r.applied.iter().filter(|&&q| q == u64::MAX).count(), 1);
        assert_eq!(
            r.applied.iter().rev().take(3).copied().collect::<Vec<_>>(),
            [u64::MAX, u64::MAX - 1, u64::MAX - 2]
        );
        // A new session starts over.
        r.packet(&data(S2, 1, 1), 6);
        assert_eq!(r.seq.next(), Some(2));
    }

    const S1: Session = Session(*b"SESSION001");
    const S2: Session = Session(*b"SESSION002");
    const MS: u64 = 1_000_000;

    fn settings() -> Settings {
        Settings {
            gap_timeout_ns: 5 * MS,
            max_held: 1_000,
            join_gap_max: 10_000,
        }
    }

    /// A data packet of `n` messages from `first`; each message is an
    /// Order Delete whose reference is its sequence, so what is applied
    /// can be checked against the sequence it was applied under.
    fn data(session: Session, first: u64, n: u64) -> Vec<u8> {
        let mut b = PacketBuilder::new(session, first);
        for q in first..first + n {
            b.message(&encode::delete(0, q, q));
        }
        b.finish()
    }

    struct Run {
        seq: Sequencer,
        applied: Vec<u64>,
    }

    impl Run {
        fn new(settings: Settings) -> Run {
            Run {
                seq: Sequencer::new(settings),
                applied: Vec::new(),
            }
        }

        fn packet(&mut self, bytes: &[u8], t: u64) -> Outcome {
            let applied = &mut self.applied;
            let mut apply = |q: u64, m: Message<'_>| {
                assert!(matches!(m.body(), super::super::Body::Delete { order } if order == q));
                applied.push(q);
            };
            self.seq.expire(t, &mut apply);
            let p = Packet::new_checked(bytes).expect("valid packet");
            self.seq.on_packet(&p, t, &mut apply)
        }

        fn expire(&mut self, t: u64) -> u32 {
            let applied = &mut self.applied;
            self.seq.expire(t, &mut |q, _| applied.push(q))
        }
    }

    #[test]
    fn in_order_messages_are_applied_at_once() {
        let mut r = Run::new(settings());
        let o = r.packet(&data(S1, 1, 3), 10);
        assert_eq!((o.applied, o.alive, o.gap), (3, true, None));
        r.packet(&data(S1, 4, 2), 11);
        assert_eq!(r.applied, [1, 2, 3, 4, 5]);
        assert!(!r.seq.suspect());
        assert_eq!(r.seq.next(), Some(6));
        assert_eq!(r.seq.counters().messages, 5);
    }

    /// A packet whose messages start at sequence 0 (sanitised captures)
    /// takes the rules of any other (spec itch50 §1): first, the stream
    /// starts at 1, so its message 0 is a duplicate and the rest apply.
    #[test]
    fn a_first_packet_from_sequence_0_is_taken_as_any_other() {
        let mut r = Run::new(settings());
        let o = r.packet(&data(S1, 0, 3), 10);
        assert_eq!((o.applied, o.gap), (2, None));
        assert_eq!(r.applied, [1, 2]);
        assert_eq!(r.seq.counters().duplicates, 1);
        assert_eq!(r.seq.next(), Some(3));
        assert!(!r.seq.suspect());
    }

    #[test]
    fn a_line_b_copy_fills_the_gap_in_time() {
        let mut r = Run::new(settings());
        r.packet(&data(S1, 1, 2), 0);
        // Line A lost 3..5; 5..7 is held.
        let o = r.packet(&data(S1, 5, 2), MS);
        assert_eq!(o.gap, Some((3, 5)));
        assert!(r.seq.suspect());
        assert_eq!(r.applied, [1, 2]);
        // Line B: 1..3 again (duplicates), then 3..5 exactly at the deadline.
        let o = r.packet(&data(S1, 1, 2), 2 * MS);
        assert_eq!(o.duplicates, 2);
        assert!(!o.alive, "only duplicates: no proof of life");
        let o = r.packet(&data(S1, 3, 2), 6 * MS);
        assert_eq!((o.fills, o.applied), (2, 4));
        assert_eq!(r.applied, [1, 2, 3, 4, 5, 6]);
        assert!(!r.seq.suspect());
        let c = r.seq.counters();
        assert_eq!((c.recovered, c.ticks_lost, c.duplicates), (2, 0, 2));
    }

    /// A second copy of a message held above a gap is a duplicate (the
    /// spec's "already held"): counted, dropped, the gap as it was; the
    /// fill then applies each held message once.
    #[test]
    fn a_copy_of_a_held_message_is_a_duplicate() {
        let mut r = Run::new(settings());
        r.packet(&data(S1, 1, 2), 0);
        r.packet(&data(S1, 5, 2), MS); // gap [3, 5); 5 and 6 held
        let o = r.packet(&data(S1, 5, 2), 2 * MS);
        assert_eq!((o.duplicates, o.applied, o.fills), (2, 0, 0));
        assert_eq!(r.seq.gaps_open(), 1);
        assert!(r.seq.suspect());
        let c = r.seq.counters();
        assert_eq!((c.duplicates, c.recovered), (2, 0));
        r.packet(&data(S1, 3, 2), 3 * MS);
        assert_eq!(r.applied, [1, 2, 3, 4, 5, 6]);
        assert!(!r.seq.suspect());
        let c = r.seq.counters();
        assert_eq!((c.duplicates, c.recovered), (2, 2));
    }

    /// The clock stepped back (live): open gaps are given up a timeout
    /// after the step's time, not held until the clock caught up with
    /// their old deadlines; a gap opened after it has its own timeout, not
    /// the latest time before the step's (deadlines stay in order).
    #[test]
    fn a_clock_stepped_back_does_not_hold_gaps_for_the_step() {
        let minute = 60_000 * MS;
        let mut r = Run::new(settings());
        r.packet(&data(S1, 1, 1), minute);
        r.packet(&data(S1, 3, 1), minute); // gap [2, 3), deadline 1 min + 5 ms
        r.seq.on_clock_stepped_back(MS);
        r.packet(&data(S1, 5, 1), 2 * MS); // gap [4, 5), deadline 7 ms
        assert_eq!(
            r.seq.gaps().map(|g| g.3).collect::<Vec<_>>(),
            [6 * MS, 7 * MS]
        );
        assert_eq!(r.expire(6 * MS), 0);
        assert_eq!(r.expire(6 * MS + 1), 1);
        assert_eq!(r.expire(7 * MS + 1), 1);
        assert_eq!(r.seq.counters().ticks_lost, 2);
    }

    #[test]
    fn an_expired_gap_is_lost_for_good() {
        let mut r = Run::new(settings());
        r.packet(&data(S1, 1, 2), 0);
        r.packet(&data(S1, 6, 2), MS); // gap [3, 6), deadline 6 ms
                                       // A partial fill: 4 only.
        r.packet(&data(S1, 4, 1), 2 * MS);
        assert_eq!(r.expire(6 * MS), 0, "not strictly after the deadline");
        assert_eq!(r.expire(6 * MS + 1), 1);
        assert_eq!(r.applied, [1, 2, 4, 6, 7]);
        assert_eq!(r.seq.counters().ticks_lost, 2);
        assert_eq!(r.seq.next(), Some(8));
        assert!(
            r.seq.suspect(),
            "given up: suspect until the session changes"
        );
        // A late copy of a lost message is a duplicate.
        let o = r.packet(&data(S1, 3, 1), 7 * MS);
        assert_eq!(o.duplicates, 1);
        assert_eq!(r.applied.len(), 5);
    }

    #[test]
    fn heartbeats_reveal_gaps_and_prove_life_only_without_one() {
        let mut r = Run::new(settings());
        r.packet(&data(S1, 1, 1), 0);
        let o = r.packet(&PacketBuilder::heartbeat(S1, 2), MS);
        assert!(o.alive);
        let o = r.packet(&PacketBuilder::heartbeat(S1, 4), 2 * MS);
        assert_eq!((o.gap, o.alive), (Some((2, 4)), false));
        let o = r.packet(&PacketBuilder::heartbeat(S1, 4), 3 * MS);
        assert!(!o.alive, "a gap is open");
        assert_eq!(r.seq.counters().heartbeats, 3);
        let o = r.packet(&data(S1, 2, 2), 4 * MS);
        assert_eq!((o.fills, o.applied, o.alive), (2, 2, true));
        assert!(!r.seq.suspect());
        let o = r.packet(&PacketBuilder::end_of_session(S1, 4), 5 * MS);
        assert!(o.end_of_session && !o.alive);
    }

    /// An end of session ahead of the next expected reveals the gap below
    /// it as a heartbeat does, outside a snapshot wait too, and proves no
    /// life.
    #[test]
    fn an_end_of_session_ahead_reveals_a_gap() {
        let mut r = Run::new(settings());
        r.packet(&data(S1, 1, 2), 0);
        let o = r.packet(&PacketBuilder::end_of_session(S1, 5), MS);
        assert_eq!(
            (o.gap, o.end_of_session, o.alive),
            (Some((3, 5)), true, false)
        );
        assert!(r.seq.suspect());
    }

    #[test]
    fn the_first_gap_of_a_session_given_up_is_a_join_not_a_loss() {
        let mut r = Run::new(settings());
        let o = r.packet(&data(S1, 100, 1), 0);
        assert_eq!(o.gap, Some((1, 100)));
        assert!(!r.seq.joined());
        r.expire(10 * MS);
        assert!(r.seq.joined() && r.seq.suspect());
        assert_eq!(r.seq.counters().ticks_lost, 0);
        assert_eq!(r.applied, [100]);
    }

    #[test]
    fn a_first_gap_filled_in_time_is_no_join() {
        let mut r = Run::new(settings());
        r.packet(&data(S1, 3, 1), 0);
        r.packet(&data(S1, 1, 2), MS);
        assert_eq!(r.applied, [1, 2, 3]);
        assert!(!r.seq.suspect() && !r.seq.joined());
    }

    #[test]
    fn a_later_first_packet_is_a_mid_session_join() {
        let mut r = Run::new(settings());
        let o = r.packet(&data(S1, 10_002, 2), 0);
        assert_eq!((o.gap, o.applied), (None, 2));
        assert!(r.seq.joined() && r.seq.suspect());
        assert_eq!(r.seq.next(), Some(10_004));
        // Just inside the bound: a gap from 1.
        let mut r = Run::new(settings());
        assert_eq!(r.packet(&data(S1, 10_001, 1), 0).gap, Some((1, 10_001)));
    }

    #[test]
    fn a_new_session_starts_over_and_an_old_one_is_ignored() {
        let mut r = Run::new(settings());
        r.packet(&data(S1, 1, 1), 0);
        r.packet(&data(S1, 5, 1), 1); // a gap: suspect
        let o = r.packet(&data(S2, 1, 2), 2);
        assert!(o.new_session);
        assert!(!r.seq.suspect());
        assert_eq!(r.seq.session(), Some(S2));
        let o = r.packet(&data(S1, 6, 1), 3);
        assert!(o.stale_session && o.applied == 0);
        let c = r.seq.counters();
        assert_eq!((c.session_changes, c.stale_session, c.messages), (1, 1, 4));
        assert_eq!(r.applied, [1, 1, 2]);
    }

    /// Sequence 1, then every other one up to 2 × MAX_GAPS + 1: each
    /// packet opens a one-message gap, MAX_GAPS open at the end.
    fn most_gaps_open() -> Run {
        let mut r = Run::new(Settings {
            max_held: 1 << 20,
            ..settings()
        });
        r.packet(&data(S1, 1, 1), 0);
        for k in 1..=MAX_GAPS as u64 {
            r.packet(&data(S1, 2 * k + 1, 1), k);
        }
        assert_eq!(r.seq.gaps_open(), MAX_GAPS);
        r
    }

    #[test]
    fn more_than_max_gaps_open_give_up_the_lowest() {
        let mut r = most_gaps_open();
        let gaps = MAX_GAPS as u64;
        assert_eq!(r.seq.counters().ticks_lost, 0);
        let o = r.packet(&data(S1, 2 * gaps + 3, 1), gaps + 1);
        assert_eq!(o.given_up, 1);
        assert_eq!(r.seq.gaps_open(), MAX_GAPS);
        let c = r.seq.counters();
        assert_eq!((c.ticks_lost, c.gaps_given_up), (1, 1));
        assert_eq!(r.applied, [1, 3], "the lowest gap's held message");
        assert!(r.seq.suspect());
    }

    /// The most gaps open, filled from the middle outwards (the worst
    /// order for one ordered list: each gap closed in the middle moved
    /// half of it, about 90 GB over these 65,536): each costs a search,
    /// and the stream comes out whole and in order.
    #[test]
    fn gaps_closed_from_the_middle_move_no_others() {
        let mut r = most_gaps_open();
        let gaps = MAX_GAPS as u64;
        // Missing: 2, 4, …, 2 × gaps; from the middle, alternately down
        // and up.
        let mid = gaps / 2;
        let order = (0..gaps).map(|i| {
            if i % 2 == 0 {
                mid - i / 2
            } else {
                mid + 1 + i / 2
            }
        });
        for (filled, k) in order.enumerate() {
            r.packet(&data(S1, 2 * k, 1), gaps + 1);
            assert_eq!(r.seq.gaps_open(), MAX_GAPS - filled - 1);
        }
        assert!(r.applied.iter().copied().eq(1..=2 * gaps + 1));
        assert!(!r.seq.suspect());
        assert_eq!(r.seq.counters().ticks_lost, 0);
    }

    /// Sequences the open gaps keep as filled, and the elements their
    /// vectors and the pool's can hold.
    fn fills(seq: &Sequencer) -> (usize, usize) {
        let kept = seq.gaps.iter().map(|g| g.filled.len()).sum();
        let capacity = seq.gaps.iter().map(|g| g.filled.capacity()).sum::<usize>()
            + seq.pool.iter().map(Filled::capacity).sum::<usize>();
        (kept, capacity)
    }

    /// A heartbeat naming a sequence far ahead opens a gap that stays open
    /// until its deadline, while the stream goes on in order (every other
    /// pair of packets swapped): each message fills the gap and is applied
    /// at once, and the gap keeps none once applied. What the gaps keep
    /// stays within what is held, not one sequence per message since the
    /// gap opened (200,000 here: 1.6 MB; a day's feed in a gap_timeout_ms
    /// of seconds, millions).
    #[test]
    fn a_far_gap_keeps_no_fill_once_applied() {
        let mut r = Run::new(settings());
        r.packet(&data(S1, 1, 1), 0);
        r.packet(&PacketBuilder::heartbeat(S1, 1 << 40), 0);
        let end = 200_002;
        let mut q = 2;
        while q < end {
            r.packet(&data(S1, q + 10, 10), 1);
            r.packet(&data(S1, q, 10), 1);
            q += 20;
            let (kept, capacity) = fills(&r.seq);
            assert!(kept <= r.seq.held(), "{kept} kept, {} held", r.seq.held());
            assert!(capacity <= 64, "{capacity} elements at {q}");
        }
        assert!(r.applied.iter().copied().eq(1..end));
        assert_eq!(
            r.seq.gaps().collect::<Vec<_>>(),
            [(2, 1 << 40, (1 << 40) - end, 5 * MS)]
        );
        let mut missing = Vec::new();
        r.seq.missing(|lo, hi, _| {
            missing.push((lo, hi));
            true
        });
        assert_eq!(
            missing,
            [(end, 1 << 40)],
            "from next, not from the gap's start"
        );
        let c = r.seq.counters();
        assert_eq!((c.recovered, c.ticks_lost), (end - 2, 0));
    }

    /// Fill vectors holding more than the budget (here made small): the
    /// pooled ones are freed, then the lowest gap is given up, counted as
    /// for `max_held`, what it held applied, its vector freed.
    #[test]
    fn fills_beyond_the_budget_give_up_the_lowest_gap() {
        let mut r = Run::new(settings());
        r.seq.fill_budget = 64;
        r.packet(&data(S1, 1, 1), 0);
        r.packet(&data(S1, 3, 1), 0); // gap [2, 3)
        r.packet(&data(S1, 5, 1), 0); // gap [4, 5)
        r.packet(&PacketBuilder::heartbeat(S1, 1 << 40), 0); // gap [6, 2^40)
        r.packet(&data(S1, 4, 1), 0); // [4, 5) filled: its vector pooled
        assert_eq!((r.seq.pool.len(), r.seq.fill_capacity), (1, 4));
        // 40 fills take 64: the pooled vector is freed.
        let o = r.packet(&data(S1, 100, 40), 1);
        assert_eq!((o.given_up, o.fills), (0, 40));
        assert!(r.seq.pool.is_empty());
        assert_eq!((r.seq.fill_capacity, fills(&r.seq)), (64, (40, 64)));
        // 40 more take 128: the lowest gaps are given up until within it.
        let o = r.packet(&data(S1, 140, 40), 1);
        assert_eq!((o.given_up, o.applied), (2, 83));
        assert!(r
            .applied
            .iter()
            .copied()
            .eq([1, 3, 4, 5].into_iter().chain(100..180)));
        assert_eq!(r.seq.next(), Some(1 << 40));
        let c = r.seq.counters();
        assert_eq!((c.gaps_given_up, c.ticks_lost), (2, 1 + (1 << 40) - 6 - 80));
        assert_eq!((r.seq.fill_capacity, fills(&r.seq)), (0, (0, 0)));
    }

    #[test]
    fn too_many_held_messages_give_up_the_lowest_gap() {
        let mut r = Run::new(Settings {
            max_held: 4,
            ..settings()
        });
        r.packet(&data(S1, 1, 1), 0);
        r.packet(&data(S1, 3, 3), 1); // gap [2, 3), 3 held
        assert_eq!(r.seq.held(), 3);
        let o = r.packet(&data(S1, 7, 2), 2); // gap [6, 7), 5 held > 4
        assert_eq!(o.given_up, 1);
        assert_eq!(r.applied, [1, 3, 4, 5]);
        assert_eq!(r.seq.held(), 2);
        assert_eq!(r.seq.counters().ticks_lost, 1);
        assert_eq!(r.seq.gaps_open(), 1);
    }

    const BOTH: Triggers = Triggers {
        join: true,
        gap: true,
    };

    impl Run {
        fn merge(&mut self, n: u64, t: u64) -> u32 {
            let applied = &mut self.applied;
            self.seq
                .merge(n, t, &mut |q: u64, _: Message<'_>| applied.push(q))
        }

        fn release(&mut self, t: u64) -> u32 {
            let applied = &mut self.applied;
            self.seq
                .release(t, &mut |q: u64, _: Message<'_>| applied.push(q))
        }
    }

    fn snapshots(settings: Settings, triggers: Triggers) -> Run {
        let mut r = Run::new(settings);
        r.seq.enable_snapshots(triggers);
        r
    }

    /// A heartbeat behind the books (naming a message already applied)
    /// proves nothing: after a merge whose N the stream is far from, every
    /// packet of it is a duplicate or such a heartbeat, so the feed turns
    /// stale instead of reading healthy on books nothing updates; once the
    /// stream reaches N, its heartbeats prove life again. A late copy of a
    /// heartbeat (line B behind line A) proves nothing either.
    #[test]
    fn a_heartbeat_behind_the_books_proves_nothing() {
        let mut r = snapshots(settings(), BOTH);
        r.packet(&data(S1, 50_000, 3), 1);
        r.merge(200_000, 10);
        assert!(!r.seq.awaiting() && !r.seq.suspect());
        assert!(!r.packet(&PacketBuilder::heartbeat(S1, 50_003), 20).alive);
        let o = r.packet(&data(S1, 50_003, 1), 30);
        assert!(!o.alive && o.duplicates == 1);
        assert!(r.packet(&PacketBuilder::heartbeat(S1, 200_000), 40).alive);
        // Without a snapshot: line B's heartbeat from before line A's data.
        let mut r = Run::new(settings());
        r.packet(&data(S1, 1, 3), 0);
        assert!(r.packet(&PacketBuilder::heartbeat(S1, 4), MS).alive);
        assert!(!r.packet(&PacketBuilder::heartbeat(S1, 3), 2 * MS).alive);
        assert_eq!(r.seq.counters().heartbeats, 2);
        // While awaiting, the same: one behind `next` proves nothing.
        let mut r = snapshots(settings(), BOTH);
        r.packet(&data(S1, 50_000, 3), 1);
        assert!(r.seq.awaiting());
        assert!(!r.packet(&PacketBuilder::heartbeat(S1, 49_999), 2).alive);
        assert!(r.packet(&PacketBuilder::heartbeat(S1, 50_000), 3).alive);
    }

    /// A mid-session join starts a wait: the joining packet's messages are
    /// held, not applied, no gap is revealed; a merge from N discards what
    /// lies below it and applies the rest in order (glimpse G3.2, G3.4).
    #[test]
    fn a_join_waits_for_a_snapshot_and_the_merge_goes_on_from_n() {
        let mut r = snapshots(settings(), BOTH);
        let out = r.packet(&data(S1, 50_000, 3), 1);
        assert!(r.seq.awaiting() && r.seq.suspect() && r.seq.joined());
        assert_eq!(r.seq.take_trigger(), Some(Trigger::Join));
        assert_eq!(r.seq.take_trigger(), None);
        assert!(r.applied.is_empty() && out.alive && out.gap.is_none());
        assert_eq!(
            (r.seq.next(), r.seq.high(), r.seq.held()),
            (Some(50_000), 50_003, 3)
        );
        // A hole while awaiting reveals no gap and requests nothing.
        r.packet(&data(S1, 50_005, 2), 2);
        assert_eq!(
            (r.seq.gaps_open(), r.seq.held(), r.seq.high()),
            (0, 5, 50_007)
        );
        // A heartbeat ahead raises `high` and proves nothing; one behind proves life.
        assert!(!r.packet(&PacketBuilder::heartbeat(S1, 50_008), 3).alive);
        assert_eq!(r.seq.high(), 50_008);
        assert!(r.packet(&PacketBuilder::heartbeat(S1, 50_008), 3).alive);
        // An end of session proves nothing (G7.3).
        let o = r.packet(&PacketBuilder::end_of_session(S1, 50_008), 3);
        assert!(o.end_of_session && !o.alive);
        // A copy is a duplicate and proves nothing either; nothing expires
        // however late.
        let o = r.packet(&data(S1, 50_000, 1), 4);
        assert!(o.duplicates == 1 && !o.alive);
        assert_eq!(r.expire(u64::MAX / 2), 0);
        // Awaiting, every block is counted at its arrival, the copy's too,
        // and every count-0 datagram (spec itch50 §5).
        let c = r.seq.counters();
        assert_eq!((c.messages, c.heartbeats), (3 + 2 + 1, 2));
        // N = 50,002: 50,000 and 50,001 are discarded, 50,002 applied;
        // 50,003, 50,004 and 50,007 are missing: one gap from `next`.
        r.merge(50_002, 10);
        assert_eq!(r.applied, [50_002]);
        assert_eq!(r.seq.counters().snapshot_discarded, 2);
        assert_eq!(r.seq.counters().snapshots, 1);
        assert!(!r.seq.awaiting() && !r.seq.joined());
        let gaps: Vec<_> = r.seq.gaps().collect();
        assert_eq!(gaps, [(50_002, 50_008, 3, 10 + 5 * MS)]);
        // The fills are counted as recovered; the held ones were not.
        r.packet(&data(S1, 50_003, 2), 11);
        r.packet(&data(S1, 50_007, 1), 11);
        assert_eq!(r.seq.counters().recovered, 3);
        r.packet(&data(S1, 50_005, 1), 11);
        assert_eq!(r.seq.counters().recovered, 3);
        assert_eq!(r.seq.counters().duplicates, 2);
        assert_eq!(r.applied, (50_002..50_008).collect::<Vec<_>>());
        assert!(!r.seq.suspect());
        assert_eq!(r.seq.counters().ticks_lost, 0);
    }

    /// While awaiting, an end of session ahead of `high` raises it as a
    /// heartbeat does (glimpse G3.2): the merge opens the tail up to it
    /// as a gap.
    #[test]
    fn an_end_of_session_ahead_raises_high_while_awaiting() {
        let mut r = snapshots(settings(), BOTH);
        r.packet(&data(S1, 50_000, 3), 1);
        assert!(r.seq.awaiting());
        let o = r.packet(&PacketBuilder::end_of_session(S1, 50_010), 2);
        assert!(o.end_of_session && !o.alive);
        assert_eq!(r.seq.high(), 50_010);
        r.merge(50_003, 10);
        let gaps: Vec<_> = r.seq.gaps().collect();
        assert_eq!(gaps, [(50_003, 50_010, 7, 10 + 5 * MS)]);
    }

    /// A snapshot taken after everything received (N above `high`):
    /// everything held is discarded, no gap opens, the stream is trusted.
    #[test]
    fn n_above_high_discards_every_held_message() {
        let mut r = snapshots(settings(), BOTH);
        r.packet(&data(S1, 50_000, 3), 1);
        r.merge(60_000, 2);
        assert_eq!(r.seq.counters().snapshot_discarded, 3);
        assert_eq!(
            (r.seq.next(), r.seq.high(), r.seq.gaps_open()),
            (Some(60_000), 60_000, 0)
        );
        assert!(!r.seq.suspect());
        r.packet(&data(S1, 60_000, 2), 3);
        assert_eq!(r.applied, [60_000, 60_001]);
        // Multicast below N arriving later is a duplicate.
        assert_eq!(r.packet(&data(S1, 59_999, 1), 4).duplicates, 1);
    }

    /// `max_held` 4 and `gap_timeout_ns`: a join at 50,000, a snapshot
    /// merged at 50,001 with 50,001 missing, then 50,002..50,010 held
    /// above the merge's gap (twice `max_held`: the gap still open).
    fn merged_below_eight_held(gap_timeout_ns: u64) -> Run {
        let mut r = snapshots(
            Settings {
                max_held: 4,
                gap_timeout_ns,
                ..settings()
            },
            BOTH,
        );
        r.packet(&data(S1, 50_000, 1), 1);
        r.packet(&data(S1, 50_002, 2), 1);
        r.seq.take_trigger();
        r.merge(50_001, 2);
        r.packet(&data(S1, 50_004, 6), 3);
        assert_eq!((r.seq.gaps_open(), r.seq.held()), (1, 8));
        r
    }

    /// The gap a merge opens, given up, loses its missing messages and is
    /// a new `gap` trigger; held messages beyond `max_held` (up to twice as
    /// many) do not give it up before its deadline (glimpse G7.13).
    #[test]
    fn a_merge_gap_outlives_max_held_until_its_deadline_and_then_triggers_again() {
        let mut r = merged_below_eight_held(5 * MS);
        assert_eq!(
            r.seq.gaps().collect::<Vec<_>>(),
            [(50_001, 50_004, 1, 2 + 5 * MS)]
        );
        assert!(!r.seq.awaiting());
        // Its deadline passes: given up, one lost, the rest applied, and
        // a new wait starts.
        r.expire(3 + 5 * MS);
        assert_eq!(r.seq.counters().ticks_lost, 1);
        assert_eq!(r.applied, (50_002..50_010).collect::<Vec<_>>());
        assert!(r.seq.awaiting());
        assert_eq!(r.seq.take_trigger(), Some(Trigger::Gap));
    }

    /// Past twice `max_held` held above it, the gap a merge opened is
    /// given up for room like any other (and is a new `gap` trigger), so
    /// a merge gap whose copies never come cannot hold the stream until
    /// its deadline: what is held stays bounded.
    #[test]
    fn a_merge_gap_is_given_up_for_room_past_twice_max_held() {
        let mut r = merged_below_eight_held(3_600_000 * MS);
        // The ninth: given up at once, one lost, every held one applied.
        r.packet(&data(S1, 50_010, 1), 4);
        assert_eq!((r.seq.gaps_open(), r.seq.held()), (0, 0));
        assert_eq!(r.seq.counters().ticks_lost, 1);
        assert_eq!(r.applied, (50_002..50_011).collect::<Vec<_>>());
        assert_eq!(r.seq.take_trigger(), Some(Trigger::Gap));
    }

    #[test]
    fn fill_buckets_double_from_16_us_and_the_last_is_open() {
        use crate::shm::counter::{recovery_bucket_bound_ns as bound, RECOVERY_BUCKETS};
        assert_eq!(fill_bucket(0), 0);
        assert_eq!(fill_bucket(16_000), 0);
        assert_eq!(fill_bucket(16_001), 1);
        assert_eq!(fill_bucket(32_000), 1);
        assert_eq!(fill_bucket(u64::MAX), RECOVERY_BUCKETS - 1);
        assert_eq!(
            fill_bucket(bound(RECOVERY_BUCKETS - 2) + 1),
            RECOVERY_BUCKETS - 1
        );
    }

    /// A gap filled counts in the fill latency's bucket for the time from
    /// the packet that opened it to the one that filled it, even when both
    /// come within one receive cycle (the usual A/B fill); a gap given up
    /// counts nowhere there.
    #[test]
    fn a_gap_filled_counts_its_latency_and_one_given_up_does_not() {
        let mut r = Run::new(Settings {
            gap_timeout_ns: 5 * MS,
            ..settings()
        });
        r.packet(&data(S1, 1, 2), 1_000);
        r.packet(&data(S1, 4, 1), 2_000);
        r.packet(&data(S1, 3, 1), 2_000 + 20_000);
        let latency = |r: &Run| r.seq.counters().fill_latency;
        assert_eq!(latency(&r)[1], 1, "20 µs: the second bucket");
        assert_eq!(latency(&r).iter().sum::<u64>(), 1);
        r.packet(&data(S1, 6, 1), 3 * MS);
        r.expire(9 * MS);
        assert_eq!(r.seq.counters().gaps_given_up, 1);
        assert_eq!(latency(&r).iter().sum::<u64>(), 1, "given up: not a fill");
    }

    /// A wait given up (no snapshot) with a hole in what it held opens an
    /// ordinary gap: given up for room past `max_held` held above it, not
    /// twice as many as a merge's gap (glimpse G7.13 exempts only that).
    #[test]
    fn a_wait_given_up_opens_an_ordinary_gap() {
        let mut r = snapshots(
            Settings {
                max_held: 4,
                gap_timeout_ns: 3_600_000 * MS,
                ..settings()
            },
            BOTH,
        );
        r.packet(&data(S1, 50_000, 1), 1);
        r.packet(&data(S1, 50_002, 2), 1);
        r.seq.take_trigger();
        r.release(2);
        assert_eq!((r.seq.gaps_open(), r.seq.held()), (1, 2));
        assert_eq!(r.applied, [50_000]);
        // Five held above it: one past `max_held`, the gap is given up.
        r.packet(&data(S1, 50_004, 3), 3);
        assert_eq!((r.seq.gaps_open(), r.seq.held()), (0, 0));
        assert_eq!(r.seq.counters().ticks_lost, 1);
        assert_eq!(r.applied, [50_000, 50_002, 50_003, 50_004, 50_005, 50_006]);
    }

    /// While awaiting, more than `max_held` held: the lowest go, `next`
    /// steps past each (glimpse G3.2).
    #[test]
    fn held_beyond_max_held_while_awaiting_discards_the_lowest() {
        let mut r = snapshots(
            Settings {
                max_held: 5,
                ..settings()
            },
            BOTH,
        );
        r.packet(&data(S1, 50_000, 4), 1);
        r.packet(&data(S1, 50_010, 4), 1);
        assert_eq!(r.seq.counters().snapshot_overflow, 3);
        assert_eq!((r.seq.next(), r.seq.held()), (Some(50_003), 5));
        // A copy of a discarded one is a duplicate now.
        assert_eq!(r.packet(&data(S1, 50_001, 1), 2).duplicates, 1);
        r.merge(50_000, 3);
        // N below `next`: the stream goes on from N, a gap over what was
        // discarded and never received.
        assert!(r.applied.is_empty());
        assert_eq!(
            r.seq.gaps().next().map(|g| (g.0, g.1, g.2)),
            Some((50_000, 50_014, 9))
        );
    }

    /// An operator's wait on a healthy stream whose overflow discards the
    /// lowest held messages (`next` past them) and that is then given up
    /// without a snapshot: the books never had what it skipped, so the
    /// skipped sequences count as lost and the stream stays suspect until
    /// a snapshot merges. A wait given up without overflow loses nothing.
    #[test]
    fn a_wait_given_up_after_its_overflow_is_suspect_and_counts_the_skipped() {
        let mut r = snapshots(
            Settings {
                max_held: 4,
                ..settings()
            },
            BOTH,
        );
        r.packet(&data(S1, 1, 2), 1);
        assert!(r.seq.request_snapshot());
        r.packet(&data(S1, 3, 6), 2);
        assert_eq!(r.seq.counters().snapshot_overflow, 2);
        assert_eq!(r.seq.next(), Some(5));
        r.release(3);
        assert_eq!(r.applied, [1, 2, 5, 6, 7, 8]);
        assert_eq!(r.seq.counters().ticks_lost, 2);
        assert!(r.seq.suspect() && r.seq.gaps_open() == 0);
        // A snapshot merged later makes it whole again.
        assert!(r.seq.request_snapshot());
        r.merge(9, 4);
        assert!(!r.seq.suspect());
        // Without overflow, nothing lost.
        assert!(r.seq.request_snapshot());
        r.packet(&data(S1, 9, 2), 5);
        r.release(6);
        assert_eq!(r.seq.counters().ticks_lost, 2);
        assert!(!r.seq.suspect(), "{:?}", r.seq.counters());
        assert_eq!(r.applied, [1, 2, 5, 6, 7, 8, 9, 10]);
    }

    /// A given-up gap starts a wait: the other open gaps are dropped
    /// (nothing lost), their held messages kept; giving the snapshot up
    /// releases them behind one gap from `next` (glimpse G3.2, G3.3).
    #[test]
    fn a_gap_given_up_drops_the_other_gaps_and_a_release_reopens_one() {
        let mut r = snapshots(settings(), BOTH);
        r.packet(&data(S1, 1, 2), 1);
        r.packet(&data(S1, 5, 1), 2); // gap [3, 5)
        r.packet(&data(S1, 8, 2), 3); // gap [6, 8)
        r.packet(&data(S1, 7, 1), 3); // fills 7
        r.expire(2 + 5 * MS + 1);
        // [3, 5) given up: 2 lost, 5 applied; [6, 8) dropped, 7..10 held.
        assert_eq!(r.seq.counters().ticks_lost, 2);
        assert_eq!(r.applied, [1, 2, 5]);
        assert_eq!(r.seq.take_trigger(), Some(Trigger::Gap));
        assert_eq!(
            (r.seq.gaps_open(), r.seq.held(), r.seq.awaiting()),
            (0, 3, true)
        );
        // Released at 20 with N = next = 6: [6, 10) is one gap again.
        r.release(20);
        assert_eq!(r.seq.gaps().collect::<Vec<_>>(), [(6, 10, 1, 20 + 5 * MS)]);
        assert!(r.seq.suspect());
        r.packet(&data(S1, 6, 1), 21);
        assert_eq!(r.applied, [1, 2, 5, 6, 7, 8, 9]);
        // The earlier give-up keeps the stream suspect (no snapshot came).
        assert!(r.seq.suspect() && r.seq.gaps_open() == 0);
    }

    /// The session's first gap given up is a `join` trigger; with only
    /// `gap` enabled it starts nothing, and a later gap does.
    #[test]
    fn triggers_follow_snapshot_triggers() {
        let gap_only = Triggers {
            join: false,
            gap: true,
        };
        let mut r = snapshots(settings(), gap_only);
        r.packet(&data(S1, 50_000, 1), 1);
        assert!(!r.seq.awaiting() && r.seq.joined());
        let mut r = snapshots(settings(), gap_only);
        r.packet(&data(S1, 3, 1), 1); // first gap [1, 3)
        r.expire(2 + 5 * MS);
        assert!(!r.seq.awaiting() && r.seq.joined());
        r.packet(&data(S1, 6, 1), 10); // gap [4, 6)
        r.expire(11 + 5 * MS);
        assert_eq!(r.seq.take_trigger(), Some(Trigger::Gap));
        let mut r = snapshots(
            settings(),
            Triggers {
                join: true,
                gap: false,
            },
        );
        r.packet(&data(S1, 3, 1), 1);
        r.expire(2 + 5 * MS);
        assert_eq!(r.seq.take_trigger(), Some(Trigger::Join));
        // Without snapshots, nothing waits.
        let mut r = Run::new(settings());
        r.packet(&data(S1, 50_000, 1), 1);
        assert!(!r.seq.awaiting() && !r.seq.request_snapshot());
    }

    /// The last sequence, `u64::MAX`, held above a gap when a snapshot is
    /// awaited, waits with the rest: a merge at it applies it, one below
    /// it keeps it behind the gap the merge leaves, until that gap is
    /// given up; applied once either way, never discarded (no N is past
    /// it).
    #[test]
    fn the_last_sequence_held_waits_for_the_snapshot_with_the_rest() {
        for n in [20, u64::MAX - 1, u64::MAX] {
            let mut r = snapshots(settings(), BOTH);
            r.packet(&data(S1, 1, 1), 1);
            r.packet(&data(S1, 10, 1), 2); // gap [2, 10)
            let mut last = PacketBuilder::new(S1, u64::MAX);
            last.message(&encode::delete(0, u64::MAX, u64::MAX));
            r.packet(&last.finish(), 3); // gap [11, MAX)
            r.expire(3 + 5 * MS);
            assert!(r.seq.awaiting());
            r.merge(n, 10);
            let applied = |r: &Run| r.applied.iter().filter(|&&q| q == u64::MAX).count();
            assert_eq!(applied(&r), usize::from(n == u64::MAX), "merge at {n}");
            // Below it, `[n, MAX)` is missing: one gap, suspect.
            assert_eq!(r.seq.gaps_open(), usize::from(n < u64::MAX), "merge at {n}");
            let lost = r.seq.counters().ticks_lost;
            r.expire(u64::MAX);
            assert_eq!(applied(&r), 1, "merge at {n}: {:?}", r.applied);
            assert_eq!(r.seq.counters().ticks_lost - lost, u64::MAX - n);
            assert_eq!(r.seq.counters().snapshot_discarded, 0);
            assert_eq!(r.seq.next(), Some(u64::MAX));
        }
    }

    /// The last sequence, `u64::MAX`, held when a wait ends below it (a
    /// merge at N, or a give-up) lies at `high` itself, outside the gap
    /// `[next, u64::MAX)` the end opens: the gap misses every sequence of
    /// that range, as many as its missing runs say, and stays open until
    /// the last of them comes (it had counted the last sequence as one of
    /// its own: one short, it closed with a sequence still missing, the
    /// feed no longer suspect and nothing to give up).
    #[test]
    fn the_last_sequence_held_lies_outside_the_gap_a_wait_leaves() {
        let near = u64::MAX - 3;
        let mut last = PacketBuilder::new(S1, u64::MAX);
        last.message(&encode::delete(0, u64::MAX, u64::MAX));
        let last = last.finish();
        for n in [Some(near), Some(20), None] {
            let mut r = snapshots(settings(), BOTH);
            r.packet(&data(S1, 1, 1), 1);
            r.packet(&data(S1, 10, 1), 2); // gap [2, 10)
            r.packet(&last, 3); // gap [11, MAX)
            r.expire(3 + 5 * MS);
            assert!(r.seq.awaiting());
            match n {
                Some(n) => r.merge(n, 10),
                None => r.release(10),
            };
            let next = n.unwrap_or(11);
            let gaps: Vec<_> = r.seq.gaps().map(|(lo, hi, m, _)| (lo, hi, m)).collect();
            assert_eq!(gaps, [(next, u64::MAX, u64::MAX - next)], "{n:?}");
            let mut runs = 0;
            r.seq.missing(|lo, hi, _| {
                runs += hi - lo;
                true
            });
            assert_eq!(runs, u64::MAX - next, "{n:?}");
            if n != Some(near) {
                continue;
            }
            // All but one of the gap's sequences: still open, suspect.
            r.packet(&data(S1, near, 2), 11);
            assert_eq!(r.seq.next(), Some(u64::MAX - 1));
            assert_eq!(r.seq.gaps_open(), 1);
            assert!(r.seq.suspect());
            // The last of them: the stream goes on to its end, the last
            // sequence applied once.
            r.packet(&data(S1, u64::MAX - 1, 1), 12);
            r.packet(&last, 13);
            assert!(!r.seq.suspect());
            assert_eq!(r.seq.next(), Some(u64::MAX));
            assert_eq!(
                r.applied[r.applied.len() - 4..],
                [near, near + 1, near + 2, u64::MAX]
            );
            assert_eq!(r.seq.counters().duplicates, 1);
        }
    }

    /// With `auto` off (a login refused as not authorized) no trigger
    /// acts, an operator's request still does; a merge turns it on again,
    /// as does a new session, which also abandons a wait.
    #[test]
    fn auto_off_leaves_only_the_operator_and_a_new_session_abandons_a_wait() {
        let mut r = snapshots(settings(), BOTH);
        assert!(!r.seq.request_snapshot(), "no session yet");
        r.packet(&data(S1, 1, 1), 1);
        r.seq.set_auto(false);
        r.packet(&data(S1, 3, 1), 2);
        r.expire(3 + 5 * MS);
        assert!(!r.seq.awaiting());
        assert!(r.seq.request_snapshot());
        assert!(!r.seq.request_snapshot(), "already awaiting");
        assert_eq!(r.seq.take_trigger(), Some(Trigger::Operator));
        r.merge(4, 10);
        assert!(r.seq.auto());
        r.seq.set_auto(false);
        r.seq.request_snapshot();
        let out = r.packet(&data(S2, 1, 1), 20);
        assert!(out.new_session && out.abandoned);
        assert!(!r.seq.awaiting() && r.seq.auto());
        assert_eq!(r.applied.last(), Some(&1));
    }
}
