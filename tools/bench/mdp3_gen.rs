//! A synthetic CME MDP3 channel for the MDP3 rows and `benches/mdp3_apply.rs`
//! (which includes this file by path: it uses nothing of the bench tool but
//! the library's `mdp3::encode`).
//!
//! Deterministic from its seed. `instruments` futures (SecurityIDs sparse,
//! about 2,600 apart from 10,007, so no handler can index them directly), each
//! defined with a 10-deep outright and a 2-deep implied book; their
//! activity skewed (the busiest instrument about 40 times the quietest,
//! as a front month against a back month). The week starts: MsgSeqNum and
//! every RptSeq from 1, a first event per instrument building its books
//! (10 levels a side, 2 implied), then Globex events, each on one
//! instrument (a few on 2–3):
//!
//! - 55% size changes: Change at a level (top levels likelier), 1–3 of
//!   them, either side;
//! - 14% trades through the top: a TradeSummary (48) entry, sometimes a
//!   Volume (37) entry, then Delete at level 1 and a New at level 10
//!   refilling the side one tick further out;
//! - 14% a better price: New at level 1, one tick inside the spread (the
//!   10th level pushed out); where the spread is a tick, a Change instead;
//! - 10% implied updates: Change at implied level 1 or 2;
//! - 7% a spread event touching 2–3 instruments' tops in one 46.
//!
//! An event is one or more messages (48, 37, 46; a 46 holds at most 12
//! entries), EndOfEvent (0x80) on its last. Messages are packed into
//! packets of a random budget of 200–1,400 bytes: a 46 that does not fit
//! is split between two packets, as CME splits a large event, and a
//! packet is sent after an event's end `send_percent` of the time (20%: a
//! busy channel, several events a packet; 100%: one event a packet, or
//! part of one), so events span packets often. Packets come 1–9 µs apart.
//!
//! Line B carries every packet 20–80 µs after line A (in order). Losses:
//! one line-A packet in `loss_a_one_in` is lost on A only (B fills the
//! gap), and `lost_both` packets, spread evenly, on both lines: the gap is
//! given up after the feed's gap timeout and the instruments the packet
//! touched find an RptSeq hole; 10 ms after each such loss the snapshot
//! line sends one snapshot (52) per instrument it touched, built from the
//! generator's own books at an event boundary (`LastMsgSeqNumProcessed`
//! the last packet sent), which heals them. No line-A-only loss falls
//! between a two-line loss and its snapshots, so that every RptSeq value a
//! snapshot skips is one lost for good.
//!
//! The generator keeps every book as the handler must (same level
//! semantics), so a replay's visible books can be compared with
//! [`Channel::instruments`] at the end.

#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use tickguard::protocol::mdp3::encode::{
    self, BookEntry, FeedType, PacketBuilder, Shape, SnapshotEntry, SnapshotRoot,
};
use tickguard::protocol::mdp3::template::{EntryType, UpdateAction};

/// Outright levels a side.
pub const DEPTH: usize = 10;
/// Implied levels a side.
pub const IMPLIED_DEPTH: usize = 2;
/// 2026-01-05 14:30:00 UTC, ns since the Unix epoch: the first packet.
pub const T0: u64 = 1_767_623_400_000_000_000;
/// A snapshot is sent this long after a packet lost on both lines, ns.
pub const SNAPSHOT_AFTER_NS: u64 = 10_000_000;
/// The schema version written.
const V: Shape = Shape::new(13);
/// Tick: 0.25 as a PRICE9 mantissa.
const TICK: i64 = 250_000_000;
/// Most entries in one 46.
const MAX_PER_MESSAGE: usize = 12;
/// Bytes of a 46 without entries, and of one entry.
const BOOK_HEADER: usize = 32;
const BOOK_ENTRY: usize = 32;

/// Where a datagram goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Service {
    /// Incremental line A.
    A,
    /// Incremental line B.
    B,
    /// The snapshot (market recovery) line.
    Snapshot,
}

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    /// Book entries (of 46 messages) to write, at least.
    pub book_entries: u64,
    /// Instruments.
    pub instruments: usize,
    /// Seed.
    pub seed: u64,
    /// Line B copies (false: line A alone).
    pub line_b: bool,
    /// One line-A packet in this many is lost on A only (0: none).
    pub loss_a_one_in: u64,
    /// Packets lost on both lines (each followed by snapshots).
    pub lost_both: usize,
    /// Percent of events after whose end the packet is sent at once
    /// (otherwise the next event's messages join it, up to its budget).
    pub send_percent: u64,
}

