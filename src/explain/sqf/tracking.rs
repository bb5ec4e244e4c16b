//! The tracker that follows the replay: after each datagram the handler
//! applied, it applies the same messages to its own copy of each tracked
//! symbol's state with the rules' outcome-returning functions, and records
//! what each outcome did to the verdict.

use super::band::{Band, Mark, MarkKind};
use super::{AtState, BeatStep, Cause, Event, Forensics, Note, Scope, Step, MAX_DRAWN};
use crate::capture::Datagram;
use crate::handler::Handler;
use crate::protocol::sqf::rules::{
    self, BeatOutcome, FeedKind, Lag, Price, PriceCheck, QuoteOutcome, SnapStep, Suspect,
    SymbolState,
};
use crate::protocol::sqf::{Message, Packet, PriceView};
use crate::replay::Observer;
use crate::symbol::Symbol;
use crate::verdict::{evaluate, Reasons, Thresholds};
use std::net::SocketAddrV4;

/// The state of one tracked symbol as of time `t`.
pub(super) struct Tracker {
    pub(super) feed: u16,
    pub(super) symbol: Symbol,
    pub(super) kind: FeedKind,
    pub(super) th: Thresholds,
    /// `None` until the handler gave the symbol a slot.
    pub(super) state: Option<SymbolState>,
    /// Clock offset in force.
    pub(super) offset: i128,
    /// Time the verdict was last evaluated (the latest time seen).
    pub(super) t: u64,
    pub(super) verdict: Reasons,
    /// Keep events (the `--explain` target).
    pub(super) keep: bool,
    /// `--at`: no event after it is kept (an answer at it reads nothing
    /// later, so that it reaches an earlier moment whole).
    pub(super) at: Option<u64>,
    pub(super) events: Vec<Event>,
    /// Events forgotten, the oldest ([`crate::explain::keep`]).
    pub(super) forgotten: u64,
    pub(super) band: Option<Band>,
    /// Packet number this tracker was last prepared for.
    pub(super) prepared: u64,
    /// The handler had no slot for it in that packet (table full for the feed).
    pub(super) dropped: bool,
    pub(super) first_seen: u64,
    /// The last Snapshot applied: its (sequence, source time), whether it
    /// came on line B, and whether the other line's copy of it came: the
    /// handler's line arbitration of Snapshots (`sqf::feed`,
    /// `last_snapshot`).
    pub(super) last_snapshot: Option<((u64, u64), bool, bool)>,
    /// The Snapshot applied before the last one (the handler's
    /// `earlier_snapshot`, (0, 0) before one).
    pub(super) earlier_snapshot: (u64, u64),
    /// Whether the symbol's latest sequence was applied from line B, and
    /// whether the other line's copy of it came (the handler's `FROM_B`
    /// and `COPY_SEEN`): a line that brought it can no longer bring its
    /// copy of an older Snapshot.
    pub(super) latest_line: (bool, bool),
    /// The Snapshot that last reset the symbol (sequence, source time) and
    /// whether it came on line B, while the reset is open: the other line
    /// lags behind it (the handler's `open_reset`, `RESET_OPEN`).
    pub(super) open_reset: Option<((u64, u64), bool)>,
    /// The source time of the last price message applied, valid or not
    /// (the handler's `newest_source`; 0 before one).
    pub(super) newest_source: u64,
}

