//! The MDP3 contract, rule by rule: each test holds one sentence of spec
//! mdp3 (§1–§6, and §9's clarifications, which take precedence over them)
//! or a small group, quotes it in its doc comment with its section, and
//! fails if that rule breaks. `docs/mdp3-coverage.md` maps every
//! rule-bearing sentence to the tests that hold it: these, the unit tests
//! beside the implementation (`crates/engine/src/protocol/mdp3/`), and the
//! other MDP3 integration tests.
//!
//! Most tests build a capture of one channel with `encode`, replay it
//! with `tickguard::replay::replay` and read the answers and the summary;
//! a few read the channel itself (`Feed`) or run the command line.

use assert_cmd::Command;
use serde_json::{json, Value};
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tickguard::capture::link::Link;
use tickguard::capture::write::{CaptureWriter, Format};
use tickguard::capture::CaptureReader;
use tickguard::clock::OffsetMode;
use tickguard::config::{Config, ProtocolSettings};
use tickguard::explain::mdp3::Mdp3Explain;
use tickguard::protocol::mdp3::config::SnapshotJoin;
use tickguard::protocol::mdp3::encode::{
    self, BookEntry, FeedType, Len, Shape, SnapshotEntry, SnapshotRoot,
};
use tickguard::protocol::mdp3::feed::{Feed, Settings};
use tickguard::protocol::mdp3::sequence;
use tickguard::protocol::mdp3::template::{EntryType, UpdateAction};
use tickguard::replay::{answer_json, replay, replay_with, Check};

const MS: u64 = 1_000_000;
/// 2026-01-05 14:30:00 UTC, ns since the Unix epoch.
const T0: u64 = 1_767_623_400_000_000_000;
const V: Shape = Shape::new(13);
const EOE: u8 = 0x80;

/// Incremental lines A and B, snapshot lines, definition lines.
const A: &str = "239.3.1.1:14310";
const B: &str = "239.3.1.2:15310";
const SNAP_A: &str = "239.3.1.3:14311";
const SNAP_B: &str = "239.3.1.4:15311";
const DEF_A: &str = "239.3.1.5:14312";
const DEF_B: &str = "239.3.1.6:15312";

use EntryType::{Bid, ImpliedBid, ImpliedOffer, Offer};
use UpdateAction::{Change, Delete, New, Overlay};

// ---------------------------------------------------------------------------
// Messages and packets

/// An incremental packet `s` of `messages`, sent at T0.
fn packet(s: u32, messages: &[Vec<u8>]) -> Vec<u8> {
    encode::packet(s, T0, messages)
}

/// A 46 of `entries`, TransactTime `tt`.
fn book_at(tt: u64, mei: u8, entries: &[BookEntry]) -> Vec<u8> {
    encode::book(46, V, tt, mei, entries, 0)
}

/// A 46 of `entries`, TransactTime T0.
fn book(mei: u8, entries: &[BookEntry]) -> Vec<u8> {
    book_at(T0, mei, entries)
}

/// Packet `s`: one 46 of `entries` ending its event.
fn event(s: u32, entries: &[BookEntry]) -> Vec<u8> {
    packet(s, &[book(EOE, entries)])
}

/// Packet `s`: one AdminHeartbeat.
fn heartbeat(s: u32) -> Vec<u8> {
    packet(s, &[encode::heartbeat(V)])
}

/// A level update: size 10, 2 orders.
fn entry(id: i32, rpt: u32, action: UpdateAction, side: EntryType, n: u8, price: i64) -> BookEntry {
    BookEntry {
        price: Some(price),
        size: Some(10),
        security_id: id,
        rpt_seq: rpt,
        orders: Some(2),
        level: n,
        action,
        entry_type: side,
    }
}

/// A New bid at level 1.
fn bid(id: i32, rpt: u32, price: i64) -> BookEntry {
    entry(id, rpt, New, Bid, 1, price)
}

/// A New offer at level 1.
fn offer(id: i32, rpt: u32, price: i64) -> BookEntry {
    entry(id, rpt, New, Offer, 1, price)
}

/// A Change of the bid at level 1.
fn change(id: i32, rpt: u32, price: i64) -> BookEntry {
    entry(id, rpt, Change, Bid, 1, price)
}

/// A SecurityStatus of TransactTime `tt` (no end of event).
fn status_at(tt: u64, id: Option<i32>, group: &str, asset: &str, code: u8) -> Vec<u8> {
    let s = encode::Status {
        transact_time: tt,
        security_group: group,
        asset,
        security_id: id,
        match_event_indicator: 0,
        trading_status: Some(code),
    };
    encode::security_status(V, &s)
}

/// A SecurityStatus of TransactTime T0 (no end of event).
fn status(id: Option<i32>, group: &str, asset: &str, code: u8) -> Vec<u8> {
    status_at(T0, id, group, asset, code)
}

/// A 52 of instrument `id` at RptSeq `rpt`, taken after incremental
/// packet `last`, its instrument's last event at T0.
fn snapshot(
    last: u32,
    id: i32,
    rpt: u32,
    status: Option<u8>,
    entries: &[SnapshotEntry],
) -> Vec<u8> {
    snapshot_at(T0, last, id, rpt, status, entries)
}

/// [`snapshot`] with its instrument's last event at `tt`.
fn snapshot_at(
    tt: u64,
    last: u32,
    id: i32,
    rpt: u32,
    status: Option<u8>,
    entries: &[SnapshotEntry],
) -> Vec<u8> {
    let root = SnapshotRoot {
        last_msg_seq_num_processed: last,
        tot_num_reports: 1,
        security_id: id,
        rpt_seq: rpt,
        transact_time: tt,
        trading_status: status,
    };
    encode::snapshot(52, V, &root, entries)
}

/// A snapshot entry: size 3, 1 order.
fn level(side: EntryType, n: u8, price: i64) -> SnapshotEntry {
    SnapshotEntry {
        price: Some(price),
        size: Some(3),
        orders: Some(1),
        level: Some(n),
        entry_type: side,
    }
}

/// A snapshot packet (MsgSeqNum 1, as each loop starts) of `messages`.
fn snapshots(messages: &[Vec<u8>]) -> Vec<u8> {
    encode::packet(1, T0, messages)
}

/// A definition: a future (54), added, no status, GBX 10 and GBI 2.
#[derive(Clone, Copy)]
struct Def {
    template: u16,
    id: i32,
    symbol: &'static str,
    group: &'static str,
    asset: &'static str,
    action: u8,
    status: Option<u8>,
    feeds: &'static [(&'static str, i8)],
    tick: Option<i64>,
}

fn def(id: i32, symbol: &'static str, group: &'static str, asset: &'static str) -> Def {
    Def {
        template: 54,
        id,
        symbol,
        group,
        asset,
        action: b'A',
        status: None,
        feeds: &[("GBX", 10), ("GBI", 2)],
        tick: Some(250_000_000),
    }
}

impl Def {
    fn message(&self) -> Vec<u8> {
        let d = encode::Instrument {
            match_event_indicator: 0,
            tot_num_reports: Some(1),
            security_update_action: self.action,
            trading_status: self.status,
            appl_id: 310,
            security_group: self.group,
            asset: self.asset,
            symbol: self.symbol,
            security_id: self.id,
            min_price_increment: self.tick,
            display_factor: 1_000_000_000,
        };
        let feeds: Vec<FeedType> = self
            .feeds
            .iter()
            .map(|&(md_feed_type, market_depth)| FeedType {
                md_feed_type,
                market_depth,
            })
            .collect();
        encode::definition(self.template, V, &d, 0, &feeds)
    }

    /// A definition packet of this one alone.
    fn packet(&self) -> Vec<u8> {
        encode::packet(1, T0, &[self.message()])
    }
}

// ---------------------------------------------------------------------------
// A channel, replayed

/// A capture of one channel (feed `cme`), its configuration and checks;
/// times are ns after T0.
#[derive(Clone, Default)]
struct Channel {
    /// The feed's keys beyond the base ones (which they replace), then
    /// any `[[feed.symbol]]` tables.
    keys: String,
    /// (time, destination, payload, TCP).
    frames: Vec<(u64, SocketAddrV4, Vec<u8>, bool)>,
    /// The `definitions` file's datagrams (pcapng), if any.
    definitions: Vec<(SocketAddrV4, Vec<u8>)>,
    checks: Vec<(u64, String)>,
    /// Frames written in the order sent, not sorted by time (capture
    /// time stepping back, as two interfaces' merged captures show it).
    as_sent: bool,
}

fn addr(s: &str) -> SocketAddrV4 {
    s.parse().unwrap()
}

impl Channel {
    fn new(keys: &str) -> Channel {
        Channel {
            keys: keys.to_string(),
            ..Channel::default()
        }
    }

    /// A UDP datagram to `dst` arriving at `t`.
    fn send(&mut self, t: u64, dst: &str, payload: Vec<u8>) {
        self.frames.push((t, addr(dst), payload, false));
    }

    /// A TCP segment to `dst` arriving at `t`.
    fn segment(&mut self, t: u64, dst: &str, payload: Vec<u8>) {
        self.frames.push((t, addr(dst), payload, true));
    }

    /// A check of `name` at `t`; returns its index among the answers.
    fn check(&mut self, t: u64, name: &str) -> usize {
        self.checks.push((t, name.to_string()));
        self.checks.len() - 1
    }

    /// The configuration: every service on two lines, thresholds of a
    /// second, no clock offset, gaps given up after 5 ms, unless `keys`
    /// says otherwise.
    fn config(&self) -> String {
        let mut text = format!(
            "[[feed]]\nname = \"cme\"\nprotocol = \"mdp3\"\nlines = [\"{A}\", \"{B}\"]\n\
             snapshot_lines = [\"{SNAP_A}\", \"{SNAP_B}\"]\n\
             definition_lines = [\"{DEF_A}\", \"{DEF_B}\"]\n"
        );
        for (key, value) in [
            ("stale_threshold_ms", "1000"),
            ("source_threshold_ms", "1000"),
            ("clock_offset", "0"),
            ("gap_timeout_ms", "5"),
        ] {
            let own = self.keys.split("[[").next().unwrap_or_default();
            if !own.lines().any(|l| l.starts_with(key)) {
                text.push_str(&format!("{key} = {value}\n"));
            }
        }
        if !self.definitions.is_empty() {
            text.push_str("definitions = \"defs.pcapng\"\n");
        }
        text.push_str(&self.keys);
        text
    }

    /// Writes `cme.pcap`, `cme.toml` (and `defs.pcapng`) into `dir`;
    /// returns the configuration's path.
    fn write(&self, dir: &Path) -> PathBuf {
        let src = addr("10.3.3.3:5000");
        let mut frames = self.frames.clone();
        if !self.as_sent {
            frames.sort_by_key(|f| f.0);
        }
        let file = std::fs::File::create(dir.join("cme.pcap")).unwrap();
        let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::Ethernet).unwrap();
        for (t, dst, payload, tcp) in &frames {
            match tcp {
                false => w.write_udp(T0 + t, src, *dst, payload).unwrap(),
                true => w.write_tcp(T0 + t, src, *dst, 1, 0x18, payload).unwrap(),
            }
        }
        w.finish().unwrap();
        if !self.definitions.is_empty() {
            let file = std::fs::File::create(dir.join("defs.pcapng")).unwrap();
            let format = Format::PcapNg { tsresol: 9 };
            let mut w = CaptureWriter::new(file, format, Link::Ethernet).unwrap();
            for (dst, payload) in &self.definitions {
                w.write_udp(T0, src, *dst, payload).unwrap();
            }
            w.finish().unwrap();
        }
        let path = dir.join("cme.toml");
        std::fs::write(&path, self.config()).unwrap();
        path
    }

    /// Replays the capture with the checks.
    fn run(&self) -> Out {
        self.run_explaining(None).0
    }

    /// Replays the capture with the checks, explaining instrument `name`
    /// when given: the outcome, and the explanation (`--explain-all`'s).
    /// [`run`](Self::run), explaining `name`: the outcome and the whole
    /// explanation.
    fn explain(&self, name: &str) -> (Out, String) {
        let (out, text) = self.run_explaining(Some(name));
        (out, text.expect("an explanation"))
    }

    fn run_explaining(&self, name: Option<&str>) -> (Out, Option<String>) {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::load(&self.write(dir.path())).unwrap();
        let checks: Vec<Check> = self
            .checks
            .iter()
            .map(|(t, name)| Check {
                time_ns: T0 + t,
                feed: "cme".into(),
                symbol: name.clone(),
            })
            .collect();
        let mut capture = CaptureReader::open(&dir.path().join("cme.pcap")).unwrap();
        let (outcome, explained) = match name {
            None => (replay(&config, &mut capture, &checks, |_| {}), None),
            Some(name) => {
                let mut x = Mdp3Explain::new(0, &config.feeds[0], name, None);
                let outcome = replay_with(&config, &mut capture, &checks, |_| {}, &mut x);
                // What the steps imply is what the replay answered, at
                // every check of the instrument explained.
                for (c, a) in checks.iter().zip(&outcome.answers) {
                    if c.symbol == name {
                        assert_eq!(
                            x.verdict_at(c.time_ns),
                            a.reasons,
                            "{name} at {} ns",
                            c.time_ns - T0
                        );
                    }
                }
                (outcome, Some(x.explanation(true)))
            }
        };
        assert!(outcome.input_error.is_none(), "{:?}", outcome.input_error);
        let out = Out {
            lines: checks
                .iter()
                .zip(&outcome.answers)
                .map(|(c, a)| answer_json(c, *a))
                .collect(),
            summary: serde_json::to_value(&outcome.summary).unwrap(),
        };
        (out, explained)
    }

    /// Replays the capture through the command line, logging at `warn`;
    /// returns its stderr.
    fn stderr(&self) -> String {
        let dir = tempfile::tempdir().unwrap();
        self.write(dir.path());
        let out = Command::cargo_bin("tickguard")
            .unwrap()
            .current_dir(dir.path())
            .args([
                "replay",
                "cme.pcap",
                "--config",
                "cme.toml",
                "--no-progress",
            ])
            .env("RUST_LOG", "warn")
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(out.status.success(), "{stderr}");
        stderr
    }
}

/// What a replay gave: the answer lines and the summary.
struct Out {
    lines: Vec<String>,
    summary: Value,
}

impl Out {
    fn answer(&self, i: usize) -> Value {
        serde_json::from_str(&self.lines[i]).unwrap()
    }

    fn reasons(&self, i: usize) -> Vec<String> {
        let a = self.answer(i);
        let names = a["reasons"].as_array().unwrap();
        names
            .iter()
            .map(|r| r.as_str().unwrap().to_string())
            .collect()
    }

    /// The answer's visible outright best bid and ask (`None` when absent).
    fn top(&self, i: usize) -> (Option<i64>, Option<i64>) {
        let a = self.answer(i);
        (
            a.get("bid").map(|v| v.as_i64().unwrap()),
            a.get("ask").map(|v| v.as_i64().unwrap()),
        )
    }

    fn feed(&self) -> &Value {
        &self.summary["feeds"]["cme"]
    }

    /// Instrument `id` in the summary.
    fn sym(&self, id: i32) -> &Value {
        &self.feed()["symbols"][format!("#{id}")]
    }
}

/// Each key of `want` has its value in `v`.
fn has(v: &Value, want: Value) {
    for (key, value) in want.as_object().unwrap() {
        assert_eq!(v.get(key), Some(value), "{key} of {v}");
    }
}

