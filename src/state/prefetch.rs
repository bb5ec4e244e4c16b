//! A cache prefetch hint: the only architecture-specific code of the table.

/// Asks the CPU to start loading the cache line holding `r` into L1.
/// A hint only: it never changes what a program computes.
#[inline(always)]
#[allow(unsafe_code)]
pub fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` needs SSE, which every x86_64 CPU has. It is
    // `unsafe` only because it is a target-feature function taking a pointer;
    // a prefetch never faults and never reads memory architecturally, and the
    // pointer comes from a live reference anyway.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((r as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}
