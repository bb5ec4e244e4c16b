//! Configuration: parsed from TOML into plain structs, then validated into a
//! resolved [`Config`]. Nothing is opened until validation has passed, and
//! every error is one line that names the file, the line and the key.
//! Every integer key has a [`Range`] (all in [`ranges`];
//! docs/configuration.md lists them with the reasons for their bounds),
//! `dead_after_ms` is at least [`DEAD_AFTER_HEARTBEATS`] × `heartbeat_ms`, a
//! feed name is at most [`FEED_NAME_MAX`] printable ASCII bytes, and values
//! echoed in errors are escaped and cut.
//!
//! This file reads the tables every configuration has and the keys every
//! feed has (below). The rest of a `[[feed]]` table belongs to the feed's
//! protocol: [`Protocol`] is the switch, and each protocol's folder reads
//! its own keys ([`keys::FeedProtocol`], `protocol::<name>::config`) and
//! declares the services its feed receives on ([`services`]); a key no
//! protocol of the feed takes is refused with one line.
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
//! protocol = "sqf"                   # the default; its own keys (here `kind`) follow
//! kind = "full"                      # or "delta"
//! lines = ["239.1.1.1:30001", "239.1.1.2:30002"]
//! stale_threshold_ms = 500
//! source_threshold_ms = 2000
//! clock_offset = "auto"              # or a signed integer of nanoseconds (default "auto")
//! offset_window_ms = 60000           # used by "auto" (default 60000)
//! price_decimals = 4                 # decimals prices print with (ITCH 4, SQF 5, MDP3 9)
//! source = "10.0.0.5"                # optional: source-specific multicast join
//!
//! [[feed.symbol]]
//! name = "XAUUSD"
//! stale_threshold_ms = 2000          # each override optional
//! source_threshold_ms = 5000
//! ```

pub mod keys;
pub mod services;

use crate::clock::OffsetMode;
use crate::protocol::itch50::config::ItchConfig;
use crate::protocol::mdp3::config::Mdp3Config;
use crate::protocol::sqf::config::SqfConfig;
use crate::state::FeedKind;
use crate::symbol::Symbol;
use crate::verdict::Thresholds;
pub use keys::Range;
use keys::{
    echo, names_secret, plain_words, variants, FeedKeys, FeedProtocol, Problem, Sp, NS_PER_MS,
};
use serde::Deserialize;
use services::{listen_takes, Receive, Service};
use std::fmt;
use std::net::SocketAddrV4;
use std::path::Path;

/// Default number of slots when the configuration names none.
pub const DEFAULT_CAPACITY: usize = 65_536;

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
    /// The protocol the feed speaks (the variant of `settings`).
    pub protocol: Protocol,
    /// Full or delta, as the protocol says ([`FeedProtocol::kind`]).
    pub kind: FeedKind,
    /// The protocol's own settings, read by its code.
    pub settings: ProtocolSettings,
    /// Line A and, optionally, line B: destination `ip:port` of the datagrams.
    pub lines: Vec<SocketAddrV4>,
    /// Only accept multicast from this sender (source-specific join).
    pub source: Option<std::net::Ipv4Addr>,
    /// Thresholds for symbols without an override.
    pub thresholds: Thresholds,
    /// How the clock offset is obtained.
    pub offset: OffsetMode,
    /// Per-symbol thresholds, sorted by symbol key (the names that are
    /// symbols).
    pub overrides: Vec<(Symbol, Thresholds)>,
    /// Every per-instrument override by its name as written, sorted by
    /// name: for a protocol whose instruments' names may not fit a
    /// [`Symbol`] (MDP3's Symbols run to 20 characters).
    pub named_overrides: Vec<(String, Thresholds)>,
    /// Decimals every price of the feed prints with, at least
    /// (`price_decimals`; [`Protocol::price_decimals`] by default).
    pub price_decimals: u8,
}

/// The protocol a feed speaks (`protocol`, "sqf" when absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// SQF v1, the Simple Quote Feed.
    Sqf,
    /// Nasdaq TotalView-ITCH 5.0 over MoldUDP64.
    Itch50,
    /// CME MDP 3.0 (SBE, market by price).
    Mdp3,
}

impl Protocol {
    /// Every protocol.
    pub const ALL: [Protocol; 3] = [Protocol::Sqf, Protocol::Itch50, Protocol::Mdp3];

    /// The name as written in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Sqf => "sqf",
            Protocol::Itch50 => "itch50",
            Protocol::Mdp3 => "mdp3",
        }
    }
}

/// A feed's protocol settings, one variant per [`Protocol`], each read by
/// the protocol's own code (`protocol::<name>::config`). One per feed,
/// resolved once at start: the variants' sizes may differ.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum ProtocolSettings {
    /// An `sqf` feed's.
    Sqf(SqfConfig),
    /// An `itch50` feed's.
    Itch50(ItchConfig),
    /// An `mdp3` feed's.
    Mdp3(Mdp3Config),
}

/// Evaluates `$call` with the settings inside `$settings`, whatever their protocol.
macro_rules! each_settings {
    ($settings:expr, $s:ident => $call:expr) => {
        match $settings {
            ProtocolSettings::Sqf($s) => $call,
            ProtocolSettings::Itch50($s) => $call,
            ProtocolSettings::Mdp3($s) => $call,
        }
    };
}

/// Evaluates `$e` with `$T` the settings type of `$protocol`.
macro_rules! each_protocol {
    ($protocol:expr, $T:ident => $e:expr) => {
        match $protocol {
            Protocol::Sqf => {
                type $T = SqfConfig;
                $e
            }
            Protocol::Itch50 => {
                type $T = ItchConfig;
                $e
            }
            Protocol::Mdp3 => {
                type $T = Mdp3Config;
                $e
            }
        }
    };
}

impl Protocol {
    /// The feed keys this protocol takes ([`FeedProtocol::KEYS`]).
    pub fn keys(self) -> &'static [&'static str] {
        each_protocol!(self, T => T::KEYS)
    }

    /// Its integer keys' ranges ([`FeedProtocol::RANGES`]).
    pub fn ranges(self) -> &'static [Range] {
        each_protocol!(self, T => T::RANGES)
    }

    /// Decimals a feed's prices print with unless `price_decimals` says
    /// ([`FeedProtocol::PRICE_DECIMALS`]).
    pub fn price_decimals(self) -> u8 {
        each_protocol!(self, T => T::PRICE_DECIMALS)
    }

    /// Keys of other protocols it refuses with a reason ([`FeedProtocol::REFUSED`]).
    fn refused(self) -> &'static [(&'static str, &'static str)] {
        each_protocol!(self, T => T::REFUSED)
    }

    /// Its settings, read from `keys` by its own code.
    fn resolve(self, keys: &mut FeedKeys) -> Result<ProtocolSettings, Problem> {
        Ok(match self {
            Protocol::Sqf => ProtocolSettings::Sqf(SqfConfig::resolve(keys)?),
            Protocol::Itch50 => ProtocolSettings::Itch50(ItchConfig::resolve(keys)?),
            Protocol::Mdp3 => ProtocolSettings::Mdp3(Mdp3Config::resolve(keys)?),
        })
    }

    /// Why `name` cannot name an instrument of its feeds, if it cannot
    /// ([`FeedProtocol::name_problem`]).
    pub fn name_problem(self, name: &str) -> Option<&'static str> {
        each_protocol!(self, T => T::name_problem(name))
    }
}

impl ProtocolSettings {
    /// Full or delta ([`FeedProtocol::kind`]).
    pub fn kind(&self) -> FeedKind {
        each_settings!(self, s => s.kind())
    }

    /// Slots it reserves in the state table ([`FeedProtocol::reserved_slots`]).
    pub fn reserved_slots(&self) -> Option<(usize, &'static str)> {
        each_settings!(self, s => s.reserved_slots())
    }

    /// Directory entries it reserves ([`FeedProtocol::reserved_names`]).
    pub fn reserved_names(&self) -> usize {
        each_settings!(self, s => s.reserved_names())
    }

    /// Its files taken from `dir`, and checked ([`FeedProtocol::locate_files`]).
    pub fn locate_files(&mut self, dir: &Path) -> Result<(), String> {
        each_settings!(self, s => s.locate_files(dir))
    }

    /// The files its keys name ([`FeedProtocol::files`]).
    pub fn files(&self) -> Vec<&Path> {
        each_settings!(self, s => s.files())
    }
}

impl FeedConfig {
    /// The services the feed receives on, as its protocol declares them
    /// ([`FeedProtocol::services`]); the first is its `lines`.
    pub fn services(&self) -> Vec<Service> {
        each_settings!(&self.settings, s => s.services(&self.lines))
    }

    /// Thresholds in force for `symbol`.
    pub fn thresholds_for(&self, symbol: Symbol) -> Thresholds {
        match self.overrides.binary_search_by_key(&symbol, |(s, _)| *s) {
            Ok(i) => self.overrides[i].1,
            Err(_) => self.thresholds,
        }
    }

    /// The longest stale threshold of the feed's symbols (its own or an
    /// override's), ns: within it a healthy feed delivers something for
    /// each.
    pub fn longest_stale_ns(&self) -> u64 {
        self.overrides
            .iter()
            .map(|(_, t)| t.stale_ns)
            .chain(self.named_overrides.iter().map(|(_, t)| t.stale_ns))
            .fold(self.thresholds.stale_ns, u64::max)
    }

