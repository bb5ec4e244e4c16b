//! Shared by the integration tests: replaying what a sidecar recorded and
//! comparing it with what the sidecar published; checking that proptest
//! finds a module's recorded failures; a CME MDP3 channel ([`mdp3`]); an
//! ITCH feed with GLIMPSE snapshots publishing ([`glimpse`]); a child
//! process waited for with a deadline ([`Killed`], [`terminate`]).

pub mod glimpse;
pub mod mdp3;

use std::path::Path;
use tickguard::config::ProtocolSettings;
use tickguard::protocol::itch50::config::ItchConfig;
use tickguard::protocol::sqf::summary::FeedSummary;
use tickguard::state::Record;

/// Replays the recording `rec` with the configuration at `cfg` and returns
/// the summary of `feed`.
pub fn replay_recording(cfg: &Path, rec: &Path, feed: &str) -> FeedSummary {
    let config = tickguard::config::Config::load(cfg).unwrap();
    let mut capture = tickguard::capture::CaptureReader::open(rec).unwrap();
    let mut outcome = tickguard::replay::replay(&config, &mut capture, &[], |_| {});
    assert!(outcome.input_error.is_none());
    match outcome.summary.feeds.remove(feed) {
        Some(tickguard::replay::FeedSummary::Sqf(s)) => s,
        other => panic!("no SQF feed '{feed}' in the summary: {other:?}"),
    }
}

/// Every symbol the sidecar published has the state the replay rebuilt,
/// its price (bid, ask and source time) included.
pub fn assert_same_state(live: &[Record], replayed: &FeedSummary) {
    assert_eq!(live.len(), replayed.symbols.len());
    for r in live {
        let name = r.symbol.unwrap().to_string();
        let s = &replayed.symbols[&name];
        let st = &r.state;
        assert_eq!(
            (
                st.seq.last_seq,
                st.seq.ticks_lost,
                st.seq.duplicates,
                st.suspect,
                st.invalid,
                st.last_alive,
                st.price.map(|p| (p.bid, p.ask, p.source_time)),
            ),
            (
                s.last_seq,
                s.ticks_lost,
                s.duplicates,
                s.suspect,
                s.invalid,
                s.last_alive,
                s.bid
                    .zip(s.ask)
                    .zip(s.source_time)
                    .map(|((b, a), t)| (b, a, t)),
            ),
            "{name}"
        );
    }
}

/// Cases a model's property test runs: `default`, or `PROPTEST_CASES`
/// for a longer search (`tools/search-models`); never fewer than
/// `default` under `CI`, whatever the environment says.
pub fn cases(default: u32) -> u32 {
    let n = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    match std::env::var_os("CI") {
        Some(_) => n.max(default),
        None => n,
    }
}

/// Proptest finds every failure recorded in `recorded` (the text of the
/// module's file in `tests/proptest-regressions/`, where proptest looks for
/// the file of a source under `tests/it/`) for the module at `source`
/// (`file!()`), so that they run first every time.
pub fn assert_recorded_failures_found(recorded: &str, source: &'static str) {
    let recorded = recorded.lines().filter(|l| l.starts_with("cc ")).count();
    let found = proptest::test_runner::Config::default()
        .failure_persistence
        .expect("failures persisted by default")
        .load_persisted_failures2(Some(source))
        .len();
    assert!(recorded > 0);
    assert_eq!(found, recorded, "recorded failures found by proptest");
}

/// The settings of `feed`, an `itch50` feed.
pub fn itch(feed: &tickguard::config::FeedConfig) -> &ItchConfig {
    match &feed.settings {
        ProtocolSettings::Itch50(c) => c,
        _ => panic!("feed '{}' is not an itch50 feed", feed.name),
    }
}

/// A replay's stderr without its closing "replayed …" line (which carries
/// a wall time): the warnings and errors alone.
pub fn without_end_line(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|l| !l.starts_with("tickguard: replayed "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `tickguard run [extra] --config config`, logging at info level into
/// the file `log` (stdout discarded); killed when dropped.
pub fn run_logged(extra: &[&str], config: &std::path::Path, log: &std::path::Path) -> Killed {
    Killed(
        std::process::Command::new(env!("CARGO_BIN_EXE_tickguard"))
            .arg("run")
            .args(extra)
            .arg("--config")
            .arg(config)
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap(),
    )
}

/// A child process, killed (and reaped) if a test fails before it exits.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Killed {
    /// Waits, at most `deadline`, for the child to exit (piped stdout and
    /// stderr): its status, stdout and stderr.
    pub fn output(
        mut self,
        deadline: std::time::Duration,
    ) -> (std::process::ExitStatus, String, String) {
        use std::io::Read;
        let status = wait_at_most(&mut self.0, deadline);
        let (mut out, mut err) = (String::new(), String::new());
        self.0
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        self.0
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        (status, out, err)
    }
}

/// Says a test is skipped for want of `what` (root, a compiler, a tool),
/// or fails it under CI, whose machine has everything the tests need
/// (`.ci/run` installs it): a skip there would pass without testing.
pub fn skip(what: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must not skip this test: {what}"
    );
    note_skip(what);
}

