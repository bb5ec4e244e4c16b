//! Configuration: parsed from TOML into plain structs, then validated into a
//! resolved [`Config`]. Nothing is opened until validation has passed, and
//! every error is one line that names the file, the line and the key.
//! Every integer key has a [`Range`] (all in [`RANGES`]; README's
//! Configuration section lists them with the reasons for their bounds),
//! `dead_after_ms` is at least [`DEAD_AFTER_HEARTBEATS`] × `heartbeat_ms`, a
//! feed name is at most [`FEED_NAME_MAX`] printable ASCII bytes, and values
//! echoed in errors are escaped and cut.
//!
//! ```toml
//! [state]                            # optional
//! capacity = 65536                   # slots, one per (feed, symbol)
//!
//! [sidecar]                          # optional, the live receiver (`tickguard run`)
//! shm_path = "/dev/shm/tickguard"    # shared-memory publication, created fresh
//! shm_mode = "0640"
//! cpu = 1                            # pin the receiver thread (default: not pinned)
//! idle = "spin"                      # or "yield", "sleep"
//! idle_sleep_us = 50                 # with idle = "sleep"
//! rcvbuf_bytes = 8388608             # SO_RCVBUF requested per line
//! batch = 64                         # datagrams per recvmmsg
//! heartbeat_ms = 1                   # writer heartbeat period
//! dead_after_ms = 100                # readers treat an older heartbeat as a dead writer
//! offset_queue = 65536               # clock-offset window entries per feed, preallocated
//! interface = "0.0.0.0"              # interface address for multicast joins
//!
//! [metrics]                          # optional, Prometheus exporter of `run`
//! enabled = true
//! listen = "127.0.0.1:9187"          # GET /metrics
//! interval_ms = 250                  # refresh from the receiver's counters (and log feed changes)
//!
//! [log]
//! format = "plain"                   # or "json"; filter with RUST_LOG
//!
//! [[feed]]
//! name = "lp1"
//! kind = "full"                      # or "delta"
//! lines = ["239.1.1.1:30001", "239.1.1.2:30002"]
//! stale_threshold_ms = 500
//! source_threshold_ms = 2000
//! clock_offset = "auto"              # or a signed integer of nanoseconds (default "auto")
//! offset_window_ms = 60000           # used by "auto" (default 60000)
//! source = "10.0.0.5"                # optional: source-specific multicast join
//!
//! [[feed.symbol]]
//! name = "XAUUSD"
//! stale_threshold_ms = 2000          # each override optional
//! source_threshold_ms = 5000
//! ```

use crate::clock::OffsetMode;
use crate::state::FeedKind;
use crate::symbol::Symbol;
use crate::verdict::Thresholds;
use serde::Deserialize;
use std::fmt;
use std::net::SocketAddrV4;
use std::path::Path;

/// Default number of slots when the configuration names none.
pub const DEFAULT_CAPACITY: usize = 65_536;

const NS_PER_MS: u64 = 1_000_000;

/// A configuration problem: one line, naming the file and the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

/// What the receiver does when a poll finds nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Idle {
    /// Poll again at once: lowest latency, one core at 100%.
    Spin,
    /// Yield the CPU to other threads, then poll again.
    Yield,
    /// Sleep `idle_sleep_us`: for machines without a spare core.
    Sleep,
}

/// The live sidecar's settings (`[sidecar]`, every key optional).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SidecarConfig {
    /// Shared-memory file, created fresh at start.
    pub shm_path: std::path::PathBuf,
    /// Its permission bits.
    pub shm_mode: u32,
    /// CPU to pin the receiver thread to.
    pub cpu: Option<usize>,
    /// Idle strategy.
    pub idle: Idle,
    /// Sleep per idle poll with `Idle::Sleep`, µs.
    pub idle_sleep_us: u64,
    /// SO_RCVBUF requested per line socket, bytes.
    pub rcvbuf_bytes: usize,
    /// Datagrams per `recvmmsg` call.
    pub batch: usize,
    /// Writer heartbeat period, ns.
    pub heartbeat_ns: u64,
    /// Heartbeat age past which readers treat the writer as dead, ns.
    pub dead_after_ns: u64,
    /// Clock-offset queue entries per feed (preallocated).
    pub offset_queue: usize,
    /// Interface address multicast groups are joined on.
    pub interface: std::net::Ipv4Addr,
}

impl Default for SidecarConfig {
    fn default() -> Self {
        SidecarConfig {
            shm_path: "/dev/shm/tickguard".into(),
            shm_mode: 0o640,
            cpu: None,
            idle: Idle::Spin,
            idle_sleep_us: 50,
            rcvbuf_bytes: 8 << 20,
            batch: 64,
            heartbeat_ns: NS_PER_MS,
            dead_after_ns: 100 * NS_PER_MS,
            offset_queue: 65_536,
            interface: std::net::Ipv4Addr::UNSPECIFIED,
        }
    }
}

/// The Prometheus exporter (`[metrics]`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MetricsConfig {
    /// Serve `/metrics` at all.
    pub enabled: bool,
    /// Where (127.0.0.1 by default: expose it deliberately).
    pub listen: std::net::SocketAddr,
    /// How often the metrics are refreshed from the receiver's counters, ns.
    pub interval_ns: u64,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            enabled: true,
            listen: std::net::SocketAddr::from(([127, 0, 0, 1], 9187)),
            interval_ns: 250 * NS_PER_MS,
        }
    }
}

/// Log line format (`[log] format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Plain,
    /// One JSON object per line.
    Json,
}

/// The resolved configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Prometheus exporter.
    pub metrics: MetricsConfig,
    /// Log format.
    pub log_format: LogFormat,
    /// State table slots, one per (feed, symbol).
    pub capacity: usize,
    /// Live sidecar settings.
    pub sidecar: SidecarConfig,
    /// Feeds, in file order; a feed's id is its position.
    pub feeds: Vec<FeedConfig>,
}

/// One feed, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct FeedConfig {
    /// Unique name.
    pub name: String,
    /// The protocol the feed speaks.
    pub protocol: Protocol,
    /// Full or delta (SQF's `kind`; an ITCH feed is delta by nature).
    pub kind: FeedKind,
    /// The ITCH settings, for an `itch50` feed.
    pub itch: Option<ItchConfig>,
    /// Line A and, optionally, line B: destination `ip:port` of the datagrams.
    pub lines: Vec<SocketAddrV4>,
    /// Only accept multicast from this sender (source-specific join).
    pub source: Option<std::net::Ipv4Addr>,
    /// Thresholds for symbols without an override.
    pub thresholds: Thresholds,
    /// How the clock offset is obtained.
    pub offset: OffsetMode,
    /// Per-symbol thresholds, sorted by symbol key.
    pub overrides: Vec<(Symbol, Thresholds)>,
}

/// The protocol a feed speaks (`protocol`, "sqf" when absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// SQF v1 (`../shared/spec/sqf-v1.md`).
    Sqf,
    /// Nasdaq TotalView-ITCH 5.0 over MoldUDP64 (`../shared/spec/itch50-v1.md`).
    Itch50,
}