    /// The override for the instrument named `name`, as written (any
    /// length its protocol takes), if there is one.
    pub fn override_named(&self, name: &str) -> Option<Thresholds> {
        self.named_overrides
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| self.named_overrides[i].1)
    }

    /// Slots held for the feed in the state table beside other feeds: its
    /// protocol's reservation ([`ProtocolSettings::reserved_slots`]), or
    /// one for a feed without.
    pub fn reservation(&self) -> usize {
        self.settings.reserved_slots().map_or(1, |(n, _)| n)
    }
}

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

/// A `[[feed]]` table: the keys every feed has, and the rest for its
/// protocol.
struct RawFeed {
    name: Sp<String>,
    protocol: Option<Sp<Protocol>>,
    source: Option<Sp<String>>,
    lines: Sp<Vec<String>>,
    stale_threshold_ms: Sp<i64>,
    source_threshold_ms: Sp<i64>,
    clock_offset: Option<Sp<RawOffset>>,
    offset_window_ms: Option<Sp<i64>>,
    price_decimals: Option<Sp<i64>>,
    symbol: Vec<RawSymbol>,
    /// Every other key, in file order.
    rest: Vec<(String, Sp<toml::Value>)>,
}

/// The keys every feed has, in the order they are listed when a key is
/// unknown.
const FEED_KEYS: &[&str] = &[
    "name",
    "protocol",
    "source",
    "lines",
    "stale_threshold_ms",
    "source_threshold_ms",
    "clock_offset",
    "offset_window_ms",
    "price_decimals",
    "symbol",
];

impl<'de> Deserialize<'de> for RawFeed {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawFeed;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a [[feed]] table")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<RawFeed, A::Error> {
                use serde::de::Error;
                let (mut name, mut protocol, mut source, mut lines) = (None, None, None, None);
                let (mut stale, mut src, mut offset, mut window) = (None, None, None, None);
                let (mut symbol, mut rest, mut decimals) = (Vec::new(), Vec::new(), None);
                while let Some(key) = m.next_key::<String>()? {
                    match key.as_str() {
                        "name" => name = Some(m.next_value()?),
                        "protocol" => protocol = Some(m.next_value()?),
                        "source" => source = Some(m.next_value()?),
                        "lines" => lines = Some(m.next_value()?),
                        "stale_threshold_ms" => stale = Some(m.next_value()?),
                        "source_threshold_ms" => src = Some(m.next_value()?),
                        "clock_offset" => offset = Some(m.next_value()?),
                        "offset_window_ms" => window = Some(m.next_value()?),
                        "price_decimals" => decimals = Some(m.next_value()?),
                        "symbol" => symbol = m.next_value()?,
                        _ => {
                            let value = m.next_value()?;
                            rest.push((key, value));
                        }
                    }
                }
                let missing = |field: &'static str| match misspelling(field, &rest) {
                    Some(key) => A::Error::custom(format_args!(
                        "missing field `{field}` (is `{key}` a misspelling of it?)"
                    )),
                    None => A::Error::missing_field(field),
                };
                Ok(RawFeed {
                    name: name.ok_or_else(|| missing("name"))?,
                    lines: lines.ok_or_else(|| missing("lines"))?,
                    stale_threshold_ms: stale.ok_or_else(|| missing("stale_threshold_ms"))?,
                    source_threshold_ms: src.ok_or_else(|| missing("source_threshold_ms"))?,
                    protocol,
                    source,
                    clock_offset: offset,
                    offset_window_ms: window,
                    price_decimals: decimals,
                    symbol,
                    rest,
                })
            }
        }
        d.deserialize_struct("RawFeed", FEED_KEYS, V)
    }
}

/// Among the keys no feed knows by name, the one nearest `field` (at most
/// three edits away, as a typo is): what to suggest when `field` is
/// missing.
fn misspelling<'k, V>(field: &str, rest: &'k [(String, V)]) -> Option<&'k str> {
    rest.iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| !Protocol::ALL.iter().any(|p| p.keys().contains(k)))
        .map(|k| (edits(field, k), k))
        .filter(|&(d, _)| d <= 3)
        .min_by_key(|&(d, _)| d)
        .map(|(_, k)| k)
}

/// Levenshtein distance between `a` and `b` (keys: short, ASCII).
fn edits(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &x) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &y) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(x != y))
                .min(above + 1)
                .min(row[j] + 1);
            diagonal = above;
        }
    }
    row[b.len()]
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

/// `[state] capacity`: up to 16 Mi slots (3.5 GiB of shared memory at 224
/// bytes a slot, far above any venue's symbol count; 2^32 would map
/// 896 GiB).
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
/// it at `net.core.rmem_max`); at most `INT_MAX / 2`, which the kernel
/// doubles into an `int` (2^30 would not fit: newer kernels cap it, older
/// ones wrapped it negative, to their least buffer).
pub const RCVBUF_BYTES: Range = Range {
    table: "[sidecar]",
    key: "rcvbuf_bytes",
    min: 4096,
    max: (1 << 30) - 1,
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

/// `price_decimals`: the decimals a feed's prices print with: at least
/// these for exact decimal prices (ITCH, MDP3), exactly these, rounded, for
/// SQF's binary (f64) prices.
pub const PRICE_DECIMALS: Range = Range {
    table: "[[feed]]",
    key: "price_decimals",
    min: 0,
    max: 9,
    default: None,
    unit: "decimals",
};

/// The ranges of the integer keys this file reads, in file order; each
/// protocol's are [`Protocol::ranges`], and [`ranges`] lists them all.
pub const SHARED_RANGES: &[Range] = &[
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
    PRICE_DECIMALS,
];

/// Every integer key's range: this file's, then each protocol's (the
/// README's table lists them).
pub fn ranges() -> impl Iterator<Item = &'static Range> {
    SHARED_RANGES
        .iter()
        .chain(Protocol::ALL.into_iter().flat_map(|p| p.ranges()))
}

/// `dead_after_ms` must be at least this many heartbeat periods: with fewer,
/// a reader that looks just before a heartbeat lands sees a live writer as
/// dead (at 1×, most of the time).
pub const DEAD_AFTER_HEARTBEATS: u64 = 3;

/// Bytes of a feed name: what the shared memory's feed block holds.
pub const FEED_NAME_MAX: usize = 64;

/// Bytes read from a configuration file at most.
pub const FILE_MAX: u64 = 1 << 20;

/// Characters of a whole error line.
const ERROR_MAX: usize = 400;

/// A Unicode format character that reorders the text around it on a
/// terminal (the bidirectional marks, embeddings, overrides and
/// isolates): a name holding one could print as another.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{061c}')
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
        let piece: String = match c.is_control() || is_bidi_control(c) {
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
    /// Reads and validates a configuration file (at most [`FILE_MAX`] bytes),
    /// and the files its feeds name (taken from the file's directory).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let mut config = Config::read(path)?;
        let dir = base_dir(path);
        for f in &mut config.feeds {
            f.settings.locate_files(&dir).map_err(|e| {
                ConfigError(one_line(
                    &format!("config {}: feed {}: {e}", path.display(), f.name),
                    ERROR_MAX,
                ))
            })?;
        }
        Ok(config)
    }

    /// The files its feeds' keys name, each with its feed's name
    /// ([`ProtocolSettings::files`]).
    pub fn feed_files(&self) -> Vec<(&str, &Path)> {
        self.feeds
            .iter()
            .flat_map(|f| f.settings.files().into_iter().map(|p| (f.name.as_str(), p)))
            .collect()
    }

    /// Reads and validates a configuration file as [`load`](Self::load)
    /// does, without the files its feeds name: for a reader of the
    /// publication (`check`, `stat`), which needs only the `[sidecar]`
    /// table and must not fail because a capture was moved.
    pub fn read(path: &Path) -> Result<Config, ConfigError> {
        use std::io::Read;
        let name = path.display().to_string();
        let fail = |e: String| ConfigError(one_line(&format!("config {name}: {e}"), ERROR_MAX));
        let mut bytes = Vec::new();
        let mut fifo = false;
        crate::sys::open_input(path)
            .and_then(|f| {
                use std::os::unix::fs::FileTypeExt;
                fifo = f.metadata().is_ok_and(|m| m.file_type().is_fifo());
                f.take(FILE_MAX + 1).read_to_end(&mut bytes)
            })
            .map_err(|e| fail(e.to_string()))?;
        if bytes.len() as u64 > FILE_MAX {
            return Err(fail(format!("larger than {FILE_MAX} bytes")));
        }
        if bytes.is_empty() && fifo {
            return Err(fail(
                "a FIFO that gave nothing (no one was writing it)".into(),
            ));
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            fail(format!(
                "not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ))
        })?;
        let mut config = Config::parse(&text, &name)?;
        // As every path a configuration names: a relative one is the
        // file's directory's, so that `run` and `check --config` started
        // elsewhere meet at one publication.
        let shm = &mut config.sidecar.shm_path;
        if shm.is_relative() {
            *shm = base_dir(path).join(&*shm);
        }
        Ok(config)
    }

    /// Parses and validates configuration text; `name` is used in errors.
    pub fn parse(text: &str, name: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            ConfigError(not_a_table(name, text).unwrap_or_else(|| toml_error(name, text, &e)))
        })?;
        resolve(raw).map_err(|p| {
            ConfigError(match (p.quote, p.at) {
                (true, Some(at)) => quoting(name, text, at, &p.msg),
                _ => located(name, text, p.at, &p.msg),
            })
        })
    }

    /// Each feed's [`reservation`](FeedConfig::reservation), by feed id:
    /// what the state table holds for it ([`StateTable::reserve`]). With
    /// more than one feed, loading checks that they fit `capacity`.
    ///
    /// [`StateTable::reserve`]: crate::state::StateTable::reserve
    pub fn reservations(&self) -> Vec<usize> {
        self.feeds.iter().map(FeedConfig::reservation).collect()
    }

    /// Each feed's reservation of directory entries beyond its slots'
    /// first, by feed id ([`ProtocolSettings::reserved_names`]).
    pub fn name_reservations(&self) -> Vec<usize> {
        self.feeds
            .iter()
            .map(|f| f.settings.reserved_names())
            .collect()
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
            _ => None,
        };
    }
    if !(msg.contains("number") || msg.contains("invalid type")) {
        return None;
    }
    let auto = if key == CLOCK_OFFSET.key {
        " or \"auto\""
    } else {
        ""
    };
    // A key of several protocols with ranges of their own (the error does
    // not say whose table the line is in): each, with its table.
    let mut all: Vec<&Range> = Vec::new();
    for r in ranges().filter(|r| r.key == key) {
        if all.iter().all(|a| a.accepts() != r.accepts()) {
            all.push(r);
        }
    }
    match all.as_slice() {
        [] => None,
        [r] => Some(format!("{}{auto}", r.accepts())),
        several => Some(
            several
                .iter()
                .map(|r| format!("{} in {}", r.accepts(), r.table))
                .collect::<Vec<_>>()
                .join(", "),
        ),
    }
}

