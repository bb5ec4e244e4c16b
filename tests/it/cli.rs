//! End-to-end tests of the `tickguard` binary on fixtures and on small
//! captures built here. One test per thing a user could hit.

use assert_cmd::Command;
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use tickguard::capture::link::Link;
use tickguard::capture::write::{CaptureWriter, Format};
use tickguard::protocol::sqf::PacketBuilder;
use tickguard::symbol::Symbol;

const SCENARIOS: &[&str] = &[
    "scenario-eth-us",
    "scenario-vlan-ns",
    "scenario-sll-ns",
    "scenario-sll2-us",
    "scenario-raw-bin30",
    "scenario-rawip-ns",
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn capture_of(stem: &str) -> PathBuf {
    let dir = fixtures();
    let pcap = dir.join(format!("{stem}.pcap"));
    if pcap.exists() {
        pcap
    } else {
        dir.join(format!("{stem}.pcapng"))
    }
}

fn tickguard() -> Command {
    Command::cargo_bin("tickguard").expect("binary")
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    summary: Option<String>,
}

fn replay(capture: &Path, config: &Path, checks: Option<&Path>) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.json");
    let mut cmd = tickguard();
    cmd.arg("replay")
        .arg(capture)
        .arg("--config")
        .arg(config)
        .arg("--summary")
        .arg(&summary);
    if let Some(c) = checks {
        cmd.arg("--checks").arg(c);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!stderr.contains("panicked"), "panic: {stderr}");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        // The warnings and errors: the closing line has a wall time.
        stderr: crate::common::without_end_line(&stderr),
        summary: std::fs::read_to_string(&summary).ok(),
    }
}

fn replay_fixture(stem: &str) -> Run {
    let dir = fixtures();
    replay(
        &capture_of(stem),
        &dir.join("config.toml"),
        Some(&dir.join("checks.csv")),
    )
}

/// A change detector, not a proof: the goldens are this code's own output
/// (`tools/gen_fixtures.rs` replays each capture to write them), so this
/// flags any change of output, intended or not, and says nothing of
/// whether the output is right. The proof of correctness is
/// `tests/model.rs` (an independent model of the SQF spec run side by side
/// with the handler) and the story checked by hand in
/// [`scenario_verdicts_tell_the_story`].
#[test]
fn every_fixture_reproduces_its_golden_output() {
    for stem in SCENARIOS {
        let run = replay_fixture(stem);
        assert_eq!(run.code, 0, "{stem}: {}", run.stderr);
        let expected =
            std::fs::read_to_string(fixtures().join(format!("{stem}.expected.jsonl"))).unwrap();
        assert!(
            run.stdout == expected,
            "{stem}: output differs from its golden file"
        );
        let summary =
            std::fs::read_to_string(fixtures().join(format!("{stem}.summary.json"))).unwrap();
        assert!(
            run.summary.as_deref() == Some(&summary[..]),
            "{stem}: summary differs from its golden file"
        );
    }
}

#[test]
fn replay_is_deterministic() {
    let a = replay_fixture("scenario-sll-ns");
    let b = replay_fixture("scenario-sll-ns");
    assert_eq!(a.stdout, b.stdout);
    assert_eq!(a.summary, b.summary);
}

/// A change detector of the generator and of the goldens it writes with
/// the replay (see [`every_fixture_reproduces_its_golden_output`]).
#[test]
fn generator_reproduces_the_committed_fixtures() {
    let dir = tempfile::tempdir().unwrap();
    Command::cargo_bin("tickguard-fixtures")
        .unwrap()
        .arg(dir.path())
        .assert()
        .success();
    let mut compared = 0;
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        let fresh = std::fs::read(entry.path()).unwrap();
        let committed = std::fs::read(fixtures().join(&name)).unwrap_or_default();
        assert!(
            fresh == committed,
            "fixtures/{} is not what the generator writes",
            name.to_string_lossy()
        );
        compared += 1;
    }
    // config, checks, three files per capture, and the 11 `--explain` goldens.
    assert_eq!(compared, 2 + 3 * SCENARIOS.len() + 11);
}

/// A fixture generator given an option or a second argument refuses in
/// one line, exit 2, writing nothing (it took `--help` for its folder and
/// wrote the fixtures there); `--help` prints its usage.
#[test]
fn the_fixture_generators_refuse_what_is_not_a_folder() {
    for bin in [
        "tickguard-fixtures",
        "tickguard-itch-fixtures",
        "tickguard-mdp3-fixtures",
    ] {
        let dir = tempfile::tempdir().unwrap();
        for args in [&["--out"][..], &["a", "b"], &["-x"]] {
            let out = Command::cargo_bin(bin)
                .unwrap()
                .current_dir(dir.path())
                .args(args)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{bin} {args:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{bin} {args:?}: {err}");
            assert!(err.contains("usage: ") && err.contains(" [DIR]"), "{err}");
        }
        let out = Command::cargo_bin(bin)
            .unwrap()
            .current_dir(dir.path())
            .arg("--help")
            .output()
            .unwrap();
        assert!(out.status.success(), "{bin} --help");
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("usage: "));
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "{bin} wrote"
        );
    }
}

#[test]
fn same_answers_across_capture_formats_of_the_same_resolution() {
    let ns: Vec<_> = ["scenario-vlan-ns", "scenario-sll-ns", "scenario-rawip-ns"]
        .iter()
        .map(|s| replay_fixture(s).stdout)
        .collect();
    assert!(ns.windows(2).all(|w| w[0] == w[1]), "ns captures disagree");
    let us: Vec<_> = ["scenario-eth-us", "scenario-sll2-us"]
        .iter()
        .map(|s| replay_fixture(s).stdout)
        .collect();
    assert!(us[0] == us[1], "µs captures disagree");
}

const T0: u64 = 1_767_603_600_000_000_000;
const MS: u64 = 1_000_000;

/// The scenario's story (fixtures/README.md), checked on the replay output.
#[test]
fn scenario_verdicts_tell_the_story() {
    let run = replay_fixture("scenario-vlan-ns");
    let rows: Vec<serde_json::Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let at = |feed: &str, symbol: &str, ms: i64| -> Vec<String> {
        let t = (T0 as i64 + ms * MS as i64) as u64;
        let row = rows
            .iter()
            .find(|r| r["feed"] == feed && r["symbol"] == symbol && r["time_ns"] == t)
            .unwrap_or_else(|| panic!("no check {feed} {symbol} at {ms} ms"));
        assert_eq!(row["ok"], row["reasons"].as_array().unwrap().is_empty());
        row["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_string())
            .collect()
    };
    let none: Vec<String> = vec![];
    assert_eq!(
        at("fx", "EURUSD", -50),
        ["no_quote"],
        "before the first packet"
    );
    assert_eq!(at("fx", "EURUSD", 950), none);
    assert_eq!(
        at("fx", "EURUSD", 1550),
        ["invalid_price"],
        "crossed quote at 1.5 s"
    );
    assert_eq!(at("fx", "EURUSD", 1650), none, "a valid quote clears it");
    assert_eq!(at("fx", "GBPUSD", 2450), none);
    assert_eq!(
        at("fx", "GBPUSD", 2550),
        ["stale"],
        "silent from 2.0 s, threshold 500 ms"
    );
    assert_eq!(at("fx", "GBPUSD", 3050), none, "ticks again from 3.0 s");
    assert_eq!(
        at("fx", "XAUUSD", 4050),
        ["stale_at_source"],
        "3 s old prices vs 2.5 s override"
    );
    assert_eq!(at("fx", "XAUUSD", 4750), none);
    assert_eq!(at("fx", "NZDUSD", 3050), ["no_quote"], "never quoted");
    assert_eq!(at("nofeed", "AAPL", 3050), ["no_quote"], "unknown feed");
    assert_eq!(
        at("eq", "AAPL", 450),
        ["suspect"],
        "delta feed before its first snapshot"
    );
    assert_eq!(at("eq", "AAPL", 1050), none, "snapshot at 1.0 s");
    assert_eq!(
        at("eq", "AAPL", 4250),
        ["suspect"],
        "both lines lost 4.0–4.2 s"
    );
    assert_eq!(at("eq", "AAPL", 5050), none, "repaired by the 5 s snapshot");
    assert_eq!(at("eq", "ES.H6", 2250), ["invalid_price"], "zero bid");
    for (feed, symbol) in [("fx", "EURUSD"), ("eq", "MSFT")] {
        assert!(
            at(feed, symbol, 6650).contains(&"stale".to_string()),
            "the feed ended at 6 s"
        );
    }
    // Moments of the story the committed checks do not fall in, asked
    // here: the loss on both lines (a full feed is not suspect), the
    // heartbeat that reveals USDJPY's lost quotes (suspect until the next
    // quote, 2.6 s), and the NaN bid (invalid until the next quote).
    let dir = tempfile::tempdir().unwrap();
    let checks = dir.path().join("checks.csv");
    let story = [
        ("fx", "EURUSD", 1_050, none.clone()),
        ("fx", "USDJPY", 2_580, vec!["suspect".to_string()]),
        ("fx", "USDJPY", 2_650, none.clone()),
        ("fx", "EURUSD", 4_010, vec!["invalid_price".to_string()]),
    ];
    let mut csv = "time_ns,feed,symbol\n".to_string();
    for (feed, symbol, ms, _) in &story {
        csv.push_str(&format!("{},{feed},{symbol}\n", T0 + ms * MS));
    }
    std::fs::write(&checks, csv).unwrap();
    let dir_fx = fixtures();
    let more = replay(
        &capture_of("scenario-vlan-ns"),
        &dir_fx.join("config.toml"),
        Some(&checks),
    );
    let answers: Vec<serde_json::Value> = more
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), story.len());
    for ((feed, symbol, ms, want), got) in story.iter().zip(&answers) {
        let reasons: Vec<String> = got["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_string())
            .collect();
        assert_eq!(&reasons, want, "{feed} {symbol} at {ms} ms");
    }

    let s: serde_json::Value = serde_json::from_str(run.summary.as_deref().unwrap()).unwrap();
    let fx = &s["feeds"]["fx"];
    assert_eq!(fx["rejected"], 6);
    for reason in [
        "bad_magic",
        "bad_version",
        "short",
        "trailing_bytes",
        "length_overrun",
        "bad_symbol",
    ] {
        assert_eq!(fx["rejected_by_reason"][reason], 1, "{reason}");
    }
    assert!(
        fx["symbols"]["USDJPY"]["ticks_lost"].as_u64().unwrap() >= 3,
        "heartbeat revealed 3 lost ticks"
    );
    assert!(
        fx["duplicates"].as_u64().unwrap() > 100,
        "line B duplicates line A"
    );
    assert!(fx["unknown_messages"].as_u64().unwrap() > 0);
    assert_eq!(s["capture"]["unrouted"], 1);
    assert_eq!(s["capture"]["not_ipv4"], 1);
    // Provider clock 120 ms behind, plus the smallest network delay (30–300 µs).
    let off = fx["clock_offset_ns"].as_i64().unwrap();
    assert!((120_030_000..120_300_000).contains(&off), "{off}");
    assert_eq!(s["feeds"]["eq"]["clock_offset_ns"], -40_000_000);
    assert!(
        s["feeds"]["eq"]["symbols"]["MSFT"]["last_seq"]
            .as_u64()
            .unwrap()
            < 200,
        "provider reset at 3.2 s"
    );
}

