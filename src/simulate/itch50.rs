//! A simulated ITCH 5.0 venue over MoldUDP64 (`simulate --protocol itch50`),
//! with a re-request server and, with `--glimpse`, a GLIMPSE snapshot
//! server ([`glimpse`]).
//!
//! Two layers, as for SQF:
//!
//! - [`Venue`]: pure and deterministic (seeded, no clock, no socket).
//!   [`Venue::poll`] is handed the local time and appends the datagrams due
//!   by then, each tagged with its line; [`Venue::on_request`] takes a
//!   re-request and [`Venue::answers`] hands out the answers due;
//!   [`Venue::report`] says exactly what it did, its own books included.
//! - [`run`]: one UDP socket per line bound to the loopback `--source`, a
//!   socket bound to the feed's `recovery` address (loopback only) when the
//!   server is on, a pacing loop, and the report as one JSON line.
//!   With `--glimpse` ([`glimpse::Server`]), a TCP listener on loopback and
//!   a thread per connection; the pacing loop hands them a copy of the
//!   venue's state ([`Venue::glimpse`]) between polls, never waiting on
//!   them.
//!
//! # What the venue publishes (one session, sequences from 1)
//!
//! - **Opening**: System Event `O`, a Stock Directory (`R`) and a Trading
//!   Action `T` (`H`) per stock (locates 1, 2, …), then System Events `S`
//!   and `Q`.
//! - **Order flow**: `rate` messages per second as
//!   [`crate::protocol::itch50::synth::Flow`] makes them (adds, deletes,
//!   replaces, executions, cancels, trades, imbalances; no add crosses the
//!   book), stocks drawn by Zipf rank; due as for SQF (active time × rate,
//!   capped by `count`), packed up to `batch` messages and
//!   [`MAX_DATAGRAM`] bytes a packet.
//! - **Halts**: every `halt_every_s` seconds of wall time since the start
//!   (pauses included: one due in a pause comes at its end), the next stock
//!   in turn is halted (`H` `H`) for half that period, then trades again
//!   (`H` `T`); a halted stock gets no order flow.
//! - **Heartbeats**: when nothing was sent for `heartbeat_ms`, a heartbeat
//!   (count 0, the next sequence).
//! - **End**: System Events `M`, `E`, `C`, then an end of session (count
//!   `0xFFFF`).
//! - **Pauses**: during `[k × pause_every_s, k × pause_every_s + pause_ms)`
//!   nothing is sent, not even heartbeats (the re-request server still
//!   answers); no order flow is owed for that time.
//! - Message timestamps are the local time since midnight in `timezone` of
//!   the first poll's date.
//!
//! # Line effects
//!
//! As the SQF simulator's (the same code): per line, loss, duplicates
//! and holding a datagram back behind the next, drawn from that line's own
//! PRNG. Every datagram is subject to them but the end of session, which
//! goes to every line whose loss is below 100 %. The messages of a data
//! packet dropped on every line are counted in `lost_on_both_lines`: the
//! messages a receiver can only get from the re-request server.
//!
//! # The re-request server
//!
//! Keeps the last `history` messages. A request (20 bytes: session,
//! sequence, count) for this session whose sequence is retained and already
//! sent is answered by one data packet from that sequence, with at most
//! `count` messages and as many as fit [`MAX_DATAGRAM`] bytes, sent back to
//! the request's source `answer_delay_ms` later. `request_drop` percent of
//! requests are dropped unanswered (its own PRNG); a request that is not 20
//! bytes, names another session, a count of 0, or a sequence not retained
//! or not sent yet is counted as unanswerable.
//!
//! # The GLIMPSE server
//!
//! `--glimpse ADDR` (127.0.0.0/8 only), `--glimpse-user` (default
//! `tgsim`), `--glimpse-password-env` (default `TG_GLIMPSE_PW`: the
//! variable must be set, or the simulator refuses to start),
//! `--glimpse-fault FAULT` and `--glimpse-fault-logins K`: a GLIMPSE 5.0
//! snapshot server over SoupBinTCP 4.00 whose snapshot is the venue at
//! login, ended by `G` with the next multicast sequence, and the faults it
//! plays on demand; see [`glimpse`]. Its counts are the report's
//! `glimpse`.

use super::{check_percents, flush_held, lines, offer, print_report, Line, LineReport};
use super::{LineSockets, Outgoing, Pacing, SplitMix64, NS_PER_MS, NS_PER_S, POLL_SLEEP};
use crate::protocol::itch50::message::encode;
use crate::protocol::itch50::mold::Request;
use crate::protocol::itch50::summary::SymbolSummary as ItchSymbolSummary;
use crate::protocol::itch50::synth::{Flow, Rng, Zipf};
use crate::protocol::itch50::{PacketBuilder, Session};
use crate::symbol::Symbol;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::Duration;

pub mod glimpse;

/// Largest datagram the venue sends: a 1,500-byte Ethernet MTU less the
/// IPv4 and UDP headers.
pub const MAX_DATAGRAM: usize = 1472;
/// Most order-flow messages packed into one packet.
pub const MAX_BATCH: usize = 64;
/// Most stocks: locates are u16, 0 reserved.
pub const MAX_STOCKS: usize = 65_535;
/// Most messages the re-request server keeps.
pub const MAX_HISTORY: usize = 10_000_000;
/// Longest answer delay, ms.
pub const MAX_ANSWER_DELAY_MS: u64 = 60_000;
/// Longest time the server keeps answering after the end of session, ms.
pub const MAX_LINGER_MS: u64 = 600_000;
/// Live orders a stock holds at most (above it adds turn into deletes).
const MAX_ORDERS: usize = 200;

