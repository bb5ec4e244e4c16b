//! `tickguard stat`: a read-only view of a running sidecar's shared memory —
//! writer health, per-feed and per-line counters, and every symbol sorted
//! worst verdict first. Like `AeronStat`, it only maps the file read-only.
//!
//! One [`Snapshot`] is read per frame and shown as text ([`Snapshot::text`],
//! cut to the terminal by [`fit`]) or as one JSON document
//! ([`Snapshot::json`]), after the filters of [`Filter`].

use crate::config::Protocol;
use crate::protocol::Rejected;
use crate::reader::{Health, Reader};
use crate::shm::counter;
use crate::state::FeedKind;
use crate::state::{FeedStatus, Record, Side};
use crate::symbol::Symbol;
use crate::verdict::Reasons;
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
/// suspect, invalid price, halted, closed, no quote.
fn severity(r: Reasons) -> u32 {
    [
        (Reasons::STALE, 64),
        (Reasons::STALE_AT_SOURCE, 32),
        (Reasons::SUSPECT, 16),
        (Reasons::INVALID_PRICE, 8),
        (Reasons::HALTED, 4),
        (Reasons::CLOSED, 2),
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
    /// `None`: a protocol code this build does not know.
    protocol: Option<Protocol>,
    status: FeedStatus,
    counters: [u64; counter::ALL],
    offset: i128,
    /// ok, then each reason of `Reasons::ORDER`.
    tally: [usize; 1 + Reasons::ORDER.len()],
}

impl FeedView {
    /// SQF: shown exactly as before exchange feeds existed (no feed flags,
    /// no extension counters, no halted or closed tallies: all zero).
    fn is_sqf(&self) -> bool {
        self.protocol == Some(Protocol::Sqf)
    }

    /// The feed's reject reasons, in counter order (SQF's for a protocol
    /// this build does not know).
    fn reject_reasons(&self) -> impl Iterator<Item = crate::protocol::Rejected> {
        crate::protocol::reasons(self.reasons_protocol())
    }

    /// The protocol whose reject reasons the feed's counters index (SQF's
    /// for a protocol this build does not know).
    fn reasons_protocol(&self) -> Protocol {
        self.protocol.unwrap_or(Protocol::Sqf)
    }

    /// Verdict labels shown for this feed, in report order with `ok` first.
    fn verdicts(&self) -> &'static [&'static str] {
        let all = &crate::metrics::VERDICTS;
        if self.is_sqf() {
            &all[..all.len() - 2]
        } else {
            all
        }
    }

    /// The set flags' names, comma separated ("-" for none).
    fn flags(&self) -> String {
        let s = self.status;
        let on: Vec<&str> = [
            (s.suspect, "suspect"),
            (s.closed, "closed"),
            (s.joined, "joined"),
            (s.orders_refused, "orders_refused"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, n)| *n)
        .collect();
        if on.is_empty() {
            "-".into()
        } else {
            on.join(",")
        }
    }

    /// The session from the extension counters.
    fn session(&self) -> String {
        counter::session(self.c(counter::SESSION_LO), self.c(counter::SESSION_HI))
    }

    fn c(&self, id: usize) -> u64 {
        self.counters.get(id).copied().unwrap_or(0)
    }

    /// Duplicates that came twice on the same line.
    fn same_line_duplicates(&self) -> u64 {
        self.c(counter::DUPLICATES)
            .saturating_sub(self.c(counter::LINE_COPIES))
    }

    /// (since ns, packets, top reason in the feed's protocol) while every
    /// packet is rejected.
    fn all_rejected(&self) -> Option<(u64, u64, Option<Rejected>)> {
        let since = self.c(counter::ALL_REJECTED_SINCE);
        let reason = (self.c(counter::ALL_REJECTED_REASON) as usize)
            .checked_sub(1)
            .and_then(|i| Rejected::from_index(self.reasons_protocol(), i));
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
    /// The feed's status at the read (liveness and source time count with the slot's).
    status: FeedStatus,
    /// The symbol counts its own lost ticks and duplicates (SQF); an
    /// exchange stream counts them per feed only.
    own_counts: bool,
}

impl Row {
    /// The symbol's (lost ticks, duplicates), `None` where the feed counts
    /// them only for its whole stream.
    fn counts(&self) -> Option<(u64, u64)> {
        let seq = &self.record.state.seq;
        self.own_counts.then_some((seq.ticks_lost, seq.duplicates))
    }

    /// Last sign of life, the symbol's or its feed's; 0 none.
    fn last_alive(&self) -> u64 {
        self.record.state.last_alive.max(self.status.last_alive)
    }

    /// Source age at `now` (ns, on the provider's clock through the offset):
    /// the later of the symbol's source time and the feed's watermark.
    fn source_age(&self, now: u64) -> Option<i128> {
        let source = self
            .record
            .state
            .price
            .map(|p| p.source_time)?
            .max(self.status.source_watermark);
        Some(now as i128 - source as i128 - self.offset)
    }
}

/// A side as `stat` shows it: an f64 price without size as before
/// (`{:.6}`); an exact price otherwise, with its size when known: bid
/// `size×price`, ask `price×size`.
fn side_text(side: Option<Side>, bid: bool) -> String {
    let Some(s) = side else {
        return "-".into();
    };
    let price = match s.price {
        crate::state::Price::F64(v) => format!("{v:.6}"),
        exact => exact.to_string(),
    };
    match (s.size, bid) {
        (0, _) => price,
        (n, true) => format!("{n}×{price}"),
        (n, false) => format!("{price}×{n}"),
    }
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
                protocol: Protocol::ALL.into_iter().find(|p| p.as_str() == f.protocol),
                status: reader.feed_status(id).unwrap_or_default(),
                counters: [0; counter::ALL],
                offset: reader.offset(id).unwrap_or(0),
                tally: [0; 1 + Reasons::ORDER.len()],
            };
            for (k, v) in view.counters.iter_mut().enumerate() {
                *v = reader.counter(id, k).unwrap_or(0);
            }
            for r in records.iter().filter(|r| r.feed == id) {
                let Some(symbol) = r.symbol else { continue };
                let reasons = if healthy {
                    crate::state::verdict(r, &view.status, view.offset, now)
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
                    status: view.status,
                    own_counts: view.is_sqf(),
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
            if f.is_sqf() {
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
            } else {
                // A stream's duplicates include every second-line copy,
                // shown apart; snapshots and resets are SQF's.
                let _ = write!(
                    s,
                    "\nfeed {} ({})  packets {} (A {}, B {})  messages {}  rejected {}  ticks lost {}  duplicates {} ({} line copies)  heartbeats {}  symbols refused (table full) {}",
                    f.name,
                    f.protocol.map_or("unknown", |p| p.as_str()),
                    c(counter::PACKETS),
                    c(counter::LINE_PACKETS),
                    c(counter::LINE_PACKETS + 1),
                    c(counter::MESSAGES),
                    c(counter::REJECTED),
                    c(counter::TICKS_LOST),
                    c(counter::DUPLICATES),
                    c(counter::LINE_COPIES),
                    c(counter::HEARTBEATS),
                    c(counter::TABLE_FULL),
                );
            }
            if let Some((since, packets, reason)) = f.all_rejected() {
                let _ = write!(
                    s,
                    "  EVERY PACKET REJECTED for {:.1} s: {packets} in a row, mostly {}{}",
                    now.saturating_sub(since) as f64 / 1e9,
                    reason.map_or("?", |r| r.as_str()),
                    reason.map_or("", |r| r.hint()),
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
            if !f.is_sqf() {
                let _ = writeln!(
                    s,
                    "  protocol {}  flags {}  next {}  held {}  gaps open {}  recovered {}  requests {}  deferred {}  gaps expired {}  line mismatches {}  session {}",
                    f.protocol.map_or("unknown", |p| p.as_str()),
                    f.flags(),
                    c(counter::NEXT),
                    c(counter::HELD),
                    c(counter::GAPS_OPEN),
                    c(counter::RECOVERED),
                    c(counter::REQUESTS_SENT),
                    c(counter::REQUESTS_DEFERRED),
                    c(counter::GAPS_EXPIRED),
                    c(counter::LINE_MISMATCHES),
                    match f.session() {
                        s if s.is_empty() => "-".into(),
                        s => s,
                    },
                );
            }
            let rejected: Vec<String> = f
                .reject_reasons()
                .filter_map(|r| {
                    let n = c(counter::REJECTED_BY_REASON + r.index());
                    (n > 0).then(|| format!("{} {n}", r.as_str()))
                })
                .collect();
            if !rejected.is_empty() {
                let _ = writeln!(s, "  rejected by reason: {}", rejected.join(", "));
            }
            let tally: Vec<String> = f
                .verdicts()
                .iter()
                .zip(f.tally)
                .map(|(v, n)| format!("{v} {n}"))
                .collect();
            let _ = writeln!(s, "  symbols: {}", tally.join("  "));
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
                // SQF's message kinds and resets: null on an exchange feed.
                let sqf_only = |k| f.is_sqf().then(|| c(k));
                let rejected_by_reason: serde_json::Map<String, Value> = f
                    .reject_reasons()
                    .map(|r| {
                        (
                            r.as_str().to_string(),
                            json!(c(counter::REJECTED_BY_REASON + r.index())),
                        )
                    })
                    .collect();
                let verdicts: serde_json::Map<String, Value> = f
                    .verdicts()
                    .iter()
                    .zip(f.tally)
                    .map(|(v, n)| (v.to_string(), json!(n)))
                    .collect();
                let mut doc = json!({
                    "name": f.name,
                    "kind": f.is_sqf().then_some(if f.kind == FeedKind::Full { "full" } else { "delta" }),
                    "protocol": f.protocol.map(|p| p.as_str()),
                    "flags": {
                        "suspect": f.status.suspect,
                        "closed": f.status.closed,
                        "joined": f.status.joined,
                        "orders_refused": f.status.orders_refused,
                    },
                    "last_alive_ns": (f.status.last_alive != 0).then_some(f.status.last_alive),
                    "source_watermark_ns": (f.status.source_watermark != 0).then_some(f.status.source_watermark),
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
                    "quotes": sqf_only(counter::QUOTES),
                    "snapshots": sqf_only(counter::SNAPSHOTS),
                    "heartbeats": c(counter::HEARTBEATS),
                    "unknown_messages": sqf_only(counter::UNKNOWN),
                    "ticks_lost": c(counter::TICKS_LOST),
                    "duplicates": c(counter::DUPLICATES),
                    "same_line_duplicates": f.same_line_duplicates(),
                    "line_copies": c(counter::LINE_COPIES),
                    "resets": sqf_only(counter::RESETS),
                    // SQF counts the messages dropped, an exchange feed
                    // the symbols refused a slot (each once).
                    "table_full_drops": sqf_only(counter::TABLE_FULL),
                    "table_full_symbols": (!f.is_sqf()).then(|| c(counter::TABLE_FULL)),
                    "kernel_drops": c(counter::KERNEL_DROPS),
                    "kernel_drops_by_line": by_line(counter::LINE_KERNEL_DROPS),
                    "rcvbuf_bytes_by_line": by_line(counter::LINE_RCVBUF),
                    "clock_offset_ns": f.offset as i64,
                    "symbols": verdicts,
                });
                if !f.is_sqf() {
                    let mut ext: serde_json::Map<String, Value> = counter::EXT_NAMES
                        .iter()
                        .map(|(id, name)| (name.to_string(), json!(c(*id))))
                        .collect();
                    ext.insert("session".into(), json!(f.session()));
                    doc["exchange"] = Value::Object(ext);
                }
                doc
            })
            .collect();
        let symbols: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                let st = &r.record.state;
                let (bid, ask) = (r.record.bid, r.record.ask);
                let size = |s: Option<Side>| s.map(|s| s.size).filter(|&n| n != 0);
                json!({
                    "feed": r.feed,
                    "symbol": r.symbol.to_string(),
                    "ok": r.reasons.is_ok(),
                    "reasons": r.reasons.names().collect::<Vec<_>>(),
                    "bid": bid.map(|s| s.price.as_f64()),
                    "ask": ask.map(|s| s.price.as_f64()),
                    "bid_exact": bid.map(|s| s.price.to_string()),
                    "ask_exact": ask.map(|s| s.price.to_string()),
                    "bid_size": size(bid),
                    "ask_size": size(ask),
                    "last_seq": st.seq.last_seq,
                    "ticks_lost": r.counts().map(|c| c.0),
                    "duplicates": r.counts().map(|c| c.1),
                    "silence_ns": (r.last_alive() != 0).then(|| now.saturating_sub(r.last_alive())),
                    "source_age_ns": r.source_age(now).map(|a| a as i64),
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
    let (bid, ask) = (
        side_text(r.record.bid, true),
        side_text(r.record.ask, false),
    );
    let age = r.source_age(now).map_or("-".into(), ms);
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
        r.counts().map_or("-".into(), |c| c.0.to_string()),
        r.counts().map_or("-".into(), |c| c.1.to_string()),
        if r.last_alive() == 0 {
            "-".into()
        } else {
            ms(now as i128 - r.last_alive() as i128)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::sqf::rules::{self, Price as SqfPrice};
    use crate::shm::{FeedInfo, Publication};
    use crate::state::{FeedStatus, Level, StateTable, Top};
    use crate::verdict::Thresholds;
    use std::sync::Arc;

    const NOW: u64 = 1_767_603_600_000_000_000;
    const S: u64 = 1_000_000_000;

    /// A publication with an SQF feed and an ITCH feed: decimal prices with
    /// sizes, one halted symbol, the feed closed, suspect and joined, some
    /// extension counters. Returns the publication (kept alive) and its path.
    fn exchange_publication(dir: &std::path::Path) -> (Arc<Publication>, String) {
        let path = dir.join("tickguard");
        let info = |name: &str, protocol| FeedInfo {
            name: name.into(),
            kind: FeedKind::Delta,
            lines: vec!["239.1.1.1:30001".parse().unwrap()],
            protocol,
        };
        let feeds = [info("lp1", Protocol::Sqf), info("nasdaq", Protocol::Itch50)];
        let p = Arc::new(Publication::create(&path, 0o600, 16, &feeds, NOW, 1_000_000).unwrap());
        let mut t = StateTable::shared(p.clone());
        let th = Thresholds {
            stale_ns: 30 * S,
            source_ns: 30 * S,
        };
        let sym = |s| Symbol::parse(s).unwrap();
        let id = t.insert(0, sym("EURUSD"), th).unwrap();
        let px = SqfPrice {
            bid: 1.085,
            ask: 1.0851,
            source_time: NOW,
        };
        t.slots()[id as usize].update(|s| rules::snapshot(s, 1, px, NOW));
        let top = Top {
            bid: Some(Level {
                price: 1_234_500,
                size: 300,
            }),
            ask: Some(Level {
                price: 1_235_000,
                size: 100,
            }),
            exponent: -4,
            last_seq: 9,
            ..Top::default()
        };
        let id = t.insert(1, sym("AAPL"), th).unwrap();
        t.slots()[id as usize].write_top(&top);
        let id = t.insert(1, sym("HALTD"), th).unwrap();
        t.slots()[id as usize].write_top(&Top {
            halted: true,
            ask: None,
            ..top
        });
        t.set_feed_status(
            1,
            &FeedStatus {
                suspect: true,
                closed: true,
                joined: true,
                orders_refused: true,
                last_alive: NOW,
                source_watermark: NOW,
            },
        );
        p.write_counters(|| {
            p.set_counter(1, counter::NEXT, 101);
            p.set_counter(1, counter::HELD, 3);
            p.set_counter(1, counter::GAPS_OPEN, 1);
            p.set_counter(1, counter::LINE_MISMATCHES, 2);
            p.set_counter(1, counter::DUPLICATES, 7);
            p.set_counter(1, counter::LINE_COPIES, 5);
            p.set_counter(1, counter::REJECTED, 1);
            let bad_stock =
                crate::protocol::Rejected::from(crate::protocol::itch50::Reject::BadStock);
            p.set_counter(1, counter::REJECTED_BY_REASON + bad_stock.index(), 1);
            // Every packet rejected, mostly too short for MoldUDP64 (the
            // first ITCH reason, whose index is SQF's `short` too).
            let short = crate::protocol::Rejected::from(crate::protocol::itch50::Reject::Short);
            p.set_counter(1, counter::ALL_REJECTED_SINCE, NOW - 2_000_000_000);
            p.set_counter(1, counter::ALL_REJECTED_PACKETS, 40);
            p.set_counter(1, counter::ALL_REJECTED_REASON, short.index() as u64 + 1);
            p.set_counter(1, counter::SESSION_LO, u64::from_le_bytes(*b"000000AB"));
            p.set_counter(
                1,
                counter::SESSION_HI,
                u64::from_le_bytes(*b"CD\0\0\0\0\0\0"),
            );
        });
        p.ready();
        p.heartbeat(NOW);
        let shown = path.display().to_string();
        (p, shown)
    }

    /// An exchange feed shows its flags, extension counters, halted and
    /// closed tallies and sized exact prices; the SQF feed beside it shows
    /// none of that, in text and in JSON.
    #[test]
    fn stat_shows_exchange_feeds_and_leaves_sqf_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let (_p, path) = exchange_publication(dir.path());
        let reader = Reader::open(&path);
        let at = NOW + 50_000_000;
        let snap = Snapshot::read(&reader, &path, at, &Filter::default()).unwrap();
        let text = snap.text().full();
        let block = |name: &str| -> String {
            text.split("\nfeed ")
                .find(|b| b.starts_with(name))
                .unwrap_or_else(|| panic!("no block {name}: {text}"))
                .lines()
                .take_while(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join("\n")
        };
        let lp1 = block("lp1");
        assert!(
            !lp1.contains("protocol") && !lp1.contains("halted"),
            "{lp1}"
        );
        assert!(lp1.ends_with("suspect 0  invalid_price 0"), "{lp1}");
        let nasdaq = block("nasdaq");
        assert!(
            nasdaq.starts_with("nasdaq (itch50)")
                && nasdaq.contains("duplicates 7 (5 line copies)")
                && !nasdaq.contains("same line"),
            "{nasdaq}"
        );
        assert!(
            nasdaq.contains("rejected by reason: bad_stock 1"),
            "ITCH's reasons by their names: {nasdaq}"
        );
        assert!(
            nasdaq.contains("40 in a row, mostly short (not MoldUDP64?)"),
            "an ITCH feed's reason and hint, not SQF's: {nasdaq}"
        );
        assert!(
            nasdaq.contains("protocol itch50  flags suspect,closed,joined,orders_refused  next 101  held 3  gaps open 1  recovered 0  requests 0  deferred 0  gaps expired 0  line mismatches 2  session 000000ABCD"),
            "{nasdaq}"
        );
        assert!(
            nasdaq.ends_with("suspect 2  invalid_price 0  halted 1  closed 2"),
            "{nasdaq}"
        );
        let row = |s: &str| text.lines().find(|l| l.contains(s)).unwrap().to_string();
        let aapl = row("AAPL");
        assert!(
            aapl.contains("suspect,closed")
                && aapl.contains("300×123.45")
                && aapl.contains("123.5×100"),
            "{aapl}"
        );
        assert!(row("HALTD").contains("suspect,halted,closed"), "{text}");
        assert!(row("EURUSD").contains("1.085000"), "{text}");

        let doc = snap.json();
        let feeds = doc["feeds"].as_array().unwrap();
        assert_eq!(feeds[0]["protocol"], "sqf");
        assert_eq!(
            (&feeds[0]["kind"], &feeds[1]["kind"]),
            (&json!("delta"), &json!(null))
        );
        assert!(feeds[0]["quotes"].is_u64() && feeds[1]["quotes"].is_null());
        assert_eq!(feeds[0].get("exchange"), None);
        assert_eq!(feeds[0]["symbols"].get("halted"), None);
        assert_eq!(feeds[1]["flags"]["closed"], true);
        assert_eq!(feeds[1]["exchange"]["gaps_open"], 1);
        assert_eq!(feeds[1]["rejected_by_reason"]["bad_stock"], 1);
        assert_eq!(feeds[1]["all_rejected"]["reason"], "short");
        assert_eq!(feeds[1]["line_copies"], 5);
        assert_eq!(feeds[1]["same_line_duplicates"], 2);
        assert_eq!(feeds[1]["all_rejected"]["packets"], 40);
        assert_eq!(feeds[1]["exchange"]["session"], "000000ABCD");
        assert_eq!(feeds[1]["symbols"]["closed"], 2);
        assert_eq!(feeds[1]["symbols"]["halted"], 1);
        let symbol = |name: &str| {
            doc["symbols"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["symbol"] == name)
                .unwrap()
        };
        let sym = symbol("AAPL");
        assert_eq!(sym["bid_exact"], "123.45");
        assert_eq!(sym["bid_size"], 300);
        assert_eq!(sym["ask"], 123.5);
        assert_eq!(sym["silence_ns"], at - NOW, "the feed's liveness");
        // Lost ticks and duplicates are the stream's, not the symbol's.
        assert_eq!(
            (&sym["ticks_lost"], &sym["duplicates"]),
            (&json!(null), &json!(null))
        );
        let sqf = symbol("EURUSD");
        assert!(
            sqf["ticks_lost"].is_u64() && sqf["duplicates"].is_u64(),
            "{sqf}"
        );
        // Last seq 9, then no lost or dups cells of its own.
        let cells = format!("{:>10} {:>7} {:>8}", 9, "-", "-");
        assert!(row("AAPL").contains(&cells), "{}", row("AAPL"));
    }
}
