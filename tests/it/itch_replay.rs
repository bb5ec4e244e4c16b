//! Replaying a capture of an ITCH 5.0 feed over MoldUDP64 (spec itch50):
//! two lines, a gap filled by line B, a gap filled by the recovery channel,
//! a gap given up, a malformed packet, a halt and the end of the session;
//! checks answered at their times, the summary's itch50 keys.

use std::net::SocketAddrV4;
use std::path::Path;
use tickguard::capture::link::Link;
use tickguard::capture::write::{CaptureWriter, Format};
use tickguard::config::Config;
use tickguard::handler::Handler;
use tickguard::protocol::itch50::binfile::BinFile;
use tickguard::protocol::itch50::message::encode;
use tickguard::protocol::itch50::{PacketBuilder, Session, Side};
use tickguard::replay::itch50::{replay_file, replay_file_with};
use tickguard::replay::{load_checks, replay, Check, Observer};
use tickguard::symbol::Symbol;

const S1: Session = Session(*b"20260105XA");
const MS: u64 = 1_000_000;
/// 2026-01-05 09:30:00 in New York.
const T0: u64 = 1_767_623_400_000_000_000;
/// 09:30 as ns since midnight, exchange time.
const OPEN: u64 = 34_200_000_000_000;

const CONFIG: &str = r#"
[[feed]]
name = "nasdaq"
protocol = "itch50"
lines = ["239.2.1.1:26477", "239.2.1.2:26477"]
stale_threshold_ms = 1500
source_threshold_ms = 2000
clock_offset = 0
gap_timeout_ms = 5
recovery_listen = "0.0.0.0:18001"
"#;

fn a() -> SocketAddrV4 {
    "239.2.1.1:26477".parse().unwrap()
}
fn b() -> SocketAddrV4 {
    "239.2.1.2:26477".parse().unwrap()
}
fn recovery() -> SocketAddrV4 {
    "127.0.0.1:18001".parse().unwrap()
}

fn packet(first: u64, messages: &[Vec<u8>]) -> Vec<u8> {
    let mut p = PacketBuilder::new(S1, first);
    for m in messages {
        p.message(m);
    }
    p.finish()
}

/// The session, as (time offset, destination, datagram).
fn session() -> Vec<(u64, SocketAddrV4, Vec<u8>)> {
    let aapl = Symbol::parse("AAPL").unwrap();
    let p1 = packet(
        1,
        &[
            encode::stock_directory(7, OPEN - 10, aapl),
            encode::add_order(7, OPEN, 1, Side::Buy, 100, aapl, 1_900_000, None),
            encode::add_order(7, OPEN, 2, Side::Sell, 200, aapl, 1_901_000, None),
        ],
    );
    let p2 = packet(4, &[encode::executed(7, OPEN + 1, 1, 40, 1)]);
    let p3 = packet(
        5,
        &[encode::add_order(
            7,
            OPEN + 2,
            3,
            Side::Buy,
            50,
            aapl,
            1_900_500,
            None,
        )],
    );
    let p4 = packet(6, &[encode::delete(7, OPEN + 3, 2)]);
    let p5 = packet(7, &[encode::replace(7, OPEN + 4, 3, 4, 60, 1_900_600)]);
    let p6 = packet(
        8,
        &[encode::add_order(
            7,
            OPEN + 5,
            5,
            Side::Sell,
            10,
            aapl,
            1_902_000,
            None,
        )],
    );
    let p7 = packet(9, &[encode::trading_action(7, OPEN + 6, aapl, b'H')]);
    vec![
        (0, a(), p1.clone()),
        (MS / 2, b(), p1),
        // Line A lost p2: gap [4, 5) at 1 ms, filled by line B at 2 ms.
        (MS, a(), p3.clone()),
        (2 * MS, b(), p2),
        (2 * MS + MS / 2, b(), p3),
        // Both lines lost p4: gap [6, 7) at 4 ms, filled by the recovery
        // channel at 6 ms (deadline 9 ms).
        (4 * MS, a(), p5),
        (6 * MS, recovery(), p4),
        // A malformed datagram on line A: counted, nothing applied.
        (7 * MS, a(), b"too short".to_vec()),
        // p6 is late everywhere: gap [8, 9) at 10 ms, given up after 15 ms,
        // so p6 at 40 ms is a duplicate.
        (10 * MS, a(), p7),
        (30 * MS, a(), PacketBuilder::heartbeat(S1, 10)),
        (40 * MS, a(), p6),
        (50 * MS, a(), PacketBuilder::end_of_session(S1, 10)),
    ]
}

fn write_capture(path: &Path) {
    write_datagrams(path, session());
}

/// A capture of `datagrams`, as (time offset from `T0`, destination, bytes).
fn write_datagrams(path: &Path, datagrams: Vec<(u64, SocketAddrV4, Vec<u8>)>) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::RawIp).unwrap();
    let src: SocketAddrV4 = "10.9.9.9:5000".parse().unwrap();
    for (dt, dst, bytes) in datagrams {
        w.write_udp(T0 + dt, src, dst, &bytes).unwrap();
    }
    w.finish().unwrap();
}

/// Replays `datagrams` with the configuration `config`, answering `checks`.
fn replay_datagrams(
    config: &str,
    datagrams: Vec<(u64, SocketAddrV4, Vec<u8>)>,
    checks: &[Check],
) -> tickguard::replay::Outcome {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("itch.pcap");
    write_datagrams(&cap, datagrams);
    let config = Config::parse(config, "itch.toml").unwrap();
    let mut capture = tickguard::capture::CaptureReader::open(&cap).unwrap();
    let outcome = replay(&config, &mut capture, checks, |_| {});
    assert!(outcome.input_error.is_none());
    outcome
}

fn check(dt: u64) -> Check {
    check_of(dt, "AAPL")
}

fn check_of(dt: u64, symbol: &str) -> Check {
    Check {
        time_ns: T0 + dt,
        feed: "nasdaq".into(),
        symbol: symbol.into(),
    }
}

#[test]
fn an_itch_capture_replays_with_gaps_fills_halts_and_the_close() {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("itch.pcap");
    write_capture(&cap);
    let config = Config::parse(CONFIG, "itch.toml").unwrap();
    let checks = [
        check(MS / 2),      // a book, no gap: ok
        check(MS + MS / 2), // gap [4, 5) open: suspect
        check(3 * MS),      // filled by line B
        check(5 * MS),      // gap [6, 7) open
        check(6 * MS + 1),  // filled by the recovery channel
        check(12 * MS),     // gap [8, 9) open; the halt behind it is held
        check(16 * MS),     // the gap given up: suspect for good
        check(60 * MS),     // closed
        check(9_000 * MS),  // and stale by now
    ];
    let mut capture = tickguard::capture::CaptureReader::open(&cap).unwrap();
    let outcome = replay(&config, &mut capture, &checks, |_| {});
    assert!(outcome.input_error.is_none());
    let got: Vec<Vec<&str>> = outcome
        .answers
        .iter()
        .map(|a| a.reasons.names().collect())
        .collect();
    let want: Vec<Vec<&str>> = vec![
        vec![],
        vec!["suspect"],
        vec![],
        vec!["suspect"],
        vec![],
        vec!["suspect"],
        vec!["suspect", "halted"],
        vec!["suspect", "halted", "closed"],
        vec!["stale", "stale_at_source", "suspect", "halted", "closed"],
    ];
    assert_eq!(got, want);

    let json = serde_json::to_value(&outcome.summary).unwrap();
    let f = &json["feeds"]["nasdaq"];
    for (key, value) in [
        ("packets", 12),
        ("rejected", 1),
        ("messages", 13),
        ("ticks_lost", 1),
        ("duplicates", 5),
        ("recovered", 2),
        ("gaps_open", 0),
        ("heartbeats", 1),
        ("session_changes", 0),
        ("stale_session", 0),
        ("unknown_orders", 0),
        ("anomalies", 0),
        ("next", 10),
    ] {
        assert_eq!(f[key], value, "{key}: {f}");
    }
    assert_eq!(f["session"], "20260105XA");
    assert_eq!(f["suspect"], true);
    assert_eq!(f["joined"], false);
    assert_eq!(f["hours"], "closed");
    assert_eq!(f["rejected_by_reason"]["short"], 1);
    assert_eq!(f["messages_by_type"]["A"], 3);
    assert_eq!(f["messages_by_type"]["U"], 1);
    let aapl = &f["symbols"]["AAPL"];
    assert_eq!(aapl["locate"], 7);
    assert_eq!(aapl["bid"], 1_900_600, "order 3 replaced by order 4");
    assert_eq!(aapl["bid_size"], 60);
    assert!(
        aapl.get("ask").is_none(),
        "order 2 deleted, order 5 lost: {aapl}"
    );
    assert_eq!(aapl["orders"], 2, "orders 1 (60 left) and 4");
    assert_eq!(aapl["trading_state"], "H");
    assert_eq!(aapl["last_timestamp"], OPEN + 6);
}

