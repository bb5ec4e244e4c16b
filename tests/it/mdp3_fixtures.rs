//! The MDP3 fixtures in `fixtures/mdp3/` are what `tools/gen_mdp3.rs`
//! writes, and the MDP3 feed reads them as `fixtures/README.md` tells.

use assert_cmd::Command;
use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::time::Duration;
use tickguard::capture::CaptureReader;
use tickguard::clock::OffsetMode;
use tickguard::protocol::mdp3::feed::{Feed, Settings};
use tickguard::protocol::mdp3::{sequence, Reject};
use tickguard::verdict::{Reasons, Thresholds};

const MS: u64 = 1_000_000;
/// 2026-01-04 22:59:55 UTC, the start of `channel.pcap`.
const T0: u64 = 1_767_567_595_000_000_000;
/// 2026-01-07 15:30:00 UTC, the start of `midweek.pcap`.
const MID: u64 = 1_767_799_800_000_000_000;
/// `config.toml`'s thresholds.
const TH: Thresholds = Thresholds {
    stale_ns: 2_500 * MS,
    source_ns: 2_500 * MS,
};
const SYMBOLS: [&str; 5] = ["ESZ6", "ESH7", "NQZ6", "RTYZ6", "ESZ6-ESH7"];
const IDS: [&str; 5] = ["#294973", "#118061", "#206323", "#309877", "#442811"];

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/mdp3")
}

#[test]
fn generator_reproduces_the_committed_mdp3_fixtures() {
    let out = tempfile::tempdir().unwrap();
    Command::cargo_bin("tickguard-mdp3-fixtures")
        .unwrap()
        .arg(out.path())
        .timeout(Duration::from_secs(60))
        .assert()
        .success();
    let mut compared = 0;
    for entry in std::fs::read_dir(out.path()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        let committed = std::fs::read(dir().join(&name)).unwrap_or_default();
        assert!(
            std::fs::read(entry.path()).unwrap() == committed,
            "fixtures/mdp3/{} is not what the generator writes",
            name.to_string_lossy()
        );
        compared += 1;
    }
    assert_eq!(compared, 14);
}

/// A datagram of a capture.
struct Datagram {
    time_ns: u64,
    dst: SocketAddrV4,
    payload: Vec<u8>,
}

fn read(name: &str) -> Vec<Datagram> {
    let mut out = Vec::new();
    let mut reader = CaptureReader::open(&dir().join(name)).unwrap();
    reader
        .for_each(|d| {
            out.push(Datagram {
                time_ns: d.time_ns,
                dst: d.dst,
                payload: d.payload.to_vec(),
            })
        })
        .unwrap();
    out
}

/// A capture replayed into one feed routed as `config.toml` says, up to
/// the time of each check.
struct Run {
    feed: Feed,
    datagrams: Vec<Datagram>,
    next: usize,
    incremental: Vec<SocketAddrV4>,
    snapshot: Vec<SocketAddrV4>,
    definition: Vec<SocketAddrV4>,
    rejects: Vec<Reject>,
}

impl Run {
    fn new(capture: &str, lines: [&[&str]; 3]) -> Run {
        let addrs = |l: &[&str]| l.iter().map(|a| a.parse().unwrap()).collect();
        Run {
            feed: Feed::new(Settings {
                sequencing: sequence::Settings {
                    gap_timeout_ns: 5 * MS,
                    restart_margin: 10_000,
                },
                max_cached: 1_000_000,
                max_instruments: 100_000,
                default_depth: 10,
                default_implied_depth: 2,
                offset: OffsetMode::Auto {
                    window_ns: 60_000 * MS,
                },
                offset_queue: 4_096,
            }),
            datagrams: read(capture),
            next: 0,
            incremental: addrs(lines[0]),
            snapshot: addrs(lines[1]),
            definition: addrs(lines[2]),
            rejects: Vec::new(),
        }
    }

    /// `channel.pcap` into feed `cme-310`, after its definitions file.
    fn channel() -> Run {
        let mut r = Run::new(
            "channel.pcap",
            [
                &["239.3.1.1:14310", "239.3.1.2:15310"],
                &["239.3.1.3:14311", "239.3.1.4:15311"],
                &["239.3.1.5:14312"],
            ],
        );
        for d in read("defs.pcap") {
            r.feed.on_definitions(&d.payload).unwrap();
        }
        r
    }

