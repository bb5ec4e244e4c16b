//! The `--explain`, `--explain-all` and `--at` text.

use super::{AtState, BeatStep, Cause, Event, Forensics, Note, Step};
use crate::explain::{dur, iso, rel, rel_i, ticks};
use crate::state::FeedKind;
use crate::symbol::Symbol;
use crate::verdict::Reasons;
use std::fmt::Write as _;

impl Event {
    /// The event as one line of `--explain` output (no newline); `origin`
    /// is the capture's first arrival, for relative times; prices with the
    /// feed's `decimals`.
    pub fn render(&self, origin: u64, decimals: u8) -> String {
        let mut s = format!(
            "{}  {:>15}  {}",
            iso(self.time),
            rel(self.time, origin),
            describe(self, origin, decimals)
        );
        if let Some(l) = self.line {
            let _ = write!(s, ", line {l}");
        }
        if self.changed() {
            let _ = write!(s, "   {} -> {}", self.before, self.after);
        } else {
            let _ = write!(s, "   {} (unchanged)", self.after);
        }
        s
    }
}

impl Forensics {
    /// The `--explain` text: a header line (`# …`), then one event per
    /// line: every event that changed the target's verdict, and with `all`
    /// also those that did not but explain it (gaps on a full feed,
    /// snapshots, heartbeat gaps, invalid prices, …). A symbol never seen
    /// gets one line saying so.
    pub fn explanation(&self, all: bool) -> String {
        let Some((feed, symbol)) = self.target else {
            return String::new();
        };
        let f = &self.feeds[feed as usize];
        let Some(events) = self.events() else {
            return format!(
                "{} {symbol}: never seen in this capture: every check answers no_quote\n",
                f.config.name
            );
        };
        let origin = self.origin.unwrap_or(0);
        let decimals = f.config.price_decimals;
        let mut out = self.header(feed, symbol);
        if self.forgotten() > 0 {
            out.push_str(&crate::explain::forgotten_line(self.forgotten()));
        }
        let mut any = false;
        for e in events.iter().filter(|e| all || e.changed()) {
            out.push_str(&e.render(origin, decimals));
            out.push('\n');
            any = true;
        }
        // Seen (a Heartbeat, a message the full state table dropped, quotes
        // whose every price was invalid) but no valid price ever stored:
        // said, with the first event seen, which tells why. (Only when
        // every event was kept: one forgotten may have held a price.)
        if !any && self.forgotten() == 0 && events.iter().all(|e| e.after == Reasons::NO_QUOTE) {
            let _ = writeln!(
                out,
                "{} {symbol}: no valid price in this capture: every check answers no_quote; first seen:",
                f.config.name
            );
            if let Some(e) = events.first() {
                out.push_str(&e.render(origin, decimals));
                out.push('\n');
            }
        }
        out
    }

    fn header(&self, feed: u16, symbol: Symbol) -> String {
        let f = &self.feeds[feed as usize];
        let th = self
            .index
            .get(&(feed, symbol))
            .map_or(f.config.thresholds_for(symbol), |&i| self.trackers[i].th);
        let kind = match f.config.kind {
            FeedKind::Full => "full",
            FeedKind::Delta => "delta",
        };
        let offset = match f.config.offset {
            crate::clock::OffsetMode::Fixed(v) => format!("fixed {}", dur(v as i128)),
            crate::clock::OffsetMode::Auto { window_ns } => {
                format!("auto over {}", dur(window_ns as i128))
            }
        };
        format!(
            "# {} {symbol}: {kind} feed, stale after {} of silence, stale_at_source after {} of source age, clock offset {offset}; times from the capture's first datagram at {}\n",
            f.config.name,
            dur(th.stale_ns as i128),
            dur(th.source_ns as i128),
            iso(self.origin.unwrap_or(0)),
        )
    }

