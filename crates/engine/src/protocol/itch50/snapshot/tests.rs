//! A feed with `glimpse` driven through the handler as a replay drives
//! it: datagrams of a deterministic day, and snapshot connections as the
//! segments a capture holds. Books are compared with a feed that received
//! the whole day from sequence 1.

use super::super::message::encode;
use super::super::mold::PacketBuilder;
use super::super::summary::FeedSummary;
use super::super::{soup, Session, Side};
use super::*;
use crate::capture::link::Tcp;
use crate::config::Config;
use crate::engine::Segment;
use crate::handler::Handler;
use crate::protocol::Summary;
use crate::symbol::Symbol;
use crate::test_log::logs_of;
use std::collections::BTreeMap;
use std::net::SocketAddrV4;

const S1: Session = Session(*b"20260105XA");
const S2: Session = Session(*b"20260105XB");
/// 2026-01-05 14:30:00 UTC.
const T0: u64 = 1_767_623_400_000_000_000;
const MS: u64 = 1_000_000;
const STOCKS: [&str; 4] = ["AAA", "BBB", "CCC", "DDD"];

fn sym(s: &str) -> Symbol {
    Symbol::parse(s).unwrap()
}

/// The day's message of sequence `q`: system events, a directory of
/// four stocks (DDD gets no trading action), then adds, every third
/// message deleting the order added two sequences before.
fn message(q: u64) -> Vec<u8> {
    let ts = 34_200_000_000_000 + q * 1_000;
    match q {
        1 => encode::system_event(ts, b'O'),
        2..=5 => {
            let l = (q - 1) as u16;
            encode::stock_directory(l, ts, sym(STOCKS[l as usize - 1]))
        }
        6..=8 => {
            let l = (q - 5) as u16;
            encode::trading_action(l, ts, sym(STOCKS[l as usize - 1]), b'T')
        }
        9 => encode::system_event(ts, b'S'),
        _ if q.is_multiple_of(3) && q >= 12 => encode::delete(locate(q - 2), ts, q - 2),
        _ => {
            let side = if q.is_multiple_of(2) {
                Side::Buy
            } else {
                Side::Sell
            };
            let price =
                1_000_000 + (q % 7) as u32 * 100 + if q.is_multiple_of(2) { 0 } else { 5_000 };
            let l = locate(q);
            encode::add_order(
                l,
                ts,
                q,
                side,
                100,
                sym(STOCKS[l as usize - 1]),
                price,
                None,
            )
        }
    }
}

fn locate(q: u64) -> u16 {
    1 + (q % 3) as u16
}

/// What GLIMPSE would send for the state after messages `1..n`, with
/// `n` as End of Snapshot, `A` naming `session`; the spin's messages
/// grouped by type as GLIMPSE sends them, or with `reversed` the groups in
/// the reverse order (each group's messages in their own).
fn spin(n: u64, session: Session, reversed: bool) -> Vec<u8> {
    spin_with(n, session, reversed, &[])
}

/// [`spin`], with `extra` messages sent before End of Snapshot.
fn spin_with(n: u64, session: Session, reversed: bool, extra: &[Vec<u8>]) -> Vec<u8> {
    spin_edited(n, session, reversed, |_| {}, extra)
}

/// [`spin_with`], the live orders (by reference, each its add message)
/// edited by `edit` first.
fn spin_edited(
    n: u64,
    session: Session,
    reversed: bool,
    edit: impl FnOnce(&mut BTreeMap<u64, Vec<u8>>),
    extra: &[Vec<u8>],
) -> Vec<u8> {
    let mut events = Vec::new();
    let mut directory = Vec::new();
    let mut actions = Vec::new();
    let mut orders = BTreeMap::new();
    for q in 1..n {
        let m = message(q);
        match m[0] {
            b'S' => events.push(m),
            b'R' => directory.push(m),
            b'H' => actions.push(m),
            b'A' => {
                orders.insert(q, m);
            }
            b'D' => {
                orders.remove(&(q - 2));
            }
            _ => {}
        }
    }
    edit(&mut orders);
    let mut groups = [directory, actions, events, orders.into_values().collect()];
    if reversed {
        groups.reverse();
    }
    let messages: Vec<Vec<u8>> = groups.into_iter().flatten().collect();
    let mut out = soup::login_accepted(&session.0, 1).to_vec();
    for m in messages.iter().chain(extra) {
        soup::sequenced(m, &mut out);
    }
    soup::sequenced(&end_of_snapshot(n), &mut out);
    out
}

/// `S` packets before `G` in [`spin`]`(n, ..)`.
fn spin_messages(n: u64) -> u64 {
    let bytes = spin(n, S1, false);
    let mut count = 0;
    soup::Reader::new().push(&bytes, |f| {
        count += u64::from(f.kind() == Some(soup::kind::SEQUENCED));
        true
    });
    count - 1
}

fn end_of_snapshot(n: u64) -> Vec<u8> {
    format!("G{n:>20}").into_bytes()
}

fn config(extra: &str) -> Config {
    let text = format!(
        r#"
[[feed]]
name = "nq"
protocol = "itch50"
lines = ["239.9.9.1:9000"]
stale_threshold_ms = 1000
source_threshold_ms = 1000
join_gap_max = 10
gap_timeout_ms = 5
glimpse = "127.0.0.1:18100"
glimpse_user = "tgsim"
glimpse_password_env = "TG_TEST_NEVER_READ"
{extra}
"#
    );
    Config::parse(&text, "t").unwrap()
}

/// A handler with one feed, and the segments of its connections.
struct Venue {
    h: Handler,
    t: u64,
    local: SocketAddrV4,
    /// TCP sequence of the server's next byte.
    seq: u32,
}

impl Venue {
    fn new(extra: &str) -> Venue {
        Venue {
            h: Handler::new(&config(extra)),
            t: T0,
            local: "127.0.0.1:40000".parse().unwrap(),
            seq: 1_000,
        }
    }

    fn tick(&mut self) -> u64 {
        self.t += 10_000;
        self.t
    }

    fn datagram_of(&mut self, session: Session, q: u64) {
        let mut b = PacketBuilder::new(session, q);
        b.message(&message(q));
        let t = self.tick();
        let _ = self.h.on_datagram_line(0, 0, &b.finish(), t);
    }

    fn datagrams(&mut self, qs: std::ops::Range<u64>) {
        for q in qs {
            self.datagram_of(S1, q);
        }
    }

    fn segment(&mut self, from_server: bool, flags: u8, payload: &[u8]) {
        let seq = if from_server { self.seq } else { 7 };
        let segment = Segment {
            local: self.local,
            from_server,
            seq,
            flags,
            payload,
        };
        let t = self.tick();
        self.h.on_segment(0, &segment, t);
        if from_server {
            self.seq = self.seq.wrapping_add(payload.len() as u32);
        }
    }

    /// A connection: our SYN, the server's bytes in `chunks` pieces,
    /// then the server's FIN (when `fin`).
    /// A new connection from the next local port: our SYN.
    fn connect(&mut self) {
        self.local.set_port(self.local.port() + 1);
        self.segment(false, Tcp::SYN, b"");
    }

    fn connection(&mut self, bytes: &[u8], chunks: usize, fin: bool) {
        self.connect();
        for c in bytes.chunks(bytes.len().div_ceil(chunks).max(1)) {
            self.segment(true, Tcp::ACK | Tcp::PSH, c);
        }
        if fin {
            self.segment(true, Tcp::FIN | Tcp::ACK, b"");
        }
    }

    fn expire(&mut self, t: u64) {
        self.t = self.t.max(t);
        self.h.before_check(0, t);
    }

    fn summary(&mut self) -> FeedSummary {
        summary_of(&mut self.h)
    }
}

/// The summary of `h`'s feed `nq`.
fn summary_of(h: &mut Handler) -> FeedSummary {
    match h.summaries().remove("nq") {
        Some(Summary::Itch50(s)) => s,
        _ => panic!("no itch50 summary"),
    }
}

/// The books after the whole day `1..n` from sequence 1.
fn reference(n: u64) -> FeedSummary {
    let mut v = Venue::new("");
    v.datagrams(1..n);
    v.summary()
}

fn snap(s: &FeedSummary) -> &crate::protocol::itch50::summary::SnapshotSummary {
    s.snapshot.as_deref().expect("a feed with glimpse")
}

/// Joined mid-session: awaiting, suspect; the spin (in three reads) is
/// merged at N; the held messages below N are discarded, those from N on
/// applied; the books are the venue's, DDD (a directory and no trading
/// action) without a trading state.
#[test]
fn a_join_merges_a_snapshot_and_the_books_are_the_venues() {
    let mut v = Venue::new("");
    v.datagrams(100..150);
    let s = v.summary();
    assert!(s.suspect && s.joined && snap(&s).snapshot_state == "awaiting");
    assert!(s.symbols.values().all(|x| x.orders == 0) || s.symbols.is_empty());
    v.connection(&spin(120, S1, false), 3, true);
    let s = v.summary();
    let sn = snap(&s);
    assert_eq!(sn.snapshot_state, "idle");
    assert_eq!((sn.snapshots, sn.snapshot_attempts), (1, 1));
    assert_eq!(sn.snapshot_discarded, 20);
    assert_eq!(sn.snapshot_next, Some(120));
    assert_eq!(sn.snapshot_session.as_deref(), Some("20260105XA"));
    assert_eq!(sn.snapshot_messages, spin_messages(120));
    assert!(!s.suspect && !s.joined);
    assert_eq!(s.next, Some(150));
    v.datagrams(150..200);
    let s = v.summary();
    assert_eq!(s.symbols, reference(200).symbols);
    assert_eq!(s.symbols["DDD"].trading_state, None);
    assert_eq!(s.symbols["AAA"].trading_state.as_deref(), Some("T"));
    assert_eq!((s.ticks_lost, s.suspect, s.hours), (0, false, "open"));
}

/// The merged locate map is the spin's, plus the stream's mappings of
/// locates the spin lacks (glimpse G3.4 step 1): a locate the spin maps
/// to another stock than the stream did sends the next add to the spin's
/// stock.
#[test]
fn a_merged_spins_locate_mapping_wins_over_the_streams() {
    let mut v = Venue::new("");
    v.datagrams(1..50);
    let remap = encode::stock_directory(1, 34_200_000_000_000, sym("EEE"));
    v.connection(&spin_with(50, S1, false, &[remap]), 1, true);
    let s = v.summary();
    assert_eq!(snap(&s).snapshots, 1);
    assert_eq!(s.symbols.get("EEE").map_or(0, |x| x.orders), 0);
    let (aaa, bbb) = (s.symbols["AAA"].orders, s.symbols["BBB"].orders);
    // 50: an add on locate 1 (its message names AAA: the locate decides).
    let add = |q: u64, l: u16| {
        let ts = 34_200_000_000_000 + q * 1_000;
        encode::add_order(l, ts, q, Side::Buy, 100, sym("AAA"), 1_000_000, None)
    };
    let mut b = PacketBuilder::new(S1, 50);
    b.message(&add(50, 1));
    b.message(&add(51, 2));
    let t = v.tick();
    let _ = v.h.on_datagram_line(0, 0, &b.finish(), t);
    let s = v.summary();
    assert_eq!(s.symbols["EEE"].orders, 1, "{:?}", s.symbols);
    // The stream's mappings of locates the spin maps alike stay: 2 is BBB's.
    assert_eq!(s.symbols["BBB"].orders, bbb + 1, "{:?}", s.symbols);
    assert_eq!(s.symbols["AAA"].orders, aaa, "{:?}", s.symbols);
}

