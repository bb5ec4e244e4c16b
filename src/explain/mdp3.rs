//! `--explain FEED INSTRUMENT` for an MDP3 feed: the instrument's verdict
//! changes over a capture, each with its cause.
//!
//! [`Mdp3Explain`] is a [`replay::Observer`](crate::replay::Observer). After
//! every datagram of the feed it reads the channel's state and the
//! instrument's ([`Seen`]) and says what changed between the two readings:
//! a packet gap opened, filled or given up; the RptSeq hole an entry
//! revealed, the entries cached, the snapshot that healed it (and the
//! values it skipped for good), the end of event that published the book,
//! the status in force, the definition, a ChannelReset or a restart of the
//! sequence. The packet itself is read only to name the entries of the
//! instrument it carried. Every verdict shown is the feed's own
//! ([`Handler::verdict_named`]), read after each step.
//!
//! Between two datagrams only time moves, and the verdict can change only
//! at a gap's deadline + 1 ns (a check then gives the gap up: the observer
//! gives it up there, as a check would) and at the first nanoseconds where
//! the stale and stale_at_source comparisons hold; each is a step, in time
//! order. A check at `T` thus answers the verdict after the last step at or
//! before `T`.

use super::{dur, iso, rel, rel_i};
use crate::capture::Datagram;
use crate::config::{FeedConfig, ProtocolSettings};
use crate::handler::Handler;
use crate::protocol::mdp3::feed::Feed;
use crate::protocol::mdp3::status::{meaning, Meaning};
use crate::protocol::mdp3::{Body, Packet};
use crate::protocol::Rejected;
use crate::replay::Observer;
use crate::verdict::{Reasons, Thresholds};
use std::fmt::Write as _;
use std::net::SocketAddrV4;

/// What made a step happen.
#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    /// A datagram of the feed.
    Datagram {
        /// Its destination.
        dst: SocketAddrV4,
        /// The service and line it came on (`incremental line A`).
        on: &'static str,
        /// Its MsgSeqNum, when accepted.
        seq: Option<u32>,
        /// Why it was rejected, if it was.
        rejected: Option<&'static str>,
    },
    /// A packet gap's deadline passed: given up at its first nanosecond
    /// after.
    Deadline,
    /// No gap-free incremental packet for longer than the stale threshold.
    Silence {
        /// Last arrival that proved the channel alive, ns.
        last_alive: u64,
        /// The source age crossed in the same nanosecond: the source
        /// watermark and the clock offset, ns.
        and_source: Option<super::SourceAge>,
    },
    /// The latest complete source time is older than the source threshold.
    SourceAge {
        /// Source watermark, ns UTC (CME's clock).
        watermark: i128,
        /// Clock offset in force, ns.
        offset: i128,
    },
}

/// One moment of the instrument's history.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// When, ns since the Unix epoch (local clock).
    pub time: u64,
    /// What made it happen.
    pub trigger: Trigger,
    /// What changed, in words, in the order it is told.
    pub events: Vec<String>,
    /// The verdict before.
    pub before: Reasons,
    /// The verdict after.
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

/// A book side's level 1: (price mantissa, size), `None` when empty.
type Side = Option<(i64, u64)>;

/// What the channel and the instrument showed at one reading.
#[derive(Debug, Clone, Default, PartialEq)]
struct Seen {
    high: Option<u64>,
    packet_gaps: u64,
    packets_lost: u64,
    recovered: u64,
    channel_resets: u64,
    /// ChannelResets inferred (docs/mdp3.md, "A ChannelReset not seen").
    resets_inferred: u64,
    sequence_restarts: u64,
    /// Times the channel was emptied (ChannelResets, weekly restarts).
    emptied: u64,
    /// Trading statuses before a ChannelReset inferred at a place void.
    voided: bool,
    /// Instruments the channel knew.
    known: usize,
    /// The instrument's place among them, if its name names one.
    place: Option<usize>,
    /// The instrument, once the name resolves.
    id: Option<i32>,
    symbol: Option<String>,
    /// Its definition's SecurityGroup and Asset (its group statuses').
    group: Option<(String, String)>,
    depths: (u8, u8),
    rpt_seq: Option<u32>,
    suspect: bool,
    unverified: bool,
    overflowed: bool,
    /// The channel's clock offset, ns (none before the first reading).
    offset: Option<i128>,
    cached: u64,
    missing: u64,
    ticks_lost: u64,
    applied: u64,
    ignored: u64,
    /// The last snapshot applied: (RptSeq, LastMsgSeqNumProcessed).
    last_snapshot: Option<(u32, u32)>,
    /// Visible outright level 1: (price, size) per side.
    top: (Side, Side),
    status: Option<u8>,
    /// Its last definition deleted it (`D`).
    deleted: bool,
}

impl Seen {
    fn read(feed: &Feed, name: &str) -> Seen {
        let q = feed.sequence().counters();
        let mut s = Seen {
            high: feed.sequence().high(),
            packet_gaps: q.packet_gaps,
            packets_lost: q.packets_lost,
            recovered: q.recovered,
            channel_resets: feed.counters().channel_resets,
            resets_inferred: feed.counters().resets_inferred,
            sequence_restarts: q.sequence_restarts,
            emptied: feed.emptied(),
            voided: feed.trading_voided(),
            known: feed.instruments().len(),
            place: feed.position(name),
            offset: Some(feed.offset()),
            ..Seen::default()
        };
        if let Some(e) = feed.find(name) {
            let seq = &e.instrument.seq;
            let books = feed.visible(e);
            let book = &books.outright;
            let level =
                |l: Option<crate::protocol::mdp3::book::Level>| l.map(|l| (l.price, l.size));
            s.id = Some(e.security_id);
            s.symbol = e.definition.as_ref().map(|d| d.symbol.clone());
            s.group = e
                .definition
                .as_ref()
                .map(|d| (d.group.clone(), d.asset.clone()));
            s.depths = (book.bid.depth(), books.implied.bid.depth());
            s.rpt_seq = seq.rpt_seq();
            s.suspect = seq.suspect();
            s.unverified = seq.unverified();
            s.overflowed = seq.overflowed();
            s.cached = seq.cached() as u64;
            s.missing = seq.missing();
            s.ticks_lost = seq.ticks_lost();
            s.applied = e.snapshots_applied;
            s.ignored = e.snapshots_ignored;
            s.last_snapshot = e.last_snapshot;
            s.top = (level(book.bid.top()), level(book.offer.top()));
            s.status = feed.status(e);
            s.deleted = e.definition.as_ref().is_some_and(|d| d.deleted);
        }
        s
    }
}

