//! `replay --explain FEED SYMBOL` on ITCH feeds: the verdict the steps imply
//! equals the feed's own answer at every change and every check of the
//! fixtures (captures and BinaryFILE), golden outputs, and the causes a
//! crafted capture shows (a gap given up at its deadline unblocking a halt,
//! an order crossing the book, a session change, a mid-session join).
//!
//! Goldens: `TICKGUARD_BLESS=1 cargo nextest run --test it explain::itch::`
//! rewrites them.

use super::tickguard;
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use tickguard::capture::link::Link;
use tickguard::capture::write::{CaptureWriter, Format};
use tickguard::capture::CaptureReader;
use tickguard::config::Config;
use tickguard::explain::itch::ItchExplain;
use tickguard::protocol::itch50::message::encode;
use tickguard::protocol::itch50::{PacketBuilder, Session, Side};
use tickguard::replay::itch50::{replay_file, replay_file_with};
use tickguard::replay::{replay, replay_with, Check, Outcome};
use tickguard::symbol::Symbol;
use tickguard::verdict::Reasons;

const SYMBOLS: [&str; 9] = [
    "AAPL", "MSFT", "NVDA", "AMZN", "GOOGL", "META", "QQQ", "TSLA", "ZZZZ",
];
const DATE: &str = "2026-01-05";

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/itch")
}

fn config() -> Config {
    Config::load(&dir().join("config.toml")).unwrap()
}

fn sym(s: &str) -> Symbol {
    Symbol::parse(s).unwrap()
}

fn checks(symbol: &str, times: impl IntoIterator<Item = u64>) -> Vec<Check> {
    times
        .into_iter()
        .map(|t| Check {
            time_ns: t,
            feed: "nasdaq".into(),
            symbol: symbol.into(),
        })
        .collect()
}

/// The fixture checks' times.
fn fixture_times() -> Vec<u64> {
    let text = std::fs::read_to_string(dir().join("checks.csv")).unwrap();
    let mut t: Vec<u64> = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').next()?.parse().ok())
        .collect();
    t.dedup();
    t
}

/// Replays `input` (a capture, or a BinaryFILE when its name has `.itch`)
/// with `observer`.
fn run(
    config: &Config,
    input: &str,
    checks: &[Check],
    observer: Option<&mut ItchExplain>,
) -> Outcome {
    let path = dir().join(input);
    if input.contains(".itch") {
        let date = DATE.parse().unwrap();
        return match observer {
            Some(x) => replay_file_with(config, "nasdaq", date, &path, checks, |_| {}, x),
            None => replay_file(config, "nasdaq", date, &path, checks, |_| {}),
        }
        .unwrap();
    }
    let mut reader = CaptureReader::open(&path).unwrap();
    match observer {
        Some(x) => replay_with(config, &mut reader, checks, |_| {}, x),
        None => replay(config, &mut reader, checks, |_| {}),
    }
}

fn explainer(config: &Config, symbol: &str) -> ItchExplain {
    ItchExplain::new(0, &config.feeds[0], sym(symbol), None)
}

/// For every fixture and symbol: the verdict the steps imply equals the
/// replay's own answer at each step, a nanosecond either side, and every
/// fixture check; and watching the feed changes none of the replay's
/// answers or its summary.
#[test]
fn explanation_agrees_with_the_feeds_own_verdict_at_every_change() {
    let config = config();
    for input in [
        "session.pcap",
        "join.pcap",
        "session.itch",
        "session.itch.gz",
    ] {
        for symbol in SYMBOLS {
            let mut x = explainer(&config, symbol);
            let fixture = checks(symbol, fixture_times());
            let watched = run(&config, input, &fixture, Some(&mut x));
            let plain = run(&config, input, &fixture, None);
            assert_eq!(watched.answers, plain.answers, "{input} {symbol}");
            assert_eq!(
                serde_json::to_string(&watched.summary).unwrap(),
                serde_json::to_string(&plain.summary).unwrap(),
                "{input} {symbol}: watching changed the summary"
            );
            // Each step ±1 ns, and halfway to the next (a verdict change
            // the steps missed, a deadline or a crossing, lies between).
            let steps: Vec<u64> = x.steps().iter().map(|s| s.time).collect();
            let times = crate::common::around(&steps, fixture_times());
            let answers = run(&config, input, &checks(symbol, times.clone()), None).answers;
            assert_eq!(
                answers.len(),
                times.len(),
                "{input} {symbol}: every check answered"
            );
            for (t, a) in times.iter().zip(&answers) {
                assert_eq!(
                    x.verdict_at(*t),
                    a.reasons,
                    "{input} {symbol} at {t}: the steps imply {}, the feed answered {}",
                    x.verdict_at(*t),
                    a.reasons
                );
            }
            if symbol != "ZZZZ" {
                assert!(
                    x.steps().iter().filter(|s| s.changed()).count() > 2,
                    "{input} {symbol}"
                );
            }
        }
    }
}