/// The error line for a table of one section (`[state]`, `[sidecar]`,
/// `[metrics]`, `[log]`) written as an array of tables (`[[state]]`) or a
/// value (`state = 5`), if the text has one: the reader's own words for it
/// would be about a field it read in its place.
fn not_a_table(name: &str, text: &str) -> Option<String> {
    let table: toml::Table = toml::from_str(text).ok()?;
    let (key, value) = ["state", "sidecar", "metrics", "log"]
        .into_iter()
        .find_map(|k| Some((k, table.get(k).filter(|v| !v.is_table())?)))?;
    let what = match value {
        toml::Value::Array(_) => format!("an array of tables ([[{key}]])"),
        v => match v.type_str() {
            t if t.starts_with(['a', 'e', 'i', 'o', 'u']) => format!("an {t}"),
            t => format!("a {t}"),
        },
    };
    // Where it is written: its header or its key.
    // By `\n` (a line's `\r` kept, and trimmed below): offsets exact in
    // a file of CRLF lines too.
    let at = text.split('\n').scan(0, |offset, line| {
        let at = *offset;
        *offset += line.len() + 1;
        Some((at, line.trim_start()))
    });
    let at = at
        .filter(|(_, l)| {
            let header = l.strip_prefix("[[").and_then(|l| l.split_once("]]"));
            let assigned = l.strip_prefix(key).map(str::trim_start);
            header.is_some_and(|(h, _)| h.trim() == key)
                || assigned.is_some_and(|rest| rest.starts_with('='))
        })
        .map(|(at, _)| at)
        .next();
    Some(located(
        name,
        text,
        at,
        &format!("[{key}] must be one table ([{key}]), not {what}"),
    ))
}

/// One line from a TOML error: file, line, the offending line's text, and the message.
fn toml_error(name: &str, text: &str, e: &toml::de::Error) -> String {
    let mut msg = plain_words(&e.message().trim().replace('\n', " "));
    if msg.is_empty() {
        // The reader gives no words for a control character in a comment.
        msg = "a character TOML does not allow here (a control character?)".into();
    }
    match e.span() {
        Some(span) => {
            // The key of the line, or of the list the line is in (a list
            // written over several lines).
            let (key, within) = match line_at(text, span.start).split_once('=') {
                Some((key, _)) => (key.trim(), false),
                None => (list_key(text, span.start).unwrap_or(""), true),
            };
            let accepts = takes(key, &msg).map_or(String::new(), |t| format!(" ({key} is {t})"));
            let msg = match within && !key.is_empty() {
                true => format!("in {key}: {msg}{accepts}"),
                false => format!("{msg}{accepts}"),
            };
            quoting(name, text, span.start, &msg)
        }
        None => located(name, text, None, &msg),
    }
}

/// The key of the list that byte `at` of `text` stands in, when that list
/// opened on an earlier line (`lines = [` and its items below it).
fn list_key(text: &str, at: usize) -> Option<&str> {
    let before = &text[..text[..at.min(text.len())].rfind('\n')?];
    // Brackets closed by the lines walked over (those after the key's).
    let mut closed = 0usize;
    for line in before.rsplit('\n').map(str::trim) {
        let (opens, closes) = (line.matches('[').count(), line.matches(']').count());
        if let Some((key, value)) = line.split_once('=') {
            let value = value.trim();
            let (opens, closes) = (value.matches('[').count(), value.matches(']').count());
            let open = value.starts_with('[') && opens > closes + closed;
            return open.then_some(key.trim());
        }
        if line.starts_with('[') && !line.starts_with(['"', '\'']) && opens == closes {
            // A table's header: no list open across it.
            return None;
        }
        closed = (closed + closes).saturating_sub(opens);
    }
    None
}

/// The line of `text` holding byte `at`, trimmed.
fn line_at(text: &str, at: usize) -> &str {
    let at = at.min(text.len());
    let line_no = text.as_bytes()[..at]
        .iter()
        .filter(|&&b| b == b'\n')
        .count();
    text.split('\n').nth(line_no).unwrap_or("").trim()
}

/// The error line for `msg` about byte `at`, quoting the line of the file
/// it stands on (as for TOML's own errors).
fn quoting(name: &str, text: &str, at: usize, msg: &str) -> String {
    let at = at.min(text.len());
    let line = quoted(line_at(text, at));
    located(name, text, Some(at), &format!("{line}: {msg}"))
}

/// A line of the file as an error quotes it: escaped and cut, and without
/// its value when its key names a password (the password itself may have
/// been pasted there, unquoted, which is what made the line an error).
fn quoted(line: &str) -> String {
    match line.split_once('=') {
        Some((key, _)) if may_be_secret(key) => {
            format!("{} (its value not shown)", echo(key.trim()))
        }
        _ => echo(line),
    }
}

/// Whether an error keeps a key's value out of its line: the key names a
/// secret ([`names_secret`]), or may be one miswritten (a word of a
/// secret's in it, or within three edits of a key that names one or of
/// that key without its last word: a
/// misspelled key is an error, and the line it quotes would show the
/// password pasted there).
fn may_be_secret(key: &str) -> bool {
    let key = key.trim().trim_matches(['"', '\'']).to_ascii_lowercase();
    // A secret key, and the same without its last word (`_env`, `_file`):
    // a misspelling that also drops it is as likely.
    let near = |k: &str| {
        let stem = k.rsplit_once('_').map_or(k, |(stem, _)| stem);
        edits(&key, k) <= 3 || edits(&key, stem) <= 3
    };
    names_secret(&key)
        || ["pas", "psw", "pw", "secret", "token"]
            .iter()
            .any(|w| key.contains(w))
        || Protocol::ALL
            .into_iter()
            .flat_map(|p| p.keys())
            .filter(|k| names_secret(k))
            .any(|k| near(k))
}

fn resolve(raw: RawConfig) -> Result<Config, Problem> {
    // As TOML's reader would, before anything is resolved.
    for f in &raw.feed {
        foreign_keys(f)?;
    }
    let capacity_at = raw
        .state
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .map(|c| c.span().start);
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
            Some(l) => {
                let at: std::net::SocketAddr = parsed(l, "[metrics] listen must be ip:port")?;
                // Port 0 would bind one no scraper is told of.
                if at.port() == 0 {
                    return Err(Problem::at(
                        l,
                        "[metrics] listen needs a port from 1 to 65535 (0 would bind one no scraper knows)"
                            .into(),
                    ));
                }
                at
            }
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
    let mut services: Vec<Vec<Service>> = Vec::with_capacity(raw.feed.len());
    for f in raw.feed {
        let name_at = f.name.span().start;
        let lines_at = f.lines.span().start;
        let (feed, keys) = resolve_feed(f)?;
        if feeds.iter().any(|g| g.name == feed.name) {
            return Err(Problem::at_offset(
                Some(name_at),
                format!("feed {}: duplicate feed name", echo(&feed.name)),
            ));
        }
        let its = feed.services();
        let at = |key: &str| match key {
            "lines" => Some(lines_at),
            _ => keys.at(key),
        };
        service_lines(&feed, &its, at)?;
        shared_address(&feed.name, &its, &feeds, &services, at)?;
        feeds.push(feed);
        services.push(its);
    }
    check_reservations(capacity, capacity_at, &feeds)?;
    Ok(Config {
        metrics,
        log_format,
        capacity,
        sidecar,
        feeds,
    })
}

/// The directory a configuration file's relative paths are taken from:
/// the file's own, links followed (so that `run` and `check --config`
/// meet whichever name of it each is given), or the current directory for
/// a configuration that is not a file (`--config <(...)`, whose
/// "directory" is `/dev/fd`).
fn base_dir(path: &Path) -> std::path::PathBuf {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => {
            // A link's target, as given otherwise (paths shown as written).
            let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
            let real = match link {
                true => std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
                false => path.to_path_buf(),
            };
            real.parent().unwrap_or(Path::new("")).to_path_buf()
        }
        _ => std::path::PathBuf::new(),
    }
}