/// "`messages_by_type` (applied messages by type letter, unknown letters
/// included)" (spec itch50 §5): an unknown `z` and an unknown byte 0x01,
/// skipped, are counted under their letter (a byte no letter prints as
/// `\xNN`), beside the known ones.
#[test]
fn messages_of_unknown_types_are_counted_by_their_letter() {
    let aapl = Symbol::parse("AAPL").unwrap();
    let datagrams = vec![(
        T0,
        a(),
        packet(
            1,
            &[
                encode::add_order(7, OPEN, 1, Side::Buy, 100, aapl, 1_900_000, None),
                b"zab".to_vec(),
                vec![0x01, 0, 0, 0],
                b"zcd".to_vec(),
            ],
        ),
    )];
    let outcome = replay_datagrams(CONFIG, datagrams, &[]);
    let json = serde_json::to_value(&outcome.summary).unwrap();
    let f = &json["feeds"]["nasdaq"];
    assert_eq!(
        f["messages_by_type"],
        serde_json::json!({ "A": 1, "z": 2, "\\x01": 1 }),
        "{f}"
    );
}

/// Live, the recovery channel takes the `recovery` server's answers only
/// (a forged answer would fill a gap with whatever its sender chose); a
/// replay does the same: an answer from another sender is dropped and
/// counted (`capture.wrong_source`), the server's fills the gap. Without a
/// server configured, any sender's answer is the channel's.
#[test]
fn a_replay_takes_recovery_answers_from_the_server_only() {
    let aapl = Symbol::parse("AAPL").unwrap();
    let server: SocketAddrV4 = "10.9.9.9:5000".parse().unwrap();
    let forger: SocketAddrV4 = "10.6.6.6:5000".parse().unwrap();
    let datagrams = [
        (0, server, a(), session()[0].2.clone()),
        // Sequence 4 lost on line A: gap [4, 5).
        (MS, server, a(), session()[2].2.clone()),
        // A forged answer: an offer far below the bid.
        (
            2 * MS,
            forger,
            recovery(),
            packet(
                4,
                &[encode::add_order(
                    7,
                    OPEN + 1,
                    9,
                    Side::Sell,
                    100,
                    aapl,
                    1_800_000,
                    None,
                )],
            ),
        ),
        (
            3 * MS,
            server,
            recovery(),
            packet(4, &[encode::executed(7, OPEN + 1, 1, 40, 1)]),
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("itch.pcap");
    let file = std::io::BufWriter::new(std::fs::File::create(&cap).unwrap());
    let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::RawIp).unwrap();
    for (dt, src, dst, bytes) in &datagrams {
        w.write_udp(T0 + dt, *src, *dst, bytes).unwrap();
    }
    w.finish().unwrap();
    let run = |config: &str| {
        let config = Config::parse(config, "itch.toml").unwrap();
        let mut capture = tickguard::capture::CaptureReader::open(&cap).unwrap();
        let outcome = replay(&config, &mut capture, &[check(4 * MS)], |_| {});
        let json = serde_json::to_value(&outcome.summary).unwrap();
        let names: Vec<&str> = outcome.answers[0].reasons.names().collect();
        (names.join(","), json)
    };
    let (answer, json) = run(&format!("{CONFIG}recovery = \"{server}\"\n"));
    assert_eq!(answer, "", "{json}");
    assert_eq!(json["capture"]["wrong_source"], 1, "{json}");
    let f = &json["feeds"]["nasdaq"];
    assert_eq!(
        (&f["recovered"], &f["gaps_open"]),
        (&1.into(), &0.into()),
        "{f}"
    );
    assert_eq!(f["symbols"]["AAPL"]["ask"], 1_901_000, "{f}");
    assert_eq!(f["symbols"]["AAPL"]["orders"], 3, "{f}");
    let (answer, json) = run(CONFIG);
    assert_eq!(answer, "invalid_price", "the forged offer taken: {json}");
    assert!(json["capture"].get("wrong_source").is_none(), "{json}");
    assert_eq!(json["feeds"]["nasdaq"]["symbols"]["AAPL"]["ask"], 1_800_000);
}

/// `timezone` (§6) places the messages' times, ns since midnight, on the
/// Unix clock: a message stamped 14:30:00 arriving at 14:30:05 UTC is 5 s
/// old at the source for a venue on UTC (over the 2 s threshold), and
/// five hours ahead for the default New York (`ok`).
#[test]
fn the_configured_timezone_places_the_message_times() {
    let aapl = Symbol::parse("AAPL").unwrap();
    let at = 52_200_000_000_000; // 14:30:00 after midnight
    let datagrams = || {
        vec![(
            5_000 * MS,
            a(),
            packet(
                1,
                &[
                    encode::stock_directory(7, at, aapl),
                    encode::add_order(7, at, 1, Side::Buy, 100, aapl, 1_900_000, None),
                    encode::add_order(7, at, 2, Side::Sell, 100, aapl, 1_901_000, None),
                ],
            ),
        )]
    };
    let answer = |config: &str| {
        let outcome = replay_datagrams(config, datagrams(), &[check(5_000 * MS + 1)]);
        let names: Vec<&str> = outcome.answers[0].reasons.names().collect();
        names.join(",")
    };
    assert_eq!(
        answer(&format!("{CONFIG}timezone = \"UTC\"\n")),
        "stale_at_source"
    );
    assert_eq!(answer(CONFIG), "");
}

/// A capture whose clock steps back (here an hour, as a recording of a
/// live run whose clock did): a gap opened after the step is given up a
/// timeout after its opening, as live gives it up, not held until the
/// clock caught up with the time before the step; the copy that comes
/// later is a duplicate, the message lost.
#[test]
fn a_gap_opened_after_the_clock_stepped_back_is_given_up_in_time() {
    let aapl = Symbol::parse("AAPL").unwrap();
    let hour = 3_600_000 * MS;
    let p1 = packet(1, &[encode::stock_directory(7, OPEN, aapl)]);
    let p2 = packet(2, &[encode::trading_action(7, OPEN, aapl, b'T')]);
    let p3 = packet(3, &[encode::trading_action(7, OPEN, aapl, b'T')]);
    let p4 = packet(4, &[encode::trading_action(7, OPEN, aapl, b'T')]);
    let datagrams = vec![
        (hour, a(), p1),
        (hour + MS, a(), p2),
        // The clock steps back an hour: 4 opens a gap at 3 (5 ms).
        (MS, a(), p4),
        (20 * MS, b(), p3),
    ];
    let outcome = replay_datagrams(CONFIG, datagrams, &[]);
    let json = serde_json::to_value(&outcome.summary).unwrap();
    let f = &json["feeds"]["nasdaq"];
    assert_eq!(
        (&f["ticks_lost"], &f["gaps_open"], &f["suspect"]),
        (&1.into(), &0.into(), &true.into()),
        "{f}"
    );
}

/// Another feed's datagrams (or ones no feed takes) stamped more than
/// 1 ms before this feed's last are not this feed's clock stepping back
/// (feeds share nothing: a recording holds each feed's datagrams in its
/// own order, one behind a backlog recorded after another's later ones):
/// its gap stays open to its own deadline, and the copy in time fills it.
#[test]
fn another_feeds_earlier_stamps_are_not_this_feeds_clock_stepping_back() {
    let aapl = Symbol::parse("AAPL").unwrap();
    let p1 = packet(1, &[encode::stock_directory(7, OPEN, aapl)]);
    let p2 = packet(2, &[encode::trading_action(7, OPEN, aapl, b'T')]);
    let p3 = packet(3, &[encode::trading_action(7, OPEN, aapl, b'T')]);
    let other: SocketAddrV4 = "239.2.9.9:26477".parse().unwrap();
    let unrouted: SocketAddrV4 = "239.2.8.8:26477".parse().unwrap();
    let config = format!(
        "[state]\ncapacity = 262144\n{CONFIG}[[feed]]\nname = \"other\"\nprotocol = \"itch50\"\nlines = [\"{other}\"]\n\
         stale_threshold_ms = 1500\nsource_threshold_ms = 2000\nclock_offset = 0\n"
    );
    let datagrams = vec![
        (100 * MS, a(), p1),
        // 3 opens a gap at 2, deadline 105 ms.
        (100 * MS, a(), p3),
        (
            90 * MS,
            other,
            packet(1, &[encode::system_event(OPEN, b'O')]),
        ),
        (
            91 * MS,
            unrouted,
            packet(9, &[encode::system_event(OPEN, b'O')]),
        ),
        (104 * MS, b(), p2),
    ];
    let outcome = replay_datagrams(&config, datagrams, &[]);
    let json = serde_json::to_value(&outcome.summary).unwrap();
    let f = &json["feeds"]["nasdaq"];
    assert_eq!(
        (&f["ticks_lost"], &f["gaps_open"], &f["recovered"]),
        (&0.into(), &0.into(), &1.into()),
        "{f}"
    );
}

/// "The summary is taken after the last datagram and the last check:
/// nothing expires at the end" (spec itch50 §3.2).
#[test]
fn a_gap_still_open_at_the_end_of_the_capture_is_not_given_up() {
    let aapl = Symbol::parse("AAPL").unwrap();
    let p1 = packet(1, &[encode::stock_directory(7, OPEN, aapl)]);
    let p3 = packet(3, &[encode::trading_action(7, OPEN, aapl, b'T')]);
    // Seq 1, then seq 3: a gap at 2 whose 5 ms deadline the capture never reaches.
    let outcome = replay_datagrams(CONFIG, vec![(0, a(), p1), (MS, a(), p3)], &[]);
    let json = serde_json::to_value(&outcome.summary).unwrap();
    let f = &json["feeds"]["nasdaq"];
    assert_eq!(f["gaps_open"], 1, "{f}");
    assert_eq!(f["ticks_lost"], 0, "{f}");
    assert_eq!(f["suspect"], true, "{f}");
}

/// "The summary is taken after the last datagram and the last check"
/// (spec itch50 §3.2): a check after the capture's end runs the feed's
/// deadlines to its time, and the summary shows what that expired.
#[test]
fn a_check_after_the_last_datagram_counts_in_the_summary() {
    let aapl = Symbol::parse("AAPL").unwrap();
    let p1 = packet(1, &[encode::stock_directory(7, OPEN, aapl)]);
    let p3 = packet(3, &[encode::trading_action(7, OPEN, aapl, b'T')]);
    // The gap at 2, revealed at 1 ms, expires at 6 ms: the check at 10 ms
    // comes after the capture's last datagram and past the deadline.
    // So does one naming no symbol ITCH can have (over 8 characters).
    for symbol in ["AAPL", "ABCDEFGHIJ"] {
        let checks = [check_of(10 * MS, symbol)];
        let datagrams = vec![(0, a(), p1.clone()), (MS, a(), p3.clone())];
        let outcome = replay_datagrams(CONFIG, datagrams, &checks);
        let json = serde_json::to_value(&outcome.summary).unwrap();
        let f = &json["feeds"]["nasdaq"];
        assert_eq!(
            (f["gaps_open"].as_u64(), f["ticks_lost"].as_u64()),
            (Some(0), Some(1)),
            "{symbol}: {f}"
        );
        assert_eq!(f["suspect"], true, "{symbol}: {f}");
    }
}

/// The replay's last line tells what was read and the gap still open,
/// with the messages held behind it, and how to let it expire; `--until`
/// runs the deadlines past the end of the capture: the gap expires (ticks
/// lost, nothing open) as it would have live.
#[test]
fn a_gap_open_at_the_end_is_told_and_until_lets_it_expire() {
    let aapl = Symbol::parse("AAPL").unwrap();
    let p1 = packet(1, &[encode::stock_directory(7, OPEN, aapl)]);
    let p3 = packet(3, &[encode::trading_action(7, OPEN, aapl, b'T')]);
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("itch.pcap");
    write_datagrams(&cap, vec![(0, a(), p1), (MS, a(), p3)]);
    let cfg = dir.path().join("itch.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let summary = dir.path().join("summary.json");
    let run = |extra: &[&str]| {
        let out = assert_cmd::Command::cargo_bin("tickguard")
            .unwrap()
            .arg("replay")
            .arg(&cap)
            .arg("--config")
            .arg(&cfg)
            .arg("--summary")
            .arg(&summary)
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success());
        let s: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
        (
            String::from_utf8(out.stderr).unwrap(),
            s["feeds"]["nasdaq"].clone(),
        )
    };
    let (stderr, f) = run(&[]);
    let last = stderr
        .lines()
        .find(|l| l.starts_with("tickguard: replayed "));
    assert!(
        last.is_some_and(
            |l| l.contains("replayed 2 records (2 datagrams) spanning 0.001 s")
                && l.ends_with("; 1 gaps open, 1 messages held behind them")
        ),
        "{stderr}"
    );
    assert!(
        stderr.lines().any(|l| l.starts_with(
            "tickguard: warning: feed 'nasdaq': 1 gaps still open at the end of the input, 1 messages held"
        ) && l.contains("--until TIME")),
        "{stderr}"
    );
    assert_eq!(
        (f["gaps_open"].as_u64(), f["ticks_lost"].as_u64()),
        (Some(1), Some(0)),
        "{f}"
    );
    // 1 s after the last packet: the 5 ms deadline has passed.
    let until = (T0 + 1_000 * MS).to_string();
    let (stderr, f) = run(&["--until", &until]);
    assert_eq!(
        (f["gaps_open"].as_u64(), f["ticks_lost"].as_u64()),
        (Some(0), Some(1)),
        "{f}"
    );
    assert!(
        stderr.contains("; 0 gaps open, 0 messages held behind them")
            && !stderr.contains("--until"),
        "{stderr}"
    );
    // Before the input's end (seconds given for nanoseconds): warned, and
    // nothing changes.
    let seconds = (T0 / 1_000_000_000).to_string();
    let (stderr, f) = run(&["--until", &seconds]);
    assert_eq!(f["gaps_open"].as_u64(), Some(1), "{f}");
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("tickguard: warning: --until 1970-")
                && l.contains("is before the input's last record")
                && l.contains(
                    "it runs only the deadlines of feeds whose last datagram came before it"
                )),
        "{stderr}"
    );
}

