//! Extended attribute lists ([MS-FSCC] 2.4.15 FILE_FULL_EA_INFORMATION, 2.4.15.1
//! FILE_GET_EA_INFORMATION).
//!
//! A FILE_FULL_EA_INFORMATION entry is NextEntryOffset (u32), Flags (u8), EaNameLength
//! (u8), EaValueLength (u16), the ASCII name with a terminating NUL, then the value;
//! entries start on 4-byte boundaries.

use super::align_up;
use crate::codec::{Reader, WireError, Writer};

/// FILE_NEED_EA flag.
pub const FILE_NEED_EA: u8 = 0x80;

/// One EA as carried on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullEa {
    /// Flags (FILE_NEED_EA or 0).
    pub flags: u8,
    /// EaName as sent (at most 255 bytes, without the terminating NUL). Which names
    /// are acceptable is the receiver's to say (see
    /// [`crate::set_info::validate_ea_name`]).
    pub name: Vec<u8>,
    /// EaValue (at most 65535 bytes; empty deletes the EA when set).
    pub value: Vec<u8>,
}

/// Why a FILE_FULL_EA_INFORMATION list did not decode: which entry, where it starts
/// in the buffer, and what was wrong with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("FILE_FULL_EA_INFORMATION entry {index} at offset {offset}: {what}")]
pub struct EaListError {
    /// The entry's position in the list (0-based).
    pub index: usize,
    /// Its offset from the start of the buffer.
    pub offset: usize,
    /// What failed.
    pub what: &'static str,
}

/// Unpadded size of one FILE_FULL_EA_INFORMATION entry.
pub fn entry_size(name_len: usize, value_len: usize) -> usize {
    8usize
        .saturating_add(name_len)
        .saturating_add(1)
        .saturating_add(value_len)
}

/// FileEaInformation.EaSize for a set of EAs: the size of their
/// FILE_FULL_EA_INFORMATION list with every entry padded to 4 bytes.
pub fn ea_list_size<'a>(eas: impl IntoIterator<Item = (&'a str, usize)>) -> u32 {
    let total = eas.into_iter().fold(0usize, |acc, (n, v)| {
        acc.saturating_add(align_up(entry_size(n.len(), v), 4))
    });
    u32::try_from(total).unwrap_or(u32::MAX)
}

/// Encodes one entry (no padding, NextEntryOffset 0). Names longer than 255 bytes or
/// values longer than 65535 bytes are truncated to fit their length fields.
pub fn encode_entry(flags: u8, name: &str, value: &[u8]) -> Vec<u8> {
    encode_entry_bytes(flags, name.as_bytes(), value)
}

/// [`encode_entry`] for a name given as bytes.
fn encode_entry_bytes(flags: u8, name: &[u8], value: &[u8]) -> Vec<u8> {
    let name = &name[..name.len().min(255)];
    let value = &value[..value.len().min(65535)];
    let mut w = Writer::with_capacity(entry_size(name.len(), value.len()));
    w.u32(0)
        .u8(flags)
        .u8(name.len() as u8)
        .u16(value.len() as u16)
        .bytes(name)
        .u8(0)
        .bytes(value);
    w.into_vec()
}

/// Builds a FILE_FULL_EA_INFORMATION list from encoded entries (see [`encode_entry`]),
/// chaining them with 4-byte aligned NextEntryOffsets.
pub fn chain(entries: &[Vec<u8>]) -> Vec<u8> {
    let mut w = Writer::new();
    let mut last: Option<usize> = None;
    for e in entries {
        if let Some(p) = last {
            let start = align_up(w.len(), 4);
            w.zeros(start - w.len());
            w.patch_u32(p, (start - p) as u32);
        }
        last = Some(w.len());
        w.bytes(e);
    }
    w.into_vec()
}

/// Encodes a FILE_FULL_EA_INFORMATION list (entries padded to 4 bytes).
pub fn encode_full_list(eas: &[FullEa]) -> Vec<u8> {
    let entries: Vec<Vec<u8>> = eas
        .iter()
        .map(|e| encode_entry_bytes(e.flags, &e.name, &e.value))
        .collect();
    chain(&entries)
}

