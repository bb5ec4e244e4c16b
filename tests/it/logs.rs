//! Logging that cannot take the sidecar down: `tickguard run` with its
//! stderr on a full device, or closed, keeps receiving, answers checks and
//! stops cleanly on SIGTERM.

use crate::common::Killed;
use std::net::UdpSocket;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tickguard::protocol::sqf::PacketBuilder;
use tickguard::shm::counter;
use tickguard::symbol::Symbol;
use tickguard::time::now_ns;
use tickguard::Reader;

/// A configuration in `dir` of one full SQF feed on a free loopback port,
/// metrics off (`metrics`: more `[metrics]` keys), its publication in
/// `dir`: (the file, the publication's path, the port).
fn one_feed(dir: &Path, metrics: &str) -> (PathBuf, PathBuf, u16) {
    let shm = dir.join("shm");
    let port = crate::common::free_port();
    let cfg = dir.join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "[metrics]\nenabled = false\n{metrics}[sidecar]\nshm_path = \"{}\"\nidle = \"sleep\"\n\
             dead_after_ms = 1000\n[[feed]]\nname = \"lp1\"\nkind = \"full\"\n\
             lines = [\"127.0.0.1:{port}\"]\nstale_threshold_ms = 60000\n\
             source_threshold_ms = 60000\nclock_offset = 0\n",
            shm.display()
        ),
    )
    .unwrap();
    (cfg, shm, port)
}

/// Runs the sidecar with `stderr`, logging at `debug`, makes it log (start,
/// line open, a rejected packet), checks a quote through the shared memory,
/// then stops it with SIGTERM and expects exit status 0.
fn survives(name: &str, stderr: Stdio, close_stderr: bool) {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, shm, port) = one_feed(dir.path(), "");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tickguard"));
    cmd.args(["run", "--config"])
        .arg(&cfg)
        .env("RUST_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(stderr);
    if close_stderr {
        // SAFETY: only the async-signal-safe close(2) between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::close(2);
                Ok(())
            });
        }
    }
    let mut child = Killed(cmd.spawn().unwrap());
    let child = &mut child.0;
    let pid = child.id();
    let up = wait_for(&shm, |r| r.writer_pid() == Some(pid as u64));
    assert!(up, "{name}: the sidecar did not come up");

    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    tx.send_to(b"not an SQF packet", ("127.0.0.1", port))
        .unwrap();
    let mut b = PacketBuilder::new(now_ns());
    b.quote(Symbol::parse("EURUSD").unwrap(), 1, now_ns(), 1.0, 1.1);
    tx.send_to(&b.finish(), ("127.0.0.1", port)).unwrap();
    let ok = wait_for(&shm, |r| r.check_symbol("lp1", "EURUSD", now_ns()).is_ok());
    assert!(ok, "{name}: the quote was not published");
    assert!(
        child.try_wait().unwrap().is_none(),
        "{name}: the sidecar died"
    );

    // SAFETY: signals the child this test started and still owns.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{name}: no exit after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0), "{name}: {status}");
}

/// Polls the publication at `shm` until `cond` holds on a healthy writer (20 s at most).
/// What `run --config cfg` logs into `log` up to its publication at
/// `shm` (it is stopped then): its start.
fn start_log(cfg: &Path, shm: &Path, log: &Path) -> String {
    let child = crate::common::run_logged(&[], cfg, log);
    let up = wait_for(shm, |r| r.writer_pid() == Some(child.0.id() as u64));
    drop(child);
    let text = std::fs::read_to_string(log).unwrap();
    assert!(up, "the sidecar did not come up: {text}");
    text
}

