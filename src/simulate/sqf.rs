//! An SQF provider simulator, on one or two lines.
//!
//! Two layers, so that the live demo and the tests share one generator:
//!
//! - [`Simulator`]: pure and deterministic (a seeded PRNG, no clock, no
//!   socket). [`Simulator::poll`] is handed the local time and appends the
//!   datagrams due by then, each tagged with its line; [`Simulator::report`]
//!   says exactly what it did.
//! - [`run`]: `tickguard simulate`. One UDP socket per line bound to
//!   `--source` (a loopback address, port 0), a pacing loop around `poll`, and the report as one JSON
//!   line at the end.
//!
//! # What the provider publishes
//!
//! - **Quotes**: `rate` per second over all symbols, round-robin over the
//!   symbols, so each symbol gets `rate / symbols` per second. The number of
//!   quotes due at elapsed time `e` is `floor(active(e) × rate)`, where
//!   `active` leaves out the pauses; the quotes due at one poll are packed
//!   `batch` to a datagram (the last one may hold fewer). Each symbol has its
//!   own sequence (1, 2, …) and a multiplicative random-walk mid price with a
//!   spread of 2 basis points, so bid < ask. `invalid` percent of quotes carry
//!   an invalid price instead (crossed, zero bid, or NaN ask).
//! - **Heartbeats**: when `heartbeat_ms > 0`, one per symbol every
//!   `heartbeat_ms` (all symbols in the same round), with
//!   `next_expected = last assigned + 1`.
//! - **Snapshots**: for a delta feed, one per symbol at start (sequence 0);
//!   for either kind, one per symbol every `snapshot_ms` when it is > 0, with
//!   `sequence = last assigned`. Snapshots always carry a valid price.
//! - **Reset**: when `reset_after_s > 0`, once, at the first poll (outside a
//!   pause) at least that many seconds after start: every symbol's sequence
//!   goes back to 0, a Snapshot with sequence 0 is sent for each, and quotes
//!   restart at 1.
//! - **Pauses**: when `pause_every_s > 0`, nothing at all is sent during
//!   `[k × pause_every_s, k × pause_every_s + pause_ms)` for k = 1, 2, …; the
//!   provider is stopped, not buffering: no quotes are owed for that time.
//! - **Clock skew**: `send_time` and `source_time` are the local time plus
//!   `clock_skew_ms` (the provider's clock).
//! - Heartbeats and snapshots go 25 to a datagram (1216 bytes at most).
//!
//! # Line effects
//!
//! Every datagram is offered to each line (A first, then B). Per line, three
//! draws from that line's own PRNG decide: dropped (`loss_a` / `loss_b`
//! percent), sent twice back to back (`duplicate` percent), held back
//! (`reorder` percent) and sent right after the next datagram that line sends
//! (only one datagram is held at a time). The draws are made whatever the
//! percentages, so changing one setting does not reshuffle the others.
//!
//! **Session messages** are exempt from the line effects: the opening round
//! (a Heartbeat per symbol for a full feed when heartbeats are on, the
//! Snapshot per symbol of a delta feed) and the closing round of
//! [`Simulator::finish`] (a Heartbeat per symbol when heartbeats are on, after
//! any held-back datagram). They go to every line whose loss is below 100 %
//! (a line at 100 % is down and carries nothing). So, without reordering,
//! periodic snapshots or a reset, and with heartbeats on, a receiver that
//! sees every datagram the simulator emits counts as lost exactly
//! [`SimReport::ticks_lost_on_both_lines`]: a lost quote is always followed,
//! on its symbol, by a later quote or at least the closing heartbeat. With
//! heartbeats off, quotes lost before a symbol's first delivered quote or
//! after its last one cannot be seen by a receiver; snapshots and resets hide
//! the losses before them; reordering makes a receiver count late quotes as
//! lost (then as duplicates).
//!
//! Destinations are checked as every simulator's are (see [`super`]).

use super::{
    check_percents, flush_held, lines, next_due, offer, print_report, Line, LineReport,
    LineSockets, Outgoing, Pacing, SplitMix64, MAX_BATCH, NS_PER_MS, NS_PER_S, POLL_SLEEP,
};
use crate::protocol::sqf::PacketBuilder;
use crate::symbol::Symbol;
use anyhow::{bail, Context, Result};
use serde::{Serialize, Serializer};
use std::net::{Ipv4Addr, SocketAddrV4};

/// Heartbeats or snapshots per datagram: 16 + 25 × 48 bytes fits a 1500-byte MTU.
const CONTROL_PER_DATAGRAM: usize = 25;

/// Generated names are `SYM` and five digits.
pub const MAX_GENERATED_SYMBOLS: usize = 100_000;
/// Longest `--snapshot-ms`, ms (an hour).
pub const MAX_SNAPSHOT_MS: u64 = 3_600_000;
/// Latest `--reset-after-s`, s (a day).
pub const MAX_RESET_AFTER_S: u64 = 86_400;
/// Largest `--clock-skew-ms` either way, ms (a day).
pub const MAX_CLOCK_SKEW_MS: u64 = 86_400_000;

/// Half the spread, relative to the mid: 1 basis point.
const HALF_SPREAD: f64 = 1e-4;

/// Largest relative move of the mid per quote.
const STEP: f64 = 1e-4;

/// Above this many datagrams per second, the pacing loop yields instead of sleeping.
const SPIN_DATAGRAM_RATE: f64 = 20_000.0;

/// Exactly what the simulator did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SimReport {
    /// Per line, A first.
    pub lines: Vec<LineReport>,
    /// Distinct datagrams generated (before line effects).
    pub datagrams: u64,
    /// Quote messages generated.
    pub quotes: u64,
    /// Heartbeat messages generated.
    pub heartbeats: u64,
    /// Snapshot messages generated.
    pub snapshots: u64,
    /// Quotes with an invalid price.
    pub invalid_prices: u64,
    /// Provider resets.
    pub resets: u64,
    /// Quotes that no line delivered: their datagram was dropped on every line.
    pub ticks_lost_on_both_lines: u64,
    /// Last sequence assigned per symbol, in symbol order (a JSON object).
    #[serde(serialize_with = "pairs_as_map")]
    pub last_sequence: Vec<(String, u64)>,
    /// Symbols whose last quote no line delivered, in symbol order: on a
    /// full feed a receiver ends them suspect (the closing heartbeat
    /// reports the gap, and no quote follows).
    pub last_quote_lost_on_both_lines: Vec<String>,
}

