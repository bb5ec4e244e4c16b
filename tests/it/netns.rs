//! Real multicast, two lines, injected loss, in a network namespace this test
//! creates (`ip netns add`, `lo` up with multicast and a 224.0.0.0/4 route):
//! `tickguard simulate` and `tickguard run` inside it, verdicts read from
//! outside by other processes through the shared memory (the namespace
//! shares /dev/shm). Needs root and iproute2; CI runs as root.

use crate::common;
use crate::common::Killed;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use tickguard::shm::counter;
use tickguard::time::now_ns;
use tickguard::Reader;

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tickguard"))
}

struct Netns(String);

impl Netns {
    fn create(name: &str) -> Netns {
        let _ = Command::new("ip").args(["netns", "del", name]).output();
        let ns = Netns(name.to_string());
        ns.ip(&["netns", "add", name]);
        for args in [
            &["link", "set", "lo", "up"][..],
            &["link", "set", "lo", "multicast", "on"],
            &["route", "add", "224.0.0.0/4", "dev", "lo"],
        ] {
            let mut full = vec!["netns", "exec", name, "ip"];
            full.extend_from_slice(args);
            ns.ip(&full);
        }
        ns
    }

    fn ip(&self, args: &[&str]) {
        let out = Command::new("ip")
            .args(args)
            .output()
            .expect("iproute2 `ip` is needed");
        assert!(
            out.status.success(),
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts `tickguard run` inside the namespace (recording to `record`
    /// if given) and waits until its publication answers.
    fn start_sidecar(&self, cfg: &Path, shm: &Path, record: Option<&Path>) -> Killed {
        let mut cmd = self.command(&bin());
        cmd.arg("run")
            .arg("--config")
            .arg(cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(r) = record {
            cmd.arg("--record").arg(r);
        }
        let sidecar = Killed(cmd.spawn().unwrap());
        let deadline = Instant::now() + Duration::from_secs(20);
        while !Reader::open(shm).health(now_ns()).is_ok() {
            assert!(
                Instant::now() < deadline,
                "sidecar did not come up in the namespace"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        sidecar
    }

    /// A command run inside the namespace.
    fn command(&self, program: &Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0]).arg(program);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// One test's namespace, scratch directory and shared-memory path, all
/// named `tickguard-{what}-{pid}`; the shared memory is removed when the
/// test ends, passed or not.
struct Scene {
    ns: Netns,
    dir: tempfile::TempDir,
    shm: PathBuf,
}

impl Scene {
    fn new(what: &str) -> Scene {
        let pid = std::process::id();
        Scene {
            ns: Netns::create(&format!("tickguard-{what}-{pid}")),
            dir: tempfile::tempdir().unwrap(),
            shm: PathBuf::from(format!("/dev/shm/tickguard-{what}-{pid}")),
        }
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        crate::common::remove_publication(&self.shm);
    }
}

fn live_records(reader: &Reader) -> std::collections::BTreeMap<String, tickguard::state::Record> {
    reader
        .records()
        .into_iter()
        .filter_map(|r| Some((r.symbol?.to_string(), r)))
        .collect()
}

/// The `[state]`, `[metrics]` and `[sidecar]` tables a namespace test's
/// sidecar runs with: publishing to `shm`, lines joined on loopback, a
/// sleeping idle loop, dead to readers after `dead_after_ms`.
pub(crate) fn sidecar_tables(shm: &Path, dead_after_ms: u64) -> String {
    format!(
        "[state]\ncapacity = 4096\n[metrics]\nenabled = false\n[sidecar]\n\
         shm_path = \"{}\"\ninterface = \"127.0.0.1\"\nidle = \"sleep\"\n\
         idle_sleep_us = 50\ndead_after_ms = {dead_after_ms}\n",
        shm.display()
    )
}

/// True when a network namespace can be made here (root, with the
/// capabilities a container may withhold: tried, then removed); otherwise
/// says the test is skipped (and fails under CI, which runs as root).
fn can_create_namespaces() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    if !root {
        crate::common::skip("needs root to create a network namespace");
        return false;
    }
    // Named apart per call: tests of one process (`cargo test`) probe at
    // once; one a killed run left is removed first.
    static PROBES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = format!("tg-probe-{}-{n}", std::process::id());
    let _ = Command::new("ip").args(["netns", "del", &probe]).output();
    let made = Command::new("ip")
        .args(["netns", "add", &probe])
        .output()
        .is_ok_and(|o| o.status.success());
    if made {
        let _ = Command::new("ip").args(["netns", "del", &probe]).output();
    } else {
        crate::common::skip("needs a network namespace: `ip netns add` failed here");
    }
    made
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn multicast_two_lines_with_loss_in_a_namespace() {
    if !can_create_namespaces() {
        return;
    }
    let Scene { ns, dir, shm } = &Scene::new("netns");
    let rec = dir.path().join("received.pcap");
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"{}[[feed]]
name = "mc"
kind = "full"
lines = ["239.77.0.1:31001", "239.77.0.2:31002"]
stale_threshold_ms = 60000
source_threshold_ms = 60000
"#,
            sidecar_tables(shm, 2000)
        ),
    )
    .unwrap();

    let sidecar = ns.start_sidecar(&cfg, shm, Some(&rec));

    let sim = ns
        .command(&bin())
        .args([
            "simulate",
            "--line-a",
            "239.77.0.1:31001",
            "--line-b",
            "239.77.0.2:31002",
            "--symbols",
            "20",
            // (10,000 a second, 2 s: the receive buffer holds tens of ms
            // of both lines, through a sidecar the machine did not
            // schedule for a while; none of it may be dropped.)
            "--rate",
            "10000",
            "--count",
            "20000",
            "--loss-a",
            "5",
            "--loss-b",
            "5",
            "--heartbeat-ms",
            "50",
            "--seed",
            "11",
            "--report",
        ])
        .output()
        .unwrap();
    assert!(
        sim.status.success(),
        "simulate: {}",
        String::from_utf8_lossy(&sim.stderr)
    );
    let report = json(&sim);
    let sent: u64 = report["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["datagrams_sent"].as_u64().unwrap())
        .sum();
    let lost_on_both = report["ticks_lost_on_both_lines"].as_u64().unwrap();
    assert!(
        lost_on_both > 0,
        "5% loss per line over 20,000 quotes loses some on both"
    );

    let reader = Reader::open(shm);
    let deadline = Instant::now() + Duration::from_secs(20);
    while reader.counter(0, counter::PACKETS).unwrap_or(0) < sent {
        assert!(
            Instant::now() < deadline,
            "{} of {sent} datagrams arrived",
            reader.counter(0, counter::PACKETS).unwrap_or(0)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        reader.counter(0, counter::PACKETS),
        Some(sent),
        "nothing extra arrived"
    );
    assert_eq!(reader.counter(0, counter::KERNEL_DROPS), Some(0));
    assert_eq!(reader.counter(0, counter::REJECTED), Some(0));
    // Every tick that neither line carried is lost, and nothing else but a
    // rare late copy: the kernel stamps a datagram when the sender hands it
    // over, but can queue it to its socket later (its receive processing
    // deferred while both cores are busy), so a line's copy stamped before
    // the other line's next tick can miss the cycle that applies that tick,
    // and the tick counts as lost (seen once in CI, 8 of 20,000; the limit
    // is in `sidecar/merge.rs`). Losses are never hidden; the late ones stay
    // a few (at most 0.2% of the ticks, five times the excess seen).
    let ticks_lost = reader.counter(0, counter::TICKS_LOST).unwrap_or(0);
    assert!(
        (lost_on_both..=lost_on_both + 40).contains(&ticks_lost),
        "lost {ticks_lost}: what neither line carried ({lost_on_both}), at most 40 more late"
    );

    // Every symbol, from another process: ok (a full feed, heartbeats after
    // the last loss) — but for a late copy counted lost (above) that was its
    // symbol's last tick: the other line's next heartbeat then reports the
    // gap, which turns a full feed's symbol suspect until its next quote
    // (spec sqf §3, heartbeat step 2), and the late copy is a duplicate.
    // That is allowed only as often as late copies were counted.
    let late = ticks_lost - lost_on_both;
    // A symbol whose last quote neither line carried ends suspect too
    // (the closing heartbeat reports the gap): which ones depends on
    // where the heartbeats fell among the quotes, so on timing.
    let lost_last: Vec<&str> = report["last_quote_lost_on_both_lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let mut suspect_by_a_late_copy = 0;
    let last: &serde_json::Map<String, serde_json::Value> =
        report["last_sequence"].as_object().unwrap();
    assert_eq!(last.len(), 20);
    for (symbol, seq) in last {
        // (A minute's bound on the heartbeat: the writer preempted for a
        // tenth of a second on a loaded machine is not the point here.)
        let out = Command::new(bin())
            .args([
                "check",
                "mc",
                symbol,
                "--json",
                "--dead-after-ms",
                "60000",
                "--shm",
            ])
            .arg(shm)
            .output()
            .unwrap();
        let v = json(&out);
        if lost_last.contains(&symbol.as_str()) {
            assert_eq!(
                v["reasons"],
                serde_json::json!(["suspect"]),
                "{symbol}: its last quote lost on both lines: {v}"
            );
        } else if out.status.code() != Some(0) {
            assert_eq!(
                v["reasons"],
                serde_json::json!(["suspect"]),
                "{symbol}: {v}"
            );
            suspect_by_a_late_copy += 1;
        }
        let h = reader.lookup("mc", symbol).expect("published");
        let rec = &live_records(&reader)[&h.symbol().to_string()];
        assert_eq!(Some(rec.state.seq.last_seq), seq.as_u64(), "{symbol}");
    }
    assert!(
        suspect_by_a_late_copy <= late,
        "{suspect_by_a_late_copy} symbols suspect, {late} ticks counted lost late"
    );

    // Clean stop, then the recording replays to the same state.
    let live = reader.records();
    stop(sidecar);
    let fs = &common::replay_recording(&cfg, &rec, "mc");
    assert_eq!(fs.packets, sent);
    assert_eq!(fs.ticks_lost, ticks_lost);
    common::assert_same_state(&live, fs);
}

/// A feed with a `source` joins source-specifically: datagrams to its group
/// from any other sender never reach the handler.
#[test]
fn source_specific_join_ignores_spoofed_senders() {
    if !can_create_namespaces() {
        return;
    }
    let Scene { ns, dir, shm } = &Scene::new("ssm");
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[metrics]
enabled = false
[sidecar]
shm_path = "{}"
interface = "127.0.0.1"
idle = "sleep"
dead_after_ms = 2000
[[feed]]
name = "ssm"
kind = "full"
lines = ["232.1.1.1:32001"]
source = "127.0.0.1"
stale_threshold_ms = 60000
source_threshold_ms = 60000
"#,
            shm.display()
        ),
    )
    .unwrap();
    let _sidecar = ns.start_sidecar(&cfg, shm, None);
    let send = |source: &str, names: &str| {
        let out = ns
            .command(&bin())
            .args([
                "simulate",
                "--line-a",
                "232.1.1.1:32001",
                "--source",
                source,
                "--names",
                names,
            ])
            .args(["--rate", "2000", "--count", "200", "--report"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "simulate: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        json(&out)["lines"][0]["datagrams_sent"].as_u64().unwrap()
    };
    let spoofed = send("127.0.0.9", "SPOOF");
    let real = send("127.0.0.1", "REAL");
    assert!(spoofed > 0 && real > 0);
    let reader = Reader::open(shm);
    let deadline = Instant::now() + Duration::from_secs(20);
    while reader.counter(0, counter::PACKETS).unwrap_or(0) < real {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        reader.counter(0, counter::PACKETS),
        Some(real),
        "only the configured source's datagrams"
    );
    assert!(reader.lookup("ssm", "REAL").is_some());
    assert!(
        reader.lookup("ssm", "SPOOF").is_none(),
        "the spoofed sender's symbol never arrived"
    );
}

/// Joins the calling thread (one spawned for it) to the namespace `ns`
/// and returns a UDP socket there whose multicast stays on loopback (TTL 0).
fn sender_in(ns: &str) -> std::net::UdpSocket {
    join_namespace(ns);
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_multicast_ttl_v4(0).unwrap();
    socket
}

/// Sends garbage to `line` from inside the namespace `ns` (a thread joined to
/// it), `rate` datagrams per second for `duration`. Multicast leaves on
/// loopback with TTL 0. Returns the datagrams sent.
fn flood_line(
    ns: &str,
    line: std::net::SocketAddrV4,
    rate: u64,
    duration: Duration,
    seed: u64,
) -> std::thread::JoinHandle<u64> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let socket = sender_in(&ns);
        let mut sent = 0u64;
        // A mix of lengths and of headers: random bytes, and SQF magic with
        // a lying count, so the decoder's reject paths all run.
        const BURST: usize = 32;
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ seed;
        let mut bufs = vec![[0u8; 640]; BURST];
        let dest = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: line.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*line.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        let mut iovs: Vec<libc::iovec> = bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: 0,
            })
            .collect();
        let start = Instant::now();
        let mut next = start;
        let per_ms = (rate / 1000).max(1);
        while start.elapsed() < duration {
            let mut left = per_ms as usize;
            while left > 0 {
                let n = left.min(BURST);
                for (b, iov) in bufs.iter_mut().zip(iovs.iter_mut()).take(n) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    b[..8].copy_from_slice(&x.to_le_bytes());
                    if x.is_multiple_of(3) {
                        b[..4].copy_from_slice(&[0x53, 0x51, 1, 0]);
                    }
                    iov.iov_len = 16 + (x % 600) as usize;
                }
                let mut hdrs: Vec<libc::mmsghdr> = iovs[..n]
                    .iter_mut()
                    .map(|iov| {
                        // SAFETY: plain data; zeroed is an empty header.
                        let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
                        h.msg_name = (&dest as *const libc::sockaddr_in).cast_mut().cast();
                        h.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as u32;
                        h.msg_iov = iov;
                        h.msg_iovlen = 1;
                        libc::mmsghdr {
                            msg_hdr: h,
                            msg_len: 0,
                        }
                    })
                    .collect();
                // SAFETY: every header points at a live iovec, buffer and
                // address for the duration of the call.
                let k =
                    unsafe { libc::sendmmsg(socket.as_raw_fd(), hdrs.as_mut_ptr(), n as u32, 0) };
                if k > 0 {
                    sent += k as u64;
                }
                left -= n;
            }
            next += Duration::from_millis(1);
            if let Some(wait) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        sent
    })
}

/// [`flood_line`] on every line at once; the datagrams sent per line.
fn flood(ns: &str, lines: &[std::net::SocketAddrV4], rate: u64, duration: Duration) -> Vec<u64> {
    let senders: Vec<_> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| flood_line(ns, *l, rate, duration, i as u64))
        .collect();
    senders.into_iter().map(|s| s.join().unwrap()).collect()
}

/// The kernel's drop count per local port, from `/proc/net/udp` inside
/// `ns` (failing unless some socket there has that port: a count not read
/// is no 0).
fn kernel_drops(ns: &Netns, port: u16) -> u64 {
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.0, "cat", "/proc/net/udp"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let hex = format!(":{port:04X}");
    let counts: Vec<u64> = text
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|a| a.ends_with(&hex))
        })
        .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
        .collect();
    assert!(!counts.is_empty(), "no socket on port {port}:\n{text}");
    counts.iter().sum()
}