impl Params {
    /// The capture rows' channel: two lines, one A-only loss in 2,000
    /// packets, three packets lost on both lines.
    pub fn capture(book_entries: u64, instruments: usize) -> Params {
        Params {
            book_entries,
            instruments,
            seed: 20_260_105,
            line_b: true,
            loss_a_one_in: 2_000,
            lost_both: 3,
            send_percent: 20,
        }
    }

    /// Line A alone, nothing lost (the decode + apply bench).
    pub fn line_a(book_entries: u64, instruments: usize) -> Params {
        Params {
            line_b: false,
            loss_a_one_in: 0,
            lost_both: 0,
            ..Params::capture(book_entries, instruments)
        }
    }
}

/// What was generated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Incremental packets (each line's count; MsgSeqNum 1 to this).
    pub packets: u64,
    /// Messages in them.
    pub messages: u64,
    /// Book entries (46).
    pub book_entries: u64,
    /// Other entries taking an RptSeq (48, 37).
    pub other_entries: u64,
    /// Globex events.
    pub events: u64,
    /// Events whose messages span more than one packet.
    pub events_spanning: u64,
    /// Packets lost on line A only.
    pub lost_a: u64,
    /// Packets lost on both lines.
    pub lost_both: u64,
    /// Entries (any template) in those.
    pub lost_entries: u64,
    /// Snapshots sent.
    pub snapshots: u64,
    /// Datagrams handed to the sink, every service.
    pub datagrams: u64,
}

/// One price level of the generator's books.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level {
    /// Price mantissa.
    pub price: i64,
    /// Size.
    pub size: u64,
    /// Orders.
    pub orders: i32,
}

/// One side: level 1 first.
pub type Side<const N: usize> = [Option<Level>; N];

/// One instrument as the generator keeps it.
#[derive(Debug, Clone)]
pub struct Instrument {
    /// SecurityID.
    pub id: i32,
    /// Symbol.
    pub symbol: String,
    /// Last RptSeq written.
    pub rpt: u32,
    /// Outright bid and offer.
    pub outright: [Side<DEPTH>; 2],
    /// Implied bid and offer.
    pub implied: [Side<IMPLIED_DEPTH>; 2],
}

/// xorshift64*.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// The level semantics of MDP3 (spec mdp3 §3.3) on a side of `N`.
fn apply<const N: usize>(side: &mut Side<N>, action: UpdateAction, n: u8, level: Option<Level>) {
    let i = usize::from(n) - 1;
    match action {
        UpdateAction::New => {
            side.copy_within(i..N - 1, i + 1);
            side[i] = level;
        }
        UpdateAction::Change | UpdateAction::Overlay => side[i] = level,
        UpdateAction::Delete => {
            side.copy_within(i + 1.., i);
            side[N - 1] = None;
        }
        _ => unreachable!("the generator writes New, Change and Delete"),
    }
}

/// Entries of one event, in order: (template, entry).
#[derive(Debug, Clone, Copy)]
enum Item {
    Book(BookEntry),
    /// A TradeSummary (48) or Volume (37) entry: (template, id, RptSeq).
    Other(u16, i32, u32),
}

/// A datagram due later: (time, order written, service, bytes).
type Due = (u64, u64, Service, Vec<u8>);

/// The channel being written.
pub struct Channel {
    p: Params,
    rng: Rng,
    instruments: Vec<Instrument>,
    /// Cumulative activity weights, for drawing an instrument.
    weights: Vec<u64>,
    t: u64,
    seq: u32,
    packet: Option<PacketBuilder>,
    budget: usize,
    /// SecurityIDs in the packet being built.
    in_packet: Vec<i32>,
    /// Entries (any template) in it.
    entries_in_packet: u64,
    /// Datagrams due later, earliest first.
    later: BinaryHeap<Reverse<Due>>,
    order: u64,
    b_last: u64,
    /// Snapshots due: (time, SecurityIDs).
    snapshots_due: Vec<(u64, Vec<i32>)>,
    /// Line-A-only losses held off until this time.
    quiet_until: u64,
    /// Book entries at which the next two-line loss falls.
    next_lost_both: u64,
    stats: Stats,
}

