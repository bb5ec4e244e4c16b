//! A CME MDP3 channel as a capture of one holds it, built with the
//! library's encoder, for the tests that need realistic traffic (fuzzing,
//! allocation counting): definitions (a Symbol of 20 characters among
//! them), book activity with every action and entry type (implied ones
//! too), events over two packets, trades, volume and statistics, statuses
//! by group, by asset and by instrument, heartbeats, snapshot loops that lag
//! the incremental feed by a packet, packets late on line B (gaps filled)
//! and lost on both lines (gaps given up, RptSeq holes healed by the next
//! loop), a ChannelReset and a weekly restart of MsgSeqNum.
//!
//! Datagrams are `(line, arrival ns, payload)`, lines numbered as the
//! engine numbers them ([`INCREMENTAL`], [`SNAPSHOT`], [`DEFINITION`]).

use tickguard::protocol::mdp3::encode::{
    self, BookEntry, FeedType, Shape, SnapshotEntry, SnapshotRoot, Status,
};
use tickguard::protocol::mdp3::template::{EntryType, UpdateAction};

/// 2026-01-05 14:30:00 UTC, ns since the Unix epoch.
pub const T0: u64 = 1_767_623_400_000_000_000;
pub const US: u64 = 1_000;
pub const MS: u64 = 1_000_000;
const EOE: u8 = 0x80;
/// A tick of every instrument here, mantissa (0.25).
const TICK: i64 = 250_000_000;

/// The incremental lines, A and B.
pub const INCREMENTAL: [usize; 2] = [0, 1];
/// The snapshot lines.
pub const SNAPSHOT: [usize; 2] = [2, 3];
/// The definition lines.
pub const DEFINITION: [usize; 2] = [4, 5];

/// One datagram: (line, arrival ns since the Unix epoch, payload).
pub type Datagram = (usize, u64, Vec<u8>);

/// One instrument of the channel.
pub struct Inst {
    /// SecurityID.
    pub id: i32,
    /// Symbol.
    pub symbol: &'static str,
    group: &'static str,
    asset: &'static str,
    /// Its definition's template (63 is v12+: 57 before, 54 before v10).
    template: u16,
    depth: i8,
    /// Where its prices start, mantissa.
    price: i64,
}

/// The channel's instruments.
pub const INSTRUMENTS: [Inst; 6] = [
    Inst {
        id: 1001,
        symbol: "ESZ6",
        group: "ES",
        asset: "ES",
        template: 54,
        depth: 10,
        price: 5_000_000_000_000,
    },
    Inst {
        id: 1002,
        symbol: "ESZ6-ESH7",
        group: "ES",
        asset: "ES",
        template: 56,
        depth: 5,
        price: -1_250_000_000,
    },
    Inst {
        id: 1003,
        symbol: "NQZ6",
        group: "NQ",
        asset: "NQ",
        template: 54,
        depth: 10,
        price: 21_000_000_000_000,
    },
    Inst {
        id: 1004,
        symbol: "ESZ6-ESH7-ESM7-ESU7S",
        group: "ES",
        asset: "ES",
        template: 56,
        depth: 3,
        price: 2_500_000_000,
    },
    Inst {
        id: 1005,
        symbol: "ESZ6C5000",
        group: "EO",
        asset: "ES",
        template: 55,
        depth: 3,
        price: 75_000_000_000,
    },
    Inst {
        id: 1006,
        symbol: "6EZ6",
        group: "6E",
        asset: "6E",
        template: 63,
        depth: 10,
        price: 1_100_000_000,
    },
];
const ES: usize = 0;
const SPREAD: usize = 1;
const NQ: usize = 2;
const LONG: usize = 3;
const OPTION: usize = 4;
const FX: usize = 5;

/// How a channel is built.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The schema version of every message: 9 to 13, or above with blocks
    /// longer than the schema's (a newer version appending fields).
    pub version: u16,
    /// The first incremental MsgSeqNum.
    pub first_seq: u32,
    /// Every instrument's first RptSeq: 1, the whole history; above,
    /// joined mid-week (no baseline until a snapshot).
    pub first_rpt: u32,
    /// One round in three loses a packet on both lines.
    pub lose: bool,
}

