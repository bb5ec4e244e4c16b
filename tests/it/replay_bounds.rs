//! What a replay costs, whatever the capture: memory that does not follow
//! the packet count when the delay keeps rising, and a log that does not
//! follow the count of rejected packets when the capture's time steps back;
//! and what a replay takes from a capture that is not as live received it:
//! time stepping back, senders a source-specific join would have dropped.

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
    capture_from(dir, n, |i| {
        let (t, payload) = packet(i);
        (t, SENDER, payload)
    })
}

/// The sender of [`capture`]'s datagrams.
const SENDER: &str = "10.0.0.1:5000";

/// [`capture`] with each datagram's sender too.
fn capture_from(
    dir: &Path,
    n: u64,
    packet: impl Fn(u64) -> (u64, &'static str, Vec<u8>),
) -> PathBuf {
    let path = dir.join("capture.pcap");
    let file = BufWriter::with_capacity(1 << 20, std::fs::File::create(&path).unwrap());
    let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::RawIp).unwrap();
    let dst: SocketAddrV4 = LINE.parse().unwrap();
    for i in 0..n {
        let (t, src, payload) = packet(i);
        w.write_udp(t, src.parse().unwrap(), dst, &payload).unwrap();
    }
    w.finish().unwrap();
    path
}

/// One SQF quote of EURUSD, sequence `seq`, sent and made 1 ms before `t`.
fn quote(t: u64, seq: u64, bid: f64, ask: f64) -> Vec<u8> {
    let mut b = PacketBuilder::new(t - 1_000_000);
    b.quote(
        tickguard::symbol::Symbol::parse("EURUSD").unwrap(),
        seq,
        t - 1_000_000,
        bid,
        ask,
    );
    b.finish()
}

/// Replays `cap` under `cfg` with checks of EURUSD at `at` (ns): the
/// answers' reasons (empty: ok), the summary and the stderr.
fn replay_checks(
    dir: &Path,
    cap: &Path,
    cfg: &Path,
    at: &[u64],
) -> (Vec<Vec<String>>, serde_json::Value, String) {
    replay_checks_of(dir, cap, cfg, "lp1", at)
}

/// [`replay_checks`] of EURUSD on `feed`.
fn replay_checks_of(
    dir: &Path,
    cap: &Path,
    cfg: &Path,
    feed: &str,
    at: &[u64],
) -> (Vec<Vec<String>>, serde_json::Value, String) {
    let checks = dir.join("checks.csv");
    let rows: String = at.iter().map(|t| format!("{t},{feed},EURUSD\n")).collect();
    std::fs::write(&checks, format!("time_ns,feed,symbol\n{rows}")).unwrap();
    let summary = dir.join("summary.json");
    let out = Command::cargo_bin("tickguard")
        .unwrap()
        .arg("replay")
        .arg(cap)
        .arg("--config")
        .arg(cfg)
        .arg("--checks")
        .arg(&checks)
        .arg("--summary")
        .arg(&summary)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let answers = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let reasons = v["reasons"].as_array().unwrap();
            reasons
                .iter()
                .map(|r| r.as_str().unwrap().to_string())
                .collect()
        })
        .collect();
    let summary = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    (answers, summary, stderr)
}

const MS: u64 = 1_000_000;