/// Writes a small Ethernet pcap (ns) of `(arrival, dst, payload)`.
fn small_capture(dir: &Path, packets: &[(u64, &str, Vec<u8>)]) -> PathBuf {
    let path = dir.join("small.pcap");
    let file = std::fs::File::create(&path).unwrap();
    let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::Ethernet).unwrap();
    let src: SocketAddrV4 = "10.0.0.1:5000".parse().unwrap();
    for (t, dst, p) in packets {
        w.write_udp(*t, src, dst.parse().unwrap(), p).unwrap();
    }
    w.finish().unwrap();
    path
}

const SMALL_CONFIG: &str = r#"
[[feed]]
name = "lp1"
kind = "full"
lines = ["239.1.1.1:30001", "239.1.1.2:30002"]
stale_threshold_ms = 500
source_threshold_ms = 2000
clock_offset = 0
"#;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn quote(seq: u64, t: u64) -> Vec<u8> {
    let mut b = PacketBuilder::new(t);
    b.quote(Symbol::parse("EURUSD").unwrap(), seq, t, 1.0, 1.1);
    b.finish()
}

#[test]
fn checks_are_answered_after_packets_at_or_before_their_time() {
    let dir = tempfile::tempdir().unwrap();
    let t = 10 * 1_000_000_000u64;
    let cap = small_capture(
        dir.path(),
        &[
            (t, "239.1.1.1:30001", quote(1, t)),
            (t + 600 * MS, "239.1.1.2:30002", quote(2, t)),
        ],
    );
    let cfg = write(dir.path(), "c.toml", SMALL_CONFIG);
    let checks = write(
        dir.path(),
        "checks.csv",
        &format!(
            "time_ns,feed,symbol\n{},lp1,EURUSD\n{},lp1,EURUSD\n{},lp1,EURUSD\n{},lp1,EURUSD\n{},lp1,EURUSD\n",
            t + 600 * MS, // listed first, answered in input order
            t - 1,
            t,
            t + 500 * MS,
            t + 500 * MS + 1,
        ),
    );
    let run = replay(&cap, &cfg, Some(&checks));
    assert_eq!(run.code, 0, "{}", run.stderr);
    let reasons: Vec<String> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["reasons"].to_string())
        .collect();
    assert_eq!(
        reasons,
        [r#"[]"#, r#"["no_quote"]"#, r#"[]"#, r#"[]"#, r#"["stale"]"#],
        "{}",
        run.stdout
    );
    // One check before the first datagram among later ones: no warning.
    assert!(
        !run.stderr.contains("before the input's first record"),
        "{}",
        run.stderr
    );
    // None after the last datagram: no warning of those either.
    assert!(
        !run.stderr.contains("after the input's last record"),
        "{}",
        run.stderr
    );
}

/// Checks later than the input's last record are answered from the state
/// at its end (an SQF quote 100 ms old reads `ok`), and said so: nothing
/// in the input vouches for what came after it.
#[test]
fn checks_after_the_inputs_end_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let t = 10 * 1_000_000_000u64;
    let cap = small_capture(dir.path(), &[(t, "239.1.1.1:30001", quote(1, t))]);
    let cfg = write(dir.path(), "c.toml", SMALL_CONFIG);
    let checks = write(
        dir.path(),
        "checks.csv",
        &format!(
            "time_ns,feed,symbol\n{},lp1,EURUSD\n{},lp1,EURUSD\n{},lp1,EURUSD\n",
            t,
            t + 100 * MS,
            t + 200 * MS,
        ),
    );
    let run = replay(&cap, &cfg, Some(&checks));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout.matches(r#""reasons":[]"#).count(),
        3,
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.contains(
            "checks.csv are after the input's last record \
             (1970-01-01T00:00:10.000000000Z; the latest at 1970-01-01T00:00:10.200000000Z)"
        ),
        "{}",
        run.stderr
    );
}

/// `--summary` or `--timeline` naming one of the replay's own inputs (the
/// capture, the configuration, the checks, a feed's definitions) is
/// refused before anything is read, in one line, the file untouched;
/// both flags naming one file by two spellings too.
#[test]
fn outputs_never_write_over_the_replays_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fixtures = fixtures();
    for f in [
        "mdp3/channel.pcap",
        "mdp3/defs.pcap",
        "mdp3/config.toml",
        "mdp3/checks.csv",
    ] {
        std::fs::copy(fixtures.join(f), d.join(Path::new(f).file_name().unwrap())).unwrap();
    }
    let before: Vec<Vec<u8>> = ["channel.pcap", "defs.pcap", "config.toml", "checks.csv"]
        .iter()
        .map(|f| std::fs::read(d.join(f)).unwrap())
        .collect();
    let replay = |flag: &str, out: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_tickguard"))
            .current_dir(d)
            .args([
                "replay",
                "channel.pcap",
                "--config",
                "config.toml",
                "--checks",
                "checks.csv",
                "--no-progress",
                flag,
                out,
            ])
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
            o.stdout.len(),
        )
    };
    for (out, what) in [
        ("channel.pcap", "the capture"),
        ("./config.toml", "the configuration"),
        ("checks.csv", "the checks"),
        ("defs.pcap", "feed cme-310's file"),
    ] {
        let (code, err, stdout) = replay("--summary", out);
        assert_eq!((code, stdout), (Some(2), 0), "{out}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!("--summary {out} is {what}: refusing")),
            "{err}"
        );
    }
    let (code, err, _) = replay("--timeline", "channel.pcap");
    assert_eq!(code, Some(2), "{err}");
    let after: Vec<Vec<u8>> = ["channel.pcap", "defs.pcap", "config.toml", "checks.csv"]
        .iter()
        .map(|f| std::fs::read(d.join(f)).unwrap())
        .collect();
    assert!(before == after, "an input was changed");
    // The same file by two spellings; standard output by `-` and by a
    // name for it (one stream: the two would run together in it).
    for (summary, timeline) in [("out.json", "./out.json"), ("-", "/dev/stdout")] {
        let run = tickguard_in(
            d,
            &[
                "replay",
                "channel.pcap",
                "--config",
                "config.toml",
                "--summary",
                summary,
                "--timeline",
                timeline,
            ],
        );
        assert_eq!(run.0, Some(2), "{}", run.1);
        assert!(run.1.contains("both name"), "{}", run.1);
    }
    // A device is no file to replace: /dev/null may be an input (empty
    // checks) and an output alike.
    let run = tickguard_in(
        d,
        &[
            "replay",
            "channel.pcap",
            "--config",
            "config.toml",
            "--checks",
            "/dev/null",
            "--summary",
            "/dev/null",
            "--no-progress",
        ],
    );
    assert!(!run.1.contains("refusing"), "{}", run.1);
}

/// `--record-max-mb` takes 1 to 1048576 MiB, and only with `--record`:
/// anything else is one line and exit 2, before anything is opened.
#[test]
fn record_max_mb_has_a_range_and_needs_record() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for args in [
        &["run", "--record", "t.pcap", "--record-max-mb", "0"][..],
        &["run", "--record", "t.pcap", "--record-max-mb", "1048577"],
        &["run", "--record", "t.pcap", "--record-max-mb=-1"],
        &["run", "--record-max-mb", "10"],
    ] {
        let (code, err) = tickguard_in(d, args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("record"), "{args:?}: {err}");
    }
    assert!(!d.join("t.pcap").exists());
}

