//! Replay forensics (`tickguard replay --explain FEED SYMBOL`, `--at`,
//! `--timeline`): why a symbol's verdict changed, when, and what caused
//! it, for each protocol its own way ([`sqf`], [`itch`]); the times and
//! durations they print are written here.

pub mod itch;
pub mod mdp3;
pub mod sqf;

use crate::verdict::Reasons;
use std::fmt::Write as _;

/// A threshold a feed's verdict crosses between its datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Crossing {
    /// No proof of life since `last_alive` (ns) for longer than the stale
    /// threshold.
    Silence { last_alive: u64 },
    /// The source watermark (ns, source clock) plus the clock offset is
    /// older than the source threshold.
    SourceAge { watermark: i128, offset: i128 },
}

/// A source age crossing: the source watermark and the clock offset, ns.
pub(crate) type SourceAge = (i128, i128);

/// The first threshold crossing in `(after, to]`: `last_alive + stale + 1`
/// (stale) or `watermark + offset + source + 1` (stale_at_source), the
/// first nanoseconds where the verdict's strict comparisons hold; on a tie
/// the silence, with the source age crossed in the same nanosecond as its
/// watermark and offset (both reasons come in one step, and both are
/// told).
pub(crate) fn next_crossing(
    after: u64,
    to: u64,
    th: crate::verdict::Thresholds,
    last_alive: Option<u64>,
    watermark: Option<i128>,
    offset: i128,
) -> Option<(u64, Crossing, Option<SourceAge>)> {
    let silence = last_alive.map(|a| {
        (
            a as i128 + th.stale_ns as i128 + 1,
            Crossing::Silence { last_alive: a },
        )
    });
    let age = watermark.map(|w| {
        (
            w + offset + th.source_ns as i128 + 1,
            Crossing::SourceAge {
                watermark: w,
                offset,
            },
        )
    });
    let (c, first) = [silence, age]
        .into_iter()
        .flatten()
        .filter(|&(c, _)| c > after as i128 && c <= to as i128)
        .min_by_key(|&(c, _)| c)?;
    let tied = match (first, age) {
        (Crossing::Silence { .. }, Some((a, _))) if a == c => watermark.map(|w| (w, offset)),
        _ => None,
    };
    Some((c as u64, first, tied))
}

/// The steps an explanation keeps at most: the latest, between this many
/// and twice as many (the oldest half is forgotten at once), so that its
/// memory stays bounded whatever the capture holds for the target.
pub const KEEP: usize = 100_000;

/// Keeps `step` at the end of `steps` (in time order), unless it comes
/// after `at` (an `--at` answer reads nothing later); once twice [`KEEP`]
/// are kept, the oldest [`KEEP`] are forgotten, counted in `forgotten`,
/// but for the verdict changes among them, kept while they fit in half as
/// many (the oldest changes go first): a busy instrument's every packet
/// is a step, and the change that set a reason hours ago (a halt in the
/// morning) must still be told.
pub(crate) fn keep<S: Moment>(steps: &mut Vec<S>, forgotten: &mut u64, at: Option<u64>, step: S) {
    if at.is_some_and(|at| step.time() > at) {
        return;
    }
    if steps.len() >= 2 * KEEP {
        let before = steps.len();
        let mut k = 0;
        steps.retain(|s| {
            k += 1;
            let (from, to) = s.turn();
            k > KEEP || from != to
        });
        // At most KEEP / 2 changes stay of the oldest half (the latest of
        // them), so that the next forgetting is KEEP / 2 steps away.
        let changes = steps.len() - KEEP;
        steps.drain(..changes.saturating_sub(KEEP / 2));
        *forgotten += (before - steps.len()) as u64;
    }
    steps.push(step);
}

/// The line an explanation that forgot `n` earlier steps starts with.
pub(crate) fn forgotten_line(n: u64) -> String {
    format!(
        "... {n} earlier steps not kept (an explanation keeps the latest {KEEP} or more, and earlier verdict changes while they fit; --at TIME answers for an earlier moment from the steps before it)\n"
    )
}

/// A moment of an explanation: when, and the verdict before and after.
pub(crate) trait Moment {
    /// When, ns since the Unix epoch (local clock).
    fn time(&self) -> u64;
    /// The verdict before and after.
    fn turn(&self) -> (Reasons, Reasons);
}

