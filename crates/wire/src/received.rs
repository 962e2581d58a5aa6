//! A received message in the buffer it arrived in.

/// A received SMB2 message (a lone message, a compound chain or a TRANSFORM) as the
/// bytes `buf[start..]` of the buffer it arrived in: what comes before `start`
/// (an SMB Direct data transfer header) is not part of it, and is not moved out of
/// the way. A Direct TCP frame starts at 0.
///
/// Two messages are equal when their bytes are, wherever they start.
#[derive(Debug, Clone, Default)]
pub struct InMessage {
    buf: Vec<u8>,
    start: usize,
}

impl InMessage {
    /// The message `buf[start..]`; `None` if `start` lies past the buffer's end.
    pub fn at(buf: Vec<u8>, start: usize) -> Option<Self> {
        (start <= buf.len()).then_some(InMessage { buf, start })
    }

    /// The message's bytes.
    pub fn bytes(&self) -> &[u8] {
        // `start <= buf.len()` always holds (checked when built).
        self.buf.get(self.start..).unwrap_or_default()
    }

    /// The message's bytes, to change in place (a signature checked in place).
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.buf.get_mut(self.start..).unwrap_or_default()
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.buf.len() - self.start
    }

    /// True for an empty message.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where the message starts in its buffer.
    pub fn start(&self) -> usize {
        self.start
    }

    /// The buffer and where the message starts in it.
    pub fn into_parts(self) -> (Vec<u8>, usize) {
        (self.buf, self.start)
    }

    /// The message as a buffer of its own bytes: the bytes before it are moved out
    /// (a memmove of the message) only if there are any.
    pub fn into_vec(self) -> Vec<u8> {
        let mut buf = self.buf;
        if self.start > 0 {
            buf.drain(..self.start);
        }
        buf
    }
}

impl From<Vec<u8>> for InMessage {
    /// The whole buffer is the message.
    fn from(buf: Vec<u8>) -> Self {
        InMessage { buf, start: 0 }
    }
}

impl std::ops::Deref for InMessage {
    type Target = [u8];

    /// The message's bytes (as [`InMessage::bytes`]).
    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}

impl std::ops::DerefMut for InMessage {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.bytes_mut()
    }
}

impl PartialEq for InMessage {
    fn eq(&self, other: &Self) -> bool {
        self.bytes() == other.bytes()
    }
}

impl Eq for InMessage {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_start_where_told() {
        let m = InMessage::at(b"hdr.message".to_vec(), 4).unwrap();
        assert_eq!(m.bytes(), b"message");
        assert_eq!(&m[..3], b"mes");
        assert_eq!(m.len(), 7);
        assert_eq!(m.start(), 4);
        assert_eq!(m, InMessage::from(b"message".to_vec()));
        assert_ne!(m, InMessage::from(b"hdr.message".to_vec()));
        assert_eq!(m.clone().into_vec(), b"message");
        assert_eq!(m.into_parts(), (b"hdr.message".to_vec(), 4));
        let mut e = InMessage::at(b"abc".to_vec(), 3).unwrap();
        assert!(e.is_empty());
        assert!(e.bytes_mut().is_empty());
        assert!(InMessage::at(b"abc".to_vec(), 4).is_none());
    }
}
