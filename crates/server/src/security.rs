//! The seam between the server and smbx-security: per-session keys, signing,
//! sealing and preauth hashing. Everything cryptographic goes through here.

use std::sync::Arc;

use smbx_security::auth::ServerAuth;
use smbx_security::cipher::CipherId;
use smbx_security::keys::SessionKeys;
use smbx_security::preauth::PreauthHash;
use smbx_security::protection::{Protection, Role};
use smbx_security::signing::{Signer, SigningAlgorithm};
use smbx_security::transform::{self, TRANSFORM_HEADER_LEN};
use smbx_wire::Dialect;
use smbx_wire::NtStatus;

use crate::conn::Connection;
use crate::handlers::PreauthTarget;
use crate::state::{ServerState, Session};

/// Per-session security material. Lives inside `Session::state`; lock briefly: the
/// keys are shared (`Arc`), so signing, verifying, sealing and unsealing take them out
/// of the lock and run after it is released (a 512 KiB message's GMAC or AES-GCM
/// under the session's lock stalled every other request of the session, the read
/// loop's unsealing included, on a worker thread parked on the mutex).
#[derive(Default)]
pub struct SessionSecurity {
    /// The authentication exchange in progress (first logon or re-authentication).
    pub auth: Option<ServerAuth>,
    /// The session's preauth integrity hash (3.1.1, until the session is valid).
    pub preauth: Option<PreauthHash>,
    /// Signs and verifies messages, seals server-to-client and unseals
    /// client-to-server ones (3.x), once keys exist.
    pub keys: Arc<Protection>,
    /// The application key (3.x), for anyone who needs it.
    pub application_key: Vec<u8>,
    /// Signing algorithm of the connection the session was established on.
    pub signing_algorithm: Option<SigningAlgorithm>,
    /// Cipher (wire id, 0 = none) of the connection the session was established on;
    /// a channel can only be bound from a connection with the same one.
    pub cipher: u16,
    /// The session's channels ([MS-SMB2] 3.3.1.8 Session.ChannelList): the
    /// creating connection and every connection bound to it.
    pub channels: Vec<Channel>,
}

/// One channel of a session: a connection requests of the session may arrive on.
pub struct Channel {
    /// The connection.
    pub conn_id: u64,
    /// True once usable (the creating connection always; a bound one once its
    /// binding SESSION_SETUP succeeded).
    pub established: bool,
    /// The channel's own signing key (a bound 3.x channel); `None` signs with the
    /// session's key.
    pub signer: Option<Arc<Signer>>,
    /// The binding authentication in progress on this connection.
    pub auth: Option<ServerAuth>,
    /// The binding's preauth integrity hash (3.1.1), until it completes.
    pub preauth: Option<PreauthHash>,
}

impl Channel {
    /// The channel of the connection that created the session.
    pub fn primary(conn_id: u64) -> Channel {
        Channel {
            conn_id,
            established: true,
            signer: None,
            auth: None,
            preauth: None,
        }
    }
}

impl SessionSecurity {
    /// The signer for messages on `conn_id`: the channel's own key if it has one,
    /// else the session's.
    pub fn signer_for(&self, conn_id: u64) -> Option<&Signer> {
        self.established(conn_id)
            .and_then(|c| c.signer.as_deref())
            .or(self.keys.signer())
    }

    /// The key [`SessionSecurity::signer_for`] gives, shared, to use once the
    /// session's lock is released.
    pub fn signing_key(&self, conn_id: u64) -> Option<SigningKey> {
        match self.established(conn_id).and_then(|c| c.signer.clone()) {
            Some(s) => Some(SigningKey::Channel(s)),
            None => self
                .keys
                .can_sign()
                .then(|| SigningKey::Session(self.keys.clone())),
        }
    }

    /// True if `conn_id` is an established channel.
    pub fn is_bound(&self, conn_id: u64) -> bool {
        self.established(conn_id).is_some()
    }

    /// The established channel of `conn_id`.
    fn established(&self, conn_id: u64) -> Option<&Channel> {
        self.channels
            .iter()
            .find(|c| c.conn_id == conn_id && c.established)
    }

    /// The channel of `conn_id`, established or not.
    pub fn channel_mut(&mut self, conn_id: u64) -> Option<&mut Channel> {
        self.channels.iter_mut().find(|c| c.conn_id == conn_id)
    }
}

/// A signing key held outside the session's lock (see [`SessionSecurity::signing_key`]).
pub enum SigningKey {
    /// A bound channel's own key.
    Channel(Arc<Signer>),
    /// The session's key.
    Session(Arc<Protection>),
}

impl SigningKey {
    /// The signer.
    pub fn signer(&self) -> Option<&Signer> {
        match self {
            SigningKey::Channel(s) => Some(s),
            SigningKey::Session(p) => p.signer(),
        }
    }
}

