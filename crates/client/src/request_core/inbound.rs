//! What the server sends, opened: a sealed frame unsealed by its session's keys, a
//! compound split into its members, each member's signature (or the lack of one)
//! judged against the session's policy, and unsolicited messages told apart.
//! Errors from [`open`] and [`split`] are fatal to the connection; a member's
//! [`verify`] failure is its request's.

use smbx_security::protection::Protection;
use smbx_security::signing::Signer;
use smbx_wire::compound;
use smbx_wire::header::{FLAGS_SIGNED, TRANSFORM_PROTOCOL_ID};
use smbx_wire::oplock::OplockBreak;
use smbx_wire::{Command, Header, InMessage, NtStatus};

use super::UNSOLICITED_ID;
use crate::error::{Error, ProtocolError, Result, SecurityError};

/// One response: its header and the whole message starting at the header.
#[derive(Debug, Clone)]
pub struct Response {
    /// The decoded header.
    pub header: Header,
    /// The message (header, body, and for compound members any padding), in the
    /// buffer it arrived in (over SMB Direct it may start past the buffer's first
    /// byte: [`InMessage::into_parts`]).
    pub msg: InMessage,
}

impl Response {
    /// The response status.
    pub fn status(&self) -> NtStatus {
        self.header.status
    }
    /// Ok(self) on success, the typed error otherwise.
    pub fn ok(self) -> Result<Response> {
        if self.header.status.is_error() {
            return Err(Error::Status {
                status: self.header.status,
                command: self.header.command,
            });
        }
        Ok(self)
    }
}

/// Something the server sent without being asked.
#[derive(Debug, Clone)]
pub enum Event {
    /// An oplock break notification.
    OplockBreak(OplockBreak),
    /// Any other unsolicited message (lease break notifications), raw.
    Other(Response),
}

impl Event {
    /// The event an unsolicited message (MessageId [`UNSOLICITED_ID`]) stands for.
    pub(crate) fn from_message(header: Header, msg: InMessage) -> Event {
        match OplockBreak::decode(&msg) {
            Ok(b) if header.command == Command::OplockBreak as u16 => Event::OplockBreak(b),
            _ => Event::Other(Response { header, msg }),
        }
    }
}

/// A session's keys on this connection and the client's policy for them.
#[derive(Debug, Default)]
pub(crate) struct SessionSecurity {
    /// Signs requests, verifies responses, seals requests and unseals responses.
    pub keys: Protection,
    /// Sign requests and require signed responses (when not sealed).
    pub sign: bool,
    /// Seal every request of the session.
    pub encrypt: bool,
}

impl SessionSecurity {
    /// The protection of a channel bound to this session ([MS-SMB2] 3.2.5.3.1):
    /// its own signer, the session's policy, sealing keys and nonce source.
    pub fn for_channel(&self, signer: Signer) -> SessionSecurity {
        SessionSecurity {
            keys: self.keys.for_channel(signer),
            sign: self.sign,
            encrypt: self.encrypt,
        }
    }
}

/// A received message in plaintext: `msg` and whether it arrived sealed.
#[derive(Debug)]
pub(crate) struct Opened {
    /// The plaintext (one message or a compound chain).
    pub msg: InMessage,
    /// True if it arrived sealed (so its members need no signature).
    pub encrypted: bool,
}

/// Unseals `frame` if it is a TRANSFORM message, with the keys of the session it
/// names (`session`), into a buffer from `take` (exactly the plaintext's length);
/// the sealed frame's buffer is handed to `recycle`. A plain frame is returned as is.
pub(crate) fn open<S: AsRef<SessionSecurity>>(
    frame: InMessage,
    session: impl FnOnce(u64) -> Option<S>,
    take: impl FnMut(usize) -> Vec<u8>,
    recycle: impl FnOnce(Vec<u8>),
) -> Result<Opened> {
    if frame.get(..4) != Some(&TRANSFORM_PROTOCOL_ID[..]) {
        return Ok(Opened {
            msg: frame,
            encrypted: false,
        });
    }
    let th = smbx_security::transform::parse_header(&frame)?;
    let sec = session(th.session_id).ok_or(ProtocolError::UnknownSession(th.session_id))?;
    let sec = sec.as_ref();
    if !sec.keys.can_seal() {
        return Err(ProtocolError::SealedWithoutCipher.into());
    }
    // Decrypted straight into a buffer of the plaintext's size (no move of the
    // plaintext over the TRANSFORM_HEADER afterwards).
    let msg = sec
        .keys
        .unseal_with(&frame, take)
        .map_err(SecurityError::Unseal)?;
    recycle(frame.into_parts().0);
    Ok(Opened {
        msg: msg.into(),
        encrypted: true,
    })
}

/// Splits a plaintext message into its members, each with its header: a lone
/// message keeps its buffer (and its start in it), compound members are copied out
/// of the chain.
pub(crate) fn split(msg: InMessage, mut each: impl FnMut(Header, InMessage)) -> Result<()> {
    let first = Header::decode(&msg)?;
    if first.next_command == 0 {
        each(first, msg);
        return Ok(());
    }
    let mut members = compound::members(&msg);
    while let Some(m) = members.next() {
        let m = m.map_err(|e| ProtocolError::BadCompound {
            what: e.reason(),
            offset: members.offset(),
        })?;
        each(m.header, msg[m.range].to_vec().into());
    }
    Ok(())
}

/// Judges a response member against its session's policy before anything else it
/// says is believed: a session that seals must not get plaintext, a signed member
/// must verify, a session that signs must get signed members. Interim
/// STATUS_PENDING responses need not be signed ([MS-SMB2] 3.3.4.1.1); unsolicited
/// messages and those of no known session are not judged here.
pub(crate) fn verify(
    h: &Header,
    msg: &mut [u8],
    encrypted: bool,
    sec: Option<&SessionSecurity>,
) -> Result<()> {
    let Some(sec) = sec else { return Ok(()) };
    if encrypted || h.message_id == UNSOLICITED_ID || h.session_id == 0 {
        return Ok(());
    }
    let interim = h.status == NtStatus::PENDING && h.is_async();
    if sec.encrypt && !interim {
        return Err(SecurityError::Unencrypted { command: h.command }.into());
    }
    if h.flags & FLAGS_SIGNED != 0 {
        // In place: a GMAC check would otherwise copy the message.
        if sec.keys.can_sign() && !sec.keys.verify_in_place(msg) {
            return Err(SecurityError::BadSignature { command: h.command }.into());
        }
    } else if sec.sign && !interim {
        return Err(SecurityError::Unsigned { command: h.command }.into());
    }
    Ok(())
}
