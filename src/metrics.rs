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

mod http;

use crate::config::Config;
use crate::reader::{Health, Reader};
use crate::shm::{counter, CounterKind, Descriptor};
use crate::sidecar::{SharedStats, BATCH_BUCKETS};
use crate::time::now_ns;
use crate::verdict::Reasons;
use metrics::{Counter, Gauge, Label};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Label values of the verdict gauge (`tickguard_symbols`), in report
/// order, with `ok` first (`halted` and `closed` stay 0 on feeds whose
/// protocol has neither).
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
/// A line silent for this long while another line of its feed received
/// is logged as down (the feed's redundancy lost), ns. A feed's lines all
/// silent are logged down only past the feed's `stale_threshold_ms` as
/// well: a quiet market (a CME channel sends a heartbeat after 30 s of
/// silence) is no line lost.
const LINE_DOWN_NS: u64 = 1_000_000_000;
/// The prefix of every metric name.
const PREFIX: &str = "tickguard_";

/// What the metrics thread remembers of a line, for its logs.
struct LineState {
    feed: u16,
    index: usize,
    name: String,
    addr: String,
    last_packets: u64,
    last_change_ns: u64,
    down: bool,
    last_drops: u64,
    /// Its feed's `stale_threshold_ms`, ns.
    quiet_ns: u64,
    /// Its counters were read this sample.
    read: bool,
}

/// One exported metric of a feed, from its counter descriptors.
enum Exported {
    /// A counter: the descriptor's index in the feed's list.
    Counter(usize, Total),
    /// A gauge (or flag).
    Gauge(usize, Gauge),
    /// A histogram: its buckets' descriptor indexes with their cumulative
    /// `_bucket{le}` counters, and `_count`.
    Histogram(Vec<(usize, Total)>, Total),
}

/// A published count exported as a Prometheus counter, which only rises:
/// a count that starts over (its publication recreated, every feed's
/// state with it: [`Exported::start_over`], or a count read lower than
/// before) is added to what was exported before, rather than read as a
/// value the exporter keeps the larger of (which froze the counter until
/// the new count passed the old).
struct Total {
    counter: Counter,
    /// What the counts before the last start over came to.
    base: u64,
    /// The count last read.
    last: u64,
}

impl Exported {
    /// Its publication made anew: every count it exports starts over but
    /// those `carried` (a descriptor's index) over to the new file.
    fn start_over(&mut self, carried: impl Fn(usize) -> bool) {
        match self {
            Exported::Counter(i, t) if !carried(*i) => t.start_over(),
            Exported::Counter(..) | Exported::Gauge(..) => {}
            Exported::Histogram(buckets, count) => {
                if !buckets.iter().any(|(i, _)| carried(*i)) {
                    buckets.iter_mut().for_each(|(_, t)| t.start_over());
                    count.start_over();
                }
            }
        }
    }
}

impl Total {
    fn new(counter: Counter) -> Total {
        Total {
            counter,
            base: 0,
            last: 0,
        }
    }

    /// The count starts over from 0 whatever is read next (its
    /// publication made anew): what it came to is kept in the base.
    fn start_over(&mut self) {
        self.base = self.base.saturating_add(self.last);
        self.last = 0;
    }

    /// The count read now.
    fn set(&mut self, count: u64) {
        if count < self.last {
            self.base = self.base.saturating_add(self.last);
        }
        self.last = count;
        self.counter.absolute(self.base.saturating_add(count));
    }
}

struct FeedMetrics {
    name: String,
    /// From the publication's descriptors, once it is mapped: with the
    /// lines and descriptors they were registered for (a file made again
    /// by the same writer describes the same, and keeps them, its counts
    /// carried on).
    exported: Option<(usize, Vec<Descriptor>, Vec<Exported>)>,
    verdicts: Vec<Gauge>,
    /// Symbols rejected, `closed` not among their reasons: a venue's close
    /// is not an outage, whatever else its quiet adds (`stale`).
    rejected_open: Gauge,
    /// Symbols stale, their market not closed: quiet while it is open.
    stale_open: Gauge,
    /// Symbols stale at the source, their market not closed (a close's
    /// quiet makes every symbol so in time).
    stale_at_source_open: Gauge,
    offset: Gauge,
    silence: Gauge,
    last_lost: u64,
    last_resets: u64,
    /// A gap burst in progress: (first sample that saw it, ns; ticks lost before it).
    burst: Option<(u64, u64)>,
    /// Whether the state table's first refusal of one of its symbols is logged.
    table_full_logged: bool,
    /// Offset samples merged, as last logged.
    merges_logged: Tenfold,
    /// Re-requests not sent, as last logged.
    request_errors_logged: Tenfold,
    /// Datagrams on the feed's channel from another sender than its
    /// server, as last logged (a line count: carried on).
    wrong_source_logged: Tenfold,
    /// Orders and symbols refused for room, as last logged.
    orders_refused_logged: Tenfold,
    symbols_refused_logged: Tenfold,
    /// Its publication was made anew since its counters were last read:
    /// the next read starts its feed-kept counts over.
    started_over: bool,
}

/// A count logged when first seen and again only once it has grown
/// tenfold since: the count as last logged.
#[derive(Default)]
struct Tenfold(u64);

impl Tenfold {
    /// Whether `n` is to be logged now (then remembered). A count below
    /// the last logged one started over (a publication made anew).
    fn rose(&mut self, n: u64) -> bool {
        if n < self.0 {
            self.0 = 0;
        }
        let log = n > 0 && n >= self.0.saturating_mul(10);
        if log {
            self.0 = n;
        }
        log
    }
}

/// A histogram bucket's `le` label: its bound in seconds, `+Inf` for the
/// open one.
fn le(bound_ns: u64) -> String {
    if bound_ns == u64::MAX {
        "+Inf".into()
    } else {
        format!("{}", bound_ns as f64 / 1e9)
    }
}

/// Whether descriptor `d` of a feed with `lines` lines is exported: it has
/// a metric name, and its line (if it is a line's) is one the feed has.
fn exported(d: &Descriptor, lines: usize) -> bool {
    let line = ["A", "B"].iter().position(|l| *l == d.value);
    !d.metric.is_empty()
        && matches!(
            d.kind,
            CounterKind::Counter | CounterKind::Gauge | CounterKind::Flag | CounterKind::Bucket
        )
        && (d.key != "line" || line.is_some_and(|i| i < lines.max(1)))
}

/// Every metric name that counters described by `descriptors` are
/// exported under (a histogram's as `_bucket` and `_count`).
pub fn metric_names(descriptors: &[Descriptor]) -> BTreeSet<String> {
    descriptors
        .iter()
        .filter(|d| exported(d, 2))
        .flat_map(|d| match d.kind {
            CounterKind::Bucket => vec![
                format!("{PREFIX}{}_bucket", d.metric),
                format!("{PREFIX}{}_count", d.metric),
            ],
            _ => vec![format!("{PREFIX}{}", d.metric)],
        })
        .collect()
}

/// `# HELP` of a metric exported from descriptor `d`: what the publication
/// says of it (kind, the name `stat` shows, its label, its hint), the same
/// for every protocol.
fn describe(name: &str, d: &Descriptor) {
    let what = match d.kind {
        CounterKind::Counter => "total",
        CounterKind::Gauge => "level",
        CounterKind::Flag => "flag (1 when set)",
        _ => "histogram, seconds",
    };
    // A family of several descriptors (one per label value) is described
    // once, by the first to come: by its metric, without any one
    // member's name or hint.
    let (shown, label, note) = match d.key.is_empty() {
        true => (d.name.as_str(), String::new(), d.note.trim()),
        false => (d.metric.as_str(), format!(", by {}", d.key), ""),
    };
    let note = if note.is_empty() {
        String::new()
    } else {
        format!(" {note}")
    };
    let help = format!(
        "Per feed: the feed's `{shown}` {what}{label}, as `tickguard stat` shows it{note}."
    );
    match d.kind {
        CounterKind::Counter => metrics::describe_counter!(name.to_string(), help),
        CounterKind::Bucket => {
            // Exported as a run of cumulative `_bucket{le}` counters and a
            // `_count` (registered as counters): described by those names.
            metrics::describe_counter!(format!("{name}_bucket"), help.clone());
            metrics::describe_counter!(
                format!("{name}_count"),
                format!("{help} (the count of all its buckets)")
            );
        }
        _ => metrics::describe_gauge!(name.to_string(), help),
    }
}

