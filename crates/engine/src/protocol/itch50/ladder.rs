//! Every book's price levels, apart from the orders behind them: the half
//! of the books that [`Change`]s feed, here on the feed's thread or on a
//! level thread of its own ([`super::levels`]). The order store
//! ([`super::book`]) makes the changes; nothing here knows of orders.
//!
//! Each book keeps, per side, its [`NEAR`] best price levels in a vector
//! sorted with the best last; worse ones wait in an ordered map of their own
//! (see [`super::book`] for the costs).

use super::message::Side;
use crate::sys::memory::prefetch;
use std::collections::BTreeMap;

/// A price in 1/10,000 dollar (ITCH `Price(4)`).
pub type Price = u32;

/// One price level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Level {
    price: Price,
    orders: u32,
    shares: u64,
}

/// Levels a side keeps in its sorted vector (16 bytes each); worse ones
/// wait in its far map.
pub const NEAR: usize = 1024;

/// Room a side's vector keeps however few its levels ([`give_back`]), in
/// levels: a kilobyte.
const KEPT: usize = 64;

/// Room every book's near vectors may hold in all, in levels (64 MiB),
/// before sides give room back ([`give_back`]): far more than a venue's
/// books take (a normal flow never reaches it, and allocates nothing
/// after warm-up), and a bound on what books made deep one after the
/// other keep once emptied.
const ROOM_BUDGET: usize = 4 << 20;

/// With every book's room over [`ROOM_BUDGET`], gives back half of a
/// side's room once its levels fill less than a quarter of it (above
/// [`KEPT`]): the room kept past the budget is at most four times what the
/// live levels need, bounded by the live orders (each level holds one)
/// rather than by the most each side ever held. Amortised: a side loses
/// three quarters of its room's levels between two shrinks. Returns the
/// room given back, in levels.
#[inline]
fn give_back(levels: &mut Vec<Level>, over_budget: bool) -> usize {
    let room = levels.capacity();
    if over_budget && room > KEPT && levels.len() < room / 4 {
        levels.shrink_to(room / 2);
        return room - levels.capacity();
    }
    0
}

/// Levels worse than a side's [`NEAR`] best, by price: bids, asks.
type Far = [BTreeMap<Price, Level>; 2];

/// One symbol's book: one cache line (a prefetch of its entry brings all
/// of it).
#[derive(Debug, Clone, Default)]
#[repr(align(64))]
struct Book {
    /// Ascending: the best (highest) bid last. At most the near limit;
    /// while `far` holds bids, exactly that many, each better than those.
    bids: Vec<Level>,
    /// Descending: the best (lowest) ask last; likewise.
    asks: Vec<Level>,
    orders: u64,
    /// The levels beyond the near ones, made on the first.
    far: Option<Box<Far>>,
}

impl Book {
    /// A side's near levels and its far ones (`None`: none yet).
    #[inline]
    fn side(&mut self, side: Side) -> (&mut Vec<Level>, Option<&mut BTreeMap<Price, Level>>) {
        let far = self.far.as_deref_mut();
        match side {
            Side::Buy => (&mut self.bids, far.map(|f| &mut f[0])),
            Side::Sell => (&mut self.asks, far.map(|f| &mut f[1])),
        }
    }

    /// The far map of `side`, made if need be.
    fn far(&mut self, side: Side) -> &mut BTreeMap<Price, Level> {
        let far = self.far.get_or_insert_with(Box::default);
        &mut far[usize::from(side == Side::Sell)]
    }
}

/// The best of a side's far levels, taken out: the highest bid, the lowest
/// ask.
fn pop_best(far: &mut BTreeMap<Price, Level>, side: Side) -> Option<Level> {
    match side {
        Side::Buy => far.pop_last(),
        Side::Sell => far.pop_first(),
    }
    .map(|(_, l)| l)
}

/// Levels [`position`] walks from the top before it searches the rest.
const WALK: usize = 8;

