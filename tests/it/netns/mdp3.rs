//! A CME MDP3 channel live in a namespace: `tickguard simulate --protocol
//! mdp3` on multicast incremental, snapshot and definition lines, and
//! `tickguard run` receiving it. The instruments are read back from other
//! processes (`check`, `stat --json`) and through `Reader`, and compared
//! with the venue's own books from its report; the snapshot groups'
//! membership is read from the namespace (`ip maddr`).

use super::*;
use std::collections::{BTreeMap, BTreeSet};
use tickguard::protocol::mdp3::status::{meaning, Meaning, State};
use tickguard::simulate::mdp3::{Params, Venue};
use tickguard::state::price::Price;
use tickguard::verdict::Reasons;

const FEED: &str = "cme";
const LINES: [&str; 2] = ["239.79.1.1:31401", "239.79.1.2:31402"];
const SNAPSHOT_LINES: [&str; 2] = ["239.79.1.3:31403", "239.79.1.4:31404"];
const DEFINITION_LINE: &str = "239.79.1.5:31405";
/// Period of the venue's snapshot loop, ms.
const LOOP_MS: u64 = 300;

/// The channel's configuration (both processes read it), with `extra`
/// keys for the feed.
fn mdp3_config(dir: &Path, shm: &Path, extra: &str) -> PathBuf {
    let cfg = dir.join("mdp3.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"{}[[feed]]
name = "{FEED}"
protocol = "mdp3"
lines = ["{}", "{}"]
snapshot_lines = ["{}", "{}"]
definition_lines = ["{DEFINITION_LINE}"]
snapshot_max_loops = 5
gap_timeout_ms = 20
clock_offset = 0
stale_threshold_ms = 60000
source_threshold_ms = 60000
{extra}
"#,
            super::sidecar_tables(shm, 1000),
            LINES[0],
            LINES[1],
            SNAPSHOT_LINES[0],
            SNAPSHOT_LINES[1],
        ),
    )
    .unwrap();
    cfg
}

