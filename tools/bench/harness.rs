//! What the rows measured against a live `tickguard run` fed by `tickguard
//! simulate` on loopback share (`check-latency`, `memory`, `soak`): the two
//! child processes, their files and the sidecar's counters and memory; and
//! what the in-process receive rows share (`live`, `itch-live-drain`,
//! `itch-recovery-latency`): loopback senders, ports and queue accounting.
//!
//! Every child is killed (by its own handle) and every file removed when a
//! row ends, also on error. Every loop is bounded in count and time, and
//! every row refuses a flag out of its range ([`within`]) before it
//! allocates, spawns or writes anything.

use anyhow::{bail, ensure, Context};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::fmt::{Debug, Display};
use std::net::{SocketAddrV4, UdpSocket};
use std::ops::RangeInclusive;
use std::os::fd::AsRawFd;
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

// ---------------------------------------------------------------- flags

/// The receiver's idle strategies a row's `--idle` takes (clap refuses
/// the rest).
pub(crate) const IDLES: [&str; 3] = ["spin", "yield", "sleep"];

/// Flags a row refuses: `main` prints the one line (never a backtrace)
/// and exits with 2, as clap does for a malformed flag.
#[derive(Debug)]
pub(crate) struct BadFlag(String);

impl Display for BadFlag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadFlag {}

impl BadFlag {
    /// A refusal saying `why` in one line.
    pub(crate) fn new(why: String) -> BadFlag {
        BadFlag(why)
    }
}

/// Refuses the flags unless `ok`, `why()` the line saying which and why.
pub(crate) fn require(ok: bool, why: impl FnOnce() -> String) -> anyhow::Result<()> {
    if ok {
        Ok(())
    } else {
        Err(BadFlag(why()).into())
    }
}

/// Refuses `v` outside `range` (NaN and infinities too) in one line
/// naming `flag` and the range.
pub(crate) fn within<T: PartialOrd + Display + Debug>(
    flag: &str,
    v: T,
    range: RangeInclusive<T>,
) -> anyhow::Result<()> {
    within_because(flag, v, range, "")
}

/// [`within`], saying after the range why it ends there (`because`, e.g.
/// " (the writer stops at 60 s)").
pub(crate) fn within_because<T: PartialOrd + Display + Debug>(
    flag: &str,
    v: T,
    range: RangeInclusive<T>,
    because: &str,
) -> anyhow::Result<()> {
    // `v` as Debug: a huge float in exponent form, not 300 digits.
    require(range.contains(&v), || {
        format!(
            "{flag} must be from {} to {}{because}, not {v:?}",
            range.start(),
            range.end()
        )
    })
}

/// `--runs` of every row that repeats its measurement.
pub(crate) const RUNS: RangeInclusive<usize> = 1..=100;
/// A CPU number (`[sidecar] cpu`'s range).
pub(crate) const CPUS: RangeInclusive<usize> = {
    let r = tickguard::config::CPU;
    r.min as usize..=r.max as usize
};
/// SO_RCVBUF requested, bytes (`[sidecar] rcvbuf_bytes`'s range).
pub(crate) const RCVBUF_BYTES: RangeInclusive<usize> = {
    let r = tickguard::config::RCVBUF_BYTES;
    r.min as usize..=r.max as usize
};

/// Removes the publication, and its writer's lock (a writer process
/// killed on an error leaves it), when the row ends, also on error.
pub(crate) struct ShmFile(pub(crate) String);

impl Drop for ShmFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_file(tickguard::shm::lock_path(Path::new(&self.0)));
    }
}

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
        // Killed, the sidecar leaves its lock file: each row's pid names a new one.
        let _ = std::fs::remove_file(tickguard::shm::lock_path(&self.shm));
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
    start_sidecar_with(bin, dir, spec, "kind = \"full\"")
}

/// [`start_sidecar`] with `feed_keys` (e.g. `protocol = "itch50"`) in the
/// feed's table instead of SQF's `kind = "full"`.
pub(crate) fn start_sidecar_with(
    bin: &Path,
    dir: &Path,
    spec: &SidecarSpec,
    feed_keys: &str,
) -> anyhow::Result<Sidecar> {
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
         [[feed]]\nname = \"{FEED}\"\n{feed_keys}\nlines = [{}]\nstale_threshold_ms = {}\n\
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

// ---------------------------------------------------------------- loopback sockets

/// `a` as the C socket address `sendmmsg` takes.
pub(crate) fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(a.ip().octets()),
        },
        sin_zero: [0; 8],
    }
}

