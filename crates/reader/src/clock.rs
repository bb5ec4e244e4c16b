//! A fast reading of CLOCK_REALTIME for a gateway that checks before every
//! order: the CPU's time-stamp counter scaled to nanoseconds and re-anchored
//! on the system clock once a millisecond.
//!
//! `clock_gettime` through the vDSO costs 20–50 ns (more under a
//! hypervisor); a counter read and a multiply cost a fraction of that. The
//! reading between anchors is extrapolated with the counter rate measured
//! against CLOCK_REALTIME over the clock's whole life, so it is never
//! further from CLOCK_REALTIME than the rate error over one millisecond
//! (nanoseconds; stale thresholds are milliseconds), and a step of the
//! system clock (NTP) is followed within a millisecond. Each anchor pairs
//! a counter reading with system-clock readings at most 10 µs apart on
//! both sides of it (a thread preempted inside a pair would skew the
//! rate), and a rate no counter can have (outside 0.1 to 10 ns a tick) is
//! measured afresh.
//!
//! The counter is used only where it is a sound clock: x86_64 with the
//! kernel itself timing on it (`current_clocksource` is `tsc`, which the
//! kernel allows only for a constant, synchronised counter). Anywhere else
//! every reading is [`now_ns`].

use std::cell::Cell;

/// The local clock for checks: ns since the Unix epoch (CLOCK_REALTIME,
/// read through the vDSO, no system call).
#[inline]
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Re-anchor on CLOCK_REALTIME after this long, ns.
const ANCHOR_NS: u64 = 1_000_000;
/// Measure the counter rate over at least this long before using it, ns.
const CALIBRATE_NS: u64 = 1_000_000;
/// A measured rate further than 2^-this from the last one (about 0.1%)
/// means the system clock was stepped: measure afresh.
const RATE_JUMP_SHIFT: u32 = 10;
/// A counter reading is paired with the system time only when the two
/// system-clock readings around it are at most this far apart, ns: the
/// pair is then off by at most half of it (a thread preempted inside a
/// pair would otherwise skew the rate measured from it, and every reading
/// with it).
const PAIR_NS: u64 = 10_000;
/// Attempts at a pair that tight before the anchor waits for the next
/// reading.
const PAIR_TRIES: usize = 8;
/// The rates a time-stamp counter can have, ns per tick × 2^32: 0.1 to
/// 10 ns a tick (10 GHz to 100 MHz). A rate outside was measured wrong.
const RATE_MIN: u64 = (1u64 << 32) / 10;
const RATE_MAX: u64 = 10 << 32;

/// CLOCK_REALTIME in ns since the Unix epoch, read cheaply. One per thread
/// (it is not `Sync`): each keeps its own anchor.
#[derive(Debug)]
pub struct WallClock {
    /// Counter and system time of the last anchor.
    anchor_tsc: Cell<u64>,
    anchor_ns: Cell<u64>,
    /// Counter and system time the rate is measured from.
    base_tsc: Cell<u64>,
    base_ns: Cell<u64>,
    /// ns per counter tick, × 2^32; 0 until measured.
    rate: Cell<u64>,
    /// Ticks between anchors; 0 until the rate is known (every reading anchors).
    anchor_ticks: Cell<u64>,
    /// The counter is a sound clock here.
    counter: bool,
}

impl WallClock {
    /// A clock on the time-stamp counter where that is sound, else on
    /// `clock_gettime`. Reads one small sysfs file.
    pub fn new() -> WallClock {
        let counter = cfg!(target_arch = "x86_64")
            && std::fs::read_to_string(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            )
            .is_ok_and(|s| s.trim() == "tsc");
        WallClock::with_counter(counter)
    }

    fn with_counter(counter: bool) -> WallClock {
        let c = WallClock {
            anchor_tsc: Cell::new(0),
            anchor_ns: Cell::new(0),
            base_tsc: Cell::new(0),
            base_ns: Cell::new(0),
            rate: Cell::new(0),
            anchor_ticks: Cell::new(0),
            counter,
        };
        if let (true, Some((tsc, ns))) = (counter, pair()) {
            c.base_tsc.set(tsc);
            c.base_ns.set(ns);
            c.anchor_tsc.set(tsc);
            c.anchor_ns.set(ns);
        }
        c
    }

    /// True when readings come from the time-stamp counter.
    pub fn uses_counter(&self) -> bool {
        self.counter
    }