/// The spin's messages are not the stream's (glimpse G3.3): merged, they
/// change no counter of it (`messages_by_type` holds only the multicast
/// applied from N: 120..150, adds and deletes, no `R`, `H` or `S` of the
/// spin), and the spin's bytes, though later than every datagram, prove
/// nothing alive.
#[test]
fn a_spin_changes_no_count_and_no_liveness_of_the_feed() {
    use crate::verdict::Reasons;
    let mut v = Venue::new("");
    v.datagrams(100..150);
    let last = v.t;
    let before = v.summary();
    assert!(before.messages_by_type.is_empty());
    v.connection(&spin(120, S1, false), 3, true);
    let s = v.summary();
    assert_eq!(snap(&s).snapshots, 1);
    assert_eq!(s.messages_by_type.values().sum::<u64>(), 30);
    assert!(
        s.messages_by_type.keys().all(|k| k == "A" || k == "D"),
        "{:?}",
        s.messages_by_type
    );
    assert_eq!(
        (s.messages, s.anomalies, s.unknown_orders, s.duplicates),
        (before.messages, 0, 0, before.duplicates)
    );
    let stale = |v: &mut Venue, t| v.h.verdict(0, sym("CCC"), t).contains(Reasons::STALE);
    assert!(!v.h.verdict(0, sym("CCC"), last).contains(Reasons::NO_QUOTE));
    assert!(!stale(&mut v, last + 1_000 * MS));
    assert!(stale(&mut v, last + 1_000 * MS + 1));
}

/// "Spin messages change … [no] itch50-v1 counter" (glimpse G3.4), the
/// spin's own oddities included: an add onto a live reference and a
/// delete of an order never added count in neither the feed's
/// `anomalies` nor its `unknown_orders`.
#[test]
fn a_spins_odd_messages_count_nothing_of_the_feed() {
    let mut v = Venue::new("");
    v.datagrams(100..150);
    let before = v.summary();
    let ts = 34_200_000_000_000 + 120_000;
    let again = encode::add_order(
        locate(11),
        ts,
        11,
        Side::Buy,
        100,
        sym(STOCKS[locate(11) as usize - 1]),
        1_000_000,
        None,
    );
    let unknown = encode::delete(locate(11), ts, 999_999);
    v.connection(&spin_with(120, S1, false, &[again, unknown]), 3, true);
    let s = v.summary();
    assert_eq!(snap(&s).snapshots, 1);
    assert_eq!(
        (s.anomalies, s.unknown_orders),
        (before.anomalies, before.unknown_orders)
    );
}

/// "Spin messages change neither `source_watermark`, offset, …" (glimpse
/// G3.4): a spin whose messages are stamped an hour past the multicast's
/// leaves the feed's clock offset as the multicast set it.
#[test]
fn a_spin_changes_no_clock_offset() {
    let mut v = Venue::new("clock_offset = \"auto\"");
    v.datagrams(100..150);
    let before = v.h.offset(0);
    let hour = 3_600_000_000_000;
    let late = encode::add_order(
        1,
        34_200_000_000_000 + 120_000 + hour,
        1_000_000,
        Side::Buy,
        100,
        sym(STOCKS[0]),
        1_000_000,
        None,
    );
    v.connection(&spin_with(120, S1, false, &[late]), 1, true);
    let s = v.summary();
    assert_eq!(snap(&s).snapshots, 1);
    assert_eq!(v.h.offset(0), before);
}

/// A spin may carry order changes the GLIMPSE message list does not name
/// (executions, cancels, deletes, replaces, glimpse G2): each is applied
/// to the staged books as the stream would apply it. A spin whose live
/// orders are followed by a `D`, a `U`, and an `E` of 40 shares or an `X`
/// of 30 on each of the others gives the books of a spin that sends the
/// orders as those left them, and not those of the spin without them.
/// (The books compared are each symbol's top, its size summed over the
/// level's orders, and its count of orders: partial executions and
/// cancels show in the sizes.)
#[test]
fn a_spin_applies_the_order_changes_it_carries() {
    let ts = |q: u64| 34_200_000_000_000 + q * 1_000;
    // Order `q`'s add, with another size, reference or price.
    let add = |q: u64, shares: u32, reference: u64, price: Option<u32>| {
        let m = message(q);
        let side = if m[19] == b'B' { Side::Buy } else { Side::Sell };
        let price = price.unwrap_or(u32::from_be_bytes(m[32..36].try_into().unwrap()));
        let stock = sym(STOCKS[locate(q) as usize - 1]);
        encode::add_order(
            locate(q),
            ts(q),
            reference,
            side,
            shares,
            stock,
            price,
            None,
        )
    };
    // The orders live at 120 (each never deleted by the stream after).
    let mut live = Vec::new();
    spin_edited(120, S1, false, |o| live.extend(o.keys().copied()), &[]);
    assert!(live.len() > 20, "{live:?}");
    let (deleted, replaced, rest) = (live[0], live[1], &live[2..]);
    let mut changes = vec![
        encode::delete(locate(deleted), ts(deleted), deleted),
        encode::replace(
            locate(replaced),
            ts(replaced),
            replaced,
            1_000_020,
            50,
            1_234_500,
        ),
    ];
    for (k, &q) in rest.iter().enumerate() {
        changes.push(match k % 2 {
            0 => encode::executed(locate(q), ts(q), q, 40, 1),
            _ => encode::cancel(locate(q), ts(q), q, 30),
        });
    }
    let books = |spin: &[u8]| {
        let mut v = Venue::new("");
        v.datagrams(100..150);
        v.connection(spin, 2, true);
        let s = v.summary();
        assert_eq!(snap(&s).snapshots, 1);
        v.datagrams(150..200);
        v.summary().symbols
    };
    let carried = books(&spin_with(120, S1, false, &changes));
    let left = books(&spin_edited(
        120,
        S1,
        false,
        |orders| {
            orders.remove(&deleted);
            orders.remove(&replaced);
            orders.insert(1_000_020, add(replaced, 50, 1_000_020, Some(1_234_500)));
            for (k, &q) in rest.iter().enumerate() {
                orders.insert(q, add(q, [60, 70][k % 2], q, None));
            }
        },
        &[],
    ));
    assert_eq!(carried, left);
    assert_ne!(carried, books(&spin(120, S1, false)));
}

/// A capture of a join without the snapshot connection (recorded
/// without `--record`'s wire, or cut) replays as a spin that never came
/// (glimpse G5): the feed ends awaiting and suspect, every message held
/// behind the join and none applied, so a check of a stock finds no
/// book.
#[test]
fn a_capture_without_the_snapshot_stream_replays_as_a_spin_never_come() {
    use crate::capture::link::Link;
    use crate::capture::write::{CaptureWriter, Format};
    use crate::capture::CaptureReader;
    let config = config("");
    let mut w = CaptureWriter::new(Vec::new(), Format::PcapNanos, Link::RawIp).unwrap();
    let line: SocketAddrV4 = "239.9.9.1:9000".parse().unwrap();
    let from: SocketAddrV4 = "127.0.0.1:1".parse().unwrap();
    for q in 100..150 {
        let mut b = PacketBuilder::new(S1, q);
        b.message(&message(q));
        w.write_udp(T0 + q * MS, from, line, &b.finish()).unwrap();
    }
    let bytes = w.finish().unwrap();
    let mut capture =
        CaptureReader::from_reader("cut", Box::new(std::io::Cursor::new(bytes))).unwrap();
    let check = crate::replay::Check {
        time_ns: T0 + 200 * MS,
        feed: "nq".into(),
        symbol: "AAA".into(),
    };
    let out = crate::replay::replay(&config, &mut capture, &[check], |_| {});
    let Some(Summary::Itch50(s)) = out.summary.feeds.get("nq") else {
        panic!("no itch50 summary");
    };
    let sn = snap(s);
    assert_eq!(sn.snapshot_state, "awaiting");
    assert_eq!((sn.snapshots, sn.snapshot_attempts), (0, 0));
    assert!(s.suspect && s.joined);
    assert_eq!(s.held, 50, "every message held behind the join");
    assert!(s.symbols.values().all(|x| x.orders == 0), "{:?}", s.symbols);
    // No book: `no_quote` alone (glimpse G7.11).
    assert_eq!(out.answers[0].reasons.to_string(), "no_quote");
}

/// "`replay` routes an IPv4 TCP segment to the feed whose `glimpse` is its
/// source or destination" (glimpse G5): of two feeds joined mid-session,
/// each with its own server, the spin of the second's server merges into
/// the second alone; the first stays awaiting, its books not replaced; a
/// segment between two other ends goes to neither.
#[test]
fn a_recorded_spin_goes_to_the_feed_of_its_server_only() {
    use crate::capture::link::Link;
    use crate::capture::write::{CaptureWriter, Format};
    use crate::capture::CaptureReader;
    let feed = |name: &str, line: &str, server: &str| {
        format!(
            "[[feed]]\nname = \"{name}\"\nprotocol = \"itch50\"\nlines = [\"{line}\"]\n\
             stale_threshold_ms = 1000\nsource_threshold_ms = 1000\njoin_gap_max = 10\n\
             gap_timeout_ms = 5\nglimpse = \"{server}\"\nglimpse_user = \"tgsim\"\n\
             glimpse_password_env = \"TG_TEST_NEVER_READ\"\nmax_symbols = 100\n"
        )
    };
    let text = feed("nq", "239.9.9.1:9000", "127.0.0.1:18100")
        + &feed("nq2", "239.9.9.2:9000", "127.0.0.1:18101");
    let config = Config::parse(&text, "t").unwrap();
    let mut w = CaptureWriter::new(Vec::new(), Format::PcapNanos, Link::RawIp).unwrap();
    let from: SocketAddrV4 = "127.0.0.1:1".parse().unwrap();
    let mut t = T0;
    for line in ["239.9.9.1:9000", "239.9.9.2:9000"] {
        let line: SocketAddrV4 = line.parse().unwrap();
        for q in 100..150 {
            let mut b = PacketBuilder::new(S1, q);
            b.message(&message(q));
            t += MS;
            w.write_udp(t, from, line, &b.finish()).unwrap();
        }
    }
    // The second feed's connection: our SYN, the spin, the server's FIN.
    let (local, server): (SocketAddrV4, SocketAddrV4) = (
        "127.0.0.1:40001".parse().unwrap(),
        "127.0.0.1:18101".parse().unwrap(),
    );
    t += MS;
    w.write_tcp(t, local, server, 7, Tcp::SYN, b"").unwrap();
    let mut seq = 1_000u32;
    for chunk in spin(120, S1, false).chunks(700) {
        t += MS;
        w.write_tcp(t, server, local, seq, Tcp::ACK | Tcp::PSH, chunk)
            .unwrap();
        seq = seq.wrapping_add(chunk.len() as u32);
    }
    t += MS;
    w.write_tcp(t, server, local, seq, Tcp::FIN | Tcp::ACK, b"")
        .unwrap();
    // Between two other ends: no feed's.
    let (x, y): (SocketAddrV4, SocketAddrV4) = (
        "127.0.0.1:5000".parse().unwrap(),
        "127.0.0.1:6000".parse().unwrap(),
    );
    t += MS;
    w.write_tcp(t, x, y, 1, Tcp::ACK | Tcp::PSH, &spin(120, S1, false))
        .unwrap();
    let bytes = w.finish().unwrap();
    let mut capture =
        CaptureReader::from_reader("two", Box::new(std::io::Cursor::new(bytes))).unwrap();
    let out = crate::replay::replay(&config, &mut capture, &[], |_| {});
    let feed = |name: &str| match out.summary.feeds.get(name) {
        Some(Summary::Itch50(s)) => s,
        _ => panic!("no itch50 summary of {name}"),
    };
    let (first, second) = (feed("nq"), feed("nq2"));
    assert_eq!(
        (snap(second).snapshot_state, snap(second).snapshots),
        ("idle", 1),
        "the spin merged into its server's feed"
    );
    assert!(!second.suspect);
    assert_eq!(
        (
            snap(first).snapshot_state,
            snap(first).snapshots,
            snap(first).snapshot_attempts
        ),
        ("awaiting", 0, 0),
        "nothing of it reached the other feed"
    );
    assert!(first.suspect && first.symbols.values().all(|x| x.orders == 0));
}