fn pairs_as_map<S: Serializer>(pairs: &[(String, u64)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(pairs.iter().map(|(k, v)| (k, v)))
}

#[derive(Debug, Clone)]
struct SymbolState {
    symbol: Symbol,
    last_seq: u64,
    mid: f64,
    /// Its last quote was dropped on every line.
    last_lost: bool,
}

impl SymbolState {
    fn bid_ask(&self) -> (f64, f64) {
        (
            self.mid * (1.0 - HALF_SPREAD),
            self.mid * (1.0 + HALF_SPREAD),
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Control {
    Heartbeat,
    Snapshot,
}

/// What `tickguard simulate` publishes (the binary fills it from its flags,
/// whose names the errors use). [`Params::default`] holds the flags' defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Destination of line A (ip:port; multicast goes out on loopback with TTL 0).
    pub line_a: SocketAddrV4,
    /// Destination of line B; `None` for a single-line feed.
    pub line_b: Option<SocketAddrV4>,
    /// Send from this loopback address (the source a source-specific join filters on).
    pub source: Ipv4Addr,
    /// Number of symbols (named SYM00000, SYM00001, ... unless `names` is given), 1 to 100,000.
    pub symbols: usize,
    /// Explicit symbol names (override `symbols`).
    pub names: Vec<String>,
    /// Quotes per second over all symbols, finite and above 0.
    pub rate: f64,
    /// Most quotes packed into one datagram, 1 to 100.
    pub batch: usize,
    /// Feed kind: snapshots are sent at start (and periodically) for delta feeds.
    pub kind: SimKind,
    /// Percent of datagrams dropped on line A, 0 to 100.
    pub loss_a: f64,
    /// Percent of datagrams dropped on line B, 0 to 100.
    pub loss_b: f64,
    /// Percent of datagrams sent twice on a line, 0 to 100.
    pub duplicate: f64,
    /// Percent of datagrams held back and sent after the next one, 0 to 100.
    pub reorder: f64,
    /// Percent of quotes with an invalid price (crossed, zero or NaN), 0 to 100.
    pub invalid: f64,
    /// Heartbeat interval per symbol, ms (0: none).
    pub heartbeat_ms: u64,
    /// Snapshot interval per symbol, ms (0: only at start for delta feeds).
    pub snapshot_ms: u64,
    /// Every this many seconds, stop sending entirely for `pause_ms` (0: never).
    pub pause_every_s: u64,
    /// Length of each pause, ms (shorter than the period).
    pub pause_ms: u64,
    /// After this many seconds, reset the provider (0: never).
    pub reset_after_s: u64,
    /// Provider clock minus local clock, ms.
    pub clock_skew_ms: i64,
    /// Stop after this many seconds (0: run until interrupted).
    pub duration_s: f64,
    /// Stop after this many quotes (0: no limit).
    pub count: u64,
    /// Seed of the random choices (loss, prices, ...).
    pub seed: u64,
    /// Print the report as JSON at the end.
    pub report: bool,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            line_a: SocketAddrV4::new(Ipv4Addr::new(239, 1, 1, 1), 30001),
            line_b: None,
            source: Ipv4Addr::LOCALHOST,
            symbols: 8,
            names: Vec::new(),
            rate: 1000.0,
            batch: 8,
            kind: SimKind::Full,
            loss_a: 0.0,
            loss_b: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            invalid: 0.0,
            heartbeat_ms: 250,
            snapshot_ms: 0,
            pause_every_s: 0,
            pause_ms: 1000,
            reset_after_s: 0,
            clock_skew_ms: 0,
            duration_s: 0.0,
            count: 0,
            seed: 1,
            report: false,
        }
    }
}

/// Feed kind for the simulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimKind {
    /// Full quotes.
    Full,
    /// Delta quotes, repaired by snapshots.
    Delta,
}

/// The provider: a deterministic, I/O-free generator of SQF datagrams.
#[derive(Debug, Clone)]
pub struct Simulator {
    kind: SimKind,
    symbols: Vec<SymbolState>,
    lines: Vec<Line>,
    pacing: Pacing,
    batch: usize,
    duplicate: f64,
    reorder: f64,
    invalid: f64,
    heartbeat_ns: u64,
    snapshot_ns: u64,
    reset_ns: u64,
    skew_ns: i64,
    price_rng: SplitMix64,
    /// Local time of the first poll.
    start: Option<u64>,
    /// Latest local time seen (time never runs backwards here).
    last_now: u64,
    opened: bool,
    finished: bool,
    reset_done: bool,
    /// Elapsed time of the next heartbeat / snapshot round.
    next_heartbeat: u64,
    next_snapshot: u64,
    /// Index of the symbol of the next quote.
    next_symbol: usize,
    report: SimReport,
}

impl Simulator {
    /// Validates the arguments and builds the provider. Nothing is sent
    /// before the first [`Simulator::poll`].
    pub fn new(args: &Params) -> Result<Simulator> {
        let names: Vec<String> = if args.names.is_empty() {
            if args.symbols == 0 {
                bail!("simulate: --symbols must be at least 1");
            }
            if args.symbols > MAX_GENERATED_SYMBOLS {
                bail!(
                    "simulate: --symbols {} is too many: generated names SYM00000.. go up to {MAX_GENERATED_SYMBOLS} (use --names)",
                    args.symbols
                );
            }
            (0..args.symbols).map(|i| format!("SYM{i:05}")).collect()
        } else {
            args.names.clone()
        };
        let mut symbols = Vec::with_capacity(names.len());
        let mut seen = std::collections::HashSet::new();
        let mut price_rng = SplitMix64::new(args.seed, 1);
        for name in &names {
            let Some(symbol) = Symbol::parse(name) else {
                bail!(
                    "simulate: symbol {name:?} is not a valid SQF symbol (1 to 8 printable ASCII characters, no spaces)"
                );
            };
            if !seen.insert(symbol) {
                bail!("simulate: symbol {name:?} is given twice");
            }
            // Mids between 1 and 200, some FX-like, some equity-like.
            let mid = 1.0 + price_rng.unit() * 199.0;
            symbols.push(SymbolState {
                symbol,
                last_seq: 0,
                mid,
                last_lost: false,
            });
        }
        if symbols.is_empty() {
            bail!("simulate: at least one symbol is needed");
        }
        check_percents(&[
            ("--loss-a", args.loss_a),
            ("--loss-b", args.loss_b),
            ("--duplicate", args.duplicate),
            ("--reorder", args.reorder),
            ("--invalid", args.invalid),
        ])?;
        let pacing = Pacing::new(
            (args.rate, "quotes", super::MAX_RATE),
            args.duration_s,
            (args.pause_every_s, args.pause_ms),
            args.count,
        )?;
        if !(1..=MAX_BATCH).contains(&args.batch) {
            bail!(
                "simulate: --batch must be from 1 to {MAX_BATCH}, got {}",
                args.batch
            );
        }
        super::check_at_most(&[
            ("--heartbeat-ms", args.heartbeat_ms, super::MAX_HEARTBEAT_MS),
            ("--snapshot-ms", args.snapshot_ms, MAX_SNAPSHOT_MS),
            ("--reset-after-s", args.reset_after_s, MAX_RESET_AFTER_S),
        ])?;
        if args.clock_skew_ms.unsigned_abs() > MAX_CLOCK_SKEW_MS {
            bail!(
                "simulate: --clock-skew-ms must be from -{MAX_CLOCK_SKEW_MS} to {MAX_CLOCK_SKEW_MS}, got {}",
                args.clock_skew_ms
            );
        }
        // Within ±a day of ms: a product far inside i64.
        let skew_ns = args.clock_skew_ms * NS_PER_MS as i64;
        let (lines, line_reports) = lines(
            (args.line_a, args.loss_a),
            (args.line_b, args.loss_b),
            args.seed,
        )?;
        let report = SimReport {
            lines: line_reports,
            last_sequence: names.iter().map(|n| (n.clone(), 0)).collect(),
            ..SimReport::default()
        };
        let heartbeat_ns = args.heartbeat_ms.saturating_mul(NS_PER_MS);
        let snapshot_ns = args.snapshot_ms.saturating_mul(NS_PER_MS);
        Ok(Simulator {
            kind: args.kind,
            symbols,
            lines,
            pacing,
            batch: args.batch,
            duplicate: args.duplicate,
            reorder: args.reorder,
            invalid: args.invalid,
            heartbeat_ns,
            snapshot_ns,
            reset_ns: args.reset_after_s.saturating_mul(NS_PER_S),
            skew_ns,
            price_rng,
            start: None,
            last_now: 0,
            opened: false,
            finished: false,
            reset_done: false,
            next_heartbeat: heartbeat_ns,
            next_snapshot: snapshot_ns,
            next_symbol: 0,
            report,
        })
    }

