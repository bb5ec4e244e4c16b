//! `tickguard stat`: a read-only view of a running sidecar's shared memory —
//! writer health, per-feed and per-line counters, and every symbol sorted
//! worst verdict first. Like `AeronStat`, it only maps the file read-only.
//!
//! One [`Snapshot`] is read per frame and shown as text ([`Snapshot::text`],
//! cut to the terminal by [`fit`]) or as one JSON document
//! ([`Snapshot::json`]), after the filters of [`Filter`].

use crate::reader::{Health, Reader};
use crate::shm::{counter, CounterKind, Descriptor, ZERO_IS_NONE};
use crate::state::FeedKind;
use crate::state::{FeedStatus, Record, Side};
use crate::verdict::Reasons;
use serde_json::{json, Value};
use std::fmt::Write;
use std::time::Duration;

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

/// The counters of the run of rejected packets, which `stat` shows as one
/// warning rather than one by one (every feed has them).
const ALL_REJECTED_IDS: [usize; 4] = [
    counter::ALL_REJECTED,
    counter::ALL_REJECTED_SINCE,
    counter::ALL_REJECTED_PACKETS,
    counter::ALL_REJECTED_REASON,
];

/// One counter as read: its descriptor, value and text.
#[derive(Debug, Clone)]
struct Sample {
    d: Descriptor,
    value: u64,
    text: String,
}

/// One name's counters: the feed-wide one, and those with an attribute.
#[derive(Debug, Clone, Default)]
struct Family<'a> {
    name: &'a str,
    main: Option<&'a Sample>,
    /// (key, [(value, sample)]), keys in first-seen order.
    by: Vec<(&'a str, Vec<&'a Sample>)>,
}

/// A histogram bucket's bound as text: `≤16 µs`, `more`.
fn bound_text(bound: u64) -> String {
    if bound == u64::MAX {
        "more".into()
    } else if bound >= 1_000_000 {
        format!("≤{} ms", bound as f64 / 1e6)
    } else {
        format!("≤{} µs", bound as f64 / 1e3)
    }
}

/// One feed: its counters as read, and its symbols by verdict.
#[derive(Debug, Clone)]
struct FeedView {
    name: String,
    kind: FeedKind,
    protocol: String,
    status: FeedStatus,
    /// Every counter its descriptors describe, in their order.
    samples: Vec<Sample>,
    /// The counters by id (one consistent copy).
    values: [u64; counter::ALL],
    /// What could be read: a writer killed in the middle of writing it
    /// leaves it unreadable for good, shown as unknown, never as zeros.
    read: Readable,
    /// Each slot counts its symbol's own lost ticks and duplicates.
    symbol_counts: bool,
    offset: i128,
    /// ok, then each reason of `Reasons::ORDER`.
    tally: [usize; 1 + Reasons::ORDER.len()],
}

