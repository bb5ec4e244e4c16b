//! An MDP3 channel's instruments written into the state table (and so
//! into the shared-memory publication readers check): each instrument's
//! visible outright top as decimal mantissas (exponent −9), suspect (or
//! unverified), halted and closed in its own slot; the channel's liveness
//! and source watermark in the feed's status.
//!
//! Written once per receive cycle and before each check, for the
//! instruments the channel lists as touched ([`Feed::drain_touched`]), so
//! the cost follows the traffic. An instrument takes a slot when its book
//! first has a side (before that its answer is `no_quote` with or without
//! one: a definitions file naming thousands of instruments does not fill
//! the table), keyed by its SecurityID ([`key`]) and published under
//! `#SecurityID`, then under its Symbol once a definition maps it.
//!
//! The publisher also counts the instruments that need the snapshot loop
//! (suspect or unverified), and how many turned needy or healed, for the
//! on-demand joining of the snapshot lines.

use super::feed::{Entry, Feed};
use super::status::State;
use crate::state::slot::{Level, Top};
use crate::state::{FeedStatus, SlotId, StateTable};
use crate::symbol::Symbol;
use crate::verdict::Thresholds;

/// MDP3 prices are mantissas of 10⁻⁹.
pub const PRICE_EXPONENT: i8 = -9;

/// No slot yet.
const NO_SLOT: SlotId = SlotId::MAX;
/// Refused a slot: the table was full (slots are never freed).
const REFUSED: SlotId = SlotId::MAX - 1;

/// The slot key of SecurityID `id`: `#` and the id's 32 bits in seven
/// characters of 6 bits each (`0` + value, so `0`..`o`), printable and
/// unique per id. Readers never see it as a name: they look instruments
/// up by `#SecurityID` and Symbol.
pub fn key(id: i32) -> Symbol {
    let v = id as u32 as u64;
    let mut bytes = [b'#'; 8];
    for (k, b) in bytes[1..].iter_mut().enumerate() {
        *b = b'0' + ((v >> (6 * (6 - k))) & 0x3f) as u8;
    }
    Symbol::from_checked(bytes)
}

/// `#` and the decimal id, as a check names an instrument.
fn id_name(id: i32, buf: &mut [u8; 12]) -> &str {
    use std::io::Write;
    let mut w = &mut buf[..];
    // "#" and an i32 fit 12 bytes.
    let _ = write!(w, "#{id}");
    let n = 12 - w.len();
    std::str::from_utf8(&buf[..n]).unwrap_or("#")
}

/// What the publisher keeps per instrument.
#[derive(Debug, Clone)]
struct Published {
    slot: SlotId,
    /// Suspect or unverified, as last seen.
    needy: bool,
    /// The Symbol the slot was last published under (empty: none yet).
    symbol: String,
}

impl Default for Published {
    fn default() -> Published {
        Published {
            slot: NO_SLOT,
            needy: false,
            symbol: String::new(),
        }
    }
}

/// What one MDP3 feed has written into the table.
#[derive(Debug, Default)]
pub struct Publisher {
    /// By instrument index (the channel's order of first appearance).
    published: Vec<Published>,
    /// The status last written.
    status: Option<FeedStatus>,
    /// Instruments suspect or unverified now.
    needy: usize,
    /// Instruments that turned suspect or unverified (from healthy, or
    /// new), and that turned healthy, so far.
    turned_needy: u64,
    healed: u64,
    /// Instruments refused a slot for want of room, each once.
    pub table_full: u64,
}

impl Publisher {
    /// Instruments suspect or unverified now (as of the last publish).
    pub fn needy(&self) -> usize {
        self.needy
    }

    /// Instruments that turned suspect or unverified so far.
    pub fn turned_needy(&self) -> u64 {
        self.turned_needy
    }

    /// Instruments that turned healthy so far.
    pub fn healed(&self) -> u64 {
        self.healed
    }

