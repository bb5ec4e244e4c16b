//! An `itch50` feed's own keys (spec itch50 §6), their ranges, and the
//! services the feed receives on: its lines and the re-request channel.
//!
//! ```toml
//! [[feed]]
//! name = "nasdaq"
//! protocol = "itch50"                # no `kind`: ITCH is a delta feed by nature
//! lines = ["239.2.1.1:26477", "239.2.1.2:26477"]
//! stale_threshold_ms = 1500
//! source_threshold_ms = 2000
//! timezone = "America/New_York"      # IANA zone of the session date's midnight (the default)
//! recovery = "127.0.0.1:18000"       # optional re-request server
//! recovery_listen = "0.0.0.0:0"      # where its answers arrive (default: an ephemeral port)
//! gap_timeout_ms = 5                 # default 5, or 1000 with a recovery server
//! max_held = 1000000
//! max_orders = 16777216
//! max_symbols = 65536
//! join_gap_max = 10000
//! request_max = 40
//! request_interval_ms = 10
//! request_rate = 10000
//! glimpse = "127.0.0.1:18100"        # optional GLIMPSE snapshot server (IPv4 unicast); enables snapshots
//! glimpse_user = "tgsim"             # required with glimpse: 1 to 6 printable ASCII characters
//! glimpse_password_env = "TG_GLIMPSE_PW" # the variable holding the password, or instead
//! # glimpse_password_file = "/etc/tickguard/glimpse.pw" # its first line; mode 0600 or stricter
//! glimpse_session_check = true       # the snapshot's session must be the feed's
//! snapshot_triggers = ["join", "gap"] # what asks for a snapshot: any of them, or none
//! snapshot_timeout_ms = 60000        # a whole snapshot, at most
//! snapshot_idle_ms = 5000            # silence within a snapshot, at most (≤ snapshot_timeout_ms)
//! snapshot_retry_ms = 500            # first wait before another attempt
//! snapshot_retry_max_ms = 30000      # longest wait between attempts (≥ snapshot_retry_ms)
//! snapshot_max_attempts = 8          # attempts for one trigger
//! snapshot_max_messages = 50000000   # messages one snapshot may hold
//! ```
//!
//! Every `glimpse_*` and `snapshot_*` key needs `glimpse`: without a server
//! it would do nothing, so it is refused. The password itself is never in
//! the file, nor read with it: [`read_password`] reads it from its source,
//! for `run` alone, before any socket opens (`check`, `stat` and `replay`
//! never call it).

use crate::config::keys::{echo, FeedKeys, FeedProtocol, Problem, Range, Sp, NS_PER_MS};
use crate::config::services::{line_index, Channel, Service};
use crate::state::FeedKind;
use std::fmt;
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};

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
    /// the feed is `suspect` until the session changes or a snapshot merges.
    pub max_orders: usize,
    /// Most symbols a session holds; a message naming one more is refused
    /// its symbol and the feed is `suspect` until the session changes or a
    /// snapshot merges.
    pub max_symbols: usize,
    /// A session's first packet beyond `1 + join_gap_max` is a mid-session join.
    pub join_gap_max: u64,
    /// Most messages one re-request asks for.
    pub request_max: u16,
    /// The same missing sequence is re-requested at most this often, ns.
    pub request_interval_ns: u64,
    /// Most re-requests a second, over every gap.
    pub request_rate: u32,
    /// GLIMPSE snapshots, when a server is set (`glimpse`).
    pub glimpse: Option<GlimpseConfig>,
}

/// An `itch50` feed's GLIMPSE snapshot settings (`glimpse`, `glimpse_*`,
/// `snapshot_*`). The password is not here: only where to read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlimpseConfig {
    /// The snapshot server, unicast.
    pub server: SocketAddrV4,
    /// Login user name: 1 to [`GLIMPSE_USER_MAX`] printable ASCII characters.
    pub user: String,
    /// Where [`read_password`] finds the password.
    pub password: PasswordSource,
    /// The snapshot's session must be the feed's (`glimpse_session_check`).
    pub session_check: bool,
    /// What asks for a snapshot (`snapshot_triggers`).
    pub triggers: Triggers,
    /// An attempt fails this long after its connection was made, ns.
    pub timeout_ns: u64,
    /// An attempt fails when its connect or its server is silent this
    /// long, ns; at most `timeout_ns`.
    pub idle_ns: u64,
    /// First wait before another attempt, ns.
    pub retry_ns: u64,
    /// Longest wait between attempts, ns; at least `retry_ns`.
    pub retry_max_ns: u64,
    /// Attempts for one trigger, at most.
    pub max_attempts: u32,
    /// Messages one snapshot may hold, at most.
    pub max_messages: u64,
}

/// Where a GLIMPSE password is read from (`glimpse_password_env` or
/// `glimpse_password_file`, exactly one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordSource {
    /// The environment variable of this name.
    Env(String),
    /// The first line of this file, which group and others may not access.
    File(PathBuf),
}

/// What may start a snapshot by itself (`snapshot_triggers`; both by
/// default; glimpse G3.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Triggers {
    /// `"join"`: a mid-session join, or the session's first gap given up.
    pub join: bool,
    /// `"gap"`: any other gap given up.
    pub gap: bool,
}

/// Position of the recovery channel among the feed's services (after its
/// lines).
const RECOVERY_SERVICE: usize = 1;

/// The line number under which the recovery channel's answers are applied
/// (lines A and B are 0 and 1).
pub const RECOVERY_LINE: usize = line_index(RECOVERY_SERVICE, 0);

/// `gap_timeout_ms`: default 5 without a recovery server (line B's copy
/// may still come), 1,000 with one; at most an hour.
pub const GAP_TIMEOUT_MS: Range = Range {
    table: "[[feed]] itch50",
    key: "gap_timeout_ms",
    min: 1,
    max: 3_600_000,
    default: None,
    unit: "ms",
};

/// `max_held`: messages held back; a record is 64 bytes, so the most
/// (16 Mi) holds 1 GiB.
pub const MAX_HELD: Range = Range {
    table: "[[feed]] itch50",
    key: "max_held",
    min: 1,
    max: 16_777_216,
    default: Some(1_000_000),
    unit: "messages",
};

/// `max_orders`: live orders the feed's books hold. A real day peaks at a
/// few million; the order table beyond the fixed window takes 42 to 83
/// bytes an order, so the default bounds it near 1.2 GiB and the most near
/// 9 GiB. An add beyond is refused, counted (`orders_refused`) and makes
/// the feed `suspect` until the session changes: memory stays bounded when
/// a venue or an injector never deletes.
pub const MAX_ORDERS: Range = Range {
    table: "[[feed]] itch50",
    key: "max_orders",
    min: 1,
    max: 1 << 27,
    default: Some(1 << 24),
    unit: "orders",
};

/// `max_symbols`: symbols one session holds (the Stock Directory's
/// stocks, and any other message's stock on a locate not mapped yet).
/// Nasdaq lists about 12,000; the default is one per locate code. Each
/// takes under 300 bytes (its state, book entry, index and slot map), so
/// the default bounds them near 20 MiB and the most near 300 MiB. A
/// message that would make one more is refused its symbol (its locate is
/// left unmapped, a Stock Directory remapping one unmapping it, so its new
/// orders change no book), counted
/// (`symbols_refused`), and makes the feed `suspect` until the session
/// changes: memory stays bounded when a directory never ends.
pub const MAX_SYMBOLS: Range = Range {
    table: "[[feed]] itch50",
    key: "max_symbols",
    min: 1,
    max: 1 << 20,
    default: Some(1 << 16),
    unit: "symbols",
};

/// `join_gap_max`: a session's first packet further than this past
/// sequence 1 is a mid-session join; at most 2^40.
pub const JOIN_GAP_MAX: Range = Range {
    table: "[[feed]] itch50",
    key: "join_gap_max",
    min: 0,
    max: 1 << 40,
    default: Some(10_000),
    unit: "messages",
};