impl Protocol {
    /// Every protocol, by code.
    pub const ALL: [Protocol; 2] = [Protocol::Sqf, Protocol::Itch50];

    /// The protocol's code in the publication (a feed's word 72, and
    /// `include/tickguard.h`): stable, the next number for a new protocol.
    pub const fn code(self) -> u64 {
        match self {
            Protocol::Sqf => 0,
            Protocol::Itch50 => 1,
        }
    }

    /// The protocol of `code`; `None` for a code this build does not know.
    pub fn from_code(code: u64) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.code() == code)
    }

    /// The name as written in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Sqf => "sqf",
            Protocol::Itch50 => "itch50",
        }
    }
}

/// An `itch50` feed's settings (spec itch50 §6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItchConfig {
    /// IANA time zone of the exchange (midnight of the session date).
    pub timezone: String,
    /// A gap open longer than this is given up, ns.
    pub gap_timeout_ns: u64,
    /// The re-request server, if any.
    pub recovery: Option<SocketAddrV4>,
    /// Where recovery answers arrive (`0.0.0.0:P`: any address, port P;
    /// port 0: none in replay, an ephemeral port live).
    pub recovery_listen: SocketAddrV4,
    /// Most messages held back after a packet.
    pub max_held: usize,
    /// Most live orders the feed's books hold; an add beyond is refused and
    /// the feed is `suspect` until the session changes.
    pub max_orders: usize,
    /// A session's first packet beyond `1 + join_gap_max` is a mid-session join.
    pub join_gap_max: u64,
    /// Most messages one re-request asks for.
    pub request_max: u16,
    /// The same missing sequence is re-requested at most this often, ns.
    pub request_interval_ns: u64,
    /// Most re-requests a second, over every gap.
    pub request_rate: u32,
}

impl FeedConfig {
    /// Thresholds in force for `symbol`.
    pub fn thresholds_for(&self, symbol: Symbol) -> Thresholds {
        match self.overrides.binary_search_by_key(&symbol, |(s, _)| *s) {
            Ok(i) => self.overrides[i].1,
            Err(_) => self.thresholds,
        }
    }
}

