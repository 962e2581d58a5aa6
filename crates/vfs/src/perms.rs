//! POSIX ownership and permission bits of an open handle (SET_INFO security
//! descriptors map owner, group and DACL onto these).

use std::os::fd::AsRawFd;

use smbx_wire::NtStatus;

use crate::handle::Handle;
use crate::sys;

fn errno_status(e: std::io::Error) -> NtStatus {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) | Some(libc::EBADF) => NtStatus::ACCESS_DENIED,
        Some(libc::EINVAL) => NtStatus::INVALID_PARAMETER,
        _ => e.into(),
    }
}

impl Handle {
    /// Changes the owner and/or group (`None` leaves one unchanged) with fchownat on
    /// the handle's descriptor. ACCESS_DENIED on a read-only share, without metadata
    /// write access, or when the kernel refuses (EPERM).
    pub fn set_owner(&self, uid: Option<u32>, gid: Option<u32>) -> Result<(), NtStatus> {
        if !self.can_write_attributes() {
            return Err(NtStatus::ACCESS_DENIED);
        }
        let st = sys::fstat(std::os::fd::AsFd::as_fd(&self.file))?;
        if uid.is_none_or(|u| u == st.st_uid) && gid.is_none_or(|g| g == st.st_gid) {
            return Ok(());
        }
        let u = uid.unwrap_or(u32::MAX);
        let g = gid.unwrap_or(u32::MAX);
        // SAFETY: the descriptor is owned by `self.file` and valid for the call; the
        // path is a static empty C string used with AT_EMPTY_PATH.
        let r = unsafe {
            libc::fchownat(
                self.file.as_raw_fd(),
                c"".as_ptr(),
                u,
                g,
                libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if r != 0 {
            return Err(errno_status(std::io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Sets the permission bits (`mode & 0o7777`) with fchmod. ACCESS_DENIED on a
    /// read-only share, without metadata write access, or on an O_PATH handle.
    pub fn set_mode(&self, mode: u32) -> Result<(), NtStatus> {
        if !self.can_write_attributes() || self.opath {
            return Err(NtStatus::ACCESS_DENIED);
        }
        // SAFETY: the descriptor is owned by `self.file` and valid for the call.
        let r = unsafe { libc::fchmod(self.file.as_raw_fd(), (mode & 0o7777) as libc::mode_t) };
        if r != 0 {
            return Err(errno_status(std::io::Error::last_os_error()));
        }
        Ok(())
    }
}

/// The effective user and group ids the server's storage calls run as.
pub fn process_ids() -> (u32, u32) {
    sys::effective_ids()
}

#[cfg(test)]
mod tests {
    use crate::*;

    fn share(read_only: bool) -> (tempfile::TempDir, Share) {
        let d = tempfile::tempdir().unwrap();
        let s = Share::open(
            d.path(),
            ShareOptions {
                read_only,
                ..Default::default()
            },
        )
        .unwrap();
        (d, s)
    }

    #[test]
    fn mode_and_owner_round_trip() {
        let (_d, s) = share(false);
        let req = CreateRequest {
            disposition: Disposition::Create,
            want_write: true,
            ..Default::default()
        };
        let (h, _) = s.create("f", &req).unwrap();
        h.set_mode(0o640).unwrap();
        assert_eq!(h.stat().unwrap().mode & 0o7777, 0o640);
        h.set_mode(0o604).unwrap();
        assert_eq!(h.stat().unwrap().mode & 0o7777, 0o604);
        // Changing to the current owner and group always works.
        let info = h.stat().unwrap();
        h.set_owner(Some(info.uid), Some(info.gid)).unwrap();
        h.set_owner(None, None).unwrap();
        // A read-only handle may not change anything.
        let (ro, _) = s.create("f", &CreateRequest::default()).unwrap();
        assert_eq!(ro.set_mode(0o600), Err(NtStatus::ACCESS_DENIED));
    }

    #[test]
    fn read_only_share_refuses() {
        let (d, _) = share(false);
        std::fs::write(d.path().join("g"), b"x").unwrap();
        let s = Share::open(
            d.path(),
            ShareOptions {
                read_only: true,
                ..Default::default()
            },
        )
        .unwrap();
        let (h, _) = s
            .create(
                "g",
                &CreateRequest {
                    maximum_allowed: true,
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(h.set_mode(0o600), Err(NtStatus::ACCESS_DENIED));
        assert_eq!(h.set_owner(Some(0), None), Err(NtStatus::ACCESS_DENIED));
    }
}
