//! `--explain FEED SYMBOL` for an ITCH feed: the symbol's verdict changes
//! over a MoldUDP64 capture or a BinaryFILE replay, each with its cause.
//!
//! [`ItchExplain`] is a [`replay::Observer`](crate::replay::Observer). It
//! asks the feed to [`watch`](crate::protocol::itch50::feed::Feed::watch)
//! the symbol, so the feed itself reports what it did as it applied each
//! packet or record ([`event`](crate::protocol::itch50::event): gaps opened,
//! filled, given up; joins and sessions; system events; the symbol's halts
//! and the order messages that crossed, uncrossed, emptied or first filled
//! its book). Every verdict shown is the feed's own
//! ([`Handler::verdict`]), read after each step; nothing is decoded twice.
//!
//! Between two packets of the feed only time moves, and the verdict can
//! change only at these instants, each taken in time order:
//!
//! - a gap's deadline + 1 ns: a check then gives the gap up (spec itch50
//!   §3.2), so the observer gives it up there, as a check would
//!   ([`Handler::before_check`]), and reads what it unblocked;
//! - `last_alive + stale_threshold + 1` (stale) and
//!   `source_watermark + offset + source_threshold + 1` (stale_at_source),
//!   the first nanoseconds where the strict comparisons of spec itch50 §4
//!   hold.
//!
//! A check at `T` therefore answers the verdict after the last step at or
//! before `T` (`no_quote` before the first); a test holds this against the
//! replay's own answers on the fixtures.

use super::{dur, iso, rel, rel_i, ticks};
use crate::capture::Datagram;
use crate::config::{FeedConfig, ProtocolSettings};
use crate::handler::Handler;
use crate::protocol::itch50::book::{Price, Top};
use crate::protocol::itch50::config::RECOVERY_LINE;
use crate::protocol::itch50::event::{crossed, empty, Event, Outcome, PacketInfo};
use crate::protocol::itch50::message::Side;
use crate::protocol::Rejected;
use crate::replay::Observer;
use crate::symbol::Symbol;
use crate::verdict::{Reasons, Thresholds};
use std::fmt::Write as _;
use std::net::SocketAddrV4;

/// What made a step happen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Trigger {
    /// A datagram of the feed, on `line` (0 = A, 1 = B, 2 = recovery).
    Datagram {
        /// Its destination.
        dst: SocketAddrV4,
        /// Line index.
        line: usize,
        /// Its header and what it did, when accepted.
        packet: Option<(PacketInfo, Outcome)>,
        /// Why it was rejected, if it was.
        rejected: Option<&'static str>,
    },
    /// A segment of the feed's snapshot connection (GLIMPSE over TCP):
    /// what the connection's end did, if it ended there.
    Segment {
        /// The snapshot it completed was merged: its N and `S` packets.
        merged: Option<(u64, u64)>,
        /// The attempt failed (and the wait was given up, if so).
        failed: Option<bool>,
        /// The connection's start set the feed waiting for its snapshot
        /// (a recorded snapshot request: the stream held, suspect).
        awaiting: bool,
    },
    /// A BinaryFILE record (`index` is 0-based; its sequence is `index + 1`).
    Record {
        /// The record's index.
        index: u64,
    },
    /// A gap's deadline passed: given up at its first nanosecond after.
    Deadline,
    /// No proof of life for longer than the stale threshold.
    Silence {
        /// Last arrival that proved the feed alive, ns.
        last_alive: u64,
        /// Stale threshold, ns.
        threshold_ns: u64,
        /// The source age crossed in the same nanosecond: the source
        /// watermark and the clock offset, ns.
        and_source: Option<super::SourceAge>,
    },
    /// The latest complete source time is older than the source threshold.
    SourceAge {
        /// Source watermark, ns since the Unix epoch (exchange clock).
        watermark: i128,
        /// Clock offset in force, ns.
        offset: i128,
        /// Source threshold, ns.
        threshold_ns: u64,
    },
}

/// The messages' events a step keeps: the first and last half of this many
/// (and the last of each kind).
pub const STEP_MESSAGES: usize = 8;

/// [`order`] of a message's event (a system event, a halt, a book change).
const MESSAGE: u8 = 3;

/// Which kind of a message's event `e` is, as a step keeps the last of
/// each: the symbol's trading state (a trading action, an operational
/// halt), a system event, its book.
fn kind(e: &Event) -> Option<u8> {
    match e {
        Event::TradingAction { .. } | Event::OperationalHalt { .. } => Some(0),
        Event::SystemEvent { .. } => Some(1),
        Event::Book { .. } => Some(2),
        _ => None,
    }
}

