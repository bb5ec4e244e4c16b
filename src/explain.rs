//! Replay forensics: which events changed a symbol's verdict, when and why
//! (`tickguard replay --explain FEED SYMBOL`), the verdict at one moment with
//! the event behind each reason (`--at`), and an SVG timeline of every
//! symbol's verdict (`--timeline`).
//!
//! [`Forensics`] is a [`replay::Observer`](crate::replay::Observer): the
//! replay runs exactly as usual and, after each datagram the handler applied,
//! the observer decodes the packet again and applies every message for a
//! symbol it tracks, in order, to its own copy of the symbol's
//! [`SymbolState`] with the same rule functions the handler uses. Comparing
//! the copy before and after each message gives the cause (a gap of N, a
//! heartbeat revealing one, a snapshot, a provider reset, an invalid price,
//! …). After each datagram the copy is checked against the handler's slot;
//! they always agree. If they ever did not, the handler's state would be
//! adopted and a `reconciled` event listed.
//!
//! # When the verdict changes
//!
//! A check at time `T` is answered after every datagram that arrived at or
//! before `T` (spec section 6). Between two datagrams the state and the
//! feed's clock offset are fixed, and only time moves, so the verdict can
//! change only in these ways:
//!
//! - **at a datagram's arrival**: a message for the symbol, or (on an `auto`
//!   feed) a new clock offset moving the price's source age across the
//!   source threshold. These events carry the arrival time. A packet with
//!   several messages for the symbol gives one event per message, in order.
//!   The intermediate verdicts share the arrival time, so no check can see
//!   them; a check sees the last event at that time.
//! - **by time alone**, at the first nanosecond where the strict comparisons
//!   of spec section 5 hold:
//!   `last_alive + stale_threshold + 1` (silence) and
//!   `source_time + offset + source_threshold + 1` (source age). The offset
//!   used is the one in force between the two packets. In `auto` mode it
//!   changes only at accepted packets of the feed, so the crossing is exact
//!   and is never found by sampling. A crossing that falls on a datagram's
//!   arrival nanosecond is listed before that datagram's own events. After
//!   the last datagram the crossings that would still happen are listed too
//!   (checks after the end of a capture see them).
//!
//! So the verdict a check at `T` gets is the one after the last event at or
//! before `T` (`no_quote` before the first). The tests hold this against
//! every check of the fixtures.
//!
//! Events are listed in capture order. If a capture's timestamps step back,
//! verdicts are evaluated at the latest time seen so far, as the clock-offset
//! estimator does.

use crate::capture::Datagram;
use crate::config::FeedConfig;
use crate::handler::Handler;
use crate::protocol::sqf::rules::{FeedKind, Price, SymbolState};
use crate::protocol::sqf::{Message, Packet, PriceView};
use crate::replay::Observer;
use crate::symbol::Symbol;
use crate::verdict::{evaluate, Reasons, Thresholds};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddrV4;

/// How a sequenced Quote related to the symbol's last sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// No sequence seen before: baseline set.
    First,
    /// The next sequence.
    InOrder,
    /// Ahead of the next sequence.
    Gap {
        /// Last sequence before the quote.
        last: u64,
        /// Ticks lost.
        lost: u64,
    },
    /// At or below the last sequence: ignored.
    Duplicate {
        /// Last sequence.
        last: u64,
    },
}

/// What a Heartbeat meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeatStep {
    /// No sequence seen before: baseline set, suspect.
    First,
    /// Quotes were sent that never arrived: suspect, not liveness.
    Gap {
        /// Last sequence before the heartbeat.
        last: u64,
        /// Ticks lost.
        lost: u64,
    },
    /// Nothing missing: liveness.
    Alive,
}

/// What caused an event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cause {
    /// A Quote for the symbol.
    Quote {
        /// Its sequence.
        seq: u64,
        /// Against the last sequence.
        step: Step,
    },
    /// A Heartbeat for the symbol.
    Heartbeat {
        /// The sequence of the next Quote.
        next_expected: u64,
        /// What it meant.
        step: BeatStep,
    },
    /// A Snapshot for the symbol.
    Snapshot {
        /// Its sequence.
        seq: u64,
        /// The last sequence before it, if any: a Snapshot behind it is a provider reset.
        last: Option<u64>,
    },
    /// Silence crossed the stale threshold.
    Silence {
        /// Last arrival that proved the symbol alive, ns.
        last_alive: u64,
        /// Stale threshold, ns.
        threshold_ns: u64,
    },
    /// The price's source age crossed the source threshold.
    SourceAge {
        /// Source time of the stored price, ns (provider clock).
        source_time: u64,
        /// Clock offset in force, ns.
        offset: i128,
        /// Source threshold, ns.
        threshold_ns: u64,
    },
    /// The feed's clock offset changed (auto mode), moving the source age across its threshold.
    Offset {
        /// Offset before, ns.
        from: i128,
        /// Offset after, ns.
        to: i128,
    },
    /// The state table was full: the message for this new symbol was dropped.
    TableFull,
    /// The handler's state differed from the one derived here and was adopted (never expected).
    Reconciled,
}

/// A detail of an event, listed after its cause.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Note {
    /// A delta feed's first quote: suspect until a snapshot.
    NoSnapshotYet,
    /// The first valid price was stored.
    FirstPrice {
        /// Bid.
        bid: f64,
        /// Ask.
        ask: f64,
    },
    /// The price became invalid.
    InvalidPrice {
        /// Bid.
        bid: f64,
        /// Ask.
        ask: f64,
    },
    /// Another invalid price.
    StillInvalid {
        /// Bid.
        bid: f64,
        /// Ask.
        ask: f64,
    },
    /// A valid price after an invalid one.
    ValidAgain,
    /// A snapshot cleared suspect.
    RepairsSuspect,
    /// A full feed's quote cleared suspect.
    ClearsSuspect,
    /// Liveness after the stale threshold had passed.
    EndsSilence {
        /// Silence, ns.
        silent_ns: u64,
    },
    /// A heartbeat that reveals a gap does not prove liveness.
    NotLiveness,
    /// The stored price's source time is already past the source threshold.
    SourceOld {
        /// Source age, ns.
        age_ns: i128,
        /// Source threshold, ns.
        threshold_ns: u64,
    },
    /// A newer source time ended stale_at_source.
    SourceFresh,
    /// Source age after a new clock offset.
    SourceAgeNow {
        /// Source age, ns.
        age_ns: i128,
        /// Source threshold, ns.
        threshold_ns: u64,
    },
}

/// One event in a symbol's history.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// When: the datagram's arrival, or the exact crossing time, ns.
    pub time: u64,
    /// What happened.
    pub cause: Cause,
    /// Details.
    pub notes: Vec<Note>,
    /// The line (destination) of the datagram, for message events.
    pub line: Option<SocketAddrV4>,
    /// Verdict before.
    pub before: Reasons,
    /// Verdict after.
    pub after: Reasons,
}

impl Event {
    /// True when the verdict changed.
    pub fn changed(&self) -> bool {
        self.before != self.after
    }

    /// The event as one line of `--explain` output (no newline); `origin`
    /// is the capture's first arrival, for relative times.
    pub fn render(&self, origin: u64) -> String {
        let mut s = format!(
            "{}  {:>15}  {}",
            iso(self.time),
            rel(self.time, origin),
            describe(self, origin)
        );
        if let Some(l) = self.line {
            let _ = write!(s, ", line {l}");
        }
        if self.changed() {
            let _ = write!(s, "   {} -> {}", self.before, self.after);
        } else {
            let _ = write!(s, "   {} (unchanged)", self.after);
        }
        s
    }
}

