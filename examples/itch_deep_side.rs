//! What a deep book side costs a message: the worst case an injector (or a
//! venue's stray orders) can build against the books.
//!
//!     itch_deep_side [LEVELS]     # default 200,000
//!
//! Adds one bid order at each of LEVELS prices, each below all the others
//! (every add a new worst level), then deletes and adds again, 20,000
//! times, the only order of the deepest level (each time the level goes and
//! comes back). Prints ns per add while building, and per message in the
//! churn. With one sorted vector per side both were O(levels) moves; with
//! the side's best levels near and the rest in an ordered map, a logarithm.

use std::time::Instant;
use tickguard::protocol::itch50::book::{Books, Order};
use tickguard::protocol::itch50::message::Side;

fn main() {
    let levels: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000)
        .clamp(1, 1_000_000);
    let mut books = Books::with_capacity(1 << 20, 1);
    let bid = |price: u32| Order {
        book: 0,
        price,
        shares: 1,
        side: Side::Buy,
    };
    let top = 1_000_000;
    let t = Instant::now();
    for k in 0..levels {
        let _ = books.add(u64::from(k), bid(top - k));
    }
    let build = t.elapsed().as_nanos() as f64 / f64::from(levels);
    let rounds = 20_000u64;
    let t = Instant::now();
    for i in 0..rounds {
        let order = u64::from(levels - 1) + i;
        books.delete(order);
        let _ = books.add(order + 1, bid(top - (levels - 1)));
    }
    let churn = t.elapsed().as_nanos() as f64 / (2 * rounds) as f64;
    println!(
        "{levels} bid levels: {build:.1} ns an add while building, \
         {churn:.1} ns a message deleting and adding the deepest level"
    );
}