/// `snapshot_max_messages` as configured bounds a spin (glimpse G4): one
/// message more is `too_large`, not merged; exactly as many merges.
#[test]
fn the_configured_max_messages_bounds_a_spin() {
    let mut v = Venue::new("snapshot_max_messages = 1000");
    v.datagrams(100..110);
    let fill = |n: u64| vec![b"z".to_vec(); n as usize];
    let room = 1000 - spin_messages(105);
    v.connection(&spin_with(105, S1, false, &fill(room + 1)), 2, true);
    let s = v.summary();
    assert_eq!(
        (snap(&s).snapshot_failures["too_large"], snap(&s).snapshots),
        (1, 0)
    );
    v.expire(v.t + 10_000 * MS);
    v.connection(&spin_with(105, S1, false, &fill(room)), 2, true);
    let s = v.summary();
    assert_eq!((snap(&s).snapshots, snap(&s).snapshot_messages), (1, 1000));
}

/// A glimpse feed's summary carries the snapshot keys, and only those,
/// with the failure classes each named (glimpse G4). (A feed without
/// `glimpse` has none of them: the ITCH golden summaries hold that.)
#[test]
fn the_summary_holds_the_snapshot_keys() {
    let mut v = Venue::new("");
    v.datagrams(100..150);
    v.connection(&spin(120, S1, false), 3, true);
    let j = serde_json::to_value(v.summary()).unwrap();
    let want = serde_json::json!({
        "snapshot_state": "idle",
        "snapshots": 1,
        "snapshot_attempts": 1,
        "snapshot_failures": {
            "refused": 0, "rejected": 0, "session": 0, "malformed": 0,
            "too_large": 0, "closed": 0, "abandoned": 0
        },
        "snapshot_gave_up": 0,
        "snapshot_discarded": 20,
        "snapshot_overflow": 0,
        "snapshot_next": 120,
        "snapshot_session": "20260105XA",
        "snapshot_messages": spin_messages(120),
    });
    let got: serde_json::Map<String, serde_json::Value> = j
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with("snapshot"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(serde_json::Value::Object(got), want);
}

/// After a merge the held messages applied raise the source watermark as
/// any applied message does (glimpse G3.4 step 5), and the spin's own
/// messages do not: merged at N above everything received, nothing held
/// is applied and the feed's source age stays what it was.
#[test]
fn a_merge_raises_the_watermark_by_the_held_messages_only() {
    use crate::verdict::Reasons;
    let stale_at_source = |v: &mut Venue| {
        let t = v.t + MS;
        v.h.verdict(0, sym("CCC"), t)
            .contains(Reasons::STALE_AT_SOURCE)
    };
    let mut v = Venue::new("");
    v.datagrams(100..150);
    v.connection(&spin(120, S1, false), 3, true);
    assert!(!stale_at_source(&mut v), "the held 120..150 were applied");
    let mut v = Venue::new("");
    v.datagrams(100..110);
    v.connection(&spin(130, S1, false), 1, true);
    assert_eq!(snap(&v.summary()).snapshots, 1);
    assert!(
        stale_at_source(&mut v),
        "the spin's messages set no source time"
    );
}

/// The spin's order of types does not matter (glimpse G7.12): the books,
/// states, last timestamps and hours merged are the same, with multicast
/// held after N and without any (then every symbol's last timestamp is
/// the spin's: the latest of its messages', not the last one's, which
/// reversed is its directory entry's).
#[test]
fn the_merge_does_not_depend_on_the_order_of_the_spin() {
    for end in [130, 120] {
        let run = |reversed| {
            let mut v = Venue::new("");
            v.datagrams(100..end);
            v.connection(&spin(120, S1, reversed), 5, true);
            let s = v.summary();
            (s.symbols, s.hours)
        };
        let merged = run(false);
        assert_eq!(merged.1, "open");
        assert_eq!(run(true), merged, "multicast up to {end}");
    }
}

/// N above everything received: nothing held is kept, the multicast
/// below N is a duplicate, no gap opens.
#[test]
fn n_above_high_discards_the_held_and_opens_no_gap() {
    let mut v = Venue::new("");
    v.datagrams(100..110);
    v.connection(&spin(130, S1, false), 1, true);
    let s = v.summary();
    assert_eq!(
        (snap(&s).snapshot_discarded, s.gaps_open, s.suspect),
        (10, 0, false)
    );
    assert_eq!(s.next, Some(130));
    v.datagrams(110..140);
    let s = v.summary();
    assert_eq!(s.duplicates, 20);
    assert_eq!(s.symbols, reference(140).symbols);
}

/// N more than `max_held` past everything received (a buggy or hostile
/// server, a stale session) is not merged: every multicast packet below it
/// would be a duplicate, the feed deaf for the rest of the session. It
/// fails as `malformed`, the feed goes on awaiting, and the next attempt
/// merges; N exactly `max_held` past is merged.
#[test]
fn n_beyond_max_held_past_high_is_refused_and_retried() {
    let far = |n: u64| {
        let mut out = soup::login_accepted(&S1.0, 1).to_vec();
        soup::sequenced(&end_of_snapshot(n), &mut out);
        out
    };
    let mut v = Venue::new("max_held = 50");
    let log = logs_of(|| {
        v.datagrams(100..110);
        v.connection(&far(u64::MAX), 1, true);
        v.t += 2_000 * MS;
        v.connection(&spin(161, S1, false), 2, true);
    });
    // Each logged with the N it named.
    assert_eq!(
        failure_details(&log),
        [
            format!("End of Snapshot far ahead of the stream: {}", u64::MAX),
            "End of Snapshot far ahead of the stream: 161".to_string(),
        ],
        "{log}"
    );
    let s = v.summary();
    let sn = snap(&s);
    assert_eq!((sn.snapshot_failures["malformed"], sn.snapshots), (2, 0));
    assert_eq!((sn.snapshot_state, sn.snapshot_next), ("awaiting", None));
    assert_eq!((s.suspect, s.duplicates), (true, 0));
    v.datagrams(110..120);
    v.connection(&spin(115, S1, false), 1, true);
    let s = v.summary();
    let sn = snap(&s);
    assert_eq!((sn.snapshots, sn.snapshot_next), (1, Some(115)));
    assert_eq!((s.suspect, s.next, s.gaps_open), (false, Some(120), 0));
    v.datagrams(120..130);
    assert_eq!(v.summary().symbols, reference(130).symbols);
    // Within reach: high 110 and `max_held` 50 take N = 160.
    let mut v = Venue::new("max_held = 50");
    v.datagrams(100..110);
    v.connection(&spin(160, S1, false), 1, true);
    let s = v.summary();
    assert_eq!((snap(&s).snapshots, s.next), (1, Some(160)));
}

/// Held from above N: `[N, first held)` is a gap, filled by the line (or
/// the recovery channel), and the feed is trusted.
#[test]
fn held_above_n_opens_a_gap_that_fills() {
    let mut v = Venue::new("");
    v.datagrams(100..120);
    v.connection(&spin(90, S1, false), 2, true);
    let s = v.summary();
    assert_eq!((s.gaps_open, s.suspect, s.next), (1, true, Some(90)));
    v.datagrams(90..100);
    let s = v.summary();
    assert_eq!(
        (s.gaps_open, s.suspect, s.recovered, s.ticks_lost),
        (0, false, 10, 0)
    );
    v.datagrams(120..130);
    assert_eq!(v.summary().symbols, reference(130).symbols);
}

/// The gap a merge opened, given up, is a `gap` trigger: a second
/// snapshot cures the feed; the lost messages are counted.
#[test]
fn a_merge_gap_given_up_takes_a_second_snapshot() {
    let mut v = Venue::new("");
    v.datagrams(100..120);
    v.connection(&spin(90, S1, false), 1, true);
    v.expire(v.t + 6 * MS);
    let s = v.summary();
    assert_eq!((s.ticks_lost, snap(&s).snapshot_state), (10, "awaiting"));
    v.datagrams(120..125);
    v.connection(&spin(125, S1, false), 1, true);
    let s = v.summary();
    assert_eq!(
        (snap(&s).snapshots, snap(&s).snapshot_attempts, s.suspect),
        (2, 2, false)
    );
    v.datagrams(125..140);
    assert_eq!(v.summary().symbols, reference(140).symbols);
}

/// A merge takes each symbol's operational halt from the snapshot
/// (glimpse G3.4), as it takes the book: CCC, halted by an `h` in the
/// first spin, is `halted` after it; the second snapshot, which carries
/// none, lifts it.
#[test]
fn a_merge_takes_the_snapshots_operational_halts() {
    let halted = |v: &mut Venue| {
        let t = v.t;
        v.h.verdict(0, sym("CCC"), t)
            .contains(crate::verdict::Reasons::HALTED)
    };
    let mut v = Venue::new("");
    v.datagrams(100..120);
    assert!(!halted(&mut v));
    let halt = encode::operational_halt(3, 34_200_000_089_500, sym("CCC"), b'Q', b'H');
    v.connection(&spin_with(90, S1, false, &[halt]), 1, true);
    assert_eq!(snap(&v.summary()).snapshots, 1);
    assert!(halted(&mut v));
    v.expire(v.t + 6 * MS);
    assert_eq!(snap(&v.summary()).snapshot_state, "awaiting");
    v.datagrams(120..125);
    v.connection(&spin(125, S1, false), 1, true);
    assert_eq!(snap(&v.summary()).snapshots, 2);
    assert!(!halted(&mut v));
}

/// A login rejected as not authorized gives up at once: the feed stays
/// suspect and no trigger starts another wait until a merge or a new
/// session.
#[test]
fn rejected_not_authorized_gives_up_and_stops_triggers() {
    let mut v = Venue::new("");
    v.datagrams(100..110);
    v.connection(&soup::login_rejected(soup::NOT_AUTHORIZED), 1, true);
    let s = v.summary();
    let sn = snap(&s);
    assert_eq!(
        (sn.snapshot_failures["rejected"], sn.snapshot_gave_up),
        (1, 1)
    );
    assert_eq!(
        (sn.snapshot_state, s.suspect, s.next),
        ("idle", true, Some(110))
    );
    // The held messages were released: applied in order.
    assert_eq!(s.gaps_open, 0);
    // A gap given up now starts nothing.
    v.datagrams(112..114);
    v.expire(v.t + 6 * MS);
    assert_eq!(snap(&v.summary()).snapshot_state, "idle");
}

/// Rejected `S` (session not available) twice, merged at attempt 3; the
/// attempts are spaced by the backoff.
#[test]
fn rejected_session_not_available_retries() {
    let mut v = Venue::new("snapshot_retry_ms = 100\nsnapshot_max_attempts = 3");
    v.datagrams(100..110);
    for _ in 0..2 {
        v.connection(&soup::login_rejected(soup::SESSION_NOT_AVAILABLE), 1, true);
    }
    assert_eq!(snap(&v.summary()).snapshot_state, "awaiting");
    v.connection(&spin(105, S1, false), 1, true);
    let s = v.summary();
    let sn = snap(&s);
    assert_eq!(
        (
            sn.snapshot_failures["rejected"],
            sn.snapshots,
            sn.snapshot_attempts
        ),
        (2, 1, 3)
    );
    // Spacing: min(retry × 2^(k−2), retry_max) after attempt k−1 failed.
    let st = Settings {
        max_attempts: 8,
        retry_ns: 100 * MS,
        retry_max_ns: 250 * MS,
    };
    assert_eq!(
        (2..=6).map(|k| st.backoff(k) / MS).collect::<Vec<_>>(),
        [100, 200, 250, 250, 250]
    );
    assert_eq!(st.backoff(200), 250 * MS);
}

/// A connection that drops mid-spin leaves no mixed books: the feed's
/// books stay as they were until a whole snapshot merges.
#[test]
fn a_drop_mid_spin_merges_nothing() {
    let mut v = Venue::new("");
    v.datagrams(100..110);
    let bytes = spin(105, S1, false);
    v.connection(&bytes[..bytes.len() / 2], 2, true);
    let s = v.summary();
    let sn = snap(&s);
    assert_eq!((sn.snapshot_failures["closed"], sn.snapshots), (1, 0));
    assert!(s.symbols.values().all(|x| x.orders == 0));
    // A reset mid-spin likewise.
    v.connect();
    v.segment(true, Tcp::ACK, &bytes[..100]);
    v.segment(true, Tcp::RST, b"");
    assert_eq!(snap(&v.summary()).snapshot_failures["closed"], 2);
    v.connection(&bytes, 4, true);
    v.datagrams(110..120);
    assert_eq!(v.summary().symbols, reference(120).symbols);
}

/// Bytes missing from a recorded connection end it as `closed`; bytes
/// sent twice are read once.
#[test]
fn recorded_bytes_are_put_together_by_sequence() {
    let mut v = Venue::new("");
    v.datagrams(100..110);
    let bytes = spin(105, S1, false);
    v.connect();
    let start = v.seq;
    v.segment(true, Tcp::ACK, &bytes[..200]);
    // A retransmission of bytes 100..300, then the rest.
    v.seq = start.wrapping_add(100);
    v.segment(true, Tcp::ACK, &bytes[100..300]);
    v.segment(true, Tcp::ACK, &bytes[300..]);
    assert_eq!(snap(&v.summary()).snapshots, 1);
    // A hole.
    let mut v = Venue::new("");
    v.datagrams(100..110);
    v.connect();
    v.segment(true, Tcp::ACK, &bytes[..100]);
    v.seq = v.seq.wrapping_add(10);
    v.segment(true, Tcp::ACK, &bytes[110..]);
    let s = v.summary();
    assert_eq!(
        (snap(&s).snapshot_failures["closed"], snap(&s).snapshots),
        (1, 0)
    );
}

/// `A` naming another session fails as `session` while checked; with the
/// check off the snapshot merges, and the summary shows the session `A`
/// named, trimmed of its padding (glimpse G4).
#[test]
fn another_session_fails_while_checked() {
    let mut v = Venue::new("");
    v.datagrams(100..110);
    v.connection(&spin(105, S2, false), 1, true);
    assert_eq!(snap(&v.summary()).snapshot_failures["session"], 1);
    let mut v = Venue::new("glimpse_session_check = false");
    v.datagrams(100..110);
    v.connection(&spin(105, Session(*b"  ABC  \0\0 "), false), 1, true);
    let s = v.summary();
    assert_eq!(snap(&s).snapshots, 1);
    assert_eq!(snap(&s).snapshot_session.as_deref(), Some("ABC"));
}

/// A connection starts at our SYN or at the server's first segment to a
/// new local end (a capture begun after the SYN); one to another local
/// end while a connection is open ends that one as `closed` (glimpse G5).
#[test]
fn a_connection_starts_at_the_servers_first_segment_to_a_new_end() {
    let mut v = Venue::new("");
    v.datagrams(100..110);
    // No SYN: the server's bytes to a new end, then its FIN.
    v.local.set_port(v.local.port() + 1);
    let bytes = spin(105, S1, false);
    let (first, rest) = bytes.split_at(bytes.len() / 2);
    v.segment(true, Tcp::ACK | Tcp::PSH, first);
    v.segment(true, Tcp::ACK | Tcp::PSH, rest);
    v.segment(true, Tcp::FIN | Tcp::ACK, b"");
    let s = v.summary();
    assert_eq!((snap(&s).snapshot_attempts, snap(&s).snapshots), (1, 1));

    // Half a spin on one end, then a whole one on another, SYN-less.
    let mut v = Venue::new("");
    v.datagrams(100..110);
    v.connection(first, 1, false);
    v.local.set_port(v.local.port() + 1);
    v.segment(true, Tcp::ACK | Tcp::PSH, &bytes);
    v.segment(true, Tcp::FIN | Tcp::ACK, b"");
    let s = v.summary();
    let sn = snap(&s);
    assert_eq!((sn.snapshot_attempts, sn.snapshots), (2, 1));
    assert_eq!(sn.snapshot_failures["closed"], 1);
}

/// Our SYN sent again (its answer lost) is the same connection, not a
/// second one failing the first; a late server segment to an earlier
/// connection's end starts nothing and fails nothing (glimpse G5: one
/// connection from our SYN, or from the server's first segment to a *new*
/// end).
#[test]
fn a_resent_syn_or_a_late_segment_to_an_earlier_end_is_no_new_connection() {
    let bytes = spin(105, S1, false);
    let mut v = Venue::new("snapshot_max_attempts = 1");
    v.datagrams(100..110);
    v.connect();
    v.segment(false, Tcp::SYN, b"");
    v.segment(true, Tcp::ACK | Tcp::PSH, &bytes);
    v.segment(true, Tcp::FIN | Tcp::ACK, b"");
    let s = v.summary();
    let sn = snap(&s);
    assert_eq!((sn.snapshot_attempts, sn.snapshots), (1, 1));
    assert_eq!(sn.snapshot_failures["closed"], 0);
    assert_eq!(sn.snapshot_gave_up, 0);

    // Half a spin on one end; a whole one on the next, a late segment of
    // the first coming in the middle of it.
    let mut v = Venue::new("");
    v.datagrams(100..110);
    v.connection(&bytes[..bytes.len() / 2], 1, false);
    let first = v.local;
    let first_seq = v.seq;
    v.connect();
    let (a, b) = bytes.split_at(bytes.len() / 3);
    v.segment(true, Tcp::ACK | Tcp::PSH, a);
    let (second, second_seq) = (v.local, v.seq);
    (v.local, v.seq) = (first, first_seq);
    v.segment(true, Tcp::ACK | Tcp::PSH, &bytes[bytes.len() / 2..]);
    (v.local, v.seq) = (second, second_seq);
    v.segment(true, Tcp::ACK | Tcp::PSH, b);
    v.segment(true, Tcp::FIN | Tcp::ACK, b"");
    let s = v.summary();
    let sn = snap(&s);
    assert_eq!((sn.snapshot_attempts, sn.snapshots), (2, 1));
    assert_eq!(sn.snapshot_failures["closed"], 1);
}

/// Our FIN before the end (a timer fired live): `refused` without a
/// byte, `closed` after some.
#[test]
fn our_close_before_the_end_is_a_timeout() {
    let mut v = Venue::new("");
    v.datagrams(100..110);
    v.connect();
    v.segment(false, Tcp::FIN, b"");
    v.connection(&spin(105, S1, false)[..50], 1, false);
    v.segment(false, Tcp::FIN, b"");
    let s = v.summary();
    let f = &snap(&s).snapshot_failures;
    assert_eq!((f["refused"], f["closed"]), (1, 1));
}

/// While awaiting, more than `max_held` held: the lowest are discarded
/// and counted.
#[test]
fn held_beyond_max_held_while_awaiting_overflow() {
    let mut v = Venue::new("max_held = 5");
    v.datagrams(100..110);
    let s = v.summary();
    assert_eq!((snap(&s).snapshot_overflow, s.next), (5, Some(105)));
}

/// A new session while awaiting abandons the wait; the connection's end
/// is not counted. One joined mid-way waits anew: the old connection's
/// spin, closed with the old wait, is not merged into it.
#[test]
fn a_new_session_abandons_the_wait() {
    for (first, state, next) in [(1, "idle", Some(2)), (50_000, "awaiting", Some(50_000))] {
        let mut v = Venue::new("");
        v.datagrams(100..110);
        v.connect();
        v.datagram_of(S2, first);
        v.segment(true, Tcp::ACK, &spin(105, S1, false));
        let s = v.summary();
        let sn = snap(&s);
        assert_eq!(
            (
                sn.snapshot_failures["abandoned"],
                sn.snapshots,
                sn.snapshot_state
            ),
            (1, 0, state)
        );
        assert_eq!((s.session_changes, s.next), (1, next), "from {first}");
    }
}

/// An end of session while awaiting closes the hours, and they stay
/// closed through the merge (glimpse G7.3); a spin without a system
/// event leaves the hours as they were.
#[test]
fn hours_closed_while_awaiting_stay_closed() {
    let mut v = Venue::new("");
    v.datagrams(100..110);
    let t = v.tick();
    let _ =
        v.h.on_datagram_line(0, 0, &PacketBuilder::end_of_session(S1, 110), t);
    v.connection(&spin(105, S1, false), 1, true);
    assert_eq!(v.summary().hours, "closed");
}

/// The same when the end of session that starts the wait is the first
/// packet of a new session (joined past `join_gap_max`): the hours stay
/// closed through a merge whose spin sent the venue's opening events.
#[test]
fn hours_closed_by_a_new_sessions_end_stay_closed() {
    let mut v = Venue::new("");
    v.datagrams(1..30);
    assert_eq!(v.summary().hours, "open");
    let t = v.tick();
    let _ =
        v.h.on_datagram_line(0, 0, &PacketBuilder::end_of_session(S2, 100), t);
    assert_eq!(v.summary().hours, "closed");
    let open = encode::system_event(34_200_000_000_000, b'Q');
    v.connection(&spin_with(100, S2, false, &[open]), 1, true);
    let s = v.summary();
    assert_eq!((snap(&s).snapshots, s.hours), (1, "closed"));
}

/// The hours after a merge are the spin's when it sent a system event,
/// else the feed's as they were (glimpse G3.4 step 1): an open feed takes
/// a spin's end of system hours; a closed one keeps its hours through a
/// spin without any system event.
#[test]
fn the_hours_are_the_spins_only_when_it_sent_a_system_event() {
    let ts = 34_200_000_000_000 + 40_000;
    // Open, then a spin ending with an end of system hours.
    let mut v = Venue::new("");
    v.datagrams(1..30);
    assert_eq!(v.summary().hours, "open");
    let end = encode::system_event(ts, b'E');
    v.connection(
        &spin_with(30, S1, false, std::slice::from_ref(&end)),
        1,
        true,
    );
    let s = v.summary();
    assert_eq!((snap(&s).snapshots, s.hours), (1, "closed"));
    // Closed by the stream, then a spin of the directory alone.
    let mut v = Venue::new("");
    v.datagrams(1..30);
    let mut b = PacketBuilder::new(S1, 30);
    b.message(&end);
    let t = v.tick();
    let _ = v.h.on_datagram_line(0, 0, &b.finish(), t);
    assert_eq!(v.summary().hours, "closed");
    let mut directory = soup::login_accepted(&S1.0, 1).to_vec();
    for q in 2..=5 {
        soup::sequenced(&message(q), &mut directory);
    }
    soup::sequenced(&end_of_snapshot(31), &mut directory);
    v.connection(&directory, 1, true);
    let s = v.summary();
    assert_eq!((snap(&s).snapshots, s.hours), (1, "closed"));
}

/// A connection while idle is an operator's request (replay): the feed
/// starts awaiting at its SYN.
#[test]
fn a_connection_while_idle_is_an_operators_request() {
    let mut v = Venue::new("snapshot_triggers = []");
    v.datagrams(1..30);
    let s = v.summary();
    assert_eq!((snap(&s).snapshot_state, s.suspect), ("idle", false));
    v.connect();
    v.datagrams(30..35);
    let s = v.summary();
    assert_eq!((snap(&s).snapshot_state, s.suspect), ("awaiting", true));
    v.segment(true, Tcp::ACK, &spin(32, S1, false));
    v.datagrams(35..40);
    let s = v.summary();
    assert_eq!((snap(&s).snapshots, s.suspect), (1, false));
    assert_eq!(s.symbols, reference(40).symbols);
}

/// A snapshot taken before messages the feed had already applied (an
/// operator's request, the lines running ahead of the spin): its N lies
/// below the stream's next, so the books no longer reflect 20..29, which
/// become a gap (`next` moves back to N), filled by the lines' copies;
/// the books end the venue's. (Kept at the stream's next, the merge would
/// have left 20..29 out of the books, trusted.)
#[test]
fn a_merge_below_what_was_applied_opens_a_gap_over_it() {
    let mut v = Venue::new("snapshot_triggers = []");
    v.datagrams(1..30);
    v.connect();
    v.segment(true, Tcp::ACK, &spin(20, S1, false));
    let s = v.summary();
    assert_eq!(
        (snap(&s).snapshots, s.gaps_open, s.suspect, s.next),
        (1, 1, true, Some(20))
    );
    v.datagrams(20..30);
    let s = v.summary();
    assert_eq!((s.gaps_open, s.suspect, s.ticks_lost), (0, false, 0));
    v.datagrams(30..40);
    assert_eq!(v.summary().symbols, reference(40).symbols);
}

/// An operator's request on a healthy feed, given up (a login rejected
/// as not authorised ends the waits), lost nothing: the feed is whole
/// again, and the log line says so rather than that it stays suspect.
#[test]
fn an_operators_wait_given_up_on_a_healthy_feed_is_logged_whole() {
    let mut v = Venue::new("snapshot_triggers = []");
    let log = logs_of(|| {
        v.datagrams(1..30);
        v.connection(&soup::login_rejected(soup::NOT_AUTHORIZED), 1, true);
        v.datagrams(30..35);
    });
    let s = v.summary();
    assert_eq!((snap(&s).snapshot_gave_up, s.suspect), (1, false), "{log}");
    let given_up: Vec<&str> = log.lines().filter(|l| l.contains("given up")).collect();
    assert_eq!(given_up.len(), 1, "{log}");
    assert!(
        given_up[0].contains("the feed is whole") && !given_up[0].contains("suspect"),
        "{}",
        given_up[0]
    );
}

/// A replayed connection on a quiet feed finds its deadlines run first,
/// as a live cycle does: the gap given up is a `gap` trigger (its ticks
/// lost), not dropped by an operator's request.
#[test]
fn a_segment_runs_the_feeds_deadlines_first() {
    let mut v = Venue::new("");
    v.datagrams(1..5);
    v.datagram_of(S1, 7); // gap [5, 7)
    v.t += 10 * MS;
    v.connect();
    let s = v.summary();
    assert_eq!((s.ticks_lost, snap(&s).snapshot_state), (2, "awaiting"));
    assert_eq!(snap(&s).snapshot_attempts, 1);
}

/// A symbol the spin lacks keeps its locate and name with an empty book,
/// no trading state and no operational halt; a locate the spin did not
/// map keeps its symbol.
#[test]
fn a_symbol_the_spin_lacks_keeps_its_name_and_locate() {
    let mut v = Venue::new("snapshot_triggers = []");
    v.datagrams(1..29);
    // BBB halted by the stream: the snapshot, which lacks it, lifts that.
    let halted = |v: &mut Venue| {
        let t = v.t;
        v.h.verdict(0, sym("BBB"), t)
            .contains(crate::verdict::Reasons::HALTED)
    };
    let mut b = PacketBuilder::new(S1, 29);
    b.message(&encode::operational_halt(
        2,
        34_200_000_029_000,
        sym("BBB"),
        b'Q',
        b'H',
    ));
    let t = v.tick();
    let _ = v.h.on_datagram_line(0, 0, &b.finish(), t);
    assert!(halted(&mut v));
    assert_eq!(
        v.summary().symbols["AAA"].trading_state.as_deref(),
        Some("T")
    );
    // A spin of only AAA's directory and its orders.
    let mut bytes = soup::login_accepted(&S1.0, 1).to_vec();
    soup::sequenced(&message(2), &mut bytes);
    soup::sequenced(&end_of_snapshot(30), &mut bytes);
    v.connection(&bytes, 1, true);
    let s = v.summary();
    assert_eq!(snap(&s).snapshots, 1);
    let bbb = &s.symbols["BBB"];
    assert_eq!(
        (bbb.locate, bbb.orders, bbb.trading_state.as_deref()),
        (2, 0, None)
    );
    assert_eq!(s.symbols["AAA"].orders, 0);
    // AAA's directory without an H: its state is the spin's, none (G3.4
    // step 1), not the stream's "T" from before.
    assert_eq!(s.symbols["AAA"].trading_state, None);
    // Locate 2 still maps to BBB: a message without a stock on it (a
    // delete of an order nobody knows) is BBB's, its time BBB's last.
    let t = v.tick();
    let mut b = PacketBuilder::new(S1, 30);
    b.message(&encode::delete(2, 77_777, 424_242));
    let _ = v.h.on_datagram_line(0, 0, &b.finish(), t);
    assert_eq!(v.summary().symbols["BBB"].last_timestamp, Some(77_777));
    // And an add on it lands in BBB's book.
    let t = v.tick();
    let mut b = PacketBuilder::new(S1, 31);
    b.message(&encode::add_order(
        2,
        1,
        9_999,
        Side::Buy,
        5,
        sym("BBB"),
        100,
        None,
    ));
    let _ = v.h.on_datagram_line(0, 0, &b.finish(), t);
    assert_eq!(v.summary().symbols["BBB"].orders, 1);
    // Quoted again (without a book the verdict is `no_quote` alone), and
    // not halted: the halt went with the rest of the old state.
    assert!(!halted(&mut v), "no halt for a symbol the spin lacks");
}

/// The one "snapshot merged" line of `log`.
fn merged_line(log: &str) -> &str {
    let merged: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("snapshot merged"))
        .collect();
    assert_eq!(merged.len(), 1, "{log}");
    merged[0]
}