/// Where an event is told in its step: sessions and joins first, then
/// gaps and refusals, then the messages' events, in order.
fn order(e: &Event) -> u8 {
    match e {
        Event::NewSession { .. } => 0,
        Event::Joined { .. } => 1,
        Event::GapOpened { .. } | Event::GapFilled { .. } | Event::GapGivenUp { .. } => 2,
        // Once a session each: always told.
        Event::OrdersRefused { .. }
        | Event::SymbolsRefused { .. }
        | Event::SnapshotRefused { .. } => 2,
        _ => MESSAGE,
    }
}

/// One moment of the symbol's history: what happened and the feed's verdict
/// before and after.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// When, ns since the Unix epoch (local clock).
    pub time: u64,
    /// What made it happen.
    pub trigger: Trigger,
    /// What the feed reported doing (packet headers are in the trigger):
    /// of the messages' events, the first and last [`STEP_MESSAGES`]` / 2`
    /// and the last of each kind.
    pub events: Vec<Event>,
    /// The messages' events between those, not kept.
    pub untold: u64,
    /// The clock offset before and after, when it changed at this step, ns.
    pub offset: Option<(i128, i128)>,
    /// The feed's verdict before.
    pub before: Reasons,
    /// The feed's verdict after.
    pub after: Reasons,
}

impl super::Moment for Step {
    fn time(&self) -> u64 {
        self.time
    }
    fn turn(&self) -> (Reasons, Reasons) {
        (self.before, self.after)
    }
}

impl Step {
    /// True when the verdict changed.
    pub fn changed(&self) -> bool {
        self.before != self.after
    }
}

/// The feed's state at `--at`, read from the feed itself.
#[derive(Debug, Clone)]
struct AtState {
    line: String,
}

/// The replay observer behind `--explain` on an ITCH feed.
pub struct ItchExplain {
    feed: u16,
    name: String,
    /// The line the datagram at hand was routed to ([`Observer::routed`]).
    routed: Option<usize>,
    gap_timeout_ns: u64,
    symbol: Symbol,
    th: Thresholds,
    at: Option<u64>,
    at_state: Option<AtState>,
    watching: bool,
    /// Everything up to this time is accounted for, ns.
    t: u64,
    verdict: Reasons,
    offset: i128,
    origin: Option<u64>,
    last_arrival: Option<u64>,
    /// The feed's snapshot tally before the segment at hand
    /// ([`snapshot_tally`]).
    snapshots: (u64, u64, u64),
    /// Whether the feed awaited a snapshot before the segment.
    awaiting: bool,
    file: bool,
    scratch: Vec<Event>,
    steps: Vec<Step>,
    /// Steps forgotten, the oldest ([`super::keep`]).
    forgotten: u64,
    /// Decimals prices print with (the feed's `price_decimals`).
    decimals: u8,
}

impl ItchExplain {
    /// Keeps `step` ([`super::keep`]: the latest, none after `--at`).
    fn keep(&mut self, step: Step) {
        super::keep(&mut self.steps, &mut self.forgotten, self.at, step);
    }

    /// An observer for `symbol` of feed `id` (its configuration `feed`);
    /// `at` keeps the feed's state at that time for [`answer_at`](Self::answer_at).
    pub fn new(id: u16, feed: &FeedConfig, symbol: Symbol, at: Option<u64>) -> ItchExplain {
        ItchExplain {
            feed: id,
            name: feed.name.clone(),
            routed: None,
            gap_timeout_ns: match &feed.settings {
                ProtocolSettings::Itch50(c) => c.gap_timeout_ns,
                _ => 0,
            },
            symbol,
            th: feed.thresholds_for(symbol),
            at,
            at_state: None,
            watching: false,
            t: 0,
            verdict: Reasons::NO_QUOTE,
            offset: 0,
            origin: None,
            last_arrival: None,
            snapshots: (0, 0, 0),
            awaiting: false,
            file: false,
            scratch: Vec::new(),
            steps: Vec::new(),
            forgotten: 0,
            decimals: feed.price_decimals,
        }
    }

    /// Every step kept: those that changed the verdict, and those with an
    /// event that explains it (gaps, sessions, system events, the symbol's
    /// halts and book crossings), in time order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The input's first arrival (the origin of relative times), if any.
    pub fn origin(&self) -> Option<u64> {
        self.origin
    }

    /// The input's latest arrival, if any.
    pub fn last_arrival(&self) -> Option<u64> {
        self.last_arrival
    }

