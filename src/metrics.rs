//! Prometheus metrics and feed-health logs, from a thread of their own.
//!
//! The receiver never touches the registry: it keeps plain counters and
//! copies them, once per heartbeat, into the shared memory (per feed and per
//! line) and into [`SharedStats`] (receiver). This thread reads both every
//! `interval`, sets the metrics, and logs one line per change of a feed's
//! state: a burst of lost ticks, a provider reset, a line going silent or
//! coming back, kernel drops.
//!
//! Names follow Prometheus conventions: `_total` counters, base units
//! (seconds, bytes).

use crate::config::Config;
use crate::protocol::sqf::Reject;
use crate::reader::Reader;
use crate::shm::counter;
use crate::sidecar::{SharedStats, BATCH_BUCKETS};
use crate::time::now_ns;
use crate::verdict::{evaluate, Reasons};
use metrics::{Counter, Gauge};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Label values of the verdict gauge (`tickguard_symbols`), in report
/// order, with `ok` first.
pub const VERDICTS: [&str; 6] = [
    "ok",
    "no_quote",
    "stale",
    "stale_at_source",
    "suspect",
    "invalid_price",
];
/// A line silent for this long (while its feed was flowing) is logged as down, ns.
const LINE_DOWN_NS: u64 = 1_000_000_000;

struct LineMetrics {
    feed: u16,
    index: usize,
    name: String,
    addr: String,
    packets: Counter,
    messages: Counter,
    rejected: Counter,
    kernel_drops: Counter,
    rcvbuf: Gauge,
    last_packets: u64,
    last_change_ns: u64,
    down: bool,
    last_drops: u64,
}

struct FeedMetrics {
    name: String,
    counters: Vec<(usize, Counter)>,
    rejected: Vec<(usize, Counter)>,
    verdicts: Vec<Gauge>,
    offset: Gauge,
    silence: Gauge,
    /// Duplicates that came twice on the same line (line copies excluded).
    duplicates: Counter,
    line_copies: Counter,
    all_rejected: Gauge,
    last_lost: u64,
    last_resets: u64,
    /// A gap burst in progress: (first sample that saw it, ns; ticks lost before it).
    burst: Option<(u64, u64)>,
}

struct ReceiverMetrics {
    cycles_busy: Counter,
    cycles_idle: Counter,
    datagrams: Counter,
    worst_cycle: Gauge,
    batches: Vec<Counter>,
    change_drops: Counter,
    oversized: Counter,
    socket_errors: Counter,
    heartbeat_age: Gauge,
}

/// Installs the Prometheus exporter (HTTP on `listen`, `/metrics`) and
/// starts the thread that feeds it; it stops when `stop` is set.
pub fn spawn(
    listen: SocketAddr,
    config: &Config,
    shared: Arc<SharedStats>,
    stop: Arc<AtomicBool>,
    interval: Duration,
) -> anyhow::Result<std::thread::JoinHandle<()>> {
    metrics_exporter_prometheus::PrometheusBuilder::new()
        .with_http_listener(listen)
        .install()
        .map_err(|e| anyhow::anyhow!("metrics listener on {listen}: {e}"))?;
    tracing::info!(%listen, "metrics at http://{listen}/metrics");
    let config = config.clone();
    Ok(std::thread::Builder::new()
        .name("tickguard-metrics".into())
        .spawn(move || {
            let mut m = Monitor::new(&config, shared);
            while !stop.load(Ordering::Relaxed) {
                m.sample(now_ns());
                std::thread::sleep(interval);
            }
            m.sample(now_ns());
        })?)
}

/// Reads the publication and the receiver's statistics into metrics and logs.
pub struct Monitor {
    reader: Reader,
    shared: Arc<SharedStats>,
    feeds: Vec<FeedMetrics>,
    lines: Vec<LineMetrics>,
    receiver: ReceiverMetrics,
}