/// A datagram stamped before one its feed already took is applied at its
/// own stamp, as the contract says (a record stamped 1970 after one at
/// T0 + 100 ms: the symbol reads `stale` and `stale_at_source` at
/// T0 + 250 ms, never fresher than its stamps say), and a check is
/// answered before the first datagram later than it, in the file's order.
/// Both are counted in the summary (`time_steps_back`, the key absent when
/// none) and told in one warning with the largest step.
#[test]
fn a_capture_stepping_back_is_applied_at_its_stamps_and_said() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_of(dir.path(), "kind = \"full\"");
    // (arrival, sent): the third stamped 1970, sent after the second.
    let times = [(T0, T0), (T0 + 100 * MS, T0 + 100 * MS), (0, T0 + 100 * MS)];
    let cap = capture(dir.path(), 3, |i| {
        let (t, sent) = times[i as usize];
        (t, quote(sent, i + 1, 1.1, 1.2))
    });
    let (answers, summary, stderr) = replay_checks(dir.path(), &cap, &cfg, &[T0 + 250 * MS]);
    assert_eq!(
        answers,
        vec![vec!["stale".to_string(), "stale_at_source".to_string()]],
        "{stderr}"
    );
    assert_eq!(summary["capture"]["time_steps_back"], 1, "{summary}");
    assert_eq!(
        summary["feeds"]["lp1"]["symbols"]["EURUSD"]["last_alive"], 0,
        "{summary}"
    );
    let warned: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("time steps back"))
        .collect();
    assert_eq!(warned.len(), 1, "{stderr}");
    assert!(
        warned[0].contains("at 1 of the records its feeds took (by up to 1767600000.100 s)"),
        "{stderr}"
    );

    // File order answers: the check at +300 ms comes before the datagram
    // stamped +2 s, so the crossed quote after it (stamped +100 ms) is not
    // seen by it, but by the one at +2.1 s, and at its own stamp: 2 s
    // before that check, silent past the threshold.
    let times = [T0, T0 + 2_000 * MS, T0 + 100 * MS];
    let cap = capture(dir.path(), 3, |i| {
        let t = times[i as usize];
        let (bid, ask) = if i == 2 { (1.3, 1.2) } else { (1.1, 1.2) };
        (t, quote(t, i + 1, bid, ask))
    });
    let (answers, summary, _) =
        replay_checks(dir.path(), &cap, &cfg, &[T0 + 300 * MS, T0 + 2_100 * MS]);
    assert_eq!(
        answers,
        vec![
            vec![],
            vec!["stale".to_string(), "invalid_price".to_string()]
        ]
    );
    assert_eq!(summary["capture"]["time_steps_back"], 1, "{summary}");

    // In order: no key, no warning.
    let cap = capture(dir.path(), 2, |i| {
        (T0 + i * MS, quote(T0 + i * MS, i + 1, 1.1, 1.2))
    });
    let (_, summary, stderr) = replay_checks(dir.path(), &cap, &cfg, &[T0 + 2 * MS]);
    assert!(
        summary["capture"].get("time_steps_back").is_none(),
        "{summary}"
    );
    assert!(!stderr.contains("steps back"), "{stderr}");
}

/// A capture of two feeds out of order between them (`mergecap -a`, or a
/// `run --record` recording whose feeds each merged up to their own
/// horizon): a check is answered after everything of its feed that
/// arrived at or before it, so lp2's check at 1.5 s sees lp2's quote of
/// 1.0 s, read after lp1's of 2.0 s; each feed's datagrams are in time
/// order, so nothing is counted as stepping back; and the state does not
/// depend on which checks are asked.
#[test]
fn a_check_waits_for_its_feeds_datagrams_read_after_another_feeds_later_one() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("two.toml");
    std::fs::write(
        &cfg,
        "[[feed]]\nname = \"lp1\"\nkind = \"full\"\nlines = [\"239.1.1.1:30001\"]\n\
         stale_threshold_ms = 500\nsource_threshold_ms = 2000\n\
         [[feed]]\nname = \"lp2\"\nkind = \"full\"\nlines = [\"239.1.1.2:30002\"]\n\
         stale_threshold_ms = 500\nsource_threshold_ms = 2000\n",
    )
    .unwrap();
    let cap = dir.path().join("two.pcap");
    let file = std::fs::File::create(&cap).unwrap();
    let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::RawIp).unwrap();
    let src: SocketAddrV4 = SENDER.parse().unwrap();
    for (t, to, seq) in [
        (T0, "239.1.1.2:30002", 1),
        (T0 + 2_000 * MS, "239.1.1.1:30001", 1),
        (T0 + 1_000 * MS, "239.1.1.2:30002", 2),
    ] {
        w.write_udp(t, src, to.parse().unwrap(), &quote(t, seq, 1.1, 1.2))
            .unwrap();
    }
    w.finish().unwrap();
    let at = [T0 + 1_500 * MS, T0 + 2_200 * MS];
    let (answers, json, stderr) = replay_checks_of(dir.path(), &cap, &cfg, "lp2", &at);
    assert!(json["capture"].get("time_steps_back").is_none(), "{json}");
    assert!(!stderr.contains("steps back"), "{stderr}");
    // At 1.5 s its quote of 1.0 s is 500 ms old: alive (not stale).
    assert!(answers[0].is_empty(), "{answers:?}");
    assert_eq!(answers[1], ["stale"], "{answers:?}");
    let alive = &json["feeds"]["lp2"]["symbols"]["EURUSD"]["last_alive"];
    assert_eq!(*alive, T0 + 1_000 * MS, "{json}");
    let (alone, json, _) = replay_checks_of(dir.path(), &cap, &cfg, "lp2", &at[1..]);
    assert_eq!(
        json["feeds"]["lp2"]["symbols"]["EURUSD"]["last_alive"],
        *alive
    );
    assert_eq!(alone[..], answers[1..]);
}