/// A bid for AAPL (locate 7, order 1) and one for MSFT (locate 8, order 2)
/// at the open.
fn aapl_and_msft_bids() -> [Vec<u8>; 2] {
    let bid = |locate, order, stock: &str, price| {
        let stock = Symbol::parse(stock).unwrap();
        encode::add_order(locate, OPEN, order, Side::Buy, 100, stock, price, None)
    };
    [bid(7, 1, "AAPL", 1_900_000), bid(8, 2, "MSFT", 4_000_000)]
}

/// "Per-symbol overrides work as in sqf-v1 §7" (spec itch50 §6).
#[test]
fn a_per_symbol_stale_threshold_applies_to_its_stock_only() {
    let config = format!("{CONFIG}\n[[feed.symbol]]\nname = \"MSFT\"\nstale_threshold_ms = 1\n");
    let p1 = packet(1, &aapl_and_msft_bids());
    // The feed's last proof of life is at 0; liveness is per feed.
    let checks = [
        check_of(MS, "MSFT"),     // exactly the threshold: not yet stale
        check_of(5 * MS, "MSFT"), // past MSFT's 1 ms
        check_of(5 * MS, "AAPL"), // well within the feed's 1,500 ms
    ];
    let outcome = replay_datagrams(&config, vec![(0, a(), p1)], &checks);
    let got: Vec<Vec<&str>> = outcome
        .answers
        .iter()
        .map(|a| a.reasons.names().collect())
        .collect();
    assert_eq!(got, [vec![], vec!["stale"], vec![]]);
}

