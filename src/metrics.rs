//! Prometheus metrics and feed-health logs, from a thread of their own.
//!
//! The receiver never touches the registry: it keeps plain counters and
//! copies them, once per heartbeat, into the shared memory (per feed and per
//! line, one set under each feed block's counters stamp) and into
//! [`SharedStats`] (receiver, one set under its stamp). This thread reads a
//! consistent copy of each every `interval`, sets the metrics, and logs one
//! line per change of a feed's state: a burst of lost ticks, a provider reset, a line going silent or
//! coming back, kernel drops, socket errors (with the last error; the
//! receive thread only counts them).
//!
//! Names follow Prometheus conventions: `_total` counters, base units
//! (seconds, bytes).

use crate::config::{Config, Protocol};
use crate::reader::Reader;
use crate::shm::counter;
use crate::sidecar::{SharedStats, BATCH_BUCKETS};
use crate::time::now_ns;
use crate::verdict::Reasons;
use metrics::{Counter, Gauge};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Label values of the verdict gauge (`tickguard_symbols`), in report
/// order, with `ok` first (`halted` and `closed` stay 0 on SQF feeds).
pub const VERDICTS: [&str; 8] = [
    "ok",
    "no_quote",
    "stale",
    "stale_at_source",
    "suspect",
    "invalid_price",
    "halted",
    "closed",
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
    /// Feeds of protocols other than SQF: the feed's status and extension counters.
    exchange: Option<ExchangeMetrics>,
    last_lost: u64,
    last_resets: u64,
    /// A gap burst in progress: (first sample that saw it, ns; ticks lost before it).
    burst: Option<(u64, u64)>,
}

/// A feed's status flags and extension counters (SQF has none: not registered).
struct ExchangeMetrics {
    suspect: Gauge,
    closed: Gauge,
    joined: Gauge,
    orders_refused: Gauge,
    /// Gauges: (counter id, gauge).
    levels: Vec<(usize, Gauge)>,
    /// Counters: (counter id, counter).
    totals: Vec<(usize, Counter)>,
    /// Gap fill latency as a Prometheus histogram: cumulative
    /// `_bucket{le}` counters (the last `+Inf`) and `_count`.
    recovery_buckets: Vec<Counter>,
    recovery_count: Counter,
}