/// Marker kinds on a timeline band.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MarkKind {
    Gap = 0,
    HeartbeatGap = 1,
    Snapshot = 2,
    Reset = 3,
}

/// One marker, or several merged in one time bucket.
#[derive(Debug, Clone, Copy)]
struct Mark {
    t: u64,
    until: u64,
    count: u64,
    ticks: u64,
    /// Sequence before and after (single markers only).
    from: u64,
    to: u64,
}

/// Markers a band keeps of each kind before merging neighbours (so at most
/// 1000 per band; about one per pixel and kind is all a reader can see).
const MARK_LIMIT: usize = 250;
/// Segments a band keeps before merging neighbours.
const SEG_LIMIT: usize = 4096;

/// A list of markers of one kind with time buckets that double in width
/// whenever it grows past its limit.
#[derive(Debug, Clone)]
struct Marks {
    res: u64,
    items: Vec<Mark>,
}

impl Marks {
    fn new() -> Marks {
        Marks {
            res: 1,
            items: Vec::new(),
        }
    }

    fn push(&mut self, origin: u64, m: Mark) {
        let b = |t: u64| t.saturating_sub(origin) / self.res;
        if let Some(last) = self.items.last_mut() {
            if b(last.t) == b(m.t) {
                merge_mark(last, &m);
                return;
            }
        }
        self.items.push(m);
        while self.items.len() > MARK_LIMIT {
            self.coarsen(origin, self.res.saturating_mul(2));
        }
    }

    fn coarsen(&mut self, origin: u64, res: u64) {
        self.res = res;
        let mut out: Vec<Mark> = Vec::with_capacity(self.items.len());
        for m in self.items.drain(..) {
            match out.last_mut() {
                Some(last)
                    if last.t.saturating_sub(origin) / res == m.t.saturating_sub(origin) / res =>
                {
                    merge_mark(last, &m)
                }
                _ => out.push(m),
            }
        }
        self.items = out;
    }
}

fn merge_mark(into: &mut Mark, m: &Mark) {
    into.count += m.count;
    into.ticks = into.ticks.saturating_add(m.ticks);
    into.until = into.until.max(m.until);
}

/// Verdict colours, ordered by severity (the worst is shown when several
/// verdicts share one bucket).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    Ok,
    NoQuote,
    Suspect,
    Invalid,
    Stale,
}

impl Class {
    fn of(r: Reasons) -> Class {
        if r.contains(Reasons::NO_QUOTE) {
            Class::NoQuote
        } else if r.contains(Reasons::STALE) || r.contains(Reasons::STALE_AT_SOURCE) {
            Class::Stale
        } else if r.contains(Reasons::INVALID_PRICE) {
            Class::Invalid
        } else if r.contains(Reasons::SUSPECT) {
            Class::Suspect
        } else {
            Class::Ok
        }
    }

    fn colour(self) -> &'static str {
        match self {
            Class::Ok => "#2e9d48",
            Class::NoQuote => "#a6a6a6",
            Class::Suspect => "#f0a202",
            Class::Invalid => "#8e44ad",
            Class::Stale => "#d62828",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Class::Ok => "ok",
            Class::NoQuote => "no_quote",
            Class::Suspect => "suspect",
            Class::Invalid => "invalid_price",
            Class::Stale => "stale",
        }
    }
}

/// A stretch of a band: from `start`, several verdicts (shown as the worst)
/// until `mixed_until`, then `last` until the next segment.
#[derive(Debug, Clone, Copy)]
struct Seg {
    start: u64,
    mixed_until: u64,
    worst: Class,
    last: Reasons,
}

/// One symbol's timeline: verdict segments and markers, bounded in size.
#[derive(Debug, Clone)]
struct Band {
    res: u64,
    segs: Vec<Seg>,
    marks: [Marks; 4],
}

impl Band {
    fn new() -> Band {
        Band {
            res: 1,
            segs: Vec::new(),
            marks: [Marks::new(), Marks::new(), Marks::new(), Marks::new()],
        }
    }

    fn verdict(&mut self, origin: u64, t: u64, r: Reasons) {
        let res = self.res;
        let b = |t: u64| t.saturating_sub(origin) / res;
        if let Some(last) = self.segs.last_mut() {
            if last.last == r {
                return;
            }
            if t <= last.start && last.mixed_until == last.start {
                // Same nanosecond (or a capture stepping back): nothing
                // lasted, the new verdict replaces it.
                last.last = r;
                last.worst = Class::of(r);
                let n = self.segs.len();
                if n >= 2 && self.segs[n - 2].last == r {
                    self.segs.pop();
                }
                return;
            }
            if b(t) == b(last.start) {
                last.worst = last.worst.max(Class::of(last.last));
                last.mixed_until = t.max(last.mixed_until);
                last.last = r;
                return;
            }
        }
        self.segs.push(Seg {
            start: t,
            mixed_until: t,
            worst: Class::of(r),
            last: r,
        });
        while self.segs.len() > SEG_LIMIT {
            self.coarsen(origin, self.res.saturating_mul(2));
        }
    }

    fn coarsen(&mut self, origin: u64, res: u64) {
        self.res = res;
        let b = |t: u64| t.saturating_sub(origin) / res;
        let mut out: Vec<Seg> = Vec::with_capacity(self.segs.len());
        for s in self.segs.drain(..) {
            match out.last_mut() {
                Some(a) if b(a.start) == b(s.start) => {
                    a.worst = a.worst.max(Class::of(a.last));
                    if s.mixed_until > s.start {
                        a.worst = a.worst.max(s.worst);
                        a.mixed_until = s.mixed_until;
                    } else {
                        a.mixed_until = s.start;
                    }
                    a.last = s.last;
                }
                _ => out.push(s),
            }
        }
        self.segs = out;
    }

    fn mark(&mut self, origin: u64, kind: MarkKind, m: Mark) {
        self.marks[kind as usize].push(origin, m);
    }

    /// Merges everything finer than `res` (render time: about a pixel).
    fn coarsen_to(&mut self, origin: u64, res: u64) {
        while self.res < res {
            self.coarsen(origin, self.res.saturating_mul(2));
        }
        for m in &mut self.marks {
            while m.res < res {
                m.coarsen(origin, m.res.saturating_mul(2));
            }
        }
    }
}

/// The state of one tracked symbol as of time `t`.
struct Tracker {
    feed: u16,
    symbol: Symbol,
    kind: FeedKind,
    th: Thresholds,
    /// `None` until the handler gave the symbol a slot.
    state: Option<SymbolState>,
    /// Clock offset in force.
    offset: i128,
    /// Time the verdict was last evaluated (the latest time seen).
    t: u64,
    verdict: Reasons,
    /// Keep events (the `--explain` target).
    keep: bool,
    events: Vec<Event>,
    band: Option<Band>,
    /// Packet number this tracker was last prepared for.
    prepared: u64,
    /// The handler had no slot for it in that packet (table full).
    dropped: bool,
    first_seen: u64,
}

impl Tracker {
    fn verdict_at(&self, t: u64) -> Reasons {
        evaluate(self.state.as_ref(), self.th, self.offset, t)
    }

    fn emit(&mut self, origin: u64, e: Event, notable: bool) {
        if e.changed() {
            if let Some(b) = &mut self.band {
                b.verdict(origin, e.time, e.after);
            }
        }
        self.verdict = e.after;
        if self.keep && (e.changed() || notable) {
            self.events.push(e);
        }
    }

