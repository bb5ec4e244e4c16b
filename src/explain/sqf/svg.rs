//! The `--timeline` picture: the SVG of each tracked symbol's band
//! ([`super::band`]).

use super::band::{Class, Mark, MarkKind};
use super::tracking::Tracker;
use super::Forensics;
use crate::explain::{dur, iso, rel, ticks};
use crate::verdict::Reasons;
use std::fmt::Write as _;

impl Forensics {
    /// The `--timeline` SVG: one band per tracked symbol (feed order, then
    /// symbol name), coloured by verdict over the capture's span, with
    /// markers for gaps, heartbeat-revealed gaps, snapshots and provider
    /// resets, and a time axis. `title` names the capture.
    pub fn timeline_svg(&self, title: &str) -> String {
        svg(self, title)
    }
}

const LEFT: f64 = 150.0;
const PLOT_W: f64 = 1200.0;
const RIGHT: f64 = 40.0;
const TOP: f64 = 78.0;
const BAND_H: f64 = 16.0;
const BAND_STEP: f64 = 30.0;

/// Escapes text for XML content and attribute values; a character XML 1.0
/// does not allow at all (a control character of a file name: not even as
/// a reference) is shown as U+FFFD.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c.is_control() || matches!(c, '\u{fffe}' | '\u{ffff}') => {
                out.push(char::REPLACEMENT_CHARACTER)
            }
            c => out.push(c),
        }
    }
    out
}

/// A round step of about `span / n`: 1, 2 or 5 × 10^k ns.
fn nice_step(span: u64, n: u64) -> u64 {
    let raw = (span / n).max(1);
    let mut p = 1u64;
    while p <= raw / 10 {
        p *= 10;
    }
    for m in [1, 2, 5, 10] {
        if p.saturating_mul(m) >= raw {
            return p.saturating_mul(m);
        }
    }
    p.saturating_mul(10)
}

/// An axis label for `d` ns in the unit `step` suggests.
fn axis_label(d: u64, step: u64) -> String {
    let (div, unit) = if step >= 100_000_000 {
        (1_000_000_000u64, "s")
    } else if step >= 100_000 {
        (1_000_000, "ms")
    } else if step >= 100 {
        (1_000, "µs")
    } else {
        (1, "ns")
    };
    let (int, frac) = (d / div, d % div);
    if frac == 0 {
        format!("{int} {unit}")
    } else {
        let width = div.to_string().len() - 1;
        let f = format!("{frac:0width$}");
        format!("{int}.{} {unit}", f.trim_end_matches('0'))
    }
}

