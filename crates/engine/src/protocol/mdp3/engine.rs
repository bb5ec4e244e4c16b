//! An MDP3 feed (one CME channel) as the handler drives it: each datagram
//! handed to the channel ([`Feed`]) by the service it came on, the
//! `definitions` file read before anything else, the verdict by Symbol or
//! `#SecurityID`, and the counters the summary and the publication show.
//!
//! Live (`run`), the instruments are published after each receive cycle
//! ([`super::publish`]), and the snapshot lines are wanted only while
//! something needs them (spec mdp3 §3.5, [`Joining`]): the receiver joins
//! and leaves them as [`FeedEngine::wants`] says.

use super::config::{service_of, Mdp3Config, SnapshotJoin, DEFINITION_SERVICE, SNAPSHOT_SERVICE};
use super::feed::{Feed, Settings};
use super::loops::{LoopCount, HOLD_MAX_NS};
use super::packet;
use super::publish::Publisher;
use super::summary::FeedSummary;
use super::{sequence, Reject};
use crate::capture::CaptureReader;
use crate::clock::OffsetMode;
use crate::engine::{CheckDetail, Cx, FeedCounters, FeedEngine, Reason, View};
use crate::ratelimit::Limiter;
use crate::shm::{counter, Descriptor, Publication};
use crate::symbol::Symbol;
use crate::verdict::Reasons;

impl Reason for Reject {
    const ALL: &'static [Reject] = &Reject::ALL;
    fn index(self) -> usize {
        Reject::index(self)
    }
    fn as_str(self) -> &'static str {
        Reject::as_str(self)
    }
    fn hint(self) -> &'static str {
        Reject::hint(self)
    }
}

/// A level (a gauge), or a total that only grows.
const G: bool = true;
const C: bool = false;

/// The feed's own counters, in the publication's extension but one: (id,
/// name, gauge, Prometheus metric less `tickguard_`). The ids are storage
/// only; the descriptors give each its meaning. A metric is an ITCH feed's
/// where the meaning is the same (`feed_next_sequence`, `feed_gaps_open`,
/// `feed_gaps_expired_total`, `feed_anomalies_total`), else `feed_` and
/// the name with what it counts.
#[rustfmt::skip]
const OWN: [(usize, &str, bool, &str); 24] = [
    (counter::EXT, "next", G, "feed_next_sequence"),
    (counter::EXT + 3, "gaps_open", G, "feed_gaps_open"),
    (counter::EXT + 4, "recovered", C, "feed_recovered_packets_total"),
    (counter::EXT + 5, "packet_gaps", C, "feed_packet_gaps_total"),
    (counter::EXT + 6, "packets_lost", C, "feed_packets_lost_total"),
    (counter::EXT + 7, "channel_resets", C, "feed_channel_resets_total"),
    (counter::EXT + 8, "anomalies", C, "feed_anomalies_total"),
    (counter::EXT + 9, "sequence_restarts", C, "feed_sequence_restarts_total"),
    (counter::EXT + 10, "stale_sequence", C, "feed_stale_sequence_packets_total"),
    (counter::EXT + 11, "snapshots_applied", C, "feed_snapshots_applied_total"),
    (counter::EXT + 12, "snapshots_ignored", C, "feed_snapshots_ignored_total"),
    (counter::EXT + 13, "cache_overflows", C, "feed_cache_overflows_total"),
    (counter::EXT + 14, "cached", G, "feed_cached_entries"),
    (counter::EXT + 15, "definitions", C, "feed_definitions_total"),
    (counter::EXT + 16, "gaps_expired", C, "feed_gaps_expired_total"),
    (counter::EXT + 17, "instruments_suspect", G, "feed_instruments_suspect"),
    (counter::EXT + 18, "instruments_unverified", G, "feed_instruments_unverified"),
    (counter::EXT + 19, "instruments_overflowed", G, "feed_instruments_overflowed"),
    (counter::EXT + 20, "snapshot_joined", G, "feed_snapshot_joined"),
    (counter::EXT + 21, "snapshot_joins", C, "feed_snapshot_joins_total"),
    (counter::EXT + 22, "snapshot_leaves", C, "feed_snapshot_leaves_total"),
    (counter::EXT + 23, "instruments_refused", C, "feed_instruments_refused_total"),
    (counter::EXT + 24, "resets_inferred", C, "feed_resets_inferred_total"),
    // Written by the receiver for every feed, described here: only this
    // protocol leaves lines.
    (counter::UNWANTED, "unwanted", C, "feed_unwanted_datagrams_total"),
];

/// At most one ChannelReset log line per feed per this interval, ns of
/// arrival time: one line for each reset, but a flood of them (forged or
/// not) does not flood the log; the counter counts every one.
const RESET_LOG_INTERVAL_NS: u64 = 1_000_000_000;

/// One MDP3 feed's engine.
#[derive(Debug)]
pub struct Engine {
    /// The channel.
    feed: Feed,
    /// The `definitions` file, read once before the feed's datagrams.
    definitions: Option<std::path::PathBuf>,
    /// The ChannelReset log line's limit (arrival time).
    reset_log: Limiter,
    /// The same for a ChannelReset inferred ([`Feed::infer_reset`]).
    inferred_log: Limiter,
    /// Writes the instruments into a shared table (`run`); none in a replay.
    publisher: Option<Box<Publisher>>,
    /// Whether the snapshot lines are wanted.
    joining: Joining,
    /// The line each recent incremental packet was processed from, by
    /// MsgSeqNum modulo [`ORIGINS`]: (MsgSeqNum, line).
    origins: Box<[(u32, u8)]>,
    /// Duplicates that were the other line's copy of a processed packet.
    line_copies: u64,
}

/// Incremental packets whose line is remembered, to tell line B's copy
/// of a packet (A/B arbitration at work) from a packet sent twice on one
/// line: far more than the lines can be apart.
const ORIGINS: usize = 4096;

/// Whether the snapshot lines are wanted now (spec mdp3 §3.5): always, or
/// while some instrument is suspect or unverified, but not after
/// `max_loops` loops in a row healed none, until another instrument turns
/// suspect or unverified. Left, they are joined once the need has lasted
/// the gap timeout: a packet lost on one line leaves the instruments it
/// touched suspect only until the other line's copy fills the gap, and
/// joining and leaving for each would churn memberships and the log. A
/// gap given up joins them at once (no copy can fill it any more) and
/// keeps them for a whole loop even once no instrument needs one: a
/// status lost with it left no mark on RptSeq, and only the loop's
/// snapshots say it again ([`Feed::on_snapshot`](super::feed::Feed::on_snapshot)).
#[derive(Debug, Clone)]
pub struct Joining {
    mode: SnapshotJoin,
    max_loops: u32,
    /// How long a need must last before the lines are joined (ns): the
    /// feed's gap timeout.
    grace_ns: u64,
    /// Since when (ns, the loop's clock) some instrument has needed the
    /// lines while they are left, if one does.
    needy_since: Option<u64>,
    joined: bool,
    /// Loops in a row, while joined, that healed no instrument.
    idle_loops: u32,
    /// A loop began since the lines were joined: the next beginning ends
    /// a whole loop (the first ends the part of one joined in its middle).
    in_loop: bool,
    /// The channel's loop count and the publisher's heals when last looked.
    loops_seen: u64,
    healed_seen: u64,
    /// Snapshots applied when last looked.
    applied_seen: u64,
    /// Packets given up for lost when last looked.
    lost_seen: u64,
    /// After a gap given up: the loops begun then (a loop numbered past
    /// them on a line and read whole there ends the hold), and the loop's
    /// clock (ns) past which the lines are not kept for it anyway
    /// ([`HOLD_MAX_NS`]).
    hold_until: Option<(u64, u64)>,
    /// Left after `max_loops` idle loops, the publisher's needy ones
    /// marked at the last whole loop's beginning: joined again only when
    /// an instrument turns needy after that and stays so the grace period
    /// (those the loops did not heal,
    /// defined but quiet ones among them, do not count), so a loss the
    /// other line fills does not rejoin while such instruments stay needy.
    left_idle: bool,
    /// The publisher's turns to needy when last looked (before the cycle
    /// being looked at now was published).
    turned_seen: u64,
    /// The feed's book entries waiting for a snapshot at an idle leave.
    waiting_seen: u64,
    /// Joins and leaves so far.
    pub joins: u64,
    pub leaves: u64,
    /// The feed has no snapshot lines: never joined, nothing counted.
    none: bool,
}

