//! The `check-latency` row: `Reader::check` timed from this process
//! (another one than the writer) while the writer updates the checked slot
//! at about 1 million updates/s and at the simulator's full speed, against a
//! request/response query of the same verdict over a Unix socket (a verdict
//! server in a child process: the hidden `unix-server` row).

use crate::harness::{
    counters, free_port, start_sidecar, within, within_because, Proc, SidecarSpec, Sim, CPUS, FEED,
};
use anyhow::{bail, ensure, Context};
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tickguard::shm::counter;
use tickguard::time::now_ns;
use tickguard::{Handle, Reader, WallClock};

// ---------------------------------------------------------------- flags

/// Flags of `check-latency`.
#[derive(clap::Args)]
pub struct LatencyArgs {
    /// The tickguard binary (sidecar and simulator).
    #[arg(long, default_value = "target/release/tickguard")]
    pub(crate) tickguard: PathBuf,
    /// Target update rate of the first phase, quotes/s on the one symbol
    /// (1 to 10,000,000).
    #[arg(long, default_value_t = 1_000_000.0)]
    pub(crate) rate: f64,
    /// Quotes per datagram in the 1M/s phase (1 to 100).
    #[arg(long, default_value_t = 10)]
    pub(crate) batch: usize,
    /// Quotes per datagram in the full-speed phase (1 to 100, the
    /// simulator's most).
    #[arg(long, default_value_t = 100)]
    pub(crate) full_batch: usize,
    /// Rate of the full-speed phase, quotes/s (0 to 10,000,000; 0: what a
    /// calibration burst of the simulator sustains here, with this process
    /// checking meanwhile).
    #[arg(long, default_value_t = 0.0)]
    pub(crate) full_rate: f64,
    /// Seconds of timed checks per phase (0.1 to 60).
    #[arg(long, default_value_t = 5.0)]
    pub(crate) seconds: f64,
    /// Seconds of Unix-socket round trips (during the 1M/s phase; 0.1 to
    /// 30: the verdict server stops at 120 s).
    #[arg(long, default_value_t = 4.0)]
    pub(crate) unix_seconds: f64,
    /// Receiver idle strategy: spin, yield or sleep.
    #[arg(long, default_value = "spin", value_parser = crate::harness::IDLES)]
    pub(crate) idle: String,
    /// CPU the sidecar's receiver thread is pinned to (0 to 1,023).
    #[arg(long, default_value_t = 1)]
    pub(crate) sidecar_cpu: usize,
    /// CPU this process's checking thread is pinned to (0 to 1,023).
    #[arg(long, default_value_t = 0)]
    pub(crate) reader_cpu: usize,
    /// Pin nothing.
    #[arg(long)]
    pub(crate) no_pin: bool,
    /// Percent of the time the checking thread spends checking (in 1 ms
    /// slices; the rest it sleeps, leaving the CPU to the simulator; 1 to
    /// 100).
    #[arg(long, default_value_t = 50)]
    pub(crate) duty_pct: u32,
}

/// Quotes/s a simulator is offered (`simulate`'s most).
const MAX_RATE: f64 = tickguard::simulate::MAX_RATE;
/// The verdict server's default `--max-seconds`.
const SERVER_SECONDS: u64 = 120;

impl LatencyArgs {
    /// Refuses a flag out of its range (`check-latency`'s Unix-socket
    /// round trips, after the timed checks, must end well before the
    /// verdict server's default `--max-seconds`).
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        within("--rate", self.rate, 1.0..=MAX_RATE)?;
        within("--batch", self.batch, 1..=100)?;
        within("--full-batch", self.full_batch, 1..=100)?;
        within("--full-rate", self.full_rate, 0.0..=MAX_RATE)?;
        within("--seconds", self.seconds, 0.1..=60.0)?;
        within_because(
            "--unix-seconds",
            self.unix_seconds,
            0.1..=30.0,
            &format!(" (the verdict server stops at {SERVER_SECONDS} s)"),
        )?;
        within("--sidecar-cpu", self.sidecar_cpu, CPUS)?;
        within("--reader-cpu", self.reader_cpu, CPUS)?;
        within("--duty-pct", self.duty_pct, 1..=100)
    }
}

/// Flags of the hidden `unix-server` row.
#[derive(clap::Args)]
pub struct ServerArgs {
    /// Unix socket to listen on.
    socket: PathBuf,
    /// The sidecar's shared-memory file.
    shm: PathBuf,
    /// Exit after this many seconds whatever happens.
    #[arg(long, default_value_t = SERVER_SECONDS)]
    max_seconds: u64,
}