fn tickguard_in(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A state table too small for the capture's symbols: the replay drops
/// the messages of those without a slot, as live, and a warning names the
/// feed, the count and the setting to raise.
#[test]
fn a_full_state_table_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let t = 10 * 1_000_000_000u64;
    let mut b = PacketBuilder::new(t);
    for (seq, s) in ["EURUSD", "GBPUSD", "USDJPY"].iter().enumerate() {
        b.quote(Symbol::parse(s).unwrap(), seq as u64 + 1, t, 1.0, 1.1);
    }
    let cap = small_capture(dir.path(), &[(t, "239.1.1.1:30001", b.finish())]);
    let cfg = write(
        dir.path(),
        "c.toml",
        &format!("[state]\ncapacity = 1\n{SMALL_CONFIG}"),
    );
    let run = replay(&cap, &cfg, None);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let s: serde_json::Value = serde_json::from_str(&run.summary.unwrap()).unwrap();
    assert_eq!(s["feeds"]["lp1"]["table_full_drops"], 2);
    let warned: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("no slot"))
        .collect();
    assert_eq!(warned.len(), 1, "{}", run.stderr);
    assert!(
        warned[0].contains("feed 'lp1'")
            && warned[0].contains("2 of their messages dropped")
            && warned[0].contains("raise [state] capacity"),
        "{}",
        warned[0]
    );
    // Room for all: no warning.
    let cfg = write(dir.path(), "c.toml", SMALL_CONFIG);
    let run = replay(&cap, &cfg, None);
    assert!(!run.stderr.contains("no slot"), "{}", run.stderr);
}

/// A checks file whose every time is before the capture (written in
/// seconds, here): each answered `no_quote` as asked, and a warning says
/// so, with the capture's first time.
#[test]
fn checks_all_before_the_capture_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let t = 1_767_603_600 * 1_000_000_000u64;
    let cap = small_capture(dir.path(), &[(t, "239.1.1.1:30001", quote(1, t))]);
    let cfg = write(dir.path(), "c.toml", SMALL_CONFIG);
    let checks = write(
        dir.path(),
        "seconds.csv",
        "time_ns,feed,symbol\n1767603600,lp1,EURUSD\n1767603601,lp1,EURUSD\n",
    );
    let run = replay(&cap, &cfg, Some(&checks));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.matches("no_quote").count(), 2, "{}", run.stdout);
    let warning: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("before the input's first record"))
        .collect();
    assert_eq!(warning.len(), 1, "{}", run.stderr);
    assert!(
        warning[0].contains("seconds.csv")
            && warning[0].contains("2026-01-05T09:00:00.000000000Z")
            && warning[0].contains("1970-01-01T00:00:01.767603601Z"),
        "{}",
        warning[0]
    );
}

/// The same for a BinaryFILE: its records' times are the input's span.
#[test]
fn checks_all_before_a_binaryfile_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let checks = write(
        dir.path(),
        "seconds.csv",
        "time_ns,feed,symbol\n1767623400,nasdaq,NVDA\n",
    );
    let out = tickguard()
        .arg("replay")
        .arg(fixtures().join("itch/session.itch"))
        .arg("--config")
        .arg(fixtures().join("itch/config.toml"))
        .args(["--feed", "nasdaq", "--date", "2026-01-05", "--checks"])
        .arg(&checks)
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("before the input's first record")
                && l.contains("2026-01-05T14:29:59")
                && l.contains("1970-01-01T00:00:01.767623400Z")),
        "{stderr}"
    );
}

#[test]
fn truncated_capture_replays_what_it_can_then_fails() {
    let dir = tempfile::tempdir().unwrap();
    let t = 10 * 1_000_000_000u64;
    let packets: Vec<_> = (1..=20)
        .map(|i| (t + i * MS, "239.1.1.1:30001", quote(i, t)))
        .collect();
    let cap = small_capture(dir.path(), &packets);
    let bytes = std::fs::read(&cap).unwrap();
    std::fs::write(&cap, &bytes[..bytes.len() - 30]).unwrap();
    let cfg = write(dir.path(), "c.toml", SMALL_CONFIG);
    let checks = write(
        dir.path(),
        "k.csv",
        &format!(
            "time_ns,feed,symbol\n{},lp1,EURUSD\n{},lp1,EURUSD\n",
            t + 100 * MS,
            t + 5 * MS
        ),
    );
    let run = replay(&cap, &cfg, Some(&checks));
    assert_eq!(run.code, 2);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("small.pcap") && run.stderr.contains("byte"),
        "{}",
        run.stderr
    );
    assert_eq!(run.stdout.lines().count(), 2, "checks still answered");
    // The one later than the break says so; the one before it does not.
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(lines[0].ends_with(",\"past_break\":true}"), "{}", lines[0]);
    assert!(!lines[1].contains("past_break"), "{}", lines[1]);
    let s: serde_json::Value =
        serde_json::from_str(&run.summary.expect("summary still written")).unwrap();
    assert_eq!(s["feeds"]["lp1"]["symbols"]["EURUSD"]["last_seq"], 19);
}

/// In a capture whose feeds are not in time order with each other (one
/// feed's datagrams, then the other's), a break leaves unread what each
/// feed had after its own latest datagram read: a check on the second
/// feed before the first feed's last datagram, but after its own, is
/// marked too.
#[test]
fn past_the_break_is_per_feed() {
    let dir = tempfile::tempdir().unwrap();
    let t = 10 * 1_000_000_000u64;
    let mut packets: Vec<_> = (1..=20)
        .map(|i| {
            (
                t + i * 100 * MS,
                "239.1.1.1:30001",
                quote(i, t + i * 100 * MS),
            )
        })
        .collect();
    packets.extend((1..=20).map(|i| (t + i * MS, "239.1.1.9:30009", quote(i, t + i * MS))));
    let cap = small_capture(dir.path(), &packets);
    let bytes = std::fs::read(&cap).unwrap();
    std::fs::write(&cap, &bytes[..bytes.len() - 30]).unwrap();
    let cfg = write(
        dir.path(),
        "c.toml",
        &format!(
            "{SMALL_CONFIG}[[feed]]\nname = \"lp2\"\nkind = \"full\"\nlines = [\"239.1.1.9:30009\"]\nstale_threshold_ms = 500\nsource_threshold_ms = 2000\nclock_offset = 0\n"
        ),
    );
    // lp2's last datagram read is at 19 ms (the one at 20 ms cut); lp1's
    // last at 2 s.
    let checks = write(
        dir.path(),
        "k.csv",
        &format!(
            "time_ns,feed,symbol\n{},lp2,EURUSD\n{},lp2,EURUSD\n{},lp1,EURUSD\n",
            t + 10 * MS,
            t + 500 * MS,
            t + 1_500 * MS
        ),
    );
    let run = replay(&cap, &cfg, Some(&checks));
    assert_eq!(run.code, 2, "{}", run.stderr);
    let marked: Vec<bool> = run
        .stdout
        .lines()
        .map(|l| l.ends_with(",\"past_break\":true}"))
        .collect();
    assert_eq!(marked, [false, true, false], "{}", run.stdout);
}

#[test]
fn bad_packets_inside_a_capture_are_counted_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let mut garbage = vec![];
    for n in 0..64u8 {
        garbage.push((1_000 + n as u64, "239.1.1.1:30001", vec![n; n as usize]));
    }
    garbage.push((2_000, "239.1.1.1:30001", quote(1, 2_000)));
    let cap = small_capture(dir.path(), &garbage);
    let cfg = write(dir.path(), "c.toml", SMALL_CONFIG);
    let run = replay(&cap, &cfg, None);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.is_empty());
    let s: serde_json::Value = serde_json::from_str(&run.summary.unwrap()).unwrap();
    assert_eq!(s["feeds"]["lp1"]["packets"], 65);
    assert_eq!(s["feeds"]["lp1"]["rejected"], 64);
    assert_eq!(s["feeds"]["lp1"]["messages"], 1);
}

/// Runs a replay that must fail before doing anything, with one stderr line.
fn fails_with(capture: &Path, config: &Path, checks: Option<&Path>, needle: &str) {
    let run = replay(capture, config, checks);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "one line: {}", run.stderr);
    assert!(
        run.stderr.contains(needle),
        "{needle:?} not in {}",
        run.stderr
    );
    assert!(run.stdout.is_empty());
}

