//! Stored NT security descriptors (as Samba's `acl_xattr`): the self-relative
//! descriptor a client set on a file or directory is kept verbatim in the xattr
//! [`NTACL_XATTR`] and read back; the server interprets it. Named streams share their
//! base file's descriptor (the handle's descriptor is the base file's).

use std::os::fd::AsFd;

use smbx_wire::NtStatus;

use crate::handle::Handle;
use crate::stream::xattr_err;
use crate::sys;

/// The xattr holding a file's NT security descriptor. Not under the EA prefix, so the
/// EA interface never shows it.
pub const NTACL_XATTR: &str = "user.smbx.NTACL";

/// Largest descriptor stored (a self-relative SD is at most 64 KiB plus its header).
pub const MAX_NTACL: usize = 65_536 + 20 * 4;

fn xattr_name() -> std::ffi::CString {
    std::ffi::CString::new(NTACL_XATTR).expect("constant without NUL")
}

impl Handle {
    /// The stored security descriptor, if one was set. `None` also when the handle is
    /// O_PATH (the kernel refuses xattrs there) or the file system has no xattrs.
    pub fn nt_acl(&self) -> Result<Option<Vec<u8>>, NtStatus> {
        if self.opath {
            return Ok(None);
        }
        match sys::fgetxattr(self.file.as_fd(), &xattr_name(), MAX_NTACL) {
            Ok(v) => Ok(v),
            Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => Ok(None),
            Err(e) => Err(xattr_err(e)),
        }
    }

    /// Stores `sd` (a self-relative descriptor) or, with `None`, forgets the stored
    /// one. Needs no data or attribute write access: the caller checked WRITE_DAC /
    /// WRITE_OWNER. ACCESS_DENIED on a read-only share or an O_PATH handle.
    pub fn set_nt_acl(&self, sd: Option<&[u8]>) -> Result<(), NtStatus> {
        if self.share.opts.read_only || self.opath {
            return Err(NtStatus::ACCESS_DENIED);
        }
        let name = xattr_name();
        match sd {
            Some(b) if b.len() > MAX_NTACL => Err(NtStatus::INVALID_SECURITY_DESCR),
            Some(b) => sys::fsetxattr(self.file.as_fd(), &name, b).map_err(xattr_err),
            None => match sys::fremovexattr(self.file.as_fd(), &name) {
                Ok(()) => Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::ENODATA) => Ok(()),
                Err(e) => Err(xattr_err(e)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::*;

    #[test]
    fn stored_descriptor_round_trip() {
        let d = tempfile::tempdir().unwrap();
        let s = Share::open(d.path(), ShareOptions::default()).unwrap();
        let req = CreateRequest::from_wire(
            crate::Disposition::Create,
            smbx_wire::CreateOptions::empty(),
            smbx_wire::AccessMask::FILE_ALL_ACCESS,
            crate::FileAttributes::NORMAL,
            0,
        );
        let (h, _) = s.create("f", &req).unwrap();
        assert_eq!(h.nt_acl().unwrap(), None);
        let sd = vec![
            1u8, 0, 0x04, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        h.set_nt_acl(Some(&sd)).unwrap();
        assert_eq!(h.nt_acl().unwrap(), Some(sd.clone()));
        // Not an EA.
        assert!(h.eas().unwrap().is_empty());
        h.set_nt_acl(None).unwrap();
        h.set_nt_acl(None).unwrap();
        assert_eq!(h.nt_acl().unwrap(), None);
        assert_eq!(
            h.set_nt_acl(Some(&vec![0; MAX_NTACL + 1])),
            Err(NtStatus::INVALID_SECURITY_DESCR)
        );
    }
}
