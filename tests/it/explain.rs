//! Replay forensics: `replay --explain FEED SYMBOL` (golden outputs on the
//! shipped scenario, the story it tells, agreement with every check the
//! replay answers, exact threshold crossings), `--at`, and `--timeline`;
//! the same for ITCH feeds in `explain/itch.rs`.

mod itch;

use assert_cmd::Command;
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use tickguard::capture::link::Link;
use tickguard::capture::write::{CaptureWriter, Format};
use tickguard::capture::CaptureReader;
use tickguard::config::Config;
use tickguard::explain::parse_time;
use tickguard::explain::sqf::{Event, Forensics};
use tickguard::protocol::sqf::PacketBuilder;
use tickguard::replay::{replay, replay_with, Check};
use tickguard::symbol::Symbol;
use tickguard::verdict::Reasons;

const T0: u64 = 1_767_603_600_000_000_000;
const MS: u64 = 1_000_000;

/// The goldens tools/gen_fixtures.rs writes: (feed, symbol, --explain-all, --at ms after T0).
const EXPLAINED: &[(&str, &str, bool, Option<u64>)] = &[
    ("fx", "EURUSD", false, None),
    ("fx", "GBPUSD", false, None),
    ("fx", "USDJPY", false, None),
    ("fx", "XAUUSD", false, None),
    ("eq", "AAPL", false, None),
    ("eq", "MSFT", false, None),
    ("eq", "ES.H6", false, None),
    ("fx", "EURUSD", true, None),
    ("eq", "MSFT", true, None),
    ("fx", "GBPUSD", false, Some(2_600)),
    ("eq", "AAPL", false, Some(4_500)),
];

const SYMBOLS: &[(&str, &str)] = &[
    ("fx", "EURUSD"),
    ("fx", "GBPUSD"),
    ("fx", "USDJPY"),
    ("fx", "XAUUSD"),
    ("eq", "AAPL"),
    ("eq", "MSFT"),
    ("eq", "ES.H6"),
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn golden_name(feed: &str, symbol: &str, all: bool, at_ms: Option<u64>) -> String {
    match (all, at_ms) {
        (_, Some(ms)) => format!("scenario-eth-us.at-{ms}ms-{feed}-{symbol}.txt"),
        (true, None) => format!("scenario-eth-us.explain-all-{feed}-{symbol}.txt"),
        (false, None) => format!("scenario-eth-us.explain-{feed}-{symbol}.txt"),
    }
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn tickguard(args: &[&str]) -> Run {
    let out = Command::cargo_bin("tickguard")
        .unwrap()
        .env("RUST_LOG", "error")
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!stderr.contains("panicked"), "panic: {stderr}");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr,
    }
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `replay CAPTURE --config fixtures/config.toml --explain FEED SYMBOL [extra]`.
fn explain(capture: &str, feed: &str, symbol: &str, extra: &[&str]) -> Run {
    let dir = fixtures();
    let (cap, cfg) = (dir.join(capture), dir.join("config.toml"));
    let mut args = vec![
        "replay",
        path(&cap),
        "--config",
        path(&cfg),
        "--explain",
        feed,
        symbol,
    ];
    args.extend_from_slice(extra);
    tickguard(&args)
}

/// A change detector, not a proof: the goldens are this code's own output
/// (written by `tools/gen_fixtures.rs`). What proves the explanations
/// right is [`explanation_agrees_with_every_check_of_the_fixtures`],
/// `tests/explain_agrees.rs` (the state and verdict they imply equal the
/// handler's on random streams) and the story checked by hand in
/// [`explanations_tell_the_scenarios_story`].
#[test]
fn explanations_match_their_goldens() {
    for &(feed, symbol, all, at_ms) in EXPLAINED {
        let at = at_ms.map(|ms| (T0 + ms * MS).to_string());
        let mut extra = vec![];
        if all {
            extra.push("--explain-all");
        }
        if let Some(at) = &at {
            extra.extend(["--at", at.as_str()]);
        }
        let run = explain("scenario-eth-us.pcap", feed, symbol, &extra);
        assert_eq!(run.code, 0, "{feed} {symbol}: {}", run.stderr);
        let name = golden_name(feed, symbol, all, at_ms);
        let golden = std::fs::read_to_string(fixtures().join(&name)).unwrap();
        assert!(
            run.stdout == golden,
            "fixtures/{name} differs from the output:\n{}",
            run.stdout
        );
    }
    // Every golden of this kind in fixtures/ is one of the table's.
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        if name.starts_with("scenario-eth-us.explain-") || name.starts_with("scenario-eth-us.at-") {
            assert!(
                EXPLAINED
                    .iter()
                    .any(|&(f, s, all, at)| golden_name(f, s, all, at) == name),
                "fixtures/{name} is tested by nothing"
            );
        }
    }
}

/// One parsed line of `--explain` output.
#[derive(Debug)]
struct Line {
    time: u64,
    text: String,
    /// The verdict after the event, as printed (`ok`, `stale|suspect`, …).
    after: String,
    changed: bool,
}

