//! Bounds-checked little-endian readers and writers.

use thiserror::Error;

/// A decoding failure: the input was too short or a field was out of range.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// The buffer ended before the field did.
    #[error("truncated input: needed {needed} bytes at offset {offset}")]
    Truncated {
        /// Where the field starts.
        offset: usize,
        /// Its length in bytes.
        needed: usize,
    },
    /// A length, offset or value was not acceptable.
    #[error("invalid field: {0}")]
    Invalid(&'static str),
}

/// A cursor over a byte slice that never reads past its end.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Starts reading at the beginning of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    /// The current offset from the start of the buffer.
    pub fn pos(&self) -> usize {
        self.pos
    }
    /// Bytes left to read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    /// The whole underlying buffer.
    pub fn buffer(&self) -> &'a [u8] {
        self.buf
    }
    /// Moves to an absolute offset (which may equal the buffer length).
    pub fn seek(&mut self, pos: usize) -> Result<(), WireError> {
        if pos > self.buf.len() {
            return Err(WireError::Truncated {
                offset: pos,
                needed: 0,
            });
        }
        self.pos = pos;
        Ok(())
    }
    /// Skips `n` bytes.
    pub fn skip(&mut self, n: usize) -> Result<(), WireError> {
        self.bytes(n).map(|_| ())
    }
    /// Reads `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or(WireError::Truncated {
                offset: self.pos,
                needed: n,
            })?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    /// Reads a fixed-size array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }
    /// Reads one byte.
    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.bytes(1)?[0])
    }
    /// Reads a little-endian u16.
    pub fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    /// Reads a little-endian u32.
    pub fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    /// Reads a little-endian u64.
    pub fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    /// Reads a 16-byte GUID as raw bytes.
    pub fn guid(&mut self) -> Result<[u8; 16], WireError> {
        self.array()
    }
}

/// Returns `buf[offset..offset+len]`, or an error if that range is outside `buf`.
pub fn slice_at(buf: &[u8], offset: usize, len: usize) -> Result<&[u8], WireError> {
    let end = offset
        .checked_add(len)
        .filter(|&e| e <= buf.len())
        .ok_or(WireError::Truncated {
            offset,
            needed: len,
        })?;
    Ok(&buf[offset..end])
}

/// A growable little-endian writer.
#[derive(Debug, Default, Clone)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Writer { buf: Vec::new() }
    }
    /// An empty writer with room for `n` bytes.
    pub fn with_capacity(n: usize) -> Self {
        Writer {
            buf: Vec::with_capacity(n),
        }
    }
    /// A writer appending to `buf` after clearing it: its capacity is reused.
    pub fn from_vec(mut buf: Vec<u8>) -> Self {
        buf.clear();
        Writer { buf }
    }
    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    /// True if nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    /// Appends one byte.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }
    /// Appends a little-endian u16.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Appends a little-endian u32.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Appends a little-endian u64.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Appends raw bytes.
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self
    }
    /// Appends `n` zero bytes.
    pub fn zeros(&mut self, n: usize) -> &mut Self {
        self.buf.resize(self.buf.len() + n, 0);
        self
    }
    /// Pads with zeros to a multiple of `align` bytes.
    pub fn align(&mut self, align: usize) -> &mut Self {
        let rem = self.buf.len() % align;
        if rem != 0 {
            self.zeros(align - rem);
        }
        self
    }
    /// Overwrites a u16 written earlier at `pos`.
    pub fn patch_u16(&mut self, pos: usize, v: u16) {
        self.buf[pos..pos + 2].copy_from_slice(&v.to_le_bytes());
    }
    /// Overwrites a u32 written earlier at `pos`.
    pub fn patch_u32(&mut self, pos: usize, v: u32) {
        self.buf[pos..pos + 4].copy_from_slice(&v.to_le_bytes());
    }
    /// Appends a string as UTF-16LE without terminator.
    pub fn utf16(&mut self, s: &str) -> &mut Self {
        for u in s.encode_utf16() {
            self.u16(u);
        }
        self
    }
    /// The bytes written.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf
    }
    /// Consumes the writer and returns its bytes.
    pub fn into_vec(self) -> Vec<u8> {
        self.buf
    }
}

/// Encodes a string as UTF-16LE bytes.
pub fn utf16le(s: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(s.len() * 2);
    for u in s.encode_utf16() {
        v.extend_from_slice(&u.to_le_bytes());
    }
    v
}

/// Decodes UTF-16LE bytes; odd lengths and unpaired surrogates are errors.
pub fn from_utf16le(b: &[u8]) -> Result<String, WireError> {
    if !b.len().is_multiple_of(2) {
        return Err(WireError::Invalid("odd UTF-16 length"));
    }
    let units: Vec<u16> = b
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    String::from_utf16(&units).map_err(|_| WireError::Invalid("bad UTF-16"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_refuses_overrun() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.u16().unwrap(), 0x0201);
        assert!(r.u16().is_err());
        assert_eq!(r.u8().unwrap(), 3);
        assert!(r.u8().is_err());
        assert!(slice_at(&[0; 4], usize::MAX, 2).is_err());
    }

    #[test]
    fn utf16_round_trip() {
        let b = utf16le("héllo\u{1F600}");
        assert_eq!(from_utf16le(&b).unwrap(), "héllo\u{1F600}");
        assert!(from_utf16le(&[0x41]).is_err());
    }
}
