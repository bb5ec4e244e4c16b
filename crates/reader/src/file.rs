//! Files others must not forge or pull from under a mapping: opening
//! without following links, exclusive locks, reserved blocks, users.

#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Flags for opening a file someone else may have planted: no symbolic
/// link (ELOOP), no blocking on a FIFO, not inherited by children.
const SAFE_OPEN: libc::c_int = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;

/// Opens `path` read-only without following a symbolic link and without
/// blocking on a FIFO.
pub fn open_read(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(SAFE_OPEN)
        .open(path)
}

/// Opens an existing `path` read-write, without following a symbolic link
/// and without blocking on a FIFO.
pub fn open_write(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(SAFE_OPEN)
        .open(path)
}

/// Creates `path` (it must not exist) read-write with `mode`, without
/// following a symbolic link.
pub fn create_new(path: &Path, mode: u32) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// True when an open failed because the path is a symbolic link.
pub fn is_symlink_error(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
}

/// Takes an exclusive `flock` on `file` without waiting: `Ok(false)` when
/// another open file description holds it.
pub fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    // SAFETY: flock on a descriptor `file` owns; no memory involved.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// Reserves the blocks of `file` up to `len` bytes (`posix_fallocate`),
/// extending it: a filesystem without the room fails here (ENOSPC) rather
/// than with a SIGBUS on first touch of a page. Interrupted by a signal
/// (tmpfs gives up a large reservation when one is pending: an operator's
/// SIGUSR1 during the start, say), it is tried again: the blocks reserved
/// so far stay, and the call goes on from there.
pub fn reserve(file: &File, len: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file too large"))?;
    loop {
        // SAFETY: plain system call on a descriptor `file` owns.
        match unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) } {
            0 => return Ok(()),
            libc::EINTR => continue,
            err => return Err(io::Error::from_raw_os_error(err)),
        }
    }
}

/// This process's effective uid.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}