impl ExchangeMetrics {
    fn new(feed: &str) -> ExchangeMetrics {
        let g = |name: &'static str| metrics::gauge!(name, "feed" => feed.to_string());
        let c = |name: &'static str| metrics::counter!(name, "feed" => feed.to_string());
        ExchangeMetrics {
            suspect: g("tickguard_feed_suspect"),
            closed: g("tickguard_feed_closed"),
            joined: g("tickguard_feed_joined"),
            orders_refused: g("tickguard_feed_orders_refused"),
            levels: vec![
                (counter::NEXT, g("tickguard_feed_next_sequence")),
                (counter::HIGH, g("tickguard_feed_high_sequence")),
                (counter::HELD, g("tickguard_feed_held_messages")),
                (counter::GAPS_OPEN, g("tickguard_feed_gaps_open")),
            ],
            totals: vec![
                (
                    counter::RECOVERED,
                    c("tickguard_feed_recovered_messages_total"),
                ),
                (
                    counter::SESSION_CHANGES,
                    c("tickguard_feed_session_changes_total"),
                ),
                (
                    counter::STALE_SESSION,
                    c("tickguard_feed_stale_session_packets_total"),
                ),
                (
                    counter::UNKNOWN_ORDERS,
                    c("tickguard_feed_unknown_orders_total"),
                ),
                (counter::ANOMALIES, c("tickguard_feed_anomalies_total")),
                (
                    counter::REQUESTS_SENT,
                    c("tickguard_feed_requests_sent_total"),
                ),
                (
                    counter::GAPS_EXPIRED,
                    c("tickguard_feed_gaps_expired_total"),
                ),
                (
                    counter::LINE_MISMATCHES,
                    c("tickguard_feed_line_mismatches_total"),
                ),
                (
                    counter::INVALID_RECORDS,
                    c("tickguard_feed_invalid_records_total"),
                ),
                (
                    counter::ORDERS_REFUSED,
                    c("tickguard_feed_orders_refused_total"),
                ),
                (
                    counter::REQUEST_ERRORS,
                    c("tickguard_feed_request_errors_total"),
                ),
                (
                    counter::REQUESTS_DEFERRED,
                    c("tickguard_feed_requests_deferred_total"),
                ),
            ],
            recovery_buckets: (0..counter::RECOVERY_BUCKETS)
                .map(|i| {
                    let le = if i + 1 == counter::RECOVERY_BUCKETS {
                        "+Inf".to_string()
                    } else {
                        format!(
                            "{}",
                            crate::shm::counter::recovery_bucket_bound_ns(i) as f64 / 1e9
                        )
                    };
                    metrics::counter!(
                        "tickguard_feed_recovery_latency_seconds_bucket",
                        "feed" => feed.to_string(),
                        "le" => le
                    )
                })
                .collect(),
            recovery_count: c("tickguard_feed_recovery_latency_seconds_count"),
        }
    }
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
    /// Socket errors already logged.
    last_socket_errors: u64,
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
    /// Each feed's counters as last read (one consistent set per feed).
    counters: Vec<Option<[u64; counter::ALL]>>,
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
                    counters: {
                        let mut v = vec![
                            (counter::HEARTBEATS, c("tickguard_heartbeats_total")),
                            (counter::TICKS_LOST, c("tickguard_ticks_lost_total")),
                            // SQF drops the messages of a symbol with no
                            // slot; an exchange feed counts each symbol
                            // refused a slot once.
                            if f.protocol == Protocol::Sqf {
                                (counter::TABLE_FULL, c("tickguard_table_full_drops_total"))
                            } else {
                                (counter::TABLE_FULL, c("tickguard_table_full_symbols_total"))
                            },
                        ];
                        // SQF's message kinds: an exchange feed counts its
                        // own (`exchange`), and these would stay 0.
                        if f.protocol == Protocol::Sqf {
                            v.extend([
                                (counter::QUOTES, c("tickguard_quotes_total")),
                                (counter::SNAPSHOTS, c("tickguard_snapshots_total")),
                                (counter::UNKNOWN, c("tickguard_unknown_messages_total")),
                                (counter::RESETS, c("tickguard_provider_resets_total")),
                            ]);
                        }
                        v
                    },
                    // The reasons of the feed's own protocol, by their names.
                    rejected: crate::protocol::reasons(f.protocol)
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
                    exchange: (f.protocol != Protocol::Sqf).then(|| ExchangeMetrics::new(&feed)),
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
            last_socket_errors: 0,
            heartbeat_age: metrics::gauge!("tickguard_writer_heartbeat_age_seconds"),
        };
        Monitor {
            reader: Reader::open_with(&config.sidecar.shm_path, config.sidecar.dead_after_ns),
            shared,
            feeds,
            lines,
            receiver,
            counters: Vec::new(),
        }
    }

    /// One sample at local time `now` (ns since the Unix epoch).
    pub fn sample(&mut self, now: u64) {
        if !self.reader.health(now).is_ok() {
            self.reader.refresh();
        }
        let r = &self.reader;
        // One consistent set each: the receiver's statistics, and every
        // feed's counters (feed and line counters of one heartbeat).
        let s = self.shared.load();
        let rm = &mut self.receiver;
        rm.cycles_busy.absolute(s.busy_cycles);
        rm.cycles_idle
            .absolute(s.cycles.saturating_sub(s.busy_cycles));
        rm.datagrams.absolute(s.datagrams);
        rm.worst_cycle.set(s.worst_cycle_ns as f64 / 1e9);
        for (c, a) in rm.batches.iter().zip(&s.batch_sizes) {
            c.absolute(*a);
        }
        rm.change_drops.absolute(s.change_drops);
        rm.oversized.absolute(s.oversized);
        rm.socket_errors.absolute(s.socket_errors);
        if s.socket_errors > rm.last_socket_errors {
            tracing::warn!(
                new = s.socket_errors - rm.last_socket_errors,
                total = s.socket_errors,
                last_error = %std::io::Error::from_raw_os_error(s.last_socket_errno),
                "socket errors on the receive thread"
            );
        }
        rm.last_socket_errors = s.socket_errors;
        if let Some(beat) = r.heartbeat_ns() {
            rm.heartbeat_age.set(now.saturating_sub(beat) as f64 / 1e9);
        }

        self.counters.clear();
        self.counters
            .extend((0..self.feeds.len() as u16).map(|id| r.counters(id)));
        let counters = &self.counters;
        let get = |feed: u16, k: usize| {
            counters
                .get(feed as usize)
                .copied()
                .flatten()
                .map_or(0, |c| c[k])
        };
        for l in &mut self.lines {
            let get = |k: usize| get(l.feed, k + l.index.min(1));
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
            let get = |k: usize| get(id, k);
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
            let status = r.feed_status(id).unwrap_or_default();
            if let Some(x) = &f.exchange {
                let flag = |on: bool| on as u8 as f64;
                x.suspect.set(flag(status.suspect));
                x.closed.set(flag(status.closed));
                x.joined.set(flag(status.joined));
                x.orders_refused.set(flag(status.orders_refused));
                for (k, g) in &x.levels {
                    g.set(get(*k) as f64);
                }
                for (k, c) in &x.totals {
                    c.absolute(get(*k));
                }
                let mut below = 0;
                for (i, c) in x.recovery_buckets.iter().enumerate() {
                    below += get(counter::RECOVERY_LATENCY + i);
                    c.absolute(below);
                }
                x.recovery_count.absolute(below);
            }
            let mut by = [0u64; VERDICTS.len()];
            let mut last_alive = status.last_alive;
            for rec in records.iter().filter(|rec| rec.feed == id) {
                last_alive = last_alive.max(rec.state.last_alive);
                let reasons = crate::state::verdict(rec, &status, offset, now);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sidecar::RunStats;
    use std::sync::Mutex;

    /// Log output of `f`, as plain text.
    fn logs_of(f: impl FnOnce()) -> String {
        #[derive(Clone, Default)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let w = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || w.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        let out = buf.0.lock().unwrap().clone();
        String::from_utf8(out).unwrap()
    }

    /// The receive thread only counts socket errors; the metrics thread logs
    /// each change of the count, once, with the last error.
    #[test]
    fn socket_errors_are_logged_once_per_change_with_the_last_error() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::parse(
            &format!(
                "[sidecar]\nshm_path = \"{}\"\n[[feed]]\nname = \"lp1\"\nkind = \"full\"\n\
                 lines = [\"127.0.0.1:30001\"]\nstale_threshold_ms = 500\n\
                 source_threshold_ms = 2000\nclock_offset = 0\n",
                dir.path().join("shm").display()
            ),
            "test.toml",
        )
        .unwrap();
        let shared = Arc::new(SharedStats::default());
        let mut m = Monitor::new(&config, shared.clone());
        let t = 1_767_603_600_000_000_000;
        assert!(!logs_of(|| m.sample(t)).contains("socket errors"));
        let mut st = RunStats {
            socket_errors: 3,
            last_socket_errno: libc::ECONNREFUSED,
            ..RunStats::default()
        };
        shared.store(&st);
        let log = logs_of(|| m.sample(t + 1));
        assert!(log.contains("socket errors on the receive thread"), "{log}");
        assert!(log.contains("new=3 total=3"), "{log}");
        assert!(
            log.contains("last_error=Connection refused (os error 111)"),
            "{log}"
        );
        assert!(!logs_of(|| m.sample(t + 2)).contains("socket errors"));
        st.socket_errors = 4;
        st.last_socket_errno = libc::ENOBUFS;
        shared.store(&st);
        let log = logs_of(|| m.sample(t + 3));
        assert!(log.contains("new=1 total=4"), "{log}");
        assert!(log.contains("No buffer space available"), "{log}");
    }

    /// Halted and closed are verdict labels of every feed; an exchange feed
    /// also gets its status flags and extension counters, an SQF feed none.
    #[test]
    fn exchange_feeds_get_status_and_extension_metrics() {
        use crate::shm::{FeedInfo, Publication};
        use crate::state::FeedKind;
        use crate::state::{FeedStatus, Level, StateTable, Top};
        let dir = tempfile::tempdir().unwrap();
        let shm = dir.path().join("shm");
        let config = Config::parse(
            &format!(
                "[sidecar]\nshm_path = \"{}\"\n\
                 [[feed]]\nname = \"lp1\"\nkind = \"full\"\nlines = [\"127.0.0.1:30001\"]\n\
                 stale_threshold_ms = 500\nsource_threshold_ms = 2000\nclock_offset = 0\n\
                 [[feed]]\nname = \"nasdaq\"\nprotocol = \"itch50\"\nlines = [\"127.0.0.1:30002\"]\n\
                 stale_threshold_ms = 500\nsource_threshold_ms = 2000\ntimezone = \"America/New_York\"\n",
                shm.display()
            ),
            "test.toml",
        )
        .unwrap();
        let t = 1_767_603_600_000_000_000;
        let feeds: Vec<FeedInfo> = config
            .feeds
            .iter()
            .map(|f| FeedInfo {
                name: f.name.clone(),
                kind: FeedKind::Delta,
                lines: f.lines.clone(),
                protocol: f.protocol,
            })
            .collect();
        let p = Arc::new(Publication::create(&shm, 0o600, 8, &feeds, t, 1_000_000).unwrap());
        let mut table = StateTable::shared(p.clone());
        let th = crate::verdict::Thresholds {
            stale_ns: 500_000_000,
            source_ns: 2_000_000_000,
        };
        let id = table
            .insert(1, crate::symbol::Symbol::parse("AAPL").unwrap(), th)
            .unwrap();
        table.slots()[id as usize].write_top(&Top {
            bid: Some(Level { price: 1, size: 1 }),
            halted: true,
            ..Top::default()
        });
        let status = FeedStatus {
            closed: true,
            joined: true,
            orders_refused: true,
            last_alive: t,
            source_watermark: t,
            ..FeedStatus::default()
        };
        table.set_feed_status(1, &status);
        p.write_counters(|| {
            p.set_counter(1, counter::GAPS_OPEN, 4);
            p.set_counter(1, counter::RECOVERY_LATENCY, 2);
            p.set_counter(1, counter::RECOVERY_LATENCY + 3, 1);
        });
        p.ready();
        p.heartbeat(t);
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            let mut m = Monitor::new(&config, Arc::new(SharedStats::default()));
            m.sample(t + 1);
        });
        let text = handle.render();
        let has = |line: &str| text.lines().any(|l| l == line);
        for line in [
            r#"tickguard_symbols{feed="nasdaq",verdict="halted"} 1"#,
            r#"tickguard_symbols{feed="nasdaq",verdict="closed"} 1"#,
            r#"tickguard_symbols{feed="lp1",verdict="closed"} 0"#,
            r#"tickguard_feed_closed{feed="nasdaq"} 1"#,
            r#"tickguard_feed_suspect{feed="nasdaq"} 0"#,
            r#"tickguard_feed_joined{feed="nasdaq"} 1"#,
            r#"tickguard_feed_orders_refused{feed="nasdaq"} 1"#,
            r#"tickguard_feed_gaps_open{feed="nasdaq"} 4"#,
            r#"tickguard_feed_line_mismatches_total{feed="nasdaq"} 0"#,
            r#"tickguard_feed_recovery_latency_seconds_bucket{feed="nasdaq",le="0.000016"} 2"#,
            r#"tickguard_feed_recovery_latency_seconds_bucket{feed="nasdaq",le="0.000064"} 2"#,
            r#"tickguard_feed_recovery_latency_seconds_bucket{feed="nasdaq",le="0.000128"} 3"#,
            r#"tickguard_feed_recovery_latency_seconds_bucket{feed="nasdaq",le="+Inf"} 3"#,
            r#"tickguard_feed_recovery_latency_seconds_count{feed="nasdaq"} 3"#,
        ] {
            assert!(has(line), "{line} in:\n{text}");
        }
        assert!(
            !text.contains(r#"tickguard_feed_closed{feed="lp1"}"#)
                && !text.contains(r#"tickguard_feed_gaps_open{feed="lp1"}"#),
            "{text}"
        );
        drop(table);
    }
}
