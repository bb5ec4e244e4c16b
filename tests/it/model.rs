//! Model-based tests: an independent model of sections 2–5 of the SQF v1
//! specification, written from the spec text only, run side by
//! side with the real `Handler` on random packet sequences.
//!
//! The model decodes the datagram bytes itself (its own packet-validity check),
//! keeps a `HashMap<symbol, ModelState>` per feed, recomputes the clock offset as
//! a brute-force minimum over every accepted packet (as section 4 says:
//! one of duplicates only, an empty one or one of unknown types is a
//! sample too), and evaluates the verdict
//! with `i128` arithmetic. After every step the test demands identical
//! accept/reject decisions, offsets, verdict reason lists (on a grid of `now`
//! values plus both threshold boundaries ± 1 ns), per-symbol states and
//! per-feed counters.
//!
//! Three disagreements this model found are pinned by regression tests at
//! the end: `feed_ticks_lost_overflow_must_not_panic`,
//! `offset_beyond_i64_must_not_read_fresh` and
//! `offset_window_minimum_expires_after_many_rising_samples`.

use proptest::prelude::*;
use proptest::sample::Index;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use tickguard::config::Config;
use tickguard::handler::Handler;
use tickguard::protocol::sqf::PacketBuilder;
use tickguard::symbol::Symbol;

const MS: u64 = 1_000_000;
/// Local arrival time of the first step: a realistic epoch in ns.
const T0: u64 = 1_700_000_000_000_000_000;
/// The symbols the generator uses (corruption may invent others).
const SYMS: [&str; 4] = ["A", "BB", "C", "EURUSD~!"];
/// The symbol with per-symbol threshold overrides on feed 0.
const OVERRIDDEN: &str = "C";
/// True (local − provider) clock difference of each feed's provider, ns.
const TRUE_OFFSET: [i64; 2] = [7_000_000, -3_000_000];
/// Interesting absolute sequence numbers.
const SPECIALS: [u64; 7] = [0, 1, 2, u64::MAX, u64::MAX - 1, u64::MAX - 2, 1 << 63];

// ---------------------------------------------------------------------------
// The model (spec sections 2–5)
// ---------------------------------------------------------------------------

/// Section 3: state per (feed, symbol).
#[derive(Clone, Debug, Default, PartialEq)]
struct ModelState {
    baseline: bool,
    last_seq: u64,
    suspect: bool,
    invalid: bool,
    /// Last valid price: (bid, ask, source_time).
    price: Option<(f64, f64, u64)>,
    /// Local arrival time of the last message proving liveness (0 until then).
    last_alive: u64,
    ticks_lost: u64,
    duplicates: u64,
}

/// A decoded message (section 2).
#[derive(Clone, Debug, PartialEq)]
enum Msg {
    Quote {
        sym: String,
        seq: u64,
        source_time: u64,
        bid: f64,
        ask: f64,
    },
    Snapshot {
        sym: String,
        seq: u64,
        source_time: u64,
        bid: f64,
        ask: f64,
    },
    Heartbeat {
        sym: String,
        next_expected: u64,
    },
    Unknown {
        code: u8,
    },
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct ModelCounters {
    packets: u64,
    rejected: u64,
    messages: u64,
    quotes: u64,
    snapshots: u64,
    heartbeats: u64,
    unknown: u64,
    duplicates: u64,
    ticks_lost: u64,
}

#[derive(Clone, Debug)]
struct ModelFeed {
    full: bool,
    /// `Some(W)` for `auto`, `None` for fixed.
    window: Option<u64>,
    stale_ns: u64,
    source_ns: u64,
    overrides: HashMap<String, (u64, u64)>,
    symbols: HashMap<String, ModelState>,
    counters: ModelCounters,
    /// (arrival, send_time) of every accepted packet.
    accepted: Vec<(u64, u64)>,
    /// Current offset (local − provider), exact.
    offset: i128,
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Section 2 symbol rule: printable ASCII (0x21..=0x7E) right-padded with
/// spaces, at least one non-space, no space before a non-space byte.
fn model_symbol(b: &[u8]) -> Option<String> {
    let n = b.iter().position(|&c| c == b' ').unwrap_or(b.len());
    if n == 0 {
        return None;
    }
    if !b[..n].iter().all(|c| (0x21..=0x7e).contains(c)) {
        return None;
    }
    if !b[n..].iter().all(|&c| c == b' ') {
        return None;
    }
    Some(String::from_utf8(b[..n].to_vec()).expect("ascii"))
}

/// Section 2 "packet validity": `None` when the packet is rejected whole,
/// else its send_time and messages.
fn model_decode(d: &[u8]) -> Option<(u64, Vec<Msg>)> {
    if d.len() < 16 {
        return None;
    }
    if d[0] != 0x53 || d[1] != 0x51 || d[2] != 1 {
        return None;
    }
    let count = le16(d, 4);
    let send_time = le64(d, 8);
    let mut pos = 16usize;
    let mut msgs = Vec::new();
    for _ in 0..count {
        if d.len() - pos < 4 {
            return None; // message header runs past the end
        }
        let len = le16(d, pos) as usize;
        if len < 4 || pos + len > d.len() {
            return None;
        }
        let m = &d[pos..pos + len];
        let msg = match m[2] {
            b'Q' | b'S' => {
                if len < 48 {
                    return None;
                }
                let sym = model_symbol(&m[4..12])?;
                let (seq, source_time) = (le64(m, 16), le64(m, 24));
                let bid = f64::from_bits(le64(m, 32));
                let ask = f64::from_bits(le64(m, 40));
                if m[2] == b'Q' {
                    Msg::Quote {
                        sym,
                        seq,
                        source_time,
                        bid,
                        ask,
                    }
                } else {
                    Msg::Snapshot {
                        sym,
                        seq,
                        source_time,
                        bid,
                        ask,
                    }
                }
            }
            b'H' => {
                if len < 24 {
                    return None;
                }
                Msg::Heartbeat {
                    sym: model_symbol(&m[4..12])?,
                    next_expected: le64(m, 16),
                }
            }
            code => Msg::Unknown { code },
        };
        msgs.push(msg);
        pos += len;
    }
    if pos != d.len() {
        return None; // bytes remain after message_count messages
    }
    Some((send_time, msgs))
}

/// Section 3: finite, > 0, bid ≤ ask.
fn valid_price(bid: f64, ask: f64) -> bool {
    bid.is_finite() && ask.is_finite() && bid > 0.0 && ask > 0.0 && bid <= ask
}

/// Quote step 6 / Snapshot price rule.
fn price_rule(st: &mut ModelState, bid: f64, ask: f64, source_time: u64) {
    if valid_price(bid, ask) {
        st.price = Some((bid, ask, source_time));
        st.invalid = false;
    } else {
        st.invalid = true;
    }
}

impl ModelFeed {
    fn new(full: bool, window: Option<u64>, fixed: i64, stale_ns: u64, source_ns: u64) -> Self {
        ModelFeed {
            full,
            window,
            stale_ns,
            source_ns,
            overrides: HashMap::new(),
            symbols: HashMap::new(),
            counters: ModelCounters::default(),
            accepted: Vec::new(),
            offset: if window.is_some() { 0 } else { fixed as i128 },
        }
    }

