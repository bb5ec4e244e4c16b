//! Replaying a capture of a CME MDP3 channel (spec mdp3 §5): datagrams
//! routed by destination to the incremental, snapshot and definition lines,
//! the `definitions` file read first, checks by Symbol (past 8 characters
//! too) and `#SecurityID` with `security_id`, `bid` and `ask` in their
//! lines, and the summary's keys.

use std::net::SocketAddrV4;
use std::path::Path;
use tickguard::capture::link::Link;
use tickguard::capture::write::{CaptureWriter, Format};
use tickguard::config::Config;
use tickguard::protocol::mdp3::encode::{
    self, BookEntry, FeedType, Shape, SnapshotEntry, SnapshotRoot, Status,
};
use tickguard::protocol::mdp3::template::{EntryType, UpdateAction};
use tickguard::replay::{answer_json, replay, Check, InputError};

const MS: u64 = 1_000_000;
/// 2026-01-05 14:30:00 UTC, ns since the Unix epoch.
const T0: u64 = 1_767_623_400_000_000_000;
const V: Shape = Shape::new(13);
const EOE: u8 = 0x80;
const ES: i32 = 1001;
const SPREAD: i32 = 1002;
const NQ: i32 = 1003;

const CONFIG: &str = r#"
[[feed]]
name = "cme"
protocol = "mdp3"
lines = ["239.3.1.1:14310", "239.3.1.2:15310"]
snapshot_lines = ["239.3.1.3:14311"]
definition_lines = ["239.3.1.5:14312"]
definitions = "defs.pcap"
stale_threshold_ms = 32000
source_threshold_ms = 32000
clock_offset = 0
gap_timeout_ms = 5

[[feed.symbol]]
name = "ESZ6-ESH7"
stale_threshold_ms = 100
"#;

fn addr(s: &str) -> SocketAddrV4 {
    s.parse().unwrap()
}
fn line_a() -> SocketAddrV4 {
    addr("239.3.1.1:14310")
}
fn line_b() -> SocketAddrV4 {
    addr("239.3.1.2:15310")
}
fn snapshot_line() -> SocketAddrV4 {
    addr("239.3.1.3:14311")
}
fn definition_line() -> SocketAddrV4 {
    addr("239.3.1.5:14312")
}

fn entry(id: i32, rpt: u32, side: EntryType, action: UpdateAction, price: i64) -> BookEntry {
    BookEntry {
        price: Some(price),
        size: Some(10),
        security_id: id,
        rpt_seq: rpt,
        orders: Some(2),
        level: 1,
        action,
        entry_type: side,
    }
}

/// Incremental packet `s`: one 46 of `entries`, ending its event.
fn book(s: u32, entries: &[BookEntry]) -> Vec<u8> {
    encode::packet(s, T0, &[encode::book(46, V, T0, EOE, entries, 0)])
}

fn definition(template: u16, id: i32, symbol: &str, group: &str) -> Vec<u8> {
    definition_as(b'A', template, id, symbol, group)
}

/// [`definition`] with its SecurityUpdateAction (`A` add, `M` modify, `D`
/// delete).
fn definition_as(action: u8, template: u16, id: i32, symbol: &str, group: &str) -> Vec<u8> {
    let d = encode::Instrument {
        match_event_indicator: 0,
        tot_num_reports: Some(3),
        security_update_action: action,
        trading_status: Some(17),
        appl_id: 310,
        security_group: group,
        asset: "ES",
        symbol,
        security_id: id,
        min_price_increment: Some(250_000_000),
        display_factor: 1_000_000_000,
    };
    let types = [
        FeedType {
            md_feed_type: "GBX",
            market_depth: 10,
        },
        FeedType {
            md_feed_type: "GBI",
            market_depth: 2,
        },
    ];
    encode::packet(1, T0, &[encode::definition(template, V, &d, 0, &types)])
}