fn parse(out: &str) -> Vec<Line> {
    out.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (time, _) = l.split_once(' ').unwrap();
            let time = parse_time(time).unwrap_or_else(|e| panic!("{e}: {l}"));
            let (text, after, changed) = match l.strip_suffix(" (unchanged)") {
                Some(rest) => {
                    let (text, v) = rest.rsplit_once("   ").unwrap();
                    (text, v, false)
                }
                None => {
                    let (text, v) = l.rsplit_once(" -> ").unwrap();
                    let (text, _before) = text.rsplit_once("   ").unwrap();
                    (text, v, true)
                }
            };
            // The cause starts after the relative time ("+12.345678 ms  ").
            let text = text.split_once(" ms  ").unwrap().1;
            Line {
                time,
                text: text.to_string(),
                after: after.to_string(),
                changed,
            }
        })
        .collect()
}

/// The one event line containing all of `needles`, between `from_ms` and `to_ms` after T0.
fn find<'a>(lines: &'a [Line], needles: &[&str], from_ms: u64, to_ms: u64) -> &'a Line {
    let found: Vec<&Line> = lines
        .iter()
        .filter(|l| needles.iter().all(|n| l.text.contains(n)))
        .filter(|l| (T0 + from_ms * MS..=T0 + to_ms * MS).contains(&l.time))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one event with {needles:?} in {from_ms}..{to_ms} ms: {lines:#?}"
    );
    found[0]
}

/// The relative time printed after `since `, ns since the capture's origin.
fn since_ns(text: &str) -> i128 {
    let s = text.split("since +").nth(1).unwrap();
    let ms = s.split(" ms").next().unwrap();
    let (int, frac) = ms.split_once('.').unwrap();
    int.parse::<i128>().unwrap() * 1_000_000 + frac.parse::<i128>().unwrap()
}

fn origin_of(out: &str) -> u64 {
    let header = out.lines().next().unwrap();
    let iso = header.rsplit(' ').next().unwrap();
    parse_time(iso).unwrap()
}

#[test]
fn explanations_tell_the_scenarios_story() {
    let cap = "scenario-eth-us.pcap";

    // GBPUSD: silent 2.0–3.0 s: stale 500 ms after its last tick, back at 3.0 s.
    let out = explain(cap, "fx", "GBPUSD", &[]).stdout;
    let lines = parse(&out);
    let stale = find(
        &lines,
        &["silence:", "500 ms stale threshold"],
        2_400,
        2_600,
    );
    assert_eq!(stale.after, "stale");
    // Exactly last_alive + threshold + 1 ns, not a sample.
    let origin = origin_of(&out) as i128;
    assert_eq!(
        stale.time as i128,
        origin + since_ns(&stale.text) + 500 * MS as i128 + 1
    );
    let back = find(&lines, &["quote seq", "of silence"], 2_990, 3_010);
    assert_eq!(back.after, "ok");
    assert_eq!(lines.first().unwrap().after, "ok");
    assert!(lines[0].text.starts_with("first quote seq 1"));

    // USDJPY: a heartbeat reveals the 3 quotes lost at 2.5 s: suspect until the next quote.
    let lines = parse(&explain(cap, "fx", "USDJPY", &[]).stdout);
    let hb = find(
        &lines,
        &["heartbeat reveals a gap: 3 ticks lost", "not liveness"],
        2_500,
        2_600,
    );
    assert_eq!(hb.after, "suspect");
    let cleared = find(&lines, &["full feed: clears suspect"], 2_500, 2_700);
    assert_eq!(cleared.after, "ok");

    // AAPL (delta): suspect before the first snapshot, gap at 4.0–4.2 s, repaired at 5 s.
    let lines = parse(&explain(cap, "eq", "AAPL", &[]).stdout);
    assert!(lines[0]
        .text
        .contains("delta feed: suspect until a snapshot"));
    assert_eq!(lines[0].after, "suspect");
    assert_eq!(
        find(&lines, &["snapshot seq", "repairs suspect"], 900, 1_100).after,
        "ok"
    );
    assert_eq!(find(&lines, &["gap: "], 4_000, 4_300).after, "suspect");
    assert_eq!(
        find(&lines, &["snapshot seq", "repairs suspect"], 4_900, 5_100).after,
        "ok"
    );

    // MSFT: the provider reset at 3.2 s changes nothing (it was ok), so it is
    // listed with --explain-all only.
    let default = explain(cap, "eq", "MSFT", &[]).stdout;
    assert!(!default.contains("provider reset"));
    let lines = parse(&explain(cap, "eq", "MSFT", &["--explain-all"]).stdout);
    let reset = find(
        &lines,
        &["provider reset: seq ", " -> 0 (snapshot)"],
        3_190,
        3_270,
    );
    assert!(!reset.changed);
    assert_eq!(reset.after, "ok");

    // EURUSD: crossed quotes at 1.5 s, a NaN bid at 4.0 s, each cleared by the next quote.
    let lines = parse(&explain(cap, "fx", "EURUSD", &[]).stdout);
    assert_eq!(
        find(&lines, &["invalid price (bid "], 1_490, 1_510).after,
        "invalid_price"
    );
    assert_eq!(
        find(&lines, &["valid price again"], 1_510, 1_600).after,
        "ok"
    );
    assert_eq!(
        find(&lines, &["invalid price (bid NaN"], 3_990, 4_010).after,
        "invalid_price"
    );
    assert_eq!(
        find(&lines, &["valid price again"], 4_000, 4_100).after,
        "ok"
    );
    // With --explain-all: the full feed's gap at 1.0–1.1 s (no verdict change).
    let all = parse(&explain(cap, "fx", "EURUSD", &["--explain-all"]).stdout);
    assert!(!find(&all, &["gap: ", "ticks lost"], 1_000, 1_200).changed);
    assert!(all.iter().any(|l| l.text.contains("price still invalid")));

    // XAUUSD: 3 s old prices against its 2.5 s override.
    let lines = parse(&explain(cap, "fx", "XAUUSD", &[]).stdout);
    assert_eq!(
        find(
            &lines,
            &["source time already", "threshold 2500 ms"],
            3_500,
            3_700
        )
        .after,
        "stale_at_source"
    );
    assert_eq!(
        find(&lines, &["fresh source time"], 4_500, 4_700).after,
        "ok"
    );

    // Every symbol goes stale after the end of the capture (6 s), then stale at source.
    for (feed, symbol) in SYMBOLS {
        let out = explain(cap, feed, symbol, &[]).stdout;
        let lines = parse(&out);
        assert_eq!(lines.last().unwrap().after, "stale|stale_at_source");
        assert!(
            !out.contains("reconciled") && !out.contains("adopted"),
            "the derived state always equals the handler's"
        );
        assert!(
            lines.windows(2).all(|w| w[0].time <= w[1].time),
            "time order"
        );
        assert!(
            lines.iter().all(|l| l.changed),
            "default lists changes only"
        );
    }
}

