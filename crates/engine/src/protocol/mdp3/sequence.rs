//! The incremental lines' packet sequence (MsgSeqNum): A/B arbitration,
//! gaps, and the channel's restarts. Nothing is held back: a packet that
//! is not a copy is processed at once, whatever it follows (each entry's
//! RptSeq judges it); a gap only says that some packet is missing, which
//! decides when a book may become visible and, given up, makes every
//! instrument unverified.
//!
//! - The first packet sets `high` (one past the highest MsgSeqNum seen);
//!   no gap (instruments recover on their own).
//! - `S ≥ high` is new: `S > high` opens the gap `[high, S)`. `S < high`
//!   fills a gap it lies in, else is the other line's copy: a duplicate.
//! - A restart: `S = 1` right after a ChannelReset was processed (the
//!   sequence restarts with the channel), or `S + restart_margin < high`
//!   (the weekly reset: the caller empties the channel as a ChannelReset
//!   would). Not in the contract (docs/mdp3.md, "Below right after a
//!   ChannelReset"): right after one, a packet far below `high`, or nearer
//!   1 than `high` and sent after it, is the reset's restart too; a
//!   ChannelReset come late (below packets processed first) is followed
//!   by none. Gaps are dropped uncounted; for `gap_timeout` afterwards a
//!   packet in `[H − restart_margin, H)` (`H` the old `high`) is a late
//!   copy of the old sequence, with no effect. Not in the contract (which
//!   unsets `high`, so the packet sets it with no gap): the new sequence
//!   began at 1, so `high` is 1 and a restart at `S > 1` opens `[1, S)`
//!   (docs/mdp3.md, "The packets before a restart's first").
//! - Gaps expire before every datagram and every check: one whose
//!   deadline (its opening + `gap_timeout`) is strictly before that time
//!   is given up, lowest first, its missing packets lost.
//!
//! Time is passed in: ns since the Unix epoch, local clock.

use crate::filled::Filled;
use std::collections::VecDeque;

/// Most gaps open at once; one more gives up the lowest.
pub const MAX_GAPS: usize = 4096;

/// A closed gap's list of received packets is kept for a later gap up to
/// this many entries of capacity; a longer one is freed.
const SPARE_MAX: usize = 4096;

/// The stream's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// A gap open longer than this is given up, ns.
    pub gap_timeout_ns: u64,
    /// How far below `high` a packet must fall to be a new week's.
    pub restart_margin: u32,
}

/// What a packet is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packet {
    /// New (or filling a gap): process it.
    Process {
        /// It filled a gap.
        fill: bool,
        /// It restarted the sequence (weekly: the channel is to be emptied
        /// as a ChannelReset would).
        restart: Option<Restart>,
    },
    /// The other line's copy of a packet processed: nothing.
    Duplicate,
    /// A late copy of the sequence before a restart: nothing.
    Stale,
}

/// Why the sequence restarted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// The new sequence after a ChannelReset: MsgSeqNum 1, or its first
    /// packets missing ([`Sequence::restart`]).
    AfterReset,
    /// Far below `high`: the weekly reset.
    Weekly,
}

/// The stream's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Gaps opened.
    pub packet_gaps: u64,
    /// Packets given up.
    pub packets_lost: u64,
    /// Gaps given up (past their deadline, or the lowest for room), each
    /// once however many packets it still missed.
    pub gaps_given_up: u64,
    /// Copies of packets processed.
    pub duplicates: u64,
    /// Packets that filled a gap.
    pub recovered: u64,
    /// Restarts of the sequence.
    pub sequence_restarts: u64,
    /// Late copies of a sequence before its restart.
    pub stale_sequence: u64,
}

#[derive(Debug, Clone)]
struct Gap {
    lo: u32,
    hi: u32,
    /// Received inside `[lo, hi)`, in any order at O(√n) a fill: grown
    /// amortised (doubling), taken from `spare` and left there when the
    /// gap closes.
    filled: Filled,
    deadline: u64,
}

impl Gap {
    fn missing(&self) -> u64 {
        u64::from(self.hi - self.lo) - self.filled.len() as u64
    }
}

/// One channel's incremental sequence.
#[derive(Debug)]
pub struct Sequence {
    settings: Settings,
    /// One past the highest MsgSeqNum received: 2^32 after 2^32 − 1.
    high: Option<u64>,
    /// Open gaps, lowest first: at most [`MAX_GAPS`], grown amortised
    /// (doubling) to the most open at once, capacity kept.
    gaps: VecDeque<Gap>,
    /// A gap's deadline may lie before a lower gap's: arrival times
    /// stepped back (a replay's capture), so deadlines are not in the
    /// gaps' order and expiry looks past the lowest, when the earliest
    /// deadline (this, ns; at most it: a gap closed since may have held
    /// it) has passed.
    unordered: Option<u64>,
    /// The `filled` lists of closed gaps, emptied, for the next gaps to
    /// take: once as many lists as gaps open at once were made (at most
    /// [`MAX_GAPS`]), each grown amortised (doubling) to the most packets a
    /// gap received, opening, filling and closing gaps allocates nothing.
    spare: Vec<Filled>,
    /// The last processed packet carried a ChannelReset (and was the
    /// newest): its SendingTime (ns since the Unix epoch, venue clock).
    reset_pending: Option<u64>,
    /// After a restart: the old `high`, until this time (ns).
    old: Option<(u64, u64)>,
    /// The highest MsgSeqNum of this sequence never to be received: in a
    /// gap given up, or below the first packet of the lines. A snapshot
    /// taken before it cannot vouch for what that packet held.
    unseen_through: Option<u32>,
    counters: Counters,
}