/// What one datagram said of the instrument (read only to name things).
#[derive(Debug, Default)]
struct Said {
    /// RptSeq of its entries for the instrument.
    entries: Vec<u32>,
    /// It ended an event.
    end_of_event: bool,
    /// Its snapshots, in the datagram's order: (RptSeq,
    /// LastMsgSeqNumProcessed).
    snapshots: Vec<(u32, u32)>,
    /// The last SecurityStatus that sets a status for it (the one in
    /// force, as the channel keeps the newest): one naming it (true) or
    /// its SecurityGroup or Asset (false).
    status: Option<bool>,
}

impl Said {
    /// What `payload` said of instrument `id`, of SecurityGroup and Asset
    /// `group` (its definition's).
    fn read(payload: &[u8], id: Option<i32>, group: Option<&(String, String)>) -> Said {
        let mut said = Said::default();
        let Ok(packet) = Packet::new_checked(payload) else {
            return said;
        };
        for m in packet.messages() {
            said.end_of_event |= m.match_event_indicator().is_some_and(|e| e.end_of_event());
            match m.body() {
                Body::Incremental(inc) => said.entries.extend(
                    inc.entries()
                        .filter(|e| Some(e.security_id()) == id)
                        .map(|e| e.rpt_seq()),
                ),
                Body::Snapshot(s) if Some(s.security_id()) == id => {
                    said.snapshots
                        .push((s.rpt_seq(), s.last_msg_seq_num_processed()));
                }
                // A code that sets no status (103, NoChange; an unknown
                // one) leaves the one in force.
                Body::SecurityStatus(st)
                    if !matches!(
                        crate::protocol::mdp3::status::meaning(st.trading_status().unwrap_or(255)),
                        crate::protocol::mdp3::status::Meaning::Is(_)
                    ) => {}
                Body::SecurityStatus(st) => match st.security_id() {
                    Some(x) if Some(x) == id => said.status = Some(true),
                    // Its group's: each of the status's non-blank
                    // SecurityGroup and Asset its definition's.
                    None if group.is_some_and(|(g, a)| {
                        let trim = crate::protocol::mdp3::template::trim;
                        let (sg, sa) = (trim(st.security_group()), trim(st.asset()));
                        let fits = |f: &[u8], its: &str| f.is_empty() || f == its.as_bytes();
                        !(sg.is_empty() && sa.is_empty()) && fits(sg, g) && fits(sa, a)
                    }) =>
                    {
                        said.status = Some(false)
                    }
                    _ => {}
                },
                _ => {}
            }
        }
        said
    }
}

/// The replay observer behind `--explain` on an MDP3 feed.
pub struct Mdp3Explain {
    feed: u16,
    name: String,
    instrument: String,
    /// The line the datagram at hand was routed to ([`Observer::routed`]).
    routed: Option<usize>,
    gap_timeout_ns: u64,
    th: Thresholds,
    at: Option<u64>,
    at_state: Option<String>,
    /// Everything up to this time is accounted for, ns.
    t: u64,
    verdict: Reasons,
    seen: Seen,
    origin: Option<u64>,
    last_arrival: Option<u64>,
    steps: Vec<Step>,
    /// Steps forgotten, the oldest ([`super::keep`]).
    forgotten: u64,
    /// Instruments the channel refused for room (`max_instruments`), at
    /// the last step.
    refused: u64,
}

/// The service and copy of each line number (`line_index`), as a step
/// names them.
const ON: [&str; 6] = [
    "incremental line A",
    "incremental line B",
    "snapshot line A",
    "snapshot line B",
    "definition line A",
    "definition line B",
];

impl Mdp3Explain {
    /// An observer for the instrument `instrument` (a Symbol or
    /// `#SecurityID`) of feed `id` (its configuration `feed`); `at` keeps
    /// the state at that time for [`answer_at`](Self::answer_at).
    pub fn new(id: u16, feed: &FeedConfig, instrument: &str, at: Option<u64>) -> Mdp3Explain {
        let gap_timeout_ns = match &feed.settings {
            ProtocolSettings::Mdp3(c) => c.gap_timeout_ns,
            _ => 0,
        };
        Mdp3Explain {
            feed: id,
            name: feed.name.clone(),
            instrument: instrument.to_string(),
            routed: None,
            gap_timeout_ns,
            th: feed.override_named(instrument).unwrap_or(feed.thresholds),
            at,
            at_state: None,
            t: 0,
            verdict: Reasons::NO_QUOTE,
            seen: Seen::default(),
            origin: None,
            last_arrival: None,
            steps: Vec::new(),
            forgotten: 0,
            refused: 0,
        }
    }

    /// Every step kept: those that changed the verdict, and those with an
    /// event that explains it, in time order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The capture's latest arrival, if any.
    pub fn last_arrival(&self) -> Option<u64> {
        self.last_arrival
    }

