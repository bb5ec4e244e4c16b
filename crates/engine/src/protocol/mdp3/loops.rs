//! The snapshot loop's beginnings, counted on each snapshot line: what
//! ends the reset screen ([`Feed`](super::feed::Feed)) and a give-up's
//! hold on the snapshot lines ([`engine`](super::engine)).

/// The longest a gap given up keeps the snapshot lines joined for a whole
/// loop (ns), counted from the give-up or, within a restart's window (a
/// minute at most), from the window's last look: a loop that stopped is
/// never counted, nor one whose SendingTime stopped rising ([`Loops`]),
/// so the whole loop might never show.
pub const HOLD_MAX_NS: u64 = 60_000_000_000;

/// Snapshot loops begun, counted on each snapshot line (A, B) alone, the
/// larger count taken: a copy on the other line, early or late, begins
/// nothing. A loop begins on a line at a packet of MsgSeqNum 1 sent later
/// than the line's last beginning (so a loop of a single packet counts at
/// each sending, and a duplicate, a packet 1 delivered late, or one
/// stamped back or at 0 begins nothing). Neither count can pass the loops
/// the venue sent, whatever SendingTime each line stamps (a loop counted
/// twice would end a give-up's hold early); a count held back only keeps
/// the lines joined longer. So a line back from a failure counts from
/// where it stopped: the loops count again once it passes the other's.
/// A beginning stamped far ahead (a corrupt or forged SendingTime) would
/// hold its line's count back for good: a packet 1 that comes
/// [`HOLD_MAX_NS`] of local time after its line's last beginning begins
/// a loop whatever its stamp.
///
/// Each line also tells the loops it read whole: from its packet 1, every
/// MsgSeqNum in order up to the next beginning (a packet missing or out
/// of order is a hole, and so is one numbered below the next but stamped
/// later: a later loop's, its packet 1 lost), and at least TotNumReports
/// snapshots among them (a loop's last packets lost leave no hole in the
/// numbers; a TotNumReports null or past what the loop holds never reads
/// whole, and one that changes within it is a hole, as is a snapshot that
/// said no status: [`on_snapshot`](Self::on_snapshot)), with the least
/// LastMsgSeqNumProcessed of its snapshots.
#[derive(Debug, Default, Clone)]
pub struct Loops {
    begun: [u64; 2],
    /// SendingTime of each line's latest beginning, ns (venue clock): only
    /// ever rises, but for a beginning taken by its arrival.
    sent: [u64; 2],
    /// Arrival of each line's latest beginning, ns (local clock).
    at: [Option<u64>; 2],
    /// The loop under way on each line, as read so far.
    reading: [Reading; 2],
    /// On each line, the number (its `begun` then) of the latest loop it
    /// read whole; 0 none.
    whole: [u64; 2],
    /// On each line, the least LastMsgSeqNumProcessed of the snapshots of
    /// the latest loop it read whole: every one of them was taken with the
    /// incremental packets up to it.
    taken_from: [u32; 2],
}

/// A line's loop under way, as read.
#[derive(Debug, Default, Clone, Copy)]
struct Reading {
    /// The MsgSeqNum that continues it; 0: a hole (or no beginning seen).
    next: u32,
    /// SendingTime of its last packet read, ns (venue clock).
    last_sent: u64,
    /// The packet being read continues it: its snapshots count.
    counting: bool,
    /// Snapshots read in it.
    reports: u64,
    /// Its TotNumReports (its first snapshot's: another is a hole).
    total: Option<u32>,
    /// The least LastMsgSeqNumProcessed of its snapshots.
    taken_from: u32,
}

/// What [`Loops`] tells of the loops: begun (the larger count of the two
/// lines), and on each line the number of the latest loop read whole and
/// the least LastMsgSeqNumProcessed of its snapshots; with the highest
/// MsgSeqNum of the incremental lines never to be received (`unseen`, set
/// by whoever asks: [`Sequence::unseen_through`](super::sequence::Sequence::unseen_through)).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LoopCount {
    pub begun: u64,
    pub whole: [u64; 2],
    pub taken_from: [u32; 2],
    pub unseen: Option<u32>,
}