/// Where a price sits in a side sorted best-last: its index, found or not
/// (the index it would be inserted at). The search walks the [`WALK`] best
/// levels first: most orders rest at or near the top, so it usually stops
/// within the level's own cache line, where a binary search would chain a
/// load per halving through the side. Deeper than that (a side of many
/// levels, flow far from the top) it is a binary search over the rest, so
/// no side costs more than `WALK` plus a logarithm.
#[inline]
fn position(levels: &[Level], side: Side, price: Price) -> Result<usize, usize> {
    // Levels better than `price` lie above it: a bid is better when higher,
    // an ask when lower.
    let better = |p: Price| match side {
        Side::Buy => p > price,
        Side::Sell => p < price,
    };
    let mut i = levels.len();
    let stop = i.saturating_sub(WALK);
    while i > stop {
        let p = levels[i - 1].price;
        if p == price {
            return Ok(i - 1);
        }
        if !better(p) {
            return Err(i);
        }
        i -= 1;
    }
    // Every level from `i` up is better; the rest is sorted worst-first.
    let rest = &levels[..i];
    let at = rest.partition_point(|l| !better(l.price) && l.price != price);
    match rest.get(at) {
        Some(l) if l.price == price => Ok(at),
        _ => Err(at),
    }
}

/// One side's price levels, best first: (price, shares, orders).
pub type Depth = Vec<(Price, u64, u32)>;

/// The best price and the shares resting at it, per side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Top {
    /// Highest buy price and its total shares.
    pub bid: Option<(Price, u64)>,
    /// Lowest sell price and its total shares.
    pub ask: Option<(Price, u64)>,
}

/// What a [`Change`] does to its level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An order rests: its shares join its price's level (made if new).
    Rest,
    /// Shares leave an order that stays live.
    Take,
    /// An order leaves with its last shares: its level loses an order
    /// (and goes when that was its last).
    Remove,
    /// A new session: every book empties.
    Clear,
}

/// One change the order store makes to the levels: 16 bytes, so that a
/// batch of them moves between threads in few lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// The book (symbol).
    pub book: u32,
    /// The level's price.
    pub price: Price,
    /// Shares resting (`Rest`) or leaving (`Take`, `Remove`).
    pub shares: u32,
    /// The side.
    pub side: Side,
    /// What it does.
    pub kind: Kind,
}

/// A run of changes ([`Levels::apply_all`]) loads each change's book entry
/// this many changes ahead…
const ENTRY_AHEAD: usize = 16;
/// …and its best levels this many.
const TOP_AHEAD: usize = 8;

/// Every book's price levels, apart from the orders behind them.
#[derive(Debug)]
pub struct Levels {
    books: Vec<Book>,
    /// One past the highest book changed since the last clear: a clear
    /// (a new session) empties no more than these, whatever the books of
    /// earlier sessions.
    used: usize,
    /// Levels a side keeps near ([`NEAR`]; smaller in tests).
    near: usize,
    /// Room every book's near vectors hold, in levels.
    room: usize,
    /// Room past which sides give some back ([`ROOM_BUDGET`]; smaller in
    /// tests).
    budget: usize,
}

impl Default for Levels {
    fn default() -> Levels {
        Levels {
            books: Vec::new(),
            used: 0,
            near: NEAR,
            room: 0,
            budget: ROOM_BUDGET,
        }
    }
}

impl Levels {
    /// Room for `books` books before anything grows.
    pub(super) fn with_books(books: usize) -> Levels {
        Levels {
            books: vec![Book::default(); books],
            used: 0,
            near: NEAR,
            room: 0,
            budget: ROOM_BUDGET,
        }
    }

    fn book(&mut self, book: u32) -> &mut Book {
        let i = book as usize;
        if i >= self.books.len() {
            self.books.resize_with(i + 1, Book::default);
        }
        self.used = self.used.max(i + 1);
        &mut self.books[i]
    }

    /// Applies one change.
    #[inline(always)]
    pub fn apply(&mut self, c: Change) {
        match c.kind {
            Kind::Rest => self.rest(c),
            Kind::Take => self.unrest(c, false),
            Kind::Remove => self.unrest(c, true),
            Kind::Clear => self.clear(),
        }
    }

    /// Applies a run of changes in order, each book's entry and best
    /// levels loaded a few changes ahead (as a batch of messages does).
    pub fn apply_all(&mut self, changes: &[Change]) {
        for (k, &c) in changes.iter().enumerate() {
            if let Some(a) = changes.get(k + ENTRY_AHEAD) {
                self.prefetch_entry(a.book);
            }
            if let Some(a) = changes.get(k + TOP_AHEAD) {
                self.prefetch_top(a.book);
            }
            self.apply(c);
        }
    }

