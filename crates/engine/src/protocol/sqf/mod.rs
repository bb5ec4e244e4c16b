//! SQF v1, the Simple Quote Feed: one UDP datagram per packet, sequences
//! per symbol, full or delta quotes.
//!
//! [`wire`] turns bytes into checked views (or rejects the datagram whole);
//! [`rules`] says what each message means for a symbol's state (spec §3),
//! as pure functions that never see bytes; [`feed`] is the feed's engine.
//!
//! A feed end to end, through the handler:
//!
//! ```
//! use tickguard_engine::{config::Config, handler::Handler, protocol::sqf::PacketBuilder, symbol::Symbol};
//!
//! let config = Config::parse(
//!     r#"
//! [[feed]]
//! name = "lp1"
//! kind = "full"
//! lines = ["239.1.1.1:30001"]
//! stale_threshold_ms = 500
//! source_threshold_ms = 2000
//! clock_offset = 0
//! "#,
//!     "example.toml",
//! )?;
//! let mut handler = Handler::new(&config);
//! let eurusd = Symbol::parse("EURUSD").unwrap();
//!
//! // A quote arrives at t (ns since the Unix epoch, local clock).
//! let t = 1_767_603_600_000_000_000;
//! let mut packet = PacketBuilder::new(t);
//! packet.quote(eurusd, 1, t, 1.0850, 1.0851);
//! handler.on_datagram(0, &packet.finish(), t).unwrap();
//!
//! // Fresh for 500 ms, then stale.
//! assert!(handler.verdict(0, eurusd, t + 500_000_000).is_ok());
//! let reasons: Vec<_> = handler.verdict(0, eurusd, t + 500_000_001).names().collect();
//! assert_eq!(reasons, ["stale"]);
//! # Ok::<(), tickguard_engine::config::ConfigError>(())
//! ```

pub mod config;
pub mod feed;
pub mod rules;
pub mod summary;
pub mod wire;

pub use wire::{
    HeartbeatView, Known, Message, Packet, PacketBuilder, PriceView, Reject, MAX_MESSAGES,
};

/// What an SQF datagram shows (`tickguard inspect`): its symbols, the
/// lowest and highest sequence its quotes, snapshots and heartbeats carry,
/// and, when it holds a snapshot, that the feed is a delta feed.
pub fn sniff(
    payload: &[u8],
    symbol: &mut impl FnMut(crate::symbol::Symbol),
) -> Option<super::Sniff> {
    let packet = Packet::new_checked(payload).ok()?;
    let (mut low, mut high, mut snapshots) = (u64::MAX, 0, false);
    for m in packet.messages() {
        let (s, q) = match m {
            Message::Quote(v) => (v.symbol(), v.sequence()),
            Message::Snapshot(v) => {
                snapshots = true;
                (v.symbol(), v.sequence())
            }
            Message::Heartbeat(h) => (h.symbol(), h.next_expected().saturating_sub(1)),
            Message::Unknown { .. } => continue,
        };
        symbol(s);
        (low, high) = (low.min(q), high.max(q));
    }
    Some(super::Sniff {
        looks_like: "SQF",
        protocol: Some(super::Protocol::Sqf),
        session: None,
        sequences: (low <= high).then_some((low, high)),
        draft_keys: if snapshots {
            "kind = \"delta\"\n"
        } else {
            "kind = \"full\"\n"
        },
        draft_rank: u8::from(snapshots),
        draft_alone: true,
        recovery_keys: None,
    })
}