/// The channel, as (time offset, destination, datagram).
fn channel() -> Vec<(u64, SocketAddrV4, Vec<u8>)> {
    use EntryType::{Bid, Offer};
    use UpdateAction::New;
    let p1 = book(
        1,
        &[
            entry(ES, 1, Bid, New, 5_000_000_000_000),
            entry(ES, 2, Offer, New, 5_000_250_000_000),
        ],
    );
    let p2 = book(
        2,
        &[
            entry(SPREAD, 1, Bid, New, -1_250_000_000),
            entry(SPREAD, 2, Offer, New, -1_000_000_000),
        ],
    );
    // Lost on both lines.
    let _p3 = book(3, &[entry(ES, 3, Bid, New, 5_000_100_000_000)]);
    let p4 = book(4, &[entry(ES, 4, Offer, New, 5_000_200_000_000)]);
    let snapshot = encode::packet(
        1,
        T0,
        &[encode::snapshot(
            52,
            V,
            &SnapshotRoot {
                last_msg_seq_num_processed: 4,
                tot_num_reports: 2,
                security_id: ES,
                rpt_seq: 4,
                transact_time: T0,
                trading_status: Some(17),
            },
            &[
                SnapshotEntry {
                    price: Some(5_000_100_000_000),
                    size: Some(3),
                    orders: Some(1),
                    level: Some(1),
                    entry_type: Bid,
                },
                SnapshotEntry {
                    price: Some(5_000_200_000_000),
                    size: Some(4),
                    orders: Some(1),
                    level: Some(1),
                    entry_type: Offer,
                },
            ],
        )],
    );
    let halt = encode::packet(
        5,
        T0 + 30 * MS,
        &[encode::security_status(
            V,
            &Status {
                transact_time: T0 + 30 * MS,
                security_group: "SP",
                asset: "",
                security_id: None,
                match_event_indicator: EOE,
                trading_status: Some(2),
            },
        )],
    );
    vec![
        (0, line_a(), p1.clone()),
        (MS / 2, line_b(), p1),
        (MS, line_a(), p2.clone()),
        (MS, line_b(), p2),
        // p3 lost on both lines: gap [3, 4) at 2 ms, given up after 7 ms.
        (2 * MS, line_a(), p4.clone()),
        (2 * MS, line_b(), p4),
        (3 * MS, definition_line(), definition(54, NQ, "NQZ6", "NQ")),
        (4 * MS, snapshot_line(), b"short".to_vec()),
        (20 * MS, snapshot_line(), snapshot),
        (30 * MS, line_a(), halt),
    ]
}

/// A capture of `datagrams`, as (time offset from `T0`, destination, bytes).
fn write_capture(path: &Path, datagrams: &[(u64, SocketAddrV4, Vec<u8>)]) {
    write_capture_as(path, Format::PcapNanos, datagrams);
}

fn write_capture_as(path: &Path, format: Format, datagrams: &[(u64, SocketAddrV4, Vec<u8>)]) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = CaptureWriter::new(file, format, Link::Ethernet).unwrap();
    let src = addr("10.3.3.3:5000");
    for (dt, dst, bytes) in datagrams {
        w.write_udp(T0 + dt, src, *dst, bytes).unwrap();
    }
    w.finish().unwrap();
}

/// The definitions file: ES and the spread, at an address no line uses.
fn write_definitions(path: &Path) {
    let to = addr("10.1.1.1:9");
    write_capture(
        path,
        &[
            (0, to, definition(54, ES, "ESZ6", "SP")),
            (0, to, definition(56, SPREAD, "ESZ6-ESH7", "SP")),
        ],
    );
}

fn check(dt: u64, name: &str) -> Check {
    Check {
        time_ns: T0 + dt,
        feed: "cme".into(),
        symbol: name.into(),
    }
}

/// `tickguard replay cme.pcap --config cme.toml --no-progress` in `dir`,
/// to add arguments to.
fn replay_in(dir: &Path) -> assert_cmd::Command {
    let mut c = assert_cmd::Command::cargo_bin("tickguard").unwrap();
    c.current_dir(dir).args([
        "replay",
        "cme.pcap",
        "--config",
        "cme.toml",
        "--no-progress",
    ]);
    c
}

fn setup(dir: &Path) -> Config {
    write_definitions(&dir.join("defs.pcap"));
    write_capture(&dir.join("cme.pcap"), &channel());
    let path = dir.join("cme.toml");
    std::fs::write(&path, CONFIG).unwrap();
    Config::load(&path).unwrap()
}

