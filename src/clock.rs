//! Clock offset between the local clock and a provider's clock (SQF section 4).
//!
//! `offset` estimates local − provider, in nanoseconds. Either it is fixed by
//! configuration, or `auto`: the minimum of `arrival − send_time` over the
//! feed's accepted packets that arrived in the last `window` (exclusive at the
//! old end, inclusive at the new). Network delay only ever adds to
//! `arrival − send_time`, so the minimum is the least-delayed packet's view of
//! the offset.
//!
//! The sliding minimum is a monotone queue: entries with increasing arrival
//! and strictly increasing value; the front is the minimum. Its capacity is
//! fixed at start (no allocation per packet). If a pathological stream ever
//! fills it, the two oldest-but-one entries are merged keeping the *lower*
//! value for the later time: the estimate can then only be lower than exact,
//! which makes source ages larger — never a falsely fresh quote.

/// How a feed's offset is obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetMode {
    /// A configured constant, ns (local − provider).
    Fixed(i64),
    /// Sliding-window minimum over this window, ns (> 0).
    Auto {
        /// Window length, ns.
        window_ns: u64,
    },
}

/// Default capacity of the monotone queue (entries).
pub const DEFAULT_QUEUE: usize = 4096;

/// One feed's clock-offset estimate.
#[derive(Debug, Clone)]
pub struct OffsetEstimator {
    mode: OffsetMode,
    /// Monotone queue as a ring: (arrival ns, arrival − send_time ns).
    ring: Box<[(u64, i64)]>,
    head: usize,
    len: usize,
    /// Latest arrival fed in, ns; arrivals are made monotone against it.
    latest: u64,
    offset: i64,
    /// Times the queue was full and two entries were merged.
    merges: u64,
}

