//! `tickguard stat`: a read-only view of a running sidecar's shared memory —
//! writer health, per-feed and per-line counters, and every symbol sorted
//! worst verdict first. Like `AeronStat`, it only maps the file read-only.
//!
//! One [`Snapshot`] is read per frame and shown as text ([`Snapshot::text`],
//! cut to the terminal by [`fit`]) or as one JSON document
//! ([`Snapshot::json`]), after the filters of [`Filter`].

use crate::protocol::sqf::rules::FeedKind;
use crate::protocol::sqf::Reject;
use crate::reader::{Health, Reader};
use crate::shm::counter;
use crate::state::Record;
use crate::symbol::Symbol;
use crate::verdict::{evaluate, Reasons};
use serde_json::{json, Value};
use std::fmt::Write;

/// Which feeds and symbols a snapshot shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only this feed (its block and its symbols).
    pub feed: Option<String>,
    /// Only symbols whose verdict is not `ok`.
    pub not_ok: bool,
    /// Only the N worst symbols (after the other filters).
    pub top: Option<usize>,
}

/// A terminal's size, in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    /// Lines.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
}

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

/// The writer's header fields.
#[derive(Debug, Clone, Copy)]
struct Writer {
    pid: u64,
    heartbeat_ns: u64,
    start_ns: u64,
    worst_cycle_ns: u64,
    datagrams: u64,
}

/// One feed: its counters as read, and its symbols by verdict.
#[derive(Debug, Clone)]
struct FeedView {
    name: String,
    kind: FeedKind,
    counters: [u64; counter::ALL],
    offset: i128,
    /// ok, then each reason of `Reasons::ORDER`.
    tally: [usize; 6],
}

impl FeedView {
    fn c(&self, id: usize) -> u64 {
        self.counters.get(id).copied().unwrap_or(0)
    }

    /// Duplicates that came twice on the same line.
    fn same_line_duplicates(&self) -> u64 {
        self.c(counter::DUPLICATES)
            .saturating_sub(self.c(counter::LINE_COPIES))
    }

    /// (since ns, packets, top reason) while every packet is rejected.
    fn all_rejected(&self) -> Option<(u64, u64, Option<Reject>)> {
        let since = self.c(counter::ALL_REJECTED_SINCE);
        let reason = (self.c(counter::ALL_REJECTED_REASON) as usize)
            .checked_sub(1)
            .and_then(|i| Reject::ALL.get(i).copied());
        (since != 0).then(|| (since, self.c(counter::ALL_REJECTED_PACKETS), reason))
    }
}

/// One symbol row.
#[derive(Debug, Clone)]
struct Row {
    feed: String,
    symbol: Symbol,
    reasons: Reasons,
    record: Record,
    offset: i128,
}

/// One read of the publication at local time `now`, filtered.
#[derive(Debug, Clone)]
pub struct Snapshot {
    path: String,
    now: u64,
    health: Health,
    writer: Option<Writer>,
    feeds: Vec<FeedView>,
    /// Worst first.
    rows: Vec<Row>,
    /// Symbols that passed `feed` and `not_ok` but not `top`.
    left_out: usize,
}

