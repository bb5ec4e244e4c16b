//! A feed's GLIMPSE snapshots as the handler drives them (glimpse G3.3,
//! G4): the attempts since a trigger and when the next may start (capped
//! exponential backoff), how each connection ended, the merge or the
//! failure it causes, and the counters the summary, `stat` and metrics
//! show.
//!
//! The bytes of one connection go through a [`Spin`]: the SoupBinTCP and
//! GLIMPSE client ([`glimpse::Client`]) building a [`Staging`] state. Live,
//! a spin runs on the connection's own thread and hands its end to the
//! receive thread; in replay it runs on the replay's thread, from the
//! recorded server bytes. Either way the end takes effect here, at the
//! arrival time of the bytes (or FIN, or RST) that decided it.
//!
//! Time is passed in: ns since the Unix epoch, local clock.

use super::feed::{Feed, Refused, Staging};
use super::glimpse::{self, Cause, End, Failure};
use super::soup::SESSION_LEN;

/// How attempts are spaced and how many are made (spec glimpse G4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Most failed attempts after one trigger before giving up.
    pub max_attempts: u32,
    /// Delay before the second attempt, ns; doubled for each one after.
    pub retry_ns: u64,
    /// Longest delay between attempts, ns.
    pub retry_max_ns: u64,
}

impl Settings {
    /// Delay before attempt `k` (k ≥ 2) after attempt `k − 1` failed:
    /// `min(retry × 2^(k−2), retry_max)`, ns.
    pub fn backoff(&self, k: u32) -> u64 {
        let doublings = k.saturating_sub(2);
        let delay = if doublings >= 64 {
            u64::MAX
        } else {
            self.retry_ns.saturating_mul(1u64 << doublings.min(63))
        };
        delay.min(self.retry_max_ns)
    }
}

/// What the snapshots did, over the feed's life (spec glimpse G4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Connections started.
    pub attempts: u64,
    /// Failures by class, indexed by [`Failure::index`].
    pub failures: [u64; Failure::ALL.len()],
    /// Waits given up (attempts exhausted, or a login refused as not
    /// authorized).
    pub gave_up: u64,
    /// N of the last merged snapshot.
    pub next: Option<u64>,
    /// The session of the last merged snapshot's login, as sent.
    pub session: Option<[u8; SESSION_LEN]>,
    /// `S` packets of the last merged spin.
    pub messages: u64,
    /// Merges by the time from their trigger, per bucket of
    /// [`snapshot_bucket_bound_ns`](crate::shm::counter::snapshot_bucket_bound_ns).
    pub latency: [u64; crate::shm::counter::SNAPSHOT_BUCKETS],
}

/// The bucket of [`Counters::latency`] a merge `ns` after its trigger
/// counts in: the first whose bound it does not exceed, else the open one.
fn latency_bucket(ns: u64) -> usize {
    use crate::shm::counter::{snapshot_bucket_bound_ns, SNAPSHOT_BUCKETS};
    (0..SNAPSHOT_BUCKETS - 1)
        .find(|&i| ns <= snapshot_bucket_bound_ns(i))
        .unwrap_or(SNAPSHOT_BUCKETS - 1)
}

/// What a connection's end did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing: the wait had ended under the connection (a new session).
    Ignored,
    /// The snapshot was merged.
    Merged {
        /// N, the first message it does not reflect.
        next: u64,
        /// `S` packets of the spin.
        messages: u64,
        /// From the trigger to the merge, ns.
        latency_ns: u64,
        /// What the bounds refused, the feed suspect for it.
        refused: Refused,
    },
    /// The connection failed.
    Failed {
        /// Its class.
        class: Failure,
        /// What ended it, for the log.
        detail: &'static str,
        /// What the detail names besides its text.
        cause: Cause,
        /// The wait was given up (no more attempts until a new trigger).
        gave_up: bool,
        /// The feed is suspect once the step is taken (a wait given up
        /// that lost nothing leaves it whole).
        suspect: bool,
        /// When the next attempt may start, ns, if one will.
        retry_at: Option<u64>,
    },
}