// ---------------------------------------------------------------- histograms

pub(crate) fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds")
}

pub(crate) fn summary(h: &Histogram<u64>) -> Value {
    json!({
        "samples": h.len(),
        "min_ns": h.min(),
        "median_ns": h.value_at_quantile(0.5),
        "p90_ns": h.value_at_quantile(0.9),
        "p99_ns": h.value_at_quantile(0.99),
        "p99_9_ns": h.value_at_quantile(0.999),
        "p99_99_ns": h.value_at_quantile(0.9999),
        "max_ns": h.max(),
        "mean_ns": (h.mean() * 10.0).round() / 10.0,
    })
}

/// The timer's own cost (two `WallClock` readings back to back) and the
/// cost of one `WallClock` reading and of one `now_ns()` (clock_gettime)
/// timed the same way, each over `n` samples.
pub(crate) fn timer_costs(clock: &WallClock, n: u64) -> [Histogram<u64>; 3] {
    let [mut timer, mut wall, mut system] = [histogram(), histogram(), histogram()];
    for _ in 0..n {
        let t0 = clock.now_ns();
        let t1 = clock.now_ns();
        timer.saturating_record(t1.saturating_sub(t0));
        let t0 = clock.now_ns();
        std::hint::black_box(clock.now_ns());
        let t1 = clock.now_ns();
        wall.saturating_record(t1.saturating_sub(t0));
        let t0 = clock.now_ns();
        std::hint::black_box(now_ns());
        let t1 = clock.now_ns();
        system.saturating_record(t1.saturating_sub(t0));
    }
    [timer, wall, system]
}

/// Per-call costs without a timer around each call: `n` calls between two
/// clock reads, ns per call (the best of 5 rounds).
fn amortized(reader: &Reader, handle: &Handle, n: u32) -> Value {
    fn best(mut f: impl FnMut()) -> f64 {
        (0..5)
            .map(|_| {
                let t0 = Instant::now();
                f();
                t0.elapsed().as_nanos() as f64
            })
            .fold(f64::MAX, f64::min)
    }
    let per = |ns: f64| (ns / f64::from(n) * 10.0).round() / 10.0;
    let fixed = now_ns();
    let wall = WallClock::new();
    let wallclock = best(|| {
        for _ in 0..n {
            std::hint::black_box(wall.now_ns());
        }
    });
    let check_wallclock = best(|| {
        for _ in 0..n {
            std::hint::black_box(reader.check_counting(handle, wall.now_ns()));
        }
    });
    let instant = best(|| {
        for _ in 0..n {
            std::hint::black_box(Instant::now());
        }
    });
    let clock = best(|| {
        for _ in 0..n {
            std::hint::black_box(now_ns());
        }
    });
    let check_fixed = best(|| {
        for _ in 0..n {
            std::hint::black_box(reader.check_counting(handle, std::hint::black_box(fixed)));
        }
    });
    let check_clock = best(|| {
        for _ in 0..n {
            std::hint::black_box(reader.check_counting(handle, now_ns()));
        }
    });
    json!({
        "calls_per_round": n,
        "instant_now_ns": per(instant),
        "now_ns_ns": per(clock),
        "check_fixed_now_ns": per(check_fixed),
        "check_with_now_ns_ns": per(check_clock),
        "wallclock_ns": per(wallclock),
        "check_with_wallclock_ns": per(check_wallclock),
    })
}

/// Timed checks of one handle.
pub(crate) struct CheckRun {
    hist: Histogram<u64>,
    /// Retries of each check that retried at all.
    retry_hist: Histogram<u64>,
    checks: u64,
    retries: u64,
    retried: u64,
    ok: u64,
    wall_s: f64,
    version_start: u64,
    version_end: u64,
    quotes_start: u64,
    quotes_end: u64,
}