#[test]
fn an_mdp3_capture_replays_by_service_with_definitions_first() {
    let dir = tempfile::tempdir().unwrap();
    let config = setup(dir.path());
    let checks = [
        check(MS / 2, "ESZ6"),
        check(MS / 2, "#1001"),
        check(3 * MS, "ESZ6"),        // an RptSeq hole, a packet gap open
        check(3 * MS, "#1002"),       // untouched by the lost packet: ok
        check(10 * MS, "#1002"),      // the gap given up: unverified
        check(25 * MS, "ESZ6"),       // healed by the snapshot
        check(25 * MS, "ESZ6-ESH7"),  // a Symbol past 8 characters
        check(40 * MS, "ESZ6"),       // the group halted
        check(40 * MS, "NQZ6"),       // defined on the definition line; no book
        check(40 * MS, "#999"),       // unknown
        check(400 * MS, "ESZ6-ESH7"), // its own threshold: stale
        check(400 * MS, "#1002"),     // the same override, by its other name
    ];
    let mut capture =
        tickguard::capture::CaptureReader::open(&dir.path().join("cme.pcap")).unwrap();
    let outcome = replay(&config, &mut capture, &checks, |_| {});
    assert!(outcome.input_error.is_none());
    let lines: Vec<String> = checks
        .iter()
        .zip(&outcome.answers)
        .map(|(c, a)| answer_json(c, *a))
        .collect();
    let t = |dt: u64| T0 + dt;
    let want = [
        format!(
            r##"{{"time_ns":{},"feed":"cme","symbol":"ESZ6","ok":true,"reasons":[],"security_id":1001,"bid":5000000000000,"ask":5000250000000}}"##,
            t(MS / 2)
        ),
        format!(
            r##"{{"time_ns":{},"feed":"cme","symbol":"#1001","ok":true,"reasons":[],"security_id":1001,"bid":5000000000000,"ask":5000250000000}}"##,
            t(MS / 2)
        ),
        format!(
            r##"{{"time_ns":{},"feed":"cme","symbol":"ESZ6","ok":false,"reasons":["suspect"],"security_id":1001,"bid":5000000000000,"ask":5000250000000}}"##,
            t(3 * MS)
        ),
        format!(
            r##"{{"time_ns":{},"feed":"cme","symbol":"#1002","ok":true,"reasons":[],"security_id":1002,"bid":-1250000000,"ask":-1000000000}}"##,
            t(3 * MS)
        ),
        format!(
            r##"{{"time_ns":{},"feed":"cme","symbol":"#1002","ok":false,"reasons":["suspect"],"security_id":1002,"bid":-1250000000,"ask":-1000000000}}"##,
            t(10 * MS)
        ),
        format!(
            r##"{{"time_ns":{},"feed":"cme","symbol":"ESZ6","ok":true,"reasons":[],"security_id":1001,"bid":5000100000000,"ask":5000200000000}}"##,
            t(25 * MS)
        ),
        format!(
            r##"{{"time_ns":{},"feed":"cme","symbol":"ESZ6-ESH7","ok":false,"reasons":["suspect"],"security_id":1002,"bid":-1250000000,"ask":-1000000000}}"##,
            t(25 * MS)
        ),
        format!(
            r##"{{"time_ns":{},"feed":"cme","symbol":"ESZ6","ok":false,"reasons":["halted"],"security_id":1001,"bid":5000100000000,"ask":5000200000000}}"##,
            t(40 * MS)
        ),
        format!(
            r##"{{"time_ns":{},"feed":"cme","symbol":"NQZ6","ok":false,"reasons":["no_quote"],"security_id":1003}}"##,
            t(40 * MS)
        ),
        format!(
            r##"{{"time_ns":{},"feed":"cme","symbol":"#999","ok":false,"reasons":["no_quote"],"security_id":null}}"##,
            t(40 * MS)
        ),
        format!(
            r##"{{"time_ns":{},"feed":"cme","symbol":"ESZ6-ESH7","ok":false,"reasons":["stale","suspect","halted"],"security_id":1002,"bid":-1250000000,"ask":-1000000000}}"##,
            t(400 * MS)
        ),
        format!(
            r##"{{"time_ns":{},"feed":"cme","symbol":"#1002","ok":false,"reasons":["stale","suspect","halted"],"security_id":1002,"bid":-1250000000,"ask":-1000000000}}"##,
            t(400 * MS)
        ),
    ];
    assert_eq!(lines.len(), want.len());
    for (got, want) in lines.iter().zip(&want) {
        assert_eq!(got, want);
    }

    let json = serde_json::to_value(&outcome.summary).unwrap();
    let f = &json["feeds"]["cme"];
    // The definitions file's datagrams are not packets of the feed.
    assert_eq!(f["packets"], 10);
    assert_eq!(f["rejected"], 1);
    assert_eq!(f["rejected_by_reason"]["short"], 1);
    assert_eq!(f["messages"], 7, "incremental messages, copies included");
    assert_eq!(f["messages_by_template"]["46"], 3);
    assert_eq!(f["messages_by_template"]["30"], 1);
    assert_eq!(f["next"], 6);
    assert_eq!(f["packet_gaps"], 1);
    assert_eq!(f["packets_lost"], 1);
    assert_eq!(f["duplicates"], 3);
    assert_eq!(f["gaps_open"], 0);
    assert_eq!(f["snapshot_packets"], 1);
    assert_eq!(f["snapshots_applied"], 1);
    assert_eq!(f["definitions"], 3);
    assert_eq!(f["ticks_lost"], 1, "RptSeq 3 of ES skipped by the snapshot");
    let es = &f["symbols"]["#1001"];
    assert_eq!(es["symbol"], "ESZ6");
    assert_eq!(es["group"], "SP");
    assert_eq!(es["depth"], 10);
    assert_eq!(es["rpt_seq"], 4);
    assert_eq!(es["suspect"], false);
    assert_eq!(es["bid"], 5_000_100_000_000i64);
    assert_eq!(es["bid_size"], 3);
    assert_eq!(es["status"], "halted");
    assert_eq!(es["trading_status"], 2);
    assert_eq!(es["min_price_increment"], 250_000_000);
    let spread = &f["symbols"]["#1002"];
    assert_eq!(spread["unverified"], true);
    assert!(spread.get("implied_bid").is_none(), "{spread}");
    let nq = &f["symbols"]["#1003"];
    assert_eq!(nq["rpt_seq"], serde_json::Value::Null);
    assert!(nq.get("bid").is_none());
}