    fn thresholds(&self, sym: &str) -> (u64, u64) {
        self.overrides
            .get(sym)
            .copied()
            .unwrap_or((self.stale_ns, self.source_ns))
    }

    /// One datagram routed to this feed; returns whether it was accepted.
    fn on_datagram(&mut self, d: &[u8], t: u64) -> bool {
        self.counters.packets += 1;
        let Some((send_time, msgs)) = model_decode(d) else {
            self.counters.rejected += 1;
            return false;
        };
        self.counters.messages += msgs.len() as u64;
        for m in msgs {
            self.apply(&m, t);
        }
        // Section 4: at every accepted packet, min(a_q − send_time_q) over
        // the accepted packets with a_p − W < a_q ≤ a_p (duplicates, empty
        // packets and unknown types included).
        if let Some(w) = self.window {
            self.accepted.push((t, send_time));
            let a_p = t as i128;
            self.offset = self
                .accepted
                .iter()
                .filter(|&&(a, _)| a_p - (w as i128) < a as i128 && a as i128 <= a_p)
                .map(|&(a, s)| a as i128 - s as i128)
                .min()
                .expect("the current packet is in its own window");
        }
        true
    }

    /// Applies `m`; true when it changed its symbol's state (not a
    /// duplicate Quote, not an unknown type).
    fn apply(&mut self, m: &Msg, t: u64) -> bool {
        let full = self.full;
        let c = &mut self.counters;
        match m {
            Msg::Quote {
                sym,
                seq,
                source_time,
                bid,
                ask,
            } => {
                c.quotes += 1;
                let st = self.symbols.entry(sym.clone()).or_default();
                let seq = *seq;
                // 1.
                if st.baseline && seq <= st.last_seq {
                    st.duplicates = st.duplicates.saturating_add(1);
                    c.duplicates = c.duplicates.saturating_add(1);
                    return false;
                }
                // 2.
                if st.baseline && seq as u128 > st.last_seq as u128 + 1 {
                    let lost = seq - st.last_seq - 1;
                    st.ticks_lost = st.ticks_lost.saturating_add(lost);
                    c.ticks_lost = c.ticks_lost.saturating_add(lost);
                    if !full {
                        st.suspect = true;
                    }
                }
                // 3.
                if !st.baseline {
                    st.baseline = true;
                    if !full {
                        st.suspect = true;
                    }
                }
                // 4.
                if full {
                    st.suspect = false;
                }
                // 5.
                st.last_seq = seq;
                st.last_alive = t;
                // 6.
                price_rule(st, *bid, *ask, *source_time);
            }
            Msg::Heartbeat { sym, next_expected } => {
                c.heartbeats += 1;
                let st = self.symbols.entry(sym.clone()).or_default();
                let ne = *next_expected;
                if !st.baseline {
                    st.baseline = true;
                    st.last_seq = ne.saturating_sub(1);
                    st.suspect = true;
                } else if ne as u128 > st.last_seq as u128 + 1 {
                    let lost = ne - st.last_seq - 1;
                    st.ticks_lost = st.ticks_lost.saturating_add(lost);
                    c.ticks_lost = c.ticks_lost.saturating_add(lost);
                    st.last_seq = ne - 1;
                    st.suspect = true;
                } else {
                    st.last_alive = t;
                }
            }
            Msg::Snapshot {
                sym,
                seq,
                source_time,
                bid,
                ask,
            } => {
                c.snapshots += 1;
                let st = self.symbols.entry(sym.clone()).or_default();
                st.baseline = true;
                st.last_seq = *seq;
                st.suspect = false;
                st.last_alive = t;
                price_rule(st, *bid, *ask, *source_time);
            }
            Msg::Unknown { .. } => {
                c.unknown += 1;
                return false;
            }
        }
        true
    }

    /// Section 5, in report order, strict comparisons, exact arithmetic.
    fn verdict(&self, sym: &str, now: u64) -> Vec<&'static str> {
        let Some(st) = self.symbols.get(sym) else {
            return vec!["no_quote"];
        };
        let Some((_, _, source_time)) = st.price else {
            return vec!["no_quote"];
        };
        let (stale_ns, source_ns) = self.thresholds(sym);
        let now = now as i128;
        let mut r = Vec::new();
        if now - st.last_alive as i128 > stale_ns as i128 {
            r.push("stale");
        }
        if now - source_time as i128 - self.offset > source_ns as i128 {
            r.push("stale_at_source");
        }
        if st.suspect {
            r.push("suspect");
        }
        if st.invalid {
            r.push("invalid_price");
        }
        r
    }
}

// ---------------------------------------------------------------------------
// Configuration of a case
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct Setup {
    /// `auto` on the full feed (else on the delta feed); the other is fixed.
    auto_on_full: bool,
    window_ms: u64,
    fixed_ns: i64,
    stale_ms: [u64; 2],
    source_ms: [u64; 2],
    ov_stale_ms: Option<u64>,
    ov_source_ms: Option<u64>,
}

impl Setup {
    fn toml(&self) -> String {
        let offset = |auto: bool| {
            if auto {
                format!(
                    "clock_offset = \"auto\"\noffset_window_ms = {}\n",
                    self.window_ms
                )
            } else {
                format!("clock_offset = {}\n", self.fixed_ns)
            }
        };
        // A small table: `records()` walks every slot after every step.
        let mut t = String::from("[state]\ncapacity = 256\n");
        for (i, (name, line)) in [("full", "239.1.1.1:30001"), ("delta", "239.1.1.2:30002")]
            .iter()
            .enumerate()
        {
            write!(
                t,
                "[[feed]]\nname = \"{name}\"\nkind = \"{name}\"\nlines = [\"{line}\"]\n\
                 stale_threshold_ms = {}\nsource_threshold_ms = {}\n{}",
                self.stale_ms[i],
                self.source_ms[i],
                offset(self.auto_on_full == (i == 0))
            )
            .unwrap();
            if i == 0 && (self.ov_stale_ms.is_some() || self.ov_source_ms.is_some()) {
                writeln!(t, "[[feed.symbol]]\nname = \"{OVERRIDDEN}\"").unwrap();
                if let Some(v) = self.ov_stale_ms {
                    writeln!(t, "stale_threshold_ms = {v}").unwrap();
                }
                if let Some(v) = self.ov_source_ms {
                    writeln!(t, "source_threshold_ms = {v}").unwrap();
                }
            }
        }
        t
    }

