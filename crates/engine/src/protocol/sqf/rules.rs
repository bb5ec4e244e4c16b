//! The state rules of SQF v1 section 3, as pure functions of (state, message, time).
//!
//! Sequencing ([`SeqTrack`]: baseline, last sequence, lost ticks, duplicates)
//! is kept apart from what a symbol's quote state does with the outcome
//! ([`SymbolState`]: suspect, price, liveness). SQF numbers per symbol, so
//! each symbol owns a `SeqTrack`; a per-stream framing would own one per
//! stream and feed the outcomes to every symbol of the stream.
//!
//! The state types are shared ([`crate::state::quote`]); the rules here are
//! what SQF does to them.

pub use crate::state::quote::{FeedKind, Price, RuleState, SeqTrack, Sequence, SymbolState};

/// What a sequenced message meant for the sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeqOutcome {
    /// At or below the last sequence: already seen (or late): ignore it.
    Duplicate,
    /// The first sequence ever seen: baseline set.
    First,
    /// The next sequence.
    InOrder,
    /// Ahead of the next sequence: this many ticks were lost.
    Gap(u64),
}

/// What a message on one line is to a provider reset that came on the
/// other line and is still open there: that line has brought neither its
/// copy of the reset's Snapshot nor anything newer at its source, so it
/// lags behind the reset (the line arbitration of §1, not in §3: see
/// docs/architecture.md, "A message from before a provider reset").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lag {
    /// No reset open, or the message came on the reset's own line.
    No,
    /// On the lagging line, no newer at its source than the reset's
    /// Snapshot (and not that line's copy of it): sent before the reset.
    Before,
    /// On the lagging line: its copy of the reset's Snapshot (same
    /// sequence and source time). The line is past the reset.
    Copy,
    /// On the lagging line, newer at its source than the reset's Snapshot:
    /// the line is past the reset (its copy of it lost).
    Past,
}

impl Lag {
    /// A message on the lagging line of the open reset `reset` (its
    /// Snapshot's sequence and source time), stamped `source` at its
    /// source; `seq`: a Snapshot's sequence.
    pub fn behind(reset: (u64, u64), seq: Option<u64>, source: u64) -> Lag {
        if seq == Some(reset.0) && source == reset.1 {
            Lag::Copy
        } else if source <= reset.1 {
            Lag::Before
        } else {
            Lag::Past
        }
    }
}

/// What a heartbeat meant for the sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeatOutcome {
    /// No baseline yet: the heartbeat set it; nothing was lost, nothing is known.
    First,
    /// The provider has sent Quotes we never saw: this many.
    Gap(u64),
    /// Nothing missing: the stream is alive.
    Alive,
}

/// A Quote's sequence (Quote steps 1–3 and 5's `last_seq`).
#[inline(always)]
pub fn sequenced(s: &mut impl Sequence, seq: u64) -> SeqOutcome {
    if !s.baseline() {
        s.set_last_seq(seq);
        return SeqOutcome::First;
    }
    let last = s.last_seq();
    if seq <= last {
        s.add_duplicate();
        return SeqOutcome::Duplicate;
    }
    // seq > last here, so the subtraction cannot underflow.
    let lost = seq - last - 1;
    s.set_last_seq(seq);
    if lost == 0 {
        SeqOutcome::InOrder
    } else {
        s.add_lost(lost);
        SeqOutcome::Gap(lost)
    }
}

/// A Heartbeat's `next_expected` (Heartbeat steps 1–2).
#[inline(always)]
pub fn next_expected(s: &mut impl Sequence, next_expected: u64) -> BeatOutcome {
    if !s.baseline() {
        s.set_last_seq(next_expected.saturating_sub(1));
        return BeatOutcome::First;
    }
    let last = s.last_seq();
    if next_expected > last && next_expected - last > 1 {
        let lost = next_expected - last - 1;
        s.add_lost(lost);
        s.set_last_seq(next_expected - 1);
        BeatOutcome::Gap(lost)
    } else {
        BeatOutcome::Alive
    }
}

