//! `tickguard inspect`: what a capture holds, and a configuration drafted
//! from it that replays it. The proof of a draft is the replay: the shipped
//! captures replayed with their drafts count the same packets, messages,
//! losses and recoveries as with their hand-written configurations.

use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use tickguard::capture::link::Link;
use tickguard::capture::write::{CaptureWriter, Format};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn tickguard(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn inspect(capture: &Path, draft: bool) -> String {
    let mut args = vec!["inspect".as_ref(), capture.as_os_str()];
    if draft {
        args.push("--config-draft".as_ref());
    }
    let (code, out, err) = tickguard(&args);
    assert_eq!(code, 0, "{err}");
    out
}

/// `replay CAPTURE --config CONFIG --summary …` plus `extra`: the summary.
fn summary(capture: &Path, config: &Path, extra: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.json");
    let mut args = vec![
        "replay".as_ref(),
        capture.as_os_str(),
        "--config".as_ref(),
        config.as_os_str(),
        "--summary".as_ref(),
        summary.as_os_str(),
    ];
    args.extend(extra.iter().map(|a| std::ffi::OsStr::new(*a)));
    let (code, _, err) = tickguard(&args);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("addressed to a feed"), "{err}");
    serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap()
}

#[test]
fn an_itch_capture_is_listed_by_destination() {
    let text = inspect(&fixtures().join("itch/session.pcap"), false);
    assert!(
        text.starts_with(
            "fixtures/itch/session.pcap: 2604 records, 2604 UDP/IPv4 datagrams to 3 destinations\n"
        ) || text.contains(": 2604 records, 2604 UDP/IPv4 datagrams to 3 destinations\n"),
        "{text}"
    );
    for want in [
        "239.2.1.1:26477  1289 datagrams: unrecognised 7, MoldUDP64/ITCH 5.0 1282\n",
        "239.2.1.2:26477  1311 datagrams: MoldUDP64/ITCH 5.0 1311\n",
        "127.0.0.1:17000  4 datagrams: MoldUDP64/ITCH 5.0 4\n",
        "  sessions 2026010501, 2026010502\n",
        "  sequences 1 to 1628\n",
        "  8 symbols: AAPL AMZN GOOGL META MSFT NVDA QQQ TSLA\n",
        "  from 10.0.1.1:26400; 2026-01-05T14:29:59.000045829Z to 2026-01-05T14:30:13.600028101Z (14.600 s)\n",
    ] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
}

/// Each shipped capture replayed with its draft counts what it counts with
/// the configuration written for it: every datagram routed, every gap and
/// recovery the same (names and thresholds differ, so verdicts may).
#[test]
fn drafts_replay_the_shipped_captures_as_their_configurations_do() {
    let dir = tempfile::tempdir().unwrap();
    let all = &[
        "packets",
        "rejected",
        "messages",
        "ticks_lost",
        "duplicates",
        "recovered",
    ][..];
    // The join fixture's configuration tunes how a mid-session join is
    // handled (`join_gap_max`), which a draft leaves at its default: what
    // was received is the same, what it meant may differ.
    let received = &["packets", "rejected"][..];
    for (capture, config, pairs, keys) in [
        (
            "itch/session.pcap",
            "itch/config.toml",
            &[("itch50_1", "nasdaq")][..],
            all,
        ),
        (
            "itch/join.pcap",
            "itch/config.toml",
            &[("itch50_1", "nasdaq")][..],
            received,
        ),
        (
            "scenario-eth-us.pcap",
            "config.toml",
            &[("sqf_1", "fx"), ("sqf_2", "eq")][..],
            all,
        ),
    ] {
        let capture = fixtures().join(capture);
        let draft = dir.path().join("draft.toml");
        std::fs::write(&draft, inspect(&capture, true)).unwrap();
        let drafted = summary(&capture, &draft, &[]);
        let written = summary(&capture, &fixtures().join(config), &[]);
        for (ours, theirs) in pairs {
            let (a, b) = (&drafted["feeds"][ours], &written["feeds"][theirs]);
            for key in keys {
                assert_eq!(
                    a[key],
                    b[key],
                    "{}: {ours}.{key} vs {theirs}.{key}",
                    capture.display()
                );
            }
            assert!(a["packets"].as_u64().unwrap() > 100, "{a}");
        }
        assert_eq!(drafted["capture"], written["capture"]);
    }
}

