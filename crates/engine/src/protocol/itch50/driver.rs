//! A feed's GLIMPSE snapshots as its engine drives them: triggers taken
//! from the feed, connections from a capture (replay, [`Recorded`]) or
//! from the connection's thread (live, [`Connection`]), their ends applied
//! at the time the receive loop takes them, logged, and, in a recorded
//! run, what went over the wire handed out as TCP segments.

use super::connection::{Connection, Wire};
use super::feed::{Feed, Refused};
use super::snapshot::{Recorded, Settings, Snapshots, SpinSettings, Step};
use crate::ratelimit::Limiter;

/// What the snapshot connections sent and received, as the receive loop
/// took it, to be written as TCP segments (glimpse G5): our SYN, FIN and
/// RST, and the server's bytes, FIN and RST, each side's sequence
/// numbers consecutive from 0. Never a byte we sent (the Login Request
/// holds the password).
#[derive(Debug)]
struct WireLog {
    server: std::net::SocketAddrV4,
    events: Vec<(u64, Wire)>,
    /// The attempt of the latest SYN logged: only its events follow it
    /// (an aborted attempt's late ones would read as the new connection's,
    /// which replay would then not merge as live did).
    open: u64,
    /// The connection's local end.
    local: std::net::SocketAddrV4,
    /// Sequence of the server's next byte.
    server_seq: u32,
    /// Sequence of our next byte (ours carry none but SYN and FIN).
    local_seq: u32,
}

/// Most payload bytes of one recorded segment (an IPv4 packet's room).
const SEGMENT_MAX: usize = 65_495;

impl WireLog {
    /// Nothing logged yet, of the connections to `server`.
    fn new(server: std::net::SocketAddrV4) -> WireLog {
        WireLog {
            server,
            events: Vec::new(),
            open: 0,
            local: std::net::SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0),
            server_seq: 0,
            local_seq: 0,
        }
    }

    /// Our SYN of attempt `id` from `local`, at `t`.
    fn open(&mut self, t: u64, id: u64, local: std::net::SocketAddrV4) {
        self.open = id;
        self.events.push((t, Wire::Open(local)));
    }

    /// Event `w` of attempt `id` at `t`: dropped unless the attempt is the
    /// one of the latest SYN. An attempt aborted for a new one ends
    /// unrecorded, as replay abandons its connection.
    fn push(&mut self, t: u64, id: u64, w: Wire) {
        if id == self.open {
            self.events.push((t, w));
        }
    }

    fn drain(&mut self, f: &mut dyn FnMut(u64, &crate::engine::WireSegment<'_>)) {
        use crate::capture::link::Tcp;
        // Drained in place and given back: its room kept for the next
        // cycle's events (drained every cycle of a recorded run).
        let mut events = std::mem::take(&mut self.events);
        for (t, w) in events.drain(..) {
            let (ours, flags, payload): (bool, u8, &[u8]) = match &w {
                Wire::Open(local) => {
                    self.local = *local;
                    self.server_seq = 0;
                    self.local_seq = 0;
                    (true, Tcp::SYN, &[])
                }
                Wire::Bytes(b) => (false, Tcp::ACK | Tcp::PSH, b),
                Wire::Fin => (false, Tcp::FIN | Tcp::ACK, &[]),
                Wire::Rst => (false, Tcp::RST, &[]),
                Wire::Close => (true, Tcp::FIN | Tcp::ACK, &[]),
                Wire::Abort => (true, Tcp::RST, &[]),
            };
            let (src, dst) = if ours {
                (self.local, self.server)
            } else {
                (self.server, self.local)
            };
            let mut pieces = payload.chunks(SEGMENT_MAX).peekable();
            if pieces.peek().is_none() {
                let seq = if ours {
                    self.local_seq
                } else {
                    self.server_seq
                };
                f(
                    t,
                    &crate::engine::WireSegment {
                        src,
                        dst,
                        seq,
                        flags,
                        payload: &[],
                    },
                );
                // SYN and FIN take a sequence number.
                if flags & (Tcp::SYN | Tcp::FIN) != 0 {
                    if ours {
                        self.local_seq = self.local_seq.wrapping_add(1);
                    } else {
                        self.server_seq = self.server_seq.wrapping_add(1);
                    }
                }
                continue;
            }
            for piece in pieces {
                let seq = self.server_seq;
                f(
                    t,
                    &crate::engine::WireSegment {
                        src,
                        dst,
                        seq,
                        flags,
                        payload: piece,
                    },
                );
                self.server_seq = seq.wrapping_add(piece.len() as u32);
            }
        }
        self.events = events;
    }
}