impl FeedView {
    /// The counters shown one by one (not the flags, not the run of
    /// rejected packets), by name in first-seen order.
    fn families(&self) -> Vec<Family<'_>> {
        let mut out: Vec<Family<'_>> = Vec::new();
        for s in self
            .samples
            .iter()
            .filter(|s| s.d.kind != CounterKind::Flag && !ALL_REJECTED_IDS.contains(&s.d.id))
        {
            let i = match out.iter().position(|f| f.name == s.d.name) {
                Some(i) => i,
                None => {
                    out.push(Family {
                        name: &s.d.name,
                        ..Family::default()
                    });
                    out.len() - 1
                }
            };
            let f = &mut out[i];
            if s.d.key.is_empty() {
                f.main = Some(s);
            } else if let Some((_, v)) = f.by.iter_mut().find(|(k, _)| *k == s.d.key) {
                v.push(s);
            } else {
                f.by.push((&s.d.key, vec![s]));
            }
        }
        out
    }

    /// The flag descriptors' values: (name, set).
    fn flags(&self) -> Vec<(&str, bool)> {
        self.samples
            .iter()
            .filter(|s| s.d.kind == CounterKind::Flag)
            .map(|s| (s.d.name.as_str(), s.value != 0))
            .collect()
    }

    /// The set flags' names, comma separated ("-" for none); `None` for a
    /// feed without flags.
    fn flags_text(&self) -> Option<String> {
        let flags = self.flags();
        if flags.is_empty() {
            return None;
        }
        let on: Vec<&str> = flags.iter().filter(|f| f.1).map(|f| f.0).collect();
        Some(if on.is_empty() {
            "-".into()
        } else {
            on.join(",")
        })
    }

    fn c(&self, id: usize) -> u64 {
        self.values.get(id).copied().unwrap_or(0)
    }

    /// The descriptor of reject reason `index` (its value and note).
    fn reason(&self, index: u64) -> Option<&Descriptor> {
        self.samples
            .iter()
            .map(|s| &s.d)
            .find(|d| d.key == "reason" && d.param == index)
    }

    /// (since ns, packets, top reason's descriptor) while every packet is
    /// rejected.
    fn all_rejected(&self) -> Option<(u64, u64, Option<&Descriptor>)> {
        let since = self.c(counter::ALL_REJECTED_SINCE);
        let reason = self
            .c(counter::ALL_REJECTED_REASON)
            .checked_sub(1)
            .and_then(|i| self.reason(i));
        (since != 0).then(|| (since, self.c(counter::ALL_REJECTED_PACKETS), reason))
    }

    /// The counters as text items, one per family (attributes other than
    /// the line on lines of their own).
    fn items(&self) -> (Vec<String>, Vec<String>) {
        let mut items = Vec::new();
        let mut lines = Vec::new();
        for f in self.families() {
            let main = f.main.map(|s| match s.d.kind {
                CounterKind::Text if s.text.is_empty() => "-".to_string(),
                CounterKind::Text => s.text.clone(),
                CounterKind::Gauge if s.d.param == ZERO_IS_NONE && s.value == 0 => "-".to_string(),
                _ => s.value.to_string(),
            });
            let mut by_line = None;
            for (key, members) in &f.by {
                if *key == "line" {
                    let v: Vec<String> = members
                        .iter()
                        .map(|s| format!("{} {}", s.d.value, s.value))
                        .collect();
                    by_line = Some(v.join(", "));
                } else {
                    let shown: Vec<String> = members
                        .iter()
                        .filter(|s| s.value != 0)
                        .map(|s| format!("{} {}", s.d.value, s.value))
                        .collect();
                    if !shown.is_empty() {
                        lines.push(format!("{} by {key}: {}", f.name, shown.join(", ")));
                    }
                }
            }
            // A histogram's buckets share a name but carry no key.
            let buckets: Vec<&Sample> = self
                .samples
                .iter()
                .filter(|s| s.d.name == f.name && s.d.kind == CounterKind::Bucket)
                .collect();
            if !buckets.is_empty() {
                let shown: Vec<String> = buckets
                    .iter()
                    .filter(|s| s.value != 0)
                    .map(|s| format!("{} {}", bound_text(s.d.param), s.value))
                    .collect();
                if !shown.is_empty() {
                    lines.push(format!("{}: {}", f.name, shown.join(", ")));
                }
                continue;
            }
            match (main, by_line) {
                (Some(m), Some(l)) => items.push(format!("{} {m} ({l})", f.name)),
                (Some(m), None) => items.push(format!("{} {m}", f.name)),
                (None, Some(l)) => items.push(format!("{} ({l})", f.name)),
                (None, None) => {}
            }
        }
        (items, lines)
    }
}

/// Which of a feed's parts, each behind a seqlock of its own, were read.
#[derive(Debug, Clone, Copy)]
struct Readable {
    /// The counters (`values`, `samples` but the flags).
    counters: bool,
    /// The clock offset.
    offset: bool,
    /// The status (its flags, its times).
    status: bool,
}

/// What the text view shows for counters a writer left mid-write.
const UNREADABLE: &str = "counters unreadable (the writer stopped while writing them)";
/// What the text view says of a feed's counters in a publication in bad
/// state (a file cut under its mapping reads as zeros).
const UNREADABLE_CUT: &str = "counters unknown (the publication is in bad state: a file cut under its mapping reads as zeros)";