fn wait_for(shm: &Path, cond: impl Fn(&Reader) -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let r = Reader::open(shm);
        if r.health(now_ns()).is_ok() && cond(&r) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// An ITCH feed's add refused for room (`max_orders`) or a stock refused
/// a symbol (`max_symbols`) is one error line from `run` naming the feed
/// and the bound: the whole feed reads suspect for the rest of the session
/// and only a larger bound mends it (it said nothing; replay warned).
#[test]
fn refusals_for_room_are_logged_by_run() {
    use tickguard::protocol::itch50::message::encode;
    use tickguard::protocol::itch50::{PacketBuilder, Session, Side};
    let (aapl, msft) = (
        Symbol::parse("AAPL").unwrap(),
        Symbol::parse("MSFT").unwrap(),
    );
    let orders = vec![
        encode::stock_directory(1, 1, aapl),
        encode::add_order(1, 2, 1, Side::Buy, 100, aapl, 1_000_000, None),
        encode::add_order(1, 3, 2, Side::Buy, 100, aapl, 1_000_000, None),
    ];
    let symbols = vec![
        encode::stock_directory(1, 1, aapl),
        encode::stock_directory(2, 2, msft),
    ];
    for (bound, messages, said) in [
        ("max_orders = 1", orders, "`max_orders`"),
        ("max_symbols = 1", symbols, "`max_symbols`"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (shm, log, port) = (
            dir.path().join("shm"),
            dir.path().join("log"),
            crate::common::free_port(),
        );
        let cfg = dir.path().join("config.toml");
        std::fs::write(
            &cfg,
            format!(
                "[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{}\"\nidle = \"sleep\"\n\
                 [[feed]]\nname = \"nq\"\nprotocol = \"itch50\"\nlines = [\"127.0.0.1:{port}\"]\n\
                 stale_threshold_ms = 60000\nsource_threshold_ms = 60000\n\
                 timezone = \"America/New_York\"\n{bound}\n",
                shm.display()
            ),
        )
        .unwrap();
        let _run = crate::common::run_logged(&[], &cfg, &log);
        assert!(
            wait_for(&shm, |_| true),
            "{bound}: the sidecar did not come up"
        );
        let mut b = PacketBuilder::new(Session(*b"REFUSED001"), 1);
        for m in &messages {
            b.message(m);
        }
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(&b.finish(), ("127.0.0.1", port)).unwrap();
        let lines = |n: usize| {
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let text = std::fs::read_to_string(&log).unwrap();
                let found: Vec<String> = text
                    .lines()
                    .filter(|l| l.contains(said))
                    .map(String::from)
                    .collect();
                if found.len() >= n {
                    return found;
                }
                assert!(
                    Instant::now() < deadline,
                    "{bound}: {n} lines not logged: {text}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        let line = lines(1).remove(0);
        assert!(
            line.contains("ERROR") && line.contains("feed=nq") && line.contains("refused=1"),
            "{line}"
        );
        assert!(
            line.contains("suspect") && line.contains("raise the bound"),
            "{line}"
        );
        // Once, and again when the count has grown tenfold: 2 to 9 say
        // nothing (the monitor samples every 250 ms: a second is four
        // samples), 10 a second line.
        let more = |seq: u64, n: u64| {
            let mut b = PacketBuilder::new(Session(*b"REFUSED001"), seq);
            for k in 0..n {
                let (locate, stock) = if bound == "max_orders = 1" {
                    (1, aapl)
                } else {
                    (2, msft)
                };
                let add = encode::add_order(
                    locate,
                    4,
                    100 + seq * 100 + k,
                    Side::Buy,
                    100,
                    stock,
                    1_000_000,
                    None,
                );
                b.message(&add);
            }
            tx.send_to(&b.finish(), ("127.0.0.1", port)).unwrap();
        };
        let next = messages.len() as u64 + 1;
        more(next, 8);
        std::thread::sleep(Duration::from_secs(1));
        assert_eq!(
            lines(1).len(),
            1,
            "{bound}: logged before the count grew tenfold"
        );
        more(next + 8, 1);
        assert!(
            lines(2)[1].contains("refused=10"),
            "{bound}: {:?}",
            lines(2)
        );
    }
}

#[test]
fn run_with_stderr_on_a_full_device() {
    survives("/dev/full", full(), false);
}

/// `| tee` ended by Ctrl-C: every write to stderr fails with EPIPE.
#[test]
fn run_with_stderr_on_a_pipe_nobody_reads() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    survives("broken pipe", Stdio::from(writer), false);
}

/// A log shipper that stopped reading: stderr is a pipe already full, so
/// every write to it would block. The lines wait in a queue of their own
/// and are dropped past it; the receive thread and the heartbeat go on.
#[test]
fn run_with_stderr_on_a_full_pipe_nobody_drains() {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let (reader, mut writer) = std::io::pipe().unwrap();
    // SAFETY: F_SETPIPE_SZ on a pipe this test owns; it returns the size
    // set (at least a page) or -1.
    let size = unsafe { libc::fcntl(writer.as_raw_fd(), libc::F_SETPIPE_SZ, 4096) };
    assert!(size > 0, "F_SETPIPE_SZ");
    writer.write_all(&vec![b'x'; size as usize]).unwrap();
    survives("full pipe", Stdio::from(writer), false);
    drop(reader);
}

/// The runtime puts /dev/null on a closed descriptor 2 before `main`, so no
/// file opened later takes its number and receives log lines.
#[test]
fn run_with_stderr_closed() {
    survives("closed", Stdio::inherit(), true);
}

/// An error that cannot be printed still ends in exit status 2, not a panic.
#[test]
fn an_error_on_a_full_stderr_exits_2() {
    let status = Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .args([
            "replay",
            "/nonexistent.pcap",
            "--config",
            "/nonexistent.toml",
        ])
        .stdout(Stdio::null())
        .stderr(full())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(2));
}

fn full() -> Stdio {
    Stdio::from(
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap(),
    )
}

/// Warnings that cannot be printed are lost, not a panic: the replay still
/// writes its results and exits 0.
#[test]
fn a_replay_that_warns_on_a_full_stderr_still_finishes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.json");
    // The fixture's checks name an unknown feed: a warning each.
    let status = Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .arg("replay")
        .arg(root.join("scenario-eth-us.pcap"))
        .arg("--config")
        .arg(root.join("config.toml"))
        .arg("--checks")
        .arg(root.join("checks.csv"))
        .arg("--summary")
        .arg(&summary)
        .stdout(Stdio::null())
        .stderr(full())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(std::fs::read_to_string(&summary)
        .unwrap()
        .contains("\"feeds\""));
}

/// `check` and `stat` with a stdout that cannot take their answer: one
/// line naming stdout, exit 2; `check` whose reader went away: its
/// verdict's exit status.
#[test]
fn check_and_stat_on_a_full_stdout_are_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let shm = dir.path().join("shm");
    let line = crate::common::free_addr();
    let cfg = tickguard::config::Config::parse(
        &format!(
            "[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{}\"\n\
             [[feed]]\nname = \"lp1\"\nkind = \"full\"\nlines = [\"{line}\"]\n\
             stale_threshold_ms = 1000\nsource_threshold_ms = 1000\n",
            shm.display()
        ),
        "test",
    )
    .unwrap();
    let sidecar = tickguard::sidecar::Sidecar::start(&cfg).unwrap();
    let commands: [&[&str]; 4] = [
        &["check", "lp1", "EURUSD"],
        &["check", "lp1", "EURUSD", "--json"],
        &["stat", "--once"],
        &["stat", "--once", "--json"],
    ];
    for args in commands {
        let out = Command::new(env!("CARGO_BIN_EXE_tickguard"))
            .args(args)
            .arg("--shm")
            .arg(&shm)
            .stdout(full())
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("stdout") && err.lines().count() == 1, "{err}");
    }
    // A reader that went away (`check ... | true`) changes nothing: the
    // exit status is still the verdict (1: nothing quoted yet), silently.
    for args in &commands[..2] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tickguard"))
            .args(*args)
            .arg("--shm")
            .arg(&shm)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!((out.status.code(), err.as_str()), (Some(1), ""), "{args:?}");
    }
    drop(sidecar);
}