impl CheckRun {
    pub(crate) fn json(&self) -> Value {
        let mut v = summary(&self.hist);
        let checks = self.checks.max(1) as f64;
        let o = v.as_object_mut().expect("object");
        o.insert("checks".into(), json!(self.checks));
        o.insert("retries".into(), json!(self.retries));
        o.insert("retry_rate".into(), json!(self.retries as f64 / checks));
        o.insert(
            "checks_retried_pct".into(),
            json!(100.0 * self.retried as f64 / checks),
        );
        if self.retried > 0 {
            let r = &self.retry_hist;
            o.insert(
                "retries_per_retried_check".into(),
                json!({
                    "median": r.value_at_quantile(0.5),
                    "p99": r.value_at_quantile(0.99),
                    "max": r.max(),
                    "checks_over_1000": r.count_between(1001, u64::MAX),
                    "retries_in_checks_over_1000": r
                        .iter_recorded()
                        .filter(|x| x.value_iterated_to() > 1000)
                        .map(|x| x.value_iterated_to() * x.count_at_value())
                        .sum::<u64>(),
                }),
            );
        }
        o.insert("ok_pct".into(), json!(100.0 * self.ok as f64 / checks));
        o.insert("window_s".into(), json!(self.wall_s));
        o.insert(
            "slot_updates_per_s".into(),
            json!(
                (self.version_end.saturating_sub(self.version_start) / 2) as f64
                    / self.wall_s.max(1e-9)
            ),
        );
        o.insert(
            "quotes_applied_per_s".into(),
            json!(self.quotes_end.saturating_sub(self.quotes_start) as f64 / self.wall_s.max(1e-9)),
        );
        v
    }
}

/// Checks `handle` for `secs`, each call timed with `clock` around
/// `check_counting(&h, clock.now_ns())` (what a gateway calls). Runs in slices of 1 ms; between slices
/// `between` is called (false: stop early) and, below 100 % duty, the
/// thread sleeps.
pub(crate) fn timed_checks(
    clock: &WallClock,
    reader: &Reader,
    handle: &Handle,
    secs: f64,
    duty_pct: u32,
    mut between: impl FnMut() -> bool,
) -> CheckRun {
    let mut run = CheckRun {
        hist: histogram(),
        retry_hist: histogram(),
        checks: 0,
        retries: 0,
        retried: 0,
        ok: 0,
        wall_s: 0.0,
        version_start: reader.check(handle, now_ns()).version,
        version_end: 0,
        quotes_start: reader.counter(handle.feed(), counter::QUOTES).unwrap_or(0),
        quotes_end: 0,
    };
    let slice = Duration::from_millis(1);
    let duty = duty_pct.clamp(1, 100);
    let gap = slice * (100 - duty) / duty;
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    // At most 10 M checks per slice: a bound whatever the clock does.
    let per_slice_max = 10_000_000u64;
    'outer: while Instant::now() < end {
        let slice_end = Instant::now() + slice;
        for _ in 0..per_slice_max {
            let t0 = clock.now_ns();
            let (v, r) = reader.check_counting(handle, clock.now_ns());
            let t1 = clock.now_ns();
            run.hist.saturating_record(t1.saturating_sub(t0));
            run.checks += 1;
            run.retries += u64::from(r);
            if r > 0 {
                run.retried += 1;
                run.retry_hist.saturating_record(u64::from(r));
            }
            run.ok += u64::from(v.is_ok());
            std::hint::black_box(&v);
            if run.checks.is_multiple_of(256) && Instant::now() >= slice_end {
                break;
            }
        }
        if !between() {
            break 'outer;
        }
        if !gap.is_zero() {
            std::thread::sleep(gap);
        }
    }
    run.wall_s = start.elapsed().as_secs_f64();
    run.version_end = reader.check(handle, now_ns()).version;
    run.quotes_end = reader.counter(handle.feed(), counter::QUOTES).unwrap_or(0);
    run
}