    /// The verdict the steps imply at `t`: the last step's at or before it.
    pub fn verdict_at(&self, t: u64) -> Reasons {
        super::verdict_at(&self.steps, t)
    }

    fn channel<'h>(&self, handler: &'h Handler) -> Option<&'h Feed> {
        handler.feeds().get(self.feed as usize)?.engine().mdp3()
    }

    /// The next threshold crossing in `(self.t, to]`, with its trigger.
    fn crossing(&self, handler: &Handler, to: u64) -> Option<(u64, Trigger)> {
        let f = self.channel(handler)?;
        let (at, c, tied) = super::next_crossing(
            self.t,
            to,
            self.th,
            f.last_alive(),
            f.source_watermark(),
            f.offset(),
        )?;
        Some((
            at,
            match c {
                super::Crossing::Silence { last_alive } => Trigger::Silence {
                    last_alive,
                    and_source: tied,
                },
                super::Crossing::SourceAge { watermark, offset } => {
                    Trigger::SourceAge { watermark, offset }
                }
            },
        ))
    }

    /// Brings the history up to `to` (inclusive): every gap deadline and
    /// threshold crossing up to it, in time order.
    fn advance(&mut self, handler: &mut Handler, to: u64) {
        loop {
            let Some(f) = self.channel(handler) else {
                return;
            };
            let deadline = f
                .sequence()
                .next_deadline()
                // (A deadline at the largest time never passes.)
                .and_then(|d| d.checked_add(1))
                .filter(|&e| e <= to);
            let crossing = self.crossing(handler, to);
            match (deadline, crossing) {
                (Some(e), c) if c.as_ref().is_none_or(|(c, _)| e <= *c) => {
                    // The handler at the deadline's own time (the
                    // history may be later, capture time having stepped
                    // back): it gives up what a check then would.
                    handler.before_check(self.feed, e);
                    let e = e.max(self.t);
                    self.step(handler, e, Trigger::Deadline, &Said::default());
                }
                (_, Some((c, trigger))) => self.step(handler, c, trigger, &Said::default()),
                _ => return,
            }
        }
    }

    /// Reads the state and verdict at `time`, and keeps the step if the
    /// verdict changed or something that explains it happened.
    fn step(&mut self, handler: &mut Handler, time: u64, trigger: Trigger, said: &Said) {
        self.t = self.t.max(time);
        let Some(f) = self.channel(handler) else {
            return;
        };
        // The thresholds the verdict uses: the instrument's override may
        // be found only once it is defined (by its other name).
        if let Some(config) = handler.feeds().get(self.feed as usize).map(|f| &f.config) {
            self.th = f.thresholds(config, &self.instrument);
        }
        let seen = Seen::read(f, &self.instrument);
        self.refused = f.counters().instruments_refused;
        let seq = match &trigger {
            Trigger::Datagram { seq, .. } => *seq,
            _ => None,
        };
        let mut events = events(&self.seen, &seen, said, seq);
        let offset = (self.seen.offset, seen.offset);
        self.seen = seen;
        let after = handler.verdict_named(self.feed, &self.instrument, self.t);
        let before = self.verdict;
        self.verdict = after;
        // A source age that crossed its threshold with the offset moved:
        // the offset is told (the watermark alone may not have moved).
        let source_moved =
            before.contains(Reasons::STALE_AT_SOURCE) != after.contains(Reasons::STALE_AT_SOURCE);
        if let (Some(from), Some(to), true) = (offset.0, offset.1, source_moved) {
            if from != to {
                events.push(format!("clock offset {} -> {}", dur(from), dur(to)));
            }
        }
        if before != after || !events.is_empty() {
            super::keep(
                &mut self.steps,
                &mut self.forgotten,
                self.at,
                Step {
                    time: self.t,
                    trigger,
                    events,
                    before,
                    after,
                },
            );
        }
    }

    fn keep_at_state(&mut self, handler: &Handler) {
        let (Some(at), None) = (self.at, &self.at_state) else {
            return;
        };
        let Some(f) = self.channel(handler) else {
            return;
        };
        let s = Seen::read(f, &self.instrument);
        let origin = self.origin.unwrap_or(at);
        let mut line = format!(
            "  state: next MsgSeqNum {}, {} gaps open",
            s.high.map_or("none".into(), |h| h.to_string()),
            f.sequence().gaps_open(),
        );
        if let Some(a) = f.last_alive() {
            let _ = write!(
                line,
                ", last alive {} ({} before; stale after {})",
                rel(a, origin),
                dur(at as i128 - a as i128),
                dur(self.th.stale_ns as i128)
            );
        }
        if let Some(w) = f.source_watermark() {
            let _ = write!(
                line,
                ", source age {} at clock offset {} (stale_at_source after {})",
                dur(at as i128 - w - f.offset()),
                dur(f.offset()),
                dur(self.th.source_ns as i128)
            );
        }
        match s.id {
            Some(id) => {
                let _ = write!(
                    line,
                    ", SecurityID {id}, RptSeq {}, suspect {}, unverified {}, {} cached, {} missing, book {}",
                    s.rpt_seq.map_or("none".into(), |r| r.to_string()),
                    s.suspect,
                    s.unverified,
                    s.cached,
                    s.missing,
                    top_text(s.top)
                );
                if let Some(c) = s.status {
                    let _ = write!(line, ", status {}", status_text(c));
                }
            }
            None => line.push_str(", instrument not seen"),
        }
        line.push('\n');
        self.at_state = Some(line);
    }

    /// The `--explain` text: a header line, then one step per line: every
    /// step that changed the verdict, and with `all` also those that did
    /// not but explain it.
    pub fn explanation(&self, all: bool) -> String {
        let origin = self.origin.unwrap_or(0);
        let mut out = format!(
            "# {} {}: mdp3 feed, stale after {} without a gap-free incremental packet, stale_at_source after {} of source age, packet gaps given up after {}; prices as decimals (mantissas × 10^-9); times from the capture's first datagram at {}\n",
            self.name,
            self.instrument,
            dur(self.th.stale_ns as i128),
            dur(self.th.source_ns as i128),
            dur(self.gap_timeout_ns as i128),
            iso(origin),
        );
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
                "{} {}: never quoted in this capture: every check answers no_quote{}",
                self.name,
                self.instrument,
                match self.refused {
                    0 => String::new(),
                    1 => " (the channel refused 1 instrument for room, max_instruments: it may be this one)".into(),
                    n => format!(
                        " (the channel refused {n} instruments for room, max_instruments: it may be one)"
                    ),
                }
            );
        }
        out
    }

    /// The source age crossing its threshold: the watermark and the clock
    /// offset in force, ns.
    fn source_age(&self, watermark: i128, offset: i128, origin: u64) -> String {
        format!(
            "source age: the channel's latest complete source time, {} (+ clock offset {}), is now older than the {} source threshold",
            rel_i(watermark + offset, origin),
            dur(offset),
            dur(self.th.source_ns as i128)
        )
    }

    /// One step as a line of `--explain` output (no newline).
    pub fn render(&self, s: &Step, origin: u64) -> String {
        let mut parts: Vec<String> = Vec::new();
        match &s.trigger {
            Trigger::Datagram {
                dst,
                on,
                seq,
                rejected,
            } => parts.push(match (seq, rejected) {
                (_, Some(r)) => format!("rejected packet ({r}) on {on} {dst}"),
                (Some(q), None) => format!("packet MsgSeqNum {q} on {on} {dst}"),
                (None, None) => format!("packet on {on} {dst}"),
            }),
            Trigger::Deadline => {}
            Trigger::Silence {
                last_alive,
                and_source,
            } => {
                parts.push(format!(
                    "silence: no gap-free incremental packet since {}, over the {} stale threshold",
                    rel(*last_alive, origin),
                    dur(self.th.stale_ns as i128)
                ));
                if let Some((watermark, offset)) = and_source {
                    parts.push(self.source_age(*watermark, *offset, origin));
                }
            }
            Trigger::SourceAge { watermark, offset } => {
                parts.push(self.source_age(*watermark, *offset, origin))
            }
        }
        parts.extend(s.events.iter().cloned());
        let mut out = format!(
            "{}  {:>15}  {}",
            iso(s.time),
            rel(s.time, origin),
            parts.join("; ")
        );
        if s.changed() {
            let _ = write!(out, "   {} -> {}", s.before, s.after);
        } else {
            let _ = write!(out, "   {} (unchanged)", s.after);
        }
        out
    }

    /// The `--at` text: the verdict at `time` (the replay's own answer,
    /// `answer`), the step that set each reason (or, when ok, the step
    /// since which it is ok), and the state then.
    pub fn answer_at(&self, time: u64, answer: Reasons) -> String {
        let origin = self.origin.unwrap_or(time);
        super::answer_at(
            (&self.name, &self.instrument),
            time,
            answer,
            origin,
            (&self.steps, self.forgotten),
            |s| self.render(s, origin),
            self.at_state.as_deref(),
        )
    }
}