    /// The verdict the steps imply at `t`: the last step's at or before it.
    pub fn verdict_at(&self, t: u64) -> Reasons {
        super::verdict_at(&self.steps, t)
    }

    fn watch(&mut self, handler: &mut Handler) {
        if self.watching {
            return;
        }
        self.watching = true;
        if let Some(it) = handler
            .feeds_mut()
            .get_mut(self.feed as usize)
            .and_then(|f| f.engine_mut().itch_mut())
        {
            it.watch(self.symbol);
            self.offset = it.offset();
        }
    }

    /// The next threshold crossing in `(self.t, to]`, with its trigger.
    fn crossing(&self, handler: &Handler, to: u64) -> Option<(u64, Trigger)> {
        let it = handler.feeds().get(self.feed as usize)?.engine().itch()?;
        let (at, c, tied) = super::next_crossing(
            self.t,
            to,
            self.th,
            it.last_alive(),
            it.source_watermark(),
            it.offset(),
        )?;
        Some((
            at,
            match c {
                super::Crossing::Silence { last_alive } => Trigger::Silence {
                    last_alive,
                    threshold_ns: self.th.stale_ns,
                    and_source: tied,
                },
                super::Crossing::SourceAge { watermark, offset } => Trigger::SourceAge {
                    watermark,
                    offset,
                    threshold_ns: self.th.source_ns,
                },
            },
        ))
    }

    /// Brings the history up to `to` (inclusive): every gap deadline and
    /// threshold crossing up to it, in time order.
    fn advance(&mut self, handler: &mut Handler, to: u64) {
        loop {
            let Some(it) = handler
                .feeds()
                .get(self.feed as usize)
                .and_then(|f| f.engine().itch())
            else {
                return;
            };
            let deadline = it
                .sequencer()
                .gaps()
                .next()
                // (A deadline at the largest time never passes.)
                .and_then(|(.., deadline)| deadline.checked_add(1))
                .filter(|&e| e <= to);
            let crossing = self.crossing(handler, to);
            match (deadline, crossing) {
                (Some(e), c) if c.is_none_or(|(c, _)| e <= c) => {
                    // The handler at the deadline's own time (the
                    // history may be later, capture time having stepped
                    // back): it gives up what a check then would.
                    handler.before_check(self.feed, e);
                    let e = e.max(self.t);
                    self.step(handler, e, Trigger::Deadline);
                }
                (_, Some((c, trigger))) => self.step(handler, c, trigger),
                _ => return,
            }
        }
    }

    /// Reads what the feed did and its verdict at `time`, and keeps the
    /// step if the verdict changed or an event explains it.
    fn step(&mut self, handler: &mut Handler, time: u64, mut trigger: Trigger) {
        self.t = self.t.max(time);
        let Some(it) = handler
            .feeds_mut()
            .get_mut(self.feed as usize)
            .and_then(|f| f.engine_mut().itch_mut())
        else {
            return;
        };
        self.scratch.clear();
        it.take_events(&mut self.scratch);
        let offset = it.offset();
        let after = handler.verdict(self.feed, self.symbol, self.t);
        let mut events = Vec::new();
        for e in self.scratch.drain(..) {
            match (e, &mut trigger) {
                (Event::Packet { packet, outcome }, Trigger::Datagram { packet: p, .. }) => {
                    *p = Some((packet, outcome));
                }
                (Event::Packet { .. }, _) => {}
                (e, _) => events.push(e),
            }
        }
        // Sessions and joins first, then gaps, then the messages in order.
        events.sort_by_key(order);
        // The messages' events past the first and last few not kept (but
        // the last of each kind, which leaves the symbol as the step
        // does): a datagram of thousands, or a give-up releasing
        // `max_held`, keeps a step no larger.
        let first = events.partition_point(|e| order(e) < MESSAGE);
        let mut untold = 0;
        if events.len() - first > STEP_MESSAGES {
            let middle = first + STEP_MESSAGES / 2..events.len() - STEP_MESSAGES / 2;
            let last_of = |k: u8| events.iter().rposition(|e| kind(e) == Some(k));
            let kept = [last_of(0), last_of(1), last_of(2)];
            let mut i = 0;
            events.retain(|_| {
                let keep = !middle.contains(&i) || kept.contains(&Some(i));
                i += 1;
                untold += u64::from(!keep);
                keep
            });
            events.shrink_to_fit();
        }
        let offset_change = (offset != self.offset).then_some((self.offset, offset));
        self.offset = offset;
        let before = self.verdict;
        self.verdict = after;
        if before != after || !events.is_empty() {
            self.keep(Step {
                time: self.t,
                trigger,
                events,
                untold,
                offset: offset_change,
                before,
                after,
            });
        }
    }