impl Tracker {
    /// What a message on line `on_b` is to the open reset, as the handler
    /// has it.
    fn lag(&self, on_b: bool, seq: Option<u64>, source: u64) -> Lag {
        match self.open_reset {
            Some((reset, from_b)) if from_b != on_b => Lag::behind(reset, seq, source),
            _ => Lag::No,
        }
    }

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
            crate::explain::keep(&mut self.events, &mut self.forgotten, self.at, e);
        }
    }

    /// Lists the crossings of the stale and source thresholds in
    /// `(self.t, to]` with the state and offset as they are.
    pub(super) fn advance(&mut self, origin: u64, to: u64) {
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
        // Both thresholds may cross in the same nanosecond: each gets its
        // event, the second's verdict having both bits.
        let from = self.t;
        for (c, bit) in crossings {
            if c <= from as i128 || c > to as i128 || self.verdict.contains(bit) {
                continue;
            }
            let t = c as u64;
            let before = self.verdict;
            let after = before | bit;
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
        debug_assert_eq!(self.verdict, self.verdict_at(self.t));
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
            // At the tracker's time, which a capture stepping back
            // leaves past `a`: what a check answers from then on (the
            // replay answers a check before the first datagram later).
            let e = Event {
                time: self.t,
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

    /// Applies one message with the rules the handler uses and lists what
    /// their outcome changed.
    /// `line`: the destination it came to; `on_b`: routed to a line other
    /// than the feed's first, as the handler takes it.
    fn on_message(&mut self, origin: u64, m: &Message<'_>, a: u64, line: SocketAddrV4, on_b: bool) {
        let s0 = self.state.unwrap_or_default();
        let mut s = s0;
        // The last sequence before the message (meaningful with a baseline).
        let last = s0.seq.last_seq;
        let mut notes = Vec::new();
        let mut mark = None;
        // The price a price message carried and what the rule made of it.
        let mut price_message = None;
        // The rule cleared suspect (a snapshot always does).
        let mut cleared = false;
        let (cause, mut notable) = match *m {
            Message::Quote(q) => {
                let seq = q.sequence();
                let price = price_of(q);
                // As the handler has it: the lagging line's, from before
                // the reset, dropped; one newer closes the reset.
                let lag = self.lag(on_b, None, q.source_time());
                if lag == Lag::Past {
                    self.open_reset = None;
                }
                // Or older than the last Snapshot, from the other line, whose
                // copy this line has not brought.
                let before_snapshot = matches!(lag, Lag::No | Lag::Past)
                    && self.last_snapshot.is_some_and(|((_, at), from_b, seen)| {
                        from_b != on_b && !seen && q.source_time() <= at
                    });
                let outcome = match (lag == Lag::Before || before_snapshot) && seq > last {
                    true => {
                        s.seq.duplicates = s.seq.duplicates.saturating_add(1);
                        // As the handler: told by its source time alone,
                        // the symbol is suspect.
                        s.suspect |= lag != Lag::Before;
                        None
                    }
                    false => Some(rules::quote_outcome(&mut s, self.kind, seq, price, a)),
                };
                let step = match outcome {
                    None if lag != Lag::Before => Step::BeforeSnapshot {
                        snapshot: self.last_snapshot.map_or(0, |((seq, _), _, _)| seq),
                    },
                    None => Step::BeforeReset {
                        reset: match self.open_reset {
                            Some(((seq, _), _)) => seq,
                            None => self.last_snapshot.map_or(0, |((seq, _), _, _)| seq),
                        },
                    },
                    Some(QuoteOutcome::Duplicate) => {
                        // The other line's copy of the latest sequence
                        // (not one sent before the reset).
                        let latest = seq == last && self.newest_source == q.source_time();
                        if self.latest_line.0 != on_b && latest && lag != Lag::Before {
                            self.latest_line.1 = true;
                        }
                        Step::Duplicate { last }
                    }
                    Some(QuoteOutcome::Applied {
                        lost,
                        first,
                        suspect,
                        price: check,
                    }) => {
                        self.latest_line = (on_b, false);
                        self.newest_source = q.source_time();
                        price_message = Some((price, check));
                        cleared = suspect == Suspect::Cleared;
                        // A delta feed's first price after a Heartbeat set
                        // the baseline: suspect shows now, until a snapshot.
                        if !first
                            && self.kind == FeedKind::Delta
                            && s.suspect
                            && s0.price.is_none()
                            && check == PriceCheck::Valid
                        {
                            notes.push(Note::NoSnapshotYet);
                        }
                        if first {
                            if suspect == Suspect::Set {
                                notes.push(Note::NoSnapshotYet);
                            }
                            Step::First
                        } else if lost > 0 {
                            mark = Some((MarkKind::Gap, last, seq, lost));
                            Step::Gap { last, lost }
                        } else {
                            Step::InOrder
                        }
                    }
                };
                let notable = !matches!(step, Step::InOrder | Step::Duplicate { .. });
                (Cause::Quote { seq, step }, notable)
            }
            Message::Snapshot(v) => {
                let seq = v.sequence();
                let key = (seq, v.source_time());
                let behind = s0.seq.baseline && seq < last;
                // As the handler has it: not that line's copy once the line
                // brought the latest sequence past it.
                let passed = self.latest_line.0 == on_b || self.latest_line.1;
                // The lagging line's, from before the reset or its copy of
                // it once the symbol moved on: dropped.
                let lag = self.lag(on_b, Some(seq), key.1);
                let candidate = self
                    .last_snapshot
                    .is_some_and(|(k, from_b, seen)| k == key && from_b != on_b && !seen);
                if matches!(lag, Lag::Copy | Lag::Past) {
                    self.open_reset = None;
                }
                // A routine one the other line lost, never applied (neither
                // of the last two; the handler's start at (0, 0)) and older
                // at its source than the last price message applied (valid
                // or not) or the price held, on the line that has not
                // brought it: its late copy.
                let applied_before = [
                    self.last_snapshot.map_or((0, 0), |(k, _, _)| k),
                    self.earlier_snapshot,
                ]
                .contains(&key);
                let held = s0.price.map_or(0, |p| p.source_time);
                let late = key.1 < self.newest_source.max(held) && !applied_before;
                let reset = match (lag, self.open_reset) {
                    (Lag::Before, Some(((reset, _), _))) => Some((reset, false)),
                    (Lag::Copy, _) if !candidate && behind && !passed => Some((seq, true)),
                    _ => None,
                };
                if let Some((reset, copy)) = reset {
                    s.seq.duplicates = s.seq.duplicates.saturating_add(1);
                    (Cause::SnapshotBeforeReset { seq, reset, copy }, true)
                } else if matches!(lag, Lag::No | Lag::Past) && behind && !passed && late {
                    s.seq.duplicates = s.seq.duplicates.saturating_add(1);
                    (Cause::SnapshotLate { seq }, true)
                } else {
                    let copy = self.last_snapshot.as_mut().filter(|(k, from_b, seen)| {
                        *k == key && *from_b != on_b && !*seen && !(behind && passed)
                    });
                    if let Some((_, _, seen)) = copy {
                        *seen = true;
                        if behind {
                            // The other line's copy, behind the symbol: dropped
                            // by the handler's line arbitration, as a duplicate.
                            let mut s = s0;
                            s.seq.duplicates = s.seq.duplicates.saturating_add(1);
                            self.state = Some(s);
                            return;
                        }
                    } else {
                        let last = self.last_snapshot.map_or((0, 0), |(k, _, _)| k);
                        if last != key {
                            self.earlier_snapshot = last;
                        }
                        self.last_snapshot = Some((key, on_b, false));
                        if behind {
                            self.open_reset = Some((key, on_b));
                        }
                    }
                    self.latest_line = (on_b, false);
                    let price = price_of(v);
                    let outcome = rules::snapshot_outcome(&mut s, seq, price, a);
                    self.newest_source = key.1;
                    price_message = Some((price, outcome.price));
                    cleared = true;
                    let (kind, from) = match outcome.step {
                        SnapStep::Reset => (MarkKind::Reset, last),
                        SnapStep::First => (MarkKind::Snapshot, seq),
                        SnapStep::InStep | SnapStep::Ahead => (MarkKind::Snapshot, last),
                    };
                    mark = Some((kind, from, seq, 0));
                    // A snapshot in step with the sequence (the routine one, or
                    // line B's copy of it) explains nothing unless it repairs.
                    let notable = outcome.step != SnapStep::InStep || s0.suspect;
                    let last = (outcome.step != SnapStep::First).then_some(last);
                    (Cause::Snapshot { seq, last }, notable)
                }
            }
            Message::Heartbeat(h) => {
                let old = s0.seq.baseline && h.next_expected() > last.saturating_add(1);
                let next_expected = h.next_expected();
                if let Some(((reset, _), _)) =
                    self.open_reset.filter(|&(_, from_b)| old && from_b != on_b)
                {
                    // The lagging line's, naming the old sequence or a
                    // loss: dropped by the handler, a duplicate, suspect.
                    s.seq.duplicates = s.seq.duplicates.saturating_add(1);
                    s.suspect = true;
                    let step = BeatStep::BeforeReset { reset };
                    (
                        Cause::Heartbeat {
                            next_expected,
                            step,
                        },
                        true,
                    )
                } else {
                    let step = match rules::heartbeat_outcome(&mut s, next_expected, a) {
                        BeatOutcome::First => BeatStep::First,
                        BeatOutcome::Gap(lost) => {
                            notes.push(Note::NotLiveness);
                            mark = Some((MarkKind::HeartbeatGap, last, next_expected, lost));
                            BeatStep::Gap { last, lost }
                        }
                        BeatOutcome::Alive => BeatStep::Alive,
                    };
                    let notable = step != BeatStep::Alive;
                    (
                        Cause::Heartbeat {
                            next_expected,
                            step,
                        },
                        notable,
                    )
                }
            }
            Message::Unknown { .. } => return,
        };
        let before = self.verdict;
        let now = self.t;
        let after = evaluate(Some(&s), self.th, self.offset, now);
        if let Some((p, check)) = price_message {
            match check {
                PriceCheck::Valid => {
                    if s0.price.is_none() {
                        notes.push(Note::FirstPrice {
                            bid: p.bid,
                            ask: p.ask,
                        });
                    }
                    if s0.invalid {
                        notes.push(Note::ValidAgain);
                    }
                }
                PriceCheck::Invalid => {
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
                }
            }
        }
        if s0.suspect && cleared {
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
            time: self.t,
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

impl Forensics {
    fn tracks(&self, feed: u16, symbol: Symbol) -> bool {
        match self.scope {
            Scope::Nothing => false,
            Scope::Symbol(f, s) => f == feed && s == symbol,
            Scope::Feed(f) => f == feed,
            Scope::All => true,
        }
    }

    /// The tracker of (feed, symbol), made at time `a` (the feed's
    /// latest arrival) if it has none and is tracked.
    fn tracker(&mut self, feed: u16, symbol: Symbol, a: u64) -> Option<usize> {
        if let Some(&i) = self.index.get(&(feed, symbol)) {
            return Some(i);
        }
        if !self.tracks(feed, symbol) {
            return None;
        }
        // The timeline's bands are bounded (the target always has one):
        // memory and the picture stay of a size whatever the capture.
        if self.trackers.len() >= MAX_DRAWN && self.target != Some((feed, symbol)) {
            self.undrawn = true;
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
            at: self.at,
            events: Vec::new(),
            forgotten: 0,
            band: self.timeline.then(Band::new),
            prepared: 0,
            dropped: false,
            first_seen: a,
            last_snapshot: None,
            newest_source: 0,
            earlier_snapshot: (0, 0),
            latest_line: (false, false),
            open_reset: None,
        });
        f.trackers.push(i);
        self.index.insert((feed, symbol), i);
        Some(i)
    }

    pub(super) fn keep_at_state(&mut self) {
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
}

impl Observer for Forensics {
    fn routed(&mut self, line: usize) {
        self.line = line;
    }

    fn before(&mut self, _handler: &mut Handler, _feed: Option<u16>, d: &Datagram<'_>) {
        if self.origin.is_none() {
            self.origin = Some(d.time_ns);
        }
        self.span = (self.span.0.min(d.time_ns), self.span.1.max(d.time_ns));
    }

    /// The `--at` check of the target's feed is answered now: its feed's
    /// datagrams up to then are applied, whatever other feeds' came
    /// before them in the capture (checks are answered per feed).
    fn before_check(&mut self, _handler: &mut Handler, feed: u16, at: u64) {
        if self.at == Some(at) && self.target.is_some_and(|(f, _)| f == feed) {
            self.keep_at_state();
        }
    }

    fn after(
        &mut self,
        handler: &mut Handler,
        feed: u16,
        d: &Datagram<'_>,
        result: Result<(), crate::protocol::Rejected>,
    ) {
        let a = d.time_ns;
        // The state is the handler's at arrival `a`; it is judged, and its
        // events timed, at the feed's latest arrival, a rejected datagram's
        // too (the replay answers the feed's checks before each).
        let Some(f) = self.feeds.get_mut(feed as usize) else {
            return;
        };
        f.latest = f.latest.max(a);
        let now = f.latest;
        // A rejected packet changes nothing but counters.
        if result.is_err() || self.scope == Scope::Nothing {
            return;
        }
        let origin = self.origin.unwrap_or(d.time_ns);
        let Some(hf) = handler.feeds().get(feed as usize) else {
            return;
        };
        let offset = hf.offset();
        let Some(f) = self.feeds.get_mut(feed as usize) else {
            return;
        };
        if offset != f.offset {
            f.offset = offset;
            for &i in &f.trackers {
                self.trackers[i].on_offset(origin, now, offset);
            }
        }
        let Ok(packet) = Packet::new_checked(d.payload) else {
            return;
        };
        self.packets += 1;
        let mut touched: Vec<usize> = Vec::new();
        for m in packet.messages() {
            let Some(symbol) = m.symbol() else { continue };
            let Some(i) = self.tracker(feed, symbol, now) else {
                continue;
            };
            let t = &mut self.trackers[i];
            if t.prepared != self.packets {
                t.prepared = self.packets;
                t.prepare(origin, now);
                // The handler gives a new symbol a slot at its first message,
                // or never in this packet when the table has none for the feed.
                t.dropped = handler.table().find(feed, symbol).is_none();
                if t.dropped {
                    let e = Event {
                        time: t.t,
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
                t.on_message(origin, &m, a, d.dst, self.line != 0);
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
                    time: t.t,
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