/// `# HELP` of the metrics every sidecar exports, whatever its feeds.
fn describe_fixed() {
    use metrics::{describe_counter, describe_gauge};
    describe_gauge!(
        "tickguard_symbols",
        "Symbols of a feed by verdict (a rejected one under each of its reasons), as a gateway reads them now."
    );
    describe_gauge!(
        "tickguard_symbols_rejected_open",
        "Symbols of a feed rejected while not closed (closed not among their reasons), as a gateway reads them now."
    );
    describe_gauge!(
        "tickguard_symbols_stale_open",
        "Symbols of a feed stale while not closed (closed neither among their reasons nor set on them or their feed), as a gateway reads them now."
    );
    describe_gauge!(
        "tickguard_symbols_stale_at_source_open",
        "Symbols of a feed stale at the source while not closed (closed neither among their reasons nor set on them or their feed), as a gateway reads them now."
    );
    describe_gauge!(
        "tickguard_clock_offset_seconds",
        "Local clock minus the provider's, as the feed's offset estimator holds it (seconds)."
    );
    describe_gauge!(
        "tickguard_feed_silence_seconds",
        "Seconds since anything proved the feed alive (0 before its first packet)."
    );
    describe_counter!(
        "tickguard_receiver_polls_total",
        "Receive cycles of the receiver thread, busy (datagrams read) or idle."
    );
    describe_counter!(
        "tickguard_receiver_datagrams_total",
        "Datagrams the receiver thread read, every line of every feed."
    );
    describe_gauge!(
        "tickguard_receiver_worst_cycle_seconds",
        "Longest receive cycle since start (seconds): the longest the thread was deaf."
    );
    describe_counter!(
        "tickguard_receiver_batches_total",
        "Receive calls by how many datagrams they returned."
    );
    describe_counter!(
        "tickguard_verdict_change_drops_total",
        "Verdict changes not delivered because their subscriber was behind."
    );
    describe_counter!(
        "tickguard_oversized_datagrams_total",
        "Datagrams larger than the receive slot, truncated and dropped."
    );
    describe_counter!(
        "tickguard_socket_errors_total",
        "Receive calls that failed with an error other than nothing to read."
    );
    describe_gauge!(
        "tickguard_writer_heartbeat_age_seconds",
        "Age of the publication's heartbeat (seconds): over dead_after_ms, readers call the writer dead."
    );
    describe_counter!(
        "tickguard_writer_dead_samples_total",
        "Samples of the heartbeat (one per [metrics] interval_ms) that found it older than [sidecar] dead_after_ms: readers took the writer for dead then."
    );
}

