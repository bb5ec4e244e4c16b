//! Protocols, one folder each: the bytes of a venue's feed and what they
//! mean. Everything a protocol does not own (capture, sockets, the state
//! table, the verdict, the publication) is shared and names no protocol.
//!
//! - [`sqf`]: SQF v1, the Simple Quote Feed.
//! - [`itch50`]: Nasdaq TotalView-ITCH 5.0 over MoldUDP64.
//! - [`mdp3`]: CME MDP 3.0 (SBE, market by price): live and replay.
//!
//! This file is the registry of their engines. Each protocol's feed engine
//! implements [`FeedEngine`]; [`Engine`] holds one of them per feed, built
//! from the feed's settings ([`ProtocolSettings`]), and forwards every call
//! through an exhaustive `match`, so a new protocol that is not wired
//! everywhere does not compile. A protocol's configuration (its keys, their
//! ranges, the services its feed receives on) is in its folder's
//! `config.rs`, reached through the configuration's protocol switch
//! ([`Protocol`], [`ProtocolSettings`]), which sits below the engines.

pub mod itch50;
pub mod mdp3;
pub mod sqf;

pub use crate::config::Protocol;
use crate::config::{FeedConfig, ProtocolSettings};
pub use crate::engine::MAX_REJECT_REASONS;
use crate::engine::{
    CheckDetail, Cx, FeedCounters, FeedEngine, Reason, Segment, View, WireSegment,
};
use crate::shm::{Descriptor, FeedInfo, Publication};
use crate::symbol::Symbol;
use crate::verdict::Reasons;

const _: () = assert!(
    sqf::Reject::ALL.len() <= MAX_REJECT_REASONS
        && itch50::Reject::ALL.len() <= MAX_REJECT_REASONS
        && mdp3::Reject::ALL.len() <= MAX_REJECT_REASONS
);

/// A feed's engine, by protocol: chosen once per feed from its
/// configuration, matched once per datagram (no dynamic call). SQF's is
/// held inline (a few hundred bytes, read on every datagram); ITCH's, which
/// owns large tables of its own, behind a box.
#[allow(clippy::large_enum_variant)]
pub enum Engine {
    /// SQF: per-symbol state in the handler's state table.
    Sqf(sqf::feed::Feed),
    /// ITCH 5.0 over MoldUDP64: the feed keeps its stream, books and
    /// symbols itself (spec itch50 §3).
    Itch50(Box<itch50::engine::Engine>),
    /// CME MDP 3.0: the feed keeps its channel, instruments and books
    /// itself (spec mdp3 §3).
    Mdp3(Box<mdp3::engine::Engine>),
}

/// What one datagram shows of the protocol it looks like, for
/// `tickguard inspect`: a protocol's sniffer answers only for a datagram
/// that passes its whole validity walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sniff {
    /// How a person names it: `SQF`, `MoldUDP64/ITCH 5.0`, `CME MDP3 (SBE)`.
    pub looks_like: &'static str,
    /// The configuration's protocol that reads it; `None` when this version
    /// reads no feed of that protocol.
    pub protocol: Option<Protocol>,
    /// The session it belongs to, for a protocol with sessions.
    pub session: Option<String>,
    /// The lowest and highest sequence number it carries (a stream's, or its
    /// symbols').
    pub sequences: Option<(u64, u64)>,
    /// Keys a configuration reading it needs besides the shared ones, as
    /// TOML lines (an SQF feed's `kind`).
    pub draft_keys: &'static str,
    /// Where datagrams of one stream disagree on `draft_keys`, the keys of
    /// the highest rank win (an SQF snapshot proves a delta feed).
    pub draft_rank: u8,
    /// Whether one datagram of `draft_rank` decides the stream's keys (a
    /// snapshot), or only a stream none of whose datagrams ranks 0 (and
    /// decides) is drafted by them (definitions, which an incremental line
    /// carries too, mid-week). A datagram of rank 0 that does not decide
    /// says nothing of the stream (a heartbeat, which every service sends).
    pub draft_alone: bool,
    /// For a protocol with a recovery channel, the keys naming its server's
    /// address and the address its answers come to (`recovery`,
    /// `recovery_listen`).
    pub recovery_keys: Option<[&'static str; 2]>,
}