/// What becomes of an incremental packet's copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Copies {
    /// A now, B a little later.
    Both,
    /// Lost on A; B after the next packet (a gap it fills).
    LateB,
    /// Lost on both lines.
    Lost,
}

/// A channel being built.
pub struct Channel {
    o: Options,
    shape: Shape,
    out: Vec<Datagram>,
    /// Time of the next packet.
    t: u64,
    /// Next incremental MsgSeqNum.
    seq: u32,
    /// Next definition-line MsgSeqNum.
    def_seq: u32,
    /// Next RptSeq of each instrument.
    rpt: [u32; 6],
    round: u32,
}

impl Channel {
    /// A channel before its first datagram.
    pub fn new(o: Options) -> Channel {
        let shape = match o.version {
            ..=13 => Shape::new(o.version),
            v => Shape::new(v).longer(5, 3),
        };
        Channel {
            o,
            shape,
            out: Vec::new(),
            t: T0,
            seq: o.first_seq,
            def_seq: 1,
            rpt: [o.first_rpt; 6],
            round: 0,
        }
    }

    /// The datagrams built since the last call, by arrival (a copy of B
    /// late past the end comes with the next call's).
    pub fn take(&mut self) -> Vec<Datagram> {
        let (now, rest): (Vec<Datagram>, Vec<Datagram>) = std::mem::take(&mut self.out)
            .into_iter()
            .partition(|d| d.1 < self.t);
        self.out = rest;
        let mut now = now;
        now.sort_by_key(|d| d.1);
        now
    }

    /// The whole channel: definitions, `rounds` rounds, and (`restart`)
    /// a ChannelReset half way and a weekly restart of MsgSeqNum near the
    /// end (when it is far enough from 1 to be one).
    pub fn build(o: Options, rounds: u32, restart: bool) -> Vec<Datagram> {
        let mut c = Channel::new(o);
        c.definitions();
        for r in 0..rounds {
            if restart && r == rounds / 2 {
                c.channel_reset();
            }
            if restart && r + 2 == rounds && c.seq > 20_000 {
                c.weekly_restart();
            }
            c.round();
        }
        c.t += 10 * MS;
        c.take()
    }

    /// The definition template of instrument `i` in this version.
    fn definition_template(&self, i: usize) -> u16 {
        match (INSTRUMENTS[i].template, self.o.version) {
            (63, 12..) => 63,
            (63, 10..) => 57,
            (63, _) => 54,
            (t, _) => t,
        }
    }

    /// Instrument `i`'s definition message.
    pub fn definition(&self, i: usize) -> Vec<u8> {
        let x = &INSTRUMENTS[i];
        self.definition_as(i, x.symbol, x.group, b'A')
    }

    /// Instrument `i`'s definition message of SecurityUpdateAction
    /// `action`, naming it `symbol` in SecurityGroup `group`.
    fn definition_as(&self, i: usize, symbol: &str, group: &str, action: u8) -> Vec<u8> {
        let x = &INSTRUMENTS[i];
        let d = encode::Instrument {
            match_event_indicator: EOE,
            tot_num_reports: Some(INSTRUMENTS.len() as u32),
            security_update_action: action,
            trading_status: Some(17),
            appl_id: 310,
            security_group: group,
            asset: x.asset,
            symbol,
            security_id: x.id,
            min_price_increment: Some(TICK),
            display_factor: 1_000_000_000,
        };
        let types = [
            FeedType {
                md_feed_type: "GBX",
                market_depth: x.depth,
            },
            FeedType {
                md_feed_type: "GBI",
                market_depth: 2,
            },
        ];
        let events = (i % 3) as u8;
        encode::definition(self.definition_template(i), self.shape, &d, events, &types)
    }