/// Reads the golden check answers of a capture as verdict strings, one per checks.csv row.
fn golden_answers(stem: &str) -> Vec<(u64, String, String, String)> {
    let checks = std::fs::read_to_string(fixtures().join("checks.csv")).unwrap();
    let answers =
        std::fs::read_to_string(fixtures().join(format!("{stem}.expected.jsonl"))).unwrap();
    let rows = tickguard::replay::parse_checks(&checks).unwrap();
    rows.iter()
        .zip(answers.lines())
        .map(|(c, a)| {
            let v: serde_json::Value = serde_json::from_str(a).unwrap();
            let reasons: Vec<&str> = v["reasons"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_str().unwrap())
                .collect();
            let verdict = if reasons.is_empty() {
                "ok".to_string()
            } else {
                reasons.join("|")
            };
            (c.time_ns, c.feed.clone(), c.symbol.clone(), verdict)
        })
        .collect()
}

/// The verdict the explanation implies at `t`: the last event at or before it.
fn implied(lines: &[Line], t: u64) -> &str {
    lines
        .iter()
        .rfind(|l| l.time <= t)
        .map_or("no_quote", |l| l.after.as_str())
}

#[test]
fn explanation_agrees_with_every_check_of_the_fixtures() {
    for (capture, stem) in [
        ("scenario-eth-us.pcap", "scenario-eth-us"),
        ("scenario-vlan-ns.pcap", "scenario-vlan-ns"),
    ] {
        let answers = golden_answers(stem);
        for (feed, symbol) in SYMBOLS {
            for extra in [&[][..], &["--explain-all"][..]] {
                let lines = parse(&explain(capture, feed, symbol, extra).stdout);
                let mut compared = 0;
                for (t, f, s, verdict) in &answers {
                    if f == feed && s == symbol {
                        assert_eq!(
                            implied(&lines, *t),
                            verdict,
                            "{capture} {feed} {symbol} at {t} ({} ms)",
                            (*t as i128 - T0 as i128) / MS as i128
                        );
                        compared += 1;
                    }
                }
                assert!(compared > 60, "{feed} {symbol}: {compared} checks");
            }
        }
    }
}

/// Runs the forensics for (feed, symbol) through the library, then asks the
/// plain replay at every event time, 1 ns before and after, and on a grid:
/// the answer is always the verdict after the last event at or before.
fn assert_events_are_exact(
    config: &Config,
    capture: &Path,
    feed: &str,
    symbol: &str,
) -> Vec<Event> {
    let id = config.feed_id(feed).unwrap();
    let sym = Symbol::parse(symbol).unwrap();
    let mut f = Forensics::new(&config.feeds, Some((id, sym)), false, None);
    let mut reader = CaptureReader::open(capture).unwrap();
    let outcome = replay_with(config, &mut reader, &[], |_| {}, &mut f);
    assert!(outcome.input_error.is_none());
    f.finish();
    let events = f.events().unwrap_or(&[]).to_vec();
    assert!(events.windows(2).all(|w| w[0].time <= w[1].time));
    let origin = f.origin().unwrap();
    let last = events.last().map_or(origin, |e| e.time);
    let mut times = vec![];
    for e in &events {
        times.extend([e.time - 1, e.time, e.time + 1]);
    }
    let mut t = origin.saturating_sub(10 * MS);
    while t <= last + 100 * MS {
        times.push(t);
        t += MS;
    }
    let checks: Vec<Check> = times
        .iter()
        .map(|&t| Check {
            time_ns: t,
            feed: feed.into(),
            symbol: symbol.into(),
        })
        .collect();
    let mut reader = CaptureReader::open(capture).unwrap();
    let outcome = replay(config, &mut reader, &checks, |_| {});
    for (c, a) in checks.iter().zip(&outcome.answers) {
        let expected = events
            .iter()
            .rfind(|e| e.time <= c.time_ns)
            .map_or(Reasons::NO_QUOTE, |e| e.after);
        assert_eq!(
            a.reasons,
            expected,
            "{feed} {symbol} at {} ({} ns after the origin)",
            c.time_ns,
            c.time_ns as i128 - origin as i128
        );
    }
    events
}

