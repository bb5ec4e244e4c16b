//! An ITCH feed's verdict state written into the state table (and so into
//! the shared-memory publication readers check): each symbol's top of book
//! and trading state in its slot, the feed's liveness, source watermark,
//! `suspect` and `closed` in the feed's status.
//!
//! Written after every datagram and every expiry, for the symbols the
//! messages changed only (the feed lists them), so the cost follows the
//! traffic, not the number of symbols. No allocation after a symbol's
//! first appearance.

use super::book::Top;
use super::feed::{Feed, Hours};
use crate::state::slot::{Level, Top as SlotTop};
use crate::state::{FeedStatus, SlotId, StateTable};
use crate::symbol::Symbol;
use crate::verdict::Thresholds;

/// Prices are integers in 1/10,000 (spec itch50 §2).
pub const PRICE_EXPONENT: i8 = -4;

/// No slot (the table was full when the symbol first appeared).
const NO_SLOT: SlotId = SlotId::MAX;

/// What one ITCH feed has written into the table.
#[derive(Debug, Default)]
pub struct Publisher {
    /// Slot by the feed's symbol index in the current session.
    slots: Vec<SlotId>,
    /// Every slot this feed ever wrote (slots outlive sessions).
    written: Vec<SlotId>,
    /// The session-change count seen at the last publish.
    sessions: u64,
    /// The status last written.
    status: Option<FeedStatus>,
    /// Symbols that found the table full.
    pub table_full: u64,
}

impl Publisher {
    /// Writes what changed in `it` since the last call into `table` as feed
    /// `feed`: symbols the messages touched, then the feed's status if it
    /// changed. `thresholds` gives a new symbol's limits.
    pub fn publish(
        &mut self,
        feed: u16,
        it: &mut Feed,
        table: &mut StateTable,
        thresholds: impl Fn(Symbol) -> Thresholds,
    ) {
        let sessions = it.sequencer().counters().session_changes;
        if sessions != self.sessions {
            // A new session dropped every book: what was published is void.
            self.sessions = sessions;
            self.slots.clear();
            let empty = SlotTop::default();
            for &id in &self.written {
                table.slots()[id as usize].write_top(&empty);
            }
        }
        let last_seq = it.sequencer().next().map_or(0, |n| n.saturating_sub(1));
        let Publisher {
            slots,
            written,
            table_full,
            ..
        } = self;
        // A datagram touches a score of symbols whose slots are rarely in
        // cache: load them together before writing any.
        for &i in it.touched() {
            if let Some(&id) = slots.get(i as usize).filter(|&&id| id != NO_SLOT) {
                table.slots()[id as usize].prefetch();
            }
        }
        it.drain_touched(|i, s, top| {
            let i = i as usize;
            if i >= slots.len() {
                slots.resize(i + 1, NO_SLOT);
            }
            if slots[i] == NO_SLOT {
                let id = match table.find(feed, s.stock) {
                    Some(id) => id,
                    None => match table.insert(feed, s.stock, thresholds(s.stock)) {
                        Some(id) => {
                            written.push(id);
                            id
                        }
                        None => {
                            *table_full += 1;
                            return;
                        }
                    },
                };
                slots[i] = id;
            }
            table.slots()[slots[i] as usize].write_top(&slot_top(&top, s.halted(), last_seq));
        });
        let status = FeedStatus {
            suspect: it.suspect(),
            closed: it.hours() == Hours::Closed,
            joined: it.sequencer().joined(),
            orders_refused: it.orders_refused(),
            last_alive: it.last_alive().unwrap_or(0),
            source_watermark: it
                .source_watermark()
                .map_or(0, |w| w.clamp(0, u64::MAX as i128) as u64),
        };
        if self.status != Some(status) {
            table.set_feed_status(feed, &status);
            self.status = Some(status);
        }
    }
}

/// A book's top as a slot holds it.
fn slot_top(top: &Top, halted: bool, last_seq: u64) -> SlotTop {
    let level = |l: Option<(u32, u64)>| {
        l.map(|(price, size)| Level {
            price: price as i64,
            size,
        })
    };
    let bid = level(top.bid);
    let ask = level(top.ask);
    SlotTop {
        invalid: matches!((bid, ask), (Some(b), Some(a)) if b.price > a.price),
        bid,
        ask,
        exponent: PRICE_EXPONENT,
        halted,
        last_seq,
        source_time: 0,
    }
}