/// What `tickguard simulate --protocol itch50` publishes; [`Params::default`]
/// holds the flags' defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Destination of line A (loopback, or multicast sent with TTL 0).
    pub line_a: SocketAddrV4,
    /// Destination of line B; `None` for one line.
    pub line_b: Option<SocketAddrV4>,
    /// Send from this loopback address.
    pub source: Ipv4Addr,
    /// The re-request server's address (loopback); `None`: no server.
    pub recovery: Option<SocketAddrV4>,
    /// The session, 1 to 10 printable ASCII characters (space-padded).
    pub session: String,
    /// Number of stocks (SYM00000, … unless `names`), 1 to 65,535.
    pub symbols: usize,
    /// Explicit stock names (override `symbols`).
    pub names: Vec<String>,
    /// Order-flow messages per second, finite and above 0.
    pub rate: f64,
    /// Most messages a packet, 1 to 64.
    pub batch: usize,
    /// Percent of datagrams dropped on line A, 0 to 100.
    pub loss_a: f64,
    /// Percent of datagrams dropped on line B, 0 to 100.
    pub loss_b: f64,
    /// Percent of datagrams sent twice on a line, 0 to 100.
    pub duplicate: f64,
    /// Percent of datagrams held back and sent after the next, 0 to 100.
    pub reorder: f64,
    /// Heartbeat after this long without a datagram, ms, 0 (none) to 60,000.
    pub heartbeat_ms: u64,
    /// Every this many seconds, send nothing for `pause_ms` (0: never).
    pub pause_every_s: u64,
    /// Length of each pause, ms (shorter than the period).
    pub pause_ms: u64,
    /// Halt a stock every this many seconds, for half of it (0: never).
    pub halt_every_s: u64,
    /// Messages the re-request server keeps, 1 to 10,000,000.
    pub history: usize,
    /// Delay of each answer, ms, 0 to 60,000.
    pub answer_delay_ms: u64,
    /// Percent of requests dropped unanswered, 0 to 100.
    pub request_drop: f64,
    /// After the end of session, keep answering requests this long, ms, 0 to 600,000.
    pub linger_ms: u64,
    /// IANA time zone of message timestamps.
    pub timezone: String,
    /// Stop after this many seconds (0: until interrupted).
    pub duration_s: f64,
    /// Stop after this many order-flow messages (0: no limit).
    pub count: u64,
    /// Seed of every random choice.
    pub seed: u64,
    /// Print the report as JSON at the end.
    pub report: bool,
    /// The GLIMPSE snapshot server; `None`: none.
    pub glimpse: Option<glimpse::Params>,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            line_a: SocketAddrV4::new(Ipv4Addr::new(239, 2, 1, 1), 26477),
            line_b: None,
            source: Ipv4Addr::LOCALHOST,
            recovery: None,
            session: "TGSIM00001".into(),
            symbols: 8,
            names: Vec::new(),
            rate: 1000.0,
            batch: 8,
            loss_a: 0.0,
            loss_b: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            heartbeat_ms: 1000,
            pause_every_s: 0,
            pause_ms: 1000,
            halt_every_s: 0,
            history: 1_000_000,
            answer_delay_ms: 0,
            request_drop: 0.0,
            linger_ms: 0,
            timezone: "America/New_York".into(),
            duration_s: 0.0,
            count: 0,
            seed: 1,
            report: false,
            glimpse: None,
        }
    }
}

/// What one line carried.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ItchLineReport {
    /// Datagrams: sent, dropped, duplicated, reordered (as for SQF).
    #[serde(flatten)]
    pub datagrams: LineReport,
    /// Messages in the data packets this line dropped.
    pub messages_dropped: u64,
}

/// The re-request server's counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ServerReport {
    /// Where it listens.
    pub listen: String,
    /// Requests received.
    pub requests_received: u64,
    /// Requests answered (an answer handed to the socket: a send that
    /// fails, the requester gone, still counts).
    pub requests_answered: u64,
    /// Requests dropped on purpose (`request_drop`), or with
    /// [`MAX_WAITING_ANSWERS`] answers already waiting for their time.
    pub requests_dropped: u64,
    /// Requests that could not be answered (malformed, another session,
    /// count 0, a sequence not retained or not sent yet).
    pub requests_unanswerable: u64,
    /// Messages in the answers.
    pub messages_resent: u64,
}

/// Exactly what the venue did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VenueReport {
    /// Always `"itch50"`.
    pub protocol: &'static str,
    /// The session, as sent.
    pub session: String,
    /// Per line, A first.
    pub lines: Vec<ItchLineReport>,
    /// Distinct datagrams generated (before line effects).
    pub datagrams: u64,
    /// Messages sent (sequences used).
    pub messages: u64,
    /// Order-flow messages among them.
    pub order_flow: u64,
    /// Heartbeats generated.
    pub heartbeats: u64,
    /// Halts (`H` `H`) sent.
    pub halts: u64,
    /// Messages whose data packet every line dropped.
    pub lost_on_both_lines: u64,
    /// True once the end of session is sent.
    pub ended: bool,
    /// The re-request server, if on.
    pub server: Option<ServerReport>,
    /// The GLIMPSE server, if on ([`publish`] fills it in: [`Venue::report`]
    /// leaves it `None`).
    pub glimpse: Option<glimpse::Report>,
    /// Per stock, at the time of the report, as the replay summary shows
    /// an ITCH symbol (`last_timestamp`: of the last message naming it).
    pub books: BTreeMap<String, ItchSymbolSummary>,
}

/// Answers the re-request server holds waiting for their time, at most:
/// a request past them is dropped (counted), so a flood of requests under
/// a long `answer_delay_ms` cannot grow the queue without end.
pub const MAX_WAITING_ANSWERS: usize = 65_536;

/// The venue's re-request server state.
#[derive(Debug, Clone)]
struct Server {
    delay_ns: u64,
    drop: f64,
    rng: SplitMix64,
    /// Answers waiting for their time: due (ns), destination, datagram.
    queue: VecDeque<(u64, SocketAddrV4, Vec<u8>)>,
}

