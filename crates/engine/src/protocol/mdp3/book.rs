//! An instrument's market-by-price books: outright and implied, each a
//! bid and an offer side of a fixed depth (the definition's MarketDepth,
//! else the feed's default), edited by price level as CME's incremental
//! book updates say.
//!
//! A side is an array of `depth` slots, level 1 first; a slot may be
//! empty. The actions, at level `n` (1-based):
//!
//! - **New** inserts at `n`; deeper levels shift one down, and one pushed
//!   past the depth is dropped.
//! - **Change** and **Overlay** overwrite `n`.
//! - **Delete** removes `n`; deeper levels shift one up, the last slot
//!   empties.
//! - **DeleteFrom** removes levels 1 to `n`; the rest shift up (`n` at or
//!   past the depth empties the side).
//! - **DeleteThru** empties the side.
//!
//! A level outside `1..=depth` changes nothing (DeleteFrom and DeleteThru
//! aside). Entry type `J` empties both books; `w` and `x` (market best
//! offer and bid) change none. An unknown action or entry type, or a New,
//! Change or Overlay without a price or size, changes nothing and is an
//! anomaly for the caller to count.
//!
//! Prices are the wire's mantissas (exponent −9), compared as signed
//! integers: never floats. The top of book is level 1, read in O(1). The
//! slots are allocated once, with the instrument; nothing allocates per
//! update.

/// Most levels a side holds (MarketDepth is an `i8`).
pub const MAX_DEPTH: u8 = 127;

/// One price level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level {
    /// Price mantissa, exponent −9.
    pub price: i64,
    /// Quantity at the price.
    pub size: u64,
    /// Orders at the price, when sent.
    pub orders: Option<i32>,
}

/// What an update does to a level (MDUpdateAction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// 0.
    New,
    /// 1.
    Change,
    /// 2.
    Delete,
    /// 3.
    DeleteThru,
    /// 4.
    DeleteFrom,
    /// 5.
    Overlay,
}

impl Action {
    /// The action of wire code `c`, `None` for an unknown one.
    pub fn from_code(c: u8) -> Option<Action> {
        Some(match c {
            0 => Action::New,
            1 => Action::Change,
            2 => Action::Delete,
            3 => Action::DeleteThru,
            4 => Action::DeleteFrom,
            5 => Action::Overlay,
            _ => return None,
        })
    }
}

/// Which book and side an entry is for (MDEntryType).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// `0`.
    Bid,
    /// `1`.
    Offer,
    /// `E`.
    ImpliedBid,
    /// `F`.
    ImpliedOffer,
    /// `J`: both books empty.
    Reset,
    /// `w` or `x`: market best offer or bid, no book change.
    MarketBest,
}

impl Entry {
    /// The entry type of wire character `c`, `None` for one that is not a
    /// book entry.
    pub fn from_code(c: u8) -> Option<Entry> {
        Some(match c {
            b'0' => Entry::Bid,
            b'1' => Entry::Offer,
            b'E' => Entry::ImpliedBid,
            b'F' => Entry::ImpliedOffer,
            b'J' => Entry::Reset,
            b'w' | b'x' => Entry::MarketBest,
            _ => return None,
        })
    }
}

/// The side of each MDEntryType code ([`Books::side_mut`]): 0 bid, 1
/// offer, 2 implied bid, 3 implied offer; 4 for every other code.
const SIDE_OF: [u8; 256] = {
    let mut t = [4; 256];
    t[b'0' as usize] = 0;
    t[b'1' as usize] = 1;
    t[b'E' as usize] = 2;
    t[b'F' as usize] = 3;
    t
};

/// One book update, as an incremental entry carries it (nulls as `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Update {
    /// MDUpdateAction, as sent.
    pub action: u8,
    /// MDEntryType, as sent.
    pub entry: u8,
    /// MDPriceLevel, 1-based.
    pub level: u8,
    /// MDEntryPx mantissa.
    pub price: Option<i64>,
    /// MDEntrySize.
    pub size: Option<u64>,
    /// NumberOfOrders.
    pub orders: Option<i32>,
}