/// A feed with `source` joins its lines for that sender only, live: the
/// kernel drops another sender's datagrams to them. A replay drops them
/// too, counts them (`wrong_source`, the key absent when none) and warns;
/// without `source` they are taken as before.
#[test]
fn a_replay_drops_what_a_source_specific_join_would() {
    let dir = tempfile::tempdir().unwrap();
    // A forged quote from another sender between the real ones: far ahead
    // in sequence, at another price.
    let cap = capture_from(dir.path(), 4, |i| match i {
        1 => (
            T0 + 50 * MS,
            "10.6.6.6:5000",
            quote(T0 + 50 * MS, 1_000, 9.9, 10.0),
        ),
        _ => (
            T0 + i * 100 * MS,
            SENDER,
            quote(T0 + i * 100 * MS, i + 1, 1.1, 1.2),
        ),
    });
    let at = [T0 + 350 * MS];
    let ssm = config_of(dir.path(), "kind = \"full\"\nsource = \"10.0.0.1\"");
    let (answers, summary, stderr) = replay_checks(dir.path(), &cap, &ssm, &at);
    assert_eq!(answers, vec![Vec::<String>::new()], "{stderr}");
    assert_eq!(summary["capture"]["wrong_source"], 1, "{summary}");
    assert_eq!(
        summary["feeds"]["lp1"]["symbols"]["EURUSD"]["last_seq"], 4,
        "{summary}"
    );
    assert!(
        stderr.contains("1 datagrams to a feed's line came from another sender than its `source`"),
        "{stderr}"
    );
    assert_eq!(
        summary["feeds"]["lp1"]["symbols"]["EURUSD"]["bid"], 1.1,
        "{summary}"
    );
    // Without `source` the forged quote is the symbol's (the real ones
    // after it are old sequences).
    let any = config_of(dir.path(), "kind = \"full\"");
    let (_, summary, _) = replay_checks(dir.path(), &cap, &any, &at);
    assert!(
        summary["capture"].get("wrong_source").is_none(),
        "{summary}"
    );
    assert_eq!(
        summary["feeds"]["lp1"]["symbols"]["EURUSD"]["last_seq"], 1_000,
        "{summary}"
    );
    assert_eq!(
        summary["feeds"]["lp1"]["symbols"]["EURUSD"]["bid"], 9.9,
        "{summary}"
    );
}