/// A feed's snapshot attempts.
#[derive(Debug)]
pub struct Snapshots {
    settings: Settings,
    counters: Counters,
    /// Failures since the trigger.
    failed: u32,
    /// When the next connection may start, ns; `None` while one runs or
    /// no wait is on.
    due: Option<u64>,
    /// A connection is running.
    open: bool,
    /// When the wait began, ns.
    since: Option<u64>,
    /// When the last connection started, ns.
    started: Option<u64>,
}

impl Snapshots {
    /// No snapshot yet.
    pub fn new(settings: Settings) -> Snapshots {
        Snapshots {
            settings,
            counters: Counters::default(),
            failed: 0,
            due: None,
            open: false,
            since: None,
            started: None,
        }
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// A connection is running.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// When the next connection may start, ns.
    pub fn due(&self) -> Option<u64> {
        self.due
    }

    /// A wait began at `t` (the feed took a trigger): attempt 1 may start
    /// at once.
    pub fn on_trigger(&mut self, t: u64) {
        self.failed = 0;
        self.due = Some(t);
        self.since = Some(t);
    }

    /// No connection is due any more (an operator's request dropped
    /// before it started).
    pub fn cancel(&mut self) {
        self.due = None;
    }

    /// Whether a connection should start at `now`: one is due, and
    /// `retry_ns` has passed since the last one started, however many
    /// triggers came since (each new session starts a wait afresh: forged
    /// ones must not make the handler log in to the venue over and over).
    /// A clock stepped back to before the last start (or the failure a due
    /// time counts from) makes them due at once, not once it caught up.
    pub fn should_start(&self, now: u64) -> bool {
        let retry = self.settings.retry_ns;
        // The wait the due time was set for: none after a trigger, the
        // backoff after a failure.
        let wait = match self.failed {
            0 => 0,
            f => self.settings.backoff(f + 1),
        };
        !self.open
            && self
                .due
                .is_some_and(|d| crate::time::retry_due(now, d, wait))
            && self
                .started
                .is_none_or(|s| crate::time::retry_due(now, s.saturating_add(retry), retry))
    }

    /// A connection started at `t` (live: the connect; replay: its SYN).
    /// A connection with no wait on is an operator's request (live starts
    /// one so, and replay reads its SYN so): the feed starts awaiting at
    /// `t`.
    /// Returns false, counting nothing, when the feed cannot await one
    /// (no session yet, or snapshots not enabled).
    pub fn on_start(&mut self, feed: &mut Feed, t: u64) -> bool {
        if !feed.sequencer().awaiting() {
            if !feed.request_snapshot() {
                return false;
            }
            feed.take_trigger();
            self.on_trigger(t);
        }
        self.note_start(t);
        true
    }

    /// What a start at `t` changes: one attempt more, a connection open.
    fn note_start(&mut self, t: u64) {
        self.counters.attempts += 1;
        self.open = true;
        self.due = None;
        self.started = Some(t);
    }

    /// The running connection ended with `end` at `t`: a snapshot is
    /// merged from `staging` (left holding what the feed held), a failure
    /// counted, and the wait given up or the next attempt scheduled. A
    /// snapshot whose N lies beyond the stream's reach
    /// ([`Sequencer::within_reach`](super::sequencer::Sequencer::within_reach))
    /// is not merged: it fails as `malformed`, and is retried as any
    /// failure.
    pub fn on_end(&mut self, feed: &mut Feed, end: &End, staging: &mut Staging, t: u64) -> Step {
        self.open = false;
        if !feed.sequencer().awaiting() {
            // The wait ended under it (a new session): nothing to merge.
            self.due = None;
            return Step::Ignored;
        }
        match *end {
            End::Snapshot { next, .. } if !feed.sequencer().within_reach(next) => self.fail(
                feed,
                Failure::Malformed,
                "End of Snapshot far ahead of the stream",
                Cause::Sequence(next),
                t,
            ),
            End::Snapshot {
                next,
                messages,
                session,
            } => {
                let refused = feed.merge_snapshot(staging, next, t);
                self.counters.next = Some(next);
                self.counters.session = Some(session);
                self.counters.messages = messages;
                self.failed = 0;
                self.due = None;
                let latency_ns = t.saturating_sub(self.since.take().unwrap_or(t));
                self.counters.latency[latency_bucket(latency_ns)] += 1;
                Step::Merged {
                    next,
                    messages,
                    latency_ns,
                    refused,
                }
            }
            End::Failed {
                class,
                detail,
                cause,
            } => self.fail(feed, class, detail, cause, t),
        }
    }

    /// The running connection failed at `t` (of `class`, `cause` as it
    /// came): counted, and the wait given up or the next attempt
    /// scheduled.
    fn fail(
        &mut self,
        feed: &mut Feed,
        class: Failure,
        detail: &'static str,
        cause: Cause,
        t: u64,
    ) -> Step {
        self.counters.failures[class.index()] += 1;
        self.failed += 1;
        let not_authorized =
            class == Failure::Rejected && cause.rejected() == Some(super::soup::NOT_AUTHORIZED);
        if not_authorized {
            feed.set_snapshot_auto(false);
        }
        let gave_up = not_authorized || self.failed >= self.settings.max_attempts;
        if gave_up {
            self.give_up(feed, t);
        } else {
            self.due = Some(t.saturating_add(self.settings.backoff(self.failed + 1)));
        }
        Step::Failed {
            class,
            detail,
            cause,
            gave_up,
            suspect: feed.suspect(),
            retry_at: self.due,
        }
    }

    /// A new session ended the wait: counted as `abandoned` (the caller
    /// closes a running connection).
    pub fn on_abandoned(&mut self) {
        self.counters.failures[Failure::Abandoned.index()] += 1;
        self.failed = 0;
        self.due = None;
        self.open = false;
        self.since = None;
    }

    /// Gives the wait up (glimpse G3.3): held messages are released, the
    /// feed stays suspect.
    fn give_up(&mut self, feed: &mut Feed, t: u64) {
        self.counters.gave_up += 1;
        self.failed = 0;
        self.due = None;
        self.since = None;
        feed.release_snapshot(t);
    }
}

/// One snapshot connection's server bytes turned into a staging state.
#[derive(Debug)]
pub struct Spin {
    client: glimpse::Client,
    staging: Box<Staging>,
}

impl Spin {
    /// A spin checked by `settings`, building into `staging` (emptied).
    pub fn new(settings: glimpse::Settings, mut staging: Box<Staging>) -> Spin {
        staging.clear();
        Spin {
            client: glimpse::Client::new(settings),
            staging,
        }
    }