    fn rest(&mut self, c: Change) {
        let near = self.near;
        let mut grown = 0;
        let book = self.book(c.book);
        book.orders += 1;
        let (levels, _) = book.side(c.side);
        let new = Level {
            price: c.price,
            orders: 1,
            shares: c.shares as u64,
        };
        match position(levels, c.side, c.price) {
            Ok(i) => {
                levels[i].orders += 1;
                levels[i].shares += c.shares as u64;
            }
            // Worse than every near level of a full side: a far one.
            Err(0) if levels.len() >= near => {
                let l = book.far(c.side).entry(c.price).or_insert(Level {
                    orders: 0,
                    shares: 0,
                    ..new
                });
                l.orders += 1;
                l.shares += c.shares as u64;
            }
            Err(i) => {
                // A full side's worst near level goes far first (`i` ≥ 1:
                // the new one is better): the vector never holds, nor has
                // room for, more than the near levels.
                let worst = (levels.len() >= near).then(|| levels.remove(0));
                let room = levels.capacity();
                levels.insert(i - usize::from(worst.is_some()), new);
                grown = levels.capacity() - room;
                if let Some(worst) = worst {
                    book.far(c.side).insert(worst.price, worst);
                }
            }
        }
        self.room += grown;
    }

    /// Takes the change's shares off its level; drops an order from it
    /// when `gone`.
    fn unrest(&mut self, c: Change, gone: bool) {
        let over_budget = self.room > self.budget;
        let mut freed = 0;
        let book = self.book(c.book);
        if gone {
            book.orders -= 1;
        }
        let (levels, far) = book.side(c.side);
        let take = |l: &mut Level| {
            l.shares -= c.shares as u64;
            l.orders -= gone as u32;
            l.orders == 0
        };
        match position(levels, c.side, c.price) {
            Ok(i) => {
                if take(&mut levels[i]) {
                    levels.remove(i);
                    // The best far level, if any, is now a near one: the
                    // worst of them, at the front.
                    if let Some(up) = far.and_then(|f| pop_best(f, c.side)) {
                        levels.insert(0, up);
                    }
                    freed = give_back(levels, over_budget);
                }
            }
            Err(_) => {
                if let Some(far) = far {
                    if far.get_mut(&c.price).is_some_and(take) {
                        far.remove(&c.price);
                    }
                }
            }
        }
        self.room -= freed;
    }

    /// Empties every book, keeping the memory (over the room budget, each
    /// side keeps [`KEPT`] levels' room: forged sessions making books deep
    /// in turn leave no more).
    fn clear(&mut self) {
        let used = std::mem::take(&mut self.used);
        let over_budget = self.room > self.budget;
        let room = &mut self.room;
        for b in &mut self.books[..used] {
            b.bids.clear();
            b.asks.clear();
            for side in [&mut b.bids, &mut b.asks]
                .into_iter()
                .filter(|_| over_budget)
            {
                let had = side.capacity();
                side.shrink_to(KEPT);
                *room -= had - side.capacity();
            }
            b.orders = 0;
            b.far = None;
        }
    }

    /// Starts loading `book`'s entry.
    #[inline]
    pub(super) fn prefetch_entry(&self, book: u32) {
        if let Some(b) = self.books.get(book as usize) {
            prefetch(b);
        }
    }

    /// Starts loading `book`'s best level on each side, where most of the
    /// flow lands (once the book's entry is in cache). Also loading the
    /// lines of the seven next best measured no faster here, and slower in
    /// `examples/itch_ceiling.rs`.
    #[inline]
    pub(super) fn prefetch_top(&self, book: u32) {
        if let Some(b) = self.books.get(book as usize) {
            for side in [&b.bids, &b.asks] {
                if let Some(top) = side.last() {
                    prefetch(top);
                }
            }
        }
    }

    /// The top of `book`: O(1).
    #[inline]
    pub fn top(&self, book: u32) -> Top {
        let Some(b) = self.books.get(book as usize) else {
            return Top::default();
        };
        let best = |levels: &[Level]| levels.last().map(|l| (l.price, l.shares));
        Top {
            bid: best(&b.bids),
            ask: best(&b.asks),
        }
    }

