//! SPNEGO mechanism choice with Kerberos configured, without a KDC: which mechanism the
//! acceptor picks from the client's list, what it answers, and how a Kerberos failure is
//! reported. (The full Kerberos exchanges run against a real MIT KDC in
//! tests/interop/test_kerberos.py.)

use std::sync::Arc;

use smbx_security::auth::*;
use smbx_security::kerberos::{is_krb5_oid, KerberosAcceptor};
use smbx_security::ntlm::{self, Initiator};
use smbx_security::spnego::{self, NegState, NegTokenInit, NegotiationToken};

struct NoUsers;

impl CredentialStore for NoUsers {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        (user == "alice").then(|| ntlm::nt_hash("s3cret"))
    }
}

fn server(keytab: &str) -> ServerAuth {
    ServerAuth::new(Arc::new(NoUsers), AuthPolicy::default())
        .with_kerberos(Some(KerberosAcceptor::new(Some(keytab.into()))))
}

fn init(mechs: &[&[u8]], token: Option<Vec<u8>>) -> Vec<u8> {
    spnego::encode_init(&NegTokenInit {
        mech_types: mechs.iter().map(|m| m.to_vec()).collect(),
        mech_token: token,
        ..Default::default()
    })
}

#[test]
fn the_negotiate_hint_lists_kerberos_only_when_configured() {
    let mechs = |tok: Vec<u8>| match spnego::decode(&tok).unwrap() {
        NegotiationToken::Init(i) => i.mech_types,
        other => panic!("{other:?}"),
    };
    let p = AuthPolicy::default();
    assert_eq!(
        mechs(ServerAuth::initial_token_for(&p, false)),
        vec![spnego::OID_NTLMSSP.to_vec()]
    );
    let with = mechs(ServerAuth::initial_token_for(&p, true));
    assert_eq!(with.len(), 3);
    assert!(is_krb5_oid(&with[0]) && is_krb5_oid(&with[1]));
    assert_eq!(with[2], spnego::OID_NTLMSSP);
}

#[test]
fn ntlm_still_works_beside_kerberos() {
    let mut s = server("/nonexistent/smbx.keytab");
    let mut c = Initiator::new("alice", "s3cret", "");
    let first = init(&[spnego::OID_NTLMSSP], Some(c.negotiate()));
    let AuthStep::Continue(tok) = s.step(&first).unwrap() else {
        panic!("expected a challenge")
    };
    assert_eq!(s.mechanism(), "ntlm");
    let NegotiationToken::Resp(r) = spnego::decode(&tok).unwrap() else {
        panic!()
    };
    let (auth, _key) = c.authenticate(&r.response_token.unwrap()).unwrap();
    let mic = c
        .session()
        .map(|x| x.sign_c2s(&spnego::ntlm_only_mech_types_der()).to_vec());
    let AuthStep::Done { identity, .. } =
        s.step(&spnego::client_resp(&auth, mic.as_deref())).unwrap()
    else {
        panic!("expected success")
    };
    assert_eq!(identity.user, "alice");
    assert!(identity.kerberos.is_none());
}

#[test]
fn a_client_preferring_kerberos_gets_kerberos() {
    // Kerberos first without an optimistic token: the server asks for the AP-REQ.
    let mut s = server("/nonexistent/smbx.keytab");
    let tok = init(&[spnego::OID_MS_KRB5, spnego::OID_NTLMSSP], None);
    match s.step(&tok) {
        // The keytab is missing, so acquiring the acceptor credentials may fail at once.
        Err(AuthError::LogonFailure) => {
            assert!(s
                .failure_detail()
                .unwrap()
                .contains("/nonexistent/smbx.keytab"));
        }
        Ok(AuthStep::Continue(out)) => {
            let NegotiationToken::Resp(r) = spnego::decode(&out).unwrap() else {
                panic!()
            };
            assert_eq!(r.neg_state, Some(NegState::AcceptIncomplete));
            assert_eq!(r.supported_mech.as_deref(), Some(spnego::OID_MS_KRB5));
            assert_eq!(s.mechanism(), "kerberos");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_garbage_ap_req_is_a_logon_failure_with_a_reason() {
    let mut s = server("/nonexistent/smbx.keytab");
    let tok = init(
        &[spnego::OID_KRB5],
        Some(vec![0x60, 0x03, 0x06, 0x01, 0x00]),
    );
    assert_eq!(s.step(&tok).unwrap_err(), AuthError::LogonFailure);
    assert!(s.failure_detail().is_some_and(|d| d.contains("Kerberos")));
    // The exchange is over: nothing more is accepted.
    assert!(s.step(&tok).is_err());
}

#[test]
fn without_kerberos_configured_a_kerberos_only_client_is_refused() {
    let mut s = ServerAuth::new(Arc::new(NoUsers), AuthPolicy::default());
    let tok = init(&[spnego::OID_KRB5], Some(vec![1, 2, 3]));
    assert_eq!(s.step(&tok).unwrap_err(), AuthError::InvalidToken);
}
