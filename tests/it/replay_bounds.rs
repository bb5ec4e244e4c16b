//! What a replay costs, whatever the capture: memory that does not follow
//! the packet count when the delay keeps rising, and a log that does not
//! follow the count of rejected packets when the capture's time steps back.

use assert_cmd::Command;
use std::io::BufWriter;
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tickguard::capture::link::Link;
use tickguard::capture::write::{CaptureWriter, Format};
use tickguard::protocol::sqf::PacketBuilder;

const LINE: &str = "239.1.1.1:30001";

fn config(dir: &Path) -> PathBuf {
    config_of(dir, "kind = \"full\"\noffset_window_ms = 3600000")
}

/// [`config`] with `protocol` (its kind or protocol line, and its own keys).
fn config_of(dir: &Path, protocol: &str) -> PathBuf {
    let path = dir.join("config.toml");
    let text = format!(
        "[state]\ncapacity = 16\n[[feed]]\nname = \"lp1\"\n{protocol}\nlines = [\"{LINE}\"]\n\
         stale_threshold_ms = 500\nsource_threshold_ms = 2000\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Writes a raw-IP pcap (ns) of `n` datagrams to the feed, `packet(i)` giving
/// each one's arrival and payload.
fn capture(dir: &Path, n: u64, packet: impl Fn(u64) -> (u64, Vec<u8>)) -> PathBuf {
    let path = dir.join("capture.pcap");
    let file = BufWriter::with_capacity(1 << 20, std::fs::File::create(&path).unwrap());
    let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::RawIp).unwrap();
    let src: SocketAddrV4 = "10.0.0.1:5000".parse().unwrap();
    let dst: SocketAddrV4 = LINE.parse().unwrap();
    for i in 0..n {
        let (t, payload) = packet(i);
        w.write_udp(t, src, dst, &payload).unwrap();
    }
    w.finish().unwrap();
    path
}

const T0: u64 = 1_767_600_000_000_000_000;

/// Packets a microsecond apart whose delay rises by a nanosecond each
/// (each a heartbeat, so that it is applied and timed): every one stays a
/// candidate for the window's minimum. The replay's peak
/// memory (max RSS of the child process) stays under 30 MB; without the
/// compact queue it took 50 MB at 1 M packets and 145 MB at 4 M.
/// `TICKGUARD_RISING_PACKETS` changes the count (1 M by default).
#[test]
fn rising_delay_replays_in_bounded_memory() {
    let n: u64 = std::env::var("TICKGUARD_RISING_PACKETS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let cap = capture(dir.path(), n, |i| {
        let arrival = T0 + i * 1_000;
        let send = arrival - 1_000_000 - i;
        let mut b = PacketBuilder::new(send);
        b.heartbeat(tickguard::symbol::Symbol::parse("A").unwrap(), 1);
        (arrival, b.finish())
    });
    let cfg = config(dir.path());
    let summary = dir.path().join("summary.json");
    // Reaped by wait4 below, which also reports its peak memory.
    #[allow(clippy::zombie_processes)]
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .arg("replay")
        .arg(&cap)
        .arg("--config")
        .arg(&cfg)
        .arg("--summary")
        .arg(&summary)
        .spawn()
        .unwrap();
    let (status, max_rss_kib) = wait_with_rusage(child.id());
    assert_eq!(status, 0, "replay failed");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let feed = &json["feeds"]["lp1"];
    assert_eq!(feed["packets"], n, "{feed}");
    assert_eq!(feed["clock_offset_ns"], 1_000_000, "the exact minimum");
    eprintln!("{n} packets: max RSS {max_rss_kib} KiB");
    assert!(
        max_rss_kib < 30_000,
        "replay of {n} packets peaked at {max_rss_kib} KiB"
    );
}

/// Waits for the child `pid` and returns its exit status and its peak
/// resident memory, KiB.
fn wait_with_rusage(pid: u32) -> (i32, i64) {
    let mut status = 0;
    // SAFETY: rusage is plain data, filled by wait4 for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for a child this process spawned and has not reaped.
    let r = unsafe { libc::wait4(pid as i32, &mut status, 0, &mut usage) };
    assert_eq!(r, pid as i32, "wait4: {}", std::io::Error::last_os_error());
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    (code, usage.ru_maxrss)
}

/// 10,000 malformed datagrams, each a millisecond before the one before it:
/// the rejected-packet log stays at one line per second of capture time,
/// on an SQF feed and on an ITCH one.
#[test]
fn a_capture_stepping_back_logs_a_handful_of_lines() {
    let dir = tempfile::tempdir().unwrap();
    let n = 10_000;
    let cap = capture(dir.path(), n, |i| (T0 - i * 1_000_000, b"garbage".to_vec()));
    for protocol in [
        "kind = \"full\"\noffset_window_ms = 3600000",
        "protocol = \"itch50\"",
    ] {
        let out = Command::cargo_bin("tickguard")
            .unwrap()
            .arg("replay")
            .arg(&cap)
            .arg("--config")
            .arg(config_of(dir.path(), protocol))
            .env("RUST_LOG", "warn")
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines = stderr.matches("rejected malformed packet").count();
        assert!((1..=5).contains(&lines), "{protocol}: {lines} log lines");
    }
}
