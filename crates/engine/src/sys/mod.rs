//! Everything Linux-specific: UDP sockets and batch receive, CPU pinning,
//! signals, lock holders (and, from the reader, files and the SIGBUS
//! guard). The rest of the program never sees a `cfg` or a `libc` call.

#![allow(unsafe_code)]

pub use tickguard_reader::{file, guard};
pub mod hash;
pub mod memory;
pub mod udp;

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

/// Opens `path` to read a file the user names (a configuration, checks):
/// a named FIFO without a writer does not block the open, and reads as
/// empty (one clear error later, not a silent hang); a pipe with a writer
/// (`--config <(...)`) is read as it comes.
pub fn open_input(path: &std::path::Path) -> io::Result<std::fs::File> {
    let file = open_without_waiting(std::fs::OpenOptions::new().read(true), path)?;
    clear_nonblock(&file)?;
    Ok(file)
}

/// Opens `path` as `options` say, with `O_NONBLOCK` so that the open never
/// waits on a FIFO's other end (a writer opening one no one reads fails
/// with ENXIO); the caller clears it with [`clear_nonblock`] once it has
/// looked at what it opened.
fn open_without_waiting(
    options: &mut std::fs::OpenOptions,
    path: &std::path::Path,
) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    options.custom_flags(libc::O_NONBLOCK).open(path)
}

/// [`open_input`] for a file that must be a regular file (one read whole
/// before anything starts): anything else is refused, `InvalidInput`
/// "not a regular file", before a read could block or never end.
pub fn open_regular(path: &std::path::Path) -> io::Result<std::fs::File> {
    let file = open_input(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// Creates (or empties) `path` for writing on a thread that must never
/// wait on a reader: a regular file, or `/dev/null` or `/dev/full` (the
/// memory devices 1:3 and 1:7, whose writes never wait: recording off, and
/// a full disk rehearsed). Anything else (a named FIFO, with or without a
/// reader, a socket, a terminal, another device) is refused,
/// `InvalidInput` "not a regular file", and left as it was. The open does
/// not block (a FIFO without a reader fails it at once) and nothing is
/// truncated before the check. A regular file is locked (`flock`, held
/// while the file is open): one another process writes through this
/// function (a second instance started on the same path) is refused,
/// `WouldBlock`, untouched.
pub fn create_output(path: &std::path::Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let not_regular = || io::Error::new(io::ErrorKind::InvalidInput, "not a regular file");
    let file = open_without_waiting(std::fs::OpenOptions::new().write(true).create(true), path)
        .map_err(|e| match e.raw_os_error() {
            // A FIFO with no reader.
            Some(libc::ENXIO) => not_regular(),
            _ => e,
        })?;
    let meta = file.metadata()?;
    let never_waits = |rdev: u64| libc::major(rdev) == 1 && matches!(libc::minor(rdev), 3 | 7);
    if meta.is_file() {
        if !file::try_lock_exclusive(&file)? {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "being written by another process (it holds the file's lock)",
            ));
        }
        file.set_len(0)?;
    } else if !(meta.file_type().is_char_device() && never_waits(meta.rdev())) {
        return Err(not_regular());
    }
    clear_nonblock(&file)?;
    Ok(file)
}

/// Opens an existing `path` that is not a regular file (`/dev/stdout`, a
/// pipe, a named FIFO) to write into it: the open does not wait for a
/// reader (a FIFO, or a socket, no one reads fails it at once,
/// `NotConnected` "a FIFO or socket no one reads"); the writes that follow
/// block as usual.
pub fn open_writer(path: &std::path::Path) -> io::Result<std::fs::File> {
    let file =
        open_without_waiting(std::fs::OpenOptions::new().write(true), path).map_err(|e| match e
            .raw_os_error()
        {
            Some(libc::ENXIO) => {
                io::Error::new(io::ErrorKind::NotConnected, "a FIFO or socket no one reads")
            }
            _ => e,
        })?;
    clear_nonblock(&file)?;
    Ok(file)
}