/// What `payload` looks like, if any protocol's validity walk accepts it,
/// calling `symbol` for each symbol it names. SQF is tried first (its
/// magic number is the most specific), then MoldUDP64, then MDP3.
pub fn sniff(payload: &[u8], mut symbol: impl FnMut(Symbol)) -> Option<Sniff> {
    sqf::sniff(payload, &mut symbol)
        .or_else(|| itch50::sniff(payload, &mut symbol))
        .or_else(|| mdp3::sniff(payload))
}

/// A feed's summary at the end of a replay, by protocol: each written as
/// its protocol's object, under the feed's name.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
pub enum Summary {
    /// SQF (SQF section 6).
    Sqf(sqf::summary::FeedSummary),
    /// ITCH (spec itch50 §5).
    Itch50(itch50::summary::FeedSummary),
    /// MDP3 (spec mdp3 §5).
    Mdp3(mdp3::summary::FeedSummary),
}

impl Summary {
    /// Datagrams routed to the feed, and of those rejected whole.
    pub fn packets(&self) -> (u64, u64) {
        match self {
            Summary::Sqf(s) => (s.packets, s.rejected),
            Summary::Itch50(s) => (s.packets, s.rejected),
            Summary::Mdp3(s) => (s.packets, s.rejected),
        }
    }

    /// Rejections by reason name.
    pub fn rejected_by_reason(&self) -> &std::collections::BTreeMap<&'static str, u64> {
        match self {
            Summary::Sqf(s) => &s.rejected_by_reason,
            Summary::Itch50(s) => &s.rejected_by_reason,
            Summary::Mdp3(s) => &s.rejected_by_reason,
        }
    }

    /// What the stream still waits for at the end: (gaps open, messages
    /// held behind them); `None` for a protocol that holds nothing back.
    pub fn backlog(&self) -> Option<(u64, u64)> {
        match self {
            Summary::Sqf(_) => None,
            Summary::Itch50(s) => Some((s.gaps_open, s.held)),
            // Nothing is held back: a gap open delays only what a
            // check sees of the instruments it may hide.
            Summary::Mdp3(s) => Some((s.gaps_open, 0)),
        }
    }

    /// What the state table refused the feed in the replay (SQF: messages
    /// for symbols without a slot, dropped); `None` for a protocol whose
    /// replay answers from its books, without the table.
    pub fn table_full(&self) -> Option<u64> {
        match self {
            Summary::Sqf(s) => Some(s.table_full_drops),
            Summary::Itch50(_) | Summary::Mdp3(_) => None,
        }
    }

    /// Names a replay answered from the feed's books without the table
    /// (ITCH: the last session's symbols; MDP3: the instruments), which
    /// live each take a slot; `None` for a protocol replayed through the
    /// table ([`table_full`](Self::table_full) tells its refusals).
    pub fn names_held(&self) -> Option<u64> {
        match self {
            Summary::Sqf(_) => None,
            Summary::Itch50(_) | Summary::Mdp3(_) => Some(self.symbols_held()),
        }
    }

    /// Symbols (instruments) the summary holds.
    pub fn symbols_held(&self) -> u64 {
        match self {
            Summary::Sqf(s) => s.symbols.len() as u64,
            Summary::Itch50(s) => s.symbols.len() as u64,
            Summary::Mdp3(s) => s.symbols.len() as u64,
        }
    }

    /// What the feed refused past its own bounds, with what that did and
    /// the setting to raise: counts a replay warns of (0: nothing).
    pub fn refused_past_bounds(&self) -> [(u64, &'static str); 2] {
        match self {
            Summary::Sqf(_) => [(0, ""), (0, "")],
            Summary::Itch50(s) => [
                (
                    s.symbols_refused,
                    "messages refused a new symbol past its max_symbols (the feed suspect until \
                     the session changes or a snapshot that refused nothing merges, those \
                     symbols no_quote: raise max_symbols)",
                ),
                (
                    s.orders_refused,
                    "adds refused past its max_orders (the feed suspect until the session \
                     changes or a snapshot that refused nothing merges, its books short of \
                     them: raise max_orders)",
                ),
            ],
            Summary::Mdp3(s) => [
                (
                    s.instruments_refused,
                    "messages or entries naming an instrument past its max_instruments, ignored \
                     (those instruments answer no_quote: raise max_instruments)",
                ),
                (0, ""),
            ],
        }
    }

    /// For a feed replayed from a venue's file rather than a capture: what
    /// the file held.
    pub fn file_records(&self) -> Option<FileRecords> {
        match self {
            Summary::Sqf(_) | Summary::Mdp3(_) => None,
            Summary::Itch50(s) => s.invalid_records.map(|invalid| FileRecords {
                format: "BinaryFILE",
                records: s.messages,
                invalid,
                hint: " (not ITCH 5.0 messages?)",
            }),
        }
    }
}

