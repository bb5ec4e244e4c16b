//! What a live ITCH handler publishes in shared memory reads, through the
//! `Reader`, as the verdict the handler gives in process (spec itch50 §4).

use std::sync::Arc;
use tickguard::config::Config;
use tickguard::handler::Handler;
use tickguard::protocol::itch50::message::encode;
use tickguard::protocol::itch50::{PacketBuilder, Session, Side};
use tickguard::protocol::publication_feeds;
use tickguard::shm::Publication;
use tickguard::state::StateTable;
use tickguard::symbol::Symbol;
use tickguard::verdict::Reasons;
use tickguard::Reader;

const S1: Session = Session(*b"20260105XA");
const S2: Session = Session(*b"20260105XB");
const MS: u64 = 1_000_000;
/// 2026-01-05 09:30:00 in New York.
const T0: u64 = 1_767_623_400_000_000_000;
/// 09:30 as ns since midnight, exchange time.
const OPEN: u64 = 34_200_000_000_000;

const CONFIG: &str = r#"
[state]
capacity = 16

[[feed]]
name = "nasdaq"
protocol = "itch50"
lines = ["239.2.1.1:26477"]
stale_threshold_ms = 1500
source_threshold_ms = 2000
gap_timeout_ms = 5
"#;

fn packet(session: Session, first: u64, messages: &[Vec<u8>]) -> Vec<u8> {
    let mut p = PacketBuilder::new(session, first);
    for m in messages {
        p.message(m);
    }
    p.finish()
}

/// A ready publication of `capacity` slots under /dev/shm, a handler for
/// the configuration `text` publishing into it, and a reader of it
/// (the directory holding it first: it is removed when dropped).
fn published(
    text: &str,
    capacity: usize,
) -> (tempfile::TempDir, Arc<Publication>, Handler, Reader) {
    let dir = tempfile::Builder::new()
        .prefix("tickguard-itch-pub-")
        .tempdir_in("/dev/shm")
        .unwrap();
    let shm = dir.path().join("tickguard");
    let config = Config::parse(text, "itch.toml").unwrap();
    let feeds = publication_feeds(&config);
    let p = Arc::new(Publication::create(&shm, 0o640, capacity, &feeds, T0, MS).unwrap());
    let h = Handler::with_table(&config, StateTable::shared(p.clone()), 1024);
    p.ready();
    let reader = crate::common::live_reader(&shm);
    (dir, p, h, reader)
}

