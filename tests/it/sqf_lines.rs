//! SQF's two lines against the provider's own stream. One provider stream
//! of a full or a delta feed (Quotes, Heartbeats, routine Snapshots and resets) goes
//! out on lines A and B, each copy lost or delayed on its own, each line
//! delivering in order; after every datagram the handler takes, a symbol
//! it holds trustworthy (not suspect, priced) shows the provider's price as
//! of the newest provider message received on either line. The model test
//! (`tests/it/model.rs`) holds the rules on one line; this holds the line
//! arbitration, which departs from the letter, to what it is for: a copy
//! lost on one line is taken from the other, a message sent before a reset
//! never puts an older price back, and a loss on both lines is never
//! trusted once a later message shows it. Some price messages (Quotes and
//! reset Snapshots; a routine Snapshot repeats the last price message
//! sent, valid or not) carry an invalid price: a symbol shown `ok` (priced,
//! neither suspect nor invalid) shows a valid price, the newest's.
//!
//! Not generated, being left as the letter has it (docs/architecture.md):
//! a provider re-sending an older Snapshot after a failover, a network
//! repeat on one line, a line lagging by more than the Snapshot period,
//! and two messages stamped in the same nanosecond at the source, but for
//! a reset stamped as the message before it (its price's time). Not
//! asked, being the letter's too: while a reset neither line brought yet
//! has a message after it come (its Quotes are behind the old sequence:
//! duplicates), and after a routine Snapshot one line brings late, behind
//! the sequence a Heartbeat of the other moved past it (a reset), until a
//! newer message comes.

use proptest::prelude::*;
use tickguard::config::Config;
use tickguard::handler::Handler;
use tickguard::protocol::sqf::PacketBuilder;
use tickguard::symbol::Symbol;

const T0: u64 = 1_767_603_600_000_000_000;
const US: u64 = 1_000;

/// The most a copy lags its provider message, in messages.
const MAX_LAG: usize = 3;

/// A feed on two lines whose symbols never go stale in a test, `kind`
/// (full or delta) set by the test.
const CONFIG: &str = r#"
[state]
capacity = 4
[[feed]]
name = "f"
kind = "KIND"
lines = ["239.1.1.1:1000", "239.1.1.2:1000"]
stale_threshold_ms = 600000
source_threshold_ms = 600000
clock_offset = 0
"#;

/// One provider message as generated: what (0–11 a Quote, 12–14 a
/// Heartbeat, 15–16 a routine Snapshot, 17–19 a reset), the sequence a
/// reset goes back to, for lines A and B: lost, lag in messages, and how
/// a Quote's or a reset's price is invalid (0: valid; 1: bid above ask,
/// 2: a zero bid, 3: an infinite ask).
type Step = (u8, u64, (bool, usize), (bool, usize), u8);

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let copy = || (prop::bool::weighted(0.25), 0..=MAX_LAG);
    let invalid = prop_oneof![8 => Just(0u8), 1 => 1u8..=3];
    prop::collection::vec((0u8..20, 1u64..6, copy(), copy(), invalid), 1..80)
}

/// What the provider's stream says of the symbol after a message: the
/// last valid price's bid (`None` before one), and whether the last price
/// message was invalid.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Truth {
    bid: Option<f64>,
    invalid: bool,
}

/// The provider's datagrams, the truth after each, and whether each is a
/// reset, and a routine Snapshot.
type Provider = (Vec<Vec<u8>>, Vec<Truth>, Vec<bool>, Vec<bool>);

/// A price numbered `n`, made invalid as `how` says ([`Step`]).
fn priced(n: u32, how: u8) -> (f64, f64) {
    let p = 1.0 + f64::from(n);
    match how {
        0 => (p, p + 0.5),
        1 => (p + 1.0, p),
        2 => (0.0, p),
        _ => (p, f64::INFINITY),
    }
}

