//! A simulated CME MDP 3.0 channel (`simulate --protocol mdp3`): the
//! incremental feed on lines A and B, the market recovery (snapshot) loop
//! and the instrument definition loop, each on the lines a configuration's
//! `mdp3` feed names.
//!
//! Two layers, as for ITCH:
//!
//! - [`Venue`]: pure and deterministic (seeded, no clock, no socket).
//!   [`Venue::poll`] is handed the local time and appends the datagrams due
//!   by then, each tagged with its line (numbered as the engine numbers an
//!   MDP3 feed's lines: 0 and 1 incremental A and B, 2 and 3 snapshot A and
//!   B, 4 and 5 definition A and B); [`Venue::report`] says exactly what it
//!   did, its own books included.
//! - [`run`]: one UDP socket per line bound to the loopback `--source`, a
//!   pacing loop, SIGUSR1 as a request for a ChannelReset, and the report as
//!   one JSON line.
//!
//! The channel itself is [`crate::protocol::mdp3::synth::Channel`] over the
//! equity-futures instruments of [`synth::equity_channel`] (ESZ6, ESH7,
//! NQZ6, RTYZ6 and the ESZ6-ESH7 spread; groups ES, NQ and RTY).
//!
//! # What the venue publishes
//!
//! - **Start**: at the start of the week, a SecurityStatus ready-to-trade
//!   (17) per security group, then an event filling every book. With
//!   `mid_week`, the channel is in the middle of the week instead
//!   ([`Channel::mid_week`]: MsgSeqNum in the millions, RptSeqs in the
//!   hundreds of thousands, books full, groups open) and nothing is sent for
//!   the start: a receiver must take every instrument from the snapshot
//!   loop.
//! - **Events**: `rate` Globex events per second as
//!   [`Channel::next_event`] draws them; due as for ITCH (active time ×
//!   rate, capped by `count`). An event may span packets.
//! - **Heartbeats**: an AdminHeartbeat when the incremental lines were
//!   silent for `heartbeat_ms` (CME: 30 s).
//! - **Halts**: every `halt_every_s` seconds of wall time since the start
//!   (pauses included: one due in a pause comes at its end) the next
//!   instrument in turn is halted (SecurityStatus 2 naming it) for half the
//!   period, then ready to trade again (17).
//! - **ChannelReset**: at each of `channel_reset_at_ms` (active time), and
//!   when [`Venue::request_reset`] asks (SIGUSR1 for [`run`]): a
//!   ChannelReset 4 (books, statuses and RptSeqs emptied, MsgSeqNum from 1),
//!   then the start's statuses and book fill again; the snapshot loop starts
//!   over at once.
//! - **Snapshot loop**: every `loop_ms`, a loop of every instrument with
//!   book activity as the channel is when the loop starts (MsgSeqNum from 1,
//!   LastMsgSeqNumProcessed the last incremental packet), its packets spread
//!   evenly over the loop's period, on snapshot line A and B. The packets of
//!   a loop not sent by the end are sent at the end.
//! - **Definition loop**: every `definition_loop_ms`, a definition per
//!   instrument, spread the same way, on definition line A and B.
//! - **End**: the held-back datagrams, then a SecurityStatus close (4) per
//!   security group on every incremental line whose loss is below 100 %.
//! - **After the close**: for `linger_ms`, the snapshot and definition
//!   loops go on over the closed channel (as CME's go on over a weekend),
//!   so a receiver that lost the last packets on both lines heals from
//!   them, and the incremental lines carry only heartbeats (exempt from
//!   the line effects). 0 (the default): nothing after the close.
//! - **Pauses**: during `[k × pause_every_s, k × pause_every_s + pause_ms)`
//!   nothing is sent on any line; no event is owed for that time.
//!
//! Channel times (TransactTime, SendingTime) are the local time of the poll.
//!
//! # Line effects
//!
//! The incremental lines have the ITCH and SQF simulators' effects (the
//! same code): per line, loss, duplicates and holding a datagram back
//! behind the next, drawn from that line's own PRNG. On top, `loss_both`
//! percent of incremental packets (drawn from a PRNG of their own) are
//! dropped on both lines: the instruments they touched can only heal from
//! the snapshot loop. The ChannelReset and the closing statuses are exempt
//! (sent on every line below 100 % loss). Snapshot and definition lines
//! carry every packet once.

use super::{check_percents, flush_held, lines, offer, print_report, Line, LineReport};
use super::{LineSockets, Outgoing, Pacing, SplitMix64, NS_PER_MS, NS_PER_S, POLL_SLEEP};
use crate::protocol::mdp3::book::Level;
use crate::protocol::mdp3::packet::Packet;
use crate::protocol::mdp3::synth::{self, status, Channel, Datagram, Scope, Spec};
use crate::protocol::mdp3::template::Body;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{Ipv4Addr, SocketAddrV4};