/// Why a snapshot of RptSeq `r` was ignored by an instrument as `a` was
/// before it: the RptSeq rule (a snapshot applies to an instrument without
/// a baseline, to a suspect one when newer, to an unverified one when not
/// older), or, where that rule would have applied it, the channel's
/// screen: taken before the last ChannelReset or restart, or far past the
/// lines (of a sequence before a restart).
/// Which of a datagram's `snapshots` of the instrument applied (the last
/// that did, as the channel kept it in `b`) and why each other was
/// ignored, told by the RptSeq rule from its state before (`a`), each
/// judged on the state the ones before it left; when that rule does not
/// account for what the channel kept (the counts, or the snapshot it
/// applied: one was refused for another reason), the reasons are judged
/// on `a`.
fn snapshots_told(
    a: &Seen,
    b: &Seen,
    snapshots: &[(u32, u32)],
) -> (Option<(u32, u32)>, Vec<String>) {
    let (applied_n, ignored_n) = (b.applied - a.applied, b.ignored - a.ignored);
    let mut state = a.clone();
    let (mut applied, mut n, mut ignored) = (None, 0, Vec::new());
    for &(r, last) in snapshots {
        let applies = match state.rpt_seq {
            None => true,
            Some(s) => (state.suspect && r > s) || (state.unverified && !state.suspect && r >= s),
        };
        if applies {
            (applied, n) = (Some((r, last)), n + 1);
            (state.rpt_seq, state.suspect, state.unverified) = (Some(r), false, false);
        } else {
            ignored.push(ignored_why(&state, Some(r)));
        }
    }
    let kept = (applied_n > 0).then_some(b.last_snapshot).flatten();
    if (n, ignored.len() as u64) == (applied_n, ignored_n) && applied == kept {
        return (applied, ignored);
    }
    // Each but the one applied, judged on `a`.
    let mut skip = kept;
    let why = snapshots
        .iter()
        .filter(|&&x| skip.take_if(|k| *k == x).is_none())
        .map(|&(r, _)| ignored_why(a, Some(r)));
    (kept, why.take(ignored_n as usize).collect())
}

