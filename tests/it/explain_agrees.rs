//! Replay forensics against the handler on random SQF streams: the state
//! `--explain` derives from the rules' outcomes equals the handler's slot
//! after every datagram (no `reconciled` event), and the verdict its events
//! imply is the replay's answer at every check.

use proptest::prelude::*;
use std::io::Cursor;
use std::net::SocketAddrV4;
use tickguard::capture::link::Link;
use tickguard::capture::write::{CaptureWriter, Format};
use tickguard::capture::CaptureReader;
use tickguard::config::Config;
use tickguard::explain::sqf::{Cause, Forensics};
use tickguard::protocol::sqf::PacketBuilder;
use tickguard::replay::{replay_with, Check};
use tickguard::symbol::Symbol;
use tickguard::verdict::Reasons;

const T0: u64 = 1_767_603_600_000_000_000;
const US: u64 = 1_000;

/// A delta feed with a fixed offset, a full feed with an `auto` one; short
/// thresholds so that silence and source age cross them; a table smaller
/// than the symbols so that some are dropped.
const CONFIG: &str = r#"
[state]
capacity = 6

[[feed]]
name = "d"
kind = "delta"
lines = ["239.1.1.1:1000", "239.1.1.2:1000"]
stale_threshold_ms = 2
source_threshold_ms = 3
clock_offset = 0

[[feed]]
name = "f"
kind = "full"
lines = ["239.1.1.3:1000"]
stale_threshold_ms = 2
source_threshold_ms = 3
clock_offset = "auto"
offset_window_ms = 4
"#;

const LINES: [&str; 3] = ["239.1.1.1:1000", "239.1.1.2:1000", "239.1.1.3:1000"];
const SYMBOLS: [&str; 4] = ["A", "B", "C", "D"];

/// One message: (kind 0..=3: quote, quote, heartbeat, snapshot; symbol;
/// sequence; price choice; source delay in µs).
type Msg = (u8, usize, u64, u8, u64);

fn message() -> impl Strategy<Value = Msg> {
    (
        0u8..4,
        0..SYMBOLS.len(),
        prop_oneof![8 => 0u64..24, 1 => Just(u64::MAX), 1 => any::<u64>()],
        0u8..6,
        0u64..5000,
    )
}

/// Packets: (µs since the previous one, line, messages, none for a
/// datagram the feed rejects); now and then one stamped before the
/// previous (lines captured on two interfaces), less than the millisecond
/// past which it is a clock step.
fn stream() -> impl Strategy<Value = Vec<(i64, usize, Vec<Msg>)>> {
    prop::collection::vec(
        (
            prop_oneof![1 => Just(0i64), 4 => 0i64..3000, 1 => -900i64..0],
            0..LINES.len(),
            // None: a datagram the feed rejects (not SQF).
            prop::collection::vec(message(), 0..4),
        ),
        1..40,
    )
}

fn capture(stream: &[(i64, usize, Vec<Msg>)]) -> (Vec<u8>, Vec<u64>) {
    let src: SocketAddrV4 = "10.0.0.1:5000".parse().unwrap();
    let mut w = CaptureWriter::new(Vec::new(), Format::PcapNanos, Link::Ethernet).unwrap();
    let mut t = T0;
    let mut times = vec![];
    for (dt, line, msgs) in stream {
        t = t.saturating_add_signed(dt * US as i64);
        times.push(t);
        if msgs.is_empty() {
            w.write_udp(t, src, LINES[*line].parse().unwrap(), b"not a packet")
                .unwrap();
            continue;
        }
        let mut b = PacketBuilder::new(t);
        for &(kind, s, seq, px, delay) in msgs {
            let symbol = Symbol::parse(SYMBOLS[s]).unwrap();
            let source = t.saturating_sub(delay * US);
            let (bid, ask) = match px {
                0 => (f64::NAN, 1.0),
                1 => (2.0, 1.0),
                2 => (0.0, 1.0),
                _ => (1.0 + px as f64, 1.5 + px as f64),
            };
            match kind {
                0 | 1 => b.quote(symbol, seq, source, bid, ask),
                2 => b.heartbeat(symbol, seq),
                _ => b.snapshot(symbol, seq, source, bid, ask),
            };
        }
        w.write_udp(t, src, LINES[*line].parse().unwrap(), &b.finish())
            .unwrap();
    }
    (w.finish().unwrap(), times)
}

fn reader(bytes: &[u8]) -> CaptureReader {
    CaptureReader::from_reader("random", Box::new(Cursor::new(bytes.to_vec()))).unwrap()
}

