//! Bad configurations through the real binary: every one ends with exit
//! status 2 and exactly one printable line on stderr naming the line and the
//! key, before anything is opened.

use assert_cmd::Command;
use std::path::{Path, PathBuf};
use tickguard::config::{ranges, Range};

const FEED: &str = r#"[[feed]]
name = "lp1"
kind = "full"
lines = ["127.0.0.1:30001"]
stale_threshold_ms = 500
source_threshold_ms = 2000
"#;

fn capture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenario-eth-us.pcap")
}

/// Runs `tickguard ARGS --config FILE` on `text` and returns (status, stderr).
fn fails(dir: &Path, text: &str, args: &[&str]) -> (Option<i32>, String) {
    let cfg = dir.join("bad.toml");
    std::fs::write(&cfg, text).unwrap();
    let out = Command::cargo_bin("tickguard")
        .unwrap()
        .args(args)
        .arg("--config")
        .arg(&cfg)
        .timeout(std::time::Duration::from_secs(20))
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// A configuration with `sidecar` and `metrics` keys in their tables (the
/// shared memory in `dir`, lines joined on loopback should a refusal ever
/// let `run` start, the exporter off), then `rest`.
fn config_text(dir: &Path, sidecar: &str, metrics: &str, rest: &str) -> String {
    let interface = match sidecar.contains("interface") {
        true => "",
        false => "interface = \"127.0.0.1\"\n",
    };
    format!(
        "[sidecar]\nshm_path = \"{}\"\n{interface}{sidecar}[metrics]\nenabled = false\n{metrics}{rest}",
        dir.join("shm").display()
    )
}

/// The configuration fails `replay` and `run` alike: exit 2, one short
/// printable line naming `key` and the line of the file where `at` first
/// occurs, and `run` creates no shared memory.
fn rejected(sidecar: &str, metrics: &str, rest: &str, at: &str, key: &str) {
    let dir = tempfile::tempdir().unwrap();
    let text = config_text(dir.path(), sidecar, metrics, rest);
    let line = 1 + text[..text.find(at).expect("marker")].matches('\n').count();
    let cap = capture();
    for args in [&["run"][..], &["replay", cap.to_str().unwrap()][..]] {
        let (code, err) = fails(dir.path(), &text, args);
        assert_eq!(code, Some(2), "{args:?} {key}: {err}");
        assert_eq!(err.matches('\n').count(), 1, "{args:?} one line: {err:?}");
        assert!(err.ends_with('\n'), "{err:?}");
        assert!(
            err.trim_end().chars().all(|c| !c.is_control()),
            "control characters echoed: {err:?}"
        );
        assert!(err.chars().count() < 500, "{} characters", err.len());
        assert!(err.contains(&format!("line {line}:")), "line {line}: {err}");
        assert!(err.contains(key), "{key}: {err}");
        assert!(
            !dir.path().join("shm").exists(),
            "{args:?} opened the shared memory"
        );
    }
}

/// A key no table takes, outside a feed as inside one, is refused
/// naming it: a typo (`shm_pth`, `dead_after_m`) is not left to its
/// default, a publication at another path or another dead writer's bound.
#[test]
fn unknown_keys_of_every_table_are_refused() {
    rejected("shm_pth = \"/x\"\n", "", FEED, "shm_pth", "shm_pth");
    rejected(
        "dead_after_m = 20\n",
        "",
        FEED,
        "dead_after_m",
        "dead_after_m",
    );
    rejected("", "enable = true\n", FEED, "enable =", "enable");
    for (rest, key) in [
        (format!("[state]\ncapcity = 16\n{FEED}"), "capcity"),
        (format!("[log]\nfromat = \"json\"\n{FEED}"), "fromat"),
    ] {
        rejected("", "", &rest, key, key);
    }
    // At the top, before any table.
    let dir = tempfile::tempdir().unwrap();
    let text = format!("verbose = true\n{}", config_text(dir.path(), "", "", FEED));
    let (code, err) = fails(dir.path(), &text, &["run"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("line 1:") && err.contains("verbose"), "{err}");
    assert!(!dir.path().join("shm").exists());
}

#[test]
fn capacity_beyond_16m_slots() {
    for v in ["4294967295", "16777217", "0"] {
        let rest = format!("[state]\ncapacity = {v}\n{FEED}");
        rejected("", "", &rest, "capacity", "capacity");
    }
}

#[test]
fn offset_queue_that_would_overflow_or_exhaust_memory() {
    for v in ["9223372036854775807", "4294967296", "1"] {
        let key = format!("offset_queue = {v}\n");
        rejected(&key, "", FEED, "offset_queue", "offset_queue");
    }
}

#[test]
fn idle_sleep_that_would_ignore_signals() {
    let keys = "idle = \"sleep\"\nidle_sleep_us = 9223372036854775807\n";
    rejected(keys, "", FEED, "idle_sleep_us", "idle_sleep_us");
}

/// A key that would do nothing as the rest of the file stands is refused,
/// naming what it needs: a tired operator who set it meant something.
#[test]
fn keys_that_would_do_nothing() {
    rejected(
        "idle_sleep_us = 200\n",
        "",
        FEED,
        "idle_sleep_us",
        "idle_sleep_us needs idle = \"sleep\"",
    );
    rejected(
        "idle = \"yield\"\nidle_sleep_us = 200\n",
        "",
        FEED,
        "idle_sleep_us",
        "idle_sleep_us needs idle = \"sleep\"",
    );
    // Kept though idle, its range checked: the contract's template puts
    // it under `clock_offset`, and one edit turns the file back to "auto".
    let fixed = format!("{FEED}clock_offset = 0\noffset_window_ms = 0\n");
    rejected("", "", &fixed, "offset_window_ms", "offset_window_ms");
    let itch = "[[feed]]\nname = \"n\"\nprotocol = \"itch50\"\nlines = [\"239.2.1.1:26477\"]\n\
                stale_threshold_ms = 500\nsource_threshold_ms = 2000\ntimezone = \"America/New_York\"\n";
    for key in [
        "request_rate = 10",
        "request_max = 8",
        "request_interval_ms = 5",
    ] {
        let name = key.split(' ').next().unwrap();
        rejected(
            "",
            "",
            &format!("{itch}{key}\n"),
            name,
            &format!("{name} needs recovery"),
        );
    }
    let broadcast = format!("{itch}recovery = \"255.255.255.255:18000\"\n");
    rejected("", "", &broadcast, "recovery", "must be a unicast address");
    let mdp3 = "[[feed]]\nname = \"c\"\nprotocol = \"mdp3\"\nlines = [\"239.3.1.1:14310\"]\n\
                stale_threshold_ms = 500\nsource_threshold_ms = 2000\n";
    for key in ["snapshot_join = \"always\"", "snapshot_max_loops = 2"] {
        let name = key.split(' ').next().unwrap();
        rejected(
            "",
            "",
            &format!("{mdp3}{key}\n"),
            name,
            &format!("{name} needs snapshot_lines"),
        );
    }
    // With what they need, each is taken.
    for ok in [
        format!("[sidecar]\nidle = \"sleep\"\nidle_sleep_us = 200\n{FEED}"),
        format!("{FEED}clock_offset = \"auto\"\noffset_window_ms = 1000\n"),
        format!("{FEED}clock_offset = 0\noffset_window_ms = 1000\n"),
        format!("{itch}recovery = \"127.0.0.1:18000\"\nrequest_rate = 10\n"),
        format!("{mdp3}snapshot_lines = [\"239.3.1.3:14311\"]\nsnapshot_max_loops = 2\n"),
    ] {
        let parsed = tickguard::config::Config::parse(&ok, "t");
        assert!(parsed.is_ok(), "{ok}: {parsed:?}");
    }
}

#[test]
fn interval_that_would_overflow() {
    let keys = "interval_ms = 18446744073710\n";
    rejected("", keys, FEED, "interval_ms", "interval_ms");
}

#[test]
fn dead_after_below_three_heartbeats() {
    let keys = "heartbeat_ms = 10\ndead_after_ms = 29\n";
    rejected(keys, "", FEED, "dead_after_ms", "dead_after_ms");
    // The default dead_after_ms (100) against a slow heartbeat: the line of heartbeat_ms.
    rejected(
        "heartbeat_ms = 40\n",
        "",
        FEED,
        "heartbeat_ms",
        "heartbeat_ms",
    );
    // Sleeping when idle, a beat may come a sleep late: 3 × (1 + 10) ms.
    let sleepy = "idle = \"sleep\"\nidle_sleep_us = 10000\nheartbeat_ms = 1\ndead_after_ms = ";
    rejected(
        &format!("{sleepy}32\n"),
        "",
        FEED,
        "dead_after_ms",
        "3 × (heartbeat_ms + idle_sleep_us in ms, rounded up) = 33",
    );
    assert!(
        tickguard::config::Config::parse(&format!("[sidecar]\n{sleepy}33\n{FEED}"), "t").is_ok()
    );
}

#[test]
fn thresholds_window_and_fixed_offset_out_of_range() {
    let window = format!("{FEED}offset_window_ms = 3600001\n");
    rejected("", "", &window, "offset_window_ms", "offset_window_ms");
    let offset = format!("{FEED}clock_offset = 9223372036854775807\n");
    rejected("", "", &offset, "clock_offset", "clock_offset");
    let stale = FEED.replace("= 500", "= 86400001");
    rejected("", "", &stale, "stale_threshold_ms", "stale_threshold_ms");
    let symbol = format!("{FEED}[[feed.symbol]]\nname = \"XAU\"\nsource_threshold_ms = 0\n");
    rejected(
        "",
        "",
        &symbol,
        "source_threshold_ms = 0",
        "source_threshold_ms",
    );
    // A symbol's table with its name alone would do nothing.
    let bare = format!("{FEED}[[feed.symbol]]\nname = \"XAU\"\n");
    rejected("", "", &bare, "name = \"XAU\"", "overrides nothing");
}

#[test]
fn feed_names_the_shared_memory_cannot_hold() {
    let long = FEED.replace("lp1", &"a".repeat(65));
    rejected("", "", &long, "name =", "feed name");
    // Two names equal in their first 64 bytes would collide there.
    let a = FEED.replace("lp1", &format!("{}1", "b".repeat(64)));
    let b = FEED
        .replace("lp1", &format!("{}2", "b".repeat(64)))
        .replace("30001", "30002");
    rejected("", "", &format!("{a}{b}"), "name =", "feed name");
    rejected("", "", &FEED.replace("lp1", "lp 1"), "name =", "feed name");
}

#[test]
fn control_bytes_and_huge_values_are_escaped_and_cut() {
    let escaped = FEED.replace("lp1", "a\\u0000b\\u001b[2Jc");
    rejected("", "", &escaped, "name =", "feed name");
    let raw = FEED.replace("lp1", "a\u{1b}[2J");
    rejected("", "", &raw, "name =", "line");
    let kind = FEED.replace("\"full\"", "\"\\u0000\\u0007\"");
    rejected("", "", &kind, "kind =", "kind");
    let huge = "x".repeat(100_000);
    rejected("", "", &FEED.replace("lp1", &huge), "name =", "feed name");
    let capacity = format!("[state]\ncapacity = \"{huge}\"\n{FEED}");
    rejected("", "", &capacity, "capacity", "capacity");
    let lines = FEED.replace("127.0.0.1:30001", &huge);
    rejected("", "", &lines, "lines", "lines");
}

/// Every integer key accepts both ends of its range and refuses one past
/// either, naming the key and its line.
#[test]
fn every_range_is_enforced_at_both_ends() {
    for r in ranges() {
        for (v, ok) in [
            (r.min, true),
            (r.max, true),
            (r.min - 1, false),
            (r.max + 1, false),
        ] {
            let text = with_key(r, v);
            let parsed = tickguard::config::Config::parse(&text, "t.toml");
            match (ok, parsed) {
                (true, Ok(_)) => {}
                (false, Err(e)) => {
                    let e = e.to_string();
                    assert!(e.contains(r.key) && e.contains("line "), "{e}");
                    assert!(e.contains(&format!("{} to {}", r.min, r.max)), "{e}");
                }
                (ok, got) => panic!("{} = {v}: expected ok={ok}, got {got:?}", r.key),
            }
        }
    }
}

/// A configuration with `key = v` in the range's table.
fn with_key(r: &Range, v: i64) -> String {
    if r.table.starts_with("[[") {
        let prefix = format!("{} = ", r.key);
        let feed = if r.table.ends_with("itch50") {
            FEED.replace("kind = \"full\"", "protocol = \"itch50\"")
        } else if r.table.ends_with("mdp3") {
            FEED.replace("kind = \"full\"", "protocol = \"mdp3\"")
        } else {
            FEED.to_string()
        };
        let mdp3 = r.table.ends_with("mdp3");
        let feed: String = feed
            .lines()
            .filter(|l| !l.starts_with(&prefix))
            .map(|l| format!("{l}\n"))
            .collect();
        // A snapshot key needs a server, and its cross-key rules kept out
        // of the way of the key under test.
        // A snapshot or re-request key needs what it acts on, and its
        // cross-key rules kept out of the way of the key under test.
        let snapshot = match (r.key.starts_with("snapshot_"), mdp3) {
            (true, false) => {
                "glimpse = \"127.0.0.1:18100\"\nglimpse_user = \"tgsim\"\n\
                 glimpse_password_env = \"TG_GLIMPSE_PW\"\n"
            }
            (true, true) => "snapshot_lines = [\"239.3.1.3:14311\"]\n",
            _ if r.key.starts_with("request_") => "recovery = \"127.0.0.1:18000\"\n",
            _ => "",
        };
        let other = match r.key {
            "snapshot_timeout_ms" => "snapshot_idle_ms = 2000\n",
            "snapshot_retry_ms" => "snapshot_retry_max_ms = 600000\n",
            "snapshot_retry_max_ms" => "snapshot_retry_ms = 10\n",
            _ => "",
        };
        return format!("{feed}{snapshot}{other}{prefix}{v}\n");
    }
    // Keep the cross-key rule out of the way of the key under test.
    let other = match r.key {
        "heartbeat_ms" => "dead_after_ms = 60000\n",
        "dead_after_ms" => "heartbeat_ms = 1\n",
        "idle_sleep_us" => "idle = \"sleep\"\ndead_after_ms = 60000\n",
        _ => "",
    };
    format!("{}\n{} = {v}\n{other}{FEED}", r.table, r.key)
}

/// The configuration reference lists every integer key with its range.
#[test]
fn the_configuration_reference_lists_every_range() {
    let readme = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md"),
    )
    .unwrap();
    for r in ranges() {
        let default = r.default.map_or("—".to_string(), |d| d.to_string());
        let row = format!(
            "| `{}` | {} | {} to {} {} | {default} |",
            r.key, r.table, r.min, r.max, r.unit
        );
        assert!(
            readme.contains(&row),
            "docs/configuration.md lacks the row {row}"
        );
    }
}

/// Every TOML block of the README and the guides is a configuration `run`
/// accepts.
#[test]
fn documented_configurations_are_valid() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            readme.push_str(&std::fs::read_to_string(path).unwrap());
        }
    }
    let blocks: Vec<&str> = readme
        .split("```toml\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .collect();
    assert!(blocks.len() >= 3, "the documented configurations");
    for (i, b) in blocks.iter().enumerate() {
        if let Err(e) = tickguard::config::Config::parse(b, "README.md") {
            panic!("README's TOML block {}: {e}", i + 1);
        }
    }
}