/// "For (feed, symbol) at local time `now`, reasons in this order" (spec
/// itch50 §4): read from the publication after each datagram as in process.
/// MSFT has thresholds of its own (§6), published with its slot: checked
/// half a second on, it is stale where AAPL is not.
#[test]
fn published_itch_verdicts_equal_the_handlers() {
    let text = format!(
        "{CONFIG}[[feed.symbol]]\nname = \"MSFT\"\nstale_threshold_ms = 100\nsource_threshold_ms = 100\n"
    );
    let (_dir, p, mut h, reader) = published(&text, 16);
    let [aapl, msft] = ["AAPL", "MSFT"].map(|s| Symbol::parse(s).unwrap());
    // (ms after T0 the messages were sent, datagram); each arrives 1 ms later.
    let ts = |ms: u64| OPEN + ms * MS;
    let steps: Vec<(u64, Vec<u8>)> = vec![
        (
            0,
            packet(
                S1,
                1,
                &[
                    encode::stock_directory(7, ts(0), aapl),
                    encode::add_order(7, ts(0), 1, Side::Buy, 100, aapl, 1_900_000, None),
                    encode::add_order(7, ts(0), 2, Side::Sell, 100, aapl, 1_901_000, None),
                    encode::add_order(8, ts(0), 3, Side::Buy, 100, msft, 4_000_000, None),
                ],
            ),
        ),
        (
            10,
            packet(S1, 5, &[encode::trading_action(7, ts(10), aapl, b'H')]),
        ),
        // Sequence 6 is late: a gap, then filled by the resume.
        (
            20,
            packet(
                S1,
                7,
                &[encode::add_order(
                    8,
                    ts(20),
                    4,
                    Side::Sell,
                    100,
                    msft,
                    4_001_000,
                    None,
                )],
            ),
        ),
        (
            22,
            packet(S1, 6, &[encode::trading_action(7, ts(15), aapl, b'T')]),
        ),
        // MSFT crossed.
        (
            30,
            packet(
                S1,
                8,
                &[encode::add_order(
                    8,
                    ts(30),
                    5,
                    Side::Buy,
                    100,
                    msft,
                    4_002_000,
                    None,
                )],
            ),
        ),
        // Sequence 9 never comes: given up at the upkeep at 50 ms.
        (40, packet(S1, 10, &[encode::delete(8, ts(40), 5)])),
        (3_000, PacketBuilder::heartbeat(S1, 11)),
        (3_010, PacketBuilder::end_of_session(S1, 11)),
        // A new session: the old books are gone. MSFT locked (bid = ask):
        // not an invalid price (`invalid_price` is bid > ask).
        (
            5_000,
            packet(
                S2,
                1,
                &[
                    encode::add_order(3, ts(5_000), 1, Side::Buy, 100, msft, 4_000_000, None),
                    encode::add_order(3, ts(5_000), 2, Side::Sell, 100, msft, 4_000_000, None),
                ],
            ),
        ),
    ];
    // Adds, a halt, a resume, a gap filled, a gap given up, the end of
    // session, a new session ("books, symbols, gaps and held messages are
    // dropped", §3.1): each stock compared at the arrival and 2.5 s later.
    let mut seen = Reasons::empty();
    let mut ok = 0;
    let mut compare = |h: &mut Handler, t: u64| {
        for now in [t, t + 500 * MS, t + 2_500 * MS] {
            p.heartbeat(now);
            for stock in ["AAPL", "MSFT", "NVDA"] {
                let want = h.verdict(0, Symbol::parse(stock).unwrap(), now);
                let got = reader.check_symbol("nasdaq", stock, now);
                assert!(got.health.is_ok(), "{:?}", got.health);
                assert_eq!(got.reasons, want, "{stock} at T0 + {} ns", now - T0);
                seen |= want;
                ok += want.is_ok() as u32;
            }
        }
    };
    for (ms, datagram) in steps {
        let t = T0 + (ms + 1) * MS;
        let _ = h.on_datagram(0, &datagram, t);
        h.before_check(0, t);
        compare(&mut h, t);
        if ms == 40 {
            h.upkeep(T0 + 50 * MS);
            compare(&mut h, T0 + 50 * MS);
        }
    }
    // Every reason, and ok, was compared at least once.
    assert_eq!(seen.bits(), 0x7f, "{seen:?}");
    assert!(ok > 0);
    // After the new session the old session's AAPL reads no_quote, the
    // new MSFT ok, locked.
    let t = T0 + 5_001 * MS;
    p.heartbeat(t);
    let verdicts = ["AAPL", "MSFT"].map(|s| reader.check_symbol("nasdaq", s, t).reasons);
    assert_eq!(verdicts, [Reasons::NO_QUOTE, Reasons::empty()]);
}