#[test]
fn the_binary_replays_an_itch_capture_and_writes_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("itch.pcap");
    write_capture(&cap);
    let cfg = dir.path().join("itch.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let checks = dir.path().join("checks.csv");
    std::fs::write(
        &checks,
        format!("time_ns,feed,symbol\n{},nasdaq,AAPL\n", T0 + MS / 2),
    )
    .unwrap();
    let summary = dir.path().join("summary.json");
    let out = assert_cmd::Command::cargo_bin("tickguard")
        .unwrap()
        .arg("replay")
        .arg(&cap)
        .arg("--config")
        .arg(&cfg)
        .arg("--checks")
        .arg(&checks)
        .arg("--summary")
        .arg(&summary)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(line["ok"], true, "{line}");
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(
        s["feeds"]["nasdaq"]["symbols"]["AAPL"]["trading_state"],
        "H"
    );
}

#[test]
fn itch_keys_are_checked() {
    let bad = [
        (
            CONFIG.replace("protocol = \"itch50\"\n", ""),
            "applies only to protocol",
        ),
        (
            CONFIG.replace("gap_timeout_ms = 5", "kind = \"full\""),
            "kind does not apply",
        ),
        (
            CONFIG.replace("gap_timeout_ms = 5", "timezone = \"Mars/Olympus\""),
            "not an IANA time zone",
        ),
        (
            CONFIG.replace("gap_timeout_ms = 5", "gap_timeout_ms = 0"),
            "out of range",
        ),
        (
            CONFIG.replace("gap_timeout_ms = 5", "recovery = \"239.1.1.1:5\""),
            "unicast",
        ),
        (CONFIG.replace("itch50", "mdp3"), "protocol"),
    ];
    for (text, want) in bad {
        let err = Config::parse(&text, "itch.toml").unwrap_err().to_string();
        assert!(err.contains(want), "{want}: {err}");
        assert!(!err.contains('\n'), "one line: {err}");
    }
    // The default without a recovery server: 5 ms (CONFIG sets it).
    let c = Config::parse(&CONFIG.replace("gap_timeout_ms = 5", ""), "itch.toml").unwrap();
    let itch = crate::common::itch(&c.feeds[0]);
    assert_eq!(itch.gap_timeout_ns, 5 * MS);
    assert_eq!((itch.max_held, itch.join_gap_max), (1_000_000, 10_000));
    assert_eq!(itch.max_orders, 1 << 24);
    assert_eq!(itch.timezone, "America/New_York");
    let with_server = CONFIG.replace("gap_timeout_ms = 5", "recovery = \"127.0.0.1:18000\"");
    let c = Config::parse(&with_server, "itch.toml").unwrap();
    let itch = crate::common::itch(&c.feeds[0]);
    assert_eq!(itch.gap_timeout_ns, 1_000 * MS);
    assert_eq!(itch.recovery_listen, "0.0.0.0:18001".parse().unwrap());
    // Without recovery_listen: any local address, an ephemeral port.
    let c = Config::parse(&with_server.replace("recovery_listen", "#"), "itch.toml").unwrap();
    let itch = crate::common::itch(&c.feeds[0]);
    assert_eq!(itch.recovery_listen, "0.0.0.0:0".parse().unwrap());
}

fn itch_fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/itch")
}

/// `replay INPUT --config fixtures/itch/config.toml --checks … --summary …`
/// with `extra` arguments: (exit code, stdout, stderr, summary).
fn replay_itch(input: &str, extra: &[&str]) -> (i32, String, String, Option<String>) {
    replay_itch_with(&itch_fixtures().join("config.toml"), input, extra)
}

/// [`replay_itch`] with the configuration at `config`.
fn replay_itch_with(
    config: &Path,
    input: &str,
    extra: &[&str],
) -> (i32, String, String, Option<String>) {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.json");
    let f = itch_fixtures();
    let out = assert_cmd::Command::cargo_bin("tickguard")
        .unwrap()
        .arg("replay")
        .arg(f.join(input))
        .arg("--config")
        .arg(config)
        .arg("--checks")
        .arg(f.join("checks.csv"))
        .arg("--summary")
        .arg(&summary)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        crate::common::without_end_line(&String::from_utf8(out.stderr).unwrap()),
        std::fs::read_to_string(&summary).ok(),
    )
}

/// The committed ITCH sessions (two lines, loss, reordering, line-B delay,
/// duplicates, malformed packets, recovery answers, a session change; a
/// mid-session join; the BinaryFILE plain and gzip) replay to their golden
/// results and summaries, byte for byte.
///
/// A change detector, not a proof: the goldens are this code's own replay
/// output (fixtures/README.md), so this flags any change of output and says
/// nothing of whether it is right. The proof of correctness is
/// `tests/itch_model.rs` (an independent model of the ITCH spec run side by
/// side with the feed) and the expectations written by hand here, e.g.
/// [`an_itch_capture_replays_with_gaps_fills_halts_and_the_close`].
#[test]
fn every_itch_fixture_reproduces_its_golden_output() {
    let file = ["--feed", "nasdaq", "--date", "2026-01-05"];
    for (input, extra, stem) in [
        ("session.pcap", &[][..], "session"),
        ("join.pcap", &[][..], "join"),
        ("session.itch", &file[..], "session.itch"),
        ("session.itch.gz", &file[..], "session.itch"),
    ] {
        let (code, stdout, stderr, summary) = replay_itch(input, extra);
        assert_eq!(code, 0, "{input}: {stderr}");
        let f = itch_fixtures();
        let expected = std::fs::read_to_string(f.join(format!("{stem}.expected.jsonl"))).unwrap();
        assert!(
            stdout == expected,
            "{input}: results differ from {stem}.expected.jsonl"
        );
        let want = std::fs::read_to_string(f.join(format!("{stem}.summary.json"))).unwrap();
        assert!(
            summary.as_deref() == Some(&want[..]),
            "{input}: summary differs from {stem}.summary.json"
        );
    }
}

/// "the offset is 0 whatever the config says" (spec itch50 §5).
#[test]
fn a_binary_file_replay_ignores_the_configured_clock_offset() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(itch_fixtures().join("config.toml")).unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, format!("{text}clock_offset = 1000000000\n")).unwrap();
    let (code, stdout, stderr, _) = replay_itch_with(
        &cfg,
        "session.itch",
        &["--feed", "nasdaq", "--date", "2026-01-05"],
    );
    assert_eq!(code, 0, "{stderr}");
    let expected =
        std::fs::read_to_string(itch_fixtures().join("session.itch.expected.jsonl")).unwrap();
    assert!(
        stdout == expected,
        "results differ from session.itch.expected.jsonl"
    );
}

