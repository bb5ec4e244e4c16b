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
//! request_max = 64
//! request_interval_ms = 10
//! request_rate = 10000
//! ```

use crate::config::keys::{echo, FeedKeys, FeedProtocol, Problem, Range, NS_PER_MS};
use crate::config::services::{line_index, Channel, Service};
use crate::state::FeedKind;
use std::net::SocketAddrV4;

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
    /// Most symbols a session holds; a message naming one more is refused
    /// its symbol and the feed is `suspect` until the session changes.
    pub max_symbols: usize,
    /// A session's first packet beyond `1 + join_gap_max` is a mid-session join.
    pub join_gap_max: u64,
    /// Most messages one re-request asks for.
    pub request_max: u16,
    /// The same missing sequence is re-requested at most this often, ns.
    pub request_interval_ns: u64,
    /// Most re-requests a second, over every gap.
    pub request_rate: u32,
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
/// few million; the order table beyond the fixed window takes 36 to 72
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
/// message that would make one more is refused its symbol (its locate
/// stays unmapped, so its orders change no book), counted
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
/// a u16, and 64 typical messages (about 30 bytes each) fill one answer
/// datagram.
pub const REQUEST_MAX: Range = Range {
    table: "[[feed]] itch50",
    key: "request_max",
    min: 1,
    max: 65_535,
    default: Some(64),
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
/// 10,000 requests of 64 messages ask for 640,000 messages a second, more
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
            None => None,
            Some(r) => {
                let a = *r.get_ref();
                if a.port() == 0 || a.ip().is_unspecified() || a.ip().is_multicast() {
                    return Err(Problem::at(
                        &r,
                        format!("recovery: {a} must be a unicast address with a port"),
                    ));
                }
                Some(a)
            }
        };
        let recovery_listen = match keys.addr("recovery_listen")? {
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
        })
    }

    fn kind(&self) -> FeedKind {
        FeedKind::Delta
    }

    fn services(&self, lines: &[SocketAddrV4]) -> Vec<Service> {
        let recovery = Channel {
            server: self.recovery,
            listen: self.recovery_listen,
        };
        vec![
            Service::lines("lines", lines),
            Service::channel("recovery_listen", recovery),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, FeedConfig, ProtocolSettings};

    fn settings(f: &FeedConfig) -> &ItchConfig {
        match &f.settings {
            ProtocolSettings::Itch50(c) => c,
            ProtocolSettings::Sqf(_) => panic!("an sqf feed"),
        }
    }

    #[test]
    fn re_request_keys_default_and_apply_to_itch50_only() {
        let itch = "[[feed]]\nname = \"n\"\nprotocol = \"itch50\"\nlines = [\"127.0.0.1:4000\"]\nstale_threshold_ms = 1\nsource_threshold_ms = 1\n";
        let c = Config::parse(itch, "t.toml").unwrap();
        let i = settings(&c.feeds[0]);
        assert_eq!((i.request_max, i.request_interval_ns), (64, 10_000_000));
        assert_eq!(i.request_rate, 10_000);
        let c = Config::parse(
            &format!("{itch}request_max = 65535\nrequest_interval_ms = 60000\nrequest_rate = 1\n"),
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
}