/// Width the counters of a feed are wrapped to in the text view.
const TEXT_WIDTH: usize = 118;

impl FeedView {
    /// The feed as JSON: its identity, flags and status, then every counter
    /// by name (`name`; with an attribute, `name_by_key` as an object of
    /// values; a histogram as `[{"le_ns", "count"}]`, `le_ns` null for the
    /// open bucket; text as a string, null when empty), the run of rejected
    /// packets, and its symbols by verdict.
    fn json(&self) -> Value {
        let mut doc = serde_json::Map::new();
        doc.insert("name".into(), json!(self.name));
        doc.insert("protocol".into(), json!(self.protocol));
        doc.insert(
            "kind".into(),
            json!(if self.kind == FeedKind::Full {
                "full"
            } else {
                "delta"
            }),
        );
        let flags: serde_json::Map<String, Value> = self
            .flags()
            .into_iter()
            .map(|(n, on)| (n.to_string(), json!(on)))
            .collect();
        doc.insert(
            "flags".into(),
            match self.read.status {
                true => Value::Object(flags),
                false => Value::Null,
            },
        );
        let st = &self.status;
        doc.insert(
            "last_alive_ns".into(),
            json!((st.last_alive != 0).then_some(st.last_alive)),
        );
        doc.insert(
            "source_watermark_ns".into(),
            json!((st.source_watermark != 0).then_some(st.source_watermark)),
        );
        let offset = self.read.offset.then(|| saturated(self.offset));
        doc.insert("clock_offset_ns".into(), json!(offset));
        doc.insert("counters_unreadable".into(), json!(!self.read.counters));
        for f in self.families().into_iter().filter(|_| self.read.counters) {
            let buckets: Vec<Value> = self
                .samples
                .iter()
                .filter(|s| s.d.name == f.name && s.d.kind == CounterKind::Bucket)
                .map(|s| json!({"le_ns": (s.d.param != u64::MAX).then_some(s.d.param), "count": s.value}))
                .collect();
            if !buckets.is_empty() {
                doc.insert(f.name.into(), Value::Array(buckets));
                continue;
            }
            if let Some(m) = f.main {
                let v = match m.d.kind {
                    CounterKind::Text => json!((!m.text.is_empty()).then_some(&m.text)),
                    CounterKind::Gauge if m.d.param == ZERO_IS_NONE && m.value == 0 => Value::Null,
                    _ => json!(m.value),
                };
                doc.insert(f.name.into(), v);
            }
            // A family with no feed-wide counter and one attribute (the
            // snapshot failures by class) is an object under its own name.
            let own = f.main.is_none() && f.by.len() == 1;
            for (key, members) in &f.by {
                let by: serde_json::Map<String, Value> = members
                    .iter()
                    .map(|s| (s.d.value.clone(), json!(s.value)))
                    .collect();
                let name = if own {
                    f.name.to_string()
                } else {
                    format!("{}_by_{key}", f.name)
                };
                doc.insert(name, Value::Object(by));
            }
        }
        let all_rejected = self.all_rejected().filter(|_| self.read.counters);
        doc.insert(
            "all_rejected".into(),
            json!(all_rejected.map(|(since, packets, reason)| json!({
                "since_ns": since,
                "packets": packets,
                "reason": reason.map(|r| r.value.as_str()),
            }))),
        );
        let verdicts: serde_json::Map<String, Value> = crate::metrics::VERDICTS
            .iter()
            .zip(self.tally)
            .map(|(v, n)| (v.to_string(), json!(n)))
            .collect();
        // Its symbols are judged with its offset and status: neither read,
        // none is (a count of none would read as zeros).
        let judged = self.read.offset && self.read.status;
        doc.insert(
            "symbols".into(),
            match judged {
                true => Value::Object(verdicts),
                false => Value::Null,
            },
        );
        Value::Object(doc)
    }
}