#[test]
fn unreadable_inputs_fail_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cap = capture_of("scenario-eth-us");
    let cfg = write(d, "c.toml", SMALL_CONFIG);
    let checks = write(d, "k.csv", "time_ns,feed,symbol\n1,lp1,EURUSD\n");

    fails_with(&d.join("missing.pcap"), &cfg, Some(&checks), "missing.pcap");
    // A check naming no feed is warned about only once the replay starts:
    // a run refused before that says one line, a BinaryFILE's as a
    // capture's.
    let odd = write(d, "odd.csv", "time_ns,feed,symbol\n1,nope,EURUSD\n");
    fails_with(&d.join("missing.pcap"), &cfg, Some(&odd), "missing.pcap");
    let out = tickguard()
        .arg("replay")
        .arg(d.join("missing.itch"))
        .arg("--config")
        .arg(fixtures().join("itch/config.toml"))
        .args(["--feed", "nasdaq", "--date", "2026-01-05", "--checks"])
        .arg(&odd)
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("missing.itch"), "{err}");
    fails_with(
        &write(d, "garbage.pcap", "hello world, not a capture"),
        &cfg,
        Some(&checks),
        "not a pcap",
    );
    fails_with(
        &write(d, "empty.pcap", ""),
        &cfg,
        Some(&checks),
        "empty.pcap",
    );
    // Broken at its first record: the error alone, no warning that the
    // capture holds no packets before it.
    let mut forged = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
    forged.extend([0; 8]);
    forged.extend(65_535u32.to_le_bytes());
    forged.extend(1u32.to_le_bytes());
    forged.extend([0; 8]);
    forged.extend(u32::MAX.to_le_bytes());
    forged.extend(u32::MAX.to_le_bytes());
    let forged_path = d.join("forged.pcap");
    std::fs::write(&forged_path, &forged).unwrap();
    fails_with(&forged_path, &cfg, None, "byte 24");
    fails_with(&cap, &d.join("missing.toml"), Some(&checks), "missing.toml");
    // A named FIFO no one writes: read as empty at once, not waited on.
    let fifo = d.join("fifo.toml");
    let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path this test owns.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    fails_with(&cap, &fifo, Some(&checks), "a FIFO that gave nothing");
    fails_with(&cap, &cfg, Some(&fifo), "empty file");
    fails_with(&fifo, &cfg, None, "not a pcap or pcapng file");
    fails_with(&cap, &cfg, Some(&d.join("missing.csv")), "missing.csv");
    fails_with(
        &cap,
        &cfg,
        Some(&write(d, "bad.csv", "when,feed,symbol\n")),
        "header",
    );
    fails_with(
        &cap,
        &cfg,
        Some(&write(d, "bad2.csv", "time_ns,feed,symbol\nsoon,lp1,X\n")),
        "line 2",
    );
    // Not read whole: an endless file, a capture named by mistake, one
    // beyond the limit.
    let head = tickguard::replay::CHECKS_HEAD_BYTES as usize;
    fails_with(&cap, &cfg, Some(Path::new("/dev/zero")), "no header");
    fails_with(&cap, &cfg, Some(&cap), "header must be");
    let mut big = String::from("time_ns,feed,symbol\n");
    big.push_str(&"\n".repeat(head));
    big.push_str("5,lp1,EURUSD\n");
    let big = write(d, "big.csv", &big);
    std::fs::File::options()
        .append(true)
        .open(&big)
        .unwrap()
        .set_len(tickguard::replay::CHECKS_MAX_BYTES + 1)
        .unwrap();
    fails_with(&cap, &cfg, Some(&big), "larger than 256 MiB");

    let unknown_key = write(
        d,
        "u.toml",
        &SMALL_CONFIG.replace("kind", "colour = \"red\"\nkind"),
    );
    fails_with(&cap, &unknown_key, Some(&checks), "colour");
    let zero = write(
        d,
        "z.toml",
        &SMALL_CONFIG.replace("stale_threshold_ms = 500", "stale_threshold_ms = 0"),
    );
    fails_with(&cap, &zero, Some(&checks), "stale_threshold_ms");
    let dup = write(d, "d.toml", &format!("{SMALL_CONFIG}{SMALL_CONFIG}"));
    fails_with(&cap, &dup, Some(&checks), "duplicate feed name");
    let shared = write(
        d,
        "s.toml",
        &format!(
            "{SMALL_CONFIG}{}",
            SMALL_CONFIG
                .replace("lp1", "lp2")
                .replace("239.1.1.1:30001", "239.9.9.9:1")
        ),
    );
    fails_with(&cap, &shared, Some(&checks), "239.1.1.2:30002");
    // The configuration is judged before the capture is opened.
    fails_with(
        &d.join("missing.pcap"),
        &zero,
        Some(&checks),
        "stale_threshold_ms",
    );
}

#[test]
fn header_only_capture_answers_no_quote() {
    let dir = tempfile::tempdir().unwrap();
    let cap = small_capture(dir.path(), &[]);
    let cfg = write(dir.path(), "c.toml", SMALL_CONFIG);
    let checks = write(dir.path(), "k.csv", "time_ns,feed,symbol\n5,lp1,EURUSD\n");
    let run = replay(&cap, &cfg, Some(&checks));
    assert_eq!(run.code, 0);
    assert_eq!(run.stdout, "{\"time_ns\":5,\"feed\":\"lp1\",\"symbol\":\"EURUSD\",\"ok\":false,\"reasons\":[\"no_quote\"]}\n");
    assert_eq!(
        run.stderr,
        "tickguard: warning: the capture holds no packets\n"
    );
}

#[test]
fn usage_errors_exit_non_zero() {
    tickguard().assert().failure();
    tickguard().args(["replay", "x.pcap"]).assert().failure();
    tickguard().args(["frobnicate"]).assert().failure();
    tickguard().arg("--help").assert().success();
    // Bare: the help, on stderr, exit 2.
    let out = tickguard().output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        err.contains("Usage: tickguard <COMMAND>") && out.stdout.is_empty(),
        "{err}"
    );
    // Help and version on stdout, exit 0.
    for args in [
        &["--version"][..],
        &["replay", "--help"][..],
        &["replay", "--version"][..],
    ] {
        let out = tickguard().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(!out.stdout.is_empty() && out.stderr.is_empty(), "{args:?}");
    }
    // Text that is not UTF-8 where a name is wanted: named by its place
    // and the word before it (clap's own line names neither).
    let out = tickguard()
        .args(["check", "--shm", "/nonexistent"])
        .arg(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"lp\xff1"))
        .arg("EURUSD")
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("argument 4 (lp\\xff1, after /nonexistent)"),
        "{err}"
    );
    // One line naming the problem (and clap's tip, when it has one), exit 2.
    for (args, want) in [
        (&["replay", "x.pcap"][..], "--config <CONFIG>"),
        (&["frobnicate"][..], "unrecognized subcommand 'frobnicate'"),
        (
            &["replya"][..],
            "unrecognized subcommand 'replya'; tip: a similar subcommand exists: 'replay'",
        ),
    ] {
        let out = tickguard().args(args).output().unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("tickguard: ") && err.contains(want),
            "{err}"
        );
    }
    // Help on a stdout that cannot take it: an error, not a success.
    let full = std::fs::File::options()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .arg("--help")
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // A session date whose times fit in u64 ns since the epoch; and the
    // date alone: a time, an offset or a zone with it (which would be read
    // and dropped, midnight being the feed's zone's) is refused.
    let out_of_range = "out of range: 1970-01-02 to 2554-07-17";
    let not_a_date = "is not a date (YYYY-MM-DD)";
    for (date, said) in [
        ("1970-01-01", out_of_range),
        ("2554-07-18", out_of_range),
        ("9999-12-31", out_of_range),
        ("2026-01-05T23:00-05:00", not_a_date),
        ("2026-01-05[Asia/Tokyo]", not_a_date),
        ("20260105", not_a_date),
    ] {
        let out = tickguard()
            .args(["replay", "x.itch", "--config", "c.toml", "--feed", "n"])
            .args(["--date", date])
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{date}: {err}");
        assert!(err.contains(said), "{date}: {err}");
    }
    // --explain given twice: refused, not the second pair dropped.
    let out = tickguard()
        .args(["replay", "x.pcap", "--config", "c.toml"])
        .args(["--explain", "fx", "EURUSD", "--explain", "fx", "GBPUSD"])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--explain"), "{err}");
    // --explain-all with --at: refused (--at answers for one instant),
    // not silently ignored.
    let out = tickguard()
        .args(["replay", "x.pcap", "--config", "c.toml"])
        .args(["--explain", "fx", "EURUSD", "--explain-all", "--at", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--explain-all") && err.contains("--at"),
        "{err}"
    );
    // The configuration's range of dead_after_ms, 3 to 60000.
    for (cmd, ms) in [("check", "0"), ("check", "60001"), ("stat", "2")] {
        let args = match cmd {
            "check" => vec![cmd, "lp1", "EURUSD"],
            _ => vec![cmd, "--once"],
        };
        let out = tickguard()
            .args(args)
            .args(["--shm", "/nonexistent", "--dead-after-ms", ms])
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{cmd} {ms}: {err}");
        assert!(err.contains("3..=60000"), "{cmd} {ms}: {err}");
    }
    // A negative number given apart: out of range under its flag, not an
    // unknown option (whose tip, `-- -5`, would make it a positional).
    for (args, want) in [
        (
            &["check", "lp1", "EURUSD", "--dead-after-ms", "-5"][..],
            "--dead-after-ms",
        ),
        (&["stat", "--once", "--top", "-1"][..], "--top"),
        (&["stat", "--once", "--now", "-1"][..], "--now"),
        (
            &["run", "--record", "r.pcap", "--record-max-mb", "-1"][..],
            "--record-max-mb",
        ),
        (
            &["replay", "x.pcap", "--config", "c.toml", "--until", "-1"][..],
            "--until",
        ),
    ] {
        let out = tickguard().args(args).output().unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains("invalid value '-") && err.contains(want),
            "{args:?}: {err}"
        );
    }
}

/// A summary written to a pipe whose reader went away is an error (exit
/// 2): the file asked for was not written. The same on standard output
/// is the quiet end of a `| head` (exit 0).
#[test]
fn a_summary_into_a_closed_pipe_fails_unless_it_is_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "c.toml", SMALL_CONFIG);
    let cap = capture_of("scenario-eth-us");
    for (target, want) in [("/dev/stderr", 2), ("/dev/stdout", 0)] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tickguard"))
            .arg("replay")
            .arg(&cap)
            .arg("--config")
            .arg(&cfg)
            .args(["--summary", target])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Both pipes' readers gone before anything is written.
        drop(child.stdout.take());
        drop(child.stderr.take());
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(want), "{target}");
    }
}

/// `stat --once --json` of no publication fails (exit 2, the error on
/// stderr) even when its stdout's reader has gone before the JSON: a
/// script's pipeline still sees the failure.
#[test]
fn stat_once_of_no_publication_fails_though_its_reader_left() {
    let shm = format!("/dev/shm/tickguard-none-{}", std::process::id());
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .args(["stat", "--once", "--json", "--shm", &shm])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&shm), "{err}");
}

/// A demo whose stdout cannot take its table stops, stops its threads and
/// removes its publication, and says why in one line: exit 2.
#[test]
fn demo_on_a_full_stdout_stops_with_one_line() {
    let shm = format!("/dev/shm/tickguard-demo-full-{}", std::process::id());
    let full = std::fs::File::options()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .args(["demo", "--duration-s", "5", "--shm", &shm])
        .env("RUST_LOG", "error")
        .stdout(full)
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err,
        "tickguard: writing to stdout: No space left on device (os error 28)\n"
    );
    assert!(!Path::new(&shm).exists());
}