    fn keep_at_state(&mut self, handler: &mut Handler) {
        let (Some(at), None) = (self.at, &self.at_state) else {
            return;
        };
        let Some(it) = handler
            .feeds_mut()
            .get_mut(self.feed as usize)
            .and_then(|f| f.engine_mut().itch_mut())
        else {
            return;
        };
        let origin = self.origin.unwrap_or(at);
        let seq = it.sequencer();
        let mut line = format!(
            "  state: session {}, next seq {}, {} gaps open, suspect {}, joined {}{}{}, hours {}",
            it.session().map_or("none".into(), |s| s.display()),
            seq.next().map_or("none".into(), |n| n.to_string()),
            seq.gaps_open(),
            it.suspect(),
            seq.joined(),
            if it.orders_refused() {
                ", orders refused (max_orders)"
            } else {
                ""
            },
            if it.symbols_refused() {
                ", symbols refused (max_symbols)"
            } else {
                ""
            },
            match it.hours() {
                crate::protocol::itch50::feed::Hours::Open => "open",
                crate::protocol::itch50::feed::Hours::Closed => "closed",
            }
        );
        if let Some(a) = it.last_alive() {
            let _ = write!(
                line,
                ", last alive {} ({} before; stale after {})",
                rel(a, origin),
                dur(at as i128 - a as i128),
                dur(self.th.stale_ns as i128)
            );
        }
        if let Some(w) = it.source_watermark() {
            let _ = write!(
                line,
                ", source age {} at clock offset {} (stale_at_source after {})",
                dur(at as i128 - w - it.offset()),
                dur(it.offset()),
                dur(self.th.source_ns as i128)
            );
        }
        match it.settled().symbol(self.symbol) {
            Some((s, top, orders)) => {
                let _ = write!(
                    line,
                    ", book {} ({orders} orders)",
                    top_text(&top, self.decimals)
                );
                if let Some(state) = s.trading_state {
                    let _ = write!(line, ", trading state {}", crate::shm::printable(&[state]));
                }
                if s.operational_halt {
                    line.push_str(", operational halt");
                }
            }
            None => line.push_str(", symbol not in the session"),
        }
        line.push('\n');
        self.at_state = Some(AtState { line });
    }

    /// The `--explain` text: a header line (`# …`), then one step per line:
    /// every step that changed the verdict, and with `all` also those that
    /// did not but explain it. A symbol never in a session gets one line.
    pub fn explanation(&self, all: bool) -> String {
        let origin = self.origin.unwrap_or(0);
        let mut out = self.header();
        if self.forgotten > 0 {
            out.push_str(&super::forgotten_line(self.forgotten));
        }
        let mut any = false;
        for s in self.steps.iter().filter(|s| all || s.changed()) {
            out.push_str(&self.render(s, origin));
            out.push('\n');
            any = true;
        }
        // (Only when every step was kept: one forgotten may have quoted.)
        if !any && self.forgotten == 0 && self.steps.iter().all(|s| s.after == Reasons::NO_QUOTE) {
            let _ = writeln!(
                out,
                "{} {}: never quoted in this {}: every check answers no_quote",
                self.name,
                self.symbol,
                self.input()
            );
        }
        out
    }

