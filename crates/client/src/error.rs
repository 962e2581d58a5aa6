//! The client's error type. A server refusal carries its NTSTATUS, and its Display is the
//! status name (e.g. `STATUS_OBJECT_NAME_NOT_FOUND`), so command-line tools can print it.
//! Every other failure is a typed variant saying what went wrong (which check, which
//! command, which field), with the underlying error as its [`std::error::Error::source`];
//! Display messages include the source's text, so printing only the top-level error
//! still says everything.

use std::fmt;
use std::sync::Arc;

use smbx_security::kerberos::KerberosError;
use smbx_security::ntlm::NtlmError;
use smbx_security::spnego::SpnegoError;
use smbx_security::CryptoError;
use smbx_transport::DirectError;
use smbx_wire::{Command, Dialect, NtStatus, WireError};
use thiserror::Error;

/// Everything that can go wrong in the client.
#[derive(Debug, Error)]
pub enum Error {
    /// The server answered with an error status.
    #[error("{status}")]
    Status {
        /// The NTSTATUS the server returned.
        status: NtStatus,
        /// The SMB2 command that failed (wire code).
        command: u16,
    },
    /// The server sent bytes we could not decode.
    #[error("malformed response: {0}")]
    Wire(#[from] WireError),
    /// Signing, sealing or key handling failed, or a response was not protected as
    /// the session requires.
    #[error("security failure: {0}")]
    Crypto(#[from] SecurityError),
    /// Authentication could not proceed.
    #[error("authentication failed: {0}")]
    Auth(#[from] AuthError),
    /// The server's behaviour violated the protocol or our options.
    #[error("protocol error: {0}")]
    Protocol(#[from] ProtocolError),
    /// A socket error.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The connection is closed (by the peer, an error, or a previous failure).
    #[error("connection closed: {0}")]
    Disconnected(#[source] DisconnectReason),
    /// No response arrived within the configured timeout.
    #[error("timed out waiting for the server")]
    Timeout,
    /// The caller passed an unusable argument (bad URL, path, option combination).
    #[error("invalid argument: {0}")]
    InvalidArgument(#[source] InvalidArgument),
    /// A durable open ([`crate::File::is_durable`]) that did not survive the loss
    /// of its session: when the tree was re-established on a new session, the
    /// server refused to reclaim it ([MS-SMB2] 3.2.4.4). The handle is dead: its
    /// requests, and those in flight when the session went, fail with this error
    /// without being sent. Data written through it but not acknowledged may not
    /// have reached the file; open the file again to go on.
    #[error("durable open of {name} lost: the server refused to reclaim it on the new session ({status})")]
    DurableOpenLost {
        /// The file's path on the share.
        name: String,
        /// The server's answer to the reclaim (the CREATE with DH2C).
        status: NtStatus,
    },
}

/// A response that failed its protection, or a signing / sealing step that failed.
#[derive(Debug, Error)]
pub enum SecurityError {
    /// A cryptographic primitive failed (key length, nonce space, a malformed
    /// TRANSFORM_HEADER).
    #[error("{0}")]
    Crypto(#[source] CryptoError),
    /// A sealed response did not decrypt (wrong key or a forged tag).
    #[error("unseal failed: {0}")]
    Unseal(#[source] CryptoError),
    /// A signed response's signature does not verify.
    #[error("bad signature on the {} response", CommandName(*command))]
    BadSignature {
        /// The response's command (wire code).
        command: u16,
    },
    /// A response that must be signed is not.
    #[error("unsigned {} response where a signature is required", CommandName(*command))]
    Unsigned {
        /// The response's command (wire code).
        command: u16,
    },
    /// A plain response on a session whose traffic must be sealed.
    #[error("unencrypted {} response on an encrypted session", CommandName(*command))]
    Unencrypted {
        /// The response's command (wire code).
        command: u16,
    },
    /// A channel's binding response is not signed with the channel's key.
    #[error("the binding response is not signed with the channel's key")]
    BindingNotSigned,
    /// The VALIDATE_NEGOTIATE_INFO response is not signed.
    #[error("unsigned VALIDATE_NEGOTIATE_INFO response")]
    ValidateNegotiateUnsigned,
    /// VALIDATE_NEGOTIATE_INFO disagrees with what NEGOTIATE said: the negotiation
    /// may have been tampered with.
    #[error("VALIDATE_NEGOTIATE_INFO does not match NEGOTIATE: possible downgrade")]
    Downgrade,
}

impl From<CryptoError> for SecurityError {
    fn from(e: CryptoError) -> Self {
        SecurityError::Crypto(e)
    }
}

impl From<CryptoError> for Error {
    fn from(e: CryptoError) -> Self {
        Error::Crypto(SecurityError::Crypto(e))
    }
}

/// Why a logon failed on the client's side (a server refusal is [`Error::Status`]).
#[derive(Debug, Error)]
pub enum AuthError {
    /// The Kerberos library refused (no ticket, no KDC, a bad server token).
    #[error("Kerberos: {0}")]
    Kerberos(#[source] KerberosError),
    /// The task running the Kerberos library failed.
    #[error("Kerberos: {0}")]
    KerberosTask(#[source] tokio::task::JoinError),
    /// The server asked for a second Kerberos round, which is not supported.
    #[error("the server wants more than one Kerberos round (not supported)")]
    KerberosRounds,
    /// The server completed an NTLM logon without sending a challenge.
    #[error("server accepted the logon without a challenge")]
    NoChallengeRound,
    /// The server's token carried no NTLM challenge.
    #[error("no NTLM challenge in the server's token")]
    NoChallenge,
    /// The NTLM challenge did not decode or could not be answered.
    #[error("{0}")]
    Ntlm(#[source] NtlmError),
    /// The server's SPNEGO token did not decode.
    #[error("{0}")]
    Spnego(#[source] SpnegoError),
    /// The server rejected NTLMSSP in its SPNEGO answer.
    #[error("the server rejected NTLMSSP")]
    NtlmRejected,
    /// The server's final SPNEGO token rejected the exchange.
    #[error("the server rejected the SPNEGO exchange")]
    SpnegoRejected,
    /// Signing is required, but the logon is guest or anonymous and has no key.
    #[error("logged on as guest or anonymous, which cannot sign")]
    CannotSign,
}

/// A response, or a negotiated result, that breaks the protocol or the client's
/// options.
#[derive(Debug, Error)]
pub enum ProtocolError {
    /// A request went unanswered although the connection stayed up.
    #[error("no response")]
    NoResponse,
    /// NEGOTIATE chose a dialect the client did not offer.
    #[error("server chose dialect {0}, which we did not offer")]
    DialectNotOffered(Dialect),
    /// The 3.1.1 preauth integrity context names a hash other than SHA-512.
    #[error("server chose an unknown preauth hash")]
    UnknownPreauthHash,
    /// The encryption context names a cipher the client did not offer.
    #[error("server chose cipher {0}, not offered")]
    CipherNotOffered(u16),
    /// The signing context names an algorithm the client did not offer.
    #[error("server chose signing algorithm {0}, not offered")]
    SigningNotOffered(u16),
    /// A 3.1.1 NEGOTIATE response without a preauth integrity context.
    #[error("3.1.1 response without a preauth integrity context")]
    NoPreauthContext,
    /// Encryption is required but the negotiated dialect has no cipher.
    #[error("encryption is required but dialect {0} negotiated no cipher")]
    NoCipher(Dialect),
    /// A share requires encryption that the session cannot do.
    #[error("share {0} requires encryption, which this session cannot do")]
    ShareNeedsEncryption(String),
    /// A further channel negotiated another dialect than the session's.
    #[error("channel negotiated {channel}, the session {session}")]
    ChannelDialect {
        /// The new channel's dialect.
        channel: Dialect,
        /// The session's dialect.
        session: Dialect,
    },
    /// The server does not offer multichannel on the new connection.
    #[error("the server does not offer multichannel on this connection")]
    NoMultichannel,
    /// A channel binding was answered for another session.
    #[error("binding answered for session {got:#x}, not {expected:#x}")]
    BindingOtherSession {
        /// The session being bound.
        expected: u64,
        /// The SessionId of the answer.
        got: u64,
    },
    /// A send asked for sealing on a session without a cipher.
    #[error("encryption requested but the session has no cipher")]
    CannotSeal,
    /// A sealed message names a session this connection does not know.
    #[error("sealed message for unknown session {0:#x}")]
    UnknownSession(u64),
    /// A sealed message arrived for a session without a cipher.
    #[error("sealed message on a session without a cipher")]
    SealedWithoutCipher,
    /// A frame could not be received (bad length, too large).
    #[error("receiving a frame: {0}")]
    Frame(&'static str),
    /// A compound response's chaining is malformed.
    #[error("{what} (compound member at offset {offset})")]
    BadCompound {
        /// What is wrong (NextCommand unaligned, past the end ...).
        what: &'static str,
        /// Offset of the member in the frame.
        offset: usize,
    },
    /// A compound was answered with another number of responses than it had requests.
    #[error("compound of {sent} answered with {got} responses")]
    CompoundCount {
        /// Requests sent.
        sent: usize,
        /// Responses received.
        got: usize,
    },
    /// A READ on an RDMA channel returned data inline, or more than asked.
    #[error("bad READ response on an RDMA channel: {inline} bytes inline, DataRemaining {remaining} for {asked} asked")]
    RdmaRead {
        /// Bytes carried in the response itself (0 expected).
        inline: usize,
        /// DataRemaining: bytes written to the client's buffer.
        remaining: usize,
        /// Bytes asked for.
        asked: usize,
    },
    /// A READ returned more data than asked.
    #[error("server returned {got} bytes, more than the {asked} asked")]
    ReadTooLong {
        /// Bytes asked for.
        asked: usize,
        /// Bytes returned.
        got: usize,
    },
    /// A WRITE wrote fewer bytes than sent.
    #[error("short write: {written} of {len} bytes")]
    ShortWrite {
        /// Bytes the server says it wrote.
        written: usize,
        /// Bytes sent.
        len: usize,
    },
}

/// Why a connection is closed. Cheap to clone: every request waiting on the
/// connection gets a copy.
#[derive(Debug, Clone, Error)]
pub enum DisconnectReason {
    /// [`crate::Connection::close`] (or dropping the client) closed it.
    #[error("closed by the client")]
    ClosedByClient,
    /// The server closed the connection (end of stream).
    #[error("the server closed the connection")]
    ClosedByServer,
    /// Writing to the socket failed.
    #[error("write failed: {0}")]
    Write(#[source] Arc<std::io::Error>),
    /// A received frame was fatal to the connection (it did not decode, was not
    /// protected as required, or the socket failed).
    #[error("{0}")]
    Receive(#[source] Arc<Error>),
    /// Sending on the SMB Direct link failed.
    #[error("smb direct send failed: {0}")]
    DirectSend(#[source] Arc<DirectError>),
    /// The SMB Direct link failed.
    #[error("smb direct: {0}")]
    Direct(#[source] Arc<DirectError>),
    /// Connecting over SMB Direct failed.
    #[error("smb direct connect to {addr}: {source}")]
    DirectConnect {
        /// The address tried.
        addr: std::net::SocketAddr,
        /// Why.
        #[source]
        source: Arc<DirectError>,
    },
    /// A multichannel channel stopped answering; its requests go to another channel.
    #[error("the channel stopped answering")]
    ChannelUnresponsive,
    /// The connection went away without a recorded reason.
    #[error("connection closed")]
    Unknown,
}

impl From<DirectError> for DisconnectReason {
    fn from(e: DirectError) -> Self {
        DisconnectReason::Direct(Arc::new(e))
    }
}

/// An argument the client cannot use.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InvalidArgument {
    /// An `smb://` URL does not parse.
    #[error("{why}: {url:?}")]
    Url {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// An `smb://` URL has a query parameter the client does not know.
    #[error("unknown URL parameter {param:?}: {url:?}")]
    UrlParameter {
        /// The URL as given.
        url: String,
        /// The parameter (`name=value`).
        param: String,
    },
    /// A `%` escape is not two hex digits.
    #[error("bad percent escape in {0:?}")]
    PercentEscape(String),
    /// Percent escapes decode to bytes that are not UTF-8.
    #[error("percent escapes in {0:?} are not UTF-8")]
    PercentUtf8(String),
    /// The URL names no share.
    #[error("the URL names no share")]
    NoShare,
    /// A user is named but no password is given.
    #[error("no password for {0}")]
    NoPassword(String),
    /// The host name does not resolve.
    #[error("cannot resolve {0}")]
    Unresolved(String),
    /// The options offer no dialect.
    #[error("no dialects to offer")]
    NoDialects,
    /// An anonymous session cannot bind further channels.
    #[error("an anonymous session binds no further channels")]
    BindNeedsNtlm,
    /// The session's connection was made from a stream whose server address
    /// is unknown: it cannot be connected again.
    #[error("the server's address is unknown: cannot connect again")]
    NoServerAddress,
    /// A READ longer than the server's MaxReadSize.
    #[error("read of {len} bytes larger than MaxReadSize ({max})")]
    ReadTooLarge {
        /// Bytes asked for.
        len: usize,
        /// The server's MaxReadSize.
        max: usize,
    },
    /// An RDMA transfer larger than the buffer registered for it.
    #[error("{what} of {len} bytes larger than its buffer")]
    LargerThanBuffer {
        /// `read` or `write`.
        what: &'static str,
        /// Bytes to transfer.
        len: usize,
    },
}

impl From<InvalidArgument> for Error {
    fn from(e: InvalidArgument) -> Self {
        Error::InvalidArgument(e)
    }
}

impl From<DisconnectReason> for Error {
    fn from(e: DisconnectReason) -> Self {
        Error::Disconnected(e)
    }
}

/// An SMB2 command code shown by name when it is known.
struct CommandName(u16);

impl fmt::Display for CommandName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match Command::from_u16(self.0) {
            Some(c) => write!(f, "{c:?}"),
            None => write!(f, "command {:#06x}", self.0),
        }
    }
}

impl Error {
    /// The NTSTATUS, if this is a server refusal.
    pub fn status(&self) -> Option<NtStatus> {
        match self {
            Error::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// True if the server refused with `status`.
    pub fn is_status(&self, status: NtStatus) -> bool {
        self.status() == Some(status)
    }
}

/// The client's result type.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn display_is_status_name() {
        let e = Error::Status {
            status: NtStatus::OBJECT_NAME_NOT_FOUND,
            command: 5,
        };
        assert_eq!(e.to_string(), "STATUS_OBJECT_NAME_NOT_FOUND");
        assert!(e.is_status(NtStatus::OBJECT_NAME_NOT_FOUND));
        let odd = Error::Status {
            status: NtStatus(0xC0FF_EE00),
            command: 5,
        };
        assert_eq!(odd.to_string(), "NTSTATUS(0xc0ffee00)");
    }

    #[test]
    fn typed_variants_say_what_and_keep_their_source() {
        let e = Error::from(SecurityError::BadSignature {
            command: Command::SessionSetup as u16,
        });
        assert_eq!(
            e.to_string(),
            "security failure: bad signature on the SessionSetup response"
        );
        let e = Error::Crypto(SecurityError::Unseal(CryptoError::AuthenticationFailed));
        assert_eq!(
            e.to_string(),
            "security failure: unseal failed: authentication failed"
        );
        let inner = e
            .source()
            .and_then(|s| s.source())
            .expect("the crypto error");
        assert_eq!(
            inner.downcast_ref::<CryptoError>(),
            Some(&CryptoError::AuthenticationFailed)
        );
        // A connection closed by a fatal frame: the frame's error is the source.
        let why = DisconnectReason::Receive(Arc::new(Error::from(ProtocolError::BadCompound {
            what: "NextCommand past the end",
            offset: 64,
        })));
        let e = Error::from(why);
        assert_eq!(
            e.to_string(),
            "connection closed: protocol error: NextCommand past the end (compound member at offset 64)"
        );
        let src = e
            .source()
            .and_then(|s| s.source())
            .expect("the frame's error");
        // The source is the shared `Arc<Error>` every waiter got a copy of.
        let src = src.downcast_ref::<Arc<Error>>().map(|a| &**a);
        assert!(matches!(
            src,
            Some(Error::Protocol(ProtocolError::BadCompound {
                offset: 64,
                ..
            }))
        ));
        let e = Error::from(InvalidArgument::NoPassword("alice".into()));
        assert_eq!(e.to_string(), "invalid argument: no password for alice");
        assert!(matches!(
            e,
            Error::InvalidArgument(InvalidArgument::NoPassword(ref u)) if u == "alice"
        ));
        assert_eq!(
            SecurityError::Unsigned { command: 0x99 }.to_string(),
            "unsigned command 0x0099 response where a signature is required"
        );
    }
}