/// Says a test is skipped for want of `what`: on stderr, and in the list
/// `tools/test` prints at its end (a line in the file `TICKGUARD_SKIP_LOG`
/// names, which it sets: nextest shows no passing test's output).
pub fn note_skip(what: &str) {
    use std::io::Write;
    eprintln!("skipped: {what}");
    let Some(log) = std::env::var_os("TICKGUARD_SKIP_LOG") else {
        return;
    };
    let test = std::thread::current().name().unwrap_or("?").to_string();
    // One short line, appended in one write: tests in other processes
    // append beside it.
    let line = format!("{test}: {what}\n");
    if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(log) {
        let _ = f.write_all(line.as_bytes());
    }
}

/// Sends signal `sig` to process `pid` (through libc: no `kill` program
/// needed); whether it was sent.
pub fn signal(pid: u32, sig: i32) -> bool {
    // SAFETY: kill(2) reads no memory of ours; a pid gone gives ESRCH.
    unsafe { libc::kill(pid as libc::pid_t, sig) == 0 }
}

/// Stops `child` as a service manager does (SIGTERM) and returns its exit
/// status, waited for [`STOP_WITHIN`] at most: a sidecar that no longer
/// stops on SIGTERM fails its test at once, killed, rather than holding
/// the run until the runner's own limit.
pub fn terminate(child: &mut std::process::Child) -> std::process::ExitStatus {
    assert!(
        signal(child.id(), libc::SIGTERM),
        "SIGTERM to {}",
        child.id()
    );
    wait_at_most(child, STOP_WITHIN)
}

/// How long a child may take to stop after SIGTERM.
pub const STOP_WITHIN: std::time::Duration = std::time::Duration::from_secs(20);

/// `child`'s exit status, waited for `limit` at most; past it the child
/// is killed and reaped, and the test fails.
pub fn wait_at_most(
    child: &mut std::process::Child,
    limit: std::time::Duration,
) -> std::process::ExitStatus {
    let start = std::time::Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child {} did not stop within {limit:?}", child.id());
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A UDP socket on a free loopback port, reads timing out after 5 ms, and its address.
pub fn socket() -> (std::net::UdpSocket, std::net::SocketAddrV4) {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_millis(5)))
        .unwrap();
    let std::net::SocketAddr::V4(a) = s.local_addr().unwrap() else {
        unreachable!()
    };
    (s, a)
}

/// Removes a test's publication and the writer's lock file beside it
/// (`<path>.lock`, which a writer leaves for the next one to take over):
/// tests that publish under /dev/shm leave nothing there.
pub fn remove_publication(path: impl AsRef<Path>) {
    let path = path.as_ref();
    let _ = std::fs::remove_file(path);
    let mut lock = path.as_os_str().to_owned();
    lock.push(".lock");
    let _ = std::fs::remove_file(lock);
}

/// Runs `cmd` with its standard output a pipe whose reader left at once
/// (as `| head` does); its exit code and standard error.
pub fn with_reader_gone(cmd: &mut std::process::Command) -> (Option<i32>, String) {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8(out.stderr).unwrap())
}

/// Checks that every test a coverage table (`table`, from the root) names
/// exists and runs: `file::test` cells, a bare `.rs` name (or one under a
/// folder of it, `snapshot/tests.rs`) a file of the protocol's folder
/// `crates/engine/src/protocol/<protocol>/`, one starting `integration` an
/// integration test of `tests/it/`, any other a path from the root.
/// Returns how many cells it checked.
pub fn coverage_table_tests(table: &str, protocol: &str, integration: &str) -> usize {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let folder = root.join("crates/engine/src/protocol").join(protocol);
    let table = std::fs::read_to_string(root.join(table)).unwrap();
    let mut named = 0;
    for cell in table.split('`').skip(1).step_by(2) {
        let Some((file, test)) = cell.split_once(".rs::") else {
            continue;
        };
        let file = format!("{file}.rs");
        let path = if file.starts_with(integration) {
            root.join("tests/it").join(&file)
        } else if folder.join(&file).is_file() {
            folder.join(&file)
        } else {
            root.join(&file)
        };
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{cell}: {e}"));
        let at = text
            .find(&format!("fn {test}("))
            .unwrap_or_else(|| panic!("{cell}: no such test"));
        // A test, run: its attributes (above it, past its doc comment)
        // say `#[test]` and not `#[ignore]`; a helper of that name is no test.
        let line_start = text[..at].rfind('\n').map_or(0, |n| n + 1);
        let attributes: Vec<&str> = text[..line_start]
            .lines()
            .rev()
            .map(str::trim)
            .take_while(|l| l.starts_with("#[") || l.starts_with("//"))
            .filter(|l| l.starts_with("#["))
            .collect();
        assert!(
            attributes.iter().any(|a| a.starts_with("#[test")),
            "{cell}: not a test (attributes {attributes:?})"
        );
        assert!(
            !attributes.iter().any(|a| a.contains("ignore")),
            "{cell}: ignored"
        );
        named += 1;
    }
    named
}

