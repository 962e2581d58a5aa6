//! NTSTATUS codes that SMB2 carries in its header.

/// An NTSTATUS value.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NtStatus(pub u32);

impl NtStatus {
    /// STATUS_SUCCESS.
    pub const SUCCESS: NtStatus = NtStatus(0x00000000);
    /// STATUS_PENDING.
    pub const PENDING: NtStatus = NtStatus(0x00000103);
    /// STATUS_NOTIFY_CLEANUP.
    pub const NOTIFY_CLEANUP: NtStatus = NtStatus(0x0000010B);
    /// STATUS_NOTIFY_ENUM_DIR.
    pub const NOTIFY_ENUM_DIR: NtStatus = NtStatus(0x0000010C);
    /// STATUS_BUFFER_OVERFLOW.
    pub const BUFFER_OVERFLOW: NtStatus = NtStatus(0x80000005);
    /// STATUS_NO_MORE_FILES.
    pub const NO_MORE_FILES: NtStatus = NtStatus(0x80000006);
    /// STATUS_STOPPED_ON_SYMLINK.
    pub const STOPPED_ON_SYMLINK: NtStatus = NtStatus(0x8000002D);
    /// STATUS_UNSUCCESSFUL.
    pub const UNSUCCESSFUL: NtStatus = NtStatus(0xC0000001);
    /// STATUS_NOT_IMPLEMENTED.
    pub const NOT_IMPLEMENTED: NtStatus = NtStatus(0xC0000002);
    /// STATUS_INVALID_EA_NAME.
    pub const INVALID_EA_NAME: NtStatus = NtStatus(0x80000013);
    /// STATUS_EA_LIST_INCONSISTENT.
    pub const EA_LIST_INCONSISTENT: NtStatus = NtStatus(0x80000014);
    /// STATUS_INVALID_INFO_CLASS.
    pub const INVALID_INFO_CLASS: NtStatus = NtStatus(0xC0000003);
    /// STATUS_INFO_LENGTH_MISMATCH.
    pub const INFO_LENGTH_MISMATCH: NtStatus = NtStatus(0xC0000004);
    /// STATUS_INVALID_HANDLE.
    pub const INVALID_HANDLE: NtStatus = NtStatus(0xC0000008);
    /// STATUS_INVALID_PARAMETER.
    pub const INVALID_PARAMETER: NtStatus = NtStatus(0xC000000D);
    /// STATUS_NO_SUCH_DEVICE.
    pub const NO_SUCH_DEVICE: NtStatus = NtStatus(0xC000000E);
    /// STATUS_NO_SUCH_FILE.
    pub const NO_SUCH_FILE: NtStatus = NtStatus(0xC000000F);
    /// STATUS_INVALID_DEVICE_REQUEST.
    pub const INVALID_DEVICE_REQUEST: NtStatus = NtStatus(0xC0000010);
    /// STATUS_END_OF_FILE.
    pub const END_OF_FILE: NtStatus = NtStatus(0xC0000011);
    /// STATUS_MORE_PROCESSING_REQUIRED.
    pub const MORE_PROCESSING_REQUIRED: NtStatus = NtStatus(0xC0000016);
    /// STATUS_NO_MEMORY.
    pub const NO_MEMORY: NtStatus = NtStatus(0xC0000017);
    /// STATUS_ACCESS_DENIED.
    pub const ACCESS_DENIED: NtStatus = NtStatus(0xC0000022);
    /// STATUS_BUFFER_TOO_SMALL.
    pub const BUFFER_TOO_SMALL: NtStatus = NtStatus(0xC0000023);
    /// STATUS_OBJECT_TYPE_MISMATCH.
    pub const OBJECT_TYPE_MISMATCH: NtStatus = NtStatus(0xC0000024);
    /// STATUS_OBJECT_NAME_INVALID.
    pub const OBJECT_NAME_INVALID: NtStatus = NtStatus(0xC0000033);
    /// STATUS_OBJECT_NAME_NOT_FOUND.
    pub const OBJECT_NAME_NOT_FOUND: NtStatus = NtStatus(0xC0000034);
    /// STATUS_OBJECT_NAME_COLLISION.
    pub const OBJECT_NAME_COLLISION: NtStatus = NtStatus(0xC0000035);
    /// STATUS_OBJECT_PATH_INVALID.
    pub const OBJECT_PATH_INVALID: NtStatus = NtStatus(0xC0000039);
    /// STATUS_OBJECT_PATH_NOT_FOUND.
    pub const OBJECT_PATH_NOT_FOUND: NtStatus = NtStatus(0xC000003A);
    /// STATUS_OBJECT_PATH_SYNTAX_BAD.
    pub const OBJECT_PATH_SYNTAX_BAD: NtStatus = NtStatus(0xC000003B);
    /// STATUS_DATA_ERROR.
    pub const DATA_ERROR: NtStatus = NtStatus(0xC000003E);
    /// STATUS_SHARING_VIOLATION.
    pub const SHARING_VIOLATION: NtStatus = NtStatus(0xC0000043);
    /// STATUS_EA_TOO_LARGE.
    pub const EA_TOO_LARGE: NtStatus = NtStatus(0xC0000050);
    /// STATUS_NONEXISTENT_EA_ENTRY.
    pub const NONEXISTENT_EA_ENTRY: NtStatus = NtStatus(0xC0000051);
    /// STATUS_NO_EAS_ON_FILE.
    pub const NO_EAS_ON_FILE: NtStatus = NtStatus(0xC0000052);
    /// STATUS_EA_CORRUPT_ERROR.
    pub const EA_CORRUPT_ERROR: NtStatus = NtStatus(0xC0000053);
    /// STATUS_FILE_LOCK_CONFLICT.
    pub const FILE_LOCK_CONFLICT: NtStatus = NtStatus(0xC0000054);
    /// STATUS_LOCK_NOT_GRANTED.
    pub const LOCK_NOT_GRANTED: NtStatus = NtStatus(0xC0000055);
    /// STATUS_DELETE_PENDING.
    pub const DELETE_PENDING: NtStatus = NtStatus(0xC0000056);
    /// STATUS_PRIVILEGE_NOT_HELD.
    pub const PRIVILEGE_NOT_HELD: NtStatus = NtStatus(0xC0000061);
    /// STATUS_WRONG_PASSWORD.
    pub const WRONG_PASSWORD: NtStatus = NtStatus(0xC000006A);
    /// STATUS_LOGON_FAILURE.
    pub const LOGON_FAILURE: NtStatus = NtStatus(0xC000006D);
    /// STATUS_ACCOUNT_RESTRICTION.
    pub const ACCOUNT_RESTRICTION: NtStatus = NtStatus(0xC000006E);
    /// STATUS_PASSWORD_EXPIRED.
    pub const PASSWORD_EXPIRED: NtStatus = NtStatus(0xC0000071);
    /// STATUS_ACCOUNT_DISABLED.
    pub const ACCOUNT_DISABLED: NtStatus = NtStatus(0xC0000072);
    /// STATUS_NONE_MAPPED.
    pub const NONE_MAPPED: NtStatus = NtStatus(0xC0000073);
    /// STATUS_RANGE_NOT_LOCKED.
    pub const RANGE_NOT_LOCKED: NtStatus = NtStatus(0xC000007E);
    /// STATUS_INVALID_LOCK_RANGE.
    pub const INVALID_LOCK_RANGE: NtStatus = NtStatus(0xC00001A1);
    /// STATUS_DISK_FULL.
    pub const DISK_FULL: NtStatus = NtStatus(0xC000007F);
    /// STATUS_INSUFFICIENT_RESOURCES.
    pub const INSUFFICIENT_RESOURCES: NtStatus = NtStatus(0xC000009A);
    /// STATUS_FILE_IS_A_DIRECTORY.
    pub const FILE_IS_A_DIRECTORY: NtStatus = NtStatus(0xC00000BA);
    /// STATUS_NOT_SUPPORTED.
    pub const NOT_SUPPORTED: NtStatus = NtStatus(0xC00000BB);
    /// STATUS_NETWORK_NAME_DELETED.
    pub const NETWORK_NAME_DELETED: NtStatus = NtStatus(0xC00000C9);
    /// STATUS_NETWORK_ACCESS_DENIED.
    pub const NETWORK_ACCESS_DENIED: NtStatus = NtStatus(0xC00000CA);
    /// STATUS_BAD_NETWORK_NAME.
    pub const BAD_NETWORK_NAME: NtStatus = NtStatus(0xC00000CC);
    /// STATUS_REQUEST_NOT_ACCEPTED.
    pub const REQUEST_NOT_ACCEPTED: NtStatus = NtStatus(0xC00000D0);
    /// STATUS_NOT_SAME_DEVICE.
    pub const NOT_SAME_DEVICE: NtStatus = NtStatus(0xC00000D4);
    /// STATUS_FILE_RENAMED.
    pub const FILE_RENAMED: NtStatus = NtStatus(0xC00000D5);
    /// STATUS_INTERNAL_ERROR.
    pub const INTERNAL_ERROR: NtStatus = NtStatus(0xC00000E5);
    /// STATUS_IO_TIMEOUT.
    pub const IO_TIMEOUT: NtStatus = NtStatus(0xC00000B5);
    /// STATUS_FILE_CLOSED.
    pub const FILE_CLOSED: NtStatus = NtStatus(0xC0000128);
    /// STATUS_DIRECTORY_NOT_EMPTY.
    pub const DIRECTORY_NOT_EMPTY: NtStatus = NtStatus(0xC0000101);
    /// STATUS_NOT_A_DIRECTORY.
    pub const NOT_A_DIRECTORY: NtStatus = NtStatus(0xC0000103);
    /// STATUS_NAME_TOO_LONG.
    pub const NAME_TOO_LONG: NtStatus = NtStatus(0xC0000106);
    /// STATUS_CANCELLED.
    pub const CANCELLED: NtStatus = NtStatus(0xC0000120);
    /// STATUS_CANNOT_DELETE.
    pub const CANNOT_DELETE: NtStatus = NtStatus(0xC0000121);
    /// STATUS_INVALID_LEVEL.
    pub const INVALID_LEVEL: NtStatus = NtStatus(0xC0000148);
    /// STATUS_PIPE_BROKEN.
    pub const PIPE_BROKEN: NtStatus = NtStatus(0xC000014B);
    /// STATUS_INVALID_PIPE_STATE.
    pub const INVALID_PIPE_STATE: NtStatus = NtStatus(0xC00000AD);
    /// STATUS_PIPE_BUSY.
    pub const PIPE_BUSY: NtStatus = NtStatus(0xC00000AE);
    /// STATUS_PIPE_NOT_AVAILABLE.
    pub const PIPE_NOT_AVAILABLE: NtStatus = NtStatus(0xC00000AC);
    /// STATUS_PIPE_DISCONNECTED.
    pub const PIPE_DISCONNECTED: NtStatus = NtStatus(0xC00000B0);
    /// STATUS_PIPE_CLOSING.
    pub const PIPE_CLOSING: NtStatus = NtStatus(0xC00000B1);
    /// STATUS_INSTANCE_NOT_AVAILABLE.
    pub const INSTANCE_NOT_AVAILABLE: NtStatus = NtStatus(0xC00000AB);
    /// STATUS_NOTIFY_ENUM_DIR_ERR.
    pub const NOTIFY_ENUM_DIR_ERR: NtStatus = NtStatus(0xC000010C);
    /// STATUS_CONNECTION_DISCONNECTED.
    pub const CONNECTION_DISCONNECTED: NtStatus = NtStatus(0xC000020C);
    /// STATUS_USER_SESSION_DELETED.
    pub const USER_SESSION_DELETED: NtStatus = NtStatus(0xC0000203);
    /// STATUS_NETWORK_SESSION_EXPIRED.
    pub const NETWORK_SESSION_EXPIRED: NtStatus = NtStatus(0xC000035C);
    /// STATUS_SMB_TOO_MANY_UIDS.
    pub const SMB_TOO_MANY_UIDS: NtStatus = NtStatus(0xC000205A);
    /// STATUS_NOT_FOUND.
    pub const NOT_FOUND: NtStatus = NtStatus(0xC0000225);
    /// STATUS_INVALID_DEVICE_STATE.
    pub const INVALID_DEVICE_STATE: NtStatus = NtStatus(0xC0000184);
    /// STATUS_FS_DRIVER_REQUIRED.
    pub const FS_DRIVER_REQUIRED: NtStatus = NtStatus(0xC000019C);
    /// STATUS_OBJECTID_NOT_FOUND.
    pub const OBJECTID_NOT_FOUND: NtStatus = NtStatus(0xC00002F0);
    /// STATUS_DUPLICATE_OBJECTID.
    pub const DUPLICATE_OBJECTID: NtStatus = NtStatus(0xC000022A);
    /// STATUS_BAD_IMPERSONATION_LEVEL.
    pub const BAD_IMPERSONATION_LEVEL: NtStatus = NtStatus(0xC00000A5);
    /// STATUS_CANT_OPEN_ANONYMOUS.
    pub const CANT_OPEN_ANONYMOUS: NtStatus = NtStatus(0xC00000A6);
    /// STATUS_OPLOCK_NOT_GRANTED.
    pub const OPLOCK_NOT_GRANTED: NtStatus = NtStatus(0xC00000E2);
    /// STATUS_INVALID_OPLOCK_PROTOCOL.
    pub const INVALID_OPLOCK_PROTOCOL: NtStatus = NtStatus(0xC00000E3);
    /// STATUS_TOO_MANY_OPENED_FILES.
    pub const TOO_MANY_OPENED_FILES: NtStatus = NtStatus(0xC000011F);
    /// STATUS_INVALID_NETWORK_RESPONSE.
    pub const INVALID_NETWORK_RESPONSE: NtStatus = NtStatus(0xC00000C3);
    /// STATUS_USER_MAPPED_FILE.
    pub const USER_MAPPED_FILE: NtStatus = NtStatus(0xC0000243);
    /// STATUS_FILE_NOT_AVAILABLE.
    pub const FILE_NOT_AVAILABLE: NtStatus = NtStatus(0xC0000467);
    /// STATUS_OBJECT_NAME_EXISTS.
    pub const OBJECT_NAME_EXISTS: NtStatus = NtStatus(0x40000000);
    /// STATUS_INVALID_SID.
    pub const INVALID_SID: NtStatus = NtStatus(0xC0000078);
    /// STATUS_INVALID_ACL.
    pub const INVALID_ACL: NtStatus = NtStatus(0xC0000077);
    /// STATUS_INVALID_SECURITY_DESCR.
    pub const INVALID_SECURITY_DESCR: NtStatus = NtStatus(0xC0000079);
    /// STATUS_INVALID_OWNER.
    pub const INVALID_OWNER: NtStatus = NtStatus(0xC000005A);
    /// STATUS_INVALID_PRIMARY_GROUP.
    pub const INVALID_PRIMARY_GROUP: NtStatus = NtStatus(0xC000005B);
    /// STATUS_NO_SUCH_USER.
    pub const NO_SUCH_USER: NtStatus = NtStatus(0xC0000064);
    /// STATUS_NO_SUCH_LOGON_SESSION.
    pub const NO_SUCH_LOGON_SESSION: NtStatus = NtStatus(0xC000005F);
    /// STATUS_MEDIA_WRITE_PROTECTED.
    pub const MEDIA_WRITE_PROTECTED: NtStatus = NtStatus(0xC00000A2);
    /// STATUS_UNEXPECTED_IO_ERROR.
    pub const UNEXPECTED_IO_ERROR: NtStatus = NtStatus(0xC00000E9);
    /// STATUS_INVALID_VIEW_SIZE.
    pub const INVALID_VIEW_SIZE: NtStatus = NtStatus(0xC000001F);
    /// STATUS_NOT_A_REPARSE_POINT.
    pub const NOT_A_REPARSE_POINT: NtStatus = NtStatus(0xC0000275);
    /// STATUS_IO_REPARSE_TAG_NOT_HANDLED.
    pub const IO_REPARSE_TAG_NOT_HANDLED: NtStatus = NtStatus(0xC0000279);
    /// STATUS_VOLUME_DISMOUNTED.
    pub const VOLUME_DISMOUNTED: NtStatus = NtStatus(0xC000026E);
    /// STATUS_ENCRYPTION_FAILED.
    pub const ENCRYPTION_FAILED: NtStatus = NtStatus(0xC000028A);
    /// STATUS_DECRYPTION_FAILED.
    pub const DECRYPTION_FAILED: NtStatus = NtStatus(0xC000028B);
    /// STATUS_SERVER_UNAVAILABLE.
    pub const SERVER_UNAVAILABLE: NtStatus = NtStatus(0xC0000466);
    /// STATUS_HASH_NOT_PRESENT.
    pub const HASH_NOT_PRESENT: NtStatus = NtStatus(0xC000A100);
    /// STATUS_OBJECT_NOT_EXTERNALLY_BACKED.
    pub const OBJECT_NOT_EXTERNALLY_BACKED: NtStatus = NtStatus(0xC000046D);
    /// STATUS_INVALID_USER_BUFFER.
    pub const INVALID_USER_BUFFER: NtStatus = NtStatus(0xC00000E8);
    /// STATUS_REQUEST_OUT_OF_SEQUENCE.
    pub const REQUEST_OUT_OF_SEQUENCE: NtStatus = NtStatus(0xC000042A);
    /// STATUS_FILE_SYSTEM_LIMITATION.
    pub const FILE_SYSTEM_LIMITATION: NtStatus = NtStatus(0xC0000427);
    /// STATUS_DIRECTORY_IS_A_REPARSE_POINT.
    pub const DIRECTORY_IS_A_REPARSE_POINT: NtStatus = NtStatus(0xC0000281);
    /// STATUS_SHARING_PAUSED.
    pub const SHARING_PAUSED: NtStatus = NtStatus(0xC00000CF);
    /// STATUS_USER_EXISTS.
    pub const USER_EXISTS: NtStatus = NtStatus(0xC0000063);
    /// STATUS_EAS_NOT_SUPPORTED.
    pub const EAS_NOT_SUPPORTED: NtStatus = NtStatus(0xC000004F);