/// A spin holding more orders than `max_orders` merges refused: a
/// warning says the feed stays suspect and why, and its refusals are
/// counted in `orders_refused`.
#[test]
fn a_merge_refused_for_room_is_a_warning_and_counted() {
    let mut v = Venue::new("max_orders = 1");
    let log = logs_of(|| {
        v.datagrams(100..110);
        v.connection(&spin(105, S1, false), 1, true);
    });
    let s = v.summary();
    assert_eq!(snap(&s).snapshots, 1);
    assert!(s.suspect && s.orders_refused > 0, "{s:?}");
    let merged = merged_line(&log);
    assert!(
        merged.contains(" WARN ") && merged.contains("the feed stays suspect"),
        "{}",
        merged
    );
}

/// A spin within `max_symbols` whose merge refuses some of the feed's own
/// symbols it lacked (kept with empty books, glimpse G3.4: with its own,
/// more than `max_symbols`) says that, not that the spin held too many.
#[test]
fn a_merge_refused_for_the_symbols_it_kept_says_so() {
    // The day from its start (AAA to DDD listed), then an operator's
    // request answered by a spin of AAA, EEE and FFF.
    let mut v = Venue::new("max_symbols = 4\nsnapshot_triggers = []");
    let ts = 34_200_000_000_000;
    let mut spin = soup::login_accepted(&S1.0, 1).to_vec();
    for (l, s) in [(1, "AAA"), (5, "EEE"), (6, "FFF")] {
        soup::sequenced(&encode::stock_directory(l, ts, sym(s)), &mut spin);
    }
    soup::sequenced(&end_of_snapshot(30), &mut spin);
    let log = logs_of(|| {
        v.datagrams(1..30);
        v.connection(&spin, 1, true);
    });
    let s = v.summary();
    assert_eq!(snap(&s).snapshots, 1);
    assert!(s.suspect, "{s:?}");
    let merged = merged_line(&log);
    assert!(
        merged.contains(" WARN ")
            && merged.contains("the symbols the feed had that it lacks")
            && !merged.contains("it held more"),
        "{}",
        merged
    );
}