impl Snapshot {
    /// Reads `reader` at local time `now` (ns since the Unix epoch). A
    /// `filter.feed` the publication does not have is an error naming the
    /// feeds it has.
    pub fn read(
        reader: &Reader,
        path: &str,
        now: u64,
        filter: &Filter,
    ) -> Result<Snapshot, String> {
        let health = reader.health(now);
        let mut snap = Snapshot {
            path: path.to_string(),
            now,
            health: health.clone(),
            writer: None,
            feeds: Vec::new(),
            rows: Vec::new(),
            left_out: 0,
        };
        let Some(pid) = reader.writer_pid() else {
            return Ok(snap);
        };
        let (start_ns, worst_cycle_ns, datagrams) = reader.receiver().unwrap_or((0, 0, 0));
        snap.writer = Some(Writer {
            pid,
            heartbeat_ns: reader.heartbeat_ns().unwrap_or(0),
            start_ns,
            worst_cycle_ns,
            datagrams,
        });
        let feeds = reader.feeds();
        if let Some(name) = &filter.feed {
            if !feeds.iter().any(|f| &f.name == name) {
                let known: Vec<_> = feeds.iter().map(|f| f.name.as_str()).collect();
                return Err(format!(
                    "--feed: no feed '{name}' in {path} (feeds: {})",
                    known.join(", ")
                ));
            }
        }
        let records = reader.records();
        let healthy = health.is_ok();
        for (id, f) in feeds.iter().enumerate() {
            if filter.feed.as_ref().is_some_and(|n| n != &f.name) {
                continue;
            }
            let id = id as u16;
            let mut view = FeedView {
                name: f.name.clone(),
                kind: f.kind,
                counters: [0; counter::ALL],
                offset: reader.offset(id).unwrap_or(0),
                tally: [0; 6],
            };
            for (k, v) in view.counters.iter_mut().enumerate() {
                *v = reader.counter(id, k).unwrap_or(0);
            }
            for r in records.iter().filter(|r| r.feed == id) {
                let Some(symbol) = r.symbol else { continue };
                let reasons = if healthy {
                    evaluate(Some(&r.state), r.thresholds, view.offset, now)
                } else {
                    Reasons::STALE
                };
                if reasons.is_ok() {
                    view.tally[0] += 1;
                }
                for (i, (bit, _)) in Reasons::ORDER.iter().enumerate() {
                    if reasons.contains(*bit) {
                        view.tally[i + 1] += 1;
                    }
                }
                if filter.not_ok && reasons.is_ok() {
                    continue;
                }
                snap.rows.push(Row {
                    feed: f.name.clone(),
                    symbol,
                    reasons,
                    record: *r,
                    offset: view.offset,
                });
            }
            snap.feeds.push(view);
        }
        snap.rows.sort_by_cached_key(|r| {
            (
                std::cmp::Reverse(severity(r.reasons)),
                r.feed.clone(),
                r.symbol.to_string(),
            )
        });
        if let Some(n) = filter.top {
            snap.left_out = snap.rows.len().saturating_sub(n);
            snap.rows.truncate(n);
        }
        Ok(snap)
    }

    /// The text view: a header (writer, then each feed), then one row per
    /// symbol. [`fit`] cuts it to a terminal.
    pub fn text(&self) -> Frame {
        let now = self.now;
        let mut s = String::new();
        let _ = writeln!(s, "tickguard stat  {}", self.path);
        let Some(w) = self.writer else {
            let _ = writeln!(s, "{}: every check answers stale", self.health);
            return Frame {
                header: s,
                rows: Vec::new(),
                left_out: 0,
            };
        };
        let _ = writeln!(
            s,
            "writer pid {}  {}  heartbeat {} ago  up {:.1} s  datagrams {}  worst cycle {:.1} µs",
            w.pid,
            self.health,
            ms(now as i128 - w.heartbeat_ns as i128),
            now.saturating_sub(w.start_ns) as f64 / 1e9,
            w.datagrams,
            w.worst_cycle_ns as f64 / 1e3
        );
        for f in &self.feeds {
            let c = |k| f.c(k);
            let _ = write!(
                s,
                "\nfeed {} ({})  packets {} (A {}, B {})  messages {}  rejected {}  ticks lost {}  duplicates {} same line, {} line copies  heartbeats {}  snapshots {}  resets {}  unknown {}  table full {}",
                f.name,
                if f.kind == FeedKind::Full { "full" } else { "delta" },
                c(counter::PACKETS),
                c(counter::LINE_PACKETS),
                c(counter::LINE_PACKETS + 1),
                c(counter::MESSAGES),
                c(counter::REJECTED),
                c(counter::TICKS_LOST),
                f.same_line_duplicates(),
                c(counter::LINE_COPIES),
                c(counter::HEARTBEATS),
                c(counter::SNAPSHOTS),
                c(counter::RESETS),
                c(counter::UNKNOWN),
                c(counter::TABLE_FULL),
            );
            if let Some((since, packets, reason)) = f.all_rejected() {
                let _ = write!(
                    s,
                    "  EVERY PACKET REJECTED for {:.1} s: {packets} in a row, mostly {}{}",
                    now.saturating_sub(since) as f64 / 1e9,
                    reason.map_or("?", |r| r.as_str()),
                    reason.map_or("", |r| crate::protocol::Rejected::Sqf(r).hint()),
                );
            }
            let _ = writeln!(
                s,
                "\n  kernel drops {} (A {}, B {})  rcvbuf A {} B {} bytes  clock offset {}",
                c(counter::KERNEL_DROPS),
                c(counter::LINE_KERNEL_DROPS),
                c(counter::LINE_KERNEL_DROPS + 1),
                c(counter::LINE_RCVBUF),
                c(counter::LINE_RCVBUF + 1),
                ms(f.offset),
            );
            let rejected: Vec<String> = Reject::ALL
                .iter()
                .filter_map(|r| {
                    let n = c(counter::REJECTED_BY_REASON + r.index());
                    (n > 0).then(|| format!("{} {n}", r.as_str()))
                })
                .collect();
            if !rejected.is_empty() {
                let _ = writeln!(s, "  rejected by reason: {}", rejected.join(", "));
            }
            let t = f.tally;
            let _ = writeln!(
                s,
                "  symbols: ok {}  no_quote {}  stale {}  stale_at_source {}  suspect {}  invalid_price {}",
                t[0], t[1], t[2], t[3], t[4], t[5]
            );
        }
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
        let rows = self.rows.iter().map(|r| row_text(r, now)).collect();
        Frame {
            header: s,
            rows,
            left_out: self.left_out,
        }
    }