/// What an update did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// A book changed (or may have: a level past the depth did not).
    Changed,
    /// Nothing to change (`w`/`x`, a level outside the depth).
    Unchanged,
    /// An unknown action or entry type, or a level update without a price
    /// or size: nothing changed.
    Anomaly,
}

/// One side: `depth` slots, level 1 first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Side {
    slots: Box<[Option<Level>]>,
}

impl Side {
    /// An empty side of `depth` levels (at most [`MAX_DEPTH`]).
    pub fn new(depth: u8) -> Side {
        Side {
            slots: vec![None; usize::from(depth.min(MAX_DEPTH))].into_boxed_slice(),
        }
    }

    /// Its depth.
    pub fn depth(&self) -> u8 {
        self.slots.len() as u8
    }

    /// Level 1, `None` when the side is empty.
    #[inline]
    pub fn top(&self) -> Option<Level> {
        self.slots.first().copied().flatten()
    }

    /// Level `n` (1-based).
    pub fn level(&self, n: u8) -> Option<Level> {
        self.slots
            .get(usize::from(n).checked_sub(1)?)
            .copied()
            .flatten()
    }

    /// Empties every level.
    pub fn clear(&mut self) {
        self.slots.fill(None);
    }

    /// Sets level `n` (a snapshot's entry); outside the depth, nothing.
    pub fn set(&mut self, n: u8, level: Level) {
        if let Some(i) = index(n, self.slots.len()) {
            self.slots[i] = Some(level);
        }
    }

    /// Applies `action` at level `n` with `level` (present for New,
    /// Change, Overlay). Returns the slots it may have changed (`None`:
    /// none).
    #[inline(always)]
    fn apply(&mut self, action: Action, n: u8, level: Option<Level>) -> Option<Touched> {
        let depth = self.slots.len();
        let all = Touched::ALL;
        match action {
            Action::DeleteThru => {
                self.clear();
                Some(all)
            }
            Action::DeleteFrom => {
                let n = usize::from(n);
                if n == 0 {
                    return None;
                }
                if n >= depth {
                    self.clear();
                } else {
                    self.slots.copy_within(n.., 0);
                    self.slots[depth - n..].fill(None);
                }
                Some(all)
            }
            Action::New => {
                let i = index(n, depth)?;
                self.slots.copy_within(i..depth - 1, i + 1);
                self.slots[i] = level;
                Some(Touched::from(i as u8))
            }
            Action::Change | Action::Overlay => {
                let i = index(n, depth)?;
                self.slots[i] = level;
                Some(Touched::one(i as u8))
            }
            Action::Delete => {
                let i = index(n, depth)?;
                self.slots.copy_within(i + 1.., i);
                self.slots[depth - 1] = None;
                Some(Touched::from(i as u8))
            }
        }
    }

    /// Copies the slots of `other` in `range` (clamped to the depth), or
    /// every slot where the depths differ (allocating only then); nothing
    /// for an empty range (an instrument's two copies are resized
    /// together, and [`Books::copy_from`] marks every side).
    #[inline(always)]
    fn copy_range_from(&mut self, other: &Side, range: Touched) {
        if range.is_empty() {
            return;
        }
        if self.slots.len() != other.slots.len() {
            self.copy_all_from(other);
            return;
        }
        let hi = usize::from(range.hi).min(self.slots.len());
        let lo = usize::from(range.lo).min(hi);
        if hi - lo == 1 {
            // A Change or Overlay: one slot, no call.
            self.slots[lo] = other.slots[lo];
        } else {
            self.slots[lo..hi].copy_from_slice(&other.slots[lo..hi]);
        }
    }