/// The root `config.toml` and `itch.toml` work as shipped for `run` against
/// `simulate` on one machine: valid, every group joined on the loopback
/// interface, an ITCH feed's re-request server on loopback (where
/// `simulate` serves it), and their metrics on different ports, so both can
/// run at once.
#[test]
fn shipped_configurations_stay_on_this_machine() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let load = |name: &str| tickguard::config::Config::load(&root.join(name)).unwrap();
    let (sqf, itch) = (load("config.toml"), load("itch.toml"));
    let mdp3 = load("fixtures/mdp3/config.toml");
    for c in [&sqf, &itch, &mdp3] {
        assert!(
            c.sidecar.interface.is_loopback(),
            "{:?}",
            c.sidecar.interface
        );
        for f in &c.feeds {
            assert!(f.lines.iter().all(|l| l.ip().is_multicast()), "{}", f.name);
        }
    }
    let feed = crate::common::itch(&itch.feeds[0]);
    assert!(feed.recovery.is_some_and(|r| r.ip().is_loopback()));
    assert!(feed.recovery_listen.ip().is_loopback());
    for (a, b) in [(&sqf, &itch), (&sqf, &mdp3), (&itch, &mdp3)] {
        assert_ne!(a.metrics.listen, b.metrics.listen);
        assert_ne!(a.sidecar.shm_path, b.sidecar.shm_path);
    }
}