/// The signing algorithm of a connection (see [`SigningAlgorithm::for_dialect`]);
/// `negotiated` is the 3.1.1 SMB2_SIGNING_CAPABILITIES id chosen, if any.
pub fn signing_algorithm(dialect: Dialect, negotiated: Option<u16>) -> SigningAlgorithm {
    SigningAlgorithm::for_dialect(dialect, negotiated.and_then(SigningAlgorithm::from_wire))
}

/// The cipher of a connection, if encryption is possible on it.
pub fn connection_cipher(conn: &Connection) -> Option<CipherId> {
    let n = conn.negotiate.lock();
    match n.dialect {
        Dialect::SMB3_0 | Dialect::SMB3_0_2 if n.cipher != 0 => Some(CipherId::Aes128Ccm),
        Dialect::SMB3_1_1 => CipherId::from_wire(n.cipher),
        _ => None,
    }
}

/// Installs signing and (3.x) encryption keys on a session.
pub fn install_keys(conn: &Connection, sec: &mut SessionSecurity, keys: &SessionKeys) {
    let (dialect, alg) = {
        let n = conn.negotiate.lock();
        (n.dialect, n.signing_algorithm)
    };
    let alg = signing_algorithm(dialect, alg);
    let cipher = connection_cipher(conn);
    // Sealing keys of the wrong length (never from `keys::derive`) leave signing only.
    sec.keys = Arc::new(
        Protection::new(keys, Role::Server, alg, cipher)
            .unwrap_or_else(|_| Protection::signing(Signer::new(alg, &keys.signing))),
    );
    sec.signing_algorithm = Some(alg);
    sec.application_key = keys.application.clone();
    if cipher.is_some() {
        sec.cipher = conn.negotiate.lock().cipher;
    }
}

/// Signs `msg` (one compound member, header first) with the key of the session's
/// channel on `conn_id` (the session's key when the channel has none of its own).
pub fn sign(session: &Session, conn_id: u64, msg: &mut [u8]) {
    let key = session.state.lock().security.signing_key(conn_id);
    if let Some(s) = key.as_ref().and_then(SigningKey::signer) {
        s.sign(msg);
    }
}

/// True if the session can sign (has a signing key).
pub fn can_sign(session: &Session) -> bool {
    session.state.lock().security.keys.can_sign()
}

/// True if the session can encrypt.
pub fn can_encrypt(session: &Session) -> bool {
    session.state.lock().security.keys.can_seal()
}

/// Verifies the signature of one received member with the key of the session's
/// channel on `conn_id` (the session's key on a connection not bound yet: a
/// binding SESSION_SETUP is signed with it). In place: the Signature field is
/// zeroed while the signature is computed and restored after, so a GMAC check
/// copies nothing (`msg` is as it was on return).
pub fn verify(session: &Session, conn_id: u64, msg: &mut [u8]) -> bool {
    let key = session.state.lock().security.signing_key(conn_id);
    key.as_ref()
        .and_then(SigningKey::signer)
        .is_some_and(|s| s.verify_in_place(msg))
}

/// Decrypts a TRANSFORM message; returns the plaintext and the SessionId.
pub fn unseal(conn: &Connection, frame: &[u8]) -> Result<(Vec<u8>, u64), NtStatus> {
    let h =
        transform::parse_header(frame).map_err(NtStatus::malformed(NtStatus::INVALID_PARAMETER))?;
    let session = conn
        .server
        .sessions
        .get(h.session_id)
        .ok_or(NtStatus::USER_SESSION_DELETED)?;
    let keys = {
        let st = session.state.lock();
        if !st.security.is_bound(conn.id) {
            return Err(NtStatus::USER_SESSION_DELETED);
        }
        st.security.keys.clone()
    };
    // Decrypted straight into a buffer of the plaintext's size from the frame pool.
    let plain = keys
        .unseal_with(frame, |n| conn.server.frames.take_exact(n))
        .map_err(|_| NtStatus::ACCESS_DENIED)?;
    Ok((plain, h.session_id))
}

/// Encrypts a response chain for `session_id`: copies it behind room for the
/// TRANSFORM_HEADER (into a pooled buffer when large) and seals that in place. `session`
/// is used when given (a LOGOFF response is sealed after the session left the table).
pub fn seal(
    conn: &Connection,
    session_id: u64,
    session: Option<&Arc<Session>>,
    msg: Vec<u8>,
) -> Result<Vec<u8>, NtStatus> {
    let mut buf = conn
        .server
        .frames
        .take_spare(TRANSFORM_HEADER_LEN + msg.len());
    buf.resize(TRANSFORM_HEADER_LEN, 0);
    buf.extend_from_slice(&msg);
    seal_in_place(conn, session_id, session, &mut buf)?;
    Ok(buf)
}