    /// Everything done so far.
    pub fn report(&self) -> &SimReport {
        &self.report
    }

    /// The symbols, in the order of the report.
    pub fn symbols(&self) -> Vec<Symbol> {
        self.symbols.iter().map(|s| s.symbol).collect()
    }

    /// Number of lines (1 or 2).
    pub fn line_count(&self) -> usize {
        self.lines.len()
    }

    /// True once [`Simulator::finish`] ran, `count` quotes were generated,
    /// or `duration_s` has elapsed at local time `now_ns` since the first poll.
    pub fn done(&self, now_ns: u64) -> bool {
        self.finished || self.pacing.done(self.report.quotes, self.start, now_ns)
    }

    /// Appends to `out` the datagrams due at local time `now_ns` (ns since
    /// the Unix epoch), in sending order. The first call is the start; a
    /// time earlier than a previous one counts as that one.
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
        if self.reset_ns > 0 && !self.reset_done && e >= self.reset_ns {
            self.reset_done = true;
            self.report.resets += 1;
            for s in &mut self.symbols {
                s.last_seq = 0;
            }
            for seq in self.report.last_sequence.iter_mut() {
                seq.1 = 0;
            }
            self.control_round(Control::Snapshot, now, false, out);
        }
        if self.snapshot_ns > 0 && e >= self.next_snapshot {
            self.next_snapshot = next_due(self.next_snapshot, self.snapshot_ns, e);
            self.control_round(Control::Snapshot, now, false, out);
        }
        let due = self.pacing.due(e, self.report.quotes);
        while self.report.quotes < due {
            let n = (due - self.report.quotes).min(self.batch as u64) as usize;
            self.quote_datagram(n, now, out);
        }
        if self.heartbeat_ns > 0 && e >= self.next_heartbeat {
            self.next_heartbeat = next_due(self.next_heartbeat, self.heartbeat_ns, e);
            self.control_round(Control::Heartbeat, now, false, out);
        }
    }

    /// Ends the session at local time `now_ns`: sends any held-back
    /// datagram, then (heartbeats on) a closing Heartbeat per symbol on every
    /// line that is up. Later polls send nothing.
    pub fn finish(&mut self, now_ns: u64, out: &mut Vec<Outgoing>) {
        if self.finished {
            return;
        }
        let now = self.advance(now_ns);
        if !self.opened {
            self.open(now, out);
        }
        flush_held(&mut self.lines, &mut self.report.lines, out);
        if self.heartbeat_ns > 0 {
            self.control_round(Control::Heartbeat, now, true, out);
        }
        self.report.last_quote_lost_on_both_lines = self
            .symbols
            .iter()
            .zip(&self.report.last_sequence)
            .filter(|(s, _)| s.last_lost)
            .map(|(_, (name, _))| name.clone())
            .collect();
        self.finished = true;
    }

    fn advance(&mut self, now_ns: u64) -> u64 {
        let now = now_ns.max(self.last_now);
        self.last_now = now;
        self.start.get_or_insert(now);
        now
    }

    /// The opening round: a Snapshot per symbol on a delta feed, a Heartbeat
    /// per symbol on a full feed with heartbeats on.
    fn open(&mut self, now: u64, out: &mut Vec<Outgoing>) {
        self.opened = true;
        match self.kind {
            SimKind::Delta => self.control_round(Control::Snapshot, now, true, out),
            SimKind::Full if self.heartbeat_ns > 0 => {
                self.control_round(Control::Heartbeat, now, true, out)
            }
            SimKind::Full => {}
        }
    }

    /// The provider's clock at local time `now`.
    fn provider_time(&self, now: u64) -> u64 {
        (now as i128 + self.skew_ns as i128).clamp(0, u64::MAX as i128) as u64
    }

    fn quote_datagram(&mut self, n: usize, now: u64, out: &mut Vec<Outgoing>) {
        let pt = self.provider_time(now);
        let mut packet = PacketBuilder::new(pt);
        let first = self.next_symbol;
        for _ in 0..n {
            let i = self.next_symbol;
            self.next_symbol = (i + 1) % self.symbols.len();
            let step = (self.price_rng.unit() * 2.0 - 1.0) * STEP;
            let invalid = self.price_rng.percent(self.invalid);
            let form = self.price_rng.next_u64() % 3;
            let s = &mut self.symbols[i];
            s.last_seq += 1;
            s.mid = (s.mid * (1.0 + step)).max(1e-6);
            let (bid, ask) = s.bid_ask();
            let (bid, ask) = if invalid {
                self.report.invalid_prices += 1;
                match form {
                    0 => (ask, bid), // crossed
                    1 => (0.0, ask),
                    _ => (bid, f64::NAN),
                }
            } else {
                (bid, ask)
            };
            packet.quote(s.symbol, s.last_seq, pt, bid, ask);
            self.report.last_sequence[i].1 = s.last_seq;
            self.report.quotes += 1;
        }
        let delivered = self.emit(packet.finish(), false, out);
        if !delivered {
            self.report.ticks_lost_on_both_lines += n as u64;
        }
        let len = self.symbols.len();
        for k in 0..n {
            self.symbols[(first + k) % len].last_lost = !delivered;
        }
    }

    /// A Heartbeat or a Snapshot for every symbol.
    fn control_round(&mut self, what: Control, now: u64, session: bool, out: &mut Vec<Outgoing>) {
        let pt = self.provider_time(now);
        for start in (0..self.symbols.len()).step_by(CONTROL_PER_DATAGRAM) {
            let end = (start + CONTROL_PER_DATAGRAM).min(self.symbols.len());
            let mut packet = PacketBuilder::new(pt);
            for s in &self.symbols[start..end] {
                match what {
                    Control::Heartbeat => {
                        packet.heartbeat(s.symbol, s.last_seq + 1);
                        self.report.heartbeats += 1;
                    }
                    Control::Snapshot => {
                        let (bid, ask) = s.bid_ask();
                        packet.snapshot(s.symbol, s.last_seq, pt, bid, ask);
                        self.report.snapshots += 1;
                    }
                }
            }
            self.emit(packet.finish(), session, out);
        }
    }

    /// Offers a datagram to every line, applying the line effects unless it
    /// is a session message. True when at least one line sends it (now or
    /// once held back).
    fn emit(&mut self, payload: Vec<u8>, session: bool, out: &mut Vec<Outgoing>) -> bool {
        self.report.datagrams += 1;
        offer(
            &mut self.lines,
            &mut self.report.lines,
            (self.duplicate, self.reorder),
            payload,
            session,
            out,
        )
    }
}

