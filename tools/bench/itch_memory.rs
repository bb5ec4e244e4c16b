//! The `itch-memory` row: this process's peak resident memory at the end of
//! the `itch-binfile` replay, and the live orders the books then hold (the
//! books' dense window of order references is a fixed 16 MiB; orders older
//! than it sit in 24-byte slots of a table at most 70% full).

use crate::itch_binfile::{day, live_orders, replay, Args, MAX_MESSAGES};
use serde_json::{json, Value};
use tickguard::protocol::itch50::book::{Order, ORDER_WINDOW};

/// This process's peak resident set (getrusage `ru_maxrss`), bytes.
fn max_rss_bytes() -> u64 {
    // SAFETY: `rusage` is plain integers, for which all zeros is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `getrusage` only writes the struct it is given, which
    // outlives the call.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        return 0;
    }
    u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024
}

/// Runs the row.
pub fn run(a: &Args) -> anyhow::Result<Value> {
    a.check(MAX_MESSAGES)?;
    let (_dir, path, messages) = day(a)?;
    let before = max_rss_bytes();
    let (secs, feed) = replay(&path, false)?;
    let rss = max_rss_bytes();
    let orders = live_orders(&feed);
    Ok(json!({
        "row": "itch_memory",
        "messages": messages,
        "stocks": a.stocks,
        "replay_seconds": secs,
        "max_rss_bytes_before_replay": before,
        "max_rss_bytes": rss,
        "live_orders_at_end": orders,
        "order_window_bytes": ORDER_WINDOW * std::mem::size_of::<Option<Order>>(),
        "book_slot_bytes": 24,
        "book_bytes_per_live_order_min": 24.0 / 0.7,
        "book_bytes_per_live_order_max": 2.0 * 24.0 / 0.7,
        "max_rss_bytes_per_live_order": rss as f64 / orders.max(1) as f64,
    }))
}