/// Encrypts in place a response chain whose first TRANSFORM_HEADER_LEN bytes are
/// reserved for the header (see [`seal`]).
pub fn seal_in_place(
    conn: &Connection,
    session_id: u64,
    session: Option<&Arc<Session>>,
    buf: &mut [u8],
) -> Result<(), NtStatus> {
    let found;
    let session = match session.filter(|s| s.id == session_id) {
        Some(s) => s,
        None => {
            found = conn
                .server
                .sessions
                .get(session_id)
                .ok_or(NtStatus::USER_SESSION_DELETED)?;
            &found
        }
    };
    let keys = session.state.lock().security.keys.clone();
    if !keys.can_seal() {
        return Err(NtStatus::ACCESS_DENIED);
    }
    keys.seal_in_place(session_id, buf)
        .map_err(|_| NtStatus::ENCRYPTION_FAILED)
}

/// Feeds a final response into the preauth hash it belongs to.
pub(crate) fn preauth_response(conn: &Connection, target: PreauthTarget, msg: &[u8]) {
    match target {
        PreauthTarget::Connection => {
            let mut n = conn.negotiate.lock();
            if let Some(v) = n.preauth {
                let mut h = PreauthHash::from_value(v);
                h.update(msg);
                n.preauth = Some(*h.value());
            }
        }
        PreauthTarget::Session(id) => {
            if let Some(s) = conn.server.sessions.get(id) {
                if let Some(h) = s.state.lock().security.preauth.as_mut() {
                    h.update(msg);
                }
            }
        }
        PreauthTarget::Binding(id) => {
            if let Some(s) = conn.server.sessions.get(id) {
                let mut st = s.state.lock();
                if let Some(h) = st
                    .security
                    .channel_mut(conn.id)
                    .and_then(|c| c.preauth.as_mut())
                {
                    h.update(msg);
                }
            }
        }
    }
}

/// The connection's preauth hash after NEGOTIATE (3.1.1), where a session's (or a
/// binding's) own hash starts.
pub(crate) fn connection_preauth(conn: &Connection) -> Result<PreauthHash, NtStatus> {
    let v = conn
        .negotiate
        .lock()
        .preauth
        .ok_or(NtStatus::INTERNAL_ERROR)?;
    Ok(PreauthHash::from_value(v))
}

/// Starts the connection preauth hash with the NEGOTIATE request (3.1.1).
pub(crate) fn preauth_negotiate_request(conn: &Connection, msg: &[u8]) {
    let mut h = PreauthHash::new();
    h.update(msg);
    conn.negotiate.lock().preauth = Some(*h.value());
}

/// The SPNEGO NegTokenInit2 hint for the NEGOTIATE response.
pub(crate) fn negotiate_token(server: &ServerState) -> Vec<u8> {
    let kerberos = crate::kerberos::acceptor(&server.config()).is_some();
    ServerAuth::initial_token_for(&server.auth_policy(), kerberos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbx_security::keys::derive;

    fn message() -> Vec<u8> {
        let mut m = vec![0u8; 64 + 512];
        m[..4].copy_from_slice(&[0xfe, b'S', b'M', b'B']);
        m
    }

    fn signed_by(key: &SigningKey) -> Vec<u8> {
        let mut m = message();
        key.signer().expect("a signer").sign(&mut m);
        m
    }

    #[test]
    fn signing_keys_leave_the_lock_with_the_channel_they_belong_to() {
        let alg = SigningAlgorithm::AesGmac;
        let keys = derive(Dialect::SMB3_1_1, &[7u8; 16], Some(&[1u8; 64]), None);
        let mut sec = SessionSecurity::default();
        assert!(sec.signing_key(1).is_none(), "no keys yet");
        sec.keys = Arc::new(Protection::new(&keys, Role::Server, alg, None).unwrap());
        sec.channels.push(Channel::primary(1));
        let mut bound = Channel::primary(2);
        let own = Signer::new(alg, &[9u8; 16]);
        bound.signer = Some(Arc::new(Signer::new(alg, &[9u8; 16])));
        sec.channels.push(bound);

        // The creating connection (and one not bound) sign with the session's key.
        let session = sec.signing_key(1).unwrap();
        assert!(matches!(session, SigningKey::Session(_)));
        assert!(sec.keys.verify(&signed_by(&session)));
        assert!(!own.verify(&signed_by(&session)));
        assert!(matches!(sec.signing_key(3), Some(SigningKey::Session(_))));
        // A bound channel signs with its own key, which the session's does not accept.
        let channel = sec.signing_key(2).unwrap();
        assert!(matches!(channel, SigningKey::Channel(_)));
        assert!(own.verify(&signed_by(&channel)));
        assert!(!sec.keys.verify(&signed_by(&channel)));
    }
}
