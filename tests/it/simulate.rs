//! End-to-end tests of `tickguard simulate`: the real binary publishes on
//! loopback (unicast, then a multicast group with TTL 0) while a socket here
//! receives; the datagrams must decode and agree with the printed report.
//! Every wait is bounded: the command has a timeout, the socket a read timeout.

use assert_cmd::Command;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::Duration;
use tickguard::protocol::sqf::{Message, Packet};

const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

fn tickguard() -> Command {
    let mut cmd = Command::cargo_bin("tickguard").expect("binary");
    cmd.timeout(COMMAND_TIMEOUT);
    cmd
}

/// Everything queued on `socket`, until it has been quiet for 300 ms.
fn drain(socket: &UdpSocket) -> Vec<Vec<u8>> {
    socket
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    loop {
        match socket.recv_from(&mut buf) {
            Ok((n, from)) => {
                assert_eq!(from.ip(), std::net::IpAddr::V4(Ipv4Addr::LOCALHOST));
                got.push(buf[..n].to_vec());
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return got
            }
            Err(e) => panic!("receiving: {e}"),
        }
    }
}

#[derive(Default, Debug)]
struct Seen {
    quotes: u64,
    heartbeats: u64,
    snapshots: u64,
    /// Quote sequences per symbol, in arrival order.
    sequences: BTreeMap<String, Vec<u64>>,
}

fn decode_all(datagrams: &[Vec<u8>]) -> Seen {
    let mut seen = Seen::default();
    for d in datagrams {
        let p = Packet::new_checked(&d[..]).expect("valid SQF packet");
        for m in p.messages() {
            match m {
                Message::Quote(q) => {
                    seen.quotes += 1;
                    assert!(q.bid() > 0.0 && q.bid() < q.ask());
                    seen.sequences
                        .entry(q.symbol().to_string())
                        .or_default()
                        .push(q.sequence());
                }
                Message::Heartbeat(_) => seen.heartbeats += 1,
                Message::Snapshot(_) => seen.snapshots += 1,
                Message::Unknown { code } => panic!("unknown message type {code}"),
            }
        }
    }
    seen
}