/// `request_max`: messages one re-request asks for; the request's count is
/// a u16. 40 messages of a typical mix (about 30 bytes on average, 32 with
/// their length; 38 adds of 36 bytes) fit a 1,472-byte answer datagram: a
/// server that answers a request with one datagram leaves the rest of a
/// larger one to be asked again `request_interval_ms` later.
pub const REQUEST_MAX: Range = Range {
    table: "[[feed]] itch50",
    key: "request_max",
    min: 1,
    max: 65_535,
    default: Some(40),
    unit: "messages",
};

/// `request_interval_ms`: a missing sequence is asked for again at most
/// this often; at most a minute.
pub const REQUEST_INTERVAL_MS: Range = Range {
    table: "[[feed]] itch50",
    key: "request_interval_ms",
    min: 1,
    max: 60_000,
    default: Some(10),
    unit: "ms",
};

/// `request_rate`: re-requests a second the feed sends in all, over every
/// open gap, in bursts of at most a hundredth of that (at least one).
/// 10,000 requests of 40 messages ask for 400,000 messages a second, more
/// than a busy feed carries; a venue's server that takes less is told so
/// here.
pub const REQUEST_RATE: Range = Range {
    table: "[[feed]] itch50",
    key: "request_rate",
    min: 1,
    max: 100_000,
    default: Some(10_000),
    unit: "requests/s",
};

/// `snapshot_timeout_ms`: an attempt at a snapshot fails (and is retried)
/// this long after its connection was made, if it has not ended (the
/// connect has `snapshot_idle_ms` of its own); at least
/// `snapshot_idle_ms`'s least (an idle bound above the whole would never
/// act), at most an hour.
pub const SNAPSHOT_TIMEOUT_MS: Range = Range {
    table: "[[feed]] itch50",
    key: "snapshot_timeout_ms",
    min: SNAPSHOT_IDLE_MS.min,
    max: 3_600_000,
    default: Some(60_000),
    unit: "ms",
};

/// `snapshot_idle_ms`: an attempt whose connect is not answered, or whose
/// server is silent, this long fails (and is retried; the server sends
/// heartbeats every second); at most a minute, and at most
/// `snapshot_timeout_ms`.
pub const SNAPSHOT_IDLE_MS: Range = Range {
    table: "[[feed]] itch50",
    key: "snapshot_idle_ms",
    min: 2_000,
    max: 60_000,
    default: Some(5_000),
    unit: "ms",
};

/// `snapshot_retry_ms`: the first wait before another attempt, doubled
/// after each failure up to `snapshot_retry_max_ms`; at most a minute.
pub const SNAPSHOT_RETRY_MS: Range = Range {
    table: "[[feed]] itch50",
    key: "snapshot_retry_ms",
    min: 10,
    max: 60_000,
    default: Some(500),
    unit: "ms",
};

/// `snapshot_retry_max_ms`: the longest wait between attempts; at least
/// `snapshot_retry_ms`, at most ten minutes.
pub const SNAPSHOT_RETRY_MAX_MS: Range = Range {
    table: "[[feed]] itch50",
    key: "snapshot_retry_max_ms",
    min: SNAPSHOT_RETRY_MS.min,
    max: 600_000,
    default: Some(30_000),
    unit: "ms",
};

/// `snapshot_max_attempts`: attempts for one trigger before the feed stays
/// without a snapshot until the next one.
pub const SNAPSHOT_MAX_ATTEMPTS: Range = Range {
    table: "[[feed]] itch50",
    key: "snapshot_max_attempts",
    min: 1,
    max: 1_000,
    default: Some(8),
    unit: "attempts",
};

/// `snapshot_max_messages`: messages one snapshot may hold; a server that
/// sends more is cut off (a day's full book is a few million, so the
/// default leaves room and still bounds a snapshot that never ends).
pub const SNAPSHOT_MAX_MESSAGES: Range = Range {
    table: "[[feed]] itch50",
    key: "snapshot_max_messages",
    min: 1_000,
    max: 1_000_000_000,
    default: Some(50_000_000),
    unit: "messages",
};

/// Characters of a GLIMPSE user name, at most (SoupBinTCP's login field).
pub const GLIMPSE_USER_MAX: usize = 6;

/// Characters of a GLIMPSE password, at most (SoupBinTCP's login field).
pub const GLIMPSE_PASSWORD_MAX: usize = 10;

/// Bytes of a password file read, at most: its first line is all it takes.
const PASSWORD_READ_MAX: u64 = 4096;

/// The snapshot keys besides `glimpse`, each refused without it.
const SNAPSHOT_KEYS: &[&str] = &[
    "glimpse_user",
    "glimpse_password_env",
    "glimpse_password_file",
    "glimpse_session_check",
    "snapshot_triggers",
    "snapshot_timeout_ms",
    "snapshot_idle_ms",
    "snapshot_retry_ms",
    "snapshot_retry_max_ms",
    "snapshot_max_attempts",
    "snapshot_max_messages",
];

/// The names `snapshot_triggers` takes.
const TRIGGERS: &str = "\"join\", \"gap\"";

impl FeedProtocol for ItchConfig {
    /// Prices in 1/10,000 dollar.
    const PRICE_DECIMALS: u8 = 4;

