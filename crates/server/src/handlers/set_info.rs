//! SMB2 SET_INFO ([MS-SMB2] 3.3.5.21) with the file-system semantics of [MS-FSA]
//! 2.1.5.14 (file information), 2.1.5.15 (file-system information) and 2.1.5.16
//! (security information).
//!
//! Access checks use the open's granted access: FILE_WRITE_ATTRIBUTES for
//! FileBasicInformation, FILE_WRITE_DATA for end of file / allocation / valid data
//! length, FILE_WRITE_EA for EAs, DELETE for disposition and rename, WRITE_DAC /
//! WRITE_OWNER for security descriptors.
//!
//! Delete-pending lives in the per-file state ([`crate::state::file::SharedFile`]) so
//! every open of the file sees it; the last close deletes (CLOSE / `FileOpen::close`).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use smbx_vfs::BasicInfo;
use smbx_wire::set_info::{self as si, SetInfoRequest};
use smbx_wire::FileAttributes;
use smbx_wire::NtStatus;
use smbx_wire::{AccessMask, CreateOptions, ShareAccess};

use super::{Ctx, HandlerResult, Request, Response};
use crate::breaks::{until_waiting, GoingAsync, Started};
use crate::state::file::FileKey;
use crate::state::{acl, FileOpen, Open, ServerState};

pub mod security;

/// Handles SET_INFO.
pub async fn handle(ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    let r = SetInfoRequest::decode(req.msg)?;
    let fid = r.file_id;
    let open = ctx.lookup_open(fid)?;
    let read_only_tree = ctx.tree()?.read_only;
    let Some(file) = open.as_file() else {
        // Named pipes: nothing is settable through SMB2 here.
        return Err(match r.info_type {
            si::SMB2_0_INFO_FILE => NtStatus::NOT_SUPPORTED,
            _ => NtStatus::INVALID_PARAMETER,
        });
    };
    if r.info_type == si::SMB2_0_INFO_FILE
        && r.info_class == si::FILE_RENAME_INFORMATION
        && file.access.intersects(AccessMask::DELETE)
    {
        return rename_after_breaks(ctx, open.clone(), read_only_tree, r.buffer.to_vec()).await;
    }
    let env = Env {
        server: ctx.server,
        open: &open,
        file,
        read_only_tree,
    };
    match r.info_type {
        si::SMB2_0_INFO_FILE => {
            env.file_info(r.info_class, r.buffer)?;
            // Changing the size breaks LEVEL_II oplocks (this open's too) and read
            // leases of other opens to NONE ([MS-FSA] 2.1.5.14.5, 2.1.5.14.1).
            // (Added by the oplock engineer.)
            if matches!(
                r.info_class,
                si::FILE_END_OF_FILE_INFORMATION | si::FILE_ALLOCATION_INFORMATION
            ) {
                crate::breaks::break_level2(ctx.server, &file.file, file.entry_id).await;
            }
        }
        si::SMB2_0_INFO_FILESYSTEM => fs_info(file, r.info_class, r.buffer)?,
        si::SMB2_0_INFO_SECURITY => {
            let user = ctx.session()?.user();
            let token = acl::Token::for_user(user.as_ref());
            let admin = user
                .as_ref()
                .is_some_and(|u| crate::state::policy::is_admin(ctx.config(), u));
            security::set_security(
                file,
                &token,
                admin,
                read_only_tree,
                r.additional_information,
                r.buffer,
            )?
        }
        si::SMB2_0_INFO_QUOTA => return Err(NtStatus::NOT_SUPPORTED),
        _ => return Err(NtStatus::INVALID_PARAMETER),
    }
    Ok(Response::ok(si::encode_response()))
}

