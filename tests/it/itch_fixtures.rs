//! The ITCH fixtures in `fixtures/itch/` are what `tools/gen_itch.rs` writes,
//! and the BinaryFILE reader reads them.

use assert_cmd::Command;
use std::path::PathBuf;
use tickguard::capture::CaptureReader;
use tickguard::protocol::itch50::binfile::BinFile;
use tickguard::protocol::itch50::message::check;
use tickguard::protocol::itch50::sequencer::{Counters, Sequencer, Settings};
use tickguard::protocol::itch50::{Packet, Reject};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/itch")
}

#[test]
fn generator_reproduces_the_committed_itch_fixtures() {
    let out = tempfile::tempdir().unwrap();
    Command::cargo_bin("tickguard-itch-fixtures")
        .unwrap()
        .arg(out.path())
        .assert()
        .success();
    let mut compared = 0;
    for entry in std::fs::read_dir(out.path()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        let committed = std::fs::read(dir().join(&name)).unwrap_or_default();
        assert!(
            std::fs::read(entry.path()).unwrap() == committed,
            "fixtures/itch/{} is not what the generator writes",
            name.to_string_lossy()
        );
        compared += 1;
    }
    assert_eq!(compared, 6);
}

/// Every record of a BinaryFILE, checked valid.
fn records(name: &str) -> Vec<Vec<u8>> {
    let mut r = BinFile::open(&dir().join(name)).unwrap();
    let mut out = Vec::new();
    while let Some((i, rec)) = r.next_record().unwrap() {
        assert_eq!(i, out.len() as u64);
        assert_eq!(check(rec), Ok(()), "record {i}");
        out.push(rec.to_vec());
    }
    out
}

#[test]
fn session_binfile_plain_and_gzip_hold_the_same_valid_records() {
    let plain = records("session.itch");
    assert_eq!(plain, records("session.itch.gz"));
    // Events O, S, Q, M, E, C; the directory of 8 stocks; 1,600 flow messages.
    assert!(plain.len() > 1_600 + 8 + 6);
    let events: Vec<u8> = plain
        .iter()
        .filter(|r| r[0] == b'S')
        .map(|r| r[11])
        .collect();
    assert_eq!(events, b"OSQMEC");
}

/// A capture run through one stream as the config routes it (lines and
/// port 17000), with the config's 100 ms gap timeout and join_gap_max 500.
struct Run {
    counters: Counters,
    rejects: Vec<Reject>,
    /// Whether the stream counted as joined after its first accepted packet.
    joined_at_first: Option<bool>,
    seq: Sequencer,
}

fn sequence(name: &str) -> Run {
    let mut seq = Sequencer::new(Settings {
        gap_timeout_ns: 100_000_000,
        max_held: 1_000_000,
        join_gap_max: 500,
    });
    let (mut rejects, mut joined_at_first) = (Vec::new(), None);
    let mut reader = CaptureReader::open(&dir().join(name)).unwrap();
    reader
        .for_each(|d| {
            assert!(
                [26477, 17000].contains(&d.dst.port()),
                "datagram to {}",
                d.dst
            );
            seq.expire(d.time_ns, &mut |_, _| {});
            match Packet::new_checked(d.payload) {
                Ok(p) => {
                    seq.on_packet(&p, d.time_ns, &mut |_, _| {});
                    joined_at_first.get_or_insert(seq.joined());
                }
                Err(r) => rejects.push(r),
            }
        })
        .unwrap();
    Run {
        counters: *seq.counters(),
        rejects,
        joined_at_first,
        seq,
    }
}