    /// Bytes read from the server; the end once decided.
    pub fn on_bytes(&mut self, bytes: &[u8]) -> Option<End> {
        let staging = &mut self.staging;
        self.client.on_bytes(bytes, &mut |m| staging.apply(m))
    }

    /// The client, for the ends the connection decides (EOF, reset, timers).
    pub fn client(&mut self) -> &mut glimpse::Client {
        &mut self.client
    }

    /// The staging state built so far.
    pub fn staging(&mut self) -> &mut Staging {
        &mut self.staging
    }

    /// The staging state, to merge or to reuse.
    pub fn into_staging(self) -> Box<Staging> {
        self.staging
    }
}

/// What a spin checks, apart from the feed's session at its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpinSettings {
    /// `A` must name the feed's session (`glimpse_session_check`).
    pub session_check: bool,
    /// Most `S` packets before `G` (`snapshot_max_messages`).
    pub max_messages: u64,
    /// An attempt's timers, ns (`snapshot_idle_ms`, `snapshot_timeout_ms`):
    /// which of them ended a recorded attempt that we closed.
    pub idle_ns: u64,
    pub timeout_ns: u64,
}

impl SpinSettings {
    /// The client's settings for a connection starting now on `feed`.
    pub fn for_feed(&self, feed: &Feed) -> glimpse::Settings {
        glimpse::Settings {
            session: feed.session().filter(|_| self.session_check).map(|s| s.0),
            max_messages: self.max_messages,
        }
    }
}