#[test]
fn a_definitions_file_that_is_not_mdp3_stops_the_replay_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = setup(dir.path());
    write_capture(
        &dir.path().join("defs.pcap"),
        &[(0, addr("10.1.1.1:9"), b"not a packet".to_vec())],
    );
    let mut capture =
        tickguard::capture::CaptureReader::open(&dir.path().join("cme.pcap")).unwrap();
    let outcome = replay(&config, &mut capture, &[check(MS, "ESZ6")], |_| {});
    let Some(InputError::Preload(e)) = &outcome.input_error else {
        panic!("{:?}", outcome.input_error.map(|e| e.to_string()));
    };
    assert!(e.starts_with("feed cme: definitions "), "{e}");
    assert!(
        e.ends_with(
            "defs.pcap: datagram 1 (its record at byte 24) is not a valid MDP3 packet (short (not CME MDP3?))"
        ),
        "{e}"
    );
    assert_eq!(
        outcome.answers[0].reasons.names().collect::<Vec<_>>(),
        ["no_quote"]
    );
}

/// A definitions file whose last record (the spread's definition) was cut
/// by the capture's snaplen stops the replay naming what was not read:
/// replayed without it, the spread would have no group, and its group's
/// statuses would never reach it.
#[test]
fn a_definitions_file_with_a_record_cut_short_stops_the_replay() {
    let dir = tempfile::tempdir().unwrap();
    let config = setup(dir.path());
    let defs = dir.path().join("defs.pcap");
    let mut bytes = std::fs::read(&defs).unwrap();
    // Legacy pcap: a 24-byte file header, then each record's 16-byte
    // header (its captured length at +8, its original length at +12).
    let word = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let second = 24 + 16 + word(&bytes, 24 + 8) as usize;
    assert!(word(&bytes, second + 12) > 60);
    bytes[second + 8..second + 12].copy_from_slice(&60u32.to_le_bytes());
    bytes.truncate(second + 16 + 60);
    std::fs::write(&defs, &bytes).unwrap();
    let mut capture =
        tickguard::capture::CaptureReader::open(&dir.path().join("cme.pcap")).unwrap();
    let outcome = replay(&config, &mut capture, &[check(MS, "ESZ6")], |_| {});
    let Some(InputError::Preload(e)) = &outcome.input_error else {
        panic!("{:?}", outcome.input_error.map(|e| e.to_string()));
    };
    assert!(
        e.starts_with("feed cme: definitions ")
            && e.contains("defs.pcap: records not read as whole UDP datagrams (1 cut short)"),
        "{e}"
    );
}