/// Sends every datagram to every destination (datagram-major) with
/// `sendmmsg`. Loopback unicast only: the destinations are 127.0.0.1.
pub(crate) fn send_all(
    tx: &UdpSocket,
    datagrams: &[Vec<u8>],
    dsts: &[libc::sockaddr_in],
) -> anyhow::Result<()> {
    let mut iov: Vec<libc::iovec> = Vec::with_capacity(datagrams.len() * dsts.len());
    for d in datagrams {
        for _ in dsts {
            iov.push(libc::iovec {
                iov_base: d.as_ptr() as *mut libc::c_void,
                iov_len: d.len(),
            });
        }
    }
    let mut hdrs: Vec<libc::mmsghdr> = iov
        .iter_mut()
        .enumerate()
        .map(|(i, v)| {
            // SAFETY: msghdr is plain data; zeroed is a valid empty header.
            let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
            h.msg_name = (&dsts[i % dsts.len()] as *const libc::sockaddr_in)
                .cast_mut()
                .cast();
            h.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            h.msg_iov = v;
            h.msg_iovlen = 1;
            libc::mmsghdr {
                msg_hdr: h,
                msg_len: 0,
            }
        })
        .collect();
    let mut done = 0;
    while done < hdrs.len() {
        let rest = &mut hdrs[done..];
        // SAFETY: every header points at a live sockaddr_in and a live
        // iovec over a live buffer; the kernel only reads them.
        let n = unsafe { libc::sendmmsg(tx.as_raw_fd(), rest.as_mut_ptr(), rest.len() as u32, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e).context("sendmmsg");
        }
        done += n as usize;
    }
    Ok(())
}

/// A loopback socket's receive queue as the kernel accounts it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Queue {
    /// Bytes charged to the receive buffer (skb truesize).
    pub(crate) rx_bytes: u64,
    /// Datagrams dropped for want of room.
    pub(crate) drops: u64,
}

/// Reads `/proc/net/udp` for the socket bound to 127.0.0.1:`port`.
pub(crate) fn proc_udp(port: u16) -> anyhow::Result<Queue> {
    let text = std::fs::read_to_string("/proc/net/udp")?;
    let local = format!("0100007F:{port:04X}");
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 13 || f[1] != local {
            continue;
        }
        let rx = f[4].split(':').nth(1).unwrap_or("0");
        return Ok(Queue {
            rx_bytes: u64::from_str_radix(rx, 16)?,
            drops: f[f.len() - 1].parse()?,
        });
    }
    anyhow::bail!("no UDP socket on 127.0.0.1:{port} in /proc/net/udp")
}

/// The cap on SO_RCVBUF.
pub(crate) const RMEM_MAX: &str = "/proc/sys/net/core/rmem_max";

/// Raises net.core.rmem_max (as root, when asked) while sockets are
/// opened; the old value is written back on drop.
pub(crate) struct RmemMax {
    pub(crate) original: u64,
    pub(crate) raised_to: Option<u64>,
}

impl RmemMax {
    pub(crate) fn raise(want: usize, allowed: bool) -> RmemMax {
        let original = std::fs::read_to_string(RMEM_MAX)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        let mut r = RmemMax {
            original,
            raised_to: None,
        };
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        if allowed
            && root
            && original < want as u64
            && std::fs::write(RMEM_MAX, want.to_string()).is_ok()
        {
            r.raised_to = Some(want as u64);
        }
        r
    }
}

impl Drop for RmemMax {
    fn drop(&mut self) {
        if self.raised_to.is_some() {
            if let Err(e) = std::fs::write(RMEM_MAX, self.original.to_string()) {
                eprintln!(
                    "could not restore net.core.rmem_max to {}: {e}",
                    self.original
                );
            }
        }
    }
}

/// `N` distinct UDP ports free right now on 127.0.0.1.
pub(crate) fn distinct_ports<const N: usize>() -> anyhow::Result<[u16; N]> {
    let keep: Vec<UdpSocket> = (0..N)
        .map(|_| UdpSocket::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()?;
    let mut ports = [0u16; N];
    for (p, s) in ports.iter_mut().zip(&keep) {
        *p = s.local_addr()?.port();
    }
    drop(keep);
    Ok(ports)
}

/// The median of `v` (the upper one of an even count); `v` not empty.
pub(crate) fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}