/// A spin within `max_orders` whose merge is followed by held messages
/// that pass it: the refusal is the stream's, and the warning says so,
/// not that the spin held too many.
#[test]
fn a_merge_whose_held_messages_pass_max_orders_says_so() {
    let live: u64 = reference(105).symbols.values().map(|s| s.orders).sum();
    let mut v = Venue::new(&format!("max_orders = {live}"));
    let log = logs_of(|| {
        v.datagrams(100..110);
        v.connection(&spin(105, S1, false), 1, true);
    });
    let s = v.summary();
    assert!(s.suspect && s.orders_refused > 0, "{s:?}");
    let merged = merged_line(&log);
    assert!(
        merged.contains(" WARN ") && merged.contains("the messages held while it came"),
        "{}",
        merged
    );
}

/// A BinaryFILE replay ignores `glimpse`: a day from sequence 1 needs
/// no snapshot, and nothing in a file can ask for one.
#[test]
fn a_binaryfile_replay_ignores_glimpse() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("day.bin");
    let mut bytes = Vec::new();
    for q in 1..60 {
        let m = message(q);
        bytes.extend_from_slice(&(m.len() as u16).to_be_bytes());
        bytes.extend_from_slice(&m);
    }
    std::fs::write(&path, bytes).unwrap();
    let date = jiff::civil::date(2026, 1, 5);
    let out =
        crate::replay::itch50::replay_file(&config(""), "nq", date, &path, &[], |_| {}).unwrap();
    let s = match out.summary.feeds.get("nq") {
        Some(Summary::Itch50(s)) => s,
        _ => unreachable!(),
    };
    let sn = snap(s);
    assert_eq!(
        (sn.snapshot_state, sn.snapshot_attempts, s.suspect),
        ("idle", 0, false)
    );
    assert_eq!(s.symbols, reference(60).symbols);
}

/// A merge is logged once, with the feed, N, the spin's `S` packets and
/// the time from the trigger (the join at the first datagram) to the
/// bytes that ended the spin, in ms.
#[test]
fn a_merge_is_logged_with_its_n_messages_and_duration() {
    let mut v = Venue::new("");
    let log = logs_of(|| {
        v.datagrams(100..110);
        let trigger = T0 + 10_000;
        // SYN and the spin in one segment, 10 µs apart each: the merge
        // 2,345.6 ms after the trigger.
        v.t = trigger + 2_345_600 * 1_000 - 20_000;
        v.connection(&spin(105, S1, false), 1, true);
    });
    assert_eq!(snap(&v.summary()).snapshots, 1);
    let line = merged_line(&log);
    assert!(line.contains(" INFO "), "{line}");
    let fields = format!(
        "feed=nq next=105 messages={} duration_ms=2345 unlogged=0",
        spin_messages(105)
    );
    assert!(line.ends_with(&fields), "{fields} in {line}");
    assert!(spin_messages(105) > 1);
}

/// Merges are logged at most once a second, as failures are (glimpse
/// G4): a replay, which has no timer to space the attempts, of merges
/// 10 ms apart logs the first, and the rest as a count at the next
/// datagram once the second has passed.
#[test]
fn merges_are_logged_at_a_limited_rate() {
    let mut v = Venue::new("");
    let log = logs_of(|| {
        v.datagrams(100..110);
        v.connection(&spin(105, S1, false), 1, true);
        for next in [110, 110] {
            // An operator's request (our SYN while idle), then the spin.
            v.t += 10 * MS;
            v.connection(&spin(next, S1, false), 1, true);
        }
    });
    assert_eq!(snap(&v.summary()).snapshots, 3);
    let merged = log
        .lines()
        .filter(|l| l.contains("snapshot merged"))
        .count();
    assert_eq!(merged, 1, "{log}");
    let log = logs_of(|| {
        v.t += 2_000 * MS;
        v.datagrams(110..111);
    });
    assert!(
        log.contains("2 more snapshots merged since the last line"),
        "{log}"
    );
}

