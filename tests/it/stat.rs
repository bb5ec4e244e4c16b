//! `tickguard stat --once` on a publication built from a shipped fixture:
//! byte-for-byte against a golden file (the writer's pid masked).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use tickguard::capture::CaptureReader;
use tickguard::config::Config;
use tickguard::handler::Handler;
use tickguard::protocol::publication_feeds;
use tickguard::replay::Router;
use tickguard::shm::Publication;
use tickguard::state::StateTable;

const T0: u64 = 1_767_603_600_000_000_000;
const MS: u64 = 1_000_000;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// A publication at `shm` of `config`'s feeds, made at `now` (ns), a
/// heartbeat period of 1 ms.
fn publication(shm: &Path, config: &Config, now: u64) -> Arc<Publication> {
    let feeds = publication_feeds(config);
    Arc::new(Publication::create(shm, 0o640, config.capacity, &feeds, now, 1_000_000).unwrap())
}

/// Replays `capture` into a fresh publication at `shm`, stopping at `until`
/// (ns), as a sidecar would have published it then.
fn publish(shm: &Path, capture: &Path, until: u64) -> Arc<Publication> {
    let config = Config::load(&fixtures().join("config.toml")).unwrap();
    let p = publication(shm, &config, T0 - 1_000 * MS);
    let mut h = Handler::with_table(&config, StateTable::shared(p.clone()), 4096);
    let router = Router::new(&config);
    let mut reader = CaptureReader::open(capture).unwrap();
    reader
        .for_each(|d| {
            if d.time_ns <= until {
                if let Some((feed, line)) = router.route_line(d.dst) {
                    let _ = h.on_datagram_line(feed, line, d.payload, d.time_ns);
                }
            }
        })
        .unwrap();
    h.publish_counters();
    p.heartbeat(until);
    p.ready();
    p
}

fn stat(shm: &Path, now: u64) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .args([
            "stat",
            "--once",
            "--dead-after-ms",
            "1000",
            "--now",
            &now.to_string(),
            "--shm",
        ])
        .arg(shm)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    // The writer is this test process: mask its pid.
    let pid = format!("writer pid {}", std::process::id());
    text.replace(&pid, "writer pid PID")
        .replace(&shm.display().to_string(), "SHM")
}

/// A change detector, not a proof: the golden is this code's own output
/// (`TICKGUARD_BLESS=1` writes it). The counters and verdicts it shows are
/// proven elsewhere: `tests/model.rs` for the handler's state,
/// `tests/c_reader.rs` for what is read from the publication (the C and
/// the Rust reader agree on it); the other tests here check the view by
/// hand.
#[test]
fn stat_once_matches_its_golden_output() {
    let shm = PathBuf::from(format!(
        "/dev/shm/tickguard-stat-test-{}",
        std::process::id()
    ));
    let at = T0 + 4_300 * MS;
    let _p = publish(&shm, &fixtures().join("scenario-vlan-ns.pcap"), at);
    let text = stat(&shm, at + 50 * MS);
    let golden = fixtures().join("scenario-vlan-ns.stat-4350ms.txt");
    if std::env::var_os("TICKGUARD_BLESS").is_some() {
        std::fs::write(&golden, &text).unwrap();
    }
    let expected = std::fs::read_to_string(&golden).unwrap_or_default();
    crate::common::remove_publication(&shm);
    assert!(
        text == expected,
        "stat output differs from {}:\n{text}",
        golden.display()
    );
    // What the story says at 4.35 s: XAUUSD old at the source, AAPL suspect after its gap.
    assert!(
        text.lines()
            .any(|l| l.contains("XAUUSD") && l.contains("stale_at_source")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("AAPL") && l.contains("suspect")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("rejected by reason:") && l.contains("bad_magic 1")),
        "{text}"
    );
    // Sorted worst first: the first symbol row is not ok.
    let first_row = text
        .lines()
        .skip_while(|l| !(l.starts_with("feed ") && l.contains("symbol")))
        .nth(1)
        .unwrap_or("");
    assert!(!first_row.contains(" ok "), "{text}");
}

/// `--now` before the writer's last heartbeat (a time typed for another
/// day): the heartbeat is said to be after it, never a negative age.
#[test]
fn stat_before_the_heartbeat_says_so() {
    let shm = PathBuf::from(format!(
        "/dev/shm/tickguard-stat-early-{}",
        std::process::id()
    ));
    let at = T0 + 2_000 * MS;
    let _p = publish(&shm, &fixtures().join("scenario-vlan-ns.pcap"), at);
    let text = stat(&shm, at - 1_500 * MS);
    crate::common::remove_publication(&shm);
    let writer = text.lines().find(|l| l.starts_with("writer pid")).unwrap();
    assert!(
        writer.contains("heartbeat 1500.0 ms after this time"),
        "{writer}"
    );
    assert!(!writer.contains("-1500"), "{writer}");
}

#[test]
fn stat_of_a_dead_writer_says_so() {
    let shm = PathBuf::from(format!(
        "/dev/shm/tickguard-stat-dead-{}",
        std::process::id()
    ));
    let at = T0 + 2_000 * MS;
    let _p = publish(&shm, &fixtures().join("scenario-vlan-ns.pcap"), at);
    let text = stat(&shm, at + 5_000 * MS);
    crate::common::remove_publication(&shm);
    assert!(text.contains("writer dead: heartbeat"), "{text}");
    // Its age said once, by the health.
    let writer = text.lines().find(|l| l.starts_with("writer pid")).unwrap();
    assert_eq!(writer.matches("heartbeat").count(), 1, "{writer}");
    assert!(
        text.contains("ok 0"),
        "a dead writer makes every symbol stale: {text}"
    );
}