    /// Instruments 0 and 1 trade Symbols and instrument 0 moves to another
    /// SecurityGroup (the definition loop puts them back): a packet of
    /// their definitions on the definition lines A and B.
    pub fn swap_names(&mut self) {
        let (a, b) = (&INSTRUMENTS[0], &INSTRUMENTS[1]);
        let ms = [
            self.definition_as(0, b.symbol, "ZZ", b'M'),
            self.definition_as(1, a.symbol, b.group, b'M'),
        ];
        let p = encode::packet(self.def_seq, self.t, &ms);
        self.def_seq += 1;
        self.out.push((DEFINITION[0], self.t, p.clone()));
        self.out.push((DEFINITION[1], self.t + 20 * US, p));
        self.t += 100 * US;
    }

    /// The definition loop: a packet of three definitions at a time, on
    /// A and B.
    pub fn definitions(&mut self) {
        for chunk in [[0, 1, 2], [3, 4, 5]] {
            let ms: Vec<Vec<u8>> = chunk.iter().map(|&i| self.definition(i)).collect();
            let p = encode::packet(self.def_seq, self.t, &ms);
            self.def_seq += 1;
            self.out.push((DEFINITION[0], self.t, p.clone()));
            self.out.push((DEFINITION[1], self.t + 20 * US, p));
            self.t += 100 * US;
        }
    }

    /// A book entry of instrument `i`, taking its next RptSeq.
    fn entry(
        &mut self,
        i: usize,
        e: EntryType,
        a: UpdateAction,
        level: u8,
        price: i64,
    ) -> BookEntry {
        let rpt_seq = self.rpt[i];
        self.rpt[i] += 1;
        BookEntry {
            price: Some(price),
            size: Some(10 + u64::from(level)),
            security_id: INSTRUMENTS[i].id,
            rpt_seq,
            orders: Some(2),
            level,
            action: a,
            entry_type: e,
        }
    }

    /// A trade, volume or statistics entry of instrument `i`.
    fn stat(&mut self, i: usize) -> (i32, u32) {
        let r = self.rpt[i];
        self.rpt[i] += 1;
        (INSTRUMENTS[i].id, r)
    }

    /// Long-quantity templates (v12+) in every other round.
    fn long(&self) -> bool {
        self.o.version >= 12 && self.round % 2 == 1
    }

    fn book(&self, mei: u8, entries: &[BookEntry]) -> Vec<u8> {
        let id = if self.long() { 64 } else { 46 };
        encode::book(id, self.shape, self.t, mei, entries, (self.round % 3) as u8)
    }

    fn statistics(&self, id: u16, mei: u8, entries: &[(i32, u32)]) -> Vec<u8> {
        let orders = if matches!(id, 48 | 65) { 1 } else { 0 };
        encode::statistics(id, self.shape, self.t, mei, entries, orders)
    }

    /// The next incremental packet, of `messages`.
    fn incremental(&mut self, messages: &[Vec<u8>], copies: Copies) {
        let p = encode::packet(self.seq, self.t, messages);
        self.seq += 1;
        match copies {
            Copies::Both => {
                self.out.push((INCREMENTAL[0], self.t, p.clone()));
                self.out.push((INCREMENTAL[1], self.t + 30 * US, p));
            }
            Copies::LateB => self.out.push((INCREMENTAL[1], self.t + 400 * US, p)),
            Copies::Lost => {}
        }
        self.t += 250 * US;
    }

    /// A ChannelReset: MsgSeqNum and every RptSeq start again at 1.
    pub fn channel_reset(&mut self) {
        let m = encode::channel_reset(self.shape, self.t, EOE, 310);
        self.incremental(&[m], Copies::Both);
        self.seq = 1;
        self.rpt = [1; 6];
    }

    /// The weekly restart: MsgSeqNum and every RptSeq start again at 1,
    /// with no message saying so.
    pub fn weekly_restart(&mut self) {
        self.t += MS;
        self.seq = 1;
        self.rpt = [1; 6];
    }