fn p(path: &Path) -> String {
    path.to_str().unwrap().to_string()
}

/// `replay INPUT --config fixtures/itch/config.toml [BinaryFILE flags] --explain nasdaq SYMBOL extra…`.
fn explain(input: &str, symbol: &str, extra: &[&str]) -> super::Run {
    let mut args = vec![
        "replay".to_string(),
        p(&dir().join(input)),
        "--config".into(),
        p(&dir().join("config.toml")),
    ];
    if input.contains(".itch") {
        args.extend(["--feed", "nasdaq", "--date", DATE].map(String::from));
    }
    args.extend(["--explain", "nasdaq", symbol].map(String::from));
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    tickguard(&args)
}

/// Golden outputs: (input, symbol, extra flags, golden file).
const GOLDEN: &[(&str, &str, &[&str], &str)] = &[
    ("session.pcap", "NVDA", &[], "session.explain-NVDA.txt"),
    (
        "join.pcap",
        "AMZN",
        &["--explain-all"],
        "join.explain-all-AMZN.txt",
    ),
    (
        "session.itch.gz",
        "TSLA",
        &[],
        "session.itch.explain-TSLA.txt",
    ),
    (
        "session.pcap",
        "NVDA",
        &["--at", "2026-01-05T14:30:07.2Z"],
        "session.at-NVDA.txt",
    ),
];

/// A change detector, not a proof: the goldens are this code's own output
/// (`TICKGUARD_BLESS=1` writes them). What proves the explanations right
/// is the agreement of the verdict their steps imply with the feed's own
/// answer at every change and check (this file), and `tests/itch_model.rs`
/// for the feed.
#[test]
fn explanations_match_their_goldens() {
    let bless = std::env::var_os("TICKGUARD_BLESS").is_some();
    for (input, symbol, extra, golden) in GOLDEN {
        let out = explain(input, symbol, extra);
        assert_eq!(out.code, 0, "{input} {symbol}: {}", out.stderr);
        let path = dir().join(golden);
        if bless {
            std::fs::write(&path, &out.stdout).unwrap();
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            out.stdout == want,
            "fixtures/itch/{golden} differs from the output:\n{}",
            out.stdout
        );
    }
}