    /// The snapshot as one JSON document: `health`, `writer` (null without
    /// a publication), `feeds` with their counters, `symbols` worst first.
    pub fn json(&self) -> Value {
        let now = self.now;
        let writer = self.writer.map(|w| {
            json!({
                "pid": w.pid,
                "heartbeat_age_ns": now.saturating_sub(w.heartbeat_ns),
                "up_ns": now.saturating_sub(w.start_ns),
                "datagrams": w.datagrams,
                "worst_cycle_ns": w.worst_cycle_ns,
            })
        });
        let feeds: Vec<Value> = self
            .feeds
            .iter()
            .map(|f| {
                let c = |k| f.c(k);
                let by_line = |k: usize| json!([c(k), c(k + 1)]);
                let rejected_by_reason: serde_json::Map<String, Value> = Reject::ALL
                    .iter()
                    .map(|r| {
                        (
                            r.as_str().to_string(),
                            json!(c(counter::REJECTED_BY_REASON + r.index())),
                        )
                    })
                    .collect();
                let verdicts: serde_json::Map<String, Value> = crate::metrics::VERDICTS
                    .iter()
                    .zip(f.tally)
                    .map(|(v, n)| (v.to_string(), json!(n)))
                    .collect();
                json!({
                    "name": f.name,
                    "kind": if f.kind == FeedKind::Full { "full" } else { "delta" },
                    "packets": c(counter::PACKETS),
                    "packets_by_line": by_line(counter::LINE_PACKETS),
                    "messages": c(counter::MESSAGES),
                    "messages_by_line": by_line(counter::LINE_MESSAGES),
                    "rejected": c(counter::REJECTED),
                    "rejected_by_line": by_line(counter::LINE_REJECTED),
                    "rejected_by_reason": rejected_by_reason,
                    "all_rejected": f.all_rejected().map(|(since, packets, reason)| json!({
                        "since_ns": since,
                        "packets": packets,
                        "reason": reason.map(|r| r.as_str()),
                    })),
                    "quotes": c(counter::QUOTES),
                    "snapshots": c(counter::SNAPSHOTS),
                    "heartbeats": c(counter::HEARTBEATS),
                    "unknown_messages": c(counter::UNKNOWN),
                    "ticks_lost": c(counter::TICKS_LOST),
                    "duplicates": c(counter::DUPLICATES),
                    "same_line_duplicates": f.same_line_duplicates(),
                    "line_copies": c(counter::LINE_COPIES),
                    "resets": c(counter::RESETS),
                    "table_full_drops": c(counter::TABLE_FULL),
                    "kernel_drops": c(counter::KERNEL_DROPS),
                    "kernel_drops_by_line": by_line(counter::LINE_KERNEL_DROPS),
                    "rcvbuf_bytes_by_line": by_line(counter::LINE_RCVBUF),
                    "clock_offset_ns": f.offset as i64,
                    "symbols": verdicts,
                })
            })
            .collect();
        let symbols: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                let st = &r.record.state;
                json!({
                    "feed": r.feed,
                    "symbol": r.symbol.to_string(),
                    "ok": r.reasons.is_ok(),
                    "reasons": r.reasons.names().collect::<Vec<_>>(),
                    "bid": st.price.map(|p| p.bid),
                    "ask": st.price.map(|p| p.ask),
                    "last_seq": st.seq.last_seq,
                    "ticks_lost": st.seq.ticks_lost,
                    "duplicates": st.seq.duplicates,
                    "silence_ns": (st.last_alive != 0).then(|| now.saturating_sub(st.last_alive)),
                    "source_age_ns": st.price.map(|p| (now as i128 - p.source_time as i128 - r.offset) as i64),
                })
            })
            .collect();
        json!({
            "time_ns": now,
            "shm": self.path,
            "health": self.health.name(),
            "health_detail": self.health.to_string(),
            "writer": writer,
            "feeds": feeds,
            "symbols": symbols,
            "symbols_left_out": self.left_out,
        })
    }
}