    /// The `--at` text: the verdict at `time` (the replay's own answer,
    /// `answer`), the event that set each reason (or, when ok, the event
    /// since which it is ok), and the state in force.
    pub fn answer_at(&self, time: u64, answer: Reasons) -> String {
        let Some((feed, symbol)) = self.target else {
            return String::new();
        };
        let name = &self.feeds[feed as usize].config.name;
        let decimals = self.feeds[feed as usize].config.price_decimals;
        let origin = self.origin.unwrap_or(time);
        let mut out = format!(
            "{name} {symbol} at {} ({}): {answer}\n",
            iso(time),
            rel(time, origin).trim_start()
        );
        let events: Vec<&Event> = self
            .events()
            .unwrap_or(&[])
            .iter()
            .filter(|e| e.time <= time)
            .collect();
        let derived = events.last().map_or(Reasons::NO_QUOTE, |e| e.after);
        let Some(last) = events.last() else {
            let first = self
                .index
                .get(&(feed, symbol))
                .map(|&i| self.trackers[i].first_seen);
            match first {
                Some(t) => {
                    let _ = writeln!(
                        out,
                        "  no_quote: not seen yet (first seen at {}, {})",
                        iso(t),
                        rel(t, origin).trim_start()
                    );
                }
                None => out.push_str("  no_quote: never seen in this capture\n"),
            }
            return out;
        };
        if answer.is_ok() {
            if let Some(e) = events.iter().rev().find(|e| e.changed()) {
                let _ = writeln!(out, "  ok since        {}", e.render(origin, decimals));
                if !std::ptr::eq(*e, *last) {
                    let _ = writeln!(out, "  latest event    {}", last.render(origin, decimals));
                }
            }
        } else {
            for (bit, reason) in Reasons::ORDER {
                if !answer.contains(bit) {
                    continue;
                }
                let cause = events
                    .iter()
                    .rev()
                    .find(|e| e.after.contains(bit) && !e.before.contains(bit));
                match cause {
                    Some(e) => {
                        let _ = writeln!(out, "  {reason:<15} {}", e.render(origin, decimals));
                    }
                    // Its cause among the events dropped for room: not
                    // told as the first one's.
                    None if self.forgotten() > 0 => {
                        let _ = writeln!(
                            out,
                            "  {reason:<15} since before the events kept; last event: {}",
                            last.render(origin, decimals)
                        );
                    }
                    None => {
                        let _ = writeln!(
                            out,
                            "  {reason:<15} since the symbol was first seen (no valid price stored yet); last event: {}",
                            last.render(origin, decimals)
                        );
                    }
                }
            }
        }
        if let Some(a) = &self.at_state {
            out.push_str(&state_line(a, time, origin, decimals));
        }
        if derived != answer {
            let _ = writeln!(
                out,
                "  note: the events imply {derived}, the replay answered {answer}"
            );
        }
        out
    }
}

/// An invalid pair and why (valid: finite, positive, bid at most ask),
/// printed to the feed's decimals unless that shows a crossed pair as
/// equal (then as read).
fn invalid(bid: f64, ask: f64, decimals: u8) -> String {
    let why = if bid.is_nan() || ask.is_nan() {
        "not a number"
    } else if bid <= 0.0 || ask <= 0.0 {
        "not positive"
    } else if bid.is_infinite() || ask.is_infinite() {
        "infinite"
    } else {
        "bid above ask"
    };
    let price = |v: f64| crate::state::Price::F64(v).fixed(decimals);
    let (b, a) = (price(bid), price(ask));
    if b == a && bid > ask {
        format!("bid {bid}, ask {ask}: {why}")
    } else {
        format!("bid {b}, ask {a}: {why}")
    }
}