    /// `midweek.pcap` into feed `cme-310-midweek`.
    fn midweek() -> Run {
        Run::new(
            "midweek.pcap",
            [
                &["239.3.2.1:14320", "239.3.2.2:15320"],
                &["239.3.2.3:14321", "239.3.2.4:15321"],
                &[],
            ],
        )
    }

    /// Every datagram arrived at or before `now`, in order.
    fn until(&mut self, now: u64) {
        while let Some(d) = self.datagrams.get(self.next) {
            if d.time_ns > now {
                break;
            }
            let f = &mut self.feed;
            let done = if self.incremental.contains(&d.dst) {
                f.on_incremental(&d.payload, d.time_ns)
            } else if let Some(line) = self.snapshot.iter().position(|a| *a == d.dst) {
                f.on_snapshot_from(line, &d.payload, d.time_ns)
            } else if self.definition.contains(&d.dst) {
                f.expire(d.time_ns);
                f.on_definitions(&d.payload)
            } else {
                panic!("a datagram to {}", d.dst)
            };
            if let Err(r) = done {
                self.rejects.push(r);
            }
            self.next += 1;
        }
        self.feed.expire(now);
    }

    /// The verdict for `name` at `ms` after `start`.
    fn verdict(&mut self, start: u64, ms: u64, name: &str) -> Reasons {
        let now = start + ms * MS;
        self.until(now);
        self.feed.verdict(name, TH, now)
    }

    fn all(&mut self, start: u64, ms: u64, names: &[&str]) -> Vec<Reasons> {
        names.iter().map(|n| self.verdict(start, ms, n)).collect()
    }
}

const OK: Reasons = Reasons::empty();

#[test]
fn channel_capture_tells_its_story() {
    let mut r = Run::channel();
    // Definitions from the file; no book before the pre-open.
    assert_eq!(r.verdict(T0, 0, "ESZ6"), Reasons::NO_QUOTE);
    assert_eq!(r.verdict(T0, 0, "#294973"), Reasons::NO_QUOTE);
    // Pre-open: closed; RTY crossed from 3.0 s.
    assert_eq!(r.verdict(T0, 2_000, "ESZ6"), Reasons::CLOSED);
    assert_eq!(r.verdict(T0, 2_000, "RTYZ6"), Reasons::CLOSED);
    let crossed = Reasons::INVALID_PRICE | Reasons::CLOSED;
    assert_eq!(r.verdict(T0, 3_200, "RTYZ6"), crossed);
    assert_eq!(r.verdict(T0, 3_200, "#309877"), crossed);
    // Open at 5.0 s; RTY uncrossed by its opening trades.
    assert_eq!(r.all(T0, 5_010, &SYMBOLS), [OK; 5]);
    assert_eq!(r.all(T0, 7_050, &SYMBOLS), [OK; 5]);
    assert_eq!(r.rejects.len(), 6, "{:?}", r.rejects);
    assert!(Reject::ALL.iter().all(|x| r.rejects.contains(x)));
    // Line A's losses (8.0–8.1 s) and line B late (10.0–10.1 s): filled
    // in time, nothing given up.
    let lost = |r: &Run| r.feed.sequence().counters().packets_lost;
    assert_eq!(r.all(T0, 8_200, &SYMBOLS), [OK; 5]);
    assert_eq!(r.feed.counters().unknown_templates, 1, "skipped at 7.1 s");
    // An instrument whose entry is missing while its gap is open (filled
    // by line B, 3 ms late) reads suspect meanwhile.
    assert!(
        r.verdict(T0, 10_050, "ESZ6").contains(Reasons::SUSPECT),
        "ESZ6 at 10.05 s"
    );
    assert_eq!(r.all(T0, 10_200, &SYMBOLS), [OK; 5]);
    assert_eq!(lost(&r), 0);
    assert!(r.feed.sequence().counters().recovered >= 40);
    // NQ halted 12–14 s.
    assert_eq!(r.verdict(T0, 13_000, "NQZ6"), Reasons::HALTED);
    assert_eq!(r.verdict(T0, 13_000, "#206323"), Reasons::HALTED);
    assert_eq!(r.verdict(T0, 13_000, "ESZ6"), OK);
    assert_eq!(r.verdict(T0, 14_100, "NQZ6"), OK);
    // Both lines lose 15.000–15.040 s: given up, all five suspect until
    // the snapshot loop of 15.5 s.
    for ms in [15_100, 15_300, 15_500] {
        let suspect = r.all(T0, ms, &SYMBOLS);
        assert!(
            suspect.iter().all(|v| v.contains(Reasons::SUSPECT)),
            "at {ms} ms: {suspect:?}"
        );
    }
    assert!(lost(&r) > 0);
    assert_eq!(r.all(T0, 15_600, &SYMBOLS), [OK; 5]);
    assert!(r.feed.counters().snapshots_applied >= 1);
    // The channel reset at 18.0 s: every book empty until they come again
    // at 18.021 s.
    assert_eq!(r.all(T0, 18_005, &SYMBOLS), [Reasons::NO_QUOTE; 5]);
    assert_eq!(r.all(T0, 18_100, &SYMBOLS), [OK; 5]);
    assert_eq!(r.feed.counters().channel_resets, 1);
    assert_eq!(r.feed.sequence().counters().sequence_restarts, 1);
    // Idle 21–25 s: a heartbeat a second keeps the channel alive.
    assert_eq!(r.all(T0, 24_900, &SYMBOLS), [OK; 5]);
    assert_eq!(r.feed.counters().heartbeats, 3);
    // Closed at 29.0 s.
    assert_eq!(r.all(T0, 29_200, &SYMBOLS), [Reasons::CLOSED; 5]);
    assert_eq!(r.verdict(T0, 29_200, "ZZZZ"), Reasons::NO_QUOTE);
    assert_eq!(r.verdict(T0, 29_200, "#999999"), Reasons::NO_QUOTE);
    r.until(u64::MAX);
    let c = r.feed.counters();
    assert_eq!((c.anomalies, c.cache_overflows), (0, 0));
    // The file's loop and seven on the definition line.
    assert_eq!(c.definitions, 8 * 5);
    // And after the close, at 30 and 31 s.
    assert_eq!(c.heartbeats, 5);
    assert!(r.feed.sequence().counters().duplicates > 1_000);
}

