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
//! and strictly increasing value; the front is the minimum. Values are kept in
//! 128 bits, so no `send_time` however wild can wrap or saturate the estimate.
//!
//! Its length is the number of packets in the window that could still become
//! the minimum: small on a jittery link, but up to every packet in the window
//! when the provider's clock runs slow and jitter is low. The queue grows (it
//! starts at [`INITIAL_QUEUE`] entries) up to a cap chosen by the caller:
//! replay passes no cap and is exact; the live receiver preallocates its cap
//! so it never allocates. If a stream ever fills the cap, the two oldest
//! entries are merged keeping the *lower* value for the later time: the
//! estimate can then only be lower than exact, which makes source ages larger
//! — never a falsely fresh quote — and [`OffsetEstimator::merges`] counts it.

use std::collections::VecDeque;

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

/// Entries the queue holds before it first grows.
pub const INITIAL_QUEUE: usize = 4096;
/// No cap: the queue holds whatever the window needs (replay).
pub const UNBOUNDED: usize = usize::MAX;

/// One feed's clock-offset estimate.
#[derive(Debug, Clone)]
pub struct OffsetEstimator {
    mode: OffsetMode,
    /// Monotone queue: (arrival ns, arrival − send_time ns).
    queue: VecDeque<(u64, i128)>,
    /// Most entries the queue may hold.
    cap: usize,
    /// Latest arrival fed in, ns; arrivals are made monotone against it.
    latest: u64,
    offset: i128,
    /// Times the queue was full and two entries were merged.
    merges: u64,
}

impl OffsetEstimator {
    /// An estimator whose queue holds at most `cap` entries (at least 2), all
    /// allocated now so that it never allocates later; or, with
    /// [`UNBOUNDED`], exact whatever the stream, growing from
    /// [`INITIAL_QUEUE`] entries as the window needs.
    pub fn new(mode: OffsetMode, cap: usize) -> Self {
        let cap = cap.max(2);
        let initial = match mode {
            OffsetMode::Fixed(_) => 0,
            OffsetMode::Auto { .. } if cap == UNBOUNDED => INITIAL_QUEUE,
            OffsetMode::Auto { .. } => cap,
        };
        OffsetEstimator {
            mode,
            queue: VecDeque::with_capacity(initial),
            cap,
            latest: 0,
            offset: match mode {
                OffsetMode::Fixed(v) => v as i128,
                OffsetMode::Auto { .. } => 0,
            },
            merges: 0,
        }
    }

    /// The current estimate, ns (local − provider). 0 in `auto` before the
    /// first packet. 128 bits: `arrival − send_time` of a corrupt send time
    /// does not fit 64.
    #[inline]
    pub fn offset(&self) -> i128 {
        self.offset
    }

    /// Times the bounded queue overflowed (the estimate was kept conservative).
    pub fn merges(&self) -> u64 {
        self.merges
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
        let v = arrival as i128 - send_time as i128;
        // Drop from the back every entry not lower than the new one: it can
        // never be the minimum again while the new one is in the window.
        while self.queue.back().is_some_and(|&(_, b)| b >= v) {
            self.queue.pop_back();
        }
        if self.queue.len() >= self.cap {
            // Full: merge the two oldest into (time of the second, value of the first).
            if let (Some((_, v0)), Some(second)) = (self.queue.pop_front(), self.queue.front_mut())
            {
                second.1 = v0;
            }
            self.merges += 1;
        }
        self.queue.push_back((a, v));
        // Expire from the front: keep a_q > a_p − W. The newest entry has
        // a_q = a_p and W > 0, so the queue never empties here.
        while self.queue.front().is_some_and(|&(t, _)| a - t >= window_ns) {
            self.queue.pop_front();
        }
        self.offset = self.queue.front().map_or(v, |&(_, m)| m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    /// Straight from the spec: min over packets with a_p − W < a_q <= a_p.
    fn brute(packets: &[(u64, u64)], upto: usize, window: u64) -> i128 {
        let ap = packets[upto].0;
        packets[..=upto]
            .iter()
            .filter(|(a, _)| ap - a < window)
            .map(|&(a, s)| a as i128 - s as i128)
            .min()
            .unwrap()
    }

    #[test]
    fn fixed_is_constant() {
        let mut e = OffsetEstimator::new(OffsetMode::Fixed(-250), UNBOUNDED);
        assert_eq!(e.offset(), -250);
        e.on_packet(10 * S, 1);
        assert_eq!(e.offset(), -250);
    }

    #[test]
    fn auto_starts_at_zero_and_takes_first_packet() {
        let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: 60 * S }, UNBOUNDED);
        assert_eq!(e.offset(), 0);
        e.on_packet(100 * S, 100 * S - 300);
        assert_eq!(e.offset(), 300);
    }

    #[test]
    fn window_bounds_are_exclusive_old_inclusive_new() {
        let w = 10 * S;
        let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: w }, UNBOUNDED);
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
    fn negative_and_huge_offsets_are_exact() {
        let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: S }, UNBOUNDED);
        e.on_packet(100, 400);
        assert_eq!(e.offset(), -300);
        e.on_packet(101, u64::MAX);
        assert_eq!(e.offset(), 101 - u64::MAX as i128);
    }

    /// A provider clock that runs slow on a quiet link: every packet's
    /// `arrival − send_time` is higher than the one before, so every packet
    /// in the window stays in the queue — more than the initial allocation.
    #[test]
    fn rising_offsets_past_the_initial_queue_stay_exact() {
        let w = 5 * S;
        let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: w }, UNBOUNDED);
        let n = 3 * INITIAL_QUEUE as u64;
        let ms = 1_000_000;
        for i in 0..n {
            let a = 1_000 * S + i * w / n;
            e.on_packet(a, a - ms - i);
        }
        assert_eq!(e.offset(), ms as i128);
        e.on_packet(1_000 * S + w, 1_000 * S + w - 10 * ms);
        assert_eq!(
            e.offset(),
            ms as i128 + 1,
            "the first packet left the window"
        );
        assert_eq!(e.merges(), 0);
    }

    proptest::proptest! {
        #[test]
        fn matches_brute_force(
            steps in proptest::collection::vec((0u64..3_000, 0u64..2_000), 1..300),
            window in 1u64..5_000,
        ) {
            let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: window }, UNBOUNDED);
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
            let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: window }, 2);
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