/// A value with where it stood in the file (byte offsets), for error lines.
type Sp<T> = toml::Spanned<T>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    state: Option<RawState>,
    sidecar: Option<RawSidecar>,
    metrics: Option<RawMetrics>,
    log: Option<RawLog>,
    #[serde(default)]
    feed: Vec<RawFeed>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawState {
    capacity: Option<Sp<i64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawMetrics {
    enabled: Option<bool>,
    listen: Option<Sp<String>>,
    interval_ms: Option<Sp<i64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLog {
    format: Option<LogFormat>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSidecar {
    shm_path: Option<Sp<String>>,
    shm_mode: Option<Sp<String>>,
    cpu: Option<Sp<i64>>,
    idle: Option<Idle>,
    idle_sleep_us: Option<Sp<i64>>,
    rcvbuf_bytes: Option<Sp<i64>>,
    batch: Option<Sp<i64>>,
    heartbeat_ms: Option<Sp<i64>>,
    dead_after_ms: Option<Sp<i64>>,
    offset_queue: Option<Sp<i64>>,
    interface: Option<Sp<String>>,
}

/// `kind` as written: [`FeedKind`]'s names.
#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Full,
    Delta,
}

impl From<Kind> for FeedKind {
    fn from(k: Kind) -> FeedKind {
        match k {
            Kind::Full => FeedKind::Full,
            Kind::Delta => FeedKind::Delta,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFeed {
    name: Sp<String>,
    protocol: Option<Sp<Protocol>>,
    source: Option<Sp<String>>,
    kind: Option<Sp<Kind>>,
    timezone: Option<Sp<String>>,
    gap_timeout_ms: Option<Sp<i64>>,
    recovery: Option<Sp<String>>,
    recovery_listen: Option<Sp<String>>,
    max_held: Option<Sp<i64>>,
    max_orders: Option<Sp<i64>>,
    join_gap_max: Option<Sp<i64>>,
    request_max: Option<Sp<i64>>,
    request_interval_ms: Option<Sp<i64>>,
    request_rate: Option<Sp<i64>>,
    lines: Sp<Vec<String>>,
    stale_threshold_ms: Sp<i64>,
    source_threshold_ms: Sp<i64>,
    clock_offset: Option<Sp<RawOffset>>,
    offset_window_ms: Option<Sp<i64>>,
    #[serde(default)]
    symbol: Vec<RawSymbol>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSymbol {
    name: Sp<String>,
    stale_threshold_ms: Option<Sp<i64>>,
    source_threshold_ms: Option<Sp<i64>>,
}

/// `"auto"` or a signed integer of nanoseconds.
enum RawOffset {
    Auto,
    Fixed(i64),
}

impl<'de> Deserialize<'de> for RawOffset {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = RawOffset;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("\"auto\" or a signed integer of nanoseconds")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawOffset, E> {
                if v == "auto" {
                    Ok(RawOffset::Auto)
                } else {
                    Err(E::invalid_value(serde::de::Unexpected::Str(v), &self))
                }
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<RawOffset, E> {
                Ok(RawOffset::Fixed(v))
            }
        }
        d.deserialize_any(V)
    }
}

/// The accepted values of one integer key, both ends inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// The table the key is in, as written in the file (`[sidecar]`, `[[feed]]`).
    pub table: &'static str,
    /// The key.
    pub key: &'static str,
    /// Least accepted value.
    pub min: i64,
    /// Greatest accepted value.
    pub max: i64,
    /// The default, where the key is optional.
    pub default: Option<i64>,
    /// Unit of the value.
    pub unit: &'static str,
}

/// `[state] capacity`: up to 16 Mi slots (2 GiB of 128-byte slots, far
/// above any venue's symbol count; 2^32 would allocate 512 GiB).
pub const CAPACITY: Range = Range {
    table: "[state]",
    key: "capacity",
    min: 1,
    max: 1 << 24,
    default: Some(DEFAULT_CAPACITY as i64),
    unit: "slots",
};
/// `[sidecar] cpu`: a CPU number the affinity mask can hold.
pub const CPU: Range = Range {
    table: "[sidecar]",
    key: "cpu",
    min: 0,
    max: 1023,
    default: None,
    unit: "CPU number",
};
/// `[sidecar] idle_sleep_us`: at most 10 ms, so that a signal is seen promptly.
pub const IDLE_SLEEP_US: Range = Range {
    table: "[sidecar]",
    key: "idle_sleep_us",
    min: 1,
    max: 10_000,
    default: Some(50),
    unit: "µs",
};
/// `[sidecar] rcvbuf_bytes`: SO_RCVBUF requested per line (the kernel caps
/// it at `net.core.rmem_max`); 1 GiB keeps the kernel's doubled value in an `int`.
pub const RCVBUF_BYTES: Range = Range {
    table: "[sidecar]",
    key: "rcvbuf_bytes",
    min: 4096,
    max: 1 << 30,
    default: Some(8 << 20),
    unit: "bytes",
};
/// `[sidecar] batch`: datagrams per `recvmmsg` (the kernel's UIO_MAXIOV).
pub const BATCH: Range = Range {
    table: "[sidecar]",
    key: "batch",
    min: 1,
    max: 1024,
    default: Some(64),
    unit: "datagrams",
};
/// `[sidecar] heartbeat_ms`: the writer heartbeat period.
pub const HEARTBEAT_MS: Range = Range {
    table: "[sidecar]",
    key: "heartbeat_ms",
    min: 1,
    max: 1000,
    default: Some(1),
    unit: "ms",
};
/// `[sidecar] dead_after_ms`: also at least [`DEAD_AFTER_HEARTBEATS`] heartbeats.
pub const DEAD_AFTER_MS: Range = Range {
    table: "[sidecar]",
    key: "dead_after_ms",
    min: 3,
    max: 60_000,
    default: Some(100),
    unit: "ms",
};
/// `[sidecar] offset_queue`: clock-offset entries per feed, preallocated
/// (32 bytes each: 32 MiB per feed at the top of the range).
pub const OFFSET_QUEUE: Range = Range {
    table: "[sidecar]",
    key: "offset_queue",
    min: 2,
    max: 1 << 20,
    default: Some(65_536),
    unit: "entries",
};
/// `[metrics] interval_ms`: metrics refresh period.
pub const INTERVAL_MS: Range = Range {
    table: "[metrics]",
    key: "interval_ms",
    min: 10,
    max: 60_000,
    default: Some(250),
    unit: "ms",
};
/// `stale_threshold_ms` of a feed or symbol: up to a day.
pub const STALE_THRESHOLD_MS: Range = Range {
    table: "[[feed]], [[feed.symbol]]",
    key: "stale_threshold_ms",
    min: 1,
    max: 86_400_000,
    default: None,
    unit: "ms",
};
/// `source_threshold_ms` of a feed or symbol: up to a day.
pub const SOURCE_THRESHOLD_MS: Range = Range {
    table: "[[feed]], [[feed.symbol]]",
    key: "source_threshold_ms",
    min: 1,
    max: 86_400_000,
    default: None,
    unit: "ms",
};
/// A fixed `clock_offset`: at most a day either way.
pub const CLOCK_OFFSET: Range = Range {
    table: "[[feed]]",
    key: "clock_offset",
    min: -86_400_000_000_000,
    max: 86_400_000_000_000,
    default: None,
    unit: "ns",
};
/// `offset_window_ms`: up to an hour, which bounds replay's offset queue.
pub const OFFSET_WINDOW_MS: Range = Range {
    table: "[[feed]]",
    key: "offset_window_ms",
    min: 1,
    max: 3_600_000,
    default: Some(60_000),
    unit: "ms",
};

/// `[[feed]] gap_timeout_ms` (itch50): default 5 without a recovery server
/// (line B's copy may still come), 1,000 with one; at most an hour.
pub const GAP_TIMEOUT_MS: Range = Range {
    table: "[[feed]] itch50",
    key: "gap_timeout_ms",
    min: 1,
    max: 3_600_000,
    default: None,
    unit: "ms",
};

/// `[[feed]] max_held` (itch50): messages held back; a record is 64 bytes,
/// so the most (16 Mi) holds 1 GiB.
pub const MAX_HELD: Range = Range {
    table: "[[feed]] itch50",
    key: "max_held",
    min: 1,
    max: 16_777_216,
    default: Some(1_000_000),
    unit: "messages",
};

/// `[[feed]] max_orders` (itch50): live orders the feed's books hold. A
/// real day peaks at a few million; the order table beyond the fixed
/// window takes 34 to 69 bytes an order, so the default bounds it near
/// 1.1 GiB and the most near 9 GiB. An add beyond is refused, counted
/// (`orders_refused`) and makes the feed `suspect` until the session
/// changes: memory stays bounded when a venue or an injector never deletes.
pub const MAX_ORDERS: Range = Range {
    table: "[[feed]] itch50",
    key: "max_orders",
    min: 1,
    max: 1 << 27,
    default: Some(1 << 24),
    unit: "orders",
};

/// `[[feed]] join_gap_max` (itch50).
pub const JOIN_GAP_MAX: Range = Range {
    table: "[[feed]] itch50",
    key: "join_gap_max",
    min: 0,
    max: 1 << 40,
    default: Some(10_000),
    unit: "messages",
};

/// `[[feed]] request_max` (itch50): messages one re-request asks for; the
/// request's count is a u16, and 64 typical messages (about 30 bytes each)
/// fill one answer datagram.
pub const REQUEST_MAX: Range = Range {
    table: "[[feed]] itch50",
    key: "request_max",
    min: 1,
    max: 65_535,
    default: Some(64),
    unit: "messages",
};

/// `[[feed]] request_interval_ms` (itch50): a missing sequence is asked for
/// again at most this often; at most a minute.
pub const REQUEST_INTERVAL_MS: Range = Range {
    table: "[[feed]] itch50",
    key: "request_interval_ms",
    min: 1,
    max: 60_000,
    default: Some(10),
    unit: "ms",
};

/// `[[feed]] request_rate` (itch50): re-requests a second the feed sends in
/// all, over every open gap, in bursts of at most a hundredth of that (at
/// least one). 10,000 requests of 64 messages ask for 640,000 messages a
/// second, more than a busy feed carries; a venue's server that takes less
/// is told so here.
pub const REQUEST_RATE: Range = Range {
    table: "[[feed]] itch50",
    key: "request_rate",
    min: 1,
    max: 100_000,
    default: Some(10_000),
    unit: "requests/s",
};

/// Every integer key's range, in file order (the README's table lists them).
pub const RANGES: &[Range] = &[
    CAPACITY,
    CPU,
    IDLE_SLEEP_US,
    RCVBUF_BYTES,
    BATCH,
    HEARTBEAT_MS,
    DEAD_AFTER_MS,
    OFFSET_QUEUE,
    INTERVAL_MS,
    STALE_THRESHOLD_MS,
    SOURCE_THRESHOLD_MS,
    CLOCK_OFFSET,
    OFFSET_WINDOW_MS,
    GAP_TIMEOUT_MS,
    MAX_HELD,
    MAX_ORDERS,
    JOIN_GAP_MAX,
    REQUEST_MAX,
    REQUEST_INTERVAL_MS,
    REQUEST_RATE,
];

/// `dead_after_ms` must be at least this many heartbeat periods: with fewer,
/// a reader that looks just before a heartbeat lands sees a live writer as
/// dead (at 1×, most of the time).
pub const DEAD_AFTER_HEARTBEATS: u64 = 3;

/// Bytes of a feed name: what the shared memory's feed block holds.
pub const FEED_NAME_MAX: usize = 64;

/// Bytes read from a configuration file at most.
pub const FILE_MAX: u64 = 1 << 20;

/// Characters of a value, or of a line of the file, echoed in an error.
const ECHO_MAX: usize = 48;
/// Characters of a whole error line.
const ERROR_MAX: usize = 400;

impl Range {
    /// `v` if it is in range, else a problem at its line.
    fn check(&self, v: &Sp<i64>) -> Result<i64, Problem> {
        let x = *v.get_ref();
        if (self.min..=self.max).contains(&x) {
            return Ok(x);
        }
        let table = if self.table.starts_with("[[") {
            String::new()
        } else {
            format!("{} ", self.table)
        };
        Err(Problem::at(
            v,
            format!(
                "{table}{} = {x} is out of range: {} to {} {}",
                self.key, self.min, self.max, self.unit
            ),
        ))
    }

    /// `v` checked, or the default when absent.
    fn or_default(&self, v: &Option<Sp<i64>>) -> Result<u64, Problem> {
        match v {
            Some(v) => self.check(v).map(|x| x as u64),
            None => Ok(self.default.unwrap_or(self.min) as u64),
        }
    }
}

/// A problem found while resolving: a message and where in the file.
struct Problem {
    /// Byte offset in the file, when known.
    at: Option<usize>,
    msg: String,
}

impl Problem {
    fn at<T>(v: &Sp<T>, msg: String) -> Problem {
        Problem {
            at: Some(v.span().start),
            msg,
        }
    }

    fn anywhere(msg: String) -> Problem {
        Problem { at: None, msg }
    }

    /// The same problem with `prefix: ` before its message.
    fn within(self, prefix: &str) -> Problem {
        Problem {
            at: self.at,
            msg: format!("{prefix}: {}", self.msg),
        }
    }
}

/// `s` for an error line: quoted, control characters escaped, cut after
/// [`ECHO_MAX`] characters.
fn echo(s: &str) -> String {
    let mut out = String::from("'");
    for (i, c) in s.chars().enumerate() {
        if i == ECHO_MAX {
            out.push_str(&format!("… ({} bytes)", s.len()));
            break;
        }
        out.extend(c.escape_debug());
    }
    out.push('\'');
    out
}

/// `s` made safe for one line on a terminal: every control character
/// escaped, at most `max` characters (the last an ellipsis when cut).
pub fn one_line(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max));
    if max == 0 {
        return out;
    }
    let mut len = 0;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        let piece: String = match c.is_control() {
            true => c.escape_default().collect(),
            false => c.into(),
        };
        let n = piece.chars().count();
        // The last piece may take the room the ellipsis would.
        let room = match chars.peek() {
            Some(_) => max.saturating_sub(1),
            None => max,
        };
        if len + n > room {
            out.push('…');
            break;
        }
        out.push_str(&piece);
        len += n;
    }
    out
}

impl Config {
    /// Reads and validates a configuration file (at most [`FILE_MAX`] bytes).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        use std::io::Read;
        let name = path.display().to_string();
        let fail = |e: String| ConfigError(one_line(&format!("config {name}: {e}"), ERROR_MAX));
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(FILE_MAX + 1).read_to_end(&mut bytes))
            .map_err(|e| fail(e.to_string()))?;
        if bytes.len() as u64 > FILE_MAX {
            return Err(fail(format!("larger than {FILE_MAX} bytes")));
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            fail(format!(
                "not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ))
        })?;
        Config::parse(&text, &name)
    }

    /// Parses and validates configuration text; `name` is used in errors.
    pub fn parse(text: &str, name: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig =
            toml::from_str(text).map_err(|e| ConfigError(toml_error(name, text, &e)))?;
        resolve(raw).map_err(|p| ConfigError(located(name, text, p.at, &p.msg)))
    }

    /// The id (position) of the feed called `name`.
    pub fn feed_id(&self, name: &str) -> Option<u16> {
        self.feeds
            .iter()
            .position(|f| f.name == name)
            .map(|i| i as u16)
    }
}