    fn input(&self) -> &'static str {
        if self.file {
            "file"
        } else {
            "capture"
        }
    }

    fn header(&self) -> String {
        let first = if self.file {
            "the file's first record"
        } else {
            "the capture's first datagram"
        };
        // A BinaryFILE has no gaps: its records are sequences 1, 2, 3, …
        let gaps = if self.file {
            String::new()
        } else {
            format!(", gaps given up after {}", dur(self.gap_timeout_ns as i128))
        };
        format!(
            "# {} {}: itch50 feed, stale after {} without a {} proving the feed alive, stale_at_source after {} of source age{gaps}; times from {first} at {}\n",
            self.name,
            self.symbol,
            dur(self.th.stale_ns as i128),
            if self.file { "record" } else { "packet" },
            dur(self.th.source_ns as i128),
            match self.origin {
                Some(t) => iso(t),
                // A file none of whose records is stamped in the day.
                None => "no time (none in the day)".to_string(),
            },
        )
    }

    /// One step as a line of `--explain` output (no newline).
    pub fn render(&self, s: &Step, origin: u64) -> String {
        // A file's records stamped past the day before its first in the
        // day: applied before any check, at no time of their own.
        let (at, since) = match self.file && (self.origin.is_none() || s.time < origin) {
            true => (
                "before the first record in the day".to_string(),
                String::new(),
            ),
            false => (iso(s.time), rel(s.time, origin)),
        };
        let mut out = format!("{at}  {since:>15}  {}", self.describe(s, origin));
        if s.changed() {
            let _ = write!(out, "   {} -> {}", s.before, s.after);
        } else {
            let _ = write!(out, "   {} (unchanged)", s.after);
        }
        out
    }

    fn line_name(&self, line: usize) -> &'static str {
        match line {
            0 => "line A",
            1 => "line B",
            RECOVERY_LINE => "recovery channel",
            _ => "line ?",
        }
    }

    fn describe(&self, s: &Step, origin: u64) -> String {
        let mut parts: Vec<String> = Vec::new();
        let ends_stale = s.before.contains(Reasons::STALE) && !s.after.contains(Reasons::STALE);
        match s.trigger {
            Trigger::Datagram {
                dst,
                line,
                packet,
                rejected,
            } => {
                let mut p = match packet {
                    Some((info, outcome)) => packet_text(&info, &outcome, ends_stale),
                    None => format!("rejected packet ({})", rejected.unwrap_or("?")),
                };
                let _ = write!(p, " on {} {dst}", self.line_name(line));
                parts.push(p);
            }
            Trigger::Segment {
                merged,
                failed,
                awaiting,
            } => parts.push(match (merged, failed) {
                (None, None) if awaiting => {
                    "snapshot connection opened: the feed awaits its snapshot, the stream held until it merges"
                        .into()
                }
                (Some((n, messages)), _) => format!(
                    "snapshot merged: GLIMPSE spin of {messages} messages up to seq {}, the stream going on from seq {n}",
                    n.saturating_sub(1)
                ),
                (None, Some(true)) => {
                    "snapshot attempt failed, and the wait for one given up".into()
                }
                (None, Some(false)) => "snapshot attempt failed".into(),
                (None, None) => "segment of the snapshot connection".into(),
            }),
            Trigger::Record { index } => {
                let alive = if ends_stale {
                    " (proves the feed alive)"
                } else {
                    ""
                };
                parts.push(format!("record {index} (seq {}){alive}", index + 1))
            }
            Trigger::Deadline => {}
            Trigger::Silence {
                last_alive,
                threshold_ns,
                and_source,
            } => {
                parts.push(format!(
                    "silence: no {} proving the feed alive since {}, over the {} stale threshold",
                    if self.file { "record" } else { "packet" },
                    rel(last_alive, origin),
                    dur(threshold_ns as i128)
                ));
                if let Some((watermark, offset)) = and_source {
                    parts.push(source_age(watermark, offset, self.th.source_ns, origin));
                }
            }
            Trigger::SourceAge {
                watermark,
                offset,
                threshold_ns,
            } => parts.push(source_age(watermark, offset, threshold_ns, origin)),
        }
        let source_moved = s.before.contains(Reasons::STALE_AT_SOURCE)
            != s.after.contains(Reasons::STALE_AT_SOURCE);
        if let (Some((from, to)), true) = (s.offset, source_moved) {
            parts.push(format!("clock offset {} -> {}", dur(from), dur(to)));
        }
        let first = s.events.partition_point(|e| order(e) < MESSAGE);
        for (i, e) in s.events.iter().enumerate() {
            if s.untold > 0 && i == first + STEP_MESSAGES / 2 {
                parts.push(format!("... {} more messages' events not kept", s.untold));
            }
            parts.push(event_text(e, origin, self.decimals));
        }
        parts.join("; ")
    }

    /// The `--at` text: the verdict at `time` (the replay's own answer,
    /// `answer`), the step that set each reason (or, when ok, the step
    /// since which it is ok), and the feed's state then.
    pub fn answer_at(&self, time: u64, answer: Reasons) -> String {
        let origin = self.origin.unwrap_or(time);
        super::answer_at(
            (&self.name, &self.symbol.to_string()),
            time,
            answer,
            origin,
            (&self.steps, self.forgotten),
            |s| self.render(s, origin),
            self.at_state.as_ref().map(|a| a.line.as_str()),
        )
    }
}

impl Observer for ItchExplain {
    fn routed(&mut self, line: usize) {
        self.routed = Some(line);
    }

