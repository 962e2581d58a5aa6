//! Compounded messages ([MS-SMB2] 3.2.4.1.4, 3.3.5.2.7): splitting a received chain
//! with every NextCommand checked, building one (each member padded to 8 bytes and
//! linked to the next), and the ids a related member takes from the one before it.
//!
//! Both ends use the same code: the server splits requests and builds responses,
//! the client builds requests and splits responses.

use std::ops::Range;

use crate::file_id::FileId;
use crate::header::{Header, HEADER_SIZE};
use crate::status::NtStatus;

/// Offset of NextCommand in the SMB2 header.
const NEXT_COMMAND_OFFSET: usize = 20;

/// Why a received chain cannot be split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CompoundError {
    /// A member does not start with a valid SMB2 header.
    #[error("bad SMB2 header")]
    BadHeader,
    /// NextCommand is not a multiple of 8, is shorter than a header, or does not
    /// point inside the message.
    #[error("invalid NextCommand")]
    BadNextCommand,
    /// More members than the receiver accepts.
    #[error("compound too long")]
    TooLong,
}

impl CompoundError {
    /// The reason as a static string (a connection's disconnect reason).
    pub fn reason(self) -> &'static str {
        match self {
            CompoundError::BadHeader => "bad SMB2 header",
            CompoundError::BadNextCommand => "invalid NextCommand",
            CompoundError::TooLong => "compound too long",
        }
    }
}

/// One member of a received chain: where it lies in the message and its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The member's bytes in the message, padding included.
    pub range: Range<usize>,
    /// Its decoded header.
    pub header: Header,
}

/// The members of a received chain, in order; see [`members`]. Yields an error (and
/// then nothing more) at the first member that cannot be read.
#[derive(Debug, Clone)]
pub struct Members<'a> {
    buf: &'a [u8],
    pos: usize,
    count: usize,
    limit: usize,
    done: bool,
}

/// Splits a chain (a single message is a chain of one): each NextCommand must be a
/// multiple of 8, at least a header long, and point before the message's end.
pub fn members(buf: &[u8]) -> Members<'_> {
    Members {
        buf,
        pos: 0,
        count: 0,
        limit: usize::MAX,
        done: false,
    }
}

impl Members<'_> {
    /// Accepts at most `limit` members; the next one is [`CompoundError::TooLong`].
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Where the member read next (or the one that failed) starts.
    pub fn offset(&self) -> usize {
        self.pos
    }

    fn step(&mut self) -> Result<Member, CompoundError> {
        if self.count >= self.limit {
            return Err(CompoundError::TooLong);
        }
        let rest = self
            .buf
            .get(self.pos..)
            .ok_or(CompoundError::BadNextCommand)?;
        let header = Header::decode(rest).map_err(|_| CompoundError::BadHeader)?;
        let next = header.next_command as usize;
        let end = if next == 0 {
            self.done = true;
            self.buf.len()
        } else {
            if !next.is_multiple_of(8) || next < HEADER_SIZE || next >= rest.len() {
                return Err(CompoundError::BadNextCommand);
            }
            self.pos + next
        };
        let m = Member {
            range: self.pos..end,
            header,
        };
        self.pos = end;
        self.count += 1;
        Ok(m)
    }
}

impl Iterator for Members<'_> {
    type Item = Result<Member, CompoundError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.step();
        if r.is_err() {
            self.done = true;
        }
        Some(r)
    }
}

/// Ends the member `buf[start..]`: pads it with zeros to a multiple of 8 bytes and,
/// when another member follows (`link`), sets its NextCommand to the padded length.
/// Returns the padded length. A member shorter than a header is only padded.
pub fn end_member(buf: &mut Vec<u8>, start: usize, link: bool) -> usize {
    let len = buf.len().saturating_sub(start).next_multiple_of(8);
    buf.resize(start + len, 0);
    if link && len >= HEADER_SIZE {
        let at = start + NEXT_COMMAND_OFFSET;
        buf[at..at + 4].copy_from_slice(&(len as u32).to_le_bytes());
    }
    len
}

/// Builds a chain in one buffer: [`Builder::member`] before each member's header,
/// then [`Builder::finish`]. Members are padded to 8 bytes and linked.
#[derive(Debug)]
pub struct Builder {
    buf: Vec<u8>,
    open: Option<usize>,
    ranges: Vec<Range<usize>>,
}

impl Builder {
    /// Builds after what `buf` holds already (a frame prefix, room for a
    /// TRANSFORM_HEADER).
    pub fn new(buf: Vec<u8>) -> Builder {
        Builder {
            buf,
            open: None,
            ranges: Vec::new(),
        }
    }