/// A feed that joins its multicast groups from any source is warned about
/// at start (neither protocol authenticates its datagrams); one with a
/// `source` is not.
#[test]
fn any_source_multicast_is_warned_about_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let shm = dir.path().join("shm");
    let cfg = dir.path().join("config.toml");
    let feed = |name: &str, group: u8, source: &str| {
        format!(
            "[[feed]]\nname = \"{name}\"\nkind = \"full\"\nlines = [\"239.255.77.{group}:31977\"]\n\
             stale_threshold_ms = 60000\nsource_threshold_ms = 60000\n{source}\n"
        )
    };
    std::fs::write(
        &cfg,
        format!(
            "[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{}\"\ninterface = \"127.0.0.1\"\n\
             idle = \"sleep\"\ndead_after_ms = 1000\n{}{}",
            shm.display(),
            feed("open", 1, ""),
            feed("pinned", 2, "source = \"127.0.0.1\"")
        ),
    )
    .unwrap();
    let log = dir.path().join("run.log");
    let text = start_log(&cfg, &shm, &log);
    let warned = |feed: &str| {
        text.lines()
            .any(|l| l.contains("WARN") && l.contains("joined from any source") && l.contains(feed))
    };
    assert!(warned("feed=open"), "{text}");
    assert!(!warned("feed=pinned"), "{text}");
}

