//! An ITCH feed's verdict state written into the state table (and so into
//! the shared-memory publication readers check): each symbol's top of book
//! and trading state in its slot, the feed's liveness, source watermark,
//! `suspect` and `closed` in the feed's status.
//!
//! Written once per receive cycle and before each check, for the symbols
//! the cycle's messages changed only (the feed lists them, each once), so
//! the cost follows the traffic, not the number of symbols. No allocation
//! after a symbol's first appearance.

use super::book::Top;
use super::feed::{Feed, Hours, TOUCHED_AHEAD};
use crate::state::slot::{Level, Top as SlotTop};
use crate::state::{FeedStatus, SlotId, StateTable};
use crate::symbol::Symbol;
use crate::verdict::Thresholds;

/// Prices are integers in 1/10,000 (spec itch50 §2).
pub const PRICE_EXPONENT: i8 = -4;

/// No slot looked up yet for the symbol in this session.
const NO_SLOT: SlotId = SlotId::MAX;
/// The table (or the feed's share of it) was full when the symbol was
/// looked up this session: not looked up again until the session changes
/// (a full table stays full: slots are never freed).
const REFUSED: SlotId = SlotId::MAX - 1;

/// Most refused symbols remembered across sessions (a session's locate
/// codes); past that, a symbol refused in a later session again counts
/// again.
const MAX_REMEMBERED: usize = 1 << 16;

/// What one ITCH feed has written into the table.
#[derive(Debug)]
pub struct Publisher {
    /// Most slots the feed takes in the table over the run (its
    /// `max_symbols`, which the configuration leaves it): slots are never
    /// freed, so without this a new session's symbols, forged ones
    /// included, would take `max_symbols` more each time, until the table
    /// shared by every feed was full.
    share: usize,
    /// Slots the feed has taken.
    placed: usize,
    /// Slot by the feed's symbol index in the current session: the
    /// slots written since the last session change (those of earlier
    /// sessions were emptied when theirs ended).
    slots: Vec<SlotId>,
    /// The session-change count seen at the last publish.
    sessions: u64,
    /// The snapshot-merge count seen at the last publish.
    snapshots: u64,
    /// The status last written.
    status: Option<FeedStatus>,
    /// Symbols refused a slot because the table, or the feed's share of
    /// it, was full, each counted once however many messages it gets
    /// (remembered across sessions, up to 65,536 symbols).
    pub table_full: u64,
    /// The symbols counted in `table_full` (made on the first refusal).
    refused: std::collections::HashSet<Symbol>,
    /// The feed status in the table as each slot was written (tests: what
    /// a reader pairing that slot with its feed could see).
    #[cfg(test)]
    seen_with: Vec<FeedStatus>,
}

impl Publisher {
    /// Nothing written yet; the feed takes at most `share` slots.
    pub fn new(share: usize) -> Publisher {
        Publisher {
            share,
            placed: 0,
            slots: Vec::new(),
            sessions: 0,
            snapshots: 0,
            status: None,
            table_full: 0,
            refused: std::collections::HashSet::new(),
            #[cfg(test)]
            seen_with: Vec::new(),
        }
    }

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
        let snapshots = it.sequencer().counters().snapshots;
        if sessions != self.sessions || snapshots != self.snapshots {
            // A new session dropped every book, a merged snapshot replaced
            // them and numbered the symbols anew: what was published is
            // void. Only this session's slots hold anything (a session
            // change costs what the session published, not every slot
            // ever); after a merge the symbols it kept are touched and
            // written again, looked up by stock, and one it dropped (the
            // spin lacked it and `max_symbols` left no room) stays empty
            // instead of showing its last book for good.
            self.sessions = sessions;
            self.snapshots = snapshots;
            let empty = SlotTop::default();
            for &id in self.slots.iter().filter(|&&id| id < REFUSED) {
                table.slots()[id as usize].write_top(&empty);
            }
            self.slots.clear();
        }
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
        // What the change restricts, before its slots (see
        // `FeedStatus::tightened_by`); the rest after them.
        if let Some(old) = self.status {
            let first = old.tightened_by(&status);
            if first != old {
                table.set_feed_status(feed, &first);
                self.status = Some(first);
            }
        }
        let Publisher {
            share,
            placed,
            slots,
            table_full,
            refused,
            #[cfg(test)]
            seen_with,
            ..
        } = self;
        // A cycle touches hundreds of symbols whose slots are rarely in
        // cache: each is loaded a few symbols before its turn.
        let prefetch = |table: &StateTable, slots: &[SlotId], i: u32| {
            if let Some(&id) = slots.get(i as usize).filter(|&&id| id < REFUSED) {
                table.slots()[id as usize].prefetch();
            }
        };
        for &i in it.touched().iter().take(TOUCHED_AHEAD) {
            prefetch(table, slots, i);
        }
        it.drain_touched(|i, s, top, last_seq, ahead| {
            if let Some(a) = ahead {
                prefetch(table, slots, a);
            }
            let i = i as usize;
            if i >= slots.len() {
                slots.resize(i + 1, NO_SLOT);
            }
            if slots[i] == NO_SLOT {
                slots[i] = match table.find(feed, s.stock) {
                    Some(id) => id,
                    None if *placed >= *share => refuse(refused, table_full, s.stock),
                    None => match table.insert(feed, s.stock, thresholds(s.stock)) {
                        Some(id) => {
                            *placed += 1;
                            id
                        }
                        None => refuse(refused, table_full, s.stock),
                    },
                };
            }
            if slots[i] == REFUSED {
                return;
            }
            #[cfg(test)]
            seen_with.push(table.feed_status(feed));
            table.slots()[slots[i] as usize].write_top(&slot_top(&top, s.halted(), last_seq));
        });
        if self.status != Some(status) {
            table.set_feed_status(feed, &status);
            self.status = Some(status);
        }
    }
}