/// The records of a venue's file a feed was replayed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileRecords {
    /// The file's format, as warnings name it.
    pub format: &'static str,
    /// Records read.
    pub records: u64,
    /// Of those, the ones that were not valid messages.
    pub invalid: u64,
    /// Appended to the warning when every record is invalid.
    pub hint: &'static str,
}

/// Forwards `$call` to the engine inside `$engine`, whatever its protocol.
macro_rules! each {
    ($engine:expr, $e:ident => $call:expr) => {
        match $engine {
            Engine::Sqf($e) => $call,
            Engine::Itch50($e) => $call,
            Engine::Mdp3($e) => $call,
        }
    };
}

impl Engine {
    /// The engine for feed `config` over a table of `capacity` slots, with
    /// clock-offset queues of at most `offset_queue` entries; `shared`: the
    /// table lives in shared memory.
    pub fn new(config: &FeedConfig, capacity: usize, offset_queue: usize, shared: bool) -> Engine {
        match &config.settings {
            ProtocolSettings::Sqf(c) => Engine::Sqf(sqf::feed::Feed::new(
                c.kind,
                crate::clock::OffsetEstimator::new(config.offset, offset_queue),
                capacity,
            )),
            ProtocolSettings::Itch50(c) => Engine::Itch50(Box::new(itch50::engine::Engine::new(
                c,
                config.offset,
                offset_queue,
                shared,
            ))),
            ProtocolSettings::Mdp3(c) => Engine::Mdp3(Box::new(mdp3::engine::Engine::new(
                c,
                config.offset,
                offset_queue,
                shared,
            ))),
        }
    }

    /// See [`FeedEngine::on_datagram`].
    #[inline]
    pub fn on_datagram(
        &mut self,
        cx: Cx<'_>,
        line: usize,
        payload: &[u8],
        t: u64,
    ) -> Result<(), Rejected> {
        match self {
            Engine::Sqf(e) => e.on_datagram(cx, line, payload, t).map_err(Rejected::Sqf),
            Engine::Itch50(e) => e
                .on_datagram(cx, line, payload, t)
                .map_err(Rejected::Itch50),
            Engine::Mdp3(e) => e.on_datagram(cx, line, payload, t).map_err(Rejected::Mdp3),
        }
    }

    /// See [`FeedEngine::messages_in`].
    pub fn messages_in(&self, payload: &[u8]) -> u64 {
        each!(self, e => e.messages_in(payload))
    }

    /// See [`FeedEngine::offset`].
    pub fn offset(&self) -> i128 {
        each!(self, e => e.offset())
    }

    /// See [`FeedEngine::offset_merges`].
    pub fn offset_merges(&self) -> u64 {
        each!(self, e => e.offset_merges())
    }

    /// See [`FeedEngine::catch_up`].
    pub fn catch_up(&mut self, cx: Cx<'_>, now: u64) {
        each!(self, e => e.catch_up(cx, now))
    }

    /// See [`FeedEngine::verdict`].
    pub fn verdict(&mut self, cx: View<'_>, symbol: Symbol, now: u64) -> Reasons {
        each!(self, e => e.verdict(cx, symbol, now))
    }

    /// See [`FeedEngine::verdict_named`].
    pub fn verdict_named(&mut self, cx: View<'_>, name: &str, now: u64) -> Reasons {
        each!(self, e => e.verdict_named(cx, name, now))
    }

    /// See [`FeedEngine::detail`].
    pub fn detail(&mut self, cx: View<'_>, name: &str) -> Option<CheckDetail> {
        each!(self, e => e.detail(cx, name))
    }

