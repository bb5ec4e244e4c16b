//! What every protocol's feed engine implements, and what the handler hands
//! it. A feed engine owns a feed's protocol state (its sequence, books,
//! clock-offset estimate); the handler owns what is the same for every
//! protocol (routing, packet counters, rejected-packet runs and their logs).
//!
//! The engines are listed once, in [`crate::protocol::Engine`], and called
//! through an exhaustive `match` there: no dynamic call per datagram.

use crate::config::FeedConfig;
use crate::shm::{counter, CounterKind, Descriptor, Publication};
use crate::state::StateTable;
use crate::symbol::Symbol;
use crate::verdict::Reasons;
use std::collections::BTreeMap;

/// Most reject reasons any protocol has (counter arrays are this long).
pub const MAX_REJECT_REASONS: usize = 9;

/// Why a protocol rejected a datagram whole: one of a fixed list, counted
/// by position.
pub trait Reason: Copy + 'static {
    /// Every reason, in counter order.
    const ALL: &'static [Self];
    /// Position in [`ALL`](Self::ALL).
    fn index(self) -> usize;
    /// Stable snake_case name, as counted and logged.
    fn as_str(self) -> &'static str;
    /// Appended to a warning when the reason means the packets are not of
    /// this protocol at all (another protocol on the group), e.g.
    /// `" (not SQF?)"`; empty otherwise.
    fn hint(self) -> &'static str {
        ""
    }
}

/// Counters of one feed, all lines together. Plain integers: only the
/// handler's thread writes them. The handler counts packets and
/// rejections; the feed's engine counts the rest (what it does not count
/// stays 0).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeedCounters {
    /// Datagrams routed to the feed.
    pub packets: u64,
    /// Of those, rejected whole.
    pub rejected: u64,
    /// Rejections by reason, indexed by the reason's position in the feed's
    /// protocol's list ([`Reason::index`]).
    pub rejected_by_reason: [u64; MAX_REJECT_REASONS],
    /// Messages in accepted packets, unknown types included.
    pub messages: u64,
    /// Quote messages.
    pub quotes: u64,
    /// Snapshot messages.
    pub snapshots: u64,
    /// Heartbeat messages.
    pub heartbeats: u64,
    /// Messages of unknown type, skipped.
    pub unknown: u64,
    /// Quotes at or below a symbol's last sequence.
    pub duplicates: u64,
    /// Of `duplicates`, those on one line whose symbol's sequence was last
    /// applied from the other line: the copies A/B arbitration exists to
    /// drop. The rest came twice on the same line. ITCH: the messages of
    /// the other line's copy of a packet, as the A/B content check pairs
    /// them.
    pub line_copies: u64,
    /// Ticks found missing (by Quotes and Heartbeats).
    pub ticks_lost: u64,
    /// Messages for a new symbol dropped because the table was full; an
    /// exchange feed counts the symbols refused a slot, each once.
    pub table_full: u64,
    /// Snapshots that moved a symbol's sequence backwards (provider resets).
    pub resets: u64,
}