/// A BinaryFILE record stamped an hour ahead of those after it: each of
/// those is a step back in time, counted and warned about as a capture's
/// datagrams out of order are (checks between answered from the state at
/// the forward stamp).
#[test]
fn a_binary_file_out_of_time_order_is_counted_and_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let mut file = std::fs::read(itch_fixtures().join("session.itch")).unwrap();
    // Record 700: a 2-byte length, then the message, its timestamp 48
    // bits at bytes 5..11.
    let mut at = 0;
    for _ in 0..700 {
        at += 2 + usize::from(u16::from_be_bytes([file[at], file[at + 1]]));
    }
    let ts = &mut file[at + 2 + 5..at + 2 + 11];
    let mut raw = [0u8; 8];
    raw[2..].copy_from_slice(ts);
    let later = u64::from_be_bytes(raw) + 3_600_000_000_000;
    ts.copy_from_slice(&later.to_be_bytes()[2..]);
    let path = dir.path().join("ahead.itch");
    std::fs::write(&path, &file).unwrap();
    let (code, _, stderr, summary) = replay_itch(
        path.to_str().unwrap(),
        &["--feed", "nasdaq", "--date", "2026-01-05"],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("the file's record stamps step back"),
        "{stderr}"
    );
    assert!(!stderr.contains("reordercap"), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&summary.unwrap()).unwrap();
    let steps = json["capture"]["time_steps_back"].as_u64().unwrap_or(0);
    assert!(steps > 0, "{json}");
    // The file as committed steps back nowhere.
    let (_, _, stderr, _) = replay_itch(
        "session.itch",
        &["--feed", "nasdaq", "--date", "2026-01-05"],
    );
    assert!(!stderr.contains("step back"), "{stderr}");
}

/// The committed BinaryFILE session cut 3 bytes short (its last record
/// truncated), written in `dir`; and the whole file's bytes.
fn cut_session(dir: &Path) -> (std::path::PathBuf, Vec<u8>) {
    let whole = std::fs::read(itch_fixtures().join("session.itch")).unwrap();
    let cut = dir.join("cut.itch");
    std::fs::write(&cut, &whole[..whole.len() - 3]).unwrap();
    (cut, whole)
}

/// A reader that stops early (`| head`) stops the results only: a
/// truncated BinaryFILE still exits 2 with its one line, and the summary
/// is written (the error was lost, and the exit 0, when the closed pipe
/// ended the command first). So for `--explain`'s text.
#[test]
fn a_reader_that_stops_early_loses_neither_the_break_nor_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let (cut, _) = cut_session(dir.path());
    // More results than a pipe holds.
    let mut checks = String::from("time_ns,feed,symbol\n");
    for k in 0..5_000u64 {
        checks.push_str(&format!("{},nasdaq,AAPL\n", 1_767_623_398_750_000_000 + k));
    }
    let checks_path = dir.path().join("checks.csv");
    std::fs::write(&checks_path, checks).unwrap();
    for explain in [false, true] {
        let summary = dir.path().join(format!("summary-{explain}.json"));
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("tickguard"));
        cmd.arg("replay")
            .arg(&cut)
            .arg("--config")
            .arg(itch_fixtures().join("config.toml"))
            .args(["--feed", "nasdaq", "--date", "2026-01-05", "--no-progress"])
            .arg("--summary")
            .arg(&summary);
        if explain {
            cmd.args(["--explain", "nasdaq", "AAPL", "--explain-all"]);
        } else {
            cmd.arg("--checks").arg(&checks_path);
        }
        let (code, stderr) = crate::common::with_reader_gone(&mut cmd);
        assert_eq!(code, Some(2), "explain {explain}: {stderr}");
        assert!(stderr.contains("truncated record"), "{stderr}");
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
        assert!(json.get("feeds").is_some(), "{json}");
    }
}

/// `replay FILE --explain nasdaq AAPL --at AT` of a BinaryFILE of
/// 2026-01-05 with the fixtures' configuration.
fn explain_aapl_at(file: &Path, at: &str) -> std::process::Output {
    assert_cmd::Command::cargo_bin("tickguard")
        .unwrap()
        .arg("replay")
        .arg(file)
        .arg("--config")
        .arg(itch_fixtures().join("config.toml"))
        .args(["--feed", "nasdaq", "--date", "2026-01-05", "--no-progress"])
        .args(["--explain", "nasdaq", "AAPL", "--at", at])
        .output()
        .unwrap()
}

/// `--explain --at` past the break of a broken BinaryFILE says the answer
/// is from the state at the break, not that nothing arrived after it.
#[test]
fn explain_at_past_a_break_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (cut, _) = cut_session(dir.path());
    let out = explain_aapl_at(&cut, "2026-01-05T20:00:00Z");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is past the input's break"), "{stderr}");
    assert!(!stderr.contains("assumes nothing arrived"), "{stderr}");
}

/// `--explain --at` after the last record of a whole BinaryFILE names a
/// record, not a datagram (a file has none).
#[test]
fn explain_at_after_a_files_end_names_its_last_record() {
    let out = explain_aapl_at(
        &itch_fixtures().join("session.itch"),
        "2026-01-05T23:00:00Z",
    );
    let stderr = crate::common::without_end_line(&String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("after the file's last valid record (2026-01-05T")
            && !stderr.contains("datagram"),
        "{stderr}"
    );
}