/// A publication of three feeds at `T0 + 1 s`: `lp1` with 2,000 symbols on
/// lines A and B, B repeating every datagram of A (and delivering every
/// tenth first); `lp2` on one line, a few datagrams arriving twice, stale by
/// then; `lp3` receiving only datagrams that are not SQF.
fn three_feeds(shm: &Path) -> Arc<Publication> {
    let config = Config::parse(
        r#"
[state]
capacity = 4096
[[feed]]
name = "lp1"
kind = "full"
lines = ["239.1.1.1:30001", "239.1.1.2:30002"]
stale_threshold_ms = 60000
source_threshold_ms = 60000
clock_offset = 0
[[feed]]
name = "lp2"
kind = "full"
lines = ["239.1.1.3:30003"]
stale_threshold_ms = 100
source_threshold_ms = 60000
clock_offset = 0
[[feed]]
name = "lp3"
kind = "full"
lines = ["239.1.1.4:30004"]
stale_threshold_ms = 100
source_threshold_ms = 60000
clock_offset = 0
"#,
        "stat-test.toml",
    )
    .unwrap();
    let p = publication(shm, &config, T0);
    let mut h = Handler::with_table(&config, StateTable::shared(p.clone()), 4096);
    let sym = |i: usize| tickguard::symbol::Symbol::parse(&format!("S{i:05}")).unwrap();
    let mut t = T0;
    for round in 0..2u64 {
        for chunk in 0..200 {
            let mut b = tickguard::protocol::sqf::PacketBuilder::new(t);
            for i in chunk * 10..chunk * 10 + 10 {
                b.quote(sym(i), round + 1, t, 1.0, 1.5);
            }
            let d = b.finish();
            let lines = if chunk % 10 == 0 { [1, 0] } else { [0, 1] };
            for line in lines {
                t += 1_000;
                h.on_datagram_line(0, line, &d, t).unwrap();
            }
        }
    }
    for seq in 1..=20u64 {
        let mut b = tickguard::protocol::sqf::PacketBuilder::new(t);
        b.quote(sym(seq as usize % 4), seq, t, 1.0, 1.5);
        let d = b.finish();
        let copies = if seq % 5 == 0 { 2 } else { 1 };
        for _ in 0..copies {
            t += 1_000;
            h.on_datagram_line(1, 0, &d, t).unwrap();
        }
    }
    // Over 120 ms: every packet of the feed rejected, not a burst.
    for _ in 0..40 {
        t += 3 * MS;
        let _ = h.on_datagram_line(2, 0, b"SESSION001\0\0\0\0\0\0\0\x01\0\x01", t);
    }
    h.publish_counters();
    p.heartbeat(T0 + 1_000 * MS);
    p.ready();
    p
}

fn stat_args(shm: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .args(["stat", "--once", "--dead-after-ms", "1000", "--now"])
        .arg((T0 + 1_000 * MS).to_string())
        .arg("--shm")
        .arg(shm)
        .args(args)
        .output()
        .unwrap()
}

fn stat_json(shm: &Path, args: &[&str]) -> serde_json::Value {
    let out = stat_args(shm, &[&["--json"], args].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 1, "one document, one line: {text}");
    serde_json::from_str(&text).unwrap()
}

fn temp_shm(name: &str) -> PathBuf {
    PathBuf::from(format!("/dev/shm/tickguard-{name}-{}", std::process::id()))
}

/// A writer stopped while writing its counters (killed, or here held in
/// the middle) leaves them unreadable: shown as unknown, not as zeros.
#[test]
fn counters_left_mid_write_are_unknown_not_zeros() {
    let shm = temp_shm("stat-mid-write");
    let p = three_feeds(&shm);
    let mut doc = serde_json::Value::Null;
    let mut text = String::new();
    p.write_counters(|| {
        doc = stat_json(&shm, &[]);
        text = String::from_utf8(stat_args(&shm, &[]).stdout).unwrap();
    });
    let whole = stat_json(&shm, &[]);
    crate::common::remove_publication(&shm);
    let feed = &doc["feeds"][0];
    assert_eq!(feed["counters_unreadable"], true, "{feed}");
    assert_eq!(feed.get("duplicates"), None, "{feed}");
    // (The flags are the status's, read.)
    assert!(feed["flags"].is_object(), "{feed}");
    assert_eq!(whole["feeds"][0]["counters_unreadable"], false);
    assert_eq!(whole["feeds"][0]["duplicates"], 4_000);
    assert!(text.contains("counters unreadable"), "{text}");
    assert!(!text.contains("duplicates 0"), "{text}");
}

/// A publication in bad state (a state word no writer stores, as a file
/// cut under its mapping reads, zeros): its counters are unknown, never
/// shown as zeros.
#[test]
fn counters_of_a_publication_in_bad_state_are_unknown() {
    use std::os::unix::fs::FileExt;
    let shm = temp_shm("stat-bad-state");
    let _p = three_feeds(&shm);
    let file = std::fs::OpenOptions::new().write(true).open(&shm).unwrap();
    // Header word 2, the state.
    file.write_all_at(&7u64.to_le_bytes(), 16).unwrap();
    let out = stat_args(&shm, &["--json"]);
    // The text view (the live one: `--once` prints no text of an
    // unusable publication, only its error line).
    let reader = tickguard::Reader::open_with(&shm, 1_000 * MS);
    let filter = tickguard::stat::Filter::default();
    let snap = tickguard::stat::Snapshot::read(&reader, "SHM", T0 + 1_000 * MS, &filter);
    let text = snap.unwrap().text().full();
    crate::common::remove_publication(&shm);
    assert!(
        text.contains("counters unknown (the publication is in bad state"),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(2));
    let doc: serde_json::Value =
        serde_json::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap();
    assert_eq!(doc["health"], "bad_state", "{doc}");
    // Its status, offset and the symbols judged with them are unknown
    // too: a file cut under its mapping reads as zeros, a healthy feed's
    // flags and no symbol.
    assert!(
        text.contains("symbols: unknown (the feed's status or offset unreadable)"),
        "{text}"
    );
    for feed in doc["feeds"].as_array().unwrap() {
        assert_eq!(feed["counters_unreadable"], true, "{feed}");
        assert_eq!(feed.get("duplicates"), None, "{feed}");
        assert_eq!(feed["flags"], serde_json::Value::Null, "{feed}");
        assert_eq!(feed["clock_offset_ns"], serde_json::Value::Null, "{feed}");
        assert_eq!(feed["symbols"], serde_json::Value::Null, "{feed}");
    }
}

#[test]
fn stat_json_tells_line_copies_from_duplicates_and_flags_a_rejected_feed() {
    let shm = temp_shm("stat-json");
    let _p = three_feeds(&shm);
    let doc = stat_json(&shm, &[]);
    crate::common::remove_publication(&shm);
    assert_eq!(doc["health"], "ok");
    assert_eq!(doc["writer"]["pid"], std::process::id());
    let feeds = doc["feeds"].as_array().unwrap();
    let names: Vec<&str> = feeds.iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["lp1", "lp2", "lp3"]);
    // lp1: line B repeats every one of A's 4,000 quotes (and A repeats the
    // ones B delivered first): all 4,000 duplicates are line copies.
    assert_eq!(feeds[0]["duplicates"], 4_000);
    assert_eq!(feeds[0]["line_copies"], 4_000);
    assert_eq!(feeds[0]["same_line_duplicates"], 0);
    assert_eq!(feeds[0]["ticks_lost"], 0);
    assert_eq!(feeds[0]["all_rejected"], serde_json::Value::Null);
    // lp2: four datagrams came twice on its only line.
    assert_eq!(feeds[1]["same_line_duplicates"], 4);
    assert_eq!(feeds[1]["line_copies"], 0);
    // lp3: nothing but rejected packets.
    assert_eq!(feeds[2]["rejected_by_reason"]["bad_magic"], 40);
    assert_eq!(feeds[2]["all_rejected"]["packets"], 40);
    assert_eq!(feeds[2]["all_rejected"]["reason"], "bad_magic");
    let symbols = doc["symbols"].as_array().unwrap();
    assert_eq!(symbols.len(), 2_004);
    assert_eq!(symbols[0]["feed"], "lp2", "worst (stale) first");
    assert_eq!(symbols[0]["reasons"][0], "stale");
    assert_eq!(feeds[1]["symbols"]["stale"], 4);
    assert_eq!(feeds[0]["symbols"]["ok"], 2_000);
}