/// What applying a message changed, for counters and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// A Quote at or below the last sequence: nothing but the duplicate counter changed.
    Duplicate,
    /// A Quote, Heartbeat or Snapshot that changed the state; `lost` ticks were revealed.
    Changed {
        /// Ticks found missing by this message.
        lost: u64,
    },
}

/// What a rule did to the suspect flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suspect {
    /// Left as it was.
    Kept,
    /// Set (it may have been set already).
    Set,
    /// Cleared (it may have been clear already).
    Cleared,
}

/// What a price message's price was (Quote step 6, Snapshot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriceCheck {
    /// Valid: stored, invalid flag cleared.
    Valid,
    /// Invalid: flagged, the stored price kept.
    Invalid,
}

/// Where a Snapshot's sequence stood against the last sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapStep {
    /// No sequence seen before: baseline set.
    First,
    /// Equal to the last sequence: the routine snapshot.
    InStep,
    /// Ahead of the last sequence: the sequence moves forward, nothing counted lost.
    Ahead,
    /// Behind the last sequence: a provider reset.
    Reset,
}

/// Everything the Quote rule did, in one small `Copy` value: what replay
/// forensics read instead of working it out again. The handler counts the
/// coarser [`Applied`] ([`QuoteOutcome::applied`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuoteOutcome {
    /// At or below the last sequence: only the duplicate counter changed.
    Duplicate,
    /// Applied.
    Applied {
        /// Ticks found missing: the quote was ahead of the next sequence
        /// (a gap) when > 0, the next sequence when 0 and not `first`.
        lost: u64,
        /// The first sequence seen: baseline set (`lost` is 0).
        first: bool,
        /// Set on a delta feed's first quote or gap, cleared on a full feed, else kept.
        suspect: Suspect,
        /// Its price.
        price: PriceCheck,
    },
}

impl QuoteOutcome {
    /// The part the handler counts.
    #[inline(always)]
    pub fn applied(self) -> Applied {
        match self {
            QuoteOutcome::Duplicate => Applied::Duplicate,
            QuoteOutcome::Applied { lost, .. } => Applied::Changed { lost },
        }
    }
}

impl BeatOutcome {
    /// The part the handler counts. `First` and `Gap` set suspect, `Alive`
    /// proves liveness.
    #[inline(always)]
    pub fn applied(self) -> Applied {
        match self {
            BeatOutcome::Gap(lost) => Applied::Changed { lost },
            BeatOutcome::First | BeatOutcome::Alive => Applied::Changed { lost: 0 },
        }
    }
}

/// Everything the Snapshot rule did: the sequence set to its own, suspect
/// cleared, liveness, and its price stored or flagged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapOutcome {
    /// Its sequence against the last one.
    pub step: SnapStep,
    /// Its price.
    pub price: PriceCheck,
}

impl SnapOutcome {
    /// The part the handler counts: a snapshot reveals no lost ticks.
    #[inline(always)]
    pub fn applied(self) -> Applied {
        Applied::Changed { lost: 0 }
    }
}

/// Quote rule, steps 1–6. `t`: local arrival time, ns since the Unix epoch.
#[inline(always)]
pub fn quote(s: &mut impl RuleState, kind: FeedKind, seq: u64, price: Price, t: u64) -> Applied {
    quote_outcome(s, kind, seq, price, t).applied()
}

/// Heartbeat rule, steps 1–3.
#[inline(always)]
pub fn heartbeat(s: &mut impl RuleState, next_expected: u64, t: u64) -> Applied {
    heartbeat_outcome(s, next_expected, t).applied()
}

/// Snapshot rule: always applied.
#[inline(always)]
pub fn snapshot(s: &mut impl RuleState, last_assigned: u64, price: Price, t: u64) -> Applied {
    snapshot_outcome(s, last_assigned, price, t).applied()
}