#[test]
fn every_event_is_exact_to_the_nanosecond() {
    let config = Config::load(&fixtures().join("config.toml")).unwrap();
    for capture in ["scenario-eth-us.pcap", "scenario-rawip-ns.pcap"] {
        for (feed, symbol) in SYMBOLS {
            assert_events_are_exact(&config, &fixtures().join(capture), feed, symbol);
        }
    }
}

fn write_capture(path: &Path, packets: &[(u64, &str, Vec<u8>)]) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::Ethernet).unwrap();
    let src: SocketAddrV4 = "10.0.0.1:5000".parse().unwrap();
    for (t, dst, p) in packets {
        w.write_udp(*t, src, dst.parse().unwrap(), p).unwrap();
    }
    w.finish().unwrap();
}

fn sym(s: &str) -> Symbol {
    Symbol::parse(s).unwrap()
}

/// In `auto` mode the offset moves with every packet of the feed: when the
/// window's minimum expires the offset rises and an old price's source age
/// falls back under the threshold. The crossings use the offset in force
/// between packets.
#[test]
fn offset_changes_move_stale_at_source_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::parse(
        r#"
[[feed]]
name = "f"
kind = "full"
lines = ["239.9.9.9:9000"]
stale_threshold_ms = 100000
source_threshold_ms = 50
clock_offset = "auto"
offset_window_ms = 100
"#,
        "t.toml",
    )
    .unwrap();
    let line = "239.9.9.9:9000";
    // A's quote at 0 with source time 0, sent with no delay (offset 0); then
    // B every 10 ms sent 80 ms before it arrives (20 ms when i % 17 == 0),
    // and A again at 150 ms with source time 80 ms.
    //   50 ms + 1 ns   source age 50 ms + 1 ns at offset 0: stale_at_source
    //   100 ms         the offset-0 packet leaves the window, offset 80: age 20 ms, ok
    //   130 ms + 1 ns  stale_at_source again at offset 80
    //   150 ms         A's new price: age -10 ms, ok
    //   170 ms         offset 20: age 70 ms, stale_at_source
    let mut packets = vec![];
    let mut b = PacketBuilder::new(T0);
    b.quote(sym("A"), 1, T0, 1.0, 1.1);
    packets.push((T0, line, b.finish()));
    for i in 1..60u64 {
        let t = T0 + i * 10 * MS;
        let delay = if i % 17 == 0 { 20 * MS } else { 80 * MS };
        let mut b = PacketBuilder::new(t - delay);
        b.quote(sym("B"), i, t - delay, 1.0, 1.1);
        if i == 15 {
            b.quote(sym("A"), 2, T0 + 80 * MS, 1.0, 1.1);
        }
        packets.push((t, line, b.finish()));
    }
    let cap = dir.path().join("offset.pcap");
    write_capture(&cap, &packets);
    let events = assert_events_are_exact(&config, &cap, "f", "A");
    let offsets = events
        .iter()
        .filter(|e| matches!(e.cause, tickguard::explain::sqf::Cause::Offset { .. }))
        .count();
    assert_eq!(offsets, 2, "offset changes flip it both ways: {events:#?}");
    let flips: Vec<(u64, bool)> = events
        .iter()
        .filter(|e| e.time < T0 + 300 * MS)
        .map(|e| (e.time - T0, e.after.contains(Reasons::STALE_AT_SOURCE)))
        .collect();
    assert_eq!(
        flips,
        [
            (0, false),
            (50 * MS + 1, true),
            (100 * MS, false),
            (130 * MS + 1, true),
            (150 * MS, false),
            (170 * MS, true),
        ]
    );
}

/// A configuration in `dir` of one feed `name` of `kind` on line
/// 239.9.9.9:9000, in a state table of one slot; its path.
fn one_slot_config(dir: &Path, name: &str, kind: &str) -> PathBuf {
    let path = dir.join("c.toml");
    std::fs::write(
        &path,
        format!(
            "[state]\ncapacity = 1\n[[feed]]\nname = \"{name}\"\nkind = \"{kind}\"\n\
             lines = [\"239.9.9.9:9000\"]\nstale_threshold_ms = 500\n\
             source_threshold_ms = 2000\nclock_offset = 0\n"
        ),
    )
    .unwrap();
    path
}