#[test]
fn stat_filters_feed_not_ok_and_top() {
    let shm = temp_shm("stat-filters");
    let _p = three_feeds(&shm);
    let feed = stat_json(&shm, &["--feed", "lp1"]);
    let not_ok = stat_json(&shm, &["--not-ok"]);
    let top = stat_json(&shm, &["--top", "3"]);
    let text = String::from_utf8(stat_args(&shm, &["--feed", "lp2"]).stdout).unwrap();
    let unknown = stat_args(&shm, &["--feed", "nope"]);
    let zero = stat_args(&shm, &["--top", "0"]);
    crate::common::remove_publication(&shm);

    assert_eq!(feed["feeds"].as_array().unwrap().len(), 1);
    let symbols = feed["symbols"].as_array().unwrap();
    assert_eq!(symbols.len(), 2_000);
    assert!(symbols.iter().all(|s| s["feed"] == "lp1"));

    let symbols = not_ok["symbols"].as_array().unwrap();
    assert_eq!(symbols.len(), 4);
    assert!(symbols.iter().all(|s| s["ok"] == false));

    let symbols = top["symbols"].as_array().unwrap();
    assert_eq!(symbols.len(), 3);
    assert_eq!(top["symbols_left_out"], 2_001);
    assert_eq!(symbols[0]["reasons"][0], "stale");

    assert!(
        text.contains("feed lp2 (sqf, full)") && !text.contains("feed lp1"),
        "{text}"
    );
    assert_eq!(
        text.lines().filter(|l| l.starts_with("lp2 ")).count(),
        4,
        "{text}"
    );

    assert_eq!(unknown.status.code(), Some(2));
    let err = String::from_utf8(unknown.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("no feed 'nope'") && err.contains("lp1, lp2, lp3"),
        "{err}"
    );
    assert_eq!(zero.status.code(), Some(2));
}

#[test]
fn stat_text_shows_line_copies_and_a_feed_whose_every_packet_is_rejected() {
    let shm = temp_shm("stat-text");
    let _p = three_feeds(&shm);
    let text = String::from_utf8(stat_args(&shm, &[]).stdout).unwrap();
    crate::common::remove_publication(&shm);
    // A feed's block: its line and the indented ones below it.
    let feed_line = |name: &str| {
        text.lines()
            .skip_while(|l| !l.starts_with(&format!("feed {name} ")))
            .take_while(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("\n")
    };
    for (feed, same, copies) in [("lp1", 0, 4000), ("lp2", 4, 0)] {
        let block = feed_line(feed);
        assert!(
            block.contains(&format!("same_line_duplicates {same}"))
                && block.contains(&format!("line_copies {copies}")),
            "{text}"
        );
    }
    assert!(!feed_line("lp1").contains("REJECTED"), "{text}");
    assert!(
        feed_line("lp3").contains("EVERY PACKET REJECTED")
            && feed_line("lp3").contains("mostly bad_magic (not SQF?)"),
        "{text}"
    );
}

#[test]
fn the_live_view_of_2000_symbols_fits_40_rows() {
    let shm = temp_shm("stat-fit");
    let _p = three_feeds(&shm);
    let reader = tickguard::Reader::open_with(&shm, 1_000 * MS);
    let now = T0 + 1_000 * MS;
    let filter = tickguard::stat::Filter::default();
    let snap = tickguard::stat::Snapshot::read(&reader, "SHM", now, &filter).unwrap();
    let size = tickguard::stat::Size {
        rows: 40,
        cols: 100,
    };
    let text = tickguard::stat::fit(&snap.text(), size);
    let tiny = tickguard::stat::fit(&snap.text(), tickguard::stat::Size { rows: 5, cols: 60 });
    // Any size a caller passes ($LINES and $COLUMNS are read up to
    // 100,000): the whole frame, as on a tall terminal.
    let huge = tickguard::stat::Size {
        rows: usize::MAX,
        cols: usize::MAX,
    };
    let whole = tickguard::stat::fit(&snap.text(), huge);
    assert!(whole.lines().count() > 2000, "{whole}");
    // `--top 3`: three rows, the rest counted, however tall the terminal.
    let top = tickguard::stat::Filter {
        top: Some(3),
        ..Default::default()
    };
    let top = tickguard::stat::Snapshot::read(&reader, "SHM", now, &top).unwrap();
    let top = tickguard::stat::fit(&top.text(), size);
    crate::common::remove_publication(&shm);
    let top: Vec<&str> = top.lines().collect();
    let first = 1 + top
        .iter()
        .position(|l| l.starts_with("feed ") && l.contains("symbol"))
        .unwrap();
    assert_eq!(top.len(), first + 4, "{top:?}");
    assert!(
        top[first..first + 3].iter().all(|l| l.starts_with("lp2 ")),
        "{top:?}"
    );
    assert_eq!(
        top[first + 3],
        "... 2001 more symbols not shown (a taller terminal, --feed, --not-ok, --top)"
    );

    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 40, "{text}");
    assert!(lines.iter().all(|l| l.chars().count() <= 100), "{text}");
    assert!(lines[0].starts_with("tickguard stat"), "{text}");
    assert!(lines.iter().any(|l| l.starts_with("feed lp3")), "{text}");
    // The worst rows stay: lp2's four stale symbols come first.
    let header = lines
        .iter()
        .position(|l| l.starts_with("feed ") && l.contains("symbol"));
    let first = header.unwrap() + 1;
    assert!(
        lines[first..first + 4]
            .iter()
            .all(|l| l.starts_with("lp2 ")),
        "{text}"
    );
    let shown = lines.len() - first - 1;
    assert_eq!(
        lines[39],
        format!(
            "... {} more symbols not shown (a taller terminal, --feed, --not-ok, --top)",
            2_004 - shown
        )
    );
    let tiny: Vec<&str> = tiny.lines().collect();
    assert_eq!(tiny.len(), 5, "{tiny:?}");
    assert!(tiny[4].starts_with("... "), "{tiny:?}");
    // The screen: cleared, the 40 lines, the last without its end (a
    // 40th newline on a 40-line terminal would scroll the title off).
    let screen = tickguard::stat::screen(&snap.text(), size);
    assert_eq!(
        screen,
        format!("\x1b[H\x1b[2J{}", text.trim_end_matches('\n'))
    );
    assert_eq!(screen.matches('\n').count(), 39);
}