    fn models(&self) -> [ModelFeed; 2] {
        let w = self.window_ms * MS;
        let mut full = ModelFeed::new(
            true,
            self.auto_on_full.then_some(w),
            self.fixed_ns,
            self.stale_ms[0] * MS,
            self.source_ms[0] * MS,
        );
        if self.ov_stale_ms.is_some() || self.ov_source_ms.is_some() {
            full.overrides.insert(
                OVERRIDDEN.to_string(),
                (
                    self.ov_stale_ms.unwrap_or(self.stale_ms[0]) * MS,
                    self.ov_source_ms.unwrap_or(self.source_ms[0]) * MS,
                ),
            );
        }
        let delta = ModelFeed::new(
            false,
            (!self.auto_on_full).then_some(w),
            self.fixed_ns,
            self.stale_ms[1] * MS,
            self.source_ms[1] * MS,
        );
        [full, delta]
    }
}

// ---------------------------------------------------------------------------
// Generated steps, resolved against the model's current state
// ---------------------------------------------------------------------------

/// A sequence number relative to the symbol's current position, or absolute.
#[derive(Clone, Debug)]
enum SeqPick {
    /// `base + delta`: 0 duplicate, 1 in order, >1 gap, <0 behind.
    Rel(i8),
    /// `base − 1000` (saturating): far behind.
    FarBehind,
    Special(usize),
    Any(u64),
}

impl SeqPick {
    /// `fresh`: the symbol has no baseline yet, so even a wrap to near
    /// u64::MAX loses nothing; otherwise relative picks saturate.
    fn resolve(&self, base: u64, fresh: bool) -> u64 {
        match *self {
            SeqPick::Rel(d) if fresh => base.wrapping_add(d as i64 as u64),
            SeqPick::Rel(d) => base.saturating_add_signed(d as i64),
            SeqPick::FarBehind => base.saturating_sub(1000),
            SeqPick::Special(i) => SPECIALS[i],
            SeqPick::Any(v) => v,
        }
    }
}

#[derive(Clone, Debug)]
enum PricePick {
    Valid(u8, u8),
    Crossed(u8),
    Zero(bool),
    NegZero,
    Negative(bool),
    Nan(bool),
    Inf(bool),
    NegInf,
    Subnormal,
}

impl PricePick {
    fn resolve(&self) -> (f64, f64) {
        let side = |on_bid: bool, v: f64| if on_bid { (v, 2.0) } else { (1.0, v) };
        match *self {
            PricePick::Valid(b, s) => {
                let bid = 1.0 + b as f64 * 0.25;
                (bid, bid + s as f64 * 0.25)
            }
            PricePick::Crossed(b) => {
                let bid = 1.25 + b as f64 * 0.25;
                (bid, bid - 0.25)
            }
            PricePick::Zero(b) => side(b, 0.0),
            PricePick::NegZero => (-0.0, 1.0),
            PricePick::Negative(b) => side(b, -1.0),
            PricePick::Nan(b) => side(b, f64::NAN),
            PricePick::Inf(b) => side(b, f64::INFINITY),
            PricePick::NegInf => (f64::NEG_INFINITY, 1.0),
            PricePick::Subnormal => (f64::MIN_POSITIVE / 4.0, 1.0),
        }
    }
}

#[derive(Clone, Debug)]
enum SourcePick {
    /// source_time = send_time − age ms (negative: ahead of the send time).
    AgeMs(i8),
    Abs(u64),
}

#[derive(Clone, Debug)]
enum MsgPick {
    Price {
        snapshot: bool,
        sym: usize,
        seq: SeqPick,
        source: SourcePick,
        price: PricePick,
        /// Bytes beyond the type's minimum length (forward compatibility).
        extra: u8,
    },
    Heartbeat {
        sym: usize,
        /// Relative to last_seq + 1.
        next: SeqPick,
        extra: u8,
    },
    Unknown {
        code: u8,
        len: u8,
    },
    /// A Quote, Snapshot or Heartbeat (`code` 0, 1, 2) that makes the packet
    /// invalid: shorter than its type's minimum (`bad_symbol: None`, body
    /// `len` modulo what is too short), or with a bad symbol.
    Malformed {
        code: usize,
        len: u8,
        bad_symbol: Option<usize>,
    },
}

/// Symbols that break the §2 rule, each for a different reason.
const BAD_SYMBOLS: [[u8; 8]; 7] = [
    *b"        ",
    *b" A      ",
    *b"A B     ",
    *b"A\0\0\0\0\0\0\0",
    *b"A\x7f      ",
    *b"AB\x80     ",
    *b"A      \t",
];

#[derive(Clone, Debug)]
enum Corrupt {
    None,
    Flip(Index, u8),
    Truncate(Index),
    Append(u8),
}

#[derive(Clone, Debug)]
struct Step {
    feed: u16,
    dt_ms: u64,
    /// Network delay on top of the true clock difference, ms.
    jitter_ms: u64,
    /// Rarely, an absurd send_time instead (0, u64::MAX, ...).
    send_time: Option<u64>,
    msgs: Vec<MsgPick>,
    corrupt: Corrupt,
}

fn wire_symbol(name: &str) -> [u8; 8] {
    let mut b = [b' '; 8];
    b[..name.len()].copy_from_slice(name.as_bytes());
    b
}

/// Builds the datagram of a step. Sequences are resolved against a projection
/// of the model, updated message by message, so "duplicate" / "in order" /
/// "gap" mean what they say even for several messages of one symbol.
fn build_packet(model: &ModelFeed, step: &Step, t: u64) -> Vec<u8> {
    let f = step.feed as usize;
    let send = step
        .send_time
        .unwrap_or((t as i128 - TRUE_OFFSET[f] as i128 - (step.jitter_ms * MS) as i128) as u64);
    let mut proj = model.clone();
    let mut b = PacketBuilder::new(send);
    for pick in &step.msgs {
        let msg = match pick {
            MsgPick::Price {
                snapshot,
                sym,
                seq,
                source,
                price,
                extra,
            } => {
                let name = SYMS[*sym];
                let base = proj.symbols.get(name).map_or(0, |s| s.last_seq);
                let seq = seq.resolve(base, !proj.symbols.contains_key(name));
                let source_time = match *source {
                    SourcePick::AgeMs(age) => send.wrapping_sub((age as i64 * MS as i64) as u64),
                    SourcePick::Abs(v) => v,
                };
                let (bid, ask) = price.resolve();
                let code = if *snapshot { b'S' } else { b'Q' };
                if *extra == 0 {
                    let s = Symbol::parse(name).unwrap();
                    if *snapshot {
                        b.snapshot(s, seq, source_time, bid, ask);
                    } else {
                        b.quote(s, seq, source_time, bid, ask);
                    }
                } else {
                    // Written by hand from the spec's layout (body = message − 4).
                    let mut body = vec![0xa5u8; 44 + *extra as usize];
                    body[0..8].copy_from_slice(&wire_symbol(name));
                    body[8..12].fill(0);
                    body[12..20].copy_from_slice(&seq.to_le_bytes());
                    body[20..28].copy_from_slice(&source_time.to_le_bytes());
                    body[28..36].copy_from_slice(&bid.to_bits().to_le_bytes());
                    body[36..44].copy_from_slice(&ask.to_bits().to_le_bytes());
                    b.message(code, &body);
                }
                let sym = name.to_string();
                if *snapshot {
                    Msg::Snapshot {
                        sym,
                        seq,
                        source_time,
                        bid,
                        ask,
                    }
                } else {
                    Msg::Quote {
                        sym,
                        seq,
                        source_time,
                        bid,
                        ask,
                    }
                }
            }
            MsgPick::Heartbeat { sym, next, extra } => {
                let name = SYMS[*sym];
                let base = proj
                    .symbols
                    .get(name)
                    .map_or(0, |s| s.last_seq)
                    .wrapping_add(1);
                let next_expected = next.resolve(base, !proj.symbols.contains_key(name));
                if *extra == 0 {
                    b.heartbeat(Symbol::parse(name).unwrap(), next_expected);
                } else {
                    let mut body = vec![0x5au8; 20 + *extra as usize];
                    body[0..8].copy_from_slice(&wire_symbol(name));
                    body[12..20].copy_from_slice(&next_expected.to_le_bytes());
                    b.message(b'H', &body);
                }
                Msg::Heartbeat {
                    sym: name.to_string(),
                    next_expected,
                }
            }
            MsgPick::Unknown { code, len } => {
                let code = match *code {
                    b'Q' | b'S' | b'H' => b'z',
                    c => c,
                };
                b.message(code, &vec![0xeeu8; *len as usize]);
                Msg::Unknown { code }
            }
            MsgPick::Malformed {
                code,
                len,
                bad_symbol,
            } => {
                let (code, min) = [(b'Q', 48), (b'S', 48), (b'H', 24)][*code];
                let body = match bad_symbol {
                    None => vec![b'A'; *len as usize % (min - 4)],
                    Some(i) => {
                        let mut body = vec![0u8; min - 4];
                        body[..8].copy_from_slice(&BAD_SYMBOLS[*i]);
                        body
                    }
                };
                b.message(code, &body);
                continue; // the packet is invalid: nothing to project
            }
        };
        proj.apply(&msg, t);
    }
    let mut bytes = b.finish();
    match &step.corrupt {
        Corrupt::None => {}
        Corrupt::Flip(i, x) => {
            let at = i.index(bytes.len());
            bytes[at] ^= x;
        }
        Corrupt::Truncate(i) => {
            let keep = i.index(bytes.len());
            bytes.truncate(keep);
        }
        Corrupt::Append(x) => bytes.push(*x),
    }
    bytes
}

// ---------------------------------------------------------------------------
// Comparison of the handler with the model
// ---------------------------------------------------------------------------

fn state_of(r: &tickguard::state::Record) -> ModelState {
    let s = &r.state;
    ModelState {
        baseline: s.seq.baseline,
        last_seq: s.seq.last_seq,
        suspect: s.suspect,
        invalid: s.invalid,
        price: s.price.map(|p| (p.bid, p.ask, p.source_time)),
        last_alive: s.last_alive,
        ticks_lost: s.seq.ticks_lost,
        duplicates: s.seq.duplicates,
    }
}

/// Offsets of `now` from the step's arrival time `t` at which `sym` is
/// checked: a fixed grid, plus one nanosecond either side of, and exactly at,
/// both of the model's thresholds (stale and stale_at_source boundaries), so
/// that every strict `>` is exercised.
fn check_offsets(mf: &ModelFeed, sym: &str, t: u64) -> Vec<u64> {
    // Up to now = u64::MAX, too: the verdict must not overflow.
    let mut v = vec![0, 1, MS, 2 * MS, 4 * MS, 8 * MS, u64::MAX - t];
    if let Some(st) = mf.symbols.get(sym) {
        if let Some((_, _, source_time)) = st.price {
            let (stale_ns, source_ns) = mf.thresholds(sym);
            let t = t as i128;
            for edge in [
                st.last_alive as i128 + stale_ns as i128 - t,
                source_time as i128 + mf.offset + source_ns as i128 - t,
            ] {
                for d in [edge - 1, edge, edge + 1] {
                    if d >= 0 && t + d <= u64::MAX as i128 {
                        v.push(d as u64);
                    }
                }
            }
        }
    }
    v
}

/// Everything the handler and the model must agree on, after a step at `t`.
fn compare(h: &mut Handler, m: &[ModelFeed; 2], t: u64) -> Result<(), String> {
    for (f, mf) in m.iter().enumerate() {
        let got = h.feeds()[f].offset();
        if got != mf.offset {
            return Err(format!(
                "feed {f}: offset: handler {got}, model {}",
                mf.offset
            ));
        }
        let mut names: Vec<String> = SYMS.iter().map(|s| s.to_string()).collect();
        names.push("ZZZ".into());
        for k in mf.symbols.keys() {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
        for name in &names {
            let sym = Symbol::parse(name).unwrap();
            for d in check_offsets(mf, name, t) {
                let now = t + d;
                let got: Vec<_> = h.verdict(f as u16, sym, now).names().collect();
                let want = mf.verdict(name, now);
                if got != want {
                    return Err(format!(
                        "feed {f} symbol {name} now = t + {d} ns: handler {got:?}, model {want:?}; \
                         model state {:?}, offset {}, thresholds {:?}",
                        mf.symbols.get(name),
                        mf.offset,
                        mf.thresholds(name)
                    ));
                }
            }
        }
        let c = &h.feeds()[f].counters;
        let got = ModelCounters {
            packets: c.packets,
            rejected: c.rejected,
            messages: c.messages,
            quotes: c.quotes,
            snapshots: c.snapshots,
            heartbeats: c.heartbeats,
            unknown: c.unknown,
            duplicates: c.duplicates,
            ticks_lost: c.ticks_lost,
        };
        if got != mf.counters {
            return Err(format!(
                "feed {f}: counters: handler {got:?}, model {:?}",
                mf.counters
            ));
        }
        if c.rejected_by_reason.iter().sum::<u64>() != c.rejected || c.table_full != 0 {
            return Err(format!("feed {f}: counters inconsistent: {c:?}"));
        }
    }
    let mut got: BTreeMap<(u16, String), (ModelState, (u64, u64))> = BTreeMap::new();
    for r in h.records() {
        let Some(sym) = r.symbol else {
            return Err(format!("record without symbol: {r:?}"));
        };
        let th = (r.thresholds.stale_ns, r.thresholds.source_ns);
        if got
            .insert((r.feed, sym.to_string()), (state_of(&r), th))
            .is_some()
        {
            return Err(format!("two records for {} {sym}", r.feed));
        }
    }
    let mut want = BTreeMap::new();
    for (f, mf) in m.iter().enumerate() {
        for (k, s) in &mf.symbols {
            want.insert((f as u16, k.clone()), (s.clone(), mf.thresholds(k)));
        }
    }
    if got != want {
        let mut msg = String::from("records differ:\n");
        for key in got.keys().chain(want.keys()) {
            if got.get(key) != want.get(key) {
                writeln!(
                    msg,
                    "  {key:?}: handler {:?}\n  {key:?}:   model {:?}",
                    got.get(key),
                    want.get(key)
                )
                .unwrap();
            }
        }
        return Err(msg);
    }
    Ok(())
}

/// Runs one generated case; on the first disagreement returns a message with
/// the step, its packet as the model decoded it, and what differs.
fn run_case(setup: &Setup, steps: &[Step]) -> Result<(), String> {
    let cfg = Config::parse(&setup.toml(), "t").map_err(|e| e.to_string())?;
    let mut h = Handler::new(&cfg);
    let mut m = setup.models();
    compare(&mut h, &m, T0).map_err(|e| format!("before any packet: {e}"))?;
    let mut t = T0;
    for (i, step) in steps.iter().enumerate() {
        t += step.dt_ms * MS;
        let f = step.feed as usize;
        let bytes = build_packet(&m[f], step, t);
        let want = m[f].on_datagram(&bytes, t);
        let got = h.on_datagram(step.feed, &bytes, t);
        let ctx = || {
            format!(
                "step {i} (feed {f}, t = T0 + {} ns): model decoded {:?}",
                t - T0,
                model_decode(&bytes)
            )
        };
        if got.is_ok() != want {
            return Err(format!(
                "{}: handler {got:?}, model accepted = {want}; bytes {bytes:02x?}",
                ctx()
            ));
        }
        compare(&mut h, &m, t).map_err(|e| format!("{}: {e}", ctx()))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------

/// `wild` adds far and absolute sequences. Each of those is a huge gap for
/// a symbol with a baseline, and two huge gaps on one feed overflow its
/// `ticks_lost` (steps that would are skipped), so they stay rare.
fn seq_pick(common: i8, wild: u32) -> impl Strategy<Value = SeqPick> {
    prop_oneof![
        30 => Just(SeqPick::Rel(common)),
        25 => (-3i8..=4).prop_map(SeqPick::Rel),
        3 => Just(SeqPick::FarBehind),
        wild => (0..SPECIALS.len()).prop_map(SeqPick::Special),
        1 => any::<u64>().prop_map(SeqPick::Any),
    ]
}

fn source_pick() -> impl Strategy<Value = SourcePick> {
    prop_oneof![
        40 => (-3i8..=8).prop_map(SourcePick::AgeMs),
        1 => prop_oneof![Just(0u64), Just(u64::MAX), Just(1 << 63), any::<u64>()]
            .prop_map(SourcePick::Abs),
    ]
}

fn price_pick() -> impl Strategy<Value = PricePick> {
    prop_oneof![
        12 => (0u8..8, 0u8..4).prop_map(|(b, s)| PricePick::Valid(b, s)),
        1 => (0u8..8).prop_map(PricePick::Crossed),
        1 => any::<bool>().prop_map(PricePick::Zero),
        1 => Just(PricePick::NegZero),
        1 => any::<bool>().prop_map(PricePick::Negative),
        1 => any::<bool>().prop_map(PricePick::Nan),
        1 => any::<bool>().prop_map(PricePick::Inf),
        1 => Just(PricePick::NegInf),
        1 => Just(PricePick::Subnormal),
    ]
}

fn extra() -> impl Strategy<Value = u8> {
    prop_oneof![9 => Just(0u8), 1 => 1u8..=6]
}

fn msg_pick() -> impl Strategy<Value = MsgPick> {
    let price = |snapshot: bool, common: i8, wild: u32| {
        (
            0..SYMS.len(),
            seq_pick(common, wild),
            source_pick(),
            price_pick(),
            extra(),
        )
            .prop_map(move |(sym, seq, source, price, extra)| MsgPick::Price {
                snapshot,
                sym,
                seq,
                source,
                price,
                extra,
            })
    };
    prop_oneof![
        16 => price(false, 1, 1),
        // Snapshots add no loss: they may jump anywhere, near u64::MAX too.
        4 => price(true, 0, 8),
        8 => (0..SYMS.len(), seq_pick(0, 1), extra())
            .prop_map(|(sym, next, extra)| MsgPick::Heartbeat { sym, next, extra }),
        2 => (any::<u8>(), 0u8..8).prop_map(|(code, len)| MsgPick::Unknown { code, len }),
        1 => (0usize..3, any::<u8>(), proptest::option::of(0..BAD_SYMBOLS.len())).prop_map(
            |(code, len, bad_symbol)| MsgPick::Malformed { code, len, bad_symbol }
        ),
    ]
}

fn corrupt() -> impl Strategy<Value = Corrupt> {
    prop_oneof![
        16 => Just(Corrupt::None),
        2 => (any::<Index>(), 1u8..=255).prop_map(|(i, x)| Corrupt::Flip(i, x)),
        1 => any::<Index>().prop_map(Corrupt::Truncate),
        1 => any::<u8>().prop_map(Corrupt::Append),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    let dt =
        prop_oneof![2 => Just(0u64), 4 => Just(1), 3 => Just(2), 2 => 3u64..=6, 1 => 7u64..=30];
    let msgs = prop_oneof![
        30 => prop::collection::vec(msg_pick(), 1..=4),
        1 => Just(Vec::new()),
    ];
    let send_time = prop_oneof![
        60 => Just(None),
        1 => prop_oneof![Just(0u64), Just(u64::MAX), Just(1 << 63), any::<u64>()].prop_map(Some),
    ];
    (0u16..2, dt, 0u64..=3, send_time, msgs, corrupt()).prop_map(
        |(feed, dt_ms, jitter_ms, send_time, msgs, corrupt)| Step {
            feed,
            dt_ms,
            jitter_ms,
            send_time,
            msgs,
            corrupt,
        },
    )
}

fn setup() -> impl Strategy<Value = Setup> {
    let fixed = prop_oneof![
        4 => (-5i64..=5).prop_map(|x| x * MS as i64),
        1 => -6_000_000i64..=6_000_000,
    ];
    (
        any::<bool>(),
        1u64..=8,
        fixed,
        [1u64..=5, 1u64..=5],
        [1u64..=6, 1u64..=6],
        proptest::option::of(1u64..=6),
        proptest::option::of(1u64..=6),
    )
        .prop_map(
            |(
                auto_on_full,
                window_ms,
                fixed_ns,
                stale_ms,
                source_ms,
                ov_stale_ms,
                ov_source_ms,
            )| {
                Setup {
                    auto_on_full,
                    window_ms,
                    fixed_ns,
                    stale_ms,
                    source_ms,
                    ov_stale_ms,
                    ov_source_ms,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: crate::common::cases(256), ..ProptestConfig::default() })]

    #[test]
    fn handler_matches_model(setup in setup(), steps in prop::collection::vec(step(), 1..=40)) {
        if let Err(e) = run_case(&setup, &steps) {
            prop_assert!(false, "{}\nconfig:\n{}", e, setup.toml());
        }
    }
}

// ---------------------------------------------------------------------------
// Deterministic regression tests
// ---------------------------------------------------------------------------

/// Feed 0 `full` with a fixed offset of 0, feed 1 `delta` with `auto` (5 ms);
/// stale 3 ms, source 4 ms. The helpers below send every packet at its
/// arrival time, so both offsets are 0 unless a test says otherwise.
fn fixed_setup() -> Setup {
    Setup {
        auto_on_full: false,
        window_ms: 5,
        fixed_ns: 0,
        stale_ms: [3, 3],
        source_ms: [4, 4],
        ov_stale_ms: None,
        ov_source_ms: None,
    }
}

struct Pair {
    h: Handler,
    m: [ModelFeed; 2],
}

impl Pair {
    fn new(setup: &Setup) -> Pair {
        let cfg = Config::parse(&setup.toml(), "t").unwrap();
        Pair {
            h: Handler::new(&cfg),
            m: setup.models(),
        }
    }

    /// Sends `bytes` to both, checks they agree on everything, returns the
    /// handler's answer.
    fn send(&mut self, feed: u16, bytes: &[u8], t: u64) -> bool {
        let want = self.m[feed as usize].on_datagram(bytes, t);
        let got = self.h.on_datagram(feed, bytes, t).is_ok();
        assert_eq!(got, want, "accept/reject");
        compare(&mut self.h, &self.m, t).unwrap();
        got
    }

    fn reasons(&mut self, feed: u16, sym: &str, now: u64) -> Vec<&'static str> {
        let got: Vec<_> = self
            .h
            .verdict(feed, Symbol::parse(sym).unwrap(), now)
            .names()
            .collect();
        assert_eq!(got, self.m[feed as usize].verdict(sym, now), "model agrees");
        got
    }

    fn state(&self, feed: u16, sym: &str) -> ModelState {
        let s = Symbol::parse(sym).unwrap();
        let r = self
            .h
            .records()
            .find(|r| r.feed == feed && r.symbol == Some(s))
            .expect("record");
        state_of(&r)
    }
}

fn sym(s: &str) -> Symbol {
    Symbol::parse(s).unwrap()
}

fn quote(send: u64, s: &str, seq: u64) -> Vec<u8> {
    let mut b = PacketBuilder::new(send);
    b.quote(sym(s), seq, send, 1.0, 1.5);
    b.finish()
}

fn heartbeat(send: u64, s: &str, next_expected: u64) -> Vec<u8> {
    let mut b = PacketBuilder::new(send);
    b.heartbeat(sym(s), next_expected);
    b.finish()
}

fn snapshot(send: u64, s: &str, seq: u64) -> Vec<u8> {
    let mut b = PacketBuilder::new(send);
    b.snapshot(sym(s), seq, send, 1.0, 1.5);
    b.finish()
}

#[test]
fn heartbeat_without_baseline_then_quote() {
    let mut p = Pair::new(&fixed_setup());
    for feed in [0u16, 1] {
        // Heartbeat first: baseline at next_expected − 1, suspect, not alive.
        p.send(feed, &heartbeat(T0, "A", 10), T0);
        let s = p.state(feed, "A");
        assert!(s.baseline && s.suspect);
        assert_eq!((s.last_seq, s.last_alive, s.ticks_lost), (9, 0, 0));
        assert_eq!(p.reasons(feed, "A", T0), ["no_quote"]);
        // The announced Quote is in order: no loss.
        p.send(feed, &quote(T0 + MS, "A", 10), T0 + MS);
        let s = p.state(feed, "A");
        assert_eq!((s.last_seq, s.ticks_lost, s.duplicates), (10, 0, 0));
        if feed == 0 {
            // Full feed: the quote is the whole state.
            assert_eq!(p.reasons(feed, "A", T0 + MS), Vec::<&str>::new());
        } else {
            // Delta feed: still waiting for a snapshot.
            assert_eq!(p.reasons(feed, "A", T0 + MS), ["suspect"]);
        }
    }
    // Heartbeat announcing 0 on a fresh symbol: last_seq saturates at 0, so a
    // Quote with sequence 0 is a duplicate.
    p.send(0, &heartbeat(T0 + 2 * MS, "BB", 0), T0 + 2 * MS);
    p.send(0, &quote(T0 + 2 * MS, "BB", 0), T0 + 2 * MS);
    let s = p.state(0, "BB");
    assert_eq!((s.last_seq, s.duplicates, s.price), (0, 1, None));
    assert_eq!(p.reasons(0, "BB", T0 + 2 * MS), ["no_quote"]);
}

#[test]
fn full_feed_gap_counts_loss_but_is_not_suspect() {
    let mut p = Pair::new(&fixed_setup());
    for feed in [0u16, 1] {
        p.send(feed, &snapshot(T0, "A", 1), T0);
        p.send(feed, &quote(T0 + MS, "A", 5), T0 + MS);
        let s = p.state(feed, "A");
        assert_eq!((s.last_seq, s.ticks_lost), (5, 3));
        assert_eq!(s.suspect, feed == 1);
    }
    assert_eq!(p.reasons(0, "A", T0 + MS), Vec::<&str>::new());
    assert_eq!(p.reasons(1, "A", T0 + MS), ["suspect"]);
    // On the full feed the next in-order quote keeps it clean; on the delta
    // feed only a snapshot repairs it.
    p.send(1, &quote(T0 + 2 * MS, "A", 6), T0 + 2 * MS);
    assert_eq!(p.reasons(1, "A", T0 + 2 * MS), ["suspect"]);
    p.send(1, &snapshot(T0 + 2 * MS, "A", 6), T0 + 2 * MS);
    assert_eq!(p.reasons(1, "A", T0 + 2 * MS), Vec::<&str>::new());
}

#[test]
fn heartbeat_gap_does_not_refresh_liveness() {
    let mut p = Pair::new(&fixed_setup());
    p.send(0, &quote(T0, "A", 1), T0);
    // Gap revealed by a heartbeat 2 ms later: loss counted, suspect, and
    // last_alive stays at T0.
    p.send(0, &heartbeat(T0 + 2 * MS, "A", 5), T0 + 2 * MS);
    let s = p.state(0, "A");
    assert_eq!((s.last_seq, s.ticks_lost, s.last_alive), (4, 3, T0));
    assert!(s.suspect);
    // Stale exactly after 3 ms of silence since T0, strictly.
    assert_eq!(p.reasons(0, "A", T0 + 3 * MS), ["suspect"]);
    assert_eq!(p.reasons(0, "A", T0 + 3 * MS + 1), ["stale", "suspect"]);
    // A gap-free heartbeat (next_expected = last_seq + 1) proves liveness.
    p.send(0, &heartbeat(T0 + 4 * MS, "A", 5), T0 + 4 * MS);
    assert_eq!(p.state(0, "A").last_alive, T0 + 4 * MS);
    // So does one that lags behind (next_expected ≤ last_seq): no loss, no change.
    p.send(0, &heartbeat(T0 + 5 * MS, "A", 2), T0 + 5 * MS);
    let s = p.state(0, "A");
    assert_eq!(
        (s.last_seq, s.ticks_lost, s.last_alive),
        (4, 3, T0 + 5 * MS)
    );
    assert_eq!(
        p.reasons(0, "A", T0 + 5 * MS),
        ["stale_at_source", "suspect"]
    );
    // The full feed's next quote clears suspect.
    p.send(0, &quote(T0 + 5 * MS, "A", 5), T0 + 5 * MS);
    assert_eq!(p.reasons(0, "A", T0 + 5 * MS), Vec::<&str>::new());
}

#[test]
fn snapshot_going_backwards_resets_the_sequence() {
    let mut p = Pair::new(&fixed_setup());
    p.send(1, &snapshot(T0, "A", 10), T0);
    p.send(1, &quote(T0, "A", 11), T0);
    // Provider reset: the snapshot's sequence is lower; always applied.
    p.send(1, &snapshot(T0 + MS, "A", 3), T0 + MS);
    let s = p.state(1, "A");
    assert_eq!((s.last_seq, s.suspect, s.duplicates), (3, false, 0));
    p.send(1, &quote(T0 + MS, "A", 3), T0 + MS);
    assert_eq!(p.state(1, "A").duplicates, 1);
    p.send(1, &quote(T0 + MS, "A", 4), T0 + MS);
    let s = p.state(1, "A");
    assert_eq!((s.last_seq, s.ticks_lost, s.suspect), (4, 0, false));
}

#[test]
fn invalid_price_keeps_the_last_valid_one() {
    let mut p = Pair::new(&fixed_setup());
    p.send(0, &quote(T0, "A", 1), T0);
    for (i, (bid, ask)) in [
        (f64::NAN, 1.0),
        (1.0, f64::INFINITY),
        (0.0, 1.0),
        (2.0, 1.0),
        (-1.0, 1.0),
    ]
    .into_iter()
    .enumerate()
    {
        let t = T0 + (i as u64 + 1) * MS;
        let mut b = PacketBuilder::new(t);
        b.quote(sym("A"), i as u64 + 2, t, bid, ask);
        p.send(0, &b.finish(), t);
        let s = p.state(0, "A");
        assert!(s.invalid);
        assert_eq!(s.price, Some((1.0, 1.5, T0)));
        assert_eq!(s.last_alive, t);
    }
    // The stored price is 5 ms old at the source: stale_at_source (> 4 ms).
    assert_eq!(
        p.reasons(0, "A", T0 + 5 * MS),
        ["stale_at_source", "invalid_price"]
    );
    // Locked market (bid == ask) is valid.
    let mut b = PacketBuilder::new(T0 + 6 * MS);
    b.quote(sym("A"), 7, T0 + 6 * MS, 1.25, 1.25);
    p.send(0, &b.finish(), T0 + 6 * MS);
    assert_eq!(p.reasons(0, "A", T0 + 6 * MS), Vec::<&str>::new());
}

#[test]
fn rejected_packet_applies_nothing() {
    let mut p = Pair::new(&fixed_setup());
    p.send(0, &quote(T0, "A", 1), T0);
    let mut b = PacketBuilder::new(T0);
    b.quote(sym("A"), 2, T0, 1.0, 1.5)
        .heartbeat(sym("BB"), 7)
        .raw(&[0]);
    assert!(!p.send(0, &b.finish(), T0 + MS));
    // A short heartbeat spoils the good quote before it.
    let mut b = PacketBuilder::new(T0);
    b.quote(sym("A"), 2, T0, 1.0, 1.5)
        .message(b'H', &[b'X'; 19]);
    assert!(!p.send(0, &b.finish(), T0 + MS));
    // Unknown types, header-only, are skipped and counted.
    let mut b = PacketBuilder::new(T0);
    b.message(b'z', &[]).quote(sym("A"), 3, T0, 1.0, 1.5);
    assert!(p.send(0, &b.finish(), T0 + MS));
    let s = p.state(0, "A");
    assert_eq!((s.last_seq, s.ticks_lost), (3, 1));
    let c = &p.h.feeds()[0].counters;
    assert_eq!((c.packets, c.rejected, c.messages), (4, 2, 3));
}

#[test]
fn auto_offset_is_a_sliding_window_minimum() {
    let setup = Setup {
        auto_on_full: true,
        window_ms: 5,
        ..fixed_setup()
    };
    let mut p = Pair::new(&setup);
    assert_eq!(p.h.feeds()[0].offset(), 0);
    // a − send: 3 ms, then 1 ms, then 4 ms.
    p.send(0, &quote(T0 - 3 * MS, "A", 1), T0);
    p.send(0, &quote(T0 + MS, "A", 2), T0 + 2 * MS);
    assert_eq!(p.h.feeds()[0].offset(), MS as i128);
    p.send(0, &quote(T0 + 2 * MS, "A", 3), T0 + 6 * MS);
    // T0 + 2 ms is still inside (T0 + 1 ms, T0 + 6 ms].
    assert_eq!(p.h.feeds()[0].offset(), MS as i128);
    // At T0 + 7 ms it has left the window; the 4 ms packet remains, plus a 5 ms one.
    p.send(0, &quote(T0 + 2 * MS, "A", 4), T0 + 7 * MS);
    assert_eq!(p.h.feeds()[0].offset(), 4 * MS as i128);
    // Source age 1 ms on the provider clock = now − source_time − offset.
    assert_eq!(p.reasons(0, "A", T0 + 10 * MS), Vec::<&str>::new());
    assert_eq!(
        p.reasons(0, "A", T0 + 10 * MS + 1),
        ["stale", "stale_at_source"]
    );
}

#[test]
fn sequences_at_the_top_of_u64() {
    let mut p = Pair::new(&fixed_setup());
    p.send(0, &quote(T0, "A", u64::MAX - 1), T0);
    p.send(0, &quote(T0, "A", u64::MAX), T0);
    // Nothing can follow u64::MAX: every quote is a duplicate, every
    // heartbeat a gap-free one.
    p.send(0, &quote(T0 + MS, "A", 0), T0 + MS);
    p.send(0, &heartbeat(T0 + 2 * MS, "A", 0), T0 + 2 * MS);
    p.send(0, &heartbeat(T0 + 2 * MS, "A", u64::MAX), T0 + 2 * MS);
    let s = p.state(0, "A");
    assert_eq!(
        (s.last_seq, s.duplicates, s.ticks_lost, s.last_alive),
        (u64::MAX, 1, 0, T0 + 2 * MS)
    );
    // Big gap: from 0 to u64::MAX loses u64::MAX − 1 ticks.
    p.send(1, &snapshot(T0, "A", 0), T0);
    p.send(1, &heartbeat(T0, "A", u64::MAX), T0);
    let s = p.state(1, "A");
    assert_eq!((s.last_seq, s.ticks_lost), (u64::MAX - 1, u64::MAX - 1));
}

/// Found by this model: a valid datagram whose gaps add up
/// to more than `u64::MAX` lost ticks on one feed panics the handler
/// ("attempt to add with overflow" at the per-feed `ticks_lost` counter,
/// crates/engine/src/handler.rs `counters.ticks_lost += lost`) in builds with overflow
/// checks, and wraps the counter silently in release builds. Spec §3 only says
/// `ticks_lost += q.sequence - last_seq - 1`; §2 says bad input must never
/// crash the handler, and a careful handler does not crash on a *valid* one
/// either. Expected: no panic, both quotes applied, per-symbol `ticks_lost`
/// u64::MAX − 1 and 2.
#[test]
fn feed_ticks_lost_overflow_must_not_panic() {
    let cfg = Config::parse(&fixed_setup().toml(), "t").unwrap();
    let mut h = Handler::new(&cfg);
    let mut b = PacketBuilder::new(T0);
    b.quote(sym("A"), 0, T0, 1.0, 1.5)
        .quote(sym("A"), u64::MAX, T0, 1.0, 1.5) // loses u64::MAX − 1
        .quote(sym("B"), 0, T0, 1.0, 1.5)
        .quote(sym("B"), 3, T0, 1.0, 1.5); // loses 2: feed total 2^64
    let bytes = b.finish();
    let applied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        h.on_datagram(0, &bytes, T0)
    }));
    assert!(
        matches!(applied, Ok(Ok(()))),
        "handler panicked on a valid packet"
    );
    let lost = |s: &str| {
        h.records()
            .find(|r| r.feed == 0 && r.symbol == Some(sym(s)))
            .map(|r| (r.state.seq.last_seq, r.state.seq.ticks_lost))
    };
    assert_eq!(lost("A"), Some((u64::MAX, u64::MAX - 1)));
    assert_eq!(lost("B"), Some((3, 2)));
}

/// Found by this model: §4 defines the offset as the exact
/// minimum of `a_q − send_time_q`; the handler keeps it in an `i64`, so when a
/// valid packet's send_time is more than 2^63 ns (~292 years) ahead of its
/// arrival the offset saturates at `i64::MIN`, and §5's
/// `now − source_time − offset` comes out ~10^18 ns too small: a quote that is
/// 1 s old on the provider's own clock (source threshold 4 ms) reads `ok`.
/// Only a corrupted (but structurally valid) send_time gets there: low
/// severity, but the error is in the "falsely fresh" direction.
#[test]
fn offset_beyond_i64_must_not_read_fresh() {
    let setup = Setup {
        auto_on_full: true,
        ..fixed_setup()
    };
    let cfg = Config::parse(&setup.toml(), "t").unwrap();
    let mut h = Handler::new(&cfg);
    let send = T0 + (1 << 63) + 1_000_000_000_000_000_000; // a − send = −(2^63 + 10^18)
    let mut b = PacketBuilder::new(send);
    b.quote(sym("A"), 1, send - 1_000_000_000, 1.0, 1.5); // 1 s old at the source
    h.on_datagram(0, &b.finish(), T0).unwrap();
    // Exact: now − source_time − offset = T0 − (send − 1 s) + (send − T0) = 1 s > 4 ms.
    let got: Vec<_> = h.verdict(0, sym("A"), T0).names().collect();
    assert_eq!(got, ["stale_at_source"]);
}

/// Found by this model: §4 says the auto offset is the
/// minimum over the packets of the last `W`; the handler's sliding minimum has
/// a fixed capacity of 4096 entries (see the `crates/engine/src/clock.rs` module docs) and,
/// once full, merges entries keeping the lower value. 4096 packets inside one
/// window whose `arrival − send_time` rises each time (a provider clock running
/// slow against ours, on a low-jitter link — at the default W = 60 s that is
/// ≥ 69 packets/s) fill it, and the minimum then outlives its window: the
/// offset stays too low and quotes read `stale_at_source` too early. The
/// direction is the conservative one (documented in the code, not the spec).
#[test]
fn offset_window_minimum_expires_after_many_rising_samples() {
    let text = "[[feed]]\nname = \"f\"\nkind = \"full\"\nlines = [\"239.1.1.1:1\"]\n\
                stale_threshold_ms = 1\nsource_threshold_ms = 1\n\
                clock_offset = \"auto\"\noffset_window_ms = 5000\n";
    let mut h = Handler::new(&Config::parse(text, "t").unwrap());
    // 4096 packets, 1 ms apart, a − send = 1 ms + i ns; each applies a
    // heartbeat (any accepted packet is a sample).
    for i in 0..4096 {
        let a = T0 + i * MS;
        let mut b = PacketBuilder::new(a - (MS + i));
        b.heartbeat(sym("B"), 1);
        h.on_datagram(0, &b.finish(), a).unwrap();
    }
    // At T0 + 5 s the first packet (T0) has left (a_p − W, a_p]: the minimum
    // is now the second one's, 1 ms + 1 ns.
    let a = T0 + 5000 * MS;
    let send = a - 2 * MS;
    let mut b = PacketBuilder::new(send);
    // Source age = now − source_time − offset = (2 ms + 1) − (1 ms + 1) = 1 ms:
    // not above the 1 ms threshold.
    b.quote(sym("A"), 1, send - 1, 1.0, 1.5);
    h.on_datagram(0, &b.finish(), a).unwrap();
    assert_eq!(h.feeds()[0].offset(), (MS + 1) as i128);
    let got: Vec<_> = h.verdict(0, sym("A"), a).names().collect();
    assert_eq!(got, Vec::<&str>::new());
}