/// How much earlier than its deadline a recorded close may be stamped and
/// still be taken for that deadline's timer, ns: the receive loop stamps
/// the server's bytes and our close each when it takes them, a cycle or
/// so late.
const STAMP_SLACK_NS: u64 = 100_000_000;

/// Recorded snapshot connections put together again (glimpse G5): one
/// per local `ip:port`, from our SYN (or the server's first segment to a
/// new local end) to a FIN or RST either way. The server's payload is
/// reassembled by TCP sequence in capture order (bytes seen before are
/// dropped; a hole ends the connection as `closed`) and fed to the
/// client; there are no timers: a live timeout was recorded as our FIN.
#[derive(Debug)]
pub struct Recorded {
    settings: SpinSettings,
    /// The connection being read, if any.
    conn: Option<Conn>,
    /// A staging state to reuse.
    spare: Option<Box<Staging>>,
    /// The local ends of the last [`EARLIER`] connections before it: a
    /// server segment to one of them (late, or resent) is not a new
    /// connection's first.
    earlier: [Option<std::net::SocketAddrV4>; EARLIER],
}

/// Local ends of earlier recorded connections remembered.
const EARLIER: usize = 8;

#[derive(Debug)]
struct Conn {
    local: std::net::SocketAddrV4,
    /// When it started (our SYN), and when the server's last byte came
    /// (or its start): capture time, ns.
    opened_at: u64,
    heard_at: u64,
    /// TCP sequence of the next server byte; `None` before the first.
    next_seq: Option<u32>,
    /// `None` once the connection's end is decided.
    spin: Option<Spin>,
}

impl Recorded {
    /// No connection yet.
    pub fn new(settings: SpinSettings) -> Recorded {
        Recorded {
            settings,
            conn: None,
            spare: None,
            earlier: [None; EARLIER],
        }
    }

    /// One captured segment at `t`; the steps it decided, in order: the
    /// end of a connection it closed by starting another, then what its
    /// bytes decided.
    pub fn on_segment(
        &mut self,
        feed: &mut Feed,
        snapshots: &mut Snapshots,
        segment: &crate::engine::Segment<'_>,
        t: u64,
    ) -> [Option<Step>; 2] {
        let mut closed = None;
        let decided = self.take_segment(feed, snapshots, segment, t, &mut closed);
        [closed, decided]
    }