/// Refuses a table that cannot hold what it holds for each feed: with
/// more than one feed, `capacity` must hold every slot the feeds reserve
/// ([`ProtocolSettings::reserved_slots`]: a bound on the symbols a feed
/// makes) and one more for each feed without a reservation (together,
/// every [`FeedConfig::reservation`], which the run holds apart). A lone
/// feed starves nobody: its table may be smaller than its reservation.
fn check_reservations(
    capacity: usize,
    at: Option<usize>,
    feeds: &[FeedConfig],
) -> Result<(), Problem> {
    if feeds.len() < 2 {
        return Ok(());
    }
    let held = feeds
        .iter()
        .fold(0usize, |n, f| n.saturating_add(f.reservation()));
    if held <= capacity {
        return Ok(());
    }
    let reserving: Vec<(&FeedConfig, (usize, &str))> = feeds
        .iter()
        .filter_map(|f| f.settings.reserved_slots().map(|n| (f, n)))
        .collect();
    let reserved = reserving.iter().map(|&(_, (n, _))| n).sum::<usize>();
    let others = feeds.len() - reserving.len();
    // Two names at most: the line stays short, whatever the names.
    const LISTED: usize = 2;
    let mut each: Vec<String> = reserving
        .iter()
        .take(LISTED)
        .map(|(f, (n, key))| format!("{} {key} {n}", echo(&f.name)))
        .collect();
    if reserving.len() > LISTED {
        each.push(format!("{} more", reserving.len() - LISTED));
    }
    let msg = if reserving.is_empty() {
        // No feed bounds its symbols: one slot each is what is held.
        format!(
            "capacity: {capacity} slots cannot hold a slot for each of the {} feeds: \
             raise [state] capacity",
            feeds.len()
        )
    } else {
        let besides = match others {
            0 => String::new(),
            1 => " and a slot for the other feed".to_owned(),
            n => format!(" and a slot for each of the {n} other feeds"),
        };
        format!(
            "capacity: {capacity} slots cannot hold the slots the feeds reserve ({}: {reserved} together){besides}: \
             forged symbols on one feed could fill it for all; raise [state] capacity or lower those bounds",
            each.join(", ")
        )
    };
    Err(Problem::at_offset(at, msg))
}

/// Holds the lines of a feed's other services (MDP3's snapshot and
/// definition lines) to the rules of its `lines` (checked as they are
/// read): an address datagrams are sent to, and, with a `source`, a
/// multicast group (the source restricts a join; a unicast line would
/// take datagrams from any sender).
fn service_lines(
    feed: &FeedConfig,
    services: &[Service],
    at: impl Fn(&str) -> Option<usize>,
) -> Result<(), Problem> {
    for s in services.iter().filter(|s| s.key != "lines") {
        let Receive::Lines(addrs) = &s.receive else {
            continue;
        };
        let problem = |msg: String| {
            Err(Problem::at_offset(
                at(s.key),
                format!("feed {}: {msg}", echo(&feed.name)),
            ))
        };
        if let Some(l) = addrs.iter().find(|l| l.ip().is_unspecified()) {
            return problem(format!(
                "{} {l} is not an address datagrams are sent to",
                s.key
            ));
        }
        if let (Some(_), Some(l)) = (feed.source, addrs.iter().find(|l| !l.ip().is_multicast())) {
            return problem(format!(
                "source: a source-specific join needs multicast lines, and {} {l} is unicast \
                 (its datagrams would be taken from any sender)",
                s.key
            ));
        }
    }
    Ok(())
}

