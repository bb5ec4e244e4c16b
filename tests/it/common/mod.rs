//! Shared by the integration tests: replaying what a sidecar recorded and
//! comparing it with what the sidecar published; checking that proptest
//! finds a module's recorded failures; a CME MDP3 channel ([`mdp3`]).

pub mod mdp3;

use std::path::Path;
use tickguard::config::ProtocolSettings;
use tickguard::protocol::itch50::config::ItchConfig;
use tickguard::protocol::sqf::summary::FeedSummary;
use tickguard::state::Record;

/// Replays the recording `rec` with the configuration at `cfg` and returns
/// the summary of `feed`.
pub fn replay_recording(cfg: &Path, rec: &Path, feed: &str) -> FeedSummary {
    let config = tickguard::config::Config::load(cfg).unwrap();
    let mut capture = tickguard::capture::CaptureReader::open(rec).unwrap();
    let mut outcome = tickguard::replay::replay(&config, &mut capture, &[], |_| {});
    assert!(outcome.input_error.is_none());
    match outcome.summary.feeds.remove(feed) {
        Some(tickguard::replay::FeedSummary::Sqf(s)) => s,
        other => panic!("no SQF feed '{feed}' in the summary: {other:?}"),
    }
}

/// Every symbol the sidecar published has the state the replay rebuilt.
pub fn assert_same_state(live: &[Record], replayed: &FeedSummary) {
    assert_eq!(live.len(), replayed.symbols.len());
    for r in live {
        let name = r.symbol.unwrap().to_string();
        let s = &replayed.symbols[&name];
        let st = &r.state;
        assert_eq!(
            (
                st.seq.last_seq,
                st.seq.ticks_lost,
                st.seq.duplicates,
                st.suspect,
                st.invalid,
                st.last_alive
            ),
            (
                s.last_seq,
                s.ticks_lost,
                s.duplicates,
                s.suspect,
                s.invalid,
                s.last_alive
            ),
            "{name}"
        );
    }
}

/// Proptest finds every failure recorded in `recorded` (the text of the
/// module's file in `tests/proptest-regressions/`, where proptest looks for
/// the file of a source under `tests/it/`) for the module at `source`
/// (`file!()`), so that they run first every time.
pub fn assert_recorded_failures_found(recorded: &str, source: &'static str) {
    let recorded = recorded.lines().filter(|l| l.starts_with("cc ")).count();
    let found = proptest::test_runner::Config::default()
        .failure_persistence
        .expect("failures persisted by default")
        .load_persisted_failures2(Some(source))
        .len();
    assert!(recorded > 0);
    assert_eq!(found, recorded, "recorded failures found by proptest");
}

/// The settings of `feed`, an `itch50` feed.
pub fn itch(feed: &tickguard::config::FeedConfig) -> &ItchConfig {
    match &feed.settings {
        ProtocolSettings::Itch50(c) => c,
        _ => panic!("feed '{}' is not an itch50 feed", feed.name),
    }
}

/// A replay's stderr without its closing "replayed …" line (which carries
/// a wall time): the warnings and errors alone.
pub fn without_end_line(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|l| !l.starts_with("tickguard: replayed "))
        .map(|l| format!("{l}\n"))
        .collect()
}