/// The venue: a deterministic, I/O-free ITCH session generator and re-request server.
#[derive(Debug, Clone)]
pub struct Venue {
    session: Session,
    flow: Flow,
    zipf: Zipf,
    rng: Rng,
    lines: Vec<Line>,
    /// Datagrams per line.
    line_stats: Vec<LineReport>,
    /// Messages in the data packets each line dropped.
    messages_dropped: Vec<u64>,
    pacing: Pacing,
    batch: usize,
    effects: (f64, f64),
    heartbeat_ns: u64,
    halt_every_ns: u64,
    tz: jiff::tz::TimeZone,
    /// Epoch ns of midnight of the session's date (set at the first poll).
    midnight: i128,
    start: Option<u64>,
    last_now: u64,
    opened: bool,
    finished: bool,
    /// Elapsed time of the last datagram (heartbeats count from it).
    last_sent: u64,
    /// Sequence of the next message.
    next_seq: u64,
    /// Retained messages, the first with sequence `history_first`.
    history: VecDeque<Vec<u8>>,
    history_first: u64,
    history_max: usize,
    /// System Events sent so far: (timestamp, code).
    events: Vec<(u64, u8)>,
    /// Timestamp of the opening (of the Stock Directory).
    opened_ts: u64,
    /// Trading state per stock.
    states: Vec<u8>,
    /// Timestamp of each stock's last Trading Action.
    action_ts: Vec<u64>,
    /// Timestamp of the last message naming each stock.
    last_ts: Vec<u64>,
    /// The halted stock and the elapsed time it resumes at.
    halted: Option<(usize, u64)>,
    next_halt: u64,
    halt_turn: usize,
    /// Messages waiting to be packed.
    pending: Vec<Vec<u8>>,
    server: Option<Server>,
    report: VenueReport,
}

impl Venue {
    /// Validates the parameters (errors name the flag) and builds the
    /// venue. Nothing is sent before the first [`Venue::poll`].
    pub fn new(p: &Params) -> Result<Venue> {
        let most = super::MAX_HALT_EVERY_S;
        if p.halt_every_s > most {
            bail!(
                "simulate: --halt-every-s must be from 0 to {most}, got {}",
                p.halt_every_s
            );
        }
        let names: Vec<String> = if p.names.is_empty() {
            if !(1..=MAX_STOCKS).contains(&p.symbols) {
                bail!(
                    "simulate: --symbols must be from 1 to {MAX_STOCKS} for itch50 (locates are 16-bit), got {}",
                    p.symbols
                );
            }
            (0..p.symbols).map(|i| format!("SYM{i:05}")).collect()
        } else {
            p.names.clone()
        };
        if names.len() > MAX_STOCKS {
            bail!("simulate: at most {MAX_STOCKS} --names for itch50");
        }
        let mut symbols = Vec::with_capacity(names.len());
        for name in &names {
            let Some(s) = Symbol::parse(name) else {
                bail!("simulate: stock {name:?} is not a valid ITCH stock (1 to 8 printable ASCII characters, no spaces)");
            };
            if symbols.contains(&s) {
                bail!("simulate: stock {name:?} is given twice");
            }
            symbols.push(s);
        }
        let session = parse_session(&p.session)?;
        check_percents(&[
            ("--loss-a", p.loss_a),
            ("--loss-b", p.loss_b),
            ("--duplicate", p.duplicate),
            ("--reorder", p.reorder),
            ("--request-drop", p.request_drop),
        ])?;
        let pacing = Pacing::new(
            (p.rate, "messages", super::MAX_RATE),
            p.duration_s,
            (p.pause_every_s, p.pause_ms),
            p.count,
        )?;
        if !(1..=MAX_BATCH).contains(&p.batch) {
            bail!(
                "simulate: --batch must be from 1 to {MAX_BATCH} for itch50, got {}",
                p.batch
            );
        }
        super::check_at_most(&[
            ("--heartbeat-ms", p.heartbeat_ms, super::MAX_HEARTBEAT_MS),
            ("--answer-delay-ms", p.answer_delay_ms, MAX_ANSWER_DELAY_MS),
            ("--linger-ms", p.linger_ms, MAX_LINGER_MS),
        ])?;
        if !(1..=MAX_HISTORY).contains(&p.history) {
            bail!(
                "simulate: --history must be from 1 to {MAX_HISTORY} messages, got {}",
                p.history
            );
        }
        let tz = jiff::tz::TimeZone::get(&p.timezone).map_err(|_| {
            anyhow::anyhow!(
                "simulate: time zone {:?} is not an IANA time zone name",
                p.timezone
            )
        })?;
        if let Some(g) = &p.glimpse {
            glimpse::check(g)?;
        }
        let (lines, line_reports) = lines((p.line_a, p.loss_a), (p.line_b, p.loss_b), p.seed)?;
        let server = p.recovery.map(|_| Server {
            delay_ns: p.answer_delay_ms * NS_PER_MS,
            drop: p.request_drop,
            rng: SplitMix64::new(p.seed, 9),
            queue: VecDeque::new(),
        });
        let report = VenueReport {
            protocol: "itch50",
            session: session.display(),
            server: p.recovery.map(|r| ServerReport {
                listen: r.to_string(),
                ..ServerReport::default()
            }),
            ..VenueReport::default()
        };
        let halt_every_ns = p.halt_every_s.saturating_mul(NS_PER_S);
        Ok(Venue {
            session,
            flow: Flow::new(p.seed, &symbols, MAX_ORDERS),
            zipf: Zipf::new(symbols.len()),
            rng: Rng(p.seed ^ 0x7e4e_0e00),
            messages_dropped: vec![0; lines.len()],
            lines,
            line_stats: line_reports,
            pacing,
            batch: p.batch,
            effects: (p.duplicate, p.reorder),
            heartbeat_ns: p.heartbeat_ms * NS_PER_MS,
            halt_every_ns,
            tz,
            midnight: 0,
            start: None,
            last_now: 0,
            opened: false,
            finished: false,
            last_sent: 0,
            next_seq: 1,
            history: VecDeque::new(),
            history_first: 1,
            history_max: p.history,
            events: Vec::new(),
            opened_ts: 0,
            states: vec![0; symbols.len()],
            action_ts: vec![0; symbols.len()],
            last_ts: vec![0; symbols.len()],
            halted: None,
            next_halt: halt_every_ns,
            halt_turn: 0,
            pending: Vec::new(),
            server,
            report,
        })
    }