/// A path holding terminal codes (an operator's paste, a hostile
/// directory name) is printed escaped, never obeyed; the JSON form keeps
/// it as it is (JSON escapes it).
#[test]
fn a_path_with_terminal_codes_is_printed_escaped() {
    let shm = temp_shm("stat-\u{1b}]0;owned\u{7}-\u{202e}");
    let _p = three_feeds(&shm);
    let out = stat_args(&shm, &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    crate::common::remove_publication(&shm);
    assert!(out.status.success(), "{text}");
    let first = text.lines().next().unwrap();
    assert!(
        first.contains(r"stat-\u{1b}]0;owned\u{7}-\u{202e}"),
        "{first}"
    );
    assert!(!text.contains(['\u{1b}', '\u{7}', '\u{202e}']), "{text}");
}

/// `--top N` (and the live view, which reads no more rows than its
/// terminal shows) keeps the N worst rows, in the order the whole
/// snapshot has them, and counts the rest, whatever N.
#[test]
fn the_worst_rows_kept_are_those_of_the_whole_snapshot() {
    let shm = temp_shm("stat-top");
    let _p = three_feeds(&shm);
    let reader = tickguard::Reader::open_with(&shm, 1_000 * MS);
    let now = T0 + 1_000 * MS;
    let read = |top| {
        let filter = tickguard::stat::Filter {
            top,
            ..Default::default()
        };
        tickguard::stat::Snapshot::read(&reader, "SHM", now, &filter)
            .unwrap()
            .text()
    };
    let whole = read(None);
    assert_eq!(whole.left_out, 0);
    let all = whole.rows.len();
    assert!(all > 2_000);
    for n in [0, 1, 3, 4, 5, 7, 100, 1_500, all - 1, all, all + 1] {
        let top = read(Some(n));
        let kept = n.min(all);
        assert_eq!(top.rows, whole.rows[..kept], "--top {n}");
        assert_eq!(top.left_out, all - kept, "--top {n}");
        assert_eq!(top.header, whole.header, "--top {n}");
    }
    crate::common::remove_publication(&shm);
}

/// Descriptor-driven `stat` on a publication built in the test: an SQF
/// feed and an ITCH feed side by side.
mod described {
    use serde_json::json;
    use std::sync::Arc;
    use tickguard::config::Protocol;
    use tickguard::protocol::sqf::rules::{self, Price as SqfPrice};
    use tickguard::reader::Reader;
    use tickguard::shm::{counter, FeedInfo, Publication};
    use tickguard::stat::{Filter, Snapshot};
    use tickguard::state::{FeedKind, FeedStatus, Level, StateTable, Top};
    use tickguard::symbol::Symbol;
    use tickguard::verdict::Thresholds;

    const NOW: u64 = 1_767_603_600_000_000_000;
    const S: u64 = 1_000_000_000;

    /// A publication with an SQF feed and an ITCH feed: decimal prices with
    /// sizes, one halted symbol, the feed closed, suspect and joined, some
    /// extension counters. Returns the publication (kept alive) and its path.
    fn exchange_publication(dir: &std::path::Path) -> (Arc<Publication>, String) {
        let path = dir.join("tickguard");
        // Each feed's prices with its protocol's default decimals, as a
        // sidecar publishes them.
        let info = |name: &str, protocol: Protocol| {
            let mut f = FeedInfo::new(
                name,
                FeedKind::Delta,
                vec!["239.1.1.1:30001".parse().unwrap()],
                protocol,
            );
            f.traits |= tickguard::shm::traits::price_decimals(protocol.price_decimals());
            f
        };
        let feeds = [info("lp1", Protocol::Sqf), info("nasdaq", Protocol::Itch50)];
        let p = Arc::new(Publication::create(&path, 0o600, 16, &feeds, NOW, 1_000_000).unwrap());
        let mut t = StateTable::shared(p.clone());
        let th = Thresholds {
            stale_ns: 30 * S,
            source_ns: 30 * S,
        };
        let sym = |s| Symbol::parse(s).unwrap();
        let id = t.insert(0, sym("EURUSD"), th).unwrap();
        let px = SqfPrice {
            bid: 1.085,
            ask: 1.0851,
            source_time: NOW,
        };
        t.slots()[id as usize].update(|s| rules::snapshot(s, 1, px, NOW));
        let top = Top {
            bid: Some(Level {
                price: 1_234_500,
                size: 300,
            }),
            ask: Some(Level {
                price: 1_235_000,
                size: 100,
            }),
            exponent: -4,
            last_seq: 9,
            ..Top::default()
        };
        let id = t.insert(1, sym("AAPL"), th).unwrap();
        t.slots()[id as usize].write_top(&top);
        let id = t.insert(1, sym("HALTD"), th).unwrap();
        // (A bid of 0 shares: ITCH keeps such an order live.)
        t.slots()[id as usize].write_top(&Top {
            halted: true,
            bid: Some(Level {
                price: 1_234_500,
                size: 0,
            }),
            ask: None,
            ..top
        });
        t.set_feed_status(
            1,
            &FeedStatus {
                suspect: true,
                closed: true,
                joined: true,
                orders_refused: true,
                last_alive: NOW,
                source_watermark: NOW,
            },
        );
        p.write_counters(|| {
            p.set_counter(1, counter::NEXT, 101);
            p.set_counter(1, counter::HELD, 3);
            p.set_counter(1, counter::GAPS_OPEN, 1);
            p.set_counter(1, counter::LINE_MISMATCHES, 2);
            p.set_counter(1, counter::DUPLICATES, 7);
            p.set_counter(1, counter::SAME_LINE_DUPLICATES, 2);
            p.set_counter(1, counter::LINE_COPIES, 5);
            p.set_counter(1, counter::REJECTED, 1);
            let bad_stock =
                tickguard::protocol::Rejected::from(tickguard::protocol::itch50::Reject::BadStock);
            p.set_counter(1, counter::REJECTED_BY_REASON + bad_stock.index(), 1);
            // Every packet rejected, mostly too short for MoldUDP64 (the
            // first ITCH reason, whose index is SQF's `short` too).
            let short =
                tickguard::protocol::Rejected::from(tickguard::protocol::itch50::Reject::Short);
            p.set_counter(1, counter::ALL_REJECTED, 1);
            p.set_counter(1, counter::ALL_REJECTED_SINCE, NOW - 2_000_000_000);
            p.set_counter(1, counter::ALL_REJECTED_PACKETS, 40);
            p.set_counter(1, counter::ALL_REJECTED_REASON, short.index() as u64 + 1);
            p.set_counter(1, counter::SESSION_LO, u64::from_le_bytes(*b"000000AB"));
            p.set_counter(
                1,
                counter::SESSION_HI,
                u64::from_le_bytes(*b"CD\0\0\0\0\0\0"),
            );
        });
        p.ready();
        p.heartbeat(NOW);
        let shown = path.display().to_string();
        (p, shown)
    }

    /// Each feed shows the counters its protocol describes, and only
    /// those: the ITCH feed its flags, stream counters, session and
    /// reasons by ITCH's names; the SQF feed SQF's message kinds and no
    /// flags; in text and in JSON.
    #[test]
    fn stat_shows_each_feed_as_its_descriptors_say() {
        let dir = tempfile::tempdir().unwrap();
        let (_p, path) = exchange_publication(dir.path());
        let reader = Reader::open(&path);
        let at = NOW + 50_000_000;
        let snap = Snapshot::read(&reader, &path, at, &Filter::default()).unwrap();
        let text = snap.text().full();
        let block = |name: &str| -> String {
            text.split("\nfeed ")
                .find(|b| b.starts_with(name))
                .unwrap_or_else(|| panic!("no block {name}: {text}"))
                .lines()
                .take_while(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join("\n")
        };
        let lp1 = block("lp1");
        assert!(lp1.starts_with("lp1 (sqf, delta)  clock offset"), "{lp1}");
        assert!(
            !lp1.contains("flags") && !lp1.contains("next") && lp1.contains("quotes 0"),
            "{lp1}"
        );
        assert!(
            lp1.contains("packets 0 (A 0, B 0)") && lp1.contains("table_full_drops 0"),
            "{lp1}"
        );
        let nasdaq = block("nasdaq");
        assert!(
            nasdaq.starts_with(
                "nasdaq (itch50, delta)  flags suspect,closed,joined,orders_refused  clock offset"
            ),
            "{nasdaq}"
        );
        for item in [
            "duplicates 7",
            "same_line_duplicates 2",
            "line_copies 5",
            "rejected by reason: bad_stock 1",
            "40 in a row, mostly short (not MoldUDP64?)",
            "next 101  high 0  held 3  gaps_open 1",
            "flags suspect,closed,joined,orders_refused",
            "line_mismatches 2",
            "session 000000ABCD",
            "table_full_symbols 0",
        ] {
            assert!(nasdaq.contains(item), "{item} in {nasdaq}");
        }
        assert!(!nasdaq.contains("quotes"), "{nasdaq}");
        assert!(
            nasdaq.ends_with("suspect 2  invalid_price 0  halted 1  closed 2"),
            "{nasdaq}"
        );
        let row = |s: &str| text.lines().find(|l| l.contains(s)).unwrap().to_string();
        let aapl = row("AAPL");
        assert!(
            aapl.contains("suspect,closed")
                && aapl.contains("300×123.4500")
                && aapl.contains("123.5000×100"),
            "{aapl}"
        );
        assert!(row("HALTD").contains("suspect,halted,closed"), "{text}");
        assert!(row("HALTD").contains("0×123.45"), "{text}");
        assert!(row("EURUSD").contains(" 1.08500 "), "{text}");

        let doc = snap.json();
        let feeds = doc["feeds"].as_array().unwrap();
        assert_eq!(feeds[0]["protocol"], "sqf");
        assert_eq!(feeds[1]["protocol"], "itch50");
        assert_eq!(feeds[0]["kind"], "delta");
        assert!(feeds[0]["quotes"].is_u64() && feeds[1]["quotes"].is_null());
        assert_eq!(feeds[0]["flags"], json!({}));
        assert_eq!(feeds[0].get("gaps_open"), None);
        assert_eq!(feeds[1]["flags"]["closed"], true);
        assert_eq!(feeds[1]["gaps_open"], 1);
        assert_eq!(feeds[1]["packets_by_line"], json!({"A": 0, "B": 0}));
        assert_eq!(feeds[1]["rejected_by_reason"]["bad_stock"], 1);
        assert_eq!(feeds[0]["rejected_by_reason"]["bad_magic"], 0);
        assert_eq!(feeds[1]["all_rejected"]["reason"], "short");
        assert_eq!(feeds[1]["line_copies"], 5);
        assert_eq!(feeds[1]["same_line_duplicates"], 2);
        assert_eq!(feeds[1]["all_rejected"]["packets"], 40);
        assert_eq!(feeds[1]["session"], "000000ABCD");
        assert_eq!(
            feeds[1]["recovery_latency"][0],
            json!({"le_ns": 16_000, "count": 0})
        );
        assert_eq!(feeds[1]["recovery_latency"][15]["le_ns"], json!(null));
        assert_eq!(feeds[1]["symbols"]["closed"], 2);
        assert_eq!(feeds[1]["symbols"]["halted"], 1);
        let symbol = |name: &str| {
            doc["symbols"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["symbol"] == name)
                .unwrap()
        };
        let sym = symbol("AAPL");
        assert_eq!(sym["bid_exact"], "123.4500");
        assert_eq!(sym["bid_size"], 300);
        // An exchange feed's size 0 is one; an SQF feed has none.
        assert_eq!(symbol("HALTD")["bid_size"], 0);
        assert_eq!(symbol("EURUSD")["bid_size"], json!(null));
        assert_eq!(sym["ask"], 123.5);
        assert_eq!(sym["silence_ns"], at - NOW, "the feed's liveness");
        // Lost ticks and duplicates are the stream's, not the symbol's.
        assert_eq!(
            (&sym["ticks_lost"], &sym["duplicates"]),
            (&json!(null), &json!(null))
        );
        let sqf = symbol("EURUSD");
        assert!(
            sqf["ticks_lost"].is_u64() && sqf["duplicates"].is_u64(),
            "{sqf}"
        );
        // Last seq 9, then no lost or dups cells of its own.
        let cells = format!("{:>10} {:>7} {:>8}", 9, "-", "-");
        assert!(row("AAPL").contains(&cells), "{}", row("AAPL"));
    }

    /// No counter a protocol describes takes a key `stat --json` uses for
    /// a feed's identity, status or tallies.
    #[test]
    fn counter_names_leave_stat_json_keys_alone() {
        let reserved = [
            "name",
            "protocol",
            "kind",
            "flags",
            "last_alive_ns",
            "source_watermark_ns",
            "clock_offset_ns",
            "all_rejected",
            "symbols",
        ];
        for p in Protocol::ALL {
            // The run of rejected packets is shown as one `all_rejected`.
            for d in tickguard::protocol::counters(p)
                .into_iter()
                .filter(|d| !d.name.starts_with("all_rejected"))
            {
                assert!(!reserved.contains(&d.name.as_str()), "{p:?}: {}", d.name);
                assert!(!reserved.contains(&format!("{}_by_{}", d.name, d.key).as_str()));
            }
        }
    }

    /// An MDP3 channel's slots are keyed by an encoded SecurityID: `stat`
    /// shows each by the last name the directory gives it (its Symbol once
    /// aliased, else `#SecurityID`), in rows and JSON, and widens the
    /// column for a long one; an SQF symbol shows as before.
    #[test]
    fn stat_shows_an_mdp3_slot_by_its_published_name() {
        use tickguard::protocol::mdp3::publish::key;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tickguard");
        let lines = vec!["239.1.1.1:30001".parse().unwrap()];
        let feeds = [
            FeedInfo::new("lp1", FeedKind::Full, lines.clone(), Protocol::Sqf),
            FeedInfo::new("cme", FeedKind::Delta, lines, Protocol::Mdp3),
        ];
        let p = Arc::new(Publication::create(&path, 0o600, 16, &feeds, NOW, 1_000_000).unwrap());
        let mut t = StateTable::shared(p.clone());
        let th = Thresholds {
            stale_ns: 30 * S,
            source_ns: 30 * S,
        };
        let top = Top {
            bid: Some(Level {
                price: 6_850_000_000_000,
                size: 5,
            }),
            exponent: -9,
            ..Top::default()
        };
        let es = t.insert_named(1, key(294_973), b"#294973", th).unwrap();
        assert!(t.alias(1, key(294_973), b"ESZ6", es, None));
        t.slots()[es as usize].write_top(&top);
        let spread = t.insert_named(1, key(118_061), b"#118061", th).unwrap();
        assert!(t.alias(1, key(118_061), b"ESZ6-ESH7-ESM7", spread, None));
        t.slots()[spread as usize].write_top(&top);
        let nq = t.insert_named(1, key(206_323), b"#206323", th).unwrap();
        t.slots()[nq as usize].write_top(&top);
        t.insert(0, Symbol::parse("EURUSD").unwrap(), th).unwrap();
        t.set_feed_status(
            1,
            &FeedStatus {
                last_alive: NOW,
                source_watermark: NOW,
                ..FeedStatus::default()
            },
        );
        p.ready();
        p.heartbeat(NOW);
        let shown = path.display().to_string();
        let reader = Reader::open(&shown);

        let names = reader.names();
        assert_eq!(names[&(1, key(294_973))], "ESZ6");
        assert_eq!(names[&(1, key(206_323))], "#206323", "no Symbol yet");
        assert_eq!(names[&(0, Symbol::parse("EURUSD").unwrap())], "EURUSD");

        let snap = Snapshot::read(&reader, &shown, NOW + S, &Filter::default()).unwrap();
        let text = snap.text().full();
        let row = |s: &str| {
            text.lines()
                .find(|l| l.split_whitespace().nth(1) == Some(s))
                .unwrap_or_else(|| panic!("no row {s}: {text}"))
                .to_string()
        };
        // The column is as wide as the longest name (14), not 9.
        let starts = |feed: &str, name: &str| {
            let want = format!("{feed:<10} {name:<14} ");
            assert!(row(name).starts_with(&want), "{want:?} in {text}");
        };
        starts("cme", "ESZ6");
        starts("cme", "ESZ6-ESH7-ESM7");
        starts("cme", "#206323");
        starts("lp1", "EURUSD");
        assert!(row("ESZ6").contains(" 5×"), "{text}");
        assert!(!text.contains("#0"), "no key shown: {text}");
        let header = text.lines().find(|l| l.contains(" verdict ")).unwrap();
        assert!(
            header.starts_with(&format!("{:<10} {:<14} verdict", "feed", "symbol")),
            "{header}"
        );

        let doc = snap.json();
        let mut symbols: Vec<(&str, &str)> = doc["symbols"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["feed"].as_str().unwrap(), s["symbol"].as_str().unwrap()))
            .collect();
        symbols.sort_unstable();
        assert_eq!(
            symbols,
            [
                ("cme", "#206323"),
                ("cme", "ESZ6"),
                ("cme", "ESZ6-ESH7-ESM7"),
                ("lp1", "EURUSD")
            ]
        );
        drop(t);
    }
}

/// `stat` shows a feed's GLIMPSE snapshots as its engine publishes them:
/// awaiting after the join, with the failed attempt counted and no N yet;
/// idle once the second attempt merged, with that N; in text and JSON.
#[test]
fn stat_shows_a_glimpse_feeds_snapshot_state_attempts_and_last_n() {
    use crate::common::glimpse::{not_available, spin, Venue, MS, T0};
    use serde_json::json;
    use tickguard::stat::{Filter, Snapshot};
    let dir = tempfile::tempdir().unwrap();
    let mut v = Venue::new(&dir.path().join("shm"));
    let shown = v.path.display().to_string();
    let reader = tickguard::Reader::open(&shown);
    // The feed's counters as `stat` prints them, one item each, and its
    // JSON object.
    let read = |v: &mut Venue| {
        v.publish();
        let snap = Snapshot::read(&reader, &shown, v.t + MS, &Filter::default()).unwrap();
        let text = snap.text().full();
        let block: Vec<String> = text
            .split("\nfeed ")
            .find(|b| b.starts_with("nq "))
            .unwrap_or_else(|| panic!("no block nq: {text}"))
            .lines()
            .take_while(|l| !l.is_empty())
            .flat_map(|l| l.split("  "))
            .map(|item| item.trim().to_string())
            .collect();
        (block, snap.json()["feeds"][0].clone())
    };
    v.datagrams(100..110);
    v.t = T0 + 1_000 * MS;
    v.connection(&not_available());
    // The state, attempts and next, as text items and as JSON.
    let shows = |v: &mut Venue, text: [&str; 3], json: [serde_json::Value; 3]| {
        let (items, feed) = read(v);
        for (name, item) in ["snapshot_state", "snapshot_attempts", "snapshot_next"]
            .into_iter()
            .zip(text)
        {
            let item = format!("{name} {item}");
            assert!(items.contains(&item), "{item} in {items:?}");
        }
        let got = [
            &feed["snapshot_state"],
            &feed["snapshot_attempts"],
            &feed["snapshot_next"],
        ];
        assert_eq!(got, json.each_ref(), "{feed}");
    };
    shows(
        &mut v,
        ["awaiting", "1", "-"],
        [json!("awaiting"), json!(1), json!(null)],
    );
    v.t = T0 + 2_500 * MS;
    v.connection(&spin(105));
    shows(
        &mut v,
        ["idle", "2", "105"],
        [json!("idle"), json!(2), json!(105)],
    );
    // Every summary key of glimpse G4, under its name (G7.1): the spin
    // held 100..110 and merged at 105 (100..104 discarded), of two `S`
    // packets (the directory and one order), in the session multicast's.
    let (_, feed) = read(&mut v);
    let failures = json!({"refused": 0, "rejected": 1, "session": 0, "malformed": 0,
        "too_large": 0, "closed": 0, "abandoned": 0});
    for (key, want) in [
        ("snapshots", json!(1)),
        ("snapshot_failures", failures),
        ("snapshot_gave_up", json!(0)),
        ("snapshot_discarded", json!(5)),
        ("snapshot_overflow", json!(0)),
        ("snapshot_session", json!("20260105XA")),
        ("snapshot_messages", json!(2)),
    ] {
        assert_eq!(feed[key], want, "{key} in {feed}");
    }
}

/// `stat` and the metrics know no protocol: they name none, and print and
/// export what the publication's counter descriptors say.
#[test]
fn stat_and_metrics_name_no_protocol() {
    for (file, src) in [
        ("src/stat.rs", include_str!("../../src/stat.rs")),
        ("src/metrics.rs", include_str!("../../src/metrics.rs")),
    ] {
        let lower = src.to_lowercase();
        for name in ["sqf", "itch", "protocol::", "ext_names", "counter::names"] {
            assert!(!lower.contains(name), "{file} names {name}");
        }
    }
}

/// The streaming view into a pipe (a log, `less`, a file) prints whole
/// frames one after another with no terminal control codes.
#[test]
fn streaming_stat_into_a_pipe_has_no_terminal_codes() {
    use std::io::Read;
    let (shm, _p, mut child) = live_stat("pipe", std::process::Stdio::inherit());
    let mut stdout = child.stdout.take().unwrap();
    // Two frames come a second apart: read until the second header (the
    // child is killed after 20 s at most, which ends the read; the killer
    // stands down once the read is over, before the child is reaped).
    let pid = child.id();
    let (done, stand_down) = std::sync::mpsc::channel::<()>();
    let killer = std::thread::spawn(move || {
        if stand_down
            .recv_timeout(std::time::Duration::from_secs(20))
            .is_err()
        {
            crate::common::signal(pid, libc::SIGKILL);
        }
    });
    let (mut text, mut buf) = (Vec::new(), [0u8; 4096]);
    while text
        .windows(b"tickguard stat".len())
        .filter(|w| w == b"tickguard stat")
        .count()
        < 2
    {
        match stdout.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => text.extend_from_slice(&buf[..n]),
        }
    }
    let _ = done.send(());
    let _ = killer.join();
    let _ = child.kill();
    let _ = child.wait();
    crate::common::remove_publication(&shm);
    let text = String::from_utf8_lossy(&text);
    assert_eq!(text.matches("tickguard stat").count(), 2, "{text}");
    assert!(!text.contains('\x1b'), "{text:?}");
}