    /// Ends the member before (padding and linking it) and starts one at the end of
    /// the buffer, which it returns: write the member's header and body into it.
    pub fn member(&mut self) -> &mut Vec<u8> {
        self.close(true);
        self.open = Some(self.buf.len());
        &mut self.buf
    }

    fn close(&mut self, link: bool) {
        if let Some(start) = self.open.take() {
            let len = end_member(&mut self.buf, start, link);
            self.ranges.push(start..start + len);
        }
    }

    /// Ends the last member (padded when `pad_last`: responses pad it, requests need
    /// not) and returns the buffer and each member's range in it (to sign them).
    pub fn finish(mut self, pad_last: bool) -> (Vec<u8>, Vec<Range<usize>>) {
        if let Some(start) = self.open.take() {
            let end = if pad_last {
                start + end_member(&mut self.buf, start, false)
            } else {
                self.buf.len()
            };
            self.ranges.push(start..end);
        }
        (self.buf, self.ranges)
    }
}

/// What a related member takes from the member before it ([MS-SMB2] 3.3.5.2.7.2):
/// the SessionId and TreeId that member used, and the FileId it opened or used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Related {
    /// SessionId of the previous member (0: none).
    pub session_id: u64,
    /// TreeId of the previous member (0: none).
    pub tree_id: u32,
    /// The FileId a related all-ones FileId stands for: `Ok(Some)` one the previous
    /// member used or created, `Ok(None)` none, `Err` the status a failed CREATE
    /// passes on.
    pub file_id: Result<Option<FileId>, NtStatus>,
}

impl Default for Related {
    fn default() -> Self {
        Related::START
    }
}

impl Related {
    /// Before any member: no ids; a related FileId names no open.
    pub const START: Related = Related {
        session_id: 0,
        tree_id: 0,
        file_id: Err(NtStatus::FILE_CLOSED),
    };

    /// Gives a related member's header the previous member's SessionId and (unless
    /// async) TreeId. An unrelated member starts a new FileId context.
    pub fn apply(&mut self, hdr: &mut Header) {
        if hdr.is_related() {
            hdr.session_id = self.session_id;
            if !hdr.is_async() {
                hdr.tree_id = self.tree_id;
            }
        } else {
            self.file_id = Related::START.file_id;
        }
    }

    /// The open a FileId in a member names: the all-ones FileId of a related member
    /// is the previous member's (or its failure); in an unrelated member it names no
    /// open (FILE_CLOSED).
    pub fn resolve(&self, id: FileId, member_related: bool) -> Result<FileId, NtStatus> {
        if !id.is_related() {
            return Ok(id);
        }
        if !member_related {
            return Err(NtStatus::FILE_CLOSED);
        }
        match self.file_id {
            Ok(Some(prev)) => Ok(prev),
            Ok(None) => Err(NtStatus::INVALID_PARAMETER),
            Err(status) => Err(status),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Writer;
    use crate::header::{Command, FLAGS_RELATED_OPERATIONS};

    fn member(cmd: Command, next: u32, body_len: usize) -> Vec<u8> {
        let mut w = Writer::new();
        Header {
            command: cmd as u16,
            next_command: next,
            ..Default::default()
        }
        .encode(&mut w);
        w.zeros(body_len);
        w.into_vec()
    }

    fn split(buf: &[u8]) -> Result<Vec<Member>, CompoundError> {
        members(buf).collect()
    }

    #[test]
    fn splits_and_checks_next_command() {
        let mut buf = member(Command::Create, 72, 8);
        buf.extend(member(Command::Close, 0, 24));
        let m = split(&buf).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].range, 0..72);
        assert_eq!(m[1].range, 72..buf.len());
        assert_eq!(m[1].header.cmd(), Some(Command::Close));
        // Misaligned, shorter than a header, past the end.
        for bad in [70u32, 8, 4096] {
            let mut b = member(Command::Create, bad, 8);
            b.extend(member(Command::Close, 0, 24));
            assert_eq!(split(&b), Err(CompoundError::BadNextCommand), "{bad}");
        }
        // Pointing exactly at the end is an error too.
        assert_eq!(
            split(&member(Command::Create, 72, 8)),
            Err(CompoundError::BadNextCommand)
        );
        // A truncated second header.
        let mut b = member(Command::Create, 72, 8);
        b.extend_from_slice(&[0xfe, b'S', b'M', b'B']);
        assert_eq!(split(&b), Err(CompoundError::BadHeader));
        // The failing member's offset; nothing after the first error.
        let mut b = member(Command::Create, 72, 8);
        b.extend(member(Command::Close, 4096, 24));
        let mut it = members(&b);
        assert!(it.next().unwrap().is_ok());
        assert_eq!(it.next(), Some(Err(CompoundError::BadNextCommand)));
        assert_eq!(it.offset(), 72);
        assert!(it.next().is_none());
        let mut it = members(&[0u8; 10]);
        assert!(it.next().unwrap().is_err());
        assert!(it.next().is_none());
    }