/// The counters every feed has, whatever its protocol, as the publication
/// describes them (the handler and the sidecar write them): packets,
/// messages and rejections, feed-wide and per line; rejections by each
/// of `R`'s reasons; heartbeats, duplicates, lost ticks, kernel drops,
/// receive buffers, and the run of rejected packets. A protocol's engine
/// lists these first in [`FeedEngine::counters`], then its own.
pub fn shared_counters<R: Reason>() -> Vec<Descriptor> {
    let c = Descriptor::counter;
    let by_line = |d: &dyn Fn(usize) -> Descriptor| {
        ["A", "B"]
            .iter()
            .enumerate()
            .map(|(i, l)| d(i).attr("line", l))
            .collect::<Vec<_>>()
    };
    let mut v = vec![c(counter::PACKETS, "packets").metric("")];
    v.extend(by_line(&|i| {
        c(counter::LINE_PACKETS + i, "packets").metric("packets_total")
    }));
    v.push(c(counter::MESSAGES, "messages").metric(""));
    v.extend(by_line(&|i| {
        c(counter::LINE_MESSAGES + i, "messages").metric("messages_total")
    }));
    v.push(c(counter::REJECTED, "rejected").metric(""));
    v.extend(by_line(&|i| {
        c(counter::LINE_REJECTED + i, "rejected").metric("line_rejected_packets_total")
    }));
    v.extend(R::ALL.iter().map(|r| {
        c(counter::REJECTED_BY_REASON + r.index(), "rejected")
            .metric("rejected_packets_total")
            .attr("reason", r.as_str())
            .param(r.index() as u64)
            .note(r.hint())
    }));
    v.extend([
        c(counter::HEARTBEATS, "heartbeats").metric("heartbeats_total"),
        c(counter::TICKS_LOST, "ticks_lost").metric("ticks_lost_total"),
        c(counter::DUPLICATES, "duplicates").metric(""),
        c(counter::SAME_LINE_DUPLICATES, "same_line_duplicates").metric("duplicate_events_total"),
        c(counter::LINE_COPIES, "line_copies").metric("line_copies_total"),
        c(counter::KERNEL_DROPS, "kernel_drops").metric(""),
        c(counter::OFFSET_MERGES, "offset_merges").metric("offset_samples_merged_total"),
    ]);
    v.extend(by_line(&|i| {
        c(counter::LINE_KERNEL_DROPS + i, "kernel_drops").metric("kernel_drops_total")
    }));
    v.extend(by_line(&|i| {
        Descriptor::gauge(counter::LINE_RCVBUF + i, "rcvbuf_bytes").metric("receive_buffer_bytes")
    }));
    v.extend(by_line(&|i| {
        Descriptor::gauge(counter::LINE_RCVBUF_CAPPED + i, "rcvbuf_capped")
            .metric("receive_buffer_capped")
    }));
    v.extend([
        Descriptor::gauge(counter::ALL_REJECTED, "all_rejected").metric("feed_all_rejected"),
        Descriptor::new(
            counter::ALL_REJECTED_SINCE,
            CounterKind::TimestampNs,
            "all_rejected_since",
        ),
        Descriptor::gauge(counter::ALL_REJECTED_PACKETS, "all_rejected_packets").metric(""),
        Descriptor::new(
            counter::ALL_REJECTED_REASON,
            CounterKind::Reason,
            "all_rejected_reason",
        ),
    ]);
    v
}

/// Descriptors of the feed status flags (bytes 512..544 of a feed block),
/// for the protocols that keep a status per feed.
pub fn status_flags() -> Vec<Descriptor> {
    use crate::state::feed_flag;
    [
        (feed_flag::SUSPECT, "suspect"),
        (feed_flag::CLOSED, "closed"),
        (feed_flag::JOINED, "joined"),
        (feed_flag::ORDERS_REFUSED, "orders_refused"),
    ]
    .iter()
    .map(|(bit, name)| {
        Descriptor::new(0, CounterKind::Flag, name).param(u64::from(bit.trailing_zeros()))
    })
    .collect()
}

/// A feed as its engine sees it on each call: its id, its configuration,
/// its counters and the state table.
pub struct Cx<'a> {
    /// The feed's id (its position in the configuration).
    pub id: u16,
    /// Its configuration.
    pub config: &'a FeedConfig,
    /// Its counters.
    pub counters: &'a mut FeedCounters,
    /// The table every feed's symbols are published in.
    pub table: &'a mut StateTable,
    /// The publication the table lives in, if shared (the clock offset and
    /// counters are written there too).
    pub publication: Option<&'a Publication>,
}

/// A TCP segment of a feed's stream ([`Receive::Stream`]), as a capture
/// holds it: replay hands it to the feed, which puts the connection
/// together.
///
/// [`Receive::Stream`]: crate::config::services::Receive::Stream
#[derive(Debug, Clone, Copy)]
pub struct Segment<'a> {
    /// The connection's local end.
    pub local: std::net::SocketAddrV4,
    /// Sent by the server (else by the local end).
    pub from_server: bool,
    /// TCP sequence number of its first byte.
    pub seq: u32,
    /// TCP flags ([`Tcp::SYN`](crate::capture::link::Tcp::SYN), …).
    pub flags: u8,
    /// Its payload.
    pub payload: &'a [u8],
}