    /// Lists the crossings of the stale and source thresholds in
    /// `(self.t, to]` with the state and offset as they are.
    fn advance(&mut self, origin: u64, to: u64) {
        let Some(s) = self.state else { return };
        let Some(p) = s.price else { return };
        let mut crossings = [
            (
                s.last_alive as i128 + self.th.stale_ns as i128 + 1,
                Reasons::STALE,
            ),
            (
                p.source_time as i128 + self.offset + self.th.source_ns as i128 + 1,
                Reasons::STALE_AT_SOURCE,
            ),
        ];
        crossings.sort_by_key(|c| c.0);
        for (c, bit) in crossings {
            if c <= self.t as i128 || c > to as i128 || self.verdict.contains(bit) {
                continue;
            }
            let t = c as u64;
            let before = self.verdict;
            let after = self.verdict_at(t);
            debug_assert_eq!(after, before | bit);
            self.t = t;
            let cause = if bit == Reasons::STALE {
                Cause::Silence {
                    last_alive: s.last_alive,
                    threshold_ns: self.th.stale_ns,
                }
            } else {
                Cause::SourceAge {
                    source_time: p.source_time,
                    offset: self.offset,
                    threshold_ns: self.th.source_ns,
                }
            };
            let e = Event {
                time: t,
                cause,
                notes: Vec::new(),
                line: None,
                before,
                after,
            };
            self.emit(origin, e, true);
        }
    }

    /// Brings the tracker to arrival time `a`: crossings up to and including `a`.
    fn prepare(&mut self, origin: u64, a: u64) {
        self.advance(origin, a);
        self.t = self.t.max(a);
        debug_assert_eq!(self.verdict, self.verdict_at(self.t));
    }

    fn on_offset(&mut self, origin: u64, a: u64, offset: i128) {
        self.prepare(origin, a);
        let (before, from) = (self.verdict, self.offset);
        self.offset = offset;
        let after = self.verdict_at(self.t);
        if after != before {
            let mut notes = Vec::new();
            if let Some(p) = self.state.and_then(|s| s.price) {
                notes.push(Note::SourceAgeNow {
                    age_ns: self.t as i128 - p.source_time as i128 - offset,
                    threshold_ns: self.th.source_ns,
                });
            }
            let e = Event {
                time: a,
                cause: Cause::Offset { from, to: offset },
                notes,
                line: None,
                before,
                after,
            };
            self.emit(origin, e, true);
        }
        self.verdict = after;
    }

    /// Applies one message, as the handler did, and lists what it changed.
    fn on_message(&mut self, origin: u64, m: &Message<'_>, a: u64, line: SocketAddrV4) {
        let s0 = self.state.unwrap_or_default();
        let mut s = s0;
        let mut notes = Vec::new();
        let mut mark = None;
        let mut price_message = None;
        let (cause, mut notable) = match *m {
            Message::Quote(q) => {
                let seq = q.sequence();
                let step = if !s0.seq.baseline {
                    Step::First
                } else if seq <= s0.seq.last_seq {
                    Step::Duplicate {
                        last: s0.seq.last_seq,
                    }
                } else if seq - s0.seq.last_seq == 1 {
                    Step::InOrder
                } else {
                    Step::Gap {
                        last: s0.seq.last_seq,
                        lost: seq - s0.seq.last_seq - 1,
                    }
                };
                let price = price_of(q);
                s.on_quote(self.kind, seq, price, a);
                if step == Step::First && self.kind == FeedKind::Delta {
                    notes.push(Note::NoSnapshotYet);
                }
                if let Step::Gap { last, lost } = step {
                    mark = Some((MarkKind::Gap, last, seq, lost));
                }
                if !matches!(step, Step::Duplicate { .. }) {
                    price_message = Some(price);
                }
                let notable = !matches!(step, Step::InOrder | Step::Duplicate { .. });
                (Cause::Quote { seq, step }, notable)
            }
            Message::Snapshot(v) => {
                let seq = v.sequence();
                let last = s0.seq.baseline.then_some(s0.seq.last_seq);
                let price = price_of(v);
                s.on_snapshot(seq, price, a);
                let kind = match last {
                    Some(l) if seq < l => MarkKind::Reset,
                    _ => MarkKind::Snapshot,
                };
                mark = Some((kind, last.unwrap_or(seq), seq, 0));
                price_message = Some(price);
                // A snapshot in step with the sequence (the routine one, or
                // line B's copy of it) explains nothing unless it repairs.
                let notable = last != Some(seq) || s0.suspect;
                (Cause::Snapshot { seq, last }, notable)
            }
            Message::Heartbeat(h) => {
                let next_expected = h.next_expected();
                let last = s0.seq.last_seq;
                let step = if !s0.seq.baseline {
                    BeatStep::First
                } else if next_expected > last && next_expected - last > 1 {
                    BeatStep::Gap {
                        last,
                        lost: next_expected - last - 1,
                    }
                } else {
                    BeatStep::Alive
                };
                s.on_heartbeat(next_expected, a);
                if let BeatStep::Gap { last, lost } = step {
                    notes.push(Note::NotLiveness);
                    mark = Some((MarkKind::HeartbeatGap, last, next_expected, lost));
                }
                let notable = step != BeatStep::Alive;
                (
                    Cause::Heartbeat {
                        next_expected,
                        step,
                    },
                    notable,
                )
            }
            Message::Unknown { .. } => return,
        };
        let before = self.verdict;
        let now = self.t;
        let after = evaluate(Some(&s), self.th, self.offset, now);
        if let Some(p) = price_message {
            if s0.price.is_none() && s.price.is_some() {
                notes.push(Note::FirstPrice {
                    bid: p.bid,
                    ask: p.ask,
                });
            }
            if s.invalid {
                notable = true;
                notes.push(if s0.invalid {
                    Note::StillInvalid {
                        bid: p.bid,
                        ask: p.ask,
                    }
                } else {
                    Note::InvalidPrice {
                        bid: p.bid,
                        ask: p.ask,
                    }
                });
            } else if s0.invalid {
                notes.push(Note::ValidAgain);
            }
        }
        if s0.suspect && !s.suspect {
            notes.push(if matches!(cause, Cause::Snapshot { .. }) {
                Note::RepairsSuspect
            } else {
                Note::ClearsSuspect
            });
        }
        if before.contains(Reasons::STALE) && !after.contains(Reasons::STALE) {
            notes.push(Note::EndsSilence {
                silent_ns: a.saturating_sub(s0.last_alive),
            });
        }
        if let Some(p) = s.price {
            if after.contains(Reasons::STALE_AT_SOURCE)
                && !before.contains(Reasons::STALE_AT_SOURCE)
            {
                notes.push(Note::SourceOld {
                    age_ns: now as i128 - p.source_time as i128 - self.offset,
                    threshold_ns: self.th.source_ns,
                });
            } else if before.contains(Reasons::STALE_AT_SOURCE)
                && !after.contains(Reasons::STALE_AT_SOURCE)
            {
                notes.push(Note::SourceFresh);
            }
        }
        self.state = Some(s);
        if let (Some(b), Some((kind, from, to, ticks))) = (&mut self.band, mark) {
            b.mark(
                origin,
                kind,
                Mark {
                    t: a,
                    until: a,
                    count: 1,
                    ticks,
                    from,
                    to,
                },
            );
        }
        let e = Event {
            time: a,
            cause,
            notes,
            line: Some(line),
            before,
            after,
        };
        self.emit(origin, e, notable);
    }
}

fn price_of(v: PriceView<'_>) -> Price {
    Price {
        bid: v.bid(),
        ask: v.ask(),
        source_time: v.source_time(),
    }
}