/// Decodes a FILE_FULL_EA_INFORMATION list (SET_INFO, the CREATE `ExtA` context).
/// Every entry must fit the buffer and have a NUL after its name; every
/// NextEntryOffset but the last must be a multiple of 4 covering its entry and point
/// inside the buffer. Entries are bounded by the buffer, so allocation is bounded by
/// its length. Names are returned as sent: the receiver validates them.
pub fn decode_full_list(buf: &[u8]) -> Result<Vec<FullEa>, EaListError> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    loop {
        let fail = |what| EaListError {
            index: out.len(),
            offset: pos,
            what,
        };
        let entry = buf.get(pos..).ok_or_else(|| fail("offset past the end"))?;
        let mut r = Reader::new(entry);
        let truncated = |_: WireError| fail("truncated");
        let next = r.u32().map_err(truncated)? as usize;
        let flags = r.u8().map_err(truncated)?;
        let name_len = r.u8().map_err(truncated)? as usize;
        let value_len = r.u16().map_err(truncated)? as usize;
        let name = r.bytes(name_len).map_err(truncated)?.to_vec();
        if r.u8().map_err(truncated)? != 0 {
            return Err(fail("EaName not NUL-terminated"));
        }
        let value = r.bytes(value_len).map_err(truncated)?.to_vec();
        let used = r.pos();
        if next != 0 && (!next.is_multiple_of(4) || next < used) {
            return Err(fail("NextEntryOffset unaligned or inside the entry"));
        }
        let following = pos.checked_add(next).filter(|&p| p < buf.len());
        if next != 0 && following.is_none() {
            return Err(fail("NextEntryOffset past the end"));
        }
        out.push(FullEa { flags, name, value });
        match following {
            Some(p) if next != 0 => pos = p,
            _ => return Ok(out),
        }
    }
}

/// Decodes a FILE_GET_EA_INFORMATION list (QUERY_INFO FileFullEaInformation input):
/// NextEntryOffset (u32), EaNameLength (u8), name bytes (+ NUL).
pub fn decode_get_list(buf: &[u8]) -> Result<Vec<String>, WireError> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    loop {
        let entry = buf
            .get(pos..)
            .ok_or(WireError::Invalid("EA name entry offset"))?;
        let mut r = Reader::new(entry);
        let next = r.u32()? as usize;
        let len = r.u8()? as usize;
        let name = r.bytes(len)?;
        if !name.is_ascii() || name.contains(&0) {
            return Err(WireError::Invalid("EA name not ASCII"));
        }
        out.push(String::from_utf8_lossy(name).into_owned());
        if next == 0 {
            return Ok(out);
        }
        if next < 5 {
            return Err(WireError::Invalid("EA name NextEntryOffset"));
        }
        pos = pos
            .checked_add(next)
            .filter(|&p| p < buf.len())
            .ok_or(WireError::Invalid("EA name NextEntryOffset past the end"))?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_round_trip() {
        let l = chain(&[
            encode_entry(0, "EAONE", b"VALUE1"),
            encode_entry(0x80, "B", b""),
        ]);
        // first entry 8 + 5 + 1 + 6 = 20 (aligned), second 8 + 1 + 1 = 10
        assert_eq!(u32::from_le_bytes(l[0..4].try_into().unwrap()), 20);
        assert_eq!(l.len(), 30);
        let d = decode_full_list(&l).unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].name, b"EAONE");
        assert_eq!(d[0].value, b"VALUE1");
        assert_eq!(d[1].flags, 0x80);
        assert_eq!(ea_list_size([("EAONE", 6), ("B", 0)]), 20 + 12);
    }

    #[test]
    fn full_hostile() {
        let l = chain(&[
            encode_entry(0, "EAONE", b"VALUE1"),
            encode_entry(0, "B", b"x"),
        ]);
        for n in 0..l.len() {
            assert!(decode_full_list(&l[..n]).is_err(), "{n}");
        }
        let mut bad = l.clone();
        bad[0] = 4; // NextEntryOffset inside the entry
        assert!(decode_full_list(&bad).is_err());
        let mut bad = l.clone();
        bad[0] = 0xfc;
        bad[1] = 0xff;
        bad[2] = 0xff;
        bad[3] = 0xff;
        assert!(decode_full_list(&bad).is_err());
        let mut bad = l.clone();
        bad[13] = 1; // name terminator
        assert_eq!(
            decode_full_list(&bad),
            Err(EaListError {
                index: 0,
                offset: 0,
                what: "EaName not NUL-terminated"
            })
        );
        // The second entry's failure names it and its offset.
        let mut bad = l.clone();
        bad[20 + 5] = 200; // EaNameLength past the end
        assert_eq!(
            decode_full_list(&bad),
            Err(EaListError {
                index: 1,
                offset: 20,
                what: "truncated"
            })
        );
        // A NextEntryOffset pointing back at itself cannot loop: it is inside the entry.
        let mut bad = l.clone();
        bad[0..4].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(decode_full_list(&bad).unwrap().len(), 1);
        assert_eq!(encode_full_list(&d_of(&l)), l);
    }

    fn d_of(l: &[u8]) -> Vec<FullEa> {
        decode_full_list(l).unwrap()
    }

    #[test]
    fn get_list() {
        let mut w = Writer::new();
        w.u32(12).u8(3).bytes(b"abc").u8(0).zeros(3);
        w.u32(0).u8(1).bytes(b"z").u8(0);
        let v = w.into_vec();
        assert_eq!(decode_get_list(&v).unwrap(), vec!["abc", "z"]);
        for n in 0..v.len() - 1 {
            let _ = decode_get_list(&v[..n]);
        }
        assert!(decode_get_list(&v[..5]).is_err());
        let mut bad = v.clone();
        bad[0] = 2;
        assert!(decode_get_list(&bad).is_err());
    }
}