fn svg(fx: &Forensics, title: &str) -> String {
    let origin = fx.origin.unwrap_or(0);
    let (start, end) = if fx.span.0 <= fx.span.1 {
        fx.span
    } else {
        (origin, origin)
    };
    let span = (end - start).max(1);
    let x = |t: u64| LEFT + (t.clamp(start, end) - start) as f64 / span as f64 * PLOT_W;
    // About one bucket per pixel: markers and mixed spans merge below that.
    let px_res = (span as f64 / PLOT_W).ceil() as u64;

    let mut order: Vec<&Tracker> = fx.trackers.iter().filter(|t| t.band.is_some()).collect();
    order.sort_by_key(|t| (t.feed, t.symbol.to_string()));
    let width = LEFT + PLOT_W + RIGHT;
    let axis_y = TOP + order.len() as f64 * BAND_STEP + 4.0;
    let height = axis_y + 44.0;

    let mut o = String::new();
    let _ = writeln!(o, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(o, "<title>tickguard timeline: {}</title>", esc(title));
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="10" y="20" font-size="14" font-weight="bold">tickguard replay timeline: {}</text>"#,
        esc(title)
    );
    let more = match fx.undrawn {
        true => format!(
            " (only the first {} seen are drawn: --explain FEED SYMBOL for another)",
            super::MAX_DRAWN
        ),
        false => String::new(),
    };
    let _ = writeln!(
        o,
        r#"<text x="10" y="38">{} to {} ({}), {} symbol(s){}</text>"#,
        iso(start),
        iso(end),
        dur(span as i128),
        order.len(),
        esc(&more)
    );
    // Legend.
    let mut lx = 10.0;
    for c in [
        Class::Ok,
        Class::Suspect,
        Class::Stale,
        Class::Invalid,
        Class::NoQuote,
    ] {
        let label = match c {
            Class::Stale => "stale / stale_at_source",
            c => c.name(),
        };
        let _ = writeln!(
            o,
            r#"<rect x="{lx}" y="48" width="12" height="10" fill="{}"/><text x="{}" y="57">{label}</text>"#,
            c.colour(),
            lx + 16.0
        );
        lx += 28.0 + 5.8 * label.len() as f64;
    }
    let _ = writeln!(
        o,
        r#"<line x1="{lx}" y1="46" x2="{lx}" y2="58" stroke="{GAP_COLOUR}" stroke-width="1.5"/><text x="{}" y="57">gap</text>"#,
        lx + 5.0
    );
    lx += 38.0;
    let _ = writeln!(
        o,
        r#"<path d="M{lx},52 l-4,6 h8 z" fill="{HB_COLOUR}"/><text x="{}" y="57">heartbeat-revealed gap</text>"#,
        lx + 8.0
    );
    lx += 150.0;
    let _ = writeln!(
        o,
        r#"<path d="M{lx},47 l4,5 l-4,5 l-4,-5 z" fill="{SNAP_COLOUR}"/><text x="{}" y="57">snapshot</text>"#,
        lx + 8.0
    );
    lx += 70.0;
    let _ = writeln!(
        o,
        r#"<rect x="{}" y="45" width="2.5" height="14" fill="black"/><text x="{}" y="57">provider reset</text>"#,
        lx - 1.0,
        lx + 6.0
    );

    // Grid and axis.
    let step = nice_step(span, 10);
    let _ = writeln!(o, r##"<g class="axis" stroke="#333">"##);
    let _ = writeln!(
        o,
        r#"<line x1="{LEFT}" y1="{axis_y}" x2="{}" y2="{axis_y}"/>"#,
        LEFT + PLOT_W
    );
    let mut d = 0u64;
    while d <= span {
        let tx = x(start + d);
        let _ = writeln!(
            o,
            r##"<line x1="{tx:.2}" y1="{}" x2="{tx:.2}" y2="{axis_y}" stroke="#e4e4e4"/><line x1="{tx:.2}" y1="{axis_y}" x2="{tx:.2}" y2="{}"/><text x="{tx:.2}" y="{}" text-anchor="middle" stroke="none">{}</text>"##,
            TOP - 8.0,
            axis_y + 5.0,
            axis_y + 17.0,
            axis_label(d, step)
        );
        match d.checked_add(step) {
            Some(n) => d = n,
            None => break,
        }
    }
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" text-anchor="middle" stroke="none">time since {}</text>"#,
        LEFT + PLOT_W / 2.0,
        axis_y + 34.0,
        iso(start)
    );
    let _ = writeln!(o, "</g>");

    for (i, t) in order.iter().enumerate() {
        let y = TOP + i as f64 * BAND_STEP;
        let Some(band) = &t.band else { continue };
        let mut band = band.clone();
        band.coarsen_to(origin, px_res);
        let feed = &fx.feeds[t.feed as usize].config.name;
        let name = format!("{feed} {}", t.symbol);
        let _ = writeln!(
            o,
            r#"<g class="band" data-feed="{}" data-symbol="{}">"#,
            esc(feed),
            esc(&t.symbol.to_string())
        );
        let _ = writeln!(
            o,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            LEFT - 8.0,
            y + 12.0,
            esc(&name)
        );
        // The band as pieces of time with one colour each, then drawn as
        // runs: pieces of a pixel or more are drawn as they are; runs of
        // narrower ones become one rect in the worst colour among them, so
        // the rects follow what can be seen, not how often it flapped.
        let mut pieces: Vec<(u64, u64, Class, Option<Reasons>)> = Vec::new();
        let first = band.segs.first().map_or(end, |s| s.start);
        pieces.push((start, first, Class::NoQuote, Some(Reasons::NO_QUOTE)));
        for (k, s) in band.segs.iter().enumerate() {
            let next = band.segs.get(k + 1).map_or(end, |n| n.start);
            if s.mixed_until > s.start {
                pieces.push((s.start, s.mixed_until.min(next), s.worst, None));
            }
            pieces.push((s.mixed_until, next, Class::of(s.last), Some(s.last)));
        }
        let mut runs: Vec<(u64, u64, Class, Option<Reasons>)> = Vec::new();
        for (from, to, class, what) in pieces {
            let (from, to) = (from.clamp(start, end), to.clamp(start, end));
            if to <= from {
                continue;
            }
            let wide = x(to) - x(from) >= 1.0 && what.is_some();
            match runs.last_mut() {
                Some(r) if wide && r.3.is_some() && r.3 == what => r.1 = to,
                // A run of narrow pieces absorbs those no worse than its
                // colour; a worse one starts a new run once it is a pixel wide.
                Some(r) if !wide && r.3.is_none() && (class <= r.2 || x(r.1) - x(r.0) < 1.0) => {
                    r.1 = to;
                    r.2 = r.2.max(class);
                }
                _ => runs.push((from, to, class, if wide { what } else { None })),
            }
        }
        for (from, to, class, what) in runs {
            let what = match what {
                Some(r) => r.to_string(),
                None => format!("several verdicts (worst {})", class.name()),
            };
            let _ = writeln!(
                o,
                r#"<rect x="{:.2}" y="{y}" width="{:.2}" height="{BAND_H}" fill="{}"><title>{} {what} from {} to {}</title></rect>"#,
                x(from),
                (x(to) - x(from)).max(0.5),
                class.colour(),
                esc(&name),
                rel(from, origin),
                rel(to, origin)
            );
        }
        for (kind, marks) in [
            MarkKind::Gap,
            MarkKind::HeartbeatGap,
            MarkKind::Snapshot,
            MarkKind::Reset,
        ]
        .into_iter()
        .zip(&band.marks)
        {
            for m in &marks.items {
                if m.t < start || m.t > end {
                    continue;
                }
                let mx = x(m.t);
                let tip = esc(&mark_title(kind, m, origin));
                let _ = match kind {
                    MarkKind::Gap => writeln!(
                        o,
                        r#"<line x1="{mx:.2}" y1="{}" x2="{mx:.2}" y2="{}" stroke="{GAP_COLOUR}" stroke-width="1.5"><title>{tip}</title></line>"#,
                        y - 4.0,
                        y + 6.0
                    ),
                    MarkKind::HeartbeatGap => writeln!(
                        o,
                        r#"<path d="M{mx:.2},{} l-4,6 h8 z" fill="{HB_COLOUR}"><title>{tip}</title></path>"#,
                        y + BAND_H - 1.0
                    ),
                    MarkKind::Snapshot => writeln!(
                        o,
                        r#"<path d="M{mx:.2},{} l4,5 l-4,5 l-4,-5 z" fill="{SNAP_COLOUR}" stroke="white" stroke-width="0.5"><title>{tip}</title></path>"#,
                        y + BAND_H / 2.0 - 5.0
                    ),
                    MarkKind::Reset => writeln!(
                        o,
                        r#"<rect x="{:.2}" y="{}" width="2.5" height="{}" fill="black"><title>{tip}</title></rect>"#,
                        mx - 1.25,
                        y - 3.0,
                        BAND_H + 6.0
                    ),
                };
            }
        }
        let _ = writeln!(o, "</g>");
    }
    if let Some(at) = fx.at {
        if (start..=end).contains(&at) {
            let ax = x(at);
            let _ = writeln!(
                o,
                r#"<line x1="{ax:.2}" y1="{}" x2="{ax:.2}" y2="{axis_y}" stroke="black" stroke-dasharray="4,3"><title>--at {} ({})</title></line>"#,
                TOP - 10.0,
                iso(at),
                rel(at, origin)
            );
        }
    }
    let _ = writeln!(o, "</svg>");
    o
}

