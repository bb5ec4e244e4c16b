//! The `--timeline` model: per-symbol bands of verdict segments and
//! markers, bounded in size (buckets that double in width as a band grows),
//! which the tracking fills and the SVG ([`super::svg`]) draws. Times in
//! ns; buckets count from `origin`, the capture's first arrival.

use crate::verdict::Reasons;

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
pub(super) struct Marks {
    res: u64,
    pub(super) items: Vec<Mark>,
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
pub(super) enum Class {
    Ok,
    NoQuote,
    Suspect,
    Invalid,
    Stale,
}

impl Class {
    pub(super) fn of(r: Reasons) -> Class {
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

    pub(super) fn colour(self) -> &'static str {
        match self {
            Class::Ok => "#2e9d48",
            Class::NoQuote => "#a6a6a6",
            Class::Suspect => "#f0a202",
            Class::Invalid => "#8e44ad",
            Class::Stale => "#d62828",
        }
    }

    pub(super) fn name(self) -> &'static str {
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
pub(super) struct Seg {
    pub(super) start: u64,
    pub(super) mixed_until: u64,
    pub(super) worst: Class,
    pub(super) last: Reasons,
}

/// One symbol's timeline: verdict segments and markers, bounded in size.
#[derive(Debug, Clone)]
pub(super) struct Band {
    res: u64,
    pub(super) segs: Vec<Seg>,
    pub(super) marks: [Marks; 4],
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
    pub(super) fn coarsen_to(&mut self, origin: u64, res: u64) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