#[test]
fn midweek_capture_heals_from_the_snapshot_loop() {
    let mut r = Run::midweek();
    // No baseline and nothing visible before the first loop (1.0 s).
    assert_eq!(r.all(MID, 900, &IDS), [Reasons::NO_QUOTE; 5]);
    assert_eq!(r.all(MID, 1_100, &IDS), [OK; 5]);
    // No definitions: Symbols are unknown.
    assert_eq!(r.verdict(MID, 1_100, "ESZ6"), Reasons::NO_QUOTE);
    assert_eq!(r.all(MID, 7_900, &IDS), [OK; 5]);
    assert_eq!(r.feed.counters().snapshots_applied, 5);
    for id in IDS {
        let e = r.feed.find(id).unwrap();
        assert!(e.instrument.seq.rpt_seq().unwrap() > 100_000, "{id}");
    }
    assert!(r.feed.sequence().high().unwrap() > 1_000_000);
    assert!(r.rejects.is_empty());
}

/// `replay` of each capture with the fixture configuration and checks
/// gives the committed answers and summary, through the command line.
#[test]
fn replay_gives_the_committed_answers_and_summaries() {
    let tmp = tempfile::tempdir().unwrap();
    for stem in ["channel", "midweek"] {
        let summary = tmp.path().join(format!("{stem}.json"));
        let out = Command::cargo_bin("tickguard")
            .unwrap()
            .current_dir(dir())
            .args(["replay", &format!("{stem}.pcap"), "--config", "config.toml"])
            .args(["--checks", "checks.csv", "--no-progress", "--summary"])
            .arg(&summary)
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let want = std::fs::read_to_string(dir().join(format!("{stem}.expected.jsonl"))).unwrap();
        assert!(
            String::from_utf8(out.stdout).unwrap() == want,
            "{stem}: answers differ"
        );
        let want = std::fs::read_to_string(dir().join(format!("{stem}.summary.json"))).unwrap();
        assert!(
            std::fs::read_to_string(&summary).unwrap() == want,
            "{stem}: summary differs"
        );
    }
}