/// Clears `O_NONBLOCK` on a descriptor opened with it.
fn clear_nonblock(file: &std::fs::File) -> io::Result<()> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: F_GETFL and F_SETFL on a descriptor `file` owns.
    unsafe {
        let fd = file.as_raw_fd();
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether a thread can be pinned to `cpu`: tried on a thread of its own
/// (the caller's mask is left alone; a thread may pin itself outside the
/// process's starting mask, e.g. systemd's `CPUAffinity=`, but not outside
/// its cpuset or the CPUs online).
pub fn can_pin_to(cpu: usize) -> io::Result<()> {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("pin-trial".into())
            .spawn_scoped(s, || pin_to_cpu(cpu))?
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the trial thread panicked")))
    })
}

/// The kernel's list of CPUs online (`0-3,8`), if it says.
pub fn cpus_online() -> Option<String> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .map(|s| s.trim().to_string())
}

/// Pins the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set. `cpu` is
    // below CPU_SETSIZE once past the check below, so CPU_SET writes
    // inside the set (it indexes its words, and would panic past them).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cpu {cpu} out of range"),
            ));
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The processes holding an `flock` on the file `(device, inode)`, as
/// (pid, effective uid), from `/proc/locks`; the uid is `None` when it
/// cannot be read (a process that has just ended, or one in another pid
/// namespace, shown as pid 0).
pub fn lock_holders((dev, ino): (u64, u64)) -> io::Result<Vec<(u32, Option<u32>)>> {
    // /proc/locks names a file as MAJOR:MINOR:INODE, the numbers in hex
    // and the inode in decimal.
    let file = format!("{:02x}:{:02x}:{ino}", libc::major(dev), libc::minor(dev));
    let text = std::fs::read_to_string("/proc/locks")?;
    Ok(text
        .lines()
        .filter_map(|line| {
            // "1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF"; a waiter's
            // line has "->" after the number, and holds nothing.
            let w: Vec<&str> = line.split_whitespace().skip(1).collect();
            (w.first() == Some(&"FLOCK") && w.get(4) == Some(&file.as_str())).then_some(())?;
            let pid: u32 = w.get(3)?.parse().ok()?;
            Some((pid, process_uid(pid)))
        })
        .collect())
}

/// The effective uid of process `pid`, from `/proc/<pid>/status`.
fn process_uid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let uids = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    uids.split_whitespace().nth(1)?.parse().ok()
}

static SHUTDOWN: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    SHUTDOWN.store(true, Ordering::Relaxed);
}

/// A write past the file-size limit (`ulimit -f`, systemd's
/// `LimitFSIZE=`) fails with EFBIG instead of ending the process
/// (SIGXFSZ's default action, which leaves no line saying why and a
/// half-written file): a recording growing past it stops alone, as on a
/// full disk, and any other command's output fails with one line.
pub fn fail_writes_past_the_size_limit() -> io::Result<()> {
    // SAFETY: sets a signal's disposition to ignore; no handler runs.
    if unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) } == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes SIGINT, SIGTERM and SIGHUP (the terminal or ssh session that
/// started it closing) set a flag instead of killing the process, and
/// returns that flag. A SIGHUP ignored when the process started (`nohup`)
/// stays ignored. SIGXFSZ is ignored: a write past a file-size limit fails
/// (EFBIG) instead of ending the process.
pub fn shutdown_on_signals() -> io::Result<&'static AtomicBool> {
    fail_writes_past_the_size_limit()?;
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        if sig == libc::SIGHUP && ignored(sig)? {
            continue;
        }
        // SAFETY: installs a handler that only stores to an atomic.
        let previous = unsafe {
            libc::signal(
                sig,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            )
        };
        if previous == libc::SIG_ERR {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(&SHUTDOWN)
}

/// Whether `sig` is ignored (as `nohup` leaves SIGHUP), asked without
/// changing it.
fn ignored(sig: libc::c_int) -> io::Result<bool> {
    // SAFETY: sigaction with a null new action only reads the current one
    // into `old`, plain data zeroed first.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(old.sa_sigaction == libc::SIG_IGN)
    }
}

