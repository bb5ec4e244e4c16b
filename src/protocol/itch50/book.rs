//! Order books built from ITCH order messages (spec §3.3), with the top of
//! book kept up to date as orders come and go — never a scan per check.
//!
//! Orders live in a [`WindowMap`] keyed by order reference. References rise
//! through a day, so the newest [`ORDER_WINDOW`] of them sit in a ring of
//! 16-byte slots indexed by the reference itself (16 MiB on transparent huge
//! pages, allocated once): adding, finding and deleting a recent order is
//! one indexed access. Orders
//! older than the window (a quiet stock's resting orders) move to an
//! open-addressing table ([`super::map::U64Map`], 24-byte slots, doubling
//! when more than 70% full: 34 to 69 bytes per order there). Its growth is
//! the only allocation, amortised over the orders added; size it up front
//! ([`Books::with_capacity`]) and a day allocates nothing after warm-up
//! (price levels aside: a new level may grow its side's vector, amortised
//! likewise, or on a side deeper than [`NEAR`] levels add a node to its
//! far map). The live orders are capped ([`Books::set_max_orders`]): an
//! add beyond the cap is refused, so neither a venue that never deletes
//! nor an injector can grow the store without bound (and each level holds
//! a live order, so the levels are bounded with it).
//!
//! Each book keeps, per side, its [`NEAR`] best price levels in a vector
//! sorted with the best last (bids ascending, asks descending): the top of
//! book is the last level, and an order at or near the top — most of the
//! flow — moves few bytes. A level holds its total shares and live order
//! count; a level is found by walking from the top. Levels worse than those
//! (a side deeper than any real book's, or one an injector builds) wait in
//! an ordered map of their own, and the best of them moves up when a near
//! level empties: no message costs more than a move of the near vector
//! (16 KiB) and a logarithm, however deep a side grows.
//!
//! Memory, not instructions, bounds a day's replay: a message names an
//! order and a book that are rarely both in cache. A batch of messages
//! (a MoldUDP64 packet, a run of BinaryFILE records) therefore prefetches
//! each message's order slot and book entry, then its book's best levels
//! ([`Books::prefetch_order`], [`Books::prefetch_levels`]), before the
//! message is applied — a packet in two passes over its messages, a file
//! 16 and 8 records ahead — so the misses overlap instead of queueing.
//!
//! The orders and the levels are two halves that meet in one direction
//! only: the order store turns each message into [`Change`]s of the levels
//! (this order rests, that one takes shares off its level), and nothing the
//! levels do feeds back into the store. A replay therefore can hand the
//! levels to a second thread ([`Books::pipeline`], [`super::levels`]): this
//! thread keeps the orders and queues their changes, the other applies them
//! in batches, each half with its own cache and its own misses in flight.
//! The levels are read only through [`Books::settled`], which brings them
//! back first (a check, the summary), so every read sees exactly what
//! applying each change in place would have left: a read of levels still
//! on their thread does not compile. A live feed keeps both halves on its
//! receive thread: it publishes tops as it applies.

use super::levels::LevelThread;
use super::map::WindowMap;
use super::message::Side;
use crate::sys::memory::prefetch;
use std::collections::BTreeMap;

/// A price in 1/10,000 dollar (ITCH `Price(4)`).
pub type Price = u32;

/// One live order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Order {
    /// The book (symbol) it rests in.
    pub book: u32,
    /// Limit price.
    pub price: Price,
    /// Shares still open.
    pub shares: u32,
    /// Buy or sell.
    pub side: Side,
}

const VACANT: Order = Order {
    book: 0,
    price: 0,
    shares: 0,
    side: Side::Buy,
};

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

impl Change {
    fn of(o: Order, shares: u32, kind: Kind) -> Change {
        Change {
            book: o.book,
            price: o.price,
            shares,
            side: o.side,
            kind,
        }
    }
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
    /// Levels a side keeps near ([`NEAR`]; smaller in tests).
    near: usize,
}

impl Default for Levels {
    fn default() -> Levels {
        Levels {
            books: Vec::new(),
            near: NEAR,
        }
    }
}