fn describe(e: &Event, origin: u64, decimals: u8) -> String {
    let price = |v: f64| crate::state::Price::F64(v).fixed(decimals);
    let mut s = match e.cause {
        Cause::Quote { seq, step } => match step {
            Step::First => format!("first quote seq {seq}"),
            Step::InOrder => format!("quote seq {seq}"),
            Step::Gap { last, lost } => format!("gap: {} lost (seq {last} -> {seq})", ticks(lost)),
            Step::Duplicate { last } => {
                format!("duplicate quote seq {seq} (last seq {last}), ignored")
            }
            Step::BeforeReset { reset } => format!(
                "quote seq {seq} from before the snapshot that reset the symbol to seq {reset} (a lagging line's copy), ignored"
            ),
            Step::BeforeSnapshot { snapshot } => format!(
                "quote seq {seq} stamped at or before snapshot seq {snapshot}, which the other line brought and this one not yet: sent before it (a reset this line lost) or stamped out of order, ignored, suspect"
            ),
        },
        Cause::Heartbeat {
            next_expected,
            step,
        } => match step {
            BeatStep::First => format!(
                "first heartbeat (next expected {next_expected}): sequence baseline, suspect, no price yet"
            ),
            BeatStep::Gap { last, lost } => format!(
                "heartbeat reveals a gap: {} lost (last seq {last}, next expected {next_expected})",
                ticks(lost)
            ),
            BeatStep::Alive => format!("heartbeat (next expected {next_expected})"),
            BeatStep::BeforeReset { reset } => format!(
                "heartbeat (next expected {next_expected}) on the line lagging the snapshot that reset the symbol to seq {reset}: from before it, or past a loss; its sequence ignored, suspect"
            ),
        },
        Cause::SnapshotBeforeReset { seq, copy: true, .. } => format!(
            "snapshot seq {seq}: the lagging line's copy of the reset, the symbol since moved on, ignored"
        ),
        Cause::SnapshotBeforeReset { seq, reset, .. } => format!(
            "snapshot seq {seq} from before the snapshot that reset the symbol to seq {reset} (a lagging line's copy), ignored"
        ),
        Cause::SnapshotLate { seq } => format!(
            "snapshot seq {seq} older at its source than the last price message (or the price held): a lagging line's copy of one the other line lost, ignored"
        ),
        Cause::Snapshot { seq, last } => match last {
            None => format!("first snapshot seq {seq}"),
            Some(l) if seq < l => format!("provider reset: seq {l} -> {seq} (snapshot)"),
            Some(l) if seq > l => format!("snapshot seq {seq} (last seq {l})"),
            Some(_) => format!("snapshot seq {seq}"),
        },
        Cause::Silence {
            last_alive,
            threshold_ns,
        } => format!(
            "silence: no tick nor gap-free heartbeat since {}, over the {} stale threshold",
            rel(last_alive, origin),
            dur(threshold_ns as i128)
        ),
        Cause::SourceAge {
            source_time,
            offset,
            threshold_ns,
        } => format!(
            "source age: price made at {} (source time + clock offset {}) is now older than the {} source threshold",
            rel_i(source_time as i128 + offset, origin),
            dur(offset),
            dur(threshold_ns as i128)
        ),
        Cause::Offset { from, to } => format!("clock offset {} -> {}", dur(from), dur(to)),
        Cause::TableFull => "state table full for this feed: message for this new symbol dropped".to_string(),
        Cause::Reconciled => "state differs from the handler's: adopted the handler's".to_string(),
    };
    for n in &e.notes {
        s.push_str("; ");
        match *n {
            Note::NoSnapshotYet => s.push_str("delta feed: suspect until a snapshot"),
            Note::FirstPrice { bid, ask } => {
                let _ = write!(
                    s,
                    "first valid price (bid {}, ask {})",
                    price(bid),
                    price(ask)
                );
            }
            Note::InvalidPrice { bid, ask } => {
                let _ = write!(s, "invalid price ({})", invalid(bid, ask, decimals));
            }
            Note::StillInvalid { bid, ask } => {
                let _ = write!(s, "price still invalid ({})", invalid(bid, ask, decimals));
            }
            Note::ValidAgain => s.push_str("valid price again"),
            Note::RepairsSuspect => s.push_str("repairs suspect"),
            Note::ClearsSuspect => s.push_str("full feed: clears suspect"),
            Note::EndsSilence { silent_ns } => {
                let _ = write!(s, "ends {} of silence", dur(silent_ns as i128));
            }
            Note::NotLiveness => s.push_str("not liveness"),
            Note::SourceOld {
                age_ns,
                threshold_ns,
            } => {
                let _ = write!(
                    s,
                    "source time already {} old (threshold {})",
                    dur(age_ns),
                    dur(threshold_ns as i128)
                );
            }
            Note::SourceFresh => s.push_str("fresh source time"),
            Note::SourceAgeNow {
                age_ns,
                threshold_ns,
            } => {
                let _ = write!(
                    s,
                    "source age now {} (threshold {})",
                    dur(age_ns),
                    dur(threshold_ns as i128)
                );
            }
        }
    }
    s
}

fn state_line(a: &AtState, time: u64, origin: u64, decimals: u8) -> String {
    let Some(s) = a.state else {
        return "  state: none (no message applied yet)\n".to_string();
    };
    let mut out = format!(
        "  state: last seq {}, {} lost, {} duplicates, suspect {}, invalid {}",
        s.seq.last_seq,
        ticks(s.seq.ticks_lost),
        s.seq.duplicates,
        s.suspect,
        s.invalid
    );
    if s.last_alive != 0 {
        let _ = write!(
            out,
            ", last alive {} ({} before; stale after {})",
            rel(s.last_alive, origin),
            dur(time as i128 - s.last_alive as i128),
            dur(a.th.stale_ns as i128)
        );
    }
    match s.price {
        Some(p) => {
            let _ = write!(
                out,
                ", price bid {} ask {}, source age {} at clock offset {} (stale_at_source after {})",
                crate::state::Price::F64(p.bid).fixed(decimals),
                crate::state::Price::F64(p.ask).fixed(decimals),
                dur(time as i128 - p.source_time as i128 - a.offset),
                dur(a.offset),
                dur(a.th.source_ns as i128)
            );
        }
        None => out.push_str(", no valid price"),
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_price_says_why_and_never_reads_as_a_valid_pair() {
        assert_eq!(
            invalid(1.085004, 1.085001, 5),
            "bid 1.085004, ask 1.085001: bid above ask"
        );
        assert_eq!(
            invalid(1.08630, 1.08609, 5),
            "bid 1.08630, ask 1.08609: bid above ask"
        );
        assert_eq!(invalid(f64::NAN, 1.0, 2), "bid NaN, ask 1.00: not a number");
        assert_eq!(invalid(0.0, 1.0, 2), "bid 0.00, ask 1.00: not positive");
        assert!(invalid(1.0, f64::INFINITY, 2).ends_with(": infinite"));
    }

    #[test]
    fn durations_and_relative_times() {
        assert_eq!(dur(500_000_000), "500 ms");
        assert_eq!(dur(120_030_000), "120.03 ms");
        assert_eq!(dur(-40_000_000), "-40 ms");
        assert_eq!(dur(1), "0.000001 ms");
        assert_eq!(rel(1_234_567_890 + 7, 7), "+1234.567890 ms");
        assert_eq!(rel(5, 7), "-0.000002 ms");
    }
}