fn ignored_why(a: &Seen, r: Option<u32>) -> String {
    let Some(r) = r else {
        return "its RptSeq unread".into();
    };
    match a.rpt_seq {
        Some(s) if a.suspect && r <= s => format!("RptSeq {r} is not newer than {s}"),
        Some(s) if a.unverified && !a.suspect && r < s => format!("RptSeq {r} is older than {s}"),
        Some(s) if !a.suspect && !a.unverified => format!(
            "the instrument is healthy at RptSeq {s} (a snapshot applies only to one suspect, unverified or without a baseline)"
        ),
        // The RptSeq rule would have applied it.
        _ => format!(
            "RptSeq {r} taken before the last ChannelReset or restart, or far past the lines (of a sequence before a restart)"
        ),
    }
}

/// What changed between two readings, in words: the channel first, then
/// the instrument.
fn events(a: &Seen, b: &Seen, said: &Said, seq: Option<u32>) -> Vec<String> {
    let mut v = Vec::new();
    if b.channel_resets > a.channel_resets {
        v.push(match b.rpt_seq {
            // Late: packets after it were processed before it.
            None if b.id.is_some() => "ChannelReset come late (in a packet filling a gap, after packets that follow it were processed): every book and cache of the channel emptied, the statuses sent before it emptied (those after it kept), no instrument trusted until its snapshot".into(),
            _ => "ChannelReset: every book, status and cache of the channel emptied, RptSeq restarts at 1".into(),
        });
    }
    if b.resets_inferred > a.resets_inferred {
        v.push("ChannelReset inferred (RptSeq went back in the newest packet, or the snapshots applied were taken past the first packet): every book and cache of the channel emptied, the statuses before it void if trading (all emptied before the first packet), no instrument trusted until its snapshot or RptSeq 1".into());
    }
    if b.sequence_restarts > a.sequence_restarts {
        v.push(format!(
            "MsgSeqNum restarted (was {}): the channel starts over",
            a.high.map_or("none".into(), |h| (h - 1).to_string())
        ));
    }
    if b.packet_gaps > a.packet_gaps {
        let text = match (a.high, seq) {
            // `h` below `s`, so within u32.
            (Some(h), Some(s)) if u64::from(s) > h => {
                format!(
                    "packet gap opened: MsgSeqNum {} missing",
                    range(h as u32, s - 1)
                )
            }
            _ => "packet gap opened".into(),
        };
        v.push(text);
    }
    if b.recovered > a.recovered {
        v.push("filled a packet gap".into());
    }
    if b.packets_lost > a.packets_lost {
        v.push(format!(
            "packet gap given up: {}; every instrument unverified",
            count(b.packets_lost - a.packets_lost, "packet", "lost")
        ));
    }
    let Some(id) = b.id else {
        if let Some(was) = a.id {
            v.push(format!(
                "definition: its Symbol deleted (SecurityID {was} no longer named by it): no instrument by that name"
            ));
        }
        return v;
    };
    match a.id {
        // Known before, though its name named none: as another's below.
        None if b.place.is_some_and(|p| p < a.known) => {
            v.push(format!(
                "definition: its Symbol now names SecurityID {id}, known before: that instrument's book and state from here"
            ));
            return v;
        }
        None => v.push(format!("first seen: SecurityID {id}")),
        Some(was) if was != id => {
            // Another instrument's state from here: nothing to compare.
            v.push(format!(
                "definition: its Symbol now names SecurityID {id} (was {was}): that instrument's book and state from here"
            ));
            return v;
        }
        Some(_) => {}
    }
    if b.symbol != a.symbol || (b.depths != a.depths && a.id.is_some()) {
        if let Some(sym) = &b.symbol {
            let sym = match sym.is_empty() {
                // Refused (a `#` first, or a byte no Symbol has).
                true => "none usable".to_string(),
                false => sym.clone(),
            };
            v.push(format!(
                "definition: Symbol {sym}, depth {} outright, {} implied",
                b.depths.0, b.depths.1
            ));
        }
    }
    let sequencing_moved = (b.rpt_seq, b.suspect, b.cached, b.overflowed)
        != (a.rpt_seq, a.suspect, a.cached, a.overflowed);
    if sequencing_moved && !said.entries.is_empty() {
        v.push(format!("entries {}", rpt_list(&said.entries)));
    }
    let (applied, ignored) = snapshots_told(a, b, &said.snapshots);
    if b.applied > a.applied {
        let (r, last) = applied.unwrap_or((b.rpt_seq.unwrap_or(0), 0));
        let lost = b.ticks_lost.saturating_sub(a.ticks_lost);
        v.push(format!(
            "snapshot applied: RptSeq {r}, after MsgSeqNum {last}; both books replaced and published{}",
            if lost > 0 {
                format!(", {}", count(lost, "RptSeq value", "skipped for good"))
            } else {
                String::new()
            }
        ));
    }
    for why in ignored {
        v.push(format!("snapshot ignored: {why}"));
    }
    // A ChannelReset or the weekly restart makes every instrument healthy
    // and verified (RptSeq starts over); a snapshot applied heals or
    // verifies it; else an entry applied did.
    let restarted = b.emptied > a.emptied;
    let by_snapshot = b.applied > a.applied;
    match (a.suspect, b.suspect) {
        (true, false) if restarted => {
            v.push("healthy again: the channel restarted, RptSeq starts over".into())
        }
        (false, true) => v.push(match b.rpt_seq {
            // A definition changed the depth its book was kept at.
            None if a.rpt_seq.is_some_and(|r| r > 0) && b.depths != a.depths => {
                let deeper = b.depths.0 > a.depths.0 || b.depths.1 > a.depths.1;
                format!(
                    "no baseline: its definition made its book {} than it was kept (depth {} outright, {} implied, was {}, {}), {}; suspect until a snapshot",
                    if deeper { "deeper" } else { "shallower" },
                    b.depths.0,
                    b.depths.1,
                    a.depths.0,
                    a.depths.1,
                    if deeper {
                        "the levels it never held unknown"
                    } else {
                        "a level the venue dropped past its depth perhaps kept"
                    }
                )
            }
            // The ChannelReset told above forgot it (come late, or inferred).
            None if b.channel_resets > a.channel_resets
                || b.resets_inferred > a.resets_inferred =>
            {
                "no baseline since the ChannelReset: suspect until its snapshot".into()
            }
            None => "no baseline: its history did not start at RptSeq 1; suspect until a snapshot"
                .into(),
            Some(r) => format!(
                "RptSeq hole: expected {}, {} missing",
                u64::from(r) + 1,
                b.missing
            ),
        }),
        (true, false) if b.unverified && by_snapshot => v.push(format!(
            "RptSeq continuous to {}, but unverified",
            b.rpt_seq.map_or("?".into(), |r| r.to_string())
        )),
        (true, false) => v.push(format!(
            "healed: RptSeq continuous to {}",
            b.rpt_seq.map_or("?".into(), |r| r.to_string())
        )),
        _ => {}
    }
    // Unverified but for a gap given up (said above, channel-wide): by a
    // snapshot taken before packets never received, found when applied
    // or at the lines' first packet, or taken past that packet.
    if b.unverified && !a.unverified && b.packets_lost == a.packets_lost && !restarted {
        v.push(
            "unverified: its snapshot was taken before packets never received (below the lines' first, or given up), or at or past the lines' first packet (the lines behind the loop, or a loop of a sequence before an unseen restart); suspect until a snapshot taken after them or its next entry in RptSeq order"
                .into(),
        );
    }
    if b.cached != a.cached && b.suspect {
        v.push(format!(
            "{}, waiting for the hole",
            count(b.cached, "entry", "cached")
        ));
    }
    if b.overflowed && !a.overflowed {
        v.push("cache full (max_cached): its entries dropped until a snapshot".into());
    }
    if a.unverified && !b.unverified && !b.suspect && a.suspect == b.suspect {
        v.push(
            match (restarted, by_snapshot) {
                (true, _) => "verified again: the channel restarted, RptSeq starts over",
                (false, true) => "verified again: by the snapshot",
                (false, false) => "verified again: an entry applied in order",
            }
            .into(),
        );
    }
    if b.top != a.top {
        // Emptied only if nothing after the reset or restart filled it.
        let empty = b.top == (None, None);
        let how = match (said.end_of_event, seq, b.applied > a.applied) {
            _ if empty && b.channel_resets > a.channel_resets => {
                "emptied by the ChannelReset".to_string()
            }
            _ if empty && b.resets_inferred > a.resets_inferred => {
                "emptied by the ChannelReset inferred".to_string()
            }
            _ if empty && restarted => "emptied by the channel's restart".to_string(),
            (_, _, true) => "published by the snapshot".to_string(),
            (true, Some(s), _) => format!("published at the end of event in MsgSeqNum {s}"),
            _ => "published (its event covered)".to_string(),
        };
        v.push(format!("book {how}: {}", top_text(b.top)));
    }
    if b.status != a.status {
        let from = match (said.status, !said.snapshots.is_empty()) {
            (Some(true), _) => " (SecurityStatus of the instrument)",
            (Some(false), _) => " (SecurityStatus of its group)",
            (None, true) => " (from the snapshot)",
            _ if b.resets_inferred > a.resets_inferred && b.voided => {
                " (the trading statuses from before the ChannelReset inferred void)"
            }
            _ if b.emptied > a.emptied => " (the statuses emptied: its definition's in force)",
            // (Its definition's, or its group's, held before it was seen.)
            _ if a.id.is_none() => " (in force when first seen)",
            _ if b.group != a.group => " (its definition: another group)",
            _ => "",
        };
        v.push(match b.status {
            Some(c) => format!("status {}{from}", status_text(c)),
            None => "status cleared".into(),
        });
    }
    if b.deleted != a.deleted {
        v.push(
            if b.deleted {
                "definition: deleted by the venue (D): closed until a definition lists it again"
            } else {
                "definition: listed again after its deletion"
            }
            .into(),
        );
    }
    v
}