    /// See [`FeedEngine::preload`].
    pub fn preload(&mut self, cx: Cx<'_>) -> Result<(), String> {
        each!(self, e => e.preload(cx))
    }

    /// See [`FeedEngine::summary`].
    pub fn summary(&mut self, cx: View<'_>, counters: &FeedCounters) -> Summary {
        match self {
            Engine::Sqf(e) => Summary::Sqf(e.summary(cx, counters)),
            Engine::Itch50(e) => Summary::Itch50(e.summary(cx, counters)),
            Engine::Mdp3(e) => Summary::Mdp3(e.summary(cx, counters)),
        }
    }

    /// See [`FeedEngine::write_counters`].
    pub fn write_counters(&self, p: &Publication, id: u16) {
        each!(self, e => e.write_counters(p, id))
    }

    /// See [`FeedEngine::wants`].
    #[inline]
    pub fn wants(&self, line: usize) -> bool {
        each!(self, e => e.wants(line))
    }

    /// See [`FeedEngine::go_live`].
    pub fn go_live(&mut self, cx: View<'_>) -> Result<(), String> {
        each!(self, e => e.go_live(cx))
    }

    /// See [`FeedEngine::carry_over`]: for engines of the same protocol.
    pub fn carry_over(&mut self, old: &mut Engine) {
        match (self, old) {
            (Engine::Sqf(a), Engine::Sqf(b)) => a.carry_over(b),
            (Engine::Itch50(a), Engine::Itch50(b)) => a.carry_over(b),
            (Engine::Mdp3(a), Engine::Mdp3(b)) => a.carry_over(b),
            _ => {}
        }
    }

    /// See [`FeedEngine::resync`].
    pub fn resync(&mut self, cx: View<'_>, now: u64) -> bool {
        each!(self, e => e.resync(cx, now))
    }

    /// See [`FeedEngine::record_wire`].
    pub fn record_wire(&mut self) {
        each!(self, e => e.record_wire())
    }

