//! smbx-security: authentication and message protection for SMB2/3.
//!
//! Boundaries: owns authentication and message protection; imports only smbx-wire,
//! never a transport, the server or the client, and does no socket I/O (Kerberos calls
//! the system's GSSAPI library).
//!
//! * [`ntlm`]: NTLMSSP messages, NTLMv2 verification, session keys, MIC, and a client initiator.
//! * [`spnego`]: the SPNEGO (RFC 4178 / MS-SPNG) DER tokens that wrap NTLMSSP.
//! * [`auth`]: the server-side acceptor ([`auth::ServerAuth`]).
//! * [`kerberos`]: Kerberos 5 for the acceptor and the client, through the system's
//!   GSSAPI ([`gss`], the crate's only `unsafe` code, at that FFI boundary).
//! * [`kdf`], [`keys`]: the SP800-108 KDF and SMB 3.x key schedule.
//! * [`signing`], [`cipher`], [`transform`]: message signing, AEAD and the TRANSFORM_HEADER.
//! * [`protection`]: one session's signing and sealing, the same type for server and
//!   client ([`protection::Protection`]).
//! * [`preauth`]: the SMB 3.1.1 pre-authentication integrity hash.
//!
//! All decoders treat their input as hostile: they check every length and never panic.

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
pub mod cipher;
mod error;
pub mod gss;
pub mod kdf;
pub mod kerberos;
pub mod keys;
pub mod ntlm;
pub mod preauth;
pub mod protection;
pub mod signing;
pub mod spnego;
pub mod transform;

pub use error::CryptoError;