impl Joining {
    fn new(mode: SnapshotJoin, max_loops: u32, grace_ns: u64) -> Joining {
        Joining {
            mode,
            max_loops: max_loops.max(1),
            grace_ns,
            needy_since: None,
            // Joined at start; `on_demand` leaves at the first cycle if
            // nothing needs the loop.
            joined: true,
            idle_loops: 0,
            in_loop: false,
            loops_seen: 0,
            healed_seen: 0,
            applied_seen: 0,
            lost_seen: 0,
            hold_until: None,
            left_idle: false,
            turned_seen: 0,
            waiting_seen: 0,
            joins: 1,
            leaves: 0,
            none: false,
        }
    }

    /// For a feed without snapshot lines: never joined (the gauge and the
    /// counts say so, whatever its instruments need).
    fn none() -> Joining {
        Joining {
            joined: false,
            joins: 0,
            none: true,
            ..Joining::new(SnapshotJoin::OnDemand, 1, 0)
        }
    }

    /// Whether the snapshot lines are wanted.
    pub fn joined(&self) -> bool {
        self.joined
    }

    /// Re-decides after a publish at `now` (ns, the loop's clock):
    /// `loops` the channel's loop count, `p` the publisher's tallies.
    /// `applied` the snapshots applied so far: a loop heals when an
    /// instrument turned healthy while snapshots were being applied (an
    /// instrument healed by its incremental entries alone does not make
    /// the loop useful). `lost` the packets given up for lost so far.
    /// `restart_window`: the channel's window after a restart of MsgSeqNum
    /// is open ([`Feed::restart_window_open`](super::feed::Feed::restart_window_open)).
    fn update(
        &mut self,
        now: u64,
        count: LoopCount,
        p: &mut Publisher,
        (applied, lost, waiting): (u64, u64, u64),
        restart_window: bool,
    ) {
        if self.none {
            return;
        }
        if self.mode == SnapshotJoin::Always {
            self.joined = true;
            return;
        }
        // Turns in this cycle may have come before or after a loop
        // beginning in it: a mark taken there counts them after it.
        let turned_before = std::mem::replace(&mut self.turned_seen, p.turned_needy());
        let loops = count.begun;
        let new_loops = loops.saturating_sub(self.loops_seen);
        self.loops_seen = loops;
        let given_up = lost > self.lost_seen;
        self.lost_seen = lost;
        if given_up {
            // The loop under way, if joined, is read in part: held until
            // a line has read whole a loop begun after now, every snapshot
            // of it taken with the packets lost and its status placed
            // ([`LoopCount::read_since`]): a status lost with the gap said
            // again in it.
            self.hold_until = Some((loops, now.saturating_add(HOLD_MAX_NS)));
        }
        if let (true, Some((after, deadline))) = (restart_window, &mut self.hold_until) {
            // Within a restart's window a snapshot not applied gives no
            // status (it may be of the sequence before): a status lost with
            // the gap is said again only by a loop read after the window,
            // so the hold lasts a whole loop past it (the window itself
            // lasts a minute at most).
            *after = (*after).max(loops);
            *deadline = (*deadline).max(now.saturating_add(HOLD_MAX_NS));
        }
        if let Some((_, deadline)) = &mut self.hold_until {
            // A clock stepped back holds a minute at most from the new
            // time, not for the whole step as well.
            *deadline = (*deadline).min(now.saturating_add(HOLD_MAX_NS));
        }
        let held = self
            .hold_until
            .is_some_and(|(after, deadline)| !count.read_since(after) && now < deadline);
        if !held {
            self.hold_until = None;
        }
        if !self.joined {
            // Left after loops that healed nothing: an instrument that
            // turned needy since, or one needy then that took a book
            // entry since (quiet then, trading now: its snapshot is in the
            // loop from now on; its flags did not turn, its entries wait).
            // (A book entry that waited, its instrument whole again since,
            // a ChannelReset say, needs nothing.)
            let fresh = match self.left_idle {
                true => p.needy_since_mark() > 0 || (waiting > self.waiting_seen && p.needy() > 0),
                false => p.needy() > 0,
            };
            if !given_up && !fresh {
                self.needy_since = None;
                return;
            }
            let since = self.needy_since.get_or_insert(now);
            // A clock stepped back starts the grace again, not after the step.
            *since = (*since).min(now);
            let since = *since;
            if given_up || now.saturating_sub(since) >= self.grace_ns {
                self.needy_since = None;
                self.joined = true;
                self.joins += 1;
                self.idle_loops = 0;
                self.in_loop = false;
                self.left_idle = false;
                self.healed_seen = p.healed();
                self.applied_seen = applied;
            }
            return;
        }
        if p.needy() == 0 && !held {
            self.joined = false;
            self.leaves += 1;
            self.left_idle = false;
            return;
        }
        if new_loops > 0 {
            // Loops ended (others began): did anything heal since the last
            // beginning? Several in one cycle count together with what
            // healed across them; the part of a loop before the first
            // beginning since joining is not a whole loop.
            let first = !self.in_loop;
            let whole = if self.in_loop {
                new_loops
            } else {
                self.in_loop = true;
                new_loops - 1
            };
            if p.healed() > self.healed_seen && applied > self.applied_seen {
                self.idle_loops = 0;
            } else {
                self.idle_loops = self
                    .idle_loops
                    .saturating_add(u32::try_from(whole).unwrap_or(u32::MAX));
            }
            self.healed_seen = p.healed();
            self.applied_seen = applied;
            if self.idle_loops >= self.max_loops && !held {
                self.joined = false;
                self.leaves += 1;
                self.left_idle = true;
                self.waiting_seen = waiting;
                // The mark stays where the last whole loop began (made
                // there, below): an instrument turned needy within that
                // loop, its snapshot perhaps gone by before, was given no
                // loop, and joins again once its need lasts. (No beginning
                // marked since joining: marked now.)
                if first {
                    p.mark_needy_at(turned_before);
                }
            } else {
                // A loop begins: the instruments needy before this cycle
                // are given it.
                p.mark_needy_at(turned_before);
            }
        }
    }
}