/// A capture of `datagrams` (time ns, destination, bytes).
fn write_capture(path: &Path, datagrams: &[(u64, &str, Vec<u8>)]) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::RawIp).unwrap();
    let src: SocketAddrV4 = "10.9.9.9:5000".parse().unwrap();
    for (t, dst, bytes) in datagrams {
        w.write_udp(*t, src, dst.parse().unwrap(), bytes).unwrap();
    }
    w.finish().unwrap();
}

/// A draft names the recovery server only when the answers came from one
/// sender: replay keeps that server's answers only, so a draft naming one
/// of several (a forger's, or the server's other port) would drop the
/// rest. Several: a comment lists them and every answer is routed.
#[test]
fn a_draft_names_the_recovery_server_only_when_one_sent_the_answers() {
    use tickguard::protocol::itch50::{PacketBuilder, Session};
    let dir = tempfile::tempdir().unwrap();
    let t = 1_767_623_400_000_000_000u64;
    let session = Session(*b"20260105XA");
    let aapl = tickguard::symbol::Symbol::parse("AAPL").unwrap();
    let packet = |q: u64| {
        let mut p = PacketBuilder::new(session, q);
        p.message(&tickguard::protocol::itch50::message::encode::stock_directory(1, 0, aapl));
        p.finish()
    };
    let draft_of = |senders: &[&str], to: &str| {
        let cap = dir.path().join("answers.pcap");
        let file = std::io::BufWriter::new(std::fs::File::create(&cap).unwrap());
        let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::RawIp).unwrap();
        let line: SocketAddrV4 = "239.2.1.1:26477".parse().unwrap();
        let feed: SocketAddrV4 = "10.0.1.1:26400".parse().unwrap();
        for q in 1..=20 {
            w.write_udp(t + q, feed, line, &packet(q)).unwrap();
        }
        for (k, from) in senders.iter().enumerate() {
            let to: SocketAddrV4 = to.parse().unwrap();
            let q = 21 + k as u64;
            w.write_udp(t + q, from.parse().unwrap(), to, &packet(q))
                .unwrap();
        }
        w.finish().unwrap();
        let draft = inspect(&cap, true);
        let config = dir.path().join("draft.toml");
        std::fs::write(&config, &draft).unwrap();
        (draft, summary(&cap, &config, &[]))
    };
    let (draft, s) = draft_of(&["10.0.2.2:18000"], "127.0.0.1:17000");
    assert!(
        draft.contains("recovery = \"10.0.2.2:18000\"\nrecovery_listen = \"127.0.0.1:17000\"\n"),
        "{draft}"
    );
    assert!(s["capture"].get("wrong_source").is_none(), "{s}");
    assert_eq!(s["feeds"]["itch50_1"]["packets"], 21, "{s}");
    let (draft, s) = draft_of(&["10.0.2.2:18000", "10.0.2.2:18001"], "127.0.0.1:17000");
    assert!(!draft.contains("recovery = "), "{draft}");
    assert!(
        draft.contains(
            "# recovery: the answers came from several senders (10.0.2.2:18000, 10.0.2.2:18001)"
        ),
        "{draft}"
    );
    assert!(
        draft.contains("recovery_listen = \"127.0.0.1:17000\"\n"),
        "{draft}"
    );
    assert!(s["capture"].get("wrong_source").is_none(), "{s}");
    assert_eq!(s["feeds"]["itch50_1"]["packets"], 22, "{s}");
    // A sender no re-request could go to (a sanitised capture's
    // 0.0.0.0:PORT, a port 0) is not named: the draft would be refused.
    for sender in ["0.0.0.0:18000", "10.0.2.2:0"] {
        let (draft, s) = draft_of(&[sender], "127.0.0.1:17000");
        assert!(!draft.contains("recovery = "), "{draft}");
        assert!(
            draft.contains("# recovery: the answers name no sender"),
            "{draft}"
        );
        assert_eq!(s["feeds"]["itch50_1"]["packets"], 21, "{s}");
    }
    // Datagrams to a broadcast address are no recovery answers (no
    // recovery_listen may be one): a line of the stream.
    let (draft, s) = draft_of(&["10.0.2.2:18000"], "255.255.255.255:17000");
    assert!(!draft.contains("recovery_listen"), "{draft}");
    assert!(draft.contains("\"255.255.255.255:17000\"]"), "{draft}");
    assert_eq!(s["feeds"]["itch50_1"]["packets"], 21, "{s}");
}