/// The verdict `steps` (in time order) imply at `t`: the last change's at
/// or before it, `no_quote` before any.
pub(crate) fn verdict_at<S: Moment>(steps: &[S], t: u64) -> Reasons {
    let i = steps.partition_point(|s| s.time() <= t);
    steps[..i]
        .iter()
        .rev()
        .map(Moment::turn)
        .find(|(before, after)| before != after)
        .map_or(Reasons::NO_QUOTE, |(_, after)| after)
}

/// The `--at` text of `who` (feed and name) at `time`: the replay's own
/// answer, then for an ok answer the step since which it is ok, else for
/// each reason in order the last step of `steps` up to `time` that set it
/// (or "since the start"); `state`, the state at that time; and a note if
/// the steps imply another verdict. `render` gives a step's line.
pub(crate) fn answer_at<S: Moment>(
    who: (&str, &str),
    time: u64,
    answer: Reasons,
    origin: u64,
    (steps, forgotten): (&[S], u64),
    render: impl Fn(&S) -> String,
    state: Option<&str>,
) -> String {
    let mut out = format!(
        "{} {} at {} ({}): {answer}\n",
        who.0,
        who.1,
        iso(time),
        rel(time, origin).trim_start()
    );
    let until = steps.partition_point(|s| s.time() <= time);
    let set = |bit: Option<Reasons>| {
        steps[..until].iter().rev().find(|s| {
            let (before, after) = s.turn();
            match bit {
                None => before != after,
                Some(b) => after.contains(b) && !before.contains(b),
            }
        })
    };
    if answer.is_ok() {
        if let Some(s) = set(None) {
            let _ = writeln!(out, "  ok since        {}", render(s));
        }
    } else {
        for (bit, reason) in Reasons::ORDER {
            if !answer.contains(bit) {
                continue;
            }
            match set(Some(bit)) {
                Some(s) => {
                    let _ = writeln!(out, "  {reason:<15} {}", render(s));
                }
                None if forgotten > 0 => {
                    let _ = writeln!(out, "  {reason:<15} since before the steps kept");
                }
                None => {
                    let _ = writeln!(out, "  {reason:<15} since the start");
                }
            }
        }
    }
    if let Some(state) = state {
        out.push_str(state);
    }
    let derived = verdict_at(steps, time);
    let changed = steps.iter().any(|s| {
        let (before, after) = s.turn();
        before != after
    });
    if derived != answer && (forgotten == 0 || changed) {
        let _ = writeln!(
            out,
            "  note: the steps imply {derived}, the replay answered {answer}"
        );
    }
    out
}