/// `stock` found the table full: counted the first time (see
/// [`Publisher::table_full`]). Returns [`REFUSED`].
#[cold]
fn refuse(
    refused: &mut std::collections::HashSet<Symbol>,
    count: &mut u64,
    stock: Symbol,
) -> SlotId {
    if !refused.contains(&stock) {
        *count += 1;
        if refused.len() < MAX_REMEMBERED {
            refused.insert(stock);
        }
    }
    REFUSED
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
        // Suspect and closed are the feed's (its status).
        suspect: false,
        closed: false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::feed::Settings;
    use super::super::message::encode;
    use super::super::mold::{PacketBuilder, Session};
    use super::super::{sequencer, Side};
    use super::*;
    use crate::clock::OffsetMode;

    const MS: u64 = 1_000_000;
    /// 2026-01-05 14:30:00 UTC = 09:30 in New York.
    const T0: u64 = 1_767_623_400_000_000_000;
    /// 09:30 as ns since midnight.
    const OPEN: u64 = 34_200_000_000_000;

    fn feed() -> Feed {
        let mut f = Feed::new(Settings {
            sequencing: sequencer::Settings {
                gap_timeout_ns: 5 * MS,
                max_held: 1000,
                join_gap_max: 10_000,
            },
            timezone: jiff::tz::db().get("America/New_York").unwrap(),
            offset: OffsetMode::Fixed(0),
            offset_queue: 16,
            orders: 16,
            max_orders: 1 << 20,
            max_symbols: 1 << 16,
        });
        // A live feed lists what its messages change.
        f.track_touched(true);
        f
    }

    fn sym(s: &str) -> Symbol {
        Symbol::parse(s).unwrap()
    }

    fn th(_: Symbol) -> Thresholds {
        Thresholds {
            stale_ns: 1_500 * MS,
            source_ns: 2_000 * MS,
        }
    }

    fn packet(session: &[u8; 10], first: u64, messages: &[Vec<u8>]) -> Vec<u8> {
        let mut b = PacketBuilder::new(Session(*session), first);
        for m in messages {
            b.message(m);
        }
        b.finish()
    }

    /// One datagram applied and published.
    fn step(f: &mut Feed, p: &mut Publisher, table: &mut StateTable, datagram: &[u8], t: u64) {
        f.on_datagram(datagram, t).unwrap();
        p.publish(0, f, table, th);
    }

    /// A new session joined mid-session (suspect) is published suspect
    /// before its books: no reader pairs a joined book with the healthy
    /// session's status before it (itch50 §3.1: a joined stream is
    /// `suspect`), which would read `ok`.
    #[test]
    fn a_joined_sessions_books_are_written_under_its_suspect_status() {
        let mut f = feed();
        let mut p = Publisher::new(1 << 16);
        let mut table = StateTable::with_feeds(8, 1);
        let aapl = sym("AAPL");
        let book = |locate| {
            [
                encode::stock_directory(locate, OPEN, aapl),
                encode::add_order(locate, OPEN, 1, Side::Buy, 100, aapl, 1_900_000, None),
                encode::add_order(locate, OPEN, 2, Side::Sell, 100, aapl, 1_901_000, None),
            ]
        };
        let healthy = packet(b"20260105XA", 1, &book(1));
        step(&mut f, &mut p, &mut table, &healthy, T0);
        assert!(!table.feed_status(0).suspect);
        p.seen_with.clear();
        // The next session, joined far past its start.
        let joined = packet(b"20260105XB", 50_000, &book(2));
        step(&mut f, &mut p, &mut table, &joined, T0 + MS);
        assert!(f.sequencer().joined() && f.suspect());
        assert!(!p.seen_with.is_empty());
        assert!(p.seen_with.iter().all(|s| s.suspect), "{:?}", p.seen_with);
    }

    /// `table_full` counts the symbols that found the table full, each
    /// once, however many messages they get, in this session or the next.
    #[test]
    fn table_full_counts_each_symbol_refused_once() {
        let mut f = feed();
        let mut p = Publisher::new(1 << 16);
        let mut table = StateTable::with_feeds(2, 1);
        let stocks = ["AAPL", "MSFT", "NVDA", "TSLA"].map(sym);
        let directory: Vec<Vec<u8>> = (1..)
            .zip(stocks)
            .map(|(locate, s)| encode::stock_directory(locate, OPEN, s))
            .collect();
        step(
            &mut f,
            &mut p,
            &mut table,
            &packet(b"20260105XA", 1, &directory),
            T0,
        );
        assert_eq!((table.len(), p.table_full), (2, 2), "two of four placed");
        // Many updates to the unplaced symbols, one datagram each.
        for i in 0..50u64 {
            let add = encode::add_order(
                3 + (i % 2) as u16,
                OPEN,
                i + 1,
                Side::Buy,
                100,
                stocks[2 + (i % 2) as usize],
                1_000_000,
                None,
            );
            step(
                &mut f,
                &mut p,
                &mut table,
                &packet(b"20260105XA", 5 + i, &[add]),
                T0 + i,
            );
        }
        assert_eq!(p.table_full, 2, "each refused symbol counts once");
        // A new session: the same symbols are refused again, not counted
        // again; a new one is.
        let mut again = directory.clone();
        again.push(encode::stock_directory(5, OPEN, sym("QQQ")));
        step(
            &mut f,
            &mut p,
            &mut table,
            &packet(b"20260105XB", 1, &again),
            T0 + MS,
        );
        assert_eq!(p.table_full, 3);
        for i in 0..10u64 {
            let add =
                encode::add_order(3, OPEN, i + 1, Side::Sell, 100, stocks[2], 1_000_000, None);
            step(
                &mut f,
                &mut p,
                &mut table,
                &packet(b"20260105XB", 6 + i, &[add]),
                T0 + MS + i,
            );
        }
        assert_eq!(p.table_full, 3);
    }

    /// A slot's `last_seq` is the stream sequence of the last message that
    /// named or changed its symbol, not the stream's position.
    #[test]
    fn each_symbol_publishes_its_own_last_message() {
        let mut f = feed();
        let mut p = Publisher::new(1 << 16);
        let mut table = StateTable::with_feeds(4, 1);
        let [aapl, msft] = ["AAPL", "MSFT"].map(sym);
        let s = b"20260105XA";
        let first = [
            encode::stock_directory(1, OPEN, aapl), // 1
            encode::stock_directory(2, OPEN, msft), // 2
            encode::add_order(1, OPEN, 1, Side::Buy, 100, aapl, 1_000_000, None), // 3
            encode::add_order(2, OPEN, 2, Side::Buy, 100, msft, 2_000_000, None), // 4
            encode::add_order(1, OPEN, 3, Side::Sell, 100, aapl, 1_000_100, None), // 5
        ];
        step(&mut f, &mut p, &mut table, &packet(s, 1, &first), T0);
        let last = |table: &StateTable, stock| {
            let id = table.find(0, stock).unwrap();
            table.record(id).state.seq.last_seq
        };
        assert_eq!((last(&table, aapl), last(&table, msft)), (5, 4));
        // MSFT's order executed (6), then a trade naming AAPL (7), then a
        // system event naming neither (8).
        let second = [
            encode::executed(2, OPEN, 2, 10, 1),
            encode::trade(1, OPEN, 9, Side::Buy, 5, aapl, 1_000_050, 4),
            encode::system_event(OPEN, b'Q'),
        ];
        step(&mut f, &mut p, &mut table, &packet(s, 6, &second), T0 + 1);
        assert_eq!((last(&table, aapl), last(&table, msft)), (7, 6));
    }
}