    fn before(&mut self, handler: &mut Handler, feed: Option<u16>, d: &Datagram<'_>) {
        self.origin.get_or_insert(d.time_ns);
        self.last_arrival = Some(self.last_arrival.map_or(d.time_ns, |l| l.max(d.time_ns)));
        if feed == Some(self.feed) {
            self.watch(handler);
            self.advance(handler, d.time_ns);
        }
    }

    fn after(
        &mut self,
        handler: &mut Handler,
        feed: u16,
        d: &Datagram<'_>,
        result: Result<(), Rejected>,
    ) {
        if feed != self.feed {
            return;
        }
        // The line the replay routed it to, as the feed takes it (under
        // `--feed`, every datagram is line A's).
        let line = self.routed.take().unwrap_or(RECOVERY_LINE);
        let trigger = Trigger::Datagram {
            dst: d.dst,
            line,
            packet: None,
            rejected: result.err().map(|r| r.as_str()),
        };
        self.step(handler, d.time_ns, trigger);
    }

    fn before_segment(&mut self, handler: &mut Handler, feed: u16, time: u64) {
        self.origin.get_or_insert(time);
        // A snapshot connection's segments arrive too: `--at` after the
        // last datagram but before them is within the capture.
        self.last_arrival = Some(self.last_arrival.map_or(time, |l| l.max(time)));
        if feed == self.feed {
            self.watch(handler);
            self.advance(handler, time);
            self.snapshots = snapshot_tally(handler, feed);
            self.awaiting = awaiting(handler, feed);
        }
    }

    fn after_segment(&mut self, handler: &mut Handler, feed: u16, time: u64) {
        if feed != self.feed {
            return;
        }
        let (merges, failures, gave_up) = snapshot_tally(handler, feed);
        let (merges_was, failures_was, gave_up_was) = self.snapshots;
        let merged = (merges > merges_was)
            .then(|| {
                let c = glimpse(handler, feed)?;
                Some((c.next?, c.messages))
            })
            .flatten();
        let failed = (failures > failures_was).then_some(gave_up > gave_up_was);
        let awaiting = awaiting(handler, feed) && !self.awaiting;
        let something = merged.is_some() || failed.is_some() || awaiting;
        let kept = self.steps.len();
        let trigger = Trigger::Segment {
            merged,
            failed,
            awaiting,
        };
        self.step(handler, time, trigger);
        if something && self.steps.len() == kept {
            // Nothing changed the verdict, but the snapshot is told.
            let v = self.verdict;
            self.keep(Step {
                time: self.t,
                trigger,
                events: Vec::new(),
                untold: 0,
                offset: None,
                before: v,
                after: v,
            });
        }
    }

    fn before_check(&mut self, handler: &mut Handler, feed: u16, at: u64) {
        if feed != self.feed {
            return;
        }
        self.watch(handler);
        self.advance(handler, at);
        if self.at == Some(at) {
            self.keep_at_state(handler);
        }
    }

    fn wants_record_times(&self) -> bool {
        true
    }

    /// The watched feed's top is read after every datagram or record.
    fn books_on_one_thread(&self) -> bool {
        true
    }

    fn before_record(&mut self, handler: &mut Handler, feed: u16, _index: u64, time: Option<u64>) {
        if feed != self.feed {
            return;
        }
        self.file = true;
        self.watch(handler);
        if let Some(t) = time {
            self.origin.get_or_insert(t);
            self.last_arrival = Some(self.last_arrival.map_or(t, |l| l.max(t)));
            self.advance(handler, t);
        }
    }

    /// A record without a time (one stamped past the day, applied with no
    /// check waiting on it, or one not valid, which changes nothing) is a
    /// step at the time reached: the replay's checks see its change from
    /// there on.
    fn after_record(&mut self, handler: &mut Handler, feed: u16, index: u64, time: Option<u64>) {
        if feed == self.feed {
            self.step(handler, time.unwrap_or(self.t), Trigger::Record { index });
        }
    }

    /// The end: the gaps still open are given up at their deadlines and the
    /// threshold crossings still to come are listed (checks after the end
    /// see them).
    fn end(&mut self, handler: &mut Handler) {
        if self.watching {
            self.advance(handler, u64::MAX);
        }
    }
}

/// `feed`'s snapshots so far: merges, failed attempts, waits given up
/// (zeros without GLIMPSE).
/// Whether `feed` waits for a snapshot (its stream held).
fn awaiting(handler: &Handler, feed: u16) -> bool {
    handler
        .feeds()
        .get(feed as usize)
        .and_then(|f| f.engine().itch())
        .is_some_and(|it| it.sequencer().awaiting())
}