/// `1 packet lost`, `3 packets lost`; `entry` makes `entries`.
fn count(n: u64, what: &str, done: &str) -> String {
    match (n, what.strip_suffix('y')) {
        (1, _) => format!("1 {what} {done}"),
        (_, Some(stem)) => format!("{n} {stem}ies {done}"),
        _ => format!("{n} {what}s {done}"),
    }
}

/// `5` or `5..9`.
fn range(lo: u32, hi: u32) -> String {
    if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}..{hi}")
    }
}

/// `RptSeq 4` or `RptSeq 4, 5, 7`.
fn rpt_list(r: &[u32]) -> String {
    let shown: Vec<String> = r.iter().take(8).map(ToString::to_string).collect();
    let more = if r.len() > 8 {
        format!(" and {} more", r.len() - 8)
    } else {
        String::new()
    };
    format!("RptSeq {}{more}", shown.join(", "))
}

/// A mantissa of exponent −9 as an exact decimal, at least 2 places.
fn price(mantissa: i64) -> String {
    crate::state::Price::Decimal {
        mantissa,
        exponent: -9,
    }
    .fixed(2)
}

fn top_text(top: (Side, Side)) -> String {
    let side = |s: Side| s.map_or("none".into(), |(p, n)| format!("{} x {n}", price(p)));
    format!("bid {}, ask {}", side(top.0), side(top.1))
}

fn status_text(code: u8) -> String {
    match meaning(code) {
        Meaning::Is(s) => format!("{code} ({})", s.as_str()),
        _ => code.to_string(),
    }
}