    /// See [`FeedEngine::drain_wire`].
    pub fn drain_wire(&mut self, f: &mut dyn FnMut(u64, &WireSegment<'_>)) {
        each!(self, e => e.drain_wire(f))
    }

    /// See [`FeedEngine::on_segment`].
    pub fn on_segment(&mut self, cx: Cx<'_>, segment: &Segment<'_>, t: u64) {
        each!(self, e => e.on_segment(cx, segment, t))
    }

    /// See [`FeedEngine::poll_requests`].
    pub fn poll_requests(&mut self, now: u64, send: impl FnMut(&[u8]) -> bool) -> usize {
        each!(self, e => e.poll_requests(now, send))
    }

    /// See [`FeedEngine::requests_unsent`].
    pub fn requests_unsent(&mut self, n: usize, now: u64) {
        each!(self, e => e.requests_unsent(n, now))
    }

    /// See [`FeedEngine::requests_sent`].
    pub fn requests_sent(&self) -> u64 {
        each!(self, e => e.requests_sent())
    }

    /// See [`FeedEngine::on_clock_stepped_back`].
    pub fn on_clock_stepped_back(&mut self, now: u64) {
        each!(self, e => e.on_clock_stepped_back(now))
    }

    /// See [`FeedEngine::pipeline`].
    pub fn pipeline(&mut self, on: bool) {
        each!(self, e => e.pipeline(on))
    }

    /// See [`FeedEngine::settle`].
    pub fn settle(&mut self) {
        each!(self, e => e.settle())
    }

    /// The ITCH feed, for an `itch50` feed.
    pub fn itch(&self) -> Option<&itch50::feed::Feed> {
        match self {
            Engine::Itch50(e) => Some(e.feed()),
            _ => None,
        }
    }

    /// The MDP3 channel, for an `mdp3` feed.
    pub fn mdp3(&self) -> Option<&mdp3::feed::Feed> {
        match self {
            Engine::Mdp3(e) => Some(e.feed()),
            _ => None,
        }
    }

    /// The ITCH feed, for an `itch50` feed, to watch it (`--explain`).
    pub fn itch_mut(&mut self) -> Option<&mut itch50::feed::Feed> {
        match self {
            Engine::Itch50(e) => Some(e.feed_mut()),
            _ => None,
        }
    }

    /// The ITCH engine, for an `itch50` feed (BinaryFILE replay).
    pub fn itch_engine_mut(&mut self) -> Option<&mut itch50::engine::Engine> {
        match self {
            Engine::Itch50(e) => Some(e),
            _ => None,
        }
    }
}

/// Every counter a feed of `protocol` publishes, as the publication
/// describes it ([`FeedEngine::counters`]).
pub fn counters(protocol: Protocol) -> Vec<Descriptor> {
    match protocol {
        Protocol::Sqf => <sqf::feed::Feed as FeedEngine>::counters(),
        Protocol::Itch50 => <itch50::engine::Engine as FeedEngine>::counters(),
        Protocol::Mdp3 => <mdp3::engine::Engine as FeedEngine>::counters(),
    }
}

impl FeedInfo {
    /// What the publication shows of a feed named `name` of `kind` on
    /// `lines` speaking `protocol`, with its protocol's counters and traits.
    pub fn new(
        name: impl Into<String>,
        kind: crate::state::FeedKind,
        lines: Vec<std::net::SocketAddrV4>,
        protocol: Protocol,
    ) -> FeedInfo {
        FeedInfo {
            name: name.into(),
            kind,
            lines,
            protocol: protocol.as_str(),
            traits: traits(protocol),
            counters: counters(protocol),
        }
    }
}

/// The [`traits`](crate::shm::traits) bits of `protocol`'s feeds
/// ([`FeedEngine::TRAITS`]).
pub fn traits(protocol: Protocol) -> u64 {
    match protocol {
        Protocol::Sqf => <sqf::feed::Feed as FeedEngine>::TRAITS,
        Protocol::Itch50 => <itch50::engine::Engine as FeedEngine>::TRAITS,
        Protocol::Mdp3 => <mdp3::engine::Engine as FeedEngine>::TRAITS,
    }
}

/// Evaluates `$call` with the reason inside `$rejected`, whatever its protocol.
macro_rules! each_reason {
    ($rejected:expr, $r:ident => $call:expr) => {
        match $rejected {
            Rejected::Sqf($r) => $call,
            Rejected::Itch50($r) => $call,
            Rejected::Mdp3($r) => $call,
        }
    };
}

/// Why a datagram was rejected whole, in the protocol of its feed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rejected {
    /// An SQF packet.
    Sqf(sqf::Reject),
    /// A MoldUDP64 / ITCH 5.0 packet.
    Itch50(itch50::Reject),
    /// An MDP3 packet.
    Mdp3(mdp3::Reject),
}

impl Rejected {
    /// Position in its protocol's list of reasons ([`reasons`]).
    pub fn index(self) -> usize {
        each_reason!(self, r => Reason::index(r))
    }

    /// Stable snake_case name, as counted and logged.
    pub fn as_str(self) -> &'static str {
        each_reason!(self, r => Reason::as_str(r))
    }

    /// A hint after a reason that means the packets are not of the feed's
    /// protocol at all (another protocol on the group): " (not SQF?)".
    pub fn hint(self) -> &'static str {
        each_reason!(self, r => Reason::hint(r))
    }

    /// The reason at `index` of `protocol`'s list.
    pub fn from_index(protocol: Protocol, index: usize) -> Option<Rejected> {
        match protocol {
            Protocol::Sqf => <sqf::Reject as Reason>::ALL
                .get(index)
                .map(|r| Rejected::Sqf(*r)),
            Protocol::Itch50 => <itch50::Reject as Reason>::ALL
                .get(index)
                .map(|r| Rejected::Itch50(*r)),
            Protocol::Mdp3 => <mdp3::Reject as Reason>::ALL
                .get(index)
                .map(|r| Rejected::Mdp3(*r)),
        }
    }
}

impl From<sqf::Reject> for Rejected {
    fn from(r: sqf::Reject) -> Rejected {
        Rejected::Sqf(r)
    }
}

impl From<itch50::Reject> for Rejected {
    fn from(r: itch50::Reject) -> Rejected {
        Rejected::Itch50(r)
    }
}