/// A demo whose reader stopped reading (its pipe full, a frame's or the
/// closing line's write blocked) still ends soon after SIGTERM, its
/// publication removed.
#[test]
fn demo_stuck_on_a_full_pipe_ends_on_sigterm() {
    let shm = format!("/dev/shm/tickguard-demo-pipe-{}", std::process::id());
    // Frames of about 5 KB a second: the pipe is full after the first.
    let status = crate::common::stop_cmd_on_a_full_pipe(
        std::process::Command::new(env!("CARGO_BIN_EXE_tickguard"))
            .args([
                "demo",
                "--duration-s",
                "60",
                "--symbols",
                "100",
                "--shm",
                &shm,
            ])
            .env("RUST_LOG", "error"),
        std::time::Duration::from_secs(4),
        std::time::Duration::from_secs(5),
    );
    assert!(status.success(), "{status:?}");
    assert!(!Path::new(&shm).exists());
}

#[test]
fn demo_runs_and_shows_every_symbol() {
    // A name with what TOML would read as an escape and a quote: the
    // sidecar publishes where the demo's reader looks, as given.
    let shm = format!(
        "/dev/shm/tickguard-demo-test-{}-\\u0041\"",
        std::process::id()
    );
    let out = tickguard()
        .args([
            "demo",
            "--duration-s",
            "2.5",
            "--symbols",
            "5",
            "--rate",
            "500",
            "--shm",
            &shm,
        ])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last_frame = stdout.rsplit("tickguard demo").next().unwrap();
    for i in 0..5 {
        assert!(last_frame.contains(&format!("SYM0000{i}")), "{last_frame}");
    }
    assert!(last_frame.contains("writer alive"), "{last_frame}");
    // Line B's copies of line A's ticks are not "duplicates": those are the
    // few datagrams the simulator sent twice on one line.
    let count = |label: &str| -> u64 {
        let at = last_frame.find(&format!("  {label} ")).expect(label) + label.len() + 3;
        last_frame[at..].split(' ').next().unwrap().parse().unwrap()
    };
    let (duplicates, copies) = (count("duplicates"), count("line copies"));
    assert!(copies > 100 && duplicates * 10 < copies, "{last_frame}");
    assert!(stdout.contains("demo ended"), "{stdout}");
    assert!(
        !std::path::Path::new(&shm).exists(),
        "the demo removes its shared memory"
    );
}

/// A MoldUDP64 datagram (session, sequence, count, one ITCH-like block):
/// what lands on an SQF feed when the wrong capture is replayed.
fn moldudp64(seq: u64) -> Vec<u8> {
    let mut d = b"SESSION001".to_vec();
    d.extend_from_slice(&seq.to_be_bytes());
    d.extend_from_slice(&1u16.to_be_bytes());
    d.extend_from_slice(&12u16.to_be_bytes());
    d.extend_from_slice(b"A\0\x01\0\0\0\0\0\0\0\0\0");
    d
}

#[test]
fn replay_warns_when_every_packet_of_a_feed_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let t = 10 * 1_000_000_000u64;
    let packets: Vec<_> = (0..50)
        .map(|i| (t + i * MS, "239.1.1.1:30001", moldudp64(i)))
        .collect();
    let cap = small_capture(dir.path(), &packets);
    let cfg = write(dir.path(), "c.toml", SMALL_CONFIG);
    let run = replay(&cap, &cfg, None);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.lines().any(|l| l
            == "tickguard: warning: feed 'lp1': 50 of 50 packets rejected, mostly bad_magic (not SQF?)"),
        "{}",
        run.stderr
    );
    // A capture with a few bad packets among good ones is not flagged.
    let mut mixed: Vec<_> = (1..=20)
        .map(|i| (t + i * MS, "239.1.1.1:30001", quote(i, t)))
        .collect();
    mixed.push((t + 30 * MS, "239.1.1.1:30001", moldudp64(1)));
    let cap = small_capture(dir.path(), &mixed);
    let run = replay(&cap, &cfg, None);
    assert!(!run.stderr.contains("packets rejected"), "{}", run.stderr);
}

/// An input that gives the feeds nothing to use still replays (exit 0),
/// with one warning line saying why.
#[test]
fn replay_warns_when_the_input_gives_the_feeds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = write(d, "c.toml", SMALL_CONFIG);
    let t = 10 * 1_000_000_000u64;
    let warned = |run: &Run, want: &str| {
        assert_eq!(run.code, 0, "{}", run.stderr);
        let w: Vec<_> = run
            .stderr
            .lines()
            .filter(|l| l.contains("warning"))
            .collect();
        assert_eq!(w, [format!("tickguard: warning: {want}")], "{}", run.stderr);
    };
    // Datagrams for another group.
    let cap = small_capture(
        d,
        &[
            (t, "239.9.9.9:1", quote(1, t)),
            (t + 1, "239.9.9.9:1", quote(2, t)),
        ],
    );
    warned(
        &replay(&cap, &cfg, None),
        "none of the capture's 2 datagrams is addressed to a feed's line (239.1.1.1:30001, 239.1.1.2:30002)",
    );
    // Records of a link type the reader does not read (0xffff).
    let mut pcap = Vec::new();
    for w in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65_535, 0xffff] {
        pcap.extend_from_slice(&w.to_le_bytes());
    }
    for _ in 0..3 {
        for w in [1u32, 0, 4, 4] {
            pcap.extend_from_slice(&w.to_le_bytes());
        }
        pcap.extend_from_slice(b"abcd");
    }
    let cap = d.join("link.pcap");
    std::fs::write(&cap, pcap).unwrap();
    warned(
        &replay(&cap, &cfg, None),
        "none of the capture's 3 records is a UDP/IPv4 datagram (mostly unsupported_link: 3)",
    );
    // TCP segments only: named as such, and `inspect`'s causes add up.
    let cap = d.join("tcp.pcap");
    let mut w = CaptureWriter::new(
        std::fs::File::create(&cap).unwrap(),
        Format::PcapNanos,
        Link::Ethernet,
    )
    .unwrap();
    let (a, b) = (
        "10.0.0.1:5000".parse().unwrap(),
        "10.0.0.2:18100".parse().unwrap(),
    );
    for i in 0..2 {
        w.write_tcp(t + i, a, b, 7 + i as u32, 0x18, b"data")
            .unwrap();
    }
    w.finish().unwrap();
    warned(
        &replay(&cap, &cfg, None),
        "none of the capture's 2 records is a UDP/IPv4 datagram (mostly segments: 2)",
    );
    let out = Command::cargo_bin("tickguard")
        .unwrap()
        .arg("inspect")
        .arg(&cap)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("(2 records not UDP/IPv4 datagrams: segments 2, truncated 0, not ipv4 0, not udp 0, ip fragments 0, malformed 0, unsupported link 0, no timestamp 0)"),
        "{text}"
    );
    // A BinaryFILE with no valid record, and an empty one.
    let itch = fixtures().join("itch/config.toml");
    for (bytes, want) in [
        (
            vec![0u8; 1000],
            "feed 'nasdaq': all 500 records of the BinaryFILE are invalid (not ITCH 5.0 messages?)",
        ),
        (Vec::new(), "feed 'nasdaq': the BinaryFILE holds no records"),
        (
            [
                std::fs::read(fixtures().join("itch/session.itch")).unwrap(),
                vec![0u8; 1000],
            ]
            .concat(),
            "feed 'nasdaq': 500 of the 2128 records of the BinaryFILE are invalid, skipped",
        ),
    ] {
        let file = d.join("day.itch");
        std::fs::write(&file, bytes).unwrap();
        let out = tickguard()
            .arg("replay")
            .arg(&file)
            .arg("--config")
            .arg(&itch)
            .args(["--feed", "nasdaq", "--date", "2026-01-05"])
            .output()
            .unwrap();
        let run = Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8(out.stdout).unwrap(),
            stderr: String::from_utf8(out.stderr).unwrap(),
            summary: None,
        };
        warned(&run, want);
    }
    // Input that is not ITCH (`/dev/zero`, endless: empty records; random
    // bytes framed as records: mostly unknown types): given up after its
    // first 4096 records, in one line.
    let random = d.join("random.itch");
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut bytes = Vec::new();
    for _ in 0..5000 {
        let len = (next() % 48) as u16;
        bytes.extend(len.to_be_bytes());
        bytes.extend((0..len).map(|_| next() as u8));
    }
    std::fs::write(&random, bytes).unwrap();
    for file in [Path::new("/dev/zero"), &random] {
        let out = tickguard()
            .arg("replay")
            .arg(file)
            .arg("--config")
            .arg(&itch)
            .args(["--feed", "nasdaq", "--date", "2026-01-05"])
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{file:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{file:?}: {err}");
        assert!(
            err.contains(
                "of the first 4096 records are ITCH 5.0 messages of a known type: not a BinaryFILE"
            ),
            "{file:?}: {err}"
        );
    }
    // The same when the trial's last record comes after a check (the
    // batch stops just before it, and it is read on its own): 4095 empty
    // records, a System Event at 09:30, zeros; a check at 09:00.
    let late = d.join("late.itch");
    let mut bytes = vec![0u8; 2 * 4095];
    let event =
        tickguard::protocol::itch50::message::encode::system_event(34_200_000_000_000, b'O');
    bytes.extend((event.len() as u16).to_be_bytes());
    bytes.extend(&event);
    bytes.extend(vec![0u8; 200_000]);
    std::fs::write(&late, bytes).unwrap();
    // 09:00 in New York on 2026-01-05: 14:00 UTC.
    let checks = d.join("late.csv");
    std::fs::write(
        &checks,
        "time_ns,feed,symbol\n1767621600000000000,nasdaq,AAPL\n",
    )
    .unwrap();
    let out = tickguard()
        .arg("replay")
        .arg(&late)
        .arg("--config")
        .arg(&itch)
        .args(["--feed", "nasdaq", "--date", "2026-01-05", "--checks"])
        .arg(&checks)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("not a BinaryFILE"), "{err}");
}

