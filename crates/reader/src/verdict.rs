//! The verdict a pre-trade check gets (SQF section 5).

use crate::quote::SymbolState;

/// How far a time of the writer's (its heartbeat, its start, a symbol's
/// last sign of life) may be ahead of the reader's clock (a reader
/// preempted between reading its clock and checking), ns. Further ahead
/// is a forged file or a clock stepped back: `stale`.
pub const MAX_AHEAD_NS: u64 = 100_000_000;
use std::fmt;

/// Per-symbol freshness limits, ns. Comparisons are strict (`>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// Longest silence allowed: `now − last_alive`, ns.
    pub stale_ns: u64,
    /// Oldest source time allowed: `now − source_time − offset`, ns.
    pub source_ns: u64,
}

/// The reasons a check is rejected, as a bit set. Empty means `ok`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Reasons(u8);

impl Reasons {
    /// Symbol unknown or no valid price stored yet; when set it is the only reason.
    pub const NO_QUOTE: Reasons = Reasons(1 << 0);
    /// No tick nor gap-free heartbeat for longer than the stale threshold.
    pub const STALE: Reasons = Reasons(1 << 1);
    /// The stored price is older than the source threshold on the provider's clock.
    pub const STALE_AT_SOURCE: Reasons = Reasons(1 << 2);
    /// A gap not yet repaired, or a delta feed still waiting for a snapshot.
    pub const SUSPECT: Reasons = Reasons(1 << 3);
    /// The last price message was invalid (SQF), or the book is crossed.
    pub const INVALID_PRICE: Reasons = Reasons(1 << 4);
    /// Trading in the instrument is halted, paused or quotation-only (an
    /// exchange feed's trading state; SQF never sets it).
    pub const HALTED: Reasons = Reasons(1 << 5);
    /// The market is closed: outside the feed's trading hours, or after its
    /// end of session (an exchange feed's; SQF never sets it).
    pub const CLOSED: Reasons = Reasons(1 << 6);

    /// Every reason, in the order they are reported.
    pub const ORDER: [(Reasons, &'static str); 7] = [
        (Reasons::NO_QUOTE, "no_quote"),
        (Reasons::STALE, "stale"),
        (Reasons::STALE_AT_SOURCE, "stale_at_source"),
        (Reasons::SUSPECT, "suspect"),
        (Reasons::INVALID_PRICE, "invalid_price"),
        (Reasons::HALTED, "halted"),
        (Reasons::CLOSED, "closed"),
    ];

    /// No reason: `ok`.
    pub const fn empty() -> Reasons {
        Reasons(0)
    }

    /// True when the check passes.
    #[inline]
    pub fn is_ok(self) -> bool {
        self.0 == 0
    }

    /// True when every reason in `other` is set.
    #[inline]
    pub fn contains(self, other: Reasons) -> bool {
        self.0 & other.0 == other.0
    }

    /// The raw bits (stable: bit i is `ORDER[i]`).
    pub fn bits(self) -> u8 {
        self.0
    }

    /// From raw bits (a `u32`, as the C header's verdict holds them);
    /// `None` when a bit this version does not know is set: a reason it
    /// cannot name is never read as `ok`.
    pub fn from_bits(bits: u32) -> Option<Reasons> {
        u8::try_from(bits)
            .ok()
            .filter(|b| b & !0x7f == 0)
            .map(Reasons)
    }

    /// Reason names in report order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Reasons::ORDER
            .into_iter()
            .filter(move |(r, _)| self.contains(*r))
            .map(|(_, n)| n)
    }
}

impl std::ops::BitOr for Reasons {
    type Output = Reasons;
    fn bitor(self, rhs: Reasons) -> Reasons {
        Reasons(self.0 | rhs.0)
    }
}

impl std::ops::BitOrAssign for Reasons {
    fn bitor_assign(&mut self, rhs: Reasons) {
        self.0 |= rhs.0;
    }
}

impl fmt::Debug for Reasons {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_ok() {
            return f.write_str("ok");
        }
        let mut first = true;
        for n in self.names() {
            if !first {
                f.write_str("|")?;
            }
            f.write_str(n)?;
            first = false;
        }
        Ok(())
    }
}

