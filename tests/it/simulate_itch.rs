//! End-to-end tests of `tickguard simulate --protocol itch50`: the real
//! binary is an ITCH venue on loopback with a re-request server; sockets here
//! receive both lines, ask the server for what both lines lost (with the
//! re-request client's own logic, `itch50::recovery`), and replay everything
//! through `replay::` to compare the books with the venue's report.
//! Every wait is bounded: the child is killed after `DEADLINE`, the sockets
//! have read timeouts.

use crate::common::{socket, Killed};
use std::collections::BTreeMap;
use std::net::{SocketAddrV4, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tickguard::capture::link::Link;
use tickguard::capture::write::{CaptureWriter, Format};
use tickguard::capture::CaptureReader;
use tickguard::config::Config;
use tickguard::protocol::itch50::mold::Kind;
use tickguard::protocol::itch50::recovery::{Missing, Requester};
use tickguard::protocol::itch50::{Packet, Session};

const DEADLINE: Duration = Duration::from_secs(20);
const SESSION: Session = Session(*b"TGSIM00001");

fn spawn(args: &[String]) -> Killed {
    let child = Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .args(["simulate", "--protocol", "itch50", "--report"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tickguard runs");
    Killed(child)
}

/// Waits (bounded) for the child to exit 0 and returns its one-line report.
fn report(v: Killed) -> serde_json::Value {
    let (status, out, err) = v.output(DEADLINE);
    assert!(status.success(), "exit {status:?}: {err}");
    assert_eq!(out.lines().count(), 1, "one JSON line: {out}");
    serde_json::from_str(out.trim()).unwrap()
}

/// One received datagram: arrival (ns), destination, bytes.
type Got = (u64, SocketAddrV4, Vec<u8>);

/// Reads every line (a thread each, so no socket's buffer overflows while
/// another is read) until each has delivered its end of session.
fn receive_lines(lines: &[(&UdpSocket, SocketAddrV4)]) -> Vec<Got> {
    let start = Instant::now();
    std::thread::scope(|scope| {
        let readers: Vec<_> = lines
            .iter()
            .map(|&(s, addr)| {
                scope.spawn(move || {
                    let mut got = Vec::new();
                    let mut buf = vec![0u8; 65536];
                    loop {
                        assert!(start.elapsed() < DEADLINE, "no end of session on {addr}");
                        let Ok(n) = s.recv(&mut buf) else { continue };
                        got.push((tickguard::time::now_ns(), addr, buf[..n].to_vec()));
                        let p = Packet::new_checked(&buf[..n]).expect("valid MoldUDP64");
                        if p.kind() == Kind::EndOfSession {
                            return got;
                        }
                    }
                })
            })
            .collect();
        readers
            .into_iter()
            .flat_map(|r| r.join().expect("reader"))
            .collect()
    })
}

/// What one line carried: messages by sequence, and (kind, sequence) per packet.
type Line = (BTreeMap<u64, Vec<u8>>, Vec<(Kind, u64)>);

/// What was sent to `dest`.
fn line(got: &[Got], dest: SocketAddrV4) -> Line {
    let (mut msgs, mut packets) = (BTreeMap::new(), Vec::new());
    for (_, _, bytes) in got.iter().filter(|g| g.1 == dest) {
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.session(), SESSION);
        packets.push((p.kind(), p.sequence()));
        for (q, m) in p.messages() {
            msgs.insert(q, m.bytes().to_vec());
        }
    }
    (msgs, packets)
}

/// The ranges of `1..next` in none of `have`.
fn missing(next: u64, have: &[&BTreeMap<u64, Vec<u8>>]) -> Vec<Missing> {
    let mut out: Vec<Missing> = Vec::new();
    for q in (1..next).filter(|q| have.iter().all(|h| !h.contains_key(q))) {
        match out.last_mut() {
            Some(m) if m.hi == q => m.hi += 1,
            _ => out.push(Missing {
                lo: q,
                hi: q + 1,
                deadline: u64::MAX,
            }),
        }
    }
    out
}

fn config(a: SocketAddrV4, b: SocketAddrV4, recovery: SocketAddrV4, listen: u16) -> String {
    format!(
        r#"
[[feed]]
name = "venue"
protocol = "itch50"
lines = ["{a}", "{b}"]
stale_threshold_ms = 1500
source_threshold_ms = 2000
gap_timeout_ms = 3600000
recovery = "{recovery}"
recovery_listen = "0.0.0.0:{listen}"
"#
    )
}

/// Replays `got` (in arrival order) and returns the feed's summary.
fn replay(config: &Config, got: &mut [Got]) -> serde_json::Value {
    got.sort_by_key(|g| g.0);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("venue.pcap");
    let file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::RawIp).unwrap();
    // No sender, as `run --record` writes what it received (a sender
    // named would have to be the configured server's for the answers).
    let src: SocketAddrV4 = "0.0.0.0:0".parse().unwrap();
    for (t, dst, bytes) in got.iter() {
        w.write_udp(*t, src, *dst, bytes).unwrap();
    }
    w.finish().unwrap();
    let mut capture = CaptureReader::open(&path).unwrap();
    let outcome = tickguard::replay::replay(config, &mut capture, &[], |_| {});
    assert!(outcome.input_error.is_none());
    serde_json::to_value(&outcome.summary).unwrap()["feeds"]["venue"].clone()
}

/// The replayed books equal the venue's: top of book, sizes, orders,
/// trading state, last timestamp.
fn assert_books_equal(feed: &serde_json::Value, report: &serde_json::Value) {
    let books = report["books"].as_object().unwrap();
    let symbols = feed["symbols"].as_object().unwrap();
    assert_eq!(books.len(), 8);
    assert_eq!(symbols.len(), books.len());
    for (name, want) in books {
        let got = &symbols[name];
        for key in [
            "locate",
            "bid",
            "bid_size",
            "ask",
            "ask_size",
            "orders",
            "trading_state",
            "last_timestamp",
        ] {
            assert_eq!(got[key], want[key], "{name} {key}: {got} vs {want}");
        }
    }
    assert!(books.values().any(|b| b["orders"].as_u64().unwrap() > 0));
}

/// Per line: valid packets in sequence order, the line's missing messages
/// exactly what the report says it dropped, the end of session last.
fn check_lines(report: &serde_json::Value, lines: &[&Line]) -> u64 {
    let next = report["messages"].as_u64().unwrap() + 1;
    for (i, (msgs, packets)) in lines.iter().enumerate() {
        assert_eq!(*packets.last().unwrap(), (Kind::EndOfSession, next));
        let data: Vec<u64> = packets
            .iter()
            .filter(|p| matches!(p.0, Kind::Data(_)))
            .map(|p| p.1)
            .collect();
        assert!(data.windows(2).all(|w| w[0] < w[1]), "line {i} in order");
        let lost = (1..next).filter(|q| !msgs.contains_key(q)).count() as u64;
        assert_eq!(lost, report["lines"][i]["messages_dropped"], "line {i}");
    }
    next
}

#[test]
fn two_clean_lines_replay_to_the_venues_books_and_heartbeat_when_idle() {
    let ((ra, a), (rb, b)) = (socket(), socket());
    let venue = spawn(&[
        format!("--line-a={a}"),
        format!("--line-b={b}"),
        "--rate=100".into(),
        "--count=60".into(),
        "--heartbeat-ms=3".into(),
        "--seed=5".into(),
    ]);
    let mut got = receive_lines(&[(&ra, a), (&rb, b)]);
    let report = report(venue);
    assert!(report["server"].is_null());
    assert_eq!(report["lost_on_both_lines"], 0);
    let (la, lb) = (line(&got, a), line(&got, b));
    let next = check_lines(&report, &[&la, &lb]);
    assert_eq!(la.0, lb.0, "both lines carry the same messages");
    assert_eq!(la.0.len() as u64, next - 1);
    // A message every 10 ms: idle time in between carries heartbeats with the next sequence.
    let mut expect = 1;
    let mut beats = 0;
    for (kind, seq) in &la.1 {
        match kind {
            Kind::Data(n) => expect += u64::from(*n),
            Kind::Heartbeat => beats += 1,
            Kind::EndOfSession => {}
        }
        if !matches!(kind, Kind::Data(_)) {
            assert_eq!(*seq, expect);
        }
    }
    assert!(beats > 0, "heartbeats when idle");
    assert_eq!(beats, report["heartbeats"]);
    let config = Config::parse(&config(a, b, crate::common::free_addr(), 0), "venue.toml").unwrap();
    let feed = replay(&config, &mut got);
    assert_eq!(feed["ticks_lost"], 0);
    assert_eq!(feed["hours"], "closed");
    assert_eq!(feed["next"], next);
    assert_books_equal(&feed, &report);
}

#[test]
fn losses_on_both_lines_are_recovered_from_the_server_and_replay_to_the_venues_books() {
    let ((ra, a), (rb, b)) = (socket(), socket());
    let (client, listen) = socket();
    let recovery = crate::common::free_addr();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("venue.toml");
    let text = config(a, b, recovery, listen.port());
    std::fs::write(&path, &text).unwrap();
    // Lines and server from the configuration.
    let venue = spawn(&[
        "--config".into(),
        path.display().to_string(),
        "--loss-a=30".into(),
        "--loss-b=30".into(),
        "--rate=2000".into(),
        "--count=2000".into(),
        "--batch=4".into(),
        "--history=100000".into(),
        "--linger-ms=5000".into(),
        "--seed=11".into(),
    ]);
    let mut got = receive_lines(&[(&ra, a), (&rb, b)]);
    let (la, lb) = (line(&got, a), line(&got, b));
    let next = la.1.last().unwrap().1;
    let mut gaps = missing(next, &[&la.0, &lb.0]);
    let lost: u64 = gaps.iter().map(|m| m.hi - m.lo).sum();
    assert!(lost > 0);
    // Ask with the client's own logic until everything is filled (bounded).
    let mut requester = Requester::new(64, 20_000_000, 1024);
    let mut answers: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    let (mut requests, mut buf) = (0u64, vec![0u8; 65536]);
    let start = Instant::now();
    while !gaps.is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "not recovered: {gaps:?}"
        );
        requester.poll(
            SESSION,
            tickguard::time::now_ns(),
            gaps.iter().copied(),
            |r| {
                client.send_to(&r.encode(), recovery).unwrap();
                requests += 1;
                true
            },
        );
        while let Ok((n, from)) = client.recv_from(&mut buf) {
            assert_eq!(
                from,
                std::net::SocketAddr::V4(recovery),
                "answered from the server"
            );
            let p = Packet::new_checked(&buf[..n]).expect("valid answer");
            assert_eq!(p.session(), SESSION);
            for (q, m) in p.messages() {
                answers.insert(q, m.bytes().to_vec());
            }
            got.push((tickguard::time::now_ns(), listen, buf[..n].to_vec()));
        }
        gaps = missing(next, &[&la.0, &lb.0, &answers]);
    }
    // Byte-compare: a range both lines carried, asked for and answered.
    let (first, _) = la.0.iter().find(|(q, _)| lb.0.contains_key(q)).unwrap();
    let ask = tickguard::protocol::itch50::mold::Request {
        session: SESSION,
        sequence: *first,
        count: 3,
    };
    client.send_to(&ask.encode(), recovery).unwrap();
    requests += 1;
    client
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let (n, _) = client.recv_from(&mut buf).unwrap();
    let p = Packet::new_checked(&buf[..n]).unwrap();
    assert_eq!(p.sequence(), *first);
    let mut compared = 0;
    for (q, m) in p.messages() {
        if let Some(sent) = la.0.get(&q).or(lb.0.get(&q)) {
            assert_eq!(m.bytes(), &sent[..], "sequence {q}");
            compared += 1;
        }
    }
    assert!(compared >= 1);

    let report = report(venue);
    assert_eq!(report["lines"][0]["destination"], a.to_string());
    assert_eq!(report["lines"][1]["destination"], b.to_string());
    assert_eq!(report["lost_on_both_lines"], lost);
    check_lines(&report, &[&la, &lb]);
    let server = &report["server"];
    assert_eq!(server["listen"], recovery.to_string());
    assert_eq!(server["requests_received"], requests);
    assert_eq!(server["requests_answered"], requests);
    assert_eq!(server["requests_dropped"], 0);
    let config = Config::parse(&text, "venue.toml").unwrap();
    let feed = replay(&config, &mut got);
    assert_eq!(feed["ticks_lost"], 0);
    assert_eq!(feed["gaps_open"], 0);
    assert!(feed["recovered"].as_u64().unwrap() >= lost);
    assert_books_equal(&feed, &report);
}