/// Equal states, prices compared bit for bit (a NaN is never stored, but
/// this must not depend on it).
fn same_state(a: Option<&SymbolState>, b: Option<&SymbolState>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            let price =
                |p: Option<Price>| p.map(|p| (p.bid.to_bits(), p.ask.to_bits(), p.source_time));
            a.seq == b.seq
                && a.suspect == b.suspect
                && a.invalid == b.invalid
                && a.last_alive == b.last_alive
                && price(a.price) == price(b.price)
        }
        _ => false,
    }
}

/// Which symbols are tracked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Nothing,
    Symbol(u16, Symbol),
    Feed(u16),
    All,
}

struct FeedInfo {
    config: FeedConfig,
    offset: i128,
    trackers: Vec<usize>,
}

/// What `--at` needs: the state and offset in force at the time asked.
#[derive(Debug, Clone, Copy)]
struct AtState {
    state: Option<SymbolState>,
    offset: i128,
    th: Thresholds,
}

/// The replay observer behind `--explain`, `--at` and `--timeline`.
pub struct Forensics {
    feeds: Vec<FeedInfo>,
    scope: Scope,
    target: Option<(u16, Symbol)>,
    timeline: bool,
    at: Option<u64>,
    at_state: Option<AtState>,
    trackers: Vec<Tracker>,
    index: HashMap<(u16, Symbol), usize>,
    origin: Option<u64>,
    span: (u64, u64),
    packets: u64,
    finished: bool,
}

impl Forensics {
    /// An observer for `feeds` (the configuration's, in order). With a
    /// `target` (feed id, symbol) its events are kept for
    /// [`explanation`](Self::explanation); with `timeline`, every symbol
    /// is drawn (only the target's feed's when there is a target); `at`
    /// keeps the target's state at that time for [`answer_at`](Self::answer_at).
    pub fn new(
        feeds: &[FeedConfig],
        target: Option<(u16, Symbol)>,
        timeline: bool,
        at: Option<u64>,
    ) -> Forensics {
        let scope = match (target, timeline) {
            (Some((f, _)), true) => Scope::Feed(f),
            (Some((f, s)), false) => Scope::Symbol(f, s),
            (None, true) => Scope::All,
            (None, false) => Scope::Nothing,
        };
        Forensics {
            feeds: feeds
                .iter()
                .map(|f| FeedInfo {
                    config: f.clone(),
                    offset: match f.offset {
                        crate::clock::OffsetMode::Fixed(v) => v as i128,
                        crate::clock::OffsetMode::Auto { .. } => 0,
                    },
                    trackers: Vec::new(),
                })
                .collect(),
            scope,
            target,
            timeline,
            at,
            at_state: None,
            trackers: Vec::new(),
            index: HashMap::new(),
            origin: None,
            span: (u64::MAX, 0),
            packets: 0,
            finished: false,
        }
    }

    fn tracks(&self, feed: u16, symbol: Symbol) -> bool {
        match self.scope {
            Scope::Nothing => false,
            Scope::Symbol(f, s) => f == feed && s == symbol,
            Scope::Feed(f) => f == feed,
            Scope::All => true,
        }
    }

    fn tracker(&mut self, feed: u16, symbol: Symbol, a: u64) -> Option<usize> {
        if let Some(&i) = self.index.get(&(feed, symbol)) {
            return Some(i);
        }
        if !self.tracks(feed, symbol) {
            return None;
        }
        let f = self.feeds.get_mut(feed as usize)?;
        let i = self.trackers.len();
        self.trackers.push(Tracker {
            feed,
            symbol,
            kind: f.config.kind,
            th: f.config.thresholds_for(symbol),
            state: None,
            offset: f.offset,
            t: a,
            verdict: Reasons::NO_QUOTE,
            keep: self.target == Some((feed, symbol)),
            events: Vec::new(),
            band: self.timeline.then(Band::new),
            prepared: 0,
            dropped: false,
            first_seen: a,
        });
        f.trackers.push(i);
        self.index.insert((feed, symbol), i);
        Some(i)
    }

    fn keep_at_state(&mut self) {
        if self.at.is_none() || self.at_state.is_some() {
            return;
        }
        let Some((feed, symbol)) = self.target else {
            return;
        };
        let Some(f) = self.feeds.get(feed as usize) else {
            return;
        };
        let tracker = self.index.get(&(feed, symbol)).map(|&i| &self.trackers[i]);
        self.at_state = Some(AtState {
            state: tracker.and_then(|t| t.state),
            offset: f.offset,
            th: tracker.map_or(f.config.thresholds_for(symbol), |t| t.th),
        });
    }

    /// Ends the replay: lists the threshold crossings that still happen
    /// after the last datagram. Call once, after the replay.
    pub fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.keep_at_state();
        let origin = self.origin.unwrap_or(0);
        for t in &mut self.trackers {
            t.advance(origin, u64::MAX);
        }
    }

    /// The capture's first arrival (the origin of relative times), if any datagram was read.
    pub fn origin(&self) -> Option<u64> {
        self.origin
    }

    /// The capture's latest arrival, if any datagram was read: an `--at`
    /// later than this is past the capture's end.
    pub fn last_arrival(&self) -> Option<u64> {
        self.origin.map(|_| self.span.1)
    }

    /// The events kept for the target, in capture order; `None` if it was never seen.
    pub fn events(&self) -> Option<&[Event]> {
        let (feed, symbol) = self.target?;
        let &i = self.index.get(&(feed, symbol))?;
        Some(&self.trackers[i].events)
    }

    /// The `--explain` text: a header line (`# …`), then one event per
    /// line: every event that changed the target's verdict, and with `all`
    /// also those that did not but explain it (gaps on a full feed,
    /// snapshots, heartbeat gaps, invalid prices, …). A symbol never seen
    /// gets one line saying so.
    pub fn explanation(&self, all: bool) -> String {
        let Some((feed, symbol)) = self.target else {
            return String::new();
        };
        let f = &self.feeds[feed as usize];
        let Some(events) = self.events() else {
            return format!(
                "{} {symbol}: never seen in this capture: every check answers no_quote\n",
                f.config.name
            );
        };
        let origin = self.origin.unwrap_or(0);
        let mut out = self.header(feed, symbol);
        for e in events.iter().filter(|e| all || e.changed()) {
            out.push_str(&e.render(origin));
            out.push('\n');
        }
        out
    }

    fn header(&self, feed: u16, symbol: Symbol) -> String {
        let f = &self.feeds[feed as usize];
        let th = self
            .index
            .get(&(feed, symbol))
            .map_or(f.config.thresholds_for(symbol), |&i| self.trackers[i].th);
        let kind = match f.config.kind {
            FeedKind::Full => "full",
            FeedKind::Delta => "delta",
        };
        let offset = match f.config.offset {
            crate::clock::OffsetMode::Fixed(v) => format!("fixed {}", dur(v as i128)),
            crate::clock::OffsetMode::Auto { window_ns } => {
                format!("auto over {}", dur(window_ns as i128))
            }
        };
        format!(
            "# {} {symbol}: {kind} feed, stale after {} of silence, stale_at_source after {} of source age, clock offset {offset}; times from the capture's first datagram at {}\n",
            f.config.name,
            dur(th.stale_ns as i128),
            dur(th.source_ns as i128),
            iso(self.origin.unwrap_or(0)),
        )
    }

    /// The `--at` text: the verdict at `time` (the replay's own answer,
    /// `answer`), the event that set each reason (or, when ok, the event
    /// since which it is ok), and the state in force.
    pub fn answer_at(&self, time: u64, answer: Reasons) -> String {
        let Some((feed, symbol)) = self.target else {
            return String::new();
        };
        let name = &self.feeds[feed as usize].config.name;
        let origin = self.origin.unwrap_or(time);
        let mut out = format!(
            "{name} {symbol} at {} ({}): {answer}\n",
            iso(time),
            rel(time, origin).trim_start()
        );
        let events: Vec<&Event> = self
            .events()
            .unwrap_or(&[])
            .iter()
            .filter(|e| e.time <= time)
            .collect();
        let derived = events.last().map_or(Reasons::NO_QUOTE, |e| e.after);
        let Some(last) = events.last() else {
            let first = self
                .index
                .get(&(feed, symbol))
                .map(|&i| self.trackers[i].first_seen);
            match first {
                Some(t) => {
                    let _ = writeln!(
                        out,
                        "  no_quote: not seen yet (first seen at {}, {})",
                        iso(t),
                        rel(t, origin).trim_start()
                    );
                }
                None => out.push_str("  no_quote: never seen in this capture\n"),
            }
            return out;
        };
        if answer.is_ok() {
            if let Some(e) = events.iter().rev().find(|e| e.changed()) {
                let _ = writeln!(out, "  ok since        {}", e.render(origin));
                if !std::ptr::eq(*e, *last) {
                    let _ = writeln!(out, "  latest event    {}", last.render(origin));
                }
            }
        } else {
            for (bit, reason) in Reasons::ORDER {
                if !answer.contains(bit) {
                    continue;
                }
                let cause = events
                    .iter()
                    .rev()
                    .find(|e| e.after.contains(bit) && !e.before.contains(bit));
                match cause {
                    Some(e) => {
                        let _ = writeln!(out, "  {reason:<15} {}", e.render(origin));
                    }
                    None => {
                        let _ = writeln!(
                            out,
                            "  {reason:<15} since the symbol was first seen (no valid price stored yet); last event: {}",
                            last.render(origin)
                        );
                    }
                }
            }
        }
        if let Some(a) = &self.at_state {
            out.push_str(&state_line(a, time, origin));
        }
        if derived != answer {
            let _ = writeln!(
                out,
                "  note: the events imply {derived}, the replay answered {answer}"
            );
        }
        out
    }

    /// The `--timeline` SVG: one band per tracked symbol (feed order, then
    /// symbol name), coloured by verdict over the capture's span, with
    /// markers for gaps, heartbeat-revealed gaps, snapshots and provider
    /// resets, and a time axis. `title` names the capture.
    pub fn timeline_svg(&self, title: &str) -> String {
        svg(self, title)
    }
}