/// `items` joined by two spaces into lines of at most `width` characters
/// (an item longer than that alone on its line), each indented by two.
fn wrap(items: &[String], width: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut line = String::new();
    for item in items {
        if !line.is_empty() && line.chars().count() + 2 + item.chars().count() > width {
            out.push(std::mem::take(&mut line));
        }
        line.push_str("  ");
        line.push_str(item);
    }
    if !line.is_empty() {
        out.push(line);
    }
    out
}

/// One symbol row.
#[derive(Debug, Clone)]
struct Row {
    feed: String,
    /// The name the slot is published under (the directory's last for
    /// it), or its key's characters when none names it.
    name: String,
    reasons: Reasons,
    record: Record,
    /// Its feed's clock offset, `None` when unreadable.
    offset: Option<i128>,
    /// The feed's status at the read (liveness and source time count with
    /// the slot's), `None` when unreadable.
    status: Option<FeedStatus>,
    /// The symbol counts its own lost ticks and duplicates (its feed's
    /// `SYMBOL_COUNTS` trait); other feeds count them per feed only.
    own_counts: bool,
    /// The least decimals its feed's prices print with.
    decimals: Option<u8>,
}

impl Row {
    /// The symbol's (lost ticks, duplicates), `None` where the feed counts
    /// them only for its whole stream.
    fn counts(&self) -> Option<(u64, u64)> {
        let seq = &self.record.state.seq;
        self.own_counts.then_some((seq.ticks_lost, seq.duplicates))
    }

    /// Last sign of life, the symbol's or its feed's; 0 none or unknown
    /// (the feed's status unreadable: the symbol's own may be the older).
    fn last_alive(&self) -> u64 {
        self.status
            .map_or(0, |s| self.record.state.last_alive.max(s.last_alive))
    }

    /// Source age at `now` (ns, on the provider's clock through the offset):
    /// the later of the symbol's source time and the feed's watermark.
    fn source_age(&self, now: u64) -> Option<i128> {
        let source = self
            .record
            .state
            .price
            .map(|p| p.source_time)?
            .max(self.status?.source_watermark);
        Some(now as i128 - source as i128 - self.offset?)
    }
}