fn row_text(r: &Row, now: u64) -> String {
    let st = &r.record.state;
    let (bid, ask, age) = match st.price {
        Some(p) => (
            format!("{:.6}", p.bid),
            format!("{:.6}", p.ask),
            ms(now as i128 - p.source_time as i128 - r.offset),
        ),
        None => ("-".into(), "-".into(), "-".into()),
    };
    format!(
        "{:<10} {:<9} {:<28} {:>14} {:>14} {:>10} {:>7} {:>8} {:>11} {:>11}",
        r.feed,
        r.symbol.to_string(),
        if r.reasons.is_ok() {
            "ok".to_string()
        } else {
            r.reasons.names().collect::<Vec<_>>().join(",")
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
    )
}

/// A text frame: the header lines, then the symbol rows (worst first).
#[derive(Debug, Clone)]
pub struct Frame {
    /// Everything above the rows, newline-terminated lines.
    pub header: String,
    /// One line per symbol, no newline.
    pub rows: Vec<String>,
    /// Symbols already left out (by `--top`).
    pub left_out: usize,
}

impl Frame {
    /// The whole frame, every row.
    pub fn full(&self) -> String {
        let mut s = self.header.clone();
        for r in &self.rows {
            s.push_str(r);
            s.push('\n');
        }
        if self.left_out > 0 {
            let _ = writeln!(s, "... {} more symbols not shown", self.left_out);
        }
        s
    }
}

/// The frame cut to `size`: every line at most `cols` characters, at most
/// `rows` lines. The header stays (its end first cut if even it does not
/// fit); the worst symbols fill what is left but one line, which says how
/// many were left out.
pub fn fit(frame: &Frame, size: Size) -> String {
    let cut = |l: &str| -> String { l.chars().take(size.cols.max(1)).collect() };
    let rows = size.rows.max(2);
    let header: Vec<&str> = frame.header.lines().collect();
    let mut out = Vec::with_capacity(rows);
    let more = if header.len() + 1 > rows {
        out.extend(header[..rows - 1].iter().map(|l| cut(l)));
        format!(
            "... {} header lines and {} symbols not shown (a taller terminal, --feed, --top)",
            header.len() - (rows - 1),
            frame.rows.len() + frame.left_out
        )
    } else {
        out.extend(header.iter().map(|l| cut(l)));
        let room = rows - header.len();
        let all = frame.rows.len() + frame.left_out;
        let shown = if all <= room {
            frame.rows.len()
        } else {
            room - 1
        };
        out.extend(frame.rows[..shown].iter().map(|l| cut(l)));
        if shown < all {
            format!(
                "... {} more symbols not shown (a taller terminal, --feed, --not-ok, --top)",
                all - shown
            )
        } else {
            String::new()
        }
    };
    let mut s = out.join("\n");
    s.push('\n');
    if !more.is_empty() {
        s.push_str(&cut(&more));
        s.push('\n');
    }
    s
}

/// One snapshot of the publication at local time `now` (ns since the Unix
/// epoch), every feed and symbol, as text.
pub fn render(reader: &Reader, path: &str, now: u64) -> String {
    match Snapshot::read(reader, path, now, &Filter::default()) {
        Ok(s) => s.text().full(),
        Err(e) => e,
    }
}