/// A failure is logged with its class and what ended it: a login
/// rejected (and why), a reset mid-spin, our close before any byte (a
/// timer fired live); the failure that exhausts the attempts says it gave
/// up, with its detail too. A second apart each: no rate limit applies.
#[test]
fn a_failure_is_logged_with_its_detail() {
    let mut v = Venue::new("snapshot_max_attempts = 4");
    let log = logs_of(|| {
        v.datagrams(100..110);
        v.t += 2_000 * MS;
        v.connection(&soup::login_rejected(soup::SESSION_NOT_AVAILABLE), 1, true);
        v.t += 2_000 * MS;
        let bytes = spin(105, S1, false);
        v.connection(&bytes[..100], 1, false);
        v.segment(true, Tcp::RST, b"");
        v.t += 2_000 * MS;
        v.connect();
        v.segment(false, Tcp::FIN, b"");
        v.t += 2_000 * MS;
        v.connection(&bytes[..50], 1, true);
    });
    let failed: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("snapshot failed"))
        .collect();
    assert_eq!(failed.len(), 4, "{log}");
    for (line, (level, class, detail)) in failed.iter().zip([
        (
            " WARN ",
            "rejected",
            "login rejected: session not available",
        ),
        (" WARN ", "closed", "reset before the snapshot ended"),
        (" WARN ", "refused", "timed out before any byte"),
        (
            " ERROR ",
            "closed",
            "connection closed before the snapshot ended",
        ),
    ]) {
        let fields = format!("feed=nq class=\"{class}\" detail=\"{detail}\"");
        assert!(
            line.contains(level) && line.contains(&fields),
            "{level}{fields} in {line}"
        );
    }
    assert!(failed[3].contains("given up"), "{}", failed[3]);
    // The next attempt's delay in words an operator reads.
    assert!(failed[0].contains("retry_in=500 ms"), "{}", failed[0]);
}

/// Our close of a recorded connection is told as the timer that fired
/// live, from the recorded times: the idle bound when the server was
/// silent that long within the whole attempt's bound, else the whole
/// attempt's (which live checks first).
#[test]
fn a_recorded_close_is_told_as_the_timer_that_fired_live() {
    let mut v = Venue::new(
        "snapshot_idle_ms = 2000\nsnapshot_timeout_ms = 10000\nsnapshot_max_attempts = 8",
    );
    let bytes = spin(105, S1, false);
    let log = logs_of(|| {
        v.datagrams(100..110);
        v.t += 2_000 * MS;
        // Nothing answered for the idle bound.
        v.connect();
        v.t += 2_000 * MS;
        v.segment(false, Tcp::FIN, b"");
        v.t += 2_000 * MS;
        // Some bytes, then silent for the idle bound.
        v.connect();
        v.t += 1_000 * MS;
        v.segment(true, Tcp::ACK, &bytes[..40]);
        v.t += 2_000 * MS;
        v.segment(false, Tcp::FIN, b"");
        v.t += 2_000 * MS;
        // Bytes every second, closed at the whole attempt's bound.
        v.connect();
        for k in 0..10 {
            v.t += 1_000 * MS - 20_000;
            v.segment(true, Tcp::ACK, &bytes[40 + k..41 + k]);
        }
        v.t += 200 * MS;
        v.segment(false, Tcp::FIN, b"");
    });
    assert_eq!(
        failure_details(&log),
        [
            "idle before any byte",
            "idle before the snapshot ended",
            "timed out before the snapshot ended"
        ],
        "{log}"
    );
    // Both bounds the same: a server silent from the start is idle live
    // (its bound runs from before the connect), whenever the close is
    // recorded.
    let mut v = Venue::new("snapshot_idle_ms = 5000\nsnapshot_timeout_ms = 5000");
    let log = logs_of(|| {
        v.datagrams(100..110);
        v.t += 2_000 * MS;
        v.connect();
        v.t += 5_000 * MS;
        v.segment(false, Tcp::FIN, b"");
    });
    assert_eq!(failure_details(&log), ["idle before any byte"], "{log}");
}

/// A recorded connection left open when the next one starts fails as
/// `closed`, and is logged as any failure is (live never shows it).
#[test]
fn a_recorded_connection_closed_by_the_next_is_logged() {
    let mut v = Venue::new("snapshot_max_attempts = 4");
    let log = logs_of(|| {
        v.datagrams(100..110);
        v.t += 2_000 * MS;
        let bytes = spin(105, S1, false);
        v.connection(&bytes[..100], 1, false);
        v.t += 2_000 * MS;
        v.connect();
    });
    assert!(
        log.lines().any(|l| l.contains("snapshot failed")
            && l.contains("class=\"closed\" detail=\"another connection started\"")),
        "{log}"
    );
}

/// The detail of each "snapshot failed" line of `log`, in order.
fn failure_details(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("snapshot failed"))
        .filter_map(|l| l.split("detail=\"").nth(1)?.split("\" ").next())
        .collect()
}

/// A failure the one-a-second limit held back, with none after it, is
/// told at the first datagram once the second has passed (it was named
/// only by the next failure's count, which may never come).
#[test]
fn a_failure_held_back_is_told_once_the_second_has_passed() {
    let mut v = Venue::new("snapshot_max_attempts = 4");
    let log = logs_of(|| {
        v.datagrams(100..110);
        for _ in 0..2 {
            v.connection(&soup::login_rejected(soup::SESSION_NOT_AVAILABLE), 1, true);
        }
        v.t += 2_000 * MS;
        v.datagrams(110..112);
    });
    assert_eq!(failure_details(&log).len(), 1, "{log}");
    assert!(
        log.contains("1 more snapshot attempts failed since the last line of them"),
        "{log}"
    );
}

/// A Login Rejected of a reason byte SoupBinTCP does not define is
/// logged with the byte; the two it defines, in words only.
#[test]
fn a_login_rejected_for_an_unknown_reason_logs_the_byte() {
    let mut v = Venue::new("snapshot_max_attempts = 4");
    let log = logs_of(|| {
        v.datagrams(100..110);
        for reason in [b'?', 0x07, soup::NOT_AUTHORIZED] {
            v.t += 2_000 * MS;
            v.connection(&soup::login_rejected(reason), 1, true);
        }
    });
    let details = failure_details(&log);
    assert_eq!(
        details,
        [
            "login rejected: unknown reason 0x3f",
            "login rejected: unknown reason 0x07",
            "login rejected: not authorized",
        ],
        "{log}"
    );
}

/// A Login Accepted for another session, or at another sequence than 1,
/// is logged with what it named (trimmed of its padding, bytes outside
/// printable ASCII escaped), for the operator's question to the venue.
#[test]
fn a_login_accepted_for_another_session_or_sequence_logs_what_it_named() {
    let mut v = Venue::new("snapshot_max_attempts = 4");
    let log = logs_of(|| {
        v.datagrams(100..110);
        v.connection(&soup::login_accepted(b"XB\x07      \0", 1), 1, true);
        v.t += 2_000 * MS;
        v.connection(&soup::login_accepted(&S1.0, 7), 1, true);
    });
    let details = failure_details(&log);
    assert_eq!(
        details,
        [
            "Login Accepted for another session: XB\\\\x07",
            "Login Accepted at a sequence other than 1: 7",
        ],
        "{log}"
    );
}

/// A merge's trigger-to-merge time counts in the first bucket whose bound
/// (0.5 s, 2 s, 10 s, 60 s) it does not exceed; past 60 s, in the open
/// one.
#[test]
fn merge_latency_buckets_hold_their_bound_and_not_a_ns_more() {
    use crate::shm::counter::SNAPSHOT_BUCKETS;
    assert_eq!(SNAPSHOT_BUCKETS, 5);
    assert_eq!(latency_bucket(0), 0);
    for (i, bound_ms) in [500, 2_000, 10_000, 60_000].into_iter().enumerate() {
        let bound = bound_ms * MS;
        assert_eq!(
            [bound - 1, bound, bound + 1].map(latency_bucket),
            [i, i, i + 1],
            "around {bound_ms} ms"
        );
    }
    assert_eq!(latency_bucket(u64::MAX), SNAPSHOT_BUCKETS - 1);
}

/// The live path over loopback: the connection thread logs in to a
/// server (a listener in the test), reads the spin while the receive
/// thread holds the multicast, and the merge happens when the receive
/// loop takes the end. What went over the wire, recorded with the
/// datagrams as `run --record` writes them, replays to the same books
/// and snapshot keys; the password is nowhere in the recording.
mod live {
    use super::*;
    use crate::capture::link::Link;
    use crate::capture::write::{CaptureWriter, Format};
    use crate::capture::CaptureReader;
    use std::io::{Read, Write};
    use std::os::unix::fs::PermissionsExt;
    use std::time::{Duration, Instant};

    const PASSWORD: &[u8] = b"Pw9!live";