/// A side as `stat` shows it: the price with the feed's decimals
/// ([`Price::fixed`](crate::state::Price::fixed)), with its size where
/// the feed has sizes ([`Side::known_size`]): bid `size×price`, ask
/// `price×size`.
fn side_text(side: Option<Side>, bid: bool, decimals: Option<u8>) -> String {
    let Some(s) = side else {
        return "-".into();
    };
    let price = s.price.show(decimals);
    match (s.known_size(), bid) {
        (None, _) => price,
        (Some(n), true) => format!("{n}×{price}"),
        (Some(n), false) => format!("{price}×{n}"),
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
        // Each symbol's verdict as a check would answer it now: its slot
        // read together with its feed's offset and status. The health
        // line read again after the scan, until the two agree: a heartbeat
        // or a close landing between them would show rows the line says
        // otherwise of.
        let mut judged = reader.judged(now);
        for _ in 0..3 {
            let after = reader.health(now);
            if after == snap.health {
                break;
            }
            snap.health = after;
            judged = reader.judged(now);
        }
        // What each instrument is shown by: the name readers find it by.
        let names = reader.names();
        let healthy = snap.health.is_ok();
        // Each feed's records together (a stable sort: slot order kept),
        // so that the feeds' loop reads each record once.
        judged.sort_by_key(|(r, _)| r.feed);
        // With `top`, the rows kept are trimmed to the worst `top` whenever
        // they reach twice that: memory for the rows shown, however many
        // symbols the table holds.
        let keep = filter.top.map(|n| n.max(1) * 2);
        let mut total = 0usize;
        for (id, f) in feeds.iter().enumerate() {
            if filter.feed.as_ref().is_some_and(|n| n != &f.name) {
                continue;
            }
            let id = id as u16;
            // A writer killed mid-publication leaves its seqlock held for
            // good: waited for only while the writer is alive.
            let wait = if healthy { PATIENCE } else { Duration::ZERO };
            // A file cut under its mapping reads as zeros (health
            // `bad_state`): its counters are unknown, not zero.
            let cut = matches!(snap.health, Health::BadState(_));
            // So are its status and offset, and the symbols judged with
            // them (a flag of zeros would read as a healthy feed).
            let values = patiently(wait, || reader.counters(id)).filter(|_| !cut);
            // (A writer killed inside the offset's write: its status alone.)
            let state = patiently(wait, || reader.feed_state(id)).filter(|_| !cut);
            let offset_read = state.is_some();
            let state = state
                .or_else(|| Some((patiently(wait, || reader.feed_status(id))?, 0)))
                .filter(|_| !cut);
            let read = Readable {
                counters: values.is_some(),
                offset: offset_read,
                status: state.is_some(),
            };
            let values = values.unwrap_or([0; counter::ALL]);
            let (status, offset) = state.unwrap_or_default();
            let flags = status.flags();
            let mut view = FeedView {
                name: f.name.clone(),
                kind: f.kind,
                protocol: f.protocol.clone(),
                status,
                samples: f
                    .counters
                    .iter()
                    .map(|d| Sample {
                        d: d.clone(),
                        value: d.value(&values, flags),
                        text: d.text(&values),
                    })
                    .collect(),
                values,
                read,
                symbol_counts: f.symbol_counts(),
                offset,
                tally: [0; 1 + Reasons::ORDER.len()],
            };
            let from = judged.partition_point(|(r, _)| r.feed < id);
            let to = judged.partition_point(|(r, _)| r.feed <= id);
            for (r, reasons) in &judged[from..to] {
                let (Some(symbol), reasons) = (r.symbol, *reasons) else {
                    continue;
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
                let name = names
                    .get(&(id, symbol))
                    .cloned()
                    .unwrap_or_else(|| symbol.to_string());
                snap.rows.push(Row {
                    feed: f.name.clone(),
                    name,
                    reasons,
                    record: *r,
                    offset: view.read.offset.then_some(view.offset),
                    status: view.read.status.then_some(view.status),
                    own_counts: view.symbol_counts,
                    decimals: f.price_decimals(),
                });
                total += 1;
                if let (Some(n), Some(keep)) = (filter.top, keep) {
                    if snap.rows.len() >= keep {
                        worst_first(&mut snap.rows, n);
                    }
                }
            }
            snap.feeds.push(view);
        }
        worst_first(&mut snap.rows, filter.top.unwrap_or(usize::MAX));
        snap.left_out = total - snap.rows.len();
        Ok(snap)
    }

    /// The text view: a header (writer, then each feed), then one row per
    /// symbol. [`fit`] cuts it to a terminal.
    pub fn text(&self) -> Frame {
        let now = self.now;
        let mut s = String::new();
        // The path as the operator gave it, and a health naming it: made
        // safe for a terminal (an escape sequence in a path is printed,
        // not obeyed).
        let safe = |s: &str| crate::config::one_line(s, usize::MAX);
        let _ = writeln!(s, "tickguard stat  {}", safe(&self.path));
        let Some(w) = self.writer else {
            let _ = writeln!(
                s,
                "{}: every check answers stale",
                safe(&self.health.to_string())
            );
            return Frame {
                header: s,
                rows: Vec::new(),
                left_out: 0,
            };
        };
        // A dead writer's health says how old its heartbeat is already.
        let beat = match self.health {
            Health::WriterDead { .. } => String::new(),
            // (`--now` before the heartbeat: said so, not a negative age.)
            _ if now < w.heartbeat_ns => {
                format!(
                    "  heartbeat {} after this time",
                    ms((w.heartbeat_ns - now) as i128)
                )
            }
            _ => format!("  heartbeat {} ago", ms((now - w.heartbeat_ns) as i128)),
        };
        let _ = writeln!(
            s,
            "writer pid {}  {}{beat}  up {:.1} s  datagrams {}  worst cycle {:.1} µs",
            w.pid,
            self.health,
            now.saturating_sub(w.start_ns) as f64 / 1e9,
            w.datagrams,
            w.worst_cycle_ns as f64 / 1e3
        );
        for f in &self.feeds {
            let _ = write!(
                s,
                "\nfeed {} ({}, {})",
                f.name,
                if f.protocol.is_empty() {
                    "?"
                } else {
                    &f.protocol
                },
                if f.kind == FeedKind::Full {
                    "full"
                } else {
                    "delta"
                },
            );
            if let Some(flags) = f.flags_text().filter(|_| f.read.status) {
                let _ = write!(s, "  flags {flags}");
            }
            let offset = if f.read.offset {
                ms(f.offset)
            } else {
                "?".into()
            };
            let _ = writeln!(s, "  clock offset {offset}");
            let (items, lines) = match (f.read.counters, &self.health) {
                (true, _) => f.items(),
                (false, Health::BadState(_)) => (vec![UNREADABLE_CUT.to_string()], vec![]),
                (false, _) => (vec![UNREADABLE.to_string()], vec![]),
            };
            for l in wrap(&items, TEXT_WIDTH) {
                let _ = writeln!(s, "{l}");
            }
            if let Some((since, packets, reason)) = f.all_rejected().filter(|_| f.read.counters) {
                let _ = writeln!(
                    s,
                    "  EVERY PACKET REJECTED for {:.1} s: {packets} in a row, mostly {}{}",
                    now.saturating_sub(since) as f64 / 1e9,
                    reason.map_or("?", |r| r.value.as_str()),
                    reason.map_or("", |r| r.note.as_str()),
                );
            }
            for l in lines {
                let _ = writeln!(s, "  {l}");
            }
            let tally: Vec<String> = crate::metrics::VERDICTS
                .iter()
                .zip(f.tally)
                .map(|(v, n)| format!("{v} {n}"))
                .collect();
            if f.read.offset && f.read.status {
                let _ = writeln!(s, "  symbols: {}", tally.join("  "));
            } else {
                let _ = writeln!(
                    s,
                    "  symbols: unknown (the feed's status or offset unreadable)"
                );
            }
        }
        // Names wider than a symbol's nine columns widen the column.
        let width = self
            .rows
            .iter()
            .map(|r| r.name.chars().count())
            .max()
            .unwrap_or(0)
            .max(NAME_WIDTH);
        let _ = writeln!(
            s,
            "\n{:<10} {:<width$} {:<28} {:>14} {:>14} {:>10} {:>7} {:>8} {:>11} {:>11}",
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
        let rows = self.rows.iter().map(|r| row_text(r, now, width)).collect();
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
        let feeds: Vec<Value> = self.feeds.iter().map(|f| f.json()).collect();
        let symbols: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                let st = &r.record.state;
                let (bid, ask) = (r.record.bid, r.record.ask);
                let size = |s: Option<Side>| s.and_then(|s| s.known_size());
                json!({
                    "feed": r.feed,
                    "symbol": r.name,
                    "ok": r.reasons.is_ok(),
                    "reasons": r.reasons.names().collect::<Vec<_>>(),
                    "bid": bid.map(|s| s.price.as_f64()),
                    "ask": ask.map(|s| s.price.as_f64()),
                    "bid_exact": bid.map(|s| s.price.exact(r.decimals)),
                    "ask_exact": ask.map(|s| s.price.exact(r.decimals)),
                    "bid_size": size(bid),
                    "ask_size": size(ask),
                    "last_seq": st.seq.last_seq,
                    "ticks_lost": r.counts().map(|c| c.0),
                    "duplicates": r.counts().map(|c| c.1),
                    "silence_ns": (r.last_alive() != 0).then(|| now.saturating_sub(r.last_alive())),
                    "source_age_ns": r.source_age(now).map(saturated),
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

/// Columns of the symbol column at least.
const NAME_WIDTH: usize = 9;

/// Row `r` at `now`, its name in a column `width` wide.
fn row_text(r: &Row, now: u64, width: usize) -> String {
    let st = &r.record.state;
    let (bid, ask) = (
        side_text(r.record.bid, true, r.decimals),
        side_text(r.record.ask, false, r.decimals),
    );
    let age = r.source_age(now).map_or("-".into(), ms);
    format!(
        "{:<10} {:<width$} {:<28} {:>14} {:>14} {:>10} {:>7} {:>8} {:>11} {:>11}",
        r.feed,
        r.name,
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

/// Keeps the worst `n` of `rows` (severity, then feed and name), worst
/// first.
fn worst_first(rows: &mut Vec<Row>, n: usize) {
    let order = |a: &Row, b: &Row| {
        severity(b.reasons)
            .cmp(&severity(a.reasons))
            .then_with(|| a.feed.cmp(&b.feed))
            .then_with(|| a.name.cmp(&b.name))
    };
    if n < rows.len() {
        rows.select_nth_unstable_by(n, order);
        rows.truncate(n);
    }
    rows.sort_unstable_by(order);
}

/// The frame cut to `size`: every line at most `cols` characters, at most
/// `rows` lines. The header stays (its end first cut if even it does not
/// fit); the worst symbols fill what is left but one line, which says how
/// many were left out.
pub fn fit(frame: &Frame, size: Size) -> String {
    let cut = |l: &str| -> String { l.chars().take(size.cols.max(1)).collect() };
    let rows = size.rows.max(2);
    let header: Vec<&str> = frame.header.lines().collect();
    // (`rows` may be any number a caller passes: no more lines than the
    // frame has are kept.)
    let mut out = Vec::with_capacity(rows.min(header.len() + frame.rows.len() + 1));
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
        // Rows cut by --top leave room whatever the count left out.
        let shown = if all <= room {
            frame.rows.len()
        } else {
            frame.rows.len().min(room - 1)
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

/// The live view's screen: the terminal cleared, then [`fit`] without its
/// last line's end, so that the last line written does not scroll the
/// first off a terminal of `size.rows` (of 2 rows or more: [`fit`] keeps
/// two lines, the title and what was left out, however short).
pub fn screen(frame: &Frame, size: Size) -> String {
    let fitted = fit(frame, size);
    format!(
        "\x1b[H\x1b[2J{}",
        fitted.strip_suffix('\n').unwrap_or(&fitted)
    )
}

/// One snapshot of the publication at local time `now` (ns since the Unix
/// epoch), every feed and symbol, as text.
pub fn render(reader: &Reader, path: &str, now: u64) -> String {
    match Snapshot::read(reader, path, now, &Filter::default()) {
        Ok(s) => s.text().full(),
        Err(e) => e,
    }
}

/// How long a screen waits for a consistent copy of what the writer
/// publishes under a seqlock ([`patiently`]).
pub(crate) const PATIENCE: Duration = Duration::from_millis(50);

/// `read` (a consistent copy of something the writer publishes under a
/// seqlock), tried again for up to `wait` while it gives nothing: on a
/// busy machine the writer can be taken off its core in the middle of
/// publishing, for longer than the reader's own retries last, and a
/// screen would show that moment as empty or as zeros.
pub(crate) fn patiently<T>(wait: Duration, mut read: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = std::time::Instant::now() + wait;
    loop {
        let r = read();
        if r.is_some() || std::time::Instant::now() >= deadline {
            return r;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// `v` in JSON's 64-bit integers, held at the nearer end of their range
/// when beyond it (an offset from a send time near 2^64 needs 128 bits):
/// never wrapped to the other sign.
fn saturated(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

#[cfg(test)]
mod tests {
    use super::saturated;

    /// An offset or a source age beyond 64 bits keeps its sign in JSON.
    #[test]
    fn json_integers_saturate_and_keep_their_sign() {
        assert_eq!(saturated(-5), -5);
        assert_eq!(saturated(i128::from(i64::MAX) + 1), i64::MAX);
        assert_eq!(saturated(-(1i128 << 100)), i64::MIN);
        assert_eq!(saturated(u64::MAX as i128), i64::MAX);
    }
}