    /// A snapshot loop reflecting incremental packet `last` and RptSeqs
    /// `rpt` (each the next one then), on A and B.
    fn snapshot_loop(&mut self, last: u32, rpt: [u32; 6]) {
        let id = if self.long() { 69 } else { 52 };
        let active: Vec<usize> = (0..INSTRUMENTS.len()).filter(|&i| rpt[i] > 1).collect();
        for (k, &i) in active.iter().enumerate() {
            let x = &INSTRUMENTS[i];
            let p = x.price + i64::from(self.round % 7) * TICK;
            let level = |price, entry_type| SnapshotEntry {
                price: Some(price),
                size: Some(7),
                orders: Some(1),
                level: Some(1),
                entry_type,
            };
            let mut entries = vec![level(p, EntryType::Bid), level(p + TICK, EntryType::Offer)];
            if i == SPREAD || i == LONG {
                entries.push(level(p - TICK, EntryType::ImpliedBid));
                entries.push(level(p + 2 * TICK, EntryType::ImpliedOffer));
            }
            // A trade entry: not a book's, ignored.
            entries.push(level(p, EntryType::Other(b'2')));
            let root = SnapshotRoot {
                last_msg_seq_num_processed: last,
                tot_num_reports: active.len() as u32,
                security_id: x.id,
                rpt_seq: rpt[i] - 1,
                transact_time: self.t - 100 * US,
                trading_status: (i != NQ).then_some(17),
            };
            let m = encode::snapshot(id, self.shape, &root, &entries);
            let p = encode::packet(k as u32 + 1, self.t, &[m]);
            self.out.push((SNAPSHOT[0], self.t, p.clone()));
            self.out.push((SNAPSHOT[1], self.t + 20 * US, p));
            self.t += 50 * US;
        }
    }