/// A checks file is input: the feed and symbol a warning repeats are
/// escaped (no terminal control sequence reaches stderr) and cut.
#[test]
fn check_warnings_escape_and_cut_what_the_checks_file_says() {
    let dir = tempfile::tempdir().unwrap();
    let t = 10 * 1_000_000_000u64;
    let cap = small_capture(dir.path(), &[(t, "239.1.1.1:30001", quote(1, t))]);
    let cfg = write(dir.path(), "c.toml", SMALL_CONFIG);
    let long = "f".repeat(5_000);
    let rows = format!("time_ns,feed,symbol\n{t},fx\x1b]0;owned\x07,EURUSD\n{t},{long},EURUSD\n");
    let checks = write(dir.path(), "k.csv", &rows);
    let run = replay(&cap, &cfg, Some(&checks));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stderr.contains('\x1b'), "{:?}", run.stderr);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert!(
        lines[0].contains(r"no feed 'fx\u{1b}]0;owned\u{7}'"),
        "{}",
        lines[0]
    );
    assert!(lines[1].contains("… (5000 bytes)'"), "{}", lines[1]);
    assert!(lines[1].len() < 300, "{}", lines[1]);
}

/// `--feed` gives every datagram to its feed: checks of another feed of
/// the configuration answer `no_quote` whatever the capture holds, which
/// would read as the market's; one line says so (checks of no feed at
/// all are warned of apart), and nothing when every check is the feed's.
#[test]
fn replay_with_feed_warns_about_checks_of_the_other_feeds() {
    let dir = tempfile::tempdir().unwrap();
    let t = 10 * 1_000_000_000u64;
    // Sanitised: the capture's address is no line's.
    let cap = small_capture(dir.path(), &[(t, "10.9.9.9:1", quote(1, t))]);
    let two = format!(
        "{SMALL_CONFIG}{}",
        SMALL_CONFIG
            .replace("lp1", "lp2")
            .replace("239.1.1.", "239.1.2.")
    );
    let cfg = write(dir.path(), "c.toml", &two);
    let run = |rows: &str| {
        let checks = write(dir.path(), "k.csv", &format!("time_ns,feed,symbol\n{rows}"));
        let out = tickguard()
            .arg("replay")
            .arg(&cap)
            .arg("--config")
            .arg(&cfg)
            .arg("--checks")
            .arg(&checks)
            .args(["--feed", "lp1", "--no-progress"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        let stdout = String::from_utf8(out.stdout).unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        (stdout, stderr)
    };
    // A feed of no configuration and a name lp2 cannot publish are warned
    // of apart, not counted here.
    let (stdout, stderr) = run(&format!(
        "{t},lp1,EURUSD\n{t},lp2,EURUSD\n{t},zz,EURUSD\n{t},lp2,TOO LONG NAME\n{t},lp2,GBPUSD\n"
    ));
    assert!(
        stdout.lines().next().unwrap().contains(r#""ok":true"#),
        "{stdout}"
    );
    let warned: Vec<&str> = stderr.lines().filter(|l| l.contains("--feed")).collect();
    assert_eq!(
        warned,
        [
            "tickguard: warning: 2 checks of feed 'lp2' answered no_quote whatever the capture \
          holds: --feed 'lp1' takes every datagram (replay without --feed, or check that feed \
          only)"
        ],
        "{stderr}"
    );
    let (_, stderr) = run(&format!("{t},lp1,EURUSD\n"));
    assert!(!stderr.contains("--feed"), "{stderr}");
}

#[test]
fn replay_warns_about_checks_naming_an_unknown_feed_or_an_invalid_symbol() {
    let dir = tempfile::tempdir().unwrap();
    let t = 10 * 1_000_000_000u64;
    let cap = small_capture(dir.path(), &[(t, "239.1.1.1:30001", quote(1, t))]);
    let cfg = write(dir.path(), "c.toml", SMALL_CONFIG);
    let mut rows = String::from("time_ns,feed,symbol\n");
    rows.push_str(&format!(
        "{t},lp1,EURUSD\n{t},lp2,EURUSD\n{t},lp1,TOO LONG SYMBOL\n"
    ));
    for _ in 0..12 {
        rows.push_str(&format!("{t},fx,EURUSD\n"));
    }
    let checks = write(dir.path(), "k.csv", &rows);
    let run = replay(&cap, &cfg, Some(&checks));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.lines().count(), 15, "every check still answered");
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 11, "capped: {}", run.stderr);
    assert_eq!(
        lines[0],
        format!(
            "tickguard: warning: check 2 (time_ns {t}): no feed 'lp2' in {} (feeds: lp1): answered no_quote",
            cfg.display()
        )
    );
    assert!(
        lines[1].contains("check 3 ")
            && lines[1].contains("'TOO LONG SYMBOL' is not a valid symbol")
    );
    assert_eq!(
        lines[10],
        "tickguard: warning: 4 more checks naming an unknown feed or an invalid symbol"
    );
    // Good checks, no warning.
    let good = write(
        dir.path(),
        "g.csv",
        &format!("time_ns,feed,symbol\n{t},lp1,EURUSD\n"),
    );
    assert_eq!(replay(&cap, &cfg, Some(&good)).stderr, "");
}

/// The summary replaces the file at its path whole (written beside it,
/// then renamed: nothing else is left in the directory); a path that is
/// not a regular file, such as `/dev/stdout`, is written in place.
#[test]
fn the_summary_replaces_its_file_whole() {
    let fx = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("summary.json");
    std::fs::write(&path, "an earlier run's").unwrap();
    let ino = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
    let before = ino(&path);
    let run = |summary: &Path| {
        tickguard()
            .arg("replay")
            .arg(capture_of("scenario-vlan-ns"))
            .arg("--config")
            .arg(fx.join("config.toml"))
            .arg("--summary")
            .arg(summary)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let out = run(&path);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(json.get("feeds").is_some(), "{json}");
    assert_ne!(ino(&path), before, "a new file renamed over the old");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["summary.json"]);
    for stdout in ["/dev/stdout", "-"] {
        let out = run(Path::new(stdout));
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(stdout.contains("\"feeds\""), "{stdout}");
    }
    assert!(!dir.path().join("-").exists());
}

/// A reader of the results that stops early (`| head -1`) stops the
/// results only: the summary is still written and the exit status is the
/// replay's.
/// `--summary` or `--timeline` into a named FIFO no one reads: the replay
/// ends with one line saying so, exit 2, instead of waiting for a reader.
#[test]
fn an_output_fifo_no_one_reads_is_an_error_not_a_wait() {
    let fx = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("out");
    let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path this test owns.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    for flag in ["--summary", "--timeline"] {
        let out = tickguard()
            .arg("replay")
            .arg(fx.join("scenario-eth-us.pcap"))
            .arg("--config")
            .arg(fx.join("config.toml"))
            .args([flag, fifo.to_str().unwrap(), "--no-progress"])
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        let last = stderr.lines().last().unwrap_or_default();
        assert!(
            last.contains("a FIFO or socket no one reads"),
            "{flag}: {stderr}"
        );
    }
}

#[test]
fn a_reader_that_stops_early_does_not_lose_the_summary() {
    let fx = fixtures();
    let dir = tempfile::tempdir().unwrap();
    // About half a megabyte of results: more than a pipe holds, so the
    // writer meets the closed pipe however early it starts.
    let mut checks = String::from("time_ns,feed,symbol\n");
    for k in 0..5_000u64 {
        checks.push_str(&format!("{},fx,EURUSD\n", 1_767_603_599_950_000_000 + k));
    }
    let checks_path = write(dir.path(), "checks.csv", &checks);
    let summary = dir.path().join("summary.json");
    let (code, stderr) = crate::common::with_reader_gone(
        std::process::Command::new(assert_cmd::cargo::cargo_bin("tickguard"))
            .arg("replay")
            .arg(capture_of("scenario-vlan-ns"))
            .arg("--config")
            .arg(fx.join("config.toml"))
            .arg("--checks")
            .arg(&checks_path)
            .arg("--summary")
            .arg(&summary)
            .arg("--no-progress"),
    );
    assert_eq!(code, Some(0), "{stderr}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert!(json.get("feeds").is_some(), "{json}");
}

/// `inspect` of a broken capture fails (exit 2, one line naming the
/// break) even when its reader stopped early: the closed pipe stops what
/// went to it, not the report of the break.
#[test]
fn inspect_of_a_broken_capture_fails_though_its_reader_left() {
    let dir = tempfile::tempdir().unwrap();
    let whole = std::fs::read(capture_of("scenario-vlan-ns")).unwrap();
    let cut = dir.path().join("cut.pcap");
    std::fs::write(&cut, &whole[..whole.len() * 2 / 3]).unwrap();
    let (code, stderr) = crate::common::with_reader_gone(
        std::process::Command::new(assert_cmd::cargo::cargo_bin("tickguard"))
            .arg("inspect")
            .arg(&cut),
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("inspected up to there"), "{stderr}");
}

#[test]
fn replay_output_paths_are_checked_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = write(d, "c.toml", SMALL_CONFIG);
    let missing = d.join("no-such-dir");
    let dangling = d.join("dangling.json");
    std::os::unix::fs::symlink(d.join("nowhere.json"), &dangling).unwrap();
    let file = write(d, "out", "");
    let mut slashed = file.clone().into_os_string();
    slashed.push("/");
    for (flag, path, needle) in [
        ("--summary", missing.join("s.json"), "does not exist"),
        // Names ending in '/': a directory that does not exist, a file.
        (
            "--summary",
            PathBuf::from(format!("{}/", missing.display())),
            "names a directory",
        ),
        ("--timeline", PathBuf::from(slashed), "names a directory"),
        (
            "--summary",
            dangling,
            "a link to a file that does not exist",
        ),
        ("--timeline", missing.join("t.svg"), "does not exist"),
        ("--summary", d.to_path_buf(), "is a directory"),
        // A directory that takes no new file (even for root).
        (
            "--summary",
            PathBuf::from("/proc/version"),
            "cannot create /proc/.version.",
        ),
    ] {
        // The capture does not exist either: the output path is judged first.
        let out = tickguard()
            .arg("replay")
            .arg(d.join("missing.pcap"))
            .arg("--config")
            .arg(&cfg)
            .arg(flag)
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains(needle) && !stderr.contains("missing.pcap"),
            "{stderr}"
        );
    }
    // A timeline of a configuration without an SQF feed would be empty.
    let out = tickguard()
        .arg("replay")
        .arg(d.join("missing.pcap"))
        .arg("--config")
        .arg(fixtures().join("itch/config.toml"))
        .args(["--timeline", "t.svg"])
        .current_dir(d)
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "tickguard: --timeline draws SQF feeds only, and the configuration has none"
    );
    assert!(!d.join("t.svg").exists());
    // Both outputs into one file, `-` being standard output.
    for same in ["-", "out"] {
        let out = tickguard()
            .arg("replay")
            .arg(d.join("missing.pcap"))
            .arg("--config")
            .arg(&cfg)
            .args(["--summary", same, "--timeline", same])
            .current_dir(d)
            .output()
            .unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.trim_end().ends_with("one would replace the other"),
            "{stderr}"
        );
    }
}

