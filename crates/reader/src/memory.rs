//! Hints to the CPU about memory, and loads from the shared file.

#![allow(unsafe_code)]

use std::sync::atomic::{fence, AtomicU64, Ordering};

/// `word` loaded with Acquire ordering, as a Relaxed load and an Acquire
/// fence after it: the reader's mapping is read-only, where Rust allows
/// atomic loads only Relaxed (an Acquire load there is undefined
/// behaviour, whatever the CPU does), and the fence gives the load the
/// same pairing with the writer's Release store. On x86_64 both are
/// plain loads.
#[inline(always)]
pub fn load_acquire(word: &AtomicU64) -> u64 {
    let v = word.load(Ordering::Relaxed);
    fence(Ordering::Acquire);
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

#[cfg(all(test, not(tickguard_loom)))]
mod tests {
    /// Every load a reader makes of the mapped file is Relaxed (with a
    /// fence where it must be ordered): no module reading it loads with a
    /// stronger ordering, which is undefined on a read-only mapping.
    /// (`guard.rs` is left out: its atomics are the process's own.)
    #[test]
    fn no_load_of_the_mapped_file_is_acquire() {
        let sources = [
            ("reader.rs", include_str!("reader.rs")),
            ("seqlock.rs", include_str!("seqlock.rs")),
            ("slot.rs", include_str!("slot.rs")),
            ("status.rs", include_str!("status.rs")),
            ("layout.rs", include_str!("layout.rs")),
            ("quote.rs", include_str!("quote.rs")),
            ("symbol.rs", include_str!("symbol.rs")),
            ("verdict.rs", include_str!("verdict.rs")),
            ("file.rs", include_str!("file.rs")),
        ];
        for (name, src) in sources {
            // The code without comments or white space, so that a call
            // wrapped over lines reads as one.
            let code: String = src
                .lines()
                .map(|l| l.split("//").next().unwrap_or(""))
                .flat_map(|l| l.chars().filter(|c| !c.is_whitespace()))
                .collect();
            for (at, _) in code.match_indices(".load(") {
                let args = &code[at..];
                let args = &args[..args.find(')').unwrap_or(args.len())];
                for strong in ["Acquire", "SeqCst", "AcqRel"] {
                    assert!(
                        !args.contains(strong),
                        "{name}: a {strong} load of the mapped file: {args})"
                    );
                }
            }
        }
    }
}