impl Sequence {
    /// A stream before its first packet.
    pub fn new(settings: Settings) -> Sequence {
        Sequence {
            settings,
            high: None,
            gaps: VecDeque::new(),
            unordered: None,
            spare: Vec::new(),
            reset_pending: None,
            old: None,
            unseen_through: None,
            counters: Counters::default(),
        }
    }

    /// One past the highest MsgSeqNum received; `None` before any.
    pub fn high(&self) -> Option<u64> {
        self.high
    }

    /// Gaps open.
    pub fn gaps_open(&self) -> usize {
        self.gaps.len()
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The first MsgSeqNum of the lowest gap open: every packet below it
    /// was received or given up.
    pub fn lowest_gap(&self) -> Option<u32> {
        self.gaps.front().map(|g| g.lo)
    }

    /// The earliest deadline of the gaps open (ns): that gap is given up
    /// by the first datagram or check strictly after it.
    pub fn next_deadline(&self) -> Option<u64> {
        match self.unordered {
            Some(_) => self.gaps.iter().map(|g| g.deadline).min(),
            None => self.gaps.front().map(|g| g.deadline),
        }
    }

    /// No MsgSeqNum in `[a, b]` is missing (every one received, or its gap
    /// given up).
    /// O(log gaps + log filled): the gaps are sorted and disjoint, so only
    /// those from the first ending past `a` are looked at, and the first
    /// missing a packet in the range answers (a gap lying wholly inside
    /// it, being open, does); a gap's received packets in the range are
    /// counted, not walked.
    pub fn complete(&self, a: u32, b: u32) -> bool {
        let first = self.gaps.partition_point(|g| g.hi <= a);
        let mut overlapping = self.gaps.range(first..).take_while(|g| g.lo <= b);
        !overlapping.any(|g| {
            let (x, y) = (a.max(g.lo), b.min(g.hi - 1));
            if x > y {
                return false;
            }
            let have = g.filled.count_in(u64::from(x), u64::from(y));
            (have as u64) < u64::from(y - x) + 1
        })
    }

    /// The lowest MsgSeqNum missing (in an open gap, not received);
    /// `None` while no gap is open.
    pub fn first_missing(&self) -> Option<u32> {
        let g = self.gaps.front()?;
        // Below `hi`, which is missing or the gap would have closed.
        Some(g.filled.first_gap_from(u64::from(g.lo)) as u32)
    }

    /// The packet `s`, sent at `sent`, just processed carried a
    /// ChannelReset: MsgSeqNum 1 next is a restart, and so is a packet
    /// below `high` sent after it ([`restart`](Self::restart); cleared by
    /// the next processed packet), unless it
    /// came late, below packets processed first: those kept its numbering,
    /// so no restart follows it (and far below next is the weekly
    /// restart, which empties what they sent of the old week). What is
    /// missing below `s` no longer matters, the channel being emptied:
    /// those gaps are dropped uncounted, as at a restart, so a late copy
    /// of a packet in them is a duplicate and never applied to the new
    /// books; a gap reaching above `s` (the reset came late) keeps its
    /// part above.
    pub fn channel_reset(&mut self, s: u32, sent: u64) {
        self.reset_pending = (self.high == Some(u64::from(s) + 1)).then_some(sent);
        while let Some(mut g) = self.gaps.pop_front() {
            if g.lo > s {
                self.gaps.push_front(g);
                break;
            }
            if u64::from(g.hi) > u64::from(s) + 1 {
                g.filled.retain_above(u64::from(s));
                g.lo = s + 1;
                if g.missing() > 0 {
                    self.gaps.push_front(g);
                    break;
                }
            }
            self.keep_spare(g);
        }
    }

    /// The clock stepped back to `now` (live: the receive loop saw it): no
    /// open gap's deadline lies more than `gap_timeout` after it, and the
    /// window of late copies of an older sequence ends by then too. Kept,
    /// the step's time would hold every gap open for as long as the step
    /// (deadlines stay in order: each is lowered alike). A replay calls
    /// it at a capture time more than `STEP_BACK_NS` behind the one before,
    /// as live.
    pub fn on_clock_stepped_back(&mut self, now: u64) {
        let bound = now.saturating_add(self.settings.gap_timeout_ns);
        for g in &mut self.gaps {
            g.deadline = g.deadline.min(bound);
        }
        self.unordered = self.unordered_since();
        if let Some((_, until)) = &mut self.old {
            *until = (*until).min(bound);
        }
    }

    /// Gives up every gap whose deadline is strictly before `t`, lowest
    /// first; returns how many.
    pub fn expire(&mut self, t: u64) -> usize {
        let mut n = 0;
        while self.gaps.front().is_some_and(|g| g.deadline < t) {
            self.give_up_lowest();
            n += 1;
        }
        if self.unordered.is_some_and(|earliest| earliest < t) {
            // Arrival times stepped back: a later gap may be due while a
            // lower one is not. Each due one goes, lowest first.
            let mut k = 0;
            while k < self.gaps.len() {
                match self.gaps[k].deadline < t {
                    true => {
                        if let Some(g) = self.gaps.remove(k) {
                            self.give_up(g);
                            n += 1;
                        }
                    }
                    false => k += 1,
                }
            }
            self.unordered = self.unordered_since();
        }
        if self.old.is_some_and(|(_, until)| until < t) {
            self.old = None;
        }
        n
    }

    fn give_up_lowest(&mut self) {
        if let Some(g) = self.gaps.pop_front() {
            self.give_up(g);
        }
    }

    /// The earliest deadline of the gaps open if their deadlines are out of
    /// their order ([`unordered`](Self::unordered)), else `None`.
    fn unordered_since(&self) -> Option<u64> {
        let out_of_order = self
            .gaps
            .iter()
            .zip(self.gaps.iter().skip(1))
            .any(|(a, b)| b.deadline < a.deadline);
        out_of_order.then(|| self.gaps.iter().map(|g| g.deadline).min())?
    }

    /// Gap `g`, taken out of the list, given up: its missing packets lost.
    fn give_up(&mut self, g: Gap) {
        self.counters.packets_lost += g.missing();
        self.counters.gaps_given_up += 1;
        // The highest packet of the gap never received: below the run of
        // packets filled up to its top, if there is one. (`hi` is above
        // `lo`: at least 1; a gap given up misses one at least.)
        let top = match g.filled.runs().last() {
            Some((l, h)) if h == u64::from(g.hi) && l > u64::from(g.lo) => l as u32 - 1,
            _ => g.hi - 1,
        };
        self.unseen(top);
        self.keep_spare(g);
    }

    /// MsgSeqNum `s` of this sequence will never be received.
    fn unseen(&mut self, s: u32) {
        self.unseen_through = Some(self.unseen_through.map_or(s, |u| u.max(s)));
    }

    /// The highest MsgSeqNum of this sequence that will never be received
    /// (in a gap given up, or below the first packet of the lines): a
    /// snapshot whose LastMsgSeqNumProcessed is below it was taken without
    /// that packet, which could hold anyone's update.
    pub fn unseen_through(&self) -> Option<u32> {
        self.unseen_through
    }

    /// Keeps a closed gap's list of received packets for a later gap.
    fn keep_spare(&mut self, g: Gap) {
        let mut filled = g.filled;
        if filled.capacity() > 0 && filled.capacity() <= SPARE_MAX {
            filled.clear();
            self.spare.push(filled);
        }
    }

    /// Whether a packet of MsgSeqNum `s` arriving at `t` is a late copy of
    /// the sequence before a restart ([`Packet::Stale`]).
    #[inline]
    fn stale(&self, s: u32, t: u64) -> bool {
        self.old.is_some_and(|(h, until)| {
            let s = u64::from(s);
            t <= until && s < h && s >= h.saturating_sub(u64::from(self.settings.restart_margin))
        })
    }

    /// The restart a packet of MsgSeqNum `s`, sent at `sent`, makes, with
    /// `reset_pending` as given. Not in the contract (docs/mdp3.md): right
    /// after a ChannelReset, one far below, or one below `high` nearer 1
    /// than `high` and sent after the reset's packet (a copy of an older
    /// packet lags by less than half the sequence and was sent before the
    /// reset), is that reset's restart with its first packets missing, not
    /// the weekly restart or a copy. MsgSeqNum 1 is its restart (the
    /// contract) unless sent before the reset's packet: then it is the
    /// other line's copy of the old sequence's packet 1 (a reset early in
    /// it), a duplicate (applied, it put back a book the reset emptied).
    #[inline]
    fn restart(&self, s: u32, sent: u64, reset_pending: Option<u64>) -> Option<Restart> {
        let h = self.high?;
        let far = u64::from(s) + u64::from(self.settings.restart_margin) < h;
        match reset_pending {
            Some(r) if far || (s == 1 && sent >= r) || (near_one(s, h) && sent > r) => {
                Some(Restart::AfterReset)
            }
            None if far => Some(Restart::Weekly),
            _ => None,
        }
    }

    /// Whether [`on_packet`](Self::on_packet) would find a packet of
    /// MsgSeqNum `s` sent at `sent` arriving at `t` a [`Packet::Duplicate`]
    /// or [`Packet::Stale`] (nothing of it processed), changing nothing: so
    /// that the other line's copy is only checked, not read for applying.
    #[inline]
    pub fn ignores(&self, s: u32, t: u64, sent: u64) -> bool {
        if self.stale(s, t) {
            return true;
        }
        let Some(high) = self.high else {
            return false;
        };
        if u64::from(s) >= high || self.restart(s, sent, self.reset_pending).is_some() {
            return false;
        }
        match self.gap_of(s) {
            Some(i) => self.gaps[i].filled.contains(u64::from(s)),
            None => true,
        }
    }

    /// The open gap `s` lies in, by its index in `gaps`.
    #[inline]
    fn gap_of(&self, s: u32) -> Option<usize> {
        let i = self.gaps.partition_point(|g| g.hi <= s);
        self.gaps.get(i).is_some_and(|g| g.lo <= s).then_some(i)
    }

    /// One accepted packet of MsgSeqNum `s` and SendingTime `sent` (venue
    /// clock), arrived at `t`. Returns what it is and how many gaps were
    /// given up for room.
    pub fn on_packet(&mut self, s: u32, t: u64, sent: u64) -> (Packet, usize) {
        if self.stale(s, t) {
            self.counters.stale_sequence += 1;
            return (Packet::Stale, 0);
        }
        let pending = std::mem::take(&mut self.reset_pending);
        let restart = self.restart(s, sent, pending);
        if restart.is_some() {
            // The new sequence began at 1 (a packet numbered 0, which no
            // venue sends, is its first: processed, as the contract's
            // `high` unset then takes it, not a duplicate of nothing).
            let h = self.high.replace(u64::from(s.min(1))).unwrap_or(0);
            while let Some(g) = self.gaps.pop_front() {
                self.keep_spare(g);
            }
            self.counters.sequence_restarts += 1;
            self.old = Some((h, t.saturating_add(self.settings.gap_timeout_ns)));
            self.unseen_through = None;
        }
        let Some(high) = self.high else {
            self.high = Some(u64::from(s) + 1);
            // The lines joined here: what came before was never received.
            if s > 1 {
                self.unseen(s - 1);
            }
            return (
                Packet::Process {
                    fill: false,
                    restart,
                },
                0,
            );
        };
        if u64::from(s) >= high {
            let mut given_up = 0;
            if u64::from(s) > high {
                self.counters.packet_gaps += 1;
                let filled = self.spare.pop().unwrap_or_default();
                let deadline = t.saturating_add(self.settings.gap_timeout_ns);
                let behind = self.gaps.back().is_some_and(|b| deadline < b.deadline);
                self.gaps.push_back(Gap {
                    // Below `s`, so within u32.
                    lo: high as u32,
                    hi: s,
                    filled,
                    deadline,
                });
                self.unordered = match (self.unordered, behind) {
                    (Some(earliest), _) => Some(earliest.min(deadline)),
                    // Just out of order: the earliest found once.
                    (None, true) => self.unordered_since(),
                    (None, false) => None,
                };
                while self.gaps.len() > MAX_GAPS {
                    self.give_up_lowest();
                    given_up += 1;
                }
            }
            self.high = Some(u64::from(s) + 1);
            return (
                Packet::Process {
                    fill: false,
                    restart,
                },
                given_up,
            );
        }
        if let Some(i) = self.gap_of(s) {
            let g = &mut self.gaps[i];
            if !g.filled.contains(u64::from(s)) {
                g.filled.insert(u64::from(s));
                self.counters.recovered += 1;
                if g.missing() == 0 {
                    if let Some(g) = self.gaps.remove(i) {
                        self.keep_spare(g);
                    }
                }
                return (
                    Packet::Process {
                        fill: true,
                        restart,
                    },
                    0,
                );
            }
        }
        // Not new: restore what a duplicate must not consume.
        self.reset_pending = pending;
        self.counters.duplicates += 1;
        (Packet::Duplicate, 0)
    }
}

/// Whether MsgSeqNum `s` lies below `high` and nearer 1 than `high`:
/// where a new sequence's first packets are, not the other line's copies
/// of the last ones.
#[inline]
fn near_one(s: u32, high: u64) -> bool {
    2 * u64::from(s) < high + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn seq() -> Sequence {
        Sequence::new(Settings {
            gap_timeout_ns: 5 * MS,
            restart_margin: 100,
        })
    }

    fn process(p: (Packet, usize)) -> bool {
        matches!(p.0, Packet::Process { .. })
    }

    #[test]
    fn a_channel_reset_drops_the_gaps_below_it() {
        let mut s = seq();
        s.on_packet(100, 0, 0);
        // Gaps [101, 103) and [104, 106); the reset is 104, filling the
        // second gap late.
        s.on_packet(103, 1, 0);
        s.on_packet(106, 1, 0);
        assert!(process(s.on_packet(104, 2, 0)));
        s.channel_reset(104, 0);
        assert_eq!(s.gaps_open(), 1, "only what lies above the reset");
        assert_eq!(s.first_missing(), Some(105));
        assert_eq!(
            s.on_packet(102, 3, 0).0,
            Packet::Duplicate,
            "before the reset"
        );
        assert_eq!(s.counters().packets_lost, 0, "dropped, not lost");
        s.on_packet(105, 3, 0);
        assert_eq!(s.gaps_open(), 0);
        // A reset with nothing missing after it leaves no gap.
        let mut s = seq();
        s.on_packet(100, 0, 0);
        s.on_packet(102, 1, 0);
        s.on_packet(101, 2, 0);
        s.channel_reset(101, 0);
        assert_eq!(s.gaps_open(), 0);
    }

    /// A packet numbered 0 far below `high` restarts the sequence as any
    /// packet there does, and is then processed (the new sequence's
    /// first), never a duplicate: the feed empties the channel only for a
    /// packet it processes, so a restart told as a duplicate would drop
    /// the open gaps without giving them up, and their instruments would
    /// stay `ok` without the packets lost.
    #[test]
    fn a_packet_numbered_0_restarts_and_is_processed() {
        let mut s = seq();
        s.on_packet(1_000, 0, 0);
        s.on_packet(1_002, 0, 0);
        assert_eq!(s.gaps_open(), 1);
        assert!(!s.ignores(0, 1, 0), "told to the feed");
        assert_eq!(
            s.on_packet(0, 1, 0).0,
            Packet::Process {
                fill: false,
                restart: Some(Restart::Weekly)
            }
        );
        assert_eq!((s.high(), s.gaps_open()), (Some(1), 0));
        assert_eq!(s.counters().duplicates, 0);
        // The new sequence goes on from it.
        assert!(process(s.on_packet(1, 2, 0)));
        assert_eq!((s.high(), s.gaps_open()), (Some(2), 0));
        // Right after a ChannelReset, it is that reset's restart.
        let mut s = seq();
        s.on_packet(1_000, 0, 0);
        s.channel_reset(1_000, 5);
        assert_eq!(
            s.on_packet(0, 1, 6).0,
            Packet::Process {
                fill: false,
                restart: Some(Restart::AfterReset)
            }
        );
        // Near `high` it is below every gap: the other line's copy of
        // nothing, a duplicate, as `ignores` foretells.
        let mut s = seq();
        s.on_packet(50, 0, 0);
        assert!(s.ignores(0, 1, 0));
        assert_eq!(s.on_packet(0, 1, 0).0, Packet::Duplicate);
    }

    #[test]
    fn the_first_packet_sets_high_then_gaps_fill_or_are_duplicates() {
        let mut s = seq();
        assert!(process(s.on_packet(500, 0, 0)));
        assert_eq!((s.high(), s.gaps_open()), (Some(501), 0));
        assert!(process(s.on_packet(504, 1, 0)));
        assert_eq!(s.counters().packet_gaps, 1);
        assert!(!s.complete(500, 504) && s.complete(500, 500) && s.complete(504, 504));
        assert_eq!(
            s.on_packet(502, 2, 0).0,
            Packet::Process {
                fill: true,
                restart: None
            }
        );
        assert_eq!(
            s.on_packet(502, 2, 0).0,
            Packet::Duplicate,
            "the other line's copy"
        );
        assert_eq!(s.on_packet(504, 2, 0).0, Packet::Duplicate);
        s.on_packet(501, 3, 0);
        s.on_packet(503, 3, 0);
        assert_eq!((s.gaps_open(), s.counters().recovered), (0, 3));
        assert!(s.complete(0, 600));
        assert_eq!(s.counters().duplicates, 2);
    }

    /// A gap filled from its top down (the worst order for one sorted
    /// list: every fill at its front, which [`Filled`] takes at O(√n))
    /// is tracked packet by packet and closes at its last fill.
    #[test]
    fn a_gap_filled_from_its_top_down_closes_at_its_last_fill() {
        let mut s = Sequence::new(Settings {
            gap_timeout_ns: 5 * MS,
            restart_margin: 1_000_000,
        });
        s.on_packet(1, 0, 0);
        let n = 20_000;
        s.on_packet(2 + n, 0, 0);
        for q in (3..2 + n).rev() {
            assert!(matches!(
                s.on_packet(q, 0, 0).0,
                Packet::Process { fill: true, .. }
            ));
            assert_eq!(s.first_missing(), Some(2));
            assert!(s.complete(q, 2 + n) && !s.complete(2, 2 + n));
        }
        assert!(s.ignores(2 + n / 2, 0, 0));
        s.on_packet(2, 0, 0);
        assert_eq!((s.gaps_open(), s.first_missing()), (0, None));
        assert_eq!(s.counters().recovered, u64::from(n));
    }

    #[test]
    fn the_first_missing_packet_is_that_of_the_lowest_gap() {
        let mut s = seq();
        s.on_packet(1, 0, 0);
        assert_eq!(s.first_missing(), None);
        s.on_packet(5, 1, 0);
        assert_eq!(s.first_missing(), Some(2));
        s.on_packet(2, 2, 0);
        s.on_packet(4, 2, 0);
        assert_eq!(s.first_missing(), Some(3));
        s.on_packet(9, 3, 0);
        s.on_packet(3, 4, 0);
        assert_eq!(s.first_missing(), Some(6));
        s.expire(u64::MAX);
        assert_eq!(s.first_missing(), None);
    }

    /// The clock stepped back (live): open gaps are given up a timeout
    /// after the step's time, not held until the clock caught up with
    /// their old deadlines (deadlines stay in order).
    #[test]
    fn a_clock_stepped_back_does_not_hold_gaps_for_the_step() {
        let minute = 60_000 * MS;
        let mut s = seq();
        s.on_packet(1, minute, 0);
        s.on_packet(3, minute, 0); // [2, 3), deadline 1 min + 5 ms
        s.on_clock_stepped_back(MS);
        s.on_packet(5, 2 * MS, 0); // [4, 5), deadline 7 ms
        assert_eq!(s.expire(6 * MS), 0);
        assert_eq!(s.expire(6 * MS + 1), 1);
        assert_eq!(s.expire(7 * MS + 1), 1);
    }

    /// Arrival times that step back (a replay's capture) open a later gap
    /// with an earlier deadline: it is given up at its own deadline,
    /// though a lower gap is not due yet (the contract: each open gap
    /// whose deadline is strictly before the event's time).
    #[test]
    fn a_later_gap_due_first_is_given_up_at_its_own_deadline() {
        let mut s = seq();
        s.on_packet(1, 1000 * MS, 0);
        s.on_packet(3, 1000 * MS, 0); // [2, 3), deadline 1005 ms
        s.on_packet(5, 990 * MS, 0); // [4, 5), deadline 995 ms
        assert_eq!(s.next_deadline(), Some(995 * MS));
        assert_eq!(s.expire(995 * MS), 0);
        assert_eq!(s.expire(995 * MS + 1), 1);
        assert_eq!(
            (s.lowest_gap(), s.next_deadline(), s.counters().packets_lost),
            (Some(2), Some(1005 * MS), 1)
        );
        assert_eq!(s.expire(1005 * MS + 1), 1);
        assert_eq!((s.lowest_gap(), s.counters().packets_lost), (None, 2));
    }

    #[test]
    fn gaps_expire_strictly_after_their_deadline_lowest_first() {
        let mut s = seq();
        s.on_packet(1, 0, 0);
        s.on_packet(5, 10, 0); // [2, 5), deadline 10 + 5 ms
        s.on_packet(3, 11, 0);
        s.on_packet(9, 12, 0); // [6, 9)
        assert_eq!(s.expire(10 + 5 * MS), 0, "at the deadline: still open");
        assert_eq!(s.expire(10 + 5 * MS + 1), 1);
        assert_eq!(s.counters().packets_lost, 2);
        assert_eq!(s.counters().gaps_given_up, 1, "one gap, two packets");
        assert!(s.complete(2, 5), "given up counts as complete");
        assert!(!s.complete(6, 6));
        assert_eq!(s.expire(u64::MAX), 1);
        assert_eq!(s.counters().packets_lost, 5);
        assert_eq!(s.counters().gaps_given_up, 2);
    }

    #[test]
    fn one_after_a_channel_reset_restarts_and_late_copies_are_stale() {
        let mut s = seq();
        s.on_packet(1_000, 0, 0);
        s.on_packet(1_003, 1, 0);
        s.channel_reset(1_003, 0);
        // A duplicate does not take the pending reset.
        assert_eq!(s.on_packet(1_003, 2, 0).0, Packet::Duplicate);
        assert_eq!(s.on_packet(1, 3, 0).0, AFTER_RESET);
        assert_eq!(
            (s.gaps_open(), s.high(), s.counters().sequence_restarts),
            (0, Some(2), 1)
        );
        // Line B's late copy of the old sequence: no effect.
        assert_eq!(s.on_packet(1_002, 4, 0).0, Packet::Stale);
        assert_eq!(s.counters().stale_sequence, 1);
        // After the window it would be a new packet far ahead.
        s.expire(4 + 5 * MS);
        assert_eq!(
            s.on_packet(2, 4 + 5 * MS, 0).0,
            Packet::Process {
                fill: false,
                restart: None
            }
        );
        assert!(process(s.on_packet(1_002, 4 + 6 * MS, 0)));
    }

    /// A gap above a late reset's packet, which the reset keeps, is
    /// dropped uncounted by the restart after it (spec mdp3 §3.1): nothing
    /// of it is lost when its deadline passes. The packets processed
    /// first went on with the reset's numbering, so that restart is the
    /// weekly one, not the reset's.
    #[test]
    fn the_restart_after_a_channel_reset_drops_the_gaps_above_it() {
        let mut s = seq();
        s.on_packet(100, 0, 0);
        s.on_packet(105, 0, 0);
        s.on_packet(102, 0, 0);
        s.channel_reset(102, 0);
        assert_eq!(s.gaps_open(), 1, "[103, 105) lies above the reset");
        assert_eq!(
            s.on_packet(1, 1, 0).0,
            Packet::Process {
                fill: false,
                restart: Some(Restart::Weekly)
            }
        );
        assert_eq!(s.gaps_open(), 0);
        s.expire(u64::MAX);
        assert_eq!(
            (s.counters().packets_lost, s.counters().gaps_given_up),
            (0, 0)
        );
    }

    /// The first packet of the sequence after a ChannelReset.
    const AFTER_RESET: Packet = Packet::Process {
        fill: false,
        restart: Some(Restart::AfterReset),
    };

    /// A late copy of the old sequence (stale) does not take a reset
    /// pending in the new one: the first processed packet after it does.
    #[test]
    fn a_stale_copy_does_not_take_a_pending_reset() {
        let mut s = seq();
        s.on_packet(1_000, 0, 0);
        s.channel_reset(1_000, 0);
        assert!(process(s.on_packet(1, 1, 0)));
        assert!(process(s.on_packet(2, 1, 0)));
        s.channel_reset(2, 0);
        assert_eq!(s.on_packet(995, 2, 0).0, Packet::Stale);
        assert_eq!(s.on_packet(1, 3, 0).0, AFTER_RESET);
        assert_eq!(s.counters().sequence_restarts, 2);
    }

    /// Not in the contract's letter (docs/mdp3.md): MsgSeqNum 1 right after
    /// a ChannelReset, sent before the reset's packet, is the other line's
    /// copy of the old sequence's packet 1 (a reset in packet 2), a
    /// duplicate: taken for the new sequence, it put back the book the
    /// reset emptied. Sent with it or after, the reset's restart.
    #[test]
    fn one_sent_before_a_channel_reset_is_a_copy() {
        let mut s = seq();
        s.on_packet(1, 0, 100);
        s.on_packet(2, 1, 200);
        s.channel_reset(2, 200);
        assert!(s.ignores(1, 2, 100));
        assert_eq!(s.on_packet(1, 2, 100).0, Packet::Duplicate);
        assert!(!s.ignores(1, 3, 200));
        assert_eq!(s.on_packet(1, 3, 200).0, AFTER_RESET);
    }

    #[test]
    fn far_below_high_is_the_weekly_restart_and_one_without_reset_is_not() {
        let mut s = seq();
        s.on_packet(5_000, 0, 0);
        // 1 without a ChannelReset, within the margin of nothing: a copy?
        // No: far below high, it is the weekly restart.
        assert_eq!(
            s.on_packet(1, 1, 0).0,
            Packet::Process {
                fill: false,
                restart: Some(Restart::Weekly)
            }
        );
        let mut s = seq();
        s.on_packet(50, 0, 0);
        // Within the margin below high: an old copy, not a restart.
        assert_eq!(s.on_packet(1, 1, 0).0, Packet::Duplicate);
        // The reset flag lasts one processed packet.
        s.channel_reset(50, 0);
        s.on_packet(51, 2, 0);
        assert_eq!(s.on_packet(1, 3, 0).0, Packet::Duplicate);
        // Far below right after a ChannelReset: its restart, packet 1
        // missing (docs/mdp3.md), not the weekly one.
        let mut s = seq();
        s.on_packet(5_000, 0, 0);
        s.channel_reset(5_000, 0);
        assert_eq!(s.on_packet(2, 1, 0).0, AFTER_RESET);
        // A ChannelReset come late, below packets processed first that
        // kept its numbering: no restart follows it, and far below next is
        // the weekly one.
        let mut s = seq();
        s.on_packet(5_000, 0, 0);
        s.on_packet(5_002, 0, 0);
        assert!(process(s.on_packet(5_001, 1, 0)));
        s.channel_reset(5_001, 0);
        assert_eq!(
            s.on_packet(1, 2, 0).0,
            Packet::Process {
                fill: false,
                restart: Some(Restart::Weekly)
            }
        );
    }

    /// "S + `restart_margin` < `high`" (spec mdp3 §3.1) at its boundary:
    /// `high` 1,001 after packet 1,000, margin 100: 900 is the weekly
    /// restart, 901 (901 + 100 = `high`) a late copy.
    #[test]
    fn the_weekly_restart_begins_one_past_the_margin() {
        let mut s = seq();
        s.on_packet(1_000, 0, 0);
        assert_eq!(s.on_packet(901, 1, 0).0, Packet::Duplicate);
        assert_eq!(
            s.on_packet(900, 2, 0).0,
            Packet::Process {
                fill: false,
                restart: Some(Restart::Weekly)
            }
        );
        assert_eq!(s.high(), Some(901));
        assert_eq!(s.counters().sequence_restarts, 1);
    }

    /// Not in the contract (docs/mdp3.md): right after a ChannelReset, a
    /// packet nearer 1 than `high` and sent after the reset's packet is of
    /// the new sequence, its first packets missing, not a copy: its
    /// restart. One sent before it (line B's copy of an older packet), at
    /// the same time (the reset's own copy) or nearer `high` is a
    /// duplicate.
    #[test]
    fn below_high_and_sent_after_a_channel_reset_is_its_restart() {
        let mut s = seq();
        s.on_packet(50, 0, 500);
        s.channel_reset(50, 500);
        assert_eq!(s.on_packet(48, 1, 480).0, Packet::Duplicate);
        assert_eq!(s.on_packet(50, 1, 500).0, Packet::Duplicate);
        assert!(s.ignores(48, 1, 480));
        // Sent later (another line's clock?) but nearer the old high: a
        // copy of an older packet still.
        assert_eq!(s.on_packet(26, 1, 510).0, Packet::Duplicate);
        assert!(!s.ignores(3, 1, 510));
        assert_eq!(s.on_packet(3, 1, 510).0, AFTER_RESET);
        assert_eq!((s.high(), s.gaps_open()), (Some(4), 1));
        // Without a ChannelReset before it, a copy whatever its time.
        let mut s = seq();
        s.on_packet(50, 0, 500);
        assert_eq!(s.on_packet(3, 1, 510).0, Packet::Duplicate);
    }

    /// Not in the contract: the new sequence began at 1, so a restart past
    /// 1 opens the gap from 1, which a late copy fills and which is given
    /// up like any other.
    #[test]
    fn a_restart_past_1_opens_the_gap_from_1() {
        let mut s = seq();
        s.on_packet(5_000, 0, 0);
        s.channel_reset(5_000, 0);
        assert_eq!(s.on_packet(3, 1, 0).0, AFTER_RESET);
        assert_eq!((s.gaps_open(), s.high()), (1, Some(4)));
        assert_eq!(
            s.on_packet(1, 2, 0).0,
            Packet::Process {
                fill: true,
                restart: None
            }
        );
        s.expire(u64::MAX);
        assert_eq!(
            (s.counters().packet_gaps, s.counters().packets_lost),
            (1, 1)
        );
        // The weekly restart at 1 itself: no gap; past it, the gap from 1.
        let mut s = seq();
        s.on_packet(5_000, 0, 0);
        s.on_packet(1, 1, 0);
        assert_eq!((s.gaps_open(), s.high()), (0, Some(2)));
        let mut s = seq();
        s.on_packet(5_000, 0, 0);
        let weekly = Packet::Process {
            fill: false,
            restart: Some(Restart::Weekly),
        };
        assert_eq!(s.on_packet(5, 1, 0).0, weekly);
        assert_eq!((s.gaps_open(), s.high()), (1, Some(6)));
    }

    /// MsgSeqNum 2^32 − 1, the last: `high` is one past it, so its copy
    /// is a duplicate, and after a ChannelReset and the restart at 1 a
    /// late copy of it is of the old sequence.
    #[test]
    fn the_last_msg_seq_num_is_below_high_like_any() {
        let last = u32::MAX;
        let mut s = seq();
        assert!(process(s.on_packet(last - 1, 0, 0)));
        assert!(process(s.on_packet(last, 0, 0)));
        assert_eq!(s.high(), Some(1 << 32));
        assert!(s.ignores(last, 0, 0));
        assert_eq!(s.on_packet(last, 0, 0).0, Packet::Duplicate);
        assert_eq!(s.counters().duplicates, 1);
        s.channel_reset(last, 0);
        assert_eq!(
            s.on_packet(1, 1, 0).0,
            Packet::Process {
                fill: false,
                restart: Some(Restart::AfterReset)
            }
        );
        assert!(s.ignores(last, 2, 0));
        assert_eq!(s.on_packet(last, 2, 0).0, Packet::Stale);
        assert_eq!((s.gaps_open(), s.high()), (0, Some(2)));
        assert_eq!(s.counters().packet_gaps, 0);
    }

    #[test]
    fn gaps_beyond_the_most_give_up_the_lowest() {
        let mut s = seq();
        s.on_packet(1, 0, 0);
        let mut given = 0;
        for k in 0..=MAX_GAPS as u32 {
            given += s.on_packet(3 + 2 * k, 1, 0).1;
        }
        assert_eq!((given, s.gaps_open()), (1, MAX_GAPS));
        assert_eq!(s.counters().packets_lost, 1);
    }

    /// A closed gap's list of received packets serves the next gap: filled,
    /// given up or dropped by a restart, none is freed (nor made anew).
    #[test]
    fn closed_gaps_leave_their_lists_to_the_next() {
        let mut s = seq();
        s.on_packet(1_000, 0, 0);
        s.on_packet(1_003, 0, 0); // [1001, 1003)
        s.on_packet(1_001, 0, 0);
        assert_eq!(s.spare.len(), 0, "the gap holds its list");
        s.on_packet(1_002, 0, 0);
        assert_eq!((s.gaps_open(), s.spare.len()), (0, 1));
        s.on_packet(1_006, 0, 0); // [1004, 1006): takes the list
        assert_eq!(s.spare.len(), 0);
        s.on_packet(1_004, 0, 0);
        assert_eq!(s.expire(5 * MS + 1), 1);
        assert_eq!((s.spare.len(), s.counters().packets_lost), (1, 1));
        s.on_packet(1_009, 6 * MS, 0); // [1007, 1009)
        s.on_packet(1_007, 6 * MS, 0);
        s.on_packet(1, 6 * MS, 0); // far below: the weekly restart
        assert_eq!(s.counters().sequence_restarts, 1);
        assert_eq!((s.gaps_open(), s.spare.len()), (0, 1));
        assert_eq!(s.counters().recovered, 4);
    }

    proptest::proptest! {
        /// `first_missing` is the lowest MsgSeqNum of the lowest gap not
        /// received, however the gap was filled (gaps narrower than the
        /// restart margin, so that no fill is a restart).
        #[test]
        fn the_first_missing_is_the_lowest_not_received(
            width in 1u32..90,
            fills in proptest::collection::vec(0u32..90, 0..200),
        ) {
            let mut s = seq();
            s.on_packet(1, 0, 0);
            s.on_packet(2 + width, 0, 0);
            let mut got = std::collections::BTreeSet::new();
            for f in fills.into_iter().map(|f| 2 + f % width) {
                s.on_packet(f, 0, 0);
                got.insert(f);
                let want = (2..2 + width).find(|q| !got.contains(q));
                proptest::prop_assert_eq!(s.first_missing(), want);
            }
        }

        /// `complete(a, b)` is true exactly when every MsgSeqNum in
        /// `[a, b]` was received, with many gaps open among the ranges
        /// (packets sent ahead in jumps, then some filled; all within the
        /// restart margin, so that no fill is a restart).
        #[test]
        fn complete_agrees_with_the_packets_received(
            jumps in proptest::collection::vec(1u32..5, 1..30),
            fills in proptest::collection::vec(0u32..100, 0..60),
            ranges in proptest::collection::vec((0u32..110, 0u32..40), 1..60),
        ) {
            let mut s = seq();
            let mut got = std::collections::BTreeSet::new();
            let mut n = 1;
            for j in jumps {
                s.on_packet(n, 0, 0);
                got.insert(n);
                n += j;
            }
            for f in fills.into_iter().filter(|&f| f >= 1 && f < n) {
                s.on_packet(f, 0, 0);
                got.insert(f);
            }
            for (a, w) in ranges {
                let b = a.saturating_add(w);
                // Nothing is missing below the first packet or from
                // `high` on (not expected yet).
                let high = s.high().unwrap_or(0);
                let want = (a..=b)
                    .filter(|&q| q >= 1 && u64::from(q) < high)
                    .all(|q| got.contains(&q));
                proptest::prop_assert_eq!(s.complete(a, b), want, "[{}, {}]", a, b);
            }
        }

        /// `ignores` tells, changing nothing, what `on_packet` then finds a
        /// Duplicate or Stale, through gaps, fills, expiries, give-ups for
        /// room, channel resets and both kinds of restart.
        #[test]
        fn ignores_foretells_what_on_packet_ignores(
            steps in proptest::collection::vec((0u8..8, 0u32..40, 0u64..3, 0u64..3), 1..300),
        ) {
            let mut s = seq();
            let mut t = 0;
            let mut last = 0;
            for (op, k, dt, sent) in steps {
                t += dt * MS;
                s.expire(t);
                let n = match op {
                    // Near the highest seen: ahead (gaps), copies and fills.
                    // (0 too: no venue sends it, a forger may.)
                    0..=4 => (last + k).saturating_sub(20),
                    // The reset's restart and the weekly one, and stale
                    // copies of the old sequence after them.
                    5 => 1,
                    6 => last + 200 + k,
                    _ => {
                        s.channel_reset(last, 1);
                        continue;
                    }
                };
                let before = s.counters().duplicates + s.counters().stale_sequence;
                let ignored = s.ignores(n, t, sent);
                let (seen, _) = s.on_packet(n, t, sent);
                let after = s.counters().duplicates + s.counters().stale_sequence;
                proptest::prop_assert_eq!(
                    ignored,
                    matches!(seen, Packet::Duplicate | Packet::Stale),
                    "packet {} at {}: {:?}", n, t, seen
                );
                proptest::prop_assert_eq!(after - before, u64::from(ignored));
                if let Packet::Process { restart, .. } = seen {
                    if n > last || restart.is_some() {
                        last = n;
                    }
                }
            }
        }
    }
}