/// Quote rule, steps 1–6, with its whole outcome.
#[inline(always)]
pub fn quote_outcome(
    s: &mut impl RuleState,
    kind: FeedKind,
    seq: u64,
    price: Price,
    t: u64,
) -> QuoteOutcome {
    let mut suspect = Suspect::Kept;
    let (lost, first) = match sequenced(s, seq) {
        SeqOutcome::Duplicate => return QuoteOutcome::Duplicate,
        SeqOutcome::First => {
            if kind == FeedKind::Delta {
                s.set_suspect(true);
                suspect = Suspect::Set;
            }
            (0, true)
        }
        SeqOutcome::Gap(lost) => {
            if kind == FeedKind::Delta {
                s.set_suspect(true);
                suspect = Suspect::Set;
            }
            (lost, false)
        }
        SeqOutcome::InOrder => (0, false),
    };
    if kind == FeedKind::Full {
        s.set_suspect(false);
        suspect = Suspect::Cleared;
    }
    s.set_alive(t);
    QuoteOutcome::Applied {
        lost,
        first,
        suspect,
        price: store_price(s, price),
    }
}

/// Heartbeat rule, steps 1–3, with its whole outcome.
#[inline(always)]
pub fn heartbeat_outcome(s: &mut impl RuleState, next_expected: u64, t: u64) -> BeatOutcome {
    let beat = self::next_expected(s, next_expected);
    match beat {
        BeatOutcome::First | BeatOutcome::Gap(_) => s.set_suspect(true),
        BeatOutcome::Alive => s.set_alive(t),
    }
    beat
}

/// Snapshot rule, with its whole outcome.
#[inline(always)]
pub fn snapshot_outcome(
    s: &mut impl RuleState,
    last_assigned: u64,
    price: Price,
    t: u64,
) -> SnapOutcome {
    let step = if !s.baseline() {
        SnapStep::First
    } else {
        match last_assigned.cmp(&s.last_seq()) {
            std::cmp::Ordering::Equal => SnapStep::InStep,
            std::cmp::Ordering::Greater => SnapStep::Ahead,
            std::cmp::Ordering::Less => SnapStep::Reset,
        }
    };
    s.set_last_seq(last_assigned);
    s.set_suspect(false);
    s.set_alive(t);
    SnapOutcome {
        step,
        price: store_price(s, price),
    }
}

/// Quote step 6: a valid price is stored, an invalid one only flags.
#[inline(always)]
fn store_price(s: &mut impl RuleState, price: Price) -> PriceCheck {
    if price.is_valid() {
        s.set_price(price);
        PriceCheck::Valid
    } else {
        s.set_invalid();
        PriceCheck::Invalid
    }
}

/// The SQF rules as methods of a plain [`SymbolState`] (tests, tools).
pub trait SymbolRules {
    /// Quote rule: see [`quote`].
    fn on_quote(&mut self, kind: FeedKind, seq: u64, price: Price, t: u64) -> Applied;
    /// Heartbeat rule: see [`heartbeat`].
    fn on_heartbeat(&mut self, next_expected: u64, t: u64) -> Applied;
    /// Snapshot rule: see [`snapshot`].
    fn on_snapshot(&mut self, last_assigned: u64, price: Price, t: u64) -> Applied;
}

impl SymbolRules for SymbolState {
    #[inline]
    fn on_quote(&mut self, kind: FeedKind, seq: u64, price: Price, t: u64) -> Applied {
        quote(self, kind, seq, price, t)
    }
    #[inline]
    fn on_heartbeat(&mut self, next_expected: u64, t: u64) -> Applied {
        heartbeat(self, next_expected, t)
    }
    #[inline]
    fn on_snapshot(&mut self, last_assigned: u64, price: Price, t: u64) -> Applied {
        snapshot(self, last_assigned, price, t)
    }
}

/// The sequencing rules as methods of a plain [`SeqTrack`].
pub trait SeqRules {
    /// A Quote's sequence: see [`sequenced`].
    fn on_sequenced(&mut self, seq: u64) -> SeqOutcome;
    /// A Heartbeat's `next_expected`: see [`next_expected`].
    fn on_next_expected(&mut self, next_expected: u64) -> BeatOutcome;
    /// A Snapshot's sequence: the provider's word on where the stream is.
    fn reset(&mut self, last_assigned: u64);
}