#[test]
fn a_dropping_server_answers_nothing_and_counts_it() {
    let (ra, a) = socket();
    let (client, _) = socket();
    let recovery = crate::common::free_addr();
    let venue = spawn(&[
        format!("--line-a={a}"),
        format!("--recovery={recovery}"),
        "--request-drop=100".into(),
        "--count=20".into(),
        "--rate=1000".into(),
        "--linger-ms=1500".into(),
    ]);
    receive_lines(&[(&ra, a)]);
    let ask = tickguard::protocol::itch50::mold::Request {
        session: SESSION,
        sequence: 1,
        count: 5,
    };
    for _ in 0..5 {
        client.send_to(&ask.encode(), recovery).unwrap();
    }
    client
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    assert!(client.recv_from(&mut [0u8; 2048]).is_err(), "no answer");
    let report = report(venue);
    let server = &report["server"];
    assert_eq!(
        (
            &server["requests_received"],
            &server["requests_dropped"],
            &server["requests_answered"]
        ),
        (&5.into(), &5.into(), &0.into())
    );
}

#[test]
fn bad_itch_arguments_are_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let sqf_only = dir.path().join("sqf.toml");
    std::fs::write(
        &sqf_only,
        "[[feed]]\nname = \"x\"\nkind = \"full\"\nlines = [\"127.0.0.1:4000\"]\nstale_threshold_ms = 1\nsource_threshold_ms = 1\n",
    )
    .unwrap();
    let itch = dir.path().join("itch.toml");
    std::fs::write(
        &itch,
        "[[feed]]\nname = \"x\"\nprotocol = \"itch50\"\nlines = [\"127.0.0.1:4000\"]\nstale_threshold_ms = 1\nsource_threshold_ms = 1\n",
    )
    .unwrap();
    let sourced = dir.path().join("sourced.toml");
    std::fs::write(
        &sourced,
        "[[feed]]\nname = \"x\"\nprotocol = \"itch50\"\nlines = [\"239.9.9.9:4000\"]\nsource = \"10.9.9.9\"\nstale_threshold_ms = 1\nsource_threshold_ms = 1\n",
    )
    .unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--config".into(), sqf_only.display().to_string()],
            "no itch50 feed",
        ),
        (vec!["--recovery=10.0.0.1:5000".into()], "loopback"),
        (vec!["--line-a=10.0.0.1:5000".into()], "neither loopback"),
        (vec!["--session=ELEVENCHARS".into()], "--session"),
        (vec!["--request-drop=101".into()], "--request-drop"),
        (vec!["--kind=delta".into()], "--protocol sqf only"),
        (vec!["--glimpse=10.0.0.1:18100".into()], "loopback only"),
        (
            vec!["--glimpse=127.0.0.1:18100".into()],
            "the environment variable TG_GLIMPSE_PW (--glimpse-password-env): not set",
        ),
        (
            vec![
                "--glimpse=127.0.0.1:18100".into(),
                "--glimpse-fault=stall".into(),
            ],
            "stall needs a value: stall:N",
        ),
        (vec!["--glimpse-fault=reject-a".into()], "--glimpse <ADDR>"),
        (
            vec![
                "--config".into(),
                itch.display().to_string(),
                "--line-a=127.0.0.1:5000".into(),
            ],
            "--line-a does not apply with --config",
        ),
        (
            vec![
                "--config".into(),
                itch.display().to_string(),
                "--recovery=127.0.0.1:5001".into(),
            ],
            "--recovery does not apply with --config",
        ),
        // The feed's own source is sent from (here one no simulator may use).
        (
            vec!["--config".into(), sourced.display().to_string()],
            "feed 'x' joins from source 10.9.9.9, not a loopback address",
        ),
    ];
    for (args, needle) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_tickguard"))
            .args(["simulate", "--protocol", "itch50", "--count=1"])
            .args(&args)
            .env_remove("TG_GLIMPSE_PW")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .args([
            "simulate",
            "--line-a=127.0.0.1:9",
            "--count=1",
            "--linger-ms=5",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--linger-ms applies to --protocol itch50 only"),
        "{err}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .args([
            "simulate",
            "--line-a=127.0.0.1:9",
            "--count=1",
            "--glimpse=127.0.0.1:18100",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--glimpse applies to --protocol itch50 only"),
        "{err}"
    );
}