/// "`halted`: `trading_state` is `H`, `P` or `Q`, or `operational_halt`"
/// (spec itch50 §4), as a gateway reads it from the publication: a stock
/// paused (`P`), in a quotation-only period (`Q`), and one halted by an
/// operational halt of its own market (`h`, market `Q`) that another
/// market's resume does not lift, its own does.
#[test]
fn paused_quotation_only_and_operational_halts_are_published_halted() {
    let (_dir, p, mut h, reader) = published(CONFIG, 16);
    let [aapl, msft] = ["AAPL", "MSFT"].map(|s| Symbol::parse(s).unwrap());
    let book = |locate, stock, first| {
        [
            encode::stock_directory(locate, OPEN, stock),
            encode::trading_action(locate, OPEN, stock, b'T'),
            encode::add_order(locate, OPEN, first, Side::Buy, 100, stock, 1_900_000, None),
            encode::add_order(
                locate,
                OPEN,
                first + 1,
                Side::Sell,
                100,
                stock,
                1_901_000,
                None,
            ),
        ]
    };
    let mut messages = book(7, aapl, 1).to_vec();
    messages.extend(book(8, msft, 3));
    // (datagram, AAPL halted, MSFT halted) after it.
    let steps: Vec<(Vec<u8>, bool, bool)> = vec![
        (packet(S1, 1, &messages), false, false),
        (
            packet(S1, 9, &[encode::trading_action(7, OPEN, aapl, b'P')]),
            true,
            false,
        ),
        (
            packet(S1, 10, &[encode::trading_action(7, OPEN, aapl, b'Q')]),
            true,
            false,
        ),
        (
            packet(S1, 11, &[encode::trading_action(7, OPEN, aapl, b'T')]),
            false,
            false,
        ),
        (
            packet(
                S1,
                12,
                &[encode::operational_halt(8, OPEN, msft, b'Q', b'H')],
            ),
            false,
            true,
        ),
        (
            packet(
                S1,
                13,
                &[encode::operational_halt(8, OPEN, msft, b'B', b'T')],
            ),
            false,
            true,
        ),
        (
            packet(
                S1,
                14,
                &[encode::operational_halt(8, OPEN, msft, b'Q', b'T')],
            ),
            false,
            false,
        ),
    ];
    for (k, (datagram, aapl_halted, msft_halted)) in steps.into_iter().enumerate() {
        let t = T0 + (k as u64 + 1) * MS;
        h.on_datagram(0, &datagram, t).unwrap();
        h.before_check(0, t);
        p.heartbeat(t);
        for (stock, halted) in [(aapl, aapl_halted), (msft, msft_halted)] {
            let want = h.verdict(0, stock, t);
            let got = reader.check_symbol("nasdaq", &stock.to_string(), t);
            assert!(got.health.is_ok(), "{:?}", got.health);
            assert_eq!(got.reasons, want, "{stock} after step {k}");
            let expected = if halted {
                Reasons::HALTED
            } else {
                Reasons::empty()
            };
            assert_eq!(got.reasons, expected, "{stock} after step {k}");
        }
    }
}

/// A flood of new symbols on an SQF feed does not take the slots the
/// ITCH feed beside it reserves (its `max_symbols`): the ITCH feed's
/// symbols are still published, with the handler's verdicts, and the
/// flood gets what the reservations leave, the rest counted.
#[test]
fn a_flood_on_another_feed_leaves_the_itch_feed_its_slots() {
    const TWO_FEEDS: &str = r#"
[state]
capacity = 5

[[feed]]
name = "nasdaq"
protocol = "itch50"
lines = ["239.2.1.1:26477"]
stale_threshold_ms = 1500
source_threshold_ms = 2000
max_symbols = 2

[[feed]]
name = "lp"
kind = "full"
lines = ["239.2.1.2:30001"]
stale_threshold_ms = 1500
source_threshold_ms = 2000
"#;
    const FLOOD: usize = 20;
    let (_dir, p, mut h, reader) = published(TWO_FEEDS, 5);
    // The flood first: every slot would be free for it.
    let mut flood = tickguard::protocol::sqf::PacketBuilder::new(T0);
    for k in 0..FLOOD {
        let s = Symbol::parse(&format!("FX{k}")).unwrap();
        flood.quote(s, 1, T0, 1.0, 2.0);
    }
    h.on_datagram(1, &flood.finish(), T0 + MS).unwrap();
    h.upkeep(T0 + MS);
    let [aapl, msft] = ["AAPL", "MSFT"].map(|s| Symbol::parse(s).unwrap());
    let books = packet(
        S1,
        1,
        &[
            encode::stock_directory(7, OPEN, aapl),
            encode::stock_directory(8, OPEN, msft),
            encode::add_order(7, OPEN, 1, Side::Buy, 100, aapl, 1_900_000, None),
            encode::add_order(7, OPEN, 2, Side::Sell, 100, aapl, 1_901_000, None),
            encode::add_order(8, OPEN, 3, Side::Buy, 100, msft, 4_000_000, None),
            encode::add_order(8, OPEN, 4, Side::Sell, 100, msft, 4_001_000, None),
        ],
    );
    let t = T0 + 2 * MS;
    h.on_datagram(0, &books, t).unwrap();
    h.upkeep(t);
    h.before_check(0, t);
    p.heartbeat(t);
    for stock in [aapl, msft] {
        let want = h.verdict(0, stock, t);
        assert_eq!(want, Reasons::empty(), "{stock}");
        let got = reader.check_symbol("nasdaq", &stock.to_string(), t);
        assert!(got.health.is_ok(), "{stock}: {:?}", got.health);
        assert_eq!(got.reasons, want, "{stock}");
    }
    assert_eq!(h.feeds()[0].counters.table_full, 0);
    // The SQF feed got the 3 slots not held for the ITCH feed.
    assert_eq!(h.table().len(), 5);
    let placed = (0..FLOOD)
        .filter(|k| reader.lookup("lp", &format!("FX{k}")).is_some())
        .count();
    assert_eq!(placed, 3);
    assert_eq!(h.feeds()[1].counters.table_full, (FLOOD - 3) as u64);
}