/// A datagram larger than the live receive buffer (9,216 bytes: a jumbo
/// frame's payload) is dropped live before any feed sees it; the replay
/// skips it as well, counts it and says so, so the symbol it carried a
/// quote of shows the same gap as live (ticks lost, not a quote applied).
#[test]
fn a_replay_skips_a_datagram_live_could_not_receive() {
    let dir = tempfile::tempdir().unwrap();
    let jumbo = |t: u64| {
        let mut b = PacketBuilder::new(t - MS);
        let eurusd = tickguard::symbol::Symbol::parse("EURUSD").unwrap();
        b.quote(eurusd, 2, t - MS, 1.1, 1.2);
        for k in 0..400 {
            let other = tickguard::symbol::Symbol::parse(&format!("S{k}")).unwrap();
            b.heartbeat(other, 1);
        }
        let bytes = b.finish();
        assert!(bytes.len() > 9_216, "{}", bytes.len());
        bytes
    };
    let cap = capture(dir.path(), 3, |i| {
        let t = T0 + (i + 1) * 100 * MS;
        match i {
            1 => (t, jumbo(t)),
            _ => (t, quote(t, i + 1, 1.1, 1.2)),
        }
    });
    let cfg = config(dir.path());
    let (_, summary, stderr) = replay_checks(dir.path(), &cap, &cfg, &[T0 + 400 * MS]);
    assert_eq!(summary["capture"]["oversized"], 1, "{summary}");
    let eurusd = &summary["feeds"]["lp1"]["symbols"]["EURUSD"];
    assert_eq!(
        (&eurusd["last_seq"], &eurusd["ticks_lost"]),
        (&3.into(), &1.into()),
        "{summary}"
    );
    assert!(
        stderr.contains("1 datagrams larger than 9216 bytes (the live receive buffer) skipped"),
        "{stderr}"
    );
}

/// A datagram too large for the live receive buffer that is addressed to
/// no feed's line is counted as unrouted, as live never receives it
/// (not as oversized): a capture none of whose datagrams reach a line
/// still says so; one to a line from another sender than its `source` is
/// counted as that sender's.
#[test]
fn an_oversized_datagram_to_no_line_is_unrouted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("capture.pcap");
    let file = BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::RawIp).unwrap();
    let (src, elsewhere) = (SENDER.parse().unwrap(), "239.9.9.9:5000".parse().unwrap());
    w.write_udp(T0, src, elsewhere, b"hello").unwrap();
    w.write_udp(T0 + MS, src, elsewhere, &[0u8; 9_300]).unwrap();
    w.finish().unwrap();
    let cfg = config(dir.path());
    let (_, summary, stderr) = replay_checks(dir.path(), &path, &cfg, &[T0 + 2 * MS]);
    assert_eq!(summary["capture"]["unrouted"], 2, "{summary}");
    assert!(
        summary["capture"].get("oversized").is_none_or(|v| v == 0),
        "{summary}"
    );
    assert!(
        stderr.contains("none of the capture's 2 datagrams is addressed to a feed's line"),
        "{stderr}"
    );
    assert!(!stderr.contains("larger than"), "{stderr}");
    // To the line from another sender than `source`: another's datagram,
    // oversized or not, as live counts it.
    let path = dir.path().join("other.pcap");
    let file = BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::RawIp).unwrap();
    let (other, line) = ("10.6.6.6:5000".parse().unwrap(), LINE.parse().unwrap());
    w.write_udp(T0, other, line, &[0u8; 9_300]).unwrap();
    w.finish().unwrap();
    let ssm = config_of(dir.path(), "kind = \"full\"\nsource = \"10.0.0.1\"");
    let (_, summary, _) = replay_checks(dir.path(), &path, &ssm, &[T0 + MS]);
    assert_eq!(summary["capture"]["wrong_source"], 1, "{summary}");
    assert!(
        summary["capture"].get("oversized").is_none_or(|v| v == 0),
        "{summary}"
    );
}