    const KEYS: &'static [&'static str] = &[
        "timezone",
        "gap_timeout_ms",
        "recovery",
        "recovery_listen",
        "max_held",
        "max_orders",
        "max_symbols",
        "join_gap_max",
        "request_max",
        "request_interval_ms",
        "request_rate",
        "glimpse",
        "glimpse_user",
        "glimpse_password_env",
        "glimpse_password_file",
        "glimpse_session_check",
        "snapshot_triggers",
        "snapshot_timeout_ms",
        "snapshot_idle_ms",
        "snapshot_retry_ms",
        "snapshot_retry_max_ms",
        "snapshot_max_attempts",
        "snapshot_max_messages",
    ];

    const RANGES: &'static [Range] = &[
        GAP_TIMEOUT_MS,
        MAX_HELD,
        MAX_ORDERS,
        MAX_SYMBOLS,
        JOIN_GAP_MAX,
        REQUEST_MAX,
        REQUEST_INTERVAL_MS,
        REQUEST_RATE,
        SNAPSHOT_TIMEOUT_MS,
        SNAPSHOT_IDLE_MS,
        SNAPSHOT_RETRY_MS,
        SNAPSHOT_RETRY_MAX_MS,
        SNAPSHOT_MAX_ATTEMPTS,
        SNAPSHOT_MAX_MESSAGES,
    ];

    const REFUSED: &'static [(&'static str, &'static str)] =
        &[("kind", "ITCH is a delta feed by nature")];

    fn resolve(keys: &mut FeedKeys) -> Result<ItchConfig, Problem> {
        let timezone = match keys.text("timezone")? {
            None => "America/New_York".to_string(),
            Some(z) if jiff::tz::db().get(z.get_ref()).is_ok() => z.into_inner(),
            Some(z) => {
                return Err(Problem::at(
                    &z,
                    format!(
                        "timezone {} is not an IANA time zone name",
                        echo(z.get_ref())
                    ),
                ))
            }
        };
        let recovery = match keys.addr("recovery")? {
            None => {
                // They would do nothing: nothing is re-requested.
                keys.refuse_without(
                    &["request_max", "request_interval_ms", "request_rate"],
                    "recovery (the re-request server's ip:port): without it nothing is re-requested",
                )?;
                None
            }
            Some(r) => {
                let a = *r.get_ref();
                if a.port() == 0
                    || a.ip().is_unspecified()
                    || a.ip().is_multicast()
                    || a.ip().is_broadcast()
                {
                    return Err(Problem::at(
                        &r,
                        format!("recovery: {a} must be a unicast address with a port"),
                    ));
                }
                Some(a)
            }
        };
        let listen_key = keys.addr("recovery_listen")?;
        let recovery_listen = match listen_key.clone() {
            None => SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0),
            Some(r) => {
                let a = *r.get_ref();
                if a.ip().is_multicast() || a.ip().is_broadcast() {
                    return Err(Problem::at(
                        &r,
                        format!("recovery_listen: {a} must be a local unicast address or 0.0.0.0"),
                    ));
                }
                a
            }
        };
        // Requests sent to this host's own listening port would come back
        // as the server's answers (and be refused as such): recovery would
        // never work.
        if let (Some(r), Some(at)) = (recovery, &listen_key) {
            let own_ip = recovery_listen.ip().is_unspecified() && r.ip().is_loopback();
            if r.port() == recovery_listen.port() && (r.ip() == recovery_listen.ip() || own_ip) {
                return Err(Problem::at(
                    at,
                    format!(
                        "recovery {r} is this feed's own recovery_listen {recovery_listen}: \
                         requests would be sent to itself"
                    ),
                ));
            }
        }
        let gap_timeout_ms = match keys.int(&GAP_TIMEOUT_MS)? {
            Some(v) => v as u64,
            None if recovery.is_some() => 1_000,
            None => 5,
        };
        Ok(ItchConfig {
            timezone,
            gap_timeout_ns: gap_timeout_ms * NS_PER_MS,
            recovery,
            recovery_listen,
            max_held: keys.int_or_default(&MAX_HELD)? as usize,
            max_orders: keys.int_or_default(&MAX_ORDERS)? as usize,
            max_symbols: keys.int_or_default(&MAX_SYMBOLS)? as usize,
            join_gap_max: keys.int_or_default(&JOIN_GAP_MAX)?,
            request_max: keys.int_or_default(&REQUEST_MAX)? as u16,
            request_interval_ns: keys.int_or_default(&REQUEST_INTERVAL_MS)? * NS_PER_MS,
            request_rate: keys.int_or_default(&REQUEST_RATE)? as u32,
            glimpse: resolve_glimpse(keys)?,
        })
    }

    fn kind(&self) -> FeedKind {
        FeedKind::Delta
    }

    /// `max_symbols`: forged Stock Directory messages make symbols, and a
    /// session change lets them make `max_symbols` more each time.
    fn reserved_slots(&self) -> Option<(usize, &'static str)> {
        Some((self.max_symbols, "max_symbols"))
    }

    fn services(&self, lines: &[SocketAddrV4]) -> Vec<Service> {
        let recovery = Channel {
            server: self.recovery,
            server_key: "recovery",
            listen: self.recovery_listen,
        };
        let mut services = vec![
            Service::lines("lines", lines),
            Service::channel("recovery_listen", recovery),
        ];
        if let Some(g) = &self.glimpse {
            services.push(Service::stream("glimpse", g.server));
        }
        services
    }

    /// A relative `glimpse_password_file` is taken from the configuration
    /// file's directory, as `definitions` is; it is read (and checked)
    /// only when `run` starts the snapshots.
    fn locate_files(&mut self, dir: &Path) -> Result<(), String> {
        if let Some(GlimpseConfig {
            password: PasswordSource::File(path),
            ..
        }) = &mut self.glimpse
        {
            *path = dir.join(&*path);
        }
        Ok(())
    }

    fn files(&self) -> Vec<&Path> {
        match &self.glimpse {
            Some(GlimpseConfig {
                password: PasswordSource::File(path),
                ..
            }) => vec![path],
            _ => Vec::new(),
        }
    }
}

/// The snapshot settings, when `glimpse` names a server; without it, any
/// other snapshot key is refused (it would do nothing).
fn resolve_glimpse(keys: &mut FeedKeys) -> Result<Option<GlimpseConfig>, Problem> {
    let Some(g) = keys.addr("glimpse")? else {
        keys.refuse_without(
            SNAPSHOT_KEYS,
            "glimpse (the snapshot server's ip:port): without it snapshots are off",
        )?;
        return Ok(None);
    };
    let server = *g.get_ref();
    let ip = server.ip();
    if server.port() == 0 || ip.is_unspecified() || ip.is_multicast() || ip.is_broadcast() {
        return Err(Problem::at(
            &g,
            format!("glimpse: {server} must be a unicast address with a port"),
        ));
    }
    let user = match keys.text("glimpse_user")? {
        None => {
            return Err(Problem::at(
                &g,
                format!("glimpse needs glimpse_user (1 to {GLIMPSE_USER_MAX} printable ASCII characters)"),
            ))
        }
        Some(u) if valid_user(u.get_ref()) => u.into_inner(),
        Some(u) => {
            return Err(Problem::at(
                &u,
                format!(
                    "glimpse_user {} must be 1 to {GLIMPSE_USER_MAX} printable ASCII characters, no spaces",
                    echo(u.get_ref())
                ),
            ))
        }
    };
    let password = password_source(keys, &g)?;
    let session_check = keys
        .flag("glimpse_session_check")?
        .is_none_or(Sp::into_inner);
    let triggers =
        match keys.strings("snapshot_triggers", &format!("trigger names ({TRIGGERS})"))? {
            None => Triggers {
                join: true,
                gap: true,
            },
            Some(t) => triggers(&t)?,
        };
    let timeout_ms = keys.int(&SNAPSHOT_TIMEOUT_MS)?;
    let idle_ms = keys.int(&SNAPSHOT_IDLE_MS)?;
    let (timeout, idle) = (
        or_default(timeout_ms, &SNAPSHOT_TIMEOUT_MS),
        or_default(idle_ms, &SNAPSHOT_IDLE_MS),
    );
    if idle > timeout {
        return Err(Problem::at_offset(
            keys.at("snapshot_idle_ms")
                .or(keys.at("snapshot_timeout_ms")),
            format!(
                "snapshot_idle_ms = {idle}{} must be at most snapshot_timeout_ms = {timeout}{}",
                default_note(idle_ms),
                default_note(timeout_ms)
            ),
        ));
    }
    let retry_ms = keys.int(&SNAPSHOT_RETRY_MS)?;
    let retry_max_ms = keys.int(&SNAPSHOT_RETRY_MAX_MS)?;
    let (retry, retry_max) = (
        or_default(retry_ms, &SNAPSHOT_RETRY_MS),
        or_default(retry_max_ms, &SNAPSHOT_RETRY_MAX_MS),
    );
    if retry_max < retry {
        return Err(Problem::at_offset(
            keys.at("snapshot_retry_max_ms").or(keys.at("snapshot_retry_ms")),
            format!(
                "snapshot_retry_max_ms = {retry_max}{} must be at least snapshot_retry_ms = {retry}{}",
                default_note(retry_max_ms),
                default_note(retry_ms)
            ),
        ));
    }
    Ok(Some(GlimpseConfig {
        server,
        user,
        password,
        session_check,
        triggers,
        timeout_ns: timeout * NS_PER_MS,
        idle_ns: idle * NS_PER_MS,
        retry_ns: retry * NS_PER_MS,
        retry_max_ns: retry_max * NS_PER_MS,
        max_attempts: keys.int_or_default(&SNAPSHOT_MAX_ATTEMPTS)? as u32,
        max_messages: keys.int_or_default(&SNAPSHOT_MAX_MESSAGES)?,
    }))
}

/// `v` (already in its range), or `range`'s default.
fn or_default(v: Option<i64>, range: &Range) -> u64 {
    v.or(range.default).unwrap_or(range.min) as u64
}

/// " (the default)" after a value the file did not give.
fn default_note(v: Option<i64>) -> &'static str {
    match v {
        Some(_) => "",
        None => " (the default)",
    }
}

/// A GLIMPSE user name: 1 to 6 printable ASCII characters.
fn valid_user(u: &str) -> bool {
    (1..=GLIMPSE_USER_MAX).contains(&u.len()) && u.bytes().all(|b| b.is_ascii_graphic())
}