    /// The session.
    pub fn session(&self) -> Session {
        self.session
    }

    /// Everything done so far, with the books as they are now.
    pub fn report(&self) -> VenueReport {
        let mut r = self.report.clone();
        r.lines = self
            .line_stats
            .iter()
            .zip(&self.messages_dropped)
            .map(|(l, &m)| ItchLineReport {
                datagrams: l.clone(),
                messages_dropped: m,
            })
            .collect();
        r.books = self.books();
        r
    }

    /// The sequence of the next message.
    pub fn next_sequence(&self) -> u64 {
        self.next_seq
    }

    /// A copy of the venue as a GLIMPSE snapshot sends it, as it is now
    /// (between polls): it reflects every message sequenced below
    /// [`Venue::next_sequence`] and none from it. Before the first poll
    /// nothing was sent, not even the stocks.
    pub fn glimpse(&self) -> glimpse::State {
        let stocks = match self.opened {
            false => Vec::new(),
            true => self
                .flow
                .stocks
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let mut orders = self.flow.orders(i).to_vec();
                    orders.sort_unstable_by_key(|o| o.order);
                    glimpse::Stock {
                        symbol: s.symbol,
                        locate: s.locate,
                        listed: self.opened_ts,
                        action: (self.states[i] != 0).then(|| (self.action_ts[i], self.states[i])),
                        orders,
                    }
                })
                .collect(),
        };
        glimpse::State {
            next: self.next_seq,
            events: self.events.clone(),
            stocks,
        }
    }

    /// True once [`Venue::finish`] ran, `count` order-flow messages were
    /// sent, or `duration_s` has elapsed at `now_ns` since the first poll.
    pub fn done(&self, now_ns: u64) -> bool {
        self.finished || self.pacing.done(self.report.order_flow, self.start, now_ns)
    }

    /// Appends to `out` the datagrams due at local time `now_ns` (ns since
    /// the Unix epoch). The first call is the start; an earlier time than
    /// a previous one counts as that one. Nothing after [`Venue::finish`].
    pub fn poll(&mut self, now_ns: u64, out: &mut Vec<Outgoing>) {
        if self.finished {
            return;
        }
        let now = self.advance(now_ns);
        let e = now - self.start.unwrap_or(now);
        if !self.opened {
            self.open(now, out);
        }
        if self.pacing.in_pause(e) {
            return;
        }
        let ts = self.timestamp(now);
        if self.halt_every_ns > 0 {
            if let Some((i, resume)) = self.halted {
                if e >= resume {
                    self.halted = None;
                    self.trading_action(i, ts, b'T');
                }
            }
            if self.halted.is_none() && e >= self.next_halt {
                let i = self.halt_turn % self.states.len();
                self.halt_turn += 1;
                self.next_halt = super::next_due(self.next_halt, self.halt_every_ns, e);
                // One stock never halts for good: with a single stock, it trades between halts.
                self.halted = Some((i, e + self.halt_every_ns / 2));
                self.trading_action(i, ts, b'H');
                self.report.halts += 1;
            }
        }
        let due = self.pacing.due(e, self.report.order_flow);
        while self.report.order_flow < due {
            let mut i = self.zipf.sample(&mut self.rng);
            if let Some((h, _)) = self.halted {
                if i == h && self.states.len() > 1 {
                    i = (i + 1) % self.states.len();
                } else if i == h {
                    break;
                }
            }
            let m = self.flow.event(i, ts);
            self.pending.push(m);
            self.last_ts[i] = ts;
            self.report.order_flow += 1;
        }
        self.flush(out);
        if self.heartbeat_ns > 0 && e.saturating_sub(self.last_sent) >= self.heartbeat_ns {
            let hb = PacketBuilder::heartbeat(self.session, self.next_seq);
            self.report.heartbeats += 1;
            self.emit(hb, 0, false, out);
            self.last_sent = e;
        }
    }

    /// Ends the session at `now_ns`: the held-back datagrams, System Events
    /// `M`, `E`, `C`, then the end of session on every line that is up.
    /// Later polls send nothing; the server keeps answering.
    pub fn finish(&mut self, now_ns: u64, out: &mut Vec<Outgoing>) {
        if self.finished {
            return;
        }
        let now = self.advance(now_ns);
        if !self.opened {
            self.open(now, out);
        }
        let ts = self.timestamp(now);
        for code in [b'M', b'E', b'C'] {
            self.system_event(ts, code);
        }
        self.flush(out);
        flush_held(&mut self.lines, &mut self.line_stats, out);
        let end = PacketBuilder::end_of_session(self.session, self.next_seq);
        self.emit(end, 0, true, out);
        self.report.ended = true;
        self.finished = true;
    }

    /// Takes a re-request datagram from `from` at local time `now_ns`.
    pub fn on_request(&mut self, bytes: &[u8], from: SocketAddrV4, now_ns: u64) {
        let Some(server) = self.server.as_mut() else {
            return;
        };
        let Some(counts) = self.report.server.as_mut() else {
            return;
        };
        counts.requests_received += 1;
        if server.rng.percent(server.drop) || server.queue.len() >= MAX_WAITING_ANSWERS {
            counts.requests_dropped += 1;
            return;
        }
        let answer = Request::decode(bytes).and_then(|r| {
            let first = self.history_first;
            let end = self.next_seq;
            if r.session != self.session || r.count == 0 || r.sequence < first || r.sequence >= end
            {
                return None;
            }
            let mut p = PacketBuilder::new(self.session, r.sequence);
            let from = (r.sequence - first) as usize;
            for m in self.history.range(from..).take(usize::from(r.count)) {
                if p.len() + 2 + m.len() > MAX_DATAGRAM {
                    break;
                }
                p.message(m);
            }
            Some(p)
        });
        match answer {
            Some(p) => {
                counts.messages_resent += u64::from(p.count());
                server
                    .queue
                    .push_back((now_ns.saturating_add(server.delay_ns), from, p.finish()));
            }
            None => counts.requests_unanswerable += 1,
        }
    }

    /// Appends to `out` the answers due at `now_ns`: (destination, datagram).
    pub fn answers(&mut self, now_ns: u64, out: &mut Vec<(SocketAddrV4, Vec<u8>)>) {
        let Some(server) = self.server.as_mut() else {
            return;
        };
        while server.queue.front().is_some_and(|a| a.0 <= now_ns) {
            if let Some((_, to, bytes)) = server.queue.pop_front() {
                out.push((to, bytes));
                if let Some(c) = self.report.server.as_mut() {
                    c.requests_answered += 1;
                }
            }
        }
    }

    /// True while answers wait for their time.
    pub fn answers_pending(&self) -> bool {
        self.server.as_ref().is_some_and(|s| !s.queue.is_empty())
    }

    fn advance(&mut self, now_ns: u64) -> u64 {
        let now = now_ns.max(self.last_now);
        self.last_now = now;
        if self.start.is_none() {
            self.start = Some(now);
            self.midnight = crate::protocol::itch50::feed::midnight(&self.tz, now);
        }
        now
    }

    /// ns since the session date's midnight (u48 in the message).
    fn timestamp(&self, now: u64) -> u64 {
        (now as i128 - self.midnight).clamp(0, (1i128 << 48) - 1) as u64
    }

    fn open(&mut self, now: u64, out: &mut Vec<Outgoing>) {
        self.opened = true;
        let ts = self.timestamp(now);
        self.opened_ts = ts;
        self.system_event(ts, b'O');
        let directory: Vec<Vec<u8>> = self.flow.directory(ts).collect();
        self.pending.extend(directory);
        for i in 0..self.states.len() {
            self.trading_action(i, ts, b'T');
        }
        self.system_event(ts, b'S');
        self.system_event(ts, b'Q');
        self.flush(out);
    }

    fn system_event(&mut self, ts: u64, code: u8) {
        self.pending.push(encode::system_event(ts, code));
        self.events.push((ts, code));
    }

    fn trading_action(&mut self, i: usize, ts: u64, state: u8) {
        let s = &self.flow.stocks[i];
        self.pending
            .push(encode::trading_action(s.locate, ts, s.symbol, state));
        self.states[i] = state;
        self.action_ts[i] = ts;
        self.last_ts[i] = ts;
    }

    /// Packs the pending messages into data packets and emits them.
    fn flush(&mut self, out: &mut Vec<Outgoing>) {
        let pending = std::mem::take(&mut self.pending);
        let mut packet = PacketBuilder::new(self.session, self.next_seq);
        for m in pending {
            let full = usize::from(packet.count()) >= self.batch
                || packet.len() + 2 + m.len() > MAX_DATAGRAM;
            if full && !packet.is_empty() {
                self.send_packet(packet, out);
                packet = PacketBuilder::new(self.session, self.next_seq);
            }
            packet.message(&m);
            self.next_seq += 1;
            self.history.push_back(m);
            if self.history.len() > self.history_max {
                self.history.pop_front();
                self.history_first += 1;
            }
        }
        if !packet.is_empty() {
            self.send_packet(packet, out);
        }
    }

    fn send_packet(&mut self, packet: PacketBuilder, out: &mut Vec<Outgoing>) {
        let n = u64::from(packet.count());
        self.report.messages += n;
        self.emit(packet.finish(), n, false, out);
        self.last_sent = self.last_now - self.start.unwrap_or(self.last_now);
    }

    /// Offers a datagram of `messages` messages to the lines; counts what
    /// each line dropped and what every line dropped.
    fn emit(&mut self, payload: Vec<u8>, messages: u64, session: bool, out: &mut Vec<Outgoing>) {
        self.report.datagrams += 1;
        let before: Vec<u64> = self.line_stats.iter().map(|l| l.dropped).collect();
        let delivered = offer(
            &mut self.lines,
            &mut self.line_stats,
            self.effects,
            payload,
            session,
            out,
        );
        for ((l, b), m) in self
            .line_stats
            .iter()
            .zip(before)
            .zip(&mut self.messages_dropped)
        {
            if l.dropped > b {
                *m += messages;
            }
        }
        if !delivered {
            self.report.lost_on_both_lines += messages;
        }
    }

    fn books(&self) -> BTreeMap<String, ItchSymbolSummary> {
        self.flow
            .stocks
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let (bid, ask, orders) = self.flow.top(i);
                (
                    s.symbol.to_string(),
                    ItchSymbolSummary {
                        locate: s.locate,
                        bid: bid.map(|b| b.0),
                        bid_size: bid.map(|b| b.1),
                        ask: ask.map(|a| a.0),
                        ask_size: ask.map(|a| a.1),
                        orders,
                        trading_state: (self.states[i] != 0)
                            .then(|| char::from(self.states[i]).to_string()),
                        last_timestamp: self.opened.then_some(self.last_ts[i]),
                    },
                )
            })
            .collect()
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