    /// Live orders in `book`.
    pub fn orders_in(&self, book: u32) -> u64 {
        self.books.get(book as usize).map_or(0, |b| b.orders)
    }

    /// Price levels of `book`, best first: (bids, asks), each (price,
    /// shares, orders). For tests and tools.
    pub fn depth(&self, book: u32) -> (Depth, Depth) {
        let Some(b) = self.books.get(book as usize) else {
            return (Vec::new(), Vec::new());
        };
        let row = |l: &Level| (l.price, l.shares, l.orders);
        let far = |i: usize| b.far.as_deref().map(|f| &f[i]);
        let bids = b.bids.iter().rev().map(row);
        let asks = b.asks.iter().rev().map(row);
        // Far levels after the near ones, best first.
        let far_bids = far(0).into_iter().flat_map(|f| f.values().rev().map(row));
        let far_asks = far(1).into_iter().flat_map(|f| f.values().map(row));
        (
            bids.chain(far_bids).collect(),
            asks.chain(far_asks).collect(),
        )
    }
}

#[cfg(test)]
impl Levels {
    /// Keeps `near` levels a side near from now on (fewer than [`NEAR`], so
    /// that tests reach the far maps).
    pub(super) fn set_near(&mut self, near: usize) {
        self.near = near;
    }

    /// `book`'s near bid levels.
    pub(super) fn near_bids(&self, book: u32) -> usize {
        self.books[book as usize].bids.len()
    }

    /// `book`'s far bid levels, once it has had any.
    pub(super) fn far_bids(&self, book: u32) -> Option<usize> {
        self.books[book as usize].far.as_ref().map(|f| f[0].len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A side's `room` once its levels went: kept under the room budget,
    /// given back (to `KEPT` at most) over it (`budget` 0).
    fn assert_kept(budget: usize, room: usize) {
        match budget {
            0 => assert!(room <= KEPT, "{room}"),
            _ => assert_eq!(room, NEAR),
        }
    }

    /// The room kept count of is every side's.
    fn assert_room_counted(levels: &Levels) {
        let held: usize = levels
            .books
            .iter()
            .map(|b| b.bids.capacity() + b.asks.capacity())
            .sum();
        assert_eq!(levels.room, held, "the room is kept count of");
    }

    /// A side past its near levels never has room for more than them.
    /// Under the room budget a side keeps its room as its levels go (a
    /// normal flow allocates nothing after warm-up, a new session
    /// included); over it, a side whose levels went gives its room back,
    /// so books made deep one after the other keep no more than their live
    /// levels need (64 KiB each before).
    #[test]
    fn a_side_gives_back_the_room_its_levels_left_over_the_budget() {
        let change = |book, price, side, kind| Change {
            book,
            price,
            shares: 100,
            side,
            kind,
        };
        let depth = NEAR as u32 + 1;
        for budget in [ROOM_BUDGET, 0] {
            let mut levels = Levels {
                budget,
                ..Levels::default()
            };
            for book in 0..4 {
                for p in 1..=depth {
                    levels.apply(change(book, 10_000 + p, Side::Buy, Kind::Rest));
                    levels.apply(change(book, 30_000 - p, Side::Sell, Kind::Rest));
                }
                let b = &levels.books[book as usize];
                assert!(b.bids.capacity() <= NEAR && b.asks.capacity() <= NEAR);
                assert_eq!(levels.depth(book).0.len(), depth as usize);
                // All but the best level go.
                for p in 1..depth {
                    levels.apply(change(book, 10_000 + p, Side::Buy, Kind::Remove));
                    levels.apply(change(book, 30_000 - p, Side::Sell, Kind::Remove));
                }
                let b = &levels.books[book as usize];
                let room = b.bids.capacity().max(b.asks.capacity());
                assert_kept(budget, room);
                assert_eq!(levels.top(book).bid.map(|l| l.0), Some(10_000 + depth));
            }
            assert_room_counted(&levels);
            // A new session keeps the room under the budget; over it, a
            // side deep again keeps no more than `KEPT` once cleared.
            for p in 1..=depth {
                levels.apply(change(0, 10_000 + p, Side::Buy, Kind::Rest));
            }
            levels.apply(change(0, 0, Side::Buy, Kind::Clear));
            let room = levels.books[0].bids.capacity();
            assert_kept(budget, room);
            assert_room_counted(&levels);
        }
    }
}