/// The `--explain` goldens: (feed, instrument, `--explain-all`, `--at` in
/// ms after T0), as tools/gen_mdp3.rs writes them.
const EXPLAINED: &[(&str, &str, bool, Option<u64>)] = &[
    ("cme-310", "ESZ6", false, None),
    ("cme-310", "RTYZ6", true, None),
    ("cme-310", "#442811", false, None),
    ("cme-310", "ESZ6", false, Some(15_100)),
    ("cme-310", "NQZ6", false, Some(13_000)),
];

#[test]
fn explain_gives_the_committed_explanations() {
    for &(feed, instrument, all, at_ms) in EXPLAINED {
        let who = format!("{feed}-{}", instrument.replace('#', "id"));
        let file = match (all, at_ms) {
            (_, Some(ms)) => format!("channel.at-{ms}ms-{who}.txt"),
            (true, None) => format!("channel.explain-all-{who}.txt"),
            (false, None) => format!("channel.explain-{who}.txt"),
        };
        let mut cmd = Command::cargo_bin("tickguard").unwrap();
        cmd.current_dir(dir())
            .args([
                "replay",
                "channel.pcap",
                "--config",
                "config.toml",
                "--no-progress",
            ])
            .args(["--explain", feed, instrument])
            .timeout(Duration::from_secs(60));
        if all {
            cmd.arg("--explain-all");
        }
        if let Some(ms) = at_ms {
            cmd.args(["--at", &(T0 + ms * MS).to_string()]);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let want = std::fs::read_to_string(dir().join(&file)).unwrap();
        assert!(
            String::from_utf8(out.stdout).unwrap() == want,
            "{file} differs"
        );
    }
}

/// The explanation's steps imply, at every check of every instrument of the
/// channel, the very answer the replay gives.
#[test]
fn explanations_agree_with_the_answers() {
    use tickguard::config::Config;
    use tickguard::explain::mdp3::Mdp3Explain;
    use tickguard::replay::{load_checks, replay, replay_until, Options};
    let config = Config::load(&dir().join("config.toml")).unwrap();
    let checks = load_checks(&dir().join("checks.csv")).unwrap();
    let mut capture = CaptureReader::open(&dir().join("channel.pcap")).unwrap();
    let answers = replay(&config, &mut capture, &checks, |_| {}).answers;
    let (mut compared, mut stepped) = (0, 0);
    for name in SYMBOLS.iter().chain(&IDS) {
        let mut x = Mdp3Explain::new(0, &config.feeds[0], name, None);
        let mut capture = CaptureReader::open(&dir().join("channel.pcap")).unwrap();
        replay_until(
            &config,
            &mut capture,
            &[],
            Options::default(),
            |_| {},
            &mut x,
        );
        for (c, a) in checks.iter().zip(&answers) {
            if c.feed == "cme-310" && c.symbol == *name {
                assert_eq!(
                    x.verdict_at(c.time_ns),
                    a.reasons,
                    "{name} at {}",
                    c.time_ns
                );
                compared += 1;
            }
        }
        // And at each step ±1 ns, and halfway to the next (a verdict
        // change the steps missed, a deadline or a crossing, lies between).
        let steps: Vec<u64> = x.steps().iter().map(|s| s.time).collect();
        let times = crate::common::around(&steps, []);
        let between: Vec<_> = times
            .iter()
            .map(|&time_ns| tickguard::replay::Check {
                time_ns,
                feed: "cme-310".into(),
                symbol: name.to_string(),
            })
            .collect();
        let mut capture = CaptureReader::open(&dir().join("channel.pcap")).unwrap();
        let answers = replay(&config, &mut capture, &between, |_| {}).answers;
        assert_eq!(answers.len(), times.len(), "{name}: every check answered");
        for (t, a) in times.iter().zip(&answers) {
            assert_eq!(x.verdict_at(*t), a.reasons, "{name} at {t} (between steps)");
            stepped += 1;
        }
    }
    assert!(compared > 300, "{compared}");
    assert!(stepped > 1000, "{stepped}");
}
