//! The `--timeline` picture: per-symbol bands of verdict segments and
//! markers, bounded in size, and their SVG.

use super::text::{dur, rel, ticks};
use super::tracking::Tracker;
use super::{iso, Forensics};
use crate::verdict::Reasons;
use std::fmt::Write as _;

/// Marker kinds on a timeline band.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MarkKind {
    Gap = 0,
    HeartbeatGap = 1,
    Snapshot = 2,
    Reset = 3,
}

/// One marker, or several merged in one time bucket.
#[derive(Debug, Clone, Copy)]
pub(super) struct Mark {
    pub(super) t: u64,
    pub(super) until: u64,
    pub(super) count: u64,
    pub(super) ticks: u64,
    /// Sequence before and after (single markers only).
    pub(super) from: u64,
    pub(super) to: u64,
}

/// Markers a band keeps of each kind before merging neighbours (so at most
/// 1000 per band; about one per pixel and kind is all a reader can see).
const MARK_LIMIT: usize = 250;
/// Segments a band keeps before merging neighbours.
const SEG_LIMIT: usize = 4096;

/// A list of markers of one kind with time buckets that double in width
/// whenever it grows past its limit.
#[derive(Debug, Clone)]
struct Marks {
    res: u64,
    items: Vec<Mark>,
}

impl Marks {
    fn new() -> Marks {
        Marks {
            res: 1,
            items: Vec::new(),
        }
    }

    fn push(&mut self, origin: u64, m: Mark) {
        let b = |t: u64| t.saturating_sub(origin) / self.res;
        if let Some(last) = self.items.last_mut() {
            if b(last.t) == b(m.t) {
                merge_mark(last, &m);
                return;
            }
        }
        self.items.push(m);
        while self.items.len() > MARK_LIMIT {
            self.coarsen(origin, self.res.saturating_mul(2));
        }
    }

    fn coarsen(&mut self, origin: u64, res: u64) {
        self.res = res;
        let mut out: Vec<Mark> = Vec::with_capacity(self.items.len());
        for m in self.items.drain(..) {
            match out.last_mut() {
                Some(last)
                    if last.t.saturating_sub(origin) / res == m.t.saturating_sub(origin) / res =>
                {
                    merge_mark(last, &m)
                }
                _ => out.push(m),
            }
        }
        self.items = out;
    }
}

fn merge_mark(into: &mut Mark, m: &Mark) {
    into.count += m.count;
    into.ticks = into.ticks.saturating_add(m.ticks);
    into.until = into.until.max(m.until);
}

/// Verdict colours, ordered by severity (the worst is shown when several
/// verdicts share one bucket).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    Ok,
    NoQuote,
    Suspect,
    Invalid,
    Stale,
}

impl Class {
    fn of(r: Reasons) -> Class {
        if r.contains(Reasons::NO_QUOTE) {
            Class::NoQuote
        } else if r.contains(Reasons::STALE) || r.contains(Reasons::STALE_AT_SOURCE) {
            Class::Stale
        } else if r.contains(Reasons::INVALID_PRICE) {
            Class::Invalid
        } else if r.contains(Reasons::SUSPECT) {
            Class::Suspect
        } else {
            Class::Ok
        }
    }

    fn colour(self) -> &'static str {
        match self {
            Class::Ok => "#2e9d48",
            Class::NoQuote => "#a6a6a6",
            Class::Suspect => "#f0a202",
            Class::Invalid => "#8e44ad",
            Class::Stale => "#d62828",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Class::Ok => "ok",
            Class::NoQuote => "no_quote",
            Class::Suspect => "suspect",
            Class::Invalid => "invalid_price",
            Class::Stale => "stale",
        }
    }
}

/// A stretch of a band: from `start`, several verdicts (shown as the worst)
/// until `mixed_until`, then `last` until the next segment.
#[derive(Debug, Clone, Copy)]
struct Seg {
    start: u64,
    mixed_until: u64,
    worst: Class,
    last: Reasons,
}

/// One symbol's timeline: verdict segments and markers, bounded in size.
#[derive(Debug, Clone)]
pub(super) struct Band {
    res: u64,
    segs: Vec<Seg>,
    marks: [Marks; 4],
}

impl Band {
    pub(super) fn new() -> Band {
        Band {
            res: 1,
            segs: Vec::new(),
            marks: [Marks::new(), Marks::new(), Marks::new(), Marks::new()],
        }
    }