/// Waits (at most 10 s) until the writer has published `symbol`.
pub(crate) fn wait_lookup(shm: &Path, symbol: &str) -> anyhow::Result<(Reader, Handle)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reader = Reader::open(shm);
        if let Some(h) = reader.lookup(FEED, symbol) {
            return Ok((reader, h));
        }
        if Instant::now() >= deadline {
            bail!("{symbol} never appeared in the sidecar's table");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------- unix socket

/// The verdict line the server answers: `ok` or `reject r1,r2`.
fn verdict_line(
    reader: &Reader,
    handles: &mut HashMap<String, Handle>,
    req: &str,
    out: &mut String,
) {
    use std::fmt::Write as _;
    let Some((feed, symbol)) = req.split_once(' ') else {
        out.push_str("error bad request\n");
        return;
    };
    let handle = match handles.get(req) {
        Some(h) => Some(*h),
        None => {
            let h = reader.lookup(feed, symbol);
            if let Some(h) = h {
                handles.insert(req.to_string(), h);
            }
            h
        }
    };
    let Some(h) = handle else {
        out.push_str("reject no_quote\n");
        return;
    };
    let v = reader.check(&h, now_ns());
    if v.is_ok() {
        out.push_str("ok\n");
    } else {
        out.push_str("reject ");
        for (i, name) in v.reasons.names().enumerate() {
            let _ = write!(out, "{}{name}", if i > 0 { "," } else { "" });
        }
        out.push('\n');
    }
}

/// The hidden `unix-server` row: answers `FEED SYMBOL\n` with the verdict
/// line, one connection, until it closes or `--max-seconds`.
pub fn unix_server(a: &ServerArgs) -> anyhow::Result<Value> {
    let _ = std::fs::remove_file(&a.socket);
    let listener =
        UnixListener::bind(&a.socket).with_context(|| format!("binding {}", a.socket.display()))?;
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + Duration::from_secs(a.max_seconds);
    let reader = Reader::open(&a.shm);
    let mut handles = HashMap::new();
    let mut served = 0u64;
    let stream = loop {
        match listener.accept() {
            Ok((s, _)) => break Some(s),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    break None;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(e.into()),
        }
    };
    if let Some(stream) = stream {
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(Duration::from_millis(500)))?;
        let mut rd = BufReader::new(stream.try_clone()?);
        let mut wr = stream;
        let (mut line, mut out) = (String::new(), String::new());
        while Instant::now() < deadline {
            line.clear();
            match rd.read_line(&mut line) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    continue
                }
                Err(_) => break,
            }
            out.clear();
            verdict_line(&reader, &mut handles, line.trim_end(), &mut out);
            if wr.write_all(out.as_bytes()).is_err() {
                break;
            }
            served += 1;
        }
    }
    let _ = std::fs::remove_file(&a.socket);
    Ok(json!({"row": "unix_server", "served": served}))
}

