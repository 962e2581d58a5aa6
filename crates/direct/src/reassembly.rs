//! Reassembly of fragmented upper-layer messages ([MS-SMBD] 3.1.5.7) and
//! the matching split on the send side.
//!
//! MS-SMBD fragments carry no offsets: each says how many bytes of the
//! upper-layer message follow it (RemainingDataLength). The first fragment
//! fixes the total (DataLength + RemainingDataLength), which must not exceed
//! the receiver's maximum; every later fragment must satisfy
//! `RemainingDataLength == previous RemainingDataLength − DataLength`.
//! Anything else — a fragment claiming more than is outstanding, a new
//! message starting over an unfinished one — is an error and the connection
//! is dropped.

use smbx_wire::InMessage;
use thiserror::Error;

/// Why a fragment was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReassemblyError {
    /// The message would exceed the maximum fragmented receive size.
    #[error("fragmented message of {total} bytes exceeds maximum {max}")]
    TooLarge {
        /// DataLength + RemainingDataLength of the first fragment.
        total: u64,
        /// The limit.
        max: u32,
    },
    /// The fragment does not continue the message in progress.
    #[error(
        "inconsistent fragment: {outstanding} bytes outstanding, got {data_length} with {remaining} remaining"
    )]
    Inconsistent {
        /// Bytes the message in progress still expects.
        outstanding: u32,
        /// DataLength of the offending fragment.
        data_length: u32,
        /// RemainingDataLength of the offending fragment.
        remaining: u32,
    },
}

/// Collects fragments into whole upper-layer messages.
#[derive(Debug)]
pub struct Reassembler {
    max: u32,
    buf: Vec<u8>,
    /// Bytes still expected for the message in progress (None: idle).
    outstanding: Option<u32>,
}

/// Initial reservation for a message in progress; the buffer grows as
/// fragments arrive, so a first fragment that merely claims a large total
/// does not make us allocate it.
const INITIAL_RESERVE: usize = 64 * 1024;

impl Reassembler {
    /// A reassembler that accepts messages of at most `max` bytes.
    pub fn new(max: u32) -> Self {
        Reassembler {
            max,
            buf: Vec::new(),
            outstanding: None,
        }
    }

    /// True while a fragmented message is incomplete.
    pub fn in_progress(&self) -> bool {
        self.outstanding.is_some()
    }

    /// [`Reassembler::push`] of the fragment `buf[payload]` received into a
    /// buffer of its own: a message of one fragment is `buf` itself, starting at
    /// the payload (the bytes before it stay, those after are cut off: nothing is
    /// moved). The fragments of a longer message are copied as by `push` into a
    /// buffer of the message's size (growing `buf` to it would copy it once more).
    /// The same checks and errors as `push`.
    pub fn push_owned(
        &mut self,
        remaining: u32,
        mut buf: Vec<u8>,
        payload: std::ops::Range<usize>,
    ) -> Result<Option<InMessage>, ReassemblyError> {
        if remaining != 0
            || self.outstanding.is_some()
            || payload.end > buf.len()
            || payload.start > payload.end
        {
            let m = self.push(remaining, buf.get(payload).unwrap_or_default())?;
            return Ok(m.map(InMessage::from));
        }
        // A whole message in one fragment: the same check as push's.
        let total = payload.len() as u64;
        if total > u64::from(self.max) {
            return Err(ReassemblyError::TooLarge {
                total,
                max: self.max,
            });
        }
        buf.truncate(payload.end);
        Ok(InMessage::at(buf, payload.start))
    }

    /// Adds one fragment with a non-empty payload. Returns the whole message
    /// when this fragment completes it.
    pub fn push(
        &mut self,
        remaining: u32,
        data: &[u8],
    ) -> Result<Option<Vec<u8>>, ReassemblyError> {
        let data_length = u32::try_from(data.len()).map_err(|_| ReassemblyError::TooLarge {
            total: data.len() as u64,
            max: self.max,
        })?;
        match self.outstanding {
            None => {
                let total = u64::from(data_length) + u64::from(remaining);
                if total > u64::from(self.max) {
                    return Err(ReassemblyError::TooLarge {
                        total,
                        max: self.max,
                    });
                }
                if remaining == 0 {
                    return Ok(Some(data.to_vec()));
                }
                self.buf = Vec::with_capacity((total as usize).min(INITIAL_RESERVE));
                self.buf.extend_from_slice(data);
                self.outstanding = Some(remaining);
                Ok(None)
            }
            Some(outstanding) => {
                if data_length > outstanding || remaining != outstanding - data_length {
                    return Err(ReassemblyError::Inconsistent {
                        outstanding,
                        data_length,
                        remaining,
                    });
                }
                self.buf.extend_from_slice(data);
                if remaining == 0 {
                    self.outstanding = None;
                    Ok(Some(std::mem::take(&mut self.buf)))
                } else {
                    self.outstanding = Some(remaining);
                    Ok(None)
                }
            }
        }
    }
}

/// Splits `len` bytes into fragments of at most `max_payload` bytes and
/// returns `(offset, length, remaining_after)` for each, in order.
pub fn fragments(len: usize, max_payload: usize) -> impl Iterator<Item = (usize, usize, usize)> {
    let step = max_payload.max(1);
    (0..len).step_by(step).map(move |off| {
        let n = step.min(len - off);
        (off, n, len - off - n)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_sizes() {
        let v: Vec<_> = fragments(10, 4).collect();
        assert_eq!(v, vec![(0, 4, 6), (4, 4, 2), (8, 2, 0)]);
        assert_eq!(fragments(0, 4).count(), 0);
        assert_eq!(fragments(4, 4).collect::<Vec<_>>(), vec![(0, 4, 0)]);
    }

    #[test]
    fn reassemble_and_reject() {
        let mut r = Reassembler::new(16);
        assert_eq!(r.push(4, b"abcd").unwrap(), None);
        assert!(r.in_progress());
        assert_eq!(r.push(0, b"efgh").unwrap(), Some(b"abcdefgh".to_vec()));
        assert!(!r.in_progress());
        // too large
        assert!(matches!(
            r.push(13, b"abcd"),
            Err(ReassemblyError::TooLarge { total: 17, .. })
        ));
        // overlapping: claims more than outstanding
        r.push(4, b"ab").unwrap();
        assert!(matches!(
            r.push(0, b"abcdef"),
            Err(ReassemblyError::Inconsistent { .. })
        ));
        // remaining not decreasing by data length
        let mut r = Reassembler::new(16);
        r.push(6, b"ab").unwrap();
        assert!(matches!(
            r.push(3, b"ab"),
            Err(ReassemblyError::Inconsistent { .. })
        ));
    }
}