/// Refuses an address of feed `name`'s `services` that an earlier feed's
/// services take already (`earlier`, each feed's `services`), at the key
/// that sets it (`at`): a line used by two feeds or by two services of one
/// feed, or two channels that could take the same datagram (a replay could
/// not tell whose it is). A channel may share a line's port (spec itch50
/// §3.2: a line's address is routed first); live, its socket and the
/// line's cannot both bind that port, which `run` refuses before binding.
fn shared_address(
    name: &str,
    services: &[Service],
    earlier: &[FeedConfig],
    their: &[Vec<Service>],
    at: impl Fn(&str) -> Option<usize>,
) -> Result<(), Problem> {
    let others = || {
        earlier
            .iter()
            .zip(their)
            .flat_map(|(g, s)| s.iter().map(move |s| (g, s)))
    };
    for (i, service) in services.iter().enumerate() {
        let problem = |msg: String| Err(Problem::at_offset(at(service.key), msg));
        match &service.receive {
            Receive::Lines(addrs) => {
                for line in addrs {
                    let mine = services[..i].iter().find(|s| match &s.receive {
                        Receive::Lines(a) => a.contains(line),
                        Receive::Channel(_) | Receive::Stream(_) => false,
                    });
                    if let Some(s) = mine {
                        return problem(format!(
                            "feed {}: {} {line} is already its {}",
                            echo(name),
                            service.key,
                            s.key
                        ));
                    }
                    let user = others().find(|(_, s)| match &s.receive {
                        Receive::Lines(a) => a.contains(line),
                        Receive::Channel(_) | Receive::Stream(_) => false,
                    });
                    if let Some((g, s)) = user {
                        return problem(format!(
                            "feed {}: {} {line} is already feed {}'s {}",
                            echo(name),
                            service.key,
                            echo(&g.name),
                            s.key
                        ));
                    }
                    // Requests sent to a line arrive as its datagrams
                    // (malformed there), never as answers: recovery would
                    // never work, and nothing else would say why.
                    let asks = |s: &Service| match &s.receive {
                        Receive::Channel(c) => (c.server == Some(*line)).then_some(c.server_key),
                        Receive::Lines(_) | Receive::Stream(_) => None,
                    };
                    if let Some(k) = services.iter().find_map(asks) {
                        return Err(Problem::at_offset(
                            at(k),
                            format!(
                                "feed {}: {k} {line} is its own {}: requests would arrive as \
                                 that line's datagrams, never as answers",
                                echo(name),
                                service.key
                            ),
                        ));
                    }
                    if let Some((g, k)) = others().find_map(|(g, s)| Some((g, asks(s)?))) {
                        return problem(format!(
                            "feed {}: {} {line} is where feed {}'s {k} sends requests: they \
                             would arrive as that line's datagrams, never as answers",
                            echo(name),
                            service.key,
                            echo(&g.name)
                        ));
                    }
                }
            }
            Receive::Channel(c) => {
                let line_of = |s: &Service| match &s.receive {
                    Receive::Lines(a) => c.server.filter(|srv| a.contains(srv)).map(|_| s.key),
                    Receive::Channel(_) | Receive::Stream(_) => None,
                };
                if let Some((g, key)) = others().find_map(|(g, s)| Some((g, line_of(s)?))) {
                    let server = c.server.expect("a line's address");
                    return Err(Problem::at_offset(
                        at(c.server_key),
                        format!(
                            "feed {}: {} {server} is feed {}'s {key}: requests would arrive \
                             as that line's datagrams, never as answers",
                            echo(name),
                            c.server_key,
                            echo(&g.name)
                        ),
                    ));
                }
                let listen = c.listen;
                let overlap = others().find_map(|(g, s)| match &s.receive {
                    Receive::Channel(o) => (listen_takes(listen, o.listen)
                        || listen_takes(o.listen, listen))
                    .then_some((g, s.key, o.listen)),
                    Receive::Lines(_) | Receive::Stream(_) => None,
                });
                if let Some((g, key, l)) = overlap {
                    return problem(format!(
                        "feed {}: {} {listen} overlaps feed {}'s {key} {l}",
                        echo(name),
                        service.key,
                        echo(&g.name)
                    ));
                }
            }
            Receive::Stream(server) => {
                // A replay routes a captured segment by the server's
                // address: two feeds' streams to one server could not be
                // told apart.
                let user = others().find(|(_, s)| s.receive == Receive::Stream(*server));
                if let Some((g, _)) = user {
                    return problem(format!(
                        "feed {}: {} {server} is already used by feed {}",
                        echo(name),
                        service.key,
                        echo(&g.name)
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The protocol feed `f` speaks (`protocol`, "sqf" when absent).
fn protocol_of(f: &RawFeed) -> Protocol {
    f.protocol.as_ref().map_or(Protocol::Sqf, |p| *p.get_ref())
}

/// Refuses a key of feed `f` that neither every feed nor its protocol
/// takes: one line naming the protocols it applies to, or, for a key no
/// protocol takes, as TOML's reader refuses an unknown one.
fn foreign_keys(f: &RawFeed) -> Result<(), Problem> {
    let protocol = protocol_of(f);
    let ctx = format!("feed {}", echo(f.name.get_ref()));
    for (key, value) in &f.rest {
        let key = key.as_str();
        if protocol.keys().contains(&key) {
            continue;
        }
        let at = Some(value.span().start);
        if let Some((_, why)) = protocol.refused().iter().find(|(k, _)| *k == key) {
            let name = protocol.as_str();
            let msg = format!("{key} does not apply to protocol \"{name}\" ({why})");
            return Err(Problem::at_offset(at, msg).within(&ctx));
        }
        let owners: Vec<String> = Protocol::ALL
            .into_iter()
            .filter(|p| p.keys().contains(&key))
            .map(|p| format!("\"{}\"", p.as_str()))
            .collect();
        let msg = match owners.len() {
            0 => {
                let expected: Vec<String> = FEED_KEYS
                    .iter()
                    .chain(protocol.keys())
                    .map(|k| format!("`{k}`"))
                    .collect();
                let msg = format!(
                    "unknown field `{key}`, expected one of {}",
                    expected.join(", ")
                );
                return Err(Problem::quoting(at, msg));
            }
            1 => format!("{key} applies only to protocol {}", owners[0]),
            _ => format!("{key} applies only to protocols {}", owners.join(", ")),
        };
        return Err(Problem::at_offset(at, msg).within(&ctx));
    }
    Ok(())
}

fn resolve_sidecar(s: RawSidecar) -> Result<SidecarConfig, Problem> {
    let d = SidecarConfig::default();
    let shm_mode = match &s.shm_mode {
        None => d.shm_mode,
        Some(m) => {
            let mode = u32::from_str_radix(m.get_ref(), 8)
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
                })?;
            crate::shm::mode_problem(mode).map_or(Ok(mode), |e| Err(Problem::at(m, e)))?
        }
    };
    let cpu = match &s.cpu {
        None => None,
        Some(c) => Some(CPU.check(c)? as usize),
    };
    let interface = match &s.interface {
        None => d.interface,
        Some(i) => {
            let a: std::net::Ipv4Addr = parsed(i, "[sidecar] interface must be an IPv4 address")?;
            // No host has such an address on an interface: refused here,
            // not at the join.
            if a.is_multicast() || a.is_broadcast() {
                return Err(Problem::at(
                    i,
                    format!(
                        "[sidecar] interface must be the address of an interface of this host \
                         (or 0.0.0.0), not a multicast or broadcast address, got {}",
                        echo(i.get_ref())
                    ),
                ));
            }
            a
        }
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
    let idle = s.idle.unwrap_or(d.idle);
    let idle_sleep_us = IDLE_SLEEP_US.or_default(&s.idle_sleep_us)?;
    if let (Some(v), false) = (&s.idle_sleep_us, idle == Idle::Sleep) {
        // It would do nothing: the receiver would spin (or yield) a core
        // its operator meant to let sleep.
        return Err(Problem::at(
            v,
            "[sidecar] idle_sleep_us needs idle = \"sleep\" (the default, \"spin\", keeps a core busy and never sleeps)".into(),
        ));
    }
    // Beats come from the receive loop: sleeping when idle, one may come
    // that much after its period.
    let (period_ms, period) = match idle {
        Idle::Sleep => (
            heartbeat_ms + idle_sleep_us.div_ceil(1000),
            "(heartbeat_ms + idle_sleep_us in ms, rounded up)",
        ),
        _ => (heartbeat_ms, "heartbeat_ms"),
    };
    if dead_after_ms < DEAD_AFTER_HEARTBEATS * period_ms {
        let at = s
            .dead_after_ms
            .as_ref()
            .or(s.heartbeat_ms.as_ref())
            .or(s.idle_sleep_us.as_ref());
        return Err(Problem::at_offset(
            at.map(|v| v.span().start),
            format!(
                "[sidecar] dead_after_ms = {dead_after_ms}{} must be at least \
                 {DEAD_AFTER_HEARTBEATS} × {period} = {}: readers would see a live writer as dead",
                if s.dead_after_ms.is_none() {
                    " (the default)"
                } else {
                    ""
                },
                DEAD_AFTER_HEARTBEATS * period_ms
            ),
        ));
    }
    Ok(SidecarConfig {
        shm_path,
        shm_mode,
        cpu,
        idle,
        idle_sleep_us,
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
pub fn valid_feed_name(name: &str) -> bool {
    (1..=FEED_NAME_MAX).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_graphic())
}

/// `v` in `range`, in ns.
fn ms_to_ns(range: &Range, v: &Sp<i64>) -> Result<u64, Problem> {
    Ok(range.check(v)? as u64 * NS_PER_MS)
}

/// Feed `f` resolved, with the keys its protocol read (for where each stands).
fn resolve_feed(f: RawFeed) -> Result<(FeedConfig, FeedKeys), Problem> {
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
        // A line is where datagrams are addressed (a replay routes by
        // it), not "any address".
        if addr.ip().is_unspecified() {
            return Err(err(
                &f.lines,
                format!(
                    "lines: {} is not an address datagrams are sent to (a multicast group, \
                     a broadcast or a unicast address of this host)",
                    echo(l)
                ),
            ));
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
            // A unicast line has no join to restrict: its datagrams would
            // be taken from any sender while the configuration says one.
            if let Some(l) = lines.iter().find(|l| !l.ip().is_multicast()) {
                return Err(Problem::at(
                    s,
                    format!(
                        "source: a source-specific join needs multicast lines, and {l} is \
                         unicast (its datagrams would be taken from any sender)"
                    ),
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
            // An `offset_window_ms` beside it is kept though idle (checked
            // for its range all the same): the contract's own template
            // puts it under `clock_offset`, "used by auto", and a file so
            // written turns back to "auto" with one edit.
            RawOffset::Fixed(ns) => {
                let v = Sp::new(o.span(), *ns);
                OffsetMode::Fixed(CLOCK_OFFSET.check(&v).map_err(in_feed)?)
            }
        },
    };
    let protocol = protocol_of(&f);
    let mut overrides: Vec<(Symbol, Thresholds)> = Vec::with_capacity(f.symbol.len());
    let mut named_overrides: Vec<(String, Thresholds)> = Vec::with_capacity(f.symbol.len());
    for s in &f.symbol {
        let shown = echo(s.name.get_ref());
        let sctx = |p: Problem| p.within(&format!("{ctx}: symbol {shown}"));
        let name = s.name.get_ref();
        if let Some(problem) = protocol.name_problem(name) {
            return Err(sctx(Problem::at(&s.name, problem.into())));
        }
        if named_overrides.iter().any(|(o, _)| o == name) {
            return Err(sctx(Problem::at(&s.name, "listed twice".into())));
        }
        if s.stale_threshold_ms.is_none() && s.source_threshold_ms.is_none() {
            // Valid, but it would do nothing.
            return Err(sctx(Problem::at(
                &s.name,
                "overrides nothing: give it stale_threshold_ms or source_threshold_ms".into(),
            )));
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
        if let Some(sym) = Symbol::parse(name) {
            overrides.push((sym, th));
        }
        named_overrides.push((name.clone(), th));
    }
    overrides.sort_by_key(|(s, _)| *s);
    named_overrides.sort_by(|a, b| a.0.cmp(&b.0));
    let price_decimals = match &f.price_decimals {
        Some(v) => PRICE_DECIMALS.check(v).map_err(in_feed)? as u8,
        None => protocol.price_decimals(),
    };
    let mut keys = FeedKeys::new(f.rest, f.name.span().start);
    let settings = protocol.resolve(&mut keys).map_err(in_feed)?;
    debug_assert_eq!(
        keys.untaken().next(),
        None,
        "{protocol:?} left a key of its own"
    );
    let feed = FeedConfig {
        name,
        protocol,
        kind: settings.kind(),
        settings,
        lines,
        source,
        thresholds,
        offset,
        overrides,
        named_overrides,
        price_decimals,
    };
    Ok((feed, keys))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A feed block holds its protocol's name (word 72: 8 bytes), which
    /// readers print: every name fits, and names differ.
    #[test]
    fn protocol_names_fit_a_feed_block() {
        let names: std::collections::BTreeSet<&str> =
            Protocol::ALL.iter().map(|p| p.as_str()).collect();
        assert_eq!(names.len(), Protocol::ALL.len());
        assert!(names
            .iter()
            .all(|n| !n.is_empty() && n.len() <= 8 && n.is_ascii()));
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

    /// A required key misspelled is named in the error about the missing
    /// one; an unknown key far from every missing one is not suggested.
    #[test]
    fn a_misspelled_required_key_is_suggested() {
        let feed = |keys: &str| {
            format!(
                "[[feed]]\nname = \"lp\"\nkind = \"full\"\nlines = [\"127.0.0.1:9000\"]\n{keys}"
            )
        };
        let e = err(&feed(
            "stale_treshold_ms = 1000\nsource_threshold_ms = 1000\n",
        ));
        assert!(
            e.contains(
                "missing field `stale_threshold_ms` (is `stale_treshold_ms` a misspelling of it?)"
            ),
            "{e}"
        );
        let e = err(&feed(
            "stale_threshold_ms = 1000\nsourcethreshold_ms = 1000\n",
        ));
        assert!(e.contains("(is `sourcethreshold_ms` a misspelling"), "{e}");
        let e = err(&feed("stale_threshold_ms = 1000\nwhatever = 1\n"));
        assert!(e.contains("missing field `source_threshold_ms`"), "{e}");
        assert!(!e.contains("misspelling"), "{e}");
        assert_eq!(edits("kitten", "sitting"), 3);
        assert_eq!(edits("", "abc"), 3);
        assert_eq!(edits("same", "same"), 0);
    }

    /// A control character where TOML allows none (a comment here) names
    /// its line and says what is wrong: the reader itself gives no words.
    #[test]
    fn a_control_character_in_a_comment_is_named() {
        for c in ['\0', '\u{1}'] {
            let e = err(&format!("# a comment {c} here\n[state]\ncapacity = 16\n"));
            assert!(e.contains("line 1"), "{e:?}");
            assert!(e.contains("a character TOML does not allow here"), "{e:?}");
        }
    }

    /// `shm_mode` is octal permission bits that let nobody else write
    /// (readers refuse such a file) and let the owner read: each refused
    /// when the configuration is read, naming the line, not only when
    /// `run` creates the file.
    #[test]
    fn shm_mode_is_octal_bits_no_one_else_may_write_and_the_owner_reads() {
        let feed = "[[feed]]\nname = \"lp\"\nkind = \"full\"\nlines = [\"127.0.0.1:9000\"]\n\
                    stale_threshold_ms = 1000\nsource_threshold_ms = 1000\n";
        let with = |mode: &str| format!("[sidecar]\nshm_mode = \"{mode}\"\n{feed}");
        for ok in ["0640", "0644", "0600", "0400"] {
            let c = Config::parse(&with(ok), "t.toml").unwrap();
            assert_eq!(c.sidecar.shm_mode, u32::from_str_radix(ok, 8).unwrap());
        }
        for bad in ["0660", "0666", "0777", "0602"] {
            let e = err(&with(bad));
            assert!(e.contains("line 2"), "{e}");
            assert!(
                e.contains(&format!("shm_mode {bad} lets group or others write")),
                "{e}"
            );
        }
        for bad in ["0000", "0200", "0040", "0244"] {
            let e = err(&with(bad));
            assert!(e.contains("line 2"), "{e}");
            assert!(
                e.contains(&format!("shm_mode {bad} denies its owner reading")),
                "{e}"
            );
        }
        assert!(err(&with("0800")).contains("octal permission bits"));
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
        // Without `offset_window_ms`, the default: 60 s.
        let text = SPEC_EXAMPLE.replacen("offset_window_ms = 60000", "", 1);
        assert_ne!(text, SPEC_EXAMPLE);
        let c = Config::parse(&text, "t.toml").unwrap();
        assert_eq!(
            c.feeds[0].offset,
            OffsetMode::Auto {
                window_ns: 60_000_000_000
            }
        );
        // The template with its offset made fixed, its window left as
        // written beneath it: taken, the window idle.
        let fixed = SPEC_EXAMPLE.replacen("clock_offset = \"auto\"", "clock_offset = 0", 1);
        assert_ne!(fixed, SPEC_EXAMPLE);
        let c = Config::parse(&fixed, "t.toml").unwrap();
        assert_eq!(c.feeds[0].offset, OffsetMode::Fixed(0));
        // A third line is refused: line A and an optional line B.
        let three = SPEC_EXAMPLE.replacen(
            "lines = [\"239.1.1.1:30001\", \"239.1.1.2:30002\"]",
            "lines = [\"239.1.1.1:30001\", \"239.1.1.2:30002\", \"239.1.1.3:30003\"]",
            1,
        );
        assert_ne!(three, SPEC_EXAMPLE);
        assert!(err(&three).contains("lines"), "{}", err(&three));
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
        // A right-to-left override would print "gsm" as "msg".
        assert_eq!(one_line("a\u{202e}gsm", 20), "a\\u{202e}gsm");
        assert_eq!(one_line("\u{2066}x\u{200f}", 20), "\\u{2066}x\\u{200f}");
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
            ("kind = \"full\"", "kind = [\"full\"]"),
            ("stale_threshold_ms = 500", "stale_threshold_ms = [500]"),
            (
                "lines = [\"239.1.1.1:30001\", \"239.1.1.2:30002\"]",
                "lines = \"239.1.1.1:30001\"",
            ),
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
            for rust in [
                "i64", "u64", "u32", "usize", "f64", "sequence", "Sp<", "struct",
            ] {
                assert!(!e.contains(rust), "{to:?} → {e}");
            }
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

    /// Two services of one feed may not share an address either (a
    /// protocol with several services of lines: MDP3's incremental,
    /// snapshot and definition lines), whichever of them repeats it.
    #[test]
    fn one_feeds_services_share_no_line() {
        use services::Channel;
        let a: SocketAddrV4 = "239.3.1.1:14310".parse().unwrap();
        let b: SocketAddrV4 = "239.3.1.2:15310".parse().unwrap();
        let c: SocketAddrV4 = "239.3.1.3:14311".parse().unwrap();
        let at = |key: &str| Some(key.len());
        let check = |services: &[Service]| shared_address("f", services, &[], &[], at);
        let ok = [
            Service::lines("lines", &[a, b]),
            Service::lines("snapshot_lines", &[c]),
            Service::lines("definition_lines", &[]),
        ];
        assert!(check(&ok).is_ok());
        let cases = [
            (
                "snapshot_lines",
                &[c, a][..],
                "definition_lines",
                &[][..],
                "snapshot_lines 239.3.1.1:14310 is already its lines",
            ),
            (
                "snapshot_lines",
                &[c],
                "definition_lines",
                &[b],
                "definition_lines 239.3.1.2:15310 is already its lines",
            ),
            (
                "snapshot_lines",
                &[c],
                "definition_lines",
                &[c],
                "definition_lines 239.3.1.3:14311 is already its snapshot_lines",
            ),
        ];
        for (k1, l1, k2, l2, want) in cases {
            let services = [
                Service::lines("lines", &[a, b]),
                Service::lines(k1, l1),
                Service::lines(k2, l2),
            ];
            let p = check(&services).unwrap_err();
            assert_eq!(p.msg, format!("feed 'f': {want}"));
            let key = want.split(' ').next().unwrap();
            assert_eq!(p.at, Some(key.len()), "at the repeating key: {want}");
        }
        // A channel listening on a line's address is not a line.
        let channel = Channel {
            server: None,
            server_key: "recovery",
            listen: a,
        };
        let with_channel = [
            Service::lines("lines", &[a]),
            Service::channel("recovery_listen", channel),
        ];
        assert!(check(&with_channel).is_ok());
    }

    #[test]
    fn recovery_channels_do_not_overlap() {
        let itch = |name: &str, line: &str, listen: &str| {
            format!(
                "[[feed]]\nname = \"{name}\"\nprotocol = \"itch50\"\nlines = [\"{line}\"]\n\
                 stale_threshold_ms = 500\nsource_threshold_ms = 500\n\
                 recovery_listen = \"{listen}\"\nmax_symbols = 1000\n"
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
            e.contains("line 15: feed 'b': recovery_listen 0.0.0.0:18001 overlaps feed 'a''s recovery_listen 127.0.0.1:18001"),
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
        // A key whose range differs by protocol: each, with its table.
        let e = err(&format!(
            "[sidecar]\ngap_timeout_ms = 99999999999999999999\n{SPEC_EXAMPLE}"
        ));
        assert!(
            e.contains("1 to 3600000 ms in [[feed]] itch50")
                && e.contains("1 to 60000 ms in [[feed]] mdp3"),
            "{e}"
        );
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
        assert!(e.contains("(protocol is `sqf`, `itch50`, `mdp3`)"), "{e}");
        let kind = SPEC_EXAMPLE
            .lines()
            .find(|l| l.starts_with("kind"))
            .unwrap();
        let e = err(&SPEC_EXAMPLE.replace(kind, "kind = 2"));
        assert!(e.contains("(kind is `full` or `delta`)"), "{e}");
    }

    /// A relative `shm_path` is the configuration file's directory's
    /// (as its other paths), whatever the current directory.
    #[test]
    fn a_relative_shm_path_is_taken_from_the_configurations_directory() {
        let dir = tempfile::tempdir().unwrap();
        for (written, want) in [
            ("pub/tg", dir.path().join("pub/tg")),
            ("/dev/shm/tg", "/dev/shm/tg".into()),
        ] {
            let path = dir.path().join("c.toml");
            let text = format!("[sidecar]\nshm_path = \"{written}\"\n{SPEC_EXAMPLE}");
            std::fs::write(&path, text).unwrap();
            for c in [Config::read(&path), Config::load(&path)] {
                assert_eq!(c.unwrap().sidecar.shm_path, want, "{written}");
            }
        }
        // Not a file (a pipe, as `--config <(...)` gives): the current
        // directory's.
        assert_eq!(base_dir(Path::new("/dev/null")), Path::new(""));
        assert_eq!(base_dir(&dir.path().join("c.toml")), dir.path());
        // Reached through a link elsewhere: the file's own directory, as
        // by its own name (`run` and `check --config` meet either way).
        let other = tempfile::tempdir().unwrap();
        let link = other.path().join("link.toml");
        std::os::unix::fs::symlink(dir.path().join("c.toml"), &link).unwrap();
        assert_eq!(base_dir(&link), dir.path().canonicalize().unwrap());
        // A protocol's files are located the same way: an MDP3 feed's
        // `definitions` beside the file the link reaches.
        let mdp3 = "[[feed]]\nname = \"cme\"\nprotocol = \"mdp3\"\nlines = [\"239.3.1.1:14310\"]\n\
                    stale_threshold_ms = 1000\nsource_threshold_ms = 1000\ndefinitions = \"defs.pcap\"\n";
        std::fs::write(dir.path().join("c.toml"), mdp3).unwrap();
        std::fs::write(dir.path().join("defs.pcap"), b"").unwrap();
        let c = Config::load(&link).unwrap();
        let want = dir.path().canonicalize().unwrap().join("defs.pcap");
        assert_eq!(c.feeds[0].settings.files(), [want.as_path()]);
    }

    /// Feeds none of which bounds its symbols need a slot each.
    #[test]
    fn a_table_smaller_than_its_feeds_says_so() {
        let two = SPEC_EXAMPLE.to_string()
            + &SPEC_EXAMPLE
                .replace("name = \"lp1\"", "name = \"lp9\"")
                .replace("239.1.1.1:30001", "239.1.9.1:30001")
                .replace("239.1.1.2:30002", "239.1.9.2:30002");
        let e = err(&format!("[state]\ncapacity = 1\n{two}"));
        assert!(
            e.contains("capacity: 1 slots cannot hold a slot for each of the 2 feeds: raise [state] capacity"),
            "{e}"
        );
    }

    #[test]
    fn a_line_is_an_address_datagrams_are_sent_to() {
        {
            let ip = "0.0.0.0";
            let e = err(&SPEC_EXAMPLE.replace("239.1.1.2:30002", &format!("{ip}:30002")));
            assert!(
                e.contains(&format!(
                    "lines: '{ip}:30002' is not an address datagrams are sent to"
                )),
                "{e}"
            );
        }
    }

    /// A feed's other services' lines follow its `lines`' rules: no
    /// 0.0.0.0, and with a `source` only multicast groups.
    #[test]
    fn every_services_lines_follow_the_lines_rules() {
        let cme = |extra: &str, snapshot: &str| {
            format!(
                "[[feed]]\nname = \"cme\"\nprotocol = \"mdp3\"\nlines = [\"239.3.1.1:14310\"]\n\
                 snapshot_lines = [\"{snapshot}\"]\nstale_threshold_ms = 1000\n\
                 source_threshold_ms = 1000\n{extra}"
            )
        };
        let e = err(&cme("", "0.0.0.0:14311"));
        assert!(
            e.contains(
                "feed 'cme': snapshot_lines 0.0.0.0:14311 is not an address datagrams are sent to"
            ),
            "{e}"
        );
        let e = err(&cme("source = \"10.1.2.3\"\n", "127.0.0.1:14311"));
        assert!(
            e.contains("feed 'cme': source: a source-specific join needs multicast lines, and snapshot_lines 127.0.0.1:14311 is unicast"),
            "{e}"
        );
        for (extra, snapshot) in [
            ("source = \"10.1.2.3\"\n", "239.3.1.3:14311"),
            ("", "127.0.0.1:14311"),
        ] {
            let c = Config::parse(&cme(extra, snapshot), "t");
            assert!(c.is_ok(), "{extra} {snapshot}: {:?}", c.err());
        }
    }

    #[test]
    fn the_metrics_listener_has_a_port() {
        let e = err(&format!(
            "[metrics]\nlisten = \"127.0.0.1:0\"\n{SPEC_EXAMPLE}"
        ));
        assert!(
            e.contains("[metrics] listen needs a port from 1 to 65535"),
            "{e}"
        );
        let c = Config::parse(
            &format!("[metrics]\nlisten = \"127.0.0.1:1\"\n{SPEC_EXAMPLE}"),
            "t",
        )
        .unwrap();
        assert_eq!(c.metrics.listen.port(), 1);
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
        // Only multicast lines have a join a source restricts.
        let text = SPEC_EXAMPLE
            .replace("name = \"lp1\"", "name = \"lp1\"\nsource = \"10.0.0.5\"")
            .replace("239.1.1.2:30002", "127.0.0.1:30002");
        let e = err(&text);
        assert!(
            e.contains("source: a source-specific join needs multicast lines, and 127.0.0.1:30002 is unicast"),
            "{e}"
        );
        let text = SPEC_EXAMPLE.replace("name = \"lp1\"", "name = \"lp1\"\nsource = \"10.0.0.5\"");
        assert_eq!(
            Config::parse(&text, "t.toml").unwrap().feeds[0].source,
            Some("10.0.0.5".parse().unwrap())
        );
    }

    /// Refusals of the sidecar's, the metrics' and a line's values, and
    /// of two snapshot streams from one server: each names its key.
    #[test]
    fn addresses_and_paths_refused() {
        let line0 = SPEC_EXAMPLE.replace("\"239.1.1.2:30002\"", "\"239.1.1.2:0\"");
        assert!(
            err(&line0).contains("lines: '239.1.1.2:0' has port 0"),
            "{}",
            err(&line0)
        );
        for (table, text, says) in [
            (
                "sidecar",
                "interface = \"::1\"",
                "[sidecar] interface must be an IPv4 address",
            ),
            (
                "sidecar",
                "interface = \"239.1.1.1\"",
                "[sidecar] interface must be the address of an interface of this host",
            ),
            (
                "sidecar",
                "interface = \"255.255.255.255\"",
                "not a multicast or broadcast address, got '255.255.255.255'",
            ),
            (
                "sidecar",
                "shm_path = \"\"",
                "[sidecar] shm_path must be a non-empty path",
            ),
            (
                "sidecar",
                "shm_path = \"a\\u0000b\"",
                "[sidecar] shm_path must be a non-empty path",
            ),
            (
                "metrics",
                "listen = \"localhost\"",
                "[metrics] listen must be ip:port",
            ),
        ] {
            let e = err(&format!("[{table}]\n{text}\n{SPEC_EXAMPLE}"));
            assert!(e.contains(says), "{text}: {e}");
        }
        let itch = |name: &str, group: u8| {
            format!(
                "[[feed]]\nname = \"{name}\"\nprotocol = \"itch50\"\nlines = [\"239.2.1.{group}:26477\"]\n\
                 stale_threshold_ms = 500\nsource_threshold_ms = 2000\nglimpse = \"127.0.0.1:18100\"\n\
                 glimpse_user = \"u\"\nglimpse_password_env = \"TG_PW\"\n"
            )
        };
        let e = err(&format!("{}{}", itch("a", 1), itch("b", 2)));
        assert!(
            e.contains("feed 'b': glimpse 127.0.0.1:18100 is already used by feed 'a'"),
            "{e}"
        );
    }

    /// An address two feeds' services share is told with both keys; a
    /// `recovery` server at a line of this feed or another (its requests
    /// would arrive as that line's datagrams, and recovery never answer)
    /// is refused, whichever feed comes first.
    #[test]
    fn a_line_shared_or_asked_for_recovery_names_both_keys() {
        let itch = |name: &str, lines: &str, extra: &str| {
            format!(
                "[[feed]]\nname = \"{name}\"\nprotocol = \"itch50\"\nlines = [{lines}]\n\
                 stale_threshold_ms = 500\nsource_threshold_ms = 2000\n{extra}"
            )
        };
        let mdp3 = |name: &str, extra: &str| {
            format!(
                "[[feed]]\nname = \"{name}\"\nprotocol = \"mdp3\"\n\
                 lines = [\"239.3.1.1:14310\"]\nsnapshot_lines = [\"239.3.1.3:14311\"]\n\
                 stale_threshold_ms = 500\nsource_threshold_ms = 2000\n{extra}"
            )
        };
        let e = err(&format!(
            "{}{}",
            mdp3("a", ""),
            itch("b", "\"239.3.1.3:14311\"", "")
        ));
        assert!(
            e.contains("feed 'b': lines 239.3.1.3:14311 is already feed 'a''s snapshot_lines"),
            "{e}"
        );
        let own = itch(
            "a",
            "\"127.0.0.1:26477\"",
            "recovery = \"127.0.0.1:26477\"\n",
        );
        let e = err(&own);
        assert!(
            e.contains("line 7: feed 'a': recovery 127.0.0.1:26477 is its own lines"),
            "{e}"
        );
        let sqf = "[[feed]]\nname = \"s\"\nkind = \"full\"\nlines = [\"127.0.0.1:30001\"]\n\
                   stale_threshold_ms = 500\nsource_threshold_ms = 2000\nclock_offset = 0\n";
        let asks = itch(
            "i",
            "\"239.2.1.1:26477\"",
            "recovery = \"127.0.0.1:30001\"\n",
        );
        let e = err(&format!("{sqf}{asks}"));
        assert!(
            e.contains("feed 'i': recovery 127.0.0.1:30001 is feed 's''s lines"),
            "{e}"
        );
        let e = err(&format!("{asks}{sqf}"));
        assert!(
            e.contains(
                "feed 's': lines 127.0.0.1:30001 is where feed 'i''s recovery sends requests"
            ),
            "{e}"
        );
        // A server elsewhere is taken.
        let fine = itch(
            "i",
            "\"239.2.1.1:26477\"",
            "recovery = \"127.0.0.1:30002\"\nmax_symbols = 1000\n",
        );
        Config::parse(&format!("{sqf}{fine}"), "t.toml").unwrap();
    }

    /// A section written as an array of tables or as a value is told so,
    /// not as the field the reader took in its place; an error inside a
    /// list written over several lines names the list's key; no type name
    /// of the reader's own leaks.
    #[test]
    fn misshapen_tables_and_lists_are_told_in_the_files_words() {
        let e = err(&format!("state = 5\n{SPEC_EXAMPLE}"));
        assert!(
            e.contains("line 1: [state] must be one table ([state]), not an integer"),
            "{e}"
        );
        let e = err(&format!("{SPEC_EXAMPLE}\n[[state]]\ncapacity = 5\n"));
        assert!(
            e.contains("[state] must be one table ([state]), not an array of tables ([[state]])"),
            "{e}"
        );
        let at = SPEC_EXAMPLE.lines().count() + 2;
        assert!(e.contains(&format!("line {at}:")), "{e}");
        let e = err(&format!("{SPEC_EXAMPLE}\n[[sidecar]]\n"));
        assert!(e.contains("[sidecar] must be one table"), "{e}");
        let e = err(
            "[[feed]]\nname = \"a\"\nkind = \"full\"\nlines = [\n  \"239.1.1.1:30001\",\n  5,\n]\n\
             stale_threshold_ms = 500\nsource_threshold_ms = 2000\nclock_offset = 0\n",
        );
        assert!(e.contains("line 6: '5,': in lines: invalid type"), "{e}");
        // A list closed before the error is not named.
        let e = err(
            "[[feed]]\nname = \"a\"\nkind = \"full\"\nlines = [\n  \"239.1.1.1:30001\",\n]\n\
             stale_threshold_ms 500\n",
        );
        assert!(e.contains("line 7:") && !e.contains("in lines"), "{e}");
        // A nested list still open is.
        let e = err("[[feed]]\nname = \"a\"\nkind = \"full\"\nlines = [\n  [\"x\"],\n  5,\n]\n");
        assert!(e.contains("in lines:"), "{e}");
        // A file of CRLF lines: the section's line counted right.
        let e = err(&format!("{}state = 5\r\n{SPEC_EXAMPLE}", "\r\n".repeat(10)));
        assert!(e.contains("line 11: [state] must be one table"), "{e}");
        assert_eq!(
            keys::plain_words("invalid type: integer `5`, expected struct RawState"),
            "invalid type: integer `5`, expected a table"
        );
        assert!(!err("[[feed]]\nsymbol = 5\n").contains("Raw"));
    }

    /// Each overridden symbol gets its own thresholds, and every other
    /// the feed's, however the overrides are listed (they are looked up
    /// by binary search: sorted when read).
    #[test]
    fn each_override_holds_for_its_own_symbol_in_any_order() {
        let feed = |a: &str, b: &str| {
            format!(
                "[[feed]]\nname = \"f\"\nkind = \"full\"\nlines = [\"127.0.0.1:30001\"]\n\
                 stale_threshold_ms = 500\nsource_threshold_ms = 2000\n{a}{b}"
            )
        };
        let zzz = "[[feed.symbol]]\nname = \"ZZZ\"\nstale_threshold_ms = 2000\n";
        let aaa = "[[feed.symbol]]\nname = \"AAA\"\nstale_threshold_ms = 100\n";
        let mmm = "[[feed.symbol]]\nname = \"MMM\"\nsource_threshold_ms = 9000\n";
        let ms = 1_000_000;
        for text in [
            feed(zzz, &format!("{aaa}{mmm}")),
            feed(aaa, &format!("{mmm}{zzz}")),
            feed(mmm, &format!("{zzz}{aaa}")),
        ] {
            let c = Config::parse(&text, "t.toml").unwrap();
            let f = &c.feeds[0];
            let th = |s: &str| f.thresholds_for(Symbol::parse(s).unwrap());
            assert_eq!(
                (th("ZZZ").stale_ns, th("ZZZ").source_ns),
                (2000 * ms, 2000 * ms)
            );
            assert_eq!(
                (th("AAA").stale_ns, th("AAA").source_ns),
                (100 * ms, 2000 * ms)
            );
            assert_eq!(
                (th("MMM").stale_ns, th("MMM").source_ns),
                (500 * ms, 9000 * ms)
            );
            assert_eq!(
                (th("BBB").stale_ns, th("BBB").source_ns),
                (500 * ms, 2000 * ms)
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
        let dup_sym =
            format!("{SPEC_EXAMPLE}\n[[feed.symbol]]\nname = \"XAUUSD\"\nstale_threshold_ms = 1\n");
        assert!(
            err(&dup_sym).contains("XAUUSD") && err(&dup_sym).contains("listed twice"),
            "{}",
            err(&dup_sym)
        );
        let missing = SPEC_EXAMPLE.replace("kind = \"full\"", "");
        assert!(err(&missing).contains("kind"), "{}", err(&missing));
        assert!(Config::load(Path::new("/nonexistent/x.toml"))
            .unwrap_err()
            .to_string()
            .contains("/nonexistent/x.toml"));
    }

    /// With more than one feed, the table must hold every ITCH feed's
    /// `max_symbols` and a slot for each other feed: else forged Stock
    /// Directory messages on one feed could fill it for every feed. One
    /// line names the capacity, each ITCH feed's bound and the remedy; a
    /// lone feed may have a table smaller than its bound.
    #[test]
    fn the_table_holds_every_itch_feeds_max_symbols() {
        let itch = |name: &str, port: u16, max: u64| {
            format!(
                "[[feed]]\nname = \"{name}\"\nprotocol = \"itch50\"\n\
                 lines = [\"239.9.9.1:{port}\"]\nstale_threshold_ms = 1000\n\
                 source_threshold_ms = 1000\nmax_symbols = {max}\n"
            )
        };
        let sqf = "[[feed]]\nname = \"lp\"\nkind = \"full\"\nlines = [\"239.9.9.2:9000\"]\n\
                   stale_threshold_ms = 1000\nsource_threshold_ms = 1000\n";
        let with = |capacity: u64, feeds: &str| format!("[state]\ncapacity = {capacity}\n{feeds}");
        let two = format!("{}{}", itch("nq", 1, 600), itch("bx", 2, 400));
        assert!(Config::parse(&with(1_000, &two), "t.toml").is_ok());
        let e = err(&with(999, &two));
        assert!(e.starts_with("config t.toml: line 2"), "{e}");
        assert!(
            e.contains("capacity: 999 slots cannot hold the slots the feeds reserve ('nq' max_symbols 600, 'bx' max_symbols 400: 1000 together)"),
            "{e}"
        );
        assert!(
            e.contains("raise [state] capacity or lower those bounds"),
            "{e}"
        );
        assert!(!e.contains('\n'), "one line: {e}");
        // Short, however long the names and however many the feeds.
        let long = |i: usize| format!("{i}{}", "n".repeat(FEED_NAME_MAX - 1));
        let other = |i: u16| {
            sqf.replace("\"lp\"", &format!("\"lp{i}\""))
                .replace(":9000", &format!(":{}", 20 + i))
        };
        let many: String = (0..3)
            .map(|i| itch(&long(i), 10 + i as u16, 1 << 20))
            .chain((0..2).map(other))
            .collect();
        let e = err(&with(3 << 20, &many));
        assert!(
            e.contains(", 1 more: 3145728 together) and a slot for each of the 2 other feeds"),
            "{e}"
        );
        assert!(
            e.chars().count() <= 400,
            "{} characters: {e}",
            e.chars().count()
        );
        // Every other feed keeps a slot at least.
        let mixed = format!("{}{sqf}", itch("nq", 1, 600));
        assert!(Config::parse(&with(601, &mixed), "t.toml").is_ok());
        let e = err(&with(600, &mixed));
        assert!(
            e.contains("('nq' max_symbols 600: 600 together) and a slot for the other feed"),
            "{e}"
        );
        // The default capacity does not hold two ITCH feeds' default bound.
        let defaults = two
            .replace("max_symbols = 600\n", "")
            .replace("max_symbols = 400\n", "");
        assert!(err(&defaults).contains("65536 slots cannot hold"));
        // A lone feed starves nobody.
        assert!(Config::parse(&with(10, &itch("nq", 1, 600)), "t.toml").is_ok());
    }

    /// What a run holds for each feed is what the load check counted: an
    /// ITCH feed's `max_symbols`, an MDP3 feed's `max_instruments` when the
    /// configuration sets it, one slot for any other feed.
    #[test]
    fn reservations_are_what_the_load_check_counts() {
        let mdp3 = |max: &str| {
            format!(
                "[[feed]]\nname = \"cme\"\nprotocol = \"mdp3\"\n\
                 lines = [\"239.9.9.3:9000\"]\nstale_threshold_ms = 1000\n\
                 source_threshold_ms = 1000\n{max}"
            )
        };
        let itch = "[[feed]]\nname = \"nq\"\nprotocol = \"itch50\"\n\
                    lines = [\"239.9.9.1:9000\"]\nstale_threshold_ms = 1000\n\
                    source_threshold_ms = 1000\nmax_symbols = 600\n";
        let sqf = "[[feed]]\nname = \"lp\"\nkind = \"full\"\nlines = [\"239.9.9.2:9000\"]\n\
                   stale_threshold_ms = 1000\nsource_threshold_ms = 1000\n";
        let with = |capacity: u64, feeds: &str| format!("[state]\ncapacity = {capacity}\n{feeds}");
        let set = format!("{itch}{sqf}{}", mdp3("max_instruments = 300\n"));
        let c = Config::parse(&with(901, &set), "t.toml").unwrap();
        assert_eq!(c.reservations(), [600, 1, 300]);
        // Names beyond a slot's first: a Symbol for each instrument MDP3
        // reserves; none for the others. A handler's table holds them.
        assert_eq!(c.name_reservations(), [0, 0, 300]);
        let h = crate::handler::Handler::with_table(
            &c,
            crate::state::StateTable::with_feeds(901, 3),
            16,
        );
        assert_eq!(h.table().names_owed(), 300);
        let e = err(&with(900, &set));
        assert!(
            e.contains("('nq' max_symbols 600, 'cme' max_instruments 300: 900 together) and a slot for the other feed"),
            "{e}"
        );
        // Left at its default (100,000), `max_instruments` reserves one
        // slot, as a feed without a bound does: the default capacity
        // holds an MDP3 feed beside another.
        let default = format!("{sqf}{}", mdp3(""));
        let c = Config::parse(&default, "t.toml").unwrap();
        assert_eq!((c.capacity, c.reservations()), (65_536, vec![1, 1]));
        assert_eq!(c.name_reservations(), [0, 0]);
        // Set to the default, it is a bound the configuration states.
        let stated = format!("{sqf}{}", mdp3("max_instruments = 100000\n"));
        assert!(err(&stated).contains("'cme' max_instruments 100000: 100000 together"));
    }
}