impl Observer for Mdp3Explain {
    fn routed(&mut self, line: usize) {
        self.routed = Some(line);
    }

    fn before(&mut self, handler: &mut Handler, feed: Option<u16>, d: &Datagram<'_>) {
        self.origin.get_or_insert(d.time_ns);
        self.last_arrival = Some(self.last_arrival.map_or(d.time_ns, |l| l.max(d.time_ns)));
        if feed == Some(self.feed) {
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
        // The line the replay routed it to, as the channel takes it (under
        // `--feed`, every datagram is incremental line A's).
        let on = self
            .routed
            .take()
            .and_then(|line| ON.get(line).copied())
            .unwrap_or("line ?");
        let id = self.seen.id.or_else(|| {
            self.channel(handler)
                .and_then(|f| f.find(&self.instrument))
                .map(|e| e.security_id)
        });
        let said = match result {
            Ok(()) => Said::read(d.payload, id, self.seen.group.as_ref()),
            Err(_) => Said::default(),
        };
        let trigger = Trigger::Datagram {
            dst: d.dst,
            on,
            seq: result
                .ok()
                .and_then(|()| crate::protocol::mdp3::packet::seq_num(d.payload)),
            rejected: result.err().map(|r| r.as_str()),
        };
        self.step(handler, d.time_ns, trigger, &said);
    }

    fn before_check(&mut self, handler: &mut Handler, feed: u16, at: u64) {
        if feed != self.feed {
            return;
        }
        self.advance(handler, at);
        if self.at == Some(at) {
            self.keep_at_state(handler);
        }
    }

    /// The end: the gaps still open are given up at their deadlines and the
    /// threshold crossings still to come are listed.
    fn end(&mut self, handler: &mut Handler) {
        self.advance(handler, u64::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ignored snapshot is told by why: the RptSeq rule for an
    /// instrument suspect, unverified or healthy, the channel's screen
    /// where that rule would have applied it.
    #[test]
    fn an_ignored_snapshot_says_why() {
        let at = |rpt_seq, suspect, unverified| Seen {
            id: Some(7),
            rpt_seq,
            suspect,
            unverified,
            ..Seen::default()
        };
        let said = Said {
            snapshots: vec![(5, 9)],
            ..Said::default()
        };
        for (a, why) in [
            (at(Some(5), true, false), "RptSeq 5 is not newer than 5"),
            (at(Some(6), false, true), "RptSeq 5 is older than 6"),
            (
                at(Some(4), false, false),
                "the instrument is healthy at RptSeq 4",
            ),
            (
                at(None, true, false),
                "RptSeq 5 taken before the last ChannelReset",
            ),
            (
                at(Some(4), true, false),
                "RptSeq 5 taken before the last ChannelReset",
            ),
            (
                at(Some(5), false, true),
                "RptSeq 5 taken before the last ChannelReset",
            ),
        ] {
            let b = Seen {
                ignored: 1,
                ..a.clone()
            };
            let lines = events(&a, &b, &said, Some(9));
            assert!(
                lines
                    .iter()
                    .any(|l| l.starts_with(&format!("snapshot ignored: {why}"))),
                "{a:?}: {lines:?}"
            );
        }
    }

    /// "Never quoted" is said only of an explanation that kept every step:
    /// one that forgot its oldest cannot tell.
    #[test]
    fn never_quoted_is_said_only_with_every_step_kept() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/mdp3");
        let config = crate::config::Config::load(&dir.join("config.toml")).unwrap();
        let mut x = Mdp3Explain::new(0, &config.feeds[0], "ESZ6", None);
        assert!(x.explanation(false).contains("never quoted"));
        x.forgotten = super::super::KEEP as u64;
        let text = x.explanation(false);
        assert!(!text.contains("never quoted"), "{text}");
        assert!(text.contains("earlier steps not kept"), "{text}");
    }

    /// A definition that made the book deeper than it was kept is named
    /// as the cause of the lost baseline.
    #[test]
    fn a_deeper_definition_is_the_cause_of_no_baseline() {
        let a = Seen {
            id: Some(7),
            rpt_seq: Some(4),
            depths: (2, 2),
            ..Seen::default()
        };
        let b = Seen {
            rpt_seq: None,
            suspect: true,
            depths: (10, 2),
            ..a.clone()
        };
        let lines = events(&a, &b, &Said::default(), Some(9));
        assert!(
            lines
                .iter()
                .any(|l| l.contains("made its book deeper than it was kept")),
            "{lines:?}"
        );
        // Shallower, as the venue's book was (kept 10 deep before its
        // definition came): the definition is the cause too, not its
        // history.
        let a = Seen {
            depths: (10, 2),
            ..a
        };
        let b = Seen {
            depths: (3, 2),
            ..b
        };
        let lines = events(&a, &b, &Said::default(), Some(9));
        assert!(
            lines
                .iter()
                .any(|l| l.contains("made its book shallower than it was kept")),
            "{lines:?}"
        );
        assert!(
            !lines
                .iter()
                .any(|l| l.contains("did not start at RptSeq 1")),
            "{lines:?}"
        );
    }

    /// A ChannelReset inferred at a place voids trading statuses before
    /// it; one inferred at the first packet empties them all: the status
    /// change is laid on what the engine did.
    #[test]
    fn a_status_after_a_reset_inferred_is_laid_on_what_it_did() {
        let a = Seen {
            id: Some(7),
            status: Some(2),
            ..Seen::default()
        };
        for (voided, said) in [
            (
                true,
                "(the trading statuses from before the ChannelReset inferred void)",
            ),
            (false, "(the statuses emptied: its definition's in force)"),
        ] {
            let b = Seen {
                resets_inferred: 1,
                emptied: 1,
                voided,
                status: Some(17),
                ..a.clone()
            };
            let lines = events(&a, &b, &Said::default(), Some(1));
            let status = lines.iter().find(|l| l.starts_with("status")).unwrap();
            assert!(status.ends_with(said), "{lines:?}");
        }
    }

    /// A ChannelReset come late says what a late one does: the statuses
    /// sent after it kept, no instrument trusted until its snapshot.
    #[test]
    fn a_late_channel_reset_is_told_as_late() {
        let a = Seen {
            id: Some(7),
            rpt_seq: Some(4),
            ..Seen::default()
        };
        let late = Seen {
            channel_resets: 1,
            emptied: 1,
            rpt_seq: None,
            ..a.clone()
        };
        let lines = events(&a, &late, &Said::default(), Some(9));
        assert!(lines[0].starts_with("ChannelReset come late"), "{lines:?}");
        let in_order = Seen {
            rpt_seq: Some(0),
            ..late
        };
        let lines = events(&a, &in_order, &Said::default(), Some(9));
        assert!(
            lines[0].starts_with("ChannelReset: every book"),
            "{lines:?}"
        );
    }

    /// A status in force changed with no SecurityStatus of the instrument
    /// or its group in the datagram is not laid on another group's.
    #[test]
    fn a_status_is_laid_only_on_its_own_groups_security_status() {
        let group = Some(("ES".to_string(), "ES".to_string()));
        let a = Seen {
            id: Some(7),
            group: group.clone(),
            status: Some(2),
            ..Seen::default()
        };
        let b = Seen {
            channel_resets: 1,
            emptied: 1,
            status: Some(17),
            ..a.clone()
        };
        let st2 = |g: &str, asset: &str| {
            let s = crate::protocol::mdp3::encode::Status {
                transact_time: 0,
                security_group: g,
                asset,
                security_id: None,
                match_event_indicator: 0x80,
                trading_status: Some(17),
            };
            let v = crate::protocol::mdp3::encode::Shape::new(13);
            let m = crate::protocol::mdp3::encode::security_status(v, &s);
            crate::protocol::mdp3::encode::packet(1, 0, &[m])
        };
        let st = |g: &str| st2(g, g);
        let other = Said::read(&st("NQ"), Some(7), group.as_ref());
        let lines = events(&a, &b, &other, Some(1));
        let status = lines.iter().find(|l| l.starts_with("status")).unwrap();
        assert!(
            status.ends_with("(the statuses emptied: its definition's in force)"),
            "{lines:?}"
        );
        // Both named: both must be its own.
        let mixed = Said::read(&st2("ES", "NQ"), Some(7), group.as_ref());
        assert_eq!(mixed.status, None);
        let own = Said::read(&st("ES"), Some(7), group.as_ref());
        let lines = events(&a, &b, &own, Some(1));
        let status = lines.iter().find(|l| l.starts_with("status")).unwrap();
        assert!(
            status.ends_with("(SecurityStatus of its group)"),
            "{lines:?}"
        );
    }

    /// A ChannelReset inferred is told, and the book it emptied said to
    /// be emptied by it.
    #[test]
    fn a_channel_reset_inferred_is_told() {
        let a = Seen {
            id: Some(7),
            rpt_seq: Some(4),
            top: (Some((100, 1)), None),
            ..Seen::default()
        };
        let b = Seen {
            resets_inferred: 1,
            emptied: 1,
            rpt_seq: None,
            suspect: true,
            top: (None, None),
            ..a.clone()
        };
        let lines = events(&a, &b, &Said::default(), Some(9));
        assert!(lines[0].starts_with("ChannelReset inferred"), "{lines:?}");
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("book emptied by the ChannelReset inferred")),
            "{lines:?}"
        );
    }