/// Most Globex events a second.
pub const MAX_RATE: f64 = 1_000_000.0;
/// Shortest and longest snapshot loop period, ms.
pub const LOOP_MS: (u64, u64) = (10, 60_000);
/// Shortest and longest definition loop period, ms.
pub const DEFINITION_LOOP_MS: (u64, u64) = (10, 600_000);
/// Latest ChannelReset time, ms of active time (a day).
pub const MAX_RESET_AT_MS: u64 = 86_400_000;
/// Most ChannelReset times.
pub const MAX_RESETS: usize = 1_000;

/// Line numbers of the incremental, snapshot and definition lines' A copy
/// (B is one more), as the engine numbers an MDP3 feed's lines.
pub const INCREMENTAL: usize = 0;
/// Snapshot line A.
pub const SNAPSHOT: usize = 2;
/// Definition line A.
pub const DEFINITION: usize = 4;

/// What `tickguard simulate --protocol mdp3` publishes; [`Params::default`]
/// holds the flags' defaults (and no lines: a configuration gives them).
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Incremental lines: A, and optionally B.
    pub lines: Vec<SocketAddrV4>,
    /// Snapshot lines: none, A, or A and B.
    pub snapshot_lines: Vec<SocketAddrV4>,
    /// Definition lines: none, A, or A and B.
    pub definition_lines: Vec<SocketAddrV4>,
    /// Send from this loopback address.
    pub source: Ipv4Addr,
    /// Globex events per second, above 0 up to 1,000,000.
    pub rate: f64,
    /// Percent of incremental datagrams dropped on line A, 0 to 100.
    pub loss_a: f64,
    /// Percent of incremental datagrams dropped on line B, 0 to 100.
    pub loss_b: f64,
    /// Percent of incremental packets dropped on both lines, 0 to 100.
    pub loss_both: f64,
    /// Percent of incremental datagrams sent twice on a line, 0 to 100.
    pub duplicate: f64,
    /// Percent of incremental datagrams held back and sent after the next, 0 to 100.
    pub reorder: f64,
    /// Heartbeat after this long without an incremental packet, ms, 0 (none) to 60,000.
    pub heartbeat_ms: u64,
    /// Period of the snapshot loop, ms, 10 to 60,000.
    pub loop_ms: u64,
    /// Period of the definition loop, ms, 10 to 600,000.
    pub definition_loop_ms: u64,
    /// Halt an instrument every this many seconds, for half of it, 0 (never) to 86,400.
    pub halt_every_s: u64,
    /// ChannelResets at these times of active time, ms, each 0 to 86,400,000.
    pub channel_reset_at_ms: Vec<u64>,
    /// Every this many seconds, send nothing for `pause_ms` (0: never).
    pub pause_every_s: u64,
    /// Length of each pause, ms (shorter than the period).
    pub pause_ms: u64,
    /// Start in the middle of the week ([`Channel::mid_week`]).
    pub mid_week: bool,
    /// Stop after this many seconds (0: until interrupted).
    pub duration_s: f64,
    /// Stop after this many events (0: no limit).
    pub count: u64,
    /// After the close, keep the loops going this long, ms (0: stop at the
    /// close).
    pub linger_ms: u64,
    /// Seed of every random choice.
    pub seed: u64,
    /// Print the report as JSON at the end.
    pub report: bool,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            lines: Vec::new(),
            snapshot_lines: Vec::new(),
            definition_lines: Vec::new(),
            source: Ipv4Addr::LOCALHOST,
            rate: 1000.0,
            loss_a: 0.0,
            loss_b: 0.0,
            loss_both: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            heartbeat_ms: 30_000,
            loop_ms: 1000,
            definition_loop_ms: 5000,
            halt_every_s: 0,
            channel_reset_at_ms: Vec::new(),
            pause_every_s: 0,
            pause_ms: 1000,
            mid_week: false,
            duration_s: 0.0,
            count: 0,
            linger_ms: 0,
            seed: 1,
            report: false,
        }
    }
}

/// One price level as the report shows it: the wire's mantissas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LevelReport {
    /// Price mantissa, exponent −9.
    pub price: i64,
    /// Quantity.
    pub size: u64,
    /// Orders, when sent.
    pub orders: Option<i32>,
}

/// One instrument as the venue holds it at the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BookReport {
    /// Symbol.
    pub symbol: String,
    /// Its last RptSeq (0: none yet).
    pub rpt_seq: u32,
    /// The SecurityTradingStatus in force (its own or its group's); null
    /// when none was sent.
    pub trading_status: Option<u8>,
    /// Outright bids, level 1 first.
    pub bids: Vec<LevelReport>,
    /// Outright offers.
    pub asks: Vec<LevelReport>,
    /// Implied bids.
    pub implied_bids: Vec<LevelReport>,
    /// Implied offers.
    pub implied_asks: Vec<LevelReport>,
}