#[test]
fn explain_at_past_the_capture_end_warns_and_still_answers() {
    let dir = tempfile::tempdir().unwrap();
    let t = 10 * 1_000_000_000u64;
    let cap = small_capture(
        dir.path(),
        &[
            (t, "239.1.1.1:30001", quote(1, t)),
            (t + 1_000 * MS, "239.1.1.1:30001", quote(2, t + 1_000 * MS)),
        ],
    );
    let cfg = write(dir.path(), "c.toml", SMALL_CONFIG);
    let at = |ns: u64| {
        let out = tickguard()
            .arg("replay")
            .arg(&cap)
            .arg("--config")
            .arg(&cfg)
            .args(["--explain", "lp1", "EURUSD", "--at", &ns.to_string()])
            .output()
            .unwrap();
        assert!(out.status.success());
        (
            String::from_utf8(out.stdout).unwrap(),
            crate::common::without_end_line(&String::from_utf8(out.stderr).unwrap()),
        )
    };
    let (stdout, stderr) = at(t + 3_000 * MS);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("tickguard: warning: --at 1970-01-01T00:00:13")
            && stderr
                .contains("is 2000.000 ms after the capture's last datagram (1970-01-01T00:00:11"),
        "{stderr}"
    );
    assert!(
        stdout.contains("lp1 EURUSD at") && stdout.contains("stale"),
        "{stdout}"
    );
    let (stdout, stderr) = at(t + 100 * MS);
    assert_eq!(stderr, "");
    assert!(stdout.contains("lp1 EURUSD at"), "{stdout}");
}

/// `demo --protocol` and `args` on `shm`, ended within `timeout_s`: its
/// stdout, once it exited 0.
fn venue_demo(args: &[&str], shm: &str, timeout_s: u64) -> String {
    let out = tickguard()
        .args(["demo", "--protocol"])
        .args(args)
        .args(["--shm", shm])
        .timeout(std::time::Duration::from_secs(timeout_s))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    stdout
}

/// The ITCH demo: books, then a third of the way through the session its
/// sidecar restarted on the same shared memory, joining mid-session and
/// catching up from the venue's GLIMPSE snapshot, then the close, with the
/// books at the end the venue's own.
#[test]
fn itch_demo_shows_books_a_restart_recovered_by_a_snapshot_and_the_close() {
    let shm = format!("/dev/shm/tickguard-demo-itch-test-{}", std::process::id());
    let stdout = venue_demo(
        &[
            "itch50",
            "--duration-s",
            "9",
            "--symbols",
            "4",
            "--rate",
            "400",
        ],
        &shm,
        60,
    );
    // The session is the 4 s before the 5 s of the close: the restart is
    // due at a third of it, announced until then.
    let frames: Vec<&str> = stdout.split("tickguard demo").skip(1).collect();
    assert!(
        frames[0].contains("sidecar restart due at 1.3 s"),
        "{}",
        frames[0]
    );
    let last_frame = *frames.last().unwrap();
    assert!(last_frame.contains("ITCH 5.0"), "{last_frame}");
    let restart = last_frame
        .lines()
        .find(|l| l.starts_with("sidecar restarted at "))
        .unwrap_or_else(|| panic!("{stdout}"));
    // `…: joined mid-session, merged a snapshot N=…, M messages, in X ms`.
    let merged = restart
        .split_once("merged a snapshot N=")
        .unwrap_or_else(|| panic!("{restart}"))
        .1;
    let (next, rest) = merged.split_once(", ").unwrap();
    let (messages, rest) = rest.split_once(" messages, in ").unwrap();
    let ms = rest.strip_suffix(" ms").unwrap();
    assert!(next.parse::<u64>().unwrap() > 1, "{restart}");
    // At least the opening: System Events, and a directory and trading
    // action per stock.
    assert!(messages.parse::<u64>().unwrap() >= 8, "{restart}");
    // The venue holds its first snapshot login 1 s.
    assert!(ms.parse::<u64>().unwrap() >= 1000, "{restart}");
    for i in 0..4 {
        let row = last_frame
            .lines()
            .find(|l| l.starts_with(&format!("SYM0000{i}")))
            .unwrap_or_else(|| panic!("{last_frame}"));
        // Sizes and exact prices on both sides, or an empty book.
        assert!(row.contains(" × ") || row.contains("no_quote"), "{row}");
        assert!(row.contains("closed") || row.contains("no_quote"), "{row}");
    }
    assert!(last_frame.contains("session TGSIM00001"), "{last_frame}");
    assert!(stdout.contains("demo ended"), "{stdout}");
    assert!(stdout.contains("2 receiver runs"), "{stdout}");
    assert!(
        stdout.contains("books at the close: all 4 as the venue's"),
        "{stdout}"
    );
    assert!(
        !std::path::Path::new(&shm).exists(),
        "the demo removes its file"
    );
}

/// The MDP3 demo: the channel's instruments by Symbol with their books and
/// RptSeqs, the channel's counters, the close, and at the end the books the
/// sidecar published as the venue's own.
#[test]
fn mdp3_demo_shows_instruments_by_symbol_the_close_and_matching_books() {
    let shm = format!("/dev/shm/tickguard-demo-mdp3-test-{}", std::process::id());
    let stdout = venue_demo(&["mdp3", "--duration-s", "8", "--rate", "800"], &shm, 20);
    let frames: Vec<&str> = stdout.split("tickguard demo").skip(1).collect();
    // The session is the 3 s before the 5 s of the close.
    assert!(
        frames[0].contains("the session closes at 3 s"),
        "{}",
        frames[0]
    );
    let last_frame = *frames.last().unwrap();
    assert!(last_frame.contains("CME MDP3"), "{last_frame}");
    assert!(last_frame.contains("writer alive"), "{last_frame}");
    for name in [
        "packet gaps",
        "packets lost",
        "suspect",
        "unverified",
        "snapshots applied",
        "channel resets 0",
    ] {
        assert!(last_frame.contains(name), "{name}: {last_frame}");
    }
    assert!(last_frame.contains("the session is closed"), "{last_frame}");
    for (symbol, id) in [
        ("ESZ6", "#294973"),
        ("ESH7", "#118061"),
        ("NQZ6", "#206323"),
        ("RTYZ6", "#309877"),
        ("ESZ6-ESH7", "#442811"),
    ] {
        let row = last_frame
            .lines()
            .find(|l| l.split_whitespace().next() == Some(symbol))
            .unwrap_or_else(|| panic!("{symbol}: {last_frame}"));
        assert!(row.contains(id), "{row}");
        // Both sides as size × price with the feed's two decimals, a
        // RptSeq, and the close; healed after the close if it lost the
        // last packets.
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells.len(), 11, "{row}");
        assert!(
            cells[4].split_once('.').is_some_and(|(_, d)| d.len() == 2),
            "{row}"
        );
        assert!(cells[8].parse::<u64>().unwrap() > 0, "{row}");
        assert!(row.ends_with("REJECT closed"), "{row}");
    }
    assert!(stdout.contains("every group closed"), "{stdout}");
    assert!(stdout.contains("demo ended"), "{stdout}");
    assert!(
        stdout.contains("books at the close: all 5 as the venue's\n"),
        "{stdout}"
    );
    assert!(
        !std::path::Path::new(&shm).exists(),
        "the demo removes its file"
    );
}

/// `--symbols` means nothing to the MDP3 demo (the channel has its own
/// instruments): refused in one line, exit 2, before anything starts.
#[test]
fn mdp3_demo_refuses_symbols() {
    let shm = format!(
        "/dev/shm/tickguard-demo-mdp3-refused-{}",
        std::process::id()
    );
    let out = tickguard()
        .args([
            "demo",
            "--protocol",
            "mdp3",
            "--symbols",
            "4",
            "--shm",
            &shm,
        ])
        .timeout(std::time::Duration::from_secs(20))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err,
        "tickguard: demo: --symbols applies to --protocol sqf, itch50 only (the mdp3 channel has its own instruments)\n"
    );
    assert!(out.stdout.is_empty());
    assert!(!std::path::Path::new(&shm).exists());
}

