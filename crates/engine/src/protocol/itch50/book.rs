//! Order books built from ITCH order messages (spec §3.3), with the top of
//! book kept up to date as orders come and go — never a scan per check.
//!
//! Orders live in a [`WindowMap`] keyed by order reference. References rise
//! through a day, so the newest [`ORDER_WINDOW`] of them sit in a ring of
//! 16-byte slots indexed by the reference itself (16 MiB on transparent huge
//! pages, allocated once; a two-level bitmap marks its 64-slot chunks that
//! hold orders, so the window slides past empty ones by whole words):
//! adding, finding and deleting a recent order is
//! one indexed access. Orders
//! older than the window (a quiet stock's resting orders) move to an
//! open-addressing table ([`super::map::U64Map`], 24-byte slots and a
//! byte a slot of clear notes, doubling in steps from 60% full: 42 to 83
//! bytes per order there). Its growth is
//! the only allocation, spread over the inserts that follow it; size it up front
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
//! The orders and the levels ([`super::ladder`]) are two halves that meet
//! in one direction only: the order store turns each message into
//! [`Change`]s of the levels (this order rests, that one takes shares off
//! its level), and nothing the levels do feeds back into the store. A replay therefore can hand the
//! levels to a second thread ([`Books::pipeline`], [`super::levels`]): this
//! thread keeps the orders and queues their changes, the other applies them
//! in batches, each half with its own cache and its own misses in flight.
//! The levels are read only through [`Books::settled`], which brings them
//! back first (a check, the summary), so every read sees exactly what
//! applying each change in place would have left: a read of levels still
//! on their thread does not compile. A live feed keeps both halves on its
//! receive thread: it publishes tops as it applies.

use super::ladder::{Change, Kind, Levels};
use super::levels::LevelThread;
use super::map::WindowMap;
use super::message::Side;

pub use super::ladder::{Depth, Price, Top, NEAR};

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
            levels: Levels::with_books(books),
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
    /// # use tickguard_engine::protocol::itch50::book::Books;
    /// let books = Books::with_capacity(4, 1);
    /// let top = books.top(0); // no: only `settled` reads the levels
    /// ```
    ///
    /// and, since the borrow it returns lasts as long as what is read, no
    /// change can come between:
    ///
    /// ```compile_fail,E0499
    /// # use tickguard_engine::protocol::itch50::book::{Books, Order};
    /// # use tickguard_engine::protocol::itch50::Side;
    /// let mut books = Books::with_capacity(4, 1);
    /// let levels = books.settled();
    /// let o = Order { book: 0, price: 10, shares: 1, side: Side::Buy };
    /// books.add(1, o).unwrap(); // no: the levels are borrowed
    /// let top = levels.top(0);
    /// ```
    ///
    /// ```
    /// # use tickguard_engine::protocol::itch50::book::{Books, Order};
    /// # use tickguard_engine::protocol::itch50::Side;
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

    /// Starts loading `book`'s own entry (the first stage, before its
    /// levels); nothing with the levels on their thread.
    #[inline]
    pub fn prefetch_book(&self, book: u32) {
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
        b.levels.set_near(3);
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
        assert_eq!(b.levels.near_bids(0), 3, "near levels stay at the limit");
        // Emptying the top brings the best far level near, and the top
        // walks down the whole side.
        for k in (0..10u32).rev() {
            assert_eq!(b.settled().top(0).bid, Some((100 + k, 3)));
            b.delete(u64::from(k));
            b.delete(u64::from(40 + k));
        }
        assert_eq!(b.settled().top(0).bid, None);
        assert_eq!(b.levels.far_bids(0), Some(0));
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
            books.levels.set_near(2);
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