/// Exactly what the venue did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VenueReport {
    /// Always `"mdp3"`.
    pub protocol: &'static str,
    /// Incremental lines, A first: datagrams sent, dropped (packets lost on
    /// both lines included), duplicated, reordered.
    pub lines: Vec<LineReport>,
    /// Snapshot lines (every packet once).
    pub snapshot_lines: Vec<LineReport>,
    /// Definition lines (every packet once).
    pub definition_lines: Vec<LineReport>,
    /// Started in the middle of the week.
    pub mid_week: bool,
    /// Globex events drawn (at `rate`).
    pub events: u64,
    /// Incremental packets generated (before line effects).
    pub incremental_packets: u64,
    /// MsgSeqNum of the last incremental packet.
    pub last_seq_num: u32,
    /// AdminHeartbeats sent.
    pub heartbeats: u64,
    /// Halts sent.
    pub halts: u64,
    /// ChannelResets sent.
    pub channel_resets: u64,
    /// Incremental packets no line carried (`loss_both`, or every line's
    /// own loss at once).
    pub lost_on_both_lines: u64,
    /// SecurityIDs of the entries in those packets, ascending.
    pub lost_security_ids: Vec<i32>,
    /// Snapshot loops begun (loops of no instrument not counted).
    pub snapshot_loops: u64,
    /// Snapshot packets sent (each counted once, not per line).
    pub snapshot_packets: u64,
    /// Definition loops begun.
    pub definition_loops: u64,
    /// Definition packets sent (each once).
    pub definition_packets: u64,
    /// True once the closing statuses are sent.
    pub ended: bool,
    /// Per instrument, keyed `#SecurityID`, as the venue holds it now.
    pub books: BTreeMap<String, BookReport>,
}

/// The venue: a deterministic, I/O-free MDP3 channel publisher.
#[derive(Debug, Clone)]
pub struct Venue {
    channel: Channel,
    specs: Vec<Spec>,
    seed: u64,
    /// Incremental lines' effects and counts.
    lines: Vec<Line>,
    line_stats: Vec<LineReport>,
    snapshot_stats: Vec<LineReport>,
    definition_stats: Vec<LineReport>,
    both: SplitMix64,
    loss_both: f64,
    effects: (f64, f64),
    pacing: Pacing,
    heartbeat_ns: u64,
    loop_ns: u64,
    definition_loop_ns: u64,
    halt_every_ns: u64,
    linger_ns: u64,
    /// Elapsed time of the close.
    closed_at: u64,
    next_halt: u64,
    halt_turn: usize,
    /// The halted instrument and the elapsed time it trades again at.
    halted: Option<(i32, u64)>,
    /// ChannelReset times (active ns), ascending, and the next one's index.
    resets: Vec<u64>,
    next_reset: usize,
    reset_requested: bool,
    start: Option<u64>,
    last_now: u64,
    opened: bool,
    finished: bool,
    /// Elapsed time of the last incremental packet.
    last_incremental: u64,
    next_loop: u64,
    next_definition_loop: u64,
    /// Loop packets waiting for their time (elapsed ns).
    snapshots: VecDeque<(u64, Vec<u8>)>,
    definitions: VecDeque<(u64, Vec<u8>)>,
    lost_ids: BTreeSet<i32>,
    report: VenueReport,
}

/// The report rows of `lines` (A then B) named `prefix` A and B.
fn line_reports(prefix: &str, lines: &[SocketAddrV4]) -> Vec<LineReport> {
    lines
        .iter()
        .zip(["A", "B"])
        .map(|(dest, ab)| LineReport {
            line: format!("{prefix}{ab}"),
            destination: dest.to_string(),
            ..LineReport::default()
        })
        .collect()
}

/// `levels` as the report shows them.
fn levels(levels: &[Level]) -> Vec<LevelReport> {
    levels
        .iter()
        .map(|l| LevelReport {
            price: l.price,
            size: l.size,
            orders: l.orders,
        })
        .collect()
}