/// A capture whose snap length cut some of a feed's datagrams (and one
/// that holds a fragment of one) replays what it can and says why the
/// feed may show gaps live did not have: one line naming both counts.
#[test]
fn records_cut_short_or_fragmented_are_told() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("capture.pcap");
    let file = BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::RawIp).unwrap();
    let (src, dst) = (SENDER.parse().unwrap(), LINE.parse().unwrap());
    // A raw-IP frame of a datagram, as `write_udp` writes it.
    let frame = |t: u64, payload: &[u8]| {
        let mut one = CaptureWriter::new(Vec::new(), Format::PcapNanos, Link::RawIp).unwrap();
        one.write_udp(t, src, dst, payload).unwrap();
        // Past the 24-byte file header and the 16-byte record header.
        one.finish().unwrap()[40..].to_vec()
    };
    for i in 0..10u64 {
        let t = T0 + (i + 1) * MS;
        let q = quote(t, i + 1, 1.1, 1.2);
        match i {
            // Sequence 4 cut short: 100 bytes on the wire not captured.
            3 => {
                let f = frame(t, &q);
                w.write_record(t, &f[..f.len() - 4], f.len() as u32 + 96)
                    .unwrap();
            }
            // Sequence 6 cut too, but recorded as whole (its record's
            // lengths both the bytes kept).
            5 => {
                let f = frame(t, &q);
                w.write_frame(t, &f[..f.len() - 4]).unwrap();
            }
            // Sequence 7 as the first fragment of a datagram (MF set).
            6 => {
                let mut f = frame(t, &q);
                f[6] = 0x20;
                f[10..12].copy_from_slice(&[0, 0]);
                let sum = ip_checksum(&f[..20]);
                f[10..12].copy_from_slice(&sum.to_be_bytes());
                w.write_frame(t, &f).unwrap();
            }
            _ => w.write_udp(t, src, dst, &q).unwrap(),
        }
    }
    w.finish().unwrap();
    let cfg = config(dir.path());
    let (_, summary, stderr) = replay_checks(dir.path(), &path, &cfg, &[T0 + 20 * MS]);
    assert_eq!(
        (
            &summary["capture"]["truncated"],
            &summary["capture"]["ip_fragments"],
            &summary["capture"]["malformed"]
        ),
        (&1.into(), &1.into(), &1.into()),
        "{summary}"
    );
    assert!(
        stderr.contains(
            "3 of the capture's records were not read as whole UDP datagrams (1 cut short by the \
             capture (its snap length), 1 IP fragments, not reassembled, 1 shorter than their \
             headers say though recorded whole (cut by a tool that wrote the cut length as the \
             frame's?))"
        ),
        "{stderr}"
    );
    assert_eq!(
        summary["feeds"]["lp1"]["symbols"]["EURUSD"]["ticks_lost"], 3,
        "{summary}"
    );

    // No datagram read whole, mostly for another cause (TCP segments no
    // feed takes): the cut ones are still told.
    let file = BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::RawIp).unwrap();
    let server = "10.9.9.9:443".parse().unwrap();
    for i in 0..50u64 {
        w.write_tcp(T0 + i * MS, server, src, i as u32, 0x10, b"x")
            .unwrap();
    }
    for i in 0..3u64 {
        let t = T0 + (60 + i) * MS;
        let f = frame(t, &quote(t, i + 1, 1.1, 1.2));
        w.write_record(t, &f[..f.len() - 4], f.len() as u32 + 96)
            .unwrap();
    }
    w.finish().unwrap();
    let (_, summary, stderr) = replay_checks(dir.path(), &path, &cfg, &[T0 + 90 * MS]);
    assert_eq!(summary["capture"]["truncated"], 3, "{summary}");
    assert!(stderr.contains("mostly segments: 50"), "{stderr}");
    assert!(
        stderr.contains("3 of the capture's records were not read as whole UDP datagrams"),
        "{stderr}"
    );
}

/// The IPv4 header checksum of `header`.
fn ip_checksum(header: &[u8]) -> u16 {
    let sum: u32 = header
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    let folded = (sum & 0xffff) + (sum >> 16);
    !(((folded & 0xffff) + (folded >> 16)) as u16)
}

const T0: u64 = 1_767_600_000_000_000_000;

/// Packets a microsecond apart whose delay rises by a nanosecond each
/// (each a heartbeat, so that it is applied and timed): every one stays a
/// candidate for the window's minimum. The replay's peak
/// memory (max RSS of the child process) stays under 30 MB; without the
/// compact queue it took 50 MB at 1 M packets and 145 MB at 4 M.
/// `TICKGUARD_RISING_PACKETS` changes the count (1 M by default). Run in
/// a process of its own (as nextest runs each test): a child's peak counts
/// its parent's up to the exec, so a test beside it in one process that
/// peaked high (a panic's backtrace) would be counted too.
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
/// the rejected-packet log stays at a handful of lines, on an SQF feed and
/// on an ITCH one (each is taken at the latest time its feed took, so the
/// log's one line a second of capture time sees no time pass).
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
