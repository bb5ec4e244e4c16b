//! Test builds only: the system allocator, counting the bytes each thread
//! holds, so a test can bound what one call allocates at its worst.
//!
//! Counts are per thread (a block freed on another thread than the one
//! that allocated it counts there), so tests running side by side do not
//! see each other's allocations.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

thread_local! {
    // Const-initialised and without `Drop`: reading them never allocates
    // and works while the thread is being torn down.
    static HELD: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn add(delta: isize) {
    let held = HELD.get() + delta;
    HELD.set(held);
    if held > PEAK.get() {
        PEAK.set(held);
    }
}

// SAFETY: every call is passed to `System` unchanged; the counting around
// it touches only this thread's two cells and never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `layout` is `System.alloc`'s.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, so from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        add(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`, and the caller's contract for `new_size`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // Old and new blocks may both be live during the move.
            add(new_size as isize);
            add(-(layout.size() as isize));
        }
        p
    }
}

/// Most bytes this thread held at once while running `f`, above what it
/// held before, with `f`'s result.
pub(crate) fn peak_during<T>(f: impl FnOnce() -> T) -> (usize, T) {
    let before = HELD.get();
    PEAK.set(before);
    let out = f();
    let peak = PEAK.get() - before;
    (peak.max(0) as usize, out)
}