impl Venue {
    /// Validates the parameters (errors name the flag) and builds the
    /// venue. Nothing is sent before the first [`Venue::poll`].
    pub fn new(p: &Params) -> Result<Venue> {
        for (what, list, min) in [
            ("incremental `lines`", &p.lines, 1),
            ("`snapshot_lines`", &p.snapshot_lines, 0),
            ("`definition_lines`", &p.definition_lines, 0),
        ] {
            if list.len() < min || list.len() > 2 {
                bail!("simulate: mdp3 takes {min} to 2 {what}, got {}", list.len());
            }
        }
        let all: Vec<_> = p
            .lines
            .iter()
            .chain(&p.snapshot_lines)
            .chain(&p.definition_lines)
            .collect();
        for (i, a) in all.iter().enumerate() {
            if all[..i].contains(a) {
                bail!("simulate: destination {a} is given to two lines");
            }
        }
        check_percents(&[
            ("--loss-a", p.loss_a),
            ("--loss-b", p.loss_b),
            ("--loss-both", p.loss_both),
            ("--duplicate", p.duplicate),
            ("--reorder", p.reorder),
        ])?;
        let pacing = Pacing::new(
            (p.rate, "events", MAX_RATE),
            p.duration_s,
            (p.pause_every_s, p.pause_ms),
            p.count,
        )?;
        for (flag, v, (min, max)) in [
            (
                "--heartbeat-ms",
                p.heartbeat_ms,
                (0, super::MAX_HEARTBEAT_MS),
            ),
            ("--loop-ms", p.loop_ms, LOOP_MS),
            (
                "--definition-loop-ms",
                p.definition_loop_ms,
                DEFINITION_LOOP_MS,
            ),
            (
                "--halt-every-s",
                p.halt_every_s,
                (0, super::MAX_HALT_EVERY_S),
            ),
        ] {
            if !(min..=max).contains(&v) {
                bail!("simulate: {flag} must be from {min} to {max} for mdp3, got {v}");
            }
        }
        if p.channel_reset_at_ms.len() > MAX_RESETS {
            bail!("simulate: at most {MAX_RESETS} --channel-reset-at-ms times");
        }
        if let Some(t) = p.channel_reset_at_ms.iter().find(|&&t| t > MAX_RESET_AT_MS) {
            bail!("simulate: --channel-reset-at-ms times must be from 0 to {MAX_RESET_AT_MS}, got {t}");
        }
        let (lines, line_stats) = lines(
            (p.lines[0], p.loss_a),
            (p.lines.get(1).copied(), p.loss_b),
            p.seed,
        )?;
        let mut resets: Vec<u64> = p
            .channel_reset_at_ms
            .iter()
            .map(|ms| ms * NS_PER_MS)
            .collect();
        resets.sort_unstable();
        let specs = synth::equity_channel();
        let halt_every_ns = p.halt_every_s * NS_PER_S;
        Ok(Venue {
            channel: Channel::new(p.seed, specs.clone()),
            specs,
            seed: p.seed,
            lines,
            line_stats,
            snapshot_stats: line_reports("snapshot ", &p.snapshot_lines),
            definition_stats: line_reports("definition ", &p.definition_lines),
            both: SplitMix64::new(p.seed, 7),
            loss_both: p.loss_both,
            effects: (p.duplicate, p.reorder),
            pacing,
            heartbeat_ns: p.heartbeat_ms * NS_PER_MS,
            loop_ns: p.loop_ms * NS_PER_MS,
            definition_loop_ns: p.definition_loop_ms * NS_PER_MS,
            halt_every_ns,
            linger_ns: p.linger_ms.saturating_mul(NS_PER_MS),
            closed_at: 0,
            next_halt: halt_every_ns,
            halt_turn: 0,
            halted: None,
            resets,
            next_reset: 0,
            reset_requested: false,
            start: None,
            last_now: 0,
            opened: false,
            finished: false,
            last_incremental: 0,
            next_loop: 0,
            next_definition_loop: 0,
            snapshots: VecDeque::new(),
            definitions: VecDeque::new(),
            lost_ids: BTreeSet::new(),
            report: VenueReport {
                protocol: "mdp3",
                mid_week: p.mid_week,
                ..VenueReport::default()
            },
        })
    }

    /// The channel as the venue holds it.
    pub fn channel(&self) -> &Channel {
        &self.channel
    }

    /// Asks for a ChannelReset at the next poll.
    pub fn request_reset(&mut self) {
        self.reset_requested = true;
    }

    /// Everything done so far, with the books as they are now.
    pub fn report(&self) -> VenueReport {
        let mut r = self.report.clone();
        r.lines = self.line_stats.clone();
        r.snapshot_lines = self.snapshot_stats.clone();
        r.definition_lines = self.definition_stats.clone();
        r.last_seq_num = self.channel.last_seq_num();
        r.lost_security_ids = self.lost_ids.iter().copied().collect();
        r.books = self
            .specs
            .iter()
            .map(|s| {
                let id = s.security_id;
                let book = self.channel.book(id).unwrap_or_default();
                let row = BookReport {
                    symbol: s.symbol.clone(),
                    rpt_seq: self.channel.rpt_seq(id).unwrap_or(0),
                    trading_status: self.channel.trading_status(id),
                    bids: levels(&book.bids),
                    asks: levels(&book.offers),
                    implied_bids: levels(&book.implied_bids),
                    implied_asks: levels(&book.implied_offers),
                };
                (format!("#{id}"), row)
            })
            .collect();
        r
    }

    /// True once [`Venue::finish`] ran, `count` events were drawn, or
    /// `duration_s` has elapsed at `now_ns` since the first poll.
    pub fn done(&self, now_ns: u64) -> bool {
        self.finished || self.pacing.done(self.report.events, self.start, now_ns)
    }

