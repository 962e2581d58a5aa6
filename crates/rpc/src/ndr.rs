//! Little-endian NDR 2.0 marshalling for the few constructs srvsvc/wkssvc use:
//! primitives with natural alignment, unique pointers (referent ids), conformant varying
//! `[string]` wide strings, and conformant arrays of flat structs with deferred strings.
//!
//! Offsets are relative to the start of the stub data, which the PDU layer keeps 8-aligned.

use smbx_wire::codec::{from_utf16le, Reader};

/// A stub that does not unmarshal; answered with `nca_s_fault_ndr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NdrError;

impl From<smbx_wire::WireError> for NdrError {
    fn from(_: smbx_wire::WireError) -> Self {
        NdrError
    }
}

/// Reads NDR from a request stub.
pub(crate) struct NdrReader<'a> {
    r: Reader<'a>,
}

impl<'a> NdrReader<'a> {
    pub(crate) fn new(stub: &'a [u8]) -> Self {
        NdrReader {
            r: Reader::new(stub),
        }
    }

    fn align(&mut self, n: usize) -> Result<(), NdrError> {
        let rem = self.r.pos() % n;
        if rem != 0 {
            self.r.skip(n - rem)?;
        }
        Ok(())
    }

    /// An aligned little-endian u32.
    pub(crate) fn u32(&mut self) -> Result<u32, NdrError> {
        self.align(4)?;
        Ok(self.r.u32()?)
    }

    /// A pointer's referent id (0 = null).
    pub(crate) fn ptr(&mut self) -> Result<u32, NdrError> {
        self.u32()
    }

    /// A conformant varying `[string] wchar_t*` body; the terminating NUL is removed.
    pub(crate) fn string(&mut self) -> Result<String, NdrError> {
        let max = self.u32()?;
        let offset = self.u32()?;
        let actual = self.u32()?;
        if offset != 0 || actual > max {
            return Err(NdrError);
        }
        let nbytes = usize::try_from(actual)
            .ok()
            .and_then(|a| a.checked_mul(2))
            .ok_or(NdrError)?;
        let raw = self.r.bytes(nbytes)?;
        // Like the C string it models, the value ends at the first NUL (clients such as
        // impacket send several).
        let end = raw
            .chunks_exact(2)
            .position(|c| c == [0, 0])
            .map_or(raw.len(), |i| i * 2);
        Ok(from_utf16le(raw.get(..end).unwrap_or_default())?)
    }

    /// A `[unique, string] wchar_t*`: referent id followed by the string if non-null.
    pub(crate) fn unique_string(&mut self) -> Result<Option<String>, NdrError> {
        if self.ptr()? == 0 {
            Ok(None)
        } else {
            self.string().map(Some)
        }
    }

    /// Skips a conformant array of `fields`-sized flat structs (all 4-byte members) whose
    /// members flagged in `is_string_ptr` are `[string] wchar_t*`, plus their deferred strings.
    pub(crate) fn skip_string_struct_array(
        &mut self,
        is_string_ptr: &[bool],
    ) -> Result<(), NdrError> {
        let count = self.u32()?;
        let count = usize::try_from(count).map_err(|_| NdrError)?;
        let row = is_string_ptr.len().checked_mul(4).ok_or(NdrError)?;
        if count.checked_mul(row).ok_or(NdrError)? > self.r.remaining() {
            return Err(NdrError);
        }
        let mut deferred = 0usize;
        for _ in 0..count {
            for &is_ptr in is_string_ptr {
                let v = self.u32()?;
                if is_ptr && v != 0 {
                    deferred += 1;
                }
            }
        }
        for _ in 0..deferred {
            self.string()?;
        }
        Ok(())
    }
}

/// One member of a flat struct being marshalled.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Field<'a> {
    /// A DWORD.
    U32(u32),
    /// A non-null `[string] wchar_t*`.
    Str(&'a str),
    /// A null pointer.
    Null,
}