/// A symbol seen but never given a slot (the state table full), or
/// quoted only with invalid prices, is told as without a valid price,
/// with the first event seen (which says why), even without
/// `--explain-all` (its verdict never changed).
#[test]
fn a_symbol_without_a_valid_price_is_told_so_with_why() {
    let dir = tempfile::tempdir().unwrap();
    let config_path = one_slot_config(dir.path(), "f", "full");
    let line = "239.9.9.9:9000";
    let mut b = PacketBuilder::new(T0);
    b.quote(sym("A"), 1, T0, 1.2, 1.1)
        .quote(sym("Z"), 2, T0, 1.0, 1.1);
    let cap = dir.path().join("full.pcap");
    write_capture(&cap, &[(T0, line, b.finish())]);
    let explained = |symbol| {
        let run = tickguard(&[
            "replay",
            path(&cap),
            "--config",
            path(&config_path),
            "--explain",
            "f",
            symbol,
        ]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        run.stdout
    };
    let none = "no valid price in this capture: every check answers no_quote; first seen:";
    let z = explained("Z");
    assert!(
        z.contains(&format!("f Z: {none}")) && z.contains("state table full for this feed"),
        "{z}"
    );
    let a = explained("A");
    assert!(
        a.contains(&format!("f A: {none}")) && a.contains("invalid price"),
        "{a}"
    );
}

#[test]
fn several_messages_in_one_packet_are_explained_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let config_path = one_slot_config(dir.path(), "d", "delta");
    let line = "239.9.9.9:9000";
    let mut b = PacketBuilder::new(T0);
    b.snapshot(sym("A"), 10, T0, 1.0, 1.1)
        .quote(sym("A"), 13, T0, 1.0, 1.1)
        .quote(sym("A"), 14, T0, 2.0, 1.0)
        .snapshot(sym("A"), 3, T0, 1.0, 1.1)
        .quote(sym("Z"), 1, T0, 1.0, 1.1);
    let p1 = b.finish();
    let mut b = PacketBuilder::new(T0 + MS);
    b.heartbeat(sym("A"), 10);
    let cap = dir.path().join("multi.pcap");
    write_capture(&cap, &[(T0, line, p1), (T0 + MS, line, b.finish())]);
    let cfg = path(&config_path);
    let capture = path(&cap);
    let run = tickguard(&[
        "replay",
        capture,
        "--config",
        cfg,
        "--explain",
        "d",
        "A",
        "--explain-all",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines = parse(&run.stdout);
    let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
    assert!(
        texts[0].starts_with("first snapshot seq 10; first valid price"),
        "{texts:#?}"
    );
    assert!(texts[1].starts_with("gap: 2 ticks lost (seq 10 -> 13)"));
    assert!(texts[2]
        .starts_with("quote seq 14; invalid price (bid 2.00000, ask 1.00000: bid above ask)"));
    assert!(texts[3]
        .starts_with("provider reset: seq 14 -> 3 (snapshot); valid price again; repairs suspect"));
    assert!(texts[4].starts_with(
        "heartbeat reveals a gap: 6 ticks lost (last seq 3, next expected 10); not liveness"
    ));
    let verdicts: Vec<&str> = lines.iter().map(|l| l.after.as_str()).collect();
    assert_eq!(
        verdicts,
        [
            "ok",
            "suspect",
            "suspect|invalid_price",
            "ok",
            "suspect",
            "stale|suspect",
            "stale|stale_at_source|suspect"
        ]
    );
    // The table holds one symbol: Z's quote was dropped.
    let z = tickguard(&[
        "replay",
        capture,
        "--config",
        cfg,
        "--explain",
        "d",
        "Z",
        "--explain-all",
    ]);
    assert!(z.stdout.contains("state table full"), "{}", z.stdout);
}

#[test]
fn at_answers_why_with_the_event_behind_each_reason() {
    let cap = "scenario-eth-us.pcap";
    // The same instant as ns or as UTC text.
    let ns = explain(cap, "eq", "AAPL", &["--at", "1767603604500000000"]);
    let utc = explain(cap, "eq", "AAPL", &["--at", "2026-01-05T09:00:04.5Z"]);
    // And written with its offset, as a desk in New York would.
    let local = explain(cap, "eq", "AAPL", &["--at", "2026-01-05T04:00:04.5-05:00"]);
    assert_eq!(ns.code, 0);
    assert_eq!(ns.stdout, utc.stdout);
    assert_eq!(ns.stdout, local.stdout);
    // Without a zone: refused in one line, not read as UTC.
    let bare = explain(cap, "eq", "AAPL", &["--at", "2026-01-05T09:00:04.5"]);
    assert_eq!((bare.code, bare.stdout.as_str()), (2, ""));
    assert_eq!(bare.stderr.lines().count(), 1, "{}", bare.stderr);
    assert!(bare.stderr.contains("has no time zone"), "{}", bare.stderr);
    let mut lines = ns.stdout.lines();
    assert!(lines.next().unwrap().ends_with(": suspect"));
    let cause = lines.next().unwrap();
    assert!(
        cause.trim_start().starts_with("suspect") && cause.contains("gap: "),
        "{cause}"
    );
    assert!(lines.next().unwrap().trim_start().starts_with("state: "));

    let ok = explain(cap, "fx", "EURUSD", &["--at", "2026-01-05T09:00:03Z"]).stdout;
    assert!(ok.lines().next().unwrap().ends_with(": ok"), "{ok}");
    assert!(
        ok.contains("ok since") && ok.contains("valid price again"),
        "{ok}"
    );

    let early = explain(cap, "eq", "AAPL", &["--at", "2026-01-05T08:59:00Z"]);
    assert!(
        early.stdout.contains(": no_quote") && early.stdout.contains("not seen yet"),
        "{}",
        early.stdout
    );
    // Before anything arrived (here seconds given for ns): a warning.
    assert!(
        early
            .stderr
            .contains("--at 2026-01-05T08:59:00.000000000Z is before the input's first record"),
        "{}",
        early.stderr
    );
    let seconds = explain(cap, "eq", "AAPL", &["--at", "1767603604"]);
    assert!(
        seconds
            .stderr
            .contains("is before the input's first record"),
        "{}",
        seconds.stderr
    );
    assert!(
        !ns.stderr.contains("before the input's first record"),
        "{}",
        ns.stderr
    );

    let bad = explain(cap, "eq", "AAPL", &["--at", "yesterday"]);
    assert_eq!(bad.code, 2);
    let dir = fixtures();
    let no_explain = tickguard(&[
        "replay",
        path(&dir.join(cap)),
        "--config",
        path(&dir.join("config.toml")),
        "--at",
        "1767603604500000000",
    ]);
    assert_eq!(no_explain.code, 2, "--at needs --explain");
}

/// Replays a full feed of one symbol, A, quoted at `T0 + i µs` for each
/// `i` of `0..=n` (`n` twice what an explanation keeps, plus one) with
/// the (sequence, bid, ask) `quote(i)` gives, explaining A up to `at`:
/// the replay's answer at `at`, and `--at`'s text.
fn at_over_a_long_capture(
    quote: impl Fn(u64) -> (u64, f64, f64),
    at: impl Fn(u64) -> u64,
) -> (Reasons, String) {
    at_over_a_long_feed(
        "full",
        |b, i, t| {
            let (seq, bid, ask) = quote(i);
            b.quote(sym("A"), seq, t, bid, ask);
        },
        at,
    )
}

/// [`at_over_a_long_capture`] of a feed of `kind` whose packet `i`, sent
/// and arriving at `t`, `write(builder, i, t)` fills.
fn at_over_a_long_feed(
    kind: &str,
    write: impl Fn(&mut PacketBuilder, u64, u64),
    at: impl Fn(u64) -> u64,
) -> (Reasons, String) {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::parse(
        &format!(
            r#"
[[feed]]
name = "f"
kind = "{kind}"
lines = ["239.9.9.9:9000"]
stale_threshold_ms = 100000
source_threshold_ms = 100000
clock_offset = 0
"#
        ),
        "t.toml",
    )
    .unwrap();
    let line = "239.9.9.9:9000";
    let n = 2 * tickguard::explain::KEEP as u64 + 1;
    let packets: Vec<_> = (0..=n)
        .map(|i| {
            let t = T0 + i * 1_000;
            let mut b = PacketBuilder::new(t);
            write(&mut b, i, t);
            (t, line, b.finish())
        })
        .collect();
    let cap = dir.path().join("long.pcap");
    write_capture(&cap, &packets);
    let at = at(n);
    let mut x = Forensics::new(&config.feeds, Some((0, sym("A"))), false, Some(at));
    let check = Check {
        time_ns: at,
        feed: "f".into(),
        symbol: "A".into(),
    };
    let mut reader = CaptureReader::open(&cap).unwrap();
    let out = replay_with(&config, &mut reader, &[check], |_| {}, &mut x);
    x.finish();
    let reasons = out.answers[0].reasons;
    (reasons, x.answer_at(at, reasons))
}

/// `--at` keeps nothing after its time: a long capture whose later
/// events would push the earlier ones out of what is kept still answers
/// for the earlier moment whole.
#[test]
fn at_answers_an_early_moment_of_a_long_capture() {
    // Quote 1, then quotes each skipping a sequence (each gap an event
    // kept, the verdict staying ok).
    let (reasons, text) = at_over_a_long_capture(|i| (1 + 2 * i, 1.0, 1.1), |_| T0 + 500);
    assert_eq!(reasons, Reasons::empty());
    assert!(
        text.contains("ok since") && !text.contains("not seen yet"),
        "{text}"
    );
}

/// `--at` where the event that set a reason came before more events than
/// an explanation keeps, none changing the verdict: the change is kept
/// and told (a valid price stored first, then crossed quotes, each an
/// event: the crossing, the first of them, is the cause).
#[test]
fn at_tells_a_cause_older_than_the_events_kept() {
    let crossed = |i| (1 + i, if i == 0 { 1.0 } else { 1.2 }, 1.1);
    let (reasons, text) = at_over_a_long_capture(crossed, |n| T0 + n * 1_000);
    assert_eq!(reasons, Reasons::INVALID_PRICE);
    assert!(
        text.contains("invalid_price   2026-01-05T09:00:00.000001000Z")
            && text.contains("quote seq 2; invalid price"),
        "{text}"
    );
}

/// `--at` where the event that set a reason was dropped for room, more
/// verdict changes than are kept coming after it: the reason is told as
/// older than the events kept, not as the symbol's first state (a delta
/// feed's crossed snapshot, then quotes each skipping a sequence, turning
/// it suspect, and crossed snapshots clearing that, each a change).
#[test]
fn at_tells_a_cause_dropped_for_room_as_older_than_the_events_kept() {
    let write = |b: &mut PacketBuilder, i: u64, t: u64| {
        match i {
            0 => b.snapshot(sym("A"), 1, t, 1.0, 1.1),
            1 => b.snapshot(sym("A"), 2, t, 1.2, 1.1),
            _ if i.is_multiple_of(2) => b.quote(sym("A"), 2 * i, t, 1.2, 1.1),
            _ => b.snapshot(sym("A"), 2 * i, t, 1.2, 1.1),
        };
    };
    let (reasons, text) = at_over_a_long_feed("delta", write, |n| T0 + n * 1_000);
    assert!(reasons.contains(Reasons::INVALID_PRICE), "{reasons}");
    assert!(
        text.contains("invalid_price   since before the events kept")
            && !text.contains("no valid price stored yet"),
        "{text}"
    );
}

#[test]
fn unknown_feed_is_an_error_and_an_unseen_symbol_one_line() {
    let cap = "scenario-eth-us.pcap";
    let run = explain(cap, "nofeed", "AAPL", &[]);
    assert_eq!(run.code, 2);
    assert_eq!(run.stdout, "");
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(run.stderr.contains("no feed 'nofeed'") && run.stderr.contains("fx, eq"));

    let run = explain(cap, "fx", "NZDUSD", &[]);
    assert_eq!(run.code, 0);
    assert_eq!(run.stdout.lines().count(), 1);
    assert!(
        run.stdout.contains("fx NZDUSD: never seen"),
        "{}",
        run.stdout
    );

    let run = explain(cap, "fx", "TOO LONG SYMBOL", &[]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("not a valid symbol"));
}

#[test]
fn explain_replaces_the_check_results_and_keeps_the_summary() {
    let dir = fixtures();
    let tmp = tempfile::tempdir().unwrap();
    let summary = tmp.path().join("summary.json");
    let checks = dir.join("checks.csv");
    let run = explain(
        "scenario-eth-us.pcap",
        "fx",
        "GBPUSD",
        &["--checks", path(&checks), "--summary", path(&summary)],
    );
    assert_eq!(run.code, 0);
    let golden =
        std::fs::read_to_string(dir.join("scenario-eth-us.explain-fx-GBPUSD.txt")).unwrap();
    assert_eq!(run.stdout, golden, "no JSON lines with --explain");
    assert_eq!(
        std::fs::read_to_string(&summary).unwrap(),
        std::fs::read_to_string(dir.join("scenario-eth-us.summary.json")).unwrap()
    );
}

/// Well-formed XML: with python3's parser when there is one, and always with
/// a small tag-balance check.
fn assert_well_formed(svg_path: &Path) {
    let text = std::fs::read_to_string(svg_path).unwrap();
    let mut stack: Vec<String> = vec![];
    let mut rest = text.as_str();
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        let end = rest.find('>').expect("unclosed tag");
        let tag = &rest[..end];
        rest = &rest[end + 1..];
        if tag.starts_with('?') || tag.starts_with('!') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(
                stack.pop().as_deref(),
                Some(name.trim()),
                "mismatched </{name}>"
            );
        } else if !tag.ends_with('/') {
            stack.push(tag.split_whitespace().next().unwrap().to_string());
        }
        // Attribute values are quoted and escaped: no raw '<' inside a tag.
        assert!(!tag.contains('<'));
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
    let python = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])",
        ])
        .arg(svg_path)
        .output();
    match python {
        Ok(out) => assert!(
            out.status.success(),
            "python3 cannot parse the SVG: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => crate::common::skip(&format!("python3's XML parser on the SVG: {e}")),
    }
}

