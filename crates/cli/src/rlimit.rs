//! The descriptor limit of `smbx serve`: every open, connection and directory watch
//! holds a file descriptor, so the server runs with the soft RLIMIT_NOFILE raised to
//! its hard limit (as Samba's smbd does).

use std::io;

/// The soft and hard RLIMIT_NOFILE of this process.
fn get() -> io::Result<libc::rlimit> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r)
}

/// The most descriptors one process may have (`/proc/sys/fs/nr_open`): an
/// unlimited hard limit still cannot raise the soft one beyond it.
fn nr_open() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Raises the soft RLIMIT_NOFILE to the hard limit (bounded by `nr_open` when the
/// hard limit is unlimited). Returns the soft limit before and after.
pub fn raise_nofile() -> io::Result<(u64, u64)> {
    let r = get()?;
    let before = r.rlim_cur as u64;
    let mut want = r.rlim_max;
    if want == libc::RLIM_INFINITY {
        if let Some(n) = nr_open() {
            want = n as libc::rlim_t;
        }
    }
    if want <= r.rlim_cur {
        return Ok((before, before));
    }
    let new = libc::rlimit {
        rlim_cur: want,
        rlim_max: r.rlim_max,
    };
    // SAFETY: setrlimit reads one rlimit we own.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((before, get()?.rlim_cur as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soft_limit_reaches_the_hard_limit() {
        let (before, after) = raise_nofile().unwrap();
        assert!(after >= before);
        let r = get().unwrap();
        assert_eq!(r.rlim_cur as u64, after);
        if r.rlim_max != libc::RLIM_INFINITY {
            assert_eq!(r.rlim_cur, r.rlim_max);
        }
    }
}