/// A recorded GLIMPSE connection of feed 0 at `t`: our SYN, the server's
/// `spin` (Login Accepted to End of Snapshot) in one segment, its FIN.
fn snapshot_connection(h: &mut Handler, spin: &[u8], t: u64) {
    let local = "127.0.0.1:40001".parse().unwrap();
    for (from_server, flags, payload) in [
        (false, tickguard::capture::link::Tcp::SYN, &b""[..]),
        (true, tickguard::capture::link::Tcp::ACK, spin),
        (true, tickguard::capture::link::Tcp::FIN, &b""[..]),
    ] {
        let segment = tickguard::engine::Segment {
            local,
            from_server,
            seq: 1_000,
            flags,
            payload,
        };
        h.on_segment(0, &segment, t);
    }
}

/// A symbol the stream published and a merged GLIMPSE spin lacks, past
/// `max_symbols` when put back, leaves the feed: its slot is emptied
/// (`no_quote`) rather than showing its last book for good (once a later
/// session change or merge cleared the feed's suspect flag, a reader
/// answered `ok` on it). The symbols the merge kept are written again.
#[test]
fn a_symbol_a_snapshot_merge_drops_leaves_its_slot_empty() {
    use tickguard::protocol::itch50::soup;
    let text = format!(
        "{CONFIG}max_symbols = 4\nglimpse = \"127.0.0.1:18100\"\nglimpse_user = \"tgsim\"\n\
         glimpse_password_env = \"TG_TEST_NEVER_READ\"\nsnapshot_triggers = []\n"
    );
    let (_dir, p, mut h, reader) = published(&text, 16);
    let sym = |s: &str| Symbol::parse(s).unwrap();
    let mut messages: Vec<Vec<u8>> = ["AAA", "BBB", "CCC", "DDD"]
        .iter()
        .enumerate()
        .map(|(k, s)| encode::stock_directory(k as u16 + 1, OPEN, sym(s)))
        .collect();
    messages.push(encode::add_order(
        3,
        OPEN,
        1,
        Side::Buy,
        100,
        sym("CCC"),
        1_000_000,
        None,
    ));
    messages.push(encode::add_order(
        3,
        OPEN,
        2,
        Side::Sell,
        100,
        sym("CCC"),
        1_000_100,
        None,
    ));
    h.on_datagram(0, &packet(S1, 1, &messages), T0).unwrap();
    h.before_check(0, T0);
    let answer = |name: &str, t: u64| {
        p.heartbeat(t);
        let v = reader.check_symbol("nasdaq", name, t);
        format!(
            "{:?} {}",
            v.health,
            v.reasons.names().collect::<Vec<_>>().join(",")
        )
    };
    assert_eq!(answer("CCC", T0 + MS), "Ok ");
    // A spin of AAA, EEE and FFF: with BBB put back, the feed is full.
    let mut spin = soup::login_accepted(&S1.0, 1).to_vec();
    for (l, s) in [(1, "AAA"), (5, "EEE"), (6, "FFF")] {
        soup::sequenced(&encode::stock_directory(l, OPEN, sym(s)), &mut spin);
    }
    soup::sequenced(format!("G{:>20}", 7).as_bytes(), &mut spin);
    snapshot_connection(&mut h, &spin, T0 + 2 * MS);
    h.before_check(0, T0 + 2 * MS);
    let Some(tickguard::protocol::Summary::Itch50(s)) = h.summaries().remove("nasdaq") else {
        panic!("no itch50 summary");
    };
    assert_eq!(s.snapshot.as_ref().map(|x| x.snapshots), Some(1));
    assert!(s.symbols.contains_key("BBB") && !s.symbols.contains_key("CCC"));
    let slot = |s: &str| {
        let t = h.table();
        t.record(t.find(0, sym(s)).expect("a slot"))
    };
    let ccc = slot("CCC");
    assert_eq!((ccc.bid, ccc.ask), (None, None), "{ccc:?}");
    assert!(answer("CCC", T0 + 3 * MS).contains("no_quote"));
}

