//! Test builds only: a count of the steps the order and sequence tables
//! take (probes of a lookup, slots emptied by a clear), per thread, so a
//! test can bound how much work a stream costs by counting it, never by
//! timing it.

use std::cell::Cell;

thread_local! {
    static STEPS: Cell<u64> = const { Cell::new(0) };
}

/// Counts `n` steps on this thread.
#[inline(always)]
pub(crate) fn add(n: u64) {
    STEPS.set(STEPS.get().wrapping_add(n));
}

/// The steps this thread took while running `f`, with `f`'s result.
pub(crate) fn during<T>(f: impl FnOnce() -> T) -> (u64, T) {
    let before = STEPS.get();
    let out = f();
    (STEPS.get().wrapping_sub(before), out)
}
