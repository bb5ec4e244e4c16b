//! Users named on the command line (`--owner`), from the system's user
//! database.

#![allow(unsafe_code)]

use std::io;

/// A uid from a number or a user name (the system's user database).
pub fn user_id(user: &str) -> anyhow::Result<u32> {
    if let Ok(uid) = user.parse::<u32>() {
        return Ok(uid);
    }
    let name = std::ffi::CString::new(user)
        .map_err(|_| anyhow::anyhow!("--owner: '{user}' is not a user name or uid"))?;
    // SAFETY: passwd is plain C data (integers and pointers); all-zero is a
    // valid value, which getpwnam_r overwrites.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call: `name` is NUL terminated,
    // `pwd` and `found` are live locals, `buf` is a live buffer of the
    // length passed; the result only points into `pwd` and `buf`.
    let err = unsafe {
        libc::getpwnam_r(
            name.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    if err != 0 {
        anyhow::bail!(
            "--owner: looking up user '{user}': {}",
            io::Error::from_raw_os_error(err)
        );
    }
    if found.is_null() {
        anyhow::bail!("--owner: no user '{user}'");
    }
    Ok(pwd.pw_uid)
}