/// "A truncated last record makes the file unreadable: results so far are
/// written, and the exit is non-zero with a message naming the byte offset"
/// (spec itch50 §5).
#[test]
fn a_truncated_binary_file_is_replayed_up_to_the_break() {
    let dir = tempfile::tempdir().unwrap();
    let (cut, whole) = cut_session(dir.path());
    let (code, stdout, stderr, summary) = replay_itch(
        cut.to_str().unwrap(),
        &["--feed", "nasdaq", "--date", "2026-01-05"],
    );
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let cut_at = {
        let mut r = BinFile::open(&cut).unwrap();
        while let Ok(Some(_)) = r.next_record() {}
        r.offset()
    };
    assert_eq!(
        stderr,
        format!(
            "tickguard: BinaryFILE {}: truncated record at byte {cut_at} of the uncompressed \
             stream: {} of {} bytes after the length\n",
            cut.display(),
            whole.len() - 3 - cut_at as usize - 2,
            whole.len() - cut_at as usize - 2,
        ),
    );
    // "results so far are written" (spec itch50 §5): one line per check, in
    // input order. A check before the cut record's time reads as in the
    // whole file's golden results; every line reads as in a replay of the
    // file without that record.
    let mut r = BinFile::open(&itch_fixtures().join("session.itch")).unwrap();
    let mut last = Vec::new();
    while let Some((_, rec)) = r.next_record().unwrap() {
        last = rec.to_vec();
    }
    let ts = u64::from_be_bytes([0, 0, last[5], last[6], last[7], last[8], last[9], last[10]]);
    let break_ns = T0 - OPEN + ts;
    let checks = load_checks(&itch_fixtures().join("checks.csv")).unwrap();
    let golden =
        std::fs::read_to_string(itch_fixtures().join("session.itch.expected.jsonl")).unwrap();
    let (lines, golden): (Vec<&str>, Vec<&str>) =
        (stdout.lines().collect(), golden.lines().collect());
    assert_eq!(lines.len(), checks.len(), "one line per check");
    let before: Vec<usize> = (0..checks.len())
        .filter(|&i| checks[i].time_ns < break_ns)
        .collect();
    assert!(
        !before.is_empty() && before.len() < checks.len(),
        "{}",
        before.len()
    );
    for &i in &before {
        assert_eq!(lines[i], golden[i], "check {i}, before the break");
    }
    let clean = dir.path().join("clean.itch");
    std::fs::write(&clean, &whole[..whole.len() - 2 - last.len()]).unwrap();
    let (clean_code, clean_stdout, stderr, _) = replay_itch(
        clean.to_str().unwrap(),
        &["--feed", "nasdaq", "--date", "2026-01-05"],
    );
    assert_eq!(clean_code, 0, "{stderr}");
    // The checks later than the last record read are marked: answered
    // from the state at the break, what came after it unread.
    let mut r = BinFile::open(&clean).unwrap();
    let mut read_ns = 0;
    while let Some((_, rec)) = r.next_record().unwrap() {
        let ts = u64::from_be_bytes([0, 0, rec[5], rec[6], rec[7], rec[8], rec[9], rec[10]]);
        read_ns = read_ns.max(T0 - OPEN + ts);
    }
    let marked = ",\"past_break\":true}";
    for (line, check) in lines.iter().zip(&checks) {
        assert_eq!(
            line.ends_with(marked),
            check.time_ns > read_ns,
            "{line} (last record read at {read_ns})"
        );
    }
    assert!(lines.iter().any(|l| l.ends_with(marked)));
    assert!(
        stdout.replace(marked, "}") == clean_stdout,
        "results differ from the file without the cut record"
    );
    let s: serde_json::Value = serde_json::from_str(&summary.expect("summary written")).unwrap();
    assert_eq!(
        s["feeds"]["nasdaq"]["messages"], 1627,
        "every record but the cut one"
    );
    assert_eq!(s["feeds"]["nasdaq"]["invalid_records"], 0);
    assert_eq!(s["feeds"]["nasdaq"]["session"], serde_json::Value::Null);
    // --feed needs an itch50 feed and --date.
    let (code, _, stderr, _) =
        replay_itch("session.itch", &["--feed", "nope", "--date", "2026-01-05"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("no feed 'nope'"), "{stderr}");
    let (code, _, stderr, _) = replay_itch("session.itch", &["--feed", "nasdaq"]);
    assert_eq!(code, 2, "{stderr}");
    // A capture named as a BinaryFILE: said so, not read as records.
    let (code, _, stderr, _) = replay_itch(
        "session.pcap",
        &["--feed", "nasdaq", "--date", "2026-01-05"],
    );
    assert_eq!(code, 2);
    assert!(
        stderr.contains("a packet capture (pcap or pcapng), not a BinaryFILE"),
        "{stderr}"
    );
    // Gzip'd, the same (it was read as records of the inflated bytes).
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("session.pcap.gz");
    let mut w = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::fast(),
    );
    std::io::Write::write_all(
        &mut w,
        &std::fs::read(itch_fixtures().join("session.pcap")).unwrap(),
    )
    .unwrap();
    w.finish().unwrap();
    let (code, _, stderr, _) = replay_itch(
        gz.to_str().unwrap(),
        &["--feed", "nasdaq", "--date", "2026-01-05"],
    );
    assert_eq!(code, 2);
    // Told to decompress it: replayed without --feed and --date as it is,
    // a gzip'd capture is refused too.
    assert!(
        stderr.contains(
            "a gzip-compressed packet capture (pcap or pcapng), not a BinaryFILE: decompress \
             it, then replay it without --feed and --date"
        ),
        "{stderr}"
    );
}

/// A record that fails validation counts in `messages` and
/// `invalid_records` only, and its sequence is stepped over with no gap.
#[test]
fn invalid_binary_file_records_are_counted_and_stepped_over() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.itch");
    let aapl = Symbol::parse("AAPL").unwrap();
    let bytes = binfile(&[
        encode::add_order(7, OPEN, 1, Side::Buy, 100, aapl, 1_900_000, None),
        b"A\x00".to_vec(), // shorter than the header
        encode::add_order(7, OPEN + 1, 2, Side::Sell, 100, aapl, 1_900_100, None)[..30].to_vec(),
        encode::add_order(7, OPEN + 2, 3, Side::Sell, 100, aapl, 1_900_200, None),
    ]);
    std::fs::write(&path, &bytes).unwrap();
    let (code, _, stderr, summary) = replay_itch(
        path.to_str().unwrap(),
        &["--feed", "nasdaq", "--date", "2026-01-05"],
    );
    assert_eq!(code, 0, "{stderr}");
    let s: serde_json::Value = serde_json::from_str(&summary.unwrap()).unwrap();
    let f = &s["feeds"]["nasdaq"];
    assert_eq!(
        (f["messages"].as_u64(), f["invalid_records"].as_u64()),
        (Some(4), Some(2))
    );
    assert_eq!(
        (f["next"].as_u64(), f["ticks_lost"].as_u64()),
        (Some(5), Some(0))
    );
    assert_eq!(f["suspect"], false);
    assert_eq!(f["symbols"]["AAPL"]["ask"], 1_900_200);
    assert_eq!(f["symbols"]["AAPL"]["orders"], 2);
    // Nowhere else: not by type, not as an unknown order or an anomaly.
    assert_eq!(f["messages_by_type"], serde_json::json!({ "A": 2 }));
    assert_eq!(
        (f["unknown_orders"].as_u64(), f["anomalies"].as_u64()),
        (Some(0), Some(0))
    );
}

/// A BinaryFILE of `records`, each preceded by its u16 big-endian length.
fn binfile(records: &[Vec<u8>]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for record in records {
        bytes.extend_from_slice(&(record.len() as u16).to_be_bytes());
        bytes.extend_from_slice(record);
    }
    bytes
}

/// The date of the BinaryFILEs these tests write.
fn file_date() -> jiff::civil::Date {
    jiff::civil::date(2026, 1, 5)
}

/// The reasons a check `dt` after T0 gets from the BinaryFILE at `path`,
/// record by record (an observer of every record) and in batches (up to
/// the check, and after it): `want` both ways.
fn file_answers(path: &std::path::Path, dt: u64, want: &[&str]) {
    let config = Config::parse(CONFIG, "itch.toml").unwrap();
    for all in [true, false] {
        let mut o = OneByOne {
            all,
            ..OneByOne::default()
        };
        let checks = [check(dt)];
        let outcome = replay_file_with(
            &config,
            "nasdaq",
            file_date(),
            path,
            &checks,
            |_| {},
            &mut o,
        );
        let got: Vec<&str> = outcome.unwrap().answers[0].reasons.names().collect();
        assert_eq!(got, want, "one by one: {all}");
    }
}

/// The feed's last proof of life and source watermark at the end of a replay.
#[derive(Default)]
struct TimesAtEnd(Option<(Option<u64>, Option<i128>)>);

impl Observer for TimesAtEnd {
    fn end(&mut self, handler: &mut Handler) {
        let it = handler.feeds()[0].engine().itch().unwrap();
        self.0 = Some((it.last_alive(), it.source_watermark()));
    }
}

/// "its sequence is stepped over with no gap and no change of time" (spec
/// itch50 §5): an invalid record 1 s after a valid one moves neither
/// liveness nor the source watermark, record by record (an observer of
/// every record) or in batches (up to a check, and after it).
#[test]
fn an_invalid_binary_file_record_changes_no_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("late.itch");
    let aapl = Symbol::parse("AAPL").unwrap();
    let mut late = encode::add_order(7, OPEN + 1_000 * MS, 2, Side::Sell, 1, aapl, 1, None);
    late[24] = 0x01; // not a printable stock
    assert!(tickguard::protocol::itch50::message::check(&late).is_err());
    let valid = encode::add_order(7, OPEN, 1, Side::Buy, 100, aapl, 1_900_000, None);
    std::fs::write(&path, binfile(&[valid, late])).unwrap();
    let (config, date) = (Config::parse(CONFIG, "itch.toml").unwrap(), file_date());
    // 2.5 s after the valid record: past both thresholds (1.5 s, 2 s); 1.5 s
    // after the invalid one's header time: within both.
    file_answers(&path, 2_500 * MS, &["stale", "stale_at_source"]);
    let mut at_end = TimesAtEnd::default();
    replay_file_with(&config, "nasdaq", date, &path, &[], |_| {}, &mut at_end).unwrap();
    assert_eq!(at_end.0, Some((Some(T0), Some(T0 as i128))));
}