/// The error line: file, line number of byte offset `at`, message.
fn located(name: &str, text: &str, at: Option<usize>, msg: &str) -> String {
    let line = match at {
        Some(at) => {
            let at = at.min(text.len());
            let line_no = text.as_bytes()[..at]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1;
            format!("config {name}: line {line_no}: {msg}")
        }
        None => format!("config {name}: {msg}"),
    };
    one_line(&line, ERROR_MAX)
}

/// The names a setting of type `T` takes, as serde lists them when given
/// one it does not know (`` `spin`, `yield`, `sleep` ``).
fn variants<T: serde::de::DeserializeOwned>() -> Option<String> {
    #[derive(Deserialize)]
    struct Probe<T> {
        #[allow(dead_code)]
        v: T,
    }
    let e = toml::from_str::<Probe<T>>("v = \"\"").err()?;
    // "expected one of `a`, `b`, `c`", or "expected `a` or `b`".
    let (_, names) = e.message().split_once(", expected ")?;
    let names = names.strip_prefix("one of ").unwrap_or(names);
    Some(names.trim().to_string())
}

/// What setting `key` takes, when TOML's error `msg` is about its value: a
/// number TOML cannot hold (2^63 and up) or one of the wrong type for an
/// integer setting (its range), or anything but a name for a setting of
/// named values (the names).
fn takes(key: &str, msg: &str) -> Option<String> {
    if msg.contains("wanted string") {
        return match key {
            "idle" => variants::<Idle>(),
            "format" => variants::<LogFormat>(),
            "protocol" => variants::<Protocol>(),
            "kind" => variants::<Kind>(),
            _ => None,
        };
    }
    if !(msg.contains("number") || msg.contains("invalid type")) {
        return None;
    }
    let r = RANGES.iter().find(|r| r.key == key)?;
    let auto = if r.key == CLOCK_OFFSET.key {
        " or \"auto\""
    } else {
        ""
    };
    Some(format!("{} to {} {}{auto}", r.min, r.max, r.unit))
}

/// One line from a TOML error: file, line, the offending line's text, and the message.
fn toml_error(name: &str, text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim().replace('\n', " ");
    match e.span() {
        Some(span) => {
            let at = span.start.min(text.len());
            let line_no = text.as_bytes()[..at]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            let line = text.split('\n').nth(line_no).unwrap_or("").trim();
            let key = line.split('=').next().unwrap_or("").trim();
            let accepts = takes(key, &msg).map_or(String::new(), |t| format!(" ({key} is {t})"));
            located(
                name,
                text,
                Some(at),
                &format!("{}: {msg}{accepts}", echo(line)),
            )
        }
        None => located(name, text, None, &msg),
    }
}

