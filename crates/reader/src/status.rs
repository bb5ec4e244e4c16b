//! What a feed keeps per feed rather than per symbol, as published, and
//! the verdict every reader computes from what it read of a slot and it.

use crate::seqlock::SeqLock;
use crate::slot::Facts;
use crate::verdict::{reasons, Inputs, Reasons};
use std::sync::atomic::{AtomicU64, Ordering};

/// What an exchange feed keeps per feed rather than per symbol (ITCH:
/// liveness, source watermark, suspect while a gap is open, trading hours).
/// SQF leaves it all zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FeedStatus {
    /// Every symbol of the feed is suspect (a gap open or given up, a
    /// mid-session join, or orders refused for room this session).
    pub suspect: bool,
    /// The market is closed: every symbol answers `closed`.
    pub closed: bool,
    /// The feed's session is joined (informational).
    pub joined: bool,
    /// The books refused an add for room (`max_orders`) this session: one
    /// reason for `suspect`, which lasts until the session changes.
    pub orders_refused: bool,
    /// Last sign of life of the feed, ns since the Unix epoch (local clock); 0 = none.
    pub last_alive: u64,
    /// Latest source time seen on the feed, ns since the Unix epoch
    /// (provider clock); 0 = none.
    pub source_watermark: u64,
}

impl FeedStatus {
    /// The [`feed_flag`] bits of the status.
    pub fn flags(&self) -> u64 {
        [
            (self.suspect, feed_flag::SUSPECT),
            (self.closed, feed_flag::CLOSED),
            (self.joined, feed_flag::JOINED),
            (self.orders_refused, feed_flag::ORDERS_REFUSED),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .fold(0, |f, (_, bit)| f | bit)
    }

    /// `self` with the restrictions `next` adds (suspect, closed) and
    /// nothing else of `next`: what a writer publishes before the slots of
    /// a change that also restricts the feed, the whole of `next` after
    /// them. A check then never pairs a slot of the change with the looser
    /// status before it; and the times stay `self`'s, for later times
    /// published first would make the slots not yet written look fresher.
    pub fn tightened_by(&self, next: &FeedStatus) -> FeedStatus {
        FeedStatus {
            suspect: self.suspect || next.suspect,
            closed: self.closed || next.closed,
            orders_refused: self.orders_refused || next.orders_refused,
            ..*self
        }
    }
}

impl FeedStatus {
    /// The status its three words say.
    fn from_words(flags: u64, last_alive: u64, source_watermark: u64) -> FeedStatus {
        FeedStatus {
            suspect: flags & feed_flag::SUSPECT != 0,
            closed: flags & feed_flag::CLOSED != 0,
            joined: flags & feed_flag::JOINED != 0,
            orders_refused: flags & feed_flag::ORDERS_REFUSED != 0,
            last_alive,
            source_watermark,
        }
    }
}

/// Bits of [`FeedStatusWords::flags`].
pub mod feed_flag {
    pub const SUSPECT: u64 = 1 << 0;
    pub const CLOSED: u64 = 1 << 1;
    pub const JOINED: u64 = 1 << 2;
    pub const ORDERS_REFUSED: u64 = 1 << 3;
}

/// A [`FeedStatus`] behind its seqlock: bytes 512..544 of a publication's
/// feed block (`state_stamp`, `flags`, `last_alive`, `source_watermark`),
/// and the heap table's copy.
#[repr(C)]
#[derive(Default)]
pub struct FeedStatusWords {
    /// Odd while written, +2 per write.
    pub stamp: SeqLock,
    /// [`feed_flag`] bits.
    pub flags: AtomicU64,
    pub last_alive: AtomicU64,
    pub source_watermark: AtomicU64,
}

impl FeedStatusWords {
    /// Stores `s` as one write (skipped when nothing changed). Single writer only.
    pub fn write(&self, s: &FeedStatus) {
        let flags = s.flags();
        let words = [
            (&self.flags, flags),
            (&self.last_alive, s.last_alive),
            (&self.source_watermark, s.source_watermark),
        ];
        // Relaxed: the writer reads back its own stores.
        if words.iter().all(|(w, v)| w.load(Ordering::Relaxed) == *v) {
            return;
        }
        self.stamp.write(|| {
            for (w, v) in words {
                // Relaxed: published by the Release store of the stamp in `SeqLock::write`.
                w.store(v, Ordering::Relaxed);
            }
        });
    }

    /// The writer's view of its own status: no seqlock needed, since only
    /// the writer stores to it (a stamp a forger left odd cannot hold it
    /// up, as a seqlock read would spin on it for ever). Must only be
    /// called by the writer thread.
    #[inline]
    pub fn load_own(&self) -> FeedStatus {
        // Relaxed: the writer reads back its own stores.
        FeedStatus::from_words(
            self.flags.load(Ordering::Relaxed),
            self.last_alive.load(Ordering::Relaxed),
            self.source_watermark.load(Ordering::Relaxed),
        )
    }

    /// One attempt at a consistent copy; `None` if a write overlapped.
    #[inline]
    pub fn try_read(&self) -> Option<FeedStatus> {
        let ([flags, last_alive, source_watermark], _) = self.stamp.try_read(|| {
            // Relaxed: ordered by the seqlock's stamp and fences.
            [
                self.flags.load(Ordering::Relaxed),
                self.last_alive.load(Ordering::Relaxed),
                self.source_watermark.load(Ordering::Relaxed),
            ]
        })?;
        Some(FeedStatus::from_words(flags, last_alive, source_watermark))
    }
}

/// The verdict for what a check read of a slot ([`Facts`]: of a
/// [`Record`](crate::slot::Record), its `facts()`), whatever the protocol (the same in
/// process, in the Rust `Reader` and in `tickguard.h`): liveness and source
/// time are the later of the symbol's and the feed's, suspect either's,
/// closed either's, halted and invalid the symbol's; `no_quote` (alone)
/// when the book has neither side. `offset` is the feed's clock offset
/// (local − provider), ns; `now` local ns since the Unix epoch. The
/// reasons are [`crate::verdict::reasons`] of these inputs.
#[inline]
pub fn verdict(f: &Facts, feed: &FeedStatus, offset: i128, now: u64) -> Reasons {
    let source = f.source_time.unwrap_or(0).max(feed.source_watermark);
    let inputs = Inputs {
        quoted: f.quoted,
        alive: Some(f.last_alive.max(feed.last_alive) as i128),
        source: Some(source as i128),
        offset,
        suspect: f.suspect || feed.suspect,
        invalid: f.invalid,
        halted: f.halted,
        closed: feed.closed || f.closed,
    };
    reasons(&inputs, f.thresholds, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Before the slots of a change: its restrictions, none of its
    /// releases, and the times before it.
    #[test]
    fn a_status_tightened_by_the_next_takes_its_restrictions_only() {
        let old = FeedStatus {
            suspect: false,
            closed: true,
            joined: false,
            orders_refused: false,
            last_alive: 10,
            source_watermark: 20,
        };
        let next = FeedStatus {
            suspect: true,
            closed: false,
            joined: true,
            orders_refused: true,
            last_alive: 30,
            source_watermark: 40,
        };
        assert_eq!(
            old.tightened_by(&next),
            FeedStatus {
                suspect: true,
                closed: true,
                joined: false,
                orders_refused: true,
                last_alive: 10,
                source_watermark: 20,
            }
        );
        // Nothing restricted: the old status as it was.
        assert_eq!(
            next.tightened_by(&old),
            FeedStatus {
                closed: true,
                ..next
            }
        );
        assert_eq!(old.tightened_by(&old), old);
    }
}