/// Runs `tickguard simulate`: publishes until `--count` quotes,
/// `--duration-s` seconds, or SIGINT/SIGTERM (Ctrl-C), sends the closing
/// round, then prints the report as one JSON line when `--report` and exits
/// 0. A signal while the report waits on a stdout nobody reads ends it
/// without the report (an error); otherwise only SIGKILL does.
pub fn run(args: &Params) -> Result<()> {
    let stop = crate::sys::shutdown_on_signals().context("simulate: installing signal handlers")?;
    let report = publish(args, stop)?;
    if args.report {
        print_report(&report, stop)?;
    }
    Ok(())
}

/// Publishes as `tickguard simulate` does until `--count`, `--duration-s`
/// or `stop` is set, sends the closing round, and returns the report.
pub fn publish(args: &Params, stop: &std::sync::atomic::AtomicBool) -> Result<SimReport> {
    let mut sim = Simulator::new(args)?;
    let sockets = LineSockets::open(args.line_a, args.line_b, args.source)?;
    let send = |out: &mut Vec<Outgoing>| sockets.send(out);

    let spin = args.rate / args.batch as f64 > SPIN_DATAGRAM_RATE;
    let mut out = Vec::new();
    loop {
        let now = crate::time::now_ns();
        sim.poll(now, &mut out);
        send(&mut out)?;
        if sim.done(now) || stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        if spin {
            std::thread::yield_now();
        } else {
            std::thread::sleep(POLL_SLEEP);
        }
    }
    sim.finish(crate::time::now_ns(), &mut out);
    send(&mut out)?;
    Ok(sim.report().clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::handler::Handler;
    use crate::protocol::sqf::rules::Price;
    use crate::protocol::sqf::{Message, Packet};
    use std::collections::{BTreeMap, BTreeSet};

    /// Local time of the first poll: a realistic epoch in ns.
    const T0: u64 = 1_767_603_600_000_000_000;
    const MS: u64 = NS_PER_MS;
    const LINE_A: &str = "127.0.0.1:39001";
    const LINE_B: &str = "127.0.0.1:39002";

    /// Parameters as `tickguard simulate --line-a LINE_A FLAGS...` gives
    /// them (flags as `--name value` or `--name=value`).
    fn args(flags: &[&str]) -> Params {
        let mut p = Params {
            line_a: LINE_A.parse().unwrap(),
            ..Params::default()
        };
        let mut it = flags.iter();
        while let Some(flag) = it.next() {
            let (name, value) = match flag.split_once('=') {
                Some((n, v)) => (n, v),
                None => (*flag, *it.next().expect("a value")),
            };
            let f = |v: &str| v.parse::<f64>().unwrap();
            let u = |v: &str| v.parse::<u64>().unwrap();
            match name {
                "--line-b" => p.line_b = Some(value.parse().unwrap()),
                "--symbols" => p.symbols = value.parse().unwrap(),
                "--names" => p.names = value.split(',').map(String::from).collect(),
                "--rate" => p.rate = f(value),
                "--batch" => p.batch = value.parse().unwrap(),
                "--kind" if value == "delta" => p.kind = SimKind::Delta,
                "--kind" if value == "full" => p.kind = SimKind::Full,
                "--loss-a" => p.loss_a = f(value),
                "--loss-b" => p.loss_b = f(value),
                "--duplicate" => p.duplicate = f(value),
                "--reorder" => p.reorder = f(value),
                "--invalid" => p.invalid = f(value),
                "--heartbeat-ms" => p.heartbeat_ms = u(value),
                "--snapshot-ms" => p.snapshot_ms = u(value),
                "--pause-every-s" => p.pause_every_s = u(value),
                "--pause-ms" => p.pause_ms = u(value),
                "--reset-after-s" => p.reset_after_s = u(value),
                "--clock-skew-ms" => p.clock_skew_ms = value.parse().unwrap(),
                "--count" => p.count = u(value),
                "--seed" => p.seed = u(value),
                other => panic!("flag {other} not handled here"),
            }
        }
        p
    }

    fn sim(flags: &[&str]) -> Simulator {
        Simulator::new(&args(flags)).unwrap()
    }

    /// A datagram and the local time it was emitted at.
    #[derive(Debug, Clone, PartialEq)]
    struct Sent {
        t: u64,
        line: usize,
        payload: Vec<u8>,
    }

    /// Polls every `step` from T0 until `done` or `until` (elapsed), then finishes.
    fn drive(sim: &mut Simulator, step: u64, until: u64) -> Vec<Sent> {
        let mut sent = Vec::new();
        let mut out = Vec::new();
        let mut t = T0;
        loop {
            sim.poll(t, &mut out);
            sent.extend(out.drain(..).map(|o| Sent {
                t,
                line: o.line,
                payload: o.payload,
            }));
            if sim.done(t) || t - T0 >= until {
                break;
            }
            t += step;
        }
        sim.finish(t, &mut out);
        sent.extend(out.drain(..).map(|o| Sent {
            t,
            line: o.line,
            payload: o.payload,
        }));
        sent
    }

    /// A decoded message, owned.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Msg {
        Quote(Symbol, u64, u64, Price),
        Snapshot(Symbol, u64, Price),
        Heartbeat(Symbol, u64),
    }

    fn decode(payload: &[u8]) -> (u64, Vec<Msg>) {
        let p = Packet::new_checked(payload).expect("the simulator sends valid packets");
        let msgs = p
            .messages()
            .map(|m| match m {
                Message::Quote(q) => Msg::Quote(
                    q.symbol(),
                    q.sequence(),
                    q.source_time(),
                    Price {
                        bid: q.bid(),
                        ask: q.ask(),
                        source_time: q.source_time(),
                    },
                ),
                Message::Snapshot(s) => Msg::Snapshot(
                    s.symbol(),
                    s.sequence(),
                    Price {
                        bid: s.bid(),
                        ask: s.ask(),
                        source_time: s.source_time(),
                    },
                ),
                Message::Heartbeat(h) => Msg::Heartbeat(h.symbol(), h.next_expected()),
                Message::Unknown { code } => panic!("unknown type {code}"),
            })
            .collect();
        (p.send_time(), msgs)
    }

    fn quotes_on(sent: &[Sent], line: usize) -> Vec<(Symbol, u64)> {
        sent.iter()
            .filter(|s| s.line == line)
            .flat_map(|s| decode(&s.payload).1)
            .filter_map(|m| match m {
                Msg::Quote(sym, seq, _, _) => Some((sym, seq)),
                _ => None,
            })
            .collect()
    }

    fn handler_config(kind: &str, two_lines: bool) -> Config {
        let lines = if two_lines {
            format!("\"{LINE_A}\", \"{LINE_B}\"")
        } else {
            format!("\"{LINE_A}\"")
        };
        Config::parse(
            &format!(
                r#"
[[feed]]
name = "sim"
kind = "{kind}"
lines = [{lines}]
stale_threshold_ms = 500
source_threshold_ms = 2000
clock_offset = 0
"#
            ),
            "sim.toml",
        )
        .unwrap()
    }

    /// Replays every datagram, both lines, in emitted order, as the handler's only feed.
    fn replay(config: &Config, sent: &[Sent]) -> Handler {
        let mut h = Handler::new(config);
        for s in sent {
            h.on_datagram(0, &s.payload, s.t).unwrap();
        }
        h
    }

    #[test]
    fn same_seed_same_datagrams_other_seed_other_prices() {
        let flags = [
            "--line-b",
            LINE_B,
            "--loss-a",
            "20",
            "--loss-b",
            "20",
            "--duplicate",
            "10",
            "--reorder",
            "10",
            "--invalid",
            "5",
            "--rate",
            "5000",
            "--count",
            "2000",
            "--heartbeat-ms",
            "50",
        ];
        let (mut a, mut b) = (sim(&flags), sim(&flags));
        let (sa, sb) = (drive(&mut a, MS, u64::MAX), drive(&mut b, MS, u64::MAX));
        assert!(!sa.is_empty());
        assert_eq!(sa, sb);
        assert_eq!(a.report(), b.report());

        let mut other = flags.to_vec();
        other.extend(["--seed", "2"]);
        let mut c = sim(&other);
        let sc = drive(&mut c, MS, u64::MAX);
        assert_ne!(sa, sc);
        assert_eq!(c.report().quotes, 2000);
    }

    #[test]
    fn sequences_contiguous_per_symbol_without_loss() {
        let mut s = sim(&[
            "--symbols",
            "7",
            "--rate",
            "3000",
            "--batch",
            "5",
            "--count",
            "1000",
        ]);
        let sent = drive(&mut s, 3 * MS, u64::MAX);
        let r = s.report().clone();
        assert_eq!(r.quotes, 1000);
        let mut per: BTreeMap<Symbol, Vec<u64>> = BTreeMap::new();
        let mut max_in_datagram = 0;
        for d in &sent {
            let (_, msgs) = decode(&d.payload);
            let q = msgs.iter().filter(|m| matches!(m, Msg::Quote(..))).count();
            max_in_datagram = max_in_datagram.max(q);
            for m in msgs {
                if let Msg::Quote(sym, seq, _, price) = m {
                    assert!(price.is_valid() && price.bid < price.ask, "{price:?}");
                    per.entry(sym).or_default().push(seq);
                }
            }
        }
        assert_eq!(max_in_datagram, 5);
        assert_eq!(per.len(), 7);
        for (name, last) in &r.last_sequence {
            let seqs = &per[&Symbol::parse(name).unwrap()];
            assert_eq!(*seqs, (1..=*last).collect::<Vec<_>>(), "{name}");
        }
        let total: u64 = r.last_sequence.iter().map(|(_, l)| l).sum();
        assert_eq!(total, 1000);
        assert_eq!(r.lines[0].datagrams_sent, sent.len() as u64);
        assert_eq!(r.datagrams, sent.len() as u64);
        assert_eq!(r.ticks_lost_on_both_lines, 0);
        // Round-robin: 1000 quotes over 7 symbols.
        assert_eq!(r.last_sequence[0], ("SYM00000".to_string(), 143));
        assert_eq!(r.last_sequence[6], ("SYM00006".to_string(), 142));
    }

    #[test]
    fn quotes_due_follow_elapsed_time_and_rate() {
        let mut s = sim(&["--rate", "1000", "--heartbeat-ms", "0"]);
        let mut out = Vec::new();
        s.poll(T0, &mut out);
        assert!(
            out.is_empty(),
            "nothing is due at start of a full feed without heartbeats"
        );
        s.poll(T0 + 10 * MS, &mut out);
        assert_eq!(s.report().quotes, 10);
        assert_eq!(out.len(), 2, "10 quotes, 8 to a datagram");
        s.poll(T0 + 10 * MS + 999_999, &mut out);
        assert_eq!(s.report().quotes, 10);
        s.poll(T0 + 1000 * MS, &mut out);
        assert_eq!(s.report().quotes, 1000);
        // A clock stepping back changes nothing.
        s.poll(T0, &mut out);
        assert_eq!(s.report().quotes, 1000);
    }

    #[test]
    fn line_a_down_line_b_delivers_everything() {
        let mut s = sim(&[
            "--line-b",
            LINE_B,
            "--loss-a",
            "100",
            "--symbols",
            "3",
            "--rate",
            "2000",
            "--count",
            "900",
            "--heartbeat-ms",
            "100",
        ]);
        let sent = drive(&mut s, MS, u64::MAX);
        let r = s.report();
        assert!(
            sent.iter().all(|d| d.line == 1),
            "line A at 100 % carries nothing"
        );
        assert_eq!(r.lines[0].datagrams_sent, 0);
        assert_eq!(r.lines[0].dropped, r.datagrams);
        assert_eq!(r.lines[1].datagrams_sent, r.datagrams);
        assert_eq!(r.lines[1].dropped, 0);
        let b = quotes_on(&sent, 1);
        assert_eq!(b.len(), 900);
        assert_eq!(r.ticks_lost_on_both_lines, 0);
        let h = replay(&handler_config("full", true), &sent);
        let c = &h.feeds()[0].counters;
        assert_eq!((c.quotes, c.ticks_lost, c.duplicates), (900, 0, 0));
    }

    /// With heartbeats on and no reordering, snapshots or reset, every quote
    /// lost on both lines is followed on its symbol by a later quote or the
    /// closing heartbeat, and preceded by the opening round: the handler's
    /// count is exact, mid-stream heartbeats (themselves lossy) included.
    #[test]
    fn lost_on_both_lines_equals_handler_ticks_lost() {
        for (kind, heartbeat_ms, seed) in [
            ("full", "10", "7"),
            ("full", "60000", "8"),
            ("delta", "10", "9"),
            ("delta", "60000", "10"),
        ] {
            let mut s = sim(&[
                "--line-b",
                LINE_B,
                "--kind",
                kind,
                "--loss-a",
                "35",
                "--loss-b",
                "35",
                "--duplicate",
                "5",
                "--symbols",
                "5",
                "--rate",
                "10000",
                "--batch",
                "3",
                "--count",
                "4000",
                "--heartbeat-ms",
                heartbeat_ms,
                "--seed",
                seed,
            ]);
            let sent = drive(&mut s, MS, u64::MAX);
            let r = s.report();
            assert!(
                r.ticks_lost_on_both_lines > 100,
                "{kind} {heartbeat_ms}: {r:?}"
            );
            let h = replay(&handler_config(kind, true), &sent);
            let c = &h.feeds()[0].counters;
            assert_eq!(c.rejected, 0);
            assert_eq!(
                c.ticks_lost, r.ticks_lost_on_both_lines,
                "{kind} heartbeat {heartbeat_ms} ms"
            );
            // And the count is right: quotes minus distinct quotes delivered.
            let delivered: BTreeSet<_> = quotes_on(&sent, 0)
                .into_iter()
                .chain(quotes_on(&sent, 1))
                .collect();
            assert_eq!(
                r.quotes - delivered.len() as u64,
                r.ticks_lost_on_both_lines
            );
            let mut lost_last = 0;
            for rec in h.records() {
                let sym = rec.symbol.unwrap();
                let name = sym.to_string();
                let last = r.last_sequence.iter().find(|(n, _)| *n == name).unwrap().1;
                assert_eq!(rec.state.seq.last_seq, last, "{name}");
                // Its last quote carried by no line: so the report says.
                let lost = !delivered.contains(&(sym, last));
                let listed = r.last_quote_lost_on_both_lines.contains(&name);
                assert_eq!(listed, lost, "{kind} {heartbeat_ms}: {name}");
                lost_last += u64::from(lost);
            }
            assert_eq!(r.last_quote_lost_on_both_lines.len() as u64, lost_last);
        }
    }

    /// Without heartbeats a receiver only sees losses between a symbol's
    /// first and last delivered quote; the report counts all of them.
    #[test]
    fn without_heartbeats_the_report_still_counts_every_loss() {
        let mut s = sim(&[
            "--line-b",
            LINE_B,
            "--loss-a",
            "50",
            "--loss-b",
            "50",
            "--symbols",
            "4",
            "--batch",
            "1",
            "--rate",
            "10000",
            "--count",
            "3000",
            "--heartbeat-ms",
            "0",
        ]);
        let sent = drive(&mut s, MS, u64::MAX);
        let r = s.report();
        assert_eq!(r.heartbeats, 0);
        let mut delivered: BTreeMap<Symbol, BTreeSet<u64>> = BTreeMap::new();
        for (sym, seq) in quotes_on(&sent, 0).into_iter().chain(quotes_on(&sent, 1)) {
            delivered.entry(sym).or_default().insert(seq);
        }
        let n: u64 = delivered.values().map(|s| s.len() as u64).sum();
        assert_eq!(r.ticks_lost_on_both_lines, r.quotes - n);
        let visible: u64 = delivered
            .values()
            .map(|s| s.last().unwrap() - s.first().unwrap() + 1 - s.len() as u64)
            .sum();
        let h = replay(&handler_config("full", true), &sent);
        assert_eq!(h.feeds()[0].counters.ticks_lost, visible);
        assert!(visible <= r.ticks_lost_on_both_lines);
    }

    #[test]
    fn heartbeats_carry_next_expected() {
        let mut s = sim(&[
            "--symbols",
            "3",
            "--rate",
            "900",
            "--heartbeat-ms",
            "20",
            "--count",
            "600",
        ]);
        let sent = drive(&mut s, MS, u64::MAX);
        let mut last: BTreeMap<Symbol, u64> = BTreeMap::new();
        let mut beats = 0;
        let mut beat_times = BTreeSet::new();
        for d in &sent {
            for m in decode(&d.payload).1 {
                match m {
                    Msg::Quote(sym, seq, ..) => {
                        last.insert(sym, seq);
                    }
                    Msg::Heartbeat(sym, next) => {
                        beats += 1;
                        beat_times.insert(d.t);
                        assert_eq!(next, last.get(&sym).copied().unwrap_or(0) + 1);
                    }
                    m => panic!("{m:?}"),
                }
            }
        }
        assert_eq!(beats, s.report().heartbeats);
        // 600 quotes at 900/s: 666 ms, rounds at 0 (opening), every 20 ms, and the closing one.
        let rounds = beat_times.len() as u64;
        assert!((34..=36).contains(&rounds), "{rounds}");
        assert_eq!(beats, 3 * rounds);
    }

    #[test]
    fn delta_snapshots_at_start_and_periodically() {
        let mut s = sim(&[
            "--kind",
            "delta",
            "--symbols",
            "30",
            "--rate",
            "3000",
            "--snapshot-ms",
            "100",
            "--heartbeat-ms",
            "0",
            "--count",
            "1000",
        ]);
        let mut out = Vec::new();
        s.poll(T0, &mut out);
        assert_eq!(out.len(), 2, "30 snapshots, 25 to a datagram");
        let first: Vec<Msg> = out.iter().flat_map(|o| decode(&o.payload).1).collect();
        assert_eq!(first.len(), 30);
        for m in &first {
            let Msg::Snapshot(_, 0, p) = m else {
                panic!("{m:?}")
            };
            assert!(p.is_valid());
        }
        out.clear();
        let sent = drive(&mut s, MS, u64::MAX);
        let mut last: BTreeMap<Symbol, u64> = BTreeMap::new();
        let mut snaps = 0;
        for d in &sent {
            for m in decode(&d.payload).1 {
                match m {
                    Msg::Quote(sym, seq, ..) => {
                        assert_eq!(seq, last.get(&sym).copied().unwrap_or(0) + 1);
                        last.insert(sym, seq);
                    }
                    Msg::Snapshot(sym, seq, p) => {
                        snaps += 1;
                        assert!(p.is_valid());
                        assert_eq!(seq, last.get(&sym).copied().unwrap_or(0));
                    }
                    m => panic!("{m:?}"),
                }
            }
        }
        // 1000 quotes at 3000/s: 333 ms; rounds at 100, 200, 300 ms.
        assert_eq!(snaps, 90);
        assert_eq!(s.report().snapshots, 120);
    }

    #[test]
    fn provider_reset_sends_snapshot_zero_and_restarts_at_one() {
        let mut s = sim(&[
            "--symbols",
            "2",
            "--rate",
            "100",
            "--reset-after-s",
            "1",
            "--heartbeat-ms",
            "0",
        ]);
        let sent = drive(&mut s, 10 * MS, 2000 * MS);
        let r = s.report();
        assert_eq!(r.resets, 1);
        assert_eq!(r.snapshots, 2);
        let msgs: Vec<(u64, Msg)> = sent
            .iter()
            .flat_map(|d| decode(&d.payload).1.into_iter().map(move |m| (d.t, m)))
            .collect();
        let at = msgs
            .iter()
            .position(|(_, m)| matches!(m, Msg::Snapshot(..)))
            .unwrap();
        assert_eq!(msgs[at].0, T0 + 1000 * MS);
        let before: Vec<u64> = msgs[..at]
            .iter()
            .filter_map(|(_, m)| match m {
                Msg::Quote(_, seq, ..) => Some(*seq),
                _ => None,
            })
            .collect();
        // The quote due at the reset instant is the first of the new session.
        assert_eq!(before.len(), 99);
        assert_eq!(*before.last().unwrap(), 50);
        for (_, m) in &msgs[at..at + 2] {
            assert!(matches!(m, Msg::Snapshot(_, 0, _)), "{m:?}");
        }
        let after: Vec<(Symbol, u64)> = msgs[at + 2..]
            .iter()
            .filter_map(|(_, m)| match m {
                Msg::Quote(sym, seq, ..) => Some((*sym, *seq)),
                _ => None,
            })
            .collect();
        assert_eq!(after.len(), 101);
        assert_eq!(after[0].1, 1);
        assert_eq!(after[1].1, 1);
        assert_eq!(r.last_sequence[0].1, 50);
        assert_eq!(r.last_sequence[1].1, 51);
        // The handler follows the reset: no duplicates, no loss.
        let h = replay(&handler_config("full", false), &sent);
        let c = &h.feeds()[0].counters;
        assert_eq!((c.duplicates, c.ticks_lost, c.snapshots), (0, 0, 2));
    }

    #[test]
    fn pauses_send_nothing_and_owe_nothing() {
        let mut s = sim(&[
            "--rate",
            "1000",
            "--pause-every-s",
            "1",
            "--pause-ms",
            "400",
            "--heartbeat-ms",
            "50",
            "--snapshot-ms",
            "70",
        ]);
        let sent = drive(&mut s, MS, 2900 * MS);
        let times: BTreeSet<u64> = sent.iter().map(|d| d.t - T0).collect();
        for e in &times {
            let in_pause = (1000 * MS..1400 * MS).contains(e) || (2000 * MS..2400 * MS).contains(e);
            assert!(!in_pause, "sent at {e} ns, in a pause");
        }
        assert!(times.contains(&(999 * MS)) && times.contains(&(1400 * MS)));
        // Active time at 2900 ms: 2900 - 2 × 400 = 2100 ms, 1000 quotes/s.
        assert_eq!(s.report().quotes, 2100);
        // Right after a pause the provider resumes with everything due.
        let resumed: Vec<Msg> = sent
            .iter()
            .filter(|d| d.t == T0 + 1400 * MS)
            .flat_map(|d| decode(&d.payload).1)
            .collect();
        assert!(resumed.iter().any(|m| matches!(m, Msg::Quote(_, _, _, _))));
        assert!(resumed.iter().any(|m| matches!(m, Msg::Heartbeat(..))));
        assert!(resumed.iter().any(|m| matches!(m, Msg::Snapshot(..))));
    }

    #[test]
    fn clock_skew_moves_send_and_source_time() {
        let mut s = sim(&[
            "--clock-skew-ms",
            "-1500",
            "--rate",
            "1000",
            "--count",
            "20",
        ]);
        let sent = drive(&mut s, MS, u64::MAX);
        let mut quotes = 0;
        for d in &sent {
            let (send_time, msgs) = decode(&d.payload);
            assert_eq!(send_time, d.t - 1_500 * MS);
            for m in msgs {
                if let Msg::Quote(_, _, source_time, _) = m {
                    assert_eq!(source_time, d.t - 1_500 * MS);
                    quotes += 1;
                }
            }
        }
        assert!(quotes > 0, "no quote sent");
    }

    #[test]
    fn invalid_prices_at_the_given_percent() {
        let mut s = sim(&["--invalid", "100", "--count", "300", "--rate", "10000"]);
        let sent = drive(&mut s, MS, u64::MAX);
        let mut kinds = BTreeSet::new();
        for d in &sent {
            for m in decode(&d.payload).1 {
                if let Msg::Quote(_, _, _, p) = m {
                    assert!(!p.is_valid(), "{p:?}");
                    kinds.insert(if p.ask.is_nan() {
                        "nan"
                    } else if p.bid == 0.0 {
                        "zero"
                    } else {
                        "crossed"
                    });
                }
            }
        }
        assert_eq!(kinds.len(), 3);
        assert_eq!(s.report().invalid_prices, 300);

        let mut s = sim(&["--invalid", "10", "--count", "5000", "--rate", "100000"]);
        drive(&mut s, MS, u64::MAX);
        let n = s.report().invalid_prices;
        assert!((350..650).contains(&n), "{n}");
    }

    #[test]
    fn duplicates_and_reordering_on_a_line() {
        let mut s = sim(&[
            "--duplicate",
            "100",
            "--rate",
            "1000",
            "--count",
            "80",
            "--batch",
            "1",
            "--heartbeat-ms",
            "0",
        ]);
        let sent = drive(&mut s, MS, u64::MAX);
        assert_eq!(sent.len(), 160);
        for pair in sent.chunks(2) {
            assert_eq!(pair[0].payload, pair[1].payload);
        }
        let r = s.report();
        assert_eq!(
            (r.lines[0].duplicated, r.lines[0].datagrams_sent),
            (80, 160)
        );

        let mut s = sim(&[
            "--reorder",
            "30",
            "--symbols",
            "1",
            "--rate",
            "1000",
            "--count",
            "500",
            "--batch",
            "1",
            "--heartbeat-ms",
            "0",
        ]);
        let sent = drive(&mut s, MS, u64::MAX);
        let seqs: Vec<u64> = quotes_on(&sent, 0).into_iter().map(|(_, q)| q).collect();
        let r = s.report();
        assert_eq!(seqs.len(), 500, "reordering loses nothing");
        assert_eq!(r.lines[0].datagrams_sent, 500);
        let mut sorted = seqs.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (1..=500).collect::<Vec<_>>());
        let swaps = seqs.windows(2).filter(|w| w[0] > w[1]).count() as u64;
        // A datagram still held at the end is sent last, in order.
        assert!(r.lines[0].reordered - swaps <= 1, "{swaps} {r:?}");
        assert!((80..=160).contains(&swaps), "{swaps}");
        // Each held datagram comes right after the next one.
        for w in seqs.windows(2).filter(|w| w[0] > w[1]) {
            assert_eq!(w[0], w[1] + 1);
        }
    }

    #[test]
    fn every_datagram_decodes_and_fits_limits() {
        let mut s = sim(&[
            "--line-b",
            LINE_B,
            "--kind",
            "delta",
            "--symbols",
            "60",
            "--batch",
            "100",
            "--rate",
            "50000",
            "--count",
            "20000",
            "--snapshot-ms",
            "50",
            "--heartbeat-ms",
            "30",
            "--invalid",
            "3",
            "--loss-a",
            "5",
            "--reorder",
            "5",
            "--duplicate",
            "5",
        ]);
        let sent = drive(&mut s, 2 * MS, u64::MAX);
        let r = s.report();
        let (mut q, mut hb, mut sn) = (0, 0, 0);
        for d in &sent {
            assert!(d.payload.len() <= 16 + 100 * 48);
            let (_, msgs) = decode(&d.payload);
            assert!(!msgs.is_empty());
            if d.line == 1 {
                for m in msgs {
                    match m {
                        Msg::Quote(..) => q += 1,
                        Msg::Heartbeat(..) => hb += 1,
                        Msg::Snapshot(..) => sn += 1,
                    }
                }
            }
        }
        // Line B has no loss: it carries each message once, or twice when duplicated.
        assert!(q >= r.quotes && hb >= r.heartbeats && sn >= r.snapshots);
        let per_line: u64 = r.lines.iter().map(|l| l.datagrams_sent).sum();
        assert_eq!(per_line, sent.len() as u64);
        for l in &r.lines {
            assert_eq!(l.datagrams_sent, r.datagrams - l.dropped + l.duplicated);
        }
    }

    #[test]
    fn report_serializes_as_one_json_object() {
        let mut s = sim(&["--names", "EURUSD,XAUUSD", "--count", "3", "--rate", "1000"]);
        drive(&mut s, MS, u64::MAX);
        let v: serde_json::Value = serde_json::to_value(s.report()).unwrap();
        assert_eq!(v["quotes"], 3);
        assert_eq!(v["last_sequence"]["EURUSD"], 2);
        assert_eq!(v["last_sequence"]["XAUUSD"], 1);
        assert_eq!(v["lines"][0]["line"], "A");
        assert_eq!(v["lines"][0]["destination"], LINE_A);
        assert_eq!(v["ticks_lost_on_both_lines"], 0);
        assert_eq!(v["heartbeats"], 4, "opening and closing rounds");
    }

    #[test]
    fn bad_arguments_are_one_clear_error() {
        let cases: &[(&[&str], &str)] = &[
            (&["--symbols", "0"], "at least 1"),
            (&["--names", "EUR USD"], "not a valid SQF symbol"),
            (&["--names", "TOOLONGNAME"], "not a valid SQF symbol"),
            (&["--names", "A,A"], "twice"),
            (&["--loss-a", "101"], "--loss-a"),
            (&["--loss-b=-1"], "--loss-b"),
            (&["--duplicate", "NaN"], "--duplicate"),
            (&["--reorder", "200"], "--reorder"),
            (&["--invalid", "100.5"], "--invalid"),
            (&["--rate", "0"], "--rate"),
            (&["--rate", "inf"], "--rate"),
            (&["--batch", "0"], "--batch"),
            (&["--batch", "101"], "--batch"),
            (&["--symbols", "100001"], "too many"),
            (
                &["--pause-every-s", "1", "--pause-ms", "1000"],
                "--pause-ms",
            ),
            (&["--line-b", LINE_A], "same destination"),
            (&["--heartbeat-ms", "60001"], "--heartbeat-ms"),
            (&["--snapshot-ms", "3600001"], "--snapshot-ms"),
            (&["--reset-after-s", "86401"], "--reset-after-s"),
            (&["--clock-skew-ms", "86400001"], "--clock-skew-ms"),
            (&["--clock-skew-ms=-86400001"], "--clock-skew-ms"),
            (&["--pause-every-s", "86401"], "--pause-every-s"),
            (
                &["--pause-every-s", "0", "--pause-ms", "86400001"],
                "--pause-ms",
            ),
        ];
        for (flags, needle) in cases {
            let err = Simulator::new(&args(flags)).unwrap_err().to_string();
            assert!(err.contains(needle), "{flags:?}: {err}");
            assert!(!err.contains('\n'));
        }
        assert!(Simulator::new(&args(&["--symbols", "100000"])).is_ok());
        let most = [
            "--heartbeat-ms=60000",
            "--snapshot-ms=3600000",
            "--reset-after-s=86400",
            "--clock-skew-ms=-86400000",
            "--pause-every-s=86400",
            "--pause-ms=86399999",
        ];
        assert!(Simulator::new(&args(&most)).is_ok());
        assert!(Simulator::new(&args(&["--loss-a", "100", "--invalid", "0"])).is_ok());
    }

    #[test]
    fn finish_flushes_and_stops() {
        let mut s = sim(&[
            "--reorder",
            "100",
            "--rate",
            "1000",
            "--batch",
            "1",
            "--heartbeat-ms",
            "0",
        ]);
        let mut out = Vec::new();
        s.poll(T0, &mut out);
        s.poll(T0 + MS, &mut out);
        assert!(out.is_empty(), "the only datagram is held back");
        assert_eq!(s.report().lines[0].reordered, 1);
        s.finish(T0 + MS, &mut out);
        assert_eq!(out.len(), 1);
        assert!(s.done(T0 + MS));
        s.poll(T0 + 100 * MS, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(s.report().quotes, 1);
    }

    #[test]
    fn splitmix_is_the_reference_sequence() {
        // splitmix64 with state 0: first outputs of the reference implementation.
        let mut g = SplitMix64(0);
        assert_eq!(g.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(g.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        let mut g = SplitMix64::new(1, 0);
        for _ in 0..1000 {
            let u = g.unit();
            assert!((0.0..1.0).contains(&u));
        }
        assert!(g.percent(100.0));
        assert!(!g.percent(0.0));
    }
}