fn provider(steps: &[Step]) -> Provider {
    let symbol = Symbol::parse("A").unwrap();
    let mut seq = 0u64;
    let mut truth_now = Truth {
        bid: None,
        invalid: false,
    };
    // The last price message's (bid, ask), valid or not: what a routine
    // Snapshot repeats.
    let mut sent = None::<(f64, f64)>;
    let mut prices = 0u32;
    // The last Snapshot's message, so that Snapshots stay further apart
    // than any line lags.
    let mut last_snapshot: Option<usize> = None;
    let (mut datagrams, mut truth) = (vec![], vec![]);
    let (mut resets, mut routine) = (vec![], vec![]);
    for (k, &(what, back, _, _, how)) in steps.iter().enumerate() {
        // Later at the source than every message before (but for some
        // resets, below).
        let source = T0 + (k as u64 + 1) * US;
        let mut b = PacketBuilder::new(source);
        let snapshot_due = last_snapshot.is_none_or(|s| k > s + MAX_LAG + 1);
        let reset = matches!(what, 17..=19) && snapshot_due && seq > back;
        let routine_due = matches!(what, 15..=16) && snapshot_due && seq > 0;
        match what {
            12..=14 => {
                b.heartbeat(symbol, seq + 1);
            }
            15..=16 if routine_due => {
                let (bid, ask) = sent.unwrap();
                b.snapshot(symbol, seq, source, bid, ask);
                last_snapshot = Some(k);
            }
            17..=19 if reset => {
                seq = back;
                prices += 1;
                let (bid, ask) = priced(prices, how);
                // One reset in three stamped as the message before it (a
                // provider stamping a Snapshot with its price's time):
                // the same nanosecond, never earlier.
                let source = if what == 19 { source - US } else { source };
                b.snapshot(symbol, seq, source, bid, ask);
                sent = Some((bid, ask));
                last_snapshot = Some(k);
            }
            _ => {
                seq += 1;
                prices += 1;
                let (bid, ask) = priced(prices, how);
                b.quote(symbol, seq, source, bid, ask);
                sent = Some((bid, ask));
            }
        }
        // Quote step 6 (and a Snapshot's price rule): a valid price is
        // stored, an invalid one leaves the stored price and marks it.
        if let Some((bid, ask)) = sent.filter(|_| !matches!(what, 12..=14)) {
            let valid = bid.is_finite() && ask.is_finite() && bid > 0.0 && bid <= ask;
            truth_now.invalid = !valid;
            if valid {
                truth_now.bid = Some(bid);
            }
        }
        datagrams.push(b.finish());
        truth.push(truth_now);
        resets.push(reset);
        routine.push(routine_due);
    }
    (datagrams, truth, resets, routine)
}

/// Arrivals: (provider message, line), each line in its provider order.
fn arrivals(steps: &[Step]) -> Vec<(usize, usize)> {
    let mut out = vec![];
    for line in 0..2 {
        let mut at = 0;
        for (k, &(_, _, a, b, _)) in steps.iter().enumerate() {
            let (lost, lag) = if line == 0 { a } else { b };
            if !lost {
                at = (k + lag).max(at);
                out.push((at, k, line));
            }
        }
    }
    out.sort_unstable();
    out.into_iter().map(|(_, k, line)| (k, line)).collect()
}