/// Blocking request/response round trips to the verdict server for `secs`
/// (at most 10 M): the histogram and the last answer.
fn unix_round_trips(
    socket: &Path,
    symbol: &str,
    secs: f64,
) -> anyhow::Result<(Histogram<u64>, String)> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let stream = loop {
        match UnixStream::connect(socket) {
            Ok(s) => break s,
            Err(e) if Instant::now() >= deadline => {
                return Err(e).with_context(|| format!("connecting to {}", socket.display()))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut rd = BufReader::new(stream.try_clone()?);
    let mut wr = stream;
    let req = format!("{FEED} {symbol}\n");
    let mut line = String::new();
    let mut hist = histogram();
    let mut round_trip = |hist: Option<&mut Histogram<u64>>, line: &mut String| {
        line.clear();
        let t0 = Instant::now();
        wr.write_all(req.as_bytes())?;
        let n = rd.read_line(line)?;
        let t1 = Instant::now();
        ensure!(n > 0, "the verdict server closed the connection");
        if let Some(h) = hist {
            h.saturating_record(t1.duration_since(t0).as_nanos() as u64);
        }
        anyhow::Ok(())
    };
    for _ in 0..1_000 {
        round_trip(None, &mut line)?;
    }
    let end = Instant::now() + Duration::from_secs_f64(secs);
    for _ in 0..10_000_000u64 {
        if Instant::now() >= end {
            break;
        }
        round_trip(Some(&mut hist), &mut line)?;
    }
    Ok((hist, line.trim_end().to_string()))
}

// ---------------------------------------------------------------- check-latency

/// `simulate` flags feeding `name` alone on one line; `itch`: an ITCH venue
/// in session `name` (its `--count` counts order-flow messages, `--batch`
/// is at most 64).
pub(crate) fn sim_args(
    itch: bool,
    port: u16,
    name: &str,
    rate: f64,
    batch: usize,
    secs: f64,
    count: u64,
) -> Vec<String> {
    let mut protocol = vec!["--protocol".to_string()];
    if itch {
        // Each venue run is a session of its own (its sequences start at 1).
        protocol.extend(["itch50".into(), "--session".into(), name.into()]);
    } else {
        protocol.push("sqf".into());
    }
    let batch = if itch { batch.min(64) } else { batch };
    protocol
        .into_iter()
        .chain([
            "--line-a".to_string(),
            format!("127.0.0.1:{port}"),
            "--names".into(),
            name.into(),
            "--rate".into(),
            format!("{rate}"),
            "--batch".into(),
            batch.to_string(),
            "--duration-s".into(),
            format!("{secs}"),
            "--count".into(),
            count.to_string(),
        ])
        .collect()
}

/// One loaded phase: a simulator (an ITCH venue if `itch`) feeding `name`
/// at `rate`, timed checks from this process meanwhile, then (optionally)
/// Unix-socket round trips.
#[allow(clippy::too_many_arguments)]
pub(crate) fn loaded_phase(
    itch: bool,
    a: &LatencyArgs,
    dir: &Path,
    shm: &Path,
    port: u16,
    name: &str,
    rate: f64,
    batch: usize,
    unix: Option<&Path>,
) -> anyhow::Result<(Value, Option<Value>)> {
    let warm = 1.0;
    let unix_s = if unix.is_some() { a.unix_seconds } else { 0.0 };
    let sim_s = warm + a.seconds + unix_s + 1.0;
    let count = (rate * sim_s).ceil() as u64;
    let mut sim = Sim::spawn(
        &a.tickguard,
        dir,
        name,
        &sim_args(itch, port, name, rate, batch, sim_s, count),
    )?;
    let (reader, handle) = wait_lookup(shm, name)?;
    let drops_start = reader.counter(0, counter::KERNEL_DROPS).unwrap_or(0);
    // Warm up: the same loop, not recorded.
    let mut killed = false;
    let clock = WallClock::new();
    let _ = timed_checks(&clock, &reader, &handle, warm, a.duty_pct, || true);
    let mut last_guard = Instant::now();
    let run = timed_checks(&clock, &reader, &handle, a.seconds, a.duty_pct, || {
        if last_guard.elapsed() >= Duration::from_millis(100) {
            last_guard = Instant::now();
            killed |= sim.guard();
            return sim.running();
        }
        true
    });
    ensure!(
        !killed,
        "the simulator fell behind {rate} quotes/s and buffered over 1 GiB: killed"
    );
    let still_running = sim.running();
    let unix_json = match unix {
        Some(socket) => {
            let (hist, answer) = unix_round_trips(socket, name, unix_s)?;
            let direct = reader.check(&handle, now_ns());
            let mut v = summary(&hist);
            let o = v.as_object_mut().expect("object");
            o.insert("answer".into(), json!(answer));
            o.insert("direct_check_ok".into(), json!(direct.is_ok()));
            o.insert(
                "round_trips_per_s".into(),
                json!(hist.len() as f64 / unix_s.max(1e-9)),
            );
            Some(v)
        }
        None => None,
    };
    let (report, sim_wall) = sim.finish(Duration::from_secs_f64(sim_s + 30.0))?;
    let drops_end = reader.counter(0, counter::KERNEL_DROPS).unwrap_or(0);
    let quotes = sent_messages(&report);
    let mut v = run.json();
    let o = v.as_object_mut().expect("object");
    o.insert("symbol".into(), json!(name));
    o.insert("target_rate".into(), json!(rate));
    o.insert("batch".into(), json!(batch));
    o.insert("simulator_quotes".into(), json!(quotes));
    o.insert("simulator_datagrams".into(), json!(report["datagrams"]));
    o.insert("simulator_wall_s".into(), json!(sim_wall));
    o.insert(
        "simulator_quotes_per_s".into(),
        json!(quotes as f64 / sim_wall.max(1e-9)),
    );
    o.insert("simulator_ran_through_window".into(), json!(still_running));
    o.insert(
        "kernel_drops".into(),
        json!(drops_end.saturating_sub(drops_start)),
    );
    Ok((v, unix_json))
}

/// Quotes (SQF) or order-flow messages (ITCH) a simulator report says it sent.
fn sent_messages(report: &Value) -> u64 {
    report["quotes"]
        .as_u64()
        .or(report["order_flow"].as_u64())
        .unwrap_or(0)
}

/// What the simulator sustains at `batch` here, quotes/s, while this thread
/// keeps checking: a burst of `count` quotes at a rate it cannot reach.
pub(crate) fn calibrate(
    itch: bool,
    batch: usize,
    a: &LatencyArgs,
    dir: &Path,
    port: u16,
    reader: &Reader,
    handle: &Handle,
) -> anyhow::Result<f64> {
    let count = 3_000_000u64;
    let mut sim = Sim::spawn(
        &a.tickguard,
        dir,
        "CALIB",
        &sim_args(
            itch,
            port,
            "CALIB",
            tickguard::simulate::MAX_RATE,
            batch,
            30.0,
            count,
        ),
    )?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let clock = WallClock::new();
    while sim.running() && Instant::now() < deadline {
        let _ = timed_checks(&clock, reader, handle, 0.05, a.duty_pct, || true);
    }
    let (report, wall) = sim.finish(Duration::from_secs(5))?;
    let quotes = sent_messages(&report);
    ensure!(quotes > 0, "calibration burst sent nothing");
    Ok(quotes as f64 / wall)
}

/// The `check-latency` row.
pub fn latency(a: &LatencyArgs) -> anyhow::Result<Value> {
    a.check()?;
    let dir = tempfile::tempdir()?;
    let port = free_port()?;
    let sidecar = start_sidecar(
        &a.tickguard,
        dir.path(),
        &SidecarSpec {
            capacity: 1024,
            ports: &[port],
            idle: &a.idle,
            cpu: (!a.no_pin).then_some(a.sidecar_cpu),
            // Generous, so that every verdict of the run is `ok` (the
            // thresholds are compared, never slower or faster).
            stale_ms: 60_000,
            source_ms: 60_000,
        },
    )?;
    let shm = sidecar.shm.clone();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let pinned = !a.no_pin && tickguard::sys::pin_to_cpu(a.reader_cpu).is_ok();

    // The verdict server, a child process of this binary.
    let socket = dir.path().join("verdict.sock");
    let _server = Proc {
        child: Command::new(std::env::current_exe()?)
            .arg("unix-server")
            .arg(&socket)
            .arg(&shm)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting the verdict server")?,
        what: "unix-server",
    };

    // The timer alone, and the clock read the check is given.
    let wall = WallClock::new();
    // Let it measure the counter rate before anything is timed with it.
    std::thread::sleep(Duration::from_millis(5));
    let _ = wall.now_ns();
    let [timer, wall_read, system_read] = timer_costs(&wall, 1_000_000);

    // Writer idle: one symbol quoted once.
    let sim = Sim::spawn(
        &a.tickguard,
        dir.path(),
        "IDLE",
        &sim_args(false, port, "IDLE", 1_000.0, 1, 5.0, 10),
    )?;
    sim.finish(Duration::from_secs(15))?;
    let (reader, idle_handle) = wait_lookup(&shm, "IDLE")?;
    let idle = timed_checks(&wall, &reader, &idle_handle, 1.0, 100, || true);
    let breakdown = amortized(&reader, &idle_handle, 1_000_000);

    let (at_1m, unix) = loaded_phase(
        false,
        a,
        dir.path(),
        &shm,
        port,
        "ONEM",
        a.rate,
        a.batch,
        Some(&socket),
    )?;
    let (full_rate, calibrated) = if a.full_rate > 0.0 {
        (a.full_rate, false)
    } else {
        (
            calibrate(
                false,
                a.full_batch,
                a,
                dir.path(),
                port,
                &reader,
                &idle_handle,
            )?,
            true,
        )
    };
    let (full, _) = loaded_phase(
        false,
        a,
        dir.path(),
        &shm,
        port,
        "FULLSPD",
        full_rate,
        a.full_batch,
        None,
    )?;
    let final_counters = counters(&reader);
    drop(sidecar);

    let get = |v: &Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let unix = unix.unwrap_or(Value::Null);
    Ok(json!({
        "row": "check_latency",
        "timing": "WallClock::now_ns() around reader.check_counting(&h, clock.now_ns()), nothing subtracted; timer_median_ns is two readings back to back",
        "timer_median_ns": timer.value_at_quantile(0.5),
        "timer": summary(&timer),
        "wallclock_read": summary(&wall_read),
        "now_ns_clock_read": summary(&system_read),
        "wallclock_uses_counter": wall.uses_counter(),
        "idle_writer": idle.json(),
        "untimed_per_call_idle_writer": breakdown,
        "at_1m": at_1m,
        "full_speed": full,
        "full_speed_rate_calibrated": calibrated,
        "unix_socket": unix,
        "unix_over_check_median": get(&unix, "median_ns") / get(&at_1m, "median_ns"),
        "setup": {
            "sidecar_idle": a.idle,
            "pinned": pinned,
            "sidecar_cpu": (!a.no_pin).then_some(a.sidecar_cpu),
            "reader_cpu": (!a.no_pin).then_some(a.reader_cpu),
            "duty_pct": a.duty_pct,
            "cpus": cpus,
            "sidecar_counters": final_counters,
        },
        "targets": {
            "median_ns": 45,
            "p99_ns": 100,
            "retry_rate_at_1m": 0.01,
            "median_met": get(&at_1m, "median_ns") <= 45.0,
            "p99_met": get(&at_1m, "p99_ns") <= 100.0,
            "retries_met": get(&at_1m, "retry_rate") < 0.01,
        },
    }))
}