/// The times to check an explanation's `steps` (its verdict changes, in
/// time order) at: each step ±1 ns, and halfway to the next (a change the
/// steps missed, a deadline or a crossing, lies between), with `more`;
/// sorted, once each.
pub fn around(steps: &[u64], more: impl IntoIterator<Item = u64>) -> Vec<u64> {
    let mut times: Vec<u64> = steps
        .iter()
        .flat_map(|&t| [t.saturating_sub(1), t, t.saturating_add(1)])
        .chain(
            steps
                .windows(2)
                .map(|w| w[0] + w[1].saturating_sub(w[0]) / 2),
        )
        .chain(more)
        .collect();
    times.sort_unstable();
    times.dedup();
    times
}

/// Starts `cmd`, its stdout a pipe nobody reads and its stderr discarded,
/// and stops it as [`stop_on_a_full_pipe`] does.
pub fn stop_cmd_on_a_full_pipe(
    cmd: &mut std::process::Command,
    fill: std::time::Duration,
    within: std::time::Duration,
) -> std::process::ExitStatus {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    stop_on_a_full_pipe(&mut child, fill, within)
}

/// Stops `child`, whose stdout is a pipe nobody reads, with SIGTERM once
/// that pipe is full: shrinks the pipe to a page, waits `fill` for the
/// child's output to fill it (the child must still run then), sends
/// SIGTERM and returns the exit status, waited for `within` at most.
pub fn stop_on_a_full_pipe(
    child: &mut std::process::Child,
    fill: std::time::Duration,
    within: std::time::Duration,
) -> std::process::ExitStatus {
    use std::os::fd::AsRawFd;
    let out = child.stdout.take().expect("stdout piped");
    // SAFETY: fcntl on a pipe descriptor this test owns.
    let set = unsafe { libc::fcntl(out.as_raw_fd(), libc::F_SETPIPE_SZ, 4096) };
    assert!(
        set >= 4096,
        "F_SETPIPE_SZ: {}",
        std::io::Error::last_os_error()
    );
    std::thread::sleep(fill);
    assert!(child.try_wait().unwrap().is_none(), "the child still runs");
    assert!(signal(child.id(), libc::SIGTERM));
    let status = wait_at_most(child, within);
    drop(out);
    status
}

/// A reader of the publication at `path` taking its writer as alive for a
/// minute after the last heartbeat: the tests that are not about a dead
/// writer ask a verdict of a live one, and a writer (or a test thread
/// cycling a sidecar) not scheduled for a tenth of a second on a loaded
/// machine would otherwise read as dead, every answer `stale`.
pub fn live_reader(path: impl AsRef<Path>) -> tickguard::Reader {
    tickguard::Reader::open_with(path, 60_000_000_000)
}

/// A loopback port, free for UDP and TCP right now, for a sidecar or a
/// process a test starts to bind. Taken below the kernel's ephemeral
/// range (from 32768), where every `bind(0)` of the tests running beside
/// it lands (a port picked by one and released could be taken by another
/// before the sidecar bound it), in a sequence of this process's own (its
/// pid sets where it starts, each call the next one), so that tests in
/// other processes pick other ports but by chance of their sequences.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    // Coprime with SPAN: SPAN calls give SPAN different ports.
    const STEP: u32 = 7_919;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id().wrapping_mul(2_654_435_761) % SPAN;
    for _ in 0..SPAN {
        let k = NEXT.fetch_add(1, Ordering::Relaxed) % SPAN;
        let port = (LOW + (start + k * STEP) % SPAN) as u16;
        let at = (std::net::Ipv4Addr::LOCALHOST, port);
        if std::net::UdpSocket::bind(at).is_ok() && std::net::TcpListener::bind(at).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port from {LOW} to {}", LOW + SPAN - 1);
}

/// [`free_port`] on 127.0.0.1.
pub fn free_addr() -> std::net::SocketAddrV4 {
    std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, free_port())
}
