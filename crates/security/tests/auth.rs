//! Full initiator <-> acceptor exchanges through `ServerAuth`.

use std::collections::HashMap;
use std::sync::Arc;

use smbx_security::auth::*;
use smbx_security::ntlm::{self, AuthenticateMessage, Initiator};
use smbx_security::spnego::{self, NegState, NegTokenInit, NegTokenResp, NegotiationToken};

struct Store(HashMap<String, [u8; 16]>);

impl CredentialStore for Store {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        self.0.get(&user.to_lowercase()).copied()
    }
}

fn policy(guest: bool, anon: bool) -> AuthPolicy {
    AuthPolicy {
        map_to_guest_bad_user: guest,
        allow_anonymous: anon,
        netbios_name: "SMBX".into(),
        netbios_domain: "WORKGROUP".into(),
        dns_name: "smbx.example".into(),
        dns_domain: "example".into(),
    }
}

fn server(guest: bool, anon: bool) -> ServerAuth {
    let mut m = HashMap::new();
    m.insert("alice".to_string(), ntlm::nt_hash("s3cret"));
    ServerAuth::new(Arc::new(Store(m)), policy(guest, anon))
}

fn resp(tok: &[u8]) -> NegTokenResp {
    match spnego::decode(tok).unwrap() {
        NegotiationToken::Resp(r) => r,
        other => panic!("expected NegTokenResp, got {other:?}"),
    }
}

/// Runs a SPNEGO exchange; returns the server's result and the client's session key.
fn spnego_exchange(
    srv: &mut ServerAuth,
    init: &mut Initiator,
    send_mic: bool,
) -> (Result<AuthStep, AuthError>, [u8; 16]) {
    let first = spnego::client_init_ntlm(&init.negotiate());
    let AuthStep::Continue(t) = srv.step(&first).unwrap() else {
        panic!("expected Continue");
    };
    let r = resp(&t);
    assert_eq!(r.neg_state, Some(NegState::AcceptIncomplete));
    assert_eq!(r.supported_mech.as_deref(), Some(spnego::OID_NTLMSSP));
    let (auth, key) = init.authenticate(&r.response_token.unwrap()).unwrap();
    let mic = if send_mic {
        init.session()
            .map(|s| s.sign_c2s(&spnego::ntlm_only_mech_types_der()).to_vec())
    } else {
        None
    };
    (srv.step(&spnego::client_resp(&auth, mic.as_deref())), key)
}

#[test]
fn spnego_right_password_same_key_and_mic() {
    let mut srv = server(false, false);
    let mut init = Initiator::new("Alice", "s3cret", "WORKGROUP");
    let (r, key) = spnego_exchange(&mut srv, &mut init, true);
    let AuthStep::Done { token, identity } = r.unwrap() else {
        panic!("expected Done");
    };
    assert_eq!(identity.kind, IdentityKind::User);
    assert_eq!(identity.user, "Alice");
    assert_eq!(identity.session_key, key.to_vec());
    let fin = resp(&token);
    assert_eq!(fin.neg_state, Some(NegState::AcceptCompleted));
    let mic = fin.mech_list_mic.expect("server mechListMIC");
    let s = init.session().unwrap();
    assert!(s.verify_s2c(&spnego::ntlm_only_mech_types_der(), &mic));
    // nothing more is accepted
    assert!(srv.step(&token).is_err());
}

#[test]
fn spnego_without_client_mic_gets_no_mic() {
    let mut srv = server(false, false);
    let mut init = Initiator::new("alice", "s3cret", "");
    let (r, _) = spnego_exchange(&mut srv, &mut init, false);
    let AuthStep::Done { token, .. } = r.unwrap() else {
        panic!()
    };
    assert_eq!(resp(&token).mech_list_mic, None);
}

#[test]
fn bad_client_mech_list_mic_fails() {
    let mut srv = server(false, false);
    let mut init = Initiator::new("alice", "s3cret", "");
    let first = spnego::client_init_ntlm(&init.negotiate());
    let AuthStep::Continue(t) = srv.step(&first).unwrap() else {
        panic!()
    };
    let (auth, _) = init
        .authenticate(&resp(&t).response_token.unwrap())
        .unwrap();
    let bogus = [1u8, 0, 0, 0, 9, 9, 9, 9, 9, 9, 9, 9, 0, 0, 0, 0];
    assert_eq!(
        srv.step(&spnego::client_resp(&auth, Some(&bogus))),
        Err(AuthError::LogonFailure)
    );
}