    /// Appends to `out` the datagrams due at local time `now_ns` (ns since
    /// the Unix epoch). The first call is the start; an earlier time than
    /// a previous one counts as that one. After [`Venue::finish`], only
    /// the loops, while [`lingering`](Venue::lingering).
    pub fn poll(&mut self, now_ns: u64, out: &mut Vec<Outgoing>) {
        if self.finished {
            if self.lingering(now_ns) {
                let now = self.advance(now_ns);
                let e = now - self.start.unwrap_or(now);
                self.heartbeat(now, e, true, out);
                self.loops(now, e);
                self.send_loops(e, out);
            }
            return;
        }
        let now = self.advance(now_ns);
        let e = now - self.start.unwrap_or(now);
        if !self.opened {
            self.open(now, e, out);
        }
        if self.pacing.in_pause(e) {
            return;
        }
        let active = self.pacing.active(e);
        while self
            .resets
            .get(self.next_reset)
            .is_some_and(|&r| r <= active)
        {
            self.next_reset += 1;
            self.reset_requested = true;
        }
        if std::mem::take(&mut self.reset_requested) {
            self.reset(now, e, out);
        }
        self.halts(now, e, out);
        let due = self.pacing.due(e, self.report.events);
        while self.report.events < due {
            self.report.events += 1;
            let d = self.channel.next_event(now);
            self.incremental(d, false, e, out);
        }
        self.heartbeat(now, e, false, out);
        self.loops(now, e);
        self.send_loops(e, out);
    }

    /// An AdminHeartbeat when the incremental lines were silent for
    /// `heartbeat_ms` at elapsed time `e` (`session`: exempt from the
    /// random effects).
    fn heartbeat(&mut self, now: u64, e: u64, session: bool, out: &mut Vec<Outgoing>) {
        if self.heartbeat_ns > 0 && e.saturating_sub(self.last_incremental) >= self.heartbeat_ns {
            let hb = self.channel.heartbeat(now);
            self.report.heartbeats += 1;
            self.incremental(vec![hb], session, e, out);
        }
    }

    /// True after [`Venue::finish`] until `linger_ms` past it at `now_ns`:
    /// polls still send the loops.
    pub fn lingering(&self, now_ns: u64) -> bool {
        let e = now_ns.max(self.last_now) - self.start.unwrap_or(now_ns);
        self.finished && e.saturating_sub(self.closed_at) < self.linger_ns
    }

    /// Ends the channel at `now_ns`: the loop packets still waiting, the
    /// held-back datagrams, then a close (4) per security group on every
    /// incremental line that is up. Later polls send only the loops, and
    /// only while [`lingering`](Venue::lingering).
    pub fn finish(&mut self, now_ns: u64, out: &mut Vec<Outgoing>) {
        if self.finished {
            return;
        }
        let now = self.advance(now_ns);
        let e = now - self.start.unwrap_or(now);
        if !self.opened {
            self.open(now, e, out);
        }
        self.send_loops(u64::MAX, out);
        flush_held(&mut self.lines, &mut self.line_stats, out);
        for group in self.groups() {
            let d = self
                .channel
                .status(now, Scope::Group(&group), status::CLOSE);
            self.incremental(d, true, e, out);
        }
        self.report.ended = true;
        self.finished = true;
        self.closed_at = e;
    }

    fn advance(&mut self, now_ns: u64) -> u64 {
        let now = now_ns.max(self.last_now);
        self.last_now = now;
        if self.start.is_none() {
            self.start = Some(now);
        }
        now
    }

    /// The security groups, in the order of the instruments.
    fn groups(&self) -> Vec<String> {
        let mut groups: Vec<String> = Vec::new();
        for s in &self.specs {
            if !groups.contains(&s.group) {
                groups.push(s.group.clone());
            }
        }
        groups
    }

    fn open(&mut self, now: u64, e: u64, out: &mut Vec<Outgoing>) {
        self.opened = true;
        if self.report.mid_week {
            self.channel = Channel::mid_week(self.seed, self.specs.clone(), now);
        } else {
            self.open_groups(now, e, out);
        }
    }

    /// Every group ready to trade, then every book filled.
    fn open_groups(&mut self, now: u64, e: u64, out: &mut Vec<Outgoing>) {
        for group in self.groups() {
            let d = self.channel.status(now, Scope::Group(&group), status::OPEN);
            self.incremental(d, false, e, out);
        }
        let d = self.channel.fill_books(now);
        self.incremental(d, false, e, out);
    }

    fn reset(&mut self, now: u64, e: u64, out: &mut Vec<Outgoing>) {
        let d = self.channel.channel_reset(now);
        self.report.channel_resets += 1;
        self.incremental(d, true, e, out);
        self.halted = None;
        self.open_groups(now, e, out);
        // The loop under way holds the books before the reset: start over.
        self.snapshots.clear();
        self.next_loop = e;
    }

    fn halts(&mut self, now: u64, e: u64, out: &mut Vec<Outgoing>) {
        if self.halt_every_ns == 0 || self.specs.is_empty() {
            return;
        }
        if let Some((id, resume)) = self.halted {
            if e >= resume {
                self.halted = None;
                let d = self
                    .channel
                    .status(now, Scope::Instrument(id), status::OPEN);
                self.incremental(d, false, e, out);
            }
        }
        if self.halted.is_none() && e >= self.next_halt {
            let id = self.specs[self.halt_turn % self.specs.len()].security_id;
            self.halt_turn += 1;
            self.next_halt = super::next_due(self.next_halt, self.halt_every_ns, e);
            self.halted = Some((id, e + self.halt_every_ns / 2));
            self.report.halts += 1;
            let d = self
                .channel
                .status(now, Scope::Instrument(id), status::HALT);
            self.incremental(d, false, e, out);
        }
    }