    pub(super) fn verdict(&mut self, origin: u64, t: u64, r: Reasons) {
        let res = self.res;
        let b = |t: u64| t.saturating_sub(origin) / res;
        if let Some(last) = self.segs.last_mut() {
            if last.last == r {
                return;
            }
            if t <= last.start && last.mixed_until == last.start {
                // Same nanosecond (or a capture stepping back): nothing
                // lasted, the new verdict replaces it.
                last.last = r;
                last.worst = Class::of(r);
                let n = self.segs.len();
                if n >= 2 && self.segs[n - 2].last == r {
                    self.segs.pop();
                }
                return;
            }
            if b(t) == b(last.start) {
                last.worst = last.worst.max(Class::of(last.last));
                last.mixed_until = t.max(last.mixed_until);
                last.last = r;
                return;
            }
        }
        self.segs.push(Seg {
            start: t,
            mixed_until: t,
            worst: Class::of(r),
            last: r,
        });
        while self.segs.len() > SEG_LIMIT {
            self.coarsen(origin, self.res.saturating_mul(2));
        }
    }

    fn coarsen(&mut self, origin: u64, res: u64) {
        self.res = res;
        let b = |t: u64| t.saturating_sub(origin) / res;
        let mut out: Vec<Seg> = Vec::with_capacity(self.segs.len());
        for s in self.segs.drain(..) {
            match out.last_mut() {
                Some(a) if b(a.start) == b(s.start) => {
                    a.worst = a.worst.max(Class::of(a.last));
                    if s.mixed_until > s.start {
                        a.worst = a.worst.max(s.worst);
                        a.mixed_until = s.mixed_until;
                    } else {
                        a.mixed_until = s.start;
                    }
                    a.last = s.last;
                }
                _ => out.push(s),
            }
        }
        self.segs = out;
    }

    pub(super) fn mark(&mut self, origin: u64, kind: MarkKind, m: Mark) {
        self.marks[kind as usize].push(origin, m);
    }

    /// Merges everything finer than `res` (render time: about a pixel).
    fn coarsen_to(&mut self, origin: u64, res: u64) {
        while self.res < res {
            self.coarsen(origin, self.res.saturating_mul(2));
        }
        for m in &mut self.marks {
            while m.res < res {
                m.coarsen(origin, m.res.saturating_mul(2));
            }
        }
    }
}

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

/// Escapes text for XML content and attribute values.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
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
    let _ = writeln!(
        o,
        r#"<text x="10" y="38">{} to {} ({}), {} symbol(s)</text>"#,
        iso(start),
        iso(end),
        dur(span as i128),
        order.len()
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
    fn axis_steps_are_round() {
        assert_eq!(nice_step(6_000_000_000, 10), 1_000_000_000);
        assert_eq!(nice_step(3_000_000_000, 10), 500_000_000);
        assert_eq!(nice_step(1, 10), 1);
        assert_eq!(axis_label(1_500_000_000, 500_000_000), "1.5 s");
        assert_eq!(axis_label(250_000, 50_000_000), "0.25 ms");
        assert_eq!(axis_label(3_000, 1_000), "3 µs");
    }

    #[test]
    fn bands_stay_bounded_and_keep_the_last_verdict() {
        let mut b = Band::new();
        let r = [Reasons::empty(), Reasons::STALE];
        for i in 0..100_000u64 {
            b.verdict(0, i * 1000, r[(i % 2) as usize]);
            b.mark(
                0,
                MarkKind::Gap,
                Mark {
                    t: i * 1000,
                    until: i * 1000,
                    count: 1,
                    ticks: 2,
                    from: i,
                    to: i + 3,
                },
            );
        }
        b.verdict(0, 200_000_000, Reasons::SUSPECT);
        assert!(b.segs.len() <= SEG_LIMIT);
        assert!(b.marks[0].items.len() <= MARK_LIMIT);
        assert_eq!(
            b.marks[0].items.iter().map(|m| m.count).sum::<u64>(),
            100_000
        );
        assert_eq!(
            b.marks[0].items.iter().map(|m| m.ticks).sum::<u64>(),
            200_000
        );
        let last = b.segs.last().unwrap();
        assert_eq!(last.last, Reasons::SUSPECT);
        assert!(b.segs.iter().any(|s| s.worst == Class::Stale));
        b.coarsen_to(0, 1 << 20);
        assert!(b.segs.windows(2).all(|w| w[0].start < w[1].start));
    }

    #[test]
    fn same_nanosecond_flap_leaves_no_trace() {
        let mut b = Band::new();
        b.verdict(0, 10, Reasons::empty());
        b.verdict(0, 20, Reasons::INVALID_PRICE);
        b.verdict(0, 20, Reasons::empty());
        assert_eq!(b.segs.len(), 1);
        assert_eq!(b.segs[0].last, Reasons::empty());
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(esc(r#"a<b>&"c'"#), "a&lt;b&gt;&amp;&quot;c&apos;");
    }
}