#[test]
fn raw_ntlmssp_exchange() {
    let mut srv = server(false, false);
    let mut init = Initiator::new("ALICE", "s3cret", "SOMEDOMAIN");
    let AuthStep::Continue(ch) = srv.step(&init.negotiate()).unwrap() else {
        panic!()
    };
    assert!(ch.starts_with(ntlm::SIGNATURE), "raw answer to raw request");
    let c = ntlm::ChallengeMessage::decode(&ch).unwrap();
    let ti = ntlm::AvPairs::decode(&c.target_info).unwrap();
    assert!(ti.timestamp().is_some());
    assert_eq!(
        ti.get(ntlm::av::NB_COMPUTER_NAME),
        Some(&smbx_wire::codec::utf16le("SMBX")[..])
    );
    assert_ne!(c.flags & ntlm::NEGOTIATE_KEY_EXCH, 0);
    let (auth, key) = init.authenticate(&ch).unwrap();
    let AuthStep::Done { token, identity } = srv.step(&auth).unwrap() else {
        panic!()
    };
    assert!(token.is_empty());
    assert_eq!(identity.session_key, key.to_vec());
}

#[test]
fn wrong_password_is_logon_failure_even_with_guest_mapping() {
    for guest in [false, true] {
        let mut srv = server(guest, true);
        let mut init = Initiator::new("alice", "wrong", "");
        let (r, _) = spnego_exchange(&mut srv, &mut init, true);
        assert_eq!(r, Err(AuthError::LogonFailure));
    }
}

#[test]
fn unknown_user_by_policy() {
    let mut srv = server(false, false);
    let mut init = Initiator::new("bob", "x", "");
    assert_eq!(
        spnego_exchange(&mut srv, &mut init, true).0,
        Err(AuthError::LogonFailure)
    );

    let mut srv = server(true, false);
    let mut init = Initiator::new("bob", "x", "");
    let AuthStep::Done { token, identity } = spnego_exchange(&mut srv, &mut init, true).0.unwrap()
    else {
        panic!()
    };
    assert_eq!(identity.kind, IdentityKind::Guest);
    assert!(identity.session_key.is_empty());
    assert_eq!(resp(&token).neg_state, Some(NegState::AcceptCompleted));
}

#[test]
fn anonymous_by_policy() {
    let mut srv = server(false, true);
    let mut init = Initiator::anonymous();
    let AuthStep::Done { identity, .. } = spnego_exchange(&mut srv, &mut init, false).0.unwrap()
    else {
        panic!()
    };
    assert_eq!(identity.kind, IdentityKind::Anonymous);
    assert!(identity.session_key.is_empty());

    let mut srv = server(true, false);
    let mut init = Initiator::anonymous();
    assert_eq!(
        spnego_exchange(&mut srv, &mut init, false).0,
        Err(AuthError::LogonFailure)
    );
}

#[test]
fn ntlmv1_response_rejected() {
    let mut srv = server(true, true);
    let mut init = Initiator::new("alice", "s3cret", "");
    let AuthStep::Continue(ch) = srv.step(&init.negotiate()).unwrap() else {
        panic!()
    };
    let (auth, _) = init.authenticate(&ch).unwrap();
    let mut a = AuthenticateMessage::decode(&auth).unwrap();
    a.nt_response = vec![0x11; 24];
    a.lm_response = vec![0x22; 24];
    a.mic = None;
    assert_eq!(srv.step(&a.encode()), Err(AuthError::LogonFailure));
}

/// The NTLMv2_RESPONSE NetApp's "net diag" sends (Samba bug 14932, as in smbtorture's
/// smb2.session.ntlmssp_bug14932): its AvPairs start with AvId 0xa211, AvLen 0x8108,
/// far past the end of the 95-byte response.
const NETAPP_NT_RESPONSE: &str = concat!(
    "abababababababababababababababab",
    "0101000000000000",
    "3f3f3f3f3f3f3f3f",
    "b8823af1b3dd0815",
    "0000000011a20881",
    "503822782b9447fe54947bff17275ab4f418badc2c38fd5bfb0ec1851ecc92bb",
    "9bb1c4d55314ff8c7649f5459019a2",
);