fn resolve(raw: RawConfig) -> Result<Config, Problem> {
    let capacity = match raw.state.map(|s| s.capacity) {
        Some(c) => CAPACITY.or_default(&c)? as usize,
        None => DEFAULT_CAPACITY,
    };
    let sidecar = resolve_sidecar(raw.sidecar.unwrap_or_default())?;
    let m = raw.metrics.unwrap_or_default();
    let d = MetricsConfig::default();
    let metrics = MetricsConfig {
        enabled: m.enabled.unwrap_or(d.enabled),
        listen: match &m.listen {
            None => d.listen,
            Some(l) => parsed(l, "[metrics] listen must be ip:port")?,
        },
        interval_ns: INTERVAL_MS.or_default(&m.interval_ms)? * NS_PER_MS,
    };
    let log_format = raw.log.and_then(|l| l.format).unwrap_or_default();
    if raw.feed.is_empty() {
        return Err(Problem::anywhere(
            "no [[feed]] table: at least one feed is needed".into(),
        ));
    }
    if raw.feed.len() > u16::MAX as usize {
        return Err(Problem::anywhere(format!(
            "{} feeds: at most {} are supported",
            raw.feed.len(),
            u16::MAX
        )));
    }
    let mut feeds: Vec<FeedConfig> = Vec::with_capacity(raw.feed.len());
    for f in raw.feed {
        let name_at = f.name.span().start;
        let lines_at = f.lines.span().start;
        let listen_at = f.recovery_listen.as_ref().map(|l| l.span().start);
        let feed = resolve_feed(f)?;
        if feeds.iter().any(|g| g.name == feed.name) {
            return Err(Problem {
                at: Some(name_at),
                msg: format!("feed {}: duplicate feed name", echo(&feed.name)),
            });
        }
        for line in &feed.lines {
            if let Some(g) = feeds.iter().find(|g| g.lines.contains(line)) {
                return Err(Problem {
                    at: Some(lines_at),
                    msg: format!(
                        "feed {}: line {line} is already used by feed {}",
                        echo(&feed.name),
                        echo(&g.name)
                    ),
                });
            }
        }
        // Two recovery channels that could take the same datagram: a
        // replay could not tell whose it is. (A channel may share a line's
        // port: a line's address is routed first, and live the channel's
        // socket takes its server's datagrams only.)
        if let Some(listen) = feed.itch.as_ref().map(|c| c.recovery_listen) {
            let other = feeds.iter().find_map(|g| {
                let l = g.itch.as_ref()?.recovery_listen;
                (listen_takes(listen, l) || listen_takes(l, listen)).then_some((g, l))
            });
            if let Some((g, l)) = other {
                return Err(Problem {
                    at: listen_at,
                    msg: format!(
                        "feed {}: recovery_listen {listen} overlaps feed {}'s recovery_listen {l}",
                        echo(&feed.name),
                        echo(&g.name)
                    ),
                });
            }
        }
        feeds.push(feed);
    }
    Ok(Config {
        metrics,
        log_format,
        capacity,
        sidecar,
        feeds,
    })
}

/// True when a recovery channel bound to `listen` takes datagrams addressed
/// to `dst` (spec itch50 §3.2): `0.0.0.0:P` any address with port `P`, port
/// 0 none.
pub fn listen_takes(listen: SocketAddrV4, dst: SocketAddrV4) -> bool {
    listen.port() != 0
        && listen.port() == dst.port()
        && (listen.ip().is_unspecified() || listen.ip() == dst.ip())
}

fn resolve_sidecar(s: RawSidecar) -> Result<SidecarConfig, Problem> {
    let d = SidecarConfig::default();
    let shm_mode = match &s.shm_mode {
        None => d.shm_mode,
        Some(m) => u32::from_str_radix(m.get_ref(), 8)
            .ok()
            .filter(|m| *m <= 0o777)
            .ok_or_else(|| {
                Problem::at(
                    m,
                    format!(
                        "[sidecar] shm_mode must be octal permission bits like \"0640\", got {}",
                        echo(m.get_ref())
                    ),
                )
            })?,
    };
    let cpu = match &s.cpu {
        None => None,
        Some(c) => Some(CPU.check(c)? as usize),
    };
    let interface = match &s.interface {
        None => d.interface,
        Some(i) => parsed(i, "[sidecar] interface must be an IPv4 address")?,
    };
    let shm_path = match &s.shm_path {
        None => d.shm_path,
        Some(p) if !p.get_ref().is_empty() && !p.get_ref().contains('\0') => p.get_ref().into(),
        Some(p) => {
            return Err(Problem::at(
                p,
                "[sidecar] shm_path must be a non-empty path without NUL bytes".into(),
            ))
        }
    };
    let heartbeat_ms = HEARTBEAT_MS.or_default(&s.heartbeat_ms)?;
    let dead_after_ms = DEAD_AFTER_MS.or_default(&s.dead_after_ms)?;
    if dead_after_ms < DEAD_AFTER_HEARTBEATS * heartbeat_ms {
        let at = s.dead_after_ms.as_ref().or(s.heartbeat_ms.as_ref());
        return Err(Problem {
            at: at.map(|v| v.span().start),
            msg: format!(
                "[sidecar] dead_after_ms = {dead_after_ms}{} must be at least \
                 {DEAD_AFTER_HEARTBEATS} × heartbeat_ms = {}: readers would see a live writer as dead",
                if s.dead_after_ms.is_none() { " (the default)" } else { "" },
                DEAD_AFTER_HEARTBEATS * heartbeat_ms
            ),
        });
    }
    Ok(SidecarConfig {
        shm_path,
        shm_mode,
        cpu,
        idle: s.idle.unwrap_or(d.idle),
        idle_sleep_us: IDLE_SLEEP_US.or_default(&s.idle_sleep_us)?,
        rcvbuf_bytes: RCVBUF_BYTES.or_default(&s.rcvbuf_bytes)? as usize,
        batch: BATCH.or_default(&s.batch)? as usize,
        heartbeat_ns: heartbeat_ms * NS_PER_MS,
        dead_after_ns: dead_after_ms * NS_PER_MS,
        offset_queue: OFFSET_QUEUE.or_default(&s.offset_queue)? as usize,
        interface,
    })
}

/// `v` parsed, or a problem saying it `must` be something else.
fn parsed<T: std::str::FromStr>(v: &Sp<String>, must: &str) -> Result<T, Problem> {
    v.get_ref()
        .parse()
        .map_err(|_| Problem::at(v, format!("{must}, got {}", echo(v.get_ref()))))
}

/// A feed name fits the shared memory and prints as it is.
fn valid_feed_name(name: &str) -> bool {
    (1..=FEED_NAME_MAX).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_graphic())
}

/// `v` in `range`, in ns.
fn ms_to_ns(range: &Range, v: &Sp<i64>) -> Result<u64, Problem> {
    Ok(range.check(v)? as u64 * NS_PER_MS)
}