    fn now_ns() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    }

    /// A server that answers one login with `reply` after reading the
    /// Login Request, which it hands back.
    fn server(reply: Vec<u8>) -> (SocketAddrV4, std::thread::JoinHandle<Vec<u8>>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = match listener.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            _ => unreachable!(),
        };
        let t = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut login = [0u8; 49];
            s.read_exact(&mut login).unwrap();
            for piece in reply.chunks(1000) {
                s.write_all(piece).unwrap();
            }
            // Read to the client's close: its Logout (after any
            // heartbeats), then EOF.
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
            assert!(rest.ends_with(&soup::LOGOUT), "{rest:?}");
            login.to_vec()
        });
        (addr, t)
    }

    /// Replays the recording `bytes` under `config`: feed `nq` ends as
    /// `live` (books, snapshots, stream); returns the replay's summary.
    fn replays_as_live(
        config: &Config,
        bytes: Vec<u8>,
        live: &FeedSummary,
    ) -> crate::replay::Summary {
        let mut capture =
            CaptureReader::from_reader("rec", Box::new(std::io::Cursor::new(bytes))).unwrap();
        let out = crate::replay::replay(config, &mut capture, &[], |_| {});
        let replayed = match out.summary.feeds.get("nq") {
            Some(Summary::Itch50(s)) => s,
            _ => unreachable!(),
        };
        assert_eq!(replayed.symbols, live.symbols);
        assert_eq!(replayed.snapshot, live.snapshot);
        assert_eq!(
            (replayed.next, replayed.duplicates, replayed.suspect),
            (live.next, live.duplicates, live.suspect)
        );
        out.summary
    }

    /// A GLIMPSE server answering `spin` once, and a live, recording
    /// handler of an itch50 feed on it (`extra`: its keys beyond the
    /// usual); the directory holds the password file.
    fn recording(
        spin: Vec<u8>,
        extra: &str,
    ) -> (
        tempfile::TempDir,
        SocketAddrV4,
        std::thread::JoinHandle<Vec<u8>>,
        Config,
        Handler,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let pw = dir.path().join("pw");
        std::fs::write(&pw, PASSWORD).unwrap();
        std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o600)).unwrap();
        let (addr, server) = server(spin);
        let text = format!(
            r#"
[[feed]]
name = "nq"
protocol = "itch50"
lines = ["239.9.9.1:9000"]
stale_threshold_ms = 1000
source_threshold_ms = 1000
{extra}
glimpse = "{addr}"
glimpse_user = "tgsim"
glimpse_password_file = "{}"
"#,
            pw.display()
        );
        let config = Config::parse(&text, "t").unwrap();
        let mut h = Handler::new(&config);
        h.go_live().unwrap();
        h.record_wire();
        (dir, addr, server, config, h)
    }

    #[test]
    fn a_live_snapshot_merges_and_its_recording_replays_the_same() {
        let (_dir, addr, server, config, mut h) =
            recording(spin(105, S1, false), "join_gap_max = 10");
        let mut w = CaptureWriter::new(Vec::new(), Format::PcapNanos, Link::RawIp).unwrap();
        let line: SocketAddrV4 = "239.9.9.1:9000".parse().unwrap();
        let from: SocketAddrV4 = "127.0.0.1:1".parse().unwrap();
        let mut q = 100;
        let deadline = Instant::now() + Duration::from_secs(10);
        let merged = |h: &mut Handler| summary_of(h).snapshot.map_or(0, |s| s.snapshots);
        while merged(&mut h) == 0 {
            assert!(Instant::now() < deadline, "no snapshot merged in 10 s");
            let t = now_ns();
            let mut b = PacketBuilder::new(S1, q);
            b.message(&message(q));
            let d = b.finish();
            w.write_udp(t, from, line, &d).unwrap();
            let _ = h.on_datagram_line(0, 0, &d, t);
            q += 1;
            let t = now_ns();
            h.upkeep(t);
            h.drain_wire(&mut |t, s| {
                // Never a byte we sent: the Login Request holds the password.
                assert!(s.src == addr || s.payload.is_empty(), "{s:?}");
                w.write_tcp(t, s.src, s.dst, s.seq, s.flags, s.payload)
                    .unwrap()
            });
            std::thread::sleep(Duration::from_millis(2));
        }
        // The rest of the day, and the connection's close.
        for q in q..q + 20 {
            let t = now_ns();
            let mut b = PacketBuilder::new(S1, q);
            b.message(&message(q));
            let d = b.finish();
            w.write_udp(t, from, line, &d).unwrap();
            let _ = h.on_datagram_line(0, 0, &d, t);
            h.upkeep(t);
            h.drain_wire(&mut |t, s| {
                // Never a byte we sent: the Login Request holds the password.
                assert!(s.src == addr || s.payload.is_empty(), "{s:?}");
                w.write_tcp(t, s.src, s.dst, s.seq, s.flags, s.payload)
                    .unwrap()
            });
        }
        let login = server.join().unwrap();
        assert_eq!(&login[..3], b"\x00\x2fL");
        assert_eq!(&login[9..17], b"Pw9!live");
        let live = summary_of(&mut h);
        assert!(!live.suspect);
        assert_eq!(live.symbols, reference(q + 20).symbols);
        let bytes = w.finish().unwrap();
        assert!(
            !bytes.windows(PASSWORD.len()).any(|x| x == PASSWORD),
            "the password is in the recording"
        );
        let replayed = replays_as_live(&config, bytes, &live);
        let json = serde_json::to_string(&replayed).unwrap();
        assert!(!json.contains("Pw9!live"));
    }

    /// An operator's request (SIGUSR1) live, with datagrams applied in the
    /// cycle before the connection starts: the feed awaits from the start,
    /// as the replay of the recording does from its SYN, so both apply
    /// those datagrams and end alike.
    #[test]
    fn an_operators_request_replays_as_it_ran_live() {
        let (_dir, _, server, config, mut h) =
            recording(spin(35, S1, false), "snapshot_triggers = []");
        let mut w = CaptureWriter::new(Vec::new(), Format::PcapNanos, Link::RawIp).unwrap();
        let line: SocketAddrV4 = "239.9.9.1:9000".parse().unwrap();
        let from: SocketAddrV4 = "127.0.0.1:1".parse().unwrap();
        let send = |h: &mut Handler, w: &mut CaptureWriter<Vec<u8>>, q: u64| {
            let t = now_ns();
            let mut b = PacketBuilder::new(S1, q);
            b.message(&message(q));
            let d = b.finish();
            w.write_udp(t, from, line, &d).unwrap();
            let _ = h.on_datagram_line(0, 0, &d, t);
        };
        let upkeep = |h: &mut Handler, w: &mut CaptureWriter<Vec<u8>>| {
            h.upkeep(now_ns());
            h.drain_wire(&mut |t, s| {
                w.write_tcp(t, s.src, s.dst, s.seq, s.flags, s.payload)
                    .unwrap()
            });
        };
        for q in 1..30 {
            send(&mut h, &mut w, q);
            upkeep(&mut h, &mut w);
        }
        // The request, then a cycle's datagrams before its upkeep.
        assert_eq!(h.resync(now_ns()), 1);
        for q in 30..35 {
            send(&mut h, &mut w, q);
        }
        let merged = |h: &mut Handler| summary_of(h).snapshot.map_or(0, |s| s.snapshots);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut q = 35;
        while merged(&mut h) == 0 {
            assert!(Instant::now() < deadline, "no snapshot merged in 10 s");
            upkeep(&mut h, &mut w);
            std::thread::sleep(Duration::from_millis(2));
        }
        for _ in 0..5 {
            send(&mut h, &mut w, q);
            upkeep(&mut h, &mut w);
            q += 1;
        }
        server.join().unwrap();
        let live = summary_of(&mut h);
        assert!(!live.suspect);
        let bytes = w.finish().unwrap();
        replays_as_live(&config, bytes, &live);
    }

    /// An operator's request not started yet is dropped by a new session,
    /// as a wait is abandoned by one: the new session starts clean, no
    /// connection made for it. A second request while one is pending is
    /// not counted again.
    #[test]
    fn an_operators_request_is_dropped_by_a_new_session() {
        let text = r#"
[[feed]]
name = "nq"
protocol = "itch50"
lines = ["239.9.9.1:9000"]
stale_threshold_ms = 1000
source_threshold_ms = 1000
snapshot_triggers = []
glimpse = "127.0.0.1:9"
glimpse_user = "tgsim"
glimpse_password_env = "TG_TEST_PW_UNUSED"
"#;
        std::env::set_var("TG_TEST_PW_UNUSED", "x");
        let config = Config::parse(text, "t").unwrap();
        let mut h = Handler::new(&config);
        h.go_live().unwrap();
        let datagram = |session: Session, q: u64| {
            let mut b = PacketBuilder::new(session, q);
            b.message(&message(q));
            b.finish()
        };
        let t = now_ns();
        let _ = h.on_datagram_line(0, 0, &datagram(S1, 1), t);
        h.upkeep(t);
        assert_eq!(h.resync(t), 1);
        assert_eq!(h.resync(t), 0, "pending already");
        let _ = h.on_datagram_line(0, 0, &datagram(S2, 1), t + 1);
        h.upkeep(t + 2);
        let s = summary_of(&mut h);
        let snap = s.snapshot.unwrap();
        assert_eq!((snap.snapshot_attempts, snap.snapshot_state), (0, "idle"));
        assert!(!s.suspect);
    }

    /// One scripted connection: what the server does with it.
    type Script = Box<dyn FnOnce(std::net::TcpStream) + Send>;

    /// A server taking one connection per script, in order; hands back
    /// when each was accepted.
    fn scripted(scripts: Vec<Script>) -> (SocketAddrV4, std::thread::JoinHandle<Vec<Instant>>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = match listener.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            _ => unreachable!(),
        };
        let t = std::thread::spawn(move || {
            let mut accepted = Vec::new();
            for script in scripts {
                let (s, _) = listener.accept().unwrap();
                accepted.push(Instant::now());
                script(s);
            }
            accepted
        });
        (addr, t)
    }

    /// A handler of one feed with `glimpse` at `addr` and `extra` keys,
    /// live (the password from a private file in `dir`).
    fn live_handler(dir: &std::path::Path, addr: SocketAddrV4, extra: &str) -> Handler {
        let mut h = Handler::new(&live_config(dir, addr, extra));
        h.go_live().unwrap();
        h
    }

    /// [`live_handler`]'s configuration.
    fn live_config(dir: &std::path::Path, addr: SocketAddrV4, extra: &str) -> Config {
        let pw = dir.join("pw");
        std::fs::write(&pw, PASSWORD).unwrap();
        std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o600)).unwrap();
        let text = format!(
            "[[feed]]\nname = \"nq\"\nprotocol = \"itch50\"\nlines = [\"239.9.9.1:9000\"]\n\
             stale_threshold_ms = 1000\nsource_threshold_ms = 1000\njoin_gap_max = 10\n\
             glimpse = \"{addr}\"\nglimpse_user = \"tgsim\"\nglimpse_password_file = \"{}\"\n{extra}\n",
            pw.display()
        );
        Config::parse(&text, "t").unwrap()
    }

    /// Joins at 100 and runs the receive loop's upkeep until `done` (or
    /// `within`); returns the feed's summary.
    fn run_until(
        h: &mut Handler,
        within: Duration,
        done: impl Fn(&FeedSummary) -> bool,
    ) -> FeedSummary {
        let mut b = PacketBuilder::new(S1, 100);
        b.message(&message(100));
        let _ = h.on_datagram_line(0, 0, &b.finish(), now_ns());
        upkeep_until(h, within, done)
    }

    /// Runs the receive loop's upkeep until `done` (or `within`); returns
    /// the feed's summary.
    fn upkeep_until(
        h: &mut Handler,
        within: Duration,
        done: impl Fn(&FeedSummary) -> bool,
    ) -> FeedSummary {
        let deadline = Instant::now() + within;
        loop {
            h.upkeep(now_ns());
            let s = summary_of(h);
            if done(&s) || Instant::now() > deadline {
                return s;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// An operator's request (SIGUSR1 to `run`: [`Handler::resync`]) asks
    /// every feed with `glimpse` and a session for a snapshot, `auto` or
    /// not (glimpse G3.1): with no trigger configured, the healthy feed
    /// connects, merges, and its books are the venue's.
    #[test]
    fn live_an_operators_request_takes_a_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let serve: Script = Box::new(|mut s| {
            read_login(&mut s);
            s.write_all(&spin(30, S1, false)).unwrap();
        });
        let (addr, server) = scripted(vec![serve]);
        let mut h = live_handler(dir.path(), addr, "snapshot_triggers = []");
        // No session yet: nothing to ask.
        assert_eq!(h.resync(now_ns()), 0);
        for q in 1..30 {
            let mut b = PacketBuilder::new(S1, q);
            b.message(&message(q));
            let _ = h.on_datagram_line(0, 0, &b.finish(), now_ns());
        }
        assert_eq!(h.resync(now_ns()), 1);
        let s = upkeep_until(&mut h, Duration::from_secs(20), |s| {
            s.snapshot.as_ref().is_some_and(|n| n.snapshots == 1)
        });
        server.join().unwrap();
        let n = snap(&s);
        assert_eq!((n.snapshots, n.snapshot_attempts), (1, 1));
        assert!(!s.suspect);
        assert_eq!(s.symbols, reference(30).symbols);
    }

    fn read_login(s: &mut std::net::TcpStream) {
        let mut login = [0u8; 49];
        s.read_exact(&mut login).unwrap();
    }

    /// Rejected (session not available) twice, then served: the attempts
    /// are spaced by the backoff (100 ms, then 200 ms), and the third
    /// merges.
    #[test]
    fn live_attempts_are_spaced_by_the_backoff() {
        let dir = tempfile::tempdir().unwrap();
        let reject: fn() -> Script = || {
            Box::new(|mut s| {
                read_login(&mut s);
                s.write_all(&soup::login_rejected(soup::SESSION_NOT_AVAILABLE))
                    .unwrap();
            })
        };
        let serve: Script = Box::new(|mut s| {
            read_login(&mut s);
            s.write_all(&spin(101, S1, false)).unwrap();
            let _ = s.read_to_end(&mut Vec::new());
        });
        let (addr, server) = scripted(vec![reject(), reject(), serve]);
        let mut h = live_handler(dir.path(), addr, "snapshot_retry_ms = 100");
        let s = run_until(&mut h, Duration::from_secs(10), |s| snap(s).snapshots == 1);
        assert_eq!((snap(&s).snapshots, snap(&s).snapshot_attempts), (1, 3));
        assert_eq!(snap(&s).snapshot_failures["rejected"], 2);
        let at = server.join().unwrap();
        assert!(
            at[1] - at[0] >= Duration::from_millis(100),
            "{:?}",
            at[1] - at[0]
        );
        assert!(
            at[2] - at[1] >= Duration::from_millis(200),
            "{:?}",
            at[2] - at[1]
        );
    }

    /// A server slow to send Login Accepted gets the client's heartbeat
    /// every second from the Login Request on; a server that sends
    /// nothing fails the connection as `refused` at `snapshot_idle_ms`.
    #[test]
    fn live_heartbeats_every_second_and_silence_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let silent: Script = Box::new(move |mut s| {
            read_login(&mut s);
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut got = Vec::new();
            let _ = s.read_to_end(&mut got);
            tx.send(got).unwrap();
        });
        let (addr, server) = scripted(vec![silent]);
        let mut h = live_handler(
            dir.path(),
            addr,
            "snapshot_idle_ms = 2500\nsnapshot_max_attempts = 1",
        );
        let s = run_until(&mut h, Duration::from_secs(10), |s| {
            snap(s).snapshot_gave_up == 1
        });
        assert_eq!(snap(&s).snapshot_failures["refused"], 1, "{:?}", snap(&s));
        let got = rx.recv().unwrap();
        // Heartbeats only (at 1 s and 2 s, before the idle timer at 2.5 s;
        // a third if the machine stalled the thread).
        let beats = got.len() / soup::CLIENT_HEARTBEAT.len();
        assert!((2..=3).contains(&beats), "{got:?}");
        assert_eq!(got, soup::CLIENT_HEARTBEAT.repeat(beats));
        server.join().unwrap();
    }

    /// A spin that stalls after some bytes fails as `closed` at
    /// `snapshot_idle_ms`; one too slow for `snapshot_timeout_ms` likewise.
    #[test]
    fn live_a_stalled_or_slow_spin_is_closed() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = spin(101, S1, false);
        let (b1, b2) = (bytes.clone(), bytes);
        let stall: Script = Box::new(move |mut s| {
            read_login(&mut s);
            s.write_all(&b1[..100]).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let _ = s.read_to_end(&mut Vec::new());
        });
        let slow: Script = Box::new(move |mut s| {
            read_login(&mut s);
            // 50 bytes every 400 ms: never idle for 2 s, never done in 3 s.
            for piece in b2.chunks(50) {
                if s.write_all(piece).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(400));
            }
        });
        let (addr, server) = scripted(vec![stall, slow]);
        let mut h = live_handler(
            dir.path(),
            addr,
            "snapshot_idle_ms = 2000\nsnapshot_timeout_ms = 3000\nsnapshot_retry_ms = 10\nsnapshot_max_attempts = 2",
        );
        let s = run_until(&mut h, Duration::from_secs(15), |s| {
            snap(s).snapshot_gave_up == 1
        });
        assert_eq!(
            (snap(&s).snapshot_failures["closed"], snap(&s).snapshots),
            (2, 0),
            "{:?}",
            snap(&s)
        );
        assert!(s.suspect);
        server.join().unwrap();
    }

    /// A new session while awaiting abandons the wait (glimpse G3.2): the
    /// live connection is closed at once, not left to its timers, and the
    /// failure counted as `abandoned`.
    #[test]
    fn live_a_new_session_closes_the_connection_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let silent: Script = Box::new(move |mut s| {
            read_login(&mut s);
            s.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
            let begun = Instant::now();
            // Heartbeats may come; the end is what counts.
            let ended = s.read_to_end(&mut Vec::new()).is_ok();
            tx.send((ended, begun.elapsed())).unwrap();
        });
        let (addr, server) = scripted(vec![silent]);
        let mut h = live_handler(dir.path(), addr, "snapshot_idle_ms = 5000");
        // Joined at 100 of S1; connected once the login went out.
        let s = run_until(&mut h, Duration::from_secs(5), |s| {
            snap(s).snapshot_attempts == 1
        });
        assert_eq!(snap(&s).snapshot_state, "awaiting");
        std::thread::sleep(Duration::from_millis(200));
        let sent = Instant::now();
        let mut b = PacketBuilder::new(S2, 1);
        b.message(&message(1));
        let _ = h.on_datagram_line(0, 0, &b.finish(), now_ns());
        let s = upkeep_until(&mut h, Duration::from_secs(5), |s| {
            snap(s).snapshot_failures["abandoned"] == 1
        });
        assert_eq!(snap(&s).snapshot_failures["abandoned"], 1, "{:?}", snap(&s));
        let (ended, after) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(
            ended,
            "the server's read timed out: the connection stayed open"
        );
        assert!(
            after < Duration::from_secs(4),
            "closed {after:?} after the login, {:?} after the new session",
            sent.elapsed()
        );
        server.join().unwrap();
    }

    /// What the live connection records of how it ended (glimpse G5):
    /// a refused connect as our SYN and the server's RST; a server that
    /// closes after Login Accepted as our SYN, its bytes, its FIN, then
    /// ours. Each recording replays to the same failure.
    #[test]
    fn live_a_refusal_records_a_reset_and_a_close_the_servers_fin() {
        use crate::capture::link::Tcp;
        let dir = tempfile::tempdir().unwrap();
        // A port nobody listens on: bound, then let go.
        let unused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let refused = match unused.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            _ => unreachable!(),
        };
        drop(unused);
        let accepted = soup::login_accepted(&S1.0, 1);
        let close: Script = Box::new(move |mut s| {
            read_login(&mut s);
            s.write_all(&accepted).unwrap();
        });
        let (closing, server) = scripted(vec![close]);
        for (addr, class, expected) in [
            (
                refused,
                "refused",
                vec![(true, Tcp::SYN, 0), (false, Tcp::RST, 0)],
            ),
            (
                closing,
                "closed",
                vec![
                    (true, Tcp::SYN, 0),
                    (false, Tcp::ACK | Tcp::PSH, 33),
                    (false, Tcp::FIN | Tcp::ACK, 0),
                    (true, Tcp::FIN | Tcp::ACK, 0),
                ],
            ),
        ] {
            let mut h = live_handler(dir.path(), addr, "snapshot_max_attempts = 1");
            h.record_wire();
            let s = run_until(&mut h, Duration::from_secs(10), |s| {
                snap(s).snapshot_gave_up == 1
            });
            assert_eq!(snap(&s).snapshot_failures[class], 1, "{:?}", snap(&s));
            let mut w = CaptureWriter::new(Vec::new(), Format::PcapNanos, Link::RawIp).unwrap();
            let line: SocketAddrV4 = "239.9.9.1:9000".parse().unwrap();
            let from: SocketAddrV4 = "127.0.0.1:1".parse().unwrap();
            let mut b = PacketBuilder::new(S1, 100);
            b.message(&message(100));
            w.write_udp(now_ns() - 1_000_000_000, from, line, &b.finish())
                .unwrap();
            let mut got = Vec::new();
            h.drain_wire(&mut |t, s| {
                got.push((s.src != addr, s.flags, s.payload.len()));
                w.write_tcp(t, s.src, s.dst, s.seq, s.flags, s.payload)
                    .unwrap()
            });
            assert_eq!(got, expected, "{class}");
            let bytes = w.finish().unwrap();
            let mut capture =
                CaptureReader::from_reader("rec", Box::new(std::io::Cursor::new(bytes))).unwrap();
            let config = live_config(dir.path(), addr, "snapshot_max_attempts = 1");
            let out = crate::replay::replay(&config, &mut capture, &[], |_| {});
            let replayed = match out.summary.feeds.get("nq") {
                Some(Summary::Itch50(s)) => s,
                _ => unreachable!(),
            };
            let sn = replayed.snapshot.as_ref().unwrap();
            assert_eq!(sn.snapshot_failures[class], 1, "{class} replayed: {sn:?}");
        }
        server.join().unwrap();
    }
}