/// UTC, ns: `2026-01-05T09:00:01.234567890Z`.
pub fn iso(t: u64) -> String {
    let secs = t / 1_000_000_000;
    let nanos = t % 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Time as ns since the Unix epoch or a calendar time with its zone (see
/// [`crate::time::parse_time`]).
pub use crate::time::parse_time;

/// `1 tick`, `3 ticks`.
pub(crate) fn ticks(n: u64) -> String {
    if n == 1 {
        "1 tick".to_string()
    } else {
        format!("{n} ticks")
    }
}

/// `+1234.567890 ms` since `origin` (negative before it).
pub(crate) fn rel(t: u64, origin: u64) -> String {
    rel_i(t as i128, origin)
}

/// [`rel`] of a signed time.
pub(crate) fn rel_i(t: i128, origin: u64) -> String {
    let d = t - origin as i128;
    let sign = if d < 0 { '-' } else { '+' };
    let d = d.unsigned_abs();
    format!("{sign}{}.{:06} ms", d / 1_000_000, d % 1_000_000)
}

/// A duration in ms, as short as exact: `500 ms`, `120.03 ms`, `-40 ms`.
pub(crate) fn dur(ns: i128) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let n = ns.unsigned_abs();
    let (ms, frac) = (n / 1_000_000, n % 1_000_000);
    if frac == 0 {
        format!("{sign}{ms} ms")
    } else {
        let f = format!("{frac:06}");
        format!("{sign}{ms}.{} ms", f.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A moment at `t` that changed nothing.
    struct At(u64);

    impl Moment for At {
        fn time(&self) -> u64 {
            self.0
        }
        fn turn(&self) -> (Reasons, Reasons) {
            (Reasons::NO_QUOTE, Reasons::NO_QUOTE)
        }
    }

    /// An explanation keeps the latest steps, between KEEP and twice as
    /// many, and counts what it forgot; nothing after `--at`'s time.
    #[test]
    fn an_explanation_keeps_the_latest_steps_and_counts_the_rest() {
        let (mut steps, mut forgotten) = (Vec::new(), 0u64);
        let n = 5 * KEEP as u64 + 7;
        for t in 0..n {
            keep(&mut steps, &mut forgotten, None, At(t));
            assert!(steps.len() <= 2 * KEEP);
        }
        assert_eq!(forgotten + steps.len() as u64, n);
        assert_eq!(steps.last().map(|s| s.0), Some(n - 1));
        assert!(steps.len() >= KEEP);
        let (mut steps, mut forgotten) = (Vec::new(), 0u64);
        for t in 0..10 {
            keep(&mut steps, &mut forgotten, Some(4), At(t));
        }
        assert_eq!((steps.len(), forgotten), (5, 0));
    }

    /// A moment at `t` that changed the verdict (`true`) or not.
    struct Turn(u64, bool);

    impl Moment for Turn {
        fn time(&self) -> u64 {
            self.0
        }
        fn turn(&self) -> (Reasons, Reasons) {
            match self.1 {
                true => (Reasons::NO_QUOTE, Reasons::HALTED),
                false => (Reasons::HALTED, Reasons::HALTED),
            }
        }
    }

    /// The verdict changes among the steps forgotten are kept, the latest
    /// KEEP / 2 of them at most: a change followed by millions of steps
    /// that changed nothing is still told, and what the steps imply at
    /// any time kept is what they implied before; memory and the work of
    /// forgetting stay bounded however many changes come.
    #[test]
    fn the_verdict_changes_among_the_steps_forgotten_are_kept() {
        let (mut steps, mut forgotten) = (Vec::new(), 0u64);
        keep(&mut steps, &mut forgotten, None, Turn(0, true));
        let n = 5 * KEEP as u64;
        for t in 1..n {
            keep(&mut steps, &mut forgotten, None, Turn(t, false));
        }
        assert_eq!(steps[0].0, 0, "the change kept");
        assert_eq!(verdict_at(&steps, n), Reasons::HALTED);
        assert_eq!(verdict_at(&steps, 0), Reasons::HALTED);
        assert_eq!(forgotten + steps.len() as u64, n);
        // Every step a change: the latest kept, bounded.
        let (mut steps, mut forgotten) = (Vec::new(), 0u64);
        for t in 0..n {
            keep(&mut steps, &mut forgotten, None, Turn(t, true));
            assert!(steps.len() <= 2 * KEEP);
        }
        assert_eq!(forgotten + steps.len() as u64, n);
        assert_eq!(steps.last().map(|s| s.0), Some(n - 1));
        assert!(steps.len() >= KEEP + KEEP / 2);
    }

    #[test]
    fn iso_and_parse_round_trip() {
        let t = 1_767_603_601_234_567_890;
        assert_eq!(iso(t), "2026-01-05T09:00:01.234567890Z");
        assert_eq!(parse_time(&iso(t)), Ok(t));
        assert_eq!(parse_time("1767603601234567890"), Ok(t));
        assert_eq!(
            parse_time("2026-01-05T09:00:01.5Z"),
            Ok(1_767_603_601_500_000_000)
        );
        assert_eq!(iso(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            parse_time("2024-02-29T23:59:59Z").map(iso),
            Ok("2024-02-29T23:59:59.000000000Z".into())
        );
        for bad in [
            "",
            "x",
            "2026-02-30T00:00:00Z",
            "2026-01-05T24:00:00Z",
            "2026-01-05T09:00:01.1234567891Z",
            "2026-1-05T09:00:01Z",
            "99999999999999999999",
        ] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
        // Every day of a few years.
        for day in 0..(366 * 4 + 20_000) {
            let (y, m, d) = civil_from_days(day);
            assert_eq!(crate::time::days_from_civil(y, m, d), day);
        }
    }
}