    /// Every slot of `other`, whatever the depths (never on the hot path:
    /// both copies of a book always have the same depths).
    #[cold]
    #[inline(never)]
    fn copy_all_from(&mut self, other: &Side) {
        self.slots.clone_from(&other.slots);
    }

    /// Keeps the first `depth` levels' slots (a definition lowering the
    /// depth cuts the deeper levels; raising it adds empty ones).
    fn resize(&mut self, depth: u8) {
        let depth = usize::from(depth.min(MAX_DEPTH));
        if depth != self.slots.len() {
            let mut slots = vec![None; depth].into_boxed_slice();
            let keep = depth.min(self.slots.len());
            slots[..keep].copy_from_slice(&self.slots[..keep]);
            self.slots = slots;
        }
    }
}

/// Slot index of level `n` in a side of `depth`, `None` outside `1..=depth`.
#[inline]
fn index(n: u8, depth: usize) -> Option<usize> {
    let i = usize::from(n).checked_sub(1)?;
    (i < depth).then_some(i)
}

/// Slots `lo..hi` of a side (`hi` may pass its depth: clamped on use).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Touched {
    lo: u8,
    hi: u8,
}

impl Touched {
    /// Every slot.
    const ALL: Touched = Touched {
        lo: 0,
        hi: MAX_DEPTH,
    };
    /// No slot.
    const NONE: Touched = Touched { lo: u8::MAX, hi: 0 };

    /// Slot `i` alone.
    fn one(i: u8) -> Touched {
        Touched { lo: i, hi: i + 1 }
    }

    /// Slot `i` and every deeper one (a shift).
    fn from(i: u8) -> Touched {
        Touched {
            lo: i,
            hi: MAX_DEPTH,
        }
    }

    fn is_empty(self) -> bool {
        self.lo >= self.hi
    }

    fn union(self, other: Touched) -> Touched {
        Touched {
            lo: self.lo.min(other.lo),
            hi: self.hi.max(other.hi),
        }
    }
}

/// Which slots of each of an instrument's four sides (outright bid and
/// offer, implied bid and offer) were changed since its books were last
/// copied: what [`Books::copy_changed_from`] copies, so that making an
/// event visible costs the levels it touched, not the whole books.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Changed([Touched; 4]);

impl Default for Changed {
    fn default() -> Changed {
        Changed::NONE
    }
}

impl Changed {
    /// Nothing changed.
    pub const NONE: Changed = Changed([Touched::NONE; 4]);
    /// Everything may have changed.
    pub const ALL: Changed = Changed([Touched::ALL; 4]);

    /// Nothing marked.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|t| t.is_empty())
    }

    fn mark(&mut self, side: usize, t: Touched) {
        self.0[side] = self.0[side].union(t);
    }
}

/// One book: a bid side and an offer side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Book {
    /// Buy side.
    pub bid: Side,
    /// Sell side.
    pub offer: Side,
}

impl Book {
    /// An empty book of `depth` levels a side.
    pub fn new(depth: u8) -> Book {
        Book {
            bid: Side::new(depth),
            offer: Side::new(depth),
        }
    }

    /// Empties both sides.
    pub fn clear(&mut self) {
        self.bid.clear();
        self.offer.clear();
    }

    /// Both sides empty.
    pub fn is_empty(&self) -> bool {
        self.bid.top().is_none() && self.offer.top().is_none()
    }

    fn resize(&mut self, depth: u8) {
        self.bid.resize(depth);
        self.offer.resize(depth);
    }
}

/// An instrument's outright and implied books.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Books {
    /// The outright book (entry types `0`, `1`).
    pub outright: Book,
    /// The implied book (entry types `E`, `F`).
    pub implied: Book,
}

impl Books {
    /// Empty books of `depth` (outright) and `implied_depth` levels.
    pub fn new(depth: u8, implied_depth: u8) -> Books {
        Books {
            outright: Book::new(depth),
            implied: Book::new(implied_depth),
        }
    }