/// The failures proptest recorded for this module are found, so that they
/// run first every time.
#[test]
fn recorded_failures_are_found() {
    crate::common::assert_recorded_failures_found(
        include_str!("../proptest-regressions/explain_agrees.txt"),
        file!(),
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn explain_follows_the_handler_on_random_streams(stream in stream()) {
        agrees(&stream)?;
    }
}

/// A quote whose source is 1 ms old under thresholds of 2 ms (silence) and
/// 3 ms (source age): both cross in the same nanosecond, and the
/// explanation names both (once a debug assertion in the tracker).
#[test]
fn stale_and_stale_at_source_crossing_in_the_same_nanosecond_are_both_explained() {
    agrees(&[
        (0, 0, vec![(0, 0, 0, 3, 1000)]),
        (0, 0, vec![(0, 0, 0, 0, 0)]),
    ])
    .unwrap();
}

/// Line B's copy of a Snapshot (same sequence and source time), behind
/// line A's next Quote: the handler drops it as a line copy, and the
/// explanation follows it (no provider reset, nothing to reconcile).
#[test]
fn a_snapshots_lagging_copy_is_explained_as_the_handler_takes_it() {
    agrees(&[
        (0, 0, vec![(3, 0, 10, 3, 0)]),
        (100, 0, vec![(0, 0, 11, 4, 0)]),
        (100, 1, vec![(3, 0, 10, 3, 200)]),
        (100, 1, vec![(0, 0, 11, 4, 100)]),
    ])
    .unwrap();
}

/// Line A's late copy of a Snapshot line B lost, older at its source than
/// the invalid Quote line B brought since (the price held older still):
/// dropped by the handler, the invalid price standing, and the
/// explanation follows it.
#[test]
fn a_late_snapshot_after_an_invalid_quote_is_explained_as_the_handler_takes_it() {
    agrees(&[
        (0, 0, vec![(3, 0, 1, 3, 0)]),
        (100, 1, vec![(3, 0, 1, 3, 100)]),
        (100, 1, vec![(0, 0, 2, 1, 0)]),
        (100, 0, vec![(3, 0, 1, 3, 200)]),
    ])
    .unwrap();
    // The invalid Quote stamped older than the price held: the copy,
    // between the two, is still dropped.
    agrees(&[
        (0, 0, vec![(0, 0, 1, 3, 0)]),
        (100, 1, vec![(0, 0, 1, 3, 100)]),
        (100, 1, vec![(0, 0, 2, 4, 0)]),
        (100, 1, vec![(0, 0, 3, 1, 250)]),
        (100, 0, vec![(3, 0, 1, 3, 300)]),
    ])
    .unwrap();
}

/// A Snapshot sent again (a failover) that comes first on line B, which
/// lost the original and has since delivered a newer Quote: a reset, for
/// the handler and the explanation alike.
#[test]
fn a_snapshot_resent_on_the_line_that_lost_it_is_explained_as_the_handler_takes_it() {
    agrees(&[
        (0, 0, vec![(3, 0, 10, 3, 0)]),
        (100, 0, vec![(0, 0, 11, 4, 0)]),
        (100, 1, vec![(0, 0, 11, 4, 100)]),
        (100, 1, vec![(3, 0, 10, 3, 300)]),
        (100, 1, vec![(0, 0, 11, 5, 0)]),
    ])
    .unwrap();
}

/// A provider reset on line A (a Snapshot behind the symbol's sequence),
/// then line B's late copy of a Quote from before it: the handler drops
/// the copy, and the explanation follows it.
#[test]
fn a_quote_from_before_a_reset_on_the_lagging_line_is_explained_as_the_handler_takes_it() {
    agrees(&[
        (0, 0, vec![(0, 0, 100, 3, 0)]),
        (100, 0, vec![(3, 0, 3, 4, 0)]),
        (100, 1, vec![(0, 0, 100, 3, 200)]),
        (100, 0, vec![(0, 0, 4, 5, 0)]),
        (100, 1, vec![(0, 0, 99, 3, 400)]),
    ])
    .unwrap();
}

/// A reset stays open whatever its own line brings until the lagging
/// line is past it: a routine Snapshot after the reset, the lagging line's
/// copy of a Snapshot from before it, and its Heartbeat naming the old
/// sequence; the handler and the explanation alike.
#[test]
fn a_reset_open_until_the_lagging_line_is_past_it_is_explained_as_the_handler_takes_it() {
    agrees(&[
        (0, 0, vec![(0, 0, 100, 3, 0)]),
        (100, 0, vec![(3, 0, 3, 4, 0)]),
        (100, 0, vec![(0, 0, 4, 5, 0)]),
        (100, 0, vec![(3, 0, 4, 5, 0)]),
        (100, 1, vec![(0, 0, 100, 3, 400)]),
        (100, 1, vec![(2, 0, 101, 0, 0)]),
        (100, 1, vec![(3, 0, 3, 4, 500)]),
        (100, 1, vec![(0, 0, 4, 5, 500)]),
        (100, 1, vec![(2, 0, 7, 0, 0)]),
    ])
    .unwrap();
    agrees(&[
        (0, 0, vec![(3, 0, 90, 3, 0)]),
        (100, 0, vec![(0, 0, 91, 3, 0)]),
        (100, 0, vec![(3, 0, 3, 4, 0)]),
        (100, 0, vec![(0, 0, 4, 5, 0)]),
        (100, 1, vec![(3, 0, 90, 3, 400)]),
        (100, 1, vec![(0, 0, 91, 3, 400)]),
        (100, 1, vec![(2, 0, 92, 0, 0)]),
        (100, 1, vec![(3, 0, 3, 4, 500)]),
    ])
    .unwrap();
    // The lagging line's duplicate from before the reset marks nothing;
    // a reset opened on line B.
    agrees(&[
        (0, 0, vec![(0, 0, 4, 3, 0)]),
        (100, 0, vec![(0, 0, 5, 3, 0)]),
        (100, 0, vec![(3, 0, 3, 4, 0)]),
        (100, 0, vec![(0, 0, 4, 5, 0)]),
        (100, 1, vec![(0, 0, 4, 3, 400)]),
        (100, 1, vec![(0, 0, 5, 3, 400)]),
        (100, 1, vec![(3, 0, 3, 4, 400)]),
    ])
    .unwrap();
    agrees(&[
        (0, 1, vec![(0, 0, 100, 3, 0)]),
        (100, 1, vec![(3, 0, 3, 4, 0)]),
        (100, 0, vec![(0, 0, 100, 3, 200)]),
        (100, 0, vec![(2, 0, 101, 0, 0)]),
        (100, 0, vec![(3, 0, 3, 4, 300)]),
        (100, 0, vec![(2, 0, 5, 0, 0)]),
    ])
    .unwrap();
    // One loss on each line: B lost the Quotes before a reset that then
    // looked in step there, A lost the reset.
    agrees(&[
        (0, 0, vec![(0, 0, 1, 3, 0)]),
        (0, 1, vec![(0, 0, 1, 3, 0)]),
        (300, 1, vec![(3, 0, 1, 4, 0)]),
        (0, 0, vec![(0, 0, 2, 5, 200)]),
        (0, 0, vec![(0, 0, 3, 6, 100)]),
        (100, 0, vec![(0, 0, 2, 7, 0)]),
        (0, 1, vec![(0, 0, 2, 7, 0)]),
    ])
    .unwrap();
    // The lagging line lost its copy of the reset: its Heartbeat naming
    // the next sequence is liveness, one naming the old sequence dropped.
    agrees(&[
        (0, 0, vec![(0, 0, 100, 3, 0)]),
        (100, 0, vec![(3, 0, 3, 4, 0)]),
        (100, 1, vec![(0, 0, 100, 3, 200)]),
        (100, 1, vec![(2, 0, 4, 0, 0)]),
        (100, 1, vec![(2, 0, 101, 0, 0)]),
    ])
    .unwrap();
}

/// The same under `--feed` (every datagram line A's, whatever its
/// destination): the handler takes B's copy as the first line's again, a
/// reset, and the explanation follows it, telling lines apart as the
/// handler does, not by destination.
#[test]
fn under_feed_a_snapshots_copy_is_explained_as_the_handler_takes_it() {
    let config = Config::parse(CONFIG, "agree.toml").unwrap();
    let (bytes, _) = capture(&[
        (0, 0, vec![(3, 0, 10, 3, 0)]),
        (100, 0, vec![(0, 0, 11, 4, 0)]),
        (100, 1, vec![(3, 0, 10, 3, 200)]),
    ]);
    let id = config.feed_id("d").unwrap();
    let symbol = Symbol::parse("A").unwrap();
    let mut f = Forensics::new(&config.feeds, Some((id, symbol)), false, None);
    let options = tickguard::replay::Options {
        feed: Some(id),
        ..Default::default()
    };
    let out =
        tickguard::replay::replay_until(&config, &mut reader(&bytes), &[], options, |_| {}, &mut f);
    assert!(out.input_error.is_none());
    f.finish();
    let events = f.events().unwrap_or(&[]);
    assert!(
        !events.iter().any(|e| e.cause == Cause::Reconciled),
        "{events:#?}"
    );
    // B's copy of the Snapshot, taken as line A's: behind the Quote's
    // sequence, a reset.
    let snapshots: Vec<Cause> = events
        .iter()
        .map(|e| e.cause)
        .filter(|c| matches!(c, Cause::Snapshot { .. }))
        .collect();
    assert_eq!(
        snapshots,
        [
            Cause::Snapshot {
                seq: 10,
                last: None
            },
            Cause::Snapshot {
                seq: 10,
                last: Some(11)
            }
        ],
        "{events:#?}"
    );
}

fn agrees(stream: &[(i64, usize, Vec<Msg>)]) -> Result<(), TestCaseError> {
    let config = Config::parse(CONFIG, "agree.toml").unwrap();
    let (bytes, times) = capture(stream);
    let end = *times.iter().max().unwrap();
    // Around every arrival, and past the end where only time moves.
    let mut at: Vec<u64> = times.iter().flat_map(|&t| [t - 1, t, t + 1]).collect();
    at.extend((1..=12).map(|k| end + k * 500 * US));
    for feed in ["d", "f"] {
        let id = config.feed_id(feed).unwrap();
        for name in SYMBOLS {
            let symbol = Symbol::parse(name).unwrap();
            let checks: Vec<Check> = at
                .iter()
                .map(|&time_ns| Check {
                    time_ns,
                    feed: feed.into(),
                    symbol: name.into(),
                })
                .collect();
            let mut f = Forensics::new(&config.feeds, Some((id, symbol)), false, None);
            let out = replay_with(&config, &mut reader(&bytes), &checks, |_| {}, &mut f);
            prop_assert!(out.input_error.is_none());
            f.finish();
            let events = f.events().unwrap_or(&[]);
            let reconciled: Vec<_> = events
                .iter()
                .filter(|e| e.cause == Cause::Reconciled)
                .collect();
            prop_assert!(
                reconciled.is_empty(),
                "{feed} {name}: explain's state left the handler's: {reconciled:#?}"
            );
            for (c, a) in checks.iter().zip(&out.answers) {
                let implied = events
                    .iter()
                    .rfind(|e| e.time <= c.time_ns)
                    .map_or(Reasons::NO_QUOTE, |e| e.after);
                prop_assert_eq!(
                    a.reasons,
                    implied,
                    "{} {} at {} µs",
                    feed,
                    name,
                    (c.time_ns as i128 - T0 as i128) / 1000
                );
            }
        }
    }
    Ok(())
}

/// Symbol A's explanation (all events) on feed `d` of `stream`, once the
/// explanation was found to agree with the handler.
fn agreed_explanation(stream: &[(i64, usize, Vec<Msg>)]) -> String {
    agrees(stream).unwrap();
    let config = Config::parse(CONFIG, "agree.toml").unwrap();
    let (bytes, _) = capture(stream);
    let id = config.feed_id("d").unwrap();
    let mut f = Forensics::new(
        &config.feeds,
        Some((id, Symbol::parse("A").unwrap())),
        false,
        None,
    );
    replay_with(&config, &mut reader(&bytes), &[], |_| {}, &mut f);
    f.finish();
    f.explanation(true)
}

/// A Quote ahead of the sequence stamped before the Snapshot the other
/// line brought (this line has not brought its copy), dropped by the
/// handler and the symbol made suspect, is explained so.
#[test]
fn a_quote_stamped_before_the_other_lines_snapshot_is_explained() {
    let stream = [
        (0, 0, vec![(0, 0, 1, 3, 0)]),
        (100, 1, vec![(0, 0, 1, 3, 100)]),
        (100, 0, vec![(3, 0, 1, 3, 0)]),
        (100, 1, vec![(0, 0, 2, 1, 150)]),
    ];
    let text = agreed_explanation(&stream);
    let said = "quote seq 2 stamped at or before snapshot seq 1, which the other line brought and this one not yet: sent before it (a reset this line lost) or stamped out of order, ignored, suspect";
    assert!(text.contains(said), "{said}:\n{text}");
    // Stamped the same nanosecond as that Snapshot (a provider stamping a
    // Snapshot with its price's time): the same.
    let stream = [
        (0, 0, vec![(0, 0, 1, 3, 0)]),
        (100, 1, vec![(0, 0, 1, 3, 100)]),
        (100, 0, vec![(3, 0, 1, 3, 0)]),
        (100, 1, vec![(0, 0, 2, 1, 100)]),
    ];
    let text = agreed_explanation(&stream);
    assert!(text.contains(said), "{said}:\n{text}");
}

/// The lagging line's messages from before a reset, dropped by the
/// handler, are events of the explanation, each saying why: a Quote, a
/// Snapshot from before the reset and a Heartbeat naming past the next
/// sequence (the old one's, or a loss: suspect).
#[test]
fn what_the_lagging_line_brings_from_before_a_reset_is_explained() {
    let stream = [
        (0, 0, vec![(0, 0, 100, 3, 0)]),
        (100, 0, vec![(3, 0, 3, 4, 0)]),
        (100, 0, vec![(0, 0, 4, 5, 0)]),
        (100, 1, vec![(3, 0, 90, 3, 250)]),
        (100, 1, vec![(0, 0, 100, 3, 400)]),
        (100, 1, vec![(2, 0, 101, 0, 0)]),
    ];
    let text = agreed_explanation(&stream);
    for said in [
        "snapshot seq 90 from before the snapshot that reset the symbol to seq 3 (a lagging line's copy), ignored",
        "quote seq 100 from before the snapshot that reset the symbol to seq 3 (a lagging line's copy), ignored",
        "heartbeat (next expected 101) on the line lagging the snapshot that reset the symbol to seq 3: from before it, or past a loss; its sequence ignored, suspect",
    ] {
        assert!(text.contains(said), "{said}:\n{text}");
    }
}

/// A delta feed joined by a Heartbeat: its first price, in order, shows
/// `suspect`, and `--at` says it waits for a snapshot (not only that the
/// price came).
#[test]
fn a_delta_feeds_first_price_after_a_heartbeat_says_it_waits_for_a_snapshot() {
    let stream = [
        (0, 0, vec![(2, 0, 5, 0, 0)]),
        (100, 0, vec![(0, 0, 5, 3, 0)]),
    ];
    agrees(&stream).unwrap();
    let config = Config::parse(CONFIG, "agree.toml").unwrap();
    let (bytes, times) = capture(&stream);
    let id = config.feed_id("d").unwrap();
    let at = times[1];
    let mut f = Forensics::new(
        &config.feeds,
        Some((id, Symbol::parse("A").unwrap())),
        false,
        Some(at),
    );
    let check = Check {
        time_ns: at,
        feed: "d".into(),
        symbol: "A".into(),
    };
    let out = replay_with(&config, &mut reader(&bytes), &[check], |_| {}, &mut f);
    f.finish();
    assert_eq!(out.answers[0].reasons, Reasons::SUSPECT);
    let text = f.answer_at(at, out.answers[0].reasons);
    let suspect = text
        .lines()
        .find(|l| l.trim_start().starts_with("suspect"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(suspect.contains("until a snapshot"), "{text}");
}

/// `--at`'s state is the target feed's when its check is answered: with
/// another feed's datagram stamped after the time recorded before the
/// target's own up to it (a recording interleaving feeds), the state shown
/// holds the target's quote, as the replay's answer does.
#[test]
fn the_at_state_is_taken_when_the_targets_check_is_answered() {
    let config = Config::parse(CONFIG, "agree.toml").unwrap();
    let src: SocketAddrV4 = "10.0.0.1:5000".parse().unwrap();
    let a = Symbol::parse("A").unwrap();
    let mut w = CaptureWriter::new(Vec::new(), Format::PcapNanos, Link::Ethernet).unwrap();
    // Feed f's datagram at +5 ms, recorded before feed d's at +1 ms.
    let mut b = PacketBuilder::new(T0 + 5_000 * US);
    b.quote(a, 1, T0 + 5_000 * US, 1.0, 1.5);
    w.write_udp(T0 + 5_000 * US, src, LINES[2].parse().unwrap(), &b.finish())
        .unwrap();
    let mut b = PacketBuilder::new(T0 + 1_000 * US);
    b.snapshot(a, 7, T0 + 1_000 * US, 2.0, 2.5);
    w.write_udp(T0 + 1_000 * US, src, LINES[0].parse().unwrap(), &b.finish())
        .unwrap();
    let bytes = w.finish().unwrap();
    let at = T0 + 1_500 * US;
    let id = config.feed_id("d").unwrap();
    let mut f = Forensics::new(&config.feeds, Some((id, a)), false, Some(at));
    let check = Check {
        time_ns: at,
        feed: "d".into(),
        symbol: "A".into(),
    };
    let out = replay_with(&config, &mut reader(&bytes), &[check], |_| {}, &mut f);
    f.finish();
    let answer = out.answers[0].reasons;
    assert!(answer.is_ok(), "{answer}");
    let text = f.answer_at(at, answer);
    assert!(text.contains("  state: last seq 7,"), "{text}");
    assert!(!text.contains("note:"), "{text}");
}