impl Engine {
    /// An engine for an `mdp3` feed with settings `c`, its clock offset by
    /// `offset`, offset queues of at most `offset_queue` entries.
    /// `shared`: the instruments are published into a shared table (live).
    pub fn new(c: &Mdp3Config, offset: OffsetMode, offset_queue: usize, shared: bool) -> Engine {
        let mut feed = Feed::new(Settings {
            sequencing: sequence::Settings {
                gap_timeout_ns: c.gap_timeout_ns,
                restart_margin: c.restart_margin,
            },
            max_cached: c.max_cached,
            max_instruments: c.max_instruments,
            default_depth: c.default_depth,
            default_implied_depth: c.default_implied_depth,
            offset,
            offset_queue,
        });
        let publisher = shared.then(|| {
            feed.track_touched(true);
            Box::default()
        });
        Engine {
            feed,
            definitions: c.definitions.clone(),
            reset_log: Limiter::new(RESET_LOG_INTERVAL_NS),
            inferred_log: Limiter::new(RESET_LOG_INTERVAL_NS),
            publisher,
            joining: match c.snapshot_lines.is_empty() {
                true => Joining::none(),
                false => Joining::new(c.snapshot_join, c.snapshot_max_loops, c.gap_timeout_ns),
            },
            origins: vec![(0, u8::MAX); ORIGINS].into_boxed_slice(),
            line_copies: 0,
        }
    }

    /// An incremental datagram from `line`: a duplicate of a packet
    /// processed from the other line counts in `line_copies`.
    #[inline]
    fn incremental(&mut self, line: usize, payload: &[u8], t: u64) -> Result<(), Reject> {
        let q = self.feed.sequence().counters();
        let (dups, stale) = (q.duplicates, q.stale_sequence);
        self.feed.on_incremental(payload, t)?;
        let Some(s) = packet::seq_num(payload) else {
            return Ok(());
        };
        let line = line as u8;
        let q = self.feed.sequence().counters();
        let origin = &mut self.origins[s as usize % ORIGINS];
        if q.duplicates > dups {
            if origin.0 == s && origin.1 != line {
                self.line_copies += 1;
            }
        } else if q.stale_sequence == stale {
            *origin = (s, line);
        }
        Ok(())
    }

    /// Whether the snapshot lines are wanted, and how often they were
    /// joined and left.
    pub fn joining(&self) -> &Joining {
        &self.joining
    }

    /// The publisher, live.
    pub fn publisher(&self) -> Option<&Publisher> {
        self.publisher.as_deref()
    }

    /// Publishes what changed (live) and re-decides the snapshot lines.
    fn publish(&mut self, cx: &mut Cx<'_>, now: u64) {
        let Some(p) = &mut self.publisher else {
            return;
        };
        let (config, id, offset) = (cx.config, cx.id, self.feed.offset());
        crate::shm::publish_around_offset(cx.publication, id, offset, || {
            p.publish(id, &mut self.feed, cx.table, |f, name| {
                f.thresholds(config, name)
            })
        });
        cx.counters.table_full = p.table_full;
        let loops = LoopCount {
            unseen: self.feed.sequence().unseen_through(),
            ..self.feed.loops().count()
        };
        self.joining.update(
            now,
            loops,
            p,
            (
                self.feed.counters().snapshots_applied,
                self.feed.sequence().counters().packets_lost,
                self.feed.waiting_book_entries(),
            ),
            self.feed.restart_window_open(now),
        );
    }

    /// Logs a ChannelReset processed at `t`: once (a copy on line B is not
    /// processed again), at most one line per interval.
    #[cold]
    fn reset_logged(&mut self, name: &str, t: u64) {
        let Some(unlogged) = self.reset_log.due(t, false) else {
            return;
        };
        let what = match self.feed.last_reset_late() {
            true => {
                "ChannelReset come late, in a packet filling a gap: every book and cache of the \
                 channel emptied and the statuses sent before it; no instrument trusted until its \
                 snapshot, the entries after it in packets below the newest not applied"
            }
            false => {
                "ChannelReset: every book, status and cache of the channel emptied; RptSeq restarts at 1"
            }
        };
        tracing::warn!(
            feed = %name,
            total = self.feed.counters().channel_resets,
            unlogged,
            "{what}"
        );
    }

    /// ChannelResets (processed or inferred) the interval held back are
    /// told at the first datagram or check once it has passed, not only
    /// with the next reset, which may never come.
    #[inline]
    fn log_held(&mut self, name: &str, t: u64) {
        for (limiter, what) in [
            (&mut self.reset_log, "processed"),
            (&mut self.inferred_log, "inferred"),
        ] {
            if let Some(held) = limiter.overdue(t) {
                held_logged(name, what, held);
            }
        }
    }

    /// Logs a ChannelReset inferred at `t` ([`Feed::infer_reset`]), at
    /// most one line per interval.
    #[cold]
    fn inferred_logged(&mut self, name: &str, t: u64) {
        if let Some(unlogged) = self.inferred_log.due(t, false) {
            tracing::warn!(
                feed = %name,
                total = self.feed.counters().resets_inferred,
                unlogged,
                "ChannelReset inferred (RptSeq went back in the newest packet, or the snapshots applied were taken past the first packet): every book and cache of the channel emptied, the statuses before it void if trading (all emptied before the first packet), no instrument trusted until its snapshot or RptSeq 1"
            );
        }
    }

    /// The channel.
    pub fn feed(&self) -> &Feed {
        &self.feed
    }

    /// The same, to watch it (`--explain`).
    pub fn feed_mut(&mut self) -> &mut Feed {
        &mut self.feed
    }
}

/// Logs the `held` ChannelResets (`what`: processed or inferred) the
/// limit held back.
#[cold]
fn held_logged(name: &str, what: &str, held: u64) {
    tracing::warn!(
        feed = %name,
        held,
        "ChannelReset {what} {held} more time(s) since the last line of it (at most one line a second)"
    );
}

/// Copies what the shared counters show of the channel.
fn copy_counters(feed: &Feed, c: &mut FeedCounters) {
    let n = feed.counters();
    let q = feed.sequence().counters();
    c.messages = n.messages;
    c.heartbeats = n.heartbeats;
    c.duplicates = q.duplicates;
    c.ticks_lost = feed.ticks_lost();
    c.snapshots = n.snapshots_applied;
    // (Not `resets`: SQF's provider resets, which the monitor logs as
    // sequences gone back; a ChannelReset is counted in the channel's own
    // `channel_resets` and logged by this engine, at most once a second.)
    c.unknown = n.unknown_templates;
}

impl FeedEngine for Engine {
    type Reject = Reject;
    type Summary = FeedSummary;

    /// The shared counters, then the channel's (spec mdp3 §5).
    fn counters() -> Vec<Descriptor> {
        let mut v = crate::engine::shared_counters::<Reject>();
        // Instruments refused a slot (or their Symbol a directory entry),
        // each once, as an ITCH feed counts its symbols.
        v.push(
            Descriptor::counter(counter::TABLE_FULL, "table_full_symbols")
                .metric("table_full_symbols_total"),
        );
        v.extend(OWN.iter().map(|&(id, name, gauge, metric)| {
            let d = if gauge {
                Descriptor::gauge(id, name)
            } else {
                Descriptor::counter(id, name)
            };
            d.metric(metric)
        }));
        v
    }