/// "`trading_state` (one letter, null before any `H`)", "`session` (…, null
/// before any packet), `next` (null before any packet)" (spec itch50 §5).
#[test]
fn summary_nulls_before_any_halt_and_before_any_packet() {
    let config = format!(
        "[state]\ncapacity = 131072\n{CONFIG}\n[[feed]]\nname = \"quiet\"\nprotocol = \"itch50\"\nlines = [\"239.2.1.3:26477\"]\nstale_threshold_ms = 1500\nsource_threshold_ms = 2000\n"
    );
    let aapl = Symbol::parse("AAPL").unwrap();
    let mut messages = aapl_and_msft_bids().to_vec();
    messages.push(encode::trading_action(7, OPEN, aapl, b'T'));
    let p1 = packet(1, &messages);
    let outcome = replay_datagrams(&config, vec![(0, a(), p1)], &[]);
    let json = serde_json::to_value(&outcome.summary).unwrap();
    let null = Some(&serde_json::Value::Null);
    let f = &json["feeds"]["nasdaq"];
    assert_eq!(f["symbols"]["AAPL"]["trading_state"], "T", "{f}");
    assert_eq!(f["symbols"]["MSFT"].get("trading_state"), null, "{f}");
    // An `H` whose state byte is 0: after it, not null (the byte, escaped).
    let mut messages = aapl_and_msft_bids().to_vec();
    messages.push(encode::trading_action(7, OPEN, aapl, 0));
    let outcome = replay_datagrams(&config, vec![(0, a(), packet(1, &messages))], &[]);
    let json = serde_json::to_value(&outcome.summary).unwrap();
    let f = &json["feeds"]["nasdaq"];
    assert_eq!(f["symbols"]["AAPL"]["trading_state"], "\\x00", "{f}");
    let q = &json["feeds"]["quiet"];
    assert_eq!((q.get("next"), q.get("session")), (null, null), "{q}");
    assert_eq!(
        (f["next"].as_u64(), f["session"].as_str()),
        (Some(4), Some("20260105XA"))
    );
}

/// Keeps the books' price levels on the replay's own thread.
struct OneThread;

impl Observer for OneThread {
    fn books_on_one_thread(&self) -> bool {
        true
    }
}

/// A record stamped past the day (25 h or more after midnight: no time of
/// the session) changes no time in a file replay either: no check waits
/// on it, it proves nothing alive and raises no watermark, and the file's
/// later records are answered in their turn (the halt after it, here).
#[test]
fn a_binary_file_record_past_the_day_changes_no_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("past.itch");
    let aapl = Symbol::parse("AAPL").unwrap();
    let valid = encode::add_order(7, OPEN, 1, Side::Buy, 100, aapl, 1_900_000, None);
    let past = encode::system_event((1 << 48) - 1, b'Q');
    let halt = encode::trading_action(7, OPEN + 100 * MS, aapl, b'H');
    std::fs::write(&path, binfile(&[valid.clone(), past.clone(), halt.clone()])).unwrap();
    let (config, date) = (Config::parse(CONFIG, "itch.toml").unwrap(), file_date());
    file_answers(&path, 500 * MS, &["halted"]);
    // The record past the day last: the proof of life is still the halt's.
    let halted_at = T0 + 100 * MS;
    for records in [
        [valid.clone(), past.clone(), halt.clone()],
        [valid, halt, past],
    ] {
        std::fs::write(&path, binfile(&records)).unwrap();
        let mut at_end = TimesAtEnd::default();
        replay_file_with(&config, "nasdaq", date, &path, &[], |_| {}, &mut at_end).unwrap();
        assert_eq!(at_end.0, Some((Some(halted_at), Some(halted_at as i128))));
    }
}

/// A replay applies the books' price levels on a second thread; with them
/// on its own thread the committed ITCH fixtures give the same answers and
/// the same summary, from a capture and from a BinaryFILE.
#[test]
fn the_books_on_one_thread_or_two_replay_alike() {
    use tickguard::capture::CaptureReader;
    let f = itch_fixtures();
    let config = Config::load(&f.join("config.toml")).unwrap();
    let checks = load_checks(&f.join("checks.csv")).unwrap();
    let same = |two: tickguard::replay::Outcome, one: tickguard::replay::Outcome, what: &str| {
        assert_eq!(two.answers, one.answers, "{what}: answers");
        assert_eq!(
            serde_json::to_string(&two.summary).unwrap(),
            serde_json::to_string(&one.summary).unwrap(),
            "{what}: summary"
        );
    };
    for input in ["session.pcap", "join.pcap"] {
        let open = || CaptureReader::open(&f.join(input)).unwrap();
        let two = replay(&config, &mut open(), &checks, |_| {});
        let one =
            tickguard::replay::replay_with(&config, &mut open(), &checks, |_| {}, &mut OneThread);
        same(two, one, input);
    }
    let date = jiff::civil::date(2026, 1, 5);
    let path = f.join("session.itch");
    let two = replay_file(&config, "nasdaq", date, &path, &checks, |_| {}).unwrap();
    let one = replay_file_with(
        &config,
        "nasdaq",
        date,
        &path,
        &checks,
        |_| {},
        &mut OneThread,
    )
    .unwrap();
    same(two, one, "session.itch");
}

/// Counts the BinaryFILE records a replay applies one by one (the hooks
/// it calls only there), keeping their times when it wants them all.
#[derive(Default)]
struct OneByOne {
    /// Wants every record's time: every record goes one by one.
    all: bool,
    records: u64,
    times: Vec<Option<u64>>,
}

impl Observer for OneByOne {
    fn wants_record_times(&self) -> bool {
        self.all
    }

    fn before_record(&mut self, _: &mut Handler, _: u16, _: u64, time: Option<u64>) {
        self.records += 1;
        self.times.push(time);
    }
}