const GAP_COLOUR: &str = "#c00000";
const HB_COLOUR: &str = "#c00000";
const SNAP_COLOUR: &str = "#1f5fd6";

fn mark_title(kind: MarkKind, m: &Mark, origin: u64) -> String {
    if m.count == 1 {
        let at = rel(m.t, origin);
        return match kind {
            MarkKind::Gap => format!(
                "gap: {} lost (seq {} -> {}) at {at}",
                ticks(m.ticks),
                m.from,
                m.to
            ),
            MarkKind::HeartbeatGap => format!(
                "heartbeat reveals a gap: {} lost (last seq {}, next expected {}) at {at}",
                ticks(m.ticks),
                m.from,
                m.to
            ),
            MarkKind::Snapshot => format!("snapshot seq {} at {at}", m.to),
            MarkKind::Reset => format!("provider reset: seq {} -> {} at {at}", m.from, m.to),
        };
    }
    let what = match kind {
        MarkKind::Gap => format!("{} gaps, {} lost", m.count, ticks(m.ticks)),
        MarkKind::HeartbeatGap => format!(
            "{} heartbeat-revealed gaps, {} lost",
            m.count,
            ticks(m.ticks)
        ),
        MarkKind::Snapshot => format!("{} snapshots", m.count),
        MarkKind::Reset => format!("{} provider resets", m.count),
    };
    format!(
        "{what} from {} to {}",
        rel(m.t, origin),
        rel(m.until, origin)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_text_is_well_formed_xml_whatever_a_file_name_holds() {
        assert_eq!(
            esc("a<b>&\"c'\u{1b}[0m\u{0}\td\u{fffe}\u{ffff}"),
            "a&lt;b&gt;&amp;&quot;c&apos;\u{fffd}[0m\u{fffd}\td\u{fffd}\u{fffd}"
        );
    }

    #[test]
    fn axis_steps_are_round() {
        assert_eq!(nice_step(6_000_000_000, 10), 1_000_000_000);
        assert_eq!(nice_step(3_000_000_000, 10), 500_000_000);
        assert_eq!(nice_step(1, 10), 1);
        assert_eq!(axis_label(1_500_000_000, 500_000_000), "1.5 s");
        assert_eq!(axis_label(250_000, 50_000_000), "0.25 ms");
        assert_eq!(axis_label(3_000, 1_000), "3 µs");
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(esc(r#"a<b>&"c'"#), "a&lt;b&gt;&amp;&quot;c&apos;");
    }
}