    /// A datagram of the incremental lines (0, 1), the snapshot lines or
    /// the definition lines. Packet gaps expire first, whatever the
    /// service and whether the datagram is valid.
    fn on_datagram(
        &mut self,
        cx: Cx<'_>,
        line: usize,
        payload: &[u8],
        t: u64,
    ) -> Result<(), Reject> {
        let resets = self.feed.counters().channel_resets;
        let inferred = self.feed.counters().resets_inferred;
        // The incremental and snapshot paths expire gaps themselves; a
        // definition packet is not timed, so its arrival expires them here.
        let result = match service_of(line) {
            Some(SNAPSHOT_SERVICE) => self.feed.on_snapshot_from(line, payload, t),
            Some(DEFINITION_SERVICE) => {
                self.feed.expire(t);
                self.feed.on_definitions(payload)
            }
            _ => self.incremental(line, payload, t),
        };
        if self.feed.counters().channel_resets > resets {
            self.reset_logged(&cx.config.name, t);
        }
        if self.feed.counters().resets_inferred > inferred {
            self.inferred_logged(&cx.config.name, t);
        }
        // After this datagram's own resets: one due was logged with the
        // count held before it.
        self.log_held(&cx.config.name, t);
        copy_counters(&self.feed, cx.counters);
        cx.counters.line_copies = self.line_copies;
        result
    }

    fn messages_in(&self, payload: &[u8]) -> u64 {
        packet::check_framing(payload).map_or(0, |n| n as u64)
    }

    fn offset(&self) -> i128 {
        self.feed.offset()
    }

    fn offset_merges(&self) -> u64 {
        self.feed.offset_merges()
    }

    fn on_clock_stepped_back(&mut self, now: u64) {
        self.feed.on_clock_stepped_back(now);
    }

    fn catch_up(&mut self, mut cx: Cx<'_>, now: u64) {
        self.log_held(&cx.config.name, now);
        self.feed.expire(now);
        copy_counters(&self.feed, cx.counters);
        self.publish(&mut cx, now);
    }

    /// The snapshot lines only while [`Joining`] wants them; every other
    /// line always.
    fn wants(&self, line: usize) -> bool {
        service_of(line) != Some(SNAPSHOT_SERVICE) || self.joining.joined
    }

    fn verdict(&mut self, cx: View<'_>, symbol: Symbol, now: u64) -> Reasons {
        let wire = symbol.to_wire();
        let n = wire.iter().position(|&b| b == b' ').unwrap_or(wire.len());
        // A valid symbol is printable ASCII.
        let name = std::str::from_utf8(&wire[..n]).unwrap_or("");
        self.verdict_named(cx, name, now)
    }

    fn verdict_named(&mut self, cx: View<'_>, name: &str, now: u64) -> Reasons {
        let th = self.feed.thresholds(cx.config, name);
        self.feed.verdict(name, th, now)
    }

    /// `security_id`, and the visible outright level-1 prices (spec mdp3
    /// §4).
    fn detail(&mut self, _: View<'_>, name: &str) -> Option<CheckDetail> {
        let e = self.feed.find(name);
        let (bid, ask) = e.map_or((None, None), |e| self.feed.visible_top(e));
        Some(CheckDetail {
            id_key: "security_id",
            id: e.map(|e| i64::from(e.security_id)),
            bid: bid.map(|l| l.price),
            ask: ask.map(|l| l.price),
        })
    }

    fn summary(&mut self, _: View<'_>, counters: &FeedCounters) -> FeedSummary {
        FeedSummary::new(counters, &self.feed)
    }

    fn write_counters(&self, p: &Publication, id: u16) {
        let n = self.feed.counters();
        let s = self.feed.sequence();
        let q = s.counters();
        let flagged = self.publisher().map(Publisher::flagged).unwrap_or_default();
        let j = &self.joining;
        for (k, v) in [
            (counter::EXT, s.high().unwrap_or(0)),
            (counter::EXT + 3, s.gaps_open() as u64),
            (counter::EXT + 4, q.recovered),
            (counter::EXT + 5, q.packet_gaps),
            (counter::EXT + 6, q.packets_lost),
            (counter::EXT + 7, n.channel_resets),
            (counter::EXT + 8, n.anomalies),
            (counter::EXT + 9, q.sequence_restarts),
            (counter::EXT + 10, q.stale_sequence),
            (counter::EXT + 11, n.snapshots_applied),
            (counter::EXT + 12, n.snapshots_ignored),
            (counter::EXT + 13, n.cache_overflows),
            (counter::EXT + 14, self.feed.cached() as u64),
            (counter::EXT + 15, n.definitions),
            (counter::EXT + 16, q.gaps_given_up),
            (counter::EXT + 17, flagged.suspect as u64),
            (counter::EXT + 18, flagged.unverified as u64),
            (counter::EXT + 19, flagged.overflowed as u64),
            (counter::EXT + 20, u64::from(j.joined)),
            (counter::EXT + 21, j.joins),
            (counter::EXT + 22, j.leaves),
            (counter::EXT + 23, n.instruments_refused),
            (counter::EXT + 24, n.resets_inferred),
        ] {
            p.set_counter(id, k, v);
        }
    }