/// Logs the `held` lines of `what` the one-a-second limit held back.
#[cold]
fn held_logged(name: &str, what: &str, held: u64) {
    tracing::warn!(
        feed = %name,
        held,
        "{held} more {what} since the last line of them (at most one line a second)"
    );
}

/// At most one failure log line per feed per this interval, ns.
const LOG_INTERVAL_NS: u64 = 1_000_000_000;

/// A feed's snapshots as its engine drives them: triggers taken from the
/// feed, connections from a capture (replay) or the connection thread
/// (live), their ends applied and logged.
#[derive(Debug)]
pub struct Driver {
    snapshots: Snapshots,
    recorded: Recorded,
    /// The connection thread, live.
    live: Option<Connection>,
    /// What went over the wire, to record (`run --record`).
    wire: Option<WireLog>,
    /// The log lines of failures (those that give up apart: a give-up is
    /// never held behind a retried failure's line), of waits abandoned for
    /// a new session, and of waits begun: each at most once a second, so
    /// that a flood of forged sessions (each abandoning a wait and
    /// starting one) is a few lines, not two a datagram.
    failures: Limiter,
    give_ups: Limiter,
    abandons: Limiter,
    triggers: Limiter,
    /// Merges (glimpse G4: rate-limited as failures are; a replay has no
    /// timer to space them); those that refused some of what they held,
    /// apart, never held behind a whole one's line.
    merges: Limiter,
    refused_merges: Limiter,
    /// An operator's request not started yet: the session it was made in
    /// (a new session drops it, as it abandons a wait).
    requested: Option<super::Session>,
}

impl Driver {
    /// Snapshots spaced by `settings`, spins checked by `spin`.
    pub fn new(settings: Settings, spin: SpinSettings) -> Driver {
        Driver {
            snapshots: Snapshots::new(settings),
            recorded: Recorded::new(spin),
            live: None,
            wire: None,
            failures: Limiter::new(LOG_INTERVAL_NS),
            give_ups: Limiter::new(LOG_INTERVAL_NS),
            abandons: Limiter::new(LOG_INTERVAL_NS),
            triggers: Limiter::new(LOG_INTERVAL_NS),
            merges: Limiter::new(LOG_INTERVAL_NS),
            refused_merges: Limiter::new(LOG_INTERVAL_NS),
            requested: None,
        }
    }

    /// Connects live from now on, through `connection`.
    pub fn go_live(&mut self, connection: Connection) {
        self.live = Some(connection);
    }

    /// Takes over `old`'s connection thread and recording (a feed started
    /// over on a recreated publication keeps connecting).
    pub fn carry_over(&mut self, old: &mut Driver) {
        if let Some(mut live) = old.live.take() {
            // The old feed's attempt, checked against its session and
            // started by its snapshots, ends unreported: this feed starts
            // its own when it needs one.
            live.abort();
            self.live = Some(live);
        }
        // The same log, so that the running attempt's SYN stays its own.
        if let Some(w) = old.wire.take() {
            self.wire = Some(w);
        }
    }

    /// Records what goes over the wire from now on (`run --record`).
    pub fn record(&mut self, server: std::net::SocketAddrV4) {
        if let Some(c) = &self.live {
            c.record(true);
        }
        self.wire = Some(WireLog::new(server));
    }