/// Builds a response stub.
pub(crate) struct NdrWriter {
    buf: Vec<u8>,
    next_referent: u32,
}

impl NdrWriter {
    pub(crate) fn new() -> Self {
        NdrWriter {
            buf: Vec::new(),
            next_referent: 0x0002_0000,
        }
    }

    fn align(&mut self, n: usize) {
        while !self.buf.len().is_multiple_of(n) {
            self.buf.push(0);
        }
    }

    /// An aligned little-endian u32.
    pub(crate) fn u32(&mut self, v: u32) {
        self.align(4);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// A pointer: a fresh referent id if `non_null`, else 0.
    pub(crate) fn ptr(&mut self, non_null: bool) {
        if non_null {
            let id = self.next_referent;
            self.next_referent = self.next_referent.wrapping_add(4);
            self.u32(id);
        } else {
            self.u32(0);
        }
    }

    /// A conformant varying wide string body, NUL-terminated.
    pub(crate) fn string(&mut self, s: &str) {
        let units: Vec<u16> = s.encode_utf16().chain(std::iter::once(0)).collect();
        // Share names and remarks come from configuration; clamp rather than overflow.
        let n = u32::try_from(units.len()).unwrap_or(u32::MAX);
        self.u32(n);
        self.u32(0);
        self.u32(n);
        for u in units {
            self.buf.extend_from_slice(&u.to_le_bytes());
        }
    }

    fn scalars(&mut self, row: &[Field<'_>]) {
        for f in row {
            match *f {
                Field::U32(v) => self.u32(v),
                Field::Str(_) => self.ptr(true),
                Field::Null => self.ptr(false),
            }
        }
    }

    fn deferred(&mut self, row: &[Field<'_>]) {
        for f in row {
            if let Field::Str(s) = *f {
                self.string(s);
            }
        }
    }

    /// A flat struct: its members, then the strings its pointers refer to.
    pub(crate) fn record(&mut self, row: &[Field<'_>]) {
        self.scalars(row);
        self.deferred(row);
    }

    /// A conformant array of flat structs: count, every element's members, then every
    /// element's strings in element order.
    pub(crate) fn record_array(&mut self, rows: &[Vec<Field<'_>>]) {
        self.u32(u32::try_from(rows.len()).unwrap_or(u32::MAX));
        for row in rows {
            self.scalars(row);
        }
        for row in rows {
            self.deferred(row);
        }
    }

    /// The marshalled stub.
    pub(crate) fn finish(self) -> Vec<u8> {
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_layout() {
        let mut w = NdrWriter::new();
        w.u32(7);
        w.string("ab");
        w.u32(9);
        let b = w.finish();
        assert_eq!(
            b,
            [
                7, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, b'a', 0, b'b', 0, 0, 0, 0, 0, 9, 0,
                0, 0
            ]
        );
        let mut r = NdrReader::new(&b);
        assert_eq!(r.u32().unwrap(), 7);
        assert_eq!(r.string().unwrap(), "ab");
        assert_eq!(r.u32().unwrap(), 9);
    }

    #[test]
    fn string_ends_at_first_nul() {
        let b = [3, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, b'a', 0, 0, 0, 0, 0];
        assert_eq!(NdrReader::new(&b).string().unwrap(), "a");
        let b = [1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, b'a', 0];
        assert_eq!(NdrReader::new(&b).string().unwrap(), "a");
    }

    #[test]
    fn string_rejects_bad_counts() {
        // actual > max
        let b = [1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, b'a', 0, 0, 0];
        assert!(NdrReader::new(&b).string().is_err());
        // huge actual count, short buffer
        let b = [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff];
        assert!(NdrReader::new(&b).string().is_err());
    }

    #[test]
    fn array_skip_refuses_huge_count() {
        let b = [0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0];
        assert!(NdrReader::new(&b)
            .skip_string_struct_array(&[true, false, true])
            .is_err());
    }
}