/// An environment variable's portable name: letters, digits and `_`, not
/// starting with a digit.
fn valid_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The one password source of a feed whose `glimpse` is `g`.
fn password_source(keys: &mut FeedKeys, g: &Sp<SocketAddrV4>) -> Result<PasswordSource, Problem> {
    let env = keys.text("glimpse_password_env")?;
    let file = keys.text("glimpse_password_file")?;
    match (env, file) {
        (Some(e), Some(f)) => {
            let later = if e.span().start > f.span().start {
                e.span()
            } else {
                f.span()
            };
            Err(Problem::at_offset(
                Some(later.start),
                "glimpse_password_env and glimpse_password_file are both set: give one".into(),
            ))
        }
        (None, None) => Err(Problem::at(
            g,
            "glimpse needs a password source: glimpse_password_env (a variable's name) \
             or glimpse_password_file (a path)"
                .into(),
        )),
        // The value is not echoed: it may be the password, written here
        // by mistake.
        (Some(e), None) if !valid_env_name(e.get_ref()) => Err(Problem::at(
            &e,
            "glimpse_password_env must be the name of an environment variable \
             (letters, digits and _, not starting with a digit), not the password"
                .into(),
        )),
        (Some(e), None) => Ok(PasswordSource::Env(e.into_inner())),
        (None, Some(f)) if f.get_ref().is_empty() || f.get_ref().contains('\0') => {
            Err(Problem::at(
                &f,
                "glimpse_password_file must be a non-empty path without NUL bytes".into(),
            ))
        }
        (None, Some(f)) => Ok(PasswordSource::File(f.into_inner().into())),
    }
}

/// `snapshot_triggers` as listed: known names, each at most once.
fn triggers(list: &Sp<Vec<String>>) -> Result<Triggers, Problem> {
    let mut t = Triggers {
        join: false,
        gap: false,
    };
    for name in list.get_ref() {
        let seen = match name.as_str() {
            "join" => &mut t.join,
            "gap" => &mut t.gap,
            _ => {
                return Err(Problem::at(
                    list,
                    format!(
                        "snapshot_triggers: {} is not a trigger ({TRIGGERS})",
                        echo(name)
                    ),
                ))
            }
        };
        if std::mem::replace(seen, true) {
            return Err(Problem::at(
                list,
                format!("snapshot_triggers: {} is listed twice", echo(name)),
            ));
        }
    }
    Ok(t)
}

/// A GLIMPSE password: 1 to [`GLIMPSE_PASSWORD_MAX`] printable ASCII
/// characters. It never prints (`Password(<redacted>)`), and is zeroed
/// when dropped.
pub struct Password {
    bytes: [u8; GLIMPSE_PASSWORD_MAX],
    len: usize,
}

impl Password {
    /// The password's bytes, for the login.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// A password of `b` (at most 10 bytes), for tests.
    #[cfg(test)]
    pub(crate) fn for_tests(b: &[u8]) -> Password {
        let mut bytes = [0; GLIMPSE_PASSWORD_MAX];
        bytes[..b.len()].copy_from_slice(b);
        Password {
            bytes,
            len: b.len(),
        }
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

impl fmt::Display for Password {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

impl Drop for Password {
    fn drop(&mut self) {
        wipe(&mut self.bytes);
    }
}

/// Overwrites `bytes` with zeros (best effort: `black_box` keeps the
/// compiler from dropping the stores as dead).
fn wipe(bytes: &mut [u8]) {
    bytes.fill(0);
    std::hint::black_box(bytes);
}

/// Reads the GLIMPSE password from `source`; for `run` alone, before any
/// socket opens. An environment variable must be set and valid; a file
/// (symbolic links followed) must be a regular file of mode 0600, 0400 or
/// stricter (no bit outside `0o600`: group and others may not access it,
/// and it is neither executable nor set-id or sticky), and
/// its first line, without `\n` or `\r\n`, is the password. Either way the
/// password is 1 to 10 printable ASCII characters (0x21 to 0x7E).
///
/// An error is one line naming the key and the variable or file, never the
/// password or any part of it.
pub fn read_password(source: &PasswordSource) -> Result<Password, String> {
    match source {
        PasswordSource::Env(name) => {
            let what = password_env_named(name);
            if !valid_env_name(name) {
                return Err(format!("{what}: not an environment variable's name"));
            }
            password_from_env(&what, std::env::var_os(name))
        }
        PasswordSource::File(path) => password_from_file(path),
    }
}

/// `glimpse_password_env` and the variable `name` as an error names them
/// (what [`read_password`]'s errors begin with, then `: ` and why): the
/// name only in the usual shape of a variable's name (upper case), as
/// another value may be the password itself, written there by mistake.
pub fn password_env_named(name: &str) -> String {
    let usual = valid_env_name(name)
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    match usual {
        true => format!("glimpse_password_env {name}"),
        false => "glimpse_password_env (its value not shown: not an upper-case variable's \
                  name, it may be the password)"
            .to_string(),
    }
}

/// The password in an environment variable's `value` (`None`: not set);
/// errors begin with `what`.
fn password_from_env(what: &str, value: Option<std::ffi::OsString>) -> Result<Password, String> {
    use std::os::unix::ffi::OsStringExt;
    let Some(value) = value else {
        return Err(format!("{what}: not set"));
    };
    let mut bytes = value.into_vec();
    let p = password(&bytes, what, "set but empty");
    wipe(&mut bytes);
    p
}

/// Why a password file of `mode` (its `st_mode`) is not private enough,
/// if it is not: 0600, 0400 or stricter (0200, 0000), nothing for group or
/// others, no set-id or sticky bit.
fn mode_problem(mode: u32) -> Option<String> {
    let mode = mode & 0o7777;
    if mode & 0o077 != 0 {
        let how = match mode & 0o044 {
            0 => "open to",
            _ => "readable by",
        };
        return Some(format!(
            "{how} group or others (mode {mode:04o}); chmod 600 it"
        ));
    }
    (mode & !0o600 != 0)
        .then(|| format!("mode {mode:04o}, not 0600, 0400 or stricter; chmod 600 it"))
}

/// The password on the first line of the file at `path`.
fn password_from_file(path: &Path) -> Result<Password, String> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let what = format!("glimpse_password_file {path:?}");
    let fail = |e: std::io::Error| format!("{what}: {e}");
    // Not blocked by a FIFO put in the file's place: it is refused.
    let file = crate::sys::open_regular(path).map_err(fail)?;
    let meta = file.metadata().map_err(fail)?;
    if let Some(problem) = mode_problem(meta.permissions().mode()) {
        return Err(format!("{what}: {problem}"));
    }
    let mut bytes = Vec::with_capacity(PASSWORD_READ_MAX as usize);
    let read = file.take(PASSWORD_READ_MAX).read_to_end(&mut bytes);
    let p = match read {
        Err(e) => Err(fail(e)),
        Ok(_) => match bytes.iter().position(|&b| b == b'\n') {
            None if bytes.len() as u64 == PASSWORD_READ_MAX => Err(format!(
                "{what}: a first line over {PASSWORD_READ_MAX} bytes, at most {GLIMPSE_PASSWORD_MAX} characters"
            )),
            None if bytes.is_empty() => Err(format!("{what}: empty")),
            end => {
                let line = &bytes[..end.unwrap_or(bytes.len())];
                let line = match end {
                    Some(_) => line.strip_suffix(b"\r").unwrap_or(line),
                    None => line,
                };
                password(line, &what, "the first line is empty")
            }
        },
    };
    wipe(&mut bytes);
    p
}

/// `line` as a password, or why not: errors begin with `what`, and say
/// `empty` when it is.
fn password(line: &[u8], what: &str, empty: &str) -> Result<Password, String> {
    if line.is_empty() {
        return Err(format!("{what}: {empty}"));
    }
    if !line.iter().all(u8::is_ascii_graphic) {
        return Err(format!(
            "{what}: a character outside printable ASCII (0x21 to 0x7E; no spaces)"
        ));
    }
    if line.len() > GLIMPSE_PASSWORD_MAX {
        return Err(format!(
            "{what}: {} characters, at most {GLIMPSE_PASSWORD_MAX}",
            line.len()
        ));
    }
    let mut p = Password {
        bytes: [0; GLIMPSE_PASSWORD_MAX],
        len: line.len(),
    };
    p.bytes[..line.len()].copy_from_slice(line);
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, FeedConfig, ProtocolSettings};

    fn settings(f: &FeedConfig) -> &ItchConfig {
        match &f.settings {
            ProtocolSettings::Itch50(c) => c,
            _ => panic!("not an itch50 feed"),
        }
    }

    #[test]
    fn re_request_keys_default_and_apply_to_itch50_only() {
        let itch = "[[feed]]\nname = \"n\"\nprotocol = \"itch50\"\nlines = [\"127.0.0.1:4000\"]\nstale_threshold_ms = 1\nsource_threshold_ms = 1\n";
        let c = Config::parse(itch, "t.toml").unwrap();
        let i = settings(&c.feeds[0]);
        assert_eq!((i.request_max, i.request_interval_ns), (40, 10_000_000));
        assert_eq!(i.request_rate, 10_000);
        let c = Config::parse(
            &format!("{itch}recovery = \"127.0.0.1:18000\"\nrequest_max = 65535\nrequest_interval_ms = 60000\nrequest_rate = 1\n"),
            "t.toml",
        )
        .unwrap();
        let i = settings(&c.feeds[0]);
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
            let e = Config::parse(&format!("{sqf}{key}\n"), "t.toml").unwrap_err();
            let e = e.to_string();
            assert!(e.contains("applies only to protocol \"itch50\""), "{e}");
        }
    }