/// `simulate --help` speaks of both venues: `--names` is the flag that
/// names symbols, and an ITCH venue counts messages, not quotes.
#[test]
fn simulate_help_names_names_and_itch_messages() {
    let out = tickguard().args(["simulate", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let line = |flag: &str| {
        let at = help
            .find(&format!("--{flag} "))
            .unwrap_or_else(|| panic!("--{flag}"));
        help[at..].lines().take(2).collect::<String>()
    };
    assert!(line("symbols").contains("--names"), "{}", line("symbols"));
    for flag in ["rate", "batch", "count"] {
        assert!(
            line(flag).contains("itch50") && line(flag).contains("messages"),
            "{}",
            line(flag)
        );
    }
}

const SMALL_ITCH_CONFIG: &str = r#"
[[feed]]
name = "nasdaq"
protocol = "itch50"
lines = ["239.1.1.1:30001"]
stale_threshold_ms = 1500
source_threshold_ms = 2000
clock_offset = 0
"#;

/// The wrong protocol is named both ways: SQF quotes replayed as an ITCH
/// feed are "not MoldUDP64?" (as MoldUDP64 on an SQF feed is "not SQF?").
#[test]
fn replay_of_sqf_as_itch_says_not_moldudp64() {
    let dir = tempfile::tempdir().unwrap();
    let t = 10 * 1_000_000_000u64;
    let packets: Vec<_> = (1..=50)
        .map(|i| (t + i * MS, "239.1.1.1:30001", quote(i, t)))
        .collect();
    let cap = small_capture(dir.path(), &packets);
    let cfg = write(dir.path(), "c.toml", SMALL_ITCH_CONFIG);
    let run = replay(&cap, &cfg, None);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let warning = run
        .stderr
        .lines()
        .find(|l| l.starts_with("tickguard: warning: feed 'nasdaq': 50 of 50 packets rejected"));
    assert!(
        warning.is_some_and(|l| l.ends_with("(not MoldUDP64?)")),
        "{}",
        run.stderr
    );
}

/// A long capture of nothing but bad packets (timestamps stepping back
/// and forth too) logs a few lines in all, not the "every packet is
/// rejected" warning every ten seconds of capture time.
#[test]
fn replay_of_only_rejected_packets_logs_a_few_lines() {
    let dir = tempfile::tempdir().unwrap();
    let t = 10 * 1_000_000_000u64;
    // 60 bad packets over 10 minutes of capture time, every other one
    // 20 s behind the one before.
    let packets: Vec<_> = (0..60u64)
        .map(|i| {
            let at = t + 10_000 * MS * (i + 2) - if i % 2 == 1 { 20_000 * MS } else { 0 };
            (at, "239.1.1.1:30001", moldudp64(i))
        })
        .collect();
    let cap = small_capture(dir.path(), &packets);
    let cfg = write(dir.path(), "c.toml", SMALL_CONFIG);
    let run = replay(&cap, &cfg, None);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let logged = run
        .stderr
        .lines()
        .filter(|l| {
            l.contains("rejected malformed packet")
                || l.contains("every packet of the feed is rejected")
        })
        .count();
    assert!((1..=3).contains(&logged), "{logged}: {}", run.stderr);
}

/// A long capture full of bad packets logs a few lines, not one a second
/// of capture time, then says how many there were, by reason.
#[test]
fn replay_logs_a_few_rejected_packets_then_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let t = 10 * 1_000_000_000u64;
    // 100 good quotes and 40 bad packets, 2 s of capture time apart.
    let mut packets: Vec<_> = (1..=100)
        .map(|i| (t + i * MS, "239.1.1.1:30001", quote(i, t)))
        .collect();
    packets.extend((0..40).map(|i| (t + (200 + 2_000 * i) * MS, "239.1.1.1:30001", moldudp64(i))));
    packets.sort_by_key(|p| p.0);
    let cap = small_capture(dir.path(), &packets);
    let cfg = write(dir.path(), "c.toml", SMALL_CONFIG);
    let run = replay(&cap, &cfg, None);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let logged = run.stderr.matches("rejected malformed packet").count();
    assert!((1..=3).contains(&logged), "{}", run.stderr);
    assert!(
        run.stderr.lines().any(|l| l
            == "tickguard: warning: feed 'lp1': 40 of 140 packets rejected (bad_magic 40); the log shows at most 3"),
        "{}",
        run.stderr
    );
}

/// A `RUST_LOG` that is not a filter (a typo) is said once on stderr,
/// naming it, and the command goes on at its default level; a valid one,
/// or an empty one, says nothing of it.
#[test]
fn a_rust_log_that_is_not_a_filter_is_named() {
    let stderr = |value: &str| {
        let out = tickguard()
            .env("RUST_LOG", value)
            .args([
                "check",
                "lp1",
                "EURUSD",
                "--shm",
                "/nonexistent/tickguard-test",
            ])
            .output()
            .unwrap();
        String::from_utf8(out.stderr).unwrap()
    };
    let bad = stderr("tickguard=dbug");
    assert_eq!(bad.matches("RUST_LOG").count(), 1, "{bad}");
    assert!(bad.contains("not a log filter"), "{bad}");
    for good in ["tickguard=debug", "warn", ""] {
        let err = stderr(good);
        assert!(!err.contains("RUST_LOG"), "{good}: {err}");
    }
    // Empty is unset: the default level (warn for a replay, which logs a
    // rejected packet of the fixture), not a filter that logs nothing.
    let out = tickguard()
        .env("RUST_LOG", "")
        .arg("replay")
        .arg(capture_of("scenario-eth-us"))
        .arg("--config")
        .arg(fixtures().join("config.toml"))
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("rejected malformed packet"), "{err}");
}

/// Under a file-size limit (`ulimit -f`, systemd's `LimitFSIZE=`) the
/// summary's write past it fails with one line (the last) and exit 2, as a full disk
/// does, instead of SIGXFSZ ending the replay with no word and a staged
/// file left half-written beside the summary.
#[test]
fn a_file_size_limit_fails_the_summary_with_one_line() {
    use std::os::unix::process::CommandExt;
    let fx = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_tickguard"));
    cmd.arg("replay")
        .arg(capture_of("scenario-vlan-ns"))
        .arg("--config")
        .arg(fx.join("config.toml"))
        .arg("--summary")
        .arg(dir.path().join("s.json"))
        .arg("--no-progress");
    // SAFETY: setrlimit between fork and exec touches no lock nor
    // allocation.
    unsafe {
        cmd.pre_exec(|| {
            let l = libc::rlimit {
                rlim_cur: 100,
                rlim_max: 100,
            };
            match libc::setrlimit(libc::RLIMIT_FSIZE, &l) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        });
    }
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{:?}: {err}", out.status);
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.contains("File too large") && last.contains("s.json"),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// `--summary /dev/stdout` where standard output is a socket (as systemd
/// gives a service, the journal's stream): written through standard
/// output after the results, as `-` is, not refused after the whole
/// replay because a socket cannot be opened by name.
#[test]
fn a_summary_to_dev_stdout_reaches_a_socket() {
    use std::io::Read as _;
    let fx = fixtures();
    let (mut ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .arg("replay")
        .arg(capture_of("scenario-vlan-ns"))
        .arg("--config")
        .arg(fx.join("config.toml"))
        .args(["--summary", "/dev/stdout", "--no-progress"])
        .stdout(std::os::fd::OwnedFd::from(theirs))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = String::new();
    ours.read_to_string(&mut out).unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(out.contains("\"feeds\""), "{out}");
}

/// A staging file a killed replay left beside the summary, named for a
/// process of the number this one has now (PID 1 in a container, run
/// again): not in the way of this replay's summary.
#[test]
fn a_staging_file_left_by_a_killed_replay_is_not_in_the_way() {
    let fx = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"touch "$1/.s.json.$$.tmp" && exec "$2" replay "$3" --config "$4" --summary "$1/s.json" --no-progress"#)
        .arg("sh")
        .arg(dir.path())
        .arg(env!("CARGO_BIN_EXE_tickguard"))
        .arg(capture_of("scenario-vlan-ns"))
        .arg(fx.join("config.toml"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(dir.path().join("s.json").is_file());
}

/// The summary's per-symbol `suspect` and `invalid` keys (spec §6) say
/// so: a Heartbeat naming a sequence past the last Quote leaves EURUSD
/// suspect, a crossed Quote leaves GBPUSD invalid, and a clean Quote
/// leaves USDJPY neither.
#[test]
fn the_summary_tells_a_suspect_and_an_invalid_symbol() {
    let dir = tempfile::tempdir().unwrap();
    let t = 10 * 1_000_000_000u64;
    let sym = |s| Symbol::parse(s).unwrap();
    let mut b = PacketBuilder::new(t);
    b.quote(sym("EURUSD"), 1, t, 1.0, 1.1)
        .quote(sym("GBPUSD"), 1, t, 1.3, 1.2)
        .quote(sym("USDJPY"), 1, t, 150.0, 150.1)
        .heartbeat(sym("EURUSD"), 5);
    let cap = small_capture(dir.path(), &[(t, "239.1.1.1:30001", b.finish())]);
    let cfg = write(dir.path(), "c.toml", SMALL_CONFIG);
    let run = replay(&cap, &cfg, None);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let s: serde_json::Value = serde_json::from_str(&run.summary.unwrap()).unwrap();
    let symbols = &s["feeds"]["lp1"]["symbols"];
    let flags = |name: &str| {
        (
            symbols[name]["suspect"].clone(),
            symbols[name]["invalid"].clone(),
        )
    };
    assert_eq!(flags("EURUSD"), (true.into(), false.into()), "{symbols}");
    assert_eq!(flags("GBPUSD"), (false.into(), true.into()), "{symbols}");
    assert_eq!(flags("USDJPY"), (false.into(), false.into()), "{symbols}");
}