/// A TCP segment a live feed's stream exchanged, to record (`run
/// --record`).
#[derive(Debug, Clone, Copy)]
pub struct WireSegment<'a> {
    /// Its sender.
    pub src: std::net::SocketAddrV4,
    /// Its receiver.
    pub dst: std::net::SocketAddrV4,
    /// TCP sequence number of its first byte.
    pub seq: u32,
    /// TCP flags.
    pub flags: u8,
    /// Its payload.
    pub payload: &'a [u8],
}

/// A feed's protocol engine. Every method is handed the time (ns since the
/// Unix epoch, local clock) rather than reading a clock, so replay and live
/// run the same code.
pub trait FeedEngine {
    /// Why a datagram is rejected whole.
    type Reject: Reason;

    /// What a replay reports of the feed at its end, written under the
    /// feed's name in the summary file.
    type Summary: serde::Serialize;

    /// [`traits`](crate::shm::traits) bits of this protocol's feeds.
    const TRAITS: u64 = 0;

    /// Every counter a feed of this protocol publishes, as the
    /// publication describes it: [`shared_counters`], then the
    /// protocol's own (stored once, when the publication is created).
    fn counters() -> Vec<Descriptor>
    where
        Self: Sized;

    /// Applies one datagram that came on `line` at `t`: 0 = A, 1 = B of the
    /// feed's `lines`, and for its protocol's other services the number
    /// [`line_index`](crate::config::services::line_index) gives.
    /// A rejected datagram changes no state; the handler counts and logs it.
    fn on_datagram(
        &mut self,
        cx: Cx<'_>,
        line: usize,
        payload: &[u8],
        t: u64,
    ) -> Result<(), Self::Reject>;

    /// Messages in `payload`, a datagram this engine accepted (per-line
    /// counters).
    fn messages_in(&self, payload: &[u8]) -> u64;

    /// The feed's clock offset (local − provider), ns: estimated from the
    /// send times of the datagrams its protocol's contract names (each
    /// protocol's guide says which: duplicates are samples on some, not
    /// on others).
    fn offset(&self) -> i128;

    /// Samples its clock-offset estimator merged for room
    /// ([`crate::clock::OffsetEstimator::merges`]).
    fn offset_merges(&self) -> u64;

