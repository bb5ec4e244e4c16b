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
/// than with a SIGBUS on first touch of a page. One that reports too
/// little room fails at once, reserving nothing ([`room_for`]): tmpfs
/// would fill itself to the brim before giving up, a stall for the
/// caller (a writer retrying a lost publication does so on its receive
/// thread) and no room meanwhile for anyone else on it. Interrupted by a
/// signal (tmpfs gives up a large reservation when one is pending: an
/// operator's SIGUSR1 during the start, say), it is tried again: the
/// blocks reserved so far stay, and the call goes on from there.
pub fn reserve(file: &File, len: u64) -> io::Result<()> {
    if !room_for(file, len) {
        return Err(io::Error::from_raw_os_error(libc::ENOSPC));
    }
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

/// Whether the filesystem holding `file` says it has room for the file to
/// hold `len` bytes: the blocks free to this user (to root, its reserve
/// too) and those the file holds already. One that reports no size (a tmpfs without a limit, some FUSE
/// filesystems: no blocks at all) or cannot be asked is taken to have it;
/// `posix_fallocate` then decides.
fn room_for(file: &File, len: u64) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: statvfs is plain data, zeroed, filled by the call.
    let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: plain system call on a descriptor `file` owns, into `vfs`.
    if unsafe { libc::fstatvfs(file.as_raw_fd(), &mut vfs) } != 0 || vfs.f_blocks == 0 {
        return true;
    }
    let held = file
        .metadata()
        .map_or(0, |m| m.blocks().saturating_mul(512));
    // Root may take the blocks a filesystem keeps in reserve (ext4's 5%).
    let blocks = match effective_uid() {
        0 => vfs.f_bfree,
        _ => vfs.f_bavail,
    };
    let free = blocks.saturating_mul(vfs.f_frsize);
    enough(free, held, len)
}

/// Room for `len` bytes: `free` bytes on the filesystem and `held` in the
/// file already.
fn enough(free: u64, held: u64, len: u64) -> bool {
    free.saturating_add(held) >= len
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reservation past the room its filesystem reports fails at once
    /// with ENOSPC, reserving nothing; one within it goes through.
    #[test]
    fn a_reservation_past_the_room_fails_before_reserving() {
        let dir = std::env::temp_dir().join(format!("tickguard-reserve-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        reserve(&file, 1 << 16).unwrap();
        assert!(file.metadata().unwrap().len() >= 1 << 16);
        // SAFETY: statvfs into zeroed plain data.
        let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: as above, on a descriptor the test owns.
        assert_eq!(unsafe { libc::fstatvfs(file.as_raw_fd(), &mut vfs) }, 0);
        if vfs.f_blocks != 0 {
            // Asked, not reserved: past the room, told at once; within
            // what the file holds, always room.
            use std::os::unix::fs::MetadataExt;
            let held = file.metadata().unwrap().blocks() * 512;
            let free = vfs.f_bfree * vfs.f_frsize;
            assert!(!room_for(&file, free + held + (1 << 30)));
            assert!(room_for(&file, held));
            let size = vfs.f_blocks * vfs.f_frsize;
            let e = reserve(&file, size.saturating_mul(2)).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
            let after = file.metadata().unwrap().blocks() * 512;
            assert_eq!(after, held, "nothing reserved");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn room_counts_what_the_file_holds_already() {
        assert!(enough(100, 0, 100) && !enough(99, 0, 100));
        assert!(enough(40, 60, 100) && !enough(40, 59, 100));
        assert!(enough(u64::MAX, u64::MAX, u64::MAX));
    }
}