    /// What made an instrument verified (or healthy) again is named for
    /// what it was: an entry in order, a snapshot, the channel restarting.
    #[test]
    fn an_instrument_verified_again_is_told_why() {
        let a = Seen {
            id: Some(7),
            rpt_seq: Some(4),
            unverified: true,
            ..Seen::default()
        };
        let b = Seen {
            unverified: false,
            rpt_seq: Some(5),
            ..a.clone()
        };
        let said = Said::default();
        let cause = |b: &Seen| {
            events(&a, b, &said, Some(9))
                .into_iter()
                .filter(|l| l.contains("again"))
                .collect::<Vec<_>>()
        };
        assert_eq!(cause(&b), ["verified again: an entry applied in order"]);
        let snapshot = Seen {
            applied: 1,
            ..b.clone()
        };
        assert_eq!(cause(&snapshot), ["verified again: by the snapshot"]);
        let reset = Seen {
            channel_resets: 1,
            emptied: 1,
            rpt_seq: None,
            ..b.clone()
        };
        assert_eq!(
            cause(&reset),
            ["verified again: the channel restarted, RptSeq starts over"]
        );
        let suspect = Seen {
            suspect: true,
            ..a.clone()
        };
        let weekly = Seen {
            sequence_restarts: 1,
            emptied: 1,
            rpt_seq: None,
            ..Seen::default()
        };
        // The sequence restarting after a ChannelReset empties nothing:
        // an entry that heals then is the cause.
        let after_reset = Seen {
            sequence_restarts: 1,
            rpt_seq: Some(5),
            ..a.clone()
        };
        let healed = events(&suspect, &after_reset, &said, Some(1));
        assert!(
            healed.contains(&"healed: RptSeq continuous to 5".to_string()),
            "{healed:?}"
        );
        let lines = events(
            &suspect,
            &Seen {
                id: Some(7),
                ..weekly
            },
            &said,
            Some(1),
        );
        assert!(
            lines.contains(&"healthy again: the channel restarted, RptSeq starts over".to_string()),
            "{lines:?}"
        );
    }
}