/// A draft `run` and `replay` would refuse fails the command with their
/// error line, the draft printed: here a capture of nothing this version
/// reads (a draft of comments and no feed).
#[test]
fn a_draft_of_nothing_readable_fails_naming_why() {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("garbage.pcap");
    write_capture(
        &cap,
        &[(1_767_623_400_000_000_000, "239.1.1.1:9000", vec![0xAB; 40])],
    );
    let (code, out, err) = tickguard(&[
        "inspect".as_ref(),
        cap.as_os_str(),
        "--config-draft".as_ref(),
    ]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.contains("# 239.1.1.1:9000 (1 datagrams)"), "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("the draft") && err.contains("[[feed]]"),
        "{err}"
    );
}

/// A destination sharing symbols with two drafted feeds joins the first
/// (the busier one's): the destinations are taken busiest first, and a
/// feed is found by any symbol or session it shares, the first one that
/// holds it (a symbol a later destination brought into it included).
#[test]
fn a_destination_sharing_symbols_with_two_feeds_joins_the_first() {
    use tickguard::protocol::itch50::{PacketBuilder, Session};
    let dir = tempfile::tempdir().unwrap();
    let t = 1_767_623_400_000_000_000u64;
    let packet = |session: &[u8; 10], q: u64, symbols: &[&str]| {
        let mut p = PacketBuilder::new(Session(*session), q);
        for (k, s) in symbols.iter().enumerate() {
            let s = tickguard::symbol::Symbol::parse(s).unwrap();
            p.message(
                &tickguard::protocol::itch50::message::encode::stock_directory(k as u16 + 1, 0, s),
            );
        }
        p.finish()
    };
    let mut datagrams = Vec::new();
    for (dst, session, symbols, n) in [
        ("239.2.1.1:26477", b"20260105XA", &["AAPL"][..], 30),
        ("239.2.1.2:26477", b"20260105XB", &["MSFT"][..], 20),
        ("239.2.1.3:26477", b"20260105XC", &["MSFT", "AAPL"][..], 10),
        // MSFT alone: the first feed holds it too now (through .3).
        ("239.2.1.4:26477", b"20260105XD", &["MSFT"][..], 5),
    ] {
        for q in 1..=n {
            datagrams.push((t + q, dst, packet(session, q, symbols)));
        }
    }
    let cap = dir.path().join("three.pcap");
    write_capture(&cap, &datagrams);
    let draft = inspect(&cap, true);
    assert!(
        draft.contains("name = \"itch50_1\"\nprotocol = \"itch50\"\n"),
        "{draft}"
    );
    assert!(
        draft.contains("lines = [\"239.2.1.1:26477\", \"239.2.1.3:26477\"]\n"),
        "{draft}"
    );
    assert!(draft.contains("lines = [\"239.2.1.2:26477\"]\n"), "{draft}");
    assert!(
        draft.contains("# also MoldUDP64/ITCH 5.0 on 239.2.1.4:26477"),
        "{draft}"
    );
    // Two feeds each reserving their default bound on symbols: the draft
    // sizes the table for both, so that it loads, and replays the capture.
    assert!(draft.contains("[state]\n"), "{draft}");
    tickguard::config::Config::parse(&draft, "draft.toml").unwrap();
    let config = dir.path().join("draft.toml");
    std::fs::write(&config, &draft).unwrap();
    let replayed = std::process::Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .arg("replay")
        .arg(&cap)
        .arg("--config")
        .arg(&config)
        .arg("--no-progress")
        .output()
        .unwrap();
    assert!(
        replayed.status.success(),
        "{}",
        String::from_utf8_lossy(&replayed.stderr)
    );
}

/// An MDP3 packet: sequence `seq`, one message of template 46 and a 11-byte
/// root block, CME's schema 1, version 13.
fn mdp3(seq: u32) -> Vec<u8> {
    mdp3_of(seq, 46)
}