    /// Begins the loops due at elapsed time `e`: their packets are queued,
    /// spread over the period.
    fn loops(&mut self, now: u64, e: u64) {
        let n = self.specs.len().max(1) as u64;
        if !self.snapshot_stats.is_empty() && e >= self.next_loop {
            self.next_loop = super::next_due(self.next_loop, self.loop_ns, e);
            self.channel.loop_spacing_ns = self.loop_ns / n;
            let loop_ = self.channel.snapshot_loop(now);
            if !loop_.is_empty() {
                self.report.snapshot_loops += 1;
            }
            queue(&mut self.snapshots, e, self.loop_ns / n, loop_);
        }
        if !self.definition_stats.is_empty() && e >= self.next_definition_loop {
            self.next_definition_loop =
                super::next_due(self.next_definition_loop, self.definition_loop_ns, e);
            self.channel.loop_spacing_ns = self.definition_loop_ns / n;
            let loop_ = self.channel.definition_loop(now);
            if !loop_.is_empty() {
                self.report.definition_loops += 1;
            }
            queue(&mut self.definitions, e, self.definition_loop_ns / n, loop_);
        }
    }

    /// Sends the loop packets due by elapsed time `e` on both lines of their service.
    fn send_loops(&mut self, e: u64, out: &mut Vec<Outgoing>) {
        for (queue, stats, first, count) in [
            (
                &mut self.snapshots,
                &mut self.snapshot_stats,
                SNAPSHOT,
                &mut self.report.snapshot_packets,
            ),
            (
                &mut self.definitions,
                &mut self.definition_stats,
                DEFINITION,
                &mut self.report.definition_packets,
            ),
        ] {
            while queue.front().is_some_and(|q| q.0 <= e) {
                let Some((_, bytes)) = queue.pop_front() else {
                    break;
                };
                *count += 1;
                for (i, s) in stats.iter_mut().enumerate() {
                    s.datagrams_sent += 1;
                    out.push(Outgoing {
                        line: first + i,
                        payload: bytes.clone(),
                    });
                }
            }
        }
    }

    /// Offers incremental packets to the lines (`session`: exempt from the
    /// random effects), counting what no line carried.
    fn incremental(&mut self, d: Vec<Datagram>, session: bool, e: u64, out: &mut Vec<Outgoing>) {
        for d in d {
            self.report.incremental_packets += 1;
            self.last_incremental = e;
            let lost = if !session && self.both.percent(self.loss_both) {
                for s in &mut self.line_stats {
                    s.dropped += 1;
                }
                true
            } else {
                let delivered = offer(
                    &mut self.lines,
                    &mut self.line_stats,
                    self.effects,
                    d.bytes.clone(),
                    session,
                    out,
                );
                !delivered
            };
            if lost {
                self.report.lost_on_both_lines += 1;
                self.lost_ids.extend(security_ids(&d.bytes));
            }
        }
    }
}

#[cfg(test)]
impl super::Polled for Venue {
    fn poll(&mut self, now_ns: u64, out: &mut Vec<Outgoing>) {
        Venue::poll(self, now_ns, out);
    }
    fn done(&self, now_ns: u64) -> bool {
        Venue::done(self, now_ns)
    }
    fn finish(&mut self, now_ns: u64, out: &mut Vec<Outgoing>) {
        Venue::finish(self, now_ns, out);
    }
}

/// Queues a loop's packets from elapsed time `e`, `spacing` apart.
fn queue(q: &mut VecDeque<(u64, Vec<u8>)>, e: u64, spacing: u64, loop_: Vec<Datagram>) {
    for (k, d) in loop_.into_iter().enumerate() {
        q.push_back((e + k as u64 * spacing, d.bytes));
    }
}

/// The SecurityIDs of an incremental packet's entries.
fn security_ids(bytes: &[u8]) -> Vec<i32> {
    let Ok(p) = Packet::new_checked(bytes) else {
        return Vec::new();
    };
    let mut ids = Vec::new();
    for m in p.messages() {
        if let Body::Incremental(inc) = m.body() {
            ids.extend(inc.entries().map(|x| x.security_id()));
        }
    }
    ids
}

/// Runs `tickguard simulate --protocol mdp3`: publishes until `--count`,
/// `--duration-s` or SIGINT/SIGTERM (SIGUSR1: a ChannelReset), closes the
/// groups, then prints the report when `--report`.
pub fn run(p: &Params) -> Result<()> {
    let stop = crate::sys::shutdown_on_signals().context("simulate: installing signal handlers")?;
    let reset = crate::sys::resync_on_sigusr1().context("simulate: installing SIGUSR1")?;
    let report = publish(p, stop, Some(reset))?;
    if p.report {
        print_report(&report, stop)?;
    }
    Ok(())
}