impl Observer for Forensics {
    fn before(&mut self, _handler: &Handler, _feed: Option<u16>, d: &Datagram<'_>) {
        if self.origin.is_none() {
            self.origin = Some(d.time_ns);
        }
        self.span = (self.span.0.min(d.time_ns), self.span.1.max(d.time_ns));
        if let Some(at) = self.at {
            if d.time_ns > at {
                self.keep_at_state();
            }
        }
    }

    fn after(
        &mut self,
        handler: &Handler,
        feed: u16,
        d: &Datagram<'_>,
        result: Result<(), crate::protocol::Rejected>,
    ) {
        // A rejected packet changes nothing but counters.
        if result.is_err() || self.scope == Scope::Nothing {
            return;
        }
        let origin = self.origin.unwrap_or(d.time_ns);
        let a = d.time_ns;
        let Some(hf) = handler.feeds().get(feed as usize) else {
            return;
        };
        let offset = hf.clock.offset();
        let Some(f) = self.feeds.get_mut(feed as usize) else {
            return;
        };
        if offset != f.offset {
            f.offset = offset;
            for &i in &f.trackers {
                self.trackers[i].on_offset(origin, a, offset);
            }
        }
        let Ok(packet) = Packet::new_checked(d.payload) else {
            return;
        };
        self.packets += 1;
        let mut touched: Vec<usize> = Vec::new();
        for m in packet.messages() {
            let Some(symbol) = m.symbol() else { continue };
            let Some(i) = self.tracker(feed, symbol, a) else {
                continue;
            };
            let t = &mut self.trackers[i];
            if t.prepared != self.packets {
                t.prepared = self.packets;
                t.prepare(origin, a);
                // The handler gives a new symbol a slot at its first message,
                // or never in this packet when the table is full.
                t.dropped = handler.table().find(feed, symbol).is_none();
                if t.dropped {
                    let e = Event {
                        time: a,
                        cause: Cause::TableFull,
                        notes: Vec::new(),
                        line: Some(d.dst),
                        before: t.verdict,
                        after: t.verdict,
                    };
                    t.emit(origin, e, true);
                }
                touched.push(i);
            }
            if !t.dropped {
                t.on_message(origin, &m, a, d.dst);
            }
        }
        for i in touched {
            let t = &mut self.trackers[i];
            let record = handler
                .table()
                .find(feed, t.symbol)
                .map(|slot| handler.table().record(slot));
            if let Some(r) = &record {
                t.th = r.thresholds;
            }
            let actual = record.map(|r| r.state);
            if !same_state(actual.as_ref(), t.state.as_ref()) {
                t.state = actual;
                let before = t.verdict;
                let after = t.verdict_at(t.t);
                let e = Event {
                    time: a,
                    cause: Cause::Reconciled,
                    notes: Vec::new(),
                    line: Some(d.dst),
                    before,
                    after,
                };
                t.emit(origin, e, true);
            }
        }
    }
}

// ---- text ----------------------------------------------------------------

fn describe(e: &Event, origin: u64) -> String {
    let mut s = match e.cause {
        Cause::Quote { seq, step } => match step {
            Step::First => format!("first quote seq {seq}"),
            Step::InOrder => format!("quote seq {seq}"),
            Step::Gap { last, lost } => format!("gap: {} lost (seq {last} -> {seq})", ticks(lost)),
            Step::Duplicate { last } => {
                format!("duplicate quote seq {seq} (last seq {last}), ignored")
            }
        },
        Cause::Heartbeat {
            next_expected,
            step,
        } => match step {
            BeatStep::First => format!(
                "first heartbeat (next expected {next_expected}): sequence baseline, suspect, no price yet"
            ),
            BeatStep::Gap { last, lost } => format!(
                "heartbeat reveals a gap: {} lost (last seq {last}, next expected {next_expected})",
                ticks(lost)
            ),
            BeatStep::Alive => format!("heartbeat (next expected {next_expected})"),
        },
        Cause::Snapshot { seq, last } => match last {
            None => format!("first snapshot seq {seq}"),
            Some(l) if seq < l => format!("provider reset: seq {l} -> {seq} (snapshot)"),
            Some(l) if seq > l => format!("snapshot seq {seq} (last seq {l})"),
            Some(_) => format!("snapshot seq {seq}"),
        },
        Cause::Silence {
            last_alive,
            threshold_ns,
        } => format!(
            "silence: no tick nor gap-free heartbeat since {}, over the {} stale threshold",
            rel(last_alive, origin),
            dur(threshold_ns as i128)
        ),
        Cause::SourceAge {
            source_time,
            offset,
            threshold_ns,
        } => format!(
            "source age: price made at {} (source time + clock offset {}) is now older than the {} source threshold",
            rel_i(source_time as i128 + offset, origin),
            dur(offset),
            dur(threshold_ns as i128)
        ),
        Cause::Offset { from, to } => format!("clock offset {} -> {}", dur(from), dur(to)),
        Cause::TableFull => "state table full: message for this new symbol dropped".to_string(),
        Cause::Reconciled => "state differs from the handler's: adopted the handler's".to_string(),
    };
    for n in &e.notes {
        s.push_str("; ");
        match *n {
            Note::NoSnapshotYet => s.push_str("delta feed: suspect until a snapshot"),
            Note::FirstPrice { bid, ask } => {
                let _ = write!(s, "first valid price (bid {bid}, ask {ask})");
            }
            Note::InvalidPrice { bid, ask } => {
                let _ = write!(s, "invalid price (bid {bid}, ask {ask})");
            }
            Note::StillInvalid { bid, ask } => {
                let _ = write!(s, "price still invalid (bid {bid}, ask {ask})");
            }
            Note::ValidAgain => s.push_str("valid price again"),
            Note::RepairsSuspect => s.push_str("repairs suspect"),
            Note::ClearsSuspect => s.push_str("full feed: clears suspect"),
            Note::EndsSilence { silent_ns } => {
                let _ = write!(s, "ends {} of silence", dur(silent_ns as i128));
            }
            Note::NotLiveness => s.push_str("not liveness"),
            Note::SourceOld {
                age_ns,
                threshold_ns,
            } => {
                let _ = write!(
                    s,
                    "source time already {} old (threshold {})",
                    dur(age_ns),
                    dur(threshold_ns as i128)
                );
            }
            Note::SourceFresh => s.push_str("fresh source time"),
            Note::SourceAgeNow {
                age_ns,
                threshold_ns,
            } => {
                let _ = write!(
                    s,
                    "source age now {} (threshold {})",
                    dur(age_ns),
                    dur(threshold_ns as i128)
                );
            }
        }
    }
    s
}