    /// Hands what went over the wire since the last call to `f`, as TCP
    /// segments stamped with the time the receive loop took them.
    pub fn drain_wire(&mut self, f: &mut dyn FnMut(u64, &crate::engine::WireSegment<'_>)) {
        if let Some(w) = &mut self.wire {
            w.drain(f);
        }
    }

    /// The attempts and their counters.
    pub fn snapshots(&self) -> &Snapshots {
        &self.snapshots
    }

    /// After a datagram (or an expiry) at `t`: a new session abandons a
    /// wait; a trigger starts one.
    pub fn after(&mut self, feed: &mut Feed, abandoned: bool, t: u64, name: &str) {
        if abandoned {
            self.snapshots.on_abandoned();
            self.recorded.abandon();
            if let Some(c) = &mut self.live {
                c.abort();
            }
            if let Some(unlogged) = self.abandons.due(t, false) {
                tracing::warn!(feed = %name, unlogged, "new session while awaiting a snapshot: the wait is abandoned");
            }
        }
        if let Some(trigger) = feed.take_trigger() {
            self.snapshots.on_trigger(t);
            if let Some(unlogged) = self.triggers.due(t, false) {
                tracing::info!(feed = %name, trigger = trigger.as_str(), unlogged, "awaiting a snapshot: the feed is suspect until it merges");
            }
        }
        self.log_held(t, name);
    }

    /// Lines the one-a-second limits held back are told once a line is due
    /// again, not only with the next of their kind, which may never come.
    #[inline]
    fn log_held(&mut self, t: u64, name: &str) {
        for (limiter, what) in [
            (&mut self.failures, "snapshot attempts failed"),
            (&mut self.give_ups, "snapshot waits given up"),
            (
                &mut self.abandons,
                "snapshot waits abandoned or requests dropped",
            ),
            (&mut self.triggers, "snapshot waits begun"),
            (&mut self.merges, "snapshots merged"),
            (
                &mut self.refused_merges,
                "snapshots merged that refused some of what they held",
            ),
        ] {
            if let Some(held) = limiter.overdue(t) {
                held_logged(name, what, held);
            }
        }
    }

    /// An operator's request at `t`, for `feed` (which may take one): a
    /// connection is due (at once, or `retry` after the last one
    /// started), and the feed awaits from its start
    /// ([`Snapshots::on_start`]). False when one is already pending.
    pub fn request(&mut self, feed: &Feed, t: u64) -> bool {
        if self.requested.is_some() {
            return false;
        }
        self.requested = feed.session();
        self.snapshots.on_trigger(t);
        true
    }

    /// Brings the snapshots up to `now` (live): ends the connection thread
    /// reported are applied, and a connection starts when one is due.
    pub fn poll(&mut self, feed: &mut Feed, now: u64, name: &str) {
        let Some(mut live) = self.live.take() else {
            return;
        };
        let mut wire = self.wire.take();
        let mut on_wire = |id: u64, w: Wire| {
            if let Some(log) = wire.as_mut() {
                log.push(now, id, w);
            }
        };
        while let Some((end, mut staging)) = live.poll(&mut on_wire) {
            let step = self.snapshots.on_end(feed, &end, &mut staging, now);
            live.recycle(staging);
            self.log(step, now, name);
        }
        // A request made in a session since ended is dropped, as a wait
        // is abandoned by a new session.
        if let Some(session) = self.requested {
            if feed.sequencer().awaiting() || feed.session() != Some(session) {
                self.requested = None;
                if !feed.sequencer().awaiting() {
                    self.snapshots.cancel();
                    if let Some(unlogged) = self.abandons.due(now, false) {
                        tracing::warn!(feed = %name, unlogged, "an operator's snapshot request dropped: a new session began before its connection started");
                    }
                }
            }
        }
        if self.snapshots.should_start(now) && self.snapshots.on_start(feed, now) {
            if self.requested.take().is_some() {
                if let Some(unlogged) = self.triggers.due(now, false) {
                    tracing::info!(feed = %name, trigger = "operator", unlogged, "awaiting a snapshot: the feed is suspect until it merges");
                }
            }
            let (id, local) = live.start(self.recorded.settings().for_feed(feed));
            // Our SYN, recorded when the attempt starts (as replay starts it).
            if let Some(log) = wire.as_mut() {
                log.open(now, id, local);
            }
        }
        self.wire = wire;
        self.live = Some(live);
    }

    /// A captured segment of the snapshot stream at `t` (replay).
    pub fn on_segment(
        &mut self,
        feed: &mut Feed,
        segment: &crate::engine::Segment<'_>,
        t: u64,
        name: &str,
    ) {
        let steps = self
            .recorded
            .on_segment(feed, &mut self.snapshots, segment, t);
        for step in steps.into_iter().flatten() {
            self.log(step, t, name);
        }
    }

    /// Merges and failures at most one line a second each, with the
    /// count of those not logged, and give-ups at most one a second
    /// beside them (a wait given up that lost nothing, as an operator's on
    /// a healthy feed, is told as leaving it whole: the step says, as the
    /// feed was once it was taken, in replay too, where the next
    /// connection's start comes before the log).
    fn log(&mut self, step: Step, t: u64, name: &str) {
        match step {
            Step::Ignored => {}
            Step::Merged {
                next,
                messages,
                latency_ns,
                refused,
            } => {
                let limiter = match refused {
                    Refused::No => &mut self.merges,
                    _ => &mut self.refused_merges,
                };
                let Some(unlogged) = limiter.due(t, false) else {
                    return;
                };
                let duration_ms = latency_ns / 1_000_000;
                let why = match refused {
                    Refused::No => {
                        tracing::info!(
                            feed = %name,
                            next,
                            messages,
                            duration_ms,
                            unlogged,
                            "snapshot merged: the stream goes on from its next sequence"
                        );
                        return;
                    }
                    Refused::Spin => {
                        "it held more orders or symbols than max_orders or max_symbols allow"
                    }
                    Refused::Kept => {
                        "the symbols the feed had that it lacks, kept with empty books, came to more than max_symbols with its own (raise max_symbols)"
                    }
                    Refused::Held => {
                        "the messages held while it came, applied after it, held more orders or symbols than max_orders or max_symbols allow"
                    }
                };
                tracing::warn!(
                    feed = %name,
                    next,
                    messages,
                    duration_ms,
                    unlogged,
                    "snapshot merged, but {why}: some were refused, and the feed stays suspect until the session changes or a snapshot within them merges"
                );
            }
            Step::Failed {
                class,
                detail,
                cause,
                gave_up,
                suspect,
                retry_at,
            } => {
                let limiter = match gave_up {
                    true => &mut self.give_ups,
                    false => &mut self.failures,
                };
                let Some(unlogged) = limiter.due(t, false) else {
                    return;
                };
                let detail = &*super::glimpse::logged_detail(detail, cause);
                if gave_up && suspect {
                    tracing::error!(feed = %name, class = class.as_str(), detail, unlogged, "snapshot failed and given up: the feed stays suspect");
                } else if gave_up {
                    tracing::warn!(feed = %name, class = class.as_str(), detail, unlogged, "snapshot failed and given up: nothing was lost while it waited, the feed is whole");
                } else {
                    // The next attempt's delay (one is always due when the
                    // wait goes on).
                    let retry = match retry_at {
                        Some(r) => format!("{} ms", r.saturating_sub(t) / 1_000_000),
                        None => "none".to_string(),
                    };
                    tracing::warn!(feed = %name, class = class.as_str(), detail, retry_in = %retry, unlogged, "snapshot failed");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::link::Tcp;

    /// The wire log keeps its room across drains: a recorded run drains it
    /// every cycle, and a new buffer each time would allocate on the
    /// receive thread.
    #[test]
    fn the_wire_log_keeps_its_room_across_drains() {
        let server = "127.0.0.1:18100".parse().unwrap();
        let mut log = WireLog::new(server);
        log.open(1, 7, "127.0.0.1:40000".parse().unwrap());
        log.push(2, 7, Wire::Fin);
        let room = log.events.capacity();
        let mut segments = 0;
        log.drain(&mut |_, _| segments += 1);
        assert_eq!((segments, log.events.len()), (2, 0));
        assert_eq!(log.events.capacity(), room);
    }

    /// Failures are logged at most once a second, with the count of those
    /// not logged since; give-ups at most once a second too, beside them
    /// (never held behind a retried failure's line).
    #[test]
    fn failure_logs_are_rate_limited() {
        use super::super::glimpse::Failure;
        let mut d = Driver::new(
            Settings {
                max_attempts: 8,
                retry_ns: 1,
                retry_max_ns: 1,
            },
            SpinSettings {
                session_check: true,
                max_messages: 1_000,
                idle_ns: 5_000_000_000,
                timeout_ns: 60_000_000_000,
            },
        );
        let failed = |gave_up| Step::Failed {
            class: Failure::Closed,
            detail: "reset",
            cause: crate::protocol::itch50::glimpse::Cause::None,
            gave_up,
            suspect: true,
            retry_at: None,
        };
        let s = 1_000_000_000;
        let state = |d: &Driver| (d.failures.last(), d.failures.held());
        let given_up = |d: &Driver| (d.give_ups.last(), d.give_ups.held());
        d.log(failed(false), s, "f");
        assert_eq!(state(&d), (Some(s), 0));
        d.log(failed(false), s + s / 2, "f");
        d.log(failed(false), s + s / 2, "f");
        assert_eq!(state(&d), (Some(s), 2));
        // A give-up is not held behind a retried failure's line, and is
        // held itself within a second of the last give-up logged.
        d.log(failed(true), s + s / 2 + 1, "f");
        assert_eq!(given_up(&d), (Some(s + s / 2 + 1), 0));
        d.log(failed(true), s + s / 2 + 2, "f");
        assert_eq!(given_up(&d), (Some(s + s / 2 + 1), 1));
        assert_eq!(state(&d), (Some(s), 2));
        d.log(failed(false), 3 * s, "f");
        assert_eq!(state(&d), (Some(3 * s), 0));
        d.log(failed(true), 3 * s, "f");
        assert_eq!(given_up(&d), (Some(3 * s), 0));
        // A merge that refused some of what it held is told though a
        // whole one was, the same millisecond; a second whole one is held.
        let merged = |refused| Step::Merged {
            next: 7,
            messages: 3,
            latency_ns: 0,
            refused,
        };
        let log = crate::test_log::logs_of(|| {
            d.log(merged(Refused::No), 5 * s, "f");
            d.log(merged(Refused::Spin), 5 * s + 1, "f");
            d.log(merged(Refused::No), 5 * s + 2, "f");
        });
        assert_eq!(log.matches("snapshot merged").count(), 2, "{log}");
        assert!(log.contains("some were refused"), "{log}");
        assert_eq!(d.merges.held(), 1);
    }

    /// A driver started over (a recreated publication) takes the old
    /// one's connection thread and recording.
    #[test]
    fn a_new_driver_carries_the_connection_over() {
        let settings = || {
            (
                Settings {
                    max_attempts: 1,
                    retry_ns: 1,
                    retry_max_ns: 1,
                },
                SpinSettings {
                    session_check: true,
                    max_messages: 1_000,
                    idle_ns: 5_000_000_000,
                    timeout_ns: 60_000_000_000,
                },
            )
        };
        let (a, b) = settings();
        let mut old = Driver::new(a, b);
        let server: std::net::SocketAddrV4 = "127.0.0.1:9".parse().unwrap();
        let target = super::super::connection::Target {
            server,
            user: "u".into(),
            idle_ns: 2_000_000_000,
            timeout_ns: 2_000_000_000,
        };
        let password = super::super::config::Password::for_tests(b"pw");
        let feed = super::super::feed::Settings::smallest();
        old.go_live(Connection::spawn("t", target, password, feed).unwrap());
        old.record(server);
        let (a, b) = settings();
        let spin = super::super::glimpse::Settings {
            session: None,
            max_messages: b.max_messages,
        };
        let running = old.live.as_mut().unwrap().start(spin).0;
        let mut new = Driver::new(a, b);
        new.carry_over(&mut old);
        assert!(new.live.is_some() && new.wire.is_some() && old.live.is_none());
        // The old feed's attempt is no longer the one whose end is taken.
        assert_ne!(new.live.as_ref().unwrap().attempt(), running);
    }

    #[test]
    fn reads_become_segments_of_consecutive_sequences() {
        let server = "127.0.0.1:18100".parse().unwrap();
        let local = "127.0.0.1:40000".parse().unwrap();
        let mut log = WireLog {
            server,
            events: vec![
                (1, Wire::Open(local)),
                (2, Wire::Bytes(vec![7; 100_000])),
                (3, Wire::Bytes(vec![8; 10])),
                (4, Wire::Close),
                (5, Wire::Fin),
                (6, Wire::Open(local)),
                (7, Wire::Rst),
                (8, Wire::Open(local)),
                (9, Wire::Abort),
            ],
            open: 0,
            local: std::net::SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0),
            server_seq: 0,
            local_seq: 0,
        };
        let mut seen = Vec::new();
        log.drain(&mut |t, s| {
            seen.push((t, s.src == server, s.seq, s.flags, s.payload.len()));
        });
        assert_eq!(
            seen,
            [
                (1, false, 0, Tcp::SYN, 0),
                (2, true, 0, Tcp::ACK | Tcp::PSH, 65_495),
                (2, true, 65_495, Tcp::ACK | Tcp::PSH, 100_000 - 65_495),
                (3, true, 100_000, Tcp::ACK | Tcp::PSH, 10),
                (4, false, 1, Tcp::FIN | Tcp::ACK, 0),
                (5, true, 100_010, Tcp::FIN | Tcp::ACK, 0),
                (6, false, 0, Tcp::SYN, 0),
                (7, true, 0, Tcp::RST, 0),
                // Our abort: a RST from our end (glimpse G5).
                (8, false, 0, Tcp::SYN, 0),
                (9, false, 1, Tcp::RST, 0),
            ]
        );
        assert!(log.events.is_empty());
    }

    /// An attempt aborted for a new one (a new session while awaiting)
    /// may report its last reads and its RST after the new attempt's SYN
    /// was logged: they are dropped, not written as the new connection's
    /// (replay would feed them to its spin, which live never saw).
    #[test]
    fn an_aborted_attempts_late_events_are_not_the_new_connections() {
        let server = "127.0.0.1:18100".parse().unwrap();
        let (old, new) = (
            "127.0.0.1:40000".parse().unwrap(),
            "127.0.0.1:40001".parse().unwrap(),
        );
        let mut log = WireLog::new(server);
        log.open(1, 1, old);
        log.push(2, 1, Wire::Bytes(vec![1; 5]));
        log.open(3, 2, new);
        log.push(4, 1, Wire::Bytes(vec![2; 7]));
        log.push(4, 1, Wire::Abort);
        log.push(5, 2, Wire::Bytes(vec![3; 9]));
        let mut seen = Vec::new();
        log.drain(&mut |t, s| {
            let local = if s.src == server { s.dst } else { s.src };
            seen.push((t, local, s.flags, s.payload.len()));
        });
        assert_eq!(
            seen,
            [
                (1, old, Tcp::SYN, 0),
                (2, old, Tcp::ACK | Tcp::PSH, 5),
                (3, new, Tcp::SYN, 0),
                (5, new, Tcp::ACK | Tcp::PSH, 9),
            ]
        );
    }
}