#[test]
fn session_capture_exercises_loss_recovery_duplicates_and_a_session_change() {
    let run = sequence("session.pcap");
    let c = run.counters;
    // One malformed datagram per reason but a bad block header.
    assert_eq!(run.rejects.len(), 7);
    assert!(Reject::ALL
        .iter()
        .filter(|r| **r != Reject::BlockHeaderOverrun)
        .all(|r| run.rejects.contains(r)));
    assert_eq!(run.joined_at_first, Some(false));
    // Line A's losses filled by line B, the recovery answers' gap too.
    assert!(c.recovered > 3, "{c:?}");
    assert!(c.duplicates > 100, "{c:?}");
    // The one packet nobody resends is given up.
    assert_eq!(c.gaps_given_up, 1, "{c:?}");
    assert!(c.ticks_lost >= 1, "{c:?}");
    assert_eq!(c.session_changes, 1);
    assert_eq!(c.stale_session, 1);
    assert!(!run.seq.suspect() && run.seq.gaps_open() == 0);
}

#[test]
fn join_capture_joins_session_one_mid_session() {
    let run = sequence("join.pcap");
    assert_eq!(run.joined_at_first, Some(true));
    assert_eq!(run.counters.session_changes, 1);
    assert!(!run.seq.joined(), "session 2 is followed from its start");
}

#[test]
fn both_sessions_send_heartbeats_when_idle() {
    let mut by_session = [0u32; 2];
    let mut reader = CaptureReader::open(&dir().join("session.pcap")).unwrap();
    reader
        .for_each(|d| {
            if let Ok(p) = Packet::new_checked(d.payload) {
                if p.count() == 0 {
                    by_session[usize::from(p.session().0 == *b"2026010502")] += 1;
                }
            }
        })
        .unwrap();
    // 09:30:05 and 06 in session 1, about 12.6 and 13.6 in session 2, on
    // two lines less what they lose.
    assert!(by_session.iter().all(|&n| n >= 2), "{by_session:?}");
}

/// The session capture tells the story fixtures/README.md writes, checked
/// by hand at its moments (the goldens only detect changes): TSLA halted
/// at 09:30:02–03; NVDA in an operational halt on Nasdaq at 07.0–07.5,
/// AMZN's on BX not a halt here; every stock suspect once a packet is
/// given up at 08.0 (until the session changes), and closed too from the
/// end of session; the new session's stocks without a book until its
/// flow, then quoted.
#[test]
fn the_session_capture_tells_its_story() {
    const OPEN: u64 = 1_767_623_400_000_000_000;
    const MS: u64 = 1_000_000;
    let story: [(&str, u64, &[&str]); 14] = [
        ("TSLA", 2_500, &["halted"]),
        ("NVDA", 2_500, &[]),
        ("TSLA", 7_250, &[]),
        ("NVDA", 7_250, &["halted"]),
        ("AMZN", 7_250, &[]),
        ("AAPL", 7_250, &[]),
        ("AAPL", 8_500, &["suspect"]),
        ("TSLA", 8_500, &["suspect"]),
        ("AMZN", 9_300, &["suspect", "closed"]),
        ("NVDA", 9_300, &["suspect", "closed"]),
        ("AAPL", 10_500, &["no_quote"]),
        ("TSLA", 10_500, &["no_quote"]),
        ("AAPL", 11_500, &[]),
        ("NVDA", 11_500, &[]),
    ];
    let tmp = tempfile::tempdir().unwrap();
    let checks = tmp.path().join("checks.csv");
    let mut csv = "time_ns,feed,symbol\n".to_string();
    for (symbol, ms, _) in &story {
        csv.push_str(&format!("{},nasdaq,{symbol}\n", OPEN + ms * MS));
    }
    std::fs::write(&checks, csv).unwrap();
    let out = Command::cargo_bin("tickguard")
        .unwrap()
        .arg("replay")
        .arg(dir().join("session.pcap"))
        .arg("--config")
        .arg(dir().join("config.toml"))
        .arg("--checks")
        .arg(&checks)
        .output()
        .unwrap();
    assert!(out.status.success());
    let answers: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), story.len());
    for ((symbol, ms, want), got) in story.iter().zip(&answers) {
        let reasons: Vec<&str> = got["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        assert_eq!(&reasons, want, "{symbol} at 09:30:{ms} ms");
    }
}