/// A flood of garbage on both lines beside a valid feed: the receiver keeps
/// receiving (the valid symbols are `ok` again within a second of the flood
/// ending), and what the kernel dropped is counted. Five runs, each with a
/// fresh sidecar: the receiver once went deaf in most runs.
#[test]
fn a_flood_of_garbage_does_not_deafen_the_receiver() {
    if !can_create_namespaces() {
        return;
    }
    let Scene { ns, dir, shm } = &Scene::new("flood");
    let name = &ns.0;
    let cfg = dir.path().join("config.toml");
    let lines: [std::net::SocketAddrV4; 2] = [
        "239.78.0.1:31101".parse().unwrap(),
        "239.78.0.2:31102".parse().unwrap(),
    ];
    std::fs::write(
        &cfg,
        format!(
            r#"
[state]
capacity = 4096
[metrics]
enabled = false
[sidecar]
shm_path = "{}"
interface = "127.0.0.1"
idle = "yield"
rcvbuf_bytes = 262144
dead_after_ms = 2000
[[feed]]
name = "fl"
kind = "full"
lines = ["{}", "{}"]
stale_threshold_ms = 300
source_threshold_ms = 60000
"#,
            shm.display(),
            lines[0],
            lines[1]
        ),
    )
    .unwrap();
    const SYMBOLS: usize = 8;
    const FLOOD: Duration = Duration::from_secs(3);
    const RATE: u64 = 100_000;
    for run in 0..5 {
        let sidecar = ns.start_sidecar(&cfg, shm, None);
        // The valid feed: 2,000 quotes/s and heartbeats every 50 ms, for
        // longer than the flood and the recovery window.
        let mut sim = Killed(
            ns.command(&bin())
                .args(["simulate", "--line-a", &lines[0].to_string()])
                .args(["--line-b", &lines[1].to_string()])
                .args(["--symbols", &SYMBOLS.to_string(), "--rate", "2000"])
                .args(["--heartbeat-ms", "50", "--duration-s", "8", "--seed"])
                .arg(run.to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let reader = Reader::open(shm);
        let names: Vec<String> = (0..SYMBOLS).map(|i| format!("SYM{i:05}")).collect();
        let all_ok = |reader: &Reader| {
            names.iter().all(|s| {
                reader
                    .lookup("fl", s)
                    .is_some_and(|h| reader.check(&h, now_ns()).is_ok())
            })
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !all_ok(&reader) {
            assert!(
                Instant::now() < deadline,
                "run {run}: the valid feed never came up"
            );
            std::thread::sleep(Duration::from_millis(20));
        }

        let sent = flood(name, &lines, RATE, FLOOD);
        let ended = Instant::now();
        for (line, n) in lines.iter().zip(&sent) {
            let rate = *n as f64 / FLOOD.as_secs_f64();
            assert!(
                rate >= 50_000.0,
                "run {run}: flooded {line} at only {rate:.0}/s"
            );
        }
        // Back to ok within a second of the flood's end.
        while !all_ok(&reader) {
            if ended.elapsed() >= Duration::from_secs(1) {
                let verdicts: Vec<String> = names
                    .iter()
                    .map(|s| match reader.lookup("fl", s) {
                        Some(h) => format!("{s} {:?}", reader.check(&h, now_ns()).reasons),
                        None => format!("{s} missing"),
                    })
                    .collect();
                panic!(
                    "run {run}: not ok {:?} after the flood: {verdicts:?}; packets {:?} rejected {:?}",
                    ended.elapsed(),
                    reader.counter(0, counter::PACKETS),
                    reader.counter(0, counter::REJECTED),
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let rejected = reader.counter(0, counter::REJECTED).unwrap_or(0);
        assert!(
            rejected > 0,
            "run {run}: the garbage was received and rejected"
        );
        // Drops made certain in the first run: the receiver stopped while
        // line A floods past its receive buffer.
        if run == 0 {
            crate::common::signal(sidecar.0.id(), libc::SIGSTOP);
            flood(name, &lines[..1], RATE, Duration::from_millis(200));
            crate::common::signal(sidecar.0.id(), libc::SIGCONT);
            assert!(kernel_drops(ns, lines[0].port()) > 0, "nothing dropped");
        }
        // Every drop the kernel counted is published, per line (the count
        // arrives with the next datagram received; the valid feed goes on).
        for (i, line) in lines.iter().enumerate() {
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                let kernel = kernel_drops(ns, line.port());
                let published = reader
                    .counter(0, counter::LINE_KERNEL_DROPS + i)
                    .unwrap_or(0);
                if published == kernel {
                    eprintln!("run {run}: {line}: {} flood datagrams, {kernel} dropped by the kernel, rejected {rejected}", sent[i]);
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "run {run}: {line}: kernel dropped {kernel}, published {published}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = sim.0.kill();
        drop(sidecar);
        // The next run's start waits for its own publication, not this one.
        crate::common::remove_publication(shm);
    }
}

/// An ITCH venue (`simulate --protocol itch50`) and `run` in a namespace:
/// the config both read, with the recovery channel on a fixed port so a
/// recording replays its answers.
fn itch_config(dir: &Path, shm: &Path, gap_timeout_ms: u64) -> PathBuf {
    let cfg = dir.join("itch.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"{}[[feed]]
name = "nq"
protocol = "itch50"
lines = ["239.77.1.1:31101", "239.77.1.2:31102"]
recovery = "127.0.0.1:31199"
recovery_listen = "0.0.0.0:31198"
gap_timeout_ms = {gap_timeout_ms}
stale_threshold_ms = 60000
source_threshold_ms = 60000
"#,
            sidecar_tables(shm, 1000)
        ),
    )
    .unwrap();
    cfg
}

/// `tickguard simulate --protocol itch50` inside `ns` with `args`, started.
fn itch_venue(ns: &Netns, cfg: &Path, args: &[&str]) -> Child {
    ns.command(&bin())
        .args(["simulate", "--protocol", "itch50", "--config"])
        .arg(cfg)
        .args(["--symbols", "12", "--report"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish(venue: Child) -> serde_json::Value {
    let out = venue.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "simulate: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out)
}

/// The output of `cmd`, which must succeed (its stderr says why not).
fn succeeded(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `stat --once --json` from another process.
fn stat_json(shm: &Path) -> serde_json::Value {
    json(&succeeded(
        Command::new(bin())
            .args(["stat", "--once", "--json", "--shm"])
            .arg(shm),
    ))
}

/// `stat --once --json`: the first feed's document.
fn stat_feed(shm: &Path) -> serde_json::Value {
    stat_json(shm)["feeds"][0].clone()
}

/// Stops the sidecar cleanly (SIGTERM: its recording finished).
fn stop(mut sidecar: Killed) {
    assert!(crate::common::terminate(&mut sidecar.0).success());
}

/// `replay` of `rec` with `cfg`, its summary in `dir`: the summary of `feed`.
fn replay_feed(dir: &Path, rec: &Path, cfg: &Path, feed: &str) -> serde_json::Value {
    let summary = dir.join("summary.json");
    succeeded(
        Command::new(bin())
            .arg("replay")
            .arg(rec)
            .arg("--config")
            .arg(cfg)
            .arg("--summary")
            .arg(&summary),
    );
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    s["feeds"][feed].clone()
}

/// Waits until the publication's counters say the venue's last datagram
/// (its end of session) is in and no gap is open.
fn wait_settled(reader: &Reader, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let c = |id| reader.counter(0, id).unwrap_or(0);
        let closed = reader.feed_status(0).is_some_and(|s| s.closed);
        if closed && c(counter::GAPS_OPEN) == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: closed {closed}, gaps open {}",
            c(counter::GAPS_OPEN)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `check nq SYMBOL --json` from another process: (exit code, reasons).
fn check_reasons(shm: &Path, symbol: &str) -> (Option<i32>, Vec<String>) {
    check_reasons_within(shm, symbol, 60_000)
}

/// [`check_reasons`] taking the writer as dead once its heartbeat is
/// `dead_after_ms` old (a minute unless a test is about it: a writer
/// preempted for a tenth of a second is not a dead one).
fn check_reasons_within(
    shm: &Path,
    symbol: &str,
    dead_after_ms: u64,
) -> (Option<i32>, Vec<String>) {
    let out = Command::new(bin())
        .args(["check", "nq", symbol, "--json", "--shm"])
        .arg(shm)
        .args(["--dead-after-ms", &dead_after_ms.to_string()])
        .output()
        .unwrap();
    let v = json(&out);
    let reasons = v["reasons"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| Some(r.as_str()?.to_string()))
                .collect()
        })
        .unwrap_or_default();
    (out.status.code(), reasons)
}

/// The published top of book of every symbol: name → (bid, bid size, ask,
/// ask size, halted), prices in 1/10,000 as the venue reports them.
fn published_books(reader: &Reader) -> std::collections::BTreeMap<String, serde_json::Value> {
    use tickguard::state::price::Price;
    let side = |s: Option<tickguard::state::slot::Side>| match s {
        Some(s) => match s.price {
            Price::Decimal {
                mantissa,
                exponent: -4,
            } => (Some(mantissa), Some(s.size)),
            other => panic!("ITCH prices are 1/10,000 decimals: {other:?}"),
        },
        None => (None, None),
    };
    reader
        .records()
        .into_iter()
        .filter_map(|r| {
            let (bid, bid_size) = side(r.bid);
            let (ask, ask_size) = side(r.ask);
            Some((
                r.symbol?.to_string(),
                serde_json::json!({"bid": bid, "bid_size": bid_size, "ask": ask,
                    "ask_size": ask_size, "halted": r.halted}),
            ))
        })
        .collect()
}

/// The venue's books (report or replay summary) in `published_books`' form.
fn venue_books(books: &serde_json::Value) -> std::collections::BTreeMap<String, serde_json::Value> {
    books
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, b)| {
            let halted = matches!(b["trading_state"].as_str(), Some("H" | "P" | "Q"));
            (
                name.clone(),
                serde_json::json!({"bid": b["bid"], "bid_size": b["bid_size"], "ask": b["ask"],
                    "ask_size": b["ask_size"], "halted": halted}),
            )
        })
        .collect()
}

#[test]
fn itch_two_lines_with_loss_recover_every_gap_from_the_server() {
    if !can_create_namespaces() {
        return;
    }
    let Scene { ns, dir, shm } = &Scene::new("itch");
    let rec = dir.path().join("received.pcap");
    let cfg = itch_config(dir.path(), shm, 1000);
    let sidecar = ns.start_sidecar(&cfg, shm, Some(&rec));
    let venue = itch_venue(
        ns,
        &cfg,
        &[
            "--count",
            "20000",
            "--rate",
            "10000",
            "--loss-a",
            "5",
            "--loss-b",
            "5",
            "--halt-every-s",
            "1",
            "--linger-ms",
            "1500",
            "--seed",
            "7",
        ],
    );
    // While the venue runs, a halted stock answers `halted` (sampled: each
    // of the venue's 12 stocks every 2 ms). That every gap's recovery gives
    // the symbols their trust back is held after the end, where it cannot
    // be missed: every symbol then reads `closed` (and `halted` if so) with
    // nothing else wrong, the feed not suspect. (A sampled `ok` while the
    // venue ran was missed on a loaded machine, gaps open most of the time
    // with loss on both lines at this rate.)
    let reader = Reader::open(shm);
    let mut halted_seen = false;
    let deadline = Instant::now() + Duration::from_secs(30);
    let stocks: Vec<String> = (0..12).map(|i| format!("SYM{i:05}")).collect();
    while !reader.feed_status(0).is_some_and(|s| s.closed) && Instant::now() < deadline {
        for s in &stocks {
            if let Some(h) = reader.lookup("nq", s) {
                let v = reader.check(&h, now_ns());
                halted_seen |= v.reasons.contains(tickguard::verdict::Reasons::HALTED);
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let report = finish(venue);
    wait_settled(&reader, "after the end of session");
    let lost_on_both = report["lost_on_both_lines"].as_u64().unwrap();
    assert!(
        lost_on_both > 0,
        "5% loss per line loses some on both: {report}"
    );
    let c = |id| reader.counter(0, id).unwrap_or(0);
    assert_eq!(c(counter::TICKS_LOST), 0, "every gap recovered: {report}");
    assert_eq!(c(counter::GAPS_EXPIRED), 0);
    assert!(
        c(counter::RECOVERED) >= lost_on_both,
        "{} recovered",
        c(counter::RECOVERED)
    );
    assert!(c(counter::REQUESTS_SENT) > 0);
    assert!(report["server"]["requests_answered"].as_u64().unwrap() > 0);
    assert_eq!(
        c(counter::LINE_MISMATCHES),
        0,
        "the lines carry the same packets"
    );
    let buckets: u64 = (0..counter::RECOVERY_BUCKETS)
        .map(|i| c(counter::RECOVERY_LATENCY + i))
        .sum();
    assert!(buckets > 0, "fill latencies counted");
    assert!(halted_seen, "a halt read `halted`");
    assert!(!reader.feed_status(0).unwrap().suspect);

    // The published books are the venue's own.
    assert_eq!(published_books(&reader), venue_books(&report["books"]));
    // From another process: the end of session makes every symbol
    // `closed`, with nothing else wrong (a halted stock also `halted`).
    for (name, b) in venue_books(&report["books"]) {
        let (code, reasons) = check_reasons(shm, &name);
        let mut want = vec!["closed".to_string()];
        if b["halted"] == true {
            want.insert(0, "halted".into());
        }
        if b["bid"].is_null() && b["ask"].is_null() {
            want = vec!["no_quote".into()];
        }
        assert_eq!((code, reasons), (Some(1), want), "{name}");
    }

    // A clean stop; the recording replays to the same books.
    stop(sidecar);
    let feed = &replay_feed(dir.path(), &rec, &cfg, "nq");
    assert_eq!(feed["ticks_lost"], 0, "{feed}");
    assert_eq!(venue_books(&feed["symbols"]), venue_books(&report["books"]));
}

#[test]
fn itch_without_a_server_gaps_expire_and_the_feed_reads_suspect_then_stale_when_killed() {
    if !can_create_namespaces() {
        return;
    }
    let Scene { ns, dir, shm } = &Scene::new("itch-absent");
    let cfg = itch_config(dir.path(), shm, 50);
    let sidecar = ns.start_sidecar(&cfg, shm, None);
    let report = finish(itch_venue(
        ns,
        &cfg,
        &[
            "--count",
            "10000",
            "--rate",
            "10000",
            "--loss-a",
            "5",
            "--loss-b",
            "5",
            "--no-recovery-server",
            "--seed",
            "3",
        ],
    ));
    let reader = Reader::open(shm);
    wait_settled(&reader, "gaps expire");
    let lost_on_both = report["lost_on_both_lines"].as_u64().unwrap();
    assert!(lost_on_both > 0, "{report}");
    let c = |id| reader.counter(0, id).unwrap_or(0);
    assert_eq!(
        c(counter::TICKS_LOST),
        lost_on_both,
        "lost what neither line carried"
    );
    assert!(c(counter::GAPS_EXPIRED) > 0);
    assert_eq!(c(counter::RECOVERED), 0);
    assert!(c(counter::REQUESTS_SENT) > 0, "asked an absent server");
    assert!(reader.feed_status(0).unwrap().suspect);
    let (code, reasons) = check_reasons(shm, "SYM00000");
    assert_eq!(code, Some(1));
    assert!(reasons.contains(&"suspect".to_string()), "{reasons:?}");

    // SIGKILL: no clean close; readers answer `stale` once the heartbeat
    // is older than dead_after_ms.
    let mut sidecar = sidecar;
    sidecar.0.kill().unwrap();
    sidecar.0.wait().unwrap();
    std::thread::sleep(Duration::from_millis(1300));
    let (code, reasons) = check_reasons_within(shm, "SYM00000", 1000);
    assert_eq!((code, reasons), (Some(1), vec!["stale".to_string()]));
}

#[test]
fn itch_a_server_slower_than_the_gap_timeout_answers_after_expiry_as_duplicates() {
    if !can_create_namespaces() {
        return;
    }
    let Scene { ns, dir, shm } = &Scene::new("itch-slow");
    let cfg = itch_config(dir.path(), shm, 100);
    let _sidecar = ns.start_sidecar(&cfg, shm, None);
    let report = finish(itch_venue(
        ns,
        &cfg,
        &[
            "--count",
            "8000",
            "--rate",
            "8000",
            "--loss-a",
            "5",
            "--loss-b",
            "5",
            "--answer-delay-ms",
            "400",
            "--linger-ms",
            "1500",
            "--seed",
            "5",
        ],
    ));
    let reader = Reader::open(shm);
    wait_settled(&reader, "gaps expire");
    let lost_on_both = report["lost_on_both_lines"].as_u64().unwrap();
    let resent = report["server"]["messages_resent"].as_u64().unwrap();
    assert!(lost_on_both > 0 && resent > 0, "{report}");
    let c = |id| reader.counter(0, id).unwrap_or(0);
    assert_eq!(c(counter::TICKS_LOST), lost_on_both);
    assert_eq!(
        c(counter::RECOVERED),
        0,
        "every answer came after its deadline"
    );
    // Every answer arrived (the venue lingered) and changed nothing: its
    // messages were below `next`, counted as duplicates.
    let line_packets: u64 = report["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["datagrams_sent"].as_u64().unwrap())
        .sum();
    let answers = report["server"]["requests_answered"].as_u64().unwrap();
    assert_eq!(c(counter::PACKETS), line_packets + answers);
    assert!(c(counter::DUPLICATES) >= resent);
}

/// Sends `payload` to `to` from `from`, as uid 65534 (another user than
/// the sidecar's), from a process started by a thread joined to `ns`.
fn send_as_nobody(
    ns: &str,
    from: std::net::SocketAddrV4,
    to: std::net::SocketAddrV4,
    payload: &[u8],
) {
    use std::os::unix::process::CommandExt;
    let ns = ns.to_string();
    let payload = payload.to_vec();
    std::thread::spawn(move || {
        join_namespace(&ns);
        let addr = |a: std::net::SocketAddrV4| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: a.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*a.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        let (src, dst) = (addr(from), addr(to));
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let mut cmd = Command::new("/bin/true");
        cmd.uid(65534).gid(65534);
        // SAFETY: runs in the forked child, after its uid and gid are
        // 65534 and before exec: only async-signal-safe system calls on
        // data prepared before the fork, no allocation, no lock.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
                let sent = fd >= 0
                    && libc::bind(fd, (&src as *const libc::sockaddr_in).cast(), len) == 0
                    && libc::sendto(
                        fd,
                        payload.as_ptr().cast(),
                        payload.len(),
                        0,
                        (&dst as *const libc::sockaddr_in).cast(),
                        len,
                    ) == payload.len() as isize;
                if sent {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
        let status = cmd.status().expect("the forger sent its datagram");
        assert!(status.success());
    })
    .join()
    .unwrap();
}

/// Joins the calling thread (only) to the network namespace `ns`.
fn join_namespace(ns: &str) {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(format!("/run/netns/{ns}")).expect("namespace file");
    // SAFETY: a valid namespace fd; setns changes only this thread's
    // network namespace.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
}

/// Another user on the machine answers the recovery channel, from another
/// port and from another address (the server's port), and once with an
/// oversized datagram: all three are counted (`recovery_wrong_source`)
/// and fill nothing; an answer of the
/// server naming another session is counted (`recovery_wrong_session`)
/// and drops nothing; the server's own answer fills the gap.
#[test]
fn itch_recovery_answers_from_another_sender_or_session_are_counted_and_ignored() {
    use tickguard::protocol::itch50::mold::{PacketBuilder, Request};
    use tickguard::protocol::itch50::Session;
    if !can_create_namespaces() {
        return;
    }
    let Scene { ns, dir, shm } = &Scene::new("itch-forger");
    let cfg = dir.path().join("itch.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[metrics]
enabled = false
[sidecar]
shm_path = "{}"
idle = "sleep"
[[feed]]
name = "nq"
protocol = "itch50"
lines = ["127.0.0.1:31301"]
recovery = "127.0.0.1:31399"
recovery_listen = "0.0.0.0:31398"
gap_timeout_ms = 60000
stale_threshold_ms = 60000
source_threshold_ms = 60000
"#,
            shm.display()
        ),
    )
    .unwrap();
    let _sidecar = ns.start_sidecar(&cfg, shm, None);
    let packet = |session: &[u8; 10], seq: u64| {
        let mut b = PacketBuilder::new(Session(*session), seq);
        b.message(&[b'S', 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, b'Q']);
        b.finish()
    };
    let session = b"FORGED0001";
    let reader = Reader::open(shm);
    let c = |id| reader.counter(0, id).unwrap_or(0);
    let wait = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "timed out: {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let name = ns.0.clone();
    // The venue: a line and the server, in the namespace.
    let (server, listen) = std::thread::scope(|s| {
        s.spawn(|| {
            join_namespace(&name);
            let server = std::net::UdpSocket::bind("127.0.0.1:31399").unwrap();
            let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            tx.send_to(&packet(session, 1), "127.0.0.1:31301").unwrap();
            tx.send_to(&packet(session, 3), "127.0.0.1:31301").unwrap();
            server
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut buf = [0u8; 64];
            let (n, from) = server.recv_from(&mut buf).unwrap();
            let r = Request::decode(&buf[..n]).expect("a re-request");
            assert_eq!((r.sequence, r.count), (2, 1));
            (server, from)
        })
        .join()
        .unwrap()
    });
    assert_eq!(listen.port(), 31398);
    wait("the gap open", &|| c(counter::GAPS_OPEN) == 1);
    let to = "127.0.0.1:31398".parse().unwrap();
    for from in ["127.0.0.1:31400", "127.0.0.2:31399"] {
        send_as_nobody(&ns.0, from.parse().unwrap(), to, &packet(session, 2));
    }
    // Oversized too: counted as another sender's, not only as oversized.
    let mut big = packet(session, 2);
    big.resize(20_000, 0);
    send_as_nobody(&ns.0, "127.0.0.1:31400".parse().unwrap(), to, &big);
    wait("wrong sources counted", &|| {
        c(counter::CHANNEL_WRONG_SOURCE) == 3
    });
    assert_eq!(
        c(counter::GAPS_OPEN),
        1,
        "the forged answers filled nothing"
    );
    assert_eq!((c(counter::RECOVERED), c(counter::PACKETS)), (0, 2));
    // The server's answer naming another session: counted, dropped nothing.
    server.send_to(&packet(b"FORGED0002", 1), listen).unwrap();
    wait("wrong session counted", &|| {
        c(counter::RECOVERY_WRONG_SESSION) == 1
    });
    assert_eq!(c(counter::SESSION_CHANGES), 0);
    assert_eq!(c(counter::NEXT), 2);
    // The server's answer of the session fills the gap.
    server.send_to(&packet(session, 2), listen).unwrap();
    wait("the gap filled", &|| c(counter::RECOVERED) == 1);
    assert_eq!((c(counter::GAPS_OPEN), c(counter::NEXT)), (0, 4));
    assert_eq!(c(counter::CHANNEL_WRONG_SOURCE), 3);
}

/// A C program that, for each of SO_REUSEADDR, SO_REUSEPORT and both, tries
/// to bind a UDP socket to `argv[1]:argv[2]` and prints the outcome, then
/// its effective uid.
const BIND_ATTEMPTS_C: &str = r#"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
int main(int argc, char **argv) {
    const char *names[] = {"SO_REUSEADDR", "SO_REUSEPORT", "both"};
    if (argc != 3) return 2;
    for (int i = 0; i < 3; i++) {
        int s = socket(AF_INET, SOCK_DGRAM, 0), one = 1;
        if (i != 1) setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (i != 0) setsockopt(s, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_port = htons((unsigned short)atoi(argv[2]));
        inet_pton(AF_INET, argv[1], &a.sin_addr);
        if (bind(s, (struct sockaddr *)&a, sizeof a) == 0)
            printf("%s: bound\n", names[i]);
        else
            printf("%s: %s\n", names[i], strerror(errno));
        close(s);
    }
    printf("uid %d\n", (int)geteuid());
    return 0;
}
"#;

/// Another local user (uid 65534) cannot share the recovery channel's port,
/// with SO_REUSEADDR, SO_REUSEPORT or both, on the wildcard or the loopback
/// address: a socket sharing it would be handed the server's answers.
#[test]
fn another_user_cannot_bind_the_recovery_port() {
    if !can_create_namespaces() {
        return;
    }
    // `$CC` first, as `.ci/run` looks for it.
    let named = std::env::var("CC").ok();
    let Some(cc) = named
        .iter()
        .map(String::as_str)
        .chain(["cc", "gcc"])
        .find(|cc| {
            Command::new(cc)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
    else {
        crate::common::skip("no C compiler");
        return;
    };
    let Scene { ns, dir, shm } = &Scene::new("steal");
    // A directory uid 65534 may enter, holding the program it runs.
    let tools = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(tools.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (src, prog) = (tools.path().join("bind.c"), tools.path().join("bind"));
    std::fs::write(&src, BIND_ATTEMPTS_C).unwrap();
    let out = Command::new(cc)
        .arg("-o")
        .arg(&prog)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cfg = itch_config(dir.path(), shm, 1000);
    let _sidecar = ns.start_sidecar(&cfg, shm, None);
    for addr in ["0.0.0.0", "127.0.0.1"] {
        let out = ns
            .command(Path::new("setpriv"))
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .arg(&prog)
            .args([addr, "31198"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            text,
            "SO_REUSEADDR: Address already in use\n\
             SO_REUSEPORT: Address already in use\n\
             both: Address already in use\n\
             uid 65534\n",
            "binding {addr}:31198 as another user"
        );
    }
}

/// Sends `datagrams` to `line` from inside the namespace `ns` (a thread
/// joined to it), `per_ms` each millisecond, multicast on loopback.
fn send_paced(
    ns: &str,
    line: std::net::SocketAddrV4,
    datagrams: Vec<Vec<u8>>,
    per_ms: usize,
) -> std::thread::JoinHandle<()> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        let socket = sender_in(&ns);
        let mut next = Instant::now();
        for burst in datagrams.chunks(per_ms) {
            for d in burst {
                socket.send_to(d, line).unwrap();
            }
            next += Duration::from_millis(1);
            if let Some(wait) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
    })
}

/// Add Orders whose references all shared one probe run under the order
/// map's old fixed hash (references `j × INV`, `INV` the inverse of the
/// public Fibonacci multiplier), sent live at 5,000 datagrams of 20 a
/// second after as many random ones: no receive cycle of the crafted
/// phase comes near what made readers take the writer for dead
/// (`dead_after_ms`, 100 by default; the bound is 200 ms, room for a
/// cycle preempted on a loaded machine), read back from the publication's
/// worst cycle. With the fixed hash 40,000 of them made a cycle of 1.5 s
/// here, and every reader saw the writer dead. (Not a measure of speed:
/// `feed.rs::keys_crafted_against_a_fixed_hash_cost_what_random_ones_do`
/// counts the probes; the bound here is the one readers hold the writer
/// to.)
#[test]
fn itch_crafted_order_references_do_not_stall_the_receiver() {
    use tickguard::protocol::itch50::message::encode;
    use tickguard::protocol::itch50::{PacketBuilder, Session, Side};
    if !can_create_namespaces() {
        return;
    }
    let Scene { ns, dir, shm } = &Scene::new("crafted");
    let cfg = itch_config(dir.path(), shm, 1000);
    let _sidecar = ns.start_sidecar(&cfg, shm, None);
    let reader = Reader::open(shm);
    let line: std::net::SocketAddrV4 = "239.77.1.1:31101".parse().unwrap();
    // Both phases' orders fit the order map's first size (no growth: its
    // doubling, a rehash of every entry, is one long cycle of its own).
    const N: u64 = 40_000;
    const PER: u64 = 20;
    const FIB: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut inv = FIB;
    for _ in 0..6 {
        inv = inv.wrapping_mul(2u64.wrapping_sub(FIB.wrapping_mul(inv)));
    }
    assert_eq!(inv.wrapping_mul(FIB), 1);
    let splitmix = |j: u64| {
        let mut z = j.wrapping_add(FIB);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let aapl = tickguard::symbol::Symbol::parse("AAPL").unwrap();
    let session = Session(*b"CRAFTED001");
    let mut b = PacketBuilder::new(session, 1);
    b.message(&encode::stock_directory(1, 1, aapl));
    let mut seq = 2;
    let mut phase = |key: &dyn Fn(u64) -> u64| -> Vec<Vec<u8>> {
        (0..N / PER)
            .map(|k| {
                let mut b = PacketBuilder::new(session, seq);
                for j in k * PER..(k + 1) * PER {
                    let add = encode::add_order(1, 2, key(j + 1), Side::Buy, 1, aapl, 100, None);
                    b.message(&add);
                }
                seq += PER;
                b.finish()
            })
            .collect()
    };
    let random = phase(&|j| splitmix(j));
    let crafted = phase(&|j| j.wrapping_mul(inv));
    let mut first = vec![b.finish()];
    first.extend(random);
    // Each phase: sent, then every message applied (or 20 s passed).
    let mut applied = 2;
    let mut worst = Vec::new();
    for (name, datagrams) in [("random", first), ("crafted", crafted)] {
        send_paced(&ns.0, line, datagrams, 5).join().unwrap();
        applied += N;
        let deadline = Instant::now() + Duration::from_secs(20);
        while reader.counter(0, counter::NEXT).unwrap_or(0) < applied {
            assert!(
                Instant::now() < deadline,
                "{name}: applied up to {:?} of {applied} in 20 s",
                reader.counter(0, counter::NEXT)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let (_, w, _) = reader.receiver().unwrap();
        eprintln!(
            "{name}: worst receive cycle so far {:.3} ms",
            w as f64 / 1e6
        );
        worst.push(w);
    }
    // Readers hold the writer to 100 ms; the bound here is twice that, so
    // that one cycle the runner did not schedule for a tenth of a second
    // (a loaded 2-core machine) fails nothing, while the fixed hash's
    // 1.5 s cycle, or a crafted phase a fraction as slow, still does.
    let bound = 200_000_000;
    assert!(
        worst[1] < bound,
        "the crafted orders made a {:.3} ms receive cycle (random: {:.3} ms): readers took the writer for dead",
        worst[1] as f64 / 1e6,
        worst[0] as f64 / 1e6
    );
}

mod glimpse;
mod mdp3;