/// [`mdp3`] with one message of `template` (its framing only).
fn mdp3_of(seq: u32, template: u16) -> Vec<u8> {
    let mut p = seq.to_le_bytes().to_vec();
    p.extend_from_slice(&1_767_603_600_000_000_000u64.to_le_bytes());
    for v in [21u16, 11, template, 1, 13] {
        p.extend_from_slice(&v.to_le_bytes());
    }
    p.resize(p.len() + 11, 0);
    p
}

/// The draft marks an address carrying snapshots (one is enough: no other
/// service carries them) and one carrying only definitions; an incremental
/// line that carries a definition mid-week (as CME's do) stays a feed's
/// lines.
#[test]
fn mdp3_snapshot_and_definition_addresses_are_marked_and_mid_week_definitions_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let t = 1_767_603_600_000_000_000u64;
    let cap = dir.path().join("channel.pcap");
    let mut datagrams: Vec<(u64, &str, Vec<u8>)> = vec![];
    for i in 1..=6u32 {
        let template = if i == 4 { 56 } else { 46 };
        datagrams.push((t + u64::from(i), "224.0.31.1:14310", mdp3_of(i, template)));
        let template = if i == 1 { 52 } else { 53 };
        datagrams.push((
            t + 100 + u64::from(i),
            "224.0.32.1:14311",
            mdp3_of(i, template),
        ));
        // (A heartbeat among them, as every service sends.)
        let template = if i == 5 { 12 } else { 56 };
        datagrams.push((
            t + 200 + u64::from(i),
            "224.0.33.1:14312",
            mdp3_of(i, template),
        ));
    }
    write_capture(&cap, &datagrams);
    let draft = inspect(&cap, true);
    let block = |address: &str| {
        let at = draft
            .find(&format!("lines = [\"{address}\"]"))
            .unwrap_or_else(|| panic!("{address}: {draft}"));
        let start = draft[..at].rfind("[[feed]]").unwrap();
        let end = draft[at..].find("[[feed]]").map_or(draft.len(), |e| at + e);
        draft[start..end].to_string()
    };
    let incremental = block("224.0.31.1:14310");
    assert!(
        !incremental.contains("# this address carries"),
        "{incremental}"
    );
    assert!(
        block("224.0.32.1:14311").contains("carries snapshots (52, 69)"),
        "{draft}"
    );
    assert!(
        block("224.0.33.1:14312").contains("carries definitions (54 to 58, 63)"),
        "{draft}"
    );
}

/// MDP3 is recognised (and drafted as a channel's incremental lines);
/// a sanitised capture (every datagram to 0.0.0.0:0) gets a draft that
/// says to replay with `--feed`, which routes every datagram to the feed.
#[test]
fn mdp3_is_named_and_a_sanitised_capture_replays_with_feed() {
    let dir = tempfile::tempdir().unwrap();
    let t = 1_767_603_600_000_000_000u64;
    let cap = dir.path().join("mixed.pcap");
    let mut datagrams: Vec<(u64, &str, Vec<u8>)> = (1..=5)
        .map(|i| (t + u64::from(i), "224.0.31.1:14310", mdp3(i)))
        .collect();
    let sqf = |symbol: &str, seq: u64| {
        let mut b = tickguard::protocol::sqf::PacketBuilder::new(t);
        b.quote(
            tickguard::symbol::Symbol::parse(symbol).unwrap(),
            seq,
            t,
            1.0,
            1.1,
        );
        b.finish()
    };
    datagrams.extend((1..=20).map(|i| (t + 1_000 + i, "0.0.0.0:0", sqf("EURUSD", i))));
    // A second provider, its symbols its own, sanitised as well.
    datagrams.extend((1..=20).map(|i| (t + 2_000 + i, "0.0.0.0:30002", sqf("USDJPY", i))));
    write_capture(&cap, &datagrams);
    let text = inspect(&cap, false);
    assert!(
        text.contains("224.0.31.1:14310  5 datagrams: CME MDP3 (SBE) 5\n"),
        "{text}"
    );
    assert!(text.contains("0.0.0.0:0  20 datagrams: SQF 20\n"), "{text}");
    let draft = inspect(&cap, true);
    assert!(
        draft.contains("# CME MDP3 (SBE)\n[[feed]]\nname = \"mdp3_1\"\nprotocol = \"mdp3\"\nlines = [\"224.0.31.1:14310\"]\n"),
        "{draft}"
    );
    assert!(draft.contains("replay with `--feed sqf_1`"), "{draft}");
    assert!(draft.contains("replay with `--feed sqf_2`"), "{draft}");
    assert!(
        draft.contains("2 feeds above are of sanitised destinations (sqf_1, sqf_2)"),
        "{draft}"
    );
    // Each sanitised feed has placeholder lines of its own: the draft is a
    // configuration.
    tickguard::config::Config::parse(&draft, "draft.toml").unwrap();
    let config = dir.path().join("draft.toml");
    std::fs::write(&config, &draft).unwrap();
    // Without --feed nothing matches the placeholder lines; with it, all.
    let routed = summary(&cap, &config, &["--feed", "sqf_1"]);
    let f = &routed["feeds"]["sqf_1"];
    assert_eq!(
        (f["packets"].as_u64(), f["messages"].as_u64()),
        (Some(45), Some(40)),
        "{f}"
    );
}

