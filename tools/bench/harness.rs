//! What the rows measured against a live `tickguard run` fed by `tickguard
//! simulate` on loopback share (`check-latency`, `memory`, `soak`): the two
//! child processes, their files and the sidecar's counters and memory.
//!
//! Every child is killed (by its own handle) and every file removed when a
//! row ends, also on error. Every loop is bounded in count and time.

use anyhow::{bail, ensure, Context};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tickguard::shm::counter;
use tickguard::time::now_ns;
use tickguard::Reader;

/// The feed every row configures.
pub(crate) const FEED: &str = "lp1";
/// Largest simulator RSS tolerated before it is killed (it buffers a whole
/// poll's datagrams when it falls behind its rate).
const SIM_RSS_LIMIT: u64 = 1 << 30;

// ---------------------------------------------------------------- processes

/// A child process killed and reaped when dropped.
pub(crate) struct Proc {
    pub(crate) child: Child,
    pub(crate) what: &'static str,
}

impl Proc {
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until it exits, at most until `deadline`; kills it past that.
    fn wait_until(&mut self, deadline: Instant) -> anyhow::Result<std::process::ExitStatus> {
        loop {
            if let Some(s) = self.child.try_wait()? {
                return Ok(s);
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                bail!("{} did not finish in time: killed", self.what);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// `tickguard run` in a child process, with its publication.
pub(crate) struct Sidecar {
    proc: Proc,
    pub(crate) shm: PathBuf,
    stderr: PathBuf,
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        if let Ok(None) = self.proc.child.try_wait() {
            let _ = self.proc.child.kill();
        }
        let _ = self.proc.child.wait();
        let _ = std::fs::remove_file(&self.shm);
    }
}

impl Sidecar {
    pub(crate) fn pid(&self) -> u32 {
        self.proc.pid()
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join("\n")
    }
}

/// What the sidecar is configured with.
pub(crate) struct SidecarSpec<'a> {
    pub(crate) capacity: usize,
    pub(crate) ports: &'a [u16],
    pub(crate) idle: &'a str,
    pub(crate) cpu: Option<usize>,
    pub(crate) stale_ms: u64,
    pub(crate) source_ms: u64,
}

fn shm_path() -> PathBuf {
    PathBuf::from(format!("/dev/shm/tickguard-bench-{}", std::process::id()))
}

/// A UDP port free right now on 127.0.0.1.
pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::UdpSocket::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

pub(crate) fn start_sidecar(bin: &Path, dir: &Path, spec: &SidecarSpec) -> anyhow::Result<Sidecar> {
    ensure!(
        ["spin", "yield", "sleep"].contains(&spec.idle),
        "--idle must be spin, yield or sleep, not {:?}",
        spec.idle
    );
    let shm = shm_path();
    let lines: Vec<String> = spec
        .ports
        .iter()
        .map(|p| format!("\"127.0.0.1:{p}\""))
        .collect();
    let cpu = spec.cpu.map(|c| format!("cpu = {c}\n")).unwrap_or_default();
    let text = format!(
        "[state]\ncapacity = {}\n\n[metrics]\nenabled = false\n\n[sidecar]\nshm_path = \"{}\"\n\
         idle = \"{}\"\nidle_sleep_us = 50\nheartbeat_ms = 1\ndead_after_ms = 100\n{cpu}\n\
         [[feed]]\nname = \"{FEED}\"\nkind = \"full\"\nlines = [{}]\nstale_threshold_ms = {}\n\
         source_threshold_ms = {}\nclock_offset = \"auto\"\n",
        spec.capacity,
        shm.display(),
        spec.idle,
        lines.join(", "),
        spec.stale_ms,
        spec.source_ms,
    );
    let config = dir.join("config.toml");
    std::fs::write(&config, text)?;
    let stderr = dir.join("sidecar.log");
    let child = Command::new(bin)
        .arg("run")
        .arg("--config")
        .arg(&config)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr)?)
        .spawn()
        .with_context(|| format!("starting {} run", bin.display()))?;
    let mut sidecar = Sidecar {
        proc: Proc {
            child,
            what: "tickguard run",
        },
        shm: shm.clone(),
        stderr,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = Reader::open(&shm);
        if r.health(now_ns()).is_ok() && r.writer_pid() == Some(sidecar.pid() as u64) {
            return Ok(sidecar);
        }
        if let Some(status) = sidecar.proc.child.try_wait()? {
            bail!(
                "tickguard run exited ({status}) before publishing:\n{}",
                sidecar.log_tail()
            );
        }
        if Instant::now() >= deadline {
            bail!(
                "tickguard run did not publish in 20 s: {}\n{}",
                r.health(now_ns()),
                sidecar.log_tail()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `tickguard simulate --report` in a child process, its report to a file.
pub(crate) struct Sim {
    proc: Proc,
    out: PathBuf,
    started: Instant,
}

impl Sim {
    pub(crate) fn spawn(bin: &Path, dir: &Path, tag: &str, args: &[String]) -> anyhow::Result<Sim> {
        let out = dir.join(format!("sim-{tag}.json"));
        let child = Command::new(bin)
            .arg("simulate")
            .args(args)
            .arg("--report")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out)?)
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {} simulate", bin.display()))?;
        Ok(Sim {
            proc: Proc {
                child,
                what: "tickguard simulate",
            },
            out,
            started: Instant::now(),
        })
    }

    pub(crate) fn running(&mut self) -> bool {
        matches!(self.proc.child.try_wait(), Ok(None))
    }

    /// Kills it if it buffers more than [`SIM_RSS_LIMIT`]; true if it did.
    pub(crate) fn guard(&mut self) -> bool {
        let rss = proc_status(self.proc.pid())
            .get("VmRSS")
            .copied()
            .unwrap_or(0);
        if rss > SIM_RSS_LIMIT {
            let _ = self.proc.child.kill();
            return true;
        }
        false
    }

    /// Waits for the report (at most `timeout`): the report and the
    /// simulator's wall time from spawn to exit, s.
    pub(crate) fn finish(mut self, timeout: Duration) -> anyhow::Result<(Value, f64)> {
        let status = self.proc.wait_until(Instant::now() + timeout)?;
        let elapsed = self.started.elapsed().as_secs_f64();
        ensure!(status.success(), "tickguard simulate failed: {status}");
        let text = std::fs::read_to_string(&self.out)?;
        let report: Value = serde_json::from_str(text.trim())
            .with_context(|| format!("simulate report: {:?}", text.get(..200)))?;
        Ok((report, elapsed))
    }
}

/// `/proc/PID/status` fields given in kB, in bytes.
pub(crate) fn proc_status(pid: u32) -> HashMap<String, u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            let v = v.trim().strip_suffix(" kB")?;
            Some((k.to_string(), v.trim().parse::<u64>().ok()? * 1024))
        })
        .collect()
}