/// Reasons, as written in an answer.
fn r(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

fn ok() -> Vec<String> {
    Vec::new()
}

// ---------------------------------------------------------------------------
// §1 Transport and framing

/// "Each of its services comes as feed A and feed B carrying the same
/// packets: `lines` (incremental, required), `snapshot_lines` (market
/// recovery), `definition_lines` (instrument definition)" (spec mdp3 §1):
/// what comes on line B alone of each service is read.
#[test]
fn each_service_is_read_on_its_line_b() {
    let mut ch = Channel::new("");
    ch.send(0, DEF_B, def(7, "ESZ6", "ES", "ES").packet());
    ch.send(MS, B, event(1, &[bid(7, 1, 100), offer(7, 2, 101)]));
    let snap = snapshot(1, 8, 3, None, &[level(Bid, 1, 50), level(Offer, 1, 51)]);
    ch.send(2 * MS, SNAP_B, snapshots(&[snap]));
    let es = ch.check(3 * MS, "ESZ6");
    let other = ch.check(3 * MS, "#8");
    let out = ch.run();
    assert_eq!(
        (out.reasons(es), out.top(es)),
        (ok(), (Some(100), Some(101)))
    );
    assert_eq!(
        (out.reasons(other), out.top(other)),
        (ok(), (Some(50), Some(51)))
    );
    let f = out.feed();
    has(f, json!({"packets": 3, "next": 2}));
    has(f, json!({"definitions": 1, "snapshots_applied": 1}));
}

/// "MsgSeqNum | u32, +1 per packet, per channel and service" (spec mdp3
/// §1); the snapshot loop's "MsgSeqNum restarts at 1 each loop. Snapshot
/// datagrams are not arbitrated: each message is judged alone (a second
/// copy is harmless)" (§3.5); "definition packets are not sequenced"
/// (§3.7): the other services' numbers never touch the incremental
/// sequence, and repeat freely.
#[test]
fn each_service_has_its_own_sequence() {
    let mut ch = Channel::new("");
    ch.send(
        0,
        DEF_A,
        encode::packet(9, T0, &[def(1, "ESZ6", "ES", "ES").message()]),
    );
    ch.send(
        0,
        DEF_A,
        encode::packet(9, T0, &[def(2, "NQZ6", "NQ", "NQ").message()]),
    );
    ch.send(
        0,
        DEF_B,
        encode::packet(1, T0, &[def(3, "RTYZ6", "RTY", "RTY").message()]),
    );
    ch.send(0, A, event(100, &[bid(1, 1, 100)]));
    let first = snapshots(&[snapshot(100, 2, 5, None, &[level(Bid, 1, 200)])]);
    ch.send(MS, SNAP_A, first.clone());
    ch.send(
        2 * MS,
        SNAP_A,
        snapshots(&[snapshot(100, 3, 6, None, &[level(Bid, 1, 300)])]),
    );
    ch.send(3 * MS, SNAP_B, first);
    ch.send(4 * MS, A, event(101, &[change(1, 2, 101)]));
    let checks =
        [("ESZ6", 101), ("NQZ6", 200), ("RTYZ6", 300)].map(|(n, p)| (ch.check(5 * MS, n), p));
    let out = ch.run();
    for (i, price) in checks {
        assert_eq!(
            (out.reasons(i), out.top(i).0),
            (ok(), Some(price)),
            "{}",
            out.lines[i]
        );
    }
    let f = out.feed();
    has(
        f,
        json!({
            "next": 102,
            "packet_gaps": 0,
            "duplicates": 0,
            "snapshot_packets": 3,
            "snapshots_applied": 2,
            "snapshots_ignored": 1,
            "definitions": 3,
        }),
    );
}

/// The six reasons of "Packet validity (all or nothing)": "Rejected whole
/// (counted by reason, rate-limited log, nothing applied, never a
/// crash)" (spec mdp3 §1): each datagram's valid first message, on any
/// service, applies nothing.
#[test]
fn a_rejected_datagram_is_counted_by_reason_and_applies_nothing() {
    let good = || book(EOE, &[bid(1, 1, 100)]);
    let set = |mut m: Vec<u8>, at: usize, v: u16| {
        m[at..at + 2].copy_from_slice(&v.to_le_bytes());
        m
    };
    let other_schema = set(encode::heartbeat(V), 6, 2);
    let old_version = set(encode::heartbeat(V), 8, 8);
    let short_root = encode::book(46, V.root(Len::Exactly(8)), T0, EOE, &[bid(1, 1, 100)], 0);
    let mut cut = good();
    cut.pop();
    let cut = set(cut.clone(), 0, cut.len() as u16);
    let mut left_over = event(1, &[bid(1, 1, 100)]);
    left_over.push(0);
    let mut ch = Channel::new("");
    ch.send(0, A, b"short".to_vec());
    // "or no message": a header alone, of the next MsgSeqNum.
    ch.send(0, A, encode::packet(1, T0, &[]));
    ch.send(MS, A, left_over);
    ch.send(2 * MS, A, packet(2, &[good(), other_schema.clone()]));
    ch.send(3 * MS, A, packet(3, &[good(), old_version]));
    ch.send(4 * MS, A, packet(4, &[good(), short_root]));
    ch.send(5 * MS, A, packet(5, &[good(), cut]));
    let snap = snapshot(1, 1, 1, None, &[level(Bid, 1, 100)]);
    ch.send(6 * MS, SNAP_A, snapshots(&[snap, other_schema.clone()]));
    let d = def(1, "ESZ6", "ES", "ES").message();
    ch.send(7 * MS, DEF_A, encode::packet(1, T0, &[d, other_schema]));
    let by_id = ch.check(8 * MS, "#1");
    let by_symbol = ch.check(8 * MS, "ESZ6");
    let out = ch.run();
    for i in [by_id, by_symbol] {
        assert_eq!(out.reasons(i), r(&["no_quote"]));
        assert_eq!(out.answer(i)["security_id"], Value::Null);
    }
    let f = out.feed();
    has(f, json!({"packets": 9, "rejected": 9}));
    let by_reason = json!({
        "short": 2, "bad_size": 1, "bad_schema": 3,
        "old_version": 1, "short_block": 1, "bad_group": 1,
    });
    assert_eq!(f["rejected_by_reason"], by_reason);
    has(
        f,
        json!({
            "messages": 0,
            "next": null,
            "snapshot_packets": 0,
            "definitions": 0,
            "symbols": {},
        }),
    );
}

/// "Rejected whole (counted by reason, rate-limited log, …)" (spec mdp3
/// §1): twenty malformed datagrams over forty seconds log a few lines,
/// then one line counting them by reason.
#[test]
fn rejected_datagrams_log_a_few_lines_then_are_counted() {
    let mut ch = Channel::new("");
    ch.send(0, A, heartbeat(1));
    for i in 0..20 {
        ch.send((1 + 2_000 * i) * MS, A, b"not mdp3".to_vec());
    }
    let stderr = ch.stderr();
    let logged = stderr.matches("rejected malformed packet").count();
    assert!((1..=3).contains(&logged), "{stderr}");
    assert!(
        stderr.contains("feed 'cme': 20 of 21 packets rejected (short 20)"),
        "{stderr}"
    );
}

/// "Odd values (unknown MDUpdateAction or MDEntryType, null price or size
/// on a level update, unlisted status) are not rejections: the entry keeps
/// its RptSeq place, changes nothing else, counts in `anomalies`"
/// (spec mdp3 §1); "other → unchanged, `anomalies`" (§3.6).
#[test]
fn odd_values_keep_their_place_change_nothing_and_are_anomalies() {
    let mut ch = Channel::new("");
    ch.send(
        0,
        A,
        packet(
            1,
            &[
                book(EOE, &[bid(1, 1, 100), offer(1, 2, 110)]),
                status(Some(1), "", "", 17),
            ],
        ),
    );
    let no_price = BookEntry {
        price: None,
        ..bid(1, 5, 90)
    };
    let no_size = BookEntry {
        size: None,
        ..entry(1, 6, Change, Offer, 1, 111)
    };
    let delete_no_price = BookEntry {
        price: None,
        size: None,
        ..entry(1, 7, Delete, Offer, 2, 0)
    };
    let odd = [
        entry(1, 3, UpdateAction::Unknown(9), Bid, 1, 50),
        entry(1, 4, New, EntryType::Other(b'Z'), 1, 50),
        no_price,
        no_size,
        delete_no_price,
    ];
    ch.send(
        MS,
        A,
        packet(2, &[book(EOE, &odd), status(Some(1), "", "", 99)]),
    );
    ch.send(2 * MS, A, event(3, &[change(1, 8, 101)]));
    // A New or Overlay without a size, and the same in a 64 (LongQty): odd
    // too, as the decisions page says.
    let no_size_new = BookEntry {
        size: None,
        ..entry(1, 9, New, Bid, 2, 95)
    };
    let no_size_overlay = BookEntry {
        size: None,
        ..entry(1, 10, Overlay, Offer, 1, 105)
    };
    ch.send(3 * MS, A, event(4, &[no_size_new, no_size_overlay]));
    let long = BookEntry {
        size: None,
        ..entry(1, 11, Change, Bid, 1, 99)
    };
    ch.send(
        4 * MS,
        A,
        packet(5, &[encode::book(64, V, T0, EOE, &[long], 0)]),
    );
    let c = ch.check(5 * MS, "#1");
    let out = ch.run();
    assert_eq!((out.reasons(c), out.top(c)), (ok(), (Some(101), Some(110))));
    let f = out.feed();
    has(f, json!({"rejected": 0, "anomalies": 8}));
    let i = out.sym(1);
    has(i, json!({"rpt_seq": 11, "suspect": false}));
    has(i, json!({"ask_size": 10, "trading_status": 17}));
}

// ---------------------------------------------------------------------------
// §2 Templates read

/// "Skipped, counted: 47, 53 (market by order, `mbo_messages`), 39,
/// 59–62, 68, 15, 16" and "46, 64, 48, 65 have a second group,
/// NoOrderIDEntries (`groupSize8Byte`): MBO detail, not read, its entries
/// counted (`mbo_order_entries`)" (spec mdp3 §2); "An unknown templateId
/// is skipped by MsgSize (`unknown_templates`)" (§1).
#[test]
fn skipped_templates_are_counted_and_mbo_detail_only_counted() {
    let skipped = [47u16, 53, 39, 59, 60, 61, 62, 68, 15, 16];
    let mut messages: Vec<Vec<u8>> = skipped
        .iter()
        .chain(&[999, 5])
        .map(|&id| encode::raw(id, 13, &[1; 11], &[0xff; 7]))
        .collect();
    messages.push(encode::book(46, V, T0, 0, &[bid(1, 1, 100)], 3));
    messages.push(encode::book(64, V, T0, 0, &[offer(1, 2, 110)], 1));
    messages.push(encode::statistics(48, V, T0, 0, &[(1, 3)], 2));
    messages.push(encode::statistics(65, V, T0, EOE, &[(1, 4)], 4));
    let mut ch = Channel::new("");
    ch.send(0, A, packet(1, &messages));
    let c = ch.check(MS, "#1");
    let out = ch.run();
    assert_eq!((out.reasons(c), out.top(c)), (ok(), (Some(100), Some(110))));
    let f = out.feed();
    has(f, json!({"mbo_messages": 2, "mbo_order_entries": 10}));
    has(f, json!({"unknown_templates": 2, "messages": 16}));
    let mut by_template: Vec<String> = skipped
        .iter()
        .chain(&[46, 64, 48, 65])
        .map(u16::to_string)
        .collect();
    by_template.sort();
    let counted = f["messages_by_template"].as_object().unwrap();
    assert_eq!(counted.keys().cloned().collect::<Vec<_>>(), by_template);
    assert!(counted.values().all(|n| n == 1), "{counted:?}");
    assert_eq!(out.sym(1)["rpt_seq"], 4);
}

/// "An unknown templateId is skipped by MsgSize (`unknown_templates`)"
/// (spec mdp3 §1) and 53 is "skipped, counted" in `mbo_messages` (§2) on
/// every service: the snapshot and definition lines count them too.
#[test]
fn unknown_and_mbo_templates_are_counted_on_every_service() {
    let unknown = || encode::raw(999, 13, &[1; 11], &[0xff; 7]);
    let mbo = || encode::raw(53, 13, &[1; 11], &[0xff; 7]);
    let mut ch = Channel::new("");
    let snap = [
        unknown(),
        mbo(),
        snapshot(1, 9, 3, None, &[level(Bid, 1, 100)]),
    ];
    ch.send(0, SNAP_A, snapshots(&snap));
    let def = encode::packet(1, T0, &[unknown(), def(9, "ESZ6", "ES", "ES").message()]);
    ch.send(MS, DEF_A, def);
    let c = ch.check(2 * MS, "ESZ6");
    let out = ch.run();
    assert_eq!(out.top(c), (Some(100), None));
    has(
        out.feed(),
        json!({"unknown_templates": 2, "mbo_messages": 1, "snapshots_applied": 1, "definitions": 1}),
    );
}

/// "Each JSON line adds `security_id` (null if unresolved)" (spec mdp3
/// §4): a name no instrument can have (a space, too long, empty) too.
#[test]
fn every_answer_has_a_security_id_key() {
    let mut ch = Channel::new("");
    // A Symbol with a space maps to #1, and names it (an option's holds
    // one); a name of 21 characters or a padded SecurityID names nothing.
    ch.send(0, DEF_A, def(1, "ES Z6", "ES", "ES").packet());
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    let names = ["#1", "ESZ6", "ES Z6", "ABCDEFGHIJKLMNOPQRSTU", "#01"];
    let c = names.map(|n| ch.check(MS, n));
    let out = ch.run();
    let ids: Vec<Option<Value>> = c
        .iter()
        .map(|&i| out.answer(i).get("security_id").cloned())
        .collect();
    assert_eq!(
        ids,
        [
            Some(json!(1)),
            Some(Value::Null),
            Some(json!(1)),
            Some(Value::Null),
            Some(Value::Null)
        ]
    );
}

/// `last_transact_time` is "of the last applied entry" (spec mdp3 §5):
/// a trade's entry (48) counts as a book entry does, and so does a book
/// entry applied in order on a healthy instrument (the usual one); an
/// entry cached behind a hole does not, until it applies.
#[test]
fn the_last_transact_time_is_the_last_applied_entrys() {
    let mut ch = Channel::new("");
    let trade = encode::statistics(48, V, T0 + 2 * MS, EOE, &[(1, 2)], 0);
    ch.send(
        0,
        A,
        packet(1, &[book_at(T0 + MS, 0, &[bid(1, 1, 100)]), trade]),
    );
    let after_trade = ch.check(3 * MS, "#1");
    let base = ch.clone();
    // RptSeq 4 cached (3 missing) at a later TransactTime.
    ch.send(
        4 * MS,
        A,
        packet(2, &[book_at(T0 + 4 * MS, EOE, &[change(1, 4, 104)])]),
    );
    let out = ch.run();
    assert_eq!(out.reasons(after_trade), ok());
    assert_eq!(out.sym(1)["last_transact_time"], T0 + 2 * MS);
    // RptSeq 3 in order, then 5 cached (4 missing).
    let mut ch = base;
    ch.send(
        4 * MS,
        A,
        packet(2, &[book_at(T0 + 3 * MS, EOE, &[change(1, 3, 103)])]),
    );
    ch.send(
        5 * MS,
        A,
        packet(3, &[book_at(T0 + 5 * MS, EOE, &[change(1, 5, 105)])]),
    );
    let out = ch.run();
    assert_eq!(out.sym(1)["last_transact_time"], T0 + 3 * MS);
}

/// The summary's `missing`: the RptSeq values in `(rpt_seq, high_seen]`
/// neither applied nor cached (spec mdp3 §3.2), not the cached count.
#[test]
fn missing_counts_the_values_neither_applied_nor_cached() {
    let mut ch = Channel::new("");
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    ch.send(MS, A, event(2, &[change(1, 4, 104)]));
    let out = ch.run();
    has(
        out.sym(1),
        json!({"rpt_seq": 1, "cached": 1, "missing": 2, "suspect": true}),
    );
}

/// "RptSeq counts all of an instrument's entries, whatever the template"
/// over the entries of "46, 64, 48, 65, 37, 66, 49, 50, 51, 67"
/// (spec mdp3 §3.2), read at the offsets of §2's table; "Only applied 46/64
/// entries change the working books" (§3.3).
#[test]
fn every_template_with_entries_takes_the_instruments_next_rpt_seq() {
    let mut messages = vec![
        encode::book(46, V, T0, 0, &[bid(1, 1, 100)], 0),
        encode::book(64, V, T0, 0, &[offer(1, 2, 110)], 0),
    ];
    for (k, id) in [48u16, 65, 37, 66, 49, 50, 51, 67].into_iter().enumerate() {
        let mei = if id == 67 { EOE } else { 0 };
        messages.push(encode::statistics(id, V, T0, mei, &[(1, 3 + k as u32)], 0));
    }
    let mut ch = Channel::new("");
    ch.send(0, A, packet(1, &messages));
    ch.send(MS, A, event(2, &[change(1, 11, 101)]));
    let c = ch.check(2 * MS, "#1");
    let out = ch.run();
    assert_eq!((out.reasons(c), out.top(c)), (ok(), (Some(101), Some(110))));
    let i = out.sym(1);
    has(i, json!({"rpt_seq": 11, "missing": 0, "suspect": false}));
}

/// The entries of one message are taken in their order: with nothing
/// cached (`max_cached = 0`), RptSeq 2 then 3 in one message apply as the
/// instrument's next values, and the later one is the book's.
#[test]
fn the_entries_of_a_message_apply_in_their_order() {
    let mut ch = Channel::new("max_cached = 0\n");
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    ch.send(MS, A, event(2, &[change(1, 2, 101), change(1, 3, 102)]));
    let one = ch.check(2 * MS, "#1");
    let out = ch.run();
    assert_eq!((out.reasons(one), out.top(one).0), (ok(), Some(102)));
    has(out.feed(), json!({"cache_overflows": 0, "ticks_lost": 0}));
    has(out.sym(1), json!({"rpt_seq": 3, "overflowed": false}));
}

/// "Prices stay mantissas, compared as signed integers, never floats
/// (negative prices are valid)" (spec mdp3 §2); `bid`, `ask`: "JSON
/// integers (raw wire values as in itch50-v1; they may exceed 2^53)"
/// (§4).
#[test]
fn prices_are_signed_integer_mantissas() {
    const BIG: i64 = 1 << 53;
    let mut ch = Channel::new("");
    ch.send(
        0,
        A,
        event(
            1,
            &[
                // Equal as doubles: a float would call this locked.
                bid(1, 1, BIG + 1),
                offer(1, 2, BIG),
                bid(2, 1, -2_000_000_000),
                offer(2, 2, -1_000_000_000),
                bid(3, 1, -1_000_000_000),
                offer(3, 2, -2_000_000_000),
                bid(4, 1, i64::MAX - 1),
                offer(4, 2, i64::MAX - 1),
                // Mixed signs: as unsigned, -1 would be above 1.
                bid(5, 1, -1),
                offer(5, 2, 1),
                bid(6, 1, 1),
                offer(6, 2, -1),
            ],
        ),
    );
    let c: Vec<usize> = (1..=6).map(|id| ch.check(MS, &format!("#{id}"))).collect();
    let out = ch.run();
    assert_eq!(out.reasons(c[0]), r(&["invalid_price"]));
    assert!(
        out.lines[c[0]].ends_with(r#""bid":9007199254740993,"ask":9007199254740992}"#),
        "{}",
        out.lines[c[0]]
    );
    assert_eq!(
        (out.reasons(c[1]), out.top(c[1])),
        (ok(), (Some(-2_000_000_000), Some(-1_000_000_000)))
    );
    assert_eq!(out.reasons(c[2]), r(&["invalid_price"]));
    assert_eq!(out.reasons(c[3]), ok(), "locked");
    assert!(
        out.lines[c[3]].ends_with(r#""bid":9223372036854775806,"ask":9223372036854775806}"#),
        "{}",
        out.lines[c[3]]
    );
    assert_eq!(out.reasons(c[4]), ok(), "bid -1 below ask 1");
    assert_eq!(
        out.reasons(c[5]),
        r(&["invalid_price"]),
        "bid 1 above ask -1"
    );
}

/// MDEntryType "`w`/`x` market best offer/bid (v12+, no book change)"
/// (spec mdp3 §2): they take their RptSeq place and change no book.
#[test]
fn market_best_entries_take_their_place_and_change_no_book() {
    let mut ch = Channel::new("");
    ch.send(0, A, event(1, &[bid(1, 1, 100), offer(1, 2, 110)]));
    ch.send(
        MS,
        A,
        event(
            2,
            &[
                entry(1, 3, New, EntryType::MarketBestOffer, 1, 105),
                entry(1, 4, New, EntryType::MarketBestBid, 1, 104),
                change(1, 5, 101),
            ],
        ),
    );
    let c = ch.check(2 * MS, "#1");
    let out = ch.run();
    assert_eq!((out.reasons(c), out.top(c)), (ok(), (Some(101), Some(110))));
    assert_eq!(out.sym(1)["rpt_seq"], 5);
    assert_eq!(out.feed()["anomalies"], 0);
}

/// Definitions "come on the definition lines, in the definitions file
/// and on the incremental lines (mid-week adds)" (spec mdp3 §2); "A
/// feed's `definitions` file (pcap/pcapng; relative to the config file)
/// is read first: its UDP payloads, any address, are definition packets,
/// not counted in `packets`" (§5).
#[test]
fn definitions_come_from_the_file_the_definition_lines_and_the_incremental_lines() {
    let mut ch = Channel::new("");
    // To line A's address: still a definition packet, not MsgSeqNum 1.
    ch.definitions
        .push((addr(A), def(1, "ESZ6", "ES", "ES").packet()));
    ch.send(0, DEF_A, def(2, "NQZ6", "NQ", "NQ").packet());
    let added = def(3, "RTYZ6", "RTY", "RTY").message();
    let books = book(EOE, &[bid(1, 1, 100), bid(2, 1, 200), bid(3, 1, 300)]);
    ch.send(MS, A, packet(1, &[added, books]));
    let checks =
        [("ESZ6", 100), ("NQZ6", 200), ("RTYZ6", 300)].map(|(n, p)| (ch.check(2 * MS, n), p));
    let out = ch.run();
    for (i, price) in checks {
        assert_eq!(
            (out.reasons(i), out.top(i).0),
            (ok(), Some(price)),
            "{}",
            out.lines[i]
        );
    }
    let f = out.feed();
    has(f, json!({"packets": 2, "definitions": 3}));
    has(f, json!({"next": 2, "duplicates": 0}));
}

// ---------------------------------------------------------------------------
// §3 State

/// "Per **instrument** (SecurityID; created by the first message naming
/// it)" and "An instrument without baseline is suspect" (spec mdp3 §3).
#[test]
fn an_instrument_is_made_by_the_first_message_naming_it() {
    let mut ch = Channel::new("");
    ch.send(0, A, packet(1, &[status(Some(5), "", "", 17)]));
    ch.send(MS, A, event(2, &[bid(8, 3, 100)]));
    ch.send(
        2 * MS,
        SNAP_A,
        snapshots(&[snapshot(2, 6, 2, None, &[level(Bid, 1, 60)])]),
    );
    ch.send(3 * MS, DEF_A, def(7, "NQZ6", "NQ", "NQ").packet());
    let out = ch.run();
    let ids: Vec<&String> = out.feed()["symbols"].as_object().unwrap().keys().collect();
    assert_eq!(ids, ["#5", "#6", "#7", "#8"]);
    for id in [5, 7, 8] {
        let i = out.sym(id);
        assert_eq!(i["rpt_seq"], Value::Null, "#{id}");
        assert_eq!(i["suspect"], true, "#{id}");
    }
    assert_eq!(out.sym(8)["cached"], 1);
    has(out.sym(6), json!({"rpt_seq": 2, "suspect": false}));
}

// ---------------------------------------------------------------------------
// §3.1 Incremental packets

/// "S + `restart_margin` < `high` (the weekly reset) → §3.7 is applied"
/// (spec mdp3 §3.1), as §9.1 reads it: the weekly restart "first applies
/// the ChannelReset effects of §3.7 (books, statuses, caches, RptSeq)
/// without counting `channel_resets` and without setting
/// `reset_pending`"; after it "every instrument has `rpt_seq = 0`" and
/// "a definition's status is a definition field and is kept" (§9.3).
#[test]
fn a_weekly_restart_empties_the_channel_without_a_channel_reset() {
    let mut ch = Channel::new("restart_margin = 100\n");
    let closed = Def {
        status: Some(4),
        ..def(1, "ESZ6", "ES", "ES")
    };
    ch.send(0, DEF_A, closed.packet());
    let first = book(EOE, &[bid(1, 1, 100), offer(1, 2, 110), bid(2, 1, 50)]);
    ch.send(0, A, packet(1000, &[first, status(None, "ES", "", 17)]));
    // Instrument 2 misses RptSeq 2: 3 waits in its cache.
    ch.send(MS, A, event(1001, &[offer(2, 3, 55)]));
    // 902 + 100 = high: not below it by more than the margin.
    ch.send(2 * MS, A, heartbeat(902));
    let before = ch.check(2 * MS + MS / 2, "ESZ6");
    ch.send(3 * MS, A, heartbeat(1));
    let emptied = ch.check(3 * MS + MS / 2, "ESZ6");
    // No reset pending: 1 again is a copy, not another restart.
    ch.send(4 * MS, A, heartbeat(1));
    ch.send(5 * MS, A, event(2, &[bid(1, 1, 200), offer(1, 2, 210)]));
    let after = ch.check(5 * MS + MS / 2, "ESZ6");
    let out = ch.run();
    assert_eq!(
        (out.reasons(before), out.top(before)),
        (ok(), (Some(100), Some(110)))
    );
    assert_eq!(out.reasons(emptied), r(&["no_quote"]));
    assert_eq!(
        (out.reasons(after), out.top(after)),
        (r(&["closed"]), (Some(200), Some(210)))
    );
    // The explanation credits the emptied book to the restart.
    let text = ch.explain("ESZ6").1;
    let step = explained(&text, "packet MsgSeqNum 1 on incremental");
    assert!(
        step.contains("book emptied by the channel's restart: bid none, ask none"),
        "{text}"
    );
    let f = out.feed();
    has(
        f,
        json!({
            "channel_resets": 0,
            "sequence_restarts": 1,
            "duplicates": 2,
            "next": 3,
            "cached": 0,
            "packets_lost": 0,
        }),
    );
    let two = out.sym(2);
    has(
        two,
        json!({"rpt_seq": 0, "cached": 0, "missing": 0, "suspect": false}),
    );
    has(out.sym(1), json!({"status": "closed", "trading_status": 4}));
}

/// A packet numbered 0 (which no venue sends; a forger on the group may)
/// far below `high` is "S + `restart_margin` < `high`" (spec mdp3 §3.1)
/// like any other: the weekly restart empties the channel, and the packet
/// is then the new sequence's first, processed. Told as a duplicate
/// after the restart had dropped the open gaps, it left an instrument
/// that missed a packet `ok` on the book without it.
#[test]
fn a_packet_numbered_0_far_below_high_is_the_weekly_restart() {
    let mut ch = Channel::new("restart_margin = 100\n");
    ch.send(0, A, event(1000, &[bid(1, 1, 100), offer(1, 2, 110)]));
    // 1001 (RptSeq 3 of instrument 1, say) lost on both lines.
    ch.send(MS, A, heartbeat(1002));
    ch.send(2 * MS, A, heartbeat(0));
    let after = ch.check(2 * MS + MS / 2, "#1");
    let late = ch.check(20 * MS, "#1");
    let out = ch.run();
    assert_eq!(out.reasons(after), r(&["no_quote"]));
    assert_eq!(out.reasons(late), r(&["no_quote"]));
    has(
        out.feed(),
        json!({"sequence_restarts": 1, "duplicates": 0, "next": 1, "gaps_open": 0}),
    );
}

/// A loop taken before a weekly restart, come after it: its
/// LastMsgSeqNumProcessed, of the old numbering, is not far enough past
/// the new sequence to be told by its place (the old sequence ended just
/// past `restart_margin`), so it is told by its instrument's last event,
/// no later than the restart's sending: ignored, as one from before a
/// ChannelReset. Applied, it set an instrument of the new sequence to
/// the old book at the old RptSeq, took the new entries for duplicates
/// and answered `ok` on the old prices. One taken after the restart
/// applies.
#[test]
fn a_snapshot_from_before_a_weekly_restart_is_ignored() {
    // Also with a ChannelReset right after the restart (MsgSeqNum going
    // on): its place in the new numbering tells nothing of the old one's.
    for reset in [false, true] {
        let mut ch = Channel::new("restart_margin = 100\n");
        ch.send(0, A, event(150, &[bid(1, 1, 100)]));
        let restart = T0 + MS;
        ch.send(MS, A, encode::packet(1, restart, &[encode::heartbeat(V)]));
        let k = u32::from(reset);
        if reset {
            let tt = restart + MS / 2;
            let r = encode::channel_reset(V, tt, EOE, 310);
            ch.send(MS + MS / 2, A, encode::packet(2, tt, &[r]));
        }
        let old = snapshot_at(
            T0,
            60,
            2,
            7,
            None,
            &[level(Bid, 1, 100), level(Offer, 1, 101)],
        );
        ch.send(2 * MS, SNAP_A, snapshots(&[old]));
        let new =
            |s, tt, entries: &[BookEntry]| encode::packet(s, tt, &[book_at(tt, EOE, entries)]);
        ch.send(
            3 * MS,
            A,
            new(2 + k, restart + MS, &[bid(2, 1, 200), offer(2, 2, 201)]),
        );
        let first = ch.check(4 * MS, "#2");
        // RptSeq 3 missing: suspect, until a snapshot taken after it.
        ch.send(
            5 * MS,
            A,
            new(3 + k, restart + 3 * MS, &[change(2, 4, 199)]),
        );
        let suspect = ch.check(6 * MS, "#2");
        let fresh = snapshot_at(
            restart + 3 * MS,
            3 + k,
            2,
            4,
            None,
            &[level(Bid, 1, 199), level(Offer, 1, 201)],
        );
        ch.send(7 * MS, SNAP_A, snapshots(&[fresh]));
        let healed = ch.check(8 * MS, "#2");
        let out = ch.run();
        assert_eq!(
            (out.reasons(first), out.top(first)),
            (ok(), (Some(200), Some(201))),
            "reset {reset}"
        );
        assert_eq!(out.reasons(suspect), r(&["suspect"]), "reset {reset}");
        assert_eq!(
            (out.reasons(healed), out.top(healed)),
            (ok(), (Some(199), Some(201))),
            "reset {reset}"
        );
        has(
            out.feed(),
            json!({"sequence_restarts": 1, "snapshots_ignored": 1, "snapshots_applied": 1, "channel_resets": k}),
        );
    }
}

/// At a restart, weekly or after a ChannelReset, "gaps are dropped
/// uncounted" (spec mdp3 §3.1): nothing is lost and nobody turns
/// unverified when their deadline passes.
#[test]
fn a_restart_drops_open_gaps_uncounted() {
    let weekly = {
        let mut ch = Channel::new("restart_margin = 100\n");
        ch.send(0, A, event(1000, &[bid(1, 1, 100)]));
        ch.send(MS, A, heartbeat(1003));
        ch.send(2 * MS, A, event(1, &[bid(1, 1, 200)]));
        ch
    };
    let after_reset = {
        let mut ch = Channel::new("");
        ch.send(0, A, event(1000, &[bid(1, 1, 100)]));
        ch.send(MS, A, heartbeat(1003));
        ch.send(
            2 * MS,
            A,
            packet(1004, &[encode::channel_reset(V, T0, EOE, 310)]),
        );
        ch.send(3 * MS, A, event(1, &[bid(1, 1, 200)]));
        ch
    };
    for mut ch in [weekly, after_reset] {
        let c = ch.check(20 * MS, "#1");
        let out = ch.run();
        assert_eq!((out.reasons(c), out.top(c).0), (ok(), Some(200)));
        let f = out.feed();
        has(
            f,
            json!({"packet_gaps": 1, "packets_lost": 0, "gaps_open": 0}),
        );
        assert_eq!(f["sequence_restarts"], 1);
        assert_eq!(out.sym(1)["unverified"], false);
    }
}

/// "At a restart remember the old `high` H; for `gap_timeout` afterwards
/// a packet with H − `restart_margin` ≤ S < H is a late copy
/// (`stale_sequence`, no effect)" (spec mdp3 §9.2, replacing §3.1 step
/// 1's window), with H far above `restart_margin`: both ends of the
/// range and of the time.
#[test]
fn late_copies_of_the_old_sequence_have_no_effect_for_gap_timeout() {
    // H = 50,001 (the ChannelReset came in 50,000); restart at 2 ms, so
    // the window closes after 7 ms; restart_margin 10,000.
    let mut base = Channel::new("");
    base.send(0, A, event(49_999, &[bid(1, 1, 100)]));
    base.send(
        MS,
        A,
        packet(50_000, &[encode::channel_reset(V, T0, EOE, 310)]),
    );
    base.send(2 * MS, A, event(1, &[bid(1, 1, 200)]));
    let late = |s: u32| event(s, &[change(1, 2, 300)]);

    let mut ch = base.clone();
    ch.send(3 * MS, B, late(40_001));
    ch.send(4 * MS, B, late(50_000));
    ch.send(7 * MS, B, late(45_000));
    let c = ch.check(7 * MS + MS / 2, "#1");
    let out = ch.run();
    assert_eq!((out.reasons(c), out.top(c).0), (ok(), Some(200)));
    let f = out.feed();
    has(f, json!({"stale_sequence": 3, "next": 2, "packet_gaps": 0}));

    // Below the range, at H itself, and after the window: new packets.
    let mut ch = base.clone();
    ch.send(3 * MS, B, late(40_000));
    ch.send(4 * MS, B, event(50_001, &[change(1, 3, 301)]));
    let out = ch.run();
    let f = out.feed();
    has(
        f,
        json!({"stale_sequence": 0, "packet_gaps": 2, "next": 50_002}),
    );
    assert_eq!(out.sym(1)["bid"], 301);
    let mut ch = base;
    ch.send(7 * MS + 1, B, late(45_000));
    let out = ch.run();
    let f = out.feed();
    has(f, json!({"stale_sequence": 0, "packet_gaps": 1}));
}

/// §9.2 after a weekly restart (a packet far below `high`, no
/// ChannelReset): `H` is the old `high` (50,000), and for `gap_timeout`
/// (5 ms from the restart at 2 ms) a packet in `[H − margin, H)` is a late
/// copy; after that window it is a new packet.
#[test]
fn late_copies_after_a_weekly_restart_have_no_effect_for_gap_timeout() {
    let mut base = Channel::new("");
    base.send(0, A, event(49_999, &[bid(1, 1, 100)]));
    base.send(2 * MS, A, event(1, &[bid(1, 1, 200)]));
    let late = |s: u32| event(s, &[change(1, 2, 300)]);

    let mut ch = base.clone();
    ch.send(3 * MS, B, late(40_000));
    ch.send(7 * MS, B, late(49_999));
    let c = ch.check(7 * MS + MS / 2, "#1");
    let out = ch.run();
    assert_eq!((out.reasons(c), out.top(c).0), (ok(), Some(200)));
    has(
        out.feed(),
        json!({"stale_sequence": 2, "next": 2, "packet_gaps": 0, "sequence_restarts": 1}),
    );

    // Below the range, and after the window: new packets.
    let mut ch = base.clone();
    ch.send(3 * MS, B, late(39_999));
    let out = ch.run();
    has(
        out.feed(),
        json!({"stale_sequence": 0, "packet_gaps": 1, "next": 40_000}),
    );
    let mut ch = base;
    ch.send(7 * MS + 1, B, late(45_000));
    let out = ch.run();
    has(
        out.feed(),
        json!({"stale_sequence": 0, "packet_gaps": 1, "next": 45_001}),
    );
}

/// The decision "late copies after a restart go by MsgSeqNum alone"
/// (docs/mdp3.md): after a ChannelReset early in the week (packet 2, so
/// `H` is 3), the new sequence's packet 2 falls in `[H − margin, H)`
/// within `gap_timeout_ms` and is dropped as a late copy; the instrument
/// it touched turns suspect at its next entry, and the next loop heals it.
#[test]
fn a_new_packet_after_a_short_old_sequence_is_dropped_and_the_loop_heals_it() {
    let mut ch = Channel::new("");
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    ch.send(MS, A, packet(2, &[encode::channel_reset(V, T0, EOE, 310)]));
    ch.send(2 * MS, A, event(1, &[bid(1, 1, 200)]));
    // New, but in the window: no effect.
    ch.send(3 * MS, A, event(2, &[change(1, 2, 300)]));
    let dropped = ch.check(3 * MS + 1, "#1");
    ch.send(4 * MS, A, event(3, &[change(1, 3, 301)]));
    let hole = ch.check(4 * MS + 1, "#1");
    // Its last event after the reset (at T0).
    let healed_by = snapshot_at(T0 + 4 * MS, 3, 1, 3, None, &[level(Bid, 1, 301)]);
    ch.send(5 * MS, SNAP_A, snapshots(&[healed_by]));
    let healed = ch.check(5 * MS + 1, "#1");
    let out = ch.run();
    assert_eq!(
        (out.reasons(dropped), out.top(dropped).0),
        (ok(), Some(200))
    );
    assert!(
        out.reasons(hole).contains(&"suspect".to_string()),
        "{:?}",
        out.reasons(hole)
    );
    assert_eq!((out.reasons(healed), out.top(healed).0), (ok(), Some(301)));
    has(out.feed(), json!({"stale_sequence": 1}));
}

/// Not in the contract (docs/mdp3.md, "Below right after a
/// ChannelReset"): MsgSeqNum far below `high` right after the packet of a
/// ChannelReset is that reset's restart with its first packet missing,
/// not the weekly one, whose §3.7 would empty the channel a second time:
/// the halt and the book that followed the reset in its packet stand.
#[test]
fn far_below_right_after_a_channel_reset_is_its_restart_not_the_weekly_one() {
    let mut ch = Channel::new("");
    ch.send(0, A, event(50_000, &[bid(1, 7, 100)]));
    let reset = encode::channel_reset(V, T0, 0, 310);
    let halt = status(Some(1), "", "", 2);
    ch.send(
        MS,
        A,
        packet(50_001, &[reset, halt, book(EOE, &[bid(1, 1, 200)])]),
    );
    // Packet 1 of the new sequence lost; packet 2 goes on at RptSeq 2.
    ch.send(2 * MS, A, event(2, &[change(1, 2, 201)]));
    let c = ch.check(2 * MS + 1, "#1");
    let out = ch.run();
    assert_eq!((out.reasons(c), out.top(c).0), (r(&["halted"]), Some(201)));
    has(
        out.feed(),
        json!({"sequence_restarts": 1, "channel_resets": 1, "next": 3}),
    );
}

/// Not in the contract (docs/mdp3.md, "Below right after a
/// ChannelReset"): with `high` within `restart_margin` of 1 (early in the
/// week), the new sequence's packets after a ChannelReset are below it
/// without being far below. Packet 1 lost on both lines, packet 2 would
/// be a duplicate by the letter (§3.1 step 3), its halt lost without a
/// gap, and #1's new history from RptSeq 1 in packet 60 would read `ok`.
/// Sent after the reset's packet, packet 2 is that reset's restart,
/// packet 1 missing; a copy of an older packet, sent before, stays a
/// duplicate.
#[test]
fn below_high_and_sent_after_a_channel_reset_is_its_restart() {
    let mut ch = Channel::new("");
    ch.send(0, A, event(50, &[bid(1, 7, 100)]));
    let reset = encode::channel_reset(V, T0, EOE, 310);
    ch.send(MS, A, encode::packet(51, T0 + MS, &[reset]));
    // Line B's copy of packet 50, late: sent before the reset.
    ch.send(MS + 1, B, event(50, &[bid(1, 7, 100)]));
    let halt = status(Some(1), "", "", 2);
    ch.send(2 * MS, A, encode::packet(2, T0 + 2 * MS, &[halt]));
    let new = book_at(T0 + 3 * MS, EOE, &[bid(1, 1, 200)]);
    ch.send(3 * MS, A, encode::packet(60, T0 + 3 * MS, &[new]));
    let c = ch.check(3 * MS + 1, "#1");
    let out = ch.run();
    assert_eq!((out.reasons(c), out.top(c).0), (r(&["halted"]), Some(200)));
    has(
        out.feed(),
        json!({"sequence_restarts": 1, "duplicates": 1, "packet_gaps": 2, "next": 61}),
    );
}

/// Not in the contract (docs/mdp3.md, "A late ChannelReset"): a
/// ChannelReset that comes late, after packets that follow it, sets no
/// `reset_pending` (§3.1 would: the last packet processed carried one).
/// Those packets went on with its numbering, so the next packet far below
/// is the weekly restart, which empties what they sent of the old week.
/// Read as the reset's restart, #1's trading of the old week would stay
/// into the new one, over its definition's halt: `ok` in a halted market.
#[test]
fn a_late_channel_reset_is_not_restarted_by_the_weekly_restart() {
    let mut ch = Channel::new("");
    ch.send(
        0,
        DEF_A,
        Def {
            status: Some(2),
            ..def(1, "ESZ6", "ES", "ES")
        }
        .packet(),
    );
    ch.send(0, A, event(50_000, &[bid(1, 7, 100)]));
    // Packet 50,001 (the ChannelReset, the numbering kept) late on line B,
    // after 50,002: #1 trading.
    let trading = status(Some(1), "", "", 17);
    ch.send(
        MS,
        A,
        packet(50_002, &[trading, book(EOE, &[bid(1, 1, 110)])]),
    );
    let reset = encode::channel_reset(V, T0, EOE, 310);
    ch.send(MS + 1, B, packet(50_001, &[reset]));
    let old = ch.check(MS + 2, "ESZ6");
    // The new week: #1 from RptSeq 1, no status yet.
    ch.send(2 * MS, A, event(1, &[bid(1, 1, 200)]));
    let new = ch.check(2 * MS + 1, "ESZ6");
    let out = ch.run();
    assert_eq!(out.reasons(old), r(&["no_quote"]), "its book forgotten");
    assert_eq!(
        (out.reasons(new), out.top(new).0),
        (r(&["halted"]), Some(200))
    );
    has(
        out.feed(),
        json!({"sequence_restarts": 1, "channel_resets": 1, "next": 2}),
    );
}

/// Not in the contract (docs/mdp3.md, "The packets before a restart's
/// first"): after a restart `high` is 1, not unset, so a first packet past
/// 1 opens the gap from 1 (§3.1 step 2 would open none). Packet 1 coming
/// later on line B fills it and is processed (its halt and its entry
/// taken, not dropped as a duplicate); never coming, it is given up and
/// every instrument is unverified.
#[test]
fn a_restart_past_packet_1_leaves_the_packets_before_it_missing() {
    let base = |late_one: bool| {
        let mut ch = Channel::new("");
        ch.send(0, A, event(50_000, &[bid(1, 7, 100)]));
        let reset = encode::channel_reset(V, T0, EOE, 310);
        ch.send(MS, A, packet(50_001, &[reset]));
        ch.send(2 * MS, A, event(2, &[bid(2, 1, 300)]));
        if late_one {
            let halt = status(Some(2), "", "", 2);
            ch.send(3 * MS, B, packet(1, &[halt, book(EOE, &[bid(1, 1, 200)])]));
        }
        ch
    };
    let mut ch = base(true);
    let one = ch.check(3 * MS + 1, "#1");
    let two = ch.check(3 * MS + 1, "#2");
    let out = ch.run();
    assert_eq!((out.reasons(one), out.top(one).0), (ok(), Some(200)));
    assert_eq!(
        (out.reasons(two), out.top(two).0),
        (r(&["halted"]), Some(300))
    );
    let f = out.feed();
    has(
        f,
        json!({"packet_gaps": 1, "recovered": 1, "duplicates": 0, "next": 3}),
    );

    let mut ch = base(false);
    ch.check(8 * MS, "#2");
    let out = ch.run();
    has(out.feed(), json!({"packet_gaps": 1, "packets_lost": 1}));
    assert_eq!(out.sym(2)["unverified"], true);
}

/// "S < `high`: … else it is an A/B **duplicate** (`duplicates += 1`, no
/// other effect)" (spec mdp3 §3.1 step 3): line B's copy, even one that
/// differs, refreshes no liveness or source time and reaches no RptSeq;
/// its messages count in `messages` only (§5).
#[test]
fn an_ab_duplicate_has_no_other_effect() {
    let mut ch = Channel::new("");
    ch.send(
        0,
        A,
        packet(1, &[book(EOE, &[bid(1, 1, 100)]), encode::heartbeat(V)]),
    );
    let differing = book_at(T0 + 900 * MS, EOE, &[bid(1, 1, 999)]);
    ch.send(900 * MS, B, packet(1, &[differing, encode::heartbeat(V)]));
    let fresh = ch.check(1_000 * MS, "#1");
    let stale = ch.check(1_000 * MS + 1, "#1");
    let out = ch.run();
    assert_eq!((out.reasons(fresh), out.top(fresh).0), (ok(), Some(100)));
    assert_eq!(out.reasons(stale), r(&["stale", "stale_at_source"]));
    let f = out.feed();
    has(f, json!({"duplicates": 1, "messages": 4, "heartbeats": 1}));
    assert_eq!(f["messages_by_template"], json!({"12": 1, "46": 1}));
    has(
        out.sym(1),
        json!({"duplicates": 0, "last_transact_time": T0}),
    );
}

/// "If no gap is open afterwards: `last_alive = t`, and
/// `source_watermark` rises to the TransactTime of the packet's last
/// message carrying one, else (heartbeat) to `t − offset`" (spec mdp3
/// §3.1 step 4), with the decisions of docs/mdp3.md (book, statistics and
/// status messages carry one).
#[test]
fn liveness_and_the_watermark_move_only_with_no_gap_open() {
    let mut ch = Channel::new("gap_timeout_ms = 60000\n");
    ch.send(0, A, packet(1, &[book_at(T0, EOE, &[bid(1, 1, 100)])]));
    // A gap [2, 3) open: neither moves.
    ch.send(
        500 * MS,
        A,
        encode::packet(
            3,
            T0 + 500 * MS,
            &[book_at(T0 + 500 * MS, EOE, &[bid(2, 1, 50)])],
        ),
    );
    let during = ch.check(1_000 * MS + 1, "#1");
    // The fill closes it: the watermark is the filling packet's.
    ch.send(
        1_200 * MS,
        B,
        encode::packet(
            2,
            T0 + 100 * MS,
            &[status_at(T0 + 100 * MS, Some(2), "", "", 17)],
        ),
    );
    let filled = ch.check(1_200 * MS + 1, "#1");
    // The last message carrying a TransactTime, not the heartbeat after it.
    let last = [
        status_at(T0 + 1_200 * MS, Some(2), "", "", 17),
        encode::heartbeat(V),
    ];
    ch.send(1_300 * MS, A, encode::packet(4, T0 + 1_300 * MS, &last));
    // An older TransactTime does not lower it.
    let older = encode::statistics(48, V, T0 + 500 * MS, EOE, &[(2, 2)], 0);
    ch.send(1_400 * MS, A, encode::packet(5, T0 + 1_400 * MS, &[older]));
    let risen = ch.check(2_200 * MS, "#1");
    let past = ch.check(2_200 * MS + 1, "#1");
    // A heartbeat alone: its arrival less the offset (0).
    ch.send(3_000 * MS, A, heartbeat(6));
    let beat = ch.check(4_000 * MS, "#1");
    let silent = ch.check(4_000 * MS + 1, "#1");
    // A definition alone (no TransactTime; docs/mdp3.md): as a heartbeat.
    ch.send(
        5_000 * MS,
        A,
        packet(7, &[def(7, "ZZZ", "Z", "Z").message()]),
    );
    let defined = ch.check(6_000 * MS, "#1");
    let quiet = ch.check(6_000 * MS + 1, "#1");
    let out = ch.run();
    assert_eq!(out.reasons(during), r(&["stale", "stale_at_source"]));
    assert_eq!(out.reasons(filled), r(&["stale_at_source"]));
    assert_eq!(out.reasons(risen), ok());
    assert_eq!(out.reasons(past), r(&["stale_at_source"]));
    assert_eq!(out.reasons(beat), ok());
    assert_eq!(out.reasons(silent), r(&["stale", "stale_at_source"]));
    assert_eq!(out.reasons(defined), ok());
    assert_eq!(out.reasons(quiet), r(&["stale", "stale_at_source"]));
}

/// A heartbeat alone raises the watermark to its arrival less the clock
/// offset (spec mdp3 §3.1, step 4), not to its arrival: with
/// `clock_offset` 2 s, fresh exactly one threshold after it arrived, then
/// `stale_at_source` (with `stale`) one nanosecond later.
#[test]
fn a_heartbeats_watermark_is_its_arrival_less_the_offset() {
    let mut ch = Channel::new("clock_offset = 2000000000\n");
    ch.send(0, A, packet(1, &[book_at(T0, EOE, &[bid(1, 1, 100)])]));
    ch.send(3_000 * MS, A, heartbeat(2));
    let beat = ch.check(4_000 * MS, "#1");
    let silent = ch.check(4_000 * MS + 1, "#1");
    let out = ch.run();
    assert_eq!(out.reasons(beat), ok());
    assert_eq!(out.reasons(silent), r(&["stale", "stale_at_source"]));
}

/// Gaps "expire (before every datagram routed to the feed, any service,
/// rejected ones included, and before every check; deadline = arrival +
/// `gap_timeout`; nothing expires at the end)" and "**Giving up** a gap:
/// `packets_lost +=` its missing packets; every instrument becomes
/// `unverified`" (spec mdp3 §3.1).
#[test]
fn gaps_expire_before_any_datagram_of_the_feed_and_any_check() {
    // Gap [2, 3) opened at 1 ms: its deadline is 6 ms.
    let mut base = Channel::new("");
    base.send(0, A, event(1, &[bid(1, 1, 100)]));
    base.send(MS, A, event(3, &[bid(2, 1, 50)]));
    let snap = snapshots(&[snapshot(3, 9, 1, None, &[level(Bid, 1, 9)])]);
    let late = 6 * MS + 1;
    for (dst, payload) in [
        (A, b"rejected".to_vec()),
        (SNAP_A, snap),
        (DEF_B, def(9, "ZZZ", "Z", "Z").packet()),
        (SNAP_B, b"rejected".to_vec()),
        (DEF_A, b"rejected".to_vec()),
    ] {
        let mut ch = base.clone();
        ch.send(late, dst, payload);
        let out = ch.run();
        assert_eq!(out.feed()["packets_lost"], 1, "{dst}");
        assert_eq!(out.sym(1)["unverified"], true, "{dst}");
        assert_eq!(out.sym(2)["unverified"], true, "{dst}");
    }
    // Neither the end nor a datagram of no feed gives it up.
    let mut ch = base.clone();
    ch.send(late, "239.3.1.9:14310", event(4, &[]));
    let out = ch.run();
    let f = out.feed();
    has(f, json!({"packets_lost": 0, "gaps_open": 1}));
    assert_eq!(out.summary["capture"]["unrouted"], 1);
    // A check strictly after the deadline does.
    let mut ch = base;
    let at = ch.check(6 * MS, "#1");
    let after = ch.check(late, "#1");
    let out = ch.run();
    assert_eq!(
        (out.reasons(at), out.reasons(after)),
        (ok(), r(&["suspect"]))
    );
    assert_eq!(out.feed()["packets_lost"], 1);
}

/// "A gap filled in time costs nothing" (spec mdp3 §3.1); the heal rule
/// is "Checked after each application: a late A/B copy (§3.1) or a
/// snapshot (§3.5) closes a hole" (§3.2.5).
#[test]
fn a_late_copy_on_line_b_fills_the_gap_and_heals_the_instrument() {
    let mut ch = Channel::new("");
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    ch.send(MS, A, event(3, &[change(1, 3, 103)]));
    let hole = ch.check(2 * MS, "#1");
    ch.send(4 * MS, B, event(2, &[change(1, 2, 102)]));
    let healed = ch.check(20 * MS, "#1");
    let out = ch.run();
    assert_eq!(
        (out.reasons(hole), out.top(hole).0),
        (r(&["suspect"]), Some(100))
    );
    assert_eq!((out.reasons(healed), out.top(healed).0), (ok(), Some(103)));
    let f = out.feed();
    has(
        f,
        json!({"packets_lost": 0, "recovered": 1, "snapshots_applied": 0}),
    );
    let i = out.sym(1);
    for key in ["suspect", "unverified"] {
        assert_eq!(i[key], false, "{key}");
    }
    has(i, json!({"ticks_lost": 0, "missing": 0}));
}

/// Cached entries applied when a late copy heals the hole keep their own
/// positions (spec mdp3 §3.4): RptSeq 3, from packet 3 whose event has
/// not ended, is not made visible by the end of event of the copy that
/// let it apply; the instrument's changes show together once packet 4
/// ends its event.
#[test]
fn cached_entries_applied_after_a_fill_keep_their_positions() {
    let mut ch = Channel::new("");
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    ch.send(MS, A, packet(3, &[book(0, &[change(1, 3, 103)])]));
    ch.send(2 * MS, B, event(2, &[change(1, 2, 102)]));
    let filled = ch.check(3 * MS, "#1");
    ch.send(4 * MS, A, event(4, &[]));
    let ended = ch.check(5 * MS, "#1");
    let out = ch.run();
    assert_eq!((out.reasons(filled), out.top(filled).0), (ok(), Some(100)));
    assert_eq!((out.reasons(ended), out.top(ended).0), (ok(), Some(103)));
}

// ---------------------------------------------------------------------------
// §3.2 RptSeq

/// "**Bound**: caching when the feed holds `max_cached` entries drops
/// that instrument's cache and the entry, sets `overflowed` (nothing
/// cached until its next snapshot), `cache_overflows += 1`" (spec mdp3
/// §3.2.6): the bound is the feed's, the instrument that overflows it the
/// one dropped; "Overflowed instruments drop every non-duplicate entry,
/// `r = rpt_seq + 1` included, until a snapshot is applied" (§9.7);
/// "`ticks_lost` grows only when a snapshot skips values for good"
/// (§3.2).
#[test]
fn the_cache_bound_is_the_feeds_and_an_overflow_waits_for_a_snapshot() {
    let mut ch = Channel::new("max_cached = 2\n");
    ch.send(0, A, event(1, &[bid(1, 1, 100), bid(2, 1, 50)]));
    // Packets 2 and 4 lost on line A, late on B: #1 caches RptSeq 3 and
    // 4, filling the bound, and #2's 3 overflows it.
    ch.send(MS, A, event(3, &[change(1, 3, 103), change(1, 4, 104)]));
    ch.send(2 * MS, A, event(5, &[change(2, 3, 53)]));
    ch.send(3 * MS, B, event(4, &[change(2, 2, 52)]));
    ch.send(4 * MS, B, event(2, &[change(1, 2, 102)]));
    let one = ch.check(5 * MS, "#1");
    let two = ch.check(5 * MS, "#2");
    let out = ch.run();
    assert_eq!((out.reasons(one), out.top(one).0), (ok(), Some(104)));
    assert_eq!(
        (out.reasons(two), out.top(two).0),
        (r(&["suspect"]), Some(50))
    );
    let f = out.feed();
    has(
        f,
        json!({"cache_overflows": 1, "cached": 0, "ticks_lost": 0}),
    );
    let i = out.sym(2);
    has(i, json!({"overflowed": true, "rpt_seq": 1, "cached": 0}));

    // Its snapshot clears it: 2 to 4 skipped for good.
    ch.send(
        6 * MS,
        SNAP_A,
        snapshots(&[snapshot(5, 2, 4, None, &[level(Bid, 1, 54)])]),
    );
    ch.send(7 * MS, A, event(6, &[change(2, 5, 55)]));
    let healed = ch.check(8 * MS, "#2");
    let out = ch.run();
    assert_eq!((out.reasons(healed), out.top(healed).0), (ok(), Some(55)));
    let i = out.sym(2);
    has(i, json!({"overflowed": false, "ticks_lost": 3}));
    assert_eq!(out.feed()["ticks_lost"], 3);

    // 0 caches nothing: the instrument waits for a snapshot, which heals it.
    let mut ch = Channel::new("max_cached = 0\n");
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    ch.send(MS, A, event(2, &[change(1, 3, 103)]));
    ch.send(2 * MS, A, event(3, &[change(1, 4, 104)]));
    let waiting = ch.check(2 * MS + 1, "#1");
    ch.send(
        3 * MS,
        SNAP_A,
        snapshots(&[snapshot(3, 1, 4, None, &[level(Bid, 1, 104)])]),
    );
    let healed = ch.check(3 * MS + 1, "#1");
    let out = ch.run();
    assert_eq!(out.feed()["cache_overflows"], 1);
    assert_eq!(
        (out.reasons(waiting), out.top(waiting).0),
        (r(&["suspect"]), Some(100))
    );
    assert_eq!((out.reasons(healed), out.top(healed).0), (ok(), Some(104)));
    has(out.sym(1), json!({"overflowed": false, "ticks_lost": 3}));
}

// ---------------------------------------------------------------------------
// §3.3 Books

/// "`0`/`1` edit the outright book (depth: GBX MarketDepth, else
/// `default_depth`), `E`/`F` the implied book (GBI, else
/// `default_implied_depth`)", "one pushed past the depth is dropped" and
/// "A definition lowering the depth cuts deeper levels" (spec mdp3
/// §3.3); NoMDFeedTypes "`GBX` outright, `GBI` implied; 3 MarketDepth"
/// (§2).
#[test]
fn depths_come_from_gbx_and_gbi_or_the_defaults() {
    let mut ch = Channel::new("default_depth = 4\ndefault_implied_depth = 3\n");
    let shallow = Def {
        feeds: &[("GBX", 2), ("GBI", 1)],
        ..def(2, "NQZ6", "NQ", "NQ")
    };
    ch.send(0, DEF_A, shallow.packet());
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    // Three bids into two levels, two implied bids into one; then as many
    // deletes at level 1 as levels kept empty the sides.
    let pushed = [
        bid(2, 1, 100),
        bid(2, 2, 101),
        bid(2, 3, 102),
        entry(2, 4, New, ImpliedBid, 1, 50),
        entry(2, 5, New, ImpliedBid, 1, 51),
    ];
    ch.send(MS, A, event(2, &pushed));
    let two = ch.check(MS + MS / 2, "NQZ6");
    let deletes = [
        entry(2, 6, Delete, Bid, 1, 0),
        entry(2, 7, Delete, Bid, 1, 0),
        entry(2, 8, Delete, ImpliedBid, 1, 0),
    ];
    ch.send(2 * MS, A, event(3, &deletes));
    // Three levels of a default-depth book, then a definition of one.
    ch.send(
        3 * MS,
        A,
        event(4, &[bid(3, 1, 30), bid(3, 2, 31), bid(3, 3, 32)]),
    );
    let one_deep = Def {
        feeds: &[("GBX", 1)],
        ..def(3, "RTYZ6", "RTY", "RTY")
    };
    ch.send(4 * MS, DEF_A, one_deep.packet());
    ch.send(5 * MS, A, event(5, &[entry(3, 4, Delete, Bid, 1, 0)]));
    // A MarketDepth of 0 or below is no depth: the defaults.
    let none = Def {
        feeds: &[("GBX", 0), ("GBI", -1)],
        ..def(4, "ZNZ6", "ZN", "ZN")
    };
    ch.send(6 * MS, DEF_A, none.packet());
    let out = ch.run();
    assert_eq!((out.reasons(two), out.top(two).0), (ok(), Some(102)));
    let depths = |id: i32| {
        (
            out.sym(id)["depth"].as_u64(),
            out.sym(id)["implied_depth"].as_u64(),
        )
    };
    assert_eq!(depths(1), (Some(4), Some(3)));
    assert_eq!(depths(2), (Some(2), Some(1)));
    assert_eq!(depths(3), (Some(1), Some(3)));
    assert_eq!(depths(4), (Some(4), Some(3)));
    let i = out.sym(2).as_object().unwrap();
    assert!(
        !i.contains_key("bid") && !i.contains_key("implied_bid"),
        "#2: {i:?}"
    );
    // #3's book cut to its level 1 (32), and, kept deeper than the venue's
    // while it took entries, without a baseline: suspect, the Delete
    // after the definition waiting for a snapshot (docs/mdp3.md, "A
    // definition's status and depths").
    let i = out.sym(3);
    assert_eq!(
        (&i["bid"], &i["suspect"], &i["cached"]),
        (&32.into(), &true.into(), &1.into()),
        "#3: {i}"
    );
}

// ---------------------------------------------------------------------------
// §3.4 End of event

/// Coverage "is re-examined after each EndOfEvent message, after the whole
/// of a packet that fills a gap has been processed, after a give-up"
/// (spec mdp3 §9.4); "**Lost end of event**: instruments changed before the
/// lost packet keep their previous visible book while the gap is open; a
/// fill publishes them normally; a give-up publishes them `unverified`"
/// and "while the gap is open such an instrument reads `ok` on its last
/// complete book" (§3.4).
#[test]
fn an_event_whose_end_waits_on_a_gap_is_published_by_the_fill_or_the_give_up() {
    let mut base = Channel::new("");
    base.send(0, A, event(1, &[bid(1, 1, 100)]));
    // An event from 2 ends in 4; 3 (no end of event) is lost on line A.
    base.send(MS, A, packet(2, &[book(0, &[change(1, 2, 101)])]));
    base.send(2 * MS, A, packet(4, &[book(EOE, &[offer(1, 3, 110)])]));
    let open = base.check(2 * MS + MS / 2, "#1");

    let mut ch = base.clone();
    ch.send(3 * MS, B, packet(3, &[book(0, &[bid(2, 1, 50)])]));
    let filled = ch.check(3 * MS + MS / 2, "#1");
    // The fill's own change, covered by the end in 4 once the whole of
    // packet 3 is processed.
    let in_the_fill = ch.check(3 * MS + MS / 2, "#2");
    let later = ch.check(20 * MS, "#1");
    let out = ch.run();
    assert_eq!(
        (out.reasons(open), out.top(open)),
        (ok(), (Some(100), None))
    );
    assert_eq!(
        (out.reasons(filled), out.top(filled)),
        (ok(), (Some(101), Some(110)))
    );
    assert_eq!(out.top(in_the_fill), (Some(50), None));
    assert_eq!(out.reasons(later), ok());

    let mut ch = base;
    let before = ch.check(7 * MS, "#1");
    let given_up = ch.check(7 * MS + 1, "#1");
    let out = ch.run();
    assert_eq!(
        (out.reasons(before), out.top(before)),
        (ok(), (Some(100), None))
    );
    assert_eq!(
        (out.reasons(given_up), out.top(given_up)),
        (r(&["suspect"]), (Some(101), Some(110)))
    );
}

/// Coverage "is re-examined after each EndOfEvent message" (spec mdp3
/// §9.4): an event that ends in the middle of a packet is visible even
/// though the packet goes on with the next event, which is not.
#[test]
fn an_event_ending_mid_packet_is_visible_without_the_next() {
    let mut ch = Channel::new("");
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    let two = packet(
        2,
        &[
            book(EOE, &[change(1, 2, 101)]),
            book(0, &[change(1, 3, 102)]),
        ],
    );
    ch.send(MS, A, two);
    let first = ch.check(MS + MS / 2, "#1");
    ch.send(2 * MS, A, event(3, &[offer(1, 4, 110)]));
    let second = ch.check(2 * MS + MS / 2, "#1");
    let out = ch.run();
    assert_eq!(out.top(first), (Some(101), None));
    assert_eq!(out.top(second), (Some(102), Some(110)));
}

/// "A gap filled in time costs nothing" (spec mdp3 §3.1): an instrument
/// with nothing in the gap never turns suspect or unverified, and the
/// packet counts as recovered, not lost.
#[test]
fn a_gap_filled_in_time_costs_the_instruments_it_missed_nothing() {
    let mut ch = Channel::new("");
    ch.send(0, A, event(1, &[bid(1, 1, 100), bid(2, 1, 200)]));
    ch.send(MS, A, event(3, &[change(1, 3, 103)]));
    let open = ch.check(MS + MS / 2, "#2");
    ch.send(4 * MS, B, event(2, &[change(1, 2, 102)]));
    let after = ch.check(20 * MS, "#2");
    let out = ch.run();
    for i in [open, after] {
        assert_eq!((out.reasons(i), out.top(i)), (ok(), (Some(200), None)));
    }
    has(out.sym(2), json!({"suspect": false, "unverified": false}));
    has(
        out.sym(1),
        json!({"suspect": false, "unverified": false, "bid": 103}),
    );
    has(
        out.feed(),
        json!({"packets_lost": 0, "recovered": 1, "packet_gaps": 1}),
    );
}

/// "An applied snapshot drops the instrument's pending changes and
/// publishes at once" (spec mdp3 §9.4): with a gap still hiding the end
/// of an event, the snapshot's book is what a check sees, and the
/// change left pending never comes back.
#[test]
fn an_applied_snapshot_drops_what_was_pending() {
    let mut ch = Channel::new("");
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    // An event from 2, its end lost with 3; 4 (RptSeq 4) is cached.
    ch.send(MS, A, packet(2, &[book(0, &[change(1, 2, 101)])]));
    ch.send(2 * MS, A, event(4, &[change(1, 4, 104)]));
    let hidden = ch.check(2 * MS + MS / 2, "#1");
    ch.send(
        3 * MS,
        SNAP_A,
        snapshots(&[snapshot(3, 1, 3, None, &[level(Bid, 1, 103)])]),
    );
    let healed = ch.check(3 * MS + MS / 2, "#1");
    let out = ch.run();
    assert_eq!(
        (out.reasons(hidden), out.top(hidden)),
        (r(&["suspect"]), (Some(100), None))
    );
    assert_eq!(
        (out.reasons(healed), out.top(healed)),
        (ok(), (Some(104), None))
    );
    has(
        out.sym(1),
        json!({"rpt_seq": 4, "cached": 0, "suspect": false}),
    );
}

/// An applied snapshot drops the instrument's pending changes with what
/// would revert them: a change left pending by an event whose end was
/// lost is not undone over the snapshot's book, then or after the next
/// event.
#[test]
fn a_snapshot_over_a_pending_change_is_seen_as_sent() {
    let mut ch = Channel::new("");
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    // An event from 2, its end lost with 3; 4 (RptSeq 4) is cached.
    ch.send(MS, A, packet(2, &[book(0, &[change(1, 2, 101)])]));
    ch.send(2 * MS, A, event(4, &[change(1, 4, 104)]));
    // The snapshot reflects 4: nothing cached continues it.
    ch.send(
        3 * MS,
        SNAP_A,
        snapshots(&[snapshot(4, 1, 4, None, &[level(Bid, 1, 150)])]),
    );
    let healed = ch.check(3 * MS + MS / 2, "#1");
    ch.send(8 * MS, A, event(5, &[change(1, 5, 151)]));
    let after = ch.check(9 * MS, "#1");
    let out = ch.run();
    assert_eq!(
        (out.reasons(healed), out.top(healed)),
        (ok(), (Some(150), None))
    );
    assert_eq!(out.top(after), (Some(151), None));
    has(
        out.sym(1),
        json!({"rpt_seq": 5, "cached": 0, "suspect": false, "ticks_lost": 1}),
    );
}

/// A snapshot naming one level of a side twice keeps its last entry for
/// it, whatever the order (docs/mdp3.md, "Reading odd wire values"), and
/// one without a side's level 1 leaves that side empty.
#[test]
fn a_snapshot_naming_a_level_twice_keeps_its_last_entry() {
    let mut ch = Channel::new("");
    ch.send(
        0,
        SNAP_A,
        snapshots(&[
            snapshot(0, 1, 3, None, &[level(Bid, 1, 100), level(Bid, 1, 99)]),
            snapshot(0, 2, 3, None, &[level(Bid, 2, 98), level(Offer, 1, 101)]),
        ]),
    );
    let one = ch.check(MS, "#1");
    let two = ch.check(MS, "#2");
    let out = ch.run();
    assert_eq!(out.top(one), (Some(99), None));
    assert_eq!(out.top(two), (None, Some(101)));
}

/// A definition's MDSecurityTradingStatus reads as a SecurityStatus's
/// code (spec mdp3 §3.6): an unlisted code changes nothing and is an
/// anomaly, 103 changes nothing; a listed one counts while no other
/// status is known.
#[test]
fn a_definitions_status_code_reads_as_a_status_messages() {
    let mut ch = Channel::new("");
    let odd = Def {
        status: Some(99),
        ..def(1, "ESZ6", "ES", "ES")
    };
    ch.send(0, DEF_A, odd.packet());
    ch.send(0, A, event(1, &[bid(1, 1, 100), offer(1, 2, 101)]));
    let first = ch.check(MS, "ESZ6");
    let halted = Def {
        status: Some(2),
        action: b'M',
        ..def(1, "ESZ6", "ES", "ES")
    };
    ch.send(2 * MS, DEF_A, halted.packet());
    let no_change = Def {
        status: Some(103),
        action: b'M',
        ..def(1, "ESZ6", "ES", "ES")
    };
    ch.send(3 * MS, DEF_A, no_change.packet());
    // A null status changes nothing either, and is no anomaly.
    let null = Def {
        status: None,
        action: b'M',
        ..def(1, "ESZ6", "ES", "ES")
    };
    ch.send(3 * MS + 1, DEF_A, null.packet());
    let after = ch.check(4 * MS, "ESZ6");
    // The definition loop repeats the odd code: an anomaly each time.
    ch.send(5 * MS, DEF_A, odd.packet());
    let out = ch.run();
    assert_eq!(out.reasons(first), ok());
    assert_eq!(out.reasons(after), r(&["halted"]));
    assert_eq!(out.feed()["anomalies"], 2);
    assert_eq!(out.sym(1)["trading_status"], 2);
}

/// "103 and null → unchanged" (spec mdp3 §3.6) in a SecurityStatus: after
/// a halt, a 103 and a status sent null keep it in force, neither an
/// anomaly; the group's trading status after them counts.
#[test]
fn a_status_of_no_change_or_null_keeps_the_halt() {
    let mut ch = Channel::new("");
    ch.send(0, A, event(1, &[bid(1, 1, 100), offer(1, 2, 101)]));
    ch.send(MS, A, packet(2, &[status(Some(1), "", "", 2)]));
    ch.send(2 * MS, A, packet(3, &[status(Some(1), "", "", 103)]));
    let null = encode::Status {
        transact_time: T0,
        security_group: "",
        asset: "",
        security_id: Some(1),
        match_event_indicator: 0,
        trading_status: None,
    };
    ch.send(3 * MS, A, packet(4, &[encode::security_status(V, &null)]));
    let kept = ch.check(4 * MS, "#1");
    ch.send(5 * MS, A, packet(5, &[status(Some(1), "", "", 17)]));
    let open = ch.check(6 * MS, "#1");
    let out = ch.run();
    assert_eq!(out.reasons(kept), r(&["halted"]));
    assert_eq!(out.reasons(open), ok());
    assert_eq!(out.feed()["anomalies"], 0);
    assert_eq!(out.sym(1)["trading_status"], 17);
}

/// "Statuses, liveness, counters and RptSeq act per message/packet"
/// (spec mdp3 §3.4): a status and an RptSeq hole count at once, in the
/// middle of an event.
#[test]
fn statuses_and_rpt_seq_act_without_an_end_of_event() {
    let mut ch = Channel::new("");
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    ch.send(MS, A, packet(2, &[status(Some(1), "", "", 2)]));
    let halted = ch.check(MS + MS / 2, "#1");
    ch.send(2 * MS, A, packet(3, &[book(0, &[change(1, 3, 103)])]));
    let hole = ch.check(2 * MS + MS / 2, "#1");
    let out = ch.run();
    assert_eq!(out.reasons(halted), r(&["halted"]));
    assert_eq!(
        (out.reasons(hole), out.top(hole).0),
        (r(&["suspect", "halted"]), Some(100))
    );
}

/// "Statuses, liveness, **counters** and RptSeq act per message"
/// (spec mdp3 §3.4): an event never ended still counts its entry's
/// anomaly (a Change without a price) and moves its instrument's RptSeq,
/// though its book change is never shown.
#[test]
fn counters_act_without_an_end_of_event() {
    let mut ch = Channel::new("");
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    let no_price = BookEntry {
        price: None,
        ..change(1, 2, 0)
    };
    ch.send(MS, A, packet(2, &[book(0, &[no_price, change(1, 3, 106)])]));
    let open = ch.check(MS + MS / 2, "#1");
    let out = ch.run();
    assert_eq!((out.reasons(open), out.top(open).0), (ok(), Some(100)));
    has(out.feed(), json!({"anomalies": 1}));
    has(out.sym(1), json!({"rpt_seq": 3}));
}

/// Decided where the contract is silent (docs/mdp3.md, "An end of event
/// on a template stepped over"): a 47 (market by order, stepped over
/// unread) ends no event whatever its MatchEventIndicator says; the book
/// change before it shows at the next end of event on the channel.
#[test]
fn an_end_of_event_on_a_template_stepped_over_ends_no_event() {
    let mut ch = Channel::new("");
    ch.send(0, A, event(1, &[bid(1, 1, 100), offer(1, 2, 110)]));
    let mut root = [0u8; 11];
    root[8] = EOE;
    let mbo = encode::raw(47, 9, &root, &[24, 0, 0]);
    ch.send(MS, A, packet(2, &[book(0, &[change(1, 3, 101)]), mbo]));
    let unshown = ch.check(MS + MS / 2, "#1");
    ch.send(2 * MS, A, event(3, &[change(1, 4, 102)]));
    let shown = ch.check(2 * MS + MS / 2, "#1");
    let out = ch.run();
    assert_eq!(
        (out.reasons(unshown), out.top(unshown)),
        (ok(), (Some(100), Some(110)))
    );
    assert_eq!(out.top(shown), (Some(102), Some(110)));
    has(out.feed(), json!({"mbo_messages": 1}));
}

// ---------------------------------------------------------------------------
// §3.5 Snapshot feed

/// A snapshot is "matched by **RptSeq**: i suspect → applied if
/// `rpt_seq` is unset or r′ > `rpt_seq`; else i unverified → applied if
/// r′ ≥ `rpt_seq`; otherwise ignored (`snapshots_ignored`: a healthy
/// instrument is never rolled back)" (spec mdp3 §3.5).
#[test]
fn snapshots_are_matched_by_rpt_seq() {
    let mut ch = Channel::new("");
    ch.send(
        0,
        A,
        event(1, &[bid(1, 1, 100), bid(2, 1, 200), bid(3, 1, 300)]),
    );
    // Healthy: ignored, newer or not.
    ch.send(
        MS,
        SNAP_A,
        snapshots(&[snapshot(1, 1, 5, None, &[level(Bid, 1, 999)])]),
    );
    let healthy = ch.check(MS + MS / 2, "#1");
    // Suspect: only a newer one applies.
    ch.send(2 * MS, A, event(2, &[change(2, 3, 203)]));
    ch.send(
        3 * MS,
        SNAP_A,
        snapshots(&[snapshot(1, 2, 1, None, &[level(Bid, 1, 201)])]),
    );
    let same = ch.check(3 * MS + MS / 2, "#2");
    ch.send(
        4 * MS,
        SNAP_A,
        snapshots(&[snapshot(1, 2, 2, None, &[level(Bid, 1, 202)])]),
    );
    let newer = ch.check(4 * MS + MS / 2, "#2");
    // Unverified: one not older applies.
    ch.send(5 * MS, A, heartbeat(4));
    let given_up = ch.check(10 * MS + 1, "#3");
    ch.send(
        11 * MS,
        SNAP_A,
        snapshots(&[snapshot(4, 3, 1, None, &[level(Bid, 1, 301)])]),
    );
    ch.send(
        12 * MS,
        SNAP_A,
        snapshots(&[snapshot(4, 1, 0, None, &[level(Bid, 1, 99)])]),
    );
    let three = ch.check(12 * MS + MS / 2, "#3");
    let one = ch.check(12 * MS + MS / 2, "#1");
    let out = ch.run();
    assert_eq!(
        (out.reasons(healthy), out.top(healthy).0),
        (ok(), Some(100))
    );
    assert_eq!(
        (out.reasons(same), out.top(same).0),
        (r(&["suspect"]), Some(200))
    );
    assert_eq!((out.reasons(newer), out.top(newer).0), (ok(), Some(203)));
    assert_eq!(out.reasons(given_up), r(&["suspect"]));
    assert_eq!((out.reasons(three), out.top(three).0), (ok(), Some(301)));
    assert_eq!(
        (out.reasons(one), out.top(one).0),
        (r(&["suspect"]), Some(100))
    );
    let counts = |id: i32| {
        (
            out.sym(id)["snapshots_applied"].as_u64(),
            out.sym(id)["snapshots_ignored"].as_u64(),
        )
    };
    assert_eq!(counts(1), (Some(0), Some(2)));
    assert_eq!(counts(2), (Some(1), Some(1)));
    assert_eq!(counts(3), (Some(1), Some(0)));
    assert_eq!(out.sym(2)["ticks_lost"], 1, "RptSeq 2");
    let f = out.feed();
    has(f, json!({"snapshots_applied": 2, "snapshots_ignored": 3}));
}

/// Applying a snapshot: "`ticks_lost +=` the values v, …, not in the cache
/// (skipped for good; none if no entry was ever seen)" (spec mdp3 §3.5);
/// "The heal rule's `rpt_seq ≥ high_seen` holds when no entry was
/// received" (§9.6): an instrument first named by its snapshot is whole.
#[test]
fn a_snapshot_of_an_instrument_never_seen_loses_nothing_and_heals_it() {
    let mut ch = Channel::new("");
    ch.send(0, A, heartbeat(1));
    let snap = snapshot(1, 9, 50, None, &[level(Bid, 1, 100), level(Offer, 1, 101)]);
    ch.send(MS, SNAP_A, snapshots(&[snap]));
    let snapped = ch.check(2 * MS, "#9");
    ch.send(3 * MS, A, event(2, &[change(9, 51, 99)]));
    let next = ch.check(4 * MS, "#9");
    let out = ch.run();
    assert_eq!(
        (out.reasons(snapped), out.top(snapped)),
        (ok(), (Some(100), Some(101)))
    );
    assert_eq!((out.reasons(next), out.top(next).0), (ok(), Some(99)));
    let i = out.sym(9);
    has(i, json!({"ticks_lost": 0, "suspect": false, "rpt_seq": 51}));
    assert_eq!(out.feed()["ticks_lost"], 0);
}

/// "both books are replaced by the snapshot's `0`/`1`/`E`/`F` entries
/// (level in 1..depth, price not null; other types ignored) and
/// **published at once**" (spec mdp3 §3.5); "A side is empty when its
/// level 1 is" (§3.3).
#[test]
fn a_snapshot_replaces_both_books_with_its_book_entries() {
    let mut ch = Channel::new("");
    let before = [
        bid(1, 1, 100),
        entry(1, 2, New, Bid, 2, 99),
        offer(1, 3, 110),
        entry(1, 4, New, ImpliedBid, 1, 105),
    ];
    ch.send(0, A, event(1, &before));
    ch.send(MS, A, event(2, &[change(1, 6, 101)]));
    let no_price = SnapshotEntry {
        price: None,
        ..level(Bid, 1, 0)
    };
    let entries = [
        level(Bid, 2, 98),
        no_price,
        level(Offer, 1, 111),
        level(ImpliedOffer, 1, 112),
        level(ImpliedBid, 2, 104),
        level(Offer, 11, 200),
        level(EntryType::Other(b'2'), 1, 1),
        level(EntryType::BookReset, 1, 1),
    ];
    let only_level_2 = snapshot(2, 3, 1, None, &[level(Bid, 2, 50)]);
    ch.send(
        2 * MS,
        SNAP_A,
        snapshots(&[snapshot(2, 1, 6, None, &entries), only_level_2]),
    );
    let one = ch.check(2 * MS, "#1");
    let three = ch.check(2 * MS, "#3");
    let out = ch.run();
    assert_eq!((out.reasons(one), out.top(one)), (ok(), (None, Some(111))));
    assert_eq!(
        (out.reasons(three), out.top(three)),
        (r(&["no_quote"]), (None, None))
    );
    let i = out.sym(1);
    let o = i.as_object().unwrap();
    assert!(
        !o.contains_key("bid") && !o.contains_key("implied_bid"),
        "{i}"
    );
    has(i, json!({"ask": 111, "ask_size": 3, "implied_ask": 112}));
    has(i, json!({"rpt_seq": 6, "cached": 0, "suspect": false}));
}

/// A snapshot's level with a price but no size (MDEntrySize null, in 52
/// and in 69) is a level of size 0: the side is not empty, its price is
/// what the venue says it is.
#[test]
fn a_snapshot_level_without_a_size_is_a_level_of_size_0() {
    let mut ch = Channel::new("");
    let sizeless = |side, price| SnapshotEntry {
        size: None,
        ..level(side, 1, price)
    };
    let root = |id, rpt| SnapshotRoot {
        last_msg_seq_num_processed: 2,
        tot_num_reports: 2,
        security_id: id,
        rpt_seq: rpt,
        transact_time: T0,
        trading_status: None,
    };
    let long = encode::snapshot(
        69,
        V,
        &root(2, 7),
        &[sizeless(Bid, 200), level(Offer, 1, 201)],
    );
    let short = snapshot(2, 1, 5, None, &[sizeless(Bid, 100), level(Offer, 1, 101)]);
    ch.send(0, SNAP_A, snapshots(&[short, long]));
    let c = ["#1", "#2"].map(|n| ch.check(MS, n));
    let out = ch.run();
    assert_eq!(out.top(c[0]), (Some(100), Some(101)));
    assert_eq!(out.top(c[1]), (Some(200), Some(201)));
    for id in [1, 2] {
        has(out.sym(id), json!({"bid_size": 0, "ask_size": 3}));
    }
}

/// "Replay processes every snapshot datagram whatever the setting"
/// (spec mdp3 §3.5), `snapshot_join` "on_demand" with one loop, or
/// "always": loops healing none are still read, and the one after.
#[test]
fn replay_reads_every_snapshot_whatever_the_join_setting() {
    for keys in [
        "snapshot_join = \"on_demand\"\nsnapshot_max_loops = 1\n",
        "snapshot_join = \"always\"\n",
    ] {
        let mut ch = Channel::new(keys);
        ch.send(0, A, event(1, &[bid(1, 1, 100)]));
        for k in 1..=3 {
            ch.send(
                k * MS,
                SNAP_A,
                snapshots(&[snapshot(1, 1, 1, None, &[level(Bid, 1, 100)])]),
            );
        }
        ch.send(4 * MS, A, event(2, &[change(1, 3, 103)]));
        ch.send(
            5 * MS,
            SNAP_A,
            snapshots(&[snapshot(2, 1, 3, None, &[level(Bid, 1, 103)])]),
        );
        let c = ch.check(6 * MS, "#1");
        let out = ch.run();
        assert_eq!((out.reasons(c), out.top(c).0), (ok(), Some(103)), "{keys}");
        let counts = json!({"snapshot_packets": 4, "snapshots_ignored": 3, "snapshots_applied": 1});
        has(out.feed(), counts);
    }
}

// ---------------------------------------------------------------------------
// §3.6 Status

/// "SecurityStatus 30 with SecurityID applies to that instrument; without,
/// to the instruments whose definition matches each of its non-blank
/// SecurityGroup and Asset (both blank: `anomalies`)" (spec mdp3 §3.6).
#[test]
fn a_group_status_reaches_the_instruments_matching_each_non_blank_field() {
    let mut ch = Channel::new("");
    for d in [
        def(1, "ESZ6", "ES", "ES"),
        def(2, "ESNQ", "ES", "NQ"),
        def(3, "NQZ6", "NQ", "NQ"),
    ] {
        ch.send(0, DEF_A, d.packet());
    }
    ch.send(
        0,
        A,
        event(1, &[bid(1, 1, 100), bid(2, 1, 100), bid(3, 1, 100)]),
    );
    let mut checks = Vec::new();
    for (k, (group, asset, code)) in [("ES", "", 2), ("", "NQ", 4), ("ES", "NQ", 17), ("", "", 2)]
        .into_iter()
        .enumerate()
    {
        let t = (1 + k as u64) * MS;
        ch.send(
            t,
            A,
            packet(2 + k as u32, &[status(None, group, asset, code)]),
        );
        checks.push(["ESZ6", "ESNQ", "NQZ6"].map(|n| ch.check(t + MS / 2, n)));
    }
    let out = ch.run();
    let seen: Vec<[Vec<String>; 3]> = checks.iter().map(|c| c.map(|i| out.reasons(i))).collect();
    let (h, c) = (r(&["halted"]), r(&["closed"]));
    assert_eq!(
        seen,
        [
            [h.clone(), h.clone(), ok()],
            [h.clone(), c.clone(), c.clone()],
            [h.clone(), ok(), c.clone()],
            [h, ok(), c],
        ]
    );
    assert_eq!(out.feed()["anomalies"], 1);
}

/// "The **effective status** has the highest position" and "a
/// definition's counts only while no other is known" (spec mdp3 §3.6);
/// "per (group, asset) the status of highest position is kept" (§9.8):
/// a gap's late fill does not override a newer group status.
#[test]
fn the_status_of_highest_position_is_in_force() {
    let mut ch = Channel::new("");
    let closed = Def {
        status: Some(4),
        ..def(1, "ESZ6", "ES", "ES")
    };
    ch.send(0, DEF_A, closed.packet());
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    let definition = ch.check(MS / 2, "ESZ6");
    ch.send(MS, A, packet(2, &[status(Some(1), "", "", 17)]));
    let own = ch.check(MS + MS / 2, "ESZ6");
    ch.send(2 * MS, A, packet(4, &[status(None, "ES", "", 17)]));
    ch.send(3 * MS, B, packet(3, &[status(None, "ES", "", 2)]));
    let fill = ch.check(3 * MS + MS / 2, "ESZ6");
    ch.send(4 * MS, A, packet(5, &[status(Some(1), "", "", 2)]));
    let halted = ch.check(4 * MS + MS / 2, "ESZ6");
    ch.send(5 * MS, A, packet(6, &[status(None, "ES", "", 21)]));
    let pre_open = ch.check(5 * MS + MS / 2, "ESZ6");
    let out = ch.run();
    assert_eq!(out.reasons(definition), r(&["closed"]));
    assert_eq!(out.reasons(own), ok());
    assert_eq!(out.reasons(fill), ok());
    assert_eq!(out.reasons(halted), r(&["halted"]));
    assert_eq!(out.reasons(pre_open), r(&["closed"]));
}

/// "an applied snapshot's MDSecurityTradingStatus is an instrument status
/// at (LastMsgSeqNumProcessed, after its last message)" (spec mdp3 §3.6):
/// older than a status of a later packet, newer than one of that packet.
/// A snapshot whose books are ignored gives its status at the same place
/// (a departure, docs/mdp3.md "A snapshot's status"): below the
/// instrument's own it counts for nothing, above it it stands, and taken
/// after a packet the lines have not received yet it is not taken.
#[test]
fn a_snapshots_status_stands_after_the_packet_it_was_taken_after() {
    let mut ch = Channel::new("");
    ch.send(0, DEF_A, def(1, "ESZ6", "ES", "ES").packet());
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    ch.send(MS, A, packet(2, &[status(None, "ES", "", 2)]));
    ch.send(2 * MS, A, event(3, &[change(1, 3, 103)]));
    ch.send(
        3 * MS,
        SNAP_A,
        snapshots(&[snapshot(1, 1, 3, Some(17), &[level(Bid, 1, 103)])]),
    );
    let older = ch.check(3 * MS + MS / 2, "ESZ6");
    ch.send(4 * MS, A, event(4, &[change(1, 5, 105)]));
    ch.send(
        5 * MS,
        SNAP_A,
        snapshots(&[snapshot(2, 1, 5, Some(17), &[level(Bid, 1, 105)])]),
    );
    let newer = ch.check(5 * MS + MS / 2, "ESZ6");
    ch.send(
        6 * MS,
        SNAP_A,
        snapshots(&[snapshot(1, 1, 5, Some(2), &[level(Bid, 1, 105)])]),
    );
    let ignored_older = ch.check(6 * MS + MS / 2, "ESZ6");
    ch.send(
        7 * MS,
        SNAP_A,
        snapshots(&[snapshot(9, 1, 5, Some(2), &[level(Bid, 1, 999)])]),
    );
    let ignored_ahead = ch.check(7 * MS + MS / 2, "ESZ6");
    ch.send(
        8 * MS,
        SNAP_A,
        snapshots(&[snapshot(4, 1, 5, Some(2), &[level(Bid, 1, 999)])]),
    );
    let ignored_newer = ch.check(8 * MS + MS / 2, "ESZ6");
    let out = ch.run();
    assert_eq!(
        (out.reasons(older), out.top(older).0),
        (r(&["halted"]), Some(103))
    );
    assert_eq!((out.reasons(newer), out.top(newer).0), (ok(), Some(105)));
    assert_eq!(
        (out.reasons(ignored_older), out.top(ignored_older).0),
        (ok(), Some(105))
    );
    assert_eq!(out.reasons(ignored_ahead), ok());
    assert_eq!(
        (out.reasons(ignored_newer), out.top(ignored_newer).0),
        (r(&["halted"]), Some(105))
    );
}

/// §3.6: a snapshot taken after packet L gives its status after L's last
/// message: an instrument's status in the first message of packet L + 1
/// is newer, whichever arrives first.
#[test]
fn a_status_first_in_the_next_packet_is_newer_than_the_snapshot() {
    let mut ch = Channel::new("");
    ch.send(0, DEF_A, def(1, "ESZ6", "ES", "ES").packet());
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    ch.send(MS, A, packet(2, &[status(Some(1), "", "", 2)]));
    ch.send(
        2 * MS,
        SNAP_A,
        snapshots(&[snapshot(1, 1, 1, Some(17), &[level(Bid, 1, 100)])]),
    );
    let after = ch.check(2 * MS + MS / 2, "ESZ6");
    let out = ch.run();
    assert_eq!(
        (out.reasons(after), out.top(after).0),
        (r(&["halted"]), Some(100))
    );
}

/// §3.6: "103 and null → unchanged" for an applied snapshot's
/// MDSecurityTradingStatus too: a halt stands through a snapshot that
/// applies with NoChange (103) or no status, while one saying trading (17)
/// ends it.
#[test]
fn an_applied_snapshot_of_no_change_or_no_status_leaves_the_halt() {
    let mut ch = Channel::new("");
    for (id, symbol) in [(1, "ESZ6"), (2, "ESH7"), (3, "ESM7")] {
        ch.send(0, DEF_A, def(id, symbol, "ES", "ES").packet());
    }
    ch.send(MS, A, packet(1, &[status(None, "ES", "", 2)]));
    // No baseline yet: each snapshot applies.
    for (k, (id, code)) in [(1, Some(103)), (2, None), (3, Some(17))]
        .into_iter()
        .enumerate()
    {
        ch.send(
            (2 + k as u64) * MS,
            SNAP_A,
            snapshots(&[snapshot(
                1,
                id,
                1,
                code,
                &[level(Bid, 1, 100), level(Offer, 1, 101)],
            )]),
        );
    }
    let checks: Vec<_> = ["ESZ6", "ESH7", "ESM7"]
        .into_iter()
        .map(|s| ch.check(5 * MS, s))
        .collect();
    let out = ch.run();
    let want = [r(&["halted"]), r(&["halted"]), ok()];
    for (c, want) in checks.into_iter().zip(want) {
        assert_eq!(out.reasons(c), want, "{}", out.lines[c]);
    }
    has(out.sym(1), json!({"snapshots_applied": 1}));
    has(out.sym(2), json!({"snapshots_applied": 1}));
}

/// Not in the contract (docs/mdp3.md, "A snapshot's status"): a halt lost
/// on both lines leaves no mark on RptSeq, so once its gap is given up the
/// instrument's next entry in order verifies it again and, by the letter,
/// it reads `ok` while halted; the next snapshot, its books ignored as
/// not newer, puts the halt back. An odd code in an ignored snapshot is
/// not counted (the loop repeats it), nor does it change the status.
#[test]
fn a_snapshot_not_applied_still_gives_a_status_lost_for_good() {
    let mut ch = Channel::new("");
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    // MsgSeqNum 2, the halt, lost on both lines; given up at 6 ms.
    ch.send(MS, A, event(3, &[change(1, 2, 102)]));
    let given_up = ch.check(6 * MS + 1, "#1");
    ch.send(7 * MS, A, event(4, &[change(1, 3, 103)]));
    let by_the_letter = ch.check(7 * MS + 1, "#1");
    // Taken after MsgSeqNum 2: the halt, RptSeq 1 (its book older).
    ch.send(
        8 * MS,
        SNAP_A,
        snapshots(&[snapshot(2, 1, 1, Some(2), &[level(Bid, 1, 100)])]),
    );
    let halted = ch.check(8 * MS + 1, "#1");
    // A later one with a code of no listed meaning changes nothing.
    ch.send(
        9 * MS,
        SNAP_A,
        snapshots(&[snapshot(4, 1, 3, Some(99), &[level(Bid, 1, 103)])]),
    );
    let odd = ch.check(9 * MS + 1, "#1");
    let out = ch.run();
    assert_eq!(out.reasons(given_up), r(&["suspect"]));
    assert_eq!(
        (out.reasons(by_the_letter), out.top(by_the_letter).0),
        (ok(), Some(103))
    );
    assert_eq!(
        (out.reasons(halted), out.top(halted).0),
        (r(&["halted"]), Some(103))
    );
    assert_eq!(out.reasons(odd), r(&["halted"]));
    has(
        out.feed(),
        json!({"snapshots_ignored": 2, "snapshots_applied": 0, "anomalies": 0, "packets_lost": 1}),
    );
}

/// A snapshot not applied gives no status where its place cannot be
/// trusted (docs/mdp3.md, "A snapshot's status"): one at RptSeq 0 (taken
/// between a ChannelReset and the first entry after it, whose loop may
/// arrive once the new sequence has passed its LastMsgSeqNumProcessed);
/// one taken after a packet the lines have not received (before the first,
/// of any sequence); one stamped before the last reset, which emptied
/// the statuses (the definition's counts again). And for four loops
/// after a restart, a snapshot's status stands as of the sequence before.
#[test]
fn a_snapshot_not_applied_gives_no_status_from_before_a_reset_or_ahead_of_the_lines() {
    // After a ChannelReset and the restart it brings: the new sequence's
    // halt stands against the loop taken after the reset (RptSeq 0,
    // trading), arriving once the new sequence has passed packet 2.
    let mut ch = Channel::new("restart_margin = 1\n");
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    ch.send(MS, A, packet(2, &[encode::channel_reset(V, T0, EOE, 310)]));
    ch.send(10 * MS, A, event(1, &[bid(1, 1, 200)]));
    // Past the window of late copies of the old sequence.
    ch.send(16 * MS, A, packet(2, &[status(Some(1), "", "", 2)]));
    ch.send(17 * MS, A, event(3, &[change(1, 2, 201)]));
    let from_between = snapshot_at(T0, 2, 1, 0, Some(17), &[]);
    ch.send(18 * MS, SNAP_A, snapshots(&[from_between]));
    let halted = ch.check(18 * MS + 1, "#1");
    let out = ch.run();
    assert_eq!(
        (out.reasons(halted), out.top(halted).0),
        (r(&["halted"]), Some(201))
    );

    // Before the first packet: the loop's own copy applied, a copy of an
    // older loop (far ahead, healthy now: not applied) gives nothing; the
    // halt of the first packet stands.
    let mut ch = Channel::new("");
    let applied = snapshot(40, 1, 5, None, &[level(Bid, 1, 100)]);
    let older = snapshot(2_000_000, 1, 9_000, Some(17), &[level(Bid, 1, 900)]);
    ch.send(0, SNAP_A, snapshots(&[applied]));
    ch.send(MS, SNAP_B, snapshots(&[older]));
    ch.send(2 * MS, A, packet(41, &[status(Some(1), "", "", 2)]));
    ch.send(3 * MS, A, event(42, &[change(1, 6, 101)]));
    let halted = ch.check(3 * MS + 1, "#1");
    let out = ch.run();
    assert_eq!(
        (out.reasons(halted), out.top(halted).0),
        (r(&["halted"]), Some(101))
    );
    has(
        out.feed(),
        json!({"snapshots_applied": 1, "snapshots_ignored": 1}),
    );

    // A ChannelReset with MsgSeqNum going on: a snapshot stamped before it
    // (dated after it, so not screened) does not bring back a status the
    // reset emptied: the definition's pre-open counts.
    let mut ch = Channel::new("");
    let pre_open = Def {
        status: Some(21),
        ..def(1, "ESZ6", "ES", "ES")
    };
    ch.send(0, DEF_A, pre_open.packet());
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    ch.send(MS, A, packet(2, &[status(Some(1), "", "", 17)]));
    ch.send(
        2 * MS,
        A,
        packet(3, &[encode::channel_reset(V, T0, EOE, 310)]),
    );
    ch.send(3 * MS, A, event(4, &[bid(1, 1, 200)]));
    ch.send(4 * MS, A, event(5, &[change(1, 2, 201)]));
    let stamped_before = snapshot_at(T0 + MS, 2, 1, 1, Some(17), &[level(Bid, 1, 100)]);
    ch.send(5 * MS, SNAP_A, snapshots(&[stamped_before]));
    let closed = ch.check(5 * MS + 1, "ESZ6");
    let out = ch.run();
    assert_eq!(
        (out.reasons(closed), out.top(closed).0),
        (r(&["closed"]), Some(201))
    );

    // After a ChannelReset and the restart it brings, a loop taken
    // between them (an entry after the reset in its packet: RptSeq 1,
    // dated after it) arriving once the new sequence has passed its place
    // stands before the new sequence: the halt stands. Once four loops
    // have begun since the restart, snapshots place their statuses in the
    // new sequence again.
    let mut ch = Channel::new("restart_margin = 1\n");
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    ch.send(
        MS,
        A,
        packet(
            2,
            &[
                encode::channel_reset(V, T0, 0, 310),
                book_at(T0 + MS, EOE, &[bid(1, 1, 150)]),
            ],
        ),
    );
    ch.send(10 * MS, A, event(1, &[change(1, 2, 200)]));
    ch.send(16 * MS, A, packet(2, &[status(Some(1), "", "", 2)]));
    ch.send(17 * MS, A, event(3, &[change(1, 3, 201)]));
    let between = snapshot_at(T0 + MS, 2, 1, 1, Some(17), &[level(Bid, 1, 150)]);
    // Each loop's first datagram, sent at T0 + `at` (one sent twice
    // begins no loop).
    let loop_at = |at: u64, m: &Vec<u8>| encode::packet(1, T0 + at, std::slice::from_ref(m));
    ch.send(18 * MS, SNAP_A, loop_at(18 * MS, &between));
    let halted = ch.check(18 * MS + 1, "#1");
    let new = snapshot_at(T0 + 17 * MS, 3, 1, 3, Some(17), &[level(Bid, 1, 201)]);
    ch.send(19 * MS, SNAP_B, loop_at(19 * MS, &new));
    ch.send(20 * MS, SNAP_A, loop_at(20 * MS, &new));
    let third_loop = ch.check(20 * MS + 1, "#1");
    ch.send(21 * MS, SNAP_B, loop_at(21 * MS, &new));
    let trading = ch.check(21 * MS + 1, "#1");
    let out = ch.run();
    assert_eq!(
        (out.reasons(halted), out.top(halted).0),
        (r(&["halted"]), Some(201))
    );
    assert_eq!(out.reasons(third_loop), r(&["halted"]));
    assert_eq!(
        (out.reasons(trading), out.top(trading).0),
        (ok(), Some(201))
    );

    // In the same window, a snapshot applied gives its status at its
    // place in the new sequence, as the contract says (a halt lost with
    // the packet that shows the hole, the snapshot healing it outranking
    // the trading status before); and a minute after the restart the
    // window ends however few loops were read.
    let mut ch = Channel::new("restart_margin = 1\n");
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    ch.send(MS, A, packet(2, &[encode::channel_reset(V, T0, EOE, 310)]));
    ch.send(
        10 * MS,
        A,
        packet(
            1,
            &[book(EOE, &[bid(1, 1, 200)]), status(Some(1), "", "", 17)],
        ),
    );
    // MsgSeqNum 2 (the halt, RptSeq 2) lost on both lines.
    ch.send(16 * MS, A, event(3, &[change(1, 3, 203)]));
    let hole = snapshot_at(T0 + 15 * MS, 2, 1, 2, Some(2), &[level(Bid, 1, 202)]);
    ch.send(30 * MS, SNAP_A, snapshots(&[hole]));
    let applied = ch.check(30 * MS + 1, "#1");
    let end = 10 * MS + 60_000 * MS;
    let tt = T0 + end - MS;
    ch.send(end - MS, A, packet(4, &[status_at(tt, Some(1), "", "", 2)]));
    ch.send(end - MS, A, packet(5, &[encode::heartbeat(V)]));
    let resumed = snapshot_at(tt, 5, 1, 3, Some(17), &[level(Bid, 1, 203)]);
    let resumed = encode::packet(2, T0, &[resumed]);
    ch.send(end - 1, SNAP_B, resumed.clone());
    let in_window = ch.check(end - 1, "#1");
    ch.send(end, SNAP_B, resumed);
    let past_window = ch.check(end + 1, "#1");
    let out = ch.run();
    assert_eq!(
        (out.reasons(applied), out.top(applied).0),
        (r(&["halted"]), Some(203))
    );
    assert_eq!(out.reasons(in_window), r(&["halted"]));
    assert_eq!(out.reasons(past_window), ok());
}

/// "**Group statuses** apply to every instrument whose current definition
/// matches, evaluated when the verdict is computed" (spec mdp3 §9.8).
#[test]
fn group_statuses_follow_the_current_definition() {
    let mut ch = Channel::new("");
    ch.send(0, A, packet(1, &[status(None, "NQ", "", 2)]));
    ch.send(0, A, event(2, &[bid(7, 1, 100)]));
    let undefined = ch.check(MS, "#7");
    ch.send(2 * MS, DEF_A, def(7, "NQZ6", "NQ", "NQ").packet());
    let defined = ch.check(2 * MS + MS / 2, "NQZ6");
    let moved = Def {
        action: b'M',
        ..def(7, "NQZ6", "ES", "ES")
    };
    ch.send(3 * MS, DEF_A, moved.packet());
    let redefined = ch.check(3 * MS + MS / 2, "NQZ6");
    let out = ch.run();
    assert_eq!(out.reasons(undefined), ok());
    assert_eq!(out.reasons(defined), r(&["halted"]));
    assert_eq!(out.reasons(redefined), ok());
}

/// "The **effective status** has the highest position" (spec mdp3
/// §3.6), across a restart too: statuses the reset packet carries after
/// its ChannelReset stand before the new sequence, in their own order.
#[test]
fn statuses_kept_across_a_restart_keep_their_order() {
    let mut ch = Channel::new("");
    ch.send(0, DEF_A, def(1, "ESZ6", "ES", "ES").packet());
    ch.send(0, DEF_A, def(2, "NQZ6", "NQ", "NQ").packet());
    let reset = packet(
        5,
        &[
            encode::channel_reset(V, T0, EOE, 310),
            status(None, "ES", "", 17),
            status(Some(1), "", "", 2),
            status(Some(2), "", "", 2),
            status(None, "NQ", "", 17),
        ],
    );
    ch.send(MS, A, reset);
    let before = ["ESZ6", "NQZ6"].map(|n| ch.check(MS + MS / 2, n));
    // The new sequence, a book for each.
    ch.send(2 * MS, A, event(1, &[bid(1, 1, 100), bid(2, 1, 200)]));
    let after = ["ESZ6", "NQZ6"].map(|n| ch.check(2 * MS + MS / 2, n));
    // A status of the new sequence comes after them all (sent once
    // packet 2 can no longer be a late copy of the old sequence).
    ch.send(10 * MS, A, packet(2, &[status(Some(1), "", "", 17)]));
    let resumed = ch.check(10 * MS + MS / 2, "ESZ6");
    let out = ch.run();
    for i in before {
        assert_eq!(out.reasons(i), r(&["no_quote"]), "{}", out.lines[i]);
    }
    // ES: the group's trading, then the instrument's halt; NQ the other
    // way round.
    assert_eq!(
        out.reasons(after[0]),
        r(&["halted"]),
        "{}",
        out.lines[after[0]]
    );
    assert_eq!(out.reasons(after[1]), ok(), "{}", out.lines[after[1]]);
    assert_eq!(out.reasons(resumed), ok(), "{}", out.lines[resumed]);
    has(
        out.feed(),
        json!({"channel_resets": 1, "sequence_restarts": 1}),
    );
}

// ---------------------------------------------------------------------------
// §3.7 Definitions and ChannelReset

/// "A definition sets the instrument's fields (`D` drops the Symbol
/// mapping, not the state)" (spec mdp3 §3.7). The instrument deleted
/// answers `closed` by its `#SecurityID` (its book and RptSeq kept) until
/// a definition lists it again (not in the contract: a handle a gateway
/// looked up by the Symbol before the `D` reads the same slot, whose book
/// no longer moves while the channel is alive: docs/mdp3.md).
#[test]
fn a_delete_definition_drops_the_symbol_not_the_state() {
    let mut ch = deleted_then_listed();
    let by_symbol = ch.check(3 * MS, "ESZ6");
    let by_id = ch.check(3 * MS, "#7");
    let listed = ch.check(5 * MS, "ESZ6");
    let out = ch.run();
    assert_eq!(out.reasons(by_symbol), r(&["no_quote"]));
    assert_eq!(out.answer(by_symbol)["security_id"], Value::Null);
    assert_eq!(
        (out.reasons(by_id), out.top(by_id).0),
        (r(&["closed"]), Some(100))
    );
    assert_eq!((out.reasons(listed), out.top(listed).0), (ok(), Some(100)));
    assert_eq!(out.sym(7)["rpt_seq"], 1);
    assert_eq!(out.feed()["definitions"], 3);
}

/// The summary of a deleted instrument says `closed`, as its checks
/// answer (not in the contract: it said the status its codes had, null
/// or `trading`, while every check answered `closed`); listed again, its
/// status is its codes' again.
#[test]
fn a_deleted_instruments_summary_says_closed() {
    let trading = Def {
        status: Some(17),
        ..def(7, "ESZ6", "ES", "ES")
    };
    let mut ch = Channel::new("");
    ch.send(0, DEF_A, trading.packet());
    ch.send(MS, A, event(1, &[bid(7, 1, 100)]));
    let deleted = Def {
        action: b'D',
        ..trading
    };
    ch.send(2 * MS, DEF_A, deleted.packet());
    let check = ch.check(3 * MS, "#7");
    let out = ch.run();
    assert_eq!(out.reasons(check), r(&["closed"]));
    assert_eq!(
        (&out.sym(7)["status"], &out.sym(7)["trading_status"]),
        (&Value::from("closed"), &Value::from(17))
    );
    let mut ch = deleted_then_listed();
    ch.send(5 * MS, DEF_A, trading.packet());
    assert_eq!(ch.run().sym(7)["status"], "trading");
}

/// #7 (ESZ6) defined, its bid at 100, deleted (`D`) at 2 ms, defined
/// again at 4 ms.
fn deleted_then_listed() -> Channel {
    let mut ch = Channel::new("");
    ch.send(0, DEF_A, def(7, "ESZ6", "ES", "ES").packet());
    ch.send(MS, A, event(1, &[bid(7, 1, 100)]));
    let deleted = Def {
        action: b'D',
        ..def(7, "ESZ6", "ES", "ES")
    };
    ch.send(2 * MS, DEF_A, deleted.packet());
    ch.send(4 * MS, DEF_A, def(7, "ESZ6", "ES", "ES").packet());
    ch
}

/// "**ChannelReset 4**: every book (working, visible) and status of the
/// feed emptied, caches and pending changes dropped, every instrument
/// `rpt_seq = 0` (RptSeq restarts at 1), healthy, not `unverified` or
/// `overflowed`; `channel_resets += 1`, …; `reset_pending` set"
/// (spec mdp3 §3.7); after it "every instrument has `rpt_seq = 0` and
/// `high_seen`, `watch_from` unset. Instrument, group and snapshot
/// statuses are emptied; a definition's status is a definition field and
/// is kept" (§9.3); "S = 1 while `reset_pending`" restarts the sequence
/// (§9.1).
#[test]
fn a_channel_reset_empties_the_channel_and_restarts_rpt_seq() {
    let mut ch = Channel::new("max_cached = 3\n");
    let closed = Def {
        status: Some(4),
        ..def(1, "ESZ6", "ES", "ES")
    };
    ch.send(0, DEF_A, closed.packet());
    let books = book(
        EOE,
        &[
            bid(1, 1, 100),
            offer(1, 2, 110),
            bid(2, 1, 50),
            bid(3, 1, 30),
        ],
    );
    ch.send(0, A, packet(1, &[books, status(None, "ES", "", 17)]));
    // Instrument 2 caches RptSeq 3; 3 overflows the feed's cache.
    ch.send(MS, A, event(2, &[change(2, 3, 53)]));
    ch.send(
        2 * MS,
        A,
        event(3, &[change(3, 3, 33), change(3, 4, 34), change(3, 5, 35)]),
    );
    // A change of 1 waiting for its end of event; a gap given up.
    ch.send(3 * MS, A, packet(4, &[book(0, &[change(1, 3, 101)])]));
    ch.send(4 * MS, A, heartbeat(6));
    let unverified = ch.check(10 * MS, "ESZ6");
    // A snapshot's status and an instrument's.
    ch.send(
        11 * MS,
        SNAP_A,
        snapshots(&[snapshot(6, 4, 7, Some(18), &[level(Bid, 1, 40)])]),
    );
    ch.send(12 * MS, A, packet(7, &[status(Some(2), "", "", 2)]));
    let halted = ch.check(12 * MS + MS / 2, "#4");
    let reset = packet(8, &[encode::channel_reset(V, T0, EOE, 310)]);
    ch.send(13 * MS, A, reset.clone());
    ch.send(13 * MS + MS / 2, B, reset);
    ch.send(14 * MS, A, heartbeat(1));
    let emptied: Vec<usize> = ["ESZ6", "#2", "#3", "#4"]
        .iter()
        .map(|n| ch.check(14 * MS + MS / 2, n))
        .collect();
    let out = ch.run();
    assert_eq!(
        (out.reasons(unverified), out.top(unverified)),
        (r(&["suspect"]), (Some(100), Some(110)))
    );
    assert_eq!(out.reasons(halted), r(&["halted"]));
    for i in emptied {
        assert_eq!(out.reasons(i), r(&["no_quote"]), "{}", out.lines[i]);
    }
    let f = out.feed();
    has(
        f,
        json!({
            "channel_resets": 1,
            "sequence_restarts": 1,
            "duplicates": 1,
            "next": 2,
            "cached": 0,
            "cache_overflows": 1,
            "packets_lost": 1,
        }),
    );
    for id in 1..=4 {
        let i = out.sym(id);
        has(
            i,
            json!({
                "rpt_seq": 0,
                "suspect": false,
                "unverified": false,
                "overflowed": false,
                "missing": 0,
                "cached": 0,
            }),
        );
        let o = i.as_object().unwrap();
        assert!(
            !o.contains_key("bid") && !o.contains_key("ask"),
            "#{id}: {i}"
        );
    }
    has(out.sym(1), json!({"status": "closed", "trading_status": 4}));
    for id in [2, 4] {
        assert_eq!(out.sym(id)["trading_status"], Value::Null, "#{id}");
    }

    // RptSeq 1 again (after the window of late copies, §9.2); what 2
    // receives is judged from nothing seen before the reset.
    ch.send(25 * MS, A, event(2, &[bid(1, 1, 200), offer(1, 2, 210)]));
    ch.send(
        26 * MS,
        A,
        event(
            3,
            &[entry(2, 3, New, Bid, 1, 53), entry(2, 4, New, Offer, 1, 54)],
        ),
    );
    ch.send(
        27 * MS,
        SNAP_A,
        // Its last event after the reset (at T0).
        snapshots(&[snapshot_at(
            T0 + 26 * MS,
            3,
            2,
            4,
            None,
            &[level(Bid, 1, 52)],
        )]),
    );
    let again = ch.check(28 * MS, "ESZ6");
    let two = ch.check(28 * MS, "#2");
    let out = ch.run();
    assert_eq!(
        (out.reasons(again), out.top(again)),
        (r(&["closed"]), (Some(200), Some(210)))
    );
    assert_eq!((out.reasons(two), out.top(two).0), (ok(), Some(52)));
    assert_eq!(out.sym(2)["ticks_lost"], 0);
    assert_eq!(out.feed()["ticks_lost"], 0);
}

/// A snapshot taken before a ChannelReset that arrives after it (a loop
/// from before the reset, come late) is ignored and counted an anomaly
/// (decided where CME is silent): matched by RptSeq alone, its RptSeq of
/// the old sequence is past the new one's, so it would roll the
/// instrument back to the emptied books, take the new sequence's entries
/// for duplicates and answer `ok` on the old book. Told by its
/// instrument's last event, no later than the reset's TransactTime; one
/// taken after the reset heals the instrument.
#[test]
fn a_snapshot_from_before_a_channel_reset_is_ignored() {
    let mut ch = Channel::new("");
    let reset_tt = T0 + 5 * MS;
    ch.send(0, A, event(1, &[bid(1, 1, 100), offer(1, 2, 110)]));
    ch.send(MS, A, event(2, &[change(1, 3, 101)]));
    ch.send(2 * MS, A, event(3, &[change(1, 4, 102)]));
    // The loop's snapshot of #1, taken now (RptSeq 4, bid 102).
    let old = snapshot_at(
        T0,
        3,
        1,
        4,
        None,
        &[level(Bid, 1, 102), level(Offer, 1, 110)],
    );
    ch.send(
        5 * MS,
        A,
        packet(4, &[encode::channel_reset(V, reset_tt, EOE, 310)]),
    );
    // The new RptSeq sequence: 1 and 2, then 4 (3 missing): suspect.
    let new = |tt, rpt, price| book_at(tt, EOE, &[change(1, rpt, price)]);
    ch.send(
        6 * MS,
        A,
        packet(
            5,
            &[book_at(
                reset_tt + MS,
                EOE,
                &[bid(1, 1, 200), offer(1, 2, 210)],
            )],
        ),
    );
    ch.send(7 * MS, A, packet(6, &[new(reset_tt + 2 * MS, 4, 201)]));
    ch.send(8 * MS, SNAP_A, snapshots(&[old]));
    let late = ch.check(8 * MS + 1, "#1");
    ch.send(9 * MS, A, packet(7, &[new(reset_tt + 4 * MS, 5, 202)]));
    let after = ch.check(9 * MS + 1, "#1");
    let fresh = snapshot_at(
        reset_tt + 2 * MS,
        6,
        1,
        4,
        None,
        &[level(Bid, 1, 201), level(Offer, 1, 210)],
    );
    ch.send(10 * MS, SNAP_A, snapshots(&[fresh]));
    let healed = ch.check(10 * MS + 1, "#1");
    let out = ch.run();
    assert_eq!(
        (out.reasons(late), out.top(late)),
        (r(&["suspect"]), (Some(200), Some(210)))
    );
    assert_eq!(out.reasons(after), r(&["suspect"]));
    assert_eq!(
        (out.reasons(healed), out.top(healed)),
        (ok(), (Some(202), Some(210)))
    );
    has(
        out.sym(1),
        json!({"snapshots_ignored": 1, "snapshots_applied": 1, "rpt_seq": 5}),
    );
    has(out.feed(), json!({"anomalies": 1, "snapshots_ignored": 1}));
}

/// A ChannelReset dated far ahead (forged, or a venue's clock gone wrong)
/// makes every snapshot look older than it once MsgSeqNum restarted after
/// it (positions of the two sequences compare nothing): the screen holds
/// only until the snapshot lines have begun four loops (two on each
/// line), after which a snapshot heals the instrument as before. A loop's
/// first datagram sent again on a line begins no loop (copies would end
/// the screen of a real reset while its loop from before still comes).
/// (In the same sequence, a snapshot taken at or past the reset's packet
/// is not screened at all.)
#[test]
fn a_channel_reset_dated_ahead_holds_snapshots_back_for_two_loops_only() {
    // Line B stamping as line A or its own SendingTimes (`skew` ns later),
    // or every loop's first datagram stamped alike (a clock stuck:
    // `stuck`, a loop then begun on a line a minute after its last).
    for (skew, stuck) in [(0, false), (1, false), (0, true)] {
        let mut ch = Channel::new("");
        let ahead = T0 + 3_600_000 * MS;
        ch.send(0, A, event(50_000, &[bid(1, 1, 100), offer(1, 2, 110)]));
        ch.send(
            MS,
            A,
            packet(50_001, &[encode::channel_reset(V, ahead, EOE, 310)]),
        );
        ch.send(2 * MS, A, event(1, &[bid(1, 1, 200), offer(1, 2, 210)]));
        ch.send(3 * MS, A, event(2, &[change(1, 4, 201)]));
        // Loop `k`'s first datagram on `line`.
        let fresh = |k: u64, line| {
            let sent = match (stuck, line == SNAP_B) {
                (true, _) => T0,
                (false, b) => T0 + k * MS + if b { skew } else { 0 },
            };
            encode::packet(
                1,
                sent,
                &[snapshot_at(
                    T0 + 3 * MS,
                    2,
                    1,
                    4,
                    None,
                    &[level(Bid, 1, 201), level(Offer, 1, 210)],
                )],
            )
        };
        // A loop a minute after the last on each line, when stuck.
        let later = if stuck { 60_000 * MS } else { 0 };
        let mut held = Vec::new();
        // Loop 10 on each line, each line sending it twice; loop 11 on A.
        for (k, (line, loop_)) in [
            (SNAP_A, 10),
            (SNAP_B, 10),
            (SNAP_A, 10),
            (SNAP_B, 10),
            (SNAP_A, 11),
        ]
        .into_iter()
        .enumerate()
        {
            let at = (10 + k as u64) * MS + if loop_ == 11 { later } else { 0 };
            ch.send(at, line, fresh(loop_, line));
            held.push(ch.check(at + 1, "#1"));
        }
        ch.send(20 * MS + later, SNAP_B, fresh(11, SNAP_B));
        let healed = ch.check(20 * MS + later + 1, "#1");
        let out = ch.run();
        let case = format!("skew {skew}, stuck {stuck}");
        for c in held {
            assert!(
                out.reasons(c).contains(&"suspect".to_string()),
                "{case}: {}",
                out.lines[c]
            );
        }
        assert!(
            !out.reasons(healed).contains(&"suspect".to_string())
                && out.top(healed) == (Some(201), Some(210)),
            "{case}: {}",
            out.lines[healed]
        );
        has(
            out.sym(1),
            json!({"snapshots_ignored": 5, "snapshots_applied": 1}),
        );
    }
}

/// ChannelReset: "`channel_resets += 1`, logged once" (spec mdp3 §3.7):
/// one line a reset, line B's copy not logging it again.
#[test]
fn a_channel_reset_is_logged_once() {
    let mut ch = Channel::new("");
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    let reset = |s| packet(s, &[encode::channel_reset(V, T0, EOE, 310)]);
    ch.send(MS, A, reset(2));
    ch.send(2 * MS, B, reset(2));
    ch.send(3 * MS, A, heartbeat(1));
    ch.send(3_000 * MS, A, reset(2));
    ch.send(3_001 * MS, B, reset(2));
    let stderr = ch.stderr();
    assert_eq!(stderr.matches("ChannelReset").count(), 2, "{stderr}");
}

/// A ChannelReset come late (in a packet filling a gap) is logged as what
/// it does (docs/mdp3.md, "A late ChannelReset"): the statuses after it
/// kept, no instrument trusted until its snapshot; not as one in order.
#[test]
fn a_late_channel_reset_is_logged_as_late() {
    let reset = |s| packet(s, &[encode::channel_reset(V, T0, EOE, 310)]);
    // Packet 2, the reset, late on line B after 3; then, when `again`, a
    // reset in order past the log line's second.
    let logged = |again: bool| {
        let mut ch = Channel::new("");
        ch.send(0, A, event(1, &[bid(1, 1, 100)]));
        ch.send(MS, A, packet(3, &[status(Some(1), "", "", 2)]));
        ch.send(MS + 1, B, reset(2));
        if again {
            ch.send(2_000 * MS, A, reset(4));
        }
        ch.stderr()
    };
    let stderr = logged(false);
    assert_eq!(stderr.matches("ChannelReset").count(), 1, "{stderr}");
    assert!(
        stderr.contains("ChannelReset come late, in a packet filling a gap")
            && stderr.contains("no instrument trusted until its snapshot"),
        "{stderr}"
    );
    assert!(!stderr.contains("RptSeq restarts at 1"), "{stderr}");
    let stderr = logged(true);
    assert_eq!(stderr.matches("ChannelReset").count(), 2, "{stderr}");
    assert_eq!(
        stderr.matches("RptSeq restarts at 1").count(),
        1,
        "{stderr}"
    );
}

/// A second ChannelReset within the line's interval, and none after: it
/// is told at the first datagram once the interval has passed (held back,
/// then never named, before).
#[test]
fn a_channel_reset_held_back_is_told_once_the_interval_passes() {
    // #1 bid at 100, then a ChannelReset at each of `ms` (each followed
    // by the new sequence's first packet), then heartbeats at `beats`.
    let resets_at = |ms: &[u64], beats: &[u64]| {
        let mut ch = Channel::new("");
        ch.send(0, A, event(1, &[bid(1, 1, 100)]));
        for &t in ms {
            let reset = packet(2, &[encode::channel_reset(V, T0, EOE, 310)]);
            ch.send(t * MS, A, reset);
            ch.send(t * MS + 1, A, heartbeat(1));
        }
        for (k, &t) in beats.iter().enumerate() {
            ch.send(t * MS, A, heartbeat(2 + k as u32));
        }
        ch.stderr()
    };
    let stderr = resets_at(&[1, 200], &[1_000, 2_000, 3_000, 4_000, 5_000]);
    assert_eq!(stderr.matches("ChannelReset").count(), 2, "{stderr}");
    assert!(
        stderr.contains("ChannelReset processed 1 more time(s)"),
        "{stderr}"
    );
    assert!(!stderr.contains("come late"), "{stderr}");

    // A reset due in the datagram past the interval has its own line,
    // which counts the one held.
    let stderr = resets_at(&[1, 200, 1_100], &[1_900]);
    assert_eq!(stderr.matches("ChannelReset: every").count(), 2, "{stderr}");
    assert_eq!(stderr.matches("unlogged=1").count(), 1, "{stderr}");
    assert!(!stderr.contains("more time(s)"), "{stderr}");
}

/// A ChannelReset lost on both lines, MsgSeqNum going on (a departure:
/// docs/mdp3.md). By the letter the new sequence's RptSeq values read as
/// duplicates of the old until one passes an instrument's old RptSeq,
/// which then applies in order: #2 (old RptSeq 2) took its new RptSeq 3
/// onto its old offer and, once the given-up gap's unverified was cleared
/// by its RptSeq 4, read `ok` on 302/410 where the venue had 302/310 (until
/// a sign of the reset comes: docs/mdp3.md). The new RptSeq 1 of #1, whose
/// old one was 2, in the newest packet, is that sign: the channel is
/// emptied as by a late reset, logged once, an anomaly, and #1's history
/// starts there; #2 waits for its snapshot.
#[test]
fn a_channel_reset_lost_on_both_lines_is_inferred_from_rpt_seq_going_back() {
    let mut ch = Channel::new("");
    ch.send(
        0,
        A,
        event(1, &[bid(1, 1, 100), bid(2, 1, 200), offer(2, 2, 410)]),
    );
    ch.send(0, A, event(2, &[change(1, 2, 101)]));
    // Packet 3 lost on both lines: the ChannelReset, then #2's RptSeq 1
    // and 2 (a bid at 300, an offer at 310).
    ch.send(MS, A, event(4, &[change(2, 3, 301)]));
    ch.send(20 * MS, A, event(5, &[change(2, 4, 302)]));
    ch.send(21 * MS, A, event(6, &[bid(1, 1, 110)]));
    let two = ch.check(21 * MS + 1, "#2");
    let one = ch.check(21 * MS + 1, "#1");
    let out = ch.run();
    assert_eq!(
        (out.reasons(two), out.top(two)),
        (r(&["no_quote"]), (None, None))
    );
    assert_eq!((out.reasons(one), out.top(one)), (ok(), (Some(110), None)));
    has(
        out.feed(),
        json!({"channel_resets": 0, "anomalies": 1, "packets_lost": 1}),
    );
    has(out.sym(2), json!({"rpt_seq": null, "suspect": true}));
    let stderr = ch.stderr();
    assert_eq!(
        stderr.matches("ChannelReset inferred").count(),
        1,
        "{stderr}"
    );
}

// ---------------------------------------------------------------------------
// §4 The verdict

/// "`no_quote` — unknown name, or visible outright book empty on both
/// sides; then the only reason" (spec mdp3 §4).
#[test]
fn no_quote_is_the_only_reason() {
    let mut ch = Channel::new("");
    ch.send(0, DEF_A, def(1, "ESZ6", "ES", "ES").packet());
    ch.send(0, A, packet(1, &[status(None, "ES", "", 2)]));
    ch.send(
        MS,
        A,
        event(2, &[bid(2, 1, 100), offer(2, 2, 101), bid(4, 1, 40)]),
    );
    let emptied = [
        entry(2, 3, Delete, Bid, 1, 0),
        entry(2, 4, Delete, Offer, 1, 0),
    ];
    ch.send(2 * MS, A, event(3, &emptied));
    ch.send(3 * MS, A, event(4, &[bid(3, 5, 100)]));
    let late = 5_000 * MS;
    let none: Vec<usize> = ["ESZ6", "#2", "#3", "#999", "XXXX"]
        .iter()
        .map(|n| ch.check(late, n))
        .collect();
    let quoted = ch.check(late, "#4");
    let out = ch.run();
    for i in none {
        assert_eq!(out.reasons(i), r(&["no_quote"]), "{}", out.lines[i]);
    }
    assert_eq!(out.reasons(quoted), r(&["stale", "stale_at_source"]));
}

/// "`stale` — `last_alive` unset, or `now − last_alive >
/// stale_threshold`" and "`stale_at_source` — `now − source_watermark −
/// offset > source_threshold`" (spec mdp3 §4), "strict `>` comparisons"
/// (the preamble), with a fixed offset of 2 ms.
#[test]
fn stale_and_stale_at_source_are_strict() {
    let mut ch = Channel::new("clock_offset = 2000000\n");
    ch.send(
        100 * MS,
        A,
        packet(1, &[book_at(T0, EOE, &[bid(1, 1, 100)])]),
    );
    let c = [1_002 * MS, 1_002 * MS + 1, 1_100 * MS, 1_100 * MS + 1].map(|t| ch.check(t, "#1"));
    let out = ch.run();
    let seen = c.map(|i| out.reasons(i));
    let at_source = r(&["stale_at_source"]);
    assert_eq!(
        seen,
        [
            ok(),
            at_source.clone(),
            at_source,
            r(&["stale", "stale_at_source"])
        ]
    );
}

/// "`source_watermark` rises to the TransactTime of the packet's last
/// message carrying one" (spec mdp3 §3.1 step 4): the last, not the
/// first nor the highest (here the last is the earlier of two).
#[test]
fn the_watermark_is_the_last_messages_transact_time() {
    let mut ch = Channel::new("clock_offset = 2000000\n");
    ch.send(
        400 * MS,
        A,
        encode::packet(
            1,
            T0 + 400 * MS,
            &[
                book_at(T0 + 300 * MS, 0, &[bid(1, 1, 100)]),
                book_at(T0 + 100 * MS, EOE, &[bid(2, 1, 100)]),
            ],
        ),
    );
    let c = [1_102 * MS, 1_102 * MS + 1].map(|t| ch.check(t, "#1"));
    let out = ch.run();
    assert_eq!(c.map(|i| out.reasons(i)), [ok(), r(&["stale_at_source"])]);
}

/// "`stale` — `last_alive` unset" (spec mdp3 §4): a book from a snapshot
/// on a channel no incremental packet proved alive; `next` is "null
/// before any packet" (§5).
#[test]
fn a_channel_never_alive_is_stale() {
    let mut ch = Channel::new("");
    ch.send(
        0,
        SNAP_A,
        snapshots(&[snapshot(
            1,
            9,
            3,
            None,
            &[level(Bid, 1, 100), level(Offer, 1, 101)],
        )]),
    );
    let c = ch.check(MS, "#9");
    let out = ch.run();
    assert_eq!(
        (out.reasons(c), out.top(c)),
        (r(&["stale", "stale_at_source"]), (Some(100), Some(101)))
    );
    has(out.feed(), json!({"next": null, "snapshots_applied": 1}));
}

/// The reasons "in this order": `no_quote`, `stale`, `stale_at_source`,
/// `suspect`, `invalid_price`, `halted`, `closed` (spec mdp3 §4).
#[test]
fn reasons_come_in_the_contracts_order() {
    let mut ch = Channel::new("");
    ch.send(
        0,
        A,
        event(
            1,
            &[
                bid(1, 1, 110),
                offer(1, 2, 100),
                bid(2, 1, 102),
                offer(2, 2, 101),
            ],
        ),
    );
    ch.send(
        MS,
        A,
        packet(2, &[status(Some(1), "", "", 2), status(Some(2), "", "", 4)]),
    );
    ch.send(2 * MS, A, event(3, &[change(1, 4, 111), change(2, 4, 112)]));
    let early = ch.check(3 * MS, "#1");
    let one = ch.check(3_000 * MS, "#1");
    let two = ch.check(3_000 * MS, "#2");
    let out = ch.run();
    assert_eq!(
        out.reasons(early),
        r(&["suspect", "invalid_price", "halted"])
    );
    assert_eq!(
        out.reasons(one),
        r(&[
            "stale",
            "stale_at_source",
            "suspect",
            "invalid_price",
            "halted"
        ])
    );
    assert_eq!(
        out.reasons(two),
        r(&[
            "stale",
            "stale_at_source",
            "suspect",
            "invalid_price",
            "closed"
        ])
    );
}

/// "`invalid_price` — visible best bid > best offer (crossed; locked is
/// allowed …)" and "`bid`, `ask`: visible outright level-1 mantissas"
/// (spec mdp3 §4): the implied book neither quotes an instrument nor
/// crosses it ("Outright top decides, implied only summarised", §7.7).
#[test]
fn the_verdict_reads_the_outright_book_only() {
    let mut ch = Channel::new("");
    let books = [
        entry(1, 1, New, ImpliedBid, 1, 100),
        entry(1, 2, New, ImpliedOffer, 1, 101),
        bid(2, 1, 100),
        offer(2, 2, 101),
        entry(2, 3, New, ImpliedBid, 1, 105),
        entry(2, 4, New, ImpliedOffer, 1, 95),
    ];
    ch.send(0, A, event(1, &books));
    let implied = ch.check(MS, "#1");
    let both = ch.check(MS, "#2");
    let out = ch.run();
    assert_eq!(
        (out.reasons(implied), out.top(implied)),
        (r(&["no_quote"]), (None, None))
    );
    assert_eq!(
        (out.reasons(both), out.top(both)),
        (ok(), (Some(100), Some(101)))
    );
    assert_eq!(out.sym(1)["implied_bid"], 100);
    assert_eq!(out.sym(2)["implied_bid"], 105);
}

// ---------------------------------------------------------------------------
// §5 Replay and files

/// "routes each UDP datagram by destination `ip:port` to the feed and
/// service whose line matches; anything else (TCP too) is counted and
/// ignored" (spec mdp3 §5).
#[test]
fn datagrams_are_routed_by_destination_and_the_rest_counted_and_ignored() {
    let mut ch = Channel::new("");
    ch.send(0, A, event(1, &[bid(1, 1, 100)]));
    let other = event(2, &[change(1, 2, 999)]);
    ch.send(MS, "239.3.1.1:14399", other.clone());
    ch.send(MS, "239.3.1.9:14310", other.clone());
    ch.segment(MS, A, other);
    let c = ch.check(2 * MS, "#1");
    let out = ch.run();
    assert_eq!((out.reasons(c), out.top(c).0), (ok(), Some(100)));
    let capture = &out.summary["capture"];
    has(capture, json!({"unrouted": 2, "segments": 1}));
    has(out.feed(), json!({"packets": 1, "next": 2}));
}

/// Per instrument (spec mdp3 §5): `symbol`, `group`, `asset`,
/// `display_factor`, `min_price_increment` null without a definition;
/// each side's level 1 under its own keys; `duplicates` the entries
/// received again; `last_transact_time` the last applied entry's (a
/// duplicate's does not count). `bid_orders` / `ask_orders` are present
/// with their side and null when NumberOfOrders was.
#[test]
fn an_instruments_summary_reads_each_side_apart() {
    let mut ch = Channel::new("");
    let sized = |rpt, side, price, size: u64, orders| BookEntry {
        size: Some(size),
        orders,
        ..entry(5, rpt, New, side, 1, price)
    };
    let first = [
        sized(1, Bid, 100, 7, Some(3)),
        sized(2, Offer, 110, 8, Some(4)),
        sized(3, ImpliedBid, 99, 9, None),
        sized(4, ImpliedOffer, 111, 11, None),
        BookEntry {
            orders: None,
            ..entry(6, 1, New, Bid, 1, 50)
        },
    ];
    ch.send(MS, A, packet(1, &[book_at(T0 + MS, EOE, &first)]));
    // RptSeq 3 and 4 of #5 again, later, in packets filling a gap (in
    // the newest packet they would show a ChannelReset lost: docs/mdp3.md).
    let again = |s, r| {
        packet(
            s,
            &[book_at(T0 + 5 * MS, EOE, &[sized(r, Bid, 1, 1, None)])],
        )
    };
    ch.send(2 * MS, A, event(4, &[]));
    ch.send(3 * MS, B, again(2, 3));
    ch.send(3 * MS, B, again(3, 4));
    let out = ch.run();
    let i = out.sym(5);
    let o = i.as_object().unwrap();
    for key in [
        "symbol",
        "group",
        "asset",
        "display_factor",
        "min_price_increment",
    ] {
        assert_eq!(o.get(key), Some(&Value::Null), "{key} of {i}");
    }
    has(
        i,
        json!({
            "depth": 10,
            "implied_depth": 2,
            "rpt_seq": 4,
            "bid": 100,
            "bid_size": 7,
            "bid_orders": 3,
            "ask": 110,
            "ask_size": 8,
            "ask_orders": 4,
            "implied_bid": 99,
            "implied_bid_size": 9,
            "implied_ask": 111,
            "implied_ask_size": 11,
            "duplicates": 2,
            "last_transact_time": T0 + MS,
        }),
    );
    let j = out.sym(6);
    let o = j.as_object().unwrap();
    assert_eq!(o.get("bid_orders"), Some(&Value::Null), "{j}");
    assert!(!o.contains_key("ask_orders"), "{j}");
    has(j, json!({"bid": 50, "bid_size": 10, "duplicates": 0}));
}

/// The summary's level 1 of each side is the visible book's (spec mdp3
/// §5): changes of an event the capture ends inside are not in it, though
/// their RptSeq is.
#[test]
fn an_instruments_summary_shows_the_visible_books() {
    let mut ch = Channel::new("");
    ch.send(
        MS,
        A,
        event(1, &[bid(1, 1, 100), entry(1, 2, New, ImpliedBid, 1, 90)]),
    );
    let open = [change(1, 3, 101), entry(1, 4, Change, ImpliedBid, 1, 91)];
    ch.send(2 * MS, A, packet(2, &[book(0, &open)]));
    let out = ch.run();
    has(
        out.sym(1),
        json!({"bid": 100, "implied_bid": 90, "rpt_seq": 4}),
    );
}

/// "Summary per mdp3 feed" lists its keys, and "Per instrument, keyed
/// `#<SecurityID>`" the instrument's, side keys "absent when the side is
/// empty" (spec mdp3 §5), under the feed's `symbols` (§9.9); what
/// `heartbeats` (processed, on `lines`), `definitions` (messages),
/// `snapshot_packets`, `cached`, `missing`, `last_transact_time` (of the
/// last applied entry) and `min_price_increment` (null when unknown)
/// count.
#[test]
fn the_summary_holds_the_contracts_keys() {
    let mut ch = Channel::new("");
    let no_tick = Def {
        template: 55,
        tick: None,
        ..def(1, "ESZ6", "ES", "ES")
    };
    let two = [no_tick.message(), def(2, "NQZ6", "NQ", "NQ").message()];
    ch.send(0, DEF_A, encode::packet(1, T0, &two));
    let quoted = [
        bid(1, 1, 100),
        offer(1, 2, 110),
        entry(1, 3, New, ImpliedBid, 1, 99),
        entry(1, 4, New, ImpliedOffer, 1, 111),
    ];
    let first = packet(
        1,
        &[
            book_at(T0 + MS, EOE, &quoted),
            status(Some(1), "", "", 17),
            encode::heartbeat(V),
        ],
    );
    ch.send(MS, A, first.clone());
    ch.send(MS, B, first);
    // Heartbeats on the snapshot and definition lines are not the
    // `lines`' (`heartbeats` counts those processed there only).
    ch.send(2 * MS, SNAP_A, snapshots(&[encode::heartbeat(V)]));
    ch.send(
        2 * MS,
        DEF_A,
        encode::packet(1, T0, &[encode::heartbeat(V)]),
    );
    ch.send(2 * MS, SNAP_A, b"bad".to_vec());
    ch.send(
        3 * MS,
        A,
        packet(2, &[book_at(T0 + 3 * MS, EOE, &[change(1, 6, 101)])]),
    );
    let out = ch.run();
    let f = out.feed();
    let keys = |v: &Value| {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    let mut want: Vec<&str> = vec![
        "packets",
        "rejected",
        "rejected_by_reason",
        "messages",
        "messages_by_template",
        "unknown_templates",
        "next",
        "gaps_open",
        "packet_gaps",
        "packets_lost",
        "duplicates",
        "recovered",
        "heartbeats",
        "channel_resets",
        "sequence_restarts",
        "stale_sequence",
        "snapshot_packets",
        "snapshots_applied",
        "snapshots_ignored",
        "definitions",
        "cache_overflows",
        "cached",
        "ticks_lost",
        "anomalies",
        "mbo_messages",
        "mbo_order_entries",
        "symbols",
    ];
    want.sort();
    assert_eq!(keys(f), want);
    let sides = [
        "bid",
        "bid_size",
        "bid_orders",
        "ask",
        "ask_size",
        "ask_orders",
        "implied_bid",
        "implied_bid_size",
        "implied_ask",
        "implied_ask_size",
    ];
    let mut bare: Vec<&str> = vec![
        "security_id",
        "symbol",
        "group",
        "asset",
        "depth",
        "implied_depth",
        "rpt_seq",
        "suspect",
        "unverified",
        "overflowed",
        "missing",
        "cached",
        "ticks_lost",
        "duplicates",
        "snapshots_applied",
        "snapshots_ignored",
        "status",
        "trading_status",
        "last_transact_time",
        "display_factor",
        "min_price_increment",
    ];
    bare.sort();
    let mut full: Vec<&str> = bare.iter().chain(&sides).copied().collect();
    full.sort();
    assert_eq!(keys(out.sym(1)), full);
    assert_eq!(keys(out.sym(2)), bare);
    has(
        f,
        json!({
            "heartbeats": 1,
            "definitions": 2,
            "snapshot_packets": 1,
            "messages": 7,
            "cached": 1,
            "next": 3,
        }),
    );
    let i = out.sym(1);
    has(
        i,
        json!({
            "security_id": 1,
            "symbol": "ESZ6",
            "group": "ES",
            "asset": "ES",
            "rpt_seq": 4,
            "missing": 1,
            "cached": 1,
            "bid": 100,
            "bid_size": 10,
            "bid_orders": 2,
            "ask": 110,
            "implied_bid": 99,
            "implied_ask_size": 10,
            "status": "trading",
            "trading_status": 17,
            "last_transact_time": (T0 + MS),
            "display_factor": 1_000_000_000,
            "min_price_increment": null,
        }),
    );
    let nq = out.sym(2);
    has(
        nq,
        json!({"min_price_increment": 250_000_000, "status": null, "rpt_seq": null}),
    );
}

// ---------------------------------------------------------------------------
// §6 Configuration

/// The configuration of spec mdp3 §6, as written there, is valid and
/// means what its comments say; "every other key to the value shown".
#[test]
fn the_contracts_configuration_example_is_valid() {
    let text = r#"
    [[feed]]
    name = "cme-310"
    protocol = "mdp3"
    lines = ["239.3.1.1:14310", "239.3.1.2:15310"]            # incremental A, optional B
    snapshot_lines = ["239.3.1.3:14311", "239.3.1.4:15311"]   # optional, 0-2
    definition_lines = ["239.3.1.5:14312"]                    # optional, 0-2
    definitions = "defs-310.pcap"                             # optional
    snapshot_join = "on_demand"      # or "always"
    snapshot_max_loops = 3           # 1..=1000
    stale_threshold_ms = 32000       # CME heartbeats after 30 s without traffic
    source_threshold_ms = 32000
    clock_offset = "auto"
    offset_window_ms = 60000
    gap_timeout_ms = 5               # 1..=60000
    max_cached = 1000000             # 0..=100000000 (0: cache nothing, wait for snapshots)
    default_depth = 10               # 1..=127, without a definition
    default_implied_depth = 2        # 1..=127
    restart_margin = 10000           # 1..=1000000
"#;
    let dir = tempfile::tempdir().unwrap();
    let defs = std::fs::File::create(dir.path().join("defs-310.pcap")).unwrap();
    CaptureWriter::new(defs, Format::PcapNanos, Link::Ethernet)
        .unwrap()
        .finish()
        .unwrap();
    let path = dir.path().join("cme.toml");
    std::fs::write(&path, text).unwrap();
    let config = Config::load(&path).unwrap();
    let feed = &config.feeds[0];
    let ProtocolSettings::Mdp3(c) = &feed.settings else {
        panic!("not an mdp3 feed")
    };
    assert_eq!(feed.lines, [addr(A), addr(B)]);
    assert_eq!(c.snapshot_lines, [addr(SNAP_A), addr(SNAP_B)]);
    assert_eq!(c.definition_lines, [addr(DEF_A)]);
    assert_eq!(
        c.definitions.as_deref(),
        Some(dir.path().join("defs-310.pcap").as_path())
    );
    assert_eq!(
        (c.snapshot_join, c.snapshot_max_loops),
        (SnapshotJoin::OnDemand, 3)
    );
    assert_eq!(
        (feed.thresholds.stale_ns, feed.thresholds.source_ns),
        (32_000 * MS, 32_000 * MS)
    );
    assert_eq!(
        feed.offset,
        OffsetMode::Auto {
            window_ns: 60_000 * MS
        }
    );
    assert_eq!((c.gap_timeout_ns, c.max_cached), (5 * MS, 1_000_000));
    assert_eq!(
        (c.default_depth, c.default_implied_depth, c.restart_margin),
        (10, 2, 10_000)
    );
    // The same without the optional keys: the values shown.
    let required: String = text
        .lines()
        .filter(|l| {
            ["[[feed]]", "name", "protocol", "lines", "stale_", "source_"]
                .iter()
                .any(|k| l.trim_start().starts_with(k))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let bare = Config::parse(&required, "cme.toml").unwrap();
    let ProtocolSettings::Mdp3(d) = &bare.feeds[0].settings else {
        panic!("not an mdp3 feed")
    };
    assert_eq!(
        (
            d.snapshot_lines.len(),
            d.definition_lines.len(),
            &d.definitions
        ),
        (0, 0, &None)
    );
    assert_eq!(
        (d.snapshot_join, d.snapshot_max_loops, d.gap_timeout_ns),
        (SnapshotJoin::OnDemand, 3, 5 * MS)
    );
    assert_eq!(
        (
            d.max_cached,
            d.default_depth,
            d.default_implied_depth,
            d.restart_margin
        ),
        (1_000_000, 10, 2, 10_000)
    );
    assert_eq!(
        bare.feeds[0].offset,
        OffsetMode::Auto {
            window_ns: 60_000 * MS
        }
    );
}

/// "Required: `name`, `protocol`, `lines`, both thresholds" and "`kind`,
/// `recovery`, `recovery_listen`, `max_held`, `join_gap_max`, `timezone`
/// are errors here" (spec mdp3 §6).
#[test]
fn required_keys_and_other_protocols_keys() {
    let feed = "[[feed]]\nname = \"cme\"\nprotocol = \"mdp3\"\nlines = [\"239.3.1.1:14310\"]\n\
                stale_threshold_ms = 1000\nsource_threshold_ms = 1000\n";
    Config::parse(feed, "cme.toml").unwrap();
    for key in ["name", "lines", "stale_threshold_ms", "source_threshold_ms"] {
        let without: String = feed
            .lines()
            .filter(|l| !l.starts_with(key))
            .map(|l| format!("{l}\n"))
            .collect();
        let e = Config::parse(&without, "cme.toml").unwrap_err().to_string();
        assert!(e.contains(key), "{key}: {e}");
    }
    // `lines` lists line A and, optionally, line B: one or two addresses.
    let one = "lines = [\"239.3.1.1:14310\"]";
    for lines in [
        "lines = []",
        "lines = [\"239.3.1.1:14310\", \"239.3.1.2:15310\", \"239.3.1.7:16310\"]",
    ] {
        let e = Config::parse(&feed.replace(one, lines), "cme.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("lines must list 1 or 2"), "{lines}: {e}");
    }
    let two = "lines = [\"239.3.1.1:14310\", \"239.3.1.2:15310\"]";
    Config::parse(&feed.replace(one, two), "cme.toml").unwrap();
    // Without `protocol` the feed is another protocol's, which refuses
    // the MDP3 keys.
    let sqf =
        feed.replace("protocol = \"mdp3\"\n", "") + "snapshot_lines = [\"239.3.1.3:14311\"]\n";
    assert!(Config::parse(&sqf, "cme.toml").is_err());
    for line in [
        "kind = \"delta\"",
        "recovery = \"127.0.0.1:1\"",
        "recovery_listen = \"0.0.0.0:0\"",
        "max_held = 1",
        "join_gap_max = 1",
        "timezone = \"UTC\"",
    ] {
        let e = Config::parse(&format!("{feed}{line}\n"), "cme.toml")
            .unwrap_err()
            .to_string();
        let key = line.split(' ').next().unwrap();
        assert!(e.contains(key), "{key}: {e}");
    }
}

/// "An address used twice, by any service of any feed, is a configuration
/// error" (spec mdp3 §6).
#[test]
fn an_address_used_twice_by_any_service_of_any_feed_is_refused() {
    let feed = |name: &str, lines: &str, snapshot: &str, definition: &str| {
        format!(
            "[[feed]]\nname = \"{name}\"\nprotocol = \"mdp3\"\nlines = [\"{lines}\"]\n\
             snapshot_lines = [\"{snapshot}\"]\ndefinition_lines = [\"{definition}\"]\n\
             stale_threshold_ms = 1000\nsource_threshold_ms = 1000\n"
        )
    };
    let a = feed("a", "239.3.1.1:1", "239.3.1.2:1", "239.3.1.3:1");
    let ok = format!(
        "{a}{}",
        feed("b", "239.3.2.1:1", "239.3.2.2:1", "239.3.2.3:1")
    );
    assert_eq!(Config::parse(&ok, "cme.toml").unwrap().feeds.len(), 2);
    let sqf = "[[feed]]\nname = \"s\"\nkind = \"full\"\nlines = [\"239.3.1.2:1\"]\n\
               stale_threshold_ms = 1000\nsource_threshold_ms = 1000\n";
    for (twice, shared) in [
        (
            feed("a", "239.3.1.1:1", "239.3.1.1:1", "239.3.1.3:1"),
            "239.3.1.1:1",
        ),
        (
            feed("a", "239.3.1.1:1", "239.3.1.2:1", "239.3.1.2:1"),
            "239.3.1.2:1",
        ),
        (
            format!(
                "{a}{}",
                feed("b", "239.3.1.3:1", "239.3.2.2:1", "239.3.2.3:1")
            ),
            "239.3.1.3:1",
        ),
        (
            format!(
                "{a}{}",
                feed("b", "239.3.2.1:1", "239.3.2.2:1", "239.3.1.2:1")
            ),
            "239.3.1.2:1",
        ),
        (format!("{a}{sqf}"), "239.3.1.2:1"),
    ] {
        let e = Config::parse(&twice, "cme.toml").unwrap_err().to_string();
        assert!(e.contains(shared), "{twice}: {e}");
    }
}

/// "Per-instrument overrides as sqf-v1 §7, `name` a Symbol or
/// `#SecurityID`" (spec mdp3 §6): either name reaches the instrument,
/// whichever name the check uses.
#[test]
fn an_override_names_a_symbol_or_a_security_id() {
    let keys = "[[feed.symbol]]\nname = \"#1\"\nstale_threshold_ms = 100\n\
                [[feed.symbol]]\nname = \"NQZ6\"\nstale_threshold_ms = 100\n";
    let mut ch = Channel::new(keys);
    ch.send(0, DEF_A, def(1, "ESZ6", "ES", "ES").packet());
    ch.send(0, DEF_A, def(2, "NQZ6", "NQ", "NQ").packet());
    ch.send(
        0,
        A,
        event(1, &[bid(1, 1, 100), bid(2, 1, 200), bid(3, 1, 300)]),
    );
    let c = ["ESZ6", "#1", "NQZ6", "#2", "#3"].map(|n| ch.check(150 * MS, n));
    let out = ch.run();
    let stale = r(&["stale"]);
    assert_eq!(
        c.map(|i| out.reasons(i)),
        [stale.clone(), stale.clone(), stale.clone(), stale, ok()]
    );
}

/// A Symbol with a space between others (an option's) names its
/// instrument in a check and an override, as live publishes it; one
/// with a space at an end is no name (answered `no_quote`).
#[test]
fn an_options_symbol_with_a_space_names_its_instrument() {
    let keys = "[[feed.symbol]]\nname = \"ESZ6 C5000\"\nstale_threshold_ms = 100\n";
    let mut ch = Channel::new(keys);
    ch.send(0, DEF_A, def(1, "ESZ6 C5000", "ES", "ES").packet());
    ch.send(0, A, event(1, &[bid(1, 1, 100), offer(1, 2, 110)]));
    let fresh = ch.check(50 * MS, "ESZ6 C5000");
    let late = ch.check(150 * MS, "ESZ6 C5000");
    let padded = ch.check(50 * MS, "ESZ6 C5000 ");
    let out = ch.run();
    assert_eq!(
        (out.reasons(fresh), out.top(fresh)),
        (ok(), (Some(100), Some(110)))
    );
    assert_eq!(out.reasons(late), r(&["stale"]), "the override's threshold");
    assert_eq!(out.reasons(padded), r(&["no_quote"]));
}

/// An instrument named by an override of both its `#SecurityID` and its
/// Symbol takes its `#SecurityID`'s, whichever name the check uses; a
/// `#SecurityID` not written as the channel names it (a sign, a leading
/// zero) is refused, not accepted and never used.
#[test]
fn an_override_of_the_security_id_comes_before_the_symbols() {
    let keys = "[[feed.symbol]]\nname = \"ESZ6\"\nstale_threshold_ms = 5000\n\
                [[feed.symbol]]\nname = \"#1\"\nstale_threshold_ms = 100\n";
    let mut ch = Channel::new(keys);
    ch.send(0, DEF_A, def(1, "ESZ6", "ES", "ES").packet());
    ch.send(0, A, event(1, &[bid(1, 1, 100), offer(1, 2, 101)]));
    let c = ["ESZ6", "#1"].map(|n| ch.check(150 * MS, n));
    let out = ch.run();
    assert_eq!(c.map(|i| out.reasons(i)), [r(&["stale"]), r(&["stale"])]);
    let base = "[[feed]]\nname = \"cme\"\nprotocol = \"mdp3\"\nlines = [\"239.3.1.1:14310\"]\n\
                stale_threshold_ms = 1000\nsource_threshold_ms = 1000\n";
    for name in ["#01", "#+1", "#1x", "#", "#-0", "#-01", "#2147483648"] {
        let text = format!("{base}[[feed.symbol]]\nname = \"{name}\"\nstale_threshold_ms = 5\n");
        let e = Config::parse(&text, "cme.toml").unwrap_err().to_string();
        assert!(e.contains("not a valid instrument"), "{name}: {e}");
    }
    // A negative SecurityID (an Int32 on the wire) is named as the
    // channel publishes it: with its minus sign.
    for name in ["#-5", "#-2147483648", "#2147483647"] {
        let text = format!("{base}[[feed.symbol]]\nname = \"{name}\"\nstale_threshold_ms = 5\n");
        assert!(Config::parse(&text, "cme.toml").is_ok(), "{name}");
    }
}

// ---------------------------------------------------------------------------
// §9 Clarifications

/// "**Offset samples** are taken from processed incremental packets only
/// (not duplicates, snapshots or definitions)" (spec mdp3 §9.5), nor late
/// copies of the sequence before a restart, with `clock_offset = "auto"`
/// (the minimum of arrival − SendingTime).
#[test]
fn offset_samples_come_from_processed_incremental_packets_only() {
    let mut f = auto_offset_feed();
    let t = T0 + 100 * MS;
    let hb = || vec![encode::heartbeat(V)];
    f.on_incremental(&encode::packet(1, t - 10 * MS, &hb()), t)
        .unwrap();
    assert_eq!(f.offset(), i128::from(10 * MS));
    // Each of these would sample 0 or less.
    f.on_incremental(&encode::packet(1, t + MS, &hb()), t + MS)
        .unwrap();
    let snap = snapshot(1, 9, 1, None, &[level(Bid, 1, 1)]);
    f.on_snapshot(&encode::packet(1, t + 2 * MS, &[snap]), t + 2 * MS)
        .unwrap();
    let d = def(9, "ZZZ", "Z", "Z").message();
    f.expire(t + 3 * MS);
    f.on_definitions(&encode::packet(1, t + 3 * MS, &[d]))
        .unwrap();
    let mut bad = encode::packet(2, t + 4 * MS, &hb());
    bad.push(0);
    assert!(f.on_incremental(&bad, t + 4 * MS).is_err());
    assert_eq!(f.sequence().counters().duplicates, 1);
    assert_eq!(f.offset(), i128::from(10 * MS));
    // A processed packet does.
    f.on_incremental(&encode::packet(2, t + 3 * MS, &hb()), t + 5 * MS)
        .unwrap();
    assert_eq!(f.offset(), i128::from(2 * MS));
    // After a restart, a late copy of the old sequence does not.
    let reset = [encode::channel_reset(V, t, EOE, 310)];
    f.on_incremental(&encode::packet(3, t + 4 * MS, &reset), t + 6 * MS)
        .unwrap();
    f.on_incremental(&encode::packet(1, t + 5 * MS, &hb()), t + 7 * MS)
        .unwrap();
    f.on_incremental(&encode::packet(3, t + 7 * MS, &hb()), t + 7 * MS)
        .unwrap();
    let q = f.sequence().counters();
    assert_eq!((q.sequence_restarts, q.stale_sequence), (1, 1));
    assert_eq!(f.offset(), i128::from(2 * MS));
}

/// A feed whose offset is `auto` (a window of a minute).
fn auto_offset_feed() -> Feed {
    Feed::new(Settings {
        sequencing: sequence::Settings {
            gap_timeout_ns: 5 * MS,
            restart_margin: 10_000,
        },
        max_cached: 1_000,
        max_instruments: 100_000,
        default_depth: 10,
        default_implied_depth: 2,
        offset: OffsetMode::Auto {
            window_ns: 60_000 * MS,
        },
        offset_queue: 64,
    })
}

/// §9.5: a packet that fills a gap is processed, so it samples the
/// offset as a new one does.
#[test]
fn a_packet_filling_a_gap_samples_the_offset() {
    let mut f = auto_offset_feed();
    let t = T0 + 100 * MS;
    let hb = || vec![encode::heartbeat(V)];
    f.on_incremental(&encode::packet(1, t - 10 * MS, &hb()), t)
        .unwrap();
    f.on_incremental(&encode::packet(3, t - 9 * MS, &hb()), t + MS)
        .unwrap();
    assert_eq!(f.offset(), i128::from(10 * MS));
    f.on_incremental(&encode::packet(2, t + MS, &hb()), t + 2 * MS)
        .unwrap();
    assert_eq!(f.sequence().counters().recovered, 1);
    assert_eq!(f.offset(), i128::from(MS));
}

// ---------------------------------------------------------------------------
// The coverage table

/// "Where this page is silent, do what a careful feed handler would do
/// and write it down in the project's own docs" (the preamble) and §9's
/// "decide, document, and keep the decision stable": every decision and
/// departure docs/mdp3.md writes down has its row in
/// docs/mdp3-coverage.md naming the tests that hold it (which
/// `the_coverage_table_names_tests_that_exist` finds).
#[test]
fn every_decision_in_the_docs_is_held_by_tests() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let docs = std::fs::read_to_string(root.join("docs/mdp3.md")).unwrap();
    let coverage = std::fs::read_to_string(root.join("docs/mdp3-coverage.md")).unwrap();
    let section = |heading: &str| {
        let start = docs.find(&format!("\n## {heading}\n")).expect(heading) + 1;
        let end = docs[start..]
            .find("\n## ")
            .map_or(docs.len(), |e| start + e);
        &docs[start..end]
    };
    for heading in [
        "Decided where CME is silent",
        "Where the handler departs from the contract",
    ] {
        let bullets: Vec<&str> = section(heading)
            .lines()
            .filter_map(|l| l.strip_prefix("- "))
            .collect();
        let titles: Vec<&str> = bullets
            .iter()
            .filter_map(|l| l.strip_prefix("**")?.split_once("**").map(|(t, _)| t))
            .collect();
        assert_eq!(
            titles.len(),
            bullets.len(),
            "{heading}: a bullet without a bold title"
        );
        assert!(titles.len() >= 5, "{heading}: {titles:?}");
        for t in titles {
            let row = coverage
                .lines()
                .find(|l| l.starts_with(&format!("| **{t}**")))
                .unwrap_or_else(|| panic!("{heading}: no row for **{t}** in mdp3-coverage.md"));
            assert!(row.contains(".rs::"), "**{t}**: no test named");
        }
    }
}

/// Every test `docs/mdp3-coverage.md` names (`file::test`) exists in its
/// file: a bare `.rs` name is a file of the MDP3 implementation, a
/// `mdp3_*.rs` one an integration test, any other a path from the root.
#[test]
fn the_coverage_table_names_tests_that_exist() {
    let named = crate::common::coverage_table_tests("docs/mdp3-coverage.md", "mdp3", "mdp3_");
    assert!(named > 150, "{named} tests named");
}

/// Explaining an instrument changes none of the replay's answers or its
/// summary when capture time steps back: each gap is given up when a check
/// or a packet at its own time would give it up, not at the latest time
/// the explanation has seen; nor when the capture ends with a gap open
/// (nothing expires at the end).
#[test]
fn explaining_changes_nothing_when_time_steps_back_or_a_gap_is_left_open() {
    let mut c = Channel {
        as_sent: true,
        ..Channel::new("")
    };
    c.send(1000 * MS, A, event(1, &[bid(7, 1, 100)]));
    // Another interface's packets, a second earlier: 3 opens [2, 3)
    // (deadline 5 ms), 5 opens [4, 5) (deadline 8 ms).
    c.send(0, A, event(3, &[change(7, 3, 101)]));
    c.send(3 * MS, A, event(5, &[change(7, 5, 102)]));
    // At 6 ms: [2, 3) given up, and 4 fills [4, 5).
    c.send(6 * MS, A, event(4, &[change(7, 4, 103)]));
    // 8 opens [6, 8), left open at the end.
    c.send(7 * MS, A, event(8, &[change(7, 8, 104)]));
    for t in [1, 4, 6, 7] {
        c.check(t * MS, "#7");
    }
    let plain = c.run();
    let watched = c.run_explaining(Some("#7")).0;
    assert_eq!(watched.lines, plain.lines);
    assert_eq!(watched.summary, plain.summary);
    assert_eq!(plain.feed()["gaps_open"], 1, "{}", plain.feed());
}

/// Not in the contract (docs/mdp3.md, "A snapshot taken before a packet
/// never received"): a snapshot whose LastMsgSeqNumProcessed is below a
/// packet given up cannot show what that packet did to its instrument,
/// so it applies but leaves the instrument unverified (`suspect`), where
/// matched by RptSeq alone it would answer `ok` on the book before the
/// lost update; one taken after the packet verifies it. The other
/// line's copy of the first applies again, leaving it as it was.
#[test]
fn a_snapshot_taken_before_a_packet_given_up_leaves_its_instrument_unverified() {
    let mut ch = Channel::new("");
    ch.send(0, A, event(1, &[bid(7, 1, 100)]));
    // Packet 2 (#7's RptSeq 2, bid 101) lost on both lines; 3 reveals it.
    ch.send(MS, A, heartbeat(3));
    let given_up = ch.check(7 * MS, "#7");
    // A loop taken at packet 1: RptSeq 1, bid 100.
    ch.send(
        8 * MS,
        SNAP_A,
        snapshots(&[snapshot(1, 7, 1, None, &[level(Bid, 1, 100)])]),
    );
    // Line B's copy: the instrument, unverified and not past it, takes it
    // again (docs/mdp3.md): the same book, counted again.
    ch.send(
        8 * MS + MS / 2,
        SNAP_B,
        snapshots(&[snapshot(1, 7, 1, None, &[level(Bid, 1, 100)])]),
    );
    let before = ch.check(9 * MS, "#7");
    // Taken at packet 3: RptSeq 2, bid 101.
    ch.send(
        10 * MS,
        SNAP_A,
        snapshots(&[snapshot(3, 7, 2, None, &[level(Bid, 1, 101)])]),
    );
    let after = ch.check(11 * MS, "#7");
    let out = ch.run();
    assert_eq!(out.reasons(given_up), r(&["suspect"]));
    assert_eq!(
        (out.reasons(before), out.top(before).0),
        (r(&["suspect"]), Some(100))
    );
    assert_eq!((out.reasons(after), out.top(after).0), (ok(), Some(101)));
    assert_eq!(out.sym(7)["snapshots_applied"].as_u64(), Some(3));
}

/// The same, in a gap partly filled: of packets 2 and 3 lost on line A,
/// line B brings 3; 2 is given up. A snapshot taken at packet 1 leaves the
/// instrument unverified; one taken at packet 2, the last never received,
/// verifies it (packet 3, received, is no reason to doubt it).
#[test]
fn a_snapshot_taken_at_the_last_packet_given_up_verifies_its_instrument() {
    for (last, want) in [(1, r(&["suspect"])), (2, ok())] {
        let mut ch = Channel::new("");
        ch.send(0, A, event(1, &[bid(7, 1, 100)]));
        ch.send(MS, A, heartbeat(4));
        ch.send(2 * MS, B, heartbeat(3));
        let given_up = ch.check(7 * MS, "#7");
        ch.send(
            8 * MS,
            SNAP_A,
            snapshots(&[snapshot(last, 7, 1, None, &[level(Bid, 1, 100)])]),
        );
        let after = ch.check(9 * MS, "#7");
        let out = ch.run();
        assert_eq!(out.reasons(given_up), r(&["suspect"]), "taken at {last}");
        assert_eq!(out.reasons(after), want, "taken at {last}");
    }
}

/// Not in the contract (docs/mdp3.md, "A snapshot taken before a packet
/// never received"): the lines joined at packet 1000 never receive the
/// packets below it; an instrument healed before it by a snapshot taken
/// at 990 is unverified from the first packet on (packets 991–999 could
/// hold its update), and one taken at 999 or later verifies it; an
/// instrument whose snapshot was taken at 999 stays healthy.
#[test]
fn a_snapshot_taken_before_the_lines_first_packet_leaves_its_instrument_unverified() {
    let mut ch = Channel::new("");
    ch.send(
        0,
        SNAP_A,
        snapshots(&[
            snapshot(990, 7, 55, None, &[level(Bid, 1, 100)]),
            snapshot(999, 8, 40, None, &[level(Bid, 1, 200)]),
        ]),
    );
    ch.send(MS, A, heartbeat(1000));
    let seven = ch.check(2 * MS, "#7");
    let eight = ch.check(2 * MS, "#8");
    ch.send(
        3 * MS,
        SNAP_A,
        snapshots(&[snapshot(1000, 7, 55, None, &[level(Bid, 1, 100)])]),
    );
    let verified = ch.check(4 * MS, "#7");
    let out = ch.run();
    assert_eq!(
        (out.reasons(seven), out.top(seven).0),
        (r(&["suspect"]), Some(100))
    );
    assert_eq!(out.reasons(eight), ok());
    assert_eq!(out.reasons(verified), ok());
    // The explanation says why at the lines' first packet.
    let text = ch.explain("#7").1;
    let first = explained(&text, "packet MsgSeqNum 1000");
    assert!(
        first.contains("unverified: its snapshot was taken before packets never received")
            && first.ends_with("-> suspect"),
        "{text}"
    );
}

/// Not in the contract (docs/mdp3.md, "A snapshot taken before a packet
/// never received"): a snapshot taken at or past the lines' first packet
/// (1000 here) leaves its instrument unverified from that packet on, and
/// the explanation says why; its next entry in RptSeq order verifies it.
#[test]
fn a_snapshot_taken_past_the_lines_first_packet_leaves_its_instrument_unverified() {
    let mut ch = Channel::new("");
    ch.send(
        0,
        SNAP_A,
        snapshots(&[snapshot(1000, 7, 55, None, &[level(Bid, 1, 100)])]),
    );
    ch.send(MS, A, heartbeat(1000));
    let at_first = ch.check(2 * MS, "#7");
    ch.send(3 * MS, A, event(1001, &[change(7, 56, 101)]));
    let next = ch.check(4 * MS, "#7");
    let out = ch.run();
    assert_eq!(
        (out.reasons(at_first), out.top(at_first).0),
        (r(&["suspect"]), Some(100))
    );
    assert_eq!((out.reasons(next), out.top(next).0), (ok(), Some(101)));
    let text = ch.explain("#7").1;
    let first = explained(&text, "packet MsgSeqNum 1000");
    assert!(
        first.contains("or at or past the lines' first packet") && first.ends_with("-> suspect"),
        "{text}"
    );
}

/// The explanation names a clock offset that moved when the source age
/// crossed its threshold with it: here the watermark stays (the second
/// packet's TransactTime is the first's), and the auto offset falls from
/// 3 ms to 0 with the second packet's SendingTime, so the age at its
/// arrival passes 4 ms.
#[test]
fn an_offset_that_moved_the_source_age_across_its_threshold_is_told() {
    let mut ch = Channel::new("clock_offset = \"auto\"\nsource_threshold_ms = 4\n");
    let sent = T0 - 3 * MS;
    ch.send(
        0,
        A,
        encode::packet(1, sent, &[book_at(sent, EOE, &[bid(1, 1, 100)])]),
    );
    let before = ch.check(MS, "#1");
    ch.send(
        2 * MS,
        A,
        encode::packet(2, T0 + 2 * MS, &[book_at(sent, EOE, &[change(1, 2, 101)])]),
    );
    let after = ch.check(2 * MS + 1, "#1");
    let (out, text) = ch.explain("#1");
    assert_eq!(out.reasons(before), ok());
    assert_eq!(out.reasons(after), r(&["stale_at_source"]), "{text}");
    let step = explained(&text, "packet MsgSeqNum 2");
    assert!(
        step.contains("clock offset 3 ms -> 0") && step.ends_with("-> stale_at_source"),
        "{text}"
    );
    // A fixed offset, the channel's first packet already old at its
    // source: stale_at_source from the first step, no offset moved.
    let mut ch = Channel::new("clock_offset = 5000000\nsource_threshold_ms = 4\n");
    ch.send(
        0,
        A,
        encode::packet(1, T0, &[book_at(T0 - 20 * MS, EOE, &[bid(1, 1, 100)])]),
    );
    let first = ch.check(1, "#1");
    let (out, text) = ch.explain("#1");
    assert_eq!(out.reasons(first), r(&["stale_at_source"]), "{text}");
    assert!(!text.contains("clock offset 0"), "{text}");
}

/// A capture whose clock steps back (a recording of a live run whose
/// clock did): the channel's gaps open before the step are given up a
/// timeout after the step's time, as live gives them up, not held for
/// as long as the step; a gap opened after it, at its own deadline.
#[test]
fn a_capture_clock_stepped_back_gives_gaps_up_as_live_does() {
    let mut ch = Channel {
        as_sent: true,
        ..Channel::new("")
    };
    ch.send(1000 * MS, A, heartbeat(1));
    ch.send(1000 * MS, A, heartbeat(3)); // [2, 3), deadline 1005 ms
                                         // The clock steps back a second: 5 opens [4, 5), deadline 6 ms; the
                                         // gap before the step is due by then too.
    ch.send(MS, A, heartbeat(5));
    ch.send(20 * MS, B, heartbeat(2));
    ch.send(20 * MS, B, heartbeat(4));
    let out = ch.run();
    has(
        out.feed(),
        json!({"packet_gaps": 2, "packets_lost": 2, "gaps_open": 0}),
    );
}

/// The line of `text` for the step at MsgSeqNum `s` (of `what`: a packet
/// or a snapshot packet).
fn explained<'t>(text: &'t str, what: &str) -> &'t str {
    text.lines()
        .find(|l| l.contains(what))
        .unwrap_or_else(|| panic!("no {what} in {text}"))
}

/// `replay --explain` names an instrument's deletion (`D`), which closes
/// it, and its listing again, which opens it.
#[test]
fn explain_names_a_deletion_and_a_listing_again() {
    let (_, text) = deleted_then_listed().explain("#7");
    let gone = explained(&text, "deleted by the venue (D)");
    assert!(gone.ends_with("ok -> closed"), "{text}");
    let back = explained(&text, "listed again after its deletion");
    assert!(back.ends_with("closed -> ok"), "{text}");
}

/// A ChannelReset come late (in a packet filling a gap) leaves the
/// instrument without a baseline: the explanation names the reset, not a
/// history that did not start at RptSeq 1.
#[test]
fn explain_names_a_late_channel_reset_for_the_lost_baseline() {
    let mut ch = Channel::new("");
    ch.send(0, A, event(100, &[bid(7, 1, 100)]));
    ch.send(MS, A, heartbeat(102));
    ch.send(
        2 * MS,
        B,
        packet(101, &[encode::channel_reset(V, T0, EOE, 310)]),
    );
    let after = ch.check(3 * MS, "#7");
    let (out, text) = ch.explain("#7");
    assert_eq!(out.reasons(after), r(&["no_quote"]), "{text}");
    let step = explained(&text, "packet MsgSeqNum 101");
    assert!(
        step.contains("no baseline since the ChannelReset")
            && !step.contains("did not start at RptSeq 1"),
        "{text}"
    );
}

/// Instrument 7 suspect at RptSeq 3 (2 missing), then one snapshot-line
/// datagram of two snapshots of it: RptSeq 5 (bid 105) taken after
/// MsgSeqNum `first`, RptSeq 4 (bid 104) after `second`. Its top bid once
/// it reads `ok` (asserted), and its explanation.
fn two_snapshots_of_a_suspect_instrument(first: u32, second: u32) -> (Option<i64>, String) {
    let mut ch = Channel::new("");
    ch.send(0, A, event(100, &[bid(7, 1, 100)]));
    ch.send(MS, A, event(101, &[change(7, 3, 101)]));
    ch.send(
        2 * MS,
        SNAP_A,
        snapshots(&[
            snapshot(first, 7, 5, None, &[level(Bid, 1, 105)]),
            snapshot(second, 7, 4, None, &[level(Bid, 1, 104)]),
        ]),
    );
    let after = ch.check(3 * MS, "#7");
    let (out, text) = ch.explain("#7");
    assert_eq!(out.reasons(after), ok(), "{text}");
    (out.top(after).0, text)
}

/// Two snapshots of one instrument in one datagram: the first heals it,
/// the second (older) is ignored because the first made it healthy; each
/// is told with its own RptSeq.
#[test]
fn explain_tells_each_snapshot_of_one_datagram() {
    let (top, text) = two_snapshots_of_a_suspect_instrument(101, 100);
    assert_eq!(top, Some(105));
    let step = explained(&text, "snapshot");
    assert!(
        step.contains("snapshot applied: RptSeq 5, after MsgSeqNum 101")
            && step.contains("snapshot ignored: the instrument is healthy at RptSeq 5"),
        "{text}"
    );
}

/// Two snapshots of one instrument in one datagram, the first taken far
/// past the lines (screened), the second applied: the explanation names
/// the one the channel applied, not the one the RptSeq rule alone would
/// have picked, and says why the other was ignored.
#[test]
fn explain_names_the_snapshot_applied_when_another_was_screened() {
    let (top, text) = two_snapshots_of_a_suspect_instrument(4_000_000_000, 101);
    assert_eq!(top, Some(104));
    let step = explained(&text, "snapshot");
    assert!(
        step.contains("snapshot applied: RptSeq 4, after MsgSeqNum 101")
            && step.contains("snapshot ignored: RptSeq 5 taken before the last ChannelReset or restart, or far past the lines")
            && !step.contains("MsgSeqNum 4000000000"),
        "{text}"
    );
}

/// A status is credited to the message in force (the newest that sets
/// one): a group halt after the instrument's own status, or before an
/// instrument's NoChange (103), is its group's.
#[test]
fn explain_credits_the_status_in_force() {
    for own in [17, 103] {
        let mut ch = Channel::new("");
        ch.send(0, DEF_A, def(7, "ESZ6", "ES", "ES").packet());
        ch.send(MS, A, event(1, &[bid(7, 1, 100), offer(7, 2, 101)]));
        let messages = match own {
            17 => [status(Some(7), "", "", 17), status(None, "ES", "ES", 2)],
            _ => [status(None, "ES", "ES", 2), status(Some(7), "", "", 103)],
        };
        ch.send(2 * MS, A, packet(2, &messages));
        let after = ch.check(3 * MS, "ESZ6");
        let (out, text) = ch.explain("ESZ6");
        assert_eq!(out.reasons(after), r(&["halted"]), "{text}");
        let step = explained(&text, "packet MsgSeqNum 2");
        assert!(
            step.contains("(SecurityStatus of its group)"),
            "{own}: {text}"
        );
    }
}

/// An instrument the channel refused for room (`max_instruments`) is
/// never quoted: the explanation says the channel refused instruments.
#[test]
fn explain_of_a_refused_instrument_says_the_channel_refused_some() {
    let mut ch = Channel::new("max_instruments = 1\n");
    ch.send(0, A, event(1, &[bid(7, 1, 100), bid(8, 1, 200)]));
    let text = ch.explain("#8").1;
    assert!(
        text.contains("never quoted in this capture: every check answers no_quote (the channel refused 1 instrument for room, max_instruments: it may be this one)"),
        "{text}"
    );
    let text = ch.explain("#7").1;
    assert!(!text.contains("refused"), "{text}");
}

/// A restart packet that also fills the book: the explanation says the
/// book was published at its end of event, not emptied by the restart.
#[test]
fn explain_of_a_restart_packet_with_entries_says_published() {
    let mut ch = Channel::new("restart_margin = 100\n");
    ch.send(0, A, event(1000, &[bid(1, 1, 100)]));
    ch.send(MS, A, event(1, &[bid(1, 1, 300)]));
    let after = ch.check(2 * MS, "#1");
    let (out, text) = ch.explain("#1");
    assert_eq!(out.top(after).0, Some(300), "{text}");
    let step = explained(&text, "packet MsgSeqNum 1 on incremental");
    assert!(
        step.contains("book published at the end of event in MsgSeqNum 1: bid")
            && !step.contains("emptied"),
        "{text}"
    );
}

/// An override of a Symbol holds the instrument the Symbol names: one
/// whose Symbol was deleted (`D`), or given to another instrument, is held
/// to the feed's thresholds, though its definition still says it.
#[test]
fn an_override_leaves_with_its_symbol() {
    let keys =
        "[[feed.symbol]]\nname = \"ESZ6\"\nstale_threshold_ms = 5000\nsource_threshold_ms = 5000\n";
    for how in ["deleted", "moved"] {
        let mut ch = Channel::new(keys);
        ch.send(0, DEF_A, def(1, "ESZ6", "ES", "ES").packet());
        ch.send(0, A, event(1, &[bid(1, 1, 100), bid(2, 1, 200)]));
        let before = ch.check(1500 * MS, "#1");
        let left = match how {
            "deleted" => Def {
                action: b'D',
                ..def(1, "ESZ6", "ES", "ES")
            },
            _ => Def {
                action: b'M',
                ..def(2, "ESZ6", "ES", "ES")
            },
        };
        ch.send(2000 * MS, DEF_A, left.packet());
        let after = ch.check(2500 * MS, "#1");
        let out = ch.run();
        assert_eq!(out.reasons(before), ok(), "{how}");
        // (Deleted, it is closed too: "A deleted instrument".)
        let want: &[&str] = match how {
            "deleted" => &["stale", "stale_at_source", "closed"],
            _ => &["stale", "stale_at_source"],
        };
        assert_eq!(out.reasons(after), r(want), "{how}");
    }
}

/// A replay's summary counts what `max_instruments` refused (left out
/// when nothing was).
#[test]
fn the_summary_counts_instruments_refused() {
    let mut ch = Channel::new("max_instruments = 1\n");
    ch.send(
        0,
        A,
        event(1, &[bid(7, 1, 100), bid(8, 1, 200), bid(9, 1, 300)]),
    );
    has(ch.run().feed(), json!({"instruments_refused": 2}));
    let mut ch = Channel::new("");
    ch.send(0, A, event(1, &[bid(7, 1, 100)]));
    assert!(ch.run().feed().get("instruments_refused").is_none());
}

/// A replay answers from the books whatever the table's room: one holding
/// more instruments than live has slots for the feed (the table less what
/// the other feeds reserve) says so (not in the contract: live, those past
/// them answer `no_quote`).
#[test]
fn more_instruments_than_the_slots_other_feeds_leave_are_told() {
    let itch = "[state]\ncapacity = 6\n[[feed]]\nname = \"nq\"\nprotocol = \"itch50\"\n\
                lines = [\"239.9.9.9:9000\"]\nstale_threshold_ms = 1000\n\
                source_threshold_ms = 1000\nmax_symbols = 3\n";
    // The replay's warnings of symbols past live's slots.
    let told = |ch: &Channel| -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::load(&ch.write(dir.path())).unwrap();
        let mut capture = CaptureReader::open(&dir.path().join("cme.pcap")).unwrap();
        let outcome = replay(&config, &mut capture, &[], |_| {});
        tickguard::replay::input_warnings(&config, &outcome.summary)
            .into_iter()
            .filter(|l| l.contains("slots live has"))
            .collect()
    };
    let mut ch = Channel::new(itch);
    let four: Vec<BookEntry> = (1..=4).map(|id| bid(id, 1, 100)).collect();
    ch.send(0, A, event(1, &four));
    assert_eq!(
        told(&ch),
        ["feed 'cme': 4 symbols held, more than the 3 slots live has for them ([state] capacity, or the feed's own limit): live, the ones past them answer no_quote, while this replay answered them from the books"]
    );
    // An SQF feed reserves one slot but takes what it needs: three here.
    let sqf = "[state]\ncapacity = 6\n[[feed]]\nname = \"lp\"\nkind = \"full\"\n\
               lines = [\"239.9.9.9:9000\"]\nstale_threshold_ms = 1000\n\
               source_threshold_ms = 1000\n";
    let mut ch = Channel::new(sqf);
    ch.send(0, A, event(1, &four));
    let mut b = tickguard::protocol::sqf::PacketBuilder::new(T0);
    for s in ["AAA", "BBB", "CCC"] {
        let symbol = tickguard::symbol::Symbol::parse(s).unwrap();
        b.quote(symbol, 1, T0, 1.0, 2.0);
    }
    ch.send(0, "239.9.9.9:9000", b.finish());
    let told = told(&ch);
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(
        told[0].starts_with("feed 'cme': 4 symbols held, more than the 3 slots"),
        "{told:?}"
    );
}

/// Instruments refused past `max_instruments` are told by the replay, not
/// only counted in the summary: their checks answer `no_quote` whatever
/// the lines say of them.
#[test]
fn instruments_refused_past_the_bound_are_told() {
    let told = |ch: &Channel| -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::load(&ch.write(dir.path())).unwrap();
        let mut capture = CaptureReader::open(&dir.path().join("cme.pcap")).unwrap();
        let outcome = replay(&config, &mut capture, &[], |_| {});
        tickguard::replay::input_warnings(&config, &outcome.summary)
            .into_iter()
            .filter(|l| l.contains("max_instruments"))
            .collect()
    };
    let mut ch = Channel::new("max_instruments = 2\n");
    let three: Vec<BookEntry> = (1..=3).map(|id| bid(id, 1, 100)).collect();
    ch.send(0, A, event(1, &three));
    ch.send(MS, A, event(2, &[bid(3, 2, 101)]));
    assert_eq!(
        told(&ch),
        ["feed 'cme': 2 messages or entries naming an instrument past its max_instruments, ignored (those instruments answer no_quote: raise max_instruments)"]
    );
    let mut ch = Channel::new("max_instruments = 3\n");
    ch.send(0, A, event(1, &three));
    assert!(told(&ch).is_empty());
}

/// A snapshot and an instrument status naming an instrument past
/// `max_instruments` are refused as a book entry is: counted, nothing
/// made or kept for it, its checks `no_quote`.
#[test]
fn a_snapshot_and_a_status_past_max_instruments_are_refused() {
    let mut ch = Channel::new("max_instruments = 1\n");
    ch.send(0, A, event(1, &[bid(7, 1, 100)]));
    ch.send(
        MS,
        SNAP_A,
        snapshots(&[snapshot(1, 8, 5, Some(17), &[level(Bid, 1, 200)])]),
    );
    ch.send(2 * MS, A, packet(2, &[status(Some(8), "", "", 18)]));
    let eight = ch.check(3 * MS, "#8");
    let seven = ch.check(3 * MS, "#7");
    let out = ch.run();
    has(out.feed(), json!({"instruments_refused": 2}));
    assert!(out.feed()["symbols"].get("#8").is_none(), "{}", out.feed());
    assert_eq!(out.reasons(eight), r(&["no_quote"]));
    assert_eq!((out.reasons(seven), out.top(seven).0), (ok(), Some(100)));
}