/// A capture broken part way is inspected up to the break: what was read
/// is printed, the break named on stderr, and the exit status is 2 (as a
/// replay of it ends), so a script drafting configurations notices.
#[test]
fn a_broken_capture_is_inspected_up_to_the_break_and_fails() {
    let whole = std::fs::read(fixtures().join("itch/session.pcap")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.pcap");
    std::fs::write(&cut, &whole[..whole.len() * 2 / 3]).unwrap();
    let (code, out, err) = tickguard(&["inspect".as_ref(), cut.as_os_str()]);
    assert_eq!(code, 2, "{err}");
    assert!(out.contains("MoldUDP64/ITCH 5.0"), "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("truncated") && err.ends_with("inspected up to there\n"),
        "{err}"
    );
}

/// A capture whose file name holds a newline and an escape: named with
/// them escaped, so the draft's TOML gains no line of the name's, and the
/// terminal no control byte.
#[test]
fn a_file_name_with_control_bytes_is_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let odd = dir.path().join("cap.pcap\nstale_threshold_ms = 1\n\x1b[2J");
    std::fs::copy(fixtures().join("itch/session.pcap"), &odd).unwrap();
    for draft in [true, false] {
        let out = inspect(&odd, draft);
        assert!(
            !out.lines().any(|l| l.starts_with("stale_threshold_ms = 1")),
            "{out}"
        );
        assert!(!out.contains('\x1b'), "{out:?}");
        assert!(
            out.contains("cap.pcap\\nstale_threshold_ms = 1\\n"),
            "{out}"
        );
    }
}

/// A destination mixing protocols keeps what each protocol's datagrams
/// decided: an SQF snapshot (a `delta` stream) stays decided however the
/// counts of the other protocol's datagrams between them swing.
#[test]
fn a_mixed_destination_keeps_an_sqf_snapshots_delta() {
    use tickguard::protocol::itch50::{PacketBuilder as Mold, Session};
    use tickguard::protocol::sqf::PacketBuilder;
    let t = 1_767_623_400_000_000_000u64;
    let eur = tickguard::symbol::Symbol::parse("EURUSD").unwrap();
    let sqf = |snapshot: bool, seq: u64| {
        let mut b = PacketBuilder::new(t);
        match snapshot {
            true => b.snapshot(eur, seq, t, 1.0, 1.1),
            false => b.quote(eur, seq, t, 1.0, 1.1),
        };
        b.finish()
    };
    let itch = |q: u64| {
        let mut p = Mold::new(Session(*b"20260105XA"), q);
        p.message(
            &tickguard::protocol::itch50::message::encode::stock_directory(
                1,
                0,
                tickguard::symbol::Symbol::parse("AAPL").unwrap(),
            ),
        );
        p.finish()
    };
    let dst = "239.1.1.1:30001";
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("mixed.pcap");
    write_capture(
        &cap,
        &[
            (t + 1, dst, sqf(true, 10)),
            (t + 2, dst, itch(1)),
            (t + 3, dst, itch(2)),
            (t + 4, dst, sqf(false, 11)),
            (t + 5, dst, sqf(false, 12)),
        ],
    );
    let draft = inspect(&cap, true);
    assert!(draft.contains("kind = \"delta\""), "{draft}");
}