    /// Applies one incremental update.
    pub fn apply(&mut self, u: &Update) -> Applied {
        let mut changed = Changed::NONE;
        self.apply_marking(u, &mut changed)
    }

    /// Applies one incremental update, marking in `changed` the slots it
    /// may have changed.
    #[inline(always)]
    pub fn apply_marking(&mut self, u: &Update, changed: &mut Changed) -> Applied {
        let Some(action) = Action::from_code(u.action) else {
            return Applied::Anomaly;
        };
        // The side by table lookup: bid and offer alternate at random, so a
        // branch (or a jump) on the entry type would be mispredicted half
        // the time.
        let which = usize::from(SIDE_OF[usize::from(u.entry)]);
        let Some(side) = self.side_mut(which) else {
            return self.apply_whole(u.entry, changed);
        };
        let level = match action {
            Action::New | Action::Change | Action::Overlay => match (u.price, u.size) {
                (Some(price), Some(size)) => Some(Level {
                    price,
                    size,
                    orders: u.orders,
                }),
                _ => return Applied::Anomaly,
            },
            Action::Delete | Action::DeleteThru | Action::DeleteFrom => None,
        };
        match side.apply(action, u.level, level) {
            Some(t) => {
                changed.mark(which, t);
                Applied::Changed
            }
            None => Applied::Unchanged,
        }
    }

    /// Side `which` of [`SIDE_OF`] (0 outright bid, 1 outright offer, 2
    /// implied bid, 3 implied offer), `None` for any other value.
    #[inline(always)]
    fn side_mut(&mut self, which: usize) -> Option<&mut Side> {
        // Selected, not jumped to: the book (implied entries are few, a
        // branch predicted), then the side by a conditional move.
        let book = match which {
            0 | 1 => &mut self.outright,
            2 | 3 => &mut self.implied,
            _ => return None,
        };
        Some(if which & 1 == 0 {
            &mut book.bid
        } else {
            &mut book.offer
        })
    }

    /// An update whose entry type names no side: `J` empties both books,
    /// `w`/`x` change nothing, any other is an anomaly.
    #[cold]
    fn apply_whole(&mut self, entry: u8, changed: &mut Changed) -> Applied {
        match Entry::from_code(entry) {
            Some(Entry::Reset) => {
                self.clear();
                *changed = Changed::ALL;
                Applied::Changed
            }
            Some(Entry::MarketBest) => Applied::Unchanged,
            _ => Applied::Anomaly,
        }
    }

    /// Sets a snapshot entry's level (after [`clear`](Self::clear)): a
    /// book entry type at a level inside the depth with a price; any other
    /// entry is ignored. Returns whether it was taken.
    pub fn set(
        &mut self,
        entry: u8,
        n: u8,
        price: Option<i64>,
        size: u64,
        orders: Option<i32>,
    ) -> bool {
        let side = match Entry::from_code(entry) {
            Some(Entry::Bid) => &mut self.outright.bid,
            Some(Entry::Offer) => &mut self.outright.offer,
            Some(Entry::ImpliedBid) => &mut self.implied.bid,
            Some(Entry::ImpliedOffer) => &mut self.implied.offer,
            _ => return false,
        };
        let (Some(price), Some(_)) = (price, index(n, usize::from(side.depth()))) else {
            return false;
        };
        side.set(
            n,
            Level {
                price,
                size,
                orders,
            },
        );
        true
    }

    /// Empties both books.
    pub fn clear(&mut self) {
        self.outright.clear();
        self.implied.clear();
    }

    /// Sets the depths (a definition): a lower one cuts deeper levels.
    pub fn set_depths(&mut self, depth: u8, implied_depth: u8) {
        self.outright.resize(depth);
        self.implied.resize(implied_depth);
    }