/// A BinaryFILE replay applies the records between checks in batches and
/// stops only at each check's time: a check after the last record sends
/// no record down the one-by-one path, checks inside the file one each at
/// most, and the answers and summary are those of a replay that applies
/// every record one by one.
#[test]
fn a_binary_file_replay_stops_only_at_each_checks_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("day.itch");
    let mut day = Vec::new();
    tickguard::protocol::itch50::synth::synthetic_day(&mut day, 200_000, 40, 11).unwrap();
    std::fs::write(&path, &day).unwrap();
    let config = Config::parse(CONFIG, "itch.toml").unwrap();
    let date = jiff::civil::date(2026, 1, 5);
    let replay = |checks: &[Check], o: &mut OneByOne| {
        let out = replay_file_with(&config, "nasdaq", date, &path, checks, |_| {}, o).unwrap();
        assert!(out.input_error.is_none());
        (out.answers, serde_json::to_string(&out.summary).unwrap())
    };
    // Every record one by one, with its time.
    let mut all = OneByOne {
        all: true,
        ..OneByOne::default()
    };
    let (_, summary) = replay(&[], &mut all);
    let times: Vec<u64> = all.times.iter().flatten().copied().collect();
    assert!(times.len() > 150_000, "{}", times.len());
    let last = *times.iter().max().unwrap();
    let json: serde_json::Value = serde_json::from_str(&summary).unwrap();
    let stocks: Vec<String> = json["feeds"]["nasdaq"]["symbols"]
        .as_object()
        .unwrap()
        .keys()
        .take(3)
        .cloned()
        .collect();
    let at = |time_ns: u64, k: usize| Check {
        time_ns,
        feed: "nasdaq".into(),
        symbol: stocks[k % stocks.len()].clone(),
    };
    // One check after the last record: no record one by one.
    let mut late = OneByOne::default();
    let (answers, s) = replay(&[at(last + 1, 0)], &mut late);
    assert_eq!(
        late.records, 0,
        "records applied one by one for a late check"
    );
    assert_eq!(s, summary);
    let mut forced = OneByOne {
        all: true,
        ..OneByOne::default()
    };
    assert_eq!(replay(&[at(last + 1, 0)], &mut forced).0, answers);
    // Checks inside the file: at a record's time, 1 ns before one, two at
    // the same time, in no order; at most one record each one by one.
    let inside: Vec<Check> = [
        times[times.len() / 2],
        times[1_000] - 1,
        times[100_000],
        times[100_000],
        times[5],
        times[0] - 1,
    ]
    .iter()
    .enumerate()
    .map(|(k, &t)| at(t, k))
    .collect();
    let mut some = OneByOne::default();
    let (answers, s) = replay(&inside, &mut some);
    assert!(some.records <= inside.len() as u64, "{}", some.records);
    assert_eq!(s, summary);
    let mut forced = OneByOne {
        all: true,
        ..OneByOne::default()
    };
    assert_eq!(replay(&inside, &mut forced).0, answers);
}

/// Every test docs/itch-coverage.md names for a rule of the ITCH or the
/// GLIMPSE contract exists, and is a test that runs.
#[test]
fn the_coverage_table_names_tests_that_exist() {
    let named = crate::common::coverage_table_tests("docs/itch-coverage.md", "itch50", "itch_");
    assert!(named > 200, "{named} tests named");
}

/// A replay answers an exchange feed from its books whatever the table's
/// room, where live gives the symbols past it no slot (`no_quote`): a
/// replay holding more symbols than live has slots for says so; one
/// within them, nothing.
#[test]
fn a_replay_holding_more_symbols_than_the_table_has_slots_says_so() {
    let stocks: Vec<Vec<u8>> = ["AAPL", "MSFT", "NVDA"]
        .iter()
        .enumerate()
        .map(|(i, s)| encode::stock_directory(i as u16 + 1, OPEN, Symbol::parse(s).unwrap()))
        .collect();
    let told = |capacity: usize, max_symbols: usize| {
        warned(&stocks, &format!("max_symbols = {max_symbols}\n"), capacity)
            .into_iter()
            .filter(|l| l.contains("slots live has"))
            .collect::<Vec<_>>()
    };
    let lines = told(2, 100);
    assert_eq!(
        lines,
        ["feed 'nasdaq': 3 symbols held, more than the 2 slots live has for them ([state] capacity, or the feed's own limit): live, the ones past them answer no_quote, while this replay answered them from the books"]
    );
    assert!(told(3, 100).is_empty());
    // The feed's own limit refuses the third in the replay too.
    assert!(told(100, 2).is_empty());
    // Which the replay tells, and adds refused past max_orders likewise.
    let mut messages = stocks.clone();
    let aapl = Symbol::parse("AAPL").unwrap();
    for r in 1..=3 {
        messages.push(encode::add_order(
            1,
            OPEN,
            r,
            Side::Buy,
            100,
            aapl,
            100_000,
            None,
        ));
    }
    let refused = |extra: &str| -> Vec<String> {
        warned(&messages, extra, 100)
            .into_iter()
            .filter(|l| l.contains("refused"))
            .collect()
    };
    assert_eq!(
        refused("max_symbols = 2\n"),
        ["feed 'nasdaq': 1 messages refused a new symbol past its max_symbols (the feed suspect until the session changes or a snapshot that refused nothing merges, those symbols no_quote: raise max_symbols)"]
    );
    assert_eq!(
        refused("max_orders = 1\n"),
        ["feed 'nasdaq': 2 adds refused past its max_orders (the feed suspect until the session changes or a snapshot that refused nothing merges, its books short of them: raise max_orders)"]
    );
    assert!(refused("").is_empty());
}

/// The replay's input warnings for one datagram of `messages` on line A,
/// the feed configured with `extra` keys and the table's `capacity`.
fn warned(messages: &[Vec<u8>], extra: &str, capacity: usize) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("c.pcap");
    let file = std::io::BufWriter::new(std::fs::File::create(&cap).unwrap());
    let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::RawIp).unwrap();
    let src: SocketAddrV4 = "10.0.0.9:5000".parse().unwrap();
    w.write_udp(T0, src, a(), &packet(1, messages)).unwrap();
    w.finish().unwrap();
    let text = format!(
        "[state]\ncapacity = {capacity}\n{}{extra}",
        CONFIG.trim_start()
    );
    let config = Config::parse(&text, "itch.toml").unwrap();
    let mut capture = tickguard::capture::CaptureReader::open(&cap).unwrap();
    let outcome = replay(&config, &mut capture, &[], |_| {});
    tickguard::replay::input_warnings(&config, &outcome.summary)
}

/// A recording made with `recovery_listen` left at `0.0.0.0:0` names the
/// port the kernel gave the channel as its answers' destination: "port 0
/// matches nothing" (spec itch50 §3.2) leaves them unrouted in a replay
/// with the same configuration, and the replay says so and how to replay
/// them; so does a capture of the host (the answers from the `recovery`
/// server to that port: unrouted, the replay gave up the gaps live
/// filled, without a word); another sender's, or a configured port's,
/// are not told.
#[test]
fn a_recordings_answers_to_a_kernel_chosen_port_are_told() {
    let config = CONFIG.replace(
        "recovery_listen = \"0.0.0.0:18001\"",
        "recovery = \"10.0.0.5:18000\"",
    );
    let told = |src: &str, config: &str| {
        let dir = tempfile::tempdir().unwrap();
        let cap = dir.path().join("rec.pcap");
        let file = std::io::BufWriter::new(std::fs::File::create(&cap).unwrap());
        let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::RawIp).unwrap();
        let src: SocketAddrV4 = src.parse().unwrap();
        let given: SocketAddrV4 = "0.0.0.0:54321".parse().unwrap();
        w.write_udp(T0, src, a(), &PacketBuilder::heartbeat(S1, 1))
            .unwrap();
        w.write_udp(T0 + MS, src, given, &PacketBuilder::heartbeat(S1, 1))
            .unwrap();
        w.finish().unwrap();
        let config = Config::parse(config, "itch.toml").unwrap();
        let mut capture = tickguard::capture::CaptureReader::open(&cap).unwrap();
        let outcome = replay(&config, &mut capture, &[], |_| {});
        assert_eq!(outcome.summary.capture.unrouted, 1);
        tickguard::replay::input_warnings(&config, &outcome.summary)
            .into_iter()
            .filter(|l| l.contains("the kernel chose"))
            .collect::<Vec<_>>()
    };
    for sender in ["0.0.0.0:0", "10.0.0.5:18000"] {
        let lines = told(sender, &config);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with(
                "1 datagrams of a recording, or from a feed's server, went to no line or channel"
            ) && lines[0].contains("(feed nasdaq's recovery_listen 0.0.0.0:0)"),
            "{lines:?}"
        );
    }
    assert!(told("10.9.9.9:5000", &config).is_empty());
    assert!(told("10.0.0.5:18001", &config).is_empty());
    assert!(told("0.0.0.0:0", CONFIG).is_empty());
    // No server: live opens no channel.
    let no_server = CONFIG.replace("recovery_listen = \"0.0.0.0:18001\"", "");
    assert!(told("0.0.0.0:0", &no_server).is_empty());
}
