//! `tickguard stat --once` on a publication built from a shipped fixture:
//! byte-for-byte against a golden file (the writer's pid masked).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use tickguard::capture::CaptureReader;
use tickguard::config::Config;
use tickguard::handler::Handler;
use tickguard::replay::Router;
use tickguard::shm::Publication;
use tickguard::state::StateTable;

const T0: u64 = 1_767_603_600_000_000_000;
const MS: u64 = 1_000_000;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Replays `capture` into a fresh publication at `shm`, stopping at `until`
/// (ns), as a sidecar would have published it then.
fn publish(shm: &Path, capture: &Path, until: u64) -> Arc<Publication> {
    let config = Config::load(&fixtures().join("config.toml")).unwrap();
    let p = Arc::new(Publication::create(shm, 0o640, &config, T0 - 1_000 * MS, 1_000_000).unwrap());
    let mut h = Handler::with_table(&config, StateTable::shared(p.clone()), 4096);
    let router = Router::new(&config);
    let mut reader = CaptureReader::open(capture).unwrap();
    reader
        .for_each(|d| {
            if d.time_ns <= until {
                if let Some(feed) = router.route(d.dst) {
                    let _ = h.on_datagram(feed, d.payload, d.time_ns);
                }
            }
        })
        .unwrap();
    h.publish_counters();
    p.heartbeat(until);
    p.ready();
    p
}

fn stat(shm: &Path, now: u64) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_tickguard"))
        .args([
            "stat",
            "--once",
            "--dead-after-ms",
            "1000",
            "--now",
            &now.to_string(),
            "--shm",
        ])
        .arg(shm)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    // The writer is this test process: mask its pid.
    let pid = format!("writer pid {}", std::process::id());
    text.replace(&pid, "writer pid PID")
        .replace(&shm.display().to_string(), "SHM")
}

#[test]
fn stat_once_matches_its_golden_output() {
    let shm = PathBuf::from(format!(
        "/dev/shm/tickguard-stat-test-{}",
        std::process::id()
    ));
    let at = T0 + 4_300 * MS;
    let _p = publish(&shm, &fixtures().join("scenario-vlan-ns.pcap"), at);
    let text = stat(&shm, at + 50 * MS);
    let golden = fixtures().join("scenario-vlan-ns.stat-4350ms.txt");
    if std::env::var_os("TICKGUARD_BLESS").is_some() {
        std::fs::write(&golden, &text).unwrap();
    }
    let expected = std::fs::read_to_string(&golden).unwrap_or_default();
    let _ = std::fs::remove_file(&shm);
    assert!(
        text == expected,
        "stat output differs from {}:\n{text}",
        golden.display()
    );
    // What the story says at 4.35 s: XAUUSD old at the source, AAPL suspect after its gap.
    assert!(
        text.lines()
            .any(|l| l.contains("XAUUSD") && l.contains("stale_at_source")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("AAPL") && l.contains("suspect")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("rejected by reason:") && l.contains("bad_magic 1")),
        "{text}"
    );
    // Sorted worst first: the first symbol row is not ok.
    let first_row = text
        .lines()
        .skip_while(|l| !(l.starts_with("feed ") && l.contains("symbol")))
        .nth(1)
        .unwrap_or("");
    assert!(!first_row.contains(" ok "), "{text}");
}

#[test]
fn stat_of_a_dead_writer_says_so() {
    let shm = PathBuf::from(format!(
        "/dev/shm/tickguard-stat-dead-{}",
        std::process::id()
    ));
    let at = T0 + 2_000 * MS;
    let _p = publish(&shm, &fixtures().join("scenario-vlan-ns.pcap"), at);
    let text = stat(&shm, at + 5_000 * MS);
    let _ = std::fs::remove_file(&shm);
    assert!(text.contains("writer dead"), "{text}");
    assert!(
        text.contains("ok 0"),
        "a dead writer makes every symbol stale: {text}"
    );
}