/// Without `--dead-after-ms` or `--config`, `stat` and `check` take 100 ms
/// raised to three of the writer's heartbeat periods as the file states
/// them (a period taken as at most 1 s, the most a configuration sets): a
/// writer beating every second is not dead 700 ms after a beat, and is
/// 3 s after, as one stating a minute is. A bound given is kept. With
/// `--config` the feeds' files are not opened, so a moved `definitions`
/// capture does not stop a check.
#[test]
fn the_default_dead_writer_bound_follows_the_writers_heartbeat() {
    let dir = tempfile::tempdir().unwrap();
    let shm = |period_ms: u64| {
        PathBuf::from(format!(
            "/dev/shm/tickguard-stat-period-{period_ms}-{}",
            std::process::id()
        ))
    };
    let config = Config::load(&fixtures().join("config.toml")).unwrap();
    let publish = |period_ms: u64| {
        let p = Publication::create(
            &shm(period_ms),
            0o640,
            config.capacity,
            &publication_feeds(&config),
            T0 - 1_000 * MS,
            period_ms * MS,
        )
        .unwrap();
        p.heartbeat(T0);
        p.ready();
        p
    };
    let (_second, _minute) = (publish(1_000), publish(60_000));
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            "[sidecar]\nshm_path = \"{}\"\nheartbeat_ms = 1000\ndead_after_ms = 3000\n\
             [[feed]]\nname = \"lp1\"\nprotocol = \"mdp3\"\nlines = [\"239.3.1.1:14310\"]\n\
             stale_threshold_ms = 1000\nsource_threshold_ms = 1000\n\
             definitions = \"moved-away.pcap\"\n",
            shm(1_000).display()
        ),
    )
    .unwrap();
    let stat = |now: u64, period_ms: u64, extra: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tickguard"));
        c.args(["stat", "--once", "--now", &now.to_string()]);
        if period_ms == 0 {
            c.arg("--config").arg(&cfg);
        } else {
            c.arg("--shm").arg(shm(period_ms));
        }
        let out = c.args(extra).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{err}");
        String::from_utf8_lossy(&out.stdout).contains("writer dead")
    };
    let dead = [
        stat(T0 + 700 * MS, 1_000, &[]),
        stat(T0 + 3_001 * MS, 1_000, &[]),
        stat(T0 + 700 * MS, 1_000, &["--dead-after-ms", "100"]),
        stat(T0 + 2_900 * MS, 0, &[]),
        stat(T0 + 2_900 * MS, 60_000, &[]),
        stat(T0 + 3_001 * MS, 60_000, &[]),
    ];
    // A check reads the same configuration without the capture: an
    // answer (stale: the heartbeat is T0's), not a configuration error
    // (of a feed the publication names: its feeds are the fixture's).
    let out = Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .args(["check", "fx", "EURUSD", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    for p in [1_000, 60_000] {
        crate::common::remove_publication(shm(p));
    }
    assert_eq!(dead, [false, true, true, false, false, true]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("stale"));
}

/// Holds the seqlock stamp at byte `at` of feed 0's block in the
/// publication at `shm` odd, a write in progress (as a writer killed inside
/// it leaves it), while `f` runs; then puts it back.
fn held_mid_write(shm: &Path, at: usize, f: impl FnOnce()) {
    use std::os::unix::fs::FileExt;
    use tickguard_reader::layout::Header;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(shm)
        .unwrap();
    let word = |at: u64| {
        let mut b = [0; 8];
        file.read_at(&mut b, at).unwrap();
        u64::from_le_bytes(b)
    };
    let stamp_at = word(std::mem::offset_of!(Header, feeds_offset) as u64) + at as u64;
    let stamp = word(stamp_at);
    assert_eq!(stamp % 2, 0, "no write in progress before");
    file.write_at(&(stamp + 1).to_le_bytes(), stamp_at).unwrap();
    f();
    file.write_at(&stamp.to_le_bytes(), stamp_at).unwrap();
}

/// A writer stopped inside the write of a feed's clock offset, or of its
/// status: the offset (and, for the status, the flags) shown as unknown,
/// and the feed's symbols counted by verdict as unknown, not as zeros (each
/// is judged with both); the other feeds as before.
#[test]
fn offset_or_status_left_mid_write_leave_the_feeds_symbols_unknown() {
    use tickguard_reader::layout::FeedBlock;
    let shm = temp_shm("stat-offset-mid-write");
    let _p = three_feeds(&shm);
    let whole = stat_json(&shm, &[]);
    let feed = &whole["feeds"][0];
    assert_eq!(feed["clock_offset_ns"], 0, "{feed}");
    assert!(feed["symbols"]["ok"].as_u64().unwrap() > 0, "{feed}");
    let offset = std::mem::offset_of!(FeedBlock, offset_stamp);
    let status = std::mem::offset_of!(FeedBlock, status);
    for (part, at) in [("offset", offset), ("status", status)] {
        let (mut doc, mut text) = (serde_json::Value::Null, String::new());
        held_mid_write(&shm, at, || {
            doc = stat_json(&shm, &[]);
            text = String::from_utf8(stat_args(&shm, &[]).stdout).unwrap();
        });
        let feed = &doc["feeds"][0];
        assert_eq!(feed["symbols"], serde_json::Value::Null, "{part}: {feed}");
        assert_eq!(feed["clock_offset_ns"], serde_json::Value::Null, "{part}");
        assert_eq!(feed["flags"].is_null(), part == "status", "{part}: {feed}");
        assert_eq!(doc["feeds"][1]["symbols"], whole["feeds"][1]["symbols"]);
        assert_eq!(
            text.matches("symbols: unknown (the feed's status or offset unreadable)")
                .count(),
            1,
            "{part}: {text}"
        );
    }
    assert_eq!(stat_json(&shm, &[]), whole);
    crate::common::remove_publication(&shm);
}

/// A live clock-offset estimator whose queue fills merges samples (its
/// offset may then read quotes older than a replay does): counted per
/// feed, and shown by `stat`.
#[test]
fn offset_samples_merged_for_room_are_counted_and_shown() {
    let shm = temp_shm("stat-offset-merges");
    let config = Config::parse(
        r#"
[[feed]]
name = "lp1"
kind = "full"
lines = ["239.1.1.1:30001"]
stale_threshold_ms = 60000
source_threshold_ms = 60000
clock_offset = "auto"
"#,
        "stat-test.toml",
    )
    .unwrap();
    let p = publication(&shm, &config, T0);
    // A queue of 2: every delay longer than the one before is one more
    // sample the window's minimum must keep.
    let mut h = Handler::with_table(&config, StateTable::shared(p.clone()), 2);
    let sym = tickguard::symbol::Symbol::parse("EURUSD").unwrap();
    for seq in 1..=10u64 {
        let mut b = tickguard::protocol::sqf::PacketBuilder::new(T0);
        b.quote(sym, seq, T0, 1.0, 1.5);
        h.on_datagram_line(0, 0, &b.finish(), T0 + seq * MS)
            .unwrap();
    }
    h.publish_counters();
    p.heartbeat(T0 + 1_000 * MS);
    p.ready();
    let doc = stat_json(&shm, &[]);
    crate::common::remove_publication(&shm);
    let merged = doc["feeds"][0]["offset_merges"].as_u64();
    assert!(merged.is_some_and(|n| n >= 7), "{doc}");
}

/// A live `stat` (a frame a second, stdout a pipe, stderr to `stderr`) of
/// the fixture's publication at 4.3 s, made at a path named for `test`.
fn live_stat(
    test: &str,
    stderr: std::process::Stdio,
) -> (PathBuf, Arc<Publication>, std::process::Child) {
    let shm = PathBuf::from(format!(
        "/dev/shm/tickguard-stat-{test}-test-{}",
        std::process::id()
    ));
    let at = T0 + 4_300 * MS;
    let p = publish(&shm, &fixtures().join("scenario-vlan-ns.pcap"), at);
    let child = Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .args(["stat", "--dead-after-ms", "1000", "--now"])
        .arg((at + 50 * MS).to_string())
        .arg("--shm")
        .arg(&shm)
        .stdout(std::process::Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    (shm, p, child)
}

/// `stat --once` whose reader stopped reading (2,000 symbols, more than
/// a pipe holds) ends on SIGTERM, by the signal: a handler that only set
/// a flag left it blocked in its write until SIGKILL.
#[test]
fn stat_once_stuck_on_a_full_pipe_ends_on_sigterm() {
    use std::os::unix::process::ExitStatusExt;
    let shm = temp_shm("stat-once-full-pipe");
    let _p = three_feeds(&shm);
    let status = crate::common::stop_cmd_on_a_full_pipe(
        Command::new(env!("CARGO_BIN_EXE_tickguard"))
            .args(["stat", "--once", "--dead-after-ms", "1000", "--now"])
            .arg((T0 + 1_000 * MS).to_string())
            .arg("--shm")
            .arg(&shm),
        std::time::Duration::from_millis(1_000),
        std::time::Duration::from_secs(2),
    );
    crate::common::remove_publication(&shm);
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
}

/// A live `stat` whose reader stopped reading (its pipe full, a write
/// blocked) still ends at once on SIGTERM, as its help promises for
/// Ctrl-C: the write waits for room in slices, looking at the signal's
/// flag between.
#[test]
fn a_live_stat_stuck_on_a_full_pipe_ends_on_sigterm() {
    let (shm, _p, mut child) = live_stat("full-pipe", std::process::Stdio::null());
    // The second frame (about 2 KB each, one a second) fills a page, the
    // third blocks.
    let status = crate::common::stop_on_a_full_pipe(
        &mut child,
        std::time::Duration::from_millis(3_500),
        std::time::Duration::from_secs(2),
    );
    crate::common::remove_publication(&shm);
    assert!(status.success(), "{status:?}");
}