pub(crate) fn rss_json(pid: u32) -> Value {
    let s = proc_status(pid);
    let g = |k: &str| s.get(k).copied().unwrap_or(0);
    json!({
        "vm_rss_bytes": g("VmRSS"),
        "vm_hwm_bytes": g("VmHWM"),
        "rss_anon_bytes": g("RssAnon"),
        "rss_file_bytes": g("RssFile"),
        "rss_shmem_bytes": g("RssShmem"),
    })
}

/// Waits until the sidecar's packet counter has not moved for `quiet`
/// (at most `max`); returns it.
pub(crate) fn wait_quiet(shm: &Path, quiet: Duration, max: Duration) -> u64 {
    let reader = Reader::open(shm);
    let deadline = Instant::now() + max;
    let mut last = reader.counter(0, counter::PACKETS).unwrap_or(0);
    let mut since = Instant::now();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        let now = reader.counter(0, counter::PACKETS).unwrap_or(0);
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= quiet {
            break;
        }
    }
    last
}

/// The sidecar's counters of feed 0 by name.
pub(crate) fn counters(reader: &Reader) -> Value {
    let mut m = serde_json::Map::new();
    for (id, name) in counter::NAMES {
        m.insert(name.into(), json!(reader.counter(0, id).unwrap_or(0)));
    }
    for line in 0..2 {
        let l = ["a", "b"][line];
        m.insert(
            format!("packets_{l}"),
            json!(reader.counter(0, counter::LINE_PACKETS + line).unwrap_or(0)),
        );
        m.insert(
            format!("kernel_drops_{l}"),
            json!(reader
                .counter(0, counter::LINE_KERNEL_DROPS + line)
                .unwrap_or(0)),
        );
    }
    Value::Object(m)
}