fn bands(svg: &str) -> Vec<String> {
    svg.lines()
        .filter(|l| l.starts_with(r#"<g class="band""#))
        .map(|l| {
            let feed = l
                .split("data-feed=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap();
            let sym = l
                .split("data-symbol=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap();
            format!("{feed} {sym}")
        })
        .collect()
}

#[test]
fn timeline_has_one_band_per_symbol_and_is_well_formed() {
    let dir = fixtures();
    let tmp = tempfile::tempdir().unwrap();
    let svg = tmp.path().join("t.svg");
    let (cap, cfg, checks) = (
        dir.join("scenario-eth-us.pcap"),
        dir.join("config.toml"),
        dir.join("checks.csv"),
    );
    let run = tickguard(&[
        "replay",
        path(&cap),
        "--config",
        path(&cfg),
        "--checks",
        path(&checks),
        "--timeline",
        path(&svg),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        std::fs::read_to_string(dir.join("scenario-eth-us.expected.jsonl")).unwrap(),
        "--timeline alone leaves the check results as they are"
    );
    assert_well_formed(&svg);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(
        bands(&text),
        [
            "fx EURUSD",
            "fx GBPUSD",
            "fx USDJPY",
            "fx XAUUSD",
            "eq AAPL",
            "eq ES.H6",
            "eq MSFT"
        ]
    );
    for colour in ["#2e9d48", "#f0a202", "#d62828", "#8e44ad", "#a6a6a6"] {
        assert!(
            text.contains(&format!("fill=\"{colour}\"><title>")),
            "{colour}"
        );
    }
    assert!(text.contains("heartbeat reveals a gap: 3 ticks lost"));
    assert!(text.contains("provider reset: seq "));
    assert!(text.contains("snapshot seq "));

    // With --explain: only that feed's symbols, and the explanation on stdout.
    let run = tickguard(&[
        "replay",
        path(&cap),
        "--config",
        path(&cfg),
        "--timeline",
        path(&svg),
        "--explain",
        "eq",
        "MSFT",
    ]);
    assert_eq!(run.code, 0);
    assert!(run.stdout.starts_with("# eq MSFT"));
    assert_well_formed(&svg);
    assert_eq!(
        bands(&std::fs::read_to_string(&svg).unwrap()),
        ["eq AAPL", "eq ES.H6", "eq MSFT"]
    );
}

#[test]
fn timeline_stays_small_for_a_long_flapping_capture() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        r#"
[[feed]]
name = "d"
kind = "delta"
lines = ["239.9.9.9:9000"]
stale_threshold_ms = 3
source_threshold_ms = 2000
clock_offset = 0
"#,
    )
    .unwrap();
    // 60,000 packets over 10 minutes: gaps, snapshots, resets, heartbeat gaps
    // and silences, so the verdict changes tens of thousands of times.
    let line = "239.9.9.9:9000";
    let mut packets = vec![];
    let mut seq = 1u64;
    for i in 0..60_000u64 {
        let t = T0 + i * 10 * MS;
        let mut b = PacketBuilder::new(t);
        match i % 4 {
            0 => {
                seq += 2;
                b.quote(sym("A"), seq, t, 1.0, 1.1);
            }
            1 => {
                b.snapshot(sym("A"), seq, t, 1.0, 1.1);
            }
            2 => {
                seq += 3;
                b.heartbeat(sym("A"), seq);
            }
            _ => {
                seq = if i % 400 == 3 { 1 } else { seq };
                b.snapshot(sym("A"), seq, t, 1.0, 1.1);
            }
        }
        packets.push((t, line, b.finish()));
    }
    let cap = dir.path().join("long.pcap");
    write_capture(&cap, &packets);
    let svg = dir.path().join("long.svg");
    let run = tickguard(&[
        "replay",
        path(&cap),
        "--config",
        path(&cfg),
        "--timeline",
        path(&svg),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_well_formed(&svg);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.len() < 2_000_000, "{} bytes", text.len());
    let markers = text
        .lines()
        .filter(|l| {
            l.starts_with("<line x1") || l.starts_with("<path d") || l.contains(r#"width="2.5""#)
        })
        .count();
    // At most 500 per kind in a band, plus the legend's and the axis's lines.
    assert!(markers <= 2_000 + 30, "{markers} markers");
    assert!(text.contains(" gaps, "), "aggregated markers say how many");
    assert!(text.contains("provider reset: seq "));
}

/// A capture of more symbols than the timeline draws: the first 1,000
/// seen get a band, the `--explain` target one too however late it comes,
/// and the picture says the rest were left out.
#[test]
fn timeline_draws_at_most_a_thousand_symbols_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        "[state]\ncapacity = 4096\n[[feed]]\nname = \"f\"\nkind = \"full\"\n\
         lines = [\"239.9.9.9:9000\"]\nstale_threshold_ms = 500\n\
         source_threshold_ms = 2000\nclock_offset = 0\n",
    )
    .unwrap();
    let line = "239.9.9.9:9000";
    let packets: Vec<_> = (0..1_500u64)
        .map(|i| {
            let t = T0 + i * MS;
            let mut b = PacketBuilder::new(t);
            b.quote(sym(&format!("S{i:04}")), 1, t, 1.0, 1.1);
            (t, line, b.finish())
        })
        .collect();
    let cap = dir.path().join("many.pcap");
    write_capture(&cap, &packets);
    let svg = dir.path().join("many.svg");
    let args = [
        "replay",
        path(&cap),
        "--config",
        path(&cfg),
        "--timeline",
        path(&svg),
    ];
    let run = tickguard(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_well_formed(&svg);
    let text = std::fs::read_to_string(&svg).unwrap();
    let drawn = bands(&text);
    assert_eq!(drawn.len(), 1_000);
    assert_eq!(drawn.last().map(String::as_str), Some("f S0999"));
    assert!(text.contains("1000 symbol(s) (only the first 1000 seen are drawn"));
    let run = tickguard(&[&args[..], &["--explain", "f", "S1400"]].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let drawn = bands(&std::fs::read_to_string(&svg).unwrap());
    assert_eq!(drawn.len(), 1_001);
    assert!(drawn.iter().any(|b| b == "f S1400"));
}

/// `--feed` sends every datagram to its feed: explaining another is
/// refused in one line naming both (it would read "never seen" as a fact
/// of the capture); with `--date`, an explained feed other than the
/// file's is refused so, and the file's own feed not itch50 is refused
/// as without `--explain`.
#[test]
fn explaining_a_feed_the_replay_feeds_nothing_is_refused() {
    let other = explain("scenario-eth-us.pcap", "fx", "GBPUSD", &["--feed", "eq"]);
    assert_eq!(other.code, 2, "{}", other.stderr);
    assert_eq!(
        other.stderr.trim_end(),
        "tickguard: --explain: feed 'fx' gets no datagram: --feed 'eq' sends it every one (explain that feed, or replay without --feed)"
    );
    let own = explain(
        "scenario-eth-us.pcap",
        "fx",
        "GBPUSD",
        &["--feed", "fx", "--no-progress"],
    );
    assert_eq!(own.code, 0, "{}", own.stderr);
    assert!(own.stdout.starts_with("# fx GBPUSD: "), "{}", own.stdout);
    let date = ["--feed", "fx", "--date", "2026-01-05"];
    let not_file = explain("scenario-eth-us.pcap", "eq", "AAPL", &date);
    assert_eq!(not_file.code, 2);
    assert!(
        not_file
            .stderr
            .contains("--explain: feed 'eq' is not the BinaryFILE's --feed 'fx'"),
        "{}",
        not_file.stderr
    );
    let no_feed = explain(
        "scenario-eth-us.pcap",
        "fx",
        "GBPUSD",
        &["--feed", "nosuch", "--date", "2026-01-05"],
    );
    assert_eq!(no_feed.code, 2);
    assert!(
        no_feed.stderr.contains("--feed: no feed 'nosuch' in ")
            && no_feed.stderr.contains("(feeds: fx, eq)"),
        "{}",
        no_feed.stderr
    );
    let not_itch = explain("scenario-eth-us.pcap", "fx", "GBPUSD", &date);
    assert_eq!(not_itch.code, 2);
    assert!(
        not_itch
            .stderr
            .contains("--feed: feed 'fx' is not an itch50 feed"),
        "{}",
        not_itch.stderr
    );
}