/// A definitions file at `path` in `format` holding ESZ6's definition
/// (more may be written before it is finished).
fn esz6_definitions(
    path: &Path,
    format: Format,
) -> CaptureWriter<std::io::BufWriter<std::fs::File>> {
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = CaptureWriter::new(file, format, Link::Ethernet).unwrap();
    w.write_udp(
        T0,
        addr("10.3.3.3:5000"),
        addr("10.1.1.1:9"),
        &definition(54, ES, "ESZ6", "SP"),
    )
    .unwrap();
    w
}

/// Records of a definitions file plainly not the lines' are passed over,
/// whole or not: an ARP frame or an ICMP packet cut by the snaplen, and a
/// TCP segment cut short, fragmented or malformed (a connection's, never a
/// datagram's), as a capture of the definition lines taken with a snaplen
/// on a busy host holds them.
#[test]
fn a_definitions_file_passes_over_what_is_not_the_lines_read_whole_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let config = setup(dir.path());
    let defs = dir.path().join("defs.pcap");
    let mut w = esz6_definitions(&defs, Format::PcapNanos);
    // Ethernet, then IPv4 of `protocol` (1,500 bytes on the wire, `frag`
    // its flags and offset), then a 20-byte TCP header (`offset_words`
    // its data offset), the rest zeros.
    let frame = |ethertype: u16, protocol: u8, frag: u16, offset_words: u8| {
        let mut f = vec![0u8; 1514];
        f[12..14].copy_from_slice(&ethertype.to_be_bytes());
        f[14] = 0x45;
        f[16..18].copy_from_slice(&1500u16.to_be_bytes());
        f[20..22].copy_from_slice(&frag.to_be_bytes());
        f[22] = 64;
        f[23] = protocol;
        f[26..30].copy_from_slice(&[10, 9, 9, 9]);
        f[30..34].copy_from_slice(&[10, 9, 9, 8]);
        f[34 + 12] = offset_words << 4;
        f
    };
    let (ipv4, arp, tcp, icmp) = (0x0800, 0x0806, 6, 1);
    let cut = |f: Vec<u8>| (f[..96].to_vec(), 1514);
    for (i, (bytes, origlen)) in [
        cut(frame(arp, 0, 0, 5)),
        cut(frame(ipv4, icmp, 0, 5)),
        cut(frame(ipv4, tcp, 0x4000, 5)),
        (frame(ipv4, tcp, 0x2000, 5), 1514),
        (frame(ipv4, tcp, 0x4000, 2), 1514),
    ]
    .into_iter()
    .enumerate()
    {
        w.write_record(T0 + 1 + i as u64, &bytes, origlen).unwrap();
    }
    w.finish().unwrap();
    let mut read = tickguard::capture::CaptureReader::open(&defs).unwrap();
    read.for_each(|_| {}).unwrap();
    let st = read.stats();
    assert_eq!(
        (
            st.not_ipv4,
            st.not_udp,
            st.truncated,
            st.ip_fragments,
            st.malformed
        ),
        (1, 1, 1, 1, 1),
        "{st:?}"
    );
    let mut capture =
        tickguard::capture::CaptureReader::open(&dir.path().join("cme.pcap")).unwrap();
    let outcome = replay(&config, &mut capture, &[check(MS / 2, "ESZ6")], |_| {});
    assert!(
        outcome.input_error.is_none(),
        "{:?}",
        outcome.input_error.map(|e| e.to_string())
    );
    assert!(
        outcome.answers[0].reasons.is_ok(),
        "{:?}",
        outcome.answers[0]
    );
}

