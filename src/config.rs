//! Configuration: parsed from TOML into plain structs, then validated into a
//! resolved [`Config`]. Nothing is opened until validation has passed, and
//! every error is one line that names the file, the line and the key.
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
use crate::rules::FeedKind;
use crate::state::DEFAULT_CAPACITY;
use crate::symbol::Symbol;
use crate::verdict::Thresholds;
use serde::Deserialize;
use std::fmt;
use std::net::SocketAddrV4;
use std::path::Path;

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
    /// Full or delta.
    pub kind: FeedKind,
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

impl FeedConfig {
    /// Thresholds in force for `symbol`.
    pub fn thresholds_for(&self, symbol: Symbol) -> Thresholds {
        match self.overrides.binary_search_by_key(&symbol, |(s, _)| *s) {
            Ok(i) => self.overrides[i].1,
            Err(_) => self.thresholds,
        }
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
    capacity: Option<i64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawMetrics {
    enabled: Option<bool>,
    listen: Option<String>,
    interval_ms: Option<i64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLog {
    format: Option<LogFormat>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSidecar {
    shm_path: Option<String>,
    shm_mode: Option<String>,
    cpu: Option<i64>,
    idle: Option<Idle>,
    idle_sleep_us: Option<i64>,
    rcvbuf_bytes: Option<i64>,
    batch: Option<i64>,
    heartbeat_ms: Option<i64>,
    dead_after_ms: Option<i64>,
    offset_queue: Option<i64>,
    interface: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFeed {
    name: String,
    source: Option<String>,
    kind: FeedKind,
    lines: Vec<String>,
    stale_threshold_ms: i64,
    source_threshold_ms: i64,
    clock_offset: Option<RawOffset>,
    offset_window_ms: Option<i64>,
    #[serde(default)]
    symbol: Vec<RawSymbol>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSymbol {
    name: String,
    stale_threshold_ms: Option<i64>,
    source_threshold_ms: Option<i64>,
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

impl Config {
    /// Reads and validates a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("config {name}: {e}")))?;
        Config::parse(&text, &name)
    }

    /// Parses and validates configuration text; `name` is used in errors.
    pub fn parse(text: &str, name: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig =
            toml::from_str(text).map_err(|e| ConfigError(toml_error(name, text, &e)))?;
        resolve(raw).map_err(|e| ConfigError(format!("config {name}: {e}")))
    }

    /// The id (position) of the feed called `name`.
    pub fn feed_id(&self, name: &str) -> Option<u16> {
        self.feeds
            .iter()
            .position(|f| f.name == name)
            .map(|i| i as u16)
    }
}

/// One line from a TOML error: file, line, the offending line's text, and the message.
fn toml_error(name: &str, text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim().replace('\n', " ");
    match e.span() {
        Some(span) => {
            let at = span.start.min(text.len());
            let line_no = text[..at].matches('\n').count() + 1;
            let line = text.lines().nth(line_no - 1).unwrap_or("").trim();
            format!("config {name}: line {line_no}: `{line}`: {msg}")
        }
        None => format!("config {name}: {msg}"),
    }
}

fn positive_ms(key: &str, v: i64) -> Result<u64, String> {
    if v <= 0 {
        return Err(format!(
            "{key} must be a positive integer of milliseconds, got {v}"
        ));
    }
    (v as u64)
        .checked_mul(NS_PER_MS)
        .ok_or_else(|| format!("{key} = {v} is too large"))
}

fn resolve(raw: RawConfig) -> Result<Config, String> {
    let capacity = match raw.state.and_then(|s| s.capacity) {
        None => DEFAULT_CAPACITY,
        Some(c) if c > 0 && c <= u32::MAX as i64 => c as usize,
        Some(c) => {
            return Err(format!(
                "[state] capacity must be a positive integer below 2^32, got {c}"
            ))
        }
    };
    let sidecar = resolve_sidecar(raw.sidecar.unwrap_or_default())?;
    let m = raw.metrics.unwrap_or_default();
    let d = MetricsConfig::default();
    let metrics = MetricsConfig {
        enabled: m.enabled.unwrap_or(d.enabled),
        listen: match m.listen {
            None => d.listen,
            Some(l) => l
                .parse()
                .map_err(|_| format!("[metrics] listen must be ip:port, got '{l}'"))?,
        },
        interval_ns: match m.interval_ms {
            None => d.interval_ns,
            Some(v) if v > 0 => v as u64 * NS_PER_MS,
            Some(v) => {
                return Err(format!(
                    "[metrics] interval_ms must be a positive integer, got {v}"
                ))
            }
        },
    };
    let log_format = raw.log.and_then(|l| l.format).unwrap_or_default();
    if raw.feed.is_empty() {
        return Err("no [[feed]] table: at least one feed is needed".into());
    }
    if raw.feed.len() > u16::MAX as usize {
        return Err(format!(
            "{} feeds: at most {} are supported",
            raw.feed.len(),
            u16::MAX
        ));
    }
    let mut feeds: Vec<FeedConfig> = Vec::with_capacity(raw.feed.len());
    for f in raw.feed {
        let feed = resolve_feed(f)?;
        if feeds.iter().any(|g| g.name == feed.name) {
            return Err(format!("feed '{}': duplicate feed name", feed.name));
        }
        for line in &feed.lines {
            if let Some(g) = feeds.iter().find(|g| g.lines.contains(line)) {
                return Err(format!(
                    "feed '{}': line {line} is already used by feed '{}'",
                    feed.name, g.name
                ));
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

fn resolve_sidecar(s: RawSidecar) -> Result<SidecarConfig, String> {
    let d = SidecarConfig::default();
    let positive = |key: &str, v: Option<i64>, default: u64| -> Result<u64, String> {
        match v {
            None => Ok(default),
            Some(v) if v > 0 => Ok(v as u64),
            Some(v) => Err(format!(
                "[sidecar] {key} must be a positive integer, got {v}"
            )),
        }
    };
    let shm_mode = match s.shm_mode {
        None => d.shm_mode,
        Some(m) => u32::from_str_radix(&m, 8)
            .ok()
            .filter(|m| *m <= 0o777)
            .ok_or_else(|| {
                format!(
                    "[sidecar] shm_mode must be octal permission bits like \"0640\", got \"{m}\""
                )
            })?,
    };
    let cpu = match s.cpu {
        None => None,
        Some(c) if (0..1024).contains(&c) => Some(c as usize),
        Some(c) => return Err(format!("[sidecar] cpu must be a CPU number, got {c}")),
    };
    let interface = match s.interface {
        None => d.interface,
        Some(i) => i
            .parse()
            .map_err(|_| format!("[sidecar] interface must be an IPv4 address, got '{i}'"))?,
    };
    let shm_path = match s.shm_path {
        None => d.shm_path,
        Some(p) if !p.is_empty() => p.into(),
        Some(_) => return Err("[sidecar] shm_path must not be empty".into()),
    };
    Ok(SidecarConfig {
        shm_path,
        shm_mode,
        cpu,
        idle: s.idle.unwrap_or(d.idle),
        idle_sleep_us: positive("idle_sleep_us", s.idle_sleep_us, d.idle_sleep_us)?,
        rcvbuf_bytes: positive("rcvbuf_bytes", s.rcvbuf_bytes, d.rcvbuf_bytes as u64)? as usize,
        batch: positive("batch", s.batch, d.batch as u64)?.min(1024) as usize,
        heartbeat_ns: positive("heartbeat_ms", s.heartbeat_ms, 1)?.saturating_mul(NS_PER_MS),
        dead_after_ns: positive("dead_after_ms", s.dead_after_ms, 100)?.saturating_mul(NS_PER_MS),
        offset_queue: positive("offset_queue", s.offset_queue, d.offset_queue as u64)? as usize,
        interface,
    })
}

fn resolve_feed(f: RawFeed) -> Result<FeedConfig, String> {
    let name = f.name;
    let ctx = |e: String| format!("feed '{name}': {e}");
    if name.trim().is_empty() {
        return Err("feed name must not be empty".into());
    }
    if f.lines.is_empty() || f.lines.len() > 2 {
        return Err(ctx(format!(
            "lines must list 1 or 2 ip:port (line A, optional line B), got {}",
            f.lines.len()
        )));
    }
    let mut lines = Vec::with_capacity(2);
    for l in &f.lines {
        let addr: SocketAddrV4 = l
            .parse()
            .map_err(|_| ctx(format!("lines: '{l}' is not an IPv4 ip:port")))?;
        if addr.port() == 0 {
            return Err(ctx(format!("lines: '{l}' has port 0")));
        }
        if lines.contains(&addr) {
            return Err(ctx(format!("lines: '{l}' is listed twice")));
        }
        lines.push(addr);
    }
    let source = match &f.source {
        None => None,
        Some(s) => Some(
            s.parse::<std::net::Ipv4Addr>()
                .map_err(|_| ctx(format!("source: '{s}' is not an IPv4 address")))?,
        ),
    };
    let thresholds = Thresholds {
        stale_ns: positive_ms("stale_threshold_ms", f.stale_threshold_ms).map_err(ctx)?,
        source_ns: positive_ms("source_threshold_ms", f.source_threshold_ms).map_err(ctx)?,
    };
    let window_ns =
        positive_ms("offset_window_ms", f.offset_window_ms.unwrap_or(60_000)).map_err(ctx)?;
    let offset = match f.clock_offset.unwrap_or(RawOffset::Auto) {
        RawOffset::Auto => OffsetMode::Auto { window_ns },
        RawOffset::Fixed(ns) => OffsetMode::Fixed(ns),
    };
    let mut overrides: Vec<(Symbol, Thresholds)> = Vec::with_capacity(f.symbol.len());
    for s in f.symbol {
        let sym = Symbol::parse(&s.name).ok_or_else(|| {
            ctx(format!(
                "symbol '{}': not a valid symbol (1 to 8 printable ASCII characters, no spaces)",
                s.name
            ))
        })?;
        if overrides.iter().any(|(o, _)| *o == sym) {
            return Err(ctx(format!("symbol '{}': listed twice", s.name)));
        }
        let sctx = |e: String| ctx(format!("symbol '{}': {e}", s.name));
        let th = Thresholds {
            stale_ns: match s.stale_threshold_ms {
                Some(v) => positive_ms("stale_threshold_ms", v).map_err(sctx)?,
                None => thresholds.stale_ns,
            },
            source_ns: match s.source_threshold_ms {
                Some(v) => positive_ms("source_threshold_ms", v).map_err(sctx)?,
                None => thresholds.source_ns,
            },
        };
        overrides.push((sym, th));
    }
    overrides.sort_by_key(|(s, _)| *s);
    Ok(FeedConfig {
        name,
        kind: f.kind,
        lines,
        source,
        thresholds,
        offset,
        overrides,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