    #[test]
    fn limit_counts_members() {
        let mut buf = member(Command::Echo, 72, 8);
        buf.extend(member(Command::Echo, 72, 8));
        buf.extend(member(Command::Echo, 0, 8));
        assert_eq!(members(&buf).limit(3).count(), 3);
        let r: Result<Vec<_>, _> = members(&buf).limit(2).collect();
        assert_eq!(r, Err(CompoundError::TooLong));
    }

    #[test]
    fn builder_pads_links_and_splits_back() {
        let mut b = Builder::new(vec![0; 4]);
        for (cmd, body) in [
            (Command::Create, 57),
            (Command::Read, 49),
            (Command::Close, 24),
        ] {
            let buf = b.member();
            let mut w = Writer::new();
            Header {
                command: cmd as u16,
                ..Default::default()
            }
            .encode(&mut w);
            buf.extend_from_slice(w.as_slice());
            buf.resize(buf.len() + body, 0x11);
        }
        let (buf, ranges) = b.finish(false);
        assert_eq!(ranges, vec![4..132, 132..252, 252..340]);
        let m = split(&buf[4..]).unwrap();
        let got: Vec<_> = m.iter().map(|m| m.range.clone()).collect();
        assert_eq!(got, vec![0..128, 128..248, 248..336]);
        assert_eq!(m[0].header.next_command, 128);
        assert_eq!(m[2].header.next_command, 0);
        // Responses pad the last member too.
        let mut b = Builder::new(Vec::new());
        b.member().extend_from_slice(&member(Command::Echo, 0, 4));
        let (buf, ranges) = b.finish(true);
        assert_eq!(buf.len(), 72);
        assert_eq!(ranges.len(), 1);
        assert_eq!(ranges[0], 0..72);
        // end_member leaves a short member's bytes alone but for padding.
        let mut v = vec![1u8; 10];
        assert_eq!(end_member(&mut v, 0, true), 16);
        assert_eq!(&v[..10], &[1u8; 10]);
    }

    #[test]
    fn related_members_inherit_ids() {
        let mut rel = Related::START;
        let id = FileId {
            persistent: 1,
            volatile: 2,
        };
        // A related all-ones FileId with nothing before it names no open.
        assert_eq!(
            rel.resolve(FileId::RELATED, true),
            Err(NtStatus::FILE_CLOSED)
        );
        rel = Related {
            session_id: 5,
            tree_id: 6,
            file_id: Ok(Some(id)),
        };
        let mut h = Header {
            flags: FLAGS_RELATED_OPERATIONS,
            session_id: 99,
            tree_id: 98,
            ..Default::default()
        };
        rel.apply(&mut h);
        assert_eq!((h.session_id, h.tree_id), (5, 6));
        assert_eq!(rel.resolve(FileId::RELATED, true), Ok(id));
        // Outside a related member the all-ones FileId is no open; others are as is.
        assert_eq!(
            rel.resolve(FileId::RELATED, false),
            Err(NtStatus::FILE_CLOSED)
        );
        let other = FileId {
            persistent: 7,
            volatile: 8,
        };
        assert_eq!(rel.resolve(other, true), Ok(other));
        // A failed CREATE passes its status on; no FileId at all is INVALID_PARAMETER.
        rel.file_id = Err(NtStatus::OBJECT_NAME_NOT_FOUND);
        assert_eq!(
            rel.resolve(FileId::RELATED, true),
            Err(NtStatus::OBJECT_NAME_NOT_FOUND)
        );
        rel.file_id = Ok(None);
        assert_eq!(
            rel.resolve(FileId::RELATED, true),
            Err(NtStatus::INVALID_PARAMETER)
        );
        // An unrelated member resets the FileId context and keeps its own ids.
        let mut h = Header {
            session_id: 99,
            ..Default::default()
        };
        rel.apply(&mut h);
        assert_eq!(h.session_id, 99);
        assert_eq!(rel.file_id, Err(NtStatus::FILE_CLOSED));
    }
}