/// A session name: 1 to 10 printable ASCII characters, right-padded with spaces.
fn parse_session(s: &str) -> Result<Session> {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > 10 || !b.iter().all(|c| (0x20..=0x7e).contains(c)) {
        bail!("simulate: --session {s:?} must be 1 to 10 printable ASCII characters");
    }
    let mut out = [b' '; 10];
    out[..b.len()].copy_from_slice(b);
    Ok(Session(out))
}

/// Runs `tickguard simulate --protocol itch50`: publishes until `--count`,
/// `--duration-s` or SIGINT/SIGTERM, ends the session, keeps answering
/// re-requests for `--linger-ms`, then prints the report when `--report`.
pub fn run(p: &Params) -> Result<()> {
    let stop = crate::sys::shutdown_on_signals().context("simulate: installing signal handlers")?;
    let report = publish(p, stop)?;
    if p.report {
        print_report(&report, stop)?;
    }
    Ok(())
}

/// Publishes as [`run`] does until done or `stop`, and returns the report.
/// With `glimpse`, its password is read (and checked) before any socket
/// opens.
pub fn publish(p: &Params, stop: &std::sync::atomic::AtomicBool) -> Result<VenueReport> {
    // Before any socket opens (the GLIMPSE and re-request servers'
    // included): the lines' destinations.
    crate::simulate::check_destination("A", p.line_a)?;
    if let Some(b) = p.line_b {
        crate::simulate::check_destination("B", b)?;
    }
    let venue = Venue::new(p)?;
    let glimpse = match &p.glimpse {
        None => None,
        Some(g) => {
            if g.listen.port() == 0 {
                bail!("simulate: --glimpse {} has port 0: give the port the GLIMPSE server listens on", g.listen);
            }
            Some(glimpse::Server::open(g, venue.session())?)
        }
    };
    publish_with(p, venue, glimpse, stop)
}