    /// [`on_segment`](Self::on_segment)'s work; a connection closed by
    /// this one starting, in `closed`.
    fn take_segment(
        &mut self,
        feed: &mut Feed,
        snapshots: &mut Snapshots,
        segment: &crate::engine::Segment<'_>,
        t: u64,
        closed: &mut Option<Step>,
    ) -> Option<Step> {
        use crate::capture::link::Tcp;
        let current = self.conn.as_ref().filter(|c| c.local == segment.local);
        // Our SYN sent again (its answer lost) before any byte came: the
        // same connection, not a new one.
        let resent = current.is_some_and(|c| c.spin.is_some() && c.next_seq.is_none());
        let syn = !segment.from_server && segment.flags & Tcp::SYN != 0 && !resent;
        let new_end = current.is_none() && !self.earlier.contains(&Some(segment.local));
        if syn || (new_end && segment.from_server) {
            *closed = self.start(feed, snapshots, segment.local, t);
        }
        let conn = self.conn.as_mut().filter(|c| c.local == segment.local)?;
        let spin = conn.spin.as_mut()?;
        let mut end = None;
        if segment.from_server && !segment.payload.is_empty() {
            conn.heard_at = t;
            let expected = *conn.next_seq.get_or_insert(segment.seq);
            let ahead = segment.seq.wrapping_sub(expected) as i32;
            if ahead > 0 {
                end = Some(End::Failed {
                    class: Failure::Closed,
                    detail:
                        "bytes missing from the recorded stream (a segment the capture lost or cut)",
                    cause: Cause::None,
                });
            } else {
                let seen = ahead.unsigned_abs() as usize;
                if let Some(fresh) = segment.payload.get(seen..).filter(|b| !b.is_empty()) {
                    conn.next_seq = Some(expected.wrapping_add(fresh.len() as u32));
                    end = spin.on_bytes(fresh);
                }
            }
        }
        if end.is_none() {
            end = match (segment.from_server, segment.flags) {
                (_, f) if f & Tcp::RST != 0 => Some(spin.client().on_reset()),
                (true, f) if f & Tcp::FIN != 0 => Some(spin.client().on_eof()),
                // Our own close before the end: a timer ended it live,
                // the one whose deadline came first. The idle bound runs
                // from the start (our SYN) or the server's last byte; the
                // whole attempt's from the connection made, which is not
                // recorded: taken at the SYN, so a connect that took long
                // may read as timed out where live was idle. (A close
                // recorded before the idle deadline, less the receive
                // loop's delays in stamping, was no idle bound's.)
                (false, f) if f & Tcp::FIN != 0 => {
                    let s = &self.settings;
                    let idle_at = conn.heard_at.saturating_add(s.idle_ns);
                    let timeout_at = conn.opened_at.saturating_add(s.timeout_ns);
                    let reached = t >= idle_at.saturating_sub(STAMP_SLACK_NS);
                    Some(match idle_at <= timeout_at && reached {
                        true => spin.client().on_idle(),
                        false => spin.client().on_timeout(),
                    })
                }
                _ => None,
            };
        }
        let end = end?;
        let mut staging = conn.spin.take()?.into_staging();
        let step = snapshots.on_end(feed, &end, &mut staging, t);
        self.spare = Some(staging);
        Some(step)
    }

    /// What its spins check.
    pub fn settings(&self) -> &SpinSettings {
        &self.settings
    }

    /// A connection from `local` starts at `t`; one still open is closed
    /// (what its end did returned, to be logged as any end).
    fn start(
        &mut self,
        feed: &mut Feed,
        snapshots: &mut Snapshots,
        local: std::net::SocketAddrV4,
        t: u64,
    ) -> Option<Step> {
        if let Some(c) = &self.conn {
            self.earlier.rotate_right(1);
            self.earlier[0] = Some(c.local);
        }
        let mut closed = None;
        if let Some(mut spin) = self.conn.take().and_then(|c| c.spin) {
            // As live classed it: one that got no byte was refused (a
            // connect never answered leaves nothing on the wire to end it).
            let class = match spin.client().got_bytes() {
                true => Failure::Closed,
                false => Failure::Refused,
            };
            let mut staging = spin.into_staging();
            let end = End::Failed {
                class,
                detail: "another connection started",
                cause: Cause::None,
            };
            closed = Some(snapshots.on_end(feed, &end, &mut staging, t));
            self.spare = Some(staging);
        }
        if !snapshots.on_start(feed, t) {
            return closed;
        }
        let staging = self
            .spare
            .take()
            .unwrap_or_else(|| Box::new(feed.staging()));
        self.conn = Some(Conn {
            local,
            opened_at: t,
            heard_at: t,
            next_seq: None,
            spin: Some(Spin::new(self.settings.for_feed(feed), staging)),
        });
        closed
    }

    /// A new session ended the wait: the connection is read no more.
    pub fn abandon(&mut self) {
        if let Some(spin) = self.conn.as_mut().and_then(|c| c.spin.take()) {
            self.spare = Some(spin.into_staging());
        }
    }
}

#[cfg(test)]
mod tests;
