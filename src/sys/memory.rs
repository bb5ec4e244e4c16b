//! Large, long-lived tables (order stores, price levels) on transparent huge
//! pages: a random access into a table of many megabytes then costs one
//! TLB entry per 2 MiB instead of one per 4 KiB, which matters most under
//! virtualisation, where a TLB miss walks two page tables.

/// Tables smaller than this stay on ordinary pages.
const HUGE: usize = 2 << 20;

/// A vector of `n` copies of `value`, the whole 2 MiB pages of its memory
/// advised onto transparent huge pages (`MADV_HUGEPAGE`) before this call
/// writes them, when it is at least 2 MiB (memory the allocator reuses may
/// already be backed; the advice then applies as the kernel collapses it). The advice is only that: where the kernel
/// has huge pages disabled, or the call fails, the vector is the same, on
/// ordinary pages.
pub fn huge_vec<T: Clone>(n: usize, value: T) -> Vec<T> {
    let bytes = n.saturating_mul(std::mem::size_of::<T>());
    let big = bytes >= HUGE;
    // The advice covers the whole 2 MiB pages inside the allocation: the
    // head up to the first 2 MiB boundary stays on ordinary pages (the
    // allocator picks the start), and one huge page of slack at the end
    // lets the table's tail reach a whole huge page too. Keep the vector's
    // capacity: shrinking it reallocates.
    let slack = if big {
        HUGE / std::mem::size_of::<T>().max(1)
    } else {
        0
    };
    let mut v: Vec<T> = Vec::with_capacity(n.saturating_add(slack));
    if big {
        let start = v.as_mut_ptr() as usize;
        let from = start.next_multiple_of(HUGE);
        let to = (start + bytes + slack * std::mem::size_of::<T>()) / HUGE * HUGE;
        if to > from {
            // SAFETY: `from..to` lies inside the allocation `v` owns (its
            // capacity is `bytes` plus the slack from `start`), is page-aligned, and no
            // reference into it exists yet. MADV_HUGEPAGE is advice: it
            // changes how the kernel backs these pages, never their
            // contents or validity, and its failure is harmless.
            unsafe {
                libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE);
            }
        }
    }
    v.resize(n, value);
    v
}

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

#[cfg(test)]
mod tests {
    #[test]
    fn a_huge_vector_holds_what_it_was_given() {
        let v = super::huge_vec(3 << 20, 7u32);
        assert_eq!(v.len(), 3 << 20);
        assert!(v.iter().all(|&x| x == 7));
        assert_eq!(super::huge_vec(5, 1u8), vec![1u8; 5]);
        assert!(super::huge_vec(0, 1u64).is_empty());
    }
}