/// `a − b` for u64 ns times, clamped to i64.
#[inline]
pub fn signed_diff(a: u64, b: u64) -> i64 {
    let d = a as i128 - b as i128;
    d.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

impl OffsetEstimator {
    /// An estimator; `queue` is the monotone queue's fixed capacity (>= 2).
    pub fn new(mode: OffsetMode, queue: usize) -> Self {
        let cap = if matches!(mode, OffsetMode::Auto { .. }) {
            queue.max(2)
        } else {
            0
        };
        OffsetEstimator {
            mode,
            ring: vec![(0, 0); cap].into_boxed_slice(),
            head: 0,
            len: 0,
            latest: 0,
            offset: match mode {
                OffsetMode::Fixed(v) => v,
                OffsetMode::Auto { .. } => 0,
            },
            merges: 0,
        }
    }

    /// The current estimate, ns (local − provider). 0 in `auto` before the first packet.
    #[inline]
    pub fn offset(&self) -> i64 {
        self.offset
    }

    /// Times the bounded queue overflowed (the estimate was kept conservative).
    pub fn merges(&self) -> u64 {
        self.merges
    }

    #[inline]
    fn at(&self, i: usize) -> (u64, i64) {
        self.ring[(self.head + i) % self.ring.len()]
    }

    #[inline]
    fn set(&mut self, i: usize, e: (u64, i64)) {
        let n = self.ring.len();
        self.ring[(self.head + i) % n] = e;
    }

    /// An accepted packet: arrival `arrival` (local ns), `send_time` (provider ns).
    ///
    /// Arrival times are expected in order (they are, live; a capture whose
    /// timestamps step back is treated as if the packet arrived at the latest
    /// time seen, so the window never moves backwards).
    #[inline]
    pub fn on_packet(&mut self, arrival: u64, send_time: u64) {
        let OffsetMode::Auto { window_ns } = self.mode else {
            return;
        };
        let a = arrival.max(self.latest);
        self.latest = a;
        let v = signed_diff(arrival, send_time);
        // Drop from the back every entry not lower than the new one: it can
        // never be the minimum again while the new one is in the window.
        while self.len > 0 && self.at(self.len - 1).1 >= v {
            self.len -= 1;
        }
        if self.len == self.ring.len() {
            // Full: merge entries 0 and 1 into (time of 1, value of 0).
            let (_, v0) = self.at(0);
            let (t1, _) = self.at(1);
            self.head = (self.head + 1) % self.ring.len();
            self.len -= 1;
            self.set(0, (t1, v0));
            self.merges += 1;
        }
        self.set(self.len, (a, v));
        self.len += 1;
        // Expire from the front: keep a_q > a_p − W.
        while self.len > 1 && a.saturating_sub(self.at(0).0) >= window_ns {
            self.head = (self.head + 1) % self.ring.len();
            self.len -= 1;
        }
        self.offset = self.at(0).1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    /// Straight from the spec: min over packets with a_p − W < a_q <= a_p.
    fn brute(packets: &[(u64, u64)], upto: usize, window: u64) -> i64 {
        let ap = packets[upto].0;
        packets[..=upto]
            .iter()
            .filter(|(a, _)| ap - a < window)
            .map(|&(a, s)| signed_diff(a, s))
            .min()
            .unwrap()
    }

    #[test]
    fn fixed_is_constant() {
        let mut e = OffsetEstimator::new(OffsetMode::Fixed(-250), DEFAULT_QUEUE);
        assert_eq!(e.offset(), -250);
        e.on_packet(10 * S, 1);
        assert_eq!(e.offset(), -250);
    }

    #[test]
    fn auto_starts_at_zero_and_takes_first_packet() {
        let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: 60 * S }, DEFAULT_QUEUE);
        assert_eq!(e.offset(), 0);
        e.on_packet(100 * S, 100 * S - 300);
        assert_eq!(e.offset(), 300);
    }

    #[test]
    fn window_bounds_are_exclusive_old_inclusive_new() {
        let w = 10 * S;
        let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: w }, DEFAULT_QUEUE);
        e.on_packet(100 * S, 100 * S - 5); // offset 5
        e.on_packet(101 * S, 101 * S - 50); // offset 50
        assert_eq!(e.offset(), 5);
        // Exactly W after the first: a_p − W = a_1, which is excluded.
        e.on_packet(110 * S, 110 * S - 70);
        assert_eq!(e.offset(), 50);
        // One ns before the second packet leaves the window it is still in.
        e.on_packet(111 * S - 1, 111 * S - 1 - 90);
        assert_eq!(e.offset(), 50);
        e.on_packet(111 * S, 111 * S - 95);
        assert_eq!(e.offset(), 70);
    }

    #[test]
    fn negative_offsets_and_clamping() {
        let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: S }, DEFAULT_QUEUE);
        e.on_packet(100, 400);
        assert_eq!(e.offset(), -300);
        e.on_packet(101, u64::MAX);
        assert_eq!(e.offset(), i64::MIN);
    }

    proptest::proptest! {
        #[test]
        fn matches_brute_force(
            steps in proptest::collection::vec((0u64..3_000, 0u64..2_000), 1..300),
            window in 1u64..5_000,
        ) {
            let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: window }, DEFAULT_QUEUE);
            let mut packets = Vec::new();
            let mut a = 1_000_000u64;
            for (gap, delay) in steps {
                a += gap;
                let send = a - 500 - delay;
                packets.push((a, send));
                e.on_packet(a, send);
                proptest::prop_assert_eq!(e.offset(), brute(&packets, packets.len() - 1, window));
            }
        }

        #[test]
        fn tiny_queue_never_overestimates(
            steps in proptest::collection::vec((0u64..100, 0u64..2_000), 1..300),
            window in 1u64..5_000,
        ) {
            let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: window }, 3);
            let mut packets = Vec::new();
            let mut a = 1_000_000u64;
            for (gap, delay) in steps {
                a += gap;
                let send = a - 500 - delay;
                packets.push((a, send));
                e.on_packet(a, send);
                proptest::prop_assert!(e.offset() <= brute(&packets, packets.len() - 1, window));
            }
        }
    }
}