/// Writes `bytes` to standard output whole, unless its reader stopped
/// reading and `stop` is set (then `Ok(false)`): each write waits for room
/// 100 ms at a time and writes at most 4,096 bytes (the room a pipe that
/// polls writable has); a wait that found no room gives up once `stop`
/// is set. So a reader that stopped reading (a full pipe, a FIFO) cannot
/// hold a signal's stop off, and one that makes room at least every
/// 100 ms gets every frame and line whole, the last after a stop too (a
/// slower one gets it whole unless a stop is set while it writes). What
/// Rust's own `stdout` buffers is flushed first.
pub fn write_stdout_until(bytes: &[u8], stop: &AtomicBool) -> io::Result<bool> {
    write_stdout_patiently(bytes, stop, 1)
}

/// [`write_stdout_until`], giving up only after `waits` waits of 100 ms in
/// a row found no room while `stop` is set: for output that follows a
/// stop already set (a report after Ctrl-C), so that a reader that reads
/// slowly still gets it whole and one that stopped holds the exit off
/// for `waits` × 100 ms at most.
pub fn write_stdout_patiently(bytes: &[u8], stop: &AtomicBool, waits: u32) -> io::Result<bool> {
    use std::io::Write;
    std::io::stdout().flush()?;
    write_until(libc::STDOUT_FILENO, bytes, stop, waits)
}

/// [`write_stdout_patiently`] on descriptor `fd`, Rust's buffers aside.
fn write_until(fd: libc::c_int, bytes: &[u8], stop: &AtomicBool, waits: u32) -> io::Result<bool> {
    let mut rest = bytes;
    // Waits in a row that found no room.
    let mut idle = 0u32;
    while !rest.is_empty() {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: one pollfd, ours, for the call's length.
        let ready = unsafe { libc::poll(&mut p, 1, 100) };
        if ready < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if ready == 0 {
            // No room for 100 ms: the reader stopped reading.
            idle = idle.saturating_add(1);
            if stop.load(Ordering::Relaxed) && idle >= waits {
                return Ok(false);
            }
            continue;
        }
        idle = 0;
        let chunk = &rest[..rest.len().min(4096)];
        // SAFETY: writes from a live slice of `chunk.len()` bytes.
        let n = unsafe { libc::write(fd, chunk.as_ptr().cast(), chunk.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock => continue,
                _ => return Err(e),
            }
        }
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        rest = &rest[n as usize..];
    }
    Ok(true)
}

static RESYNC: AtomicBool = AtomicBool::new(false);

extern "C" fn on_resync(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    RESYNC.store(true, Ordering::Relaxed);
}

/// Makes SIGUSR1 set a flag (an operator's request that feeds resynchronise
/// from their venue's snapshot) instead of killing the process, and returns
/// that flag; whoever acts on it clears it.
pub fn resync_on_sigusr1() -> io::Result<&'static AtomicBool> {
    // SAFETY: installs a handler that only stores to an atomic.
    let previous = unsafe {
        libc::signal(
            libc::SIGUSR1,
            on_resync as extern "C" fn(libc::c_int) as libc::sighandler_t,
        )
    };
    if previous == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(&RESYNC)
}

