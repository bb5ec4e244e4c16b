//! The live sidecar over real sockets on loopback: `tickguard run` in a
//! child process, datagrams from this process, verdicts read by other
//! processes (`tickguard check`) and by `tickguard::Reader`.

use crate::common;

use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tickguard::protocol::sqf::PacketBuilder;
use tickguard::symbol::Symbol;
use tickguard::time::now_ns;
use tickguard::{Health, Reader};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tickguard"))
}

struct Sidecar {
    child: Child,
    shm: PathBuf,
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        crate::common::remove_publication(&self.shm);
        // Left by a killed writer.
        let _ = std::fs::remove_file(tickguard::shm::lock_path(&self.shm));
    }
}

fn config(dir: &Path, shm: &Path, kind: &str, ports: (u16, u16), dead_after_ms: u64) -> PathBuf {
    let text = format!(
        r#"
[state]
capacity = 1024
[metrics]
enabled = false
[sidecar]
shm_path = "{}"
idle = "sleep"
idle_sleep_us = 100
heartbeat_ms = 1
dead_after_ms = {dead_after_ms}
[[feed]]
name = "lp1"
kind = "{kind}"
lines = ["127.0.0.1:{}", "127.0.0.1:{}"]
stale_threshold_ms = 60000
source_threshold_ms = 60000
clock_offset = 0
"#,
        shm.display(),
        ports.0,
        ports.1
    );
    let path = dir.join("config.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Starts `tickguard run` and waits until its own publication answers.
fn start(config: &Path, shm: &Path, record: Option<&Path>) -> Sidecar {
    let mut cmd = Command::new(bin());
    cmd.arg("run")
        .arg("--config")
        .arg(config)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(r) = record {
        cmd.arg("--record").arg(r);
    }
    let child = cmd.spawn().unwrap();
    let s = Sidecar {
        child,
        shm: shm.to_path_buf(),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = Reader::open(shm);
        if r.health(now_ns()).is_ok() && r.writer_pid() == Some(s.child.id() as u64) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "sidecar did not come up: {}",
            r.health(now_ns())
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn check(shm: &Path, symbol: &str) -> (i32, serde_json::Value) {
    check_with(shm, symbol, &[])
}

/// `check` of `symbol`, taking the writer as alive for a minute after its
/// heartbeat unless `extra` sets the bound (a writer not scheduled for a
/// tenth of a second on a loaded machine is not the dead one a test asks
/// about).
fn check_with(shm: &Path, symbol: &str, extra: &[&str]) -> (i32, serde_json::Value) {
    let bound = extra.contains(&"--dead-after-ms");
    let out = Command::new(bin())
        .args(["check", "lp1", symbol, "--json", "--shm"])
        .arg(shm)
        .args(extra)
        .args(if bound {
            &[][..]
        } else {
            &["--dead-after-ms", "60000"][..]
        })
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code().unwrap_or(-1), v)
}

fn sym(s: &str) -> Symbol {
    Symbol::parse(s).unwrap()
}

fn shm_path(name: &str) -> PathBuf {
    PathBuf::from(format!(
        "/dev/shm/tickguard-test-{name}-{}",
        std::process::id()
    ))
}

/// Waits until the sidecar has taken `packets` datagrams.
fn wait_packets(shm: &Path, packets: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = Reader::open(shm)
            .counter(0, tickguard::shm::counter::PACKETS)
            .unwrap_or(0);
        if got >= packets {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "only {got} of {packets} datagrams arrived"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn live_verdicts_reach_other_processes_and_replay_of_the_recording_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let shm = shm_path("live");
    let ports = (crate::common::free_port(), crate::common::free_port());
    let cfg = config(dir.path(), &shm, "delta", ports, 1000);
    let rec = dir.path().join("received.pcap");
    let sidecar = start(&cfg, &shm, Some(&rec));

    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let send = |line: u16, p: &[u8]| {
        tx.send_to(p, ("127.0.0.1", line)).unwrap();
    };
    let now = now_ns();
    let mut sent = 0u64;
    // EURUSD: snapshot at 10 then 11..=40 on both lines, line A loses 20..=25 (B fills in).
    let mut b = PacketBuilder::new(now);
    b.snapshot(sym("EURUSD"), 10, now, 1.0, 1.1);
    let p = b.finish();
    send(ports.0, &p);
    send(ports.1, &p);
    sent += 2;
    for seq in 11..=40u64 {
        let mut b = PacketBuilder::new(now);
        b.quote(sym("EURUSD"), seq, now, 1.0, 1.1);
        let p = b.finish();
        if !(20..=25).contains(&seq) {
            send(ports.0, &p);
            sent += 1;
        }
        send(ports.1, &p);
        sent += 1;
        if seq == 25 {
            // B's fill is in before A's next tick is sent: a copy the
            // kernel stamped but had not yet queued when the handler read
            // its socket would be overtaken by A's later tick (the merge's
            // known blind spot, `sidecar/merge.rs`), and the delta feed
            // would turn suspect on ticks B did carry.
            wait_packets(&shm, sent);
        }
    }
    // GBPUSD: quotes 1..=10 with 4..=6 lost on both lines: a delta feed stays suspect.
    for seq in 1..=10u64 {
        let mut b = PacketBuilder::new(now);
        b.quote(sym("GBPUSD"), seq, now, 1.2, 1.3);
        if !(4..=6).contains(&seq) {
            let p = b.finish();
            send(ports.0, &p);
            sent += 1;
        }
    }
    // USDJPY: a snapshot, then a quote with a crossed price.
    let mut b = PacketBuilder::new(now);
    b.snapshot(sym("USDJPY"), 1, now, 149.0, 150.0)
        .quote(sym("USDJPY"), 2, now, 150.0, 149.0);
    send(ports.1, &b.finish());
    sent += 1;
    // A malformed datagram.
    send(ports.0, b"SQ\x01\x00 not a packet");
    sent += 1;
    wait_packets(&shm, sent);

    // Other processes ask.
    let (code, v) = check(&shm, "EURUSD");
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["ok"], true);
    let (code, v) = check(&shm, "GBPUSD");
    assert_eq!(code, 1);
    assert_eq!(v["reasons"], serde_json::json!(["suspect"]));
    let (code, v) = check(&shm, "USDJPY");
    assert_eq!(code, 1);
    assert_eq!(v["reasons"], serde_json::json!(["invalid_price"]));
    let (code, v) = check(&shm, "NZDUSD");
    assert_eq!(code, 1);
    assert_eq!(v["reasons"], serde_json::json!(["no_quote"]));
    // Not a name (a space at an end, a control character): exit 2.
    for name in [" EURUSD", "EUR\tUSD"] {
        let (code, _) = check(&shm, name);
        assert_eq!(code, 2, "{name:?}");
    }

    // The reader API, with the change counter (a minute's bound, as above).
    let reader = crate::common::live_reader(&shm);
    let h = reader.lookup("lp1", "EURUSD").expect("EURUSD published");
    let v1 = reader.check(&h, now_ns());
    assert!(v1.is_ok() && v1.version > 0 && v1.version.is_multiple_of(2));
    let v2 = reader.check(&h, now_ns());
    assert_eq!(v1.version, v2.version, "nothing changed in between");

    // Clean shutdown closes the publication: every reader answers stale.
    // SIGTERM, as a service manager would send.
    let mut sidecar = sidecar;
    let status = crate::common::terminate(&mut sidecar.child);
    assert!(status.success(), "{status:?}");
    let closed = reader.check(&h, now_ns());
    assert_eq!(closed.health, Health::WriterClosed);
    assert_eq!(closed.reasons.names().collect::<Vec<_>>(), ["stale"]);
    assert_eq!(check(&shm, "EURUSD").0, 1);

    // Replaying what the sidecar received gives the state it published.
    let live = reader.records();
    let fs = &common::replay_recording(&cfg, &rec, "lp1");
    assert_eq!(fs.packets, sent);
    assert_eq!(fs.rejected, 1);
    common::assert_same_state(&live, fs);
    let eur = &fs.symbols["EURUSD"];
    assert_eq!(
        (eur.last_seq, eur.ticks_lost),
        (40, 0),
        "line B filled line A's gap"
    );
    assert_eq!(fs.symbols["GBPUSD"].ticks_lost, 3);
}

#[test]
fn a_killed_writer_reads_stale_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let shm = shm_path("kill");
    let ports = (crate::common::free_port(), crate::common::free_port());
    let bound_ms = 50;
    let cfg = config(dir.path(), &shm, "full", ports, bound_ms);
    let mut sidecar = start(&cfg, &shm, None);
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut b = PacketBuilder::new(now_ns());
    b.quote(sym("EURUSD"), 1, now_ns(), 1.0, 1.1);
    tx.send_to(&b.finish(), ("127.0.0.1", ports.0)).unwrap();
    wait_packets(&shm, 1);

    let readers: Vec<Reader> = (0..3)
        .map(|_| Reader::open_with(&shm, bound_ms * 1_000_000))
        .collect();
    let handles: Vec<_> = readers
        .iter()
        .map(|r| r.lookup("lp1", "EURUSD").unwrap())
        .collect();
    // Alive at its own last heartbeat (a wall-clock check could find the
    // writer preempted past 50 ms on a loaded machine).
    for (r, h) in readers.iter().zip(&handles) {
        assert!(r.check(h, r.heartbeat_ns().unwrap()).is_ok());
    }

    // SIGKILL: no chance to close the publication.
    sidecar.child.kill().unwrap();
    sidecar.child.wait().unwrap();
    let last_beat = readers[0].heartbeat_ns().unwrap();
    let bound = bound_ms * 1_000_000;
    for (r, h) in readers.iter().zip(&handles) {
        // At the bound the writer still counts as alive; one ns later, dead.
        assert!(r.check(h, last_beat + bound).is_ok());
        let v = r.check(h, last_beat + bound + 1);
        assert_eq!(v.health, Health::WriterDead { age_ns: bound + 1 });
        assert_eq!(v.reasons.names().collect::<Vec<_>>(), ["stale"]);
    }
    // And on the wall clock, for readers in other processes.
    std::thread::sleep(Duration::from_millis(bound_ms + 20));
    let (code, v) = check_with(&shm, "EURUSD", &["--dead-after-ms", &bound_ms.to_string()]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["reasons"], serde_json::json!(["stale"]));
    assert!(v["health"].as_str().unwrap().contains("dead"), "{v}");

    // A new writer replaces the file; an old reader sees the old writer dead,
    // and after refresh() the new one.
    let _second = start(&cfg, &shm, None);
    let mut stale_reader = readers.into_iter().next().unwrap();
    assert!(!stale_reader.health(now_ns()).is_ok());
    assert!(stale_reader.refresh());
    let beat = stale_reader.heartbeat_ns().unwrap();
    assert!(stale_reader.health(beat).is_ok());
    assert_eq!(
        stale_reader
            .check_symbol("lp1", "EURUSD", now_ns())
            .reasons
            .names()
            .collect::<Vec<_>>(),
        ["no_quote"]
    );
}

/// A sidecar killed (no chance to finish its recording) leaves a file
/// holding every datagram it applied more than a second before: the
/// recording's buffer is written out every second, not only when full.
#[test]
fn a_killed_sidecar_leaves_its_recording_readable() {
    let dir = tempfile::tempdir().unwrap();
    let shm = shm_path("kill-record");
    let ports = (crate::common::free_port(), crate::common::free_port());
    let cfg = config(dir.path(), &shm, "full", ports, 1000);
    let rec = dir.path().join("tap.pcap");
    let mut sidecar = start(&cfg, &shm, Some(&rec));
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let sent = 5u64;
    for seq in 1..=sent {
        let mut b = PacketBuilder::new(now_ns());
        b.quote(sym("EURUSD"), seq, now_ns(), 1.0, 1.1);
        tx.send_to(&b.finish(), ("127.0.0.1", ports.0)).unwrap();
    }
    wait_packets(&shm, sent);
    let records = || {
        let Ok(mut capture) = tickguard::capture::CaptureReader::open(&rec) else {
            return 0;
        };
        let mut n = 0u64;
        let _ = capture.for_each(|_| n += 1);
        n
    };
    // Five small datagrams stay far below the buffer's size: only the
    // periodic write-out brings them to the file.
    let deadline = Instant::now() + Duration::from_secs(20);
    while records() < sent {
        assert!(
            Instant::now() < deadline,
            "{} of {sent} recorded",
            records()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    sidecar.child.kill().unwrap();
    sidecar.child.wait().unwrap();
    // Read to its end without an error: no record cut short.
    let mut capture = tickguard::capture::CaptureReader::open(&rec).unwrap();
    let mut n = 0u64;
    capture.for_each(|_| n += 1).unwrap();
    assert_eq!(n, sent);
}

#[test]
fn missing_publication_reads_stale() {
    let shm = shm_path("missing");
    // `check` has no verdict to give: an error (exit 2), nothing on stdout.
    let (code, v) = check(&shm, "EURUSD");
    assert_eq!((code, v), (2, serde_json::Value::Null));
    let r = Reader::open(&shm);
    assert_eq!(
        r.check_symbol("lp1", "EURUSD", now_ns())
            .reasons
            .names()
            .collect::<Vec<_>>(),
        ["stale"]
    );
    assert!(matches!(r.health(now_ns()), Health::Missing(_)));
}

/// A datagram longer than the largest the sidecar receives (9,216
/// bytes) is dropped whole and counted as oversized: its first 9,216
/// bytes never reach the feed.
#[test]
fn an_oversized_datagram_is_dropped_whole_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let shm = shm_path("oversized");
    let ports = (crate::common::free_port(), crate::common::free_port());
    let cfg = config(dir.path(), &shm, "full", ports, 1000);
    let config = tickguard::config::Config::load(&cfg).unwrap();
    let mut sidecar = tickguard::sidecar::Sidecar::start(&config).unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let t = now_ns();
    let mut b = PacketBuilder::new(t);
    b.quote(sym("EURUSD"), 1, t, 1.0, 1.1);
    let mut big = b.finish();
    big.resize(10_000, 0);
    tx.send_to(&big, ("127.0.0.1", ports.0)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while sidecar.stats().oversized == 0 {
        assert!(Instant::now() < deadline, "never received");
        sidecar.cycle(now_ns());
    }
    let c = &sidecar.handler().feeds()[0].counters;
    assert_eq!((c.packets, c.rejected), (0, 0));
    drop(sidecar);
    crate::common::remove_publication(&shm);
}

#[test]
fn embedded_sidecar_tells_subscribers_of_verdict_changes_and_never_waits_for_them() {
    let dir = tempfile::tempdir().unwrap();
    let shm = shm_path("subscribe");
    let ports = (crate::common::free_port(), crate::common::free_port());
    let cfg = config(dir.path(), &shm, "delta", ports, 1000);
    let mut config = tickguard::config::Config::load(&cfg).unwrap();
    config.feeds[0].thresholds.stale_ns = 200_000_000;
    let mut sidecar = tickguard::sidecar::Sidecar::start(&config).unwrap();
    let changes = sidecar.subscribe(2);
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let t = now_ns();
    let mut b = PacketBuilder::new(t);
    b.quote(sym("EURUSD"), 1, t, 1.0, 1.1);
    tx.send_to(&b.finish(), ("127.0.0.1", ports.0)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while sidecar.handler().feeds()[0].counters.packets == 0 {
        assert!(Instant::now() < deadline);
        sidecar.cycle(now_ns());
    }
    // First quote on a delta feed: no snapshot yet, so suspect.
    let c = changes.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(
        (c.symbol, c.old, c.new),
        (
            sym("EURUSD"),
            tickguard::verdict::Reasons::NO_QUOTE,
            tickguard::verdict::Reasons::SUSPECT
        )
    );
    // A snapshot repairs it.
    let mut b = PacketBuilder::new(t);
    b.snapshot(sym("EURUSD"), 1, t, 1.0, 1.1);
    tx.send_to(&b.finish(), ("127.0.0.1", ports.1)).unwrap();
    let c = loop {
        sidecar.cycle(now_ns());
        if let Ok(c) = changes.try_recv() {
            break c;
        }
        assert!(Instant::now() < deadline);
    };
    assert!(c.new.is_ok() && c.old == tickguard::verdict::Reasons::SUSPECT);
    // Time passes: stale, seen at the cycle's time.
    let later = t + 300_000_000;
    sidecar.cycle(later);
    let c = changes.try_recv().unwrap();
    assert_eq!(
        (c.new, c.time_ns),
        (tickguard::verdict::Reasons::STALE, later)
    );
    // A subscriber that does not read: the channel (2) fills (ok, then
    // stale), the rest are counted: ok dropped; stale again is what it was
    // last told, nothing to tell; ok dropped again.
    for i in 0..5u64 {
        sidecar.cycle(if i % 2 == 0 { t } else { later });
    }
    assert_eq!(sidecar.stats().change_drops, 2);
    let told: Vec<_> = changes.try_iter().map(|c| c.new).collect();
    assert_eq!(told.len(), 2);
    assert!(told[0].is_ok() && told[1] == tickguard::verdict::Reasons::STALE);
    // Once it reads again, the change it missed is told at the next
    // sweep, from what it was last told: not lost for good.
    sidecar.cycle(t);
    let c = changes.try_recv().unwrap();
    assert!(
        c.old == tickguard::verdict::Reasons::STALE && c.new.is_ok(),
        "{c:?}"
    );
    drop(sidecar);
    crate::common::remove_publication(&shm);
}

/// A publication recreated under the sidecar (here: its clock stepped
/// back to before the file's start time) starts every symbol over: a
/// subscriber is told each one it knew goes to `no_quote`, and a symbol
/// given the same slot in the new file is told from `no_quote`, not from
/// the old file's verdict.
#[test]
fn subscribers_are_told_every_symbol_starts_over_with_a_new_publication() {
    let dir = tempfile::tempdir().unwrap();
    let shm = shm_path("subscribe-recreate");
    let ports = (crate::common::free_port(), crate::common::free_port());
    let cfg = config(dir.path(), &shm, "delta", ports, 1000);
    let config = tickguard::config::Config::load(&cfg).unwrap();
    let mut sidecar = tickguard::sidecar::Sidecar::start(&config).unwrap();
    let changes = sidecar.subscribe(16);
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let ok = |name: &str, t: u64, sidecar: &mut tickguard::sidecar::Sidecar| {
        let mut b = PacketBuilder::new(t);
        b.snapshot(sym(name), 1, t, 1.0, 1.1);
        tx.send_to(&b.finish(), ("127.0.0.1", ports.0)).unwrap();
        loop {
            sidecar.cycle(now_ns());
            if let Ok(c) = changes.try_recv() {
                return c;
            }
            assert!(Instant::now() < deadline);
        }
    };
    let c = ok("EURUSD", now_ns(), &mut sidecar);
    assert!(c.new.is_ok() && c.old == tickguard::verdict::Reasons::NO_QUOTE);
    let back = now_ns() - 10_000_000_000;
    sidecar.cycle(back);
    let c = changes.try_recv().expect("told at the recreation");
    assert_eq!(
        (c.symbol, c.old, c.new, c.time_ns),
        (
            sym("EURUSD"),
            tickguard::verdict::Reasons::empty(),
            tickguard::verdict::Reasons::NO_QUOTE,
            back
        )
    );
    // The new file's first symbol takes slot 0 again: told from no_quote.
    let c = ok("GBPUSD", now_ns(), &mut sidecar);
    assert_eq!(c.symbol, sym("GBPUSD"));
    assert!(c.new.is_ok() && c.old == tickguard::verdict::Reasons::NO_QUOTE);
    drop(sidecar);
    crate::common::remove_publication(&shm);
}

/// The writer's heartbeat follows a clock stepped back at once: after a
/// cycle at `t + 10 s`, the next at `t` (an NTP or PTP step, `date -s`)
/// beats at `t`, so readers on the stepped clock take the writer for a
/// live one again instead of one 10 s ahead of them.
#[test]
fn the_heartbeat_follows_a_clock_stepped_back() {
    let dir = tempfile::tempdir().unwrap();
    let shm = shm_path("stepped");
    let ports = (crate::common::free_port(), crate::common::free_port());
    let cfg = config(dir.path(), &shm, "delta", ports, 1000);
    let config = tickguard::config::Config::load(&cfg).unwrap();
    let mut sidecar = tickguard::sidecar::Sidecar::start(&config).unwrap();
    let reader = Reader::open(&shm);
    let t = now_ns();
    sidecar.cycle(t + 10_000_000_000);
    assert_eq!(reader.heartbeat_ns(), Some(t + 10_000_000_000));
    sidecar.cycle(t);
    assert_eq!(reader.heartbeat_ns(), Some(t));
    assert!(reader.health(t).is_ok(), "{:?}", reader.health(t));
    drop(sidecar);
    crate::common::remove_publication(&shm);
}

/// Sends `rounds` × `per_round` datagrams of 40 quotes (about 1.3 KB
/// each, sequences from 1) to `port`, each round applied by the sidecar
/// before the next is sent.
fn send_and_apply(
    sidecar: &mut tickguard::sidecar::Sidecar,
    port: u16,
    rounds: u64,
    per_round: u64,
) {
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let t = now_ns();
    let deadline = Instant::now() + Duration::from_secs(20);
    for round in 0..rounds {
        for i in 0..per_round {
            let seq = round * per_round + i + 1;
            let mut b = PacketBuilder::new(t);
            for s in 0..40 {
                b.quote(sym(&format!("S{s}")), seq, t, 1.0, 1.1);
            }
            tx.send_to(&b.finish(), ("127.0.0.1", port)).unwrap();
        }
        while sidecar.handler().feeds()[0].counters.packets < (round + 1) * per_round {
            assert!(Instant::now() < deadline, "datagrams not received");
            sidecar.cycle(now_ns());
        }
    }
}

/// `run --record` with a bound (`--record-max-mb`): the file grows no
/// further, the write that would pass the bound stops the recording as a
/// full disk would (EFBIG), the file holds whole records that read back,
/// and the sidecar goes on applying every datagram.
#[test]
fn a_recording_stops_at_its_bound_with_whole_records() {
    let dir = tempfile::tempdir().unwrap();
    let shm = shm_path("bounded-record");
    let ports = (crate::common::free_port(), crate::common::free_port());
    let cfg = config(dir.path(), &shm, "full", ports, 1000);
    let config = tickguard::config::Config::load(&cfg).unwrap();
    let mut sidecar = tickguard::sidecar::Sidecar::start(&config).unwrap();
    let file = dir.path().join("tap.pcap");
    let bound = 300_000u64;
    sidecar.record(&file, Some(bound)).unwrap();
    // 400 datagrams of about 1.3 KB: 500 KB, past the bound.
    let (rounds, per_round) = (20u64, 20u64);
    send_and_apply(&mut sidecar, ports.0, rounds, per_round);
    // Every record taken written (on the recording's thread) or counted.
    sidecar.end_recording();
    let st = sidecar.stats().clone();
    assert!(st.record_stopped, "{st:?}");
    assert_eq!(
        st.record_errno,
        tickguard::sidecar::RECORD_BOUND_REACHED,
        "{st:?}"
    );
    assert_eq!(
        sidecar.handler().feeds()[0].counters.packets,
        rounds * per_round
    );
    drop(sidecar);
    crate::common::remove_publication(&shm);
    let len = std::fs::metadata(&file).unwrap().len();
    assert!(len > 0 && len <= bound, "{len} bytes");
    let mut capture = tickguard::capture::CaptureReader::open(&file).unwrap();
    let mut records = 0u64;
    capture
        .for_each(|_| records += 1)
        .expect("whole records only");
    // Every datagram is in the file or counted out of it.
    assert!(records > 0, "{records}");
    assert_eq!(records + st.unrecorded, rounds * per_round);
}

/// `run --record` onto a filesystem that is full: the recording stops at
/// its first failed write, counted with the error, and the sidecar goes on
/// applying every datagram.
#[test]
fn a_recording_onto_a_full_disk_stops_and_the_feed_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let shm = shm_path("full-disk");
    let ports = (crate::common::free_port(), crate::common::free_port());
    let cfg = config(dir.path(), &shm, "full", ports, 1000);
    let config = tickguard::config::Config::load(&cfg).unwrap();
    let mut sidecar = tickguard::sidecar::Sidecar::start(&config).unwrap();
    // Every write to /dev/full fails with ENOSPC.
    sidecar.record(Path::new("/dev/full"), None).unwrap();
    // 400 datagrams of 40 quotes (about 1.3 KB each): 500 KB, past the
    // recording's buffer.
    let (rounds, per_round) = (20u64, 20u64);
    send_and_apply(&mut sidecar, ports.0, rounds, per_round);
    sidecar.end_recording();
    let st = sidecar.stats();
    assert!(st.record_stopped, "{st:?}");
    assert_eq!(st.record_errno, libc::ENOSPC, "{st:?}");
    // Every datagram: those the buffer held when writing it out failed,
    // that one, and every one after (the device took none).
    assert_eq!(st.unrecorded, rounds * per_round, "{st:?}");
    assert_eq!(
        sidecar.handler().feeds()[0].counters.packets,
        rounds * per_round
    );
    drop(sidecar);
    crate::common::remove_publication(&shm);
}