    /// True for success and informational codes (severity 0 or 1).
    pub fn is_success(self) -> bool {
        self.0 >> 30 <= 1
    }
    /// True for error codes (severity 3).
    pub fn is_error(self) -> bool {
        self.0 >> 30 == 3
    }
    /// The conventional name, such as `STATUS_ACCESS_DENIED`, if known.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            NtStatus::SUCCESS => "STATUS_SUCCESS",
            NtStatus::PENDING => "STATUS_PENDING",
            NtStatus::NOTIFY_CLEANUP => "STATUS_NOTIFY_CLEANUP",
            NtStatus::NOTIFY_ENUM_DIR => "STATUS_NOTIFY_ENUM_DIR",
            NtStatus::BUFFER_OVERFLOW => "STATUS_BUFFER_OVERFLOW",
            NtStatus::NO_MORE_FILES => "STATUS_NO_MORE_FILES",
            NtStatus::STOPPED_ON_SYMLINK => "STATUS_STOPPED_ON_SYMLINK",
            NtStatus::UNSUCCESSFUL => "STATUS_UNSUCCESSFUL",
            NtStatus::NOT_IMPLEMENTED => "STATUS_NOT_IMPLEMENTED",
            NtStatus::INVALID_EA_NAME => "STATUS_INVALID_EA_NAME",
            NtStatus::EA_LIST_INCONSISTENT => "STATUS_EA_LIST_INCONSISTENT",
            NtStatus::INVALID_INFO_CLASS => "STATUS_INVALID_INFO_CLASS",
            NtStatus::INFO_LENGTH_MISMATCH => "STATUS_INFO_LENGTH_MISMATCH",
            NtStatus::INVALID_HANDLE => "STATUS_INVALID_HANDLE",
            NtStatus::INVALID_PARAMETER => "STATUS_INVALID_PARAMETER",
            NtStatus::NO_SUCH_DEVICE => "STATUS_NO_SUCH_DEVICE",
            NtStatus::NO_SUCH_FILE => "STATUS_NO_SUCH_FILE",
            NtStatus::INVALID_DEVICE_REQUEST => "STATUS_INVALID_DEVICE_REQUEST",
            NtStatus::END_OF_FILE => "STATUS_END_OF_FILE",
            NtStatus::MORE_PROCESSING_REQUIRED => "STATUS_MORE_PROCESSING_REQUIRED",
            NtStatus::NO_MEMORY => "STATUS_NO_MEMORY",
            NtStatus::ACCESS_DENIED => "STATUS_ACCESS_DENIED",
            NtStatus::BUFFER_TOO_SMALL => "STATUS_BUFFER_TOO_SMALL",
            NtStatus::OBJECT_TYPE_MISMATCH => "STATUS_OBJECT_TYPE_MISMATCH",
            NtStatus::OBJECT_NAME_INVALID => "STATUS_OBJECT_NAME_INVALID",
            NtStatus::OBJECT_NAME_NOT_FOUND => "STATUS_OBJECT_NAME_NOT_FOUND",
            NtStatus::OBJECT_NAME_COLLISION => "STATUS_OBJECT_NAME_COLLISION",
            NtStatus::OBJECT_PATH_INVALID => "STATUS_OBJECT_PATH_INVALID",
            NtStatus::OBJECT_PATH_NOT_FOUND => "STATUS_OBJECT_PATH_NOT_FOUND",
            NtStatus::OBJECT_PATH_SYNTAX_BAD => "STATUS_OBJECT_PATH_SYNTAX_BAD",
            NtStatus::DATA_ERROR => "STATUS_DATA_ERROR",
            NtStatus::SHARING_VIOLATION => "STATUS_SHARING_VIOLATION",
            NtStatus::EA_TOO_LARGE => "STATUS_EA_TOO_LARGE",
            NtStatus::NONEXISTENT_EA_ENTRY => "STATUS_NONEXISTENT_EA_ENTRY",
            NtStatus::NO_EAS_ON_FILE => "STATUS_NO_EAS_ON_FILE",
            NtStatus::EA_CORRUPT_ERROR => "STATUS_EA_CORRUPT_ERROR",
            NtStatus::FILE_LOCK_CONFLICT => "STATUS_FILE_LOCK_CONFLICT",
            NtStatus::LOCK_NOT_GRANTED => "STATUS_LOCK_NOT_GRANTED",
            NtStatus::DELETE_PENDING => "STATUS_DELETE_PENDING",
            NtStatus::PRIVILEGE_NOT_HELD => "STATUS_PRIVILEGE_NOT_HELD",
            NtStatus::WRONG_PASSWORD => "STATUS_WRONG_PASSWORD",
            NtStatus::LOGON_FAILURE => "STATUS_LOGON_FAILURE",
            NtStatus::ACCOUNT_RESTRICTION => "STATUS_ACCOUNT_RESTRICTION",
            NtStatus::PASSWORD_EXPIRED => "STATUS_PASSWORD_EXPIRED",
            NtStatus::ACCOUNT_DISABLED => "STATUS_ACCOUNT_DISABLED",
            NtStatus::NONE_MAPPED => "STATUS_NONE_MAPPED",
            NtStatus::RANGE_NOT_LOCKED => "STATUS_RANGE_NOT_LOCKED",
            NtStatus::INVALID_LOCK_RANGE => "STATUS_INVALID_LOCK_RANGE",
            NtStatus::DISK_FULL => "STATUS_DISK_FULL",
            NtStatus::INSUFFICIENT_RESOURCES => "STATUS_INSUFFICIENT_RESOURCES",
            NtStatus::FILE_IS_A_DIRECTORY => "STATUS_FILE_IS_A_DIRECTORY",
            NtStatus::NOT_SUPPORTED => "STATUS_NOT_SUPPORTED",
            NtStatus::NETWORK_NAME_DELETED => "STATUS_NETWORK_NAME_DELETED",
            NtStatus::NETWORK_ACCESS_DENIED => "STATUS_NETWORK_ACCESS_DENIED",
            NtStatus::BAD_NETWORK_NAME => "STATUS_BAD_NETWORK_NAME",
            NtStatus::REQUEST_NOT_ACCEPTED => "STATUS_REQUEST_NOT_ACCEPTED",
            NtStatus::NOT_SAME_DEVICE => "STATUS_NOT_SAME_DEVICE",
            NtStatus::FILE_RENAMED => "STATUS_FILE_RENAMED",
            NtStatus::INTERNAL_ERROR => "STATUS_INTERNAL_ERROR",
            NtStatus::IO_TIMEOUT => "STATUS_IO_TIMEOUT",
            NtStatus::FILE_CLOSED => "STATUS_FILE_CLOSED",
            NtStatus::DIRECTORY_NOT_EMPTY => "STATUS_DIRECTORY_NOT_EMPTY",
            NtStatus::NOT_A_DIRECTORY => "STATUS_NOT_A_DIRECTORY",
            NtStatus::NAME_TOO_LONG => "STATUS_NAME_TOO_LONG",
            NtStatus::CANCELLED => "STATUS_CANCELLED",
            NtStatus::CANNOT_DELETE => "STATUS_CANNOT_DELETE",
            NtStatus::INVALID_LEVEL => "STATUS_INVALID_LEVEL",
            NtStatus::PIPE_BROKEN => "STATUS_PIPE_BROKEN",
            NtStatus::INVALID_PIPE_STATE => "STATUS_INVALID_PIPE_STATE",
            NtStatus::PIPE_BUSY => "STATUS_PIPE_BUSY",
            NtStatus::PIPE_NOT_AVAILABLE => "STATUS_PIPE_NOT_AVAILABLE",
            NtStatus::PIPE_DISCONNECTED => "STATUS_PIPE_DISCONNECTED",
            NtStatus::PIPE_CLOSING => "STATUS_PIPE_CLOSING",
            NtStatus::INSTANCE_NOT_AVAILABLE => "STATUS_INSTANCE_NOT_AVAILABLE",
            NtStatus::NOTIFY_ENUM_DIR_ERR => "STATUS_NOTIFY_ENUM_DIR_ERR",
            NtStatus::CONNECTION_DISCONNECTED => "STATUS_CONNECTION_DISCONNECTED",
            NtStatus::USER_SESSION_DELETED => "STATUS_USER_SESSION_DELETED",
            NtStatus::NETWORK_SESSION_EXPIRED => "STATUS_NETWORK_SESSION_EXPIRED",
            NtStatus::SMB_TOO_MANY_UIDS => "STATUS_SMB_TOO_MANY_UIDS",
            NtStatus::NOT_FOUND => "STATUS_NOT_FOUND",
            NtStatus::INVALID_DEVICE_STATE => "STATUS_INVALID_DEVICE_STATE",
            NtStatus::FS_DRIVER_REQUIRED => "STATUS_FS_DRIVER_REQUIRED",
            NtStatus::OBJECTID_NOT_FOUND => "STATUS_OBJECTID_NOT_FOUND",
            NtStatus::DUPLICATE_OBJECTID => "STATUS_DUPLICATE_OBJECTID",
            NtStatus::BAD_IMPERSONATION_LEVEL => "STATUS_BAD_IMPERSONATION_LEVEL",
            NtStatus::CANT_OPEN_ANONYMOUS => "STATUS_CANT_OPEN_ANONYMOUS",
            NtStatus::OPLOCK_NOT_GRANTED => "STATUS_OPLOCK_NOT_GRANTED",
            NtStatus::INVALID_OPLOCK_PROTOCOL => "STATUS_INVALID_OPLOCK_PROTOCOL",
            NtStatus::TOO_MANY_OPENED_FILES => "STATUS_TOO_MANY_OPENED_FILES",
            NtStatus::INVALID_NETWORK_RESPONSE => "STATUS_INVALID_NETWORK_RESPONSE",
            NtStatus::USER_MAPPED_FILE => "STATUS_USER_MAPPED_FILE",
            NtStatus::FILE_NOT_AVAILABLE => "STATUS_FILE_NOT_AVAILABLE",
            NtStatus::OBJECT_NAME_EXISTS => "STATUS_OBJECT_NAME_EXISTS",
            NtStatus::INVALID_SID => "STATUS_INVALID_SID",
            NtStatus::INVALID_ACL => "STATUS_INVALID_ACL",
            NtStatus::INVALID_SECURITY_DESCR => "STATUS_INVALID_SECURITY_DESCR",
            NtStatus::INVALID_OWNER => "STATUS_INVALID_OWNER",
            NtStatus::INVALID_PRIMARY_GROUP => "STATUS_INVALID_PRIMARY_GROUP",
            NtStatus::NO_SUCH_USER => "STATUS_NO_SUCH_USER",
            NtStatus::NO_SUCH_LOGON_SESSION => "STATUS_NO_SUCH_LOGON_SESSION",
            NtStatus::MEDIA_WRITE_PROTECTED => "STATUS_MEDIA_WRITE_PROTECTED",
            NtStatus::UNEXPECTED_IO_ERROR => "STATUS_UNEXPECTED_IO_ERROR",
            NtStatus::INVALID_VIEW_SIZE => "STATUS_INVALID_VIEW_SIZE",
            NtStatus::NOT_A_REPARSE_POINT => "STATUS_NOT_A_REPARSE_POINT",
            NtStatus::IO_REPARSE_TAG_NOT_HANDLED => "STATUS_IO_REPARSE_TAG_NOT_HANDLED",
            NtStatus::VOLUME_DISMOUNTED => "STATUS_VOLUME_DISMOUNTED",
            NtStatus::ENCRYPTION_FAILED => "STATUS_ENCRYPTION_FAILED",
            NtStatus::DECRYPTION_FAILED => "STATUS_DECRYPTION_FAILED",
            NtStatus::SERVER_UNAVAILABLE => "STATUS_SERVER_UNAVAILABLE",
            NtStatus::HASH_NOT_PRESENT => "STATUS_HASH_NOT_PRESENT",
            NtStatus::OBJECT_NOT_EXTERNALLY_BACKED => "STATUS_OBJECT_NOT_EXTERNALLY_BACKED",
            NtStatus::INVALID_USER_BUFFER => "STATUS_INVALID_USER_BUFFER",
            NtStatus::REQUEST_OUT_OF_SEQUENCE => "STATUS_REQUEST_OUT_OF_SEQUENCE",
            NtStatus::FILE_SYSTEM_LIMITATION => "STATUS_FILE_SYSTEM_LIMITATION",
            NtStatus::DIRECTORY_IS_A_REPARSE_POINT => "STATUS_DIRECTORY_IS_A_REPARSE_POINT",
            NtStatus::SHARING_PAUSED => "STATUS_SHARING_PAUSED",
            NtStatus::USER_EXISTS => "STATUS_USER_EXISTS",
            NtStatus::EAS_NOT_SUPPORTED => "STATUS_EAS_NOT_SUPPORTED",
            _ => return None,
        })
    }
}