/// [`publish`] with the venue made and the GLIMPSE server (if any)
/// listening: the pacing loop answers the server's state requests between
/// polls, and the server's counts join the report at the end.
fn publish_with(
    p: &Params,
    mut venue: Venue,
    glimpse: Option<glimpse::Server>,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<VenueReport> {
    use std::sync::atomic::Ordering::Relaxed;
    let server = match p.recovery {
        None => None,
        Some(addr) => {
            if !addr.ip().is_loopback() || addr.port() == 0 {
                bail!("simulate: recovery {addr} must be a loopback address (127.0.0.0/8) with a port: the re-request server listens on loopback only");
            }
            let s = UdpSocket::bind(addr)
                .with_context(|| format!("simulate: re-request server on {addr}"))?;
            s.set_nonblocking(true)
                .context("simulate: re-request server socket")?;
            Some(s)
        }
    };
    let sockets = LineSockets::open(p.line_a, p.line_b, p.source)?;
    let send = |out: &mut Vec<Outgoing>| sockets.send(out);
    let mut buf = vec![0u8; 2048];
    let mut answers = Vec::new();
    // Serves the requests waiting on the server socket (while `listening`),
    // then sends the answers due.
    let mut serve = |venue: &mut Venue, now: u64, listening: bool| -> Result<()> {
        let Some(socket) = &server else {
            return Ok(());
        };
        // Bounded per call, so a flood of requests cannot stall the feed.
        for _ in 0..if listening { 256 } else { 0 } {
            match socket.recv_from(&mut buf) {
                Ok((n, std::net::SocketAddr::V4(from))) => venue.on_request(&buf[..n], from, now),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                // An ICMP error from an earlier answer's destination: nothing to do.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {}
                Err(e) => return Err(e).context("simulate: receiving re-requests"),
            }
        }
        venue.answers(now, &mut answers);
        for (to, bytes) in answers.drain(..) {
            // The requester may be gone: its loss, not the venue's.
            let _ = socket.send_to(&bytes, to);
        }
        Ok(())
    };
    // Hands the state, as it is between two polls, to the GLIMPSE
    // connections waiting for it (never blocks).
    let snapshot = |venue: &Venue| {
        if let Some(g) = &glimpse {
            g.serve(venue);
        }
    };
    let mut out = Vec::new();
    loop {
        let now = crate::time::now_ns();
        venue.poll(now, &mut out);
        send(&mut out)?;
        serve(&mut venue, now, true)?;
        snapshot(&venue);
        if venue.done(now) || stop.load(Relaxed) {
            break;
        }
        std::thread::sleep(POLL_SLEEP);
    }
    venue.finish(crate::time::now_ns(), &mut out);
    send(&mut out)?;
    // Lingers answering until `end`; past it, only the answers already
    // waiting are sent (within the answer delay): requests that keep
    // coming cannot keep the venue up.
    let end = crate::time::now_ns().saturating_add(p.linger_ms * NS_PER_MS);
    loop {
        let now = crate::time::now_ns();
        serve(&mut venue, now, now < end)?;
        snapshot(&venue);
        if (now >= end && !venue.answers_pending()) || stop.load(Relaxed) {
            break;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    let mut report = venue.report();
    report.glimpse = glimpse.map(glimpse::Server::finish);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::itch50::mold::Kind;
    use crate::protocol::itch50::Packet;

    /// 2026-01-05 09:30:00 in New York.
    const T0: u64 = 1_767_623_400_000_000_000;
    const MS: u64 = NS_PER_MS;
    const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 40_000);

    fn params(f: impl FnOnce(&mut Params)) -> Params {
        let mut p = Params {
            line_a: "127.0.0.1:39101".parse().unwrap(),
            line_b: Some("127.0.0.1:39102".parse().unwrap()),
            recovery: Some("127.0.0.1:39103".parse().unwrap()),
            rate: 2000.0,
            count: 3000,
            heartbeat_ms: 5,
            ..Params::default()
        };
        f(&mut p);
        p
    }

    /// Polls every `step` from T0 until done, then finishes; datagrams with their times.
    fn drive(v: &mut Venue, step: u64) -> Vec<(u64, Outgoing)> {
        super::super::drive(v, T0, step)
    }

    /// Per line: every message by sequence, and the packets' (kind, sequence) in order.
    type Seen = (BTreeMap<u64, Vec<u8>>, Vec<(Kind, u64)>);

    fn per_line(sent: &[(u64, Outgoing)], line: usize) -> Seen {
        let (mut msgs, mut packets) = (BTreeMap::new(), Vec::new());
        for (_, o) in sent.iter().filter(|(_, o)| o.line == line) {
            let p = Packet::new_checked(&o.payload[..]).expect("valid MoldUDP64");
            assert_eq!(p.session(), Session(*b"TGSIM00001"));
            assert!(o.payload.len() <= MAX_DATAGRAM);
            packets.push((p.kind(), p.sequence()));
            for (q, m) in p.messages() {
                msgs.insert(q, m.bytes().to_vec());
            }
        }
        (msgs, packets)
    }

    #[test]
    fn sequences_contiguous_apart_from_the_loss_and_the_end_last() {
        let lossy = || {
            params(|p| {
                p.loss_a = 20.0;
                p.loss_b = 20.0;
                p.halt_every_s = 1;
            })
        };
        let mut v = Venue::new(&lossy()).unwrap();
        let sent = drive(&mut v, MS);
        let r = v.report();
        let next = v.next_sequence();
        assert_eq!(r.messages, next - 1);
        assert_eq!(r.order_flow, 3000);
        assert!(r.halts >= 1);
        let (a, b) = (per_line(&sent, 0), per_line(&sent, 1));
        for (i, (msgs, packets)) in [&a, &b].into_iter().enumerate() {
            assert_eq!(*packets.last().unwrap(), (Kind::EndOfSession, next));
            let missing = (1..next).filter(|q| !msgs.contains_key(q)).count() as u64;
            assert_eq!(missing, r.lines[i].messages_dropped, "line {i}");
            // Data packets in sequence order on a line without reordering.
            let data: Vec<u64> = packets
                .iter()
                .filter(|p| matches!(p.0, Kind::Data(_)))
                .map(|p| p.1)
                .collect();
            assert!(data.windows(2).all(|w| w[0] < w[1]));
        }
        let both = (1..next)
            .filter(|q| !a.0.contains_key(q) && !b.0.contains_key(q))
            .count() as u64;
        assert!(both > 0);
        assert_eq!(both, r.lost_on_both_lines);
        // The same message on both lines is the same bytes.
        for (q, m) in &a.0 {
            if let Some(other) = b.0.get(q) {
                assert_eq!(m, other);
            }
        }
        // Same seed, same datagrams.
        let mut again = Venue::new(&lossy()).unwrap();
        assert_eq!(drive(&mut again, MS), sent);
    }

    #[test]
    fn heartbeats_when_idle_carry_the_next_sequence() {
        let mut v = Venue::new(&params(|p| {
            p.rate = 50.0;
            p.count = 20;
            p.line_b = None;
        }))
        .unwrap();
        let sent = drive(&mut v, MS);
        let (_, packets) = per_line(&sent, 0);
        let mut next = 1;
        let mut beats = 0;
        let mut idle_since = T0;
        for ((t, _), (kind, seq)) in sent.iter().zip(&packets) {
            match kind {
                Kind::Data(n) => {
                    assert_eq!(*seq, next);
                    next += u64::from(*n);
                }
                Kind::Heartbeat => {
                    beats += 1;
                    assert_eq!(*seq, next);
                    assert!(t - idle_since >= 5 * MS, "a heartbeat only when idle");
                }
                Kind::EndOfSession => assert_eq!(*seq, next),
            }
            idle_since = *t;
        }
        // A message every 20 ms: three heartbeats between two, 400 ms in all.
        assert!((60..=80).contains(&beats), "{beats}");
        assert_eq!(beats, v.report().heartbeats);
    }

    fn request(session: &[u8; 10], sequence: u64, count: u16) -> [u8; 20] {
        Request {
            session: Session(*session),
            sequence,
            count,
        }
        .encode()
    }

    #[test]
    fn the_server_answers_from_history_to_the_requester() {
        let mut v = Venue::new(&params(|p| {
            p.line_b = None;
            p.history = 1000;
        }))
        .unwrap();
        let sent = drive(&mut v, MS);
        let (msgs, _) = per_line(&sent, 0);
        let next = v.next_sequence();
        let now = T0 + 10_000 * MS;
        let mut answers = Vec::new();
        // From a retained sequence: at most the count asked.
        v.on_request(&request(b"TGSIM00001", next - 500, 5), CLIENT, now);
        // More than one datagram holds: as many as fit.
        v.on_request(&request(b"TGSIM00001", next - 900, 500), CLIENT, now);
        // Near the end: what there is.
        v.on_request(&request(b"TGSIM00001", next - 2, 64), CLIENT, now);
        v.answers(now, &mut answers);
        assert_eq!(answers.len(), 3);
        let got: Vec<(u64, Vec<Vec<u8>>)> = answers
            .iter()
            .map(|(to, bytes)| {
                assert_eq!(*to, CLIENT);
                assert!(bytes.len() <= MAX_DATAGRAM);
                let p = Packet::new_checked(&bytes[..]).unwrap();
                let m = p.messages().map(|(_, m)| m.bytes().to_vec()).collect();
                (p.sequence(), m)
            })
            .collect();
        assert_eq!(got[0].1.len(), 5);
        assert!(got[1].1.len() > 20 && got[1].1.len() < 500);
        assert_eq!(got[2].1.len(), 2);
        for (first, m) in &got {
            for (k, bytes) in m.iter().enumerate() {
                assert_eq!(Some(bytes), msgs.get(&(first + k as u64)), "byte-equal");
            }
        }
        // Not retained, not sent yet, count 0, another session, not 20 bytes.
        for bad in [
            request(b"TGSIM00001", next - 1001, 1).to_vec(),
            request(b"TGSIM00001", next, 1).to_vec(),
            request(b"TGSIM00001", next - 1, 0).to_vec(),
            request(b"OTHER00001", next - 1, 1).to_vec(),
            b"short".to_vec(),
        ] {
            v.on_request(&bad, CLIENT, now);
        }
        v.answers(now, &mut answers);
        assert_eq!(answers.len(), 3);
        let s = v.report().server.unwrap();
        assert_eq!(
            (
                s.requests_received,
                s.requests_answered,
                s.requests_unanswerable,
                s.requests_dropped
            ),
            (8, 3, 5, 0)
        );
        assert_eq!(
            s.messages_resent,
            got.iter().map(|g| g.1.len() as u64).sum::<u64>()
        );
    }

    /// Under a long answer delay, requests past the answers already
    /// waiting are dropped and counted: the queue stays bounded however
    /// many come.
    #[test]
    fn a_flood_of_requests_waits_in_a_bounded_queue() {
        let mut v = Venue::new(&params(|p| {
            p.answer_delay_ms = 60_000;
            p.count = 100;
        }))
        .unwrap();
        drive(&mut v, MS);
        let now = T0 + 5_000 * MS;
        let n = MAX_WAITING_ANSWERS as u64 + 1_000;
        for _ in 0..n {
            v.on_request(&request(b"TGSIM00001", 1, 3), CLIENT, now);
        }
        let queued = v.server.as_ref().map_or(0, |s| s.queue.len());
        assert_eq!(queued, MAX_WAITING_ANSWERS);
        let s = v.report().server.unwrap();
        assert_eq!((s.requests_received, s.requests_dropped), (n, 1_000));
    }

    #[test]
    fn slow_and_dropping_servers_and_none() {
        let mut v = Venue::new(&params(|p| {
            p.answer_delay_ms = 40;
            p.count = 100;
        }))
        .unwrap();
        drive(&mut v, MS);
        let mut answers = Vec::new();
        let now = T0 + 5_000 * MS;
        v.on_request(&request(b"TGSIM00001", 1, 3), CLIENT, now);
        v.answers(now + 40 * MS - 1, &mut answers);
        assert!(answers.is_empty() && v.answers_pending());
        v.answers(now + 40 * MS, &mut answers);
        assert_eq!(answers.len(), 1);

        let mut v = Venue::new(&params(|p| {
            p.request_drop = 50.0;
            p.count = 100;
        }))
        .unwrap();
        drive(&mut v, MS);
        for _ in 0..400 {
            v.on_request(&request(b"TGSIM00001", 1, 3), CLIENT, now);
        }
        v.answers(now, &mut answers);
        let s = v.report().server.unwrap();
        assert_eq!(s.requests_dropped + s.requests_answered, 400);
        assert!((140..260).contains(&s.requests_dropped), "{s:?}");

        let mut v = Venue::new(&params(|p| {
            p.recovery = None;
            p.count = 100;
        }))
        .unwrap();
        drive(&mut v, MS);
        v.on_request(&request(b"TGSIM00001", 1, 3), CLIENT, now);
        answers.clear();
        v.answers(now, &mut answers);
        assert!(answers.is_empty() && v.report().server.is_none());
    }

    #[test]
    fn books_follow_the_flow_and_halts() {
        let mut v = Venue::new(&params(|p| {
            p.halt_every_s = 1;
            p.count = 3000;
            p.rate = 2000.0;
        }))
        .unwrap();
        drive(&mut v, MS);
        let r = v.report();
        assert_eq!(r.books.len(), 8);
        // At 1.0 s the first stock was halted for 0.5 s; at 1.5 s it trades again.
        assert!(
            r.books
                .values()
                .all(|b| b.trading_state.as_deref() == Some("T")),
            "{r:?}"
        );
        assert!(r.books.values().any(|b| b.orders > 0));
        for b in r.books.values() {
            if let (Some(bid), Some(ask)) = (b.bid, b.ask) {
                assert!(bid < ask, "no add crosses");
            }
        }
    }

    #[test]
    fn bad_parameters_are_one_clear_error() {
        let cases: Vec<(Params, &str)> = vec![
            (params(|p| p.symbols = 0), "--symbols"),
            (params(|p| p.symbols = 65_536), "--symbols"),
            (params(|p| p.halt_every_s = 86_401), "--halt-every-s"),
            (
                params(|p| p.names = vec!["A B".into()]),
                "not a valid ITCH stock",
            ),
            (params(|p| p.names = vec!["A".into(), "A".into()]), "twice"),
            (params(|p| p.session = "ELEVENCHARS".into()), "--session"),
            (params(|p| p.session = String::new()), "--session"),
            (params(|p| p.loss_a = 101.0), "--loss-a"),
            (params(|p| p.request_drop = -1.0), "--request-drop"),
            (params(|p| p.rate = 0.0), "--rate"),
            (params(|p| p.batch = 65), "--batch"),
            (params(|p| p.heartbeat_ms = 60_001), "--heartbeat-ms"),
            (params(|p| p.answer_delay_ms = 60_001), "--answer-delay-ms"),
            (params(|p| p.linger_ms = 600_001), "--linger-ms"),
            (params(|p| p.history = 0), "--history"),
            (params(|p| p.timezone = "Mars/Base".into()), "time zone"),
            (
                params(|p| {
                    p.pause_every_s = 1;
                    p.pause_ms = 1000;
                }),
                "--pause-ms",
            ),
            (params(|p| p.line_b = Some(p.line_a)), "same destination"),
        ];
        for (p, needle) in cases {
            let e = Venue::new(&p).unwrap_err().to_string();
            assert!(e.contains(needle) && !e.contains('\n'), "{needle}: {e}");
        }
    }
}