/// A merged GLIMPSE spin numbers the feed's symbols anew (its order, not
/// the stream's): every stock's slot then shows that stock's book from
/// the spin, never another's whose number it took, and its verdict is
/// the handler's.
#[test]
fn after_a_snapshot_merge_each_slot_shows_its_own_stocks_book() {
    use tickguard::protocol::itch50::soup;
    let text = format!(
        "{CONFIG}glimpse = \"127.0.0.1:18100\"\nglimpse_user = \"tgsim\"\n\
         glimpse_password_env = \"TG_TEST_NEVER_READ\"\nsnapshot_triggers = []\n"
    );
    let (_dir, p, mut h, reader) = published(&text, 16);
    let names = ["AAA", "BBB", "CCC", "DDD"];
    let sym = |s: &str| Symbol::parse(s).unwrap();
    // The stream: each stock bid at 1.00 + its place, offered 0.01 above.
    let mut stream = Vec::new();
    for (k, name) in names.iter().enumerate() {
        let (l, px) = (k as u16 + 1, 10_000 + k as u32);
        stream.push(encode::stock_directory(l, OPEN, sym(name)));
        let r = 2 * k as u64 + 1;
        stream.push(encode::add_order(
            l,
            OPEN,
            r,
            Side::Buy,
            100,
            sym(name),
            px,
            None,
        ));
        stream.push(encode::add_order(
            l,
            OPEN,
            r + 1,
            Side::Sell,
            100,
            sym(name),
            px + 100,
            None,
        ));
    }
    h.on_datagram(0, &packet(S1, 1, &stream), T0).unwrap();
    h.before_check(0, T0);
    // The spin: the same stocks in the other order, each bid at 2.00 +
    // its place in the stream, orders of references of their own.
    let mut spin = soup::login_accepted(&S1.0, 1).to_vec();
    for (k, name) in names.iter().enumerate().rev() {
        let (l, px) = (k as u16 + 1, 20_000 + k as u32);
        let r = 100 + 2 * k as u64;
        for m in [
            encode::stock_directory(l, OPEN, sym(name)),
            encode::add_order(l, OPEN, r, Side::Buy, 100, sym(name), px, None),
            encode::add_order(l, OPEN, r + 1, Side::Sell, 100, sym(name), px + 100, None),
        ] {
            soup::sequenced(&m, &mut spin);
        }
    }
    let next = stream.len() + 1;
    soup::sequenced(format!("G{next:>20}").as_bytes(), &mut spin);
    snapshot_connection(&mut h, &spin, T0 + 2 * MS);
    let now = T0 + 3 * MS;
    h.before_check(0, now);
    p.heartbeat(now);
    let Some(tickguard::protocol::Summary::Itch50(s)) = h.summaries().remove("nasdaq") else {
        panic!("no itch50 summary");
    };
    assert_eq!(s.snapshot.as_ref().map(|x| x.snapshots), Some(1));
    for (k, name) in names.iter().enumerate() {
        let want = h.verdict(0, sym(name), now);
        assert!(want.is_ok(), "{name}: {want:?}");
        assert_eq!(
            reader.check_symbol("nasdaq", name, now).reasons,
            want,
            "{name}"
        );
        let record = reader
            .record(&reader.lookup("nasdaq", name).unwrap())
            .unwrap();
        let mantissa = |q: Option<tickguard_reader::slot::Side>| {
            q.map(|b| match b.price {
                tickguard_reader::price::Price::Decimal { mantissa, .. } => mantissa,
                other => panic!("{other:?}"),
            })
        };
        let px = 20_000 + k as i64;
        assert_eq!(
            (mantissa(record.bid), mantissa(record.ask)),
            (Some(px), Some(px + 100)),
            "{name}"
        );
    }
}