impl std::fmt::Debug for NtStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "NTSTATUS(0x{:08x})", self.0),
        }
    }
}

impl std::fmt::Display for NtStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for NtStatus {}

/// A request that does not decode fails with INVALID_PARAMETER, as [MS-SMB2] 3.3.5
/// asks of malformed lengths and offsets. What failed (the field, or the offset and
/// length that ran past the end) is logged at debug level.
impl From<crate::WireError> for NtStatus {
    fn from(e: crate::WireError) -> Self {
        tracing::debug!(error = %e, "malformed request");
        NtStatus::INVALID_PARAMETER
    }
}

impl NtStatus {
    /// For a request part whose decode failure has its own status (a security
    /// descriptor, a name, a create context): the conversion of the decoder's error
    /// to `status`, logging what failed at debug level as the `From<WireError>`
    /// conversion does. Use as
    /// `.map_err(NtStatus::malformed(NtStatus::INVALID_SECURITY_DESCR))`.
    pub fn malformed<E: std::fmt::Display>(status: NtStatus) -> impl Fn(E) -> NtStatus {
        move |e| {
            tracing::debug!(error = %e, status = %status, "malformed request");
            status
        }
    }
}

impl From<std::io::Error> for NtStatus {
    fn from(e: std::io::Error) -> Self {
        NtStatus::from_errno(e.raw_os_error().unwrap_or(0))
    }
}