/// The plain and gzip BinaryFILE explain the same; no progress bar on a pipe.
#[test]
fn binaryfile_plain_and_gzip_explain_alike_without_a_progress_bar() {
    let plain = explain("session.itch", "NVDA", &[]);
    let gz = explain("session.itch.gz", "NVDA", &[]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    assert_eq!(plain.stdout, gz.stdout);
    assert!(plain.stdout.contains("record "), "{}", plain.stdout);
    for run in [&plain, &gz] {
        let stderr = crate::common::without_end_line(&run.stderr);
        assert!(stderr.is_empty(), "stderr: {}", run.stderr);
        assert!(
            run.stderr
                .starts_with("tickguard: replayed 1628 records spanning 10.200 s in "),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn explain_errors_are_one_line() {
    let r = explain("session.itch", "NVDA", &["--timeline", "/tmp/x.svg"]);
    assert_eq!(r.code, 2);
    let r = explain("session.pcap", "NVDA", &["--timeline", "/tmp/x.svg"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("--timeline draws SQF feeds only"),
        "{}",
        r.stderr
    );
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    let r = explain("session.pcap", "NOSUCH", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("never quoted"), "{}", r.stdout);
}

const MS: u64 = 1_000_000;
/// 2026-01-05 14:30:00 UTC: 09:30 in New York.
const T0: u64 = 1_767_623_400_000_000_000;
const OPEN: u64 = 34_200_000_000_000;
const A: &str = "239.2.1.1:26477";
const S1: Session = Session(*b"2026010501");
const S2: Session = Session(*b"2026010502");

fn packet(session: Session, first: u64, messages: &[Vec<u8>]) -> Vec<u8> {
    let mut b = PacketBuilder::new(session, first);
    for m in messages {
        b.message(m);
    }
    b.finish()
}

fn write_capture(path: &Path, packets: &[(u64, Vec<u8>)]) {
    write_capture_as(path, Format::PcapNanos, packets);
}

fn write_capture_as(path: &Path, format: Format, packets: &[(u64, Vec<u8>)]) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = CaptureWriter::new(file, format, Link::Ethernet).unwrap();
    let src: SocketAddrV4 = "10.0.0.1:5000".parse().unwrap();
    for (t, p) in packets {
        w.write_udp(*t, src, A.parse().unwrap(), p).unwrap();
    }
    w.finish().unwrap();
}

/// A gap whose deadline passes with a halt held behind it: the halt is
/// applied at the deadline's next nanosecond, long before the next packet,
/// and explain says so then; an order that crosses the book names itself
/// and the top; a new session and a mid-session join start over.
#[test]
fn crafted_capture_shows_each_cause_at_its_time() {
    let x = sym("XYZ");
    let packets = vec![
        (
            T0,
            packet(
                S1,
                1,
                &[
                    encode::stock_directory(5, OPEN, x),
                    encode::add_order(5, OPEN + 1, 1, Side::Buy, 100, x, 100_000, None),
                    encode::add_order(5, OPEN + 2, 2, Side::Sell, 50, x, 101_000, None),
                ],
            ),
        ),
        // 4 is lost; 5 (a halt) is held behind the gap.
        (
            T0 + MS,
            packet(S1, 5, &[encode::trading_action(5, OPEN + 3, x, b'H')]),
        ),
        // 1 s later (far past the 100 ms timeout): a crossing buy.
        (
            T0 + 1000 * MS,
            packet(
                S1,
                6,
                &[encode::add_order(
                    5,
                    OPEN + 4,
                    3,
                    Side::Buy,
                    10,
                    x,
                    102_000,
                    None,
                )],
            ),
        ),
        // A new session, joined mid-way (beyond join_gap_max = 500).
        (
            T0 + 1200 * MS,
            packet(
                S2,
                900,
                &[
                    encode::stock_directory(5, OPEN + 5, x),
                    encode::add_order(5, OPEN + 6, 1, Side::Buy, 100, x, 100_000, None),
                ],
            ),
        ),
    ];
    let tmp = tempfile::tempdir().unwrap();
    let cap = tmp.path().join("crafted.pcap");
    write_capture(&cap, &packets);
    let config = config();
    let mut xp = explainer(&config, "XYZ");
    let mut reader = CaptureReader::open(&cap).unwrap();
    replay_with(&config, &mut reader, &[], |_| {}, &mut xp);
    let text = xp.explanation(true);
    let deadline = T0 + MS + 100 * MS;
    // The gap opened by packet 5, given up at deadline + 1 with the halt.
    let given_up = xp
        .steps()
        .iter()
        .find(|s| s.time == deadline + 1)
        .unwrap_or_else(|| panic!("no step at the deadline:\n{text}"));
    assert_eq!(given_up.before, Reasons::SUSPECT, "{text}");
    assert_eq!(given_up.after, Reasons::SUSPECT | Reasons::HALTED, "{text}");
    assert!(
        text.contains("gap opened: seq 4 missing (1 tick)"),
        "{text}"
    );
    assert!(text.contains("gap seq 4 expired"), "{text}");
    assert!(
        text.contains("1 tick lost; trading action H (halted)"),
        "{text}"
    );
    assert!(
        text.contains(
            "add order 3 (buy 10 @ 10.2000) at 09:30:00.000000004: crossed the book, now bid 10.2000 x 10, ask 10.1000 x 50"
        ),
        "{text}"
    );
    assert!(
        text.contains("session 2026010502 begins: books and symbols start empty; mid-session join: the session's first packet starts at seq 900"),
        "{text}"
    );
    // The verdict at each instant is the replay's own.
    let times: Vec<u64> = xp
        .steps()
        .iter()
        .flat_map(|s| [s.time - 1, s.time, s.time + 1])
        .collect();
    let mut reader = CaptureReader::open(&cap).unwrap();
    let out = replay(&config, &mut reader, &checks("XYZ", times.clone()), |_| {});
    assert_eq!(out.answers.len(), times.len(), "every check answered");
    for (t, a) in times.iter().zip(&out.answers) {
        assert_eq!(xp.verdict_at(*t), a.reasons, "at {t}:\n{text}");
    }
}

/// A symbol refused under `max_symbols` makes the whole feed suspect: the
/// explanation of another symbol names the refusal at that step, and the
/// verdict there is the replay's.
#[test]
fn a_symbol_refused_for_room_is_the_cause_of_suspect() {
    let (x, y) = (sym("XYZ"), sym("ABC"));
    let packets = vec![
        (
            T0,
            packet(
                S1,
                1,
                &[
                    encode::stock_directory(5, OPEN, x),
                    encode::add_order(5, OPEN + 1, 1, Side::Buy, 100, x, 100_000, None),
                ],
            ),
        ),
        (
            T0 + MS,
            packet(S1, 3, &[encode::stock_directory(6, OPEN + 2, y)]),
        ),
    ];
    let tmp = tempfile::tempdir().unwrap();
    let cap = tmp.path().join("refused.pcap");
    write_capture(&cap, &packets);
    let text = std::fs::read_to_string(dir().join("config.toml")).unwrap();
    let config = Config::parse(&format!("{text}max_symbols = 1\n"), "c").unwrap();
    let mut xp = explainer(&config, "XYZ");
    let mut reader = CaptureReader::open(&cap).unwrap();
    replay_with(&config, &mut reader, &[], |_| {}, &mut xp);
    let text = xp.explanation(false);
    let step = xp
        .steps()
        .iter()
        .find(|s| s.time == T0 + MS)
        .unwrap_or_else(|| panic!("no step at the refusal:\n{text}"));
    assert_eq!(
        (step.before, step.after),
        (Reasons::empty(), Reasons::SUSPECT)
    );
    assert!(
        text.contains("ABC refused a symbol: the session holds 1 symbols (max_symbols)"),
        "{text}"
    );
    let mut reader = CaptureReader::open(&cap).unwrap();
    let out = replay(&config, &mut reader, &checks("XYZ", [T0 + MS]), |_| {});
    assert_eq!(out.answers[0].reasons, Reasons::SUSPECT);
}

/// Watching a feed changes none of the replay's answers or its summary
/// when the capture ends with a gap open: nothing expires at the end, and
/// the summary still shows it, however far the explanation looks ahead.
#[test]
fn watching_changes_nothing_when_a_gap_is_left_open() {
    let x = sym("XYZ");
    let add = |seq: u64| encode::add_order(5, OPEN + seq, seq, Side::Buy, 100, x, 100_000, None);
    let packets = vec![
        (
            T0,
            packet(
                S1,
                1,
                &[encode::stock_directory(5, OPEN, x), add(2), add(3)],
            ),
        ),
        // 10 opens 4..=9 (deadline T0 + 110 ms).
        (T0 + 10 * MS, packet(S1, 10, &[add(10)])),
        // Past it: 4..=9 given up, then 11..=19 in order.
        (
            T0 + 200 * MS,
            packet(S1, 11, &(11..=19).map(add).collect::<Vec<_>>()),
        ),
        // 30 opens 20..=29, still open when the capture ends.
        (T0 + 250 * MS, packet(S1, 30, &[add(30)])),
    ];
    let tmp = tempfile::tempdir().unwrap();
    let cap = tmp.path().join("open.pcap");
    write_capture(&cap, &packets);
    let config = config();
    let times = [5, 100, 111, 199, 201, 251].map(|ms| T0 + ms * MS);
    let asked = checks("XYZ", times);
    let mut xp = explainer(&config, "XYZ");
    let mut reader = CaptureReader::open(&cap).unwrap();
    let watched = replay_with(&config, &mut reader, &asked, |_| {}, &mut xp);
    let mut reader = CaptureReader::open(&cap).unwrap();
    let plain = replay(&config, &mut reader, &asked, |_| {});
    let text = xp.explanation(true);
    assert_eq!(watched.answers, plain.answers, "{text}");
    let summary = |o: &Outcome| serde_json::to_value(&o.summary).unwrap();
    assert_eq!(summary(&watched), summary(&plain), "{text}");
    let feed = &summary(&plain)["feeds"]["nasdaq"];
    assert_eq!(feed["gaps_open"], 1, "{feed}");
    assert_eq!(feed["ticks_lost"], 6, "{feed}");
    // The explanation still tells what a later check would see: the gap
    // left open given up at its deadline.
    assert!(
        text.contains("gap seq 20..29 expired (deadline +350.000000 ms): 10 ticks lost"),
        "{text}"
    );
}

/// A gap whose deadline saturates at the largest time (its datagram
/// stamped within the gap timeout of 2^64 ns) never passes: the
/// explanation ends, as the replay does, with the gap told open.
#[test]
fn a_gap_deadline_at_the_end_of_time_ends_the_explanation() {
    let x = sym("XYZ");
    let add = |seq: u64| encode::add_order(5, OPEN + seq, seq, Side::Buy, 100, x, 100_000, None);
    let packets = vec![
        (
            T0,
            packet(S1, 1, &[encode::stock_directory(5, OPEN, x), add(2)]),
        ),
        (u64::MAX - 1, packet(S1, 5, &[add(5)])),
    ];
    let tmp = tempfile::tempdir().unwrap();
    let cap = tmp.path().join("end.pcapng");
    write_capture_as(&cap, Format::PcapNg { tsresol: 9 }, &packets);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let config = config();
        let mut xp = explainer(&config, "XYZ");
        let mut reader = CaptureReader::open(&cap).unwrap();
        let asked = checks("XYZ", [T0 + MS]);
        let out = replay_with(&config, &mut reader, &asked, |_| {}, &mut xp);
        let _ = tx.send((out.answers.len(), xp.explanation(true)));
    });
    let (answers, text) = rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the explanation ends");
    assert_eq!(answers, 1, "{text}");
    assert!(text.contains("gap opened: seq 3..4 missing"), "{text}");
    assert!(!text.contains("expired"), "{text}");
}

/// A datagram of many messages about the symbol keeps the first and last
/// few of their events in its step, and says how many between it left out:
/// a step's memory does not grow with its datagram (or a give-up releasing
/// `max_held` messages).
#[test]
fn a_step_keeps_the_first_and_last_of_many_messages() {
    let x = sym("XYZ");
    let mut messages = vec![
        encode::stock_directory(5, OPEN, x),
        encode::add_order(5, OPEN + 1, 1, Side::Buy, 100, x, 100_000, None),
        encode::add_order(5, OPEN + 2, 2, Side::Sell, 50, x, 101_000, None),
    ];
    // 20 trading actions, T then H in turn: the last halts it.
    for k in 0..20u64 {
        let state = if k % 2 == 0 { b'T' } else { b'H' };
        messages.push(encode::trading_action(5, OPEN + 10 + k, x, state));
    }
    let tmp = tempfile::tempdir().unwrap();
    let cap = tmp.path().join("many.pcap");
    write_capture(&cap, &[(T0, packet(S1, 1, &messages))]);
    let config = config();
    let mut xp = explainer(&config, "XYZ");
    let mut reader = CaptureReader::open(&cap).unwrap();
    let asked = checks("XYZ", [T0 + MS]);
    let out = replay_with(&config, &mut reader, &asked, |_| {}, &mut xp);
    assert_eq!(out.answers[0].reasons, Reasons::HALTED);
    // The session, then 21 messages' events (the bid's book change, the
    // 20 actions): the first 4 and the last 4 kept.
    let step = &xp.steps()[0];
    assert_eq!(step.events.len(), 1 + 8, "{step:?}");
    assert_eq!(step.untold, 13, "{step:?}");
    let text = xp.explanation(false);
    let line = text.lines().nth(1).unwrap();
    let parts: Vec<&str> = line.split("; ").collect();
    let told = parts
        .iter()
        .position(|p| p.starts_with("... 13 more messages' events not kept"));
    let actions: Vec<usize> = parts
        .iter()
        .enumerate()
        .filter(|(_, p)| p.starts_with("trading action"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(actions.len(), 7, "{line}");
    assert_eq!(told, Some(actions[2] + 1), "{line}");
    assert!(
        parts[actions[6]].starts_with("trading action H (halted)"),
        "{line}"
    );
    assert!(line.ends_with("-> halted"), "{line}");

    // The book crossed among the messages left out: its last change is
    // kept all the same, as the last of each kind is.
    let mut messages = vec![
        encode::stock_directory(5, OPEN, x),
        encode::add_order(5, OPEN + 1, 1, Side::Buy, 100, x, 100_000, None),
        encode::add_order(5, OPEN + 2, 2, Side::Sell, 50, x, 101_000, None),
    ];
    for k in 0..6u64 {
        messages.push(encode::trading_action(5, OPEN + 10 + k, x, b'T'));
    }
    messages.push(encode::add_order(
        5,
        OPEN + 20,
        3,
        Side::Buy,
        10,
        x,
        102_000,
        None,
    ));
    for k in 0..6u64 {
        messages.push(encode::trading_action(5, OPEN + 30 + k, x, b'T'));
    }
    write_capture(&cap, &[(T0, packet(S1, 1, &messages))]);
    let mut xp = explainer(&config, "XYZ");
    let mut reader = CaptureReader::open(&cap).unwrap();
    let out = replay_with(&config, &mut reader, &asked, |_| {}, &mut xp);
    assert_eq!(out.answers[0].reasons, Reasons::INVALID_PRICE);
    let text = xp.explanation(false);
    let line = text.lines().nth(1).unwrap();
    assert!(line.contains("crossed the book"), "{line}");
    assert!(line.contains("more messages' events not kept"), "{line}");
}

/// A GLIMPSE snapshot merged from the capture's snapshot connection (TCP)
/// is a step of its own, at the segment that completed it: the feed
/// joined mid-session is suspect until then and `ok` from then on, as the
/// replay answers at every instant, not only from the next datagram.
#[test]
fn a_glimpse_merge_is_explained_at_its_segment() {
    glimpse_merge_explained(1, 100);
    glimpse_merge_explained(3, 2);
}

/// [`a_glimpse_merge_is_explained_at_its_segment`] with a spin of `orders`
/// orders under `max_orders`: past it, the merge says what it refused.
fn glimpse_merge_explained(orders: u64, max_orders: usize) {
    use crate::common::glimpse::{message, spin_of, Venue, SESSION};
    use tickguard::capture::link::Tcp;
    let tmp = tempfile::tempdir().unwrap();
    let mut config = Venue::new(&tmp.path().join("shm")).config;
    match &mut config.feeds[0].settings {
        tickguard::config::ProtocolSettings::Itch50(c) => c.max_orders = max_orders,
        _ => unreachable!("an itch50 venue"),
    }
    let line: SocketAddrV4 = "239.9.9.1:9000".parse().unwrap();
    let from: SocketAddrV4 = "10.0.0.1:5000".parse().unwrap();
    let server: SocketAddrV4 = "127.0.0.1:18100".parse().unwrap();
    let local: SocketAddrV4 = "127.0.0.1:40001".parse().unwrap();
    let cap = tmp.path().join("glimpse.pcap");
    let mut w = CaptureWriter::new(
        std::io::BufWriter::new(std::fs::File::create(&cap).unwrap()),
        Format::PcapNanos,
        Link::Ethernet,
    )
    .unwrap();
    let datagram = |q: u64| {
        let mut b = PacketBuilder::new(SESSION, q);
        b.message(&message(q));
        b.finish()
    };
    // Joined at 100 (past join_gap_max): awaiting a snapshot.
    for q in 100..110 {
        w.write_udp(T0 + q * MS, from, line, &datagram(q)).unwrap();
    }
    // The spin, N = 105, completed by its segment at 150 ms; the next
    // datagram 300 ms later.
    let spin = spin_of(105, orders);
    w.write_tcp(T0 + 140 * MS, local, server, 7, Tcp::SYN, b"")
        .unwrap();
    w.write_tcp(
        T0 + 150 * MS,
        server,
        local,
        1_000,
        Tcp::ACK | Tcp::PSH,
        &spin,
    )
    .unwrap();
    let fin = 1_000 + spin.len() as u32;
    w.write_tcp(T0 + 151 * MS, server, local, fin, Tcp::FIN | Tcp::ACK, b"")
        .unwrap();
    w.write_udp(T0 + 450 * MS, from, line, &datagram(110))
        .unwrap();
    w.finish().unwrap();
    let (xp, text) = explain_aaa(&config, &cap);
    let merged = xp
        .steps()
        .iter()
        .find(|s| s.time == T0 + 150 * MS)
        .unwrap_or_else(|| panic!("no step at the merge:\n{text}"));
    assert_eq!(
        merged.before,
        Reasons::NO_QUOTE,
        "books wait for the snapshot:\n{text}"
    );
    let said = format!(
        "snapshot merged: GLIMPSE spin of {} messages up to seq 104, the stream going on from seq 105",
        orders + 1
    );
    assert!(text.contains(&said), "{text}");
    let refused = "; the snapshot refused adds (max_orders): the feed is suspect";
    if orders as usize > max_orders {
        assert_eq!(merged.after, Reasons::SUSPECT, "{text}");
        assert!(text.contains(&format!("{said}{refused}")), "{text}");
    } else {
        assert!(merged.after.is_ok(), "{text}");
        assert!(!text.contains(refused), "{text}");
    }
    let times = [149, 150, 151, 300, 449, 451].map(|ms| T0 + ms * MS);
    let mut reader = CaptureReader::open(&cap).unwrap();
    let asked: Vec<Check> = times
        .iter()
        .map(|&t| Check {
            time_ns: t,
            feed: "nq".into(),
            symbol: "AAA".into(),
        })
        .collect();
    let out = replay(&config, &mut reader, &asked, |_| {});
    for (t, a) in times.iter().zip(&out.answers) {
        assert_eq!(xp.verdict_at(*t), a.reasons, "at {t}:\n{text}");
    }
}

/// `cap` replayed under `config`, explaining AAA of its first feed: the
/// explainer and its whole text.
fn explain_aaa(config: &tickguard::config::Config, cap: &std::path::Path) -> (ItchExplain, String) {
    let mut xp = ItchExplain::new(0, &config.feeds[0], sym("AAA"), None);
    let mut reader = CaptureReader::open(cap).unwrap();
    let watched = replay_with(config, &mut reader, &[], |_| {}, &mut xp);
    assert!(watched.input_error.is_none(), "{:?}", watched.input_error);
    let text = xp.explanation(true);
    (xp, text)
}

/// A recorded snapshot request on a healthy feed (its connection's SYN:
/// an operator's SIGUSR1, say) holds the stream and makes the feed
/// suspect: the explanation says the feed awaits its snapshot.
#[test]
fn a_snapshot_connection_opened_is_told_as_the_wait() {
    use crate::common::glimpse::{message, Venue, SESSION};
    use tickguard::capture::link::Tcp;
    let tmp = tempfile::tempdir().unwrap();
    let config = Venue::new(&tmp.path().join("shm")).config;
    let line: SocketAddrV4 = "239.9.9.1:9000".parse().unwrap();
    let from: SocketAddrV4 = "10.0.0.1:5000".parse().unwrap();
    let server: SocketAddrV4 = "127.0.0.1:18100".parse().unwrap();
    let local: SocketAddrV4 = "127.0.0.1:40001".parse().unwrap();
    let cap = tmp.path().join("request.pcap");
    let mut w = CaptureWriter::new(
        std::io::BufWriter::new(std::fs::File::create(&cap).unwrap()),
        Format::PcapNanos,
        Link::Ethernet,
    )
    .unwrap();
    for q in 1..=60 {
        let mut b = PacketBuilder::new(SESSION, q);
        b.message(&message(q));
        w.write_udp(T0 + q * MS, from, line, &b.finish()).unwrap();
    }
    w.write_tcp(T0 + 140 * MS, local, server, 7, Tcp::SYN, b"")
        .unwrap();
    w.finish().unwrap();
    let (xp, text) = explain_aaa(&config, &cap);
    let step = xp
        .steps()
        .iter()
        .find(|s| s.time == T0 + 140 * MS)
        .unwrap_or_else(|| panic!("no step at the SYN:\n{text}"));
    assert!(step.after.contains(Reasons::SUSPECT), "{text}");
    assert!(
        text.contains("snapshot connection opened: the feed awaits its snapshot"),
        "{text}"
    );
}

/// Under `--feed` every datagram is line A's, whatever its destination
/// (a sanitised capture), and the explanation says so, as the feed took
/// it; a destination equal to line B's is still line A's then.
#[test]
fn under_feed_every_datagram_is_explained_as_line_as() {
    use tickguard::replay::{replay_until, Options};
    let x = sym("XYZ");
    let sanitised: SocketAddrV4 = "0.0.0.0:0".parse().unwrap();
    let line_b = config().feeds[0].lines[1];
    let tmp = tempfile::tempdir().unwrap();
    let cap = tmp.path().join("sanitised.pcap");
    let file = std::io::BufWriter::new(std::fs::File::create(&cap).unwrap());
    let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::Ethernet).unwrap();
    let src: SocketAddrV4 = "10.0.0.1:5000".parse().unwrap();
    let first = packet(S1, 1, &[encode::stock_directory(5, OPEN, x)]);
    let second = packet(
        S1,
        2,
        &[encode::add_order(
            5,
            OPEN + 1,
            1,
            Side::Buy,
            100,
            x,
            100_000,
            None,
        )],
    );
    w.write_udp(T0, src, sanitised, &first).unwrap();
    w.write_udp(T0 + MS, src, line_b, &second).unwrap();
    w.finish().unwrap();
    let config = config();
    let mut xp = explainer(&config, "XYZ");
    let mut reader = CaptureReader::open(&cap).unwrap();
    let options = Options {
        feed: Some(0),
        ..Options::default()
    };
    replay_until(&config, &mut reader, &[], options, |_| {}, &mut xp);
    let text = xp.explanation(true);
    assert!(text.contains("on line A 0.0.0.0:0"), "{text}");
    assert!(text.contains(&format!("on line A {line_b}")), "{text}");
    assert!(
        !text.contains("recovery channel") && !text.contains("line B"),
        "{text}"
    );
}

/// A BinaryFILE record stamped past the day (25 h or more after midnight)
/// is applied with no check waiting on it: the replay shows its change
/// from the record before it on, and so does the explanation (which told
/// it only at the next record in the day, its verdict between not the
/// replay's).
#[test]
fn a_record_stamped_past_the_day_is_explained_where_the_replay_applies_it() {
    let config = config();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("past.itch");
    let x = sym("XYZ");
    let past_the_day = 25 * 3_600 * 1_000_000_000 + 1;
    let records = [
        encode::system_event(OPEN, b'O'),
        encode::stock_directory(5, OPEN, x),
        encode::add_order(5, OPEN, 1, Side::Buy, 100, x, 100_000, None),
        encode::add_order(5, OPEN, 2, Side::Sell, 50, x, 101_000, None),
        encode::trading_action(5, past_the_day, x, b'H'),
        encode::add_order(5, OPEN + 5_000 * MS, 3, Side::Buy, 10, x, 99_000, None),
    ];
    let mut bytes = Vec::new();
    for r in &records {
        bytes.extend_from_slice(&(r.len() as u16).to_be_bytes());
        bytes.extend_from_slice(r);
    }
    std::fs::write(&path, bytes).unwrap();
    let date = DATE.parse().unwrap();
    let times: Vec<u64> = [0, 1, 1_000, 4_999, 5_000, 6_000]
        .iter()
        .map(|ms| T0 + ms * MS)
        .collect();
    let mut watch = explainer(&config, "XYZ");
    let checks = checks("XYZ", times.clone());
    let outcome =
        replay_file_with(&config, "nasdaq", date, &path, &checks, |_| {}, &mut watch).unwrap();
    assert!(
        outcome.answers[2].reasons.contains(Reasons::HALTED),
        "the replay applied the halt before the check at +1 s: {}",
        outcome.answers[2].reasons
    );
    for (t, a) in times.iter().zip(&outcome.answers) {
        assert_eq!(
            watch.verdict_at(*t),
            a.reasons,
            "at {t}: the steps imply {}, the replay answered {}",
            watch.verdict_at(*t),
            a.reasons
        );
    }
    // One before the file's first record in the day, or in a file with
    // none in the day: told as such, not dated at the epoch.
    let explained = |records: &[Vec<u8>]| {
        let mut bytes = Vec::new();
        for r in records {
            bytes.extend_from_slice(&(r.len() as u16).to_be_bytes());
            bytes.extend_from_slice(r);
        }
        std::fs::write(&path, bytes).unwrap();
        let mut watch = explainer(&config, "XYZ");
        replay_file_with(&config, "nasdaq", date, &path, &[], |_| {}, &mut watch).unwrap();
        watch.explanation(true)
    };
    let late = encode::system_event(past_the_day, b'O');
    let first = [
        late.clone(),
        encode::stock_directory(5, OPEN, x),
        encode::add_order(5, OPEN, 1, Side::Buy, 100, x, 100_000, None),
    ];
    for text in [explained(&first), explained(&[late])] {
        assert!(!text.contains("1970"), "{text}");
        assert!(
            text.contains("before the first record in the day"),
            "{text}"
        );
    }
}

/// Silence and source age crossing their thresholds in one nanosecond (the
/// two thresholds equal, the last message's source time its arrival): the
/// step tells both, as the verdict gains both reasons there.
#[test]
fn both_thresholds_crossed_in_one_nanosecond_are_both_told() {
    let x = sym("XYZ");
    let text = std::fs::read_to_string(dir().join("config.toml"))
        .unwrap()
        .replace("source_threshold_ms = 2000", "source_threshold_ms = 1500");
    let config = Config::parse(&text, "config.toml").unwrap();
    let packets = vec![(
        T0,
        packet(
            S1,
            1,
            &[
                encode::stock_directory(5, OPEN, x),
                encode::add_order(5, OPEN, 1, Side::Buy, 100, x, 100_000, None),
                encode::add_order(5, OPEN, 2, Side::Sell, 50, x, 101_000, None),
            ],
        ),
    )];
    let tmp = tempfile::tempdir().unwrap();
    let cap = tmp.path().join("tie.pcap");
    write_capture(&cap, &packets);
    let mut xp = explainer(&config, "XYZ");
    let mut reader = CaptureReader::open(&cap).unwrap();
    let at = T0 + 1500 * MS + 1;
    replay_with(&config, &mut reader, &checks("XYZ", [at]), |_| {}, &mut xp);
    let text = xp.explanation(false);
    let line = text
        .lines()
        .find(|l| l.ends_with("ok -> stale|stale_at_source"))
        .unwrap_or_else(|| panic!("no step gaining both:\n{text}"));
    assert!(
        line.contains("silence: no packet proving the feed alive"),
        "{line}"
    );
    assert!(
        line.contains("; source age: the feed's latest complete source time"),
        "{line}"
    );
}
