//! Large, long-lived tables: on transparent huge pages (order stores, price
//! levels), where a random access into a table of many megabytes then
//! costs one TLB entry per 2 MiB instead of one per 4 KiB, which matters
//! most under virtualisation, where a TLB miss walks two page tables; or on
//! zeroed pages the kernel maps only as they are first written (a replay's
//! state table, mostly unused), which cost nothing until then.

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
        advise_huge(v.as_mut_ptr(), bytes + slack * std::mem::size_of::<T>());
    }
    v.resize(n, value);
    v
}

/// Advises the whole 2 MiB pages of `v`'s elements onto transparent huge
/// pages, for a table written already (filled a few slots at a time on
/// ordinary pages, so that no first write waited on the kernel finding a
/// huge page): the kernel's background collapse may then move it onto
/// them. Advice only; nothing changes where it fails.
pub fn advise_huge_written<T>(v: &mut [T]) {
    let bytes = std::mem::size_of_val(v);
    if bytes >= HUGE {
        advise_huge(v.as_mut_ptr(), bytes);
    }
}

/// `MADV_HUGEPAGE` over the whole 2 MiB pages of the `bytes` from `start`,
/// memory the caller owns.
fn advise_huge<T>(start: *mut T, bytes: usize) {
    let start = start as usize;
    let from = start.next_multiple_of(HUGE);
    let to = (start + bytes) / HUGE * HUGE;
    if to > from {
        // SAFETY: `from..to` lies inside memory the caller owns (`bytes`
        // from `start`) and is page-aligned. MADV_HUGEPAGE is advice: it
        // changes how the kernel backs these pages, never their contents
        // or validity, and its failure is harmless.
        unsafe {
            libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE);
        }
    }
}

/// A type whose all-zero bytes are a valid value, the same as its
/// default, and which needs no drop: [`Pages`] makes its values so.
///
/// # Safety
///
/// Implement only for types of which both hold.
pub unsafe trait Zeroable: Default {}

/// `n` default values from zeroed memory, which the allocator takes fresh
/// from the kernel for a big slice, untouched until used.
pub fn zeroed_box<T: Zeroable>(n: usize) -> Box<[T]> {
    let layout = std::alloc::Layout::array::<T>(n).expect("a table that fits the address space");
    if layout.size() == 0 {
        return (0..n).map(|_| T::default()).collect();
    }
    // SAFETY: the layout has a non-zero size. The memory is zeroed, which
    // `Zeroable` promises is `n` valid `T`s, and comes from the global
    // allocator with exactly the layout a `Box<[T]>` of `n` frees with.
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout).cast::<T>();
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, n))
    }
}

/// A fixed slice of default values on fresh anonymous pages: the kernel
/// maps each page, zeroed, when it is first touched, so the part of a big
/// table that is never used costs neither memory nor the time to clear it
/// (a replay of ITCH alone never touches the SQF state table, say).
pub struct Pages<T> {
    map: memmap2::MmapRaw,
    len: usize,
    _values: std::marker::PhantomData<T>,
}

impl<T: Zeroable> Pages<T> {
    /// `len` values, each `T::default()`. Fails like an allocation (a
    /// process abort naming the size) when no memory can be mapped.
    pub fn new(len: usize) -> Pages<T> {
        const { assert!(std::mem::align_of::<T>() <= 4096 && !std::mem::needs_drop::<T>()) };
        let layout =
            std::alloc::Layout::array::<T>(len).expect("a table that fits the address space");
        match memmap2::MmapMut::map_anon(layout.size().max(1)) {
            Ok(map) => Pages {
                map: memmap2::MmapRaw::from(map),
                len,
                _values: std::marker::PhantomData,
            },
            Err(_) => std::alloc::handle_alloc_error(layout),
        }
    }
}

impl<T> std::ops::Deref for Pages<T> {
    type Target = [T];

    #[inline]
    fn deref(&self) -> &[T] {
        let values = self.map.as_mut_ptr().cast_const().cast::<T>();
        // SAFETY: the map holds `len * size_of::<T>()` bytes, page-aligned
        // (so aligned for `T`, at most 4,096-aligned by `new`'s check), and
        // lives as long as `self`. Its bytes were zero, which `Zeroable`
        // promises is a valid `T`, and are changed since only through the
        // shared references handed out here, that is, through `T`'s own
        // interior mutability (atomics). The pointer is the mapping's own
        // (a raw mapping's), not one derived from a reference to its
        // bytes, and the mutable one: the atomics store through it.
        unsafe { std::slice::from_raw_parts(values, self.len) }
    }
}

pub use tickguard_reader::memory::prefetch;

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

    #[test]
    fn zeroed_tables_hold_default_values_and_keep_what_is_written() {
        use std::sync::atomic::{AtomicU64, Ordering};
        #[derive(Default)]
        struct Word(AtomicU64);
        // SAFETY: an AtomicU64 of zero bytes is 0, its default; no drop.
        unsafe impl super::Zeroable for Word {}
        let p = super::Pages::<Word>::new(3 << 20);
        assert_eq!(p.len(), 3 << 20);
        assert!(p
            .iter()
            .step_by(4096)
            .all(|w| w.0.load(Ordering::Relaxed) == 0));
        p[12_345].0.store(7, Ordering::Relaxed);
        assert_eq!(p[12_345].0.load(Ordering::Relaxed), 7);
        assert!(super::Pages::<Word>::new(0).is_empty());
        let b = super::zeroed_box::<Word>(1 << 20);
        assert_eq!(b.len(), 1 << 20);
        assert!(b
            .iter()
            .step_by(511)
            .all(|w| w.0.load(Ordering::Relaxed) == 0));
        assert!(super::zeroed_box::<Word>(0).is_empty());
    }
}
