//! ITCH with GLIMPSE snapshots in a namespace: the simulated venue serves
//! snapshots over SoupBinTCP beside its multicast, and a sidecar started
//! mid-session (or after snapshot faults) recovers through one.

use super::*;

/// The password both sides read (from `TG_GLIMPSE_PW`).
const PASSWORD: &str = "Gl1mpse!pw";

/// The ITCH feed of [`itch_config`] with a snapshot server, joined
/// mid-session past 100 sequences, and `extra` keys.
fn glimpse_config(dir: &Path, shm: &Path, extra: &str) -> PathBuf {
    let cfg = itch_config(dir, shm, 1000);
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(&format!(
        "join_gap_max = 100\nglimpse = \"127.0.0.1:31197\"\nglimpse_user = \"tgsim\"\n\
         glimpse_password_env = \"TG_GLIMPSE_PW\"\nsnapshot_retry_ms = 50\n{extra}\n"
    ));
    std::fs::write(&cfg, text).unwrap();
    cfg
}

/// The venue with its snapshot server (`args` after the common ones).
fn glimpse_venue(ns: &Netns, cfg: &Path, args: &[&str]) -> Child {
    ns.command(&bin())
        .args(["simulate", "--protocol", "itch50", "--config"])
        .arg(cfg)
        .args([
            "--symbols",
            "12",
            "--report",
            "--glimpse",
            "127.0.0.1:31197",
        ])
        .args(args)
        .env("TG_GLIMPSE_PW", PASSWORD)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `run` in the namespace with the password, recording to `rec`, its log
/// in `log`; waits until its publication answers.
fn glimpse_sidecar(ns: &Netns, cfg: &Path, shm: &Path, rec: &Path, log: &Path) -> Killed {
    let sidecar = Killed(
        ns.command(&bin())
            .arg("run")
            .arg("--config")
            .arg(cfg)
            .arg("--record")
            .arg(rec)
            .env("TG_GLIMPSE_PW", PASSWORD)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !Reader::open(shm).health(now_ns()).is_ok() {
        assert!(Instant::now() < deadline, "sidecar did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    sidecar
}

/// A venue started with `args` and, `after_ms` later, a sidecar joining
/// its session mid-way, recording; in `scene`'s namespace and directory.
struct Restart {
    venue: Child,
    sidecar: Killed,
    reader: Reader,
    cfg: PathBuf,
    rec: PathBuf,
    log: PathBuf,
}

impl Restart {
    fn start(scene: &Scene, extra: &str, args: &[&str], after_ms: u64) -> Restart {
        let Scene { ns, dir, shm } = scene;
        let (rec, log) = (dir.path().join("rec.pcap"), dir.path().join("run.log"));
        let cfg = glimpse_config(dir.path(), shm, extra);
        let venue = glimpse_venue(ns, &cfg, args);
        std::thread::sleep(Duration::from_millis(after_ms));
        let sidecar = glimpse_sidecar(ns, &cfg, shm, &rec, &log);
        Restart {
            venue,
            sidecar,
            reader: Reader::open(shm),
            cfg,
            rec,
            log,
        }
    }
}

/// Whether `bytes` hold the password.
fn holds_password(bytes: &[u8]) -> bool {
    bytes
        .windows(PASSWORD.len())
        .any(|w| w == PASSWORD.as_bytes())
}

/// Started mid-session, the sidecar awaits a snapshot, merges it and reads
/// `ok` while the venue trades; an operator's SIGUSR1 takes a second one;
/// at the end its books are the venue's. The
/// recording replays to the same books and snapshot keys; the password is
/// in no log, recording, summary, `stat` output or shared memory.
#[test]
fn itch_a_sidecar_started_mid_session_recovers_through_a_snapshot() {
    if !can_create_namespaces() {
        return;
    }
    let scene = &Scene::new("glimpse");
    let (dir, shm) = (&scene.dir, &scene.shm);
    let Restart {
        venue,
        sidecar,
        reader,
        cfg,
        rec,
        log,
    } = Restart::start(
        scene,
        "",
        &[
            "--count",
            "40000",
            "--rate",
            "10000",
            "--linger-ms",
            "1500",
            "--seed",
            "11",
        ],
        1200,
    );
    let c = |id| reader.counter(0, id).unwrap_or(0);
    // Suspect until the merge, then `ok` while the venue still trades.
    let (mut ok_seen, deadline) = (false, Instant::now() + Duration::from_secs(30));
    while !ok_seen && Instant::now() < deadline {
        if c(counter::SNAPSHOTS) > 0 && !reader.feed_status(0).is_some_and(|s| s.closed) {
            ok_seen = (0..12).any(|i| {
                reader
                    .lookup("nq", &format!("SYM{i:05}"))
                    .is_some_and(|h| reader.check(&h, now_ns()).is_ok())
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(ok_seen, "no symbol read ok after the snapshot");
    let st = stat_feed(shm);
    assert_eq!(st["snapshots"], 1, "{st}");
    assert_eq!(st["snapshot_state"], "idle", "{st}");
    assert!(st["snapshot_next"].as_u64().unwrap() > 100, "{st}");
    assert_eq!(st["snapshot_failures"]["refused"], 0, "{st}");
    let timed: u64 = st["snapshot_latency"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    assert_eq!(timed, 1, "the trigger-to-merge time is counted: {st}");
    // An operator's request (SIGUSR1 to `run`, glimpse G3.1) while the
    // venue trades, the feed healthy: a second snapshot, merged.
    // SAFETY: a signal to the child process this test started.
    assert_eq!(
        unsafe { libc::kill(sidecar.0.id() as i32, libc::SIGUSR1) },
        0
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while c(counter::SNAPSHOTS) < 2 {
        assert!(
            Instant::now() < deadline,
            "no second snapshot: {}",
            stat_feed(shm)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let second = stat_feed(shm);
    assert!(
        second["snapshot_next"].as_u64() > st["snapshot_next"].as_u64(),
        "{second}"
    );
    let report = finish(venue);
    wait_settled(&reader, "after the end of session");
    assert_eq!(published_books(&reader), venue_books(&report["books"]));
    assert!(!reader.feed_status(0).unwrap().suspect);
    assert_eq!(report["glimpse"]["snapshots_sent"], 2, "{report}");
    stop(sidecar);
    let feed = replay_feed(dir.path(), &rec, &cfg, "nq");
    assert_eq!(venue_books(&feed["symbols"]), venue_books(&report["books"]));
    assert_eq!(
        (feed["snapshots"].as_u64(), feed["suspect"].as_bool()),
        (Some(2), Some(false)),
        "{feed}"
    );
    assert_eq!(feed["snapshot_next"], second["snapshot_next"]);
    let logged = std::fs::read(&log).unwrap();
    assert!(
        String::from_utf8_lossy(&logged).contains("snapshot merged"),
        "{}",
        String::from_utf8_lossy(&logged)
    );
    for (what, bytes) in [
        ("the log", logged),
        ("the recording", std::fs::read(&rec).unwrap()),
        ("the summary", feed.to_string().into_bytes()),
        ("stat", st.to_string().into_bytes()),
        ("the shared memory", std::fs::read(shm).unwrap()),
    ] {
        assert!(!holds_password(&bytes), "the password is in {what}");
    }
}

/// Sessions not available twice (the venue's first two logins), then a
/// snapshot: merged at attempt 3, the failures counted by class, and the
/// recording replays to the same counts.
#[test]
fn itch_snapshot_rejections_are_retried_and_replay_the_same() {
    if !can_create_namespaces() {
        return;
    }
    let scene = &Scene::new("glimpse-retry");
    let (dir, shm) = (&scene.dir, &scene.shm);
    let Restart {
        venue,
        sidecar,
        reader,
        cfg,
        rec,
        ..
    } = Restart::start(
        scene,
        "",
        &[
            "--count",
            "30000",
            "--rate",
            "10000",
            "--linger-ms",
            "1500",
            "--seed",
            "12",
            "--glimpse-fault",
            "reject-s",
            "--glimpse-fault-logins",
            "2",
        ],
        1000,
    );
    let report = finish(venue);
    wait_settled(&reader, "after the end of session");
    let st = stat_feed(shm);
    assert_eq!(
        (st["snapshots"].as_u64(), st["snapshot_attempts"].as_u64()),
        (Some(1), Some(3)),
        "{st}"
    );
    assert_eq!(st["snapshot_failures"]["rejected"], 2, "{st}");
    assert_eq!(published_books(&reader), venue_books(&report["books"]));
    stop(sidecar);
    let feed = replay_feed(dir.path(), &rec, &cfg, "nq");
    assert_eq!(feed["snapshot_failures"], st["snapshot_failures"]);
    assert_eq!(feed["snapshot_attempts"], 3);
    assert_eq!(venue_books(&feed["symbols"]), venue_books(&report["books"]));
}

/// A login refused as not authorized gives up at once: the feed stays
/// suspect for the rest of the session, with no further attempt.
#[test]
fn itch_a_login_not_authorized_gives_up_and_stays_suspect() {
    if !can_create_namespaces() {
        return;
    }
    let scene = &Scene::new("glimpse-reject");
    let shm = &scene.shm;
    let Restart {
        venue,
        sidecar,
        reader,
        log,
        ..
    } = Restart::start(
        scene,
        "",
        &[
            "--count",
            "20000",
            "--rate",
            "10000",
            "--linger-ms",
            "1000",
            "--seed",
            "13",
            "--glimpse-fault",
            "reject-a",
        ],
        1000,
    );
    let _ = finish(venue);
    wait_settled(&reader, "after the end of session");
    let st = stat_feed(shm);
    assert_eq!(
        (
            st["snapshot_gave_up"].as_u64(),
            st["snapshot_attempts"].as_u64()
        ),
        (Some(1), Some(1)),
        "{st}"
    );
    assert_eq!(st["snapshot_failures"]["rejected"], 1, "{st}");
    assert!(reader.feed_status(0).unwrap().suspect);
    stop(sidecar);
    let logged = String::from_utf8(std::fs::read(&log).unwrap()).unwrap();
    assert!(logged.contains("snapshot failed and given up"), "{logged}");
    assert!(!logged.contains(PASSWORD));
}

/// Loss on both lines while the sidecar awaits, and its first spin reset
/// half way: the second spin merges (no mixed books from the first), the
/// messages missing from N on are re-requested and recovered, and at the
/// end the books are the venue's with nothing lost.
#[test]
fn itch_loss_during_the_spin_is_recovered_and_a_dropped_spin_retried() {
    if !can_create_namespaces() {
        return;
    }
    let scene = &Scene::new("glimpse-drop");
    let Restart {
        venue,
        sidecar,
        reader,
        ..
    } = Restart::start(
        scene,
        "",
        &[
            "--count",
            "40000",
            "--rate",
            "10000",
            "--linger-ms",
            "1500",
            "--seed",
            "14",
            "--loss-a",
            "3",
            "--loss-b",
            "3",
            "--glimpse-fault",
            "drop-rst:100",
            "--glimpse-fault-logins",
            "1",
        ],
        1000,
    );
    let report = finish(venue);
    wait_settled(&reader, "after the end of session");
    let st = stat_feed(&scene.shm);
    assert_eq!(
        (st["snapshots"].as_u64(), st["snapshot_attempts"].as_u64()),
        (Some(1), Some(2)),
        "{st}"
    );
    assert_eq!(st["snapshot_failures"]["closed"], 1, "{st}");
    assert_eq!(reader.counter(0, counter::TICKS_LOST), Some(0), "{st}");
    assert!(
        reader.counter(0, counter::RECOVERED).unwrap_or(0) > 0,
        "{st}"
    );
    assert_eq!(published_books(&reader), venue_books(&report["books"]));
    assert!(!reader.feed_status(0).unwrap().suspect);
    stop(sidecar);
}

/// A spin slower than `snapshot_timeout_ms` is closed by our timer, and
/// the next attempt (a healthy server) merges.
#[test]
fn itch_a_spin_slower_than_the_timeout_is_closed_then_retried() {
    if !can_create_namespaces() {
        return;
    }
    let scene = &Scene::new("glimpse-slow");
    let Restart {
        venue,
        sidecar,
        reader,
        ..
    } = Restart::start(
        scene,
        "snapshot_timeout_ms = 2000\nsnapshot_idle_ms = 2000",
        &[
            "--count",
            "50000",
            "--rate",
            "10000",
            "--linger-ms",
            "1500",
            "--seed",
            "15",
            "--glimpse-fault",
            "slow:20",
            "--glimpse-fault-logins",
            "1",
        ],
        1000,
    );
    let report = finish(venue);
    wait_settled(&reader, "after the end of session");
    let st = stat_feed(&scene.shm);
    assert_eq!(st["snapshot_failures"]["closed"], 1, "{st}");
    assert_eq!(
        (st["snapshots"].as_u64(), st["snapshot_attempts"].as_u64()),
        (Some(1), Some(2)),
        "{st}"
    );
    assert_eq!(published_books(&reader), venue_books(&report["books"]));
    stop(sidecar);
}