impl Levels {
    fn book(&mut self, book: u32) -> &mut Book {
        let i = book as usize;
        if i >= self.books.len() {
            self.books.resize_with(i + 1, Book::default);
        }
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
                levels.insert(i, new);
                if levels.len() > near {
                    // The worst near level goes far.
                    let worst = levels.remove(0);
                    book.far(c.side).insert(worst.price, worst);
                }
            }
        }
    }

    /// Takes the change's shares off its level; drops an order from it
    /// when `gone`.
    fn unrest(&mut self, c: Change, gone: bool) {
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
    }

    /// Empties every book, keeping the memory.
    fn clear(&mut self) {
        for b in &mut self.books {
            b.bids.clear();
            b.asks.clear();
            b.orders = 0;
            b.far = None;
        }
    }

    /// Starts loading `book`'s entry.
    #[inline]
    fn prefetch_entry(&self, book: u32) {
        if let Some(b) = self.books.get(book as usize) {
            prefetch(b);
        }
    }

    /// Starts loading `book`'s best level on each side, where most of the
    /// flow lands (once the book's entry is in cache). Also loading the
    /// lines of the seven next best measured no faster here, and slower in
    /// `examples/itch_ceiling.rs`.
    #[inline]
    fn prefetch_top(&self, book: u32) {
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

/// Every symbol's book and the live orders behind them.
#[derive(Debug)]
pub struct Books {
    orders: WindowMap<Order>,
    /// Most live orders; an add of a new reference beyond is refused.
    max_orders: usize,
    /// The levels, while this thread holds them: always, unless `thread`
    /// has them (then an empty stand-in, with no book to prefetch; only
    /// [`settled`](Books::settled) hands them out to be read).
    levels: Levels,
    /// The thread the levels are applied on, in a pipelined replay.
    thread: Option<LevelThread>,
}

/// [`Books::add`] refused a new order: the books hold their most live
/// orders already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

/// References in the order store's dense window ([`WindowMap`]): 16 bytes
/// each, 16 MiB. On the synthetic day 99.9% of the references that
/// executions, cancels, deletes and replaces name fall inside it (95% in
/// 2^18); doubling it again measured 3-12% faster here, within the
/// runs' spread, for 16 MiB more a feed (BENCHMARKS.md).
pub const ORDER_WINDOW: usize = 1 << 20;

impl Books {
    /// Room for `orders` live orders and `books` symbols before anything
    /// grows.
    pub fn with_capacity(orders: usize, books: usize) -> Books {
        Books::with_window(orders, books, ORDER_WINDOW)
    }

    /// [`with_capacity`](Self::with_capacity) with a dense window of
    /// `window` references (rounded up to a power of two, at least 64).
    pub fn with_window(orders: usize, books: usize, window: usize) -> Books {
        Books {
            orders: WindowMap::new(window, orders, VACANT),
            max_orders: usize::MAX,
            levels: Levels {
                books: vec![Book::default(); books],
                near: NEAR,
            },
            thread: None,
        }
    }

    /// Caps the live orders at `max` (none by default): an add of a new
    /// reference with `max` orders live is refused ([`Full`]). Orders live
    /// beyond a lowered cap stay.
    pub fn set_max_orders(&mut self, max: usize) {
        self.max_orders = max;
    }

    /// Applies `c` to the levels, here or on their thread.
    #[inline(always)]
    fn change(&mut self, c: Change) {
        match &mut self.thread {
            None => self.levels.apply(c),
            Some(t) => {
                if !t.away() {
                    t.give(std::mem::take(&mut self.levels));
                }
                t.push(c);
            }
        }
    }

    /// Applies the levels on a second thread from now on (`on`), or here
    /// again. While on, changes queue to that thread; the levels (tops,
    /// depth, orders in a book) are read through
    /// [`settled`](Self::settled), which brings them back. Stays off where
    /// the thread cannot help or start: a machine with one core, or no
    /// thread to spare.
    pub fn pipeline(&mut self, on: bool) {
        if on && self.thread.is_none() {
            self.thread = LevelThread::start();
        } else if !on {
            self.settle();
            self.thread = None;
        }
    }

    /// [`pipeline`](Self::pipeline)`(true)` whatever the cores, so that
    /// tests run the level thread on any machine.
    #[cfg(test)]
    fn pipeline_anyway(&mut self) {
        if self.thread.is_none() {
            self.thread = LevelThread::spawn();
        }
        assert!(self.pipelined(), "no level thread");
    }

    /// True while the levels are applied on a second thread.
    pub fn pipelined(&self) -> bool {
        self.thread.is_some()
    }

    /// Brings the levels back from their thread, every queued change
    /// applied (a no-op when they are here).
    pub fn settle(&mut self) {
        if let Some(t) = &mut self.thread {
            if t.away() {
                self.levels = t.take_back();
            }
        }
    }

    /// The levels, to read (tops, depth, orders in a book), every change
    /// applied: [`settle`](Self::settle)d first. The only way to read them,
    /// so that a read of levels still on their thread does not compile:
    ///
    /// ```compile_fail,E0599
    /// # use tickguard::protocol::itch50::book::Books;
    /// let books = Books::with_capacity(4, 1);
    /// let top = books.top(0); // no: only `settled` reads the levels
    /// ```
    ///
    /// and, since the borrow it returns lasts as long as what is read, no
    /// change can come between:
    ///
    /// ```compile_fail,E0499
    /// # use tickguard::protocol::itch50::book::{Books, Order};
    /// # use tickguard::protocol::itch50::Side;
    /// let mut books = Books::with_capacity(4, 1);
    /// let levels = books.settled();
    /// let o = Order { book: 0, price: 10, shares: 1, side: Side::Buy };
    /// books.add(1, o).unwrap(); // no: the levels are borrowed
    /// let top = levels.top(0);
    /// ```
    ///
    /// ```
    /// # use tickguard::protocol::itch50::book::{Books, Order};
    /// # use tickguard::protocol::itch50::Side;
    /// let mut books = Books::with_capacity(4, 1);
    /// books.pipeline(true);
    /// let o = Order { book: 0, price: 10, shares: 1, side: Side::Buy };
    /// books.add(1, o).unwrap();
    /// assert_eq!(books.settled().top(0).bid, Some((10, 1)));
    /// ```
    #[inline]
    pub fn settled(&mut self) -> &Levels {
        self.settle();
        &self.levels
    }

    /// `A` / `F`: adds an order. An order already live under `order` is
    /// replaced; returns it (an anomaly). With the most orders live
    /// ([`set_max_orders`](Self::set_max_orders)), a new reference is
    /// refused and nothing changes.
    #[inline]
    pub fn add(&mut self, order: u64, o: Order) -> Result<Option<Order>, Full> {
        if self.orders.len() >= self.max_orders && self.orders.get(order).is_none() {
            return Err(Full);
        }
        Ok(self.put(order, o))
    }

    /// [`add`](Self::add) without the cap.
    fn put(&mut self, order: u64, o: Order) -> Option<Order> {
        let old = self.orders.insert(order, o);
        if let Some(old) = old {
            self.change(Change::of(old, old.shares, Kind::Remove));
        }
        self.change(Change::of(o, o.shares, Kind::Rest));
        old
    }

    /// `E`, `C`, `X`: the order's shares decrease by `shares`; at zero or
    /// below it is removed. Returns the order as it was (`None`: unknown).
    pub fn reduce(&mut self, order: u64, shares: u32) -> Option<Order> {
        let live = self.orders.get_mut(order)?;
        let o = *live;
        if shares < o.shares {
            live.shares -= shares;
            self.change(Change::of(o, shares, Kind::Take));
        } else {
            self.orders.remove(order);
            self.change(Change::of(o, o.shares, Kind::Remove));
        }
        Some(o)
    }

    /// `D`: removes the order. Returns it (`None`: unknown).
    pub fn delete(&mut self, order: u64) -> Option<Order> {
        let o = self.orders.remove(order)?;
        self.change(Change::of(o, o.shares, Kind::Remove));
        Some(o)
    }

    /// `U`: removes `original` and adds `new` with its side and book, the
    /// new shares and price. Returns the original (`None`: unknown, nothing
    /// changed) and, second, an order replaced under `new` (an anomaly).
    pub fn replace(
        &mut self,
        original: u64,
        new: u64,
        shares: u32,
        price: Price,
    ) -> Option<(Order, Option<Order>)> {
        let o = self.delete(original)?;
        // One order out, one in: the cap cannot refuse it.
        let replaced = self.put(new, Order { shares, price, ..o });
        Some((o, replaced))
    }

    /// Starts loading what a message naming `order` in `book` will touch
    /// first: the order's slot and the book's own entry (the first stage of
    /// a batch's prefetch, some messages ahead). With the levels on their
    /// thread, which loads its books itself, the stand-in here has no book
    /// to load.
    #[inline]
    pub fn prefetch_order(&self, order: u64, book: u32) {
        self.orders.prefetch(order);
        self.levels.prefetch_entry(book);
    }

    /// Starts loading `book`'s best level on each side (the second stage,
    /// once the book's entry is in cache); nothing with the levels on their
    /// thread.
    #[inline]
    pub fn prefetch_levels(&self, book: u32) {
        self.levels.prefetch_top(book);
    }

    /// The order live under `order`.
    pub fn order(&self, order: u64) -> Option<Order> {
        self.orders.get(order)
    }

    /// Live orders in every book.
    pub fn len(&self) -> usize {
        self.orders.len()
    }

    /// True when no order is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every order and level (a new session), keeping the memory.
    pub fn clear(&mut self) {
        self.orders.clear();
        self.change(Change {
            book: 0,
            price: 0,
            shares: 0,
            side: Side::Buy,
            kind: Kind::Clear,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn o(book: u32, side: Side, shares: u32, price: Price) -> Order {
        Order {
            book,
            price,
            shares,
            side,
        }
    }

    #[test]
    fn top_follows_adds_executions_and_deletes() {
        let mut b = Books::with_capacity(4, 1);
        b.add(1, o(0, Side::Buy, 100, 1_000_000)).unwrap();
        b.add(2, o(0, Side::Buy, 50, 1_000_100)).unwrap();
        b.add(3, o(0, Side::Sell, 70, 1_000_300)).unwrap();
        b.add(4, o(0, Side::Sell, 30, 1_000_300)).unwrap();
        assert_eq!(
            b.settled().top(0),
            Top {
                bid: Some((1_000_100, 50)),
                ask: Some((1_000_300, 100))
            }
        );
        b.reduce(2, 20);
        assert_eq!(b.settled().top(0).bid, Some((1_000_100, 30)));
        b.reduce(2, 40); // more than is left: removed
        assert_eq!(b.settled().top(0).bid, Some((1_000_000, 100)));
        assert_eq!(b.order(2), None);
        b.delete(3);
        assert_eq!(b.settled().top(0).ask, Some((1_000_300, 30)));
        let (orig, replaced) = b.replace(4, 9, 10, 999_900).unwrap();
        assert_eq!((orig.side, replaced), (Side::Sell, None));
        assert_eq!(
            b.settled().top(0).ask,
            Some((999_900, 10)),
            "a crossed book is kept as is"
        );
        assert_eq!(b.settled().orders_in(0), 2);
        assert_eq!(
            b.replace(4, 10, 1, 1),
            None,
            "unknown original: nothing changes"
        );
        assert_eq!(b.settled().orders_in(0), 2);
        b.clear();
        assert_eq!(b.settled().top(0), Top::default());
        assert!(b.is_empty());
    }

    #[test]
    fn a_deep_side_is_searched_past_the_walk() {
        // 40 levels a side, orders at every depth: the walk of the best
        // few and the binary search below it must agree.
        let mut b = Books::with_capacity(200, 1);
        for k in 0..40u32 {
            b.add(u64::from(k), o(0, Side::Buy, 1, 1_000 + 10 * k))
                .unwrap();
            b.add(u64::from(100 + k), o(0, Side::Sell, 1, 2_000 + 10 * k))
                .unwrap();
        }
        for (r, side, price) in [
            (60, Side::Buy, 1_005),
            (61, Side::Sell, 2_005),
            (62, Side::Buy, 1_000),
            (63, Side::Sell, 2_390),
        ] {
            b.add(r, o(0, side, 2, price)).unwrap();
        }
        let (bids, asks) = b.settled().depth(0);
        assert_eq!((bids.len(), asks.len()), (41, 41));
        assert!(bids.windows(2).all(|w| w[0].0 > w[1].0));
        assert!(asks.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(bids.last(), Some(&(1_000, 3, 2)));
        assert_eq!(asks.last(), Some(&(2_390, 3, 2)));
        // Deep levels leave when their last order goes.
        b.delete(0);
        b.delete(62);
        b.delete(60);
        assert_eq!(b.settled().depth(0).0.len(), 39);
        assert_eq!(b.settled().top(0).bid, Some((1_390, 1)));
    }

    #[test]
    fn a_side_deeper_than_its_near_levels_keeps_the_rest_far() {
        // 3 near levels; 10 bid prices added worst-first and best-first.
        let mut b = Books::with_capacity(64, 1);
        b.levels.near = 3;
        for k in 0..10u32 {
            b.add(u64::from(k), o(0, Side::Buy, 1, 100 + k)).unwrap();
            b.add(u64::from(20 + k), o(0, Side::Sell, 1, 300 - k))
                .unwrap();
        }
        for k in 0..10u32 {
            b.add(u64::from(40 + k), o(0, Side::Buy, 2, 100 + k))
                .unwrap();
        }
        let (bids, asks) = b.settled().depth(0);
        let want_bids: Depth = (0..10u32).rev().map(|k| (100 + k, 3, 2)).collect();
        let want_asks: Depth = (0..10u32).rev().map(|k| (300 - k, 1, 1)).collect();
        assert_eq!((bids, asks), (want_bids, want_asks));
        assert_eq!(
            b.levels.books[0].bids.len(),
            3,
            "near levels stay at the limit"
        );
        // Emptying the top brings the best far level near, and the top
        // walks down the whole side.
        for k in (0..10u32).rev() {
            assert_eq!(b.settled().top(0).bid, Some((100 + k, 3)));
            b.delete(u64::from(k));
            b.delete(u64::from(40 + k));
        }
        assert_eq!(b.settled().top(0).bid, None);
        assert!(b.levels.books[0]
            .far
            .as_ref()
            .is_some_and(|f| f[0].is_empty()));
        assert_eq!(b.settled().top(0).ask, Some((291, 1)));
    }

    #[test]
    fn an_existing_reference_is_replaced_in_its_own_book() {
        let mut b = Books::with_capacity(4, 2);
        b.add(7, o(0, Side::Buy, 100, 10)).unwrap();
        let old = b.add(7, o(1, Side::Sell, 5, 20)).unwrap();
        assert_eq!(old, Some(o(0, Side::Buy, 100, 10)));
        assert_eq!(b.settled().top(0), Top::default());
        assert_eq!(b.settled().top(1).ask, Some((20, 5)));
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn the_largest_reference_is_an_order_like_any_other() {
        let mut b = Books::with_capacity(4, 1);
        b.add(u64::MAX, o(0, Side::Buy, 1, 5)).unwrap();
        b.add(0, o(0, Side::Buy, 2, 5)).unwrap();
        assert_eq!(b.settled().top(0).bid, Some((5, 3)));
        assert_eq!(b.len(), 2);
        b.delete(u64::MAX);
        assert_eq!(b.settled().top(0).bid, Some((5, 2)));
    }

    #[test]
    fn a_full_store_refuses_new_references_only() {
        let mut b = Books::with_capacity(4, 1);
        b.set_max_orders(2);
        b.add(1, o(0, Side::Buy, 100, 10)).unwrap();
        b.add(2, o(0, Side::Sell, 100, 20)).unwrap();
        assert_eq!(b.add(3, o(0, Side::Buy, 5, 11)), Err(Full));
        assert_eq!(
            b.settled().top(0).bid,
            Some((10, 100)),
            "a refused add changes nothing"
        );
        assert_eq!(b.len(), 2);
        // A live reference again, and a replace (one out, one in): allowed.
        assert_eq!(
            b.add(1, o(0, Side::Buy, 50, 12)),
            Ok(Some(o(0, Side::Buy, 100, 10)))
        );
        assert!(b.replace(2, 9, 7, 19).is_some());
        assert_eq!(b.settled().top(0).ask, Some((19, 7)));
        // Room again once an order goes.
        b.delete(9);
        assert_eq!(b.add(3, o(0, Side::Buy, 5, 11)), Ok(None));
        assert_eq!(b.settled().top(0).bid, Some((12, 50)));
    }

    #[test]
    fn pipelined_levels_read_settled_have_every_change_applied() {
        let mut b = Books::with_capacity(4, 1);
        b.pipeline_anyway();
        b.add(1, o(0, Side::Buy, 100, 10)).unwrap();
        b.add(2, o(0, Side::Sell, 50, 12)).unwrap();
        assert_eq!(b.settled().top(0).bid, Some((10, 100)));
        // A new session empties the books on the level thread too.
        b.clear();
        b.add(3, o(0, Side::Sell, 7, 13)).unwrap();
        assert_eq!(
            b.settled().top(0),
            Top {
                bid: None,
                ask: Some((13, 7))
            }
        );
        assert_eq!(b.settled().orders_in(0), 1);
        // Off again: the levels are here, with every change applied.
        b.delete(3);
        b.pipeline(false);
        assert!(!b.pipelined());
        assert_eq!(b.settled().top(0), Top::default());
    }

    #[derive(Debug, Clone)]
    enum Op {
        Add(u64, u32, bool, u32, u32),
        Reduce(u64, u32),
        Delete(u64),
        Replace(u64, u64, u32, u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Few references, books and prices, so that collisions, shared
        // levels and unknown orders are common.
        let r = (0u64..40).prop_map(|r| r * 5);
        prop_oneof![
            (r.clone(), 0u32..3, any::<bool>(), 0u32..200, 95u32..105)
                .prop_map(|(r, b, s, n, p)| Op::Add(r, b, s, n, p)),
            (r.clone(), 0u32..150).prop_map(|(r, n)| Op::Reduce(r, n)),
            r.clone().prop_map(Op::Delete),
            (r.clone(), r, 0u32..200, 95u32..105).prop_map(|(a, b, n, p)| Op::Replace(a, b, n, p)),
        ]
    }

    /// The proptest's cap on live orders.
    const MAX: usize = 12;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The books against a plain map of orders, top of book computed by
        /// scanning every order: with the levels on this thread, and on
        /// their own (pipelined), read after every `every` messages.
        #[test]
        fn books_match_a_plain_model(
            ops in proptest::collection::vec(op(), 0..200),
            pipelined in any::<bool>(),
            every in 1usize..40,
        ) {
            // A window of 128 references that the references below slide,
            // room for 12 orders, so that adds are refused now and then, and
            // two near levels a side, so that most levels come and go far.
            let mut books = Books::with_window(2, 1, 128);
            books.set_max_orders(MAX);
            books.levels.near = 2;
            if pipelined {
                books.pipeline_anyway();
            }
            let mut model: BTreeMap<u64, Order> = BTreeMap::new();
            let n = ops.len();
            for (k, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Add(r, book, buy, n, p) => {
                        let ord = o(book, if buy { Side::Buy } else { Side::Sell }, n, p);
                        let want = if model.len() >= MAX && !model.contains_key(&r) {
                            Err(Full)
                        } else {
                            Ok(model.insert(r, ord))
                        };
                        prop_assert_eq!(books.add(r, ord), want);
                    }
                    Op::Reduce(r, n) => {
                        let want = model.get(&r).copied();
                        if let Some(m) = model.get_mut(&r) {
                            if n >= m.shares { model.remove(&r); } else { m.shares -= n; }
                        }
                        prop_assert_eq!(books.reduce(r, n), want);
                    }
                    Op::Delete(r) => prop_assert_eq!(books.delete(r), model.remove(&r)),
                    Op::Replace(a, b, n, p) => {
                        let want = model.remove(&a).map(|orig| {
                            let replaced = model.insert(b, Order { shares: n, price: p, ..orig });
                            (orig, replaced)
                        });
                        prop_assert_eq!(books.replace(a, b, n, p), want);
                    }
                }
                prop_assert_eq!(books.len(), model.len());
                if (k + 1) % every != 0 && k + 1 != n {
                    continue;
                }
                for book in 0..3u32 {
                    let side = |s: Side, better: fn(Price, Price) -> bool| {
                        let mut best: Option<(Price, u64)> = None;
                        for m in model.values().filter(|m| m.book == book && m.side == s) {
                            best = match best {
                                Some((p, q)) if p == m.price => Some((p, q + m.shares as u64)),
                                Some((p, _)) if better(p, m.price) => best,
                                _ => Some((m.price, m.shares as u64)),
                            };
                        }
                        best
                    };
                    let want = Top {
                        bid: side(Side::Buy, |have, new| have > new),
                        ask: side(Side::Sell, |have, new| have < new),
                    };
                    prop_assert_eq!(books.settled().top(book), want, "book {}", book);
                    // Every level, best first.
                    let depth = |s: Side| {
                        let mut levels: BTreeMap<Price, (u64, u32)> = BTreeMap::new();
                        for m in model.values().filter(|m| m.book == book && m.side == s) {
                            let l = levels.entry(m.price).or_default();
                            *l = (l.0 + m.shares as u64, l.1 + 1);
                        }
                        let rows = levels.into_iter().map(|(p, (q, n))| (p, q, n));
                        match s {
                            Side::Buy => rows.rev().collect::<Depth>(),
                            Side::Sell => rows.collect(),
                        }
                    };
                    prop_assert_eq!(books.settled().depth(book), (depth(Side::Buy), depth(Side::Sell)));
                    let live = model.values().filter(|m| m.book == book).count() as u64;
                    prop_assert_eq!(books.settled().orders_in(book), live);
                }
            }
        }
    }
}