impl fmt::Display for Reasons {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// What a verdict is made of, whatever the protocol and wherever it is
/// asked (the handler, a replay, the `Reader`, `check`, `stat`; the C
/// header mirrors [`reasons`]). Times are ns since the Unix epoch: `alive`
/// on the local clock, `source` on the provider's; `None` means never.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inputs {
    /// A price on at least one side; without one the verdict is
    /// `no_quote` alone.
    pub quoted: bool,
    /// The last sign of life.
    pub alive: Option<i128>,
    /// The source time of what is shown.
    pub source: Option<i128>,
    /// The clock offset (local − provider), ns.
    pub offset: i128,
    /// The state may have missed ticks.
    pub suspect: bool,
    /// The price shown is invalid.
    pub invalid: bool,
    /// Trading in the instrument is halted.
    pub halted: bool,
    /// The market is closed.
    pub closed: bool,
}

/// The one verdict function: the reasons for `i` at local time `now`
/// under `th`, in spec order (`no_quote` alone when nothing is quoted).
/// Silence and source age are taken in 128 bits and compared strictly, so
/// no time on the wire, however wild, wraps into a fresh-looking value.
/// A last sign of life more than [`MAX_AHEAD_NS`] after `now` is `stale`
/// too: the clock stepped back since (or the file is forged), and silence
/// measured from it would not show for as long as the step.
#[inline]
pub fn reasons(i: &Inputs, th: Thresholds, now: u64) -> Reasons {
    if !i.quoted {
        return Reasons::NO_QUOTE;
    }
    let now = now as i128;
    let mut r = Reasons::empty();
    for (on, reason) in [
        (
            i.alive
                .is_none_or(|a| now - a > th.stale_ns as i128 || a - now > MAX_AHEAD_NS as i128),
            Reasons::STALE,
        ),
        (
            i.source
                .is_none_or(|s| now - s - i.offset > th.source_ns as i128),
            Reasons::STALE_AT_SOURCE,
        ),
        (i.suspect, Reasons::SUSPECT),
        (i.invalid, Reasons::INVALID_PRICE),
        (i.halted, Reasons::HALTED),
        (i.closed, Reasons::CLOSED),
    ] {
        if on {
            r |= reason;
        }
    }
    r
}