/// The definitions file may be pcapng as well as pcap; one that is no
/// capture at all stops the replay at once with one line naming it (exit
/// 2), before any datagram of the capture.
#[test]
fn a_definitions_file_is_read_as_pcapng_and_refused_when_no_capture() {
    let dir = tempfile::tempdir().unwrap();
    let config = setup(dir.path());
    let defs = dir.path().join("defs.pcap");
    let w = esz6_definitions(&defs, Format::PcapNg { tsresol: 9 });
    w.finish().unwrap();
    let mut capture =
        tickguard::capture::CaptureReader::open(&dir.path().join("cme.pcap")).unwrap();
    let outcome = replay(&config, &mut capture, &[check(MS / 2, "ESZ6")], |_| {});
    assert!(outcome.input_error.is_none());
    assert!(
        outcome.answers[0].reasons.is_ok(),
        "{:?}",
        outcome.answers[0]
    );

    std::fs::write(&defs, b"these bytes are no capture at all").unwrap();
    let out = replay_in(dir.path()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("feed cme: definitions ") && err.contains("defs.pcap"),
        "{err}"
    );
    assert!(
        out.stdout.is_empty(),
        "no summary: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A definitions file that is a valid MDP3 capture without one definition
/// (the incremental lines recorded by mistake): the replay goes on, and a
/// warning names the file and what that means; the right file, none.
#[test]
fn a_definitions_file_without_definitions_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let out = replay_in(dir.path()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("no instrument definition"), "{err}");
    write_capture(&dir.path().join("defs.pcap"), &channel()[..3]);
    let out = replay_in(dir.path()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let warned: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("no instrument definition"))
        .collect();
    assert_eq!(warned.len(), 1, "{err}");
    assert!(
        warned[0].contains("definitions defs.pcap")
            && warned[0].contains("feed=cme")
            && warned[0].contains("known by SecurityID only"),
        "{err}"
    );
}

/// `--feed` sends every datagram to the feed's line A: for a channel with
/// snapshot and definition lines, a warning names them (their datagrams
/// would be read as line A's); a feed of one service gets none.
#[test]
fn feed_on_a_channel_with_other_services_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    // Its stderr, the replay succeeding.
    let replay_feed = || {
        let out = replay_in(dir.path())
            .args(["--feed", "cme"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        err
    };
    let err = replay_feed();
    assert!(
        err.contains("warning: --feed cme: every datagram goes to its line A, so datagrams of its snapshot_lines, definition_lines in the capture would be read as line A's"),
        "{err}"
    );
    let lone = CONFIG
        .replace("snapshot_lines = [\"239.3.1.3:14311\"]\n", "")
        .replace("definition_lines = [\"239.3.1.5:14312\"]\n", "");
    std::fs::write(dir.path().join("cme.toml"), lone).unwrap();
    let err = replay_feed();
    assert!(!err.contains("--feed cme:"), "{err}");
}

/// From the command line: nothing on stdout (no answers to a replay that
/// never ran), one line naming the file, a failing exit.
#[test]
fn a_definitions_file_that_is_not_mdp3_writes_no_answers() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    std::fs::write(dir.path().join("defs.pcap"), b"garbage").unwrap();
    std::fs::write(
        dir.path().join("checks.csv"),
        "time_ns,feed,symbol\n1,cme,ESZ6\n",
    )
    .unwrap();
    let out = replay_in(dir.path())
        .args(["--checks", "checks.csv", "--summary", "summary.json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("definitions") && stderr.contains("defs.pcap"),
        "{stderr}"
    );
    assert!(!dir.path().join("summary.json").exists());
    // Nor an explanation of a replay that never ran.
    let out = replay_in(dir.path())
        .args(["--explain", "cme", "ESZ6", "--summary", "summary.json"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!dir.path().join("summary.json").exists());
}

/// `--explain` names the threshold crossings and the cache bound: the
/// source age passing a short `source_threshold_ms` between packets, and
/// the entry `max_cached = 0` cannot keep.
#[test]
fn explain_names_the_source_age_and_the_cache_bound() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let config = CONFIG
        .replace("source_threshold_ms = 32000", "source_threshold_ms = 5")
        .replace("gap_timeout_ms = 5", "gap_timeout_ms = 5\nmax_cached = 0");
    std::fs::write(dir.path().join("cme.toml"), config).unwrap();
    let out = replay_in(dir.path())
        .args(["--explain", "cme", "ESZ6", "--explain-all"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.lines().any(
            |l| l.contains("source age: the channel's latest complete source time")
                && l.contains("-> stale_at_source")
        ),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.contains("cache full (max_cached)")),
        "{text}"
    );
}

#[test]
fn a_missing_definitions_file_is_a_configuration_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cme.toml");
    std::fs::write(&path, CONFIG).unwrap();
    let e = Config::load(&path).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "config {}: feed cme: definitions ",
            path.display()
        )),
        "{e}"
    );
    assert!(e.contains("defs.pcap"), "{e}");
    // A directory or a FIFO in its place: refused at once, not waited on.
    std::fs::create_dir(dir.path().join("defs.pcap")).unwrap();
    let e = Config::load(&path).unwrap_err().to_string();
    assert!(e.ends_with("defs.pcap: not a regular file"), "{e}");
    std::fs::remove_dir(dir.path().join("defs.pcap")).unwrap();
    let fifo = std::ffi::CString::new(
        dir.path()
            .join("defs.pcap")
            .into_os_string()
            .into_encoded_bytes(),
    )
    .unwrap();
    // SAFETY: a NUL-terminated path this test owns.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let e = Config::load(&path).unwrap_err().to_string();
    assert!(e.ends_with("defs.pcap: not a regular file"), "{e}");
}