impl From<mdp3::Reject> for Rejected {
    fn from(r: mdp3::Reject) -> Rejected {
        Rejected::Mdp3(r)
    }
}

/// The reject reasons of `protocol`, in counter order.
pub fn reasons(protocol: Protocol) -> impl Iterator<Item = Rejected> {
    (0..MAX_REJECT_REASONS).filter_map(move |i| Rejected::from_index(protocol, i))
}

/// The feed blocks a publication for `config` shows, in configuration
/// order, each with its protocol's counters.
pub fn publication_feeds(config: &crate::config::Config) -> Vec<FeedInfo> {
    config
        .feeds
        .iter()
        .map(|f| {
            let mut info = FeedInfo::new(f.name.clone(), f.kind, f.lines.clone(), f.protocol);
            info.traits |= crate::shm::traits::price_decimals(f.price_decimals);
            info
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shm::{CounterKind, MAX_DESCRIPTORS};
    use crate::state::FeedKind;

    /// Each feed's descriptors are its protocol's, in its table, and read
    /// back as written; every protocol's fit a table and encode.
    #[test]
    fn descriptors_are_written_once_per_feed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tickguard");
        let feed = |name: &str, protocol| {
            FeedInfo::new(
                name,
                FeedKind::Delta,
                vec!["239.1.1.1:30001".parse().unwrap()],
                protocol,
            )
        };
        let feeds: Vec<FeedInfo> = Protocol::ALL
            .iter()
            .enumerate()
            .map(|(i, p)| feed(&format!("f{i}"), *p))
            .collect();
        let p = Publication::create(&path, 0o600, 4, &feeds, 1, 1_000_000).unwrap();
        p.ready();
        let reader = crate::reader::Reader::open(&path);
        let seen = reader.feeds();
        for (i, protocol) in Protocol::ALL.into_iter().enumerate() {
            let expected = counters(protocol);
            assert!(expected.len() <= MAX_DESCRIPTORS);
            assert!(expected.iter().all(|d| d.encode().is_some()));
            assert_eq!(seen[i].counters, expected, "{protocol:?}");
            assert_eq!(seen[i].traits, traits(protocol));
            let mut ids: Vec<(usize, usize)> = expected
                .iter()
                .filter(|d| d.kind != CounterKind::Flag)
                .map(|d| (d.id, d.width))
                .collect();
            ids.sort();
            for w in ids.windows(2) {
                assert!(
                    w[0].0 + w[0].1 <= w[1].0,
                    "{protocol:?}: ids overlap: {w:?}"
                );
            }
            // Labels are unique among counters (a histogram's buckets
            // share theirs) and among flags, which are read apart.
            for flags in [false, true] {
                let of: Vec<&Descriptor> = expected
                    .iter()
                    .filter(|d| (d.kind == CounterKind::Flag) == flags)
                    .collect();
                let labels: std::collections::HashSet<String> =
                    of.iter().map(|d| d.label()).collect();
                let buckets = of.iter().filter(|d| d.kind == CounterKind::Bucket);
                let histograms: std::collections::HashSet<&str> =
                    buckets.clone().map(|d| d.name.as_str()).collect();
                assert_eq!(
                    labels.len() + buckets.count() - histograms.len(),
                    of.len(),
                    "{protocol:?}: labels repeat"
                );
            }
            // The receiver writes `CHANNEL_WRONG_SOURCE` itself for a
            // feed with a channel: no protocol counts something else there.
            if let Some(d) = expected
                .iter()
                .find(|d| d.id == crate::shm::counter::CHANNEL_WRONG_SOURCE)
            {
                assert_eq!(
                    (protocol, d.name.as_str()),
                    (Protocol::Itch50, "recovery_wrong_source"),
                    "the receiver's wrong-sender count"
                );
            }
            // Prometheus's naming: a total ends in `_total`, and nothing
            // else does.
            for d in expected.iter().filter(|d| !d.metric.is_empty()) {
                assert_eq!(
                    d.metric.ends_with("_total"),
                    d.kind == CounterKind::Counter,
                    "{protocol:?}: {} exported as {} ({:?})",
                    d.name,
                    d.metric,
                    d.kind
                );
            }
        }
    }
}