    /// Makes these books a copy of `other` (the visible books taking the
    /// working ones at the end of an event), without allocating when the
    /// depths agree. (A derived `clone_from` would clone and drop every
    /// side's slots: an allocation per side per publication.)
    pub fn copy_from(&mut self, other: &Books) {
        let mut all = Changed::ALL;
        self.copy_changed_from(other, &mut all);
    }

    /// Copies from `other` the slots `changed` marks (where a side's depths
    /// differ, the whole side), then clears `changed`. Where every slot
    /// that differs is marked (these books equal `other` when `changed`
    /// was last cleared, and every change to `other` since was marked),
    /// the books are then a copy of `other`. Allocates nothing when the
    /// depths agree.
    #[inline(always)]
    pub fn copy_changed_from(&mut self, other: &Books, changed: &mut Changed) {
        let [a, b, c, d] = changed.0;
        self.outright.bid.copy_range_from(&other.outright.bid, a);
        self.outright
            .offer
            .copy_range_from(&other.outright.offer, b);
        self.implied.bid.copy_range_from(&other.implied.bid, c);
        self.implied.offer.copy_range_from(&other.implied.offer, d);
        *changed = Changed::NONE;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(action: u8, entry: u8, level: u8, price: i64) -> Update {
        Update {
            action,
            entry,
            level,
            price: Some(price),
            size: Some(price as u64 % 100 + 1),
            orders: Some(1),
        }
    }

    /// The prices of a side, level 1 first (`0` for an empty slot).
    fn prices(s: &Side) -> Vec<i64> {
        (1..=s.depth())
            .map(|n| s.level(n).map_or(0, |l| l.price))
            .collect()
    }

    #[test]
    fn the_side_table_agrees_with_the_entry_types() {
        for c in 0..=u8::MAX {
            let side = match Entry::from_code(c) {
                Some(Entry::Bid) => 0,
                Some(Entry::Offer) => 1,
                Some(Entry::ImpliedBid) => 2,
                Some(Entry::ImpliedOffer) => 3,
                _ => 4,
            };
            assert_eq!(SIDE_OF[usize::from(c)], side, "{c}");
            let mut b = Books::new(2, 2);
            let which = usize::from(side);
            assert_eq!(b.side_mut(which).is_some(), side < 4);
            if let Some(s) = b.side_mut(which) {
                s.set(
                    1,
                    Level {
                        price: 7,
                        size: 1,
                        orders: None,
                    },
                );
            }
            let tops = [
                b.outright.bid.top(),
                b.outright.offer.top(),
                b.implied.bid.top(),
                b.implied.offer.top(),
            ];
            for (i, top) in tops.iter().enumerate() {
                assert_eq!(top.is_some(), i == which, "{c}: side {i}");
            }
        }
    }

    #[test]
    fn new_inserts_and_pushes_the_deepest_out() {
        let mut b = Books::new(3, 2);
        for (n, p) in [(1, 10), (1, 20), (2, 15), (1, 30)] {
            assert_eq!(b.apply(&up(0, b'0', n, p)), Applied::Changed);
        }
        assert_eq!(prices(&b.outright.bid), [30, 20, 15]);
        assert_eq!(b.outright.bid.top().map(|l| l.price), Some(30));
        // A New at the last level replaces it; past the depth, nothing.
        b.apply(&up(0, b'0', 3, 5));
        assert_eq!(prices(&b.outright.bid), [30, 20, 5]);
        assert_eq!(b.apply(&up(0, b'0', 4, 1)), Applied::Unchanged);
        assert_eq!(b.apply(&up(0, b'0', 0, 1)), Applied::Unchanged);
        assert_eq!(prices(&b.outright.bid), [30, 20, 5]);
    }

    #[test]
    fn change_and_overlay_overwrite_delete_shifts_up() {
        let mut b = Books::new(4, 2);
        for p in [40, 30, 20, 10] {
            b.apply(&up(0, b'1', 1, p));
        }
        assert_eq!(prices(&b.outright.offer), [10, 20, 30, 40]);
        b.apply(&up(1, b'1', 2, 21));
        b.apply(&up(5, b'1', 3, 31));
        assert_eq!(prices(&b.outright.offer), [10, 21, 31, 40]);
        b.apply(&up(2, b'1', 2, 0));
        assert_eq!(prices(&b.outright.offer), [10, 31, 40, 0]);
        b.apply(&up(2, b'1', 1, 0));
        assert_eq!(prices(&b.outright.offer), [31, 40, 0, 0]);
        // A Change past the depth: nothing.
        assert_eq!(b.apply(&up(1, b'1', 5, 1)), Applied::Unchanged);
    }

    /// Change and Overlay overwrite the whole level, its size and orders
    /// too, in place (spec mdp3 §3.3: "**Change**, **Overlay** overwrite n
    /// (price, size, orders)").
    #[test]
    fn change_and_overlay_overwrite_price_size_and_orders() {
        let mut b = Books::new(2, 2);
        let at_one = |action, price, size, orders| Update {
            action,
            entry: b'1',
            level: 1,
            price: Some(price),
            size: Some(size),
            orders,
        };
        b.apply(&at_one(0, 10, 5, Some(3)));
        for (action, price, size, orders) in [(1, 11, 7, None), (5, 12, 9, Some(4))] {
            assert_eq!(
                b.apply(&at_one(action, price, size, orders)),
                Applied::Changed
            );
            let level = Level {
                price,
                size,
                orders,
            };
            assert_eq!(b.outright.offer.top(), Some(level), "action {action}");
            assert_eq!(b.outright.offer.level(2), None, "overwritten, not inserted");
        }
    }

    #[test]
    fn delete_from_and_thru() {
        let mut b = Books::new(5, 2);
        for p in [50, 40, 30, 20, 10] {
            b.apply(&up(0, b'0', 1, p));
        }
        b.apply(&up(4, b'0', 2, 0));
        assert_eq!(prices(&b.outright.bid), [30, 40, 50, 0, 0]);
        // DeleteFrom at or past the depth empties the side.
        b.apply(&up(4, b'0', 9, 0));
        assert_eq!(b.outright.bid.top(), None);
        for p in [2, 1] {
            b.apply(&up(0, b'0', 1, p));
        }
        b.apply(&up(3, b'0', 0, 0));
        assert_eq!(b.outright.bid.top(), None);
    }

    #[test]
    fn implied_reset_market_best_and_anomalies() {
        let mut b = Books::new(3, 2);
        b.apply(&up(0, b'0', 1, 7));
        b.apply(&up(0, b'E', 1, 8));
        b.apply(&up(0, b'F', 1, 9));
        assert_eq!(b.implied.bid.top().map(|l| l.price), Some(8));
        assert_eq!(b.implied.offer.top().map(|l| l.price), Some(9));
        assert_eq!(b.apply(&up(0, b'w', 1, 1)), Applied::Unchanged);
        assert_eq!(b.apply(&up(9, b'0', 1, 1)), Applied::Anomaly);
        assert_eq!(b.apply(&up(0, b'Z', 1, 1)), Applied::Anomaly);
        let mut no_price = up(1, b'0', 1, 1);
        no_price.price = None;
        assert_eq!(b.apply(&no_price), Applied::Anomaly);
        let mut no_size = up(0, b'0', 1, 1);
        no_size.size = None;
        assert_eq!(b.apply(&no_size), Applied::Anomaly);
        assert_eq!(b.outright.bid.top().map(|l| l.price), Some(7));
        // A delete needs neither.
        let mut del = up(2, b'0', 1, 0);
        (del.price, del.size) = (None, None);
        assert_eq!(b.apply(&del), Applied::Changed);
        assert_eq!(b.apply(&up(0, b'J', 0, 0)), Applied::Changed);
        assert!(b.outright.is_empty() && b.implied.is_empty());
    }

    #[test]
    fn a_lower_depth_cuts_deeper_levels_and_snapshot_entries_fit_the_depth() {
        let mut b = Books::new(3, 2);
        for p in [3, 2, 1] {
            b.apply(&up(0, b'0', 1, p));
        }
        b.set_depths(2, 1);
        assert_eq!(prices(&b.outright.bid), [1, 2]);
        b.set_depths(4, 2);
        assert_eq!(prices(&b.outright.bid), [1, 2, 0, 0]);
        b.clear();
        assert!(b.set(b'1', 1, Some(5), 3, None));
        assert!(!b.set(b'1', 5, Some(5), 3, None), "past the depth");
        assert!(!b.set(b'1', 0, Some(5), 3, None), "level 0");
        assert!(!b.set(b'1', 2, None, 3, None), "no price");
        assert!(!b.set(b'2', 1, Some(5), 3, None), "not a book entry");
        assert!(!b.set(b'J', 1, Some(5), 3, None), "not a level");
        assert_eq!(
            b.outright.offer.top(),
            Some(Level {
                price: 5,
                size: 3,
                orders: None
            })
        );
        let mut visible = Books::new(4, 2);
        visible.copy_from(&b);
        assert_eq!(visible, b);
        // Depths that differ are taken too.
        let mut other = Books::new(2, 7);
        other.copy_from(&b);
        assert_eq!(other, b);
    }

    proptest::proptest! {
        /// Copying only the slots marked changed keeps a copy equal to the
        /// books it follows, whatever the updates (every action, entry
        /// type and level, resets and anomalies included) and however
        /// many come between copies.
        #[test]
        fn copying_what_changed_equals_copying_everything(
            depth in 1u8..8,
            ops in proptest::collection::vec(
                (0u8..7, 0usize..7, 0u8..10, -5i64..5, proptest::bool::weighted(0.3)),
                0..200,
            ),
        ) {
            let types = [b'0', b'1', b'E', b'F', b'J', b'w', b'Z'];
            let mut working = Books::new(depth, 2);
            let mut visible = working.clone();
            let mut changed = Changed::NONE;
            for (action, entry, n, price, copy) in ops {
                working.apply_marking(&up(action, types[entry], n, price), &mut changed);
                if copy {
                    visible.copy_changed_from(&working, &mut changed);
                    proptest::prop_assert_eq!(&visible, &working);
                    proptest::prop_assert!(changed.is_empty());
                }
            }
            visible.copy_changed_from(&working, &mut changed);
            proptest::prop_assert_eq!(&visible, &working);
        }

        /// Any run of updates leaves each side as a plain vector model of
        /// the actions leaves it.
        #[test]
        fn sides_follow_a_vector_model(
            depth in 1u8..8,
            ops in proptest::collection::vec((0u8..7, 0u8..10, -5i64..5), 0..200),
        ) {
            let mut b = Books::new(depth, 2);
            let mut model: Vec<Option<i64>> = vec![None; usize::from(depth)];
            for (action, n, price) in ops {
                let r = b.apply(&up(action, b'0', n, price));
                let d = usize::from(depth);
                let i = usize::from(n).wrapping_sub(1);
                match action {
                    0 if i < d => { model.insert(i, Some(price)); model.truncate(d); }
                    1 | 5 if i < d => model[i] = Some(price),
                    2 if i < d => { model.remove(i); model.push(None); }
                    3 => model.iter_mut().for_each(|m| *m = None),
                    4 if n > 0 => {
                        let k = usize::from(n).min(d);
                        model.drain(..k);
                        model.resize(d, None);
                    }
                    6 => proptest::prop_assert_eq!(r, Applied::Anomaly),
                    _ => proptest::prop_assert_eq!(r, Applied::Unchanged),
                }
                let got: Vec<Option<i64>> = (1..=depth).map(|n| b.outright.bid.level(n).map(|l| l.price)).collect();
                proptest::prop_assert_eq!(&got, &model);
            }
        }
    }
}