impl Channel {
    /// A channel about to write `p`.
    pub fn new(p: Params) -> Channel {
        let mut rng = Rng(p.seed | 1);
        let n = p.instruments.max(1);
        let instruments: Vec<Instrument> = (0..n)
            .map(|k| {
                let id = 10_007 + k as i32 * 2_579 + rng.below(2_000) as i32;
                Instrument {
                    id,
                    symbol: format!("G{:05}Z6", k),
                    rpt: 0,
                    outright: [[None; DEPTH]; 2],
                    implied: [[None; IMPLIED_DEPTH]; 2],
                }
            })
            .collect();
        // Weight of instrument k: 40 for the first down to 1.
        let mut total = 0;
        let weights = (0..n)
            .map(|k| {
                total += 1 + 39 * (n - k) as u64 / n as u64;
                total
            })
            .collect();
        let next_lost_both = match p.lost_both {
            0 => u64::MAX,
            k => p.book_entries / (k as u64 + 1),
        };
        Channel {
            rng,
            instruments,
            weights,
            t: T0,
            seq: 0,
            packet: None,
            budget: 0,
            in_packet: Vec::new(),
            entries_in_packet: 0,
            later: BinaryHeap::new(),
            order: 0,
            b_last: 0,
            snapshots_due: Vec::new(),
            quiet_until: 0,
            next_lost_both,
            stats: Stats::default(),
            p,
        }
    }

    /// The instruments' definitions, one 54 a packet (the `definitions`
    /// file).
    pub fn definitions(&self) -> Vec<Vec<u8>> {
        let reports = self.instruments.len() as u32;
        self.instruments
            .iter()
            .enumerate()
            .map(|(k, i)| {
                let d = encode::Instrument {
                    match_event_indicator: 0,
                    tot_num_reports: Some(reports),
                    security_update_action: b'A',
                    trading_status: Some(17),
                    appl_id: 310,
                    security_group: "GB",
                    asset: "GB",
                    symbol: &i.symbol,
                    security_id: i.id,
                    min_price_increment: Some(TICK),
                    display_factor: 1_000_000_000,
                };
                let types = [
                    FeedType {
                        md_feed_type: "GBX",
                        market_depth: DEPTH as i8,
                    },
                    FeedType {
                        md_feed_type: "GBI",
                        market_depth: IMPLIED_DEPTH as i8,
                    },
                ];
                let m = encode::definition(54, V, &d, 0, &types);
                encode::packet(k as u32 + 1, T0, &[m])
            })
            .collect()
    }

    /// The instruments, their books as every packet written leaves them.
    pub fn instruments(&self) -> &[Instrument] {
        &self.instruments
    }