/// The verdict for a symbol's rule state at local time `now` (ns since the
/// Unix epoch, local clock): [`reasons`] of it. `state` is `None` for a
/// symbol never seen; `offset` is the feed's clock offset (local −
/// provider), ns.
#[inline]
pub fn evaluate(state: Option<&SymbolState>, th: Thresholds, offset: i128, now: u64) -> Reasons {
    let Some(s) = state else {
        return Reasons::NO_QUOTE;
    };
    let inputs = Inputs {
        quoted: s.price.is_some(),
        alive: Some(s.last_alive as i128),
        source: s.price.map(|p| p.source_time as i128),
        offset,
        suspect: s.suspect,
        invalid: s.invalid,
        halted: false,
        closed: false,
    };
    reasons(&inputs, th, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quote::{Price, SeqTrack};

    const TH: Thresholds = Thresholds {
        stale_ns: 500,
        source_ns: 2000,
    };

    /// A valid price from `source_time` (provider clock), alive at `t`.
    fn fresh(t: u64, source_time: u64) -> SymbolState {
        SymbolState {
            seq: SeqTrack {
                baseline: true,
                last_seq: 1,
                ..SeqTrack::default()
            },
            price: Some(Price {
                bid: 1.0,
                ask: 2.0,
                source_time,
            }),
            last_alive: t,
            ..SymbolState::default()
        }
    }

    /// Raw bits read back whole; a bit this version does not know is
    /// refused, never dropped into an `ok`.
    #[test]
    fn unknown_reason_bits_are_refused() {
        for (r, _) in Reasons::ORDER {
            assert_eq!(Reasons::from_bits(u32::from(r.bits())), Some(r));
        }
        assert_eq!(Reasons::from_bits(0), Some(Reasons::empty()));
        assert_eq!(Reasons::from_bits(0x7f).map(|r| r.names().count()), Some(7));
        for bits in [0x80, 0x81, 0x100, 1 << 31, u32::MAX] {
            assert_eq!(Reasons::from_bits(bits), None, "{bits:#x}");
        }
    }

    #[test]
    fn unknown_or_priceless_is_only_no_quote() {
        assert_eq!(evaluate(None, TH, 0, 10), Reasons::NO_QUOTE);
        // A baseline, suspect, no price (a first heartbeat).
        let mut s = SymbolState {
            seq: SeqTrack {
                baseline: true,
                last_seq: 4,
                ..SeqTrack::default()
            },
            suspect: true,
            last_alive: 1,
            ..SymbolState::default()
        };
        assert_eq!(evaluate(Some(&s), TH, 0, 1_000_000), Reasons::NO_QUOTE);
        // An invalid first price on a delta feed.
        s.invalid = true;
        assert_eq!(
            evaluate(Some(&s), TH, 0, 1_000_000),
            Reasons::NO_QUOTE,
            "only reason"
        );
    }

    #[test]
    fn ok_when_fresh() {
        let s = fresh(1000, 1000);
        assert!(evaluate(Some(&s), TH, 0, 1000).is_ok());
    }

    #[test]
    fn stale_is_strict() {
        let s = fresh(1000, 1000);
        assert!(evaluate(Some(&s), TH, 0, 1500).is_ok());
        assert_eq!(evaluate(Some(&s), TH, 0, 1501), Reasons::STALE);
    }

    /// Alive up to `MAX_AHEAD_NS` after the reader's clock is a reader
    /// preempted between its clock and its check; further is a clock
    /// stepped back (silence would not show for as long as the step).
    #[test]
    fn alive_far_after_now_is_stale() {
        let t = 10_000_000_000;
        let s = fresh(t, t);
        let ahead = t - MAX_AHEAD_NS;
        assert!(evaluate(Some(&s), TH, 0, ahead).is_ok());
        let stepped = ahead - 1;
        let r = evaluate(Some(&s), TH, 0, stepped);
        assert!(r.contains(Reasons::STALE), "{r:?}");
    }

    #[test]
    fn stale_at_source_uses_offset_and_is_strict() {
        // Provider clock 300 ns behind local: offset = +300.
        let s = fresh(1000, 700);
        let th = Thresholds {
            stale_ns: 1_000_000,
            source_ns: 2000,
        };
        assert!(
            evaluate(Some(&s), th, 300, 3000).is_ok(),
            "3000 − 700 − 300 = 2000, not > 2000"
        );
        assert_eq!(evaluate(Some(&s), th, 300, 3001), Reasons::STALE_AT_SOURCE);
        assert_eq!(
            evaluate(Some(&s), th, 0, 2701),
            Reasons::STALE_AT_SOURCE,
            "without offset"
        );
        assert!(evaluate(Some(&s), th, -300, 2100).is_ok());
        assert_eq!(evaluate(Some(&s), th, -300, 2401), Reasons::STALE_AT_SOURCE);
    }

    #[test]
    fn wild_times_do_not_wrap() {
        let s = fresh(1000, u64::MAX);
        assert!(
            evaluate(Some(&s), TH, 0, 1000).is_ok(),
            "source time in the future is not stale"
        );
        let s = fresh(1000, 0);
        assert!(evaluate(Some(&s), TH, i64::MIN as i128, 1000).contains(Reasons::STALE_AT_SOURCE));
        assert!(evaluate(Some(&s), TH, i64::MAX as i128, 1000).is_ok());
        // Alive centuries after now: no wrap into a long silence, but a
        // clock stepped back (`alive_far_after_now_is_stale`).
        let s = fresh(u64::MAX, 0);
        assert!(evaluate(Some(&s), TH, i64::MAX as i128, 0).contains(Reasons::STALE));
        let s = fresh(u64::MAX, 0);
        let r = evaluate(Some(&s), TH, i64::MAX as i128, u64::MAX - MAX_AHEAD_NS);
        assert!(!r.contains(Reasons::STALE), "{r:?}");
        // An offset beyond 64 bits (a send time centuries ahead) stays exact.
        let s = fresh(1000, u64::MAX - 1_000);
        let offset = 1000 - (u64::MAX as i128);
        assert!(evaluate(Some(&s), TH, offset, 1000).is_ok());
        assert!(evaluate(Some(&s), TH, offset - 3000, 1000).contains(Reasons::STALE_AT_SOURCE));
    }

    #[test]
    fn all_reasons_in_order() {
        let mut s = fresh(1000, 0);
        s.suspect = true;
        s.invalid = true;
        let r = evaluate(Some(&s), TH, 0, 1_000_000);
        assert_eq!(
            r.names().collect::<Vec<_>>(),
            ["stale", "stale_at_source", "suspect", "invalid_price"]
        );
        assert_eq!(
            format!("{r}"),
            "stale|stale_at_source|suspect|invalid_price"
        );
        assert_eq!(format!("{}", Reasons::empty()), "ok");
    }
}
