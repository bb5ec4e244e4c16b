//! The simulated CME MDP3 channel (`simulate --protocol mdp3`): its venue
//! driven in-process into the MDP3 feed (every instrument's visible books
//! equal the venue's, none suspect; packets lost on both lines healed by
//! the next snapshot loop), and the real binary on loopback, whose lines
//! replay (`replay::`) to the books its report gives. Every wait is
//! bounded: the child is killed after `DEADLINE`, the sockets have read
//! timeouts.

use crate::common::{socket, Killed};
use std::collections::BTreeSet;
use std::net::{SocketAddrV4, UdpSocket};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tickguard::capture::link::Link;
use tickguard::capture::write::{CaptureWriter, Format};
use tickguard::capture::CaptureReader;
use tickguard::clock::OffsetMode;
use tickguard::config::Config;
use tickguard::protocol::mdp3::book::{Level, Side};
use tickguard::protocol::mdp3::feed::{Entry, Feed, Settings};
use tickguard::protocol::mdp3::sequence;
use tickguard::simulate::mdp3::{BookReport, LevelReport, Params, Venue, VenueReport};
use tickguard::simulate::Outgoing;

const MS: u64 = 1_000_000;
/// 2026-01-07 15:30:00 UTC.
const T0: u64 = 1_767_799_800_000_000_000;
const DEADLINE: Duration = Duration::from_secs(8);

fn local(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, port)
}

/// An in-process venue's parameters: every service on both lines.
fn params(f: impl FnOnce(&mut Params)) -> Params {
    let mut p = Params {
        lines: vec![local(1), local(2)],
        snapshot_lines: vec![local(3), local(4)],
        definition_lines: vec![local(5), local(6)],
        rate: 2000.0,
        count: 2000,
        heartbeat_ms: 20,
        loop_ms: 100,
        definition_loop_ms: 250,
        seed: 9,
        ..Params::default()
    };
    f(&mut p);
    p
}

fn feed() -> Feed {
    Feed::new(Settings {
        sequencing: sequence::Settings {
            gap_timeout_ns: 5 * MS,
            restart_margin: 10_000,
        },
        max_cached: 1_000_000,
        max_instruments: 100_000,
        default_depth: 10,
        default_implied_depth: 2,
        offset: OffsetMode::Fixed(0),
        offset_queue: 16,
    })
}

/// One datagram of line `line` (numbered as the engine numbers them) into `f` at `t`.
fn deliver(f: &mut Feed, line: usize, payload: &[u8], t: u64) {
    let done = match line {
        0 | 1 => f.on_incremental(payload, t),
        2 | 3 => f.on_snapshot_from(line - 2, payload, t),
        _ => {
            f.expire(t);
            f.on_definitions(payload)
        }
    };
    done.unwrap_or_else(|r| panic!("line {line} rejected a datagram: {r:?}"));
}

/// Drives `v` from T0 by `step`, feeding every datagram to `f`; `each`
/// sees the feed after each poll. Polls on for `tail` after the venue is
/// done, then finishes.
fn drive(v: &mut Venue, f: &mut Feed, step: u64, tail: u64, mut each: impl FnMut(&Feed)) {
    let (mut out, mut t, mut done_at) = (Vec::<Outgoing>::new(), T0, None);
    loop {
        v.poll(t, &mut out);
        for o in out.drain(..) {
            deliver(f, o.line, &o.payload, t);
        }
        f.expire(t);
        each(f);
        if v.done(t) {
            let d = *done_at.get_or_insert(t);
            if t >= d + tail {
                break;
            }
        }
        t += step;
    }
    v.finish(t, &mut out);
    for o in out.drain(..) {
        deliver(f, o.line, &o.payload, t);
    }
}

fn side(s: &Side) -> Vec<LevelReport> {
    (1..=s.depth())
        .map_while(|n| s.level(n))
        .map(|l: Level| LevelReport {
            price: l.price,
            size: l.size,
            orders: l.orders,
        })
        .collect()
}

/// The feed's instrument named `#id`.
fn entry<'f>(f: &'f Feed, id: &str) -> &'f Entry {
    f.find(id).unwrap_or_else(|| panic!("the feed has no {id}"))
}

/// Every instrument of the report is in the feed with the same books,
/// RptSeq, status and Symbol, healthy.
fn assert_books_equal(f: &Feed, r: &VenueReport) {
    assert_eq!(r.books.len(), 5);
    for (id, want) in &r.books {
        let e = entry(f, id);
        let books = f.visible(e);
        let got = BookReport {
            symbol: e
                .definition
                .as_ref()
                .map(|d| d.symbol.clone())
                .unwrap_or_default(),
            rpt_seq: e.instrument.seq.rpt_seq().unwrap_or(0),
            trading_status: f.status(e),
            bids: side(&books.outright.bid),
            asks: side(&books.outright.offer),
            implied_bids: side(&books.implied.bid),
            implied_asks: side(&books.implied.offer),
        };
        assert_eq!(&got, want, "{id}");
        assert!(
            !e.instrument.seq.suspect() && !e.instrument.seq.unverified(),
            "{id}"
        );
    }
    assert!(r
        .books
        .values()
        .any(|b| !b.bids.is_empty() && !b.asks.is_empty()));
}