/// A file that never ends, one too large, or one that is not text: one line
/// naming the file, promptly.
#[test]
fn endless_large_or_binary_files() {
    let dir = tempfile::tempdir().unwrap();
    let large = dir.path().join("large.toml");
    std::fs::write(&large, "# padding\n".repeat(200_000)).unwrap();
    let binary = dir.path().join("binary.toml");
    std::fs::write(&binary, b"[state]\ncapacity = 1\xff\xfe\n").unwrap();
    let cases = [
        (Path::new("/dev/zero"), "larger than 1048576 bytes"),
        (large.as_path(), "larger than 1048576 bytes"),
        (binary.as_path(), "not UTF-8"),
    ];
    for (path, what) in cases {
        let out = Command::cargo_bin("tickguard")
            .unwrap()
            .args(["run", "--config"])
            .arg(path)
            .timeout(std::time::Duration::from_secs(20))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", path.display());
        assert_eq!(err.matches('\n').count(), 1, "{err:?}");
        assert!(
            err.contains(&path.display().to_string()) && err.contains(what),
            "{err}"
        );
    }
}

/// `run` with `glimpse` set reads the password before anything else
/// opens: without it (a variable not set, a file readable by others) it
/// refuses to start with one line naming the key and the variable or
/// file, never the password; the shared memory is not created. `check`,
/// `stat` and `replay` never read it.
#[test]
fn run_refuses_to_start_without_the_snapshot_password() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let shm = format!("/dev/shm/tickguard-nopw-{}", std::process::id());
    let pw = dir.path().join("pw");
    std::fs::write(&pw, "S3cret!pw\n").unwrap();
    std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o644)).unwrap();
    // An empty capture: a pcap header (microseconds, Ethernet), no record.
    let capture = dir.path().join("empty.pcap");
    let mut header = 0xa1b2_c3d4u32.to_le_bytes().to_vec();
    header.extend_from_slice(&[2, 0, 4, 0]);
    header.extend_from_slice(&[0; 8]);
    header.extend_from_slice(&65_535u32.to_le_bytes());
    header.extend_from_slice(&1u32.to_le_bytes());
    std::fs::write(&capture, header).unwrap();
    // The line a port this test holds: opened before the password is read,
    // it would fail first ("address in use"), and the line would not be
    // the password's.
    let held = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let line = held.local_addr().unwrap();
    let config = |name: &str, source: &str| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            format!(
                "[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{shm}\"\n\
                 [[feed]]\nname = \"nq\"\nprotocol = \"itch50\"\nlines = [\"{line}\"]\n\
                 stale_threshold_ms = 1000\nsource_threshold_ms = 1000\n\
                 glimpse = \"127.0.0.1:18100\"\nglimpse_user = \"tgsim\"\n{source}\n"
            ),
        )
        .unwrap();
        path
    };
    let cases = [
        (
            config(
                "env.toml",
                "glimpse_password_env = \"TG_TEST_PW_NEVER_SET\"",
            ),
            "glimpse_password_env TG_TEST_PW_NEVER_SET: not set",
        ),
        (
            config(
                "file.toml",
                &format!("glimpse_password_file = \"{}\"", pw.display()),
            ),
            "readable by group or others",
        ),
        (
            // A `check` or `stat` that read it would fail on it.
            config(
                "missing.toml",
                &format!(
                    "glimpse_password_file = \"{}\"",
                    dir.path().join("no-such-pw").display()
                ),
            ),
            "no-such-pw",
        ),
    ];
    // `tickguard ARGS --config PATH`, without the variable: exit code and stderr.
    let tickguard = |args: &[&str], path: &std::path::Path| {
        let out = Command::cargo_bin("tickguard")
            .unwrap()
            .args(args)
            .arg("--config")
            .arg(path)
            .env_remove("TG_TEST_PW_NEVER_SET")
            .timeout(std::time::Duration::from_secs(20))
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for (path, what) in cases {
        let (code, err) = tickguard(&["run"], &path);
        assert_eq!(code, Some(2), "{err}");
        let problem: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("tickguard: "))
            .collect();
        assert_eq!(problem.len(), 1, "{err}");
        assert!(problem[0].contains(what), "{err}");
        assert!(!err.contains("S3cret"), "{err}");
        assert!(!std::path::Path::new(&shm).exists());
        // `check` and `stat` never read it: what stops them is only the
        // publication `run` never made.
        for args in [&["check", "nq", "AAA"][..], &["stat", "--once"]] {
            let (code, err) = tickguard(args, &path);
            assert_eq!(code, Some(2), "{args:?}: {err}");
            assert!(err.contains("no publication"), "{args:?}: {err}");
            assert!(!err.contains("password"), "{args:?}: {err}");
        }
        // Nor does `replay`, which never logs in (glimpse G4): it goes
        // through a capture as if the password were there.
        let (code, err) = tickguard(
            &["replay", capture.to_str().unwrap(), "--no-progress"],
            &path,
        );
        assert_eq!(code, Some(0), "replay: {err}");
        assert!(!err.contains("password"), "replay: {err}");
    }
}

/// A configuration refused exits before any socket is opened (spec sqf
/// §7): its first line's port is held here, so a socket opened first
/// would fail on it, and the one line says what is wrong with the file,
/// not that the port is taken.
#[test]
fn a_bad_configuration_fails_before_any_socket() {
    let dir = tempfile::tempdir().unwrap();
    let held = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let feed = |name: &str, port: u16| {
        format!(
            "[[feed]]\nname = \"{name}\"\nkind = \"full\"\nlines = [\"127.0.0.1:{port}\"]\n\
             stale_threshold_ms = 500\nsource_threshold_ms = 2000\n"
        )
    };
    let text = config_text(
        dir.path(),
        "",
        "",
        &format!("{}{}", feed("lp1", port), feed("lp1", port + 1)),
    );
    let (code, err) = fails(dir.path(), &text, &["run"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("duplicate feed name"), "{err}");
    assert!(!err.contains("in use"), "{err}");
    drop(held);
}