/// However often a wait starts afresh (a new session abandons the wait,
/// the next packet's join starts another), connections start at most
/// once a `snapshot_retry_ms`.
#[test]
fn fresh_waits_start_connections_no_closer_than_the_retry_delay() {
    let retry = 500 * 1_000_000;
    let mut s = Snapshots::new(Settings {
        max_attempts: 5,
        retry_ns: retry,
        retry_max_ns: 30 * retry,
    });
    s.on_trigger(0);
    assert!(s.should_start(0));
    // What `on_start` records of a start (it needs a feed to await).
    s.note_start(0);
    for t in [1_000, 2_000, retry - 1] {
        s.on_abandoned();
        s.on_trigger(t);
        assert!(!s.should_start(t), "at {t}");
    }
    assert!(s.should_start(retry));
    // The clock stepped back a minute after a start: the next is due once
    // the delay has passed from the new time, not from before the step.
    let minute = 60_000 * 1_000_000;
    s.note_start(minute);
    s.on_abandoned();
    s.on_trigger(minute);
    assert!(!s.should_start(minute + retry - 1));
    s.on_abandoned();
    s.on_trigger(1_000);
    assert!(s.should_start(1_000), "a minute back: at once");
}

/// A retry after a failure is due its backoff after the failure, and
/// after the clock stepped back to before it, at once (not the backoff
/// plus the step).
#[test]
fn a_retry_after_a_failure_does_not_wait_for_a_clock_stepped_back() {
    let retry = 500 * 1_000_000;
    let minute = 60_000 * 1_000_000;
    let mut s = Snapshots::new(Settings {
        max_attempts: 5,
        retry_ns: retry,
        retry_max_ns: 60 * retry,
    });
    s.on_trigger(minute);
    s.note_start(minute);
    // What a failure at one minute leaves (`on_end`, `fail`): the
    // connection over, the first backoff scheduled.
    s.open = false;
    s.failed = 1;
    s.due = Some(minute + s.settings.backoff(2));
    assert!(!s.should_start(minute + retry - 1));
    assert!(s.should_start(minute + retry));
    // Ten seconds back, within the longest backoff: at once.
    assert!(s.should_start(minute - 10_000 * 1_000_000));
}

/// Attempt k comes `min(retry × 2^(k−2), retry_max)` after attempt k − 1
/// failed (glimpse G3.3): from the failure, however long the attempt
/// ran, not from its start.
#[test]
fn the_next_attempt_is_due_the_backoff_after_the_failure() {
    let mut v = Venue::new("");
    v.datagrams(100..110);
    let retry = 100 * MS;
    let mut s = Snapshots::new(Settings {
        max_attempts: 5,
        retry_ns: retry,
        retry_max_ns: 10 * retry,
    });
    let (engine, _) = v.h.engine_mut(0).unwrap();
    let feed = engine.itch_mut().unwrap();
    let mut staging = feed.staging();
    let closed = End::Failed {
        class: Failure::Closed,
        detail: "idle before the snapshot ended",
        cause: Cause::None,
    };
    s.on_trigger(T0);
    let mut start = T0;
    for (k, wait) in [(2, retry), (3, 2 * retry)] {
        assert!(s.on_start(feed, start), "attempt {}", k - 1);
        // The attempt runs ten seconds before it fails.
        let failed = start + 10_000 * MS;
        s.on_end(feed, &closed, &mut staging, failed);
        assert!(!s.should_start(failed + wait - 1), "attempt {k}");
        assert!(s.should_start(failed + wait), "attempt {k}");
        start = failed + wait;
    }
}

/// A failure takes effect at the arrival of the FIN (or RST) that
/// decided it, not at the connection's start (glimpse G3.4): a wait given
/// up by a FIN 100 ms after the SYN opens the gap it left with its
/// deadline (`gap_timeout_ms`, 5) from the FIN.
#[test]
fn a_failure_takes_effect_when_its_fin_arrives() {
    let mut v = Venue::new("snapshot_max_attempts = 1");
    v.datagrams(100..105);
    v.datagrams(107..110);
    v.connect();
    let bytes = spin(105, S1, false);
    v.segment(true, Tcp::ACK | Tcp::PSH, &bytes[..bytes.len() / 2]);
    v.t += 100 * MS;
    v.segment(true, Tcp::FIN | Tcp::ACK, b"");
    let fin = v.t;
    assert_eq!(snap(&v.summary()).snapshot_failures["closed"], 1);
    v.expire(fin + 5 * MS);
    assert_eq!(v.summary().gaps_open, 1, "the deadline counts from the FIN");
    v.expire(fin + 5 * MS + 1);
    assert_eq!(v.summary().gaps_open, 0);
}

/// A recorded connection that got no byte before the next one started (a
/// connect nobody answered: nothing on the wire ends it) fails as
/// `refused`, as live counted it; one that got bytes, as `closed`.
#[test]
fn a_connection_that_got_no_byte_before_the_next_is_refused() {
    let mut v = Venue::new("");
    v.datagrams(100..110);
    v.connect();
    let spun = spin(105, S1, false);
    // Another that got part of a spin, then the one that merges.
    v.connection(&spun[..30], 1, false);
    v.connection(&spun, 1, true);
    let s = v.summary();
    let f = &snap(&s).snapshot_failures;
    assert_eq!((f["refused"], f["closed"]), (1, 1), "{f:?}");
}