impl Monitor {
    /// Registers every metric for `config`'s feeds and lines.
    pub fn new(config: &Config, shared: Arc<SharedStats>) -> Monitor {
        let feeds = config
            .feeds
            .iter()
            .map(|f| {
                let feed = f.name.clone();
                let c = |name: &'static str| metrics::counter!(name, "feed" => feed.clone());
                FeedMetrics {
                    name: feed.clone(),
                    counters: vec![
                        (counter::QUOTES, c("tickguard_quotes_total")),
                        (counter::SNAPSHOTS, c("tickguard_snapshots_total")),
                        (counter::HEARTBEATS, c("tickguard_heartbeats_total")),
                        (counter::UNKNOWN, c("tickguard_unknown_messages_total")),
                        (counter::TICKS_LOST, c("tickguard_ticks_lost_total")),
                        (counter::RESETS, c("tickguard_provider_resets_total")),
                        (counter::TABLE_FULL, c("tickguard_table_full_drops_total")),
                    ],
                    rejected: Reject::ALL
                        .iter()
                        .map(|r| {
                            let c = metrics::counter!(
                                "tickguard_rejected_packets_total",
                                "feed" => feed.clone(),
                                "reason" => r.as_str()
                            );
                            (counter::REJECTED_BY_REASON + r.index(), c)
                        })
                        .collect(),
                    verdicts: VERDICTS
                        .iter()
                        .map(|v| metrics::gauge!("tickguard_symbols", "feed" => feed.clone(), "verdict" => *v))
                        .collect(),
                    offset: metrics::gauge!("tickguard_clock_offset_seconds", "feed" => feed.clone()),
                    silence: metrics::gauge!("tickguard_feed_silence_seconds", "feed" => feed.clone()),
                    duplicates: c("tickguard_duplicate_events_total"),
                    line_copies: c("tickguard_line_copies_total"),
                    all_rejected: metrics::gauge!("tickguard_feed_all_rejected", "feed" => feed.clone()),
                    last_lost: 0,
                    last_resets: 0,
                    burst: None,
                }
            })
            .collect();
        let mut lines = Vec::new();
        for (id, f) in config.feeds.iter().enumerate() {
            for (i, addr) in f.lines.iter().enumerate() {
                let labels = [
                    ("feed", f.name.clone()),
                    ("line", if i == 0 { "A" } else { "B" }.to_string()),
                ];
                lines.push(LineMetrics {
                    feed: id as u16,
                    index: i,
                    name: f.name.clone(),
                    addr: addr.to_string(),
                    packets: metrics::counter!("tickguard_packets_total", &labels),
                    messages: metrics::counter!("tickguard_messages_total", &labels),
                    rejected: metrics::counter!("tickguard_line_rejected_packets_total", &labels),
                    kernel_drops: metrics::counter!("tickguard_kernel_drops_total", &labels),
                    rcvbuf: metrics::gauge!("tickguard_receive_buffer_bytes", &labels),
                    last_packets: 0,
                    last_change_ns: now_ns(),
                    down: false,
                    last_drops: 0,
                });
            }
        }
        let receiver = ReceiverMetrics {
            cycles_busy: metrics::counter!("tickguard_receiver_polls_total", "result" => "busy"),
            cycles_idle: metrics::counter!("tickguard_receiver_polls_total", "result" => "idle"),
            datagrams: metrics::counter!("tickguard_receiver_datagrams_total"),
            worst_cycle: metrics::gauge!("tickguard_receiver_worst_cycle_seconds"),
            batches: (0..BATCH_BUCKETS)
                .map(|b| {
                    let label = match b {
                        0 => "1".to_string(),
                        b if b == BATCH_BUCKETS - 1 => format!("{}+", 1 << b),
                        b => format!("{}-{}", 1 << b, (1 << (b + 1)) - 1),
                    };
                    metrics::counter!("tickguard_receiver_batches_total", "size" => label)
                })
                .collect(),
            change_drops: metrics::counter!("tickguard_verdict_change_drops_total"),
            oversized: metrics::counter!("tickguard_oversized_datagrams_total"),
            socket_errors: metrics::counter!("tickguard_socket_errors_total"),
            heartbeat_age: metrics::gauge!("tickguard_writer_heartbeat_age_seconds"),
        };
        Monitor {
            reader: Reader::open_with(&config.sidecar.shm_path, config.sidecar.dead_after_ns),
            shared,
            feeds,
            lines,
            receiver,
        }
    }