/// An order message found by its reference changes its own symbol's book
/// whatever locate it carries (a delete, a replace, an add reusing a live
/// reference, each sent on another symbol's locate): the slot of the book
/// it changed is published again, its verdict and best bid as the
/// handler's.
#[test]
fn an_order_changed_under_another_locate_republishes_its_own_book() {
    let (_dir, p, mut h, reader) = published(CONFIG, 16);
    let [aapl, msft] = ["AAPL", "MSFT"].map(|s| Symbol::parse(s).unwrap());
    // Each case 10 s after the one before, in a session of its own.
    let ts = |k: usize, ms: u64| OPEN + (k as u64 + 1) * 10_000 * MS + ms * MS;
    // What AAPL's order 1 (a bid at 190) becomes, sent on MSFT's locate
    // (8); AAPL's best bid after it, in 1/10,000 dollar.
    let cases: [(&str, Vec<u8>, Option<i64>); 3] = [
        ("a delete", encode::delete(8, ts(0, 1), 1), None),
        (
            "a replace",
            encode::replace(8, ts(1, 1), 1, 3, 100, 1_905_000),
            Some(1_905_000),
        ),
        (
            "an add reusing its reference",
            encode::add_order(8, ts(2, 1), 1, Side::Buy, 100, msft, 3_900_000, None),
            None,
        ),
    ];
    for (k, (what, message, bid)) in cases.into_iter().enumerate() {
        // Each in a session of its own: AAPL bid 190 and offered 191.
        let s = Session(*format!("2026010{k}XA").as_bytes().first_chunk().unwrap());
        let open = packet(
            s,
            1,
            &[
                encode::stock_directory(7, ts(k, 0), aapl),
                encode::stock_directory(8, ts(k, 0), msft),
                encode::add_order(7, ts(k, 0), 1, Side::Buy, 100, aapl, 1_900_000, None),
                encode::add_order(7, ts(k, 0), 2, Side::Sell, 100, aapl, 1_910_000, None),
            ],
        );
        let t = T0 + (k as u64 + 1) * 10_000 * MS;
        for (datagram, at) in [(open, t), (packet(s, 5, &[message]), t + MS)] {
            h.on_datagram(0, &datagram, at).unwrap();
            h.before_check(0, at);
            p.heartbeat(at);
        }
        let now = t + MS;
        let want = h.verdict(0, aapl, now);
        assert!(want.is_ok(), "{what}: {want:?}");
        assert_eq!(
            reader.check_symbol("nasdaq", "AAPL", now).reasons,
            want,
            "{what}"
        );
        let handle = reader.lookup("nasdaq", "AAPL").unwrap();
        let record = reader.record(&handle).unwrap();
        let shown = record.bid.map(|b| match b.price {
            tickguard_reader::price::Price::Decimal { mantissa, .. } => mantissa,
            other => panic!("{other:?}"),
        });
        assert_eq!(shown, bid, "{what}");
    }
}