    /// The recovery channel is the service whose answers come as
    /// [`RECOVERY_LINE`], after the lines A (0) and B (1).
    #[test]
    fn the_recovery_channel_follows_the_lines() {
        let text = "[[feed]]\nname = \"n\"\nprotocol = \"itch50\"\nlines = [\"239.1.1.1:4000\"]\nstale_threshold_ms = 1\nsource_threshold_ms = 1\n";
        let c = Config::parse(text, "t.toml").unwrap();
        let services = c.feeds[0].services();
        assert_eq!(services.len(), 2);
        assert_eq!(services[RECOVERY_SERVICE].key, "recovery_listen");
        assert_eq!(RECOVERY_LINE, 2);
    }

    /// An itch50 feed, then `extra` keys.
    fn itch(extra: &str) -> String {
        format!(
            "[[feed]]\nname = \"n\"\nprotocol = \"itch50\"\nlines = [\"239.1.1.1:4000\"]\n\
             stale_threshold_ms = 1\nsource_threshold_ms = 1\n{extra}"
        )
    }

    /// The keys a snapshot needs, each line ending in `\n`.
    const GLIMPSE: &str = "glimpse = \"127.0.0.1:18100\"\nglimpse_user = \"tgsim\"\n\
                           glimpse_password_env = \"TG_GLIMPSE_PW\"\n";

    /// An itch50 feed with snapshots, then `extra` keys.
    fn snapshots(extra: &str) -> String {
        itch(&format!("{GLIMPSE}{extra}"))
    }