/// FileRenameInformation through `open`: the other leases on the file give up
/// handle caching first and the rename waits for their acknowledgments
/// (`crate::breaks::break_handle_caching`). When it has to wait and this is the last
/// member of its compound, the SET_INFO goes async (interim STATUS_PENDING, can be
/// cancelled) so the connection keeps reading: the acknowledgment may come on this
/// very connection (smb2.lease.rename_wait).
async fn rename_after_breaks(
    ctx: &Ctx<'_>,
    open: Arc<Open>,
    read_only_tree: bool,
    buf: Vec<u8>,
) -> HandlerResult {
    let server = ctx.server.clone();
    let (going_async, waiting) = if ctx.last_in_compound {
        let (g, rx) = GoingAsync::channel();
        (g, Some(rx))
    } else {
        (GoingAsync::none(), None)
    };
    let fut = Box::pin(async move {
        let file = open.as_file().ok_or(NtStatus::INVALID_HANDLE)?;
        crate::breaks::break_handle_caching(&server, &file.file, file.entry_id, &going_async).await;
        let env = Env {
            server: &server,
            open: &open,
            file,
            read_only_tree,
        };
        env.file_info(si::FILE_RENAME_INFORMATION, &buf)?;
        Ok(Response::ok(si::encode_response()))
    });
    let Some(waiting) = waiting else {
        return fut.await;
    };
    match until_waiting(fut, waiting).await {
        Started::Done(r) => r,
        Started::Waiting(fut) => Ok(Response::pending(fut)),
    }
}

/// The status [MS-FSA] 2.1.5.14 gives an information buffer that does not decode;
/// what failed (class, field, entry and offset) is logged at debug level.
fn info_status(e: si::InfoError) -> NtStatus {
    tracing::debug!(error = %e, "SET_INFO buffer does not decode");
    match e {
        si::InfoError::TooShort { .. } => NtStatus::INFO_LENGTH_MISMATCH,
        si::InfoError::BadValue { .. } | si::InfoError::BadLength { .. } => {
            NtStatus::INVALID_PARAMETER
        }
        si::InfoError::BadName { .. } => NtStatus::OBJECT_NAME_INVALID,
        si::InfoError::EaList(_) => NtStatus::EA_LIST_INCONSISTENT,
        si::InfoError::BadEaName { .. } => NtStatus::INVALID_EA_NAME,
    }
}

/// What one SET_INFO on a file open works with.
struct Env<'a> {
    server: &'a Arc<ServerState>,
    open: &'a Arc<Open>,
    file: &'a FileOpen,
    read_only_tree: bool,
}

fn require(file: &FileOpen, mask: AccessMask) -> Result<(), NtStatus> {
    if !file.access.intersects(mask) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    Ok(())
}