impl NtStatus {
    /// Maps a Linux errno to the status a Windows server would return.
    pub fn from_errno(errno: i32) -> NtStatus {
        match errno {
            1 | 13 => NtStatus::ACCESS_DENIED,          // EPERM, EACCES
            2 => NtStatus::OBJECT_NAME_NOT_FOUND,       // ENOENT
            9 => NtStatus::INVALID_HANDLE,              // EBADF
            12 => NtStatus::NO_MEMORY,                  // ENOMEM
            16 => NtStatus::SHARING_VIOLATION,          // EBUSY
            17 => NtStatus::OBJECT_NAME_COLLISION,      // EEXIST
            18 => NtStatus::NOT_SAME_DEVICE,            // EXDEV
            20 => NtStatus::NOT_A_DIRECTORY,            // ENOTDIR
            21 => NtStatus::FILE_IS_A_DIRECTORY,        // EISDIR
            22 => NtStatus::INVALID_PARAMETER,          // EINVAL
            23 | 24 => NtStatus::TOO_MANY_OPENED_FILES, // ENFILE, EMFILE
            27 => NtStatus::DISK_FULL,                  // EFBIG
            28 | 122 => NtStatus::DISK_FULL,            // ENOSPC, EDQUOT
            30 => NtStatus::MEDIA_WRITE_PROTECTED,      // EROFS
            36 => NtStatus::NAME_TOO_LONG,              // ENAMETOOLONG
            39 => NtStatus::DIRECTORY_NOT_EMPTY,        // ENOTEMPTY
            40 => NtStatus::STOPPED_ON_SYMLINK,         // ELOOP
            61 | 95 => NtStatus::NOT_SUPPORTED,         // ENODATA, EOPNOTSUPP
            _ => NtStatus::UNSUCCESSFUL,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_that_does_not_decode_is_invalid_parameter() {
        let short = crate::Reader::new(&[1, 2]).u32().unwrap_err();
        assert_eq!(NtStatus::from(short), NtStatus::INVALID_PARAMETER);
        fn decode() -> Result<u8, crate::WireError> {
            Err(crate::WireError::Invalid("StructureSize"))
        }
        fn handler() -> Result<u8, NtStatus> {
            Ok(decode()?)
        }
        assert_eq!(handler(), Err(NtStatus::INVALID_PARAMETER));
    }

    #[test]
    fn names_and_severity() {
        assert_eq!(NtStatus::ACCESS_DENIED.name(), Some("STATUS_ACCESS_DENIED"));
        assert!(NtStatus::PENDING.is_success());
        assert!(!NtStatus::BUFFER_OVERFLOW.is_error());
        assert!(NtStatus::LOGON_FAILURE.is_error());
        assert_eq!(
            format!("{:?}", NtStatus(0xC0FFEE00)),
            "NTSTATUS(0xc0ffee00)"
        );
    }
}