impl LoopCount {
    /// Whether some line read whole a loop it numbered past `begun` (the
    /// larger count at some earlier time) every snapshot of which was
    /// taken with the packets never to be received (LastMsgSeqNumProcessed
    /// at `unseen` or past it: a status they held is in it). The numbers
    /// alone do not tell a loop begun since: a line whose copies come late
    /// counts from its own first beginning, so its loop N may be the
    /// other's N − 2; the snapshots' places do. (After a restart, with no
    /// packet of the new sequence unseen, the numbers alone.)
    pub fn read_since(&self, begun: u64) -> bool {
        (0..2).any(|i| self.whole[i] > begun && self.unseen.is_none_or(|u| self.taken_from[i] >= u))
    }
}

impl Loops {
    /// Packet `seq` of snapshot line `line`, stamped `sent` (venue clock),
    /// arrived at `t` (local clock): whether it begins a loop. Its
    /// snapshots are then told by [`on_snapshot`](Self::on_snapshot).
    pub fn on_packet(&mut self, line: usize, seq: u32, sent: u64, t: u64) -> bool {
        let i = line % 2;
        // (Not at a clock stepped back: a duplicate would begin a loop
        // again. A step back holds a stalled line back by the step too.)
        let stalled = self.at[i].is_some_and(|at| t >= at.saturating_add(HOLD_MAX_NS));
        let begins = seq == 1 && (sent > self.sent[i] || stalled);
        let r = &mut self.reading[i];
        r.counting = false;
        if begins {
            let read = r.next != 0 && r.total.is_some_and(|n| r.reports >= u64::from(n));
            if read {
                self.whole[i] = self.begun[i];
                self.taken_from[i] = r.taken_from;
            }
            self.begun[i] += 1;
            self.sent[i] = sent;
            self.at[i] = Some(t);
            *r = Reading::default();
        } else if r.next == 0 {
            return false;
        } else if seq != r.next || sent < r.last_sent {
            // A copy sent twice on one line (below `next`, stamped as what
            // it repeats) reads nothing new. A packet missing before this
            // one, one out of order, one of a later loop whose packet 1
            // was lost (below `next`, stamped later), or one stamped before
            // the last (an older loop's copy, late) is a hole.
            if seq >= r.next || sent > r.last_sent {
                r.next = 0;
            }
            return false;
        }
        r.next = seq.wrapping_add(1).max(1);
        r.last_sent = sent;
        r.counting = true;
        begins
    }

    /// A snapshot of TotNumReports `total`, taken after incremental packet
    /// `last` (its LastMsgSeqNumProcessed), in the packet of `line` last
    /// given to [`on_packet`](Self::on_packet); `said` whether the feed
    /// took its instrument's status at its place in this sequence (or it
    /// names none of the channel's). A TotNumReports other than the
    /// loop's first is a hole: the packets read may be of two loops, an
    /// instrument begun or ended between them. So is a snapshot that said
    /// nothing (screened, taken past the packets received, placed before
    /// the last reset, of the sequence before a restart, not applied at
    /// RptSeq 0): the loop did not say every status again.
    pub fn on_snapshot(&mut self, line: usize, total: u32, last: u32, said: bool) {
        let r = &mut self.reading[line % 2];
        if !r.counting {
            return;
        }
        if !said || r.total.is_some_and(|n| n != total) {
            (r.next, r.counting) = (0, false);
            return;
        }
        r.taken_from = match r.total {
            None => last,
            Some(_) => r.taken_from.min(last),
        };
        r.total = Some(total);
        r.reports += 1;
    }

    /// Loops begun: the larger of the two lines' counts.
    pub fn begun(&self) -> u64 {
        self.begun[0].max(self.begun[1])
    }

    /// Loops begun and read whole (`unseen` unset).
    pub fn count(&self) -> LoopCount {
        LoopCount {
            begun: self.begun(),
            whole: self.whole,
            taken_from: self.taken_from,
            unseen: None,
        }
    }
}