thread_local! {
    /// Trusted prices [`first_wrong`] compared, on this thread.
    static COMPARED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The first moment the handler trusts a price the provider had replaced
/// by a message it received, if any.
fn first_wrong(steps: &[Step], kind: &str) -> Option<String> {
    let (datagrams, truth, resets, routine) = provider(steps);
    let config = Config::parse(&CONFIG.replace("KIND", kind), "two lines").unwrap();
    let mut h = Handler::new(&config);
    let mut newest = None::<usize>;
    let mut received = vec![false; datagrams.len()];
    let mut late_until = None::<usize>;
    let mut on_line = [vec![false; datagrams.len()], vec![false; datagrams.len()]];
    let heartbeats: Vec<bool> = steps
        .iter()
        .map(|&(what, ..)| matches!(what, 12..=14))
        .collect();
    for (i, (k, line)) in arrivals(steps).into_iter().enumerate() {
        let t = T0 + (i as u64 + 1) * US;
        h.on_datagram_line(0, line, &datagrams[k], t).unwrap();
        received[k] = true;
        on_line[line][k] = true;
        // A message come before a reset it follows (neither line brought
        // the reset yet): the new sequence's Quotes read as duplicates of
        // the old (the letter; docs/architecture.md), so it tells the
        // handler nothing, and nothing is asked until the reset comes.
        if (0..k).any(|r| resets[r] && !received[r]) {
            continue;
        }
        // A Heartbeat on a line that has not brought a reset before it
        // cannot tell the new sequence's from the old: the handler makes
        // the symbol suspect but keeps its sequence, and takes the next
        // Quote in order. It shows the newest only as far as Quotes do.
        if heartbeats[k] && (0..k).any(|r| resets[r] && !on_line[line][r]) {
            continue;
        }
        // A routine Snapshot come late, behind a sequence a Heartbeat of the
        // other line moved past it, is a reset by the letter (left so:
        // docs/architecture.md): not asked until a newer message comes.
        let priced_since = |n: usize| (k + 1..=n).any(|j| received[j] && !heartbeats[j]);
        if routine[k] && newest.is_some_and(|n| k < n && !priced_since(n)) {
            late_until = newest;
        }
        newest = newest.max(Some(k));
        if late_until.is_some_and(|n| k <= n) {
            continue;
        }
        late_until = None;
        let Some(r) = h.records().next() else {
            continue;
        };
        let s = &r.state;
        let Some(price) = s.price.filter(|_| !s.suspect && !s.invalid) else {
            continue;
        };
        // Shown `ok` (thresholds aside): the newest received message's
        // price, valid. (Or the price of the newest received at all: one
        // come before its reset may yet be applied, newer than the reset.)
        let shown = Truth {
            bid: Some(price.bid),
            invalid: false,
        };
        let want = newest.map(|n| truth[n]);
        let latest = received.iter().rposition(|&r| r).map(|n| truth[n]);
        COMPARED.with(|c| c.set(c.get() + 1));
        if Some(shown) != want && Some(shown) != latest {
            return Some(format!(
                "after datagram {i} (message {k} on line {line}): trusted bid {} where the \
                 provider's newest received message {newest:?} has {want:?}",
                price.bid
            ));
        }
    }
    None
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: crate::common::cases(2_000),
        ..ProptestConfig::default()
    })]

    /// On a full feed, and on a delta feed, whose arbitration drops
    /// (a Quote or a Snapshot from before a reset) must never leave a
    /// symbol trusted past a loss either.
    #[test]
    fn a_trusted_price_is_the_newest_received(steps in steps(), delta in any::<bool>()) {
        let kind = if delta { "delta" } else { "full" };
        if let Some(wrong) = first_wrong(&steps, kind) {
            prop_assert!(false, "{kind}: {wrong}");
        }
    }
}

/// The property compares trusted prices, not only skips: over sessions
/// drawn as it draws them (a fixed seed), many arrivals reach the
/// comparison (61% here), so a handler that trusted nothing (always
/// suspect) or a skip grown too wide fails here.
#[test]
fn the_newest_received_is_compared_often() {
    use proptest::strategy::{Strategy, ValueTree};
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let sessions = steps();
    let (mut arrivals_seen, before) = (0u64, COMPARED.with(|c| c.get()));
    for k in 0..200 {
        let steps = sessions.new_tree(&mut runner).unwrap().current();
        arrivals_seen += arrivals(&steps).len() as u64;
        let kind = if k % 2 == 0 { "full" } else { "delta" };
        assert_eq!(first_wrong(&steps, kind), None);
    }
    let compared = COMPARED.with(|c| c.get()) - before;
    assert!(
        compared * 100 >= arrivals_seen * 40,
        "{compared} of {arrivals_seen} arrivals compared"
    );
}
