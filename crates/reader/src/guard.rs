//! Surviving a publication truncated under its mapping. Its owner (or
//! root) can truncate the file while processes map it; touching a lost
//! page then raises SIGBUS, which kills the process by default.
//!
//! A mapping [`Guard::register`]ed here is covered by the SIGBUS handler
//! that [`install`] sets, once, for the whole process: a fault inside a
//! registered mapping replaces the whole mapping with zero pages (so the
//! faulting access completes, and every later one reads zeros: a header
//! whose state is neither running nor closed, which a reader answers
//! `stale`), and marks the guard [`faulted`](Guard::faulted); any other
//! SIGBUS goes to the handler that was there before (by default, the
//! process ends with SIGBUS as without a guard).
//!
//! A thread that blocks SIGBUS is not covered: the kernel kills the
//! process on a fault there without running any handler. Threads that
//! read a publication must leave SIGBUS unblocked (a gateway that blocks
//! every signal in its workers, to take them with `sigwait` or a
//! `signalfd` in one thread, must unblock SIGBUS in those that read).
//!
//! A library must not take over a process-wide signal silently: [`Reader`](crate::Reader)
//! registers its mapping (a few atomic stores), but only a program that
//! calls [`install`] gets the handler. `tickguard run`, `check` and `stat`
//! call it; a gateway that maps the publication should too.

#![allow(unsafe_code)]

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// Mappings guarded at once, every [`Reader`](crate::Reader) and writer of
/// the process together (a gateway opening one reader per thread has room
/// for a thousand); a registration beyond gets no guard
/// ([`Reader::guarded`](crate::Reader::guarded) says so). The handler
/// scans them only on a fault; each takes 32 bytes.
pub const MAX_GUARDED: usize = 1024;

/// One registered mapping: `len` 0 is a free entry.
struct Entry {
    start: AtomicUsize,
    /// Whole pages.
    len: AtomicUsize,
    writable: AtomicBool,
    /// Claimed by a [`Guard`] (set before `len`, cleared after it).
    taken: AtomicBool,
    faulted: AtomicBool,
    /// A seqlock over `start`, `len` and `writable`: odd while a guard is
    /// registered or dropped, so the handler never pairs one registration's
    /// `start` with another's `len`.
    version: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Entry = Entry {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    writable: AtomicBool::new(false),
    taken: AtomicBool::new(false),
    faulted: AtomicBool::new(false),
    version: AtomicUsize::new(0),
};

static ENTRIES: [Entry; MAX_GUARDED] = [FREE; MAX_GUARDED];

/// The SIGBUS disposition before [`install`], for faults not ours.
struct Previous(libc::sigaction);

// SAFETY: plain data (a handler address, a mask, flags), written once
// before the handler that reads it is installed, never changed after.
unsafe impl Sync for Previous {}
unsafe impl Send for Previous {}

static PREVIOUS: OnceLock<Previous> = OnceLock::new();

/// Whether [`install`] has run.
static INSTALLED: Mutex<bool> = Mutex::new(false);

/// Installs the process's SIGBUS handler (idempotent). It handles faults
/// in registered mappings and passes every other one to the handler that
/// was there before.
pub fn install() -> io::Result<()> {
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    if *installed {
        return Ok(());
    }
    // SAFETY: sigaction structs are plain data, zeroed is a valid empty
    // one; the calls only read `act` and write `previous`. The previous
    // disposition is stored before the handler that reads it can run.
    unsafe {
        let mut previous: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut previous) != 0 {
            return Err(io::Error::last_os_error());
        }
        let _ = PREVIOUS.set(Previous(previous));
        if set_handler() != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    *installed = true;
    Ok(())
}

/// A registered mapping; unregistered on drop (drop it before unmapping).
#[derive(Debug)]
pub struct Guard {
    index: usize,
}

impl Guard {
    /// Registers the mapping of `len` bytes at `start` (page aligned), to
    /// be replaced by zero pages, readable and, when `writable`, writable,
    /// on a fault. `None` when [`MAX_GUARDED`] mappings are registered.
    ///
    /// # Safety
    ///
    /// `[start, start + len)` (`len` rounded up to whole pages) is exactly
    /// one live file mapping, and the guard is dropped before that mapping
    /// is unmapped: on a fault inside it the handler maps zero pages over
    /// the whole range, whatever lies there by then.
    pub unsafe fn register(start: *const u8, len: usize, writable: bool) -> Option<Guard> {
        let len = len.div_ceil(page_size()) * page_size();
        let index = ENTRIES.iter().position(|e| {
            e.taken
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        })?;
        let e = &ENTRIES[index];
        e.begin_write();
        e.faulted.store(false, Ordering::Relaxed);
        e.writable.store(writable, Ordering::Relaxed);
        e.start.store(start as usize, Ordering::Relaxed);
        e.len.store(len, Ordering::Relaxed);
        e.end_write();
        Some(Guard { index })
    }