impl Env<'_> {
    fn writable(&self) -> Result<(), NtStatus> {
        if self.read_only_tree {
            return Err(NtStatus::ACCESS_DENIED);
        }
        Ok(())
    }

    fn file_info(&self, class: u8, buf: &[u8]) -> Result<(), NtStatus> {
        let f = self.file;
        match class {
            si::FILE_BASIC_INFORMATION => {
                let b = si::FileBasicInfo::decode(buf).map_err(info_status)?;
                require(f, AccessMask::FILE_WRITE_ATTRIBUTES)?;
                self.writable()?;
                set_basic(f, &b)
            }
            si::FILE_RENAME_INFORMATION => {
                let ri = si::FileRenameInfo::decode(buf).map_err(info_status)?;
                self.rename(&ri)
            }
            si::FILE_LINK_INFORMATION => {
                let li = si::FileRenameInfo::decode(buf).map_err(info_status)?;
                self.link(&li)
            }
            si::FILE_DISPOSITION_INFORMATION => {
                let delete = si::decode_disposition(buf).map_err(info_status)?;
                self.disposition(delete, false)
            }
            si::FILE_DISPOSITION_INFORMATION_EX => {
                let flags = si::decode_disposition_ex(buf).map_err(info_status)?;
                self.disposition_ex(flags)
            }
            si::FILE_POSITION_INFORMATION => {
                let pos = si::decode_u64(buf).map_err(info_status)?;
                if pos > i64::MAX as u64 {
                    return Err(NtStatus::INVALID_PARAMETER);
                }
                let unbuffered = f
                    .mode()
                    .contains(CreateOptions::FILE_NO_INTERMEDIATE_BUFFERING);
                if unbuffered && !pos.is_multiple_of(512) {
                    return Err(NtStatus::INVALID_PARAMETER);
                }
                f.position.store(pos, Ordering::Relaxed);
                Ok(())
            }
            si::FILE_MODE_INFORMATION => {
                let mode = si::decode_mode(buf).map_err(info_status)?;
                set_mode(f, mode)
            }
            si::FILE_FULL_EA_INFORMATION => {
                let eas = si::decode_full_ea_list(buf).map_err(info_status)?;
                require(f, AccessMask::FILE_WRITE_EA)?;
                self.writable()?;
                set_eas(f, &eas)
            }
            si::FILE_ALLOCATION_INFORMATION => {
                let size = si::decode_u64(buf).map_err(info_status)?;
                require(f, AccessMask::FILE_WRITE_DATA)?;
                self.writable()?;
                if f.handle.is_dir() {
                    return Err(NtStatus::INVALID_PARAMETER);
                }
                f.handle.set_allocation(size)
            }
            si::FILE_END_OF_FILE_INFORMATION => {
                let size = si::decode_u64(buf).map_err(info_status)?;
                require(f, AccessMask::FILE_WRITE_DATA)?;
                self.writable()?;
                if f.handle.is_dir() {
                    return Err(NtStatus::INVALID_PARAMETER);
                }
                f.handle.set_end_of_file(size)?;
                // A pending delayed write-time update happens now (state/file.rs).
                f.file.times.flush_pending(smbx_wire::time::now_filetime());
                Ok(())
            }
            si::FILE_VALID_DATA_LENGTH_INFORMATION => {
                let vdl = si::decode_u64(buf).map_err(info_status)?;
                require(
                    f,
                    AccessMask::FILE_WRITE_DATA | AccessMask::FILE_APPEND_DATA,
                )?;
                self.writable()?;
                if f.handle.is_dir() {
                    return Err(NtStatus::INVALID_PARAMETER);
                }
                // Linux keeps no separate valid data length: everything up to the end
                // of file reads as written (or zero). Accept values within the file.
                if vdl > f.handle.stat()?.size {
                    return Err(NtStatus::INVALID_PARAMETER);
                }
                Ok(())
            }
            si::FILE_SHORT_NAME_INFORMATION => {
                si::decode_file_name(buf).map_err(|e| match e {
                    // Unlike a rename target, a short name that does not decode is
                    // a bad parameter.
                    si::InfoError::BadName { .. } => NtStatus::INVALID_PARAMETER,
                    e => info_status(e),
                })?;
                // Short names are generated, never stored: they cannot be set.
                Err(NtStatus::NOT_SUPPORTED)
            }
            si::FILE_PIPE_INFORMATION => Err(NtStatus::INVALID_PARAMETER),
            _ => Err(NtStatus::INVALID_INFO_CLASS),
        }
    }

    /// FileDispositionInformation ([MS-FSA] 2.1.5.14.3).
    fn disposition(&self, delete: bool, ignore_readonly: bool) -> Result<(), NtStatus> {
        let f = self.file;
        require(f, AccessMask::DELETE)?;
        self.writable()?;
        if delete {
            if ignore_readonly {
                clear_readonly(f)?;
            }
            f.vfs.can_delete(&f.handle)?;
        }
        f.file.set_delete_pending(delete);
        Ok(())
    }

    /// FileDispositionInformationEx ([MS-FSA] 2.1.5.14.4). POSIX_SEMANTICS is
    /// approximated by delete-pending (the name stays until the last close).
    fn disposition_ex(&self, flags: u32) -> Result<(), NtStatus> {
        let f = self.file;
        let delete = flags & si::FILE_DISPOSITION_DELETE != 0;
        let ignore_ro = flags & si::FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE != 0;
        if flags & si::FILE_DISPOSITION_ON_CLOSE != 0 {
            // Sets or clears this open's delete-on-close instead of delete-pending.
            require(f, AccessMask::DELETE)?;
            self.writable()?;
            if delete {
                if ignore_ro {
                    clear_readonly(f)?;
                }
                f.vfs.can_delete(&f.handle)?;
            }
            f.delete_on_close.store(delete, Ordering::Release);
            return Ok(());
        }
        self.disposition(delete, ignore_ro)
    }

    /// FileRenameInformation ([MS-FSA] 2.1.5.14.11, [MS-SMB2] 3.3.5.21.1).
    fn rename(&self, ri: &si::FileRenameInfo) -> Result<(), NtStatus> {
        let f = self.file;
        require(f, AccessMask::DELETE)?;
        self.writable()?;
        if ri.root_directory != 0 {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        let target = normalize_target(&ri.file_name)?;
        if target.starts_with(':') {
            // Stream renames (":new" on a stream handle) are not supported.
            return Err(NtStatus::NOT_SUPPORTED);
        }
        if f.file.delete_pending() {
            return Err(NtStatus::DELETE_PENDING);
        }
        let src = f.handle.path();
        if f.handle.is_dir() && self.has_opens_below(&src) {
            return Err(NtStatus::ACCESS_DENIED);
        }
        // Other opens of the file must share delete.
        f.file
            .check_share(AccessMask::DELETE, ShareAccess::ALL, Some(f.entry_id))?;
        // Renaming adds a name to the target's parent: that conflicts with opens of the
        // parent that hold DELETE or deny writing ([MS-FSA] opens the parent for
        // FILE_ADD_FILE sharing read and write).
        self.check_parent(&target)?;
        self.check_parent(&src)?;
        if ri.replace_if_exists {
            self.check_replace(&target)?;
        }
        f.vfs.rename(&f.handle, &target, ri.replace_if_exists)
    }

    /// FileLinkInformation ([MS-FSA] 2.1.5.14.6).
    fn link(&self, li: &si::FileRenameInfo) -> Result<(), NtStatus> {
        let f = self.file;
        self.writable()?;
        if li.root_directory != 0 {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        let target = normalize_target(&li.file_name)?;
        if target.starts_with(':') {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        if f.handle.is_dir() {
            return Err(NtStatus::FILE_IS_A_DIRECTORY);
        }
        self.check_parent(&target)?;
        if li.replace_if_exists {
            self.check_replace(&target)?;
        }
        f.vfs.hardlink(&f.handle, &target, li.replace_if_exists)
    }

    /// A rename or link with ReplaceIfExists deletes an existing `target` other
    /// than the file itself ([MS-FSA] 2.1.5.14.6, 2.1.5.14.11): the caller must be
    /// able to delete it (its stored descriptor grants DELETE, or the parent's
    /// FILE_DELETE_CHILD), and it must not be a directory, READONLY or open by
    /// anyone. Each refusal is STATUS_ACCESS_DENIED, as on Windows.
    fn check_replace(&self, target: &str) -> Result<(), NtStatus> {
        let f = self.file;
        let Ok(info) = f.vfs.stat(target) else {
            return Ok(());
        };
        if info.file_id == f.file.key.file_id && info.volume_id == f.file.key.volume_id {
            return Ok(()); // the file itself (a case-only change)
        }
        if info.is_dir
            || info.attributes.contains(FileAttributes::READONLY)
            || self.is_open(info.volume_id, info.file_id)
        {
            return Err(NtStatus::ACCESS_DENIED);
        }
        let (h, _) = f
            .vfs
            .create(target, &smbx_vfs::CreateRequest::read_attributes())?;
        let user = self
            .server
            .sessions
            .get(self.open.session_id)
            .and_then(|s| s.user());
        let token = acl::Token::for_user(user.as_ref());
        acl::check_stored_sd(&f.vfs, target, &h, &token, AccessMask::DELETE)?;
        Ok(())
    }

    /// Share-mode check of an implicit FILE_ADD_FILE open of `path`'s parent.
    fn check_parent(&self, path: &str) -> Result<(), NtStatus> {
        let parent = path.rsplit_once('\\').map(|(p, _)| p).unwrap_or("");
        let Ok(info) = self.file.vfs.stat(parent) else {
            return Ok(());
        };
        let key = FileKey {
            volume_id: info.volume_id,
            file_id: info.file_id,
            stream: None,
        };
        if let Some(shared) = self.server.files.get(&key) {
            shared.check_share(
                AccessMask::FILE_WRITE_DATA,
                ShareAccess::FILE_SHARE_READ | ShareAccess::FILE_SHARE_WRITE,
                None,
            )?;
        }
        Ok(())
    }

    /// The file (volume, inode) has opens on this server.
    fn is_open(&self, volume_id: u64, file_id: u64) -> bool {
        let key = FileKey {
            volume_id,
            file_id,
            stream: None,
        };
        self.server
            .files
            .get(&key)
            .is_some_and(|s| s.open_count() > 0)
    }

    /// Some other open on the same share lies below directory `dir`.
    fn has_opens_below(&self, dir: &str) -> bool {
        let root = self.file.vfs.root_path().to_path_buf();
        let ci = !self.file.vfs.options().case_sensitive;
        let prefix = if ci {
            format!("{}\\", dir.to_lowercase())
        } else {
            format!("{dir}\\")
        };
        let me = self.open.file_id;
        !self
            .server
            .opens
            .find_where(|o| {
                if o.file_id == me {
                    return false;
                }
                let Some(of) = o.as_file() else {
                    return false;
                };
                if of.vfs.root_path() != root {
                    return false;
                }
                let p = of.handle.path();
                if ci {
                    p.to_lowercase().starts_with(&prefix)
                } else {
                    p.starts_with(&prefix)
                }
            })
            .is_empty()
    }
}

/// The rename/link target as a share-relative path: a leading backslash is dropped;
/// empty names are invalid.
fn normalize_target(name: &str) -> Result<String, NtStatus> {
    let t = name.trim_start_matches('\\');
    if t.is_empty() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    Ok(t.to_string())
}

/// Clears READONLY so a FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE delete can proceed.
fn clear_readonly(f: &FileOpen) -> Result<(), NtStatus> {
    let info = f.handle.stat()?;
    if !info.attributes.contains(FileAttributes::READONLY) {
        return Ok(());
    }
    let mut attrs = info
        .attributes
        .difference(FileAttributes::READONLY | FileAttributes::DIRECTORY);
    if attrs.is_empty() {
        attrs = FileAttributes::NORMAL;
    }
    f.handle.set_basic(&BasicInfo {
        attributes: Some(attrs),
        ..Default::default()
    })
}

/// FileBasicInformation ([MS-FSA] 2.1.5.14.2): 0 leaves a field, -1 / -2 stop and
/// resume automatic updates for this handle (nothing to store here: Linux updates
/// times itself; the values are accepted and nothing changes), other values set it.
/// ChangeTime cannot be set on Linux (ctime is kernel-managed) and is ignored.
pub fn set_basic(f: &FileOpen, b: &si::FileBasicInfo) -> Result<(), NtStatus> {
    let attributes = if b.attributes.is_empty() {
        None
    } else {
        let (a, dir) = (b.attributes, f.handle.is_dir());
        if !dir && a.contains(FileAttributes::DIRECTORY) {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        if dir && a.contains(FileAttributes::TEMPORARY) {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        Some(a)
    };
    let info = BasicInfo {
        creation: b.creation.value(),
        last_access: b.last_access.value(),
        last_write: b.last_write.value(),
        change: b.change.value(),
        attributes,
    };
    // Even all-zero times make a pending delayed write-time update happen (Windows
    // 2016, smb2.timestamps.delayed-write-vs-setbasic); an explicit LastWriteTime
    // sticks for the file (state/file.rs WriteTimes).
    f.file.times.flush_pending(smbx_wire::time::now_filetime());
    let nothing = info.creation.is_none()
        && info.last_access.is_none()
        && info.last_write.is_none()
        && info.change.is_none()
        && info.attributes.is_none();
    if nothing {
        return Ok(());
    }
    f.handle.set_basic(&info)?;
    if let Some(t) = info.last_write {
        f.file.times.set_explicit(t);
    }
    Ok(())
}

/// FileModeInformation ([MS-FSA] 2.1.5.14.8): its Mode carries CreateOptions' bits;
/// only [the settable ones](FileOpen::SETTABLE_MODE) and at most one of the two
/// synchronous-I/O bits (which stay as created) may be given.
fn set_mode(f: &FileOpen, mode: CreateOptions) -> Result<(), NtStatus> {
    const SYNC: CreateOptions =
        CreateOptions::FILE_SYNCHRONOUS_IO_ALERT.union(CreateOptions::FILE_SYNCHRONOUS_IO_NONALERT);
    if !(mode & !(FileOpen::SETTABLE_MODE | SYNC)).is_empty() || mode.contains(SYNC) {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    f.set_mode(mode);
    Ok(())
}

/// FileFullEaInformation ([MS-FSA] 2.1.5.14.5): every name is checked before any EA
/// is changed; names are case-insensitive and keep the case last set.
fn set_eas(f: &FileOpen, eas: &[si::FullEa]) -> Result<(), NtStatus> {
    if f.handle.stream_name().is_some() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let mut names = Vec::with_capacity(eas.len());
    for ea in eas {
        si::validate_ea_name(&ea.name).map_err(info_status)?;
        let name = String::from_utf8(ea.name.clone()).map_err(|_| NtStatus::INVALID_EA_NAME)?;
        names.push(name);
    }
    let existing = f.handle.eas().unwrap_or_default();
    for (ea, name) in eas.iter().zip(names) {
        // Case-insensitive names, case preserved as last set: drop other spellings.
        for old in existing
            .iter()
            .filter(|o| o.name != name && o.name.eq_ignore_ascii_case(&name))
        {
            f.handle.set_ea(&old.name, &[])?;
        }
        f.handle.set_ea(&name, &ea.value).map_err(|e| match e {
            NtStatus::DISK_FULL => NtStatus::EA_TOO_LARGE,
            NtStatus::OBJECT_NAME_INVALID => NtStatus::INVALID_EA_NAME,
            e => e,
        })?;
    }
    Ok(())
}

/// SMB2_0_INFO_FILESYSTEM ([MS-FSA] 2.1.5.15): quotas and object ids cannot be set
/// on this server.
fn fs_info(_f: &FileOpen, class: u8, buf: &[u8]) -> Result<(), NtStatus> {
    match class {
        si::FILE_FS_CONTROL_INFORMATION => {
            if buf.len() < 48 {
                return Err(NtStatus::INFO_LENGTH_MISMATCH);
            }
            Err(NtStatus::ACCESS_DENIED)
        }
        si::FILE_FS_OBJECT_ID_INFORMATION => {
            if buf.len() < 64 {
                return Err(NtStatus::INFO_LENGTH_MISMATCH);
            }
            Err(NtStatus::ACCESS_DENIED)
        }
        // FileFsLabelInformation.
        2 => Err(NtStatus::ACCESS_DENIED),
        _ => Err(NtStatus::INVALID_INFO_CLASS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FileModeInformation's FILE_WRITE_THROUGH set through SET_INFO makes the open's
    /// WRITEs wait for the disk ([MS-FSA] 2.1.5.4: Open.Mode), as one created with it
    /// does, so over SMB Direct they are not parked (their sync would hold the
    /// connection's read loop and driver); cleared again, they are.
    #[test]
    fn write_through_set_by_file_mode_information_is_honoured() {
        use crate::handlers::write::writes_through;
        use smbx_wire::rw::{WriteRequest, CHANNEL_RDMA_V1};
        let dir = tempfile::tempdir().unwrap();
        let open = |created| crate::state::open::test_file_open(dir.path(), created);
        // A WRITE by RDMA Read small enough to be parked: parked unless it writes
        // through.
        // After the SMB2 header (its fields play no part here).
        let mut msg = vec![0; smbx_wire::HEADER_SIZE];
        msg.extend(
            WriteRequest {
                channel: CHANNEL_RDMA_V1,
                remaining_bytes: crate::dispatch::PARK_MAX as u32,
                channel_info: &[0; 16],
                ..Default::default()
            }
            .encode(),
        );
        let w = WriteRequest::decode(&msg).unwrap();
        let through = |f: &FileOpen| writes_through(w.flags, f);
        let parks = |f: &FileOpen| crate::dispatch::direct_write_parks(&w, false, through(f));

        let f = open(CreateOptions::empty());
        assert!(!through(&f) && parks(&f));
        set_mode(&f, CreateOptions::FILE_WRITE_THROUGH).unwrap();
        assert!(through(&f) && !parks(&f));
        set_mode(&f, CreateOptions::FILE_SEQUENTIAL_ONLY).unwrap();
        assert!(!through(&f) && parks(&f));

        // Created write-through, cleared by SET_INFO.
        let f = open(CreateOptions::FILE_WRITE_THROUGH);
        assert!(through(&f) && !parks(&f));
        set_mode(&f, CreateOptions::empty()).unwrap();
        assert!(!through(&f) && parks(&f));
    }

    #[test]
    fn targets() {
        assert_eq!(normalize_target("\\a\\b").unwrap(), "a\\b");
        assert_eq!(normalize_target("a").unwrap(), "a");
        assert_eq!(normalize_target("\\"), Err(NtStatus::INVALID_PARAMETER));
    }
}