/// Live, an MDP3 feed goes live (nothing of its own to open) and reads
/// its `definitions` file before its first datagram, as a replay does.
#[test]
fn an_mdp3_feed_goes_live_and_reads_its_definitions_first() {
    let dir = tempfile::tempdir().unwrap();
    let config = setup(dir.path());
    let mut handler = tickguard::handler::Handler::new(&config);
    handler.go_live().unwrap();
    handler.preload().unwrap();
    let feed = handler.feeds()[0].engine().mdp3().unwrap();
    assert!(feed.counters().definitions > 0);
    assert!(feed.find("ESZ6").is_some(), "the file's Symbols are known");
    assert_eq!(handler.feeds()[0].counters.packets, 0);
}

/// `--explain FEED INSTRUMENT` tells each change of the instrument's
/// verdict with its cause: the packet gap, the RptSeq hole and the entry
/// that revealed it, the give-up, the snapshot that healed it, the group
/// status, the end of event that published the book.
/// A definition that deletes the instrument's Symbol is named as the
/// cause of the step that turns the name `no_quote`.
#[test]
fn explain_names_the_definition_that_deletes_a_symbol() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let mut datagrams = channel();
    datagrams.push((
        40 * MS,
        definition_line(),
        definition_as(b'D', 54, ES, "ESZ6", "SP"),
    ));
    // Named again: an instrument with its history, not one first seen.
    datagrams.push((
        50 * MS,
        definition_line(),
        definition_as(b'A', 54, ES, "ESZ6", "SP"),
    ));
    write_capture(&dir.path().join("cme.pcap"), &datagrams);
    let out = replay_in(dir.path())
        .args(["--explain", "cme", "ESZ6"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let line = |at: &str| {
        text.lines()
            .find(|l| l.contains(at))
            .unwrap_or_else(|| panic!("{text}"))
    };
    let deleted = line(" +40.000000 ms ");
    assert!(
        deleted.contains("definition: its Symbol deleted (SecurityID 1001 no longer named by it)")
            && deleted.ends_with("-> no_quote"),
        "{text}"
    );
    let named = line(" +50.000000 ms ");
    assert!(
        named.contains("definition: its Symbol now names SecurityID 1001, known before"),
        "{text}"
    );
    for wrong in ["first seen", "snapshot applied", "end of event"] {
        assert!(!named.contains(wrong), "{wrong}: {text}");
    }
}

/// A packet gap whose deadline saturates at the largest time (the packet
/// that opened it stamped within the gap timeout of 2^64 ns) never passes:
/// the explanation ends, as the replay does, with the gap told open.
#[test]
fn explain_ends_when_a_gap_deadline_is_the_largest_time() {
    use EntryType::{Bid, Offer};
    use UpdateAction::New;
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let p1 = book(
        1,
        &[
            entry(ES, 1, Bid, New, 5_000_000_000_000),
            entry(ES, 2, Offer, New, 5_000_250_000_000),
        ],
    );
    let p3 = book(3, &[entry(ES, 3, Bid, New, 5_000_100_000_000)]);
    let far = u64::MAX - 1 - T0;
    write_capture_as(
        &dir.path().join("cme.pcap"),
        Format::PcapNg { tsresol: 9 },
        &[(0, line_a(), p1), (far, line_a(), p3)],
    );
    let out = replay_in(dir.path())
        .args(["--explain", "cme", "ESZ6", "--explain-all"])
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}\n{text}");
    assert!(
        text.contains("packet gap opened: MsgSeqNum 2 missing"),
        "{text}"
    );
    assert!(!text.contains("packet gap given up"), "{text}");
}

