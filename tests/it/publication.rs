//! One writer per publication path, and a start that fails leaves the file
//! at the path alone: `tickguard run` (and `demo`) in child processes against
//! a live or a closed publication, a file that is not one, and a filesystem
//! too small for it. Also `check` and `stat` on what is not a usable
//! publication.

use std::net::{TcpListener, UdpSocket};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use tickguard::protocol::publication_feeds;
use tickguard::protocol::sqf::PacketBuilder;
use tickguard::symbol::Symbol;
use tickguard::time::now_ns;
use tickguard::Reader;

/// Longest a `tickguard` child expected to fail at start may run.
const START_LIMIT: Duration = Duration::from_secs(30);

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tickguard"))
}

/// A scratch directory under /dev/shm (where publications live), removed on drop.
/// True as root; otherwise says the test is skipped because it needs root
/// `to` do something (and fails under CI, which runs as root).
fn root(to: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        crate::common::skip(&format!("needs root to {to}"));
    }
    root
}

fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("tickguard-pub-{}-", std::process::id()))
        .tempdir_in("/dev/shm")
        .expect("scratch dir in /dev/shm")
}

/// A configuration at `dir/name.toml` publishing to `shm`, receiving on two
/// loopback ports; `sidecar` and `metrics` are extra lines for those tables.
fn config(dir: &Path, name: &str, shm: &Path, sidecar: &str, metrics: &str) -> PathBuf {
    let text = format!(
        r#"
[state]
capacity = 1024
[metrics]
{metrics}
[sidecar]
shm_path = "{}"
idle = "sleep"
idle_sleep_us = 100
dead_after_ms = 1000
{sidecar}
[[feed]]
name = "lp1"
kind = "full"
lines = ["127.0.0.1:{}", "127.0.0.1:{}"]
stale_threshold_ms = 60000
source_threshold_ms = 60000
clock_offset = 0
"#,
        shm.display(),
        crate::common::free_port(),
        crate::common::free_port()
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

const NO_METRICS: &str = "enabled = false";

struct Running {
    child: Child,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `tickguard run` and waits until its own publication answers.
fn start(config: &Path, shm: &Path) -> Running {
    let child = Command::new(bin())
        .args(["run", "--config"])
        .arg(config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let r = Running { child };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let reader = crate::common::live_reader(shm);
        if reader.health(now_ns()).is_ok() && reader.writer_pid() == Some(r.child.id() as u64) {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "sidecar did not come up: {}",
            reader.health(now_ns())
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A helper thread that fails (a panic: a defect; injected by the debug
/// build's `TICKGUARD_TEST_PANIC`) stops the sidecar: exit 2, the panic's
/// message and one line saying it stopped. The monitor fails once the
/// sidecar runs: the publication it made is closed, so readers answer
/// `stale` at once. The metrics listener fails as the sidecar starts,
/// before its publication is made or just after (a race this test does
/// not steer): either way exit 2, not the clean stop a SIGTERM while
/// starting is (exit 0), so that its service manager starts it again.
#[test]
fn a_helper_thread_that_fails_stops_the_sidecar() {
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    for (thread, stopped) in [
        (
            "tickguard-metrics",
            "a thread of the sidecar failed (its message is above): stopped",
        ),
        ("tickguard-http", "a thread of the sidecar failed"),
    ] {
        crate::common::remove_publication(&shm);
        let port = crate::common::free_port();
        let metrics = format!("listen = \"127.0.0.1:{port}\"");
        let cfg = config(dir.path(), thread, &shm, "", &metrics);
        let out = finish(
            Command::new(bin())
                .args(["run", "--config"])
                .arg(&cfg)
                .env("TICKGUARD_TEST_PANIC", thread),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{thread}: {err}");
        assert!(
            err.contains(&format!("thread '{thread}' panicked"))
                && err.contains("a panic injected for a test"),
            "{thread}: {err}"
        );
        assert!(
            err.lines().last().unwrap().contains(stopped),
            "{thread}: {err}"
        );
        let health = crate::common::live_reader(&shm).health(now_ns());
        match thread {
            "tickguard-metrics" => assert_eq!(health, tickguard::Health::WriterClosed, "{err}"),
            // Failed before the publication or after it: nothing running.
            _ => assert!(
                matches!(
                    health,
                    tickguard::Health::Missing(_) | tickguard::Health::WriterClosed
                ),
                "{health}: {err}"
            ),
        }
    }
}

/// Runs a command expected to end by itself within [`START_LIMIT`].
fn finish(cmd: &mut Command) -> Output {
    let mut child = cmd
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + START_LIMIT;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{cmd:?} still running after {START_LIMIT:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

/// `tickguard run --config CONFIG`, expected to refuse: exit 2 and one
/// line on stderr, returned.
fn refused_run(config: &Path) -> String {
    refused(Command::new(bin()).args(["run", "--config"]).arg(config))
}

fn refused(cmd: &mut Command) -> String {
    let out = finish(cmd);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{cmd:?}: {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    err
}

/// A publication at `shm`, ready, made as `run` would for a one-feed
/// configuration written in `dir`; no receive thread behind it.
fn ready_publication(dir: &Path, shm: &Path) -> tickguard::shm::Publication {
    let c = config(dir, "c", shm, "", NO_METRICS);
    let config = tickguard::config::Config::load(&c).unwrap();
    let p = tickguard::shm::Publication::create(
        shm,
        0o640,
        config.capacity,
        &publication_feeds(&config),
        now_ns(),
        1_000_000,
    )
    .unwrap();
    p.ready();
    p
}

/// Sends one quote for `symbol` to the configuration's first line.
fn quote(config: &Path, symbol: &str) {
    let c = tickguard::config::Config::load(config).unwrap();
    let t = now_ns();
    let mut b = PacketBuilder::new(t);
    b.quote(Symbol::parse(symbol).unwrap(), 1, t, 1.0, 1.1);
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .send_to(&b.finish(), c.feeds[0].lines[0])
        .unwrap();
}

/// `tickguard check lp1 SYMBOL --shm SHM [extra]`: (exit code, stdout, stderr).
fn check(shm: &Path, symbol: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let bound = extra
        .iter()
        .any(|a| *a == "--dead-after-ms" || *a == "--config");
    let out = finish(
        Command::new(bin())
            .args(["check", "lp1", symbol, "--json", "--shm"])
            .arg(shm)
            .args(extra)
            .args(if bound { &[][..] } else { &LIVE_BOUND[..] }),
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The bound on a writer's heartbeat age the tests' checks take unless
/// they test it: a minute, not 100 ms, so that a writer the machine did
/// not schedule for a tenth of a second (a loaded CI runner) still reads
/// as the live writer it is, and the verdict asked about is its own.
const LIVE_BOUND: [&str; 2] = ["--dead-after-ms", "60000"];

/// Waits until `check` answers ok for `symbol` (the quote has arrived).
fn wait_ok(shm: &Path, symbol: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while check(shm, symbol, &[]).0 != Some(0) {
        assert!(Instant::now() < deadline, "{symbol} never ok");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The file at `shm` as it is: (inode, bytes).
fn snapshot(shm: &Path) -> (u64, Vec<u8>) {
    (
        std::fs::metadata(shm).unwrap().ino(),
        std::fs::read(shm).unwrap(),
    )
}

/// Names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `check`'s exit status is its verdict whether or not its reader took the
/// answer (`| true`: a broken pipe), and an error (2) on a full stdout.
#[test]
fn check_exits_with_its_verdict_when_its_reader_went_away() {
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let _p = ready_publication(dir.path(), &shm);
    let run = |stdout: Stdio| {
        Command::new(bin())
            .args(["check", "lp1", "EURUSD", "--shm"])
            .arg(&shm)
            .stdout(stdout)
            .stderr(Stdio::piped())
            .output()
            .unwrap()
    };
    // A symbol never quoted: no_quote, exit 1.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let gone = run(writer.into());
    assert_eq!(gone.status.code(), Some(1), "{gone:?}");
    assert!(gone.stderr.is_empty(), "{gone:?}");
    let full = run(std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap()
        .into());
    assert_eq!(full.status.code(), Some(2), "{full:?}");
    assert!(
        String::from_utf8_lossy(&full.stderr).contains("writing to stdout"),
        "{full:?}"
    );
}

/// A writer killed and not yet reaped (a zombie: its pid still listed, its
/// publication's header still running and its heartbeat fresh) does not
/// hold its path, its lock file removed as well: a new writer starts at
/// once.
#[test]
fn a_writer_killed_and_not_yet_reaped_does_not_hold_its_path() {
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let first_cfg = config(dir.path(), "first", &shm, "", NO_METRICS);
    let first = start(&first_cfg, &shm);
    let pid = first.child.id();
    assert!(crate::common::signal(pid, libc::SIGKILL));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        if status
            .lines()
            .any(|l| l.starts_with("State:") && l.contains('Z'))
        {
            break;
        }
        assert!(Instant::now() < deadline, "{status}");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::fs::remove_file(dir.path().join("tickguard.lock")).unwrap();
    let second_cfg = config(dir.path(), "second", &shm, "", NO_METRICS);
    let second = start(&second_cfg, &shm);
    drop(second);
    drop(first);
}

/// The lock file removed under a live writer (a cleanup of `*.lock`): a
/// second writer started on the path still refuses, naming the first, whose
/// file stays the one at the path, in good health.
#[test]
fn a_second_writer_refuses_a_live_path_whose_lock_file_is_gone() {
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let first_cfg = config(dir.path(), "first", &shm, "", NO_METRICS);
    let first = start(&first_cfg, &shm);
    let pid = first.child.id();
    let inode = std::fs::metadata(&shm).unwrap().ino();
    std::fs::remove_file(dir.path().join("tickguard.lock")).unwrap();
    let second = config(dir.path(), "second", &shm, "", NO_METRICS);
    let err = refused_run(&second);
    assert!(
        err.contains(&format!("in use by another writer, pid {pid}"))
            && err.contains("lock file is gone"),
        "{err}"
    );
    assert_eq!(std::fs::metadata(&shm).unwrap().ino(), inode);
    let reader = crate::common::live_reader(&shm);
    assert!(reader.health(now_ns()).is_ok());
    assert_eq!(reader.writer_pid(), Some(u64::from(pid)));
}

#[test]
fn a_second_writer_on_a_live_path_refuses_and_the_first_stays_ok() {
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let first_cfg = config(dir.path(), "first", &shm, "", NO_METRICS);
    let first = start(&first_cfg, &shm);
    let pid = first.child.id();
    quote(&first_cfg, "EURUSD");
    wait_ok(&shm, "EURUSD");
    let reader = crate::common::live_reader(&shm);
    let eurusd = reader.lookup("lp1", "EURUSD").unwrap();
    let inode = std::fs::metadata(&shm).unwrap().ino();

    // The same configuration; one whose metrics port is taken; one with a
    // line that cannot be bound; the demo on the same path.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let busy_metrics = config(
        dir.path(),
        "busy-metrics",
        &shm,
        "",
        &format!("listen = \"127.0.0.1:{port}\""),
    );
    let bad_line = dir.path().join("bad-line.toml");
    std::fs::write(
        &bad_line,
        std::fs::read_to_string(&first_cfg)
            .unwrap()
            .replacen("127.0.0.1:", "192.0.2.1:", 1),
    )
    .unwrap();
    for cfg in [&first_cfg, &busy_metrics, &bad_line] {
        let err = refused_run(cfg);
        assert!(
            err.contains(&format!("pid {pid}")) && err.contains("tickguard.lock"),
            "{}: {err}",
            cfg.display()
        );
    }
    let err = refused(
        Command::new(bin())
            .args(["demo", "--duration-s", "1", "--shm"])
            .arg(&shm),
    );
    assert!(err.contains(&format!("pid {pid}")), "demo: {err}");
    // With JSON log lines, why it failed is one JSON line too.
    let json = config(
        dir.path(),
        "json",
        &shm,
        "[log]\nformat = \"json\"",
        NO_METRICS,
    );
    let err = refused_run(&json);
    let line: serde_json::Value = serde_json::from_str(err.trim_end())
        .unwrap_or_else(|e| panic!("not a JSON line ({e}): {err}"));
    assert_eq!(line["level"], "ERROR", "{err}");
    let message = line["fields"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("pid {pid}")), "{err}");

    // The first writer's file is the one at the path, and its readers stay ok.
    assert_eq!(std::fs::metadata(&shm).unwrap().ino(), inode);
    assert!(reader.check(&eurusd, now_ns()).is_ok());
    let (code, out, err) = check(&shm, "EURUSD", &[]);
    assert_eq!(code, Some(0), "{out} {err}");
    assert_eq!(
        crate::common::live_reader(&shm).writer_pid(),
        Some(pid as u64)
    );
    assert_eq!(names(dir.path()).len(), 6, "{:?}", names(dir.path()));
    drop(first);
}

#[test]
fn a_start_that_fails_leaves_the_previous_publication_untouched() {
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let cfg = config(dir.path(), "first", &shm, "", NO_METRICS);
    let mut first = start(&cfg, &shm);
    // SIGTERM: the publication is closed and stays, as after any clean stop.
    assert!(crate::common::terminate(&mut first.child).success());
    let before = snapshot(&shm);
    let files = names(dir.path());

    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let busy_metrics = config(
        dir.path(),
        "busy-metrics",
        &shm,
        "",
        &format!("listen = \"127.0.0.1:{port}\""),
    );
    let err = refused_run(&busy_metrics);
    assert!(err.contains(&port.to_string()), "{err}");
    assert!(
        snapshot(&shm) == before,
        "metrics port in use: file changed"
    );

    // 192.0.2.1 (TEST-NET-1) is no host's: the join fails, and no report
    // leaves on a real interface.
    let bad_interface = config(
        dir.path(),
        "bad-interface",
        &shm,
        "interface = \"192.0.2.1\"",
        NO_METRICS,
    );
    std::fs::write(
        &bad_interface,
        std::fs::read_to_string(&bad_interface)
            .unwrap()
            .replace("127.0.0.1:", "239.255.7.1:"),
    )
    .unwrap();
    let err = refused_run(&bad_interface);
    assert!(err.contains("239.255.7.1"), "{err}");
    assert!(err.contains("interface 192.0.2.1"), "{err}");
    assert!(snapshot(&shm) == before, "bad interface: file changed");
    // Nothing left behind (no half-built file) but the new configurations.
    assert_eq!(names(dir.path()).len(), files.len() + 2);

    // A start that succeeds replaces the closed publication.
    let second = start(&cfg, &shm);
    assert_ne!(snapshot(&shm).0, before.0);
    drop(second);
}

#[test]
fn a_file_that_is_not_a_publication_is_never_replaced() {
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    std::fs::write(&shm, "someone's data\n").unwrap();
    let cfg = config(dir.path(), "c", &shm, "", NO_METRICS);
    let err = refused_run(&cfg);
    assert!(err.contains("not a tickguard publication"), "{err}");
    let err = refused(
        Command::new(bin())
            .args(["demo", "--duration-s", "1", "--shm"])
            .arg(&shm),
    );
    assert!(err.contains("not a tickguard publication"), "{err}");
    assert_eq!(std::fs::read(&shm).unwrap(), b"someone's data\n");

    // Nor a directory.
    std::fs::remove_file(&shm).unwrap();
    std::fs::create_dir(&shm).unwrap();
    let err = refused_run(&cfg);
    assert!(err.contains("not a regular file"), "{err}");
    assert!(shm.is_dir());
}

/// For a test of a tmpfs of its own in a private mount namespace (root
/// with CAP_SYS_ADMIN; skipped otherwise, which fails under CI, as the
/// namespace tests): a scratch directory, the empty directory `small` in
/// it to mount the tmpfs on, the publication's path there, and a
/// configuration publishing at it.
fn tmpfs_set_up() -> Option<(tempfile::TempDir, PathBuf, PathBuf, PathBuf)> {
    if !root("mount a tmpfs in a private mount namespace") {
        return None;
    }
    let can_mount = Command::new("unshare")
        .args(["--mount", "sh", "-c", "mount -t tmpfs -o size=1m none /mnt"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !can_mount {
        crate::common::skip("needs a mount namespace with a tmpfs (root without CAP_SYS_ADMIN?)");
        return None;
    }
    let dir = scratch();
    let small = dir.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let shm = small.join("tickguard");
    let cfg = config(dir.path(), "c", &shm, "", NO_METRICS);
    Some((dir, small, shm, cfg))
}

/// A filesystem too small for the publication is a start-up error, not a
/// SIGBUS once the sidecar runs: a 1 MiB tmpfs in a private mount namespace.
#[test]
fn a_filesystem_too_small_is_a_clear_start_up_error() {
    let Some((_dir, small, shm, cfg)) = tmpfs_set_up() else {
        return;
    };
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("capacity = 1024", "capacity = 65536");
    std::fs::write(&cfg, text).unwrap();
    let out = finish(
        Command::new("unshare")
            .args([
                "--mount",
                "sh",
                "-c",
                "mount -t tmpfs -o size=1m none \"$1\" && exec \"$2\" run --config \"$3\"",
                "sh",
            ])
            .arg(&small)
            .arg(bin())
            .arg(&cfg),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&shm.display().to_string()) && err.contains("No space left"),
        "{err}"
    );
    // The tmpfs was private: nothing was written here.
    assert_eq!(names(&small), Vec::<String>::new());
}

/// A publication written over while its filesystem (a tmpfs, as
/// `/dev/shm`) is full: recreating it fails, said with the error, readers
/// answer other than `ok` meanwhile (it was closed), the sidecar goes on
/// and tries again every second, and once there is room the publication
/// is made anew and answers again. The tmpfs is private to a mount
/// namespace; the test reaches it through `/proc/PID/root`.
#[test]
fn a_publication_lost_on_a_full_tmpfs_is_made_again_once_there_is_room() {
    let Some((dir, small, _shm, cfg)) = tmpfs_set_up() else {
        return;
    };
    let log = dir.path().join("run.log");
    let child = Command::new("unshare")
        .args([
            "--mount",
            "sh",
            "-c",
            "mount -t tmpfs -o size=8m none \"$1\" && exec \"$2\" run --config \"$3\"",
            "sh",
        ])
        .arg(&small)
        .arg(bin())
        .arg(&cfg)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut running = Running { child };
    let pid = running.child.id();
    // The tmpfs as the sidecar sees it.
    let inner = PathBuf::from(format!("/proc/{pid}/root")).join(small.strip_prefix("/").unwrap());
    let publication = inner.join("tickguard");
    let logged = |what: &str| std::fs::read_to_string(&log).unwrap().contains(what);
    let wait = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(
                Instant::now() < deadline,
                "{what}: {}",
                std::fs::read_to_string(&log).unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let healthy = || {
        let r = crate::common::live_reader(&publication);
        r.health(now_ns()).is_ok() && r.writer_pid() == Some(u64::from(pid))
    };
    wait("up", &healthy);
    // The rest of the tmpfs filled.
    let filler = inner.join("filler");
    {
        let mut f = std::fs::File::create(&filler).unwrap();
        let block = vec![7u8; 64 * 1024];
        while std::io::Write::write_all(&mut f, &block).is_ok() {}
    }
    // Its header written over: the sidecar must make it anew, and has no
    // room to.
    std::os::unix::fs::FileExt::write_all_at(
        &std::fs::OpenOptions::new()
            .write(true)
            .open(&publication)
            .unwrap(),
        &[0u8; 4096],
        0,
    )
    .unwrap();
    wait("the failure told", &|| {
        logged("recreating it failed; retrying every second") && logged("No space left on device")
    });
    assert!(!healthy(), "readers answer ok on a file written over");
    assert!(
        running.child.try_wait().unwrap().is_none(),
        "the sidecar died"
    );
    // Room again: made anew at the next try.
    std::fs::remove_file(&filler).unwrap();
    wait("made anew", &|| {
        healthy() && logged("recreated, every symbol starts over")
    });
    // SAFETY: a signal to the child this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0);
    let status = running.child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "{}",
        std::fs::read_to_string(&log).unwrap()
    );
}

#[test]
fn check_and_stat_exit_2_without_a_usable_publication() {
    let dir = scratch();
    let missing = dir.path().join("missing");
    let garbage = dir.path().join("garbage");
    std::fs::write(&garbage, vec![7u8; 8192]).unwrap();
    let writable = dir.path().join("writable");
    std::fs::write(&writable, vec![0u8; 8192]).unwrap();
    std::fs::set_permissions(
        &writable,
        std::os::unix::fs::PermissionsExt::from_mode(0o666),
    )
    .unwrap();
    // A publication whose state word was overwritten (offset 16).
    let zeroed = dir.path().join("zeroed");
    let p = ready_publication(dir.path(), &zeroed);
    p.heartbeat(now_ns());
    std::os::unix::fs::FileExt::write_all_at(
        &std::fs::OpenOptions::new()
            .write(true)
            .open(&zeroed)
            .unwrap(),
        &[0u8; 8],
        16,
    )
    .unwrap();
    let zeroed_word = format!("unusable publication: {}: state word 0", zeroed.display());
    for (path, word) in [
        (&missing, "no publication"),
        (&garbage, "not a tickguard publication"),
        (&writable, "untrusted"),
    ] {
        let (code, out, err) = check(path, "EURUSD", &[]);
        assert_eq!(code, Some(2), "{}: {out} {err}", path.display());
        assert!(out.is_empty() && err.lines().count() == 1, "{out} {err}");
        assert!(err.contains(word), "{err}");
        let err = refused(
            Command::new(bin())
                .args(["stat", "--once", "--shm"])
                .arg(path),
        );
        assert!(err.contains(word), "{err}");
        // The JSON form prints the object the streaming form would, then
        // the same line and exit status.
        let out = finish(
            Command::new(bin())
                .args(["stat", "--once", "--json", "--shm"])
                .arg(path),
        );
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(word) && err.lines().count() == 1, "{err}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["writer"], serde_json::Value::Null, "{v}");
        assert!(v["health_detail"].as_str().unwrap().contains(word), "{v}");
    }
    // Its line names the path, as the others do.
    let (code, out, err) = check(&zeroed, "EURUSD", &[]);
    assert_eq!(code, Some(2), "{out} {err}");
    assert!(
        err.contains(&zeroed_word) && err.lines().count() == 1,
        "{err}"
    );
    let err = refused(
        Command::new(bin())
            .args(["stat", "--once", "--shm"])
            .arg(&zeroed),
    );
    assert!(err.contains(&zeroed_word), "{err}");
    drop(p);
}

/// The expected owner: by default this user or root; `--owner` names
/// another, by uid or name.
#[test]
fn check_trusts_the_named_owner() {
    if !root("give a file to another user") {
        return;
    }
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let p = ready_publication(dir.path(), &shm);
    std::os::unix::fs::chown(&shm, Some(65534), None).unwrap();
    p.heartbeat(now_ns());
    let (code, _, err) = check(&shm, "EURUSD", &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("owned by uid 65534"), "{err}");
    for owner in ["65534", "nobody"] {
        p.heartbeat(now_ns());
        let (code, out, err) = check(
            &shm,
            "EURUSD",
            &["--owner", owner, "--dead-after-ms", "60000"],
        );
        let v: serde_json::Value = serde_json::from_str(&out).expect(&err);
        assert_eq!(code, Some(1), "{out} {err}");
        assert_eq!(v["reasons"], serde_json::json!(["no_quote"]), "{v}");
        assert_eq!(v["health"], "writer alive", "{v}");
    }
    let (code, _, err) = check(&shm, "EURUSD", &["--owner", "no-such-user-here"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no user 'no-such-user-here'"), "{err}");
    // A closed publication is a verdict: stale, exit 1.
    p.close();
    let (code, out, _) = check(&shm, "EURUSD", &["--owner", "nobody"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("closed"), "{out}");
}

/// Another user cannot truncate a running publication (which would SIGBUS
/// the writer and every reader): the file is the writer's, mode 0640, in a
/// directory anyone may enter.
#[test]
fn another_user_cannot_truncate_the_publication() {
    if !root("act as another user") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let shm = dir.path().join("tickguard");
    let cfg = config(dir.path(), "c", &shm, "", NO_METRICS);
    let running = start(&cfg, &shm);
    quote(&cfg, "EURUSD");
    wait_ok(&shm, "EURUSD");
    let len = std::fs::metadata(&shm).unwrap().len();
    let out = Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "truncate",
            "-s",
            "0",
        ])
        .arg(&shm)
        // (Its error in English: the text is matched.)
        .env("LC_ALL", "C")
        .output()
        .expect("setpriv (util-linux)");
    assert!(!out.status.success(), "truncate as uid 65534 succeeded");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::metadata(&shm).unwrap().len(), len);
    wait_ok(&shm, "EURUSD");
    drop(running);
}

/// A publication of one closed ITCH feed "nasdaq" at `shm`: AAPL halted
/// with bid 123.45 × 300 and ask 123.5 (prices with 4 decimals), MSFT
/// known with an empty book.
/// Keep the table: dropping it closes the publication.
fn closed_exchange_feed(
    shm: &Path,
) -> (
    tickguard::state::StateTable,
    std::sync::Arc<tickguard::shm::Publication>,
) {
    use tickguard::config::Protocol;
    use tickguard::protocol::sqf::rules::FeedKind;
    use tickguard::shm::{FeedInfo, Publication};
    use tickguard::state::{FeedStatus, Level, StateTable, Top};
    let now = now_ns();
    let mut nasdaq = FeedInfo::new(
        "nasdaq",
        FeedKind::Delta,
        vec!["239.1.1.1:30001".parse().unwrap()],
        Protocol::Itch50,
    );
    // Its prices with ITCH's 4 decimals, as a sidecar publishes them.
    nasdaq.traits |= tickguard::shm::traits::price_decimals(4);
    let feeds = [nasdaq];
    let p = Publication::create(shm, 0o640, 8, &feeds, now, 1_000_000).unwrap();
    let p = std::sync::Arc::new(p);
    let mut table = StateTable::shared(p.clone());
    let th = tickguard::verdict::Thresholds {
        stale_ns: 600_000_000_000,
        source_ns: 600_000_000_000,
    };
    let id = table.insert(0, Symbol::parse("AAPL").unwrap(), th).unwrap();
    table.slots()[id as usize].write_top(&Top {
        bid: Some(Level {
            price: 1_234_500,
            size: 300,
        }),
        ask: Some(Level {
            price: 1_235_000,
            size: 0,
        }),
        exponent: -4,
        halted: true,
        ..Top::default()
    });
    table.insert(0, Symbol::parse("MSFT").unwrap(), th).unwrap();
    table.set_feed_status(
        0,
        &FeedStatus {
            closed: true,
            last_alive: now,
            source_watermark: now,
            ..FeedStatus::default()
        },
    );
    p.ready();
    p.heartbeat(now);
    (table, p)
}

/// `tickguard check nasdaq SYMBOL` on `shm` (text or JSON): (exit, stdout).
fn check_nasdaq(shm: &Path, symbol: &str, json: bool) -> (Option<i32>, String) {
    let mut cmd = Command::new(bin());
    cmd.args([
        "check",
        "nasdaq",
        symbol,
        "--dead-after-ms",
        "60000",
        "--shm",
    ])
    .arg(shm);
    if json {
        cmd.arg("--json");
    }
    let out = finish(&mut cmd);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// `check` on an exchange feed: the reasons include `halted` and `closed`,
/// the book top is printed with exact prices and sizes, in text and JSON;
/// a size of 0 is shown as such (ITCH keeps an order of 0 shares live; an
/// SQF feed, which has no sizes, shows none).
#[test]
fn check_prints_exchange_reasons_and_exact_prices() {
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let (table, _p) = closed_exchange_feed(&shm);
    let run = |json: bool| {
        let (code, out) = check_nasdaq(&shm, "AAPL", json);
        assert_eq!(code, Some(1));
        out
    };
    assert_eq!(
        run(false),
        "nasdaq AAPL: rejected: halted, closed (writer alive)\n  bid 123.4500 × 300  ask 123.5000 × 0\n"
    );
    let v: serde_json::Value = serde_json::from_str(&run(true)).unwrap();
    assert_eq!(v["reasons"], serde_json::json!(["halted", "closed"]));
    assert_eq!(v["symbol_known"], serde_json::json!(true));
    assert_eq!(
        v["bid"],
        serde_json::json!({"price": "123.4500", "size": 300})
    );
    assert_eq!(
        v["ask"],
        serde_json::json!({"price": "123.5000", "size": 0})
    );
    drop(table);
}

/// `check` of a feed the publication does not name, or of a name no feed
/// can have (empty, a control character): a wrong question, exit 2 in one
/// line, whether the writer is alive or dead (the feeds a publication names
/// are fixed when it is made); a hostile name is echoed escaped.
#[test]
fn check_of_a_feed_the_publication_lacks_is_a_wrong_question() {
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let (_table, _p) = closed_exchange_feed(&shm);
    let ask = |feed: &str, dead_after_ms: &str| {
        refused(
            Command::new(bin())
                .args([
                    "check",
                    feed,
                    "AAPL",
                    "--dead-after-ms",
                    dead_after_ms,
                    "--shm",
                ])
                .arg(&shm),
        )
    };
    let alive = ask("nasdq", "60000");
    assert!(
        alive.contains("no feed 'nasdq'") && alive.contains("(feeds: nasdaq)"),
        "{alive}"
    );
    std::thread::sleep(Duration::from_millis(20));
    let dead = ask("nasdq", "3");
    assert!(dead.contains("no feed 'nasdq'"), "{dead}");
    let empty = ask("", "60000");
    assert!(empty.contains("'' is not a valid feed name"), "{empty}");
    let hostile = ask("x\u{1b}]0;owned\u{7}", "60000");
    assert!(
        hostile.contains(r"'x\u{1b}]0;owned\u{7}' is not a valid feed name"),
        "{hostile}"
    );
    // The known feed, its writer dead: a verdict (stale), not an error.
    let out = finish(
        Command::new(bin())
            .args(["check", "nasdaq", "AAPL", "--dead-after-ms", "3", "--shm"])
            .arg(&shm),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("stale"));
}

/// `check` tells a symbol the feed never named (a typo, another venue's
/// name) from a known one whose book is empty: both are `no_quote` with
/// exit 1, told apart in the text and by `symbol_known` in the JSON; a
/// name the feed's protocol cannot publish is exit 2.
#[test]
fn check_tells_an_unknown_symbol_from_an_empty_book() {
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let (table, p) = closed_exchange_feed(&shm);
    assert_eq!(
        check_nasdaq(&shm, "MSFT", false),
        (
            Some(1),
            "nasdaq MSFT: rejected: no_quote (writer alive; empty book)\n".to_string()
        )
    );
    assert_eq!(
        check_nasdaq(&shm, "MSFTT", false),
        (
            Some(1),
            "nasdaq MSFTT: rejected: no_quote (writer alive; unknown symbol: not published on this feed (never named, or not published yet))\n"
                .to_string()
        )
    );
    for (symbol, known) in [("MSFT", true), ("MSFTT", false)] {
        let (code, out) = check_nasdaq(&shm, symbol, true);
        assert_eq!(code, Some(1));
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["symbol_known"], serde_json::json!(known), "{out}");
        assert_eq!(v["reasons"][0], "no_quote", "{out}");
    }
    // A name the feed's protocol cannot publish (nine characters on an
    // ITCH feed) is a wrong question, exit 2, not a rejection.
    let out = finish(
        Command::new(bin())
            .args([
                "check",
                "nasdaq",
                "MSFTTTTTT",
                "--dead-after-ms",
                "60000",
                "--shm",
            ])
            .arg(&shm),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err,
        "tickguard: 'MSFTTTTTT' is not a valid symbol (1 to 8 printable ASCII characters, no \
         spaces): feed 'nasdaq' (itch50) publishes no such name\n"
    );
    assert!(out.stdout.is_empty());
    // Once the table has refused the feed symbols, an unknown one may be
    // one of them (its book kept, not published): said so, with the count.
    p.set_counter(0, tickguard::shm::counter::TABLE_FULL, 3);
    assert_eq!(
        check_nasdaq(&shm, "MSFTT", false),
        (
            Some(1),
            "nasdaq MSFTT: rejected: no_quote (writer alive; unknown symbol: not published on this feed (never named, not published yet, or refused a slot: table_full_symbols 3, raise [state] capacity or the feed's own limit on symbols))\n"
                .to_string()
        )
    );
    drop(table);
}

/// `<shm_path>.lock` is refused, in one line, and left as it is (and so is
/// whatever it points at) when it is a hard link to a live publication, a
/// symbolic link to one, another user's file, or a file holding anything
/// but a pid; the live publication's writer and readers carry on.
#[test]
fn a_lock_file_that_is_not_a_writers_is_refused_and_left_untouched() {
    let dir = scratch();
    let live = dir.path().join("live");
    let live_cfg = config(dir.path(), "live", &live, "", NO_METRICS);
    let running = start(&live_cfg, &live);
    quote(&live_cfg, "EURUSD");
    wait_ok(&live, "EURUSD");
    let shm = dir.path().join("tickguard");
    let lock = tickguard::shm::lock_path(&shm);
    let cfg = config(dir.path(), "c", &shm, "", NO_METRICS);
    // The live file keeps changing (its heartbeat): its inode, length and
    // magic must not, and its writer must stay the one that answers.
    let shape = || {
        let (ino, bytes) = snapshot(&live);
        (ino, bytes.len(), bytes[..8].to_vec())
    };
    let before = shape();
    let writer = Some(running.child.id() as u64);
    let cases: [(&str, &dyn Fn()); 3] = [
        ("2 links", &|| std::fs::hard_link(&live, &lock).unwrap()),
        ("symbolic link", &|| {
            std::os::unix::fs::symlink(&live, &lock).unwrap()
        }),
        ("something other than a writer's pid", &|| {
            std::fs::write(&lock, "someone's notes\n").unwrap()
        }),
    ];
    for (word, make) in cases {
        make();
        let err = refused_run(&cfg);
        assert!(
            err.contains(word) && err.contains("tickguard.lock"),
            "{word}: {err}"
        );
        assert_eq!(shape(), before, "{word}: the live publication changed");
        let reader = crate::common::live_reader(&live);
        assert!(reader.health(now_ns()).is_ok() && reader.writer_pid() == writer);
        assert!(!shm.exists(), "{word}: a publication was made");
        std::fs::remove_file(&lock).unwrap();
    }
    if root("give a file to another user") {
        std::fs::write(&lock, "1\n").unwrap();
        std::os::unix::fs::chown(&lock, Some(65534), None).unwrap();
        let err = refused_run(&cfg);
        assert!(err.contains("owner uid 65534"), "{err}");
        assert_eq!(std::fs::read(&lock).unwrap(), b"1\n");
        // Root's, left by a killed writer (mode 0600), met by a writer of
        // another user, which cannot open it: named with its owner.
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::process::CommandExt;
        std::os::unix::fs::chown(&lock, Some(0), None).unwrap();
        std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o644)).unwrap();
        // The binary as that user runs it: from a copy in the scratch
        // directory when the build's own path is closed to it (a checkout
        // under a 0700 home).
        let as_nobody = |bin: &Path| {
            let mut c = Command::new(bin);
            c.uid(65534).gid(65534);
            c
        };
        let mut exe = bin();
        if as_nobody(&exe).arg("--version").output().is_err() {
            let copy = dir.path().join("tickguard-as-nobody");
            std::fs::copy(&exe, &copy).unwrap();
            exe = copy;
        }
        let err = refused(as_nobody(&exe).args(["run", "--config"]).arg(&cfg));
        assert!(
            err.contains("owner uid 0, mode 600") && err.contains("remove it"),
            "{err}"
        );
        assert_eq!(std::fs::read(&lock).unwrap(), b"1\n");
    }
    wait_ok(&live, "EURUSD");
    drop(running);
}

/// A writer killed leaves its lock file: the next start takes it over,
/// even when another user (uid 65534) opened it, while an older writer
/// left it readable, and holds its lock. The lock file a writer makes is
/// readable by its owner only.
/// A writer started under a narrow umask (a service's `UMask=0277`) gives
/// its publication exactly `shm_mode` (0640: its gateways' group reads it)
/// and its lock exactly 0600 (0400, the next start after a kill could not
/// write it).
#[test]
fn a_writer_under_a_narrow_umask_sets_its_modes_exactly() {
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let cfg = config(dir.path(), "c", &shm, "", NO_METRICS);
    let child = Command::new("sh")
        .args(["-c", "umask 0277; exec \"$0\" run --config \"$1\""])
        .arg(bin())
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let running = Running { child };
    let deadline = Instant::now() + Duration::from_secs(20);
    while crate::common::live_reader(&shm).writer_pid() != Some(u64::from(running.child.id())) {
        assert!(Instant::now() < deadline, "the writer did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
    assert_eq!(mode(&shm), 0o640);
    assert_eq!(mode(&tickguard::shm::lock_path(&shm)), 0o600);
    drop(running);
}

#[test]
fn a_lock_left_by_a_killed_writer_does_not_block_a_restart() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let shm = dir.path().join("tickguard");
    let lock = tickguard::shm::lock_path(&shm);
    let cfg = config(dir.path(), "c", &shm, "", NO_METRICS);
    let mut first = start(&cfg, &shm);
    let mode = std::fs::metadata(&lock).unwrap().mode() & 0o777;
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap(),
        format!("{}\n", first.child.id())
    );
    let second = start(&cfg, &shm);
    drop(second);
    if !root("act as another user") {
        return;
    }
    std::fs::write(&lock, "1\n").unwrap();
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o644)).unwrap();
    let as_nobody = |lock: &Path| {
        let mut c = Command::new("setpriv");
        c.args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .args(["flock", "--exclusive", "--nonblock"])
            .arg(lock)
            .args(["sleep", "30"])
            // (Its error in English: the text is matched.)
            .env("LC_ALL", "C")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    };
    let holder = Running {
        child: as_nobody(&lock).spawn().unwrap(),
    };
    // Wait until uid 65534 holds it.
    let deadline = Instant::now() + Duration::from_secs(5);
    while tickguard::sys::file::try_lock_exclusive(&std::fs::File::open(&lock).unwrap()).unwrap() {
        assert!(Instant::now() < deadline, "uid 65534 never took the lock");
        std::thread::sleep(Duration::from_millis(10));
    }
    let third = start(&cfg, &shm);
    assert_eq!(mode, 0o600, "the lock file a writer made");
    assert_eq!(std::fs::metadata(&lock).unwrap().mode() & 0o777, 0o600);
    // Nor can uid 65534 open the new one.
    let out = as_nobody(&lock).output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(third);
    drop(holder);
}

/// The service runs as its own user (uid 65534 here) and an operator
/// starts a second `run` as root on its path by mistake: it is told the
/// path is in use, by which pid of which user, not to remove the live
/// writer's lock, and the service's lock and publication stay. A
/// publication the service cannot read (root's, mode 0600) is named as
/// root's, not as something other than a publication.
#[test]
fn a_second_run_as_another_user_is_told_who_writes_the_path() {
    if !root("act as another user") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).unwrap();
    let shm = dir.path().join("tickguard");
    let lock = tickguard::shm::lock_path(&shm);
    let cfg = config(dir.path(), "c", &shm, "", NO_METRICS);
    let as_nobody = |cfg: &Path| {
        let mut c = Command::new("setpriv");
        c.args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .arg(bin())
            .args(["run", "--config"])
            .arg(cfg);
        c
    };
    let service = Running {
        child: as_nobody(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    };
    let pid = service.child.id();
    // Up once its lock names it and its publication is at the path.
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(&lock).ok() != Some(format!("{pid}\n")) || !shm.exists() {
        assert!(Instant::now() < deadline, "the service did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    let inode = std::fs::metadata(&shm).unwrap().ino();
    let err = refused_run(&cfg);
    assert!(
        err.contains(&format!("in use by another writer, pid {pid} of uid 65534"))
            && !err.contains("remove it"),
        "{err}"
    );
    assert_eq!(std::fs::metadata(&lock).unwrap().uid(), 65534);
    assert_eq!(std::fs::metadata(&shm).unwrap().ino(), inode);
    drop(service);

    // A publication of root's at the path, unreadable by the service.
    let other = dir.path().join("roots");
    std::fs::write(&other, b"TKGUARD1").unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o600)).unwrap();
    let cfg = config(dir.path(), "roots", &other, "", NO_METRICS);
    let err = refused(&mut as_nobody(&cfg));
    assert!(
        err.contains("is owned by uid 0, not this user (uid 65534)"),
        "{err}"
    );
}

/// `truncate -s 0` on a live publication, as its owner (then cut inside
/// its last page, written over by another file's bytes or an earlier copy
/// of its own, cut past its header): the writer
/// survives, publishes a new file in its place within a heartbeat or so,
/// and carries on; a reader that mapped the old file answers `stale`
/// (with the SIGBUS guard installed, as `check` and `stat` do) until it
/// refreshes onto the new one; SIGTERM still ends it cleanly.
#[test]
fn a_writer_survives_its_publication_truncated_and_recreates_it() {
    tickguard::sys::guard::install().unwrap();
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let cfg = config(dir.path(), "c", &shm, "", NO_METRICS);
    let mut running = start(&cfg, &shm);
    let pid = Some(running.child.id() as u64);
    quote(&cfg, "EURUSD");
    wait_ok(&shm, "EURUSD");
    let mut reader = crate::common::live_reader(&shm);
    let eurusd = reader.lookup("lp1", "EURUSD").unwrap();
    assert!(reader.check(&eurusd, now_ns()).is_ok());
    let (inode, bytes) = snapshot(&shm);
    truncate(&shm, "0");
    let v = reader.check(&eurusd, now_ns());
    assert!(
        !v.is_ok() && v.reasons.contains(tickguard::verdict::Reasons::STALE),
        "{v:?}"
    );
    wait_replaced(&shm, inode, &mut running.child, "no new publication");
    assert!(
        running.child.try_wait().unwrap().is_none(),
        "the writer died"
    );
    assert_eq!(std::fs::metadata(&shm).unwrap().len(), bytes.len() as u64);
    assert!(reader.refresh());
    assert!(reader.health(now_ns()).is_ok() && reader.writer_pid() == pid);
    // The state started over: the symbol is back with its next quote.
    quote(&cfg, "EURUSD");
    wait_ok(&shm, "EURUSD");
    // Cut inside the last page: nothing faults, the length read back finds
    // it (within LENGTH_EVERY heartbeats) and the file is replaced again;
    // the old one, whose header is whole, is closed, not left to age
    // (readers of it would answer `ok` until then).
    cut_and_see_closed(&shm, &mut running.child, "-1", "inside the last page");
    quote(&cfg, "EURUSD");
    wait_ok(&shm, "EURUSD");
    // Written over in place with the first file's bytes (another start
    // time, another directory): same inode, same length, found by its
    // header and replaced.
    let (inode, _) = snapshot(&shm);
    write_over(&shm, &bytes);
    wait_replaced(
        &shm,
        inode,
        &mut running.child,
        "a file written over in place went unseen",
    );
    quote(&cfg, "EURUSD");
    wait_ok(&shm, "EURUSD");
    // Written over with an earlier copy of this very file (its identity,
    // its directory): only the heartbeat read back differs, and a quiet
    // symbol would show the copy's price under the fresh heartbeat.
    let (inode, own) = snapshot(&shm);
    std::thread::sleep(Duration::from_millis(20));
    write_over(&shm, &own);
    wait_replaced(
        &shm,
        inode,
        &mut running.child,
        "an earlier copy of the writer's own file went unseen",
    );
    quote(&cfg, "EURUSD");
    wait_ok(&shm, "EURUSD");
    // Cut past its header's page: the writer's mapping faults into the
    // guard's zeros, and its close still reaches the file, through the
    // descriptor: a reader of the old file, which touches no lost page,
    // answers closed at once, not from frozen slots until they age.
    cut_and_see_closed(&shm, &mut running.child, "4096", "past the header");
    assert!(crate::common::terminate(&mut running.child).success());
    assert_eq!(
        crate::common::live_reader(&shm).health(now_ns()),
        tickguard::Health::WriterClosed
    );
}

/// A publication written over in place with an earlier copy of its own
/// (whose quiet symbols would show the copy's prices under the writer's
/// fresh heartbeat) while no new one can be made (the service, uid 65534
/// here, may no longer create files in its directory): it is closed, and
/// its readers answer `stale` (writer closed) rather than `ok` on the
/// copy; once the directory lets it, a new one is published.
#[test]
fn a_publication_written_over_that_cannot_be_recreated_is_closed() {
    if !root("act as another user") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let mode =
        |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    let dir = scratch();
    mode(dir.path(), 0o755);
    std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).unwrap();
    let shm = dir.path().join("tickguard");
    let cfg = config(dir.path(), "c", &shm, "", NO_METRICS);
    // A copy of the program in a directory uid 65534 may enter (the
    // checkout's may be one it cannot, under /root).
    let tools = tempfile::tempdir().unwrap();
    mode(tools.path(), 0o755);
    let program = tools.path().join("tickguard");
    std::fs::copy(bin(), &program).unwrap();
    mode(&program, 0o755);
    let mut service = Running {
        child: Command::new("setpriv")
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .arg(&program)
            .args(["run", "--config"])
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    };
    let options = tickguard::reader::ReaderOptions {
        owner: Some(65534),
        ..Default::default()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let (reader, eurusd) = loop {
        if shm.exists() {
            quote(&cfg, "EURUSD");
            let reader = Reader::open_with(&shm, options);
            if let Some(h) = reader.lookup("lp1", "EURUSD") {
                if reader.check(&h, now_ns()).is_ok() {
                    break (reader, h);
                }
            }
        }
        assert!(Instant::now() < deadline, "the service never answered ok");
        if let Some(status) = service.child.try_wait().unwrap() {
            panic!("the service ended before it answered ok: {status}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (inode, copy) = snapshot(&shm);
    std::thread::sleep(Duration::from_millis(20));
    mode(dir.path(), 0o555);
    write_over(&shm, &copy);
    let deadline = Instant::now() + Duration::from_secs(5);
    while reader.health(now_ns()) != tickguard::Health::WriterClosed {
        assert!(
            Instant::now() < deadline,
            "the copy is still served: {}",
            reader.health(now_ns())
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!reader.check(&eurusd, now_ns()).is_ok());
    // Written over again while the next try (a second after the failed
    // one) waits: closed again at once, not left running on the copy
    // under the writer's heartbeat until that try.
    write_over(&shm, &copy);
    let written = Instant::now();
    wait_closed(
        &reader,
        written,
        Duration::from_millis(500),
        "the copy written over again is served until the next try",
    );
    mode(dir.path(), 0o755);
    wait_replaced(
        &shm,
        inode,
        &mut service.child,
        "not recreated once it could be",
    );
    // Cut inside its last page (nothing faults; the length read back
    // finds it) while no new one can be made, then a copy written back
    // over it whole: closed at once again, not served until the next try.
    let reader = answering_ok(&shm, &cfg, options);
    let (_, copy) = snapshot(&shm);
    mode(dir.path(), 0o555);
    truncate(&shm, "-1");
    let deadline = Instant::now() + Duration::from_secs(5);
    while reader.health(now_ns()) != tickguard::Health::WriterClosed {
        assert!(Instant::now() < deadline, "the cut went unseen");
        std::thread::sleep(Duration::from_millis(5));
    }
    write_over(&shm, &copy);
    let written = Instant::now();
    wait_closed(
        &reader,
        written,
        Duration::from_millis(500),
        "a copy written back over the cut file is served until the next try",
    );
    mode(dir.path(), 0o755);
    // Renamed while no new one can be made (the renamed file still the
    // writer's, open), then cut by pages while the next try waits: closed
    // at once through the descriptor, not read frozen until that try or
    // the heartbeat's age.
    let (inode, _) = snapshot(&shm);
    wait_replaced(
        &shm,
        inode,
        &mut service.child,
        "not recreated after the cut",
    );
    let reader = answering_ok(&shm, &cfg, options);
    let (_, copy) = snapshot(&shm);
    mode(dir.path(), 0o555);
    let old = dir.path().join("tickguard.old");
    std::fs::rename(&shm, &old).unwrap();
    // A reader that waits a minute for a silent writer: only a close tells
    // it the file is no longer the writer's.
    let patient = Reader::open_with(
        &old,
        tickguard::reader::ReaderOptions {
            dead_after_ns: 60_000_000_000,
            ..options
        },
    );
    // The move found (within about 0.1 s) and its recreation failed; the
    // renamed file still the writer's, beating.
    std::thread::sleep(Duration::from_millis(150));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !reader.health(now_ns()).is_ok() {
        assert!(Instant::now() < deadline, "{}", reader.health(now_ns()));
        std::thread::sleep(Duration::from_millis(5));
    }
    truncate(&old, "-8192");
    let cut = Instant::now();
    wait_closed(
        &reader,
        cut,
        Duration::from_millis(500),
        "a file cut while the next try waits is served frozen",
    );
    // A copy written back over the cut file (its length and a running
    // header again, which the writer's zeroed mapping cannot see): closed
    // again by the next try, within about a second.
    write_over(&old, &copy);
    let written = Instant::now();
    wait_closed(
        &patient,
        written,
        Duration::from_millis(2_500),
        "a copy written back over a cut file is served",
    );
    mode(dir.path(), 0o755);
}

/// A reader of `shm` (of `options`) once EURUSD, quoted on `cfg`'s lines
/// meanwhile, answers `ok` there (within 20 s).
fn answering_ok(shm: &Path, cfg: &Path, options: tickguard::reader::ReaderOptions) -> Reader {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        quote(cfg, "EURUSD");
        let reader = Reader::open_with(shm, options);
        if let Some(h) = reader.lookup("lp1", "EURUSD") {
            if reader.check(&h, now_ns()).is_ok() {
                return reader;
            }
        }
        assert!(Instant::now() < deadline, "the new file never answered ok");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `reader` answers `stale`, writer closed, failing with
/// `served` once `within` has passed since `since`.
fn wait_closed(reader: &Reader, since: Instant, within: Duration, served: &str) {
    while reader.health(now_ns()) != tickguard::Health::WriterClosed {
        assert!(
            since.elapsed() < within,
            "{served}: {}",
            reader.health(now_ns())
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A publication removed, then one renamed, under a live writer: within
/// about 0.1 s (the length check's period) a new one stands at the path,
/// once, the writer alive, and answers again once quoted; a reader of the
/// old file answers `stale` at once (closed) and refreshes onto it.
/// Removed with its lock file, it is published again under the lock taken
/// again, unless another writer took that lock meanwhile.
#[test]
fn a_publication_removed_or_renamed_is_published_again_at_its_path() {
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let cfg = config(dir.path(), "c", &shm, "", NO_METRICS);
    let mut running = start(&cfg, &shm);
    let pid = Some(running.child.id() as u64);
    quote(&cfg, "EURUSD");
    wait_ok(&shm, "EURUSD");
    let mut reader = crate::common::live_reader(&shm);
    let elsewhere = dir.path().join("moved-away");
    let moves: [(&str, &dyn Fn()); 2] = [
        ("removed", &|| std::fs::remove_file(&shm).unwrap()),
        ("renamed", &|| std::fs::rename(&shm, &elsewhere).unwrap()),
    ];
    for (how, make) in moves {
        let (inode, _) = snapshot(&shm);
        make();
        wait_replaced(&shm, inode, &mut running.child, how);
        let eurusd = reader.lookup("lp1", "EURUSD").unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while reader.check(&eurusd, now_ns()).is_ok() {
            assert!(
                Instant::now() < deadline,
                "{how}: the old file still answers ok"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // Closed, not left to age.
        assert_eq!(
            reader.health(now_ns()),
            tickguard::Health::WriterClosed,
            "{how}"
        );
        // Published once: the new file stays while the writer runs half a
        // second more (five of its checks of the path, 0.1 s apart; its
        // heartbeat says it ran, where a sleep here would not).
        let (new, _) = snapshot(&shm);
        let fresh = crate::common::live_reader(&shm);
        let since = fresh.heartbeat_ns().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while fresh.heartbeat_ns().unwrap() < since + 500_000_000 {
            assert!(
                Instant::now() < deadline,
                "{how}: the writer stopped beating"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(snapshot(&shm).0, new, "{how}: published again");
        assert!(reader.refresh(), "{how}");
        assert!(
            reader.health(now_ns()).is_ok() && reader.writer_pid() == pid,
            "{how}"
        );
        quote(&cfg, "EURUSD");
        wait_ok(&shm, "EURUSD");
    }
    // The lock file removed too, no one taking it meanwhile: the writer
    // takes the lock again and publishes again.
    let lock = tickguard::shm::lock_path(&shm);
    let (inode, _) = snapshot(&shm);
    std::fs::remove_file(&lock).unwrap();
    std::fs::remove_file(&shm).unwrap();
    wait_replaced(&shm, inode, &mut running.child, "not published again");
    let writer = running.child.id();
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap(),
        format!("{writer}\n")
    );
    // Removed again, and another writer took the lock meanwhile: the first
    // must not take the path from it.
    std::fs::remove_file(&lock).unwrap();
    let other = tickguard::shm::WriterLock::acquire(&shm).unwrap();
    std::fs::remove_file(&shm).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(!shm.exists(), "published on another writer's path");
    assert!(
        running.child.try_wait().unwrap().is_none(),
        "the first writer died"
    );
    drop(other);
    drop(running);
}

/// `truncate -s SIZE shm` (a size, or `-N` to cut N bytes).
fn truncate(shm: &Path, size: &str) {
    let out = Command::new("truncate")
        .args(["-s", size])
        .arg(shm)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// Truncates the live publication at `shm` to `size` (as `truncate -s`):
/// the writer `child` publishes a new file, and a reader of the old one
/// (`place`: where the cut fell, for the failure) answers `stale`, writer closed,
/// within a second, its EURUSD no longer `ok`.
fn cut_and_see_closed(shm: &Path, child: &mut Child, size: &str, place: &str) {
    let (inode, _) = snapshot(shm);
    let old = crate::common::live_reader(shm);
    let eurusd = old.lookup("lp1", "EURUSD").unwrap();
    truncate(shm, size);
    wait_replaced(shm, inode, child, &format!("a cut {place} went unseen"));
    let deadline = Instant::now() + Duration::from_secs(1);
    while old.health(now_ns()) != tickguard::Health::WriterClosed {
        assert!(
            Instant::now() < deadline,
            "{place}: {:?}",
            old.health(now_ns())
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(!old.check(&eurusd, now_ns()).is_ok());
}

/// Writes `bytes` over the file at `shm` in place (same inode, same
/// length), as `dd conv=notrunc` would.
fn write_over(shm: &Path, bytes: &[u8]) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(shm)
        .unwrap()
        .write_all_at(bytes, 0)
        .unwrap();
}

/// Waits until a file with another inode than `inode` stands at `shm`
/// (the writer `child` published a new one), failing with `unseen` after
/// 5 s or as soon as the writer dies.
fn wait_replaced(shm: &Path, inode: u64, child: &mut Child, unseen: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::metadata(shm).map_or(true, |m| m.ino() == inode) {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the writer died: {status}");
        }
        assert!(Instant::now() < deadline, "{unseen}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A reader whose file is truncated under it (no writer left to restore
/// it) answers `stale` instead of dying of SIGBUS, once the guard is
/// installed.
#[test]
fn a_reader_answers_stale_when_its_publication_is_truncated() {
    tickguard::sys::guard::install().unwrap();
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let p = ready_publication(dir.path(), &shm);
    p.heartbeat(now_ns());
    let reader = crate::common::live_reader(&shm);
    assert!(reader.health(now_ns()).is_ok());
    assert!(reader.guarded());
    assert!(!crate::common::live_reader(dir.path().join("none")).guarded());
    std::fs::OpenOptions::new()
        .write(true)
        .open(&shm)
        .unwrap()
        .set_len(0)
        .unwrap();
    let v = reader.check_symbol("lp1", "EURUSD", now_ns());
    assert_eq!(v.reasons, tickguard::verdict::Reasons::STALE);
    // Zeros: a state word the writer never stores, not a writer's close.
    assert_eq!(v.health, tickguard::Health::BadState(0));
    assert!(v.health.is_unusable());
    assert!(reader.records().is_empty() && reader.counters(0).is_some());
    // The writer's own mapping was not touched: it faults on its next probe.
    assert!(!p.lost());
    p.probe();
    assert!(p.lost());
}

/// A header whose capacity or feed count disagrees with its `file_len`
/// (forged or corrupt) is refused saying so, with the size they make; a
/// file shorter than a consistent header's length is refused as
/// truncated.
#[test]
fn a_forged_or_truncated_header_is_named_as_such() {
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let p = ready_publication(dir.path(), &shm);
    let real = std::fs::read(&shm).unwrap();
    let word = |b: &[u8], i: usize| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().unwrap());
    let (capacity, file_len) = (word(&real, 7), word(&real, 13));
    drop(p);
    let health = |bytes: &[u8]| {
        let path = dir.path().join("forged");
        let _ = std::fs::remove_file(&path);
        std::fs::write(&path, bytes).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o640))
            .unwrap();
        crate::common::live_reader(&path)
            .health(now_ns())
            .to_string()
    };
    let mut forged = real.clone();
    forged[56..64].copy_from_slice(&(capacity * 2).to_le_bytes());
    let h = health(&forged);
    assert!(
        h.contains(&format!(
            "header inconsistent: capacity {} and 1 feeds make",
            capacity * 2
        )) && h.contains(&format!("its file_len says {file_len}")),
        "{h}"
    );
    let h = health(&real[..real.len() / 2]);
    assert!(
        h.contains(&format!(
            "{} bytes, header says {file_len} (truncated)",
            real.len() / 2
        )),
        "{h}"
    );
}

/// `run --config cfg --record to`, refused: its one line.
fn recording_refused(cfg: &Path, to: &Path) -> String {
    refused(
        Command::new(bin())
            .args(["run", "--config"])
            .arg(cfg)
            .arg("--record")
            .arg(to),
    )
}

/// In `dir`: a configuration of one MDP3 feed `cme` publishing at `shm`
/// whose `definitions` is a copy of the fixtures' (beside it), that copy,
/// and the fixture.
fn cme_with_definitions(dir: &Path, shm: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let defs = dir.join("defs.pcap");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/mdp3/defs.pcap");
    std::fs::copy(&fixture, &defs).unwrap();
    let cfg = dir.join("cme.toml");
    std::fs::write(
        &cfg,
        format!(
            "[sidecar]\nshm_path = \"{}\"\nidle = \"sleep\"\nidle_sleep_us = 100\n[metrics]\n{NO_METRICS}\n[[feed]]\nname = \"cme\"\nprotocol = \"mdp3\"\nlines = [\"127.0.0.1:{}\"]\ndefinitions = \"defs.pcap\"\nstale_threshold_ms = 2500\nsource_threshold_ms = 2500\n",
            shm.display(),
            crate::common::free_port()
        ),
    )
    .unwrap();
    (cfg, defs, fixture)
}

/// A feed's file read at start (an MDP3 `definitions` capture) gone when
/// the publication must be recreated: the sidecar stops as at start (exit
/// 2), the new publication closed (readers answer `stale`), rather than go
/// on with the channel's instruments unnamed and out of their groups.
#[test]
fn a_definitions_file_gone_when_the_publication_is_recreated_stops_the_sidecar() {
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let (cfg, defs, _) = cme_with_definitions(dir.path(), &shm);
    let mut running = start(&cfg, &shm);
    std::fs::rename(&defs, dir.path().join("defs.moved")).unwrap();
    truncate(&shm, "0");
    let status = crate::common::wait_at_most(&mut running.child, Duration::from_secs(10));
    assert_eq!(status.code(), Some(2));
    assert_eq!(
        crate::common::live_reader(&shm).health(now_ns()),
        tickguard::Health::WriterClosed
    );
}

/// `run --record` onto a file the configuration reads (an MDP3 feed's
/// `definitions`, a capture itself, so not refused as other data is):
/// refused at start, in one line naming it, the file untouched; the
/// configuration itself likewise, by another name (a link).
#[test]
fn a_recording_over_the_configurations_own_files_is_refused() {
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let (cfg, defs, fixture) = cme_with_definitions(dir.path(), &shm);
    let record_to = |to: &Path| recording_refused(&cfg, to);
    let err = record_to(&defs);
    assert!(
        err.contains("is feed cme's file") && err.contains("defs.pcap"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&defs).unwrap(),
        std::fs::read(&fixture).unwrap()
    );
    let link = dir.path().join("tap.pcap");
    std::os::unix::fs::symlink(&cfg, &link).unwrap();
    let err = record_to(&link);
    assert!(err.contains("is the configuration"), "{err}");
    assert!(!shm.exists(), "published before the recording was refused");
    // The publication's own path and its lock's, before either exists
    // (by another spelling too): refused, nothing left there.
    let lock = dir.path().join("tickguard.lock");
    let dotted = dir.path().join(".").join("tickguard");
    let linked = dir.path().join("rec.pcap");
    std::os::unix::fs::symlink(&shm, &linked).unwrap();
    for to in [&shm, &lock, &dotted, &linked] {
        let err = record_to(to);
        assert!(err.contains("is the publication's path"), "{err}");
        assert!(!shm.exists() && !lock.exists(), "left at {}", to.display());
    }
}

/// `run --record` writes only where writes never wait: a named FIFO
/// (whose writes wait for a reader, and whose open, on the receive thread
/// at start, waits for one) is refused at start,
/// with or without a reader, in one line, and nothing is published; so
/// are a terminal, a socket and other devices, not /dev/null.
#[test]
fn a_recording_into_a_fifo_is_refused_at_start() {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let cfg = config(dir.path(), "c", &shm, "", NO_METRICS);
    let fifo = dir.path().join("tap.pcap");
    let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let record_to = |to: &Path| recording_refused(&cfg, to);
    // No reader: the open would wait for one.
    let err = record_to(&fifo);
    assert!(err.contains("not a regular file"), "{err}");
    assert!(err.contains("tap.pcap"), "{err}");
    // A reader that never reads: the writes would wait once its pipe filled.
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    let err = record_to(&fifo);
    assert!(err.contains("not a regular file"), "{err}");
    drop(reader);
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    assert!(!shm.exists(), "published before the recording was opened");
    // A terminal, a socket or another device is refused too; /dev/null and
    // /dev/full (which never wait) are not.
    for refused in ["/dev/tty", "/dev/zero", "/dev/log"] {
        if Path::new(refused).exists() {
            let err = record_to(Path::new(refused));
            assert!(err.contains("not a regular file"), "{refused}: {err}");
        }
    }
    // A file that holds something else (the configuration itself, or
    // another one) is not replaced.
    let before = std::fs::read(&cfg).unwrap();
    let err = record_to(&cfg);
    assert!(err.contains("is the configuration: refusing"), "{err}");
    assert_eq!(std::fs::read(&cfg).unwrap(), before);
    let other = config(dir.path(), "other", &shm, "", NO_METRICS);
    let before = std::fs::read(&other).unwrap();
    let err = record_to(&other);
    assert!(err.contains("refusing to replace it"), "{err}");
    assert_eq!(std::fs::read(&other).unwrap(), before);
    // A regular file is created, then emptied when it held a capture.
    let file = dir.path().join("tap2.pcap");
    let mut old = vec![0xd4, 0xc3, 0xb2, 0xa1];
    old.resize(100, b'x');
    std::fs::write(&file, old).unwrap();
    let mut sidecar =
        tickguard::sidecar::Sidecar::prepare(&tickguard::config::Config::load(&cfg).unwrap())
            .unwrap();
    sidecar.record(Path::new("/dev/null"), None).unwrap();
    sidecar.record(&file, None).unwrap();
    // The recording's thread writes the header out at once.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::fs::metadata(&file).unwrap().len() < 24 {
        assert!(std::time::Instant::now() < deadline, "no header written");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // A second instance (its own publication) started on the same
    // recording while this one writes it: refused, the file untouched
    // (emptied under the first, the first's recording would have a hole).
    let second = config(
        dir.path(),
        "second",
        &dir.path().join("shm2"),
        "",
        NO_METRICS,
    );
    let err = recording_refused(&second, &file);
    assert!(err.contains("being written by another process"), "{err}");
    assert!(err.contains("tap2.pcap"), "{err}");
    assert_eq!(
        std::fs::read(&file).unwrap()[..4],
        [0x4d, 0x3c, 0xb2, 0xa1],
        "the header, left as it was"
    );
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 24);
    drop(sidecar);
    // The pcap header alone: nothing of the old bytes after it.
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 24);
}

/// `[sidecar] cpu` naming a CPU the receiver cannot be pinned to (here
/// 1023, within the key's range) is refused at start in one line naming
/// the CPUs online, before anything is published: the receiver would run
/// unpinned. One it can be pinned to starts.
#[test]
fn a_cpu_the_receiver_cannot_be_pinned_to_is_refused_at_start() {
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let cfg = config(dir.path(), "c", &shm, "cpu = 1023", NO_METRICS);
    let err = refused_run(&cfg);
    assert!(
        err.contains("[sidecar] cpu = 1023: the receiver cannot be pinned there ("),
        "{err}"
    );
    assert!(err.contains("CPUs online: "), "{err}");
    assert!(!shm.exists());
    // A CPU this test runs on can be pinned to.
    // SAFETY: cpu_set_t is plain data, filled by sched_getaffinity.
    let mine = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0
        );
        (0..libc::CPU_SETSIZE as usize)
            .find(|&c| libc::CPU_ISSET(c, &set))
            .unwrap()
    };
    let cfg = config(dir.path(), "c", &shm, &format!("cpu = {mine}"), NO_METRICS);
    drop(start(&cfg, &shm));
}

/// A re-request channel listening on a line's port (on 0.0.0.0 here) is a
/// configuration a replay routes (the line's address first), but live the
/// two sockets cannot both bind it: `run` says so in one line, naming
/// both, before anything is published.
#[test]
fn a_channel_on_a_lines_port_is_refused_live_in_plain_words() {
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let (line, server) = (crate::common::free_port(), crate::common::free_port());
    let cfg = dir.path().join("itch.toml");
    std::fs::write(
        &cfg,
        format!(
            "[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{}\"\n\
             [[feed]]\nname = \"nasdaq\"\nprotocol = \"itch50\"\nlines = [\"127.0.0.1:{line}\"]\n\
             stale_threshold_ms = 60000\nsource_threshold_ms = 60000\nmax_symbols = 1000\n\
             recovery = \"127.0.0.1:{server}\"\nrecovery_listen = \"0.0.0.0:{line}\"\n",
            shm.display()
        ),
    )
    .unwrap();
    tickguard::config::Config::load(&cfg).expect("a valid configuration");
    let err = refused_run(&cfg);
    assert!(
        err.contains(&format!(
            "feed 'nasdaq': recovery_listen 0.0.0.0:{line} takes the port of feed 'nasdaq' line 127.0.0.1:{line}"
        )),
        "{err}"
    );
    assert!(!shm.exists());
}

/// SIGUSR1 from the start on is an operator's request, never the end of
/// `run`; SIGHUP (the terminal or ssh session closing) stops it as SIGTERM
/// does: exit 0, the publication closed, no lock or staging file left;
/// unless SIGHUP was ignored when it started (`nohup`).
#[test]
fn sigusr1_during_the_start_is_harmless_and_sighup_stops_cleanly() {
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let cfg = config(dir.path(), "c", &shm, "", NO_METRICS);
    // Started with SIGHUP as it would be (this runner's own may be
    // ignored); `hup` what SIGHUP is set to before the exec.
    let spawn = |hup: libc::sighandler_t| {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(bin());
        cmd.args(["run", "--config"])
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: signal(2) is async-signal-safe; it sets the child's own
        // disposition between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                libc::signal(libc::SIGHUP, hup);
                Ok(())
            });
        }
        Running {
            child: cmd.spawn().unwrap(),
        }
    };
    // Under nohup, SIGHUP stays ignored.
    let mut nohup = spawn(libc::SIG_IGN);
    let up = |r: &mut Running| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let reader = crate::common::live_reader(&shm);
            if reader.health(now_ns()).is_ok() && reader.writer_pid() == Some(r.child.id() as u64) {
                return;
            }
            assert!(r.child.try_wait().unwrap().is_none(), "ended");
            assert!(Instant::now() < deadline, "not up");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    up(&mut nohup);
    // SAFETY: kill(2) with a child's pid and a signal number.
    assert_eq!(
        unsafe { libc::kill(nohup.child.id() as i32, libc::SIGHUP) },
        0
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        nohup.child.try_wait().unwrap().is_none(),
        "nohup: SIGHUP ended it"
    );
    drop(nohup);
    let _ = std::fs::remove_file(tickguard::shm::lock_path(&shm));

    let mut running = spawn(libc::SIG_DFL);
    let child = &mut running.child;
    let pid = child.id() as i32;
    let lock = tickguard::shm::lock_path(&shm);
    let deadline = Instant::now() + Duration::from_secs(20);
    // The lock is taken after the handlers are installed: from then on,
    // through the rest of the start, SIGUSR1 keeps coming.
    while !lock.exists() {
        assert!(child.try_wait().unwrap().is_none(), "ended before its lock");
        assert!(Instant::now() < deadline, "no lock file");
        std::thread::sleep(Duration::from_micros(200));
    }
    loop {
        // SAFETY: kill(2) with a child's pid and a signal number.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGUSR1) }, 0);
        let reader = crate::common::live_reader(&shm);
        if reader.health(now_ns()).is_ok() && reader.writer_pid() == Some(pid as u64) {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "SIGUSR1 ended the start"
        );
        assert!(Instant::now() < deadline, "not up");
        std::thread::sleep(Duration::from_micros(500));
    }
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "no exit after SIGHUP");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(status.success(), "{status:?}");
    assert_eq!(
        crate::common::live_reader(&shm).health(now_ns()),
        tickguard::Health::WriterClosed
    );
    assert!(!lock.exists());
    let left: Vec<_> = names(dir.path())
        .into_iter()
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A clock stepped back to before the writer's start time: readers take a
/// start time ahead of their clock for a forged file (`writer_ahead`,
/// `stale`) however alive the writer, so the writer finds it at its
/// heartbeat and recreates the file, whose start time is then now.
#[test]
fn a_clock_stepped_back_before_the_start_time_has_the_file_recreated() {
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let p = ready_publication(dir.path(), &shm);
    let start = now_ns();
    // Within what readers allow: nothing to do.
    p.heartbeat(start - 50_000_000);
    assert!(!p.lost() && !p.behind_start());
    // A second before it: readers would answer stale until the clock
    // caught up with the start time.
    let back = start - 1_000_000_000;
    p.heartbeat(back);
    assert!(p.behind_start() && p.lost());
    let reader = crate::common::live_reader(&shm);
    assert!(matches!(
        reader.health(back),
        tickguard::Health::WriterAhead { .. }
    ));
    // What the writer carries on is written before the new file is
    // published: no reader ever sees it at zero.
    let (inode, _) = snapshot(&shm);
    let q = p
        .recreate(back, p.lock(), |q| {
            assert_eq!(snapshot(&shm).0, inode, "published before carrying");
            q.write_counters(|| q.set_counter(0, tickguard::shm::counter::LINE_PACKETS, 9));
        })
        .unwrap();
    assert_ne!(snapshot(&shm).0, inode);
    q.ready();
    q.heartbeat(back);
    assert!(!q.lost());
    let reader = crate::common::live_reader(&shm);
    assert!(reader.health(back).is_ok());
    assert_eq!(
        reader.counter(0, tickguard::shm::counter::LINE_PACKETS),
        Some(9)
    );
}

/// A stop asked for while `run` starts (here while it reads a large MDP3
/// `definitions` file) ends it before anything visible is done: exit 0,
/// no "sidecar ready", the publication already at the path (another
/// writer's, stopped) left as it was, and `--record` not emptied.
#[test]
fn a_stop_while_starting_publishes_nothing() {
    use tickguard::capture::link::Link;
    use tickguard::capture::write::{CaptureWriter, Format};
    use tickguard::protocol::mdp3::encode::{self, FeedType, Instrument, Shape};
    let dir = scratch();
    let shm = dir.path().join("shm");
    // The file a writer before left at the path: it must stay.
    let before = ready_publication(dir.path(), &shm);
    before.close();
    drop(before);
    let (_, old) = snapshot(&shm);
    // Definitions enough to keep the start busy for a while (the same
    // hundred instruments defined over and over).
    let defs = dir.path().join("defs.pcap");
    let file = std::io::BufWriter::new(std::fs::File::create(&defs).unwrap());
    let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::RawIp).unwrap();
    let (src, dst) = (
        "10.3.3.3:5000".parse().unwrap(),
        "10.1.1.1:9".parse().unwrap(),
    );
    let t = now_ns();
    let feeds = [FeedType {
        md_feed_type: "GBX",
        market_depth: 10,
    }];
    for k in 0..DEFINITIONS {
        let symbol = format!("ES{}", k % 100);
        let d = Instrument {
            match_event_indicator: 0x80,
            tot_num_reports: Some(100),
            security_update_action: b'A',
            trading_status: None,
            appl_id: 310,
            security_group: "ES",
            asset: "ES",
            symbol: &symbol,
            security_id: 1_000 + (k % 100) as i32,
            min_price_increment: Some(250_000_000),
            display_factor: 1_000_000_000,
        };
        let m = encode::definition(54, Shape::new(13), &d, 0, &feeds);
        w.write_udp(t, src, dst, &encode::packet(k as u32 + 1, t, &[m]))
            .unwrap();
    }
    w.finish().unwrap();
    let record = dir.path().join("rec.pcap");
    std::fs::write(&record, b"kept").unwrap();
    let config = dir.path().join("cme.toml");
    std::fs::write(
        &config,
        format!(
            "[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{}\"\n[[feed]]\nname = \"cme\"\n\
             protocol = \"mdp3\"\nlines = [\"127.0.0.1:{}\"]\nstale_threshold_ms = 1000\n\
             source_threshold_ms = 1000\ndefinitions = \"{}\"\n",
            shm.display(),
            crate::common::free_port(),
            defs.display()
        ),
    )
    .unwrap();
    let child = Command::new(bin())
        .args(["run", "--config"])
        .arg(&config)
        .arg("--record")
        .arg(&record)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The lock is taken first thing: the start is under way.
    let lock = dir.path().join("shm.lock");
    let deadline = Instant::now() + START_LIMIT;
    while !std::fs::read(&lock).is_ok_and(|b| b.starts_with(child.id().to_string().as_bytes())) {
        assert!(Instant::now() < deadline, "no lock");
        std::thread::sleep(Duration::from_millis(1));
    }
    crate::common::signal(child.id(), libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("stopped while starting"), "{stderr}");
    assert!(!stderr.contains("sidecar ready"), "{stderr}");
    assert_eq!(snapshot(&shm).1, old, "the publication at the path kept");
    assert_eq!(std::fs::read(&record).unwrap(), b"kept");
    // Neither the file it built nor its lock is left behind.
    assert_eq!(
        names(dir.path()),
        ["c.toml", "cme.toml", "defs.pcap", "rec.pcap", "shm"],
        "{stderr}"
    );
}

/// Definition packets in [`a_stop_while_starting_publishes_nothing`]'s
/// file: enough that reading them outlasts a signal's delivery.
const DEFINITIONS: usize = 200_000;
