//! What a (feed, symbol) slot holds for a protocol that numbers and prices
//! each symbol itself: sequence tracking, the last price, suspect and
//! liveness. The types are shared (the slot, the verdict, the publication
//! and every reader speak them); the rules that move them live with the
//! protocol that defines them, written against [`Sequence`] and
//! [`RuleState`] so one rule serves a plain value and a slot written in
//! place.

/// How a feed publishes, from configuration (never from the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedKind {
    /// Every Quote carries the symbol's whole price: a gap loses history but
    /// the next Quote is a complete state again.
    Full,
    /// Quotes are changes on top of earlier state: after a gap (or before the
    /// first Snapshot) the state is unknown until a Snapshot repairs it.
    Delta,
}

/// A price update as the rules see it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// Bid price.
    pub bid: f64,
    /// Ask price.
    pub ask: f64,
    /// When the provider priced it: ns since the Unix epoch, provider clock.
    pub source_time: u64,
}

impl Price {
    /// Valid when bid and ask are finite, > 0, and bid <= ask.
    #[inline]
    pub fn is_valid(&self) -> bool {
        // Comparisons with NaN are false, so NaN fails every one of these;
        // 0 < bid <= ask < inf then makes both finite and positive.
        self.bid > 0.0 && self.bid <= self.ask && self.ask < f64::INFINITY
    }
}

/// The sequencing half of a state, wherever it lives: a [`SeqTrack`] value
/// or a published slot written in place. The rules below are written once
/// against this and [`RuleState`].
pub trait Sequence {
    /// A sequence has been seen (Quote, Heartbeat or Snapshot).
    fn baseline(&self) -> bool;
    /// Last sequence accepted (meaningful when [`baseline`](Self::baseline)).
    fn last_seq(&self) -> u64;
    /// Sets the baseline and the last sequence.
    fn set_last_seq(&mut self, seq: u64);
    /// Adds ticks found missing (saturating).
    fn add_lost(&mut self, lost: u64);
    /// Counts a Quote at or below the last sequence.
    fn add_duplicate(&mut self);
}

/// Sequence tracking for one sequence space, as a plain value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SeqTrack {
    /// A sequence has been seen (Quote, Heartbeat or Snapshot).
    pub baseline: bool,
    /// Last sequence accepted (meaningful when `baseline`).
    pub last_seq: u64,
    /// Ticks the provider sent that never arrived, summed over all gaps.
    pub ticks_lost: u64,
    /// Quotes at or below `last_seq`, dropped.
    pub duplicates: u64,
}

impl Sequence for SeqTrack {
    #[inline(always)]
    fn baseline(&self) -> bool {
        self.baseline
    }
    #[inline(always)]
    fn last_seq(&self) -> u64 {
        self.last_seq
    }
    #[inline(always)]
    fn set_last_seq(&mut self, seq: u64) {
        self.baseline = true;
        self.last_seq = seq;
    }
    #[inline(always)]
    fn add_lost(&mut self, lost: u64) {
        self.ticks_lost = self.ticks_lost.saturating_add(lost);
    }
    #[inline(always)]
    fn add_duplicate(&mut self) {
        self.duplicates = self.duplicates.saturating_add(1);
    }
}

/// A whole symbol state, wherever it lives: what the Quote, Heartbeat and
/// Snapshot rules write besides the sequence.
pub trait RuleState: Sequence {
    /// Marks the state as possibly wrong, or clears that.
    fn set_suspect(&mut self, suspect: bool);
    /// Records local arrival time `t` (ns since the Unix epoch) as proof of liveness.
    fn set_alive(&mut self, t: u64);
    /// Stores a valid price and clears the invalid flag.
    fn set_price(&mut self, price: Price);
    /// Flags an invalid price, keeping the stored one.
    fn set_invalid(&mut self);
}

/// Everything known about one (feed, symbol).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SymbolState {
    /// Sequencing.
    pub seq: SeqTrack,
    /// The state may be wrong: a gap on a delta feed, a heartbeat that
    /// revealed lost ticks, or no Snapshot yet on a delta feed.
    pub suspect: bool,
    /// The last price message carried an invalid price.
    pub invalid: bool,
    /// The last valid price, if any has been stored.
    pub price: Option<Price>,
    /// Local arrival time of the last message that proved the symbol alive:
    /// ns since the Unix epoch, local clock. 0 until then.
    pub last_alive: u64,
}

impl Sequence for SymbolState {
    #[inline(always)]
    fn baseline(&self) -> bool {
        self.seq.baseline
    }
    #[inline(always)]
    fn last_seq(&self) -> u64 {
        self.seq.last_seq
    }
    #[inline(always)]
    fn set_last_seq(&mut self, seq: u64) {
        self.seq.set_last_seq(seq)
    }
    #[inline(always)]
    fn add_lost(&mut self, lost: u64) {
        self.seq.add_lost(lost)
    }
    #[inline(always)]
    fn add_duplicate(&mut self) {
        self.seq.add_duplicate()
    }
}

impl RuleState for SymbolState {
    #[inline(always)]
    fn set_suspect(&mut self, suspect: bool) {
        self.suspect = suspect;
    }
    #[inline(always)]
    fn set_alive(&mut self, t: u64) {
        self.last_alive = t;
    }
    #[inline(always)]
    fn set_price(&mut self, price: Price) {
        self.price = Some(price);
        self.invalid = false;
    }
    #[inline(always)]
    fn set_invalid(&mut self) {
        self.invalid = true;
    }
}