/// Runs the simulator to `dest` with `--count 200 --rate 20000 --report`,
/// returns the report and what `rx` received.
fn simulate_to(dest: SocketAddrV4, rx: &UdpSocket) -> (serde_json::Value, Seen, usize) {
    let out = tickguard()
        .args(["simulate", "--line-a", &dest.to_string()])
        .args(["--count", "200", "--rate", "20000", "--report"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "one JSON line: {stdout}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let datagrams = drain(rx);
    let seen = decode_all(&datagrams);
    (report, seen, datagrams.len())
}

fn check_against_report(report: &serde_json::Value, seen: &Seen, datagrams: usize) {
    assert_eq!(report["quotes"], 200);
    assert_eq!(report["ticks_lost_on_both_lines"], 0);
    assert_eq!(report["lines"].as_array().unwrap().len(), 1);
    let line = &report["lines"][0];
    assert_eq!(line["datagrams_sent"], datagrams as u64);
    assert_eq!(line["dropped"], 0);
    assert_eq!(report["datagrams"], datagrams as u64);
    assert_eq!(seen.quotes, 200);
    assert_eq!(report["heartbeats"], seen.heartbeats);
    assert_eq!(report["snapshots"], seen.snapshots);
    // 8 symbols by default, heartbeats every 250 ms: at least the opening and closing rounds.
    assert!(seen.heartbeats >= 16, "{seen:?}");
    let last = report["last_sequence"].as_object().unwrap();
    assert_eq!(last.len(), 8);
    assert_eq!(seen.sequences.len(), 8);
    for (name, seqs) in &seen.sequences {
        let n = last[name].as_u64().unwrap();
        assert_eq!(*seqs, (1..=n).collect::<Vec<_>>(), "{name}");
        assert_eq!(n, 25);
    }
}

#[test]
fn unicast_loopback_datagrams_decode_and_match_the_report() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let dest = local(&rx);
    let (report, seen, n) = simulate_to(dest, &rx);
    assert_eq!(report["lines"][0]["destination"], dest.to_string());
    check_against_report(&report, &seen, n);
}

/// TTL 0 keeps the datagrams on this host; bound to 127.0.0.1 they leave by
/// the loopback interface, and the multicast loop delivers them to a member
/// that joined the group on 127.0.0.1.
#[test]
fn multicast_ttl0_loopback_delivers_to_a_local_member() {
    // A group of our own, so concurrent runs do not hear each other.
    let pid = std::process::id();
    let group = Ipv4Addr::new(239, 255, (pid >> 8) as u8, pid as u8);
    let rx = UdpSocket::bind(SocketAddrV4::new(group, 0)).unwrap();
    rx.join_multicast_v4(&group, &Ipv4Addr::LOCALHOST)
        .expect("joining the group on the loopback interface");
    let dest = SocketAddrV4::new(group, local(&rx).port());
    let (report, seen, n) = simulate_to(dest, &rx);
    check_against_report(&report, &seen, n);
}

#[test]
fn two_lines_with_loss_report_what_arrived() {
    let rx_a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let rx_b = UdpSocket::bind("127.0.0.1:0").unwrap();
    let (a, b) = (local(&rx_a), local(&rx_b));
    let out = tickguard()
        .args([
            "simulate",
            "--line-a",
            &a.to_string(),
            "--line-b",
            &b.to_string(),
        ])
        .args(["--count", "300", "--rate", "30000", "--symbols", "3"])
        .args([
            "--loss-a", "40", "--loss-b", "40", "--seed", "5", "--report",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(String::from_utf8(out.stdout).unwrap().trim()).unwrap();
    let (da, db) = (drain(&rx_a), drain(&rx_b));
    assert_eq!(report["lines"][0]["datagrams_sent"], da.len() as u64);
    assert_eq!(report["lines"][1]["datagrams_sent"], db.len() as u64);
    let (sa, sb) = (decode_all(&da), decode_all(&db));
    let mut delivered = std::collections::BTreeSet::new();
    for s in [&sa, &sb] {
        for (name, seqs) in &s.sequences {
            delivered.extend(seqs.iter().map(|q| (name.clone(), *q)));
        }
    }
    let lost = report["ticks_lost_on_both_lines"].as_u64().unwrap();
    assert!(lost > 0);
    assert_eq!(300 - delivered.len() as u64, lost);
}

#[test]
fn refuses_a_non_loopback_unicast_destination() {
    let out = tickguard()
        .args(["simulate", "--line-a", "192.0.2.1:30001", "--count", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("192.0.2.1:30001") && stderr.contains("neither loopback"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn refuses_bad_arguments_with_one_line() {
    let sim = ["simulate", "--line-a", "127.0.0.1:9"];
    let cases: [(&[&str], &str); 11] = [
        (&["--names", "NOT VALID"], "not a valid SQF symbol"),
        // A loss for a line not given would be ignored.
        (&["--loss-b", "50"], "--loss-b 50 without a line B"),
        (
            &["--protocol", "itch50", "--loss-b", "5"],
            "--loss-b 5 without a line B",
        ),
        // Every rate has a bound (one poll's batch is bounded besides).
        (&["--rate", "1e8"], "at most 10000000 quotes per second"),
        (
            &["--protocol", "itch50", "--rate", "18446744073709551615"],
            "at most 10000000 messages per second",
        ),
        (&["--duration-s", "NaN"], "--duration-s must be"),
        (
            &["--duration-s", "31536001"],
            "--duration-s must be from 0 to 31536000",
        ),
        (&["--rate", "inf"], "--rate must be"),
        (
            &["--pause-every-s", "86401"],
            "--pause-every-s must be from 0 to 86400",
        ),
        // A negative value given apart is a value out of range, not an
        // unknown option.
        (
            &["--loss-a", "-1"],
            "--loss-a must be a percentage from 0 to 100",
        ),
        (
            &["--duration-s", "-1"],
            "--duration-s must be from 0 to 31536000",
        ),
    ];
    for (extra, want) in cases {
        let out = tickguard().args(sim).args(extra).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{extra:?}: {stderr}");
        assert!(stderr.contains(want), "{extra:?}: {stderr}");
    }
    // The demo checks its duration before it starts anything.
    for bad in ["NaN", "inf", "-1", "31536001"] {
        let out = tickguard()
            .args(["demo", "--shm", "/nonexistent/demo", "--duration-s", bad])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{bad}: {stderr}");
        assert!(
            stderr.contains("demo: --duration-s must be"),
            "{bad}: {stderr}"
        );
    }
    // And its symbols, in its own words (not the simulator's).
    for (protocol, symbols, want) in [
        (
            "sqf",
            "0",
            "demo: --symbols must be from 1 to 100000 for sqf, got 0",
        ),
        (
            "sqf",
            "100001",
            "demo: --symbols must be from 1 to 100000 for sqf, got 100001",
        ),
        (
            "itch50",
            "65536",
            "demo: --symbols must be from 1 to 65535 for itch50, got 65536",
        ),
    ] {
        let out = tickguard()
            .args(["demo", "--shm", "/nonexistent/demo", "--protocol", protocol])
            .args(["--symbols", symbols])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{protocol} {symbols}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.trim_end(), format!("tickguard: {want}"));
    }
}

/// The socket's local address.
fn local(socket: &UdpSocket) -> SocketAddrV4 {
    match socket.local_addr().unwrap() {
        std::net::SocketAddr::V4(a) => a,
        other => panic!("not IPv4: {other}"),
    }
}

/// Ctrl-C (SIGINT) or SIGTERM stops sending; the report of what was sent
/// is still printed, and the exit status is 0.
#[test]
fn report_is_printed_on_sigint_and_sigterm() {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tickguard"))
            .args(["simulate", "--line-a", &local(&rx).to_string()])
            .args(["--rate", "2000", "--symbols", "4", "--report"])
            // Bounded even if this test fails before its signal.
            .args(["--duration-s", "60"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Quotes are flowing (so the handlers are in place).
        let mut buf = [0u8; 65536];
        let mut before = 0;
        loop {
            let n = rx.recv(&mut buf).expect("the simulator sends");
            before += 1;
            if decode_all(&[buf[..n].to_vec()]).quotes > 0 {
                break;
            }
        }
        // SAFETY: sends a signal to the child this test spawned.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
        let deadline = std::time::Instant::now() + COMMAND_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("simulate did not stop on signal {signal}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let report: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert!(report["quotes"].as_u64().unwrap() > 0, "{text}");
        // Everything sent arrived here, before the signal and after.
        let sent = report["lines"][0]["datagrams_sent"].as_u64().unwrap();
        assert_eq!(sent, drain(&rx).len() as u64 + before, "{text}");
    }
}

/// Waits (20 s at most) until `rx` has received `n` datagrams.
fn received(rx: &std::net::UdpSocket, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut buf = [0u8; 2048];
    let mut got = 0;
    while got < n {
        assert!(
            std::time::Instant::now() < deadline,
            "{got} of {n} datagrams"
        );
        got += usize::from(rx.recv(&mut buf).is_ok());
    }
}

/// The report written to a stdout nobody reads (its pipe full before the
/// simulator starts) does not hold SIGTERM off: the write gives up once
/// the signal came and no room did, and the simulator exits 2 saying so
/// (it stayed blocked until SIGKILL).
#[test]
fn a_report_stuck_on_a_full_pipe_ends_on_sigterm() {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let (rx, dest) = crate::common::socket();
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given,
    // each then owned once below.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fcntl and write on descriptors this test owns; the write
    // end is non-blocking only while the test fills it.
    unsafe {
        assert!(libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, 4096) >= 4096);
        let flags = libc::fcntl(write.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(write.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
        let page = [b'x'; 4096];
        while libc::write(write.as_raw_fd(), page.as_ptr().cast(), page.len()) > 0 {}
        libc::fcntl(write.as_raw_fd(), libc::F_SETFL, flags);
    }
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .args(["simulate", "--line-a", &dest.to_string()])
        .args(["--count", "20", "--rate", "1000", "--report"])
        .stdout(std::process::Stdio::from(write))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Its 20 datagrams sent (on a loaded machine the start may take a
    // while): then it is at its report, or about to be.
    received(&rx, 20);
    std::thread::sleep(Duration::from_millis(200));
    assert!(child.try_wait().unwrap().is_none(), "blocked on its report");
    assert!(crate::common::signal(child.id(), libc::SIGTERM));
    let status = crate::common::wait_at_most(&mut child, Duration::from_secs(10));
    drop(read);
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the report was not written whole"),
        "{stderr}"
    );
}

/// After Ctrl-C a report longer than a pipe holds still reaches a reader
/// that reads it slowly (a page every 150 ms) whole: the stop that ended
/// the run does not give the report up (it did, cut at the first wait).
#[test]
fn a_report_after_ctrl_c_reaches_a_slow_reader_whole() {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let (rx, dest) = crate::common::socket();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .args([
            "simulate",
            "--protocol",
            "itch50",
            "--line-a",
            &dest.to_string(),
        ])
        // Bounded: a failure before the SIGINT leaves no sender behind
        // for long.
        .args(["--symbols", "1000", "--rate", "1000", "--report"])
        .args(["--duration-s", "30"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    // SAFETY: fcntl on a pipe descriptor this test owns.
    assert!(unsafe { libc::fcntl(out.as_raw_fd(), libc::F_SETPIPE_SZ, 4096) } >= 4096);
    // Running (its signal handlers in place) once it sends.
    received(&rx, 1);
    std::thread::sleep(Duration::from_millis(500));
    assert!(crate::common::signal(child.id(), libc::SIGINT));
    let mut report = Vec::new();
    let mut page = [0u8; 4096];
    loop {
        std::thread::sleep(Duration::from_millis(150));
        match out.read(&mut page).unwrap() {
            0 => break,
            n => report.extend_from_slice(&page[..n]),
        }
    }
    let status = crate::common::wait_at_most(&mut child, Duration::from_secs(5));
    assert!(status.success(), "{status:?}");
    assert!(report.len() > 64 * 1024, "{} bytes", report.len());
    let text = String::from_utf8(report).unwrap();
    assert_eq!(text.lines().count(), 1);
    serde_json::from_str::<serde_json::Value>(text.trim()).unwrap();
}