/// A path holding a line break or an escape sequence (the configuration's,
/// given on the command line, and the publication's, given in it) is
/// logged on its line, escaped: it cannot start a line that reads as
/// another event, nor move a terminal's cursor (a field's value included:
/// the formatter escapes only the message's).
#[test]
fn a_line_break_in_a_logged_path_forges_no_line() {
    let top = tempfile::tempdir().unwrap();
    let forged = "2026-01-01T00:00:00Z ERROR forged";
    let dir = top.path().join(format!("x\n{forged}\r\x1b[2K"));
    std::fs::create_dir(&dir).unwrap();
    let shm = dir.join("shm");
    let port = crate::common::free_port();
    let cfg = dir.join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{}\"\nidle = \"sleep\"\n\
             dead_after_ms = 1000\n[[feed]]\nname = \"lp1\"\nkind = \"full\"\n\
             lines = [\"127.0.0.1:{port}\"]\nstale_threshold_ms = 60000\n\
             source_threshold_ms = 60000\nclock_offset = 0\n",
            shm.display()
                .to_string()
                .replace('\n', "\\n")
                .replace('\r', "\\r")
                .replace('\x1b', "\\u001b")
        ),
    )
    .unwrap();
    let log = top.path().join("run.log");
    let text = start_log(&cfg, &shm, &log);
    assert!(
        !text.lines().any(|l| l.starts_with(forged))
            && !text.contains('\r')
            && !text.contains('\x1b'),
        "{text}"
    );
    let starting = text
        .lines()
        .find(|l| l.contains("starting from"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        starting.contains(&format!("x\\n{forged}\\r\\x1b[2K/config.toml"))
            && starting.contains(&format!("x\\n{forged}\\r\\x1b[2K/shm")),
        "{starting}"
    );
}

