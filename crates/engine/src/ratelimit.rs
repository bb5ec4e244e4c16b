//! Log lines at most once an interval of a clock the caller passes in
//! (the receive loop's, or a capture's), with the count of those held
//! back: a flood of one event is a few lines, not one per datagram.

/// One kind of log line, at most once each `interval_ns` (and again at
/// once after the clock stepped back), counting what it held back.
#[derive(Debug, Clone)]
pub struct Limiter {
    interval_ns: u64,
    /// When a line was last written, ns.
    last: Option<u64>,
    /// Lines held back since.
    held: u64,
}

impl Limiter {
    /// A limiter of one line each `interval_ns`.
    pub const fn new(interval_ns: u64) -> Limiter {
        Limiter {
            interval_ns,
            last: None,
            held: 0,
        }
    }

    /// Whether a line is due at `t` (always with `force`): then the count
    /// held back since the last, which starts again; else it counts this
    /// one.
    pub fn due(&mut self, t: u64, force: bool) -> Option<u64> {
        let due = force || self.is_due(t);
        if !due {
            self.held += 1;
            return None;
        }
        self.last = Some(t);
        Some(std::mem::take(&mut self.held))
    }

    /// The count of lines held back, once a line is due at `t` and some
    /// were (then a line of its own is due, and the count starts again):
    /// for telling them when no later line comes to carry the count.
    pub fn overdue(&mut self, t: u64) -> Option<u64> {
        if self.held == 0 || !self.is_due(t) {
            return None;
        }
        self.due(t, false)
    }

    /// Whether a line would be due at `t` (nothing counted).
    pub fn is_due(&self, t: u64) -> bool {
        self.last
            .is_none_or(|l| t.saturating_sub(l) >= self.interval_ns || t < l)
    }

    /// When a line was last written, ns.
    pub fn last(&self) -> Option<u64> {
        self.last
    }

    /// Lines held back since.
    pub fn held(&self) -> u64 {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line held back within the interval is counted, the next one due
    /// carries the count; a clock that stepped back logs at once.
    #[test]
    fn a_line_an_interval_and_the_rest_counted() {
        let s = 1_000_000_000;
        let mut l = Limiter::new(s);
        assert_eq!(l.due(s, false), Some(0));
        assert_eq!((l.due(s + 1, false), l.due(2 * s - 1, false)), (None, None));
        assert_eq!(
            (l.held(), l.is_due(2 * s - 1), l.is_due(2 * s)),
            (2, false, true)
        );
        assert_eq!(l.due(2 * s, false), Some(2));
        assert_eq!(l.due(2 * s + 1, true), Some(0));
        assert_eq!(l.due(s, false), Some(0), "the clock stepped back");
        assert_eq!(l.last(), Some(s));
    }

    /// Lines held back are overdue once a line is due, and only then; none
    /// held, nothing is.
    #[test]
    fn held_lines_are_overdue_once_a_line_is_due() {
        let s = 1_000_000_000;
        let mut l = Limiter::new(s);
        assert_eq!(l.overdue(s), None, "none held");
        assert_eq!(l.due(s, false), Some(0));
        assert_eq!(l.due(s + 1, false), None);
        assert_eq!(l.overdue(2 * s - 1), None, "not due yet");
        assert_eq!(l.overdue(2 * s), Some(1));
        assert_eq!((l.held(), l.last()), (0, Some(2 * s)));
        assert_eq!(l.overdue(4 * s), None, "told already");
    }
}
