//! The longest single insert into the order store's table while it grows
//! from room for 65,536 entries to millions, as old live orders pile up
//! beyond the ITCH order window during a day (wall time: a pause of the
//! receive thread):
//!
//! ```text
//! cargo build --release --example map_growth
//! target/release/examples/map_growth 6000000
//! ```
//!
//! Prints each insert that took over 1 ms, the longest, and the mean.
//! Values are 16 bytes, as an order's are.

use std::time::{Duration, Instant};
use tickguard::protocol::itch50::map::U64Map;

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(6_000_000);
    let mut m: U64Map<[u64; 2]> = U64Map::with_capacity(1 << 16, [0; 2]);
    let (mut worst, mut over) = (Duration::ZERO, 0u64);
    let mut key = 1u64;
    let start = Instant::now();
    for i in 0..n {
        key = key
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let t = Instant::now();
        m.insert(key >> 1, [i, i]);
        let took = t.elapsed();
        if took > Duration::from_millis(1) {
            over += 1;
            println!("insert {i}: {took:?}");
        }
        worst = worst.max(took);
    }
    let total = start.elapsed();
    assert_eq!(m.len() as u64, n);
    println!(
        "{n} inserts: longest {worst:?}, {over} over 1 ms, mean {:.1} ns",
        total.as_nanos() as f64 / n as f64
    );
}
