//! `/metrics` of a running sidecar fed by `tickguard simulate`, checked
//! against what the simulator says it injected.

use crate::common::Killed;
use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tickguard"))
}

fn scrape(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}

/// The value of the sample whose name and labels are exactly `series`.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// A `tickguard run` with two unicast loopback lines and metrics, up and
/// serving `/metrics`; its log goes to `log`.
struct Sidecar {
    _run: Killed,
    a: u16,
    b: u16,
    http: u16,
    log: PathBuf,
    shm: String,
    _dir: tempfile::TempDir,
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        crate::common::remove_publication(&self.shm);
    }
}

fn start(name: &str) -> Sidecar {
    start_feed(name, "kind = \"full\"")
}

/// [`start`] with feed lp1's protocol keys given (`kind`, or `protocol`).
fn start_feed(name: &str, protocol: &str) -> Sidecar {
    start_stale_after(name, protocol, 60_000)
}

/// [`start_feed`] with lp1 stale after `stale_ms`.
fn start_stale_after(name: &str, protocol: &str, stale_ms: u64) -> Sidecar {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, http) = (
        crate::common::free_port(),
        crate::common::free_port(),
        crate::common::free_port(),
    );
    let shm = format!("/dev/shm/tickguard-{name}-{}", std::process::id());
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[metrics]
listen = "127.0.0.1:{http}"
interval_ms = 50
[sidecar]
shm_path = "{shm}"
idle = "sleep"
idle_sleep_us = 50
[[feed]]
name = "lp1"
{protocol}
lines = ["127.0.0.1:{a}", "127.0.0.1:{b}"]
stale_threshold_ms = {stale_ms}
source_threshold_ms = 60000
"#
        ),
    )
    .unwrap();
    let log = dir.path().join("run.log");
    let run = crate::common::run_logged(&[], &cfg, &log);
    let deadline = Instant::now() + Duration::from_secs(20);
    while scrape(http).is_none_or(|t| !t.contains("tickguard_")) {
        assert!(
            Instant::now() < deadline,
            "no /metrics: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Sidecar {
        _run: run,
        a,
        b,
        http,
        log,
        shm,
        _dir: dir,
    }
}