    fn glimpse_of(text: &str) -> Option<GlimpseConfig> {
        let c = Config::parse(text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
        settings(&c.feeds[0]).glimpse.clone()
    }

    fn err(text: &str) -> String {
        let e = Config::parse(text, "t.toml").unwrap_err().to_string();
        assert!(!e.contains('\n'), "one line: {e}");
        assert!(e.starts_with("config t.toml: line "), "{e}");
        e
    }

    /// A password no test writes anywhere but where it belongs.
    const SECRET: &str = "Zq7#Kx!9Wp";

    /// `s` holds neither the password nor any four characters of it.
    fn no_secret(s: &str) {
        let b = SECRET.as_bytes();
        for w in b.windows(4) {
            let w = std::str::from_utf8(w).unwrap();
            assert!(!s.contains(w), "{w:?} of the password shown: {s}");
        }
    }

    #[test]
    fn glimpse_is_off_without_a_server() {
        assert_eq!(glimpse_of(&itch("")), None);
    }

    #[test]
    fn glimpse_defaults() {
        let g = glimpse_of(&snapshots("")).unwrap();
        assert_eq!(
            g,
            GlimpseConfig {
                server: "127.0.0.1:18100".parse().unwrap(),
                user: "tgsim".into(),
                password: PasswordSource::Env("TG_GLIMPSE_PW".into()),
                session_check: true,
                triggers: Triggers {
                    join: true,
                    gap: true
                },
                timeout_ns: 60_000 * NS_PER_MS,
                idle_ns: 5_000 * NS_PER_MS,
                retry_ns: 500 * NS_PER_MS,
                retry_max_ns: 30_000 * NS_PER_MS,
                max_attempts: 8,
                max_messages: 50_000_000,
            }
        );
        // The ranges' defaults are the ones resolved.
        for (r, v) in [
            (SNAPSHOT_TIMEOUT_MS, g.timeout_ns / NS_PER_MS),
            (SNAPSHOT_IDLE_MS, g.idle_ns / NS_PER_MS),
            (SNAPSHOT_RETRY_MS, g.retry_ns / NS_PER_MS),
            (SNAPSHOT_RETRY_MAX_MS, g.retry_max_ns / NS_PER_MS),
            (SNAPSHOT_MAX_ATTEMPTS, u64::from(g.max_attempts)),
            (SNAPSHOT_MAX_MESSAGES, g.max_messages),
        ] {
            assert_eq!(r.default, Some(v as i64), "{}", r.key);
        }
    }

    #[test]
    fn every_glimpse_key_is_set_as_written() {
        let g = glimpse_of(&itch(
            "glimpse = \"10.1.2.3:9\"\nglimpse_user = \"a~!Z09\"\n\
             glimpse_password_file = \"/etc/tickguard/glimpse.pw\"\n\
             glimpse_session_check = false\nsnapshot_triggers = [\"gap\"]\n\
             snapshot_timeout_ms = 7000\nsnapshot_idle_ms = 7000\nsnapshot_retry_ms = 20\n\
             snapshot_retry_max_ms = 20\nsnapshot_max_attempts = 3\n\
             snapshot_max_messages = 1234\n",
        ))
        .unwrap();
        assert_eq!(g.server, "10.1.2.3:9".parse().unwrap());
        assert_eq!(g.user, "a~!Z09");
        let path = PathBuf::from("/etc/tickguard/glimpse.pw");
        assert_eq!(g.password, PasswordSource::File(path));
        assert!(!g.session_check);
        assert_eq!(
            g.triggers,
            Triggers {
                join: false,
                gap: true
            }
        );
        assert_eq!((g.timeout_ns, g.idle_ns), (7_000_000_000, 7_000_000_000));
        assert_eq!((g.retry_ns, g.retry_max_ns), (20_000_000, 20_000_000));
        assert_eq!((g.max_attempts, g.max_messages), (3, 1234));
    }

    /// The snapshot ranges, with keys that keep the two cross-key rules out
    /// of the way of a value at either end.
    fn snapshot_ranges() -> [(Range, &'static str); 6] {
        [
            (SNAPSHOT_TIMEOUT_MS, "snapshot_idle_ms = 2000\n"),
            (SNAPSHOT_IDLE_MS, ""),
            (SNAPSHOT_RETRY_MS, "snapshot_retry_max_ms = 600000\n"),
            (SNAPSHOT_RETRY_MAX_MS, "snapshot_retry_ms = 10\n"),
            (SNAPSHOT_MAX_ATTEMPTS, ""),
            (SNAPSHOT_MAX_MESSAGES, ""),
        ]
    }

    #[test]
    fn every_snapshot_range_is_enforced_at_both_ends() {
        for (r, other) in snapshot_ranges() {
            assert!(ItchConfig::RANGES.contains(&r), "{} is not listed", r.key);
            assert!(ItchConfig::KEYS.contains(&r.key), "{}", r.key);
            assert_eq!(r.table, "[[feed]] itch50");
            let d = r.default.unwrap();
            assert!((r.min..=r.max).contains(&d), "{}", r.key);
            for v in [r.min, r.max] {
                let text = snapshots(&format!("{other}{} = {v}\n", r.key));
                glimpse_of(&text);
            }
            for v in [r.min - 1, r.max + 1] {
                let e = err(&snapshots(&format!("{other}{} = {v}\n", r.key)));
                let want = format!("{} = {v} is out of range: {} to {}", r.key, r.min, r.max);
                assert!(e.contains(&want), "{e}");
                let line = 10 + other.matches('\n').count();
                assert!(e.contains(&format!("line {line}: feed 'n': ")), "{e}");
            }
        }
        // The ranges the settings were asked for; the timeout's least is
        // the idle bound's, which it may not be below.
        let ends = |r: Range| (r.min, r.max);
        assert_eq!(ends(SNAPSHOT_TIMEOUT_MS), (2_000, 3_600_000));
        assert_eq!(ends(SNAPSHOT_IDLE_MS), (2_000, 60_000));
        assert_eq!(ends(SNAPSHOT_RETRY_MS), (10, 60_000));
        assert_eq!(ends(SNAPSHOT_RETRY_MAX_MS), (10, 600_000));
        assert_eq!(ends(SNAPSHOT_MAX_ATTEMPTS), (1, 1_000));
        assert_eq!(ends(SNAPSHOT_MAX_MESSAGES), (1_000, 1_000_000_000));
    }

    #[test]
    fn idle_beyond_the_timeout_is_refused() {
        let e = err(&snapshots(
            "snapshot_timeout_ms = 3000\nsnapshot_idle_ms = 3001\n",
        ));
        assert!(
            e.ends_with(
                "line 11: feed 'n': snapshot_idle_ms = 3001 must be at most snapshot_timeout_ms = 3000"
            ),
            "{e}"
        );
        // The default idle bound (5000) against a short timeout: at the timeout's line.
        let e = err(&snapshots("snapshot_timeout_ms = 4999\n"));
        assert!(
            e.contains("line 10: feed 'n': snapshot_idle_ms = 5000 (the default) must be at most snapshot_timeout_ms = 4999"),
            "{e}"
        );
        let g = glimpse_of(&snapshots("snapshot_timeout_ms = 5000\n")).unwrap();
        assert_eq!(g.idle_ns, g.timeout_ns);
    }

    #[test]
    fn retry_max_below_retry_is_refused() {
        let e = err(&snapshots(
            "snapshot_retry_ms = 1000\nsnapshot_retry_max_ms = 999\n",
        ));
        assert!(
            e.ends_with(
                "line 11: feed 'n': snapshot_retry_max_ms = 999 must be at least snapshot_retry_ms = 1000"
            ),
            "{e}"
        );
        let e = err(&snapshots("snapshot_retry_ms = 30001\n"));
        assert!(
            e.contains("line 10: feed 'n': snapshot_retry_max_ms = 30000 (the default) must be at least snapshot_retry_ms = 30001"),
            "{e}"
        );
        let g = glimpse_of(&snapshots("snapshot_retry_ms = 30000\n")).unwrap();
        assert_eq!(g.retry_ns, g.retry_max_ns);
    }

    /// The re-request server is a unicast ip:port; the channel's local
    /// end is one of this host's (or any); the two are not one socket.
    #[test]
    fn recovery_must_be_a_unicast_server_and_not_the_listener() {
        for a in [
            "239.1.1.1:18000",
            "255.255.255.255:18000",
            "0.0.0.0:18000",
            "127.0.0.1:0",
        ] {
            let e = err(&itch(&format!("recovery = \"{a}\"\n")));
            assert!(
                e.contains(&format!(
                    "line 7: feed 'n': recovery: {a} must be a unicast address with a port"
                )),
                "{e}"
            );
        }
        for a in ["239.1.1.1:18001", "255.255.255.255:18001"] {
            let e = err(&itch(&format!("recovery_listen = \"{a}\"\n")));
            assert!(
                e.contains(&format!(
                    "line 7: feed 'n': recovery_listen: {a} must be a local unicast address or 0.0.0.0"
                )),
                "{e}"
            );
        }
        for (server, listen) in [
            ("127.0.0.1:18000", "127.0.0.1:18000"),
            ("127.0.0.1:18000", "0.0.0.0:18000"),
            ("10.0.0.5:18000", "10.0.0.5:18000"),
        ] {
            let e = err(&itch(&format!(
                "recovery = \"{server}\"\nrecovery_listen = \"{listen}\"\n"
            )));
            assert!(
                e.contains(&format!(
                    "line 8: feed 'n': recovery {server} is this feed's own recovery_listen {listen}"
                )),
                "{e}"
            );
        }
        // The same port on another host, or another port here: a channel.
        for (server, listen) in [
            ("10.0.0.5:18000", "0.0.0.0:18000"),
            ("127.0.0.1:18000", "127.0.0.1:18001"),
            ("127.0.0.2:18000", "127.0.0.1:18000"),
        ] {
            let text = itch(&format!(
                "recovery = \"{server}\"\nrecovery_listen = \"{listen}\"\n"
            ));
            assert!(Config::parse(&text, "t.toml").is_ok(), "{server} {listen}");
        }
    }

    #[test]
    fn glimpse_must_be_a_unicast_server() {
        for a in [
            "239.1.1.1:18100",
            "224.0.0.1:18100",
            "255.255.255.255:18100",
            "0.0.0.0:18100",
            "127.0.0.1:0",
        ] {
            let text = snapshots("").replace("127.0.0.1:18100", a);
            let e = err(&text);
            assert!(
                e.contains(&format!(
                    "line 7: feed 'n': glimpse: {a} must be a unicast address with a port"
                )),
                "{e}"
            );
        }
        for a in ["x", "127.0.0.1", "[::1]:18100", "host:18100"] {
            let e = err(&snapshots("").replace("127.0.0.1:18100", a));
            assert!(
                e.contains("glimpse: ") && e.contains("is not an IPv4 ip:port"),
                "{e}"
            );
        }
        let e = err(&snapshots("").replace("\"127.0.0.1:18100\"", "18100"));
        assert!(e.contains("glimpse = 18100"), "{e}");
    }

    #[test]
    fn one_password_source_and_a_user_are_required() {
        let file = "glimpse_password_file = \"/etc/tickguard/glimpse.pw\"\n";
        let e = err(&snapshots(file));
        assert!(
            e.contains("line 10: feed 'n': glimpse_password_env and glimpse_password_file are both set: give one"),
            "{e}"
        );
        let e = err(&snapshots("").replace("glimpse_password_env = \"TG_GLIMPSE_PW\"\n", ""));
        assert!(
            e.contains("line 7: feed 'n': glimpse needs a password source: glimpse_password_env")
                && e.contains("or glimpse_password_file"),
            "{e}"
        );
        let e = err(&snapshots("").replace("glimpse_user = \"tgsim\"\n", ""));
        assert!(
            e.contains(
                "line 7: feed 'n': glimpse needs glimpse_user (1 to 6 printable ASCII characters)"
            ),
            "{e}"
        );
        for user in ["", "abcdefg", "a b", "tg\\tsim", "é"] {
            let e = err(&snapshots("").replace("\"tgsim\"", &format!("\"{user}\"")));
            assert!(
                e.contains("line 8: feed 'n': glimpse_user ")
                    && e.contains("must be 1 to 6 printable ASCII characters, no spaces"),
                "{user:?}: {e}"
            );
        }
        for user in ["a", "!~ZZ09"] {
            let g = glimpse_of(&snapshots("").replace("tgsim", user)).unwrap();
            assert_eq!(g.user, user);
        }
    }

    /// A variable's name that is not one is refused without echoing it: it
    /// may be the password, written in the wrong key.
    #[test]
    fn a_password_env_is_a_variable_name_never_echoed() {
        for name in [SECRET, "", "1PW", "TG-PW", "TG PW", "PW=x"] {
            let text = snapshots("").replace("TG_GLIMPSE_PW", name);
            let e = err(&text);
            assert!(
                e.contains("line 9: feed 'n': glimpse_password_env must be the name of an environment variable"),
                "{e}"
            );
            no_secret(&e);
        }
        // Pasted unquoted, the line is not TOML, or TOML of another type
        // (digits, say), or under a key miswritten: its value is not
        // quoted either.
        for key in [
            "glimpse_password_env",
            "glimpse_password_file",
            "Glimpse_Password_Env",
        ] {
            for value in [SECRET, "73105822", "7310.5822"] {
                let text = snapshots("").replace(
                    "glimpse_password_env = \"TG_GLIMPSE_PW\"",
                    &format!("{key} = {value}"),
                );
                let e = err(&text);
                assert!(
                    e.contains(&format!("line 9: '{key}' (its value not shown): ")),
                    "{e}"
                );
                for w in value.as_bytes().windows(4) {
                    let w = std::str::from_utf8(w).unwrap();
                    assert!(!e.contains(w), "{w:?} of the value shown: {e}");
                }
            }
        }
        // A key miswritten (an unknown key, an error that quotes its
        // line), the password pasted as its value, quoted or not.
        for key in [
            "glimpse_pasword_env",
            "glimpse_passwd_file",
            "glimpse_pw",
            "glimpse_passwrd",
            "glimpse_pasword",
            "glimpse_paswd",
            "glimpse_psswd",
            "glimpse_passwort_fil",
            "\"glimpse_password_enc\"",
        ] {
            for value in [format!("\"{SECRET}\""), SECRET.to_string()] {
                let text = snapshots("").replace(
                    "glimpse_password_env = \"TG_GLIMPSE_PW\"",
                    &format!("{key} = {value}"),
                );
                let e = err(&text);
                assert!(e.contains("(its value not shown)"), "{e}");
                no_secret(&e);
            }
        }
        for name in ["_", "a", "TG_PW_2", "_9"] {
            let g = glimpse_of(&snapshots("").replace("TG_GLIMPSE_PW", name)).unwrap();
            assert_eq!(g.password, PasswordSource::Env(name.into()));
        }
        let text = snapshots("").replace(
            "glimpse_password_env = \"TG_GLIMPSE_PW\"",
            "glimpse_password_file = \"\"",
        );
        let e = err(&text);
        assert!(
            e.contains("glimpse_password_file must be a non-empty path"),
            "{e}"
        );
    }

    #[test]
    fn glimpse_keys_apply_to_itch50_only() {
        let sqf = itch("").replace("protocol = \"itch50\"", "kind = \"full\"");
        for key in ItchConfig::KEYS
            .iter()
            .filter(|k| **k == "glimpse" || k.starts_with("glimpse_") || k.starts_with("snapshot_"))
        {
            let e = err(&format!("{sqf}{key} = 1\n"));
            assert!(
                e.contains(&format!(
                    "line 7: feed 'n': {key} applies only to protocol \"itch50\""
                )),
                "{e}"
            );
        }
    }

    #[test]
    fn snapshot_keys_without_glimpse_are_refused() {
        let values = [
            ("glimpse_user", "\"tgsim\""),
            ("glimpse_password_env", "\"TG_GLIMPSE_PW\""),
            ("glimpse_password_file", "\"/etc/tickguard/glimpse.pw\""),
            ("glimpse_session_check", "true"),
            ("snapshot_triggers", "[]"),
            ("snapshot_timeout_ms", "60000"),
            ("snapshot_idle_ms", "5000"),
            ("snapshot_retry_ms", "500"),
            ("snapshot_retry_max_ms", "30000"),
            ("snapshot_max_attempts", "8"),
            ("snapshot_max_messages", "50000000"),
        ];
        assert_eq!(values.map(|(k, _)| k), SNAPSHOT_KEYS);
        for k in SNAPSHOT_KEYS {
            assert!(ItchConfig::KEYS.contains(k), "{k}");
        }
        for (key, value) in values {
            let e = err(&itch(&format!("max_held = 5\n{key} = {value}\n")));
            assert!(
                e.contains(&format!("line 8: feed 'n': {key} needs glimpse (the snapshot server's ip:port): without it snapshots are off")),
                "{e}"
            );
        }
        // The first in the file is named.
        let e = err(&itch("snapshot_max_attempts = 2\nglimpse_user = \"u\"\n"));
        assert!(
            e.contains("line 7: feed 'n': snapshot_max_attempts needs glimpse"),
            "{e}"
        );
    }

    #[test]
    fn snapshot_triggers_are_known_names_each_once() {
        let t = |list: &str| {
            glimpse_of(&snapshots(&format!("snapshot_triggers = {list}\n")))
                .unwrap()
                .triggers
        };
        assert_eq!(
            t("[]"),
            Triggers {
                join: false,
                gap: false
            }
        );
        assert_eq!(
            t("[\"join\"]"),
            Triggers {
                join: true,
                gap: false
            }
        );
        assert_eq!(
            t("[\"gap\", \"join\"]"),
            Triggers {
                join: true,
                gap: true
            }
        );
        let e = err(&snapshots("snapshot_triggers = [\"join\", \"halt\"]\n"));
        assert!(
            e.contains(
                "line 10: feed 'n': snapshot_triggers: 'halt' is not a trigger (\"join\", \"gap\")"
            ),
            "{e}"
        );
        let e = err(&snapshots("snapshot_triggers = [\"gap\", \"gap\"]\n"));
        assert!(
            e.contains("line 10: feed 'n': snapshot_triggers: 'gap' is listed twice"),
            "{e}"
        );
        for bad in ["\"join\"", "[1]", "true"] {
            let e = err(&snapshots(&format!("snapshot_triggers = {bad}\n")));
            assert!(
                e.contains("snapshot_triggers must be a list of trigger names (\"join\", \"gap\")"),
                "{e}"
            );
        }
        let e = err(&snapshots("glimpse_session_check = \"yes\"\n"));
        assert!(
            e.contains("(glimpse_session_check is true or false)"),
            "{e}"
        );
    }

    #[test]
    fn password_debug_and_display_are_redacted() {
        let p = password(SECRET.as_bytes(), "w", "empty").unwrap();
        assert_eq!(p.as_bytes(), SECRET.as_bytes());
        assert_eq!(format!("{p:?}"), "Password(<redacted>)");
        assert_eq!(format!("{p}"), "Password(<redacted>)");
        assert_eq!(
            format!("{:#?}", Some(&p)),
            "Some(\n    Password(<redacted>),\n)"
        );
        // The configuration holds where the password is, never the password.
        let text = snapshots("").replace("TG_GLIMPSE_PW", "TG_TEST_PW_DEBUG");
        let c = Config::parse(&text, "t.toml").unwrap();
        no_secret(&format!("{c:?}"));
    }

    #[test]
    fn a_password_from_the_environment() {
        let what = "glimpse_password_env TG_GLIMPSE_PW";
        let env = |v: &[u8]| {
            use std::os::unix::ffi::OsStringExt;
            password_from_env(what, Some(std::ffi::OsString::from_vec(v.to_vec())))
        };
        assert_eq!(
            env(SECRET.as_bytes()).unwrap().as_bytes(),
            SECRET.as_bytes()
        );
        assert_eq!(env(b"!").unwrap().as_bytes(), b"!");
        let cases: [(Vec<u8>, &str); 6] = [
            (
                format!("{SECRET}X").into_bytes(),
                ": 11 characters, at most 10",
            ),
            (
                format!("{SECRET} ").into_bytes(),
                ": a character outside printable ASCII",
            ),
            (b"Zq7#\tx".to_vec(), ": a character outside printable ASCII"),
            (
                b"Zq7#\xc3\xa9".to_vec(),
                ": a character outside printable ASCII",
            ),
            (
                b"Zq7#K\x7f".to_vec(),
                ": a character outside printable ASCII",
            ),
            (Vec::new(), ": set but empty"),
        ];
        for (value, want) in cases {
            let e = env(&value).unwrap_err();
            assert!(e.starts_with(&format!("{what}{want}")), "{e}");
            no_secret(&e);
        }
        let e = password_from_env(what, None).unwrap_err();
        assert_eq!(e, "glimpse_password_env TG_GLIMPSE_PW: not set");
        // Through read_password, with variables only this test names.
        let set = "TG_TEST_GLIMPSE_PW_SET";
        std::env::set_var(set, SECRET);
        let p = read_password(&PasswordSource::Env(set.into())).unwrap();
        assert_eq!(p.as_bytes(), SECRET.as_bytes());
        std::env::set_var(set, format!("{SECRET}{SECRET}"));
        let e = read_password(&PasswordSource::Env(set.into())).unwrap_err();
        assert_eq!(
            e,
            format!("glimpse_password_env {set}: 20 characters, at most 10")
        );
        std::env::remove_var(set);
        let e = read_password(&PasswordSource::Env(set.into())).unwrap_err();
        assert_eq!(e, format!("glimpse_password_env {set}: not set"));
        let e = read_password(&PasswordSource::Env("A=B".into())).unwrap_err();
        assert!(e.ends_with(": not an environment variable's name"), "{e}");
        assert!(!e.contains("A=B"), "{e}");
        // A password written in the key by mistake, shaped as a name: not
        // echoed.
        let e = read_password(&PasswordSource::Env("Pw9xQ2".into())).unwrap_err();
        assert!(e.ends_with(": not set") && !e.contains("Pw9xQ2"), "{e}");
    }

    /// A file in `dir` holding `bytes`, with permission bits `mode`.
    fn secret_file(dir: &Path, name: &str, bytes: &[u8], mode: u32) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    fn from_file(path: &Path) -> Result<Password, String> {
        read_password(&PasswordSource::File(path.to_path_buf()))
    }

    #[test]
    fn a_password_files_mode_is_0600_0400_or_stricter() {
        for ok in [0o600, 0o400, 0o200, 0o000, 0o100600] {
            assert_eq!(mode_problem(ok), None, "{ok:o}");
        }
        for (bad, says) in [
            (0o700, "mode 0700, not 0600, 0400 or stricter"),
            (0o100, "mode 0100, not 0600, 0400 or stricter"),
            (0o4600, "mode 4600, not 0600, 0400 or stricter"),
            (0o1400, "mode 1400, not 0600, 0400 or stricter"),
            (0o640, "readable by group or others (mode 0640)"),
            (0o620, "open to group or others (mode 0620)"),
            (0o601, "open to group or others (mode 0601)"),
        ] {
            let e = mode_problem(bad).unwrap_or_default();
            assert!(
                e.starts_with(says) && e.ends_with("; chmod 600 it"),
                "{bad:o}: {e}"
            );
        }
    }

    #[test]
    fn a_password_file_is_private_and_its_first_line_is_the_password() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let ok: [(&[u8], u32); 6] = [
            (b"Zq7#Kx!9Wp", 0o600),
            (b"Zq7#Kx!9Wp\n", 0o400),
            (b"Zq7#Kx!9Wp\r\n", 0o600),
            (b"Zq7#Kx!9Wp\nsecond line\n", 0o600),
            (b"Zq7#Kx!9Wp\r\n \t\xff\r\n", 0o600),
            (b"Zq7#Kx!9Wp\r\n", 0o400),
        ];
        for (i, (bytes, mode)) in ok.into_iter().enumerate() {
            let path = secret_file(d, &format!("ok{i}"), bytes, mode);
            let p = from_file(&path).unwrap_or_else(|e| panic!("{bytes:?} {mode:o}: {e}"));
            assert_eq!(p.as_bytes(), SECRET.as_bytes(), "{bytes:?}");
        }
        let long = [SECRET.as_bytes(); 500].concat();
        let bad: [(&[u8], u32, &str); 16] = [
            (
                b"Zq7#Kx!9Wp\n",
                0o700,
                "mode 0700, not 0600, 0400 or stricter; chmod 600 it",
            ),
            (
                b"Zq7#Kx!9Wp\n",
                0o500,
                "mode 0500, not 0600, 0400 or stricter; chmod 600 it",
            ),
            (
                b"Zq7#Kx!9Wp\n",
                0o4600,
                "mode 4600, not 0600, 0400 or stricter; chmod 600 it",
            ),
            (
                b"Zq7#Kx!9Wp\n",
                0o644,
                "readable by group or others (mode 0644); chmod 600 it",
            ),
            (
                b"Zq7#Kx!9Wp\n",
                0o640,
                "readable by group or others (mode 0640); chmod 600 it",
            ),
            (
                b"Zq7#Kx!9Wp\n",
                0o604,
                "readable by group or others (mode 0604); chmod 600 it",
            ),
            (
                b"Zq7#Kx!9Wp\n",
                0o620,
                "open to group or others (mode 0620); chmod 600 it",
            ),
            (
                b"Zq7#Kx!9Wp\n",
                0o601,
                "open to group or others (mode 0601); chmod 600 it",
            ),
            (b"", 0o600, "empty"),
            (b"\nZq7#Kx!9Wp\n", 0o600, "the first line is empty"),
            (b"\r\nZq7#Kx!9Wp\n", 0o600, "the first line is empty"),
            (b"Zq7#Kx!9Wp!\n", 0o600, "11 characters, at most 10"),
            (
                b"Zq7#Kx!9Wp \n",
                0o600,
                "a character outside printable ASCII (0x21 to 0x7E; no spaces)",
            ),
            (
                b"Zq7#Kx!9\rWp\n",
                0o600,
                "a character outside printable ASCII (0x21 to 0x7E; no spaces)",
            ),
            (
                b"Zq7#Kx!9Wp\r",
                0o600,
                "a character outside printable ASCII (0x21 to 0x7E; no spaces)",
            ),
            (
                &long,
                0o600,
                "a first line over 4096 bytes, at most 10 characters",
            ),
        ];
        for (i, (bytes, mode, want)) in bad.into_iter().enumerate() {
            let path = secret_file(d, &format!("bad{i}"), bytes, mode);
            let e = from_file(&path).unwrap_err();
            assert_eq!(e, format!("glimpse_password_file {path:?}: {want}"));
            no_secret(&e);
        }
    }

    /// A relative `glimpse_password_file` is the configuration file's
    /// directory's, not the working directory's; an absolute one stays.
    #[test]
    fn a_relative_password_file_is_taken_from_the_configurations_directory() {
        let dir = tempfile::tempdir().unwrap();
        for (written, want) in [
            ("secret/glimpse.pw", dir.path().join("secret/glimpse.pw")),
            (
                "/etc/tickguard/glimpse.pw",
                "/etc/tickguard/glimpse.pw".into(),
            ),
        ] {
            let path = dir.path().join("c.toml");
            let text = itch(&format!(
                "glimpse = \"127.0.0.1:18100\"\nglimpse_user = \"tgsim\"\n\
                 glimpse_password_file = \"{written}\"\n"
            ));
            std::fs::write(&path, text).unwrap();
            let c = Config::load(&path).unwrap();
            let g = settings(&c.feeds[0]).glimpse.clone().unwrap();
            assert_eq!(g.password, PasswordSource::File(want), "{written}");
        }
    }

    /// A symbolic link is followed: the mode that counts is its target's.
    /// A directory, a FIFO (not waited on) or a missing file is refused.
    #[test]
    // (mkfifo: a FIFO made without a tool the machine may lack.)
    #[allow(unsafe_code)]
    fn a_password_file_is_a_regular_file_found_through_links() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let private = secret_file(d, "private", SECRET.as_bytes(), 0o600);
        let open = secret_file(d, "open", SECRET.as_bytes(), 0o644);
        let link = d.join("link");
        std::os::unix::fs::symlink(&private, &link).unwrap();
        assert_eq!(from_file(&link).unwrap().as_bytes(), SECRET.as_bytes());
        let link = d.join("link-open");
        std::os::unix::fs::symlink(&open, &link).unwrap();
        let e = from_file(&link).unwrap_err();
        assert!(
            e.ends_with("readable by group or others (mode 0644); chmod 600 it"),
            "{e}"
        );
        let e = from_file(d).unwrap_err();
        assert_eq!(
            e,
            format!("glimpse_password_file {d:?}: not a regular file")
        );
        // A FIFO is refused, not opened (which would wait for a writer).
        let fifo = d.join("fifo");
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: `path` is a NUL-terminated string that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0, "mkfifo");
        let e = from_file(&fifo).unwrap_err();
        assert_eq!(
            e,
            format!("glimpse_password_file {fifo:?}: not a regular file")
        );
        let missing = d.join("missing");
        let e = from_file(&missing).unwrap_err();
        assert!(
            e.starts_with(&format!("glimpse_password_file {missing:?}: "))
                && e.contains("os error 2"),
            "{e}"
        );
    }
}