impl SeqRules for SeqTrack {
    #[inline]
    fn on_sequenced(&mut self, seq: u64) -> SeqOutcome {
        sequenced(self, seq)
    }
    #[inline]
    fn on_next_expected(&mut self, next_expected: u64) -> BeatOutcome {
        self::next_expected(self, next_expected)
    }
    #[inline]
    fn reset(&mut self, last_assigned: u64) {
        self.set_last_seq(last_assigned);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use FeedKind::{Delta, Full};

    fn px(bid: f64, ask: f64, source_time: u64) -> Price {
        Price {
            bid,
            ask,
            source_time,
        }
    }
    const P: Price = Price {
        bid: 1.0,
        ask: 1.1,
        source_time: 100,
    };

    /// A message on the line lagging a reset (its Snapshot 3 at 200) is
    /// from before it when stamped at or before 200, the reset's copy
    /// when it is that Snapshot, and past it only when newer.
    #[test]
    fn a_message_stamped_as_the_reset_is_from_before_it() {
        let reset = (3, 200);
        assert_eq!(Lag::behind(reset, None, 199), Lag::Before);
        assert_eq!(Lag::behind(reset, None, 200), Lag::Before);
        assert_eq!(Lag::behind(reset, None, 201), Lag::Past);
        assert_eq!(Lag::behind(reset, Some(3), 200), Lag::Copy);
        assert_eq!(Lag::behind(reset, Some(4), 200), Lag::Before);
        assert_eq!(Lag::behind(reset, Some(3), 201), Lag::Past);
    }

    #[test]
    fn price_validity() {
        assert!(px(1.0, 1.0, 0).is_valid(), "bid == ask is valid");
        assert!(px(1.0, 2.0, 0).is_valid());
        assert!(!px(2.0, 1.0, 0).is_valid(), "crossed");
        assert!(!px(0.0, 1.0, 0).is_valid(), "zero bid");
        assert!(!px(1.0, 0.0, 0).is_valid(), "zero ask");
        assert!(!px(-1.0, 1.0, 0).is_valid(), "negative");
        assert!(!px(f64::NAN, 1.0, 0).is_valid());
        assert!(!px(1.0, f64::NAN, 0).is_valid());
        assert!(!px(1.0, f64::INFINITY, 0).is_valid());
        assert!(!px(f64::NEG_INFINITY, 1.0, 0).is_valid());
        assert!(px(f64::MIN_POSITIVE, f64::MAX, 0).is_valid());
        assert!(!px(-0.0, 1.0, 0).is_valid());
    }

    #[test]
    fn quote_first_sets_baseline_suspect_only_on_delta() {
        for (kind, suspect) in [(Full, false), (Delta, true)] {
            let mut s = SymbolState::default();
            assert_eq!(s.on_quote(kind, 10, P, 5), Applied::Changed { lost: 0 });
            assert!(s.seq.baseline);
            assert_eq!(s.seq.last_seq, 10);
            assert_eq!(s.seq.ticks_lost, 0, "no loss counted before a baseline");
            assert_eq!(s.suspect, suspect, "{kind:?}");
            assert_eq!(s.last_alive, 5);
            assert_eq!(s.price, Some(P));
        }
    }

    #[test]
    fn quote_duplicate_changes_nothing_else() {
        for kind in [Full, Delta] {
            let mut s = SymbolState::default();
            s.on_quote(kind, 10, P, 5);
            s.invalid = false;
            let before = s;
            assert_eq!(
                s.on_quote(kind, 10, px(2.0, 3.0, 9), 99),
                Applied::Duplicate
            );
            assert_eq!(
                s.on_quote(kind, 3, px(-2.0, 3.0, 9), 99),
                Applied::Duplicate
            );
            assert_eq!(s.seq.duplicates, 2);
            s.seq.duplicates = 0;
            assert_eq!(s, before);
        }
    }

    #[test]
    fn quote_gap_counts_lost_and_suspects_delta_only() {
        let mut full = SymbolState::default();
        full.on_quote(Full, 1, P, 1);
        assert_eq!(full.on_quote(Full, 5, P, 2), Applied::Changed { lost: 3 });
        assert_eq!(full.seq.ticks_lost, 3);
        assert!(!full.suspect);

        let mut delta = SymbolState::default();
        delta.on_snapshot(1, P, 0);
        assert!(!delta.suspect);
        delta.on_quote(Delta, 2, P, 1);
        assert!(!delta.suspect, "in-order delta quote after snapshot");
        assert_eq!(delta.on_quote(Delta, 5, P, 2), Applied::Changed { lost: 2 });
        assert!(delta.suspect);
        assert_eq!(delta.seq.last_seq, 5);
        delta.on_quote(Delta, 6, P, 3);
        assert!(delta.suspect, "delta stays suspect until a snapshot");
    }

    #[test]
    fn full_feed_quote_clears_suspect_from_heartbeat_gap() {
        let mut s = SymbolState::default();
        s.on_quote(Full, 1, P, 1);
        s.on_heartbeat(5, 2);
        assert!(s.suspect);
        s.on_quote(Full, 5, P, 3);
        assert!(!s.suspect);
        assert_eq!(s.seq.ticks_lost, 3);
    }

    #[test]
    fn invalid_price_flags_and_keeps_stored_price() {
        let mut s = SymbolState::default();
        s.on_quote(Full, 1, P, 1);
        s.on_quote(Full, 2, px(2.0, 1.0, 50), 2);
        assert!(s.invalid);
        assert_eq!(s.price, Some(P));
        assert_eq!(s.last_alive, 2, "an invalid quote still proves liveness");
        assert_eq!(s.seq.last_seq, 2);
        s.on_quote(Full, 3, px(2.0, 2.5, 60), 3);
        assert!(!s.invalid);
        assert_eq!(s.price, Some(px(2.0, 2.5, 60)));
    }

    #[test]
    fn heartbeat_without_baseline() {
        let mut s = SymbolState::default();
        s.on_heartbeat(10, 7);
        assert!(s.seq.baseline && s.suspect);
        assert_eq!(s.seq.last_seq, 9);
        assert_eq!(s.last_alive, 0, "nothing else");
        assert_eq!(s.seq.ticks_lost, 0);
        let mut z = SymbolState::default();
        z.on_heartbeat(0, 7);
        assert_eq!(z.seq.last_seq, 0, "saturating");
    }

    #[test]
    fn heartbeat_gap_is_not_liveness() {
        let mut s = SymbolState::default();
        s.on_quote(Full, 4, P, 1);
        assert_eq!(s.on_heartbeat(8, 50), Applied::Changed { lost: 3 });
        assert_eq!(s.seq.ticks_lost, 3);
        assert_eq!(s.seq.last_seq, 7);
        assert!(s.suspect);
        assert_eq!(
            s.last_alive, 1,
            "a heartbeat that reveals a gap does not refresh liveness"
        );
        // The quote the heartbeat announced is in order now.
        assert_eq!(s.on_quote(Full, 8, P, 60), Applied::Changed { lost: 0 });
    }

    #[test]
    fn heartbeat_in_order_or_behind_is_liveness() {
        let mut s = SymbolState::default();
        s.on_quote(Delta, 4, P, 1);
        s.on_snapshot(4, P, 1);
        s.on_heartbeat(5, 20);
        assert_eq!(s.last_alive, 20);
        assert!(!s.suspect);
        s.on_heartbeat(3, 30);
        assert_eq!(
            s.last_alive, 30,
            "a heartbeat behind us reveals nothing lost"
        );
        assert_eq!(s.seq.last_seq, 4);
        assert_eq!(s.seq.ticks_lost, 0);
    }

    #[test]
    fn heartbeat_at_sequence_limits() {
        let mut s = SymbolState::default();
        s.on_quote(Full, u64::MAX, P, 1);
        s.on_heartbeat(u64::MAX, 2);
        s.on_heartbeat(0, 3);
        assert_eq!(s.seq.ticks_lost, 0);
        assert_eq!(s.last_alive, 3);
        assert_eq!(s.on_quote(Full, u64::MAX, P, 4), Applied::Duplicate);
    }

    #[test]
    fn snapshot_resets_even_backwards() {
        let mut s = SymbolState::default();
        s.on_quote(Delta, 100, P, 1);
        s.on_quote(Delta, 105, P, 2);
        assert!(s.suspect);
        s.on_snapshot(3, px(5.0, 6.0, 70), 9);
        assert_eq!(s.seq.last_seq, 3, "provider reset");
        assert!(!s.suspect);
        assert_eq!(s.last_alive, 9);
        assert_eq!(s.seq.ticks_lost, 4, "lost ticks are history, not reset");
        assert_eq!(s.price, Some(px(5.0, 6.0, 70)));
        s.on_quote(Delta, 4, P, 10);
        assert!(!s.suspect);
        // Snapshot with an invalid price: sequence repaired, price flagged.
        s.on_snapshot(10, px(0.0, 1.0, 80), 11);
        assert!(s.invalid && !s.suspect);
        assert_eq!(s.price, Some(P));
    }

    #[test]
    fn snapshot_sets_baseline() {
        let mut s = SymbolState::default();
        s.on_snapshot(41, P, 3);
        assert!(s.seq.baseline);
        assert_eq!(s.on_quote(Delta, 43, P, 4), Applied::Changed { lost: 1 });
    }

    #[test]
    fn outcomes_say_what_the_rules_did() {
        let mut s = SymbolState::default();
        let q = |s: &mut SymbolState, kind, seq, p| quote_outcome(s, kind, seq, p, 1);
        let applied = |seq, suspect, price| {
            let (lost, first) = match seq {
                SeqOutcome::First => (0, true),
                SeqOutcome::Gap(lost) => (lost, false),
                _ => (0, false),
            };
            QuoteOutcome::Applied {
                lost,
                first,
                suspect,
                price,
            }
        };
        use PriceCheck::{Invalid, Valid};
        assert_eq!(
            q(&mut s, Delta, 5, P),
            applied(SeqOutcome::First, Suspect::Set, Valid)
        );
        assert_eq!(
            q(&mut s, Delta, 6, px(2.0, 1.0, 0)),
            applied(SeqOutcome::InOrder, Suspect::Kept, Invalid)
        );
        assert_eq!(
            q(&mut s, Delta, 9, P),
            applied(SeqOutcome::Gap(2), Suspect::Set, Valid)
        );
        assert_eq!(q(&mut s, Delta, 9, P), QuoteOutcome::Duplicate);
        assert_eq!(
            q(&mut s, Full, 10, P),
            applied(SeqOutcome::InOrder, Suspect::Cleared, Valid)
        );
        assert_eq!(heartbeat_outcome(&mut s, 14, 2), BeatOutcome::Gap(3));
        assert_eq!(heartbeat_outcome(&mut s, 14, 2), BeatOutcome::Alive);
        let snap = |s: &mut SymbolState, seq, p| snapshot_outcome(s, seq, p, 3);
        assert_eq!(
            snap(&mut s, 13, P),
            SnapOutcome {
                step: SnapStep::InStep,
                price: Valid
            }
        );
        assert_eq!(snap(&mut s, 20, P).step, SnapStep::Ahead);
        assert_eq!(
            snap(&mut s, 2, px(0.0, 1.0, 0)),
            SnapOutcome {
                step: SnapStep::Reset,
                price: Invalid
            }
        );
        let mut fresh = SymbolState::default();
        assert_eq!(snap(&mut fresh, 7, P).step, SnapStep::First);
        assert_eq!(
            heartbeat_outcome(&mut SymbolState::default(), 3, 1),
            BeatOutcome::First
        );
    }

    #[test]
    fn outcomes_reduce_to_what_the_handler_counts() {
        use PriceCheck::Valid;
        assert_eq!(QuoteOutcome::Duplicate.applied(), Applied::Duplicate);
        for (lost, first) in [(0, true), (0, false), (4, false)] {
            let o = QuoteOutcome::Applied {
                lost,
                first,
                suspect: Suspect::Kept,
                price: Valid,
            };
            assert_eq!(o.applied(), Applied::Changed { lost });
        }
        assert_eq!(BeatOutcome::Gap(3).applied(), Applied::Changed { lost: 3 });
        assert_eq!(BeatOutcome::First.applied(), Applied::Changed { lost: 0 });
        assert_eq!(BeatOutcome::Alive.applied(), Applied::Changed { lost: 0 });
    }
}