fn snapshot_tally(handler: &Handler, feed: u16) -> (u64, u64, u64) {
    glimpse(handler, feed).map_or((0, 0, 0), |c| {
        (c.latency.iter().sum(), c.failures.iter().sum(), c.gave_up)
    })
}

/// `feed`'s snapshot counters, for an ITCH feed with `glimpse`.
fn glimpse(handler: &Handler, feed: u16) -> Option<&crate::protocol::itch50::snapshot::Counters> {
    match handler.feeds().get(feed as usize)?.engine() {
        crate::protocol::Engine::Itch50(e) => e.snapshots(),
        _ => None,
    }
}

/// A price in 1/10,000 dollar as dollars, with `decimals` (exact, at
/// least that many): `190.0600` with 4.
fn price(p: Price, decimals: u8) -> String {
    crate::state::Price::Decimal {
        mantissa: i64::from(p),
        exponent: -4,
    }
    .fixed(decimals)
}

fn top_text(t: &Top, decimals: u8) -> String {
    let side = |s: Option<(Price, u64)>| {
        s.map_or("none".into(), |(p, n)| {
            format!("{} x {n}", price(p, decimals))
        })
    };
    format!("bid {}, ask {}", side(t.bid), side(t.ask))
}

/// A timestamp in ns since midnight as `09:30:00.000000123`.
fn clock(ts: u64) -> String {
    let s = ts / 1_000_000_000;
    format!(
        "{:02}:{:02}:{:02}.{:09}",
        s / 3600,
        s % 3600 / 60,
        s % 60,
        ts % 1_000_000_000
    )
}

fn seqs(lo: u64, hi: u64) -> String {
    if hi == lo + 1 {
        format!("seq {lo}")
    } else {
        format!("seq {lo}..{}", hi - 1)
    }
}

/// A packet and what it did; `ends_stale`: say that it proved the feed alive.
fn packet_text(p: &PacketInfo, o: &Outcome, ends_stale: bool) -> String {
    let session = p.session.display();
    let mut s = match p.count {
        0 => format!("heartbeat session {session} next seq {}", p.sequence),
        0xFFFF => format!(
            "end of session {session} at seq {}: hours closed",
            p.sequence
        ),
        n => format!("packet session {session} seq {} count {n}", p.sequence),
    };
    if o.stale_session {
        s.push_str(" (an earlier session's: ignored)");
    } else if o.alive && ends_stale {
        s.push_str(" (proves the feed alive)");
    } else if p.count != 0 && p.count != 0xFFFF && o.duplicates == p.count as u32 {
        s.push_str(" (all duplicates)");
    }
    s
}

/// The source age crossing its threshold: the watermark and the clock
/// offset in force, ns.
fn source_age(watermark: i128, offset: i128, threshold_ns: u64, origin: u64) -> String {
    format!(
        "source age: the feed's latest complete source time, {} (+ clock offset {}), is now older than the {} source threshold",
        rel_i(watermark + offset, origin),
        dur(offset),
        dur(threshold_ns as i128)
    )
}