    /// Reads the `definitions` file: every UDP datagram in it, whatever
    /// its addresses, is a definition packet (not counted in `packets`). A
    /// file that cannot be read, holds a record that could be a datagram
    /// but was not read as one whole (cut by the snaplen, a fragment,
    /// malformed), or holds a datagram that is not a valid MDP3 packet, is
    /// an error naming the file (and the datagram).
    fn preload(&mut self, cx: Cx<'_>) -> Result<(), String> {
        let Some(path) = self.definitions.clone() else {
            return Ok(());
        };
        let name = path.display();
        // As at loading: a FIFO put in its place since would block here.
        let file =
            crate::sys::open_regular(&path).map_err(|e| format!("definitions {name}: {e}"))?;
        let mut reader = CaptureReader::from_file(&name.to_string(), file)
            .map_err(|e| format!("definitions {name}: {e}"))?;
        let mut index = 0u64;
        let mut bad: Option<(u64, u64, Reject)> = None;
        let before = self.feed.counters().definitions;
        let feed = &mut self.feed;
        reader
            .for_each(|d| {
                if d.tcp.is_some() {
                    return;
                }
                index += 1;
                if let Err(r) = feed.on_definitions(d.payload) {
                    bad.get_or_insert((index, d.offset, r));
                }
            })
            .map_err(|e| format!("definitions {name}: {e}"))?;
        // Records that may have held a definition but were not read as
        // one whole datagram: a definition lost with them would leave its
        // instrument outside its group's statuses, without a word. (A TCP
        // segment's never did: passed over, as whole ones are.)
        let st = reader.stats();
        let tcp = st.unread_tcp;
        let unread: Vec<String> = [
            ("cut short", st.truncated - tcp.truncated),
            ("IP fragments", st.ip_fragments - tcp.ip_fragments),
            ("malformed", st.malformed - tcp.malformed),
            ("on a link type not read", st.unsupported_link),
            ("without a timestamp", st.no_timestamp),
        ]
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(what, n)| format!("{n} {what}"))
        .collect();
        if !unread.is_empty() {
            return Err(format!(
                "definitions {name}: records not read as whole UDP datagrams ({}): a definition \
                 in them would be lost; capture the definition lines whole (no snaplen)",
                unread.join(", ")
            ));
        }
        if let Some((i, at, r)) = bad {
            return Err(format!(
                "definitions {name}: datagram {i} (its record at byte {at}) is not a valid MDP3 \
                 packet ({}{})",
                r.as_str(),
                r.hint()
            ));
        }
        if self.feed.counters().definitions == before {
            // Readable, valid, and naming nothing: a capture of the wrong
            // lines, most likely. Not an error (instruments still come from
            // the definition lines), but not silent either.
            tracing::warn!(
                feed = %cx.config.name,
                datagrams = index,
                "definitions {name}: no instrument definition in it (templates 54 to 58, 63): instruments are known by SecurityID only until the definition lines name them"
            );
        }
        copy_counters(&self.feed, cx.counters);
        Ok(())
    }

    /// The publication's descriptors name the feed's own counters; the
    /// `definitions` file is read by the caller's [`preload`](FeedEngine::preload).
    fn go_live(&mut self, _: View<'_>) -> Result<(), String> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::loops::Loops;
    use super::*;
    use crate::shm::CounterKind;

    /// `n` loops begun on line A, each before the last read whole.
    fn read(n: u64) -> LoopCount {
        LoopCount {
            begun: n,
            whole: [n.saturating_sub(1), 0],
            ..LoopCount::default()
        }
    }

    /// A loop begins once whatever the lines' order: line B a packet or a
    /// whole loop behind line A, or ahead of it, or two loops behind and
    /// delivered in a burst, its copies stamped as A's or a little later;
    /// a line back from a failure counts from where it stopped; a loop of
    /// a single packet counts at each sending; and no stamp or delivery
    /// counts one twice.
    #[test]
    fn a_loop_begins_once_whichever_line_brings_it_first() {
        // Every packet arrives at once (local clock): only the stamps tell.
        const T: u64 = 1_000_000_000_000;
        // (line, loop, MsgSeqNum): the loop's packets sent at 1000 × loop
        // + MsgSeqNum on line A, `skew` ns later on line B.
        let orders: [&[(usize, u64, u32)]; 5] = [
            &[
                (0, 1, 1),
                (1, 1, 1),
                (0, 1, 2),
                (1, 1, 2),
                (0, 2, 1),
                (1, 2, 1),
            ],
            &[
                (0, 1, 1),
                (0, 1, 2),
                (1, 1, 1),
                (0, 2, 1),
                (1, 1, 2),
                (1, 2, 1),
            ],
            &[
                (0, 1, 1),
                (0, 1, 2),
                (0, 2, 1),
                (1, 1, 1),
                (1, 1, 2),
                (1, 2, 1),
            ],
            &[
                (1, 1, 1),
                (0, 1, 1),
                (1, 1, 2),
                (0, 1, 2),
                (1, 2, 1),
                (0, 2, 1),
            ],
            &[
                (0, 1, 1),
                (0, 1, 2),
                (0, 2, 1),
                (0, 2, 2),
                (0, 3, 1),
                (1, 1, 1),
                (1, 1, 2),
                (1, 2, 1),
                (1, 2, 2),
                (1, 3, 1),
            ],
        ];
        for skew in [0, 3] {
            for order in orders {
                let mut l = Loops::default();
                for &(line, lp, seq) in order {
                    let sent = 1000 * lp + u64::from(seq) + if line == 1 { skew } else { 0 };
                    l.on_packet(line, seq, sent, T);
                }
                let loops = order.iter().map(|o| o.1).max().unwrap();
                assert_eq!(l.begun(), loops, "skew {skew}: {order:?}");
            }
        }
        // Line A alone for 100 loops (B down), then line B alone.
        let mut l = Loops::default();
        for lp in 1..=100 {
            l.on_packet(0, 1, 1000 * lp, T);
            l.on_packet(0, 2, 1000 * lp + 1, T);
        }
        for lp in 101..=103 {
            l.on_packet(1, 1, 1000 * lp, T);
            l.on_packet(1, 2, 1000 * lp + 1, T);
        }
        assert_eq!(l.begun(), 100, "line B counts from where it stopped");
        // Odd stamps and odd deliveries never count a loop twice: a copy
        // stamped 0 (or back) on the line ahead, one far ahead on the line
        // behind, a one-packet loop's copies stamped apart by more than
        // half its period, a duplicate of packet 1 after packet 2, a
        // packet 1 delivered a loop late.
        type Run<'a> = &'a [(usize, u32, u64)];
        let runs: [(Run, u64); 6] = [
            (
                &[
                    (0, 1, 1000),
                    (1, 1, 1000),
                    (0, 2, 1001),
                    (1, 2, 1001),
                    (0, 1, 2000),
                    (1, 1, 2000),
                    (0, 2, 2001),
                    (1, 2, 2001),
                    (0, 1, 0),
                    (1, 1, 3000),
                ],
                3,
            ),
            (
                &[
                    (0, 1, 1000),
                    (1, 1, 1000),
                    (0, 2, 1001),
                    (1, 2, 1001),
                    (0, 1, 2000),
                    (0, 2, 2001),
                    (1, 1, 1 << 63),
                ],
                2,
            ),
            (&[(0, 1, 1000), (1, 1, 1003), (0, 1, 1004), (1, 1, 1007)], 2),
            // Line B stamping 1.6 loops after A, and a loop late.
            (
                &[
                    (0, 1, 1000),
                    (0, 1, 2000),
                    (1, 1, 2600),
                    (0, 1, 3000),
                    (1, 1, 3600),
                    (1, 1, 4600),
                ],
                3,
            ),
            (&[(0, 1, 1000), (0, 2, 1001), (0, 1, 1000)], 1),
            (
                &[
                    (0, 1, 1000),
                    (0, 2, 1001),
                    (0, 1, 2000),
                    (0, 2, 2001),
                    (0, 1, 1000),
                ],
                2,
            ),
        ];
        for (run, loops) in runs {
            let mut l = Loops::default();
            for &(line, seq, sent) in run {
                l.on_packet(line, seq, sent, T);
            }
            assert!(l.begun() <= loops, "{run:?}: {} > {loops}", l.begun());
        }
        // A loop of a single packet counts at each sending; the same
        // datagram again (a copy) does not.
        let mut l = Loops::default();
        for (line, sent) in [(0, 5), (1, 5), (0, 6), (0, 6), (1, 6), (0, 7)] {
            l.on_packet(line, 1, sent, T);
        }
        assert_eq!(l.begun(), 3);
    }

    /// A beginning stamped far ahead (a corrupt or forged SendingTime)
    /// holds its line's count back no longer than [`HOLD_MAX_NS`] of local
    /// time: the loops then count again, from where they were.
    #[test]
    fn a_beginning_stamped_far_ahead_holds_the_count_back_a_minute_at_most() {
        const T: u64 = 1_000_000_000_000;
        const S: u64 = 1_000_000_000;
        let mut l = Loops::default();
        for line in [0, 1] {
            l.on_packet(line, 1, 1000, T);
            l.on_packet(line, 1, u64::MAX - 1, T + 1);
        }
        assert_eq!(l.begun(), 2);
        // A loop a second, stamped as the venue's clock goes.
        for k in 1..60 {
            for line in [0, 1] {
                l.on_packet(line, 1, 1000 + k * S, T + 1 + k * S);
            }
        }
        assert_eq!(l.begun(), 2, "held back within the minute");
        for k in 60..63 {
            for line in [0, 1] {
                l.on_packet(line, 1, 1000 + k * S, T + 1 + k * S);
            }
        }
        assert_eq!(l.begun(), 5, "counted again after it");
        // A clock stepped back begins nothing by itself: a duplicate of a
        // beginning is still a duplicate.
        let mut l = Loops::default();
        l.on_packet(0, 1, 1000, T);
        l.on_packet(0, 1, 1000, T - 1);
        assert_eq!(l.begun(), 1);
    }

    /// A gap given up joins the snapshot lines and keeps them, with no
    /// instrument in need, until a loop begun after it was read whole
    /// ([`read`]: each loop before the latest) or [`HOLD_MAX_NS`] has
    /// passed, whichever comes first; without a give-up, nothing needing
    /// them, they are left.
    #[test]
    fn a_gap_given_up_keeps_the_snapshot_lines_a_whole_loop_at_most_a_minute() {
        const T: u64 = 1_000_000_000_000;
        let mut p = Publisher::default();
        let mut j = Joining::new(SnapshotJoin::OnDemand, 3, 5_000_000);
        j.update(T, read(0), &mut p, (0, 0, 0), false);
        assert!(!j.joined(), "nothing needs them");
        // Given up: joined, kept through one loop begun.
        j.update(T + 1, read(0), &mut p, (0, 1, 0), false);
        assert!(j.joined(), "joined for the give-up");
        j.update(T + 2, read(1), &mut p, (0, 1, 0), false);
        assert!(j.joined(), "the first loop may have been read in part");
        j.update(T + 3, read(2), &mut p, (0, 1, 0), false);
        assert!(!j.joined(), "left once a whole loop was read");
        // Given up again, loops never counted: left after the bound.
        j.update(T + 4, read(2), &mut p, (0, 2, 0), false);
        assert!(j.joined());
        j.update(T + 4 + HOLD_MAX_NS - 1, read(3), &mut p, (0, 2, 0), false);
        assert!(j.joined());
        j.update(T + 4 + HOLD_MAX_NS, read(3), &mut p, (0, 2, 0), false);
        assert!(!j.joined(), "left at the bound");
        assert_eq!((j.joins, j.leaves), (3, 3));
    }

    /// Packets of snapshot line `line` of loop `lp`, each `seq` stamped
    /// 1000 × `lp` + `seq` and holding one snapshot of TotNumReports
    /// `total`, taken after incremental packet 10 × `lp`.
    fn send(l: &mut Loops, line: usize, lp: u64, total: u32, seqs: &[u32]) {
        const T: u64 = 1_000_000_000_000;
        for &seq in seqs {
            l.on_packet(line, seq, 1000 * lp + u64::from(seq), T);
            l.on_snapshot(line, total, 10 * lp as u32, true);
        }
    }

    /// A loop is read whole on a line with every MsgSeqNum from its 1 in
    /// order, and as many snapshots as its TotNumReports; either line's
    /// whole loop counts.
    #[test]
    fn a_loop_is_read_whole_only_with_every_packet_and_snapshot() {
        let mut l = Loops::default();
        // Loop 1 on A, all of it; loop 2's beginning ends it.
        send(&mut l, 0, 1, 3, &[1, 2, 3]);
        send(&mut l, 0, 2, 3, &[1]);
        assert_eq!((l.count().whole, l.count().taken_from), ([1, 0], [10, 0]));
        // Loop 2: packet 2 lost on A; line B, from its first beginning,
        // reads it all.
        send(&mut l, 0, 2, 3, &[3]);
        send(&mut l, 1, 2, 3, &[1, 2, 3]);
        send(&mut l, 0, 3, 3, &[1]);
        assert_eq!(l.count().whole, [1, 0], "A's loop 2 had a hole");
        send(&mut l, 1, 3, 3, &[1]);
        assert_eq!(l.count().whole, [1, 1], "B's first loop, read whole");
        assert_eq!(l.count().taken_from, [10, 20]);
        // Loop 3 on A: its last packet lost (no hole in the numbers, two
        // snapshots of three).
        send(&mut l, 0, 3, 3, &[2]);
        send(&mut l, 0, 4, 3, &[1]);
        assert_eq!(l.count().whole, [1, 1], "a loop's tail lost");
        // Loop 4 on A: a copy sent twice on the line reads nothing new;
        // out of order is a hole.
        send(&mut l, 0, 4, 3, &[2, 2, 3]);
        send(&mut l, 0, 5, 3, &[1, 3, 2]);
        assert_eq!(l.count().whole, [4, 1]);
        send(&mut l, 0, 6, 3, &[1]);
        assert_eq!(l.count().whole, [4, 1], "out of order");
        // Loop 6: a copy sent twice adds no snapshot (two of three).
        send(&mut l, 0, 6, 3, &[2, 2]);
        send(&mut l, 0, 7, 3, &[1]);
        assert_eq!(l.count().whole, [4, 1], "a copy is no snapshot more");
        // Loop 7: its TotNumReports changes (two loops' packets): a hole.
        send(&mut l, 0, 7, 4, &[2]);
        send(&mut l, 0, 7, 4, &[3]);
        send(&mut l, 0, 8, 4, &[1]);
        assert_eq!(l.count().whole, [4, 1], "TotNumReports changed");
        // Loop 8's tail lost, loop 9's packet 1 lost: its packets 2 and 3
        // (numbered below the next, stamped later) do not complete loop 8.
        send(&mut l, 0, 8, 3, &[2]);
        send(&mut l, 0, 9, 3, &[2, 3, 4]);
        send(&mut l, 0, 10, 3, &[1]);
        assert_eq!(l.count().whole, [4, 1], "two loops are not one");
        // Loop 10's packet 2 lost, an older loop's packet 2 in its place
        // (stamped before loop 10's packet 1): a hole.
        send(&mut l, 0, 9, 3, &[2]);
        send(&mut l, 0, 10, 3, &[3]);
        send(&mut l, 0, 11, 3, &[1]);
        assert_eq!(l.count().whole, [4, 1], "an older loop's copy");
        // Loop 11: a snapshot that said nothing (screened, ahead of the
        // lines): a hole.
        send(&mut l, 0, 11, 3, &[2]);
        l.on_packet(0, 3, 11_003, 1_000_000_000_000);
        l.on_snapshot(0, 3, 110, false);
        send(&mut l, 0, 12, 3, &[1]);
        assert_eq!(l.count().whole, [4, 1], "a snapshot said nothing");
        let count = LoopCount {
            unseen: Some(40),
            ..l.count()
        };
        assert_eq!(count.begun, 11, "loop 9 began unseen");
        assert!(count.read_since(3) && !count.read_since(4));
        assert!(!LoopCount {
            unseen: Some(41),
            ..count
        }
        .read_since(3));
    }

    /// A one-packet loop of two snapshots, then a loop of three (an
    /// instrument begun), its packet 1 lost: its packet 2, numbered next,
    /// does not complete the first.
    #[test]
    fn a_loop_grown_by_an_instrument_is_not_spliced_onto_the_last() {
        const T: u64 = 1_000_000_000_000;
        let mut l = Loops::default();
        l.on_packet(0, 1, 1001, T);
        l.on_snapshot(0, 2, 10, true);
        l.on_snapshot(0, 2, 10, true);
        l.on_packet(0, 2, 2002, T);
        l.on_snapshot(0, 3, 20, true);
        l.on_packet(0, 1, 3001, T);
        assert_eq!(l.count().whole, [0, 0]);
    }

    /// A gap given up keeps the snapshot lines, however many loops begin,
    /// until a line has read whole a loop begun after it and taken with
    /// the packets it lost: a status lost with the gap whose snapshot was
    /// lost too is said again only there. A line whose copies come two
    /// loops late numbers its loops as the other does, from its own first
    /// beginning: the loops it reads whole after the give-up were taken
    /// before the lost packet, and end nothing.
    #[test]
    fn a_gap_given_up_keeps_the_lines_until_a_loop_is_read_whole() {
        const T: u64 = 1_000_000_000_000;
        let mut p = Publisher::default();
        let mut j = Joining::new(SnapshotJoin::OnDemand, 3, 5_000_000);
        let mut l = Loops::default();
        // Packet 45 lost: loop 4's snapshots were taken before it (40),
        // loop 5's after (50).
        let count = |l: &Loops| LoopCount {
            unseen: Some(45),
            ..l.count()
        };
        // Line A: loops 3 and 4 read, 5 begun; line B two loops behind.
        send(&mut l, 0, 3, 2, &[1, 2]);
        send(&mut l, 0, 4, 2, &[1, 2]);
        send(&mut l, 0, 5, 2, &[1]);
        send(&mut l, 1, 1, 2, &[1, 2]);
        send(&mut l, 1, 2, 2, &[1, 2]);
        send(&mut l, 1, 3, 2, &[1]);
        j.update(T, count(&l), &mut p, (0, 0, 0), false);
        assert!(!j.joined());
        j.update(T + 1, count(&l), &mut p, (0, 1, 0), false);
        assert!(j.joined(), "joined for the give-up");
        // B's burst: loops 3 and 4 whole, numbered past the give-up's
        // count on B, taken before the lost packet.
        send(&mut l, 1, 3, 2, &[2]);
        send(&mut l, 1, 4, 2, &[1, 2]);
        send(&mut l, 1, 5, 2, &[1]);
        j.update(T + 2, count(&l), &mut p, (0, 1, 0), false);
        assert!(j.joined(), "a lagging line's loops taken before it");
        // Loop 5, under way at the give-up, read whole on A.
        send(&mut l, 0, 5, 2, &[2]);
        send(&mut l, 0, 6, 2, &[1]);
        j.update(T + 3, count(&l), &mut p, (0, 1, 0), false);
        assert!(j.joined(), "the loop under way began before the give-up");
        // Loop 6 lost in part on A; B reads loop 5 whole.
        send(&mut l, 0, 7, 2, &[1]);
        send(&mut l, 1, 5, 2, &[2]);
        send(&mut l, 1, 6, 2, &[1]);
        j.update(T + 4, count(&l), &mut p, (0, 1, 0), false);
        assert!(!j.joined(), "left once a loop begun since is read whole");
    }

    /// A gap given up within a restart's window keeps the snapshot lines
    /// until a whole loop has been read after the window closed, however
    /// many loops it lasts: only such a loop says again a status lost with
    /// the gap.
    #[test]
    fn a_gap_given_up_in_a_restart_window_keeps_the_lines_a_loop_past_it() {
        const T: u64 = 1_000_000_000_000;
        let mut p = Publisher::default();
        let mut j = Joining::new(SnapshotJoin::OnDemand, 3, 5_000_000);
        j.update(T, read(0), &mut p, (0, 0, 0), true);
        assert!(!j.joined());
        j.update(T + 1, read(0), &mut p, (0, 1, 0), true);
        for loops in 1..=5 {
            j.update(T + 1 + loops, read(loops), &mut p, (0, 1, 0), true);
            assert!(j.joined(), "loop {loops}: the window is open");
        }
        // Closed at loop 5: loop 6 may be read in part, loop 7 whole.
        j.update(T + 7, read(6), &mut p, (0, 1, 0), false);
        assert!(j.joined(), "the first loop past the window may be in part");
        j.update(T + 8, read(7), &mut p, (0, 1, 0), false);
        assert!(!j.joined(), "left once a whole loop past it was read");
    }

    /// Left after loops that healed nothing while defined but quiet
    /// instruments stay needy: a need of an instrument that turned needy
    /// since, which the other line's copy ends within the grace period,
    /// joins nothing, however often; one that lasts the grace period joins,
    /// even when as many old ones healed meanwhile (the needy count the
    /// same).
    #[test]
    fn quiet_needy_instruments_do_not_make_every_short_need_join() {
        const T: u64 = 1_000_000_000_000;
        const MS: u64 = 1_000_000;
        let mut j = Joining::new(SnapshotJoin::OnDemand, 1, 5 * MS);
        let mut quiet = Publisher::with_needy(800, 800);
        j.update(T, read(0), &mut quiet, (0, 0, 0), false);
        j.update(T + 1, read(1), &mut quiet, (0, 0, 0), false);
        j.update(T + 2, read(2), &mut quiet, (0, 0, 0), false);
        assert!(!j.joined(), "left after a loop that healed nothing");
        assert_eq!(quiet.needy_since_mark(), 0, "marked when left");
        for k in 0..10u64 {
            let at = T + 10 * MS * (k + 1);
            // One more needy (a loss on line A), healed 0.2 ms later (B's copy).
            let mut loss = Publisher::with_needy(801, 1);
            let mut healed = Publisher::with_needy(800, 0);
            j.update(at, read(2), &mut loss, (0, 0, 0), false);
            j.update(at + MS / 5, read(2), &mut healed, (0, 0, 0), false);
            j.update(at + 6 * MS, read(2), &mut healed, (0, 0, 0), false);
            assert!(!j.joined(), "loss {k}: joined for a need that ended");
        }
        // A new need that lasts while an old one healed: joined after the
        // grace period.
        let mut swapped = Publisher::with_needy(800, 1);
        j.update(T + 200 * MS, read(2), &mut swapped, (0, 0, 0), false);
        assert!(!j.joined());
        j.update(T + 206 * MS, read(2), &mut swapped, (0, 0, 0), false);
        assert!(j.joined(), "a lasting new need joins");
        assert_eq!((j.joins, j.leaves), (2, 1));
    }

    /// Left after idle loops, the needy are marked as of the last whole
    /// loop's beginning, not of the leave: an instrument that turned needy
    /// within that loop (its snapshot perhaps gone by before) was given no
    /// loop, and joins again once its need lasts the grace period.
    #[test]
    fn an_instrument_turned_needy_in_the_last_idle_loop_joins_again() {
        const T: u64 = 1_000_000_000_000;
        const MS: u64 = 1_000_000;
        let mut j = Joining::new(SnapshotJoin::OnDemand, 1, 5 * MS);
        let mut quiet = Publisher::with_needy(800, 800);
        j.update(T, read(0), &mut quiet, (0, 0, 0), false);
        // The first beginning: marked there.
        j.update(T + 1, read(1), &mut quiet, (0, 0, 0), false);
        assert_eq!(quiet.needy_since_mark(), 0);
        // One turns needy within the loop, and stays so; the next
        // beginning ends an idle loop: left, the mark kept.
        let mut one_more = Publisher::with_needy(801, 1);
        j.update(T + 2, read(2), &mut one_more, (0, 0, 0), false);
        assert!(!j.joined(), "left after a loop that healed nothing");
        assert_eq!(one_more.needy_since_mark(), 1, "not marked at the leave");
        j.update(T + 3, read(2), &mut one_more, (0, 0, 0), false);
        assert!(!j.joined(), "within the grace period");
        j.update(T + 3 + 5 * MS, read(2), &mut one_more, (0, 0, 0), false);
        assert!(j.joined(), "its need lasted: joined again");
    }

    /// A gap's hold lasts [`HOLD_MAX_NS`] at most from the clock's time
    /// after it stepped back, not for the whole step as well.
    #[test]
    fn a_clock_stepped_back_holds_the_lines_a_minute_at_most() {
        const T: u64 = 1_000_000_000_000_000;
        const H: u64 = 3_600_000_000_000;
        let mut j = Joining::new(SnapshotJoin::OnDemand, 1, 5_000_000);
        let mut p = Publisher::with_needy(0, 0);
        j.update(T, read(0), &mut p, (0, 0, 0), false);
        j.update(T + 1, read(0), &mut p, (0, 1, 0), false);
        assert!(j.joined(), "a gap given up: joined, held");
        let back = T - H;
        j.update(back, read(0), &mut p, (0, 1, 0), false);
        assert!(j.joined(), "held from the new time");
        j.update(back + HOLD_MAX_NS, read(0), &mut p, (0, 1, 0), false);
        assert!(
            !j.joined(),
            "a minute after the step, not an hour and a minute"
        );
    }

    /// Left after idle loops while instruments stay needy (quiet ones the
    /// loop does not carry): one of them that takes a book entry (its
    /// flags unchanged, the entry waiting) has its snapshot in the loop
    /// from then on, so the lines are joined again once the grace period
    /// passed; entries of no book, or none at all, join nothing.
    #[test]
    fn a_needy_instrument_that_starts_trading_joins_again() {
        const T: u64 = 1_000_000_000_000;
        const MS: u64 = 1_000_000;
        let mut j = Joining::new(SnapshotJoin::OnDemand, 1, 5 * MS);
        let mut quiet = Publisher::with_needy(800, 0);
        j.update(T, read(0), &mut quiet, (0, 0, 7), false);
        j.update(T + 1, read(1), &mut quiet, (0, 0, 7), false);
        j.update(T + 2, read(2), &mut quiet, (0, 0, 7), false);
        assert!(!j.joined(), "left after a loop that healed nothing");
        j.update(T + 2 + 10 * MS, read(2), &mut quiet, (0, 0, 7), false);
        assert!(!j.joined(), "nothing new: left");
        // A book entry waits: joined once the grace period passed.
        j.update(T + 3 + 10 * MS, read(2), &mut quiet, (0, 0, 8), false);
        assert!(!j.joined(), "within the grace period");
        j.update(T + 3 + 15 * MS, read(2), &mut quiet, (0, 0, 8), false);
        assert!(j.joined(), "its snapshot is in the loop now: joined");
        // Left idle again; a book entry waits, but its instrument is whole
        // again (a ChannelReset) before the grace period ends: no join.
        j.update(T + 4 + 15 * MS, read(3), &mut quiet, (0, 0, 8), false);
        j.update(T + 5 + 15 * MS, read(4), &mut quiet, (0, 0, 8), false);
        assert!(!j.joined(), "left after a loop that healed nothing");
        let joins = j.joins;
        j.update(T + 6 + 15 * MS, read(4), &mut quiet, (0, 0, 9), false);
        let mut whole = Publisher::with_needy(0, 0);
        j.update(T + 6 + 25 * MS, read(4), &mut whole, (0, 0, 9), false);
        assert!(!j.joined() && j.joins == joins, "nothing needs a snapshot");
    }

    /// A loop beginning marks the needy as of the cycle before it: one
    /// that turned needy in the cycle that began the loop (its snapshot
    /// perhaps in the same cycle, before it) counts as after the mark.
    #[test]
    fn a_need_in_the_cycle_a_loop_began_counts_after_its_mark() {
        const T: u64 = 1_000_000_000_000;
        let mut j = Joining::new(SnapshotJoin::OnDemand, 3, 5_000_000);
        let before: Vec<(bool, u64)> = (1..=3).map(|k| (true, k)).collect();
        let mut p = Publisher::with_turns(&before);
        j.update(T, read(0), &mut p, (0, 0, 0), false);
        let mut turns = before.clone();
        turns.push((true, 4));
        let mut p = Publisher::with_turns(&turns);
        j.update(T + 1, read(1), &mut p, (0, 0, 0), false);
        assert_eq!(p.needy_since_mark(), 1, "turned in the beginning's cycle");
    }

    /// A clock stepped back while an instrument is needy starts the grace
    /// period again from the new time, rather than holding the join back
    /// by the whole step.
    #[test]
    fn a_clock_stepped_back_holds_a_needed_join_back_one_grace_period_at_most() {
        const T: u64 = 1_000_000_000_000;
        const MS: u64 = 1_000_000;
        let mut j = Joining::new(SnapshotJoin::OnDemand, 1, 5 * MS);
        let mut calm = Publisher::default();
        j.update(T, read(0), &mut calm, (0, 0, 0), false);
        j.update(T + 1, read(1), &mut calm, (0, 0, 0), false);
        j.update(T + 2, read(2), &mut calm, (0, 0, 0), false);
        assert!(!j.joined(), "left");
        let mut needy = Publisher::with_needy(1, 1);
        j.update(T + MS, read(2), &mut needy, (0, 0, 0), false);
        let back = T - 10_000 * MS;
        j.update(back, read(2), &mut needy, (0, 0, 0), false);
        assert!(!j.joined(), "within the grace period");
        j.update(back + 5 * MS, read(2), &mut needy, (0, 0, 0), false);
        assert!(j.joined(), "a grace period after the step");
    }

    /// Without snapshot lines nothing is joined, given up or not, and no
    /// join is counted.
    #[test]
    fn a_feed_without_snapshot_lines_never_joins() {
        let mut p = Publisher::default();
        let mut j = Joining::none();
        j.update(1, read(0), &mut p, (0, 1, 0), false);
        assert!(!j.joined());
        assert_eq!((j.joins, j.leaves), (0, 0));
    }

    /// A flood of ChannelResets logs at most a line an interval; the
    /// first is always logged, and so is one after the clock stepped back.
    #[test]
    fn channel_resets_are_logged_at_most_once_an_interval() {
        const T: u64 = 1_000_000_000_000;
        let mut l = Limiter::new(RESET_LOG_INTERVAL_NS);
        assert!(l.due(T, false).is_some());
        assert!(l.due(T, false).is_none());
        assert!(l.due(T + RESET_LOG_INTERVAL_NS - 1, false).is_none());
        assert_eq!(l.due(T + RESET_LOG_INTERVAL_NS, false), Some(2));
        assert!(l.due(T - 1, false).is_some());
    }

    /// The channel's counters take ids of their own (in the extension, but
    /// the receiver's), and each is exported: a total as `_total`, a level
    /// without.
    #[test]
    fn own_counters_have_ids_of_their_own_and_metrics() {
        let all = Engine::counters();
        let mut ids: Vec<usize> = all.iter().map(|d| d.id).collect();
        ids.sort_unstable();
        let n = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), n, "an id described twice");
        for &(id, name, gauge, metric) in &OWN {
            if name != "unwanted" {
                assert!((counter::EXT..counter::ALL).contains(&id), "{name}");
            }
            let d = all.iter().find(|d| d.name == name).unwrap();
            assert_eq!(d.kind == CounterKind::Gauge, gauge, "{name}");
            assert_eq!(metric.ends_with("_total"), !gauge, "{name}: {metric}");
        }
    }
}