    /// Now: ns since the Unix epoch, CLOCK_REALTIME.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        if !self.counter {
            return now_ns();
        }
        let dt = tsc().wrapping_sub(self.anchor_tsc.get());
        // A counter behind the anchor wraps to a huge `dt` and re-anchors.
        if dt < self.anchor_ticks.get() {
            let ns = (dt as u128 * self.rate.get() as u128) >> 32;
            return self.anchor_ns.get() + ns as u64;
        }
        self.anchor()
    }

    /// Reads the system clock, re-measures the rate and anchors there.
    #[cold]
    #[inline(never)]
    fn anchor(&self) -> u64 {
        let Some((tsc, ns)) = pair() else {
            // No tight pair (the thread preempted in every attempt): the
            // system clock, and the anchor tried again next reading.
            return now_ns();
        };
        let (base_tsc, base_ns) = (self.base_tsc.get(), self.base_ns.get());
        let rebase = |c: &WallClock| {
            c.base_tsc.set(tsc);
            c.base_ns.set(ns);
            c.rate.set(0);
            c.anchor_ticks.set(0);
        };
        if base_ns == 0 || tsc <= base_tsc || ns <= base_ns {
            // No base yet, or the counter or the system clock went
            // backwards: start over.
            rebase(self);
        } else if ns - base_ns >= CALIBRATE_NS {
            let rate = (((ns - base_ns) as u128) << 32) / (tsc - base_tsc) as u128;
            let rate = u64::try_from(rate).unwrap_or(0);
            let old = self.rate.get();
            if !(RATE_MIN..=RATE_MAX).contains(&rate)
                || (old != 0 && rate.abs_diff(old) > old >> RATE_JUMP_SHIFT)
            {
                rebase(self);
            } else {
                self.rate.set(rate);
                let ticks = ((ANCHOR_NS as u128) << 32) / rate as u128;
                self.anchor_ticks
                    .set(u64::try_from(ticks).unwrap_or(u64::MAX));
            }
        }
        self.anchor_tsc.set(tsc);
        self.anchor_ns.set(ns);
        ns
    }
}

impl Default for WallClock {
    fn default() -> Self {
        WallClock::new()
    }
}

/// The time-stamp counter.
#[inline(always)]
#[allow(unsafe_code)]
fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: RDTSC exists on every x86_64 CPU and only reads the counter.
    unsafe {
        std::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    0
}

/// A counter reading and the system time taken together: the system
/// clock is read on both sides of the counter and the midpoint kept, from
/// the first of [`PAIR_TRIES`] attempts whose two readings are at most
/// [`PAIR_NS`] apart; `None` if none was.
fn pair() -> Option<(u64, u64)> {
    (0..PAIR_TRIES).find_map(|_| {
        let before = now_ns();
        let t = tsc();
        let after = now_ns();
        let apart = after.checked_sub(before)?;
        (apart <= PAIR_NS).then_some((t, before + apart / 2))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every reading lies between two system-clock readings around it,
    /// give or take `slack_ns`, across many anchors.
    fn follows_the_system_clock(c: &WallClock, slack_ns: u64) {
        let end = now_ns() + 30_000_000;
        let mut n = 0u64;
        while now_ns() < end {
            let before = now_ns();
            let t = c.now_ns();
            let after = now_ns();
            assert!(
                t + slack_ns >= before && t <= after + slack_ns,
                "reading {t} outside [{before}, {after}] ± {slack_ns} after {n} readings"
            );
            n += 1;
        }
        assert!(n > 100);
    }

    /// The counter forced on (x86_64; the system's own choice takes it
    /// only on a `tsc` clocksource, which a virtual machine may not have:
    /// this would then compare the system clock with itself).
    #[test]
    fn counter_clock_stays_with_the_system_clock() {
        let c = WallClock::with_counter(cfg!(target_arch = "x86_64"));
        assert_eq!(c.uses_counter(), cfg!(target_arch = "x86_64"));
        // Generous: a shared machine can deschedule us between the readings.
        follows_the_system_clock(&c, 200_000);
        if c.uses_counter() {
            assert!(c.rate.get() > 0, "rate measured after 30 ms");
            assert!(c.anchor_ticks.get() > 0);
        }
    }

    #[test]
    fn without_the_counter_it_is_the_system_clock() {
        let c = WallClock::with_counter(false);
        assert!(!c.uses_counter());
        follows_the_system_clock(&c, 0);
    }

    /// A base taken 50 ms before its counter reading (a thread preempted
    /// inside a pair, before pairs had to be tight) measured a rate a
    /// fiftieth of the counter's: readings lagged the system clock by tens
    /// of ms, under the 100 ms a reader takes for a writer ahead, so a
    /// dead writer read alive. Such a rate is refused and measured afresh.
    #[test]
    fn a_rate_no_counter_can_have_is_measured_afresh() {
        let c = WallClock::with_counter(cfg!(target_arch = "x86_64"));
        if !c.uses_counter() {
            return;
        }
        // The counter's ticks in 50 ms, roughly.
        let (t0, n0) = (tsc(), now_ns());
        while now_ns() < n0 + 5_000_000 {}
        let early = (tsc() - t0) * 10;
        let (t, ns) = pair().expect("a tight pair on an idle thread");
        c.base_tsc.set(t - early);
        c.base_ns.set(ns);
        c.anchor_tsc.set(t);
        c.anchor_ns.set(ns);
        c.rate.set(0);
        c.anchor_ticks.set(0);
        follows_the_system_clock(&c, 1_000_000);
    }

    #[test]
    fn a_backward_counter_or_clock_starts_over() {
        let c = WallClock::with_counter(cfg!(target_arch = "x86_64"));
        if !c.uses_counter() {
            return;
        }
        c.base_tsc.set(u64::MAX);
        c.rate.set(123);
        c.anchor_ticks.set(0);
        let t = c.now_ns();
        assert_eq!(c.rate.get(), 0, "rate forgotten");
        assert!(t.abs_diff(now_ns()) < 100_000_000);
        follows_the_system_clock(&c, 200_000);
    }
}