fn event_text(e: &Event, origin: u64, decimals: u8) -> String {
    match *e {
        Event::Packet { packet, outcome } => packet_text(&packet, &outcome, false),
        Event::GapOpened { lo, hi, deadline } => format!(
            "gap opened: {} missing ({}), given up after {}",
            seqs(lo, hi),
            ticks(hi - lo),
            rel(deadline, origin)
        ),
        Event::GapFilled { lo, hi } => format!("gap {} filled", seqs(lo, hi)),
        Event::GapGivenUp {
            lo,
            hi,
            missing,
            deadline,
            first,
            room,
        } => {
            let why = if room {
                "given up for room (max_held)".to_string()
            } else {
                format!("expired (deadline {})", rel(deadline, origin))
            };
            if first {
                format!(
                    "the session's first gap {} {why}: joined mid-session",
                    seqs(lo, hi)
                )
            } else {
                format!("gap {} {why}: {} lost", seqs(lo, hi), ticks(missing))
            }
        }
        Event::Joined { first } => {
            format!("mid-session join: the session's first packet starts at seq {first}")
        }
        Event::OrdersRefused { order, live } => format!(
            "order {order} refused: the books hold {live} live orders (max_orders); \
             the feed is suspect until the session changes or a snapshot merges"
        ),
        Event::SymbolsRefused { stock, symbols } => format!(
            "{stock} refused a symbol: the session holds {symbols} symbols (max_symbols); \
             the feed is suspect until the session changes or a snapshot merges"
        ),
        Event::SnapshotRefused { orders, symbols } => format!(
            "the snapshot refused {}: the feed is suspect until the session changes or a snapshot merges",
            match (orders, symbols) {
                (true, true) => "adds (max_orders) and symbols (max_symbols)",
                (true, false) => "adds (max_orders)",
                _ => "symbols (max_symbols)",
            }
        ),
        Event::NewSession { session } => format!(
            "session {} begins: books and symbols start empty",
            session.display()
        ),
        Event::SystemEvent { code, timestamp } => {
            let what = match code {
                b'O' => "start of messages: hours closed",
                b'S' => "start of system hours: hours open",
                b'Q' => "start of market hours",
                b'M' => "end of market hours",
                b'E' => "end of system hours: hours closed",
                b'C' => "end of messages: hours closed",
                _ => "unknown code",
            };
            format!(
                "system event {} ({what}) at {}",
                code.escape_ascii(),
                clock(timestamp)
            )
        }
        Event::TradingAction {
            state,
            reason,
            timestamp,
            ..
        } => {
            let what = match state {
                b'H' => "halted",
                b'P' => "paused",
                b'Q' => "quotation only",
                b'T' => "trading",
                _ => "unknown state",
            };
            let reason = reason.escape_ascii().to_string();
            let reason = match reason.trim_end() {
                "" => "no reason".to_string(),
                r => format!("reason '{r}'"),
            };
            format!(
                "trading action {} ({what}), {reason}, at {}",
                state.escape_ascii(),
                clock(timestamp)
            )
        }
        Event::OperationalHalt {
            market,
            action,
            timestamp,
            ..
        } => format!(
            "operational halt on market {}: {} at {}{}",
            market.escape_ascii(),
            match action {
                b'H' => "halted",
                b'T' => "resumed",
                _ => "unknown action",
            },
            clock(timestamp),
            // As the feed applies it: Nasdaq's own market only.
            match market {
                b'Q' => "",
                _ => " (another market's: no effect on the verdict)",
            }
        ),
        Event::Book {
            change,
            before,
            after,
            timestamp,
            ..
        } => {
            let what = match change.code {
                b'A' | b'F' => "add",
                b'U' => "replace to",
                b'E' | b'C' => "execution of",
                b'X' => "cancel of",
                b'D' => "delete of",
                _ => "message on",
            };
            let mut s = format!("{what} order {}", change.order);
            if let Some(o) = change.resting {
                let side = match o.side {
                    Side::Buy => "buy",
                    Side::Sell => "sell",
                };
                let _ = write!(s, " ({side}");
                if change.shares > 0 {
                    let _ = write!(s, " {}", change.shares);
                }
                let _ = write!(
                    s,
                    " @ {})",
                    price(change.price.unwrap_or(o.price), decimals)
                );
            }
            let effect = if crossed(&after) && !crossed(&before) {
                "crossed the book"
            } else if crossed(&before) && !crossed(&after) {
                "uncrossed the book"
            } else if empty(&after) {
                "emptied the book"
            } else {
                "first order in the book"
            };
            let _ = write!(
                s,
                " at {}: {effect}, now {}",
                clock(timestamp),
                top_text(&after, decimals)
            );
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "Never quoted" is said only of an explanation that kept every step:
    /// one that forgot its oldest cannot tell.
    #[test]
    fn never_quoted_is_said_only_with_every_step_kept() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/itch");
        let config = crate::config::Config::load(&dir.join("config.toml")).unwrap();
        let symbol = crate::symbol::Symbol::parse("XYZ").unwrap();
        let mut x = ItchExplain::new(0, &config.feeds[0], symbol, None);
        assert!(x.explanation(false).contains("never quoted"));
        x.forgotten = super::super::KEEP as u64;
        let text = x.explanation(false);
        assert!(!text.contains("never quoted"), "{text}");
        assert!(text.contains("earlier steps not kept"), "{text}");
    }

    /// A snapshot connection's segment is an arrival of the capture: the
    /// last one bounds what `--at` may ask without a warning, as a
    /// datagram's does.
    #[test]
    fn a_segment_is_an_arrival() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/itch");
        let config = crate::config::Config::load(&dir.join("config.toml")).unwrap();
        let mut handler = Handler::new(&config);
        let symbol = crate::symbol::Symbol::parse("XYZ").unwrap();
        let mut x = ItchExplain::new(0, &config.feeds[0], symbol, None);
        x.before_segment(&mut handler, 0, 7_000);
        x.before_segment(&mut handler, 0, 9_000);
        assert_eq!(x.last_arrival(), Some(9_000));
    }
}