    /// Brings the feed up to `now`: deadlines strictly before it expire,
    /// and what changed is published. Called before each check and once
    /// per receive cycle.
    fn catch_up(&mut self, cx: Cx<'_>, now: u64);

    /// The verdict for `symbol` at `now` (`&mut`: work handed to a second
    /// thread is settled first, see [`settle`](Self::settle)).
    fn verdict(&mut self, cx: View<'_>, symbol: Symbol, now: u64) -> Reasons;

    /// The verdict for the instrument named `name` at `now`, for a name
    /// that may not fit a [`Symbol`] (a check's name as written). By
    /// default a symbol's verdict, and `no_quote` for a name that is not
    /// one.
    fn verdict_named(&mut self, cx: View<'_>, name: &str, now: u64) -> Reasons {
        match Symbol::parse(name) {
            Some(symbol) => self.verdict(cx, symbol, now),
            None => Reasons::NO_QUOTE,
        }
    }

    /// What a check's JSON line adds for the instrument `name`, after its
    /// verdict (default: nothing).
    fn detail(&mut self, _cx: View<'_>, _name: &str) -> Option<CheckDetail> {
        None
    }

    /// Reads what the feed takes before any datagram (a file its
    /// configuration names): called by a replay before the first
    /// datagram. An error is one line naming the file.
    fn preload(&mut self, _cx: Cx<'_>) -> Result<(), String> {
        Ok(())
    }

    /// The feed's summary at the end of a replay; `counters` are the
    /// feed's (settled first, as for a verdict).
    fn summary(&mut self, cx: View<'_>, counters: &FeedCounters) -> Self::Summary;

    /// Writes what only this protocol counts into the publication's feed
    /// extension (once per heartbeat of the writer).
    fn write_counters(&self, publication: &Publication, id: u16);

    /// Whether the feed wants the datagrams of `line` now (numbered as
    /// for [`on_datagram`](Self::on_datagram)): a service the feed needs
    /// only at times (MDP3's snapshot lines, while an instrument needs
    /// healing). Asked once per receive cycle, after
    /// [`catch_up`](Self::catch_up); the receiver joins or leaves the
    /// line's group when the answer changes, and applies nothing that
    /// arrives on it while unwanted. A replay applies every datagram.
    fn wants(&self, _line: usize) -> bool {
        true
    }

    /// Makes ready what only a live feed does (connections of its own,
    /// their secrets read): called by `run` before any socket opens,
    /// never by a replay. An error is one line naming the problem.
    fn go_live(&mut self, _cx: View<'_>) -> Result<(), String> {
        Ok(())
    }

    /// Takes over what only a live feed holds (its own connections, their
    /// recording) from `old`, the engine of the same feed before the state
    /// started over (a recreated publication).
    fn carry_over(&mut self, _old: &mut Self)
    where
        Self: Sized,
    {
    }

    /// An operator's request (SIGUSR1 to `run`) that the feed resynchronise
    /// from its venue's snapshot at `now`; true when it started to.
    fn resync(&mut self, _cx: View<'_>, _now: u64) -> bool {
        false
    }

    /// Records what the feed's streams exchange from now on (`run
    /// --record`); [`drain_wire`](Self::drain_wire) hands it out.
    fn record_wire(&mut self) {}

    /// Hands `f` what the feed's streams exchanged since the last call,
    /// each segment with the time the receive loop took it (ns).
    fn drain_wire(&mut self, _f: &mut dyn FnMut(u64, &WireSegment<'_>)) {}

    /// A captured segment of the feed's stream at `t` (replay only).
    fn on_segment(&mut self, _cx: Cx<'_>, _segment: &Segment<'_>, _t: u64) {}

    /// Hands the requests due at `now` on the feed's channel
    /// ([`Channel`](crate::config::services::Channel)) to `send`
    /// (the bytes of one datagram to the server; true when it went out).
    /// Called once per receive cycle, after the cycle's datagrams are
    /// applied. Returns the requests handed out.
    fn poll_requests(&mut self, _now: u64, _send: impl FnMut(&[u8]) -> bool) -> usize {
        0
    }

    /// The last `n` requests [`poll_requests`](Self::poll_requests)
    /// handed out at `now` did not go (the caller queues them and sends
    /// them in one batch after the poll): not taken as sent, so that they
    /// are asked again soon.
    fn requests_unsent(&mut self, _n: usize, _now: u64) {}

    /// Requests sent on the feed's channel so far (send errors not included).
    fn requests_sent(&self) -> u64 {
        0
    }

    /// The receive loop's clock stepped back to `now` (live only): deadlines
    /// and waits set by the time before the step are brought within their
    /// own length of `now`, so that none holds for as long as the step.
    fn on_clock_stepped_back(&mut self, _now: u64) {}

    /// Lets the engine apply part of its work on a second thread (`on`),
    /// for a replay where nothing reads the feed between checks; or all of
    /// it on the calling thread again. Results never depend on it.
    fn pipeline(&mut self, _on: bool) {}

    /// Waits for work handed to a second thread ([`pipeline`](Self::pipeline))
    /// to be done, so the feed can be read other than through a check.
    fn settle(&mut self) {}
}

/// Rejections by reason name, every reason of `R` listed (0 included), as
/// summaries report them.
pub fn rejected_by_reason<R: Reason>(c: &FeedCounters) -> BTreeMap<&'static str, u64> {
    R::ALL
        .iter()
        .map(|r| (r.as_str(), c.rejected_by_reason[r.index()]))
        .collect()
}

/// What a check's JSON line adds, for a protocol whose instruments carry an
/// id of the venue's and an exact top of book: the id under its own key,
/// and the visible level-1 prices as mantissas of the feed's exponent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckDetail {
    /// The id's key in the line (`security_id`).
    pub id_key: &'static str,
    /// The id; `None` (null) for a name nothing resolves.
    pub id: Option<i64>,
    /// Best bid; `None` leaves the key out (an empty side).
    pub bid: Option<i64>,
    /// Best offer; `None` leaves the key out.
    pub ask: Option<i64>,
}

/// A feed as its engine sees it when asked for a verdict: read-only.
#[derive(Clone, Copy)]
pub struct View<'a> {
    /// The feed's id.
    pub id: u16,
    /// Its configuration.
    pub config: &'a FeedConfig,
    /// The state table.
    pub table: &'a StateTable,
}
