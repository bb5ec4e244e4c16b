//! Real multicast, two lines, injected loss, in a network namespace this test
//! creates (`ip netns add`, `lo` up with multicast and a 224.0.0.0/4 route):
//! `tickguard simulate` and `tickguard run` inside it, verdicts read from
//! outside by other processes through the shared memory (the namespace
//! shares /dev/shm). Needs root and iproute2; CI runs as root.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use tickguard::reader::now_ns;
use tickguard::shm::counter;
use tickguard::Reader;

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tickguard"))
}

struct Netns(String);

impl Netns {
    fn create(name: &str) -> Netns {
        let _ = Command::new("ip").args(["netns", "del", name]).output();
        let ns = Netns(name.to_string());
        ns.ip(&["netns", "add", name]);
        for args in [
            &["link", "set", "lo", "up"][..],
            &["link", "set", "lo", "multicast", "on"],
            &["route", "add", "224.0.0.0/4", "dev", "lo"],
        ] {
            let mut full = vec!["netns", "exec", name, "ip"];
            full.extend_from_slice(args);
            ns.ip(&full);
        }
        ns
    }

    fn ip(&self, args: &[&str]) {
        let out = Command::new("ip")
            .args(args)
            .output()
            .expect("iproute2 `ip` is needed");
        assert!(
            out.status.success(),
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts `tickguard run` inside the namespace (recording to `record`
    /// if given) and waits until its publication answers.
    fn start_sidecar(&self, cfg: &Path, shm: &Path, record: Option<&Path>) -> Killed {
        let mut cmd = self.command(&bin());
        cmd.arg("run")
            .arg("--config")
            .arg(cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(r) = record {
            cmd.arg("--record").arg(r);
        }
        let sidecar = Killed(cmd.spawn().unwrap());
        let deadline = Instant::now() + Duration::from_secs(20);
        while !Reader::open(shm).health(now_ns()).is_ok() {
            assert!(
                Instant::now() < deadline,
                "sidecar did not come up in the namespace"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        sidecar
    }

    /// A command run inside the namespace.
    fn command(&self, program: &Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0]).arg(program);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn live_records(reader: &Reader) -> std::collections::BTreeMap<String, tickguard::state::Record> {
    reader
        .records()
        .into_iter()
        .filter_map(|r| Some((r.symbol?.to_string(), r)))
        .collect()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn multicast_two_lines_with_loss_in_a_namespace() {
    if !is_root() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run this test as root"
        );
        eprintln!("skipped: needs root to create a network namespace");
        return;
    }
    let pid = std::process::id();
    let ns = Netns::create(&format!("tickguard-test-{pid}"));
    let dir = tempfile::tempdir().unwrap();
    let shm = PathBuf::from(format!("/dev/shm/tickguard-netns-{pid}"));
    let rec = dir.path().join("received.pcap");
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[state]
capacity = 4096
[metrics]
enabled = false
[sidecar]
shm_path = "{}"
interface = "127.0.0.1"
idle = "sleep"
idle_sleep_us = 50
dead_after_ms = 2000
[[feed]]
name = "mc"
kind = "full"
lines = ["239.77.0.1:31001", "239.77.0.2:31002"]
stale_threshold_ms = 60000
source_threshold_ms = 60000
"#,
            shm.display()
        ),
    )
    .unwrap();

    let sidecar = ns.start_sidecar(&cfg, &shm, Some(&rec));

    let sim = ns
        .command(&bin())
        .args([
            "simulate",
            "--line-a",
            "239.77.0.1:31001",
            "--line-b",
            "239.77.0.2:31002",
            "--symbols",
            "20",
            "--rate",
            "20000",
            "--count",
            "20000",
            "--loss-a",
            "5",
            "--loss-b",
            "5",
            "--heartbeat-ms",
            "50",
            "--seed",
            "11",
            "--report",
        ])
        .output()
        .unwrap();
    assert!(
        sim.status.success(),
        "simulate: {}",
        String::from_utf8_lossy(&sim.stderr)
    );
    let report = json(&sim);
    let sent: u64 = report["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["datagrams_sent"].as_u64().unwrap())
        .sum();
    let lost_on_both = report["ticks_lost_on_both_lines"].as_u64().unwrap();
    assert!(
        lost_on_both > 0,
        "5% loss per line over 20,000 quotes loses some on both"
    );

    let reader = Reader::open(&shm);
    let deadline = Instant::now() + Duration::from_secs(20);
    while reader.counter(0, counter::PACKETS).unwrap_or(0) < sent {
        assert!(
            Instant::now() < deadline,
            "{} of {sent} datagrams arrived",
            reader.counter(0, counter::PACKETS).unwrap_or(0)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        reader.counter(0, counter::PACKETS),
        Some(sent),
        "nothing extra arrived"
    );
    assert_eq!(reader.counter(0, counter::KERNEL_DROPS), Some(0));
    assert_eq!(reader.counter(0, counter::REJECTED), Some(0));
    assert_eq!(
        reader.counter(0, counter::TICKS_LOST),
        Some(lost_on_both),
        "lost exactly what neither line carried"
    );

    // Every symbol, from another process: ok (a full feed, heartbeats after the last loss).
    let last: &serde_json::Map<String, serde_json::Value> =
        report["last_sequence"].as_object().unwrap();
    assert_eq!(last.len(), 20);
    for (symbol, seq) in last {
        let out = Command::new(bin())
            .args(["check", "mc", symbol, "--json", "--shm"])
            .arg(&shm)
            .output()
            .unwrap();
        let v = json(&out);
        assert_eq!(out.status.code(), Some(0), "{symbol}: {v}");
        let h = reader.lookup("mc", symbol).expect("published");
        let rec = &live_records(&reader)[&h.symbol().to_string()];
        assert_eq!(Some(rec.state.seq.last_seq), seq.as_u64(), "{symbol}");
    }

    // Clean stop, then the recording replays to the same state.
    let live = reader.records();
    let mut sidecar = sidecar;
    Command::new("kill")
        .arg("-TERM")
        .arg(sidecar.0.id().to_string())
        .status()
        .unwrap();
    assert!(sidecar.0.wait().unwrap().success());
    let fs = &common::replay_recording(&cfg, &rec, "mc");
    assert_eq!(fs.packets, sent);
    assert_eq!(fs.ticks_lost, lost_on_both);
    common::assert_same_state(&live, fs);
    let _ = std::fs::remove_file(&shm);
}

/// A feed with a `source` joins source-specifically: datagrams to its group
/// from any other sender never reach the handler.
#[test]
fn source_specific_join_ignores_spoofed_senders() {
    if !is_root() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run this test as root"
        );
        eprintln!("skipped: needs root to create a network namespace");
        return;
    }
    let pid = std::process::id();
    let ns = Netns::create(&format!("tickguard-ssm-{pid}"));
    let dir = tempfile::tempdir().unwrap();
    let shm = PathBuf::from(format!("/dev/shm/tickguard-ssm-{pid}"));
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[metrics]
enabled = false
[sidecar]
shm_path = "{}"
interface = "127.0.0.1"
idle = "sleep"
dead_after_ms = 2000
[[feed]]
name = "ssm"
kind = "full"
lines = ["232.1.1.1:32001"]
source = "127.0.0.1"
stale_threshold_ms = 60000
source_threshold_ms = 60000
"#,
            shm.display()
        ),
    )
    .unwrap();
    let _sidecar = ns.start_sidecar(&cfg, &shm, None);
    let send = |source: &str, names: &str| {
        let out = ns
            .command(&bin())
            .args([
                "simulate",
                "--line-a",
                "232.1.1.1:32001",
                "--source",
                source,
                "--names",
                names,
            ])
            .args(["--rate", "2000", "--count", "200", "--report"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "simulate: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        json(&out)["lines"][0]["datagrams_sent"].as_u64().unwrap()
    };
    let spoofed = send("127.0.0.9", "SPOOF");
    let real = send("127.0.0.1", "REAL");
    assert!(spoofed > 0 && real > 0);
    let reader = Reader::open(&shm);
    let deadline = Instant::now() + Duration::from_secs(20);
    while reader.counter(0, counter::PACKETS).unwrap_or(0) < real {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        reader.counter(0, counter::PACKETS),
        Some(real),
        "only the configured source's datagrams"
    );
    assert!(reader.lookup("ssm", "REAL").is_some());
    assert!(
        reader.lookup("ssm", "SPOOF").is_none(),
        "the spoofed sender's symbol never arrived"
    );
    let _ = std::fs::remove_file(&shm);
}