#[test]
fn a_lossless_channel_feeds_the_venues_books() {
    for mid_week in [false, true] {
        let p = params(|p| {
            p.halt_every_s = 1;
            p.channel_reset_at_ms = vec![400];
            p.mid_week = mid_week;
            p.duplicate = 2.0;
        });
        let mut v = Venue::new(&p).unwrap();
        let mut f = feed();
        drive(&mut v, &mut f, MS, 0, |_| {});
        let r = v.report();
        assert_eq!(
            (r.events, r.channel_resets, r.lost_on_both_lines),
            (2000, 1, 0)
        );
        assert!(r.halts >= 1 && r.snapshot_loops >= 5 && r.definition_loops >= 4);
        assert!(
            r.books.values().all(|b| b.trading_status == Some(4)),
            "closed"
        );
        assert_eq!(f.counters().channel_resets, 1);
        assert_books_equal(&f, &r);
        // Joined mid-week, every instrument took a snapshot.
        if mid_week {
            assert!(f.instruments().iter().all(|e| e.snapshots_applied > 0));
        }
    }
}

#[test]
fn packets_lost_on_both_lines_are_healed_by_the_next_snapshot_loop() {
    let p = params(|p| {
        p.loss_both = 3.0;
        p.loss_a = 5.0;
        p.heartbeat_ms = 60_000;
    });
    let mut v = Venue::new(&p).unwrap();
    let mut f = feed();
    let mut seen_unhealthy = BTreeSet::new();
    // After the last event, one whole loop (100 ms) and a little.
    drive(&mut v, &mut f, MS, 120 * MS, |f| {
        for e in f.instruments() {
            if e.instrument.seq.suspect() || e.instrument.seq.unverified() {
                seen_unhealthy.insert(e.security_id);
            }
        }
    });
    let r = v.report();
    assert!(r.lost_on_both_lines > 0, "{r:?}");
    assert!(!r.lost_security_ids.is_empty());
    for id in &r.lost_security_ids {
        assert!(seen_unhealthy.contains(id), "#{id} never suspect");
    }
    assert!(f.counters().snapshots_applied > 0);
    assert_books_equal(&f, &r);
}

