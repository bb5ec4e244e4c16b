//! Replay forensics for an SQF feed: which events changed a symbol's verdict, when and why
//! (`tickguard replay --explain FEED SYMBOL`), the verdict at one moment with
//! the event behind each reason (`--at`), and an SVG timeline of every
//! symbol's verdict (`--timeline`).
//!
//! [`Forensics`] is a [`replay::Observer`](crate::replay::Observer): the
//! replay runs exactly as usual and, after each datagram the handler applied,
//! the observer decodes the packet again and applies every message for a
//! symbol it tracks, in order, to its own copy of the symbol's
//! [`SymbolState`] with the rule functions the handler uses, in the form
//! that returns the whole outcome ([`quote_outcome`], [`heartbeat_outcome`],
//! [`snapshot_outcome`]). The outcome is the cause (a gap of N, a heartbeat
//! revealing one, a snapshot, a provider reset, an invalid price, suspect
//! cleared, …). The sequencing rules are not worked out again here; the
//! handler's arbitration between lines A and B (which line's copy of a
//! Snapshot is one, a reset left open on the lagging line and what that
//! line brings from before it) is, in `tracking`, since the handler keeps
//! it beside the slot, not in it. After each datagram the copy is checked
//! against the handler's slot; they always agree (a test holds this on
//! random streams, the arbitration's orderings among them). If they ever
//! did not, the handler's state would be adopted and a `reconciled` event
//! listed.
//!
//! The module by job: `tracking` follows the replay and records events,
//! `text` writes `--explain`, `--explain-all` and `--at`, `svg` draws
//! `--timeline`.
//!
//! [`quote_outcome`]: crate::protocol::sqf::rules::quote_outcome
//! [`heartbeat_outcome`]: crate::protocol::sqf::rules::heartbeat_outcome
//! [`snapshot_outcome`]: crate::protocol::sqf::rules::snapshot_outcome
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

mod band;
mod svg;
mod text;
mod tracking;

use crate::config::FeedConfig;
use crate::state::SymbolState;
use crate::symbol::Symbol;
use crate::verdict::{Reasons, Thresholds};
use std::collections::HashMap;
use std::net::SocketAddrV4;
use tracking::Tracker;

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
    /// Ahead of the last sequence, on the line lagging the Snapshot that
    /// reset the symbol (come on the other line): its late copy from
    /// before the reset, ignored.
    BeforeReset {
        /// The sequence the Snapshot reset the symbol to.
        reset: u64,
    },
    /// Ahead of the last sequence, but older at its source than the last
    /// Snapshot, come on the other line, which this line has not brought
    /// yet: sent before it (a reset that looked in step there, its
    /// earlier messages lost), or by a provider whose stamps do not rise
    /// with its sequence; ignored, the symbol suspect.
    BeforeSnapshot {
        /// The Snapshot's sequence.
        snapshot: u64,
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
    /// Naming a sequence past the next, on the line lagging behind a
    /// Snapshot that reset the symbol (come on the other line): the old
    /// sequence's, or telling of a loss past the reset; its sequence
    /// ignored, the symbol suspect.
    BeforeReset {
        /// The sequence the Snapshot reset the symbol to.
        reset: u64,
    },
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
    /// A Snapshot on the line lagging behind a Snapshot that reset the
    /// symbol (come on the other line), sent before it (or that line's
    /// copy of it once the symbol moved on): ignored, so that it does not
    /// put the price from before the reset back.
    SnapshotBeforeReset {
        /// Its sequence.
        seq: u64,
        /// The sequence the Snapshot reset the symbol to.
        reset: u64,
        /// It is that line's copy of the reset, come once the symbol moved
        /// on (not a Snapshot sent before the reset).
        copy: bool,
    },
    /// A Snapshot behind the sequence, never applied (neither of the last
    /// two: the other line lost it), older at its source than the last
    /// price message applied (valid or not) or the price held, on the line
    /// that has not brought it: that line's late copy, dropped (a reset is
    /// newer than all before it).
    SnapshotLate {
        /// Its sequence.
        seq: u64,
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
    /// The state table had no slot for the feed (full, or the free slots
    /// held for other feeds): the message for this new symbol was dropped.
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

impl super::Moment for Event {
    fn time(&self) -> u64 {
        self.time
    }
    fn turn(&self) -> (Reasons, Reasons) {
        (self.before, self.after)
    }
}

impl Event {
    /// True when the verdict changed.
    pub fn changed(&self) -> bool {
        self.before != self.after
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
    /// The latest arrival among the feed's datagrams applied (ns): the
    /// time its state is judged at, as the replay answers a check before
    /// the feed's first datagram later than it (a capture stepping back
    /// leaves an arrival before it).
    latest: u64,
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
    /// The line the datagram being applied was routed to
    /// ([`Observer::routed`](crate::replay::Observer::routed)).
    line: usize,
    /// Symbols past the first [`MAX_DRAWN`] seen were not drawn.
    undrawn: bool,
}

/// The most symbols `--timeline` draws (a band each, 30 pixels tall): the
/// first seen, and the `--explain` target whenever it comes. Bounds the
/// memory and the picture whatever the capture holds.
pub const MAX_DRAWN: usize = 1000;

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
                    latest: 0,
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
            line: 0,
            undrawn: false,
        }
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

    /// The target's events forgotten, the oldest ([`crate::explain::keep`]).
    fn forgotten(&self) -> u64 {
        let Some(target) = self.target else { return 0 };
        self.index
            .get(&target)
            .map_or(0, |&i| self.trackers[i].forgotten)
    }
}