#[test]
fn malformed_ntlmv2_client_challenge_is_invalid_parameter() {
    let nt = hex::decode(NETAPP_NT_RESPONSE).unwrap();
    assert_eq!(nt.len(), 95);
    assert!(ntlm::Ntlmv2Response::decode(&nt).is_err());
    // Known user, unknown user mapped to guest: the response is refused as malformed
    // before any password check (INVALID_PARAMETER, not LOGON_FAILURE).
    for user in ["alice", "mallory"] {
        let mut srv = server(true, false);
        let mut init = Initiator::new(user, "s3cret", "");
        let AuthStep::Continue(ch) = srv.step(&init.negotiate()).unwrap() else {
            panic!()
        };
        let (auth, _) = init.authenticate(&ch).unwrap();
        let mut a = AuthenticateMessage::decode(&auth).unwrap();
        a.nt_response = nt.clone();
        a.lm_response = vec![0; 24];
        a.mic = None;
        assert_eq!(srv.step(&a.encode()), Err(AuthError::InvalidToken));
    }
    // Between NTLMv1 and the smallest NTLMv2 response: malformed too.
    let mut srv = server(false, false);
    let mut init = Initiator::new("alice", "s3cret", "");
    let AuthStep::Continue(ch) = srv.step(&init.negotiate()).unwrap() else {
        panic!()
    };
    let (auth, _) = init.authenticate(&ch).unwrap();
    let mut a = AuthenticateMessage::decode(&auth).unwrap();
    a.nt_response = vec![0x11; 30];
    a.mic = None;
    assert_eq!(srv.step(&a.encode()), Err(AuthError::InvalidToken));
}

#[test]
fn tampered_mic_rejected() {
    let mut srv = server(false, false);
    let mut init = Initiator::new("alice", "s3cret", "");
    let AuthStep::Continue(ch) = srv.step(&init.negotiate()).unwrap() else {
        panic!()
    };
    let (mut auth, _) = init.authenticate(&ch).unwrap();
    auth[ntlm::MIC_OFFSET] ^= 0x80;
    assert_eq!(srv.step(&auth), Err(AuthError::LogonFailure));
}

#[test]
fn kerberos_first_falls_back_to_ntlm_with_mic() {
    let mut srv = server(false, false);
    let mut init = Initiator::new("alice", "s3cret", "");
    let offer = NegTokenInit {
        mech_types: vec![
            spnego::OID_MS_KRB5.to_vec(),
            spnego::OID_KRB5.to_vec(),
            spnego::OID_NTLMSSP.to_vec(),
        ],
        mech_token: Some(vec![0x60, 0x00]),
        ..Default::default()
    };
    let types_der = offer.mech_types_der();
    let AuthStep::Continue(t) = srv.step(&spnego::encode_init(&offer)).unwrap() else {
        panic!()
    };
    let r = resp(&t);
    assert_eq!(r.neg_state, Some(NegState::AcceptIncomplete));
    assert_eq!(r.supported_mech.as_deref(), Some(spnego::OID_NTLMSSP));
    assert_eq!(r.response_token, None);
    let AuthStep::Continue(t) = srv
        .step(&spnego::client_resp(&init.negotiate(), None))
        .unwrap()
    else {
        panic!()
    };
    let (auth, key) = init
        .authenticate(&resp(&t).response_token.unwrap())
        .unwrap();
    let mic = init.session().unwrap().sign_c2s(&types_der);
    let AuthStep::Done { token, identity } =
        srv.step(&spnego::client_resp(&auth, Some(&mic))).unwrap()
    else {
        panic!()
    };
    assert_eq!(identity.session_key, key.to_vec());
    let smic = resp(&token).mech_list_mic.unwrap();
    assert!(init.session().unwrap().verify_s2c(&types_der, &smic));
}

#[test]
fn garbage_and_out_of_order_tokens() {
    let mut srv = server(true, true);
    assert!(matches!(srv.step(b"hello"), Err(AuthError::InvalidToken)));
    let mut srv = server(true, true);
    assert!(srv.step(&spnego::client_resp(b"NTLMSSP\0", None)).is_err());
    let mut srv = server(true, true);
    let no_ntlm = NegTokenInit {
        mech_types: vec![spnego::OID_KRB5.to_vec()],
        ..Default::default()
    };
    assert_eq!(
        srv.step(&spnego::encode_init(&no_ntlm)),
        Err(AuthError::InvalidToken)
    );
}

#[test]
fn initial_token_is_negtokeninit2() {
    let t = ServerAuth::initial_token(&policy(false, false));
    let NegotiationToken::Init(i) = spnego::decode(&t).unwrap() else {
        panic!()
    };
    assert_eq!(i.mech_types, vec![spnego::OID_NTLMSSP.to_vec()]);
    assert_eq!(
        i.neg_hints.unwrap().hint_name.as_deref(),
        Some("not_defined_in_RFC4178@please_ignore")
    );
}
