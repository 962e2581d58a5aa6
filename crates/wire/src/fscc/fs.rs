//! File system information classes for QUERY_INFO ([MS-FSCC] 2.5).

use crate::codec::{utf16le, Writer};
use crate::flags::bit_flags;

/// FileFsVolumeInformation.
pub const FILE_FS_VOLUME_INFORMATION: u8 = 1;
/// FileFsLabelInformation (set only).
pub const FILE_FS_LABEL_INFORMATION: u8 = 2;
/// FileFsSizeInformation.
pub const FILE_FS_SIZE_INFORMATION: u8 = 3;
/// FileFsDeviceInformation.
pub const FILE_FS_DEVICE_INFORMATION: u8 = 4;
/// FileFsAttributeInformation.
pub const FILE_FS_ATTRIBUTE_INFORMATION: u8 = 5;
/// FileFsControlInformation.
pub const FILE_FS_CONTROL_INFORMATION: u8 = 6;
/// FileFsFullSizeInformation.
pub const FILE_FS_FULL_SIZE_INFORMATION: u8 = 7;
/// FileFsObjectIdInformation.
pub const FILE_FS_OBJECT_ID_INFORMATION: u8 = 8;
/// FileFsSectorSizeInformation.
pub const FILE_FS_SECTOR_SIZE_INFORMATION: u8 = 11;

/// FILE_DEVICE_DISK.
pub const FILE_DEVICE_DISK: u32 = 0x0000_0007;
/// FILE_DEVICE_IS_MOUNTED characteristic.
pub const FILE_DEVICE_IS_MOUNTED: u32 = 0x0000_0020;
bit_flags! {
    /// FileSystemAttributes of FileFsAttributeInformation ([MS-FSCC] 2.5.1).
    pub struct FileSystemAttributes;
    /// FILE_CASE_SENSITIVE_SEARCH.
    const FILE_CASE_SENSITIVE_SEARCH = 0x0000_0001;
    /// FILE_CASE_PRESERVED_NAMES.
    const FILE_CASE_PRESERVED_NAMES = 0x0000_0002;
    /// FILE_UNICODE_ON_DISK.
    const FILE_UNICODE_ON_DISK = 0x0000_0004;
    /// FILE_PERSISTENT_ACLS.
    const FILE_PERSISTENT_ACLS = 0x0000_0008;
    /// FILE_SUPPORTS_SPARSE_FILES.
    const FILE_SUPPORTS_SPARSE_FILES = 0x0000_0040;
    /// FILE_NAMED_STREAMS.
    const FILE_NAMED_STREAMS = 0x0004_0000;
    /// FILE_READ_ONLY_VOLUME.
    const FILE_READ_ONLY_VOLUME = 0x0008_0000;
    /// FILE_SUPPORTS_HARD_LINKS.
    const FILE_SUPPORTS_HARD_LINKS = 0x0040_0000;
    /// FILE_SUPPORTS_EXTENDED_ATTRIBUTES.
    const FILE_SUPPORTS_EXTENDED_ATTRIBUTES = 0x0080_0000;
}

/// The minimum OutputBufferLength of each class (Windows: the C `sizeof`, so the
/// variable-length volume and attribute structures count padding: 24 and 16).
pub fn min_size(class: u8) -> Option<usize> {
    Some(match class {
        FILE_FS_VOLUME_INFORMATION => 24,
        FILE_FS_SIZE_INFORMATION => 24,
        FILE_FS_DEVICE_INFORMATION => 8,
        FILE_FS_ATTRIBUTE_INFORMATION => 16,
        FILE_FS_CONTROL_INFORMATION => 48,
        FILE_FS_FULL_SIZE_INFORMATION => 32,
        FILE_FS_OBJECT_ID_INFORMATION => 64,
        FILE_FS_SECTOR_SIZE_INFORMATION => 28,
        _ => return None,
    })
}

/// FileFsVolumeInformation.
pub fn volume(creation_time: u64, serial: u32, label: &str, supports_objects: bool) -> Vec<u8> {
    let l = utf16le(label);
    let mut w = Writer::with_capacity(18 + l.len());
    w.u64(creation_time)
        .u32(serial)
        .u32(l.len() as u32)
        .u8(supports_objects as u8)
        .u8(0)
        .bytes(&l);
    w.into_vec()
}