    /// True once a fault replaced the mapping with zero pages: its file
    /// was truncated, and nothing written there reaches the file any more.
    #[inline]
    pub fn faulted(&self) -> bool {
        // Relaxed: a flag on its own; the zero pages are in place before
        // the handler that set it returned.
        ENTRIES[self.index].faulted.load(Ordering::Relaxed)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let e = &ENTRIES[self.index];
        e.begin_write();
        e.len.store(0, Ordering::Relaxed);
        e.end_write();
        e.taken.store(false, Ordering::Release);
    }
}

impl Entry {
    /// Opens a change of the fields (the version turns odd); only the
    /// entry's owner writes, so no two changes overlap.
    fn begin_write(&self) {
        self.version.fetch_add(1, Ordering::Relaxed);
        // Release fence: the odd version is visible before any field change.
        std::sync::atomic::fence(Ordering::Release);
    }

    /// Closes it (the version turns even), publishing the fields.
    fn end_write(&self) {
        self.version.fetch_add(1, Ordering::Release);
    }

    /// (start, len, writable) as one registration left them, or `None`
    /// while one is being changed (or changed during the read).
    fn read(&self) -> Option<(usize, usize, bool)> {
        let before = self.version.load(Ordering::Acquire);
        if before % 2 == 1 {
            return None;
        }
        let fields = (
            self.start.load(Ordering::Relaxed),
            self.len.load(Ordering::Relaxed),
            self.writable.load(Ordering::Relaxed),
        );
        // Acquire fence: the field loads happen before the version re-read.
        std::sync::atomic::fence(Ordering::Acquire);
        (self.version.load(Ordering::Relaxed) == before).then_some(fields)
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => 4096,
    }
}

/// Makes [`on_sigbus`] the SIGBUS handler; `sigaction`'s result.
/// Async-signal-safe (one system call).
fn set_handler() -> libc::c_int {
    // SAFETY: a zeroed sigaction is a valid empty one; the call only reads
    // `act`.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_sigbus as *const () as libc::sighandler_t;
        // SA_ONSTACK: a handler chained to (Rust's own, for stack
        // overflows) may need the alternate stack.
        act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaction(libc::SIGBUS, &act, std::ptr::null_mut())
    }
}

/// The SIGBUS handler. Async-signal-safe: atomic loads and stores, `mmap`
/// and `sigaction` (system calls without locks), errno saved and restored.
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo; si_addr
    // is the faulting address for a fault (BUS_ADRERR: past the file's end).
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    if code == libc::BUS_ADRERR {
        for e in &ENTRIES {
            let Some((start, len, writable)) = e.read() else {
                continue;
            };
            if len == 0 || addr.wrapping_sub(start) >= len {
                continue;
            }
            if zero_pages(start, len, writable) {
                e.faulted.store(true, Ordering::Relaxed);
                return;
            }
            break;
        }
    }
    chain(sig, info, ctx);
}

/// Maps anonymous zero pages over `[start, start + len)`, in place of the
/// file's pages. True on success.
fn zero_pages(start: usize, len: usize, writable: bool) -> bool {
    let prot = libc::PROT_READ | if writable { libc::PROT_WRITE } else { 0 };
    // SAFETY: the range is a registered mapping, alive while registered
    // (a guard is dropped before its mapping is unmapped, and a fault
    // inside it means it is in use); MAP_FIXED replaces exactly its pages.
    // errno is saved and restored around the call for the interrupted code.
    unsafe {
        let errno = *libc::__errno_location();
        let p = libc::mmap(
            start as *mut libc::c_void,
            len,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
            -1,
            0,
        );
        *libc::__errno_location() = errno;
        p != libc::MAP_FAILED
    }
}

/// Hands a SIGBUS that is not ours to the previous disposition: its
/// handler if it had one; otherwise the default is restored and the
/// handler returns, so the access faults again and the process ends with
/// SIGBUS as it would have without [`install`].
///
/// A SIGBUS sent rather than raised by a fault (`kill -BUS`: `si_code` 0 or
/// below) does not come again when the handler returns: after a previous
/// handler (Rust's resets the default and returns), this one is made the
/// handler again, so the guard outlives it; with no previous handler the
/// default is restored and the signal raised again, so the process ends as
/// it would have without [`install`].
/// `si_code` of a SIGBUS the kernel sends about memory found bad
/// elsewhere than the access it interrupts (`<asm-generic/siginfo.h>`).
const BUS_MCEERR_AO: libc::c_int = 5;

fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo.
    let code = unsafe { (*info).si_code };
    // Sent, or a machine check's "action optional" (memory found bad, not
    // at this access): neither comes again when the handler returns.
    let sent = code <= 0 || code == BUS_MCEERR_AO;
    let previous = PREVIOUS.get().map(|p| &p.0);
    match previous {
        // Ignored before: a sent one is ignored still (and this handler
        // stays).
        Some(p) if p.sa_sigaction == libc::SIG_IGN && sent => {}
        // SAFETY: the previous handler's address, called as its flags say
        // it expects (three arguments with SA_SIGINFO, else one).
        Some(p) if p.sa_sigaction != libc::SIG_DFL && p.sa_sigaction != libc::SIG_IGN => unsafe {
            if p.sa_flags & libc::SA_SIGINFO != 0 {
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    std::mem::transmute(p.sa_sigaction);
                f(sig, info, ctx);
            } else {
                let f: extern "C" fn(libc::c_int) = std::mem::transmute(p.sa_sigaction);
                f(sig);
            }
            if sent {
                let errno = *libc::__errno_location();
                set_handler();
                *libc::__errno_location() = errno;
            }
        },
        // SAFETY: a zeroed sigaction is SIG_DFL with no flags and an empty
        // mask; `raise` only marks the signal pending (blocked while this
        // handler runs), delivered with the default once it returns.
        _ => unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &act, std::ptr::null_mut());
            if sent {
                libc::raise(sig);
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of two pages, mapped shared, then truncated to nothing.
    fn truncated_mapping(name: &str) -> (std::path::PathBuf, memmap2::Mmap) {
        let path = std::env::temp_dir().join(format!("tg-guard-{name}-{}", std::process::id()));
        std::fs::write(&path, vec![7u8; 8192]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        // SAFETY: this test's own file; its truncation is what is tested.
        let map = unsafe { memmap2::Mmap::map(&file).unwrap() };
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(0)
            .unwrap();
        (path, map)
    }

    /// Runs `touch` in a child process; its exit status.
    fn in_child(touch: impl FnOnce()) -> libc::c_int {
        // SAFETY: the child only reads memory and calls _exit (both
        // async-signal-safe: the parent may have other threads).
        unsafe {
            match libc::fork() {
                0 => {
                    touch();
                    libc::_exit(0)
                }
                pid => {
                    let mut status = 0;
                    assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
                    status
                }
            }
        }
    }

    /// A SIGBUS sent (not a fault) leaves the guard installed when a
    /// previous handler took it (Rust's resets the default), and ends the
    /// process as the default would when there was none.
    #[test]
    fn a_sigbus_sent_keeps_the_guard_or_ends_as_the_default_would() {
        install().unwrap();
        let previous = PREVIOUS.get().map_or(libc::SIG_DFL, |p| p.0.sa_sigaction);
        let status = in_child(|| {
            // SAFETY: async-signal-safe calls only; the query writes `now`.
            unsafe {
                libc::raise(libc::SIGBUS);
                let mut now: libc::sigaction = std::mem::zeroed();
                libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut now);
                if now.sa_sigaction != on_sigbus as *const () as libc::sighandler_t {
                    libc::_exit(1);
                }
            }
        });
        if previous == libc::SIG_DFL {
            assert!(
                libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGBUS,
                "{status}"
            );
        } else {
            assert!(
                libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
                "the guard is gone after a sent SIGBUS: {status}"
            );
        }
    }

    /// A read of a truncated, registered mapping reads zeros; one of an
    /// unregistered mapping still ends the process with SIGBUS (the
    /// previous disposition); the guard's fault flag is set on the first.
    #[test]
    fn faults_in_registered_mappings_read_zeros_and_others_still_kill() {
        install().unwrap();
        let (a, guarded) = truncated_mapping("guarded");
        let (b, unguarded) = truncated_mapping("unguarded");
        // SAFETY: `guarded` is one live mapping of that length, and the
        // guard is dropped before it (declared after it).
        let guard = unsafe { Guard::register(guarded.as_ptr(), guarded.len(), false) }.unwrap();
        let read = |m: &memmap2::Mmap, at: usize| {
            // SAFETY: within the mapping; volatile so the read happens.
            unsafe { std::ptr::read_volatile(m.as_ptr().add(at)) }
        };
        let status = in_child(|| {
            if read(&guarded, 4097) != 0 || !guard.faulted() {
                // SAFETY: ends the child.
                unsafe { libc::_exit(3) }
            }
        });
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{status:#x}"
        );
        let status = in_child(|| {
            read(&unguarded, 0);
        });
        assert!(
            libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGBUS,
            "{status:#x}"
        );
        assert!(!guard.faulted(), "the parent's mapping was not touched");
        drop(guard);
        let _ = (std::fs::remove_file(a), std::fs::remove_file(b));
    }
}