fn resolve_feed(f: RawFeed) -> Result<FeedConfig, Problem> {
    if !valid_feed_name(f.name.get_ref()) {
        return Err(Problem::at(
            &f.name,
            format!(
                "feed name {} must be 1 to {FEED_NAME_MAX} printable ASCII characters, no spaces",
                echo(f.name.get_ref())
            ),
        ));
    }
    let name = f.name.get_ref().clone();
    let ctx = format!("feed {}", echo(&name));
    let err = |v: &Sp<Vec<String>>, msg: String| Problem::at(v, msg).within(&ctx);
    if f.lines.get_ref().is_empty() || f.lines.get_ref().len() > 2 {
        return Err(err(
            &f.lines,
            format!(
                "lines must list 1 or 2 ip:port (line A, optional line B), got {}",
                f.lines.get_ref().len()
            ),
        ));
    }
    let mut lines = Vec::with_capacity(2);
    for l in f.lines.get_ref() {
        let addr: SocketAddrV4 = l.parse().map_err(|_| {
            err(
                &f.lines,
                format!("lines: {} is not an IPv4 ip:port", echo(l)),
            )
        })?;
        if addr.port() == 0 {
            return Err(err(&f.lines, format!("lines: {} has port 0", echo(l))));
        }
        if lines.contains(&addr) {
            return Err(err(&f.lines, format!("lines: {} is listed twice", echo(l))));
        }
        lines.push(addr);
    }
    let source = match &f.source {
        None => None,
        Some(s) => {
            let ip: std::net::Ipv4Addr =
                parsed(s, "source must be an IPv4 address").map_err(|p| p.within(&ctx))?;
            if ip.is_multicast() || ip.is_broadcast() || ip.is_unspecified() {
                return Err(Problem::at(
                    s,
                    format!("source: {ip} must be the unicast address of the sender"),
                )
                .within(&ctx));
            }
            Some(ip)
        }
    };
    let in_feed = |p: Problem| p.within(&ctx);
    let thresholds = Thresholds {
        stale_ns: ms_to_ns(&STALE_THRESHOLD_MS, &f.stale_threshold_ms).map_err(in_feed)?,
        source_ns: ms_to_ns(&SOURCE_THRESHOLD_MS, &f.source_threshold_ms).map_err(in_feed)?,
    };
    let window_ns = OFFSET_WINDOW_MS
        .or_default(&f.offset_window_ms)
        .map_err(in_feed)?
        * NS_PER_MS;
    let offset = match &f.clock_offset {
        None => OffsetMode::Auto { window_ns },
        Some(o) => match o.get_ref() {
            RawOffset::Auto => OffsetMode::Auto { window_ns },
            RawOffset::Fixed(ns) => {
                let v = Sp::new(o.span(), *ns);
                OffsetMode::Fixed(CLOCK_OFFSET.check(&v).map_err(in_feed)?)
            }
        },
    };
    let mut overrides: Vec<(Symbol, Thresholds)> = Vec::with_capacity(f.symbol.len());
    for s in &f.symbol {
        let shown = echo(s.name.get_ref());
        let sctx = |p: Problem| p.within(&format!("{ctx}: symbol {shown}"));
        let sym = Symbol::parse(s.name.get_ref()).ok_or_else(|| {
            sctx(Problem::at(
                &s.name,
                "not a valid symbol (1 to 8 printable ASCII characters, no spaces)".into(),
            ))
        })?;
        if overrides.iter().any(|(o, _)| *o == sym) {
            return Err(sctx(Problem::at(&s.name, "listed twice".into())));
        }
        let th = Thresholds {
            stale_ns: match &s.stale_threshold_ms {
                Some(v) => ms_to_ns(&STALE_THRESHOLD_MS, v).map_err(sctx)?,
                None => thresholds.stale_ns,
            },
            source_ns: match &s.source_threshold_ms {
                Some(v) => ms_to_ns(&SOURCE_THRESHOLD_MS, v).map_err(sctx)?,
                None => thresholds.source_ns,
            },
        };
        overrides.push((sym, th));
    }
    overrides.sort_by_key(|(s, _)| *s);
    let protocol = f.protocol.as_ref().map_or(Protocol::Sqf, |p| *p.get_ref());
    let (kind, itch) = match protocol {
        Protocol::Sqf => {
            let itch_only = [
                f.timezone.as_ref().map(|v| ("timezone", v.span().start)),
                f.gap_timeout_ms
                    .as_ref()
                    .map(|v| ("gap_timeout_ms", v.span().start)),
                f.recovery.as_ref().map(|v| ("recovery", v.span().start)),
                f.recovery_listen
                    .as_ref()
                    .map(|v| ("recovery_listen", v.span().start)),
                f.max_held.as_ref().map(|v| ("max_held", v.span().start)),
                f.max_orders
                    .as_ref()
                    .map(|v| ("max_orders", v.span().start)),
                f.join_gap_max
                    .as_ref()
                    .map(|v| ("join_gap_max", v.span().start)),
                f.request_max
                    .as_ref()
                    .map(|v| ("request_max", v.span().start)),
                f.request_interval_ms
                    .as_ref()
                    .map(|v| ("request_interval_ms", v.span().start)),
                f.request_rate
                    .as_ref()
                    .map(|v| ("request_rate", v.span().start)),
            ];
            if let Some((key, at)) = itch_only.into_iter().flatten().next() {
                return Err(in_feed(Problem {
                    at: Some(at),
                    msg: format!("{key} applies only to protocol \"itch50\""),
                }));
            }
            let Some(kind) = &f.kind else {
                return Err(in_feed(Problem::at(
                    &f.name,
                    "missing key kind (\"full\" or \"delta\")".into(),
                )));
            };
            (FeedKind::from(*kind.get_ref()), None)
        }
        Protocol::Itch50 => {
            if let Some(k) = &f.kind {
                return Err(in_feed(Problem::at(
                    k,
                    "kind does not apply to protocol \"itch50\" (ITCH is a delta feed by nature)"
                        .into(),
                )));
            }
            (FeedKind::Delta, Some(resolve_itch(&f).map_err(in_feed)?))
        }
    };
    Ok(FeedConfig {
        name,
        protocol,
        kind,
        itch,
        lines,
        source,
        thresholds,
        offset,
        overrides,
    })
}