fn ticks(n: u64) -> String {
    if n == 1 {
        "1 tick".to_string()
    } else {
        format!("{n} ticks")
    }
}

fn state_line(a: &AtState, time: u64, origin: u64) -> String {
    let Some(s) = a.state else {
        return "  state: none (no message applied yet)\n".to_string();
    };
    let mut out = format!(
        "  state: last seq {}, {} lost, {} duplicates, suspect {}, invalid {}",
        s.seq.last_seq,
        ticks(s.seq.ticks_lost),
        s.seq.duplicates,
        s.suspect,
        s.invalid
    );
    if s.last_alive != 0 {
        let _ = write!(
            out,
            ", last alive {} ({} before; stale after {})",
            rel(s.last_alive, origin),
            dur(time as i128 - s.last_alive as i128),
            dur(a.th.stale_ns as i128)
        );
    }
    match s.price {
        Some(p) => {
            let _ = write!(
                out,
                ", price bid {} ask {}, source age {} at clock offset {} (stale_at_source after {})",
                p.bid,
                p.ask,
                dur(time as i128 - p.source_time as i128 - a.offset),
                dur(a.offset),
                dur(a.th.source_ns as i128)
            );
        }
        None => out.push_str(", no valid price"),
    }
    out.push('\n');
    out
}

/// `+1234.567890 ms` since `origin` (negative before it).
fn rel(t: u64, origin: u64) -> String {
    rel_i(t as i128, origin)
}

fn rel_i(t: i128, origin: u64) -> String {
    let d = t - origin as i128;
    let sign = if d < 0 { '-' } else { '+' };
    let d = d.unsigned_abs();
    format!("{sign}{}.{:06} ms", d / 1_000_000, d % 1_000_000)
}

/// A duration in ms, as short as exact: `500 ms`, `120.03 ms`, `-40 ms`.
fn dur(ns: i128) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let n = ns.unsigned_abs();
    let (ms, frac) = (n / 1_000_000, n % 1_000_000);
    if frac == 0 {
        format!("{sign}{ms} ms")
    } else {
        let f = format!("{frac:06}");
        format!("{sign}{ms}.{} ms", f.trim_end_matches('0'))
    }
}

/// UTC, ns: `2026-01-05T09:00:01.234567890Z`.
pub fn iso(t: u64) -> String {
    let secs = t / 1_000_000_000;
    let nanos = t % 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses a time for `--at`: ns since the Unix epoch, or UTC as
/// `YYYY-MM-DDTHH:MM:SS[.fraction][Z]` (up to 9 fractional digits).
pub fn parse_time(s: &str) -> Result<u64, String> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse::<u64>()
            .map_err(|_| format!("'{s}' is too large for ns since the Unix epoch"));
    }
    let bad = || {
        format!(
            "'{s}' is neither ns since the Unix epoch nor a UTC time like 2026-01-05T09:00:02.5Z"
        )
    };
    let t = s.strip_suffix('Z').unwrap_or(s);
    let (date, time) = t.split_once(['T', ' ']).ok_or_else(bad)?;
    let num = |x: &str, len: usize| -> Result<u32, String> {
        if x.len() == len && x.bytes().all(|b| b.is_ascii_digit()) {
            x.parse::<u32>().map_err(|_| bad())
        } else {
            Err(bad())
        }
    };
    let mut dp = date.split('-');
    let (y, mo, d) = match (dp.next(), dp.next(), dp.next(), dp.next()) {
        (Some(y), Some(m), Some(d), None) => (num(y, 4)?, num(m, 2)?, num(d, 2)?),
        _ => return Err(bad()),
    };
    let (hms, frac) = match time.split_once('.') {
        Some((h, f)) => (h, Some(f)),
        None => (time, None),
    };
    let mut tp = hms.split(':');
    let (h, mi, se) = match (tp.next(), tp.next(), tp.next(), tp.next()) {
        (Some(h), Some(m), Some(s), None) => (num(h, 2)?, num(m, 2)?, num(s, 2)?),
        _ => return Err(bad()),
    };
    let days_in_month = match mo {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        _ => return Err(bad()),
    };
    if y < 1970 || d == 0 || d > days_in_month || h > 23 || mi > 59 || se > 59 {
        return Err(bad());
    }
    let nanos = match frac {
        None => 0,
        Some(f) if !f.is_empty() && f.len() <= 9 && f.bytes().all(|b| b.is_ascii_digit()) => {
            format!("{f:0<9}").parse::<u64>().map_err(|_| bad())?
        }
        Some(_) => return Err(bad()),
    };
    let days = days_from_civil(i64::from(y), mo, d) as u64;
    let secs = days * 86_400 + u64::from(h) * 3600 + u64::from(mi) * 60 + u64::from(se);
    secs.checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(nanos))
        .ok_or_else(bad)
}

// ---- SVG -----------------------------------------------------------------

const LEFT: f64 = 150.0;
const PLOT_W: f64 = 1200.0;
const RIGHT: f64 = 40.0;
const TOP: f64 = 78.0;
const BAND_H: f64 = 16.0;
const BAND_STEP: f64 = 30.0;

/// Escapes text for XML content and attribute values.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// A round step of about `span / n`: 1, 2 or 5 × 10^k ns.
fn nice_step(span: u64, n: u64) -> u64 {
    let raw = (span / n).max(1);
    let mut p = 1u64;
    while p <= raw / 10 {
        p *= 10;
    }
    for m in [1, 2, 5, 10] {
        if p.saturating_mul(m) >= raw {
            return p.saturating_mul(m);
        }
    }
    p.saturating_mul(10)
}

/// An axis label for `d` ns in the unit `step` suggests.
fn axis_label(d: u64, step: u64) -> String {
    let (div, unit) = if step >= 100_000_000 {
        (1_000_000_000u64, "s")
    } else if step >= 100_000 {
        (1_000_000, "ms")
    } else if step >= 100 {
        (1_000, "µs")
    } else {
        (1, "ns")
    };
    let (int, frac) = (d / div, d % div);
    if frac == 0 {
        format!("{int} {unit}")
    } else {
        let width = div.to_string().len() - 1;
        let f = format!("{frac:0width$}");
        format!("{int}.{} {unit}", f.trim_end_matches('0'))
    }
}