fn spawn(args: &[String]) -> Killed {
    let child = Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .args(["simulate", "--protocol", "mdp3"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tickguard runs");
    Killed(child)
}

/// `text` as `sim.toml` in a new temporary folder.
fn write_config(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sim.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// One received datagram: arrival (ns), destination, bytes.
type Got = (u64, SocketAddrV4, Vec<u8>);

#[test]
fn the_binary_on_loopback_replays_to_its_reported_books() {
    let sockets: Vec<(UdpSocket, SocketAddrV4)> = (0..5).map(|_| socket()).collect();
    let a = |i: usize| sockets[i].1;
    let text = format!(
        r#"
[[feed]]
name = "sim"
protocol = "mdp3"
lines = ["{}", "{}"]
snapshot_lines = ["{}", "{}"]
definition_lines = ["{}"]
stale_threshold_ms = 32000
source_threshold_ms = 32000
gap_timeout_ms = 50
"#,
        a(0),
        a(1),
        a(2),
        a(3),
        a(4)
    );
    let (dir, path) = write_config(&text);
    let child = spawn(&[
        "--config".into(),
        path.display().to_string(),
        "--report".into(),
        "--mid-week".into(),
        "--rate=1500".into(),
        "--count=1500".into(),
        "--loss-a=5".into(),
        "--duplicate=2".into(),
        "--reorder=2".into(),
        "--heartbeat-ms=50".into(),
        "--loop-ms=100".into(),
        "--definition-loop-ms=200".into(),
        "--halt-every-s=1".into(),
        "--channel-reset-at-ms=300".into(),
        "--seed=3".into(),
    ]);
    let stopped = AtomicBool::new(false);
    let start = Instant::now();
    let (mut got, (status, out, err)) = std::thread::scope(|scope| {
        let readers: Vec<_> = sockets
            .iter()
            .map(|(s, addr)| {
                let stopped = &stopped;
                scope.spawn(move || {
                    let mut got: Vec<Got> = Vec::new();
                    let mut buf = vec![0u8; 65536];
                    loop {
                        assert!(start.elapsed() < DEADLINE, "reading {addr}");
                        // Read on until a timeout once the venue has exited.
                        let done = stopped.load(Ordering::Acquire);
                        match s.recv(&mut buf) {
                            Ok(n) => {
                                got.push((tickguard::time::now_ns(), *addr, buf[..n].to_vec()))
                            }
                            Err(_) if done => return got,
                            Err(_) => {}
                        }
                    }
                })
            })
            .collect();
        let exit = child.output(DEADLINE);
        stopped.store(true, Ordering::Release);
        let got: Vec<Got> = readers
            .into_iter()
            .flat_map(|r| r.join().expect("reader"))
            .collect();
        (got, exit)
    });
    assert!(status.success(), "exit {status:?}: {err}");
    assert_eq!(out.lines().count(), 1, "one JSON line: {out}");
    let report: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report["protocol"], "mdp3");
    assert_eq!(report["events"], 1500);
    assert_eq!(report["channel_resets"], 1);
    assert_eq!(report["lost_on_both_lines"], 0);
    // Every datagram sent arrived, on the line the report says.
    let lines = ["lines", "snapshot_lines", "definition_lines"]
        .iter()
        .flat_map(|k| report[k].as_array().unwrap().clone());
    for (i, l) in lines.enumerate() {
        let n = got.iter().filter(|g| g.1 == a(i)).count() as u64;
        assert_eq!(l["destination"], a(i).to_string());
        assert_eq!(l["datagrams_sent"], n, "{l}");
        assert!(n > 0, "{l}");
    }
    // Replayed in arrival order, the feed holds the venue's books.
    got.sort_by_key(|g| g.0);
    let pcap = dir.path().join("sim.pcap");
    let file = std::io::BufWriter::new(std::fs::File::create(&pcap).unwrap());
    let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::RawIp).unwrap();
    let src = local(5000);
    for (t, dst, bytes) in &got {
        w.write_udp(*t, src, *dst, bytes).unwrap();
    }
    w.finish().unwrap();
    let config = Config::parse(&text, "sim.toml").unwrap();
    let mut capture = CaptureReader::open(&pcap).unwrap();
    let outcome = tickguard::replay::replay(&config, &mut capture, &[], |_| {});
    assert!(outcome.input_error.is_none());
    let feed = serde_json::to_value(&outcome.summary).unwrap()["feeds"]["sim"].clone();
    assert_eq!(feed["rejected"], 0, "{feed}");
    let books = report["books"].as_object().unwrap();
    assert_eq!(books.len(), 5);
    for (id, want) in books {
        let got = &feed["symbols"][id];
        let top = |k: &str, field: &str| want[k][0][field].clone();
        for (key, value) in [
            ("symbol", want["symbol"].clone()),
            ("rpt_seq", want["rpt_seq"].clone()),
            ("trading_status", want["trading_status"].clone()),
            ("bid", top("bids", "price")),
            ("bid_size", top("bids", "size")),
            ("bid_orders", top("bids", "orders")),
            ("ask", top("asks", "price")),
            ("ask_size", top("asks", "size")),
            ("ask_orders", top("asks", "orders")),
            ("implied_bid", top("implied_bids", "price")),
            ("implied_bid_size", top("implied_bids", "size")),
            ("implied_ask", top("implied_asks", "price")),
            ("implied_ask_size", top("implied_asks", "size")),
            ("suspect", false.into()),
            ("unverified", false.into()),
        ] {
            assert_eq!(got[key], value, "{id} {key}: {got} vs {want}");
        }
    }
}

#[test]
fn mdp3_needs_a_configuration_and_its_flags_stay_its_own() {
    for (args, needle) in [
        (vec!["--protocol", "mdp3"], "needs --config"),
        (
            vec!["--protocol", "sqf", "--count", "1", "--loss-both", "1"],
            "--loss-both applies to --protocol mdp3 only",
        ),
        (
            vec!["--protocol", "mdp3", "--glimpse", "127.0.0.1:1"],
            "--glimpse applies to --protocol itch50 only",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_tickguard"))
            .arg("simulate")
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(needle), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

#[test]
fn sigusr1_sends_a_channel_reset_and_sigterm_ends_with_the_report() {
    let (s, a) = socket();
    let (_, b) = socket();
    let text = format!(
        "[[feed]]\nname = \"sim\"\nprotocol = \"mdp3\"\nlines = [\"{a}\", \"{b}\"]\nstale_threshold_ms = 32000\nsource_threshold_ms = 32000\n"
    );
    let (_dir, path) = write_config(&text);
    let child = spawn(&[
        "--config".into(),
        path.display().to_string(),
        "--report".into(),
        "--rate=200".into(),
        "--duration-s=6".into(),
    ]);
    // The first datagram: the handlers are in place.
    let start = Instant::now();
    let mut buf = vec![0u8; 65536];
    while s.recv(&mut buf).is_err() {
        assert!(start.elapsed() < DEADLINE, "nothing on line A");
    }
    let pid = child.0.id() as libc::pid_t;
    // SAFETY: signals to the child this test spawned and still owns.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGUSR1) }, 0);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let (status, out, err) = child.output(DEADLINE);
    assert!(status.success(), "exit {status:?}: {err}");
    let report: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report["channel_resets"], 1, "{report}");
    assert_eq!(report["ended"], true);
    assert_eq!(report["snapshot_lines"].as_array().unwrap().len(), 0);
}