    /// Writes the channel, each datagram to `sink` (arrival time, service,
    /// bytes) in time order; returns what was written.
    pub fn run(
        &mut self,
        mut sink: impl FnMut(u64, Service, &[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<Stats> {
        for k in 0..self.instruments.len() {
            let items = self.build(k);
            self.event(&items, &mut sink)?;
        }
        while self.stats.book_entries < self.p.book_entries {
            let items = self.next_event();
            self.event(&items, &mut sink)?;
        }
        self.flush(&mut sink)?;
        while let Some(Reverse((t, _, service, bytes))) = self.later.pop() {
            self.emit(t, service, &bytes, &mut sink)?;
        }
        Ok(self.stats)
    }

    fn emit(
        &mut self,
        t: u64,
        service: Service,
        bytes: &[u8],
        sink: &mut impl FnMut(u64, Service, &[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        self.stats.datagrams += 1;
        sink(t, service, bytes)
    }

    fn later(&mut self, t: u64, service: Service, bytes: Vec<u8>) {
        self.order += 1;
        self.later.push(Reverse((t, self.order, service, bytes)));
    }

    /// Instrument index, drawn by activity.
    fn draw(&mut self) -> usize {
        let total = *self.weights.last().unwrap_or(&1);
        let x = self.rng.below(total);
        self.weights.partition_point(|&w| w <= x)
    }

    fn rpt(&mut self, k: usize) -> u32 {
        let i = &mut self.instruments[k];
        i.rpt += 1;
        i.rpt
    }

    /// A book entry for instrument `k`, applied to its books.
    fn book_entry(
        &mut self,
        k: usize,
        entry_type: EntryType,
        action: UpdateAction,
        n: u8,
        level: Option<Level>,
    ) -> Item {
        let rpt_seq = self.rpt(k);
        let i = &mut self.instruments[k];
        match entry_type {
            EntryType::Bid => apply(&mut i.outright[0], action, n, level),
            EntryType::Offer => apply(&mut i.outright[1], action, n, level),
            EntryType::ImpliedBid => apply(&mut i.implied[0], action, n, level),
            EntryType::ImpliedOffer => apply(&mut i.implied[1], action, n, level),
            _ => unreachable!(),
        }
        let deleted = Level {
            price: 0,
            size: 0,
            orders: 0,
        };
        let l = level.unwrap_or(deleted);
        Item::Book(BookEntry {
            price: level.map(|l| l.price),
            size: level.map(|l| l.size),
            security_id: i.id,
            rpt_seq,
            orders: level.map(|_| l.orders),
            level: n,
            action,
            entry_type,
        })
    }

    fn level(&mut self, price: i64) -> Level {
        Level {
            price,
            size: self.rng.range(1, 500),
            orders: self.rng.range(1, 30) as i32,
        }
    }

    /// The first event of instrument `k`: its books built.
    fn build(&mut self, k: usize) -> Vec<Item> {
        let mid = (4_000 + 8 * k as i64) * 4 * TICK;
        let mut items = Vec::new();
        for n in 1..=DEPTH as u8 {
            let d = i64::from(n) * TICK;
            let (b, o) = (self.level(mid - d), self.level(mid + d));
            items.push(self.book_entry(k, EntryType::Bid, UpdateAction::New, n, Some(b)));
            items.push(self.book_entry(k, EntryType::Offer, UpdateAction::New, n, Some(o)));
        }
        for n in 1..=IMPLIED_DEPTH as u8 {
            let d = (i64::from(n) + 1) * TICK;
            let (b, o) = (self.level(mid - d), self.level(mid + d));
            let (ib, io) = (EntryType::ImpliedBid, EntryType::ImpliedOffer);
            items.push(self.book_entry(k, ib, UpdateAction::New, n, Some(b)));
            items.push(self.book_entry(k, io, UpdateAction::New, n, Some(o)));
        }
        items
    }

    /// Spread of instrument `k` in ticks (both tops are always there).
    fn spread(&self, k: usize) -> i64 {
        let [b, o] = &self.instruments[k].outright;
        match (b[0], o[0]) {
            (Some(b), Some(o)) => (o.price - b.price) / TICK,
            _ => 0,
        }
    }

    fn side_type(s: usize) -> EntryType {
        [EntryType::Bid, EntryType::Offer][s]
    }

    /// A size change at a level of side `s` of instrument `k`.
    fn change(&mut self, k: usize, s: usize) -> Item {
        let n = 1 + (self.rng.below(DEPTH as u64) * self.rng.below(DEPTH as u64) / DEPTH as u64);
        let n = n as u8;
        let price = self.instruments[k].outright[s][usize::from(n) - 1].map_or(0, |l| l.price);
        let l = self.level(price);
        self.book_entry(k, Self::side_type(s), UpdateAction::Change, n, Some(l))
    }

    /// The next event.
    fn next_event(&mut self) -> Vec<Item> {
        let k = self.draw();
        let s = self.rng.below(2) as usize;
        let roll = self.rng.below(100);
        let mut items = Vec::new();
        match roll {
            0..55 => {
                for _ in 0..self.rng.range(1, 3) {
                    let s = self.rng.below(2) as usize;
                    items.push(self.change(k, s));
                }
            }
            55..69 if self.spread(k) <= 4 => {
                // A trade through the top of side `s`.
                let id = self.instruments[k].id;
                let r = self.rpt(k);
                items.push(Item::Other(48, id, r));
                if self.rng.chance(30) {
                    let r = self.rpt(k);
                    items.push(Item::Other(37, id, r));
                }
                let t = Self::side_type(s);
                items.push(self.book_entry(k, t, UpdateAction::Delete, 1, None));
                let last = self.instruments[k].outright[s][DEPTH - 2].map_or(0, |l| l.price);
                let price = if s == 0 { last - TICK } else { last + TICK };
                let l = self.level(price);
                items.push(self.book_entry(k, t, UpdateAction::New, DEPTH as u8, Some(l)));
            }
            55..83 if self.spread(k) >= 2 => {
                // A better price on side `s`.
                let top = self.instruments[k].outright[s][0].map_or(0, |l| l.price);
                let price = if s == 0 { top + TICK } else { top - TICK };
                let l = self.level(price);
                let t = Self::side_type(s);
                items.push(self.book_entry(k, t, UpdateAction::New, 1, Some(l)));
            }
            55..83 => items.push(self.change(k, s)),
            83..93 => {
                let n = self.rng.range(1, IMPLIED_DEPTH as u64) as u8;
                let price =
                    self.instruments[k].implied[s][usize::from(n) - 1].map_or(0, |l| l.price);
                let l = self.level(price);
                let t = [EntryType::ImpliedBid, EntryType::ImpliedOffer][s];
                items.push(self.book_entry(k, t, UpdateAction::Change, n, Some(l)));
            }
            _ => {
                items.push(self.change(k, 0));
                for _ in 0..self.rng.range(1, 2) {
                    let k = self.draw();
                    let s = self.rng.below(2) as usize;
                    items.push(self.change(k, s));
                }
            }
        }
        items
    }

    /// Writes one event's messages; snapshots due go out after it.
    fn event(
        &mut self,
        items: &[Item],
        sink: &mut impl FnMut(u64, Service, &[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        self.stats.events += 1;
        // The packets the event's first and last messages went in (a
        // message that did not fit the open packet starts the next one:
        // its event spans nothing for that).
        let mut packets: Option<(u32, u32)> = None;
        let mut placed = |at: u32| {
            packets = Some(packets.map_or((at, at), |(first, _)| (first, at)));
        };
        let transact_time = self.t;
        let book: Vec<BookEntry> = items
            .iter()
            .filter_map(|i| match i {
                Item::Book(b) => Some(*b),
                Item::Other(..) => None,
            })
            .collect();
        for template in [48u16, 37] {
            let other: Vec<(i32, u32)> = items
                .iter()
                .filter_map(|i| match *i {
                    Item::Other(t, id, r) if t == template => Some((id, r)),
                    _ => None,
                })
                .collect();
            if !other.is_empty() {
                let mei = if template == 48 { 0x01 } else { 0x02 };
                let last = book.is_empty() && template == 37;
                let mei = mei | if last { 0x80 } else { 0 };
                let m = encode::statistics(template, V, transact_time, mei, &other, 0);
                self.stats.other_entries += other.len() as u64;
                let ids: Vec<i32> = other.iter().map(|e| e.0).collect();
                placed(self.message(&m, &ids, sink)?);
            }
        }
        let mut rest = &book[..];
        while !rest.is_empty() {
            // As many entries as the packet has room for (at least one).
            let room = self.room();
            let fit = room.saturating_sub(BOOK_HEADER) / BOOK_ENTRY;
            let n = match fit {
                // None fit: the message starts the next packet.
                0 => rest.len().min(MAX_PER_MESSAGE),
                fit => rest.len().min(MAX_PER_MESSAGE).min(fit),
            };
            let (now, after) = rest.split_at(n);
            let mei = if after.is_empty() { 0x84 } else { 0x04 };
            let m = encode::book(46, V, transact_time, mei, now, 0);
            self.stats.book_entries += n as u64;
            let ids: Vec<i32> = now.iter().map(|e| e.security_id).collect();
            placed(self.message(&m, &ids, sink)?);
            rest = after;
        }
        if packets.is_some_and(|(first, last)| last > first) {
            self.stats.events_spanning += 1;
        }
        if self.rng.chance(self.p.send_percent) {
            self.flush(sink)?;
        }
        if self
            .snapshots_due
            .first()
            .is_some_and(|&(t, _)| t <= self.t)
        {
            self.flush(sink)?;
            let (_, ids) = self.snapshots_due.remove(0);
            self.snapshots(&ids);
        }
        Ok(())
    }

    /// Room left in the packet being built (a new packet's budget if none).
    fn room(&mut self) -> usize {
        if self.packet.is_none() {
            self.start();
        }
        let len = self.packet.as_ref().map_or(0, PacketBuilder::len);
        self.budget.saturating_sub(len)
    }

    fn start(&mut self) {
        self.seq += 1;
        self.t += self.rng.range(1_000, 9_000);
        self.budget = self.rng.range(200, 1_400) as usize;
        self.packet = Some(PacketBuilder::new(self.seq, self.t - 20_000));
    }

    /// Puts `m` in the open packet, or the next one when it does not
    /// fit; the MsgSeqNum of the packet it went in.
    fn message(
        &mut self,
        m: &[u8],
        ids: &[i32],
        sink: &mut impl FnMut(u64, Service, &[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<u32> {
        if self.room() < m.len() && self.packet.as_ref().is_some_and(|p| !p.is_empty()) {
            self.flush(sink)?;
            self.start();
        }
        if let Some(p) = self.packet.as_mut() {
            p.message(m);
        }
        let at = self.seq;
        self.stats.messages += 1;
        self.in_packet.extend_from_slice(ids);
        self.entries_in_packet += ids.len() as u64;
        if self.room() == 0 {
            self.flush(sink)?;
        }
        Ok(at)
    }

    /// Sends the packet being built, on the lines that do not lose it.
    fn flush(
        &mut self,
        sink: &mut impl FnMut(u64, Service, &[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let Some(p) = self.packet.take() else {
            return Ok(());
        };
        let bytes = p.finish();
        let t = self.t;
        self.stats.packets += 1;
        // Datagrams due before this one go first.
        while self.later.peek().is_some_and(|Reverse(d)| d.0 <= t) {
            let Some(Reverse((at, _, service, b))) = self.later.pop() else {
                break;
            };
            self.emit(at, service, &b, sink)?;
        }
        let lost_both = self.stats.book_entries >= self.next_lost_both;
        let lost_a = !lost_both
            && t > self.quiet_until
            && self.p.loss_a_one_in > 0
            && self.rng.below(self.p.loss_a_one_in) == 0;
        if lost_both {
            self.stats.lost_both += 1;
            self.stats.lost_entries += self.entries_in_packet;
            self.next_lost_both = match self.stats.lost_both {
                n if n as usize >= self.p.lost_both => u64::MAX,
                n => self.p.book_entries * (n + 1) / (self.p.lost_both as u64 + 1),
            };
            let mut ids = std::mem::take(&mut self.in_packet);
            ids.sort_unstable();
            ids.dedup();
            let due = t + SNAPSHOT_AFTER_NS;
            self.quiet_until = due + 1_000_000;
            self.snapshots_due.push((due, ids));
        } else {
            if lost_a {
                self.stats.lost_a += 1;
            } else {
                self.emit(t, Service::A, &bytes, sink)?;
            }
            if self.p.line_b {
                let at = (t + self.rng.range(20_000, 80_000)).max(self.b_last);
                self.b_last = at;
                self.later(at, Service::B, bytes);
            }
        }
        self.in_packet.clear();
        self.entries_in_packet = 0;
        Ok(())
    }

    /// One snapshot (52) a packet for each of `ids`, from the books as
    /// every packet sent so far leaves them.
    fn snapshots(&mut self, ids: &[i32]) {
        for (n, &id) in ids.iter().enumerate() {
            let Some(i) = self.instruments.iter().find(|i| i.id == id) else {
                continue;
            };
            let root = SnapshotRoot {
                last_msg_seq_num_processed: self.seq,
                tot_num_reports: ids.len() as u32,
                security_id: id,
                rpt_seq: i.rpt,
                transact_time: self.t,
                trading_status: Some(17),
            };
            let mut entries = Vec::new();
            let books: [(&[Option<Level>], EntryType); 4] = [
                (&i.outright[0], EntryType::Bid),
                (&i.outright[1], EntryType::Offer),
                (&i.implied[0], EntryType::ImpliedBid),
                (&i.implied[1], EntryType::ImpliedOffer),
            ];
            for (side, entry_type) in books {
                for (k, l) in side.iter().enumerate() {
                    if let Some(l) = l {
                        entries.push(SnapshotEntry {
                            price: Some(l.price),
                            size: Some(l.size),
                            orders: Some(l.orders),
                            level: Some(k as u8 + 1),
                            entry_type,
                        });
                    }
                }
            }
            let m = encode::snapshot(52, V, &root, &entries);
            let p = encode::packet(n as u32 + 1, self.t, &[m]);
            self.stats.snapshots += 1;
            // After the line B copies due before it, before the next
            // packet (at least 1 µs later).
            self.later(self.t + 1 + n as u64, Service::Snapshot, p);
        }
    }
}
