//! Hints to the CPU about memory.

#![allow(unsafe_code)]

/// Asks the CPU to start loading the cache line holding `value` (into all
/// cache levels) and returns at once: the batch loops call it a few
/// messages ahead, so that the loads of several messages overlap instead of
/// each waiting for its own. A no-op where there is no such instruction.
#[inline(always)]
pub fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and has no effect but on caches; the
    // pointer comes from a reference, so it is valid anyway. SSE is part of
    // every x86_64 target.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}
