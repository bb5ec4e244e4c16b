//! Test helpers shared by the module's tests: a sample message of any
//! template read, every getter of a message written out, and SplitMix64.

use std::fmt::Write;

use super::encode::{self, Shape};
use super::feed::{Feed, Settings};
use super::packet::Message;
use super::sequence;
use super::template::{Body, EntryType, Kind, Template, UpdateAction};
use crate::clock::OffsetMode;

/// A SendingTime / TransactTime: 2026-01-05 09:00 UTC.
pub const T0: u64 = 1_767_603_600_000_000_000;

/// A channel as the module's tests use it: packet gaps given up after
/// 5 ms, a cache of 1,000 entries, depths 10 and 2, no clock offset.
pub fn feed() -> Feed {
    Feed::new(settings())
}

/// The settings of [`feed`].
pub fn settings() -> Settings {
    const MS: u64 = 1_000_000;
    Settings {
        sequencing: sequence::Settings {
            gap_timeout_ns: 5 * MS,
            restart_margin: 10_000,
        },
        max_cached: 1_000,
        max_instruments: 100_000,
        default_depth: 10,
        default_implied_depth: 2,
        offset: OffsetMode::Fixed(0),
        offset_queue: 16,
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): small, seeded, good enough to
/// mutate bytes.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform-ish in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

/// A message of `t` in `shape`, its values varied by `k`: every field read
/// set, nulls and non-nulls mixed.
pub fn sample(t: &Template, shape: Shape, k: u32) -> Vec<u8> {
    let ki = k as i32;
    let tt = T0 + u64::from(k);
    match t.kind {
        Kind::Heartbeat => encode::heartbeat(shape),
        Kind::ChannelReset => encode::channel_reset(shape, tt, 0x80, 310),
        Kind::SecurityStatus => encode::security_status(
            shape,
            &encode::Status {
                transact_time: tt,
                security_group: if k.is_multiple_of(2) { "ES" } else { "" },
                asset: "ESZ6",
                security_id: (!k.is_multiple_of(3)).then_some(1000 + ki),
                match_event_indicator: 0x80 | (k as u8 & 0x1f),
                trading_status: (k % 4 != 1).then_some(17),
            },
        ),
        Kind::Book => {
            let long = t.id == 64;
            let entries = [
                encode::BookEntry {
                    price: Some(-4_250_000_000 - i64::from(k)),
                    size: Some(if long { 1 << 40 } else { 250 }),
                    security_id: 1000 + ki,
                    rpt_seq: 7 + k,
                    orders: Some(12),
                    level: 1,
                    action: UpdateAction::New,
                    entry_type: EntryType::Bid,
                },
                encode::BookEntry {
                    price: None,
                    size: None,
                    security_id: -3,
                    rpt_seq: u32::MAX,
                    orders: None,
                    level: 10,
                    action: UpdateAction::Unknown(9),
                    entry_type: EntryType::Other(b'Z'),
                },
            ];
            encode::book(t.id, shape, tt, 0x84, &entries[..(k % 3) as usize], 2)
        }
        Kind::Statistics => {
            let orders = if t.groups.len() > 1 { (k % 3) as u8 } else { 0 };
            let entries = [(1000 + ki, 8 + k), (i32::MIN, 0), (5, 9)];
            encode::statistics(t.id, shape, tt, 0x08, &entries[..(k % 4) as usize], orders)
        }
        Kind::Snapshot => {
            let entries = [
                encode::SnapshotEntry {
                    price: Some(4_250_000_000_000),
                    size: Some(40),
                    orders: Some(3),
                    level: Some(1),
                    entry_type: EntryType::Offer,
                },
                encode::SnapshotEntry {
                    price: None,
                    size: None,
                    orders: None,
                    level: None,
                    entry_type: EntryType::Other(b'6'),
                },
                encode::SnapshotEntry {
                    price: Some(-1),
                    size: Some(if t.id == 69 {
                        u64::MAX - 1
                    } else {
                        i32::MAX as u64 - 1
                    }),
                    orders: Some(i32::MIN),
                    level: Some(if t.id == 69 { 254 } else { 126 }),
                    entry_type: EntryType::ImpliedBid,
                },
            ];
            let head = encode::SnapshotRoot {
                last_msg_seq_num_processed: 5000 + k,
                tot_num_reports: 3,
                security_id: 1000 + ki,
                rpt_seq: 77 + k,
                transact_time: tt,
                trading_status: k.is_multiple_of(2).then_some(21),
            };
            encode::snapshot(t.id, shape, &head, &entries[..(k % 4) as usize])
        }
        Kind::Definition => {
            let d = encode::Instrument {
                match_event_indicator: 0x80,
                tot_num_reports: (k % 2 == 1).then_some(420),
                security_update_action: b"AMD"[(k % 3) as usize],
                trading_status: k.is_multiple_of(3).then_some(2),
                appl_id: 310,
                security_group: "ES",
                asset: "ES",
                symbol: "ESZ6",
                security_id: 1000 + ki,
                min_price_increment: k.is_multiple_of(2).then_some(250_000_000),
                display_factor: 1_000_000_000,
            };
            let feeds = [
                encode::FeedType {
                    md_feed_type: "GBX",
                    market_depth: 10,
                },
                encode::FeedType {
                    md_feed_type: "GBI",
                    market_depth: 2,
                },
            ];
            encode::definition(t.id, shape, &d, (k % 3) as u8, &feeds[..(k % 3) as usize])
        }
        Kind::Mbo | Kind::Skipped | Kind::Unknown => unreachable!("not a template read"),
    }
}

/// Every getter of `m` (but its sizes and version, which a shape changes),
/// written out.
pub fn describe(m: &Message<'_>) -> String {
    let mut s = String::new();
    let h = m.header();
    let _ = write!(
        s,
        "{} {:?} {:?} tt={:?} mei={:?} root={} |",
        h.template_id,
        m.kind(),
        m.template().map(|t| t.name),
        m.transact_time(),
        m.match_event_indicator(),
        m.root().len() >= m.template().map_or(0, |t| usize::from(t.root.min)),
    );
    match m.body() {
        Body::ChannelReset(i) | Body::Incremental(i) => {
            let _ = write!(
                s,
                " inc {} tt={} mei={:?} eoe={} n={} mbo={}",
                i.template().id,
                i.transact_time(),
                i.match_event_indicator(),
                i.match_event_indicator().end_of_event(),
                i.entry_count(),
                i.mbo_order_entries()
            );
            for e in i.entries() {
                let _ = write!(s, " [{} {}", e.security_id(), e.rpt_seq());
                if let Some(b) = e.book() {
                    let _ = write!(
                        s,
                        " {} {} {:?} {:?} {:?} {} {:?} {:?}",
                        b.security_id(),
                        b.rpt_seq(),
                        b.price(),
                        b.size(),
                        b.orders(),
                        b.level(),
                        b.action(),
                        b.entry_type()
                    );
                }
                s.push(']');
            }
        }
        Body::Heartbeat => s.push_str(" heartbeat"),
        Body::SecurityStatus(x) => {
            let _ = write!(
                s,
                " status {} {:?} {:?} {:?} {:?} {:?}",
                x.transact_time(),
                x.security_group(),
                x.asset(),
                x.security_id(),
                x.match_event_indicator(),
                x.trading_status()
            );
        }
        Body::Snapshot(x) => {
            let _ = write!(
                s,
                " snapshot {} {} {} {} {} {} {:?} n={}",
                x.template().id,
                x.last_msg_seq_num_processed(),
                x.tot_num_reports(),
                x.security_id(),
                x.rpt_seq(),
                x.transact_time(),
                x.trading_status(),
                x.entry_count()
            );
            for e in x.entries() {
                let _ = write!(
                    s,
                    " [{:?} {:?} {:?} {:?} {:?}]",
                    e.price(),
                    e.size(),
                    e.orders(),
                    e.level(),
                    e.entry_type()
                );
            }
        }
        Body::Definition(d) => {
            let _ = write!(
                s,
                " definition {} {:?} {:?} {} {:?} {} {:?} {:?} {:?} {} {:?} {} events={}",
                d.template().id,
                d.match_event_indicator(),
                d.tot_num_reports(),
                d.security_update_action(),
                d.trading_status(),
                d.appl_id(),
                d.security_group(),
                d.asset(),
                d.symbol(),
                d.security_id(),
                d.min_price_increment(),
                d.display_factor(),
                d.event_count()
            );
            for f in d.feed_types() {
                let _ = write!(s, " [{:?} {}]", f.md_feed_type(), f.market_depth());
            }
        }
        Body::NotRead => s.push_str(" not read"),
    }
    s
}