/// The itch50 keys of a feed.
fn resolve_itch(f: &RawFeed) -> Result<ItchConfig, Problem> {
    let timezone = match &f.timezone {
        None => "America/New_York".to_string(),
        Some(z) => {
            if jiff::tz::db().get(z.get_ref()).is_err() {
                return Err(Problem::at(
                    z,
                    format!(
                        "timezone {} is not an IANA time zone name",
                        echo(z.get_ref())
                    ),
                ));
            }
            z.get_ref().clone()
        }
    };
    let addr = |v: &Sp<String>, key: &str| -> Result<SocketAddrV4, Problem> {
        v.get_ref().parse().map_err(|_| {
            Problem::at(
                v,
                format!("{key}: {} is not an IPv4 ip:port", echo(v.get_ref())),
            )
        })
    };
    let recovery = match &f.recovery {
        None => None,
        Some(r) => {
            let a = addr(r, "recovery")?;
            if a.port() == 0 || a.ip().is_unspecified() || a.ip().is_multicast() {
                return Err(Problem::at(
                    r,
                    format!("recovery: {a} must be a unicast address with a port"),
                ));
            }
            Some(a)
        }
    };
    let recovery_listen = match &f.recovery_listen {
        None => SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0),
        Some(r) => {
            let a = addr(r, "recovery_listen")?;
            if a.ip().is_multicast() || a.ip().is_broadcast() {
                return Err(Problem::at(
                    r,
                    format!("recovery_listen: {a} must be a local unicast address or 0.0.0.0"),
                ));
            }
            a
        }
    };
    let gap_timeout_ms = match &f.gap_timeout_ms {
        Some(v) => GAP_TIMEOUT_MS.check(v)? as u64,
        None if recovery.is_some() => 1_000,
        None => 5,
    };
    Ok(ItchConfig {
        timezone,
        gap_timeout_ns: gap_timeout_ms * NS_PER_MS,
        recovery,
        recovery_listen,
        max_held: MAX_HELD.or_default(&f.max_held)? as usize,
        max_orders: MAX_ORDERS.or_default(&f.max_orders)? as usize,
        join_gap_max: JOIN_GAP_MAX.or_default(&f.join_gap_max)?,
        request_max: REQUEST_MAX.or_default(&f.request_max)? as u16,
        request_interval_ns: REQUEST_INTERVAL_MS.or_default(&f.request_interval_ms)? * NS_PER_MS,
        request_rate: REQUEST_RATE.or_default(&f.request_rate)? as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The publication's protocol codes are pinned (readers in other
    /// processes and `tickguard.h` depend on them) and round-trip.
    #[test]
    fn protocol_codes_are_pinned() {
        assert_eq!((Protocol::Sqf.code(), Protocol::Itch50.code()), (0, 1));
        for p in Protocol::ALL {
            assert_eq!(Protocol::from_code(p.code()), Some(p));
        }
        assert_eq!(Protocol::from_code(2), None);
    }

    const SPEC_EXAMPLE: &str = r#"
[[feed]]
name = "lp1"
kind = "full"                      # or "delta"
lines = ["239.1.1.1:30001", "239.1.1.2:30002"]   # line A, optional line B
stale_threshold_ms = 500
source_threshold_ms = 2000
clock_offset = "auto"              # or a signed integer of nanoseconds
offset_window_ms = 60000           # used by "auto"

[[feed.symbol]]                    # optional per-symbol overrides
name = "XAUUSD"
stale_threshold_ms = 2000
source_threshold_ms = 5000
"#;

    fn err(text: &str) -> String {
        Config::parse(text, "t.toml").unwrap_err().to_string()
    }

    #[test]
    fn spec_example_parses() {
        let c = Config::parse(SPEC_EXAMPLE, "t.toml").unwrap();
        assert_eq!(c.capacity, DEFAULT_CAPACITY);
        assert!(c.capacity >= 65_536);
        let f = &c.feeds[0];
        assert_eq!(f.name, "lp1");
        assert_eq!(f.kind, FeedKind::Full);
        assert_eq!(f.lines.len(), 2);
        assert_eq!(
            f.thresholds,
            Thresholds {
                stale_ns: 500_000_000,
                source_ns: 2_000_000_000
            }
        );
        assert_eq!(
            f.offset,
            OffsetMode::Auto {
                window_ns: 60_000_000_000
            }
        );
        let xau = Symbol::parse("XAUUSD").unwrap();
        assert_eq!(
            f.thresholds_for(xau),
            Thresholds {
                stale_ns: 2_000_000_000,
                source_ns: 5_000_000_000
            }
        );
        assert_eq!(
            f.thresholds_for(Symbol::parse("EURUSD").unwrap()),
            f.thresholds
        );
        assert_eq!(c.feed_id("lp1"), Some(0));
        assert_eq!(c.feed_id("nope"), None);
    }

    #[test]
    fn re_request_keys_default_and_apply_to_itch50_only() {
        let itch = "[[feed]]\nname = \"n\"\nprotocol = \"itch50\"\nlines = [\"127.0.0.1:4000\"]\nstale_threshold_ms = 1\nsource_threshold_ms = 1\n";
        let c = Config::parse(itch, "t.toml").unwrap();
        let i = c.feeds[0].itch.as_ref().unwrap();
        assert_eq!((i.request_max, i.request_interval_ns), (64, 10_000_000));
        assert_eq!(i.request_rate, 10_000);
        let c = Config::parse(
            &format!("{itch}request_max = 65535\nrequest_interval_ms = 60000\nrequest_rate = 1\n"),
            "t.toml",
        )
        .unwrap();
        let i = c.feeds[0].itch.as_ref().unwrap();
        assert_eq!(i.request_rate, 1);
        assert_eq!(
            (i.request_max, i.request_interval_ns),
            (65_535, 60_000_000_000)
        );
        let sqf = itch.replace("protocol = \"itch50\"", "kind = \"full\"");
        for key in [
            "request_max = 8",
            "request_interval_ms = 5",
            "request_rate = 9",
        ] {
            let e = err(&format!("{sqf}{key}\n"));
            assert!(e.contains("applies only to protocol \"itch50\""), "{e}");
        }
    }

    #[test]
    fn fixed_offset_partial_override_and_capacity() {
        let text = r#"
[state]
capacity = 10
[[feed]]
name = "d"
kind = "delta"
lines = ["127.0.0.1:5000"]
stale_threshold_ms = 1
source_threshold_ms = 2
clock_offset = -1500
[[feed.symbol]]
name = "A"
source_threshold_ms = 9
"#;
        let c = Config::parse(text, "t.toml").unwrap();
        assert_eq!(c.capacity, 10);
        let f = &c.feeds[0];
        assert_eq!(f.kind, FeedKind::Delta);
        assert_eq!(f.offset, OffsetMode::Fixed(-1500));
        assert_eq!(
            f.thresholds_for(Symbol::parse("A").unwrap()),
            Thresholds {
                stale_ns: 1_000_000,
                source_ns: 9_000_000
            }
        );
    }

    #[test]
    fn one_line_never_exceeds_its_length() {
        assert_eq!(one_line("abc", 3), "abc");
        assert_eq!(one_line("abcd", 3), "ab…");
        assert_eq!(one_line("a\nb", 4), "a\\nb");
        assert_eq!(one_line("a\nb", 3), "a…", "an escape is not split");
        for text in ["x".repeat(500), "\u{1}".repeat(500), "é\t".repeat(300)] {
            for max in [0, 1, 2, 7, 400] {
                assert!(one_line(&text, max).chars().count() <= max);
            }
        }
    }

    #[test]
    fn errors_name_the_key_on_one_line() {
        let cases: &[(&str, &str)] = &[
            ("stale_threshold_ms = 500", "stale_threshold_ms = 0"),
            ("stale_threshold_ms = 500", "stale_threshold_ms = -5"),
            ("stale_threshold_ms = 500", "stale_threshold_ms = 0.5"),
            ("stale_threshold_ms = 500", "stale_threshold_ms = \"500\""),
            ("source_threshold_ms = 2000", "source_threshold_ms = 0"),
            ("offset_window_ms = 60000", "offset_window_ms = 0"),
            ("clock_offset = \"auto\"", "clock_offset = \"manual\""),
            ("clock_offset = \"auto\"", "clock_offset = 1.5"),
            ("kind = \"full\"", "kind = \"partial\""),
            ("name = \"lp1\"", "name = \"lp1\"\ncolour = \"red\""),
            (
                "stale_threshold_ms = 2000\nsource",
                "stale_threshold_ms = 0\nsource",
            ),
            ("name = \"XAUUSD\"", "name = \"XAUUSD\"\nfoo = 1"),
            ("name = \"XAUUSD\"", "name = \"XAU USD\""),
            (
                "lines = [\"239.1.1.1:30001\", \"239.1.1.2:30002\"]",
                "lines = [\"239.1.1.1\"]",
            ),
            (
                "lines = [\"239.1.1.1:30001\", \"239.1.1.2:30002\"]",
                "lines = []",
            ),
        ];
        for (from, to) in cases {
            let text = SPEC_EXAMPLE.replacen(from, to, 1);
            let e = err(&text);
            assert!(!e.contains('\n'), "one line: {e}");
            let key = to.split([' ', '\n']).next().unwrap();
            let named = e.contains(key)
                || (key == "name" && e.contains("symbol"))
                || e.contains("colour")
                || e.contains("foo");
            assert!(named, "{to:?} → {e}");
            assert!(e.starts_with("config t.toml"), "{e}");
        }
    }

    #[test]
    fn duplicate_feed_and_shared_line() {
        let two = format!("{SPEC_EXAMPLE}\n{SPEC_EXAMPLE}");
        assert!(err(&two).contains("duplicate feed name"), "{}", err(&two));
        let shared = format!(
            "{SPEC_EXAMPLE}\n{}",
            SPEC_EXAMPLE
                .replace("\"lp1\"", "\"lp2\"")
                .replace("239.1.1.1:30001", "239.9.9.9:1")
        );
        let e = err(&shared);
        assert!(
            e.contains("239.1.1.2:30002") && e.contains("lp1") && e.contains("lp2"),
            "{e}"
        );
        let same_port_other_ip = format!(
            "{SPEC_EXAMPLE}\n{}",
            SPEC_EXAMPLE
                .replace("\"lp1\"", "\"lp2\"")
                .replace("239.1.1.1:30001", "239.1.1.3:30001")
                .replace("239.1.1.2:30002", "239.1.1.4:30002")
        );
        assert_eq!(
            Config::parse(&same_port_other_ip, "t").unwrap().feeds.len(),
            2
        );
    }

    #[test]
    fn recovery_channels_do_not_overlap() {
        let itch = |name: &str, line: &str, listen: &str| {
            format!(
                "[[feed]]\nname = \"{name}\"\nprotocol = \"itch50\"\nlines = [\"{line}\"]\n\
                 stale_threshold_ms = 500\nsource_threshold_ms = 500\n\
                 recovery_listen = \"{listen}\"\n"
            )
        };
        let two = |la: &str, lb: &str| {
            format!(
                "{}{}",
                itch("a", "239.2.1.1:26477", la),
                itch("b", "239.2.1.2:26478", lb)
            )
        };
        // Two channels on one port: refused at the later one's key.
        let e = err(&two("127.0.0.1:18001", "0.0.0.0:18001"));
        assert!(
            e.contains("line 14: feed 'b': recovery_listen 0.0.0.0:18001 overlaps feed 'a''s recovery_listen 127.0.0.1:18001"),
            "{e}"
        );
        let e = err(&itch("a", "239.2.1.1:26477", "239.2.1.1:26477"));
        assert!(e.contains("must be a local unicast address"), "{e}");
        // Other ports, two addresses of one port, ephemeral ports, and a
        // channel on another feed's line port (its line is routed first).
        for (la, lb) in [
            ("0.0.0.0:18001", "0.0.0.0:18002"),
            ("127.0.0.1:18001", "127.0.0.2:18001"),
            ("0.0.0.0:0", "0.0.0.0:0"),
            ("0.0.0.0:26478", "0.0.0.0:0"),
        ] {
            let feeds = Config::parse(&two(la, lb), "t").map(|c| c.feeds.len());
            assert_eq!(feeds.ok(), Some(2), "{la} {lb}");
        }
    }

    #[test]
    fn a_number_toml_cannot_hold_names_the_range() {
        let text = format!("[sidecar]\nbatch = 18446744073709551615\n{SPEC_EXAMPLE}");
        let e = err(&text);
        assert!(
            e.contains("line 2") && e.contains("(batch is 1 to 1024 datagrams)"),
            "{e}"
        );
        let e = err(&SPEC_EXAMPLE.replace(
            "clock_offset = \"auto\"",
            "clock_offset = 99999999999999999999",
        ));
        assert!(e.contains("to 86400000000000 ns or \"auto\")"), "{e}");
        // Not for an error that is not about the value.
        let e = err(&format!("[sidecar]\nbatch = 8\nbatch = 9\n{SPEC_EXAMPLE}"));
        assert!(!e.contains("batch is"), "{e}");
    }

    #[test]
    fn a_named_setting_given_a_number_names_its_values() {
        let text = format!("[sidecar]\nidle = 3\n{SPEC_EXAMPLE}");
        let e = err(&text);
        assert!(e.contains("(idle is `spin`, `yield`, `sleep`)"), "{e}");
        let e = err(&format!("[log]\nformat = 3\n{SPEC_EXAMPLE}"));
        assert!(e.contains("(format is `plain` or `json`)"), "{e}");
        let e = err(&SPEC_EXAMPLE.replace("name = \"lp1\"", "name = \"lp1\"\nprotocol = 1"));
        assert!(e.contains("(protocol is `sqf` or `itch50`)"), "{e}");
        let kind = SPEC_EXAMPLE
            .lines()
            .find(|l| l.starts_with("kind"))
            .unwrap();
        let e = err(&SPEC_EXAMPLE.replace(kind, "kind = 2"));
        assert!(e.contains("(kind is `full` or `delta`)"), "{e}");
    }

    #[test]
    fn a_source_is_a_unicast_sender() {
        for ip in ["239.1.1.1", "255.255.255.255", "0.0.0.0"] {
            let text = SPEC_EXAMPLE.replace(
                "name = \"lp1\"",
                &format!("name = \"lp1\"\nsource = \"{ip}\""),
            );
            let e = err(&text);
            assert!(
                e.contains(&format!("source: {ip} must be the unicast address")),
                "{e}"
            );
        }
    }

    #[test]
    fn other_errors() {
        assert!(err("").contains("no [[feed]]"));
        assert!(err("[state]\ncapacity = 0\n").contains("capacity"));
        assert!(err("this is not toml").starts_with("config t.toml: line 1"));
        assert!(err("[whatever]\n").contains("whatever"));
        let twice = SPEC_EXAMPLE.replace(
            "lines = [\"239.1.1.1:30001\", \"239.1.1.2:30002\"]",
            "lines = [\"239.1.1.1:1\", \"239.1.1.1:1\"]",
        );
        assert!(err(&twice).contains("twice"));
        let dup_sym = format!("{SPEC_EXAMPLE}\n[[feed.symbol]]\nname = \"XAUUSD\"\n");
        assert!(err(&dup_sym).contains("XAUUSD"));
        let missing = SPEC_EXAMPLE.replace("kind = \"full\"", "");
        assert!(err(&missing).contains("kind"), "{}", err(&missing));
        assert!(Config::load(Path::new("/nonexistent/x.toml"))
            .unwrap_err()
            .to_string()
            .contains("/nonexistent/x.toml"));
    }
}