#[test]
fn explain_tells_why_an_instrument_changed() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let out = replay_in(dir.path())
        .args(["--explain", "cme", "ESZ6", "--explain-all"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let want: [(&str, &[&str], &str); 6] = [
        (
            "+0.000000 ms",
            &["packet MsgSeqNum 1 on incremental line A", "first seen: SecurityID 1001", "entries RptSeq 1, 2", "book published at the end of event in MsgSeqNum 1: bid 5000.00 x 10, ask 5000.25 x 10", "status 17 (trading) (in force when first seen)   "],
            "no_quote -> ok",
        ),
        (
            "+2.000000 ms",
            &["packet gap opened: MsgSeqNum 3 missing", "entries RptSeq 4", "RptSeq hole: expected 3, 1 missing", "1 entry cached"],
            "ok -> suspect",
        ),
        ("+7.000001 ms", &["packet gap given up: 1 packet lost; every instrument unverified"], "suspect (unchanged)"),
        (
            "+20.000000 ms",
            &["on snapshot line A", "snapshot applied: RptSeq 4, after MsgSeqNum 4", "1 RptSeq value skipped for good", "healed", "book published by the snapshot: bid 5000.10 x 3, ask 5000.20 x 4"],
            "suspect -> ok",
        ),
        ("+30.000000 ms", &["status 2 (halted) (SecurityStatus of its group)"], "ok -> halted"),
        // Both thresholds crossed in one nanosecond: both told.
        ("+32030.000001 ms", &["silence: no gap-free incremental packet since +30.000000 ms", "; source age: the channel's latest complete source time, +30.000000 ms"], "halted -> stale|stale_at_source|halted"),
    ];
    assert_eq!(lines.len(), 1 + want.len(), "{text}");
    assert!(
        lines[0].starts_with("# cme ESZ6: mdp3 feed, stale after 32000 ms"),
        "{text}"
    );
    for (line, (at, parts, turn)) in lines[1..].iter().zip(want) {
        assert!(line.contains(&format!(" {at}  ")), "{line}");
        for p in parts {
            assert!(line.contains(p), "{p:?} not in {line}");
        }
        assert!(line.ends_with(turn), "{line}");
    }
    // --at: the reasons with the steps that set them.
    let out = replay_in(dir.path())
        .args(["--explain", "cme", "#1002", "--at", "1767623400010000000"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("cme #1002 at 2026-01-05T14:30:00.010000000Z (+10.000000 ms): suspect\n"),
        "{text}"
    );
    assert!(
        text.contains("  suspect         2026-01-05T14:30:00.007000001Z"),
        "{text}"
    );
    assert!(
        text.contains("RptSeq 2, suspect false, unverified true"),
        "{text}"
    );
    assert!(!text.contains("note:"), "{text}");
}