/// A neighbour holding idle connections to the metrics port (and one
/// trickling a request byte by byte): a scrape is still answered within
/// about the per-connection deadline, the sidecar holds a bounded number
/// of them (not a file descriptor each), and nothing is logged for them.
#[test]
fn idle_connections_to_the_metrics_port_cost_a_scrape_little() {
    let mut sidecar = start("metrics-idle");
    let pid = sidecar._run.0.id();
    let idle: Vec<TcpStream> = (0..300)
        .filter_map(|_| TcpStream::connect(("127.0.0.1", sidecar.http)).ok())
        .collect();
    assert!(idle.len() > 200, "{} connected", idle.len());
    let mut trickle = TcpStream::connect(("127.0.0.1", sidecar.http)).unwrap();
    for b in b"GET /met" {
        let _ = trickle.write_all(&[*b]);
        std::thread::sleep(Duration::from_millis(50));
    }
    let began = Instant::now();
    let text = scrape(sidecar.http).expect("a scrape answered");
    assert!(
        text.starts_with("HTTP/1.1 200 OK") && text.contains("tickguard_"),
        "{text}"
    );
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "{:?}",
        began.elapsed()
    );
    // While a neighbour keeps opening connections (bounded: 20,000 at
    // most, over at most 10 s), every scrape is answered: a request in is
    // read before its connection can make room for newer ones.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood: Vec<_> = (0..4)
        .map(|_| {
            let stop = stop.clone();
            let port = sidecar.http;
            std::thread::spawn(move || {
                let end = Instant::now() + Duration::from_secs(10);
                let mut held = std::collections::VecDeque::new();
                for _ in 0..20_000 {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) || Instant::now() > end {
                        break;
                    }
                    if let Ok(c) = TcpStream::connect(("127.0.0.1", port)) {
                        held.push_back(c);
                        if held.len() > 150 {
                            held.pop_front();
                        }
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    for i in 0..40 {
        let text = scrape(sidecar.http).unwrap_or_default();
        assert!(
            text.starts_with("HTTP/1.1 200 OK"),
            "scrape {i} during the flood: {text:?}"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for f in flood {
        f.join().unwrap();
    }
    let sockets = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|l| l.to_string_lossy().starts_with("socket:"))
        .count();
    assert!(sockets < 64, "{sockets} sockets held");
    drop(idle);
    // Stopped first: its log lines are queued, then written.
    assert!(crate::common::terminate(&mut sidecar._run.0).success());
    let log = std::fs::read_to_string(&sidecar.log).unwrap();
    assert!(log.contains("sidecar stopped"), "{log}");
    assert!(!log.contains("metrics listener"), "{log}");
}

#[test]
fn metrics_match_what_the_simulator_injected() {
    let sidecar = start("metrics");
    let (a, b, http, log) = (sidecar.a, sidecar.b, sidecar.http, &sidecar.log);
    let sim = Command::new(bin())
        .args([
            "simulate",
            "--line-a",
            &format!("127.0.0.1:{a}"),
            "--line-b",
            &format!("127.0.0.1:{b}"),
        ])
        .args([
            "--symbols",
            "10",
            // (2,000 a second: the receive buffer, 2 × rmem_max, holds
            // a few hundred ms of it, however long a loaded machine leaves
            // the sidecar unscheduled; none of it may be dropped.)
            "--rate",
            "2000",
            "--count",
            "4000",
            "--loss-a",
            "10",
            "--loss-b",
            "10",
        ])
        .args([
            "--duplicate",
            "2",
            "--invalid",
            "1",
            "--heartbeat-ms",
            "50",
            "--seed",
            "5",
            "--report",
        ])
        .output()
        .unwrap();
    assert!(
        sim.status.success(),
        "{}",
        String::from_utf8_lossy(&sim.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&sim.stdout).unwrap();
    let lines = report["lines"].as_array().unwrap();
    let sent = |i: usize| lines[i]["datagrams_sent"].as_u64().unwrap() as f64;
    let lost = report["ticks_lost_on_both_lines"].as_u64().unwrap() as f64;

    let deadline = Instant::now() + Duration::from_secs(20);
    let text = loop {
        let text = scrape(http).unwrap_or_default();
        let a_pk = value(&text, r#"tickguard_packets_total{feed="lp1",line="A"}"#).unwrap_or(0.0);
        let b_pk = value(&text, r#"tickguard_packets_total{feed="lp1",line="B"}"#).unwrap_or(0.0);
        let ticks_lost = value(&text, r#"tickguard_ticks_lost_total{feed="lp1"}"#);
        // The gauges of one monitor cycle are set one after another, so a
        // scrape can fall between them: wait for the symbol gauges and the
        // feed's lost ticks of the same cycle too.
        if a_pk == sent(0) && b_pk == sent(1) && symbols(&text) >= 10.0 && ticks_lost == Some(lost)
        {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "packets A {a_pk}/{} B {b_pk}/{}, ticks lost {ticks_lost:?}/{lost}",
            sent(0),
            sent(1)
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        value(&text, r#"tickguard_ticks_lost_total{feed="lp1"}"#),
        Some(lost),
        "{text}"
    );
    assert!(lost > 0.0);
    assert_eq!(
        value(
            &text,
            r#"tickguard_kernel_drops_total{feed="lp1",line="A"}"#
        ),
        Some(0.0)
    );
    // Line B repeats every tick of line A: those copies are counted apart
    // from the datagrams the simulator sent twice on one line.
    let same_line = value(&text, r#"tickguard_duplicate_events_total{feed="lp1"}"#).unwrap();
    let copies = value(&text, r#"tickguard_line_copies_total{feed="lp1"}"#).unwrap();
    assert!(same_line > 0.0, "{text}");
    assert!(copies > 10.0 * same_line, "{text}");
    assert_eq!(
        value(&text, r#"tickguard_feed_all_rejected{feed="lp1"}"#),
        Some(0.0)
    );
    assert!(value(&text, r#"tickguard_heartbeats_total{feed="lp1"}"#).unwrap() > 0.0);
    let held = value(
        &text,
        r#"tickguard_receive_buffer_bytes{feed="lp1",line="B"}"#,
    )
    .unwrap();
    assert!(held > 0.0, "{text}");
    // The default 8 MiB asked is capped wherever net.core.rmem_max is
    // lower (the kernel then holds twice rmem_max): flagged as such.
    let rmem_max: f64 = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let capped = f64::from(u8::from(rmem_max < f64::from(8u32 << 20)));
    for line in ["A", "B"] {
        let name = format!(r#"tickguard_receive_buffer_capped{{feed="lp1",line="{line}"}}"#);
        assert_eq!(
            value(&text, &name),
            Some(capped),
            "rmem_max {rmem_max}: {text}"
        );
    }
    // (Linux holds twice what it grants: the 8 MiB asked, or rmem_max
    // below it. At exactly 8 MiB it grants the whole, uncapped.)
    assert_eq!(held, 2.0 * rmem_max.min(f64::from(8u32 << 20)), "{text}");
    assert_eq!(
        value(
            &text,
            r#"tickguard_rejected_packets_total{feed="lp1",reason="bad_magic"}"#
        ),
        Some(0.0)
    );
    assert!(
        symbols(&text) >= 10.0,
        "every symbol counted under its verdict: {text}"
    );
    assert!(value(&text, "tickguard_receiver_worst_cycle_seconds").is_some());
    // Every metric family says what it is.
    let families: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    assert!(families.len() > 20, "{text}");
    for name in families {
        let help = text
            .lines()
            .find_map(|l| l.strip_prefix(&format!("# HELP {name} ")));
        assert!(
            help.is_some_and(|h| h.len() > 20),
            "{name} has no # HELP: {text}"
        );
    }
    assert!(text.contains("tickguard_receiver_polls_total{result=\"busy\"}"));
    // The log told of the gap bursts.
    std::thread::sleep(Duration::from_millis(200));
    let log = std::fs::read_to_string(log).unwrap();
    assert!(log.contains("gap burst started"), "{log}");
    assert!(
        log.contains("line open") && log.contains("starting from"),
        "{log}"
    );
    // Start-up speaks to operators: units and words, no Rust debug output.
    let start = log.lines().find(|l| l.contains("starting from")).unwrap();
    let feed = log.lines().find(|l| l.contains("feed lp1: sqf")).unwrap();
    for raw in ["{", "Auto", "window_ns", "Spin", "Some(", "_ns"] {
        assert!(
            !start.contains(raw) && !feed.contains(raw),
            "{raw}: {start}\n{feed}"
        );
    }
    assert!(feed.contains("clock offset "), "{feed}");
}

/// A feed whose every packet is rejected (here: not SQF at all) is loud:
/// a gauge and a warning naming the feed and the reason, once nothing was
/// accepted for its stale threshold (500 ms here).
#[test]
fn a_feed_whose_every_packet_is_rejected_is_flagged_and_warned() {
    let sidecar = start_stale_after("all-rejected", "kind = \"full\"", 500);
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut sent = 0;
    let text = loop {
        // A MoldUDP64 header (session, sequence, count) and nothing SQF.
        if sent < 1_000 {
            tx.send_to(
                b"SESSION001\0\0\0\0\0\0\0\x01\0\x01",
                ("127.0.0.1", sidecar.a),
            )
            .unwrap();
            sent += 1;
        }
        let text = scrape(sidecar.http).unwrap_or_default();
        if value(&text, r#"tickguard_feed_all_rejected{feed="lp1"}"#) == Some(1.0) {
            break text;
        }
        assert!(Instant::now() < deadline, "never flagged: {text}");
        std::thread::sleep(Duration::from_millis(5));
    };
    // At least 32 in a row, or two over a second on a loaded machine.
    assert!(
        value(
            &text,
            r#"tickguard_rejected_packets_total{feed="lp1",reason="bad_magic"}"#
        )
        .unwrap()
            >= 2.0
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let log = std::fs::read_to_string(&sidecar.log).unwrap();
        let warned = log.lines().any(|l| {
            l.contains("WARN")
                && l.contains("every packet of the feed is rejected (not SQF?)")
                && l.contains("feed=lp1")
                && l.contains("reason=\"bad_magic\"")
        });
        if warned {
            break;
        }
        assert!(Instant::now() < deadline, "no warning: {log}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An ITCH feed's rejected packets are counted under ITCH's reasons, and
/// SQF's message kinds are not exported for it (nor SQF's count of
/// messages dropped for a full table: it counts the symbols refused).
#[test]
fn an_itch_feeds_reject_reasons_are_its_own() {
    let sidecar = start_feed("itch-reasons", "protocol = \"itch50\"");
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    // A MoldUDP64 heartbeat (count 0) that carries bytes after its header.
    let mut packet = b"SESSION001\0\0\0\0\0\0\0\x01\0\0".to_vec();
    packet.extend_from_slice(b"\0\x03abc");
    let series = r#"tickguard_rejected_packets_total{feed="lp1",reason="control_with_body"}"#;
    let deadline = Instant::now() + Duration::from_secs(20);
    let text = loop {
        tx.send_to(&packet, ("127.0.0.1", sidecar.a)).unwrap();
        let text = scrape(sidecar.http).unwrap_or_default();
        if value(&text, series).is_some_and(|v| v >= 1.0) {
            break text;
        }
        assert!(Instant::now() < deadline, "not counted: {text}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let reasons: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("tickguard_rejected_packets_total{"))
        .filter_map(|l| l.split("reason=\"").nth(1)?.split('"').next())
        .collect();
    assert!(reasons.contains(&"bad_stock"), "{reasons:?}");
    assert!(!reasons.contains(&"bad_magic"), "SQF's names: {reasons:?}");
    assert!(!text.contains("tickguard_quotes_total"), "{text}");
    assert!(text.contains(r#"tickguard_heartbeats_total{feed="lp1"}"#));
    // A full table: symbols refused, not messages dropped.
    assert!(text.contains(r#"tickguard_table_full_symbols_total{feed="lp1"}"#));
    assert!(!text.contains("tickguard_table_full_drops_total"), "{text}");
    // The family's HELP names the family, not the first reason of it
    // (whose name and hint would read as every reason's).
    let help = text
        .lines()
        .find(|l| l.starts_with("# HELP tickguard_rejected_packets_total "))
        .unwrap_or_default();
    assert!(
        help.contains("`rejected_packets_total`")
            && help.contains("by reason")
            && !help.contains("(not"),
        "{help}"
    );
}

/// Packets naming a new session each (forged or not), each followed by an
/// end of session, are counted, and logged at most a line a second (two
/// when a logged session's end pairs with it); once a line is due again,
/// the session in force is logged, so the log's last word is the right one.
#[test]
fn a_flood_of_new_sessions_is_counted_not_logged_each() {
    let sidecar = start_feed("itch-sessions", "protocol = \"itch50\"");
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let start = Instant::now();
    for i in 0..200u32 {
        // A heartbeat of session "FORGED" + i, sequence 1, then its end.
        for count in [0u16, 0xffff] {
            let mut p = format!("FORGED{i:04}").into_bytes();
            p.extend_from_slice(&1u64.to_be_bytes());
            p.extend_from_slice(&count.to_be_bytes());
            tx.send_to(&p, ("127.0.0.1", sidecar.a)).unwrap();
        }
    }
    let series = r#"tickguard_feed_session_changes_total{feed="lp1"}"#;
    let deadline = Instant::now() + Duration::from_secs(20);
    while value(&scrape(sidecar.http).unwrap_or_default(), series).unwrap_or(0.0) < 199.0 {
        assert!(Instant::now() < deadline, "sessions not counted");
        std::thread::sleep(Duration::from_millis(20));
    }
    let seconds = start.elapsed().as_secs() + 1;
    let log = std::fs::read_to_string(&sidecar.log).unwrap();
    let starts = log.matches("new session: books start empty").count() as u64;
    let ends = log.matches("end of session: the market is closed").count() as u64;
    assert!(
        (1..=2 * (seconds + 1)).contains(&(starts + ends)),
        "{starts} starts and {ends} ends logged in {seconds} s: {log}"
    );
    // Once a line is due again, the session in force is named: the last.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = std::fs::read_to_string(&sidecar.log).unwrap();
        let last = log.lines().rev().find(|l| l.contains("session"));
        if last.is_some_and(|l| l.contains("this one now") && l.contains("FORGED0199")) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the session in force never logged: {log}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Symbols of feed lp1 counted under any verdict (one with two reasons is
/// counted under both).
fn symbols(text: &str) -> f64 {
    tickguard::metrics::VERDICTS
        .iter()
        .map(|v| {
            value(
                text,
                &format!(r#"tickguard_symbols{{feed="lp1",verdict="{v}"}}"#),
            )
            .unwrap_or(0.0)
        })
        .sum()
}

/// The exporter's metrics of a publication built in the test, without a
/// sidecar: names and labels from each feed's counter descriptors.
mod described {
    /// Halted and closed are verdict labels of every feed; each feed's other
    /// metrics come from its counter descriptors: the ITCH feed's status flags,
    /// stream gauges and counters and its recovery histogram, the SQF feed's
    /// message kinds, and neither the other's.
    #[test]
    fn each_feed_exports_the_counters_its_descriptors_describe() {
        use std::sync::Arc;
        use tickguard::config::Config;
        use tickguard::metrics::Monitor;
        use tickguard::shm::{counter, FeedInfo, Publication};
        use tickguard::sidecar::SharedStats;
        use tickguard::state::FeedKind;
        use tickguard::state::{FeedStatus, Level, StateTable, Top};
        let dir = tempfile::tempdir().unwrap();
        let shm = dir.path().join("shm");
        let config = Config::parse(
            &format!(
                "[sidecar]\nshm_path = \"{}\"\n\
                 [[feed]]\nname = \"lp1\"\nkind = \"full\"\nlines = [\"127.0.0.1:30001\"]\n\
                 stale_threshold_ms = 500\nsource_threshold_ms = 2000\nclock_offset = 0\n\
                 [[feed]]\nname = \"nasdaq\"\nprotocol = \"itch50\"\nlines = [\"127.0.0.1:30002\"]\n\
                 stale_threshold_ms = 500\nsource_threshold_ms = 2000\ntimezone = \"America/New_York\"\n\
                 max_symbols = 1024\n",
                shm.display()
            ),
            "test.toml",
        )
        .unwrap();
        let t = 1_767_603_600_000_000_000;
        let feeds: Vec<FeedInfo> = config
            .feeds
            .iter()
            .map(|f| FeedInfo::new(f.name.clone(), FeedKind::Delta, f.lines.clone(), f.protocol))
            .collect();
        let p = Arc::new(Publication::create(&shm, 0o600, 8, &feeds, t, 1_000_000).unwrap());
        let mut table = StateTable::shared(p.clone());
        let th = tickguard::verdict::Thresholds {
            stale_ns: 500_000_000,
            source_ns: 2_000_000_000,
        };
        // Of the closed ITCH feed, with its book empty: no_quote alone, but
        // its market closed.
        table
            .insert(1, tickguard::symbol::Symbol::parse("MSFT").unwrap(), th)
            .unwrap();
        let id = table
            .insert(1, tickguard::symbol::Symbol::parse("AAPL").unwrap(), th)
            .unwrap();
        table.slots()[id as usize].write_top(&Top {
            bid: Some(Level { price: 1, size: 1 }),
            halted: true,
            ..Top::default()
        });
        let status = FeedStatus {
            closed: true,
            joined: true,
            orders_refused: true,
            last_alive: t,
            source_watermark: t,
            ..FeedStatus::default()
        };
        table.set_feed_status(1, &status);
        // An SQF symbol without a quote yet: rejected (no_quote), not closed.
        table
            .insert(0, tickguard::symbol::Symbol::parse("EURUSD").unwrap(), th)
            .unwrap();
        // One alive whose price is ten seconds old at its source (the
        // threshold two): stale_at_source while its market is open.
        let id = table
            .insert(0, tickguard::symbol::Symbol::parse("GBPUSD").unwrap(), th)
            .unwrap();
        let px = tickguard::protocol::sqf::rules::Price {
            bid: 1.25,
            ask: 1.2501,
            source_time: t - 10_000_000_000,
        };
        table.slots()[id as usize]
            .update(|s| tickguard::protocol::sqf::rules::snapshot(s, 1, px, t));
        p.write_counters(|| {
            p.set_counter(1, counter::GAPS_OPEN, 4);
            p.set_counter(1, counter::RECOVERY_LATENCY, 2);
            p.set_counter(1, counter::RECOVERY_LATENCY + 3, 1);
        });
        p.ready();
        p.heartbeat(t);
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let mut m = metrics::with_local_recorder(&recorder, || {
            let mut m = Monitor::new(&config, Arc::new(SharedStats::default()));
            m.sample(t + 1);
            m
        });
        let text = handle.render();
        let has = |line: &str| text.lines().any(|l| l == line);
        for line in [
            r#"tickguard_symbols{feed="nasdaq",verdict="stale"} 0"#,
            r#"tickguard_symbols{feed="nasdaq",verdict="halted"} 1"#,
            r#"tickguard_symbols{feed="nasdaq",verdict="closed"} 1"#,
            r#"tickguard_symbols{feed="lp1",verdict="closed"} 0"#,
            r#"tickguard_symbols{feed="lp1",verdict="no_quote"} 1"#,
            r#"tickguard_symbols{feed="nasdaq",verdict="no_quote"} 1"#,
            r#"tickguard_symbols_rejected_open{feed="nasdaq"} 0"#,
            r#"tickguard_symbols_rejected_open{feed="lp1"} 2"#,
            r#"tickguard_symbols_stale_open{feed="nasdaq"} 0"#,
            r#"tickguard_symbols_stale_open{feed="lp1"} 0"#,
            r#"tickguard_symbols_stale_at_source_open{feed="nasdaq"} 0"#,
            r#"tickguard_symbols_stale_at_source_open{feed="lp1"} 1"#,
            r#"tickguard_symbols{feed="lp1",verdict="stale_at_source"} 1"#,
            r#"tickguard_feed_closed{feed="nasdaq"} 1"#,
            r#"tickguard_feed_suspect{feed="nasdaq"} 0"#,
            r#"tickguard_feed_joined{feed="nasdaq"} 1"#,
            r#"tickguard_feed_orders_refused{feed="nasdaq"} 1"#,
            r#"tickguard_feed_gaps_open{feed="nasdaq"} 4"#,
            r#"tickguard_feed_line_mismatches_total{feed="nasdaq"} 0"#,
            r#"tickguard_feed_recovery_latency_seconds_bucket{feed="nasdaq",le="0.000016"} 2"#,
            r#"tickguard_feed_recovery_latency_seconds_bucket{feed="nasdaq",le="0.000064"} 2"#,
            r#"tickguard_feed_recovery_latency_seconds_bucket{feed="nasdaq",le="0.000128"} 3"#,
            r#"tickguard_feed_recovery_latency_seconds_bucket{feed="nasdaq",le="+Inf"} 3"#,
            r#"tickguard_feed_recovery_latency_seconds_count{feed="nasdaq"} 3"#,
            r#"tickguard_quotes_total{feed="lp1"} 0"#,
            r#"tickguard_table_full_drops_total{feed="lp1"} 0"#,
            r#"tickguard_table_full_symbols_total{feed="nasdaq"} 0"#,
            r#"tickguard_packets_total{feed="lp1",line="A"} 0"#,
            r#"tickguard_rejected_packets_total{feed="lp1",reason="bad_magic"} 0"#,
            r#"tickguard_rejected_packets_total{feed="nasdaq",reason="bad_stock"} 0"#,
            r#"tickguard_feed_all_rejected{feed="nasdaq"} 0"#,
        ] {
            assert!(has(line), "{line} in:\n{text}");
        }
        // Every family says what it is, the ITCH feed's bucket runs too.
        for name in text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
        {
            let help = text
                .lines()
                .find_map(|l| l.strip_prefix(&format!("# HELP {name} ")));
            assert!(help.is_some_and(|h| h.len() > 20), "{name}: {text}");
        }
        for absent in [
            r#"tickguard_feed_closed{feed="lp1"}"#,
            r#"tickguard_feed_gaps_open{feed="lp1"}"#,
            r#"tickguard_quotes_total{feed="nasdaq"}"#,
            r#"tickguard_table_full_drops_total{feed="nasdaq"}"#,
            r#"tickguard_packets_total{feed="lp1",line="B"}"#,
        ] {
            assert!(!text.contains(absent), "{absent} in:\n{text}");
        }
        // A writer silent past `dead_after_ms`: every check answers stale,
        // and so do the gauges, whatever the slots say.
        metrics::with_local_recorder(&recorder, || m.sample(t + 10_000_000_000));
        let text = handle.render();
        for line in [
            r#"tickguard_symbols{feed="nasdaq",verdict="stale"} 2"#,
            r#"tickguard_symbols{feed="nasdaq",verdict="halted"} 0"#,
            r#"tickguard_symbols{feed="nasdaq",verdict="closed"} 0"#,
            // Stale while not closed: lp1's, not the closed feed's.
            r#"tickguard_symbols_stale_open{feed="nasdaq"} 0"#,
            r#"tickguard_symbols_stale_open{feed="lp1"} 2"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
        // The publication made again (its counts from 0): the exported
        // counters go on from where they were, a count rising again
        // included, rather than stay at the old total until the new count
        // passes it.
        drop(table);
        drop(p);
        let t2 = t + 20_000_000_000;
        let p = Arc::new(Publication::create(&shm, 0o600, 8, &feeds, t2, 1_000_000).unwrap());
        p.write_counters(|| p.set_counter(1, counter::RECOVERY_LATENCY, 1));
        p.ready();
        p.heartbeat(t2);
        metrics::with_local_recorder(&recorder, || m.sample(t2 + 1));
        let bucket =
            r#"tickguard_feed_recovery_latency_seconds_bucket{feed="nasdaq",le="0.000016"}"#;
        let text = handle.render();
        assert!(text.lines().any(|l| l == format!("{bucket} 3")), "{text}");
        p.write_counters(|| p.set_counter(1, counter::RECOVERY_LATENCY, 4));
        p.heartbeat(t2 + 2);
        metrics::with_local_recorder(&recorder, || m.sample(t2 + 3));
        let text = handle.render();
        assert!(text.lines().any(|l| l == format!("{bucket} 6")), "{text}");
    }

    /// A feed with `glimpse` exports its snapshots as the engine counted
    /// them: one connection rejected, the next merged 2.5 s after the
    /// trigger (so in the 10 s bucket: 0 up to 2 s, 1 from 10 s on), its
    /// N and `S` packets, every failure class under `class`.
    #[test]
    fn a_glimpse_feed_exports_its_snapshots_and_trigger_to_merge_histogram() {
        use crate::common::glimpse::{not_available, spin, Venue, MS, T0};
        use std::sync::Arc;
        use tickguard::metrics::Monitor;
        use tickguard::sidecar::SharedStats;
        let dir = tempfile::tempdir().unwrap();
        let mut v = Venue::new(&dir.path().join("shm"));
        v.datagrams(100..110);
        v.t = T0 + 1_000 * MS;
        v.connection(&not_available());
        v.t = T0 + 2_500 * MS;
        v.connection(&spin(105));
        v.publish();
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            let mut m = Monitor::new(&v.config, Arc::new(SharedStats::default()));
            m.sample(v.t + 1);
        });
        let text = handle.render();
        let has = |line: &str| text.lines().any(|l| l == line);
        let histogram = "tickguard_feed_snapshot_latency_seconds";
        for line in [
            r#"tickguard_feed_snapshot_awaiting{feed="nq"} 0"#,
            r#"tickguard_feed_snapshots_total{feed="nq"} 1"#,
            r#"tickguard_feed_snapshot_attempts_total{feed="nq"} 2"#,
            r#"tickguard_feed_snapshot_failures_total{feed="nq",class="rejected"} 1"#,
            r#"tickguard_feed_snapshot_failures_total{feed="nq",class="closed"} 0"#,
            r#"tickguard_feed_snapshot_gave_up_total{feed="nq"} 0"#,
            r#"tickguard_feed_snapshot_next{feed="nq"} 105"#,
            r#"tickguard_feed_snapshot_messages{feed="nq"} 2"#,
            &format!(r#"{histogram}_bucket{{feed="nq",le="0.5"}} 0"#),
            &format!(r#"{histogram}_bucket{{feed="nq",le="2"}} 0"#),
            &format!(r#"{histogram}_bucket{{feed="nq",le="10"}} 1"#),
            &format!(r#"{histogram}_bucket{{feed="nq",le="60"}} 1"#),
            &format!(r#"{histogram}_bucket{{feed="nq",le="+Inf"}} 1"#),
            &format!(r#"{histogram}_count{{feed="nq"}} 1"#),
        ] {
            assert!(has(line), "{line} in:\n{text}");
        }
        for class in tickguard::protocol::itch50::glimpse::Failure::ALL {
            let series = format!(
                r#"tickguard_feed_snapshot_failures_total{{feed="nq",class="{}"}} "#,
                class.as_str()
            );
            assert!(text.contains(&series), "{series} in:\n{text}");
        }
    }

    /// `tickguard_feed_snapshot_messages` is the last merged spin's `S`
    /// packets, a level: a smaller spin after a larger one lowers it (a
    /// Prometheus counter only grows, and the exporter keeps its highest
    /// value). The second snapshot is an operator's request (a connection
    /// while idle), merged at once: the histogram has one merge up to
    /// 0.5 s and one up to 10 s.
    #[test]
    fn a_smaller_spin_lowers_the_exported_snapshot_messages() {
        use crate::common::glimpse::{spin_of, Venue, MS, T0};
        use std::sync::Arc;
        use tickguard::metrics::Monitor;
        use tickguard::sidecar::SharedStats;
        let dir = tempfile::tempdir().unwrap();
        let mut v = Venue::new(&dir.path().join("shm"));
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let mut m = metrics::with_local_recorder(&recorder, || {
            Monitor::new(&v.config, Arc::new(SharedStats::default()))
        });
        let mut sample = |v: &mut Venue| {
            v.publish();
            metrics::with_local_recorder(&recorder, || m.sample(v.t + 1));
            handle.render()
        };
        let has = |text: &str, line: &str| text.lines().any(|l| l == line);
        v.datagrams(100..110);
        v.t = T0 + 2_500 * MS;
        v.connection(&spin_of(105, 3));
        let text = sample(&mut v);
        let messages = |n: u64| format!(r#"tickguard_feed_snapshot_messages{{feed="nq"}} {n}"#);
        assert!(has(&text, &messages(4)), "{text}");
        v.datagrams(110..115);
        v.connection(&spin_of(115, 1));
        let text = sample(&mut v);
        for line in [
            &messages(2),
            r#"tickguard_feed_snapshots_total{feed="nq"} 2"#,
            r#"tickguard_feed_snapshot_next{feed="nq"} 115"#,
            r#"tickguard_feed_snapshot_latency_seconds_bucket{feed="nq",le="0.5"} 1"#,
            r#"tickguard_feed_snapshot_latency_seconds_bucket{feed="nq",le="10"} 2"#,
            r#"tickguard_feed_snapshot_latency_seconds_count{feed="nq"} 2"#,
        ] {
            assert!(has(&text, line), "{line} in:\n{text}");
        }
        assert!(
            has(&text, "# TYPE tickguard_feed_snapshot_messages gauge"),
            "{text}"
        );
    }
}