/// Publishes as [`run`] does until done or `stop` (a ChannelReset each
/// time `reset` is set, which it clears), then the loops after the close
/// for `linger_ms` or until `stop`, and returns the report.
pub fn publish(
    p: &Params,
    stop: &std::sync::atomic::AtomicBool,
    reset: Option<&std::sync::atomic::AtomicBool>,
) -> Result<VenueReport> {
    use std::sync::atomic::Ordering::Relaxed;
    let mut venue = Venue::new(p)?;
    let mut slots = vec![None; 6];
    for (first, names, list) in [
        (INCREMENTAL, ["A", "B"], &p.lines),
        (SNAPSHOT, ["snapshot A", "snapshot B"], &p.snapshot_lines),
        (
            DEFINITION,
            ["definition A", "definition B"],
            &p.definition_lines,
        ),
    ] {
        for (i, &dest) in list.iter().enumerate() {
            slots[first + i] = Some((names[i], dest));
        }
    }
    let sockets = LineSockets::open_slots(&slots, p.source)?;
    let mut out = Vec::new();
    loop {
        if reset.is_some_and(|r| r.swap(false, Relaxed)) {
            venue.request_reset();
        }
        let now = crate::time::now_ns();
        venue.poll(now, &mut out);
        sockets.send(&mut out)?;
        if venue.done(now) || stop.load(Relaxed) {
            break;
        }
        std::thread::sleep(POLL_SLEEP);
    }
    venue.finish(crate::time::now_ns(), &mut out);
    sockets.send(&mut out)?;
    while !stop.load(Relaxed) && venue.lingering(crate::time::now_ns()) {
        std::thread::sleep(POLL_SLEEP);
        venue.poll(crate::time::now_ns(), &mut out);
        sockets.send(&mut out)?;
    }
    Ok(venue.report())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::mdp3::packet::seq_num;

    /// 2026-01-07 15:30:00 UTC.
    const T0: u64 = 1_767_799_800_000_000_000;
    const MS: u64 = NS_PER_MS;

    fn addr(port: u16) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)
    }

    fn params(f: impl FnOnce(&mut Params)) -> Params {
        let mut p = Params {
            lines: vec![addr(39201), addr(39202)],
            snapshot_lines: vec![addr(39203), addr(39204)],
            definition_lines: vec![addr(39205)],
            rate: 2000.0,
            count: 3000,
            heartbeat_ms: 5,
            loop_ms: 100,
            definition_loop_ms: 300,
            ..Params::default()
        };
        f(&mut p);
        p
    }

    /// Polls every `step` from T0 until done, then finishes; datagrams with their times.
    fn drive(v: &mut Venue, step: u64) -> Vec<(u64, Outgoing)> {
        super::super::drive(v, T0, step)
    }

    #[test]
    fn same_seed_same_datagrams() {
        let lossy = || {
            params(|p| {
                p.loss_a = 10.0;
                p.loss_b = 10.0;
                p.loss_both = 2.0;
                p.duplicate = 3.0;
                p.reorder = 3.0;
                p.halt_every_s = 1;
                p.channel_reset_at_ms = vec![700];
            })
        };
        let mut v = Venue::new(&lossy()).unwrap();
        let sent = drive(&mut v, MS);
        let mut again = Venue::new(&lossy()).unwrap();
        assert_eq!(drive(&mut again, MS), sent);
        assert_eq!(v.report(), again.report());
        let r = v.report();
        assert_eq!(r.events, 3000);
        assert_eq!(r.channel_resets, 1);
        assert!(r.halts >= 1 && r.lost_on_both_lines > 0, "{r:?}");
        assert!(!r.lost_security_ids.is_empty());
        // Another seed, other datagrams.
        let mut other = Venue::new(&params(|p| p.seed = 2)).unwrap();
        assert_ne!(drive(&mut other, MS), sent);
    }

    #[test]
    fn loops_start_at_one_and_are_spread_over_their_period() {
        let mut v = Venue::new(&params(|p| p.count = 1000)).unwrap();
        let sent = drive(&mut v, MS);
        let r = v.report();
        // 0.5 s of events: loops at 0, 100, …, 400 ms (and the one under way at the end).
        assert!((5..=6).contains(&r.snapshot_loops), "{r:?}");
        let snap: Vec<(u64, u32)> = sent
            .iter()
            .filter(|(_, o)| o.line == SNAPSHOT)
            .map(|(t, o)| (*t, seq_num(&o.payload).unwrap()))
            .collect();
        let loop2: Vec<&(u64, u32)> = snap
            .iter()
            .filter(|(t, _)| (T0 + 100 * MS..T0 + 200 * MS).contains(t))
            .collect();
        assert_eq!(
            loop2.iter().map(|x| x.1).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5]
        );
        // 20 ms apart (100 ms over 5 instruments), not a burst.
        assert!(loop2.windows(2).all(|w| w[1].0 - w[0].0 == 20 * MS));
        // Both snapshot lines carry the same packets; one definition line.
        let on = |l: usize| sent.iter().filter(|(_, o)| o.line == l).count() as u64;
        assert_eq!(on(SNAPSHOT), on(SNAPSHOT + 1));
        assert_eq!(on(SNAPSHOT), r.snapshot_packets);
        assert_eq!(on(DEFINITION), r.definition_packets);
        assert_eq!(on(DEFINITION + 1), 0);
        assert_eq!(r.definition_loops, 2);
    }

    #[test]
    fn heartbeats_when_idle_and_the_close_at_the_end() {
        let mut v = Venue::new(&params(|p| {
            p.rate = 20.0;
            p.count = 10;
            p.lines.truncate(1);
        }))
        .unwrap();
        let sent = drive(&mut v, MS);
        let r = v.report();
        // An event every 50 ms: heartbeats every 5 ms between them.
        assert!((60..=110).contains(&r.heartbeats), "{r:?}");
        assert!(r.ended);
        assert!(r.books.values().all(|b| b.trading_status == Some(4)));
        let inc: Vec<u32> = sent
            .iter()
            .filter(|(_, o)| o.line == INCREMENTAL)
            .map(|(_, o)| seq_num(&o.payload).unwrap())
            .collect();
        assert_eq!(inc, (1..=r.last_seq_num).collect::<Vec<_>>());
    }

    /// With `linger_ms`, the loops go on after the close over the closed
    /// channel, for that long; the incremental lines say nothing more.
    #[test]
    fn the_loops_linger_after_the_close() {
        let mut v = Venue::new(&params(|p| {
            p.count = 200;
            p.linger_ms = 500;
        }))
        .unwrap();
        let sent = drive(&mut v, MS);
        let closed = v.report();
        let end = sent.last().unwrap().0;
        assert!(v.lingering(end) && v.done(end));
        let mut after = Vec::new();
        let mut t = end;
        while v.lingering(t) {
            t += MS;
            v.poll(t, &mut after);
        }
        assert!((end + 500 * MS..end + 502 * MS).contains(&t));
        assert!(!after.is_empty());
        // Loops, and heartbeats on the incremental lines (every 5 ms).
        let r = v.report();
        let (mut heartbeats, mut seq) = (0, closed.last_seq_num);
        for o in after.iter().filter(|o| o.line < SNAPSHOT) {
            let p = Packet::new_checked(&o.payload[..]).unwrap();
            assert!(p.messages().all(|m| matches!(m.body(), Body::Heartbeat)));
            if o.line == INCREMENTAL {
                heartbeats += 1;
                seq += 1;
                assert_eq!(seq_num(&o.payload), Some(seq));
            }
        }
        assert!((90..=101).contains(&heartbeats), "{heartbeats}");
        assert_eq!(r.heartbeats, closed.heartbeats + heartbeats);
        assert!(r.snapshot_loops > closed.snapshot_loops);
        assert_eq!(r.books, closed.books);
        assert!(r.books.values().all(|b| b.trading_status == Some(4)));
        // Without it, nothing after the close.
        let mut v = Venue::new(&params(|p| p.count = 200)).unwrap();
        let end = drive(&mut v, MS).last().unwrap().0;
        assert!(!v.lingering(end));
        let mut out = Vec::new();
        v.poll(end + 2000 * MS, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn mid_week_sends_nothing_for_the_start() {
        let mut v = Venue::new(&params(|p| {
            p.mid_week = true;
            p.count = 0;
            p.duration_s = 0.001;
        }))
        .unwrap();
        let mut out = Vec::new();
        v.poll(T0, &mut out);
        assert!(out.iter().all(|o| o.line >= SNAPSHOT), "{out:?}");
        let first = v.report();
        assert!(first.last_seq_num > 1_000_000);
        assert!(first.books.values().all(|b| b.rpt_seq > 100_000));
        assert!(first.books.values().all(|b| !b.bids.is_empty()));
    }

    #[test]
    fn bad_parameters_are_one_clear_error() {
        let cases: Vec<(Params, &str)> = vec![
            (params(|p| p.lines.clear()), "incremental"),
            (params(|p| p.snapshot_lines.push(addr(1))), "snapshot_lines"),
            (
                params(|p| p.definition_lines = vec![addr(39201)]),
                "two lines",
            ),
            (params(|p| p.loss_both = 101.0), "--loss-both"),
            (params(|p| p.loss_a = -1.0), "--loss-a"),
            (params(|p| p.rate = 0.0), "--rate"),
            (params(|p| p.rate = 2e6), "--rate"),
            (params(|p| p.heartbeat_ms = 60_001), "--heartbeat-ms"),
            (params(|p| p.loop_ms = 9), "--loop-ms"),
            (params(|p| p.loop_ms = 60_001), "--loop-ms"),
            (params(|p| p.definition_loop_ms = 0), "--definition-loop-ms"),
            (params(|p| p.halt_every_s = 86_401), "--halt-every-s"),
            (
                params(|p| p.channel_reset_at_ms = vec![86_400_001]),
                "--channel-reset-at-ms",
            ),
            (
                params(|p| {
                    p.pause_every_s = 1;
                    p.pause_ms = 1000;
                }),
                "--pause-ms",
            ),
        ];
        for (p, needle) in cases {
            let e = Venue::new(&p).unwrap_err().to_string();
            assert!(e.contains(needle) && !e.contains('\n'), "{needle}: {e}");
        }
    }
}