    /// Writes what changed in `it` since the last call into `table` as
    /// feed `feed`: the touched instruments, then the feed's status if it
    /// changed. `thresholds` gives an instrument's limits by name.
    pub fn publish(
        &mut self,
        feed: u16,
        it: &mut Feed,
        table: &mut StateTable,
        thresholds: impl Fn(&Feed, &str) -> Thresholds,
    ) {
        let Publisher {
            published,
            needy,
            turned_needy,
            healed,
            table_full,
            ..
        } = self;
        it.drain_touched(|f, i, e| {
            let i = i as usize;
            if i >= published.len() {
                published.resize(i + 1, Published::default());
            }
            let p = &mut published[i];
            let now_needy = e.instrument.seq.suspect() || e.instrument.seq.unverified();
            if now_needy != p.needy {
                p.needy = now_needy;
                if now_needy {
                    *needy += 1;
                    *turned_needy += 1;
                } else {
                    *needy -= 1;
                    *healed += 1;
                }
            }
            let top = slot_top(f, e);
            if p.slot == NO_SLOT {
                if top.bid.is_none() && top.ask.is_none() {
                    return;
                }
                let mut buf = [0u8; 12];
                let name = id_name(e.security_id, &mut buf);
                p.slot = match table.insert_named(
                    feed,
                    key(e.security_id),
                    name.as_bytes(),
                    thresholds(f, name),
                ) {
                    Some(id) => id,
                    None => {
                        *table_full += 1;
                        REFUSED
                    }
                };
            }
            if p.slot == REFUSED {
                return;
            }
            name_symbol(f, e, p, feed, table, &thresholds);
            table.slots()[p.slot as usize].write_top(&top);
        });
        let status = FeedStatus {
            last_alive: it.last_alive().unwrap_or(0),
            source_watermark: it
                .source_watermark()
                .map_or(0, |w| w.clamp(0, u64::MAX as i128) as u64),
            ..FeedStatus::default()
        };
        if self.status != Some(status) {
            table.set_feed_status(feed, &status);
            self.status = Some(status);
        }
    }
}

/// Publishes `e`'s slot under its Symbol too, once a definition maps the
/// Symbol to it (again when the mapping moves to it from another), with
/// the thresholds an override of either name gives.
fn name_symbol(
    f: &Feed,
    e: &Entry,
    p: &mut Published,
    feed: u16,
    table: &mut StateTable,
    thresholds: &impl Fn(&Feed, &str) -> Thresholds,
) {
    let Some(d) = &e.definition else {
        return;
    };
    if d.symbol.is_empty() || d.symbol == p.symbol {
        return;
    }
    // A Symbol another instrument holds stays that one's.
    if f.find(&d.symbol).map(|x| x.security_id) != Some(e.security_id) {
        return;
    }
    if table.alias(feed, key(e.security_id), d.symbol.as_bytes(), p.slot) {
        // Allocates once per Symbol an instrument is given (a cold path).
        p.symbol.clone_from(&d.symbol);
        table.set_thresholds(p.slot, thresholds(f, &d.symbol));
    }
}

/// `e` as its slot shows it (spec mdp3 §4): the visible outright level 1
/// (locked allowed, crossed invalid), suspect or unverified, the status
/// in force, its RptSeq as its last sequence. Source time stays the
/// channel's watermark.
fn slot_top(f: &Feed, e: &Entry) -> Top {
    let book = &e.instrument.visible().outright;
    let level = |l: Option<super::book::Level>| {
        l.map(|l| Level {
            price: l.price,
            size: l.size,
        })
    };
    let (bid, ask) = (level(book.bid.top()), level(book.offer.top()));
    let state = f.state(e);
    Top {
        invalid: matches!((bid, ask), (Some(b), Some(a)) if b.price > a.price),
        bid,
        ask,
        exponent: PRICE_EXPONENT,
        halted: state == Some(State::Halted),
        closed: state == Some(State::Closed),
        suspect: e.instrument.seq.suspect() || e.instrument.seq.unverified(),
        last_seq: e.instrument.seq.rpt_seq().map_or(0, u64::from),
        source_time: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_symbols_unique_per_id() {
        let ids = [0, 1, -1, 63, 64, i32::MAX, i32::MIN, 123_456];
        let keys: std::collections::BTreeSet<u64> = ids.iter().map(|&i| key(i).key()).collect();
        assert_eq!(keys.len(), ids.len());
        for &i in &ids {
            assert_eq!(Symbol::from_key(key(i).key()), Some(key(i)));
        }
        let mut buf = [0u8; 12];
        assert_eq!(id_name(i32::MIN, &mut buf), "#-2147483648");
    }
}