/// Registers the metrics of feed `feed`'s counters as `descriptors`
/// describe them (a feed of `lines` lines).
fn register(feed: &str, lines: usize, descriptors: &[Descriptor]) -> Vec<Exported> {
    let labels = |d: &Descriptor| {
        let mut l = vec![Label::new("feed", feed.to_string())];
        if !d.key.is_empty() {
            l.push(Label::new(d.key.clone(), d.value.clone()));
        }
        l
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < descriptors.len() {
        let d = &descriptors[i];
        if !exported(d, lines) {
            i += 1;
            continue;
        }
        let name = format!("{PREFIX}{}", d.metric);
        describe(&name, d);
        match d.kind {
            CounterKind::Counter => out.push(Exported::Counter(
                i,
                Total::new(metrics::counter!(name, labels(d))),
            )),
            CounterKind::Bucket => {
                // The run of buckets of this metric, bounds ascending.
                let mut buckets = Vec::new();
                while let Some(b) = descriptors
                    .get(i)
                    .filter(|b| b.kind == CounterKind::Bucket && b.metric == d.metric)
                {
                    let mut l = labels(b);
                    l.push(Label::new("le", le(b.param)));
                    let c = metrics::counter!(format!("{name}_bucket"), l);
                    buckets.push((i, Total::new(c)));
                    i += 1;
                }
                let count = metrics::counter!(format!("{name}_count"), labels(d));
                out.push(Exported::Histogram(buckets, Total::new(count)));
                continue;
            }
            _ => out.push(Exported::Gauge(i, metrics::gauge!(name, labels(d)))),
        }
        i += 1;
    }
    out
}

struct ReceiverMetrics {
    cycles_busy: Counter,
    cycles_idle: Counter,
    datagrams: Counter,
    worst_cycle: Gauge,
    batches: Vec<Counter>,
    change_drops: Counter,
    oversized: Counter,
    last_oversized: u64,
    socket_errors: Counter,
    /// Socket errors already logged.
    last_socket_errors: u64,
    /// Whether the recording's stop is logged.
    record_stop_logged: bool,
    heartbeat_age: Gauge,
    /// Samples that found the heartbeat older than `dead_after_ns`: a
    /// stall between two scrapes, which the age's gauge, read only at
    /// each scrape, misses.
    dead_samples: Counter,
    /// [sidecar] dead_after_ms, ns.
    dead_after_ns: u64,
    /// While samples find the heartbeat past `dead_after_ns`: the oldest
    /// age one found, s (logged when the stall began and when it ended).
    stalled: Option<f64>,
    /// The last heartbeat read (writer's clock, ns), for the age when the
    /// header cannot be read.
    last_beat: Option<u64>,
}

/// Installs the Prometheus recorder and serves it over HTTP on `listen`
/// (`/metrics`; [`http`]), from a thread of its own.
pub fn install(listen: SocketAddr) -> anyhow::Result<()> {
    let listener = std::net::TcpListener::bind(listen)
        .map_err(|e| anyhow::anyhow!("metrics listener on {listen}: {e}"))?;
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .map_err(|e| anyhow::anyhow!("metrics listener on {listen}: {e}"))?;
    std::thread::Builder::new()
        .name("tickguard-http".into())
        .spawn(move || {
            injected_panic();
            http::serve(listener, handle)
        })
        .map_err(|e| anyhow::anyhow!("metrics listener on {listen}: {e}"))?;
    tracing::info!(%listen, "metrics at http://{listen}/metrics");
    Ok(())
}

/// Starts the thread that samples every `interval` (start it once the
/// publication is this process's, so that it never reads a previous
/// run's): it logs what an operator must hear of (a line down, kernel
/// drops, gap bursts, socket errors, a full state table, a stopped
/// recording) and, with
/// `export` (an exporter [`install`]ed), feeds the metrics. It stops when
/// `stop` is set and the thread unparked.
pub fn spawn(
    config: &Config,
    shared: Arc<SharedStats>,
    stop: Arc<AtomicBool>,
    interval: Duration,
    export: bool,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let config = config.clone();
    std::thread::Builder::new()
        .name("tickguard-metrics".into())
        .spawn(move || {
            injected_panic();
            let mut m = Monitor::new(&config, shared);
            m.export = export;
            while !stop.load(Ordering::Relaxed) {
                m.sample(now_ns());
                std::thread::park_timeout(interval);
            }
            m.last_sample(now_ns());
        })
}

/// Debug builds only (the tests' binaries): a panic on the thread that
/// `TICKGUARD_TEST_PANIC` names, as a thread's defect would, to show that a
/// helper thread's failure stops the sidecar. Nothing in release builds.
fn injected_panic() {
    #[cfg(debug_assertions)]
    if let Some(name) = std::thread::current().name() {
        if std::env::var_os("TICKGUARD_TEST_PANIC").is_some_and(|want| want == name) {
            panic!("a panic injected for a test on {name}");
        }
    }
}

/// Reads the publication and the receiver's statistics into metrics and logs.
pub struct Monitor {
    reader: Reader,
    shared: Arc<SharedStats>,
    feeds: Vec<FeedMetrics>,
    lines: Vec<LineState>,
    receiver: ReceiverMetrics,
    /// Each feed's counters as last read (one consistent set per feed).
    counters: Vec<Option<[u64; counter::ALL]>>,
    /// The writer (pid, start time) whose counters were last read:
    /// another is a publication made anew, whose feeds' counters started
    /// over (their lines' carried on).
    writer: Option<(u64, u64)>,
    /// Whether an exporter reads the metrics: without one, the work that
    /// only feeds them (every slot's verdict) is skipped.
    pub export: bool,
}

impl Monitor {
    /// Registers every metric for `config`'s feeds and lines.
    pub fn new(config: &Config, shared: Arc<SharedStats>) -> Monitor {
        describe_fixed();
        let feeds = config
            .feeds
            .iter()
            .map(|f| {
                let feed = f.name.clone();
                FeedMetrics {
                    name: feed.clone(),
                    exported: None,
                    verdicts: VERDICTS
                        .iter()
                        .map(|v| metrics::gauge!("tickguard_symbols", "feed" => feed.clone(), "verdict" => *v))
                        .collect(),
                    rejected_open: metrics::gauge!("tickguard_symbols_rejected_open", "feed" => feed.clone()),
                    stale_open: metrics::gauge!("tickguard_symbols_stale_open", "feed" => feed.clone()),
                    stale_at_source_open: metrics::gauge!(
                        "tickguard_symbols_stale_at_source_open",
                        "feed" => feed.clone()
                    ),
                    offset: metrics::gauge!("tickguard_clock_offset_seconds", "feed" => feed.clone()),
                    silence: metrics::gauge!("tickguard_feed_silence_seconds", "feed" => feed.clone()),
                    last_lost: 0,
                    last_resets: 0,
                    burst: None,
                    table_full_logged: false,
                    merges_logged: Tenfold::default(),
                    request_errors_logged: Tenfold::default(),
                    wrong_source_logged: Tenfold::default(),
                    orders_refused_logged: Tenfold::default(),
                    symbols_refused_logged: Tenfold::default(),
                    started_over: false,
                }
            })
            .collect();
        let mut lines = Vec::new();
        for (id, f) in config.feeds.iter().enumerate() {
            for (i, addr) in f.lines.iter().enumerate() {
                lines.push(LineState {
                    feed: id as u16,
                    index: i,
                    name: f.name.clone(),
                    addr: addr.to_string(),
                    last_packets: 0,
                    last_change_ns: now_ns(),
                    down: false,
                    last_drops: 0,
                    quiet_ns: f.thresholds.stale_ns,
                    read: false,
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
            last_oversized: 0,
            socket_errors: metrics::counter!("tickguard_socket_errors_total"),
            last_socket_errors: 0,
            record_stop_logged: false,
            heartbeat_age: metrics::gauge!("tickguard_writer_heartbeat_age_seconds"),
            dead_samples: metrics::counter!("tickguard_writer_dead_samples_total"),
            dead_after_ns: config.sidecar.dead_after_ns,
            stalled: None,
            last_beat: None,
        };
        Monitor {
            reader: Reader::open_with(&config.sidecar.shm_path, config.sidecar.dead_after_ns),
            shared,
            feeds,
            lines,
            receiver,
            counters: Vec::new(),
            writer: None,
            export: true,
        }
    }

    /// One sample at local time `now` (ns since the Unix epoch).
    pub fn sample(&mut self, now: u64) {
        self.sample_with(now, false);
    }

    /// The sample after the receive thread ended: the publication this
    /// process's writer closed (its counters published last, just before)
    /// is read as a healthy one, so that what changed in the last interval
    /// is logged and exported too.
    pub fn last_sample(&mut self, now: u64) {
        self.sample_with(now, true);
    }

    fn sample_with(&mut self, now: u64, closing: bool) {
        // Another file (after a refresh): its descriptors are compared
        // with those registered below.
        if !self.reader.health(now).is_ok() {
            self.reader.refresh();
        }
        // Counters only from a publication in good health: a file cut
        // under the writer maps as zeros (its stamp consistent), and a
        // zero read there would be taken for a restart, the count before
        // it added again once the file made anew carries it on. (Closed
        // at its end by the writer of this process, the one last read:
        // whole. Another writer's closed file at the path is not read.)
        let health = self.reader.health(now);
        let r = &self.reader;
        let writer = r.writer_pid().zip(r.receiver().map(|(start, _, _)| start));
        // Only this process's writer's: another writer that took the path
        // (this one's file lost) is not its to tell, one of another pid
        // namespace with this pid neither (told by its start time, once
        // this writer published).
        let own_start = self.shared.publication_start();
        let ours = writer.is_some_and(|(pid, start)| {
            pid == u64::from(std::process::id()) && (own_start == 0 || start == own_start)
        });
        let healthy = ours
            && (health.is_ok()
                || (closing
                    && health == Health::WriterClosed
                    && self.writer.is_some()
                    && writer == self.writer));
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
        if s.oversized > rm.last_oversized {
            // No feed counts them (dropped before any sees them), so the
            // log is where one without metrics hears of them.
            tracing::warn!(
                new = s.oversized - rm.last_oversized,
                total = s.oversized,
                "datagrams larger than the receive buffer (9,216 bytes) dropped on the receive thread"
            );
        }
        rm.last_oversized = s.oversized;
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
        if s.record_stopped && !rm.record_stop_logged {
            if s.record_errno == crate::sidecar::RECORD_BOUND_REACHED {
                tracing::warn!(
                    unrecorded = s.unrecorded,
                    "recording stopped at its --record-max-mb bound; the file holds what was applied before it"
                );
            } else if s.record_errno == crate::sidecar::RECORD_FELL_BEHIND {
                tracing::error!(
                    unrecorded = s.unrecorded,
                    pool_bytes = crate::sidecar::RECORD_QUEUE_BYTES,
                    "recording stopped: the disk fell behind the feed by its queue (about the pool's bytes); the file holds what was applied before it"
                );
            } else {
                tracing::error!(
                    error = %std::io::Error::from_raw_os_error(s.record_errno),
                    unrecorded = s.unrecorded,
                    "recording stopped at a failed write; the file holds what was applied before it"
                );
            }
            rm.record_stop_logged = true;
        }
        // Another writer's heartbeat is not this one's: its age grows from
        // the last of its own (the file gateways find at the path is not
        // this process's, which the log has said to stop).
        let beat = r.heartbeat_ns().filter(|&b| b > 0 && ours);
        let age = heartbeat_age(beat, &mut rm.last_beat, now);
        rm.heartbeat_age.set(age);
        // (Before the first heartbeat, none is late; after the writer
        // closed the publication, readers see it closed, not dead.)
        let open = !closing && health != Health::WriterClosed;
        if open && age.is_finite() && age > rm.dead_after_ns as f64 / 1e9 {
            rm.dead_samples.increment(1);
            if rm.stalled.is_none() {
                tracing::error!(
                    heartbeat_age_s = age,
                    dead_after_ms = rm.dead_after_ns / 1_000_000,
                    "the receive thread's heartbeat is older than [sidecar] dead_after_ms: \
                     every reader answers stale until it beats again"
                );
            }
            rm.stalled = Some(rm.stalled.map_or(age, |a| a.max(age)));
        } else if let Some(oldest) = rm.stalled.take().filter(|_| open) {
            tracing::warn!(
                oldest_heartbeat_age_s = oldest,
                "the receive thread beats again"
            );
        }

        self.counters.clear();
        self.counters
            .extend((0..self.feeds.len() as u16).map(|id| r.counters(id).filter(|_| healthy)));
        // A publication made anew (by this writer: the monitor lives and
        // dies with it) since counters were last read: each count the
        // feeds keep starts over, which a sample would otherwise see only
        // if it read one lower than before (not one that climbed back
        // past its old value in between).
        let anew = healthy && self.writer.is_some() && writer != self.writer;
        if healthy {
            self.writer = writer;
        }
        if anew {
            // What the logs compare with starts over with the feeds' own
            // counts (the lines' are carried on into the new file).
            for f in &mut self.feeds {
                f.last_lost = 0;
                f.last_resets = 0;
                f.merges_logged = Tenfold::default();
                f.request_errors_logged = Tenfold::default();
                f.orders_refused_logged = Tenfold::default();
                f.symbols_refused_logged = Tenfold::default();
                if let Some((since, _)) = f.burst {
                    f.burst = Some((since, 0));
                }
            }
        }
        // A feed whose counters could not be read consistently this time
        // (the writer taken off its core mid-publication) is skipped, not
        // read as zeros: a zero would end a line's silence and then report
        // every drop, loss and reset so far as new.
        let counters = &self.counters;
        let get =
            |feed: u16, k: usize| counters.get(feed as usize).copied().flatten().map(|c| c[k]);
        for l in &mut self.lines {
            let get = |k: usize| get(l.feed, k + l.index.min(1));
            let (Some(packets), Some(drops)) =
                (get(counter::LINE_PACKETS), get(counter::LINE_KERNEL_DROPS))
            else {
                l.read = false;
                continue;
            };
            l.read = true;
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
            }
        }
        // Down: silent past LINE_DOWN_NS while a line of its feed received
        // within it, or past the feed's stale threshold too.
        for k in 0..self.lines.len() {
            let l = &self.lines[k];
            let silent = now.saturating_sub(l.last_change_ns);
            // (A line that never received is down too once another line
            // of its feed did: a join broken from the start.)
            let fed = self
                .lines
                .iter()
                .any(|o| o.feed == l.feed && o.last_packets > 0);
            if !l.read || l.down || !fed || silent <= LINE_DOWN_NS {
                continue;
            }
            let others_flowing = self.lines.iter().any(|o| {
                o.feed == l.feed
                    && o.index != l.index
                    && now.saturating_sub(o.last_change_ns) <= LINE_DOWN_NS
            });
            if others_flowing || silent > l.quiet_ns {
                tracing::warn!(feed = %l.name, line = %l.addr, silent_ms = silent / 1_000_000, "line down");
                self.lines[k].down = true;
            }
        }

        // Every slot's verdict feeds gauges alone.
        // Each as a check would answer it now (all stale when the writer
        // is not healthy): its slot read with its feed's offset and status.
        // Another writer's symbols, offsets and statuses are not this
        // one's either (nor are its feeds this one's, by index): the
        // gauges keep their last values.
        let judged = if self.export && ours {
            r.judged(now)
        } else {
            Vec::new()
        };
        for (id, f) in self.feeds.iter_mut().enumerate() {
            f.started_over |= anew;
            let id = id as u16;
            let get = |k: usize| get(id, k);
            let info = r.feeds().get(id as usize);
            let described = |e: &(usize, Vec<Descriptor>, Vec<Exported>)| {
                info.is_some_and(|i| i.lines == e.0 && i.counters == e.1)
            };
            // (A sample that reads no feed, the file unreadable, keeps what
            // is exported: registered anew, every count would start from 0
            // and stay at its old value until it passed it.)
            if info.is_some() && !f.exported.as_ref().is_some_and(described) {
                f.exported = info.filter(|i| !i.counters.is_empty()).map(|i| {
                    let e = register(&f.name, i.lines, &i.counters);
                    (i.lines, i.counters.clone(), e)
                });
            }
            // A writer killed inside the offset's write leaves its status
            // alone readable, inside the status's neither: what cannot be
            // read is skipped (the gauges keep their last values), never
            // read as zeros.
            let state = r.feed_state(id).filter(|_| ours);
            let offset = state.map(|(_, o)| o);
            let status = state
                .map(|(s, _)| s)
                .or_else(|| r.feed_status(id))
                .filter(|_| ours);
            let status_read = status.is_some();
            if let (Some((_, _, exported)), Some(info), Some(values), Some(status)) = (
                &mut f.exported,
                info,
                counters.get(id as usize).copied().flatten(),
                status,
            ) {
                let value = |i: usize| info.counters[i].value(&values, status.flags());
                if std::mem::take(&mut f.started_over) {
                    for e in exported.iter_mut() {
                        e.start_over(|i| crate::sidecar::carried_counter(info.counters[i].id));
                    }
                }
                for e in exported {
                    match e {
                        Exported::Counter(i, c) => c.set(value(*i)),
                        Exported::Gauge(i, g) => g.set(value(*i) as f64),
                        Exported::Histogram(buckets, count) => {
                            let mut below = 0;
                            for (i, c) in buckets {
                                below += value(*i);
                                c.set(below);
                            }
                            count.set(below);
                        }
                    }
                }
            }
            if let Some(offset) = offset {
                f.offset.set(offset as f64 / 1e9);
            }
            let status = status.unwrap_or_default();
            let mut by = [0u64; VERDICTS.len()];
            let (mut rejected_open, mut stale_open, mut source_open) = (0u64, 0u64, 0u64);
            let mut last_alive = status.last_alive;
            for (rec, reasons) in judged.iter().filter(|(rec, _)| rec.feed == id) {
                last_alive = last_alive.max(rec.state.last_alive);
                if reasons.is_ok() {
                    by[0] += 1;
                } else if !(reasons.contains(Reasons::CLOSED) || rec.closed || status.closed) {
                    // (`no_quote` stands alone: a closed instrument whose
                    // book emptied at the close reads it without `closed`.)
                    rejected_open += 1;
                    stale_open += u64::from(reasons.contains(Reasons::STALE));
                    source_open += u64::from(reasons.contains(Reasons::STALE_AT_SOURCE));
                }
                for (i, (bit, _)) in Reasons::ORDER.iter().enumerate() {
                    if reasons.contains(*bit) {
                        by[i + 1] += 1;
                    }
                }
            }
            // Its symbols are judged with its offset and status: unread,
            // none is, and the counts keep their last values.
            if state.is_some() {
                for (g, v) in f.verdicts.iter().zip(by) {
                    g.set(v as f64);
                }
                f.rejected_open.set(rejected_open as f64);
                f.stale_open.set(stale_open as f64);
                f.stale_at_source_open.set(source_open as f64);
            }
            // 0 before the first packet (of this publication: a recreated
            // one starts over).
            if status_read {
                f.silence.set(match last_alive {
                    0 => 0.0,
                    t => now.saturating_sub(t) as f64 / 1e9,
                });
            }
            // Symbols without a slot are not published: a check finds
            // nothing and answers no_quote, whatever their books say.
            if let Some(refused) = get(counter::TABLE_FULL).filter(|&n| n > 0) {
                if !f.table_full_logged {
                    tracing::error!(
                        feed = %f.name,
                        refused,
                        "state table: no room for this feed's new symbols or names (the table is full, its free slots are held for other feeds, or the feed's own limit on symbols over a run is reached): checks of those are rejected (raise [state] capacity, or the feed's own limit)"
                    );
                    f.table_full_logged = true;
                }
            }
            // Once, and again only if it grows tenfold: a queue too small
            // merges on and on. (A publication made anew counts from 0.)
            if let Some(merged) = get(counter::OFFSET_MERGES).filter(|&n| f.merges_logged.rose(n)) {
                tracing::warn!(
                    feed = %f.name,
                    merged,
                    "clock offset: the estimator's queue was full and merged samples (keeping the lower offset): quotes may read older than a replay of the same datagrams shows (raise [sidecar] offset_queue)"
                );
            }
            // The re-request server unreachable, or answering from another
            // address: otherwise told only by gaps given up, which look
            // like the network's loss. Once, and again tenfold.
            if let Some(failed) =
                get(counter::REQUEST_ERRORS).filter(|&n| f.request_errors_logged.rose(n))
            {
                tracing::warn!(
                    feed = %f.name,
                    failed,
                    "re-requests could not be sent (no route, a firewall, a full socket buffer): the gaps they ask for are given up at their deadline (check the feed's `recovery` address and the route to it)"
                );
            }
            if let Some(dropped) =
                get(counter::CHANNEL_WRONG_SOURCE).filter(|&n| f.wrong_source_logged.rose(n))
            {
                tracing::warn!(
                    feed = %f.name,
                    dropped,
                    "datagrams on the feed's recovery channel from another address than its `recovery` server, dropped unread: a server answering from another address or port fills no gap (set `recovery` to the address its answers come from)"
                );
            }
            // A book missing an order, or a stock refused its symbol: the
            // whole feed reads suspect until the session changes or a
            // snapshot that refused nothing merges, and only a larger
            // bound and a restart mend it. Once, and again tenfold.
            // (By the descriptors' names: another protocol lays out the
            // extension's ids for itself.)
            let named = |name: &str| {
                info.and_then(|i| {
                    (i.counters.iter()).find(|d| d.name == name && d.kind == CounterKind::Counter)
                })
                .map(|d| d.id)
            };
            for (key, refused, what, logged) in [
                (
                    named("orders_refused"),
                    "adds",
                    "refused for room (the feed's `max_orders` live orders reached): its books miss those orders",
                    &mut f.orders_refused_logged,
                ),
                (
                    named("symbols_refused"),
                    "messages",
                    "naming a new stock refused it a symbol (the feed's `max_symbols` reached): that stock's orders change no book",
                    &mut f.symbols_refused_logged,
                ),
            ] {
                if let Some(n) = key.and_then(get).filter(|&n| logged.rose(n)) {
                    tracing::error!(
                        feed = %f.name,
                        refused = n,
                        "{refused} {what}; every symbol of the feed reads suspect until the session changes or a snapshot that refused nothing merges (raise the bound and restart)"
                    );
                }
            }
            let (Some(lost), Some(resets)) = (get(counter::TICKS_LOST), get(counter::RESETS))
            else {
                continue;
            };
            // A burst of loss is a state: logged when it starts and when a
            // sample interval passes without new loss.
            match f.burst {
                None if lost > f.last_lost => {
                    tracing::warn!(feed = %f.name, lost = lost - f.last_lost, total = lost, "gap burst started: ticks lost on both lines");
                    f.burst = Some((now, f.last_lost));
                }
                Some((since, before)) if lost == f.last_lost => {
                    tracing::info!(
                        feed = %f.name,
                        // (A publication made again counts from 0.)
                        lost = lost.saturating_sub(before),
                        lasted_ms = now.saturating_sub(since) / 1_000_000,
                        total = lost,
                        "gap burst ended"
                    );
                    f.burst = None;
                }
                _ => {}
            }
            f.last_lost = lost;
            if resets > f.last_resets {
                tracing::warn!(feed = %f.name, resets = resets - f.last_resets, "provider reset: sequences went back");
            }
            f.last_resets = resets;
        }
    }
}

/// The writer's heartbeat age at `now` (s), from the heartbeat read
/// (`None`: the header unreadable, or read as zeros, a file cut under a
/// writer): since the last one read, which ages on (an age kept at its
/// last healthy value would hide a publication no reader can use), or
/// infinite before any.
fn heartbeat_age(beat: Option<u64>, last: &mut Option<u64>, now: u64) -> f64 {
    if beat.is_some() {
        *last = beat;
    }
    last.map_or(f64::INFINITY, |b| now.saturating_sub(b) as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sidecar::RunStats;

    /// A header that cannot be read (or reads as zeros) ages the
    /// heartbeat from the last one read, rather than keeping its last
    /// healthy age.
    #[test]
    fn an_unreadable_heartbeat_ages_from_the_last_one_read() {
        const S: u64 = 1_000_000_000;
        let mut last = None;
        assert_eq!(heartbeat_age(None, &mut last, 10 * S), f64::INFINITY);
        assert_eq!(heartbeat_age(Some(10 * S), &mut last, 10 * S), 0.0);
        assert_eq!(heartbeat_age(None, &mut last, 13 * S), 3.0);
        assert_eq!(heartbeat_age(Some(14 * S), &mut last, 14 * S), 0.0);
    }
    use crate::test_log::logs_of;

    /// A sidecar of one feed (kind full) on a free loopback port, publishing in
    /// `dir`, metrics off.
    fn one_feed_sidecar(dir: &std::path::Path) -> (Config, crate::sidecar::Sidecar) {
        sidecar_of(dir, 1, 500)
    }

    /// [`one_feed_sidecar`] with a monitor of it that no exporter reads,
    /// its writer having just beat (at the time returned).
    fn one_feed_monitored(dir: &std::path::Path) -> (crate::sidecar::Sidecar, Monitor, u64) {
        let (config, sidecar) = one_feed_sidecar(dir);
        let m = Monitor::new(&config, Arc::new(SharedStats::default()));
        let t = now_ns();
        sidecar.publication().heartbeat(t);
        (sidecar, m, t)
    }

    /// A sidecar of one feed of `lines` lines (1 or 2) and
    /// `stale_threshold_ms`, publishing in `dir`.
    fn sidecar_of(
        dir: &std::path::Path,
        lines: usize,
        stale_ms: u64,
    ) -> (Config, crate::sidecar::Sidecar) {
        let lines: Vec<String> = (0..lines)
            .map(|_| format!("\"127.0.0.1:{}\"", crate::demo::free_port().unwrap()))
            .collect();
        let config = Config::parse(
            &format!(
                "[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{}\"\n[[feed]]\nname = \"lp1\"\n\
                 kind = \"full\"\nlines = [{}]\nstale_threshold_ms = {stale_ms}\n\
                 source_threshold_ms = 2000\nclock_offset = 0\n",
                dir.join("shm").display(),
                lines.join(", ")
            ),
            "test.toml",
        )
        .unwrap();
        let sidecar = crate::sidecar::Sidecar::start(&config).unwrap();
        (config, sidecar)
    }

    /// The value `handle` renders for the series `name` (no labels).
    fn exported(handle: &metrics_exporter_prometheus::PrometheusHandle, name: &str) -> Option<f64> {
        handle
            .render()
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
    }

    /// The exported heartbeat age, sampled with the publication's file
    /// gone (unreadable): it grows from the last heartbeat read, not kept
    /// at its last healthy value.
    #[test]
    fn the_exported_heartbeat_age_grows_while_the_header_is_unreadable() {
        const S: u64 = 1_000_000_000;
        let dir = tempfile::tempdir().unwrap();
        let (config, sidecar) = one_feed_sidecar(dir.path());
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let t = now_ns();
        let p = sidecar.publication();
        p.heartbeat(t);
        let mut m = metrics::with_local_recorder(&recorder, || {
            let mut m = Monitor::new(&config, Arc::new(SharedStats::default()));
            m.sample(t);
            m
        });
        let age = || exported(&handle, "tickguard_writer_heartbeat_age_seconds").expect("the age");
        assert!(age() < 1.0);
        p.close();
        drop((p, sidecar));
        std::fs::remove_file(dir.path().join("shm")).ok();
        metrics::with_local_recorder(&recorder, || m.sample(t + 3 * S));
        assert_eq!(age(), 3.0);
    }

    /// A stall between two scrapes: the age's gauge reads young again at
    /// the scrape, the count of samples that found the writer dead (past
    /// [sidecar] dead_after_ms, 100 ms here) keeps it.
    #[test]
    fn samples_finding_the_writer_dead_are_counted() {
        const MS: u64 = 1_000_000;
        let dir = tempfile::tempdir().unwrap();
        let (config, sidecar) = one_feed_sidecar(dir.path());
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let t = now_ns();
        let p = sidecar.publication();
        let mut m = metrics::with_local_recorder(&recorder, || {
            Monitor::new(&config, Arc::new(SharedStats::default()))
        });
        let dead = || exported(&handle, "tickguard_writer_dead_samples_total").expect("the count");
        p.heartbeat(t);
        let mut log = String::new();
        for (beat, at) in [(t, t + 50 * MS), (t, t + 100 * MS), (t, t + 350 * MS)] {
            p.heartbeat(beat);
            log += &logs_of(|| metrics::with_local_recorder(&recorder, || m.sample(at)));
        }
        assert_eq!(dead(), 1.0, "past 100 ms once");
        // Told in one line when the stall is first seen, and once more
        // when it ends, with the oldest age seen.
        assert_eq!(log.matches("heartbeat is older than").count(), 1, "{log}");
        assert!(
            log.contains("heartbeat_age_s=0.35 dead_after_ms=100"),
            "{log}"
        );
        log = logs_of(|| metrics::with_local_recorder(&recorder, || m.sample(t + 400 * MS)));
        assert!(log.is_empty(), "once a stall: {log}");
        p.heartbeat(t + 700 * MS);
        log = logs_of(|| metrics::with_local_recorder(&recorder, || m.sample(t + 701 * MS)));
        assert_eq!(dead(), 2.0, "still dead at 400 ms");
        assert!(log.contains("beats again"), "{log}");
        assert!(log.contains("oldest_heartbeat_age_s=0.4"), "{log}");
        // Closed by its writer (a stop, the recording's sync still to
        // come): readers see it closed, not dead.
        p.close();
        metrics::with_local_recorder(&recorder, || m.sample(t + 2_000 * MS));
        metrics::with_local_recorder(&recorder, || m.last_sample(t + 3_000 * MS));
        assert_eq!(dead(), 2.0, "closed, not dead");
        drop((p, sidecar));
    }

    /// Before any heartbeat of this writer's (none read yet: another
    /// process's file at the path, or none), no sample finds it dead.
    #[test]
    fn no_sample_before_the_first_heartbeat_finds_the_writer_dead() {
        const MS: u64 = 1_000_000;
        let dir = tempfile::tempdir().unwrap();
        let mut config = crate::config::Config::parse(
            &format!(
                "[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{}\"\n[[feed]]\nname = \"lp1\"\n\
                 kind = \"full\"\nlines = [\"127.0.0.1:1\"]\nstale_threshold_ms = 500\n\
                 source_threshold_ms = 2000\n",
                dir.path().join("none").display()
            ),
            "test.toml",
        )
        .unwrap();
        config.sidecar.dead_after_ns = 100 * MS;
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let t = now_ns();
        let mut m = metrics::with_local_recorder(&recorder, || {
            Monitor::new(&config, Arc::new(SharedStats::default()))
        });
        for k in 0..3 {
            metrics::with_local_recorder(&recorder, || m.sample(t + k * 500 * MS));
        }
        let dead = exported(&handle, "tickguard_writer_dead_samples_total");
        assert_eq!(dead, Some(0.0));
    }

    /// A publication made anew: each count the feeds keep starts over
    /// (what it came to kept in the base), those carried over (the lines')
    /// go on; a histogram's buckets and count start over together.
    #[test]
    fn a_publication_made_anew_starts_the_feeds_counts_over() {
        let total = |count| {
            let mut t = Total::new(Counter::noop());
            t.set(count);
            t
        };
        let mut kept = Exported::Counter(0, total(3));
        let mut carried = Exported::Counter(1, total(7));
        let mut histogram = Exported::Histogram(vec![(2, total(4)), (3, total(5))], total(5));
        for e in [&mut kept, &mut carried, &mut histogram] {
            e.start_over(|i| i == 1);
        }
        // The new file's counts: 5 for the feed's (climbed past its old
        // 3 before any sample), 9 for the carried line's.
        let (Exported::Counter(_, k), Exported::Counter(_, c)) = (&mut kept, &mut carried) else {
            unreachable!()
        };
        k.set(5);
        c.set(9);
        assert_eq!((k.base + k.last, c.base + c.last), (8, 9));
        let Exported::Histogram(buckets, count) = &histogram else {
            unreachable!()
        };
        assert!(buckets.iter().all(|(_, t)| t.last == 0) && count.last == 0);
        assert_eq!(
            (buckets[0].1.base, buckets[1].1.base, count.base),
            (4, 5, 5)
        );
    }

    /// The monitor tells a publication made anew by its writer's start
    /// time: a feed count that climbed back past its old value before the
    /// first sample of the new file is added to the old, not taken for
    /// the same count going on.
    #[test]
    fn a_count_that_climbed_back_on_a_new_publication_is_added() {
        let dir = tempfile::tempdir().unwrap();
        let (config, first) = one_feed_sidecar(dir.path());
        let mut m = Monitor::new(&config, Arc::new(SharedStats::default()));
        let lost = |m: &Monitor| {
            let (_, descriptors, exported) = m.feeds[0].exported.as_ref().unwrap();
            exported
                .iter()
                .find_map(|e| match e {
                    Exported::Counter(i, t) if descriptors[*i].id == counter::TICKS_LOST => {
                        Some(t.base + t.last)
                    }
                    _ => None,
                })
                .unwrap()
        };
        let p = first.publication();
        p.heartbeat(now_ns());
        p.write_counters(|| p.set_counter(0, counter::TICKS_LOST, 3));
        m.sample(now_ns());
        assert_eq!(lost(&m), 3);
        // The same writer's publication made anew: its feed counts from 0,
        // 5 by the first sample.
        p.close();
        drop((p, first));
        // A sample while no file is there: what is exported is kept.
        std::fs::remove_file(dir.path().join("shm")).ok();
        m.sample(now_ns());
        std::thread::sleep(std::time::Duration::from_millis(2));
        let (_, second) = one_feed_sidecar(dir.path());
        let p = second.publication();
        p.heartbeat(now_ns());
        p.write_counters(|| p.set_counter(0, counter::TICKS_LOST, 5));
        m.sample(now_ns());
        assert_eq!(lost(&m), 8);
    }

    /// The logs compare a publication made anew with its own counts: a
    /// loss on it below the old file's total is logged, by its amount.
    #[test]
    fn losses_on_a_publication_made_anew_are_logged() {
        let dir = tempfile::tempdir().unwrap();
        let (config, first) = one_feed_sidecar(dir.path());
        let mut m = Monitor::new(&config, Arc::new(SharedStats::default()));
        // The lines' counts are carried into a file made anew (as the
        // sidecar's `carry` does): 7 kernel drops stay 7, nothing new.
        let sample = |m: &mut Monitor, p: &crate::shm::Publication, lost: u64| {
            p.heartbeat(now_ns());
            p.write_counters(|| {
                p.set_counter(0, counter::TICKS_LOST, lost);
                p.set_counter(0, counter::LINE_KERNEL_DROPS, 7);
            });
            logs_of(|| m.sample(now_ns()))
        };
        let p = first.publication();
        let log = sample(&mut m, &p, 10);
        assert!(
            log.contains("gap burst started") && log.contains("kernel dropped"),
            "{log}"
        );
        assert!(sample(&mut m, &p, 10).contains("gap burst ended"));
        p.close();
        drop((p, first));
        std::fs::remove_file(dir.path().join("shm")).ok();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let (_, second) = one_feed_sidecar(dir.path());
        let log = sample(&mut m, &second.publication(), 3);
        assert!(
            log.contains("gap burst started") && log.contains("lost=3"),
            "{log}"
        );
        assert!(!log.contains("kernel dropped"), "{log}");
    }

    /// A line is logged down when silent for a second while the other
    /// line of its feed receives (redundancy lost); both lines silent (a
    /// quiet market) only past the feed's stale threshold.
    #[test]
    fn a_line_is_down_when_the_other_flows_or_past_the_stale_threshold() {
        const S: u64 = 1_000_000_000;
        let dir = tempfile::tempdir().unwrap();
        let (config, sidecar) = sidecar_of(dir.path(), 2, 5_000);
        let p = sidecar.publication();
        let mut m = Monitor::new(&config, Arc::new(SharedStats::default()));
        let t = now_ns();
        let at = |m: &mut Monitor, dt: u64, a: u64, b: u64| {
            p.heartbeat(t + dt);
            p.write_counters(|| {
                p.set_counter(0, counter::LINE_PACKETS, a);
                p.set_counter(0, counter::LINE_PACKETS + 1, b);
            });
            logs_of(|| m.sample(t + dt))
        };
        let downs = |log: &str| log.matches("line down").count();
        // B never receives while A does (its join broken from the start):
        // down too, once A has flowed a while.
        let mut never = Monitor::new(&config, Arc::new(SharedStats::default()));
        assert_eq!(downs(&at(&mut never, 0, 5, 0)), 0);
        let log = at(&mut never, 2 * S + S / 2, 6, 0);
        assert_eq!(downs(&log), 1, "{log}");
        assert!(log.contains(&config.feeds[0].lines[1].to_string()), "{log}");
        assert_eq!(downs(&at(&mut m, 0, 5, 5)), 0);
        // Both silent 2 s, the threshold 5 s: a quiet market.
        assert_eq!(downs(&at(&mut m, 2 * S, 5, 5)), 0);
        // A receives, B does not: B down.
        let log = at(&mut m, 2 * S + S / 2, 6, 5);
        assert_eq!(downs(&log), 1, "{log}");
        assert!(log.contains(&config.feeds[0].lines[1].to_string()), "{log}");
        // A silent past the threshold: down too.
        assert_eq!(downs(&at(&mut m, 5 * S, 6, 5)), 0);
        let log = at(&mut m, 8 * S, 6, 5);
        assert_eq!(downs(&log), 1, "{log}");
        assert!(log.contains(&config.feeds[0].lines[0].to_string()), "{log}");
        // Both back.
        assert_eq!(at(&mut m, 9 * S, 7, 6).matches("line up").count(), 2);
    }

    /// One feed's sidecar in `dir`, its heartbeat at `t` (now), and a
    /// monitor that sampled it at `t`.
    fn sampled(dir: &std::path::Path) -> (Config, crate::sidecar::Sidecar, Monitor, u64) {
        let (config, sidecar) = one_feed_sidecar(dir);
        let t = now_ns();
        sidecar.publication().heartbeat(t);
        let mut m = Monitor::new(&config, Arc::new(SharedStats::default()));
        m.sample(t);
        (config, sidecar, m, t)
    }

    /// A publication at the path that names another writer (this one's
    /// file lost, another process took the path) is not this monitor's to
    /// tell: none of its counters is read, nor its heartbeat (nor its
    /// symbols, offsets and statuses, read under the same guard).
    #[test]
    fn another_writers_publication_is_not_read() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let (config, sidecar, mut m, t) = sampled(dir.path());
        let p = sidecar.publication();
        p.write_counters(|| p.set_counter(0, counter::LINE_KERNEL_DROPS, 3));
        assert!(logs_of(|| m.sample(t + 1)).contains("kernel dropped"));
        // Another writer's publication (its header naming pid 1) takes
        // the path, its counters moved on; this writer's file, lost, is
        // closed.
        let other_dir = tempfile::tempdir().unwrap();
        let (other_config, other_sidecar) = one_feed_sidecar(other_dir.path());
        let other_path = &other_config.sidecar.shm_path;
        let other = other_sidecar.publication();
        other.write_counters(|| other.set_counter(0, counter::LINE_KERNEL_DROPS, 9));
        other.heartbeat(t + 2);
        other.ready();
        let at = std::mem::offset_of!(tickguard_reader::layout::Header, writer_pid) as u64;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(other_path)
            .unwrap();
        file.write_all_at(&1u64.to_le_bytes(), at).unwrap();
        std::fs::rename(other_path, &config.sidecar.shm_path).unwrap();
        p.close();
        let log = logs_of(|| m.sample(t + 2));
        assert_eq!(m.reader.writer_pid(), Some(1), "the other file is mapped");
        assert!(!log.contains("kernel dropped"), "{log}");
        // Its heartbeat is not this writer's: the age runs from this
        // writer's last one (the other's is fresh).
        assert_eq!(m.reader.heartbeat_ns(), Some(t + 2));
        assert_eq!(m.receiver.last_beat, Some(t));
    }

    /// A publication at the path whose header names this pid but another
    /// start time (a sidecar of another pid namespace, pid 1 as this one,
    /// sharing the path) is not this monitor's either: told by the start
    /// time of the publication this writer serves.
    #[test]
    fn a_publication_of_this_pid_and_another_start_is_not_read() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let (config, sidecar) = one_feed_sidecar(dir.path());
        let t = now_ns();
        let p = sidecar.publication();
        p.heartbeat(t);
        let mut m = Monitor::new(&config, sidecar.shared_stats());
        m.sample(t);
        p.write_counters(|| p.set_counter(0, counter::LINE_KERNEL_DROPS, 3));
        assert!(logs_of(|| m.sample(t + 1)).contains("kernel dropped"));
        // Its start time written over: as another writer's header.
        let at = std::mem::offset_of!(tickguard_reader::layout::Header, start_time_ns) as u64;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&config.sidecar.shm_path)
            .unwrap();
        file.write_all_at(&(p.start_time_ns() - 1).to_le_bytes(), at)
            .unwrap();
        p.write_counters(|| p.set_counter(0, counter::LINE_KERNEL_DROPS, 9));
        p.heartbeat(t + 2);
        let log = logs_of(|| m.sample(t + 2));
        assert_eq!(m.reader.writer_pid(), Some(u64::from(std::process::id())));
        assert!(!log.contains("kernel dropped"), "{log}");
        assert_eq!(m.receiver.last_beat, Some(t));
    }

    /// What changed in the last interval before the writer closed its
    /// publication (a stop) is logged by the last sample, which reads the
    /// file this process's writer closed; a sample of a closed file while
    /// running reads none of its counters.
    #[test]
    fn the_last_sample_reads_the_counters_of_the_closed_publication() {
        let dir = tempfile::tempdir().unwrap();
        let (config, sidecar, mut m, t) = sampled(dir.path());
        let p = sidecar.publication();
        let mut other = Monitor::new(&config, Arc::new(SharedStats::default()));
        other.sample(t);
        p.write_counters(|| p.set_counter(0, counter::LINE_KERNEL_DROPS, 7));
        p.close();
        let log = logs_of(|| m.sample(t + 1));
        assert!(!log.contains("kernel dropped"), "{log}");
        let log = logs_of(|| m.last_sample(t + 2));
        assert!(log.contains("kernel dropped datagrams"), "{log}");
        // Another writer's publication closed at the path by then: not
        // this run's, not read.
        drop((p, sidecar));
        std::fs::remove_file(dir.path().join("shm")).ok();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let (_, second) = one_feed_sidecar(dir.path());
        let p = second.publication();
        p.heartbeat(t + 3);
        p.write_counters(|| p.set_counter(0, counter::LINE_KERNEL_DROPS, 20));
        p.close();
        let log = logs_of(|| other.last_sample(t + 4));
        assert!(!log.contains("kernel dropped"), "{log}");
    }

    /// A feed whose counters cannot be read consistently (the writer in the
    /// middle of publishing them) is skipped for that sample: read as
    /// zeros, the next sample would report every drop and loss so far as
    /// new.
    #[test]
    fn unreadable_counters_are_skipped_not_read_as_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let (config, sidecar) = one_feed_sidecar(dir.path());
        let p = sidecar.publication();
        p.write_counters(|| {
            p.set_counter(0, counter::TICKS_LOST, 5);
            p.set_counter(0, counter::LINE_KERNEL_DROPS, 7);
        });
        let mut m = Monitor::new(&config, Arc::new(SharedStats::default()));
        let t = now_ns();
        let log = logs_of(|| m.sample(t));
        assert!(log.contains("gap burst started"), "{log}");
        assert!(log.contains("kernel dropped datagrams"), "{log}");
        // Held mid-write for the whole sample: nothing to read.
        let mut held = String::new();
        p.write_counters(|| held = logs_of(|| m.sample(t + 1)));
        assert!(!held.contains("WARN"), "{held}");
        let log = logs_of(|| m.sample(t + 2));
        assert!(!log.contains("kernel dropped"), "{log}");
        assert!(!log.contains("gap burst started"), "{log}");
    }

    /// Offset samples merged for room are logged when first seen, and
    /// again only once they have grown tenfold.
    #[test]
    fn offset_merges_are_logged_first_and_tenfold() {
        let dir = tempfile::tempdir().unwrap();
        let (sidecar, mut m, t) = one_feed_monitored(dir.path());
        let p = sidecar.publication();
        let merges = |n| p.write_counters(|| p.set_counter(0, counter::OFFSET_MERGES, n));
        let said = |m: &mut Monitor, k: u64| logs_of(|| m.sample(t + k)).contains("merged samples");
        assert!(!said(&mut m, 0));
        merges(3);
        assert!(said(&mut m, 1));
        merges(29);
        assert!(!said(&mut m, 2));
        merges(30);
        assert!(said(&mut m, 3));
        // A publication made anew: counted from 0 again, logged again.
        merges(0);
        assert!(!said(&mut m, 4));
        merges(2);
        assert!(said(&mut m, 5));
    }

    /// Re-requests that could not be sent and datagrams from another
    /// sender than the re-request server are logged when first seen and
    /// again tenfold, each naming its feed and what to check: the only
    /// other sign of either is gaps given up, which read as the network's.
    #[test]
    fn recovery_failures_are_logged_first_and_tenfold() {
        let dir = tempfile::tempdir().unwrap();
        let (sidecar, mut m, t) = one_feed_monitored(dir.path());
        let p = sidecar.publication();
        for (id, said) in [
            (counter::REQUEST_ERRORS, "re-requests could not be sent"),
            (
                counter::CHANNEL_WRONG_SOURCE,
                "from another address than its `recovery` server",
            ),
        ] {
            let set = |n| p.write_counters(|| p.set_counter(0, id, n));
            let logged = |m: &mut Monitor, k: u64| {
                let log = logs_of(|| m.sample(t + k));
                log.contains(said)
                    .then(|| assert!(log.contains("feed=") && log.contains("WARN"), "{log}"))
                    .is_some()
            };
            assert!(!logged(&mut m, 0));
            set(2);
            assert!(logged(&mut m, 1));
            assert!(!logged(&mut m, 2));
            set(19);
            assert!(!logged(&mut m, 3));
            set(20);
            assert!(logged(&mut m, 4));
            set(0);
        }
    }

    /// Orders or symbols refused for room are found by their descriptors'
    /// names (a feed of another protocol lays the same ids out for its own
    /// counters): a feed without them logs nothing at those ids. (Logged
    /// by the feed that has them: `logs::refusals_for_room_are_logged_by_run`.)
    #[test]
    fn refusals_are_read_by_their_descriptors_names() {
        let dir = tempfile::tempdir().unwrap();
        let (sidecar, mut m, t) = one_feed_monitored(dir.path());
        let p = sidecar.publication();
        p.write_counters(|| p.set_counter(0, counter::ORDERS_REFUSED, 5));
        p.write_counters(|| p.set_counter(0, counter::SYMBOLS_REFUSED, 5));
        let log = logs_of(|| m.sample(t));
        assert!(!log.contains("refused"), "{log}");
    }

    /// Counters are read only from a publication in good health: one cut
    /// under the writer maps as zeros, which read would pass for a
    /// restart, and every count so far would be added again (and logged
    /// as new) once the file made anew carried it on.
    #[test]
    fn counters_of_a_publication_in_bad_health_are_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let (sidecar, mut m, t) = one_feed_monitored(dir.path());
        let p = sidecar.publication();
        let drops = |n| p.write_counters(|| p.set_counter(0, counter::LINE_KERNEL_DROPS, n));
        drops(7);
        assert!(logs_of(|| m.sample(t)).contains("kernel dropped datagrams"));
        // The writer's heartbeat a minute old: not in good health.
        drops(0);
        let log = logs_of(|| m.sample(t + 60_000_000_000));
        assert!(!log.contains("kernel dropped"), "{log}");
        drops(7);
        let log = logs_of(|| m.sample(t + 1));
        assert!(!log.contains("kernel dropped"), "{log}");
    }

    /// The receive thread only counts socket errors, oversized datagrams
    /// and a recording's failed write; the metrics thread logs each change
    /// of a count, once (socket errors with the last error), and the
    /// recording's stop once.
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
        // Oversized datagrams, which no feed counts: logged per change too.
        st.oversized = 2;
        shared.store(&st);
        let log = logs_of(|| m.sample(t + 2));
        assert!(log.contains("larger than the receive buffer"), "{log}");
        assert!(log.contains("new=2 total=2"), "{log}");
        assert!(!logs_of(|| m.sample(t + 2)).contains("larger than"));
        st.socket_errors = 4;
        st.last_socket_errno = libc::ENOBUFS;
        shared.store(&st);
        let log = logs_of(|| m.sample(t + 3));
        assert!(log.contains("new=1 total=4"), "{log}");
        assert!(log.contains("No buffer space available"), "{log}");
        // A recording stopped by a failed write: logged once, with its error.
        st.record_stopped = true;
        st.record_errno = libc::ENOSPC;
        st.unrecorded = 7;
        shared.store(&st);
        let log = logs_of(|| m.sample(t + 4));
        assert!(log.contains("recording stopped at a failed write"), "{log}");
        assert!(log.contains("No space left on device"), "{log}");
        assert!(log.contains("unrecorded=7"), "{log}");
        st.unrecorded = 9;
        shared.store(&st);
        assert!(!logs_of(|| m.sample(t + 5)).contains("recording stopped"));
        // Another run's recording, stopped by a disk fallen behind: told
        // as that, not as a failed write of no error.
        let shared = Arc::new(SharedStats::default());
        let mut m = Monitor::new(&config, shared.clone());
        st.record_errno = crate::sidecar::RECORD_FELL_BEHIND;
        shared.store(&st);
        let log = logs_of(|| m.sample(t + 6));
        assert!(log.contains("the disk fell behind the feed"), "{log}");
        assert!(log.contains("pool_bytes=33554432"), "{log}");
        assert!(!log.contains("failed write"), "{log}");
    }
}
