//! Connection parameters: what this endpoint offers, and what negotiation
//! settled on.

use std::time::Duration;

use crate::pdu::{DATA_OFFSET, MIN_FRAGMENTED_SIZE, MIN_RECEIVE_SIZE, NEGOTIATE_RESPONSE_LEN};

/// Negotiate timeout a server applies by default (time from accepting the
/// connection to receiving the Negotiate Request).
pub const SERVER_NEGOTIATE_TIMEOUT: Duration = Duration::from_secs(5);
/// Negotiate timeout a client applies by default (time from sending the
/// Negotiate Request to receiving the response).
pub const CLIENT_NEGOTIATE_TIMEOUT: Duration = Duration::from_secs(120);

/// The send size of Windows (its MaxSendSize and PreferredSendSize), also
/// Linux cifs' and ksmbd's: 1364 bytes. An endpoint sends messages larger than
/// this only to a peer that itself asks to send larger ones.
pub const PEER_DEFAULT_SEND_SIZE: u32 = 1364;

/// The send and receive size of [`Config::default`]: 8 KiB and 512 bytes, so that
/// an 8 KiB READ response (24 + 64 + 16 + 8192 = 8296 bytes with the SMB Direct
/// and SMB2 headers) or an 8 KiB WRITE request (8328 bytes; 8380 sealed) is one
/// SMB Direct message between two smbx endpoints, not a full 8192-byte fragment
/// and a short one. Peers that send 1364 bytes still get 1364-byte messages. It
/// costs a connection 256 KiB more of registered buffers than 8192 did (255
/// receives and 256 sends of 512 bytes more each).
pub const DEFAULT_MESSAGE_SIZE: u32 = 8192 + 512;

/// The largest send or receive size a configuration may ask for (each
/// connection registers 256 buffers of each).
pub const MAX_MESSAGE_SIZE: u32 = 65536;

/// Local parameters of one SMB Direct endpoint. [`Config::default`] gives the
/// values Windows uses, but for the send size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Largest message this endpoint sends (MaxSendSize, and the
    /// PreferredSendSize a client offers); [`DEFAULT_MESSAGE_SIZE`] (8704).
    /// Negotiation lowers it to the peer's MaxReceiveSize, and to the peer's own
    /// preferred send size when that is larger than [`PEER_DEFAULT_SEND_SIZE`]:
    /// Windows and Linux peers, which send 1364, get 1364-byte messages; two smbx
    /// endpoints send 8704.
    pub max_send_size: u32,
    /// Largest message this endpoint can receive (MaxReceiveSize);
    /// [`DEFAULT_MESSAGE_SIZE`] (8704).
    pub max_receive_size: u32,
    /// Largest upper-layer message this endpoint reassembles
    /// (MaxFragmentedRecvSize); 1 MiB.
    pub max_fragmented_size: u32,
    /// Most receives this endpoint posts/grants (ReceiveCreditMax); 255.
    pub receive_credit_max: u16,
    /// Credits this endpoint asks the peer for (SendCreditTarget); 255.
    pub send_credit_target: u16,
    /// Largest RDMA Read/Write per request (MaxReadWriteSize); 8 MiB.
    pub max_read_write_size: u32,
    /// Idle time after which a keepalive that asks for an answer is sent
    /// ([MS-SMBD] 3.1.6.2); 10 s, not Windows' 120 s. The kernel's rxe and siw
    /// leave the queue pairs of a downed port connected, so a peer whose link
    /// went down is noticed only through this (about 15 s with the timeout
    /// below), by the server (which then drops the peer's registrations) and
    /// by the client (whose waiting requests then fail).
    pub keepalive_interval: Duration,
    /// How long to wait for any message after a keepalive; 5 s.
    pub keepalive_timeout: Duration,
    /// Negotiate timeout; `None` uses the role's default
    /// ([`SERVER_NEGOTIATE_TIMEOUT`] / [`CLIENT_NEGOTIATE_TIMEOUT`]).
    pub negotiate_timeout: Option<Duration>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_send_size: DEFAULT_MESSAGE_SIZE,
            max_receive_size: DEFAULT_MESSAGE_SIZE,
            max_fragmented_size: 1024 * 1024,
            receive_credit_max: 255,
            send_credit_target: 255,
            max_read_write_size: 8 * 1024 * 1024,
            keepalive_interval: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(5),
            negotiate_timeout: None,
        }
    }
}

/// A configuration value outside what the protocol allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid SMB Direct configuration: {0}")]
pub struct ConfigError(pub &'static str);

impl Config {
    /// Checks the values against the protocol's minimums.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_send_size < MIN_RECEIVE_SIZE {
            return Err(ConfigError("max_send_size must be >= 128"));
        }
        if self.max_receive_size < MIN_RECEIVE_SIZE {
            return Err(ConfigError("max_receive_size must be >= 128"));
        }
        if self.max_send_size > MAX_MESSAGE_SIZE || self.max_receive_size > MAX_MESSAGE_SIZE {
            return Err(ConfigError("message sizes must be <= 65536"));
        }
        if self.max_fragmented_size < MIN_FRAGMENTED_SIZE {
            return Err(ConfigError("max_fragmented_size must be >= 131072"));
        }
        if self.receive_credit_max == 0 || self.send_credit_target == 0 {
            return Err(ConfigError("credit limits must be non-zero"));
        }
        if self.max_read_write_size == 0 {
            return Err(ConfigError("max_read_write_size must be non-zero"));
        }
        if (self.max_receive_size as usize) < NEGOTIATE_RESPONSE_LEN
            || (self.max_send_size as usize) <= DATA_OFFSET
        {
            return Err(ConfigError("sizes too small for SMB Direct headers"));
        }
        Ok(())
    }
}

/// What negotiation settled on; reported by
/// [`Event::Negotiated`](crate::Event::Negotiated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NegotiatedParams {
    /// Largest message this endpoint sends.
    pub max_send_size: u32,
    /// Largest message this endpoint receives (the size of posted receives).
    pub max_receive_size: u32,
    /// Largest upper-layer message this endpoint may send (peer's
    /// MaxFragmentedSize).
    pub max_fragmented_send_size: u32,
    /// Largest upper-layer message this endpoint reassembles.
    pub max_fragmented_receive_size: u32,
    /// Largest RDMA Read/Write per request.
    pub max_read_write_size: u32,
    /// Credits this endpoint holds right after negotiation.
    pub initial_send_credits: u16,
    /// The peer's SendCreditTarget (capped by our ReceiveCreditMax).
    pub receive_credit_target: u16,
}

impl NegotiatedParams {
    /// Upper-layer bytes carried by one full fragment (send size − 24).
    pub fn max_fragment_payload(&self) -> usize {
        (self.max_send_size as usize).saturating_sub(DATA_OFFSET)
    }
}