    /// One round: nine incremental packets (one late on B; one in three
    /// lost on both lines when the options say so), a snapshot loop every
    /// other round lagging the feed by its first packet, the definition
    /// loop every fourth.
    pub fn round(&mut self) {
        use EntryType::{Bid, Offer};
        use EntryType::{BookReset, ImpliedBid, ImpliedOffer, MarketBestBid, MarketBestOffer};
        use UpdateAction::{Change, Delete, DeleteFrom, DeleteThru, New, Overlay};
        let r = self.round;
        let p = |i: usize| INSTRUMENTS[i].price + i64::from(r % 7) * TICK;
        let (before, rpt) = (self.seq.wrapping_sub(1), self.rpt);

        // 1: ES and NQ quoted, one event.
        let e = [
            self.entry(ES, Bid, New, 1, p(ES)),
            self.entry(ES, Offer, New, 1, p(ES) + TICK),
            self.entry(ES, Bid, New, 2, p(ES) - TICK),
            self.entry(NQ, Bid, New, 1, p(NQ)),
            self.entry(NQ, Offer, New, 1, p(NQ) + TICK),
        ];
        let m = self.book(EOE | 0x04, &e);
        self.incremental(&[m], Copies::Both);
        if r % 2 == 1 {
            self.snapshot_loop(before, rpt);
        }

        // 2 and 3: one event over two packets (spread, implied, the long
        // Symbol).
        let e = [
            self.entry(SPREAD, ImpliedBid, New, 1, p(SPREAD) - TICK),
            self.entry(SPREAD, ImpliedOffer, New, 1, p(SPREAD) + 2 * TICK),
            self.entry(SPREAD, Bid, New, 1, p(SPREAD)),
        ];
        let m = self.book(0x04, &e);
        self.incremental(&[m], Copies::Both);
        let e = [
            self.entry(SPREAD, Offer, New, 1, p(SPREAD) + TICK),
            self.entry(LONG, Bid, New, 1, p(LONG)),
            self.entry(LONG, Offer, New, 1, p(LONG) + TICK),
            self.entry(LONG, ImpliedBid, Change, 1, p(LONG) - TICK),
        ];
        let m = self.book(EOE | 0x10, &e);
        self.incremental(&[m], Copies::Both);

        // 4: a trade, its volume and the book after it; lost on A, late on B.
        let (trade, volume) = if self.long() { (65, 66) } else { (48, 37) };
        let t = [self.stat(ES)];
        let trade = self.statistics(trade, 0x01, &t);
        let v = [self.stat(ES)];
        let volume = self.statistics(volume, 0x02, &v);
        let e = [self.entry(ES, Bid, Change, 1, p(ES))];
        let book = self.book(EOE | 0x04, &e);
        self.incremental(&[trade, volume, book], Copies::LateB);

        // 5: statistics; FX quoted.
        let daily = [self.stat(NQ)];
        let daily = self.statistics(49, 0, &daily);
        let limits = [self.stat(LONG)];
        let limits = self.statistics(50, 0, &limits);
        let session = [self.stat(SPREAD)];
        let session = self.statistics(if self.long() { 67 } else { 51 }, 0x08, &session);
        let e = [
            self.entry(FX, Bid, New, 1, p(FX)),
            self.entry(FX, Offer, New, 1, p(FX) + TICK),
        ];
        let book = self.book(EOE, &e);
        self.incremental(&[daily, limits, session, book], Copies::Both);

        // 6: overlay, delete, delete-from and a refill; the option quoted;
        // market best entries from v12.
        let mut e = vec![
            self.entry(ES, Bid, Overlay, 2, p(ES) - TICK),
            self.entry(ES, Bid, Delete, 2, 0),
            self.entry(NQ, Offer, DeleteFrom, 1, 0),
            self.entry(NQ, Offer, New, 1, p(NQ) + TICK),
            self.entry(OPTION, Bid, New, 1, p(OPTION)),
            self.entry(OPTION, Offer, New, 1, p(OPTION) + TICK),
        ];
        if self.o.version >= 12 {
            e.push(self.entry(SPREAD, MarketBestBid, New, 1, p(SPREAD)));
            e.push(self.entry(SPREAD, MarketBestOffer, New, 1, p(SPREAD) + TICK));
        }
        let m = self.book(EOE, &e);
        self.incremental(&[m], Copies::Both);

        // 7: the spread's bid rebuilt now and then, NQ's book emptied and
        // rebuilt now and then; lost on both lines one round in three.
        let mut e = vec![self.entry(SPREAD, Bid, Change, 1, p(SPREAD))];
        if r.is_multiple_of(3) {
            e.push(self.entry(SPREAD, Bid, DeleteThru, 1, 0));
            e.push(self.entry(SPREAD, Bid, New, 1, p(SPREAD)));
        }
        if r.is_multiple_of(4) {
            e.push(self.entry(NQ, BookReset, New, 1, 0));
            e.push(self.entry(NQ, Bid, New, 1, p(NQ)));
            e.push(self.entry(NQ, Offer, New, 1, p(NQ) + TICK));
        }
        let m = self.book(EOE, &e);
        let copies = if self.o.lose && r % 3 == 2 {
            Copies::Lost
        } else {
            Copies::Both
        };
        self.incremental(&[m], copies);

        // 8: statuses by group, by asset and by instrument.
        let status = |group, asset, id, code| Status {
            transact_time: 0,
            security_group: group,
            asset,
            security_id: id,
            match_event_indicator: EOE,
            trading_status: code,
        };
        let nq = Some(INSTRUMENTS[NQ].id);
        let statuses: &[Status] = match r % 6 {
            0 => &[status("ES", "", None, Some(2))],
            1 => &[status("ES", "", None, Some(17))],
            2 => &[status("", "NQ", None, Some(18))],
            3 => &[status("", "NQ", None, Some(17))],
            4 => &[status("", "", nq, Some(4))],
            _ => &[status("", "", nq, Some(17)), status("EO", "ES", None, None)],
        };
        let ms: Vec<Vec<u8>> = statuses
            .iter()
            .map(|s| {
                let s = Status {
                    transact_time: self.t,
                    ..*s
                };
                encode::security_status(self.shape, &s)
            })
            .collect();
        self.incremental(&ms, Copies::Both);

        // 9: a heartbeat; now and then with a market-by-order message and
        // one of a template nobody knows.
        let mut ms = vec![encode::heartbeat(self.shape)];
        if r.is_multiple_of(5) {
            let v = self.shape.version;
            ms.push(encode::raw(47, v, &[0; 11], &[24, 0, 0]));
            ms.push(encode::raw(99, v, &[7; 5], &[]));
        }
        self.incremental(&ms, Copies::Both);

        if r % 4 == 3 {
            self.definitions();
        }
        self.round += 1;
    }
}