/// `run` in the namespace (recording to `record` if given), its log in
/// `log`; waits until its publication answers.
fn mdp3_sidecar(ns: &Netns, cfg: &Path, shm: &Path, record: Option<&Path>, log: &Path) -> Killed {
    let mut cmd = ns.command(&bin());
    cmd.arg("run")
        .arg("--config")
        .arg(cfg)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
    if let Some(r) = record {
        cmd.arg("--record").arg(r);
    }
    let sidecar = Killed(cmd.spawn().unwrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    while !Reader::open(shm).health(now_ns()).is_ok() {
        assert!(Instant::now() < deadline, "sidecar did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    sidecar
}

/// `simulate --protocol mdp3` in the namespace with `args`, started: a
/// snapshot loop every [`LOOP_MS`], definitions as often, no heartbeats
/// (the packets a seed sends do not depend on timing).
fn mdp3_venue(ns: &Netns, cfg: &Path, args: &[&str]) -> Child {
    ns.command(&bin())
        .args(["simulate", "--protocol", "mdp3", "--config"])
        .arg(cfg)
        .args(["--feed", FEED, "--report", "--heartbeat-ms", "0"])
        .args(["--loop-ms", &LOOP_MS.to_string()])
        .args(["--definition-loop-ms", &LOOP_MS.to_string()])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `run` receiving the channel in a namespace of its own: the sidecar
/// (reading [`mdp3_config`] with `extra`, its log in `log`, recording to
/// `rec` if asked) and a reader of its publication. The sidecar stops
/// before the namespace goes.
struct Live {
    sidecar: Killed,
    reader: Reader,
    cfg: PathBuf,
    log: PathBuf,
    rec: PathBuf,
    scene: Scene,
}

impl Live {
    fn start(what: &str, extra: &str, record: bool) -> Live {
        let scene = Scene::new(what);
        let Scene { ns, dir, shm } = &scene;
        let cfg = mdp3_config(dir.path(), shm, extra);
        let (log, rec) = (dir.path().join("run.log"), dir.path().join("received.pcap"));
        let sidecar = mdp3_sidecar(ns, &cfg, shm, record.then_some(rec.as_path()), &log);
        Live {
            sidecar,
            reader: crate::common::live_reader(shm),
            cfg,
            log,
            rec,
            scene,
        }
    }

    /// The venue with `args`, started ([`mdp3_venue`]).
    fn venue(&self, args: &[&str]) -> Child {
        mdp3_venue(&self.scene.ns, &self.cfg, args)
    }

    /// The venue with `args`, run to its end; its report once the sidecar
    /// has taken everything it sent.
    fn run_venue(&self, args: &[&str]) -> serde_json::Value {
        let report = finish_within(&mut self.venue(args));
        wait_mdp3_settled(&self.reader, &report);
        report
    }
}

/// The value of the feed's counter `name`, as its descriptor names it.
fn counter_named(reader: &Reader, name: &str) -> u64 {
    reader
        .readings(0)
        .and_then(|rs| {
            rs.iter()
                .find(|r| r.descriptor.name == name)
                .map(|r| r.value)
        })
        .unwrap_or(0)
}

/// Waits until the venue's last incremental packet is in (`next` one past
/// its last MsgSeqNum) and no packet gap is open, then a little more for
/// the cycle's publication.
fn wait_mdp3_settled(reader: &Reader, report: &serde_json::Value) {
    let next = report["last_seq_num"].as_u64().unwrap() + 1;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (n, open) = (
            counter_named(reader, "next"),
            counter_named(reader, "gaps_open"),
        );
        if n == next && open == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "next {n} of {next}, gaps open {open}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(50));
}

/// An instrument's level 1 as the venue's report gives it: bid, bid size,
/// ask, ask size (mantissas of 10^-9).
type Top = [Option<i64>; 4];

fn venue_tops(report: &serde_json::Value) -> BTreeMap<String, Top> {
    let books = report["books"].as_object().unwrap();
    assert_eq!(books.len(), 5, "five instruments");
    books
        .iter()
        .map(|(id, b)| {
            let level = |k: &str, f: &str| b[k][0][f].as_i64();
            let top = [
                level("bids", "price"),
                level("bids", "size"),
                level("asks", "price"),
                level("asks", "size"),
            ];
            (id.clone(), top)
        })
        .collect()
}

/// The published level 1 of every instrument named in `tops` (by
/// `#SecurityID`), through `Reader::lookup` and `record`; and whether it
/// is flagged suspect (or unverified).
fn published_tops(
    reader: &Reader,
    names: impl IntoIterator<Item = String>,
) -> BTreeMap<String, (Top, bool)> {
    let side = |s: Option<tickguard::state::slot::Side>| match s {
        Some(s) => match s.price {
            Price::Decimal {
                mantissa,
                exponent: -9,
            } => [Some(mantissa), Some(s.size as i64)],
            other => panic!("MDP3 prices are mantissas of 10^-9: {other:?}"),
        },
        None => [None, None],
    };
    names
        .into_iter()
        .map(|name| {
            let h = reader
                .lookup(FEED, &name)
                .unwrap_or_else(|| panic!("{name} not published"));
            let r = reader.record(&h).expect("a consistent record");
            let [b, bs] = side(r.bid);
            let [a, as_] = side(r.ask);
            (name, ([b, bs, a, as_], r.state.suspect))
        })
        .collect()
}

/// The published tops equal the venue's, and none is suspect.
fn assert_venue_books(reader: &Reader, report: &serde_json::Value) {
    let want = venue_tops(report);
    let got = published_tops(reader, want.keys().cloned());
    for (id, top) in &want {
        assert_eq!(&got[id].0, top, "{id}: published top vs the venue's");
        assert!(!got[id].1, "{id} suspect at the end");
    }
    // The Symbol finds the same instrument.
    for (id, b) in report["books"].as_object().unwrap() {
        let symbol = b["symbol"].as_str().unwrap();
        let by_symbol = reader.lookup(FEED, symbol).expect("published by Symbol");
        let by_id = reader.lookup(FEED, id).unwrap();
        assert_eq!(
            reader.record(&by_symbol).unwrap().bid,
            reader.record(&by_id).unwrap().bid,
            "{symbol} and {id}"
        );
    }
}

/// `check cme NAME --json` from another process, the writer dead after
/// the configuration's `dead_after_ms`: (exit code, reasons).
fn mdp3_check(shm: &Path, name: &str) -> (Option<i32>, Vec<String>) {
    let out = Command::new(bin())
        .args([
            "check",
            FEED,
            name,
            "--json",
            "--dead-after-ms",
            "1000",
            "--shm",
        ])
        .arg(shm)
        .output()
        .unwrap();
    assert!(
        !out.stdout.is_empty(),
        "check {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    let reasons = v["reasons"]
        .as_array()
        .unwrap_or_else(|| panic!("{name}: {v}"))
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    (out.status.code(), reasons)
}

/// The reasons the venue's state of an instrument implies once it is
/// healed: `invalid_price` for a crossed book, then its status's.
fn implied_reasons(book: &serde_json::Value) -> Vec<String> {
    let mut want = Vec::new();
    let (bid, ask) = (
        book["bids"][0]["price"].as_i64(),
        book["asks"][0]["price"].as_i64(),
    );
    if bid.is_none() && ask.is_none() {
        return vec!["no_quote".into()];
    }
    if matches!((bid, ask), (Some(b), Some(a)) if b > a) {
        want.push("invalid_price".into());
    }
    let state = book["trading_status"].as_u64().map(|c| meaning(c as u8));
    match state {
        Some(Meaning::Is(State::Halted)) => want.push("halted".into()),
        Some(Meaning::Is(State::Closed)) => want.push("closed".into()),
        _ => {}
    }
    want
}

/// Every instrument answers `check` (by `#SecurityID` and by Symbol) as
/// the venue's state implies: nothing but that.
fn assert_checks(shm: &Path, report: &serde_json::Value) {
    for (id, b) in report["books"].as_object().unwrap() {
        let want = implied_reasons(b);
        let code = Some(if want.is_empty() { 0 } else { 1 });
        assert_eq!(mdp3_check(shm, id), (code, want.clone()), "{id}");
        let symbol = b["symbol"].as_str().unwrap();
        assert_eq!(mdp3_check(shm, symbol), (code, want), "{symbol}");
    }
}

/// The IPv4 groups joined on `lo` inside the namespace.
fn joined_groups(ns: &Netns) -> BTreeSet<String> {
    let out = Command::new("ip")
        .args(["-n", &ns.0, "maddr", "show", "dev", "lo"])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("inet")).then(|| w.next().map(str::to_string))?
        })
        .collect()
}

fn group(line: &str) -> String {
    line.split(':').next().unwrap().to_string()
}

/// Whether the snapshot groups are joined now: both or neither (else a
/// failure), read from the namespace.
fn snapshot_joined(ns: &Netns) -> bool {
    let groups = joined_groups(ns);
    let joined: Vec<bool> = SNAPSHOT_LINES
        .iter()
        .map(|l| groups.contains(&group(l)))
        .collect();
    assert_eq!(joined[0], joined[1], "snapshot A and B alike: {groups:?}");
    for l in LINES.iter().chain([&DEFINITION_LINE]) {
        assert!(groups.contains(&group(l)), "{l} joined: {groups:?}");
    }
    joined[0]
}

/// The sidecar's log lines saying a snapshot line was joined or left, in
/// order: true for joined.
fn joins_logged(log: &Path) -> Vec<bool> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter(|l| l.contains(SNAPSHOT_LINES[0]))
        .filter_map(|l| {
            if l.contains("line joined") {
                Some(true)
            } else if l.contains("line left") {
                Some(false)
            } else {
                None
            }
        })
        .collect()
}

/// Two lines with independent loss, none on both (the seed's draws, the
/// report says so): every instrument's published top is the venue's, none
/// suspect, `check` answers as the venue's state implies, and the
/// snapshot lines are left at the end.
#[test]
fn mdp3_two_lines_with_loss_publish_the_venues_books() {
    if !can_create_namespaces() {
        return;
    }
    // The first seed whose independent losses never hit both lines at once.
    let seed = (1..=100)
        .find(|&seed| {
            let p = venue_params(1000, 1500, seed, |p| {
                p.loss_a = 5.0;
                p.loss_b = 5.0;
            });
            lost_on_both(&p).0.is_empty()
        })
        .expect("a seed losing nothing on both lines");
    let live = Live::start("mdp3-ab", "", false);
    let (ns, shm, reader) = (&live.scene.ns, &live.scene.shm, &live.reader);
    let seed_arg = seed.to_string();
    let mut venue = live.venue(&[
        "--rate", "1000", "--count", "1500", "--loss-a", "5", "--loss-b", "5", "--seed", &seed_arg,
    ]);
    // While the venue runs, an instrument answers `ok` from the Reader.
    let mut ok_seen = false;
    let deadline = Instant::now() + Duration::from_secs(10);
    while venue.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the venue did not end");
        ok_seen |= reader
            .lookup(FEED, "ESZ6")
            .is_some_and(|h| reader.check(&h, now_ns()).is_ok());
        std::thread::sleep(Duration::from_millis(10));
    }
    let report = finish(venue);
    assert_eq!(
        report["lost_on_both_lines"], 0,
        "seed {seed} loses none on both: {report}"
    );
    let dropped: u64 = report["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["dropped"].as_u64().unwrap())
        .sum();
    assert!(dropped > 50, "5% loss per line: {report}");
    wait_mdp3_settled(reader, &report);

    assert_venue_books(reader, &report);
    assert_checks(shm, &report);
    assert!(ok_seen, "ESZ6 answered ok while trading");
    let stat = stat_json(shm);
    let feed = &stat["feeds"][0];
    assert_eq!(feed["ticks_lost"], 0, "{feed}");
    assert_eq!(feed["packets_lost"], 0, "{feed}");
    // `stat` shows each instrument by its Symbol (the name `check` takes),
    // with the venue's top.
    let shown: BTreeMap<String, serde_json::Value> = stat["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["symbol"].as_str().unwrap().to_string(), r.clone()))
        .collect();
    let books = report["books"].as_object().unwrap();
    assert_eq!(
        shown.keys().collect::<BTreeSet<_>>(),
        books
            .values()
            .map(|b| b["symbol"].as_str().unwrap().to_string())
            .collect::<BTreeSet<_>>()
            .iter()
            .collect(),
        "{stat}"
    );
    for b in books.values() {
        let row = &shown[b["symbol"].as_str().unwrap()];
        assert_eq!(row["last_seq"], b["rpt_seq"], "{row}");
        assert_eq!(row["bid_size"], b["bids"][0]["size"], "{row}");
    }
    assert_eq!(feed["symbols"]["suspect"], 0, "{feed}");
    // Each line lost some and every datagram sent arrived: the merge took
    // each packet from whichever line carried it.
    for (i, line) in ["A", "B"].iter().enumerate() {
        let sent = &report["lines"][i]["datagrams_sent"];
        assert_eq!(&feed["packets_by_line"][line], sent, "line {line}: {feed}");
        assert!(sent.as_u64() < report["incremental_packets"].as_u64());
    }
    assert!(!snapshot_joined(ns), "the snapshot lines left at the end");
    assert_eq!(
        joins_logged(&live.log).last(),
        Some(&false),
        "last logged: left"
    );
}

/// A venue's parameters as [`mdp3_venue`] passes them, for the venue
/// driven in-process: `rate` events a second, `count` of them, `seed`,
/// and what `f` sets.
fn venue_params(rate: u64, count: u64, seed: u64, f: impl FnOnce(&mut Params)) -> Params {
    let local = |port| std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, port);
    let mut p = Params {
        lines: vec![local(1), local(2)],
        snapshot_lines: vec![local(3), local(4)],
        definition_lines: vec![local(5)],
        rate: rate as f64,
        count,
        heartbeat_ms: 0,
        loop_ms: LOOP_MS,
        definition_loop_ms: LOOP_MS,
        seed,
        ..Params::default()
    };
    f(&mut p);
    p
}

/// The MsgSeqNums of the incremental packets a venue with `p` sends on
/// neither line, driven in-process (without heartbeats and halts its
/// packets and their losses do not depend on timing), and its last
/// MsgSeqNum.
fn lost_on_both(p: &Params) -> (Vec<u32>, u32) {
    let mut v = Venue::new(p).unwrap();
    let (mut out, mut t, mut seen) = (Vec::new(), 1_767_799_800_000_000_000u64, BTreeSet::new());
    let mut sent = |out: &mut Vec<tickguard::simulate::Outgoing>| {
        for o in out.drain(..) {
            if o.line < 2 {
                seen.insert(u32::from_le_bytes(o.payload[..4].try_into().unwrap()));
            }
        }
    };
    while !v.done(t) {
        v.poll(t, &mut out);
        sent(&mut out);
        t += 1_000_000;
    }
    v.finish(t, &mut out);
    sent(&mut out);
    let last = v.report().last_seq_num;
    let lost = (1..=last).filter(|s| !seen.contains(s)).collect();
    (lost, last)
}

/// Packets lost on both lines: the instruments they touched heal from the
/// snapshot loop, joined for it and left after; at the end (more than a
/// loop after the last loss) every book is the venue's, none suspect.
#[test]
fn mdp3_packets_lost_on_both_lines_heal_from_the_snapshot_loop() {
    if !can_create_namespaces() {
        return;
    }
    const RATE: u64 = 1000;
    const COUNT: u64 = 2000;
    // The first seed whose losses on both lines (known before, from the
    // venue in-process) all come more than two loops before its end.
    let (seed, lost, last, tail_ms) = (1..=100)
        .find_map(|seed| {
            let p = venue_params(RATE, COUNT, seed, |p| p.loss_both = 0.5);
            let (lost, last) = lost_on_both(&p);
            let tail_ms = u64::from(last - lost.last()?) * 1000 / RATE;
            (lost.len() >= 3 && tail_ms > 2 * LOOP_MS + 100).then_some((seed, lost, last, tail_ms))
        })
        .expect("a seed with early losses");

    let live = Live::start("mdp3-both", "", false);
    let (ns, shm, reader) = (&live.scene.ns, &live.scene.shm, &live.reader);
    let report = live.run_venue(&[
        "--rate",
        &RATE.to_string(),
        "--count",
        &COUNT.to_string(),
        "--loss-both",
        "0.5",
        "--seed",
        &seed.to_string(),
    ]);
    assert_eq!(
        report["lost_on_both_lines"].as_u64(),
        Some(lost.len() as u64),
        "the binary lost what the in-process venue lost: {report}"
    );
    let ids = report["lost_security_ids"].as_array().unwrap();
    assert!(!ids.is_empty(), "{report}");
    eprintln!(
        "lost on both lines: MsgSeqNum {lost:?} of {last}, touching {ids:?}; the last {tail_ms} ms before the end"
    );

    assert_venue_books(reader, &report);
    assert_checks(shm, &report);
    let feed = stat_feed(shm);
    assert_eq!(
        feed["packets_lost"].as_u64(),
        Some(lost.len() as u64),
        "{feed}"
    );
    assert!(feed["ticks_lost"].as_u64().unwrap() > 0, "{feed}");
    assert!(feed["snapshots_applied"].as_u64().unwrap() > 0, "{feed}");
    assert_eq!(feed["symbols"]["suspect"], 0, "{feed}");
    // Joined for the losses (the first entry: left at start), left after.
    let logged = joins_logged(&live.log);
    assert_eq!(logged.first(), Some(&false), "left at start: {logged:?}");
    assert!(logged.contains(&true), "joined for the losses: {logged:?}");
    assert_eq!(logged.last(), Some(&false), "left at the end: {logged:?}");
    assert!(!snapshot_joined(ns));
}

/// Started in the middle of the week, every instrument heals from the
/// snapshot loop: by the time every one reads healed, the sidecar has
/// seen at most three loops' snapshots on its two snapshot lines (a loop
/// joined part way, the next whole, and one more for the time this test
/// takes to look), counted, not timed (the time is printed).
#[test]
fn mdp3_mid_week_start_heals_every_instrument_within_a_loop() {
    if !can_create_namespaces() {
        return;
    }
    let live = Live::start("mdp3-midweek", "", false);
    let (ns, shm, reader) = (&live.scene.ns, &live.scene.shm, &live.reader);
    let mut venue = live.venue(&[
        "--mid-week",
        "--rate",
        "500",
        "--count",
        "1500",
        "--seed",
        "8",
    ]);
    let names = ["ESZ6", "ESH7", "NQZ6", "RTYZ6", "ESZ6-ESH7"];
    let healed = |name: &str| {
        reader.lookup(FEED, name).is_some_and(|h| {
            let r = reader.check(&h, now_ns()).reasons;
            !r.contains(Reasons::SUSPECT) && !r.contains(Reasons::NO_QUOTE)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut first = None;
    let mut all_healed = None;
    let mut snapshots_seen = 0;
    while all_healed.is_none() {
        assert!(
            Instant::now() < deadline,
            "not healed: {:?}",
            names.iter().filter(|n| !healed(n)).collect::<Vec<_>>()
        );
        if first.is_none() && reader.counter(0, counter::PACKETS).unwrap_or(0) > 0 {
            first = Some(Instant::now());
        }
        if let Some(f) = first {
            if names.iter().all(|n| healed(n)) {
                all_healed = Some(f.elapsed());
                // Applied and ignored: every snapshot message received.
                snapshots_seen = counter_named(reader, "snapshots_applied")
                    + counter_named(reader, "snapshots_ignored");
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let took = all_healed.unwrap();
    let report = finish_within(&mut venue);
    wait_mdp3_settled(reader, &report);
    eprintln!(
        "mid-week: every instrument healed {:.1} ms after the first datagram (loop {LOOP_MS} ms), {snapshots_seen} snapshots seen",
        took.as_secs_f64() * 1e3
    );
    // A loop is a snapshot of each instrument on each of the two lines.
    let most = 3 * 2 * names.len() as u64;
    assert!(
        snapshots_seen <= most,
        "healed after {snapshots_seen} snapshots, more than three loops' {most}"
    );
    assert_venue_books(reader, &report);
    assert_checks(shm, &report);
    let feed = stat_feed(shm);
    assert!(feed["snapshots_applied"].as_u64().unwrap() >= 5, "{feed}");
    assert!(!snapshot_joined(ns));
}

/// Waits (bounded) for the venue to end; its report.
fn finish_within(venue: &mut Child) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    while venue.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the venue did not end");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut out = String::new();
    use std::io::Read;
    venue
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    serde_json::from_str(out.trim()).unwrap_or_else(|_| panic!("not JSON: {out}"))
}

/// A ChannelReset mid-run: the books fill again and end as the venue's;
/// the feed counts one reset.
#[test]
fn mdp3_channel_reset_refills_the_venues_books() {
    if !can_create_namespaces() {
        return;
    }
    let live = Live::start("mdp3-reset", "", false);
    let (shm, reader) = (&live.scene.shm, &live.reader);
    let report = live.run_venue(&[
        "--rate",
        "1000",
        "--count",
        "1500",
        "--channel-reset-at-ms",
        "600",
        "--loss-a",
        "3",
        "--seed",
        "5",
    ]);
    assert_eq!(report["channel_resets"], 1, "{report}");
    assert_eq!(report["lost_on_both_lines"], 0, "{report}");
    assert_venue_books(reader, &report);
    assert_checks(shm, &report);
    let feed = stat_feed(shm);
    assert_eq!(feed["channel_resets"], 1, "{feed}");
    assert_eq!(counter_named(reader, "channel_resets"), 1);
    assert_eq!(feed["ticks_lost"], 0, "{feed}");
    assert!(std::fs::read_to_string(&live.log)
        .unwrap()
        .contains("ChannelReset"));
}

/// A quiet lossless channel needs no snapshot once its instruments are
/// defined: the snapshot groups are not joined in the namespace while the
/// incremental and definition groups are (joined once at the start, for
/// the books filled before their definitions came round the loop at
/// another depth than the default, and left once the loop healed them);
/// with `snapshot_join = "always"` they stay joined.
#[test]
fn mdp3_snapshot_groups_are_left_when_nothing_needs_them() {
    if !can_create_namespaces() {
        return;
    }
    for (join, want) in [("on_demand", false), ("always", true)] {
        let extra = format!("snapshot_join = \"{join}\"");
        let live = Live::start(&format!("mdp3-maddr-{join}"), &extra, false);
        let (ns, reader) = (&live.scene.ns, &live.reader);
        let mut venue = live.venue(&["--rate", "200", "--count", "300", "--seed", "2"]);
        // Two loops into the run (200 events a second), then after it.
        let deadline = Instant::now() + Duration::from_secs(10);
        while counter_named(reader, "next") < 2 * LOOP_MS * 200 / 1000 {
            assert!(Instant::now() < deadline, "{join}: the venue is silent");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(snapshot_joined(ns), want, "{join}: while running");
        let report = finish_within(&mut venue);
        wait_mdp3_settled(reader, &report);
        assert_eq!(snapshot_joined(ns), want, "{join}: after the end");
        assert_eq!(report["lost_on_both_lines"], 0);
        assert_venue_books(reader, &report);
        let logged = joins_logged(&live.log);
        let expected: &[&[bool]] = if want {
            &[&[]]
        } else {
            &[&[false], &[false, true, false]]
        };
        assert!(
            expected.contains(&logged.as_slice()),
            "{join}: joins and leaves logged: {logged:?}"
        );
    }
}

/// A snapshot line whose join fails (the interface's address is gone, as
/// when a NIC is reconfigured mid-session) is tried again every second:
/// the instruments stay suspect while it fails and heal once the address
/// is back, without a restart.
#[test]
fn mdp3_a_failed_snapshot_join_is_retried_until_it_succeeds() {
    if !can_create_namespaces() {
        return;
    }
    const ADDR: &str = "10.200.0.1";
    let scene = Scene::new("mdp3-join-retry");
    let Scene { ns, dir, shm } = &scene;
    let on_lo = |verb: &str| {
        ns.ip(&[
            "-n",
            &ns.0,
            "addr",
            verb,
            &format!("{ADDR}/32"),
            "dev",
            "lo",
        ])
    };
    on_lo("add");
    let cfg = mdp3_config(dir.path(), shm, "");
    let text = std::fs::read_to_string(&cfg).unwrap();
    let text = text.replace(
        "interface = \"127.0.0.1\"",
        &format!("interface = \"{ADDR}\""),
    );
    assert!(text.contains(ADDR));
    std::fs::write(&cfg, text).unwrap();
    let log = dir.path().join("run.log");
    let _sidecar = mdp3_sidecar(ns, &cfg, shm, None, &log);
    let reader = crate::common::live_reader(shm);
    let deadline = Instant::now() + Duration::from_secs(10);
    while joins_logged(&log) != [false] {
        assert!(
            Instant::now() < deadline,
            "snapshot lines not left at start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    on_lo("del");
    let mut venue = mdp3_venue(
        ns,
        &cfg,
        &[
            "--mid-week",
            "--rate",
            "500",
            "--count",
            "2500",
            "--seed",
            "8",
        ],
    );
    let failures = || {
        std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .filter(|l| l.contains(SNAPSHOT_LINES[0]) && l.contains("line join failed"))
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while failures() == 0 {
        assert!(Instant::now() < deadline, "no join failure logged");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Two loops of the venue's snapshots go by unheard.
    std::thread::sleep(Duration::from_millis(2 * LOOP_MS));
    let suspect = |name: &str| {
        reader.lookup(FEED, name).is_none_or(|h| {
            let r = reader.check(&h, now_ns()).reasons;
            r.contains(Reasons::SUSPECT) || r.contains(Reasons::NO_QUOTE)
        })
    };
    assert!(suspect("ESZ6"), "healed without its snapshot lines");
    assert!(!snapshot_joined(ns));
    assert_eq!(failures(), 1, "one line a failure, not one per attempt");
    on_lo("add");
    let report = finish_within(&mut venue);
    wait_mdp3_settled(&reader, &report);
    assert_venue_books(&reader, &report);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged
            .lines()
            .any(|l| l.contains(SNAPSHOT_LINES[0]) && l.contains("join done after")),
        "{logged}"
    );
}

/// SIGKILL: no clean close; every instrument reads `stale` once the
/// writer's heartbeat is older than `dead_after_ms`.
#[test]
fn mdp3_sidecar_killed_reads_stale() {
    if !can_create_namespaces() {
        return;
    }
    let mut live = Live::start("mdp3-kill", "", false);
    let report = live.run_venue(&["--rate", "1000", "--count", "500", "--seed", "3"]);
    let (sidecar, shm) = (&mut live.sidecar, &live.scene.shm);
    assert_checks(shm, &report);
    sidecar.0.kill().unwrap();
    sidecar.0.wait().unwrap();
    let killed = Instant::now();
    // Measured from the last heartbeat, not the kill: a writer the runner
    // had not scheduled for a while before it beat last that much earlier.
    let beat = crate::common::live_reader(shm).heartbeat_ns().unwrap();
    // Stale within dead_after_ms (1 s) and a margin; every check bounded.
    let deadline = killed + Duration::from_secs(3);
    let stale = vec!["stale".to_string()];
    loop {
        if mdp3_check(shm, "ESZ6") == (Some(1), stale.clone()) {
            break;
        }
        assert!(Instant::now() < deadline, "not stale 3 s after SIGKILL");
        std::thread::sleep(Duration::from_millis(50));
    }
    let took = now_ns().saturating_sub(beat);
    assert!(
        took >= 1_000_000_000,
        "stale only after dead_after_ms: {took} ns after the last heartbeat"
    );
    for id in report["books"].as_object().unwrap().keys() {
        assert_eq!(mdp3_check(shm, id), (Some(1), stale.clone()), "{id}");
    }
}

/// `run --record`, then `replay` of the recording with the same
/// configuration: the same books and the same counters as the live
/// publication at the end.
#[test]
fn mdp3_recording_replays_to_the_live_books_and_counters() {
    if !can_create_namespaces() {
        return;
    }
    let live = Live::start("mdp3-record", "", true);
    let report = live.run_venue(&[
        "--rate",
        "1000",
        "--count",
        "2000",
        "--loss-a",
        "5",
        "--loss-b",
        "5",
        "--loss-both",
        "0.5",
        "--channel-reset-at-ms",
        "500",
        "--duplicate",
        "2",
        "--reorder",
        "2",
        "--halt-every-s",
        "1",
        "--seed",
        "6",
    ]);
    let counters = stat_feed(&live.scene.shm);
    let reader = &live.reader;
    let names: Vec<String> = report["books"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let tops = published_tops(reader, names.clone());
    // Each instrument's RptSeq and status as published.
    let states: BTreeMap<String, (u64, bool, bool)> = names
        .iter()
        .map(|n| {
            let r = reader.record(&reader.lookup(FEED, n).unwrap()).unwrap();
            (n.clone(), (r.state.seq.last_seq, r.halted, r.closed))
        })
        .collect();
    stop(live.sidecar);

    let replayed = &replay_feed(live.scene.dir.path(), &live.rec, &live.cfg, FEED);
    for key in [
        "packets",
        "messages",
        "snapshots_applied",
        "channel_resets",
        "ticks_lost",
        "packets_lost",
        "packet_gaps",
        "definitions",
        "next",
    ] {
        assert_eq!(
            replayed[key], counters[key],
            "{key}: replayed {replayed} live {counters}"
        );
    }
    assert_eq!(counters["channel_resets"], 1);
    for key in ["snapshots_applied", "ticks_lost", "packets_lost"] {
        assert!(counters[key].as_u64().unwrap() > 0, "{key}: {counters}");
    }
    for name in &names {
        let r = &replayed["symbols"][name];
        let (top, suspect) = tops[name];
        let replayed_top = [
            r["bid"].as_i64(),
            r["bid_size"].as_i64(),
            r["ask"].as_i64(),
            r["ask_size"].as_i64(),
        ];
        assert_eq!(replayed_top, top, "{name}: replayed vs live");
        let replayed_suspect = r["suspect"] == true || r["unverified"] == true;
        assert_eq!(replayed_suspect, suspect, "{name}");
        let (rpt_seq, halted, closed) = states[name];
        assert_eq!(r["rpt_seq"].as_u64(), Some(rpt_seq), "{name}: {r}");
        assert_eq!(
            (r["status"] == "halted", r["status"] == "closed"),
            (halted, closed),
            "{name}: {r}"
        );
    }
}