    /// One sample at local time `now` (ns since the Unix epoch).
    pub fn sample(&mut self, now: u64) {
        if !self.reader.health(now).is_ok() {
            self.reader.refresh();
        }
        let r = &self.reader;
        let s = &self.shared;
        let rm = &self.receiver;
        // Relaxed: statistics written by the receiver once per heartbeat.
        let cycles = s.cycles.load(Ordering::Relaxed);
        let busy = s.busy_cycles.load(Ordering::Relaxed);
        rm.cycles_busy.absolute(busy);
        rm.cycles_idle.absolute(cycles.saturating_sub(busy));
        rm.datagrams.absolute(s.datagrams.load(Ordering::Relaxed));
        rm.worst_cycle
            .set(s.worst_cycle_ns.load(Ordering::Relaxed) as f64 / 1e9);
        for (c, a) in rm.batches.iter().zip(&s.batch_sizes) {
            c.absolute(a.load(Ordering::Relaxed));
        }
        rm.change_drops
            .absolute(s.change_drops.load(Ordering::Relaxed));
        rm.oversized.absolute(s.oversized.load(Ordering::Relaxed));
        rm.socket_errors
            .absolute(s.socket_errors.load(Ordering::Relaxed));
        if let Some(beat) = r.heartbeat_ns() {
            rm.heartbeat_age.set(now.saturating_sub(beat) as f64 / 1e9);
        }

        // Lines before feeds: the receiver publishes feed counters before
        // line counters, so once a line's count is seen, the feed counters
        // read after it include at least the same datagrams.
        for l in &mut self.lines {
            let get = |k: usize| r.counter(l.feed, k + l.index.min(1)).unwrap_or(0);
            let packets = get(counter::LINE_PACKETS);
            l.packets.absolute(packets);
            l.messages.absolute(get(counter::LINE_MESSAGES));
            l.rejected.absolute(get(counter::LINE_REJECTED));
            let drops = get(counter::LINE_KERNEL_DROPS);
            l.kernel_drops.absolute(drops);
            l.rcvbuf.set(get(counter::LINE_RCVBUF) as f64);
            if drops > l.last_drops {
                tracing::warn!(feed = %l.name, line = %l.addr, dropped = drops - l.last_drops, "kernel dropped datagrams: receive buffer overflow");
            }
            l.last_drops = drops;
            if packets != l.last_packets {
                if l.down {
                    tracing::info!(feed = %l.name, line = %l.addr, "line up");
                    l.down = false;
                }
                l.last_packets = packets;
                l.last_change_ns = now;
            } else if !l.down && packets > 0 && now.saturating_sub(l.last_change_ns) > LINE_DOWN_NS
            {
                tracing::warn!(feed = %l.name, line = %l.addr, silent_ms = (now - l.last_change_ns) / 1_000_000, "line down");
                l.down = true;
            }
        }

        let records = r.records();
        for (id, f) in self.feeds.iter_mut().enumerate() {
            let id = id as u16;
            let get = |k: usize| r.counter(id, k).unwrap_or(0);
            for (k, c) in &f.counters {
                c.absolute(get(*k));
            }
            for (k, c) in &f.rejected {
                c.absolute(get(*k));
            }
            let copies = get(counter::LINE_COPIES);
            f.line_copies.absolute(copies);
            f.duplicates
                .absolute(get(counter::DUPLICATES).saturating_sub(copies));
            let all_rejected = get(counter::ALL_REJECTED_SINCE) != 0;
            f.all_rejected.set(all_rejected as u8 as f64);
            let offset = r.offset(id).unwrap_or(0);
            f.offset.set(offset as f64 / 1e9);
            let mut by = [0u64; VERDICTS.len()];
            let mut last_alive = 0u64;
            for rec in records.iter().filter(|rec| rec.feed == id) {
                last_alive = last_alive.max(rec.state.last_alive);
                let reasons = evaluate(Some(&rec.state), rec.thresholds, offset, now);
                if reasons.is_ok() {
                    by[0] += 1;
                }
                for (i, (bit, _)) in Reasons::ORDER.iter().enumerate() {
                    if reasons.contains(*bit) {
                        by[i + 1] += 1;
                    }
                }
            }
            for (g, v) in f.verdicts.iter().zip(by) {
                g.set(v as f64);
            }
            if last_alive > 0 {
                f.silence.set(now.saturating_sub(last_alive) as f64 / 1e9);
            }
            // A burst of loss is a state: logged when it starts and when a
            // sample interval passes without new loss.
            let lost = get(counter::TICKS_LOST);
            match f.burst {
                None if lost > f.last_lost => {
                    tracing::warn!(feed = %f.name, lost = lost - f.last_lost, total = lost, "gap burst started: ticks lost on both lines");
                    f.burst = Some((now, f.last_lost));
                }
                Some((since, before)) if lost == f.last_lost => {
                    tracing::info!(
                        feed = %f.name,
                        lost = lost - before,
                        lasted_ms = now.saturating_sub(since) / 1_000_000,
                        total = lost,
                        "gap burst ended"
                    );
                    f.burst = None;
                }
                _ => {}
            }
            f.last_lost = lost;
            let resets = get(counter::RESETS);
            if resets > f.last_resets {
                tracing::warn!(feed = %f.name, symbols = resets - f.last_resets, "provider reset: sequences went back");
            }
            f.last_resets = resets;
        }
    }
}