/// FileFsSizeInformation.
pub fn size(
    total_units: u64,
    available_units: u64,
    sectors_per_unit: u32,
    bytes_per_sector: u32,
) -> Vec<u8> {
    let mut w = Writer::with_capacity(24);
    w.u64(total_units)
        .u64(available_units)
        .u32(sectors_per_unit)
        .u32(bytes_per_sector);
    w.into_vec()
}

/// FileFsFullSizeInformation.
pub fn full_size(
    total_units: u64,
    caller_available_units: u64,
    actual_available_units: u64,
    sectors_per_unit: u32,
    bytes_per_sector: u32,
) -> Vec<u8> {
    let mut w = Writer::with_capacity(32);
    w.u64(total_units)
        .u64(caller_available_units)
        .u64(actual_available_units)
        .u32(sectors_per_unit)
        .u32(bytes_per_sector);
    w.into_vec()
}

/// FileFsDeviceInformation.
pub fn device(device_type: u32, characteristics: u32) -> Vec<u8> {
    let mut w = Writer::with_capacity(8);
    w.u32(device_type).u32(characteristics);
    w.into_vec()
}

/// FileFsAttributeInformation.
pub fn attribute(
    attributes: FileSystemAttributes,
    max_component_len: u32,
    fs_name: &str,
) -> Vec<u8> {
    let n = utf16le(fs_name);
    let mut w = Writer::with_capacity(12 + n.len());
    w.u32(attributes.bits())
        .u32(max_component_len)
        .u32(n.len() as u32)
        .bytes(&n);
    w.into_vec()
}

/// FileFsControlInformation with quotas disabled and no limits.
pub fn control() -> Vec<u8> {
    let mut w = Writer::with_capacity(48);
    w.u64(0)
        .u64(0)
        .u64(0)
        .u64(u64::MAX)
        .u64(u64::MAX)
        .u32(0)
        .u32(0);
    w.into_vec()
}

/// FileFsObjectIdInformation: the volume object id and zeroed extended info.
pub fn object_id(id: &[u8; 16]) -> Vec<u8> {
    let mut w = Writer::with_capacity(64);
    w.bytes(id).zeros(48);
    w.into_vec()
}

/// SSINFO_FLAGS_ALIGNED_DEVICE.
pub const SSINFO_FLAGS_ALIGNED_DEVICE: u32 = 0x0000_0001;
/// SSINFO_FLAGS_PARTITION_ALIGNED_ON_DEVICE.
pub const SSINFO_FLAGS_PARTITION_ALIGNED_ON_DEVICE: u32 = 0x0000_0002;

/// FileFsSectorSizeInformation for a device with `sector` byte sectors, aligned.
pub fn sector_size(sector: u32) -> Vec<u8> {
    let mut w = Writer::with_capacity(28);
    w.u32(sector)
        .u32(sector)
        .u32(sector)
        .u32(sector)
        .u32(SSINFO_FLAGS_ALIGNED_DEVICE | SSINFO_FLAGS_PARTITION_ALIGNED_ON_DEVICE)
        .u32(0)
        .u32(0);
    w.into_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(volume(1, 2, "", false).len(), 18);
        assert_eq!(volume(1, 2, "ab", false).len(), 22);
        assert_eq!(size(1, 2, 3, 4).len(), 24);
        assert_eq!(full_size(1, 2, 3, 4, 5).len(), 32);
        assert_eq!(device(7, 0).len(), 8);
        let a = attribute(FileSystemAttributes(3), 255, "NTFS");
        assert_eq!(a.len(), 20);
        assert_eq!(&a[8..12], &[8, 0, 0, 0]);
        assert_eq!(control().len(), 48);
        assert_eq!(object_id(&[1; 16]).len(), 64);
        assert_eq!(sector_size(512).len(), 28);
        for c in [1u8, 3, 4, 5, 6, 7, 8, 11] {
            assert!(min_size(c).is_some());
        }
        assert!(min_size(2).is_none());
    }
}