/// Waits at most `timeout` (whole ms, at least 1 unless zero) for any of
/// `fds` to be ready as each asks (`poll(2)`); their `revents` say which.
/// Returns how many are ready (0: the time ran out).
pub fn poll(fds: &mut [libc::pollfd], timeout: std::time::Duration) -> io::Result<usize> {
    let ms = match timeout.as_millis() {
        0 if !timeout.is_zero() => 1,
        ms => ms.min(libc::c_int::MAX as u128) as libc::c_int,
    };
    // SAFETY: `fds` is a valid, exclusively borrowed array of
    // `fds.len()` pollfd structures that outlives the call; `poll` only
    // writes their `revents`.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Most rows or columns taken from `$LINES` or `$COLUMNS`: larger is no
/// terminal's.
const TERMINAL_MAX: usize = 100_000;

/// The terminal's size as (rows, columns): `$LINES` and `$COLUMNS` when both
/// are set to numbers from 1 to [`TERMINAL_MAX`], else the TIOCGWINSZ ioctl
/// on stdout; `None` when stdout is not a terminal.
pub fn terminal_size() -> Option<(usize, usize)> {
    let env = |k: &str| {
        std::env::var(k)
            .ok()?
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|&n| (1..=TERMINAL_MAX).contains(&n))
    };
    if let (Some(rows), Some(cols)) = (env("LINES"), env("COLUMNS")) {
        return Some((rows, cols));
    }
    // SAFETY: winsize is plain data; TIOCGWINSZ only writes into it, and
    // fails harmlessly when fd 1 is not a terminal.
    let ws = unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        if libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) != 0 {
            return None;
        }
        ws
    };
    (ws.ws_row > 0 && ws.ws_col > 0).then_some((ws.ws_row as usize, ws.ws_col as usize))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::time::{Duration, Instant};

    /// A pipe of one page: (read end, write end).
    fn small_pipe() -> (std::fs::File, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: pipe(2) fills two descriptors, owned from here on.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: each descriptor is open and owned by nothing else.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fcntl on a descriptor this test owns.
        unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, 4096) };
        (std::fs::File::from(r), w)
    }

    /// A reader that reads (a page at a time here) gets the whole frame
    /// though the stop came first; one that stopped reading makes the
    /// write give up soon after the stop.
    #[test]
    fn a_write_finishes_for_a_reader_and_gives_up_on_a_stuck_one() {
        static STOP: AtomicBool = AtomicBool::new(false);
        let frame: Vec<u8> = (0..64 * 1024).map(|k| k as u8).collect();
        let (mut r, w) = small_pipe();
        // The stop comes while the frame is being written (once the reader
        // has taken its first page), as Ctrl-C would.
        let reader = std::thread::spawn(move || {
            let (mut got, mut buf) = (Vec::new(), [0u8; 1024]);
            loop {
                match r.read(&mut buf) {
                    Ok(0) | Err(_) => return got,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
                if got.len() >= 4096 {
                    STOP.store(true, Ordering::Relaxed);
                }
            }
        });
        assert!(write_until(w.as_raw_fd(), &frame, &STOP, 1).unwrap());
        drop(w);
        assert_eq!(reader.join().unwrap(), frame);
        assert!(STOP.load(Ordering::Relaxed));

        let (_r, w) = small_pipe();
        let begun = Instant::now();
        assert!(!write_until(w.as_raw_fd(), &frame, &STOP, 1).unwrap());
        assert!(begun.elapsed() < Duration::from_secs(5));
    }

    /// With the stop set before it begins, a patient write still reaches
    /// a reader that takes a page every 150 ms (more than one wait of
    /// 100 ms between its reads), and gives up on a stuck one only after
    /// its waits in a row.
    #[test]
    fn a_patient_write_waits_out_a_slow_reader_and_not_a_stuck_one() {
        static STOP: AtomicBool = AtomicBool::new(true);
        let frame: Vec<u8> = (0..24 * 1024).map(|k| k as u8).collect();
        let (mut r, w) = small_pipe();
        let reader = std::thread::spawn(move || {
            let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
            loop {
                std::thread::sleep(Duration::from_millis(150));
                match r.read(&mut buf) {
                    Ok(0) | Err(_) => return got,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
        });
        assert!(write_until(w.as_raw_fd(), &frame, &STOP, 20).unwrap());
        drop(w);
        assert_eq!(reader.join().unwrap(), frame);
        // One wait, as a write after no stop has it: given up mid-way.
        let (_r, w) = small_pipe();
        let begun = Instant::now();
        assert!(!write_until(w.as_raw_fd(), &frame, &STOP, 5).unwrap());
        let took = begun.elapsed();
        assert!(
            took >= Duration::from_millis(500) && took < Duration::from_secs(5),
            "{took:?}"
        );
    }
}