fn svg(fx: &Forensics, title: &str) -> String {
    let origin = fx.origin.unwrap_or(0);
    let (start, end) = if fx.span.0 <= fx.span.1 {
        fx.span
    } else {
        (origin, origin)
    };
    let span = (end - start).max(1);
    let x = |t: u64| LEFT + (t.clamp(start, end) - start) as f64 / span as f64 * PLOT_W;
    // About one bucket per pixel: markers and mixed spans merge below that.
    let px_res = (span as f64 / PLOT_W).ceil() as u64;

    let mut order: Vec<&Tracker> = fx.trackers.iter().filter(|t| t.band.is_some()).collect();
    order.sort_by_key(|t| (t.feed, t.symbol.to_string()));
    let width = LEFT + PLOT_W + RIGHT;
    let axis_y = TOP + order.len() as f64 * BAND_STEP + 4.0;
    let height = axis_y + 44.0;

    let mut o = String::new();
    let _ = writeln!(o, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(o, "<title>tickguard timeline: {}</title>", esc(title));
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="10" y="20" font-size="14" font-weight="bold">tickguard replay timeline: {}</text>"#,
        esc(title)
    );
    let _ = writeln!(
        o,
        r#"<text x="10" y="38">{} to {} ({}), {} symbol(s)</text>"#,
        iso(start),
        iso(end),
        dur(span as i128),
        order.len()
    );
    // Legend.
    let mut lx = 10.0;
    for c in [
        Class::Ok,
        Class::Suspect,
        Class::Stale,
        Class::Invalid,
        Class::NoQuote,
    ] {
        let label = match c {
            Class::Stale => "stale / stale_at_source",
            c => c.name(),
        };
        let _ = writeln!(
            o,
            r#"<rect x="{lx}" y="48" width="12" height="10" fill="{}"/><text x="{}" y="57">{label}</text>"#,
            c.colour(),
            lx + 16.0
        );
        lx += 28.0 + 5.8 * label.len() as f64;
    }
    let _ = writeln!(
        o,
        r#"<line x1="{lx}" y1="46" x2="{lx}" y2="58" stroke="{GAP_COLOUR}" stroke-width="1.5"/><text x="{}" y="57">gap</text>"#,
        lx + 5.0
    );
    lx += 38.0;
    let _ = writeln!(
        o,
        r#"<path d="M{lx},52 l-4,6 h8 z" fill="{HB_COLOUR}"/><text x="{}" y="57">heartbeat-revealed gap</text>"#,
        lx + 8.0
    );
    lx += 150.0;
    let _ = writeln!(
        o,
        r#"<path d="M{lx},47 l4,5 l-4,5 l-4,-5 z" fill="{SNAP_COLOUR}"/><text x="{}" y="57">snapshot</text>"#,
        lx + 8.0
    );
    lx += 70.0;
    let _ = writeln!(
        o,
        r#"<rect x="{}" y="45" width="2.5" height="14" fill="black"/><text x="{}" y="57">provider reset</text>"#,
        lx - 1.0,
        lx + 6.0
    );

    // Grid and axis.
    let step = nice_step(span, 10);
    let _ = writeln!(o, r##"<g class="axis" stroke="#333">"##);
    let _ = writeln!(
        o,
        r#"<line x1="{LEFT}" y1="{axis_y}" x2="{}" y2="{axis_y}"/>"#,
        LEFT + PLOT_W
    );
    let mut d = 0u64;
    while d <= span {
        let tx = x(start + d);
        let _ = writeln!(
            o,
            r##"<line x1="{tx:.2}" y1="{}" x2="{tx:.2}" y2="{axis_y}" stroke="#e4e4e4"/><line x1="{tx:.2}" y1="{axis_y}" x2="{tx:.2}" y2="{}"/><text x="{tx:.2}" y="{}" text-anchor="middle" stroke="none">{}</text>"##,
            TOP - 8.0,
            axis_y + 5.0,
            axis_y + 17.0,
            axis_label(d, step)
        );
        match d.checked_add(step) {
            Some(n) => d = n,
            None => break,
        }
    }
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" text-anchor="middle" stroke="none">time since {}</text>"#,
        LEFT + PLOT_W / 2.0,
        axis_y + 34.0,
        iso(start)
    );
    let _ = writeln!(o, "</g>");

    for (i, t) in order.iter().enumerate() {
        let y = TOP + i as f64 * BAND_STEP;
        let Some(band) = &t.band else { continue };
        let mut band = band.clone();
        band.coarsen_to(origin, px_res);
        let feed = &fx.feeds[t.feed as usize].config.name;
        let name = format!("{feed} {}", t.symbol);
        let _ = writeln!(
            o,
            r#"<g class="band" data-feed="{}" data-symbol="{}">"#,
            esc(feed),
            esc(&t.symbol.to_string())
        );
        let _ = writeln!(
            o,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            LEFT - 8.0,
            y + 12.0,
            esc(&name)
        );
        // The band as pieces of time with one colour each, then drawn as
        // runs: pieces of a pixel or more are drawn as they are; runs of
        // narrower ones become one rect in the worst colour among them, so
        // the rects follow what can be seen, not how often it flapped.
        let mut pieces: Vec<(u64, u64, Class, Option<Reasons>)> = Vec::new();
        let first = band.segs.first().map_or(end, |s| s.start);
        pieces.push((start, first, Class::NoQuote, Some(Reasons::NO_QUOTE)));
        for (k, s) in band.segs.iter().enumerate() {
            let next = band.segs.get(k + 1).map_or(end, |n| n.start);
            if s.mixed_until > s.start {
                pieces.push((s.start, s.mixed_until.min(next), s.worst, None));
            }
            pieces.push((s.mixed_until, next, Class::of(s.last), Some(s.last)));
        }
        let mut runs: Vec<(u64, u64, Class, Option<Reasons>)> = Vec::new();
        for (from, to, class, what) in pieces {
            let (from, to) = (from.clamp(start, end), to.clamp(start, end));
            if to <= from {
                continue;
            }
            let wide = x(to) - x(from) >= 1.0 && what.is_some();
            match runs.last_mut() {
                Some(r) if wide && r.3.is_some() && r.3 == what => r.1 = to,
                // A run of narrow pieces absorbs those no worse than its
                // colour; a worse one starts a new run once it is a pixel wide.
                Some(r) if !wide && r.3.is_none() && (class <= r.2 || x(r.1) - x(r.0) < 1.0) => {
                    r.1 = to;
                    r.2 = r.2.max(class);
                }
                _ => runs.push((from, to, class, if wide { what } else { None })),
            }
        }
        for (from, to, class, what) in runs {
            let what = match what {
                Some(r) => r.to_string(),
                None => format!("several verdicts (worst {})", class.name()),
            };
            let _ = writeln!(
                o,
                r#"<rect x="{:.2}" y="{y}" width="{:.2}" height="{BAND_H}" fill="{}"><title>{} {what} from {} to {}</title></rect>"#,
                x(from),
                (x(to) - x(from)).max(0.5),
                class.colour(),
                esc(&name),
                rel(from, origin),
                rel(to, origin)
            );
        }
        for (kind, marks) in [
            MarkKind::Gap,
            MarkKind::HeartbeatGap,
            MarkKind::Snapshot,
            MarkKind::Reset,
        ]
        .into_iter()
        .zip(&band.marks)
        {
            for m in &marks.items {
                if m.t < start || m.t > end {
                    continue;
                }
                let mx = x(m.t);
                let tip = esc(&mark_title(kind, m, origin));
                let _ = match kind {
                    MarkKind::Gap => writeln!(
                        o,
                        r#"<line x1="{mx:.2}" y1="{}" x2="{mx:.2}" y2="{}" stroke="{GAP_COLOUR}" stroke-width="1.5"><title>{tip}</title></line>"#,
                        y - 4.0,
                        y + 6.0
                    ),
                    MarkKind::HeartbeatGap => writeln!(
                        o,
                        r#"<path d="M{mx:.2},{} l-4,6 h8 z" fill="{HB_COLOUR}"><title>{tip}</title></path>"#,
                        y + BAND_H - 1.0
                    ),
                    MarkKind::Snapshot => writeln!(
                        o,
                        r#"<path d="M{mx:.2},{} l4,5 l-4,5 l-4,-5 z" fill="{SNAP_COLOUR}" stroke="white" stroke-width="0.5"><title>{tip}</title></path>"#,
                        y + BAND_H / 2.0 - 5.0
                    ),
                    MarkKind::Reset => writeln!(
                        o,
                        r#"<rect x="{:.2}" y="{}" width="2.5" height="{}" fill="black"><title>{tip}</title></rect>"#,
                        mx - 1.25,
                        y - 3.0,
                        BAND_H + 6.0
                    ),
                };
            }
        }
        let _ = writeln!(o, "</g>");
    }
    if let Some(at) = fx.at {
        if (start..=end).contains(&at) {
            let ax = x(at);
            let _ = writeln!(
                o,
                r#"<line x1="{ax:.2}" y1="{}" x2="{ax:.2}" y2="{axis_y}" stroke="black" stroke-dasharray="4,3"><title>--at {} ({})</title></line>"#,
                TOP - 10.0,
                iso(at),
                rel(at, origin)
            );
        }
    }
    let _ = writeln!(o, "</svg>");
    o
}

