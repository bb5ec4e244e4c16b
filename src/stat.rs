//! `tickguard stat`: a read-only view of a running sidecar's shared memory —
//! writer health, per-feed and per-line counters, and every symbol sorted
//! worst verdict first. Like `AeronStat`, it only maps the file read-only.

use crate::reader::Reader;
use crate::rules::FeedKind;
use crate::shm::counter;
use crate::verdict::{evaluate, Reasons};
use std::fmt::Write;

/// How bad a verdict is, for sorting: silence first, then source age,
/// suspect, invalid price, no quote.
fn severity(r: Reasons) -> u32 {
    [
        (Reasons::STALE, 16),
        (Reasons::STALE_AT_SOURCE, 8),
        (Reasons::SUSPECT, 4),
        (Reasons::INVALID_PRICE, 2),
        (Reasons::NO_QUOTE, 1),
    ]
    .iter()
    .filter(|(bit, _)| r.contains(*bit))
    .map(|(_, w)| w)
    .sum()
}

fn ms(ns: i128) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

/// One snapshot of the publication at local time `now` (ns since the Unix epoch).
pub fn render(reader: &Reader, path: &str, now: u64) -> String {
    let mut s = String::new();
    let health = reader.health(now);
    let _ = writeln!(s, "tickguard stat  {path}");
    let Some(pid) = reader.writer_pid() else {
        let _ = writeln!(s, "{health}: every check answers stale");
        return s;
    };
    let beat = reader.heartbeat_ns().unwrap_or(0);
    let (start, worst, datagrams) = reader.receiver().unwrap_or((0, 0, 0));
    let _ = writeln!(
        s,
        "writer pid {pid}  {health}  heartbeat {} ago  up {:.1} s  datagrams {datagrams}  worst cycle {:.1} µs",
        ms(now as i128 - beat as i128),
        now.saturating_sub(start) as f64 / 1e9,
        worst as f64 / 1e3
    );
    let records = reader.records();
    let healthy = health.is_ok();
    let mut rows = Vec::new();
    for (id, f) in reader.feeds().iter().enumerate() {
        let id = id as u16;
        let c = |k: usize| reader.counter(id, k).unwrap_or(0);
        let offset = reader.offset(id).unwrap_or(0);
        let _ = writeln!(
            s,
            "\nfeed {} ({})  packets {} (A {}, B {})  messages {}  rejected {}  ticks lost {}  duplicates {}  heartbeats {}  snapshots {}  resets {}  unknown {}  table full {}",
            f.name,
            if f.kind == FeedKind::Full { "full" } else { "delta" },
            c(counter::PACKETS),
            c(counter::LINE_PACKETS),
            c(counter::LINE_PACKETS + 1),
            c(counter::MESSAGES),
            c(counter::REJECTED),
            c(counter::TICKS_LOST),
            c(counter::DUPLICATES),
            c(counter::HEARTBEATS),
            c(counter::SNAPSHOTS),
            c(counter::RESETS),
            c(counter::UNKNOWN),
            c(counter::TABLE_FULL),
        );
        let _ = writeln!(
            s,
            "  kernel drops {} (A {}, B {})  rcvbuf A {} B {} bytes  clock offset {}",
            c(counter::KERNEL_DROPS),
            c(counter::LINE_KERNEL_DROPS),
            c(counter::LINE_KERNEL_DROPS + 1),
            c(counter::LINE_RCVBUF),
            c(counter::LINE_RCVBUF + 1),
            ms(offset),
        );
        let rejected: Vec<String> = crate::wire::Reject::ALL
            .iter()
            .filter_map(|r| {
                let n = c(counter::REJECTED_BY_REASON + r.index());
                (n > 0).then(|| format!("{} {n}", r.as_str()))
            })
            .collect();
        if !rejected.is_empty() {
            let _ = writeln!(s, "  rejected by reason: {}", rejected.join(", "));
        }
        let mut tally = [0usize; 6];
        for r in records.iter().filter(|r| r.feed == id) {
            let Some(symbol) = r.symbol else { continue };
            let reasons = if healthy {
                evaluate(Some(&r.state), r.thresholds, offset, now)
            } else {
                Reasons::STALE
            };
            if reasons.is_ok() {
                tally[0] += 1;
            }
            for (i, (bit, _)) in Reasons::ORDER.iter().enumerate() {
                if reasons.contains(*bit) {
                    tally[i + 1] += 1;
                }
            }
            rows.push((
                severity(reasons),
                f.name.clone(),
                symbol,
                reasons,
                *r,
                offset,
            ));
        }
        let _ = writeln!(
            s,
            "  symbols: ok {}  no_quote {}  stale {}  stale_at_source {}  suspect {}  invalid_price {}",
            tally[0], tally[1], tally[2], tally[3], tally[4], tally[5]
        );
    }
    rows.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| a.1.cmp(&b.1))
            .then_with(|| a.2.to_string().cmp(&b.2.to_string()))
    });
    let _ = writeln!(
        s,
        "\n{:<10} {:<9} {:<28} {:>14} {:>14} {:>10} {:>7} {:>8} {:>11} {:>11}",
        "feed",
        "symbol",
        "verdict",
        "bid",
        "ask",
        "last seq",
        "lost",
        "dups",
        "silence",
        "source age"
    );
    for (_, feed, symbol, reasons, r, offset) in rows {
        let st = &r.state;
        let (bid, ask, age) = match st.price {
            Some(p) => (
                format!("{:.6}", p.bid),
                format!("{:.6}", p.ask),
                ms(now as i128 - p.source_time as i128 - offset),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let _ = writeln!(
            s,
            "{:<10} {:<9} {:<28} {:>14} {:>14} {:>10} {:>7} {:>8} {:>11} {:>11}",
            feed,
            symbol.to_string(),
            if reasons.is_ok() {
                "ok".to_string()
            } else {
                reasons.names().collect::<Vec<_>>().join(",")
            },
            bid,
            ask,
            st.seq.last_seq,
            st.seq.ticks_lost,
            st.seq.duplicates,
            if st.last_alive == 0 {
                "-".into()
            } else {
                ms(now as i128 - st.last_alive as i128)
            },
            age
        );
    }
    s
}