/// A recovery channel's socket is told as a line's: its receive buffer as
/// granted (capped below what was asked: a warning naming its address).
#[test]
fn a_recovery_channels_capped_receive_buffer_is_warned_about() {
    // The most rcvbuf_bytes asks for must be capped (docs/testing.md).
    let rmem_max = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    if rmem_max.is_none_or(|m| m >= 1_073_741_823) {
        crate::common::skip("net.core.rmem_max below 2^30 - 1, so that a buffer is capped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let shm = dir.path().join("shm");
    let (line, listen) = (crate::common::free_addr(), crate::common::free_addr());
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{}\"\nidle = \"sleep\"\n\
             dead_after_ms = 1000\nrcvbuf_bytes = 1073741823\n[[feed]]\nname = \"nq\"\n\
             protocol = \"itch50\"\nlines = [\"{line}\"]\nstale_threshold_ms = 60000\n\
             source_threshold_ms = 60000\nrecovery = \"127.0.0.1:9\"\nrecovery_listen = \"{listen}\"\n",
            shm.display()
        ),
    )
    .unwrap();
    let log = dir.path().join("run.log");
    let text = start_log(&cfg, &shm, &log);
    let opened = text
        .lines()
        .find(|l| l.contains("channel open"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(opened.contains("rcvbuf_requested=1073741823"), "{opened}");
    assert!(
        text.lines()
            .any(|l| l.contains("WARN")
                && l.contains(&format!("line {listen}: receive buffer capped"))),
        "{text}"
    );
}

/// A state table too small for the feed's symbols: the monitor logs it
/// once (not the receive thread), naming the feed and the setting, and
/// `check` of a refused symbol says it may be one the table refused.
#[test]
fn a_full_state_table_is_logged_once_and_check_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, shm, port) = one_feed(dir.path(), "interval_ms = 50\n[state]\ncapacity = 1\n");
    let log = dir.path().join("run.log");
    let mut child = crate::common::run_logged(&[], &cfg, &log);
    let pid = child.0.id() as u64;
    assert!(wait_for(&shm, |r| r.writer_pid() == Some(pid)), "not up");
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let t = now_ns();
    for seq in 1..=5u64 {
        let mut b = PacketBuilder::new(t);
        for s in ["S1", "S2", "S3"] {
            b.quote(Symbol::parse(s).unwrap(), seq, t, 1.0, 1.1);
        }
        tx.send_to(&b.finish(), ("127.0.0.1", port)).unwrap();
    }
    let text = || std::fs::read_to_string(&log).unwrap();
    let logged = || {
        text()
            .matches("no room for this feed's new symbols")
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while logged() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // A few more samples: still once.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(logged(), 1, "{}", text());
    assert!(
        text().contains("feed=lp1") && text().contains("raise [state] capacity"),
        "{}",
        text()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .args(["check", "lp1", "S3", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(out.contains("refused a slot: table_full_drops "), "{out}");
    assert!(child.0.try_wait().unwrap().is_none(), "the sidecar died");
}

/// With metrics off the monitor still samples, and logs what an operator
/// must hear of while the sidecar runs: here a recording onto a full disk
/// that stopped (`run --record /dev/full`, datagrams past the recording's
/// 128 KiB buffer).
#[test]
fn a_stopped_recording_is_logged_while_running_with_metrics_off() {
    stopped_recording(
        Path::new("/dev/full"),
        None,
        "No space left on device",
        None,
    );
}

/// Under a file-size limit (`ulimit -f`, systemd's `LimitFSIZE=`) the
/// recording stops at the write past it, as on a full disk, and the
/// sidecar goes on: the limit's signal (SIGXFSZ) ended the process.
#[test]
fn a_file_size_limit_stops_the_recording_not_the_sidecar() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rec.pcap");
    stopped_recording(&file, Some(100_000), "File too large", None);
}

/// A recording that reaches its `--record-max-mb` bound is told so, while
/// running and at the end, not as a failed write (which a file-size limit
/// of the system's gives: the operator's own bound is told apart).
#[test]
fn a_recording_at_its_bound_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rec.pcap");
    stopped_recording(&file, None, "its --record-max-mb bound", Some(1));
}

/// `run --record record` (under a file-size limit of `limit` bytes, with
/// `--record-max-mb bound_mb`), then datagrams past its buffer (past the
/// bound): the recording stops, logged while running; stopped, `run` says
/// so last, with `why`, and exits 2.
fn stopped_recording(record: &Path, limit: Option<u64>, why: &str, bound_mb: Option<u64>) {
    let dir = tempfile::tempdir().unwrap();
    // A small table: the publication fits the limit well.
    let (cfg, shm, port) = one_feed(dir.path(), "interval_ms = 50\n[state]\ncapacity = 64\n");
    let log = dir.path().join("run.log");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tickguard"));
    cmd.arg("run")
        .arg("--record")
        .arg(record)
        .args(bound_mb.map(|mb| format!("--record-max-mb={mb}")))
        .arg("--config")
        .arg(&cfg)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    if let Some(bytes) = limit {
        // SAFETY: setrlimit between fork and exec touches no lock nor
        // allocation.
        unsafe {
            cmd.pre_exec(move || {
                let l = libc::rlimit {
                    rlim_cur: bytes,
                    rlim_max: bytes,
                };
                match libc::setrlimit(libc::RLIMIT_FSIZE, &l) {
                    0 => Ok(()),
                    _ => Err(std::io::Error::last_os_error()),
                }
            });
        }
    }
    let mut child = Killed(cmd.spawn().unwrap());
    let pid = child.0.id() as u64;
    assert!(wait_for(&shm, |r| r.writer_pid() == Some(pid)), "not up");
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let t = now_ns();
    // 200 datagrams of 40 quotes (about 1.3 KB each): past the buffer;
    // past the bound, 1,000 a MiB.
    let datagrams = bound_mb.map_or(200, |mb| 1_000 * mb + 200);
    for seq in 1..=datagrams {
        let mut b = PacketBuilder::new(t);
        for s in 0..40 {
            b.quote(Symbol::parse(&format!("S{s}")).unwrap(), seq, t, 1.0, 1.1);
        }
        tx.send_to(&b.finish(), ("127.0.0.1", port)).unwrap();
        if seq % 20 == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let logged = || {
        std::fs::read_to_string(&log)
            .unwrap()
            .contains(match bound_mb {
                None => "recording stopped at a failed write",
                Some(_) => "recording stopped at its --record-max-mb bound",
            })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !logged() && Instant::now() < deadline {
        if child.0.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "the sidecar died: {}",
        std::fs::read_to_string(&log).unwrap()
    );
    assert!(logged(), "{}", std::fs::read_to_string(&log).unwrap());
    // Every datagram it received, once they stop coming in.
    let received = || {
        let r = Reader::open(&shm);
        let c = |id| r.counter(0, id).unwrap_or(0);
        c(counter::PACKETS) + c(counter::REJECTED)
    };
    let mut seen = received();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        match received() {
            n if n == seen => break,
            n => seen = n,
        }
    }
    // Stopped, it says the recording is cut, as its last line, and exits 2.
    let status = crate::common::terminate(&mut child.0);
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(2), "{text}");
    let last = text.lines().last().unwrap_or("");
    assert!(
        last.contains(&format!("the recording {} is incomplete", record.display()))
            && last.contains(why)
            && last.contains("datagrams and segments were not recorded"),
        "{text}"
    );
    if !std::fs::metadata(record).is_ok_and(|m| m.is_file()) {
        return;
    }
    // The file ends at its last whole record (a write cut short by the
    // limit took part of one: cut off at the end), and every datagram
    // received is in it or counted out of it.
    let unrecorded: u64 = last
        .split(" datagrams and segments were not recorded")
        .next()
        .and_then(|before| before.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no count in {last}"));
    let mut reader = tickguard::capture::CaptureReader::open(record).unwrap();
    let mut records = 0u64;
    reader.for_each(|_| records += 1).unwrap();
    assert_eq!(records + unrecorded, seen, "{text}");
}