const GAP_COLOUR: &str = "#c00000";
const HB_COLOUR: &str = "#c00000";
const SNAP_COLOUR: &str = "#1f5fd6";

fn mark_title(kind: MarkKind, m: &Mark, origin: u64) -> String {
    if m.count == 1 {
        let at = rel(m.t, origin);
        return match kind {
            MarkKind::Gap => format!(
                "gap: {} lost (seq {} -> {}) at {at}",
                ticks(m.ticks),
                m.from,
                m.to
            ),
            MarkKind::HeartbeatGap => format!(
                "heartbeat reveals a gap: {} lost (last seq {}, next expected {}) at {at}",
                ticks(m.ticks),
                m.from,
                m.to
            ),
            MarkKind::Snapshot => format!("snapshot seq {} at {at}", m.to),
            MarkKind::Reset => format!("provider reset: seq {} -> {} at {at}", m.from, m.to),
        };
    }
    let what = match kind {
        MarkKind::Gap => format!("{} gaps, {} lost", m.count, ticks(m.ticks)),
        MarkKind::HeartbeatGap => format!(
            "{} heartbeat-revealed gaps, {} lost",
            m.count,
            ticks(m.ticks)
        ),
        MarkKind::Snapshot => format!("{} snapshots", m.count),
        MarkKind::Reset => format!("{} provider resets", m.count),
    };
    format!(
        "{what} from {} to {}",
        rel(m.t, origin),
        rel(m.until, origin)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_and_parse_round_trip() {
        let t = 1_767_603_601_234_567_890;
        assert_eq!(iso(t), "2026-01-05T09:00:01.234567890Z");
        assert_eq!(parse_time(&iso(t)), Ok(t));
        assert_eq!(parse_time("1767603601234567890"), Ok(t));
        assert_eq!(
            parse_time("2026-01-05T09:00:01.5Z"),
            Ok(1_767_603_601_500_000_000)
        );
        assert_eq!(
            parse_time("2026-01-05 09:00:01"),
            Ok(1_767_603_601_000_000_000)
        );
        assert_eq!(iso(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            parse_time("2024-02-29T23:59:59Z").map(iso),
            Ok("2024-02-29T23:59:59.000000000Z".into())
        );
        for bad in [
            "",
            "x",
            "2026-02-30T00:00:00Z",
            "2026-01-05T24:00:00Z",
            "2026-01-05T09:00:01.1234567891Z",
            "2026-1-05T09:00:01Z",
            "99999999999999999999",
        ] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
        // Every day of a few years.
        for day in 0..(366 * 4 + 20_000) {
            let (y, m, d) = civil_from_days(day);
            assert_eq!(days_from_civil(y, m, d), day);
        }
    }

    #[test]
    fn durations_and_relative_times() {
        assert_eq!(dur(500_000_000), "500 ms");
        assert_eq!(dur(120_030_000), "120.03 ms");
        assert_eq!(dur(-40_000_000), "-40 ms");
        assert_eq!(dur(1), "0.000001 ms");
        assert_eq!(rel(1_234_567_890 + 7, 7), "+1234.567890 ms");
        assert_eq!(rel(5, 7), "-0.000002 ms");
    }

    #[test]
    fn axis_steps_are_round() {
        assert_eq!(nice_step(6_000_000_000, 10), 1_000_000_000);
        assert_eq!(nice_step(3_000_000_000, 10), 500_000_000);
        assert_eq!(nice_step(1, 10), 1);
        assert_eq!(axis_label(1_500_000_000, 500_000_000), "1.5 s");
        assert_eq!(axis_label(250_000, 50_000_000), "0.25 ms");
        assert_eq!(axis_label(3_000, 1_000), "3 µs");
    }

    #[test]
    fn bands_stay_bounded_and_keep_the_last_verdict() {
        let mut b = Band::new();
        let r = [Reasons::empty(), Reasons::STALE];
        for i in 0..100_000u64 {
            b.verdict(0, i * 1000, r[(i % 2) as usize]);
            b.mark(
                0,
                MarkKind::Gap,
                Mark {
                    t: i * 1000,
                    until: i * 1000,
                    count: 1,
                    ticks: 2,
                    from: i,
                    to: i + 3,
                },
            );
        }
        b.verdict(0, 200_000_000, Reasons::SUSPECT);
        assert!(b.segs.len() <= SEG_LIMIT);
        assert!(b.marks[0].items.len() <= MARK_LIMIT);
        assert_eq!(
            b.marks[0].items.iter().map(|m| m.count).sum::<u64>(),
            100_000
        );
        assert_eq!(
            b.marks[0].items.iter().map(|m| m.ticks).sum::<u64>(),
            200_000
        );
        let last = b.segs.last().unwrap();
        assert_eq!(last.last, Reasons::SUSPECT);
        assert!(b.segs.iter().any(|s| s.worst == Class::Stale));
        b.coarsen_to(0, 1 << 20);
        assert!(b.segs.windows(2).all(|w| w[0].start < w[1].start));
    }

    #[test]
    fn same_nanosecond_flap_leaves_no_trace() {
        let mut b = Band::new();
        b.verdict(0, 10, Reasons::empty());
        b.verdict(0, 20, Reasons::INVALID_PRICE);
        b.verdict(0, 20, Reasons::empty());
        assert_eq!(b.segs.len(), 1);
        assert_eq!(b.segs[0].last, Reasons::empty());
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(esc(r#"a<b>&"c'"#), "a&lt;b&gt;&amp;&quot;c&apos;");
    }
}
